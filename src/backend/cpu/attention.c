/* attention.c -- CPU kernels of scaled_dot_product_attention: FLASH and
 * MEMORY-EFFICIENT, forward and backward (the ops sdpa_fused and
 * sdpa_fused_backward; see src/ops/attention.c for the driver).
 *
 * Both are one algorithm with different tiles.  A task owns Bq query rows of
 * one (batch, head); it walks the keys in tiles of Bk columns: the score
 * tile S = scale Q_i K_j^T comes from sgemm, masks are applied, and an
 * online softmax (running row max m and sum l) rescales the output rows,
 * which accumulate P_ij V_j through sgemm.  Only the logsumexp m + log l of
 * each row is kept for the backward, which recomputes P = exp(S - lse)
 * tile by tile (no L x S matrix is ever stored):
 *     D_i = rowsum(dO_i * O_i)
 *     dV_j += P'^T dO_i            (P' = P * dropout keep / (1 - p))
 *     dP    = dO_i V_j^T * keep / (1 - p)
 *     dS    = P * (dP - D_i)
 *     dQ_i += scale dS K_j,   dK_j += scale dS^T Q_i
 * FLASH: Bq = Bk = 64 -- extra memory O(Bq Bk) per thread; causal key
 * tiles wholly above the diagonal are skipped.  MEMORY-EFFICIENT: Bq = 64,
 * Bk = S -- one [Bq, S] block of scores at a time (one exact softmax pass
 * per row, no rescaling; the better fit when S is short or a float mask is
 * read once per block).
 * Threads: the forward runs (batch x head x query block) tasks; the backward
 * runs (batch x kv-head) tasks, each doing its query heads (GQA groups) in
 * order, so dK/dV are written by one thread and results are deterministic.
 * Dropout: element (bh, i, j) keeps with u >= p where u is word idx % 4 of
 * Philox block offset + idx / 4, idx = (bh L + i) S + j: forward and
 * backward regenerate the same mask from the seed and offset in the args.
 *
 * On CPUs with AVX2/FMA (ct__cpu_cap()) both kernels run the same algorithm
 * from attention_avx2.c instead: own register-blocked micro-kernels on K/V
 * packed once per call, Bq 64 x Bk 128 flash tiles, and a FlashAttention-2
 * ordered backward (outer loop over key blocks) -- see that file.  The BLAS
 * code below is the portable path.
 *
 * Args: i[0] mode (2 flash, 4 mem-efficient), i[1] causal, i[2] dropout,
 * i[3] seed, i[4] counter offset; f[0] scale, f[1] dropout p. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "../../core/random_impl.h"
#include "../../ops/op_table.h"
#include "attention_impl.h"
#include "vmath.h"
#include "cpu_caps.h"
#include "philox8.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif


/* row[c] = exp(row[c] - m); returns the sum. */
static float exp_row(float *row, int64_t n, float m) {
    int64_t c = 0;
    float sum = 0;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 vm = _mm256_set1_ps(m), acc = _mm256_setzero_ps();
    for (; c + 8 <= n; c += 8) {
        __m256 e = ct__v8_expf(_mm256_sub_ps(_mm256_loadu_ps(row + c), vm));
        _mm256_storeu_ps(row + c, e);
        acc = _mm256_add_ps(acc, e);
    }
    float t[8];
    _mm256_storeu_ps(t, acc);
    for (int i = 0; i < 8; i++) sum += t[i];
#endif
    for (; c < n; c++) {
        float e = expf(row[c] - m);
        row[c] = e;
        sum += e;
    }
    return sum;
}

static float max_row(const float *row, int64_t n) {
    float mx = -INFINITY;
    int64_t c = 0;
#if defined(__AVX2__) && defined(__FMA__)
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (; c + 8 <= n; c += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(row + c));
    float t[8];
    _mm256_storeu_ps(t, vm);
    for (int i = 0; i < 8; i++) mx = t[i] > mx ? t[i] : mx;
#endif
    for (; c < n; c++) mx = row[c] > mx ? row[c] : mx;
    return mx;
}

/* Dropout: multiplies row (n columns starting at key j0 of row idx0 = (bh L + i) S)
 * by keep / (1 - p); keep[c] (when non-NULL) receives the factor. */
