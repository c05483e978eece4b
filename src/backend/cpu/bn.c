/* bn.c (cpu) -- fused batch-norm kernels over a contiguous [N, C, S] input
 * (S: the product of the spatial dims), used by F.batch_norm in training
 * mode (src/nn/norm.c).  Per channel c, over its M = N*S values:
 *   forward:  mean, biased var (two passes, accumulated in double),
 *             invstd = 1/sqrt(var + eps), y = (x - mean)*invstd*w + b
 *   backward: sum_dy = sum(dy), sum_dyxh = sum(dy * xhat) with
 *             xhat = (x - mean)*invstd;
 *             dx = w*invstd*(dy - sum_dy/M - xhat*sum_dyxh/M),
 *             dw = sum_dyxh, db = sum_dy
 *   eval:     y = x*scale + shift with per-channel scale = w/sqrt(rv + eps)
 *             and shift = b - rm*scale (computed by the caller)
 * One pass over the channels threads the work; every channel's sums run in
 * one fixed order, so the results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>

#include "../../ops/op_table.h"
#include "cpu_caps.h"
#include "ew_vec.h"

#define BN_GRAIN 32768

/* Built twice: here for baseline x86-64 (names ending _default) and by
 * bn_avx2.c for AVX2 + FMA (names ending _avx2, a target pragma: OpenMP's
 * outlined loop bodies inherit it, which GCC's target_clones would not give
 * them; and target_clones("arch=haswell") dispatches on the CPU MODEL, so an
 * AMD CPU with AVX2 ran the baseline clone).  The ct__bn_* entry points at
 * the end of this file pick by ct__cpu_cap(), and the op kernels after
 * them (registered by ct__cpu_register_bn) call those. */
#ifndef CT_ISA_NAME
#define CT_ISA_NAME(f) f##_default
#define BN_ENTRY_POINTS 1
#endif

