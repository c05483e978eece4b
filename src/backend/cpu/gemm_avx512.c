/* gemm_avx512.c -- ctorch's own GEMMs on 512-bit tiles (gemm_impl.h):
 *   - ct__gemm_bf16dot: products of bf16 values on bf16 dot products
 *     (AVX512_BF16: vdpbf16ps), f32 accumulation;
 *   - ct__sgemm_avx512: f32 with FMA, the same loops with one float per k
 *     where the bf16 mode has one pair (the "wide" mode below).
 *
 * What the bf16 mode serves: bf16 matmul / linear / bmm (autocast's
 * lower-precision products); it also takes f32 operands, rounded to bf16
 * (to nearest even, as torch rounds) as they are packed, which float32
 * "medium" does not use (see linalg.c).  On a CPU with AVX512_BF16 (AMD Zen 4
 * and later, Intel Cooper Lake and Sapphire Rapids and later) one
 * vdpbf16ps does 16 x 2 products and adds: twice the f32 FMA's rate.
 * Measured on Zen 4 (one thread): 234.5 GFLOP/s against the f32 FMA's
 * 117.4.  ctorch's earlier bf16 path converted the operands to f32 as it
 * packed them and ran the f32 kernel: the f32 rate at best.
 *
 * Structure: the GotoBLAS / BLIS loops of gemm_avx2.c (read its header),
 * with bf16 pairs instead of floats:
 *   - a packed A panel holds MR = 12 rows: for each pair of k (k even,
 *     k + 1) one 32-bit word per row, (A[i][k] | A[i][k+1] << 16);
 *   - a packed B panel holds NR = 32 columns, one 32-bit word per column
 *     per pair of k, (B[k][j] | B[k+1][j] << 16);
 *   - an odd K is padded with a zero product;
 *   - the micro-kernel keeps the 12 x 32 C tile in 24 zmm accumulators;
 *     per pair of k it loads 2 zmm of B, broadcasts 12 words of A and
 *     issues 24 vdpbf16ps.
 * Blocking (Zen 4: L1d 32 KiB, L2 1 MiB per core): KC = 4096 k, MC = 96
 * rows, NC = 4096 columns, the packed B block (KC x NC) kept to 1 MiB by
 * fewer columns; CT_GEMM_BF16_BLOCK=kc,mc,nc overrides them.  With a 4 MiB
 * block the packed B of a thread's columns (2.4 MiB for GPT-2's
 * [256, 768] x [768, 3072]) was streamed from L3 for every 96-row block of
 * A; at 1 MiB it stays in L2.  Measured on Zen 4, 2 threads, the two
 * budgets alternated step by step in one process (paired differences,
 * medians of 15 pairs): GPT-2 124M autocast bf16 training step -29, -16,
 * -18 ms (of ~720; 768 KiB: -23, 2 MiB: +10, 512 KiB: -3); the lm_head
 * product [256, 768] x [768, 50304] -4.4 of 60 ms, [256, 768] x [768,
 * 2304] -0.6 of 3.4 ms, dX products -0.1 to -0.5 ms, dW products level.
 * The f32 mode (K blocks of 256) had the same 4 MiB: there 1 MiB measured
 * (paired, 100 products each) [256, 768] x [768, 3072] -0.6 of 7.8 ms,
 * the lm_head's [256, 768] x [768, 50304] -6.3 and -7.6 of 115 ms, the
 * other GPT-2 shapes level.  The panels
 * then run from L2, not L1 (an A panel of K = 3072 is 72 KiB): per pair of
 * k the kernel reads 176 bytes for 24 vdpbf16ps (12 cycles), well within
 * L2's bandwidth.  Measured on Zen 4 against KC = 512, MC = 192 (GPT-2
 * 124M autocast bf16 training step, 4 x 64 tokens, medians of 6): 696 ->
 * 670 ms (-3.7%); 1024^3 and 4096x4096 @ 4096x64 level or faster.  A
 * long K block also lets the bf16 C of every linear of GPT-2 / BERT (K up
 * to 3072) be rounded tile group by tile group, with no f32 C at all.
 *
 * Threads split C's rows (12-row units) or its 32-column panels into one
 * contiguous range each and pack their own operands: every element of C is
 * computed by one thread in a fixed K order, so the bits do not depend on
 * the thread count.  vdpbf16ps treats bf16 subnormal inputs as zero and
 * flushes subnormal results (DAZ/FTZ, whatever MXCSR says): products that
 * small differ from an f32 computation, as they do in oneDNN's bf16
 * kernels, which use the same instruction. */
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "cpu_caps.h"
#include "ew_vec.h"
#include "gemm_impl.h"


#define MR CT_GEMM512_MR
#define NR CT_GEMM512_NR
#define GB 8 /* B panels per group: an A panel stays in L1 across them */
#define CT_AI __attribute__((always_inline)) static inline

static int g_kc = 4096, g_mc = 96, g_nc = 4096;
static int g_kcw = 256, g_mcw = 96, g_ncw = 4096; /* f32: CT_GEMM_AVX512_BLOCK=kc,mc,nc */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ok, g_ok512;
static int g_apack; /* CT_GEMM_BF16_APACK=1: pack A even where it can be read in place */

/* the settings, read by plain code (gemm_common.c: ct__gemm512_cfg, with
 * the CPU check): no function of this file runs before a caller has seen
 * ct__gemm_bf16dot_ok() or ct__sgemm_avx512_ok() say yes; under ASan even
 * a prologue here may hold AVX-512 instructions */
