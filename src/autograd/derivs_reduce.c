/* derivs_reduce.c -- derivatives of reductions, scans, softmax and sorting.
 * Reductions record the reduced dims in a->p.reduce.reduced[d] (1 =
 * reduced) and keepdim in a->p.reduce.keepdim (src/ops/reduce.c).  Ops
 * along one dim record it in a->p.scan.dim (softmax, scans: along()) or
 * a->p.sort.dim (sorting: setup() in src/ops/sort_ops.c).
 * Formulas follow PyTorch's tools/autograd/derivatives.yaml and
 * FunctionsManual.cpp; all are written with public ops. */
#include <float.h>
#include <math.h>

#include "autograd_impl.h"
#include "../ops/reduce_impl.h"

#define NEED(k) (c->needs[k])
#define IN(k) ct__vjp_in(c, k)
#define OUT(k) ct__vjp_out(c, k)
#define GEO(k) ct__vjp_geom(c, k)
#define CHECK(t) do { if (!(t)) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; } while (0)

/* g with the reduced dims restored (size 1), ready to broadcast against x */
static ct_tensor *unreduce(ct_tensor *g, const ct_geom *x, const ct_args *a) {
    if (a->p.reduce.keepdim) return g;
    for (int d = 0; d < x->ndim && g; d++)
        if (a->p.reduce.reduced[d]) g = ct_unsqueeze(g, d);
    return g;
}

static int64_t reduced_count(const ct_geom *x, const ct_args *a) {
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (a->p.reduce.reduced[d]) n *= x->sizes[d];
    return n;
}

/* the reduced dims as a list (0 entries: all dims, e.g. a 0-d input) */
static int reduced_dims(const ct_geom *x, const ct_args *a, int64_t *dims) {
    int n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (a->p.reduce.reduced[d]) dims[n++] = d;
    return n;
}

/* 0-dim cpu: combines with tensors on any device */
static ct_tensor *zero_like_scalar(const ct_tensor *t) { return ct_full_on(NULL, 0, 0.0, t->dtype, CT_CPU); }

/* t with 0 where cond holds */
static ct_tensor *mask_zero(ct_tensor *cond, ct_tensor *t) {
    if (!cond || !t) return NULL;
    return ct_where(cond, zero_like_scalar(t), t);
}

ct_status ct__vjp_sum(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (NEED(0)) gin[0] = ct_to_dtype(ct_expand(unreduce(g[0], x, c->a), x->sizes, x->ndim), x->dtype);
    return CT_OK;
}

ct_status ct__vjp_mean(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (NEED(0)) {
        ct_tensor *e = ct_expand(unreduce(g[0], x, c->a), x->sizes, x->ndim);
        gin[0] = ct_to_dtype(ct_div_scalar(e, (double)reduced_count(x, c->a)), x->dtype);
    }
    return CT_OK;
}

