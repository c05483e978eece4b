/* gemm_impl.h -- private: ctorch's own packed f32 GEMM for AVX2 + FMA
 * (gemm_avx2.c).  Callers check ct__cpu_cap() >= CT_CAP_AVX2 first; on other
 * CPUs (or CT_CPU_CAPABILITY=default) they keep calling OpenBLAS. */
#ifndef CT_GEMM_IMPL_H
#define CT_GEMM_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

/* C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C, row-major C with row stride
 * ldc >= N (unit column stride); with bias != NULL, C[i][j] = alpha * (A @ B)[i][j]
 * + beta * bias[j] instead (bias: N floats, unit stride; C is not read), the
 * bias of a linear layer added as the tiles are stored rather than in a
 * pass over C of its own.  A and B have ANY element strides
 * (A[i][k] = A[i*sam + k*sak], B[k][n] = B[k*sbk + n*sbn]), so transposed or
 * sliced operands cost nothing extra: they are read through the packing
 * routines.  beta == 0: C is not read (NaN/Inf in C do not propagate).
 * Runs on up to nthreads OpenMP threads (1: no parallel region, so it may be
 * called from inside one).  Every element of C is computed by one thread in a
 * fixed K order, so the result is bit-for-bit the same run to run AND for any
 * thread count.  M, N, K >= 0.  Returns 0, or -1 when out of memory (C is
 * then unchanged). */
int ct__sgemm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam,
                   int64_t sak, const float *B, int64_t sbk, int64_t sbn, float beta,
                   const float *bias, float *C, int64_t ldc, int nthreads);

/* The same with explicit blocking (KC, MC rounded down to a multiple of 6,
 * NC to a multiple of 16; A rows read in place when sak == 1 and
 * N <= direct_n), for the tests to reach every loop with small shapes. */
int ct__sgemm_avx2_ex(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t sam, int64_t sak, const float *B, int64_t sbk, int64_t sbn,
                      float beta, const float *bias, float *C, int64_t ldc, int nthreads,
                      int kc_max, int mc_max, int nc_max, int direct_n);

/* Element types of ct__gemm_avx2_mixed's A and B. */
enum { CT_GEMM_F32 = 0, CT_GEMM_BF16 = 1, CT_GEMM_F16 = 2,
       /* a C only (ct__gemm_bf16dot): float storage holding each element
        * rounded to bf16 (what a bf16 C converted to f32 holds) */
       CT_GEMM_F32R = 3,
       /* an A or B of ct__gemm_avx2_mixed(_out): float storage whose
        * elements are rounded to bf16 (to nearest even, as ct_to_dtype
        * rounds) as they are packed -- the products of autocast's bf16
        * copy of a float32 operand, without the copy */
       CT_GEMM_F32B = 4 };

/* ct__sgemm_avx2 with A and B of type CT_GEMM_F32, _BF16, _F16 or _F32B
 * (C, bias f32): f16/bf16 elements are converted to f32 as the panels are
 * packed (exactly: every f16/bf16 value is an f32 value), F32B elements
 * rounded to bf16 values, so the products and the f32 accumulation are the
 * f32 kernel's, bit for bit what it gives on the operands converted to f32
 * (or rounded) first, without those copies.  Strides are in elements of
 * the operand's type.  Returns 0, or -1 (out of memory, bad type). */
int ct__gemm_avx2_mixed(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                        int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn,
                        float beta, const float *bias, float *C, int64_t ldc, int nthreads);

/* ct__gemm_avx2_mixed with C of type tc (CT_GEMM_BF16 or CT_GEMM_F16, row
 * stride ldc in its elements; or CT_GEMM_F32R, float storage): each element
 * is the f32 result above rounded once (to nearest even, as ct_to_dtype
 * rounds), bit for bit the f32 C of ct__gemm_avx2_mixed converted
 * afterwards, but without that f32 C: the tiles of each group of B panels
 * are rounded from a per-thread scratch right after they are computed.
 * Handles one K block (1 <= K <= KC, 256 unless CT_GEMM_BLOCK says
 * otherwise; with ct__gemm_longk > 0, K up to 4096: the panels hold all of
 * K and each tile runs the K blocks in turn, the same sums), alpha != 0, and
 * beta == 0 unless bias (C is never read); returns -2 for any other problem
 * (C untouched: the caller computes an f32 C and converts it), 0 when done,
 * -1 when out of memory or a type is bad. */
int ct__gemm_avx2_mixed_out(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                            int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk,
                            int64_t sbn, float beta, const float *bias, void *C, int tc,
                            int64_t ldc, int nthreads);

/* ct__gemm_avx2_mixed_out's A block (KiB) for K beyond one block (0, the
 * default: such products return -2); kib < 0 returns the setting, else
 * sets it and returns the old one (CT_GEMM_LONGK sets it at start) */
