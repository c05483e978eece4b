/* reduce.c (cpu) -- kernels of the reduce family: reductions over a dim set,
 * scans along a dim, softmax.  Sorting kernels live in sort.c.
 *
 * Reductions: in[0] is the op's input; the registered kernels (red_kernel)
 * hand the loops a view of it with the kept dims first and the reduced dims
 * last (a->p.reduce.reduced[d]); out[k] are contiguous with numel == outer;
 * a->p.reduce.inner is the number of reduced elements.  The loops make the
 * view contiguous (one copy when it is not), so every output element
 * reduces one contiguous row.
 *
 * Scans/softmax: in[0] is the input (any strides), out[0] is contiguous of
 * the same shape; a->p.scan.pre, n, post (the scanned dim has n elements
 * and stride post in the contiguous layout). */
#include <math.h>

#include "../../ops/iter.h"
#include "../../ops/reduce_impl.h"
#include "ew_vec.h"
#include "vmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* kernel dtype for an input: halves are read as f32 */
/* Compiled twice (runtime CPU dispatch, src/backend/cpu/cpu_caps.h): here
 * for baseline x86-64 and by reduce_avx2.c, which includes this file with
 * CT_ISA_NAME adding an _avx2 suffix, for AVX2 + FMA; src/ops/dispatch.c
 * registers the set the CPU can run. */
#ifndef CT_ISA_NAME
#define CT_ISA_NAME(f) f
#endif

static ct_dtype kdt(ct_dtype dt) { return (dt == CT_F16 || dt == CT_BF16) ? CT_F32 : dt; }

static ct_status contig_in(ct_tensor *t, ct_dtype dt, ct_tensor **c) {
    *c = ct__contig_as(t, dt);
    if (!*c) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    return CT_OK;
}

#define DT_LIST(X)                                                                 \
    X(CT_BOOL, uint8_t, b, 0) X(CT_U8, uint8_t, u8, 0) X(CT_I8, int8_t, i8, 0)      \
    X(CT_I16, int16_t, i16, 0) X(CT_I32, int32_t, i32, 0) X(CT_I64, int64_t, i64, 0) \
    X(CT_F32, float, f32, 1) X(CT_F64, double, f64, 1)

/* ======================================================================
 * Column plan: a reduction whose kept dims end in the contiguous axis
 * (sum over dim 0 of a row-major matrix, mean over the middle dim of
 * [B, T, C], ...) runs without a copy: out[p, q] = reduce_r x[p*sp + r*sr + q]
 * with q the contiguous axis, vectorized across q, accumulating row after
 * row, OpenMP over (p, column chunk).  Every output element sums its rows in
 * the order r = 0, 1, ..., so the result does not depend on the thread count.
 * ====================================================================== */
typedef struct { int64_t pre, sp, R, sr, post; } col_plan;

/* coalesces dims [d0, d1) of t (size-1 dims dropped); returns the count */
static int coalesce(const ct_tensor *t, int d0, int d1, int64_t *sz, int64_t *st) {
    int n = 0;
    for (int d = d0; d < d1; d++) {
        if (t->sizes[d] == 1) continue;
        if (n > 0 && st[n - 1] == t->strides[d] * t->sizes[d]) {
            sz[n - 1] *= t->sizes[d];
            st[n - 1] = t->strides[d];
        } else {
            sz[n] = t->sizes[d];
            st[n] = t->strides[d];
            n++;
        }
    }
    return n;
}

static int make_col_plan(const ct_tensor *v, const ct_args *a, col_plan *p) {
    int nr = 0;
    for (int d = 0; d < v->ndim; d++) nr += a->p.reduce.reduced[d] != 0;
    int nk = v->ndim - nr;
    int64_t ksz[CT_MAX_DIMS], kst[CT_MAX_DIMS], rsz[CT_MAX_DIMS], rst[CT_MAX_DIMS];
    int nkc = coalesce(v, 0, nk, ksz, kst), nrc = coalesce(v, nk, v->ndim, rsz, rst);
    if (nrc != 1 || nkc < 1 || nkc > 2 || kst[nkc - 1] != 1 || ksz[nkc - 1] < 8) return 0;
    p->post = ksz[nkc - 1];
    p->pre = nkc == 2 ? ksz[0] : 1;
    p->sp = nkc == 2 ? kst[0] : 0;
    p->R = rsz[0];
    p->sr = rst[0];
    return p->R > 1 && p->R < INT32_MAX;
}

#define COLW 4096 /* most columns per task */

/* columns per task: the columns split evenly over the threads (the order
 * of every element's sum does not depend on it), at most COLW */
static int64_t col_width(const col_plan *p) {
    int nth = ct__num_threads();
    int64_t w = (p->post + nth - 1) / nth;
    w = (w + 7) / 8 * 8;
    if (w < 64) w = 64;
    return w > COLW ? COLW : w;
}

/* f32: rows are added four at a time in float ((r0 + r1) + (r2 + r3)), the
 * four-row sums accumulated in double */
static void col_sum_f32(const float *x, const col_plan *p, float *o, int mean) {
    int64_t cw = col_width(p);
    int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb;
#pragma omp parallel for if (tasks > 1 && p->pre * p->R * p->post > CT_PAR_GRAIN) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t pi = t / nb, c0 = (t % nb) * cw;
        int64_t w = p->post - c0 < cw ? p->post - c0 : cw;
        double acc[COLW];
        for (int64_t j = 0; j < w; j++) acc[j] = 0;
        const float *base = x + pi * p->sp + c0;
        int64_t r = 0, sr = p->sr;
        for (; r + 4 <= p->R; r += 4) {
            const float *r0 = base + r * sr, *r1 = r0 + sr, *r2 = r1 + sr, *r3 = r2 + sr;
            int64_t j = 0;
#ifdef CT_VMATH_AVX2
            for (; j + 8 <= w; j += 8) {
                __m256 v = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(r0 + j), _mm256_loadu_ps(r1 + j)),
                                         _mm256_add_ps(_mm256_loadu_ps(r2 + j), _mm256_loadu_ps(r3 + j)));
                _mm256_storeu_pd(acc + j, _mm256_add_pd(_mm256_loadu_pd(acc + j),
                                                        _mm256_cvtps_pd(_mm256_castps256_ps128(v))));
                _mm256_storeu_pd(acc + j + 4, _mm256_add_pd(_mm256_loadu_pd(acc + j + 4),
                                                            _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))));
            }
#endif
            for (; j < w; j++) acc[j] += (double)((r0[j] + r1[j]) + (r2[j] + r3[j]));
        }
        for (; r < p->R; r++) {
            const float *row = base + r * sr;
            for (int64_t j = 0; j < w; j++) acc[j] += (double)row[j];
        }
        float *orow = o + pi * p->post + c0;
        for (int64_t j = 0; j < w; j++) orow[j] = (float)(mean ? acc[j] / (double)p->R : acc[j]);
    }
}

static void col_sum_f64(const double *x, const col_plan *p, double *o, int mean) {
    int64_t cw = col_width(p) < COLW / 2 ? col_width(p) : COLW / 2;
    int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb;
#pragma omp parallel for if (tasks > 1 && p->pre * p->R * p->post > CT_PAR_GRAIN) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t pi = t / nb, c0 = (t % nb) * cw;
        int64_t w = p->post - c0 < cw ? p->post - c0 : cw;
        double acc[COLW / 2];
        for (int64_t j = 0; j < w; j++) acc[j] = 0;
        const double *base = x + pi * p->sp + c0;
        for (int64_t r = 0; r < p->R; r++) {
            const double *row = base + r * p->sr;
            for (int64_t j = 0; j < w; j++) acc[j] += row[j];
        }
        double *orow = o + pi * p->post + c0;
        for (int64_t j = 0; j < w; j++) orow[j] = mean ? acc[j] / (double)p->R : acc[j];
    }
}

/* f16/bf16 columns (sum over dim 0 of a half gradient, a bias's): four
 * rows at a time converted into L1 buffers and added as col_sum_f32 adds
 * f32 rows (the same arithmetic on the converted values), the four-row
 * sums accumulated in double, each output rounded once (o of dtype odt:
 * the half dtype or f32) -- no transposed f32 copy of the tensor */
