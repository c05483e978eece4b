/* norm_ops.c -- the fused layer_norm / rms_norm table ops layer_norm_fwd /
 * layer_norm_bwd (kernels in src/backend/cpu/norm.c) and their composite
 * fallbacks, written with public ops, that a device without the kernel runs
 * (or every device, when a test disabled the kernel: src/ops/fused.h).
 * Over rows of n elements, x seen as [M, n]:
 *   fwd:  mean = sum(x)/n (0 for rms_norm), rstd = 1/sqrt(mean((x-mean)^2) + eps),
 *         y = (x - mean) * rstd * w + b
 *   bwd:  xh = (x - mean) * rstd, gw = g * w,
 *         dx = (gw - mean(gw) - xh * mean(gw * xh)) * rstd (rms_norm: without mean(gw)),
 *         dw = sum over rows of g * xh, db = sum over rows of g.
 * Not recorded by autograd: src/nn/norm.c wraps them in a custom function
 * whose backward runs layer_norm_bwd (or, when the backward pass builds a
 * graph, the composite formula). */
#include "ew.h"
#include "fused.h"
#include "meta.h"
#include "reduce_impl.h"

/* t (when given): x's dtype and device, n elements when n >= 0 */
static ct_status ln_check(const char *op, const char *what, ct_tensor *t, ct_tensor *x, int64_t n) {
    if (!t) return CT_OK;
    if (t->dtype != x->dtype || !ct__same_device(t, x))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected %s of dtype %s on %s, got %s on %s", op, what,
                                ct_dtype_name(x->dtype), ct_device_name(x->storage->device),
                                ct_dtype_name(t->dtype), ct_device_name(t->storage->device));
    if (n >= 0 && ct_numel(t) != n)
        return ct__error_status(CT_ERR_SHAPE, "%s: expected %s of %lld elements, got %s", op, what,
                                (long long)n, ct__tshape(t));
    return CT_OK;
}

