/* elementwise_ops.c -- the public elementwise functions, each a thin call
 * of the driver (ew.h) with its dtype mode and parameters.
 *
 * Scalar arguments (double) behave like Python numbers: an integral value
 * acts like a Python int (x_int + 2 stays int), any other value like a
 * Python float (x_int + 2.5 is float). */
#include <float.h>
#include <math.h>

#include "ew.h"

/* ---- helpers ----------------------------------------------------------- */
/* A wrapped number for s (int64 when integral, else float64); not in any
 * scope, the caller releases it. */
static ct_tensor *wrap_num(double s) {
    if (s == floor(s) && fabs(s) < 9007199254740992.0) {
        ct_tensor *t = ct__alloc(NULL, 0, CT_I64, CT_CPU);
        if (!t) return NULL;
        *(int64_t *)ct__ptr(t) = (int64_t)s;
        t->flags |= CT_TF_WRAPPED;
        return t;
    }
    return ct__wrapped_tmp(s);
}

static bool is_float(ct_dtype d) { return ct_dtype_is_floating(d); }

/* Float-only ops (PyTorch has no integer kernels for them). */
static bool float_only(const char *name, ct_dtype d) {
    if (is_float(d)) return true;
    ct__error(CT_ERR_DTYPE, "%s: not implemented for dtype %s (floating point only)", name,
              ct_dtype_name(d));
    return false;
}

/* Runs a 1-input op on x promoted with the scalars' dtypes (result_type of
 * x and the wrapped numbers); inplace: write into x. */
static ct_tensor *unary_promoted(ct_op op, ct_tensor *x, const double *sc, int nsc,
                                 const ct_args *a, unsigned mode, int inplace) {
    CT_NULLCHECK_OP(ct__op_info[op].name, x);
    ct_tensor *ts[4] = {x, NULL, NULL, NULL};
    for (int k = 0; k < nsc; k++) {
        ts[k + 1] = wrap_num(sc[k]);
        if (!ts[k + 1]) {
            for (int j = 1; j <= k; j++) ct_release(ts[j]);
            return NULL;
        }
    }
    ct_dtype rt = ct_result_type(ts, nsc + 1);
    for (int k = 1; k <= nsc; k++) ct_release(ts[k]);
    ct_tensor *in = rt == x->dtype ? ct_retain(x) : ct__contig_as(x, rt);
    if (!in) return NULL;
    ct_tensor *ins[1] = {in};
    ct_tensor *r = ct__ew(op, ins, 1, a, mode, inplace ? x : NULL);
    ct_release(in);
    return r;
}

/* All elementwise ops go through the driver (src/ops/elementwise.c). */
static ct_tensor *ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a, unsigned mode,
                     ct_tensor *inplace) {
    return ct__ew(op, ins, nin, a, mode, inplace);
}

/* ---- unary ------------------------------------------------------------- */
#define UNARY_PAIR(NAME, MODE)                                                     \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, MODE, NULL);                      \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *x) {                                        \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, MODE, x);                         \
    }
