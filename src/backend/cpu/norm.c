/* norm.c (cpu) -- fused layer_norm / rms_norm kernels, forward and backward.
 *
 * Rows: x is viewed as [M, N] (N = the normalized numel, contiguous rows).
 *   forward:  mean = sum(x)/N, var = sum((x - mean)^2)/N (two passes over
 *             the row, which stays in L1), rstd = 1/sqrt(var + eps),
 *             y = (x - mean) * rstd * w + b.   rms_norm: mean = 0,
 *             rstd = 1/sqrt(sum(x^2)/N + eps).
 *   backward: xhat = (x - mean) * rstd, gw = g * w,
 *             dx = rstd * (gw - sum(gw)/N - xhat * sum(gw * xhat)/N)
 *             (rms_norm: without the sum(gw)/N term),
 *             dw = sum over rows of g * xhat, db = sum over rows of g.
 * dw/db: rows are cut into at most LN_CHUNKS chunks that depend on M only;
 * each chunk sums its rows into its own partial row, and the partials are
 * added in chunk order: the same bits whatever the thread count.
 * Row sums of f32 use 8 float lanes combined in a fixed order; f64 runs
 * plain double loops. */
#include <math.h>

#include "../../ops/reduce_impl.h"
#include "ew_vec.h"
#include "vmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define LN_CHUNKS 64

/* sum of x[i] (mode 0), of (x[i] - c)^2 (mode 1) */
/* Compiled twice (runtime CPU dispatch, src/backend/cpu/cpu_caps.h): here
 * for baseline x86-64 and by norm_avx2.c, which includes this file with
 * CT_ISA_NAME adding an _avx2 suffix, for AVX2 + FMA; src/ops/dispatch.c
 * registers the set the CPU can run. */
#ifndef CT_ISA_NAME
#define CT_ISA_NAME(f) f
#endif

static float rsum_f32(const float *x, int64_t n, float c, int mode) {
    int64_t i = 0;
    float s = 0;
#ifdef CT_VMATH_AVX2
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), vc = _mm256_set1_ps(c);
    if (mode == 0) {
        for (; i + 16 <= n; i += 16) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc);
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
        }
    }
    s = ct__v8_hsum(_mm256_add_ps(a0, a1));
#endif
    for (; i < n; i++) s += mode == 0 ? x[i] : (x[i] - c) * (x[i] - c);
    return s;
}

/* nt: write y with non-temporal stores (y 32-byte aligned, n % 8 == 0),
 * followed by an sfence */
static void lnf_row_f32(const float *x, float *y, const float *w, const float *b, int64_t n,
                        double eps, int rms, float *mo, float *ro, int nt) {
    float mean = rms ? 0.0f : (float)((double)rsum_f32(x, n, 0, 0) / (double)n);
    double var = (double)rsum_f32(x, n, mean, 1) / (double)n;
    float rstd = (float)(1.0 / sqrt(var + eps));
    *mo = mean;
    *ro = rstd;
    int64_t i = 0;
#ifdef CT_VMATH_AVX2
    __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
        if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        ct__v8_put(y + i, v, nt);
    }
    if (nt) _mm_sfence();
#else
    (void)nt;
#endif
    for (; i < n; i++) {
        float v = (x[i] - mean) * rstd;
        if (w) v = v * w[i];
        if (b) v = v + b[i];
        y[i] = v;
    }
}

