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
#include "nn.h"

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

/* ===================================================================
 * Reverse-mode transforms: grad, grad_and_value, vjp, jacrev, hessian
 * (torch.func.*).  Each runs f on fresh tensors that alias the inputs it
 * differentiates (the caller's tensors are not touched: their requires_grad
 * and .grad stay as they were) and differentiates with ctorch's reverse
 * autograd (ct_autograd_grad).  The results are differentiable again where
 * they must be, so transforms nest:
 *
 *     static ct_status f(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
 *         // sum(sin(x) * x^2)
 *         out[0] = ct_sum(ct_mul(ct_sin(in[0]), ct_square(in[0])), NULL, 0, false);
 *         return out[0] ? CT_OK : ct_last_error_code();
 *     }
 *     ct_func *fn = ct_func_new(f, NULL);
 *     ct_func *df = ct_func_grad(fn, NULL);      // d f / d in[0], x's shape
 *     ct_func *h = ct_func_hessian(fn, NULL);    // [n, n] for x of [n]
 *     ct_tensor *g, *hx;
 *     if (ct_func_call(df, &x, 1, &g, 1) || ct_func_call(h, &x, 1, &hx, 1)) ...;
 *     // for a 0-dim x, ct_func_grad(df, NULL) is f'' (grad of grad)
 *     ct_func_free(h); ct_func_free(df); ct_func_free(fn);
 *
 * Semantics (torch.func's):
 *   - Gradients are taken with respect to in[argnums[k]]; argnums default to
 *     {0}; negative values count from the end (-1: the last input); they
 *     must be unique and in range at the call (else CT_ERR_ARG naming the
 *     argnum and the input count).  A differentiated input must be floating
 *     point or complex.
 *   - has_aux: f's out[0] is the output the transform differentiates and
 *     out[1..] are auxiliary outputs, returned unchanged after the
 *     transform's own outputs.  Without has_aux every output of f is
 *     differentiated (grad: f must have exactly one).
 *   - An input the output does not depend on gets a zero gradient (not an
 *     error), as in torch.func.
 *   - Nesting and ordinary autograd: when grad mode is on in the caller and
 *     f's output depends on tensors that require grad outside the transform
 *     (a differentiated input that requires grad, a tensor f reaches through
 *     its ctx, an enclosing transform's input), the backward pass is
 *     recorded (create_graph), so the results are differentiable with
 *     respect to those tensors: grad(grad(f)), jacrev(jacrev(f)) and
 *     backward through a gradient work.  Otherwise the results (value and
 *     auxiliary outputs too) are plain tensors that do not require grad.
 *     Grad mode is on inside f whatever the caller's mode (torch.func.grad
 *     ignores an enclosing no_grad; with grad mode off in the caller nothing
 *     outside is recorded).
 *   - Outputs are scope-owned like op results (ct_func_call).  Nothing the
 *     transform makes outlives the call except its outputs and what they
 *     reference.
 *
 * The returned ct_funcs hold a reference to f (free each once, any order).
 * They may be called from several threads at once when f may and the calls
 * share no tensor that requires grad (a parameter f reads through ctx that
 * requires grad puts its node into every call's graph, and one graph is
 * differentiated by one thread at a time).
 *
 * Cost: grad and vjp_fn run one backward pass; jacrev one batched pass per
 * differentiated output (its elements the batch); hessian is jacfwd of
 * jacrev.  Each pass runs
 * only the part of the graph that leads to the differentiated inputs. */

/* Options of ct_func_grad, ct_func_grad_and_value, ct_func_jacrev,
 * ct_func_jacfwd and ct_func_hessian.  NULL or a zeroed struct: argnums {0}, no aux.  argnums
 * is copied. */
typedef struct ct_func_grad_opts {
    const int *argnums; /* inputs to differentiate; NULL: {0} */
    int nargnums;       /* entries of argnums (>= 1 when argnums is given) */
    bool has_aux;       /* f's out[1..] are auxiliary outputs */
} ct_func_grad_opts;

