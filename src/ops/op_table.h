/* op_table.h -- private: the op layer's interface: the ct_op enum (from
 * ops.def), the typed parameters (params.h) and ct_args, the op info and
 * per-device kernel tables, dispatch, ct__finish, and the hooks through
 * which autograd records (installed by src/autograd at initialization).
 * Includes core's tensor_impl.h.  Used by ops, backends and every layer
 * above; core does not include it. */
#ifndef CT_OP_TABLE_H
#define CT_OP_TABLE_H

#include "../core/device.h"
#include "../core/tensor_impl.h"

/* ---- the op table ------------------------------------------------------ */
#define CT_OPF_EW      1u  /* elementwise */
#define CT_OPF_COMM    2u  /* commutative */
#define CT_OPF_VIEW    4u  /* result shares storage */
#define CT_OPF_REDUCE  8u
#define CT_OPF_RANDOM 16u
#define CT_OPF_NODIFF     32u /* its outputs are never differentiable (bool/integer results) */
#define CT_OPF_UNRECORDED 64u /* run by other ops or by backward passes; never an autograd node */
#define CT_OPF_COMPOSITE 128u /* no kernel: built from other ops (named for the profiler) */
#define CT_OPF_FUSED     256u /* a fused op (fused.h): on a device without its kernel its entry runs
                               * its composite fallback of public ops there, never the cpu fallback */

/* The dtype rule of an elementwise op (its `.ew_mode` column in ops.def,
 * read by ct__meta_ew): how the inputs' promoted dtype (ct_result_type)
 * becomes the compute and output dtypes, and which dtypes are refused. */
enum {
    CT_EW_SAME = 0,     /* compute and output in the promoted dtype */
    CT_EW_FLOAT = 1,    /* integers/bool promote to the default float */
    CT_EW_BOOL_OUT = 2, /* compute in the promoted dtype, output bool */
    CT_EW_INT_ONLY = 4, /* integers and bool only (bitwise ops) */
    CT_EW_NO_BOOL = 8,  /* bool input not allowed (neg, sub) */
    CT_EW_NO_COMPLEX = 16,
    CT_EW_REAL_OUT = 32, /* complex input gives its real dtype (abs) */
    CT_EW_FLOAT_ONLY = 64 /* floating point only: integer/bool input is an error
                           * (silu, gelu, hypot: PyTorch has no integer kernels) */
};

typedef enum ct_op {
#define CT_OP(name, nin, nout, flags, ...) CT_OP_##name,
#include "ops.def"
#undef CT_OP
    CT_OP_COUNT
} ct_op;

#include "params.h"

/* Parameters an op passes to its kernel and its derivatives: the op and
 * its family's typed struct, read by name (a->p.<family>.<field>; see
 * src/ops/params.h and params_<family>.def).  Make one with ct__args(op)
 * (zeroed).  An autograd node keeps offsetof(ct_args, p) + its family's
 * size, so never copy a node's ct_args whole: copy the family struct. */
typedef struct ct_args {
    ct_op op;
    ct_params p;
} ct_args;

/* args with op set and everything else zero */
static inline ct_args ct__args(ct_op op) {
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    return a;
}

/* Same op and equal parameters (every field of the op's family). */
bool ct__args_equal(const ct_args *a, const ct_args *b);
/* Equal args hash equal; computed over the op and its family's fields. */
uint64_t ct__args_hash(const ct_args *a);
/* "uniform(from=0, to=1, ...)", malloc'ed (free it); NULL when out of memory. */
char *ct__args_str(const ct_args *a);

typedef ct_status (*ct_kernel_fn)(ct_tensor *const *out, int nout,
                                  ct_tensor *const *in, int nin, const ct_args *a);

/* ---- meta functions ------------------------------------------------------ */
/* What an op's meta function computes for one output, without data. */
typedef struct ct_meta {
    int ndim;                       /* -1: this output is not produced (an optional output) */
    ct_dtype dtype;
    ct_device device;
    unsigned flags;                 /* CT_META_* */
    int64_t sizes[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS];   /* read only with CT_META_STRIDED / CT_META_VIEW */
    int64_t offset;                 /* CT_META_VIEW: storage offset of the view */
    int base;                       /* CT_META_VIEW: the input whose storage it shares */
} ct_meta;
#define CT_META_STRIDED 1u  /* a fresh tensor laid out with these strides (else contiguous) */
#define CT_META_VIEW    2u  /* shares in[base]'s storage (sizes, strides, offset) */
#define CT_META_DYNAMIC 4u  /* sizes depend on the data (nonzero, unique, ...): ndim and dtype
                             * are known, the sizes are not; the kernel allocates */
