/* test_opencl_multi.c -- tensors on a second device of a type (opencl:1):
 * where storage lands and that it stays there.  ct_to_dev, the ct_*_dev
 * factories, ops (their outputs beside their inputs, autograd's gradients
 * too), ct_module_to_dev and ct_set_default_dev put tensors on the index
 * they name; a copy between opencl:0 and opencl:1 keeps the values, and so
 * does copy_ between the cpu and a device (one device is enough); inputs
 * on two indices are refused with both named.  PoCL is asked for two CPU
 * devices (POCL_DEVICES, unless the environment sets it); skipped, with the
 * reason, where there are fewer than two OpenCL devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "test_util.h"

static bool g_have, g_one; /* two OpenCL devices / at least one */
static const ct_dev k_d0 = {CT_OPENCL, 0}, k_d1 = {CT_OPENCL, 1}, k_cpu = {CT_CPU, 0};

static void assert_on(ct_tensor *t, ct_dev d) {
    assert_non_null(t);
    char b0[32], b1[32];
    if (!ct_dev_equal(ct_tensor_dev(t), d))
        fail_msg("tensor on %s, expected %s", ct_dev_str(ct_tensor_dev(t), b0, sizeof b0),
                 ct_dev_str(d, b1, sizeof b1));
}

/* a and b (any devices) hold the same values */
static void assert_same_values(ct_tensor *a, ct_tensor *b, double tol) {
    ct_tensor *ha = ct_to_dev(a, k_cpu), *hb = ct_to_dev(b, k_cpu);
    assert_non_null(ha);
    assert_non_null(hb);
    assert_int_equal(ct_allclose(ha, hb, tol, tol, false), 1);
}

static void t_to_and_back(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(5, 7), CT_F32);
    ct_tensor *y = ct_to_dev(x, k_d1);
    assert_on(y, k_d1);
    assert_int_equal(ct_get_device_index(y), 1);
    assert_same_values(x, y, 0);
    /* opencl:1 -> opencl:0 and back, device to device (through the host) */
    ct_tensor *z = ct_to_dev(y, k_d0);
    assert_on(z, k_d0);
    assert_same_values(x, z, 0);
    ct_tensor *w = ct_to_dev(ct_transpose(z, 0, 1), k_d1); /* a strided source */
    assert_on(w, k_d1);
    assert_same_values(ct_transpose(x, 0, 1), w, 0);
    /* a tensor already there is returned as is */
    ct_tensor *same = ct_to_dev(y, k_d1);
    assert_ptr_equal(same, y);
    SCOPE_END;
}

static void t_factories(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    assert_on(ct_empty_dev(CT_SHAPE(3), CT_F32, k_d1), k_d1);
    ct_tensor *z = ct_zeros_dev(CT_SHAPE(2, 3), CT_F32, k_d1);
    assert_on(z, k_d1);
    assert_same_values(z, ct_zeros(CT_SHAPE(2, 3), CT_F32), 0);
    assert_on(ct_full_dev(CT_SHAPE(4), 2.5, CT_F64, k_d0), k_d0);
    /* the default device carries its index (torch.set_default_device("...:1")) */
    assert_int_equal(ct_set_default_dev(k_d1), CT_OK);
    assert_true(ct_dev_equal(ct_get_default_dev(), k_d1));
    ct_tensor *o = ct_ones(CT_SHAPE(3), CT_F32);
    assert_on(o, k_d1);
    assert_int_equal(ct_set_default_dev(k_cpu), CT_OK);
    assert_on(ct_ones(CT_SHAPE(3), CT_F32), k_cpu);
    /* an index that does not exist is refused, not mapped to another */
    expect_err(ct_zeros_dev(CT_SHAPE(2), CT_F32, CT_DEV(CT_OPENCL, 99)), CT_ERR_DEVICE, "opencl:99 is not available");
    SCOPE_END;
}

/* ops on opencl:1 compute there, their results stay there and match the cpu */
static void t_ops_stay(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_manual_seed(3);
    ct_tensor *a = ct_randn(CT_SHAPE(8, 16), CT_F32), *b = ct_randn(CT_SHAPE(16, 4), CT_F32);
    ct_tensor *a1 = ct_to_dev(a, k_d1), *b1 = ct_to_dev(b, k_d1);
    ct_tensor *r[4] = {ct_add(ct_mul_scalar(a1, 2.0), a1), ct_matmul(a1, b1), ct_sum(a1, NULL, 0, false),
                       ct_softmax(a1, 1)};
    ct_tensor *e[4] = {ct_add(ct_mul_scalar(a, 2.0), a), ct_matmul(a, b), ct_sum(a, NULL, 0, false),
                       ct_softmax(a, 1)};
    for (int k = 0; k < 4; k++) {
        assert_on(r[k], k_d1);
        assert_same_values(r[k], e[k], 1e-4);
    }
    /* a 0-dim cpu number combines with opencl:1 (a wrapped scalar) */
    assert_on(ct_mul(a1, ct_scalar(3.0, CT_F32)), k_d1);
    SCOPE_END;
}

