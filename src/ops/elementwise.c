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

static bool is_integral(ct_dtype d) { return ct_dtype_is_integral(d, true); }

/* Float-only ops (PyTorch has no integer kernels for them). */
static ct_status float_only(const char *name, const char *us, ct_dtype d) {
    if (ct_dtype_is_floating(d)) return CT_OK;
    return ct__error_status(CT_ERR_DTYPE, "%s%s: not implemented for dtype %s (floating point only)",
                            name, us, ct_dtype_name(d));
}

/* The checks particular to one op, on its inputs' dtypes and its
 * parameters, before broadcasting (cdt: the inputs' promoted dtype). */
static inline __attribute__((always_inline)) ct_status op_checks(ct_op op, const char *name, const char *us, ct_tensor *const *in,
                           const ct_p_ew *p, ct_dtype cdt) {
    switch (op) {
    case CT_OP_celu:
        if (p->alpha == 0)
            return ct__error_status(CT_ERR_ARG, "celu: ZeroDivisionError (alpha must not be 0)");
        break;
    case CT_OP_softshrink:
        if (!(p->lambd >= 0))
            return ct__error_status(CT_ERR_ARG, "softshrink: lambda must be greater or equal to 0, "
                                    "but found to be %g", p->lambd);
        break;
    case CT_OP_round_decimals:
        if (p->decimals > 400 || p->decimals < -400)
            return ct__error_status(CT_ERR_ARG, "round_decimals: decimals %lld out of range",
                                    (long long)p->decimals);
        break;
    case CT_OP_hardtanh:
        if (in[0]->dtype == CT_U8 && (p->min_val < 0 || p->max_val < 0))
            return ct__error_status(CT_ERR_ARG, "hardtanh: cannot do hardtanh on an unsigned type with "
                                    "negative limits (min_val %g, max_val %g)", p->min_val, p->max_val);
        break;
    case CT_OP_polygamma:
        if (p->n < 0)
            return ct__error_status(CT_ERR_ARG, "polygamma: polygamma(n, x) does not support negative "
                                    "n (got %lld)", (long long)p->n);
        break;
    case CT_OP_pow_scalar:
        if (is_integral(in[0]->dtype) && p->exponent == floor(p->exponent) && p->exponent < 0)
            return ct__error_status(CT_ERR_ARG, "pow_scalar: Integers to negative integer powers are "
                                    "not allowed. (%s ** %g)", ct_dtype_name(in[0]->dtype), p->exponent);
        break;
    case CT_OP_clamp:
        if (!p->has_min && !p->has_max)
            return ct__error_status(CT_ERR_ARG, "clamp%s: at least one of 'min' or 'max' must not be "
                                    "None (NAN)", us);
        break;
    case CT_OP_clamp_tensor:
        if (!p->has_min && !p->has_max)
            return ct__error_status(CT_ERR_ARG, "clamp_tensor: at least one of 'min' or 'max' must "
                                    "not be None");
        if (cdt == CT_BOOL) /* torch computes bool clamps in the bool dtype; min/max of 0/1 */
            return ct__error_status(CT_ERR_DTYPE, "clamp_tensor: not implemented for dtype bool");
        break;
    case CT_OP_add:
    case CT_OP_sub:
        if (p->has_alpha && is_integral(cdt) && p->alpha != floor(p->alpha))
            return ct__error_status(CT_ERR_ARG, "%s: for integral input tensors, argument alpha must "
                                    "not be a floating point number (got %g)", name, p->alpha);
        if (op == CT_OP_sub && cdt == CT_BOOL)
            return ct__error_status(CT_ERR_DTYPE, "sub: subtraction with two bool tensors is not "
                                    "supported; use logical_xor instead");
        break;
    case CT_OP_isclose:
        if (in[0]->dtype != in[1]->dtype)
            return ct__error_status(CT_ERR_DTYPE, "isclose: %s did not match %s",
                                    ct_dtype_name(in[0]->dtype), ct_dtype_name(in[1]->dtype));
        if (!(p->rtol >= 0))
            return ct__error_status(CT_ERR_ARG, "isclose: rtol must be greater than or equal to zero, "
                                    "but got %g", p->rtol);
        if (!(p->atol >= 0))
            return ct__error_status(CT_ERR_ARG, "isclose: atol must be greater than or equal to zero, "
                                    "but got %g", p->atol);
        break;
    case CT_OP_where:
        if (in[0]->dtype != CT_BOOL)
            return ct__error_status(CT_ERR_DTYPE, "where: expected condition to be a boolean tensor, "
                                    "but got a tensor with dtype %s", ct_dtype_name(in[0]->dtype));
        break;
    case CT_OP_lerp: /* start's dtype rules; a wrapped number weight (lerp_scalar) is exempt */
        if (float_only(name, "", in[0]->dtype)) return ct_last_error_code();
        if (in[1]->dtype != in[0]->dtype)
            return ct__error_status(CT_ERR_DTYPE, "lerp: expected dtype %s for `end` but got dtype %s",
                                    ct_dtype_name(in[0]->dtype), ct_dtype_name(in[1]->dtype));
        if (!(in[2]->flags & CT_TF_WRAPPED) && in[2]->dtype != in[0]->dtype)
            return ct__error_status(CT_ERR_DTYPE, "lerp: expected dtype %s for `weight` but got "
                                    "dtype %s", ct_dtype_name(in[0]->dtype), ct_dtype_name(in[2]->dtype));
        break;
    case CT_OP_addcmul:
    case CT_OP_addcdiv:
        if (op == CT_OP_addcdiv && is_integral(cdt))
            return ct__error_status(CT_ERR_DTYPE, "%s: Integer division with addcdiv is no longer "
                                    "supported (got %s tensors); use a floating point dtype", name,
                                    ct_dtype_name(cdt));
        if (cdt == CT_BOOL) return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for dtype bool", name);
        break;
    default:
        break;
    }
    return CT_OK;
}

