/* view.c -- ops whose result shares storage with the input (no copy). */
#include "ew.h"

static ct_tensor *finish_view(ct_op op, ct_tensor *t, ct_tensor *v, const ct_args *a) {
    ct_tensor *in[1] = {t};
    return ct__finish(op, v, in, 1, a);
}

/* Infers one -1 and checks the element count. */
static int infer_shape(const char *op, ct_tensor *t, const int64_t *shape, int ndim, int64_t *out) {
    if (ndim < 0 || ndim > CT_MAX_DIMS) {
        ct__error(CT_ERR_SHAPE, "%s: %d dims (at most %d)", op, ndim, CT_MAX_DIMS);
        return -1;
    }
    if (ndim > 0 && !shape) { ct__error(CT_ERR_NULL, "%s: shape is NULL", op); return -1; }
    int infer = -1;
    int64_t prod = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1) {
            if (infer >= 0) { ct__error(CT_ERR_SHAPE, "%s: only one dimension can be inferred", op); return -1; }
            infer = i;
        } else if (shape[i] < 0) {
            ct__error(CT_ERR_SHAPE, "%s: invalid shape dimension %lld", op, (long long)shape[i]);
            return -1;
        } else {
            if (shape[i] != 0 && prod > INT64_MAX / shape[i]) {
                ct__error(CT_ERR_OVERFLOW, "%s: shape overflows", op);
                return -1;
            }
            prod *= shape[i];
        }
        out[i] = shape[i];
    }
    int64_t numel = ct_numel(t);
    char b[256];
    if (infer >= 0) {
        if (prod == 0 || numel % prod != 0) {
            ct__error(CT_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                      ct__shape_str(shape, ndim, b, sizeof b), (long long)numel);
            return -1;
        }
        out[infer] = numel / prod;
    } else if (prod != numel) {
        ct__error(CT_ERR_SHAPE, "%s: shape '%s' is invalid for input of size %lld", op,
                  ct__shape_str(shape, ndim, b, sizeof b), (long long)numel);
        return -1;
    }
    /* a zero dim hides the other dims from prod: [0, 2^62, 2^62] */
    if (ct__shape_numel(op, out, ndim) < 0) return -1;
    return 0;
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

ct_tensor *ct_view(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    if (infer_shape("view", t, shape, ndim, sh)) return NULL;
    if (view_strides(t, sh, ndim, st))
        return ct__error(CT_ERR_SHAPE, "view: size %s is not compatible with input tensor's size "
                         "%s and stride (at least one dimension spans across two contiguous "
                         "subspaces). Use reshape instead.", ct__shape_str(sh, ndim, (char[256]){0}, 256),
                         ct__tshape(t));
    ct_args a = ct__args(CT_OP_view);
    memcpy(a.p.view.shape, sh, sizeof(int64_t) * (size_t)ndim);
    a.p.view.shape_n = ndim;
    return finish_view(CT_OP_view, t, ct__view_of(t, sh, st, ndim, t->offset), &a);
}

ct_tensor *ct_reshape(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    if (infer_shape("reshape", t, shape, ndim, sh)) return NULL;
    if (view_strides(t, sh, ndim, st) == 0) return ct_view(t, sh, ndim);
    ct_tensor *c = ct_clone(t);
    if (!c) return NULL;
    ct_tensor *v = ct_view(c, sh, ndim);
    return v;
}

