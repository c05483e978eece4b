/* attention_avx2.c -- the AVX2/FMA path of the fused SDPA kernels (FLASH and
 * MEMORY-EFFICIENT, forward and backward; the algorithm, the masks and the
 * dropout stream are those described in attention.c, which falls back to
 * its portable OpenBLAS path on CPUs without AVX2).
 *
 * The library is built for baseline x86-64, so this file switches AVX2/FMA
 * on with a target pragma; attention.c calls it only when ct__cpu_cap() says
 * the CPU has them.
 *
 * Every product goes through one register-blocked micro-kernel: a 6 x 16
 * block of C (12 ymm accumulators) += A (6 rows, any row/column stride, so
 * A^T costs nothing) times a 16-column block of B (rows ldb apart).  K (and
 * V for the backward) are packed ONCE per call into 16-key panels
 * [S/16][E][16], so S = Q K^T streams contiguous 1 KiB-per-8-E panels
 * instead of repacking 64 x 64 tiles through BLAS; V, dO, Q, K row-major
 * already have the layout the P V / dS K / P^T dO / dS^T Q products need.
 * The softmax scale is applied to the score block on the way out of the
 * kernel, and exp is a vectorized Cephes polynomial.
 *
 * Tiles: FLASH forward Bq 64 x Bk 128; MEMORY-EFFICIENT forward Bk = S
 * (one exact softmax pass per row) with Bq cut so a [Bq, S] block stays near
 * 256 KiB; the backward of both uses 64 x 128 tiles.
 *
 * Threads: the forward runs (batch x head x query block) tasks.  The backward
 * walks key blocks in the outer loop (FlashAttention-2 order) and runs
 * (batch x kv-head) tasks when there are at least as many as threads;
 * otherwise (batch x kv-head x key-block range) tasks, whose dK/dV rows are
 * disjoint and whose dQ goes to per-task partials summed in task order at
 * the end -- deterministic for a given thread count either way. */
#ifndef __clang__ /* clang ignores it: CMakeLists.txt passes -mavx2 -mfma for this file */
#pragma GCC target("avx2,fma")
#endif
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_impl.h"
#include "ew_vec.h"
#include "vmath.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define MR 6
#define NR 16

#define hsum ct__v8_hsum
#define hmax ct__v8_hmax

/* ---- half storage (A->dt bf16 or f16) ------------------------------------------
 * Tiles are converted to float32 as they are loaded (with the vectorized
 * conversions of ct_to_dtype, so every value is what the op layer's
 * whole-tensor float32 copies held) and each result is rounded once when it
 * is stored: the same arithmetic as the float32 kernels on converted inputs,
 * without the extra passes over memory. */
static const ct_ew_vtab *g_vt;
/* element off of a half tensor at p */
static inline const uint16_t *hp(const void *p, int64_t off) { return (const uint16_t *)p + off; }
/* nr rows of n elements: dst (rows ldd apart) = src (half, rows lds apart) */
static void load_rows(const att *A, const uint16_t *src, int64_t lds, int64_t nr, int64_t n, float *dst,
                      int64_t ldd) {
    void (*cv)(float *, const uint16_t *, int64_t) = A->dt == CT_BF16 ? g_vt->bf16_to_f32 : g_vt->f16_to_f32;
    for (int64_t r = 0; r < nr; r++) cv(dst + r * ldd, src + r * lds, n);
}
/* nr rows of n elements: dst (half, rows ldd apart) = src rounded */
static void store_rows(const att *A, const float *src, int64_t lds, int64_t nr, int64_t n, uint16_t *dst,
                       int64_t ldd) {
    void (*cv)(uint16_t *, const float *, int64_t) = A->dt == CT_BF16 ? g_vt->f32_to_bf16 : g_vt->f32_to_f16;
    for (int64_t r = 0; r < nr; r++) cv(dst + r * ldd, src + r * lds, n);
}

/* row[c] = exp(row[c] - m); returns the sum.  m is the row's max (or its
 * logsumexp, for the backward), so row[c] - m <= 0: the softmax exp. */
static float exp_row(float *row, int64_t n, float m) {
    int64_t c = 0;
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    for (; c + 8 <= n; c += 8) {
        __m256 e = ct__v8_expf_neg(_mm256_sub_ps(_mm256_loadu_ps(row + c), vm));
        _mm256_storeu_ps(row + c, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum(acc);
    for (; c < n; c++) {
        float e = expf(row[c] - m);
        row[c] = e;
        sum += e;
    }
    return sum;
}

static float max_row(const float *row, int64_t n) {
    int64_t c = 0;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= n; c += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + c));
    float mx = hmax(vm);
    for (; c < n; c++) mx = row[c] > mx ? row[c] : mx;
    return mx;
}