#define BN_KERNELS(T, SUF)                                                                        \
    void CT_ISA_NAME(ct__bn_fwd_##SUF)(const T *x, const T *w, const T *b, T *y, double *mean, double *var,    \
                          int64_t N, int64_t C, int64_t S, double eps) {                          \
        const double M = (double)(N * S);                                                         \
        _Pragma("omp parallel for if (N * C * S > BN_GRAIN) schedule(static)")                   \
        for (int64_t c = 0; c < C; c++) {                                                         \
            double s = 0;                                                                         \
            for (int64_t n = 0; n < N; n++) {                                                     \
                const T *p = x + (n * C + c) * S;                                                 \
                double r = 0;                                                                     \
                _Pragma("omp simd reduction(+ : r)")                                              \
                for (int64_t i = 0; i < S; i++) r += (double)p[i];                                \
                s += r;                                                                           \
            }                                                                                     \
            const double mu = s / M;                                                              \
            double q = 0;                                                                         \
            for (int64_t n = 0; n < N; n++) {                                                     \
                const T *p = x + (n * C + c) * S;                                                 \
                double r = 0;                                                                     \
                _Pragma("omp simd reduction(+ : r)")                                              \
                for (int64_t i = 0; i < S; i++) {                                                 \
                    double d = (double)p[i] - mu;                                                 \
                    r += d * d;                                                                   \
                }                                                                                 \
                q += r;                                                                           \
            }                                                                                     \
            const double v = q / M, is = 1.0 / sqrt(v + eps);                                     \
            mean[c] = mu;                                                                         \
            var[c] = v;                                                                           \
            const double wc = w ? (double)w[c] : 1.0, bc = b ? (double)b[c] : 0.0;                \
            const T scale = (T)(is * wc), shift = (T)(bc - mu * is * wc);                         \
            for (int64_t n = 0; n < N; n++) {                                                     \
                const T *p = x + (n * C + c) * S;                                                 \
                T *o = y + (n * C + c) * S;                                                       \
                _Pragma("omp simd")                                                               \
                for (int64_t i = 0; i < S; i++) o[i] = p[i] * scale + shift;                      \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    void CT_ISA_NAME(ct__bn_bwd_##SUF)(const T *x, const T *dy, const T *w, const T *mean, const T *invstd,    \
                          T *dx, T *dw, T *db, int64_t N, int64_t C, int64_t S) {                 \
        const double M = (double)(N * S);                                                         \
        _Pragma("omp parallel for if (N * C * S > BN_GRAIN) schedule(static)")                   \
        for (int64_t c = 0; c < C; c++) {                                                         \
            const double mu = (double)mean[c], is = (double)invstd[c];                            \
            double sdy = 0, sdx = 0;                                                              \
            for (int64_t n = 0; n < N; n++) {                                                     \
                const T *p = x + (n * C + c) * S, *g = dy + (n * C + c) * S;                      \
                double r1 = 0, r2 = 0;                                                            \
                _Pragma("omp simd reduction(+ : r1, r2)")                                         \
                for (int64_t i = 0; i < S; i++) {                                                 \
                    r1 += (double)g[i];                                                           \
                    r2 += (double)g[i] * ((double)p[i] - mu);                                     \
                }                                                                                 \
                sdy += r1;                                                                        \
                sdx += r2;                                                                        \
            }                                                                                     \
            const double sdyxh = sdx * is;                                                        \
            if (dw) dw[c] = (T)sdyxh;                                                             \
            if (db) db[c] = (T)sdy;                                                               \
            if (!dx) continue;                                                                    \
            /* dx = (dy - sum_dy/M - (x - mu)*is*sum_dyxh/M) * w*invstd (torch's order) */        \
            const T k = (T)((w ? (double)w[c] : 1.0) * is), mdy = (T)(sdy / M);                   \
            const T proj = (T)(is * sdyxh / M), mut = (T)mu;                                      \
            for (int64_t n = 0; n < N; n++) {                                                     \
                const T *p = x + (n * C + c) * S, *g = dy + (n * C + c) * S;                      \
                T *o = dx + (n * C + c) * S;                                                      \
                _Pragma("omp simd")                                                               \
                for (int64_t i = 0; i < S; i++) o[i] = (g[i] - mdy - (p[i] - mut) * proj) * k;    \
            }                                                                                     \
        }                                                                                         \
    }

#define BN_EVAL(T, SUF)                                                                           \
    void CT_ISA_NAME(ct__bn_eval_##SUF)(const T *x, const double *scale, const double *shift, T *y, int64_t N,  \
                           int64_t C, int64_t S, int relu) {                                      \
        _Pragma("omp parallel for collapse(2) if (N * C * S > BN_GRAIN) schedule(static)")       \
        for (int64_t n = 0; n < N; n++)                                                           \
            for (int64_t c = 0; c < C; c++) {                                                     \
                const T a = (T)scale[c], b = (T)shift[c];                                         \
                const T *p = x + (n * C + c) * S;                                                 \
                T *o = y + (n * C + c) * S;                                                       \
                if (relu) {                                                                       \
                    _Pragma("omp simd")                                                           \
                    for (int64_t i = 0; i < S; i++) {                                             \
                        T v = p[i] * a + b;                                                       \
                        o[i] = v <= (T)0 ? (T)0 : v; /* as relu: NaN stays, -0 -> 0 */            \
                    }                                                                             \
                } else {                                                                          \
                    _Pragma("omp simd")                                                           \
                    for (int64_t i = 0; i < S; i++) o[i] = p[i] * a + b;                          \
                }                                                                                 \
            }                                                                                     \
    }

BN_EVAL(float, f32)
BN_EVAL(double, f64)
BN_KERNELS(float, f32)
BN_KERNELS(double, f64)

/* ---- f16/bf16 training (torch's reduced-precision batch norm) ------------
 * x, dy, y, dx in the half dtype; w, b in it or float32 (torch's mixed type:
 * autocast's float32 parameters); every channel row converted to f32 in L1
 * blocks, sums in double, each result rounded once at the store.  The saved
 * mean, invstd and var are float32 tensors holding the unrounded statistics
 * (the running statistics are updated from those, as torch's); with half
 * parameters both kernels normalize with mean and invstd rounded to x's
 * dtype (torch saves them in it), with float32 ones (torch's mixed type,
 * which keeps them in float) unrounded.  No f32 copy of x or dy.  Built per
 * ISA level like the f32 kernels (the sums vectorized in double: before,
 * built at the baseline level only and scalar, a ResNet-50 bf16 step's
 * batch norms took 3.2x (forward) and 1.8x (backward) their f32 time). */
#define BN_HBLK 1024
typedef struct {
    void (*ld)(float *, const uint16_t *, int64_t);
    void (*st)(uint16_t *, const float *, int64_t);
    ct_dtype dt;
} bn_half_io;
static bn_half_io bn_half(ct_dtype dt) {
    const ct_ew_vtab *vt = ct__ew_vtab();
    bn_half_io io = {dt == CT_BF16 ? vt->bf16_to_f32 : vt->f16_to_f32,
                     dt == CT_BF16 ? vt->f32_to_bf16 : vt->f32_to_f16, dt};
    return io;
}
/* v rounded to the half dtype (and back) */
static float bn_round(double v, ct_dtype dt) {
    return dt == CT_BF16 ? ct__bf16_to_f32(ct__f32_to_bf16((float)v)) : ct__f16_to_f32(ct__f32_to_f16((float)v));
}
static float bn_param(const ct_tensor *t, int64_t c, float dflt) {
    return t ? (float)ct__load_f64((const char *)ct__ptr((ct_tensor *)t) + c * (int64_t)ct_dtype_size(t->dtype),
                                   t->dtype)
             : dflt;
}

void CT_ISA_NAME(ct__bn_fwd_half)(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, ct_tensor *y, float *mo,
                        float *io, float *vo, double eps) {
    int64_t N, C, S;
    N = x->sizes[0];
    C = x->sizes[1];
    S = (N > 0 && C > 0) ? ct_numel((ct_tensor *)x) / (N * C) : 0;
    const bn_half_io h = bn_half(x->dtype);
    const int round_stats = !((w && w->dtype == CT_F32) || (b && b->dtype == CT_F32));
    const uint16_t *xp = ct__ptr((ct_tensor *)x);
    uint16_t *yp = ct__ptr(y);
    const double M = (double)(N * S);
#pragma omp parallel for if (N * C * S > BN_GRAIN) schedule(static)
    for (int64_t c = 0; c < C; c++) {
        float buf[BN_HBLK];
        double s = 0, q = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i0 = 0; i0 < S; i0 += BN_HBLK) {
                int64_t m = S - i0 < BN_HBLK ? S - i0 : BN_HBLK;
                h.ld(buf, xp + (n * C + c) * S + i0, m);
                double r = 0;
#pragma omp simd reduction(+ : r)
                for (int64_t i = 0; i < m; i++) r += (double)buf[i];
                s += r;
            }
        const double mu = M > 0 ? s / M : 0.0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i0 = 0; i0 < S; i0 += BN_HBLK) {
                int64_t m = S - i0 < BN_HBLK ? S - i0 : BN_HBLK;
                h.ld(buf, xp + (n * C + c) * S + i0, m);
                double r = 0;
#pragma omp simd reduction(+ : r)
                for (int64_t i = 0; i < m; i++) {
                    double d = (double)buf[i] - mu;
                    r += d * d;
                }
                q += r;
            }
        const double var = M > 0 ? q / M : 0.0, is = 1.0 / sqrt(var + eps);
        const float mh = round_stats ? bn_round(mu, h.dt) : (float)mu;
        const float ih = round_stats ? bn_round(is, h.dt) : (float)is;
        const float wc = bn_param(w, c, 1.0f), bc = bn_param(b, c, 0.0f);
        mo[c] = (float)mu;
        io[c] = (float)is;
        vo[c] = (float)var;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i0 = 0; i0 < S; i0 += BN_HBLK) {
                int64_t m = S - i0 < BN_HBLK ? S - i0 : BN_HBLK;
                h.ld(buf, xp + (n * C + c) * S + i0, m);
                /* ((x - mean) * invstd) * w + b, each step in f32 */
#pragma omp simd
                for (int64_t i = 0; i < m; i++) {
                    float t = (buf[i] - mh) * ih;
                    t = t * wc;
                    buf[i] = t + bc;
                }
                h.st(yp + (n * C + c) * S + i0, buf, m);
            }
    }
}

