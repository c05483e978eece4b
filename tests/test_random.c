/* test_random.c -- the random family: reproducibility, independence from
 * the thread count, statistics (generous bounds), and every error path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>
#include "test_util.h"

#include "core/random_impl.h" /* the Philox known-answer test */
#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/philox8.h"

#define BEGIN() int64_t live0_ = ct_live_tensors(); ct_scope s_ = ct_scope_begin()
#define END() do { ct_scope_end(s_); assert_int_equal(ct_live_tensors(), live0_); } while (0)

/* Values of t as a malloc'ed double array (logical order). */
static double *values(ct_tensor *t) {
    ct_tensor *c = ct_contiguous(ct_to_dtype(t, CT_F64));
    assert_non_null(c);
    int64_t n = ct_numel(c);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    memcpy(v, ct_data_ptr(c), sizeof(double) * (size_t)n);
    return v;
}

static double vred(ct_tensor *t, int kind) { /* 0 min, 1 max, 2 sum */
    double *v = values(t);
    int64_t n = ct_numel(t);
    double r = kind == 0 ? INFINITY : kind == 1 ? -INFINITY : 0;
    for (int64_t i = 0; i < n; i++)
        r = kind == 0 ? fmin(r, v[i]) : kind == 1 ? fmax(r, v[i]) : r + v[i];
    free(v);
    return r;
}
#define VMIN(t) vred((t), 0)
#define VMAX(t) vred((t), 1)
#define VSUM(t) vred((t), 2)

static void mean_std(ct_tensor *t, double *mean, double *sd) {
    double *v = values(t);
    int64_t n = ct_numel(t);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    double m = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (v[i] - m) * (v[i] - m);
    *mean = m;
    *sd = sqrt(s2 / (double)(n - 1));
    free(v);
}

/* Known-answer vectors of Philox 4x32-10 (Random123's kat_vectors). */
static void test_philox_kat(void **state) {
    (void)state;
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int k = 0; k < 3; k++) {
        ct_philox_block b = ct__philox4x32(v[k], v[k] + 4);
        for (int j = 0; j < 4; j++) assert_int_equal(b.v[j], v[k][6 + j]);
    }
}

static void test_seed_reproducible(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(42);
    assert_true(ct_initial_seed() == 42);
    ct_tensor *a = ct_rand(CT_SHAPE(7, 13), CT_F32);
    ct_tensor *a2 = ct_randn(CT_SHAPE(101), CT_F64);
    ct_tensor *a3 = ct_randint(-5, 9, CT_SHAPE(33), CT_I64);
    ct_tensor *a4 = ct_randperm(50, CT_I64);
    ct_manual_seed(42);
    ct_tensor *b = ct_rand(CT_SHAPE(7, 13), CT_F32);
    ct_tensor *b2 = ct_randn(CT_SHAPE(101), CT_F64);
    ct_tensor *b3 = ct_randint(-5, 9, CT_SHAPE(33), CT_I64);
    ct_tensor *b4 = ct_randperm(50, CT_I64);
    assert_int_equal(ct_equal(a, b), 1);
    assert_int_equal(ct_equal(a2, b2), 1);
    assert_int_equal(ct_equal(a3, b3), 1);
    assert_int_equal(ct_equal(a4, b4), 1);
    /* successive draws differ */
    ct_tensor *c = ct_rand(CT_SHAPE(7, 13), CT_F32);
    assert_int_equal(ct_equal(a, c), 0);
    ct_manual_seed(43);
    ct_tensor *d = ct_rand(CT_SHAPE(7, 13), CT_F32);
    assert_int_equal(ct_equal(a, d), 0);
    assert_true(ct_initial_seed() == 43);
    /* the same draws through the in-place form */
    ct_manual_seed(42);
    ct_tensor *e = ct_uniform_(ct_empty(CT_SHAPE(7, 13), CT_F32), 0, 1);
    assert_int_equal(ct_equal(a, e), 1);
    END();
}

