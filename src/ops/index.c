/* index.c -- copying and indexing ops: cat/stack, index_select, gather,
 * scatter, index_add/fill/copy, masked_*, advanced indexing, take,
 * nonzero.  Kernels: src/backend/cpu/index.c. */
#include <math.h>

#include "index_impl.h"

/* ---- shared helpers ---------------------------------------------------- */
ct_tensor *ct__idx_copy_as(ct_tensor *t, ct_dtype dt) {
    ct_tensor *o = ct__alloc(t->sizes, t->ndim, dt, t->storage->device);
    if (!o) return NULL;
    ct_tensor *os[1] = {o}, *is[1] = {t};
    if (ct__dispatch(CT_OP_copy, os, 1, is, 1, NULL)) { ct_release(o); return NULL; }
    return o;
}

static int is_index_dtype(ct_dtype dt) { return dt == CT_I64 || dt == CT_I32; }

ct_tensor *ct__idx_checked(const char *op, ct_tensor *ix, int64_t size, int64_t dim, int allow_neg) {
    if (!is_index_dtype(ix->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: expected dtype int32 or int64 for index, got %s", op,
                         ct_dtype_name(ix->dtype));
    ct_tensor *c = ct__idx_copy_as(ix, CT_I64);
    if (!c) return NULL;
    if (!ct__has_host_data(c)) return c; /* meta: no values to bound (torch checks none either) */
    int64_t *p = ct__ptr(c), n = ct_numel(c);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = p[i];
        if (v < -size || v >= size || (v < 0 && !allow_neg)) {
            ct_release(c);
            return ct__error(CT_ERR_INDEX, "%s: index %lld is out of bounds for dimension %lld with size %lld",
                             op, (long long)v, (long long)dim, (long long)size);
        }
        if (v < 0) p[i] = v + size;
    }
    return c;
}

ct_tensor *ct__idx_writeback(ct_op op, ct_tensor *x, ct_tensor *r, ct_tensor *const *in, int nin,
                             const ct_args *a, const char *name) {
    if (!r) return NULL;
    if (ct__inplace_begin(x, in, nin, name)) { ct_release(r); return NULL; }
    ct_tensor *os[1] = {x}, *is[1] = {r};
    ct_status st = ct__dispatch(CT_OP_copy, os, 1, is, 1, NULL);
    ct_release(r);
    if (st) { ct__inplace_abort(x); return NULL; }
    return ct__finish_inplace(op, x, in, nin, a);
}

/* compute dtype of arithmetic kernels; -1 when unsupported */
static int arith_dtype(ct_dtype dt) {
    switch (dt) {
    case CT_F32: case CT_F64: case CT_I64: case CT_I32: case CT_I16: case CT_I8: case CT_U8: return dt;
    case CT_F16: case CT_BF16: return CT_F32;
    default: return -1;
    }
}

static int64_t dsize(const ct_tensor *t, int64_t d) { return t->ndim ? t->sizes[d] : 1; }

/* ---- cat / stack --------------------------------------------------------- */
static int legacy_empty(const ct_tensor *t) { return t->ndim == 1 && t->sizes[0] == 0; }

static ct_tensor *cat_impl(ct_tensor *const *ts, int n, int64_t dim) {
    if (n <= 0 || !ts) return ct__error(CT_ERR_ARG, "cat: expected a non-empty list of tensors");
    for (int i = 0; i < n; i++) CT_NULLCHECK_AT("cat", ts, i);
    ct_dtype dt = ct_result_type(ts, n);
    int ref = -1;
    for (int i = 0; i < n; i++) {
        if (ts[i]->ndim == 0)
            return ct__error(CT_ERR_SHAPE, "cat: zero-dimensional tensor (at position %d) cannot be "
                             "concatenated", i);
        if (ref < 0 && !legacy_empty(ts[i])) ref = i;
    }
    if (ref < 0) ref = 0;
    ct_tensor *r = ts[ref];
    int64_t d = ct__wrap_dim("cat", dim, r->ndim);
    if (d < 0) return NULL;
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, r->sizes, sizeof(int64_t) * (size_t)r->ndim);
    sh[d] = 0;
    for (int i = 0; i < n; i++) {
        ct_tensor *t = ts[i];
        if (legacy_empty(t) && i != ref) continue;
        if (t->ndim != r->ndim)
            return ct__error(CT_ERR_SHAPE, "cat: tensors must have same number of dimensions: got %d and %d",
                             r->ndim, t->ndim);
        for (int k = 0; k < r->ndim; k++)
            if (k != d && t->sizes[k] != r->sizes[k])
                return ct__error(CT_ERR_SHAPE, "cat: sizes of tensors must match except in dimension %lld. "
                                 "Expected size %lld but got size %lld for tensor number %d in the list.",
                                 (long long)d, (long long)r->sizes[k], (long long)t->sizes[k], i);
        sh[d] += t->sizes[d];
    }
    ct_tensor *out = ct__alloc(sh, r->ndim, dt, r->storage->device);
    if (!out) return NULL;
    ct_tensor **tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp) { ct_release(out); return ct__error(CT_ERR_OOM, "cat: out of memory"); }
    ct_status st = CT_OK;
    for (int i = 0; i < n && !st; i++) {
        if (legacy_empty(ts[i]) && i != ref) continue;
        tmp[i] = ct__contig_as(ts[i], dt);
        if (!tmp[i]) st = CT_ERR_OOM;
    }
    ct_args a = ct__args(CT_OP_cat);
    a.p.index.dim = d;
    ct_tensor *o[1] = {out};
    if (!st) st = ct__dispatch(CT_OP_cat, o, 1, tmp, n, &a);
    for (int i = 0; i < n; i++) ct_release(tmp[i]);
    free(tmp);
    if (st) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_cat, out, ts, n, &a);
}

