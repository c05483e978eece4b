/* ops_random.c -- fixture runners for the random family (tests/fixtures/random.txt):
 * the deterministic corners of the random ops (dtypes, shapes, degenerate
 * distributions, dropout in eval mode / p in {0, 1}). */
#include "fixture.h"

static ct_status st_of(ct_tensor *t) {
    return t ? CT_OK : (ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME);
}

#define SHAPE_DT                                                    \
    int64_t shape[CT_MAX_DIMS];                                     \
    int nd = fx_ints(c, "shape", shape, CT_MAX_DIMS);               \
    if (nd < 0) nd = 0;                                             \
    ct_dtype dt = fx_dtype(fx_s(c, "dtype", "float32"));

static ct_status r_rand(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    SHAPE_DT
    out[0] = ct_rand(shape, nd, dt);
    return st_of(out[0]);
}
static ct_status r_randn(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    SHAPE_DT
    out[0] = ct_randn(shape, nd, dt);
    return st_of(out[0]);
}
static ct_status r_rand_like(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_rand_like(in[0]);
    return st_of(out[0]);
}
static ct_status r_randn_like(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_randn_like(in[0]);
    return st_of(out[0]);
}
static ct_status r_randint(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    SHAPE_DT
    out[0] = ct_randint(fx_i(c, "low", 0), fx_i(c, "high", 1), shape, nd, dt);
    return st_of(out[0]);
}
static ct_status r_randperm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_randperm(fx_i(c, "n", 0), fx_dtype(fx_s(c, "dtype", "int64")));
    return st_of(out[0]);
}
static ct_status r_uniform_(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_uniform_(in[0], fx_f(c, "lo", 0), fx_f(c, "hi", 1));
    return st_of(out[0]);
}
static ct_status r_normal_(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_normal_(in[0], fx_f(c, "mean", 0), fx_f(c, "std", 1));
    return st_of(out[0]);
}
static ct_status r_bernoulli_(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_bernoulli_(in[0], fx_f(c, "p", 0.5));
    return st_of(out[0]);
}
static ct_status r_random_(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_random_(in[0], fx_i(c, "lo", 0), fx_i(c, "hi", 1));
    return st_of(out[0]);
}
static ct_status r_dropout(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_dropout(in[0], fx_f(c, "p", 0.5), fx_i(c, "training", 1) != 0);
    return st_of(out[0]);
}
static ct_status r_bernoulli(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_bernoulli(in[0]);
    return st_of(out[0]);
}
static ct_status r_multinomial(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_multinomial(in[0], fx_i(c, "n", 1), fx_i(c, "replacement", 0) != 0);
    return st_of(out[0]);
}

const fx_op fx_ops_random[] = {
    {"rand", r_rand, 0, 0},
    {"randn", r_randn, 0, 0},
    {"rand_like", r_rand_like, 0, 0},
    {"randn_like", r_randn_like, 0, 0},
    {"randint", r_randint, 0, 0},
    {"randperm", r_randperm, 0, 0},
    {"uniform_", r_uniform_, 0, 0},
    {"normal_", r_normal_, 0, 0},
    {"bernoulli_", r_bernoulli_, 0, 0},
    {"random_", r_random_, 0, 0},
    {"dropout", r_dropout, 0, 0},
    {"bernoulli", r_bernoulli, 0, 0},
    {"multinomial", r_multinomial, 0, 0},
};
const int fx_nops_random = (int)(sizeof fx_ops_random / sizeof fx_ops_random[0]);
