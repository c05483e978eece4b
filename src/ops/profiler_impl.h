/* profiler_impl.h -- private: the profiler's hook in ct__dispatch and its
 * events around work outside dispatch (see include/ctorch/profiler.h). */
#ifndef CT_PROFILER_IMPL_H
#define CT_PROFILER_IMPL_H

#include <stdatomic.h>

#include "op_table.h"

/* Nonzero while a profiling session runs: ct__dispatch tests it (one
 * relaxed load and a branch) and calls ct__prof_dispatch when set. */
extern atomic_int ct__prof_on;
/* Runs fn like ct__dispatch would, recording one event around it. */
ct_status ct__prof_dispatch(ct_op op, ct_device dev, ct_kernel_fn fn, ct_tensor *const *out,
                            int nout, ct_tensor *const *in, int nin, const ct_args *a);
/* An event around work that does not pass through ct__dispatch: when a
 * session runs, ct__prof_begin opens one named `name` with the tensors'
 * shapes, dtypes and bytes and the given FLOPs, and returns 1;
 * ct__prof_end(that value) closes it.  annotation 0: a CPU op (the fused
 * batch-norm kernels; name must be static); 1: a range like
 * ct_profiler_push_range's (an optimizer's step; name is copied).  Returns
 * 0 (and ct__prof_end(0) does nothing) when no session runs. */
int ct__prof_begin(const char *name, int annotation, ct_tensor *const *out, int nout,
                   ct_tensor *const *in, int nin, int64_t flops);
void ct__prof_end(int opened);

/* Reads CT_PROFILE (once, from the backends' one-time init): starts a
 * session and registers the at-exit report when it is set. */
void ct__prof_env_init(void);

#endif
