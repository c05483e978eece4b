/* optim.c -- the optimizer object (parameter groups, hyperparameters by
 * name, per-parameter state, state dicts) and the first-order optimizers:
 * SGD, Adam, AdamW, Adamax, NAdam, RAdam, RMSprop, Adagrad, Adadelta.
 *
 * Every optimizer is a per-parameter update run by one shared loop
 * (for_each_param: the scope, the grad check, the error path).  The update
 * is the reference op-by-op form (public in-place ops, the exact sequence of
 * torch.optim's _single_tensor_* functions, so results match torch's); SGD,
 * Adam and AdamW take theirs from the op layer (src/ops/fused_optim.h),
 * which with "fused" = 1 also runs a group's multi-tensor form: the table
 * ops sgd_step / adam_step, one loop over all the group's contiguous
 * parameters (kernel: src/backend/cpu/optim.c). */
#include <math.h>
#include <stdio.h>

#include "optim_impl.h"
#include "../ops/fused_optim.h"   /* SGD, Adam, AdamW: the updates and fused steps */
#include "../ops/profiler_impl.h" /* the step's profiler event */

/* ---- the object ------------------------------------------------------------ */
int ct__optim_hp_index(const ct_optimizer *o, const char *name) {
    if (!o || !name) return -1;
    for (int i = 0; i < o->k->nhp; i++)
        if (strcmp(o->k->hp[i], name) == 0) return i;
    return -1;
}

static ct_status check_params(const char *who, ct_optimizer *o, ct_tensor *const *params, int n) {
    if (n < 0 || (n > 0 && !params))
        return ct__error_status(CT_ERR_NULL, "%s: params is NULL", who);
    for (int i = 0; i < n; i++) {
        ct_tensor *p = params[i];
        if (!p) return ct__error_status(CT_ERR_NULL, "%s: parameter %d is NULL", who, i);
        if (!ct_dtype_is_floating(p->dtype) || (p->dtype != CT_F32 && p->dtype != CT_F64))
            return ct__error_status(CT_ERR_DTYPE, "%s: parameter %d has dtype %s (float32 or "
                                    "float64 expected)", who, i, ct_dtype_name(p->dtype));
        if (!ct_is_leaf(p))
            return ct__error_status(CT_ERR_ARG, "%s: can't optimize a non-leaf Tensor (parameter %d)",
                                    who, i);
        for (int j = 0; j < o->np; j++)
            if (o->ps[j].p == p)
                return ct__error_status(CT_ERR_ARG, "%s: some parameters appear in more than one "
                                        "parameter group (parameter %d)", who, i);
        for (int j = 0; j < i; j++)
            if (params[j] == p)
                return ct__error_status(CT_ERR_ARG, "%s: parameter %d appears twice in a group", who, i);
    }
    return CT_OK;
}

static int add_group(ct_optimizer *o, ct_tensor *const *params, int n) {
    const char *who = o->k->name;
    if (check_params(who, o, params, n)) return -1;
    opt_group *ng = realloc(o->g, sizeof *ng * (size_t)(o->ng + 1));
    if (!ng) { ct__error(CT_ERR_OOM, "%s: out of memory", who); return -1; }
    o->g = ng;
    opt_pstate *nps = realloc(o->ps, sizeof *nps * (size_t)(o->np + n + 1));
    if (!nps) { ct__error(CT_ERR_OOM, "%s: out of memory", who); return -1; }
    o->ps = nps;
    opt_group *g = &o->g[o->ng];
    memset(g, 0, sizeof *g);
    g->idx = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!g->idx) { ct__error(CT_ERR_OOM, "%s: out of memory", who); return -1; }
    g->n = n;
    memcpy(g->v, o->def, sizeof g->v);
    g->initial_lr = NAN;
    for (int i = 0; i < n; i++) {
        opt_pstate *s = &o->ps[o->np];
        memset(s, 0, sizeof *s);
        s->p = ct_retain(params[i]);
        g->idx[i] = o->np++;
    }
    return o->ng++;
}

ct_optimizer *ct__optim_new(const opt_kind *k, const double *def, ct_tensor *const *params, int n) {
    ct_optimizer *o = calloc(1, sizeof *o);
    if (!o) return ct__error(CT_ERR_OOM, "%s: out of memory", k->name);
    o->k = k;
    memcpy(o->def, def, sizeof(double) * (size_t)k->nhp);
    if (n <= 0) {
        free(o);
        return ct__error(CT_ERR_ARG, "%s: optimizer got an empty parameter list", k->name);
    }
    if (add_group(o, params, n) < 0) { ct_optim_free(o); return NULL; }
    return o;
}

void ct_optim_free(ct_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->np; i++) {
        for (int j = 0; j < o->ps[i].nst; j++) ct_release(o->ps[i].st[j]);
        ct_release(o->ps[i].p);
    }
    for (int g = 0; g < o->ng; g++) free(o->g[g].idx);
    if (o->extra_free) o->extra_free(o->extra);
    ct__optim_compiled_free(o->cs);
    free(o->ps);
    free(o->g);
    free(o);
}

const char *ct_optim_name(const ct_optimizer *o) { return o ? o->k->name : NULL; }
int ct_optim_num_groups(const ct_optimizer *o) { return o ? o->ng : 0; }

int ct_optim_group_params(const ct_optimizer *o, int group, ct_tensor **params, int cap) {
    if (!o || group < 0 || group >= o->ng) {
        ct__error(CT_ERR_INDEX, "optim_group_params: group %d out of range", group);
        return -1;
    }
    const opt_group *g = &o->g[group];
    for (int i = 0; i < g->n && i < cap; i++) params[i] = o->ps[g->idx[i]].p;
    return g->n;
}