static void lnf_row_f64(const double *x, double *y, const double *w, const double *b, int64_t n,
                        double eps, int rms, double *mo, double *ro) {
    double mean = 0, var = 0;
    if (!rms) {
        for (int64_t i = 0; i < n; i++) mean += x[i];
        mean /= (double)n;
    }
    for (int64_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= (double)n;
    double rstd = 1.0 / sqrt(var + eps);
    *mo = mean;
    *ro = rstd;
    for (int64_t i = 0; i < n; i++) {
        double v = (x[i] - mean) * rstd;
        if (w) v = v * w[i];
        if (b) v = v + b[i];
        y[i] = v;
    }
}

/* in: x, [w], [b] (contiguous, one dtype); out: y, mean [M], rstd [M] */
static ct_status k_ln_fwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    int64_t n = a->p.layer_norm.normalized_numel;
    int hw = a->p.layer_norm.has_weight, hb = a->p.layer_norm.has_bias, rms = a->p.layer_norm.rms;
    double eps = a->p.layer_norm.eps;
    ct_tensor *x = in[0];
    ct_tensor *w = hw ? in[1] : NULL, *b = hb ? in[1 + hw] : NULL;
    int64_t M = n > 0 ? ct_numel(x) / n : 0;
    if (M == 0 || n == 0) return CT_OK;
    if (x->dtype == CT_F32) {
        const float *xp = ct__ptr(x), *wp = w ? ct__ptr(w) : NULL, *bp = b ? ct__ptr(b) : NULL;
        float *yp = ct__ptr(out[0]), *mp = ct__ptr(out[1]), *rp = ct__ptr(out[2]);
        /* large outputs stream (vmath.h; [4096, 1024] at 2 threads, back
         * to back: 2.2 -> 1.5 ms); same values */
        int nt = ct__stream_rows(yp, M * n, n);
        CT_PAR_ROWS(r, M, M * n, M > 1 && M * n > CT_PAR_GRAIN,
                    lnf_row_f32(xp + r * n, yp + r * n, wp, bp, n, eps, rms, mp + r, rp + r, nt););
    } else if (x->dtype == CT_F64) {
        const double *xp = ct__ptr(x), *wp = w ? ct__ptr(w) : NULL, *bp = b ? ct__ptr(b) : NULL;
        double *yp = ct__ptr(out[0]), *mp = ct__ptr(out[1]), *rp = ct__ptr(out[2]);
#pragma omp parallel for if (M > 1 && M * n > CT_PAR_GRAIN) schedule(static)
        for (int64_t r = 0; r < M; r++)
            lnf_row_f64(xp + r * n, yp + r * n, wp, bp, n, eps, rms, mp + r, rp + r);
    } else if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
        /* f16/bf16: each row is loaded into an f32 buffer, normalized by
         * the f32 row kernel and rounded once as it is stored (torch's
         * reduced-precision layer norm: f32 math inside); mean and rstd
         * are rounded to x's dtype like torch's */
        const ct_ew_vtab *vt = ct__ew_vtab();
        int bf = x->dtype == CT_BF16;
        void (*ld)(float *, const uint16_t *, int64_t) = bf ? vt->bf16_to_f32 : vt->f16_to_f32;
        void (*st)(uint16_t *, const float *, int64_t) = bf ? vt->f32_to_bf16 : vt->f32_to_f16;
        int nth = ct__num_threads();
        float *wb = malloc(sizeof(float) * (size_t)n * (size_t)(2 + 2 * nth));
        if (!wb) return ct__error_status(CT_ERR_OOM, "layer_norm: out of memory");
        float *bb = wb + n, *rows = wb + 2 * n;
        if (w) ld(wb, ct__ptr(w), n);
        if (b) ld(bb, ct__ptr(b), n);
        const uint16_t *xp = ct__ptr(x);
        uint16_t *yp = ct__ptr(out[0]), *mp = ct__ptr(out[1]), *rp = ct__ptr(out[2]);
#pragma omp parallel num_threads(nth) if (M > 1 && M * n > CT_PAR_GRAIN)
        {
            int t = 0;
#ifdef _OPENMP
            t = omp_get_thread_num();
#endif
            float *xr = rows + (int64_t)t * 2 * n, *yr = xr + n;
#pragma omp for schedule(static)
            for (int64_t r = 0; r < M; r++) {
                float mo, ro;
                ld(xr, xp + r * n, n);
                lnf_row_f32(xr, yr, w ? wb : NULL, b ? bb : NULL, n, eps, rms, &mo, &ro, 0);
                st(yp + r * n, yr, n);
                st(mp + r, &mo, 1);
                st(rp + r, &ro, 1);
            }
        }
        free(wb);
    } else {
        return ct__error_status(CT_ERR_DTYPE, "layer_norm: fused kernel not implemented for %s",
                                ct_dtype_name(x->dtype));
    }
    return CT_OK;
}

/* one row of the backward; pw/pb: the chunk's partial dw/db rows (or NULL) */
static void lnb_row_f32(const float *g, const float *x, float mean, float rstd, const float *w,
                        float *dx, float *pw, float *pb, int64_t n, int rms) {
    float sg = 0, sgx = 0;
    int64_t i = 0;
#ifdef CT_VMATH_AVX2
    __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
        __m256 gw = w ? _mm256_mul_ps(gv, _mm256_loadu_ps(w + i)) : gv;
        a0 = _mm256_add_ps(a0, gw);
        a1 = _mm256_fmadd_ps(gw, xh, a1);
        if (pw) _mm256_storeu_ps(pw + i, _mm256_fmadd_ps(gv, xh, _mm256_loadu_ps(pw + i)));
        if (pb) _mm256_storeu_ps(pb + i, _mm256_add_ps(gv, _mm256_loadu_ps(pb + i)));
    }
    sg = ct__v8_hsum(a0);
    sgx = ct__v8_hsum(a1);
#endif
    for (; i < n; i++) {
        float xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];
        sg += gw;
        sgx += gw * xh;
        if (pw) pw[i] += g[i] * xh;
        if (pb) pb[i] += g[i];
    }
    float c1 = rms ? 0.0f : sg / (float)n, c2 = sgx / (float)n;
    i = 0;
#ifdef CT_VMATH_AVX2
    __m256 v1 = _mm256_set1_ps(c1), v2 = _mm256_set1_ps(c2);
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i);
        __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
        __m256 gw = w ? _mm256_mul_ps(gv, _mm256_loadu_ps(w + i)) : gv;
        __m256 t = _mm256_fnmadd_ps(xh, v2, _mm256_sub_ps(gw, v1));
        _mm256_storeu_ps(dx + i, _mm256_mul_ps(t, vr));
    }
