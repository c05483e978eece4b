/* loss.c -- torch.nn.functional's losses as composites of public ops, so
 * autograd differentiates them (gradients match torch's formulas).  Each
 * loss computes in a private scope and keeps only its result.  The formulas
 * follow PyTorch 1.13's (aten/src/ATen/native/Loss*.cpp and
 * torch/nn/functional.py), including its edge cases: BCE's logs clamped at
 * -100, nll's weighted mean over the targets not ignored, cross entropy's
 * label smoothing, the gaussian NLL's variance clamp that does not stop the
 * gradient, CTC's mean over target lengths. */
#include <math.h>
#include <stdio.h>

#include "../ops/op_table.h"
#include "../ops/autocast.h"
#include "ctorch/nn.h"

#define L_BEGIN ct_scope l_scope__ = ct_scope_begin()
#define L_END(r)                                          \
    do {                                                  \
        ct_tensor *l_r__ = (r);                           \
        if (l_r__) ct_keep(l_r__);                        \
        ct_scope_end(l_scope__);                          \
        return l_r__;                                     \
    } while (0)
/* Leaves the scope with NULL (the error is already recorded). */
#define L_FAIL() L_END(NULL)

const char *ct_reduction_name(ct_reduction r) {
    switch (r) {
    case CT_REDUCTION_MEAN: return "mean";
    case CT_REDUCTION_SUM: return "sum";
    case CT_REDUCTION_NONE: return "none";
    case CT_REDUCTION_BATCHMEAN: return "batchmean";
    }
    return "?";
}

static bool bad_reduction(const char *op, ct_reduction r, bool batchmean_ok) {
    if ((unsigned)r > (unsigned)CT_REDUCTION_BATCHMEAN || (r == CT_REDUCTION_BATCHMEAN && !batchmean_ok)) {
        ct__error(CT_ERR_ARG, "%s: %s is not a valid value for reduction", op,
                  (unsigned)r <= (unsigned)CT_REDUCTION_BATCHMEAN ? ct_reduction_name(r) : "(unknown)");
        return true;
    }
    return false;
}

static ct_tensor *reduce(ct_tensor *l, ct_reduction r) {
    switch (r) {
    case CT_REDUCTION_NONE: return l;
    case CT_REDUCTION_SUM: return ct_sum(l, NULL, 0, false);
    default: return ct_mean(l, NULL, 0, false);
    }
}

static bool need_float(const char *op, const char *what, ct_tensor *t) {
    if (t && !ct_dtype_is_floating(ct_get_dtype(t))) {
        ct__error(CT_ERR_DTYPE, "%s: expected a floating point %s, got %s", op, what,
                  ct_dtype_name(ct_get_dtype(t)));
        return true;
    }
    return false;
}

static bool same_shape(const ct_tensor *a, const ct_tensor *b) {
    return ct_ndim(a) == ct_ndim(b) &&
           memcmp(ct_sizes(a), ct_sizes(b), sizeof(int64_t) * (size_t)ct_ndim(a)) == 0;
}

/* [n] int64 0, 1, ..., n - 1 on dev (ct_arange makes it on the default device) */
static ct_tensor *iota_on(int64_t n, ct_device dev) {
    return ct_sub_scalar(ct_cumsum(ct_ones_on(CT_SHAPE(n), CT_I64, dev), 0), 1.0);
}

/* a 0-dim cpu tensor: combines with x on any device */
static ct_tensor *zero_like_scalar(ct_tensor *x) { return ct_full_on(NULL, 0, 0.0, ct_get_dtype(x), CT_CPU); }

/* any(t) as a C bool (false on error, with the error recorded). */
static bool any_true(ct_tensor *mask) {
    ct_tensor *a = ct_any(mask, NULL, 0, false);
    return a && ct_item(a) != 0;
}

/* opts with its class weight replaced by w (the autocast copy); NULL opts stay NULL */
static const ct_cross_entropy_opts *opts_weight(const ct_cross_entropy_opts *opts, ct_tensor *w,
                                                ct_cross_entropy_opts *buf) {
    if (!opts) return NULL;
    *buf = *opts;
    buf->weight = w;
    return buf;
}

/* ---- regression losses -------------------------------------------------------- */
ct_tensor *ct_mse_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_mse_loss, ct_mse_loss(CT_AC_ARG(0), CT_AC_ARG(1), reduction), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("mse_loss", reduction, false)) return NULL;
    L_BEGIN;
    L_END(reduce(ct_square(ct_sub(input, target)), reduction));
}

ct_tensor *ct_l1_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_l1_loss, ct_l1_loss(CT_AC_ARG(0), CT_AC_ARG(1), reduction), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("l1_loss", reduction, false)) return NULL;
    L_BEGIN;
    L_END(reduce(ct_abs(ct_sub(input, target)), reduction));
}

ct_tensor *ct_smooth_l1_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction, double beta) {
    CT_AUTOCAST_OP(CT_AC_smooth_l1_loss, ct_smooth_l1_loss(CT_AC_ARG(0), CT_AC_ARG(1), reduction, beta), input,
                   target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("smooth_l1_loss", reduction, false)) return NULL;
    if (!(beta >= 0))
        return ct__error(CT_ERR_ARG, "smooth_l1_loss: does not support negative values for beta (got %g)", beta);
    if (beta == 0) return ct_l1_loss(input, target, reduction);
    L_BEGIN;
    ct_tensor *d = ct_sub(input, target), *z = ct_abs(d);
    ct_tensor *l = ct_where(ct_lt_scalar(z, beta), ct_mul_scalar(ct_square(d), 0.5 / beta),
                            ct_sub_scalar(z, 0.5 * beta));
    L_END(reduce(l, reduction));
}

ct_tensor *ct_huber_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction, double delta) {
    CT_AUTOCAST_OP(CT_AC_huber_loss, ct_huber_loss(CT_AC_ARG(0), CT_AC_ARG(1), reduction, delta), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("huber_loss", reduction, false)) return NULL;
    if (!(delta > 0))
        return ct__error(CT_ERR_ARG, "huber_loss: does not support non-positive values for delta (got %g)", delta);
    L_BEGIN;
    ct_tensor *d = ct_sub(input, target), *z = ct_abs(d);
    ct_tensor *l = ct_where(ct_lt_scalar(z, delta), ct_mul_scalar(ct_square(d), 0.5),
                            ct_mul_scalar(ct_sub_scalar(z, 0.5 * delta), delta));
    L_END(reduce(l, reduction));
}

/* ---- classification: nll and cross entropy ----------------------------------- */
static const ct_cross_entropy_opts k_ce_defaults = {NULL, false, -100, CT_REDUCTION_MEAN, 0.0};

/* Checks input [N, C, d...] / [C] against target [N, d...] / [] of class
 * indices; returns the class dim (or -1 + error) and writes C. */
