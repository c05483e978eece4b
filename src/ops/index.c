/* index.c -- copying and indexing ops: cat/stack, index_select, gather,
 * scatter, index_add/fill/copy, masked_*, advanced indexing, take,
 * nonzero.  Kernels: src/backend/cpu/index.c. */
#include <math.h>

#include "../core/device.h"
#include "index_impl.h"
#include "autocast.h"

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
    if (c->storage->device == CT_META) return c; /* meta: no values to bound (torch checks none either) */
    /* a device without host memory: the indices are bounded (and wrapped) on a host copy, which
     * goes back when one was negative (the kernels, and the cpu fallback's, read them unchecked) */
    const ct_device_vtbl *vt = ct__has_host_data(c) ? NULL : ct__device(c->storage->device);
    ct_tensor *h = NULL;
    int64_t n = ct_numel(c);
    if (vt) {
        h = ct__alloc(c->sizes, c->ndim, CT_I64, CT_CPU);
        if (!h || vt->copy_to_host(ct__ptr(h), ct__ptr(c), (size_t)n * 8, c->storage->device_index)) {
            ct_release(h);
            ct_release(c);
            return NULL;
        }
    }
    int64_t *p = ct__ptr(h ? h : c);
    bool wrapped = false;
    for (int64_t i = 0; i < n; i++) {
        int64_t v = p[i];
        if (v < -size || v >= size || (v < 0 && !allow_neg)) {
            ct_release(c);
            ct_release(h);
            return ct__error(CT_ERR_INDEX, "%s: index %lld is out of bounds for dimension %lld with size %lld",
                             op, (long long)v, (long long)dim, (long long)size);
        }
        if (v < 0) p[i] = v + size, wrapped = true;
    }
    if (h && wrapped) { /* a fresh device tensor (c may be ix itself) with the wrapped values */
        ct_tensor *d = ct__alloc(c->sizes, c->ndim, CT_I64, c->storage->device);
        ct_release(c);
        c = d;
        if (c && vt->copy_from_host(ct__ptr(c), p, (size_t)n * 8, c->storage->device_index)) {
            ct_release(c);
            c = NULL;
        }
    }
    ct_release(h);
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

ct_tensor *ct__idx_alloc_run(ct_op op, const ct_meta *m, ct_tensor *const *kin, int nkin, const ct_args *a) {
    ct_tensor *out = ct__meta_new(m, kin);
    ct_tensor *o[1] = {out};
    if (out && ct__dispatch(op, o, 1, kin, nkin, a)) { ct_release(out); out = NULL; }
    return out;
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

/* The tensor whose shape cat follows: the first that is not a legacy empty
 * [0] (those are skipped), else the first. */
static int cat_ref(ct_tensor *const *ts, int n) {
    for (int i = 0; i < n; i++)
        if (!legacy_empty(ts[i])) return i;
    return 0;
}

/* in: the tensors; p.index.dim (wrapped or not). */
CT_META_FN(ct__meta_cat) {
    (void)nout;
    if (nin <= 0 || !in) return ct__error_status(CT_ERR_ARG, "cat: expected a non-empty list of tensors");
    for (int i = 0; i < nin; i++)
        if (!in[i]) return ct__null_arg_status("cat", "element %d of argument 'ts'", i);
    ct_dtype dt = ct_result_type(in, nin);
    for (int i = 0; i < nin; i++)
        if (in[i]->ndim == 0)
            return ct__error_status(CT_ERR_SHAPE, "cat: zero-dimensional tensor (at position %d) cannot be "
                                    "concatenated", i);
    int ref = cat_ref(in, nin);
    ct_tensor *r = in[ref];
    int64_t d = ct__wrap_dim("cat", a->p.index.dim, r->ndim);
    if (d < 0) return CT_IDX_FAILED();
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, r->sizes, sizeof(int64_t) * (size_t)r->ndim);
    sh[d] = 0;
    for (int i = 0; i < nin; i++) {
        ct_tensor *t = in[i];
        if (legacy_empty(t) && i != ref) continue;
        if (t->ndim != r->ndim)
            return ct__error_status(CT_ERR_SHAPE, "cat: tensors must have same number of dimensions: got %d and %d",
                                    r->ndim, t->ndim);
        for (int k = 0; k < r->ndim; k++)
            if (k != d && t->sizes[k] != r->sizes[k])
                return ct__error_status(CT_ERR_SHAPE, "cat: sizes of tensors must match except in dimension %lld. "
                                        "Expected size %lld but got size %lld for tensor number %d in the list.",
                                        (long long)d, (long long)r->sizes[k], (long long)t->sizes[k], i);
        sh[d] += t->sizes[d];
    }
    ct_device dev;
    if (ct__meta_device("cat", in, nin, &dev)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], sh, r->ndim, dt, dev);
    return CT_OK;
}

static ct_tensor *cat_impl(ct_tensor *const *ts, int n, int64_t dim) {
    ct_args a = ct__args(CT_OP_cat);
    a.p.index.dim = dim;
    ct_meta m;
    if (ct__meta_run(CT_OP_cat, &m, 1, ts, n, &a)) return NULL;
    a.p.index.dim = ct__idx_wrapped(dim, m.ndim);
    ct_tensor **tmp = calloc((size_t)n, sizeof *tmp);
    if (!tmp) return ct__error(CT_ERR_OOM, "cat: out of memory");
    int ref = cat_ref(ts, n);
    ct_status st = CT_OK;
    for (int i = 0; i < n && !st; i++) {
        if (legacy_empty(ts[i]) && i != ref) continue;
        tmp[i] = ct__contig_as(ts[i], m.dtype);
        if (!tmp[i]) st = CT_ERR_OOM;
    }
    ct_tensor *out = st ? NULL : ct__idx_alloc_run(CT_OP_cat, &m, tmp, n, &a);
    for (int i = 0; i < n; i++) ct_release(tmp[i]);
    free(tmp);
    return ct__finish(CT_OP_cat, out, ts, n, &a);
}

