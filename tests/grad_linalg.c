/* grad_linalg.c -- gradcheck cases for the linalg family. */
#include <math.h>

#include "gradcheck_harness.h"

#define U (void)n; (void)u
static ct_tensor *f_mm(ct_tensor *const *in, int n, void *u) { U; return ct_mm(in[0], in[1]); }
static ct_tensor *f_bmm(ct_tensor *const *in, int n, void *u) { U; return ct_bmm(in[0], in[1]); }
static ct_tensor *f_matmul(ct_tensor *const *in, int n, void *u) { U; return ct_matmul(in[0], in[1]); }
static ct_tensor *f_mv(ct_tensor *const *in, int n, void *u) { U; return ct_mv(in[0], in[1]); }
static ct_tensor *f_dot(ct_tensor *const *in, int n, void *u) { U; return ct_dot(in[0], in[1]); }
static ct_tensor *f_vdot(ct_tensor *const *in, int n, void *u) { U; return ct_vdot(in[0], in[1]); }
static ct_tensor *f_outer(ct_tensor *const *in, int n, void *u) { U; return ct_outer(in[0], in[1]); }
static ct_tensor *f_addmm(ct_tensor *const *in, int n, void *u) { U; return ct_addmm(in[0], in[1], in[2], 0.5, 2.0); }
static ct_tensor *f_addmm_b0(ct_tensor *const *in, int n, void *u) { U; return ct_addmm(in[0], in[1], in[2], 0.0, -1.5); }
static ct_tensor *f_addmv(ct_tensor *const *in, int n, void *u) { U; return ct_addmv(in[0], in[1], in[2], -0.5, 1.5); }
static ct_tensor *f_addr(ct_tensor *const *in, int n, void *u) { U; return ct_addr(in[0], in[1], in[2], 2.0, 0.5); }
static ct_tensor *f_baddbmm(ct_tensor *const *in, int n, void *u) { U; return ct_baddbmm(in[0], in[1], in[2], 0.5, -2.0); }
static ct_tensor *f_addbmm(ct_tensor *const *in, int n, void *u) { U; return ct_addbmm(in[0], in[1], in[2], 1.5, 0.5); }
static ct_tensor *f_linear(ct_tensor *const *in, int n, void *u) { U; return ct_linear(in[0], in[1], in[2]); }
static ct_tensor *f_linear_nb(ct_tensor *const *in, int n, void *u) { U; return ct_linear(in[0], in[1], NULL); }
static ct_tensor *f_bilinear(ct_tensor *const *in, int n, void *u) { U; return ct_bilinear(in[0], in[1], in[2], in[3]); }
static ct_tensor *f_bilinear_nb(ct_tensor *const *in, int n, void *u) { U; return ct_bilinear(in[0], in[1], in[2], NULL); }
static ct_tensor *f_einsum(ct_tensor *const *in, int n, void *u) { return ct_einsum((const char *)u, in, n); }
static ct_tensor *f_tensordot(ct_tensor *const *in, int n, void *u) {
    U; /* [2,3,4] . [4,3,2] over a's (1, 2) with b's (1, 0) */
    return ct_tensordot(in[0], in[1], (const int64_t[]){1, -1}, (const int64_t[]){1, 0}, 2);
}
static ct_tensor *f_tensordot_mm(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_tensordot(in[0], in[1], (const int64_t[]){0}, (const int64_t[]){1}, 1);
}
static ct_tensor *f_tensordot_outer(ct_tensor *const *in, int n, void *u) { U; return ct_tensordot(in[0], in[1], NULL, NULL, 0); }
static ct_tensor *f_kron(ct_tensor *const *in, int n, void *u) { U; return ct_kron(in[0], in[1]); }
static ct_tensor *f_trace(ct_tensor *const *in, int n, void *u) { U; return ct_trace(in[0]); }
static ct_tensor *f_cross1(ct_tensor *const *in, int n, void *u) { U; return ct_cross(in[0], in[1], 1); }
static ct_tensor *f_cross_last(ct_tensor *const *in, int n, void *u) { U; return ct_cross(in[0], in[1], -1); }
static ct_tensor *f_cross0(ct_tensor *const *in, int n, void *u) { U; return ct_cross(in[0], in[1], 0); }
static ct_tensor *f_cdist2(ct_tensor *const *in, int n, void *u) { U; return ct_cdist(in[0], in[1], 2.0); }
static ct_tensor *f_cdist1(ct_tensor *const *in, int n, void *u) { U; return ct_cdist(in[0], in[1], 1.0); }
static ct_tensor *f_cdist_inf(ct_tensor *const *in, int n, void *u) { U; return ct_cdist(in[0], in[1], INFINITY); }
static ct_tensor *f_cdist3(ct_tensor *const *in, int n, void *u) { U; return ct_cdist(in[0], in[1], 3.0); }
static ct_tensor *f_cdist_half(ct_tensor *const *in, int n, void *u) { U; return ct_cdist(in[0], in[1], 0.5); }
static ct_tensor *f_cdist0(ct_tensor *const *in, int n, void *u) {
    U; /* p = 0 counts nonzero diffs: no gradient; added to a product so the check sees something */
    return ct_add(ct_cdist(in[0], in[1], 0.0), ct_cdist(in[0], in[1], 2.0));
}