void ct__att_drop_row(const att *A, float *row, int64_t n, uint64_t idx0, float *keep) {
    if (n <= 0) return;
    uint64_t end = idx0 + (uint64_t)n, bend = (end + 3) / 4;
    const int avx2 = ct__cpu_cap() >= CT_CAP_AVX2;
    /* blocks idx0 / 4 .. (end - 1) / 4, eight at a time (AVX2) */
    for (uint64_t g = idx0 / 4; g < bend; g += 8) {
        uint32_t w[4][8];
        int nbk = bend - g < 8 ? (int)(bend - g) : 8;
        if (avx2 && nbk == 8) ct__philox8_avx2(A->seed, A->off + g, w);
        else
            for (int k = 0; k < nbk; k++) {
                ct_philox_block blk = ct__philox(A->seed, A->off + g + (uint64_t)k);
                for (int j = 0; j < 4; j++) w[j][k] = blk.v[j];
            }
        for (int k = 0; k < nbk; k++)
            for (int j = 0; j < 4; j++) {
                uint64_t idx = (g + (uint64_t)k) * 4 + (uint64_t)j;
                if (idx < idx0 || idx >= end) continue;
                int64_t c = (int64_t)(idx - idx0);
                float f = ct__u32_to_f32(w[j][k]) >= A->p ? A->pscale : 0.0f;
                if (keep) keep[c] = f;
                if (row) row[c] *= f;
            }
    }
}

/* The score tile S[r][c] = scale q_{i0+r} . k_{j0+c} with the causal and
 * explicit masks applied (-inf / added), nq x nk, leading dim nk. */
static void score_tile(const att *A, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                       int64_t nk, float *Sb) {
    int64_t hk = h / A->G;
    const float *Q = A->q + b * A->qst[0] + h * A->qst[1] + i0 * A->qst[2];
    const float *K = A->k + b * A->kst[0] + hk * A->kst[1] + j0 * A->kst[2];
    if (A->E > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)A->E, A->scale,
                    Q, (int)A->qst[2], K, (int)A->kst[2], 0.0f, Sb, (int)nk);
    else
        memset(Sb, 0, sizeof(float) * (size_t)(nq * nk));
    ct__att_masks(A, b, h, i0, nq, j0, nk, Sb, nk);
}

void ct__att_masks(const att *A, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                   int64_t nk, float *Sb, int64_t ld) {
    if (A->causal && j0 + nk - 1 > i0) {
        for (int64_t r = 0; r < nq; r++) {
            int64_t first = i0 + r + 1 - j0; /* first masked column */
            for (int64_t c = first < 0 ? 0 : first; c < nk; c++) Sb[r * ld + c] = -INFINITY;
        }
    }
    if (A->mask) {
        for (int64_t r = 0; r < nq; r++) {
            const char *mr = A->mask + b * A->ms[0] + h * A->ms[1] + (i0 + r) * A->ms[2] + j0 * A->ms[3];
            float *row = Sb + r * ld;
            if (A->mask_bool) {
                for (int64_t c = 0; c < nk; c++)
                    if (!mr[c * A->ms[3]]) row[c] = -INFINITY;
            } else if (A->ms[3] == (int64_t)sizeof(float)) {
                const float *mf = (const float *)mr;
#pragma omp simd
                for (int64_t c = 0; c < nk; c++) row[c] += mf[c];
            } else {
                for (int64_t c = 0; c < nk; c++) row[c] += *(const float *)(mr + c * A->ms[3]);
            }
        }
    }
}


/* keys a query block [i0, i0 + nq) can see */
int64_t ct__att_key_end(const att *A, int64_t i0, int64_t nq) {
    if (!A->causal) return A->S;
    int64_t e = i0 + nq;
    return e < A->S ? e : A->S;
}

/* ---- forward ---------------------------------------------------------------- */
static void fwd_task(const att *A, int64_t b, int64_t h, int64_t i0, float *Sb, float *m, float *l,
                     float *O, float *LSE) {
    int64_t nq = A->L - i0 < A->bq ? A->L - i0 : A->bq, Ev = A->Ev, hk = h / A->G;
    int64_t bh = b * A->Hq + h, ld = A->ost[2];
    float *o = O + b * A->ost[0] + h * A->ost[1] + i0 * ld;
    const float *V = A->v + b * A->vst[0] + hk * A->vst[1];
    for (int64_t r = 0; r < nq; r++) memset(o + r * ld, 0, sizeof(float) * (size_t)Ev);
    for (int64_t r = 0; r < nq; r++) { m[r] = -INFINITY; l[r] = 0; }
    int64_t jend = ct__att_key_end(A, i0, nq);
    for (int64_t j0 = 0; j0 < jend; j0 += A->bk) {
        int64_t nk = jend - j0 < A->bk ? jend - j0 : A->bk;
        score_tile(A, b, h, i0, nq, j0, nk, Sb);
        ct__att_online_rows(A, Sb, nk, nq, nk, m, l, o, ld, bh, i0, j0, max_row, exp_row);
        if (Ev > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)Ev, (int)nk, 1.0f,
                        Sb, (int)nk, V + j0 * A->vst[2], (int)A->vst[2], 1.0f, o, (int)ld);
    }
    ct__att_finish_rows(A, o, ld, nq, m, l, LSE, bh, i0);
}

