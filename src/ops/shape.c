/* shape.c -- shape ops: tril/triu, diag, flip/rot90/roll, repeat/tile,
 * repeat_interleave, pad, one_hot, bucketize/searchsorted, bincount,
 * histc, meshgrid.  Kernels: src/backend/cpu/index.c. */
#include <math.h>

#include "index_impl.h"
#include "autocast.h"

/* ---- tril / triu ------------------------------------------------------------ */
/* in: x; p.index.diagonal */
CT_META_FN(ct__meta_tri) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    if (x->ndim < 2)
        return ct__error_status(CT_ERR_SHAPE, "%s: input tensor must have at least 2 dimensions, got %d",
                                ct__op_info[a->op].name, x->ndim);
    ct__meta_like(&out[0], x, x->dtype);
    return CT_OK;
}

static ct_tensor *tri(ct_op op, const char *name, ct_tensor *x, int64_t k) {
    CT_NULLCHECK_OP(name, x);
    ct_args a = ct__args(op);
    a.p.index.diagonal = k;
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(op, &m, 1, in, 1, &a)) return NULL;
    ct_tensor *xc = ct__contig_as(x, x->dtype);
    if (!xc) return NULL;
    ct_tensor *out = ct__idx_alloc_run(op, &m, &xc, 1, &a);
    ct_release(xc);
    return ct__finish(op, out, in, 1, &a);
}
ct_tensor *ct_tril(ct_tensor *x, int64_t diagonal) { return tri(CT_OP_tril, "tril", x, diagonal); }
ct_tensor *ct_triu(ct_tensor *x, int64_t diagonal) { return tri(CT_OP_triu, "triu", x, diagonal); }

/* ---- diag / diag_embed -------------------------------------------------------- */
ct_tensor *ct_diag(ct_tensor *x, int64_t diagonal) {
    CT_NULLCHECK(x);
    if (x->ndim != 1 && x->ndim != 2)
        return ct__error(CT_ERR_SHAPE, "diag: matrix or a vector expected, got a %d-D tensor", x->ndim);
    ct_scope s = ct_scope_begin();
    ct_tensor *r;
    if (x->ndim == 2) {
        r = ct_clone(ct_diagonal(x, diagonal, 0, 1));
    } else {
        int64_t n = x->sizes[0] + (diagonal < 0 ? -diagonal : diagonal);
        r = ct_zeros_on(CT_SHAPE(n, n), x->dtype, x->storage->device);
        if (r && !ct_copy_(ct_diagonal(r, diagonal, 0, 1), x)) r = NULL;
    }
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

ct_tensor *ct_diag_embed(ct_tensor *x, int64_t offset, int64_t dim1, int64_t dim2) {
    CT_NULLCHECK(x);
    if (x->ndim < 1) return ct__error(CT_ERR_SHAPE, "diag_embed: input must be at least 1-D");
    if (x->ndim + 1 > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "diag_embed: too many dims");
    int nd = x->ndim + 1;
    int64_t d1 = ct__wrap_dim("diag_embed", dim1, nd);
    if (d1 < 0) return NULL;
    int64_t d2 = ct__wrap_dim("diag_embed", dim2, nd);
    if (d2 < 0) return NULL;
    if (d1 == d2)
        return ct__error(CT_ERR_ARG, "diag_embed: diagonal dimensions cannot be identical %lld, %lld",
                         (long long)dim1, (long long)dim2);
    int64_t n = x->sizes[x->ndim - 1] + (offset < 0 ? -offset : offset);
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0, j = 0; i < nd; i++) sh[i] = (i == d1 || i == d2) ? n : x->sizes[j++];
    ct_scope s = ct_scope_begin();
    ct_tensor *r = ct_zeros_on(sh, nd, x->dtype, x->storage->device);
    if (r && !ct_copy_(ct_diagonal(r, offset, d1, d2), x)) r = NULL;
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ---- flip / roll / rot90 -------------------------------------------------------- */
/* in: x; p.index.flipped[] (flip) or shifts[] (roll, each in [0, size)):
 * one entry per dim of x. */
CT_META_FN(ct__meta_remap) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    bool roll = a->op == CT_OP_roll;
    int n = roll ? a->p.index.shifts_n : a->p.index.flipped_n;
    if (n != x->ndim)
        return ct__error_status(CT_ERR_ARG, "%s: expected one %s per dim of the %d-D input, got %d",
                                ct__op_info[a->op].name, roll ? "shift" : "flag", x->ndim, n);
    for (int d = 0; roll && d < n; d++)
        if (a->p.index.shifts[d] < 0 || (a->p.index.shifts[d] && a->p.index.shifts[d] >= x->sizes[d]))
            return ct__error_status(CT_ERR_ARG, "roll: shift %lld of dim %d is outside [0, %lld)",
                                    (long long)a->p.index.shifts[d], d, (long long)x->sizes[d]);
    ct__meta_like(&out[0], x, x->dtype);
    return CT_OK;
}

static ct_tensor *remap(ct_op op, ct_tensor *x, const ct_args *a) {
    ct_tensor *in[1] = {x};
    return ct__op(op, in, 1, a);
}

