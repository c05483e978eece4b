/* compile_impl.h -- private: the compiler's pieces and the interfaces
 * between them (include/ctorch/compile.h is the public side).
 *
 *   capture.c   the tracer: a thread-local hook in the op layer's exit
 *               points (ct__finish / _multi / _inplace) records every op a
 *               traced function runs on meta tensors into a ct_graph
 *   graph.c     the graph IR: building, printing, copying, freeing
 *   passes.c    DCE, CSE (ct__args_equal/_hash), constant folding,
 *               decomposition of composites into primitives
 *   lower.c     fusion: groups of elementwise nodes and the reductions that
 *               consume them -> ct_kernel (the loop-nest IR below) -> a plan
 *   codegen.c   ct_kernel -> source for a target (C with OpenMP now; CUDA C
 *               and OpenCL C later: every target difference in ct_target)
 *   build.c     source -> shared object through the system C compiler, the
 *               disk cache, dlopen
 *   exec.c      runs a plan: generated kernels and table ops
 *   compile.c   the public API: guards, variants, recompiles, eager fallback
 *
 * The graph is SSA over values.  A value is a graph input, a constant (a
 * real tensor the traced function reached that is not an input: module
 * parameters and buffers, wrapped numbers -- held by reference, read at each
 * run), or output k of a node.  An in-place node (ct__finish_inplace) writes
 * the tensor of its `dst` value and defines a new value aliasing it, so later
 * readers depend on the write (functionalization: passes see the order). */
#ifndef CT_COMPILE_IMPL_H
#define CT_COMPILE_IMPL_H

#include "../ops/meta.h"
#include "ctorch/compile.h"

/* ---- the graph IR ---------------------------------------------------------- */
typedef enum { CT_GV_INPUT, CT_GV_CONST, CT_GV_NODE } ct_gv_kind;

typedef struct ct_gvalue {
    ct_gv_kind kind;
    int index;        /* INPUT: position in the inputs; CONST: index in g->consts; NODE: the node */
    int out;          /* NODE: which output of the node */
    ct_meta meta;     /* sizes, strides (always filled), dtype, device as traced */
    int sym[CT_MAX_DIMS]; /* per dim: -1 a static size, else the symbol (g->sym_*) it equals */
    int alias;        /* the value whose storage this one shares (views, in-place results), or -1 */
    int nuses;        /* node inputs + graph outputs reading it (maintained by ct__graph_uses) */
} ct_gvalue;

typedef struct ct_gnode {
    ct_op op;
    ct_args args;     /* the op's typed parameters, as recorded */
    int nin, nout;
    int *in;          /* value ids (-1: a NULL optional input) */
    int *out;         /* value ids (-1: an absent output) */
    int dst;          /* in-place: the value written (out[0] then aliases it), else -1 */
    uint32_t contig_in; /* inputs the op's kernel was given as contiguous copies (exec copies those) */
    int link;         /* an attention backward with dropout: the forward node whose draw it
                       * replays (set when a joint graph is split), else -1 */
    bool dead;        /* removed by a pass */
    bool noreplay;    /* ct__trace_ops: recorded though exec cannot replay it (its kernel
                       * ran on operands its public function prepared) */
} ct_gnode;

/* A convolution's weights with an evaluation-time batch norm folded in
 * (ct__pass_conv_epilogue): consts[dw] = W * s, consts[db] = (b - mean) * s
 * + beta with s = gamma / sqrt(var + eps) per output channel, computed from
 * the source constants src[] = {W, b, mean, var, gamma, beta} (-1: absent)
 * as they were at version ver[] / exposed count exp[] (ct_storage); exec
 * recomputes them when a source has changed since (an optimizer step, a
 * state-dict load, a write through ct_data_ptr). */
/* A node of constants folded in an inference graph (ct__pass_fold_params,
 * kind CT_GFOLD_NODE): consts[dw] = op(consts[src[0..nsrc)]) with args,
 * recomputed like a batch norm's when a source has changed. */
