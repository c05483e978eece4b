/* derivs_index.c -- derivatives of the copying, indexing and shape ops
 * (src/ops/index.c, src/ops/shape.c) and of the in-place random fills
 * (src/ops/random.c).  Written with public ops, so they are differentiable
 * themselves.  Formulas follow PyTorch's tools/autograd/derivatives.yaml. */
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define IN(k) ct__vjp_in(c, k)
#define OUT(k) ct__vjp_out(c, k)
#define GEO(k) ct__vjp_geom(c, k)
#define CHECK(t) do { if (!(t)) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_AUTOGRAD; } while (0)

/* zeros with t's shape and g's dtype (never requires grad) */
static ct_tensor *zeros_as(const ct_geom *t, const ct_tensor *g) {
    return g ? ct__zeros_geom(t, g->dtype) : NULL;
}

static int64_t geom_numel(const ct_geom *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->sizes[d];
    return n;
}

/* t (shape s <= shape of `like` in every dim) zero-padded at the end of
 * every dim to like's shape.  Used for scatter-type src gradients: only the
 * index-shaped corner of src is read by the op. */
static ct_tensor *pad_to(ct_tensor *t, const ct_geom *like) {
    if (!t) return NULL;
    if (t->ndim != like->ndim) return ct_reshape(t, like->sizes, like->ndim);
    int64_t p[2 * CT_MAX_DIMS];
    int any = 0, nd = t->ndim;
    for (int i = 0; i < nd; i++) {
        int d = nd - 1 - i;
        p[2 * i] = 0;
        p[2 * i + 1] = like->sizes[d] - t->sizes[d];
        if (p[2 * i + 1]) any = 1;
    }
    return any ? ct_pad(t, p, 2 * nd, CT_PAD_CONSTANT, 0.0) : t;
}

/* the leading corner of t with like's shape */
static ct_tensor *crop_to(ct_tensor *t, const ct_tensor *like) {
    if (!t || t->ndim != like->ndim) return t;
    for (int d = 0; d < t->ndim && t; d++)
        if (t->sizes[d] != like->sizes[d]) t = ct_narrow(t, d, 0, like->sizes[d]);
    return t;
}

/* ---- cat --------------------------------------------------------------------- */
/* each input gets its slice of the gradient (legacy empty 1-D inputs, which
 * cat skips, get an empty gradient) */
ct_status ct__vjp_cat(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t d = c->a->p.index.dim, off = 0;
    for (int k = 0; k < c->nin; k++) {
        const ct_geom *x = GEO(k);
        bool skipped = x->ndim == 1 && x->sizes[0] == 0 && g[0]->ndim != 1;
        if (skipped) {
            if (NEED(k)) gin[k] = ct__zeros_geom(x, x->dtype);
            continue;
        }
        int64_t len = x->sizes[d];
        if (NEED(k)) gin[k] = ct__grad_to(ct_narrow(g[0], d, off, len), x);
        off += len;
    }
    return CT_OK;
}

/* ---- index_select / gather ----------------------------------------------------- */
/* in: (x, index); a->p.index.dim */
ct_status ct__vjp_index_select(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    if (x->ndim == 0) { gin[0] = ct__grad_to(ct_sum(g[0], NULL, 0, false), x); return CT_OK; }
    int64_t dim = c->a->p.index.dim;
    /* a tied embedding: the rows go straight into the [V, C] gradient the
     * output projection left in the engine's buffer */
    ct_tensor *acc = g[0]->dtype == x->dtype ? ct__vjp_accum(c, 0) : NULL;
    if (acc) {
        CHECK(ct_index_add_(acc, dim, IN(1), g[0], 1.0));
        gin[0] = acc;
        return CT_OK;
    }
    /* no graph to build: zeros and the rows added in place, one pass over
     * the table instead of zeros, a copy and the add */
    if (!ct_is_grad_enabled()) {
        ct_tensor *z = zeros_as(x, g[0]);
        gin[0] = z ? ct_index_add_(z, dim, IN(1), g[0], 1.0) : NULL;
        return CT_OK;
    }
    gin[0] = ct_index_add(zeros_as(x, g[0]), dim, IN(1), g[0], 1.0);
    return CT_OK;
}