ct_tensor *ct_cat(ct_tensor *const *ts, int n, int64_t dim) { return cat_impl(ts, n, dim); }

ct_tensor *ct_stack(ct_tensor *const *ts, int n, int64_t dim) {
    if (n <= 0 || !ts) return ct__error(CT_ERR_ARG, "stack: expects a non-empty TensorList");
    for (int i = 0; i < n; i++) CT_NULLCHECK_AT("stack", ts, i);
    for (int i = 1; i < n; i++)
        if (ts[i]->ndim != ts[0]->ndim ||
            memcmp(ts[i]->sizes, ts[0]->sizes, sizeof(int64_t) * (size_t)ts[0]->ndim) != 0) {
            char b[256];
            ct__shape_str(ts[0]->sizes, ts[0]->ndim, b, sizeof b);
            return ct__error(CT_ERR_SHAPE, "stack: expects each tensor to be equal size, but got %s at "
                             "entry 0 and %s at entry %d", b, ct__tshape(ts[i]), i);
        }
    int64_t d = ct__wrap_dim("stack", dim, ts[0]->ndim + 1);
    if (d < 0) return NULL;
    ct_tensor **u = calloc((size_t)n, sizeof *u);
    if (!u) return ct__error(CT_ERR_OOM, "stack: out of memory");
    ct_scope s = ct_scope_begin();
    for (int i = 0; i < n; i++) u[i] = ct_unsqueeze(ts[i], d);
    ct_tensor *r = ct_keep(cat_impl(u, n, d));
    ct_scope_end(s);
    free(u);
    return r;
}

static ct_tensor *hv_stack(ct_tensor *const *ts, int n, int vert) {
    const char *op = vert ? "vstack" : "hstack";
    if (n <= 0 || !ts) return ct__error(CT_ERR_ARG, "%s: expects a non-empty TensorList", op);
    for (int i = 0; i < n; i++) CT_NULLCHECK_AT(op, ts, i);
    ct_tensor **u = calloc((size_t)n, sizeof *u);
    if (!u) return ct__error(CT_ERR_OOM, "%s: out of memory", op);
    ct_scope s = ct_scope_begin();
    for (int i = 0; i < n; i++) {
        ct_tensor *t = ts[i];
        if (t->ndim == 0) t = ct_reshape(t, vert ? (const int64_t[]){1, 1} : (const int64_t[]){1}, vert ? 2 : 1);
        else if (vert && t->ndim == 1) t = ct_unsqueeze(t, 0);
        u[i] = t;
    }
    int64_t dim = vert ? 0 : (u[0] && u[0]->ndim == 1 ? 0 : 1);
    ct_tensor *r = ct_keep(cat_impl(u, n, dim));
    ct_scope_end(s);
    free(u);
    return r;
}
ct_tensor *ct_hstack(ct_tensor *const *ts, int n) { return hv_stack(ts, n, 0); }
ct_tensor *ct_vstack(ct_tensor *const *ts, int n) { return hv_stack(ts, n, 1); }

/* ---- index_select ----------------------------------------------------- */
ct_tensor *ct_index_select(ct_tensor *x, int64_t dim, ct_tensor *index) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    int64_t d = ct__wrap_dim("index_select", dim, x->ndim);
    if (d < 0) return NULL;
    if (index->ndim > 1)
        return ct__error(CT_ERR_SHAPE, "index_select: index should have at most 1 dimension, got %d-D",
                         index->ndim);
    ct_tensor *ix = ct__idx_checked("index_select", index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    if (x->ndim) sh[d] = ct_numel(ix);
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    ct_tensor *out = xc ? ct__alloc(sh, x->ndim, x->dtype, x->storage->device) : NULL;
    ct_args a = ct__args(CT_OP_index_select);
    a.p.index.dim = d;
    ct_tensor *ins[2] = {xc, ix}, *o[1] = {out};
    if (out && ct__dispatch(CT_OP_index_select, o, 1, ins, 2, &a)) { ct_release(out); out = NULL; }
    ct_release(xc);
    ct_release(ix);
    ct_tensor *in[2] = {x, index};
    return ct__finish(CT_OP_index_select, out, in, 2, &a);
}

/* ---- gather --------------------------------------------------------------- */
static int check_same_ndim(const char *op, ct_tensor *x, ct_tensor *index) {
    int xn = x->ndim ? x->ndim : 1, in = index->ndim ? index->ndim : 1;
    if (xn != in) {
        ct__error(CT_ERR_SHAPE, "%s: index tensor must have the same number of dimensions as input "
                  "tensor (%d vs %d)", op, index->ndim, x->ndim);
        return -1;
    }
    return 0;
}

