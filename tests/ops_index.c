/* ops_index.c -- fixture runners for the index family (tests/fixtures/index.txt). */
#include <string.h>

#include "fixture.h"

#define RET(expr) do { out[0] = (expr); return out[0] ? CT_OK : (ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME); } while (0)
#define R(name) static ct_status r_##name(const fx_case *c, ct_tensor *const *in, ct_tensor **out)
#define CLONE(t) ct_clone(t)

R(cat) { RET(ct_cat(in, c->nin, fx_i(c, "dim", 0))); }
R(stack) { RET(ct_stack(in, c->nin, fx_i(c, "dim", 0))); }
R(hstack) { RET(ct_hstack(in, c->nin)); }
R(vstack) { RET(ct_vstack(in, c->nin)); }
R(index_select) { RET(ct_index_select(in[0], fx_i(c, "dim", 0), in[1])); }
R(gather) { RET(ct_gather(in[0], fx_i(c, "dim", 0), in[1])); }
R(scatter) { RET(ct_scatter(in[0], fx_i(c, "dim", 0), in[1], in[2])); }
R(scatter_value) { RET(ct_scatter_value(in[0], fx_i(c, "dim", 0), in[1], fx_f(c, "value", 0))); }
R(scatter_) { RET(ct_scatter_(CLONE(in[0]), fx_i(c, "dim", 0), in[1], in[2])); }
R(scatter_add) { RET(ct_scatter_add(in[0], fx_i(c, "dim", 0), in[1], in[2])); }
R(scatter_add_) { RET(ct_scatter_add_(CLONE(in[0]), fx_i(c, "dim", 0), in[1], in[2])); }
R(scatter_reduce) {
    RET(ct_scatter_reduce(in[0], fx_i(c, "dim", 0), in[1], in[2], fx_s(c, "reduce", "sum"),
                          fx_i(c, "include_self", 1)));
}
R(index_add) { RET(ct_index_add(in[0], fx_i(c, "dim", 0), in[1], in[2], fx_f(c, "alpha", 1))); }
R(index_add_) { RET(ct_index_add_(CLONE(in[0]), fx_i(c, "dim", 0), in[1], in[2], fx_f(c, "alpha", 1))); }
R(index_copy) { RET(ct_index_copy(in[0], fx_i(c, "dim", 0), in[1], in[2])); }
R(index_fill) { RET(ct_index_fill(in[0], fx_i(c, "dim", 0), in[1], fx_f(c, "value", 0))); }
R(masked_fill) { RET(ct_masked_fill(in[0], in[1], fx_f(c, "value", 0))); }
R(masked_fill_) { RET(ct_masked_fill_(CLONE(in[0]), in[1], fx_f(c, "value", 0))); }
R(masked_select) { RET(ct_masked_select(in[0], in[1])); }
R(masked_scatter) { RET(ct_masked_scatter(in[0], in[1], in[2])); }