static void init(void) {
    const ct_gemm512_cfg *c = ct__gemm512_cfg();
    g_kc = c->kc; g_mc = c->mc; g_nc = c->nc;
    g_kcw = c->kcw; g_mcw = c->mcw; g_ncw = c->ncw;
    g_apack = c->apack;
    g_ok = c->ok;
    g_ok512 = c->ok512;
}

/* ---- operands as bf16 ---------------------------------------------------------- */

/* f32 -> bf16, to nearest even (torch's c10::BFloat16 rounding); NaN -> 0x7fc0 */
CT_AI uint16_t f2bf(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* element i of a run (type t, stride s) as bf16 bits */
CT_AI uint32_t el(const void *p, int t, int64_t i) {
    return t == CT_GEMM_BF16 ? ((const uint16_t *)p)[i] : f2bf(((const float *)p)[i]);
}
/* 16 f32 -> 16 bf16 in the low halves of 32-bit lanes, rounded as f2bf */
CT_AI __m512i cvt16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7fc0));
}
/* n (<= 32) consecutive elements of type t as 32 bf16 (zeros past n).
 * f32 runs go through vcvtne2ps2bf16 (one instruction for 32 values, where
 * the integer rounding of cvt16 took a dozen): to nearest even as f2bf, but
 * with f32 subnormal inputs taken as zero -- which vdpbf16ps does with a
 * bf16 subnormal anyway; only a value within 2^-134 below 2^-126, which f2bf
 * rounds up to the smallest normal, then counts as zero -- and NaN kept a
 * NaN (its payload may differ from 0x7fc0). */