/* float-only unary (silu, mish, ...): integer input is an error */
#define UNARY_PAIR_FLOAT_ONLY(NAME)                                                \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        CT_NULLCHECK(x);                                                           \
        if (!float_only(#NAME, x->dtype)) return NULL;                             \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, CT_EW_SAME, NULL);                \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *x) {                                        \
        CT_NULLCHECK(x);                                                           \
        if (!float_only(#NAME "_", x->dtype)) return NULL;                         \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, CT_EW_SAME, x);                   \
    }
#define PREDICATE(NAME)                                                            \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, CT_EW_BOOL_OUT | CT_EW_NO_COMPLEX, NULL); \
    }

UNARY_PAIR(neg, CT_EW_NO_BOOL)
UNARY_PAIR(abs, CT_EW_NO_BOOL | CT_EW_REAL_OUT)
UNARY_PAIR(sign, CT_EW_SAME)
UNARY_PAIR(sgn, CT_EW_SAME)
UNARY_PAIR(reciprocal, CT_EW_FLOAT)
UNARY_PAIR(sqrt, CT_EW_FLOAT)
UNARY_PAIR(rsqrt, CT_EW_FLOAT)
UNARY_PAIR(exp, CT_EW_FLOAT)
UNARY_PAIR(exp2, CT_EW_FLOAT)
UNARY_PAIR(expm1, CT_EW_FLOAT)
UNARY_PAIR(log, CT_EW_FLOAT)
UNARY_PAIR(log2, CT_EW_FLOAT)
UNARY_PAIR(log10, CT_EW_FLOAT)
UNARY_PAIR(log1p, CT_EW_FLOAT)
UNARY_PAIR(sin, CT_EW_FLOAT)
UNARY_PAIR(cos, CT_EW_FLOAT)
UNARY_PAIR(tan, CT_EW_FLOAT)
UNARY_PAIR(asin, CT_EW_FLOAT)
UNARY_PAIR(acos, CT_EW_FLOAT)
UNARY_PAIR(atan, CT_EW_FLOAT)
UNARY_PAIR(sinh, CT_EW_FLOAT)
UNARY_PAIR(cosh, CT_EW_FLOAT)
UNARY_PAIR(tanh, CT_EW_FLOAT)
UNARY_PAIR(asinh, CT_EW_FLOAT)
UNARY_PAIR(acosh, CT_EW_FLOAT)
UNARY_PAIR(atanh, CT_EW_FLOAT)
UNARY_PAIR(sigmoid, CT_EW_FLOAT)
UNARY_PAIR(relu, CT_EW_NO_BOOL)
UNARY_PAIR(relu6, CT_EW_NO_BOOL)
UNARY_PAIR(softsign, CT_EW_FLOAT)
UNARY_PAIR(erf, CT_EW_FLOAT)
UNARY_PAIR(erfc, CT_EW_FLOAT)
UNARY_PAIR(erfinv, CT_EW_FLOAT)
UNARY_PAIR(lgamma, CT_EW_FLOAT)
UNARY_PAIR(digamma, CT_EW_FLOAT)
UNARY_PAIR(floor, CT_EW_NO_BOOL)
UNARY_PAIR(ceil, CT_EW_NO_BOOL)
UNARY_PAIR(round, CT_EW_NO_BOOL)
UNARY_PAIR(trunc, CT_EW_NO_BOOL)
UNARY_PAIR(logical_not, CT_EW_BOOL_OUT)
UNARY_PAIR(bitwise_not, CT_EW_INT_ONLY)
UNARY_PAIR_FLOAT_ONLY(selu)
UNARY_PAIR_FLOAT_ONLY(silu)
UNARY_PAIR_FLOAT_ONLY(mish)
UNARY_PAIR_FLOAT_ONLY(hardsigmoid)
UNARY_PAIR_FLOAT_ONLY(hardswish)
UNARY_PAIR_FLOAT_ONLY(frac)
PREDICATE(isnan)
PREDICATE(isinf)
PREDICATE(isfinite)
PREDICATE(isposinf)
PREDICATE(isneginf)
PREDICATE(signbit)

/* square: bool squares to int64 like torch (x ** 2) */
static ct_tensor *square_impl(ct_tensor *x, int inplace) {
    CT_NULLCHECK(x);
    ct_tensor *in = x->dtype == CT_BOOL ? ct__contig_as(x, CT_I64) : ct_retain(x);
    if (!in) return NULL;
    ct_tensor *ins[1] = {in};
    ct_tensor *r = ew(CT_OP_square, ins, 1, NULL, CT_EW_SAME, inplace ? x : NULL);
    ct_release(in);
    return r;
}
ct_tensor *ct_square(ct_tensor *x) { return square_impl(x, 0); }
ct_tensor *ct_square_(ct_tensor *x) { return square_impl(x, 1); }

/* ---- parameterized unary ----------------------------------------------- */
/* one float-only op with its args */
static ct_tensor *float_param(ct_op op, const char *name, ct_tensor *x, const ct_args *a,
                              int inplace) {
    CT_NULLCHECK_OP(name, x);
    if (!float_only(name, x->dtype)) return NULL;
    ct_tensor *in[1] = {x};
    return ew(op, in, 1, a, CT_EW_SAME, inplace ? x : NULL);
}

ct_tensor *ct_logit(ct_tensor *x, double eps) {
    ct_args a = ct__args(CT_OP_logit);
    a.p.ew.eps = eps;
    a.p.ew.has_eps = eps >= 0;
    ct_tensor *in[1] = {x};
    return ew(CT_OP_logit, in, 1, &a, CT_EW_FLOAT, NULL);
}
ct_tensor *ct_leaky_relu(ct_tensor *x, double negative_slope) {
    ct_args a = ct__args(CT_OP_leaky_relu);
    a.p.ew.negative_slope = negative_slope;
    return float_param(CT_OP_leaky_relu, "leaky_relu", x, &a, 0);
}
ct_tensor *ct_leaky_relu_(ct_tensor *x, double negative_slope) {
    ct_args a = ct__args(CT_OP_leaky_relu);
    a.p.ew.negative_slope = negative_slope;
    return float_param(CT_OP_leaky_relu, "leaky_relu_", x, &a, 1);
}
ct_tensor *ct_elu(ct_tensor *x, double alpha) {
    ct_args a = ct__args(CT_OP_elu);
    a.p.ew.alpha = alpha;
    return float_param(CT_OP_elu, "elu", x, &a, 0);
}
ct_tensor *ct_celu(ct_tensor *x, double alpha) {
    CT_NULLCHECK(x);
    if (alpha == 0)
        return ct__error(CT_ERR_ARG, "celu: ZeroDivisionError (alpha must not be 0)");
    ct_args a = ct__args(CT_OP_celu);
    a.p.ew.alpha = alpha;
    return float_param(CT_OP_celu, "celu", x, &a, 0);
}
ct_tensor *ct_gelu(ct_tensor *x, ct_gelu_approx approximate) {
    CT_NULLCHECK(x);
    if (approximate != CT_GELU_NONE && approximate != CT_GELU_TANH)
        return ct__error(CT_ERR_ARG, "gelu: approximate must be CT_GELU_NONE or CT_GELU_TANH, got %d",
                         (int)approximate);
    ct_args a = ct__args(CT_OP_gelu);
    a.p.ew.approximate = approximate == CT_GELU_TANH;
    return float_param(CT_OP_gelu, "gelu", x, &a, 0);
}
ct_tensor *ct_softplus(ct_tensor *x, double beta, double threshold) {
    ct_args a = ct__args(CT_OP_softplus);
    a.p.ew.beta = beta;
    a.p.ew.threshold = threshold;
    return float_param(CT_OP_softplus, "softplus", x, &a, 0);
}
ct_tensor *ct_hardtanh(ct_tensor *x, double min_val, double max_val) {
    CT_NULLCHECK(x);
    if (x->dtype == CT_U8 && (min_val < 0 || max_val < 0))
        return ct__error(CT_ERR_ARG, "hardtanh: cannot do hardtanh on an unsigned type with "
                         "negative limits (min_val %g, max_val %g)", min_val, max_val);
    ct_args a = ct__args(CT_OP_hardtanh);
    a.p.ew.min_val = min_val;
    a.p.ew.max_val = max_val;
    ct_tensor *in[1] = {x};
    return ew(CT_OP_hardtanh, in, 1, &a, CT_EW_NO_BOOL, NULL);
}
ct_tensor *ct_hardshrink(ct_tensor *x, double lambd) {
    ct_args a = ct__args(CT_OP_hardshrink);
    a.p.ew.lambd = lambd;
    return float_param(CT_OP_hardshrink, "hardshrink", x, &a, 0);
}
ct_tensor *ct_softshrink(ct_tensor *x, double lambd) {
    CT_NULLCHECK(x);
    if (!(lambd >= 0))
        return ct__error(CT_ERR_ARG, "softshrink: lambda must be greater or equal to 0, but found "
                         "to be %g", lambd);
    ct_args a = ct__args(CT_OP_softshrink);
    a.p.ew.lambd = lambd;
    return float_param(CT_OP_softshrink, "softshrink", x, &a, 0);
}

/* clamp: NAN bound = absent; min > max gives max everywhere (as torch) */
static ct_tensor *clamp_impl(ct_tensor *x, double min, double max, int inplace) {
    CT_NULLCHECK(x);
    const char *name = inplace ? "clamp_" : "clamp";
    int hmin = !isnan(min), hmax = !isnan(max);
    if (!hmin && !hmax)
        return ct__error(CT_ERR_ARG, "%s: at least one of 'min' or 'max' must not be None (NAN)",
                         name);
    ct_args a = ct__args(CT_OP_clamp);
    a.p.ew.min = min;
    a.p.ew.max = max;
    a.p.ew.has_min = hmin;
    a.p.ew.has_max = hmax;
    double sc[2];
    int n = 0;
    if (hmin) sc[n++] = min;
    if (hmax) sc[n++] = max;
    return unary_promoted(CT_OP_clamp, x, sc, n, &a, CT_EW_NO_COMPLEX, inplace);
}
ct_tensor *ct_clamp(ct_tensor *x, double min, double max) { return clamp_impl(x, min, max, 0); }
ct_tensor *ct_clamp_(ct_tensor *x, double min, double max) { return clamp_impl(x, min, max, 1); }

ct_tensor *ct_clamp_tensor(ct_tensor *x, ct_tensor *min, ct_tensor *max) {
    CT_NULLCHECK(x);
    if (!min && !max)
        return ct__error(CT_ERR_ARG, "clamp_tensor: at least one of 'min' or 'max' must not be None");
    ct_args a = ct__args(CT_OP_clamp_tensor);
    a.p.ew.has_min = min != NULL;
    a.p.ew.has_max = max != NULL;
    ct_tensor *in[3] = {x, min ? min : x, max ? max : x};
    ct_dtype rt = ct_result_type(in, 3);
    if (rt == CT_BOOL) /* torch computes bool clamps in the bool dtype; min/max of 0/1 */
        return ct__error(CT_ERR_DTYPE, "clamp_tensor: not implemented for dtype bool");
    return ew(CT_OP_clamp_tensor, in, 3, &a, CT_EW_NO_COMPLEX, NULL);
}

static double dtype_max(ct_dtype d) {
    switch (d) {
    case CT_F16: return 65504.0;
    case CT_BF16: return 3.38953138925153547590e38;
    case CT_F32: return FLT_MAX;
    default: return DBL_MAX;
    }
}
ct_tensor *ct_nan_to_num(ct_tensor *x, double nan, double posinf, double neginf) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_nan_to_num);
    a.p.ew.nan = isnan(nan) ? 0.0 : nan;
    a.p.ew.posinf = isnan(posinf) ? dtype_max(x->dtype) : posinf;
    a.p.ew.neginf = isnan(neginf) ? -dtype_max(x->dtype) : neginf;
    ct_tensor *in[1] = {x};
    return ew(CT_OP_nan_to_num, in, 1, &a, CT_EW_NO_COMPLEX, NULL);
}