static int check_nll_shapes(const char *op, ct_tensor *input, ct_tensor *target, int64_t *nclass) {
    int nd = ct_ndim(input);
    if (nd < 1)
        return ct__error(CT_ERR_SHAPE, "%s: input must have at least 1 dim ([C] or [N, C, ...]), got %s", op,
                         ct__tshape(input)), -1;
    int cdim = nd == 1 ? 0 : 1;
    *nclass = ct_size(input, cdim);
    int64_t want[CT_MAX_DIMS];
    int nw = 0;
    for (int i = 0; i < nd; i++)
        if (i != cdim) want[nw++] = ct_size(input, i);
    if (ct_ndim(target) != nw || memcmp(ct_sizes(target), want, sizeof(int64_t) * (size_t)nw) != 0) {
        char b[256];
        ct__shape_str(want, nw, b, sizeof b);
        ct__error(CT_ERR_SHAPE, "%s: expected target of shape %s for input %s, got target %s", op, b,
                  ct__tshape(input), ct__tshape(target));
        return -1;
    }
    if (!ct_dtype_is_integral(ct_get_dtype(target), false)) {
        ct__error(CT_ERR_DTYPE, "%s: expected target of an integer dtype (class indices), got %s", op,
                  ct_dtype_name(ct_get_dtype(target)));
        return -1;
    }
    return cdim;
}

/* Every target is ignore_index or in [0, C). */
static ct_status check_targets(const char *op, ct_tensor *target, int64_t nclass, int64_t ignore) {
    if (target->storage->device == CT_META) return CT_OK; /* meta: no values to bound */
    ct_tensor *t = ct__host_copy(target, CT_I64); /* a device's targets: bounded on the host */
    if (!t) return ct_last_error_code();
    const int64_t *p = ct__ptr(t);
    int64_t n = ct_numel(t);
    ct_status st = CT_OK;
    for (int64_t i = 0; i < n; i++)
        if (p[i] != ignore && (p[i] < 0 || p[i] >= nclass)) {
            st = ct__error_status(CT_ERR_INDEX, "%s: target %lld is out of bounds for %lld classes", op,
                                  (long long)p[i], (long long)nclass);
            break;
        }
    ct_release(t);
    return st;
}

static bool check_class_weight(const char *op, ct_tensor *weight, int64_t nclass) {
    if (!weight) return false;
    if (ct_ndim(weight) != 1 || ct_numel(weight) != nclass) {
        ct__error(CT_ERR_SHAPE, "%s: weight tensor should be defined either for all %lld classes or no "
                  "classes but got weight tensor of shape: %s", op, (long long)nclass, ct__tshape(weight));
        return true;
    }
    return need_float(op, "weight", weight);
}

/* weight viewed as [1, C, 1, ...] (or [C]) against input's class dim. */
static ct_tensor *class_weight_view(ct_tensor *weight, ct_tensor *input, int cdim) {
    int nd = ct_ndim(input);
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i] = i == cdim ? ct_numel(weight) : 1;
    return ct_reshape(weight, shape, nd);
}

/* nll on validated arguments (scope open in the caller). */
static ct_tensor *nll_core(ct_tensor *logp, ct_tensor *target, int cdim, ct_tensor *weight, int64_t ignore,
                           ct_reduction reduction, ct_tensor **wsum_out) {
    ct_tensor *tgt = ct_to_dtype(target, CT_I64);
    ct_tensor *valid = ct_ne(tgt, ct_wrap_int(ignore));
    ct_tensor *safe = ct_masked_fill(tgt, ct_logical_not(valid), 0.0);
    ct_tensor *picked = ct_squeeze_dim(ct_gather(logp, cdim, ct_unsqueeze(safe, cdim)), cdim);
    ct_tensor *w;
    if (weight) {
        ct_tensor *flat = ct_reshape(safe, (int64_t[]){-1}, 1);
        w = ct_reshape(ct_index_select(weight, 0, flat), ct_sizes(safe), ct_ndim(safe));
        w = ct_where(valid, w, zero_like_scalar(logp));
    } else {
        w = ct_to_dtype(valid, ct_get_dtype(logp));
    }
    if (wsum_out) *wsum_out = w;
    ct_tensor *l = ct_neg(ct_mul(picked, w));
    if (reduction == CT_REDUCTION_NONE) return l;
    if (reduction == CT_REDUCTION_SUM) return ct_sum(l, NULL, 0, false);
    return ct_div(ct_sum(l, NULL, 0, false), ct_sum(w, NULL, 0, false));
}

ct_tensor *ct_nll_loss(ct_tensor *input, ct_tensor *target, const ct_cross_entropy_opts *opts) {
    ct_cross_entropy_opts ac_opts;
    CT_AUTOCAST_OP(CT_AC_nll_loss, ct_nll_loss(CT_AC_ARG(0), CT_AC_ARG(1), opts_weight(opts, CT_AC_ARG(2), &ac_opts)),
                   input, target, opts ? opts->weight : NULL);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (!opts) opts = &k_ce_defaults;
    if (bad_reduction("nll_loss", opts->reduction, false)) return NULL;
    if (need_float("nll_loss", "input", input)) return NULL;
    int64_t nclass;
    int cdim = check_nll_shapes("nll_loss", input, target, &nclass);
    if (cdim < 0) return NULL;
    if (check_class_weight("nll_loss", opts->weight, nclass)) return NULL;
    int64_t ignore = opts->has_ignore_index ? opts->ignore_index : -100;
    if (check_targets("nll_loss", target, nclass, ignore) != CT_OK) return NULL;
    L_BEGIN;
    L_END(nll_core(input, target, cdim, opts->weight, ignore, opts->reduction, NULL));
}

/* ---- fused cross entropy over class indices ---------------------------------
 * input [N, C] float32 on the CPU, int64-convertible targets [N], no class
 * weight, no label smoothing: the forward computes softmax(x) once (one
 * op; the loss is -log p[i, t_i], the row's logsumexp recomputed in double
 * where p underflowed) and saves it; the backward writes
 * (p - onehot(t)) * coef_i in one pass, no exp (coef_i = g / n_valid, g,
 * or g_i for mean, sum, none; 0 for ignored rows) -- the composite
 * materializes log_softmax, gathers, zero-fills and scatters the nll
 * gradient and runs log_softmax_backward (exp again).
 * Under create_graph the gradient is written with public ops (softmax of
 * x, so double backward sees its dependence on x). */
typedef struct ce_user {
    int64_t ignore;
    ct_reduction red;
} ce_user;