/* From the inputs' sizes, strides, dtypes and devices and the parameters,
 * fills out[0..nout) and runs every argument check (CT_OK or the error,
 * recorded with the op's message).  Reads no data: it runs on meta tensors. */
typedef ct_status (*ct_meta_fn)(ct_meta *out, int nout, ct_tensor *const *in, int nin,
                                const ct_args *a);

/* ---- the table ------------------------------------------------------------ */
/* One entry per op, filled at compile time from ops.def with designated
 * initializers (nothing is registered at run time). */
typedef struct ct_op_info {
    const char *name;
    int nin, nout;                   /* nin 0: variadic or none */
    unsigned flags;                  /* elementwise math: ew_math.def (render.h) */
    ct_meta_fn meta;                 /* shapes/dtypes/checks (NULL: still inside the public function) */
    unsigned ew_mode;                /* elementwise ops: their dtype rule (CT_EW_*) */
    /* derivative rules (src/autograd, declared in rules.h): vjp is a
     * ct_vjp_fn; vmap a batching rule (ct_vmap_rule_fn, src/func); jvp
     * (forward mode) is still to come */
    void *vjp, *jvp, *vmap;
    /* which saved values the vjp reads (CT_READS_*: bit k input k, bit 16+j
     * output j); only those are saved and checked against in-place edits */
    unsigned vjp_reads;
    /* with has_reads_by: what the gradient of input k (< 4) alone reads; a
     * node saves the union over the inputs that want a gradient (PyTorch
     * saves mm's mat2 only when self requires grad, likewise) */
    bool has_reads_by;
    unsigned reads_by[4];
} ct_op_info;

/* Masks of the vjp_reads column. */
#define CT_READS_IN(k) (1u << (k))          /* bit 15 stands for inputs 15 and above */
#define CT_READS_OUT(j) (1u << (16 + (j)))
#define CT_READS_IN_FROM(k) (0xFFFFu & ~((1u << (k)) - 1u)) /* inputs k, k+1, ... */
#define CT_READS_ALL 0xFFFFFFFFu
/* per-input masks of inputs 0..3 (CT_READS_ALL: the op's whole mask) */
#define CT_READS_BY(r0, r1, r2, r3) .has_reads_by = true, .reads_by = {r0, r1, r2, r3}

extern const ct_op_info ct__op_info[CT_OP_COUNT];
/* Per-device kernel tables; a NULL slot means "not on this device". */
extern ct_kernel_fn ct__kernels[CT_DEVICE_COUNT][CT_OP_COUNT];
/* Which half-precision dtypes a device's kernel of an op computes itself
 * (CT_HALF_F16 | CT_HALF_BF16): it reads f16/bf16 operands, computes in the
 * wider registers it chooses (f32 on the CPU, PyTorch's Vectorized<BFloat16>
 * approach) and writes f16/bf16, so the op layer passes them as they are.
 * A clear bit: the op layer converts those operands to f32 and the result
 * back (whole-tensor copies).  Set by the backends at registration. */
#define CT_HALF_F16 1u
#define CT_HALF_BF16 2u
extern unsigned char ct__kernel_half[CT_DEVICE_COUNT][CT_OP_COUNT];
/* true when dt is f16/bf16 and dev's kernel of op computes it natively */
static inline bool ct__half_native(ct_device dev, ct_op op, ct_dtype dt) {
    unsigned bit = dt == CT_F16 ? CT_HALF_F16 : dt == CT_BF16 ? CT_HALF_BF16 : 0u;
    return bit && (unsigned)dev < CT_DEVICE_COUNT && (ct__kernel_half[dev][op] & bit);
}
/* The op layer's one-time initialization (idempotent, thread-safe): the
 * backends' tables (src/backend/registry.c), autograd's hooks and
 * derivatives (ct__ag_init), the profiler's environment switch. */
void ct__backends_init(void);
/* Backends' registration functions (one per kernel family file). */
void ct__cpu_register_copy(ct_kernel_fn *t);
void ct__cpu_register_elementwise(ct_kernel_fn *t);
void ct__cpu_register_reduce(ct_kernel_fn *t);
void ct__cpu_register_index(ct_kernel_fn *t);
void ct__cpu_register_linalg(ct_kernel_fn *t);
void ct__cpu_register_conv(ct_kernel_fn *t);
void ct__cpu_register_random(ct_kernel_fn *t);
void ct__cpu_register_attention(ct_kernel_fn *t);
void ct__cpu_register_bn(ct_kernel_fn *t);        /* batch_norm_fwd/_bwd/_eval (bn.c) */
void ct__cpu_register_tfm_rows(ct_kernel_fn *t);  /* add_layer_norm, bias_act (tfm_rows.c) */
void ct__cpu_register_optim(ct_kernel_fn *t);     /* sgd_step, adam_step (optim.c) */
void ct__cpu_register_reduce_avx2(ct_kernel_fn *t); /* reduce.c built for AVX2 + FMA */
void ct__cpu_register_conv_avx2(ct_kernel_fn *t);   /* conv.c built for AVX2 + FMA */

