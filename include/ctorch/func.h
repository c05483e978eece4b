/* ctorch/func.h -- function transforms (torch.func): functions of tensors
 * as values that transforms take and return, so they compose:
 * vmap(grad(f)) gives per-sample gradients, jacfwd(jacrev(f)) a Hessian.
 *
 *     static ct_status f(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
 *         out[0] = ct_sum(ct_sin(in[0]), NULL, 0, false);
 *         return out[0] ? CT_OK : ct_last_error_code();
 *     }
 *     ct_func *fn = ct_func_new(f, NULL);
 *     ct_tensor *y;
 *     ct_status s = ct_func_call(fn, (ct_tensor *[]){x}, 1, &y, 1);
 *     ...
 *     ct_func_free(fn);
 *
 * A ct_func wraps a ct_fn (compile.h: reads in[0..nin), stores nout new
 * tensors in out[0..nout), returns CT_OK or the error) and its context.
 * The transforms (below, and in this header as they come) take a ct_func
 * and return a new one that holds a reference to it: free each ct_func you
 * got from ct_func_new or a transform once, in any order.  ct_func_fn is a
 * ct_fn whose ctx is a ct_func, so a transformed function can be handed to
 * anything taking a (ct_fn, ctx) pair -- ct_compile included.
 *
 * Threads: a ct_func may be called from several threads at once when the
 * function it wraps may; creating and freeing are thread-safe. */
#ifndef CTORCH_FUNC_H
#define CTORCH_FUNC_H

#include "compile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_func ct_func;

/* A function of tensors.  NULL with an error for a NULL fn or no memory.
 * ctx is borrowed: it must outlive the ct_func (and every transform of it). */
CT_API ct_func *ct_func_new(ct_fn fn, void *ctx);
/* Like ct_func_new, and free_ctx(ctx) runs when the last reference goes
 * (transforms hold their state this way). */
CT_API ct_func *ct_func_new_owned(ct_fn fn, void *ctx, void (*free_ctx)(void *ctx));
/* Another reference to f (f itself); ct_func_free drops one. NULL-safe. */
CT_API ct_func *ct_func_retain(ct_func *f);
CT_API void ct_func_free(ct_func *f);

/* Calls f: out[0..nout) receive its results (scope-owned like op results;
 * NULL on failure).  An error for a NULL f, a NULL input array with nin > 0,
 * or a function that returns CT_OK but leaves an output NULL. */
CT_API CT_NODISCARD ct_status ct_func_call(ct_func *f, ct_tensor *const *in, int nin,
                                           ct_tensor **out, int nout);
/* ct_fn adapter: ctx is a ct_func (ct_compile(ct_func_fn, f, NULL)). */
CT_API ct_status ct_func_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx);

/* ---- forward-mode transforms (src/func/jvp.c) ------------------------------ */
/* torch.func.jvp: runs f at primals[0..n) and returns its outputs in
 * outs[0..nout) (may be NULL: not wanted) and the Jacobian-vector product
 * J_f(primals) . tangents in tangent_outs[0..nout) (zeros for an output
 * that does not depend on the tangents), all scope-owned.  tangents[k]
 * has primals[k]'s shape; tangents may be NULL, or an entry NULL, for a
 * zero tangent.  One forward pass on dual tensors (ctorch/autograd.h,
 * forward-mode AD) at a level of its own, so jvp nests: a function that
 * calls ct_func_jvp can itself be given to ct_func_jvp.
 *
 *     ct_tensor *y, *jv;
 *     if (ct_func_jvp(f, (ct_tensor *[]){x}, (ct_tensor *[]){v}, 1, &y, &jv, 1)) ...;
 */
CT_API CT_NODISCARD ct_status ct_func_jvp(ct_func *f, ct_tensor *const *primals,
                                          ct_tensor *const *tangents, int n, ct_tensor **outs,
                                          ct_tensor **tangent_outs, int nout);
/* torch.func.jacfwd: a function computing Jacobians by forward mode (one
 * jvp per element of each differentiated input).  Called with f's inputs
 * and nout = (f's outputs) * nargnums, it stores the Jacobian of f's
 * output j with respect to input argnums[i] in out[j * nargnums + i], of
 * shape (output j's shape) + (that input's shape).  argnums NULL (or
 * nargnums 0): input 0.  The result holds a reference to f; free both.
 * Composes: ct_func_jacfwd(ct_func_jacfwd(f, ...), ...) gives second
 * derivatives, jacfwd of a reverse-mode transform a Hessian. */
CT_API ct_func *ct_func_jacfwd(ct_func *f, const int *argnums, int nargnums);
/* torch.func.linearize: f's outputs at primals in outs[0..nout)
 * (scope-owned) and, in *jvp_fn, a function of n tangents returning the
 * nout JVPs at those primals (their values are copied now).  Free
 * *jvp_fn with ct_func_free (it holds a reference to f). */
CT_API CT_NODISCARD ct_status ct_func_linearize(ct_func *f, ct_tensor *const *primals, int n,
                                                ct_tensor **outs, int nout, ct_func **jvp_fn);

#ifdef __cplusplus
}
#endif
#endif