#define COLH 1024 /* most columns per task */
static void col_sum_half(ct_dtype dt, const uint16_t *x, const col_plan *p, char *o, ct_dtype odt, int mean) {
    const ct_ew_vtab *vt = ct__ew_vtab();
    void (*ld)(float *, const uint16_t *, int64_t) = dt == CT_BF16 ? vt->bf16_to_f32 : vt->f16_to_f32;
    int64_t cw = col_width(p) < COLH ? col_width(p) : COLH;
    int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb;
    size_t oes = ct_dtype_size(odt);
#pragma omp parallel for if (tasks > 1 && p->pre * p->R * p->post > CT_PAR_GRAIN) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t pi = t / nb, c0 = (t % nb) * cw;
        int64_t w = p->post - c0 < cw ? p->post - c0 : cw;
        double acc[COLH];
        _Alignas(32) float b[4][COLH];
        for (int64_t j = 0; j < w; j++) acc[j] = 0;
        const uint16_t *base = x + pi * p->sp + c0;
        int64_t r = 0, sr = p->sr;
        for (; r + 4 <= p->R; r += 4) {
            for (int k = 0; k < 4; k++) ld(b[k], base + (r + k) * sr, w);
            for (int64_t j = 0; j < w; j++) acc[j] += (double)((b[0][j] + b[1][j]) + (b[2][j] + b[3][j]));
        }
        for (; r < p->R; r++) {
            ld(b[0], base + r * sr, w);
            for (int64_t j = 0; j < w; j++) acc[j] += (double)b[0][j];
        }
        char *orow = o + (pi * p->post + c0) * (int64_t)oes;
        for (int64_t j = 0; j < w; j++) {
            float v = (float)(mean ? acc[j] / (double)p->R : acc[j]);
            if (odt == CT_F32) ((float *)(void *)orow)[j] = v;
            else if (odt == CT_BF16) ((uint16_t *)(void *)orow)[j] = ct__f32_to_bf16(v);
            else ((uint16_t *)(void *)orow)[j] = ct__f32_to_f16(v);
        }
    }
}

/* prod / nansum / nanmean of f32 / f64 columns, in double like accrow */
#define COL_ACC(SFX, T)                                                            \
    static void colacc_##SFX(const T *x, const col_plan *p, ct_op op, T *o) {      \
        int64_t cw = col_width(p) < 1024 ? col_width(p) : 1024;                    \
        int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb;                 \
        _Pragma("omp parallel for if (tasks > 1 && p->pre * p->R * p->post > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t t = 0; t < tasks; t++) {                                      \
            int64_t pi = t / nb, c0 = (t % nb) * cw;                               \
            int64_t w = p->post - c0 < cw ? p->post - c0 : cw;                     \
            double acc[1024];                                                      \
            int64_t cnt[1024];                                                     \
            const T *base = x + pi * p->sp + c0;                                   \
            for (int64_t j = 0; j < w; j++) { acc[j] = op == CT_OP_prod ? 1.0 : 0.0; cnt[j] = 0; } \
            for (int64_t r = 0; r < p->R; r++) {                                   \
                const T *row = base + r * p->sr;                                   \
                if (op == CT_OP_prod) for (int64_t j = 0; j < w; j++) acc[j] *= (double)row[j]; \
                else                                                               \
                    for (int64_t j = 0; j < w; j++) {                              \
                        double v = (double)row[j];                                 \
                        if (v == v) { acc[j] += v; cnt[j]++; }                     \
                    }                                                              \
            }                                                                      \
            T *orow = o + pi * p->post + c0;                                       \
            for (int64_t j = 0; j < w; j++)                                        \
                orow[j] = (T)(op == CT_OP_nanmean ? acc[j] / (double)cnt[j] : acc[j]); \
        }                                                                          \
    }
COL_ACC(f32, float)
COL_ACC(f64, double)

/* max/min with first-index ties and sticky first NaN, like mmrow below */
#define COL_MM(DT, T, SFX, ISF)                                                    \
    static void colmm_##SFX(const T *x, const col_plan *p, int ismax, T *vals, int64_t *idxs) { \
        int64_t cw = col_width(p) < 1024 ? col_width(p) : 1024;                    \
        int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb;                 \
        _Pragma("omp parallel for if (tasks > 1 && p->pre * p->R * p->post > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t t = 0; t < tasks; t++) {                                      \
            int64_t pi = t / nb, c0 = (t % nb) * cw;                               \
            int64_t w = p->post - c0 < cw ? p->post - c0 : cw;                     \
            T best[1024];                                                          \
            int32_t bi[1024];                                                      \
            const T *base = x + pi * p->sp + c0;                                   \
            for (int64_t j = 0; j < w; j++) { best[j] = base[j]; bi[j] = 0; }      \
            for (int64_t r = 1; r < p->R; r++) {                                   \
                const T *row = base + r * p->sr;                                   \
                int64_t j = 0;                                                     \
                COL_MM_VEC_##SFX                                                   \
                for (; j < w; j++) {                                               \
                    T v = row[j], b = best[j];                                     \
                    int take = ISF ? ((v != v && b == b) || (ismax ? v > b : v < b)) \
                                   : (ismax ? v > b : v < b);                      \
                    if (take) { best[j] = v; bi[j] = (int32_t)r; }                 \
                }                                                                  \
            }                                                                      \
            int64_t ob = pi * p->post + c0;                                        \
            for (int64_t j = 0; j < w; j++) {                                      \
                if (vals) vals[ob + j] = best[j];                                  \
                if (idxs) idxs[ob + j] = bi[j];                                    \
            }                                                                      \
        }                                                                          \
    }
#ifdef CT_VMATH_AVX2
#define COL_MM_VEC_f32                                                             \
    {                                                                              \
        __m256i vr = _mm256_set1_epi32((int32_t)r);                                \
        for (; j + 8 <= w; j += 8) {                                               \
            __m256 v = _mm256_loadu_ps(row + j), b = _mm256_loadu_ps(best + j);    \
            __m256 m = ismax ? _mm256_cmp_ps(v, b, _CMP_GT_OQ) : _mm256_cmp_ps(v, b, _CMP_LT_OQ); \
            m = _mm256_or_ps(m, _mm256_and_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q),  \
                                              _mm256_cmp_ps(b, b, _CMP_ORD_Q)));   \
            _mm256_storeu_ps(best + j, _mm256_blendv_ps(b, v, m));                \
            __m256i bv = _mm256_loadu_si256((const __m256i *)(bi + j));            \
            bv = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(bv),    \
                                                      _mm256_castsi256_ps(vr), m)); \
            _mm256_storeu_si256((__m256i *)(bi + j), bv);                          \
        }                                                                          \
    }
#else
#define COL_MM_VEC_f32
#endif
#define COL_MM_VEC_b
#define COL_MM_VEC_u8
#define COL_MM_VEC_i8
#define COL_MM_VEC_i16
#define COL_MM_VEC_i32
#define COL_MM_VEC_i64
#define COL_MM_VEC_f64
DT_LIST(COL_MM)

/* ======================================================================
 * sum / nansum / mean / nanmean / prod: accumulate in double (floats) or
 * int64 (integers, wrapping like torch).
 * ====================================================================== */
typedef struct { double d; uint64_t u; int64_t c; } acc_t;

/* f32 row sum, a cascade: blocks of 128 floats are summed in 4 x 8 float
 * lanes (4 values a lane), each block's sum added to double lanes; the
 * rest 16 floats a step straight into doubles; combined in a fixed order */
#ifdef CT_VMATH_AVX2
static inline void rs_block128(const float *x, __m256d a[4]) {
    __m256 f0 = _mm256_loadu_ps(x), f1 = _mm256_loadu_ps(x + 8);
    __m256 f2 = _mm256_loadu_ps(x + 16), f3 = _mm256_loadu_ps(x + 24);
    for (int k = 32; k < 128; k += 32) {
        f0 = _mm256_add_ps(f0, _mm256_loadu_ps(x + k));
        f1 = _mm256_add_ps(f1, _mm256_loadu_ps(x + k + 8));
        f2 = _mm256_add_ps(f2, _mm256_loadu_ps(x + k + 16));
        f3 = _mm256_add_ps(f3, _mm256_loadu_ps(x + k + 24));
    }
    __m256 f01 = _mm256_add_ps(f0, f1), f23 = _mm256_add_ps(f2, f3);
    a[0] = _mm256_add_pd(a[0], _mm256_cvtps_pd(_mm256_castps256_ps128(f01)));
    a[1] = _mm256_add_pd(a[1], _mm256_cvtps_pd(_mm256_extractf128_ps(f01, 1)));
    a[2] = _mm256_add_pd(a[2], _mm256_cvtps_pd(_mm256_castps256_ps128(f23)));
    a[3] = _mm256_add_pd(a[3], _mm256_cvtps_pd(_mm256_extractf128_ps(f23, 1)));
}
#endif
/* the part of a row past its whole 128-float blocks (from i), then the
 * lanes' fixed-order combination */