static void t_mixed_refused(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(4, 4), CT_F32);
    ct_tensor *x0 = ct_to_dev(x, k_d0), *x1 = ct_to_dev(x, k_d1);
    expect_err(ct_add(x0, x1), CT_ERR_DEVICE, "expected all tensors on the same device, got opencl:0 and opencl:1");
    expect_err(ct_matmul(x1, x0), CT_ERR_DEVICE, "got opencl:1 and opencl:0");
    SCOPE_END;
}

static void t_autograd_and_module(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_manual_seed(11);
    ct_module *lin = ct_linear_new(6, 3, true);
    assert_non_null(lin);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 6), CT_F32);
    /* the cpu's gradients first */
    ct_tensor *w = ct_module_param(lin, 0);
    assert_int_equal(ct_backward(ct_sum(ct_module_forward1(lin, x), NULL, 0, false), NULL, false, false), CT_OK);
    ct_tensor *gw = ct_clone(ct_grad(w));
    ct_module_zero_grad(lin);
    assert_int_equal(ct_module_to_dev(lin, k_d1), CT_OK);
    w = ct_module_param(lin, 0);
    assert_on(w, k_d1);
    assert_on(ct_module_param(lin, 1), k_d1);
    ct_tensor *x1 = ct_to_dev(x, k_d1);
    ct_tensor *y = ct_module_forward1(lin, x1);
    assert_on(y, k_d1);
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
    assert_on(ct_grad(w), k_d1);
    assert_same_values(ct_grad(w), gw, 1e-5);
    /* an input on the other device is refused by the layer's op */
    expect_err(ct_module_forward1(lin, ct_to_dev(x, k_d0)), CT_ERR_DEVICE, "got opencl:0 and opencl:1");
    ct_module_release(lin);
    SCOPE_END;
}

/* copy_ between devices (torch's dst.copy_(src)): cpu -> device, device ->
 * cpu, device -> device, broadcasting, a dtype change and a strided dst; a
 * src that requires grad is refused (the copy is not differentiable yet) */
static void t_copy_across(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *d = ct_zeros_dev(CT_SHAPE(3, 4), CT_F64, k_d0);
    assert_ptr_equal(ct_copy_(d, x), d);
    assert_on(d, k_d0);
    assert_same_values(d, ct_to_dtype(x, CT_F64), 0);
    ct_tensor *h = ct_zeros(CT_SHAPE(4, 3), CT_F32);
    assert_non_null(ct_copy_(ct_transpose(h, 0, 1), d)); /* into a strided cpu view */
    assert_same_values(ct_transpose(h, 0, 1), x, 1e-7);
    ct_tensor *row = ct_to_dev(ct_arange(0, 4, 1, CT_F32), k_d0);
    ct_tensor *hb = ct_empty(CT_SHAPE(3, 4), CT_F32);
    assert_non_null(ct_copy_(hb, row)); /* broadcast on the way */
    assert_same_values(hb, ct_expand(ct_arange(0, 4, 1, CT_F32), CT_SHAPE(3, 4)), 0);
    if (g_have) {
        ct_tensor *d1 = ct_empty_dev(CT_SHAPE(3, 4), CT_F64, k_d1);
        assert_non_null(ct_copy_(d1, d));
        assert_on(d1, k_d1);
        assert_same_values(d1, d, 0);
    }
    ct_tensor *xg = ct_randn(CT_SHAPE(3, 4), CT_F32);
    assert_int_equal(ct_set_requires_grad(xg, true), CT_OK);
    expect_err(ct_copy_(d, xg), CT_ERR_DEVICE, "copy_: a copy from cpu to opencl:0 of a tensor that requires grad");
    assert_non_null(ct_copy_(d, ct_detach(xg))); /* detached, it goes */
    assert_same_values(d, ct_to_dtype(xg, CT_F64), 0);
    SCOPE_END;
}

int main(void) {
    setenv("POCL_DEVICES", "pthread pthread", 0); /* before the OpenCL platform is opened */
    int n = ct_device_count(CT_OPENCL);
    if (n < 2) {
        if (n <= 0)
            printf("test_opencl_multi: skipped: %s\n",
                   ct_last_error()[0] ? ct_last_error() : "no OpenCL device");
        else
            printf("test_opencl_multi: the two-device tests skipped: %d OpenCL device\n", n);
    }
    ct_clear_error();
    g_have = n >= 2;
    g_one = n >= 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_to_and_back),  cmocka_unit_test(t_factories),
        cmocka_unit_test(t_ops_stay),     cmocka_unit_test(t_mixed_refused),
        cmocka_unit_test(t_autograd_and_module), cmocka_unit_test(t_copy_across),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