static ct_status setup(att *A, ct_tensor *const *in, int nmask_at, int nin, const ct_args *a) {
    ct_tensor *q = in[0], *k = in[1], *v = in[2];
    memset(A, 0, sizeof *A);
    A->q = (const float *)ct__ptr(q);
    A->k = (const float *)ct__ptr(k);
    A->v = (const float *)ct__ptr(v);
    A->dt = q->dtype;
    if (A->dt != CT_F32 && ct__cpu_cap() < CT_CAP_AVX2) /* the half bits are set only with AVX2 */
        return ct__error_status(CT_ERR_DTYPE, "scaled_dot_product_attention: the fused kernels of this "
                                "CPU take float32, got %s", ct_dtype_name(A->dt));
    A->B = q->sizes[0]; A->Hq = q->sizes[1]; A->L = q->sizes[2]; A->E = q->sizes[3];
    A->Hk = k->sizes[1]; A->S = k->sizes[2]; A->Ev = v->sizes[3];
    A->G = A->Hk > 0 ? A->Hq / A->Hk : 1;
    for (int d = 0; d < 3; d++) {
        A->qst[d] = q->strides[d];
        A->kst[d] = k->strides[d];
        A->vst[d] = v->strides[d];
    }
    if ((q->strides[3] != 1 && q->sizes[3] > 1) || (k->strides[3] != 1 && k->sizes[3] > 1) ||
        (v->strides[3] != 1 && v->sizes[3] > 1))
        return ct__error_status(CT_ERR_ARG, "scaled_dot_product_attention: the fused kernels need "
                                "q, k and v dense in their last dim");
    if (A->G < 1) A->G = 1;
    if (nin > nmask_at && in[nmask_at]) {
        ct_tensor *mk = in[nmask_at];
        A->mask = (const char *)ct__ptr(mk);
        A->mask_bool = mk->dtype == CT_BOOL;
        for (int d = 0; d < 4; d++) A->ms[d] = mk->strides[d] * (int64_t)ct_dtype_size(mk->dtype);
    }
    A->causal = (int)a->p.sdpa.is_causal;
    A->drop = (int)a->p.sdpa.has_dropout;
    A->seed = (uint64_t)a->p.sdpa.seed;
    A->off = (uint64_t)a->p.sdpa.offset;
    A->scale = (float)a->p.sdpa.scale;
    A->p = (float)a->p.sdpa.dropout_p;
    A->pscale = A->drop ? (float)(1.0 / (1.0 - a->p.sdpa.dropout_p)) : 1.0f;
    bool flash = a->p.sdpa.mode == CT_SDP_FLASH;
    A->flash = flash;
    A->bq = 64;
    A->bk = flash ? 64 : (A->S > 0 ? A->S : 1);
    if (A->E > INT32_MAX || A->Ev > INT32_MAX || A->S > INT32_MAX)
        return ct__error_status(CT_ERR_ARG, "scaled_dot_product_attention: sizes too large for BLAS");
    return CT_OK;
}

static ct_status k_sdpa_fwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout;
    att A;
    if (setup(&A, in, 3, nin, a)) return ct_last_error_code();
    float *LSE = (float *)ct__ptr(out[1]);
    for (int d = 0; d < 3; d++) A.ost[d] = out[0]->strides[d];
    if ((out[0]->strides[3] != 1 && out[0]->sizes[3] > 1) || !ct_is_contiguous(out[1]))
        return ct__error_status(CT_ERR_ARG, "scaled_dot_product_attention: output layout not supported");
    if (ct__cpu_cap() >= CT_CAP_AVX2) return ct__att_fwd_avx2(&A, ct__ptr(out[0]), LSE);
    float *O = (float *)ct__ptr(out[0]);
    int64_t nqb = (A.L + A.bq - 1) / A.bq, ntask = A.B * A.Hq * nqb;
    int fail = 0;
    int nt = ct__num_threads();
    if (ntask < nt) nt = (int)(ntask > 0 ? ntask : 1);