ct_tensor *ct_round_decimals(ct_tensor *x, int64_t decimals) {
    CT_NULLCHECK(x);
    if (decimals == 0) {
        if (!float_only("round_decimals", x->dtype)) return NULL;
        return ct_round(x);
    }
    if (decimals > 400 || decimals < -400)
        return ct__error(CT_ERR_ARG, "round_decimals: decimals %lld out of range",
                         (long long)decimals);
    ct_args a = ct__args(CT_OP_round_decimals);
    a.p.ew.decimals = decimals;
    return float_param(CT_OP_round_decimals, "round_decimals", x, &a, 0);
}

/* polygamma(n, x): p.ew.n.  n == 0 is digamma. */
ct_tensor *ct_polygamma(int64_t n, ct_tensor *x) {
    CT_NULLCHECK(x);
    if (n < 0)
        return ct__error(CT_ERR_ARG, "polygamma: polygamma(n, x) does not support negative n (got %lld)",
                         (long long)n);
    if (n == 0) return ct_digamma(x);
    ct_args a = ct__args(CT_OP_polygamma);
    a.p.ew.n = n;
    ct_tensor *in[1] = {x};
    return ew(CT_OP_polygamma, in, 1, &a, CT_EW_FLOAT, NULL);
}

ct_tensor *ct_pow_scalar(ct_tensor *x, double exponent) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_pow_scalar);
    a.p.ew.exponent = exponent;
    if (ct_dtype_is_integral(x->dtype, true) && exponent == floor(exponent) && exponent < 0)
        return ct__error(CT_ERR_ARG, "pow_scalar: Integers to negative integer powers are not "
                         "allowed. (%s ** %g)", ct_dtype_name(x->dtype), exponent);
    double sc[1] = {exponent};
    return unary_promoted(CT_OP_pow_scalar, x, sc, 1, &a, CT_EW_NO_COMPLEX, 0);
}
ct_tensor *ct_rpow_scalar(double base, ct_tensor *x) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_rpow_scalar);
    a.p.ew.base = base;
    double sc[1] = {base};
    return unary_promoted(CT_OP_rpow_scalar, x, sc, 1, &a, CT_EW_NO_COMPLEX, 0);
}