/* dx = (dy - sum_dy/M - (x - mean)*invstd*sum_dyxh/M) * w*invstd (the f32
 * kernel's arithmetic on the converted rows); dw, db in their own dtype */
void CT_ISA_NAME(ct__bn_bwd_half)(const ct_tensor *x, const ct_tensor *g, const ct_tensor *w, const float *mean,
                        const float *invstd, ct_tensor *dx, ct_tensor *dw, ct_tensor *db) {
    int64_t N = x->sizes[0], C = x->sizes[1];
    int64_t S = (N > 0 && C > 0) ? ct_numel((ct_tensor *)x) / (N * C) : 0;
    const bn_half_io h = bn_half(x->dtype);
    const uint16_t *xp = ct__ptr((ct_tensor *)x), *gp = ct__ptr((ct_tensor *)g);
    uint16_t *op = dx ? ct__ptr(dx) : NULL;
    const double M = (double)(N * S);
    const int round_stats = !(w && w->dtype == CT_F32); /* as the forward normalized */
#pragma omp parallel for if (N * C * S > BN_GRAIN) schedule(static)
    for (int64_t c = 0; c < C; c++) {
        float bx[BN_HBLK], bg[BN_HBLK];
        const double mu = round_stats ? (double)bn_round(mean[c], h.dt) : (double)mean[c];
        const double is = round_stats ? (double)bn_round(invstd[c], h.dt) : (double)invstd[c];
        double sdy = 0, sdx = 0;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i0 = 0; i0 < S; i0 += BN_HBLK) {
                int64_t m = S - i0 < BN_HBLK ? S - i0 : BN_HBLK;
                h.ld(bx, xp + (n * C + c) * S + i0, m);
                h.ld(bg, gp + (n * C + c) * S + i0, m);
                double r1 = 0, r2 = 0;
#pragma omp simd reduction(+ : r1, r2)
                for (int64_t i = 0; i < m; i++) {
                    r1 += (double)bg[i];
                    r2 += (double)bg[i] * ((double)bx[i] - mu);
                }
                sdy += r1;
                sdx += r2;
            }
        const double sdyxh = sdx * is;
        if (dw) ct__store_f64((char *)ct__ptr(dw) + c * (int64_t)ct_dtype_size(dw->dtype), dw->dtype, sdyxh);
        if (db) ct__store_f64((char *)ct__ptr(db) + c * (int64_t)ct_dtype_size(db->dtype), db->dtype, sdy);
        if (!op) continue;
        const float k = (float)((double)bn_param(w, c, 1.0f) * is), mdy = (float)(M > 0 ? sdy / M : 0.0);
        const float proj = (float)(M > 0 ? is * sdyxh / M : 0.0), mut = (float)mu;
        for (int64_t n = 0; n < N; n++)
            for (int64_t i0 = 0; i0 < S; i0 += BN_HBLK) {
                int64_t m = S - i0 < BN_HBLK ? S - i0 : BN_HBLK;
                h.ld(bx, xp + (n * C + c) * S + i0, m);
                h.ld(bg, gp + (n * C + c) * S + i0, m);
#pragma omp simd
                for (int64_t i = 0; i < m; i++) bx[i] = (bg[i] - mdy - (bx[i] - mut) * proj) * k;
                h.st(op + (n * C + c) * S + i0, bx, m);
            }
    }
}

