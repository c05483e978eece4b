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

#ifdef __cplusplus
}
#endif
#endif
