/* conv.c (cpu) -- kernels of the conv family: convolution (im2col + GEMM),
 * transposed convolution (GEMM + col2im), im2col/col2im, pooling and
 * interpolation.  The op layer (src/ops/conv.c) hands these kernels
 * contiguous f32/f64 tensors and the geometry in the op's parameters:
 *
 *   conv, conv_transpose, im2col, col2im: a->p.conv (params_conv.def)
 *     batch N, in_channels C, out_channels Co, groups
 *     image_size[3], grid_size[3], kernel_size[3] (d,h,w; image: the image
 *       side, grid: the window positions; for conv_transpose the image is
 *       the output), stride[3], padding[3] (leading side), dilation[3]
 *     conv_wgrad: the weight gradient (ct__conv_wgrad dispatches it, never
 *     recorded), the conv's geometry: in[0] the image-side tensor
 *     [N, in_channels, image], in[1] the grid-side one [N, out_channels,
 *     grid], out[0] [out_channels, in_channels/groups, k]
 *   pooling on planes [P, H, W] -> [P, Ho, Wo]: a->p.pool (params_pool.def)
 *     planes P, input_size {H, W}, output_size {Ho, Wo}, kernel_size,
 *     stride, padding, dilation {h, w}
 *     avg_pool: count_include_pad, divisor_override (<= 0: none)
 *     max_pool_backward (the pool's parameters): in[0] the output gradient
 *     [P, Ho*Wo], in[1] the indices, out[0] the input gradient [P, H*W]
 *   interpolate on planes: a->p.resample (params_resample.def)
 *     planes, input_size, output_size, mode, align_corners,
 *     scales_h/scales_w (0: none)
 *
 * OpenMP threads the im2col/col2im loops; OpenBLAS threads the GEMMs
 * (they never run nested, so the two never oversubscribe). */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../../ops/iter.h"
#include "../../ops/conv_impl.h"
#include "../../ops/route.h"
#include "blas.h"
#include "cpu_caps.h"
#include "gemm_impl.h"
#ifdef CT_HAVE_DNNL
#include "conv_dnnl.h"
#endif

typedef struct ct_win {
    int64_t img[3], grid[3], k[3], s[3], p[3], d[3];
} ct_win;

typedef struct ct_pool {
    int64_t H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t count_pad, divisor;
} ct_pool;

/* BLAS calls with the determinism guard (see ct__blas_guard_begin) */
/* Compiled twice (runtime CPU dispatch, src/backend/cpu/cpu_caps.h): here
 * for baseline x86-64 and by conv_avx2.c, which includes this file with
 * CT_ISA_NAME adding an _avx2 suffix, for AVX2 + FMA; src/ops/dispatch.c
 * registers the set the CPU can run. */
#ifndef CT_ISA_NAME
#define CT_ISA_NAME(f) f
#endif