#ifdef BN_ENTRY_POINTS
void ct__bn_fwd_half_avx2(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, ct_tensor *y, float *mo,
                          float *io, float *vo, double eps);
void ct__bn_bwd_half_avx2(const ct_tensor *x, const ct_tensor *g, const ct_tensor *w, const float *mean,
                          const float *invstd, ct_tensor *dx, ct_tensor *dw, ct_tensor *db);
static void bn_fwd_half(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, ct_tensor *y, float *mo,
                        float *io, float *vo, double eps) {
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__bn_fwd_half_avx2(x, w, b, y, mo, io, vo, eps);
    else ct__bn_fwd_half_default(x, w, b, y, mo, io, vo, eps);
}
static void bn_bwd_half(const ct_tensor *x, const ct_tensor *g, const ct_tensor *w, const float *mean,
                        const float *invstd, ct_tensor *dx, ct_tensor *dw, ct_tensor *db) {
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__bn_bwd_half_avx2(x, g, w, mean, invstd, dx, dw, db);
    else ct__bn_bwd_half_default(x, g, w, mean, invstd, dx, dw, db);
}
/* ---- entry points: the AVX2 build when the CPU has it -------------------- */
#define BN_ENTRY(T, SUF)                                                                          \
    void ct__bn_fwd_##SUF##_avx2(const T *x, const T *w, const T *b, T *y, double *mean, double *var, \
                                 int64_t N, int64_t C, int64_t S, double eps);                      \
    void ct__bn_bwd_##SUF##_avx2(const T *x, const T *dy, const T *w, const T *mean, const T *invstd, \
                                 T *dx, T *dw, T *db, int64_t N, int64_t C, int64_t S);            \
    void ct__bn_eval_##SUF##_avx2(const T *x, const double *scale, const double *shift, T *y,      \
                                  int64_t N, int64_t C, int64_t S, int relu);                       \
    static void ct__bn_fwd_##SUF(const T *x, const T *w, const T *b, T *y, double *mean, double *var, \
                          int64_t N, int64_t C, int64_t S, double eps) {                          \
        if (ct__cpu_cap() >= CT_CAP_AVX2) ct__bn_fwd_##SUF##_avx2(x, w, b, y, mean, var, N, C, S, eps); \
        else ct__bn_fwd_##SUF##_default(x, w, b, y, mean, var, N, C, S, eps);                     \
    }                                                                                             \
    static void ct__bn_bwd_##SUF(const T *x, const T *dy, const T *w, const T *mean, const T *invstd, \
                          T *dx, T *dw, T *db, int64_t N, int64_t C, int64_t S) {                 \
        if (ct__cpu_cap() >= CT_CAP_AVX2) ct__bn_bwd_##SUF##_avx2(x, dy, w, mean, invstd, dx, dw, db, N, C, S); \
        else ct__bn_bwd_##SUF##_default(x, dy, w, mean, invstd, dx, dw, db, N, C, S);            \
    }                                                                                             \
    static void ct__bn_eval_##SUF(const T *x, const double *scale, const double *shift, T *y, int64_t N, \
                           int64_t C, int64_t S, int relu) {                                      \
        if (ct__cpu_cap() >= CT_CAP_AVX2) ct__bn_eval_##SUF##_avx2(x, scale, shift, y, N, C, S, relu); \
        else ct__bn_eval_##SUF##_default(x, scale, shift, y, N, C, S, relu);                      \
    }

