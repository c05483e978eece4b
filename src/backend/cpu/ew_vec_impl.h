/* ew_vec_impl.h -- the body of the vectorized elementwise loops (ew_vec.h),
 * included once per ISA level by ew_vec_<level>.c after defining
 *   CT_VW        floats per vector (4, 8, 16)
 *   CT_SL(f)     the SLEEF function for f on that ISA (e.g. Sleef_expf8_u10avx2)
 *   CT_SL35(f)   its 3.5-ulp variant (Sleef_tanhf8_u35avx2)
 *   CT_VTAB      the name of the table to define
 *   CT_VTAB_NAME its level name
 * Vectors are GCC vector-extension types, so one source serves every width;
 * the compiler maps them to the file's ISA (CMake passes the -m flags and
 * -ffp-contract=off, so results equal the scalar formulas' roundings). */
#include <math.h>
#include <string.h>

#include <sleef.h>

#include "ew_vec.h"

typedef float vf __attribute__((vector_size(CT_VW * 4)));
typedef int32_t vi __attribute__((vector_size(CT_VW * 4)));
typedef uint32_t vu __attribute__((vector_size(CT_VW * 4)));

#define SL(f, x) ((vf)CT_SL(f)(x))
/* SLEEF's 3.5-ulp variants (where they exist): several times faster than
 * the 1-ulp ones for tanh/log/sin/cos, far inside the tests' tolerances */
#define SL35(f, x) ((vf)CT_SL35(f)(x))

