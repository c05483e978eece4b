/* batch_norm.c -- the op layer of batch norm: the fused table ops
 * batch_norm_fwd / batch_norm_bwd / batch_norm_eval (kernels in
 * src/backend/cpu/bn.c) and their composite fallbacks (see
 * batch_norm_impl.h).  Per channel c of x [N, C, *], over its M = numel/C
 * values:
 *   train:  mean, var (biased), invstd = 1/sqrt(var + eps),
 *           y = (x - mean) * invstd * w + b
 *   bwd:    xh = (x - mean) * invstd,
 *           dx = (g - sum(g)/M - xh * sum(g*xh)/M) * w * invstd,
 *           dw = sum(g*xh), db = sum(g)
 *   eval:   y = (x - rm) / sqrt(rv + eps) * w + b  (then relu)
 * The fallbacks compute exactly these formulas with public ops; the
 * training and evaluation composites are also what F.batch_norm
 * differentiates for the dtypes the kernels do not take. */
#include "batch_norm_impl.h"
#include "ew.h"
#include "fused.h"
#include "meta.h"

/* v ([C]-like) as [1, C, 1, ...] of rank nd */
static ct_tensor *chan_view(ct_tensor *v, int64_t C, int nd) {
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) sh[i] = 1;
    sh[1] = C;
    return ct_reshape(v, sh, nd);
}

/* every dim of x but 1 */
static int red_dims(ct_tensor *x, int64_t *dims) {
    int k = 0;
    for (int i = 0; i < x->ndim; i++) if (i != 1) dims[k++] = i;
    return k;
}

static bool same_kind(ct_tensor *x, ct_tensor *t) {
    return !t || (t->dtype == x->dtype && ct__same_device(t, x));
}

bool ct__batch_norm_fusable(ct_tensor *x, ct_tensor *w, ct_tensor *b) {
    return x && (x->dtype == CT_F32 || x->dtype == CT_F64) && same_kind(x, w) && same_kind(x, b);
}

/* f16/bf16 training (batch_norm_fwd / _bwd where the device's kernel
 * computes halves): the [C] tensors (weight, bias, mean, invstd) may be
 * float32 too -- torch's mixed type, autocast's float32 parameters */
static bool half_param_ok(ct_op kop, ct_tensor *x, ct_tensor *t) {
    return kop != CT_OP_batch_norm_eval && (x->dtype == CT_F16 || x->dtype == CT_BF16) &&
           t->dtype == CT_F32 && ct__same_device(t, x);
}