static ct_status check_hp(const ct_optimizer *o, const char *name, double v) {
    const char *who = o->k->name;
    if (isnan(v)) return ct__error_status(CT_ERR_ARG, "%s: invalid %s: nan", who, name);
    if (strcmp(name, "lr") == 0 && v < 0)
        return ct__error_status(CT_ERR_ARG, "%s: invalid learning rate: %g", who, v);
    if (strcmp(name, "eps") == 0 && v < 0)
        return ct__error_status(CT_ERR_ARG, "%s: invalid epsilon value: %g", who, v);
    if (strcmp(name, "weight_decay") == 0 && v < 0)
        return ct__error_status(CT_ERR_ARG, "%s: invalid weight_decay value: %g", who, v);
    if (strcmp(name, "momentum") == 0 && v < 0)
        return ct__error_status(CT_ERR_ARG, "%s: invalid momentum value: %g", who, v);
    if ((strcmp(name, "beta1") == 0 || strcmp(name, "beta2") == 0) && !(v >= 0 && v < 1))
        return ct__error_status(CT_ERR_ARG, "%s: invalid %s parameter: %g (must be in [0, 1))",
                                who, name, v);
    if ((strcmp(name, "rho") == 0) && !(v >= 0 && v <= 1))
        return ct__error_status(CT_ERR_ARG, "%s: invalid rho value: %g", who, v);
    return CT_OK;
}

int ct_optim_add_param_group(ct_optimizer *o, ct_tensor *const *params, int n,
                             const char *const *names, const double *values, int nh) {
    if (!o) { ct__error(CT_ERR_NULL, "optim_add_param_group: optimizer is NULL"); return -1; }
    if (o->extra) {
        ct__error(CT_ERR_ARG, "%s doesn't support per-parameter options (parameter groups)",
                  o->k->name);
        return -1;
    }
    if (nh > 0 && (!names || !values)) {
        ct__error(CT_ERR_NULL, "%s: add_param_group: names or values is NULL", o->k->name);
        return -1;
    }
    for (int i = 0; i < nh; i++) {
        if (ct__optim_hp_index(o, names[i]) < 0) {
            ct__error(CT_ERR_ARG, "%s: add_param_group: unknown hyperparameter '%s'", o->k->name,
                      names[i] ? names[i] : "(null)");
            return -1;
        }
        if (check_hp(o, names[i], values[i])) return -1;
    }
    int gi = add_group(o, params, n);
    if (gi < 0) return -1;
    for (int i = 0; i < nh; i++) o->g[gi].v[ct__optim_hp_index(o, names[i])] = values[i];
    return gi;
}

bool ct_optim_has(const ct_optimizer *o, const char *name) {
    return ct__optim_hp_index(o, name) >= 0;
}

double ct_optim_get(const ct_optimizer *o, int group, const char *name) {
    if (!o) { ct__error(CT_ERR_NULL, "optim_get: optimizer is NULL"); return NAN; }
    if (group < 0 || group >= o->ng) {
        ct__error(CT_ERR_INDEX, "%s: param group %d out of range (%d groups)", o->k->name, group, o->ng);
        return NAN;
    }
    int h = ct__optim_hp_index(o, name);
    if (h < 0) {
        ct__error(CT_ERR_ARG, "%s: no hyperparameter '%s'", o->k->name, name ? name : "(null)");
        return NAN;
    }
    return o->g[group].v[h];
}

ct_status ct_optim_set(ct_optimizer *o, int group, const char *name, double value) {
    if (!o) return ct__error_status(CT_ERR_NULL, "optim_set: optimizer is NULL");
    if (group < 0 || group >= o->ng)
        return ct__error_status(CT_ERR_INDEX, "%s: param group %d out of range (%d groups)",
                                o->k->name, group, o->ng);
    int h = ct__optim_hp_index(o, name);
    if (h < 0)
        return ct__error_status(CT_ERR_ARG, "%s: no hyperparameter '%s'", o->k->name,
                                name ? name : "(null)");
    ct_status st = check_hp(o, name, value);
    if (st) return st;
    o->g[group].v[h] = value;
    return CT_OK;
}

ct_status ct_optim_set_all(ct_optimizer *o, const char *name, double value) {
    if (!o) return ct__error_status(CT_ERR_NULL, "optim_set_all: optimizer is NULL");
    int h = ct__optim_hp_index(o, name);
    if (h < 0)
        return ct__error_status(CT_ERR_ARG, "%s: no hyperparameter '%s'", o->k->name,
                                name ? name : "(null)");
    ct_status st = check_hp(o, name, value);
    if (st) return st;
    o->def[h] = value;
    for (int g = 0; g < o->ng; g++) o->g[g].v[h] = value;
    return CT_OK;
}

void ct_optim_zero_grad(ct_optimizer *o, bool set_to_none) {
    if (!o) return;
    for (int i = 0; i < o->np; i++) {
        ct_tensor *g = ct_grad(o->ps[i].p);
        if (!g) continue;
        if (set_to_none) ct_zero_grad(o->ps[i].p);
        else {
            bool prev = ct_set_grad_enabled(false);
            (void)ct_zero_(g);
            ct_set_grad_enabled(prev);
        }
    }
}

ct_tensor *ct_optim_state(const ct_optimizer *o, int i, const char *name) {
    if (!o || i < 0 || i >= o->np || !name) return NULL;
    const opt_pstate *s = &o->ps[i];
    for (int j = 0; j < s->nst; j++)
        if (strcmp(s->sname[j], name) == 0) return s->st[j];
    return NULL;
}

ct_tensor *ct__optim_state_get(ct_optimizer *o, int i, const char *name) {
    return ct_optim_state(o, i, name);
}

/* Stores t (retained) as state `name` of param i, replacing any old one. */
ct_status ct__optim_state_put(ct_optimizer *o, int i, const char *name, ct_tensor *t) {
    if (!t) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_NULL;
    opt_pstate *s = &o->ps[i];
    for (int j = 0; j < s->nst; j++)
        if (strcmp(s->sname[j], name) == 0) {
            ct_retain(t);
            ct_release(s->st[j]);
            s->st[j] = t;
            return CT_OK;
        }
    if (s->nst == OPT_ST_MAX || strlen(name) >= OPT_ST_NAME)
        return ct__error_status(CT_ERR_ARG, "%s: too many state entries or name too long ('%s')",
                                o->k->name, name);
    snprintf(s->sname[s->nst], OPT_ST_NAME, "%s", name);
    s->st[s->nst++] = ct_retain(t);
    return CT_OK;
}

static void clear_state(ct_optimizer *o) {
    for (int i = 0; i < o->np; i++) {
        for (int j = 0; j < o->ps[i].nst; j++) ct_release(o->ps[i].st[j]);
        o->ps[i].nst = 0;
    }
}