/* cat and stack under autocast: their operands promoted (autocast.def) */
static ct_tensor *list_autocast(ct__ac_op id, ct_tensor *const *ts, int n, int64_t dim, bool *done) {
    *done = false;
    if (n <= 0 || !ts) return NULL;
    ct_tensor *small[16], **c = n <= 16 ? small : malloc(sizeof *c * (size_t)n);
    if (!c) {
        *done = true;
        return ct__error(CT_ERR_OOM, "%s: out of memory", ct__ac_table[id].name);
    }
    memcpy(c, ts, sizeof *c * (size_t)n);
    ct__ac_ctx ac;
    ct_tensor *r = NULL;
    if (ct__autocast_begin(&ac, id, c, n)) {
        *done = true;
        r = ac.failed ? NULL : id == CT_AC_cat ? ct_cat(c, n, dim) : ct_stack(c, n, dim);
        r = ct__autocast_end(&ac, r);
    }
    if (c != small) free(c);
    return r;
}

ct_tensor *ct_cat(ct_tensor *const *ts, int n, int64_t dim) {
    if (ct__autocast_on()) {
        bool done;
        ct_tensor *r = list_autocast(CT_AC_cat, ts, n, dim, &done);
        if (done) return r;
    }
    return cat_impl(ts, n, dim);
}

ct_tensor *ct_stack(ct_tensor *const *ts, int n, int64_t dim) {
    if (ct__autocast_on()) {
        bool done;
        ct_tensor *r = list_autocast(CT_AC_stack, ts, n, dim, &done);
        if (done) return r;
    }
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
static ct_status check_index_dtype(const char *op, const ct_tensor *ix) {
    if (!is_index_dtype(ix->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected dtype int32 or int64 for index, got %s", op,
                                ct_dtype_name(ix->dtype));
    return CT_OK;
}

/* in: x, index; p.index.dim */
CT_META_FN(ct__meta_index_select) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0], *index = in[1];
    int64_t d = ct__wrap_dim("index_select", a->p.index.dim, x->ndim);
    if (d < 0) return CT_IDX_FAILED();
    if (index->ndim > 1)
        return ct__error_status(CT_ERR_SHAPE, "index_select: index should have at most 1 dimension, got %d-D",
                                index->ndim);
    if (check_index_dtype("index_select", index)) return CT_IDX_FAILED();
    ct_device dev;
    if (ct__meta_device("index_select", in, 2, &dev)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], x->sizes, x->ndim, x->dtype, dev);
    if (x->ndim) out[0].sizes[d] = ct_numel(index);
    return CT_OK;
}

ct_tensor *ct_index_select(ct_tensor *x, int64_t dim, ct_tensor *index) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    ct_args a = ct__args(CT_OP_index_select);
    a.p.index.dim = dim;
    ct_tensor *in[2] = {x, index};
    ct_meta m;
    if (ct__meta_run(CT_OP_index_select, &m, 1, in, 2, &a)) return NULL;
    int64_t d = a.p.index.dim = ct__idx_wrapped(dim, x->ndim);
    ct_tensor *ix = ct__idx_checked("index_select", index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    ct_tensor *ins[2] = {xc, ix};
    ct_tensor *out = xc ? ct__idx_alloc_run(CT_OP_index_select, &m, ins, 2, &a) : NULL;
    ct_release(xc);
    ct_release(ix);
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

/* in: x, index; p.index.dim */
CT_META_FN(ct__meta_gather) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0], *index = in[1];
    int64_t d = ct__wrap_dim("gather", a->p.index.dim, x->ndim);
    if (d < 0) return CT_IDX_FAILED();
    if (check_same_ndim("gather", x, index)) return CT_IDX_FAILED();
    for (int k = 0; k < index->ndim && x->ndim; k++)
        if (k != d && index->sizes[k] > x->sizes[k])
            return ct__error_status(CT_ERR_SHAPE, "gather: size does not match at dimension %d expected index %s "
                                    "to be smaller than self %s apart from dimension %lld", k,
                                    ct__tshape(index), ct__tshape(x), (long long)d);
    if (check_index_dtype("gather", index)) return CT_IDX_FAILED();
    ct_device dev;
    if (ct__meta_device("gather", in, 2, &dev)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], index->sizes, index->ndim, x->dtype, dev);
    return CT_OK;
}

