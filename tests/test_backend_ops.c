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

#include "ctorch/nn.h"
#include "fixture.h"
#include "nvrtc_check.h"

static ct_dev g_dev;
long ct__opencl_kernels_built(void); /* src/backend/opencl/backend.c */
const char *ct__ocl_blas_status(void); /* src/backend/opencl/k_blas.c */

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
    printf("%s: %d ops ran: %d passed (%d on own kernels, %d own kernels for some dtypes and the cpu fallback "
           "for others, %d through the cpu fallback), %d have no kernel (skipped), %d failed; backward on the device "
           "matched the cpu's for %d ops; case runs %d: %d passed, %d used the fallback, %d no kernel, %d failed\n",
           dn, t.ops, t.ops_passed, t.ops_own, t.ops_mixed, t.ops_fallback, t.ops_no_kernel, t.ops_failed,
           t.ops_backward, t.case_runs, t.passed, t.fallback, t.no_kernel, t.failed);
    printf("%s: %ld kernels built by the driver; matmul family: %s\n", dn, ct__opencl_kernels_built(),
           ct__ocl_blas_status());
    printf("%s own kernel:", dn);
    fx_device_print_ops(stdout, 1);
    printf("\n%s own kernel for some dtypes, fallback for others:", dn);
    fx_device_print_ops(stdout, 32);
    printf("\n%s fallback:", dn);
    fx_device_print_ops(stdout, 8);
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
    if (g_dev.type != CT_OPENCL) skip(); /* its messages and limits are the OpenCL device's */
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
    /* the device memory limit main sets (64 MiB): 40 MiB fit, 30 MiB more do
     * not (an error naming the sizes), and fit again once the 40 are freed */
    ct_tensor *big = ct_empty_dev((int64_t[]){10 << 20}, 1, CT_F32, g_dev);
    assert_non_null(big);
    ct_tensor *more = ct_empty_dev((int64_t[]){30 << 20}, 1, CT_U8, g_dev);
    assert_null(more);
    assert_int_equal(ct_last_error_code(), CT_ERR_OOM);
    assert_non_null(strstr(ct_last_error(), "31457280 bytes requested"));
    assert_non_null(strstr(ct_last_error(), "CT_OPENCL_MEMORY_LIMIT"));
    ct_clear_error();
    ct_scope_end(s);
    s = ct_scope_begin();
    more = ct_empty_dev((int64_t[]){30 << 20}, 1, CT_U8, g_dev);
    assert_non_null(more);
    ct_scope_end(s);
    s = ct_scope_begin();
    /* item, and a 0-dim cpu number combined with a device tensor */
    ct_tensor *a = ct_full_dev((int64_t[]){3}, 1, 2.5, CT_F32, g_dev);
    assert_non_null(a);
    ct_tensor *b = ct_mul(a, ct_scalar(4.0, CT_F32));
    assert_non_null(b);
    assert_true(ct_dev_equal(ct_tensor_dev(b), g_dev));
    assert_float_equal(ct_item(ct_select(b, 0, 2)), 10.0, 0);
    assert_int_equal(ct_item_int(ct_select(ct_to_dtype(b, CT_I64), 0, 1)), 10);
    /* printed through a copy, with its device, as torch prints */
    char *str = ct_to_string(b);
    assert_non_null(str);
    assert_string_equal(str, "tensor([10., 10., 10.], device='opencl:0')");
    free(str);
    /* a device tensor and a cpu tensor with dims do not mix */
    ct_tensor *c = ct_add(a, ct_ones((int64_t[]){3}, 1, CT_F32));
    assert_null(c);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    ct_clear_error();
    ct_scope_end(s);
}

/* ct_module_to_dev: the parameters go to the device with their values and
 * come back to the cpu with them (a copy through the host each way). */
static void module_roundtrip(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_manual_seed(7);
    ct_module *m = ct_linear_new(5, 3, true);
    assert_non_null(m);
    const char *names[4];
    ct_tensor *p[4];
    int n = ct_module_named_parameters(m, names, p, 4);
    assert_int_equal(n, 2);
    ct_tensor *w0 = ct_clone(p[0]), *b0 = ct_clone(p[1]);
    assert_int_equal(ct_module_to_dev(m, g_dev), CT_OK);
    n = ct_module_named_parameters(m, names, p, 4);
    assert_true(ct_dev_equal(ct_tensor_dev(p[0]), g_dev));
    assert_true(ct_dev_equal(ct_tensor_dev(p[1]), g_dev));
    /* on the device: w * 2 computed there equals the cpu's */
    ct_tensor *w2 = ct_to_dev(ct_mul_scalar(p[0], 2.0), CT_DEV(CT_CPU, 0));
    assert_int_equal(ct_equal(w2, ct_mul_scalar(w0, 2.0)), 1);
    assert_int_equal(ct_module_to_dev(m, CT_DEV(CT_CPU, 0)), CT_OK);
    n = ct_module_named_parameters(m, names, p, 4);
    assert_int_equal(ct_get_device(p[0]), CT_CPU);
    assert_int_equal(ct_equal(p[0], w0), 1);
    assert_int_equal(ct_equal(p[1], b0), 1);
    ct_module_release(m);
    ct_scope_end(s);
}

int main(void) {
    /* a device memory limit for the out-of-memory checks of device_basics
     * (read when the runtime loads, below) */
    setenv("CT_OPENCL_MEMORY_LIMIT", "67108864", 1);
    ct__gpu_sources_record(true); /* every kernel text, for nvrtc_compile_all */
    const char *want = getenv("CT_BACKEND_OPS_DEVICE"); /* e.g. "cuda:0" (scripts/gpu-check.sh) */
    if (want) {
        if (ct_dev_parse(want, &g_dev) || !ct_dev_is_available(g_dev)) {
            printf("test_backend_ops: skipped: %s is not available: %s\n", want, ct_last_error());
            return 0;
        }
    } else {
    const char *names[16];
    int n = ct_opencl_devices(names, 16);
    if (n <= 0) {
        printf("test_backend_ops: skipped: %s\n", ct_last_error());
        return 0;
    }
    for (int d = 0; d < n && d < 16; d++) printf("opencl:%d  %s\n", d, names[d]);
    g_dev = CT_DEV(CT_OPENCL, 0);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(device_basics),
        cmocka_unit_test(module_roundtrip),
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
        cmocka_unit_test(summary),
        cmocka_unit_test(nvrtc_compile_all),
    };
    if (getenv("CT_TEST_FILTER")) cmocka_set_test_filter(getenv("CT_TEST_FILTER")); /* e.g. "module*" */
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fx_device_reset();
    ct__gpu_sources_record(false);
    return rc;
}