/* spec: one char per index slot, 'i' = next tensor input, '_' = full slice */
static int idx_list(const fx_case *c, ct_tensor *const *in, ct_tensor **idx) {
    const char *spec = fx_s(c, "spec", "");
    int n = 0, k = 1;
    for (; spec[n]; n++) idx[n] = spec[n] == 'i' ? in[k++] : NULL;
    return n;
}
R(index) {
    ct_tensor *idx[CT_MAX_DIMS];
    int n = idx_list(c, in, idx);
    RET(ct_index(in[0], idx, n));
}
R(index_put) {
    ct_tensor *idx[CT_MAX_DIMS];
    int n = idx_list(c, in, idx);
    RET(ct_index_put(in[0], idx, n, in[c->nin - 1], fx_i(c, "accumulate", 0)));
}
R(index_put_) {
    ct_tensor *idx[CT_MAX_DIMS];
    int n = idx_list(c, in, idx);
    RET(ct_index_put_(CLONE(in[0]), idx, n, in[c->nin - 1], fx_i(c, "accumulate", 0)));
}
R(take) { RET(ct_take(in[0], in[1])); }
R(take_along_dim) { RET(ct_take_along_dim(in[0], in[1], fx_i(c, "dim", CT_DIM_NONE))); }
R(nonzero) { RET(ct_nonzero(in[0])); }
R(argwhere) { RET(ct_argwhere(in[0])); }
R(tril) { RET(ct_tril(in[0], fx_i(c, "diagonal", 0))); }
R(triu) { RET(ct_triu(in[0], fx_i(c, "diagonal", 0))); }
R(diag) { RET(ct_diag(in[0], fx_i(c, "diagonal", 0))); }
R(diag_embed) { RET(ct_diag_embed(in[0], fx_i(c, "offset", 0), fx_i(c, "dim1", -2), fx_i(c, "dim2", -1))); }
R(flip) {
    int64_t d[CT_MAX_DIMS];
    int n = fx_ints(c, "dims", d, CT_MAX_DIMS);
    RET(ct_flip(in[0], d, n < 0 ? 0 : n));
}
R(fliplr) { RET(ct_fliplr(in[0])); }
R(flipud) { RET(ct_flipud(in[0])); }
R(rot90) {
    int64_t d[2] = {0, 1};
    fx_ints(c, "dims", d, 2);
    RET(ct_rot90(in[0], fx_i(c, "k", 1), d));
}
R(roll) {
    int64_t s[CT_MAX_DIMS], d[CT_MAX_DIMS];
    int ns = fx_ints(c, "shifts", s, CT_MAX_DIMS), nd = fx_ints(c, "dims", d, CT_MAX_DIMS);
    RET(ct_roll(in[0], s, ns, d, nd < 0 ? 0 : nd));
}
R(repeat) {
    int64_t r[CT_MAX_DIMS];
    int n = fx_ints(c, "repeats", r, CT_MAX_DIMS);
    RET(ct_repeat(in[0], r, n));
}
R(tile) {
    int64_t r[CT_MAX_DIMS];
    int n = fx_ints(c, "reps", r, CT_MAX_DIMS);
    RET(ct_tile(in[0], r, n));
}
R(repeat_interleave) { RET(ct_repeat_interleave(in[0], fx_i(c, "repeats", 1), fx_i(c, "dim", CT_DIM_NONE))); }
R(repeat_interleave_tensor) { RET(ct_repeat_interleave_tensor(in[0], in[1], fx_i(c, "dim", CT_DIM_NONE))); }
R(pad) {
    int64_t p[2 * CT_MAX_DIMS];
    int n = fx_ints(c, "pad", p, 2 * CT_MAX_DIMS);
    const char *m = fx_s(c, "mode", "constant");
    ct_pad_mode mode = strcmp(m, "reflect") == 0 ? CT_PAD_REFLECT
                       : strcmp(m, "replicate") == 0 ? CT_PAD_REPLICATE
                       : strcmp(m, "circular") == 0 ? CT_PAD_CIRCULAR : CT_PAD_CONSTANT;
    RET(ct_pad(in[0], p, n, mode, fx_f(c, "value", 0)));
}
R(one_hot) { RET(ct_one_hot(in[0], fx_i(c, "num_classes", -1))); }
R(bucketize) { RET(ct_bucketize(in[0], in[1], fx_i(c, "right", 0))); }
R(searchsorted) { RET(ct_searchsorted(in[0], in[1], fx_i(c, "right", 0))); }
R(bincount) { RET(ct_bincount(in[0], c->nin > 1 ? in[1] : NULL, fx_i(c, "minlength", 0))); }
R(histc) { RET(ct_histc(in[0], fx_i(c, "bins", 100), fx_f(c, "min", 0), fx_f(c, "max", 0))); }
R(meshgrid_ij) {
    ct_tensor *r = ct_meshgrid_ij(in, c->nin, out);
    return r ? CT_OK : ct_last_error_code();
}

#define E(name) {#name, r_##name, 0, 0}
const fx_op fx_ops_index[] = {
    E(cat), E(stack), E(hstack), E(vstack), E(index_select), E(gather), E(scatter),
    E(scatter_value), E(scatter_), E(scatter_add), E(scatter_add_), E(scatter_reduce),
    E(index_add), E(index_add_), E(index_copy), E(index_fill), E(masked_fill), E(masked_fill_),
    E(masked_select), E(masked_scatter), E(index), E(index_put), E(index_put_), E(take),
    E(take_along_dim), E(nonzero), E(argwhere), E(tril), E(triu), E(diag), E(diag_embed),
    E(flip), E(fliplr), E(flipud), E(rot90), E(roll), E(repeat), E(tile), E(repeat_interleave),
    E(repeat_interleave_tensor), E(pad), E(one_hot), E(bucketize), E(searchsorted), E(bincount),
    {"histc", r_histc, 1e-6, 1e-6}, E(meshgrid_ij),
};
const int fx_nops_index = (int)(sizeof fx_ops_index / sizeof fx_ops_index[0]);
