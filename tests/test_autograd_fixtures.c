/* test_autograd_fixtures.c -- gradients of composite expressions (an MLP
 * with cross-entropy, a conv layer, softmax cross-entropy and layer norm
 * from primitives) and a Hessian-vector product, against torch.autograd
 * (tests/fixtures/autograd.txt, tools/fixtures/gen_autograd.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fixture.h"

static ct_status need_grad(ct_tensor *const *in, const int *idx, int n) {
    for (int i = 0; i < n; i++)
        if (ct_set_requires_grad(in[idx[i]], true)) return ct_last_error_code();
    return CT_OK;
}

/* loss, then d loss / d in[idx[i]] into out[1..] */
static ct_status grads_of(ct_tensor *loss, ct_tensor *const *in, const int *idx, int n, ct_tensor **out) {
    if (!loss) return ct_last_error_code();
    out[0] = loss;
    ct_tensor *xs[8];
    for (int i = 0; i < n; i++) xs[i] = in[idx[i]];
    return ct_autograd_grad(&loss, 1, xs, n, NULL, false, false, false, out + 1);
}

static ct_status run_mlp(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    static const int idx[4] = {2, 3, 4, 5};
    if (need_grad(in, idx, 4)) return ct_last_error_code();
    ct_tensor *h = ct_relu(ct_add(ct_matmul(in[0], in[2]), in[3]));
    ct_tensor *logits = ct_add(ct_matmul(h, in[4]), in[5]);
    ct_tensor *picked = ct_gather(ct_log_softmax(logits, 1), 1, ct_unsqueeze(in[1], 1));
    ct_tensor *loss = ct_neg(ct_mean(picked, NULL, 0, false));
    return grads_of(loss, in, idx, 4, out);
}

static ct_status run_conv(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    static const int idx[3] = {0, 1, 2};
    if (need_grad(in, idx, 3)) return ct_last_error_code();
    const int64_t pad[2] = {1, 1};
    ct_tensor *y = ct_tanh(ct_conv2d(in[0], in[1], in[2], NULL, pad, NULL, 1));
    ct_tensor *loss = ct_sum(ct_square(y), NULL, 0, false);
    return grads_of(loss, in, idx, 3, out);
}

static ct_status run_softmax_ce(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    static const int idx[1] = {0};
    if (need_grad(in, idx, 1)) return ct_last_error_code();
    ct_tensor *lse = ct_logsumexp(in[0], CT_SHAPE(1), false);
    ct_tensor *picked = ct_squeeze_dim(ct_gather(in[0], 1, ct_unsqueeze(in[1], 1)), 1);
    ct_tensor *loss = ct_mean(ct_sub(lse, picked), NULL, 0, false);
    return grads_of(loss, in, idx, 1, out);
}

static ct_status run_layer_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    static const int idx[3] = {0, 1, 2};
    if (need_grad(in, idx, 3)) return ct_last_error_code();
    ct_tensor *x = in[0];
    ct_tensor *mu = ct_mean(x, CT_SHAPE(1), true);
    ct_tensor *xc = ct_sub(x, mu);
    ct_tensor *var = ct_mean(ct_square(xc), CT_SHAPE(1), true);
    ct_tensor *ln = ct_add(ct_mul(ct_div(xc, ct_sqrt(ct_add_scalar(var, 1e-5))), in[1]), in[2]);
    ct_tensor *loss = ct_sum(ct_mul(ln, in[3]), NULL, 0, false);
    return grads_of(loss, in, idx, 3, out);
}

/* Hessian-vector product by double backward: d/dW <grad f(W), v> */
static ct_status run_hvp(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    ct_tensor *W = in[1];
    if (ct_set_requires_grad(W, true)) return ct_last_error_code();
    ct_tensor *y = ct_matmul(ct_tanh(ct_matmul(in[0], W)), in[2]);
    ct_tensor *f = ct_sum(ct_square(y), NULL, 0, false);
    if (!f) return ct_last_error_code();
    ct_tensor *g;
    ct_status st = ct_autograd_grad(&f, 1, &W, 1, NULL, true, true, false, &g);
    if (st) return st;
    ct_tensor *gv = ct_sum(ct_mul(g, in[3]), NULL, 0, false);
    if (!gv) return ct_last_error_code();
    out[0] = ct_detach(f);
    return ct_autograd_grad(&gv, 1, &W, 1, NULL, false, false, false, &out[1]);
}

static const fx_op k_ops[] = {
    {"mlp", run_mlp, 1e-10, 1e-12},
    {"conv_layer", run_conv, 1e-10, 1e-12},
    {"softmax_ce", run_softmax_ce, 1e-10, 1e-12},
    {"layer_norm", run_layer_norm, 1e-10, 1e-12},
    {"hvp", run_hvp, 1e-10, 1e-12},
};

static void test_composites(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/autograd.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_composites)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