ct_tensor *ct_gather(ct_tensor *x, int64_t dim, ct_tensor *index) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(index);
    ct_args a = ct__args(CT_OP_gather);
    a.p.index.dim = dim;
    ct_tensor *in[2] = {x, index};
    ct_meta m;
    if (ct__meta_run(CT_OP_gather, &m, 1, in, 2, &a)) return NULL;
    int64_t d = a.p.index.dim = ct__idx_wrapped(dim, x->ndim);
    ct_tensor *ix = ct__idx_checked("gather", index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    ct_tensor *ins[2] = {xc, ix};
    ct_tensor *out = xc ? ct__idx_alloc_run(CT_OP_gather, &m, ins, 2, &a) : NULL;
    ct_release(xc);
    ct_release(ix);
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

/* The common end of the scatter-like and index-along checks: x's dtype when
 * the op does arithmetic on it, the index dtype, one device; m := x's
 * geometry on it. */
static ct_status self_like_out(const char *op, ct_tensor *x, ct_tensor *index, ct_tensor *src, bool arith,
                               ct_meta *m) {
    if (arith && arith_dtype(x->dtype) < 0)
        return ct__error_status(CT_ERR_DTYPE, "%s: dtype %s is not supported", op, ct_dtype_name(x->dtype));
    if (check_index_dtype(op, index)) return CT_IDX_FAILED();
    ct_tensor *in[3] = {x, index, src};
    ct_device dev;
    if (ct__meta_device(op, in, src ? 3 : 2, &dev)) return CT_IDX_FAILED();
    ct__meta_set(m, x->sizes, x->ndim, x->dtype, dev);
    return CT_OK;
}

/* scatter*'s checks (op: the name in the messages): x's geometry in *m. */
static ct_status scatter_check(const char *op, ct_tensor *x, ct_tensor *index, ct_tensor *src, int mode,
                               int64_t dim, ct_meta *m) {
    int64_t d = ct__wrap_dim(op, dim, x->ndim);
    if (d < 0) return CT_IDX_FAILED();
    if (check_same_ndim(op, x, index)) return CT_IDX_FAILED();
    if (src && check_same_ndim(op, src, index)) return CT_IDX_FAILED();
    if (src && src->dtype != x->dtype)
        return ct__error_status(CT_ERR_DTYPE, "%s: expected self.dtype to be equal to src.dtype (%s vs %s)", op,
                                ct_dtype_name(x->dtype), ct_dtype_name(src->dtype));
    for (int k = 0; k < index->ndim; k++) {
        if (x->ndim && k != d && index->sizes[k] > x->sizes[k])
            return ct__error_status(CT_ERR_SHAPE, "%s: expected index %s to be smaller than self %s apart from "
                                    "dimension %lld", op, ct__tshape(index), ct__tshape(x), (long long)d);
        if (src && src->ndim && index->sizes[k] > src->sizes[k])
            return ct__error_status(CT_ERR_SHAPE, "%s: expected index %s to be smaller than src %s", op,
                                    ct__tshape(index), ct__tshape(src));
    }
    return self_like_out(op, x, index, src, mode != M_SET, m);
}

/* in: x, index[, src] (scatter with a value: none); p.index.dim, reduce (M_*) */
CT_META_FN(ct__meta_scatter) {
    (void)nout;
    return scatter_check(ct__op_info[a->op].name, in[0], in[1], nin > 2 ? in[2] : NULL, (int)a->p.index.reduce,
                         a->p.index.dim, &out[0]);
}

/* Returns a new contiguous result (refcount 1, no scope) or NULL.  op: the
 * public function's name (scatter_ for the in-place form). */
static ct_tensor *scatter_impl(const char *op, ct_op opc, ct_tensor *x, int64_t dim, ct_tensor *index,
                               ct_tensor *src, double value, int mode, int incl, ct_args *aout) {
    ct_meta m;
    if (scatter_check(op, x, index, src, mode, dim, &m)) return NULL;
    int64_t d = ct__idx_wrapped(dim, x->ndim);
    int cdt = mode == M_SET ? (int)x->dtype : arith_dtype(x->dtype);
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
/* mode: 0 copy, 1 add, -1 fill.  The checks (op: the name in the
 * messages): x's geometry in *m. */
static ct_status index_along_check(const char *op, ct_tensor *x, ct_tensor *index, ct_tensor *src, int mode,
                                   int64_t dim, ct_meta *m) {
    int64_t d = ct__wrap_dim(op, dim, x->ndim);
    if (d < 0) return CT_IDX_FAILED();
    if (index->ndim > 1)
        return ct__error_status(CT_ERR_SHAPE, "%s: index should have at most 1 dimension, got %d-D", op,
                                index->ndim);
    int64_t n = ct_numel(index);
    if (src) {
        if (src->dtype != x->dtype)
            return ct__error_status(CT_ERR_DTYPE, "%s: self (%s) and source (%s) must have the same scalar type",
                                    op, ct_dtype_name(x->dtype), ct_dtype_name(src->dtype));
        int ok = (src->ndim ? src->ndim : 1) == (x->ndim ? x->ndim : 1) && dsize(src, src->ndim ? d : 0) == n;
        for (int k = 0; ok && k < x->ndim && src->ndim; k++)
            if (k != d && src->sizes[k] != x->sizes[k]) ok = 0;
        if (!ok)
            return ct__error_status(CT_ERR_SHAPE, "%s: source %s does not match self %s with %lld indices along "
                                    "dimension %lld", op, ct__tshape(src), ct__tshape(x), (long long)n,
                                    (long long)d);
    }
    return self_like_out(op, x, index, src, mode == 1, m);
}

/* in: x, index[, src] (index_fill: none); p.index.dim, reduce (the mode) */
CT_META_FN(ct__meta_index_along) {
    (void)nout;
    return index_along_check(ct__op_info[a->op].name, in[0], in[1], nin > 2 ? in[2] : NULL,
                             (int)a->p.index.reduce, a->p.index.dim, &out[0]);
}

/* f: alpha (add) or the value (fill) */
static ct_tensor *index_along_impl(const char *op, ct_op opc, ct_tensor *x, int64_t dim, ct_tensor *index,
                                   ct_tensor *src, double f, int mode, ct_args *aout) {
    ct_meta m;
    if (index_along_check(op, x, index, src, mode, dim, &m)) return NULL;
    int64_t d = ct__idx_wrapped(dim, x->ndim);
    int cdt = mode == 1 ? arith_dtype(x->dtype) : (int)x->dtype;
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
/* index_add_ straight into x: x contiguous on the CPU, of a dtype the
 * kernel adds in (no float32 round trip for half types), and sharing no
 * storage with the index or the source.  Returns x, NULL with the error, or
 * x unchanged with *taken false when that does not hold (the caller then
 * writes into a copy and back).  Saves the two full copies of x that the
 * write-back costs: for an embedding's [V, C] gradient they were the whole
 * cost of a backward that touches B * T rows. */
static ct_tensor *index_add_direct(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha,
                                   bool *taken) {
    *taken = false;
    if (x->storage->device != CT_CPU || !ct__is_contiguous(x) || arith_dtype(x->dtype) != (int)x->dtype ||
        src->storage == x->storage || index->storage == x->storage)
        return x;
    *taken = true;
    ct_meta m;
    if (index_along_check("index_add_", x, index, src, 1, dim, &m)) return NULL;
    int64_t d = ct__idx_wrapped(dim, x->ndim);
    ct_tensor *ix = ct__idx_checked("index_add_", index, dsize(x, d), d, 0);
    if (!ix) return NULL;
    ct_args a = ct__args(CT_OP_index_add);
    a.p.index.dim = x->ndim ? d : 0;
    a.p.index.reduce = 1;
    a.p.index.alpha = alpha;
    ct_tensor *sc = ct__contig_as(src, x->dtype), *in[3] = {x, index, src};
    ct_status st = sc ? ct__inplace_begin(x, in, 3, "index_add_") : CT_ERR_OOM;
    if (!st) {
        ct_tensor *o[1] = {x}, *ins[2] = {ix, sc};
        st = ct__dispatch(CT_OP_index_add, o, 1, ins, 2, &a);
        if (st) ct__inplace_abort(x);
    }
    ct_release(ix);
    ct_release(sc);
    return st ? NULL : ct__finish_inplace(CT_OP_index_add, x, in, 3, &a);
}

ct_tensor *ct_index_add_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha) {
    CT_NULLCHECK(x); CT_NULLCHECK(index); CT_NULLCHECK(src);
    bool taken;
    ct_tensor *r = index_add_direct(x, dim, index, src, alpha, &taken);
    if (taken) return r;
    SCAT_IN(x, index, src);
    return ct__idx_writeback(CT_OP_index_add, x,
                             index_along_impl("index_add_", CT_OP_index_add, x, dim, index, src, alpha, 1, &a_),
                             in_, 3, &a_, "index_add_");
}
ct_tensor *ct_index_copy(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src) {
    CT_AUTOCAST_OP(CT_AC_index_copy, ct_index_copy(CT_AC_ARG(0), dim, CT_AC_ARG(1), CT_AC_ARG(2)), x, index, src);
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

/* masked_*'s checks (op: the name in the messages): the broadcast shape of
 * x and mask in *m, as x's dtype. */
static ct_status masked_check(const char *op, ct_tensor *x, ct_tensor *mask, ct_tensor *const *in, int nin,
                              ct_meta *m) {
    if (check_mask(op, mask)) return CT_IDX_FAILED();
    int64_t sh[CT_MAX_DIMS];
    int nd;
    if (ct__broadcast_shapes(op, x->sizes, x->ndim, mask->sizes, mask->ndim, sh, &nd)) return CT_IDX_FAILED();
    ct_device dev;
    if (ct__meta_device(op, in, nin, &dev)) return CT_IDX_FAILED();
    ct__meta_set(m, sh, nd, x->dtype, dev);
    return CT_OK;
}

/* in: x, mask; p.index.value */
CT_META_FN(ct__meta_masked_fill) {
    (void)nout; (void)a;
    return masked_check("masked_fill", in[0], in[1], in, nin, &out[0]);
}

ct_tensor *ct_masked_fill(ct_tensor *x, ct_tensor *mask, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    ct_args a = ct__args(CT_OP_masked_fill);
    a.p.index.value = value;
    ct_tensor *in[2] = {x, mask};
    return ct__op(CT_OP_masked_fill, in, 2, &a);
}

ct_tensor *ct_masked_fill_(ct_tensor *x, ct_tensor *mask, double value) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    ct_tensor *in[2] = {x, mask};
    ct_meta m;
    if (masked_check("masked_fill_", x, mask, in, 2, &m)) return NULL;
    if (!ct__meta_same_sizes(&m, x))
        return ct__error(CT_ERR_SHAPE, "masked_fill_: mask of shape %s cannot be broadcast to self of shape %s",
                         ct__tshape(mask), ct__tshape(x));
    ct_args a = ct__args(CT_OP_masked_fill);
    a.p.index.value = value;
    ct_tensor *o[1] = {x};
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

/* x and mask expanded to m's shape (their broadcast shape), both contiguous. */
static int bcast_pair(const ct_meta *m, ct_tensor *x, ct_tensor *mask, ct_tensor **xc, ct_tensor **mc) {
    *xc = *mc = NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *xe = ct_expand(x, m->sizes, m->ndim), *me = ct_expand(mask, m->sizes, m->ndim);
    if (xe && me) {
        *xc = ct__idx_copy_as(xe, x->dtype);
        *mc = ct__idx_copy_as(me, CT_BOOL);
    }
    ct_scope_end(s);
    if (!*xc || !*mc) { ct_release(*xc); ct_release(*mc); *xc = *mc = NULL; return -1; }
    return 0;
}

/* in: x, mask.  1-D, as many elements as the mask has true values. */
CT_META_FN(ct__meta_masked_select) {
    (void)nout; (void)a;
    if (masked_check("masked_select", in[0], in[1], in, nin, &out[0])) return CT_IDX_FAILED();
    out[0].ndim = 1;
    out[0].sizes[0] = -1;
    out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

ct_tensor *ct_masked_select(ct_tensor *x, ct_tensor *mask) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask);
    ct_tensor *in[2] = {x, mask};
    ct_meta m;
    if (ct__meta_run(CT_OP_masked_select, &m, 1, in, 2, NULL)) return NULL;
    /* the output size is the mask's count (a device's mask: counted on a host copy) */
    if (mask->storage->device == CT_META && !ct__need_data("masked_select", mask)) return NULL;
    /* m := the broadcast shape the mask is expanded to (checked above) */
    ct_tensor *xc, *mc;
    if (masked_check("masked_select", x, mask, in, 2, &m) || bcast_pair(&m, x, mask, &xc, &mc)) return NULL;
    ct_tensor *mh = ct__has_host_data(mc) ? ct_retain(mc) : ct__host_copy(mc, CT_BOOL);
    if (!mh) { ct_release(xc); ct_release(mc); return NULL; }
    int64_t n = ct_numel(mc), cnt = 0;
    const uint8_t *p = ct__ptr(mh);
    for (int64_t i = 0; i < n; i++) cnt += p[i] != 0;
    ct_release(mh);
    ct_tensor *out = ct__alloc(CT_SHAPE(cnt), x->dtype, x->storage->device);
    ct_tensor *o[1] = {out}, *ins[2] = {xc, mc};
    if (out && ct__dispatch(CT_OP_masked_select, o, 1, ins, 2, NULL)) { ct_release(out); out = NULL; }
    ct_release(xc);
    ct_release(mc);
    return ct__finish(CT_OP_masked_select, out, in, 2, NULL);
}

/* in: x, mask, source: x's values where the mask is false, source's in
 * order where true, in the broadcast shape of x and mask. */
CT_META_FN(ct__meta_masked_scatter) {
    (void)nout; (void)nin; (void)a;
    ct_tensor *x = in[0], *mask = in[1], *source = in[2];
    if (check_mask("masked_scatter", mask)) return CT_IDX_FAILED();
    if (source->dtype != x->dtype)
        return ct__error_status(CT_ERR_DTYPE, "masked_scatter: expected self and source to have same dtypes but "
                                "got %s and %s", ct_dtype_name(x->dtype), ct_dtype_name(source->dtype));
    return masked_check("masked_scatter", x, mask, in, 3, &out[0]);
}

ct_tensor *ct_masked_scatter(ct_tensor *x, ct_tensor *mask, ct_tensor *source) {
    CT_NULLCHECK(x); CT_NULLCHECK(mask); CT_NULLCHECK(source);
    ct_tensor *in[3] = {x, mask, source};
    ct_meta m;
    if (ct__meta_run(CT_OP_masked_scatter, &m, 1, in, 3, NULL)) return NULL;
    ct_tensor *xc, *mc;
    if (bcast_pair(&m, x, mask, &xc, &mc)) return NULL;
    ct_tensor *sc = ct__contig_as(source, x->dtype);
    ct_tensor *o[1] = {xc}, *ins[2] = {mc, sc};
    ct_status st = sc ? ct__dispatch(CT_OP_masked_scatter, o, 1, ins, 2, NULL) : CT_ERR_OOM;
    ct_release(mc);
    ct_release(sc);
    if (st) { ct_release(xc); return NULL; }
    return ct__finish(CT_OP_masked_scatter, xc, in, 3, NULL);
}

/* ---- advanced indexing ---------------------------------------------------- */
/* The per-index checks of x[indices] (dtypes, ranks, mask shapes), reading
 * no data; *nbool: how many boolean masks there are. */
static ct_status adv_check(const char *op, const ct_tensor *x, ct_tensor *const *indices, int n, int *nbool) {
    *nbool = 0;
    if (n > x->ndim) return ct__error_status(CT_ERR_INDEX, "%s: too many indices for tensor of dimension %d", op, x->ndim);
    if (n < 0 || (n > 0 && !indices)) return ct__error_status(CT_ERR_ARG, "%s: bad index list", op);
    int xd = 0;
    *nbool = 0;
    for (int k = 0; k < n; k++) {
        ct_tensor *t = indices[k];
        if (!t) { xd++; continue; }
        if (t->dtype == CT_BOOL || t->dtype == CT_U8) {
            if (t->ndim == 0) return ct__error_status(CT_ERR_INDEX, "%s: 0-dim boolean indices are not supported", op);
            if (xd + t->ndim > x->ndim)
                return ct__error_status(CT_ERR_INDEX, "%s: too many indices for tensor of dimension %d", op, x->ndim);
            for (int j = 0; j < t->ndim; j++)
                if (t->sizes[j] != x->sizes[xd + j])
                    return ct__error_status(CT_ERR_INDEX, "%s: the shape of the mask %s at index %d does not match "
                                            "the shape of the indexed tensor %s at index %d", op, ct__tshape(t), j,
                                            ct__tshape(x), xd + j);
            xd += t->ndim;
            (*nbool)++;
            continue;
        }
        if (!is_index_dtype(t->dtype))
            return ct__error_status(CT_ERR_DTYPE, "%s: tensors used as indices must be long, int, byte or bool "
                                    "tensors, got %s", op, ct_dtype_name(t->dtype));
        if (xd >= x->ndim) return ct__error_status(CT_ERR_INDEX, "%s: too many indices for tensor of dimension %d", op, x->ndim);
        xd++;
    }
    return CT_OK;
}

/* Where x[indices] puts things (torch's rule): the index tensors broadcast
 * to bsh; that block replaces the indexed dims where they are adjacent and
 * goes first otherwise; the sliced dims keep their order. */
typedef struct adv_layout {
    int64_t osh[CT_MAX_DIMS];   /* the result's shape */
    int ond;
    int64_t bsh[CT_MAX_DIMS];   /* the index tensors' broadcast shape */
    int bnd;
    int bpos;                   /* the result dim of bsh's first dim */
    int pos[CT_MAX_DIMS];       /* per sliced dim of x: its result dim */
} adv_layout;

/* ind[d] < 0: x's dim d is a full slice; else its index tensor has shape
 * ish[d][0..ind[d]). */
static ct_status adv_layout_of(const char *op, const ct_tensor *x, const int64_t *const *ish, const int *ind,
                               adv_layout *L) {
    int bnd = 0, first = -1, last = -1, nadv = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (ind[d] < 0) continue;
        if (first < 0) first = d;
        last = d;
        nadv++;
        int64_t tmp[CT_MAX_DIMS];
        memcpy(tmp, L->bsh, sizeof(int64_t) * (size_t)bnd);
        if (ct__broadcast_shapes(op, tmp, bnd, ish[d], ind[d], L->bsh, &bnd))
            return ct__error_status(CT_ERR_INDEX, "%s: shape mismatch: indexing tensors could not be broadcast "
                                    "together", op);
    }
    L->bnd = bnd;
    int adjacent = nadv == 0 || (last - first + 1 == nadv);
    int nd = 0;
    L->bpos = 0;
    if (nadv && !adjacent) nd = bnd;
    for (int d = 0; d < x->ndim; d++) {
        if (ind[d] >= 0) {
            if (adjacent && d == first) { L->bpos = nd; nd += bnd; }
            continue;
        }
        L->pos[d] = nd++;
    }
    if (nd > CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "%s: result has too many dims", op);
    for (int d = 0; d < x->ndim; d++)
        if (ind[d] < 0) L->osh[L->pos[d]] = x->sizes[d];
    for (int j = 0; j < bnd; j++) L->osh[L->bpos + j] = L->bsh[j];
    L->ond = nd;
    return CT_OK;
}

/* The checks and the result shape of x[indices] (op: the name in the
 * messages); dynamic with boolean masks (each selects as many elements as it
 * has true values: its dims become one of that length). */
static ct_status adv_meta(const char *op, const ct_tensor *x, ct_tensor *const *indices, int n, adv_layout *L,
                          bool *dynamic) {
    int nbool;
    if (adv_check(op, x, indices, n, &nbool)) return CT_IDX_FAILED();
    static const int64_t unknown[1] = {1}; /* a mask's count: any length broadcasts with 1 */
    const int64_t *ish[CT_MAX_DIMS];
    int ind[CT_MAX_DIMS], xd = 0;
    for (int d = 0; d < x->ndim; d++) ind[d] = -1;
    for (int k = 0; k < n; k++) {
        ct_tensor *t = indices[k];
        if (!t) { xd++; continue; }
        if (t->dtype == CT_BOOL || t->dtype == CT_U8) {
            for (int j = 0; j < t->ndim; j++, xd++) { ish[xd] = unknown; ind[xd] = 1; }
            continue;
        }
        ish[xd] = t->sizes;
        ind[xd++] = t->ndim;
    }
    *dynamic = nbool > 0;
    return adv_layout_of(op, x, ish, ind, L);
}

/* An int64 tensor of x[indices]'s shape (L, filled here) holding the element
 * offsets into x (relative to its first element); the indices were checked
 * by adv_meta.  Reads the index values (bounds, masks' true values). */
static ct_tensor *adv_offsets(const char *op, ct_tensor *x, ct_tensor *const *indices, int n, adv_layout *L) {
    ct_tensor *per[CT_MAX_DIMS] = {0}; /* per x dim: int64 index (owned) or NULL */
    ct_tensor *res = NULL;
    int xd = 0, ok = 1;
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < n && ok; k++) {
        ct_tensor *t = indices[k];
        if (!t) { xd++; continue; }
        if (t->dtype == CT_BOOL || t->dtype == CT_U8) {
            /* selects as many as it has true values: read on the host (a device's mask: a copy) */
            if (t->storage->device == CT_META && !ct__need_data(op, t)) { ok = 0; break; }
            ct_tensor *th = ct__has_host_data(t) ? NULL : ct__host_copy(t, t->dtype);
            if (!ct__has_host_data(t) && !th) { ok = 0; break; }
            ct_tensor *nz = ct_nonzero(th ? th : t);
            ct_release(th);
            if (!nz) { ok = 0; break; }
            for (int j = 0; j < t->ndim; j++) {
                ct_tensor *col = ct_select(nz, 1, j);
                per[xd + j] = col ? ct__idx_copy_as(col, CT_I64) : NULL;
                if (!per[xd + j]) ok = 0;
            }
            xd += t->ndim;
            continue;
        }
        per[xd] = ct__idx_checked(op, t, x->sizes[xd], xd, 1);
        if (!per[xd]) { ok = 0; break; }
        xd++;
    }
    const int64_t *ish[CT_MAX_DIMS];
    int ind[CT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        ish[d] = per[d] ? per[d]->sizes : NULL;
        ind[d] = per[d] ? per[d]->ndim : -1;
    }
    if (ok && adv_layout_of(op, x, ish, ind, L)) ok = 0;
    /* the offsets are computed on the host; on meta only their shape */
    ct_device rdev = x->storage->device;
    for (int d = 0; ok && d < x->ndim; d++)
        if (per[d] && rdev == CT_CPU) rdev = per[d]->storage->device;
    /* a device with data: computed on host copies of the indices, the offsets copied there */
    bool on_host = rdev != CT_META;
    if (ok) {
        const int64_t *osh = L->osh, *bsh = L->bsh;
        const int *pos = L->pos;
        int nd = L->ond, bnd = L->bnd, bpos = L->bpos;
        /* expanded contiguous copies of the index tensors */
        const int64_t *ip[CT_MAX_DIMS] = {0};
        ct_tensor *ex[CT_MAX_DIMS] = {0};
        for (int d = 0; ok && d < x->ndim; d++) {
            if (!per[d]) continue;
            ct_tensor *e = ct_expand(per[d], bsh, bnd);
            ex[d] = !e ? NULL : ct__has_host_data(e) || !on_host ? ct__idx_copy_as(e, CT_I64) : ct__host_copy(e, CT_I64);
            if (!ex[d]) ok = 0;
            else ip[d] = ct__ptr(ex[d]);
        }
        if (ok) res = ct__alloc(osh, nd, CT_I64, on_host ? CT_CPU : rdev);
        if (res && on_host) {
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
            if (rdev != CT_CPU) {
                ct_tensor *dres = ct__alloc(osh, nd, CT_I64, rdev);
                if (dres && total &&
                    ct__device(rdev)->copy_from_host(ct__ptr(dres), off, (size_t)total * 8, dres->storage->device_index)) {
                    ct_release(dres);
                    dres = NULL;
                }
                ct_release(res);
                res = dres;
                if (!res) ok = 0;
            }
        }
        for (int d = 0; d < x->ndim; d++) ct_release(ex[d]);
    }
    for (int d = 0; d < CT_MAX_DIMS; d++) ct_release(per[d]);
    ct_scope_end(s);
    return ok ? res : NULL;
}