ct_tensor *ct_flip(ct_tensor *x, const int64_t *dims, int ndims) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_flip);
    int64_t *f = a.p.index.flipped;
    a.p.index.flipped_n = x->ndim;
    if (ndims > 0 && !dims) return ct__error(CT_ERR_NULL, "flip: dims is NULL");
    for (int i = 0; i < ndims; i++) {
        int64_t d = ct__wrap_dim("flip", dims[i], x->ndim);
        if (d < 0) return NULL;
        if (f[d]) return ct__error(CT_ERR_ARG, "flip: dim %lld appears multiple times in the list of dims",
                                   (long long)d);
        f[d] = 1;
    }
    if (x->ndim == 0) f[0] = 0;
    return remap(CT_OP_flip, x, &a);
}
ct_tensor *ct_fliplr(ct_tensor *x) {
    CT_NULLCHECK(x);
    if (x->ndim < 2) return ct__error(CT_ERR_SHAPE, "fliplr: input tensor must be >= 2-d");
    return ct_flip(x, (const int64_t[]){1}, 1);
}
ct_tensor *ct_flipud(ct_tensor *x) {
    CT_NULLCHECK(x);
    if (x->ndim < 1) return ct__error(CT_ERR_SHAPE, "flipud: input tensor must be >= 1-d");
    return ct_flip(x, (const int64_t[]){0}, 1);
}

ct_tensor *ct_roll(ct_tensor *x, const int64_t *shifts, int nshifts, const int64_t *dims, int ndims) {
    CT_NULLCHECK(x);
    if (nshifts <= 0 || !shifts) return ct__error(CT_ERR_ARG, "roll: `shifts` required");
    if (ndims == 0) {
        if (nshifts != 1) return ct__error(CT_ERR_ARG, "roll: shifts must be a single value when dims is empty");
        ct_scope s = ct_scope_begin();
        ct_tensor *fl = ct_reshape(x, CT_SHAPE(-1));
        ct_tensor *r = fl ? ct_roll(fl, shifts, 1, (const int64_t[]){0}, 1) : NULL;
        r = r ? ct_view(r, x->sizes, x->ndim) : NULL;
        r = ct_keep(r);
        ct_scope_end(s);
        return r;
    }
    if (nshifts != ndims)
        return ct__error(CT_ERR_ARG, "roll: shifts and dimensions must align. shifts: %d, dims: %d", nshifts, ndims);
    if (!dims) return ct__error(CT_ERR_NULL, "roll: dims is NULL");
    ct_args a = ct__args(CT_OP_roll);
    int64_t *sh = a.p.index.shifts;
    a.p.index.shifts_n = x->ndim;
    for (int i = 0; i < ndims; i++) {
        int64_t d = ct__wrap_dim("roll", dims[i], x->ndim);
        if (d < 0) return NULL;
        if (x->ndim == 0) continue;
        int64_t n = x->sizes[d];
        if (n == 0) continue;
        int64_t v = (sh[d] + shifts[i]) % n;
        if (v < 0) v += n;
        sh[d] = v;
    }
    return remap(CT_OP_roll, x, &a);
}

ct_tensor *ct_rot90(ct_tensor *x, int64_t k, const int64_t dims[2]) {
    CT_NULLCHECK(x);
    const int64_t def[2] = {0, 1};
    if (!dims) dims = def;
    if (x->ndim < 2) return ct__error(CT_ERR_SHAPE, "rot90: expected total dims >= 2, but got total dims = %d", x->ndim);
    int64_t d0 = ct__wrap_dim("rot90", dims[0], x->ndim);
    if (d0 < 0) return NULL;
    int64_t d1 = ct__wrap_dim("rot90", dims[1], x->ndim);
    if (d1 < 0) return NULL;
    if (d0 == d1) return ct__error(CT_ERR_ARG, "rot90: expected rotation dims to be different, but got dim0 = %lld and dim1 = %lld",
                                   (long long)dims[0], (long long)dims[1]);
    k = ((k % 4) + 4) % 4;
    ct_scope s = ct_scope_begin();
    ct_tensor *r;
    if (k == 1) r = ct_transpose(ct_flip(x, &d1, 1), d0, d1);
    else if (k == 2) r = ct_flip(x, (const int64_t[]){d0, d1}, 2);
    else if (k == 3) r = ct_transpose(ct_flip(x, &d0, 1), d0, d1);
    else r = ct_clone(x);
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ---- repeat / tile ------------------------------------------------------------------ */
/* in: x; p.shape.repeats (one per result dim, at least x's ndim) */
CT_META_FN(ct__meta_repeat) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    int n = a->p.shape.repeats_n;
    const int64_t *repeats = a->p.shape.repeats;
    if (n < x->ndim)
        return ct__error_status(CT_ERR_ARG, "repeat: number of dimensions of repeat dims (%d) can not be smaller "
                                "than number of dimensions of tensor (%d)", n, x->ndim);
    if (2 * n > CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "repeat: too many dims (%d)", n);
    int64_t fs[CT_MAX_DIMS];
    int lead = n - x->ndim;
    for (int i = 0; i < n; i++) {
        if (repeats[i] < 0)
            return ct__error_status(CT_ERR_ARG, "repeat: trying to create tensor with negative dimension %lld",
                                    (long long)repeats[i]);
        fs[i] = repeats[i] * (i < lead ? 1 : x->sizes[i - lead]);
    }
    ct__meta_set(&out[0], fs, n, x->dtype, x->storage->device);
    return CT_OK;
}