/* The meta function of every elementwise op (ct__meta_ew is this with
 * inplace false), inlined into the driver (a tiny add costs a few hundred
 * instructions; a call and a second pass would show): m := the broadcast
 * shape, the output dtype and the device of op (a->op) on in[0..nin), after
 * every argument check with the op's messages; *cdt_out := the dtype it
 * computes in (the promoted dtype, after the mode's float promotion).
 * inplace only names the in-place form ("clamp_") in the messages that do. */
static inline __attribute__((always_inline)) ct_status
ew_meta(ct_meta *m, ct_tensor *const *in, int nin, const ct_args *a, bool inplace, ct_dtype *cdt_out) {
    ct_op op = a->op;
    const char *name = ct__op_info[op].name, *us = inplace ? "_" : "";
    unsigned mode = ct__op_info[op].ew_mode;
    for (int k = 0; k < nin; k++)
        if (!in[k]) return ct__null_arg_status(name, "input %d", k); /* every elementwise op */
    ct_dtype cdt = ct_result_type(in, nin);
    ct_status st;
    if ((st = op_checks(op, name, us, in, &a->p.ew, cdt))) return st;
    if ((mode & CT_EW_FLOAT_ONLY) && (st = float_only(name, us, cdt))) return st;
    /* broadcast shape */
    int nd = in[0]->ndim;
    memcpy(m->sizes, in[0]->sizes, sizeof(int64_t) * (size_t)nd);
    for (int k = 1; k < nin; k++)
        if ((st = ct__broadcast_shapes(name, m->sizes, nd, in[k]->sizes, in[k]->ndim, m->sizes, &nd)))
            return st;
    /* dtypes */
    if ((mode & CT_EW_INT_ONLY) && !is_integral(cdt))
        return ct__error_status(CT_ERR_DTYPE, "%s: only integral and bool tensors are supported, "
                                "got %s", name, ct_dtype_name(cdt));
    if ((mode & CT_EW_NO_BOOL) && cdt == CT_BOOL)
        return ct__error_status(CT_ERR_DTYPE, "%s: not supported for bool tensors", name);
    if ((mode & CT_EW_NO_COMPLEX) && ct_dtype_is_complex(cdt))
        return ct__error_status(CT_ERR_DTYPE, "%s: not supported for complex tensors (got %s)", name,
                                ct_dtype_name(cdt));
    if (mode & CT_EW_FLOAT) cdt = ct__float_dtype(cdt);
    ct_dtype odt = (mode & CT_EW_BOOL_OUT) ? CT_BOOL : cdt;
    if ((mode & CT_EW_REAL_OUT) && ct_dtype_is_complex(cdt)) odt = cdt == CT_C128 ? CT_F64 : CT_F32;
    /* the device: in[0]'s when all agree (the common case), else
     * ct__meta_device's rule and check (0-dim cpu tensors combine) */
    ct_device dev = in[0]->storage->device;
    for (int k = 1; k < nin; k++)
        if (!ct__same_device(in[k], in[0])) {
            if ((st = ct__meta_device(name, in, nin, &dev))) return st;
            break;
        }
    if (dev != CT_CPU) ct__follow_inputs(in, nin);
    m->ndim = nd;
    m->dtype = odt;
    m->device = dev;
    m->flags = 0;
    m->offset = 0;
    m->base = 0;
    *cdt_out = cdt;
    return CT_OK;
}