static ct_status ce_forward(ct_function_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out) {
    (void)nin;
    ce_user *u = ct_ctx_user(ctx);
    ct_tensor *x = ct_contiguous(in[0]), *t = ct_contiguous(ct_to_dtype(in[1], CT_I64));
    /* half logits (autocast): softmax in float32 straight from them */
    bool half = x && ct_get_dtype(x) != CT_F32;
    ct_tensor *p = !x ? NULL : half ? ct__softmax_float(x, 1) : ct_contiguous(ct_softmax(x, 1));
    if (!x || !t || !p) return ct_last_error_code();
    int64_t N = ct_size(x, 0), C = ct_size(x, 1);
    const float *xp = half ? NULL : ct__ptr(x), *pp = ct__ptr(p);
    const int64_t *tp = ct__ptr(t);
    ct_tensor *l = ct_empty_on(CT_SHAPE(N), CT_F32, CT_CPU);
    if (!l) return ct_last_error_code();
    float *op = ct__ptr(l);
    double tot = 0;
    int64_t nvalid = 0;
    for (int64_t i = 0; i < N; i++) {
        if (tp[i] == u->ignore) {
            op[i] = 0.0f;
            continue;
        }
        float pt = pp[i * C + tp[i]];
        if (pt >= 1e-30f) {
            op[i] = -logf(pt);
        } else { /* p underflowed: the row's logsumexp in double */
            ct_tensor *xrow = half ? ct_to_dtype(ct_select(x, 0, i), CT_F32) : NULL;
            if (half && !xrow) return ct_last_error_code();
            const float *xr = half ? (const float *)ct__ptr(xrow) : xp + i * C;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < C; j++) mx = xr[j] > mx ? xr[j] : mx;
            for (int64_t j = 0; j < C; j++) sum += exp((double)xr[j] - mx);
            op[i] = (float)(mx + log(sum) - (double)xr[tp[i]]);
        }
        tot += op[i];
        nvalid++;
    }
    ct_tensor *r;
    if (u->red == CT_REDUCTION_NONE) r = l;
    else if (u->red == CT_REDUCTION_SUM) r = ct_full_on(NULL, 0, (float)tot, CT_F32, CT_CPU);
    else r = ct_full_on(NULL, 0, (float)(tot / (double)nvalid), CT_F32, CT_CPU); /* 0 valid: NaN, as torch */
    /* the user struct lives only through the forward: the backward's
     * settings are saved as a tensor */
    ct_tensor *cfg = ct_empty_on(CT_SHAPE(2), CT_I64, CT_CPU);
    if (!r || !cfg) return ct_last_error_code();
    ((int64_t *)ct__ptr(cfg))[0] = u->ignore;
    ((int64_t *)ct__ptr(cfg))[1] = (int64_t)u->red;
    /* the input itself (create_graph differentiates through it) and softmax */
    ct_tensor *save[4] = {in[0], t, cfg, p};
    if (ct_ctx_save_for_backward(ctx, save, 4)) return ct_last_error_code();
    out[0] = r;
    return CT_OK;
}

static ct_status ce_backward(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_tensor *x = ct_ctx_saved(ctx, 0), *t = ct_ctx_saved(ctx, 1), *cfg = ct_ctx_saved(ctx, 2);
    ct_tensor *p = ct_ctx_saved(ctx, 3);
    if (!x || !t || !cfg || !p) return ct_last_error_code();
    ce_user cu = {((const int64_t *)ct__ptr(cfg))[0], (ct_reduction)((const int64_t *)ct__ptr(cfg))[1]};
    const ce_user *u = &cu;
    gin[1] = NULL;
    int64_t N = ct_size(x, 0), C = ct_size(x, 1);
    const int64_t *tp = ct__ptr(t);
    int64_t nvalid = 0;
    for (int64_t i = 0; i < N; i++) nvalid += tp[i] != u->ignore;
    ct_tensor *g = ct_to_dtype(gout[0], CT_F32);
    if (!g) return ct_last_error_code();
    /* coef [N, 1] (the mean's division by n_valid folded in) */
    ct_tensor *valid = ct_to_dtype(ct_ne(t, ct_wrap_int(u->ignore)), CT_F32);
    ct_tensor *coef = u->red == CT_REDUCTION_NONE ? ct_mul(g, valid) : ct_mul(valid, g);
    if (u->red == CT_REDUCTION_MEAN) coef = ct_div_scalar(coef, (double)nvalid);
    coef = ct_unsqueeze(coef, 1);
    if (!coef) return ct_last_error_code();
    ct_dtype xdt = ct_get_dtype(x);
    if (ct_is_grad_enabled()) { /* create_graph: differentiable */
        ct_tensor *cls = ct_arange(0, (double)C, 1, CT_I64);
        ct_tensor *hot = ct_to_dtype(ct_eq(ct_unsqueeze(t, 1), ct_unsqueeze(cls, 0)), CT_F32);
        gin[0] = ct_mul(ct_sub(ct_softmax(ct_to_dtype(x, CT_F32), 1), hot), coef);
        if (xdt != CT_F32) gin[0] = ct_to_dtype(gin[0], xdt);
        return gin[0] ? CT_OK : ct_last_error_code();
    }
    if (xdt != CT_F32) { /* half logits: the gradient written in their dtype, rounded once */
        gin[0] = ct__ce_grad_lp(p, t, ct_reshape(coef, CT_SHAPE(N)), u->ignore, xdt);
        return gin[0] ? CT_OK : ct_last_error_code();
    }
    ct_tensor *d = ct_empty_on(CT_SHAPE(N, C), CT_F32, CT_CPU);
    coef = ct_contiguous(coef);
    if (!d || !coef) return ct_last_error_code();
    float *dp = ct__ptr(d);
    const float *pp = ct__ptr(p), *cp = ct__ptr(coef);
    int nt = ct_get_num_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (N * C > 65536)
    for (int64_t i = 0; i < N; i++) {
        float c = cp[i], *dr = dp + i * C;
        const float *pr = pp + i * C;
        for (int64_t j = 0; j < C; j++) dr[j] = pr[j] * c;
        if (tp[i] != u->ignore) dr[tp[i]] -= c;
    }
    gin[0] = d;
    return CT_OK;
}

static const ct_function_def k_ce_fused = {"CrossEntropyLoss", 1, ce_forward, ce_backward, NULL};

/* 0: not fusable (the caller runs the composite); 1: *y is the result (NULL on error) */
static int ce_fused(ct_tensor *input, ct_tensor *target, int64_t ignore, ct_reduction red, ct_tensor **y) {
    *y = NULL;
    ct_tensor *fwin[2] = {input, target};
    ct_dtype dt = ct_get_dtype(input);
    /* half logits only from ce_autocast_half (autocast on) */
    bool half_ok = (dt == CT_BF16 || dt == CT_F16) && ct__autocast_on();
    if (ct_ndim(input) != 2 || (dt != CT_F32 && !half_ok) || ct_get_device(input) != CT_CPU ||
        ct_ndim(target) != 1 || ct_get_device(target) != CT_CPU || ct_numel(input) == 0 ||
        !ct__has_host_data(input) || !ct__has_host_data(target) || ct__fw_on(fwin, 2) ||
        (red != CT_REDUCTION_MEAN && red != CT_REDUCTION_SUM && red != CT_REDUCTION_NONE))
        return 0;
    ce_user u = {ignore, red};
    ct_scope s = ct_scope_begin();
    ct_tensor *ins[2] = {input, target}, *r = NULL;
    if (ct_function_apply(&k_ce_fused, ins, 2, &u, &r)) r = NULL;
    *y = ct_keep(r);
    ct_scope_end(s);
    return 1;
}

