/* ctorch/ops.h -- tensor operations.
 *
 * Names and semantics follow PyTorch (torch.* and torch.nn.functional.*), so
 * its documentation reads as ours.  Every op:
 *   - broadcasts its operands and promotes dtypes like PyTorch
 *     (ct_result_type); a "scalar" argument behaves like a Python number;
 *   - accepts any strides (transposed, sliced with a step, expanded);
 *   - returns a new tensor registered in the innermost scope, or NULL and a
 *     thread-local error (ct_last_error) -- NULL inputs propagate;
 *   - in-place variants (trailing '_') write into their first argument and
 *     return it (no new reference); the result dtype must be castable to it.
 * Dims may be negative (counted from the end).
 */
#ifndef CTORCH_OPS_H
#define CTORCH_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Elementwise -- unary
 * Float ops (exp, sin, sigmoid, ...) on integer/bool input give the default
 * float dtype, like PyTorch.  abs/neg/sign/square/floor/... keep the dtype.
 * ====================================================================== */
#define CT_UNARY_DECL(name) \
    CT_API ct_tensor *ct_##name(ct_tensor *x); \
    CT_API ct_tensor *ct_##name##_(ct_tensor *x);
CT_UNARY_DECL(neg) CT_UNARY_DECL(abs) CT_UNARY_DECL(sign) CT_UNARY_DECL(sgn)
CT_UNARY_DECL(reciprocal) CT_UNARY_DECL(sqrt) CT_UNARY_DECL(rsqrt) CT_UNARY_DECL(square)
CT_UNARY_DECL(exp) CT_UNARY_DECL(exp2) CT_UNARY_DECL(expm1) CT_UNARY_DECL(log)
CT_UNARY_DECL(log2) CT_UNARY_DECL(log10) CT_UNARY_DECL(log1p)
CT_UNARY_DECL(sin) CT_UNARY_DECL(cos) CT_UNARY_DECL(tan) CT_UNARY_DECL(asin)
CT_UNARY_DECL(acos) CT_UNARY_DECL(atan) CT_UNARY_DECL(sinh) CT_UNARY_DECL(cosh)
CT_UNARY_DECL(tanh) CT_UNARY_DECL(asinh) CT_UNARY_DECL(acosh) CT_UNARY_DECL(atanh)
CT_UNARY_DECL(sigmoid) CT_UNARY_DECL(relu) CT_UNARY_DECL(relu6) CT_UNARY_DECL(selu)
CT_UNARY_DECL(silu) CT_UNARY_DECL(mish) CT_UNARY_DECL(softsign)
CT_UNARY_DECL(hardsigmoid) CT_UNARY_DECL(hardswish) CT_UNARY_DECL(erf)
CT_UNARY_DECL(erfc) CT_UNARY_DECL(erfinv) CT_UNARY_DECL(lgamma) CT_UNARY_DECL(digamma)
CT_UNARY_DECL(floor) CT_UNARY_DECL(ceil) CT_UNARY_DECL(round) CT_UNARY_DECL(trunc)
CT_UNARY_DECL(frac) CT_UNARY_DECL(logical_not) CT_UNARY_DECL(bitwise_not)
#undef CT_UNARY_DECL
/* Predicates: bool results, no in-place form. */
CT_API ct_tensor *ct_isnan(ct_tensor *x);
CT_API ct_tensor *ct_isinf(ct_tensor *x);
CT_API ct_tensor *ct_isfinite(ct_tensor *x);
CT_API ct_tensor *ct_isposinf(ct_tensor *x);
CT_API ct_tensor *ct_isneginf(ct_tensor *x);
CT_API ct_tensor *ct_signbit(ct_tensor *x);

