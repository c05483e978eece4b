/* batch_view.c -- batching rules of the views and shape ops, and of the
 * indexing ops that take a dim (the op table's vmap column).
 *
 * With the batch dim moved to the front, per-sample dim d is physical dim
 * d + 1: views shift their dims (and prepend B to the sizes they are
 * given) and stay views of the same storage, so in-place writes through
 * them reach the batched tensor as they reach the sample. */
#include <string.h>

#include "func_impl.h"
#include "../ops/meta.h"

/* dims in the recorded parameters are wrapped; a negative one counts from
 * the per-sample end */
static int64_t wrapd(int64_t d, int nd) { return d < 0 ? d + nd : d; }

static ct_status prepend(const ct_vmap_call *c, int64_t *list, int *n, int64_t v) {
    if (*n + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "a batched value would have more than %d dims", CT_MAX_DIMS);
    memmove(list + 1, list, sizeof(int64_t) * (size_t)*n);
    list[0] = v;
    (*n)++;
    return CT_OK;
}

static ct_status done1(ct_bval *out, ct_tensor *y, int bdim) {
    if (!y) return ct__bv_status();
    out[0] = (ct_bval){y, bdim};
    return CT_OK;
}

/* view: a reshape of each sample (the batch dim moved to the front may not
 * be viewable with the per-sample shape; then it is copied, as torch's
 * batching rule of view does through reshape) */
CT_VMAP_RULE(ct__vmap_view) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    ct_status st = prepend(c, a.p.view.shape, &a.p.view.shape_n, c->B);
    if (st) return st;
    return done1(out, ct_reshape(x, a.p.view.shape, a.p.view.shape_n), 0);
}

CT_VMAP_RULE(ct__vmap_expand) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_align(in[0], a.p.view.shape_n);
    if (!x) return ct__bv_status();
    ct_status st = prepend(c, a.p.view.shape, &a.p.view.shape_n, c->B);
    if (st) return st;
    return done1(out, ct_expand(x, a.p.view.shape, a.p.view.shape_n), 0);
}

CT_VMAP_RULE(ct__vmap_permute) {
    const ct_p_view *p = &c->n->args.p.view;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    int64_t dims[CT_MAX_DIMS];
    int nd = p->dims_n;
    if (nd + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
    dims[0] = 0;
    for (int i = 0; i < nd; i++) dims[i + 1] = wrapd(p->dims[i], nd) + 1;
    return done1(out, ct_permute(x, dims, nd + 1), 0);
}

CT_VMAP_RULE(ct__vmap_squeeze) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    int nd = ct__bv_ndim(in[0]);
    for (int i = 0; i < a.p.view.dims_n; i++) a.p.view.dims[i] = wrapd(a.p.view.dims[i], nd) + 1;
    ct_status st = prepend(c, a.p.view.self_sizes, &a.p.view.self_sizes_n, c->B);
    if (st) return st;
    return done1(out, ct__op(CT_OP_squeeze, &x, 1, &a), 0);
}

/* unsqueeze, slice, select, unfold: one dim */
CT_VMAP_RULE(ct__vmap_dim_view) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    int nd = ct__bv_ndim(in[0]) + (n->op == CT_OP_unsqueeze ? 1 : 0);
    a.p.view.dim = wrapd(a.p.view.dim, nd) + 1;
    return done1(out, ct__op(n->op, &x, 1, &a), 0);
}

CT_VMAP_RULE(ct__vmap_diagonal) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    int nd = ct__bv_ndim(in[0]);
    a.p.view.dim1 = wrapd(a.p.view.dim1, nd) + 1;
    a.p.view.dim2 = wrapd(a.p.view.dim2, nd) + 1;
    return done1(out, ct__op(CT_OP_diagonal, &x, 1, &a), 0);
}

/* Ops on trailing dims that take any leading dims with the same
 * parameters (tril, triu, one_hot, bucketize of batched values): the
 * batch becomes one more leading dim.  Other operands must be unbatched. */