static double rowsum_f32_tail(const float *x, int64_t i, int64_t n, void *lanes) {
    double s = 0;
#ifdef CT_VMATH_AVX2
    __m256d *a = lanes;
    for (; i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        a[0] = _mm256_add_pd(a[0], _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
        a[1] = _mm256_add_pd(a[1], _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
        a[2] = _mm256_add_pd(a[2], _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
        a[3] = _mm256_add_pd(a[3], _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
    }
    __m256d t4 = _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3]));
    double t[4];
    _mm256_storeu_pd(t, t4);
    s = (t[0] + t[1]) + (t[2] + t[3]);
#else
    (void)lanes;
#endif
    for (; i < n; i++) s += (double)x[i];
    return s;
}
static double rowsum_f32(const float *x, int64_t n) {
    int64_t i = 0;
#ifdef CT_VMATH_AVX2
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
    /* one sequential stream, read at the hardware prefetchers' pace.  Rows
     * taken two at a time (two streams) had helped a latency-bound Zen 3
     * core once (6.3 -> 5.1 ms, [4096, 4096] on one thread) and ran 1.6x
     * slower on Zen 5 (2.30 vs 1.43 ms); a software prefetch 4 KiB ahead,
     * kept after that, measured slower than none on Zen 3 (sum over dim 1
     * of [4096, 4096], bench_suite, the two alternated 4-5 times, medians):
     * 4.31..6.30 vs 3.41..3.57 ms on one thread, 2.63..3.17 vs 2.12..2.82
     * at two (torch 2.35). */
    for (; i + 128 <= n; i += 128) rs_block128(x + i, a);
    return rowsum_f32_tail(x, i, n, a);
#else
    return rowsum_f32_tail(x, i, n, NULL);
#endif
}
#define ACC_ROW(DT, T, SFX, ISF)                                                   \
    static acc_t accrow_##SFX(const T *x, int64_t n, ct_op op) {                   \
        acc_t r = {0, 0, 0};                                                       \
        if (op == CT_OP_prod) {                                                    \
            if (ISF) { double p = 1; for (int64_t i = 0; i < n; i++) p *= (double)x[i]; r.d = p; } \
            else { uint64_t p = 1; for (int64_t i = 0; i < n; i++) p *= (uint64_t)(int64_t)x[i]; r.u = p; } \
            return r;                                                              \
        }                                                                          \
        if (ISF && (op == CT_OP_nansum || op == CT_OP_nanmean)) {                  \
            double s = 0; int64_t c = 0;                                           \
            for (int64_t i = 0; i < n; i++) {                                      \
                double v = (double)x[i];                                           \
                if (v == v) { s += v; c++; }                                       \
            }                                                                      \
            r.d = s; r.c = c;                                                      \
            return r;                                                              \
        }                                                                          \
        if (DT == CT_F32) { r.d = rowsum_f32((const float *)(const void *)x, n); r.c = n; return r; } \
        if (ISF) {                                                                 \
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                 \
            int64_t i = 0;                                                         \
            for (; i + 4 <= n; i += 4) {                                           \
                s0 += (double)x[i]; s1 += (double)x[i + 1];                        \
                s2 += (double)x[i + 2]; s3 += (double)x[i + 3];                    \
            }                                                                      \
            for (; i < n; i++) s0 += (double)x[i];                                 \
            r.d = (s0 + s1) + (s2 + s3);                                           \
        } else {                                                                   \
            uint64_t s = 0;                                                        \
            for (int64_t i = 0; i < n; i++) s += (uint64_t)(int64_t)x[i];          \
            r.u = s;                                                               \
        }                                                                          \
        r.c = n;                                                                   \
        return r;                                                                  \
    }
DT_LIST(ACC_ROW)

static void acc_combine(acc_t *a, acc_t b, ct_op op);

/* f16/bf16 rows: converted HALF_BLK at a time into an f32 buffer and
 * accumulated by the f32 row loop, block results combined in double (no
 * f32 copy of the tensor) */
#define HALF_BLK 512
static acc_t accrow_half(ct_dtype dt, const uint16_t *x, int64_t n, ct_op op) {
    const ct_ew_vtab *vt = ct__ew_vtab();
    void (*ld)(float *, const uint16_t *, int64_t) = dt == CT_BF16 ? vt->bf16_to_f32 : vt->f16_to_f32;
    float buf[HALF_BLK];
    acc_t r = {op == CT_OP_prod ? 1.0 : 0.0, op == CT_OP_prod ? 1u : 0u, 0};
    for (int64_t i = 0; i < n; i += HALF_BLK) {
        int64_t m = n - i < HALF_BLK ? n - i : HALF_BLK;
        ld(buf, x + i, m);
        acc_combine(&r, accrow_f32(buf, m, op), op);
    }
    return r;
}

static acc_t accrow(ct_dtype dt, const void *x, int64_t n, ct_op op) {
    switch (dt) {
    case CT_F16: case CT_BF16: return accrow_half(dt, (const uint16_t *)x, n, op);
#define CASE(DT, T, SFX, ISF) case DT: return accrow_##SFX((const T *)x, n, op);
        DT_LIST(CASE)
#undef CASE
    default: { acc_t r = {0, 0, 0}; return r; }
    }
}

static void acc_combine(acc_t *a, acc_t b, ct_op op) {
    if (op == CT_OP_prod) { a->d *= b.d; a->u *= b.u; }
    else { a->d += b.d; a->u += b.u; a->c += b.c; }
}

static ct_status k_accum(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    ct_tensor *o = out[0];
    int64_t outer = ct_numel(o), inner = a->p.reduce.inner;
    if (outer == 0) return CT_OK;
    col_plan cp;
    if ((a->op == CT_OP_sum || a->op == CT_OP_mean) && o->dtype == in[0]->dtype &&
        (o->dtype == CT_F32 || o->dtype == CT_F64) && make_col_plan(in[0], a, &cp)) {
        if (o->dtype == CT_F32)
            col_sum_f32((const float *)ct__ptr(in[0]), &cp, ct__ptr(o), a->op == CT_OP_mean);
        else
            col_sum_f64((const double *)ct__ptr(in[0]), &cp, ct__ptr(o), a->op == CT_OP_mean);
        return CT_OK;
    }
    if ((a->op == CT_OP_sum || a->op == CT_OP_mean) &&
        (in[0]->dtype == CT_F16 || in[0]->dtype == CT_BF16) &&
        (o->dtype == in[0]->dtype || o->dtype == CT_F32) && make_col_plan(in[0], a, &cp)) {
        col_sum_half(in[0]->dtype, (const uint16_t *)ct__ptr(in[0]), &cp, ct__ptr(o), o->dtype,
                     a->op == CT_OP_mean);
        return CT_OK;
    }
    if ((a->op == CT_OP_prod || a->op == CT_OP_nansum || a->op == CT_OP_nanmean) &&
        o->dtype == in[0]->dtype && (o->dtype == CT_F32 || o->dtype == CT_F64) &&
        make_col_plan(in[0], a, &cp)) {
        if (o->dtype == CT_F32) colacc_f32((const float *)ct__ptr(in[0]), &cp, a->op, ct__ptr(o));
        else colacc_f64((const double *)ct__ptr(in[0]), &cp, a->op, ct__ptr(o));
        return CT_OK;
    }
    ct_tensor *c;
    ct_dtype dt = in[0]->dtype; /* f16/bf16 stay (accrow_half) */
    ct_status st = contig_in(in[0], dt, &c);
    if (st) return st;
    const char *x = ct__ptr(c);
    size_t es = ct_dtype_size(dt), oes = ct_dtype_size(o->dtype);
    char *op_ = ct__ptr(o);
    int isf = ct_dtype_is_floating(dt);
    int ofl = ct_dtype_is_floating(o->dtype) || ct_dtype_is_complex(o->dtype);
    ct_op op = a->op;
    int nth = ct__num_threads();
    /* deterministic mode: the chunks depend on inner only, never on the
     * thread count, and are combined in a fixed order below */
    int det = ct_are_deterministic_algorithms_enabled();
    int64_t nchunk = 1;
    if (outer == 1 && inner >= 2 * CT_GRAIN && (nth > 1 || det)) {
        nchunk = inner / CT_GRAIN;
        if (!det && nchunk > nth) nchunk = nth;
    }
    if (nchunk > 1) {
        acc_t part[256];
        if (nchunk > 256) nchunk = 256;
        int nt = nchunk < nth ? (int)nchunk : nth;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t k = 0; k < nchunk; k++) {
            int64_t b = inner * k / nchunk, e = inner * (k + 1) / nchunk;
            part[k] = accrow(dt, x + b * (int64_t)es, e - b, op);
        }
        acc_t r = part[0];
        for (int64_t k = 1; k < nchunk; k++) acc_combine(&r, part[k], op);
        double v = isf ? r.d : (double)(int64_t)r.u;
        if (op == CT_OP_mean) v = v / (double)inner;
        if (op == CT_OP_nanmean) v = v / (double)r.c;
        if (ofl || isf) ct__store_f64(op_, o->dtype, v);
        else ct__store_i64(op_, o->dtype, (int64_t)r.u);
    } else {
        CT_PAR_ROWS(j, outer, outer * inner, outer > 1 && outer * inner > CT_PAR_GRAIN,
            acc_t r = accrow(dt, x + j * inner * (int64_t)es, inner, op);
            double v = isf ? r.d : (double)(int64_t)r.u;
            if (op == CT_OP_mean) v = v / (double)inner;
            if (op == CT_OP_nanmean) v = v / (double)r.c;
            if (ofl || isf) ct__store_f64(op_ + j * (int64_t)oes, o->dtype, v);
            else ct__store_i64(op_ + j * (int64_t)oes, o->dtype, (int64_t)r.u););
    }
    ct_release(c);
    return CT_OK;
}

/* ======================================================================
 * amax / amin / max_dim / min_dim / argmax / argmin: NaN propagates (first
 * NaN wins), ties keep the first index.
 * Outputs: amax/amin: out[0] values; max_dim/min_dim: values, indices;
 * argmax/argmin: out[0] indices.
 * ====================================================================== */
