/* elementwise_ops.c -- the public elementwise functions, each a thin call
 * of the driver (ew.h) with its parameters.  The checks, shapes and dtypes
 * are the ops' meta function's (ct__meta_ew, src/ops/elementwise.c), each
 * op's dtype rule its `.ew_mode` column in ops.def; what is left here is
 * preparation: wrapping numbers, promoting with them, parsing arguments.
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

/* x as dtype dt, a reference the caller releases: a recorded copy (ct_to_dtype), so a tracer
 * sees the cast (ct__contig_as's copy reports to no exit point, and the compiled graph would
 * not know the op's operand) */
static ct_tensor *cast_recorded(ct_tensor *x, ct_dtype dt) {
    ct_tensor *r = ct_to_dtype(x, dt);
    return r ? ct_retain(r) : NULL;
}

/* Runs a 1-input op on x promoted with the scalars' dtypes (result_type of
 * x and the wrapped numbers); inplace: write into x. */
static ct_tensor *unary_promoted(ct_op op, ct_tensor *x, const double *sc, int nsc,
                                 const ct_args *a, int inplace) {
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
    ct_tensor *in = rt == x->dtype ? ct_retain(x) : cast_recorded(x, rt);
    if (!in) return NULL;
    ct_tensor *ins[1] = {in};
    ct_tensor *r = ct__ew(op, ins, 1, a, inplace ? x : NULL);
    ct_release(in);
    return r;
}

/* All elementwise ops go through the driver (src/ops/elementwise.c). */
static ct_tensor *ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a,
                     ct_tensor *inplace) {
    return ct__ew(op, ins, nin, a, inplace);
}

/* ---- unary ------------------------------------------------------------- */
#define UNARY_PAIR(NAME)                                                           \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, NULL);                                \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *x) {                                        \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, x);                                   \
    }
/* the same, with the null check naming the argument */
#define UNARY_PAIR_NC(NAME)                                                        \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        CT_NULLCHECK(x);                                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, NULL);                                \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *x) {                                        \
        CT_NULLCHECK(x);                                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, x);                                   \
    }
#define UNARY(NAME)                                                                \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ew(CT_OP_##NAME, in, 1, NULL, NULL);                                \
    }

UNARY_PAIR(neg)
UNARY_PAIR(abs)
UNARY_PAIR(sign)
UNARY_PAIR(sgn)
UNARY_PAIR(reciprocal)
UNARY_PAIR(sqrt)
UNARY_PAIR(rsqrt)
UNARY_PAIR(exp)
UNARY_PAIR(exp2)
UNARY_PAIR(expm1)
UNARY_PAIR(log)
UNARY_PAIR(log2)
UNARY_PAIR(log10)
UNARY_PAIR(log1p)
UNARY_PAIR(sin)
UNARY_PAIR(cos)
UNARY_PAIR(tan)
UNARY_PAIR(asin)
UNARY_PAIR(acos)
UNARY_PAIR(atan)
UNARY_PAIR(sinh)
UNARY_PAIR(cosh)
UNARY_PAIR(tanh)
UNARY_PAIR(asinh)
UNARY_PAIR(acosh)
UNARY_PAIR(atanh)
UNARY_PAIR(sigmoid)
UNARY_PAIR(relu)
UNARY_PAIR(relu6)
UNARY_PAIR(softsign)
UNARY_PAIR(erf)
UNARY_PAIR(erfc)
UNARY_PAIR(erfinv)
UNARY_PAIR(lgamma)
UNARY_PAIR(digamma)
UNARY_PAIR(floor)
UNARY_PAIR(ceil)
UNARY_PAIR(round)
UNARY_PAIR(trunc)
UNARY_PAIR(logical_not)
UNARY_PAIR(bitwise_not)
UNARY_PAIR_NC(selu)
UNARY_PAIR_NC(silu)
UNARY_PAIR_NC(mish)
UNARY_PAIR_NC(hardsigmoid)
UNARY_PAIR_NC(hardswish)
UNARY_PAIR_NC(frac)
UNARY(isnan)
UNARY(isinf)
UNARY(isfinite)
UNARY(isposinf)
UNARY(isneginf)
UNARY(signbit)

/* square: bool squares to int64 like torch (x ** 2) */
static ct_tensor *square_impl(ct_tensor *x, int inplace) {
    CT_NULLCHECK(x);
    ct_tensor *in = x->dtype == CT_BOOL ? cast_recorded(x, CT_I64) : ct_retain(x);
    if (!in) return NULL;
    ct_tensor *ins[1] = {in};
    ct_tensor *r = ew(CT_OP_square, ins, 1, NULL, inplace ? x : NULL);
    ct_release(in);
    return r;
}
ct_tensor *ct_square(ct_tensor *x) { return square_impl(x, 0); }
ct_tensor *ct_square_(ct_tensor *x) { return square_impl(x, 1); }