/* ---- stepping ---------------------------------------------------------------- */
ct_status ct_optim_step(ct_optimizer *o) {
    if (!o) return ct__error_status(CT_ERR_NULL, "optim_step: optimizer is NULL");
    if (o->extra)
        return ct__error_status(CT_ERR_ARG, "%s: step needs a closure (ct_optim_step_closure)",
                                o->k->name);
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    /* torch.profiler's record_function name for a step (the fused
     * multi-tensor updates inside show as sgd_step / adam_step) */
    char nm[96];
    snprintf(nm, sizeof nm, "Optimizer.step#%s.step", o->k->name);
    int pe = ct__prof_begin(nm, 1, NULL, 0, NULL, 0, 0);
    if (o->cs) {
        st = ct__optim_compiled_step(o); /* ct_optim_compile: generated kernels */
    } else {
        for (int g = 0; g < o->ng && st == CT_OK; g++) {
            ct_scope sc = ct_scope_begin();
            st = o->k->step_group(o, g);
            ct_scope_end(sc);
        }
    }
    ct__prof_end(pe);
    ct_set_grad_enabled(prev);
    return st;
}

/* LBFGS's closure step lives in lbfgs.c; for the others: loss = closure(), then step. */
ct_status ct__lbfgs_step(ct_optimizer *o, ct_optim_closure fn, void *user, double *loss);

ct_status ct_optim_step_closure(ct_optimizer *o, ct_optim_closure fn, void *user, double *loss) {
    if (!o) return ct__error_status(CT_ERR_NULL, "optim_step: optimizer is NULL");
    if (!fn) return ct__error_status(CT_ERR_NULL, "%s: closure is NULL", o->k->name);
    if (o->extra) return ct__lbfgs_step(o, fn, user, loss);
    bool prev = ct_set_grad_enabled(true);
    double l = fn(user);
    ct_set_grad_enabled(prev);
    if (isnan(l) && ct_last_error_code()) return ct_last_error_code();
    if (loss) *loss = l;
    return ct_optim_step(o);
}

#define HP(name) hpv(o, g, name)
static double hpv(const ct_optimizer *o, int g, const char *name) {
    int h = ct__optim_hp_index(o, name);
    return h < 0 ? NAN : o->g[g].v[h];
}

/* ---- the shared loop ------------------------------------------------------------
 * Every optimizer's step is: for each parameter of the group that has a
 * grad, one update in its own scope (its temporaries die with it); the first
 * error stops the step.  An optimizer supplies the per-parameter update
 * (hp: its hyperparameters, read once per group). */
typedef ct_status (*opt_update_fn)(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                                   const void *hp);

static ct_status fail_code(void) {
    ct_status st = ct_last_error_code();
    return st ? st : CT_ERR_RUNTIME;
}
#define CK(x) do { if (!(x)) return fail_code(); } while (0)

static ct_status update_one(ct_optimizer *o, int i, opt_update_fn fn, const void *hp) {
    ct_tensor *p = o->ps[i].p, *grad = ct_grad(p);
    if (!grad) return CT_OK;
    ct_scope sc = ct_scope_begin();
    ct_status st = fn(o, i, p, grad, hp);
    ct_scope_end(sc);
    return st;
}

static ct_status for_each_param(ct_optimizer *o, int g, opt_update_fn fn, const void *hp) {
    for (int k = 0; k < o->g[g].n; k++) {
        ct_status st = update_one(o, o->g[g].idx[k], fn, hp);
        if (st) return st;
    }
    return CT_OK;
}

/* a fresh state tensor: zeros like p (or filled with v) */
static ct_tensor *new_state(ct_optimizer *o, int i, const char *name, double fill) {
    ct_tensor *t = ct_full_like(o->ps[i].p, fill);
    if (!t || ct__optim_state_put(o, i, name, t)) return NULL;
    return t;
}
ct_tensor *ct__optim_state_or_new(ct_optimizer *o, int i, const char *name, double fill) {
    ct_tensor *t = ct_optim_state(o, i, name);
    return t ? t : new_state(o, i, name, fill);
}
#define state_or_new ct__optim_state_or_new
/* increments the float32 "step" state and returns its new value */
#define bump_step ct__optim_bump_step
double ct__optim_bump_step(ct_optimizer *o, int i) {
    ct_tensor *s = ct_optim_state(o, i, "step");
    if (!s) {
        s = ct_full_on(NULL, 0, 0.0, CT_F32, CT_CPU); /* host memory whatever the default device */
        if (!s || ct__optim_state_put(o, i, "step", s)) return NAN;
    }
    float *p = ct_data_ptr(s);
    *p += 1.0f;
    return (double)*p;
}

/* grad (negated when maximize) plus weight_decay * p */
static ct_tensor *eff_grad(ct_tensor *p, ct_tensor *grad, bool maximize, double wd) {
    ct_tensor *g = maximize ? ct_neg(grad) : grad;
    if (wd != 0) g = ct_add_scaled(g, p, wd);
    return g;
}

/* ---- SGD, Adam, AdamW ---------------------------------------------------------
 * Their updates are the op layer's (src/ops/fused_optim.h): one parameter
 * at a time, torch.optim's _single_tensor_sgd / _single_tensor_adam(w)
 * (ct__sgd_update / ct__adam_update); with "fused" = 1, the whole group at
 * once through the table ops sgd_step / adam_step (ct__sgd_step /
 * ct__adam_step: one parallel loop over all its contiguous float
 * parameters, torch's _foreach / fused kernels).  Here: the state (created
 * on a parameter's first step, the step count incremented) and the lists. */
typedef struct { ct_p_optim h; bool fused; } fused_hp;

/* ---- SGD ------------------------------------------------------------------------ */
/* the momentum buffer of param i (created as zeros: *first, the update
 * then starts it as the grad); NULL without momentum */
static ct_status sgd_state(ct_optimizer *o, int i, const ct_p_optim *h, ct_tensor **buf, bool *first) {
    *first = false;
    *buf = NULL;
    if (h->momentum == 0) return CT_OK;
    *buf = ct_optim_state(o, i, "momentum_buffer");
    if (!*buf) {
        CK(*buf = new_state(o, i, "momentum_buffer", 0));
        *first = true;
    }
    return CT_OK;
}