ct_tensor *ct_permute(ct_tensor *t, const int64_t *dims, int ndim) {
    CT_NULLCHECK(t);
    if (ndim != t->ndim)
        return ct__error(CT_ERR_SHAPE, "permute: number of dims don't match (input has %d dims, "
                         "permutation has %d)", t->ndim, ndim);
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int seen[CT_MAX_DIMS] = {0};
    ct_args a = ct__args(CT_OP_permute);
    for (int i = 0; i < ndim; i++) {
        int64_t d = ct__wrap_dim("permute", dims[i], ndim);
        if (d < 0) return NULL;
        if (seen[d]) return ct__error(CT_ERR_ARG, "permute: repeated dim %lld", (long long)dims[i]);
        seen[d] = 1;
        sh[i] = t->sizes[d];
        st[i] = t->strides[d];
        a.p.view.dims[i] = d;
    }
    a.p.view.dims_n = ndim;
    return finish_view(CT_OP_permute, t, ct__view_of(t, sh, st, ndim, t->offset), &a);
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

ct_tensor *ct_expand(ct_tensor *t, const int64_t *shape, int ndim) {
    CT_NULLCHECK(t);
    if (ndim < t->ndim)
        return ct__error(CT_ERR_SHAPE, "expand: the number of sizes provided (%d) must be greater "
                         "or equal to the number of dimensions in the tensor (%d)", ndim, t->ndim);
    if (ndim > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "expand: too many dims (%d)", ndim);
    if (ndim > 0 && !shape) return ct__error(CT_ERR_NULL, "expand: argument 'shape' is NULL for %d dims", ndim);
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    for (int i = ndim - 1; i >= 0; i--) {
        int td = i - (ndim - t->ndim);
        int64_t want = shape[i];
        if (td < 0) {
            if (want < 0)
                return ct__error(CT_ERR_SHAPE, "expand: the expanded size of the tensor (%lld) isn't "
                                 "allowed in a leading, non-existing dimension %d", (long long)want, i);
            sh[i] = want;
            st[i] = 0;
        } else {
            int64_t have = t->sizes[td];
            if (want == -1) want = have;
            if (have == want) { sh[i] = have; st[i] = t->strides[td]; }
            else if (have == 1 && want >= 0) { sh[i] = want; st[i] = 0; }
            else
                return ct__error(CT_ERR_SHAPE, "expand: the expanded size of the tensor (%lld) must "
                                 "match the existing size (%lld) at non-singleton dimension %d.  "
                                 "Target sizes: %s.  Tensor sizes: %s", (long long)want, (long long)have,
                                 i, ct__shape_str(shape, ndim, (char[256]){0}, 256), ct__tshape(t));
        }
    }
    /* [2^32, 2^32] from [1, 1]: numel would wrap (to 0) */
    if (ct__shape_numel("expand", sh, ndim) < 0) return NULL;
    ct_args a = ct__args(CT_OP_expand);
    memcpy(a.p.view.shape, sh, sizeof(int64_t) * (size_t)ndim);
    a.p.view.shape_n = ndim;
    return finish_view(CT_OP_expand, t, ct__view_of(t, sh, st, ndim, t->offset), &a);
}

ct_tensor *ct_broadcast_to(ct_tensor *t, const int64_t *shape, int ndim) {
    return ct_expand(t, shape, ndim);
}

static ct_tensor *squeeze_impl(ct_tensor *t, int64_t dim, int all) {
    CT_NULLCHECK(t);
    int64_t d = -1;
    if (!all) {
        d = ct__wrap_dim("squeeze", dim, t->ndim);
        if (d < 0) return NULL;
    }
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (t->sizes[i] == 1 && (all || i == d)) continue;
        sh[n] = t->sizes[i];
        st[n] = t->strides[i];
        n++;
    }
    ct_args a = ct__args(CT_OP_squeeze);
    memcpy(a.p.view.self_sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    a.p.view.self_sizes_n = t->ndim;
    return finish_view(CT_OP_squeeze, t, ct__view_of(t, sh, st, n, t->offset), &a);
}
ct_tensor *ct_squeeze(ct_tensor *t) { return squeeze_impl(t, 0, 1); }
ct_tensor *ct_squeeze_dim(ct_tensor *t, int64_t dim) { return squeeze_impl(t, dim, 0); }

ct_tensor *ct_unsqueeze(ct_tensor *t, int64_t dim) {
    CT_NULLCHECK(t);
    if (t->ndim >= CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "unsqueeze: too many dims");
    int64_t d = ct__wrap_dim("unsqueeze", dim, t->ndim + 1);
    if (d < 0) return NULL;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
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
    ct_args a = ct__args(CT_OP_unsqueeze);
    a.p.view.dim = d;
    return finish_view(CT_OP_unsqueeze, t, ct__view_of(t, sh, st, t->ndim + 1, t->offset), &a);
}

ct_tensor *ct_slice(ct_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) return ct__error(CT_ERR_INDEX, "slice: cannot be applied to a 0-dim tensor");
    int64_t d = ct__wrap_dim("slice", dim, t->ndim);
    if (d < 0) return NULL;
    if (step <= 0) return ct__error(CT_ERR_ARG, "slice: step must be positive, got %lld", (long long)step);
    int64_t n = t->sizes[d];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < start) end = start;
    if (end > n) end = n;
    int64_t len = (end - start + step - 1) / step;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    memcpy(sh, t->sizes, sizeof sh);
    memcpy(st, t->strides, sizeof st);
    sh[d] = len;
    st[d] = t->strides[d] * step;
    ct_args a = ct__args(CT_OP_slice);
    a.p.view.dim = d; a.p.view.start = start; a.p.view.end = end; a.p.view.step = step;
    return finish_view(CT_OP_slice, t,
                       ct__view_of(t, sh, st, t->ndim, t->offset + start * t->strides[d]), &a);
}

