/* linalg_impl.h -- private helpers shared by src/ops/linalg*.c. */
#ifndef CT_LINALG_IMPL_H
#define CT_LINALG_IMPL_H

#include "ew.h"

/* C = alpha * A @ B + beta * C over [batch..., M, K] x [batch..., K, N];
 * C contiguous, A/B any strides (same ndim as C).  Handles f16/bf16 by
 * computing in f32.  allow_bool: bool operands allowed (outer, kron). */
ct_status ct__lin_gemm(ct_op op, ct_tensor *C, ct_tensor *A, ct_tensor *B, double alpha,
                       double beta, int allow_bool);
/* The same, with beta's operand a bias row instead of C (bias: contiguous,
 * N elements, C's dtype; C is not read): C = alpha * A @ B + beta * bias
 * broadcast over the rows.  NULL bias: ct__lin_gemm. */
ct_status ct__lin_gemm_bias(ct_op op, ct_tensor *C, ct_tensor *A, ct_tensor *B, ct_tensor *bias,
                            double alpha, double beta, int allow_bool);
/* A view of t (refcount 1, no scope) with the given sizes/strides at t's offset. */
ct_tensor *ct__lin_view(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int nd);
/* Contiguous copy (or t retained) of t permuted by perm, viewed as shape. */
ct_tensor *ct__lin_perm_reshape(ct_tensor *t, const int *perm, const int64_t *shape, int nd);
/* torch's C++ type name of a dtype ("float", "double", "long int"). */
const char *ct__lin_tname(ct_dtype dt);
/* Sums t over the dims with mask[d] != 0; result (owned, no scope) has
 * the other dims in order. */
ct_tensor *ct__lin_sum_dims(ct_op op, ct_tensor *t, const int *mask);
/* The order ct_linalg_multi_dot multiplies a chain of n >= 2 matrices in,
 * matrix i being dims[i] x dims[i+1]: split[i*n + j] (i < j, split holds
 * n*n ints) is the k at which the product of matrices i..j splits into
 * (i..k) @ (k+1..j).  0, or -1 (n < 2, out of memory). */
int ct__multi_dot_order(const int64_t *dims, int n, int *split);

#endif