static ct_status sgd_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad, const void *hp) {
    const ct_p_optim *h = hp;
    ct_tensor *buf;
    bool first;
    ct_status st = sgd_state(o, i, h, &buf, &first);
    return st ? st : ct__sgd_update(p, grad, buf, first, h);
}

/* one sgd_step for the params whose buffers are fresh, one for the others */
static ct_status sgd_fused(ct_optimizer *o, int g, const ct_p_optim *h) {
    int n = o->g[g].n, nl[2] = {0, 0};
    ct_tensor **t = malloc(sizeof *t * 6 * (size_t)(n ? n : 1));
    if (!t) return ct__error_status(CT_ERR_OOM, "SGD: out of memory");
    ct_tensor **L[2][3] = {{t, t + n, t + 2 * n}, {t + 3 * n, t + 4 * n, t + 5 * n}};
    ct_status st = CT_OK;
    for (int q = 0; q < n && !st; q++) {
        int i = o->g[g].idx[q];
        ct_tensor *p = o->ps[i].p, *grad = ct_grad(p), *buf;
        bool first;
        if (!grad || (st = sgd_state(o, i, h, &buf, &first))) continue;
        int k = first ? 0 : 1, j = nl[k]++;
        L[k][0][j] = p;
        L[k][1][j] = grad;
        L[k][2][j] = buf;
    }
    for (int k = 0; k < 2 && !st; k++) {
        ct_p_optim hk = *h;
        hk.first_step = k == 0;
        st = ct__sgd_step(L[k][0], L[k][1], h->momentum != 0 ? L[k][2] : NULL, nl[k], &hk);
    }
    free(t);
    return st;
}

static ct_status sgd_step(ct_optimizer *o, int g) {
    fused_hp f = {{.lr = HP("lr"), .momentum = HP("momentum"), .dampening = HP("dampening"),
                   .weight_decay = HP("weight_decay"), .nesterov = HP("nesterov") != 0,
                   .maximize = HP("maximize") != 0},
                  HP("fused") != 0};
    if (f.fused) return sgd_fused(o, g, &f.h);
    return for_each_param(o, g, sgd_update, &f.h);
}

static const opt_kind k_sgd = {
    "SGD", 7, {"lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "fused"},
    sgd_step};

ct_optimizer *ct_sgd_new(ct_tensor *const *params, int n, double lr, double momentum,
                         double dampening, double weight_decay, bool nesterov, bool maximize) {
    if (!(lr >= 0)) return ct__error(CT_ERR_ARG, "SGD: invalid learning rate: %g", lr);
    if (!(momentum >= 0)) return ct__error(CT_ERR_ARG, "SGD: invalid momentum value: %g", momentum);
    if (!(weight_decay >= 0))
        return ct__error(CT_ERR_ARG, "SGD: invalid weight_decay value: %g", weight_decay);
    if (nesterov && (momentum <= 0 || dampening != 0))
        return ct__error(CT_ERR_ARG, "SGD: Nesterov momentum requires a momentum and zero dampening");
    double def[] = {lr, momentum, dampening, weight_decay, nesterov, maximize, 0};
    return ct__optim_new(&k_sgd, def, params, n);
}

/* ---- Adam / AdamW ---------------------------------------------------------------- */
/* the state of param i (created on its first step), its step count
 * incremented: *step (the tensor) and *stepv (its value) */
static ct_status adam_state(ct_optimizer *o, int i, const ct_p_optim *h, ct_tensor **m, ct_tensor **v,
                            ct_tensor **vmax, ct_tensor **step, double *stepv) {
    CK(*m = state_or_new(o, i, "exp_avg", 0));
    CK(*v = state_or_new(o, i, "exp_avg_sq", 0));
    *vmax = NULL;
    if (h->amsgrad) CK(*vmax = state_or_new(o, i, "max_exp_avg_sq", 0));
    *stepv = bump_step(o, i);
    CK(!isnan(*stepv));
    *step = ct_optim_state(o, i, "step");
    return CT_OK;
}

static ct_status adam_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad, const void *hp) {
    const ct_p_optim *h = hp;
    ct_tensor *m, *v, *vmax, *step;
    double stepv;
    ct_status st = adam_state(o, i, h, &m, &v, &vmax, &step, &stepv);
    return st ? st : ct__adam_update(p, grad, m, v, vmax, stepv, h);
}

static ct_status adam_fused(ct_optimizer *o, int g, const ct_p_optim *h) {
    int n = o->g[g].n, nl = 0;
    ct_tensor **t = malloc(sizeof *t * 6 * (size_t)(n ? n : 1));
    if (!t) return ct__error_status(CT_ERR_OOM, "%s: out of memory", o->k->name);
    ct_tensor **P = t, **G = t + n, **M = t + 2 * n, **V = t + 3 * n, **VM = t + 4 * n, **S = t + 5 * n;
    ct_status st = CT_OK;
    for (int q = 0; q < n && !st; q++) {
        int i = o->g[g].idx[q];
        ct_tensor *p = o->ps[i].p, *grad = ct_grad(p);
        double stepv;
        if (!grad || (st = adam_state(o, i, h, &M[nl], &V[nl], &VM[nl], &S[nl], &stepv))) continue;
        P[nl] = p;
        G[nl++] = grad;
    }
    if (!st) st = ct__adam_step(P, G, M, V, h->amsgrad ? VM : NULL, S, nl, h);
    free(t);
    return st;
}

static ct_status adam_common(ct_optimizer *o, int g, bool decoupled) {
    fused_hp f = {{.lr = HP("lr"), .beta1 = HP("beta1"), .beta2 = HP("beta2"), .eps = HP("eps"),
                   .weight_decay = HP("weight_decay"), .amsgrad = HP("amsgrad") != 0,
                   .maximize = HP("maximize") != 0, .decoupled = decoupled},
                  HP("fused") != 0};
    if (f.fused) return adam_fused(o, g, &f.h);
    return for_each_param(o, g, adam_update, &f.h);
}
static ct_status adam_step(ct_optimizer *o, int g) { return adam_common(o, g, false); }
static ct_status adamw_step(ct_optimizer *o, int g) { return adam_common(o, g, true); }

#define ADAM_HP {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize", "fused"}
static const opt_kind k_adam = {"Adam", 8, ADAM_HP, adam_step};
static const opt_kind k_adamw = {"AdamW", 8, ADAM_HP, adamw_step};