CT_AI __m512i ld32(const void *p, int t, int n) {
    __mmask32 m = n >= 32 ? 0xffffffffu : (((__mmask32)1 << n) - 1);
    if (t == CT_GEMM_BF16) return _mm512_maskz_loadu_epi16(m, p);
    const float *f = (const float *)p;
    __mmask16 m0 = (__mmask16)(m & 0xffff), m1 = (__mmask16)(m >> 16);
    __m512 lo = _mm512_maskz_loadu_ps(m0, f);
    __m512 hi = m1 ? _mm512_maskz_loadu_ps(m1, f + 16) : _mm512_setzero_ps();
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* 16 x 16 transpose of 32-bit words */
CT_AI void tr16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* r[4g + c], lane L: column 4L + c of rows 4g..4g+3 */
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i x0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), x1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
        __m512i y0 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88),
                y1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
        t[8 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
        t[4 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Two rows of w (<= 16) elements each (k and k + 1, both contiguous) as
 * w words (lo | hi << 16), into dst (masked store of w words) */
static const uint16_t k_ilv[2][32] = {
    {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
     8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
    {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
     24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};

/* The generic walk: word (kk, j) of a panel of w words per pair,
 * element (k, j) at src[k*sk + j*sj], k < kc, j < n, zero past them */
static void pack_generic(int64_t kc, int n, int w, const void *src, int t, int64_t sk, int64_t sj,
                         uint32_t *dst) {
    const int es = t == CT_GEMM_BF16 ? 2 : 4;
    const char *s = (const char *)src;
    for (int64_t k = 0; k < kc; k += 2) {
        uint32_t *d = dst + (k / 2) * w;
        int j = 0;
        for (; j < n; j++) {
            uint32_t lo = el(s + (k * sk + j * sj) * es, t, 0);
            uint32_t hi = k + 1 < kc ? el(s + ((k + 1) * sk + j * sj) * es, t, 0) : 0;
            d[j] = lo | hi << 16;
        }
        for (; j < w; j++) d[j] = 0;
    }
}

/* Rows k, k+1 contiguous in j (a row-major B, or A^T): per pair, words
 * j = 0..n-1 interleaved from the two rows; w words per pair (w = 32 or 12) */
static void pack_rows2(int64_t kc, int n, int w, const void *src, int t, int64_t sk, uint32_t *dst) {
    const int es = t == CT_GEMM_BF16 ? 2 : 4;
    const __m512i i0 = _mm512_loadu_si512(k_ilv[0]), i1 = _mm512_loadu_si512(k_ilv[1]);
    const __mmask16 m0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
    const __mmask16 m1 = (__mmask16)(w >= 32 ? 0xffff : w > 16 ? (1u << (w - 16)) - 1 : 0);
    for (int64_t k = 0; k < kc; k += 2) {
        const char *r0 = (const char *)src + k * sk * es;
        __m512i a = ld32(r0, t, n);
        __m512i b = k + 1 < kc ? ld32(r0 + sk * es, t, n) : _mm512_setzero_si512();
        uint32_t *d = dst + (k / 2) * w;
        _mm512_mask_storeu_epi32(d, m0, _mm512_permutex2var_epi16(a, i0, b));
        if (m1) _mm512_mask_storeu_epi32(d + 16, m1, _mm512_permutex2var_epi16(a, i1, b));
    }
}

/* Rows j contiguous in k (an A row-major, or B^T): n (<= w) rows of kc
 * elements, row stride sj; words (kk, j) = row j's pair kk, 16 x 16
 * transposes; w words per pair */
static void pack_cols2(int64_t kc, int n, int w, const void *src, int t, int64_t sj, uint32_t *dst) {
    const int es = t == CT_GEMM_BF16 ? 2 : 4;
    const int64_t kp = (kc + 1) / 2;
    for (int j0 = 0; j0 < w; j0 += 16) {
        int nj = n - j0 < 16 ? n - j0 : 16; /* may be <= 0: zeros */
        int wj = w - j0 < 16 ? w - j0 : 16;
        __mmask16 sm = (__mmask16)(wj >= 16 ? 0xffff : (1u << wj) - 1);
        for (int64_t kk = 0; kk < kp; kk += 16) {
            int64_t ke = 2 * kk + 32 <= kc ? 32 : kc - 2 * kk;
            __m512i r[16];
            for (int q = 0; q < 16; q++) {
                const char *rp = (const char *)src + ((j0 + q) * sj + 2 * kk) * es;
#ifdef PFG
                _mm_prefetch(rp + 16 * sj * es, _MM_HINT_T0);
                if (es == 4) _mm_prefetch(rp + 16 * sj * es + 64, _MM_HINT_T0);
#endif
                r[q] = q < nj ? ld32(rp, t, (int)ke) : _mm512_setzero_si512();
            }
            tr16(r);
            int64_t nk = kp - kk < 16 ? kp - kk : 16;
            for (int64_t q = 0; q < nk; q++) _mm512_mask_storeu_epi32(dst + (kk + q) * w + j0, sm, r[q]);
        }
    }
}

/* ---- f32 panels (ct__sgemm_avx512): the same layouts, one word per k, the
 * floats themselves ------------------------------------------------------------ */

/* rows k contiguous in j: n (<= w) floats per k, zeros to w */
static void packw_rows(int64_t kc, int n, int w, const float *src, int64_t sk, uint32_t *dst) {
    const __mmask16 l0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
    const __mmask16 l1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    const __mmask16 m0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
    const __mmask16 m1 = (__mmask16)(w >= 32 ? 0xffff : w > 16 ? (1u << (w - 16)) - 1 : 0);
    for (int64_t k = 0; k < kc; k++) {
        const float *r = src + k * sk;
        float *d = (float *)dst + k * w;
        _mm512_mask_storeu_ps(d, m0, _mm512_maskz_loadu_ps(l0, r));
        if (m1) _mm512_mask_storeu_ps(d + 16, m1, _mm512_maskz_loadu_ps(l1, r + 16));
    }
}
/* rows j contiguous in k (row stride sj): 16 x 16 transposes */
static void packw_cols(int64_t kc, int n, int w, const float *src, int64_t sj, uint32_t *dst) {
    for (int j0 = 0; j0 < w; j0 += 16) {
        int nj = n - j0 < 16 ? n - j0 : 16; /* may be <= 0: zeros */
        int wj = w - j0 < 16 ? w - j0 : 16;
        __mmask16 sm = (__mmask16)(wj >= 16 ? 0xffff : (1u << wj) - 1);
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
            int64_t ke = kc - k0 < 16 ? kc - k0 : 16;
            __mmask16 lm = (__mmask16)(ke >= 16 ? 0xffff : (1u << ke) - 1);
            __m512i r[16];
            for (int q = 0; q < 16; q++)
                r[q] = q < nj ? _mm512_castps_si512(_mm512_maskz_loadu_ps(lm, src + (j0 + q) * sj + k0))
                              : _mm512_setzero_si512();
            tr16(r);
            for (int64_t q = 0; q < ke; q++) _mm512_mask_storeu_epi32(dst + (k0 + q) * w + j0, sm, r[q]);
        }
    }
}
static void packw_generic(int64_t kc, int n, int w, const float *src, int64_t sk, int64_t sj, uint32_t *dst) {
    for (int64_t k = 0; k < kc; k++) {
        float *d = (float *)dst + k * w;
        int j = 0;
        for (; j < n; j++) d[j] = src[k * sk + j * sj];
        for (; j < w; j++) d[j] = 0.0f;
    }
}

/* One panel of w words per k (wide: f32 words) or per pair of k (bf16
 * pairs): element (k, j) at src[k*sk + j*sj], k < kc, j < n (<= w), zeros
 * past n.  An A panel is (k, row) with w = MR, a B panel (k, column) with
 * w = NR.  Runs contiguous in j are interleaved or copied, runs contiguous
 * in k transposed; any other strides take the generic walk. */
static void pack_panel(int64_t kc, int n, int w, const void *src, int t, int64_t sk, int64_t sj, int wide,
                       uint32_t *dst) {
    if (sj == 1) {
        if (wide) packw_rows(kc, n, w, src, sk, dst);
        else pack_rows2(kc, n, w, src, t, sk, dst);
    } else if (sk == 1) {
        if (wide) packw_cols(kc, n, w, src, sj, dst);
        else pack_cols2(kc, n, w, src, t, sj, dst);
    } else if (wide) {
        packw_generic(kc, n, w, src, sk, sj, dst);
    } else {
        pack_generic(kc, n, w, src, t, sk, sj, dst);
    }
}

/* ---- the micro-kernel ------------------------------------------------------------ */

/* acc -> 16 floats of C, as gemm_avx2.c's upd: the first K block writes
 * alpha*acc + beta*(C or bias) (beta 0: nothing read), later ones C + alpha*acc */
CT_AI __m512 upd(__m512 acc, const float *cp, const float *ip, float alpha, float beta, int first) {
    if (alpha != 1.0f) acc = _mm512_mul_ps(_mm512_set1_ps(alpha), acc);
    if (first) {
        if (beta == 0.0f) return acc;
        __m512 c = _mm512_loadu_ps(ip);
        return beta == 1.0f ? _mm512_add_ps(c, acc) : _mm512_fmadd_ps(_mm512_set1_ps(beta), c, acc);
    }
    return _mm512_add_ps(_mm512_loadu_ps(cp), acc);
}

/* bf16 bits of 16 floats in the low halves of 32-bit lanes, rounded as
 * ct_to_dtype rounds (ew_vec's f32_to_bf16: to nearest even, NaN -> 0xffff),
 * so a bf16 C is bit for bit the f32 C converted */
CT_AI __m256i out_bf16(__m512 x) {
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0xffff)));
}

