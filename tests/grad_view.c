/* grad_view.c -- gradcheck cases for copies, fills and views. */
#include "gradcheck_harness.h"

static ct_tensor *f_clone(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_clone(in[0]); }
static ct_tensor *f_copy_into(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    ct_tensor *z = ct_zeros(CT_SHAPE(3, 4), CT_F64);
    return ct_mul(ct_copy_(z, in[0]), in[0]); /* in[0] broadcasts from [4] */
}
static ct_tensor *f_fill(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    ct_tensor *y = ct_mul_scalar(in[0], 3.0);
    ct_tensor *v = ct_slice(y, 0, 1, 3, 1);
    if (!ct_fill_(v, 2.0)) return NULL; /* y[1:3] = 2: no gradient there */
    return ct_mul(y, in[0]);
}
static ct_tensor *f_view(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_view(ct_clone(in[0]), CT_SHAPE(4, 3)); }
static ct_tensor *f_reshape(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_reshape(in[0], CT_SHAPE(2, -1)); }
static ct_tensor *f_permute(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_permute(in[0], CT_SHAPE(2, 0, 1)); }
static ct_tensor *f_expand(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_mul(ct_expand(in[0], CT_SHAPE(2, 3, 4)), in[0]); }
static ct_tensor *f_squeeze(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_squeeze(in[0]); }
static ct_tensor *f_unsqueeze(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_unsqueeze(in[0], -1); }
static ct_tensor *f_slice(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_slice(in[0], 1, 1, 5, 2); }
static ct_tensor *f_select(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_select(in[0], 0, -1); }
static ct_tensor *f_diagonal(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_diagonal(in[0], 1, 0, 1); }
static ct_tensor *f_as_strided(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    ct_tensor *c = ct_clone(in[0]); /* contiguous [3,4]: take a [2,2] window with strides (4, 2) */
    return ct_as_strided(c, (const int64_t[]){2, 2}, (const int64_t[]){4, 2}, 2, 1);
}
static ct_tensor *f_unfold(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_unfold(in[0], 1, 3, 2); }
static ct_tensor *f_chunk_cat(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    ct_tensor *p[3];
    if (ct_chunk(in[0], 3, 1, p, 3) != 3) return NULL;
    ct_tensor *q[3] = {p[2], p[0], p[1]};
    return ct_cat(q, 3, 1);
}

#define S1(a) 1, {a}
const gc_case gc_cases_view[] = {
    {"copy", "clone", f_clone, 1, {2}, {{3, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"copy", "copy_into_broadcast", f_copy_into, 1, {1}, {{4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"fill", "fill_slice", f_fill, 1, {1}, {{4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"view", "view", f_view, 1, {2}, {{3, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"view", "reshape", f_reshape, 1, {3}, {{2, 2, 3}}, 0, 0, 0, 0, 0},
    {"permute", "permute", f_permute, 1, {3}, {{2, 3, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"expand", "expand", f_expand, 1, {2}, {{3, 1}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"squeeze", "squeeze", f_squeeze, 1, {3}, {{3, 1, 2}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"unsqueeze", "unsqueeze", f_unsqueeze, 1, {2}, {{3, 2}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"slice", "slice_step", f_slice, 1, {2}, {{3, 6}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"select", "select", f_select, 1, {2}, {{3, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"diagonal", "diagonal_offset", f_diagonal, 1, {2}, {{4, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"as_strided", "as_strided", f_as_strided, 1, {2}, {{3, 4}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"unfold", "unfold_overlap", f_unfold, 1, {2}, {{2, 7}}, 0, 0, GC_GRADGRAD, 0, 0},
    {"cat", "chunk_cat", f_chunk_cat, 1, {2}, {{2, 6}}, 0, 0, GC_GRADGRAD, 0, 0},
};
const int gc_ncases_view = sizeof gc_cases_view / sizeof gc_cases_view[0];