static void gemm_f32(CBLAS_LAYOUT l, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                     float al, const float *a, int lda, const float *b, int ldb, float be, float *c,
                     int ldc) {
    int g = ct__blas_guard_begin(2.0 * m * n * k);
    cblas_sgemm(l, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
    ct__blas_guard_end(g);
}
static void gemm_f64(CBLAS_LAYOUT l, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k,
                     double al, const double *a, int lda, const double *b, int ldb, double be,
                     double *c, int ldc) {
    int g = ct__blas_guard_begin(2.0 * m * n * k);
    cblas_dgemm(l, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
    ct__blas_guard_end(g);
}

#define T float
#define FN(name) name##_f32
#define GEMM gemm_f32
#define CT_CONV_F32 1
#include "conv_tmpl.h"
#undef CT_CONV_F32
#undef T
#undef FN
#undef GEMM

#define T double
#define FN(name) name##_f64
#define GEMM gemm_f64
#include "conv_tmpl.h"
#undef T
#undef FN
#undef GEMM

static ct_win win_of(const ct_args *a) {
    const ct_p_conv *pc = &a->p.conv;
    ct_win g;
    for (int j = 0; j < 3; j++) {
        g.img[j] = pc->image_size[j];
        g.grid[j] = pc->grid_size[j];
        g.k[j] = pc->kernel_size[j];
        g.s[j] = pc->stride[j];
        g.p[j] = pc->padding[j];
        g.d[j] = pc->dilation[j];
    }
    return g;
}

static ct_pool pool_of(const ct_args *a) {
    const ct_p_pool *p = &a->p.pool;
    ct_pool q;
    q.H = p->input_size[0]; q.W = p->input_size[1]; q.Ho = p->output_size[0]; q.Wo = p->output_size[1];
    q.kh = p->kernel_size[0]; q.kw = p->kernel_size[1]; q.sh = p->stride[0]; q.sw = p->stride[1];
    q.ph = p->padding[0]; q.pw = p->padding[1]; q.dh = p->dilation[0]; q.dw = p->dilation[1];
    q.count_pad = p->count_include_pad;
    q.divisor = p->divisor_override;
    return q;
}

/* interpolate's planes (the kernel reads H, W, Ho, Wo only) */
static ct_pool planes_of_resample(const ct_args *a) {
    const ct_p_resample *r = &a->p.resample;
    ct_pool q = {.H = r->input_size[0], .W = r->input_size[1], .Ho = r->output_size[0],
                 .Wo = r->output_size[1]};
    return q;
}

static ct_status bad_dtype(const char *op, ct_dtype dt) {
    return ct__error_status(CT_ERR_DTYPE, "%s: no CPU kernel for dtype %s", op, ct_dtype_name(dt));
}

/* The oneDNN path (conv_dnnl.c, built when CMake finds libdnnl): f32
 * convolutions that ct__dnnl_want routes there run through oneDNN; the
 * kernels below stay the fallback (no oneDNN, f64, a geometry oneDNN
 * cannot express, deterministic algorithms on). */
#ifdef CT_HAVE_DNNL
/* conv and conv_wgrad: in_channels is the image side's channels,
 * out_channels the grid side's; conv_transpose (BWD_DATA): the reverse */
static int via_dnnl(int kind, const ct_args *a, void *img, void *w, void *bias, void *grid,
                    const ct__dnnl_wid *wid, int bf16) {
    const ct_p_conv *pc = &a->p.conv;
    int64_t geom[4] = {pc->batch, pc->in_channels, pc->out_channels, pc->groups};
    if (kind == CT_DNNL_BWD_DATA) { geom[1] = pc->out_channels; geom[2] = pc->in_channels; }
    if (bf16 ? !ct__dnnl_allowed() : !ct__dnnl_want(kind, geom, pc)) return 0;
    return ct__dnnl_conv(kind, geom, pc, img, w, bias, grid, wid, bf16);
}
#endif

/* A bf16 convolution oneDNN did not run (CT_DNNL=0, deterministic
 * algorithms, a geometry it refused): the f32 kernel on f32 copies, the
 * results rounded back -- what the op layer does for a kernel without
 * bf16 (the bf16 kernels are registered on AVX512_BF16 CPUs only, see
 * ct__cpu_register_conv). */
static ct_status half_via_f32(ct_kernel_fn fn, ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                              const ct_args *a) {
    ct_tensor *fi[4] = {NULL, NULL, NULL, NULL}, *fo[2] = {NULL, NULL};
    ct_status st = CT_ERR_OOM;
    if (nin > 4 || nout > 2) return ct__error_status(CT_ERR_ARG, "conv: internal operand count");
    for (int i = 0; i < nin; i++)
        if (in[i] && !(fi[i] = ct__contig_as(in[i], in[i]->dtype == CT_BF16 ? CT_F32 : in[i]->dtype))) goto done;
    for (int i = 0; i < nout; i++)
        if (!(fo[i] = ct__alloc(out[i]->sizes, out[i]->ndim, CT_F32, CT_CPU))) goto done;
    st = fn(fo, nout, fi, nin, a);
    for (int i = 0; !st && i < nout; i++) {
        ct_tensor *o1[1] = {out[i]}, *i1[1] = {fo[i]};
        st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL);
    }
done:
    for (int i = 0; i < 4; i++) ct_release(fi[i]);
    for (int i = 0; i < 2; i++) ct_release(fo[i]);
    if (st == CT_ERR_OOM && !ct_last_error_code()) return ct__error_status(CT_ERR_OOM, "conv: out of memory");
    return st;
}

/* conv_wgrad_groups' single-threaded GEMMs, C[M,N] = A[M,K] . Bt[N,K]^T
 * + beta C: f32 through ctorch's own GEMM on AVX2 CPUs (bit-for-bit the
 * same on any thread count; BLAS otherwise or when it cannot get memory),
 * f64 through BLAS (single-threaded inside the parallel region) */
static void gemm1_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *Bt,
                      int64_t ldb, float beta, float *C, int64_t ldc) {
    if (ct__cpu_cap() >= CT_CAP_AVX2 &&
        ct__sgemm_avx2(M, N, K, 1.0f, A, lda, 1, Bt, 1, ldb, beta, NULL, C, ldc, 1) == 0)
        return;
    gemm_f32(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, Bt,
             (int)ldb, beta, C, (int)ldc);
}
static void gemm1_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda,
                      const double *Bt, int64_t ldb, double beta, double *C, int64_t ldc) {
    gemm_f64(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0, A, (int)lda, Bt,
             (int)ldb, beta, C, (int)ldc);
}

