/* jvp_reduce.c -- forward-mode rules of reductions, softmax and scans
 * (torch's derivatives.yaml result: formulas).  Reductions record their
 * reduced dims as a mask over the input's dims (a->p.reduce.reduced) and
 * keepdim; softmax and scans their dim (a->p.scan.dim). */
#include <math.h>

#include "autograd_impl.h"

#define CHECK(t) do { if (!(t)) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; } while (0)

static int rdims(const ct_jvp_ctx *c, int64_t *dims) {
    int n = 0;
    for (int d = 0; d < c->in[0]->ndim; d++)
        if (c->a->p.reduce.reduced[d]) dims[n++] = d;
    return n;
}

/* a reduced result with the reduced dims back (size 1) */
static ct_tensor *unreduce(ct_tensor *r, const ct_jvp_ctx *c) {
    if (c->a->p.reduce.keepdim) return r;
    for (int d = 0; d < c->in[0]->ndim && r; d++)
        if (c->a->p.reduce.reduced[d]) r = ct_unsqueeze(r, d);
    return r;
}

static ct_tensor *reduce_sum(const ct_jvp_ctx *c, ct_tensor *v) {
    int64_t dims[CT_MAX_DIMS];
    int nd = rdims(c, dims);
    if (nd == 0 && c->in[0]->ndim > 0) return v; /* nothing reduced */
    return ct_sum(v, dims, nd, c->a->p.reduce.keepdim);
}

CT_JVP_RULE(ct__jvp_sum) {
    CHECK(tout[0] = reduce_sum(c, tin[0]));
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_mean) {
    int64_t dims[CT_MAX_DIMS];
    int nd = rdims(c, dims);
    if (nd == 0 && c->in[0]->ndim > 0) tout[0] = tin[0];
    else tout[0] = ct_mean(ct_to_dtype(tin[0], c->out[0]->dtype), dims, nd, c->a->p.reduce.keepdim);
    CHECK(tout[0]);
    return CT_OK;
}

/* d logsumexp = sum(softmax(x) * t) */
CT_JVP_RULE(ct__jvp_logsumexp) {
    ct_tensor *p = ct_exp(ct_sub(c->in[0], unreduce(c->out[0], c)));
    CHECK(tout[0] = reduce_sum(c, ct_mul(p, tin[0])));
    return CT_OK;
}

/* d var = 2 sum((x - mean) t) / (N - correction); d std = d var / (2 std)
 * (0 where std is 0, as the VJP) */
CT_JVP_RULE(ct__jvp_var_std) {
    ct_tensor *x = c->in[0];
    int64_t dims[CT_MAX_DIMS];
    int nd = rdims(c, dims);
    double N = 1;
    for (int k = 0; k < nd; k++) N *= (double)x->sizes[dims[k]];
    if (nd == 0) N = (double)ct_numel(x);
    ct_tensor *xc = ct_sub(x, ct_mean(x, dims, nd, true));
    ct_tensor *dv = ct_mul_scalar(reduce_sum(c, ct_mul(xc, tin[0])), 2.0 / (N - c->a->p.reduce.correction));
    if (c->a->p.reduce.take_sqrt) {
        ct_tensor *o = c->out[0];
        ct_tensor *z = ct_full_on(NULL, 0, 0.0, o->dtype, CT_CPU);
        dv = ct_where(ct_eq_scalar(o, 0.0), z, ct_div(dv, ct_mul_scalar(o, 2.0)));
    }
    CHECK(tout[0] = dv);
    if (c->nout > 1 && c->out[1]) /* var_mean / std_mean: the mean's tangent */
        CHECK(tout[1] = ct_mean(tin[0], dims, nd, c->a->p.reduce.keepdim));
    return CT_OK;
}

/* d ||x||_p = sum(sgn(x) |x|^(p-1) t) / ||x||^(p-1) (0 where the norm is 0);
 * p = 2: sum(x t) / ||x||; p = 1: sum(sgn(x) t).  Other orders (0, inf,
 * p < 1) through the generic rule. */
CT_JVP_RULE(ct__jvp_norm) {
    double p = c->a->p.reduce.p;
    ct_tensor *x = c->in[0], *o = c->out[0], *t = tin[0];
    if (!(p >= 1.0) || isinf(p) || ct_dtype_is_complex(x->dtype)) return ct__jvp_dvjp(c, tin, tout);
    if (p == 1.0) {
        CHECK(tout[0] = reduce_sum(c, ct_mul(ct_sign(x), t)));
        return CT_OK;
    }
    ct_tensor *num = p == 2.0 ? ct_mul(x, t) : ct_mul(ct_mul(ct_sign(x), ct_pow_scalar(ct_abs(x), p - 1)), t);
    ct_tensor *s = reduce_sum(c, num);
    ct_tensor *den = p == 2.0 ? o : ct_pow_scalar(o, p - 1);
    ct_tensor *z = ct_full_on(NULL, 0, 0.0, o->dtype, CT_CPU);
    CHECK(tout[0] = ct_where(ct_eq_scalar(o, 0.0), z, ct_div(s, den)));
    return CT_OK;
}

