/* attention_impl.h -- private: state shared by the SDPA CPU kernels
 * (attention.c: setup, masks, dropout, the portable BLAS path;
 * attention_avx2.c: the AVX2/FMA path with its own micro-kernels). */
#ifndef CT_ATTENTION_IMPL_H
#define CT_ATTENTION_IMPL_H

#include <stdint.h>

#include "../../ops/random_impl.h"

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
     * the backward is given contiguous tensors. */
    int64_t qst[3], kst[3], vst[3], ost[3];
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

/* The AVX2/FMA kernels (attention_avx2.c); callers check ct__cpu_cap(). */
ct_status ct__att_fwd_avx2(const att *A, float *O, float *LSE);
ct_status ct__att_bwd_avx2(const att *A, float *dQ, float *dK, float *dV);

#endif