/* ---- binary ------------------------------------------------------------ */
#define BINARY_PAIR(NAME, MODE)                                                    \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, MODE, NULL);                      \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *a, ct_tensor *b) {                          \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, MODE, a);                         \
    }
#define COMPARE(NAME)                                                              \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, CT_EW_BOOL_OUT, NULL);            \
    }

BINARY_PAIR(mul, CT_EW_SAME)
BINARY_PAIR(div, CT_EW_FLOAT)
BINARY_PAIR(pow, CT_EW_NO_BOOL)
BINARY_PAIR(atan2, CT_EW_FLOAT)
BINARY_PAIR(minimum, CT_EW_NO_COMPLEX)
BINARY_PAIR(maximum, CT_EW_NO_COMPLEX)
BINARY_PAIR(fmin, CT_EW_NO_COMPLEX)
BINARY_PAIR(fmax, CT_EW_NO_COMPLEX)
BINARY_PAIR(fmod, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX)
BINARY_PAIR(remainder, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX)
BINARY_PAIR(bitwise_and, CT_EW_INT_ONLY)
BINARY_PAIR(bitwise_or, CT_EW_INT_ONLY)
BINARY_PAIR(bitwise_xor, CT_EW_INT_ONLY)
BINARY_PAIR(bitwise_left_shift, CT_EW_INT_ONLY | CT_EW_NO_BOOL)
BINARY_PAIR(bitwise_right_shift, CT_EW_INT_ONLY | CT_EW_NO_BOOL)
BINARY_PAIR(xlogy, CT_EW_FLOAT)
BINARY_PAIR(copysign, CT_EW_FLOAT)
COMPARE(eq) COMPARE(ne) COMPARE(lt) COMPARE(le) COMPARE(gt) COMPARE(ge)
COMPARE(logical_and) COMPARE(logical_or) COMPARE(logical_xor)