/* Runs op's kernel for the device of out[0] (or in[0]). */
ct_status ct__dispatch(ct_op op, ct_tensor *const *out, int nout,
                       ct_tensor *const *in, int nin, const ct_args *a);

/* ---- the cpu fallback (src/backend/fallback.c) ---------------------------
 * A device with data that is not host memory (OpenCL, CUDA) runs an op it
 * has no kernel for on the cpu: ct__dispatch calls ct__fallback_run when
 * the device's slot is NULL or its kernel declines the call.  See
 * fallback.c for the copies, views and aliasing. */
/* Whether dev's missing kernels run through the fallback: a device with
 * data that is not host memory, unless CT_DEVICE_FALLBACK=0. */
bool ct__fallback_serves(ct_device dev);
/* The cpu kernel of op on host mirrors of out/in (device dev), the outputs
 * copied back.  CT_OK or the error. */
ct_status ct__fallback_run(ct_op op, ct_device dev, ct_tensor *const *out, int nout, ct_tensor *const *in,
                           int nin, const ct_args *a);
/* What a device kernel returns when it cannot serve a call (a dtype, a
 * layout it has no code for), before writing any output: records "op: no
 * kernel for device <dev> (why)" and marks the call declined, so that
 * ct__dispatch runs the fallback instead. */
ct_status ct__no_device_kernel(const char *op, ct_device dev, const char *why);
/* Whether the kernel just run declined its call (clears the mark). */
bool ct__device_kernel_declined(void);
/* How many calls of op (-1: of every op) ran through the fallback (tests). */
long ct__fallback_runs(int op);

/* The device an op on inputs in[0..nin) runs on: that of the first input
 * that is not a 0-dim cpu tensor (0-dim cpu tensors, such as wrapped
 * numbers, combine with tensors of any device); cpu when there is none.
 * That input's device index becomes the thread's current one for its type,
 * so that the op's outputs (and whatever it allocates) land beside it. */
ct_device ct__op_device(ct_tensor *const *in, int nin);
/* The first input on a device other than cpu and meta makes its index the
 * thread's current one for its type (what an op allocates lands beside its
 * inputs); nothing for cpu-only ops (a compare per input). */
static inline void ct__follow_inputs(ct_tensor *const *in, int nin) {
    for (int k = 0; k < nin; k++)
        if (in[k] && in[k]->storage->device != CT_CPU && in[k]->storage->device != CT_META) {
            ct__device_set_current(in[k]->storage->device, in[k]->storage->device_index);
            return;
        }
}
/* "cpu", "opencl:1", ... of t's device */
const char *ct__tensor_dev_str(const ct_tensor *t, char *buf, size_t n);

/* Every op ends with this: registers the fresh result in the innermost
 * scope (and is the single point where autograd records the node).
 * Takes ownership of `out`; returns out. NULL out stays NULL. */
ct_tensor *ct__finish(ct_op op, ct_tensor *out, ct_tensor *const *in, int nin, const ct_args *a);
/* Same for multi-output ops. Each non-NULL out[k] is registered. */
void ct__finish_multi(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a);

/* ---- the compiler's tracer (src/compile/capture.c) ----------------------- */
/* While a thread traces a function (ct_compile), ct__tracer() on that
 * thread returns its hook, and the op layer's exit points (ct__finish,
 * ct__finish_multi, ct__finish_inplace, ct__fused_run) report each op to
 * it; the device rules then treat a cpu tensor mixed with meta tensors as
 * if it were on meta (its data is never read by the meta kernels).  Other
 * threads and untraced runs pay one predictable branch on a relaxed load
 * of a global counter. */
typedef struct ct_trace_hook ct_trace_hook;
struct ct_trace_hook {
    /* op ran: out[0..nout) from in[0..nin) (dst: the tensor an in-place op
     * wrote, then out[0] == dst; else NULL) */
    void (*op)(ct_trace_hook *h, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in,
               int nin, const ct_args *a, ct_tensor *dst);
    /* a kernel is about to run (ct__dispatch): the tracer checks that an
     * op's public function ran its kernel on the operands and parameters
     * it reports, so that the compiled graph can replay it */
    void (*disp)(ct_trace_hook *h, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in,
                 int nin, const ct_args *a);
    /* an in-place op begins on a cpu tensor t while tracing (protect), and
     * whether a kernel's output t is such a tensor (protected_write): its
     * kernels then run on meta, so tracing writes nothing real */
    void (*protect)(ct_trace_hook *h, ct_tensor *t);
    bool (*protected_write)(ct_trace_hook *h, const ct_tensor *t);
    /* tracing a joint forward + backward graph: autograd's backward is
     * traced too, so a custom function need not break the graph */
    bool joint;
    /* something the tracer cannot follow happened: a graph break */
    void (*brk)(ct_trace_hook *h, const char *op, const char *why);
};
extern atomic_int ct__trace_count;              /* threads tracing now */
extern _Thread_local ct_trace_hook *ct__trace_tl; /* this thread's tracer, or NULL */
static inline ct_trace_hook *ct__tracer(void) {
    if (__builtin_expect(atomic_load_explicit(&ct__trace_count, memory_order_relaxed) != 0, 0))
        return ct__trace_tl;
    return NULL;
}