/* Many groups, each a GEMM worth a thread of its own (per group, grid-side
 * channels and column rows at least 8 on one side and 32 on the other;
 * at least two groups per thread): vmap's per-sample weight gradients
 * ([B*Cout, C, k] from one image of B*C channels in B groups).  oneDNN's
 * grouped backward-weights kernel took 19 ms for the FashionMNIST CNN's
 * 32 -> 64 layer at batch 64 (one thread, a loaded machine) where
 * conv_wgrad_groups took 8-10 ms; ResNeXt's 32 groups of 4 channels and
 * depthwise convs stay where they were. */
static bool wgrad_by_groups(const ct_p_conv *pc, const ct_win *g, int nt) {
    int64_t G = pc->groups, K = g->k[0] * g->k[1] * g->k[2];
    int64_t L = g->grid[0] * g->grid[1] * g->grid[2];
    if (G < 2 || G < 2 * (int64_t)nt || pc->out_channels % G || pc->in_channels % G) return false;
    int64_t Og = pc->out_channels / G, CK = pc->in_channels / G * K;
    int64_t lo = Og < CK ? Og : CK, hi = Og < CK ? CK : Og; /* the GEMM's sides (see there) */
    return lo >= 8 && hi >= 32 && L >= 16 && CK * L <= ((int64_t)1 << 20) && Og <= INT_MAX &&
           CK <= INT_MAX && L <= INT_MAX;
}

static ct_status k_conv_wgrad(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                              const ct_args *a) {
    (void)nout; (void)nin;
    const ct_p_conv *pc = &a->p.conv;
    ct_win g = win_of(a);
    int nt = ct__num_threads();
    if (out[0]->dtype == CT_BF16) {
#ifdef CT_HAVE_DNNL
        if (via_dnnl(CT_DNNL_BWD_WEIGHTS, a, ct__ptr(in[0]), ct__ptr(out[0]), NULL, ct__ptr(in[1]), NULL, 1))
            return CT_OK;
#endif
        return half_via_f32(k_conv_wgrad, out, nout, in, nin, a);
    }
    if (wgrad_by_groups(pc, &g, nt)) {
        if (out[0]->dtype == CT_F32)
            return conv_wgrad_groups_f32(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), pc->batch,
                                         pc->in_channels, pc->out_channels, pc->groups, &g, nt,
                                         gemm1_f32);
        if (out[0]->dtype == CT_F64)
            return conv_wgrad_groups_f64(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), pc->batch,
                                         pc->in_channels, pc->out_channels, pc->groups, &g, nt,
                                         gemm1_f64);
    }
#ifdef CT_HAVE_DNNL
    if (out[0]->dtype == CT_F32 &&
        via_dnnl(CT_DNNL_BWD_WEIGHTS, a, ct__ptr(in[0]), ct__ptr(out[0]), NULL, ct__ptr(in[1]), NULL, 0))
        return CT_OK;
#endif
    if (out[0]->dtype == CT_F32)
        return conv_wgrad_f32(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), pc->batch,
                              pc->in_channels, pc->out_channels, pc->groups, &g);
    if (out[0]->dtype == CT_F64)
        return conv_wgrad_f64(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), pc->batch,
                              pc->in_channels, pc->out_channels, pc->groups, &g);
    return bad_dtype("conv weight gradient", out[0]->dtype);
}

/* post_relu's epilogue where the conv itself did not apply it: one pass
 * over the (contiguous) result, max(v, 0) with NaN kept as ct_relu does */
#define RELU_PASS(T, NAME)                                                   \
    static void NAME(T *o, int64_t n) {                                      \
        int nt = n >= (1 << 16) ? ct__num_threads() : 1;                     \
        _Pragma("omp parallel for simd schedule(static) num_threads(nt)")    \
        for (int64_t i = 0; i < n; i++) o[i] = o[i] < 0 ? (T)0 : o[i];       \
    }