ct_tensor *ct_gather(ct_tensor *x, int64_t dim, ct_tensor *index) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    int64_t d = ct__wrap_dim("gather", dim, x->ndim);
    if (d < 0) return NULL;
    if (check_same_ndim("gather", x, index)) return NULL;
    for (int k = 0; k < index->ndim && x->ndim; k++)
        if (k != d && index->sizes[k] > x->sizes[k])
            return ct__error(CT_ERR_SHAPE, "gather: size does not match at dimension %d expected index %s "
                             "to be smaller than self %s apart from dimension %lld", k,
                             ct__tshape(index), ct__tshape(x), (long long)d);
    ct_tensor *ix = ct__idx_checked("gather", index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    ct_tensor *out = xc ? ct__alloc(index->sizes, index->ndim, x->dtype, x->storage->device) : NULL;
    ct_args a = ct__args(CT_OP_gather);
    a.p.index.dim = x->ndim ? d : 0;
    ct_tensor *ins[2] = {xc, ix}, *o[1] = {out};
    if (out && ct__dispatch(CT_OP_gather, o, 1, ins, 2, &a)) { ct_release(out); out = NULL; }
    ct_release(xc);
    ct_release(ix);
    ct_tensor *in[2] = {x, index};
    return ct__finish(CT_OP_gather, out, in, 2, &a);
}

/* ---- scatter family ------------------------------------------------------ */
enum { M_SET = 0, M_SUM, M_PROD, M_MEAN, M_AMAX, M_AMIN };

/* Runs opc on a copy of x in dtype cdt with (ix, src), then casts the
 * result back to x's dtype.  Takes ix (released). */
static ct_tensor *write_into_copy(ct_op opc, ct_tensor *x, ct_tensor *ix, ct_tensor *src, ct_dtype cdt,
                                  const ct_args *a) {
    ct_tensor *out = ct__idx_copy_as(x, cdt);
    ct_tensor *sc = src && out ? ct__contig_as(src, cdt) : NULL;
    ct_tensor *o[1] = {out}, *ins[2] = {ix, sc};
    ct_status st = (!out || (src && !sc)) ? CT_ERR_OOM : ct__dispatch(opc, o, 1, ins, src ? 2 : 1, a);
    ct_release(ix);
    ct_release(sc);
    if (st) { ct_release(out); return NULL; }
    if (cdt != x->dtype) {
        ct_tensor *r = ct__idx_copy_as(out, x->dtype);
        ct_release(out);
        out = r;
    }
    return out;
}

/* Returns a new contiguous result (refcount 1, no scope) or NULL. */
static ct_tensor *scatter_impl(const char *op, ct_op opc, ct_tensor *x, int64_t dim, ct_tensor *index,
                               ct_tensor *src, double value, int mode, int incl, ct_args *aout) {
    int64_t d = ct__wrap_dim(op, dim, x->ndim);
    if (d < 0) return NULL;
    if (check_same_ndim(op, x, index)) return NULL;
    if (src && check_same_ndim(op, src, index)) return NULL;
    if (src && src->dtype != x->dtype)
        return ct__error(CT_ERR_DTYPE, "%s: expected self.dtype to be equal to src.dtype (%s vs %s)", op,
                         ct_dtype_name(x->dtype), ct_dtype_name(src->dtype));
    for (int k = 0; k < index->ndim; k++) {
        if (x->ndim && k != d && index->sizes[k] > x->sizes[k])
            return ct__error(CT_ERR_SHAPE, "%s: expected index %s to be smaller than self %s apart from "
                             "dimension %lld", op, ct__tshape(index), ct__tshape(x), (long long)d);
        if (src && src->ndim && index->sizes[k] > src->sizes[k])
            return ct__error(CT_ERR_SHAPE, "%s: expected index %s to be smaller than src %s", op,
                             ct__tshape(index), ct__tshape(src));
    }
    int cdt = mode == M_SET ? (int)x->dtype : arith_dtype(x->dtype);
    if (cdt < 0)
        return ct__error(CT_ERR_DTYPE, "%s: dtype %s is not supported", op, ct_dtype_name(x->dtype));
    ct_tensor *ix = ct__idx_checked(op, index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    ct_args a = ct__args(opc);
    a.p.index.dim = x->ndim ? d : 0;
    a.p.index.reduce = mode;
    a.p.index.include_self = incl;
    a.p.index.value = value;
    *aout = a;
    return write_into_copy(opc, x, ix, src, (ct_dtype)cdt, &a);
}

/* The recorded inputs are (x, index, src); the args (p.index) carry dim,
 * reduce (the M_* mode), include_self and the scalar value (scatter without
 * src), or dim, reduce, alpha (index_add) and value (index_fill). */
#define SCAT_IN(x, i, s) ct_tensor *in_[3] = {x, i, s}; ct_args a_ = ct__args(CT_OP_copy)
ct_tensor *ct_scatter(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__finish(CT_OP_scatter, scatter_impl("scatter", CT_OP_scatter, x, dim, index, src, 0, M_SET, 1, &a_),
                      in_, 3, &a_);
}
ct_tensor *ct_scatter_value(ct_tensor *x, int64_t dim, ct_tensor *index, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(index);
    SCAT_IN(x, index, NULL);
    return ct__finish(CT_OP_scatter, scatter_impl("scatter", CT_OP_scatter, x, dim, index, NULL, value, M_SET, 1, &a_),
                      in_, 2, &a_);
}
ct_tensor *ct_scatter_add(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__finish(CT_OP_scatter_add,
                      scatter_impl("scatter_add", CT_OP_scatter_add, x, dim, index, src, 0, M_SUM, 1, &a_), in_, 3,
                      &a_);
}
ct_tensor *ct_scatter_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__idx_writeback(CT_OP_scatter, x,
                             scatter_impl("scatter_", CT_OP_scatter, x, dim, index, src, 0, M_SET, 1, &a_),
                             in_, 3, &a_, "scatter_");
}
ct_tensor *ct_scatter_add_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__idx_writeback(CT_OP_scatter_add, x,
                             scatter_impl("scatter_add_", CT_OP_scatter_add, x, dim, index, src, 0, M_SUM, 1, &a_),
                             in_, 3, &a_, "scatter_add_");
}
ct_tensor *ct_scatter_reduce(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src,
                             const char *reduce, bool include_self) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    static const char *names[] = {"", "sum", "prod", "mean", "amax", "amin"};
    int mode = -1;
    for (int k = 1; k < 6; k++)
        if (reduce && strcmp(reduce, names[k]) == 0) mode = k;
    if (mode < 0)
        return ct__error(CT_ERR_ARG, "scatter_reduce: reduce argument must be either sum, prod, mean, "
                         "amax or amin, got %s", reduce ? reduce : "(null)");
    SCAT_IN(x, index, src);
    return ct__finish(CT_OP_scatter_reduce,
                      scatter_impl("scatter_reduce", CT_OP_scatter_reduce, x, dim, index, src, 0, mode,
                                   include_self, &a_),
                      in_, 3, &a_);
}

