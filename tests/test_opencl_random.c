/* test_opencl_random.c -- the OpenCL device's random kernels
 * (src/backend/opencl/k_random.c) draw the CPU's Philox streams: after the
 * same ct_manual_seed, every sampler on the device gives the cpu's values
 * -- uniform, randint (random_), bernoulli (scalar and per-element
 * probabilities), dropout's masks, normal and exponential in float32 bit
 * for bit; normal and exponential in float64 within a few ulps of
 * max(|value|, 1) (the driver's log/cos/sin against the host's libm) -- on
 * odd sizes (a partial last
 * Philox block), into strided and half-precision destinations (through the
 * op layer's contiguous float32 draw), and on the device's own kernels
 * (the cpu fallback is not used).  The generator advances the same on both:
 * a second draw after each matches too.  Skipped where there is no OpenCL
 * device (the reason printed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "ops/op_table.h"
#include "test_util.h"

static ct_dev g_dev;
static bool g_have;

typedef enum { S_UNIFORM, S_NORMAL, S_RANDOM, S_BERN, S_EXP, S_DROPOUT, S_BERN_P } sampler;

/* draws into t (on its device) with the sampler; returns the result */
static ct_tensor *draw(sampler s, ct_tensor *t) {
    switch (s) {
    case S_UNIFORM: return ct_uniform_(t, -2.0, 3.0);
    case S_NORMAL: return ct_normal_(t, 0.5, 2.0);
    case S_RANDOM: return ct_random_(t, -5, 1000);
    case S_BERN: return ct_bernoulli_(t, 0.3);
    case S_EXP: return ct_exponential_(t, 1.5);
    /* ones: t is uninitialized, and 0 * a NaN or inf left in its memory is NaN */
    case S_DROPOUT: return ct_dropout(ct_fill_(t, 1.0), 0.25, true);
    case S_BERN_P: return ct_bernoulli(ct_abs(ct_sin(t))); /* probabilities computed from t's values */
    }
    return NULL;
}

/* the largest distance between two float64 tensors' values, in ulps of
 * max(|value|, 1) (a normal value near 0 comes from cos/sin near a root,
 * where the driver's and the host's libm differ by more ulps of the tiny
 * result, not of the sample's scale) */
static double max_ulps(ct_tensor *a, ct_tensor *b) {
    const double *x = ct_data_ptr(a), *y = ct_data_ptr(b);
    double m = 0;
    for (int64_t i = 0; i < ct_numel(a); i++) {
        double ax = fmax(fabs(x[i]), 1.0);
        double d = fabs(x[i] - y[i]) / (nextafter(ax, INFINITY) - ax);
        if (d > m) m = d;
    }
    return m;
}

/* the sampler on the cpu and on the device from the same seed, twice in a
 * row; exact: the values must be equal, else within ulps (float64 only) */