/* a and b on the same device, index included; while tracing, cpu counts as
 * meta (the device rule above) */
static inline bool ct__same_device(const ct_tensor *a, const ct_tensor *b) {
    ct_device da = a->storage->device, db = b->storage->device;
    if (da == db) return a->storage->device_index == b->storage->device_index;
    return ct__tracer() && ((da == CT_META && db == CT_CPU) || (da == CT_CPU && db == CT_META));
}

/* ---- autograd's hooks -------------------------------------------------- */
/* The op layer knows nothing of autograd: autograd (a layer above) installs
 * these at the op layer's initialization, the way backends fill the kernel
 * tables, and ct__finish / the in-place paths call through them.  Until
 * then they point to trampolines that run the initialization first, so an
 * op before any dispatch (a view of a ct_from_blob tensor) still records. */
typedef struct ct_ag_hooks {
    /* an op on these inputs must be recorded (grad mode and an input that
     * requires grad, or inference mode: its results are marked) */
    bool (*active)(ct_tensor *const *in, int nin);
    /* records the node of op (out[0..nout) from in[0..nin)); CT_OK or an error */
    ct_status (*record)(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a);
    /* a view op's result out of in: remembers its base */
    void (*track_view)(ct_tensor *out, ct_tensor *in);
    /* ct__inplace_begin / _abort / ct__finish_inplace below */
    ct_status (*inplace_begin)(ct_tensor *t, ct_tensor *const *in, int nin, const char *opname);
    void (*inplace_abort)(ct_tensor *t);
    ct_tensor *(*finish_inplace)(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin,
                                 const ct_args *a);
    /* forward AD: an input has a tangent at an active dual level (a fused
     * path that no jvp rule covers must then take its composite one) */
    bool (*fw_any)(ct_tensor *const *in, int nin);
} ct_ag_hooks;
extern ct_ag_hooks ct__ag_hooks;
/* Installs h (copied); called by ct__ag_init under the op layer's once. */
void ct__ag_set_hooks(const ct_ag_hooks *h);
/* Defined by src/autograd (its hooks and the op table's derivative slots);
 * the op layer's initialization calls it, which is also what links
 * autograd into a program built against the static library. */
void ct__ag_init(void);

/* Cheap test used by ct__finish and by ops that pick a path by whether
 * their result will be recorded. */
static inline bool ct__ag_active(ct_tensor *const *in, int nin) { return ct__ag_hooks.active(in, nin); }
static inline void ct__ag_track_view(ct_tensor *out, ct_tensor *in) { ct__ag_hooks.track_view(out, in); }
/* An input has a forward-AD tangent (see ct_ag_hooks.fw_any). */
static inline bool ct__fw_on(ct_tensor *const *in, int nin) { return ct__ag_hooks.fw_any(in, nin); }
/* In-place ops call ct__inplace_begin(t, in, nin, name) before writing t
 * (it refuses leaves that require grad and, when autograd must record the
 * op, keeps a clone of t's old value), then ct__finish_inplace(): bumps the
 * version counter, records the node, returns t (no new ref).  After a
 * failure between the two, call ct__inplace_abort(t). */
static inline ct_status ct__inplace_begin(ct_tensor *t, ct_tensor *const *in, int nin,
                                          const char *opname) {
    ct_trace_hook *h;
    if (t && t->storage->device == CT_CPU && (h = ct__tracer()) && h->protect) h->protect(h, t);
    return ct__ag_hooks.inplace_begin(t, in, nin, opname);
}
static inline void ct__inplace_abort(ct_tensor *t) { ct__ag_hooks.inplace_abort(t); }
static inline ct_tensor *ct__finish_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin,
                                            const ct_args *a) {
    /* the tracer first: forward-mode rules in finish_inplace read t's new value */
    ct_trace_hook *h;
    if (t && (h = ct__tracer())) h->op(h, op, &t, 1, in, nin, a, t);
    return ct__ag_hooks.finish_inplace(op, t, in, nin, a);
}

#endif
