/* derivs_attention.c -- the derivative of the fused attention op
 * (sdpa_fused: q, k, v, [mask] -> out, logsumexp).  Its backward is the
 * op sdpa_fused_backward (ct__sdpa_fused_backward, src/ops/attention.c),
 * which recomputes the attention weights from q, k and the saved
 * logsumexp: tile by tile in the kernel (src/backend/cpu/attention.c), as
 * a composite of public ops on a device without it.
 * The mask gets no gradient (the driver routes a mask that requires grad to
 * the math kernel).  Under create_graph (double backward) without dropout
 * the gradient is written with public ops (the math kernel's backward), so
 * it is itself differentiable; with dropout the fused kernel's
 * mask cannot be replayed by the math kernel and sdpa_fused_backward (which
 * has no derivative) reports double backward as not implemented. */
#include <math.h>

#include "autograd_impl.h"

/* The attention scores scale * q k^T of the math path (k already repeated
 * over the query heads of its group), with the causal mask and the boolean
 * (False: -inf) or additive mask applied: shared by the VJP and the JVP. */
ct_tensor *ct__sdpa_scores(ct_tensor *q, ct_tensor *kr, double scale, bool is_causal, ct_tensor *mask) {
    ct_tensor *s = ct_mul_scalar(ct_matmul(q, ct_transpose(kr, -2, -1)), scale);
    if (s && is_causal) {
        int64_t L = q->sizes[q->ndim - 2], S = kr->sizes[kr->ndim - 2];
        s = ct_masked_fill(s, ct_triu(ct_ones_on((int64_t[]){L, S}, 2, CT_BOOL, q->storage->device), 1), -INFINITY);
    }
    if (mask && mask->dtype == CT_BOOL)
        s = ct_masked_fill(s, ct_logical_not(mask), -INFINITY);
    else if (mask)
        s = ct_add(s, mask);
    return s;
}
#include <math.h>

#include "../ops/ew.h"
#include "../ops/sdpa_impl.h"

/* create_graph: the gradients written with public ops (so differentiable):
 *   P = softmax(scale q k^T masked), dV = P^T g, dP = g v^T,
 *   dS = P (dP - rowsum(dP P)), dQ = scale dS k, dK = scale dS^T q,
 * k and v repeated over the query heads of their group (GQA) and dK, dV
 * summed back over the group. */
static ct_status vjp_sdpa_math(const ct_vjp_ctx *c, ct_tensor *g, ct_tensor **gin) {
    ct_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    ct_tensor *mask = c->nin > 3 ? c->in[3] : NULL;
    int64_t B = q->sizes[0], Hq = q->sizes[1], Hk = k->sizes[1], S = k->sizes[2];
    int64_t E = q->sizes[3], Ev = v->sizes[3], G = Hk > 0 ? Hq / Hk : 1;
    double scale = c->a->p.sdpa.scale;
    ct_scope sc = ct_scope_begin();
    ct_tensor *kr = G > 1 ? ct_repeat_interleave(k, G, 1) : k;
    ct_tensor *vr = G > 1 ? ct_repeat_interleave(v, G, 1) : v;
    ct_tensor *s = ct__sdpa_scores(q, kr, scale, c->a->p.sdpa.is_causal, mask);
    int64_t last = -1;
    ct_tensor *p;
    if (s && (c->a->p.sdpa.is_causal || mask)) {
        /* rows with every score -inf get P = 0 -- and finite second-order
         * gradients: the softmax of such a row is NaN, and with a float
         * mask its (NaN) backward would reach q and k through the add, so
         * their scores are zeroed before the softmax (as the math kernel
         * does; masked_fill's -inf stops it for bool and causal masks) */
        ct_tensor *dead = ct_all(ct_eq_scalar(ct_detach(s), -INFINITY), &last, 1, true);
        bool float_mask = mask && mask->dtype != CT_BOOL;
        p = ct_masked_fill(ct_softmax(float_mask ? ct_masked_fill(s, dead, 0.0) : s, -1), dead, 0.0);
    } else {
        p = ct_softmax(s, -1);
    }
    ct_tensor *dp = ct_matmul(g, ct_transpose(vr, -2, -1));
    ct_tensor *ds = ct_mul(p, ct_sub(dp, ct_sum(ct_mul(dp, p), &last, 1, true)));
    ct_tensor *r[3] = {NULL, NULL, NULL};
    if (c->needs[0]) r[0] = ct_mul_scalar(ct_matmul(ds, kr), scale);
    int64_t two = 2;
    if (c->needs[1]) {
        ct_tensor *dk = ct_mul_scalar(ct_matmul(ct_transpose(ds, -2, -1), q), scale);
        r[1] = G > 1 ? ct_sum(ct_view(dk, (int64_t[]){B, Hk, G, S, E}, 5), &two, 1, false) : dk;
    }
    if (c->needs[2]) {
        ct_tensor *dv = ct_matmul(ct_transpose(p, -2, -1), g);
        r[2] = G > 1 ? ct_sum(ct_view(dv, (int64_t[]){B, Hk, G, S, Ev}, 5), &two, 1, false) : dv;
    }
    ct_status st = CT_OK;
    for (int i = 0; i < 3; i++) {
        if (c->needs[i] && !r[i]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        if (r[i]) ct_keep(r[i]);
    }
    ct_scope_end(sc); /* the kept results belong to the caller's scope */
    if (st) return st;
    for (int i = 0; i < 3; i++) gin[i] = r[i];
    if (c->nin > 3) gin[3] = NULL;
    return CT_OK;
}

ct_status ct__vjp_sdpa(const ct_vjp_ctx *c, ct_tensor *const *gout, ct_tensor **gin) {
    ct_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    ct_tensor *mask = c->nin > 3 ? c->in[3] : NULL;
    ct_tensor *o = c->out[0], *lse = c->out[1];
    if (!gout[0]) { /* only the logsumexp got a gradient: it is not differentiable here */
        for (int i = 0; i < 3; i++)
            if (c->needs[i] && !(gin[i] = ct__zeros_geom(ct__vjp_geom(c, i), ct__vjp_geom(c, i)->dtype)))
                return ct_last_error_code();
        return CT_OK;
    }
    if ((ct_is_grad_enabled() || ct__fw_active_on(gout, 1) || ct__fw_active_on(c->in, c->nin)) &&
        !c->a->p.sdpa.has_dropout)
        return vjp_sdpa_math(c, gout[0], gin);
    bool want[3] = {c->needs[0], c->needs[1], c->needs[2]};
    ct_tensor *d[3];
    ct_status st = ct__sdpa_fused_backward(c->a, q, k, v, o, lse, gout[0], mask, want, d);
    if (st) return st;
    for (int i = 0; i < 3; i++) gin[i] = c->needs[i] ? d[i] : NULL;
    if (c->nin > 3) gin[3] = NULL;
    return CT_OK;
}

