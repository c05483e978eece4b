/* test_reduce.c -- reductions, scans, sorting: bad input, NULL propagation,
 * accuracy of large sums, parallel paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include <ctorch/ctorch.h>

#define BEGIN                                      \
    int64_t live0 = ct_live_tensors();             \
    ct_scope s = ct_scope_begin();                 \
    ct_clear_error();
#define END                                        \
    ct_scope_end(s);                               \
    assert_int_equal(ct_live_tensors(), live0);

#define ERR_IS(code, msg)                                            \
    do {                                                             \
        assert_int_equal(ct_last_error_code(), code);                \
        if (!strstr(ct_last_error(), msg)) {                         \
            print_error("error was: %s\n", ct_last_error());         \
            fail();                                                  \
        }                                                            \
    } while (0)

static void test_null_propagation(void **state) {
    (void)state;
    BEGIN
    ct_tensor *bad = ct_sum(ct_ones(CT_SHAPE(2, 3), CT_F32), CT_SHAPE(5), false);
    assert_null(bad);
    ct_status first = ct_last_error_code();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_tensor *t = NULL, *v = (ct_tensor *)1, *i = (ct_tensor *)1, *w = (ct_tensor *)1;
    assert_null(ct_sum(bad, NULL, 0, false));
    assert_null(ct_sum_dtype(bad, NULL, 0, false, CT_F64));
    assert_null(ct_mean(bad, NULL, 0, false));
    assert_null(ct_prod(bad, NULL, 0, false));
    assert_null(ct_amax(bad, NULL, 0, false));
    assert_null(ct_all(bad, NULL, 0, false));
    assert_null(ct_count_nonzero(bad, NULL, 0));
    assert_null(ct_logsumexp(bad, NULL, 0, false));
    assert_null(ct_var(bad, NULL, 0, 1, false));
    assert_null(ct_norm(bad, 2, NULL, 0, false));
    assert_null(ct_max(bad));
    assert_null(ct_argmax(bad, 0, false));
    assert_null(ct_softmax(bad, 0));
    assert_null(ct_cumsum(bad, 0));
    assert_null(ct_median(bad));
    assert_null(ct_argsort(bad, 0, false, false));
    assert_int_not_equal(ct_max_dim(bad, 0, false, &v, &i), CT_OK);
    assert_null(v);
    assert_null(i);
    v = i = (ct_tensor *)1;
    assert_int_not_equal(ct_sort(bad, 0, false, false, &v, &i), CT_OK);
    assert_null(v);
    assert_null(i);
    assert_int_not_equal(ct_unique(bad, true, true, &v, &i, &w), CT_OK);
    assert_null(w);
    assert_int_not_equal(ct_var_mean(bad, NULL, 0, 1, false, &v, &i), CT_OK);
    assert_int_not_equal(ct_topk(bad, 1, 0, true, true, &v, &i), CT_OK);
    assert_int_not_equal(ct_cummax(bad, 0, &v, &i), CT_OK);
    (void)t;
    assert_int_equal(ct_last_error_code(), first);
    assert_string_equal(ct_last_error(), msg);
    END
}

static void test_bad_dims(void **state) {
    (void)state;
    BEGIN
    ct_tensor *x = ct_ones(CT_SHAPE(2, 3), CT_F32);
    assert_null(ct_sum(x, CT_SHAPE(2), false));
    ERR_IS(CT_ERR_INDEX, "sum: dim 2 out of range for a 2-D tensor");
    assert_null(ct_mean(x, CT_SHAPE(-3), false));
    ERR_IS(CT_ERR_INDEX, "mean: dim -3 out of range");
    assert_null(ct_sum(x, CT_SHAPE(1, -1), false));
    ERR_IS(CT_ERR_ARG, "sum: dim 1 appears multiple times in the list of dims");
    assert_null(ct_amax(x, CT_SHAPE(0, 0), false));
    ERR_IS(CT_ERR_ARG, "appears multiple times");
    assert_null(ct_softmax(x, 2));
    ERR_IS(CT_ERR_INDEX, "softmax: dim 2 out of range");
    assert_null(ct_cumsum(x, -3));
    ERR_IS(CT_ERR_INDEX, "cumsum: dim -3 out of range");
    ct_tensor *v = NULL, *i = NULL;
    assert_int_equal(ct_max_dim(x, 5, false, &v, &i), CT_ERR_INDEX);
    ERR_IS(CT_ERR_INDEX, "max: dim 5 out of range");
    assert_int_equal(ct_sort(x, 2, false, false, &v, &i), CT_ERR_INDEX);
    assert_int_equal(ct_topk(x, 4, 1, true, true, &v, &i), CT_ERR_INDEX);
    ERR_IS(CT_ERR_INDEX, "topk(): selected index k out of range");
    assert_int_equal(ct_kthvalue(x, 0, 1, false, &v, &i), CT_ERR_INDEX);
    ERR_IS(CT_ERR_INDEX, "kthvalue(): selected number k out of range for dimension 1");
    assert_null(ct_argmax(x, 3, false));
    ERR_IS(CT_ERR_INDEX, "argmax: dim 3 out of range");
    END
}

static void test_bad_dtypes(void **state) {
    (void)state;
    BEGIN
    ct_tensor *xi = ct_ones(CT_SHAPE(2, 3), CT_I64);
    assert_null(ct_mean(xi, NULL, 0, false));
    ERR_IS(CT_ERR_DTYPE, "mean(): could not infer output dtype. Input dtype must be either a "
                         "floating point or complex dtype. Got: Long");
    assert_null(ct_var(xi, NULL, 0, 1, false));
    ERR_IS(CT_ERR_DTYPE, "var: input dtype should be either floating point or complex. Got Long");
    assert_null(ct_norm(xi, 2, NULL, 0, false));
    ERR_IS(CT_ERR_DTYPE, "norm: input dtype should be either floating point");
    assert_null(ct_softmax(xi, 0));
    ERR_IS(CT_ERR_DTYPE, "softmax: not implemented for 'Long'");
    assert_null(ct_log_softmax(xi, 0));
    ERR_IS(CT_ERR_DTYPE, "log_softmax");
    assert_null(ct_logcumsumexp(xi, 0));
    ERR_IS(CT_ERR_DTYPE, "logcumsumexp");
    ct_tensor *xc = ct_zeros(CT_SHAPE(2), CT_C64);
    assert_null(ct_sum(xc, NULL, 0, false));
    ERR_IS(CT_ERR_DTYPE, "complex");
    END
}

static void test_empty(void **state) {
    (void)state;
    BEGIN
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_F32);
    assert_null(ct_amax(e, CT_SHAPE(0), false));
    ERR_IS(CT_ERR_INDEX, "amax(): Expected reduction dim 0 to have non-zero size.");
    assert_null(ct_amax(e, NULL, 0, false));
    ERR_IS(CT_ERR_ARG, "amax(): Expected reduction dim to be specified for input.numel() == 0");
    assert_null(ct_max(e));
    ERR_IS(CT_ERR_ARG, "max(): Expected reduction dim to be specified for input.numel() == 0. "
                       "Specify the reduction dim with the 'dim' argument.");
    ct_tensor *v, *i;
    assert_int_equal(ct_max_dim(e, 0, false, &v, &i), CT_ERR_INDEX);
    ERR_IS(CT_ERR_INDEX, "max(): Expected reduction dim 0 to have non-zero size.");
    assert_int_equal(ct_aminmax(e, CT_DIM_NONE, false, &v, &i), CT_ERR_ARG);
    ERR_IS(CT_ERR_ARG, "aminmax(): cannot compute aminmax over an empty dimension");
    assert_int_equal(ct_median_dim(e, 0, false, &v, &i), CT_ERR_INDEX);
    ERR_IS(CT_ERR_INDEX, "median(): Expected reduction dim 0 to have non-zero size.");
    /* defined on empty: sum 0, prod 1, amax over a non-empty dim */
    ct_tensor *s0 = ct_sum(e, NULL, 0, false), *p0 = ct_prod(e, CT_SHAPE(0), false);
    assert_non_null(s0);
    assert_true(ct_item(s0) == 0.0);
    assert_int_equal(ct_numel(p0), 3);
    assert_true(ct_item(ct_select(p0, 0, 2)) == 1.0);
    ct_tensor *a1 = ct_amax(e, CT_SHAPE(1), false);
    assert_non_null(a1);
    assert_int_equal(ct_numel(a1), 0);
    END
}

