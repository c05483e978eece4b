/* gemm_avx2.c -- ctorch's own packed f32 GEMM for AVX2 + FMA (gemm_impl.h).
 *
 * The GotoBLAS / BLIS structure, per thread (each owns a block of C):
 *
 *   for jc in its columns by NC:
 *     for pc in K by KC:
 *       pack B[pc:pc+kc, jc:jc+nc] into NR=16-column panels  [nc/16][kc][16]
 *       for ic in its rows by MC:
 *         pack A[ic:ic+mc, pc:pc+kc] into MR=6-row panels    [mc/6][kc][6]
 *         for jg in nc by 8 x 16:      8 B micro-panels (128 KiB) stay in L2
 *           for ir in mc by 6:         the A block (mc x kc) stays in L2
 *             for jr in jg by 16:      the A micro-panel (6 KiB) stays in L1
 *               C[6x16] (+)= A panel @ B panel     (the micro-kernel)
 *
 * When a thread's rows fit in one A block and B's columns are strided
 * (x @ W^T: each panel is 16 contiguous rows of W) each B panel is packed
 * right before its only use instead, so the packed B never leaves L1; a
 * row-major B is packed a whole block at a time, row by row, so that it
 * streams.
 *
 * The micro-kernel keeps a 6 x 16 block of C in 12 ymm accumulators; per k
 * it loads 16 floats of B (2 ymm), broadcasts 6 floats of A and issues 12
 * FMAs.  Edges (M % 6, N % 16) are zero-padded by the packing routines and
 * the partial C tile goes through a small stack buffer, so the kernel itself
 * never branches on shape.  Transposed / strided operands are absorbed by
 * the packing routines (any element strides; 8 x 8 register transposes for
 * A and B^T).  When A has unit k-stride and N is small (the 4096 x 4096 @
 * 4096 x 64 case) the kernel reads A's rows in place instead of packing
 * them: with few columns the packing pass would cost as much as the
 * products it feeds.
 *
 * alpha and beta are applied when a tile is stored: the first K block
 * writes C = alpha*acc + beta*C (beta == 0: C is not read), later K blocks
 * C = C + alpha*acc.
 *
 * Threads split the rows of C (in 6-row units) or its 16-column panels into
 * one contiguous range each (the dimension whose split repeats less packing
 * work), and each packs its own operands: no barrier, no shared buffer, no
 * atomics.  Each element of C is computed by exactly one thread in the fixed
 * K order, so the result does not depend on the thread count at all.
 *
 * Blocking for Zen 3 (L1d 32 KiB, L2 512 KiB per core, L3 32 MiB): KC = 256
 * (a B micro-panel 256 x 16 floats = 16 KiB), MC = 144 (an A block 144 KiB),
 * NC = 4096 (a B block up to 4 MiB, L3).
 *
 * The library is built for baseline x86-64, so this file switches AVX2/FMA
 * on with a target pragma (like attention_avx2.c); callers check
 * ct__cpu_cap() >= CT_CAP_AVX2 before calling in. */
#ifndef __clang__ /* clang ignores it: CMakeLists.txt passes -mavx2 -mfma for this file */
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "../../ops/op_table.h"
#include "../../ops/route.h"
#include "cpu_caps.h"
#include "ew_vec.h"
#include "tr8.h"
#include "gemm_impl.h"


#define MR 6
#define NR 16
#define CT_AI __attribute__((always_inline)) static inline

/* blocking (CT_GEMM_BLOCK=kc,mc,nc,directN overrides them, for tuning) */
static int g_kc = 256, g_mc = 144, g_nc = 4096, g_direct_n = 128;
/* rows or columns of a work unit that packs the other operand again
 * (gemm_run; CT_GEMM_UNIT_MIN overrides it, for tuning) */
static int g_unit_min = 1024;
/* ct__gemm_avx2_mixed_out's A block (KiB) for K beyond one block
 * (CT_GEMM_LONGK; 0, the default: such products return -2, the caller's
 * f32 way -- see ct__gemm_avx2_mixed_out) */
static _Atomic int g_longk_kib = 0;
static int g_route = -1; /* -1 rule, 0 never (blas), 1 always (own) */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Products through the AVX-512 kernel of gemm_avx512.c instead (same
 * contract): on Zen 4 (ct__cpu_avx512_halved), CT_GEMM_AVX512=0|1 overrides */
static int g_use512;
static atomic_llong g_calls;

static void gemm_init(void) {
    const char *e512 = getenv("CT_GEMM_AVX512");
    g_use512 = e512 && (*e512 == '0' || *e512 == '1') ? *e512 == '1' && ct__sgemm_avx512_ok()
                                                      : ct__cpu_avx512_halved() && ct__sgemm_avx512_ok();
    const char *s = getenv("CT_GEMM_BLOCK");
    if (s) {
        int kc, mc, nc, dn;
        if (sscanf(s, "%d,%d,%d,%d", &kc, &mc, &nc, &dn) == 4 && kc >= 1 && kc <= 4096 &&
            mc >= MR && mc <= 4096 && nc >= NR && nc <= 65536 && dn >= 0) {
            g_kc = kc;
            g_mc = mc / MR * MR;
            g_nc = nc / NR * NR;
            g_direct_n = dn;
        }
    }
    const char *um = getenv("CT_GEMM_UNIT_MIN");
    if (um && atoi(um) >= NR) g_unit_min = atoi(um);
    const char *lk = getenv("CT_GEMM_LONGK");
    if (lk && *lk && atoi(lk) >= 0) g_longk_kib = atoi(lk);
    const char *r = getenv("CT_GEMM");
    if (r && !strcmp(r, "blas")) g_route = 0;
    else if (r && !strcmp(r, "own")) g_route = 1;
}

/* ---- the micro-kernel ------------------------------------------------------ */

/* acc -> C tile (16 floats at cp) following the alpha/beta rule above; the
 * first K block reads beta's operand at ip (C itself, or the bias row) */
CT_AI __m256 upd(__m256 acc, const float *cp, const float *ip, __m256 va, __m256 vb, int first,
                 int a1, int b0, int b1) {
    if (!a1) acc = _mm256_mul_ps(va, acc);
    if (first) {
        if (b0) return acc;
        __m256 c = _mm256_loadu_ps(ip);
        return b1 ? _mm256_add_ps(c, acc) : _mm256_fmadd_ps(vb, c, acc);
    }
    return _mm256_add_ps(_mm256_loadu_ps(cp), acc);
}

/* C[6 x 16] at c (row stride ldc) (+)= A panel @ B panel over kc.
 * A element (i, k) at a[i*ars + k*acs]; B panel [kc][16] (32-byte aligned).
 * The first K block's beta operand is row i at ci + i*ldci: C itself
 * (ci = c, ldci = ldc) or a bias row (ldci = 0). */
