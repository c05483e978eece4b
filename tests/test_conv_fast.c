/* test_conv_fast.c -- the fast conv/pool/batch-norm kernels against torch
 * (tests/fixtures/conv_fast.txt, tools/fixtures/gen_conv_fast.py): forward
 * values and the gradients of every input (direct 1x1 GEMMs, per-sample and
 * blocked weight gradients, max-pool gradient kernel, fused batch norm), on
 * contiguous and non-contiguous inputs; double backward through the fused
 * batch norm (gradgradcheck); results identical run to run and, under
 * ct_use_deterministic_algorithms, across thread counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "fixture.h"

static ct_status run_conv2d_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t s = fx_i(c, "stride", 1), p = fx_i(c, "padding", 0), d = fx_i(c, "dilation", 1);
    int64_t st[2] = {s, s}, pd[2] = {p, p}, dl[2] = {d, d};
    bool bias = fx_i(c, "bias", 0) != 0;
    ct_tensor *x = fx_leaf(in[0]), *w = fx_leaf(in[1]), *b = bias ? fx_leaf(in[2]) : NULL;
    ct_tensor *y = ct_conv2d(x, w, b, st, pd, dl, fx_i(c, "groups", 1));
    return fx_vjp(y, in[bias ? 3 : 2], (ct_tensor *[]){x, w, b}, 3, out);
}

static ct_status run_convt2d_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t s = fx_i(c, "stride", 1), p = fx_i(c, "padding", 0), op = fx_i(c, "output_padding", 0);
    int64_t st[2] = {s, s}, pd[2] = {p, p}, opd[2] = {op, op};
    ct_tensor *x = fx_leaf(in[0]), *w = fx_leaf(in[1]), *b = fx_leaf(in[2]);
    ct_tensor *y = ct_conv_transpose2d(x, w, b, st, pd, opd, 1, NULL);
    return fx_vjp(y, in[3], (ct_tensor *[]){x, w, b}, 3, out);
}

static ct_status run_max_pool2d_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t k = fx_i(c, "k", 2), s = fx_i(c, "stride", 2), p = fx_i(c, "padding", 0);
    int64_t kk[2] = {k, k}, st[2] = {s, s}, pd[2] = {p, p};
    ct_tensor *x = fx_leaf(in[0]), *idx = NULL;
    ct_tensor *y = ct_max_pool2d(x, kk, st, pd, NULL, false, &idx);
    if (fx_backward(y, in[1])) return ct_last_error_code();
    out[0] = y;
    out[1] = idx;
    out[2] = ct_grad(x);
    return CT_OK;
}

static ct_status run_bn_train(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    bool affine = fx_i(c, "affine", 1) != 0;
    ct_tensor *x = fx_leaf(in[0]), *w = affine ? fx_leaf(in[1]) : NULL, *b = affine ? fx_leaf(in[2]) : NULL;
    int k = affine ? 3 : 1;
    ct_tensor *rm = ct_clone(in[k + 1]), *rv = ct_clone(in[k + 2]);
    ct_tensor *y = ct_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    if (fx_backward(y, in[k])) return ct_last_error_code();
    int o = 0;
    out[o++] = y;
    out[o++] = ct_grad(x);
    if (affine) {
        out[o++] = ct_grad(w);
        out[o++] = ct_grad(b);
    }
    out[o++] = rm;
    out[o++] = rv;
    return CT_OK;
}

static ct_status run_bn_eval(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    bool affine = fx_i(c, "affine", 1) != 0;
    int k = affine ? 3 : 1;
    out[0] = ct_batch_norm(in[0], in[k], in[k + 1], affine ? in[1] : NULL, affine ? in[2] : NULL,
                           false, 0.1, 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}

static const fx_op k_ops[] = {
    {"conv2d_grad", run_conv2d_grad, 1e-4, 1e-4},
    {"conv_transpose2d_grad", run_convt2d_grad, 1e-4, 1e-4},
    {"max_pool2d_grad", run_max_pool2d_grad, 0, 0},
    {"batch_norm_train", run_bn_train, 1e-4, 1e-4},
    {"batch_norm_eval", run_bn_eval, 1e-5, 1e-5},
};

static void test_fixtures(void **state) {
    (void)state;
    int f = fx_run_file(CT_FIXTURE_DIR "/conv_fast.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
}

/* double backward through the fused batch norm (create_graph takes the
 * composite gradient, with the statistics recomputed from x) */
static ct_tensor *bn_fn(ct_tensor *const *in, int n, void *user) {
    (void)n; (void)user;
    return ct_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
}

static void test_bn_gradgrad(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *in[3] = {ct_randn(CT_SHAPE(3, 2, 3, 2), CT_F64), ct_randn(CT_SHAPE(2), CT_F64),
                        ct_randn(CT_SHAPE(2), CT_F64)};
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad(in[i], true), CT_OK);
    assert_int_equal(ct_gradcheck(bn_fn, NULL, in, 3, 0, 0, 0), CT_OK);
    ct_status st = ct_gradgradcheck(bn_fn, NULL, in, 3, 0, 0, 0);
    if (st) print_error("%s\n", ct_last_error());
    assert_int_equal(st, CT_OK);
    ct_scope_end(s);
}

