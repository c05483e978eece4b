/* view.c -- ops whose result shares storage with the input (no copy).
 *
 * Each view op's meta function (ct__meta_<op>, the .meta column of ops.def)
 * checks the arguments and computes the view's geometry from the input and
 * the parameters as given (dims not yet wrapped, -1 in a view's shape); the
 * public function fills the parameters, runs the meta function, then stores
 * the normalized parameters (wrapped dims, resolved sizes) the derivatives
 * read, makes the view (ct__meta_new) and records it.  Pointer arguments
 * (NULL arrays) are the public function's to check. */
#include "ew.h"
#include "meta.h"

/* out := a view of in[0] (t): ndim, dtype, device, offset; the caller has
 * written out->sizes and out->strides. */
static inline void set_view(ct_meta *out, const ct_tensor *t, int ndim, int64_t offset) {
    out->ndim = ndim;
    out->dtype = t->dtype;
    out->device = t->storage->device;
    out->flags = CT_META_VIEW;
    out->offset = offset;
    out->base = 0;
}

/* Makes the view meta described (ct__meta_new's CT_META_VIEW case) and
 * records it. */
static ct_tensor *make_view(ct_op op, ct_tensor *t, const ct_meta *m, const ct_args *a) {
    ct_tensor *in[1] = {t};
    return ct__finish(op, ct__view_of(t, m->sizes, m->strides, m->ndim, m->offset), in, 1, a);
}

/* The meta functions' bodies: static and inlined into the public functions
 * (view, transpose, select are on every model's hot path: no indirect call,
 * no ct__meta_run), wrapped as ct__meta_<name> for the op table at the end. */
#define VIEW_META(name)                                                              \
    static inline __attribute__((always_inline)) ct_status meta_##name(              \
        ct_meta *out, int nout, ct_tensor *const *in, int nin, const ct_args *a)

/* Copies a shape argument into a list parameter (nothing when ndim is out
 * of range: the meta function reports that); CT_ERR_NULL for a NULL shape. */
static ct_status shape_arg(const char *op, const char *what, int64_t *dst, int *dst_n,
                           const int64_t *shape, int ndim) {
    *dst_n = ndim;
    if (ndim <= 0 || ndim > CT_MAX_DIMS) return CT_OK;
    if (!shape) return ct__error_status(CT_ERR_NULL, "%s: %s", op, what);
    memcpy(dst, shape, sizeof(int64_t) * (size_t)ndim);
    return CT_OK;
}

/* Infers one -1 and checks the element count. */
static ct_status infer_shape(const char *op, ct_tensor *t, const int64_t *shape, int ndim, int64_t *out) {
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_SHAPE, "%s: %d dims (at most %d)", op, ndim, CT_MAX_DIMS);
    if (ndim > 0 && !shape) return ct__error_status(CT_ERR_NULL, "%s: shape is NULL", op);
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) return ct__error_status(CT_ERR_SHAPE, "%s: only one dimension can be inferred", op);
            infer = i;
        } else if (shape[i] < 0) {
            return ct__error_status(CT_ERR_SHAPE, "%s: invalid shape dimension %lld", op, (long long)shape[i]);
        } else {
            if (shape[i] != 0 && prod > INT64_MAX / shape[i])
                return ct__error_status(CT_ERR_OVERFLOW, "%s: shape overflows", op);
            prod *= shape[i];
        }
        out[i] = shape[i];
    }
    int64_t numel = ct_numel(t);
    char b[256];
    if (infer >= 0) {
        if (prod == 0 || numel % prod != 0)
            return ct__error_status(CT_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                                    ct__shape_str(shape, ndim, b, sizeof b), (long long)numel);
        out[infer] = numel / prod;
    } else if (prod != numel) {
        return ct__error_status(CT_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                                ct__shape_str(shape, ndim, b, sizeof b), (long long)numel);
    }
    /* a zero dim hides the other dims from prod: [0, 2^62, 2^62] */
    if (ct__shape_numel(op, out, ndim) < 0) return ct_last_error_code();
    return CT_OK;
}

/* PyTorch's computeStride: strides for viewing t as `shape` without a copy,
 * or -1 when impossible. */