/* ---- micro-kernel ----------------------------------------------------------- */
/* C[r][c] (acc ? += : =) alpha sum_k A[r rs + k cs] B[k ldb + c] for r < mr <= 6,
 * c < nc <= 16.  mr is a constant at every call site (inlined), so the
 * accumulators stay in registers. */
static inline __attribute__((always_inline)) void mk(const int mr, int64_t K, const float *A,
                                                     int64_t rs, int64_t cs, const float *B,
                                                     int64_t ldb, float *C, int64_t ldc, int nc,
                                                     int acc, float alpha) {
    /* named accumulators (an array would be spilled to the stack) */
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = A, *a1 = A + rs, *a2 = A + 2 * rs, *a3 = A + 3 * rs, *a4 = A + 4 * rs,
                *a5 = A + 5 * rs;
#define MK_ROW(r, ap)                                                                       \
    if (mr > r) {                                                                           \
        __m256 av = _mm256_broadcast_ss(ap + k * cs);                                       \
        c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);                                         \
        c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);                                         \
    }
#define MK_BODY                                                                             \
    MK_ROW(0, a0) MK_ROW(1, a1) MK_ROW(2, a2) MK_ROW(3, a3) MK_ROW(4, a4) MK_ROW(5, a5)
    if (nc == NR) {
#pragma GCC unroll 4
        for (int64_t k = 0; k < K; k++) {
            __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8);
            MK_BODY
        }
    } else {
        __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc), idx);
        __m256i m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(nc - 8), idx);
        for (int64_t k = 0; k < K; k++) {
            __m256 b0 = _mm256_maskload_ps(B + k * ldb, m0);
            __m256 b1 = _mm256_maskload_ps(B + k * ldb + 8, m1);
            MK_BODY
        }
    }
#undef MK_BODY
#undef MK_ROW
    __m256 c0[MR] = {c00, c10, c20, c30, c40, c50}, c1[MR] = {c01, c11, c21, c31, c41, c51};
    __m256 va = _mm256_set1_ps(alpha);
    for (int r = 0; r < MR; r++) {
        if (r >= mr) break;
        float *cr = C + r * ldc;
        __m256 x0 = _mm256_mul_ps(c0[r], va), x1 = _mm256_mul_ps(c1[r], va);
        if (nc == NR) {
            if (acc) {
                x0 = _mm256_add_ps(x0, _mm256_loadu_ps(cr));
                x1 = _mm256_add_ps(x1, _mm256_loadu_ps(cr + 8));
            }
            _mm256_storeu_ps(cr, x0);
            _mm256_storeu_ps(cr + 8, x1);
        } else {
            float t[NR];
            _mm256_storeu_ps(t, x0);
            _mm256_storeu_ps(t + 8, x1);
            for (int c = 0; c < nc; c++) cr[c] = acc ? cr[c] + t[c] : t[c];
        }
    }
}

/* The causal triangle of a tile.  Query row r of a tile at (i0, j0) sees
 * key column c iff c <= r + off, off = i0 - j0 (top-left alignment, as
 * ct__att_masks).  A product over a tile that the diagonal crosses skips the
 * 6-row by 16-column blocks (or the K range) that only masked entries touch:
 *   TRI_COLS  C's rows are queries, its columns keys (S = Q K^T, dP = dO V^T):
 *             a row block [m0, m0 + 6) computes the column blocks that start
 *             before m0 + 6 + off.  What it skips is masked for every row of
 *             the block: S gets -inf there from ct__att_masks, dP gets zeros
 *             (zero_rest), so P and dS are exactly 0 in the whole masked part
 *             and finite everywhere.
 *   TRI_KQ    C's rows are queries, K runs over keys (O += P V, dQ += dS K):
 *             K stops at m0 + 6 + off.
 *   TRI_KK    C's rows are keys, K runs over queries (dV += P^T dO,
 *             dK += dS^T Q): K starts at m0 - off.
 * The terms skipped are products with exact zeros, so for finite inputs the
 * results are bit for bit those of the whole product.  At GPT-2's T = 64
 * (one 64 x 64 tile a head) this skips ~40% of the work. */
enum { TRI_NONE, TRI_COLS, TRI_KQ, TRI_KK };

/* C[M x N] (acc ? += : =) alpha A B: A(r, k) = A[r rs + k cs]; the 16-column
 * block n0 of B starts at B + (n0 / 16) bpanel with rows ldb apart (row-major
 * B: bpanel 16, ldb its row stride; packed panels: bpanel K 16, ldb 16).
 * tri, off: the causal triangle above (TRI_NONE: the whole product). */
