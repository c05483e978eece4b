/* ctorch/compile.h -- ct_compile: torch.compile for C.
 *
 *     static ct_status step(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
 *         ct_tensor *h = ct_gelu(ct_add(ct_mul_scalar(in[0], 1.5), in[1]), CT_GELU_NONE);
 *         out[0] = ct_sum(h, (int64_t[]){-1}, 1, false);
 *         return out[0] ? CT_OK : ct_last_error_code();
 *     }
 *     ct_compiled *f = ct_compile(step, NULL, NULL);      (default options)
 *     ct_tensor *y;
 *     ct_status s = ct_compiled_call(f, (ct_tensor *[]){x, b}, 2, &y, 1);
 *     ...
 *     ct_compiled_free(f);
 *
 * The first call traces fn once on meta tensors (sizes, strides and dtypes,
 * no data) through the op dispatch point into a graph of table ops, runs
 * the graph passes (dead code, common subexpressions, constant folding,
 * decomposition, fusion of elementwise chains and the reductions that
 * consume them), renders each fused kernel as C, builds it with the system
 * C compiler into a shared object (cached on disk, see below) and runs the
 * graph: fused kernels as generated code, GEMM/conv/SDPA and everything
 * else through the library's own kernels.  In inference graphs (autograd
 * records nothing), a convolution whose result only an evaluation-time
 * batch norm reads takes it into its weights and bias (recomputed at a
 * call when the weights or the statistics have changed since, e.g. after
 * an optimizer step or a state-dict load), and a relu that only reads a
 * convolution becomes its epilogue (oneDNN's post-op): results equal
 * eager's to rounding, not bit for bit.  A node that reads only
 * parameters and buffers and makes nothing larger (BERT's concatenation of
 * its q, k and v weights) runs once and is kept, remade in the same way
 * when one of them changes (torch.compile's freezing, kept correct under
 * updates).  There, too, the values passed
 * between convolutions that oneDNN runs (and the residual adds and relus
 * between them) stay in oneDNN's channel-blocked layout instead of being
 * reordered to NCHW and back at every convolution; what fn returns is
 * always NCHW.  A value's memory goes back to the allocator right after
 * the last step that reads it, and consecutive kernels that touch disjoint
 * memory (an optimizer step's per-parameter updates) run in one OpenMP
 * parallel region.  Later calls check the guards
 * (each input's dtype, device, rank, sizes, stride order, requires_grad,
 * and the grad mode) and run the compiled graph without calling fn.
 *
 * What fn may do: call ctorch ops on its inputs and on tensors it reaches
 * through ctx (a module's parameters and buffers: they are read at each
 * call, so an optimizer's in-place updates are seen).  fn must be a
 * function of those: what it computes may not depend on C state that
 * changes between calls, since later calls do not run it (torch.compile's
 * guards on Python globals have no C counterpart).  fn may write its inputs
 * and those tensors in place (x.mul_(y), copy_: an optimizer's update); the
 * kernel computing the value stores it into the tensor itself (a call whose
 * inputs share memory the trace did not see runs eagerly).  An op that needs data
 * (ct_item, nonzero, masked_select, ...) cannot be traced: the graph breaks
 * there, ct_compile_explain says where and why, and calls run fn eagerly.
 * Nothing fails because of the compiler: a graph that cannot be compiled
 * (no C compiler, an op without meta, a break) runs eagerly with a one-line
 * warning on stderr (once per compiled function), unless fullgraph is set,
 * which makes a break an error of ct_compiled_call.
 *
 * Training: with grad mode on and an input or a parameter requiring grad,
 * fn is traced together with its backward (ctorch's autograd engine run on
 * the meta outputs: AOTAutograd's joint graph), split into a forward and a
 * backward half, each fused and built; a call runs the forward half as one
 * autograd node (grad_fn "CompiledFunctionBackward") whose backward runs
 * the other half, so ct_backward and ct_autograd_grad work as usual.  The
 * forward keeps for the backward only the values it reads, less those it
 * recomputes: a value an elementwise op of the forward makes from values
 * the backward has anyway (saved ones, fn's inputs, parameters), and that
 * the backward reads only in elementwise arithmetic, is made again inside
 * the backward kernel that reads it (no extra pass over memory) instead of
 * being held between the two (AOTAutograd's recomputation;
 * ct_compile_explain counts them).  A value a matmul of the backward reads
 * is saved (recomputing it would cost a pass), and so is one a comparison
 * reads (a max's tie mask): a recomputed transcendental can differ in the
 * last bit from the forward's.  The backward drops each saved
 * value after the last
 * step that reads it, as the engine frees an eager node's saved tensors
 * once it has run (unless retain_graph or create_graph keeps them): a
 * compiled training step holds no more memory than the eager one.  Where the backward cannot be traced, the forward
 * alone is compiled and autograd records its ops one by one.  A ct_compiled
 * must outlive the backward passes through its results.
 *
 * Random ops (rand, randn, dropout, bernoulli_, ...) draw anew at each
 * call, in eager's order with eager's generator counters: a seeded
 * compiled call gives eager's numbers.  bernoulli(p), multinomial and
 * attention dropout are graph breaks for now.
 *
 * Eager can be faster: where it takes a hand-fused path a trace cannot
 * follow (the Transformer and BERT inference fast paths), or where a
 * kernel saves less than it costs.  So calls 2-6 of a compiled graph that
 * writes nothing but its own temporaries also run fn eagerly (results
 * dropped) and time both; when eager's median is more than 2% faster, the
 * variant runs eagerly from then on (ct_compile_explain says so).  A
 * training variant (the joint forward + backward graph) is timed by whole
 * steps: its calls 3-12 alternate between the compiled graph and fn run
 * eagerly (autograd records the eager one as usual), and the period from
 * each call to the next (the caller's loss, backward and optimizer step
 * included) is timed; when the median ratio of neighbouring periods,
 * compiled over eager, is above 1.02,
 * the variant runs eagerly from then on.  The probing eager calls are not
 * counted in eager_calls.  CT_COMPILE_PROBE=0 in the environment turns this timing off: compiled
 * graphs then always run compiled (what a test counting eager calls wants,
 * since a loaded machine's timings decide nothing reliably).
 *
 * Max-autotune (opts.mode CT_COMPILE_MAX_AUTOTUNE): each fused kernel is
 * also built in variants of how its loop runs on threads (no parallel
 * region at all; parallel from 4096 elements with smaller tasks; guided
 * scheduling), all in the same translation unit (one compiler run per
 * kernel, as in default mode) and all computing the same bits.  The first
 * call of a variant runs each of them on the real tensors, rejects one
 * whose outputs differ from the default's by a bit, times them (median of
 * 3 to 15 interleaved runs) and keeps the fastest (the default unless
 * another is more than 2% faster).  A GEMM or convolution step that has two
 * implementations in the library (OpenBLAS or ctorch's own AVX2 GEMM for
 * f32 matrix products; ctorch's convolution kernels or oneDNN) is timed on
 * its real inputs with both and runs with the faster from then on: its
 * results then agree with default mode's to rounding, not bit for bit.
 * The choices are kept in the cache dir beside the kernels, keyed by the
 * kernel's cache key (or the op and its parameters), the real sizes and
 * strides, the thread count and the CPU model, so another process with the
 * same shapes reads them instead of timing (ct_compile_stats counts both;
 * a corrupt record is ignored, timed again and rewritten).
 * ct_compile_explain lists each choice with the times measured;
 * CT_COMPILE_LOG=autotune prints them as they are made.  CT_GEMM / CT_DNNL
 * in the environment fix their choice (it is then not timed).
 *
 * Cache: built kernels are kept in $CT_CACHE_DIR (default
 * $XDG_CACHE_HOME/ctorch, else ~/.cache/ctorch), keyed by a hash of the
 * generated source, the compiler and its flags; writes are atomic, a
 * corrupt or foreign entry is rebuilt, and processes compiling the same
 * kernel at once are safe.  A cache dir that cannot be created or written
 * is replaced, for the process, by a private temporary one (a one-line
 * warning on stderr).  The compiler is $CC, else cc on PATH.
 *
 * Debugging: CT_COMPILE_DEBUG=dir writes each captured graph, the graph
 * after the passes and each kernel's generated source there;
 * CT_COMPILE_LOG=recompiles,graph_breaks,guards,autotune (comma-separated, or "all")
 * prints those events on stderr, as TORCH_LOGS does.  The profiler
 * (profiler.h) shows each generated kernel as one event named after the
 * ops it fused.
 */