/* f32 rows for max/min/argmax/argmin at the AVX2 level: 16 lanes (two
 * vectors) each keep their best value and its first index (a strict
 * comparison, so a lane keeps its earliest tie), merged at the end by value
 * then smallest index -- the scalar loop's answer: the first index of the
 * extreme value.  A block holding a NaN hands over to the scalar scan for
 * the first NaN (which wins).  min runs as max of the sign-flipped values
 * (same order, same ties; -0 and +0 stay tied).  0 when not applicable
 * (baseline build, short or > 2^31 rows). */
static int mmrow_f32_vec(const float *x, int64_t n, int ismax, float *val, int64_t *idx) {
#ifdef CT_VMATH_AVX2
    if (n < 16 || n > INT32_MAX - 16) return 0;
    const __m256 flip = _mm256_set1_ps(ismax ? 0.0f : -0.0f);
    __m256 b0 = _mm256_xor_ps(_mm256_loadu_ps(x), flip), b1 = _mm256_xor_ps(_mm256_loadu_ps(x + 8), flip);
    __m256i i0 = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), i1 = _mm256_add_epi32(i0, _mm256_set1_epi32(8));
    __m256i c0 = i0, c1 = i1;
    const __m256i step = _mm256_set1_epi32(16);
    int64_t i = 0, nan_at = -1;
    if (_mm256_movemask_ps(_mm256_cmp_ps(b0, b1, _CMP_UNORD_Q))) nan_at = 0;
    for (i = 16; nan_at < 0 && i + 16 <= n; i += 16) {
        __m256 v0 = _mm256_xor_ps(_mm256_loadu_ps(x + i), flip);
        __m256 v1 = _mm256_xor_ps(_mm256_loadu_ps(x + i + 8), flip);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q))) { nan_at = i; break; }
        c0 = _mm256_add_epi32(c0, step);
        c1 = _mm256_add_epi32(c1, step);
        __m256 m0 = _mm256_cmp_ps(v0, b0, _CMP_GT_OQ), m1 = _mm256_cmp_ps(v1, b1, _CMP_GT_OQ);
        b0 = _mm256_blendv_ps(b0, v0, m0);
        b1 = _mm256_blendv_ps(b1, v1, m1);
        i0 = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(i0), _mm256_castsi256_ps(c0), m0));
        i1 = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(i1), _mm256_castsi256_ps(c1), m1));
    }
    if (nan_at >= 0) { /* the first NaN from that block on (none before it) */
        for (int64_t k = nan_at; k < n; k++)
            if (x[k] != x[k]) { *val = x[k]; *idx = k; return 1; }
    }
    float bv[16];
    int32_t bi[16];
    _mm256_storeu_ps(bv, b0);
    _mm256_storeu_ps(bv + 8, b1);
    _mm256_storeu_si256((__m256i *)bi, i0);
    _mm256_storeu_si256((__m256i *)(bi + 8), i1);
    float best = bv[0];
    int64_t bx = bi[0];
    for (int l = 1; l < 16; l++)
        if (bv[l] > best || (bv[l] == best && bi[l] < bx)) { best = bv[l]; bx = bi[l]; }
    for (; i < n; i++) { /* the tail: later indices, so strictly better only */
        float v = x[i];
        if (v != v) { *val = v; *idx = i; return 1; }
        if (ismax ? v > x[bx] : v < x[bx]) bx = i;
    }
    *val = x[bx];
    *idx = bx;
    return 1;
#else
    (void)x; (void)n; (void)ismax; (void)val; (void)idx;
    return 0;
#endif
}

#define MM_ROW(DT, T, SFX, ISF)                                                    \
    static void mmrow_##SFX(const T *x, int64_t n, int ismax, T *val, int64_t *idx) { \
        if (DT == CT_F32 && mmrow_f32_vec((const float *)(const void *)x, n, ismax, \
                                          (float *)(void *)val, idx))              \
            return;                                                                \
        T best = x[0];                                                             \
        int64_t bi = 0;                                                            \
        if (ISF && best != best) { *val = best; *idx = 0; return; }                \
        for (int64_t i = 1; i < n; i++) {                                          \
            T v = x[i];                                                            \
            if (ISF && v != v) { best = v; bi = i; break; }                        \
            if (ismax ? v > best : v < best) { best = v; bi = i; }                 \
        }                                                                          \
        *val = best; *idx = bi;                                                    \
    }                                                                              \
    static void mmrun_##SFX(const T *x, int64_t outer, int64_t inner, int ismax, T *vals, \
                            int64_t *idxs) {                                       \
        int nth = ct__num_threads();                                               \
        if (outer == 1 && inner >= 2 * CT_GRAIN && nth > 1) {                      \
            int64_t nch = inner / CT_GRAIN;                                        \
            if (nch > nth) nch = nth;                                              \
            if (nch > 256) nch = 256;                                              \
            T pv[256]; int64_t pi[256];                                            \
            _Pragma("omp parallel for num_threads((int)nch) schedule(static)")     \
            for (int64_t k = 0; k < nch; k++) {                                    \
                int64_t b = inner * k / nch, e = inner * (k + 1) / nch;            \
                mmrow_##SFX(x + b, e - b, ismax, &pv[k], &pi[k]);                  \
                pi[k] += b;                                                        \
            }                                                                      \
            T best = pv[0]; int64_t bi = pi[0];                                    \
            for (int64_t k = 1; k < nch && !(ISF && best != best); k++) {          \
                T v = pv[k];                                                       \
                if ((ISF && v != v) || (ismax ? v > best : v < best)) { best = v; bi = pi[k]; } \
            }                                                                      \
            if (vals) vals[0] = best;                                              \
            if (idxs) idxs[0] = bi;                                                \
            return;                                                                \
        }                                                                          \
        _Pragma("omp parallel for if (outer > 1 && outer * inner > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t j = 0; j < outer; j++) {                                      \
            T v; int64_t id;                                                       \
            mmrow_##SFX(x + j * inner, inner, ismax, &v, &id);                     \
            if (vals) vals[j] = v;                                                 \
            if (idxs) idxs[j] = id;                                                \
        }                                                                          \
    }
DT_LIST(MM_ROW)

static ct_status k_minmax(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    int64_t inner = a->p.reduce.inner;
    ct_op op = a->op;
    ct_tensor *vo = NULL, *io = NULL;
    if (op == CT_OP_argmax || op == CT_OP_argmin) io = out[0];
    else if (op == CT_OP_max_dim || op == CT_OP_min_dim) { vo = out[0]; io = nout > 1 ? out[1] : NULL; }
    else vo = out[0];
    int64_t outer = ct_numel(out[0]);
    if (outer == 0) return CT_OK;
    if (inner == 0)
        return ct__error_status(CT_ERR_INDEX, "%s: cannot reduce over a zero-size dimension",
                                ct__op_info[op].name);
    ct_dtype dt = in[0]->dtype;
    col_plan cp;
    if (dt == kdt(dt) && (!vo || vo->dtype == dt) && make_col_plan(in[0], a, &cp)) {
        int ismax = op == CT_OP_amax || op == CT_OP_max_dim || op == CT_OP_argmax;
        void *vp = vo ? ct__ptr(vo) : NULL;
        int64_t *ip = io ? (int64_t *)ct__ptr(io) : NULL;
        switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: colmm_##SFX((const T *)ct__ptr(in[0]), &cp, ismax, (T *)vp, ip); return CT_OK;
            DT_LIST(CASE)
#undef CASE
        default: break;
        }
    }
    ct_tensor *c, *tmpv = NULL;
    ct_status st = contig_in(in[0], kdt(dt), &c);
    if (st) return st;
    dt = kdt(dt);
    if (vo && vo->dtype != dt) { /* halves: compute in f32, convert */
        tmpv = ct__alloc(vo->sizes, vo->ndim, dt, CT_CPU);
        if (!tmpv) { ct_release(c); return CT_ERR_OOM; }
    }
    void *vp = tmpv ? ct__ptr(tmpv) : vo ? ct__ptr(vo) : NULL;
    int64_t *ip = io ? (int64_t *)ct__ptr(io) : NULL;
    int ismax = op == CT_OP_amax || op == CT_OP_max_dim || op == CT_OP_argmax;
    switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: mmrun_##SFX((const T *)ct__ptr(c), outer, inner, ismax, (T *)vp, ip); break;
        DT_LIST(CASE)
#undef CASE
    default:
        ct_release(c);
        ct_release(tmpv);
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for %s", ct__op_info[op].name,
                                ct_dtype_name(dt));
    }
    ct_release(c);
    if (tmpv) {
        ct_tensor *o1[1] = {vo}, *i1[1] = {tmpv};
        st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL);
        ct_release(tmpv);
        return st;
    }
    return CT_OK;
}

/* ======================================================================
 * all / any / count_nonzero
 * ====================================================================== */