/* ACCURACY: 10^7 float32 ones sum to exactly 10^7 (and with non-unit stride). */
static void test_sum_exact(void **state) {
    (void)state;
    BEGIN
    ct_tensor *x = ct_ones(CT_SHAPE(10000000), CT_F32);
    ct_tensor *sm = ct_sum(x, NULL, 0, false);
    assert_non_null(sm);
    assert_int_equal(ct_get_dtype(sm), CT_F32);
    assert_true(ct_item(sm) == 1.0e7);
    ct_tensor *mn = ct_mean(x, NULL, 0, false);
    assert_true(ct_item(mn) == 1.0);
    ct_tensor *y = ct_ones(CT_SHAPE(2, 10000000), CT_F32);
    ct_tensor *col = ct_select(y, 0, 1);
    assert_true(ct_item(ct_sum(col, NULL, 0, false)) == 1.0e7);
    ct_tensor *r = ct_sum(y, CT_SHAPE(1), false);
    assert_true(ct_item(ct_select(r, 0, 0)) == 1.0e7);
    /* int sum exact */
    ct_tensor *xi = ct_ones(CT_SHAPE(3000000), CT_I32);
    ct_tensor *si = ct_sum(xi, NULL, 0, false);
    assert_int_equal(ct_get_dtype(si), CT_I64);
    assert_int_equal(ct_item_int(si), 3000000);
    END
}

