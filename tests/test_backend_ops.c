/* test_backend_ops.c -- every op of the op fixtures on every other device
 * that computes values, against the CPU (after ggml's test-backend-ops).
 *
 * Every case of every op fixture family (tests/ops_families.h: the same
 * tables test_ops and test_meta_ops run) runs on the cpu, checked against
 * torch as in test_ops, then again with its inputs on the device,
 * contiguous and non-contiguous (fixture.c's device mode,
 * fx_set_device_check): each output must be on the device and, copied back,
 * match the cpu's at the case's tolerance.  An op without a kernel on the
 * device (or a dtype of it without one) is skipped and counted, not failed.
 * Per device it prints how many ops ran, passed, have no kernel, failed.
 *
 * Devices: each OpenCL device (through PoCL on a machine without a GPU).
 * Where there is none, the test prints why and is skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixture.h"

static ct_dev g_dev;
long ct__opencl_kernels_built(void); /* src/backend/opencl/backend.c */

#define FAMILY(name)                                                        \
    extern const fx_op fx_ops_##name[];                                     \
    extern const int fx_nops_##name;                                        \
    static void test_##name(void **state) {                                 \
        (void)state;                                                        \
        fx_set_device_check(true, g_dev);                                   \
        int f = fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, \
                            fx_nops_##name);                                \
        fx_set_device_check(false, g_dev);                                  \
        assert_int_equal(f, 0);                                             \
    }
#include "ops_families.h"
#undef FAMILY

/* The device's per-op summary after the families: some ops must have run
 * and passed there (a device whose every op was skipped tests nothing). */
static void summary(void **state) {
    (void)state;
    fx_device_tally t = fx_device_summary();
    char dn[32];
    ct_dev_str(g_dev, dn, sizeof dn);
    printf("%s: %d ops: %d passed, %d have no kernel (skipped), %d failed; case runs %d: %d passed, "
           "%d no kernel, %d failed\n", dn, t.ops, t.ops_passed, t.ops_no_kernel, t.ops_failed, t.case_runs,
           t.passed, t.no_kernel, t.failed);
    printf("%s: %ld kernels built by the driver\n", dn, ct__opencl_kernels_built());
    printf("%s passed:", dn);
    fx_device_print_ops(stdout, 1);
    printf("\n%s no kernel:", dn);
    fx_device_print_ops(stdout, 2);
    printf("\n");
    if (t.ops_failed) {
        printf("%s failed:", dn);
        fx_device_print_ops(stdout, 4);
        printf("\n");
    }
    assert_int_equal(t.ops_failed, 0);
    assert_true(t.ops_passed > 0);
}

/* Device errors: an index that does not exist, an allocation over the
 * device's limits, reads of device values on the host through a copy. */
static void device_basics(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_dev bad = CT_DEV(g_dev.type, 99);
    ct_tensor *x = ct_zeros_dev((int64_t[]){2, 3}, 2, CT_F32, bad);
    assert_null(x);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "opencl:99"));
    ct_clear_error();
    /* far more than any device has: a clear out-of-memory error naming the size */
    ct_tensor *huge = ct_empty_dev((int64_t[]){1 << 20, 1 << 20, 64}, 3, CT_F32, g_dev);
    assert_null(huge);
    assert_int_equal(ct_last_error_code(), CT_ERR_OOM);
    assert_non_null(strstr(ct_last_error(), "bytes"));
    ct_clear_error();
    /* item, and a 0-dim cpu number combined with a device tensor */
    ct_tensor *a = ct_full_dev((int64_t[]){3}, 1, 2.5, CT_F32, g_dev);
    assert_non_null(a);
    ct_tensor *b = ct_mul(a, ct_scalar(4.0, CT_F32));
    assert_non_null(b);
    assert_true(ct_dev_equal(ct_tensor_dev(b), g_dev));
    assert_float_equal(ct_item(ct_select(b, 0, 2)), 10.0, 0);
    assert_int_equal(ct_item_int(ct_select(ct_to_dtype(b, CT_I64), 0, 1)), 10);
    /* a device tensor and a cpu tensor with dims do not mix */
    ct_tensor *c = ct_add(a, ct_ones((int64_t[]){3}, 1, CT_F32));
    assert_null(c);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    ct_clear_error();
    ct_scope_end(s);
}

int main(void) {
    const char *names[16];
    int n = ct_opencl_devices(names, 16);
    if (n <= 0) {
        printf("test_backend_ops: skipped: %s\n", ct_last_error());
        return 0;
    }
    for (int d = 0; d < n && d < 16; d++) printf("opencl:%d  %s\n", d, names[d]);
    g_dev = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_basics),
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
        cmocka_unit_test(summary),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_device_reset();
    return rc;
}