static void test_thread_independence(void **state) {
    (void)state;
    BEGIN();
    int nth = ct_get_num_threads();
    ct_tensor *r[2][6];
    for (int k = 0; k < 2; k++) {
        ct_set_num_threads(k + 1);
        ct_manual_seed(7);
        r[k][0] = ct_rand(CT_SHAPE(1000000), CT_F32);
        r[k][1] = ct_randn(CT_SHAPE(1000000), CT_F64);
        r[k][2] = ct_randint(0, 1000, CT_SHAPE(1000000), CT_I32);
        r[k][3] = ct_bernoulli_(ct_empty(CT_SHAPE(1000000), CT_U8), 0.5);
        r[k][4] = ct_exponential_(ct_empty(CT_SHAPE(1000000), CT_F32), 2.0);
        r[k][5] = ct_multinomial(ct_ones(CT_SHAPE(1000, 100), CT_F32), 50, false);
    }
    ct_set_num_threads(nth);
    for (int j = 0; j < 6; j++) assert_int_equal(ct_equal(r[0][j], r[1][j]), 1);
    END();
}

static void test_uniform_normal_stats(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(1);
    double m, sd;
    ct_tensor *u = ct_rand(CT_SHAPE(1000, 1000), CT_F32);
    assert_int_equal(ct_get_dtype(u), CT_F32);
    mean_std(u, &m, &sd);
    assert_true(fabs(m - 0.5) < 0.005);
    assert_true(fabs(sd - sqrt(1.0 / 12)) < 0.005);
    assert_true(VMIN((u)) >= 0.0 && VMAX((u)) < 1.0);
    ct_tensor *u64 = ct_rand(CT_SHAPE(100000), CT_F64);
    mean_std(u64, &m, &sd);
    assert_true(fabs(m - 0.5) < 0.01);
    ct_tensor *n = ct_randn(CT_SHAPE(1000000), CT_F32);
    mean_std(n, &m, &sd);
    assert_true(fabs(m) < 0.005);
    assert_true(fabs(sd - 1) < 0.005);
    ct_tensor *n2 = ct_normal_(ct_empty(CT_SHAPE(100000), CT_F64), 3.0, 2.0);
    mean_std(n2, &m, &sd);
    assert_true(fabs(m - 3) < 0.05);
    assert_true(fabs(sd - 2) < 0.05);
    ct_tensor *u2 = ct_uniform_(ct_empty(CT_SHAPE(100000), CT_F32), -2.0, 6.0);
    mean_std(u2, &m, &sd);
    assert_true(fabs(m - 2) < 0.05);
    assert_true(VMIN((u2)) >= -2.0 && VMAX((u2)) < 6.0);
    ct_tensor *e = ct_exponential_(ct_empty(CT_SHAPE(100000), CT_F64), 4.0);
    mean_std(e, &m, &sd);
    assert_true(fabs(m - 0.25) < 0.01);
    assert_true(VMIN((e)) >= 0.0);
    /* half precision, 0-dim, 0-size, like */
    ct_tensor *h = ct_rand(CT_SHAPE(1000), CT_F16);
    assert_int_equal(ct_get_dtype(h), CT_F16);
    mean_std(h, &m, &sd);
    assert_true(fabs(m - 0.5) < 0.05);
    ct_tensor *bh = ct_randn(CT_SHAPE(1000), CT_BF16);
    assert_int_equal(ct_get_dtype(bh), CT_BF16);
    ct_tensor *z = ct_randn(CT_SCALAR_SHAPE, CT_F64);
    assert_int_equal(ct_ndim(z), 0);
    assert_true(isfinite(ct_item(z)));
    ct_tensor *empty = ct_rand(CT_SHAPE(0, 3), CT_F32);
    assert_int_equal(ct_numel(empty), 0);
    ct_tensor *like = ct_rand_like(ct_zeros(CT_SHAPE(2, 5), CT_F64));
    assert_int_equal(ct_get_dtype(like), CT_F64);
    assert_int_equal(ct_size(like, 1), 5);
    ct_tensor *likn = ct_randn_like(ct_zeros(CT_SHAPE(4), CT_F32));
    assert_int_equal(ct_numel(likn), 4);
    END();
}