ct_status ct__vjp_gather(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_scatter_add(zeros_as(GEO(0), g[0]), c->a->p.index.dim, IN(1), g[0]);
    return CT_OK;
}

/* ---- scatter family -------------------------------------------------------------- */
/* in: (x, index[, src]); a->p.index: dim, reduce (0 set, 1 sum, 2 prod,
 * 3 mean, 4 amax, 5 amin), include_self */
ct_status ct__vjp_scatter(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t d = c->a->p.index.dim;
    if (NEED(0)) gin[0] = ct_scatter_value(g[0], d, IN(1), 0.0);
    if (c->nin > 2 && NEED(2)) gin[2] = pad_to(ct_gather(g[0], d, IN(1)), GEO(2));
    return CT_OK;
}

ct_status ct__vjp_scatter_add(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = g[0];
    if (NEED(2)) gin[2] = pad_to(ct_gather(g[0], c->a->p.index.dim, IN(1)), GEO(2));
    return CT_OK;
}

ct_status ct__vjp_scatter_reduce(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t d = c->a->p.index.dim;
    int mode = (int)c->a->p.index.reduce;
    bool incl = c->a->p.index.include_self;
    static const char *names[] = {"", "sum", "prod", "mean", "amax", "amin"};
    ct_tensor *grad = g[0], *self = IN(0), *index = IN(1), *src = IN(2), *result = OUT(0);
    CHECK(self);
    CHECK(index);
    CHECK(src);
    CHECK(result);
    ct_tensor *srcc = crop_to(src, index); /* the part of src the op reads */
    ct_tensor *gs = NULL, *gsrc = NULL;
    CHECK(srcc);
    if (mode == 1) { /* sum */
        gs = grad;
        gsrc = ct_gather(grad, d, index);
    } else if (mode == 2) { /* prod: exclusive products, with care for zeros */
        ct_tensor *mself = ct_masked_fill(self, ct_eq_scalar(self, 0.0), 1.0);
        ct_tensor *mself_res = ct_scatter_reduce(mself, d, index, src, names[mode], incl);
        gs = ct_div(ct_mul(grad, mself_res), mself);
        ct_tensor *szero = ct_eq_scalar(srcc, 0.0);
        ct_tensor *nz = ct_gather(ct_scatter_add(zeros_as(GEO(0), grad), d, index, ct_to_dtype(szero, grad->dtype)),
                                  d, index);
        ct_tensor *single = ct_logical_and(szero, ct_eq_scalar(nz, 1.0));
        CHECK(single);
        ct_tensor *msrc = ct_masked_fill(srcc, single, 1.0);
        /* src positions outside index's corner are not read: pad msrc back */
        ct_tensor *msrc_full = msrc;
        if (srcc != src) {
            msrc_full = ct_clone(src);
            CHECK(msrc_full);
            CHECK(ct_copy_(crop_to(msrc_full, index), msrc));
        }
        ct_tensor *msrc_res = ct_scatter_reduce(self, d, index, msrc_full, names[mode], incl);
        gsrc = ct_where(single, ct_gather(ct_mul(grad, msrc_res), d, index),
                        ct_div(ct_gather(ct_mul(grad, result), d, index), ct_masked_fill(srcc, szero, 1.0)));
    } else if (mode == 3) { /* mean */
        ct_tensor *n0 = incl ? ct_ones_like(grad) : ct_zeros_like(grad);
        ct_tensor *N = ct_scatter_add(n0, d, index, ct_ones_like(src));
        N = N ? ct_masked_fill(N, ct_eq_scalar(N, 0.0), 1.0) : NULL;
        CHECK(N);
        gs = ct_div(grad, N);
        gsrc = ct_div(ct_gather(grad, d, index), ct_gather(N, d, index));
    } else if (mode == 4 || mode == 5) { /* amax / amin: split evenly among ties */
        ct_tensor *value = ct_gather(result, d, index);
        ct_tensor *self_is = ct_eq(self, result), *src_is = ct_eq(srcc, value);
        CHECK(self_is);
        CHECK(src_is);
        ct_tensor *N = ct_scatter_add(ct_to_dtype(self_is, grad->dtype), d, index, ct_to_dtype(src_is, grad->dtype));
        ct_tensor *gdist = ct_div(grad, N);
        gs = ct_mul(ct_to_dtype(self_is, grad->dtype), gdist);
        gsrc = ct_mul(ct_to_dtype(src_is, grad->dtype), ct_gather(gdist, d, index));
    } else {
        return ct__error_status(CT_ERR_AUTOGRAD, "scatter_reduce backward: unknown reduce mode %d", mode);
    }
    if (!incl && gs) gs = ct_scatter_value(gs, d, index, 0.0);
    CHECK(gs);
    CHECK(gsrc);
    if (NEED(0)) gin[0] = gs;
    if (NEED(2)) gin[2] = pad_to(gsrc, GEO(2));
    return CT_OK;
}

