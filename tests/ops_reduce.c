/* ops_reduce.c -- fixture runners for the reduce family (tests/fixtures/reduce.txt):
 * reductions, scans, softmax, sorting. */
#include <math.h>
#include <string.h>

#include "fixture.h"

static ct_status st_of(ct_tensor *t) { return t ? CT_OK : (ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME); }

/* dims param: absent or [] -> all dims */
#define DIMS                                                                   \
    int64_t dims[16];                                                          \
    int nd = fx_ints(c, "dims", dims, 16);                                     \
    if (nd < 0) nd = 0;                                                        \
    bool keep = fx_i(c, "keepdim", 0) != 0;                                    \
    (void)keep;

#define RED(NAME)                                                              \
    static ct_status r_##NAME(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { \
        DIMS                                                                   \
        out[0] = ct_##NAME(in[0], nd ? dims : NULL, nd, keep);                 \
        return st_of(out[0]);                                                  \
    }
RED(sum) RED(mean) RED(nansum) RED(nanmean) RED(prod) RED(amax) RED(amin) RED(all) RED(any)
RED(logsumexp) RED(norm_fro)

static ct_status r_sum_dtype(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    out[0] = ct_sum_dtype(in[0], nd ? dims : NULL, nd, keep, fx_dtype(fx_s(c, "dtype", "float32")));
    return st_of(out[0]);
}
static ct_status r_count_nonzero(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    out[0] = ct_count_nonzero(in[0], nd ? dims : NULL, nd);
    return st_of(out[0]);
}
static ct_status r_var(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    out[0] = ct_var(in[0], nd ? dims : NULL, nd, fx_f(c, "correction", 1), keep);
    return st_of(out[0]);
}
static ct_status r_std(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    out[0] = ct_std(in[0], nd ? dims : NULL, nd, fx_f(c, "correction", 1), keep);
    return st_of(out[0]);
}
static ct_status r_var_mean(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    return ct_var_mean(in[0], nd ? dims : NULL, nd, fx_f(c, "correction", 1), keep, &out[0], &out[1]);
}
static ct_status r_std_mean(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    return ct_std_mean(in[0], nd ? dims : NULL, nd, fx_f(c, "correction", 1), keep, &out[0], &out[1]);
}
static ct_status r_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    DIMS
    out[0] = ct_norm(in[0], fx_f(c, "p", 2), nd ? dims : NULL, nd, keep);
    return st_of(out[0]);
}
static ct_status r_max(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_max(in[0]);
    return st_of(out[0]);
}
static ct_status r_min(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_min(in[0]);
    return st_of(out[0]);
}
static int64_t dim_of(const fx_case *c) { return fx_has(c, "dim") ? fx_i(c, "dim", 0) : CT_DIM_NONE; }
static ct_status r_max_dim(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_max_dim(in[0], fx_i(c, "dim", 0), fx_i(c, "keepdim", 0), &out[0], &out[1]);
}
static ct_status r_min_dim(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_min_dim(in[0], fx_i(c, "dim", 0), fx_i(c, "keepdim", 0), &out[0], &out[1]);
}
static ct_status r_argmax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_argmax(in[0], dim_of(c), fx_i(c, "keepdim", 0));
    return st_of(out[0]);
}
static ct_status r_argmin(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_argmin(in[0], dim_of(c), fx_i(c, "keepdim", 0));
    return st_of(out[0]);
}
static ct_status r_aminmax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_aminmax(in[0], dim_of(c), fx_i(c, "keepdim", 0), &out[0], &out[1]);
}

#define DIMOP(NAME)                                                            \
    static ct_status r_##NAME(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { \
        out[0] = ct_##NAME(in[0], fx_i(c, "dim", 0));                          \
        return st_of(out[0]);                                                  \
    }
DIMOP(softmax) DIMOP(log_softmax) DIMOP(cumsum) DIMOP(cumprod) DIMOP(logcumsumexp)

static ct_status r_cummax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_cummax(in[0], fx_i(c, "dim", 0), &out[0], &out[1]);
}
static ct_status r_cummin(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_cummin(in[0], fx_i(c, "dim", 0), &out[0], &out[1]);
}
static ct_status r_sort(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_sort(in[0], fx_i(c, "dim", -1), fx_i(c, "descending", 0), fx_i(c, "stable", 0),
                   &out[0], &out[1]);
}
static ct_status r_argsort(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_argsort(in[0], fx_i(c, "dim", -1), fx_i(c, "descending", 0), fx_i(c, "stable", 0));
    return st_of(out[0]);
}
static ct_status r_topk(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_topk(in[0], fx_i(c, "k", 1), fx_i(c, "dim", -1), fx_i(c, "largest", 1), true,
                   &out[0], &out[1]);
}
static ct_status r_kthvalue(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_kthvalue(in[0], fx_i(c, "k", 1), fx_i(c, "dim", -1), fx_i(c, "keepdim", 0), &out[0],
                       &out[1]);
}
static ct_status r_median(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_median(in[0]);
    return st_of(out[0]);
}
static ct_status r_nanmedian(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_nanmedian(in[0]);
    return st_of(out[0]);
}
static ct_status r_median_dim(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_median_dim(in[0], fx_i(c, "dim", -1), fx_i(c, "keepdim", 0), &out[0], &out[1]);
}
static ct_status r_mode(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_mode(in[0], fx_i(c, "dim", -1), fx_i(c, "keepdim", 0), &out[0], &out[1]);
}
static ct_status r_unique(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return ct_unique(in[0], fx_i(c, "inverse", 1), fx_i(c, "counts", 1), &out[0], &out[1], &out[2]);
}
static ct_status r_unique_consecutive(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    return ct_unique_consecutive(in[0], &out[0], &out[1], &out[2]);
}

#define E(NAME) {#NAME, r_##NAME, 0, 0}
const fx_op fx_ops_reduce[] = {
    E(sum), E(sum_dtype), E(mean), E(nansum), E(nanmean), E(prod), E(amax), E(amin), E(all),
    E(any), E(count_nonzero), E(logsumexp), E(var), E(std), E(var_mean), E(std_mean),
    E(norm), E(norm_fro), E(max), E(min), E(max_dim), E(min_dim), E(argmax), E(argmin),
    E(aminmax), E(softmax), E(log_softmax), E(cumsum), E(cumprod), E(cummax), E(cummin),
    E(logcumsumexp), E(topk), E(kthvalue), E(median), E(median_dim), E(nanmedian), E(mode),
    E(sort), E(argsort), E(unique), E(unique_consecutive),
};
const int fx_nops_reduce = (int)(sizeof fx_ops_reduce / sizeof fx_ops_reduce[0]);
