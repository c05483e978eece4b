/* ctorch/autograd.h -- reverse-mode automatic differentiation.
 *
 * Define-by-run, like PyTorch: when grad mode is on and an op's input
 * requires grad, the op records a node (its backward function, from the op
 * table) and its output requires grad.  ct_backward() walks that graph from
 * a tensor and accumulates gradients into the leaves' .grad.
 *
 *     ct_tensor *w = ct_randn(CT_SHAPE(3, 2), CT_F32);
 *     ct_set_requires_grad(w, true);
 *     ct_tensor *loss = ct_sum(ct_square(ct_matmul(x, w)), NULL, 0, false);
 *     if (ct_backward(loss, NULL, false, false) != CT_OK) ...;
 *     ct_tensor *g = ct_grad(w);   // borrowed: owned by w
 *
 * Derivatives are written with public ops, so they are differentiable
 * themselves: with create_graph the backward pass is recorded, and double
 * backward (Hessian-vector products, gradient penalties) works.
 * Grad mode, inference mode and anomaly mode are per thread.
 */
#ifndef CTORCH_AUTOGRAD_H
#define CTORCH_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- leaves and gradients ---------------------------------------------- */
/* Only floating-point and complex tensors can require grad; a non-leaf
 * cannot be set to not require grad (use ct_detach). */
CT_API ct_status ct_set_requires_grad(ct_tensor *t, bool requires_grad) CT_NODISCARD;
CT_API bool ct_requires_grad(const ct_tensor *t);
/* The accumulated gradient of a leaf (or of a tensor with ct_retain_grad),
 * or NULL.  Borrowed: owned by t, valid until the next write to it. */
CT_API ct_tensor *ct_grad(ct_tensor *t);
/* Replaces t's .grad (NULL clears it).  g is retained. */
CT_API ct_status ct_set_grad(ct_tensor *t, ct_tensor *g) CT_NODISCARD;
/* Sets .grad to NULL (PyTorch's zero_grad(set_to_none=True)). */
CT_API void ct_zero_grad(ct_tensor *t);
/* Name of the node that made t ("MulBackward0"), or NULL for a leaf. */
CT_API const char *ct_grad_fn_name(const ct_tensor *t);
CT_API bool ct_is_leaf(const ct_tensor *t);
/* Keep .grad for a non-leaf during backward. */
CT_API ct_status ct_retain_grad(ct_tensor *t) CT_NODISCARD;
/* A new tensor sharing t's storage, cut from the graph. */
CT_API ct_tensor *ct_detach(ct_tensor *t);
/* Cuts t itself from the graph (it becomes a leaf that does not require grad). */
CT_API ct_tensor *ct_detach_(ct_tensor *t);

/* ---- running backward ---------------------------------------------------- */
/* Accumulates d(t)/d(leaf) * grad_output into every leaf that requires grad.
 * grad_output may be NULL when t has one element (it is then 1).  Without
 * retain_graph the graph's saved tensors are freed and a second backward
 * through it is an error.  With create_graph the backward is recorded. */
CT_API ct_status ct_backward(ct_tensor *t, ct_tensor *grad_output, bool retain_graph,
                             bool create_graph) CT_NODISCARD;
/* torch.autograd.grad: gradients of sum(outputs[i] * grad_outputs[i]) with
 * respect to inputs, written to grads[0..ninputs) (scope-owned tensors;
 * NULL for an unused input when allow_unused, an error otherwise).
 * grad_outputs may be NULL (all outputs must then have one element).
 * Leaves' .grad are not touched.  Only the nodes from which an input is
 * reachable run (an input's own hooks and retain_grad included, as in
 * PyTorch): beyond the inputs nothing is computed, no hook fires and, without
 * retain_graph, no saved tensor is freed. */
CT_API ct_status ct_autograd_grad(ct_tensor *const *outputs, int noutputs,
                                  ct_tensor *const *inputs, int ninputs,
                                  ct_tensor *const *grad_outputs, bool retain_graph,
                                  bool create_graph, bool allow_unused,
                                  ct_tensor **grads) CT_NODISCARD;

/* ---- modes (thread-local, nestable: each call returns the previous state) */
/* torch.set_grad_enabled; ct_no_grad() is set_grad_enabled(false). */
CT_API bool ct_set_grad_enabled(bool enabled);
CT_API bool ct_is_grad_enabled(void);
/* Inference mode: no recording and no version bookkeeping; tensors made in
 * it can never enter autograd later (a clear error if they try). */
CT_API bool ct_set_inference_mode(bool enabled);
CT_API bool ct_is_inference_mode(void);
CT_API bool ct_is_inference(const ct_tensor *t);
/* Anomaly detection: backward reports the op whose gradient has NaN/Inf. */
CT_API bool ct_set_detect_anomaly(bool enabled);

/* ---- hooks ---------------------------------------------------------------- */
/* Called with the gradient of t during backward; return NULL to keep it, or
 * a new gradient (any scope-owned tensor) to replace it. */
typedef ct_tensor *(*ct_grad_hook)(ct_tensor *grad, void *user);
CT_API ct_status ct_register_hook(ct_tensor *t, ct_grad_hook fn, void *user) CT_NODISCARD;