/* ---- index_add / index_copy / index_fill -------------------------------- */
/* mode: 0 copy, 1 add (f: alpha), -1 fill (f: the value) */
static ct_tensor *index_along_impl(const char *op, ct_op opc, ct_tensor *x, int64_t dim, ct_tensor *index,
                                   ct_tensor *src, double f, int mode, ct_args *aout) {
    int64_t d = ct__wrap_dim(op, dim, x->ndim);
    if (d < 0) return NULL;
    if (index->ndim > 1)
        return ct__error(CT_ERR_SHAPE, "%s: index should have at most 1 dimension, got %d-D", op, index->ndim);
    int64_t m = ct_numel(index);
    if (src) {
        if (src->dtype != x->dtype)
            return ct__error(CT_ERR_DTYPE, "%s: self (%s) and source (%s) must have the same scalar type",
                             op, ct_dtype_name(x->dtype), ct_dtype_name(src->dtype));
        int ok = (src->ndim ? src->ndim : 1) == (x->ndim ? x->ndim : 1) && dsize(src, src->ndim ? d : 0) == m;
        for (int k = 0; ok && k < x->ndim && src->ndim; k++)
            if (k != d && src->sizes[k] != x->sizes[k]) ok = 0;
        if (!ok)
            return ct__error(CT_ERR_SHAPE, "%s: source %s does not match self %s with %lld indices along "
                             "dimension %lld", op, ct__tshape(src), ct__tshape(x), (long long)m, (long long)d);
    }
    int cdt = mode == 1 ? arith_dtype(x->dtype) : (int)x->dtype;
    if (cdt < 0) return ct__error(CT_ERR_DTYPE, "%s: dtype %s is not supported", op, ct_dtype_name(x->dtype));
    ct_tensor *ix = ct__idx_checked(op, index, dsize(x, d), d, mode == -1);
    if (!ix) return NULL;
    ct_args a = ct__args(opc);
    a.p.index.dim = x->ndim ? d : 0;
    a.p.index.reduce = mode;
    if (mode == 1) a.p.index.alpha = f;
    else if (mode == -1) a.p.index.value = f;
    *aout = a;
    return write_into_copy(opc, x, ix, src, (ct_dtype)cdt, &a);
}

ct_tensor *ct_index_add(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__finish(CT_OP_index_add,
                      index_along_impl("index_add", CT_OP_index_add, x, dim, index, src, alpha, 1, &a_), in_, 3, &a_);
}
ct_tensor *ct_index_add_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__idx_writeback(CT_OP_index_add, x,
                             index_along_impl("index_add_", CT_OP_index_add, x, dim, index, src, alpha, 1, &a_),
                             in_, 3, &a_, "index_add_");
}
ct_tensor *ct_index_copy(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    SCAT_IN(x, index, src);
    return ct__finish(CT_OP_index_copy,
                      index_along_impl("index_copy", CT_OP_index_copy, x, dim, index, src, 0, 0, &a_), in_, 3, &a_);
}
ct_tensor *ct_index_fill(ct_tensor *x, int64_t dim, ct_tensor *index, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(index);
    SCAT_IN(x, index, NULL);
    return ct__finish(CT_OP_index_fill,
                      index_along_impl("index_fill", CT_OP_index_fill, x, dim, index, NULL, value, -1, &a_), in_, 2,
                      &a_);
}

/* ---- masked ops ----------------------------------------------------------- */
static int check_mask(const char *op, ct_tensor *mask) {
    if (mask->dtype != CT_BOOL) {
        ct__error(CT_ERR_DTYPE, "%s: only supports boolean masks, but got mask with dtype %s", op,
                  ct_dtype_name(mask->dtype));
        return -1;
    }
    return 0;
}

