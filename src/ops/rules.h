/* rules.h -- private: the derivative rules the op table (ops.def) names in its
 * vjp column.  Defined by src/autograd/derivs_*.c (written with public ops,
 * so they are themselves differentiable); the op layer only takes their
 * addresses, so it includes no autograd header.  The signature is
 * ct_vjp_fn (src/autograd/autograd_impl.h). */
#ifndef CT_RULES_H
#define CT_RULES_H

struct ct_vjp_ctx;
struct ct_tensor;
#define CT_VJP_RULE(fn) ct_status fn(const struct ct_vjp_ctx *c, struct ct_tensor *const *gout, struct ct_tensor **gin)

/* derivs_attention.c */
CT_VJP_RULE(ct__vjp_sdpa);
/* derivs_conv.c */
CT_VJP_RULE(ct__vjp_adaptive_avg_pool);
CT_VJP_RULE(ct__vjp_avg_pool);
CT_VJP_RULE(ct__vjp_col2im);
CT_VJP_RULE(ct__vjp_conv);
CT_VJP_RULE(ct__vjp_conv_transpose);
CT_VJP_RULE(ct__vjp_im2col);
CT_VJP_RULE(ct__vjp_interpolate);
CT_VJP_RULE(ct__vjp_max_pool);
/* derivs_elementwise.c */
CT_VJP_RULE(ct__vjp_abs);
CT_VJP_RULE(ct__vjp_acos);
CT_VJP_RULE(ct__vjp_acosh);
CT_VJP_RULE(ct__vjp_add);
CT_VJP_RULE(ct__vjp_addcdiv);
CT_VJP_RULE(ct__vjp_addcmul);
CT_VJP_RULE(ct__vjp_asin);
CT_VJP_RULE(ct__vjp_asinh);
CT_VJP_RULE(ct__vjp_atan);
CT_VJP_RULE(ct__vjp_atan2);
CT_VJP_RULE(ct__vjp_atanh);
CT_VJP_RULE(ct__vjp_celu);
CT_VJP_RULE(ct__vjp_clamp);
CT_VJP_RULE(ct__vjp_clamp_tensor);
CT_VJP_RULE(ct__vjp_copysign);
CT_VJP_RULE(ct__vjp_cos);
CT_VJP_RULE(ct__vjp_cosh);
CT_VJP_RULE(ct__vjp_digamma);
CT_VJP_RULE(ct__vjp_div);
CT_VJP_RULE(ct__vjp_elu);
CT_VJP_RULE(ct__vjp_erf);
CT_VJP_RULE(ct__vjp_erfc);
CT_VJP_RULE(ct__vjp_erfinv);
CT_VJP_RULE(ct__vjp_exp);
CT_VJP_RULE(ct__vjp_exp2);
CT_VJP_RULE(ct__vjp_expm1);
CT_VJP_RULE(ct__vjp_fmax);
CT_VJP_RULE(ct__vjp_fmin);
CT_VJP_RULE(ct__vjp_fmod);
CT_VJP_RULE(ct__vjp_gelu);
CT_VJP_RULE(ct__vjp_hardsigmoid);
CT_VJP_RULE(ct__vjp_hardswish);
CT_VJP_RULE(ct__vjp_hardtanh);
CT_VJP_RULE(ct__vjp_hypot);
CT_VJP_RULE(ct__vjp_identity);
CT_VJP_RULE(ct__vjp_leaky_relu);
CT_VJP_RULE(ct__vjp_lerp);
CT_VJP_RULE(ct__vjp_lgamma);
CT_VJP_RULE(ct__vjp_log);
CT_VJP_RULE(ct__vjp_log10);
CT_VJP_RULE(ct__vjp_log1p);
CT_VJP_RULE(ct__vjp_log2);
CT_VJP_RULE(ct__vjp_logit);
CT_VJP_RULE(ct__vjp_maximum);
CT_VJP_RULE(ct__vjp_minimum);
CT_VJP_RULE(ct__vjp_mish);
CT_VJP_RULE(ct__vjp_mul);
CT_VJP_RULE(ct__vjp_nan_to_num);
CT_VJP_RULE(ct__vjp_neg);
CT_VJP_RULE(ct__vjp_polygamma);
CT_VJP_RULE(ct__vjp_pow);
CT_VJP_RULE(ct__vjp_pow_scalar);
CT_VJP_RULE(ct__vjp_reciprocal);
CT_VJP_RULE(ct__vjp_relu);
CT_VJP_RULE(ct__vjp_relu6);
CT_VJP_RULE(ct__vjp_remainder);
CT_VJP_RULE(ct__vjp_rpow_scalar);
CT_VJP_RULE(ct__vjp_rsqrt);
CT_VJP_RULE(ct__vjp_selu);
CT_VJP_RULE(ct__vjp_shrink);
CT_VJP_RULE(ct__vjp_sigmoid);
CT_VJP_RULE(ct__vjp_silu);
CT_VJP_RULE(ct__vjp_sin);
CT_VJP_RULE(ct__vjp_sinh);
CT_VJP_RULE(ct__vjp_softplus);
CT_VJP_RULE(ct__vjp_softsign);
CT_VJP_RULE(ct__vjp_sqrt);
CT_VJP_RULE(ct__vjp_square);
CT_VJP_RULE(ct__vjp_sub);
CT_VJP_RULE(ct__vjp_tan);
CT_VJP_RULE(ct__vjp_tanh);
CT_VJP_RULE(ct__vjp_where);
CT_VJP_RULE(ct__vjp_xlogy);
CT_VJP_RULE(ct__vjp_zero);
/* derivs_index.c */
CT_VJP_RULE(ct__vjp_cat);
CT_VJP_RULE(ct__vjp_flip);
CT_VJP_RULE(ct__vjp_gather);
CT_VJP_RULE(ct__vjp_index);
CT_VJP_RULE(ct__vjp_index_add);
CT_VJP_RULE(ct__vjp_index_copy);
CT_VJP_RULE(ct__vjp_index_fill);
CT_VJP_RULE(ct__vjp_index_put);
CT_VJP_RULE(ct__vjp_index_select);
CT_VJP_RULE(ct__vjp_masked_fill);
CT_VJP_RULE(ct__vjp_masked_scatter);
CT_VJP_RULE(ct__vjp_masked_select);
CT_VJP_RULE(ct__vjp_roll);
CT_VJP_RULE(ct__vjp_scatter);
CT_VJP_RULE(ct__vjp_scatter_add);
CT_VJP_RULE(ct__vjp_scatter_reduce);
CT_VJP_RULE(ct__vjp_tril);
CT_VJP_RULE(ct__vjp_triu);
/* derivs_linalg.c */
CT_VJP_RULE(ct__vjp_addbmm);
CT_VJP_RULE(ct__vjp_addmm);
CT_VJP_RULE(ct__vjp_addmv);
CT_VJP_RULE(ct__vjp_addr);
CT_VJP_RULE(ct__vjp_baddbmm);
CT_VJP_RULE(ct__vjp_bilinear);
CT_VJP_RULE(ct__vjp_bmm);
CT_VJP_RULE(ct__vjp_cdist);
CT_VJP_RULE(ct__vjp_cross);
CT_VJP_RULE(ct__vjp_dot);
CT_VJP_RULE(ct__vjp_einsum);
CT_VJP_RULE(ct__vjp_kron);
CT_VJP_RULE(ct__vjp_linear);
CT_VJP_RULE(ct__vjp_matmul);
CT_VJP_RULE(ct__vjp_mm);
CT_VJP_RULE(ct__vjp_mv);
CT_VJP_RULE(ct__vjp_outer);
CT_VJP_RULE(ct__vjp_tensordot);
CT_VJP_RULE(ct__vjp_trace);
/* derivs_reduce.c */
CT_VJP_RULE(ct__vjp_amaxmin);
CT_VJP_RULE(ct__vjp_cummaxmin);
CT_VJP_RULE(ct__vjp_cumprod);
CT_VJP_RULE(ct__vjp_cumsum);
CT_VJP_RULE(ct__vjp_log_softmax);
CT_VJP_RULE(ct__vjp_logcumsumexp);
CT_VJP_RULE(ct__vjp_logsumexp);
CT_VJP_RULE(ct__vjp_maxmin_dim);
CT_VJP_RULE(ct__vjp_mean);
CT_VJP_RULE(ct__vjp_nanmean);
CT_VJP_RULE(ct__vjp_nansum);
CT_VJP_RULE(ct__vjp_norm);
CT_VJP_RULE(ct__vjp_prod);
CT_VJP_RULE(ct__vjp_softmax);
CT_VJP_RULE(ct__vjp_sort_select);
CT_VJP_RULE(ct__vjp_sum);
CT_VJP_RULE(ct__vjp_var_std);
/* derivs_view.c */
CT_VJP_RULE(ct__vjp_as_strided);
CT_VJP_RULE(ct__vjp_copy);
CT_VJP_RULE(ct__vjp_diagonal);
CT_VJP_RULE(ct__vjp_expand);
CT_VJP_RULE(ct__vjp_none);
CT_VJP_RULE(ct__vjp_permute);
CT_VJP_RULE(ct__vjp_reshape_back);
CT_VJP_RULE(ct__vjp_select);
CT_VJP_RULE(ct__vjp_slice);
CT_VJP_RULE(ct__vjp_unfold);