static ct_tensor *hypot_impl(ct_tensor *a, ct_tensor *b, int inplace) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *in[2] = {a, b};
    if (!float_only(inplace ? "hypot_" : "hypot", ct_result_type(in, 2))) return NULL;
    return ew(CT_OP_hypot, in, 2, NULL, CT_EW_SAME, inplace ? a : NULL);
}
ct_tensor *ct_hypot(ct_tensor *a, ct_tensor *b) { return hypot_impl(a, b, 0); }
ct_tensor *ct_hypot_(ct_tensor *a, ct_tensor *b) { return hypot_impl(a, b, 1); }

/* floor_divide is floor division (PyTorch >= 1.13) */
ct_tensor *ct_floor_divide(ct_tensor *a, ct_tensor *b) {
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_div_floor, in, 2, NULL, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX, NULL);
}
ct_tensor *ct_floor_divide_(ct_tensor *a, ct_tensor *b) {
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_div_floor, in, 2, NULL, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX, a);
}

ct_tensor *ct_div_mode(ct_tensor *a, ct_tensor *b, ct_rounding mode) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *in[2] = {a, b};
    switch (mode) {
    case CT_ROUND_NONE: return ct_div(a, b);
    case CT_ROUND_TRUNC:
        return ew(CT_OP_div_trunc, in, 2, NULL, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX, NULL);
    case CT_ROUND_FLOOR:
        return ew(CT_OP_div_floor, in, 2, NULL, CT_EW_NO_BOOL | CT_EW_NO_COMPLEX, NULL);
    }
    return ct__error(CT_ERR_ARG, "div_mode: rounding mode %d is not one of CT_ROUND_NONE, "
                     "CT_ROUND_TRUNC, CT_ROUND_FLOOR", (int)mode);
}

