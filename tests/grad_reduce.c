/* grad_reduce.c -- gradcheck cases for reductions, scans, softmax, sorting. */
#include <math.h>

#include "gradcheck_harness.h"

#define U (void)n; (void)u
#define D(...) (const int64_t[]){__VA_ARGS__}, (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* sum / mean */
static ct_tensor *f_sum_all(ct_tensor *const *in, int n, void *u) { U; return ct_sum(in[0], NULL, 0, false); }
static ct_tensor *f_sum_dims(ct_tensor *const *in, int n, void *u) { U; return ct_sum(in[0], D(0, 2), false); }
static ct_tensor *f_sum_keep(ct_tensor *const *in, int n, void *u) { U; return ct_sum(in[0], D(-1), true); }
static ct_tensor *f_sum_dtype(ct_tensor *const *in, int n, void *u) {
    U; /* the cast to float32 is recorded: the gradient reaches the f64 input */
    return ct_to_dtype(ct_sum_dtype(in[0], D(1), false, CT_F32), CT_F64);
}
static ct_tensor *f_mean_dims(ct_tensor *const *in, int n, void *u) { U; return ct_mean(in[0], D(0, 2), true); }
static ct_tensor *f_mean_all(ct_tensor *const *in, int n, void *u) { U; return ct_mean(in[0], NULL, 0, false); }

/* nansum / nanmean: NaNs added at fixed places (adding keeps the gradient path) */
static ct_tensor *with_nans(ct_tensor *x) {
    double v[12] = {0, NAN, 0, 0, 0, 0, NAN, 0, 0, 0, 0, NAN};
    return ct_add(x, ct_from_doubles(v, (const int64_t[]){3, 4}, 2, CT_F64));
}
static ct_tensor *f_nansum(ct_tensor *const *in, int n, void *u) { U; return ct_nansum(with_nans(in[0]), D(1), false); }
static ct_tensor *f_nansum_all(ct_tensor *const *in, int n, void *u) { U; return ct_nansum(in[0], NULL, 0, false); }
static ct_tensor *f_nanmean(ct_tensor *const *in, int n, void *u) { U; return ct_nanmean(with_nans(in[0]), D(0), true); }
static ct_tensor *f_nanmean_all(ct_tensor *const *in, int n, void *u) { U; return ct_nanmean(with_nans(in[0]), NULL, 0, false); }

/* prod */
static ct_tensor *f_prod_dim(ct_tensor *const *in, int n, void *u) { U; return ct_prod(in[0], D(1), false); }
static ct_tensor *f_prod_all(ct_tensor *const *in, int n, void *u) { U; return ct_prod(in[0], NULL, 0, false); }
static ct_tensor *f_prod_dims_keep(ct_tensor *const *in, int n, void *u) { U; return ct_prod(in[0], D(0, 2), true); }
/* zeros: x [3, 4] times a constant mask with one zero in row 0, two in row 1 */
static ct_tensor *zeroed(ct_tensor *x) {
    double m[12] = {1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1};
    return ct_mul(x, ct_from_doubles(m, (const int64_t[]){3, 4}, 2, CT_F64));
}
static ct_tensor *f_prod_zeros(ct_tensor *const *in, int n, void *u) { U; return ct_prod(zeroed(in[0]), D(1), false); }
static ct_tensor *f_prod_zeros_all(ct_tensor *const *in, int n, void *u) {
    U; /* one zero in the whole tensor: the other entries get nonzero gradients */
    double m[6] = {1, 1, 1, 0, 1, 1};
    return ct_prod(ct_mul(in[0], ct_from_doubles(m, (const int64_t[]){2, 3}, 2, CT_F64)), NULL, 0, false);
}
static ct_tensor *f_prod_zero_cat(ct_tensor *const *in, int n, void *u) {
    U; /* x next to a constant 0 column: gradient prod(others) at x */
    ct_tensor *z = ct_zeros((const int64_t[]){3, 1}, 2, CT_F64);
    ct_tensor *ts[2] = {z, in[0]};
    return ct_prod(ct_cat(ts, 2, 1), D(0), false);
}

