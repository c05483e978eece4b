/* derivs_elementwise.c -- derivatives of elementwise ops, written with
 * public ops (so they are differentiable themselves).  Inputs of binary ops
 * may have been broadcast: ct__grad_for sums each gradient back to its
 * input's shape and dtype.  Formulas and conventions at kinks follow
 * PyTorch's tools/autograd/derivatives.yaml (and the *_backward kernels it
 * names). */
#include <math.h>

#include "../ops/ew.h"
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define IN(k) ct__vjp_in(c, k)
#define OUT(k) ct__vjp_out(c, k)
#define GEO(k) ct__vjp_geom(c, k)
#define A (c->a)
/* the error to return when an expression gave NULL */
static ct_status err(void) { return ct_last_error_code() ? ct_last_error_code() : CT_ERR_AUTOGRAD; }

#define VJP(NAME) ct_status ct__vjp_##NAME(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin)
/* sets gin[k] = the gradient expression summed to input k; NULL -> error */
#define SET(k, EXPR)                                                  \
    do {                                                              \
        if (NEED(k)) {                                                \
            gin[k] = ct__grad_to((EXPR), GEO(k));                     \
            if (!gin[k]) return err();                                \
        }                                                             \
    } while (0)

#define SQRT_PI 1.77245385090551602730
#define LN2 0.69314718055994530942
#define LN10 2.30258509299404568402

/* a wrapped number: takes part in promotion like a Python scalar */
static ct_tensor *W(double v) { return ct_wrap(v); }
/* where(cond, g, 0) and where(cond, 0, g) */
static ct_tensor *keep_if(ct_tensor *cond, ct_tensor *g) { return ct_where(cond, g, W(0.0)); }
static ct_tensor *zero_if(ct_tensor *cond, ct_tensor *g) { return ct_where(cond, W(0.0), g); }
static ct_tensor *sq(ct_tensor *x) { return ct_mul(x, x); }
/* 1 - x */
static ct_tensor *one_minus(ct_tensor *x) { return ct_neg(ct_sub_scalar(x, 1.0)); }
static ct_tensor *ge_s(ct_tensor *x, double v) { return ct_ge(x, W(v)); }
static ct_tensor *le_s(ct_tensor *x, double v) { return ct_le(x, W(v)); }
static ct_tensor *gt_s(ct_tensor *x, double v) { return ct_gt(x, W(v)); }
static ct_tensor *lt_s(ct_tensor *x, double v) { return ct_lt(x, W(v)); }
/* A fused backward kernel (ew.h) when the backward is not recorded: sets
 * gin[0] and returns from the VJP; else falls through to the formula. */