static int view_strides(const ct_tensor *t, const int64_t *shape, int ndim, int64_t *st) {
    int64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) numel *= t->sizes[i];
    if (numel == 0 || t->ndim == 0) {
        ct__contiguous_strides(shape, ndim, st);
        return 0;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = t->strides[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tensor_numel *= t->sizes[td];
        if (td == 0 || (t->sizes[td - 1] != 1 && t->strides[td - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                st[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return -1;
            if (td > 0) {
                chunk_base = t->strides[td - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1 ? 0 : -1;
}

VIEW_META(view_op) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int ndim = a->p.view.shape_n;
    if (infer_shape("view", t, a->p.view.shape, ndim, out->sizes)) return ct_last_error_code();
    if (view_strides(t, out->sizes, ndim, out->strides))
        return ct__error_status(CT_ERR_SHAPE, "view: size %s is not compatible with input tensor's size "
                                "%s and stride (at least one dimension spans across two contiguous "
                                "subspaces). Use reshape instead.",
                                ct__shape_str(out->sizes, ndim, (char[256]){0}, 256), ct__tshape(t));
    set_view(out, t, ndim, t->offset);
    return CT_OK;
}

ct_tensor *ct_view(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_view);
    if (shape_arg("view", "shape is NULL", a.p.view.shape, &a.p.view.shape_n, shape, ndim)) return NULL;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_view_op(&m, 1, in, 1, &a)) return NULL;
    memcpy(a.p.view.shape, m.sizes, sizeof(int64_t) * (size_t)ndim); /* -1 resolved */
    return make_view(CT_OP_view, t, &m, &a);
}

ct_tensor *ct_reshape(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    if (infer_shape("reshape", t, shape, ndim, sh)) return NULL;
    if (view_strides(t, sh, ndim, st) == 0) return ct_view(t, sh, ndim);
    /* a copy, viewed: the copy's own handle dies with this scope (outside
     * any scope it was the caller's to release, and it never got it) */
    ct_scope s = ct_scope_begin();
    ct_tensor *v = ct_keep(ct_view(ct_clone(t), sh, ndim));
    ct_scope_end(s);
    return v;
}

VIEW_META(permute) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int ndim = a->p.view.dims_n;
    if (ndim != t->ndim)
        return ct__error_status(CT_ERR_SHAPE, "permute: number of dims don't match (input has %d dims, "
                                "permutation has %d)", t->ndim, ndim);
    int seen[CT_MAX_DIMS] = {0};
    for (int i = 0; i < ndim; i++) {
        int64_t d = ct__wrap_dim("permute", a->p.view.dims[i], ndim);
        if (d < 0) return ct_last_error_code();
        if (seen[d]) return ct__error_status(CT_ERR_ARG, "permute: repeated dim %lld", (long long)a->p.view.dims[i]);
        seen[d] = 1;
        out->sizes[i] = t->sizes[d];
        out->strides[i] = t->strides[d];
    }
    set_view(out, t, ndim, t->offset);
    return CT_OK;
}

ct_tensor *ct_permute(ct_tensor *t, const int64_t *dims, int ndim) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_permute);
    a.p.view.dims_n = ndim;
    if (ndim == t->ndim && ndim > 0) { /* else meta reports the mismatch */
        if (!dims) return ct__error(CT_ERR_NULL, "permute: dims is NULL");
        for (int i = 0; i < ndim; i++) a.p.view.dims[i] = dims[i];
    }
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_permute(&m, 1, in, 1, &a)) return NULL;
    for (int i = 0; i < ndim; i++)
        if (a.p.view.dims[i] < 0) a.p.view.dims[i] += ndim;
    return make_view(CT_OP_permute, t, &m, &a);
}

ct_tensor *ct_transpose(ct_tensor *t, int64_t d0, int64_t d1) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) {
        if ((d0 == 0 || d0 == -1) && (d1 == 0 || d1 == -1)) return ct_permute(t, NULL, 0);
    }
    int64_t a0 = ct__wrap_dim("transpose", d0, t->ndim);
    if (a0 < 0) return NULL;
    int64_t a1 = ct__wrap_dim("transpose", d1, t->ndim);
    if (a1 < 0) return NULL;
    int64_t p[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) p[i] = i;
    p[a0] = a1;
    p[a1] = a0;
    return ct_permute(t, p, t->ndim);
}