/* torch.func.grad: a function whose outputs are the gradients of f's
 * out[0] with respect to in[argnums[0..k)] (each the shape and dtype of its
 * input), then, with has_aux, f's out[1..] unchanged.  Called with nout =
 * k (+ the number of auxiliary outputs).  f's out[0] must be a 0-dim
 * tensor: anything else is a CT_ERR_ARG error ("Expected f(*args) to
 * return a scalar Tensor, got tensor with 2 dims"), as in torch; an
 * integer (or bool) out[0] has zero gradients, as in torch. */
CT_API ct_func *ct_func_grad(ct_func *f, const ct_func_grad_opts *o);
/* torch.func.grad_and_value: the gradients, then f's out[0] (the value),
 * then the auxiliary outputs.  nout = k + 1 (+ aux). */
CT_API ct_func *ct_func_grad_and_value(ct_func *f, const ct_func_grad_opts *o);

/* torch.func.vjp: runs f on primals[0..n), stores its nout outputs in
 * outs (scope-owned) and returns in *vjp_fn a function mapping cotangents
 * to gradients: called with one cotangent per differentiated output (the
 * output's shape; with has_aux just one, for outs[0]) and nout = n, it
 * returns sum_i <cotangent_i, d outs[i] / d primals[j]> for every j (zeros
 * where an output does not depend on a primal).  vjp_fn can be called any
 * number of times (the graph is kept until it is freed); its results are
 * differentiable with respect to cotangents that require grad (and to
 * tensors outside, as above).  Every primal must be floating point or
 * complex.  On failure outs are NULL, *vjp_fn is NULL and the error is
 * returned.  Free *vjp_fn with ct_func_free; call it from one thread at a
 * time (it runs backward through one graph).
 *
 *     ct_tensor *y; ct_func *pb;
 *     if (ct_func_vjp(fn, &x, 1, &y, 1, false, &pb)) ...;
 *     ct_tensor *gx;
 *     if (ct_func_call(pb, &v, 1, &gx, 1)) ...;   // v^T (dy/dx)
 *     ct_func_free(pb); */
CT_API CT_NODISCARD ct_status ct_func_vjp(ct_func *f, ct_tensor *const *primals, int n,
                                          ct_tensor **outs, int nout, bool has_aux,
                                          ct_func **vjp_fn);

/* torch.func.jacrev: Jacobians by reverse mode, one vector-Jacobian product
 * per output element: as torch, vmap over the vjp with the identity's rows
 * (one traced backward pass replayed over all rows), or a loop of vjps
 * where the backward must be recorded (create_graph: an outer graph, a
 * nested transform) or carries forward-mode tangents.  For f with m
 * differentiated outputs and k argnums, called with nout = m * k (+ aux),
 * out[i * k + j] = d f_i / d in[argnums[j]], of shape f_i.shape ++
 * in[argnums[j]].shape and the input's dtype (torch's layout: with one
 * output and one argnum, out[0] is the Jacobian).  With has_aux, m is 1
 * and f's out[1..] follow.  A differentiated output must be floating point
 * or complex. */
CT_API ct_func *ct_func_jacrev(ct_func *f, const ct_func_grad_opts *o);
/* torch.func.hessian: second derivatives of f's outputs with respect to
 * in[argnums]: out[i * k + j] = d^2 f / (d in[argnums[i]] d in[argnums[j]]),
 * of shape f.shape ++ in_i.shape ++ in_j.shape.  As torch: jacfwd(jacrev(f,
 * o), o), forward over reverse (one backward pass per output element, each
 * carrying one tangent per input element).  has_aux is not supported
 * (torch.func.hessian has none): CT_ERR_ARG. */
CT_API ct_func *ct_func_hessian(ct_func *f, const ct_func_grad_opts *o);

