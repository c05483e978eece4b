/* grad_scaler.c -- ct_grad_scaler (ctorch/amp.h): torch.amp.GradScaler on
 * the cpu.  The fused unscale walks every gradient of an optimizer in one
 * OpenMP pass over fixed-size chunks of all of them (torch's
 * _amp_foreach_non_finite_check_and_unscale_): each element is checked for
 * inf/NaN and multiplied by 1/scale in its own precision (the float32
 * 1/scale widened for float64 gradients), as torch's kernel does; update is torch's
 * _amp_update_scale_ on a float32 scale and an integer tracker. */
#include <math.h>
#include <stdlib.h>

#include "optim_impl.h"
#include "ctorch/amp.h"

enum { ST_READY = 0, ST_UNSCALED, ST_STEPPED };

typedef struct opt_state {
    const ct_optimizer *opt;
    int stage;
    bool found_inf;
} opt_state;

struct ct_grad_scaler {
    bool enabled;
    float scale;
    int32_t tracker;
    double growth_factor, backoff_factor;
    int64_t growth_interval;
    opt_state *os;
    int nos, cap;
};

static ct_status check_hp(double init, double growth, double backoff, int64_t interval) {
    if (!(init > 0) || !isfinite(init) || !isfinite((float)init))
        return ct__error_status(CT_ERR_ARG, "GradScaler: init_scale must be a finite float32 > 0, got %g", init);
    if (!(growth > 1.0))
        return ct__error_status(CT_ERR_ARG, "GradScaler: The growth factor must be > 1.0, got %g", growth);
    if (!(backoff < 1.0) || !(backoff > 0))
        return ct__error_status(CT_ERR_ARG, "GradScaler: The backoff factor must be < 1.0 (and > 0), got %g",
                                backoff);
    if (interval < 1 || interval > INT32_MAX)
        return ct__error_status(CT_ERR_ARG, "GradScaler: growth_interval must be in [1, 2^31), got %lld",
                                (long long)interval);
    return CT_OK;
}

ct_grad_scaler *ct_grad_scaler_new(double init_scale, double growth_factor, double backoff_factor,
                                   int64_t growth_interval, bool enabled) {
    if (enabled && check_hp(init_scale, growth_factor, backoff_factor, growth_interval)) return NULL;
    ct_grad_scaler *s = calloc(1, sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "GradScaler: out of memory");
    s->enabled = enabled;
    s->scale = (float)init_scale;
    s->growth_factor = growth_factor;
    s->backoff_factor = backoff_factor;
    s->growth_interval = growth_interval;
    return s;
}

void ct_grad_scaler_free(ct_grad_scaler *s) {
    if (!s) return;
    free(s->os);
    free(s);
}

bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s) { return s && s->enabled; }
double ct_grad_scaler_get_scale(const ct_grad_scaler *s) { return s && s->enabled ? (double)s->scale : 1.0; }
int64_t ct_grad_scaler_get_growth_tracker(const ct_grad_scaler *s) { return s ? s->tracker : 0; }

ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, ct_tensor *loss) {
    if (!s) return ct__error(CT_ERR_NULL, "GradScaler.scale: the scaler is NULL");
    CT_NULLCHECK(loss);
    if (!s->enabled) return ct_to_dtype(loss, ct_get_dtype(loss));
    ct_scope sc = ct_scope_begin();
    ct_tensor *r = ct_keep(ct_mul(loss, ct_scalar((double)s->scale, CT_F32)));
    ct_scope_end(sc);
    return r;
}

static opt_state *state_of(ct_grad_scaler *s, const ct_optimizer *opt) {
    for (int k = 0; k < s->nos; k++)
        if (s->os[k].opt == opt) return &s->os[k];
    if (s->nos == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4;
        opt_state *n = realloc(s->os, sizeof *n * (size_t)cap);
        if (!n) return ct__error(CT_ERR_OOM, "GradScaler: out of memory");
        s->os = n;
        s->cap = cap;
    }
    s->os[s->nos] = (opt_state){opt, ST_READY, false};
    return &s->os[s->nos++];
}

/* ---- the fused unscale ------------------------------------------------------- */
typedef struct seg {
    void *p;
    int64_t n;
    ct_dtype dt;
} seg;

#define CHUNK 32768

static bool unscale_chunk(const seg *g, int64_t lo, int64_t hi, float inv) {
    bool found = false;
    if (g->dt == CT_F32) {
        float *p = g->p;
        for (int64_t i = lo; i < hi; i++) {
            float v = p[i];
            found |= !isfinite(v);
            p[i] = inv == 1.f ? v : v * inv;
        }
    } else if (g->dt == CT_F64) {
        double *p = g->p;
        for (int64_t i = lo; i < hi; i++) {
            double v = p[i];
            found |= !isfinite(v);
            p[i] = inv == 1.f ? v : v * (double)inv;
        }
    }
    return found;
}