#undef CT_VJP_RULE

/* Forward-mode rules (the jvp column), ct_jvp_fn (autograd_impl.h):
 * tout[j] from tin[k] (NULL: a zero tangent). */
struct ct_jvp_ctx;
#define CT_JVP_RULE(fn) ct_status fn(const struct ct_jvp_ctx *c, struct ct_tensor *const *tin, struct ct_tensor **tout)
/* jvp_elementwise.c */
CT_JVP_RULE(ct__jvp_ew);
CT_JVP_RULE(ct__jvp_zero);
/* jvp_view.c */
CT_JVP_RULE(ct__jvp_view);
CT_JVP_RULE(ct__jvp_as_strided);
CT_JVP_RULE(ct__jvp_cat);
/* jvp_reduce.c */
CT_JVP_RULE(ct__jvp_sum);
CT_JVP_RULE(ct__jvp_mean);
CT_JVP_RULE(ct__jvp_logsumexp);
CT_JVP_RULE(ct__jvp_var_std);
CT_JVP_RULE(ct__jvp_norm);
CT_JVP_RULE(ct__jvp_maxmin_dim);
CT_JVP_RULE(ct__jvp_amaxmin);
CT_JVP_RULE(ct__jvp_softmax);
CT_JVP_RULE(ct__jvp_log_softmax);
CT_JVP_RULE(ct__jvp_cumsum);
CT_JVP_RULE(ct__jvp_prod);
CT_JVP_RULE(ct__jvp_cumprod);
CT_JVP_RULE(ct__jvp_logcumsumexp);
/* jvp_linalg.c */
CT_JVP_RULE(ct__jvp_mm);
CT_JVP_RULE(ct__jvp_bmm);
CT_JVP_RULE(ct__jvp_matmul);
CT_JVP_RULE(ct__jvp_dot);
CT_JVP_RULE(ct__jvp_mv);
CT_JVP_RULE(ct__jvp_outer);
CT_JVP_RULE(ct__jvp_linear);
CT_JVP_RULE(ct__jvp_addmm);
CT_JVP_RULE(ct__jvp_conv);
CT_JVP_RULE(ct__jvp_addmv);
CT_JVP_RULE(ct__jvp_addr);
CT_JVP_RULE(ct__jvp_baddbmm);
CT_JVP_RULE(ct__jvp_addbmm);
CT_JVP_RULE(ct__jvp_kron);
CT_JVP_RULE(ct__jvp_cross);
CT_JVP_RULE(ct__jvp_einsum);
CT_JVP_RULE(ct__jvp_bilinear);
CT_JVP_RULE(ct__jvp_tensordot);
/* jvp_index.c */
CT_JVP_RULE(ct__jvp_linear0);
CT_JVP_RULE(ct__jvp_index_select);
CT_JVP_RULE(ct__jvp_gather);
CT_JVP_RULE(ct__jvp_masked_fill);
CT_JVP_RULE(ct__jvp_sort_select);
CT_JVP_RULE(ct__jvp_cummaxmin);
CT_JVP_RULE(ct__jvp_max_pool);
CT_JVP_RULE(ct__jvp_nansum);
CT_JVP_RULE(ct__jvp_scatter_like);
CT_JVP_RULE(ct__jvp_masked_select);
CT_JVP_RULE(ct__jvp_index);
CT_JVP_RULE(ct__jvp_index_put);
/* jvp_attention.c */
CT_JVP_RULE(ct__jvp_sdpa);
/* forward.c: the generic rule, from the op's VJP (double-vjp trick) */
CT_JVP_RULE(ct__jvp_dvjp);