/* Large inputs take the parallel paths; compare with facts we know. */
static void test_parallel_paths(void **state) {
    (void)state;
    BEGIN
    int64_t n = 1 << 20;
    ct_tensor *x = ct_arange(0, (double)n, 1, CT_F64);
    ct_tensor *mx = ct_max(x), *mi = ct_min(x);
    assert_true(ct_item(mx) == (double)(n - 1));
    assert_true(ct_item(mi) == 0.0);
    assert_int_equal(ct_item_int(ct_argmax(x, CT_DIM_NONE, false)), n - 1);
    assert_true(ct_item(ct_sum(x, NULL, 0, false)) == (double)n * (double)(n - 1) / 2);
    ct_tensor *m = ct_reshape(x, CT_SHAPE(1024, 1024));
    ct_tensor *cs = ct_cumsum(m, 1);
    assert_true(ct_item(ct_select(ct_select(cs, 0, 1), 0, 1023)) == 1024.0 * 1024 + 1023.0 * 1024 / 2);
    ct_tensor *sm = ct_softmax(m, 0);
    ct_tensor *tot = ct_sum(sm, CT_SHAPE(0), false);
    assert_true(fabs(ct_item(ct_select(tot, 0, 7)) - 1.0) < 1e-12);
    ct_tensor *v, *i;
    assert_int_equal(ct_sort(m, 1, true, true, &v, &i), CT_OK);
    assert_int_equal(ct_item_int(ct_select(ct_select(i, 0, 3), 0, 0)), 1023);
    assert_int_equal(ct_unique(x, false, false, &v, NULL, NULL), CT_OK);
    assert_int_equal(ct_numel(v), n);
    END
}

static void test_optional_outputs(void **state) {
    (void)state;
    BEGIN
    double d[] = {3, 1, 2, 5, 4, 0};
    ct_tensor *x = ct_from_doubles(d, CT_SHAPE(2, 3), CT_F32);
    ct_tensor *v = NULL;
    assert_int_equal(ct_max_dim(x, 1, false, &v, NULL), CT_OK);
    assert_true(ct_item(ct_select(v, 0, 1)) == 5.0);
    ct_tensor *i = NULL;
    assert_int_equal(ct_min_dim(x, 1, true, NULL, &i), CT_OK);
    assert_int_equal(ct_ndim(i), 2);
    assert_int_equal(ct_item_int(ct_select(ct_select(i, 0, 1), 0, 0)), 2);
    ct_tensor *u = NULL, *c = NULL;
    assert_int_equal(ct_unique(x, false, true, &u, NULL, &c), CT_OK);
    assert_int_equal(ct_numel(u), 6);
    assert_int_equal(ct_numel(c), 6);
    END
}

