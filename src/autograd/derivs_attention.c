/* derivs_attention.c -- the derivative of the fused attention op
 * (sdpa_fused: q, k, v, [mask] -> out, logsumexp).  Its backward is the
 * op sdpa_fused_backward, which recomputes the attention weights tile by
 * tile from q, k and the saved logsumexp (src/backend/cpu/attention.c).
 * The mask gets no gradient (the driver routes a mask that requires grad to
 * the math kernel).  Under create_graph (double backward) without dropout
 * the gradient is taken through the math kernel recomputed on the saved
 * inputs, so it is itself differentiable; with dropout the fused kernel's
 * mask cannot be replayed by the math kernel and sdpa_fused_backward (which
 * has no derivative) reports double backward as not implemented. */
#include "autograd_impl.h"
#include "ctorch/nn.h"

/* create_graph: gradients through the math kernel (differentiable). */
static ct_status vjp_sdpa_math(const ct_vjp_ctx *c, ct_tensor *g, ct_tensor **gin) {
    ct_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    ct_tensor *mask = c->nin > 3 ? c->in[3] : NULL;
    unsigned prev = ct_sdp_kernel_set(CT_SDP_MATH);
    ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, mask, 0.0, c->a->i[1] != 0, c->a->f[0],
                                                   q->sizes[1] != k->sizes[1]);
    ct_sdp_kernel_set(prev);
    if (!o) return ct_last_error_code();
    ct_tensor *ins[3], *gr[3] = {NULL, NULL, NULL};
    int idx[3], n = 0;
    for (int i = 0; i < 3; i++)
        if (c->needs[i]) { idx[n] = i; ins[n++] = c->in[i]; }
    if (n == 0) return CT_OK;
    ct_status st = ct_autograd_grad(&o, 1, ins, n, &g, true, true, true, gr);
    if (st) return st;
    for (int j = 0; j < n; j++) gin[idx[j]] = gr[j] ? gr[j] : ct_zeros_like(ins[j]);
    return CT_OK;
}

static ct_status vjp_sdpa(const ct_vjp_ctx *c, ct_tensor *const *gout, ct_tensor **gin) {
    ct_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    ct_tensor *mask = c->nin > 3 ? c->in[3] : NULL;
    ct_tensor *o = c->out[0], *lse = c->out[1];
    if (!gout[0]) { /* only the logsumexp got a gradient: it is not differentiable here */
        for (int i = 0; i < 3; i++)
            if (c->needs[i]) gin[i] = ct_zeros_like(c->in[i]);
        return CT_OK;
    }
    if (ct_is_grad_enabled() && !c->a->i[2]) return vjp_sdpa_math(c, gout[0], gin);
    ct_tensor *g = ct__contig_as(gout[0], CT_F32);
    ct_tensor *d[3] = {ct__alloc(q->sizes, 4, CT_F32, CT_CPU), ct__alloc(k->sizes, 4, CT_F32, CT_CPU),
                       ct__alloc(v->sizes, 4, CT_F32, CT_CPU)};
    ct_status st = CT_ERR_OOM;
    if (g && d[0] && d[1] && d[2]) {
        ct_args a = *c->a;
        a.op = CT_OP_sdpa_fused_backward;
        ct_tensor *in[7] = {q, k, v, o, lse, g, mask};
        st = ct__dispatch(CT_OP_sdpa_fused_backward, d, 3, in, mask ? 7 : 6, &a);
    } else {
        ct__error(CT_ERR_OOM, "scaled_dot_product_attention backward: out of memory");
    }
    ct_release(g);
    if (st) {
        for (int i = 0; i < 3; i++) ct_release(d[i]);
        return st;
    }
    ct_tensor *ins[7] = {q, k, v, o, lse, gout[0], mask};
    ct__finish_multi(CT_OP_sdpa_fused_backward, d, 3, ins, mask ? 7 : 6, c->a);
    for (int i = 0; i < 3; i++) gin[i] = c->needs[i] ? d[i] : NULL;
    if (c->nin > 3) gin[3] = NULL;
    return CT_OK;
}

void ct__vjp_register_attention(void);
void ct__vjp_register_attention(void) {
    CT_VJP(sdpa_fused, vjp_sdpa);
    CT_VJP_READS(sdpa_fused, CT_READS_IN(0) | CT_READS_IN(1) | CT_READS_IN(2) | CT_READS_IN(3) |
                                 CT_READS_OUT(0) | CT_READS_OUT(1));
}