BN_ENTRY(float, f32)
BN_ENTRY(double, f64)
/* ---- the table ops' kernels ---------------------------------------------- *
 * The op layer (src/ops/batch_norm.c) checks the arguments and passes
 * contiguous tensors of one dtype (f32 or f64), x [N, C, *], the others [C].
 * Parameters are copied into a local before any loop (see elementwise.c). */
static void bn_geom(const ct_tensor *x, int64_t *N, int64_t *C, int64_t *S) {
    *N = x->sizes[0];
    *C = x->sizes[1];
    *S = (*N > 0 && *C > 0) ? ct_numel((ct_tensor *)x) / (*N * *C) : 0;
}

/* in: x, [w], [b]; out: y, mean, invstd, var (biased), the statistics in x's
 * dtype, invstd = 1/sqrt(var + eps) computed in double (f16/bf16: above) */
static ct_status k_bn_fwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    const ct_p_batch_norm p = a->p.batch_norm;
    ct_tensor *x = in[0], *w = p.has_weight ? in[1] : NULL, *b = p.has_bias ? in[1 + p.has_weight] : NULL;
    int64_t N, C, S;
    bn_geom(x, &N, &C, &S);
    if (C == 0) return CT_OK;
    if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
        bn_fwd_half(x, w, b, out[0], ct__ptr(out[1]), ct__ptr(out[2]), ct__ptr(out[3]), p.eps);
        return CT_OK;
    }
    double *st = malloc(sizeof(double) * 2 * (size_t)C);
    if (!st) return ct__error_status(CT_ERR_OOM, "batch_norm: out of memory");
    double *mean = st, *var = st + C;