CT_AI void ukr_body(int64_t kc, const float *restrict a, int64_t ars, int64_t acs,
                    const float *restrict b, float *restrict c, int64_t ldc, const float *ci,
                    int64_t ldci, float alpha, float beta, int first) {
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    /* The C tile (both cache lines of each row when it straddles two) is
     * fetched while the k loop runs: into L2 at the start, then into L1
     * for writing 64 steps (~400 cycles) before the end.  Fetched into L1
     * at the start, the lines sat unused through the loop while the A panel
     * streamed past them and were often evicted again before the stores.
     * On one thread, 1024^3 ran ~12% below a run writing a cache-resident
     * dummy tile with the old scheme, ~5% with this one.  B needs no
     * software prefetch: the hardware prefetcher streams its panel (from
     * L2 in gemm_block's order); a prefetch per step, 8 lines ahead, cost
     * 2..3% for nothing. */
    const int nts = first == 2; /* C streamed (gemm_ctx.nts): its lines are not fetched */
    if (!nts)
        for (int i = 0; i < MR; i++) {
            _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T1);
            _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T1);
        }
#define CT_KSTEP                                                                             \
    do {                                                                                     \
        __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8), av;                       \
        av = _mm256_broadcast_ss(a);                                                         \
        c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);              \
        av = _mm256_broadcast_ss(a + ars);                                                   \
        c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);              \
        av = _mm256_broadcast_ss(a + 2 * ars);                                               \
        c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);              \
        av = _mm256_broadcast_ss(a + 3 * ars);                                               \
        c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);              \
        av = _mm256_broadcast_ss(a + 4 * ars);                                               \
        c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);              \
        av = _mm256_broadcast_ss(a + 5 * ars);                                               \
        c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);              \
        a += acs;                                                                            \
        b += NR;                                                                             \
    } while (0)
    int64_t k = 0, kpre = kc > 64 ? kc - 64 : 0;
#pragma GCC unroll 4
    for (; k < kpre; k++) CT_KSTEP;
    if (!nts)
        for (int i = 0; i < MR; i++) {
            __builtin_prefetch(c + i * ldc, 1, 3);
            __builtin_prefetch(c + i * ldc + NR - 1, 1, 3);
        }
#pragma GCC unroll 4
    for (; k < kc; k++) CT_KSTEP;
#undef CT_KSTEP
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    int a1 = alpha == 1.0f, b0 = beta == 0.0f, b1 = beta == 1.0f;
#define CT_ST(i, x0, x1)                                                                     \
    do {                                                                                     \
        float *cp = c + (i) * ldc;                                                           \
        const float *ip = ci + (i) * ldci;                                                   \
        __m256 r0 = upd(x0, cp, ip, va, vb, first, a1, b0, b1);                              \
        __m256 r1 = upd(x1, cp + 8, ip + 8, va, vb, first, a1, b0, b1);                      \
        if (nts) {                                                                           \
            _mm256_stream_ps(cp, r0);                                                        \
            _mm256_stream_ps(cp + 8, r1);                                                    \
        } else {                                                                             \
            _mm256_storeu_ps(cp, r0);                                                        \
            _mm256_storeu_ps(cp + 8, r1);                                                    \
        }                                                                                    \
    } while (0)
    CT_ST(0, c00, c01); CT_ST(1, c10, c11); CT_ST(2, c20, c21);
    CT_ST(3, c30, c31); CT_ST(4, c40, c41); CT_ST(5, c50, c51);
#undef CT_ST
}

/* first: 0 a later K block, 1 the first, 2 the first with C streamed
 * (non-temporal stores; C 64-byte aligned, ldc a multiple of 16) */

/* A packed: element (i, k) at a[k*6 + i] */
static void ukr_packed(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                       const float *ci, int64_t ldci, float alpha, float beta, int first) {
    ukr_body(kc, a, 1, MR, b, c, ldc, ci, ldci, alpha, beta, first);
}

/* A in place with unit k-stride: element (i, k) at a[i*lda + k] */
static void ukr_rows(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                     int64_t ldc, const float *ci, int64_t ldci, float alpha, float beta,
                     int first) {
    ukr_body(kc, a, lda, 1, b, c, ldc, ci, ldci, alpha, beta, first);
}

/* one tile of C: mr x nr (<= 6 x 16), beta's operand at ci (see ukr_body);
 * a partial tile goes through a buffer so the kernel always works on a
 * full 6 x 16 block */
static void tile(int64_t kc, const float *a, int64_t lda, int direct, const float *b, float *c,
                 int64_t ldc, const float *ci, int64_t ldci, int mr, int nr, float alpha,
                 float beta, int first) {
    if (mr == MR && nr == NR) {
        if (direct) ukr_rows(kc, a, lda, b, c, ldc, ci, ldci, alpha, beta, first);
        else ukr_packed(kc, a, b, c, ldc, ci, ldci, alpha, beta, first);
        return;
    }
    float t[MR * NR] = {0}; /* the lanes past mr x nr stay finite zeros */
    if (!(first && beta == 0.0f))
        for (int i = 0; i < mr; i++)
            memcpy(t + i * NR, first ? ci + i * ldci : c + i * ldc, sizeof(float) * (size_t)nr);
    first = first ? 1 : 0; /* the buffer is stored to plainly */
    if (direct) ukr_rows(kc, a, lda, b, t, NR, t, NR, alpha, beta, first);
    else ukr_packed(kc, a, b, t, NR, t, NR, alpha, beta, first);
    for (int i = 0; i < mr; i++) memcpy(c + i * ldc, t + i * NR, sizeof(float) * (size_t)nr);
}

/* ---- packing ----------------------------------------------------------------- */

/* F32B operands (and F32R results): f32 values rounded to bf16 values
 * (ew_vec's f32_to_bf16 then back: to nearest even, NaN -> 0xffff) */
CT_AI __m256 rnd_bf16(__m256 x) {
    const __m256i u = _mm256_castps_si256(x), hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), hi);
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(hi), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
static void round_bf16(float *p, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(p + i, rnd_bf16(_mm256_loadu_ps(p + i)));
    for (; i < n; i++) {
        uint32_t u = (uint32_t)ct__f32_to_bf16(p[i]) << 16;
        memcpy(p + i, &u, 4);
    }
}
/* the f32 packers' loads: rounded as they are read for an F32B operand
 * (rnd), so its panels hold bf16 values without a pass of their own */
CT_AI __m256 ldr(const float *p, int rnd) {
    __m256 x = _mm256_loadu_ps(p);
    return rnd ? rnd_bf16(x) : x;
}
CT_AI float ldr1(const float *p, int rnd) {
    if (!rnd) return *p;
    uint32_t u = (uint32_t)ct__f32_to_bf16(*p) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}



/* the generic packing walk: src[k*sk + j*sj], k < kc, j < n (<= w) ->
 * dst[k*w + j], zero-padded to w (a B panel: w = 16, an A panel: w = 6);
 * rnd: the values rounded to bf16 (F32B) */
CT_AI void pack_strided(int64_t kc, int n, int w, const float *src, int64_t sk, int64_t sj,
                        float *dst, int rnd) {
    for (int64_t k = 0; k < kc; k++) {
        float *d = dst + k * w;
        const float *s = src + k * sk;
        int j = 0;
        for (; j < n; j++) d[j] = ldr1(s + j * sj, rnd);
        for (; j < w; j++) d[j] = 0.0f;
    }
}

/* B[k][j] = B[k*sbk + j*sbn], k < kc, j < nr (<= 16) -> dst[k*16 + j], zero-padded
 * (rnd: rounded to bf16 values) */