static ct_status check_adam_like(const char *who, double lr, double b1, double b2, double eps,
                                 double wd) {
    if (!(lr >= 0)) return ct__error_status(CT_ERR_ARG, "%s: invalid learning rate: %g", who, lr);
    if (!(eps >= 0)) return ct__error_status(CT_ERR_ARG, "%s: invalid epsilon value: %g", who, eps);
    if (!(b1 >= 0 && b1 < 1))
        return ct__error_status(CT_ERR_ARG, "%s: invalid beta parameter at index 0: %g", who, b1);
    if (!(b2 >= 0 && b2 < 1))
        return ct__error_status(CT_ERR_ARG, "%s: invalid beta parameter at index 1: %g", who, b2);
    if (!(wd >= 0))
        return ct__error_status(CT_ERR_ARG, "%s: invalid weight_decay value: %g", who, wd);
    return CT_OK;
}

ct_optimizer *ct_adam_new(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                          double eps, double weight_decay, bool amsgrad, bool maximize) {
    if (check_adam_like("Adam", lr, beta1, beta2, eps, weight_decay)) return NULL;
    double def[] = {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, 0};
    return ct__optim_new(&k_adam, def, params, n);
}

ct_optimizer *ct_adamw_new(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay, bool amsgrad, bool maximize) {
    if (check_adam_like("AdamW", lr, beta1, beta2, eps, weight_decay)) return NULL;
    double def[] = {lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, 0};
    return ct__optim_new(&k_adamw, def, params, n);
}

/* ---- Adamax --------------------------------------------------------------------- */
typedef struct { double lr, b1, b2, eps, wd; bool maximize; } adamax_hp;

static ct_status adamax_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                               const void *hp) {
    const adamax_hp *h = hp;
    ct_tensor *m, *u;
    CK(m = state_or_new(o, i, "exp_avg", 0));
    CK(u = state_or_new(o, i, "exp_inf", 0));
    double step = bump_step(o, i);
    ct_tensor *gr = eff_grad(p, grad, h->maximize, h->wd);
    CK(gr);
    CK(ct_mul_scalar_(m, h->b1));
    CK(ct_add_scaled_(m, gr, 1 - h->b1));
    CK(ct_mul_scalar_(u, h->b2));
    /* amax(cat([exp_inf * beta2, |g| + eps])) == maximum of the two */
    CK(ct_maximum_(u, ct_add_scalar(ct_abs(gr), h->eps)));
    double clr = h->lr / (1 - pow(h->b1, step));
    CK(ct_addcdiv_(p, m, u, -clr));
    return CT_OK;
}
static ct_status adamax_step(ct_optimizer *o, int g) {
    adamax_hp h = {HP("lr"), HP("beta1"), HP("beta2"), HP("eps"), HP("weight_decay"),
                   HP("maximize") != 0};
    return for_each_param(o, g, adamax_update, &h);
}
static const opt_kind k_adamax = {
    "Adamax", 6, {"lr", "beta1", "beta2", "eps", "weight_decay", "maximize"}, adamax_step};

ct_optimizer *ct_adamax_new(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                            double eps, double weight_decay, bool maximize) {
    if (check_adam_like("Adamax", lr, beta1, beta2, eps, weight_decay)) return NULL;
    double def[] = {lr, beta1, beta2, eps, weight_decay, maximize};
    return ct__optim_new(&k_adamax, def, params, n);
}

/* ---- NAdam ---------------------------------------------------------------------- */
typedef struct { double lr, b1, b2, eps, wd, md; } nadam_hp;

static ct_status nadam_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                              const void *hp) {
    const nadam_hp *h = hp;
    ct_tensor *m, *v, *mup = ct_optim_state(o, i, "mu_product");
    CK(m = state_or_new(o, i, "exp_avg", 0));
    CK(v = state_or_new(o, i, "exp_avg_sq", 0));
    if (!mup) {
        CK(mup = ct_full_on(NULL, 0, 1.0, CT_F32, CT_CPU));
        ct_status st = ct__optim_state_put(o, i, "mu_product", mup);
        if (st) return st;
    }
    double step = bump_step(o, i);
    double bc2 = 1 - pow(h->b2, step);
    ct_tensor *gr = eff_grad(p, grad, false, h->wd);
    CK(gr);
    double mu = h->b1 * (1. - 0.5 * pow(0.96, step * h->md));
    double mu_next = h->b1 * (1. - 0.5 * pow(0.96, (step + 1) * h->md));
    /* mu_product is a float32 tensor in torch: round like it */
    float *mp = ct_data_ptr(mup);
    *mp = *mp * (float)mu;
    float mpn = (*mp * (float)mu) * (float)mu_next;
    CK(ct_mul_scalar_(m, h->b1));
    CK(ct_add_scaled_(m, gr, 1 - h->b1));
    CK(ct_mul_scalar_(v, h->b2));
    CK(ct_addcmul_(v, gr, gr, 1 - h->b2));
    ct_tensor *den = ct_add_scalar_(ct_sqrt(ct_div_scalar(v, bc2)), h->eps);
    CK(den);
    CK(ct_addcdiv_(p, gr, den, -h->lr * (1. - mu) / (1. - (double)*mp)));
    CK(ct_addcdiv_(p, m, den, -h->lr * mu_next / (1. - (double)mpn)));
    return CT_OK;
}
static ct_status nadam_step(ct_optimizer *o, int g) {
    nadam_hp h = {HP("lr"), HP("beta1"), HP("beta2"), HP("eps"), HP("weight_decay"),
                  HP("momentum_decay")};
    return for_each_param(o, g, nadam_update, &h);
}
static const opt_kind k_nadam = {
    "NAdam", 6, {"lr", "beta1", "beta2", "eps", "weight_decay", "momentum_decay"}, nadam_step};

ct_optimizer *ct_nadam_new(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay, double momentum_decay) {
    if (check_adam_like("NAdam", lr, beta1, beta2, eps, weight_decay)) return NULL;
    if (!(momentum_decay >= 0))
        return ct__error(CT_ERR_ARG, "NAdam: invalid momentum_decay value: %g", momentum_decay);
    double def[] = {lr, beta1, beta2, eps, weight_decay, momentum_decay};
    return ct__optim_new(&k_nadam, def, params, n);
}