ct_tensor *ct_masked_fill(ct_tensor *x, ct_tensor *mask, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    if (check_mask("masked_fill", mask)) return NULL;
    int64_t sh[CT_MAX_DIMS];
    int nd;
    if (ct__broadcast_shapes("masked_fill", x->sizes, x->ndim, mask->sizes, mask->ndim, sh, &nd)) return NULL;
    ct_tensor *out = ct__alloc(sh, nd, x->dtype, x->storage->device);
    if (!out) return NULL;
    ct_args a = ct__args(CT_OP_masked_fill);
    a.p.index.value = value;
    ct_tensor *o[1] = {out}, *in[2] = {x, mask};
    if (ct__dispatch(CT_OP_masked_fill, o, 1, in, 2, &a)) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_masked_fill, out, in, 2, &a);
}

ct_tensor *ct_masked_fill_(ct_tensor *x, ct_tensor *mask, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    if (check_mask("masked_fill_", mask)) return NULL;
    int64_t sh[CT_MAX_DIMS];
    int nd;
    if (ct__broadcast_shapes("masked_fill_", x->sizes, x->ndim, mask->sizes, mask->ndim, sh, &nd)) return NULL;
    if (nd != x->ndim || memcmp(sh, x->sizes, sizeof(int64_t) * (size_t)nd))
        return ct__error(CT_ERR_SHAPE, "masked_fill_: mask of shape %s cannot be broadcast to self of shape %s",
                         ct__tshape(mask), ct__tshape(x));
    ct_args a = ct__args(CT_OP_masked_fill);
    a.p.index.value = value;
    ct_tensor *o[1] = {x}, *in[2] = {x, mask};
    if (ct__inplace_begin(x, in, 2, "masked_fill_")) return NULL;
    if (ct__dispatch(CT_OP_masked_fill, o, 1, in, 2, &a)) { ct__inplace_abort(x); return NULL; }
    return ct__finish_inplace(CT_OP_masked_fill, x, in, 2, &a);
}

/* where(mask, value as x's dtype, x): x's gradient is g where the mask is
 * false, value's the sum of g where it is true (torch's
 * masked_fill_backward: grad.masked_select(mask).sum()). */
ct_tensor *ct_masked_fill_tensor(ct_tensor *x, ct_tensor *mask, ct_tensor *value) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask); CT_NULLCHECK(value);
    if (check_mask("masked_fill", mask)) return NULL;
    if (value->ndim != 0)
        return ct__error(CT_ERR_SHAPE, "masked_fill: only supports a 0-dimensional value tensor, but got "
                         "tensor with %d dimension(s)", value->ndim);
    int64_t sh[CT_MAX_DIMS];
    int nd;
    if (ct__broadcast_shapes("masked_fill", x->sizes, x->ndim, mask->sizes, mask->ndim, sh, &nd)) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = ct_keep(ct_where(mask, ct_to_dtype(value, x->dtype), x));
    ct_scope_end(s);
    return r;
}

/* x and mask broadcast to one shape, both contiguous (x as dtype dt). */
static int bcast_pair(const char *op, ct_tensor *x, ct_tensor *mask, ct_tensor **xc, ct_tensor **mc) {
    int64_t sh[CT_MAX_DIMS];
    int nd;
    *xc = *mc = NULL;
    if (ct__broadcast_shapes(op, x->sizes, x->ndim, mask->sizes, mask->ndim, sh, &nd)) return -1;
    ct_scope s = ct_scope_begin();
    ct_tensor *xe = ct_expand(x, sh, nd), *me = ct_expand(mask, sh, nd);
    if (xe && me) {
        *xc = ct__idx_copy_as(xe, x->dtype);
        *mc = ct__idx_copy_as(me, CT_BOOL);
    }
    ct_scope_end(s);
    if (!*xc || !*mc) { ct_release(*xc); ct_release(*mc); *xc = *mc = NULL; return -1; }
    return 0;
}

ct_tensor *ct_masked_select(ct_tensor *x, ct_tensor *mask) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    if (check_mask("masked_select", mask)) return NULL;
    ct_tensor *xc, *mc;
    if (!ct__need_data("masked_select", mask)) return NULL; /* the output size is the mask's count */
    if (bcast_pair("masked_select", x, mask, &xc, &mc)) return NULL;
    int64_t n = ct_numel(mc), cnt = 0;
    const uint8_t *m = ct__ptr(mc);
    for (int64_t i = 0; i < n; i++) cnt += m[i] != 0;
    ct_tensor *out = ct__alloc(CT_SHAPE(cnt), x->dtype, x->storage->device);
    ct_tensor *o[1] = {out}, *ins[2] = {xc, mc};
    if (out && ct__dispatch(CT_OP_masked_select, o, 1, ins, 2, NULL)) { ct_release(out); out = NULL; }
    ct_release(xc);
    ct_release(mc);
    ct_tensor *in[2] = {x, mask};
    return ct__finish(CT_OP_masked_select, out, in, 2, NULL);
}