static ct_tensor *f_multi_dot(ct_tensor *const *in, int n, void *u) { (void)u; return ct_linalg_multi_dot(in, n); }

/* gc_case has no user pointer: one wrapper per einsum equation */
#define EIN(name, eq) \
    static ct_tensor *f_ein_##name(ct_tensor *const *in, int n, void *u) { (void)u; return f_einsum(in, n, (void *)(eq)); }
EIN(mm, "ij,jk->ik")
EIN(bmm, "bij,bjk->bik")
EIN(diag, "ii->i")
EIN(sum_all, "ij->")
EIN(dot_implicit, "i,i")
EIN(transpose_implicit, "ba")
EIN(ell_bcast, "...ij,...jk->...ik")
EIN(diag_contract, "iij,jk->ik")
EIN(three, "ij,jk,kl->il")
EIN(only_here, "ij,k->i")
EIN(outer4, "ij,kl->ljki")
EIN(bcast_dim, "ij,ij->ij")
EIN(trace_mix, "ii,ij->j")

#define GG GC_GRADGRAD
const gc_case gc_cases_linalg[] = {
    {"mm", "mm", f_mm, 2, {2, 2}, {{3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"bmm", "bmm", f_bmm, 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_1d_1d", f_matmul, 2, {1, 1}, {{4}, {4}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_1d_2d", f_matmul, 2, {1, 2}, {{3}, {3, 4}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_2d_1d", f_matmul, 2, {2, 1}, {{3, 4}, {4}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_2d_2d", f_matmul, 2, {2, 2}, {{3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_3d_2d_fold", f_matmul, 2, {3, 2}, {{2, 3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_3d_1d", f_matmul, 2, {3, 1}, {{2, 3, 4}, {4}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_1d_3d", f_matmul, 2, {1, 3}, {{3}, {2, 3, 2}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_2d_3d", f_matmul, 2, {2, 3}, {{2, 3}, {2, 3, 2}}, 0, 0, GG, 0, 0},
    {"matmul", "matmul_bcast_batch", f_matmul, 2, {4, 3}, {{2, 1, 2, 3}, {3, 3, 2}}, 0, 0, GG, 0, 0},
    {"mv", "mv", f_mv, 2, {2, 1}, {{3, 4}, {4}}, 0, 0, GG, 0, 0},
    {"dot", "dot", f_dot, 2, {1, 1}, {{5}, {5}}, 0, 0, GG, 0, 0},
    {"vdot", "vdot", f_vdot, 2, {1, 1}, {{5}, {5}}, 0, 0, GG, 0, 0},
    {"outer", "outer", f_outer, 2, {1, 1}, {{3}, {4}}, 0, 0, GG, 0, 0},
    {"addmm", "addmm", f_addmm, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"addmm", "addmm_bcast_input", f_addmm, 3, {1, 2, 2}, {{2}, {3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"addmm", "addmm_beta0", f_addmm_b0, 3, {2, 2, 2}, {{3, 2}, {3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"addmv", "addmv", f_addmv, 3, {1, 2, 1}, {{3}, {3, 4}, {4}}, 0, 0, GG, 0, 0},
    {"addmv", "addmv_bcast_input", f_addmv, 3, {1, 2, 1}, {{1}, {3, 4}, {4}}, 0, 0, GG, 0, 0},
    {"addr", "addr", f_addr, 3, {2, 1, 1}, {{3, 4}, {3}, {4}}, 0, 0, GG, 0, 0},
    {"addr", "addr_bcast_input", f_addr, 3, {1, 1, 1}, {{4}, {3}, {4}}, 0, 0, GG, 0, 0},
    {"baddbmm", "baddbmm", f_baddbmm, 3, {3, 3, 3}, {{2, 3, 2}, {2, 3, 4}, {2, 4, 2}}, 0, 0, GG, 0, 0},
    {"baddbmm", "baddbmm_bcast_input", f_baddbmm, 3, {2, 3, 3}, {{3, 1}, {2, 3, 4}, {2, 4, 2}}, 0, 0, GG, 0, 0},
    {"addbmm", "addbmm", f_addbmm, 3, {2, 3, 3}, {{3, 2}, {2, 3, 4}, {2, 4, 2}}, 0, 0, GG, 0, 0},
    {"linear", "linear", f_linear, 3, {3, 2, 1}, {{2, 3, 4}, {5, 4}, {5}}, 0, 0, GG, 0, 0},
    {"linear", "linear_1d_no_bias", f_linear_nb, 2, {1, 2}, {{4}, {3, 4}}, 0, 0, GG, 0, 0},
    {"bilinear", "bilinear", f_bilinear, 4, {2, 2, 3, 1}, {{2, 3}, {2, 4}, {2, 3, 4}, {2}}, 0, 0, GG, 0, 0},
    {"bilinear", "bilinear_1d_no_bias", f_bilinear_nb, 3, {1, 1, 3}, {{3}, {2}, {2, 3, 2}}, 0, 0, GG, 0, 0},
    /* linalg_multi_dot: a chain of mm (and 1-D ends as row/column vectors) */
    {"mm", "multi_dot_two", f_multi_dot, 2, {2, 2}, {{3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"mm", "multi_dot_three_1d_first", f_multi_dot, 3, {1, 2, 2}, {{3}, {3, 5}, {5, 2}}, 0, 0, GG, 0, 0},
    {"mm", "multi_dot_three_1d_last", f_multi_dot, 3, {2, 2, 1}, {{4, 2}, {2, 5}, {5}}, 0, 0, GG, 0, 0},
    {"mm", "multi_dot_four_1d_ends", f_multi_dot, 4, {1, 2, 2, 1}, {{3}, {3, 2}, {2, 4}, {4}}, 0, 0, GG, 0, 0},
    {"mm", "multi_dot_four", f_multi_dot, 4, {2, 2, 2, 2}, {{5, 2}, {2, 4}, {4, 1}, {1, 3}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_mm", f_ein_mm, 2, {2, 2}, {{3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_bmm", f_ein_bmm, 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_diag", f_ein_diag, 1, {2}, {{4, 4}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_sum_all", f_ein_sum_all, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_dot_implicit", f_ein_dot_implicit, 2, {1, 1}, {{5}, {5}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_transpose_implicit", f_ein_transpose_implicit, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_ellipsis_bcast", f_ein_ell_bcast, 2, {3, 4}, {{2, 2, 3}, {2, 1, 3, 2}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_diag_contract", f_ein_diag_contract, 2, {3, 2}, {{2, 2, 3}, {3, 4}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_three", f_ein_three, 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_only_here", f_ein_only_here, 2, {2, 1}, {{3, 4}, {5}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_outer_perm", f_ein_outer4, 2, {2, 2}, {{2, 3}, {2, 2}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_size1_bcast", f_ein_bcast_dim, 2, {2, 2}, {{3, 1}, {1, 4}}, 0, 0, GG, 0, 0},
    {"einsum", "einsum_trace_mix", f_ein_trace_mix, 2, {2, 2}, {{3, 3}, {3, 2}}, 0, 0, GG, 0, 0},
    {"tensordot", "tensordot_2dims", f_tensordot, 2, {3, 3}, {{2, 3, 4}, {4, 3, 2}}, 0, 0, GG, 0, 0},
    {"tensordot", "tensordot_transposed", f_tensordot_mm, 2, {2, 2}, {{4, 3}, {2, 4}}, 0, 0, GG, 0, 0},
    {"tensordot", "tensordot_outer", f_tensordot_outer, 2, {2, 1}, {{2, 3}, {3}}, 0, 0, GG, 0, 0},
    {"kron", "kron", f_kron, 2, {2, 2}, {{2, 3}, {2, 2}}, 0, 0, GG, 0, 0},
    {"kron", "kron_ndim_mismatch", f_kron, 2, {1, 2}, {{3}, {2, 2}}, 0, 0, GG, 0, 0},
    {"trace", "trace_nonsquare", f_trace, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"cross", "cross_dim1", f_cross1, 2, {2, 2}, {{4, 3}, {4, 3}}, 0, 0, GG, 0, 0},
    {"cross", "cross_bcast", f_cross_last, 2, {2, 2}, {{1, 3}, {4, 3}}, 0, 0, GG, 0, 0},
    {"cross", "cross_dim0", f_cross0, 2, {2, 2}, {{3, 2}, {3, 2}}, 0, 0, GG, 0, 0},
    {"cdist", "cdist_p2", f_cdist2, 2, {2, 2}, {{3, 2}, {4, 2}}, 0, 0, GG, 0, 0},
    {"cdist", "cdist_p2_bcast_batch", f_cdist2, 2, {3, 3}, {{2, 3, 2}, {1, 4, 2}}, 0, 0, GG, 0, 0},
    {"cdist", "cdist_p1", f_cdist1, 2, {2, 2}, {{3, 2}, {4, 2}}, 0, 0, 0, 0, 0},
    {"cdist", "cdist_pinf", f_cdist_inf, 2, {2, 2}, {{3, 3}, {4, 3}}, 0, 0, 0, 0, 0},
    {"cdist", "cdist_p3", f_cdist3, 2, {2, 2}, {{3, 2}, {4, 2}}, 0, 0, GG, 0, 0},
    {"cdist", "cdist_p_half", f_cdist_half, 2, {2, 2}, {{3, 2}, {4, 2}}, 0, 0, 0, 0, 0},
    {"cdist", "cdist_p0", f_cdist0, 2, {2, 2}, {{3, 2}, {4, 2}}, 0, 0, 0, 0, 0},
};
const int gc_ncases_linalg = sizeof gc_cases_linalg / sizeof gc_cases_linalg[0];