ct_tensor *ct_t(ct_tensor *t) {
    CT_NULLCHECK(t);
    if (t->ndim > 2)
        return ct__error(CT_ERR_SHAPE, "t: expects a tensor with <= 2 dimensions, but self is %d-D", t->ndim);
    if (t->ndim < 2) return ct_transpose(t, 0, 0);
    return ct_transpose(t, 0, 1);
}

VIEW_META(expand) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int ndim = a->p.view.shape_n;
    const int64_t *shape = a->p.view.shape;
    if (ndim < t->ndim)
        return ct__error_status(CT_ERR_SHAPE, "expand: the number of sizes provided (%d) must be greater "
                                "or equal to the number of dimensions in the tensor (%d)", ndim, t->ndim);
    if (ndim > CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "expand: too many dims (%d)", ndim);
    int64_t *sh = out->sizes, *st = out->strides;
    for (int i = ndim - 1; i >= 0; i--) {
        int td = i - (ndim - t->ndim);
        int64_t want = shape[i];
        if (td < 0) {
            if (want < 0)
                return ct__error_status(CT_ERR_SHAPE, "expand: the expanded size of the tensor (%lld) isn't "
                                        "allowed in a leading, non-existing dimension %d", (long long)want, i);
            sh[i] = want;
            st[i] = 0;
        } else {
            int64_t have = t->sizes[td];
            if (want == -1) want = have;
            if (have == want) { sh[i] = have; st[i] = t->strides[td]; }
            else if (have == 1 && want >= 0) { sh[i] = want; st[i] = 0; }
            else
                return ct__error_status(CT_ERR_SHAPE, "expand: the expanded size of the tensor (%lld) must "
                                        "match the existing size (%lld) at non-singleton dimension %d.  "
                                        "Target sizes: %s.  Tensor sizes: %s", (long long)want, (long long)have,
                                        i, ct__shape_str(shape, ndim, (char[256]){0}, 256), ct__tshape(t));
        }
    }
    /* [2^32, 2^32] from [1, 1]: numel would wrap (to 0) */
    if (ct__shape_numel("expand", sh, ndim) < 0) return ct_last_error_code();
    set_view(out, t, ndim, t->offset);
    return CT_OK;
}

ct_tensor *ct_expand(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_expand);
    a.p.view.shape_n = ndim;
    if (ndim >= t->ndim && ndim <= CT_MAX_DIMS && ndim > 0) { /* else meta reports it */
        if (!shape) return ct__error(CT_ERR_NULL, "expand: argument 'shape' is NULL for %d dims", ndim);
        memcpy(a.p.view.shape, shape, sizeof(int64_t) * (size_t)ndim);
    }
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_expand(&m, 1, in, 1, &a)) return NULL;
    memcpy(a.p.view.shape, m.sizes, sizeof(int64_t) * (size_t)ndim); /* -1 resolved */
    return make_view(CT_OP_expand, t, &m, &a);
}

ct_tensor *ct_broadcast_to(ct_tensor *t, const int64_t *shape, int ndim) {
    return ct_expand(t, shape, ndim);
}

/* squeeze's dims: the dims it may remove (those of size 1 among them);
 * squeeze() lists every dim, squeeze(d) just d. */
VIEW_META(squeeze) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    bool drop[CT_MAX_DIMS] = {0};
    if (a->p.view.dims_n < 0 || a->p.view.dims_n > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_SHAPE, "squeeze: %d dims (at most %d)", a->p.view.dims_n, CT_MAX_DIMS);
    for (int k = 0; k < a->p.view.dims_n; k++) {
        int64_t d = ct__wrap_dim("squeeze", a->p.view.dims[k], t->ndim);
        if (d < 0) return ct_last_error_code();
        if (d < t->ndim) drop[d] = true;
    }
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->sizes[i] == 1 && drop[i]) continue;
        out->sizes[n] = t->sizes[i];
        out->strides[n] = t->strides[i];
        n++;
    }
    set_view(out, t, n, t->offset);
    return CT_OK;
}