CT_AI void pack_b_t(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst, int rnd) {
    if (nr == NR && sbn == 1) {
        for (int64_t k = 0; k < kc; k++) {
            const float *s = B + k * sbk;
            _mm256_store_ps(dst + k * NR, ldr(s, rnd));
            _mm256_store_ps(dst + k * NR + 8, ldr(s + 8, rnd));
        }
        return;
    }
    if (nr == NR && sbk == 1) { /* B^T rows: 8 x 8 transposes */
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8)
            for (int h = 0; h < 2; h++) {
                const float *s = B + (int64_t)(8 * h) * sbn + k;
                __m256 r[8];
                for (int q = 0; q < 8; q++) r[q] = ldr(s + q * sbn, rnd);
                ct__tr8(r);
                for (int q = 0; q < 8; q++) _mm256_store_ps(dst + (k + q) * NR + 8 * h, r[q]);
            }
        pack_strided(kc - k, NR, NR, B + k, 1, sbn, dst + k * NR, rnd);
        return;
    }
    pack_strided(kc, nr, NR, B, sbk, sbn, dst, rnd);
}
/* the packers are instantiated with rnd a constant (the f32 path's code
 * stays free of the rounding's tests): pack_b_r dispatches; pack_b is
 * ct__gemm_prepack's packer (f32 B as it is) */
static void pack_b(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst) {
    pack_b_t(kc, nr, B, sbk, sbn, dst, 0);
}
static void pack_b_r(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst, int rnd) {
    if (rnd) pack_b_t(kc, nr, B, sbk, sbn, dst, 1);
    else pack_b_t(kc, nr, B, sbk, sbn, dst, 0);
}

/* a whole block of row-major B (sbn == 1): k outer, so every row of B is
 * read as one contiguous stream (panel by panel, each row would be touched
 * 16 floats at a time, a latency-bound walk when B is wide) */
CT_AI void pack_b_rows_t(int64_t kc, int64_t nc, const float *B, int64_t sbk, float *dst, int rnd) {
    int64_t np = nc / NR, rem = nc % NR;
    for (int64_t k = 0; k < kc; k++) {
        const float *s = B + k * sbk;
        float *d = dst + k * NR;
        for (int64_t p = 0; p < np; p++) {
            _mm256_store_ps(d + p * kc * NR, ldr(s + p * NR, rnd));
            _mm256_store_ps(d + p * kc * NR + 8, ldr(s + p * NR + 8, rnd));
        }
        if (rem) {
            float *e = d + np * kc * NR;
            int64_t j = 0;
            for (; j < rem; j++) e[j] = ldr1(s + np * NR + j, rnd);
            for (; j < NR; j++) e[j] = 0.0f;
        }
    }
}

/* A[i][k] = A[i*sam + k*sak], i < mr (<= 6), k < kc -> dst[k*6 + i], zero-padded
 * (rnd: rounded to bf16 values) */
CT_AI void pack_a_t(int64_t kc, int mr, const float *A, int64_t sam, int64_t sak, float *dst, int rnd) {
    if (mr == MR && sak == 1) {
        const float *r0 = A, *r1 = A + sam, *r2 = A + 2 * sam, *r3 = A + 3 * sam,
                    *r4 = A + 4 * sam, *r5 = A + 5 * sam;
        int64_t k = 0;
        /* 8 k at a time: a 6(+2 zero) x 8 transpose; each 8-wide store
         * spills 2 zeros that the next one overwrites.  The chunk's last
         * spill lands on the next panel's first 2 floats, which are packed
         * after this one (or in the 16 floats of slack the driver leaves
         * after each A buffer): a masked store there (vmaskmovps, slow on
         * AMD) made this pass ~30% longer */
        for (; k + 8 <= kc; k += 8) {
            __m256 r[8] = {ldr(r0 + k, rnd), ldr(r1 + k, rnd), ldr(r2 + k, rnd),
                           ldr(r3 + k, rnd), ldr(r4 + k, rnd), ldr(r5 + k, rnd),
                           _mm256_setzero_ps(), _mm256_setzero_ps()};
            ct__tr8(r);
            float *d = dst + k * MR;
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(d + q * MR, r[q]);
        }
        for (; k < kc; k++) {
            float *d = dst + k * MR;
            d[0] = ldr1(r0 + k, rnd); d[1] = ldr1(r1 + k, rnd); d[2] = ldr1(r2 + k, rnd);
            d[3] = ldr1(r3 + k, rnd); d[4] = ldr1(r4 + k, rnd); d[5] = ldr1(r5 + k, rnd);
        }
        return;
    }
    if (mr == MR && sam == 1 && !rnd) {
        for (int64_t k = 0; k < kc; k++) memcpy(dst + k * MR, A + k * sak, sizeof(float) * MR);
        return;
    }
    pack_strided(kc, mr, MR, A, sak, sam, dst, rnd);
}

static void pack_b_rows(int64_t kc, int64_t nc, const float *B, int64_t sbk, float *dst, int rnd) {
    if (rnd) pack_b_rows_t(kc, nc, B, sbk, dst, 1);
    else pack_b_rows_t(kc, nc, B, sbk, dst, 0);
}
static void pack_a(int64_t kc, int mr, const float *A, int64_t sam, int64_t sak, float *dst, int rnd) {
    if (rnd) pack_a_t(kc, mr, A, sam, sak, dst, 1);
    else pack_a_t(kc, mr, A, sam, sak, dst, 0);
}

/* ---- packing f16 / bf16 operands ----------------------------------------------
 * The same panels, converted to f32 as they are packed (ct__gemm_avx2_mixed):
 * the micro-kernel then runs unchanged at the f32 rate, with f32
 * accumulation, and an operand is read in its 2-byte form once per block
 * instead of being copied to f32 whole first.  t: CT_GEMM_BF16 or CT_GEMM_F16. */