CT_VMAP_RULE(ct__vmap_leading) {
    const ct_gnode *n = c->n;
    for (int k = 1; k < n->nin; k++)
        if (in[k].bdim >= 0 || c->dst) {
            c->fallback = true;
            return CT_OK;
        }
    if (in[0].bdim >= 0 && ct__bv_ndim(in[0]) == 0 && n->op != CT_OP_one_hot && n->op != CT_OP_bucketize) {
        c->fallback = true; /* tril/triu of a 0-dim sample is an error per sample */
        return CT_OK;
    }
    ct_tensor *x[8];
    if (n->nin > 8) return ct__bv_error(c, CT_ERR_RUNTIME, "too many operands");
    for (int k = 0; k < n->nin; k++) x[k] = in[k].t;
    if (!(x[0] = ct__bv_front(in[0]))) return ct__bv_status();
    ct_tensor *y[4] = {0};
    ct_status st = ct__bv_run(c, y, x, n->nin, &n->args);
    if (st) return st;
    for (int k = 0; k < n->nout; k++) out[k] = (ct_bval){y[k], 0};
    return CT_OK;
}

/* bucketize(values, boundaries): the kernel takes f64 contiguous operands
 * (as the public op prepares them).  Unbatched 1-D boundaries: the values
 * batch first.  Otherwise every sample is a row of batched boundaries
 * ([B, ..., L]) with its values ([B, ..., n]; 1-D per-sample boundaries:
 * each sample's values flattened into one row, values_per_row of them). */
CT_VMAP_RULE(ct__vmap_bucketize) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    ct_tensor *v = ct__bv_full(in[0], c->B), *bd = in[1].t;
    if (!v) return ct__bv_status();
    int64_t vsh[CT_MAX_DIMS];
    int vnd = v->ndim;
    memcpy(vsh, v->sizes, sizeof(int64_t) * (size_t)vnd);
    if (in[1].bdim >= 0 || ct__bv_ndim(in[1]) > 1) {
        bd = ct__bv_full(in[1], c->B);
        if (!bd) return ct__bv_status();
        if (ct__bv_ndim(in[1]) == 1) {
            int64_t per = 1;
            for (int d = 1; d < vnd; d++) per *= vsh[d];
            if (!(v = ct_reshape(v, (int64_t[]){c->B, per}, 2))) return ct__bv_status();
            a.p.index.values_per_row = per;
        }
    }
    ct_tensor *x[2] = {ct_contiguous(ct_to_dtype(v, CT_F64)), ct_contiguous(ct_to_dtype(bd, CT_F64))};
    if (!x[0] || !x[1]) return ct__bv_status();
    if (a.p.index.values_per_row > 0 && x[0]->sizes[x[0]->ndim - 1] == 0) {
        /* no values: nothing to search */
        ct_tensor *y = ct_empty_on(vsh, vnd, CT_I64, x[0]->storage->device);
        return done1(out, y, 0);
    }
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, x, 2, &a);
    if (st) return st;
    return done1(out, ct_reshape(y, vsh, vnd), 0);
}