static void test_inplace_noncontiguous(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(3);
    ct_tensor *base = ct_full(CT_SHAPE(6, 8), 5.0, CT_F32);
    ct_tensor *v = ct_slice(ct_t(base), 0, 0, INT64_MAX, 2); /* [4, 6], strided */
    assert_non_null(ct_uniform_(v, 0.0, 1.0));
    double *d = values(base);
    int touched = 0;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 8; j++) {
            double x = d[i * 8 + j];
            if (j % 2 == 0) { assert_true(x >= 0 && x < 1); touched++; }
            else assert_true(x == 5.0);
        }
    assert_int_equal(touched, 24);
    free(d);
    /* the same values as a contiguous draw with the same counters */
    ct_manual_seed(3);
    ct_tensor *ref = ct_rand(CT_SHAPE(4, 6), CT_F32);
    assert_int_equal(ct_equal(ref, v), 1);
    /* random_ / bernoulli_ / normal_ on strided views of other dtypes */
    ct_tensor *ib = ct_zeros(CT_SHAPE(10, 10), CT_I16);
    ct_tensor *iv = ct_t(ib);
    assert_non_null(ct_random_(iv, 3, 7));
    double *q = values(ib);
    for (int i = 0; i < 100; i++) assert_true(q[i] >= 3 && q[i] < 7);
    free(q);
    ct_tensor *hb = ct_zeros(CT_SHAPE(3, 4), CT_F16);
    assert_non_null(ct_normal_(ct_t(hb), 0, 1));
    assert_non_null(ct_bernoulli_(ct_t(ct_zeros(CT_SHAPE(5, 5), CT_BOOL)), 0.5));
    END();
}

static void test_randint(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(11);
    ct_tensor *r = ct_randint(-3, 7, CT_SHAPE(100000), CT_I64);
    assert_int_equal(ct_get_dtype(r), CT_I64);
    double *v = values(r);
    int cnt[10] = {0};
    for (int i = 0; i < 100000; i++) {
        assert_true(v[i] >= -3 && v[i] < 7 && v[i] == floor(v[i]));
        cnt[(int)v[i] + 3]++;
    }
    for (int k = 0; k < 10; k++) assert_true(cnt[k] > 9000 && cnt[k] < 11000);
    free(v);
    const ct_dtype dts[] = {CT_I32, CT_U8, CT_I8, CT_I16, CT_F32, CT_F64, CT_F16, CT_BOOL};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        int64_t lo = dts[k] == CT_BOOL ? 0 : (dts[k] == CT_U8 ? 10 : -20);
        int64_t hi = dts[k] == CT_BOOL ? 2 : 100;
        ct_tensor *t = ct_randint(lo, hi, CT_SHAPE(50, 20), dts[k]);
        assert_non_null(t);
        assert_int_equal(ct_get_dtype(t), dts[k]);
        double *w = values(t);
        for (int i = 0; i < 1000; i++) assert_true(w[i] >= lo && w[i] < hi);
        free(w);
    }
    /* full int64 range and a huge range */
    assert_non_null(ct_randint(INT64_MIN, INT64_MAX, CT_SHAPE(10), CT_I64));
    ct_tensor *one = ct_randint(5, 6, CT_SHAPE(20), CT_I64);
    assert_true(VMIN((one)) == 5 && VMAX((one)) == 5);
    END();
}

/* eight blocks at once (AVX2) are the scalar generator's blocks, bit for
 * bit, over counters whose low word carries into the high one */
static void test_philox8(void **state) {
    (void)state;
    if (ct__cpu_cap() < CT_CAP_AVX2) skip();
    const uint64_t seeds[3] = {0, 0x123456789abcdef0ull, ~0ull};
    const uint64_t ctrs[4] = {0, 1000, 0xfffffffcull, ~0ull - 3};
    for (int s = 0; s < 3; s++)
        for (int c = 0; c < 4; c++) {
            uint32_t w[4][8];
            ct__philox8_avx2(seeds[s], ctrs[c], w);
            for (int b = 0; b < 8; b++) {
                ct_philox_block r = ct__philox(seeds[s], ctrs[c] + (uint64_t)b);
                for (int j = 0; j < 4; j++) assert_int_equal(w[j][b], r.v[j]);
            }
        }
}