/* Under autocast on the CPU, cross entropy over float16/bfloat16 logits
 * [N, C] with class-index targets, no class weight and no label smoothing
 * runs the fused function on the half logits themselves: the softmax in
 * float32 straight from them (softmax_float) and the gradient written in
 * their dtype, rounded once (ce_grad_lp).  Those are the values autocast's
 * float32 cast gives (the cast is exact, the gradient of the cast rounds
 * the float32 gradient once), without the float32 copy of the logits and
 * the cast of the gradient back: for GPT-2's [256, 50304] two passes over
 * 51 MB and two ops a step.  Not while tracing (the trace records the cast)
 * or under forward AD.  0: not taken (the ordinary path runs, and reports
 * any error itself). */
static int ce_autocast_half(ct_tensor *input, ct_tensor *target, const ct_cross_entropy_opts *opts,
                            ct_tensor **y) {
    if (!input || !target || ct__tracer() || !ct_autocast_is_enabled(CT_CPU) ) return 0;
    if (!opts) opts = &k_ce_defaults;
    ct_dtype dt = ct_get_dtype(input);
    ct_reduction red = opts->reduction;
    if ((dt != CT_BF16 && dt != CT_F16) || ct_get_device(input) != CT_CPU || ct_ndim(input) != 2 ||
        opts->weight || opts->label_smoothing != 0 || ct_dtype_is_floating(ct_get_dtype(target)) ||
        (red != CT_REDUCTION_MEAN && red != CT_REDUCTION_SUM && red != CT_REDUCTION_NONE))
        return 0;
    int64_t nclass;
    int64_t ignore = opts->has_ignore_index ? opts->ignore_index : -100;
    ct_status e = ct_last_error_code();
    if (check_nll_shapes("cross_entropy", input, target, &nclass) < 0 ||
        check_targets("cross_entropy", target, nclass, ignore) != CT_OK) {
        if (!e) ct_clear_error();
        return 0;
    }
    return ce_fused(input, target, ignore, red, y);
}

ct_tensor *ct_cross_entropy(ct_tensor *input, ct_tensor *target, const ct_cross_entropy_opts *opts) {
    static const char *op = "cross_entropy";
    ct_cross_entropy_opts ac_opts;
    ct_tensor *hy;
    if (ct__autocast_on() && ce_autocast_half(input, target, opts, &hy)) return hy;
    CT_AUTOCAST_OP(CT_AC_cross_entropy_loss,
                   ct_cross_entropy(CT_AC_ARG(0), CT_AC_ARG(1), opts_weight(opts, CT_AC_ARG(2), &ac_opts)), input,
                   target, opts ? opts->weight : NULL);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (!opts) opts = &k_ce_defaults;
    ct_reduction red = opts->reduction;
    if (bad_reduction(op, red, false)) return NULL;
    if (need_float(op, "input", input)) return NULL;
    double ls = opts->label_smoothing;
    if (!(ls >= 0 && ls <= 1))
        return ct__error(CT_ERR_ARG, "%s: label_smoothing must be between 0.0 and 1.0. Got: %g", op, ls);
    if (ct_ndim(input) < 1)
        return ct__error(CT_ERR_SHAPE, "%s: input must have at least 1 dim ([C] or [N, C, ...]), got %s", op,
                         ct__tshape(input));
    int cdim = ct_ndim(input) == 1 ? 0 : 1;
    int64_t nclass = ct_size(input, cdim);
    ct_tensor *weight = opts->weight;
    if (check_class_weight(op, weight, nclass)) return NULL;

    if (ct_dtype_is_floating(ct_get_dtype(target))) {
        /* class probabilities */
        if (!same_shape(input, target))
            return ct__error(CT_ERR_SHAPE, "%s: a target of class probabilities must have the input's shape %s, "
                             "got %s", op, ct__tshape(input), ct__tshape(target));
        if (opts->has_ignore_index && opts->ignore_index != -100)
            return ct__error(CT_ERR_ARG, "%s: ignore_index is not supported for floating point target", op);
        L_BEGIN;
        ct_tensor *logp = ct_log_softmax(input, cdim);
        ct_tensor *t = target;
        if (ls > 0) t = ct_add_scalar(ct_mul_scalar(target, 1 - ls), ls / (double)nclass);
        ct_tensor *prod = ct_mul(logp, t);
        if (weight) prod = ct_mul(prod, class_weight_view(weight, input, cdim));
        ct_tensor *r;
        int64_t cd = cdim;
        if (red == CT_REDUCTION_NONE) r = ct_neg(ct_sum(prod, &cd, 1, false));
        else if (red == CT_REDUCTION_SUM) r = ct_neg(ct_sum(prod, NULL, 0, false));
        else if (ct_numel(input) == 0) r = ct_full_on(NULL, 0, NAN, ct_get_dtype(input), ct_get_device(input));
        else r = ct_div_scalar(ct_neg(ct_sum(prod, NULL, 0, false)), (double)(ct_numel(input) / nclass));
        L_END(r);
    }

    /* class indices */
    int64_t nc2;
    if (check_nll_shapes(op, input, target, &nc2) < 0) return NULL;
    int64_t ignore = opts->has_ignore_index ? opts->ignore_index : -100;
    if (check_targets(op, target, nclass, ignore) != CT_OK) return NULL;
    ct_tensor *fy;
    if (!weight && ls == 0 && ce_fused(input, target, ignore, red, &fy)) return fy;
    L_BEGIN;
    ct_tensor *logp = ct_log_softmax(input, cdim);
    ct_tensor *w = NULL;
    ct_tensor *nll = nll_core(logp, target, cdim, weight, ignore, red, &w);
    if (ls == 0) L_END(nll);
    /* label smoothing: (1 - ls) nll + ls / C * smooth, where smooth is
     * -sum_c w_c logp_c over the targets not ignored */
    int64_t cd = cdim;
    ct_tensor *sm = weight ? ct_mul(logp, class_weight_view(weight, input, cdim)) : logp;
    sm = ct_neg(ct_sum(sm, &cd, 1, false));
    ct_tensor *ignored = ct_eq(ct_to_dtype(target, CT_I64), ct_wrap_int(ignore));
    sm = ct_masked_fill(sm, ignored, 0.0);
    ct_tensor *ret;
    if (red == CT_REDUCTION_NONE) ret = sm;
    else if (red == CT_REDUCTION_SUM) ret = ct_sum(sm, NULL, 0, false);
    else if (weight) ret = ct_div(ct_sum(sm, NULL, 0, false), ct_sum(w, NULL, 0, false));
    else ret = ct_div(ct_sum(sm, NULL, 0, false),
                      ct_sum_dtype(ct_logical_not(ignored), NULL, 0, false, ct_get_dtype(input)));
    L_END(ct_add(ct_mul_scalar(nll, 1 - ls), ct_mul_scalar(ret, ls / (double)nclass)));
}