#pragma omp parallel num_threads(nt) reduction(| : fail)
    {
        size_t sb = (size_t)(A.bq * A.bk + 2 * A.bq);
        float *buf = ct__malloc_aligned(sizeof(float) * sb);
        if (!buf) fail = 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            if (!buf) continue;
            int64_t qb = t % nqb, bh = t / nqb;
            fwd_task(&A, bh / A.Hq, bh % A.Hq, qb * A.bq, buf, buf + A.bq * A.bk,
                     buf + A.bq * A.bk + A.bq, O, LSE);
        }
        ct__free_aligned(buf, (void *)(uintptr_t)(sizeof(float) * sb));
    }
    if (fail) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention: out of memory");
    return CT_OK;
}

/* ---- backward --------------------------------------------------------------- */
/* element offset of row i of head (b, h) for strides st[3] */
static inline int64_t att_off(const int64_t *st, int64_t b, int64_t h, int64_t i) {
    return b * st[0] + h * st[1] + i * st[2];
}

static void bwd_head(const att *A, int64_t b, int64_t h, float *Sb, float *dP, float *Pd, float *Dv,
                     float *dQ, float *dK, float *dV) {
    int64_t E = A->E, Ev = A->Ev, hk = h / A->G, bh = b * A->Hq + h;
    int64_t ks = A->kst[2], vs = A->vst[2], qs = A->qst[2], os = A->ost[2], gs = A->gst[2];
    int64_t dqs = A->dqst[2], dks = A->dkst[2], dvs = A->dvst[2];
    const float *K = A->k + att_off(A->kst, b, hk, 0);
    const float *V = A->v + att_off(A->vst, b, hk, 0);
    float *dk = dK + att_off(A->dkst, b, hk, 0), *dv = dV + att_off(A->dvst, b, hk, 0);
    for (int64_t i0 = 0; i0 < A->L; i0 += A->bq) {
        int64_t nq = A->L - i0 < A->bq ? A->L - i0 : A->bq;
        const float *Q = A->q + att_off(A->qst, b, h, i0);
        const float *go = A->go + att_off(A->gst, b, h, i0), *o = A->o + att_off(A->ost, b, h, i0);
        const float *lse = A->lse + bh * A->L + i0;
        float *dq = dQ + att_off(A->dqst, b, h, i0);
        for (int64_t r = 0; r < nq; r++) memset(dq + r * dqs, 0, sizeof(float) * (size_t)E);
        for (int64_t r = 0; r < nq; r++) {
            float s = 0;
#pragma omp simd reduction(+ : s)
            for (int64_t c = 0; c < Ev; c++) s += go[r * gs + c] * o[r * os + c];
            Dv[r] = s;
        }
        int64_t jend = ct__att_key_end(A, i0, nq);
        for (int64_t j0 = 0; j0 < jend; j0 += A->bk) {
            int64_t nk = jend - j0 < A->bk ? jend - j0 : A->bk;
            score_tile(A, b, h, i0, nq, j0, nk, Sb);
            for (int64_t r = 0; r < nq; r++) {
                float *row = Sb + r * nk;
                if (lse[r] == INFINITY) memset(row, 0, sizeof(float) * (size_t)nk);
                else exp_row(row, nk, lse[r]); /* P */
            }
            if (Ev > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, (int)Ev, 1.0f,
                            go, (int)gs, V + j0 * vs, (int)vs, 0.0f, dP, (int)nk);
            else
                memset(dP, 0, sizeof(float) * (size_t)(nq * nk));
            const float *Pv = Sb;
            if (A->drop) {
                for (int64_t r = 0; r < nq; r++) {
                    float *kp = Pd + r * nk;
                    ct__att_drop_row(A, NULL, nk, (uint64_t)((bh * A->L + i0 + r) * A->S + j0), kp);
                    for (int64_t c = 0; c < nk; c++) {
                        dP[r * nk + c] *= kp[c];
                        kp[c] *= Sb[r * nk + c];
                    }
                }
                Pv = Pd;
            }
            if (Ev > 0)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)Ev, (int)nq, 1.0f,
                            Pv, (int)nk, go, (int)gs, 1.0f, dv + j0 * dvs, (int)dvs);
            for (int64_t r = 0; r < nq; r++) {
                float d = Dv[r];
                float *pr = Sb + r * nk, *dr = dP + r * nk;
#pragma omp simd
                for (int64_t c = 0; c < nk; c++) dr[c] = pr[c] * (dr[c] - d);
            }
            if (E > 0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, (int)E, (int)nk,
                            A->scale, dP, (int)nk, K + j0 * ks, (int)ks, 1.0f, dq, (int)dqs);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)E, (int)nq,
                            A->scale, dP, (int)nk, Q, (int)qs, 1.0f, dk + j0 * dks, (int)dks);
            }
        }
    }
}

