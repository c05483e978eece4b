/* iter.c -- see iter.h. */
#include "iter.h"

#ifdef _OPENMP
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>
#endif

ct_status ct__iter_build(ct_iter *it, ct_tensor *const *ts, int nt) {
    CT_ASSERT(nt >= 1 && nt <= CT_ITER_MAX);
    const ct_tensor *o = ts[0];
    int nd = o->ndim;
    memset(it, 0, sizeof *it);
    it->nt = nt;
    /* gather per-dim sizes/strides with torch's dim order (last = inner) */
    int64_t shape[CT_MAX_DIMS];
    int64_t st[CT_MAX_DIMS][CT_ITER_MAX];
    it->numel = 1;
    for (int d = 0; d < nd; d++) {
        shape[d] = o->sizes[d];
        it->numel *= shape[d];
    }
    for (int k = 0; k < nt; k++) {
        const ct_tensor *t = ts[k];
        size_t es = ct_dtype_size(t->dtype);
        it->base[k] = (char *)ct__ptr(t);
        if (t->ndim > nd)
            return ct__error_status(CT_ERR_SHAPE, "iterator: operand %d has shape %s, which does "
                                    "not broadcast to %s", k, ct__tshape(t), ct__tshape(o));
        for (int d = 0; d < nd; d++) {
            int td = d - (nd - t->ndim);
            if (td < 0) { st[d][k] = 0; continue; }
            if (t->sizes[td] == shape[d]) st[d][k] = t->strides[td] * (int64_t)es;
            else if (t->sizes[td] == 1) st[d][k] = 0;
            else
                return ct__error_status(CT_ERR_SHAPE, "iterator: operand %d has shape %s, which "
                                        "does not broadcast to %s", k, ct__tshape(t), ct__tshape(o));
        }
    }
    /* order: innermost first; drop size-1 dims */
    int perm[CT_MAX_DIMS], np = 0;
    for (int d = nd - 1; d >= 0; d--)
        if (shape[d] != 1) perm[np++] = d;
    /* stable insertion sort by the output's |stride| (then the inputs'), so
     * a transposed output is still walked in memory order */
    for (int i = 1; i < np; i++) {
        int cur = perm[i], j = i - 1;
        while (j >= 0) {
            int prev = perm[j], swap = 0;
            for (int k = 0; k < nt; k++) {
                int64_t a = llabs(st[prev][k]), b = llabs(st[cur][k]);
                if (a == 0 || b == 0) continue; /* broadcast dims don't vote */
                if (a > b) { swap = 1; }
                break;
            }
            if (!swap) break;
            perm[j + 1] = prev;
            j--;
        }
        perm[j + 1] = cur;
    }
    /* coalesce adjacent dims */
    int n = 0;
    for (int i = 0; i < np; i++) {
        int d = perm[i];
        if (n > 0) {
            int ok = 1;
            for (int k = 0; k < nt; k++)
                if (st[d][k] != it->strides[n - 1][k] * it->shape[n - 1]) { ok = 0; break; }
            if (ok) { it->shape[n - 1] *= shape[d]; continue; }
        }
        it->shape[n] = shape[d];
        for (int k = 0; k < nt; k++) it->strides[n][k] = st[d][k];
        n++;
    }
    if (n == 0) { /* a scalar (or all size-1 dims) */
        it->shape[0] = 1;
        for (int k = 0; k < nt; k++) it->strides[0][k] = 0;
        n = 1;
    }
    it->ndim = n;
    if (it->numel == 0) it->shape[0] = 0;
    return CT_OK;
}

static void run_range(const ct_iter *it, int64_t begin, int64_t end, ct_loop_fn fn, void *ctx) {
    int64_t idx[CT_MAX_DIMS];
    char *p[CT_ITER_MAX];
    int64_t rem = begin;
    for (int d = 0; d < it->ndim; d++) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    int64_t pos = begin;
    while (pos < end) {
        for (int k = 0; k < it->nt; k++) {
            char *q = it->base[k];
            for (int d = 0; d < it->ndim; d++) q += idx[d] * it->strides[d][k];
            p[k] = q;
        }
        int64_t n = it->shape[0] - idx[0];
        if (n > end - pos) n = end - pos;
        fn(p, it->strides[0], n, ctx);
        pos += n;
        idx[0] += n;
        for (int d = 0; d < it->ndim - 1 && idx[d] >= it->shape[d]; d++) {
            idx[d] = 0;
            idx[d + 1]++;
        }
    }
}

void ct__iter_run(const ct_iter *it, ct_loop_fn fn, void *ctx, int64_t grain) {
    int64_t n = it->numel;
    if (n == 0) return;
#ifdef _OPENMP
    int nth = ct__num_threads();
    if (grain > 0) grain *= ct__grain_scale(); /* 4 under the passive wait policy */
    if (grain > 0 && n >= 2 * grain && nth > 1 && !omp_in_parallel()) {
        int64_t chunks = n / grain;
        if (chunks > nth) chunks = nth;
#pragma omp parallel for num_threads((int)chunks) schedule(static)
        for (int64_t c = 0; c < chunks; c++) {
            int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
            run_range(it, b, e, fn, ctx);
        }
        return;
    }
#else
    (void)grain;
#endif
    run_range(it, 0, n, fn, ctx);
}