CT_AI __m256 hld8(const uint16_t *p, int t) {
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    if (t == CT_GEMM_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
    return _mm256_cvtph_ps(v);
}
CT_AI float hld1(const uint16_t *p, int t) {
    if (t == CT_GEMM_BF16) {
        uint32_t u = (uint32_t)*p << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return _cvtsh_ss(*p);
}
/* C tiles of a CT_GEMM_F32R C: floats holding bf16 values; _nt with
 * non-temporal stores (o 32-byte aligned: a large C written once, as the
 * f32 GEMM streams one, see gemm_run) */
static void cvt_f32r(void *o, const float *x, int64_t n) {
    float *d = o;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, rnd_bf16(_mm256_loadu_ps(x + i)));
    memcpy(d + i, x + i, sizeof(float) * (size_t)(n - i));
    round_bf16(d + i, n - i);
}
static void cvt_f32r_nt(void *o, const float *x, int64_t n) {
    float *d = o;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(d + i, rnd_bf16(_mm256_loadu_ps(x + i)));
    cvt_f32r(d + i, x + i, n - i);
}
static void cvt_bf16(void *o, const float *x, int64_t n) { ct__ew_vtab()->f32_to_bf16(o, x, n); }
static void cvt_f16(void *o, const float *x, int64_t n) { ct__ew_vtab()->f32_to_f16(o, x, n); }
#define HALF_T(t) ((t) == CT_GEMM_BF16 || (t) == CT_GEMM_F16)
/* the operand types ct__gemm_avx2_mixed takes */
#define OPND_T(t) (HALF_T(t) || (t) == CT_GEMM_F32 || (t) == CT_GEMM_F32B)

static void pack_strided_h(int64_t kc, int n, int w, const uint16_t *src, int64_t sk, int64_t sj,
                           int t, float *dst) {
    for (int64_t k = 0; k < kc; k++) {
        float *d = dst + k * w;
        const uint16_t *s = src + k * sk;
        int j = 0;
        for (; j < n; j++) d[j] = hld1(s + j * sj, t);
        for (; j < w; j++) d[j] = 0.0f;
    }
}
static void pack_b_h(int64_t kc, int nr, const uint16_t *B, int64_t sbk, int64_t sbn, int t,
                     float *dst) {
    if (nr == NR && sbn == 1) {
        for (int64_t k = 0; k < kc; k++) {
            const uint16_t *s = B + k * sbk;
            _mm256_store_ps(dst + k * NR, hld8(s, t));
            _mm256_store_ps(dst + k * NR + 8, hld8(s + 8, t));
        }
        return;
    }
    if (nr == NR && sbk == 1) { /* B^T rows (x @ W^T): 8 x 8 transposes */
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8)
            for (int h = 0; h < 2; h++) {
                const uint16_t *s = B + (int64_t)(8 * h) * sbn + k;
                __m256 r[8];
                for (int q = 0; q < 8; q++) r[q] = hld8(s + q * sbn, t);
                ct__tr8(r);
                for (int q = 0; q < 8; q++) _mm256_store_ps(dst + (k + q) * NR + 8 * h, r[q]);
            }
        pack_strided_h(kc - k, NR, NR, B + k, 1, sbn, t, dst + k * NR);
        return;
    }
    pack_strided_h(kc, nr, NR, B, sbk, sbn, t, dst);
}
static void pack_b_rows_h(int64_t kc, int64_t nc, const uint16_t *B, int64_t sbk, int t, float *dst) {
    int64_t np = nc / NR, rem = nc % NR;
    for (int64_t k = 0; k < kc; k++) {
        const uint16_t *s = B + k * sbk;
        float *d = dst + k * NR;
        for (int64_t p = 0; p < np; p++) {
            _mm256_store_ps(d + p * kc * NR, hld8(s + p * NR, t));
            _mm256_store_ps(d + p * kc * NR + 8, hld8(s + p * NR + 8, t));
        }
        if (rem) {
            float *e = d + np * kc * NR;
            int64_t j = 0;
            for (; j < rem; j++) e[j] = hld1(s + np * NR + j, t);
            for (; j < NR; j++) e[j] = 0.0f;
        }
    }
}
static void pack_a_h(int64_t kc, int mr, const uint16_t *A, int64_t sam, int64_t sak, int t,
                     float *dst) {
    if (mr == MR && sam == 1 && sak >= 2) {
        /* A^T rows (x^T @ dy): 6 contiguous elements per k; all but the
         * block's last k read 8 (with sak >= 2 the 2 past them lie inside
         * A's extent: the next k's column) and store 8, the spill
         * overwritten by the next k */
        int64_t k = 0;
        for (; k + 1 < kc; k++) _mm256_storeu_ps(dst + k * MR, hld8(A + k * sak, t));
        for (; k < kc; k++)
            for (int q = 0; q < MR; q++) dst[k * MR + q] = hld1(A + k * sak + q, t);
        return;
    }
    if (mr == MR && sak == 1) { /* as pack_a: 6(+2 zero) x 8 transposes, the spill overwritten */
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 r[8];
            for (int q = 0; q < MR; q++) r[q] = hld8(A + q * sam + k, t);
            r[6] = r[7] = _mm256_setzero_ps();
            ct__tr8(r);
            float *d = dst + k * MR;
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(d + q * MR, r[q]);
        }
        for (; k < kc; k++)
            for (int q = 0; q < MR; q++) dst[k * MR + q] = hld1(A + q * sam + k, t);
        return;
    }
    pack_strided_h(kc, mr, MR, A, sak, sam, t, dst);
}

/* ---- the driver ------------------------------------------------------------------ */

typedef struct gemm_ctx {
    int64_t M, N, K;
    const float *A, *B;
    int64_t sam, sak, sbk, sbn, ldc;
    float alpha, beta, *C;
    const float *bias;    /* NULL, or beta's operand is this row of N (C not read) */
    int ta, tb;           /* A's, B's element type (CT_GEMM_*); f16/bf16: A/B point at 2-byte data */
    float *bp, *ap;       /* per-thread packing buffers */
    int64_t bpsz, apsz;   /* floats per thread in bp, ap */
    int kc, mc, nc, nt;
    int direct;           /* read A rows in place (sak == 1) instead of packing */
    int split_n;          /* threads split the 16-column panels, not the rows */
    /* a C of f16/bf16 (ct__gemm_avx2_mixed_out; tc CT_GEMM_F32: C is the
     * f32 C above): one K block only; the tiles of a group of GB panels go
     * to a per-thread f32 scratch (cs, rows of CS_LD floats) and are
     * rounded into Ch (row stride ldch) right after the group, from L2 */
    int tc;
    void *Ch;
    int64_t ldch;
    float *cs;
    int64_t cssz;         /* floats per thread in cs */
    void (*cvt)(void *o, const float *x, int64_t n);
    int64_t esc;          /* bytes per element of Ch */
    /* B packed beforehand (ct__sgemm_avx2_prepack, f32 only): no packing
     * of B at all; K block pc's panels start at bpre + pc * npn_pre * NR */
    const float *bpre;
    int64_t npn_pre;
    int nts;              /* C streamed (see gemm_run) */
    int ksub;             /* 0, or kc is all of K and the tiles run ksub-deep steps (mixed_out) */
    int64_t nunits;       /* the split dimension in this many units ... */
    atomic_llong *next;   /* ... taken in order from this counter (gemm_worker) */
} gemm_ctx;

/* C[ic:ic+mc, jc:jc+nc] (+)= A[ic:ic+mc, pc:pc+kc] @ the B block (pc, jc),
 * packed in bp (jit: packed here into bp panel by panel).  A is packed
 * into ap unless it is read in place.
 *
 * Order of the tiles: the B panels go in groups of GB; for each group, each
 * row panel of A runs against the group's panels in turn.  The A panel
 * (6 KiB) stays in L1 across GB tiles, the group's B panels (GB x 16 KiB)
 * stream from L2, and the C lines of consecutive tiles are neighbours in a
 * row.  In the classic order (one B panel in L1 against every A panel) the
 * C lines of 24 consecutive tiles all fall into ONE L1 set whenever C's row
 * stride is a multiple of 4 KiB (1024^3), six lines a tile in an 8-way set
 * that also holds four lines of the B panel.  Measured with the library's
 * code, old and new alternated rep by rep beside the FMA loop, 1024^3 at 1
 * thread: 0.766 -> 0.796, 0.786 -> 0.811, 0.760 -> 0.779 of the loop's
 * rate; at 2 threads 0.735 -> 0.754.  Groups of 4 or 16 gained a little
 * less, 64 (all panels) nothing.  jit: one panel at a time, each packed
 * right before the row panels run against it.
 *
 * (nic, nmc, npc) is the A block the caller runs next (npc >= K: none): its
 * rows are pulled into L2 a slice per step, so that packing it does not
 * wait on L3 (packed straight from L3, each row's 1 KiB was too short a
 * stream for the hardware prefetcher). */
