/* autograd_impl.h -- private: graph nodes, autograd metadata on tensors,
 * the recording hooks it installs in the op layer, and the VJP signature. */
#ifndef CT_AUTOGRAD_IMPL_H
#define CT_AUTOGRAD_IMPL_H

#include "../ops/op_table.h"
#include "ctorch/autograd.h"

typedef struct ct_node ct_node;

/* What a node keeps of an input its backward reads only for the shape:
 * dtype, device (type and index) and sizes (the tape saves only the tensors the op's
 * vjp_reads mask names, like PyTorch's SavedVariables per formula). */
typedef struct ct_geom {
    ct_dtype dtype;
    ct_device device;
    int device_index;           /* opencl:1 -> 1 (a copy's backward goes back there) */
    int ndim;                   /* -1: the input was absent (NULL) */
    int64_t sizes[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS], offset; /* the view into its storage */
    size_t storage_nbytes;
} ct_geom;

/* Where the gradient of one input flows: output `nr` of `node`. */
typedef struct ct_edge {
    ct_node *node; /* strong reference; NULL: no gradient wanted */
    int nr;
} ct_edge;

/* What a backward function sees. */
typedef struct ct_vjp_ctx {
    ct_node *node;
    ct_tensor *const *in;   /* saved inputs (their values at forward time); NULL
                             * for an input the op's vjp_reads mask does not name:
                             * read those with ct__vjp_in (an error, not a crash)
                             * and their shape with ct__vjp_geom */
    int nin;
    ct_tensor *const *out;  /* saved outputs (likewise, per the mask) */
    int nout;
    const ct_args *a;       /* the op's parameters */
    const bool *needs;      /* needs[k]: input k wants a gradient */
} ct_vjp_ctx;

/* Computes gin[k] for every k with needs[k] from gout (gout[j] is NULL when
 * output j received no gradient; at least one is non-NULL).  Written with
 * public ops, so it is itself differentiable; results are scope-owned. */
typedef ct_status (*ct_vjp_fn)(const ct_vjp_ctx *c, ct_tensor *const *gout, ct_tensor **gin);

typedef struct ct_hook { ct_grad_hook fn; void *user; struct ct_hook *next; } ct_hook;

enum { CT_NODE_OP = 0, CT_NODE_ACCUMULATE, CT_NODE_CUSTOM, CT_NODE_COPY_SLICES };

struct ct_node {
    atomic_long refcount;
    int kind;
    ct_op op;
    size_t bytes;              /* the node's block (ct__obj_alloc) */
    char name[64];
    ct_args *args;             /* the op and its family's typed parameters only (in the
                                * node's block: offsetof(ct_args, p) + the family size) */
    char *str;                 /* owned copies of args' string parameters (one block) */
    int nin, nout;
    ct_edge *next;             /* nin edges */
    ct_tensor **in, **out;     /* saved tensors (NULL when not saved) */
    int64_t *in_ver, *out_ver; /* storage versions at save time */
    ct_geom *in_geom;          /* per-input shape/dtype (OP and CUSTOM nodes) */
    bool released;             /* saved tensors freed after backward */
    int64_t seq;               /* creation order (larger = later) */
    uint64_t accum_mask;       /* bit k: the running VJP was handed input k's gradient
                                * buffer by ct__vjp_accum (engine use only) */
    ct_tensor *leaf;           /* ACCUMULATE: the leaf (strong) */
    /* custom functions */
    const ct_function_def *fdef;
    struct ct_function_ctx *fctx;
    /* COPY_SLICES: geometry of the view written in place, relative to base */
    int vnd;
    int64_t vsizes[CT_MAX_DIMS], vstrides[CT_MAX_DIMS], voffset;
    /* overrides the op table's vjp (nodes made by the engine itself) */
    ct_vjp_fn view_vjp;
    /* tensors (weak) with hooks or retain_grad on output j */
    ct_tensor **watch;
    /* engine scratch (a graph is backwarded by one thread at a time) */
    int deps;
    ct_tensor **buf;
    int64_t epoch;
    /* per-output dtype/shape (for zero-filling missing gradients) */
    ct_dtype *out_dtype;
    int *out_ndim;
    int64_t (*out_sizes)[CT_MAX_DIMS];
};