#define LOGIC_ROW(DT, T, SFX, ISF)                                                 \
    static int64_t lgrow_##SFX(const T *x, int64_t n, ct_op op) {                  \
        if (op == CT_OP_all) { for (int64_t i = 0; i < n; i++) if (!(x[i] != 0)) return 0; return 1; } \
        if (op == CT_OP_any) { for (int64_t i = 0; i < n; i++) if (x[i] != 0) return 1; return 0; }   \
        int64_t c = 0;                                                             \
        for (int64_t i = 0; i < n; i++) c += (x[i] != 0);                          \
        return c;                                                                  \
    }
DT_LIST(LOGIC_ROW)

static ct_status k_logic(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    ct_tensor *o = out[0];
    int64_t outer = ct_numel(o), inner = a->p.reduce.inner;
    if (outer == 0) return CT_OK;
    ct_tensor *c;
    ct_dtype dt = kdt(in[0]->dtype);
    ct_status st = contig_in(in[0], dt, &c);
    if (st) return st;
    const char *x = ct__ptr(c);
    size_t es = ct_dtype_size(dt), oes = ct_dtype_size(o->dtype);
    char *p = ct__ptr(o);
    ct_op op = a->op;
#pragma omp parallel for if (outer > 1 && outer * inner > CT_PAR_GRAIN) schedule(static)
    for (int64_t j = 0; j < outer; j++) {
        const void *row = x + j * inner * (int64_t)es;
        int64_t r = 0;
        switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: r = lgrow_##SFX((const T *)row, inner, op); break;
            DT_LIST(CASE)
#undef CASE
        default: break;
        }
        ct__store_i64(p + j * (int64_t)oes, o->dtype, r);
    }
    ct_release(c);
    return CT_OK;
}

/* ======================================================================
 * Float-only reductions (input converted to f64 rows): logsumexp, var/std
 * (two-pass; a->p.reduce.correction, take_sqrt for std; out[1] = mean when
 * nout == 2), norm (a->p.reduce.p).
 * ====================================================================== */
static double row_logsumexp(const double *x, int64_t n) {
    if (n == 0) return -INFINITY;
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] != x[i]) return x[i];
        if (x[i] > m) m = x[i];
    }
    if (isinf(m)) m = 0;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
    return log(s) + m;
}

static double row_norm(const double *x, int64_t n, double p) {
    double s = 0;
    if (p == 0) {
        for (int64_t i = 0; i < n; i++) s += x[i] != 0;
        return s;
    }
    if (isinf(p)) {
        if (n == 0) return p > 0 ? 0 : INFINITY;
        double m = fabs(x[0]);
        for (int64_t i = 0; i < n; i++) {
            double v = fabs(x[i]);
            if (v != v) return v;
            if (p > 0 ? v > m : v < m) m = v;
        }
        return m;
    }
    if (p == 1) { for (int64_t i = 0; i < n; i++) s += fabs(x[i]); return s; }
    if (p == 2) { for (int64_t i = 0; i < n; i++) s += x[i] * x[i]; return sqrt(s); }
    for (int64_t i = 0; i < n; i++) s += pow(fabs(x[i]), p);
    return pow(s, 1.0 / p);
}

/* column plan for logsumexp / var / std / norm (f32, f64): double
 * accumulators per column, the same formulas as the row versions above */
