/* meta.h -- private: meta functions and the op runner.
 *
 * Every op's meta function (the `.meta` column of ops.def, type
 * ct_meta_fn in op_table.h) computes its outputs' sizes, strides, dtype and
 * device from its inputs' geometry and its typed parameters, and runs every
 * argument check with the op's error messages, reading no data (PyTorch's
 * meta functions, MLX's output_shapes).  A public op is then
 *
 *     preparation (dtype promotion, wrapping numbers: other ops)
 *     -> ct__op(op, in, nin, &args):  meta -> allocate -> dispatch -> record
 *
 * so the meta device, the compiler's tracer and shape inference all run
 * the same meta function the CPU path runs.  Declare each meta function
 * here, in its family's block (the blocks keep the families apart). */
#ifndef CT_META_H
#define CT_META_H

#include "op_table.h"

/* Whether t's values live on a device with data that is not host memory
 * (OpenCL, CUDA): an op whose output sizes depend on the values (nonzero,
 * unique, bincount, one_hot without num_classes, repeat_interleave by a
 * tensor) then runs on a host copy and moves its result back to t's device,
 * as PyTorch synchronizes for them. */
static inline bool ct__values_on_device(const ct_tensor *t) {
    return t && !ct__has_host_data(t) && t->storage->device != CT_META;
}

#define CT_META_FN(fn) \
    ct_status fn(ct_meta *out, int nout, ct_tensor *const *in, int nin, const ct_args *a)

/* ---- the runner ------------------------------------------------------------ */
/* Runs op's meta function (an error when the op has none). */
ct_status ct__meta_run(ct_op op, ct_meta *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a);
/* A tensor (refcount 1, no scope) as m describes: a fresh one (contiguous
 * or with m's strides) on m->device, or a view of in[m->base].  NULL for an
 * absent output (ndim -1) without an error; NULL and an error when out of
 * memory or when m is CT_META_DYNAMIC. */
ct_tensor *ct__meta_new(const ct_meta *m, ct_tensor *const *in);
/* meta -> allocate -> dispatch -> record for a one-output op: the result
 * (in the innermost scope), or NULL with the error. */
ct_tensor *ct__op(ct_op op, ct_tensor *const *in, int nin, const ct_args *a);
/* The same for nout outputs (out[k] NULL where meta said absent). */
ct_status ct__op_multi(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a);
/* meta -> dispatch into `dst` -> ct__finish_inplace (no record beyond the
 * in-place one): for in-place and out= forms.  meta's output must have
 * dst's sizes ("op: output with shape [..] doesn't match the broadcast
 * shape [..]", torch's message); its dtype is the kernel's business. */
ct_tensor *ct__op_into(ct_op op, ct_tensor *dst, ct_tensor *const *in, int nin, const ct_args *a);
/* Allocates out[j] from m[j] (ct__meta_new) for each j < nout with want[j]
 * (want NULL: every j); the others are set to NULL.  CT_OK, or the error
 * (the caller releases what was allocated). */
ct_status ct__meta_alloc(const ct_meta *m, ct_tensor **out, int nout, const bool *want,
                         ct_tensor *const *in);
/* True when m has t's sizes. */
bool ct__meta_same_sizes(const ct_meta *m, const ct_tensor *t);

/* Tests: with ct__meta_verify_set(true), every op's exit runs its meta
 * function on the recorded call (op, inputs, parameters) and counts results
 * it does not describe; ct__meta_verify_result gives that count, how many
 * were checked, and the first mismatch's message. */
void ct__meta_verify_set(bool on);
long ct__meta_verify_result(long *checked, char *first, size_t n);

/* ---- helpers for meta functions ----------------------------------------- */
/* m := a contiguous tensor of these sizes, dtype and device. */
void ct__meta_set(ct_meta *m, const int64_t *sizes, int ndim, ct_dtype dt, ct_device dev);
/* m := t's sizes, contiguous, of dtype dt, on t's device. */
void ct__meta_like(ct_meta *m, const ct_tensor *t, ct_dtype dt);
/* m := absent (an optional output not produced). */
void ct__meta_absent(ct_meta *m);
/* m := a view of in[base] with these sizes, strides and offset. */
void ct__meta_view(ct_meta *m, int base, const ct_tensor *t, const int64_t *sizes,
                   const int64_t *strides, int ndim, int64_t offset);
/* The device an op on in[0..nin) runs on (ct__op_device) after checking
 * they agree (0-dim cpu tensors combine with any device): CT_OK or the
 * error "op: expected all tensors on the same device, got cpu and meta". */
ct_status ct__meta_device(const char *op, ct_tensor *const *in, int nin, ct_device *dev);

/* ---- meta functions, by family -------------------------------------------- */
/* elementwise (src/ops/elementwise.c) */
/* every op of the unary, binary and ternary sections: the broadcast shape,
 * the dtype by the op's `.ew_mode` (CT_EW_*), the inputs' device, and the
 * op's argument checks; the driver ct__ew (ew.h) runs the same code */
CT_META_FN(ct__meta_ew);

/* reductions, scans, sorting, softmax, norms (src/ops/reduce.c, sort_ops.c, norm_ops.c) */
CT_META_FN(ct__meta_reduce); /* sum ... argmin: the reduce params' dims and keepdim */
CT_META_FN(ct__meta_scan);   /* softmax, log_softmax, cumsum ... logcumsumexp */
CT_META_FN(ct__meta_sort);   /* sort, topk, kthvalue, median_dim, mode, unique */