ct_tensor *ct_masked_scatter(ct_tensor *x, ct_tensor *mask, ct_tensor *source) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask); CT_NULLCHECK(source);
    if (check_mask("masked_scatter", mask)) return NULL;
    if (source->dtype != x->dtype)
        return ct__error(CT_ERR_DTYPE, "masked_scatter: expected self and source to have same dtypes but "
                         "got %s and %s", ct_dtype_name(x->dtype), ct_dtype_name(source->dtype));
    ct_tensor *xc, *mc;
    if (bcast_pair("masked_scatter", x, mask, &xc, &mc)) return NULL;
    ct_tensor *sc = ct__contig_as(source, x->dtype);
    ct_tensor *o[1] = {xc}, *ins[2] = {mc, sc};
    ct_status st = sc ? ct__dispatch(CT_OP_masked_scatter, o, 1, ins, 2, NULL) : CT_ERR_OOM;
    ct_release(mc);
    ct_release(sc);
    if (st) { ct_release(xc); return NULL; }
    ct_tensor *in[3] = {x, mask, source};
    return ct__finish(CT_OP_masked_scatter, xc, in, 3, NULL);
}

/* ---- advanced indexing ---------------------------------------------------- */
/* Computes the result shape of x[indices] and an int64 tensor (that shape)
 * of element offsets into x (relative to its first element). */
static ct_tensor *adv_offsets(const char *op, ct_tensor *x, ct_tensor *const *indices, int n,
                              int64_t *osh, int *ond) {
    if (n < 0 || (n > 0 && !indices)) return ct__error(CT_ERR_ARG, "%s: bad index list", op);
    ct_tensor *per[CT_MAX_DIMS] = {0}; /* per x dim: int64 index (owned) or NULL */
    ct_tensor *res = NULL;
    int xd = 0, ok = 1;
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < n && ok; k++) {
        ct_tensor *t = indices[k];
        if (!t) { xd++; continue; }
        if (t->dtype == CT_BOOL || t->dtype == CT_U8) {
            if (t->ndim == 0) { ct__error(CT_ERR_INDEX, "%s: 0-dim boolean indices are not supported", op); ok = 0; break; }
            if (xd + t->ndim > x->ndim) { ct__error(CT_ERR_INDEX, "%s: too many indices for tensor of dimension %d", op, x->ndim); ok = 0; break; }
            for (int j = 0; j < t->ndim; j++)
                if (t->sizes[j] != x->sizes[xd + j]) {
                    ct__error(CT_ERR_INDEX, "%s: the shape of the mask %s at index %d does not match the "
                              "shape of the indexed tensor %s at index %d", op, ct__tshape(t), j,
                              ct__tshape(x), xd + j);
                    ok = 0;
                    break;
                }
            if (!ok) break;
            if (!ct__need_data(op, t)) { ok = 0; break; } /* selects as many as it has true values */
            ct_tensor *nz = ct_nonzero(t);
            if (!nz) { ok = 0; break; }
            for (int j = 0; j < t->ndim; j++) {
                ct_tensor *col = ct_select(nz, 1, j);
                per[xd + j] = col ? ct__idx_copy_as(col, CT_I64) : NULL;
                if (!per[xd + j]) ok = 0;
            }
            xd += t->ndim;
            continue;
        }
        if (!is_index_dtype(t->dtype)) {
            ct__error(CT_ERR_DTYPE, "%s: tensors used as indices must be long, int, byte or bool tensors, got %s",
                      op, ct_dtype_name(t->dtype));
            ok = 0;
            break;
        }
        if (xd >= x->ndim) { ct__error(CT_ERR_INDEX, "%s: too many indices for tensor of dimension %d", op, x->ndim); ok = 0; break; }
        per[xd] = ct__idx_checked(op, t, x->sizes[xd], xd, 1);
        if (!per[xd]) { ok = 0; break; }
        xd++;
    }
    /* broadcast the index tensors */
    int64_t bsh[CT_MAX_DIMS];
    int bnd = 0, first = -1, last = -1, nadv = 0;
    for (int d = 0; ok && d < x->ndim; d++) {
        if (!per[d]) continue;
        if (first < 0) first = d;
        last = d;
        nadv++;
        int64_t tmp[CT_MAX_DIMS];
        memcpy(tmp, bsh, sizeof tmp);
        if (ct__broadcast_shapes(op, tmp, bnd, per[d]->sizes, per[d]->ndim, bsh, &bnd)) {
            ct__error(CT_ERR_INDEX, "%s: shape mismatch: indexing tensors could not be broadcast together", op);
            ok = 0;
        }
    }
    /* the offsets are computed on the host; on meta only their shape */
    ct_device rdev = x->storage->device;
    for (int d = 0; ok && d < x->ndim; d++)
        if (per[d] && rdev == CT_CPU) rdev = per[d]->storage->device;
    if (ok) {
        int adjacent = nadv == 0 || (last - first + 1 == nadv);
        /* output layout: pos[d] = output dim of slice dim d; bpos = first output dim of the block */
        int pos[CT_MAX_DIMS], nd = 0, bpos = 0;
        if (nadv && !adjacent) { bpos = 0; nd = bnd; }
        for (int d = 0; d < x->ndim; d++) {
            if (per[d]) {
                if (adjacent && d == first) { bpos = nd; nd += bnd; }
                continue;
            }
            pos[d] = nd++;
        }
        if (nd > CT_MAX_DIMS) { ct__error(CT_ERR_SHAPE, "%s: result has too many dims", op); ok = 0; }
        for (int d = 0; ok && d < x->ndim; d++) {
            if (!per[d]) osh[pos[d]] = x->sizes[d];
        }
        for (int j = 0; ok && j < bnd; j++) osh[bpos + j] = bsh[j];
        *ond = nd;
        /* expanded contiguous copies of the index tensors */
        const int64_t *ip[CT_MAX_DIMS] = {0};
        ct_tensor *ex[CT_MAX_DIMS] = {0};
        for (int d = 0; ok && d < x->ndim; d++) {
            if (!per[d]) continue;
            ct_tensor *e = ct_expand(per[d], bsh, bnd);
            ex[d] = e ? ct__idx_copy_as(e, CT_I64) : NULL;
            if (!ex[d]) ok = 0;
            else ip[d] = ct__ptr(ex[d]);
        }
        if (ok) res = ct__alloc(osh, nd, CT_I64, rdev);
        if (res && rdev == CT_CPU) {
            int64_t total = ct_numel(res), *off = ct__ptr(res);
            int64_t bst[CT_MAX_DIMS];
            ct__contiguous_strides(bsh, bnd, bst);
            int64_t c[CT_MAX_DIMS] = {0};
            for (int64_t i = 0; i < total; i++) {
                int64_t b = 0, o = 0;
                for (int j = 0; j < bnd; j++) b += c[bpos + j] * bst[j];
                for (int d = 0; d < x->ndim; d++)
                    o += (per[d] ? ip[d][b] : c[pos[d]]) * x->strides[d];
                off[i] = o;
                for (int k = nd - 1; k >= 0; k--) {
                    if (++c[k] < osh[k]) break;
                    c[k] = 0;
                }
            }
        }
        for (int d = 0; d < x->ndim; d++) ct_release(ex[d]);
    }
    for (int d = 0; d < CT_MAX_DIMS; d++) ct_release(per[d]);
    ct_scope_end(s);
    return ok ? res : NULL;
}