enum { CT_GFOLD_BN, CT_GFOLD_NODE };
#define CT_GFOLD_MAXSRC 8
typedef struct ct_gfold {
    int kind;
    int src[CT_GFOLD_MAXSRC];
    int nsrc;                 /* BN: 6 (-1 entries absent) */
    long long ver[CT_GFOLD_MAXSRC], exp[CT_GFOLD_MAXSRC];
    int dw, db;               /* NODE: dw the result, db -1 */
    double eps;
    ct_args args;             /* NODE: the op and its parameters */
} ct_gfold;

typedef struct ct_graph {
    ct_gvalue *v;
    int nv, cap_v;
    ct_gnode *n;
    int nn, cap_n;
    ct_tensor **consts; /* retained */
    int nconst, cap_const;
    int nin, nout;
    int *inputs;        /* value id of each input */
    int *outputs;       /* value id of each output */
    int nsym;           /* symbolic sizes: symbol s is input sym_in[s]'s dim sym_dim[s] */
    int sym_in[64], sym_dim[64];
    /* why tracing stopped (a graph break): the op, the message; "" when none */
    char brk[256];
    /* a break where an op needed the values of a tensor the graph knows:
     * 1 + that value's id, else 0 (vmap tells a batched one apart) */
    int brk_data;
    /* autograd must record the traced ops (grad mode was on and an input or
     * constant requires grad): set by the tracer; lower.c then fuses
     * nothing (training through fused kernels needs the joint graph) */
    bool record_grad;
    /* a joint graph (ct__trace_joint): nodes [0, nfwd_nodes) are the
     * forward, the rest the backward; inputs [nin - njin, nin) are the
     * gradients of forward outputs jin_out[j]; outputs [nfwd_out, nout) the
     * gradients of wrt[i] (>= 0: that input; < 0: constant -1 - wrt[i]),
     * -1 where unused */
    bool joint;
    /* a half of a split joint graph: it runs with autograd off (its
     * gradients are explicit), so it fuses though parameters require grad */
    bool explicit_grad;
    int nfwd_nodes, nfwd_out, njin, nwrt;
    int *jin_out, *wrt;
    /* folded batch norms (ct_gfold) */
    ct_gfold *folds;
    int nfold;
} ct_graph;

void ct__graph_init(ct_graph *g);
void ct__graph_free(ct_graph *g);
/* Appends a value / node; the index, or -1 when out of memory (error set). */
int ct__graph_value(ct_graph *g, ct_gv_kind kind, int index, int out, const ct_meta *m);
int ct__graph_node(ct_graph *g, ct_op op, const ct_args *a, const int *in, int nin, int nout, int dst);
/* Recounts nuses. */
void ct__graph_uses(ct_graph *g);
/* The graph as text ("%3 = add(%1, %2, alpha=1) : f32[8, 16]", one node a
 * line), malloc'ed. */
char *ct__graph_str(const ct_graph *g);

/* ---- passes (passes.c) ------------------------------------------------------ */
/* Each rewrites g in place, returns CT_OK or the error, and adds the number
 * of nodes it removed / replaced / folded / rewrote to *count (may be NULL).
 * With CT_COMPILE_DEBUG set each reports what it did.  Order: decompose,
 * fold, cse, functionalize, fold_params, conv_epilogue, conv_layout, pool_grad, dce
 * (ct__passes_run). */
ct_status ct__pass_dce(ct_graph *g, int *count);
ct_status ct__pass_cse(ct_graph *g, int *count);
ct_status ct__pass_fold(ct_graph *g, int *count);
ct_status ct__pass_decompose(ct_graph *g, int *count);
/* Graphs autograd does not record (not a joint graph either): a conv
 * whose result only a relu reads (the batch norm's own relu flag
 * included) applies it as its epilogue (ct_p_conv.post_relu: oneDNN's
 * post-op); in inference graphs (not a half of a training graph) a conv
 * whose result only an evaluation-time batch norm reads takes the batch
 * norm into its weights and bias (ct_gfold).  *count: the batch norms
 * folded plus the relus fused. */