/* zeroes the rows of a [B, H, R, D] tensor at base with strides st (last dim dense) */
void ct__att_zero_rows(float *base, const int64_t *st, int64_t B, int64_t H, int64_t R, int64_t D) {
    if (D <= 0) return;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t r = 0; r < R; r++)
                memset(base + att_off(st, b, h, r), 0, sizeof(float) * (size_t)D);
}

/* the strides over (batch, head, row) of t, whose last dim must be dense */
static int rows_strides(ct_tensor *t, int64_t *st) {
    for (int d = 0; d < 3; d++) st[d] = t->strides[d];
    if (t->sizes[2] <= 1) st[2] = t->sizes[3] > 1 ? t->sizes[3] : 1; /* any stride: a valid ld */
    return t->strides[3] == 1 || t->sizes[3] <= 1;
}

/* in: q, k, v, out, lse, grad_out, [mask]; out: dq, dk, dv -- every one
 * strided but for a dense last dim (lse contiguous) */
static ct_status k_sdpa_bwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout;
    att A;
    if (setup(&A, in, 6, nin, a)) return ct_last_error_code();
    if (!rows_strides(in[3], A.ost) || !rows_strides(in[5], A.gst) || !ct_is_contiguous(in[4]) ||
        !rows_strides(out[0], A.dqst) || !rows_strides(out[1], A.dkst) || !rows_strides(out[2], A.dvst))
        return ct__error_status(CT_ERR_ARG, "scaled_dot_product_attention backward: out, grad_out and "
                                "the gradients need a dense last dim, logsumexp contiguous");
    A.o = (const float *)ct__ptr(in[3]);
    A.lse = (const float *)ct__ptr(in[4]);
    A.go = (const float *)ct__ptr(in[5]);
    if (ct__cpu_cap() >= CT_CAP_AVX2)
        return ct__att_bwd_avx2(&A, ct__ptr(out[0]), ct__ptr(out[1]), ct__ptr(out[2]));
    float *dQ = (float *)ct__ptr(out[0]), *dK = (float *)ct__ptr(out[1]), *dV = (float *)ct__ptr(out[2]);
    ct__att_zero_rows(dK, A.dkst, A.B, A.Hk, A.S, A.E);
    ct__att_zero_rows(dV, A.dvst, A.B, A.Hk, A.S, A.Ev);
    int64_t ntask = A.B * A.Hk;
    int fail = 0;
    int nt = ct__num_threads();
    if (ntask < nt) nt = (int)(ntask > 0 ? ntask : 1);
#pragma omp parallel num_threads(nt) reduction(| : fail)
    {
        size_t tile = (size_t)(A.bq * A.bk);
        size_t bufb = sizeof(float) * (3 * tile + (size_t)A.bq);
        float *buf = ct__malloc_aligned(bufb);
        if (!buf) fail = 1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntask; t++) {
            if (!buf) continue;
            int64_t b = t / A.Hk, hk = t % A.Hk;
            for (int64_t g = 0; g < A.G; g++)
                bwd_head(&A, b, hk * A.G + g, buf, buf + tile, buf + 2 * tile, buf + 3 * tile, dQ,
                         dK, dV);
        }
        ct__free_aligned(buf, (void *)(uintptr_t)bufb);
    }
    if (fail) return ct__error_status(CT_ERR_OOM, "scaled_dot_product_attention backward: out of memory");
    return CT_OK;
}

void ct__cpu_register_attention(ct_kernel_fn *t);
void ct__cpu_register_attention(ct_kernel_fn *t) {
    t[CT_OP_sdpa_fused] = k_sdpa_fwd;
    t[CT_OP_sdpa_fused_backward] = k_sdpa_bwd;
    /* bf16/f16 q, k, v (autocast's lower precision) computed in float32 tile
     * by tile by the AVX2 kernels; the portable path takes float32 only (the
     * op layer converts for it) */
    if (ct__cpu_cap() >= CT_CAP_AVX2)
        ct__kernel_half[CT_CPU][CT_OP_sdpa_fused] = ct__kernel_half[CT_CPU][CT_OP_sdpa_fused_backward] =
            CT_HALF_F16 | CT_HALF_BF16;
}
