/* elementwise.c -- the elementwise driver: broadcasting, type promotion,
 * in-place checks; and the public elementwise ops.  Kernels are inner loops
 * in src/backend/<dev>/elementwise.c, run by the strided iterator. */
#include <math.h>

#include "ew.h"
#include "fused.h"
#include "meta.h"

bool ct__can_cast(ct_dtype from, ct_dtype to) {
    if (ct_dtype_is_complex(from) && !ct_dtype_is_complex(to)) return false;
    if (ct_dtype_is_floating(from) && ct_dtype_is_integral(to, true)) return false;
    if (from != CT_BOOL && to == CT_BOOL) return false;
    return true;
}

ct_tensor *ct__wrapped_tmp(double v) {
    ct_tensor *t = ct__alloc(NULL, 0, CT_F64, CT_CPU);
    if (!t) return NULL;
    *(double *)ct__ptr(t) = v;
    t->flags |= CT_TF_WRAPPED;
    return t;
}

/* Kernel dtype for a compute dtype: halves compute in f32. */
static ct_dtype kernel_dtype(ct_dtype dt) {
    return (dt == CT_F16 || dt == CT_BF16) ? CT_F32 : dt;
}

ct_tensor *ct__ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a, unsigned mode,
                  ct_tensor *inplace) {
    const char *name = ct__op_info[op].name;
    for (int k = 0; k < nin; k++)
        if (!ins[k]) return ct__null_arg(name, "input %d", k); /* every elementwise op */
    if (inplace && !ins[0]) return NULL;
    /* broadcast shape */
    int64_t shape[CT_MAX_DIMS];
    int nd = ins[0]->ndim;
    memcpy(shape, ins[0]->sizes, sizeof(int64_t) * (size_t)nd);
    for (int k = 1; k < nin; k++)
        if (ct__broadcast_shapes(name, shape, nd, ins[k]->sizes, ins[k]->ndim, shape, &nd)) return NULL;
    /* dtypes */
    ct_dtype cdt = ct_result_type(ins, nin);
    if ((mode & CT_EW_INT_ONLY) && !ct_dtype_is_integral(cdt, true))
        return ct__error(CT_ERR_DTYPE, "%s: only integral and bool tensors are supported, got %s",
                         name, ct_dtype_name(cdt));
    if ((mode & CT_EW_NO_BOOL) && cdt == CT_BOOL)
        return ct__error(CT_ERR_DTYPE, "%s: not supported for bool tensors", name);
    if ((mode & CT_EW_NO_COMPLEX) && ct_dtype_is_complex(cdt))
        return ct__error(CT_ERR_DTYPE, "%s: not supported for complex tensors (got %s)", name,
                         ct_dtype_name(cdt));
    if (mode & CT_EW_FLOAT) cdt = ct__float_dtype(cdt);
    ct_dtype odt = (mode & CT_EW_BOOL_OUT) ? CT_BOOL : cdt;
    if ((mode & CT_EW_REAL_OUT) && ct_dtype_is_complex(cdt)) odt = cdt == CT_C128 ? CT_F64 : CT_F32;
    ct_dtype kdt = kernel_dtype(cdt);
    ct_dtype kodt = (mode & CT_EW_BOOL_OUT) ? CT_BOOL : kernel_dtype(odt);

    ct_args local = ct__args(op);
    if (!a) a = &local;
    ct__backends_init();
    ct_device dev = inplace ? inplace->storage->device : ct__op_device(ins, nin);
    if (!ct__kernels[dev][op])
        return ct__error(CT_ERR_DEVICE, "%s: no kernel for device %s", name, ct_device_name(dev));

    if (inplace) {
        if (nd != inplace->ndim || memcmp(shape, inplace->sizes, sizeof(int64_t) * (size_t)nd) != 0) {
            char b[256];
            return ct__error(CT_ERR_SHAPE, "%s_: output with shape %s doesn't match the broadcast "
                             "shape %s", name, ct__tshape(inplace), ct__shape_str(shape, nd, b, sizeof b));
        }
        if (!ct__can_cast(odt, inplace->dtype))
            return ct__error(CT_ERR_DTYPE, "%s_: result type %s can't be cast to the desired "
                             "output type %s", name, ct_dtype_name(odt), ct_dtype_name(inplace->dtype));
    }

    if (inplace && ct__inplace_begin(inplace, ins, nin, name)) return NULL;
    /* convert inputs to the kernel dtype (only when they differ) */
    ct_tensor *cin[8];
    ct_status st = CT_OK;
    ct_tensor *out = NULL, *res = NULL;
    int k;
    for (k = 0; k < nin; k++) cin[k] = NULL;
    for (k = 0; k < nin; k++) {
        ct_tensor *x = ins[k];
        /* where's condition stays bool: its kernels read it as bytes */
        if (x->dtype == kdt || (op == CT_OP_where && k == 0 && x->dtype == CT_BOOL))
            cin[k] = ct_retain(x);
        else {
            cin[k] = ct__alloc(x->sizes, x->ndim, kdt, x->storage->device);
            if (!cin[k]) goto fail;
            ct_tensor *o1[1] = {cin[k]}, *i1[1] = {x};
            if ((st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL))) goto fail;
        }
    }
    /* output: write in place directly when the dtype matches and it doesn't
     * partially overlap an input in a different layout */
    int direct = 0;
    if (inplace && inplace->dtype == kodt) {
        direct = 1;
        for (k = 0; k < nin; k++) {
            ct_tensor *x = cin[k];
            if (x->storage == inplace->storage &&
                !(x->offset == inplace->offset && x->ndim == inplace->ndim &&
                  memcmp(x->strides, inplace->strides, sizeof(int64_t) * (size_t)x->ndim) == 0 &&
                  memcmp(x->sizes, inplace->sizes, sizeof(int64_t) * (size_t)x->ndim) == 0))
                direct = 0;
        }
    }
    out = direct ? ct_retain(inplace) : ct__alloc(shape, nd, kodt, dev);
    if (!out) goto fail;
    {
        ct_tensor *o1[1] = {out};
        if ((st = ct__dispatch(op, o1, 1, cin, nin, a))) goto fail;
    }
    if (inplace) {
        if (!direct) {
            ct_tensor *o1[1] = {inplace}, *i1[1] = {out};
            if ((st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL))) goto fail;
        }
        ct_release(out);
        out = NULL;
        res = ct__finish_inplace(op, inplace, ins, nin, a);
    } else if (kodt != odt) {
        res = ct__alloc(shape, nd, odt, dev);
        if (!res) goto fail;
        ct_tensor *o1[1] = {res}, *i1[1] = {out};
        if ((st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL))) { ct_release(res); res = NULL; goto fail; }
        ct_release(out);
        out = NULL;
        res = ct__finish(op, res, ins, nin, a);
    } else {
        res = ct__finish(op, out, ins, nin, a);
        out = NULL;
    }
    for (k = 0; k < nin; k++) ct_release(cin[k]);
    return res;
