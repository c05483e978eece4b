/* derivs_view.c -- derivatives of copies, fills, factories and views. */
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define GEO(k) ct__vjp_geom(c, k)

/* copy: clone, contiguous, to(dtype), copy_ (src broadcast into dst: summed
 * back), and to(device) -- torch's ToCopyBackward / CopyBackwards: the
 * gradient goes back to the input's device, index included (opencl:1 ->
 * opencl:0, through the host as ct_to_dev does), after the sum over
 * broadcast dims (fewer bytes to move), then to the input's dtype.  Written
 * with ct_to_dev, which records itself: double backward goes through. */
ct_status ct__vjp_copy(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    ct_tensor *r = ct__sum_to(g[0], x->sizes, x->ndim);
    if (r && (r->storage->device != x->device || r->storage->device_index != x->device_index) &&
        r->storage->device != CT_META && x->device != CT_META)
        r = ct_to_dev(r, CT_DEV(x->device, x->device_index));
    if (r && r->dtype != x->dtype) r = ct_to_dtype(r, x->dtype);
    gin[0] = r;
    return r ? CT_OK : ct_last_error_code();
}

/* fill_ / random fills: the overwritten old value gets no gradient */
ct_status ct__vjp_none(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    (void)c; (void)g; (void)gin;
    return CT_OK;
}

ct_status ct__vjp_reshape_back(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_reshape(g[0], GEO(0)->sizes, GEO(0)->ndim);
    return CT_OK;
}

ct_status ct__vjp_permute(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t inv[CT_MAX_DIMS];
    const ct_p_view *p = &c->a->p.view;
    for (int i = 0; i < p->dims_n; i++) inv[p->dims[i]] = i;
    if (NEED(0)) gin[0] = ct_permute(g[0], inv, p->dims_n);
    return CT_OK;
}

ct_status ct__vjp_expand(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__sum_to(g[0], GEO(0)->sizes, GEO(0)->ndim);
    return CT_OK;
}

/* zeros shaped like x, with the region view(zeros) <- g */
static ct_tensor *scatter_into_zeros(const ct_geom *x, ct_tensor *g, ct_tensor *(*view)(ct_tensor *, const ct_args *),
                                     const ct_args *a) {
    ct_tensor *z = ct__zeros_geom(x, g->dtype);
    ct_tensor *r = view(z, a);
    if (!r || !ct_copy_(r, g)) return NULL;
    return z;
}
static ct_tensor *v_slice(ct_tensor *z, const ct_args *a) {
    const ct_p_view *p = &a->p.view;
    return ct_slice(z, p->dim, p->start, p->end, p->step);
}
static ct_tensor *v_select(ct_tensor *z, const ct_args *a) { return ct_select(z, a->p.view.dim, a->p.view.index); }
static ct_tensor *v_diagonal(ct_tensor *z, const ct_args *a) {
    const ct_p_view *p = &a->p.view;
    return ct_diagonal(z, p->offset, p->dim1, p->dim2);
}

ct_status ct__vjp_slice(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    /* the pieces of a split (q|k|v): each adds its rows into the gradient the
     * engine holds for the whole, instead of a zeroed full-size tensor each
     * and the adds that sum them */
    ct_tensor *acc = g[0]->dtype == GEO(0)->dtype ? ct__vjp_accum(c, 0) : NULL;
    if (acc) {
        if (!ct_add_(v_slice(acc, c->a), g[0])) return ct_last_error_code();
        gin[0] = acc;
        return CT_OK;
    }
    gin[0] = scatter_into_zeros(GEO(0), g[0], v_slice, c->a);
    return CT_OK;
}
ct_status ct__vjp_select(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = scatter_into_zeros(GEO(0), g[0], v_select, c->a);
    return CT_OK;
}
ct_status ct__vjp_diagonal(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = scatter_into_zeros(GEO(0), g[0], v_diagonal, c->a);
    return CT_OK;
}

/* as_strided: zeros over the input's whole storage, the viewed region
 * (output geometry in the args) takes g, and the result is viewed with the
 * input's own geometry (what ct__as_strided_backward does for a base
 * tensor, here from the recorded geometry: the input is not saved, so an
 * in-place write to it later does not invalidate this backward) */
ct_status ct__vjp_as_strided(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    int64_t n = (int64_t)(x->storage_nbytes / ct_dtype_size(x->dtype));
    ct_tensor *flat = ct_zeros_on(CT_SHAPE(n), g[0]->dtype, g[0]->storage->device);
    const ct_p_view *p = &c->a->p.view;
    ct_tensor *region = ct_as_strided(flat, p->shape, p->stride, p->shape_n, p->storage_offset);
    if (!region || !ct_copy_(region, g[0])) return ct_last_error_code();
    gin[0] = ct_as_strided(flat, x->sizes, x->strides, x->ndim, x->offset);
    return gin[0] ? CT_OK : ct_last_error_code();
}

/* Tensor.unfold: windows may overlap, so each window's gradient is added */
ct_status ct__vjp_unfold(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    int64_t d = c->a->p.view.dim, size = c->a->p.view.size, step = c->a->p.view.step;
    ct_tensor *z = ct__zeros_geom(x, g[0]->dtype);
    if (!z) return ct_last_error_code();
    if (x->ndim == 0) {
        gin[0] = ct_reshape(ct_select(g[0], 0, 0), NULL, 0);
        return CT_OK;
    }
    int64_t nwin = g[0]->sizes[d];
    for (int64_t w = 0; w < nwin; w++) {
        ct_tensor *gw = ct_movedim(ct_select(g[0], d, w), -1, d);
        if (!ct_add_(ct_narrow(z, d, w * step, size), gw)) return ct_last_error_code();
    }
    gin[0] = z;
    return CT_OK;
}