RELU_PASS(float, relu_pass_f32)
RELU_PASS(double, relu_pass_f64)

/* ct_p_conv.blocked: [N, C/8, HW, 8] <-> [N, C, HW] (8- or 4-byte elements) */
#define BLK_COPY(T, NAME)                                                                    \
    static void NAME(T *dst, const T *src, int64_t N, int64_t C, int64_t HW, int to_plain) { \
        int64_t nb = N * (C / 8);                                                            \
        int nt = nb * HW * 8 >= (1 << 15) ? ct__num_threads() : 1;                           \
        _Pragma("omp parallel for schedule(static) num_threads(nt)")                         \
        for (int64_t q = 0; q < nb; q++) {                                                   \
            const int64_t n = q / (C / 8), c0 = q % (C / 8) * 8;                              \
            T *bp = (to_plain ? (T *)src : dst) + q * HW * 8;                                \
            T *pp = (to_plain ? dst : (T *)src) + (n * C + c0) * HW;                         \
            for (int64_t s = 0; s < HW; s++)                                                 \
                for (int j = 0; j < 8; j++) {                                                \
                    if (to_plain) pp[j * HW + s] = bp[s * 8 + j];                            \
                    else bp[s * 8 + j] = pp[j * HW + s];                                     \
                }                                                                            \
        }                                                                                    \
    }
BLK_COPY(float, blk_copy_4)
BLK_COPY(double, blk_copy_8)

static ct_status k_conv(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a);

/* A channel-blocked conv oneDNN did not take (no oneDNN, f64, deterministic
 * algorithms): the blocked operands through plain copies, the plain
 * convolution between. */
static ct_status conv_unblocked(ct_tensor *const *out, ct_tensor *const *in, int nin, const ct_args *a) {
    const ct_p_conv *pc = &a->p.conv;
    ct_args pa = *a;
    pa.p.conv.blocked = 0;
    ct_dtype dt = out[0]->dtype;
    size_t es = ct_dtype_size(dt);
    if (es != 4 && es != 8) return bad_dtype("conv (channel-blocked)", dt);
    int64_t N = pc->batch, C = pc->in_channels, Co = pc->out_channels;
    int64_t H = pc->image_size[1], W = pc->image_size[2], Ho = pc->grid_size[1], Wo = pc->grid_size[2];
    ct_tensor *xp = NULL, *yp = NULL;
    ct_status st = CT_ERR_OOM;
    if (pc->blocked & 1) {
        if (!(xp = ct__alloc(CT_SHAPE(N, C, H, W), dt, CT_CPU))) goto done;
        if (es == 4) blk_copy_4(ct__ptr(xp), ct__ptr(in[0]), N, C, H * W, 1);
        else blk_copy_8(ct__ptr(xp), ct__ptr(in[0]), N, C, H * W, 1);
    }
    if ((pc->blocked & 2) && !(yp = ct__alloc(CT_SHAPE(N, Co, Ho, Wo), dt, CT_CPU))) goto done;
    ct_tensor *ins[3] = {xp ? xp : in[0], in[1], nin > 2 ? in[2] : NULL};
    ct_tensor *outs[1] = {yp ? yp : out[0]};
    st = k_conv(outs, 1, ins, nin, &pa);
    if (!st && yp) {
        if (es == 4) blk_copy_4(ct__ptr(out[0]), ct__ptr(yp), N, Co, Ho * Wo, 0);
        else blk_copy_8(ct__ptr(out[0]), ct__ptr(yp), N, Co, Ho * Wo, 0);
    }
done:
    ct_release(xp);
    ct_release(yp);
    if (st == CT_ERR_OOM && !ct_last_error_code()) return ct__error_status(CT_ERR_OOM, "conv: out of memory");
    return st;
}