#define GB 8
#define CS_LD (GB * NR)
static void gemm_block(const gemm_ctx *g, int64_t ic, int64_t mc, int64_t pc, int64_t kc,
                       int64_t jc, int64_t nc, float *bp, int jit, float *ap, int64_t nic,
                       int64_t nmc, int64_t npc, float *cs) {
    const int64_t np = (nc + NR - 1) / NR, nti = (mc + MR - 1) / MR;
    /* panels of all of a long K (g->ksub): as many to a group as fit in
     * 256 KiB beside the A block in L2 (K = 768: 5, 3072: 1); 8 of them
     * (384 KiB at K = 768) thrashed it.  Measured on Zen 3, 2 threads,
     * bf16 A, F32B B, bf16 C, best of 15 twice: [256,768]x[768,2304]
     * 7.07/7.23 -> 6.44/6.69 ms, x[768,3072] 9.19/9.59 -> 8.75/9.25,
     * [256,3072]x[3072,768] 8.59/9.06 -> 8.43/8.80 */
    int gbl = GB;
    if (g->ksub) {
        gbl = (int)((256 << 10) / (kc * NR * (int64_t)sizeof(float)));
        gbl = gbl < 1 ? 1 : gbl > GB ? GB : gbl;
    }
    const int first = pc == 0 ? 1 + g->nts : 0, gb = jit ? 1 : gbl;
    const float *ablk = HALF_T(g->ta) ? NULL : g->A + ic * g->sam + pc * g->sak;
    if (HALF_T(g->ta)) /* f16/bf16: never direct */
        for (int64_t i = 0; i < mc; i += MR) {
            int mr = (int)(mc - i < MR ? mc - i : MR);
            pack_a_h(kc, mr, (const uint16_t *)(const void *)g->A + (ic + i) * g->sam + pc * g->sak,
                     g->sam, g->sak, g->ta, ap + i * kc);
        }
    else if (!g->direct) /* (F32B: never direct either) */
        for (int64_t i = 0; i < mc; i += MR) {
            int mr = (int)(mc - i < MR ? mc - i : MR);
            pack_a(kc, mr, ablk + i * g->sam, g->sam, g->sak, ap + i * kc, g->ta == CT_GEMM_F32B);
        }
    else if (mc % MR) { /* the partial row panel: packed */
        int64_t i = mc / MR * MR;
        pack_a(kc, (int)(mc - i), ablk + i * g->sam, g->sam, g->sak, ap, 0);
    }
    const int pre_a = !g->direct && g->sak == 1 && npc < g->K;
    const int64_t nkc = pre_a && g->K - npc < g->kc ? g->K - npc : g->kc;
    const int64_t steps = (np + gb - 1) / gb * nti;
    int64_t step = 0;
    for (int64_t p0 = 0; p0 < np; p0 += gb) {
        const int64_t p1 = p0 + gb < np ? p0 + gb : np;
        if (jit && HALF_T(g->tb))
            pack_b_h(kc, (int)(nc - p0 * NR < NR ? nc - p0 * NR : NR),
                     (const uint16_t *)(const void *)g->B + pc * g->sbk + (jc + p0 * NR) * g->sbn,
                     g->sbk, g->sbn, g->tb, bp);
        else if (jit)
            pack_b_r(kc, (int)(nc - p0 * NR < NR ? nc - p0 * NR : NR),
                     g->B + pc * g->sbk + (jc + p0 * NR) * g->sbn, g->sbk, g->sbn, bp, g->tb == CT_GEMM_F32B);
        for (int64_t i = 0; i < mc; i += MR, step++) {
            int mr = (int)(mc - i < MR ? mc - i : MR);
            if (pre_a)
                for (int64_t q = nmc * step / steps; q < nmc * (step + 1) / steps; q++) {
                    const int64_t es = HALF_T(g->ta) ? 2 : 4;
                    const char *row = (const char *)(const void *)g->A + ((nic + q) * g->sam + npc) * es;
                    for (int64_t l = 0; l < nkc * es; l += 64) _mm_prefetch(row + l, _MM_HINT_T1);
                    _mm_prefetch(row + nkc * es - 1, _MM_HINT_T1);
                }
            int direct = g->direct && mr == MR;
            const float *apan = direct ? ablk + i * g->sam : g->direct ? ap : ap + i * kc;
            /* cs: the group's tiles, panel p at column (p - p0) * NR */
            float *crow = cs ? cs + i * CS_LD : g->C + (ic + i) * g->ldc + jc;
            int64_t ldc = cs ? CS_LD : g->ldc, c0 = cs ? p0 * NR : 0;
            /* a long K block (g->ksub) runs as ksub-deep steps on the same
             * tile, the first one as the first K block: the sums of the
             * f32 GEMM with K blocks of ksub, bit for bit */
            const int64_t ks = g->ksub ? g->ksub : kc;
            for (int64_t p = p0; p < p1; p++)
                for (int64_t k0 = 0; k0 < kc; k0 += ks)
                    tile(kc - k0 < ks ? kc - k0 : ks, direct ? apan + k0 : apan + k0 * MR, g->sam, direct,
                         (jit ? bp : bp + p * kc * NR) + k0 * NR, crow + p * NR - c0, ldc,
                         g->bias ? g->bias + jc + p * NR : crow + p * NR - c0, g->bias ? 0 : ldc, mr,
                         (int)(nc - p * NR < NR ? nc - p * NR : NR), g->alpha, g->beta, k0 ? 0 : first);
        }
        if (cs) { /* the group is final (one K block): rounded into Ch */
            int64_t w = (p1 * NR < nc ? p1 * NR : nc) - p0 * NR;
            for (int64_t i = 0; i < mc; i++)
                g->cvt((char *)g->Ch + ((ic + i) * g->ldch + jc + p0 * NR) * g->esc, cs + i * CS_LD, w);
        }
    }
}

/* B[pc:pc+kc, jc+p0*16 : jc+p1*16 (<= jc+nc)] -> panels p0..p1 of a packed
 * block */
static void pack_b_panels(const gemm_ctx *g, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                          int64_t p0, int64_t p1, float *bp) {
    if (p1 <= p0) return;
    if (HALF_T(g->tb)) {
        const uint16_t *hb = (const uint16_t *)(const void *)g->B + pc * g->sbk + jc * g->sbn;
        if (g->sbn == 1) {
            int64_t e = p1 * NR < nc ? p1 * NR : nc;
            pack_b_rows_h(kc, e - p0 * NR, hb + p0 * NR, g->sbk, g->tb, bp + p0 * kc * NR);
            return;
        }
        for (int64_t p = p0; p < p1; p++) {
            int nr = (int)(nc - p * NR < NR ? nc - p * NR : NR);
            pack_b_h(kc, nr, hb + p * NR * g->sbn, g->sbk, g->sbn, g->tb, bp + p * kc * NR);
        }
        return;
    }
    const float *bblk = g->B + pc * g->sbk + jc * g->sbn;
    const int rnd = g->tb == CT_GEMM_F32B;
    if (g->sbn == 1) {
        int64_t e = p1 * NR < nc ? p1 * NR : nc;
        pack_b_rows(kc, e - p0 * NR, bblk + p0 * NR, g->sbk, bp + p0 * kc * NR, rnd);
        return;
    }
    for (int64_t p = p0; p < p1; p++) {
        int nr = (int)(nc - p * NR < NR ? nc - p * NR : NR);
        pack_b_r(kc, nr, bblk + p * NR * g->sbn, g->sbk, g->sbn, bp + p * kc * NR, rnd);
    }
}

