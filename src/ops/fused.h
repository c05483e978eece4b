/* fused.h -- private: which fused ops (table ops with a composite fallback,
 * such as batch_norm_fwd) run their kernel.  A fused op's entry in the op
 * layer asks ct__fused_kernel for the kernel of the device its inputs are
 * on; when there is none -- the device's table has a NULL slot, or a test
 * switched the kernel off -- it runs its fallback, written with public ops
 * (MLX's Custom with fallback). */
#ifndef CT_FUSED_H
#define CT_FUSED_H

#include <stdbool.h>

#include "op_table.h"

/* The kernel of op on dev, or NULL: no kernel there, or disabled. */
ct_kernel_fn ct__fused_kernel(ct_op op, ct_device dev);
/* For tests: disabled = true makes op's callers run the fallback on every
 * device (process-wide, thread-safe) until it is called with false. */
void ct__fused_disable(ct_op op, bool disabled);

/* The kernel path of a fused op: in[0..nin) made contiguous, the outputs
 * allocated as m (or, m NULL, op's meta function on the contiguous inputs)
 * describes -- out[j] only where want[j] (want NULL: all; the others
 * NULL) --, the kernel dispatched; the outputs then join the caller's
 * scope.  CT_OK, or the error with nothing left allocated. */
struct ct_meta;
ct_status ct__fused_run(ct_op op, const struct ct_meta *m, ct_tensor **out, int nout, const bool *want,
                        ct_tensor *const *in, int nin, const ct_args *a);

#endif