/* Outside any scope the caller owns results (composite paths included). */
static void test_no_scope(void **state) {
    (void)state;
    int64_t live0 = ct_live_tensors();
    double d[] = {4, 1, 3, 2};
    ct_tensor *x = ct_from_doubles(d, CT_SHAPE(4), CT_F16);
    ct_tensor *m = ct_median(x);
    assert_non_null(m);
    assert_int_equal(ct_get_dtype(m), CT_F16);
    assert_true(ct_item(m) == 2.0);
    ct_tensor *v = NULL, *i = NULL;
    assert_int_equal(ct_sort(x, 0, true, true, &v, &i), CT_OK);
    assert_true(((const uint16_t *)ct_data_ptr(v))[0] == 0x4400); /* 4.0 in float16 */
    assert_int_equal(((const int64_t *)ct_data_ptr(i))[0], 0);
    ct_tensor *s0 = ct_sum(x, NULL, 0, false);
    assert_true(ct_item(s0) == 10.0);
    ct_release(s0);
    ct_release(v);
    ct_release(i);
    ct_release(m);
    ct_release(x);
    assert_int_equal(ct_live_tensors(), live0);
}

/* f32 max/min/argmax/argmin over long rows (the vectorized 16-lane path
 * with its NaN hand-over and tail) against the scalar rule written out
 * here: the first index of the extreme value, the first NaN winning;
 * random rows salted with ties, +-inf, -0 and NaN at every position class,
 * lengths around the 16-lane blocks; the row sum in pairs against one row
 * at a time (same bits) */
static void test_minmax_long_rows(void **state) {
    (void)state;
    BEGIN
    uint32_t seed = 12345;
#define RNDU() (seed = seed * 1664525u + 1013904223u, seed >> 8)
    const int64_t lens[] = {16, 17, 31, 32, 33, 47, 64, 100, 257};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        int64_t n = lens[li], rows = 40;
        ct_tensor *x = ct_zeros(CT_SHAPE(rows, n), CT_F32);
        assert_non_null(x);
        float *xp = ct_data_ptr(x);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < n; j++) {
                uint32_t u = RNDU() % 1000;
                float v = (float)(RNDU() % 7) - 3.0f; /* few values: many ties */
                if (u < 8 && r % 4 == 1) v = NAN;
                else if (u < 12) v = INFINITY;
                else if (u < 16) v = -INFINITY;
                else if (u < 40) v = -0.0f;
                xp[r * n + j] = v;
            }
        ct_tensor *am = ct_argmax(x, 1, false), *an = ct_argmin(x, 1, false), *mv, *mi;
        assert_int_equal(ct_max_dim(x, 1, false, &mv, &mi), CT_OK);
        assert_non_null(am);
        assert_non_null(an);
        const int64_t *pam = ct_data_ptr(am), *pan = ct_data_ptr(an), *pmi = ct_data_ptr(mi);
        const float *pmv = ct_data_ptr(mv);
        for (int64_t r = 0; r < rows; r++) {
            const float *row = xp + r * n;
            int64_t bmax = 0, bmin = 0;
            for (int64_t j = 1; j < n; j++) {
                if (row[bmax] != row[bmax]) break;
                if (row[j] != row[j]) { bmax = bmin = j; break; }
                if (row[j] > row[bmax]) bmax = j;
                if (row[j] < row[bmin]) bmin = j;
            }
            if (row[0] != row[0]) bmax = bmin = 0;
            assert_int_equal(pam[r], bmax);
            assert_int_equal(pan[r], bmin);
            assert_int_equal(pmi[r], bmax);
            assert_memory_equal(&pmv[r], &row[bmax], sizeof(float));
        }
        /* sums: rows in pairs vs each row alone */
        int64_t d = 1;
        ct_tensor *sm = ct_sum(x, &d, 1, false);
        assert_non_null(sm);
        for (int64_t r = 0; r < rows; r++) {
            ct_tensor *one = ct_sum(ct_narrow(x, 0, r, 1), &d, 1, false);
            assert_non_null(one);
            assert_memory_equal((const float *)ct_data_ptr(sm) + r, ct_data_ptr(one), sizeof(float));
        }
    }
#undef RNDU
    END
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_propagation), cmocka_unit_test(test_bad_dims),
        cmocka_unit_test(test_bad_dtypes),       cmocka_unit_test(test_empty),
        cmocka_unit_test(test_sum_exact),        cmocka_unit_test(test_parallel_paths),
        cmocka_unit_test(test_optional_outputs), cmocka_unit_test(test_no_scope),
        cmocka_unit_test(test_minmax_long_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