/* nansum: the gradient skips the NaN entries */
ct_status ct__vjp_nansum(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    ct_tensor *e = ct_expand(unreduce(g[0], xg, c->a), x->sizes, x->ndim);
    gin[0] = ct__grad_for(mask_zero(ct_isnan(x), e), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* nanmean: g / (number of non-NaN entries), 0 at the NaN entries */
ct_status ct__vjp_nanmean(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    int64_t dims[CT_MAX_DIMS];
    int nd = reduced_dims(xg, c->a, dims);
    ct_tensor *nan = ct_isnan(x);
    ct_tensor *cnt = ct_sum(ct_to_dtype(ct_logical_not(nan), x->dtype), dims, nd, true);
    ct_tensor *e = ct_div(unreduce(g[0], xg, c->a), cnt);
    gin[0] = ct__grad_for(mask_zero(nan, ct_expand(e, x->sizes, x->ndim)), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* prod: g * prod / x without zeros; with zeros, the product of the others as
 * exclusive cumulative products from both sides (no division) */
ct_status ct__vjp_prod(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0), *out = OUT(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    ct_tensor *ge = unreduce(g[0], xg, c->a);
    ct_tensor *anyz = ct_any(ct_eq_scalar(x, 0.0), NULL, 0, false);
    CHECK(anyz);
    if (anyz->storage->device == CT_META || ct_item(anyz) == 0.0) { /* meta: either path has the shape */
        gin[0] = ct__grad_for(ct_div(ct_mul(ge, unreduce(out, xg, c->a)), x), x);
        CHECK(gin[0]);
        return CT_OK;
    }
    /* kept dims first, reduced dims last, flattened to [kept..., n] */
    int nd = x->ndim;
    int64_t perm[CT_MAX_DIMS], inv[CT_MAX_DIMS], flat[CT_MAX_DIMS], gshape[CT_MAX_DIMS];
    int np = 0, nk = 0;
    int64_t n = 1;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < nd; d++)
            if ((c->a->p.reduce.reduced[d] != 0) == pass) perm[np++] = d;
    for (int k = 0; k < nd; k++) inv[perm[k]] = k;
    for (int d = 0; d < nd; d++) {
        if (c->a->p.reduce.reduced[d]) n *= x->sizes[d];
        else { flat[nk] = x->sizes[d]; gshape[nk] = x->sizes[d]; nk++; }
    }
    flat[nk] = n;
    gshape[nk] = 1;
    ct_tensor *xt = nd ? ct_reshape(ct_permute(x, perm, nd), flat, nk + 1) : ct_reshape(x, flat, 1);
    ct_tensor *gt = nd ? ct_reshape(ct_permute(ge, perm, nd), gshape, nk + 1) : ct_reshape(ge, gshape, 1);
    CHECK(xt && gt);
    ct_tensor *ones = ct_ones_on(gshape, nk + 1, x->dtype, x->storage->device);
    int64_t last = -1;
    ct_tensor *left = ct_cumprod(ct_cat((ct_tensor *[]){ones, ct_narrow(xt, -1, 0, n - 1)}, 2, -1), -1);
    ct_tensor *xr = ct_flip(xt, &last, 1);
    ct_tensor *right = ct_flip(ct_cumprod(ct_cat((ct_tensor *[]){ones, ct_narrow(xr, -1, 0, n - 1)}, 2, -1), -1), &last, 1);
    ct_tensor *r = ct_mul(gt, ct_mul(left, right)); /* [kept..., n] */
    CHECK(r);
    if (nd) {
        int64_t psh[CT_MAX_DIMS];
        for (int k = 0; k < nd; k++) psh[k] = x->sizes[perm[k]];
        r = ct_permute(ct_reshape(r, psh, nd), inv, nd);
    } else {
        r = ct_reshape(r, NULL, 0);
    }
    gin[0] = ct__grad_for(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

/* amax/amin (and max()/min() of the whole tensor): the gradient is split
 * evenly among the entries equal to the result.  aminmax records amax with
 * two outputs (min, max). */
static ct_tensor *even_split(ct_tensor *g, ct_tensor *x, const ct_geom *xg, ct_tensor *out, const ct_args *a) {
    if (!x || !out) return NULL;
    int64_t dims[CT_MAX_DIMS];
    int nd = reduced_dims(xg, a, dims);
    ct_tensor *m = ct_to_dtype(ct_eq(x, unreduce(out, xg, a)), x->dtype);
    ct_tensor *cnt = ct_sum(m, dims, nd, true);
    return ct_mul(ct_div(unreduce(g, xg, a), cnt), m);
}

ct_status ct__vjp_amaxmin(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    ct_tensor *r = NULL;
    for (int j = 0; j < c->nout; j++) {
        if (!g[j]) continue;
        ct_tensor *t = even_split(g[j], x, xg, OUT(j), c->a);
        r = r ? ct_add(r, t) : t;
        CHECK(r);
    }
    if (!r) r = ct_zeros_like(x);
    gin[0] = ct__grad_for(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

/* logsumexp: g * exp(x - result) */
ct_status ct__vjp_logsumexp(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    ct_tensor *p = ct_exp(ct_sub(x, unreduce(OUT(0), xg, c->a)));
    gin[0] = ct__grad_for(ct_mul(unreduce(g[0], xg, c->a), p), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* var / std (a->p.reduce.correction; take_sqrt for std); var_mean and
 * std_mean record the same op with the mean as a second output */
ct_status ct__vjp_var_std(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    int64_t dims[CT_MAX_DIMS];
    int nd = reduced_dims(xg, c->a, dims);
    double N = (double)reduced_count(xg, c->a);
    ct_tensor *r = NULL;
    if (g[0]) {
        ct_tensor *xc = ct_sub(x, ct_mean(x, dims, nd, true));
        ct_tensor *ge = unreduce(g[0], xg, c->a);
        if (c->a->p.reduce.take_sqrt) { /* std: var's gradient with g / (2 std), 0 where std == 0 */
            ct_tensor *oe = unreduce(OUT(0), xg, c->a);
            ge = mask_zero(ct_eq_scalar(oe, 0.0), ct_div(ge, oe));
            r = ct_mul(ge, ct_div_scalar(xc, N - c->a->p.reduce.correction));
        } else {
            r = ct_mul(ge, ct_mul_scalar(xc, 2.0 / (N - c->a->p.reduce.correction)));
        }
        CHECK(r);
    }
    if (c->nout > 1 && g[1]) {
        ct_tensor *t = ct_div_scalar(ct_expand(unreduce(g[1], xg, c->a), x->sizes, x->ndim), N);
        r = r ? ct_add(r, t) : t;
        CHECK(r);
    }
    if (!r) r = ct_zeros_like(x);
    gin[0] = ct__grad_for(ct_expand(r, x->sizes, x->ndim), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* norm (a->p.reduce.p), as torch's norm_backward */
ct_status ct__vjp_norm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    const ct_geom *xg = GEO(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    double p = c->a->p.reduce.p;
    ct_tensor *ge = unreduce(g[0], xg, c->a), *ne = unreduce(OUT(0), xg, c->a), *r;
    if (p == 0.0) {
        r = ct_zeros_like(x);
    } else if (p == 1.0) {
        r = ct_mul(ct_sign(x), ge);
    } else if (p == 2.0) {
        r = ct_mul(ge, mask_zero(ct_eq_scalar(ne, 0.0), ct_div(x, ne)));
    } else if (isinf(p)) {
        int64_t dims[CT_MAX_DIMS];
        int nd = reduced_dims(xg, c->a, dims);
        ct_tensor *is_eq = ct_to_dtype(ct_logical_or(ct_eq(ct_abs(x), ne),
                                                     ct_logical_and(ct_isnan(x), ct_isnan(ne))),
                                       x->dtype);
        ct_tensor *cnt = ct_sum(is_eq, dims, nd, true);
        r = ct_mul(ct_mul(ct_sign(x), is_eq), ct_div(ge, cnt));
    } else if (p < 1.0) {
        ct_tensor *ax = mask_zero(ct_eq_scalar(x, 0.0), ct_pow_scalar(ct_abs(x), p - 1.0));
        r = ct_mul(ct_mul(ct_mul(ct_sign(x), ax), ge), ct_pow_scalar(ne, 1.0 - p));
    } else {
        ct_tensor *xs = p < 2.0 ? ct_mul(ct_sign(x), ct_pow_scalar(ct_abs(x), p - 1.0))
                                : ct_mul(x, ct_pow_scalar(ct_abs(x), p - 2.0));
        ct_tensor *sv = mask_zero(ct_eq_scalar(ne, 0.0), ct_div(ge, ct_pow_scalar(ne, p - 1.0)));
        r = ct_mul(xs, sv);
    }
    gin[0] = ct__grad_for(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

/* ---- ops that select entries: route the gradient with the indices ------ */
/* gradient g of values picked from x along dim d at idx (same shape as g) */
static ct_tensor *route(ct_tensor *g, ct_tensor *idx, const ct_geom *x, int64_t d) {
    if (!g || !idx) return NULL;
    if (x->ndim == 0) return g;
    return ct_scatter_add(ct__zeros_geom(x, x->dtype), d, idx, ct_to_dtype(g, x->dtype));
}

/* max_dim / min_dim: values output 0, indices output 1 */
ct_status ct__vjp_maxmin_dim(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (!NEED(0)) return CT_OK;
    if (!g[0]) { gin[0] = ct__zeros_geom(x, x->dtype); CHECK(gin[0]); return CT_OK; }
    int64_t d = 0;
    for (int k = 0; k < x->ndim; k++)
        if (c->a->p.reduce.reduced[k]) d = k;
    ct_tensor *r = route(unreduce(g[0], x, c->a), unreduce(OUT(1), x, c->a), x, d);
    gin[0] = ct__grad_to(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

/* sort / topk (same rank as x) and kthvalue / median_dim / mode (dim
 * removed unless keepdim; median()/nanmedian() of the whole tensor are
 * median_dim of the flattened input) */
ct_status ct__vjp_sort_select(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (!NEED(0)) return CT_OK;
    ct_tensor *idx = c->nout > 1 ? OUT(1) : NULL;
    if (c->nout > 1) CHECK(idx);
    if (!g[0] || !idx) { gin[0] = ct__zeros_geom(x, x->dtype); CHECK(gin[0]); return CT_OK; }
    int64_t d = c->a->p.sort.dim;
    ct_tensor *gg = g[0];
    if (x->ndim > 0 && idx->ndim < x->ndim) {
        gg = ct_unsqueeze(gg, d);
        idx = ct_unsqueeze(idx, d);
    }
    gin[0] = ct__grad_to(route(gg, idx, x, d), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* cummax / cummin */
ct_status ct__vjp_cummaxmin(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (!NEED(0)) return CT_OK;
    if (!g[0]) { gin[0] = ct__zeros_geom(x, x->dtype); CHECK(gin[0]); return CT_OK; }
    gin[0] = ct__grad_to(route(g[0], OUT(1), x, c->a->p.scan.dim), x);
    CHECK(gin[0]);
    return CT_OK;
}

/* ---- softmax and scans --------------------------------------------------- */
ct_status ct__vjp_softmax(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    gin[0] = ct__grad_to(ct__softmax_backward(g[0], OUT(0), c->a->p.scan.dim, 0), GEO(0));
    CHECK(gin[0]);
    return CT_OK;
}

ct_status ct__vjp_log_softmax(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    gin[0] = ct__grad_to(ct__softmax_backward(g[0], OUT(0), c->a->p.scan.dim, 1), GEO(0));
    CHECK(gin[0]);
    return CT_OK;
}

/* sum_{j >= k} t[j] along d, without flipping: t - cumsum(t) + sum(t) */
static ct_tensor *rev_cumsum(ct_tensor *t, int64_t d) {
    if (!t) return NULL;
    if (t->ndim == 0) return t;
    return ct_add(ct_sub(t, ct_cumsum(t, d)), ct_sum(t, &d, 1, true));
}

ct_status ct__vjp_cumsum(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    gin[0] = ct__grad_to(rev_cumsum(g[0], c->a->p.scan.dim), GEO(0));
    CHECK(gin[0]);
    return CT_OK;
}

/* cumprod: rev_cumsum(g * out) / x when x has no zeros; otherwise
 * grad[k] = sum_{j >= k} g[j] prod_{i <= j, i != k} x[i], computed with an
 * n x n matrix (as torch does when the result must be differentiable) */
ct_status ct__vjp_cumprod(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0);
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    int64_t d = c->a->p.scan.dim;
    int64_t n = x->ndim ? x->sizes[d] : 1;
    if (n <= 1) { gin[0] = ct__grad_for(g[0], x); CHECK(gin[0]); return CT_OK; }
    ct_tensor *anyz = ct_any(ct_eq_scalar(x, 0.0), NULL, 0, false);
    CHECK(anyz);
    if (anyz->storage->device == CT_META || ct_item(anyz) == 0.0) { /* meta: either path has the shape */
        gin[0] = ct__grad_for(ct_div(rev_cumsum(ct_mul(g[0], OUT(0)), d), x), x);
        CHECK(gin[0]);
        return CT_OK;
    }
    ct_tensor *xt = ct_transpose(x, d, -1), *gt = ct_transpose(g[0], d, -1);
    ct_tensor *eye = ct__eye_on(n, n, x->dtype, x->storage->device);
    CHECK(eye);
    /* M[..., k, i] = i == k ? 1 : x[i] */
    ct_tensor *M = ct_add(ct_mul(ct_unsqueeze(xt, -2), ct_add_scalar(ct_neg(eye), 1.0)), eye);
    ct_tensor *P = ct_cumprod(M, -1); /* P[..., k, j] = prod_{i <= j, i != k} x[i] */
    ct_tensor *tri = ct_triu(ct_ones_on((const int64_t[]){n, n}, 2, x->dtype, x->storage->device), 0); /* j >= k */
    ct_tensor *W = ct_mul(ct_mul(P, tri), ct_unsqueeze(gt, -2));
    int64_t last = -1;
    ct_tensor *r = ct_transpose(ct_sum(W, &last, 1, false), d, -1);
    gin[0] = ct__grad_for(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

/* logcumsumexp: torch's formula (log-space reverse scans of the positive and
 * negative parts of g) */
static double lowest(ct_dtype dt) {
    switch (dt) {
    case CT_F16: return -65504.0;
    case CT_BF16: return -3.3895313892515355e38;
    case CT_F32: return -FLT_MAX;
    default: return -DBL_MAX;
    }
}

ct_status ct__vjp_logcumsumexp(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = IN(0), *out = OUT(0), *gr = g[0];
    if (!NEED(0)) return CT_OK;
    CHECK(x);
    if (x->ndim == 0 || ct_numel(x) == 0) { gin[0] = ct__grad_for(gr, x); CHECK(gin[0]); return CT_OK; }
    int64_t d = c->a->p.scan.dim;
    ct_tensor *gmin = ct_full_on(NULL, 0, lowest(gr->dtype), gr->dtype, CT_CPU);
    ct_tensor *lag = ct_log(ct_abs(gr));
    ct_tensor *lpos = ct_where(ct_gt_scalar(gr, 0.0), lag, gmin);
    ct_tensor *lneg = ct_where(ct_lt_scalar(gr, 0.0), lag, gmin);
    ct_tensor *rp = ct_flip(ct_logcumsumexp(ct_flip(ct_sub(lpos, out), &d, 1), d), &d, 1);
    ct_tensor *rn = ct_flip(ct_logcumsumexp(ct_flip(ct_sub(lneg, out), &d, 1), d), &d, 1);
    ct_tensor *r = ct_sub(ct_exp(ct_add(rp, x)), ct_exp(ct_add(rn, x)));
    gin[0] = ct__grad_for(r, x);
    CHECK(gin[0]);
    return CT_OK;
}

