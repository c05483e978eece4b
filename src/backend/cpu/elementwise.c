/* elementwise.c (cpu) -- inner loops of the elementwise ops, one per
 * (op, dtype), run by the strided iterator.  Each loop has a contiguous
 * fast path the compiler vectorizes and a strided path.  Kernel dtypes:
 * bool u8 i8 i16 i32 i64 f32 f64 (+ c64 c128 where noted); f16/bf16 are
 * computed in f32 by the driver (src/ops/elementwise.c).
 *
 * Math functions come from <tgmath.h>: exp(x) on a float is expf, so one
 * expression serves both float widths.  Inside a loop `scalar_t` is the
 * compute type. */
#include <float.h>
#include <tgmath.h>

#include "../../ops/ew.h"
#include "../../ops/iter.h"
#include "ew_vec.h"
#include "vmath.h"
#include <xmmintrin.h>

/* generic integer expressions compare unsigned values with 0 */
#pragma GCC diagnostic ignored "-Wtype-limits"

static ct_loop_fn g_loops[CT_OP_COUNT][CT_DTYPE_COUNT];
/* per-op grain: elements per thread before a loop goes parallel */
static int64_t g_grain[CT_OP_COUNT];
/* the vectorized f32 loops for this CPU (ew_vec.h), set at registration */
static const ct_ew_vtab *g_vt;

/* ---- scalar helpers ---------------------------------------------------- */
#define CT_PI 3.14159265358979323846

/* integer power with wrap-around, PyTorch's powi: negative exponents give
 * 1 for base 1, +-1 for base -1 and 0 otherwise */
