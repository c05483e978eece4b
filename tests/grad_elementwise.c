/* grad_elementwise.c -- gradcheck cases for the elementwise family.
 * Unary cases use a [3,4] input; binary cases broadcast ([3,4] with [4], or
 * [3,1] with [4]); ternary ones [3,4], [4], [3,1].  Inputs avoid the kinks
 * (relu at 0, clamp at its bounds, ...).  "ip_" cases run the in-place form
 * on a non-leaf (x * 1). */
#include <math.h>

#include "gradcheck_harness.h"

#define ARGS ct_tensor *const *in, int n, void *u
#define FN1(NAME, EXPR)                          \
    static ct_tensor *f_##NAME(ARGS) {           \
        (void)n; (void)u;                        \
        ct_tensor *x = in[0];                    \
        return (EXPR);                           \
    }
#define FN2(NAME, EXPR)                          \
    static ct_tensor *f_##NAME(ARGS) {           \
        (void)n; (void)u;                        \
        ct_tensor *x = in[0], *y = in[1];        \
        return (EXPR);                           \
    }
#define FN3(NAME, EXPR)                          \
    static ct_tensor *f_##NAME(ARGS) {           \
        (void)n; (void)u;                        \
        ct_tensor *x = in[0], *y = in[1], *z = in[2]; \
        return (EXPR);                           \
    }
/* a non-leaf copy of x, for in-place ops */
static ct_tensor *nl(ct_tensor *x) { return ct_mul_scalar(x, 1.0); }

/* ---- unary ---- */
FN1(neg, ct_neg(x))
FN1(abs, ct_abs(x))
FN1(sign, ct_mul(ct_sign(x), x))
FN1(sgn, ct_add(ct_sgn(x), x))
FN1(reciprocal, ct_reciprocal(x))
FN1(sqrt, ct_sqrt(x))
FN1(rsqrt, ct_rsqrt(x))
FN1(square, ct_square(x))
FN1(exp, ct_exp(x))
FN1(exp2, ct_exp2(x))
FN1(expm1, ct_expm1(x))
FN1(log, ct_log(x))
FN1(log2, ct_log2(x))
FN1(log10, ct_log10(x))
FN1(log1p, ct_log1p(x))
FN1(sin, ct_sin(x))
FN1(cos, ct_cos(x))
FN1(tan, ct_tan(x))
FN1(asin, ct_asin(x))
FN1(acos, ct_acos(x))
FN1(atan, ct_atan(x))
FN1(sinh, ct_sinh(x))
FN1(cosh, ct_cosh(x))
FN1(tanh, ct_tanh(x))
FN1(asinh, ct_asinh(x))
FN1(acosh, ct_acosh(x))
FN1(atanh, ct_atanh(x))
FN1(sigmoid, ct_sigmoid(x))
FN1(logit, ct_logit(x, -1.0))
FN1(logit_eps, ct_logit(x, 0.25))
FN1(relu, ct_relu(x))
FN1(relu6, ct_relu6(ct_mul_scalar(x, 4.0)))
FN1(leaky_relu, ct_leaky_relu(x, 0.1))
FN1(elu, ct_elu(x, 1.5))
FN1(selu, ct_selu(x))
FN1(celu, ct_celu(x, 0.7))
FN1(gelu, ct_gelu(x, CT_GELU_NONE))
FN1(gelu_tanh, ct_gelu(x, CT_GELU_TANH))
FN1(silu, ct_silu(x))
FN1(mish, ct_mish(x))
FN1(softplus, ct_softplus(x, 1.0, 20.0))
FN1(softplus_thr, ct_softplus(x, 2.0, 1.0))
FN1(softsign, ct_softsign(x))
FN1(hardtanh, ct_hardtanh(x, -0.5, 0.5))
FN1(hardsigmoid, ct_hardsigmoid(ct_mul_scalar(x, 4.0)))
FN1(hardswish, ct_hardswish(ct_mul_scalar(x, 4.0)))
FN1(hardshrink, ct_hardshrink(x, 0.5))
FN1(softshrink, ct_softshrink(x, 0.5))
FN1(erf, ct_erf(x))
FN1(erfc, ct_erfc(x))
FN1(erfinv, ct_erfinv(x))
FN1(lgamma, ct_lgamma(x))
FN1(digamma, ct_digamma(x))
FN1(polygamma1, ct_polygamma(1, x))
FN1(polygamma2, ct_polygamma(2, x))
FN1(floor, ct_mul(ct_floor(ct_mul_scalar(x, 3.0)), x))
FN1(ceil, ct_mul(ct_ceil(ct_mul_scalar(x, 3.0)), x))
FN1(round, ct_add(ct_round(ct_mul_scalar(x, 3.0)), x))
FN1(round_decimals, ct_add(ct_round_decimals(x, 1), x))
FN1(trunc, ct_mul(ct_trunc(ct_mul_scalar(x, 3.0)), x))
FN1(frac, ct_frac(ct_mul_scalar(x, 3.0)))
FN1(clamp, ct_clamp(x, -0.5, 0.5))
FN1(clamp_min, ct_clamp(x, -0.3, NAN))
FN1(clamp_max, ct_clamp(x, NAN, 0.3))
FN1(nan_to_num, ct_nan_to_num(x, 0.0, NAN, NAN))
FN1(pow_scalar, ct_pow_scalar(x, 2.5))
FN1(pow_scalar_int, ct_pow_scalar(x, 3.0))
FN1(pow_scalar_zero, ct_add(ct_pow_scalar(x, 0.0), x))
FN1(rpow_scalar, ct_rpow_scalar(2.5, x))

