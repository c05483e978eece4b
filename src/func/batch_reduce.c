/* batch_reduce.c -- batching rules of the reductions, scans (softmax,
 * cumsum, ...) and sorts (the op table's vmap column).
 *
 * The batch dim goes first and is never reduced: a reduction's mask of
 * reduced dims gets a leading 0; a scan or sort runs along dim + 1, its
 * pre/n/post sizes recomputed from the physical operand.  Each output
 * element is reduced over the same elements in the same order as per
 * sample. */
#include <math.h>
#include <string.h>

#include "func_impl.h"
#include "../ops/meta.h"

CT_VMAP_RULE(ct__vmap_reduce) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    ct_p_reduce *p = &a.p.reduce;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    if (p->reduced_n + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
    memmove(p->reduced + 1, p->reduced, sizeof(int64_t) * (size_t)p->reduced_n);
    p->reduced[0] = 0;
    p->reduced_n++;
    if (p->whole && ct__bv_ndim(in[0]) == 0) {
        /* a 0-dim sample reduced whole: one element each */
        p->whole = false;
    }
    if (n->op == CT_OP_amax && n->nout == 2) {
        /* aminmax: the amin and amax kernels recorded as one amax node */
        ct_tensor *lo = NULL, *hi = NULL;
        ct_args b = a;
        b.op = CT_OP_amin;
        ct_status st = ct__exec_op(CT_OP_amin, &lo, 1, &x, 1, &b, 0xFFFFFFFFu);
        if (!st) st = ct__exec_op(CT_OP_amax, &hi, 1, &x, 1, &a, 0xFFFFFFFFu);
        if (st) return st;
        out[0] = (ct_bval){lo, 0};
        out[1] = (ct_bval){hi, 0};
        return CT_OK;
    }
    ct_tensor *y[2] = {0};
    ct_status st = ct__bv_run(c, y, &x, 1, &a);
    if (st) return st;
    for (int k = 0; k < n->nout; k++) out[k] = (ct_bval){y[k], 0};
    return CT_OK;
}

/* pre/n/post of dim in x's sizes */
static void split_at(const ct_tensor *x, int64_t dim, int64_t *pre, int64_t *nn, int64_t *post) {
    *pre = *post = 1;
    *nn = x->ndim > 0 ? x->sizes[dim] : 1;
    for (int d = 0; d < dim; d++) *pre *= x->sizes[d];
    for (int d = (int)dim + 1; d < x->ndim; d++) *post *= x->sizes[d];
}

/* The operand of a scan or sort: batch first, contiguous, a 0-dim sample
 * as one element ([B, 1]: the op then runs along dim 1 and the results
 * are squeezed back), half-precision data as f32 (the kernels take f32
 * and f64; the public ops convert likewise, and a scan or sort computes
 * in f32 then rounds once). */
static ct_tensor *scan_operand(const ct_vmap_call *c, ct_bval v, int64_t B, bool *zero_dim, ct_dtype *orig) {
    (void)c;
    ct_tensor *x = ct__bv_full(v, B);
    *zero_dim = ct__bv_ndim(v) == 0;
    if (x && *zero_dim) x = ct_unsqueeze(x, 1);
    *orig = x ? x->dtype : CT_F32;
    if (x && (x->dtype == CT_F16 || x->dtype == CT_BF16)) x = ct_to_dtype(x, CT_F32);
    return x ? ct_contiguous(x) : NULL;
}

/* a result back to the per-sample geometry: squeezed where the sample was
 * 0-dim, converted back to the operand's dtype (values, not indices) */
static ct_status scan_result(const ct_vmap_call *c, int k, ct_tensor *y, bool zero_dim, ct_dtype orig,
                             ct_bval *out) {
    if (!y) return ct__bv_status();
    const ct_meta *m = ct__bv_out_meta(c, k);
    if (zero_dim && y->ndim == m->ndim + 2 && !(y = ct_squeeze_dim(y, 1))) return ct__bv_status();
    if (y->dtype != m->dtype && y->dtype == CT_F32 && m->dtype == orig && !(y = ct_to_dtype(y, orig)))
        return ct__bv_status();
    *out = (ct_bval){y, 0};
    return CT_OK;
}

CT_VMAP_RULE(ct__vmap_scan) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    bool zd;
    ct_dtype orig;
    ct_tensor *x = scan_operand(c, in[0], c->B, &zd, &orig);
    if (!x) return ct__bv_status();
    a.p.scan.dim = zd ? 1 : a.p.scan.dim + 1;
    split_at(x, a.p.scan.dim, &a.p.scan.pre, &a.p.scan.n, &a.p.scan.post);
    ct_tensor *y[2] = {0};
    ct_status st = ct__bv_run(c, y, &x, 1, &a);
    for (int k = 0; k < n->nout && !st; k++) st = scan_result(c, k, y[k], zd, orig, &out[k]);
    return st;
}

/* softmax_backward / log_softmax_backward (g, y of one shape) */
CT_VMAP_RULE(ct__vmap_scan_backward) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    bool zd;
    ct_dtype orig;
    ct_tensor *x[2];
    for (int k = 0; k < 2; k++)
        if (!(x[k] = scan_operand(c, in[k], c->B, &zd, &orig))) return ct__bv_status();
    a.p.scan.dim = zd ? 1 : a.p.scan.dim + 1;
    split_at(x[0], a.p.scan.dim, &a.p.scan.pre, &a.p.scan.n, &a.p.scan.post);
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, x, 2, &a);
    return st ? st : scan_result(c, 0, y, zd, orig, &out[0]);
}

/* sort, topk, kthvalue, median_dim, mode: along dim + 1 */
CT_VMAP_RULE(ct__vmap_sort) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    if (a.p.sort.empty_whole) {
        /* median() of an empty sample: a 0-dim NaN each */
        for (int k = 0; k < n->nout; k++) {
            if (n->out[k] < 0) continue;
            const ct_meta *m = ct__bv_out_meta(c, k);
            int64_t sh[CT_MAX_DIMS];
            sh[0] = c->B;
            memcpy(sh + 1, m->sizes, sizeof(int64_t) * (size_t)m->ndim);
            ct_tensor *y = ct_full_on(sh, m->ndim + 1, k == 0 ? NAN : 0, m->dtype, in[0].t->storage->device);
            if (!y) return ct__bv_status();
            out[k] = (ct_bval){y, 0};
        }
        return CT_OK;
    }
    bool zd;
    ct_dtype orig;
    ct_tensor *x = scan_operand(c, in[0], c->B, &zd, &orig);
    if (!x) return ct__bv_status();
    a.p.sort.dim = zd ? 1 : a.p.sort.dim + 1;
    split_at(x, a.p.sort.dim, &a.p.sort.pre, &a.p.sort.n, &a.p.sort.post);
    ct_tensor *y[3] = {0};
    ct_status st = ct__bv_run(c, y, &x, 1, &a);
    for (int k = 0; k < n->nout && !st; k++) {
        if (n->out[k] < 0 || !y[k]) continue;
        st = scan_result(c, k, y[k], zd, orig, &out[k]);
    }
    return st;
}