typedef struct ct_ag_meta {
    bool requires_grad;
    bool retains_grad;
    bool inference;
    ct_node *grad_fn;          /* strong; NULL for leaves */
    int output_nr;
    ct_node *weak_fn;          /* saved outputs: the node (not owned) */
    ct_node *grad_acc;         /* leaves: AccumulateGrad node (not owned) */
    ct_tensor *grad;           /* owned */
    ct_hook *hooks;
    ct_tensor *base;           /* views made under grad mode: root base (owned) */
    int64_t base_fn_seq;       /* seq of base's grad_fn when this view's history was set (-1: none) */
    struct ct_fw_entry *fw;    /* forward AD: tangents, one entry per dual level (forward.c) */
} ct_ag_meta;

/* meta of t, created on demand (NULL only when out of memory) */
ct_ag_meta *ct__ag_meta(ct_tensor *t);
static inline ct_ag_meta *ct__ag_peek(const ct_tensor *t) { return (ct_ag_meta *)t->autograd; }
bool ct__ag_requires_grad(const ct_tensor *t);

/* Called by ct__finish*: records a node when grad mode is on and an input
 * requires grad.  Returns CT_OK or an error (e.g. inference tensors). */
ct_status ct__ag_record(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a);
/* True when an op on these inputs must be recorded. */
bool ct__ag_needed(ct_tensor *const *in, int nin);
/* In-place: before op writes t.  Checks leaf rules; for a recorded in-place
 * op, the driver computes out of place and calls ct__ag_rebase(t, result). */
ct_status ct__ag_check_inplace(ct_tensor *t, const char *opname);
/* t takes result's values and history (in-place op under autograd); t's
 * base, if t is a view, gets a CopySlices node. */
ct_status ct__ag_rebase(ct_tensor *t, ct_tensor *result);
void ct__ag_node_release(ct_node *n);
/* A custom function's backward may take its saved tensors when they go
 * after it (function.c; the compiled backward's memory: compile.c). */
bool ct__ctx_final(const ct_function_ctx *ctx);
ct_status ct__ctx_take_saved(ct_function_ctx *ctx, ct_tensor **dst, int n);
/* The in-place hooks (inplace.c) ct__ag_init installs as ct__ag_hooks'
 * inplace_begin, inplace_abort and finish_inplace (see src/ops/op_table.h). */
ct_status ct__ag_inplace_begin(ct_tensor *t, ct_tensor *const *in, int nin, const char *opname);
void ct__ag_inplace_abort(ct_tensor *t);
ct_tensor *ct__ag_finish_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin,
                                 const ct_args *a);
ct_node *ct__ag_new_node(int kind, int nin, int nout, const char *name);
/* A view whose base was modified in place (through another view) since its
 * history was set gets a fresh grad_fn reading from the base, like PyTorch. */
ct_status ct__ag_refresh_view(ct_tensor *t);
int64_t ct__ag_fn_seq(const ct_tensor *t);
ct_status ct__ag_view_from_base(ct_tensor *t, ct_tensor *base);
ct_edge ct__ag_gradient_edge(ct_tensor *t);
ct_tensor *ct__as_strided_backward(ct_tensor *gv, ct_tensor *base, int vnd, const int64_t *vsizes,
                                   const int64_t *vstrides, int64_t voffset);
bool ct__ag_anomaly(void);
/* Sums g over broadcast dims so it has the given shape. Scope-owned. */
ct_tensor *ct__sum_to(ct_tensor *g, const int64_t *shape, int ndim);
/* g (of some dtype) as a gradient for tensor t: sum_to t's shape, cast to t's dtype. */
ct_tensor *ct__grad_for(ct_tensor *g, const ct_tensor *t);

/* Saved input k / output j of the node a VJP runs for: the tensor when
 * the op's vjp_reads mask names it (NULL stays NULL: an absent optional
 * input), else NULL with a CT_ERR_AUTOGRAD error naming the op, so a VJP
 * reading what its mask does not declare fails loudly instead of crashing
 * or computing garbage. */
ct_tensor *ct__vjp_in(const ct_vjp_ctx *c, int k);
ct_tensor *ct__vjp_out(const ct_vjp_ctx *c, int j);
/* The gradient of input k accumulated so far by the engine, when a VJP may
 * add its own part into it in place (no graph is being built, nothing else
 * holds the buffer, it is contiguous with input k's shape and dtype), else
 * NULL.  A VJP that does so sets gin[k] to that very tensor and the engine
 * adds nothing more: an embedding's sparse rows go straight into the tied
 * [V, C] gradient, a slice's rows into its base's gradient, with no zeroed
 * full-size temporary.  Outside the engine's backward (transforms calling a
 * VJP directly) it is NULL. */