/* max/min along a dim: the tangent at the chosen index */
CT_JVP_RULE(ct__jvp_maxmin_dim) {
    ct_tensor *x = c->in[0];
    int64_t d = 0;
    for (int k = 0; k < x->ndim; k++)
        if (c->a->p.reduce.reduced[k]) d = k;
    if (x->ndim == 0) { tout[0] = tin[0]; return CT_OK; }
    ct_tensor *idx = unreduce(c->out[1], c);
    ct_tensor *r = ct_gather(tin[0], d, idx);
    if (!c->a->p.reduce.keepdim) r = ct_squeeze_dim(r, d);
    CHECK(tout[0] = r);
    return CT_OK;
}

/* amax/amin: the mean of the tangents at the ties (torch's rule); each
 * output (aminmax: the min and the max) by its own ties */
CT_JVP_RULE(ct__jvp_amaxmin) {
    ct_tensor *x = c->in[0];
    for (int j = 0; j < c->nout; j++) {
        if (!c->out[j]) continue;
        ct_tensor *mask = ct_to_dtype(ct_eq(x, unreduce(c->out[j], c)), c->out[j]->dtype);
        CHECK(tout[j] = ct_div(reduce_sum(c, ct_mul(tin[0], mask)), reduce_sum(c, mask)));
    }
    return CT_OK;
}

/* softmax: y (t - sum(y t)) */
CT_JVP_RULE(ct__jvp_softmax) {
    ct_tensor *y = c->out[0];
    int64_t d = c->a->p.scan.dim;
    ct_tensor *t = ct_to_dtype(tin[0], y->dtype);
    ct_tensor *s = y->ndim ? ct_sum(ct_mul(y, t), &d, 1, true) : ct_mul(y, t);
    CHECK(tout[0] = ct_mul(y, ct_sub(t, s)));
    return CT_OK;
}

/* log_softmax: t - sum(exp(y) t) */
CT_JVP_RULE(ct__jvp_log_softmax) {
    ct_tensor *y = c->out[0];
    int64_t d = c->a->p.scan.dim;
    ct_tensor *t = ct_to_dtype(tin[0], y->dtype);
    ct_tensor *pt = ct_mul(ct_exp(y), t);
    ct_tensor *s = y->ndim ? ct_sum(pt, &d, 1, true) : pt;
    CHECK(tout[0] = ct_sub(t, s));
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_cumsum) {
    CHECK(tout[0] = c->in[0]->ndim ? ct_cumsum(tin[0], c->a->p.scan.dim) : tin[0]);
    return CT_OK;
}

/* the input has a zero (read from the data; meta tensors: assume none) */
static int has_zero(ct_tensor *x) {
    ct_tensor *z = ct_any(ct_eq_scalar(x, 0.0), NULL, 0, false);
    if (!z) return -1;
    return z->storage->device != CT_META && ct_item(z) != 0.0;
}

/* prod: d prod = prod * sum(t / x) without zeros; with zeros the generic
 * rule (its VJP handles them with exclusive products) */
CT_JVP_RULE(ct__jvp_prod) {
    ct_tensor *x = c->in[0];
    int z = has_zero(x);
    if (z < 0) return ct_last_error_code();
    if (z || ct_dtype_is_complex(x->dtype)) return ct__jvp_dvjp(c, tin, tout);
    CHECK(tout[0] = ct_mul(c->out[0], reduce_sum(c, ct_div(tin[0], x))));
    return CT_OK;
}

/* cumprod: d y = y * cumsum(t / x) without zeros (else the generic rule) */
CT_JVP_RULE(ct__jvp_cumprod) {
    ct_tensor *x = c->in[0];
    if (x->ndim == 0) { tout[0] = tin[0]; return CT_OK; }
    int z = has_zero(x);
    if (z < 0) return ct_last_error_code();
    if (z || ct_dtype_is_complex(x->dtype)) return ct__jvp_dvjp(c, tin, tout);
    CHECK(tout[0] = ct_mul(c->out[0], ct_cumsum(ct_div(tin[0], x), c->a->p.scan.dim)));
    return CT_OK;
}

/* logcumsumexp: d y_i = sum_{j<=i} exp(x_j - y_i) t_j, as
 * cumsum(exp(x - m) t) exp(m - y) with m the max along the dim */
CT_JVP_RULE(ct__jvp_logcumsumexp) {
    ct_tensor *x = c->in[0], *y = c->out[0];
    if (x->ndim == 0) { tout[0] = tin[0]; return CT_OK; }
    int64_t d = c->a->p.scan.dim;
    ct_tensor *m = ct_detach(ct_amax(x, &d, 1, true));
    if (m) {
        /* rows of -inf (empty sums) stay finite */
        ct_tensor *z = ct_full_on(NULL, 0, 0.0, x->dtype, CT_CPU);
        m = ct_where(ct_isinf(m), z, m);
    }
    ct_tensor *s = ct_cumsum(ct_mul(ct_exp(ct_sub(x, m)), tin[0]), d);
    CHECK(tout[0] = ct_mul(s, ct_exp(ct_sub(m, y))));
    return CT_OK;
}