/* in: x and then, for advanced indexing (take false), the num_indices index
 * tensors (NULL: a full slice); for take, the tensor of linear indices. */
CT_META_FN(ct__meta_index) {
    (void)nout;
    ct_tensor *x = in[0];
    if (a->p.index.take) {
        ct_tensor *index = in[1];
        if (!is_index_dtype(index->dtype))
            return ct__error_status(CT_ERR_DTYPE, "take: expected a long tensor for index, but got %s",
                                    ct_dtype_name(index->dtype));
        ct__meta_set(&out[0], index->sizes, index->ndim, x->dtype, x->storage->device);
        return CT_OK;
    }
    int n = (int)a->p.index.num_indices;
    adv_layout L;
    bool dyn;
    if (adv_meta("index", x, nin > 1 ? in + 1 : NULL, n > nin - 1 && n <= x->ndim ? -1 : n, &L, &dyn))
        return CT_IDX_FAILED();
    ct__meta_set(&out[0], L.osh, L.ond, x->dtype, x->storage->device);
    if (dyn) out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

ct_tensor *ct_index(ct_tensor *x, ct_tensor *const *indices, int n) {
    CT_NULLCHECK(x);
    /* recorded inputs: x and the index tensors (NULL: a full slice);
     * args: take = false (advanced indexing; take records true), num_indices = n */
    ct_tensor *in[1 + CT_MAX_DIMS] = {x};
    int nin = 1;
    if (n > 0 && n <= x->ndim && indices)
        for (int k = 0; k < n; k++) in[nin++] = indices[k];
    ct_args a = ct__args(CT_OP_index);
    a.p.index.take = false;
    a.p.index.num_indices = n;
    ct_meta m;
    if (ct__meta_run(CT_OP_index, &m, 1, in, nin, &a)) return NULL;
    adv_layout L;
    ct_tensor *off = adv_offsets("index", x, indices, n, &L);
    if (!off) return NULL;
    ct__meta_set(&m, L.osh, L.ond, x->dtype, x->storage->device); /* its sizes now known */
    ct_tensor *ins[2] = {x, off};
    ct_tensor *out = ct__idx_alloc_run(CT_OP_index, &m, ins, 2, NULL);
    ct_release(off);
    return ct__finish(CT_OP_index, out, in, nin, &a);
}

/* values must broadcast to the indexing result's shape */
static ct_status index_put_values_check(ct_tensor *values, const adv_layout *L) {
    int64_t bs[CT_MAX_DIMS];
    int bn;
    if (ct__broadcast_shapes("index_put_", L->osh, L->ond, values->sizes, values->ndim, bs, &bn) == CT_OK &&
        bn == L->ond && memcmp(bs, L->osh, sizeof(int64_t) * (size_t)bn) == 0)
        return CT_OK;
    char b[256];
    return ct__error_status(CT_ERR_SHAPE, "index_put_: shape mismatch: value tensor of shape %s cannot be "
                            "broadcast to indexing result of shape %s", ct__tshape(values),
                            ct__shape_str(L->osh, L->ond, b, sizeof b));
}

/* in: x, values and the num_indices index tensors (NULL: a full slice);
 * p.index.accumulate.  The result is x (written in place). */
CT_META_FN(ct__meta_index_put) {
    (void)nout;
    ct_tensor *x = in[0], *values = in[1];
    int n = (int)a->p.index.num_indices;
    if (n > x->ndim)
        return ct__error_status(CT_ERR_INDEX, "index_put_: too many indices for tensor of dimension %d", x->ndim);
    if (a->p.index.accumulate && arith_dtype(x->dtype) != (int)x->dtype)
        return ct__error_status(CT_ERR_DTYPE, "index_put_: accumulate is not supported for dtype %s",
                                ct_dtype_name(x->dtype));
    adv_layout L;
    bool dyn;
    if (adv_meta("index_put_", x, nin > 2 ? in + 2 : NULL, n > nin - 2 ? -1 : n, &L, &dyn)) return CT_IDX_FAILED();
    if (!dyn && index_put_values_check(values, &L)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], x->sizes, x->ndim, x->dtype, x->storage->device);
    return CT_OK;
}

