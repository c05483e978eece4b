/* ew_scalar.h -- the scalar helpers the elementwise expressions of
 * ew_math.def call: pure static C functions (and a few macros), no ctorch
 * types, so that the CPU kernels (src/backend/cpu/elementwise.c) and every
 * program the renderer writes (src/ops/render.c) include the same text and
 * compute the same bits.  Whoever includes it includes <tgmath.h> first
 * (as both of those do); the functions below call the double/float
 * functions by their typed names, so they mean the same either way.
 *
 * Integer arithmetic wraps (two's complement, as torch) instead of
 * overflowing: T is the operands' C type (the dtype's scalar_t). */
#ifndef CT_EW_SCALAR_H
#define CT_EW_SCALAR_H

#ifndef __OPENCL_VERSION__ /* the OpenCL backend's kernels include this text too */
#include <math.h>
#include <stdint.h>
#endif

#define CT_EW_PI 3.14159265358979323846
#ifdef __OPENCL_VERSION__
#define CT_EW_CONST __constant
#define CT_EW_CONST_PTR __constant
#elif defined(__GNUC__)
#define CT_EW_CONST static const __attribute__((unused))
#define CT_EW_CONST_PTR const
#else
#define CT_EW_CONST static const
#define CT_EW_CONST_PTR const
#endif
/* The long helpers are plain static functions, not inline, as they were
 * when they lived in elementwise.c (so the compiler makes the same inlining
 * choices: same code, same speed); a program that uses only some of them
 * is not warned about the others. */
#if defined(__GNUC__)
#define CT_EW_FUNC static __attribute__((unused))
#else
#define CT_EW_FUNC static
#endif

/* wrap-around integer arithmetic (no signed-overflow UB) */
#define CT_EW_WADD(T, x, y) ((T)((uint64_t)(x) + (uint64_t)(y)))
#define CT_EW_WSUB(T, x, y) ((T)((uint64_t)(x) - (uint64_t)(y)))
#define CT_EW_WMUL(T, x, y) ((T)((uint64_t)(x) * (uint64_t)(y)))
#define CT_EW_WNEG(T, x) ((T)(0ULL - (uint64_t)(x)))
#define CT_EW_ISNEG(T, x) ((x) < (T)0)
#define CT_EW_NBITS(T) ((int64_t)(sizeof(T) * 8))

/* clamp(x, min=y, max=z) with tensor bounds, each present or not; a NaN
 * bound propagates */
#define CT_EW_CLAMP_T(x, y, z, has_min, has_max)                                               \
    ((has_max) ? (((z) != (z)) ? (z)                                                           \
                               : (((has_min) ? (((y) != (y)) ? (y) : ((x) < (y) ? (y) : (x))) \
                                             : (x)) > (z)                                      \
                                      ? (z)                                                    \
                                      : ((has_min) ? (((y) != (y)) ? (y)                       \
                                                                   : ((x) < (y) ? (y) : (x)))  \
                                                   : (x))))                                    \
               : ((has_min) ? (((y) != (y)) ? (y) : ((x) < (y) ? (y) : (x))) : (x)))

/* integer power with wrap-around, PyTorch's powi: negative exponents give
 * 1 for base 1, +-1 for base -1 and 0 otherwise */
static inline int64_t ct__ew_powi(int64_t a, int64_t b) {
    if (b < 0) {
        if (a == 1) return 1;
        if (a == -1) return (b & 1) ? -1 : 1;
        return 0;
    }
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1) r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

/* digamma: recurrence up to x >= 10, then the asymptotic series
 * psi(x) = ln x - 1/(2x) - sum B_2k / (2k x^2k).  psi(+-0) = -+inf, negative
 * integers NaN, negative x by the reflection formula (as torch). */
/* (x > 0 or NaN; without recursion, which OpenCL C does not have) */
CT_EW_FUNC double ct__ew_digamma_pos(double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x;
    double res = 0;
    while (x < 10) {
        res -= 1 / x;
        x += 1;
    }
    if (x == 10) return res + 2.25175258906672110764; /* psi(10) = H_9 - gamma */
    double y = 0;
    if (x < 1.0e17) {
        double z = 1.0 / (x * x);
        /* B2/2, B4/4, ..., B14/14 */
        double p = 1.0 / 12;
        p = -691.0 / 32760 + z * p;
        p = 1.0 / 132 + z * p;
        p = -1.0 / 240 + z * p;
        p = 1.0 / 252 + z * p;
        p = -1.0 / 120 + z * p;
        p = 1.0 / 12 + z * p;
        y = z * p;
    }
    return res + log(x) - 0.5 / x - y;
}
CT_EW_FUNC double ct__ew_digamma(double x) {
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == trunc(x)) return NAN;
        double q, r = modf(x, &q);
        return ct__ew_digamma_pos(1 - x) - CT_EW_PI / tan(CT_EW_PI * r);
    }
    return ct__ew_digamma_pos(x);
}