static inline vf vld(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static inline void vst(float *p, vf v) { memcpy(p, &v, sizeof v); }
static inline vf vset(float s) { vf v; for (int k = 0; k < CT_VW; k++) v[k] = s; return v; }
/* m ? a : b, m a comparison result (-1 / 0 per lane) */
static inline vf vsel(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }

/* ---- unary -------------------------------------------------------------- */
static inline vf u_exp(vf x) { return SL(exp, x); }
static inline vf u_log(vf x) { return SL35(log, x); }
static inline vf u_tanh(vf x) { return SL35(tanh, x); }
static inline vf u_sigmoid(vf x) { return vset(1.0f) / (vset(1.0f) + SL(exp, -x)); }
static inline vf u_silu(vf x) { return x / (vset(1.0f) + SL(exp, -x)); }
/* erf and tanh for gelu and its tanh form: x P(x^2) / Q(x^2) on x clamped
 * to [-lim, lim] (beyond, the function is +-1 in float), the result clamped
 * to [-1, 1]; coefficients of our own minimax fits (tools/fit_erf.py).
 *   erf:  degrees 5 / 5 on [-4, 4]: 2.1e-8 in exact arithmetic, 3.5e-7
 *         absolute evaluated in float32 over [-5, 5];
 *   tanh: degrees 4 / 4 on [-9, 9]: 4.2e-8 exact, 3.9e-7 absolute in
 *         float32 over [-12, 12] (absolute, not relative: gelu's forward
 *         only, see g_gelu_tanh).
 * PyTorch's vectorized gelu uses Abramowitz & Stegun 7.1.26 for erf (1 -
 * t P(t) exp(-x^2), t = 1/(1 + p|x|); 5.5e-7 in float32) and SLEEF's tanh
 * for the tanh form.  Both were compute-bound here (AMD Zen 3, one thread,
 * in L1: 7.7 and 10.1 ns per 8 floats; a 16M-float gelu took 8.3 ms on 2
 * threads where a mul took 4.0); this form takes 3.4.  NaN propagates
 * through the clamps' operand order (x second); gelu(-inf) = -inf * 0 =
 * NaN as in torch.  (The ct_erf and ct_tanh ops keep SLEEF's functions,
 * accurate relative to the result.) */
static const float k_erf_p[6] = {1.1283789873123169f, 0.19625183939933777f, 0.053467798978090286f,
                                 0.0040037548169493675f, 0.00028804142493754625f, 1.9747742499021115e-06f};
static const float k_erf_q[6] = {1.0f, 0.50725483894348145f, 0.11647755652666092f, 0.015444639138877392f,
                                 0.0012163820210844278f, 3.7480287573998794e-05f};
static const float k_tanh_p[5] = {1.0f, 0.1337442696094513f, 0.0034879478625953197f, 2.049153408734128e-05f,
                                  1.3207243299007132e-08f};
static const float k_tanh_q[5] = {1.0f, 0.4670774042606354f, 0.02584739960730076f, 0.0003273491747677326f,
                                  7.71295276535966e-07f};
#ifdef CT_ERF_FMA
/* the AVX2 level: fused multiply-adds (-ffp-contract=off elsewhere) */
#include <immintrin.h>
static inline __attribute__((always_inline)) vf odd_rational(vf xv, float lim, const float *cp, int np,
                                                             const float *cq, int nq) {
    __m256 x = _mm256_min_ps(_mm256_set1_ps(lim), _mm256_max_ps(_mm256_set1_ps(-lim), (__m256)xv));
    __m256 t = _mm256_mul_ps(x, x), p = _mm256_set1_ps(cp[np]), q = _mm256_set1_ps(cq[nq]);
    for (int k = np - 1; k >= 0; k--) p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(cp[k]));
    for (int k = nq - 1; k >= 0; k--) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(cq[k]));
    __m256 r = _mm256_div_ps(_mm256_mul_ps(x, p), q);
    r = _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_set1_ps(-1.0f), r));
    /* +-1 exactly from the clamp's bound on (the fit's value there is a few
     * ulp short of it): gelu(-inf) = -inf * 0 = NaN, as torch's */
    const __m256 nz = _mm256_set1_ps(-0.0f);
    __m256 sat = _mm256_cmp_ps(_mm256_andnot_ps(nz, (__m256)xv), _mm256_set1_ps(lim), _CMP_GE_OQ);
    return (vf)_mm256_blendv_ps(r, _mm256_or_ps(_mm256_and_ps(nz, (__m256)xv), _mm256_set1_ps(1.0f)), sat);
}
#else
/* minps/maxps's rule lane by lane: the second operand when either is NaN */
static inline vf vmin_(vf a, vf b) { return vsel(a < b, a, b); }
static inline vf vmax_(vf a, vf b) { return vsel(a > b, a, b); }
static inline __attribute__((always_inline)) vf odd_rational(vf x0, float lim, const float *cp, int np,
                                                             const float *cq, int nq) {
    vf x = vmin_(vset(lim), vmax_(vset(-lim), x0));
    vf t = x * x, p = vset(cp[np]), q = vset(cq[nq]);
    for (int k = np - 1; k >= 0; k--) p = p * t + vset(cp[k]);
    for (int k = nq - 1; k >= 0; k--) q = q * t + vset(cq[k]);
    vf r = vmin_(vset(1.0f), vmax_(vset(-1.0f), x * p / q));
    /* +-1 exactly from the clamp's bound on (see the AVX2 form) */
    vf one = (vf)(((vu)x0 & (vu)vset(-0.0f)) | (vu)vset(1.0f));
    return vsel((vf)((vu)x0 & ~(vu)vset(-0.0f)) >= vset(lim), one, r);
}
#endif
static inline vf erf_fast(vf x) { return odd_rational(x, 4.0f, k_erf_p, 5, k_erf_q, 5); }
static inline vf tanh_fast(vf x) { return odd_rational(x, 9.0f, k_tanh_p, 4, k_tanh_q, 4); }
static inline vf u_gelu(vf x) {
    return x * vset(0.5f) * (vset(1.0f) + erf_fast(x * vset(0.70710678118654752440f)));
}
static inline vf u_gelu_tanh(vf x) {
    vf inner = vset(0.79788456080286535588f) * (x + vset(0.044715f) * x * x * x);
    return vset(0.5f) * x * (vset(1.0f) + tanh_fast(inner));
}
static inline vf u_erf(vf x) { return SL(erf, x); }
/* NaN propagates: NaN <= 0 is false */
static inline vf u_relu(vf x) { return vsel(x <= vset(0.0f), vset(0.0f), x); }
static inline vf u_expm1(vf x) { return SL(expm1, x); }
static inline vf u_log1p(vf x) { return SL(log1p, x); }
static inline vf u_log2(vf x) { return SL35(log2, x); }
static inline vf u_sin(vf x) { return SL35(sin, x); }
static inline vf u_cos(vf x) { return SL35(cos, x); }
static inline vf u_sqrt(vf x) {
    vf r;
    for (int k = 0; k < CT_VW; k++) r[k] = __builtin_sqrtf(x[k]);
    return r;
}
static inline vf u_rsqrt(vf x) { return vset(1.0f) / u_sqrt(x); }
static inline vf u_reciprocal(vf x) { return vset(1.0f) / x; }
static inline vf u_neg(vf x) { return -x; }
static inline vf u_abs(vf x) { return (vf)((vu)x & ~(vu)vset(-0.0f)); }
static inline vf u_square(vf x) { return x * x; }