ct_status ct__pass_conv_epilogue(ct_graph *g, int *count);
/* Inference graphs (autograd records nothing, not a joint graph or a half
 * of one): a node whose inputs are all constants (module parameters and
 * buffers, or nodes folded before) and whose result is no larger than
 * they are -- BERT's concatenation of the q, k and v weights -- runs once
 * here; its result becomes a constant (ct_gfold, CT_GFOLD_NODE) that exec
 * recomputes only when a source changed, as eager's modules keep such
 * packed weights.  torch.compile's freezing does this for inference. */
ct_status ct__pass_fold_params(ct_graph *g, int *count);
ct_status ct__pass_conv_layout(ct_graph *g, int *count);
/* In a graph holding a forward max pool and the backward of the relu
 * before it: ew_grad(max_pool_backward(g, idx), y) becomes
 * max_pool_backward(ew_grad(g, v), idx) with v the pool's output (the
 * derivative over the pooled size; passes.c says why it is exact).
 * *count: the gradients moved. */
ct_status ct__pass_pool_grad(ct_graph *g, int *count);
/* In-place elementwise writes of graph temporaries nothing reads afterwards
 * become out-of-place nodes (so they fuse); not in graphs autograd records. */
ct_status ct__pass_functionalize(ct_graph *g, int *count);
/* Recomputes the folded weights of g whose sources changed (exec.c calls
 * it before every run). */
ct_status ct__graph_refresh_folds(const ct_graph *g);
ct_status ct__passes_run(ct_graph *g);

/* ---- capture (capture.c) ------------------------------------------------- */
/* Traces fn on meta tensors shaped like in[0..nin) (their sizes, strides,
 * dtypes, requires_grad) into g.  CT_OK with g->brk "" for a full graph; CT_OK
 * with g->brk set when an op needed data (the graph up to there is in g);
 * an error when fn itself failed for another reason. */
ct_status ct__trace(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, ct_graph *g);
/* The same, and when joint, grad mode is on and an output is
 * differentiable: the backward too, into the same graph (AOTAutograd's
 * joint graph; see ct_graph.joint).  Custom autograd functions are traced
 * through (their backward's ops are recorded) instead of breaking. */
ct_status ct__trace_joint(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, bool joint,
                          ct_graph *g);
/* For function transforms (src/func: vmap): the same trace, but every op
 * the op layer reports at its exit points with operands the graph knows is
 * recorded as reported (the public op and its parameters), also those exec
 * cannot replay (n->noreplay set): a transform reruns such a node through
 * the op's public function, not its kernel.  Ops nested inside a public op
 * (on temporaries it made) are still skipped; ops of a composite on its
 * inputs are recorded beside it (dead once its result is the composite's).
 * Custom autograd functions are traced through (forward and, when the
 * function differentiates inside, backward) unless an input requires grad
 * with grad mode on: then they break the graph as ct__trace's do. */
ct_status ct__trace_ops(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, ct_graph *g);
/* Nesting: a transform traced inside another's trace suspends the outer
 * trace on this thread (its ops are not recorded there) and resumes it
 * after its own trace; then its batched ops are the outer trace's. */
typedef struct ct_trace_saved {
    void *tracer;
    ct_trace_hook *hook;
    void (*need_data)(const char *op);
    bool tracing;
} ct_trace_saved;
void ct__trace_suspend(ct_trace_saved *s);
void ct__trace_resume(const ct_trace_saved *s);
/* Runs node n of g on val[] (indexed by value id: n's inputs there, its
 * outputs stored there as new references), as ct__exec does (exec.c). */
ct_status ct__exec_node(const ct_graph *g, const ct_gnode *n, ct_tensor **val);
/* op on in[0..nin) with a: meta -> allocate -> dispatch (the inputs in the
 * contig mask that are not contiguous as contiguous copies) -> record;
 * out[0..nout) registered in the scope, NULL where absent. */
ct_status ct__exec_op(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a, uint32_t contig);
/* A deep copy of src (consts retained, string parameters copied). */
ct_status ct__graph_copy(const ct_graph *src, ct_graph *dst);

