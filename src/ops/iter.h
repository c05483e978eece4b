/* iter.h -- the strided iterator every elementwise kernel runs on (after
 * PyTorch's TensorIterator): broadcasting, any strides, dims reordered and
 * coalesced so the inner loop is as long and as contiguous as possible,
 * and OpenMP threads over large tensors.  A kernel is an inner loop:
 *
 *     static void loop(char **p, const int64_t *s, int64_t n, void *ctx)
 *     { for (i < n) *(float*)(p[0]+i*s[0]) = f(*(float*)(p[1]+i*s[1])); }
 *
 * with p[k] / s[k] the pointer and byte stride of operand k (0 = output).
 * When every s[k] equals the element size the loop may take a contiguous
 * fast path (ct_iter_contig() tells).
 */
#ifndef CT_ITER_H
#define CT_ITER_H

#include "op_table.h"

#define CT_ITER_MAX 8

typedef struct ct_iter {
    int nt, ndim;
    int64_t shape[CT_MAX_DIMS];                 /* dim 0 is the innermost */
    int64_t strides[CT_MAX_DIMS][CT_ITER_MAX];  /* bytes, [dim][operand] */
    char *base[CT_ITER_MAX];
    int64_t numel;
} ct_iter;

typedef void (*ct_loop_fn)(char **p, const int64_t *s, int64_t n, void *ctx);

/* ts[0] gives the iteration shape; the others broadcast to it (missing or
 * size-1 dims get stride 0).  Errors if one cannot broadcast. */
ct_status ct__iter_build(ct_iter *it, ct_tensor *const *ts, int nt);
/* Runs fn over every element; parallel with OpenMP when numel >= grain
 * (grain <= 0: never parallel). */
void ct__iter_run(const ct_iter *it, ct_loop_fn fn, void *ctx, int64_t grain);
/* True when the inner loop of every run has unit stride for all operands. */
static inline bool ct_iter_contig(const int64_t *s, int nt, const size_t *esize) {
    for (int k = 0; k < nt; k++)
        if (s[k] != (int64_t)esize[k]) return false;
    return true;
}

#endif