/* views and shapes (src/ops/view.c, shape.c): CT_META_VIEW of in[0] */
CT_META_FN(ct__meta_view_op);
CT_META_FN(ct__meta_permute);
CT_META_FN(ct__meta_expand);
CT_META_FN(ct__meta_squeeze);
CT_META_FN(ct__meta_unsqueeze);
CT_META_FN(ct__meta_slice);
CT_META_FN(ct__meta_select);
CT_META_FN(ct__meta_diagonal);
CT_META_FN(ct__meta_as_strided);
CT_META_FN(ct__meta_unfold);

/* copies, factories, random (src/ops/copy.c, factory.c, random.c) */
CT_META_FN(ct__meta_copy);
CT_META_FN(ct__meta_fill);
/* the params of a recorded copy (dtype, device; shape, or NULL/0 for
 * in[0]'s) and of a fill of value (sizes, dtype, device) */
ct_args ct__copy_args(ct_dtype dt, ct_device dev, const int64_t *shape, int ndim);
ct_args ct__fill_args(double value, ct_dtype dt, ct_device dev, const int64_t *shape, int ndim);
CT_META_FN(ct__meta_factory); /* arange, linspace, eye */
CT_META_FN(ct__meta_random);  /* uniform, normal, randint, bernoulli, exponential, multinomial, randperm */
/* The draw of a random op traced on meta, replayed by a compiled graph
 * (src/compile/exec.c) into t (an in-place form's tensor, or a factory's
 * fresh result): the generator's counters reserved and the kernel run as
 * the public function does, so a compiled function draws eager's numbers.
 * The forms without tensor operands: uniform_, normal_, exponential_,
 * random_, bernoulli_ (a scalar p), rand, randn, randint, randperm. */
bool ct__random_replayable(ct_op op, int nin);
ct_status ct__random_replay(ct_op op, ct_tensor *t, ct_args *a);

/* indexing (src/ops/index.c, shape.c) */
CT_META_FN(ct__meta_cat);
CT_META_FN(ct__meta_index_select);
CT_META_FN(ct__meta_gather);
CT_META_FN(ct__meta_scatter);       /* scatter, scatter_add, scatter_reduce */
CT_META_FN(ct__meta_index_along);   /* index_add, index_copy, index_fill */
CT_META_FN(ct__meta_masked_fill);
CT_META_FN(ct__meta_masked_select); /* dynamic */
CT_META_FN(ct__meta_masked_scatter);
CT_META_FN(ct__meta_index);         /* advanced indexing and take; dynamic with bool indices */
CT_META_FN(ct__meta_index_put);
CT_META_FN(ct__meta_nonzero);       /* dynamic */
CT_META_FN(ct__meta_tri);           /* tril, triu */
CT_META_FN(ct__meta_remap);         /* flip, roll */
CT_META_FN(ct__meta_one_hot);       /* dynamic when num_classes is -1 */
CT_META_FN(ct__meta_bucketize);
CT_META_FN(ct__meta_bincount);      /* dynamic */
CT_META_FN(ct__meta_histc);
CT_META_FN(ct__meta_repeat);        /* composites: their final output */
CT_META_FN(ct__meta_repeat_interleave); /* dynamic with a tensor of repeats */
CT_META_FN(ct__meta_pad);

/* linear algebra (src/ops/linalg.c, linalg_einsum.c) */
CT_META_FN(ct__meta_matmul);
CT_META_FN(ct__meta_mm);
CT_META_FN(ct__meta_bmm);
CT_META_FN(ct__meta_mv);
CT_META_FN(ct__meta_dot);
CT_META_FN(ct__meta_outer);
CT_META_FN(ct__meta_linear);
CT_META_FN(ct__meta_bilinear);
CT_META_FN(ct__meta_tensordot);
CT_META_FN(ct__meta_kron);
CT_META_FN(ct__meta_trace);
CT_META_FN(ct__meta_cross);
CT_META_FN(ct__meta_cdist);
CT_META_FN(ct__meta_einsum);

/* convolution, pooling, resampling (src/ops/conv.c) */
CT_META_FN(ct__meta_conv);
CT_META_FN(ct__meta_conv_wgrad);
CT_META_FN(ct__meta_planes);
CT_META_FN(ct__meta_max_pool_backward);
CT_META_FN(ct__meta_fold);

/* fused ops (batch_norm.c, attention, optimizers, encoder rows) */
CT_META_FN(ct__meta_batch_norm);
CT_META_FN(ct__meta_gemm_lp);           /* gemm_lp (autocast_linear.c) */
CT_META_FN(ct__meta_sdpa);              /* sdpa_fused, sdpa_fused_backward (attention.c) */
CT_META_FN(ct__meta_softmax_backward);  /* softmax_backward, log_softmax_backward (reduce.c) */
CT_META_FN(ct__meta_softmax_float);     /* softmax_float (reduce.c) */
CT_META_FN(ct__meta_ce_grad_lp);        /* ce_grad_lp (reduce.c) */
CT_META_FN(ct__meta_layer_norm);        /* layer_norm_fwd, layer_norm_bwd (norm_ops.c) */
CT_META_FN(ct__meta_ew_grad);           /* ew_grad (elementwise.c) */
CT_META_FN(ct__meta_fused_rows);        /* add_layer_norm, bias_act (fused_rows.c) */
CT_META_FN(ct__meta_optim);             /* sgd_step, adam_step: checks only, no outputs (fused_optim.c) */

#endif