/* conv + batch norm + relu + max pool forward/backward: returns y, dx, dw */
static void conv_step(ct_tensor *x0, ct_tensor *w0, ct_tensor **r) {
    const int64_t p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_tensor *x = fx_leaf(x0), *w = fx_leaf(w0);
    ct_tensor *y = ct_max_pool2d(ct_relu(ct_batch_norm(ct_conv2d(x, w, NULL, NULL, p1, NULL, 1), NULL,
                                                       NULL, NULL, NULL, true, 0.1, 1e-5)),
                                 k2, NULL, NULL, NULL, false, NULL);
    assert_non_null(y);
    assert_int_equal(ct_backward(ct_sum(ct_square(y), NULL, 0, false), NULL, false, false), CT_OK);
    r[0] = y;
    r[1] = ct_grad(x);
    r[2] = ct_grad(w);
}

static void assert_same(ct_tensor *a, ct_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_true(ct_allclose(a, b, 0, 0, true));
}

static void test_determinism(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_manual_seed(5);
    ct_tensor *x = ct_randn(CT_SHAPE(6, 8, 12, 12), CT_F32), *w = ct_randn(CT_SHAPE(16, 8, 3, 3), CT_F32);
    int nt = ct_get_num_threads();
    ct_tensor *a[3], *b[3], *c[3];
    ct_set_num_threads(2);
    conv_step(x, w, a);
    conv_step(x, w, b);
    for (int i = 0; i < 3; i++) assert_same(a[i], b[i]); /* run to run */
    ct_use_deterministic_algorithms(true);
    conv_step(x, w, b);
    ct_set_num_threads(1);
    conv_step(x, w, c);
    ct_use_deterministic_algorithms(false);
    ct_set_num_threads(nt);
    for (int i = 0; i < 3; i++) assert_same(b[i], c[i]); /* across thread counts */
    ct_scope_end(s);
}

/* many groups (the CPU's conv_wgrad_groups, a group per thread): the
 * weight gradient is bit-for-bit the same on 1, 2 and 3 threads without
 * the deterministic switch, and equals the groups' own gradients, each
 * a conv of its channels alone */
static void grouped_wgrad(ct_tensor *x0, ct_tensor *w0, int64_t groups, ct_tensor **dw) {
    const int64_t p1[2] = {1, 1};
    ct_tensor *x = fx_leaf(x0), *w = fx_leaf(w0);
    ct_tensor *y = ct_conv2d(x, w, NULL, NULL, p1, NULL, groups);
    assert_non_null(y);
    assert_int_equal(ct_backward(ct_sum(ct_square(y), NULL, 0, false), NULL, false, false), CT_OK);
    *dw = ct_grad(w);
}

static void test_grouped_wgrad(void **state) {
    (void)state;
    /* 12 groups of 4 -> 8 channels (36 column rows by 8 channels), and of
     * 1 -> 32 channels (9 rows by 32: the transposed product) */
    const int64_t cin[2] = {4, 1}, cout[2] = {8, 32};
    for (int v = 0; v < 2; v++) {
        ct_scope s = ct_scope_begin();
        ct_manual_seed(11);
        ct_tensor *x = ct_randn(CT_SHAPE(2, 12 * cin[v], 9, 7), CT_F32);
        ct_tensor *w = ct_randn(CT_SHAPE(12 * cout[v], cin[v], 3, 3), CT_F32);
        int nt = ct_get_num_threads();
        ct_tensor *dw[3];
        for (int t = 1; t <= 3; t++) {
            ct_set_num_threads(t);
            grouped_wgrad(x, w, 12, &dw[t - 1]);
        }
        ct_set_num_threads(nt);
        assert_same(dw[0], dw[1]);
        assert_same(dw[0], dw[2]);
        for (int64_t g = 0; g < 12; g++) {
            ct_tensor *dg;
            grouped_wgrad(ct_narrow(x, 1, g * cin[v], cin[v]), ct_narrow(w, 0, g * cout[v], cout[v]), 1, &dg);
            assert_true(ct_allclose(ct_narrow(dw[0], 0, g * cout[v], cout[v]), dg, 1e-5, 1e-4, false));
        }
        ct_scope_end(s);
    }
}

/* the 2x2/2 f32 pool's vector rows (on AVX2 CPUs 8 or 4 outputs at a
 * time, a row's last vector overlapping the one before) against the window
 * rule itself: taps in window order, a greater value or a NaN replaces the
 * max, its flat index kept; NaN, +-inf and ties placed on every lane and
 * tap; widths giving 13 (8 + an overlapping 8), 8, 7 (4 + 4), 4 and 2
 * (scalar) outputs a row, odd ones leaving a column out of every window */