static void test_bernoulli(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(5);
    ct_tensor *p = ct_full(CT_SHAPE(100000), 0.3, CT_F32);
    ct_tensor *b = ct_bernoulli(p);
    assert_int_equal(ct_get_dtype(b), CT_F32);
    double m, sd;
    mean_std(b, &m, &sd);
    assert_true(fabs(m - 0.3) < 0.01);
    double *v = values(b);
    for (int i = 0; i < 100000; i++) assert_true(v[i] == 0 || v[i] == 1);
    free(v);
    /* probabilities 0 and 1 are exact; strided p */
    double pv[6] = {0, 1, 0, 1, 0, 1};
    ct_tensor *pt = ct_t(ct_from_doubles(pv, CT_SHAPE(3, 2), CT_F64));
    ct_tensor *bt = ct_bernoulli(pt);
    assert_int_equal(ct_get_dtype(bt), CT_F64);
    assert_int_equal(ct_equal(bt, pt), 1);
    ct_tensor *bi = ct_bernoulli_(ct_empty(CT_SHAPE(100000), CT_I64), 0.8);
    mean_std(bi, &m, &sd);
    assert_true(fabs(m - 0.8) < 0.01);
    assert_int_equal(ct_numel(ct_bernoulli(ct_zeros(CT_SHAPE(0), CT_F32))), 0);
    /* one p into float32 / bool / uint8 (the stores without the dtype
     * switch, dropout's masks), a length past whole Philox blocks: the
     * frequency, 0/1 values, neighbours (one block's four words) independent,
     * p = 0 and p = 1 exact */
    const ct_dtype fdts[3] = {CT_F32, CT_BOOL, CT_U8};
    for (int k = 0; k < 3; k++) {
        ct_tensor *f = ct_bernoulli_(ct_empty(CT_SHAPE(100003), fdts[k]), 0.3);
        assert_non_null(f);
        double *fv = values(f);
        double s1 = 0, s2 = 0;
        for (int i = 0; i < 100003; i++) {
            assert_true(fv[i] == 0 || fv[i] == 1);
            s1 += fv[i];
            if (i + 1 < 100003) s2 += fv[i] * fv[i + 1];
        }
        free(fv);
        assert_true(fabs(s1 / 100003 - 0.3) < 0.01);
        assert_true(fabs(s2 / 100002 - 0.09) < 0.01);
        /* the same draws as the generic store (int64) from the same seed */
        ct_manual_seed(9);
        ct_tensor *fa = ct_bernoulli_(ct_empty(CT_SHAPE(1001), fdts[k]), 0.45);
        ct_manual_seed(9);
        ct_tensor *fb = ct_bernoulli_(ct_empty(CT_SHAPE(1001), CT_I64), 0.45);
        assert_int_equal(ct_equal(ct_to_dtype(fa, CT_I64), fb), 1);
        assert_int_equal(ct_equal(ct_bernoulli_(ct_empty(CT_SHAPE(7), fdts[k]), 0.0), ct_zeros(CT_SHAPE(7), fdts[k])), 1);
        assert_int_equal(ct_equal(ct_bernoulli_(ct_empty(CT_SHAPE(7), fdts[k]), 1.0), ct_ones(CT_SHAPE(7), fdts[k])), 1);
    }
    END();
}

