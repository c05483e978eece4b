/* test_opencl_pool.c -- the OpenCL device's adaptive avg / max pooling
 * kernels (src/backend/opencl/k_conv.c, which the CUDA backend runs as
 * CUDA C through the dialect seam) against the cpu's: forward and backward
 * (the gradient through autograd from the same upstream gradient: the
 * mean's a composite of device matmuls, the max's max_pool_backward on the
 * returned indices), float32 and float64, windows that overlap (7 -> 3),
 * grow (5 -> 8), the global pool (-> 1), a non-contiguous input, ties and a
 * NaN for the max (the first maximum in window order; a NaN wins), and the
 * indices equal.  The device's kernel runs (the cpu fallback is not used).
 * Skipped where there is no OpenCL device (the reason printed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "ctorch/ctorch.h"
#include "ops/op_table.h"
#include "test_util.h"

static ct_dev g_dev;
static bool g_have;

/* x0 [2, 3, H, W] pooled to (oh, ow) on the cpu and on the device */
static void check(ct_tensor *x0, int64_t oh, int64_t ow, bool is_max, bool transposed) {
    SCOPE_BEGIN;
    ct_dtype dt = ct_get_dtype(x0);
    const int64_t os[2] = {oh, ow};
    ct_tensor *res[2][3] = {{NULL}};
    ct_op op = is_max ? CT_OP_adaptive_max_pool : CT_OP_adaptive_avg_pool;
    long fb = ct__fallback_runs(op);
    for (int side = 0; side < 2; side++) {
        ct_dev d = side ? g_dev : CT_DEV(CT_CPU, 0);
        ct_tensor *x = side ? ct_to_dev(x0, d) : ct_clone(x0); /* a leaf of its own (x0 gets no grad) */
        assert_non_null(x);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *xin = transposed ? ct_transpose(x, 2, 3) : x;
        if (transposed) assert_false(ct_is_contiguous(xin));
        ct_tensor *idx = NULL;
        ct_tensor *y = is_max ? ct_adaptive_max_pool2d(xin, os, &idx) : ct_adaptive_avg_pool2d(xin, os);
        assert_non_null(y);
        assert_true(ct_dev_equal(ct_tensor_dev(y), d));
        ct_manual_seed(11);
        ct_tensor *g = ct_to_dev(ct_randn(ct_sizes(y), ct_ndim(y), dt), d);
        assert_int_equal(ct_backward(ct_sum(ct_mul(ct_nan_to_num(y, 0, 0, 0), g), NULL, 0, false), NULL,
                                     false, false), CT_OK);
        ct_tensor *r[3] = {y, ct_grad(x), idx};
        for (int k = 0; k < 3; k++) {
            if (!r[k]) continue;
            res[side][k] = ct_to_dev(r[k], CT_DEV(CT_CPU, 0));
            assert_non_null(res[side][k]);
        }
    }
    if (ct__fallback_runs(op) != fb)
        fail_msg("adaptive_%s_pool2d -> (%lld, %lld)%s ran the cpu fallback", is_max ? "max" : "avg", (long long)oh,
                 (long long)ow, transposed ? " (transposed input)" : "");
    double tol = dt == CT_F64 ? 1e-12 : 1e-5;
    for (int k = 0; k < 3; k++) {
        if (!res[0][k]) continue;
        assert_non_null(res[1][k]);
        if (!ct_allclose(res[1][k], res[0][k], tol, tol, true))
            fail_msg("adaptive_%s_pool2d %s -> (%lld, %lld)%s: %s differs from the cpu's", is_max ? "max" : "avg",
                     ct_dtype_name(dt), (long long)oh, (long long)ow, transposed ? " (transposed input)" : "",
                     (const char *[]){"y", "dx", "indices"}[k]);
    }
    SCOPE_END;
}

static void forward_backward(void **state) {
    (void)state;
    if (!g_have) skip();
    ct__backends_init();
    assert_non_null(ct__kernels[CT_OPENCL][CT_OP_adaptive_avg_pool]);
    assert_non_null(ct__kernels[CT_OPENCL][CT_OP_adaptive_max_pool]);
    for (int k = 0; k < 2; k++) {
        SCOPE_BEGIN;
        ct_dtype dt = k ? CT_F64 : CT_F32;
        ct_manual_seed(3);
        ct_tensor *x = ct_randn((int64_t[]){2, 3, 7, 5}, 4, dt);
        /* ties (rounded to halves) and a NaN in one window of the max */
        ct_tensor *xt = ct_div_scalar(ct_round(ct_mul_scalar(x, 2.0)), 2.0);
        double nan = NAN;
        ct_tensor *xn = ct_clone(xt);
        assert_non_null(xn);
        assert_non_null(ct_fill_(ct_select(ct_select(ct_select(ct_select(xn, 0, 1), 0, 2), 0, 3), 0, 1), nan));
        for (int m = 0; m < 2; m++) {
            bool is_max = m == 1;
            check(x, 3, 2, is_max, false);  /* overlapping windows */
            check(x, 8, 5, is_max, false);  /* more outputs than inputs */
            check(x, 1, 1, is_max, false);  /* global */
            check(x, 3, 4, is_max, true);   /* a strided input ([.., 5, 7]) */
        }
        check(xt, 3, 2, true, false);
        check(xn, 3, 2, true, false);
        check(xn, 4, 3, false, false);
        SCOPE_END;
    }
}

int main(void) {
    const char *names[16];
    int n = ct_opencl_devices(names, 16);
    if (n <= 0) printf("test_opencl_pool: skipped: %s\n", ct_last_error());
    ct_clear_error();
    g_have = n > 0;
    g_dev = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {cmocka_unit_test(forward_backward)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
