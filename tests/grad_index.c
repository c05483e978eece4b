/* grad_index.c -- gradcheck cases for the copying, indexing and shape ops
 * (and the in-place random fills, whose overwritten value gets no gradient). */
#include "gradcheck_harness.h"

#define U (void)n; (void)u
/* an int64 constant tensor */
#define IDX(shape_nd, ...) ct_from_array((const int64_t[]){__VA_ARGS__}, shape_nd, CT_I64)
#define MASK(shape_nd, ...) ct_from_array((const uint8_t[]){__VA_ARGS__}, shape_nd, CT_BOOL)

/* ---- index_select / gather ---- */
static ct_tensor *f_index_select(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_index_select(in[0], 1, IDX(CT_SHAPE(3), 2, 0, 2)); /* duplicates accumulate */
}
static ct_tensor *f_index_select0(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_index_select(in[0], -3, IDX(CT_SHAPE(4), 1, 1, 0, 1));
}
static ct_tensor *f_gather(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_gather(in[0], 1, IDX(CT_SHAPE(3, 2), 0, 3, 1, 1, 2, 0));
}
static ct_tensor *f_gather0(ct_tensor *const *in, int n, void *u) {
    U; /* index smaller than x in the other dim */
    return ct_gather(in[0], 0, IDX(CT_SHAPE(2, 3), 2, 0, 1, 2, 2, 0));
}
static ct_tensor *f_take_along(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_take_along_dim(in[0], IDX(CT_SHAPE(3, 1), 1, 3, 0), 1);
}

/* ---- scatter family ---- */
static ct_tensor *uniq_index(void) { return IDX(CT_SHAPE(2, 3), 0, 2, 3, 1, 0, 2); }
static ct_tensor *dup_index(void) { return IDX(CT_SHAPE(2, 3), 0, 2, 0, 1, 1, 3); }
static ct_tensor *f_scatter(ct_tensor *const *in, int n, void *u) {
    U; /* src [2,4] is larger than index [2,3] */
    return ct_scatter(in[0], 1, uniq_index(), in[1]);
}
static ct_tensor *f_scatter_value(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_scatter_value(in[0], 1, uniq_index(), 2.5);
}
static ct_tensor *f_scatter_add(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_scatter_add(in[0], 1, dup_index(), in[1]);
}
typedef struct { const char *reduce; bool incl; } red_t;
static ct_tensor *f_scatter_reduce(ct_tensor *const *in, int n, void *u) {
    (void)n;
    const red_t *r = u;
    return ct_scatter_reduce(in[0], 1, dup_index(), in[1], r->reduce, r->incl);
}
#define RED(name, red, incl)                                                        \
    static ct_tensor *name(ct_tensor *const *in, int n, void *u) {                  \
        (void)u;                                                                    \
        red_t r = {red, incl};                                                      \
        return f_scatter_reduce(in, n, &r);                                         \
    }
RED(f_sr_sum, "sum", true)
RED(f_sr_sum_ex, "sum", false)
RED(f_sr_prod, "prod", true)
RED(f_sr_prod_ex, "prod", false)
RED(f_sr_mean, "mean", true)
RED(f_sr_mean_ex, "mean", false)
RED(f_sr_amax, "amax", true)
RED(f_sr_amax_ex, "amax", false)
RED(f_sr_amin, "amin", true)
RED(f_sr_amin_ex, "amin", false)
static ct_tensor *f_sr_prod_zero(ct_tensor *const *in, int n, void *u) {
    U; /* one src value zero in a group: the others' exclusive products still flow */
    ct_tensor *m = MASK(CT_SHAPE(2, 3), 0, 0, 0, 0, 1, 0);
    return ct_scatter_reduce(in[0], 1, dup_index(), ct_masked_fill(in[1], m, 0.0), "prod", true);
}

