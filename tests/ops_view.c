/* ops_view.c -- fixture runners for the view family (tests/fixtures/view.txt):
 * views, copies and conversions, factories. */
#include "fixture.h"

#define RET(expr) do { out[0] = (expr); return out[0] ? CT_OK : (ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME); } while (0)
#define R(name) static ct_status r_##name(const fx_case *c, ct_tensor *const *in, ct_tensor **out)
#define DT() fx_dtype(fx_s(c, "dtype", "float32"))
#define INTS(name, arr) int64_t arr[CT_MAX_DIMS]; int n_##arr = fx_ints(c, name, arr, CT_MAX_DIMS); \
    if (n_##arr < 0) n_##arr = 0

static ct_status multi(int n) {
    if (n < 0) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    return n > FX_MAX_T ? CT_ERR_RUNTIME : CT_OK;
}

R(view) { INTS("shape", s); RET(ct_view(in[0], s, n_s)); }
R(reshape) { INTS("shape", s); RET(ct_reshape(in[0], s, n_s)); }
R(permute) { INTS("dims", d); RET(ct_permute(in[0], d, n_d)); }
R(transpose) { RET(ct_transpose(in[0], fx_i(c, "dim0", 0), fx_i(c, "dim1", 1))); }
R(t) { (void)c; RET(ct_t(in[0])); }
R(expand) { INTS("shape", s); RET(ct_expand(in[0], s, n_s)); }
R(broadcast_to) { INTS("shape", s); RET(ct_broadcast_to(in[0], s, n_s)); }
R(squeeze) { (void)c; RET(ct_squeeze(in[0])); }
R(squeeze_dim) { RET(ct_squeeze_dim(in[0], fx_i(c, "dim", 0))); }
R(unsqueeze) { RET(ct_unsqueeze(in[0], fx_i(c, "dim", 0))); }
R(slice) {
    RET(ct_slice(in[0], fx_i(c, "dim", 0), fx_i(c, "start", 0), fx_i(c, "end", INT64_MAX), fx_i(c, "step", 1)));
}
R(select) { RET(ct_select(in[0], fx_i(c, "dim", 0), fx_i(c, "index", 0))); }
R(narrow) { RET(ct_narrow(in[0], fx_i(c, "dim", 0), fx_i(c, "start", 0), fx_i(c, "length", 0))); }
R(diagonal) { RET(ct_diagonal(in[0], fx_i(c, "offset", 0), fx_i(c, "dim1", 0), fx_i(c, "dim2", 1))); }
R(as_strided) {
    INTS("size", sz);
    INTS("stride", st);
    RET(ct_as_strided(in[0], sz, st, n_sz, fx_i(c, "offset", 0)));
}
R(flatten) { RET(ct_flatten(in[0], fx_i(c, "start", 0), fx_i(c, "end", -1))); }
R(unflatten) { INTS("sizes", s); RET(ct_unflatten(in[0], fx_i(c, "dim", 0), s, n_s)); }
R(unfold) { RET(ct_unfold(in[0], fx_i(c, "dim", 0), fx_i(c, "size", 1), fx_i(c, "step", 1))); }
R(movedim) { RET(ct_movedim(in[0], fx_i(c, "source", 0), fx_i(c, "destination", 0))); }
R(chunk) { return multi(ct_chunk(in[0], fx_i(c, "chunks", 1), fx_i(c, "dim", 0), out, FX_MAX_T)); }
R(split) { return multi(ct_split(in[0], fx_i(c, "split_size", 1), fx_i(c, "dim", 0), out, FX_MAX_T)); }
R(split_sizes) {
    INTS("sizes", s);
    return multi(ct_split_sizes(in[0], s, n_s, fx_i(c, "dim", 0), out, FX_MAX_T));
}
R(unbind) { return multi(ct_unbind(in[0], fx_i(c, "dim", 0), out, FX_MAX_T)); }
R(contiguous) {
    (void)c;
    ct_tensor *r = ct_contiguous(in[0]);
    if (r && !ct_is_contiguous(r)) return CT_ERR_RUNTIME;
    RET(r);
}
R(clone) { (void)c; RET(ct_clone(in[0])); }
R(copy_) {
    ct_tensor *d = ct_empty_on(ct_sizes(in[0]), ct_ndim(in[0]), DT(), ct_get_device(in[0]));
    RET(d ? ct_copy_(d, in[0]) : NULL);
}
R(copy_bcast) {
    INTS("shape", s);
    ct_tensor *d = ct_empty_on(s, n_s, DT(), ct_get_device(in[0]));
    RET(d ? ct_copy_(d, in[0]) : NULL);
}
R(to_dtype) { RET(ct_to_dtype(in[0], DT())); }
R(zeros) { (void)in; INTS("shape", s); RET(ct_zeros(s, n_s, DT())); }
R(ones) { (void)in; INTS("shape", s); RET(ct_ones(s, n_s, DT())); }
R(full) { (void)in; INTS("shape", s); RET(ct_full(s, n_s, fx_f(c, "value", 0), DT())); }
R(arange) { (void)in; RET(ct_arange(fx_f(c, "start", 0), fx_f(c, "end", 0), fx_f(c, "step", 1), DT())); }
R(linspace) { (void)in; RET(ct_linspace(fx_f(c, "start", 0), fx_f(c, "end", 0), fx_i(c, "steps", 0), DT())); }
R(logspace) {
    (void)in;
    RET(ct_logspace(fx_f(c, "start", 0), fx_f(c, "end", 0), fx_i(c, "steps", 0), fx_f(c, "base", 10), DT()));
}
R(eye) { (void)in; RET(ct_eye(fx_i(c, "n", 0), fx_i(c, "m", -1), DT())); }
R(zeros_like) { (void)c; RET(ct_zeros_like(in[0])); }
R(ones_like) { (void)c; RET(ct_ones_like(in[0])); }
R(full_like) { RET(ct_full_like(in[0], fx_f(c, "value", 0))); }

#define E(name) {#name, r_##name, 0, 0}
const fx_op fx_ops_view[] = {
    E(view), E(reshape), E(permute), E(transpose), E(t), E(expand), E(broadcast_to), E(squeeze),
    E(squeeze_dim), E(unsqueeze), E(slice), E(select), E(narrow), E(diagonal), E(as_strided),
    E(flatten), E(unflatten), E(unfold), E(movedim), E(chunk), E(split), E(split_sizes), E(unbind),
    E(contiguous), E(clone), E(copy_), E(copy_bcast), E(to_dtype), E(zeros), E(ones), E(full),
    E(arange), E(linspace), E(logspace), E(eye), E(zeros_like), E(ones_like), E(full_like),
};
const int fx_nops_view = (int)(sizeof fx_ops_view / sizeof fx_ops_view[0]);