/* ---- custom functions (torch.autograd.Function) ---------------------------- */
typedef struct ct_function_ctx ct_function_ctx;
typedef struct ct_function_def {
    const char *name;   /* shown by ct_grad_fn_name ("<name>Backward") */
    int noutputs;
    /* Computes outputs from inputs (grad mode is off inside). */
    ct_status (*forward)(ct_function_ctx *ctx, ct_tensor *const *inputs, int ninputs,
                         ct_tensor **outputs);
    /* Gradients of the inputs (NULL for none) from the outputs' gradients. */
    ct_status (*backward)(ct_function_ctx *ctx, ct_tensor *const *grad_outputs,
                          ct_tensor **grad_inputs);
    /* Optional (torch's Function.jvp): forward mode.  Called after forward
     * when an input has a tangent at an active dual level, with the inputs'
     * tangents (NULL for none) and ctx as forward left it; stores each
     * output's tangent (NULL: zero) in tangent_outputs.  Without it, forward
     * AD differentiates the backward instead (it must then be written with
     * ops that grad mode records), else the call fails with an error. */
    ct_status (*jvp)(ct_function_ctx *ctx, ct_tensor *const *tangent_inputs,
                     ct_tensor **tangent_outputs);
} ct_function_def;
/* Runs def->forward and records a node calling def->backward. */
CT_API ct_status ct_function_apply(const ct_function_def *def, ct_tensor *const *inputs,
                                   int ninputs, void *user, ct_tensor **outputs) CT_NODISCARD;
CT_API ct_status ct_ctx_save_for_backward(ct_function_ctx *ctx, ct_tensor *const *ts, int n) CT_NODISCARD;
/* The i-th saved tensor (borrowed), or NULL + error when freed/modified. */
CT_API ct_tensor *ct_ctx_saved(ct_function_ctx *ctx, int i);
CT_API void *ct_ctx_user(ct_function_ctx *ctx);

/* ---- forward-mode AD (torch.autograd.forward_ad) ----------------------------
 * Directional derivatives computed alongside the values: a dual tensor
 * carries a tangent, and every op computes its outputs' tangents from its
 * inputs' (the op table's jvp rules) -- a Jacobian-vector product in one
 * forward pass, no graph kept.
 *
 *     int lvl = ct_fwad_enter_dual_level();
 *     ct_tensor *x = ct_fwad_make_dual(x0, v, lvl);   // x0 with tangent v
 *     ct_tensor *y = f(x);                             // any ops
 *     ct_tensor *y0, *jv;
 *     if (ct_fwad_unpack_dual(y, lvl, &y0, &jv) != CT_OK) ...;  // jv = J_f(x0) v
 *     if (ct_fwad_exit_dual_level(lvl) != CT_OK) ...;
 *
 * Levels are per thread and nest (the innermost one is the last entered):
 * tangents at different levels are independent, and ops propagate each
 * (nested levels give forward-over-forward derivatives).  Forward mode is
 * not affected by grad mode and composes with reverse mode both ways: the
 * tangent computations are recorded when their inputs require grad
 * (reverse over forward), and a backward pass run on dual tensors
 * propagates tangents (forward over reverse: Hessian-vector products).
 * Views: the tangent of a view is the same view of its base's tangent;
 * an in-place op updates the target's tangent in place (a target without
 * one gets one, through its base when it is a view).  Integer and bool
 * results never have tangents. */
/* Enters a new level: returns it (>= 0), or -1 with an error (too deep). */
CT_API int ct_fwad_enter_dual_level(void);
/* Exits `level`, dropping every tangent at it.  An error unless it is the
 * innermost active level. */
CT_API ct_status ct_fwad_exit_dual_level(int level) CT_NODISCARD;
/* A view of primal that carries `tangent` at `level` (torch's make_dual).
 * Both floating point or complex, of one shape and device, and primal
 * without a tangent at that level yet; a tangent of another dtype is
 * converted to primal's, one laid out differently from primal is copied
 * into primal's layout.  Scope-owned;
 * NULL with an error otherwise (no active level, bad level, mismatch). */
CT_API ct_tensor *ct_fwad_make_dual(ct_tensor *primal, ct_tensor *tangent, int level);
/* torch's unpack_dual: *primal a view of t without its tangent at level
 * (t itself when it has none), *tangent its tangent or NULL (none, or no
 * such active level).  Both scope-owned; either pointer may be NULL. */
CT_API ct_status ct_fwad_unpack_dual(ct_tensor *t, int level, ct_tensor **primal,
                                     ct_tensor **tangent) CT_NODISCARD;
/* The innermost active level on this thread, -1 when none. */
CT_API int ct_fwad_current_level(void);

/* ---- checking gradients ------------------------------------------------------- */
/* A function of n tensors returning one tensor (scope-owned). */
typedef ct_tensor *(*ct_grad_fn)(ct_tensor *const *inputs, int n, void *user);
/* torch.autograd.gradcheck: compares analytical gradients (backward) with
 * central finite differences in float64 for every input that requires grad.
 * Inputs should be float64.  Returns CT_OK, or an error naming the input,
 * the element and both values.  eps 1e-6, atol 1e-5, rtol 1e-3 like torch
 * when given as 0. */
CT_API ct_status ct_gradcheck(ct_grad_fn fn, void *user, ct_tensor *const *inputs, int n,
                              double eps, double atol, double rtol) CT_NODISCARD;
/* torch.autograd.gradgradcheck: gradcheck of the gradient (with random
 * grad_outputs), through create_graph. */
CT_API ct_status ct_gradgradcheck(ct_grad_fn fn, void *user, ct_tensor *const *inputs, int n,
                                  double eps, double atol, double rtol) CT_NODISCARD;

#ifdef __cplusplus
}
#endif
#endif