/* ---- binary cross entropy ----------------------------------------------------- */
ct_tensor *ct_binary_cross_entropy(ct_tensor *input, ct_tensor *target, ct_tensor *weight,
                                   ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_binary_cross_entropy,
                   ct_binary_cross_entropy(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), reduction), input, target,
                   weight);
    static const char *op = "binary_cross_entropy";
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction(op, reduction, false)) return NULL;
    if (need_float(op, "input", input) || need_float(op, "target", target) || need_float(op, "weight", weight))
        return NULL;
    if (!same_shape(input, target))
        return ct__error(CT_ERR_SHAPE, "%s: using a target size (%s) that is different to the input size (%s) "
                         "is not supported; please ensure they have the same size", op, ct__tshape(target),
                         ct__tshape(input));
    L_BEGIN;
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *outside = ct_logical_not(ct_logical_and(ct_ge(input, ct_wrap(0.0)), ct_le(input, ct_wrap(1.0))));
    bool bad = ct__has_host_data(input) && any_true(outside); /* meta: no values to check */
    ct_set_grad_enabled(prev);
    if (!outside) L_FAIL();
    if (bad) {
        ct__error(CT_ERR_ARG, "%s: all elements of input should be between 0 and 1", op);
        L_FAIL();
    }
    ct_tensor *logx = ct_clamp(ct_log(input), -100.0, NAN);
    ct_tensor *log1mx = ct_clamp(ct_log(ct_add_scalar(ct_neg(input), 1.0)), -100.0, NAN);
    /* (target - 1) * log(1 - x) - target * log(x) */
    ct_tensor *l = ct_sub(ct_mul(ct_sub_scalar(target, 1.0), log1mx), ct_mul(target, logx));
    if (weight) l = ct_mul(l, weight);
    L_END(reduce(l, reduction));
}

ct_tensor *ct_binary_cross_entropy_with_logits(ct_tensor *input, ct_tensor *target, ct_tensor *weight,
                                               ct_reduction reduction, ct_tensor *pos_weight) {
    CT_AUTOCAST_OP(CT_AC_binary_cross_entropy_with_logits,
                   ct_binary_cross_entropy_with_logits(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), reduction,
                                                       CT_AC_ARG(3)), input, target, weight, pos_weight);
    static const char *op = "binary_cross_entropy_with_logits";
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction(op, reduction, false)) return NULL;
    if (need_float(op, "input", input) || need_float(op, "target", target) ||
        need_float(op, "weight", weight) || need_float(op, "pos_weight", pos_weight))
        return NULL;
    if (!same_shape(input, target))
        return ct__error(CT_ERR_SHAPE, "%s: target size (%s) must be the same as input size (%s)", op,
                         ct__tshape(target), ct__tshape(input));
    L_BEGIN;
    /* m = max(-x, 0); softplus(-x) = m + log(exp(-m) + exp(-x - m)) */
    ct_tensor *m = ct_clamp(ct_neg(input), 0.0, NAN);
    ct_tensor *sp = ct_add(ct_log(ct_add(ct_exp(ct_neg(m)), ct_exp(ct_sub(ct_neg(input), m)))), m);
    ct_tensor *l = ct_mul(ct_add_scalar(ct_neg(target), 1.0), input); /* (1 - t) x */
    if (pos_weight) {
        ct_tensor *lw = ct_add_scalar(ct_mul(ct_sub_scalar(pos_weight, 1.0), target), 1.0);
        l = ct_add(l, ct_mul(lw, sp));
    } else {
        l = ct_add(l, sp);
    }
    if (weight) l = ct_mul(l, weight);
    L_END(reduce(l, reduction));
}

/* ---- divergences and likelihoods ------------------------------------------------ */
ct_tensor *ct_kl_div(ct_tensor *input, ct_tensor *target, ct_reduction reduction, bool log_target) {
    CT_AUTOCAST_OP(CT_AC_kl_div, ct_kl_div(CT_AC_ARG(0), CT_AC_ARG(1), reduction, log_target), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("kl_div", reduction, true)) return NULL;
    L_BEGIN;
    ct_tensor *l = log_target ? ct_mul(ct_exp(target), ct_sub(target, input))
                              : ct_sub(ct_xlogy(target, target), ct_mul(target, input));
    ct_tensor *r;
    if (reduction == CT_REDUCTION_BATCHMEAN) {
        r = ct_sum(l, NULL, 0, false);
        if (l && ct_ndim(l) > 0) r = ct_div_scalar(r, (double)ct_size(l, 0));
    } else {
        r = reduce(l, reduction);
    }
    L_END(r);
}

ct_tensor *ct_poisson_nll_loss(ct_tensor *input, ct_tensor *target, bool log_input, bool full, double eps,
                               ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_poisson_nll_loss,
                   ct_poisson_nll_loss(CT_AC_ARG(0), CT_AC_ARG(1), log_input, full, eps, reduction), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("poisson_nll_loss", reduction, false)) return NULL;
    L_BEGIN;
    ct_tensor *l = log_input ? ct_sub(ct_exp(input), ct_mul(target, input))
                             : ct_sub(input, ct_mul(target, ct_log(ct_add_scalar(input, eps))));
    if (full) {
        /* Stirling: t log t - t + 0.5 log(2 pi t), where t > 1 */
        ct_tensor *st = ct_add(ct_sub(ct_mul(target, ct_log(target)), target),
                               ct_mul_scalar(ct_log(ct_mul_scalar(target, 2 * M_PI)), 0.5));
        st = ct_masked_fill(st, ct_le(target, ct_wrap(1.0)), 0.0);
        l = ct_add(l, st);
    }
    L_END(reduce(l, reduction));
}