#define CT_UNARY_LOOP(NAME)                                                   \
    static void l_##NAME(float *o, const float *x, int64_t n) {              \
        int64_t i = 0;                                                        \
        for (; i + CT_VW <= n; i += CT_VW) vst(o + i, u_##NAME(vld(x + i)));  \
        if (i < n) {                                                          \
            float bx[CT_VW], bo[CT_VW];                                       \
            memset(bx, 0, sizeof bx);                                         \
            memcpy(bx, x + i, (size_t)(n - i) * 4);                           \
            vst(bo, u_##NAME(vld(bx)));                                       \
            memcpy(o + i, bo, (size_t)(n - i) * 4);                           \
        }                                                                     \
    }
CT_UNARY_LOOP(exp)
CT_UNARY_LOOP(log)
CT_UNARY_LOOP(tanh)
CT_UNARY_LOOP(sigmoid)
CT_UNARY_LOOP(silu)
CT_UNARY_LOOP(gelu)
CT_UNARY_LOOP(gelu_tanh)
CT_UNARY_LOOP(erf)
CT_UNARY_LOOP(relu)
CT_UNARY_LOOP(expm1)
CT_UNARY_LOOP(log1p)
CT_UNARY_LOOP(log2)
CT_UNARY_LOOP(sin)
CT_UNARY_LOOP(cos)
CT_UNARY_LOOP(sqrt)
CT_UNARY_LOOP(rsqrt)
CT_UNARY_LOOP(reciprocal)
CT_UNARY_LOOP(neg)
CT_UNARY_LOOP(abs)
CT_UNARY_LOOP(square)

/* ---- binary (and fused backward) ---------------------------------------- */
static inline vf b_add(vf x, vf y) { return x + y; }
static inline vf b_sub(vf x, vf y) { return x - y; }
static inline vf b_mul(vf x, vf y) { return x * y; }
static inline vf b_div(vf x, vf y) { return x / y; }
/* the backward formulas, in the order of PyTorch's vectorized kernels */
static inline vf g_relu(vf g, vf y) { return vsel(y <= vset(0.0f), vset(0.0f), g); }
static inline vf g_sigmoid(vf g, vf y) { return g * (vset(1.0f) - y) * y; }
static inline vf g_tanh(vf g, vf y) { return g * (vset(1.0f) - y * y); }
static inline vf g_gelu(vf g, vf x) {
    const float kAlpha = 0.39894228040143267794f; /* 1/sqrt(2 pi) */
    vf cdf = vset(0.5f) * (vset(1.0f) + erf_fast(x * vset(0.70710678118654752440f)));
    vf pdf = vset(kAlpha) * SL(exp, x * x * vset(-0.5f));
    return g * (cdf + x * pdf);
}
static inline vf g_gelu_tanh(vf g, vf x) {
    const float kBeta = 0.79788456080286535588f, kKappa = 0.044715f;
    vf x_sq = x * x, x_cube = x_sq * x;
    vf inner = vset(kBeta) * (x + vset(kKappa) * x_cube);
    /* SLEEF's tanh here: the derivative's 1 - t^2 cancels where t nears 1,
     * and the rational's absolute error (3.9e-7) became 5.7e-6 in the
     * gradient (torch's: 1.0e-6) */
    vf t = SL35(tanh, inner);
    vf left = vset(0.5f) * x, right = vset(1.0f) + t;
    vf left_d = vset(0.5f) * right;
    vf right_d = (vset(1.0f) - t * t) * vset(kBeta) * (vset(1.0f) + vset(3.0f * kKappa) * x_sq);
    return g * (left_d + left * right_d);
}
static inline vf g_silu(vf g, vf x) {
    vf s = vset(1.0f) / (vset(1.0f) + SL(exp, -x));
    return g * s * (vset(1.0f) + x * (vset(1.0f) - s));
}

/* x, y each contiguous (step 1) or a broadcast scalar (step 0) */
#define CT_BINARY_LOOP(PFX, NAME)                                                      \
    static void l_##PFX##NAME(float *o, const float *x, const float *y, int64_t n,     \
                              int64_t sx, int64_t sy) {                                \
        int64_t i = 0;                                                                 \
        vf xs = vset(x[0]), ys = vset(y[0]);                                           \
        if (sx && sy)                                                                  \
            for (; i + CT_VW <= n; i += CT_VW) vst(o + i, PFX##NAME(vld(x + i), vld(y + i))); \
        else if (sx)                                                                   \
            for (; i + CT_VW <= n; i += CT_VW) vst(o + i, PFX##NAME(vld(x + i), ys));  \
        else if (sy)                                                                   \
            for (; i + CT_VW <= n; i += CT_VW) vst(o + i, PFX##NAME(xs, vld(y + i)));  \
        else                                                                           \
            for (; i + CT_VW <= n; i += CT_VW) vst(o + i, PFX##NAME(xs, ys));          \
        if (i < n) {                                                                   \
            float bx[CT_VW], by[CT_VW], bo[CT_VW];                                     \
            for (int k = 0; k < CT_VW; k++) {                                          \
                int64_t j = i + k < n ? i + k : i;                                     \
                bx[k] = x[j * sx];                                                     \
                by[k] = y[j * sy];                                                     \
            }                                                                          \
            vst(bo, PFX##NAME(vld(bx), vld(by)));                                      \
            memcpy(o + i, bo, (size_t)(n - i) * 4);                                    \
        }                                                                              \
    }
CT_BINARY_LOOP(b_, add)
CT_BINARY_LOOP(b_, sub)
CT_BINARY_LOOP(b_, mul)
CT_BINARY_LOOP(b_, div)
CT_BINARY_LOOP(g_, relu)
CT_BINARY_LOOP(g_, sigmoid)
CT_BINARY_LOOP(g_, tanh)
CT_BINARY_LOOP(g_, gelu)
CT_BINARY_LOOP(g_, gelu_tanh)
CT_BINARY_LOOP(g_, silu)

static void l_add_alpha(float *o, const float *x, const float *y, int64_t n, int64_t sx,
                        int64_t sy, float alpha) {
    vf va = vset(alpha);
    int64_t i = 0;
    if (sx && sy)
        for (; i + CT_VW <= n; i += CT_VW) vst(o + i, vld(x + i) + va * vld(y + i));
    for (; i < n; i++) o[i] = x[i * sx] + alpha * y[i * sy];
}

static void l_where(float *o, const uint8_t *c, const float *x, const float *y, int64_t n,
                    int64_t sc, int64_t sx, int64_t sy) {
    if (sc && sx && sy) {
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];
    } else if (sc && sx) {
        const float ys = y[0];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : ys;
    } else if (sc && sy) {
        const float xs = x[0];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? xs : y[i];
    } else if (sc) {
        const float xs = x[0], ys = y[0];
        for (int64_t i = 0; i < n; i++) o[i] = c[i] ? xs : ys;
    } else {
        for (int64_t i = 0; i < n; i++) o[i] = c[0] ? x[i * sx] : y[i * sy];
    }
}

/* ---- half precision conversions (rules: src/core/dtype.c) --------------
 * bf16: integer rounding on CT_VW lanes (add 0x7fff plus the kept LSB,
 * shift), NaN lanes forced to 0xffff, narrowed with one pack; f16: F16C's
 * vcvtps2ph / vcvtph2ps (round to nearest even) 8 lanes at a time where the
 * level has it, the scalar rules otherwise.  Tails go through one more
 * vector on a padded copy, so every element takes the same path. */
typedef uint16_t vh __attribute__((vector_size(CT_VW * 2)));
static inline vh bf16_round(vu u) {
    vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    vu nan = (vu)((u & 0x7fffffffu) > 0x7f800000u);
    r = (r & ~nan) | (nan & 0xffffu);
    return __builtin_convertvector(r, vh);
}
static void l_f32_to_bf16(uint16_t *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + CT_VW <= n; i += CT_VW) {
        vu u;
        memcpy(&u, x + i, sizeof u);
        vh h = bf16_round(u);
        memcpy(o + i, &h, sizeof h);
    }
    if (i < n) {
        vu u = {0};
        memcpy(&u, x + i, (size_t)(n - i) * 4);
        vh h = bf16_round(u);
        memcpy(o + i, &h, (size_t)(n - i) * 2);
    }
}
static void l_bf16_to_f32(float *o, const uint16_t *x, int64_t n) {
    int64_t i = 0;
    for (; i + CT_VW <= n; i += CT_VW) {
        vh h;
        memcpy(&h, x + i, sizeof h);
        vu u = __builtin_convertvector(h, vu) << 16;
        memcpy(o + i, &u, sizeof u);
    }
    for (; i < n; i++) {
        uint32_t u = (uint32_t)x[i] << 16;
        memcpy(o + i, &u, 4);
    }
}
#ifdef __F16C__
#include <immintrin.h>
static void l_f32_to_f16(uint16_t *o, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(o + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float b[8] = {0};
        uint16_t h[8];
        memcpy(b, x + i, (size_t)(n - i) * 4);
        _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph(_mm256_loadu_ps(b), _MM_FROUND_TO_NEAREST_INT));
        memcpy(o + i, h, (size_t)(n - i) * 2);
    }
}
static void l_f16_to_f32(float *o, const uint16_t *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(o + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    if (i < n) {
        uint16_t h[8] = {0};
        float b[8];
        memcpy(h, x + i, (size_t)(n - i) * 2);
        _mm256_storeu_ps(b, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
        memcpy(o + i, b, (size_t)(n - i) * 4);
    }
}
#else
float ct__f16_to_f32(uint16_t h);
uint16_t ct__f32_to_f16(float f);
static void l_f32_to_f16(uint16_t *o, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) o[i] = ct__f32_to_f16(x[i]);
}
static void l_f16_to_f32(float *o, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) o[i] = ct__f16_to_f32(x[i]);
}
#endif
static void l_f64_to_f32(float *o, const double *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) o[i] = (float)x[i];
}
static void l_f32_to_f64(double *o, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) o[i] = (double)x[i];
}