/* 1/scale on every gradient of opt; true in *found when any is inf/NaN */
static ct_status unscale_grads(ct_grad_scaler *s, ct_optimizer *opt, bool *found) {
    float inv = (float)(1.0 / (double)s->scale); /* torch: scale.double().reciprocal().float() */
    *found = false;
    int np = 0, ng = ct_optim_num_groups(opt);
    for (int g = 0; g < ng; g++) np += ct_optim_group_params(opt, g, NULL, 0);
    ct_tensor **ps = malloc(sizeof *ps * (size_t)(np > 0 ? np : 1));
    seg *segs = malloc(sizeof *segs * (size_t)(np > 0 ? np : 1));
    int64_t *first = malloc(sizeof *first * (size_t)(np + 1)); /* first chunk of each segment */
    if (!ps || !segs || !first) {
        free(ps); free(segs); free(first);
        return ct__error_status(CT_ERR_OOM, "GradScaler.unscale_: out of memory");
    }
    int at = 0;
    for (int g = 0; g < ng; g++) at += ct_optim_group_params(opt, g, ps + at, np - at);
    int ns = 0;
    ct_status st = CT_OK;
    bool slow_found = false;
    for (int k = 0; k < np && !st; k++) {
        ct_tensor *gr = ct_grad(ps[k]);
        if (!gr) continue;
        ct_dtype dt = ct_get_dtype(gr);
        if (dt != CT_F32 && dt != CT_F64) { /* the optimizers take float32 / float64 parameters */
            st = ct__error_status(CT_ERR_DTYPE, "GradScaler.unscale_: Attempting to unscale %s gradients "
                                  "(float32 or float64 expected)", ct_dtype_name(dt));
            break;
        }
        ct__bump_version(gr);
        if (ct__has_host_data(gr) && ct__is_contiguous(gr)) {
            segs[ns++] = (seg){ct__ptr(gr), ct_numel(gr), dt};
            continue;
        }
        /* another device, or a strided gradient: the same with ops */
        ct_scope sc = ct_scope_begin();
        ct_tensor *ok = ct_all(ct_isfinite(gr), NULL, 0, false);
        if (!ok || !ct_mul_scalar_(gr, (double)inv)) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
        else slow_found |= ct_item(ok) == 0;
        ct_scope_end(sc);
    }
    if (!st) {
        int64_t nch = 0;
        for (int k = 0; k < ns; k++) {
            first[k] = nch;
            nch += (segs[k].n + CHUNK - 1) / CHUNK;
        }
        first[ns] = nch;
        int any = 0;
#pragma omp parallel for schedule(static) reduction(| : any) if (nch > 1)
        for (int64_t c = 0; c < nch; c++) {
            int lo = 0, hi = ns - 1; /* the segment holding chunk c */
            while (lo < hi) {
                int mid = (lo + hi + 1) / 2;
                if (first[mid] <= c) lo = mid;
                else hi = mid - 1;
            }
            int64_t b = (c - first[lo]) * CHUNK, e = b + CHUNK < segs[lo].n ? b + CHUNK : segs[lo].n;
            any |= unscale_chunk(&segs[lo], b, e, inv);
        }
        *found = any || slow_found;
    }
    free(ps);
    free(segs);
    free(first);
    return st;
}

ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt) {
    if (!s) return ct__error_status(CT_ERR_NULL, "GradScaler.unscale_: the scaler is NULL");
    if (!opt) return ct__error_status(CT_ERR_NULL, "GradScaler.unscale_: the optimizer is NULL");
    if (!s->enabled) return CT_OK;
    opt_state *o = state_of(s, opt);
    if (!o) return ct_last_error_code();
    if (o->stage == ST_UNSCALED)
        return ct__error_status(CT_ERR_RUNTIME, "GradScaler.unscale_: unscale_() has already been called on "
                                "this optimizer since the last update().");
    if (o->stage == ST_STEPPED)
        return ct__error_status(CT_ERR_RUNTIME, "GradScaler.unscale_: unscale_() is being called after step().");
    bool found;
    ct_status st = unscale_grads(s, opt, &found);
    if (st) return st;
    o->found_inf = found;
    o->stage = ST_UNSCALED;
    return CT_OK;
}

ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt, bool *stepped) {
    if (stepped) *stepped = false;
    if (!s) return ct__error_status(CT_ERR_NULL, "GradScaler.step: the scaler is NULL");
    if (!opt) return ct__error_status(CT_ERR_NULL, "GradScaler.step: the optimizer is NULL");
    if (!s->enabled) {
        ct_status st = ct_optim_step(opt);
        if (!st && stepped) *stepped = true;
        return st;
    }
    opt_state *o = state_of(s, opt);
    if (!o) return ct_last_error_code();
    if (o->stage == ST_STEPPED)
        return ct__error_status(CT_ERR_RUNTIME, "GradScaler.step: step() has already been called since the "
                                "last update().");
    if (o->stage == ST_READY) {
        ct_status st = ct_grad_scaler_unscale_(s, opt);
        if (st) return st;
        o = state_of(s, opt); /* unscale_ may have grown the array */
    }
    if (!o->found_inf) {
        ct_status st = ct_optim_step(opt);
        if (st) return st;
        if (stepped) *stepped = true;
    }
    o->stage = ST_STEPPED;
    return CT_OK;
}