static void test_multinomial(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(9);
    double pv[4] = {0.1, 0.2, 0.0, 0.7};
    ct_tensor *p = ct_from_doubles(pv, CT_SHAPE(4), CT_F32);
    ct_tensor *s = ct_multinomial(p, 100000, true);
    assert_int_equal(ct_get_dtype(s), CT_I64);
    assert_int_equal(ct_ndim(s), 1);
    assert_int_equal(ct_size(s, 0), 100000);
    double *v = values(s);
    int cnt[4] = {0};
    for (int i = 0; i < 100000; i++) cnt[(int)v[i]]++;
    free(v);
    assert_int_equal(cnt[2], 0);
    assert_true(abs(cnt[0] - 10000) < 1000);
    assert_true(abs(cnt[1] - 20000) < 1000);
    assert_true(abs(cnt[3] - 70000) < 1000);
    /* without replacement: distinct categories per row; unnormalized weights */
    ct_tensor *w = ct_mul_scalar(ct_rand(CT_SHAPE(20, 10), CT_F64), 5.0);
    ct_tensor *sw = ct_multinomial(w, 10, false);
    assert_int_equal(ct_size(sw, 0), 20);
    assert_int_equal(ct_size(sw, 1), 10);
    double *q = values(sw);
    for (int r = 0; r < 20; r++) {
        int seen[10] = {0};
        for (int j = 0; j < 10; j++) seen[(int)q[r * 10 + j]]++;
        for (int j = 0; j < 10; j++) assert_int_equal(seen[j], 1);
    }
    free(q);
    /* without replacement frequencies of the first draw */
    double pw[3] = {1, 2, 7};
    ct_tensor *p3 = ct_expand(ct_from_doubles(pw, CT_SHAPE(1, 3), CT_F64), CT_SHAPE(30000, 3));
    ct_tensor *f = ct_multinomial(p3, 2, false);
    double *fv = values(f);
    int c0[3] = {0};
    for (int r = 0; r < 30000; r++) {
        c0[(int)fv[r * 2]]++;
        assert_true(fv[r * 2] != fv[r * 2 + 1]);
    }
    free(fv);
    assert_true(abs(c0[0] - 3000) < 400 && abs(c0[2] - 21000) < 600);
    /* zero-probability categories come last without replacement (like torch) */
    double pz[3] = {1, 0, 0};
    ct_tensor *sz = ct_multinomial(ct_from_doubles(pz, CT_SHAPE(3), CT_F32), 1, false);
    assert_int_equal(ct_item_int(sz), 0);
    END();
}

static void test_randperm(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(2);
    ct_tensor *p = ct_randperm(1000, CT_I64);
    assert_int_equal(ct_get_dtype(p), CT_I64);
    double *v = values(p);
    char seen[1000] = {0};
    int fixed = 0;
    for (int i = 0; i < 1000; i++) {
        assert_true(v[i] >= 0 && v[i] < 1000);
        assert_int_equal(seen[(int)v[i]], 0);
        seen[(int)v[i]] = 1;
        fixed += v[i] == i;
    }
    assert_true(fixed < 10); /* a random permutation has ~1 fixed point */
    free(v);
    assert_int_equal(ct_numel(ct_randperm(0, CT_I64)), 0);
    ct_tensor *f = ct_randperm(256, CT_U8);
    assert_int_equal(VSUM(f), 255 * 256 / 2);
    ct_tensor *ff = ct_randperm(100, CT_F32);
    assert_int_equal(ct_get_dtype(ff), CT_F32);
    assert_true(VSUM(ff) == 4950);
    assert_int_equal(ct_numel(ct_randperm(1, CT_I32)), 1);
    END();
}

static void test_dropout(void **state) {
    (void)state;
    BEGIN();
    ct_manual_seed(4);
    ct_tensor *x = ct_ones(CT_SHAPE(200, 500), CT_F32);
    ct_tensor *y = ct_dropout(x, 0.3, true);
    assert_int_equal(ct_get_dtype(y), CT_F32);
    double *v = values(y);
    int zeros = 0;
    for (int i = 0; i < 100000; i++) {
        if (v[i] == 0) zeros++;
        else assert_true(fabs(v[i] - 1.0 / 0.7) < 1e-6);
    }
    free(v);
    assert_true(abs(zeros - 30000) < 1000);
    double m, sd;
    mean_std(y, &m, &sd);
    assert_true(fabs(m - 1) < 0.02);
    /* p = 1: zeros; p = 0: the input values; eval: the input */
    ct_tensor *z = ct_dropout(x, 1.0, true);
    assert_true(VMAX(z) == 0 && VMIN(z) == 0.0);
    assert_int_equal(ct_equal(ct_dropout(x, 0.0, true), x), 1);
    ct_tensor *e = ct_dropout(ct_t(ct_rand(CT_SHAPE(3, 4), CT_F64)), 0.5, false);
    assert_int_equal(ct_get_dtype(e), CT_F64);
    assert_int_equal(ct_size(e, 0), 4);
    ct_tensor *nc = ct_dropout(ct_t(ct_ones(CT_SHAPE(30, 40), CT_F64)), 0.5, true);
    assert_int_equal(ct_size(nc, 0), 40);
    END();
}

