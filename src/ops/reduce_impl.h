/* reduce_impl.h -- private to the reduce family (src/ops/reduce*.c and
 * src/backend/cpu/{reduce,sort}.c). */
#ifndef CT_REDUCE_IMPL_H
#define CT_REDUCE_IMPL_H

#include "op_table.h"

/* For the family's meta functions (after ct__meta_run zeroed the flags):
 * d := s's ndim, sizes and device with dtype dt (not the whole struct). */
static inline void ct__meta_same(ct_meta *d, const ct_meta *s, ct_dtype dt) {
    d->ndim = s->ndim;
    for (int k = 0; k < s->ndim; k++) d->sizes[k] = s->sizes[k];
    d->dtype = dt;
    d->device = s->device;
}

/* meta -> allocate -> dispatch -> record for the family's ops with values
 * and int64 indices (max_dim, cummax, sort, topk, ...) on in[0] = x.  half:
 * 0 the kernel writes f16/bf16 values itself; 1 it reads x and writes f32
 * values (converted back after); 2 it wants x converted to f32 too.  Values
 * not wanted (values NULL) are not recorded; the indices are recorded even
 * when not wanted (they route the values' gradient) and then dropped. */
ct_status ct__red_pair(ct_op op, ct_tensor *x, const ct_args *a, int half, ct_tensor **values,
                       ct_tensor **indices);

/* Registers the sorting kernels (src/backend/cpu/sort.c); called by
 * ct__cpu_register_reduce. */
void ct__cpu_register_sort(ct_kernel_fn *t);

/* The fused softmax / log_softmax backward ops (y = the forward's output):
 *   softmax:     gx = y * (g - sum(g * y, dim))
 *   log_softmax: gx = g - exp(y) * sum(g, dim)
 * f32/f64 with g and y of one shape, dtype and device run the op's kernel
 * (an op without a VJP) where the device has one (fused.h); when autograd
 * records (create_graph: double backward), for other dtypes and
 * broadcasting g, or without a kernel, the composite of public ops runs
 * (differentiable). */
ct_tensor *ct__softmax_backward(ct_tensor *g, ct_tensor *y, int64_t dim, int log);

/* Fused layer_norm (rms = 0) / rms_norm (rms = 1) over rows of n elements
 * (src/ops/norm_ops.c): the op layer_norm_fwd where x's device has its
 * kernel, else its composite fallback (fused.h).  x, w, b: one dtype (f32
 * or f64) and device, any layout; w and b NULL or of n elements.  Outputs
 * (on x's device) are scope-owned and not recorded: y (x's shape), mean and
 * rstd ([numel/n]; mean is 0 for rms_norm). */
ct_status ct__layer_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t n, double eps,
                             int rms, ct_tensor **y, ct_tensor **mean, ct_tensor **rstd);
/* The backward (layer_norm_bwd or its fallback): g (x's shape, dtype and
 * device) -> dx, and dw / db ([n], summed over the rows) when wanted (else
 * NULL).  The kernel is deterministic: the same bits whatever the thread
 * count. */
ct_status ct__layer_norm_bwd(ct_tensor *g, ct_tensor *x, ct_tensor *mean, ct_tensor *rstd,
                             ct_tensor *w, int64_t n, int rms, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db);

/* Registers the fused normalization kernels (src/backend/cpu/norm.c). */
void ct__cpu_register_norm(ct_kernel_fn *t);
void ct__cpu_register_norm_avx2(ct_kernel_fn *t);

#endif