static ct_status k_conv(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    (void)nout;
    const ct_p_conv *pc = &a->p.conv;
    ct_win g = win_of(a);
    ct_tensor *b = nin > 2 ? in[2] : NULL;
    ct_status st;
#ifdef CT_HAVE_DNNL
    /* the weights' reordered copy may be kept when they cannot change
     * while the result is in use (the op layer decides: keep_weights);
     * oneDNN applies post_relu itself (a post-op, keyed by it) */
    ct__dnnl_wid wid = {in[1]->storage, in[1]->offset};
    int keep = pc->keep_weights;
    if ((out[0]->dtype == CT_F32 || out[0]->dtype == CT_BF16) &&
        via_dnnl(CT_DNNL_FWD, a, ct__ptr(in[0]), ct__ptr(in[1]), b ? ct__ptr(b) : NULL, ct__ptr(out[0]),
                 keep ? &wid : NULL, out[0]->dtype == CT_BF16))
        return CT_OK;
#endif
    if (out[0]->dtype == CT_BF16) return half_via_f32(k_conv, out, nout, in, nin, a);
    if (pc->blocked) return conv_unblocked(out, in, nin, a);
    if (out[0]->dtype == CT_F32) {
        st = conv_fwd_f32(ct__ptr(in[0]), ct__ptr(in[1]), b ? ct__ptr(b) : NULL, ct__ptr(out[0]),
                          pc->batch, pc->in_channels, pc->out_channels, pc->groups, &g);
        if (!st && pc->post_relu) relu_pass_f32(ct__ptr(out[0]), ct_numel(out[0]));
        return st;
    }
    if (out[0]->dtype == CT_F64) {
        st = conv_fwd_f64(ct__ptr(in[0]), ct__ptr(in[1]), b ? ct__ptr(b) : NULL, ct__ptr(out[0]),
                          pc->batch, pc->in_channels, pc->out_channels, pc->groups, &g);
        if (!st && pc->post_relu) relu_pass_f64(ct__ptr(out[0]), ct_numel(out[0]));
        return st;
    }
    return bad_dtype("conv", out[0]->dtype);
}

static ct_status k_conv_transpose(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                  const ct_args *a) {
    (void)nout;
    const ct_p_conv *pc = &a->p.conv;
    ct_win g = win_of(a);
    ct_tensor *b = nin > 2 ? in[2] : NULL;
#ifdef CT_HAVE_DNNL
    /* the transposed conv is the conv's input gradient: out is the image
     * side, in[0] the grid side; the bias is added after */
    if (out[0]->dtype == CT_F32 &&
        via_dnnl(CT_DNNL_BWD_DATA, a, ct__ptr(out[0]), ct__ptr(in[1]), NULL, ct__ptr(in[0]), NULL, 0)) {
        if (b) {
            float *o = ct__ptr(out[0]);
            const float *bp = ct__ptr(b);
            int64_t N = pc->batch, Co = pc->out_channels, IS = g.img[0] * g.img[1] * g.img[2];
            for (int64_t n = 0; n < N; n++)
                for (int64_t c = 0; c < Co; c++) {
                    float *r = o + (n * Co + c) * IS;
                    for (int64_t q = 0; q < IS; q++) r[q] += bp[c];
                }
        }
        return CT_OK;
    }
    if (out[0]->dtype == CT_BF16 && !b &&
        via_dnnl(CT_DNNL_BWD_DATA, a, ct__ptr(out[0]), ct__ptr(in[1]), NULL, ct__ptr(in[0]), NULL, 1))
        return CT_OK;
#endif
    if (out[0]->dtype == CT_BF16) return half_via_f32(k_conv_transpose, out, nout, in, nin, a);
    if (out[0]->dtype == CT_F32)
        return convt_fwd_f32(ct__ptr(in[0]), ct__ptr(in[1]), b ? ct__ptr(b) : NULL, ct__ptr(out[0]),
                             pc->batch, pc->in_channels, pc->out_channels, pc->groups, &g);
    if (out[0]->dtype == CT_F64)
        return convt_fwd_f64(ct__ptr(in[0]), ct__ptr(in[1]), b ? ct__ptr(b) : NULL, ct__ptr(out[0]),
                             pc->batch, pc->in_channels, pc->out_channels, pc->groups, &g);
    return bad_dtype("conv_transpose", out[0]->dtype);
}

/* [N, C, img] -> [N, C*K, L] */
static ct_status k_im2col(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    (void)nout; (void)nin;
    ct_win g = win_of(a);
    int64_t N = a->p.conv.batch, C = a->p.conv.in_channels;
    int64_t IS = g.img[0] * g.img[1] * g.img[2];
    int64_t OS = C * g.k[0] * g.k[1] * g.k[2] * g.grid[0] * g.grid[1] * g.grid[2];
    for (int64_t n = 0; n < N; n++) {
        if (out[0]->dtype == CT_F32)
            im2col_f32((const float *)ct__ptr(in[0]) + n * C * IS, C, &g,
                       (float *)ct__ptr(out[0]) + n * OS);
        else if (out[0]->dtype == CT_F64)
            im2col_f64((const double *)ct__ptr(in[0]) + n * C * IS, C, &g,
                       (double *)ct__ptr(out[0]) + n * OS);
        else
            return bad_dtype("im2col", out[0]->dtype);
    }
    return CT_OK;
}

