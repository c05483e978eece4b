/* batch_norm_impl.h -- private: the op layer of batch norm (src/ops/
 * batch_norm.c), called by F.batch_norm and the BatchNorm modules
 * (src/nn/norm.c).
 *
 * x is [N, C, *]; w, b and the statistics hold C elements.  The fused
 * entries (ct__batch_norm_fwd/_bwd/_eval) dispatch the table ops
 * batch_norm_fwd/_bwd/_eval when the device of x has their kernel
 * (ct__fused_kernel, fused.h) and the dtypes suit it (f32 or f64, one dtype
 * for all); otherwise they run the composite fallback, written with public
 * ops, which gives the same results to rounding.  The fused ops are never
 * recorded by autograd: the caller wraps fwd/bwd in a function. */
#ifndef CT_BATCH_NORM_IMPL_H
#define CT_BATCH_NORM_IMPL_H

#include "op_table.h"

/* x, w and b (either may be NULL) are f32 or f64, of one dtype, on one
 * device: what ct__batch_norm_fwd/_bwd compute in x's dtype. */
bool ct__batch_norm_fusable(ct_tensor *x, ct_tensor *w, ct_tensor *b);

/* Training forward, with batch statistics over every dim but 1:
 * y = (x - mean) * invstd * w + b, invstd = 1/sqrt(var + eps), var biased.
 * Outputs y (x's shape), mean, invstd, var ([C]); not recorded by autograd.
 * x, w, b as ct__batch_norm_fusable says. */
ct_status ct__batch_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, double eps,
                             ct_tensor **y, ct_tensor **mean, ct_tensor **invstd, ct_tensor **var);

/* Its backward from the saved mean and invstd: with xh = (x - mean)*invstd
 * and M = numel(x)/C, dx = (g - sum(g)/M - xh*sum(g*xh)/M) * w*invstd,
 * dw = sum(g*xh), db = sum(g) (sums per channel).  w may be NULL (1); each
 * output is computed only when wanted (else NULL).  Not recorded. */
ct_status ct__batch_norm_bwd(ct_tensor *x, ct_tensor *g, ct_tensor *w, ct_tensor *mean,
                             ct_tensor *invstd, bool want_dx, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db);

/* Evaluation: y = (x - rm) / sqrt(rv + eps) * w + b, then relu when relu.
 * Any floating dtypes; the fused kernel only when every tensor is f32 (or
 * every one f64) on one device with a kernel and no input needs a gradient,
 * else the composite, which autograd differentiates. */
ct_tensor *ct__batch_norm_eval(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w,
                               ct_tensor *b, double eps, bool relu);

/* The training composite (public ops, differentiable, any floating dtype):
 * returns y; *mean and *var (biased) keep x's rank ([1, C, 1, ...]). */
ct_tensor *ct__batch_norm_train_composite(ct_tensor *x, ct_tensor *w, ct_tensor *b, double eps,
                                          ct_tensor **mean, ct_tensor **var);

#endif