static ct_tensor *squeeze_impl(ct_tensor *t, int64_t dim, int all) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_squeeze);
    if (all) {
        for (int i = 0; i < t->ndim; i++) a.p.view.dims[i] = i;
        a.p.view.dims_n = t->ndim;
    } else {
        a.p.view.dims[0] = dim;
        a.p.view.dims_n = 1;
    }
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_squeeze(&m, 1, in, 1, &a)) return NULL;
    if (!all) a.p.view.dims[0] = ct__wrap_dim("squeeze", dim, t->ndim);
    memcpy(a.p.view.self_sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    a.p.view.self_sizes_n = t->ndim;
    return make_view(CT_OP_squeeze, t, &m, &a);
}
ct_tensor *ct_squeeze(ct_tensor *t) { return squeeze_impl(t, 0, 1); }
ct_tensor *ct_squeeze_dim(ct_tensor *t, int64_t dim) { return squeeze_impl(t, dim, 0); }

VIEW_META(unsqueeze) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    if (t->ndim >= CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "unsqueeze: too many dims");
    int64_t d = ct__wrap_dim("unsqueeze", a->p.view.dim, t->ndim + 1);
    if (d < 0) return ct_last_error_code();
    int64_t *sh = out->sizes, *st = out->strides;
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            sh[i] = 1;
            st[i] = d < t->ndim ? t->sizes[d] * t->strides[d] : 1;
        } else {
            sh[i] = t->sizes[j];
            st[i] = t->strides[j];
            j++;
        }
    }
    set_view(out, t, t->ndim + 1, t->offset);
    return CT_OK;
}

ct_tensor *ct_unsqueeze(ct_tensor *t, int64_t dim) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_unsqueeze);
    a.p.view.dim = dim;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_unsqueeze(&m, 1, in, 1, &a)) return NULL;
    if (dim < 0) a.p.view.dim = dim + t->ndim + 1;
    return make_view(CT_OP_unsqueeze, t, &m, &a);
}

/* slice's [start, end) on a dim of size n: negatives from the end, clamped
 * to [0, n], end >= start. */
static inline void slice_bounds(int64_t n, int64_t *start, int64_t *end) {
    int64_t s = *start, e = *end;
    if (s < 0) s += n;
    if (e < 0) e += n;
    if (s < 0) s = 0;
    if (s > n) s = n;
    if (e < s) e = s;
    if (e > n) e = n;
    *start = s;
    *end = e;
}

VIEW_META(slice) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    if (t->ndim == 0) return ct__error_status(CT_ERR_INDEX, "slice: cannot be applied to a 0-dim tensor");
    int64_t d = ct__wrap_dim("slice", a->p.view.dim, t->ndim);
    if (d < 0) return ct_last_error_code();
    int64_t step = a->p.view.step;
    if (step <= 0) return ct__error_status(CT_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
    int64_t start = a->p.view.start, end = a->p.view.end;
    slice_bounds(t->sizes[d], &start, &end);
    memcpy(out->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(out->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    out->sizes[d] = (end - start + step - 1) / step;
    out->strides[d] = t->strides[d] * step;
    set_view(out, t, t->ndim, t->offset + start * t->strides[d]);
    return CT_OK;
}

ct_tensor *ct_slice(ct_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_slice);
    a.p.view.dim = dim; a.p.view.start = start; a.p.view.end = end; a.p.view.step = step;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_slice(&m, 1, in, 1, &a)) return NULL;
    if (dim < 0) a.p.view.dim = dim += t->ndim;
    slice_bounds(t->sizes[dim], &a.p.view.start, &a.p.view.end);
    return make_view(CT_OP_slice, t, &m, &a);
}