#define COL_FR(SFX, T)                                                             \
    static void colfr_##SFX(const T *x, const col_plan *p, ct_op op, double pnorm,   \
                            double correction, int is_std, ct_tensor *o, ct_tensor *o2) { \
        int64_t cw = col_width(p) < 1024 ? col_width(p) : 1024;                    \
        int64_t nb = (p->post + cw - 1) / cw, tasks = p->pre * nb, R = p->R;       \
        size_t oes = ct_dtype_size(o->dtype);                                      \
        char *op_ = ct__ptr(o), *op2 = o2 ? ct__ptr(o2) : NULL;                    \
        _Pragma("omp parallel for if (tasks > 1 && p->pre * R * p->post > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t t = 0; t < tasks; t++) {                                      \
            int64_t pi = t / nb, c0 = (t % nb) * cw;                               \
            int64_t w = p->post - c0 < cw ? p->post - c0 : cw;                     \
            double a1[1024], a2[1024];                                             \
            const T *base = x + pi * p->sp + c0;                                   \
            for (int64_t j = 0; j < w; j++) { a1[j] = 0; a2[j] = 0; }              \
            if (op == CT_OP_logsumexp) {                                           \
                for (int64_t j = 0; j < w; j++) a1[j] = -INFINITY;                 \
                for (int64_t r = 0; r < R; r++)                                    \
                    for (int64_t j = 0; j < w; j++) {                              \
                        double v = (double)base[r * p->sr + j];                    \
                        if (v != v || a1[j] != a1[j]) a1[j] = NAN;                 \
                        else if (v > a1[j]) a1[j] = v;                             \
                    }                                                              \
                for (int64_t j = 0; j < w; j++) if (isinf(a1[j])) a1[j] = a1[j] != a1[j] ? a1[j] : 0.0; \
                for (int64_t r = 0; r < R; r++)                                    \
                    for (int64_t j = 0; j < w; j++) a2[j] += exp((double)base[r * p->sr + j] - a1[j]); \
                for (int64_t j = 0; j < w; j++) a2[j] = a1[j] != a1[j] ? a1[j] : log(a2[j]) + a1[j]; \
            } else if (op == CT_OP_norm) {                                         \
                double pp = pnorm;                                                 \
                int inf = isinf(pp);                                               \
                if (inf) for (int64_t j = 0; j < w; j++) a2[j] = fabs((double)base[j]); \
                for (int64_t r = 0; r < R; r++)                                    \
                    for (int64_t j = 0; j < w; j++) {                              \
                        double v = fabs((double)base[r * p->sr + j]);              \
                        if (inf) {                                                 \
                            if (a2[j] != a2[j]) continue;                          \
                            if (v != v || (pp > 0 ? v > a2[j] : v < a2[j])) a2[j] = v; \
                        } else if (pp == 0) a2[j] += v != 0;                       \
                        else if (pp == 1) a2[j] += v;                              \
                        else if (pp == 2) a2[j] += v * v;                          \
                        else a2[j] += pow(v, pp);                                  \
                    }                                                              \
                if (!inf && pp == 2) for (int64_t j = 0; j < w; j++) a2[j] = sqrt(a2[j]); \
                else if (!inf && pp != 0 && pp != 1)                               \
                    for (int64_t j = 0; j < w; j++) a2[j] = pow(a2[j], 1.0 / pp);  \
            } else { /* var / std: two passes */                                   \
                for (int64_t r = 0; r < R; r++)                                    \
                    for (int64_t j = 0; j < w; j++) a1[j] += (double)base[r * p->sr + j]; \
                for (int64_t j = 0; j < w; j++) a1[j] /= (double)R;                \
                for (int64_t r = 0; r < R; r++)                                    \
                    for (int64_t j = 0; j < w; j++) {                              \
                        double d = (double)base[r * p->sr + j] - a1[j];            \
                        a2[j] += d * d;                                            \
                    }                                                              \
                double div = (double)R - correction;                               \
                if (div < 0) div = 0;                                              \
                for (int64_t j = 0; j < w; j++) {                                  \
                    a2[j] /= div;                                                  \
                    if (is_std) a2[j] = sqrt(a2[j]);                               \
                }                                                                  \
            }                                                                      \
            int64_t ob = pi * p->post + c0;                                        \
            for (int64_t j = 0; j < w; j++) {                                      \
                ct__store_f64(op_ + (ob + j) * (int64_t)oes, o->dtype, a2[j]);     \
                if (op2) ct__store_f64(op2 + (ob + j) * (int64_t)ct_dtype_size(o2->dtype), o2->dtype, a1[j]); \
            }                                                                      \
        }                                                                          \
    }
COL_FR(f32, float)
COL_FR(f64, double)

static ct_status k_floatred(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    ct_tensor *o = out[0];
    int64_t outer = ct_numel(o), inner = a->p.reduce.inner;
    if (outer == 0) return CT_OK;
    col_plan cp;
    if ((in[0]->dtype == CT_F32 || in[0]->dtype == CT_F64) && make_col_plan(in[0], a, &cp)) {
        ct_tensor *o2 = nout > 1 && a->op != CT_OP_logsumexp && a->op != CT_OP_norm ? out[1] : NULL;
        if (in[0]->dtype == CT_F32)
            colfr_f32(ct__ptr(in[0]), &cp, a->op, a->p.reduce.p, a->p.reduce.correction,
                      a->p.reduce.take_sqrt, o, o2);
        else
            colfr_f64(ct__ptr(in[0]), &cp, a->op, a->p.reduce.p, a->p.reduce.correction,
                      a->p.reduce.take_sqrt, o, o2);
        return CT_OK;
    }
    /* rows are converted to double one at a time (a per-thread buffer), so
     * a contiguous f32 input is not copied whole into f64 */
    ct_tensor *c;
    ct_dtype idt = in[0]->dtype;
    int half = idt == CT_F16 || idt == CT_BF16; /* rows converted like f32 ones */
    ct_dtype cdt = idt == CT_F32 || half ? idt : CT_F64;
    ct_status st = contig_in(in[0], cdt, &c);
    if (st) return st;
    const char *xb = ct__ptr(c);
    size_t oes = ct_dtype_size(o->dtype);
    char *p = ct__ptr(o);
    char *p2 = nout > 1 ? ct__ptr(out[1]) : NULL;
    ct_op op = a->op;
    int oom = 0;
#pragma omp parallel if (outer > 1 && outer * inner > CT_PAR_GRAIN)
    {
        double *buf = cdt != CT_F64 ? malloc(sizeof(double) * (size_t)(inner > 0 ? inner : 1)) : NULL;
        if (cdt != CT_F64 && !buf) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(static)
        for (int64_t j = 0; j < outer; j++) {
            if (cdt != CT_F64 && !buf) continue;
            const double *row;
            if (cdt == CT_F32) {
                const float *fr = (const float *)xb + j * inner;
                for (int64_t i = 0; i < inner; i++) buf[i] = (double)fr[i];
                row = buf;
            } else if (half) {
                const uint16_t *hr = (const uint16_t *)xb + j * inner;
                if (cdt == CT_BF16) for (int64_t i = 0; i < inner; i++) buf[i] = (double)ct__bf16_to_f32(hr[i]);
                else for (int64_t i = 0; i < inner; i++) buf[i] = (double)ct__f16_to_f32(hr[i]);
                row = buf;
            } else {
                row = (const double *)xb + j * inner;
            }
            double r;
            if (op == CT_OP_logsumexp) r = row_logsumexp(row, inner);
            else if (op == CT_OP_norm) r = row_norm(row, inner, a->p.reduce.p);
            else { /* var / std */
                double m = 0;
                for (int64_t i = 0; i < inner; i++) m += row[i];
                m /= (double)inner;
                double m2 = 0;
                for (int64_t i = 0; i < inner; i++) { double d = row[i] - m; m2 += d * d; }
                double div = (double)inner - a->p.reduce.correction;
                if (div < 0) div = 0;
                r = m2 / div;
                if (a->p.reduce.take_sqrt) r = sqrt(r);
                if (p2) ct__store_f64(p2 + j * (int64_t)oes, out[1]->dtype, m);
            }
            ct__store_f64(p + j * (int64_t)oes, o->dtype, r);
        }
        free(buf);
    }
    ct_release(c);
    if (oom) return ct__error_status(CT_ERR_OOM, "%s: out of memory", ct__op_info[op].name);
    return CT_OK;
}

/* ======================================================================
 * Scans and softmax over (pre, n, post).
 * ====================================================================== */
#define SCAN_T(SFX, T, ACC)                                                        \
    static void scan_##SFX(const T *x, T *y, int64_t pre, int64_t n, int64_t post, ct_op op) { \
        int64_t rows = pre * post;                                                 \
        _Pragma("omp parallel for if (rows > 1 && rows * n > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                       \
            int64_t a0 = r / post, b0 = r % post;                                  \
            const T *xr = x + a0 * n * post + b0;                                  \
            T *yr = y + a0 * n * post + b0;                                        \
            if (op == CT_OP_cumsum) {                                              \
                ACC s = 0;                                                         \
                for (int64_t i = 0; i < n; i++) { s += (ACC)xr[i * post]; yr[i * post] = (T)s; } \
            } else {                                                               \
                ACC s = 1;                                                         \
                for (int64_t i = 0; i < n; i++) { s *= (ACC)xr[i * post]; yr[i * post] = (T)s; } \
            }                                                                      \
        }                                                                          \
    }
SCAN_T(f32, float, double)
SCAN_T(f64, double, double)
SCAN_T(i64, int64_t, uint64_t)

#define FSCAN_T(SFX, T)                                                            \
    static void fscan_##SFX(const T *x, T *y, int64_t pre, int64_t n, int64_t post, ct_op op) { \
        int64_t rows = pre * post;                                                 \
        _Pragma("omp parallel for if (rows > 1 && rows * n > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                       \
            int64_t a0 = r / post, b0 = r % post;                                  \
            const T *xr = x + a0 * n * post + b0;                                  \
            T *yr = y + a0 * n * post + b0;                                        \
            if (op == CT_OP_logcumsumexp) {                                        \
                double s = -INFINITY;                                              \
                for (int64_t i = 0; i < n; i++) {                                  \
                    double v = (double)xr[i * post];                               \
                    if (v != v || s != s) s = NAN;                                 \
                    else {                                                         \
                        double mx = v > s ? v : s, mn = v > s ? s : v;             \
                        if (isinf(mx) && mx == mn) s = mx;                         \
                        else if (mn == -INFINITY) s = mx;                          \
                        else s = mx + log1p(exp(mn - mx));                         \
                    }                                                              \
                    yr[i * post] = (T)s;                                           \
                }                                                                  \
                continue;                                                          \
            }                                                                      \
            double m = -INFINITY;                                                  \
            for (int64_t i = 0; i < n; i++) {                                      \
                double v = (double)xr[i * post];                                   \
                if (!(v <= m)) m = v;                                              \
            }                                                                      \
            double s = 0;                                                          \
            for (int64_t i = 0; i < n; i++) s += exp((double)xr[i * post] - m);    \
            if (op == CT_OP_softmax) {                                             \
                double inv = 1.0 / s;                                              \
                for (int64_t i = 0; i < n; i++) yr[i * post] = (T)(exp((double)xr[i * post] - m) * inv); \
            } else {                                                               \
                double ls = log(s) + m;                                            \
                for (int64_t i = 0; i < n; i++) yr[i * post] = (T)((double)xr[i * post] - ls); \
            }                                                                      \
        }                                                                          \
    }
FSCAN_T(f32, float)
FSCAN_T(f64, double)

/* ---- fused f32 softmax / log_softmax ------------------------------------
 * Last dim (post == 1): one row per task, three passes (max; exp and sum;
 * scale), AVX2 exp (vmath.h), the sum in 8 float lanes combined in a fixed
 * order.  Other dims: a [n, post] slab per pre index, vectorized across the
 * contiguous post axis in column blocks of SM_COLS (max, exp-sum, scale over
 * the n rows of the block): no transpose, no copy.  Every output element's
 * arithmetic is independent of the thread count. */
#define SM_COLS 256

/* nt: the row's final values are written with non-temporal stores (y
 * 32-byte aligned, n a multiple of 8 and <= SM_NT_MAX): the exps go to an
 * L1 buffer instead of y, so no line of y is read or kept in the cache */
#define SM_NT_MAX 4096
static void sm_row_f32(const float *x, float *y, int64_t n, int lg, int nt) {
#ifdef CT_VMATH_AVX2
    _Alignas(32) float ebuf[SM_NT_MAX];
    float *e_out = nt ? ebuf : y;
#else
    float *e_out = y;
    (void)nt;
#endif
    float m = -INFINITY;
    int64_t i = 0;
#ifdef CT_VMATH_AVX2
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    m = ct__v8_hmax(vm);
#endif
    for (; i < n; i++) if (x[i] > m) m = x[i];
    float s = 0;
    i = 0;
#ifdef CT_VMATH_AVX2
    __m256 vs = _mm256_setzero_ps(), vmm = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) {
        __m256 e = ct__v8_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmm));
        if (!lg) _mm256_storeu_ps(e_out + i, e);
        vs = _mm256_add_ps(vs, e);
    }
    s = ct__v8_hsum(vs);
#endif
    for (; i < n; i++) {
        float e = ct__expf_s(x[i] - m);
        if (!lg) e_out[i] = e;
        s += e;
    }
    if (lg) { /* (x - m) - log(s): exact x - m keeps the precision */
        float c = logf(s);
        i = 0;
#ifdef CT_VMATH_AVX2
        __m256 vc = _mm256_set1_ps(c);
        for (; i + 8 <= n; i += 8) {
            ct__v8_put(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmm), vc), nt);
        }
        if (nt) _mm_sfence();
#endif
        for (; i < n; i++) y[i] = (x[i] - m) - c;
    } else {
        float inv = 1.0f / s;
        i = 0;
#ifdef CT_VMATH_AVX2
        __m256 vi = _mm256_set1_ps(inv);
        for (; i + 8 <= n; i += 8) {
            ct__v8_put(y + i, _mm256_mul_ps(_mm256_loadu_ps(e_out + i), vi), nt);
        }
        if (nt) _mm_sfence();
#endif
        for (; i < n; i++) y[i] = e_out[i] * inv;
    }
}

/* columns [c0, c0 + w) of a [n, post] slab */
static void sm_cols_f32(const float *x, float *y, int64_t n, int64_t post, int64_t w, int lg) {
    float m[SM_COLS], s[SM_COLS];
    for (int64_t j = 0; j < w; j++) { m[j] = -INFINITY; s[j] = 0; }
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * post;
        for (int64_t j = 0; j < w; j++) m[j] = xr[j] > m[j] ? xr[j] : m[j];
    }
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * post;
        float *yr = y + i * post;
        int64_t j = 0;