ct_tensor *ct_repeat(ct_tensor *x, const int64_t *repeats, int n) {
    CT_NULLCHECK(x);
    if (n >= x->ndim && n > 0 && !repeats) return ct__error(CT_ERR_NULL, "repeat: repeats is NULL");
    ct_args a = ct__args(CT_OP_repeat);
    a.p.shape.repeats_n = n;
    if (n > 0 && n <= CT_MAX_DIMS && repeats) memcpy(a.p.shape.repeats, repeats, sizeof(int64_t) * (size_t)n);
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(CT_OP_repeat, &m, 1, in, 1, &a)) return NULL;
    int64_t vs[CT_MAX_DIMS], es[CT_MAX_DIMS];
    int lead = n - x->ndim;
    for (int i = 0; i < n; i++) {
        int64_t sz = i < lead ? 1 : x->sizes[i - lead];
        vs[2 * i] = 1; vs[2 * i + 1] = sz;
        es[2 * i] = repeats[i]; es[2 * i + 1] = sz;
    }
    ct_scope s = ct_scope_begin();
    ct_tensor *v = ct_reshape(x, vs, 2 * n);
    ct_tensor *e = v ? ct_expand(v, es, 2 * n) : NULL;
    ct_tensor *r = e ? ct_reshape(ct_contiguous(e), m.sizes, m.ndim) : NULL;
    if (r && ct_shares_storage(r, x)) r = ct_clone(r);
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

ct_tensor *ct_tile(ct_tensor *x, const int64_t *reps, int n) {
    CT_NULLCHECK(x);
    if (n > 0 && !reps) return ct__error(CT_ERR_NULL, "tile: reps is NULL");
    int64_t r[CT_MAX_DIMS];
    int m = n > x->ndim ? n : x->ndim;
    if (m > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "tile: too many dims");
    for (int i = 0; i < m; i++) r[i] = i < m - n ? 1 : reps[i - (m - n)];
    return ct_repeat(x, r, m);
}

/* ---- repeat_interleave ------------------------------------------------------------------ */
/* in: x[, repeats (0/1-D int)]; p.shape.count (every element's repeats; -1
 * with the tensor: their sum is the length, dynamic), dim (CT_DIM_NONE:
 * the flattened x). */
CT_META_FN(ct__meta_repeat_interleave) {
    (void)nout;
    ct_tensor *x = in[0], *repeats = nin > 1 ? in[1] : NULL;
    if (repeats) {
        if (repeats->ndim > 1)
            return ct__error_status(CT_ERR_SHAPE, "repeat_interleave: repeats must be 0-dim or 1-dim tensor");
        if (repeats->dtype != CT_I64 && repeats->dtype != CT_I32)
            return ct__error_status(CT_ERR_DTYPE, "repeat_interleave: repeats has to be Long or Int tensor, got %s",
                                    ct_dtype_name(repeats->dtype));
    }
    int64_t dim = a->p.shape.dim, d = 0, sh[CT_MAX_DIMS];
    int nd;
    if (dim == CT_DIM_NONE) {
        sh[0] = ct_numel(x);
        nd = 1;
    } else {
        d = ct__wrap_dim("repeat_interleave", dim, x->ndim);
        if (d < 0) return CT_IDX_FAILED();
        nd = x->ndim ? x->ndim : 1;
        if (x->ndim) memcpy(sh, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
        else sh[0] = 1;
    }
    int64_t nrep = repeats ? ct_numel(repeats) : 1, n = sh[d];
    if (nrep != 1 && nrep != n)
        return ct__error_status(CT_ERR_SHAPE, "repeat_interleave: repeats must have the same size as input along "
                                "dim, but got repeats.size(0) = %lld and input.size(%lld) = %lld", (long long)nrep,
                                (long long)d, (long long)n);
    if (!repeats && a->p.shape.count < 0)
        return ct__error_status(CT_ERR_ARG, "repeat_interleave: repeats can not be negative");
    sh[d] = repeats ? -1 : n * a->p.shape.count;
    /* (the repeats may be a cpu tensor: they are read on the host) */
    ct__meta_set(&out[0], sh, nd, x->dtype, x->storage->device);
    if (repeats) out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

/* x's elements along dim repeated reps[i] times (nrep 1: all reps[0]
 * times); the shapes were checked by the meta function. */
static ct_tensor *rep_interleave(ct_tensor *x, const int64_t *reps, int64_t nrep, int64_t dim) {
    ct_scope s = ct_scope_begin();
    ct_tensor *src = x, *r = NULL;
    int64_t d = 0;
    if (dim == CT_DIM_NONE) src = ct_reshape(x, CT_SHAPE(-1));
    else d = ct__idx_wrapped(dim, x->ndim);
    if (src) {
        int64_t n = src->ndim ? src->sizes[d] : 1;
        int64_t total = 0, ok = 1;
        for (int64_t i = 0; i < n; i++) {
            int64_t c = reps[nrep == 1 ? 0 : i];
            if (c < 0) { ok = 0; break; }
            total += c;
        }
        if (!ok) {
            ct__error(CT_ERR_ARG, "repeat_interleave: repeats can not be negative");
        } else {
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
            if (idx) {
                int64_t k = 0;
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < reps[nrep == 1 ? 0 : i]; j++) idx[k++] = i;
                ct_tensor *it = ct_from_array(idx, CT_SHAPE(total), CT_I64);
                free(idx);
                if (it && src->storage->device != CT_CPU) it = ct_to_device(it, src->storage->device);
                r = ct_index_select(src->ndim ? src : ct_reshape(src, CT_SHAPE(1)), d, it);
            }
        }
    }
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

ct_tensor *ct_repeat_interleave(ct_tensor *x, int64_t repeats, int64_t dim) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_repeat_interleave);
    a.p.shape.count = repeats;
    a.p.shape.dim = dim;
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(CT_OP_repeat_interleave, &m, 1, in, 1, &a)) return NULL;
    return rep_interleave(x, &repeats, 1, dim);
}