VIEW_META(select) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    if (t->ndim == 0) return ct__error_status(CT_ERR_INDEX, "select: cannot be applied to a 0-dim tensor");
    int64_t d = ct__wrap_dim("select", a->p.view.dim, t->ndim);
    if (d < 0) return ct_last_error_code();
    int64_t n = t->sizes[d], index = a->p.view.index;
    if (index < -n || index >= n)
        return ct__error_status(CT_ERR_INDEX, "select: index %lld out of range for tensor of size %s at "
                                "dimension %lld", (long long)index, ct__tshape(t), (long long)d);
    if (index < 0) index += n;
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d) continue;
        out->sizes[j] = t->sizes[i];
        out->strides[j] = t->strides[i];
        j++;
    }
    set_view(out, t, t->ndim - 1, t->offset + index * t->strides[d]);
    return CT_OK;
}

ct_tensor *ct_select(ct_tensor *t, int64_t dim, int64_t index) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_select);
    a.p.view.dim = dim; a.p.view.index = index;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_select(&m, 1, in, 1, &a)) return NULL;
    if (dim < 0) a.p.view.dim = dim += t->ndim;
    if (index < 0) a.p.view.index = index + t->sizes[dim];
    return make_view(CT_OP_select, t, &m, &a);
}

ct_tensor *ct_narrow(ct_tensor *t, int64_t dim, int64_t start, int64_t length) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) return ct__error(CT_ERR_INDEX, "narrow: cannot be applied to a 0-dim tensor");
    int64_t d = ct__wrap_dim("narrow", dim, t->ndim);
    if (d < 0) return NULL;
    int64_t n = t->sizes[d];
    if (start < -n || start > n)
        return ct__error(CT_ERR_INDEX, "narrow: start (%lld) out of range for dimension %lld of size %lld",
                         (long long)start, (long long)d, (long long)n);
    if (start < 0) start += n;
    if (length < 0 || start + length > n)
        return ct__error(CT_ERR_INDEX, "narrow: start (%lld) + length (%lld) exceeds dimension size (%lld)",
                         (long long)start, (long long)length, (long long)n);
    return ct_slice(t, d, start, start + length, 1);
}

VIEW_META(diagonal) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int64_t offset = a->p.view.offset, dim1 = a->p.view.dim1, dim2 = a->p.view.dim2;
    if (t->ndim < 2) return ct__error_status(CT_ERR_SHAPE, "diagonal: needs at least 2 dims, got %d", t->ndim);
    int64_t d1 = ct__wrap_dim("diagonal", dim1, t->ndim);
    if (d1 < 0) return ct_last_error_code();
    int64_t d2 = ct__wrap_dim("diagonal", dim2, t->ndim);
    if (d2 < 0) return ct_last_error_code();
    if (d1 == d2) return ct__error_status(CT_ERR_ARG, "diagonal: dimensions cannot be identical %lld, %lld",
                                          (long long)dim1, (long long)dim2);
    int64_t off = t->offset, len;
    if (offset >= 0) {
        len = t->sizes[d2] - offset;
        if (len > t->sizes[d1]) len = t->sizes[d1];
        if (len > 0) off += offset * t->strides[d2];
    } else {
        len = t->sizes[d1] + offset;
        if (len > t->sizes[d2]) len = t->sizes[d2];
        if (len > 0) off -= offset * t->strides[d1];
    }
    if (len < 0) len = 0;
    if (len == 0) off = t->offset;
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d1 || i == d2) continue;
        out->sizes[n] = t->sizes[i];
        out->strides[n] = t->strides[i];
        n++;
    }
    out->sizes[n] = len;
    out->strides[n] = t->strides[d1] + t->strides[d2];
    n++;
    set_view(out, t, n, off);
    return CT_OK;
}

ct_tensor *ct_diagonal(ct_tensor *t, int64_t offset, int64_t dim1, int64_t dim2) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_diagonal);
    a.p.view.offset = offset; a.p.view.dim1 = dim1; a.p.view.dim2 = dim2;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_diagonal(&m, 1, in, 1, &a)) return NULL;
    if (dim1 < 0) a.p.view.dim1 = dim1 + t->ndim;
    if (dim2 < 0) a.p.view.dim2 = dim2 + t->ndim;
    return make_view(CT_OP_diagonal, t, &m, &a);
}