/* kop: the fused op checked; f16/bf16 pass where its kernel computes them */
static ct_status check_fused_op(ct_op kop, const char *op, ct_tensor *x, ct_tensor *const *t,
                                const char *const *what, int n) {
    if (x->ndim < 2)
        return ct__error_status(CT_ERR_SHAPE, "%s: expected an input of at least 2 dims [N, C, *], got %s",
                                op, ct__tshape(x));
    if (x->dtype != CT_F32 && x->dtype != CT_F64 && !ct__half_native(x->storage->device, kop, x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: fused kernel needs float32 or float64, got %s", op,
                                ct_dtype_name(x->dtype));
    int64_t C = x->sizes[1];
    for (int k = 0; k < n; k++) {
        if (!t[k]) continue;
        if (!same_kind(x, t[k]) && !half_param_ok(kop, x, t[k]))
            return ct__error_status(CT_ERR_DTYPE, "%s: expected %s of dtype %s on %s, got %s on %s", op,
                                    what[k], ct_dtype_name(x->dtype), ct_device_name(x->storage->device),
                                    ct_dtype_name(t[k]->dtype), ct_device_name(t[k]->storage->device));
        if (ct_numel(t[k]) != C)
            return ct__error_status(CT_ERR_SHAPE, "%s: %s should contain %lld elements not %lld", op,
                                    what[k], (long long)C, (long long)ct_numel(t[k]));
    }
    return CT_OK;
}
static ct_status check_fused(const char *op, ct_tensor *x, ct_tensor *const *t, const char *const *what,
                             int n) {
    return check_fused_op(CT_OP_batch_norm_fwd, op, x, t, what, n);
}

/* ---- the meta function ------------------------------------------------------ */
/* The three ops' inputs (the kernels' order; absent optional inputs are
 * left out, as has_weight / has_bias say):
 *   fwd:  x, [w], [b]                -> y [x], mean, invstd, var [C]
 *   bwd:  x, g, [w], mean, invstd    -> dx [x], dw, db [C] (the caller
 *         allocates the ones it wants)
 *   eval: x, rm, rv, [w], [b]        -> y [x] */
CT_META_FN(ct__meta_batch_norm) {
    const ct_p_batch_norm *p = &a->p.batch_norm;
    ct_tensor *x = in[0];
    ct_tensor *t[4] = {NULL, NULL, NULL, NULL};
    const char *what[4] = {NULL, NULL, NULL, NULL};
    const char *op = a->op == CT_OP_batch_norm_bwd ? "batch_norm_backward" : "batch_norm";
    int n = 0, k = 1;
    if (a->op == CT_OP_batch_norm_bwd) {
        ct_tensor *g = in[k++];
        if (!same_kind(x, g))
            return ct__error_status(CT_ERR_DTYPE, "batch_norm_backward: expected a gradient of dtype %s on %s, "
                                    "got %s on %s", ct_dtype_name(x->dtype), ct_device_name(x->storage->device),
                                    ct_dtype_name(g->dtype), ct_device_name(g->storage->device));
        if (g->ndim != x->ndim || memcmp(g->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
            return ct__error_status(CT_ERR_SHAPE, "batch_norm_backward: expected a gradient of shape %s, got %s",
                                    ct__tshape(x), ct__tshape(g));
        if (p->has_weight) { t[n] = in[k++]; what[n++] = "weight"; }
        t[n] = in[k++]; what[n++] = "mean";
        t[n] = in[k++]; what[n++] = "invstd";
    } else {
        if (a->op == CT_OP_batch_norm_eval) {
            t[n] = in[k++]; what[n++] = "running_mean";
            t[n] = in[k++]; what[n++] = "running_var";
        }
        if (p->has_weight) { t[n] = in[k++]; what[n++] = "weight"; }
        if (p->has_bias) { t[n] = in[k++]; what[n++] = "bias"; }
    }
    if (k != nin)
        return ct__error_status(CT_ERR_ARG, "%s: expected %d inputs, got %d", op, k, nin);
    if (check_fused_op(a->op, op, x, t, what, n)) return ct_last_error_code();
    int64_t C = x->sizes[1];
    ct__meta_like(&out[0], x, x->dtype);
    /* f16/bf16 training: the statistics (mean, invstd, var) are float32,
     * unrounded (the kernels normalize with mean and invstd rounded to x's
     * dtype unless the weight is float32), dw and db have the weight's dtype */
    bool half = x->dtype == CT_F16 || x->dtype == CT_BF16;
    ct_dtype sdt = !half || a->op == CT_OP_batch_norm_eval ? x->dtype
                   : a->op == CT_OP_batch_norm_bwd && p->has_weight ? in[2]->dtype : CT_F32;
    for (int j = 1; j < nout; j++) ct__meta_set(&out[j], &C, 1, sdt, x->storage->device);
    return CT_OK;
}

/* ---- training forward --------------------------------------------------- */
static ct_tensor *train_composite(ct_tensor *x, ct_tensor *w, ct_tensor *b, double eps, ct_tensor **mean,
                                  ct_tensor **var, ct_tensor **invstd) {
    int nd = x->ndim;
    int64_t C = x->sizes[1], dims[CT_MAX_DIMS] = {0};
    int k = red_dims(x, dims);
    ct_tensor *m = ct_mean(x, dims, k, true);
    ct_tensor *xc = ct_sub(x, m);
    ct_tensor *v = ct_mean(ct_square(xc), dims, k, true);
    ct_tensor *is = ct_rsqrt(ct_add_scalar(v, eps));
    ct_tensor *y = ct_mul(xc, is);
    if (w) y = ct_mul(y, chan_view(w, C, nd));
    if (b) y = ct_add(y, chan_view(b, C, nd));
    *mean = m;
    *var = v;
    if (invstd) *invstd = is;
    return y;
}

ct_tensor *ct__batch_norm_train_composite(ct_tensor *x, ct_tensor *w, ct_tensor *b, double eps,
                                          ct_tensor **mean, ct_tensor **var) {
    *mean = *var = NULL;
    CT_NULLCHECK_OP("batch_norm", x);
    if (x->ndim < 2)
        return ct__error(CT_ERR_SHAPE, "batch_norm: expected an input of at least 2 dims [N, C, *], got %s",
                         ct__tshape(x));
    return train_composite(x, w, b, eps, mean, var, NULL);
}

ct_status ct__batch_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, double eps,
                             ct_tensor **y, ct_tensor **mean, ct_tensor **invstd, ct_tensor **var) {
    *y = *mean = *invstd = *var = NULL;
    CT_NULLCHECK_OP_S("batch_norm", x);
    ct_tensor *chk[2] = {w, b};
    if (check_fused("batch_norm", x, chk, (const char *const[]){"weight", "bias"}, 2))
        return ct_last_error_code();
    int64_t C = x->sizes[1];
    ct_tensor *o[4] = {NULL, NULL, NULL, NULL};
    ct_scope s = ct_scope_begin();
    if (ct__fused_kernel(CT_OP_batch_norm_fwd, x->storage->device)) {
        ct_scope_end(s);
        ct_tensor *in[3] = {x, w, b};
        int nin = 1;
        if (w) in[nin++] = w;
        if (b) in[nin++] = b;
        ct_args a = ct__args(CT_OP_batch_norm_fwd);
        a.p.batch_norm.eps = eps;
        a.p.batch_norm.has_weight = w != NULL;
        a.p.batch_norm.has_bias = b != NULL;
        ct_status st = ct__fused_run(CT_OP_batch_norm_fwd, NULL, o, 4, NULL, in, nin, &a);
        if (st) return st;
        *y = o[0];
        *mean = o[1];
        *invstd = o[2];
        *var = o[3];
        return CT_OK;
    }
    /* the fallback, never recorded */
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *m, *v, *is;
    ct_tensor *r = train_composite(x, w, b, eps, &m, &v, &is);
    o[0] = r;
    o[1] = ct_reshape(m, &C, 1);
    o[2] = ct_reshape(is, &C, 1);
    o[3] = ct_reshape(v, &C, 1);
    ct_set_grad_enabled(prev);
    bool ok = o[0] && o[1] && o[2] && o[3];
    for (int k = 0; k < 4; k++) ct_keep(o[k]);
    ct_scope_end(s);
    if (!ok) return ct_last_error_code();
    *y = o[0];
    *mean = o[1];
    *invstd = o[2];
    *var = o[3];
    return CT_OK;
}

/* ---- training backward ---------------------------------------------------- */
ct_status ct__batch_norm_bwd(ct_tensor *x, ct_tensor *g, ct_tensor *w, ct_tensor *mean,
                             ct_tensor *invstd, bool want_dx, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db) {
    *dx = *dw = *db = NULL;
    CT_NULLCHECK_OP_S("batch_norm_backward", x);
    CT_NULLCHECK_OP_S("batch_norm_backward", g);
    CT_NULLCHECK_OP_S("batch_norm_backward", mean);
    CT_NULLCHECK_OP_S("batch_norm_backward", invstd);
    ct_tensor *chk[3] = {w, mean, invstd};
    if (check_fused("batch_norm_backward", x, chk, (const char *const[]){"weight", "mean", "invstd"}, 3))
        return ct_last_error_code();
    if (!same_kind(x, g))
        return ct__error_status(CT_ERR_DTYPE, "batch_norm_backward: expected a gradient of dtype %s on %s, "
                                "got %s on %s", ct_dtype_name(x->dtype), ct_device_name(x->storage->device),
                                ct_dtype_name(g->dtype), ct_device_name(g->storage->device));
    if (g->ndim != x->ndim ||
        memcmp(g->sizes, x->sizes, sizeof(int64_t) * (size_t)x->ndim))
        return ct__error_status(CT_ERR_SHAPE, "batch_norm_backward: expected a gradient of shape %s, got %s",
                                ct__tshape(x), ct__tshape(g));
    int nd = x->ndim;
    int64_t C = x->sizes[1];
    ct_tensor *o[3] = {NULL, NULL, NULL};
    ct_scope s = ct_scope_begin();
    if (ct__fused_kernel(CT_OP_batch_norm_bwd, x->storage->device)) {
        ct_scope_end(s);
        ct_tensor *in[5];
        int nin = 0;
        in[nin++] = x;
        in[nin++] = g;
        if (w) in[nin++] = w;
        in[nin++] = mean;
        in[nin++] = invstd;
        ct_args a = ct__args(CT_OP_batch_norm_bwd);
        a.p.batch_norm.has_weight = w != NULL;
        ct_status st = ct__fused_run(CT_OP_batch_norm_bwd, NULL, o, 3,
                                     (const bool[]){want_dx, want_dw, want_db}, in, nin, &a);
        if (st) return st;
        *dx = o[0];
        *dw = o[1];
        *db = o[2];
        return CT_OK;
    }
    /* the fallback, never recorded */
    bool prev = ct_set_grad_enabled(false);
    int64_t dims[CT_MAX_DIMS] = {0};
    int k = red_dims(x, dims);
    double M = (double)(ct_numel(x) / (C > 0 ? C : 1));
    ct_tensor *is = chan_view(invstd, C, nd);
    ct_tensor *xh = ct_mul(ct_sub(x, chan_view(mean, C, nd)), is);
    ct_tensor *sdy = ct_sum(g, dims, k, true), *sdyxh = ct_sum(ct_mul(g, xh), dims, k, true);
    bool ok = true;
    if (want_dx) {
        ct_tensor *t = ct_sub(ct_sub(g, ct_mul_scalar(sdy, 1.0 / M)), ct_mul(xh, ct_mul_scalar(sdyxh, 1.0 / M)));
        o[0] = ct_mul(t, w ? ct_mul(chan_view(w, C, nd), is) : is);
        ok = ok && o[0];
    }
    if (want_dw) ok = ok && (o[1] = ct_reshape(sdyxh, &C, 1));
    if (want_db) ok = ok && (o[2] = ct_reshape(sdy, &C, 1));
    ct_set_grad_enabled(prev);
    for (int j = 0; j < 3; j++) if (o[j]) ct_keep(o[j]);
    ct_scope_end(s);
    if (!ok) return ct_last_error_code();
    *dx = o[0];
    *dw = o[1];
    *db = o[2];
    return CT_OK;
}

/* ---- evaluation ------------------------------------------------------------- */
static bool eval_fusable(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b) {
    /* f16/bf16 where the device's eval kernel computes them */
    bool half = x && ct__half_native(x->storage->device, CT_OP_batch_norm_eval, x->dtype);
    if (half ? !(same_kind(x, w) && same_kind(x, b) && same_kind(x, rm) && same_kind(x, rv))
             : (!ct__batch_norm_fusable(x, w, b) || !ct__batch_norm_fusable(x, rm, rv)))
        return false;
    ct_tensor *t5[5] = {x, rm, rv, w, b};
    if (ct__fw_on(t5, 5)) return false; /* forward AD: the composite's ops carry tangents */
    if (ct_is_grad_enabled()) {
        ct_tensor *t[5] = {x, rm, rv, w, b};
        for (int i = 0; i < 5; i++)
            if (t[i] && ct_requires_grad(t[i])) return false;
    }
    return ct__fused_kernel(CT_OP_batch_norm_eval, x->storage->device) != NULL;
}

ct_tensor *ct__batch_norm_eval(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w,
                               ct_tensor *b, double eps, bool relu) {
    CT_NULLCHECK_OP("batch_norm", x);
    CT_NULLCHECK_OP("batch_norm", rm);
    CT_NULLCHECK_OP("batch_norm", rv);
    if (x->ndim < 2)
        return ct__error(CT_ERR_SHAPE, "batch_norm: expected an input of at least 2 dims [N, C, *], got %s",
                         ct__tshape(x));
    int nd = x->ndim;
    int64_t C = x->sizes[1];
    ct_scope s = ct_scope_begin();
    if (eval_fusable(x, rm, rv, w, b)) {
        ct_tensor *chk[4] = {rm, rv, w, b};
        if (check_fused_op(CT_OP_batch_norm_eval, "batch_norm", x, chk,
                        (const char *const[]){"running_mean", "running_var", "weight", "bias"}, 4)) {
            ct_scope_end(s);
            return NULL;
        }
        ct_scope_end(s);
        ct_tensor *in[5] = {x, rm, rv, NULL, NULL};
        int nin = 3;
        if (w) in[nin++] = w;
        if (b) in[nin++] = b;
        ct_args a = ct__args(CT_OP_batch_norm_eval);
        a.p.batch_norm.eps = eps;
        a.p.batch_norm.relu = relu;
        a.p.batch_norm.has_weight = w != NULL;
        a.p.batch_norm.has_bias = b != NULL;
        ct_tensor *y;
        return ct__fused_run(CT_OP_batch_norm_eval, NULL, &y, 1, NULL, in, nin, &a) ? NULL : y;
    }
    ct_tensor *y = ct_mul(ct_sub(x, chan_view(rm, C, nd)), ct_rsqrt(ct_add_scalar(chan_view(rv, C, nd), eps)));
    if (w) y = ct_mul(y, chan_view(w, C, nd));
    if (b) y = ct_add(y, chan_view(b, C, nd));
    if (relu && y) y = ct_relu(y);
    ct_keep(y);
    ct_scope_end(s);
    return y;
}