/* [N, C*K, L] -> [N, C, img] */
static ct_status k_col2im(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    (void)nout; (void)nin;
    ct_win g = win_of(a);
    int64_t N = a->p.conv.batch, C = a->p.conv.in_channels;
    int64_t IS = g.img[0] * g.img[1] * g.img[2];
    int64_t CS = C * g.k[0] * g.k[1] * g.k[2] * g.grid[0] * g.grid[1] * g.grid[2];
    ct_dtype dt = out[0]->dtype;
    if (dt != CT_F32 && dt != CT_F64) return bad_dtype("col2im", dt);
    memset(ct__ptr(out[0]), 0, ct_dtype_size(dt) * (size_t)(N * C * IS));
    for (int64_t n = 0; n < N; n++) {
        if (dt == CT_F32)
            col2im_f32((const float *)ct__ptr(in[0]) + n * CS, C, &g,
                       (float *)ct__ptr(out[0]) + n * C * IS);
        else
            col2im_f64((const double *)ct__ptr(in[0]) + n * CS, C, &g,
                       (double *)ct__ptr(out[0]) + n * C * IS);
    }
    return CT_OK;
}

/* the gradient routed by the indices (see ct__max_pool_backward):
 * in: g [P, Ho*Wo], idx; out: dx [P, H*W] */
static ct_status k_max_pool_backward(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                     const ct_args *a) {
    (void)nout; (void)nin;
    ct_pool q = pool_of(a);
    int64_t HW = q.H * q.W, L = q.Ho * q.Wo;
    if (out[0]->dtype == CT_F32)
        max_pool_bwd_f32(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), a->p.pool.planes, HW, L);
    else if (out[0]->dtype == CT_F64)
        max_pool_bwd_f64(ct__ptr(in[0]), ct__ptr(in[1]), ct__ptr(out[0]), a->p.pool.planes, HW, L);
    else return bad_dtype("max_pool backward", out[0]->dtype);
    return CT_OK;
}

/* out[0] values, out[1] int64 indices (may be NULL) */
static ct_status k_max_pool(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nin;
    ct_pool q = pool_of(a);
    int64_t *idx = (nout > 1 && out[1]) ? ct__ptr(out[1]) : NULL;
    int64_t P = a->p.pool.planes;
    if (out[0]->dtype == CT_F32) max_pool_f32(ct__ptr(in[0]), ct__ptr(out[0]), idx, P, &q);
    else if (out[0]->dtype == CT_F64) max_pool_f64(ct__ptr(in[0]), ct__ptr(out[0]), idx, P, &q);
    else return bad_dtype("max_pool", out[0]->dtype);
    return CT_OK;
}

static ct_status k_avg_pool(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nin; (void)nout;
    ct_pool q = pool_of(a);
    int64_t P = a->p.pool.planes;
    if (out[0]->dtype == CT_F32) avg_pool_f32(ct__ptr(in[0]), ct__ptr(out[0]), P, &q);
    else if (out[0]->dtype == CT_F64) avg_pool_f64(ct__ptr(in[0]), ct__ptr(out[0]), P, &q);
    else return bad_dtype("avg_pool", out[0]->dtype);
    return CT_OK;
}

static ct_status adaptive(ct_tensor *const *out, int nout, ct_tensor *const *in, const ct_args *a,
                          bool is_max) {
    ct_pool q = pool_of(a);
    int64_t *idx = (nout > 1 && out[1]) ? ct__ptr(out[1]) : NULL;
    if (out[0]->dtype == CT_F32)
        adaptive_pool_f32(ct__ptr(in[0]), ct__ptr(out[0]), idx, a->p.pool.planes, &q, is_max);
    else if (out[0]->dtype == CT_F64)
        adaptive_pool_f64(ct__ptr(in[0]), ct__ptr(out[0]), idx, a->p.pool.planes, &q, is_max);
    else return bad_dtype(is_max ? "adaptive_max_pool" : "adaptive_avg_pool", out[0]->dtype);
    return CT_OK;
}