#define FUSED(KIND, T)                                                        \
    do {                                                                      \
        if (NEED(0)) {                                                        \
            ct_tensor *f_;                                                    \
            int r_ = ct__ew_fused_grad((KIND), g[0], (T), &f_);               \
            if (r_ < 0) return err();                                         \
            if (r_ > 0) {                                                     \
                gin[0] = ct__grad_to(f_, GEO(0));                             \
                if (!gin[0]) return err();                                    \
                return CT_OK;                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)
/* zeros shaped like input k (its geometry: the input need not be saved) */
#define ZEROS_FOR(k) ct__zeros_geom(GEO(k), GEO(k)->dtype)

/* ---- arithmetic --------------------------------------------------------- */
VJP(add) {
    SET(0, g[0]);
    SET(1, A->p.ew.has_alpha ? ct_mul_scalar(g[0], A->p.ew.alpha) : g[0]);
    return CT_OK;
}
VJP(sub) {
    SET(0, g[0]);
    SET(1, ct_mul_scalar(g[0], A->p.ew.has_alpha ? -A->p.ew.alpha : -1.0));
    return CT_OK;
}
VJP(mul) {
    SET(0, ct_mul(g[0], IN(1)));
    SET(1, ct_mul(g[0], IN(0)));
    return CT_OK;
}
VJP(div) {
    SET(0, ct_div(g[0], IN(1)));
    SET(1, ct_neg(ct_div(ct_mul(g[0], IN(0)), sq(IN(1)))));
    return CT_OK;
}
VJP(neg) { SET(0, ct_neg(g[0])); return CT_OK; }

/* floor, sign, round, div with rounding ...: zero gradients (torch: zeros_like) */
VJP(zero) {
    for (int k = 0; k < c->nin; k++)
        if (NEED(k) && !(gin[k] = ZEROS_FOR(k))) return err();
    (void)g;
    return CT_OK;
}
/* frac: x - trunc(x) */
VJP(identity) { SET(0, g[0]); return CT_OK; }

/* ---- unary -------------------------------------------------------------- */
VJP(abs) { SET(0, ct_mul(g[0], ct_sgn(IN(0)))); return CT_OK; }
VJP(reciprocal) { SET(0, ct_neg(ct_mul(g[0], sq(OUT(0))))); return CT_OK; }
VJP(sqrt) { SET(0, ct_div(g[0], ct_mul_scalar(OUT(0), 2.0))); return CT_OK; }
VJP(rsqrt) { SET(0, ct_mul(ct_mul_scalar(g[0], -0.5), ct_pow_scalar(OUT(0), 3.0))); return CT_OK; }
VJP(square) { SET(0, ct_mul(g[0], ct_mul_scalar(IN(0), 2.0))); return CT_OK; }
VJP(exp) { SET(0, ct_mul(g[0], OUT(0))); return CT_OK; }
VJP(exp2) { SET(0, ct_mul(g[0], ct_mul_scalar(OUT(0), LN2))); return CT_OK; }
VJP(expm1) { SET(0, ct_mul(g[0], ct_add_scalar(OUT(0), 1.0))); return CT_OK; }
VJP(log) { SET(0, ct_div(g[0], IN(0))); return CT_OK; }
VJP(log2) { SET(0, ct_div(g[0], ct_mul_scalar(IN(0), LN2))); return CT_OK; }
VJP(log10) { SET(0, ct_div(g[0], ct_mul_scalar(IN(0), LN10))); return CT_OK; }
VJP(log1p) { SET(0, ct_div(g[0], ct_add_scalar(IN(0), 1.0))); return CT_OK; }
VJP(sin) { SET(0, ct_mul(g[0], ct_cos(IN(0)))); return CT_OK; }
VJP(cos) { SET(0, ct_mul(g[0], ct_neg(ct_sin(IN(0))))); return CT_OK; }
VJP(tan) { SET(0, ct_mul(g[0], ct_add_scalar(sq(OUT(0)), 1.0))); return CT_OK; }
VJP(asin) { SET(0, ct_mul(g[0], ct_rsqrt(one_minus(sq(IN(0)))))); return CT_OK; }
VJP(acos) { SET(0, ct_neg(ct_mul(g[0], ct_rsqrt(one_minus(sq(IN(0))))))); return CT_OK; }
VJP(atan) { SET(0, ct_div(g[0], ct_add_scalar(sq(IN(0)), 1.0))); return CT_OK; }
VJP(sinh) { SET(0, ct_mul(g[0], ct_cosh(IN(0)))); return CT_OK; }
VJP(cosh) { SET(0, ct_mul(g[0], ct_sinh(IN(0)))); return CT_OK; }
VJP(tanh) { FUSED(CT_EWG_TANH, OUT(0)); SET(0, ct_mul(g[0], one_minus(sq(OUT(0))))); return CT_OK; }
VJP(asinh) { SET(0, ct_mul(g[0], ct_rsqrt(ct_add_scalar(sq(IN(0)), 1.0)))); return CT_OK; }
VJP(acosh) { SET(0, ct_mul(g[0], ct_rsqrt(ct_sub_scalar(sq(IN(0)), 1.0)))); return CT_OK; }
VJP(atanh) { SET(0, ct_div(g[0], one_minus(sq(IN(0))))); return CT_OK; }
VJP(sigmoid) { FUSED(CT_EWG_SIGMOID, OUT(0)); SET(0, ct_mul(g[0], ct_mul(OUT(0), one_minus(OUT(0))))); return CT_OK; }
/* logit(x, eps): 0 outside [eps, 1-eps] when eps is given */
VJP(logit) {
    ct_tensor *x = IN(0);
    ct_tensor *d = ct_div(g[0], ct_mul(x, one_minus(x)));
    if (A->p.ew.has_eps) d = zero_if(ct_logical_or(lt_s(x, A->p.ew.eps), gt_s(x, 1.0 - A->p.ew.eps)), d);
    SET(0, d);
    return CT_OK;
}
/* threshold_backward(grad, result, 0): result <= 0 -> 0 */
VJP(relu) { FUSED(CT_EWG_RELU, OUT(0)); SET(0, zero_if(le_s(OUT(0), 0.0), g[0])); return CT_OK; }
/* hardtanh_backward: 0 when x <= min or x >= max */
static ct_tensor *hardtanh_grad(ct_tensor *g, ct_tensor *x, double lo, double hi) {
    return zero_if(ct_logical_or(le_s(x, lo), ge_s(x, hi)), g);
}
VJP(relu6) { SET(0, hardtanh_grad(g[0], IN(0), 0.0, 6.0)); return CT_OK; }
VJP(hardtanh) { SET(0, hardtanh_grad(g[0], IN(0), A->p.ew.min_val, A->p.ew.max_val)); return CT_OK; }
VJP(leaky_relu) {
    SET(0, ct_where(gt_s(IN(0), 0.0), g[0], ct_mul_scalar(g[0], A->p.ew.negative_slope)));
    return CT_OK;
}
/* elu_backward: x > 0 -> g*scale; else g*input_scale*alpha*scale*exp(x*input_scale) */
static ct_tensor *elu_grad(ct_tensor *g, ct_tensor *x, double alpha, double scale, double iscale) {
    ct_tensor *neg = ct_mul(ct_mul_scalar(g, iscale * alpha * scale), ct_exp(ct_mul_scalar(x, iscale)));
    return ct_where(gt_s(x, 0.0), scale == 1.0 ? g : ct_mul_scalar(g, scale), neg);
}
VJP(elu) { SET(0, elu_grad(g[0], IN(0), A->p.ew.alpha, 1.0, 1.0)); return CT_OK; }
VJP(celu) { SET(0, elu_grad(g[0], IN(0), A->p.ew.alpha, 1.0, 1.0 / A->p.ew.alpha)); return CT_OK; }
VJP(selu) {
    SET(0, elu_grad(g[0], IN(0), 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0));
    return CT_OK;
}
VJP(gelu) {
    FUSED(A->p.ew.approximate ? CT_EWG_GELU_TANH : CT_EWG_GELU, IN(0));
    ct_tensor *x = IN(0), *d;
    if (A->p.ew.approximate) { /* tanh approximation */
        const double k = 0.79788456080286535588, k3 = 0.044715;
        ct_tensor *x2 = sq(x);
        ct_tensor *t = ct_tanh(ct_mul_scalar(ct_mul(x, ct_add_scalar(ct_mul_scalar(x2, k3), 1.0)), k));
        ct_tensor *dinner = ct_mul_scalar(ct_add_scalar(ct_mul_scalar(x2, 3.0 * k3), 1.0), k);
        d = ct_add(ct_mul_scalar(ct_add_scalar(t, 1.0), 0.5),
                   ct_mul(ct_mul_scalar(x, 0.5), ct_mul(one_minus(sq(t)), dinner)));
    } else { /* Phi(x) + x phi(x) */
        ct_tensor *cdf = ct_mul_scalar(ct_add_scalar(ct_erf(ct_mul_scalar(x, 0.70710678118654752440)), 1.0), 0.5);
        ct_tensor *pdf = ct_mul_scalar(ct_exp(ct_mul_scalar(sq(x), -0.5)), 0.39894228040143267794);
        d = ct_add(cdf, ct_mul(x, pdf));
    }
    SET(0, ct_mul(g[0], d));
    return CT_OK;
}
VJP(silu) {
    FUSED(CT_EWG_SILU, IN(0));
    ct_tensor *x = IN(0), *s = ct_sigmoid(x);
    SET(0, ct_mul(g[0], ct_mul(s, ct_add_scalar(ct_mul(x, one_minus(s)), 1.0))));
    return CT_OK;
}
VJP(mish) {
    ct_tensor *x = IN(0), *t = ct_tanh(ct_softplus(x, 1.0, 20.0));
    SET(0, ct_mul(g[0], ct_add(t, ct_mul(ct_mul(x, ct_sigmoid(x)), one_minus(sq(t))))));
    return CT_OK;
}
/* softplus_backward: x*beta > threshold -> g; else g*sigmoid(beta*x) */
VJP(softplus) {
    ct_tensor *bx = ct_mul_scalar(IN(0), A->p.ew.beta);
    SET(0, ct_where(gt_s(bx, A->p.ew.threshold), g[0], ct_mul(g[0], ct_sigmoid(bx))));
    return CT_OK;
}
VJP(softsign) { SET(0, ct_div(g[0], sq(ct_add_scalar(ct_abs(IN(0)), 1.0)))); return CT_OK; }
VJP(hardsigmoid) {
    ct_tensor *x = IN(0);
    SET(0, keep_if(ct_logical_and(gt_s(x, -3.0), lt_s(x, 3.0)), ct_div_scalar(g[0], 6.0)));
    return CT_OK;
}
VJP(hardswish) {
    ct_tensor *x = IN(0);
    ct_tensor *mid = ct_mul(g[0], ct_add_scalar(ct_div_scalar(x, 3.0), 0.5));
    SET(0, zero_if(lt_s(x, -3.0), ct_where(le_s(x, 3.0), mid, g[0])));
    return CT_OK;
}
/* hardshrink/softshrink_backward: 0 for -lambd <= x <= lambd */
VJP(shrink) {
    ct_tensor *x = IN(0);
    SET(0, zero_if(ct_logical_and(ge_s(x, -A->p.ew.lambd), le_s(x, A->p.ew.lambd)), g[0]));
    return CT_OK;
}
VJP(erf) {
    SET(0, ct_mul(g[0], ct_mul_scalar(ct_exp(ct_neg(sq(IN(0)))), 2.0 / SQRT_PI)));
    return CT_OK;
}
VJP(erfc) {
    SET(0, ct_mul(g[0], ct_mul_scalar(ct_exp(ct_neg(sq(IN(0)))), -2.0 / SQRT_PI)));
    return CT_OK;
}
VJP(erfinv) { SET(0, ct_mul(g[0], ct_mul_scalar(ct_exp(sq(OUT(0))), SQRT_PI / 2))); return CT_OK; }
VJP(lgamma) { SET(0, ct_mul(g[0], ct_digamma(IN(0)))); return CT_OK; }
VJP(digamma) { SET(0, ct_mul(g[0], ct_polygamma(1, IN(0)))); return CT_OK; }
VJP(polygamma) { SET(0, ct_mul(g[0], ct_polygamma(A->p.ew.n + 1, IN(0)))); return CT_OK; }
/* clamp_backward: the gradient flows where min <= x <= max */
VJP(clamp) {
    ct_tensor *x = IN(0), *m = NULL;
    if (A->p.ew.has_min) m = ge_s(x, A->p.ew.min);
    if (A->p.ew.has_max) m = m ? ct_logical_and(m, le_s(x, A->p.ew.max)) : le_s(x, A->p.ew.max);
    SET(0, m ? keep_if(m, g[0]) : g[0]);
    return CT_OK;
}
VJP(nan_to_num) { SET(0, keep_if(ct_isfinite(IN(0)), g[0])); return CT_OK; }
/* pow_backward: exponent 0 -> zeros; else g * e * x^(e-1) */
VJP(pow_scalar) {
    double e = A->p.ew.exponent;
    SET(0, e == 0.0 ? ct_zeros_like(g[0]) : ct_mul(g[0], ct_mul_scalar(ct_pow_scalar(IN(0), e - 1.0), e)));
    return CT_OK;
}
/* base ** x: g * result * log(base); base 0: 0 where x >= 0 */
VJP(rpow_scalar) {
    double b = A->p.ew.base;
    ct_tensor *d = ct_mul_scalar(OUT(0), log(b));
    if (b == 0.0) d = zero_if(ge_s(IN(0), 0.0), d);
    SET(0, ct_mul(g[0], d));
    return CT_OK;
}

/* ---- binary ------------------------------------------------------------- */
/* pow_backward_self / pow_backward_exponent */
VJP(pow) {
    ct_tensor *x = IN(0), *e = IN(1);
    if (NEED(0)) {
        ct_tensor *d = ct_mul(ct_mul(g[0], e), ct_pow(x, ct_sub_scalar(e, 1.0)));
        SET(0, zero_if(ct_eq(e, W(0.0)), d));
    }
    if (NEED(1)) {
        ct_tensor *cond = ct_logical_and(ct_eq(x, W(0.0)), ge_s(e, 0.0));
        SET(1, ct_mul(g[0], zero_if(cond, ct_mul(OUT(0), ct_log(x)))));
    }
    return CT_OK;
}
VJP(atan2) {
    ct_tensor *a = IN(0), *b = IN(1);
    ct_tensor *gr = ct_div(g[0], ct_add(sq(a), sq(b)));
    SET(0, ct_mul(gr, b));
    SET(1, ct_mul(gr, ct_neg(a)));
    return CT_OK;
}
/* maximum/minimum: ties split the gradient evenly */
static ct_status minmax(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin, int is_max) {
    ct_tensor *a = IN(0), *b = IN(1);
    ct_tensor *split = ct_where(ct_eq(a, b), ct_mul_scalar(g[0], 0.5), g[0]);
    SET(0, zero_if(is_max ? ct_lt(a, b) : ct_gt(a, b), split));
    SET(1, zero_if(is_max ? ct_gt(a, b) : ct_lt(a, b), split));
    return CT_OK;
}
VJP(maximum) { return minmax(c, g, gin, 1); }
VJP(minimum) { return minmax(c, g, gin, 0); }
/* fmax/fmin: self wins ties; NaN operands are skipped */
static ct_status fminmax(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin, int is_max) {
    ct_tensor *a = IN(0), *b = IN(1);
    ct_tensor *self_wins = ct_logical_or(is_max ? ct_ge(a, b) : ct_le(a, b), ct_isnan(b));
    SET(0, keep_if(self_wins, g[0]));
    SET(1, zero_if(self_wins, g[0]));
    return CT_OK;
}
VJP(fmax) { return fminmax(c, g, gin, 1); }
VJP(fmin) { return fminmax(c, g, gin, 0); }
VJP(fmod) {
    SET(0, g[0]);
    SET(1, ct_neg(ct_mul(g[0], ct_div_mode(IN(0), IN(1), CT_ROUND_TRUNC))));
    return CT_OK;
}
VJP(remainder) {
    SET(0, g[0]);
    SET(1, ct_neg(ct_mul(g[0], ct_div_mode(IN(0), IN(1), CT_ROUND_FLOOR))));
    return CT_OK;
}
/* xlogy: d/dx = log(y), as xlogy(g, y) (0 where g == 0 unless y is NaN);
 * at x == 0 with y <= 0, where x*log(y) is not defined around the point,
 * zero, the directional derivative along x = 0 (torch's formula,
 * pytorch#80770).  So x == 0 with y > 0 gives g*log(y), as in torch.
 * d/dy = g*x/y (NaN at x == y == 0, as in torch). */
VJP(xlogy) {
    ct_tensor *x = IN(0), *y = IN(1);
    SET(0, ct_masked_fill(ct_xlogy(g[0], y), ct_logical_and(ct_eq(x, W(0.0)), le_s(y, 0.0)), 0.0));
    SET(1, ct_div(ct_mul(g[0], x), y));
    return CT_OK;
}
VJP(hypot) {
    ct_tensor *r = OUT(0);
    SET(0, ct_mul(g[0], ct_div(IN(0), r)));
    SET(1, ct_mul(g[0], ct_div(IN(1), r)));
    return CT_OK;
}
/* copysign: self gets g * result/self (0 where self == 0); other: zeros */
VJP(copysign) {
    ct_tensor *x = IN(0);
    SET(0, ct_mul(g[0], zero_if(ct_eq(x, W(0.0)), ct_div(OUT(0), x))));
    if (NEED(1) && !(gin[1] = ZEROS_FOR(1))) return err();
    return CT_OK;
}

/* ---- ternary ------------------------------------------------------------ */
VJP(where) {
    ct_tensor *cond = IN(0);
    SET(1, keep_if(cond, g[0]));
    SET(2, zero_if(cond, g[0]));
    return CT_OK;
}
VJP(lerp) {
    ct_tensor *w = IN(2);
    ct_tensor *gw = ct_mul(g[0], w);
    SET(0, ct_sub(g[0], gw));
    SET(1, gw);
    SET(2, ct_mul(g[0], ct_sub(IN(1), IN(0))));
    return CT_OK;
}
VJP(addcmul) {
    SET(0, g[0]);
    SET(1, ct_mul(ct_mul_scalar(g[0], A->p.ew.value), IN(2)));
    SET(2, ct_mul(ct_mul_scalar(g[0], A->p.ew.value), IN(1)));
    return CT_OK;
}
VJP(addcdiv) {
    ct_tensor *t1 = IN(1), *t2 = IN(2);
    SET(0, g[0]);
    SET(1, ct_div(ct_mul_scalar(g[0], A->p.ew.value), t2));
    SET(2, ct_neg(ct_div(ct_mul(ct_mul_scalar(g[0], A->p.ew.value), t1), sq(t2))));
    return CT_OK;
}
/* clamp_backward_min_max.  An absent bound's slot holds x itself
 * (src/ops/elementwise_ops.c): it gets zeros. */
VJP(clamp_tensor) {
    ct_tensor *x = IN(0), *lo = IN(1), *hi = IN(2);
    int hmin = A->p.ew.has_min, hmax = A->p.ew.has_max;
    if (hmin && hmax) {
        SET(0, keep_if(ct_logical_and(ct_ge(x, lo), ct_le(x, hi)), g[0]));
        SET(1, keep_if(ct_logical_and(ct_lt(x, lo), ct_lt(lo, hi)), g[0]));
        SET(2, keep_if(ct_logical_or(ct_gt(x, hi), ct_lt(hi, lo)), g[0]));
        return CT_OK;
    }
    if (hmin) {
        SET(0, keep_if(ct_ge(x, lo), g[0]));
        SET(1, keep_if(ct_lt(x, lo), g[0]));
        if (NEED(2) && !(gin[2] = ZEROS_FOR(2))) return err();
    } else {
        SET(0, keep_if(ct_le(x, hi), g[0]));
        SET(2, keep_if(ct_gt(x, hi), g[0]));
        if (NEED(1) && !(gin[1] = ZEROS_FOR(1))) return err();
    }
    return CT_OK;
}

