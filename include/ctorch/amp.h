/* ctorch/amp.h -- automatic mixed precision: autocast and the gradient
 * scaler (torch.autocast, torch.amp.GradScaler).
 *
 * ---- autocast ---------------------------------------------------------------
 * Inside an autocast region the ops of torch's CPU autocast lists run in
 * the dtype their list says, whatever the dtype of their float32 inputs:
 *
 *   lower precision (the region's dtype, bfloat16 or float16): conv1d/2d/3d
 *     (also with a padding string), conv_transpose1d/2d, mm, bmm, matmul,
 *     addmm, baddbmm, addbmm, linear, prelu, scaled_dot_product_attention;
 *   float32: prod, cdist, trace, binary_cross_entropy(_with_logits),
 *     reflection/replication pads (ct_pad), and the losses mse, l1,
 *     smooth_l1, huber, nll, cross_entropy, kl_div, poisson_nll, ctc,
 *     cosine_embedding, hinge_embedding, margin_ranking, triplet_margin,
 *     multi_margin;
 *   promote to the widest floating input: cat, stack, index_copy.
 *
 * Every other op runs in its inputs' dtypes (so a bfloat16 activation
 * flows on through relu, add, max_pool, ... in bfloat16).  float64 and
 * integer inputs are never cast.  The lists are torch 2.15's
 * (src/ops/autocast.def names each op and its ctorch function).
 *
 * A cast is an ordinary recorded op (ct_to_dtype), so autograd
 * differentiates through it: the backward of each op runs in the dtypes its
 * forward used and a float32 weight gets a float32 gradient (float32
 * "master weights" in the optimizer).  ct_backward turns autocast off for
 * its own pass, so calling it inside or after a region gives the same
 * result.  The compiler's tracer (ct_compile) records the casts like any
 * other op.  Inside a region the bfloat16/float16 copy of a float32 leaf
 * that requires grad (a weight) is made once and reused (the weight cache,
 * cleared when the outermost region exits, as torch's): do not update
 * weights in place inside a region and expect the cast copies to follow.
 *
 * The state is per thread and regions nest; each enter saves the previous
 * state (enabled, dtype, cache_enabled) and the matching exit restores it:
 *
 *     if (ct_autocast_enter(CT_CPU, CT_BF16) != CT_OK) ...;
 *     ct_tensor *logits = ct_module_forward(model, x);      // bfloat16
 *     ct_tensor *loss = ct_cross_entropy(logits, y, NULL);  // float32
 *     (void)ct_autocast_exit();
 *     ct_backward(loss, NULL, false, false);                // float32 grads
 *
 * or, as a scope-like guard (torch's `with torch.autocast("cpu"):`):
 *
 *     CT_AUTOCAST(CT_CPU, CT_BF16) {
 *         loss = ct_cross_entropy(ct_module_forward(model, x), y, NULL);
 *     }
 *
 * The guard's body must not `return`, `goto` or `break` out of it (that
 * would skip the exit); when the enter fails (an error is recorded) the
 * body does not run. */
#ifndef CTORCH_AMP_H
#define CTORCH_AMP_H

#include "tensor.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enters an autocast region on device_type (CT_CPU; other devices have no
 * autocast lists yet: CT_ERR_DEVICE) with dtype CT_BF16 or CT_F16 (else
 * CT_ERR_DTYPE, nothing entered); cache_enabled keeps its current value
 * (torch.autocast("cpu", dtype=...)).  Pair it with ct_autocast_exit. */
CT_API ct_status ct_autocast_enter(ct_device device_type, ct_dtype dtype) CT_NODISCARD;
/* The same with torch.autocast's enabled= and cache_enabled= arguments:
 * enabled false makes a region in which autocast is off (inside an enabled
 * one too) until its exit. */
CT_API ct_status ct_autocast_enter_ex(ct_device device_type, ct_dtype dtype, bool enabled,
                                      bool cache_enabled) CT_NODISCARD;
/* Leaves the innermost region, restoring the state before its enter; when
 * it was the outermost one, clears the weight cache.  CT_ERR_RUNTIME when
 * no region is open on this thread. */
CT_API ct_status ct_autocast_exit(void) CT_NODISCARD;
/* torch.is_autocast_enabled(device_type) on this thread. */
CT_API bool ct_autocast_is_enabled(ct_device device_type);
/* torch.get_autocast_dtype(device_type): CT_BF16 for cpu until set. */
CT_API ct_dtype ct_autocast_get_dtype(ct_device device_type);
/* torch.is_autocast_cache_enabled() (default true). */
CT_API bool ct_autocast_is_cache_enabled(void);
/* torch.clear_autocast_cache(): drops the cached weight casts. */
CT_API void ct_autocast_clear_cache(void);
/* How many weight casts the cache holds now (for tests and diagnostics). */
CT_API int ct_autocast_cache_size(void);

static inline int ct__autocast_guard_exit(void) {
    ct_status s = ct_autocast_exit();
    (void)s;
    return 0;
}
/* The scope-like guard described above. */
#define CT_AUTOCAST(device_type, dtype)                                               \
    for (int ct_ac_guard__ = ct_autocast_enter((device_type), (dtype)) == CT_OK;       \
         ct_ac_guard__; ct_ac_guard__ = ct__autocast_guard_exit())

#ifdef __cplusplus
}
#endif
#endif