CT_META_FN(ct__meta_ew) {
    (void)nout;
    ct_dtype cdt = CT_F32;
    return ew_meta(out, in, nin, a, false, &cdt);
}

ct_tensor *ct__ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a, ct_tensor *inplace) {
    const char *name = ct__op_info[op].name;
    ct_args local;
    if (!a) {
        /* an op without a parameter family reads nothing of p (params.h:
         * equality, hashing, printing and autograd's copy go by the family),
         * so only op is set; zeroing all 632 bytes was a fifth of the
         * driver's own cost for a tiny mul */
        if (ct__op_pfam[op]) local = ct__args(op);
        else local.op = op;
        a = &local;
    }
    ct_meta m;
    ct_dtype cdt = CT_F32;
    if (ew_meta(&m, ins, nin, a, inplace != NULL, &cdt)) return NULL;
    const int64_t *shape = m.sizes;
    int nd = m.ndim;
    ct_dtype odt = m.dtype;
    ct__backends_init();
    ct_device dev = inplace ? inplace->storage->device : m.device;
    if (!ct__kernels[dev][op])
        return ct__error(CT_ERR_DEVICE, "%s: no kernel for device %s", name, ct_device_name(dev));
    /* f16/bf16: the device's kernel computes them itself when it says so
     * (ct__half_native); its other operands (wrapped numbers, integers)
     * then come as f32, as they do on the converting path */
    bool hn = ct__half_native(dev, op, cdt);
    ct_dtype kdt = hn ? cdt : kernel_dtype(cdt);
    ct_dtype kodt = hn ? odt : kernel_dtype(odt);
    /* torch's rule for the other operands: cast to the half dtype, except a
     * wrapped number of mul/div, which its kernels read in f32 (opmath) */
    bool f32_scalar = hn && (op == CT_OP_mul || op == CT_OP_div || op == CT_OP_div_trunc ||
                             op == CT_OP_div_floor);

    if (inplace) {
        if (!ct__meta_same_sizes(&m, inplace)) {
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
        bool scal32 = f32_scalar && (x->flags & CT_TF_WRAPPED);
        if (x->dtype == kdt || (scal32 && x->dtype == CT_F32) ||
            (op == CT_OP_where && k == 0 && x->dtype == CT_BOOL))
            cin[k] = ct_retain(x);
        else {
            cin[k] = ct__alloc(x->sizes, x->ndim, scal32 ? CT_F32 : kdt, x->storage->device);
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

/* The meta function of ew_grad: g and t of one shape, f32 or f64 (or
 * f16/bf16, which a device's kernel computes in f32 from the half loads
 * and rounds once, where ct__half_native says so), on one device; the
 * gradient is g's shape, contiguous. */
CT_META_FN(ct__meta_ew_grad) {
    (void)nout;
    if (nin != 2)
        return ct__error_status(CT_ERR_ARG, "ew_grad: expected 2 inputs, got %d", nin);
    ct_tensor *g = in[0], *t = in[1];
    int64_t kind = a->p.ew_grad.kind;
    if (kind < 0 || kind >= CT_EWG_COUNT)
        return ct__error_status(CT_ERR_ARG, "ew_grad: bad kind %d", (int)kind);
    if (g->dtype != t->dtype || (g->dtype != CT_F32 && g->dtype != CT_F64 && g->dtype != CT_F16 &&
                                 g->dtype != CT_BF16))
        return ct__error_status(CT_ERR_DTYPE, "ew_grad: expected a gradient and an input of one dtype, "
                                "a floating one, got %s and %s", ct_dtype_name(g->dtype),
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
    if (g->dtype != t->dtype || (g->dtype != CT_F32 && g->dtype != CT_F64 &&
                                 !ct__half_native(g->storage->device, CT_OP_ew_grad, g->dtype)))
        return 0;
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