/* ---- the loop-nest IR of a fused kernel (lower.c -> codegen.c) ----------------- */
/* A kernel runs over an iteration space of n_outer outer dims (parallel,
 * OpenMP) and n_inner inner dims; its stages run in order inside the
 * outer loop, each over the inner dims: a REDUCE stage folds one value to
 * a scalar per outer index (readable by later stages: CT_KI_STAGE), a STORE
 * stage writes values to output buffers at the full index.  A pointwise
 * kernel is one STORE stage; gelu(x*a+b).sum(-1) is one REDUCE stage that
 * also stores its scalar; softmax is REDUCE(max), REDUCE(sum exp(x - m)),
 * STORE(exp(x - m) / s). */
/* CONST: the literal p.value (a double) as dtype (wrapped numbers, eps) */
typedef enum { CT_KI_LOAD, CT_KI_EW, CT_KI_CAST, CT_KI_STAGE, CT_KI_CONST } ct_kinst_kind;
typedef struct ct_kinst {
    ct_kinst_kind kind;
    ct_dtype dtype;   /* the dtype of the result */
    int buf;          /* LOAD: the buffer */
    ct_op op;         /* EW: an elementwise table op (rendered by ct__ew_render) */
    ct_p_ew p;        /* EW: its parameters */
    int a[3];         /* EW: operand instructions; CAST: a[0]; STAGE: a[0] the stage */
} ct_kinst;

typedef enum { CT_KS_REDUCE, CT_KS_STORE } ct_kstage_kind;
/* MEAN: the sum divided by the number of inner elements (in double for
 * floats); MAX / MIN propagate NaN */
typedef enum { CT_KR_SUM, CT_KR_PROD, CT_KR_MAX, CT_KR_MIN, CT_KR_MEAN } ct_kred;
typedef struct ct_kstage {
    ct_kstage_kind kind;
    ct_kred red;      /* REDUCE */
    ct_dtype acc;     /* REDUCE: accumulator dtype */
    int value;        /* REDUCE: the instruction folded */
    int out_buf;      /* REDUCE: buffer its scalar is stored to (at the outer index), or -1 */
    int nstore;       /* pairs (instruction, buffer) stored at the full index (a REDUCE stage
                       * may store too: the values its loop computes); a buffer with
                       * outer_only is stored once per outer index, after the loops */
    int store_val[8], store_buf[8];
} ct_kstage;

typedef struct ct_kbuf {
    ct_dtype dtype;
    bool is_out;
    bool outer_only;  /* indexed by the outer dims alone (a reduction's result) */
} ct_kbuf;

typedef struct ct_kernel {
    char name[64];    /* the symbol; also what the profiler shows ("fused_mul_add_gelu_sum") */
    int n_outer, n_inner;
    int nbuf;
    ct_kbuf buf[16];
    int ninst;
    ct_kinst *inst;   /* instructions in dependency order (malloc'ed: ct__plan_free frees it) */
    int nstage;
    ct_kstage stage[8];
    bool team;        /* also render <name>__team: its loop over tasks a worksharing `omp for
                       * nowait` (no parallel region of its own), for a run of independent
                       * kernels that exec.c runs inside one region (ct_plan_step.team_len) */
} ct_kernel;
/* At run time the kernel is called as
 *     void name(char *const *bufs, const int64_t *shape, const int64_t *strides)
 * bufs[b]: buffer b's first element; shape[0 .. n_outer + n_inner): the
 * iteration sizes; strides[b * (n_outer + n_inner) + d]: buffer b's stride
 * (in elements, 0 where broadcast) along iteration dim d.  Sizes and
 * strides are run-time arguments, so one build serves every shape. */
typedef void (*ct_kernel_entry)(char *const *bufs, const int64_t *shape, const int64_t *strides);

/* ---- targets and rendering (codegen.c) ------------------------------------------ */
typedef struct ct_target ct_target;   /* the per-target specifics, codegen.c */
extern const ct_target ct__target_c;  /* C99 + OpenMP for the system C compiler */
/* The whole source of a translation unit defining every kernel of k[0..n)
 * (prelude included), malloc'ed, or NULL with the error. */