/* C[R x 32] at c (row stride ldc) (+)= A panel @ B panel over kw words per
 * row (pairs of k: vdpbf16ps; f32: one k, FMA), R = 12, 8 or 4 rows (the
 * smaller ones for a last row panel of 8 or 4 rows: 256 = 21 x 12 + 4 rows
 * no longer computes 8 rows of zeros); A's row r is at a + r * AS, one
 * step AINC words per k word.  The first block's beta operand is row i at
 * ci + i*ldci.  ST stores: f32 rows, or (STH) bf16 rows of a bf16 C, whose
 * one K block rounds here, without an f32 C. */
#define CT_UKR(NAME, VB, LOADB, BCAST, MAC, AS, AINC, R, ST)                                           \
    static void NAME(int64_t kw, const uint32_t *restrict a, int64_t as, const uint32_t *restrict b,  \
                     float *c, int64_t ldc, const float *ci, int64_t ldci, float alpha, float beta,   \
                     int first) {                                                                    \
        (void)as;                                                                                   \
        __m512 z = _mm512_setzero_ps();                                                             \
        __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z,     \
               c41 = z, c50 = z, c51 = z, c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z,     \
               c90 = z, c91 = z, ca0 = z, ca1 = z, cb0 = z, cb1 = z;                                \
        ST##_PF(R);                                                                                 \
        _Pragma("GCC unroll 2") for (int64_t kk = 0; kk < kw; kk++) {                              \
            VB b0 = LOADB(b), b1 = LOADB(b + 16);                                                   \
            CT_ROW(R, BCAST, MAC, AS, 0, c00, c01); CT_ROW(R, BCAST, MAC, AS, 1, c10, c11);          \
            CT_ROW(R, BCAST, MAC, AS, 2, c20, c21); CT_ROW(R, BCAST, MAC, AS, 3, c30, c31);          \
            CT_ROW(R, BCAST, MAC, AS, 4, c40, c41); CT_ROW(R, BCAST, MAC, AS, 5, c50, c51);          \
            CT_ROW(R, BCAST, MAC, AS, 6, c60, c61); CT_ROW(R, BCAST, MAC, AS, 7, c70, c71);          \
            CT_ROW(R, BCAST, MAC, AS, 8, c80, c81); CT_ROW(R, BCAST, MAC, AS, 9, c90, c91);          \
            CT_ROW(R, BCAST, MAC, AS, 10, ca0, ca1); CT_ROW(R, BCAST, MAC, AS, 11, cb0, cb1);        \
            a += AINC;                                                                              \
            b += NR;                                                                                \
        }                                                                                           \
        ST(R, 0, c00, c01); ST(R, 1, c10, c11); ST(R, 2, c20, c21); ST(R, 3, c30, c31);             \
        ST(R, 4, c40, c41); ST(R, 5, c50, c51); ST(R, 6, c60, c61); ST(R, 7, c70, c71);             \
        ST(R, 8, c80, c81); ST(R, 9, c90, c91); ST(R, 10, ca0, ca1); ST(R, 11, cb0, cb1);           \
    }
#define CT_ROW(R, BCAST, MAC, AS, r, x0, x1)                                                         \
    do {                                                                                             \
        if ((r) < (R)) {                                                                             \
            __typeof__(b0) av = BCAST(a + (r) * (AS));                                               \
            x0 = MAC(x0, av, b0);                                                                    \
            x1 = MAC(x1, av, b1);                                                                    \
        }                                                                                            \
    } while (0)
/* 32 floats of a C row: streamed when first is 2 (bctx.nts: 64-byte aligned) */
CT_AI void st_row(float *cp, __m512 r0, __m512 r1, int first) {
    if (first == 2) {
        _mm512_stream_ps(cp, r0);
        _mm512_stream_ps(cp + 16, r1);
    } else {
        _mm512_storeu_ps(cp, r0);
        _mm512_storeu_ps(cp + 16, r1);
    }
}
#define CT_ST(R, i, x0, x1)                                                                          \
    do {                                                                                             \
        if ((i) < (R)) {                                                                             \
            float *cp = c + (i) * ldc;                                                               \
            const float *ip = ci + (i) * ldci;                                                       \
            __m512 r0 = upd(x0, cp, ip, alpha, beta, first), r1 = upd(x1, cp + 16, ip + 16, alpha, beta, first); \
            st_row(cp, r0, r1, first);                                                               \
        }                                                                                            \
    } while (0)
/* f32 rows holding each value rounded to bf16 (CT_GEMM_F32R); first is 1
 * and C is never read (beta 0, or the bias at ci) */
