/* test_conv_dnnl.c -- f32 convolutions with the oneDNN path forced on
 * (CT_DNNL=1; src/backend/cpu/conv_dnnl.c) against torch: forward values and
 * the gradients of every input (oneDNN's forward, backward-data and
 * backward-weights primitives) on contiguous and non-contiguous inputs
 * (tests/fixtures/conv_dnnl.txt, tools/fixtures/gen_conv_dnnl.py); the cached primitives reused across shapes
 * and steps; results identical run to run.  Built without oneDNN, the same
 * cases check ctorch's own kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "fixture.h"
#include "backend/cpu/conv_dnnl.h"

/* conv_grad: params nd, stride/padding/dilation lists (or padding word),
 * groups, bias; inputs x, w, [b], gy; outputs y, dx, dw, [db] */
static ct_status run_conv_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int nd = (int)fx_i(c, "nd", 2);
    int64_t st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
    fx_ints(c, "stride", st, 3);
    fx_ints(c, "dilation", dl, 3);
    bool bias = fx_i(c, "bias", 0) != 0;
    int64_t groups = fx_i(c, "groups", 1);
    ct_tensor *x = fx_leaf(in[0]), *w = fx_leaf(in[1]), *b = bias ? fx_leaf(in[2]) : NULL;
    ct_tensor *y;
    const char *pm = fx_s(c, "padding", "");
    if (strcmp(pm, "same") == 0 || strcmp(pm, "valid") == 0) {
        y = ct_conv_padmode(x, w, b, nd, st, pm, dl, groups);
    } else {
        fx_ints(c, "padding", pd, 3);
        y = nd == 1 ? ct_conv1d(x, w, b, st, pd, dl, groups)
          : nd == 2 ? ct_conv2d(x, w, b, st, pd, dl, groups)
                    : ct_conv3d(x, w, b, st, pd, dl, groups);
    }
    return fx_vjp(y, in[bias ? 3 : 2], (ct_tensor *[]){x, w, b}, 3, out);
}

static ct_status run_convt_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t s = fx_i(c, "stride", 1), p = fx_i(c, "padding", 0), op = fx_i(c, "output_padding", 0),
            d = fx_i(c, "dilation", 1);
    int64_t st[2] = {s, s}, pd[2] = {p, p}, opd[2] = {op, op}, dl[2] = {d, d};
    ct_tensor *x = fx_leaf(in[0]), *w = fx_leaf(in[1]), *b = fx_leaf(in[2]);
    ct_tensor *y = ct_conv_transpose2d(x, w, b, st, pd, opd, fx_i(c, "groups", 1), dl);
    return fx_vjp(y, in[3], (ct_tensor *[]){x, w, b}, 3, out);
}

static void test_fixtures(void **state) {
    (void)state;
    const fx_op ops[] = {
        {"conv_grad", run_conv_grad, 1e-4, 1e-4},
        {"conv_transpose_grad", run_convt_grad, 1e-4, 1e-4},
    };
    assert_int_equal(fx_run_file(CT_FIXTURE_DIR "/conv_dnnl.txt", ops, 2), 0);
}

/* many geometries in a row (more than the primitive cache holds, so entries
 * are evicted and rebuilt), each checked against the f64 result (ctorch's
 * own kernels: f64 never goes to oneDNN) */
static void test_cache_churn(void **state) {
    (void)state;
    ct_manual_seed(7);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < 80; i++) {
            ct_scope s = ct_scope_begin();
            int64_t C = 1 + i % 9, Co = 2 + i % 5, H = 5 + i % 7, k = 1 + i % 3;
            int64_t st[2] = {1 + i % 2, 1}, pd[2] = {i % 2, (i / 2) % 2};
            ct_tensor *x = ct_randn(CT_SHAPE(2, C, H, H + 1), CT_F64);
            ct_tensor *w = ct_randn(CT_SHAPE(Co, C, k, k), CT_F64);
            ct_tensor *b = ct_randn(CT_SHAPE(Co), CT_F64);
            ct_tensor *ref = ct_conv2d(x, w, b, st, pd, NULL, 1);
            ct_tensor *y = ct_conv2d(ct_to_dtype(x, CT_F32), ct_to_dtype(w, CT_F32),
                                     ct_to_dtype(b, CT_F32), st, pd, NULL, 1);
            assert_non_null(ref);
            assert_non_null(y);
            assert_true(ct_allclose(ct_to_dtype(y, CT_F64), ref, 1e-4, 1e-4, false));
            ct_scope_end(s);
        }
}

static void test_run_to_run(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_manual_seed(9);
    ct_tensor *x0 = ct_randn(CT_SHAPE(4, 16, 12, 12), CT_F32);
    ct_tensor *w0 = ct_randn(CT_SHAPE(32, 16, 3, 3), CT_F32);
    ct_tensor *r[2][3];
    const int64_t p1[2] = {1, 1};
    for (int k = 0; k < 2; k++) {
        ct_tensor *x = fx_leaf(x0), *w = fx_leaf(w0);
        ct_tensor *y = ct_conv2d(x, w, NULL, NULL, p1, NULL, 1);
        assert_int_equal(ct_backward(ct_sum(ct_square(y), NULL, 0, false), NULL, false, false), CT_OK);
        r[k][0] = y;
        r[k][1] = ct_grad(x);
        r[k][2] = ct_grad(w);
    }
    for (int i = 0; i < 3; i++) assert_true(ct_allclose(r[0][i], r[1][i], 0, 0, true));
    ct_scope_end(s);
}