char *ct__render(const ct_target *t, const ct_kernel *k, int n);
/* The same; with variants, each kernel also in max-autotune's variants
 * (one translation unit still: one compiler run), variant v > 0 under the
 * symbol ct__kvariant_symbol gives. */
char *ct__render_variants(const ct_target *t, const ct_kernel *k, int n, bool variants);
/* max-autotune's kernel variants (codegen.c): how the loop over tasks runs
 * (variant 0 "default": default mode's code; "serial", "par4k", "guided");
 * all compute the same bits. */
enum { CT_KVAR_MAX = 4 };
const char *ct__kvariant_name(int v);
int ct__kvariant_count(const ct_kernel *k);
void ct__kvariant_symbol(const ct_kernel *k, int v, char *out, size_t n);

/* ---- building (build.c) ------------------------------------------------------ */
typedef struct ct_cc_lib ct_cc_lib;
/* Builds source (or loads it from the disk cache) into a loaded shared
 * object.  *from_cache says which.  NULL with the error (no compiler on
 * PATH, a compile error: the compiler's first lines in the message). */
ct_cc_lib *ct__cc_build(const char *source, bool *from_cache);
/* Builds several sources at once (independent kernels compile in parallel). */
ct_status ct__cc_build_many(const char *const *sources, int n, ct_cc_lib **libs, bool *from_cache);
void *ct__cc_sym(ct_cc_lib *lib, const char *name);
void ct__cc_close(ct_cc_lib *lib);
/* The cache key of lib's entry (64 hex digits: the hash of its source, the
 * compiler and the flags). */
const char *ct__cc_key(const ct_cc_lib *lib);
/* max-autotune's choices kept beside the artifacts: a record (text, at most
 * cap - 1 bytes) under the SHA-256 of key (what the choice depends on: the
 * artifact's key, the shapes, the thread count, the CPU), in
 * <cache dir>/<hash>.tune.  Load: true when a whole, valid record is there
 * (a truncated, corrupt or foreign file reads as none).  Store: written
 * atomically (temp file, fsync, rename); false when it could not be. */
bool ct__tune_load(const char *key, char *rec, size_t cap);
bool ct__tune_store(const char *key, const char *rec);
/* The CPU's model name ("AMD EPYC 7B13", /proc/cpuinfo), "unknown" if none. */
const char *ct__cpu_model(void);
/* This process's compiler runs that built an entry, and builds answered
 * from the cache (the in-process table or the disk), for tests. */
/* times this process ran the compiler's --version (its identity: build.c
 * reads it from the cache dir's record while the compiler file is unchanged) */
int64_t ct__cc_version_runs(void);
void ct__cc_counters(int64_t *invocations, int64_t *hits);

/* ---- the plan: what runs (lower.c builds it, exec.c runs it) ------------------ */
/* A fused kernel in a plan.  Its iteration space is a permutation of a
 * broadcast shape; at run time exec.c reads each iteration size from a
 * tensor (shape_buf/shape_dim) and each buffer's strides from its tensor
 * (dim_map), so a symbolic size needs no rebuild. */
typedef struct ct_kcall {
    ct_kernel k;
    int buf_val[16];                  /* the graph value of each buffer (outputs: fresh, contiguous) */
    signed char dim_map[16][CT_MAX_DIMS]; /* [b][d]: the dim of buffer b's tensor that iteration dim
                                       * d runs along; -1: none (stride 0).  A size-1 dim reads as
                                       * stride 0 (broadcast). */
    int shape_buf[CT_MAX_DIMS], shape_dim[CT_MAX_DIMS]; /* iteration size d: buffer shape_buf[d]'s
                                       * tensor's size along shape_dim[d] */
    int first_node, last_node;        /* the fused nodes' span in program order */
    int ndef;                         /* in-place writes folded in (lower.c): value def_val[i] is */
    int def_val[32];                  /* buffer def_buf[i]'s tensor (a graph input or constant, */
    signed char def_buf[32];          /* written by the kernel) once the kernel has run */
    ct_kernel_entry fn;               /* after ct__plan_build: the variant that runs */
    ct_kernel_entry team_fn;          /* k.team: the __team entry (called inside a parallel region) */
    ct_cc_lib *lib;
    /* max-autotune (p->autotune): the variants' entries (var_fn[0] the
     * default), the one chosen, each one's median time (ms; < 0: not timed,
     * or rejected: its result differed from the default's) */
    int nvar, choice;
    ct_kernel_entry var_fn[CT_KVAR_MAX];
    double var_ms[CT_KVAR_MAX];
    bool tuned;                       /* the choice is made (or there is none to make) */
    bool tune_cached;                 /* ... read from the cache, not timed */
} ct_kcall;