/* Parameterized unary ops. */
CT_API ct_tensor *ct_logit(ct_tensor *x, double eps);         /* eps < 0: no clamping */
CT_API ct_tensor *ct_leaky_relu(ct_tensor *x, double negative_slope);
CT_API ct_tensor *ct_leaky_relu_(ct_tensor *x, double negative_slope);
CT_API ct_tensor *ct_elu(ct_tensor *x, double alpha);
CT_API ct_tensor *ct_celu(ct_tensor *x, double alpha);
typedef enum ct_gelu_approx { CT_GELU_NONE = 0, CT_GELU_TANH = 1 } ct_gelu_approx;
/* torch.nn.functional.gelu.  float32 on the CPU's vector paths approximates
 * erf (and, for CT_GELU_TANH, tanh) by rational functions of absolute error
 * <= 3.9e-7: the forward is within about 3 ulp of the exact value (1.2e-6
 * at x ~ 5.6), the gradients within torch's own error (the tanh form's
 * with SLEEF's tanh).  torch's vectorized kernels approximate erf too
 * (Abramowitz & Stegun 7.1.26).  float64 and the scalar paths call erf and
 * tanh. */
CT_API ct_tensor *ct_gelu(ct_tensor *x, ct_gelu_approx approximate);
CT_API ct_tensor *ct_softplus(ct_tensor *x, double beta, double threshold);
CT_API ct_tensor *ct_hardtanh(ct_tensor *x, double min_val, double max_val);
CT_API ct_tensor *ct_hardshrink(ct_tensor *x, double lambd);
CT_API ct_tensor *ct_softshrink(ct_tensor *x, double lambd);
/* clamp(min, max): pass NAN for an absent bound. */
CT_API ct_tensor *ct_clamp(ct_tensor *x, double min, double max);
CT_API ct_tensor *ct_clamp_(ct_tensor *x, double min, double max);
/* clamp with tensor bounds (either may be NULL... but not both). */
CT_API ct_tensor *ct_clamp_tensor(ct_tensor *x, ct_tensor *min, ct_tensor *max);
/* nan_to_num: posinf/neginf NAN means "largest/lowest finite of the dtype". */
CT_API ct_tensor *ct_nan_to_num(ct_tensor *x, double nan, double posinf, double neginf);
CT_API ct_tensor *ct_round_decimals(ct_tensor *x, int64_t decimals);
CT_API ct_tensor *ct_pow_scalar(ct_tensor *x, double exponent);     /* x ** e */
CT_API ct_tensor *ct_rpow_scalar(double base, ct_tensor *x);        /* base ** x */
/* torch.polygamma(n, x): the n-th derivative of digamma (n >= 0; 0 is digamma). */
CT_API ct_tensor *ct_polygamma(int64_t n, ct_tensor *x);

/* ======================================================================
 * Elementwise -- binary (broadcasting, promotion)
 * ====================================================================== */
#define CT_BINARY_DECL(name) \
    CT_API ct_tensor *ct_##name(ct_tensor *a, ct_tensor *b); \
    CT_API ct_tensor *ct_##name##_(ct_tensor *a, ct_tensor *b);