static ct_tensor *add_sub(ct_op op, ct_tensor *a, ct_tensor *b, double alpha, int has_alpha,
                          ct_tensor *inplace) {
    CT_NULLCHECK_OP(ct__op_info[op].name, a);
    CT_NULLCHECK_OP(ct__op_info[op].name, b);
    ct_args args = ct__args(op);
    args.p.ew.alpha = alpha;
    args.p.ew.has_alpha = has_alpha && alpha != 1.0;
    ct_tensor *in[2] = {a, b};
    if (args.p.ew.has_alpha) {
        ct_dtype r = ct_result_type(in, 2);
        if (ct_dtype_is_integral(r, true) && alpha != floor(alpha))
            return ct__error(CT_ERR_ARG, "%s: for integral input tensors, argument alpha must not "
                             "be a floating point number (got %g)", ct__op_info[op].name, alpha);
    }
    if (op == CT_OP_sub && ct_result_type(in, 2) == CT_BOOL)
        return ct__error(CT_ERR_DTYPE, "sub: subtraction with two bool tensors is not supported; "
                         "use logical_xor instead");
    return ew(op, in, 2, &args, CT_EW_SAME, inplace);
}

ct_tensor *ct_add(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_add, a, b, 1, 0, NULL); }
ct_tensor *ct_add_(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_add, a, b, 1, 0, a); }
ct_tensor *ct_sub(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_sub, a, b, 1, 0, NULL); }
ct_tensor *ct_sub_(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_sub, a, b, 1, 0, a); }
ct_tensor *ct_add_scaled(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_add, a, b, alpha, 1, NULL);
}
ct_tensor *ct_add_scaled_(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_add, a, b, alpha, 1, a);
}
ct_tensor *ct_sub_scaled(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_sub, a, b, alpha, 1, NULL);
}

/* scalar forms: the scalar is a wrapped number */
#define SCALAR_FORM(FN, CALL)                                                      \
    ct_tensor *FN(ct_tensor *a, double s) {                                        \
        CT_NULLCHECK(a);                                                           \
        ct_tensor *w = wrap_num(s);                                                \
        if (!w) return NULL;                                                       \
        ct_tensor *r = CALL(a, w);                                                 \
        ct_release(w);                                                             \
        return r;                                                                  \
    }
SCALAR_FORM(ct_add_scalar, ct_add)
SCALAR_FORM(ct_sub_scalar, ct_sub)
SCALAR_FORM(ct_mul_scalar, ct_mul)
SCALAR_FORM(ct_div_scalar, ct_div)
SCALAR_FORM(ct_add_scalar_, ct_add_)
SCALAR_FORM(ct_mul_scalar_, ct_mul_)
SCALAR_FORM(ct_eq_scalar, ct_eq)
SCALAR_FORM(ct_gt_scalar, ct_gt)
SCALAR_FORM(ct_lt_scalar, ct_lt)

ct_tensor *ct_isclose(ct_tensor *a, ct_tensor *b, double rtol, double atol, bool equal_nan) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    if (a->dtype != b->dtype)
        return ct__error(CT_ERR_DTYPE, "isclose: %s did not match %s", ct_dtype_name(a->dtype),
                         ct_dtype_name(b->dtype));
    if (!(rtol >= 0))
        return ct__error(CT_ERR_ARG, "isclose: rtol must be greater than or equal to zero, but got %g",
                         rtol);
    if (!(atol >= 0))
        return ct__error(CT_ERR_ARG, "isclose: atol must be greater than or equal to zero, but got %g",
                         atol);
    ct_args args = ct__args(CT_OP_isclose);
    args.p.ew.rtol = rtol;
    args.p.ew.atol = atol;
    args.p.ew.equal_nan = equal_nan;
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_isclose, in, 2, &args, CT_EW_BOOL_OUT | CT_EW_NO_COMPLEX, NULL);
}

