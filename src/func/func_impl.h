/* func_impl.h -- private: the ct_func object shared by the transforms. */
#ifndef CT_FUNC_IMPL_H
#define CT_FUNC_IMPL_H

#include <stdatomic.h>
#include "ctorch/func.h"
#include "../compile/compile_impl.h"

struct ct_func {
    atomic_long refcount;
    ct_fn fn;
    void *ctx;
    void (*free_ctx)(void *ctx);
};

/* ---- argnums and has_aux of the transforms (grad.c) --------------------------- */
typedef struct argspec {
    int n;         /* number of argnums */
    int *argnums;  /* as given (may be negative; owned: free it) */
    bool has_aux;
} argspec;
/* From the options (NULL: argnums {0}, no aux): CT_ERR_ARG for empty or
 * repeated argnums; `who` names the transform in errors. */
ct_status ct__argspec_init(argspec *a, const ct_func_grad_opts *o, const char *who);
/* The argnums against nin inputs: idx[k] in [0, nin) (negative ones count
 * from the end), CT_ERR_ARG when out of range or naming one input twice. */
ct_status ct__argspec_resolve(const argspec *a, int nin, int *idx, const char *who);
/* How a Jacobian transform (jacrev, jacfwd) splits its nout outputs: nd
 * outputs of f whose Jacobians are asked for (each with a.n of them) and nf
 * outputs of f in all (with has_aux: one differentiated output, the rest
 * auxiliary).  CT_ERR_ARG naming `who` when nout cannot be split so. */
ct_status ct__argspec_jac_outputs(const argspec *a, int nout, int *nd, int *nf, const char *who);

/* ---- vmap (vmap.c; the rules in batch_*.c) ---------------------------------- */
/* A value while a batched graph runs: a tensor and the dim of it that is the
 * batch (bdim), or -1 when the value is the same for every sample (an
 * unbatched input, a constant, what is computed from those alone). */
typedef struct ct_bval {
    ct_tensor *t;
    int bdim;
} ct_bval;

/* What a batching rule is told about the node it runs. */
typedef struct ct_vmap_call {
    const ct_graph *g;
    const ct_gnode *n;  /* n->op, n->args (the per-sample parameters), n->nin, n->nout */
    int64_t B;          /* the batch size */
    ct_vmap_randomness randomness;
    const ct_bval *dst; /* an in-place node: the value written (n->dst), else NULL */
    bool fallback;      /* a rule sets it (with CT_OK) for a case it does not batch: the
                         * node then runs per sample */
    bool looped;        /* a rule sets it when it computed the node sample by sample itself
                         * (through the op's public function): counted as a fallback */
} ct_vmap_call;
typedef ct_status (*ct_vmap_rule_fn)(ct_vmap_call *c, const ct_bval *in, ct_bval *out);
#include "../ops/rules.h"
/* defines a rule of ../ops/rules.h */
#define CT_VMAP_RULE(fn) ct_status fn(ct_vmap_call *c, const ct_bval *in, ct_bval *out)

/* Helpers for rules (results scope-owned, NULL with the error set). */
/* v's logical (per-sample) number of dims */
static inline int ct__bv_ndim(ct_bval v) { return v.bdim >= 0 ? v.t->ndim - 1 : v.t->ndim; }
/* the batch dim moved to the front (a view); an unbatched v as it is */
ct_tensor *ct__bv_front(ct_bval v);
/* ... and an unbatched one expanded to [B, ...] */
ct_tensor *ct__bv_full(ct_bval v, int64_t B);
/* for broadcasting against values of logical rank `rank`: a batched v as
 * [B, 1 x (rank - its rank), its dims...]; an unbatched one as it is */
ct_tensor *ct__bv_align(ct_bval v, int rank);
/* the traced (per-sample) meta of node input k / output k */
const ct_meta *ct__bv_in_meta(const ct_vmap_call *c, int k);
const ct_meta *ct__bv_out_meta(const ct_vmap_call *c, int k);
/* the node's op on physical tensors with args a (every non-contiguous input
 * copied first): out[0..nout) */
ct_status ct__bv_run(const ct_vmap_call *c, ct_tensor **out, ct_tensor *const *in, int nin, const ct_args *a);
/* an in-place node (c->dst): y (the op's out-of-place result, batch dim
 * first) written into the written tensor; *out the written value */
ct_status ct__bv_write(const ct_vmap_call *c, ct_tensor *y, ct_bval *out);
/* a rule's error for its op: "vmap: <op>: <message>" */
ct_status ct__bv_error(const ct_vmap_call *c, ct_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* the status after a NULL result */
static inline ct_status ct__bv_status(void) {
    return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
}

#endif