ct_tensor *ct_gaussian_nll_loss(ct_tensor *input, ct_tensor *target, ct_tensor *var, bool full, double eps,
                                ct_reduction reduction) {
    static const char *op = "gaussian_nll_loss";
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    CT_NULLCHECK(var);
    if (bad_reduction(op, reduction, false)) return NULL;
    int nd = ct_ndim(input), nv = ct_ndim(var);
    bool unsq = false;
    if (!same_shape(input, var)) {
        const int64_t *si = ct_sizes(input), *sv = ct_sizes(var);
        if (nd >= 1 && nv == nd - 1 && memcmp(si, sv, sizeof(int64_t) * (size_t)nv) == 0)
            unsq = true; /* homoscedastic: var lacks the last dim */
        else if (!(nd >= 1 && nv == nd && memcmp(si, sv, sizeof(int64_t) * (size_t)(nd - 1)) == 0 &&
                   sv[nv - 1] == 1))
            return ct__error(CT_ERR_SHAPE, "%s: var is of incorrect size %s for input %s", op, ct__tshape(var),
                             ct__tshape(input));
    }
    L_BEGIN;
    bool prev = ct_set_grad_enabled(false);
    bool neg = any_true(ct_lt_scalar(var, 0.0));
    ct_set_grad_enabled(prev);
    if (neg) {
        ct__error(CT_ERR_ARG, "%s: var has negative entry/entries", op);
        L_FAIL();
    }
    ct_tensor *v = unsq ? ct_unsqueeze(var, -1) : var;
    /* clamped at eps; the clamp does not stop the gradient (torch clamps a
     * clone in place under no_grad) */
    v = ct_add(v, ct_detach(ct_sub(ct_clamp(v, eps, NAN), v)));
    ct_tensor *l = ct_mul_scalar(ct_add(ct_log(v), ct_div(ct_square(ct_sub(input, target)), v)), 0.5);
    if (full) l = ct_add_scalar(l, 0.5 * log(2 * M_PI));
    L_END(reduce(l, reduction));
}

/* ---- embedding and ranking losses --------------------------------------------- */
ct_tensor *ct_cosine_embedding_loss(ct_tensor *x1, ct_tensor *x2, ct_tensor *target, double margin,
                                    ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_cosine_embedding_loss,
                   ct_cosine_embedding_loss(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), margin, reduction), x1, x2,
                   target);
    static const char *op = "cosine_embedding_loss";
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    CT_NULLCHECK(target);
    if (bad_reduction(op, reduction, false)) return NULL;
    int td = ct_ndim(target);
    if (td != 0 && td != 1)
        return ct__error(CT_ERR_SHAPE, "%s: 0D or 1D target tensor expected, multi-target not supported, got %s",
                         op, ct__tshape(target));
    if (td == 1 && (ct_ndim(x1) != 2 || ct_ndim(x2) != 2))
        return ct__error(CT_ERR_SHAPE, "%s: 1D target tensor expects 2D input tensors, but found inputs with "
                         "sizes %s and %s", op, ct__tshape(x1), ct__tshape(x2));
    if (td == 0 && (ct_ndim(x1) != 1 || ct_ndim(x2) != 1))
        return ct__error(CT_ERR_SHAPE, "%s: 0D target tensor expects 1D input tensors, but found inputs with "
                         "sizes %s and %s", op, ct__tshape(x1), ct__tshape(x2));
    L_BEGIN;
    int64_t d = td;
    const double EPS = 1e-12;
    ct_tensor *prod = ct_sum(ct_mul(x1, x2), &d, 1, false);
    ct_tensor *m1 = ct_add_scalar(ct_sum(ct_mul(x1, x1), &d, 1, false), EPS);
    ct_tensor *m2 = ct_add_scalar(ct_sum(ct_mul(x2, x2), &d, 1, false), EPS);
    ct_tensor *cosv = ct_div(prod, ct_sqrt(ct_mul(m1, m2)));
    ct_tensor *zero = zero_like_scalar(x1);
    ct_tensor *pos = ct_add_scalar(ct_neg(cosv), 1.0);
    ct_tensor *negp = ct_clamp(ct_sub_scalar(cosv, margin), 0.0, NAN);
    ct_tensor *l = ct_add(ct_where(ct_eq(target, ct_wrap(1.0)), pos, zero),
                          ct_where(ct_eq(target, ct_wrap(-1.0)), negp, zero));
    L_END(reduce(l, reduction));
}

ct_tensor *ct_margin_ranking_loss(ct_tensor *x1, ct_tensor *x2, ct_tensor *target, double margin,
                                  ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_margin_ranking_loss,
                   ct_margin_ranking_loss(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), margin, reduction), x1, x2,
                   target);
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    CT_NULLCHECK(target);
    if (bad_reduction("margin_ranking_loss", reduction, false)) return NULL;
    L_BEGIN;
    ct_tensor *l = ct_clamp(ct_add_scalar(ct_mul(ct_neg(target), ct_sub(x1, x2)), margin), 0.0, NAN);
    L_END(reduce(l, reduction));
}

ct_tensor *ct_hinge_embedding_loss(ct_tensor *input, ct_tensor *target, double margin, ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_hinge_embedding_loss,
                   ct_hinge_embedding_loss(CT_AC_ARG(0), CT_AC_ARG(1), margin, reduction), input, target);
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction("hinge_embedding_loss", reduction, false)) return NULL;
    L_BEGIN;
    ct_tensor *zero = zero_like_scalar(input);
    ct_tensor *mc = ct_clamp(ct_add_scalar(ct_neg(input), margin), 0.0, NAN);
    ct_tensor *l = ct_add(ct_where(ct_ne(target, ct_wrap(1.0)), mc, zero),
                          ct_where(ct_ne(target, ct_wrap(-1.0)), input, zero));
    L_END(reduce(l, reduction));
}

ct_tensor *ct_triplet_margin_loss(ct_tensor *anchor, ct_tensor *positive, ct_tensor *negative, double margin,
                                  double p, double eps, bool swap, ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_triplet_margin_loss,
                   ct_triplet_margin_loss(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), margin, p, eps, swap, reduction),
                   anchor, positive, negative);
    static const char *op = "triplet_margin_loss";
    CT_NULLCHECK(anchor);
    CT_NULLCHECK(positive);
    CT_NULLCHECK(negative);
    if (bad_reduction(op, reduction, false)) return NULL;
    int a = ct_ndim(anchor);
    if (ct_ndim(positive) != a || ct_ndim(negative) != a)
        return ct__error(CT_ERR_SHAPE, "%s: the anchor, positive, and negative tensors are expected to have the "
                         "same number of dimensions, but got: anchor %s, positive %s, negative %s", op,
                         ct__tshape(anchor), ct__tshape(positive), ct__tshape(negative));
    if (!(margin > 0))
        return ct__error(CT_ERR_ARG, "%s: margin must be greater than 0, got %g", op, margin);
    L_BEGIN;
    ct_tensor *dp = ct_pairwise_distance(anchor, positive, p, eps, false);
    ct_tensor *dn = ct_pairwise_distance(anchor, negative, p, eps, false);
    if (swap) dn = ct_minimum(dn, ct_pairwise_distance(positive, negative, p, eps, false));
    ct_tensor *l = ct_clamp(ct_add_scalar(ct_sub(dp, dn), margin), 0.0, NAN);
    L_END(reduce(l, reduction));
}

