/* attention_impl.h -- private: state shared by the SDPA CPU kernels
 * (attention.c: setup, masks, dropout, the portable BLAS path;
 * attention_avx2.c: the AVX2/FMA path with its own micro-kernels). */
#ifndef CT_ATTENTION_IMPL_H
#define CT_ATTENTION_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../core/random_impl.h"
#include "../../ops/op_table.h"

typedef struct att {
    const float *q, *k, *v, *o, *lse, *go;
    const char *mask; /* NULL: none */
    int mask_bool;
    int64_t ms[4];    /* mask strides in bytes */
    int64_t B, Hq, Hk, G, L, S, E, Ev;
    int causal, drop, flash;
    float scale, p, pscale;
    uint64_t seed, off;
    int64_t bq, bk;
    /* element strides of q, k, v and the output over (batch, head, row); the
     * last dim is dense.  The forward takes any such layout (so a packed
     * [B, L, 3, H, E] projection and a [B, L, H, Ev] output need no copies);
     * so does the backward, for q, k, v, out (ost), grad_out (gst) and its
     * results dq, dk, dv (dqst, dkst, dvst). */
    int64_t qst[3], kst[3], vst[3], ost[3], gst[3], dqst[3], dkst[3], dvst[3];
    /* CT_F32, or the half dtype (CT_BF16, CT_F16) q, k, v, out, grad_out and
     * the gradients are stored in: then q, k, v, o, go point to 16-bit
     * elements (the strides above count elements either way) and the AVX2
     * kernels convert each tile to float32 as they load it and round each
     * result once, as the op layer's whole-tensor conversions did */
    ct_dtype dt;
} att;

/* Applies the causal and explicit masks to the score tile Sb (rows i0..i0+nq
 * of head (b, h), key columns j0..j0+nk, leading dim ld). */
void ct__att_masks(const att *A, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                   int64_t nk, float *Sb, int64_t ld);
/* Dropout of n columns from flat index idx0 = (bh L + i) S + j: row[c] *=
 * keep / (1 - p) (row may be NULL); keep[c] (when non-NULL) gets the factor. */
void ct__att_drop_row(const att *A, float *row, int64_t n, uint64_t idx0, float *keep);
/* keys a query block [i0, i0 + nq) can see */
int64_t ct__att_key_end(const att *A, int64_t i0, int64_t nq);

/* The online-softmax step of the forward, shared by the portable and the
 * AVX2 kernel (each passes its own row max and exp-and-sum, which this
 * inline function calls directly): the score rows Sb (nq rows of nk, ld_s
 * apart) of query rows i0.. of head bh become exp(s - new max) (dropped out
 * when dropout is on), the running max m and sum l are updated, and the
 * output rows o (ld apart) are rescaled to the new max. */
static inline __attribute__((always_inline)) void ct__att_online_rows(
    const att *A, float *Sb, int64_t ld_s, int64_t nq, int64_t nk, float *m, float *l, float *o,
    int64_t ld, int64_t bh, int64_t i0, int64_t j0, float (*max_row)(const float *, int64_t),
    float (*exp_row)(float *, int64_t, float)) {
    for (int64_t r = 0; r < nq; r++) {
        float *row = Sb + r * ld_s;
        float mx = max_row(row, nk);
        float mn = mx > m[r] ? mx : m[r];
        if (mn == -INFINITY) { /* all masked so far */
            memset(row, 0, sizeof(float) * (size_t)nk);
            continue;
        }
        float corr = expf(m[r] - mn);
        float s = exp_row(row, nk, mn);
        l[r] = l[r] * corr + s;
        m[r] = mn;
        if (corr != 1.0f) {
            float *orow = o + r * ld;
#pragma omp simd
            for (int64_t c = 0; c < A->Ev; c++) orow[c] *= corr;
        }
        if (A->drop) ct__att_drop_row(A, row, nk, (uint64_t)((bh * A->L + i0 + r) * A->S + j0), NULL);
    }
}

/* The end of the forward: output rows divided by their sums, logsumexp
 * stored (+inf for a row with every key masked, whose output is 0). */
static inline void ct__att_finish_rows(const att *A, float *o, int64_t ld, int64_t nq, const float *m,
                                       const float *l, float *LSE, int64_t bh, int64_t i0) {
    for (int64_t r = 0; r < nq; r++) {
        float *orow = o + r * ld;
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
#pragma omp simd
        for (int64_t c = 0; c < A->Ev; c++) orow[c] *= inv;
        LSE[bh * A->L + i0 + r] = l[r] > 0 ? m[r] + logf(l[r]) : INFINITY;
    }
}

/* zeroes the rows of a [B, H, R, D] tensor at base with strides st (last dim dense) */
void ct__att_zero_rows(float *base, const int64_t *st, int64_t B, int64_t H, int64_t R, int64_t D);

/* The AVX2/FMA kernels (attention_avx2.c); callers check ct__cpu_cap(). */
ct_status ct__att_fwd_avx2(const att *A, void *O, float *LSE);
ct_status ct__att_bwd_avx2(const att *A, void *dQ, void *dK, void *dV);

#endif