/* flip, roll: per-dim lists (flipped, shifts) get a 0 for the batch dim */
CT_VMAP_RULE(ct__vmap_remap) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    ct_status st = c->n->op == CT_OP_flip ? prepend(c, a.p.index.flipped, &a.p.index.flipped_n, 0)
                                          : prepend(c, a.p.index.shifts, &a.p.index.shifts_n, 0);
    if (st) return st;
    ct_tensor *y;
    if ((st = ct__bv_run(c, &y, &x, 1, &a))) return st;
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* repeat(x, repeats): x aligned to the result's rank, the batch repeated once */
CT_VMAP_RULE(ct__vmap_repeat) {
    const ct_p_shape *p = &c->n->args.p.shape;
    int nr = p->repeats_n;
    ct_tensor *x = ct__bv_align(in[0], nr);
    if (!x) return ct__bv_status();
    int64_t reps[CT_MAX_DIMS];
    if (nr + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
    reps[0] = 1;
    memcpy(reps + 1, p->repeats, sizeof(int64_t) * (size_t)nr);
    return done1(out, ct_repeat(x, reps, nr + 1), 0);
}

/* cat: every operand at [B, ...] (unbatched ones expanded), dim + 1 */
CT_VMAP_RULE(ct__vmap_cat) {
    const ct_gnode *n = c->n;
    ct_tensor *local[16], **x = n->nin <= 16 ? local : malloc(sizeof *x * (size_t)n->nin);
    if (!x) return ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    ct_status st = CT_OK;
    int m = 0;
    /* the operands' promoted dtype, the skipped ones included (torch) */
    ct_dtype dt = in[0].t->dtype;
    for (int k = 1; k < n->nin; k++) dt = ct_promote_types(dt, in[k].t->dtype);
    for (int k = 0; k < n->nin && !st; k++) {
        /* a per-sample 1-D empty operand is skipped by cat (legacy rule) */
        if (ct__bv_ndim(in[k]) == 1 && in[k].t->sizes[in[k].bdim >= 0 ? 1 - in[k].bdim : 0] == 0) continue;
        if (!(x[m] = ct__bv_full(in[k], c->B)) || !(x[m] = ct_to_dtype(x[m], dt))) st = ct__bv_status();
        m++;
    }
    if (!st) {
        ct_tensor *y = m > 0 ? ct_cat(x, m, n->args.p.index.dim + 1) : NULL;
        if (m == 0) {
            c->fallback = true;
        } else if (!y) {
            st = ct__bv_status();
        } else {
            out[0] = (ct_bval){y, 0};
        }
    }
    if (x != local) free(x);
    return st;
}

/* index_select(x, dim, index): an unbatched index selects along dim + 1;
 * a batched one gathers each sample's own rows */
CT_VMAP_RULE(ct__vmap_index_select) {
    const ct_gnode *n = c->n;
    int64_t dim = n->args.p.index.dim;
    int nd = ct__bv_ndim(in[0]);
    if (nd == 0 || ct__bv_ndim(in[1]) > 1) { /* a 0-dim sample: index_select acts as on a 1-element vector */
        c->fallback = true;
        return CT_OK;
    }
    dim = wrapd(dim, nd);
    if (in[1].bdim < 0) {
        ct_tensor *x = ct__bv_front(in[0]);
        if (!x) return ct__bv_status();
        return done1(out, ct_index_select(x, dim + 1, in[1].t), 0);
    }
    /* each sample its own index: gather with the index spread along dim */
    ct_tensor *x = ct__bv_full(in[0], c->B), *i = ct__bv_full(in[1], c->B);
    if (!x || !i) return ct__bv_status();
    int64_t ni = ct__bv_ndim(in[1]) == 0 ? 1 : i->sizes[1];
    int64_t sh[CT_MAX_DIMS], ex[CT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        sh[d] = 1;
        ex[d] = x->sizes[d];
    }
    sh[0] = c->B;
    sh[dim + 1] = ni;
    ex[dim + 1] = ni;
    ct_tensor *si = ct_expand(ct_reshape(i, sh, x->ndim), ex, x->ndim);
    return done1(out, si ? ct_gather(x, dim + 1, ct_contiguous(si)) : NULL, 0);
}

/* as_strided(x, size, stride, offset): torch's rule -- sample i is the
 * same window at the storage offset moved by i batch strides */
CT_VMAP_RULE(ct__vmap_as_strided) {
    const ct_p_view *p = &c->n->args.p.view;
    ct_bval x = in[0];
    /* a traced ct_detach: the batched value detached, batch dim kept */
    if (p->detach) return done1(out, ct_detach(x.t), x.bdim);
    if (p->shape_n + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
    int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    sz[0] = c->B;
    st[0] = x.t->strides[x.bdim];
    memcpy(sz + 1, p->shape, sizeof(int64_t) * (size_t)p->shape_n);
    memcpy(st + 1, p->stride, sizeof(int64_t) * (size_t)p->stride_n);
    return done1(out, ct_as_strided(x.t, sz, st, p->shape_n + 1, p->storage_offset), 0);
}

/* gather(x, dim, index): both at [B, ...], dim + 1 (the batch dim has the
 * same size in both, as gather requires) */
CT_VMAP_RULE(ct__vmap_gather) {
    const ct_gnode *n = c->n;
    if (ct__bv_ndim(in[0]) == 0 || ct__bv_ndim(in[1]) == 0) {
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *x = ct__bv_full(in[0], c->B), *i = ct__bv_full(in[1], c->B);
    if (!x || !i) return ct__bv_status();
    return done1(out, ct_gather(x, wrapd(n->args.p.index.dim, ct__bv_ndim(in[0])) + 1, i), 0);
}
