/* jvp_attention.c -- forward-mode rule of the fused attention op
 * (sdpa_fused: q, k, v, [mask] -> out, logsumexp), written with public ops
 * like its create_graph VJP (derivs_attention.c):
 *   S = scale q k^T (+ mask, causal), P = softmax(S), out = P v,
 *   dS = scale (dq k^T + q dk^T),  dlse = rowsum(P dS),
 *   dP = P (dS - dlse),            dout = dP v + P dv,
 * with k, v, dk, dv repeated over the query heads of their group (GQA).
 * P is recomputed from S and the saved logsumexp (rows masked out entirely
 * have P = 0).  The mask is a constant (no tangent), as in the VJP; with
 * attention dropout the generic double-vjp rule runs instead. */
#include <math.h>

#include "autograd_impl.h"

CT_JVP_RULE(ct__jvp_sdpa) {
    if (c->a->p.sdpa.has_dropout) return ct__jvp_dvjp(c, tin, tout);
    ct_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    ct_tensor *mask = c->nin > 3 ? c->in[3] : NULL;
    if (!tin[0] && !tin[1] && !tin[2]) return CT_OK;
    int64_t Hq = q->sizes[1], Hk = k->sizes[1];
    int64_t G = Hk > 0 ? Hq / Hk : 1;
    double scale = c->a->p.sdpa.scale;
    ct_dtype dt = c->out[0]->dtype;
    ct_tensor *kr = G > 1 ? ct_repeat_interleave(k, G, 1) : k;
    ct_tensor *vr = G > 1 ? ct_repeat_interleave(v, G, 1) : v;
    ct_tensor *s = ct__sdpa_scores(q, kr, scale, c->a->p.sdpa.is_causal, mask);
    int64_t last = -1;
    /* P = exp(S - lse); rows without any finite score: 0 */
    ct_tensor *lse = ct_unsqueeze(c->out[1], -1);
    ct_tensor *p = ct_exp(ct_sub(s, lse));
    if (p && (c->a->p.sdpa.is_causal || mask)) {
        ct_tensor *dead = ct_isinf(lse);
        p = ct_masked_fill(p, dead, 0.0);
    }
    ct_tensor *ds = NULL;
    if (tin[0]) ds = ct_matmul(ct_to_dtype(tin[0], dt), ct_transpose(kr, -2, -1));
    if (tin[1]) {
        ct_tensor *dk = ct_to_dtype(tin[1], dt);
        if (G > 1) dk = ct_repeat_interleave(dk, G, 1);
        ct_tensor *t = ct_matmul(q, ct_transpose(dk, -2, -1));
        ds = ds ? ct_add(ds, t) : t;
    }
    ct_tensor *dout = NULL;
    if (ds) {
        ds = ct_mul_scalar(ds, scale);
        ct_tensor *dl = ct_sum(ct_mul(p, ds), &last, 1, true);
        ct_tensor *dp = ct_mul(p, ct_sub(ds, dl));
        dout = ct_matmul(dp, vr);
        if (c->nout > 1 && c->out[1]) {
            if (!(tout[1] = ct_squeeze_dim(dl, -1))) return ct_last_error_code();
        }
    }
    if (tin[2]) {
        ct_tensor *dv = ct_to_dtype(tin[2], dt);
        if (G > 1) dv = ct_repeat_interleave(dv, G, 1);
        ct_tensor *t = ct_matmul(p, dv);
        dout = dout ? ct_add(dout, t) : t;
    }
    if (!dout) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    tout[0] = dout;
    return CT_OK;
}