/* ==========================================================================
 * Functional modules and stacked state (torch.func.functional_call,
 * torch.func.stack_module_state): model ensembling and per-sample gradients.
 *
 *     ct_sample *params, *buffers;
 *     if (ct_func_stack_module_state(models, n, &params, &buffers)) ...;
 *     ct_func *fm = ct_func_functional_call(models[0], params, buffers);
 *     // fm's inputs: every parameter (in params' order), every buffer, then
 *     // the module's inputs.  Model i of the ensemble is fm called with
 *     // ct_select(p, 0, i) of each stacked tensor (vmap over dim 0 batches it)
 *     ...
 *     ct_func_free(fm); ct_sample_free(params); ct_sample_free(buffers);
 * ========================================================================== */

/* Stacks the parameters and the buffers of n modules of the same structure:
 * *params and *buffers (new samples; free each with ct_sample_free) map
 * every name of models[0]'s named_parameters / named_buffers (PyTorch's
 * state-dict names and order) to a new tensor [n, ...] whose slice i is a
 * copy of model i's tensor.  A stacked parameter is a new leaf that
 * requires grad when the parameters do (not connected to the models'
 * parameters, like torch's); buffers do not require grad.  Errors
 * (CT_ERR_ARG, nothing returned): n < 1, a NULL model, models whose
 * parameter or buffer names, shapes, dtypes or devices differ, a buffer
 * that is None in some models only, parameters of one name that differ in
 * requires_grad. */
CT_API CT_NODISCARD ct_status ct_func_stack_module_state(ct_module *const *models, int n,
                                                         ct_sample **params, ct_sample **buffers);

/* A function running m's forward with its parameters and buffers given as
 * inputs (ct_functional_call): in[0..P) are the tensors for the names of
 * params (in its order; P = ct_sample_count(params)), in[P..P+B) those
 * for the names of buffers, in[P+B..nin) the forward's inputs; one output.
 * Only the names are read from params and buffers (either may be NULL: no
 * such inputs); every name must be a parameter or buffer of m (CT_ERR_ARG
 * naming it).  The function retains m; m itself is never modified. */
CT_API ct_func *ct_func_functional_call(ct_module *m, const ct_sample *params,
                                        const ct_sample *buffers);

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
/* torch.func.jacfwd: a function computing Jacobians by forward mode: as
 * torch, vmap over the basis of each differentiated input of jvp(f) -- one
 * batched forward pass (ct_vmap: f is traced at each call, then each op
 * runs once over the basis; a function the tracer cannot follow runs as a
 * loop of jvps, with the same values).  Options as jacrev's (o
 * NULL: argnums {0}, no aux; argnums unique, negative ones count from the
 * end, in range at the call, else CT_ERR_ARG).  For f with m
 * differentiated outputs and k argnums, called with nout = m * k (+ aux):
 * out[j * k + i] = d f_j / d in[argnums[i]], of shape (f_j's shape) + (that
 * input's shape), the layout jacrev uses.  With has_aux, m is 1 and f's
 * out[1..] follow, unchanged.  A differentiated input must be floating
 * point or complex (CT_ERR_DTYPE).  The result holds a reference to f; free
 * both.  Composes: ct_func_jacfwd(ct_func_jacfwd(f, NULL), NULL) gives
 * second derivatives, jacfwd of a reverse-mode transform a Hessian
 * (ct_func_hessian is ct_func_jacfwd(ct_func_jacrev(f, o), o)).
 *
 *     ct_func *jf = ct_func_jacfwd(fn, &(ct_func_grad_opts){(int[]){0, 1}, 2, false});
 *     ct_tensor *J[2];      // d out / d in[0], d out / d in[1]
 *     if (ct_func_call(jf, (ct_tensor *[]){x, W}, 2, J, 2)) ...;
 *     ct_func_free(jf); */
CT_API ct_func *ct_func_jacfwd(ct_func *f, const ct_func_grad_opts *o);
/* torch.func.linearize: f's outputs at primals in outs[0..nout)
 * (scope-owned) and, in *jvp_fn, a function of n tangents returning the
 * nout JVPs at those primals (their values are copied now).  Free
 * *jvp_fn with ct_func_free (it holds a reference to f). */
CT_API CT_NODISCARD ct_status ct_func_linearize(ct_func *f, ct_tensor *const *primals, int n,
                                                ct_tensor **outs, int nout, ct_func **jvp_fn);
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