ct_tensor *ct_repeat_interleave_tensor(ct_tensor *x, ct_tensor *repeats, int64_t dim) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(repeats);
    ct_args a = ct__args(CT_OP_repeat_interleave);
    a.p.shape.count = -1;
    a.p.shape.dim = dim;
    ct_tensor *in[2] = {x, repeats};
    ct_meta m;
    if (ct__meta_run(CT_OP_repeat_interleave, &m, 1, in, 2, &a)) return NULL;
    if (ct__values_on_device(repeats)) { /* the output size is their sum: repeats read on the host */
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(ct_repeat_interleave_tensor(x, ct_to_dev(repeats, CT_DEV(CT_CPU, 0)), dim));
        ct_scope_end(s);
        return r;
    }
    if (!ct__need_data("repeat_interleave", repeats)) return NULL; /* the output size is their sum */
    ct_tensor *rc = ct__idx_copy_as(repeats, CT_I64);
    if (!rc) return NULL;
    ct_tensor *r = rep_interleave(x, ct__ptr(rc), ct_numel(rc), dim);
    ct_release(rc);
    return r;
}

/* ---- pad --------------------------------------------------------------------------------- */
/* in: x; p.shape.pad ((left, right) per dim from the last), mode, value */
CT_META_FN(ct__meta_pad) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    int npad = a->p.shape.pad_n;
    const int64_t *pad = a->p.shape.pad;
    ct_pad_mode mode = (ct_pad_mode)a->p.shape.mode;
    if (npad % 2 != 0) return ct__error_status(CT_ERR_ARG, "pad: padding length must be divisible by 2");
    if (npad / 2 > x->ndim)
        return ct__error_status(CT_ERR_ARG, "pad: padding length too large (%d values for a %d-D input)", npad,
                                x->ndim);
    int np = npad / 2;
    if (mode != CT_PAD_CONSTANT) {
        if (!((np == 1 && (x->ndim == 2 || x->ndim == 3)) || (np == 2 && (x->ndim == 3 || x->ndim == 4)) ||
              (np == 3 && (x->ndim == 4 || x->ndim == 5))))
            return ct__error_status(CT_ERR_ARG, "pad: only 2D, 3D, 4D, 5D padding with non-constant padding are "
                                    "supported for now");
    }
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < np; i++) {
        int d = x->ndim - 1 - i;
        int64_t l = pad[2 * i], r = pad[2 * i + 1], n = x->sizes[d];
        if (mode == CT_PAD_REFLECT && (l >= n || r >= n)) {
            return ct__error_status(CT_ERR_ARG, "pad: Argument #4: Padding size should be less than the "
                                    "corresponding input dimension, but got: padding (%lld, %lld) at dimension %d "
                                    "of input %s", (long long)l, (long long)r, d, ct__tshape(x));
        }
        if (mode == CT_PAD_CIRCULAR && (l > n || r > n))
            return ct__error_status(CT_ERR_ARG, "pad: padding value causes wrapping around more than once "
                                    "(padding (%lld, %lld) at dimension %d of input %s)", (long long)l, (long long)r,
                                    d, ct__tshape(x));
        if (mode != CT_PAD_CONSTANT && (l < 0 || r < 0))
            return ct__error_status(CT_ERR_ARG, "pad: negative padding is only supported in constant mode");
        if (mode == CT_PAD_REPLICATE && n == 0 && (l || r))
            return ct__error_status(CT_ERR_ARG, "pad: cannot replicate-pad an empty dimension %d", d);
        /* INT64_MIN is excluded too: the copy negates a negative pad */
        if (l == INT64_MIN || r == INT64_MIN || !ct__add_i64(n, l, &sh[d]) || !ct__add_i64(sh[d], r, &sh[d]))
            return ct__error_status(CT_ERR_OVERFLOW, "pad: the padded size overflows int64: input size %lld plus "
                                    "padding (%lld, %lld) at dimension %d", (long long)n, (long long)l,
                                    (long long)r, d);
        if (sh[d] < 0)
            return ct__error_status(CT_ERR_ARG, "pad: the input size %lld, plus negative padding %lld and %lld "
                                    "resulted in a negative output size, which is invalid. Check dimension %d of "
                                    "your input.", (long long)n, (long long)l, (long long)r, d);
    }
    if (ct__shape_numel("pad", sh, x->ndim) < 0) return CT_IDX_FAILED(); /* e.g. [2^40, 2^40] */
    ct__meta_set(&out[0], sh, x->ndim, x->dtype, x->storage->device);
    return CT_OK;
}

