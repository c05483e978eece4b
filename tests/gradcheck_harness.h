/* gradcheck_harness.h -- gradcheck cases for every op with a VJP.
 *
 * Each family file tests/grad_<family>.c defines
 *     const gc_case gc_cases_<family>[];  const int gc_ncases_<family>;
 * A case names the op-table entry it covers (`op`, as in src/ops/ops.def),
 * a function computing the op from float64 inputs (integer arguments such
 * as index tensors are built inside the function from constants), and the
 * input shapes.  test_gradcheck runs ct_gradcheck on each case with
 * contiguous inputs and again with non-contiguous ones (unless
 * GC_CONTIG_ONLY), ct_gradgradcheck when GC_GRADGRAD, and fails when an op
 * with a VJP has no passing case (it prints "N of M"). */
#ifndef CT_GRADCHECK_HARNESS_H
#define CT_GRADCHECK_HARNESS_H

#include <ctorch/ctorch.h>

/* case tables leave trailing fields (atol, rtol, eps) zero on purpose */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

typedef ct_tensor *(*gc_fn)(ct_tensor *const *in, int n, void *user);

enum {
    GC_GRADGRAD = 1,     /* also run gradgradcheck */
    GC_CONTIG_ONLY = 2,  /* skip the non-contiguous rerun */
    GC_NO_GRAD_1 = 4,    /* input 1 does not require grad */
    GC_NO_GRAD_2 = 8,    /* input 2 does not require grad */
    GC_DISTINCT = 16     /* values well separated (max/sort/median: no ties, no kinks) */
};

typedef struct gc_case {
    const char *op;      /* op-table name this case covers */
    const char *label;
    gc_fn fn;
    int nin;
    int ndim[4];
    int64_t shape[4][6];
    double lo, hi;       /* inputs uniform in [lo, hi] (0,0: [-1, 1]) */
    unsigned flags;
    double atol, rtol;   /* 0: ct_gradcheck defaults */
    double eps;          /* finite-difference step; 0: 1e-6 (float32 kernels need ~1e-3) */
} gc_case;

#endif