/* Euler-Maclaurin coefficients of ct__ew_zeta (at file scope: OpenCL C has
 * no static variables in functions, and puts constants in __constant) */
CT_EW_CONST double ct__ew_zeta_A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                                        -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
                                        1.1646782814350067249e14, -4.5979787224074726105e15,
                                        1.8152105401943546773e17, -7.1661652561756670113e18};

/* Hurwitz zeta(x, q) = sum_k (k + q)^-x, x > 1 (Cephes zeta.c, as torch):
 * direct sum to k >= 9, then Euler-Maclaurin with Bernoulli terms. */
CT_EW_FUNC double ct__ew_zeta(double x, double q) {
    CT_EW_CONST_PTR double *A = ct__ew_zeta_A;
    const double MACHEP = 1.11022302462515654042e-16;
    if (x == 1) return INFINITY;
    if (x < 1) return NAN;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (x != floor(x)) return NAN;
    }
    double s = pow(q, -x), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i += 1;
        a += 1.0;
        b = pow(a, -x);
        s += b;
        if (fabs(b / s) < MACHEP) return s;
    }
    double w = a, k = 0;
    s += b * w / (x - 1);
    s -= 0.5 * b;
    a = 1.0;
    for (i = 0; i < 12; i++) {
        a *= x + k;
        b /= w;
        double t = a * b / A[i];
        s += t;
        if (fabs(t / s) < MACHEP) return s;
        k += 1.0;
        a *= x + k;
        b /= w;
        k += 1.0;
    }
    return s;
}

/* polygamma(n, x), n >= 1: (-1)^(n+1) n! zeta(n+1, x) */
CT_EW_FUNC double ct__ew_polygamma(int64_t n, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? ((n & 1) ? 0.0 : -0.0) : NAN;
    double fact = 1;
    for (int64_t i = 2; i <= n; i++) fact *= (double)i;
    return ((n & 1) ? 1.0 : -1.0) * fact * ct__ew_zeta((double)(n + 1), x);
}

/* erfinv: Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2011) as a first guess, refined by Newton
 * steps on erf (or on erfc in the tails, where 1-|y| is exact). */
CT_EW_FUNC double ct__ew_erfinv(double y) {
    if (isnan(y) || y < -1 || y > 1) return NAN;
    if (y == 1) return INFINITY;
    if (y == -1) return -INFINITY;
    if (y == 0) return y;
    double w = -log((1.0 - y) * (1.0 + y)), p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    double x = p * y;
    const double k = 1.1283791670955126; /* 2/sqrt(pi) */
    double ay = fabs(y), ax = fabs(x);
    for (int it = 0; it < 3; it++) {
        double d = k * exp(-ax * ax);
        if (d == 0) break;
        if (ay > 0.5) ax += (erfc(ax) - (1.0 - ay)) / d;
        else ax -= (erf(ax) - ay) / d;
    }
    return y < 0 ? -ax : ax;
}

/* torch's floor division for floats, in the operands' own precision */
static inline double ct__ew_div_floor_f64(double a, double b) {
    if (b == 0) return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    double fl;
    if (div != 0) {
        fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
    } else {
        fl = copysign(0.0, a / b);
    }
    return fl;
}
static inline float ct__ew_div_floor_f32(float a, float b) {
    if (b == 0) return a / b;
    float mod = fmodf(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    float fl;
    if (div != 0) {
        fl = floorf(div);
        if (div - fl > 0.5f) fl += 1.0f;
    } else {
        fl = copysignf(0.0f, a / b);
    }
    return fl;
}
#if defined(__cplusplus) /* CUDA C++ (the OpenCL kernels through the CUDA device's dialect): no _Generic */
template <typename X> struct ct__ew_dfl {
    template <typename Y> static double f(X x, Y y) { return ct__ew_div_floor_f64(x, y); }
};
template <> struct ct__ew_dfl<float> {
    template <typename Y> static float f(float x, Y y) { return ct__ew_div_floor_f32(x, y); }
};
#define CT_EW_DIV_FLOOR(x, y) ct__ew_dfl<decltype(+(x))>::f((x), (y))
#elif defined(__OPENCL_VERSION__) /* no function designators as values in OpenCL C */
#define CT_EW_DIV_FLOOR(x, y) \
    _Generic((x), float: ct__ew_div_floor_f32((x), (y)), default: ct__ew_div_floor_f64((x), (y)))
#else
#define CT_EW_DIV_FLOOR(x, y) \
    _Generic((x), float: ct__ew_div_floor_f32, default: ct__ew_div_floor_f64)((x), (y))
#endif

#endif