/* ---- index_add / index_copy / index_fill ------------------------------------------ */
/* in: (x, index[, src]); a->p.index.dim, .alpha (index_add) */
ct_status ct__vjp_index_add(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = g[0];
    if (NEED(2)) {
        const ct_geom *s = GEO(2);
        ct_tensor *gg = g[0];
        if (gg->ndim == 0) gg = ct_reshape(gg, CT_SHAPE(1));
        ct_tensor *r = ct_index_select(gg, c->a->p.index.dim, IN(1));
        if (r && c->a->p.index.alpha != 1.0) r = ct_mul_scalar(r, c->a->p.index.alpha);
        gin[2] = r ? ct_reshape(r, s->sizes, s->ndim) : NULL;
    }
    return CT_OK;
}

ct_status ct__vjp_index_copy(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_index_fill(g[0], c->a->p.index.dim, IN(1), 0.0);
    if (NEED(2)) {
        const ct_geom *s = GEO(2);
        ct_tensor *gg = g[0];
        if (gg->ndim == 0) gg = ct_reshape(gg, CT_SHAPE(1));
        ct_tensor *r = ct_index_select(gg, c->a->p.index.dim, IN(1));
        gin[2] = r ? ct_reshape(r, s->sizes, s->ndim) : NULL;
    }
    return CT_OK;
}

ct_status ct__vjp_index_fill(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_index_fill(g[0], c->a->p.index.dim, IN(1), 0.0);
    return CT_OK;
}

/* ---- masked ops -------------------------------------------------------------------- */
/* in: (x, mask[, source]); the output has the broadcast shape of x and mask */
ct_status ct__vjp_masked_fill(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(ct_masked_fill(g[0], IN(1), 0.0), GEO(0));
    return CT_OK;
}

ct_status ct__vjp_masked_select(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(ct_masked_scatter(zeros_as(GEO(0), g[0]), IN(1), g[0]), GEO(0));
    return CT_OK;
}

ct_status ct__vjp_masked_scatter(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(ct_masked_fill(g[0], IN(1), 0.0), GEO(0));
    if (NEED(2)) {
        const ct_geom *s = GEO(2);
        ct_tensor *sel = ct_masked_select(g[0], IN(1));
        CHECK(sel);
        int64_t rest = geom_numel(s) - ct_numel(sel);
        if (rest > 0) {
            ct_tensor *parts[2] = {sel, ct_zeros_on(CT_SHAPE(rest), sel->dtype, sel->storage->device)};
            CHECK(parts[1]);
            sel = ct_cat(parts, 2, 0);
            CHECK(sel);
        }
        gin[2] = ct_reshape(sel, s->sizes, s->ndim);
    }
    return CT_OK;
}