static ct_status ln_check_x(const char *op, ct_op kop, ct_tensor *x, int64_t n) {
    /* f16/bf16 where the device's kernel computes them (ct__half_native) */
    if (x->dtype != CT_F32 && x->dtype != CT_F64 && !ct__half_native(x->storage->device, kop, x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: fused kernel needs float32 or float64, got %s",
                                op, ct_dtype_name(x->dtype));
    if (n <= 0 || ct_numel(x) % n)
        return ct__error_status(CT_ERR_SHAPE, "%s: %s does not split into rows of %lld", op,
                                ct__tshape(x), (long long)n);
    return CT_OK;
}

/* when every wanted o[j] is there: moves o[0..k) (the non-NULL ones) past
 * the scope s to the enclosing one and returns CT_OK; else they go with s
 * and are set to NULL.  Ends s. */
static ct_status keep_all(ct_scope s, ct_tensor **o, const bool *want, int k) {
    bool ok = true;
    for (int j = 0; j < k; j++) ok = ok && (!want[j] || o[j]);
    for (int j = 0; j < k; j++) {
        if (ok && o[j]) ct_keep(o[j]);
        else o[j] = NULL;
    }
    ct_scope_end(s);
    if (ok) return CT_OK;
    return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
}

/* ---- the meta function ------------------------------------------------------ */
/* The two ops' inputs (the kernels' order; the optional ones as the params
 * has_weight / has_bias say), rows of n = normalized_numel elements, M rows:
 *   fwd:  x, [w], [b]             -> y [x], mean [M], rstd [M]
 *   bwd:  g, x, mean, rstd, [w]   -> dx [x], dw [n], db [n] (the caller
 *         allocates the ones it wants) */
CT_META_FN(ct__meta_layer_norm) {
    const ct_p_layer_norm *p = &a->p.layer_norm;
    int64_t n = p->normalized_numel;
    bool bwd = a->op == CT_OP_layer_norm_bwd;
    const char *op = bwd ? (p->rms ? "rms_norm_backward" : "layer_norm_backward") : (p->rms ? "rms_norm" : "layer_norm");
    int want = bwd ? 4 + (p->has_weight != 0) : 1 + (p->has_weight != 0) + (p->has_bias != 0);
    if (nin != want) return ct__error_status(CT_ERR_ARG, "%s: expected %d inputs, got %d", op, want, nin);
    ct_tensor *x = in[bwd ? 1 : 0];
    if (ln_check_x(op, a->op, x, n)) return ct_last_error_code();
    int64_t M = ct_numel(x) / n;
    if (bwd) {
        ct_tensor *g = in[0];
        if (ln_check(op, "grad", g, x, -1) || ln_check(op, "mean", in[2], x, M) ||
            ln_check(op, "rstd", in[3], x, M) || (p->has_weight && ln_check(op, "weight", in[4], x, n)))
            return ct_last_error_code();
        if (g->ndim != x->ndim || memcmp(g->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
            return ct__error_status(CT_ERR_SHAPE, "%s: expected a gradient of shape %s, got %s", op,
                                    ct__tshape(x), ct__tshape(g));
    } else {
        int k = 1;
        if (p->has_weight && ln_check(op, "weight", in[k++], x, n)) return ct_last_error_code();
        if (p->has_bias && ln_check(op, "bias", in[k++], x, n)) return ct_last_error_code();
    }
    ct__meta_like(&out[0], x, x->dtype);
    for (int j = 1; j < nout; j++) ct__meta_set(&out[j], bwd ? &n : &M, 1, x->dtype, x->storage->device);
    return CT_OK;
}

/* Allocates the outputs m describes (want[j] false: left NULL). */
/* ---- forward -------------------------------------------------------------- */
static void ln_fwd_composite(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t n, double eps, int rms,
                             ct_tensor **o) {
    int64_t M = ct_numel(x) / n, last = -1;
    ct_tensor *x2 = ct_reshape(x, CT_SHAPE(M, n));
    ct_tensor *m = rms ? ct_zeros_on(CT_SHAPE(M, 1), x->dtype, x->storage->device)
                       : ct_mean(x2, &last, 1, true);
    ct_tensor *xc = rms ? x2 : ct_sub(x2, m);
    ct_tensor *rs = ct_rsqrt(ct_add_scalar(ct_mean(ct_square(xc), &last, 1, true), eps));
    ct_tensor *y = ct_mul(xc, rs);
    if (w) y = ct_mul(y, ct_reshape(w, &n, 1));
    if (b) y = ct_add(y, ct_reshape(b, &n, 1));
    o[0] = ct_reshape(y, x->sizes, x->ndim);
    o[1] = ct_reshape(m, &M, 1);
    o[2] = ct_reshape(rs, &M, 1);
}

ct_status ct__layer_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t n, double eps,
                             int rms, ct_tensor **y, ct_tensor **mean, ct_tensor **rstd) {
    *y = *mean = *rstd = NULL;
    const char *op = rms ? "rms_norm" : "layer_norm";
    CT_NULLCHECK_OP_S(op, x);
    ct_args a = ct__args(CT_OP_layer_norm_fwd);
    a.p.layer_norm.normalized_numel = n;
    a.p.layer_norm.has_weight = w != NULL;
    a.p.layer_norm.has_bias = b != NULL;
    a.p.layer_norm.rms = rms;
    a.p.layer_norm.eps = eps;
    ct_tensor *in[3] = {x, NULL, NULL};
    int nin = 1;
    if (w) in[nin++] = w;
    if (b) in[nin++] = b;
    ct_meta m[3];
    if (ct__meta_layer_norm(m, 3, in, nin, &a)) /* sets all of m */ return ct_last_error_code();
    ct_device dev = x->storage->device;
    ct_tensor *o[3] = {NULL, NULL, NULL};
    ct_scope s = ct_scope_begin();
    if (ct__fused_kernel(CT_OP_layer_norm_fwd, dev)) {
        ct_scope_end(s);
        ct_status st = ct__fused_run(CT_OP_layer_norm_fwd, m, o, 3, NULL, in, nin, &a);
        if (st) return st;
        *y = o[0];
        *mean = o[1];
        *rstd = o[2];
        return CT_OK;
    }
    /* the fallback, never recorded */
    bool prev = ct_set_grad_enabled(false);
    ln_fwd_composite(x, w, b, n, eps, rms, o);
    ct_set_grad_enabled(prev);
    ct_status st = keep_all(s, o, (const bool[]){true, true, true}, 3);
    if (st) return st;
    *y = o[0];
    *mean = o[1];
    *rstd = o[2];
    return CT_OK;
}

/* ---- backward ------------------------------------------------------------- */
static void ln_bwd_composite(ct_tensor *g, ct_tensor *x, ct_tensor *mean, ct_tensor *rstd, ct_tensor *w,
                             int64_t n, int rms, bool want_dw, bool want_db, ct_tensor **o) {
    int64_t M = ct_numel(x) / n, last = -1, first = 0;
    ct_tensor *x2 = ct_reshape(x, CT_SHAPE(M, n)), *g2 = ct_reshape(g, CT_SHAPE(M, n));
    ct_tensor *rs = ct_reshape(rstd, CT_SHAPE(M, 1));
    ct_tensor *xh = ct_mul(ct_sub(x2, ct_reshape(mean, CT_SHAPE(M, 1))), rs);
    ct_tensor *gw = w ? ct_mul(g2, ct_reshape(w, &n, 1)) : g2;
    ct_tensor *t = ct_sub(gw, ct_mul(xh, ct_mean(ct_mul(gw, xh), &last, 1, true)));
    if (!rms) t = ct_sub(t, ct_mean(gw, &last, 1, true));
    o[0] = ct_reshape(ct_mul(t, rs), x->sizes, x->ndim);
    if (want_dw) o[1] = ct_sum(ct_mul(g2, xh), &first, 1, false);
    if (want_db) o[2] = ct_sum(g2, &first, 1, false);
}

ct_status ct__layer_norm_bwd(ct_tensor *g, ct_tensor *x, ct_tensor *mean, ct_tensor *rstd,
                             ct_tensor *w, int64_t n, int rms, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db) {
    *dx = *dw = *db = NULL;
    const char *op = rms ? "rms_norm_backward" : "layer_norm_backward";
    CT_NULLCHECK_OP_S(op, g);
    CT_NULLCHECK_OP_S(op, x);
    CT_NULLCHECK_OP_S(op, mean);
    CT_NULLCHECK_OP_S(op, rstd);
    ct_args a = ct__args(CT_OP_layer_norm_bwd);
    a.p.layer_norm.normalized_numel = n;
    a.p.layer_norm.has_weight = w != NULL;
    a.p.layer_norm.rms = rms;
    ct_tensor *in[5] = {g, x, mean, rstd, w};
    int nin = w ? 5 : 4;
    ct_meta m[3];
    if (ct__meta_layer_norm(m, 3, in, nin, &a)) /* sets all of m */ return ct_last_error_code();
    ct_device dev = x->storage->device;
    ct_tensor *o[3] = {NULL, NULL, NULL};
    ct_scope s = ct_scope_begin();
    if (ct__fused_kernel(CT_OP_layer_norm_bwd, dev)) {
        ct_scope_end(s);
        ct_status st = ct__fused_run(CT_OP_layer_norm_bwd, m, o, 3, (const bool[]){true, want_dw, want_db},
                                     in, nin, &a);
        if (st) return st;
        *dx = o[0];
        *dw = o[1];
        *db = o[2];
        return CT_OK;
    }
    /* the fallback, never recorded */
    bool prev = ct_set_grad_enabled(false);
    ln_bwd_composite(g, x, mean, rstd, w, n, rms, want_dw, want_db, o);
    ct_set_grad_enabled(prev);
    ct_status st = keep_all(s, o, (const bool[]){true, want_dw, want_db}, 3);
    if (st) return st;
    *dx = o[0];
    *dw = o[1];
    *db = o[2];
    return CT_OK;
}