fail:
    for (k = 0; k < nin; k++) ct_release(cin[k]);
    ct_release(out);
    if (inplace) ct__inplace_abort(inplace);
    return NULL;
}

/* The fallback of ew_grad: its formula with public ops (the ones the VJPs
 * of src/autograd/derivs_elementwise.c compose when they record). */
static ct_tensor *one_minus(ct_tensor *x) { return ct_neg(ct_sub_scalar(x, 1.0)); }
static ct_tensor *ew_grad_composite(int kind, ct_tensor *g, ct_tensor *t) {
    switch (kind) {
    case CT_EWG_RELU: return ct_where(ct_le(t, ct_wrap(0.0)), ct_wrap(0.0), g);
    case CT_EWG_SIGMOID: return ct_mul(g, ct_mul(t, one_minus(t)));
    case CT_EWG_TANH: return ct_mul(g, one_minus(ct_mul(t, t)));
    case CT_EWG_GELU: { /* Phi(t) + t phi(t) */
        ct_tensor *cdf = ct_mul_scalar(ct_add_scalar(ct_erf(ct_mul_scalar(t, 0.70710678118654752440)), 1.0), 0.5);
        ct_tensor *pdf = ct_mul_scalar(ct_exp(ct_mul_scalar(ct_mul(t, t), -0.5)), 0.39894228040143267794);
        return ct_mul(g, ct_add(cdf, ct_mul(t, pdf)));
    }
    case CT_EWG_GELU_TANH: {
        const double k = 0.79788456080286535588, k3 = 0.044715;
        ct_tensor *x2 = ct_mul(t, t);
        ct_tensor *th = ct_tanh(ct_mul_scalar(ct_mul(t, ct_add_scalar(ct_mul_scalar(x2, k3), 1.0)), k));
        ct_tensor *dinner = ct_mul_scalar(ct_add_scalar(ct_mul_scalar(x2, 3.0 * k3), 1.0), k);
        return ct_mul(g, ct_add(ct_mul_scalar(ct_add_scalar(th, 1.0), 0.5),
                                ct_mul(ct_mul_scalar(t, 0.5), ct_mul(one_minus(ct_mul(th, th)), dinner))));
    }
    default: { /* CT_EWG_SILU: s (1 + t (1 - s)) */
        ct_tensor *sg = ct_sigmoid(t);
        return ct_mul(g, ct_mul(sg, ct_add_scalar(ct_mul(t, one_minus(sg)), 1.0)));
    }
    }
}

