/* vmath.h -- vectorized transcendental math for the CPU kernels (private).
 *
 * ct__v8_expf(x): exp of 8 floats with AVX2+FMA; ct__expf_s(x): the same
 * algorithm on one float (tails, and builds without AVX2), so a row gives
 * the same bits whichever path an element takes.
 *
 * Algorithm (Cephes expf, adapted to FMA):
 *   n = rint(x * log2(e)),  r = x - n*ln2_hi - n*ln2_lo   (|r| <= ln2/2)
 *   exp(r) = 1 + r + r^2 * P(r), P of degree 5 (Cephes' minimax coefficients)
 *   exp(x) = exp(r) * 2^n1 * 2^n2 with n1 = n >> 1, n2 = n - n1, so that
 *   2^n1 and 2^n2 are normal floats for every n in [-150, 128]: results in the
 *   subnormal range and up to FLT_MAX come out right (one rounding at each
 *   scaling).
 * Special values: x > 88.7228394 -> +inf, x < -103.972084 -> +0, -inf -> +0,
 * +inf -> +inf, NaN -> NaN (the same NaN).  Error: < 2 ulp against libm's
 * expf over the whole float range (tests/test_red_perf.c sweeps it).
 */
#ifndef CT_VMATH_H
#define CT_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CT_VMATH_AVX2 1
#endif

#define CT__EXP_HI 88.72283935546875f   /* largest x with expf(x) finite (rounded up) */
#define CT__EXP_LO (-103.97208404541015625f) /* below: the result rounds to 0 */
#define CT__LOG2E 1.44269504088896341f
#define CT__LN2HI 0.693145751953125f
#define CT__LN2LO 1.428606765330187045e-06f
#define CT__EP0 1.9875691500e-4f
#define CT__EP1 1.3981999507e-3f
#define CT__EP2 8.3334519073e-3f
#define CT__EP3 4.1665795894e-2f
#define CT__EP4 1.6666665459e-1f
#define CT__EP5 5.0000001201e-1f

static inline float ct__pow2i_f(int32_t n) { /* 2^n for n in [-126, 127] */
    uint32_t u = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float ct__expf_s(float x) {
    if (x != x) return x;
    if (x > CT__EXP_HI) return INFINITY;
    if (x < CT__EXP_LO) return 0.0f;
    float n = rintf(x * CT__LOG2E);
    float r = fmaf(n, -CT__LN2HI, x);
    r = fmaf(n, -CT__LN2LO, r);
    float p = CT__EP0;
    p = fmaf(p, r, CT__EP1);
    p = fmaf(p, r, CT__EP2);
    p = fmaf(p, r, CT__EP3);
    p = fmaf(p, r, CT__EP4);
    p = fmaf(p, r, CT__EP5);
    float r2 = r * r;
    p = fmaf(p, r2, r) + 1.0f;
    int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
    return p * ct__pow2i_f(n1) * ct__pow2i_f(n2);
}

#ifdef CT_VMATH_AVX2
/* The reduction and polynomial both AVX2 expf share: for xc in the clamped
 * range, n = rint(xc log2 e) (returned in *ni) and exp(xc - n ln 2). */
static inline __m256 ct__v8_exp_core(__m256 xc, __m256i *ni) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(CT__LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-CT__LN2HI), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-CT__LN2LO), r);
    __m256 p = _mm256_set1_ps(CT__EP0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CT__EP1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CT__EP2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CT__EP3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CT__EP4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CT__EP5));
    __m256 r2 = _mm256_mul_ps(r, r);
    *ni = _mm256_cvtps_epi32(n);
    return _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0f));
}

static inline __m256 ct__v8_expf(__m256 x) {
    const __m256 hi = _mm256_set1_ps(CT__EXP_HI), lo = _mm256_set1_ps(CT__EXP_LO);
    __m256 nan_m = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi); /* NaN -> lo (masked below) */
    __m256i ni;
    __m256 p = ct__v8_exp_core(xc, &ni);
    __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), under);
    return _mm256_blendv_ps(y, x, nan_m);
}

/* exp(x) for x <= 0, as softmax needs it (x = score - row max): the
 * reduction and polynomial of ct__v8_expf with one 2^n scaling and no
 * overflow checks, about 17 instead of 27 instructions.  For x in
 * [-87.33654, 0] (results from FLT_MIN up) the bits equal ct__v8_expf's: both
 * scale p exactly and round once; below (subnormal results, -inf) it gives
 * +0; NaN gives NaN.  x > 0 is outside its contract. */