/* ---- RAdam ---------------------------------------------------------------------- */
typedef struct { double lr, b1, b2, eps, wd; } radam_hp;

static ct_status radam_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                              const void *hp) {
    const radam_hp *h = hp;
    ct_tensor *m, *v;
    CK(m = state_or_new(o, i, "exp_avg", 0));
    CK(v = state_or_new(o, i, "exp_avg_sq", 0));
    double step = bump_step(o, i);
    double bc1 = 1 - pow(h->b1, step), bc2 = 1 - pow(h->b2, step);
    ct_tensor *gr = eff_grad(p, grad, false, h->wd);
    CK(gr);
    CK(ct_mul_scalar_(m, h->b1));
    CK(ct_add_scaled_(m, gr, 1 - h->b1));
    CK(ct_mul_scalar_(v, h->b2));
    CK(ct_addcmul_(v, gr, gr, 1 - h->b2));
    ct_tensor *bcm = ct_div_scalar(m, bc1);
    double rho_inf = 2 / (1 - h->b2) - 1;
    double rho_t = rho_inf - 2 * step * pow(h->b2, step) / bc2;
    ct_tensor *upd;
    if (rho_t > 5.) {
        double rect = sqrt((rho_t - 4) * (rho_t - 2) * rho_inf /
                           ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        /* adaptive_lr = sqrt(bc2) / (sqrt(v) + eps) */
        /* python's float / tensor is tensor.reciprocal() * float */
        ct_tensor *den = ct_add_scalar_(ct_sqrt(v), h->eps);
        ct_tensor *adaptive = ct_mul_scalar(ct_reciprocal(den), sqrt(bc2));
        upd = ct_mul_scalar(ct_mul(ct_mul_scalar(bcm, h->lr), adaptive), rect);
    } else {
        upd = ct_mul_scalar(bcm, h->lr);
    }
    CK(upd);
    CK(ct_add_scaled_(p, upd, -1.0));
    return CT_OK;
}
static ct_status radam_step(ct_optimizer *o, int g) {
    radam_hp h = {HP("lr"), HP("beta1"), HP("beta2"), HP("eps"), HP("weight_decay")};
    return for_each_param(o, g, radam_update, &h);
}
static const opt_kind k_radam = {
    "RAdam", 5, {"lr", "beta1", "beta2", "eps", "weight_decay"}, radam_step};

ct_optimizer *ct_radam_new(ct_tensor *const *params, int n, double lr, double beta1, double beta2,
                           double eps, double weight_decay) {
    if (check_adam_like("RAdam", lr, beta1, beta2, eps, weight_decay)) return NULL;
    double def[] = {lr, beta1, beta2, eps, weight_decay};
    return ct__optim_new(&k_radam, def, params, n);
}

/* ---- RMSprop -------------------------------------------------------------------- */
typedef struct { double lr, alpha, eps, wd, mom; bool centered, maximize; } rmsprop_hp;

static ct_status rmsprop_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                                const void *hp) {
    const rmsprop_hp *h = hp;
    ct_tensor *sq, *ga = NULL, *buf = NULL;
    CK(sq = state_or_new(o, i, "square_avg", 0));
    if (h->mom > 0) CK(buf = state_or_new(o, i, "momentum_buffer", 0));
    if (h->centered) CK(ga = state_or_new(o, i, "grad_avg", 0));
    CK(!isnan(bump_step(o, i)));
    ct_tensor *gr = eff_grad(p, grad, h->maximize, h->wd);
    CK(gr);
    CK(ct_mul_scalar_(sq, h->alpha));
    CK(ct_addcmul_(sq, gr, gr, 1 - h->alpha));
    ct_tensor *avg;
    if (h->centered) {
        CK(ct_mul_scalar_(ga, h->alpha));
        CK(ct_add_scaled_(ga, gr, 1 - h->alpha));
        avg = ct_sqrt_(ct_addcmul(sq, ga, ga, -1));
    } else {
        avg = ct_sqrt(sq);
    }
    CK(ct_add_scalar_(avg, h->eps));
    if (h->mom > 0) {
        CK(ct_mul_scalar_(buf, h->mom));
        CK(ct_addcdiv_(buf, gr, avg, 1));
        CK(ct_add_scaled_(p, buf, -h->lr));
    } else {
        CK(ct_addcdiv_(p, gr, avg, -h->lr));
    }
    return CT_OK;
}
static ct_status rmsprop_step(ct_optimizer *o, int g) {
    rmsprop_hp h = {HP("lr"), HP("alpha"), HP("eps"), HP("weight_decay"), HP("momentum"),
                    HP("centered") != 0, HP("maximize") != 0};
    return for_each_param(o, g, rmsprop_update, &h);
}
static const opt_kind k_rmsprop = {
    "RMSprop", 7, {"lr", "momentum", "alpha", "eps", "centered", "weight_decay", "maximize"},
    rmsprop_step};

ct_optimizer *ct_rmsprop_new(ct_tensor *const *params, int n, double lr, double alpha, double eps,
                             double weight_decay, double momentum, bool centered, bool maximize) {
    if (!(lr >= 0)) return ct__error(CT_ERR_ARG, "RMSprop: invalid learning rate: %g", lr);
    if (!(eps >= 0)) return ct__error(CT_ERR_ARG, "RMSprop: invalid epsilon value: %g", eps);
    if (!(momentum >= 0)) return ct__error(CT_ERR_ARG, "RMSprop: invalid momentum value: %g", momentum);
    if (!(weight_decay >= 0))
        return ct__error(CT_ERR_ARG, "RMSprop: invalid weight_decay value: %g", weight_decay);
    if (!(alpha >= 0)) return ct__error(CT_ERR_ARG, "RMSprop: invalid alpha value: %g", alpha);
    double def[] = {lr, momentum, alpha, eps, centered, weight_decay, maximize};
    return ct__optim_new(&k_rmsprop, def, params, n);
}

/* ---- Adagrad -------------------------------------------------------------------- */
typedef struct { double lr, lr_decay, eps, wd, init; bool maximize; } adagrad_hp;