/* ---- in-place forms ---- */
FN1(ip_neg, ct_neg_(nl(x)))
FN1(ip_exp, ct_exp_(nl(x)))
FN1(ip_sqrt, ct_sqrt_(nl(x)))
FN1(ip_sin, ct_sin_(nl(x)))
FN1(ip_tanh, ct_tanh_(nl(x)))
FN1(ip_sigmoid, ct_sigmoid_(nl(x)))
FN1(ip_relu, ct_relu_(nl(x)))
FN1(ip_abs, ct_abs_(nl(x)))
FN1(ip_square, ct_square_(nl(x)))
FN1(ip_reciprocal, ct_reciprocal_(nl(x)))
FN1(ip_silu, ct_silu_(nl(x)))
FN1(ip_digamma, ct_digamma_(nl(x)))
FN1(ip_floor, ct_mul(ct_floor_(ct_mul_scalar(x, 3.0)), x))
FN1(ip_leaky_relu, ct_leaky_relu_(nl(x), 0.2))
FN1(ip_clamp, ct_clamp_(nl(x), -0.5, 0.5))
FN1(ip_add_scalar, ct_add_scalar_(nl(x), 2.0))
FN1(ip_mul_scalar, ct_mul_scalar_(nl(x), 3.0))
FN2(ip_add, ct_add_(nl(x), y))
FN2(ip_sub, ct_sub_(nl(x), y))
FN2(ip_add_scaled, ct_add_scaled_(nl(x), y, -2.0))
FN2(ip_mul, ct_mul_(nl(x), y))
FN2(ip_div, ct_div_(nl(x), y))
FN2(ip_pow, ct_pow_(nl(x), y))
FN2(ip_atan2, ct_atan2_(nl(x), y))
FN2(ip_maximum, ct_maximum_(nl(x), y))
FN2(ip_fmin, ct_fmin_(nl(x), y))
FN2(ip_hypot, ct_hypot_(nl(x), y))
FN2(ip_xlogy, ct_xlogy_(nl(x), y))
FN2(ip_fmod, ct_fmod_(nl(x), y))
FN2(ip_copysign, ct_copysign_(nl(x), y))
FN3(ip_addcmul, ct_addcmul_(nl(x), y, z, 0.5))
FN3(ip_addcdiv, ct_addcdiv_(nl(x), y, z, -1.5))

/* ---- binary ---- */
FN2(add, ct_add(x, y))
FN2(add_scaled, ct_add_scaled(x, y, 2.5))
FN2(sub, ct_sub(x, y))
FN2(sub_scaled, ct_sub_scaled(x, y, 0.5))
FN1(scalar_forms, ct_div_scalar(ct_mul_scalar(ct_sub_scalar(ct_add_scalar(x, 1.5), 0.25), 3.0), 2.0))
FN2(mul, ct_mul(x, y))
FN1(mul_self, ct_mul(x, x))
FN2(div, ct_div(x, y))
FN2(div_trunc, ct_add(ct_div_mode(ct_mul_scalar(x, 5.0), y, CT_ROUND_TRUNC), x))
FN2(div_floor, ct_add(ct_div_mode(ct_mul_scalar(x, 5.0), y, CT_ROUND_FLOOR), y))
FN2(floor_divide, ct_mul(ct_floor_divide(ct_mul_scalar(x, 5.0), y), x))
FN2(pow, ct_pow(x, y))
FN1(pow_wrapped, ct_pow(x, ct_wrap(1.7)))
FN1(pow_wrapped_base, ct_pow(ct_wrap(1.7), x))
FN2(atan2, ct_atan2(x, y))
FN2(minimum, ct_minimum(x, y))
FN2(maximum, ct_maximum(x, y))
FN1(maximum_tie, ct_maximum(x, x))
FN1(minimum_tie, ct_minimum(x, ct_mul_scalar(x, 1.0)))
FN2(fmin, ct_fmin(x, y))
FN2(fmax, ct_fmax(x, y))
FN2(fmod, ct_fmod(ct_mul_scalar(x, 3.0), y))
FN2(remainder, ct_remainder(ct_mul_scalar(x, 3.0), y))
FN2(xlogy, ct_xlogy(x, y))
FN2(hypot, ct_hypot(x, y))
FN2(copysign, ct_copysign(x, y))

