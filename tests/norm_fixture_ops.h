/* norm_fixture_ops.h -- the runners of tests/fixtures/norm_fused.txt's
 * layer_norm / rms_norm / softmax / log_softmax cases through the public
 * ops and ct_backward (outputs, then the inputs' gradients), shared by
 * test_fused and test_red_perf.  Include after fixture.h and ctorch.h. */
#ifndef CT_TEST_NORM_FIXTURE_OPS_H
#define CT_TEST_NORM_FIXTURE_OPS_H

static inline ct_tensor *leaf(ct_tensor *t) {
    ct_tensor *c = ct_clone(t);
    if (c && ct_set_requires_grad(c, true)) return NULL;
    return c;
}

static inline ct_status run_ln(const fx_case *c, ct_tensor *const *in, ct_tensor **out, int rms) {
    int n = (int)fx_i(c, "n", 1);
    ct_tensor *x = leaf(in[0]), *w = leaf(in[1]), *b = rms ? NULL : leaf(in[2]);
    ct_tensor *g = in[rms ? 2 : 3];
    if (!x || !w || (!rms && !b)) return CT_ERR_RUNTIME;
    const int64_t *ns = ct_sizes(x) + ct_ndim(x) - n;
    ct_tensor *y = rms ? ct_rms_norm(x, ns, n, w, fx_f(c, "eps", 1e-6))
                       : ct_layer_norm(x, ns, n, w, b, fx_f(c, "eps", 1e-5));
    if (!y) return ct_last_error_code();
    ct_status st = ct_backward(y, g, false, false);
    if (st) return st;
    out[0] = y;
    out[1] = ct_grad(x);
    out[2] = ct_grad(w);
    if (!rms) out[3] = ct_grad(b);
    return CT_OK;
}
static inline ct_status run_layer_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_ln(c, in, out, 0);
}
static inline ct_status run_rms_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_ln(c, in, out, 1);
}
static inline ct_status run_sm(const fx_case *c, ct_tensor *const *in, ct_tensor **out, int lg) {
    ct_tensor *x = leaf(in[0]);
    if (!x) return ct_last_error_code();
    int64_t d = fx_i(c, "dim", -1);
    ct_tensor *y = lg ? ct_log_softmax(x, d) : ct_softmax(x, d);
    if (!y) return ct_last_error_code();
    ct_status st = ct_backward(y, in[1], false, false);
    if (st) return st;
    out[0] = y;
    out[1] = ct_grad(x);
    return CT_OK;
}
static inline ct_status run_softmax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_sm(c, in, out, 0);
}
static inline ct_status run_log_softmax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_sm(c, in, out, 1);
}

#endif