/* rows [r0, r1) x columns [c0, c1) of C, all of K, on one thread's
 * buffers.  It packs its own B block (or, when its rows fit one A block,
 * each B panel just before its one use) and its own A blocks: no barrier
 * anywhere.  (Measured on 1024^3 and 2048^3 at 2 threads: B packed once by
 * both threads behind a barrier, and A blocks handed out from a shared
 * counter, were both level with this within the noise.) */
static void run_range(const gemm_ctx *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float *ap,
                      float *bp, float *cs) {
    const int64_t K = g->K;
    if (r0 >= r1 || c0 >= c1) return;
    int jit = r1 - r0 <= g->mc && g->sbn != 1 && !g->bpre;
    for (int64_t jc = c0; jc < c1; jc += g->nc) {
        int64_t nc = c1 - jc < g->nc ? c1 - jc : g->nc;
        for (int64_t pc = 0; pc < K; pc += g->kc) {
            int64_t kc = K - pc < g->kc ? K - pc : g->kc;
            if (g->bpre) /* the block's panels, already packed: jc is a multiple of NR */
                bp = (float *)(uintptr_t)(g->bpre + pc * g->npn_pre * NR + jc / NR * kc * NR);
            else if (!jit)
                pack_b_panels(g, pc, kc, jc, nc, 0, (nc + NR - 1) / NR, bp);
            for (int64_t ic = r0; ic < r1; ic += g->mc) {
                int64_t mc = r1 - ic < g->mc ? r1 - ic : g->mc;
                /* next: the following rows, or the first at the next K block */
                int64_t nic = ic + g->mc, npc = pc;
                if (nic >= r1) {
                    nic = r0;
                    npc = pc + g->kc;
                }
                int64_t nmc = r1 - nic < g->mc ? r1 - nic : g->mc;
                gemm_block(g, ic, mc, pc, kc, jc, nc, bp, jit, ap, nic, nmc, npc, cs);
            }
        }
    }
}

/* The split dimension (16-column panels or 6-row panels) is cut into
 * g->nunits contiguous units, which the team's threads take in order from
 * a shared counter until none is left (as gemm_avx512.c's worker): the
 * thread that starts the product starts at once (under
 * OMP_WAIT_POLICY=PASSIVE the other one first has to be woken, 50-150 us
 * on a VM) and a thread slowed by its neighbours on a shared host takes
 * fewer units.  Each element of C is still computed by one thread in a
 * fixed K order: the bits depend on neither the thread count nor which
 * thread took a unit. */
static void gemm_worker(const gemm_ctx *g, float *ap, float *bp, float *cs) {
    const int64_t np = g->split_n ? (g->N + NR - 1) / NR : (g->M + MR - 1) / MR;
    int64_t p0, p1;
    while (ct__gemm_take_unit(g->next, g->nunits, np, &p0, &p1)) {
        if (g->split_n) run_range(g, 0, g->M, p0 * NR, p1 * NR < g->N ? p1 * NR : g->N, ap, bp, cs);
        else run_range(g, p0 * MR, p1 * MR < g->M ? p1 * MR : g->M, 0, g->N, ap, bp, cs);
    }
}

/* team thread t, on its own buffers (ct__gemm_team) */
static void team_worker(const void *ctx, int w, int t) {
    const gemm_ctx *g = ctx;
    (void)w;
    gemm_worker(g, g->ap + (int64_t)t * g->apsz, g->bp + (int64_t)t * g->bpsz,
                g->cs ? g->cs + (int64_t)t * g->cssz : NULL);
    if (g->nts || g->cvt == cvt_f32r_nt) _mm_sfence(); /* the streamed C visible before the team joins */
}

/* packing buffers come from the storage allocator (alloc.c): its medium
 * and large blocks are cached, so a GEMM per op does not pay first-touch
 * page faults for fresh buffers on every call (64-byte aligned) */
static float *buf_get(size_t nfloat) { return ct__malloc_aligned(nfloat * sizeof(float)); }
static void buf_put(float *p, size_t nfloat) {
    ct__free_aligned(p, (void *)(uintptr_t)(nfloat * sizeof(float)));
}

int ct__gemm_longk(int kib) {
    pthread_once(&g_once, gemm_init);
    if (kib < 0) return atomic_load_explicit(&g_longk_kib, memory_order_relaxed);
    return atomic_exchange_explicit(&g_longk_kib, kib, memory_order_relaxed);
}

long long ct__sgemm_avx2_calls(void) { return atomic_load_explicit(&g_calls, memory_order_relaxed); }

int ct__sgemm_avx2(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam,
                   int64_t sak, const float *B, int64_t sbk, int64_t sbn, float beta,
                   const float *bias, float *C, int64_t ldc, int nthreads) {
    pthread_once(&g_once, gemm_init);
    if (g_use512 && ct__sgemm_avx512(M, N, K, alpha, A, sam, sak, B, sbk, sbn, beta, bias, C, ldc, nthreads, NULL) == 0) {
        atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
        return 0;
    }
    return ct__sgemm_avx2_ex(M, N, K, alpha, A, sam, sak, B, sbk, sbn, beta, bias, C, ldc,
                             nthreads, g_kc, g_mc, g_nc, g_direct_n);
}

/* where C goes when it is f16/bf16 (tc CT_GEMM_F32: the float *C) */
typedef struct half_out {
    int tc;
    void *C;
    int64_t ldc;
    int ksub; /* see gemm_ctx */
} half_out;

static int gemm_run(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                    int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn,
                    float beta, const float *bias, float *C, int64_t ldc, int nthreads,
                    int kc_max, int mc_max, int nc_max, int direct_n, half_out ho, const float *bpre);

int ct__sgemm_avx2_ex(int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                      int64_t sam, int64_t sak, const float *B, int64_t sbk, int64_t sbn,
                      float beta, const float *bias, float *C, int64_t ldc, int nthreads,
                      int kc_max, int mc_max, int nc_max, int direct_n) {
    return gemm_run(M, N, K, alpha, A, CT_GEMM_F32, sam, sak, B, CT_GEMM_F32, sbk, sbn, beta,
                    bias, C, ldc, nthreads, kc_max, mc_max, nc_max, direct_n,
                    (half_out){CT_GEMM_F32, NULL, 0, 0}, NULL);
}

int ct__gemm_avx2_mixed(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                        int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn,
                        float beta, const float *bias, float *C, int64_t ldc, int nthreads) {
    pthread_once(&g_once, gemm_init);
    if (!OPND_T(ta) || !OPND_T(tb)) return -1;
    return gemm_run(M, N, K, alpha, A, ta, sam, sak, B, tb, sbk, sbn, beta, bias, C, ldc,
                    nthreads, g_kc, g_mc, g_nc, g_direct_n, (half_out){CT_GEMM_F32, NULL, 0, 0}, NULL);
}