static void test_errors(void **state) {
    (void)state;
    BEGIN();
    ct_tensor *f = ct_ones(CT_SHAPE(3), CT_F32);
    ct_tensor *i = ct_ones(CT_SHAPE(3), CT_I64);
    expect_err(ct_rand(CT_SHAPE(2), CT_I64), CT_ERR_DTYPE, "rand: \"check_uniform_bounds\" not implemented for 'int64'");
    expect_err(ct_randn(CT_SHAPE(2), CT_I32), CT_ERR_DTYPE, "randn: \"normal_kernel_cpu\" not implemented for 'int32'");
    expect_err(ct_rand(CT_SHAPE(2), CT_C64), CT_ERR_DTYPE, "rand:");
    expect_err(ct_rand(CT_SHAPE(2, -1), CT_F32), CT_ERR_SHAPE, "rand: negative dimension in shape [2, -1]");
    expect_err(ct_randint(0, 4, CT_SHAPE(-3), CT_I64), CT_ERR_SHAPE, "randint: negative dimension");
    expect_err(ct_rand_like(i), CT_ERR_DTYPE, "not implemented for 'int64'");
    expect_err(ct_randn_like(i), CT_ERR_DTYPE, "normal_kernel_cpu");
    expect_err(ct_randint(5, 5, CT_SHAPE(2), CT_I64), CT_ERR_ARG,
               "randint: random_ expects 'from' to be less than 'to', but got from=5 >= to=5");
    expect_err(ct_randint(0, 300, CT_SHAPE(2), CT_U8), CT_ERR_ARG, "randint: to - 1 is out of bounds for uint8");
    expect_err(ct_randint(-1, 3, CT_SHAPE(2), CT_U8), CT_ERR_ARG, "randint: from is out of bounds for uint8");
    expect_err(ct_randint(0, 3, CT_SHAPE(2), CT_BOOL), CT_ERR_ARG, "to - 1 is out of bounds for bool");
    expect_err(ct_randint(0, 3, CT_SHAPE(2), CT_C128), CT_ERR_DTYPE, "randint:");
    expect_err(ct_random_(i, 5, 2), CT_ERR_ARG, "random_: random_ expects 'from' to be less than 'to', but got from=5 >= to=2");
    expect_err(ct_randperm(-1, CT_I64), CT_ERR_ARG, "randperm: n must be non-negative, got -1");
    expect_err(ct_randperm(300, CT_U8), CT_ERR_ARG, "randperm: n is too large for result tensor type uint8");
    expect_err(ct_randperm(3, CT_BOOL), CT_ERR_DTYPE, "randperm: \"randperm\" not implemented for 'bool'");
    expect_err(ct_bernoulli(i), CT_ERR_DTYPE, "bernoulli: \"bernoulli_tensor_cpu_p_\" not implemented for 'int64'");
    double bad[2] = {1.5, 0};
    expect_err(ct_bernoulli(ct_from_doubles(bad, CT_SHAPE(2), CT_F32)), CT_ERR_ARG,
               "bernoulli: expected all probabilities in [0, 1]");
    expect_err(ct_bernoulli_(f, 1.5), CT_ERR_ARG, "bernoulli_: expects p to be in [0, 1], but got p=1.5");
    expect_err(ct_bernoulli_(f, NAN), CT_ERR_ARG, "bernoulli_: expects p to be in [0, 1]");
    expect_err(ct_uniform_(f, 3, 2), CT_ERR_ARG, "uniform_: expects to return a [from, to) range, but found from=3 > to=2");
    expect_err(ct_uniform_(i, 0, 1), CT_ERR_DTYPE, "uniform_: \"check_uniform_bounds\" not implemented for 'int64'");
    expect_err(ct_normal_(f, 0, -1), CT_ERR_ARG, "normal_: normal expects std >= 0.0, but found std -1");
    expect_err(ct_normal_(i, 0, 1), CT_ERR_DTYPE, "normal_:");
    expect_err(ct_exponential_(f, -1), CT_ERR_ARG, "exponential_: expects lambda >= 0.0, but found lambda=-1");
    expect_err(ct_exponential_(i, 1), CT_ERR_DTYPE, "exponential_: \"exponential_cpu\" not implemented for 'int64'");
    double neg[2] = {1, -1}, zero[2] = {0, 0}, nanp[2] = {1, NAN}, infp[2] = {1, INFINITY};
    const char *msg_bad = "multinomial: probability tensor contains either `inf`, `nan` or element < 0";
    expect_err(ct_multinomial(ct_from_doubles(neg, CT_SHAPE(2), CT_F32), 1, true), CT_ERR_ARG, msg_bad);
    expect_err(ct_multinomial(ct_from_doubles(nanp, CT_SHAPE(2), CT_F32), 1, true), CT_ERR_ARG, msg_bad);
    expect_err(ct_multinomial(ct_from_doubles(infp, CT_SHAPE(2), CT_F64), 1, false), CT_ERR_ARG, msg_bad);
    expect_err(ct_multinomial(ct_from_doubles(zero, CT_SHAPE(1, 2), CT_F32), 1, true), CT_ERR_ARG,
               "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    ct_tensor *two = ct_ones(CT_SHAPE(2), CT_F32);
    expect_err(ct_multinomial(two, 3, false), CT_ERR_ARG,
               "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    expect_err(ct_multinomial(two, 0, true), CT_ERR_ARG, "multinomial: cannot sample n_sample <= 0 samples");
    expect_err(ct_multinomial(ct_ones(CT_SHAPE(2), CT_I64), 1, true), CT_ERR_DTYPE,
               "multinomial: multinomial only supports floating-point dtypes for input, got: int64");
    expect_err(ct_multinomial(ct_ones(CT_SHAPE(2, 2, 2), CT_F32), 1, true), CT_ERR_SHAPE,
               "multinomial: prob_dist must be 1 or 2 dim");
    expect_err(ct_multinomial(ct_ones(CT_SCALAR_SHAPE, CT_F32), 1, true), CT_ERR_SHAPE, "1 or 2 dim");
    expect_err(ct_dropout(f, 1.5, true), CT_ERR_ARG,
               "dropout: dropout probability has to be between 0 and 1, but got 1.5");
    expect_err(ct_dropout(f, -0.1, false), CT_ERR_ARG, "dropout probability has to be between 0 and 1");
    expect_err(ct_dropout(i, 0.5, true), CT_ERR_DTYPE, "dropout: result type float32 can't be cast");
    /* exponential with lambda 0 gives inf, like torch */
    ct_tensor *inf = ct_exponential_(ct_empty(CT_SHAPE(4), CT_F32), 0.0);
    assert_non_null(inf);
    END();
}

static void test_null_propagation(void **state) {
    (void)state;
    BEGIN();
    ct_clear_error();
    ct_tensor *bad = ct_rand(CT_SHAPE(2), CT_I64); /* the first error */
    assert_null(bad);
    ct_status code = ct_last_error_code();
    char first[256];
    snprintf(first, sizeof first, "%s", ct_last_error());
    assert_null(ct_rand_like(bad));
    assert_null(ct_randn_like(bad));
    assert_null(ct_bernoulli(bad));
    assert_null(ct_bernoulli_(bad, 0.5));
    assert_null(ct_multinomial(bad, 1, true));
    assert_null(ct_normal_(bad, 0, 1));
    assert_null(ct_uniform_(bad, 0, 1));
    assert_null(ct_exponential_(bad, 1));
    assert_null(ct_random_(bad, 0, 2));
    assert_null(ct_dropout(bad, 0.5, true));
    assert_null(ct_dropout(bad, 0.5, false));
    assert_int_equal(ct_last_error_code(), code);
    assert_string_equal(ct_last_error(), first);
    ct_clear_error();
    END();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_kat),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_thread_independence),
        cmocka_unit_test(test_uniform_normal_stats),
        cmocka_unit_test(test_inplace_noncontiguous),
        cmocka_unit_test(test_randint),
        cmocka_unit_test(test_philox8), cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_multinomial),
        cmocka_unit_test(test_randperm),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_null_propagation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