/* ---- parameterized unary ----------------------------------------------- */
/* one op with its args */
static ct_tensor *unary_args(ct_tensor *x, const ct_args *a, int inplace) {
    ct_tensor *in[1] = {x};
    return ew(a->op, in, 1, a, inplace ? x : NULL);
}

ct_tensor *ct_logit(ct_tensor *x, double eps) {
    ct_args a = ct__args(CT_OP_logit);
    a.p.ew.eps = eps;
    a.p.ew.has_eps = eps >= 0;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_leaky_relu(ct_tensor *x, double negative_slope) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_leaky_relu);
    a.p.ew.negative_slope = negative_slope;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_leaky_relu_(ct_tensor *x, double negative_slope) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_leaky_relu);
    a.p.ew.negative_slope = negative_slope;
    return unary_args(x, &a, 1);
}
ct_tensor *ct_elu(ct_tensor *x, double alpha) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_elu);
    a.p.ew.alpha = alpha;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_celu(ct_tensor *x, double alpha) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_celu);
    a.p.ew.alpha = alpha;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_gelu(ct_tensor *x, ct_gelu_approx approximate) {
    CT_NULLCHECK(x);
    if (approximate != CT_GELU_NONE && approximate != CT_GELU_TANH)
        return ct__error(CT_ERR_ARG, "gelu: approximate must be CT_GELU_NONE or CT_GELU_TANH, got %d",
                         (int)approximate);
    ct_args a = ct__args(CT_OP_gelu);
    a.p.ew.approximate = approximate == CT_GELU_TANH;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_softplus(ct_tensor *x, double beta, double threshold) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_softplus);
    a.p.ew.beta = beta;
    a.p.ew.threshold = threshold;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_hardtanh(ct_tensor *x, double min_val, double max_val) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_hardtanh);
    a.p.ew.min_val = min_val;
    a.p.ew.max_val = max_val;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_hardshrink(ct_tensor *x, double lambd) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_hardshrink);
    a.p.ew.lambd = lambd;
    return unary_args(x, &a, 0);
}
ct_tensor *ct_softshrink(ct_tensor *x, double lambd) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_softshrink);
    a.p.ew.lambd = lambd;
    return unary_args(x, &a, 0);
}

/* clamp: NAN bound = absent; min > max gives max everywhere (as torch) */
static ct_tensor *clamp_impl(ct_tensor *x, double min, double max, int inplace) {
    CT_NULLCHECK(x);
    int hmin = !isnan(min), hmax = !isnan(max);
    ct_args a = ct__args(CT_OP_clamp);
    a.p.ew.min = min;
    a.p.ew.max = max;
    a.p.ew.has_min = hmin;
    a.p.ew.has_max = hmax;
    double sc[2];
    int n = 0;
    if (hmin) sc[n++] = min;
    if (hmax) sc[n++] = max;
    return unary_promoted(CT_OP_clamp, x, sc, n, &a, inplace);
}
ct_tensor *ct_clamp(ct_tensor *x, double min, double max) { return clamp_impl(x, min, max, 0); }
ct_tensor *ct_clamp_(ct_tensor *x, double min, double max) { return clamp_impl(x, min, max, 1); }

ct_tensor *ct_clamp_tensor(ct_tensor *x, ct_tensor *min, ct_tensor *max) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_clamp_tensor);
    a.p.ew.has_min = min != NULL;
    a.p.ew.has_max = max != NULL;
    ct_tensor *in[3] = {x, min ? min : x, max ? max : x};
    return ew(CT_OP_clamp_tensor, in, 3, &a, NULL);
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
    return unary_args(x, &a, 0);
}

ct_tensor *ct_round_decimals(ct_tensor *x, int64_t decimals) {
    CT_NULLCHECK(x);
    if (decimals == 0) { /* round, for floating point only */
        if (!ct_dtype_is_floating(x->dtype))
            return ct__error(CT_ERR_DTYPE, "round_decimals: not implemented for dtype %s (floating "
                             "point only)", ct_dtype_name(x->dtype));
        return ct_round(x);
    }
    ct_args a = ct__args(CT_OP_round_decimals);
    a.p.ew.decimals = decimals;
    return unary_args(x, &a, 0);
}

/* polygamma(n, x): p.ew.n.  n == 0 is digamma. */
ct_tensor *ct_polygamma(int64_t n, ct_tensor *x) {
    CT_NULLCHECK(x);
    if (n == 0) return ct_digamma(x);
    ct_args a = ct__args(CT_OP_polygamma);
    a.p.ew.n = n;
    return unary_args(x, &a, 0);
}

