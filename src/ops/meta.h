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
/* True when m has t's sizes. */
bool ct__meta_same_sizes(const ct_meta *m, const ct_tensor *t);

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

/* views and shapes (src/ops/view.c, shape.c) */

/* copies, factories, random (src/ops/copy.c, factory.c, random.c) */

/* indexing (src/ops/index.c) */

/* linear algebra (src/ops/linalg.c, linalg_einsum.c) */

/* convolution, pooling, resampling (src/ops/conv.c) */

/* fused ops (batch_norm.c, attention, optimizers, encoder rows) */

#endif