ct_tensor *ct_pad(ct_tensor *x, const int64_t *pad, int npad, ct_pad_mode mode, double value) {
    /* F.pad runs reflection_pad{1,2}d / replication_pad{1,2,3}d, which torch's lists name */
    if ((mode == CT_PAD_REFLECT && (npad == 2 || npad == 4)) ||
        (mode == CT_PAD_REPLICATE && (npad == 2 || npad == 4 || npad == 6)))
        CT_AUTOCAST_OP(mode == CT_PAD_REFLECT ? (npad == 2 ? CT_AC_reflection_pad1d : CT_AC_reflection_pad2d)
                       : npad == 2 ? CT_AC_replication_pad1d
                       : npad == 4 ? CT_AC_replication_pad2d : CT_AC_replication_pad3d,
                       ct_pad(CT_AC_ARG(0), pad, npad, mode, value), x);
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_pad);
    a.p.shape.pad_n = npad;
    a.p.shape.mode = mode;
    a.p.shape.value = value;
    if (npad > 0 && npad % 2 == 0 && npad / 2 <= x->ndim) {
        if (!pad) return ct__error(CT_ERR_NULL, "pad: pad is NULL");
        memcpy(a.p.shape.pad, pad, sizeof(int64_t) * (size_t)npad);
    }
    ct_tensor *in[1] = {x};
    ct_meta mt;
    if (ct__meta_run(CT_OP_pad, &mt, 1, in, 1, &a)) return NULL;
    const int64_t *sh = mt.sizes;
    int np = npad / 2;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    if (mode == CT_PAD_CONSTANT) {
        r = ct_full_on(sh, x->ndim, value, x->dtype, x->storage->device);
        ct_tensor *dst = r, *src = x;
        for (int i = 0; i < np && dst && src; i++) {
            int d = x->ndim - 1 - i;
            int64_t l = pad[2 * i], rr = pad[2 * i + 1], n = x->sizes[d];
            int64_t s0 = l < 0 ? -l : 0, e0 = n - (rr < 0 ? -rr : 0);
            if (e0 < s0) e0 = s0;
            src = ct_narrow(src, d, s0, e0 - s0);
            dst = ct_narrow(dst, d, l > 0 ? l : 0, e0 - s0);
        }
        if (!dst || !src || !ct_copy_(dst, src)) r = NULL;
    } else {
        ct_tensor *cur = x;
        for (int i = 0; i < np && cur; i++) {
            int d = x->ndim - 1 - i;
            int64_t l = pad[2 * i], rr = pad[2 * i + 1], n = x->sizes[d], m = n + l + rr;
            size_t nb;
            if (!ct__array_bytes(m ? m : 1, sizeof(int64_t), &nb) || nb > PTRDIFF_MAX) {
                ct__error(CT_ERR_OVERFLOW, "pad: the %lld indices of dimension %d overflow the address space",
                          (long long)m, d);
                cur = NULL;
                break;
            }
            int64_t *idx = malloc(nb);
            if (!idx) {
                ct__error(CT_ERR_OOM, "pad: out of memory for the %lld indices of dimension %d", (long long)m, d);
                cur = NULL;
                break;
            }
            for (int64_t j = 0; j < m; j++) {
                int64_t p = j - l;
                if (mode == CT_PAD_REPLICATE) p = p < 0 ? 0 : p >= n ? n - 1 : p;
                else if (mode == CT_PAD_CIRCULAR) p = ((p % n) + n) % n;
                else { if (p < 0) p = -p; if (p >= n) p = 2 * (n - 1) - p; }
                idx[j] = p;
            }
            ct_tensor *it = ct_from_array(idx, CT_SHAPE(m), CT_I64);
            free(idx);
            if (it && x->storage->device != CT_CPU) it = ct_to_device(it, x->storage->device);
            cur = ct_index_select(cur, d, it);
        }
        r = cur == x ? ct_clone(x) : cur;
    }
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ---- one_hot -------------------------------------------------------------------------------- */
/* in: x (int64); p.index.num_classes (-1: max + 1, from the data: dynamic). */
CT_META_FN(ct__meta_one_hot) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    if (x->dtype != CT_I64)
        return ct__error_status(CT_ERR_DTYPE, "one_hot: one_hot is only applicable to index tensor (int64), got %s",
                                ct_dtype_name(x->dtype));
    if (x->ndim + 1 > CT_MAX_DIMS) return ct__error_status(CT_ERR_SHAPE, "one_hot: too many dims");
    int64_t nc = a->p.index.num_classes;
    ct__meta_set(&out[0], x->sizes, x->ndim, CT_I64, x->storage->device);
    out[0].ndim = x->ndim + 1;
    out[0].sizes[x->ndim] = nc < 0 ? -1 : nc;
    if (nc < 0) out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