int ct__gemm_avx2_mixed_out(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                            int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk,
                            int64_t sbn, float beta, const float *bias, void *C, int tc,
                            int64_t ldc, int nthreads) {
    pthread_once(&g_once, gemm_init);
    if (!OPND_T(ta) || !OPND_T(tb) || (tc != CT_GEMM_BF16 && tc != CT_GEMM_F16 && tc != CT_GEMM_F32R))
        return -1;
    if (M <= 0 || N <= 0) return 0;
    /* K beyond one block of g_kc: the panels hold all of K, and each tile
     * runs g_kc-deep steps in turn (gemm_ctx.ksub: the f32 GEMM's sums, bit
     * for bit), so that the tiles are still rounded into C from L2, with no
     * f32 C written out, read back and converted by the caller; the A block
     * kept to g_longk_kib KiB (its panels K x 6 from L2, the B panels K x 16
     * from L2/L3).  Measured on AMD EPYC Zen 3, 2 threads, bf16 matmul (best
     * of 15, two runs each): [256,3072]x[3072,768] 8.50 / 9.68 -> 8.19 /
     * 8.44 ms, [256,2304]x[2304,768] 6.21 / 6.06 -> 6.14 / 6.23 (level).
     * One K-long step a tile instead was 7.6-8.0 ms, but its sums are not
     * the f32 GEMM's; an A block of 128 or 384 KiB measured slower.
     * Off by default since: measured again on Zen 3 (stop 43), ct_matmul of
     * bf16 operands, the mode against the caller's K blocks, f32 C and
     * conversion, alternated in one process, medians of 15:
     * [256,768]x[768,3072] 9.53 vs 9.20 ms, [256,3072]x[3072,768] 10.50
     * vs 9.87, [1024,3072]x[3072,768] 42.3 vs 30.0; 16 and 64 rows level.
     * Its panels of all of K (48 KiB at K = 768) no longer fit L1, and each
     * A block re-reads a B block K/256 times larger from L3.
     * CT_GEMM_LONGK=192 turns it back on. */
    int kc = g_kc, mc = g_mc, ksub = 0;
    const int longk = atomic_load_explicit(&g_longk_kib, memory_order_relaxed);
    if (longk > 0 && K > g_kc && K <= 4096) {
        kc = (int)K;
        ksub = g_kc;
        mc = (int)((int64_t)longk * 1024 / (K * 4)) / MR * MR;
        if (mc < MR) mc = MR;
    }
    if (K <= 0 || K > kc || alpha == 0.0f || (beta != 0.0f && !bias)) return -2;
    return gemm_run(M, N, K, alpha, A, ta, sam, sak, B, tb, sbk, sbn, beta, bias, NULL, 0,
                    nthreads, kc, mc, g_nc, g_direct_n, (half_out){tc, C, ldc, ksub}, NULL);
}

static int gemm_run(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta,
                    int64_t sam, int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn,
                    float beta, const float *bias, float *C, int64_t ldc, int nthreads,
                    int kc_max, int mc_max, int nc_max, int direct_n, half_out ho, const float *bpre) {
    atomic_fetch_add_explicit(&g_calls, 1, memory_order_relaxed);
    if (kc_max < 1) kc_max = 1;
    mc_max = mc_max < MR ? MR : mc_max / MR * MR;
    nc_max = nc_max < NR ? NR : nc_max / NR * NR;
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0 || alpha == 0.0f) { /* C = beta * C (or beta * bias) */
        ct__gemm_scale_c(M, N, beta, bias, C, ldc);
        return 0;
    }
    gemm_ctx g;
    g.M = M; g.N = N; g.K = K;
    g.A = A; g.B = B; g.C = C;
    g.ta = ta; g.tb = tb;
    g.sam = sam; g.sak = sak; g.sbk = sbk; g.sbn = sbn; g.ldc = ldc;
    g.alpha = alpha; g.beta = beta; g.bias = bias;
    g.tc = ho.tc; g.Ch = ho.C; g.ldch = ho.ldc; g.cs = NULL; g.cssz = 0; g.cvt = NULL;
    g.ksub = ho.ksub;
    g.bpre = bpre;
    g.npn_pre = (N + NR - 1) / NR;
    g.esc = ho.tc == CT_GEMM_F32R ? 4 : 2;
    if (ho.tc != CT_GEMM_F32)
        g.cvt = ho.tc == CT_GEMM_BF16 ? cvt_bf16 : ho.tc == CT_GEMM_F16 ? cvt_f16 : cvt_f32r;
    /* a large F32R C (a weight's gradient under autocast) is streamed, as
     * the f32 C below: its rows start 64-byte aligned, and so does every
     * group of tiles (a multiple of 16 columns in) */
    if (ho.tc == CT_GEMM_F32R && (uintptr_t)ho.C % 64 == 0 && ho.ldc % 16 == 0 &&
        M * N * 4 >= ct__gemm_stream_min_bytes(-1))
        g.cvt = cvt_f32r_nt;
    g.kc = K < kc_max ? (int)K : kc_max;
    g.direct = sak == 1 && N <= direct_n && ta == CT_GEMM_F32;
    int64_t nbm = (M + MR - 1) / MR, npn = (N + NR - 1) / NR;
    /* A read in place costs nothing to repeat: columns whenever enough */
    int nt = ct__gemm_split(nthreads, M, N, K, nbm, npn, g.direct, &g.split_n);
    g.nt = nt;
    /* the work units (gemm_worker, ct__gemm_plan_units) */
    int64_t per;
    g.nunits = ct__gemm_plan_units(nt, g.split_n ? npn : nbm, g.split_n ? !g.direct : !bpre, g.split_n ? N : M,
                                   g_unit_min, &per);
    atomic_llong next = 0;
    g.next = &next;
    int64_t rows_t = g.split_n ? M : per * MR;
    int64_t cols_t = g.split_n ? per * NR : npn * NR;
    g.mc = mc_max;
    if (rows_t < g.mc) g.mc = (int)((rows_t + MR - 1) / MR * MR);
    g.nc = cols_t < nc_max ? (int)cols_t : nc_max;
    int jit = rows_t <= g.mc && sbn != 1; /* as in run_range */
    /* few rows and a row-major B: each packed B block is used by one A
     * block only, so it is kept to 256 columns (256 KiB) to stay in L2
     * between its packing and its use */
    if (rows_t <= g.mc && sbn == 1 && g.nc > 256) g.nc = 256;
    /* Non-temporal stores for a large f32 C that this product writes once
     * and never reads (one K block, beta 0, no bias), as gemm_avx512.c
     * does: plain stores first read every line of C (the C prefetch in
     * ukr_body fetches them), streaming ones do not.  A weight gradient
     * (dW = x^T dy over the tokens: K = 256 in GPT-2's step) is read next
     * by the optimizer, long after it left the caches; the threshold
     * (ct__gemm_stream_min_bytes) keeps C that a next op reads at once in
     * the caches. */
    g.nts = ho.tc == CT_GEMM_F32 && C && beta == 0.0f && !bias && K <= g.kc && (uintptr_t)C % 64 == 0 &&
            ldc % 16 == 0 && M * N * 4 >= ct__gemm_stream_min_bytes(-1);
    g.apsz = g.direct ? (int64_t)MR * g.kc : (int64_t)g.mc * g.kc;
    g.apsz = (g.apsz + 15) / 16 * 16 + 16; /* + pack_a's spill */
    g.bpsz = (int64_t)g.kc * (jit ? NR : g.nc);
    /* the buffers are asked for at their largest size for this blocking,
     * whatever the shape: the allocator's cache then hands the same warm
     * block back on every call (shape-sized requests missed it and paid
     * ~400 fresh page faults per encoder layer in pack_b); pages a small
     * product does not touch are never made resident */
    size_t nbp = (size_t)kc_max * (size_t)nc_max * (size_t)nt;
    size_t nap = (((size_t)mc_max * (size_t)kc_max + 15) / 16 * 16 + 16) * (size_t)nt;
    if (nbp < (size_t)g.bpsz * (size_t)nt) nbp = (size_t)g.bpsz * (size_t)nt;
    /* the f16/bf16 C's scratch: one group of tiles per thread (g.mc x CS_LD) */
    size_t ncs = 0;
    if (g.tc != CT_GEMM_F32) {
        g.cssz = (int64_t)mc_max * CS_LD;
        ncs = (size_t)g.cssz * (size_t)nt;
    }
    g.bp = buf_get(nbp);
    g.ap = buf_get(nap);
    if (ncs) g.cs = buf_get(ncs);
    if (!g.bp || !g.ap || (ncs && !g.cs)) {
        if (g.bp) buf_put(g.bp, nbp);
        if (g.ap) buf_put(g.ap, nap);
        if (g.cs) buf_put(g.cs, ncs);
        return -1;
    }
    ct__gemm_team(nt, team_worker, &g);
    buf_put(g.bp, nbp);
    buf_put(g.ap, nap);
    if (g.cs) buf_put(g.cs, ncs);
    return 0;
}