ct_tensor *ct_pow_scalar(ct_tensor *x, double exponent) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_pow_scalar);
    a.p.ew.exponent = exponent;
    double sc[1] = {exponent};
    return unary_promoted(CT_OP_pow_scalar, x, sc, 1, &a, 0);
}
ct_tensor *ct_rpow_scalar(double base, ct_tensor *x) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_rpow_scalar);
    a.p.ew.base = base;
    double sc[1] = {base};
    return unary_promoted(CT_OP_rpow_scalar, x, sc, 1, &a, 0);
}

/* ---- binary ------------------------------------------------------------ */
#define BINARY_PAIR(NAME)                                                          \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, NULL);                                \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *a, ct_tensor *b) {                          \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, a);                                   \
    }
#define BINARY(NAME)                                                               \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ew(CT_OP_##NAME, in, 2, NULL, NULL);                                \
    }

BINARY_PAIR(mul) BINARY_PAIR(div) BINARY_PAIR(pow) BINARY_PAIR(atan2)
BINARY_PAIR(minimum) BINARY_PAIR(maximum) BINARY_PAIR(fmin) BINARY_PAIR(fmax)
BINARY_PAIR(fmod) BINARY_PAIR(remainder)
BINARY_PAIR(bitwise_and) BINARY_PAIR(bitwise_or) BINARY_PAIR(bitwise_xor)
BINARY_PAIR(bitwise_left_shift) BINARY_PAIR(bitwise_right_shift)
BINARY_PAIR(xlogy) BINARY_PAIR(copysign) BINARY_PAIR(hypot)
BINARY(eq) BINARY(ne) BINARY(lt) BINARY(le) BINARY(gt) BINARY(ge)
BINARY(logical_and) BINARY(logical_or) BINARY(logical_xor)

/* floor_divide is floor division (PyTorch >= 1.13) */
ct_tensor *ct_floor_divide(ct_tensor *a, ct_tensor *b) {
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_div_floor, in, 2, NULL, NULL);
}
ct_tensor *ct_floor_divide_(ct_tensor *a, ct_tensor *b) {
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_div_floor, in, 2, NULL, a);
}

ct_tensor *ct_div_mode(ct_tensor *a, ct_tensor *b, ct_rounding mode) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *in[2] = {a, b};
    switch (mode) {
    case CT_ROUND_NONE: return ct_div(a, b);
    case CT_ROUND_TRUNC: return ew(CT_OP_div_trunc, in, 2, NULL, NULL);
    case CT_ROUND_FLOOR: return ew(CT_OP_div_floor, in, 2, NULL, NULL);
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
    return ew(op, in, 2, &args, inplace);
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
    ct_args args = ct__args(CT_OP_isclose);
    args.p.ew.rtol = rtol;
    args.p.ew.atol = atol;
    args.p.ew.equal_nan = equal_nan;
    ct_tensor *in[2] = {a, b};
    return ew(CT_OP_isclose, in, 2, &args, NULL);
}

/* ---- ternary ----------------------------------------------------------- */
ct_tensor *ct_where(ct_tensor *cond, ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK(cond);
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *in[3] = {cond, a, b};
    return ew(CT_OP_where, in, 3, NULL, NULL);
}

/* lerp's dtype rule (start's dtype, a wrapped number weight exempt) is its
 * meta function's */
ct_tensor *ct_lerp(ct_tensor *start, ct_tensor *end, ct_tensor *weight) {
    ct_tensor *in[3] = {start, end, weight};
    return ew(CT_OP_lerp, in, 3, NULL, NULL);
}
ct_tensor *ct_lerp_scalar(ct_tensor *start, ct_tensor *end, double weight) {
    CT_NULLCHECK(start);
    CT_NULLCHECK(end);
    ct_tensor *w = ct__wrapped_tmp(weight);
    if (!w) return NULL;
    ct_tensor *in[3] = {start, end, w};
    ct_tensor *r = ew(CT_OP_lerp, in, 3, NULL, NULL);
    ct_release(w);
    return r;
}

static ct_tensor *addc(ct_op op, ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value,
                       int inplace) {
    CT_NULLCHECK_OP(ct__op_info[op].name, self);
    CT_NULLCHECK_OP(ct__op_info[op].name, t1);
    CT_NULLCHECK_OP(ct__op_info[op].name, t2);
    ct_tensor *in[3] = {self, t1, t2};
    ct_args a = ct__args(op);
    a.p.ew.value = value;
    return ew(op, in, 3, &a, inplace ? self : NULL);
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
