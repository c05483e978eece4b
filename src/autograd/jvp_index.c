/* jvp_index.c -- forward-mode rules of the ops that select or move
 * elements: the tangent goes where the value goes.
 *   - linear in their one tensor input (flip, roll, tril/triu, trace, the
 *     pools that average, interpolation, im2col/col2im): the op itself on
 *     the tangent, same parameters (through the op layer on a contiguous
 *     tangent, as the compiled graphs replay these ops);
 *   - index_select / gather / masked_fill: the public op on the tangent;
 *   - sorting and selection with indices (sort, topk, kthvalue, median,
 *     mode, cummax/cummin) and the max pools: the tangent gathered at the
 *     chosen indices (their output 1). */
#include "autograd_impl.h"
#include "../ops/meta.h"

#define CHECK(t) do { if (!(t)) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; } while (0)

CT_JVP_RULE(ct__jvp_linear0) {
    if (!tin[0]) return CT_OK;
    int n = c->nin;
    ct_tensor *local[8];
    if (n > 8) return ct__jvp_dvjp(c, tin, tout);
    local[0] = ct_contiguous(ct_to_dtype(tin[0], c->in[0]->dtype));
    CHECK(local[0]);
    for (int k = 1; k < n; k++) local[k] = c->in[k];
    CHECK(tout[0] = ct__op(c->op, local, n, c->a));
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_index_select) {
    if (!tin[0]) return CT_OK;
    CHECK(tout[0] = ct_index_select(tin[0], c->a->p.index.dim, c->in[1]));
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_gather) {
    if (!tin[0]) return CT_OK;
    CHECK(tout[0] = ct_gather(tin[0], c->a->p.index.dim, c->in[1]));
    return CT_OK;
}

/* the filled positions hold a constant */
CT_JVP_RULE(ct__jvp_masked_fill) {
    if (!tin[0]) return CT_OK;
    CHECK(tout[0] = ct_masked_fill(tin[0], c->in[1], 0.0));
    return CT_OK;
}

/* t at idx along d (idx with or without the dim, as the op returns it) */
static ct_tensor *take(ct_tensor *t, ct_tensor *idx, int64_t d) {
    if (t->ndim == 0) return t;
    if (idx->ndim < t->ndim) return ct_squeeze_dim(ct_gather(t, d, ct_unsqueeze(idx, d)), d);
    return ct_gather(t, d, idx);
}

CT_JVP_RULE(ct__jvp_sort_select) {
    if (!tin[0] || c->nout < 2 || !c->out[1]) return ct__jvp_dvjp(c, tin, tout);
    CHECK(tout[0] = take(tin[0], c->out[1], c->a->p.sort.dim));
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_cummaxmin) {
    if (!tin[0]) return CT_OK;
    CHECK(tout[0] = take(tin[0], c->out[1], c->a->p.scan.dim));
    return CT_OK;
}

/* max pools: output 1 holds each output's argmax as a flat index in its
 * plane (planes = the leading dims) */
CT_JVP_RULE(ct__jvp_max_pool) {
    if (!tin[0] || c->nout < 2 || !c->out[1]) return ct__jvp_dvjp(c, tin, tout);
    int64_t P = c->a->p.pool.planes;
    ct_tensor *t2 = ct_reshape(ct_contiguous(tin[0]), CT_SHAPE(P, -1));
    ct_tensor *i2 = ct_reshape(c->out[1], CT_SHAPE(P, -1));
    CHECK(tout[0] = ct_reshape(ct_gather(t2, 1, i2), c->out[0]->sizes, c->out[0]->ndim));
    return CT_OK;
}

/* nansum / nanmean: the NaN entries do not count */
CT_JVP_RULE(ct__jvp_nansum) {
    ct_tensor *x = c->in[0];
    ct_tensor *z = ct_full_on(NULL, 0, 0.0, tin[0]->dtype, CT_CPU);
    ct_tensor *t = ct_where(ct_isnan(x), z, tin[0]);
    int64_t dims[CT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++)
        if (c->a->p.reduce.reduced[d]) dims[nd++] = d;
    if (nd == 0 && x->ndim > 0) { CHECK(tout[0] = t); return CT_OK; }
    if (c->op == CT_OP_nanmean) {
        ct_tensor *cnt = ct_sum(ct_to_dtype(ct_logical_not(ct_isnan(x)), tin[0]->dtype), dims, nd, c->a->p.reduce.keepdim);
        CHECK(tout[0] = ct_div(ct_sum(t, dims, nd, c->a->p.reduce.keepdim), cnt));
    } else {
        CHECK(tout[0] = ct_sum(t, dims, nd, c->a->p.reduce.keepdim));
    }
    return CT_OK;
}

/* ops linear in x and src jointly (scatter, scatter_add, index_add,
 * index_copy, index_fill, masked_scatter; recorded inputs x, index or
 * mask, [src]): the public op on the tangents (zeros for an input without
 * one), the index as it is, and a fill value 0 (a constant has no
 * tangent) */
CT_JVP_RULE(ct__jvp_scatter_like) {
    ct_tensor *x = c->in[0], *ix = c->in[1], *src = c->nin > 2 ? c->in[2] : NULL;
    ct_dtype dt = c->out[0]->dtype;
    ct_tensor *tx = tin[0] ? ct_to_dtype(tin[0], dt) : ct_zeros_like(ct_to_dtype(x, dt));
    ct_tensor *ts = !src ? NULL : tin[2] ? ct_to_dtype(tin[2], dt) : ct_zeros_like(ct_to_dtype(src, dt));
    CHECK(tx);
    if (src) CHECK(ts);
    int64_t d = c->a->p.index.dim;
    switch (c->op) {
    case CT_OP_scatter: tout[0] = ts ? ct_scatter(tx, d, ix, ts) : ct_scatter_value(tx, d, ix, 0.0); break;
    case CT_OP_scatter_add: tout[0] = ct_scatter_add(tx, d, ix, ts); break;
    case CT_OP_index_add: tout[0] = ct_index_add(tx, d, ix, ts, c->a->p.index.alpha); break;
    case CT_OP_index_copy: tout[0] = ct_index_copy(tx, d, ix, ts); break;
    case CT_OP_index_fill: tout[0] = ct_index_fill(tx, d, ix, 0.0); break;
    case CT_OP_masked_scatter: tout[0] = ct_masked_scatter(tx, ix, ts); break;
    default: return ct__jvp_dvjp(c, tin, tout);
    }
    CHECK(tout[0]);
    return CT_OK;
}