#endif
    for (; i < n; i++) {
        float xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];
        dx[i] = (gw - c1 - xh * c2) * rstd;
    }
}

static void lnb_row_f64(const double *g, const double *x, double mean, double rstd,
                        const double *w, double *dx, double *pw, double *pb, int64_t n, int rms) {
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; i++) {
        double xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];
        sg += gw;
        sgx += gw * xh;
        if (pw) pw[i] += g[i] * xh;
        if (pb) pb[i] += g[i];
    }
    double c1 = rms ? 0.0 : sg / (double)n, c2 = sgx / (double)n;
    for (int64_t i = 0; i < n; i++) {
        double xh = (x[i] - mean) * rstd, gw = w ? g[i] * w[i] : g[i];
        dx[i] = (gw - c1 - xh * c2) * rstd;
    }
}

/* in: g, x, mean, rstd, [w]; out: dx, dw (or NULL), db (or NULL) */
static ct_status k_ln_bwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    int64_t n = a->p.layer_norm.normalized_numel;
    int hw = a->p.layer_norm.has_weight, rms = a->p.layer_norm.rms;
    ct_tensor *g = in[0], *x = in[1], *mt = in[2], *rt = in[3], *w = hw ? in[4] : NULL;
    ct_tensor *dx = out[0], *dw = nout > 1 ? out[1] : NULL, *db = nout > 2 ? out[2] : NULL;
    int64_t M = n > 0 ? ct_numel(x) / n : 0;
    size_t es = ct_dtype_size(x->dtype);
    if (n == 0) return CT_OK;
    if (M == 0) {
        if (dw) memset(ct__ptr(dw), 0, (size_t)n * es);
        if (db) memset(ct__ptr(db), 0, (size_t)n * es);
        return CT_OK;
    }
    int64_t nch = M < LN_CHUNKS ? M : LN_CHUNKS;
    int npart = (dw != NULL) + (db != NULL);
    char *part = NULL;
    double *acc = NULL;
    if (npart) { /* zeroed by the chunk that owns each row */
        part = malloc((size_t)(nch * npart * n) * es);
        acc = malloc((size_t)n * sizeof(double));
        if (!part || !acc) {
            free(part);
            free(acc);
            return ct__error_status(CT_ERR_OOM, "layer_norm backward: out of memory");
        }
    }
    /* per-chunk partial dw/db rows (fixed chunks: the same sums for any
     * thread count), then summed over the chunks in double */
#define LN_BWD(T, SUF)                                                                        \
    do {                                                                                      \
        const T *gp = ct__ptr(g), *xp = ct__ptr(x), *mp = ct__ptr(mt), *rp = ct__ptr(rt);     \
        const T *wp = w ? ct__ptr(w) : NULL;                                                  \
        T *dxp = ct__ptr(dx), *pp = (T *)part;                                                \
        _Pragma("omp parallel for if (nch > 1 && M * n > CT_PAR_GRAIN) schedule(static)")         \
        for (int64_t c = 0; c < nch; c++) {                                                   \
            T *pw = dw ? pp + c * n : NULL;                                                   \
            T *pb = db ? pp + (nch * (dw != NULL) + c) * n : NULL;                            \
            if (pw) memset(pw, 0, (size_t)n * sizeof(T));                                     \
            if (pb) memset(pb, 0, (size_t)n * sizeof(T));                                     \
            for (int64_t r = M * c / nch; r < M * (c + 1) / nch; r++)                         \
                lnb_row_##SUF(gp + r * n, xp + r * n, mp[r], rp[r], wp, dxp + r * n, pw, pb, n, rms); \
        }                                                                                     \
        for (int k = 0; k < npart; k++) { /* chunk by chunk, each column in chunk order */  \
            T *dst = ct__ptr(k == 0 && dw ? dw : db);                                         \
            const T *src = pp + (int64_t)k * nch * n;                                         \
            for (int64_t j = 0; j < n; j++) acc[j] = 0;                                       \
            for (int64_t c = 0; c < nch; c++)                                                 \
                for (int64_t j = 0; j < n; j++) acc[j] += (double)src[c * n + j];            \
            for (int64_t j = 0; j < n; j++) dst[j] = (T)acc[j];                               \
        }                                                                                     \
    } while (0)
    if (x->dtype == CT_F32) LN_BWD(float, f32);
    else LN_BWD(double, f64);
#undef LN_BWD
    free(part);
    free(acc);
    return CT_OK;
}

void CT_ISA_NAME(ct__cpu_register_norm)(ct_kernel_fn *t) {
    t[CT_OP_layer_norm_fwd] = k_ln_fwd;
    t[CT_OP_layer_norm_bwd] = k_ln_bwd;
    ct__kernel_half[CT_CPU][CT_OP_layer_norm_fwd] = CT_HALF_F16 | CT_HALF_BF16;
}