/* amax / amin / max / min / aminmax */
static ct_tensor *f_amax(ct_tensor *const *in, int n, void *u) { U; return ct_amax(in[0], D(1), false); }
static ct_tensor *f_amax_dims(ct_tensor *const *in, int n, void *u) { U; return ct_amax(in[0], D(0, 2), true); }
static ct_tensor *f_amin(ct_tensor *const *in, int n, void *u) { U; return ct_amin(in[0], D(0), true); }
static ct_tensor *ties(ct_tensor *x) {
    /* clamp to [-0.5, 0.5]: ties at the bounds (x is away from them) */
    return ct_clamp(x, -0.5, 0.5);
}
static ct_tensor *f_amax_ties(ct_tensor *const *in, int n, void *u) { U; return ct_amax(ties(in[0]), D(1), false); }
static ct_tensor *f_amin_ties(ct_tensor *const *in, int n, void *u) { U; return ct_amin(ties(in[0]), NULL, 0, false); }
static ct_tensor *f_max_all(ct_tensor *const *in, int n, void *u) { U; return ct_max(in[0]); }
static ct_tensor *f_min_all(ct_tensor *const *in, int n, void *u) { U; return ct_min(in[0]); }
static ct_tensor *f_aminmax(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *mn, *mx;
    if (ct_aminmax(in[0], 1, false, &mn, &mx)) return NULL;
    return ct_add(ct_mul_scalar(mn, 2.0), mx);
}

/* logsumexp / var / std / norm */
static ct_tensor *f_lse(ct_tensor *const *in, int n, void *u) { U; return ct_logsumexp(in[0], D(1), false); }
static ct_tensor *f_lse_dims(ct_tensor *const *in, int n, void *u) { U; return ct_logsumexp(in[0], D(0, 2), true); }
static ct_tensor *f_var(ct_tensor *const *in, int n, void *u) { U; return ct_var(in[0], D(1), 1.0, false); }
static ct_tensor *f_var_all0(ct_tensor *const *in, int n, void *u) { U; return ct_var(in[0], NULL, 0, 0.0, false); }
static ct_tensor *f_var_dims(ct_tensor *const *in, int n, void *u) { U; return ct_var(in[0], D(0, 2), 1.0, true); }
static ct_tensor *f_std(ct_tensor *const *in, int n, void *u) { U; return ct_std(in[0], D(1), 1.0, false); }
static ct_tensor *f_std_dims(ct_tensor *const *in, int n, void *u) { U; return ct_std(in[0], D(0, 2), 0.0, true); }
static ct_tensor *f_var_mean(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *m;
    if (ct_var_mean(in[0], D(0), 1.0, false, &v, &m)) return NULL;
    return ct_add(v, ct_mul(m, m));
}
static ct_tensor *f_std_mean(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *s, *m;
    if (ct_std_mean(in[0], D(1), 1.0, true, &s, &m)) return NULL;
    return ct_mul(s, m);
}
static ct_tensor *f_norm4(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 4.0, D(1), false); }
static ct_tensor *f_norm2(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 2.0, D(1), false); }
static ct_tensor *f_norm2_all(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 2.0, NULL, 0, false); }
static ct_tensor *f_norm1(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 1.0, D(0), true); }
static ct_tensor *f_norm0(ct_tensor *const *in, int n, void *u) { U; return ct_add(ct_norm(in[0], 0.0, D(1), false), ct_sum(in[0], D(1), false)); }
static ct_tensor *f_norm_inf(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], INFINITY, D(1), false); }
static ct_tensor *f_norm_ninf(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], -INFINITY, NULL, 0, false); }
static ct_tensor *f_norm3(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 3.0, D(1), false); }
static ct_tensor *f_norm15(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 1.5, D(0, 1), false); }
static ct_tensor *f_norm05(ct_tensor *const *in, int n, void *u) { U; return ct_norm(in[0], 0.5, D(1), true); }
static ct_tensor *f_norm_fro(ct_tensor *const *in, int n, void *u) { U; return ct_norm_fro(in[0], D(0, 1), false); }