ct_tensor *ct_one_hot(ct_tensor *x, int64_t num_classes) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_one_hot);
    a.p.index.num_classes = num_classes;
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(CT_OP_one_hot, &m, 1, in, 1, &a)) return NULL;
    if (ct__values_on_device(x)) { /* num_classes and the bounds from the values: on a host copy */
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(ct_to_dev(ct_one_hot(ct_to_dev(x, CT_DEV(CT_CPU, 0)), num_classes), ct_tensor_dev(x)));
        ct_scope_end(s);
        return r;
    }
    if (num_classes < 0 && !ct__need_data("one_hot", x)) return NULL; /* num_classes: max + 1 */
    ct_tensor *xc = ct__contig_as(x, CT_I64);
    if (!xc) return NULL;
    const int64_t *p = ct__ptr(xc);
    int64_t n = ct__has_host_data(xc) ? ct_numel(xc) : 0, mx = -1; /* meta: no values to check */
    for (int64_t i = 0; i < n; i++) {
        if (p[i] < 0) { ct_release(xc); return ct__error(CT_ERR_INDEX, "one_hot: Class values must be non-negative."); }
        if (p[i] > mx) mx = p[i];
    }
    if (num_classes < 0) {
        if (n == 0) { ct_release(xc); return ct__error(CT_ERR_ARG, "one_hot: Can not infer total number of classes from empty tensor."); }
        num_classes = mx + 1;
        a.p.index.num_classes = num_classes;
        m.sizes[x->ndim] = num_classes; /* the size meta left to the data */
        m.flags = 0;
    } else if (mx >= num_classes) {
        ct_release(xc);
        return ct__error(CT_ERR_INDEX, "one_hot: Class values must be smaller than num_classes.");
    }
    ct_tensor *out = ct__idx_alloc_run(CT_OP_one_hot, &m, &xc, 1, &a);
    ct_release(xc);
    return ct__finish(CT_OP_one_hot, out, in, 1, &a);
}

/* ---- bucketize / searchsorted ----------------------------------------------------------------- */
static ct_status bucket_dtypes(const char *op, const ct_tensor *values, const ct_tensor *bounds) {
    if (ct_dtype_is_complex(values->dtype) || ct_dtype_is_complex(bounds->dtype) ||
        values->dtype == CT_BOOL || bounds->dtype == CT_BOOL)
        return ct__error_status(CT_ERR_DTYPE, "%s: dtypes %s and %s are not supported", op,
                                ct_dtype_name(values->dtype), ct_dtype_name(bounds->dtype));
    return CT_OK;
}

/* searchsorted's N-D boundaries: their leading dims are the values'. */
static ct_status sorted_rows_check(const ct_tensor *sorted, const ct_tensor *values) {
    int ok = values->ndim == sorted->ndim;
    for (int i = 0; ok && i < sorted->ndim - 1; i++)
        if (values->sizes[i] != sorted->sizes[i]) ok = 0;
    if (!ok)
        return ct__error_status(CT_ERR_SHAPE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 "
                                "dimensions of boundaries tensor and input value tensor must match, but we got "
                                "boundaries tensor %s and input value tensor %s", ct__tshape(sorted),
                                ct__tshape(values));
    return CT_OK;
}

/* in: values, boundaries; p.index.right, boundaries_len, values_per_row (0:
 * 1-D boundaries, bucketize's; else searchsorted's N-D ones, one row per
 * values_per_row values).  int64 indices in the values' shape. */
CT_META_FN(ct__meta_bucketize) {
    (void)nout;
    ct_tensor *values = in[0], *bounds = in[1];
    const char *op = "bucketize";
    if (a->p.index.values_per_row == 0) {
        if (bounds->ndim != 1)
            return ct__error_status(CT_ERR_SHAPE, "bucketize: boundaries tensor must be 1 dimension, but got dim(%d)",
                                    bounds->ndim);
    } else {
        op = "searchsorted";
        if (bounds->ndim < 2)
            return ct__error_status(CT_ERR_SHAPE, "searchsorted: %d-D boundaries with %lld values per row",
                                    bounds->ndim, (long long)a->p.index.values_per_row);
        if (sorted_rows_check(bounds, values)) return CT_IDX_FAILED();
    }
    if (bucket_dtypes(op, values, bounds)) return CT_IDX_FAILED();
    ct_device dev;
    if (ct__meta_device(op, in, nin, &dev)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], values->sizes, values->ndim, CT_I64, dev);
    return CT_OK;
}