CT_AI __m512 widen_bf16(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
#define CT_STR(R, i, x0, x1)                                                                         \
    do {                                                                                             \
        if ((i) < (R)) {                                                                             \
            float *cp = c + (i) * ldc;                                                               \
            const float *ip = ci + (i) * ldci;                                                       \
            __m512 r0 = widen_bf16(out_bf16(upd(x0, NULL, ip, alpha, beta, 1)));                       \
            __m512 r1 = widen_bf16(out_bf16(upd(x1, NULL, ip + 16, alpha, beta, 1)));                  \
            st_row(cp, r0, r1, first);                                                               \
        }                                                                                            \
    } while (0)
/* c is then the bf16 C (uint16_t) and ldc its row stride; first is 1 and
 * C is never read (beta 0, or the bias at ci) */
#define CT_STH(R, i, x0, x1)                                                                         \
    do {                                                                                             \
        if ((i) < (R)) {                                                                             \
            uint16_t *hp = (uint16_t *)(void *)c + (i) * ldc;                                        \
            const float *ip = ci + (i) * ldci;                                                       \
            _mm256_storeu_si256((__m256i *)hp, out_bf16(upd(x0, NULL, ip, alpha, beta, 1)));         \
            _mm256_storeu_si256((__m256i *)(hp + 16), out_bf16(upd(x1, NULL, ip + 16, alpha, beta, 1))); \
        }                                                                                            \
    } while (0)
/* the C lines a tile stores, fetched into L2 as the tile starts (its
 * products take thousands of cycles): every line of the rows, as the
 * stores address them -- an f32 row of 32 is two lines, a bf16 row one.
 * Stores to lines still in flight from memory stall the store queue at the
 * tile's end; with K = 256 (the weight gradients over 256 tokens) that was
 * ~20% of the product when only the first line of an f32 row was fetched. */
#define CT_C_PF(R)                                                                                   \
    for (int i = 0; i < (R); i++) {                                                                  \
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T1);                                      \
        _mm_prefetch((const char *)(c + i * ldc + 16), _MM_HINT_T1);                                 \
    }
/* (streamed lines are not fetched: that read is what streaming saves) */
#define CT_ST_PF(R)                                                                                  \
    if (first != 2) CT_C_PF(R)
#define CT_STR_PF(R) CT_ST_PF(R)
#define CT_STH_PF(R)                                                                                 \
    for (int i = 0; i < (R); i++) _mm_prefetch((const char *)((uint16_t *)(void *)c + i * ldc), _MM_HINT_T1);
#define LD_BH(p) ((__m512bh)_mm512_load_si512(p))
#define BC_BH(p) ((__m512bh)_mm512_set1_epi32((int)*(p)))
#define MAC_BH(acc, x, y) _mm512_dpbf16_ps(acc, x, y)
#define LD_PS(p) _mm512_load_ps((const float *)(p))
#define BC_PS(p) _mm512_set1_ps(*(const float *)(p))
#define MAC_PS(acc, x, y) _mm512_fmadd_ps(x, y, acc)
CT_UKR(ukr, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 12, CT_ST)
CT_UKR(ukr8, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 8, CT_ST)
CT_UKR(ukr4, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 4, CT_ST)
CT_UKR(ukr_h, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 12, CT_STH)
CT_UKR(ukr8_h, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 8, CT_STH)
CT_UKR(ukr4_h, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 4, CT_STH)
CT_UKR(ukr_f32, __m512, LD_PS, BC_PS, MAC_PS, 1, MR, 12, CT_ST)
CT_UKR(ukr8_f32, __m512, LD_PS, BC_PS, MAC_PS, 1, MR, 8, CT_ST)
CT_UKR(ukr4_f32, __m512, LD_PS, BC_PS, MAC_PS, 1, MR, 4, CT_ST)
/* A read in place: row r's pair kk is the word a[r as + kk] (a bf16 A whose
 * rows run along k, 4-byte aligned, K even: its pairs are already words) */
CT_UKR(ukr_rows, __m512bh, LD_BH, BC_BH, MAC_BH, as, 1, 12, CT_ST)
CT_UKR(ukr_rows_h, __m512bh, LD_BH, BC_BH, MAC_BH, as, 1, 12, CT_STH)
CT_UKR(ukr_r, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 12, CT_STR)
CT_UKR(ukr8_r, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 8, CT_STR)
CT_UKR(ukr4_r, __m512bh, LD_BH, BC_BH, MAC_BH, 1, MR, 4, CT_STR)
CT_UKR(ukr_rows_r, __m512bh, LD_BH, BC_BH, MAC_BH, as, 1, 12, CT_STR)
#undef CT_ROW
#undef CT_ST
#undef CT_STH
#undef CT_STR
#undef CT_C_PF
#undef CT_ST_PF
#undef CT_STR_PF
#undef CT_STH_PF
#undef CT_UKR

typedef void (*ukr_fn)(int64_t, const uint32_t *restrict, int64_t, const uint32_t *restrict, float *, int64_t,
                       const float *, int64_t, float, float, int);
/* [mode][rows 12, 8, 4][f32 C, bf16 C, f32 C of bf16 values]: mode 0 bf16
 * pairs, 1 f32 words, 2 bf16 A in place (12 rows) */
static const ukr_fn k_ukr[3][3][3] = {
    {{ukr, ukr_h, ukr_r}, {ukr8, ukr8_h, ukr8_r}, {ukr4, ukr4_h, ukr4_r}},
    {{ukr_f32, NULL, NULL}, {ukr8_f32, NULL, NULL}, {ukr4_f32, NULL, NULL}},
    {{ukr_rows, ukr_rows_h, ukr_rows_r}, {NULL, NULL, NULL}, {NULL, NULL, NULL}},
};

/* f32 values rounded to bf16 (as out_bf16), kept as f32: a partial tile's rows */
static void round_rows(float *o, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u & 0x7fffffffu) > 0x7f800000u ? 0xffff0000u : ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) << 16;
        memcpy(&o[i], &u, 4);
    }
}

/* one tile: mr x nr (<= 12 x 32) of C (f32 at c -- rounded to bf16 values
 * when rnd --, or a bf16 C at h, rows ldc apart) from rows of A as apart
 * (1: a packed panel; mode 2: in place); a partial one through a buffer:
 * the smallest kernel of >= mr rows writes it, its valid part is copied
 * (or rounded, cvt / round_rows) out */
