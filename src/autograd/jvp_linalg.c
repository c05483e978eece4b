/* jvp_linalg.c -- forward-mode rules of the products and convolutions:
 * each is linear in each of its operands, so d f(a, b) = f(da, b) +
 * f(a, db) (+ the bias' tangent, scaled as the op scales it). */
#include "autograd_impl.h"
#include "../ops/conv_impl.h"

#define CHECK(t) do { if (!(t)) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; } while (0)

typedef ct_tensor *(*bin_fn)(ct_tensor *, ct_tensor *);

static ct_tensor *as_dt(ct_tensor *t, ct_dtype dt) { return t && t->dtype != dt ? ct_to_dtype(t, dt) : t; }

/* f(t0, in1) + f(in0, t1) */
static ct_status bilinear(const ct_jvp_ctx *c, ct_tensor *const *tin, ct_tensor **tout, bin_fn f) {
    ct_tensor *r = NULL;
    ct_dtype dt = c->out[0]->dtype;
    if (tin[0]) CHECK(r = f(as_dt(tin[0], dt), as_dt(c->in[1], dt)));
    if (tin[1]) {
        ct_tensor *s = f(as_dt(c->in[0], dt), as_dt(tin[1], dt));
        CHECK(s);
        CHECK(r = r ? ct_add(r, s) : s);
    }
    tout[0] = r;
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_mm) { return bilinear(c, tin, tout, ct_mm); }
CT_JVP_RULE(ct__jvp_bmm) { return bilinear(c, tin, tout, ct_bmm); }
CT_JVP_RULE(ct__jvp_matmul) { return bilinear(c, tin, tout, ct_matmul); }
CT_JVP_RULE(ct__jvp_dot) {
    if (ct_dtype_is_complex(c->out[0]->dtype)) return ct__jvp_dvjp(c, tin, tout);
    return bilinear(c, tin, tout, ct_dot);
}
CT_JVP_RULE(ct__jvp_mv) { return bilinear(c, tin, tout, ct_mv); }
CT_JVP_RULE(ct__jvp_outer) { return bilinear(c, tin, tout, ct_outer); }

static ct_tensor *linear_nb(ct_tensor *x, ct_tensor *w) { return ct_linear(x, w, NULL); }

/* linear(x, w, b): linear(dx, w) + linear(x, dw) + db */
CT_JVP_RULE(ct__jvp_linear) {
    ct_status st = bilinear(c, tin, tout, linear_nb);
    if (st) return st;
    if (c->nin > 2 && tin[2]) {
        ct_tensor *b = as_dt(tin[2], c->out[0]->dtype);
        CHECK(tout[0] = tout[0] ? ct_add(tout[0], b) : b);
    }
    return CT_OK;
}

/* conv / conv_transpose (x, w, [b]) with the recorded geometry:
 * conv(dx, w) + conv(x, dw) + db over the channel dim */
CT_JVP_RULE(ct__jvp_conv) {
    const ct_p_conv *pc = &c->a->p.conv;
    ct_op op = c->op;
    ct_tensor *r = NULL;
    ct_dtype dt = c->out[0]->dtype;
    if (tin[0]) CHECK(r = ct__conv_geom(op, as_dt(tin[0], dt), c->in[1], NULL, pc));
    if (tin[1]) {
        ct_p_conv g2 = *pc;
        g2.keep_weights = false; /* the tangent is no weight to keep a reordered copy of */
        ct_tensor *s = ct__conv_geom(op, c->in[0], as_dt(tin[1], dt), NULL, &g2);
        CHECK(s);
        CHECK(r = r ? ct_add(r, s) : s);
    }
    if (c->nin > 2 && tin[2]) {
        /* [C] -> [C, 1, ...] against [N, C, *] or [C, *] */
        int nd = c->in[1]->ndim - 2;
        int64_t sh[CT_MAX_DIMS];
        sh[0] = tin[2]->sizes[0];
        for (int j = 0; j < nd; j++) sh[1 + j] = 1;
        ct_tensor *b = ct_reshape(as_dt(tin[2], dt), sh, nd + 1);
        CHECK(b);
        CHECK(r = r ? ct_add(r, b) : ct_expand(b, c->out[0]->sizes, c->out[0]->ndim));
    }
    tout[0] = r;
    return CT_OK;
}

/* beta c + alpha prod(a, b): beta dc + alpha (prod(da, b) + prod(a, db));
 * addmm (mm), addmv (mv), addr (outer), baddbmm (bmm), addbmm (bmm
 * summed over the batch) */
