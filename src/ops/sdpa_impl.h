/* sdpa_impl.h -- private: the fused attention op (src/ops/attention.c),
 * the table ops sdpa_fused / sdpa_fused_backward, called by
 * ct_scaled_dot_product_attention (the same file) and by its derivative
 * (src/autograd/derivs_attention.c).
 *
 * Canonical shapes: q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]
 * float32 with a dense last dim (any other strides), Hq a multiple of Hk
 * (query head h reads kv head h / (Hq / Hk)); mask NULL or [B, Hq, L, S]
 * (any strides, broadcast dims stride 0), bool (false: masked) or float32
 * (added to the scores).  Both entries dispatch the device's kernel
 * (src/backend/cpu/attention*.c) when it has one and fused.h has not
 * disabled it; otherwise they run the composite fallback, written with
 * public ops, which computes the same thing:
 *   s   = scale q k^T, -inf above the diagonal (causal) and where a bool
 *         mask is false, + a float mask;
 *   lse = logsumexp(s) per row, +inf for a row with every score -inf;
 *   P   = exp(s - lse) (0 on those rows), dropped out as the kernel does
 *         (element (b h, i, j) keeps when the f32 uniform of word idx % 4
 *         of Philox block offset + idx / 4 is >= p, idx = ((b Hq + h) L +
 *         i) S + j, and is scaled by 1 / (1 - p));
 *   out = P v, stored [B, L, Hq, Ev] and returned as its [B, Hq, L, Ev]
 *         view in both paths. */
#ifndef CT_SDPA_IMPL_H
#define CT_SDPA_IMPL_H

#include "op_table.h"

/* The forward.  mode is CT_SDP_FLASH or CT_SDP_MEM_EFFICIENT (the kernel's
 * tiling; the results agree to rounding); scale > 0; dropout_p in [0, 1)
 * (the Philox stream is reserved here, nothing drawn on meta).  Returns the
 * output, recorded by autograd as one sdpa_fused node; *lse (may be NULL)
 * gets the logsumexp [B, Hq, L], which stays in the caller's scope. */
ct_tensor *ct__sdpa_fused(int mode, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                          double dropout_p, bool causal, double scale, ct_tensor **lse);

/* The backward of a forward run with args a (its ct_p_sdpa): q, k, v, the
 * forward's out and lse, the output gradient g, the mask the forward took.
 * Writes d[0..2] = dq, dk, dv (shapes of q, k, v; GQA groups summed into
 * dk, dv); the fallback computes only the wanted ones (else NULL).  The
 * results belong to the caller's scope; a graph being built records one
 * sdpa_fused_backward node, which has no derivative. */
ct_status ct__sdpa_fused_backward(const ct_args *a, ct_tensor *q, ct_tensor *k, ct_tensor *v,
                                  ct_tensor *out, ct_tensor *lse, ct_tensor *g, ct_tensor *mask,
                                  const bool want[3], ct_tensor **d);

#endif
