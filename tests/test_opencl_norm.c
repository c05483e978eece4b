/* test_opencl_norm.c -- the OpenCL device's fused layer_norm / rms_norm
 * kernels (src/backend/opencl/k_norm.c) against the cpu's: forward and
 * backward (y, dx, dw, db through autograd, from the same upstream
 * gradient), float32 and float64, with and without weight and bias, one and
 * two normalized dims, a non-contiguous input, and no rows (dw and db are
 * zeros).  The device's kernel runs (its slot is set and the cpu fallback
 * is not used); its row sums are in double where the cpu's float32 kernel
 * sums in float lanes, so float32 agrees to rounding (rtol 1e-4), float64
 * to 1e-10.  Skipped where there is no OpenCL device (the reason printed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>

#include "ctorch/ctorch.h"
#include "ops/op_table.h"
#include "test_util.h"

static ct_dev g_dev;
static bool g_have;

/* one configuration on the cpu and on the device; compares y and the grads */
static void check(const int64_t *shape, int nd, int nnorm, ct_dtype dt, bool weight, bool bias, bool rms,
                  bool transposed) {
    SCOPE_BEGIN;
    const int64_t *ns = shape + nd - nnorm;
    ct_manual_seed(5);
    ct_tensor *x0 = ct_randn(shape, nd, dt), *g0 = ct_randn(shape, nd, dt);
    ct_tensor *w0 = ct_add_scalar(ct_randn(ns, nnorm, dt), 1.0), *b0 = ct_randn(ns, nnorm, dt);
    if (transposed) x0 = ct_contiguous(ct_transpose(x0, 0, 1)); /* the leaf; the op sees it transposed back */
    ct_tensor *res[2][4] = {{NULL}};
    long fb_f = ct__fallback_runs(CT_OP_layer_norm_fwd), fb_b = ct__fallback_runs(CT_OP_layer_norm_bwd);
    for (int side = 0; side < 2; side++) {
        ct_dev d = side ? g_dev : CT_DEV(CT_CPU, 0);
        /* leaves of their own on each side: on the cpu ct_to_dev would return
         * x0 itself, and the device's copy of a tensor that requires grad is
         * recorded (its gradient would go back to x0) */
#define OWN(t) (side ? ct_to_dev(t, d) : ct_clone(t))
        ct_tensor *x = OWN(x0), *w = weight ? OWN(w0) : NULL, *b = bias ? OWN(b0) : NULL;
#undef OWN
        assert_non_null(x);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *xin = transposed ? ct_transpose(x, 0, 1) : x; /* strided: the op makes it contiguous */
        if (transposed) assert_false(ct_is_contiguous(xin));
        if (w) assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
        if (b) assert_int_equal(ct_set_requires_grad(b, true), CT_OK);
        ct_tensor *y = rms ? ct_rms_norm(xin, ns, nnorm, w, 1e-6) : ct_layer_norm(xin, ns, nnorm, w, b, 1e-5);
        assert_non_null(y);
        assert_true(ct_dev_equal(ct_tensor_dev(y), d));
        assert_int_equal(ct_backward(ct_sum(ct_mul(y, ct_to_dev(g0, d)), NULL, 0, false), NULL, false, false), CT_OK);
        ct_tensor *r[4] = {y, ct_grad(x), w ? ct_grad(w) : NULL, b ? ct_grad(b) : NULL};
        for (int k = 0; k < 4; k++) {
            if (!r[k]) continue;
            res[side][k] = ct_to_dev(r[k], CT_DEV(CT_CPU, 0));
            assert_non_null(res[side][k]);
        }
    }
    assert_int_equal(ct__fallback_runs(CT_OP_layer_norm_fwd), fb_f);
    assert_int_equal(ct__fallback_runs(CT_OP_layer_norm_bwd), fb_b);
    double tol = dt == CT_F64 ? 1e-10 : 1e-4;
    for (int k = 0; k < 4; k++) {
        if (!res[0][k]) continue;
        assert_non_null(res[1][k]);
        if (!ct_allclose(res[1][k], res[0][k], tol, tol, false))
            fail_msg("%s %s: %s differs from the cpu's", rms ? "rms_norm" : "layer_norm", ct_dtype_name(dt),
                     (const char *[]){"y", "dx", "dw", "db"}[k]);
    }
    SCOPE_END;
}

static void forward_backward(void **state) {
    (void)state;
    if (!g_have) skip();
    ct__backends_init();
    assert_non_null(ct__kernels[CT_OPENCL][CT_OP_layer_norm_fwd]);
    assert_non_null(ct__kernels[CT_OPENCL][CT_OP_layer_norm_bwd]);
    static const int64_t s3[3] = {3, 5, 37};
    for (int k = 0; k < 2; k++) {
        ct_dtype dt = k ? CT_F64 : CT_F32;
        check(s3, 3, 1, dt, true, true, false, false);
        check(s3, 3, 2, dt, true, true, false, false);
        check(s3, 3, 1, dt, false, false, false, false);
        check(s3, 3, 1, dt, true, false, false, true);
        check(s3, 3, 1, dt, true, false, true, false);  /* rms_norm */
        check(s3, 3, 2, dt, false, false, true, true);
    }
}

/* no rows: y is empty, the weight's and bias's gradients zeros */
static void no_rows(void **state) {
    (void)state;
    if (!g_have) skip();
    static const int64_t s[2] = {0, 7};
    check(s, 2, 1, CT_F32, true, true, false, false);
}

int main(void) {
    const char *names[16];
    int n = ct_opencl_devices(names, 16);
    if (n <= 0) printf("test_opencl_norm: skipped: %s\n", ct_last_error());
    ct_clear_error();
    g_have = n > 0;
    g_dev = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {cmocka_unit_test(forward_backward), cmocka_unit_test(no_rows)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