#ifdef CT_VMATH_AVX2
        for (; j + 8 <= w; j += 8) {
            __m256 e = ct__v8_expf(_mm256_sub_ps(_mm256_loadu_ps(xr + j), _mm256_loadu_ps(m + j)));
            if (!lg) _mm256_storeu_ps(yr + j, e);
            _mm256_storeu_ps(s + j, _mm256_add_ps(_mm256_loadu_ps(s + j), e));
        }
#endif
        for (; j < w; j++) {
            float e = ct__expf_s(xr[j] - m[j]);
            if (!lg) yr[j] = e;
            s[j] += e;
        }
    }
    if (lg) for (int64_t j = 0; j < w; j++) s[j] = logf(s[j]);
    else for (int64_t j = 0; j < w; j++) s[j] = 1.0f / s[j];
    for (int64_t i = 0; i < n; i++) {
        const float *xr = x + i * post;
        float *yr = y + i * post;
        if (lg) for (int64_t j = 0; j < w; j++) yr[j] = (xr[j] - m[j]) - s[j];
        else for (int64_t j = 0; j < w; j++) yr[j] *= s[j];
    }
}

static void softmax_f32(const float *x, float *y, int64_t pre, int64_t n, int64_t post, int lg) {
    if (post == 1) {
        /* large outputs stream (vmath.h) */
        int nt = n <= SM_NT_MAX && ct__stream_rows(y, pre * n, n);
        CT_PAR_ROWS(r, pre, pre * n, pre > 1 && pre * n > CT_PAR_GRAIN,
                    sm_row_f32(x + r * n, y + r * n, n, lg, nt););
        return;
    }
    int64_t nb = (post + SM_COLS - 1) / SM_COLS, tasks = pre * nb;
#pragma omp parallel for if (tasks > 1 && pre * n * post > CT_PAR_GRAIN) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t p = t / nb, c0 = (t % nb) * SM_COLS;
        int64_t w = post - c0 < SM_COLS ? post - c0 : SM_COLS;
        sm_cols_f32(x + p * n * post + c0, y + p * n * post + c0, n, post, w, lg);
    }
}

/* softmax_backward: gx = y * (g - sum(g * y));  log_softmax_backward:
 * gx = g - exp(y) * sum(g).  f32 rows (post == 1) fused; other layouts and
 * f64 in the generic loop (double sums). */
static void smb_row_f32(const float *g, const float *y, float *o, int64_t n, int lg) {
    int64_t i = 0;
    float s = 0;
#ifdef CT_VMATH_AVX2
    __m256 vs = _mm256_setzero_ps();
    if (lg) for (; i + 8 <= n; i += 8) vs = _mm256_add_ps(vs, _mm256_loadu_ps(g + i));
    else for (; i + 8 <= n; i += 8) vs = _mm256_fmadd_ps(_mm256_loadu_ps(g + i), _mm256_loadu_ps(y + i), vs);
    s = ct__v8_hsum(vs);
#endif
    for (; i < n; i++) s += lg ? g[i] : g[i] * y[i];
    i = 0;
#ifdef CT_VMATH_AVX2
    __m256 vsum = _mm256_set1_ps(s);
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), yv = _mm256_loadu_ps(y + i);
        __m256 r = lg ? _mm256_fnmadd_ps(ct__v8_expf(yv), vsum, gv)
                      : _mm256_mul_ps(yv, _mm256_sub_ps(gv, vsum));
        _mm256_storeu_ps(o + i, r);
    }
#endif
    for (; i < n; i++) o[i] = lg ? g[i] - ct__expf_s(y[i]) * s : y[i] * (g[i] - s);
}

#define SMB_T(SFX, T)                                                              \
    static void smb_##SFX(const T *g, const T *y, T *o, int64_t pre, int64_t n, int64_t post, \
                          int lg) {                                                \
        int64_t rows = pre * post;                                                 \
        _Pragma("omp parallel for if (rows > 1 && rows * n > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                       \
            int64_t off = (r / post) * n * post + r % post;                        \
            double s = 0;                                                          \
            for (int64_t i = 0; i < n; i++)                                        \
                s += lg ? (double)g[off + i * post] : (double)g[off + i * post] * (double)y[off + i * post]; \
            for (int64_t i = 0; i < n; i++) {                                      \
                double gv = (double)g[off + i * post], yv = (double)y[off + i * post]; \
                o[off + i * post] = (T)(lg ? gv - exp(yv) * s : yv * (gv - s));    \
            }                                                                      \
        }                                                                          \
    }
SMB_T(f32, float)
SMB_T(f64, double)

/* out[0] = gx; in[0] = g, in[1] = y (same shape and dtype, f32 or f64);
 * a->p.scan.pre, n, post */
static ct_status k_softmax_bwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                               const ct_args *a) {
    ct_tensor *o = out[0];
    if (ct_numel(o) == 0) return CT_OK;
    int64_t pre = a->p.scan.pre, n = a->p.scan.n, post = a->p.scan.post;
    int lg = a->op == CT_OP_log_softmax_backward;
    ct_dtype dt = o->dtype;
    if (dt != CT_F32 && dt != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for %s", ct__op_info[a->op].name,
                                ct_dtype_name(dt));
    ct_tensor *g, *y;
    ct_status st = contig_in(in[0], dt, &g);
    if (st) return st;
    st = contig_in(in[1], dt, &y);
    if (st) { ct_release(g); return st; }
    if (dt == CT_F32 && post == 1) {
        const float *gp = ct__ptr(g), *yp = ct__ptr(y);
        float *op_ = ct__ptr(o);
#pragma omp parallel for if (pre > 1 && pre * n > CT_PAR_GRAIN) schedule(static)
        for (int64_t r = 0; r < pre; r++) smb_row_f32(gp + r * n, yp + r * n, op_ + r * n, n, lg);
    } else if (dt == CT_F32) {
        smb_f32(ct__ptr(g), ct__ptr(y), ct__ptr(o), pre, n, post, lg);
    } else {
        smb_f64(ct__ptr(g), ct__ptr(y), ct__ptr(o), pre, n, post, lg);
    }
    ct_release(g);
    ct_release(y);
    return CT_OK;
}

/* cummax/cummin: ties and NaN take the latest index, like torch */
#define CUMMM_T(DT, T, SFX, ISF)                                                   \
    static void cummm_##SFX(const T *x, T *y, int64_t *ix, int64_t pre, int64_t n, int64_t post, \
                            int ismax) {                                           \
        int64_t rows = pre * post;                                                 \
        _Pragma("omp parallel for if (rows > 1 && rows * n > CT_PAR_GRAIN) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                       \
            int64_t a0 = r / post, b0 = r % post, off = a0 * n * post + b0;        \
            T best = x[off];                                                       \
            int64_t bi = 0;                                                        \
            for (int64_t i = 0; i < n; i++) {                                      \
                T v = x[off + i * post];                                           \
                if ((ISF && v != v) || (!(ISF && best != best) && (ismax ? v >= best : v <= best))) { \
                    best = v; bi = i;                                              \
                }                                                                  \
                y[off + i * post] = best;                                          \
                ix[off + i * post] = bi;                                           \
            }                                                                      \
        }                                                                          \
    }
DT_LIST(CUMMM_T)

/* softmax / log_softmax of f16/bf16 x into y of x's dtype.  Last dim: each
 * row loaded into an f32 buffer, run through the f32 row kernel, rounded
 * once as it is stored (torch's Vectorized<BFloat16> softmax: f32 inside);
 * x is copied only when it is not contiguous, in its own dtype.  Other
 * dims: the slab kernel on an f32 copy (the conversions stay in here). */
static ct_status softmax_half(ct_tensor *x, ct_tensor *o, int64_t pre, int64_t n, int64_t post, int lg) {
    const ct_ew_vtab *vt = ct__ew_vtab();
    int bf = x->dtype == CT_BF16;
    void (*ld)(float *, const uint16_t *, int64_t) = bf ? vt->bf16_to_f32 : vt->f16_to_f32;
    void (*st)(uint16_t *, const float *, int64_t) = bf ? vt->f32_to_bf16 : vt->f32_to_f16;
    /* a float32 o (softmax_float): the f32 results are stored as they are */
    int f32o = o->dtype == CT_F32;
    uint16_t *y = ct__ptr(o);
    ct_tensor *c;
    if (post > 1 && f32o) {
        ct_status s = contig_in(x, CT_F32, &c);
        if (s) return s;
        softmax_f32(ct__ptr(c), ct__ptr(o), pre, n, post, lg);
        ct_release(c);
        return CT_OK;
    }
    if (post > 1) {
        ct_tensor *yf = ct__alloc(o->sizes, o->ndim, CT_F32, CT_CPU);
        if (!yf) return CT_ERR_OOM;
        ct_status s = contig_in(x, CT_F32, &c);
        if (s) { ct_release(yf); return s; }
        softmax_f32(ct__ptr(c), ct__ptr(yf), pre, n, post, lg);
        st(y, ct__ptr(yf), pre * n * post);
        ct_release(c);
        ct_release(yf);
        return CT_OK;
    }
    ct_status s = contig_in(x, x->dtype, &c);
    if (s) return s;
    const uint16_t *xp = ct__ptr(c);
    int nth = ct__num_threads();
    float *buf = malloc(sizeof(float) * 2 * (size_t)n * (size_t)nth);
    if (!buf) { ct_release(c); return ct__error_status(CT_ERR_OOM, "softmax: out of memory"); }
#pragma omp parallel num_threads(nth) if (pre > 1 && pre * n > CT_PAR_GRAIN)
    {
        int t = 0;
#ifdef _OPENMP
        t = omp_get_thread_num();
#endif
        float *xr = buf + (int64_t)t * 2 * n, *yr = xr + n;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < pre; r++) {
            ld(xr, xp + r * n, n);
            if (f32o) {
                sm_row_f32(xr, (float *)(void *)y + r * n, n, lg, 0);
                continue;
            }
            sm_row_f32(xr, yr, n, lg, 0);
            st(y + r * n, yr, n);
        }
    }
    free(buf);
    ct_release(c);
    return CT_OK;
}

/* ce_grad_lp: d = p * coef[i], minus coef[i] at target[i] unless the target
 * is ignore_index, in float32 (cross entropy's gradient as loss.c's float32
 * path computes it), each row rounded once to d's dtype as it is stored */
static ct_status k_ce_grad_lp(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                              const ct_args *a) {
    (void)nout;
    (void)nin;
    ct_tensor *d = out[0], *pc = NULL, *tc = NULL, *cc = NULL;
    ct_status s = contig_in(in[0], CT_F32, &pc);
    if (!s) s = contig_in(in[1], CT_I64, &tc);
    if (!s) s = contig_in(in[2], CT_F32, &cc);
    const int64_t N = d->sizes[0], C = d->sizes[1], ignore = a->p.ce_grad.ignore_index;
    int nth = ct__num_threads();
    float *buf = s ? NULL : malloc(sizeof(float) * (size_t)C * (size_t)nth);
    if (!s && !buf) s = ct__error_status(CT_ERR_OOM, "cross_entropy backward: out of memory");
    if (!s) {
        const ct_ew_vtab *vt = ct__ew_vtab();
        void (*st)(uint16_t *, const float *, int64_t) = d->dtype == CT_BF16 ? vt->f32_to_bf16 : vt->f32_to_f16;
        const float *pp = ct__ptr(pc), *cp = ct__ptr(cc);
        const int64_t *tp = ct__ptr(tc);
        uint16_t *dp = ct__ptr(d);
#pragma omp parallel num_threads(nth) if (N > 1 && N * C > CT_PAR_GRAIN)
        {
            int th = 0;
#ifdef _OPENMP
            th = omp_get_thread_num();
#endif
            float *row = buf + (int64_t)th * C;
#pragma omp for schedule(static)
            for (int64_t i = 0; i < N; i++) {
                const float c = cp[i], *pr = pp + i * C;
                for (int64_t j = 0; j < C; j++) row[j] = pr[j] * c;
                if (tp[i] != ignore && tp[i] >= 0 && tp[i] < C) row[tp[i]] -= c;
                st(dp + i * C, row, C);
            }
        }
    }
    free(buf);
    ct_release(pc);
    ct_release(tc);
    ct_release(cc);
    return s;
}

static ct_status k_scan(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    ct_tensor *o = out[0];
    if (ct_numel(o) == 0) return CT_OK;
    int64_t pre = a->p.scan.pre, n = a->p.scan.n, post = a->p.scan.post;
    ct_op op = a->op;
    if (op == CT_OP_softmax_float) return softmax_half(in[0], o, pre, n, post, 0);
    if ((op == CT_OP_softmax || op == CT_OP_log_softmax) && (o->dtype == CT_F16 || o->dtype == CT_BF16)) {
        if (in[0]->dtype != o->dtype)
            return ct__error_status(CT_ERR_DTYPE, "%s: kernel expects %s input, got %s", ct__op_info[op].name,
                                    ct_dtype_name(o->dtype), ct_dtype_name(in[0]->dtype));
        return softmax_half(in[0], o, pre, n, post, op == CT_OP_log_softmax);
    }
    ct_tensor *c;
    ct_status st = contig_in(in[0], o->dtype, &c);
    if (st) return st;
    const void *x = ct__ptr(c);
    void *y = ct__ptr(o);
    ct_dtype dt = o->dtype;
    st = CT_OK;
    if (op == CT_OP_cummax || op == CT_OP_cummin) {
        int64_t *ix = ct__ptr(out[1]);
        switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: cummm_##SFX((const T *)x, (T *)y, ix, pre, n, post, op == CT_OP_cummax); break;
            DT_LIST(CASE)
#undef CASE
        default: st = CT_ERR_DTYPE;
        }
    } else if (op == CT_OP_cumsum || op == CT_OP_cumprod) {
        if (dt == CT_F32) scan_f32(x, y, pre, n, post, op);
        else if (dt == CT_F64) scan_f64(x, y, pre, n, post, op);
        else if (dt == CT_I64) scan_i64(x, y, pre, n, post, op);
        else st = CT_ERR_DTYPE;
    } else {
        if (dt == CT_F32 && op != CT_OP_logcumsumexp)
            softmax_f32(x, y, pre, n, post, op == CT_OP_log_softmax);
        else if (dt == CT_F32) fscan_f32(x, y, pre, n, post, op);
        else if (dt == CT_F64) fscan_f64(x, y, pre, n, post, op);
        else st = CT_ERR_DTYPE;
    }
    ct_release(c);
    if (st)
        return ct__error_status(st, "%s: not implemented for %s", ct__op_info[op].name,
                                ct_dtype_name(dt));
    return CT_OK;
}