ct_tensor *ct_multi_margin_loss(ct_tensor *input, ct_tensor *target, int64_t p, double margin, ct_tensor *weight,
                                ct_reduction reduction) {
    CT_AUTOCAST_OP(CT_AC_multi_margin_loss,
                   ct_multi_margin_loss(CT_AC_ARG(0), CT_AC_ARG(1), p, margin, CT_AC_ARG(2), reduction), input, target,
                   weight);
    static const char *op = "multi_margin_loss";
    CT_NULLCHECK(input);
    CT_NULLCHECK(target);
    if (bad_reduction(op, reduction, false)) return NULL;
    if (p != 1 && p != 2) return ct__error(CT_ERR_ARG, "%s: only p == 1 and p == 2 supported, got %lld", op, (long long)p);
    if (need_float(op, "input", input)) return NULL;
    int nd = ct_ndim(input);
    if (nd > 2 || (nd == 2 && ct_size(input, 1) == 0) || (nd < 2 && ct_numel(input) == 0))
        return ct__error(CT_ERR_SHAPE, "%s: expected non-empty vector or matrix with optional 0-dim batch size, "
                         "but got: %s", op, ct__tshape(input));
    int64_t nb = nd == 2 ? ct_size(input, 0) : 1, nclass = nd == 0 ? 1 : ct_size(input, -1);
    if (!ct_dtype_is_integral(ct_get_dtype(target), false) || ct_numel(target) != nb || ct_ndim(target) > 1 ||
        (nd == 2 && ct_ndim(target) != 1))
        return ct__error(CT_ERR_SHAPE, "%s: inconsistent target size: got %s (%s) for input of size %s", op,
                         ct__tshape(target), ct_dtype_name(ct_get_dtype(target)), ct__tshape(input));
    if (check_class_weight(op, weight, nclass)) return NULL;
    if (check_targets(op, target, nclass, INT64_MIN) != CT_OK) return NULL;
    L_BEGIN;
    ct_tensor *x = ct_reshape(input, (int64_t[]){nb, nclass}, 2);
    ct_tensor *t = ct_reshape(ct_to_dtype(target, CT_I64), (int64_t[]){nb, 1}, 2);
    ct_tensor *xy = ct_gather(x, 1, t);                              /* [N, 1] */
    ct_tensor *z = ct_clamp(ct_add(ct_add_scalar(ct_neg(xy), margin), x), 0.0, NAN);
    ct_tensor *h = p == 1 ? z : ct_square(z);
    if (weight) h = ct_mul(h, ct_unsqueeze(ct_index_select(weight, 0, ct_reshape(t, (int64_t[]){nb}, 1)), 1));
    ct_tensor *cls = ct_unsqueeze(iota_on(nclass, ct_get_device(t)), 0);           /* [1, C] */
    h = ct_where(ct_ne(cls, t), h, zero_like_scalar(input));
    int64_t one = 1;
    ct_tensor *l = ct_div_scalar(ct_sum(h, &one, 1, false), (double)nclass);  /* [N] */
    if (nd < 2) l = ct_reshape(l, NULL, 0);
    L_END(reduce(l, reduction));
}

/* ---- CTC ------------------------------------------------------------------------- */
/* A stand-in for log(0) that keeps the recursion's gradients finite
 * (logsumexp of all -inf would give NaN weights); losses above CTC_INF_AT
 * are impossible alignments. */
#define CTC_NEG (-1e30)
#define CTC_INF_AT (1e29)

static int64_t *read_i64(ct_tensor *t, int64_t *n) {
    if (!ct__need_data("ctc_loss", t)) return NULL; /* the recursion runs over the lengths' values */
    ct_tensor *c = ct__contig_as(t, CT_I64);
    if (!c) return NULL;
    *n = ct_numel(c);
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(*n ? *n : 1));
    if (v) memcpy(v, ct__ptr(c), sizeof(int64_t) * (size_t)*n);
    else ct__error(CT_ERR_OOM, "ctc_loss: out of memory");
    ct_release(c);
    return v;
}