/* ---- index_add / index_copy / index_fill ---- */
static ct_tensor *f_index_add(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_index_add(in[0], 0, IDX(CT_SHAPE(3), 2, 0, 2), in[1], 2.0);
}
static ct_tensor *f_index_copy(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_index_copy(in[0], 0, IDX(CT_SHAPE(2), 3, 1), in[1]);
}
static ct_tensor *f_index_fill(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_index_fill(in[0], 1, IDX(CT_SHAPE(2), 0, -1), 1.5);
}

/* ---- masked ---- */
static ct_tensor *f_masked_fill(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_masked_fill(in[0], MASK(CT_SHAPE(4), 1, 0, 0, 1), -2.0);
}
static ct_tensor *f_masked_fill_bcast(ct_tensor *const *in, int n, void *u) {
    U; /* x [4] broadcasts against mask [3,4] */
    return ct_masked_fill(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0), 3.0);
}
/* masked_fill with a 0-dim tensor value in[1]: a where() on the value */
static ct_tensor *f_masked_fill_tensor(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_masked_fill_tensor(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1), in[1]);
}
static ct_tensor *f_masked_fill_tensor_bcast(ct_tensor *const *in, int n, void *u) {
    U; /* x [4] broadcasts against mask [3,4] */
    return ct_masked_fill_tensor(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 0, 1, 0, 1, 1, 1, 1), in[1]);
}
static ct_tensor *f_masked_select(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_masked_select(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1));
}
static ct_tensor *f_masked_select_bcast(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_masked_select(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1));
}
static ct_tensor *f_masked_scatter(ct_tensor *const *in, int n, void *u) {
    U; /* 5 masked positions, source has 7 elements */
    return ct_masked_scatter(in[0], MASK(CT_SHAPE(3, 4), 1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 1), in[1]);
}
static ct_tensor *f_masked_scatter_bcast(ct_tensor *const *in, int n, void *u) {
    U; /* x [4], mask [2,4]: 4 masked positions, source [2,2] */
    return ct_masked_scatter(in[0], MASK(CT_SHAPE(2, 4), 0, 1, 0, 1, 1, 0, 0, 1), in[1]);
}

/* ---- advanced indexing ---- */
static ct_tensor *f_index1(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *ix[1] = {IDX(CT_SHAPE(3), 2, 0, -1)}; /* duplicates (2 and -1) */
    return ct_index(in[0], ix, 1);
}
static ct_tensor *f_index2(ct_tensor *const *in, int n, void *u) {
    U; /* broadcast index tensors [2,1] x [3] */
    ct_tensor *ix[2] = {IDX(CT_SHAPE(2, 1), 0, 2), IDX(CT_SHAPE(3), 3, 1, 3)};
    return ct_index(in[0], ix, 2);
}
static ct_tensor *f_index_slice(ct_tensor *const *in, int n, void *u) {
    U; /* x[:, idx] */
    ct_tensor *ix[2] = {NULL, IDX(CT_SHAPE(2, 2), 1, 0, 1, 3)};
    return ct_index(in[0], ix, 2);
}
static ct_tensor *f_index_nonadj(ct_tensor *const *in, int n, void *u) {
    U; /* x[idx, :, idx] on [3,2,4] */
    ct_tensor *ix[3] = {IDX(CT_SHAPE(2), 1, 1), NULL, IDX(CT_SHAPE(2), 0, 3)};
    return ct_index(in[0], ix, 3);
}
static ct_tensor *f_index_bool(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *ix[1] = {MASK(CT_SHAPE(3), 1, 0, 1)};
    return ct_index(in[0], ix, 1);
}
static ct_tensor *f_take(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_take(in[0], IDX(CT_SHAPE(2, 2), 0, 5, -1, 5));
}
static ct_tensor *f_index_put(ct_tensor *const *in, int n, void *u) {
    U; /* x[[0,2], [1,3]] = v (v broadcast from [1]) */
    ct_tensor *ix[2] = {IDX(CT_SHAPE(2), 0, 2), IDX(CT_SHAPE(2), 1, 3)};
    return ct_index_put(in[0], ix, 2, in[1], false);
}
static ct_tensor *f_index_put_acc(ct_tensor *const *in, int n, void *u) {
    U; /* x[[2,0,2]] += v, v [3,4]; duplicates accumulate */
    ct_tensor *ix[1] = {IDX(CT_SHAPE(3), 2, 0, 2)};
    return ct_index_put(in[0], ix, 1, in[1], true);
}
static ct_tensor *f_index_put_slice(ct_tensor *const *in, int n, void *u) {
    U; /* x[:, bool] = v, v [4] broadcast to [3,2]? no: [3, 2] from mask of 2 */
    ct_tensor *ix[2] = {NULL, MASK(CT_SHAPE(4), 0, 1, 0, 1)};
    return ct_index_put(in[0], ix, 2, in[1], false);
}