ct_tensor *ct__vjp_accum(const ct_vjp_ctx *c, int k);
/* Shape, dtype and device of input k (always available). */
static inline const ct_geom *ct__vjp_geom(const ct_vjp_ctx *c, int k) { return &c->node->in_geom[k]; }
/* ct__grad_for / zeros for a geometry record. */
ct_tensor *ct__grad_to(ct_tensor *g, const ct_geom *t);
ct_tensor *ct__zeros_geom(const ct_geom *t, ct_dtype dt);
/* A tensor with t's sizes, dtype and device over ONE element of storage (a
 * broadcast zero): for helpers that read only an input's geometry. */
ct_tensor *ct__geom_tensor(const ct_geom *t);
/* ct_eye(n, m, dt) on dev (ct_eye follows the default device; a derivative
 * follows its tensors'), scope-owned. */
ct_tensor *ct__eye_on(int64_t n, int64_t m, ct_dtype dt, ct_device dev);
/* scale * q kr^T with the causal and the boolean / additive mask
 * (derivs_attention.c; the attention VJP and JVP) */
ct_tensor *ct__sdpa_scores(ct_tensor *q, ct_tensor *kr, double scale, bool is_causal, ct_tensor *mask);
/* Live bytes of tensor storage from ct__malloc_aligned (src/core/alloc.c),
 * their peak since ct__alloc_reset_peak (for memory tests and benches). */
int64_t ct__alloc_live_bytes(void);
int64_t ct__alloc_peak_bytes(void);
void ct__alloc_reset_peak(void);
/* large blocks mapped fresh so far; bytes idle in the allocator's caches */
void ct__alloc_counts(int64_t *fresh_maps, int64_t *cached_bytes);

/* ---- forward mode (forward.c) ----------------------------------------------- */
typedef struct ct_fw_entry ct_fw_entry;
/* What a JVP rule sees: the op, its primal inputs and outputs (without
 * their tangents at the level being computed, which is hidden while the
 * rule runs), its parameters, and the level. */
typedef struct ct_jvp_ctx {
    ct_op op;
    ct_tensor *const *in;
    int nin;
    ct_tensor *const *out;
    int nout;
    const ct_args *a;
    int level;
} ct_jvp_ctx;
/* Computes tout[j] (the tangent of output j; NULL: zero) from tin[k] (the
 * tangent of input k; NULL: zero, at least one is not).  Written with
 * public ops (so reverse mode records it); results are scope-owned and may
 * have a shape that broadcasts to the output's, any floating dtype. */
typedef ct_status (*ct_jvp_fn)(const ct_jvp_ctx *c, ct_tensor *const *tin, ct_tensor **tout);
/* Active levels on this thread, and the levels hidden while a rule runs. */
extern _Thread_local int ct__fw_nlevels;
extern _Thread_local unsigned ct__fw_hidden;
/* Some t in ts[0..n) has a tangent at a visible level. */
bool ct__fw_any(ct_tensor *const *ts, int n);
/* The ops' record hook part: tangents of out from in's (every visible level). */
ct_status ct__fw_op(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin, const ct_args *a);
/* An in-place op's (inplace.c): see forward.c. */
ct_status ct__fw_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin, const ct_args *a,
                         bool appended);
/* t's tangent at level (borrowed), NULL when none or the level is hidden. */
ct_tensor *ct__fw_get(ct_tensor *t, int level);
/* v's values laid out like `like` (torch's tangent layout rule); scope-owned. */
ct_tensor *ct__fw_like_meta(ct_tensor *v, ct_tensor *like);
void ct__fw_meta_free(ct_ag_meta *m);
/* dst (an alias autograd saves) shares src's tangents. */
ct_status ct__fw_copy(ct_tensor *dst, ct_tensor *src);
struct ct_function_ctx;
ct_status ct__fw_function(const ct_function_def *def, struct ct_function_ctx *ctx, ct_tensor *const *in,
                          int nin, ct_tensor **out);
unsigned ct__fw_hide_all(void);
void ct__fw_unhide_all(unsigned prev);
/* A forward-AD tangent is about to flow through t..: pick differentiable
 * (public-op) paths over fused kernels that no rule covers. */
static inline bool ct__fw_active_on(ct_tensor *const *ts, int n) { return ct__fw_nlevels && ct__fw_any(ts, n); }

/* The derivative rules are the op table's vjp column (ops.def, declared in
 * src/ops/rules.h, defined in derivs_*.c as ct__vjp_<name>), with the
 * vjp_reads / CT_READS_BY columns saying which saved values each reads:
 * the tape saves exactly these; other inputs leave only their geometry
 * (ct__vjp_geom), and a VJP must read a value only for a gradient it
 * computes.  rules.h's declarations are checked against ct_vjp_fn here. */
#include "../ops/rules.h"

#endif
