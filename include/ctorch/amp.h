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
 * On a CPU with AVX2 (and on one that computes bf16 products itself,
 * AVX512_BF16: AMD Zen 4 and later, Intel Cooper Lake, Sapphire Rapids and
 * later) ct_linear and ct_addmm (with beta = alpha = 1 and a bias vector)
 * in a bfloat16 region make no copies at all: the product rounds its
 * float32 operands to bfloat16 as it reads them (with AVX2 it then
 * multiplies those values in float32), and the backward writes the float32
 * gradients of the float32 weight and bias (and activation) directly.  The
 * results are bit for bit those of the casts on the same CPU (products
 * with fewer than 4 rows or columns, which the cast path sums in another
 * order, can differ in the last bf16 bit; one custom
 * autograd node, "AutocastLinearBackward" / "AutocastAddmmBackward", in
 * place of the cast nodes and the product's); the weight cache is then
 * not used for them.  With AVX512_BF16, those products read a weight of 16384 elements or more from a bfloat16
 * copy of it (its shadow) from its second product with the same contents
 * on; the fused AdamW (ct_optim_set_all(opt, "fused", 1)) rewrites the
 * shadow as it updates the weight, so the products of later steps round
 * nothing (GPT-2 124M: ~10 ms of a ~690 ms step on Zen 4).  Shadows hold 2
 * bytes per element of such weights for as long as the weight lives (at
 * most CT_AMP_SHADOW_MB MiB in the environment, default 1024; 0 turns them
 * off); a weight changed in place or written through ct_data_ptr is
 * rounded again.  Results are the same bits with or without them.
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
#include "data.h"
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


/* ---- GradScaler -------------------------------------------------------------
 * Dynamic loss scaling for float16 (or bfloat16) training, as
 * torch.amp.GradScaler("cpu"): the loss is multiplied by a scale before
 * backward so small float16 gradients do not flush to zero; unscale_
 * divides the gradients back in one fused pass over all of them that also
 * looks for inf/NaN; step runs the optimizer only when none was found;
 * update backs the scale off after such a step (x backoff_factor) and grows
 * it after growth_interval clean steps in a row (x growth_factor, kept
 * when finite).  The scale is a float32, the tracker an integer, updated
 * exactly as torch's _amp_update_scale_.
 *
 *     ct_grad_scaler *gs = ct_grad_scaler_new(CT_GRAD_SCALER_DEFAULTS);
 *     for (...) {
 *         ct_scope s = ct_scope_begin();
 *         ct_optim_zero_grad(opt, true);
 *         ct_tensor *loss = NULL;
 *         CT_AUTOCAST(CT_CPU, CT_F16) { loss = ct_cross_entropy(ct_module_forward(m, x), y, NULL); }
 *         if (ct_backward(ct_grad_scaler_scale(gs, loss), NULL, false, false) ||
 *             ct_grad_scaler_step(gs, opt, NULL) || ct_grad_scaler_update(gs)) ...;
 *         ct_scope_end(s);
 *     }
 *     ct_grad_scaler_free(gs);
 *
 * A scaler is used by one thread at a time; it keeps, per optimizer it has
 * seen since the last update, whether unscale_/step ran and found infs
 * (torch's per-optimizer state), so unscale_ twice or step twice before
 * update is an error (CT_ERR_RUNTIME, torch's messages).  A disabled
 * scaler makes every call a pass-through (scale returns the loss, step
 * just steps, get_scale is 1). */
typedef struct ct_grad_scaler ct_grad_scaler;
/* torch's defaults: init_scale 2^16, growth_factor 2, backoff_factor 0.5,
 * growth_interval 2000, enabled */
#define CT_GRAD_SCALER_DEFAULTS 65536.0, 2.0, 0.5, 2000, true
/* NULL + CT_ERR_ARG unless init_scale is finite and > 0, growth_factor > 1,
 * 0 < backoff_factor < 1, growth_interval >= 1 (when enabled). */
CT_API ct_grad_scaler *ct_grad_scaler_new(double init_scale, double growth_factor, double backoff_factor,
                                          int64_t growth_interval, bool enabled);
CT_API void ct_grad_scaler_free(ct_grad_scaler *s);
/* loss * scale (a recorded op: backward gives scaled gradients); the
 * scale is a float32 0-dim tensor, so the result keeps loss's dtype.
 * Disabled: loss itself (retained into the innermost scope). */
CT_API ct_tensor *ct_grad_scaler_scale(ct_grad_scaler *s, ct_tensor *loss);
/* Multiplies the .grad of every parameter of opt by 1/scale in place, in
 * one pass over all gradients (float32 or float64, the optimizers'
 * parameter dtypes: the float32 master weights of mixed precision), and
 * records whether any element was inf or NaN.  Call it
 * before ct_clip_grad_norm_ to clip the true gradients. */
CT_API ct_status ct_grad_scaler_unscale_(ct_grad_scaler *s, ct_optimizer *opt) CT_NODISCARD;
/* unscale_ (if not yet done for opt), then ct_optim_step unless inf/NaN
 * was found; *stepped (may be NULL) says which. */
CT_API ct_status ct_grad_scaler_step(ct_grad_scaler *s, ct_optimizer *opt, bool *stepped) CT_NODISCARD;
/* The scale for the next iteration from the inf/NaN found by this
 * iteration's unscale_ calls (over all optimizers); resets them. */
CT_API ct_status ct_grad_scaler_update(ct_grad_scaler *s) CT_NODISCARD;
/* update(new_scale=...): sets the scale (finite, > 0) instead. */
CT_API ct_status ct_grad_scaler_update_to(ct_grad_scaler *s, double new_scale) CT_NODISCARD;
/* The current scale (1.0 when disabled). */
CT_API double ct_grad_scaler_get_scale(const ct_grad_scaler *s);
/* Clean steps in a row since the last growth or backoff. */
CT_API int64_t ct_grad_scaler_get_growth_tracker(const ct_grad_scaler *s);
CT_API bool ct_grad_scaler_is_enabled(const ct_grad_scaler *s);
/* torch's GradScaler.state_dict(): 0-dim tensors "scale" (float32),
 * "growth_factor", "backoff_factor" (float64), "growth_interval",
 * "_growth_tracker" (int64); empty when disabled.  Save it with
 * ct_save_state / ct_safetensors_save; free with ct_sample_free. */
CT_API ct_sample *ct_grad_scaler_state_dict(const ct_grad_scaler *s);
/* Restores a state_dict (validated like ct_grad_scaler_new's arguments);
 * an empty one is refused (it came from a disabled scaler). */
CT_API ct_status ct_grad_scaler_load_state_dict(ct_grad_scaler *s, const ct_sample *sd) CT_NODISCARD;

#ifdef __cplusplus
}
#endif
#endif