static void check(sampler s, const int64_t *shape, int nd, ct_dtype dt, bool transposed, bool exact, double ulps,
                  ct_op op) {
    SCOPE_BEGIN;
    ct_tensor *res[2][2];
    long fb0 = ct__fallback_runs(op);
    for (int side = 0; side < 2; side++) {
        ct_manual_seed(20260);
        for (int rep = 0; rep < 2; rep++) {
            ct_dev d = side ? g_dev : CT_DEV(CT_CPU, 0);
            ct_tensor *t = s == S_BERN_P ? ct_to_dev(ct_arange(0, (double)(shape[0] * shape[1]), 1, dt), d)
                                         : ct_empty_dev(shape, nd, dt, d);
            assert_non_null(t);
            if (s == S_BERN_P) t = ct_reshape(t, shape, nd);
            if (transposed) t = ct_t(ct_empty_dev((int64_t[]){shape[1], shape[0]}, 2, dt, d));
            ct_tensor *r = draw(s, t);
            if (!r) printf("draw %d on %s: %s\n", (int)s, side ? "device" : "cpu", ct_last_error());
            assert_non_null(r);
            assert_true(ct_dev_equal(ct_tensor_dev(r), d));
            res[side][rep] = ct_contiguous(ct_to_dtype(ct_to_dev(r, CT_DEV(CT_CPU, 0)),
                                                      exact ? ct_get_dtype(r) : CT_F64));
            assert_non_null(res[side][rep]);
        }
    }
    /* the device kernel ran (the dropout's and bernoulli's other ops aside) */
    assert_int_equal(ct__fallback_runs(op), fb0);
    for (int rep = 0; rep < 2; rep++) {
        if (exact) {
            if (ct_equal(res[0][rep], res[1][rep]) == 1) continue;
            /* name the first difference before failing */
            ct_tensor *a0 = ct_contiguous(ct_to_dtype(res[0][rep], CT_F64)), *a1 = ct_contiguous(ct_to_dtype(res[1][rep], CT_F64));
            const double *x0 = ct_data_ptr(a0), *x1 = ct_data_ptr(a1);
            int64_t n = ct_numel(a0), first = -1, cnt = 0;
            for (int64_t i = 0; i < n; i++)
                if (x0[i] != x1[i]) { cnt++; if (first < 0) first = i; }
            fail_msg("sampler %d %s rep %d: %lld of %lld values differ from the cpu's, first at %lld (cpu %g, device %g)",
                     (int)s, ct_dtype_name(dt), rep, (long long)cnt, (long long)n, (long long)first,
                     first >= 0 ? x0[first] : 0.0, first >= 0 ? x1[first] : 0.0);
        } else {
            double u = max_ulps(res[0][rep], res[1][rep]);
            printf("sampler %d %s: at most %.1f ulps from the cpu's\n", (int)s, ct_dtype_name(dt), u);
            assert_true(u <= ulps);
        }
    }
    /* the two draws differ (the generator advanced) */
    assert_int_equal(ct_equal(res[0][0], res[0][1]), 0);
    SCOPE_END;
}

static const int64_t k_odd[1] = {1001}, k_mat[2] = {37, 29};

static void uniform(void **state) {
    (void)state;
    if (!g_have) skip();
    check(S_UNIFORM, k_odd, 1, CT_F32, false, true, 0, CT_OP_uniform);
    check(S_UNIFORM, k_odd, 1, CT_F64, false, true, 0, CT_OP_uniform);
    check(S_UNIFORM, k_mat, 2, CT_F32, true, true, 0, CT_OP_uniform);  /* strided: a contiguous draw, copied */
    check(S_UNIFORM, k_mat, 2, CT_BF16, false, true, 0, CT_OP_uniform); /* drawn in float32, converted */
}

static void normal(void **state) {
    (void)state;
    if (!g_have) skip();
    check(S_NORMAL, k_odd, 1, CT_F32, false, true, 0, CT_OP_normal);
    check(S_NORMAL, k_mat, 2, CT_F32, true, true, 0, CT_OP_normal);
    check(S_NORMAL, k_odd, 1, CT_F64, false, false, 4, CT_OP_normal);
}

static void integers(void **state) {
    (void)state;
    if (!g_have) skip();
    check(S_RANDOM, k_odd, 1, CT_I64, false, true, 0, CT_OP_randint);
    check(S_RANDOM, k_odd, 1, CT_I32, false, true, 0, CT_OP_randint);
    check(S_RANDOM, k_odd, 1, CT_F32, false, true, 0, CT_OP_randint);
}

static void bernoulli_dropout(void **state) {
    (void)state;
    if (!g_have) skip();
    check(S_BERN, k_odd, 1, CT_F32, false, true, 0, CT_OP_bernoulli);
    check(S_BERN, k_odd, 1, CT_BOOL, false, true, 0, CT_OP_bernoulli);
    check(S_BERN_P, k_mat, 2, CT_F32, false, true, 0, CT_OP_bernoulli);
    check(S_DROPOUT, k_mat, 2, CT_F32, false, true, 0, CT_OP_bernoulli);
}

static void exponential(void **state) {
    (void)state;
    if (!g_have) skip();
    check(S_EXP, k_odd, 1, CT_F32, false, true, 0, CT_OP_exponential);
    check(S_EXP, k_odd, 1, CT_F64, false, false, 4, CT_OP_exponential);
}

int main(void) {
    const char *names[16];
    int n = ct_opencl_devices(names, 16);
    if (n <= 0) printf("test_opencl_random: skipped: %s\n", ct_last_error());
    ct_clear_error();
    g_have = n > 0;
    g_dev = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(uniform),           cmocka_unit_test(normal),      cmocka_unit_test(integers),
        cmocka_unit_test(bernoulli_dropout), cmocka_unit_test(exponential),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