ct_status ct_grad_scaler_update(ct_grad_scaler *s) {
    if (!s) return ct__error_status(CT_ERR_NULL, "GradScaler.update: the scaler is NULL");
    if (!s->enabled) return CT_OK;
    if (s->nos == 0)
        return ct__error_status(CT_ERR_RUNTIME, "GradScaler.update: No inf checks were recorded prior to update.");
    bool found = false;
    for (int k = 0; k < s->nos; k++) found |= s->os[k].found_inf;
    /* torch's _amp_update_scale_: float32 scale, factors applied in double */
    if (found) {
        s->scale = (float)((double)s->scale * s->backoff_factor);
        s->tracker = 0;
    } else {
        int32_t ok = s->tracker + 1;
        if (ok == s->growth_interval) {
            float ns = (float)((double)s->scale * s->growth_factor);
            if (isfinite(ns)) s->scale = ns;
            s->tracker = 0;
        } else {
            s->tracker = ok;
        }
    }
    s->nos = 0;
    return CT_OK;
}

ct_status ct_grad_scaler_update_to(ct_grad_scaler *s, double new_scale) {
    if (!s) return ct__error_status(CT_ERR_NULL, "GradScaler.update: the scaler is NULL");
    if (!s->enabled) return CT_OK;
    if (!(new_scale > 0) || !isfinite((float)new_scale))
        return ct__error_status(CT_ERR_ARG, "GradScaler.update: new_scale must be a finite float32 > 0, got %g",
                                new_scale);
    s->scale = (float)new_scale;
    s->nos = 0;
    return CT_OK;
}

/* ---- state dict -------------------------------------------------------------- */
ct_sample *ct_grad_scaler_state_dict(const ct_grad_scaler *s) {
    if (!s) return ct__error(CT_ERR_NULL, "GradScaler.state_dict: the scaler is NULL");
    ct_sample *sd = ct_sample_new();
    if (!sd || !s->enabled) return sd;
    ct_scope sc = ct_scope_begin();
    ct_status st = ct_sample_set(sd, "scale", ct_scalar((double)s->scale, CT_F32));
    if (!st) st = ct_sample_set(sd, "growth_factor", ct_scalar(s->growth_factor, CT_F64));
    if (!st) st = ct_sample_set(sd, "backoff_factor", ct_scalar(s->backoff_factor, CT_F64));
    if (!st) st = ct_sample_set(sd, "growth_interval", ct_scalar((double)s->growth_interval, CT_I64));
    if (!st) st = ct_sample_set(sd, "_growth_tracker", ct_scalar((double)s->tracker, CT_I64));
    ct_scope_end(sc);
    if (st) {
        ct_sample_free(sd);
        return NULL;
    }
    return sd;
}

static ct_status sd_num(const ct_sample *sd, const char *key, double *v) {
    ct_tensor *t = ct_sample_get(sd, key);
    if (!t) return ct__error_status(CT_ERR_ARG, "GradScaler.load_state_dict: missing key \"%s\"", key);
    if (ct_numel(t) != 1)
        return ct__error_status(CT_ERR_SHAPE, "GradScaler.load_state_dict: \"%s\" must hold one value, got %s",
                                key, ct__tshape(t));
    *v = ct_item(t);
    return CT_OK;
}

ct_status ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_sample *sd) {
    if (!s) return ct__error_status(CT_ERR_NULL, "GradScaler.load_state_dict: the scaler is NULL");
    if (!sd) return ct__error_status(CT_ERR_NULL, "GradScaler.load_state_dict: the state dict is NULL");
    if (!s->enabled) return CT_OK;
    if (ct_sample_count(sd) == 0)
        return ct__error_status(CT_ERR_ARG, "GradScaler.load_state_dict: The source state dict is empty, "
                                "possibly because it was saved from a disabled instance of GradScaler.");
    double scale = 0, gf = 0, bf = 0, gi = 0, tr = 0;
    ct_status st = sd_num(sd, "scale", &scale);
    if (!st) st = sd_num(sd, "growth_factor", &gf);
    if (!st) st = sd_num(sd, "backoff_factor", &bf);
    if (!st) st = sd_num(sd, "growth_interval", &gi);
    if (!st) st = sd_num(sd, "_growth_tracker", &tr);
    if (st) return st;
    if (gi != floor(gi) || tr != floor(tr) || tr < 0 || tr >= gi)
        return ct__error_status(CT_ERR_ARG, "GradScaler.load_state_dict: growth_interval %g / _growth_tracker %g "
                                "must be integers with 0 <= tracker < interval", gi, tr);
    if ((st = check_hp(scale, gf, bf, (int64_t)gi))) return st;
    s->scale = (float)scale;
    s->growth_factor = gf;
    s->backoff_factor = bf;
    s->growth_interval = (int64_t)gi;
    s->tracker = (int32_t)tr;
    return CT_OK;
}