/* conv2d of f32 x and w checked against the same conv in f64 */
static ct_tensor *conv_checked(ct_tensor *x, ct_tensor *w) {
    const int64_t p1[2] = {1, 1};
    ct_tensor *y = ct_conv2d(x, w, NULL, NULL, p1, NULL, 1);
    bool prev = ct_set_inference_mode(false);
    ct_tensor *ref = ct_conv2d(ct_to_dtype(ct_detach(x), CT_F64), ct_to_dtype(ct_detach(w), CT_F64),
                               NULL, NULL, p1, NULL, 1);
    ct_set_inference_mode(prev);
    assert_non_null(y);
    assert_non_null(ref);
    assert_true(ct_allclose(ct_to_dtype(y, CT_F64), ref, 1e-4, 1e-4, false));
    return y;
}

/* The reordered weights kept across evaluation-time forwards (conv_dnnl.c):
 * reused while the weights are unchanged, never after an in-place op, a
 * write through ct_data_ptr, or for another tensor (a view at another
 * offset, new weights where freed ones were); training weights (requiring
 * grad, grad mode on) never kept. */
static void test_weight_cache(void **state) {
    (void)state;
    long long h0 = ct__dnnl_wcache_hits();
    if (h0 < 0) skip(); /* built without oneDNN */
    ct_scope s = ct_scope_begin();
    ct_manual_seed(11);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 8, 10, 10), CT_F32);
    ct_tensor *wall = ct_randn(CT_SHAPE(32, 8, 3, 3), CT_F32);
    ct_tensor *w = ct_narrow(wall, 0, 0, 16), *w2 = ct_narrow(wall, 0, 16, 16);
    /* no grad on w: kept from the first call, reused by the second */
    ct_tensor *y1 = conv_checked(x, w);
    ct_tensor *y2 = conv_checked(x, w);
    assert_true(ct_allclose(y1, y2, 0, 0, false));
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 1);
    /* the same storage at another offset is other weights */
    ct_tensor *z = conv_checked(x, w2);
    assert_false(ct_allclose(z, y1, 1e-3, 1e-3, false));
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 1);
    /* an in-place op on the weights (through the base tensor) */
    assert_non_null(ct_mul_scalar_(wall, 2.0));
    ct_tensor *y3 = conv_checked(x, w);
    assert_true(ct_allclose(y3, ct_mul_scalar(y1, 2.0), 1e-5, 1e-4, false));
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 1);
    conv_checked(x, w);
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 2);
    /* a write through ct_data_ptr */
    float *p = ct_data_ptr(w);
    for (int i = 0; i < 16 * 8 * 9; i++) p[i] = -p[i];
    ct_tensor *y4 = conv_checked(x, w);
    assert_true(ct_allclose(y4, ct_neg(y3), 0, 0, false));
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 2);
    /* weights that require grad: kept only in inference mode */
    ct_tensor *wg = ct_clone(w);
    assert_int_equal(ct_set_requires_grad(wg, true), CT_OK);
    conv_checked(x, wg);
    conv_checked(x, wg);
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 2);
    bool prev = ct_set_inference_mode(true);
    conv_checked(x, wg);
    conv_checked(x, wg);
    ct_set_inference_mode(prev);
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 3);
    ct_scope_end(s);
    /* new weights, likely where the freed ones were: never the old copy */
    for (int round = 0; round < 3; round++) {
        ct_scope s2 = ct_scope_begin();
        ct_tensor *xr = ct_randn(CT_SHAPE(2, 8, 10, 10), CT_F32);
        ct_tensor *wr = ct_randn(CT_SHAPE(16, 8, 3, 3), CT_F32);
        conv_checked(xr, wr);
        conv_checked(xr, wr);
        ct_scope_end(s2);
    }
    assert_int_equal(ct__dnnl_wcache_hits(), h0 + 6);
}

/* shapes whose planes hold whole 32 x 32 tiles and partial ones (channels
 * and positions past multiples of 32): the NCHW <-> NHWC transposes that
 * replace oneDNN's reorders where it picks channels-last (AVX-512) */
static void test_plane_tiles(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_manual_seed(13);
    const int64_t shapes[3][4] = {{2, 40, 13, 11}, {1, 64, 8, 8}, {3, 33, 6, 17}};
    for (int i = 0; i < 3; i++) {
        const int64_t *q = shapes[i];
        ct_tensor *x = ct_randn(CT_SHAPE(q[0], q[1], q[2], q[3]), CT_F32);
        ct_tensor *w = ct_randn(CT_SHAPE(48 + 8 * i, q[1], 3, 3), CT_F32);
        conv_checked(x, w);
    }
    ct_scope_end(s);
}

int main(void) {
    setenv("CT_DNNL", "1", 1); /* before the first conv: the path is read once */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_cache_churn),
        cmocka_unit_test(test_run_to_run),
        cmocka_unit_test(test_weight_cache),
        cmocka_unit_test(test_plane_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