#ifndef CTORCH_COMPILE_H
#define CTORCH_COMPILE_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;
typedef struct ct_compiled ct_compiled;

/* A C function of tensors: reads in[0..nin), stores nout new tensors in
 * out[0..nout) (owned as any op result is: they join the innermost scope),
 * returns CT_OK or the error. */
typedef ct_status (*ct_fn)(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx);

typedef enum ct_compile_mode {
    CT_COMPILE_DEFAULT = 0,
    CT_COMPILE_MAX_AUTOTUNE = 1 /* times kernel variants and GEMM / conv implementations on the
                                 * real shapes at the first call and keeps the fastest (above) */
} ct_compile_mode;

typedef enum ct_compile_dynamic {
    CT_DYNAMIC_AUTO = 0,  /* automatic: a size that changes between calls becomes symbolic */
    CT_DYNAMIC_FALSE = 1, /* every size is static: a new size retraces and rebuilds */
    CT_DYNAMIC_TRUE = 2   /* every size symbolic from the first call */
} ct_compile_dynamic;

typedef struct ct_compile_opts {
    ct_compile_mode mode;
    ct_compile_dynamic dynamic;
    bool fullgraph;       /* a graph break is an error instead of eager fallback */
    bool disable;         /* run fn eagerly (torch.compile(disable=True)) */
    int recompile_limit;  /* variants kept before falling back to eager (<= 0: 8) */
} ct_compile_opts;