VIEW_META(as_strided) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int ndim = a->p.view.shape_n;
    const int64_t *sizes = a->p.view.shape, *strides = a->p.view.stride;
    int64_t offset = a->p.view.storage_offset;
    if (ndim < 0 || ndim > CT_MAX_DIMS || a->p.view.stride_n != ndim)
        return ct__error_status(CT_ERR_SHAPE, "as_strided: bad ndim %d", ndim);
    if (offset < 0) return ct__error_status(CT_ERR_ARG, "as_strided: negative storage offset %lld", (long long)offset);
    if (ct__shape_numel("as_strided", sizes, ndim) < 0) return ct_last_error_code();
    /* bounds: the largest element must lie inside the storage */
    int64_t maxoff = offset, empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) return ct__error_status(CT_ERR_ARG, "as_strided: negative strides are not supported");
        if (sizes[i] == 0) empty = 1;
        else maxoff += (sizes[i] - 1) * strides[i];
    }
    size_t es = ct_dtype_size(t->dtype);
    if (!empty && (uint64_t)(maxoff + 1) * es > t->storage->nbytes)
        return ct__error_status(CT_ERR_INDEX, "as_strided: setStorage: sizes %s, strides and storage offset "
                                "%lld require %lld bytes, but the storage holds only %zu bytes",
                                ct__shape_str(sizes, ndim, (char[256]){0}, 256), (long long)offset,
                                (long long)((maxoff + 1) * (int64_t)es), t->storage->nbytes);
    memcpy(out->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    memcpy(out->strides, strides, sizeof(int64_t) * (size_t)ndim);
    set_view(out, t, ndim, offset);
    return CT_OK;
}

ct_tensor *ct_as_strided(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                         int64_t offset) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_as_strided);
    a.p.view.shape_n = a.p.view.stride_n = ndim;
    if (ndim > 0 && ndim <= CT_MAX_DIMS) { /* else meta reports it */
        if (!sizes || !strides) return ct__error(CT_ERR_NULL, "as_strided: sizes/strides NULL");
        memcpy(a.p.view.shape, sizes, sizeof(int64_t) * (size_t)ndim);
        memcpy(a.p.view.stride, strides, sizeof(int64_t) * (size_t)ndim);
    }
    a.p.view.storage_offset = offset;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_as_strided(&m, 1, in, 1, &a)) return NULL;
    return make_view(CT_OP_as_strided, t, &m, &a);
}

ct_tensor *ct_flatten(ct_tensor *t, int64_t start_dim, int64_t end_dim) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) return ct_reshape(t, CT_SHAPE(1));
    int64_t s = ct__wrap_dim("flatten", start_dim, t->ndim);
    if (s < 0) return NULL;
    int64_t e = ct__wrap_dim("flatten", end_dim, t->ndim);
    if (e < 0) return NULL;
    if (s > e) return ct__error(CT_ERR_ARG, "flatten: start_dim cannot come after end_dim");
    int64_t sh[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++) sh[n++] = t->sizes[i];
    int64_t p = 1;
    for (int64_t i = s; i <= e; i++) p *= t->sizes[i];
    sh[n++] = p;
    for (int i = (int)e + 1; i < t->ndim; i++) sh[n++] = t->sizes[i];
    return ct_reshape(t, sh, n);
}

ct_tensor *ct_unflatten(ct_tensor *t, int64_t dim, const int64_t *sizes, int n) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) return ct__error(CT_ERR_SHAPE, "unflatten: cannot unflatten a 0-dim tensor");
    int64_t d = ct__wrap_dim("unflatten", dim, t->ndim);
    if (d < 0) return NULL;
    if (n <= 0 || !sizes) return ct__error(CT_ERR_ARG, "unflatten: sizes must be non-empty");
    if (t->ndim - 1 + n > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "unflatten: too many dims");
    int64_t prod = 1;
    int infer = -1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] == -1) {
            if (infer >= 0) return ct__error(CT_ERR_ARG, "unflatten: only one dimension can be inferred");
            infer = i;
        } else prod *= sizes[i];
    }
    int64_t sh[CT_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < d; i++) sh[k++] = t->sizes[i];
    for (int i = 0; i < n; i++) sh[k++] = sizes[i];
    if (infer >= 0) {
        if (prod == 0 || t->sizes[d] % prod)
            return ct__error(CT_ERR_SHAPE, "unflatten: provided sizes don't multiply up to the size "
                             "of dim %lld (%lld) in the input tensor", (long long)d, (long long)t->sizes[d]);
        sh[d + infer] = t->sizes[d] / prod;
    } else if (prod != t->sizes[d]) {
        return ct__error(CT_ERR_SHAPE, "unflatten: provided sizes %s don't multiply up to the size of "
                         "dim %lld (%lld) in the input tensor", ct__shape_str(sizes, n, (char[256]){0}, 256),
                         (long long)d, (long long)t->sizes[d]);
    }
    for (int i = (int)d + 1; i < t->ndim; i++) sh[k++] = t->sizes[i];
    return ct_view(t, sh, k);
}