/* ---- ternary ---- */
static ct_tensor *mask34(void) {
    static const double m[12] = {1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0};
    return ct_ne(ct_from_doubles(m, CT_SHAPE(3, 4), CT_F64), ct_wrap(0.0));
}
FN2(where, ct_where(mask34(), x, y))
FN3(lerp, ct_lerp(x, y, z))
FN2(lerp_scalar, ct_lerp_scalar(x, y, 0.3))
FN2(lerp_scalar_big, ct_lerp_scalar(x, y, 0.8))
FN3(addcmul, ct_addcmul(x, y, z, 0.5))
FN3(addcdiv, ct_addcdiv(x, y, z, -1.5))
FN3(clamp_tensor, ct_clamp_tensor(x, y, z))
/* bounds apart: min < max everywhere */
FN3(clamp_tensor_ordered, ct_clamp_tensor(x, ct_sub_scalar(y, 0.6), ct_add_scalar(z, 0.6)))
FN2(clamp_tensor_min, ct_clamp_tensor(x, y, NULL))
FN2(clamp_tensor_max, ct_clamp_tensor(x, NULL, y))

#define GG GC_GRADGRAD
#define U(OP, LABEL, FN, LO, HI, FL) {OP, LABEL, f_##FN, 1, {2}, {{3, 4}}, LO, HI, FL, 0, 0}
#define B(OP, LABEL, FN, LO, HI, FL) {OP, LABEL, f_##FN, 2, {2, 1}, {{3, 4}, {4}}, LO, HI, FL, 0, 0}
#define B2(OP, LABEL, FN, LO, HI, FL) {OP, LABEL, f_##FN, 2, {2, 1}, {{3, 1}, {4}}, LO, HI, FL, 0, 0}
#define T(OP, LABEL, FN, LO, HI, FL) \
    {OP, LABEL, f_##FN, 3, {2, 1, 2}, {{3, 4}, {4}, {3, 1}}, LO, HI, FL, 0, 0}

const gc_case gc_cases_elementwise[] = {
    /* unary */
    U("neg", "neg", neg, 0, 0, GG),
    U("abs", "abs", abs, 0, 0, GG),
    U("sign", "sign", sign, 0, 0, GG),
    U("sgn", "sgn", sgn, 0, 0, GG),
    U("reciprocal", "reciprocal", reciprocal, 0.5, 2, GG),
    U("sqrt", "sqrt", sqrt, 0.5, 2, GG),
    U("rsqrt", "rsqrt", rsqrt, 0.5, 2, GG),
    U("square", "square", square, 0, 0, GG),
    U("exp", "exp", exp, 0, 0, GG),
    U("exp2", "exp2", exp2, 0, 0, GG),
    U("expm1", "expm1", expm1, 0, 0, GG),
    U("log", "log", log, 0.5, 2, GG),
    U("log2", "log2", log2, 0.5, 2, GG),
    U("log10", "log10", log10, 0.5, 2, GG),
    U("log1p", "log1p", log1p, -0.5, 1, GG),
    U("sin", "sin", sin, -2, 2, GG),
    U("cos", "cos", cos, -2, 2, GG),
    U("tan", "tan", tan, -1, 1, GG),
    U("asin", "asin", asin, -0.8, 0.8, GG),
    U("acos", "acos", acos, -0.8, 0.8, GG),
    U("atan", "atan", atan, -2, 2, GG),
    U("sinh", "sinh", sinh, 0, 0, GG),
    U("cosh", "cosh", cosh, 0, 0, GG),
    U("tanh", "tanh", tanh, 0, 0, GG),
    U("asinh", "asinh", asinh, -2, 2, GG),
    U("acosh", "acosh", acosh, 1.2, 3, GG),
    U("atanh", "atanh", atanh, -0.8, 0.8, GG),
    U("sigmoid", "sigmoid", sigmoid, -3, 3, GG),
    U("logit", "logit", logit, 0.1, 0.9, GG),
    U("logit", "logit_eps", logit_eps, 0.05, 0.95, GG),
    U("relu", "relu", relu, 0, 0, GG),
    U("relu6", "relu6", relu6, -0.5, 2, GG),
    U("leaky_relu", "leaky_relu", leaky_relu, 0, 0, GG),
    U("elu", "elu", elu, -2, 2, GG),
    U("selu", "selu", selu, -2, 2, GG),
    U("celu", "celu", celu, -2, 2, GG),
    U("gelu", "gelu", gelu, -3, 3, GG),
    U("gelu", "gelu_tanh", gelu_tanh, -3, 3, GG),
    U("silu", "silu", silu, -3, 3, GG),
    U("mish", "mish", mish, -3, 3, GG),
    U("softplus", "softplus", softplus, -3, 3, GG),
    U("softplus", "softplus_threshold", softplus_thr, -1, 1, GG),
    U("softsign", "softsign", softsign, -2, 2, GG),
    U("hardtanh", "hardtanh", hardtanh, 0, 0, GG),
    U("hardsigmoid", "hardsigmoid", hardsigmoid, -1, 1, GG),
    U("hardswish", "hardswish", hardswish, -1, 1, GG),
    U("hardshrink", "hardshrink", hardshrink, 0, 0, GG),
    U("softshrink", "softshrink", softshrink, 0, 0, GG),
    U("erf", "erf", erf, -1.5, 1.5, GG),
    U("erfc", "erfc", erfc, -1.5, 1.5, GG),
    U("erfinv", "erfinv", erfinv, -0.8, 0.8, GG),
    U("lgamma", "lgamma", lgamma, 0.5, 3, GG),
    U("digamma", "digamma", digamma, 0.5, 3, GG),
    U("polygamma", "polygamma1", polygamma1, 0.5, 3, GG),
    U("polygamma", "polygamma2", polygamma2, 0.5, 3, GG),
    U("floor", "floor", floor, 0, 0, GG),
    U("ceil", "ceil", ceil, 0, 0, GG),
    U("round", "round", round, 0, 0, GG),
    U("round_decimals", "round_decimals", round_decimals, 0, 0, GG),
    U("trunc", "trunc", trunc, 0, 0, GG),
    U("frac", "frac", frac, 0, 0, GG),
    U("clamp", "clamp", clamp, 0, 0, GG),
    U("clamp", "clamp_min", clamp_min, 0, 0, GG),
    U("clamp", "clamp_max", clamp_max, 0, 0, GG),
    U("nan_to_num", "nan_to_num", nan_to_num, 0, 0, GG),
    U("pow_scalar", "pow_scalar", pow_scalar, 0.5, 2, GG),
    U("pow_scalar", "pow_scalar_int", pow_scalar_int, 0, 0, GG),
    U("pow_scalar", "pow_scalar_zero", pow_scalar_zero, 0, 0, GG),
    U("rpow_scalar", "rpow_scalar", rpow_scalar, 0, 0, GG),
    /* in-place forms */
    U("neg", "ip_neg", ip_neg, 0, 0, GG),
    U("exp", "ip_exp", ip_exp, 0, 0, GG),
    U("sqrt", "ip_sqrt", ip_sqrt, 0.5, 2, GG),
    U("sin", "ip_sin", ip_sin, 0, 0, GG),
    U("tanh", "ip_tanh", ip_tanh, 0, 0, GG),
    U("sigmoid", "ip_sigmoid", ip_sigmoid, -3, 3, GG),
    U("relu", "ip_relu", ip_relu, 0, 0, GG),
    U("abs", "ip_abs", ip_abs, 0, 0, GG),
    U("square", "ip_square", ip_square, 0, 0, GG),
    U("reciprocal", "ip_reciprocal", ip_reciprocal, 0.5, 2, GG),
    U("silu", "ip_silu", ip_silu, -3, 3, GG),
    U("digamma", "ip_digamma", ip_digamma, 0.5, 3, GG),
    U("floor", "ip_floor", ip_floor, 0, 0, GG),
    U("leaky_relu", "ip_leaky_relu", ip_leaky_relu, 0, 0, GG),
    U("clamp", "ip_clamp", ip_clamp, 0, 0, GG),
    U("add", "ip_add_scalar", ip_add_scalar, 0, 0, GG),
    U("mul", "ip_mul_scalar", ip_mul_scalar, 0, 0, GG),
    B("add", "ip_add", ip_add, 0, 0, GG),
    B("sub", "ip_sub", ip_sub, 0, 0, GG),
    B("add", "ip_add_scaled", ip_add_scaled, 0, 0, GG),
    B("mul", "ip_mul", ip_mul, 0, 0, GG),
    B("div", "ip_div", ip_div, 0.5, 2, GG),
    B("pow", "ip_pow", ip_pow, 0.5, 2, GG),
    B("atan2", "ip_atan2", ip_atan2, 0.2, 1.5, GG),
    B("maximum", "ip_maximum", ip_maximum, 0, 0, GG),
    B("fmin", "ip_fmin", ip_fmin, 0, 0, GG),
    B("hypot", "ip_hypot", ip_hypot, 0, 0, GG),
    B("xlogy", "ip_xlogy", ip_xlogy, 0.5, 2, GG),
    B("fmod", "ip_fmod", ip_fmod, 1, 2, GG),
    B("copysign", "ip_copysign", ip_copysign, 0, 0, GG),
    T("addcmul", "ip_addcmul", ip_addcmul, 0, 0, GG),
    T("addcdiv", "ip_addcdiv", ip_addcdiv, 0.5, 2, GG),
    /* binary, broadcasting */
    B("add", "add", add, 0, 0, GG),
    B2("add", "add_scaled", add_scaled, 0, 0, GG),
    B("sub", "sub", sub, 0, 0, GG),
    B2("sub", "sub_scaled", sub_scaled, 0, 0, GG),
    U("add", "scalar_forms", scalar_forms, 0, 0, GG),
    B2("mul", "mul", mul, 0, 0, GG),
    U("mul", "mul_self", mul_self, 0, 0, GG),
    B("div", "div", div, 0.5, 2, GG),
    B2("div", "div_outer", div, 0.5, 2, GG),
    B("div_trunc", "div_trunc", div_trunc, 0.5, 2, GG),
    B("div_floor", "div_floor", div_floor, 0.5, 2, GG),
    B2("div_floor", "floor_divide", floor_divide, 0.5, 2, GG),
    B("pow", "pow", pow, 0.5, 2, GG),
    B2("pow", "pow_outer", pow, 0.5, 2, GG),
    U("pow", "pow_wrapped_exponent", pow_wrapped, 0.5, 2, GG),
    U("pow", "pow_wrapped_base", pow_wrapped_base, 0, 0, GG),
    B("atan2", "atan2", atan2, 0, 0, GG),
    B2("minimum", "minimum", minimum, 0, 0, GG),
    B("maximum", "maximum", maximum, 0, 0, GG),
    U("maximum", "maximum_tie", maximum_tie, 0, 0, GG),
    U("minimum", "minimum_tie", minimum_tie, 0, 0, GG),
    B2("fmin", "fmin", fmin, 0, 0, GG),
    B("fmax", "fmax", fmax, 0, 0, GG),
    B("fmod", "fmod", fmod, 0.5, 2, GG),
    B2("remainder", "remainder", remainder, 0.5, 2, GG),
    B("remainder", "remainder_neg", remainder, -2, -0.5, GG),
    B("xlogy", "xlogy", xlogy, 0.5, 2, GG),
    B2("hypot", "hypot", hypot, 0, 0, GG),
    B("copysign", "copysign", copysign, 0, 0, GG),
    /* ternary */
    B("where", "where", where, 0, 0, GG),
    T("lerp", "lerp", lerp, 0, 0, GG),
    B("lerp", "lerp_scalar", lerp_scalar, 0, 0, GG),
    B2("lerp", "lerp_scalar_big", lerp_scalar_big, 0, 0, GG),
    T("addcmul", "addcmul", addcmul, 0, 0, GG),
    T("addcdiv", "addcdiv", addcdiv, 0.5, 2, GG),
    T("clamp_tensor", "clamp_tensor", clamp_tensor, 0, 0, GG),
    T("clamp_tensor", "clamp_tensor_ordered", clamp_tensor_ordered, 0, 0, GG),
    B("clamp_tensor", "clamp_tensor_min", clamp_tensor_min, 0, 0, GG),
    B2("clamp_tensor", "clamp_tensor_max", clamp_tensor_max, 0, 0, GG),
};
const int gc_ncases_elementwise = sizeof gc_cases_elementwise / sizeof gc_cases_elementwise[0];