/* A compiled wrapper of fn (NULL opts: defaults).  Nothing is traced until
 * the first call.  NULL with an error only for a NULL fn or no memory. */
CT_API ct_compiled *ct_compile(ct_fn fn, void *ctx, const ct_compile_opts *opts);
/* Calls the compiled function: out[0..nout) receive its results. */
CT_API CT_NODISCARD ct_status ct_compiled_call(ct_compiled *c, ct_tensor *const *in, int nin,
                                               ct_tensor **out, int nout);
CT_API void ct_compiled_free(ct_compiled *c);

/* Counters of a compiled function (tests and benchmarks). */
typedef struct ct_compile_stats {
    int64_t calls;          /* ct_compiled_call calls */
    int64_t traces;         /* times fn was traced */
    int64_t variants;       /* graph variants currently cached */
    int64_t recompiles;     /* traces caused by a failed guard */
    int64_t kernels_built;  /* kernels this function had the C compiler build */
    int64_t kernels_loaded; /* kernels found in the disk cache */
    int64_t graph_breaks;
    int64_t eager_calls;    /* calls that ran fn eagerly */
    double compile_ms;      /* time spent tracing, in passes and building */
    /* max-autotune: the choices (a kernel's variant, a node's implementation)
     * in the current variants' plans made by timing them in this process,
     * and those read from the cache instead */
    int64_t autotune_timed;
    int64_t autotune_cached;
} ct_compile_stats;
CT_API ct_compile_stats ct_compiled_stats(const ct_compiled *c);

/* What the compiler did with the last traced variant: its graph, the graph
 * breaks and why, the guards, the fused kernels.  malloc'ed text (free it),
 * or NULL before the first call. */
CT_API char *ct_compile_explain(const ct_compiled *c);

/* Makes ct_module_forward of m run a compiled graph of m's forward. */
CT_API CT_NODISCARD ct_status ct_module_compile(ct_module *m, const ct_compile_opts *opts);

/* Makes ct_optim_step(opt) run a compiled step (torch.compile(opt.step)):
 * each parameter's update -- the parameter, its gradient and its states read
 * once, written once, in place -- is one generated kernel.  SGD, Adam,
 * AdamW, Adamax, NAdam, RAdam, RMSprop, Adagrad and Adadelta, every option;
 * the results are the eager step's, bit for bit.  The hyperparameters and
 * what the step count makes of them (bias corrections) are 0-dim inputs
 * the host fills at each step, so schedulers, OneCycleLR's betas and the
 * step count never retrace.  A new set of parameters with gradients, or an
 * option that switches a term on or off (weight_decay 0 or not, amsgrad,
 * momentum 0 or not, nesterov, centered, maximize), is another variant,
 * traced once (a recompile; opts->recompile_limit variants, then those
 * steps run eagerly).  State is still made at a parameter's first step,
 * as eager makes it.  Parameters off the cpu step eagerly.  LBFGS (its
 * step calls a closure) is not compiled: a one-line warning, it steps
 * eagerly (an error with fullgraph).  opts->disable (or calling again with
 * it) returns to the eager step.  The profiler shows the kernels inside the
 * step's "Optimizer.step#<name>.step" event.  Like a compiled graph, the
 * compiled step is timed against the eager one (the fused multi-tensor
 * update, the same numbers bit for bit): steps 3 to 12 alternate the two,
 * each timed whole, and when the median of the neighbouring pairs' ratios
 * says the compiled step is slower, the eager step runs from then on
 * (ct_optim_compile_explain's "probe:" line; CT_COMPILE_PROBE=0 turns the
 * timing off). */
typedef struct ct_optimizer ct_optimizer;
CT_API CT_NODISCARD ct_status ct_optim_compile(ct_optimizer *opt, const ct_compile_opts *opts);
/* The compiled step's counters, summed over its compiled functions (one per
 * variant and chunk of 128 parameters); calls counts steps, eager_calls the
 * steps (or chunks) that ran eagerly as a fallback (not the probe's eager
 * steps), recompiles the traces of variants after
 * the first and of failed guards (zeros when not compiled). */
CT_API ct_compile_stats ct_optim_compile_stats(const ct_optimizer *opt);
/* ct_compile_explain of each of the compiled step's functions (malloc'ed,
 * NULL before the first compiled step). */
CT_API char *ct_optim_compile_explain(const ct_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