int ct__gemm_longk(int kib);

/* How many times ct__sgemm_avx2(_ex) ran in this process (for the tests of
 * the routing). */
long long ct__sgemm_avx2_calls(void);

/* The routing rule: 1 when ct__sgemm_avx2 is measured to beat OpenBLAS on
 * this M x N x K problem (see gemm_avx2.c); never on AVX-512 CPUs, where
 * OpenBLAS has AVX-512 kernels, except Zen 4 (ct__cpu_avx512_halved), where
 * ct__sgemm_avx2 runs the AVX-512 kernel of gemm_avx512.c.  CT_GEMM=blas|own
 * overrides it (read once). */
int ct__sgemm_avx2_preferred(int64_t M, int64_t N, int64_t K);

/* B [K, N] (element strides sbk, sbn) packed once into dst
 * (ct__sgemm_avx2_prepack_floats(N, K) floats, 64-byte aligned) for any
 * number of later products with it, ct__sgemm_avx2_prepacked: the same
 * results bit for bit as ct__sgemm_avx2 on B, without packing B.  The
 * packing depends on the K blocking, ct__sgemm_avx2_kc(K) (part of a
 * cache's key), and on the kernel ct__sgemm_avx2 runs (AVX-512's layout
 * on Zen 4: these functions follow it). */
int ct__sgemm_avx2_kc(int64_t K);
int64_t ct__sgemm_avx2_prepack_floats(int64_t N, int64_t K);
void ct__sgemm_avx2_prepack(int64_t N, int64_t K, const float *B, int64_t sbk, int64_t sbn, float *dst);
int ct__sgemm_avx2_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam,
                             int64_t sak, const float *bpre, float beta, const float *bias, float *C,
                             int64_t ldc, int nthreads);

/* ---- bf16 dot products (gemm_avx512.c) ------------------------------------------
 * 1 when this CPU has AVX512_BF16 (and the AVX-512 level is not turned off
 * with CT_CPU_CAPABILITY): ct__gemm_bf16dot can run. */
int ct__gemm_bf16dot_ok(void);

/* C = alpha * A @ B + beta * C (or + beta * bias, C not read), as
 * ct__sgemm_avx2, with the products of bf16 values: A and B are bf16
 * (ta/tb CT_GEMM_BF16) or f32 (CT_GEMM_F32: rounded to bf16, to nearest
 * even, as they are packed -- float32 matmul precision "medium"), summed
 * in f32 by vdpbf16ps (bf16 subnormals count as zero).  Any element
 * strides.  tc CT_GEMM_F32: C is float (row stride ldc); CT_GEMM_BF16: C
 * is bf16, each element the f32 result rounded once, for one K block only
 * (1 <= K <= the kernel's KC, alpha != 0, beta 0 unless bias: else -2, C
 * untouched); CT_GEMM_F32R: as CT_GEMM_BF16 with the rounded values
 * stored as floats (autocast's gradient of a float32 operand, whose bf16
 * copy's gradient would be converted back).  The bits do not depend on the thread count.  Returns 0, -1
 * (out of memory, a bad type, or no AVX512_BF16: ct__gemm_bf16dot_ok) or -2. */
int ct__gemm_bf16dot(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                     int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                     const float *bias, void *C, int tc, int64_t ldc, int nthreads);
/* ---- f32 on AVX-512 (gemm_avx512.c, the same loops and 12 x 32 tiles) ---------
 * 1 when the CPU runs AVX-512 (CT_CAP_AVX512 in use). */
int ct__sgemm_avx512_ok(void);
/* ct__sgemm_avx2's contract (any strides, alpha/beta/bias, bits independent
 * of the thread count) with 512-bit FMAs and 12 x 32 tiles of 24 zmm
 * accumulators: on Zen 4, whose 512-bit FMAs are two 256-bit halves, it
 * needs half the loads per FMA of the AVX2 kernel's 6 x 16 tiles.
 * ct__sgemm_avx2 hands its products here on such CPUs
 * (ct__cpu_avx512_halved).  bpre: B packed beforehand (ct__gemm_prepack
 * with ct__sgemm_avx512_pack_b at ct__sgemm_avx512_kc(K); B is then not
 * read), or NULL.  Returns 0, or -1 (out of memory, no AVX-512). */
int ct__sgemm_avx512(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam, int64_t sak,
                     const float *B, int64_t sbk, int64_t sbn, float beta, const float *bias, float *C, int64_t ldc,
                     int nthreads, const float *bpre);
int ct__sgemm_avx512_ex(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam, int64_t sak,
                        const float *B, int64_t sbk, int64_t sbn, float beta, const float *bias, float *C,
                        int64_t ldc, int nthreads, int kc_max, int mc_max, int nc_max);