static ct_status adagrad_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                                const void *hp) {
    const adagrad_hp *h = hp;
    ct_tensor *sum;
    CK(sum = state_or_new(o, i, "sum", h->init));
    double step = bump_step(o, i);
    ct_tensor *gr = eff_grad(p, grad, h->maximize, h->wd);
    CK(gr);
    double clr = h->lr / (1 + (step - 1) * h->lr_decay);
    CK(ct_addcmul_(sum, gr, gr, 1));
    ct_tensor *std = ct_add_scalar_(ct_sqrt(sum), h->eps);
    CK(std);
    CK(ct_addcdiv_(p, gr, std, -clr));
    return CT_OK;
}
static ct_status adagrad_step(ct_optimizer *o, int g) {
    adagrad_hp h = {HP("lr"), HP("lr_decay"), HP("eps"), HP("weight_decay"),
                    HP("initial_accumulator_value"), HP("maximize") != 0};
    return for_each_param(o, g, adagrad_update, &h);
}
static const opt_kind k_adagrad = {
    "Adagrad", 6, {"lr", "lr_decay", "eps", "weight_decay", "initial_accumulator_value", "maximize"},
    adagrad_step};

ct_optimizer *ct_adagrad_new(ct_tensor *const *params, int n, double lr, double lr_decay,
                             double weight_decay, double initial_accumulator_value, double eps,
                             bool maximize) {
    if (!(lr >= 0)) return ct__error(CT_ERR_ARG, "Adagrad: invalid learning rate: %g", lr);
    if (!(lr_decay >= 0)) return ct__error(CT_ERR_ARG, "Adagrad: invalid lr_decay value: %g", lr_decay);
    if (!(weight_decay >= 0))
        return ct__error(CT_ERR_ARG, "Adagrad: invalid weight_decay value: %g", weight_decay);
    if (!(initial_accumulator_value >= 0))
        return ct__error(CT_ERR_ARG, "Adagrad: invalid initial_accumulator_value value: %g",
                         initial_accumulator_value);
    if (!(eps >= 0)) return ct__error(CT_ERR_ARG, "Adagrad: invalid epsilon value: %g", eps);
    double def[] = {lr, lr_decay, eps, weight_decay, initial_accumulator_value, maximize};
    return ct__optim_new(&k_adagrad, def, params, n);
}

/* ---- Adadelta ------------------------------------------------------------------- */
typedef struct { double lr, rho, eps, wd; bool maximize; } adadelta_hp;

static ct_status adadelta_update(ct_optimizer *o, int i, ct_tensor *p, ct_tensor *grad,
                                 const void *hp) {
    const adadelta_hp *h = hp;
    ct_tensor *sq, *acc;
    CK(sq = state_or_new(o, i, "square_avg", 0));
    CK(acc = state_or_new(o, i, "acc_delta", 0));
    CK(!isnan(bump_step(o, i)));
    ct_tensor *gr = eff_grad(p, grad, h->maximize, h->wd);
    CK(gr);
    CK(ct_mul_scalar_(sq, h->rho));
    CK(ct_addcmul_(sq, gr, gr, 1 - h->rho));
    ct_tensor *std = ct_sqrt_(ct_add_scalar(sq, h->eps));
    ct_tensor *delta = ct_mul_(ct_div_(ct_sqrt_(ct_add_scalar(acc, h->eps)), std), gr);
    CK(delta);
    CK(ct_mul_scalar_(acc, h->rho));
    CK(ct_addcmul_(acc, delta, delta, 1 - h->rho));
    CK(ct_add_scaled_(p, delta, -h->lr));
    return CT_OK;
}
static ct_status adadelta_step(ct_optimizer *o, int g) {
    adadelta_hp h = {HP("lr"), HP("rho"), HP("eps"), HP("weight_decay"), HP("maximize") != 0};
    return for_each_param(o, g, adadelta_update, &h);
}
static const opt_kind k_adadelta = {
    "Adadelta", 5, {"lr", "rho", "eps", "weight_decay", "maximize"}, adadelta_step};

ct_optimizer *ct_adadelta_new(ct_tensor *const *params, int n, double lr, double rho, double eps,
                              double weight_decay, bool maximize) {
    if (!(lr >= 0)) return ct__error(CT_ERR_ARG, "Adadelta: invalid learning rate: %g", lr);
    if (!(rho >= 0 && rho <= 1)) return ct__error(CT_ERR_ARG, "Adadelta: invalid rho value: %g", rho);
    if (!(eps >= 0)) return ct__error(CT_ERR_ARG, "Adadelta: invalid epsilon value: %g", eps);
    if (!(weight_decay >= 0))
        return ct__error(CT_ERR_ARG, "Adadelta: invalid weight_decay value: %g", weight_decay);
    double def[] = {lr, rho, eps, weight_decay, maximize};
    return ct__optim_new(&k_adadelta, def, params, n);
}

/* ---- state dicts -------------------------------------------------------------------- */
ct_sample *ct_optim_state_dict(const ct_optimizer *o) {
    if (!o) return ct__error(CT_ERR_NULL, "optim_state_dict: optimizer is NULL");
    ct_sample *sd = ct_sample_new();
    if (!sd) return NULL;
    char key[160];
    ct_scope sc = ct_scope_begin();
    for (int i = 0; i < o->np; i++)
        for (int j = 0; j < o->ps[i].nst; j++) {
            snprintf(key, sizeof key, "state.%d.%s", i, o->ps[i].sname[j]);
            if (ct_sample_set(sd, key, ct_clone(o->ps[i].st[j]))) goto fail;
        }
    for (int g = 0; g < o->ng; g++) {
        const opt_group *gr = &o->g[g];
        int b1 = ct__optim_hp_index(o, "beta1"), b2 = ct__optim_hp_index(o, "beta2");
        for (int h = 0; h < o->k->nhp; h++) {
            if (h == b1 || h == b2) continue;
            snprintf(key, sizeof key, "param_groups.%d.%s", g, o->k->hp[h]);
            if (ct_sample_set(sd, key, ct_full_on(NULL, 0, gr->v[h], CT_F64, CT_CPU))) goto fail;
        }
        if (b1 >= 0 && b2 >= 0) {
            snprintf(key, sizeof key, "param_groups.%d.betas", g);
            double bv[2] = {gr->v[b1], gr->v[b2]};
            if (ct_sample_set(sd, key, ct_from_doubles(bv, CT_SHAPE(2), CT_F64))) goto fail;
        }
        if (!isnan(gr->initial_lr)) {
            snprintf(key, sizeof key, "param_groups.%d.initial_lr", g);
            if (ct_sample_set(sd, key, ct_full_on(NULL, 0, gr->initial_lr, CT_F64, CT_CPU))) goto fail;
        }
        int64_t *ix = malloc(sizeof(int64_t) * (size_t)(gr->n ? gr->n : 1));
        if (!ix) { ct__error(CT_ERR_OOM, "optim_state_dict: out of memory"); goto fail; }
        for (int i = 0; i < gr->n; i++) ix[i] = gr->idx[i];
        snprintf(key, sizeof key, "param_groups.%d.params", g);
        ct_tensor *t = ct_from_array(ix, CT_SHAPE(gr->n), CT_I64);
        free(ix);
        if (ct_sample_set(sd, key, t)) goto fail;
    }
    ct_scope_end(sc);
    return sd;
fail:
    ct_scope_end(sc);
    ct_sample_free(sd);
    return NULL;
}