/* ---- in-place forms on non-leaves: y = x * 1; op_(y, ...); y * x ---- */
static ct_tensor *f_scatter_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_scatter_(y, 1, uniq_index(), in[1])) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_scatter_add_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_scatter_add_(y, 1, dup_index(), in[1])) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_index_add_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_index_add_(y, 0, IDX(CT_SHAPE(3), 2, 0, 2), in[1], -0.5)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_masked_fill_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_masked_fill_(y, MASK(CT_SHAPE(4), 0, 1, 1, 0), 0.0)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_masked_fill_view_inpl(ct_tensor *const *in, int n, void *u) {
    U; /* in place on a view of a non-leaf: the base gets CopySlices */
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_masked_fill_(ct_select(y, 0, 1), MASK(CT_SHAPE(4), 0, 1, 1, 0), 0.0)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_index_put_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    ct_tensor *ix[2] = {IDX(CT_SHAPE(3), 2, 0, 1), IDX(CT_SHAPE(3), 1, 3, 3)};
    if (!ct_index_put_(y, ix, 2, in[1], false)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_index_put_acc_inpl(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    ct_tensor *ix[2] = {IDX(CT_SHAPE(3), 2, 0, 2), IDX(CT_SHAPE(3), 1, 3, 1)};
    if (!ct_index_put_(y, ix, 2, in[1], true)) return NULL;
    return ct_mul(y, in[0]);
}

/* ---- shape ops ---- */
static ct_tensor *f_tril(ct_tensor *const *in, int n, void *u) { U; return ct_tril(in[0], -1); }
static ct_tensor *f_triu(ct_tensor *const *in, int n, void *u) { U; return ct_triu(in[0], 1); }
static ct_tensor *f_tril_batch(ct_tensor *const *in, int n, void *u) { U; return ct_tril(in[0], 0); }
static ct_tensor *f_flip(ct_tensor *const *in, int n, void *u) { U; return ct_flip(in[0], CT_SHAPE(0, -1)); }
static ct_tensor *f_fliplr(ct_tensor *const *in, int n, void *u) { U; return ct_fliplr(in[0]); }
static ct_tensor *f_roll(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_roll(in[0], (const int64_t[]){1, -3}, 2, (const int64_t[]){0, 1}, 2);
}
static ct_tensor *f_roll_flat(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_roll(in[0], (const int64_t[]){5}, 1, NULL, 0);
}
static ct_tensor *f_rot90(ct_tensor *const *in, int n, void *u) { U; return ct_rot90(in[0], 1, NULL); }
static ct_tensor *f_repeat(ct_tensor *const *in, int n, void *u) { U; return ct_repeat(in[0], CT_SHAPE(2, 1, 3)); }
static ct_tensor *f_tile(ct_tensor *const *in, int n, void *u) { U; return ct_tile(in[0], CT_SHAPE(2)); }
static ct_tensor *f_rep_inter(ct_tensor *const *in, int n, void *u) { U; return ct_repeat_interleave(in[0], 2, 1); }
static ct_tensor *f_rep_inter_t(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_repeat_interleave_tensor(in[0], IDX(CT_SHAPE(3), 2, 0, 1), 0);
}
static ct_tensor *f_pad_const(ct_tensor *const *in, int n, void *u) {
    U; /* last dim +1/+2, second-to-last cropped by 1 at the front */
    return ct_pad(in[0], (const int64_t[]){1, 2, -1, 1}, 4, CT_PAD_CONSTANT, 0.5);
}
static ct_tensor *f_pad_reflect(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_pad(in[0], (const int64_t[]){2, 1}, 2, CT_PAD_REFLECT, 0);
}
static ct_tensor *f_pad_replicate(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_pad(in[0], (const int64_t[]){1, 2, 2, 0}, 4, CT_PAD_REPLICATE, 0);
}
static ct_tensor *f_pad_circular(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_pad(in[0], (const int64_t[]){2, 3}, 2, CT_PAD_CIRCULAR, 0);
}
static ct_tensor *f_diag_vec(ct_tensor *const *in, int n, void *u) { U; return ct_diag(in[0], 1); }
static ct_tensor *f_diag_mat(ct_tensor *const *in, int n, void *u) { U; return ct_diag(in[0], -1); }
static ct_tensor *f_diag_embed(ct_tensor *const *in, int n, void *u) { U; return ct_diag_embed(in[0], 0, -2, -1); }
static ct_tensor *f_stack(ct_tensor *const *in, int n, void *u) { U; return ct_stack(in, 2, 1); }
static ct_tensor *f_hstack(ct_tensor *const *in, int n, void *u) { U; return ct_hstack(in, 2); }
static ct_tensor *f_vstack(ct_tensor *const *in, int n, void *u) { U; return ct_vstack(in, 2); }
static ct_tensor *f_cat(ct_tensor *const *in, int n, void *u) { U; return ct_cat(in, 2, 0); }
static ct_tensor *f_meshgrid(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *o[2];
    if (!ct_meshgrid_ij(in, 2, o)) return NULL;
    return ct_mul(o[0], o[1]);
}

/* ---- random fills: the overwritten value gets no gradient ---- */
static ct_tensor *f_uniform_(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_uniform_(y, 2.0, 2.0)) return NULL; /* degenerate range: deterministic */
    return ct_mul(y, in[0]);
}
static ct_tensor *f_normal_(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_normal_(y, 3.0, 0.0)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_exponential_(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_exponential_(y, 1.0)) return NULL;
    return ct_add(ct_mul(in[0], in[0]), ct_mul_scalar(y, 0.0)); /* random values times 0 */
}
static ct_tensor *f_random_(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_random_(y, 5, 6)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_bernoulli_(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *y = ct_mul_scalar(in[0], 1.0);
    if (!ct_bernoulli_(y, 1.0)) return NULL;
    return ct_mul(y, in[0]);
}
static ct_tensor *f_bernoulli(ct_tensor *const *in, int n, void *u) {
    U; /* p = x*0 + 1 requires grad: all ones, no gradient to p */
    ct_tensor *b = ct_bernoulli(ct_add_scalar(ct_mul_scalar(in[0], 0.0), 1.0));
    return ct_mul(b, in[0]);
}

#define GG GC_GRADGRAD
#define D GC_DISTINCT
const gc_case gc_cases_index[] = {
    {"cat", "cat", f_cat, 2, {2, 2}, {{1, 3}, {2, 3}}, 0, 0, GG, 0, 0},
    {"cat", "stack", f_stack, 2, {2, 2}, {{2, 3}, {2, 3}}, 0, 0, GG, 0, 0},
    {"cat", "hstack", f_hstack, 2, {1, 1}, {{3}, {2}}, 0, 0, GG, 0, 0},
    {"cat", "vstack", f_vstack, 2, {1, 2}, {{3}, {2, 3}}, 0, 0, GG, 0, 0},
    {"index_select", "index_select_dup", f_index_select, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"index_select", "index_select_dim0", f_index_select0, 1, {3}, {{2, 2, 3}}, 0, 0, GG, 0, 0},
    {"index_select", "repeat_interleave", f_rep_inter, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"index_select", "repeat_interleave_tensor", f_rep_inter_t, 1, {2}, {{3, 2}}, 0, 0, GG, 0, 0},
    {"index_select", "pad_reflect", f_pad_reflect, 1, {3}, {{1, 2, 4}}, 0, 0, GG, 0, 0},
    {"index_select", "pad_replicate", f_pad_replicate, 1, {3}, {{1, 2, 3}}, 0, 0, GG, 0, 0},
    {"index_select", "pad_circular", f_pad_circular, 1, {2}, {{2, 4}}, 0, 0, GG, 0, 0},
    {"gather", "gather", f_gather, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"gather", "gather_small_index", f_gather0, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"gather", "take_along_dim", f_take_along, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"scatter", "scatter_src", f_scatter, 2, {2, 2}, {{3, 4}, {2, 4}}, 0, 0, GG, 0, 0},
    {"scatter", "scatter_value", f_scatter_value, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"scatter", "scatter_inplace", f_scatter_inpl, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_add", "scatter_add", f_scatter_add, 2, {2, 2}, {{3, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_add", "scatter_add_inplace", f_scatter_add_inpl, 2, {2, 2}, {{2, 4}, {2, 4}}, 0, 0, GG, 0, 0},
    {"scatter_reduce", "sr_sum", f_sr_sum, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_reduce", "sr_sum_exclude_self", f_sr_sum_ex, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_reduce", "sr_prod", f_sr_prod, 2, {2, 2}, {{2, 4}, {2, 3}}, 0.5, 1.5, GG, 0, 0},
    {"scatter_reduce", "sr_prod_exclude_self", f_sr_prod_ex, 2, {2, 2}, {{2, 4}, {2, 4}}, 0.5, 1.5, GG, 0, 0},
    {"scatter_reduce", "sr_prod_src_zero", f_sr_prod_zero, 2, {2, 2}, {{2, 4}, {2, 3}}, 0.5, 1.5, 0, 0, 0},
    {"scatter_reduce", "sr_mean", f_sr_mean, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_reduce", "sr_mean_exclude_self", f_sr_mean_ex, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG, 0, 0},
    {"scatter_reduce", "sr_amax", f_sr_amax, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG | D, 0, 0},
    {"scatter_reduce", "sr_amax_exclude_self", f_sr_amax_ex, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG | D, 0, 0},
    {"scatter_reduce", "sr_amin", f_sr_amin, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG | D, 0, 0},
    {"scatter_reduce", "sr_amin_exclude_self", f_sr_amin_ex, 2, {2, 2}, {{2, 4}, {2, 3}}, 0, 0, GG | D, 0, 0},
    {"index_add", "index_add", f_index_add, 2, {2, 2}, {{3, 4}, {3, 4}}, 0, 0, GG, 0, 0},
    {"index_add", "index_add_inplace", f_index_add_inpl, 2, {2, 2}, {{3, 2}, {3, 2}}, 0, 0, GG, 0, 0},
    {"index_copy", "index_copy", f_index_copy, 2, {2, 2}, {{4, 3}, {2, 3}}, 0, 0, GG, 0, 0},
    {"index_fill", "index_fill", f_index_fill, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"masked_fill", "masked_fill", f_masked_fill, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"masked_fill", "masked_fill_bcast_self", f_masked_fill_bcast, 1, {1}, {{4}}, 0, 0, GG, 0, 0},
    {"where", "masked_fill_tensor", f_masked_fill_tensor, 2, {2, 0}, {{3, 4}, {0}}, 0, 0, GG, 0, 0},
    {"where", "masked_fill_tensor_bcast", f_masked_fill_tensor_bcast, 2, {1, 0}, {{4}, {0}}, 0, 0, GG, 0, 0},
    {"masked_fill", "masked_fill_inplace", f_masked_fill_inpl, 1, {2}, {{2, 4}}, 0, 0, GG, 0, 0},
    {"masked_fill", "masked_fill_view_inplace", f_masked_fill_view_inpl, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"masked_select", "masked_select", f_masked_select, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"masked_select", "masked_select_bcast", f_masked_select_bcast, 1, {1}, {{4}}, 0, 0, GG, 0, 0},
    {"masked_scatter", "masked_scatter", f_masked_scatter, 2, {2, 1}, {{3, 4}, {7}}, 0, 0, GG, 0, 0},
    {"masked_scatter", "masked_scatter_bcast", f_masked_scatter_bcast, 2, {1, 2}, {{4}, {2, 2}}, 0, 0, GG, 0, 0},
    {"index", "index_dup", f_index1, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"index", "index_bcast", f_index2, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"index", "index_slice", f_index_slice, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"index", "index_nonadjacent", f_index_nonadj, 1, {3}, {{3, 2, 4}}, 0, 0, GG, 0, 0},
    {"index", "index_bool", f_index_bool, 1, {2}, {{3, 2}}, 0, 0, GG, 0, 0},
    {"index", "take", f_take, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"index_put", "index_put", f_index_put, 2, {2, 1}, {{3, 4}, {1}}, 0, 0, GG, 0, 0},
    {"index_put", "index_put_accumulate", f_index_put_acc, 2, {2, 2}, {{3, 4}, {3, 4}}, 0, 0, GG, 0, 0},
    {"index_put", "index_put_slice_bool", f_index_put_slice, 2, {2, 2}, {{3, 4}, {3, 2}}, 0, 0, GG, 0, 0},
    {"index_put", "index_put_inplace", f_index_put_inpl, 2, {2, 1}, {{3, 4}, {3}}, 0, 0, GG, 0, 0},
    {"index_put", "index_put_acc_inplace", f_index_put_acc_inpl, 2, {2, 1}, {{3, 4}, {3}}, 0, 0, GG, 0, 0},
    {"tril", "tril", f_tril, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"tril", "tril_batch", f_tril_batch, 1, {3}, {{2, 3, 3}}, 0, 0, GG, 0, 0},
    {"triu", "triu", f_triu, 1, {2}, {{4, 3}}, 0, 0, GG, 0, 0},
    {"flip", "flip", f_flip, 1, {3}, {{2, 3, 2}}, 0, 0, GG, 0, 0},
    {"flip", "fliplr", f_fliplr, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"flip", "rot90", f_rot90, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"roll", "roll", f_roll, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"roll", "roll_flat", f_roll_flat, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"repeat", "repeat", f_repeat, 1, {2}, {{2, 2}}, 0, 0, GG, 0, 0},
    {"repeat", "tile", f_tile, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"pad", "pad_constant", f_pad_const, 1, {2}, {{3, 3}}, 0, 0, GG, 0, 0},
    {"copy", "diag_vector", f_diag_vec, 1, {1}, {{3}}, 0, 0, GG, 0, 0},
    {"copy", "diag_matrix", f_diag_mat, 1, {2}, {{3, 4}}, 0, 0, GG, 0, 0},
    {"copy", "diag_embed", f_diag_embed, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"expand", "meshgrid", f_meshgrid, 2, {1, 1}, {{3}, {2}}, 0, 0, GG, 0, 0},
    {"uniform", "uniform_", f_uniform_, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"normal", "normal_", f_normal_, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"exponential", "exponential_", f_exponential_, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"randint", "random_", f_random_, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"bernoulli", "bernoulli_", f_bernoulli_, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
    {"bernoulli", "bernoulli", f_bernoulli, 1, {2}, {{2, 3}}, 0, 0, GG, 0, 0},
};
const int gc_ncases_index = sizeof gc_cases_index / sizeof gc_cases_index[0];