/* Its panels are CT_GEMM512_NR columns wide; its K blocking for a product
 * of K, and one B panel packed for it (a ct_gemm_pack_fn, for
 * ct__gemm_prepack): the ct__sgemm_avx2_* prepack functions below use
 * these when ct__sgemm_avx2 routes to this kernel. */
#define CT_GEMM512_NR 32
#define CT_GEMM512_MR 12
/* gemm_avx512.c's settings, read once by plain code (gemm_common.c), and
 * whether the CPU can run it: that file is compiled for AVX-512, so none of
 * its functions may run before ok512 (f32) or ok (bf16) said yes. */
typedef struct ct_gemm512_cfg {
    int kc, mc, nc;    /* bf16 blocking (CT_GEMM_BF16_BLOCK=kc,mc,nc) */
    int kcw, mcw, ncw; /* f32 blocking (CT_GEMM_AVX512_BLOCK=kc,mc,nc) */
    int apack;         /* CT_GEMM_BF16_APACK=1: pack A even where it can be read in place */
    int ok, ok512;     /* AVX512_BF16 and AVX-512F; AVX-512F */
} ct_gemm512_cfg;
const ct_gemm512_cfg *ct__gemm512_cfg(void);
int ct__sgemm_avx512_kc(int64_t K);
void ct__sgemm_avx512_pack_b(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst);

/* The same with explicit blocking (kc rounded down to even, mc to a
 * multiple of 12, nc of 32), for the tests to reach every loop. */
int ct__gemm_bf16dot_ex(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                        int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                        const float *bias, void *C, int tc, int64_t ldc, int nthreads, int kc_max,
                        int mc_max, int nc_max);

/* ---- shared by the own GEMMs (gemm_common.c) ------------------------------------ */
/* C = beta * C, or beta * bias (C not read), for a product with K == 0 or
 * alpha == 0; beta == 0 writes zeros (NaN/Inf in C do not propagate). */
void ct__gemm_scale_c(int64_t M, int64_t N, float beta, const float *bias, float *C, int64_t ldc);
/* The thread split: nbm row panels, npn column panels; returns the thread
 * count to run (1 below ~1 MFLOP or with too few panels) and sets
 * *split_n (1: threads take column ranges, 0: row ranges); cols_first
 * prefers columns whenever there are enough of them. */
int ct__gemm_split(int nthreads, int64_t M, int64_t N, int64_t K, int64_t nbm, int64_t npn, int cols_first,
                   int *split_n);
/* The dynamic split of both own GEMMs: the split dimension (nsplit panels)
 * in units that the team's threads take in order from a shared counter
 * (the thread that starts first, or runs unpreempted, takes more; each
 * element of C is still computed by one thread in a fixed K order).
 * plan: the number of units for nt threads (repack: every unit packs the
 * other operand again, then each spans at least unit_min of the extent
 * rows or columns); *per: panels per unit at most.  take: the next unit's
 * panels [p0, p1) of np; 0 when none is left. */
int64_t ct__gemm_plan_units(int nt, int64_t nsplit, int repack, int64_t extent, int64_t unit_min, int64_t *per);
int ct__gemm_take_unit(atomic_llong *next, int64_t nunits, int64_t np, int64_t *p0, int64_t *p1);
/* Runs fn(ctx, w, t) for the workers w = 0..nt-1 on an OpenMP team (t the
 * team thread running it, for per-thread buffers; a smaller team runs some
 * workers one after another). */
typedef void (*ct_gemm_worker_fn)(const void *ctx, int w, int t);
void ct__gemm_team(int nt, ct_gemm_worker_fn fn, const void *ctx);
/* The own GEMMs (AVX2 and AVX-512) write an f32 C of at least `bytes` bytes that one K
 * block computes (beta 0, no bias) with non-temporal stores; bytes < 0
 * only reads.  Returns the previous value (tests). */
int64_t ct__gemm_stream_min_bytes(int64_t bytes);
/* Work units per thread of the own GEMMs' dynamic split (CT_GEMM_UNITS,
 * 4); units < 1 only reads.  Returns the previous value (tests, tuning). */
int ct__gemm_units(int units);
/* B packed once: for each K block of kc (the last shorter), its panels of
 * nr_w columns one after another, each [kcb][nr_w] floats, written by pack;
 * ct__gemm_prepack_floats(N, K, nr_w) floats. */
typedef void (*ct_gemm_pack_fn)(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst);
int64_t ct__gemm_prepack_floats(int64_t N, int64_t K, int nr_w);
void ct__gemm_prepack(int64_t N, int64_t K, int64_t kc, int nr_w, ct_gemm_pack_fn pack, const float *B,
                      int64_t sbk, int64_t sbn, float *dst);

#endif