static ct_tensor *bmm_sum(ct_tensor *a, ct_tensor *b) {
    int64_t d0 = 0;
    return ct_sum(ct_bmm(a, b), &d0, 1, false);
}

static ct_status add_product(const ct_jvp_ctx *c, ct_tensor *const *tin, ct_tensor **tout, bin_fn f) {
    double beta = c->a->p.linalg.beta, alpha = c->a->p.linalg.alpha;
    ct_tensor *r = NULL;
    if (tin[1] || tin[2]) {
        ct_jvp_ctx c2 = *c;
        c2.in = c->in + 1;
        c2.nin = 2;
        ct_tensor *sub[2] = {tin[1], tin[2]}, *p = NULL;
        ct_status st = bilinear(&c2, sub, &p, f);
        if (st) return st;
        CHECK(r = alpha == 1.0 ? p : ct_mul_scalar(p, alpha));
    }
    if (tin[0] && beta != 0.0) {
        ct_tensor *s = as_dt(tin[0], c->out[0]->dtype);
        if (beta != 1.0) s = ct_mul_scalar(s, beta);
        CHECK(s);
        CHECK(r = r ? ct_add(r, s) : s);
    }
    tout[0] = r;
    return CT_OK;
}

CT_JVP_RULE(ct__jvp_addmm) { return add_product(c, tin, tout, ct_mm); }
CT_JVP_RULE(ct__jvp_addmv) { return add_product(c, tin, tout, ct_mv); }
CT_JVP_RULE(ct__jvp_addr) { return add_product(c, tin, tout, ct_outer); }
CT_JVP_RULE(ct__jvp_baddbmm) { return add_product(c, tin, tout, ct_bmm); }
CT_JVP_RULE(ct__jvp_addbmm) { return add_product(c, tin, tout, bmm_sum); }
CT_JVP_RULE(ct__jvp_kron) { return bilinear(c, tin, tout, ct_kron); }

static _Thread_local int64_t tl_cross_dim;
static ct_tensor *cross_d(ct_tensor *a, ct_tensor *b) { return ct_cross(a, b, tl_cross_dim); }
CT_JVP_RULE(ct__jvp_cross) {
    tl_cross_dim = c->a->p.linalg.dim;
    return bilinear(c, tin, tout, cross_d);
}

/* einsum is linear in each operand: sum_k einsum(.., dt_k, ..) */
CT_JVP_RULE(ct__jvp_einsum) {
    int n = c->nin;
    const char *eq = c->a->p.linalg.equation;
    if (!eq || n > 16 || ct_dtype_is_complex(c->out[0]->dtype)) return ct__jvp_dvjp(c, tin, tout);
    ct_tensor *ops[16], *r = NULL;
    ct_dtype dt = c->out[0]->dtype;
    for (int k = 0; k < n; k++) {
        if (!tin[k]) continue;
        for (int i = 0; i < n; i++) ops[i] = as_dt(i == k ? tin[k] : c->in[i], dt);
        ct_tensor *s = ct_einsum(eq, ops, n);
        CHECK(s);
        CHECK(r = r ? ct_add(r, s) : s);
    }
    tout[0] = r;
    return CT_OK;
}

/* bilinear(x1, x2, W, b) = x1^T W x2 + b: linear in each of x1, x2, W */
CT_JVP_RULE(ct__jvp_bilinear) {
    ct_tensor *r = NULL;
    ct_dtype dt = c->out[0]->dtype;
    for (int k = 0; k < 3; k++) {
        if (!tin[k]) continue;
        ct_tensor *o[3] = {c->in[0], c->in[1], c->in[2]};
        o[k] = as_dt(tin[k], dt);
        ct_tensor *s = ct_bilinear(o[0], o[1], o[2], NULL);
        CHECK(s);
        CHECK(r = r ? ct_add(r, s) : s);
    }
    if (c->nin > 3 && tin[3]) {
        ct_tensor *b = as_dt(tin[3], dt);
        CHECK(r = r ? ct_add(r, b) : b);
    }
    tout[0] = r;
    return CT_OK;
}

/* tensordot over the recorded contracted dims: bilinear */
static _Thread_local const ct_p_linalg *tl_td;
static ct_tensor *tensordot_p(ct_tensor *a, ct_tensor *b) {
    return ct_tensordot(a, b, tl_td->dims_a, tl_td->dims_b, tl_td->dims_a_n);
}
CT_JVP_RULE(ct__jvp_tensordot) {
    tl_td = &c->a->p.linalg;
    return bilinear(c, tin, tout, tensordot_p);
}