ct_tensor *ct_ctc_loss(ct_tensor *log_probs, ct_tensor *targets, ct_tensor *input_lengths,
                       ct_tensor *target_lengths, int64_t blank, ct_reduction reduction, bool zero_infinity) {
    CT_AUTOCAST_OP(CT_AC_ctc_loss,
                   ct_ctc_loss(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), CT_AC_ARG(3), blank, reduction, zero_infinity),
                   log_probs, targets, input_lengths, target_lengths);
    static const char *op = "ctc_loss";
    CT_NULLCHECK(log_probs);
    CT_NULLCHECK(targets);
    CT_NULLCHECK(input_lengths);
    CT_NULLCHECK(target_lengths);
    if (bad_reduction(op, reduction, false)) return NULL;
    ct_dtype dt = ct_get_dtype(log_probs);
    if (dt != CT_F32 && dt != CT_F64)
        return ct__error(CT_ERR_DTYPE, "%s: log_probs must be float32 or float64, got %s", op, ct_dtype_name(dt));
    bool unbatched = ct_ndim(log_probs) == 2;
    if (ct_ndim(log_probs) != 3 && !unbatched)
        return ct__error(CT_ERR_SHAPE, "%s: log_probs must be [T, N, C] or [T, C], got %s", op, ct__tshape(log_probs));
    if (!ct_dtype_is_integral(ct_get_dtype(targets), false) ||
        !ct_dtype_is_integral(ct_get_dtype(input_lengths), false) ||
        !ct_dtype_is_integral(ct_get_dtype(target_lengths), false))
        return ct__error(CT_ERR_DTYPE, "%s: targets, input_lengths and target_lengths must be integer tensors, "
                         "got %s, %s, %s", op, ct_dtype_name(ct_get_dtype(targets)),
                         ct_dtype_name(ct_get_dtype(input_lengths)), ct_dtype_name(ct_get_dtype(target_lengths)));
    int64_t T = ct_size(log_probs, 0), N = unbatched ? 1 : ct_size(log_probs, 1), C = ct_size(log_probs, -1);
    if (blank < 0 || blank >= C)
        return ct__error(CT_ERR_INDEX, "%s: blank must be in label range [0, %lld), got %lld", op, (long long)C,
                         (long long)blank);
    int64_t nil, ntl, ntg;
    int64_t *il = NULL, *tl = NULL, *tg = NULL, *ext = NULL;
    bool *skip = NULL;
    ct_tensor *result = NULL;
    il = read_i64(input_lengths, &nil);
    tl = read_i64(target_lengths, &ntl);
    tg = read_i64(targets, &ntg);
    if (!il || !tl || !tg) goto done;
    if (nil != N || ntl != N) {
        ct__error(CT_ERR_SHAPE, "%s: input_lengths (%s) and target_lengths (%s) must have %lld entries, one per "
                  "batch element", op, ct__tshape(input_lengths), ct__tshape(target_lengths), (long long)N);
        goto done;
    }
    /* targets: padded [N, S] (or [S] unbatched) or concatenated 1-D */
    bool padded = unbatched ? true : ct_ndim(targets) == 2;
    int64_t S = 0;
    if (padded) {
        if ((unbatched && ct_ndim(targets) != 1) || (!unbatched && ct_size(targets, 0) != N)) {
            ct__error(CT_ERR_SHAPE, "%s: targets %s do not match the batch of log_probs %s", op, ct__tshape(targets),
                      ct__tshape(log_probs));
            goto done;
        }
        S = ct_size(targets, -1);
    } else if (ct_ndim(targets) != 1) {
        ct__error(CT_ERR_SHAPE, "%s: targets must be [N, S] or 1-D (concatenated), got %s", op, ct__tshape(targets));
        goto done;
    }
    int64_t smax = 0, tmax = 0, total = 0;
    for (int64_t b = 0; b < N; b++) {
        if (il[b] < 1 || il[b] > T) {
            ct__error(CT_ERR_ARG, "%s: expected input_lengths to have values in [1, %lld], but got %lld", op,
                      (long long)T, (long long)il[b]);
            goto done;
        }
        if (tl[b] < 0 || (padded && tl[b] > S)) {
            ct__error(CT_ERR_ARG, "%s: target length %lld of batch element %lld is out of range [0, %lld]", op,
                      (long long)tl[b], (long long)b, (long long)(padded ? S : ntg));
            goto done;
        }
        total += tl[b];
        if (tl[b] > smax) smax = tl[b];
        if (il[b] > tmax) tmax = il[b];
    }
    if (!padded && total > ntg) {
        ct__error(CT_ERR_SHAPE, "%s: target_lengths sum to %lld but the concatenated targets have %lld entries", op,
                  (long long)total, (long long)ntg);
        goto done;
    }
    int64_t L = 2 * smax + 1;
    size_t nl = (size_t)(N > 0 ? N : 1) * (size_t)L;
    ext = malloc(sizeof(int64_t) * nl);
    skip = malloc(sizeof(bool) * nl);
    if (!ext || !skip) {
        ct__error(CT_ERR_OOM, "%s: out of memory", op);
        goto done;
    }
    int64_t off = 0;
    for (int64_t b = 0; b < N; b++) {
        const int64_t *tb = padded ? tg + b * S : tg + off;
        off += tl[b];
        for (int64_t s = 0; s < L; s++) {
            int64_t lab = blank;
            if ((s & 1) && s / 2 < tl[b]) {
                lab = tb[s / 2];
                if (lab < 0 || lab >= C) {
                    ct__error(CT_ERR_INDEX, "%s: target %lld is out of bounds for %lld classes", op, (long long)lab,
                              (long long)C);
                    goto done;
                }
            }
            ext[b * L + s] = lab;
            skip[b * L + s] = s >= 2 && lab != blank && lab != ext[b * L + s - 2];
        }
    }
    {
        L_BEGIN;
        ct_tensor *lp = unbatched ? ct_unsqueeze(log_probs, 1) : log_probs;          /* [T, N, C] */
        ct_tensor *ext_t = ct_from_array(ext, (int64_t[]){1, N, L}, 3, CT_I64);
        ct_tensor *skip_t = ct_from_array(skip, (int64_t[]){N, L}, 2, CT_BOOL);
        ct_tensor *lpe = ct_gather(lp, 2, ct_expand(ext_t, (int64_t[]){T, N, L}, 3)); /* [T, N, L] */
        ct_tensor *negs = ct_full_on((int64_t[]){N, L}, 2, CTC_NEG, dt, CT_CPU);
        ct_tensor *neg2 = ct_full_on((int64_t[]){N, 2}, 2, CTC_NEG, dt, CT_CPU);
        ct_tensor *sidx = ct_unsqueeze(iota_on(L, CT_CPU), 0);                         /* [1, L] */
        ct_tensor *a = ct_where(ct_lt_scalar(sidx, 2.0), ct_select(lpe, 0, 0), negs);
        ct_tensor *ilt = ct_unsqueeze(ct_from_array(il, &N, 1, CT_I64), 1);           /* [N, 1] */
        for (int64_t t = 1; t < tmax && a; t++) {
            ct_scope step = ct_scope_begin();
            ct_tensor *ap = ct_cat((ct_tensor *[]){neg2, a}, 2, 1);                    /* [N, L + 2] */
            ct_tensor *a1 = ct_slice(ap, 1, 1, L + 1, 1);
            ct_tensor *a2 = ct_where(skip_t, ct_slice(ap, 1, 0, L, 1), negs);
            ct_tensor *lse = ct_logsumexp(ct_stack((ct_tensor *[]){a, a1, a2}, 3, 0), CT_SHAPE(0), false);
            ct_tensor *an = ct_add(lse, ct_select(lpe, 0, t));
            an = ct_where(ct_gt_scalar(ilt, (double)t), an, a);
            if (an) ct_keep(an);
            ct_scope_end(step);
            a = an;
        }
        int64_t *fi = malloc(sizeof(int64_t) * (size_t)(2 * N));
        if (!fi) {
            ct__error(CT_ERR_OOM, "%s: out of memory", op);
            ct_scope_end(l_scope__);
            goto done;
        }
        for (int64_t b = 0; b < N; b++) {
            fi[2 * b] = 2 * tl[b];
            fi[2 * b + 1] = tl[b] > 0 ? 2 * tl[b] - 1 : 0;
        }
        ct_tensor *fidx = ct_from_array(fi, (int64_t[]){N, 2}, 2, CT_I64);
        free(fi);
        ct_tensor *tlt = ct_from_array(tl, &N, 1, CT_I64);
        ct_tensor *fin = ct_gather(a, 1, fidx);                                     /* [N, 2] */
        ct_tensor *has2 = ct_cat((ct_tensor *[]){ct_full_on((int64_t[]){N, 1}, 2, 1, CT_BOOL, CT_CPU),
                                                 ct_unsqueeze(ct_gt_scalar(tlt, 0.0), 1)}, 2, 1);
        fin = ct_where(has2, fin, ct_full_on(NULL, 0, CTC_NEG, dt, CT_CPU));
        ct_tensor *loss = ct_neg(ct_logsumexp(fin, CT_SHAPE(1), false));             /* [N] */
        ct_tensor *feasible = ct_lt_scalar(loss, CTC_INF_AT);
        loss = ct_where(feasible, loss, ct_full_on(NULL, 0, zero_infinity ? 0.0 : INFINITY, dt, CT_CPU));
        ct_tensor *r;
        if (reduction == CT_REDUCTION_MEAN)
            r = ct_mean(ct_div(loss, ct_clamp(ct_to_dtype(tlt, dt), 1.0, NAN)), NULL, 0, false);
        else if (reduction == CT_REDUCTION_SUM)
            r = ct_sum(loss, NULL, 0, false);
        else
            r = unbatched ? ct_reshape(loss, NULL, 0) : loss;
        if (r) ct_keep(r);
        ct_scope_end(l_scope__);
        result = r;
    }
done:
    free(il);
    free(tl);
    free(tg);
    free(ext);
    free(skip);
    return result;
}
