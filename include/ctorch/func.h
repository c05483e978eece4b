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

#include <stdint.h>
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

/* ---- vmap (torch.func.vmap) ------------------------------------------------
 * ct_vmap(f, opts) is f mapped over a batch dimension of its inputs: calling
 * it on inputs whose in_dims[k] dim has size B returns, for each output,
 * the B per-sample results stacked along out_dims[j] -- what a loop calling
 * f on each sample and stacking would give, computed by calling each op of
 * f once on the whole batch (functorch's batching rules):
 *
 *     static ct_status f(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
 *         out[0] = ct_mv(in[0], in[1]);               // per sample: [3,4] @ [4]
 *         return out[0] ? CT_OK : ct_last_error_code();
 *     }
 *     ct_func *fn = ct_func_new(f, NULL);
 *     ct_vmap_opts o = CT_VMAP_DEFAULT;
 *     o.in_dims = (int64_t[]){CT_VMAP_NONE, 0};       // the matrix shared, vectors batched
 *     o.n_in_dims = 2;
 *     ct_func *bf = ct_vmap(fn, &o);                 // holds a reference to fn
 *     ct_status s = ct_func_call(bf, (ct_tensor *[]){m, vs}, 2, &y, 1); // vs [8,4] -> y [8,3]
 *     ct_func_free(bf);
 *     ct_func_free(fn);
 *
 * How: the first call for an input signature (per-sample sizes, dtypes,
 * devices, which inputs are batched) traces f on meta tensors of the
 * per-sample shapes (the compiler's tracer) into a graph of table ops, kept
 * for later calls; each call then runs the graph once over (tensor, batch
 * dim) values, each op through its batching rule (the op table's vmap
 * column), which moves or inserts the batch dim and calls the op once.  An
 * op without a rule runs per sample (slice, run, stack): counted in
 * ct_vmap_get_stats.  A function whose trace breaks (it reads tensor data:
 * ct_item, nonzero, masked_select, ...) runs as a loop of f over the
 * samples, counted too.
 *
 * Transforms compose: ct_vmap(ct_vmap(f)) maps over two dims; vmap of a
 * function that computes gradients (ct_autograd_grad inside) gives
 * per-sample gradients; reverse mode through a vmapped function records
 * the batched ops like eager ones (a custom autograd function -- layer
 * norm's -- then makes the call a loop, which autograd records too).
 *
 * In-place ops inside f write the batched tensors (an input batched along
 * its in_dim is written, as in torch); writing a value that depends on the
 * batch into an unbatched input is an error.  A buffer f makes itself and
 * fills in place with batched values (cat, pad, diag do) is batched from
 * its creation on.  Under CT_VMAP_DIFFERENT a factory draws [B, ...] at
 * once and an in-place sampler fills the whole batch; CT_VMAP_SAME draws
 * one sample's worth that every sample shares (bernoulli of batched
 * probabilities is an error then, as in torch).  A call that runs as a
 * loop supports CT_VMAP_DIFFERENT only when f draws (a draw after the
 * graph break is not seen by CT_VMAP_ERROR's check: each sample draws).
 *
 * Errors (torch's): an in_dim out of range for its input, inputs whose
 * mapped dims differ in size, no batched input, in_dims / out_dims of the
 * wrong length, an out_dim out of range, out_dims CT_VMAP_NONE for an
 * output that depends on the batch, a random op under CT_VMAP_ERROR, an
 * in-place op writing a batched value into an unbatched tensor.  An output
 * that does not depend on the batch is expanded along its out_dim (torch). */
#define CT_VMAP_NONE INT64_MIN  /* an in_dim / out_dim: not mapped */
typedef enum ct_vmap_randomness {
    CT_VMAP_ERROR = 0,   /* a random op inside f is an error (torch's default) */
    CT_VMAP_DIFFERENT,   /* each sample draws its own values */
    CT_VMAP_SAME         /* every sample sees the same draw */
} ct_vmap_randomness;
typedef struct ct_vmap_opts {
    const int64_t *in_dims;  /* per input: the mapped dim (negative counts from the end) or
                              * CT_VMAP_NONE; NULL: 0 for every input */
    int n_in_dims;           /* entries of in_dims: the number of inputs, or 1 (for all) */
    const int64_t *out_dims; /* per output: where the batch dim goes, or CT_VMAP_NONE (the
                              * output must not depend on the batch); NULL: 0 for all */
    int n_out_dims;          /* the number of outputs, or 1 (for all) */
    ct_vmap_randomness randomness;
    int64_t chunk_size;      /* > 0: run the batch in chunks of this many samples
                              * (less memory at once); 0: all at once */
} ct_vmap_opts;
#define CT_VMAP_DEFAULT ((ct_vmap_opts){NULL, 0, NULL, 0, CT_VMAP_ERROR, 0})

/* The batched function: a new ct_func holding a reference to f (opts are
 * copied; NULL: the defaults).  NULL with an error for a NULL f, a
 * negative chunk_size, a bad randomness or in_dims/out_dims with a
 * negative count. */
CT_API ct_func *ct_vmap(ct_func *f, const ct_vmap_opts *opts);

/* Process-wide counters of the batched calls (all threads). */
typedef struct ct_vmap_stats {
    int64_t calls;        /* calls of vmapped functions (chunks count once) */
    int64_t traces;       /* traces made (a signature's first call) */
    int64_t batched_ops;  /* op runs through a batching rule (once per batch) */
    int64_t fallback_ops; /* op runs through the per-sample loop */
    int64_t loop_calls;   /* calls that ran as a loop of f (a graph break) */
} ct_vmap_stats;
CT_API ct_vmap_stats ct_vmap_get_stats(void);
CT_API void ct_vmap_reset_stats(void);
/* How many times the op named `op` (an op table name: "mm", "sum", ...) ran
 * batched / fell back to the per-sample loop since the last reset; -1 for
 * an unknown name. */
CT_API int64_t ct_vmap_op_batched(const char *op);
CT_API int64_t ct_vmap_op_fallbacks(const char *op);
/* Whether the op named `op` has a batching rule (-1: no such op). */
CT_API int ct_vmap_has_rule(const char *op);
/* The reason the last call on this thread that ran as a loop did so (the
 * graph break), "" if none. */
CT_API const char *ct_vmap_last_loop_reason(void);

#ifdef __cplusplus
}
#endif
#endif