static void gemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t rs, int64_t cs,
                 const float *B, int64_t ldb, int64_t bpanel, float *C, int64_t ldc, int acc,
                 float alpha, int tri, int64_t off, int zero_rest) {
    for (int64_t n0 = 0; n0 < N; n0 += NR) {
        int nc = N - n0 < NR ? (int)(N - n0) : NR;
        const float *Bb = B + (n0 / NR) * bpanel;
        for (int64_t m0 = 0; m0 < M; m0 += MR) {
            int mr = M - m0 < MR ? (int)(M - m0) : MR;
            int64_t k0 = 0, k1 = K;
            float *Cb = C + m0 * ldc + n0;
            if (tri == TRI_COLS && n0 >= m0 + mr + off) {
                if (zero_rest)
                    for (int r = 0; r < mr; r++) memset(Cb + r * ldc, 0, sizeof(float) * (size_t)nc);
                continue;
            }
            if (tri == TRI_KQ && m0 + mr + off < K) k1 = m0 + mr + off;
            if (tri == TRI_KK && m0 - off > 0) k0 = m0 - off;
            if (k1 <= k0) {
                if (!acc)
                    for (int r = 0; r < mr; r++) memset(Cb + r * ldc, 0, sizeof(float) * (size_t)nc);
                continue;
            }
            const float *Ab = A + m0 * rs + k0 * cs, *Bk = Bb + k0 * ldb;
            switch (mr) {
            case 6: mk(6, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            case 5: mk(5, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            case 4: mk(4, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            case 3: mk(3, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            case 2: mk(2, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            default: mk(1, k1 - k0, Ab, rs, cs, Bk, ldb, Cb, ldc, nc, acc, alpha); break;
            }
        }
    }
}

/* Packs 16-row panel p of head bh of X [B][H][S][D] (element strides st[]
 * over B, H, S; D dense; float32 or A's half dtype) into o [D][16] float32
 * (rows past S are zero). */
#define PACK_DC 128
static void pack_panel(const att *A, const void *X, int64_t H, const int64_t *st, int64_t S, int64_t D,
                       int64_t bh, int64_t p, float *o) {
    int64_t rs = st[2];
    int64_t base = (bh / H) * st[0] + (bh % H) * st[1] + p * NR * rs;
    int64_t nr = S - p * NR < NR ? S - p * NR : NR;
    if (A->dt == CT_F32) {
        const float *x = (const float *)X + base;
        for (int64_t d = 0; d < D; d++) {
            int64_t c = 0;
            for (; c < nr; c++) o[d * NR + c] = x[c * rs + d];
            for (; c < NR; c++) o[d * NR + c] = 0;
        }
        return;
    }
    float tmp[NR * PACK_DC]; /* nr rows of up to PACK_DC columns, converted */
    for (int64_t d0 = 0; d0 < D; d0 += PACK_DC) {
        int64_t nd = D - d0 < PACK_DC ? D - d0 : PACK_DC;
        load_rows(A, hp(X, base + d0), rs, nr, nd, tmp, nd);
        for (int64_t d = 0; d < nd; d++) {
            int64_t c = 0;
            for (; c < nr; c++) o[(d0 + d) * NR + c] = tmp[c * nd + d];
            for (; c < NR; c++) o[(d0 + d) * NR + c] = 0;
        }
    }
}

/* The panels of head bh's first S1 rows (a multiple of 16, or S):
 * P [ceil(S1/16)][D][16], inside one thread */
static void pack_head(const att *A, const void *X, int64_t H, const int64_t *st, int64_t S, int64_t D,
                      int64_t bh, int64_t S1, float *P) {
    for (int64_t p = 0; p * NR < S1; p++) pack_panel(A, X, H, st, S, D, bh, p, P + p * D * NR);
}

/* Every head's panels, P [B H][ceil(S/16)][D][16], over nt threads */
static void pack_panels(const att *A, const void *X, int64_t B, int64_t H, const int64_t *st, int64_t S,
                        int64_t D, float *P, int nt) {
    int64_t np = (S + NR - 1) / NR, ntask = B * H * np;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t t = 0; t < ntask; t++) pack_panel(A, X, H, st, S, D, t / np, t % np, P + t * D * NR);
}

static int64_t round16(int64_t x) { return (x + NR - 1) / NR * NR; }

/* ---- forward ---------------------------------------------------------------- */
/* kp: the key panels of head (b, h)'s kv head (pack_head).  hb (half
 * storage only): room for the query rows [bq, E], a key block of V [bk, Ev]
 * and the output rows [bq, Ev] in float32 */
static void fwd_task(const att *A, const float *kp, int64_t b, int64_t h, int64_t i0, int64_t bq,
                     int64_t bk, float *Sb, float *m, float *l, float *hb, void *O, float *LSE) {
    int64_t nq = A->L - i0 < bq ? A->L - i0 : bq, E = A->E, Ev = A->Ev, hk = h / A->G;
    int64_t bh = b * A->Hq + h;
    int64_t qs = A->qst[2], vs = A->vst[2], lo = A->ost[2];
    int64_t qoff = b * A->qst[0] + h * A->qst[1] + i0 * qs, voff = b * A->vst[0] + hk * A->vst[1];
    int64_t ooff = b * A->ost[0] + h * A->ost[1] + i0 * lo;
    bool half = A->dt != CT_F32;
    const float *Q;
    float *o, *vf = NULL;
    int64_t ql, ld;
    if (half) {
        float *qf = hb;
        vf = hb + bq * E;
        o = vf + bk * Ev;
        load_rows(A, hp(A->q, qoff), qs, nq, E, qf, E);
        Q = qf, ql = E, ld = Ev;
    } else {
        Q = A->q + qoff, ql = qs;
        o = (float *)O + ooff, ld = lo;
    }
    for (int64_t r = 0; r < nq; r++) memset(o + r * ld, 0, sizeof(float) * (size_t)Ev);
    for (int64_t r = 0; r < nq; r++) { m[r] = -INFINITY; l[r] = 0; }
    int64_t jend = ct__att_key_end(A, i0, nq);
    for (int64_t j0 = 0; j0 < jend; j0 += bk) {
        int64_t nk = jend - j0 < bk ? jend - j0 : bk;
        int tri = A->causal && j0 + nk - 1 > i0; /* the diagonal crosses this tile */
        gemm(nq, nk, E, Q, ql, 1, kp + (j0 / NR) * E * NR, NR, E * NR, Sb, bk, 0, A->scale,
             tri ? TRI_COLS : TRI_NONE, i0 - j0, 0);
        if (A->mask || (A->causal && j0 + nk - 1 > i0))
            ct__att_masks(A, b, h, i0, nq, j0, nk, Sb, bk);
        ct__att_online_rows(A, Sb, bk, nq, nk, m, l, o, ld, bh, i0, j0, max_row, exp_row);
        if (half) {
            load_rows(A, hp(A->v, voff + j0 * vs), vs, nk, Ev, vf, Ev);
            gemm(nq, Ev, nk, Sb, bk, 1, vf, Ev, NR, o, ld, 1, 1.0f, tri ? TRI_KQ : TRI_NONE, i0 - j0, 0);
        } else {
            gemm(nq, Ev, nk, Sb, bk, 1, A->v + voff + j0 * vs, vs, NR, o, ld, 1, 1.0f,
                 tri ? TRI_KQ : TRI_NONE, i0 - j0, 0);
        }
    }
    ct__att_finish_rows(A, o, ld, nq, m, l, LSE, bh, i0);
    if (half) store_rows(A, o, ld, nq, Ev, (uint16_t *)O + ooff, lo);
}

/* flash tile sizes (bk a multiple of 16) */
#ifndef ATT_FWD_BQ
#define ATT_FWD_BQ 64
#endif
#ifndef ATT_FWD_BK
#define ATT_FWD_BK 128
#endif

ct_status ct__att_fwd_avx2(const att *A, void *O, float *LSE) {
    g_vt = ct__ew_vtab();
    int64_t bq = ATT_FWD_BQ, bk = A->flash ? ATT_FWD_BK : round16(A->S > 0 ? A->S : 1);
    if (!A->flash) { /* a [bq, S] score block: keep it within ~256 KiB (L2) */
        int64_t fit = 65536 / bk / MR * MR;
        bq = fit < MR ? MR : fit < bq ? fit : bq;
    }
    int64_t np = (A->S + NR - 1) / NR, panel = np * A->E * NR;
    int nt = ct__num_threads();
    int64_t nqb = (A->L + bq - 1) / bq, ntask = A->B * A->Hq * nqb;
    /* One query block a head (L <= 64: GPT-2 at T = 64): each task packs the
     * key panels it reads itself, and the call is one parallel region (under
     * OMP_WAIT_POLICY=PASSIVE every region wakes the sleeping threads, ~50 us
     * on the VMs measured).  Otherwise every head's panels are packed once,
     * for all its query blocks, in a region of their own.  Scratch comes from
     * the caching allocator: a fresh malloc'ed megabyte paid its page faults
     * on every call (L = 512: ~2 ms of a 3 ms forward). */
    bool own = nqb == 1;
    size_t kpb = own ? 0 : sizeof(float) * (size_t)(A->B * A->Hk * panel + 1);
    float *Kp = NULL;
    if (!own) {
        Kp = ct__malloc_aligned(kpb);
        if (!Kp) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention: out of memory");
        pack_panels(A, A->k, A->B, A->Hk, A->kst, A->S, A->E, Kp, nt);
    }
    int fail = 0;
    if (ntask < nt) nt = (int)(ntask > 0 ? ntask : 1);
#pragma omp parallel num_threads(nt) reduction(| : fail)
    {
        size_t hbn = A->dt != CT_F32 ? (size_t)(bq * A->E + bk * A->Ev + bq * A->Ev) : 0;
        size_t bufb = sizeof(float) * ((size_t)(bq * bk + 2 * bq) + hbn + (own ? (size_t)panel : 0));
        float *buf = ct__malloc_aligned(bufb);
        if (!buf) fail = 1;
        float *kown = buf ? buf + bq * bk + 2 * bq + hbn : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            if (!buf) continue;
            int64_t qb = t % nqb, bh = t / nqb, b = bh / A->Hq, h = bh % A->Hq;
            int64_t kvh = b * A->Hk + h / A->G;
            const float *kp = kown;
            if (own) pack_head(A, A->k, A->Hk, A->kst, A->S, A->E, kvh, ct__att_key_end(A, qb * bq, bq), kown);
            else kp = Kp + kvh * panel;
            fwd_task(A, kp, b, h, qb * bq, bq, bk, buf, buf + bq * bk, buf + bq * bk + bq,
                     buf + bq * bk + 2 * bq, O, LSE);
        }
        ct__free_aligned(buf, (void *)(uintptr_t)bufb);
    }
    if (Kp) ct__free_aligned(Kp, (void *)(uintptr_t)kpb);
    if (fail) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention: out of memory");
    return CT_OK;
}

/* ---- backward --------------------------------------------------------------- */
/* FlashAttention-2 order: the outer loop walks key blocks, so the dK_j, dV_j
 * rows being accumulated stay in cache while the query blocks stream by; dQ_i
 * accumulates in place. */
typedef struct bwd_ws {
    float *Sb, *dP, *Pd;
    /* half storage only: a key block of K [bk, E], its dK and dV rows [bk, E],
     * [bk, Ev], and the query and grad_out rows [bq, E], [bq, Ev] in float32 */
    float *kf, *dkf, *dvf, *qf, *gf;
} bwd_ws;

/* Key blocks [jb0, jb1) of kv head (b, hk), over its G query heads: dK/dV
 * rows of those blocks are accumulated into dK, dV; dQ of query head g
 * accumulates into dqb + g dqh (rows dqr apart; float32 either way). Dall:
 * D = rowsum(dO * O) of every row. */
static void bwd_keys(const att *A, const float *kp, const float *vp, const float *Dall, int64_t b,
                     int64_t hk, int64_t jb0, int64_t jb1, int64_t bq, int64_t bk,
                     const bwd_ws *w, float *dqb, int64_t dqh, int64_t dqr, void *dK, void *dV) {
    int64_t E = A->E, Ev = A->Ev, L = A->L, S = A->S;
    int64_t ks = A->kst[2], qs = A->qst[2], gs = A->gst[2], dks = A->dkst[2], dvs = A->dvst[2];
    int64_t koff = b * A->kst[0] + hk * A->kst[1];
    float *Sb = w->Sb, *dP = w->dP, *Pd = w->Pd;
    bool half = A->dt != CT_F32;
    for (int64_t jb = jb0; jb < jb1; jb++) {
        int64_t j0 = jb * bk, nk = S - j0 < bk ? S - j0 : bk;
        int64_t dkoff = b * A->dkst[0] + hk * A->dkst[1] + j0 * dks;
        int64_t dvoff = b * A->dvst[0] + hk * A->dvst[1] + j0 * dvs;
        const float *Kb;
        float *dk, *dv;
        int64_t kl, dkl, dvl;
        if (half) {
            load_rows(A, hp(A->k, koff + j0 * ks), ks, nk, E, w->kf, E);
            memset(w->dkf, 0, sizeof(float) * (size_t)(nk * E));
            memset(w->dvf, 0, sizeof(float) * (size_t)(nk * Ev));
            Kb = w->kf, kl = E, dk = w->dkf, dkl = E, dv = w->dvf, dvl = Ev;
        } else {
            Kb = A->k + koff + j0 * ks, kl = ks;
            dk = (float *)dK + dkoff, dkl = dks;
            dv = (float *)dV + dvoff, dvl = dvs;
        }
        /* causal: query block i sees key j0 iff i0 + nq > j0 */
        int64_t i_first = A->causal ? j0 / bq : 0;
        for (int64_t g = 0; g < A->G; g++) {
            int64_t h = hk * A->G + g, bh = b * A->Hq + h;
            for (int64_t i0 = i_first * bq; i0 < L; i0 += bq) {
                int64_t nq = L - i0 < bq ? L - i0 : bq;
                if (A->causal && i0 + nq <= j0) continue;
                int64_t qoff = b * A->qst[0] + h * A->qst[1] + i0 * qs;
                int64_t goff = b * A->gst[0] + h * A->gst[1] + i0 * gs;
                const float *Q, *go;
                int64_t ql, gl;
                if (half) {
                    load_rows(A, hp(A->q, qoff), qs, nq, E, w->qf, E);
                    load_rows(A, hp(A->go, goff), gs, nq, Ev, w->gf, Ev);
                    Q = w->qf, ql = E, go = w->gf, gl = Ev;
                } else {
                    Q = A->q + qoff, ql = qs, go = A->go + goff, gl = gs;
                }
                const float *lse = A->lse + bh * L + i0, *Dv = Dall + bh * L + i0;
                float *dq = dqb + g * dqh + i0 * dqr;
                int tri = A->causal && j0 + nk - 1 > i0; /* the diagonal crosses this tile */
                int64_t off = i0 - j0;
                gemm(nq, nk, E, Q, ql, 1, kp + jb * (bk / NR) * E * NR, NR, E * NR, Sb, bk, 0,
                     A->scale, tri ? TRI_COLS : TRI_NONE, off, 0);
                if (A->mask || tri)
                    ct__att_masks(A, b, h, i0, nq, j0, nk, Sb, bk);
                for (int64_t r = 0; r < nq; r++) {
                    float *row = Sb + r * bk;
                    if (lse[r] == INFINITY) memset(row, 0, sizeof(float) * (size_t)nk);
                    else exp_row(row, nk, lse[r]); /* P */
                }
                gemm(nq, nk, Ev, go, gl, 1, vp + jb * (bk / NR) * Ev * NR, NR, Ev * NR, dP, bk, 0,
                     1.0f, tri ? TRI_COLS : TRI_NONE, off, 1);
                const float *Pv = Sb;
                if (A->drop) {
                    for (int64_t r = 0; r < nq; r++) {
                        float *kr = Pd + r * bk;
                        ct__att_drop_row(A, NULL, nk, (uint64_t)((bh * L + i0 + r) * S + j0), kr);
                        for (int64_t c = 0; c < nk; c++) {
                            dP[r * bk + c] *= kr[c];
                            kr[c] *= Sb[r * bk + c];
                        }
                    }
                    Pv = Pd;
                }
                /* dV_j += P'^T dO_i */
                gemm(nk, Ev, nq, Pv, 1, bk, go, gl, NR, dv, dvl, 1, 1.0f, tri ? TRI_KK : TRI_NONE, off, 0);
                /* dS = P (dP - D) */
                for (int64_t r = 0; r < nq; r++) {
                    __m256 d = _mm256_set1_ps(Dv[r]);
                    float *pr = Sb + r * bk, *dr = dP + r * bk;
                    int64_t c = 0;
                    for (; c + 8 <= nk; c += 8)
                        _mm256_storeu_ps(dr + c, _mm256_mul_ps(_mm256_loadu_ps(pr + c),
                                                               _mm256_sub_ps(_mm256_loadu_ps(dr + c), d)));
                    for (; c < nk; c++) dr[c] = pr[c] * (dr[c] - Dv[r]);
                }
                /* dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i */
                gemm(nq, E, nk, dP, bk, 1, Kb, kl, NR, dq, dqr, 1, A->scale, tri ? TRI_KQ : TRI_NONE, off, 0);
                gemm(nk, E, nq, dP, 1, bk, Q, ql, NR, dk, dkl, 1, A->scale, tri ? TRI_KK : TRI_NONE, off, 0);
            }
        }
        if (half) {
            store_rows(A, dk, dkl, nk, E, (uint16_t *)dK + dkoff, dks);
            store_rows(A, dv, dvl, nk, Ev, (uint16_t *)dV + dvoff, dvs);
        }
    }
}

/* D = rowsum(dO * O) of flat query row r ([B, Hq, L]) */
static float d_row(const att *A, int64_t r) {
    int64_t L = A->L, bb = r / (A->Hq * L), hh = r / L % A->Hq, ii = r % L;
    int64_t go_off = bb * A->gst[0] + hh * A->gst[1] + ii * A->gst[2];
    int64_t o_off = bb * A->ost[0] + hh * A->ost[1] + ii * A->ost[2];
    float s = 0;
    if (A->dt == CT_F32) {
        const float *go = A->go + go_off, *o = A->o + o_off;
        for (int64_t c = 0; c < A->Ev; c++) s += go[c] * o[c];
        return s;
    }
    float gt[PACK_DC], ot[PACK_DC];
    for (int64_t c0 = 0; c0 < A->Ev; c0 += PACK_DC) {
        int64_t n = A->Ev - c0 < PACK_DC ? A->Ev - c0 : PACK_DC;
        load_rows(A, hp(A->go, go_off + c0), 0, 1, n, gt, 0);
        load_rows(A, hp(A->o, o_off + c0), 0, 1, n, ot, 0);
        for (int64_t c = 0; c < n; c++) s += gt[c] * ot[c];
    }
    return s;
}

/* dense float32 dQ row r (half storage) rounded into dQo */
static void store_dq_row(const att *A, const float *dQ, int64_t r, void *dQo) {
    int64_t L = A->L, b = r / (A->Hq * L), h = r / L % A->Hq, i = r % L;
    store_rows(A, dQ + r * A->E, 0, 1, A->E,
               (uint16_t *)dQo + b * A->dqst[0] + h * A->dqst[1] + i * A->dqst[2], 0);
}

ct_status ct__att_bwd_avx2(const att *A, void *dQo, void *dK, void *dV) {
    /* Both modes use flash tiles here: P is recomputed exactly from the saved
     * logsumexp, so the tile size only changes the order of the dQ/dK/dV sums,
     * and the extra memory stays O(Bq Bk) per thread. */
    g_vt = ct__ew_vtab();
    int64_t bq = 64, bk = 128;
    int64_t np = (A->S + NR - 1) / NR, nkv = A->B * A->Hk, L = A->L;
    int64_t szq = A->G * L * A->E; /* dQ of one kv head's query heads */
    int nt = ct__num_threads();
    bool half = A->dt != CT_F32;
    int64_t nrow = A->B * A->Hq * L;
    /* half storage: dQ accumulates in a dense float32 [B, Hq, L, E] (rounded
     * once at the end); dK, dV rows are rounded as each key block ends */
    size_t dqn = half ? (size_t)(nrow * A->E) : 0;
    /* Split each (batch, kv head) into nsplit ranges of key blocks so that
     * there are at least as many tasks as threads; split sp > 0 writes its dQ
     * to a partial in accb, added in split order at the end. */
    int64_t nkb = (A->S + bk - 1) / bk, nsplit = 1;
    if (nkv < nt && nkb > 1) {
        nsplit = (nt + nkv - 1) / nkv;
        if (nsplit > nkb) nsplit = nkb;
    }
    /* A task a (batch, kv head) (nsplit 1: GPT-2's 48 heads on 2 threads):
     * each task packs its head's K and V panels, computes its rows' D,
     * zeroes its gradient rows and rounds its dQ rows itself, and the whole
     * backward is one parallel region (under OMP_WAIT_POLICY=PASSIVE each
     * region wakes the sleeping threads, ~50 us on the VMs measured; the
     * split path below takes five). */
    bool own = nsplit == 1;
    int64_t panel = np * NR * (A->E + A->Ev); /* one kv head's K and V panels */
    size_t kpb = sizeof(float) * ((size_t)((own ? 0 : nkv * panel) + nrow + 1) + dqn);
    float *Kp = ct__malloc_aligned(kpb);
    if (!Kp) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention backward: out of memory");
    float *Dall = Kp + (own ? 0 : nkv * panel);
    float *dQ = half ? Dall + nrow + 1 : (float *)dQo;
    int64_t dqdense[3] = {A->Hq * L * A->E, L * A->E, A->E};
    const int64_t *dqst = half ? dqdense : A->dqst;
    if (!own) {
        if (half) {
            memset(dQ, 0, sizeof(float) * dqn);
        } else {
            ct__att_zero_rows(dQ, A->dqst, A->B, A->Hq, L, A->E);
            ct__att_zero_rows(dK, A->dkst, A->B, A->Hk, A->S, A->E);
            ct__att_zero_rows(dV, A->dvst, A->B, A->Hk, A->S, A->Ev);
        }
        float *Vp = Kp + nkv * np * NR * A->E;
        pack_panels(A, A->k, A->B, A->Hk, A->kst, A->S, A->E, Kp, nt);
        pack_panels(A, A->v, A->B, A->Hk, A->vst, A->S, A->Ev, Vp, nt);
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t r = 0; r < nrow; r++) Dall[r] = d_row(A, r);
    }
    float *accb = NULL;
    if (nsplit > 1) {
        accb = calloc((size_t)(nkv * (nsplit - 1) * szq + 1), sizeof(float));
        if (!accb) {
            ct__free_aligned(Kp, (void *)(uintptr_t)kpb);
            return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention backward: out of memory");
        }
    }
    int64_t ntask = nkv * nsplit;
    int fail = 0;
    int ntp = ntask < nt ? (int)(ntask > 0 ? ntask : 1) : nt;
#pragma omp parallel num_threads(ntp) reduction(| : fail)
    {
        size_t tile = (size_t)(bq * bk);
        size_t hbn = half ? (size_t)(2 * bk * A->E + bk * A->Ev + bq * A->E + bq * A->Ev) : 0;
        size_t bufb = sizeof(float) * (3 * tile + hbn + (own ? (size_t)panel : 0));
        float *buf = ct__malloc_aligned(bufb);
        if (!buf) fail = 1;
        bwd_ws w = {buf, buf + tile, buf + 2 * tile, NULL, NULL, NULL, NULL, NULL};
        if (buf && half) {
            w.kf = buf + 3 * tile;
            w.dkf = w.kf + bk * A->E;
            w.dvf = w.dkf + bk * A->E;
            w.qf = w.dvf + bk * A->Ev;
            w.gf = w.qf + bq * A->E;
        }
        float *kown = buf ? buf + 3 * tile + hbn : NULL; /* own: this task's K, V panels */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            if (!buf) continue;
            int64_t kv = t / nsplit, sp = t % nsplit;
            int64_t b = kv / A->Hk, hk = kv % A->Hk;
            float *dqb = dQ + b * dqst[0] + hk * A->G * dqst[1];
            const float *kp, *vp;
            if (own) {
                pack_head(A, A->k, A->Hk, A->kst, A->S, A->E, kv, A->S, kown);
                pack_head(A, A->v, A->Hk, A->vst, A->S, A->Ev, kv, A->S, kown + np * NR * A->E);
                kp = kown, vp = kown + np * NR * A->E;
                int64_t r0 = (b * A->Hq + hk * A->G) * L, r1 = r0 + A->G * L; /* its query rows */
                for (int64_t r = r0; r < r1; r++) Dall[r] = d_row(A, r);
                if (half) {
                    memset(dQ + r0 * A->E, 0, sizeof(float) * (size_t)((r1 - r0) * A->E));
                } else {
                    for (int64_t g = 0; g < A->G; g++) ct__att_zero_rows(dqb + g * dqst[1], dqst, 1, 1, L, A->E);
                    ct__att_zero_rows((float *)dK + b * A->dkst[0] + hk * A->dkst[1], A->dkst, 1, 1, A->S, A->E);
                    ct__att_zero_rows((float *)dV + b * A->dvst[0] + hk * A->dvst[1], A->dvst, 1, 1, A->S, A->Ev);
                }
                bwd_keys(A, kp, vp, Dall, b, hk, 0, nkb, bq, bk, &w, dqb, dqst[1], dqst[2], dK, dV);
                if (half)
                    for (int64_t r = r0; r < r1; r++) store_dq_row(A, dQ, r, dQo);
                continue;
            }
            kp = Kp + kv * np * NR * A->E;
            vp = Kp + nkv * np * NR * A->E + kv * np * NR * A->Ev;
            if (sp > 0)
                bwd_keys(A, kp, vp, Dall, b, hk, nkb * sp / nsplit, nkb * (sp + 1) / nsplit, bq, bk,
                         &w, accb + (kv * (nsplit - 1) + sp - 1) * szq, L * A->E, A->E, dK, dV);
            else
                bwd_keys(A, kp, vp, Dall, b, hk, 0, nkb / nsplit, bq, bk, &w, dqb, dqst[1], dqst[2], dK, dV);
        }
        ct__free_aligned(buf, (void *)(uintptr_t)bufb);
    }
    if (accb && !fail) {
        /* partials are dense [G, L, E] per kv head; dQ is strided */
        int64_t nr = nkv * A->G * L, E = A->E;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t r = 0; r < nr; r++) {
            int64_t kv = r / (A->G * L), x = r % (A->G * L), g = x / L, i = x % L;
            int64_t b = kv / A->Hk, h = kv % A->Hk * A->G + g;
            float *dq = dQ + b * dqst[0] + h * dqst[1] + i * dqst[2];
            const float *a0 = accb + kv * (nsplit - 1) * szq + x * E;
            for (int64_t c = 0; c < E; c++) {
                float s = dq[c];
                for (int64_t sp = 1; sp < nsplit; sp++) s += a0[(sp - 1) * szq + c];
                dq[c] = s;
            }
        }
    }
    if (half && !fail && !own) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t r = 0; r < nrow; r++) store_dq_row(A, dQ, r, dQo);
    }
    free(accb);
    ct__free_aligned(Kp, (void *)(uintptr_t)kpb);
    if (fail) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention backward: out of memory");
    return CT_OK;
}