VIEW_META(unfold) {
    (void)nout; (void)nin;
    ct_tensor *t = in[0];
    int64_t size = a->p.view.size, step = a->p.view.step;
    int64_t d = ct__wrap_dim("unfold", a->p.view.dim, t->ndim);
    if (d < 0) return ct_last_error_code();
    int64_t n = t->ndim == 0 ? 1 : t->sizes[d];
    if (size < 0 || size > n)
        return ct__error_status(CT_ERR_ARG, "unfold: maximum size for tensor at dimension %lld is %lld but "
                                "size is %lld", (long long)d, (long long)n, (long long)size);
    if (step <= 0) return ct__error_status(CT_ERR_ARG, "unfold: step is %lld but must be > 0", (long long)step);
    if (t->ndim >= CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "unfold: too many dims");
    int64_t *sh = out->sizes, *st = out->strides;
    int nd = t->ndim;
    if (nd == 0) {
        sh[0] = size; st[0] = 1;
        nd = 1;
    } else {
        memcpy(sh, t->sizes, sizeof(int64_t) * (size_t)nd);
        memcpy(st, t->strides, sizeof(int64_t) * (size_t)nd);
        sh[d] = (n - size) / step + 1;
        st[d] = t->strides[d] * step;
        sh[nd] = size;
        st[nd] = t->strides[d];
        nd++;
    }
    set_view(out, t, nd, t->offset);
    return CT_OK;
}

ct_tensor *ct_unfold(ct_tensor *t, int64_t dim, int64_t size, int64_t step) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_unfold);
    a.p.view.dim = dim; a.p.view.size = size; a.p.view.step = step;
    ct_tensor *in[1] = {t};
    ct_meta m;
    if (meta_unfold(&m, 1, in, 1, &a)) return NULL;
    a.p.view.dim = ct__wrap_dim("unfold", dim, t->ndim);
    return make_view(CT_OP_unfold, t, &m, &a);
}

ct_tensor *ct_movedim(ct_tensor *t, int64_t source, int64_t destination) {
    CT_NULLCHECK(t);
    int64_t s = ct__wrap_dim("movedim", source, t->ndim);
    if (s < 0) return NULL;
    int64_t dd = ct__wrap_dim("movedim", destination, t->ndim);
    if (dd < 0) return NULL;
    if (t->ndim == 0) return ct_permute(t, NULL, 0);
    int64_t rest[CT_MAX_DIMS], perm[CT_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != s) rest[k++] = i;
    for (int i = 0, j = 0; i < t->ndim; i++) perm[i] = i == dd ? s : rest[j++];
    return ct_permute(t, perm, t->ndim);
}

int ct_split_sizes(ct_tensor *t, const int64_t *sizes, int n, int64_t dim, ct_tensor **out, int cap) {
    if (!t) return -1;
    if (t->ndim == 0) { ct__error(CT_ERR_SHAPE, "split: cannot split a 0-dim tensor"); return -1; }
    int64_t d = ct__wrap_dim("split", dim, t->ndim);
    if (d < 0) return -1;
    int64_t sum = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0) { ct__error(CT_ERR_ARG, "split: negative split size %lld", (long long)sizes[i]); return -1; }
        sum += sizes[i];
    }
    if (sum != t->sizes[d]) {
        ct__error(CT_ERR_SHAPE, "split_with_sizes expects split_sizes to sum exactly to %lld "
                  "(input tensor's size at dimension %lld), but got split_sizes summing to %lld",
                  (long long)t->sizes[d], (long long)d, (long long)sum);
        return -1;
    }
    int64_t start = 0;
    for (int i = 0; i < n && i < cap; i++) {
        out[i] = ct_narrow(t, d, start, sizes[i]);
        if (!out[i]) return -1;
        start += sizes[i];
    }
    return n;
}