/* The reduction kernels run on the view of in[0] with the kept dims first
 * and the reduced dims last: in[0] itself when its reduced dims are last
 * already (sum over the last dims, full reductions), else a view. */
static ct_status red_on_view(ct_kernel_fn k, ct_tensor *const *out, int nout,
                             ct_tensor *const *in, const ct_args *a) {
    ct_tensor *x = in[0];
    const int64_t *m = a->p.reduce.reduced;
    int d = 0;
    while (d < x->ndim && !m[d]) d++;
    while (d < x->ndim && m[d]) d++;
    if (d == x->ndim) return k(out, nout, in, 1, a);
    int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int j = 0; j < x->ndim; j++)
            if ((m[j] != 0) == pass) {
                sz[n] = x->sizes[j];
                st[n] = x->strides[j];
                n++;
            }
    ct_tensor *v = ct__view_of(x, sz, st, n, x->offset);
    if (!v) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    ct_tensor *vin[1] = {v};
    ct_status r = k(out, nout, vin, 1, a);
    ct_release(v);
    return r;
}
#define RED_KERNEL(k)                                                                   \
    static ct_status k##_red(ct_tensor *const *out, int nout, ct_tensor *const *in,     \
                             int nin, const ct_args *a) {                               \
        (void)nin;                                                                      \
        return red_on_view(k, out, nout, in, a);                                        \
    }
RED_KERNEL(k_accum)
RED_KERNEL(k_minmax)
RED_KERNEL(k_logic)
RED_KERNEL(k_floatred)

void CT_ISA_NAME(ct__cpu_register_reduce)(ct_kernel_fn *t) {
    t[CT_OP_sum] = k_accum_red;
    t[CT_OP_mean] = k_accum_red;
    t[CT_OP_nansum] = k_accum_red;
    t[CT_OP_nanmean] = k_accum_red;
    t[CT_OP_prod] = k_accum_red;
    t[CT_OP_amax] = k_minmax_red;
    t[CT_OP_amin] = k_minmax_red;
    t[CT_OP_max_dim] = k_minmax_red;
    t[CT_OP_min_dim] = k_minmax_red;
    t[CT_OP_argmax] = k_minmax_red;
    t[CT_OP_argmin] = k_minmax_red;
    t[CT_OP_all] = k_logic_red;
    t[CT_OP_any] = k_logic_red;
    t[CT_OP_count_nonzero] = k_logic_red;
    t[CT_OP_logsumexp] = k_floatred_red;
    t[CT_OP_var] = k_floatred_red;
    t[CT_OP_std] = k_floatred_red;
    t[CT_OP_norm] = k_floatred_red;
    t[CT_OP_softmax] = k_scan;
    t[CT_OP_log_softmax] = k_scan;
    ct__kernel_half[CT_CPU][CT_OP_softmax] = CT_HALF_F16 | CT_HALF_BF16;
    ct__kernel_half[CT_CPU][CT_OP_log_softmax] = CT_HALF_F16 | CT_HALF_BF16;
    t[CT_OP_softmax_float] = k_scan;
    t[CT_OP_ce_grad_lp] = k_ce_grad_lp;
    t[CT_OP_softmax_backward] = k_softmax_bwd;
    t[CT_OP_log_softmax_backward] = k_softmax_bwd;
    t[CT_OP_cumsum] = k_scan;
    t[CT_OP_cumprod] = k_scan;
    t[CT_OP_cummax] = k_scan;
    t[CT_OP_cummin] = k_scan;
    t[CT_OP_logcumsumexp] = k_scan;
    ct__cpu_register_sort(t);
    CT_ISA_NAME(ct__cpu_register_norm)(t);
}
