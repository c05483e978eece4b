/* profiler_impl.h -- private: the profiler's hook in ct__dispatch and the
 * determinism flag read by kernels (see include/ctorch/profiler.h). */
#ifndef CT_PROFILER_IMPL_H
#define CT_PROFILER_IMPL_H

#include <stdatomic.h>

#include "tensor_impl.h"

/* Nonzero while a profiling session runs: ct__dispatch tests it (one
 * relaxed load and a branch) and calls ct__prof_dispatch when set. */
extern atomic_int ct__prof_on;
/* Runs fn like ct__dispatch would, recording one event around it. */
ct_status ct__prof_dispatch(ct_op op, ct_device dev, ct_kernel_fn fn, ct_tensor *const *out,
                            int nout, ct_tensor *const *in, int nin, const ct_args *a);
/* Reads CT_PROFILE (once, from the backends' one-time init): starts a
 * session and registers the at-exit report when it is set. */
void ct__prof_env_init(void);

/* Sets OpenBLAS's thread count unless deterministic mode pins it to 1;
 * then n is what it returns to when the switch goes off.  For
 * ct_set_num_threads, should it ever drive the BLAS threads. */
void ct__blas_set_num_threads(int n);

#endif