ct_status ct_optim_load_state_dict(ct_optimizer *o, const ct_sample *sd) {
    if (!o || !sd) return ct__error_status(CT_ERR_NULL, "optim_load_state_dict: NULL argument");
    const char *who = o->k->name;
    char key[160];
    /* validate the layout first: nothing changes on error */
    for (int g = 0;; g++) {
        snprintf(key, sizeof key, "param_groups.%d.params", g);
        ct_tensor *t = ct_sample_get(sd, key);
        if (!t) {
            if (g != o->ng)
                return ct__error_status(CT_ERR_ARG, "%s: loaded state dict has %d parameter groups, "
                                        "the optimizer has %d", who, g, o->ng);
            break;
        }
        if (g >= o->ng)
            return ct__error_status(CT_ERR_ARG, "%s: loaded state dict has more parameter groups "
                                    "than the optimizer (%d)", who, o->ng);
        if (ct_numel(t) != o->g[g].n)
            return ct__error_status(CT_ERR_ARG, "%s: loaded state dict contains a parameter group "
                                    "that doesn't match the size of optimizer's group %d "
                                    "(%lld vs %d)", who, g, (long long)ct_numel(t), o->g[g].n);
    }
    for (int e = 0; e < ct_sample_count(sd); e++) {
        const char *name = ct_sample_name(sd, e);
        ct_tensor *t = ct_sample_at(sd, e);
        if (strncmp(name, "state.", 6) == 0) {
            char *end;
            long i = strtol(name + 6, &end, 10);
            if (end == name + 6 || *end != '.' || i < 0 || i >= o->np || strlen(end + 1) == 0 ||
                strlen(end + 1) >= OPT_ST_NAME)
                return ct__error_status(CT_ERR_ARG, "%s: bad state dict key '%s'", who, name);
            const char *sn = end + 1;
            bool scalar_state = strcmp(sn, "step") == 0 || strcmp(sn, "mu_product") == 0;
            if (!scalar_state && ct_numel(t) != ct_numel(o->ps[i].p))
                return ct__error_status(CT_ERR_SHAPE, "%s: state '%s' has shape %s, parameter %ld "
                                        "has %s", who, name, ct__tshape(t), i,
                                        ct__tshape(o->ps[i].p));
        } else if (strncmp(name, "param_groups.", 13) == 0) {
            char *end;
            long g = strtol(name + 13, &end, 10);
            if (end == name + 13 || *end != '.' || g < 0 || g >= o->ng)
                return ct__error_status(CT_ERR_ARG, "%s: bad state dict key '%s'", who, name);
            const char *hn = end + 1;
            if (strcmp(hn, "params") == 0 || strcmp(hn, "initial_lr") == 0) continue;
            if (strcmp(hn, "betas") == 0) {
                if (ct_numel(t) != 2 || ct__optim_hp_index(o, "beta1") < 0)
                    return ct__error_status(CT_ERR_ARG, "%s: bad '%s'", who, name);
                continue;
            }
            if (ct__optim_hp_index(o, hn) < 0 || ct_numel(t) != 1)
                return ct__error_status(CT_ERR_ARG, "%s: unknown or bad hyperparameter key '%s'",
                                        who, name);
        } else {
            return ct__error_status(CT_ERR_ARG, "%s: unexpected state dict key '%s'", who, name);
        }
    }
    /* apply */
    clear_state(o);
    ct_scope sc = ct_scope_begin();
    ct_status st = CT_OK;
    for (int e = 0; e < ct_sample_count(sd) && st == CT_OK; e++) {
        const char *name = ct_sample_name(sd, e);
        ct_tensor *t = ct_sample_at(sd, e);
        char *end;
        if (strncmp(name, "state.", 6) == 0) {
            long i = strtol(name + 6, &end, 10);
            const char *sn = end + 1;
            ct_tensor *c;
            if (strcmp(sn, "step") == 0 || strcmp(sn, "mu_product") == 0)
                c = ct_clone(ct_reshape(ct_to_dtype(t, CT_F32), NULL, 0));
            else
                c = ct_clone(ct_reshape(ct_to_dtype(t, o->ps[i].p->dtype), o->ps[i].p->sizes,
                                        o->ps[i].p->ndim));
            st = ct__optim_state_put(o, (int)i, sn, c);
        } else {
            long g = strtol(name + 13, &end, 10);
            const char *hn = end + 1;
            if (strcmp(hn, "params") == 0) continue;
            if (strcmp(hn, "initial_lr") == 0) { o->g[g].initial_lr = ct_item(t); continue; }
            if (strcmp(hn, "betas") == 0) {
                ct_tensor *d = ct_contiguous(ct_to_dtype(t, CT_F64));
                if (!d) { st = ct_last_error_code(); break; }
                const double *bv = ct_data_ptr(d);
                o->g[g].v[ct__optim_hp_index(o, "beta1")] = bv[0];
                o->g[g].v[ct__optim_hp_index(o, "beta2")] = bv[1];
                continue;
            }
            o->g[g].v[ct__optim_hp_index(o, hn)] = ct_item(t);
        }
    }
    ct_scope_end(sc);
    return st;
}