/* ---- batching rules (vmap; the op table's vmap column) --------------------
 * Defined in src/func/batch_*.c; the signature is ct_vmap_rule_fn
 * (src/func/func_impl.h): a rule gets the node's inputs as (tensor, batch
 * dim) values and stores its outputs', calling the op once on the batch. */
struct ct_vmap_call;
struct ct_bval;
#define CT_VMAP_RULE(fn) ct_status fn(struct ct_vmap_call *c, const struct ct_bval *in, struct ct_bval *out)
/* batch_ew.c: elementwise ops, copies, factories, the fused gradient rows */
CT_VMAP_RULE(ct__vmap_ew);
CT_VMAP_RULE(ct__vmap_copy);
CT_VMAP_RULE(ct__vmap_fill);
CT_VMAP_RULE(ct__vmap_factory);
CT_VMAP_RULE(ct__vmap_ew_grad);
CT_VMAP_RULE(ct__vmap_masked_fill);
CT_VMAP_RULE(ct__vmap_masked_select);
CT_VMAP_RULE(ct__vmap_fused_rows);
/* batch_view.c: views and shape ops */
CT_VMAP_RULE(ct__vmap_view);
CT_VMAP_RULE(ct__vmap_expand);
CT_VMAP_RULE(ct__vmap_permute);
CT_VMAP_RULE(ct__vmap_squeeze);
CT_VMAP_RULE(ct__vmap_dim_view);
CT_VMAP_RULE(ct__vmap_diagonal);
CT_VMAP_RULE(ct__vmap_leading);
CT_VMAP_RULE(ct__vmap_remap);
CT_VMAP_RULE(ct__vmap_repeat);
CT_VMAP_RULE(ct__vmap_cat);
CT_VMAP_RULE(ct__vmap_index_select);
CT_VMAP_RULE(ct__vmap_gather);
CT_VMAP_RULE(ct__vmap_bucketize);
CT_VMAP_RULE(ct__vmap_as_strided);
/* batch_reduce.c: reductions, scans, sorts */
CT_VMAP_RULE(ct__vmap_reduce);
CT_VMAP_RULE(ct__vmap_scan);
CT_VMAP_RULE(ct__vmap_scan_backward);
CT_VMAP_RULE(ct__vmap_sort);
/* batch_linalg.c: the matrix products, convolution, pooling, random ops */
CT_VMAP_RULE(ct__vmap_matmul);
CT_VMAP_RULE(ct__vmap_addmm);
CT_VMAP_RULE(ct__vmap_linear);
CT_VMAP_RULE(ct__vmap_conv);
CT_VMAP_RULE(ct__vmap_conv_wgrad);
CT_VMAP_RULE(ct__vmap_max_pool_backward);
CT_VMAP_RULE(ct__vmap_pool);
CT_VMAP_RULE(ct__vmap_random);
/* batch_index.c: scatters, index_*, take, masked_scatter, einsum-shaped
 * products, kron, cross, cdist, trace, resampling */