static ct_tensor *bucket_impl(const char *op, ct_tensor *values, ct_tensor *bounds, bool right, int64_t per) {
    ct_tensor *in[2] = {values, bounds};
    ct_meta m;
    /* (meta names its errors bucketize's when the boundaries are 1-D) */
    if (strcmp(op, "searchsorted") == 0 && bucket_dtypes(op, values, bounds)) return NULL;
    ct_args a = ct__args(CT_OP_bucketize);
    a.p.index.right = right;
    a.p.index.boundaries_len = bounds->ndim ? bounds->sizes[bounds->ndim - 1] : 1;
    a.p.index.values_per_row = per;
    if (ct__meta_run(CT_OP_bucketize, &m, 1, in, 2, &a)) return NULL;
    ct_tensor *vc = ct__contig_as(values, CT_F64);
    ct_tensor *bc = vc ? ct__contig_as(bounds, CT_F64) : NULL;
    ct_tensor *ins[2] = {vc, bc};
    ct_tensor *out = bc ? ct__idx_alloc_run(CT_OP_bucketize, &m, ins, 2, &a) : NULL;
    ct_release(vc);
    ct_release(bc);
    return ct__finish(CT_OP_bucketize, out, in, 2, &a);
}

ct_tensor *ct_bucketize(ct_tensor *x, ct_tensor *boundaries, bool right) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(boundaries);
    return bucket_impl("bucketize", x, boundaries, right, 0);
}

ct_tensor *ct_searchsorted(ct_tensor *sorted, ct_tensor *values, bool right) {
    CT_NULLCHECK(sorted);
    CT_NULLCHECK(values);
    if (sorted->ndim == 0) return ct__error(CT_ERR_SHAPE, "searchsorted: boundaries tensor should be 1 dimension or the first N-1 "
                                            "dimensions of boundaries tensor and input value tensor must match");
    if (sorted->ndim == 1) return bucket_impl("searchsorted", values, sorted, right, 0);
    if (sorted_rows_check(sorted, values)) return NULL;
    int64_t per = values->sizes[values->ndim - 1];
    if (per == 0) per = 1;
    return bucket_impl("searchsorted", values, sorted, right, per);
}

/* ---- bincount / histc ------------------------------------------------------------------------- */
/* in: x[, weights].  1-D of max(x) + 1 (at least minlength) counts: dynamic. */
CT_META_FN(ct__meta_bincount) {
    (void)nout; (void)a;
    ct_tensor *x = in[0], *weights = nin > 1 ? in[1] : NULL;
    if (x->ndim != 1 || !ct_dtype_is_integral(x->dtype, false))
        return ct__error_status(CT_ERR_SHAPE, "bincount: bincount only supports 1-d non-negative integral inputs "
                                "(got %s %s)", ct_dtype_name(x->dtype), ct__tshape(x));
    if (weights && (weights->ndim != 1 || weights->sizes[0] != x->sizes[0]))
        return ct__error_status(CT_ERR_SHAPE, "bincount: weights should be 1-d and have the same length as input "
                                "(%s vs %s)", ct__tshape(weights), ct__tshape(x));
    ct_dtype odt = !weights ? CT_I64 : weights->dtype == CT_F32 ? CT_F32 : CT_F64;
    int64_t n = -1;
    ct__meta_set(&out[0], &n, 1, odt, x->storage->device);
    out[0].flags = CT_META_DYNAMIC;
    return CT_OK;
}

ct_tensor *ct_bincount(ct_tensor *x, ct_tensor *weights, int64_t minlength) {
    CT_NULLCHECK(x);
    ct_tensor *in[2] = {x, weights};
    ct_meta m;
    if (ct__meta_run(CT_OP_bincount, &m, 1, in, weights ? 2 : 1, NULL)) return NULL;
    if (minlength < 0) return ct__error(CT_ERR_ARG, "bincount: minlength should be >= 0");
    if (ct__values_on_device(x)) { /* the output size is max + 1: on host copies, the result moved back */
        ct_dev cpu = CT_DEV(CT_CPU, 0);
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(ct_to_dev(ct_bincount(ct_to_dev(x, cpu), weights ? ct_to_dev(weights, cpu) : NULL, minlength),
                                         ct_tensor_dev(x)));
        ct_scope_end(s);
        return r;
    }
    if (!ct__need_data("bincount", x)) return NULL; /* the output size is max + 1 */
    ct_tensor *xc = ct__contig_as(x, CT_I64);
    if (!xc) return NULL;
    const int64_t *p = ct__ptr(xc);
    int64_t n = ct_numel(xc), mx = -1;
    for (int64_t i = 0; i < n; i++) {
        if (p[i] < 0) { ct_release(xc); return ct__error(CT_ERR_ARG, "bincount: input should contain only non-negative values"); }
        if (p[i] > mx) mx = p[i];
    }
    m.sizes[0] = mx + 1 > minlength ? mx + 1 : minlength; /* the size meta left to the data */
    m.flags = 0;
    ct_tensor *wc = weights ? ct__contig_as(weights, m.dtype) : NULL;
    ct_tensor *ins[2] = {xc, wc};
    ct_tensor *out = (!weights || wc) ? ct__idx_alloc_run(CT_OP_bincount, &m, ins, weights ? 2 : 1, NULL) : NULL;
    ct_release(xc);
    ct_release(wc);
    return ct__finish(CT_OP_bincount, out, in, weights ? 2 : 1, NULL);
}

