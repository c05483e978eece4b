/* fused_rows.c -- the op layer of the Transformer fast path's row-wise
 * fused ops add_layer_norm and bias_act (see fused_rows.h; kernels in
 * src/backend/cpu/tfm_rows.c) and their composite fallbacks, written with
 * public ops:
 *   add_layer_norm:  s = x + r;  y = (s - mean(s)) * rsqrt(var(s) + eps) * w + b
 *                    (mean and biased var over the last dim)
 *   bias_act:        y = act(h + bias)
 * Both run with grad mode off and are never recorded. */
#include "ew.h"
#include "fused.h"
#include "fused_rows.h"
#include "meta.h"

/* t absent, or f32 on dev; while tracing (dev meta), the cpu constants
 * (the layer's weights) count as meta, as the dispatcher treats them */
static bool f32_on(ct_tensor *t, ct_device dev) {
    return !t || (t->dtype == CT_F32 && (t->storage->device == dev ||
                                         (dev == CT_META && t->storage->device == CT_CPU && ct__tracer())));
}

/* Tracing (ct_compile, vmap: x on meta), the fused op's own kernel
 * "runs" on meta and the tracer records its dispatch as one node (see
 * capture.c on_disp), so the compiled graph replays the hand-fused kernel
 * instead of the composite's primitives.  A result written into a tensor
 * of the caller's (y_out / out) would not be recorded that way: those
 * calls trace the composite, whose copy_ into it is recorded. */
static bool traced_into(ct_tensor *x, ct_tensor *out) {
    return out && x->storage->device == CT_META && ct__tracer();
}

static bool same_shape(ct_tensor *a, ct_tensor *b) {
    return a->ndim == b->ndim && !memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim);
}

/* the checks both ops share: x floating of rank >= 1; `like` (may be NULL)
 * of x's shape; `row` (may be NULL) of d elements; all of x's dtype and
 * device */