ct_tensor *ct_index(ct_tensor *x, ct_tensor *const *indices, int n) {
    CT_NULLCHECK(x);
    if (n > x->ndim) return ct__error(CT_ERR_INDEX, "index: too many indices for tensor of dimension %d", x->ndim);
    int64_t osh[CT_MAX_DIMS];
    int ond = 0;
    ct_tensor *off = adv_offsets("index", x, indices, n, osh, &ond);
    if (!off) return NULL;
    ct_tensor *out = ct__alloc(osh, ond, x->dtype, x->storage->device);
    ct_tensor *o[1] = {out}, *ins[2] = {x, off};
    if (out && ct__dispatch(CT_OP_index, o, 1, ins, 2, NULL)) { ct_release(out); out = NULL; }
    ct_release(off);
    /* recorded inputs: x and the index tensors (NULL: a full slice);
     * args: take = false (advanced indexing; take records true), num_indices = n */
    ct_tensor *in[1 + CT_MAX_DIMS] = {x};
    for (int k = 0; k < n; k++) in[1 + k] = indices[k];
    ct_args a = ct__args(CT_OP_index);
    a.p.index.take = false;
    a.p.index.num_indices = n;
    return ct__finish(CT_OP_index, out, in, 1 + n, &a);
}

ct_tensor *ct_index_put_(ct_tensor *x, ct_tensor *const *indices, int n, ct_tensor *values,
                         bool accumulate) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(values);
    if (n > x->ndim) return ct__error(CT_ERR_INDEX, "index_put_: too many indices for tensor of dimension %d", x->ndim);
    if (accumulate && arith_dtype(x->dtype) != (int)x->dtype)
        return ct__error(CT_ERR_DTYPE, "index_put_: accumulate is not supported for dtype %s", ct_dtype_name(x->dtype));
    int64_t osh[CT_MAX_DIMS];
    int ond = 0;
    ct_tensor *off = adv_offsets("index_put_", x, indices, n, osh, &ond);
    if (!off) return NULL;
    ct_tensor *vc = NULL;
    ct_scope s = ct_scope_begin();
    int64_t bs[CT_MAX_DIMS];
    int bn;
    if (ct__broadcast_shapes("index_put_", osh, ond, values->sizes, values->ndim, bs, &bn) == CT_OK &&
        bn == ond && memcmp(bs, osh, sizeof(int64_t) * (size_t)bn) == 0) {
        ct_tensor *e = ct_expand(values, osh, ond);
        vc = e ? ct__idx_copy_as(e, x->dtype) : NULL;
    } else {
        char b[256];
        ct__error(CT_ERR_SHAPE, "index_put_: shape mismatch: value tensor of shape %s cannot be broadcast "
                  "to indexing result of shape %s", ct__tshape(values), ct__shape_str(osh, ond, b, sizeof b));
    }
    ct_scope_end(s);
    ct_status st = CT_ERR_SHAPE;
    ct_args a = ct__args(CT_OP_index_put);
    a.p.index.accumulate = accumulate;
    a.p.index.num_indices = n;
    /* recorded inputs: x, values and the index tensors (NULL: a full slice) */
    ct_tensor *in[2 + CT_MAX_DIMS] = {x, values};
    for (int k = 0; k < n; k++) in[2 + k] = indices[k];
    if (vc && ct__inplace_begin(x, in, 2 + n, "index_put_") == CT_OK) {
        ct_tensor *o[1] = {x}, *ins[2] = {off, vc};
        st = ct__dispatch(CT_OP_index_put, o, 1, ins, 2, &a);
        if (st) ct__inplace_abort(x);
    }
    ct_release(off);
    ct_release(vc);
    if (st) return NULL;
    return ct__finish_inplace(CT_OP_index_put, x, in, 2 + n, &a);
}