static inline int64_t ew_powi(int64_t a, int64_t b) {
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
static double ew_digamma(double x) {
    if (x == 0) return copysign(INFINITY, -x);
    if (x < 0) {
        if (x == trunc(x)) return NAN;
        double q, r = modf(x, &q);
        return ew_digamma(1 - x) - CT_PI / tan(CT_PI * r);
    }
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

/* Hurwitz zeta(x, q) = sum_k (k + q)^-x, x > 1 (Cephes zeta.c, as torch):
 * direct sum to k >= 9, then Euler-Maclaurin with Bernoulli terms. */
static double ew_zeta(double x, double q) {
    static const double A[] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0,
                               -1.8924375803183791606e9, 7.47242496e10, -2.950130727918164224e12,
                               1.1646782814350067249e14, -4.5979787224074726105e15,
                               1.8152105401943546773e17, -7.1661652561756670113e18};
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
static double ew_polygamma(int64_t n, double x) {
    if (isnan(x)) return x;
    if (isinf(x)) return x > 0 ? ((n & 1) ? 0.0 : -0.0) : NAN;
    double fact = 1;
    for (int64_t i = 2; i <= n; i++) fact *= (double)i;
    return ((n & 1) ? 1.0 : -1.0) * fact * ew_zeta((double)(n + 1), x);
}

/* erfinv: Giles' single-precision approximation ("Approximating the erfinv
 * function", GPU Computing Gems, 2011) as a first guess, refined by Newton
 * steps on erf (or on erfc in the tails, where 1-|y| is exact). */
static double ew_erfinv(double y) {
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

/* torch's floor division for floats */
static inline double ew_div_floor(double a, double b) {
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
static inline float ew_div_floorf(float a, float b) {
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

/* ---- loop generators ---------------------------------------------------
 * UNARY(name, T, OT, expr): o = expr(x), x of type T, o of type OT.
 * BINARY(name, T, OT, expr): o = expr(x, y).  TERNARY: expr(x, y, z).
 * Params are the op's ct_args (ctx), family ew (params_ew.def).  The loop
 * reads them from a local copy, ew.<field>, that no store through the output
 * can change, so the compiler keeps them in registers and hoists the tests on
 * them out of the loop (a read through the ct_params union, a->p.ew.<field>,
 * may alias a store of any of the union's member types, double or int64). */
#define UNARY(NAME, T, OT, EXPR)                                                   \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {           \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

#define BINARY(NAME, T, OT, EXPR)                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&           \
            s[2] == (int64_t)sizeof(T)) {                                          \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];\
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i], y = yp[i];                                     \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&    \
                   s[2] == 0) {                                                    \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            const scalar_t y = *(const T *)p[2];                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == 0 &&                     \
                   s[2] == (int64_t)sizeof(T)) {                                   \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict yp = (const T *)p[2];                                \
            const scalar_t x = *(const T *)p[1];                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t y = yp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                scalar_t y = *(const T *)(p[2] + i * s[2]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

#define TERNARY(NAME, T, OT, EXPR)                                                 \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&           \
            s[2] == (int64_t)sizeof(T) && s[3] == (int64_t)sizeof(T)) {            \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];\
            const T *restrict zp = (const T *)p[3];                                \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i], y = yp[i], z = zp[i];                          \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                scalar_t y = *(const T *)(p[2] + i * s[2]);                        \
                scalar_t z = *(const T *)(p[3] + i * s[3]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

/* Register a loop for (op, dtype). */
#define REG(OP, DT, FN) g_loops[CT_OP_##OP][DT] = FN

/* Families of loops: _F floats (f32 f64), _I integers (u8 i8 i16 i32 i64),
 * _B bool (as uint8), _BO every real dtype in and bool out. */
#define GEN_F(G, NAME, EXPR) G(NAME##_f32, float, float, EXPR) G(NAME##_f64, double, double, EXPR)
#define GEN_I(G, NAME, EXPR)                         \
    G(NAME##_u8, uint8_t, uint8_t, EXPR)             \
    G(NAME##_i8, int8_t, int8_t, EXPR)               \
    G(NAME##_i16, int16_t, int16_t, EXPR)            \
    G(NAME##_i32, int32_t, int32_t, EXPR)            \
    G(NAME##_i64, int64_t, int64_t, EXPR)
#define GEN_B(G, NAME, EXPR) G(NAME##_b, uint8_t, uint8_t, EXPR)
#define GEN_BO(G, NAME, EXPR)                        \
    G(NAME##_b, uint8_t, uint8_t, EXPR)              \
    G(NAME##_u8, uint8_t, uint8_t, EXPR)             \
    G(NAME##_i8, int8_t, uint8_t, EXPR)              \
    G(NAME##_i16, int16_t, uint8_t, EXPR)            \
    G(NAME##_i32, int32_t, uint8_t, EXPR)            \
    G(NAME##_i64, int64_t, uint8_t, EXPR)            \
    G(NAME##_f32, float, uint8_t, EXPR)              \
    G(NAME##_f64, double, uint8_t, EXPR)
#define REG_F(OP, NAME) REG(OP, CT_F32, NAME##_f32); REG(OP, CT_F64, NAME##_f64)
#define REG_I(OP, NAME)                                                    \
    REG(OP, CT_U8, NAME##_u8); REG(OP, CT_I8, NAME##_i8);                  \
    REG(OP, CT_I16, NAME##_i16); REG(OP, CT_I32, NAME##_i32);              \
    REG(OP, CT_I64, NAME##_i64)
#define REG_B(OP, NAME) REG(OP, CT_BOOL, NAME##_b)
#define REG_FI(OP, NAME) REG_F(OP, NAME); REG_I(OP, NAME)
#define REG_ALL(OP, NAME) REG_F(OP, NAME); REG_I(OP, NAME); REG_B(OP, NAME)

/* wrap-around integer arithmetic (no signed-overflow UB) */
#define WADD(x, y) ((scalar_t)((uint64_t)(x) + (uint64_t)(y)))
#define WSUB(x, y) ((scalar_t)((uint64_t)(x) - (uint64_t)(y)))
#define WMUL(x, y) ((scalar_t)((uint64_t)(x) * (uint64_t)(y)))
#define WNEG(x) ((scalar_t)(0ULL - (uint64_t)(x)))
#define ISNEG(x) ((x) < (scalar_t)0)
#define NBITS ((int64_t)(sizeof(scalar_t) * 8))

/* ---- arithmetic -------------------------------------------------------- */
/* add/sub: x + alpha * y when has_alpha (alpha given and != 1) */
GEN_F(BINARY, add, x + (ew.has_alpha ? (scalar_t)ew.alpha * y : y))
GEN_I(BINARY, add, WADD(x, ew.has_alpha ? WMUL((int64_t)ew.alpha, y) : y))
GEN_B(BINARY, add, x || y)
GEN_F(BINARY, sub, x - (ew.has_alpha ? (scalar_t)ew.alpha * y : y))
GEN_I(BINARY, sub, WSUB(x, ew.has_alpha ? WMUL((int64_t)ew.alpha, y) : y))
GEN_F(BINARY, mul, x * y)
GEN_I(BINARY, mul, WMUL(x, y))
GEN_B(BINARY, mul, x && y)
GEN_F(BINARY, div, x / y)
GEN_F(BINARY, div_trunc, trunc(x / y))
/* integer division: the kernel has checked y != 0; y == -1 avoids MIN/-1 */
GEN_I(BINARY, div_trunc, y == (scalar_t)-1 ? WNEG(x) : (scalar_t)(x / y))
BINARY(div_floor_f32, float, float, ew_div_floorf(x, y))
BINARY(div_floor_f64, double, double, ew_div_floor(x, y))
GEN_I(BINARY, div_floor,
      y == (scalar_t)-1 ? WNEG(x)
                        : (scalar_t)(x / y - ((x % y != 0) && (ISNEG(x) != ISNEG(y)))))
GEN_F(BINARY, fmod, fmod(x, y))
GEN_I(BINARY, fmod, y == (scalar_t)-1 ? (scalar_t)0 : (scalar_t)(x % y))
GEN_F(BINARY, remainder,
      (fmod(x, y) != 0 && ((y < 0) != (fmod(x, y) < 0))) ? fmod(x, y) + y : fmod(x, y))
GEN_I(BINARY, remainder,
      y == (scalar_t)-1 ? (scalar_t)0
                        : (scalar_t)((x % y != 0 && (ISNEG(x % y) != ISNEG(y))) ? x % y + y : x % y))
GEN_F(BINARY, pow, pow(x, y))
GEN_I(BINARY, pow, (scalar_t)ew_powi((int64_t)x, (int64_t)y))
GEN_F(BINARY, atan2, atan2(x, y))
GEN_F(BINARY, minimum, (x != x) ? x : (y != y) ? y : (y < x ? y : x))
GEN_I(BINARY, minimum, y < x ? y : x)
GEN_B(BINARY, minimum, x && y)
GEN_F(BINARY, maximum, (x != x) ? x : (y != y) ? y : (y > x ? y : x))
GEN_I(BINARY, maximum, y > x ? y : x)
GEN_B(BINARY, maximum, x || y)
GEN_F(BINARY, fmin, fmin(x, y))
GEN_I(BINARY, fmin, y < x ? y : x)
GEN_B(BINARY, fmin, x && y)
GEN_F(BINARY, fmax, fmax(x, y))
GEN_I(BINARY, fmax, y > x ? y : x)
GEN_B(BINARY, fmax, x || y)
GEN_I(BINARY, bitwise_and, x & y)
GEN_B(BINARY, bitwise_and, x & y)
GEN_I(BINARY, bitwise_or, x | y)
GEN_B(BINARY, bitwise_or, x | y)
GEN_I(BINARY, bitwise_xor, x ^ y)
GEN_B(BINARY, bitwise_xor, x ^ y)
/* shifts: an out-of-range count gives 0 (left) or the sign fill (right) */
GEN_I(BINARY, bitwise_left_shift,
      ((int64_t)y < 0 || (int64_t)y >= NBITS) ? (scalar_t)0 : (scalar_t)((uint64_t)x << (int64_t)y))
GEN_I(BINARY, bitwise_right_shift,
      ((int64_t)y < 0 || (int64_t)y >= NBITS) ? (scalar_t)(ISNEG(x) ? -1 : 0)
                                              : (scalar_t)(x >> (int64_t)y))
GEN_F(BINARY, xlogy, (y != y) ? y : (x == 0) ? (scalar_t)0 : x * log(y))
GEN_F(BINARY, hypot, hypot(x, y))
GEN_F(BINARY, copysign, copysign(x, y))
/* isclose: rtol, atol, equal_nan */
#define ISCLOSE_F(NAME, T)                                                                \
    BINARY(NAME, T, uint8_t,                                                              \
           (x == y) || (ew.equal_nan && x != x && y != y) ||                              \
               (isfinite(x - y) && fabs(x - y) <= (scalar_t)ew.atol + fabs((scalar_t)ew.rtol * y)))
ISCLOSE_F(isclose_f32, float)
ISCLOSE_F(isclose_f64, double)
#define ISCLOSE_INT(NAME, T)                                                              \
    BINARY(NAME, T, uint8_t,                                                              \
           (x == y) || fabs((double)x - (double)y) <= ew.atol + fabs(ew.rtol * (double)y))
ISCLOSE_INT(isclose_u8, uint8_t)
ISCLOSE_INT(isclose_i8, int8_t)
ISCLOSE_INT(isclose_i16, int16_t)
ISCLOSE_INT(isclose_i32, int32_t)
ISCLOSE_INT(isclose_i64, int64_t)
BINARY(isclose_b, uint8_t, uint8_t, x == y)

/* ---- comparisons and logical ops --------------------------------------- */
GEN_BO(BINARY, eq, x == y)
GEN_BO(BINARY, ne, x != y)
GEN_BO(BINARY, lt, x < y)
GEN_BO(BINARY, le, x <= y)
GEN_BO(BINARY, gt, x > y)
GEN_BO(BINARY, ge, x >= y)
GEN_BO(BINARY, logical_and, (x != 0) && (y != 0))
GEN_BO(BINARY, logical_or, (x != 0) || (y != 0))
GEN_BO(BINARY, logical_xor, (x != 0) != (y != 0))
GEN_BO(UNARY, logical_not, x == 0)

/* ---- unary ------------------------------------------------------------- */
GEN_F(UNARY, neg, -x)
GEN_I(UNARY, neg, WNEG(x))
GEN_F(UNARY, abs, fabs(x))
GEN_I(UNARY, abs, ISNEG(x) ? WNEG(x) : x)
GEN_F(UNARY, sign, (scalar_t)((x > 0) - (x < 0)))
GEN_I(UNARY, sign, (scalar_t)((x > 0) - ISNEG(x)))
GEN_B(UNARY, sign, x)
GEN_F(UNARY, sgn, (scalar_t)((x > 0) - (x < 0)))
GEN_I(UNARY, sgn, (scalar_t)((x > 0) - ISNEG(x)))
GEN_B(UNARY, sgn, x)
GEN_F(UNARY, reciprocal, (scalar_t)1 / x)
GEN_F(UNARY, sqrt, sqrt(x))
GEN_F(UNARY, rsqrt, (scalar_t)1 / sqrt(x))
GEN_F(UNARY, square, x * x)
GEN_I(UNARY, square, WMUL(x, x))
GEN_F(UNARY, exp, exp(x))
GEN_F(UNARY, exp2, exp2(x))
GEN_F(UNARY, expm1, expm1(x))
GEN_F(UNARY, log, log(x))
GEN_F(UNARY, log2, log2(x))
GEN_F(UNARY, log10, log10(x))
GEN_F(UNARY, log1p, log1p(x))
GEN_F(UNARY, sin, sin(x))
GEN_F(UNARY, cos, cos(x))
GEN_F(UNARY, tan, tan(x))
GEN_F(UNARY, asin, asin(x))
GEN_F(UNARY, acos, acos(x))
GEN_F(UNARY, atan, atan(x))
GEN_F(UNARY, sinh, sinh(x))
GEN_F(UNARY, cosh, cosh(x))
GEN_F(UNARY, tanh, tanh(x))
GEN_F(UNARY, asinh, asinh(x))
GEN_F(UNARY, acosh, acosh(x))
GEN_F(UNARY, atanh, atanh(x))
GEN_F(UNARY, sigmoid, (scalar_t)1 / ((scalar_t)1 + exp(-x)))
GEN_F(UNARY, relu, (x != x || x > 0) ? x : (scalar_t)0)
GEN_I(UNARY, relu, x > 0 ? x : (scalar_t)0)
GEN_F(UNARY, relu6, (x != x) ? x : x < 0 ? (scalar_t)0 : x > 6 ? (scalar_t)6 : x)
GEN_I(UNARY, relu6, x < 0 ? (scalar_t)0 : x > 6 ? (scalar_t)6 : x)
/* hardtanh: min_val, max_val */
GEN_F(UNARY, hardtanh,
      (x != x) ? x : x < (scalar_t)ew.min_val ? (scalar_t)ew.min_val : x > (scalar_t)ew.max_val ? (scalar_t)ew.max_val : x)
GEN_I(UNARY, hardtanh,
      (double)x < ew.min_val ? (scalar_t)ew.min_val : (double)x > ew.max_val ? (scalar_t)ew.max_val : x)
GEN_F(UNARY, leaky_relu, x > 0 ? x : x * (scalar_t)ew.negative_slope)
GEN_F(UNARY, elu, x > 0 ? x : (scalar_t)ew.alpha * expm1(x))
GEN_F(UNARY, celu, x > 0 ? x : (scalar_t)ew.alpha * expm1(x / (scalar_t)ew.alpha))
GEN_F(UNARY, selu, (scalar_t)1.0507009873554804934193349852946 *
                       (x > 0 ? x : (scalar_t)1.6732632423543772848170429916717 * expm1(x)))
/* gelu: approximate false exact (erf), true tanh */
GEN_F(UNARY, gelu,
      ew.approximate ? (scalar_t)0.5 * x *
                           ((scalar_t)1 + tanh((scalar_t)0.79788456080286535588 *
                                               (x + (scalar_t)0.044715 * x * x * x)))
                     : x * (scalar_t)0.5 * ((scalar_t)1 + erf(x * (scalar_t)0.70710678118654752440)))
GEN_F(UNARY, silu, x / ((scalar_t)1 + exp(-x)))
GEN_F(UNARY, mish, x * tanh(log1p(exp(x))))
/* softplus: beta, threshold */
GEN_F(UNARY, softplus,
      x * (scalar_t)ew.beta > (scalar_t)ew.threshold ? x
                                                     : log1p(exp(x * (scalar_t)ew.beta)) / (scalar_t)ew.beta)
GEN_F(UNARY, softsign, x / ((scalar_t)1 + fabs(x)))
GEN_F(UNARY, hardsigmoid, fmin(fmax(x + 3, (scalar_t)0), (scalar_t)6) / 6)
GEN_F(UNARY, hardswish, x * fmin(fmax(x + 3, (scalar_t)0), (scalar_t)6) / 6)
GEN_F(UNARY, hardshrink, (x >= -(scalar_t)ew.lambd && x <= (scalar_t)ew.lambd) ? (scalar_t)0 : x)
GEN_F(UNARY, softshrink,
      x > (scalar_t)ew.lambd ? x - (scalar_t)ew.lambd : x < -(scalar_t)ew.lambd ? x + (scalar_t)ew.lambd : (scalar_t)0 * x)
/* logit: x clamped to [eps, 1 - eps] first when has_eps */
GEN_F(UNARY, logit,
      ew.has_eps ? log((x < (scalar_t)ew.eps ? (scalar_t)ew.eps : x > 1 - (scalar_t)ew.eps ? 1 - (scalar_t)ew.eps : x) /
                       (1 - (x < (scalar_t)ew.eps ? (scalar_t)ew.eps : x > 1 - (scalar_t)ew.eps ? 1 - (scalar_t)ew.eps : x)))
                 : log(x / (1 - x)))
GEN_F(UNARY, erf, erf(x))
GEN_F(UNARY, erfc, erfc(x))
GEN_F(UNARY, erfinv, ew_erfinv((double)x))
GEN_F(UNARY, lgamma, lgamma(x))
GEN_F(UNARY, digamma, ew_digamma((double)x))
GEN_F(UNARY, polygamma, (scalar_t)ew_polygamma(ew.n, (double)x))
GEN_F(UNARY, floor, floor(x))
GEN_I(UNARY, floor, x)
GEN_F(UNARY, ceil, ceil(x))
GEN_I(UNARY, ceil, x)
GEN_F(UNARY, round, nearbyint(x))
GEN_I(UNARY, round, x)
GEN_F(UNARY, trunc, trunc(x))
GEN_I(UNARY, trunc, x)
GEN_F(UNARY, frac, x - trunc(x))
/* round_decimals: decimals */
GEN_F(UNARY, round_decimals,
      ew.decimals < 0 ? nearbyint(x / (scalar_t)pow(10.0, (double)-ew.decimals)) * (scalar_t)pow(10.0, (double)-ew.decimals)
                      : nearbyint(x * (scalar_t)pow(10.0, (double)ew.decimals)) / (scalar_t)pow(10.0, (double)ew.decimals))
GEN_I(UNARY, bitwise_not, ~x)
GEN_B(UNARY, bitwise_not, !x)
/* clamp: min when has_min, max when has_max; NaN x stays */
GEN_F(UNARY, clamp,
      (ew.has_max && (ew.has_min && x < (scalar_t)ew.min ? (scalar_t)ew.min : x) > (scalar_t)ew.max)
          ? (scalar_t)ew.max
          : (ew.has_min && x < (scalar_t)ew.min ? (scalar_t)ew.min : x))
GEN_I(UNARY, clamp,
      (ew.has_max && (ew.has_min && (double)x < ew.min ? ew.min : (double)x) > ew.max)
          ? (scalar_t)ew.max
          : (ew.has_min && (double)x < ew.min ? (scalar_t)ew.min : x))
GEN_B(UNARY, clamp,
      (ew.has_max && (ew.has_min && (double)x < ew.min ? ew.min : (double)x) > ew.max)
          ? (scalar_t)ew.max
          : (ew.has_min && (double)x < ew.min ? (scalar_t)ew.min : x))
/* nan_to_num: nan, posinf, neginf (already resolved) */
GEN_F(UNARY, nan_to_num,
      (x != x) ? (scalar_t)ew.nan : (x == INFINITY) ? (scalar_t)ew.posinf : (x == -INFINITY) ? (scalar_t)ew.neginf : x)
GEN_I(UNARY, nan_to_num, x)
GEN_B(UNARY, nan_to_num, x)
/* pow_scalar: x ** exponent; rpow_scalar: base ** x */
GEN_F(UNARY, pow_scalar, pow(x, (scalar_t)ew.exponent))
GEN_I(UNARY, pow_scalar, (scalar_t)ew_powi((int64_t)x, (int64_t)ew.exponent))
GEN_F(UNARY, rpow_scalar, pow((scalar_t)ew.base, x))
GEN_I(UNARY, rpow_scalar, (scalar_t)ew_powi((int64_t)ew.base, (int64_t)x))
/* predicates */
#define PRED(NAME, EXPR)                                                       \
    UNARY(NAME##_f32, float, uint8_t, EXPR) UNARY(NAME##_f64, double, uint8_t, EXPR) \
    UNARY(NAME##_b, uint8_t, uint8_t, EXPR) UNARY(NAME##_u8, uint8_t, uint8_t, EXPR) \
    UNARY(NAME##_i8, int8_t, uint8_t, EXPR) UNARY(NAME##_i16, int16_t, uint8_t, EXPR) \
    UNARY(NAME##_i32, int32_t, uint8_t, EXPR) UNARY(NAME##_i64, int64_t, uint8_t, EXPR)
PRED(pisnan, x != x)
PRED(pisinf, isinf((double)x))
PRED(pisfinite, isfinite((double)x))
PRED(pisposinf, (double)x == INFINITY)
PRED(pisneginf, (double)x == -INFINITY)
PRED(psignbit, signbit((double)x) != 0)

/* ---- ternary ----------------------------------------------------------- */
/* where: cond (operand 1) stays bool; the values have the compute dtype */
#define WHERE(NAME, T)                                                             \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        (void)ctx;                                                                 \
        for (int64_t i = 0; i < n; i++)                                            \
            *(T *)(p[0] + i * s[0]) = *(const uint8_t *)(p[1] + i * s[1])          \
                                          ? *(const T *)(p[2] + i * s[2])          \
                                          : *(const T *)(p[3] + i * s[3]);         \
    }
WHERE(where_b, uint8_t)
WHERE(where_u8, uint8_t)
WHERE(where_i8, int8_t)
WHERE(where_i16, int16_t)
WHERE(where_i32, int32_t)
WHERE(where_i64, int64_t)
WHERE(where_f64, double)
WHERE(where_slow_f32, float)
static void where_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    if (s[0] == 4 && (s[1] == 1 || s[1] == 0) && (s[2] == 4 || s[2] == 0) &&
        (s[3] == 4 || s[3] == 0)) {
        g_vt->where((float *)p[0], (const uint8_t *)p[1], (const float *)p[2],
                    (const float *)p[3], n, s[1], s[2] / 4, s[3] / 4);
        return;
    }
    where_slow_f32(p, s, n, ctx);
}
GEN_F(TERNARY, lerp, fabs(z) < (scalar_t)0.5 ? x + z * (y - x) : y - (y - x) * ((scalar_t)1 - z))
/* addcmul/addcdiv: value */
GEN_F(TERNARY, addcmul, x + (scalar_t)ew.value * y * z)
GEN_I(TERNARY, addcmul, WADD(x, WMUL(WMUL((int64_t)ew.value, y), z)))
GEN_F(TERNARY, addcdiv, x + (scalar_t)ew.value * y / z)
/* clamp_tensor: has_min (bound y), has_max (bound z); NaN bounds propagate */
#define CLAMP_T(x, y, z)                                                                       \
    (ew.has_max ? ((z != z) ? z : ((ew.has_min ? ((y != y) ? y : (x < y ? y : x)) : x) > z ? z \
                                   : (ew.has_min ? ((y != y) ? y : (x < y ? y : x)) : x)))     \
                : (ew.has_min ? ((y != y) ? y : (x < y ? y : x)) : x))
GEN_F(TERNARY, clamp_tensor, CLAMP_T(x, y, z))
GEN_I(TERNARY, clamp_tensor, CLAMP_T(x, y, z))

/* ---- f32 loops through the vectorized tables (ew_vec.h) ----------------
 * Contiguous operands run in one call; strided ones are gathered into
 * blocks and run through the same vector loop, so an element's result does
 * not depend on the layout or on where a thread's chunk starts. */
#define VBLK 512
/* Outputs far larger than the last-level cache (a thread's contiguous
 * chunk of >= 4M floats, 16 MiB) are computed VBLK at a time into an L1
 * buffer and written with non-temporal stores: the line is not read first
 * (no read-for-ownership) and the cache is not flushed by data the next op
 * would have to fetch from memory anyway -- a third less memory traffic for
 * a streaming op.  Same loop, same bits. */
#define NT_MIN CT_STREAM_MIN
static void nt_store(float *o, const float *b, int64_t m) { /* o 16-byte aligned */
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) _mm_stream_ps(o + j, _mm_load_ps(b + j));
    for (; j < m; j++) o[j] = b[j];
}
static int64_t nt_head(const float *o) { /* elements before o reaches 16-byte alignment */
    return (int64_t)((16 - ((uintptr_t)o & 15)) & 15) / 4;
}
static void vunary_nt(ct_vu_fn f, float *o, const float *x, int64_t n) {
    _Alignas(64) float bo[VBLK];
    int64_t h = ((uintptr_t)o & 3) ? n : nt_head(o);
    f(o, x, h);
    for (int64_t i = h; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        f(bo, x + i, m);
        nt_store(o + i, bo, m);
    }
    _mm_sfence();
}
static void vbinary_nt(ct_vb_fn f, float *o, const float *x, const float *y, int64_t n, int64_t sx,
                       int64_t sy) {
    _Alignas(64) float bo[VBLK];
    int64_t h = ((uintptr_t)o & 3) ? n : nt_head(o);
    f(o, x, y, h, sx, sy);
    for (int64_t i = h; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        f(bo, x + i * sx, y + i * sy, m, sx, sy);
        nt_store(o + i, bo, m);
    }
    _mm_sfence();
}
static void vunary(ct_vu_fn f, char **p, const int64_t *s, int64_t n) {
    if (s[0] == 4 && s[1] == 4) {
        if (n >= NT_MIN && ct__stream_stores()) vunary_nt(f, (float *)p[0], (const float *)p[1], n);
        else f((float *)p[0], (const float *)p[1], n);
        return;
    }
    float bx[VBLK], bo[VBLK];
    for (int64_t i = 0; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        for (int64_t j = 0; j < m; j++) bx[j] = *(const float *)(p[1] + (i + j) * s[1]);
        f(bo, bx, m);
        for (int64_t j = 0; j < m; j++) *(float *)(p[0] + (i + j) * s[0]) = bo[j];
    }
}
/* o = f(x, y) with x, y contiguous or broadcast scalars; else gathered */
static void vbinary(ct_vb_fn f, char **p, const int64_t *s, int64_t n) {
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        if (n >= NT_MIN && ct__stream_stores())
            vbinary_nt(f, (float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4, s[2] / 4);
        else f((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4, s[2] / 4);
        return;
    }
    float bx[VBLK], by[VBLK], bo[VBLK];
    for (int64_t i = 0; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        for (int64_t j = 0; j < m; j++) {
            bx[j] = *(const float *)(p[1] + (i + j) * s[1]);
            by[j] = *(const float *)(p[2] + (i + j) * s[2]);
        }
        f(bo, bx, by, m, 1, 1);
        for (int64_t j = 0; j < m; j++) *(float *)(p[0] + (i + j) * s[0]) = bo[j];
    }
}
#define VUN(NAME, IDX)                                                             \
    static void v_##NAME##_f32(char **p, const int64_t *s, int64_t n, void *ctx) { \
        (void)ctx;                                                                 \
        vunary(g_vt->unary[IDX], p, s, n);                                         \
    }
VUN(exp, CT_VU_EXP)
VUN(log, CT_VU_LOG)
VUN(tanh, CT_VU_TANH)
VUN(sigmoid, CT_VU_SIGMOID)
VUN(silu, CT_VU_SILU)
VUN(erf, CT_VU_ERF)
VUN(relu, CT_VU_RELU)
VUN(expm1, CT_VU_EXPM1)
VUN(log1p, CT_VU_LOG1P)
VUN(log2, CT_VU_LOG2)
VUN(sin, CT_VU_SIN)
VUN(cos, CT_VU_COS)
VUN(sqrt, CT_VU_SQRT)
VUN(rsqrt, CT_VU_RSQRT)
VUN(reciprocal, CT_VU_RECIPROCAL)
VUN(neg, CT_VU_NEG)
VUN(abs, CT_VU_ABS)
VUN(square, CT_VU_SQUARE)
static void v_gelu_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    vunary(g_vt->unary[a->p.ew.approximate ? CT_VU_GELU_TANH : CT_VU_GELU], p, s, n);
}
/* add/sub: x + alpha * y when has_alpha */
static void v_add_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    if (!a->p.ew.has_alpha) { vbinary(g_vt->binary[CT_VB_ADD], p, s, n); return; }
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        g_vt->add_alpha((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4,
                        s[2] / 4, (float)a->p.ew.alpha);
        return;
    }
    add_f32(p, s, n, ctx);
}
static void v_sub_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    if (!a->p.ew.has_alpha) { vbinary(g_vt->binary[CT_VB_SUB], p, s, n); return; }
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        g_vt->add_alpha((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4,
                        s[2] / 4, -(float)a->p.ew.alpha);
        return;
    }
    sub_f32(p, s, n, ctx);
}
#define VBIN(NAME, IDX)                                                            \
    static void v_##NAME##_f32(char **p, const int64_t *s, int64_t n, void *ctx) { \
        (void)ctx;                                                                 \
        vbinary(g_vt->binary[IDX], p, s, n);                                       \
    }
VBIN(mul, CT_VB_MUL)
VBIN(div, CT_VB_DIV)

/* ---- fused backward kernels (ew.h: ct__ew_fused_grad) ------------------ */
static void grad_f64(int kind, double *o, const double *gp, const double *tp, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gp[i], t = tp[i], r;
        switch (kind) {
        case CT_EWG_RELU: r = t <= 0 ? 0.0 : g; break;
        case CT_EWG_SIGMOID: r = g * (1.0 - t) * t; break;
        case CT_EWG_TANH: r = g * (1.0 - t * t); break;
        case CT_EWG_GELU: {
            double cdf = 0.5 * (1.0 + erf(t * 0.70710678118654752440));
            double pdf = 0.39894228040143267794 * exp(t * t * -0.5);
            r = g * (cdf + t * pdf);
            break;
        }
        case CT_EWG_GELU_TANH: {
            const double kb = 0.79788456080286535588, kk = 0.044715;
            double x2 = t * t, th = tanh(kb * (t + kk * x2 * t));
            r = g * (0.5 * (1.0 + th) + 0.5 * t * ((1.0 - th * th) * kb * (1.0 + 3.0 * kk * x2)));
            break;
        }
        default: { /* CT_EWG_SILU */
            double sg = 1.0 / (1.0 + exp(-t));
            r = g * sg * (1.0 + t * (1.0 - sg));
        }
        }
        o[i] = r;
    }
}
static const int g_kind_vg[CT_EWG_COUNT] = {
    [CT_EWG_RELU] = CT_VG_RELU, [CT_EWG_SIGMOID] = CT_VG_SIGMOID, [CT_EWG_TANH] = CT_VG_TANH,
    [CT_EWG_GELU] = CT_VG_GELU, [CT_EWG_GELU_TANH] = CT_VG_GELU_TANH, [CT_EWG_SILU] = CT_VG_SILU};
static void grad_loop_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    char *q[3] = {p[0], p[1], p[2]};
    vbinary(g_vt->grad[g_kind_vg[*(const int *)ctx]], q, s, n);
}
static void grad_loop_f64(char **p, const int64_t *s, int64_t n, void *ctx) {
    int kind = *(const int *)ctx;
    if (s[0] == 8 && s[1] == 8 && s[2] == 8) {
        grad_f64(kind, (double *)p[0], (const double *)p[1], (const double *)p[2], n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        grad_f64(kind, (double *)(p[0] + i * s[0]), (const double *)(p[1] + i * s[1]),
                 (const double *)(p[2] + i * s[2]), 1);
}

ct_status ct__cpu_ew_grad(int kind, ct_tensor *out, ct_tensor *g, ct_tensor *t) {
    if (kind < 0 || kind >= CT_EWG_COUNT)
        return ct__error_status(CT_ERR_ARG, "ew_grad: bad kind %d", kind);
    ct_tensor *ts[3] = {out, g, t};
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, 3);
    if (st) return st;
    int64_t grain = kind == CT_EWG_RELU || kind == CT_EWG_SIGMOID || kind == CT_EWG_TANH
                        ? CT_GRAIN : CT_GRAIN / 8;
    ct__iter_run(&it, out->dtype == CT_F32 ? grad_loop_f32 : grad_loop_f64, &kind, grain);
    return CT_OK;
}

/* ---- fused bias + activation (ew.h: ct__bias_act_) ---------------------- */
ct_status ct__cpu_bias_act(float *y, const float *bias, int64_t m, int64_t n, int act) {
    static const int vu[CT_EWA_COUNT] = {
        [CT_EWA_NONE] = -1, [CT_EWA_RELU] = CT_VU_RELU, [CT_EWA_GELU] = CT_VU_GELU,
        [CT_EWA_GELU_TANH] = CT_VU_GELU_TANH, [CT_EWA_SILU] = CT_VU_SILU,
        [CT_EWA_SIGMOID] = CT_VU_SIGMOID, [CT_EWA_TANH] = CT_VU_TANH};
    if (act < 0 || act >= CT_EWA_COUNT)
        return ct__error_status(CT_ERR_ARG, "bias_act: bad activation %d", act);
    ct_vb_fn add = g_vt->binary[CT_VB_ADD];
    ct_vu_fn f = vu[act] >= 0 ? g_vt->unary[vu[act]] : NULL;
    int64_t grain = act == CT_EWA_NONE || act == CT_EWA_RELU ? CT_GRAIN : CT_GRAIN / 8;
    int par = m > 1 && m * n >= 2 * grain && ct__num_threads() > 1;
#pragma omp parallel for if (par) schedule(static)
    for (int64_t i = 0; i < m; i++) {
        float *row = y + i * n;
        add(row, row, bias, n, 1, 1);
        if (f) f(row, row, n);
    }
    return CT_OK;
}

/* ---- the kernel: pick the loop for (op, input dtype), run it ----------- */
typedef struct { int zero; } zscan_ctx;
#define ZSCAN(NAME, T)                                                             \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        zscan_ctx *c = ctx;                                                        \
        for (int64_t i = 0; i < n; i++)                                            \
            if (*(const T *)(p[0] + i * s[0]) == 0) c->zero = 1;                   \
    }
ZSCAN(zscan_1, uint8_t)
ZSCAN(zscan_2, int16_t)
ZSCAN(zscan_4, int32_t)
ZSCAN(zscan_8, int64_t)

/* true when integer tensor t has a zero element */
static int has_zero(ct_tensor *t) {
    ct_iter it;
    ct_tensor *ts[1] = {t};
    if (ct__iter_build(&it, ts, 1)) return 0;
    zscan_ctx c = {0};
    size_t es = ct_dtype_size(t->dtype);
    ct_loop_fn fn = es == 1 ? zscan_1 : es == 2 ? zscan_2 : es == 4 ? zscan_4 : zscan_8;
    ct__iter_run(&it, fn, &c, 0);
    return c.zero;
}

static ct_status k_ew(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a) {
    (void)nout;
    ct_dtype dt = nin > 0 ? in[nin - 1]->dtype : out[0]->dtype;
    ct_loop_fn fn = g_loops[a->op][dt];
    if (!fn)
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for dtype %s",
                                ct__op_info[a->op].name, ct_dtype_name(dt));
    for (int k = a->op == CT_OP_where ? 1 : 0; k < nin; k++)
        if (in[k]->dtype != dt)
            return ct__error_status(CT_ERR_DTYPE, "%s: kernel expects %s operands, got %s",
                                    ct__op_info[a->op].name, ct_dtype_name(dt),
                                    ct_dtype_name(in[k]->dtype));
    /* integer division by zero is an error (PyTorch: ZeroDivisionError) */
    if (nin == 2 && ct_dtype_is_integral(dt, true) &&
        (a->op == CT_OP_div_trunc || a->op == CT_OP_div_floor || a->op == CT_OP_remainder ||
         a->op == CT_OP_fmod) &&
        has_zero(in[1]))
        return ct__error_status(CT_ERR_ARG, "%s: ZeroDivisionError (integer division by zero)",
                                ct__op_info[a->op].name);
    ct_tensor *ts[CT_ITER_MAX];
    ts[0] = out[0];
    for (int k = 0; k < nin; k++) ts[k + 1] = in[k];
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, nin + 1);
    if (st) return st;
    ct__iter_run(&it, fn, (void *)a, g_grain[a->op]);
    return CT_OK;
}

#define REG_PRED(OP, NAME)                                                     \
    REG(OP, CT_F32, NAME##_f32); REG(OP, CT_F64, NAME##_f64); REG_I(OP, NAME); \
    REG(OP, CT_BOOL, NAME##_b)
#define REG_BO(OP, NAME) REG_PRED(OP, NAME)

void ct__cpu_register_elementwise(ct_kernel_fn *t) {
    /* arithmetic */
    REG_ALL(add, add); REG_FI(sub, sub); REG_ALL(mul, mul); REG_F(div, div);
    REG_FI(div_trunc, div_trunc); REG_FI(div_floor, div_floor);
    REG_FI(fmod, fmod); REG_FI(remainder, remainder); REG_FI(pow, pow);
    REG_F(atan2, atan2);
    REG_ALL(minimum, minimum); REG_ALL(maximum, maximum);
    REG_ALL(fmin, fmin); REG_ALL(fmax, fmax);
    REG_I(bitwise_and, bitwise_and); REG_B(bitwise_and, bitwise_and);
    REG_I(bitwise_or, bitwise_or); REG_B(bitwise_or, bitwise_or);
    REG_I(bitwise_xor, bitwise_xor); REG_B(bitwise_xor, bitwise_xor);
    REG_I(bitwise_left_shift, bitwise_left_shift);
    REG_I(bitwise_right_shift, bitwise_right_shift);
    REG_F(xlogy, xlogy); REG_F(hypot, hypot); REG_F(copysign, copysign);
    REG_F(isclose, isclose); REG_I(isclose, isclose); REG_B(isclose, isclose);
    /* comparisons, logical */
    REG_BO(eq, eq); REG_BO(ne, ne); REG_BO(lt, lt); REG_BO(le, le); REG_BO(gt, gt); REG_BO(ge, ge);
    REG_BO(logical_and, logical_and); REG_BO(logical_or, logical_or);
    REG_BO(logical_xor, logical_xor); REG_BO(logical_not, logical_not);
    /* unary */
    REG_FI(neg, neg); REG_FI(abs, abs); REG_ALL(sign, sign); REG_ALL(sgn, sgn);
    REG_F(reciprocal, reciprocal); REG_F(sqrt, sqrt); REG_F(rsqrt, rsqrt); REG_FI(square, square);
    REG_F(exp, exp); REG_F(exp2, exp2); REG_F(expm1, expm1); REG_F(log, log); REG_F(log2, log2);
    REG_F(log10, log10); REG_F(log1p, log1p); REG_F(sin, sin); REG_F(cos, cos); REG_F(tan, tan);
    REG_F(asin, asin); REG_F(acos, acos); REG_F(atan, atan); REG_F(sinh, sinh); REG_F(cosh, cosh);
    REG_F(tanh, tanh); REG_F(asinh, asinh); REG_F(acosh, acosh); REG_F(atanh, atanh);
    REG_F(sigmoid, sigmoid); REG_FI(relu, relu); REG_FI(relu6, relu6); REG_FI(hardtanh, hardtanh);
    REG_F(leaky_relu, leaky_relu); REG_F(elu, elu); REG_F(celu, celu); REG_F(selu, selu);
    REG_F(gelu, gelu); REG_F(silu, silu); REG_F(mish, mish); REG_F(softplus, softplus);
    REG_F(softsign, softsign); REG_F(hardsigmoid, hardsigmoid); REG_F(hardswish, hardswish);
    REG_F(hardshrink, hardshrink); REG_F(softshrink, softshrink); REG_F(logit, logit);
    REG_F(erf, erf); REG_F(erfc, erfc); REG_F(erfinv, erfinv); REG_F(lgamma, lgamma);
    REG_F(digamma, digamma); REG_F(polygamma, polygamma);
    REG_FI(floor, floor); REG_FI(ceil, ceil); REG_FI(round, round); REG_FI(trunc, trunc);
    REG_F(frac, frac); REG_F(round_decimals, round_decimals);
    REG_I(bitwise_not, bitwise_not); REG_B(bitwise_not, bitwise_not);
    REG_ALL(clamp, clamp); REG_ALL(nan_to_num, nan_to_num);
    REG_FI(pow_scalar, pow_scalar); REG_FI(rpow_scalar, rpow_scalar);
    REG_PRED(isnan, pisnan); REG_PRED(isinf, pisinf); REG_PRED(isfinite, pisfinite);
    REG_PRED(isposinf, pisposinf); REG_PRED(isneginf, pisneginf); REG_PRED(signbit, psignbit);
    /* ternary */
    REG_ALL(where, where); REG_F(lerp, lerp); REG_FI(addcmul, addcmul); REG_F(addcdiv, addcdiv);
    REG_FI(clamp_tensor, clamp_tensor);
    /* f32 through the vectorized loops of this CPU's level */
    g_vt = ct__ew_vtab();
    REG(exp, CT_F32, v_exp_f32); REG(log, CT_F32, v_log_f32); REG(tanh, CT_F32, v_tanh_f32);
    REG(sigmoid, CT_F32, v_sigmoid_f32); REG(silu, CT_F32, v_silu_f32);
    REG(gelu, CT_F32, v_gelu_f32); REG(erf, CT_F32, v_erf_f32); REG(relu, CT_F32, v_relu_f32);
    REG(expm1, CT_F32, v_expm1_f32); REG(log1p, CT_F32, v_log1p_f32);
    REG(log2, CT_F32, v_log2_f32); REG(sin, CT_F32, v_sin_f32); REG(cos, CT_F32, v_cos_f32);
    REG(sqrt, CT_F32, v_sqrt_f32); REG(rsqrt, CT_F32, v_rsqrt_f32);
    REG(reciprocal, CT_F32, v_reciprocal_f32); REG(neg, CT_F32, v_neg_f32);
    REG(abs, CT_F32, v_abs_f32); REG(square, CT_F32, v_square_f32);
    REG(add, CT_F32, v_add_f32); REG(sub, CT_F32, v_sub_f32);
    REG(mul, CT_F32, v_mul_f32); REG(div, CT_F32, v_div_f32);
    /* grains: memory-bound ops go parallel only for large tensors (a
     * parallel region costs microseconds); transcendental ones sooner */
    for (int op = 0; op < CT_OP_COUNT; op++) g_grain[op] = CT_GRAIN;
    {
        static const ct_op heavy[] = {
            CT_OP_exp, CT_OP_exp2, CT_OP_expm1, CT_OP_log, CT_OP_log2, CT_OP_log10, CT_OP_log1p,
            CT_OP_sin, CT_OP_cos, CT_OP_tan, CT_OP_asin, CT_OP_acos, CT_OP_atan, CT_OP_sinh,
            CT_OP_cosh, CT_OP_tanh, CT_OP_asinh, CT_OP_acosh, CT_OP_atanh, CT_OP_sigmoid,
            CT_OP_gelu, CT_OP_silu, CT_OP_mish, CT_OP_softplus, CT_OP_elu, CT_OP_celu,
            CT_OP_selu, CT_OP_erf, CT_OP_erfc, CT_OP_erfinv, CT_OP_lgamma, CT_OP_digamma,
            CT_OP_polygamma, CT_OP_pow, CT_OP_pow_scalar, CT_OP_rpow_scalar, CT_OP_atan2,
            CT_OP_logit, CT_OP_fmod, CT_OP_remainder, CT_OP_div_floor, CT_OP_xlogy, CT_OP_hypot};
        for (size_t k = 0; k < sizeof heavy / sizeof heavy[0]; k++) g_grain[heavy[k]] = CT_GRAIN / 8;
    }
    /* every op that has at least one loop gets the generic kernel */
    for (int op = 0; op < CT_OP_COUNT; op++)
        for (int d = 0; d < CT_DTYPE_COUNT; d++)
            if (g_loops[op][d]) { t[op] = k_ew; break; }
}