/* ---- advanced indexing ------------------------------------------------------------- */
/* index: in (x, i0, ..., i{n-1}) with NULL for full slices, p.index.take
 * false, .num_indices = n; take: in (x, linear index), .take true */
ct_status ct__vjp_index(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    if (c->a->p.index.take) {
        ct_tensor *flat = ct_zeros_on(CT_SHAPE(geom_numel(x)), g[0]->dtype, g[0]->storage->device);
        ct_tensor *ix[1] = {ct_reshape(IN(1), CT_SHAPE(-1))};
        ct_tensor *gf = ct_reshape(g[0], CT_SHAPE(-1));
        CHECK(flat); CHECK(ix[0]); CHECK(gf);
        ct_tensor *r = ct_index_put(flat, ix, 1, gf, true);
        gin[0] = r ? ct_reshape(r, x->sizes, x->ndim) : NULL;
        return CT_OK;
    }
    int n = (int)c->a->p.index.num_indices;
    gin[0] = ct_index_put(zeros_as(x, g[0]), c->in + 1, n, g[0], true);
    return CT_OK;
}

/* index_put: in (x, values, i0, ..., i{n-1}); p.index.accumulate, .num_indices = n */
ct_status ct__vjp_index_put(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int n = (int)c->a->p.index.num_indices;
    ct_tensor *const *ix = c->in + 2;
    if (NEED(0)) {
        if (c->a->p.index.accumulate) {
            gin[0] = g[0];
        } else {
            /* 0-dim, but expanded by index_put: on g's device when that is one with data other than
             * the cpu (the cpu's and, tracing, meta's take a cpu constant) */
            ct_device gdv = g[0]->storage->device == CT_META ? CT_CPU : g[0]->storage->device;
            ct_tensor *z = ct_zeros_on(NULL, 0, g[0]->dtype, gdv);
            CHECK(z);
            gin[0] = ct_index_put(g[0], ix, n, z, false);
        }
    }
    if (NEED(1)) gin[1] = ct__grad_to(ct_index(g[0], ix, n), GEO(1));
    return CT_OK;
}

/* ---- shape ops ------------------------------------------------------------------------ */
ct_status ct__vjp_tril(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_tril(g[0], c->a->p.index.diagonal);
    return CT_OK;
}
ct_status ct__vjp_triu(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_triu(g[0], c->a->p.index.diagonal);
    return CT_OK;
}

/* flip: p.index.flipped[d] = 1 when dim d is flipped (flipped_n = x's ndim) */
ct_status ct__vjp_flip(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    int64_t dims[CT_MAX_DIMS];
    int n = 0;
    const ct_p_index *p = &c->a->p.index;
    for (int d = 0; d < p->flipped_n; d++)
        if (p->flipped[d]) dims[n++] = d;
    gin[0] = n ? ct_flip(g[0], dims, n) : g[0];
    return CT_OK;
}

/* roll: p.index.shifts[d] = shift of dim d, in [0, size) */
ct_status ct__vjp_roll(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    int64_t dims[CT_MAX_DIMS], sh[CT_MAX_DIMS];
    int n = 0;
    const ct_p_index *p = &c->a->p.index;
    for (int d = 0; d < p->shifts_n; d++)
        if (p->shifts[d]) { dims[n] = d; sh[n] = -p->shifts[d]; n++; }
    gin[0] = n ? ct_roll(g[0], sh, n, dims, n) : g[0];
    return CT_OK;
}

/* ---- random fills: the overwritten value gets no gradient ------------------------------- */
/* uniform_, normal_, exponential_, random_, bernoulli_ (in: the old value),
 * and bernoulli(p) (in: p; torch's gradient is zero) */