static void tile(int mode, int64_t kp, const uint32_t *a, int64_t as, const uint32_t *b, float *c,
                 uint16_t *h, int rnd, int64_t ldc, const float *ci, int64_t ldci, int mr, int nr, float alpha,
                 float beta, int first, void (*cvt)(uint16_t *, const float *, int64_t)) {
    const int ri = mr > 8 ? 0 : mr > 4 ? 1 : 2, rows = 12 - 4 * ri;
    if (mr == rows && nr == NR) {
        k_ukr[mode][ri][h ? 1 : rnd ? 2 : 0](kp, a, as, b, h ? (float *)(void *)h : c, ldc, ci, ldci, alpha, beta,
                                            first);
        return;
    }
    float t[MR * NR] __attribute__((aligned(64))) = {0};
    if (!(first && beta == 0.0f))
        for (int i = 0; i < mr; i++)
            memcpy(t + i * NR, first ? ci + i * ldci : c + i * ldc, sizeof(float) * (size_t)nr);
    k_ukr[mode][ri][0](kp, a, as, b, t, NR, t, NR, alpha, beta, first != 0);
    for (int i = 0; i < mr; i++) {
        if (h) cvt(h + i * ldc, t + i * NR, nr);
        else if (rnd) round_rows(c + i * ldc, t + i * NR, nr);
        else memcpy(c + i * ldc, t + i * NR, sizeof(float) * (size_t)nr);
    }
}

/* ---- the driver ------------------------------------------------------------------- */

typedef struct bctx {
    int64_t M, N, K, sam, sak, sbk, sbn, ldc;
    const void *A, *B;
    int ta, tb;
    float alpha, beta, *C;
    const float *bias;
    int kc, mc, nc, nt, split_n;
    int64_t nunits;        /* units of the split dimension (worker) */
    int nts;               /* f32 C written with non-temporal stores (run) */
    atomic_llong *next;    /* the next unit to take */
    int wide; /* f32 products (ct__sgemm_avx512): a word per k, not per pair */
    /* a bf16 A with rows along k (sak 1), an even row stride and K, 4-byte
     * aligned: its pairs are words already, so whole 12-row panels are read
     * in place (ukr_rows) instead of packed -- the forward x W and the
     * backward dY W^T of every linear, whose A (M tokens x K) each thread
     * packed whole when the columns are split between threads */
    int arows;
    /* f32 B packed beforehand (ct__sgemm_avx512_prepack): K block pc's
     * panels start at bpre + pc * npn_pre * NR, panel p at + p * kc * NR */
    const uint32_t *bpre;
    int64_t npn_pre;
    /* a bf16 C (one K block only): whole tiles are rounded in the micro-
     * kernel's stores, partial ones by cvt from a tile buffer */
    uint16_t *Ch;
    int64_t ldch;
    int rnd; /* CT_GEMM_F32R: C is f32, each element rounded to bf16 in the kernel's stores */
    void (*cvt)(uint16_t *o, const float *x, int64_t n);
    uint32_t *ap, *bp;
    int64_t apsz, bpsz; /* words per thread */
} bctx;

static const float k_zrow[NR] __attribute__((aligned(64)));

static void block(const bctx *g, int64_t ic, int64_t mc, int64_t pc, int64_t kc, int64_t jc, int64_t nc,
                  const uint32_t *bp, uint32_t *ap) {
    const int64_t kp = g->wide ? kc : (kc + 1) / 2, np = (nc + NR - 1) / NR;
    const int first = pc == 0 ? 1 + g->nts : 0; /* 2: C streamed (bctx.nts) */
    const int esa = g->ta == CT_GEMM_BF16 ? 2 : 4;
    /* whole 12-row panels of an A read in place (g->arows) are not packed */
    for (int64_t i = 0; i < mc; i += MR) {
        int mr = (int)(mc - i < MR ? mc - i : MR);
        if (g->arows && mr == MR) continue;
        pack_panel(kc, mr, MR, (const char *)g->A + ((ic + i) * g->sam + pc * g->sak) * esa, g->ta, g->sak,
                   g->sam, g->wide, ap + (i / MR) * kp * MR);
    }
    const int64_t ldc = g->Ch ? g->ldch : g->ldc;
    for (int64_t p0 = 0; p0 < np; p0 += GB) {
        const int64_t p1 = p0 + GB < np ? p0 + GB : np;
        for (int64_t i = 0; i < mc; i += MR) {
            int mr = (int)(mc - i < MR ? mc - i : MR);
            const uint32_t *ai = ap + (i / MR) * kp * MR;
            int64_t as = 1;
            int mode = g->wide;
            if (g->arows && mr == MR) {
                ai = (const uint32_t *)g->A + ((ic + i) * g->sam + pc) / 2;
                as = g->sam / 2;
                mode = 2;
            }
            for (int64_t p = p0; p < p1; p++) {
                int64_t col = jc + p * NR, off = (ic + i) * ldc + col;
                float *cp = g->Ch ? NULL : g->C + off;
                /* the first block's beta operand: the bias, C itself, or (a bf16 C,
                 * beta 0: not read) a row of zeros */
                const float *ci = g->bias ? g->bias + col : cp ? cp : k_zrow;
                tile(mode, kp, ai, as, bp + p * kp * NR, cp, g->Ch ? g->Ch + off : NULL, g->rnd, ldc, ci,
                     g->bias || !cp ? 0 : ldc, mr,
                     (int)(nc - p * NR < NR ? nc - p * NR : NR), g->alpha, g->beta, first, g->cvt);
            }
        }
    }
}