typedef struct ct_plan_step {
    int node;    /* >= 0: run graph node `node` through the op layer (ct__op_multi / ct__op_into) */
    int kcall;   /* >= 0: run p->kc[kcall] */
    /* max-autotune, a node step: the implementation it runs with (route_kind
     * a CT_ROUTE_* of ops/route.h, route its value; 0: the library's rule),
     * the medians of the two (ms), whether timed or read from the cache */
    signed char route_kind, route;
    bool tuned, tune_cached;
    /* >= 2 on the first step of a team (ct__lower): this kernel step and the
     * team_len - 1 after it are kernel steps none of which touches memory
     * another writes; exec.c runs them in one parallel region, each
     * kernel's tasks split over the team with no barrier between them
     * (Inductor's combo kernels: one fork/join instead of one per kernel) */
    int team_len;
    double route_ms[2];
} ct_plan_step;

typedef struct ct_plan {
    ct_plan_step *step;
    int nstep;
    ct_kcall *kc;
    int nkc;
    /* max-autotune: ct__plan_build builds every kernel's variants; the first
     * run (ct__exec) times them on the real tensors, and the library's
     * implementations of node steps that have two (GEMM: OpenBLAS or
     * ctorch's own; conv: ctorch's or oneDNN), keeps the fastest of each,
     * and records the choice beside the artifacts (ct__tune_store), where a
     * later process finds it */
    bool autotune;
    int *wroot;  /* the inputs and constants kernels write in place (value ids), malloc'ed */
    int nwroot;
    /* per value, the last step that touches it (ct__plan_liveness; NULL:
     * none computed, everything lives to the end of the run): exec drops
     * its reference to a node's or kernel's result after that step, so
     * the caching allocator hands the memory to the next result while it
     * is still warm (INT_MAX: an output or constant, kept; an input's
     * reference is the caller's unless donated: ct__exec_donated) */
    int *last_use;
    /* the same by step: the values whose last step is s are
     * die_v[die_off[s] .. die_off[s + 1]) (a value read only through its
     * views dies with the last of them); malloc'ed with last_use */
    int *die_off, *die_v;
} ct_plan;

/* The call arguments of kc over tensors t[b] (one per buffer: inputs the
 * values' tensors, outputs fresh contiguous tensors of the values' shapes):
 * bufs[b] = t[b]'s first element, shape[d] = the iteration sizes (from
 * shape_buf/shape_dim), strides[b * nd + d] = t[b]'s stride along dim_map[b][d]
 * (0 for -1 or a size-1 dim), nd = n_outer + n_inner; for a kernel without
 * reductions, outer dims the buffers' layouts let run as part of the last
 * dim are folded into it (their size 1).  CT_OK, or an error when a
 * tensor's geometry does not fit the kernel. */
ct_status ct__kcall_args(const ct_kcall *kc, ct_tensor *const *t, char **bufs, int64_t *shape,
                         int64_t *strides);
/* Fusion: groups g's live nodes into kernels and orders the steps (every
 * node not fused is a node step).  With no fusion possible, every live node
 * is a step.  Does not build. */
ct_status ct__lower(const ct_graph *g, const ct_compile_opts *o, ct_plan *p);
/* Renders every kernel of p, builds them (ct__cc_build_many: cache, in
 * parallel) and loads the entry points.  *built / *loaded count kernels
 * compiled now / found in the disk cache. */