#define CT__EXP_NEG_LO (-87.33654022216796875f) /* expf(x) >= FLT_MIN from here */
static inline __m256 ct__v8_expf_neg(__m256 x) {
    const __m256 lo = _mm256_set1_ps(CT__EXP_NEG_LO);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ); /* false for NaN */
    __m256 xc = _mm256_max_ps(lo, x);                /* NaN: maxps returns its second operand */
    __m256i ni;                                      /* n >= -126: 2^n is a normal float */
    __m256 p = ct__v8_exp_core(xc, &ni);
    __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, s));
}

/* horizontal helpers */
static inline float ct__v8_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float ct__v8_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

/* y[i] = expf(x[i]) for n floats (x == y allowed). */
static inline void ct__vexpf(const float *x, float *y, int64_t n) {
    int64_t i = 0;
#ifdef CT_VMATH_AVX2
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, ct__v8_expf(_mm256_loadu_ps(x + i)));
#endif
    for (; i < n; i++) y[i] = ct__expf_s(x[i]);
}


/* Streaming stores for large outputs: an f32 output of >= CT_STREAM_MIN
 * elements (16 MiB, half this host's shared L3) is written with
 * non-temporal stores -- no read-for-ownership of lines that are overwritten
 * whole, no flush of the cache by data the next op reads from memory anyway
 * -- on CPUs where that was measured to pay (ct__stream_stores).
 * ct__stream_rows: whether rows of n floats at y (total elements) can
 * stream 8 at a time (y 32-byte aligned, n % 8 == 0). */
#define CT_STREAM_MIN ((int64_t)4 << 20)
int ct__stream_stores(void); /* cpu_caps.h: whether this CPU gains by them */
static inline int ct__stream_rows(const float *y, int64_t total, int64_t n) {
    return total >= CT_STREAM_MIN && n % 8 == 0 && ((uintptr_t)y & 31) == 0 &&
           ct__stream_stores();
}
/* for (int64_t VAR = 0; VAR < N; VAR++) { BODY } on the OpenMP threads
 * when COND.  Split statically, except over inputs of TOTAL >=
 * CT_STREAM_MIN elements, which no cache keeps for the next op anyway: there
 * the iterations go out in ~64 chunks, first come first served.  On this
 * project's shared VM a thread woken from idle (every op after a pause of a
 * few ms) often starts 0.1..1.5 ms late; with a static split its half of a
 * 2..4 ms row loop then finished that much later, while here the other
 * thread takes over chunks meanwhile (sum over dim 1 of [4096, 4096] at 2
 * threads, three suite runs each: 1.16, 1.19, 0.92 of torch's time static,
 * 0.87, 0.92, 0.90 dynamic).  Each iteration's result does not depend on
 * the thread that runs it, so neither do the bits. */
#define CT_PAR_ROWS(VAR, N, TOTAL, COND, ...)                                            \
    do {                                                                                 \
        const int64_t ct_par_n_ = (N), ct_par_ch_ = ct_par_n_ / 64 > 1 ? ct_par_n_ / 64 : 1; \
        const int ct_par_on_ = (COND) ? 1 : 0;                                           \
        if ((int64_t)(TOTAL) >= CT_STREAM_MIN) {                                          \
            _Pragma("omp parallel for if (ct_par_on_) schedule(dynamic, ct_par_ch_)")    \
            for (int64_t VAR = 0; VAR < ct_par_n_; VAR++) { __VA_ARGS__ }                \
        } else {                                                                         \
            _Pragma("omp parallel for if (ct_par_on_) schedule(static)")                 \
            for (int64_t VAR = 0; VAR < ct_par_n_; VAR++) { __VA_ARGS__ }                \
        }                                                                                \
    } while (0)

#ifdef CT_VMATH_AVX2
/* 8 floats to p (32-byte aligned when nt): streamed when nt; the writer
 * issues _mm_sfence() after its last streamed store */
static inline void ct__v8_put(float *p, __m256 v, int nt) {
    if (nt) _mm256_stream_ps(p, v);
    else _mm256_storeu_ps(p, v);
}
#endif

#endif