int ct_split(ct_tensor *t, int64_t split_size, int64_t dim, ct_tensor **out, int cap) {
    if (!t) return -1;
    if (t->ndim == 0) { ct__error(CT_ERR_SHAPE, "split: cannot split a 0-dim tensor"); return -1; }
    int64_t d = ct__wrap_dim("split", dim, t->ndim);
    if (d < 0) return -1;
    int64_t n = t->sizes[d];
    if (split_size <= 0 && !(split_size == 0 && n == 0)) {
        ct__error(CT_ERR_ARG, "split: split_size must be positive, got %lld", (long long)split_size);
        return -1;
    }
    int64_t cnt = split_size == 0 ? 1 : (n + split_size - 1) / split_size;
    if (cnt == 0) cnt = 1;
    if (cnt > 1 << 20) { ct__error(CT_ERR_ARG, "split: too many pieces"); return -1; }
    for (int64_t i = 0; i < cnt && i < cap; i++) {
        int64_t st = i * split_size, len = n - st < split_size ? n - st : split_size;
        out[i] = ct_narrow(t, d, st, len);
        if (!out[i]) return -1;
    }
    return (int)cnt;
}

int ct_chunk(ct_tensor *t, int64_t chunks, int64_t dim, ct_tensor **out, int cap) {
    if (!t) return -1;
    if (chunks <= 0) { ct__error(CT_ERR_ARG, "chunk: number of chunks must be positive, got %lld", (long long)chunks); return -1; }
    if (t->ndim == 0) { ct__error(CT_ERR_SHAPE, "chunk: cannot chunk a 0-dim tensor"); return -1; }
    int64_t d = ct__wrap_dim("chunk", dim, t->ndim);
    if (d < 0) return -1;
    int64_t n = t->sizes[d];
    int64_t size = (n + chunks - 1) / chunks;
    if (size == 0 && n == 0) {
        /* torch: chunks pieces of size 0 */
        for (int64_t i = 0; i < chunks && i < cap; i++)
            if (!(out[i] = ct_narrow(t, d, 0, 0))) return -1;
        return (int)chunks;
    }
    return ct_split(t, size, d, out, cap);
}

int ct_unbind(ct_tensor *t, int64_t dim, ct_tensor **out, int cap) {
    if (!t) return -1;
    if (t->ndim == 0) { ct__error(CT_ERR_SHAPE, "unbind: dimension specified as 0 but tensor has no dimensions"); return -1; }
    int64_t d = ct__wrap_dim("unbind", dim, t->ndim);
    if (d < 0) return -1;
    int64_t n = t->sizes[d];
    for (int64_t i = 0; i < n && i < cap; i++)
        if (!(out[i] = ct_select(t, d, i))) return -1;
    return (int)n;
}

/* ---- the op table's meta functions ---- */
CT_META_FN(ct__meta_view_op) { return meta_view_op(out, nout, in, nin, a); }
CT_META_FN(ct__meta_permute) { return meta_permute(out, nout, in, nin, a); }
CT_META_FN(ct__meta_expand) { return meta_expand(out, nout, in, nin, a); }
CT_META_FN(ct__meta_squeeze) { return meta_squeeze(out, nout, in, nin, a); }
CT_META_FN(ct__meta_unsqueeze) { return meta_unsqueeze(out, nout, in, nin, a); }
CT_META_FN(ct__meta_slice) { return meta_slice(out, nout, in, nin, a); }
CT_META_FN(ct__meta_select) { return meta_select(out, nout, in, nin, a); }
CT_META_FN(ct__meta_diagonal) { return meta_diagonal(out, nout, in, nin, a); }
CT_META_FN(ct__meta_as_strided) { return meta_as_strided(out, nout, in, nin, a); }
CT_META_FN(ct__meta_unfold) { return meta_unfold(out, nout, in, nin, a); }