ct_tensor *ct_index_put_(ct_tensor *x, ct_tensor *const *indices, int n, ct_tensor *values,
                         bool accumulate) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(values);
    /* recorded inputs: x, values and the index tensors (NULL: a full slice) */
    ct_tensor *in[2 + CT_MAX_DIMS] = {x, values};
    int nin = 2;
    if (n > 0 && n <= x->ndim && indices)
        for (int k = 0; k < n; k++) in[nin++] = indices[k];
    ct_args a = ct__args(CT_OP_index_put);
    a.p.index.accumulate = accumulate;
    a.p.index.num_indices = n;
    ct_meta m;
    if (ct__meta_run(CT_OP_index_put, &m, 1, in, nin, &a)) return NULL;
    adv_layout L;
    ct_tensor *off = adv_offsets("index_put_", x, indices, n, &L);
    if (!off) return NULL;
    ct_tensor *vc = NULL;
    if (index_put_values_check(values, &L) == CT_OK) { /* (checked by meta unless masks made it dynamic) */
        ct_scope s = ct_scope_begin();
        ct_tensor *e = ct_expand(values, L.osh, L.ond);
        vc = e ? ct__idx_copy_as(e, x->dtype) : NULL;
        ct_scope_end(s);
    }
    ct_status st = CT_ERR_SHAPE;
    if (vc && ct__inplace_begin(x, in, nin, "index_put_") == CT_OK) {
        ct_tensor *o[1] = {x}, *ins[2] = {off, vc};
        st = ct__dispatch(CT_OP_index_put, o, 1, ins, 2, &a);
        if (st) ct__inplace_abort(x);
    }
    ct_release(off);
    ct_release(vc);
    if (st) return NULL;
    return ct__finish_inplace(CT_OP_index_put, x, in, nin, &a);
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
    ct_tensor *in[2] = {x, index};
    ct_args a = ct__args(CT_OP_index);
    a.p.index.take = true; /* index holds linear indices into x */
    ct_meta mt;
    if (ct__meta_run(CT_OP_index, &mt, 1, in, 2, &a)) return NULL;
    int64_t N = ct_numel(x);
    ct_tensor *ix = ct__idx_copy_as(index, CT_I64);
    if (!ix) return NULL;
    /* a device's indices: turned into offsets on a host copy, which goes back (meta: no values) */
    ct_tensor *hx = NULL;
    if (!ct__has_host_data(ix) && ix->storage->device != CT_META && !(hx = ct__host_copy(ix, CT_I64))) {
        ct_release(ix);
        return NULL;
    }
    int64_t *p = ct__ptr(hx ? hx : ix), m = ct__has_host_data(ix) || hx ? ct_numel(ix) : 0;
    for (int64_t i = 0; i < m; i++) {
        int64_t v = p[i];
        if (v < -N || v >= N) {
            ct_release(ix);
            ct_release(hx);
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
    if (hx) {
        ct_tensor *d = ct__alloc(ix->sizes, ix->ndim, CT_I64, ix->storage->device);
        ct_release(ix);
        ix = d;
        if (ix && m && ct__device(ix->storage->device)->copy_from_host(ct__ptr(ix), p, (size_t)m * 8,
                                                                        ix->storage->device_index)) {
            ct_release(ix);
            ix = NULL;
        }
        ct_release(hx);
        if (!ix) return NULL;
    }
    ct_tensor *ins[2] = {x, ix};
    ct_tensor *out = ct__idx_alloc_run(CT_OP_index, &mt, ins, 2, NULL);
    ct_release(ix);
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
/* in: x.  [count, x's ndim] int64. */
CT_META_FN(ct__meta_nonzero) {
    (void)nout; (void)nin; (void)a;
    ct_tensor *x = in[0];
    int64_t sh[2] = {-1, x->ndim};
    ct__meta_set(&out[0], sh, 2, CT_I64, x->storage->device);
    out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

ct_tensor *ct_nonzero(ct_tensor *x) {
    CT_NULLCHECK(x);
    if (ct__values_on_device(x)) { /* the count from the values: on a host copy, the result moved back */
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(ct_to_dev(ct_nonzero(ct_to_dev(x, CT_DEV(CT_CPU, 0))), ct_tensor_dev(x)));
        ct_scope_end(s);
        return r;
    }
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(CT_OP_nonzero, &m, 1, in, 1, NULL)) return NULL;
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
    return ct__finish(CT_OP_nonzero, out, in, 1, NULL);
}

ct_tensor *ct_argwhere(ct_tensor *x) { return ct_nonzero(x); }