CT_BINARY_DECL(add) CT_BINARY_DECL(sub) CT_BINARY_DECL(mul) CT_BINARY_DECL(div)
CT_BINARY_DECL(pow) CT_BINARY_DECL(atan2) CT_BINARY_DECL(minimum) CT_BINARY_DECL(maximum)
CT_BINARY_DECL(fmin) CT_BINARY_DECL(fmax) CT_BINARY_DECL(fmod) CT_BINARY_DECL(remainder)
CT_BINARY_DECL(bitwise_and) CT_BINARY_DECL(bitwise_or) CT_BINARY_DECL(bitwise_xor)
CT_BINARY_DECL(bitwise_left_shift) CT_BINARY_DECL(bitwise_right_shift)
CT_BINARY_DECL(xlogy) CT_BINARY_DECL(hypot) CT_BINARY_DECL(copysign)
CT_BINARY_DECL(floor_divide)
#undef CT_BINARY_DECL
/* a + alpha*b, a - alpha*b */
CT_API ct_tensor *ct_add_scaled(ct_tensor *a, ct_tensor *b, double alpha);
CT_API ct_tensor *ct_sub_scaled(ct_tensor *a, ct_tensor *b, double alpha);
CT_API ct_tensor *ct_add_scaled_(ct_tensor *a, ct_tensor *b, double alpha);
/* Scalar forms (the scalar behaves like a Python number). */
CT_API ct_tensor *ct_add_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_sub_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_mul_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_div_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_add_scalar_(ct_tensor *a, double s);
CT_API ct_tensor *ct_mul_scalar_(ct_tensor *a, double s);
/* torch.div(a, b, rounding_mode) */
typedef enum ct_rounding { CT_ROUND_NONE = 0, CT_ROUND_TRUNC, CT_ROUND_FLOOR } ct_rounding;
CT_API ct_tensor *ct_div_mode(ct_tensor *a, ct_tensor *b, ct_rounding mode);
/* Comparisons and logical ops: bool results. */
CT_API ct_tensor *ct_eq(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_ne(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_lt(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_le(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_gt(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_ge(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_logical_and(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_logical_or(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_logical_xor(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_isclose(ct_tensor *a, ct_tensor *b, double rtol, double atol, bool equal_nan);
CT_API ct_tensor *ct_eq_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_gt_scalar(ct_tensor *a, double s);
CT_API ct_tensor *ct_lt_scalar(ct_tensor *a, double s);

/* Ternary. */
CT_API ct_tensor *ct_where(ct_tensor *cond, ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_lerp(ct_tensor *start, ct_tensor *end, ct_tensor *weight);
CT_API ct_tensor *ct_lerp_scalar(ct_tensor *start, ct_tensor *end, double weight);
CT_API ct_tensor *ct_addcmul(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value);
CT_API ct_tensor *ct_addcdiv(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value);
CT_API ct_tensor *ct_addcmul_(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value);
CT_API ct_tensor *ct_addcdiv_(ct_tensor *self, ct_tensor *t1, ct_tensor *t2, double value);

/* ======================================================================
 * Reductions.  dims/ndims: the dims to reduce; dims == NULL or ndims == 0
 * reduces over all dims.  keepdim keeps reduced dims with size 1.
 * ====================================================================== */
CT_API ct_tensor *ct_sum(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
/* dtype: accumulate and return in this dtype (torch.sum(..., dtype=)) */
CT_API ct_tensor *ct_sum_dtype(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim, ct_dtype dt);
CT_API ct_tensor *ct_mean(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_nansum(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_nanmean(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_prod(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_amax(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_amin(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_all(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_any(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
CT_API ct_tensor *ct_count_nonzero(ct_tensor *x, const int64_t *dims, int ndims);
CT_API ct_tensor *ct_logsumexp(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
/* var/std with Bessel-style correction (1 = unbiased). */
CT_API ct_tensor *ct_var(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim);
CT_API ct_tensor *ct_std(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim);
CT_API ct_status ct_var_mean(ct_tensor *x, const int64_t *dims, int ndims, double correction,
                             bool keepdim, ct_tensor **var, ct_tensor **mean) CT_NODISCARD;
CT_API ct_status ct_std_mean(ct_tensor *x, const int64_t *dims, int ndims, double correction,
                             bool keepdim, ct_tensor **std, ct_tensor **mean) CT_NODISCARD;
/* Vector p-norm over dims (p = INFINITY, -INFINITY, 0, 1, 2, any p). */
CT_API ct_tensor *ct_norm(ct_tensor *x, double p, const int64_t *dims, int ndims, bool keepdim);
/* Frobenius norm (p = "fro"). */
CT_API ct_tensor *ct_norm_fro(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim);
/* Whole-tensor max / min (0-dim). */
CT_API ct_tensor *ct_max(ct_tensor *x);
CT_API ct_tensor *ct_min(ct_tensor *x);
/* max/min along a dim: values and int64 indices (either out may be NULL). */
CT_API ct_status ct_max_dim(ct_tensor *x, int64_t dim, bool keepdim,
                            ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_status ct_min_dim(ct_tensor *x, int64_t dim, bool keepdim,
                            ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
/* argmax/argmin: dim == CT_DIM_NONE means over the flattened tensor. */
CT_API ct_tensor *ct_argmax(ct_tensor *x, int64_t dim, bool keepdim);
CT_API ct_tensor *ct_argmin(ct_tensor *x, int64_t dim, bool keepdim);
/* dim == CT_DIM_NONE: over everything. */
CT_API ct_status ct_aminmax(ct_tensor *x, int64_t dim, bool keepdim,
                            ct_tensor **min, ct_tensor **max) CT_NODISCARD;
CT_API ct_tensor *ct_softmax(ct_tensor *x, int64_t dim);
CT_API ct_tensor *ct_log_softmax(ct_tensor *x, int64_t dim);
CT_API ct_tensor *ct_cumsum(ct_tensor *x, int64_t dim);
CT_API ct_tensor *ct_cumprod(ct_tensor *x, int64_t dim);
CT_API ct_status ct_cummax(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_status ct_cummin(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_tensor *ct_logcumsumexp(ct_tensor *x, int64_t dim);
CT_API ct_status ct_topk(ct_tensor *x, int64_t k, int64_t dim, bool largest, bool sorted,
                         ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_status ct_kthvalue(ct_tensor *x, int64_t k, int64_t dim, bool keepdim,
                             ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
/* Whole-tensor median (the lower of the two middles, like torch). */
CT_API ct_tensor *ct_median(ct_tensor *x);
CT_API ct_status ct_median_dim(ct_tensor *x, int64_t dim, bool keepdim,
                               ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_tensor *ct_nanmedian(ct_tensor *x);
CT_API ct_status ct_mode(ct_tensor *x, int64_t dim, bool keepdim,
                         ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_status ct_sort(ct_tensor *x, int64_t dim, bool descending, bool stable,
                         ct_tensor **values, ct_tensor **indices) CT_NODISCARD;
CT_API ct_tensor *ct_argsort(ct_tensor *x, int64_t dim, bool descending, bool stable);
/* torch.unique(sorted=True): flattened unique values; inverse and counts
 * may be NULL when not wanted. */
CT_API ct_status ct_unique(ct_tensor *x, bool return_inverse, bool return_counts,
                           ct_tensor **values, ct_tensor **inverse, ct_tensor **counts) CT_NODISCARD;
CT_API ct_status ct_unique_consecutive(ct_tensor *x, ct_tensor **values, ct_tensor **inverse,
                                       ct_tensor **counts) CT_NODISCARD;

/* ======================================================================
 * Copying, indexing and shape ops
 * ====================================================================== */
CT_API ct_tensor *ct_cat(ct_tensor *const *ts, int n, int64_t dim);
CT_API ct_tensor *ct_stack(ct_tensor *const *ts, int n, int64_t dim);
CT_API ct_tensor *ct_hstack(ct_tensor *const *ts, int n);
CT_API ct_tensor *ct_vstack(ct_tensor *const *ts, int n);
CT_API ct_tensor *ct_index_select(ct_tensor *x, int64_t dim, ct_tensor *index);
CT_API ct_tensor *ct_gather(ct_tensor *x, int64_t dim, ct_tensor *index);
/* Out-of-place scatter (torch.scatter), and in-place forms. */
CT_API ct_tensor *ct_scatter(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src);
CT_API ct_tensor *ct_scatter_value(ct_tensor *x, int64_t dim, ct_tensor *index, double value);
CT_API ct_tensor *ct_scatter_add(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src);
CT_API ct_tensor *ct_scatter_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src);
CT_API ct_tensor *ct_scatter_add_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src);
/* scatter_reduce: reduce is "sum", "prod", "mean", "amax", "amin". */
CT_API ct_tensor *ct_scatter_reduce(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src,
                                    const char *reduce, bool include_self);
CT_API ct_tensor *ct_index_add(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha);
CT_API ct_tensor *ct_index_add_(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src, double alpha);
CT_API ct_tensor *ct_index_fill(ct_tensor *x, int64_t dim, ct_tensor *index, double value);
CT_API ct_tensor *ct_index_copy(ct_tensor *x, int64_t dim, ct_tensor *index, ct_tensor *src);
CT_API ct_tensor *ct_masked_fill(ct_tensor *x, ct_tensor *mask, double value);
CT_API ct_tensor *ct_masked_fill_(ct_tensor *x, ct_tensor *mask, double value);
/* masked_fill with a 0-dim tensor value (torch's x.masked_fill(mask, value)
 * with a Tensor value): the result has x's dtype (the value is cast to it)
 * and the broadcast shape of x and mask.  Differentiable in x (the gradient
 * where the mask is false) and in value (the sum of the gradient over the
 * masked positions).  A value with dims is CT_ERR_SHAPE ("masked_fill: only
 * supports a 0-dimensional value tensor, but got tensor with 1
 * dimension(s)"); a non-bool mask CT_ERR_DTYPE. */
CT_API ct_tensor *ct_masked_fill_tensor(ct_tensor *x, ct_tensor *mask, ct_tensor *value);
CT_API ct_tensor *ct_masked_select(ct_tensor *x, ct_tensor *mask);
CT_API ct_tensor *ct_masked_scatter(ct_tensor *x, ct_tensor *mask, ct_tensor *source);
/* Advanced indexing x[i0, i1, ...]: indices[k] is an integer (or bool)
 * tensor for dim k, or NULL for a full slice ':'.  n <= ndim. */
CT_API ct_tensor *ct_index(ct_tensor *x, ct_tensor *const *indices, int n);
/* x[indices] = values (accumulate: +=).  Returns x. */
CT_API ct_tensor *ct_index_put_(ct_tensor *x, ct_tensor *const *indices, int n,
                                ct_tensor *values, bool accumulate);
CT_API ct_tensor *ct_index_put(ct_tensor *x, ct_tensor *const *indices, int n,
                               ct_tensor *values, bool accumulate);
CT_API ct_tensor *ct_take(ct_tensor *x, ct_tensor *index);
CT_API ct_tensor *ct_take_along_dim(ct_tensor *x, ct_tensor *index, int64_t dim);
/* [nnz, ndim] int64 coordinates of the non-zero elements. */
CT_API ct_tensor *ct_nonzero(ct_tensor *x);
CT_API ct_tensor *ct_argwhere(ct_tensor *x);
CT_API ct_tensor *ct_tril(ct_tensor *x, int64_t diagonal);
CT_API ct_tensor *ct_triu(ct_tensor *x, int64_t diagonal);
CT_API ct_tensor *ct_diag(ct_tensor *x, int64_t diagonal);
CT_API ct_tensor *ct_diag_embed(ct_tensor *x, int64_t offset, int64_t dim1, int64_t dim2);
CT_API ct_tensor *ct_flip(ct_tensor *x, const int64_t *dims, int ndims);
CT_API ct_tensor *ct_fliplr(ct_tensor *x);
CT_API ct_tensor *ct_flipud(ct_tensor *x);
CT_API ct_tensor *ct_rot90(ct_tensor *x, int64_t k, const int64_t dims[2]);
/* roll: ndims == 0 rolls the flattened tensor by shifts[0]. */
CT_API ct_tensor *ct_roll(ct_tensor *x, const int64_t *shifts, int nshifts,
                          const int64_t *dims, int ndims);
CT_API ct_tensor *ct_repeat(ct_tensor *x, const int64_t *repeats, int n);
CT_API ct_tensor *ct_tile(ct_tensor *x, const int64_t *reps, int n);
/* dim == CT_DIM_NONE: over the flattened tensor. */
CT_API ct_tensor *ct_repeat_interleave(ct_tensor *x, int64_t repeats, int64_t dim);
CT_API ct_tensor *ct_repeat_interleave_tensor(ct_tensor *x, ct_tensor *repeats, int64_t dim);
typedef enum ct_pad_mode {
    CT_PAD_CONSTANT = 0, CT_PAD_REFLECT, CT_PAD_REPLICATE, CT_PAD_CIRCULAR
} ct_pad_mode;
/* F.pad: pad = (last_left, last_right, 2nd_last_left, 2nd_last_right, ...),
 * npad even; negative padding crops (constant mode). */
CT_API ct_tensor *ct_pad(ct_tensor *x, const int64_t *pad, int npad, ct_pad_mode mode, double value);
/* F.one_hot: num_classes < 0 infers max+1.  Returns int64. */
CT_API ct_tensor *ct_one_hot(ct_tensor *x, int64_t num_classes);
CT_API ct_tensor *ct_bucketize(ct_tensor *x, ct_tensor *boundaries, bool right);
CT_API ct_tensor *ct_searchsorted(ct_tensor *sorted, ct_tensor *values, bool right);
CT_API ct_tensor *ct_bincount(ct_tensor *x, ct_tensor *weights, int64_t minlength);
CT_API ct_tensor *ct_histc(ct_tensor *x, int64_t bins, double min, double max);
CT_API ct_tensor *ct_meshgrid_ij(ct_tensor *const *ts, int n, ct_tensor **out);

/* ======================================================================
 * Linear algebra (CBLAS for f32/f64)
 * ====================================================================== */
/* torch.matmul: 1-D/2-D/batched with broadcasting of batch dims. */
CT_API ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b);
/* torch.set_float32_matmul_precision: how float32 matrix products and
 * convolutions may compute, for the whole process (every thread), until set
 * again.  Torch's names and meanings on the CPU:
 *   "highest" (the default)  full float32 products and accumulation;
 *   "high"                   may use bf16-based algorithms (oneDNN's
 *                            fpmath mode bf16) where the CPU multiplies
 *                            bf16 natively;
 *   "medium"                 likewise (bf16 products, f32 accumulation).
 * As in torch, "high" and "medium" change nothing on a CPU without native
 * bf16 dot products (AVX512_BF16 or AMX-BF16; e.g. AMD Zen 3, where the
 * results stay bit for bit those of "highest").  Where they apply, f32
 * convolutions routed to oneDNN take its fpmath mode bf16.  f32 matmul
 * takes it only on a CPU with AMX-BF16 (through oneDNN's matmul, as torch's
 * mkldnn matmul does there; built with oneDNN); on an AVX512_BF16 CPU
 * without AMX it stays full f32: torch's "medium" matmul there keeps
 * f32-level accuracy (1024^3: max error 1.3e-4 against "highest"'s 6.0e-5;
 * rounding the operands to bf16 gives 0.37), i.e. compensated bf16 with
 * three products per product, which at bf16's twice-f32 rate would be
 * slower than the f32 GEMM.  Any other string:
 * CT_ERR_ARG, the setting unchanged.  Example:
 *     if (ct_set_float32_matmul_precision("medium")) fprintf(stderr, "%s\n", ct_last_error());
 *     printf("%s\n", ct_get_float32_matmul_precision());   // "medium" */
CT_API CT_NODISCARD ct_status ct_set_float32_matmul_precision(const char *precision);
/* The current setting: "highest", "high" or "medium" (a static string). */
CT_API const char *ct_get_float32_matmul_precision(void);
CT_API ct_tensor *ct_mm(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_bmm(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_mv(ct_tensor *a, ct_tensor *v);
CT_API ct_tensor *ct_dot(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_vdot(ct_tensor *a, ct_tensor *b);   /* conj(a) . b */
CT_API ct_tensor *ct_outer(ct_tensor *a, ct_tensor *b);
/* beta*input + alpha*(m1 @ m2) */
CT_API ct_tensor *ct_addmm(ct_tensor *input, ct_tensor *m1, ct_tensor *m2, double beta, double alpha);
CT_API ct_tensor *ct_addmv(ct_tensor *input, ct_tensor *m, ct_tensor *v, double beta, double alpha);
CT_API ct_tensor *ct_addr(ct_tensor *input, ct_tensor *a, ct_tensor *b, double beta, double alpha);
CT_API ct_tensor *ct_baddbmm(ct_tensor *input, ct_tensor *b1, ct_tensor *b2, double beta, double alpha);
CT_API ct_tensor *ct_addbmm(ct_tensor *input, ct_tensor *b1, ct_tensor *b2, double beta, double alpha);
/* F.linear: x @ w^T + b (b may be NULL). */
CT_API ct_tensor *ct_linear(ct_tensor *x, ct_tensor *weight, ct_tensor *bias);
CT_API ct_tensor *ct_bilinear(ct_tensor *x1, ct_tensor *x2, ct_tensor *weight, ct_tensor *bias);
/* torch.einsum with any valid equation ("ij,jk->ik", "bij,bjk", "ii->i", "...ij->...ji"). */
CT_API ct_tensor *ct_einsum(const char *equation, ct_tensor *const *ts, int n);
/* torch.tensordot over the paired dims. */
CT_API ct_tensor *ct_tensordot(ct_tensor *a, ct_tensor *b, const int64_t *dims_a,
                               const int64_t *dims_b, int ndims);
CT_API ct_tensor *ct_kron(ct_tensor *a, ct_tensor *b);
CT_API ct_tensor *ct_trace(ct_tensor *x);
CT_API ct_tensor *ct_cross(ct_tensor *a, ct_tensor *b, int64_t dim);
CT_API ct_tensor *ct_cdist(ct_tensor *x1, ct_tensor *x2, double p);
/* torch.linalg.multi_dot: tensors[0] @ tensors[1] @ ... @ tensors[n-1]
 * (n >= 2), multiplied in the cheapest order (the matrix-chain dynamic
 * program on the shapes, as torch does; for three matrices torch's direct
 * comparison of the two orders).  The first tensor may be 1-D (a row vector
 * [1, K]) and the last 1-D (a column vector [K, 1]), the others are 2-D;
 * the dims that 1-D ends stood for are dropped from the result (1-D first
 * and last: a 0-dim tensor).  All the same dtype and device.  Built from
 * ct_mm, so it is differentiable like the products it runs.  Errors:
 * n < 2 (CT_ERR_ARG), a NULL list or element (CT_ERR_NULL), a bad rank
 * or shapes that cannot be multiplied (CT_ERR_SHAPE, "linalg_multi_dot:
 * tensors 0 and 1 with shapes [2, 2] and [3, 2] cannot be multiplied"),
 * mixed dtypes (CT_ERR_DTYPE). */
CT_API ct_tensor *ct_linalg_multi_dot(ct_tensor *const *tensors, int n);

/* ======================================================================
 * Convolution, pooling, resampling (NCHW; 1-D is NCL, 3-D is NCDHW)
 * Array arguments have one entry per spatial dim; NULL means the default
 * (stride 1 / kernel size for pooling, padding 0, dilation 1).
 * f32 convolutions that run through oneDNN reorder their weights into its
 * blocked layout; in inference mode, or for weights that do not require
 * grad, that copy is kept (up to 256 MiB in all, least recently used out)
 * and reused while the weights are unchanged: no in-place op on them and
 * no ct_data_ptr call since (see ct_data_ptr).
 * ====================================================================== */
CT_API ct_tensor *ct_conv1d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[1],
                            const int64_t padding[1], const int64_t dilation[1], int64_t groups);
CT_API ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[2],
                            const int64_t padding[2], const int64_t dilation[2], int64_t groups);
CT_API ct_tensor *ct_conv3d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[3],
                            const int64_t padding[3], const int64_t dilation[3], int64_t groups);
/* padding given as "same" or "valid" (PyTorch's string padding; "same" needs stride 1). */
CT_API ct_tensor *ct_conv_padmode(ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd,
                                  const int64_t *stride, const char *padding,
                                  const int64_t *dilation, int64_t groups);
CT_API ct_tensor *ct_conv_transpose1d(ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const int64_t stride[1], const int64_t padding[1],
                                      const int64_t output_padding[1], int64_t groups,
                                      const int64_t dilation[1]);
CT_API ct_tensor *ct_conv_transpose2d(ct_tensor *x, ct_tensor *w, ct_tensor *b,
                                      const int64_t stride[2], const int64_t padding[2],
                                      const int64_t output_padding[2], int64_t groups,
                                      const int64_t dilation[2]);
CT_API ct_tensor *ct_max_pool1d(ct_tensor *x, const int64_t k[1], const int64_t stride[1],
                                const int64_t padding[1], const int64_t dilation[1],
                                bool ceil_mode, ct_tensor **indices);
/* indices may be NULL; when given, receives int64 flat indices per plane. */
CT_API ct_tensor *ct_max_pool2d(ct_tensor *x, const int64_t k[2], const int64_t stride[2],
                                const int64_t padding[2], const int64_t dilation[2],
                                bool ceil_mode, ct_tensor **indices);
CT_API ct_tensor *ct_avg_pool1d(ct_tensor *x, const int64_t k[1], const int64_t stride[1],
                                const int64_t padding[1], bool ceil_mode, bool count_include_pad);
/* divisor_override <= 0: none. */
CT_API ct_tensor *ct_avg_pool2d(ct_tensor *x, const int64_t k[2], const int64_t stride[2],
                                const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                                int64_t divisor_override);
CT_API ct_tensor *ct_adaptive_avg_pool1d(ct_tensor *x, int64_t output_size);
CT_API ct_tensor *ct_adaptive_avg_pool2d(ct_tensor *x, const int64_t output_size[2]);
CT_API ct_tensor *ct_adaptive_max_pool2d(ct_tensor *x, const int64_t output_size[2], ct_tensor **indices);
typedef enum ct_interp_mode {
    CT_INTERP_NEAREST = 0, CT_INTERP_LINEAR, CT_INTERP_BILINEAR, CT_INTERP_BICUBIC,
    CT_INTERP_NEAREST_EXACT
} ct_interp_mode;
/* F.interpolate: give size (nsp entries) or scale_factor (nsp entries); the
 * other is NULL.  nsp = spatial dims (1 for NCL, 2 for NCHW). */
CT_API ct_tensor *ct_interpolate(ct_tensor *x, const int64_t *size, const double *scale_factor,
                                 int nsp, ct_interp_mode mode, bool align_corners);
CT_API ct_tensor *ct_pixel_shuffle(ct_tensor *x, int64_t upscale_factor);
CT_API ct_tensor *ct_pixel_unshuffle(ct_tensor *x, int64_t downscale_factor);
/* F.unfold (im2col): [N, C, H, W] -> [N, C*kh*kw, L]. */
CT_API ct_tensor *ct_im2col(ct_tensor *x, const int64_t k[2], const int64_t dilation[2],
                            const int64_t padding[2], const int64_t stride[2]);
/* F.fold (col2im): [N, C*kh*kw, L] -> [N, C, out_h, out_w]. */
CT_API ct_tensor *ct_col2im(ct_tensor *x, const int64_t output_size[2], const int64_t k[2],
                            const int64_t dilation[2], const int64_t padding[2],
                            const int64_t stride[2]);

/* ======================================================================
 * Random.  A counter-based (Philox 4x32-10) generator: element i of a draw
 * depends only on (seed, offset + i), so results are identical whatever
 * the thread count.
 * ====================================================================== */
CT_API void ct_manual_seed(uint64_t seed);
CT_API uint64_t ct_initial_seed(void);
CT_API ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dt);
CT_API ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dt);
/* integers in [low, high) */
CT_API ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dt);
CT_API ct_tensor *ct_randperm(int64_t n, ct_dtype dt);
CT_API ct_tensor *ct_rand_like(ct_tensor *t);
CT_API ct_tensor *ct_randn_like(ct_tensor *t);
/* Each element 1 with probability p[i]. */
CT_API ct_tensor *ct_bernoulli(ct_tensor *p);
CT_API ct_tensor *ct_bernoulli_(ct_tensor *t, double p);
/* Rows of probs ([n] or [m, n]): num_samples draws each. int64 result. */
CT_API ct_tensor *ct_multinomial(ct_tensor *probs, int64_t num_samples, bool replacement);
CT_API ct_tensor *ct_normal_(ct_tensor *t, double mean, double std);
CT_API ct_tensor *ct_uniform_(ct_tensor *t, double from, double to);
CT_API ct_tensor *ct_exponential_(ct_tensor *t, double lambd);
CT_API ct_tensor *ct_random_(ct_tensor *t, int64_t from, int64_t to);
/* F.dropout: zeroes with probability p and scales by 1/(1-p) when training. */
CT_API ct_tensor *ct_dropout(ct_tensor *x, double p, bool training);

/* ======================================================================
 * Threads
 * ====================================================================== */
CT_API void ct_set_num_threads(int n);
CT_API int ct_get_num_threads(void);
/* The CPU kernel level in use: "default" (x86-64), "avx2" or "avx512" --
 * picked at run time from the CPU; CT_CPU_CAPABILITY=default|avx2|avx512
 * forces a lower one (like ATEN_CPU_CAPABILITY). */
CT_API const char *ct_cpu_capability(void);

#ifdef __cplusplus
}
#endif
#endif