/* max_dim / min_dim */
static ct_tensor *f_max_dim(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_max_dim(in[0], 1, false, &v, NULL)) return NULL; /* values only */
    return v;
}
static ct_tensor *f_max_dim_keep(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_max_dim(in[0], 0, true, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_min_dim(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_min_dim(in[0], -1, false, &v, &i)) return NULL;
    return v;
}

/* softmax / log_softmax */
static ct_tensor *f_softmax(ct_tensor *const *in, int n, void *u) { U; return ct_softmax(in[0], 1); }
static ct_tensor *f_softmax0(ct_tensor *const *in, int n, void *u) { U; return ct_softmax(in[0], 0); }
static ct_tensor *f_log_softmax(ct_tensor *const *in, int n, void *u) { U; return ct_log_softmax(in[0], -1); }
static ct_tensor *f_log_softmax0(ct_tensor *const *in, int n, void *u) { U; return ct_log_softmax(in[0], 0); }

/* scans */
static ct_tensor *f_cumsum(ct_tensor *const *in, int n, void *u) { U; return ct_cumsum(in[0], 1); }
static ct_tensor *f_cumsum0(ct_tensor *const *in, int n, void *u) { U; return ct_cumsum(in[0], 0); }
static ct_tensor *f_cumprod(ct_tensor *const *in, int n, void *u) { U; return ct_cumprod(in[0], 1); }
static ct_tensor *f_cumprod0(ct_tensor *const *in, int n, void *u) { U; return ct_cumprod(in[0], 0); }
static ct_tensor *f_cumprod_zeros(ct_tensor *const *in, int n, void *u) { U; return ct_cumprod(zeroed(in[0]), 1); }
static ct_tensor *f_cumprod_zero_cat(ct_tensor *const *in, int n, void *u) {
    U; /* a constant 0 in the middle of each row */
    ct_tensor *z = ct_zeros((const int64_t[]){2, 1}, 2, CT_F64);
    ct_tensor *ts[3] = {ct_narrow(in[0], 1, 0, 2), z, ct_narrow(in[0], 1, 2, 2)};
    return ct_cumprod(ct_cat(ts, 3, 1), 1);
}
static ct_tensor *f_cummax(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_cummax(in[0], 1, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_cummin(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_cummin(in[0], 0, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_lcse(ct_tensor *const *in, int n, void *u) { U; return ct_logcumsumexp(in[0], 1); }
static ct_tensor *f_lcse0(ct_tensor *const *in, int n, void *u) { U; return ct_logcumsumexp(in[0], 0); }

/* sorting */
static ct_tensor *f_sort(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_sort(in[0], 1, false, false, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_sort_desc(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_sort(in[0], 0, true, true, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_topk(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_topk(in[0], 2, 1, true, true, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_topk_small(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_topk(in[0], 2, 0, false, true, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_kthvalue(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_kthvalue(in[0], 2, 1, false, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_kthvalue_keep(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_kthvalue(in[0], 3, 0, true, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_median_dim(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v;
    if (ct_median_dim(in[0], 1, false, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_median_keep(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *v, *i;
    if (ct_median_dim(in[0], 0, true, &v, &i)) return NULL;
    return v;
}
static ct_tensor *f_median_all(ct_tensor *const *in, int n, void *u) { U; return ct_median(in[0]); }
static ct_tensor *f_nanmedian_all(ct_tensor *const *in, int n, void *u) { U; return ct_nanmedian(in[0]); }
static ct_tensor *f_mode(ct_tensor *const *in, int n, void *u) {
    U; /* distinct values: the mode is the smallest */
    ct_tensor *v;
    if (ct_mode(in[0], 1, false, &v, NULL)) return NULL;
    return v;
}
static ct_tensor *f_mode_ties(ct_tensor *const *in, int n, void *u) {
    U; /* repeated values: x [4] -> [x0 x1 x0 x2 x1 x0], the mode is x0 */
    int64_t ix[6] = {0, 1, 0, 2, 1, 0};
    ct_tensor *i = ct_from_array(ix, (const int64_t[]){6}, 1, CT_I64);
    ct_tensor *v, *k;
    if (ct_mode(ct_index_select(in[0], 0, i), 0, false, &v, &k)) return NULL;
    return v;
}

#define S2(a, b) 1, {2}, {{a, b}}
#define S3(a, b, c) 1, {3}, {{a, b, c}}
#define S1(a) 1, {1}, {{a}}
#define GG GC_GRADGRAD
#define DI GC_DISTINCT
const gc_case gc_cases_reduce[] = {
    {"sum", "sum_all", f_sum_all, S2(3, 4), 0, 0, GG, 0, 0},
    {"sum", "sum_dims", f_sum_dims, S3(2, 3, 2), 0, 0, GG, 0, 0},
    {"sum", "sum_keepdim", f_sum_keep, S2(3, 4), 0, 0, GG, 0, 0},
    {"sum", "sum_dtype_f32", f_sum_dtype, S2(3, 4), 0, 0, GC_CONTIG_ONLY, 0.1, 0.1},
    {"mean", "mean_dims_keep", f_mean_dims, S3(2, 3, 2), 0, 0, GG, 0, 0},
    {"mean", "mean_all", f_mean_all, S2(3, 4), 0, 0, GG, 0, 0},
    {"nansum", "nansum_nan", f_nansum, S2(3, 4), 0, 0, GG, 0, 0},
    {"nansum", "nansum_all", f_nansum_all, S2(3, 4), 0, 0, GG, 0, 0},
    {"nanmean", "nanmean_nan_keep", f_nanmean, S2(3, 4), 0, 0, GG, 0, 0},
    {"nanmean", "nanmean_all", f_nanmean_all, S2(3, 4), 0, 0, GG, 0, 0},
    {"prod", "prod_dim", f_prod_dim, S2(3, 4), 0.5, 1.5, GG, 0, 0},
    {"prod", "prod_all", f_prod_all, S2(2, 3), -1.5, -0.5, GG, 0, 0},
    {"prod", "prod_dims_keep", f_prod_dims_keep, S3(2, 3, 2), 0.5, 1.5, GG, 0, 0},
    {"prod", "prod_zeros", f_prod_zeros, S2(3, 4), 0.5, 1.5, GG, 0, 0},
    {"prod", "prod_zero_all", f_prod_zeros_all, S2(2, 3), 0.5, 1.5, GG, 0, 0},
    {"prod", "prod_zero_cat", f_prod_zero_cat, S2(3, 2), 0.5, 1.5, GG, 0, 0},
    {"amax", "amax_dim", f_amax, S2(3, 4), 0, 0, DI, 0, 0},
    {"amax", "amax_dims_keep", f_amax_dims, S3(2, 3, 2), 0, 0, DI, 0, 0},
    {"amax", "amax_ties", f_amax_ties, S2(3, 4), 0, 0, DI, 0, 0},
    {"amax", "max_all", f_max_all, S2(3, 4), 0, 0, DI, 0, 0},
    {"amax", "aminmax", f_aminmax, S2(3, 4), 0, 0, DI, 0, 0},
    {"amin", "amin_keep", f_amin, S2(3, 4), 0, 0, DI, 0, 0},
    {"amin", "amin_ties_all", f_amin_ties, S2(3, 4), 0, 0, DI, 0, 0},
    {"amin", "min_all", f_min_all, S2(3, 4), 0, 0, DI, 0, 0},
    {"logsumexp", "logsumexp", f_lse, S2(3, 4), -2, 2, GG, 0, 0},
    {"logsumexp", "logsumexp_dims_keep", f_lse_dims, S3(2, 3, 2), -2, 2, GG, 0, 0},
    {"var", "var", f_var, S2(3, 4), 0, 0, GG, 0, 0},
    {"var", "var_all_corr0", f_var_all0, S2(3, 4), 0, 0, GG, 0, 0},
    {"var", "var_dims_keep", f_var_dims, S3(2, 3, 2), 0, 0, GG, 0, 0},
    {"var", "var_mean", f_var_mean, S2(3, 4), 0, 0, GG, 0, 0},
    {"std", "std", f_std, S2(3, 4), 0, 0, GG, 0, 0},
    {"std", "std_dims_keep", f_std_dims, S3(2, 3, 2), 0, 0, GG, 0, 0},
    {"std", "std_mean", f_std_mean, S2(3, 4), 0, 0, GG, 0, 0},
    {"norm", "norm2", f_norm2, S2(3, 4), 0, 0, GG, 0, 0},
    {"norm", "norm2_all", f_norm2_all, S2(3, 4), 0, 0, GG, 0, 0},
    {"norm", "norm_fro", f_norm_fro, S3(2, 3, 2), 0, 0, GG, 0, 0},
    {"norm", "norm1_keep", f_norm1, S2(3, 4), 0, 0, DI, 0, 0},
    {"norm", "norm0", f_norm0, S2(3, 4), 0, 0, DI, 0, 0},
    {"norm", "norm_inf", f_norm_inf, S2(3, 4), -1, 0.7, DI, 0, 0},
    {"norm", "norm_ninf_all", f_norm_ninf, S2(3, 4), -1, 0.7, DI, 0, 0},
    {"norm", "norm3", f_norm3, S2(3, 4), 0, 0, DI | GG, 0, 0},
    {"norm", "norm4", f_norm4, S2(3, 4), 0, 0, DI | GG, 0, 0},
    {"norm", "norm1.5_dims", f_norm15, S3(2, 3, 2), 0, 0, DI, 0, 0},
    {"norm", "norm0.5_keep", f_norm05, S2(3, 4), 0, 0, DI, 0, 0},
    {"max_dim", "max_dim_values_only", f_max_dim, S2(3, 4), 0, 0, DI, 0, 0},
    {"max_dim", "max_dim_keep", f_max_dim_keep, S3(3, 2, 2), 0, 0, DI, 0, 0},
    {"min_dim", "min_dim", f_min_dim, S2(3, 4), 0, 0, DI, 0, 0},
    {"softmax", "softmax", f_softmax, S2(3, 4), -2, 2, GG, 0, 0},
    {"softmax", "softmax_dim0", f_softmax0, S3(3, 2, 2), -2, 2, GG, 0, 0},
    {"log_softmax", "log_softmax", f_log_softmax, S2(3, 4), -2, 2, GG, 0, 0},
    {"log_softmax", "log_softmax_dim0", f_log_softmax0, S3(3, 2, 2), -2, 2, GG, 0, 0},
    {"cumsum", "cumsum", f_cumsum, S2(3, 4), 0, 0, GG, 0, 0},
    {"cumsum", "cumsum_dim0", f_cumsum0, S3(3, 2, 2), 0, 0, GG, 0, 0},
    {"cumprod", "cumprod", f_cumprod, S2(3, 4), 0.5, 1.5, GG, 0, 0},
    {"cumprod", "cumprod_dim0_neg", f_cumprod0, S3(3, 2, 2), -1.5, -0.5, GG, 0, 0},
    {"cumprod", "cumprod_zeros", f_cumprod_zeros, S2(3, 4), 0.5, 1.5, GG, 0, 0},
    {"cumprod", "cumprod_zero_cat", f_cumprod_zero_cat, S2(2, 4), 0.5, 1.5, GG, 0, 0},
    {"cummax", "cummax_values_only", f_cummax, S2(3, 4), 0, 0, DI, 0, 0},
    {"cummin", "cummin_dim0", f_cummin, S2(4, 3), 0, 0, DI, 0, 0},
    {"logcumsumexp", "logcumsumexp", f_lcse, S2(3, 4), -2, 2, 0, 0, 0},
    {"logcumsumexp", "logcumsumexp_dim0", f_lcse0, S3(3, 2, 2), -2, 2, 0, 0, 0},
    {"sort", "sort_values_only", f_sort, S2(3, 4), 0, 0, DI, 0, 0},
    {"sort", "sort_desc_dim0", f_sort_desc, S2(4, 3), 0, 0, DI, 0, 0},
    {"topk", "topk_values_only", f_topk, S2(3, 4), 0, 0, DI, 0, 0},
    {"topk", "topk_smallest_dim0", f_topk_small, S2(4, 3), 0, 0, DI, 0, 0},
    {"kthvalue", "kthvalue_values_only", f_kthvalue, S2(3, 4), 0, 0, DI, 0, 0},
    {"kthvalue", "kthvalue_keep", f_kthvalue_keep, S2(4, 3), 0, 0, DI, 0, 0},
    {"median_dim", "median_dim_values_only", f_median_dim, S2(3, 5), 0, 0, DI, 0, 0},
    {"median_dim", "median_dim_keep", f_median_keep, S2(4, 3), 0, 0, DI, 0, 0},
    {"median_dim", "median_all", f_median_all, S2(3, 4), 0, 0, DI, 0, 0},
    {"median_dim", "nanmedian_all", f_nanmedian_all, S2(3, 3), 0, 0, DI, 0, 0},
    {"mode", "mode_distinct", f_mode, S2(3, 4), 0, 0, DI, 0, 0},
    {"mode", "mode_ties", f_mode_ties, S1(4), 0, 0, DI, 0, 0},
};
const int gc_ncases_reduce = sizeof gc_cases_reduce / sizeof gc_cases_reduce[0];