static ct_status check_rows(const char *op, ct_tensor *x, ct_tensor *const *like, const char *const *lname,
                            int nlike, ct_tensor *const *row, const char *const *rname, int nrow) {
    if (x->ndim < 1)
        return ct__error_status(CT_ERR_SHAPE, "%s: expected an input of at least 1 dim, got %s", op, ct__tshape(x));
    if (!ct_dtype_is_floating(x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected a floating input, got %s", op, ct_dtype_name(x->dtype));
    int64_t d = x->sizes[x->ndim - 1];
    for (int k = 0; k < nlike + nrow; k++) {
        ct_tensor *t = k < nlike ? like[k] : row[k - nlike];
        const char *what = k < nlike ? lname[k] : rname[k - nlike];
        if (!t) continue;
        if (t->dtype != x->dtype || !ct__same_device(t, x))
            return ct__error_status(CT_ERR_DTYPE, "%s: expected %s of dtype %s on %s, got %s on %s", op, what,
                                    ct_dtype_name(x->dtype), ct_device_name(x->storage->device),
                                    ct_dtype_name(t->dtype), ct_device_name(t->storage->device));
        if (k < nlike && !same_shape(x, t))
            return ct__error_status(CT_ERR_SHAPE, "%s: expected %s of shape %s, got %s", op, what, ct__tshape(x),
                                    ct__tshape(t));
        if (k >= nlike && ct_numel(t) != d)
            return ct__error_status(CT_ERR_SHAPE, "%s: %s should contain %lld elements not %lld", op, what,
                                    (long long)d, (long long)ct_numel(t));
    }
    return CT_OK;
}

/* ---- the meta function ------------------------------------------------------ */
/* The two ops' inputs (the kernels' order; the optional ones as the params
 * has_residual / has_weight / has_bias say):
 *   add_layer_norm:  x, [residual], [w], [b]  -> sum, y (x's shape; the
 *                    caller allocates the ones it wants)
 *   bias_act:        h, [bias]                -> y (h's shape)
 * Any floating dtype (the fallback's; the kernels take f32). */
CT_META_FN(ct__meta_fused_rows) {
    const ct_p_fused_rows *p = &a->p.fused_rows;
    ct_tensor *x = in[0];
    if (a->op == CT_OP_bias_act) {
        if (p->act < 0 || p->act >= CT_EWA_COUNT)
            return ct__error_status(CT_ERR_ARG, "bias_act: bad activation %d", (int)p->act);
        if (p->row_loops && p->act != CT_EWA_RELU && p->act != CT_EWA_GELU)
            return ct__error_status(CT_ERR_ARG, "bias_act: the row loops take relu or gelu, not activation %d",
                                    (int)p->act);
        int want = 1 + (p->has_bias != 0);
        if (nin != want) return ct__error_status(CT_ERR_ARG, "bias_act: expected %d inputs, got %d", want, nin);
        if (check_rows("bias_act", x, NULL, NULL, 0, p->has_bias ? &in[1] : NULL,
                       (const char *const[]){"bias"}, p->has_bias ? 1 : 0))
            return ct_last_error_code();
    } else {
        int want = 1 + (p->has_residual != 0) + (p->has_weight != 0) + (p->has_bias != 0);
        if (nin != want) return ct__error_status(CT_ERR_ARG, "add_layer_norm: expected %d inputs, got %d", want, nin);
        int k = 1;
        ct_tensor *r = p->has_residual ? in[k++] : NULL;
        ct_tensor *row[2] = {p->has_weight ? in[k++] : NULL, NULL};
        row[1] = p->has_bias ? in[k++] : NULL;
        if (check_rows("add_layer_norm", x, &r, (const char *const[]){"residual"}, 1, row,
                       (const char *const[]){"weight", "bias"}, 2))
            return ct_last_error_code();
    }
    for (int j = 0; j < nout; j++) ct__meta_like(&out[j], x, x->dtype);
    return CT_OK;
}

/* t ([d]-like) as [d] */
static ct_tensor *flat(ct_tensor *t) {
    int64_t n = ct_numel(t);
    return t ? ct_reshape(t, &n, 1) : NULL;
}

/* ---- add_layer_norm ------------------------------------------------------ */
ct_tensor *ct__add_layer_norm(ct_tensor *x, ct_tensor *r, ct_tensor *w, ct_tensor *b, double eps,
                              ct_tensor **sum, ct_tensor *y_out) {
    if (sum) *sum = NULL;
    CT_NULLCHECK_OP("add_layer_norm", x);
    ct_args a = ct__args(CT_OP_add_layer_norm);
    a.p.fused_rows.eps = eps;
    a.p.fused_rows.has_residual = r != NULL;
    a.p.fused_rows.has_weight = w != NULL;
    a.p.fused_rows.has_bias = b != NULL;
    ct_tensor *in[4] = {x, NULL, NULL, NULL};
    int nin = 1;
    if (r) in[nin++] = r;
    if (w) in[nin++] = w;
    if (b) in[nin++] = b;
    ct_meta mo[2];
    if (ct__meta_run(CT_OP_add_layer_norm, mo, 2, in, nin, &a) ||
        check_rows("add_layer_norm", x, &y_out, (const char *const[]){"out"}, 1, NULL, NULL, 0))
        return NULL;
    ct_device dev = x->storage->device;
    bool prev = ct_set_grad_enabled(false);
    ct_scope s = ct_scope_begin();
    ct_tensor *y = NULL, *sm = NULL;
    bool fuse = f32_on(x, dev) && f32_on(r, dev) && f32_on(w, dev) && f32_on(b, dev) && (w || !b) &&
                (!y_out || ct__is_contiguous(y_out)) && !traced_into(x, y_out) &&
                ct__fused_kernel(CT_OP_add_layer_norm, dev);
    if (fuse) {
        bool ok = true;
        for (int k = 0; k < nin; k++) ok = ok && (in[k] = ct_contiguous(in[k]));
        ct_tensor *o[2] = {sum ? ct__meta_new(&mo[0], in) : NULL, y_out ? y_out : ct__meta_new(&mo[1], in)};
        ok = ok && (!sum || o[0]) && o[1] && !ct__dispatch(CT_OP_add_layer_norm, o, 2, in, nin, &a);
        ct_scope_end(s);
        if (!ok) {
            ct_release(o[0]);
            if (!y_out) ct_release(o[1]);
            ct_set_grad_enabled(prev);
            return NULL;
        }
        if (sum) *sum = ct__register(o[0]);
        if (y_out) ct__bump_version(y_out);
        y = y_out ? y_out : ct__register(o[1]);
        ct_set_grad_enabled(prev);
        return y;
    }
    /* the fallback */
    int64_t last = x->ndim - 1;
    ct_tensor *t = r ? ct_add(x, r) : x;
    if (sum) sm = r ? t : ct_clone(x);
    ct_tensor *m = ct_mean(t, &last, 1, true);
    ct_tensor *c = ct_sub(t, m);
    ct_tensor *v = ct_mean(ct_square(c), &last, 1, true);
    y = ct_mul(c, ct_rsqrt(ct_add_scalar(v, eps)));
    if (w) y = ct_mul(y, flat(w));
    if (b) y = ct_add(y, flat(b));
    bool ok = y && (!sum || sm);
    if (ok && y_out) {
        ok = ct_copy_(y_out, y) != NULL;
        y = y_out;
    }
    if (ok && !y_out) ct_keep(y);
    if (ok && sum) ct_keep(sm);
    ct_scope_end(s);
    ct_set_grad_enabled(prev);
    if (!ok) return NULL;
    if (sum) *sum = sm;
    return y;
}

/* ---- bias_act -------------------------------------------------------------- */
static ct_tensor *activation(ct_tensor *t, int act) {
    switch (act) {
    case CT_EWA_RELU: return ct_relu(t);
    case CT_EWA_GELU: return ct_gelu(t, CT_GELU_NONE);
    case CT_EWA_GELU_TANH: return ct_gelu(t, CT_GELU_TANH);
    case CT_EWA_SILU: return ct_silu(t);
    case CT_EWA_SIGMOID: return ct_sigmoid(t);
    case CT_EWA_TANH: return ct_tanh(t);
    default: return t;
    }
}

ct_tensor *ct__bias_act(ct_tensor *h, ct_tensor *bias, int act, bool row_loops, ct_tensor *out) {
    CT_NULLCHECK_OP("bias_act", h);
    ct_args a = ct__args(CT_OP_bias_act);
    a.p.fused_rows.act = act;
    a.p.fused_rows.row_loops = row_loops;
    a.p.fused_rows.has_bias = bias != NULL;
    ct_tensor *in[2] = {h, bias};
    ct_meta m;
    if (ct__meta_run(CT_OP_bias_act, &m, 1, in, bias ? 2 : 1, &a) ||
        check_rows("bias_act", h, &out, (const char *const[]){"out"}, 1, NULL, NULL, 0))
        return NULL;
    ct_device dev = h->storage->device;
    bool prev = ct_set_grad_enabled(false);
    ct_scope s = ct_scope_begin();
    ct_tensor *y = NULL;
    if (f32_on(h, dev) && f32_on(bias, dev) && (!out || ct__is_contiguous(out)) && !traced_into(h, out) &&
        ct__fused_kernel(CT_OP_bias_act, dev)) {
        in[0] = ct_contiguous(h);
        if (bias) in[1] = ct_contiguous(bias);
        ct_tensor *o = out ? out : ct__meta_new(&m, in);
        bool ok = o && in[0] && (!bias || in[1]) && !ct__dispatch(CT_OP_bias_act, &o, 1, in, bias ? 2 : 1, &a);
        ct_scope_end(s);
        ct_set_grad_enabled(prev);
        if (!ok) {
            if (!out) ct_release(o);
            return NULL;
        }
        if (out) ct__bump_version(out);
        return out ? out : ct__register(o);
    }
    /* the fallback */
    y = bias ? ct_add(h, flat(bias)) : h;
    y = activation(y, act);
    if (y == h && !out) y = ct_clone(h);
    bool ok = y != NULL;
    if (ok && out) {
        ok = ct_copy_(out, y) != NULL;
        y = out;
    }
    if (ok && !out) ct_keep(y);
    ct_scope_end(s);
    ct_set_grad_enabled(prev);
    return ok ? y : NULL;
}