CT_VMAP_RULE(ct__vmap_scatter);
CT_VMAP_RULE(ct__vmap_index_along);
CT_VMAP_RULE(ct__vmap_index);
CT_VMAP_RULE(ct__vmap_index_put);
CT_VMAP_RULE(ct__vmap_histc);
CT_VMAP_RULE(ct__vmap_masked_scatter);
CT_VMAP_RULE(ct__vmap_einsum);
CT_VMAP_RULE(ct__vmap_tensordot);
CT_VMAP_RULE(ct__vmap_bilinear);
CT_VMAP_RULE(ct__vmap_kron);
CT_VMAP_RULE(ct__vmap_cross);
CT_VMAP_RULE(ct__vmap_cdist);
CT_VMAP_RULE(ct__vmap_trace);
CT_VMAP_RULE(ct__vmap_interpolate);
CT_VMAP_RULE(ct__vmap_fold);
/* batch_fused.c: layer norm, attention, batch norm */
CT_VMAP_RULE(ct__vmap_layer_norm_fwd);
CT_VMAP_RULE(ct__vmap_layer_norm_bwd);
CT_VMAP_RULE(ct__vmap_sdpa);
CT_VMAP_RULE(ct__vmap_batch_norm_eval);
CT_VMAP_RULE(ct__vmap_batch_norm_train);
#undef CT_VMAP_RULE
#endif