#define BN_FWD(T, SUF)                                                                            \
    do {                                                                                          \
        ct__bn_fwd_##SUF(ct__ptr(x), w ? ct__ptr(w) : NULL, b ? ct__ptr(b) : NULL, ct__ptr(out[0]), \
                         mean, var, N, C, S, p.eps);                                              \
        T *mo = ct__ptr(out[1]), *io = ct__ptr(out[2]), *vo = ct__ptr(out[3]);                   \
        for (int64_t c = 0; c < C; c++) {                                                         \
            mo[c] = (T)mean[c];                                                                   \
            io[c] = (T)(1.0 / sqrt(var[c] + p.eps));                                              \
            vo[c] = (T)var[c];                                                                    \
        }                                                                                         \
    } while (0)
    if (x->dtype == CT_F32) BN_FWD(float, f32);
    else BN_FWD(double, f64);
#undef BN_FWD
    free(st);
    return CT_OK;
}

/* in: x, g, [w], mean, invstd; out: dx, dw, db (each may be NULL) */
static ct_status k_bn_bwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    const ct_p_batch_norm p = a->p.batch_norm;
    ct_tensor *x = in[0], *g = in[1], *w = p.has_weight ? in[2] : NULL;
    ct_tensor *mean = in[2 + p.has_weight], *is = in[3 + p.has_weight];
    int64_t N, C, S;
    bn_geom(x, &N, &C, &S);
    if (C == 0) return CT_OK;
#define OPT(t) ((t) ? ct__ptr(t) : NULL)
    if ((x->dtype == CT_F16 || x->dtype == CT_BF16) && (mean->dtype != CT_F32 || is->dtype != CT_F32))
        return ct__error_status(CT_ERR_DTYPE, "batch_norm_backward: %s input: expected the float32 mean and "
                                "invstd of the forward, got %s and %s", ct_dtype_name(x->dtype),
                                ct_dtype_name(mean->dtype), ct_dtype_name(is->dtype));
    if (x->dtype == CT_F16 || x->dtype == CT_BF16)
        bn_bwd_half(x, g, w, ct__ptr(mean), ct__ptr(is), out[0], out[1], out[2]);
    else if (x->dtype == CT_F32)
        ct__bn_bwd_f32(ct__ptr(x), ct__ptr(g), OPT(w), ct__ptr(mean), ct__ptr(is), OPT(out[0]),
                       OPT(out[1]), OPT(out[2]), N, C, S);
    else
        ct__bn_bwd_f64(ct__ptr(x), ct__ptr(g), OPT(w), ct__ptr(mean), ct__ptr(is), OPT(out[0]),
                       OPT(out[1]), OPT(out[2]), N, C, S);
#undef OPT
    return CT_OK;
}

/* in: x, running_mean, running_var, [w], [b]; out: y.  Per channel, in
 * double: scale = 1/sqrt(rv + eps) * w, shift = b - rm * scale */
