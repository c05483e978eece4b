/* norm_ops.c -- the fused layer_norm / rms_norm ops (kernels in
 * src/backend/cpu/norm.c).  Not recorded by autograd: src/nn/norm.c wraps
 * them in a custom function whose backward runs layer_norm_bwd (or, when
 * the backward pass builds a graph, the composite formula). */
#include "ew.h"
#include "reduce_impl.h"

static ct_status ln_check(const char *op, ct_tensor *t, ct_dtype dt, int64_t n) {
    if (!t) return CT_OK;
    if (t->dtype != dt || !ct__is_contiguous(t))
        return ct__error_status(CT_ERR_ARG, "%s: expected contiguous %s tensors, got %s %s", op,
                                ct_dtype_name(dt), ct_dtype_name(t->dtype), ct__tshape(t));
    if (n >= 0 && ct_numel(t) != n)
        return ct__error_status(CT_ERR_SHAPE, "%s: expected %lld elements, got %s", op,
                                (long long)n, ct__tshape(t));
    return CT_OK;
}

ct_status ct__layer_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t n, double eps,
                             int rms, ct_tensor **y, ct_tensor **mean, ct_tensor **rstd) {
    *y = *mean = *rstd = NULL;
    CT_NULLCHECK_S(x);
    const char *op = rms ? "rms_norm" : "layer_norm";
    if (x->dtype != CT_F32 && x->dtype != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "%s: fused kernel needs float32 or float64, got %s",
                                op, ct_dtype_name(x->dtype));
    if (n <= 0 || ct_numel(x) % n)
        return ct__error_status(CT_ERR_SHAPE, "%s: %s does not split into rows of %lld", op,
                                ct__tshape(x), (long long)n);
    if (ln_check(op, x, x->dtype, -1) || ln_check(op, w, x->dtype, n) || ln_check(op, b, x->dtype, n))
        return ct_last_error_code();
    int64_t M = ct_numel(x) / n;
    ct_args a = ct__args(CT_OP_layer_norm_fwd);
    a.p.layer_norm.normalized_numel = n;
    a.p.layer_norm.has_weight = w != NULL;
    a.p.layer_norm.has_bias = b != NULL;
    a.p.layer_norm.rms = rms;
    a.p.layer_norm.eps = eps;
    ct_tensor *o[3] = {ct__alloc(x->sizes, x->ndim, x->dtype, CT_CPU),
                       ct__alloc(&M, 1, x->dtype, CT_CPU), ct__alloc(&M, 1, x->dtype, CT_CPU)};
    ct_tensor *in[3] = {x, NULL, NULL};
    int nin = 1;
    if (w) in[nin++] = w;
    if (b) in[nin++] = b;
    if (!o[0] || !o[1] || !o[2] || ct__dispatch(CT_OP_layer_norm_fwd, o, 3, in, nin, &a)) {
        for (int k = 0; k < 3; k++) ct_release(o[k]);
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    *y = ct__register(o[0]);
    *mean = ct__register(o[1]);
    *rstd = ct__register(o[2]);
    return CT_OK;
}

ct_status ct__layer_norm_bwd(ct_tensor *g, ct_tensor *x, ct_tensor *mean, ct_tensor *rstd,
                             ct_tensor *w, int64_t n, int rms, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db) {
    *dx = *dw = *db = NULL;
    CT_NULLCHECK_S(g);
    CT_NULLCHECK_S(x);
    CT_NULLCHECK_S(mean);
    CT_NULLCHECK_S(rstd);
    const char *op = rms ? "rms_norm_backward" : "layer_norm_backward";
    if (x->dtype != CT_F32 && x->dtype != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "%s: fused kernel needs float32 or float64, got %s",
                                op, ct_dtype_name(x->dtype));
    if (n <= 0 || ct_numel(x) % n)
        return ct__error_status(CT_ERR_SHAPE, "%s: %s does not split into rows of %lld", op,
                                ct__tshape(x), (long long)n);
    int64_t M = ct_numel(x) / n;
    if (ln_check(op, x, x->dtype, -1) || ln_check(op, g, x->dtype, ct_numel(x)) ||
        ln_check(op, mean, x->dtype, M) || ln_check(op, rstd, x->dtype, M) ||
        ln_check(op, w, x->dtype, n))
        return ct_last_error_code();
    ct_args a = ct__args(CT_OP_layer_norm_bwd);
    a.p.layer_norm.normalized_numel = n;
    a.p.layer_norm.has_weight = w != NULL;
    a.p.layer_norm.rms = rms;
    ct_tensor *o[3] = {ct__alloc(x->sizes, x->ndim, x->dtype, CT_CPU),
                       want_dw ? ct__alloc(&n, 1, x->dtype, CT_CPU) : NULL,
                       want_db ? ct__alloc(&n, 1, x->dtype, CT_CPU) : NULL};
    ct_tensor *in[5] = {g, x, mean, rstd, w};
    if (!o[0] || (want_dw && !o[1]) || (want_db && !o[2]) ||
        ct__dispatch(CT_OP_layer_norm_bwd, o, 3, in, w ? 5 : 4, &a)) {
        for (int k = 0; k < 3; k++) ct_release(o[k]);
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    *dx = ct__register(o[0]);
    *dw = o[1] ? ct__register(o[1]) : NULL;
    *db = o[2] ? ct__register(o[2]) : NULL;
    return CT_OK;
}