/* C[r0:r1, c0:c1] on one thread's buffers */
static void run_range(const bctx *g, int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint32_t *ap, uint32_t *bp) {
    const int esb = g->tb == CT_GEMM_BF16 ? 2 : 4;
    for (int64_t jc = c0; jc < c1; jc += g->nc) {
        int64_t nc = c1 - jc < g->nc ? c1 - jc : g->nc;
        for (int64_t pc = 0; pc < g->K; pc += g->kc) {
            int64_t kc = g->K - pc < g->kc ? g->K - pc : g->kc, kp = g->wide ? kc : (kc + 1) / 2;
            const uint32_t *bq = bp;
            if (g->bpre) /* packed beforehand (f32): the block's panels; jc is a multiple of NR */
                bq = g->bpre + pc * g->npn_pre * NR + jc / NR * kc * NR;
            else
                for (int64_t p = 0; p * NR < nc; p++) {
                    int nr = (int)(nc - p * NR < NR ? nc - p * NR : NR);
                    pack_panel(kc, nr, NR, (const char *)g->B + (pc * g->sbk + (jc + p * NR) * g->sbn) * esb, g->tb,
                               g->sbk, g->sbn, g->wide, bp + p * kp * NR);
                }
            for (int64_t ic = r0; ic < r1; ic += g->mc)
                block(g, ic, r1 - ic < g->mc ? r1 - ic : g->mc, pc, kc, jc, nc, bq, ap);
        }
    }
}

/* The split dimension (32-column panels or 12-row panels) is cut into
 * g->nunits contiguous units, and the team's threads take them in order
 * from a shared counter until none is left: the thread that starts the
 * product starts at once (under OMP_WAIT_POLICY=PASSIVE the other one
 * first has to be woken, ~50-100 us on a VM), and a thread slowed by its
 * neighbours takes fewer units.  Each element of C is still computed by
 * one thread in a fixed K order: the bits depend on neither the thread
 * count nor which thread took a unit. */
static void worker(const bctx *g, uint32_t *ap, uint32_t *bp) {
    const int64_t np = g->split_n ? (g->N + NR - 1) / NR : (g->M + MR - 1) / MR;
    int64_t p0, p1;
    while (ct__gemm_take_unit(g->next, g->nunits, np, &p0, &p1)) {
        if (g->split_n) run_range(g, 0, g->M, p0 * NR, p1 * NR < g->N ? p1 * NR : g->N, ap, bp);
        else run_range(g, p0 * MR, p1 * MR < g->M ? p1 * MR : g->M, 0, g->N, ap, bp);
    }
}

/* worker w on team thread t's buffers (ct__gemm_team) */
static void team_worker(const void *ctx, int w, int t) {
    const bctx *g = ctx;
    (void)w;
    worker(g, g->ap + (int64_t)t * g->apsz, g->bp + (int64_t)t * g->bpsz);
    if (g->nts) _mm_sfence(); /* the streamed C visible before the team joins */
}

int ct__gemm_bf16dot(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                     int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                     const float *bias, void *C, int tc, int64_t ldc, int nthreads) {
    pthread_once(&g_once, init);
    return ct__gemm_bf16dot_ex(M, N, K, alpha, A, ta, sam, sak, B, tb, sbk, sbn, beta, bias, C, tc, ldc,
                               nthreads, g_kc, g_mc, g_nc);
}

static int run(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam, int64_t sak,
               const void *B, int tb, int64_t sbk, int64_t sbn, float beta, const float *bias, void *C, int tc,
               int64_t ldc, int nthreads, int kc_max, int mc_max, int nc_max, int wide, const float *bpre);

int ct__gemm_bf16dot_ex(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                        int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                        const float *bias, void *C, int tc, int64_t ldc, int nthreads, int kc_max,
                        int mc_max, int nc_max) {
    pthread_once(&g_once, init);
    if (!g_ok || (ta != CT_GEMM_F32 && ta != CT_GEMM_BF16) || (tb != CT_GEMM_F32 && tb != CT_GEMM_BF16) ||
        (tc != CT_GEMM_F32 && tc != CT_GEMM_BF16 && tc != CT_GEMM_F32R))
        return -1;
    return run(M, N, K, alpha, A, ta, sam, sak, B, tb, sbk, sbn, beta, bias, C, tc, ldc, nthreads,
               kc_max < 2 ? 2 : kc_max / 2 * 2, mc_max, nc_max, 0, NULL);
}

int ct__sgemm_avx512(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam, int64_t sak,
                     const float *B, int64_t sbk, int64_t sbn, float beta, const float *bias, float *C, int64_t ldc,
                     int nthreads, const float *bpre) {
    pthread_once(&g_once, init);
    if (!g_ok512) return -1;
    return run(M, N, K, alpha, A, CT_GEMM_F32, sam, sak, B, CT_GEMM_F32, sbk, sbn, beta, bias, C, CT_GEMM_F32, ldc,
               nthreads, g_kcw, g_mcw, g_ncw, 1, bpre);
}

int ct__sgemm_avx512_ex(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t sam, int64_t sak,
                        const float *B, int64_t sbk, int64_t sbn, float beta, const float *bias, float *C,
                        int64_t ldc, int nthreads, int kc_max, int mc_max, int nc_max) {
    pthread_once(&g_once, init);
    if (!g_ok512) return -1;
    return run(M, N, K, alpha, A, CT_GEMM_F32, sam, sak, B, CT_GEMM_F32, sbk, sbn, beta, bias, C, CT_GEMM_F32,
               ldc, nthreads, kc_max < 1 ? 1 : kc_max, mc_max, nc_max, 1, NULL);
}

/* ---- f32 B packed once (inference weights, linalg.c's cache) --------------------
 * For each K block (kc = ct__sgemm_avx512_kc(K), the last shorter), the
 * block's 32-column panels one after another, each [kcb][32] floats
 * (zero-padded past N): what worker reads, bit for bit the same products. */