/* The routing rule.  The 6 x 16 tiles waste most of their work on a product
 * with fewer than a few tiles' worth of rows or columns (a matrix-vector
 * product: OpenBLAS runs GEMV there), so those stay with OpenBLAS; every
 * other f32 product comes here.  Measured with bench/bench_gemm (both
 * interleaved A B B A, medians of 20..30) against OpenBLAS 0.3.21, OpenMP
 * build, on this project's shared 2-vCPU Zen 3 host, where +-10% is noise:
 * ahead on 4096x4096 @ 4096x64 (time ratio 0.67..0.85), the transformer
 * linears (0.84..0.94), batches of small matrices (bmm 64 x 128x64x128:
 * 0.3..0.9, one whole matrix per thread, see linalg.c), and, since the C
 * tile and A block prefetches above, on 1024^3 (0.91..0.96) and the
 * BERT-base linears (0.91..0.97); behind on conv-shaped 64 x 576 @ 576 x
 * 3136 (1.15..1.2), hence the few-rows-many-columns exclusion below.  The
 * micro-kernel alone runs at 0.9..0.98 of the FMA loop's rate on one
 * thread.  Besides speed, the own kernel gives the same bits for any
 * thread count. */
int ct__sgemm_avx2_preferred(int64_t M, int64_t N, int64_t K) {
    pthread_once(&g_once, gemm_init);
    if (g_route >= 0) return g_route; /* CT_GEMM fixes it: max-autotune does not time it */
    if (ct__route[CT_ROUTE_GEMM]) { /* max-autotune's choice (ops/route.h) */
        ct__route_seen[CT_ROUTE_GEMM] = true;
        return ct__route[CT_ROUTE_GEMM] == 2;
    }
    if (M < 4 * MR || N < 2 * NR || K < 8) return 0;
    /* On an AVX-512 CPU OpenBLAS's AVX-512 sgemm is the faster one: on
     * Zen 5 (2 x 512-bit FMA) bench_gemm at 2 threads measured it at
     * 1.4..1.9x this kernel's GFLOP/s on every single-matrix shape
     * (1024^3 479 vs 254), and a batch run one matrix per thread
     * (linalg.c) with single-threaded OpenBLAS calls took 0.82..0.87 ms
     * where this kernel took 1.45..1.52 (bmm 64 x [128,64] @ [64,128]). */
    if (ct__cpu_cap() >= CT_CAP_AVX512 && !ct__cpu_avx512_halved()) return 0;
    /* Zen 4's 512-bit FMAs are two 256-bit halves (AVX2's peak): bench_suite
     * at 2 threads, quiet, this kernel against OpenBLAS 0.3.21's AVX-512
     * one: matmul 1024^3 10.06 vs 10.48 ms, 4096x4096 @ 4096x64 11.69 vs
     * 13.61, bmm 64 x [128,64] @ [64,128] 0.968 vs 0.976; and its sums
     * are nearer torch's (test_matmul_precision: 100x1024x70 max error
     * 1.93e-5 against OpenBLAS's 2.32e-5, torch's 1.54e-5). */
    /* few rows, many columns: packing B (each element then feeds only M
     * rows) dominates, where OpenBLAS measured ahead (the conv shape) */
    if (M < 128 && N > 8 * M) return 0;
    return 1;
}

/* ---- B packed once (inference weights, linalg.c's cache) ------------------------
 * The layout gemm_worker reads: for each K block (pc = 0, kc, 2 kc, ...; kc
 * the blocking ct__sgemm_avx2_kc gives, the last block shorter), the
 * block's 16-column panels one after another, each [kcb][16] floats
 * (zero-padded past N), so that the block starts at pc * npn * 16 and its
 * panel p at + p * kcb * 16.  The products then run as with B packed on
 * the fly, bit for bit the same. */
int ct__sgemm_avx2_kc(int64_t K) {
    pthread_once(&g_once, gemm_init);
    if (g_use512) return ct__sgemm_avx512_kc(K);
    return K < g_kc ? (int)K : g_kc;
}

int64_t ct__sgemm_avx2_prepack_floats(int64_t N, int64_t K) {
    pthread_once(&g_once, gemm_init);
    return ct__gemm_prepack_floats(N, K, g_use512 ? CT_GEMM512_NR : NR);
}

void ct__sgemm_avx2_prepack(int64_t N, int64_t K, const float *B, int64_t sbk, int64_t sbn, float *dst) {
    pthread_once(&g_once, gemm_init);
    if (g_use512) ct__gemm_prepack(N, K, ct__sgemm_avx512_kc(K), CT_GEMM512_NR, ct__sgemm_avx512_pack_b, B, sbk, sbn, dst);
    else ct__gemm_prepack(N, K, ct__sgemm_avx2_kc(K), NR, pack_b, B, sbk, sbn, dst);
}

int ct__sgemm_avx2_prepacked(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam,
                             int64_t sak, const float *bpre, float beta, const float *bias, float *C,
                             int64_t ldc, int nthreads) {
    pthread_once(&g_once, gemm_init);
    if (g_use512) return ct__sgemm_avx512(M, N, K, alpha, A, sam, sak, NULL, 0, 0, beta, bias, C, ldc, nthreads, bpre);
    return gemm_run(M, N, K, alpha, A, CT_GEMM_F32, sam, sak, NULL, CT_GEMM_F32, 0, 0, beta, bias, C, ldc,
                    nthreads, g_kc, g_mc, g_nc, g_direct_n, (half_out){CT_GEMM_F32, NULL, 0, 0}, bpre);
}
