/* autocast.h -- private: automatic mixed precision (include/ctorch/amp.h)
 * inside the op layer.
 *
 * The per-thread state (enabled, dtype, cache, nesting) lives in
 * autocast.c; the policy of each op that has one is autocast.def (torch's
 * CPU lists).  An op in those lists starts its public function with
 *
 *     CT_AUTOCAST_OP(CT_AC_mm, ct_mm(CT_AC_ARG(0), CT_AC_ARG(1)), a, b);
 *
 * which costs one thread-local load when autocast is off.  When it is on
 * (and not excluded), ct__autocast_begin casts the operands as the op's
 * policy says (ct_to_dtype: a recorded op, so autograd differentiates
 * through the cast and the compiler's tracer captures it), then the op
 * runs again on the cast operands with autocast excluded -- like torch's
 * ExcludeDispatchKeyGuard, so the ops it is built from are not cast a
 * second time -- and ct__autocast_end hands its result back.  The
 * temporaries live in a scope of their own; weights (float32 leaves that
 * require grad) are cast once per autocast region and cached. */
#ifndef CT_AUTOCAST_H
#define CT_AUTOCAST_H

#include "op_table.h"

typedef enum ct__ac_policy { CT_AC_LOWER = 1, CT_AC_FP32, CT_AC_PROMOTE } ct__ac_policy;

typedef enum ct__ac_op {
#define CT_AC(name, policy) CT_AC_##name,
#include "autocast.def"
#undef CT_AC
    CT_AC_COUNT
} ct__ac_op;

typedef struct ct__ac_entry {
    const char *name;   /* torch's op name */
    ct__ac_policy policy;
} ct__ac_entry;
extern const ct__ac_entry ct__ac_table[CT_AC_COUNT];

/* true while this thread has autocast enabled for a device and is not
 * inside an autocast op or a backward pass */
extern _Thread_local bool ct__ac_live;
static inline bool ct__autocast_on(void) { return __builtin_expect(ct__ac_live, 0); }

typedef struct ct__ac_ctx {
    ct_scope scope;
    bool failed;        /* a cast failed: the op returns NULL (the error is recorded) */
} ct__ac_ctx;

/* When autocast applies to op `id` on in[0..nin) (NULL entries skipped):
 * casts in[] in place (the casts belong to a scope opened here or to the
 * weight cache), excludes autocast, and returns true; the caller then runs
 * the op on in[] and passes the result to ct__autocast_end.  false (and
 * nothing changed) when autocast is off for the operands' device. */
bool ct__autocast_begin(ct__ac_ctx *c, ct__ac_op id, ct_tensor **in, int nin);
/* Ends what ct__autocast_begin started: r moves to the caller's scope. */
ct_tensor *ct__autocast_end(ct__ac_ctx *c, ct_tensor *r);

/* Turns autocast off on this thread until ct__autocast_resume (nestable);
 * ct_backward runs its backward pass so (torch runs the backward of each
 * op in its forward's dtypes). */
void ct__autocast_suspend(void);
void ct__autocast_resume(void);

/* Autocast bf16's linear (addmm false: y = x W^T + b) or addmm (true: y =
 * beta b + alpha x W with W [K, N]) with the casts folded into the product
 * (autocast_linear.c): true when it ran (*r the result, or NULL with the
 * error set), false when this call takes the ordinary cast path. */
bool ct__autocast_linear(ct_tensor **r, bool addmm, ct_tensor *x, ct_tensor *W, ct_tensor *b, double beta,
                         double alpha);

/* The op gemm_lp: C = round_bf16(A [M, K] @ B [K, N] (+ bias [N] f32)) with
 * A, B float32 or bfloat16 (each value rounded to bf16 first), C of dtype
 * odt (bfloat16, or float32 holding the bf16 values); scope-owned, NULL
 * with the error set. */
ct_tensor *ct__gemm_lp(ct_tensor *A, ct_tensor *B, ct_tensor *bias, ct_dtype odt);

/* Cross entropy on float16/bfloat16 logits under autocast (src/nn/loss.c)
 * without a float32 copy of them (the ops softmax_float and ce_grad_lp,
 * src/ops/reduce.c; scope-owned results, NULL with the error set):
 *   ct__softmax_float: softmax of half x along dim, float32 result, the
 *     values softmax(x.float(), dim) gives;
 *   ct__ce_grad_lp: d [N, C] of odt (half), d = p * coef[i] with
 *     coef[i] subtracted at target[i] (rows whose target is ignore: p *
 *     coef[i] only), computed in float32 and rounded once. */
ct_tensor *ct__softmax_float(ct_tensor *x, int64_t dim);
ct_tensor *ct__ce_grad_lp(ct_tensor *p, ct_tensor *t, ct_tensor *coef, int64_t ignore, ct_dtype odt);

#define CT_AC_ARG(k) ct_ac_in__[k]
/* In a public op with one tensor result: runs `call` (written with
 * CT_AC_ARG(k) for the k-th of the operands listed after it) on the
 * autocast operands and returns its result, when autocast applies. */
#define CT_AUTOCAST_OP(id, call, ...)                                                      \
    do {                                                                                   \
        if (ct__autocast_on()) {                                                           \
            ct_tensor *ct_ac_in__[] = {__VA_ARGS__};                                       \
            ct__ac_ctx ct_ac__;                                                            \
            if (ct__autocast_begin(&ct_ac__, (id), ct_ac_in__,                            \
                                   (int)(sizeof ct_ac_in__ / sizeof ct_ac_in__[0])))       \
                return ct__autocast_end(&ct_ac__, ct_ac__.failed ? NULL : (call));         \
        }                                                                                  \
    } while (0)

#endif