/* The meta function of ew_grad: g and t of one shape, f32 or f64, on one
 * device; the gradient is g's shape, contiguous. */
CT_META_FN(ct__meta_ew_grad) {
    (void)nout;
    if (nin != 2)
        return ct__error_status(CT_ERR_ARG, "ew_grad: expected 2 inputs, got %d", nin);
    ct_tensor *g = in[0], *t = in[1];
    int64_t kind = a->p.ew_grad.kind;
    if (kind < 0 || kind >= CT_EWG_COUNT)
        return ct__error_status(CT_ERR_ARG, "ew_grad: bad kind %d", (int)kind);
    if (g->dtype != t->dtype || (g->dtype != CT_F32 && g->dtype != CT_F64))
        return ct__error_status(CT_ERR_DTYPE, "ew_grad: expected a gradient and an input of one dtype, "
                                "float32 or float64, got %s and %s", ct_dtype_name(g->dtype),
                                ct_dtype_name(t->dtype));
    if (g->storage->device != t->storage->device)
        return ct__error_status(CT_ERR_DEVICE, "ew_grad: expected all tensors on the same device, got %s and %s",
                                ct_device_name(g->storage->device), ct_device_name(t->storage->device));
    if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)g->ndim) != 0)
        return ct__error_status(CT_ERR_SHAPE, "ew_grad: expected a gradient of shape %s, got %s",
                                ct__tshape(t), ct__tshape(g));
    ct__meta_like(&out[0], g, g->dtype);
    return CT_OK;
}

int ct__ew_fused_grad(int kind, ct_tensor *g, ct_tensor *t, ct_tensor **res) {
    *res = NULL;
    if (!g || !t) return 0;
    ct_tensor *ins[2] = {g, t};
    if (ct__ag_active(ins, 2)) return 0; /* the backward is being recorded */
    /* what the op takes (else the caller's own formula) */
    if (g->dtype != t->dtype || (g->dtype != CT_F32 && g->dtype != CT_F64)) return 0;
    if (g->storage->device != t->storage->device) return 0;
    if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)g->ndim) != 0)
        return 0;
    ct_args a = ct__args(CT_OP_ew_grad);
    a.p.ew_grad.kind = kind;
    ct_meta m; /* the op's checks on both paths (the meta function sets all of m) */
    if (ct__meta_ew_grad(&m, 1, ins, 2, &a)) return -1;
    if (!ct__fused_kernel(CT_OP_ew_grad, g->storage->device)) { /* the fallback */
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(ew_grad_composite(kind, g, t));
        ct_scope_end(s);
        *res = r;
        return r ? 1 : -1;
    }
    /* allocate -> dispatch (never recorded: no graph is built) */
    ct_tensor *out = ct__meta_new(&m, ins);
    if (!out) return -1;
    if (ct__dispatch(CT_OP_ew_grad, &out, 1, ins, 2, &a)) {
        ct_release(out);
        return -1;
    }
    *res = ct__register(out);
    return 1;
}