ct_tensor *ct_select(ct_tensor *t, int64_t dim, int64_t index) {
    CT_NULLCHECK(t);
    if (t->ndim == 0) return ct__error(CT_ERR_INDEX, "select: cannot be applied to a 0-dim tensor");
    int64_t d = ct__wrap_dim("select", dim, t->ndim);
    if (d < 0) return NULL;
    int64_t n = t->sizes[d];
    if (index < -n || index >= n)
        return ct__error(CT_ERR_INDEX, "select: index %lld out of range for tensor of size %s at "
                         "dimension %lld", (long long)index, ct__tshape(t), (long long)d);
    if (index < 0) index += n;
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++) {
        if (i == d) continue;
        sh[j] = t->sizes[i];
        st[j] = t->strides[i];
        j++;
    }
    ct_args a = ct__args(CT_OP_select);
    a.p.view.dim = d; a.p.view.index = index;
    return finish_view(CT_OP_select, t,
                       ct__view_of(t, sh, st, t->ndim - 1, t->offset + index * t->strides[d]), &a);
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

ct_tensor *ct_diagonal(ct_tensor *t, int64_t offset, int64_t dim1, int64_t dim2) {
    CT_NULLCHECK(t);
    if (t->ndim < 2) return ct__error(CT_ERR_SHAPE, "diagonal: needs at least 2 dims, got %d", t->ndim);
    int64_t d1 = ct__wrap_dim("diagonal", dim1, t->ndim);
    if (d1 < 0) return NULL;
    int64_t d2 = ct__wrap_dim("diagonal", dim2, t->ndim);
    if (d2 < 0) return NULL;
    if (d1 == d2) return ct__error(CT_ERR_ARG, "diagonal: dimensions cannot be identical %lld, %lld",
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
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        if (i == d1 || i == d2) continue;
        sh[n] = t->sizes[i];
        st[n] = t->strides[i];
        n++;
    }
    sh[n] = len;
    st[n] = t->strides[d1] + t->strides[d2];
    n++;
    ct_args a = ct__args(CT_OP_diagonal);
    a.p.view.offset = offset; a.p.view.dim1 = d1; a.p.view.dim2 = d2;
    return finish_view(CT_OP_diagonal, t, ct__view_of(t, sh, st, n, off), &a);
}

ct_tensor *ct_as_strided(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                         int64_t offset) {
    CT_NULLCHECK(t);
    if (ndim < 0 || ndim > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "as_strided: bad ndim %d", ndim);
    if (ndim > 0 && (!sizes || !strides)) return ct__error(CT_ERR_NULL, "as_strided: sizes/strides NULL");
    if (offset < 0) return ct__error(CT_ERR_ARG, "as_strided: negative storage offset %lld", (long long)offset);
    if (ct__shape_numel("as_strided", sizes, ndim) < 0) return NULL;
    /* bounds: the largest element must lie inside the storage */
    int64_t maxoff = offset, empty = 0;
    for (int i = 0; i < ndim; i++) {
        if (strides[i] < 0) return ct__error(CT_ERR_ARG, "as_strided: negative strides are not supported");
        if (sizes[i] == 0) empty = 1;
        else maxoff += (sizes[i] - 1) * strides[i];
    }
    size_t es = ct_dtype_size(t->dtype);
    if (!empty && (uint64_t)(maxoff + 1) * es > t->storage->nbytes)
        return ct__error(CT_ERR_INDEX, "as_strided: setStorage: sizes %s, strides and storage offset "
                         "%lld require %lld bytes, but the storage holds only %zu bytes",
                         ct__shape_str(sizes, ndim, (char[256]){0}, 256), (long long)offset,
                         (long long)((maxoff + 1) * (int64_t)es), t->storage->nbytes);
    ct_args a = ct__args(CT_OP_as_strided);
    memcpy(a.p.view.shape, sizes, sizeof(int64_t) * (size_t)ndim);
    a.p.view.shape_n = ndim;
    memcpy(a.p.view.stride, strides, sizeof(int64_t) * (size_t)ndim);
    a.p.view.stride_n = ndim;
    a.p.view.storage_offset = offset;
    return finish_view(CT_OP_as_strided, t, ct__view_of(t, sizes, strides, ndim, offset), &a);
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

ct_tensor *ct_unfold(ct_tensor *t, int64_t dim, int64_t size, int64_t step) {
    CT_NULLCHECK(t);
    int64_t d = ct__wrap_dim("unfold", dim, t->ndim);
    if (d < 0) return NULL;
    int64_t n = t->ndim == 0 ? 1 : t->sizes[d];
    if (size < 0 || size > n)
        return ct__error(CT_ERR_ARG, "unfold: maximum size for tensor at dimension %lld is %lld but "
                         "size is %lld", (long long)d, (long long)n, (long long)size);
    if (step <= 0) return ct__error(CT_ERR_ARG, "unfold: step is %lld but must be > 0", (long long)step);
    if (t->ndim >= CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "unfold: too many dims");
    int64_t sh[CT_MAX_DIMS], st[CT_MAX_DIMS];
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
    ct_args a = ct__args(CT_OP_unfold);
    a.p.view.dim = d; a.p.view.size = size; a.p.view.step = step;
    return finish_view(CT_OP_unfold, t, ct__view_of(t, sh, st, nd, t->offset), &a);
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