int ct__sgemm_avx512_kc(int64_t K) {
    pthread_once(&g_once, init);
    return K < g_kcw ? (int)K : g_kcw;
}

void ct__sgemm_avx512_pack_b(int64_t kc, int nr, const float *B, int64_t sbk, int64_t sbn, float *dst) {
    pack_panel(kc, nr, NR, B, CT_GEMM_F32, sbk, sbn, 1, (uint32_t *)dst);
}

static int run(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam, int64_t sak,
               const void *B, int tb, int64_t sbk, int64_t sbn, float beta, const float *bias, void *C, int tc,
               int64_t ldc, int nthreads, int kc_max, int mc_max, int nc_max, int wide, const float *bpre) {
    mc_max = mc_max < MR ? MR : mc_max / MR * MR;
    nc_max = nc_max < NR ? NR : nc_max / NR * NR;
    if (M <= 0 || N <= 0) return 0;
    if ((tc == CT_GEMM_BF16 || tc == CT_GEMM_F32R) && (K <= 0 || K > kc_max || alpha == 0.0f || (beta != 0.0f && !bias)))
        return -2;
    if (K <= 0 || alpha == 0.0f) { /* C = beta * C (or beta * bias) */
        ct__gemm_scale_c(M, N, beta, bias, (float *)C, ldc);
        return 0;
    }
    bctx g;
    memset(&g, 0, sizeof g);
    g.M = M; g.N = N; g.K = K;
    g.A = A; g.B = B; g.ta = ta; g.tb = tb;
    g.sam = sam; g.sak = sak; g.sbk = sbk; g.sbn = sbn;
    g.alpha = alpha; g.beta = beta; g.bias = bias;
    g.wide = wide;
    g.arows = !wide && ta == CT_GEMM_BF16 && sak == 1 && sam % 2 == 0 && K % 2 == 0 &&
              (uintptr_t)A % 4 == 0 && !g_apack;
    g.bpre = (const uint32_t *)(const void *)bpre;
    g.npn_pre = (N + NR - 1) / NR;
    if (tc == CT_GEMM_BF16) {
        g.Ch = (uint16_t *)C;
        g.ldch = ldc;
        g.cvt = ct__ew_vtab()->f32_to_bf16;
    } else {
        g.C = (float *)C;
        g.ldc = ldc;
        g.rnd = tc == CT_GEMM_F32R;
    }
    g.kc = K < kc_max ? (int)(wide ? K : (K + 1) / 2 * 2) : kc_max;
    /* Non-temporal stores for a large f32 C that this product writes once and
     * never reads (one K block, beta 0, no bias): plain stores first read
     * every line of C (the C prefetch above fetches them), streaming ones do
     * not.  A weight gradient (dW = x^T dy over the tokens: K = 256 in
     * GPT-2's step) is read next by the optimizer at the step's end, long
     * after it left the caches.  Measured on AMD EPYC Zen 4 at 2 threads,
     * GPT-2's dW products, plain against streamed, paired medians: f32
     * [768,2304] -5.5%, [768,3072] -5.0%, [3072,768] -4.7%, [50304,768]
     * -2.0%; bf16 inputs -2.2%, -6.1%, -4.9%, -6.0% ([768,768], 2.4 MB:
     * -5.4% / -2.2%, under the threshold).  The threshold keeps C that a
     * next op reads at once (activations, dx: GPT-2's largest is 3 MB) in
     * the caches. */
    g.nts = (tc == CT_GEMM_F32 || tc == CT_GEMM_F32R) && beta == 0.0f && !bias && K <= g.kc && (uintptr_t)C % 64 == 0 &&
            ldc % 16 == 0 && (int64_t)M * N * 4 >= ct__gemm_stream_min_bytes(-1);
    int64_t nbm = (M + MR - 1) / MR, npn = (N + NR - 1) / NR;
    int nt = ct__gemm_split(nthreads, M, N, K, nbm, npn, 0, &g.split_n);
    g.nt = nt;
    /* the work units (worker, ct__gemm_plan_units) */
    int64_t per;
    g.nunits = ct__gemm_plan_units(nt, g.split_n ? npn : nbm, g.split_n ? !g.arows : !g.bpre, g.split_n ? N : M,
                                   1024, &per);
    atomic_llong next = 0;
    g.next = &next;
    int64_t rows_t = g.split_n ? M : per * MR;
    int64_t cols_t = g.split_n ? per * NR : npn * NR;
    g.mc = rows_t < mc_max ? (int)((rows_t + MR - 1) / MR * MR) : mc_max;
    g.nc = cols_t < nc_max ? (int)((cols_t + NR - 1) / NR * NR) : nc_max;
    int64_t kp = wide ? g.kc : g.kc / 2;
    /* the packed B block <= 1 MiB (the L2 of a Zen 4 core; see the top of
     * the file) */
    int64_t nc4 = ((int64_t)1 << 20) / (kp * 4) / NR * NR;
    if (nc4 < NR) nc4 = NR;
    if (g.nc > nc4) g.nc = (int)nc4;
    g.apsz = ((int64_t)g.mc * kp + 63) / 64 * 64;
    g.bpsz = ((int64_t)g.nc * kp + 63) / 64 * 64;
    size_t bytes = ((size_t)g.apsz + (size_t)g.bpsz) * 4 * (size_t)nt;
    char *buf = ct__malloc_aligned(bytes);
    if (!buf) return -1;
    g.ap = (uint32_t *)buf;
    g.bp = g.ap + g.apsz * nt;
    ct__gemm_team(nt, team_worker, &g);
    ct__free_aligned(buf, (void *)(uintptr_t)bytes);
    return 0;
}