static void test_max_pool_2x2_rows(void **state) {
    (void)state;
    const int64_t widths[] = {27, 16, 14, 9, 5};
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
        ct_scope s = ct_scope_begin();
        ct_manual_seed(12);
        const int64_t P = 6, H = 10, W = widths[wi], Ho = H / 2, Wo = W / 2;
        ct_tensor *x = ct_contiguous(ct_randn(CT_SHAPE(2, 3, H, W), CT_F32));
        float *xv = ct_data_ptr(x);
        for (int64_t i = 0; i < P * H * W; i += 7)
            xv[i] = (i / 7) % 3 == 0 ? NAN : (i / 7) % 3 == 1 ? INFINITY : -INFINITY;
        for (int64_t i = 3; i < P * H * W; i += 11) xv[i] = xv[i ^ 1]; /* ties with a neighbour */
        for (int64_t i = 0; i < 2 * W; i++) xv[2 * H * W + i] = 0.5f;  /* a plane's first rows all tied */
        ct_tensor *idx = NULL;
        ct_tensor *y = ct_contiguous(ct_max_pool2d(x, (int64_t[]){2, 2}, (int64_t[]){2, 2}, (int64_t[]){0, 0}, NULL,
                                                   false, &idx));
        assert_non_null(y);
        idx = ct_contiguous(idx);
        const float *yv = ct_data_ptr(y);
        const int64_t *iv = ct_data_ptr(idx);
        for (int64_t p = 0; p < P; p++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    float m = 0;
                    int64_t mi = -1;
                    for (int t = 0; t < 4; t++) {
                        int64_t at = (2 * oh + t / 2) * W + 2 * ow + t % 2;
                        float v = xv[p * H * W + at];
                        if (mi < 0 || v > m || isnan(v)) { m = v; mi = at; }
                    }
                    int64_t o = (p * Ho + oh) * Wo + ow;
                    if (iv[o] != mi || !(yv[o] == m || (isnan(yv[o]) && isnan(m))))
                        fail_msg("width %ld, plane %ld, output (%ld, %ld): %g at %ld, expected %g at %ld", (long)W,
                                 (long)p, (long)oh, (long)ow, yv[o], (long)iv[o], m, (long)mi);
                }
        ct_scope_end(s);
    }
}

/* im2col (F.unfold) against its definition, col[c*kh*kw + ky*kw + kx][oy*Wo
 * + ox] = x[c, oy*sy - py + ky*dy, ox*sx - px + kx*dx] (0 off the image),
 * on geometries of the copy-the-shifted-plane path (unit strides, as wide
 * as the image: 3x3 pad 1, 5x3 with y dilation 2, 3x5 without y padding,
 * 1x3, 3x1) and of the general one (stride 2, no padding) */
static void test_im2col_rows(void **state) {
    (void)state;
    const int64_t geo[][8] = {/* kh kw dy dx py px sy sx */
                              {3, 3, 1, 1, 1, 1, 1, 1}, {5, 3, 2, 1, 2, 1, 1, 1}, {3, 5, 1, 1, 0, 2, 1, 1},
                              {1, 3, 1, 1, 0, 1, 1, 1}, {3, 1, 1, 1, 1, 0, 1, 1}, {3, 3, 1, 1, 0, 0, 2, 2}};
    for (size_t gi = 0; gi < sizeof geo / sizeof *geo; gi++) {
        ct_scope s = ct_scope_begin();
        const int64_t *q = geo[gi], N = 2, C = 3, H = 7, W = 6;
        ct_manual_seed(13);
        ct_tensor *x = ct_contiguous(ct_randn(CT_SHAPE(N, C, H, W), CT_F32));
        ct_tensor *col = ct_contiguous(ct_im2col(x, (int64_t[]){q[0], q[1]}, (int64_t[]){q[2], q[3]},
                                                 (int64_t[]){q[4], q[5]}, (int64_t[]){q[6], q[7]}));
        assert_non_null(col);
        const int64_t Ho = (H + 2 * q[4] - q[2] * (q[0] - 1) - 1) / q[6] + 1;
        const int64_t Wo = (W + 2 * q[5] - q[3] * (q[1] - 1) - 1) / q[7] + 1, K = C * q[0] * q[1];
        assert_int_equal(ct_numel(col), N * K * Ho * Wo);
        const float *xv = ct_data_ptr(x), *cv = ct_data_ptr(col);
        for (int64_t n = 0; n < N; n++)
            for (int64_t r = 0; r < K; r++)
                for (int64_t oy = 0; oy < Ho; oy++)
                    for (int64_t ox = 0; ox < Wo; ox++) {
                        int64_t c = r / (q[0] * q[1]), ky = r / q[1] % q[0], kx = r % q[1];
                        int64_t iy = oy * q[6] - q[4] + ky * q[2], ix = ox * q[7] - q[5] + kx * q[3];
                        float want = iy >= 0 && iy < H && ix >= 0 && ix < W ? xv[((n * C + c) * H + iy) * W + ix] : 0;
                        float got = cv[(n * K + r) * Ho * Wo + oy * Wo + ox];
                        if (got != want)
                            fail_msg("geometry %zu: col[%ld][%ld][%ld, %ld] = %g, expected %g", gi, (long)n,
                                     (long)r, (long)oy, (long)ox, got, want);
                    }
        ct_scope_end(s);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_bn_gradgrad),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_grouped_wgrad),
        cmocka_unit_test(test_max_pool_2x2_rows),
        cmocka_unit_test(test_im2col_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