const ct_ew_vtab CT_VTAB = {
    .name = CT_VTAB_NAME,
    .unary = {
        [CT_VU_EXP] = l_exp, [CT_VU_LOG] = l_log, [CT_VU_TANH] = l_tanh,
        [CT_VU_SIGMOID] = l_sigmoid, [CT_VU_SILU] = l_silu, [CT_VU_GELU] = l_gelu,
        [CT_VU_GELU_TANH] = l_gelu_tanh, [CT_VU_ERF] = l_erf, [CT_VU_RELU] = l_relu,
        [CT_VU_EXPM1] = l_expm1, [CT_VU_LOG1P] = l_log1p, [CT_VU_SQRT] = l_sqrt,
        [CT_VU_RSQRT] = l_rsqrt, [CT_VU_RECIPROCAL] = l_reciprocal, [CT_VU_NEG] = l_neg,
        [CT_VU_ABS] = l_abs, [CT_VU_SQUARE] = l_square, [CT_VU_SIN] = l_sin,
        [CT_VU_COS] = l_cos, [CT_VU_LOG2] = l_log2,
    },
    .binary = {
        [CT_VB_ADD] = l_b_add, [CT_VB_SUB] = l_b_sub, [CT_VB_MUL] = l_b_mul, [CT_VB_DIV] = l_b_div,
    },
    .grad = {
        [CT_VG_RELU] = l_g_relu, [CT_VG_SIGMOID] = l_g_sigmoid, [CT_VG_TANH] = l_g_tanh,
        [CT_VG_GELU] = l_g_gelu, [CT_VG_GELU_TANH] = l_g_gelu_tanh, [CT_VG_SILU] = l_g_silu,
    },
    .add_alpha = l_add_alpha,
    .where = l_where,
    .f32_to_bf16 = l_f32_to_bf16,
    .bf16_to_f32 = l_bf16_to_f32,
    .f32_to_f16 = l_f32_to_f16,
    .f16_to_f32 = l_f16_to_f32,
    .f64_to_f32 = l_f64_to_f32,
    .f32_to_f64 = l_f32_to_f64,
};
