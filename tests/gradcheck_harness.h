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
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

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

static inline double gc_urand(uint64_t *seed) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*seed >> 11) / 9007199254740992.0;
}

/* Input k of a case: deterministic values in [lo, hi] (0,0: [-1, 1];
 * GC_DISTINCT: a shuffled arithmetic progression, no ties, gaps >=
 * (hi-lo)/n), stored non-contiguously when asked (transposed for >= 2-D,
 * and with a step of 2).  tangent: a direction for forward mode instead,
 * uniform in [-1, 1].  test_gradcheck and test_fwad_ops draw from it. */
static inline ct_tensor *gc_make_input(const gc_case *c, int k, uint64_t *seed, int noncontig, bool tangent) {
    int nd = c->ndim[k];
    const int64_t *sh = c->shape[k];
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= sh[d];
    double lo = c->lo, hi = c->hi;
    if (tangent || (lo == 0 && hi == 0)) { lo = -1; hi = 1; }
    double *v = calloc((size_t)(n ? n : 1), sizeof(double));
    for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * gc_urand(seed);
    if (!tangent && (c->flags & GC_DISTINCT) && n > 1) {
        for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * ((double)i + 0.5) / (double)n;
        for (int64_t i = n - 1; i > 0; i--) {
            *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
            int64_t j = (int64_t)((*seed >> 33) % (uint64_t)(i + 1));
            double t = v[i]; v[i] = v[j]; v[j] = t;
        }
    }
    ct_tensor *t = ct_from_doubles(v, sh, nd, CT_F64);
    free(v);
    if (noncontig && nd >= 1 && n > 1) {
        int64_t perm[6], ps[6];
        for (int d = 0; d < nd; d++) perm[d] = d;
        if (nd >= 2) { perm[nd - 1] = nd - 2; perm[nd - 2] = nd - 1; }
        for (int d = 0; d < nd; d++) ps[d] = sh[perm[d]];
        ps[nd - 1] *= 2;
        ct_tensor *big = ct_zeros(ps, nd, CT_F64);
        ct_tensor *v2 = ct_permute(ct_slice(big, nd - 1, 0, INT64_MAX, 2), perm, nd);
        if (!v2 || !ct_copy_(v2, t)) return NULL;
        t = v2;
    }
    return t;
}


#endif