/* ---- ternary ----------------------------------------------------------- */
ct_tensor *ct_where(ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK(cond);
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    if (cond->dtype != CT_BOOL)
        return ct__error(CT_ERR_DTYPE, "where: expected condition to be a boolean tensor, but got "
                         "a tensor with dtype %s", ct_dtype_name(cond->dtype));
    ct_tensor *in[3] = {cond, a, b};
    return ew(CT_OP_where, in, 3, NULL, CT_EW_NO_COMPLEX, NULL);
}

static ct_tensor *lerp_impl(ct_tensor *start, ct_tensor *end, ct_tensor *weight, int wrapped) {
    CT_NULLCHECK(start);
    CT_NULLCHECK(end);
    CT_NULLCHECK(weight);
    if (!float_only("lerp", start->dtype)) return NULL;
    if (end->dtype != start->dtype)
        return ct__error(CT_ERR_DTYPE, "lerp: expected dtype %s for `end` but got dtype %s",
                         ct_dtype_name(start->dtype), ct_dtype_name(end->dtype));
    if (!wrapped && weight->dtype != start->dtype)
        return ct__error(CT_ERR_DTYPE, "lerp: expected dtype %s for `weight` but got dtype %s",
                         ct_dtype_name(start->dtype), ct_dtype_name(weight->dtype));
    ct_tensor *in[3] = {start, end, weight};
    return ew(CT_OP_lerp, in, 3, NULL, CT_EW_SAME, NULL);
}
ct_tensor *ct_lerp(ct_tensor *start, ct_tensor *end, ct_tensor *weight) {
    return lerp_impl(start, end, weight, 0);
}
ct_tensor *ct_lerp_scalar(ct_tensor *start, ct_tensor *end, double weight) {
    CT_NULLCHECK(start);
    CT_NULLCHECK(end);
    ct_tensor *w = ct__wrapped_tmp(weight);
    if (!w) return NULL;
    ct_tensor *r = lerp_impl(start, end, w, 1);
    ct_release(w);
    return r;
}

static ct_tensor *addc(ct_op op, ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value,
                       int inplace) {
    CT_NULLCHECK_OP(ct__op_info[op].name, self);
    CT_NULLCHECK_OP(ct__op_info[op].name, t1);
    CT_NULLCHECK_OP(ct__op_info[op].name, t2);
    ct_tensor *in[3] = {self, t1, t2};
    ct_dtype rt = ct_result_type(in, 3);
    const char *name = ct__op_info[op].name;
    if (op == CT_OP_addcdiv && ct_dtype_is_integral(rt, true))
        return ct__error(CT_ERR_DTYPE, "%s: Integer division with addcdiv is no longer supported "
                         "(got %s tensors); use a floating point dtype", name, ct_dtype_name(rt));
    if (rt == CT_BOOL)
        return ct__error(CT_ERR_DTYPE, "%s: not implemented for dtype bool", name);
    ct_args a = ct__args(op);
    a.p.ew.value = value;
    return ew(op, in, 3, &a, CT_EW_NO_COMPLEX, inplace ? self : NULL);
}
ct_tensor *ct_addcmul(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value) {
    return addc(CT_OP_addcmul, self, t1, t2, value, 0);
}
ct_tensor *ct_addcdiv(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value) {
    return addc(CT_OP_addcdiv, self, t1, t2, value, 0);
}
ct_tensor *ct_addcmul_(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value) {
    return addc(CT_OP_addcmul, self, t1, t2, value, 1);
}
ct_tensor *ct_addcdiv_(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value) {
    return addc(CT_OP_addcdiv, self, t1, t2, value, 1);
}