static ct_status k_adaptive_avg_pool(ct_tensor *const *out, int nout, ct_tensor *const *in,
                                     int nin, const ct_args *a) {
    (void)nin;
    return adaptive(out, nout, in, a, false);
}

static ct_status k_adaptive_max_pool(ct_tensor *const *out, int nout, ct_tensor *const *in,
                                     int nin, const ct_args *a) {
    (void)nin;
    return adaptive(out, nout, in, a, true);
}

static ct_status k_interpolate(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                               const ct_args *a) {
    (void)nin; (void)nout;
    const ct_p_resample *r = &a->p.resample;
    ct_pool q = planes_of_resample(a);
    if (out[0]->dtype == CT_F32)
        return interp_f32(ct__ptr(in[0]), ct__ptr(out[0]), r->planes, &q, (int)r->mode,
                          r->align_corners, r->scales_h, r->scales_w);
    if (out[0]->dtype == CT_F64)
        return interp_f64(ct__ptr(in[0]), ct__ptr(out[0]), r->planes, &q, (int)r->mode,
                          r->align_corners, r->scales_h, r->scales_w);
    return bad_dtype("interpolate", out[0]->dtype);
}

/* interpolate's weights along one dim as a dense [out, in] matrix (the
 * derivative is its transpose; see src/ops/conv_impl.h) */
void CT_ISA_NAME(ct__interp_matrix)(int mode, bool align, int64_t in, int64_t out, double sc, double *m) {
    int64_t *ix = malloc(sizeof(int64_t) * 4 * (size_t)(out ? out : 1));
    double *wt = malloc(sizeof(double) * 4 * (size_t)(out ? out : 1));
    memset(m, 0, sizeof(double) * (size_t)(in * out));
    if (!ix || !wt) {
        free(ix);
        free(wt);
        return;
    }
    interp_table_f64(mode, align, in, out, sc, ix, wt);
    int taps = mode == CT_INTERP_BICUBIC ? 4 : (mode == CT_INTERP_NEAREST ||
                                                mode == CT_INTERP_NEAREST_EXACT) ? 1 : 2;
    for (int64_t i = 0; i < out; i++)
        for (int j = 0; j < taps; j++) m[i * in + ix[4 * i + j]] += wt[4 * i + j];
    free(ix);
    free(wt);
}

#ifdef CT_HAVE_DNNL
/* route.h's ct__conv_blocked_pays */
static int conv_blocked_pays(const ct_p_conv *pc) {
    int64_t geom[4] = {pc->batch, pc->in_channels, pc->out_channels, pc->groups};
    return pc->groups == 1 && ct__dnnl_want(CT_DNNL_FWD, geom, pc);
}
#endif

void CT_ISA_NAME(ct__cpu_register_conv)(ct_kernel_fn *t) {
#ifdef CT_HAVE_DNNL
    ct__conv_blocked_pays = conv_blocked_pays;
#endif
    t[CT_OP_conv] = k_conv;
    t[CT_OP_conv_wgrad] = k_conv_wgrad;
    t[CT_OP_max_pool_backward] = k_max_pool_backward;
    t[CT_OP_conv_transpose] = k_conv_transpose;
    t[CT_OP_im2col] = k_im2col;
    t[CT_OP_col2im] = k_col2im;
    t[CT_OP_max_pool] = k_max_pool;
    t[CT_OP_avg_pool] = k_avg_pool;
    t[CT_OP_adaptive_avg_pool] = k_adaptive_avg_pool;
    t[CT_OP_adaptive_max_pool] = k_adaptive_max_pool;
    t[CT_OP_interpolate] = k_interpolate;
#ifdef CT_HAVE_DNNL
    /* bf16 convolutions (autocast's) in bf16 through oneDNN, on CPUs that
     * multiply bf16 natively (its avx512_core_bf16 kernels); elsewhere the
     * op layer computes them in f32 copies as before */
    if (ct__gemm_bf16dot_ok()) {
        ct__kernel_half[CT_CPU][CT_OP_conv] |= CT_HALF_BF16;
        ct__kernel_half[CT_CPU][CT_OP_conv_wgrad] |= CT_HALF_BF16;
        ct__kernel_half[CT_CPU][CT_OP_conv_transpose] |= CT_HALF_BF16;
    }
#endif
}