static ct_status k_bn_eval(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    const ct_p_batch_norm p = a->p.batch_norm;
    ct_tensor *x = in[0], *w = p.has_weight ? in[3] : NULL, *b = p.has_bias ? in[3 + p.has_weight] : NULL;
    int64_t N, C, S;
    bn_geom(x, &N, &C, &S);
    if (ct_numel(x) == 0) return CT_OK;
    double *st = malloc(sizeof(double) * 2 * (size_t)C);
    if (!st) return ct__error_status(CT_ERR_OOM, "batch_norm: out of memory");
#define BN_EV(T, SUF)                                                                             \
    do {                                                                                          \
        const T *mp = ct__ptr(in[1]), *vp = ct__ptr(in[2]);                                       \
        const T *wp = w ? ct__ptr(w) : NULL, *bp = b ? ct__ptr(b) : NULL;                         \
        for (int64_t c = 0; c < C; c++) {                                                         \
            double sc = 1.0 / sqrt((double)vp[c] + p.eps) * (wp ? (double)wp[c] : 1.0);           \
            st[c] = sc;                                                                           \
            st[C + c] = (bp ? (double)bp[c] : 0.0) - (double)mp[c] * sc;                          \
        }                                                                                         \
        ct__bn_eval_##SUF(ct__ptr(x), st, st + C, ct__ptr(out[0]), N, C, S, p.relu);              \
    } while (0)
    if (x->dtype == CT_F16 || x->dtype == CT_BF16) {
        /* f16/bf16: scale and shift from the half parameters (read exactly),
         * each channel row converted to f32 in L1 blocks, y = x*scale + shift
         * in f32 (the f32 kernel's arithmetic) and rounded once at the store */
        const ct_ew_vtab *vt = ct__ew_vtab();
        int bf = x->dtype == CT_BF16;
        void (*ld)(float *, const uint16_t *, int64_t) = bf ? vt->bf16_to_f32 : vt->f16_to_f32;
        void (*sto)(uint16_t *, const float *, int64_t) = bf ? vt->f32_to_bf16 : vt->f32_to_f16;
        for (int64_t c = 0; c < C; c++) {
            double v = ct__load_f64((const uint16_t *)ct__ptr(in[2]) + c, x->dtype);
            double sc = 1.0 / sqrt(v + p.eps) * (w ? ct__load_f64((const uint16_t *)ct__ptr(w) + c, x->dtype) : 1.0);
            st[c] = sc;
            st[C + c] = (b ? ct__load_f64((const uint16_t *)ct__ptr(b) + c, x->dtype) : 0.0) -
                        ct__load_f64((const uint16_t *)ct__ptr(in[1]) + c, x->dtype) * sc;
        }
        const uint16_t *xp = ct__ptr(x);
        uint16_t *yp = ct__ptr(out[0]);
        const int relu = p.relu;
#pragma omp parallel for if (N * C * S > BN_GRAIN) schedule(static)
        for (int64_t r = 0; r < N * C; r++) {
            const float a = (float)st[r % C], sh = (float)st[C + r % C];
            float buf[1024];
            for (int64_t i0 = 0; i0 < S; i0 += 1024) {
                int64_t m = S - i0 < 1024 ? S - i0 : 1024;
                ld(buf, xp + r * S + i0, m);
                if (relu)
                    for (int64_t i = 0; i < m; i++) {
                        float v = buf[i] * a + sh;
                        buf[i] = v <= 0.0f ? 0.0f : v;
                    }
                else
                    for (int64_t i = 0; i < m; i++) buf[i] = buf[i] * a + sh;
                sto(yp + r * S + i0, buf, m);
            }
        }
    } else if (x->dtype == CT_F32) BN_EV(float, f32);
    else BN_EV(double, f64);
#undef BN_EV
    free(st);
    return CT_OK;
}

void ct__cpu_register_bn(ct_kernel_fn *t) {
    t[CT_OP_batch_norm_fwd] = k_bn_fwd;
    t[CT_OP_batch_norm_bwd] = k_bn_bwd;
    t[CT_OP_batch_norm_eval] = k_bn_eval;
    ct__kernel_half[CT_CPU][CT_OP_batch_norm_eval] = CT_HALF_F16 | CT_HALF_BF16;
    ct__kernel_half[CT_CPU][CT_OP_batch_norm_fwd] = CT_HALF_F16 | CT_HALF_BF16;
    ct__kernel_half[CT_CPU][CT_OP_batch_norm_bwd] = CT_HALF_F16 | CT_HALF_BF16;
}
#endif