static ct_status histc_range_check(double min, double max) {
    if (!isfinite(min) || !isfinite(max))
        return ct__error_status(CT_ERR_ARG, "histc: range of [%g, %g] is not finite", min, max);
    return CT_OK;
}

/* in: x (floating); p.index.bins, min, max (min == max: the data's range,
 * resolved before it is recorded).  bins counts in x's dtype. */
CT_META_FN(ct__meta_histc) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0];
    int64_t bins = a->p.index.bins;
    double min = a->p.index.min, max = a->p.index.max;
    if (!ct_dtype_is_floating(x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "histc: \"histogram_cpu\" not implemented for '%s'",
                                ct_dtype_name(x->dtype));
    if (bins <= 0) return ct__error_status(CT_ERR_ARG, "histc: bins must be > 0, but got %lld", (long long)bins);
    if (min > max) return ct__error_status(CT_ERR_ARG, "histc: max must be larger than min");
    if (min != max && histc_range_check(min, max)) return CT_IDX_FAILED();
    ct__meta_set(&out[0], &bins, 1, x->dtype, x->storage->device);
    return CT_OK;
}

ct_tensor *ct_histc(ct_tensor *x, int64_t bins, double min, double max) {
    CT_NULLCHECK(x);
    ct_args a = ct__args(CT_OP_histc);
    a.p.index.bins = bins;
    a.p.index.min = min;
    a.p.index.max = max;
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(CT_OP_histc, &m, 1, in, 1, &a)) return NULL;
    ct_dtype cdt = x->dtype == CT_F64 ? CT_F64 : CT_F32;
    ct_tensor *xc = ct__contig_as(x, cdt);
    if (!xc) return NULL;
    if (min == max) {
        /* meta: bins only, like torch; a device: the range from a host copy */
        if (!ct__has_host_data(xc) && xc->storage->device != CT_META) {
            ct_tensor *h = ct__host_copy(xc, cdt);
            ct_release(xc);
            if (!(xc = h)) return NULL;
        }
        int64_t n = ct__has_host_data(xc) ? ct_numel(xc) : 0;
        /* the range comes from the values: a compiled graph cannot replay a trace's [-1, 1] */
        if (!n && ct_numel(xc) > 0 && ct__need_data_hook) ct__need_data_hook("histc");
        if (n > 0) {
            double lo = INFINITY, hi = -INFINITY;
            for (int64_t i = 0; i < n; i++) {
                double v = ct__load_f64((char *)ct__ptr(xc) + i * (int64_t)ct_dtype_size(cdt), cdt);
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
            min = lo;
            max = hi;
        }
        if (min == max) { min -= 1; max += 1; }
        if (histc_range_check(min, max)) { ct_release(xc); return NULL; }
        a.p.index.min = min;
        a.p.index.max = max;
    }
    if (xc->storage->device != x->storage->device) { /* the host copy that gave the range: back */
        ct_tensor *d = ct__contig_as(x, cdt);
        ct_release(xc);
        if (!(xc = d)) return NULL;
    }
    ct_tensor *out = ct__idx_alloc_run(CT_OP_histc, &m, &xc, 1, &a);
    ct_release(xc);
    return ct__finish(CT_OP_histc, out, in, 1, &a);
}

/* ---- meshgrid ------------------------------------------------------------------------------------ */
ct_tensor *ct_meshgrid_ij(ct_tensor *const *ts, int n, ct_tensor **out) {
    if (n <= 0 || !ts || !out) return ct__error(CT_ERR_ARG, "meshgrid: expects a non-empty TensorList");
    for (int i = 0; i < n; i++) CT_NULLCHECK_AT("meshgrid", ts, i);
    if (n > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "meshgrid: too many tensors (%d)", n);
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (ts[i]->ndim > 1)
            return ct__error(CT_ERR_SHAPE, "meshgrid: Expected 0D or 1D tensor in the tensor list but got %d-D",
                             ts[i]->ndim);
        if (ts[i]->dtype != ts[0]->dtype)
            return ct__error(CT_ERR_DTYPE, "meshgrid: expects all tensors to have the same dtype");
        sh[i] = ct_numel(ts[i]);
    }
    ct_scope s = ct_scope_begin();
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int64_t vs[CT_MAX_DIMS];
        for (int j = 0; j < n; j++) vs[j] = j == i ? -1 : 1;
        ct_tensor *v = ct_view(ts[i], vs, n);
        out[i] = v ? ct_expand(v, sh, n) : NULL;
        if (!out[i]) ok = 0;
    }
    if (ok)
        for (int i = 0; i < n; i++) ct_keep(out[i]);
    ct_scope_end(s);
    if (!ok) {
        for (int i = 0; i < n; i++) out[i] = NULL;
        return NULL;
    }
    return out[0];
}
