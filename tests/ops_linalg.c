/* ops_linalg.c -- fixture runners for the linalg family (tests/fixtures/linalg.txt). */
#include "fixture.h"

#define RET1(expr)                                              \
    do {                                                        \
        out[0] = (expr);                                        \
        return out[0] ? CT_OK : ct_last_error_code();           \
    } while (0)

static ct_status r_matmul(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_matmul(in[0], in[1]));
}
static ct_status r_mm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_mm(in[0], in[1]));
}
static ct_status r_bmm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_bmm(in[0], in[1]));
}
static ct_status r_mv(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_mv(in[0], in[1]));
}
static ct_status r_dot(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_dot(in[0], in[1]));
}
static ct_status r_vdot(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_vdot(in[0], in[1]));
}
static ct_status r_outer(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_outer(in[0], in[1]));
}
static ct_status r_addmm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_addmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)));
}
static ct_status r_addmv(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_addmv(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)));
}
static ct_status r_addr(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_addr(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)));
}
static ct_status r_baddbmm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_baddbmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)));
}
static ct_status r_addbmm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_addbmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)));
}
static ct_status r_linear(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_linear(in[0], in[1], fx_i(c, "bias", 0) ? in[2] : NULL));
}
static ct_status r_bilinear(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_bilinear(in[0], in[1], in[2], fx_i(c, "bias", 0) ? in[3] : NULL));
}
static ct_status r_einsum(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_einsum(fx_s(c, "eq", ""), in, c->nin));
}
static ct_status r_tensordot(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t da[CT_MAX_DIMS], db[CT_MAX_DIMS];
    int na = fx_ints(c, "dims_a", da, CT_MAX_DIMS), nb = fx_ints(c, "dims_b", db, CT_MAX_DIMS);
    if (na < 0) na = 0;
    if (nb < 0) nb = 0;
    if (na != nb) return CT_ERR_ARG;
    RET1(ct_tensordot(in[0], in[1], da, db, na));
}
static ct_status r_kron(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_kron(in[0], in[1]));
}
static ct_status r_trace(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    RET1(ct_trace(in[0]));
}
static ct_status r_cross(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_cross(in[0], in[1], fx_i(c, "dim", -1)));
}
static ct_status r_cdist(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET1(ct_cdist(in[0], in[1], fx_f(c, "p", 2)));
}

const fx_op fx_ops_linalg[] = {
    {"matmul", r_matmul, 0, 0},     {"mm", r_mm, 0, 0},
    {"bmm", r_bmm, 0, 0},           {"mv", r_mv, 0, 0},
    {"dot", r_dot, 0, 0},           {"vdot", r_vdot, 0, 0},
    {"outer", r_outer, 0, 0},       {"addmm", r_addmm, 0, 0},
    {"addmv", r_addmv, 0, 0},       {"addr", r_addr, 0, 0},
    {"baddbmm", r_baddbmm, 0, 0},   {"addbmm", r_addbmm, 0, 0},
    {"linear", r_linear, 0, 0},     {"bilinear", r_bilinear, 0, 0},
    {"einsum", r_einsum, 0, 0},     {"tensordot", r_tensordot, 0, 0},
    {"kron", r_kron, 0, 0},         {"trace", r_trace, 0, 0},
    {"cross", r_cross, 0, 0},       {"cdist", r_cdist, 0, 0},
};
const int fx_nops_linalg = (int)(sizeof fx_ops_linalg / sizeof fx_ops_linalg[0]);
