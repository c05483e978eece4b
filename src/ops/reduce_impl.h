/* reduce_impl.h -- private to the reduce family (src/ops/reduce*.c and
 * src/backend/cpu/{reduce,sort}.c). */
#ifndef CT_REDUCE_IMPL_H
#define CT_REDUCE_IMPL_H

#include "../core/tensor_impl.h"

/* Registers the sorting kernels (src/backend/cpu/sort.c); called by
 * ct__cpu_register_reduce. */
void ct__cpu_register_sort(ct_kernel_fn *t);

#endif