ct_status ct__plan_build(ct_plan *p, int64_t *built, int64_t *loaded);
void ct__plan_free(ct_plan *p);
/* Fills p->last_use (see there); out of memory leaves it NULL. */
void ct__plan_liveness(const ct_graph *g, ct_plan *p);
/* The plan without kernels: every live node of g a node step, in program
 * order (fusion off, or it failed).  exec.c. */
ct_status ct__plan_nodes(const ct_graph *g, ct_plan *p);
/* Runs p over g on real tensors: in[0..nin) the inputs, out[0..nout) receive
 * the outputs (new references in the innermost scope).  Node steps go
 * through the op layer, so autograd records them as eager ops do. */
ct_status ct__exec(const ct_graph *g, const ct_plan *p, ct_tensor *const *in, int nin,
                   ct_tensor **out, int nout);
/* The draws of the attention-dropout nodes of a run (node, seed, offset):
 * exec fills it for the forward half of a joint graph, and the backward
 * half's attention backward nodes (gnode.link) read them back. */
typedef struct ct_exec_rng {
    int n;
    int node[32];
    int64_t seed[32], offset[32];
} ct_exec_rng;
ct_status ct__exec_rng(const ct_graph *g, const ct_plan *p, ct_tensor *const *in, int nin,
                       ct_tensor **out, int nout, ct_exec_rng *rng);
/* ct__exec_rng where donate gives the run the inputs' references: in[k]
 * are set to NULL, and each input is dropped after the last step that
 * reads it (the compiled backward's saved tensors, as the autograd engine
 * frees an eager node's saved tensors after it runs).  Without donate it
 * is ct__exec_rng. */
/* autograd/function.c: in a custom function's backward, whether the saved
 * tensors go after it, and taking them (autograd_impl.h) */
bool ct__ctx_final(const ct_function_ctx *ctx);
ct_status ct__ctx_take_saved(ct_function_ctx *ctx, ct_tensor **dst, int n);
ct_status ct__exec_donated(const ct_graph *g, const ct_plan *p, ct_tensor **in, int nin,
                           ct_tensor **out, int nout, ct_exec_rng *rng, bool donate);

/* Ops a compiled graph replays through their public functions (linear,
 * the matrix products, index_select, gather, scatter_add, index_add: their kernels run on
 * operands the
 * public function prepares); capture.c.  Every other op is replayed through the op layer
 * (ct__ew, ct__op, the kernel on the reported operands), which the tracer
 * checks as it records. */
bool ct__trace_public_replay(ct_op op);

/* ---- compiled modules (the hook is src/nn/module.c's) --------------------- */
/* Makes ct_module_forward(m, in, n) return fwd(ctx, m, in, n) instead of
 * running m's class forward; ctx is freed with free_ctx(ctx) when the module
 * goes or the override is replaced.  fwd NULL removes it. */
void ct__module_set_forward(ct_module *m, ct_tensor *(*fwd)(void *ctx, ct_module *m, ct_tensor *const *in, int n),
                            void *ctx, void (*free_ctx)(void *ctx));
/* The override's ctx, or NULL. */
void *ct__module_get_forward(ct_module *m);
/* The ct_compiled behind a module compiled by ct_module_compile, or NULL (tests). */
ct_compiled *ct__module_compiled(ct_module *m);

/* ---- debugging (compile.c) ------------------------------------------------ */
/* With CT_COMPILE_LOG naming "autotune" (or "all"): the line on stderr. */
void ct__compile_log_autotune(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* With CT_COMPILE_DEBUG=dir: writes text to <dir>/<fn-id>_<variant>_<tag>.txt
 * for the compile in progress on this thread (the graph is tag "graph";
 * passes add theirs, "after_dce", "kernels.c", ...); nothing otherwise. */
void ct__compile_debug_dump(const char *tag, const char *text);
/* Tests: the clock (ms) the compiled-against-eager probes read; NULL (the
 * default) the monotonic clock. */
extern double (*ct__compile_clock)(void);

#endif