ct_tensor *ct_index_put(ct_tensor *x, ct_tensor *const *indices, int n, ct_tensor *values, bool accumulate) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(values);
    ct_scope s = ct_scope_begin();
    ct_tensor *c = ct_clone(x);
    ct_tensor *r = c ? ct_index_put_(c, indices, n, values, accumulate) : NULL;
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ---- take / take_along_dim -------------------------------------------------- */
ct_tensor *ct_take(ct_tensor *x, ct_tensor *index) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    if (!is_index_dtype(index->dtype))
        return ct__error(CT_ERR_DTYPE, "take: expected a long tensor for index, but got %s", ct_dtype_name(index->dtype));
    int64_t N = ct_numel(x);
    ct_tensor *ix = ct__idx_copy_as(index, CT_I64);
    if (!ix) return NULL;
    int64_t *p = ct__ptr(ix), m = ct__has_host_data(ix) ? ct_numel(ix) : 0; /* meta: no values */
    for (int64_t i = 0; i < m; i++) {
        int64_t v = p[i];
        if (v < -N || v >= N) {
            ct_release(ix);
            return ct__error(CT_ERR_INDEX, "take: index %lld out of range for tensor of size %s", (long long)v,
                             ct__tshape(x));
        }
        if (v < 0) v += N;
        /* linear index -> strided offset */
        int64_t o = 0;
        for (int d = x->ndim - 1; d >= 0; d--) {
            o += (v % x->sizes[d]) * x->strides[d];
            v /= x->sizes[d];
        }
        p[i] = o;
    }
    ct_tensor *out = ct__alloc(index->sizes, index->ndim, x->dtype, x->storage->device);
    ct_tensor *o[1] = {out}, *ins[2] = {x, ix};
    if (out && ct__dispatch(CT_OP_index, o, 1, ins, 2, NULL)) { ct_release(out); out = NULL; }
    ct_release(ix);
    ct_tensor *in[2] = {x, index};
    ct_args a = ct__args(CT_OP_index);
    a.p.index.take = true; /* index holds linear indices into x */
    return ct__finish(CT_OP_index, out, in, 2, &a);
}

ct_tensor *ct_take_along_dim(ct_tensor *x, ct_tensor *index, int64_t dim) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    if (!is_index_dtype(index->dtype))
        return ct__error(CT_ERR_DTYPE, "take_along_dim: dtype of indices should be long but got %s",
                         ct_dtype_name(index->dtype));
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    if (dim == CT_DIM_NONE) {
        r = ct_gather(ct_reshape(x, CT_SHAPE(-1)), 0, ct_reshape(index, CT_SHAPE(-1)));
    } else if (x->ndim != index->ndim) {
        ct__error(CT_ERR_SHAPE, "take_along_dim: input and indices should have the same number of "
                  "dimensions, but got %d dimensions for input, and %d dimensions for indices",
                  x->ndim, index->ndim);
    } else {
        int64_t d = ct__wrap_dim("take_along_dim", dim, x->ndim);
        int64_t xs[CT_MAX_DIMS], is[CT_MAX_DIMS], bs[CT_MAX_DIMS];
        int bn;
        if (d >= 0) {
            memcpy(xs, x->sizes, sizeof xs);
            memcpy(is, index->sizes, sizeof is);
            if (x->ndim) { xs[d] = 1; is[d] = 1; }
            if (ct__broadcast_shapes("take_along_dim", xs, x->ndim, is, index->ndim, bs, &bn) == CT_OK) {
                memcpy(xs, bs, sizeof xs);
                memcpy(is, bs, sizeof is);
                if (x->ndim) { xs[d] = x->sizes[d]; is[d] = index->sizes[d]; }
                r = ct_gather(ct_expand(x, xs, bn), d, ct_expand(index, is, bn));
            }
        }
    }
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ---- nonzero / argwhere ------------------------------------------------------ */
ct_tensor *ct_nonzero(ct_tensor *x) {
    CT_NULLCHECK(x);
    if (!ct__need_data("nonzero", x)) return NULL; /* the output size is the number of nonzeros */
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    if (!xc) return NULL;
    int64_t n = ct_numel(xc), cnt = 0;
    size_t es = ct_dtype_size(x->dtype);
    const char *p = ct__ptr(xc);
    for (int64_t i = 0; i < n; i++) {
        const char *q = p + (size_t)i * es;
        if (ct_dtype_is_complex(x->dtype)) {
            int cd = x->dtype == CT_C64 ? CT_F32 : CT_F64;
            cnt += ct__load_f64(q, (ct_dtype)cd) != 0 || ct__load_f64(q + es / 2, (ct_dtype)cd) != 0;
        } else {
            cnt += ct__load_f64(q, x->dtype) != 0;
        }
    }
    ct_tensor *out = ct__alloc(CT_SHAPE(cnt, x->ndim), CT_I64, x->storage->device);
    ct_tensor *o[1] = {out}, *ins[1] = {xc};
    if (out && ct__dispatch(CT_OP_nonzero, o, 1, ins, 1, NULL)) { ct_release(out); out = NULL; }
    ct_release(xc);
    ct_tensor *in[1] = {x};
    return ct__finish(CT_OP_nonzero, out, in, 1, NULL);
}

ct_tensor *ct_argwhere(ct_tensor *x) { return ct_nonzero(x); }
