/* test_red_perf.c -- the fast reduction, softmax and normalization kernels
 * (issue 6): the AVX2 expf of src/backend/cpu/vmath.h against libm on a
 * sweep of the float range, the fused softmax / log_softmax / layer_norm /
 * rms_norm forward and backward against PyTorch (tests/fixtures/
 * norm_fused.txt, tools/fixtures/gen_norm_fused.py), the column reductions
 * (sum / mean / amax / argmax over a non-innermost dim, without a copy)
 * against a float64 reference with ties and NaN, gradcheck of the fused
 * paths, and bitwise equality across thread counts. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/cpu/vmath.h"
#include "fixture.h"

/* ---- expf ------------------------------------------------------------------ */
static double ulps(float got, float x) {
    double ref = exp((double)x);
    if (isnan(ref)) return isnan(got) ? 0 : 1e30;
    float rf = (float)ref;
    if (isinf(rf)) return got == rf ? 0 : 1e30;
    float up = nextafterf(fabsf(rf), INFINITY) - fabsf(rf);
    if (rf == 0) up = 1.401298464324817e-45f;
    return fabs((double)got - ref) / up;
}

static void test_expf(void **state) {
    (void)state;
    double worst = 0;
    float at = 0;
    float xs[8], ys[8];
    /* every 251st float bit pattern (about 17 million values), both paths */
    for (uint64_t u = 0; u < (1ull << 32); u += 251 * 8) {
        for (int k = 0; k < 8; k++) {
            uint32_t b = (uint32_t)(u + (uint64_t)k * 251);
            memcpy(&xs[k], &b, 4);
        }
        ct__vexpf(xs, ys, 8);
        for (int k = 0; k < 8; k++) {
            double e = ulps(ys[k], xs[k]);
            float s = ct__expf_s(xs[k]);
            if (!(isnan(s) && isnan(ys[k]))) assert_memory_equal(&s, &ys[k], 4);
            if (e > worst) { worst = e; at = xs[k]; }
        }
    }
    if (worst >= 2.0) fprintf(stderr, "expf: %.3f ulp at %a\n", worst, at);
    assert_true(worst < 2.0);
    /* specials, the overflow / underflow edges and subnormal results */
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72283f, 88.72284f, 88.7229f,
                        -87.33654f, -87.5f, -100.0f, -103.97207f, -103.9721f, -104.0f, 1e-30f,
                        -1e-30f, 1.0f, -1.0f, 0.5f, 10.0f, -10.0f, 80.0f, -80.0f};
    int n = (int)(sizeof sp / sizeof sp[0]);
    for (int i = 0; i < n; i += 8) {
        int m = n - i < 8 ? n - i : 8;
        memcpy(xs, sp + i, sizeof(float) * (size_t)m);
        for (int k = m; k < 8; k++) xs[k] = 0;
        ct__vexpf(xs, ys, 8);
        for (int k = 0; k < m; k++) {
            float want = expf(xs[k]);
            if (isnan(want)) { assert_true(isnan(ys[k])); continue; }
            if (isinf(want) || want == 0) { assert_true(ys[k] == want); continue; }
            assert_true(ulps(ys[k], xs[k]) < 2.0);
        }
    }
}

/* ---- fixtures --------------------------------------------------------------- */
#include "norm_fixture_ops.h"

static const fx_op k_ops[] = {
    {"layer_norm", run_layer_norm, 1e-4, 1e-5},
    {"rms_norm", run_rms_norm, 1e-4, 1e-5},
    {"softmax", run_softmax, 1e-5, 1e-6},
    {"log_softmax", run_log_softmax, 1e-5, 1e-5},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/norm_fused.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- column reductions --------------------------------------------------------- */
/* x [A, R, C] reduced over dim 1, against loops in double */
static void check_cols(int64_t A, int64_t R, int64_t C, int with_nan) {
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(A, R, C), CT_F32);
    assert_non_null(x);
    float *xp = ct_data_ptr(x);
    /* ties: a repeated maximum in column 1; NaN in column 2 */
    for (int64_t a = 0; a < A; a++) {
        xp[a * R * C + 0 * C + 1] = 7.0f;
        xp[a * R * C + (R - 1) * C + 1] = 7.0f;
        if (with_nan) xp[a * R * C + (R / 2) * C + 2] = NAN;
    }
    int64_t d = 1;
    ct_tensor *sm = ct_sum(x, &d, 1, false), *mn = ct_mean(x, &d, 1, true);
    ct_tensor *mx = ct_amax(x, &d, 1, false), *mi = ct_amin(x, &d, 1, false);
    ct_tensor *am = ct_argmax(x, 1, false), *vals, *idx;
    assert_int_equal(ct_max_dim(x, 1, false, &vals, &idx), CT_OK);
    assert_non_null(sm); assert_non_null(mn); assert_non_null(mx); assert_non_null(mi);
    assert_non_null(am);
    const float *ps = ct_data_ptr(sm), *pm = ct_data_ptr(mn), *px = ct_data_ptr(mx);
    const float *pi = ct_data_ptr(mi), *pv = ct_data_ptr(vals);
    const int64_t *pa = ct_data_ptr(am), *pix = ct_data_ptr(idx);
    for (int64_t a = 0; a < A; a++)
        for (int64_t c = 0; c < C; c++) {
            double s = 0;
            float best = xp[a * R * C + c], lo = best;
            int64_t bi = 0;
            int nan = 0;
            for (int64_t r = 0; r < R; r++) {
                float v = xp[a * R * C + r * C + c];
                s += v;
                if (isnan(v)) { if (!nan) { nan = 1; bi = r; } continue; }
                if (!nan && v > best) { best = v; bi = r; }
                if (v < lo) lo = v;
            }
            int64_t o = a * C + c;
            if (nan) {
                assert_true(isnan(ps[o]) && isnan(px[o]) && isnan(pi[o]) && isnan(pv[o]));
            } else {
                assert_true(fabs(ps[o] - s) <= 1e-5 * (1 + fabs(s)));
                assert_true(fabs(pm[o] - s / (double)R) <= 1e-6 * (1 + fabs(s)));
                assert_true(px[o] == best && pv[o] == best && pi[o] == lo);
            }
            assert_int_equal(pa[o], bi);
            assert_int_equal(pix[o], bi);
        }
    ct_scope_end(s);
}

static void test_column_reductions(void **state) {
    (void)state;
    ct_manual_seed(3);
    int64_t live = ct_live_tensors();
    check_cols(1, 67, 45, 0);   /* sum over dim 0 of a matrix, 45 = 5 vectors + tail */
    check_cols(3, 9, 21, 1);    /* middle dim, NaN */
    check_cols(2, 130, 300, 1);
    /* logsumexp / var / std / norm / var_mean over dim 1 (the column path)
     * against the row path on a transposed copy */
    for (int pass = 0; pass < 2; pass++) {
        ct_scope s0 = ct_scope_begin();
        ct_tensor *x = ct_mul_scalar(ct_randn(CT_SHAPE(3, 50, 37), pass ? CT_F64 : CT_F32), 3.0);
        if (pass) ((double *)ct_data_ptr(x))[5 * 37 + 4] = NAN;
        ct_tensor *xt = ct_contiguous(ct_transpose(x, 1, 2));
        int64_t d1 = 1, d2 = 2;
        const double ps[] = {2.0, 1.0, 0.0, 3.0, INFINITY, -INFINITY};
        ct_tensor *col[13], *row[13];
        col[0] = ct_logsumexp(x, &d1, 1, false); row[0] = ct_logsumexp(xt, &d2, 1, false);
        col[1] = ct_var(x, &d1, 1, 1.0, false);  row[1] = ct_var(xt, &d2, 1, 1.0, false);
        col[2] = ct_std(x, &d1, 1, 0.0, true);   row[2] = ct_unsqueeze(ct_std(xt, &d2, 1, 0.0, false), 1);
        for (int k = 0; k < 6; k++) {
            col[3 + k] = ct_norm(x, ps[k], &d1, 1, false);
            row[3 + k] = ct_norm(xt, ps[k], &d2, 1, false);
        }
        ct_tensor *vm[2];
        assert_int_equal(ct_var_mean(x, &d1, 1, 1.0, false, &vm[0], &vm[1]), CT_OK);
        col[9] = vm[1];
        row[9] = ct_mean(xt, &d2, 1, false);
        ct_tensor *xs = ct_mul_scalar(x, 0.3); /* products of 50 values stay finite */
        ct_tensor *xst = ct_contiguous(ct_transpose(xs, 1, 2));
        col[10] = ct_prod(xs, &d1, 1, false);   row[10] = ct_prod(xst, &d2, 1, false);
        col[11] = ct_nansum(x, &d1, 1, false);  row[11] = ct_nansum(xt, &d2, 1, false);
        col[12] = ct_nanmean(x, &d1, 1, false); row[12] = ct_nanmean(xt, &d2, 1, false);
        for (int k = 0; k < 13; k++) {
            assert_non_null(col[k]);
            if (ct_allclose(col[k], row[k], 1e-6, 1e-6, true) != 1) fprintf(stderr, "column reduction %d differs\n", k);
            assert_int_equal(ct_allclose(col[k], row[k], 1e-6, 1e-6, true), 1);
        }
        ct_scope_end(s0);
    }
    /* a non-contiguous input (every other column) also reduces right */
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(33, 64), CT_F64);
    ct_tensor *xs = ct_slice(x, 1, 0, 64, 2);
    int64_t d0 = 0;
    ct_tensor *a = ct_sum(xs, &d0, 1, false), *b = ct_sum(ct_contiguous(xs), &d0, 1, false);
    assert_int_equal(ct_allclose(a, b, 1e-12, 1e-12, false), 1);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- gradcheck of the fused paths (float64) ---------------------------------------- */
static ct_tensor *f_ln(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return ct_layer_norm(in[0], CT_SHAPE(20), in[1], in[2], 1e-5);
}
static ct_tensor *f_rms(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return ct_rms_norm(in[0], CT_SHAPE(4, 5), in[1], 1e-6);
}
static ct_tensor *f_sm_mid(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return ct_softmax(in[0], 1);
}
static ct_tensor *f_lsm(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return ct_log_softmax(in[0], -1);
}

static void test_gradcheck_fused(void **state) {
    (void)state;
    ct_manual_seed(5);
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *x = leaf(ct_randn(CT_SHAPE(3, 20), CT_F64));
    ct_tensor *w = leaf(ct_randn(CT_SHAPE(20), CT_F64)), *b = leaf(ct_randn(CT_SHAPE(20), CT_F64));
    ct_tensor *ln[3] = {x, w, b};
    assert_int_equal(ct_gradcheck(f_ln, NULL, ln, 3, 1e-6, 1e-5, 1e-3), CT_OK);
    assert_int_equal(ct_gradgradcheck(f_ln, NULL, ln, 3, 1e-6, 1e-5, 1e-3), CT_OK);
    ct_tensor *x2 = leaf(ct_randn(CT_SHAPE(2, 4, 5), CT_F64)), *w2 = leaf(ct_randn(CT_SHAPE(4, 5), CT_F64));
    ct_tensor *rm[2] = {x2, w2};
    assert_int_equal(ct_gradcheck(f_rms, NULL, rm, 2, 1e-6, 1e-5, 1e-3), CT_OK);
    assert_int_equal(ct_gradgradcheck(f_rms, NULL, rm, 2, 1e-6, 1e-5, 1e-3), CT_OK);
    ct_tensor *x3 = leaf(ct_randn(CT_SHAPE(2, 5, 3), CT_F64));
    assert_int_equal(ct_gradcheck(f_sm_mid, NULL, &x3, 1, 1e-6, 1e-5, 1e-3), CT_OK);
    assert_int_equal(ct_gradgradcheck(f_sm_mid, NULL, &x3, 1, 1e-6, 1e-5, 1e-3), CT_OK);
    assert_int_equal(ct_gradcheck(f_lsm, NULL, &x3, 1, 1e-6, 1e-5, 1e-3), CT_OK);
    assert_int_equal(ct_gradgradcheck(f_lsm, NULL, &x3, 1, 1e-6, 1e-5, 1e-3), CT_OK);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- the same bits at 1 and 2 threads ------------------------------------------------ */
static void run_all(ct_tensor *x, ct_tensor *w, ct_tensor *b, ct_tensor *g, ct_tensor **r) {
    int64_t d0 = 0, d1 = 1;
    ct_tensor *xl = leaf(x), *wl = leaf(w), *bl = leaf(b);
    ct_tensor *y = ct_layer_norm(xl, CT_SHAPE(ct_size(x, 1)), wl, bl, 1e-5);
    assert_int_equal(ct_backward(y, g, false, false), CT_OK);
    ct_tensor *xs = leaf(x);
    ct_tensor *sm = ct_softmax(xs, 0);
    assert_int_equal(ct_backward(sm, g, false, false), CT_OK);
    r[0] = y; r[1] = ct_grad(xl); r[2] = ct_grad(wl); r[3] = ct_grad(bl);
    r[4] = sm; r[5] = ct_grad(xs);
    r[6] = ct_sum(x, &d0, 1, false); r[7] = ct_sum(x, &d1, 1, false);
    r[8] = ct_log_softmax(x, -1);
    r[9] = ct_argmax(x, 0, false);
}

static void test_thread_invariance(void **state) {
    (void)state;
    ct_manual_seed(9);
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(300, 257), CT_F32), *g = ct_randn(CT_SHAPE(300, 257), CT_F32);
    ct_tensor *w = ct_randn(CT_SHAPE(257), CT_F32), *b = ct_randn(CT_SHAPE(257), CT_F32);
    ct_tensor *r1[10], *r2[10];
    int nth = ct_get_num_threads();
    ct_set_num_threads(1);
    run_all(x, w, b, g, r1);
    ct_set_num_threads(2);
    run_all(x, w, b, g, r2);
    ct_set_num_threads(nth);
    for (int k = 0; k < 10; k++) {
        assert_non_null(r1[k]);
        if (ct_equal(r1[k], r2[k]) != 1) fprintf(stderr, "result %d differs across threads\n", k);
        assert_int_equal(ct_equal(r1[k], r2[k]), 1);
    }
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* f32 layer_norm / softmax / log_softmax outputs of >= 4M elements are
 * written with non-temporal stores: each row must equal the same row
 * computed alone (plain stores), bit for bit */
static void test_streaming_rows(void **state) {
    (void)state;
    ct_manual_seed(10);
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    const int64_t M = 4100, N = 1024; /* 4.2M elements */
    ct_tensor *x = ct_mul_scalar(ct_randn(CT_SHAPE(M, N), CT_F32), 4.0);
    ct_tensor *w = ct_randn(CT_SHAPE(N), CT_F32), *b = ct_randn(CT_SHAPE(N), CT_F32);
    ct_tensor *y[3] = {ct_layer_norm(x, CT_SHAPE(N), w, b, 1e-5), ct_softmax(x, -1),
                       ct_log_softmax(x, -1)};
    const int64_t rows[] = {0, 1, 2047, 2048, M - 1};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        ct_tensor *xr = ct_slice(x, 0, rows[k], rows[k] + 1, 1);
        ct_tensor *yr[3] = {ct_layer_norm(xr, CT_SHAPE(N), w, b, 1e-5), ct_softmax(xr, -1),
                            ct_log_softmax(xr, -1)};
        for (int f = 0; f < 3; f++) {
            assert_non_null(y[f]);
            assert_int_equal(ct_equal(yr[f], ct_slice(y[f], 0, rows[k], rows[k] + 1, 1)), 1);
        }
    }
    /* elementwise outputs whose per-thread chunk is >= 4M elements go
     * through an L1 buffer and non-temporal stores: the same bits as a
     * small slice computed with plain stores (head, middle, unaligned tail) */
    ct_tensor *big = ct_randn(CT_SHAPE(4 * 4100 * 1024 + 3), CT_F32);
    ct_tensor *gb = ct_gelu(big, CT_GELU_NONE), *mb = ct_mul(big, ct_flip(big, CT_SHAPE(0)));
    assert_non_null(gb);
    assert_non_null(mb);
    const int64_t nbig = ct_numel(big), starts[] = {0, nbig / 2 - 7, nbig - 1000};
    for (size_t k = 0; k < sizeof starts / sizeof starts[0]; k++) {
        int64_t a0 = starts[k];
        ct_tensor *xs = ct_slice(big, 0, a0, a0 + 1000, 1);
        ct_tensor *fs = ct_slice(ct_flip(big, CT_SHAPE(0)), 0, a0, a0 + 1000, 1);
        assert_int_equal(ct_equal(ct_gelu(ct_contiguous(xs), CT_GELU_NONE), ct_slice(gb, 0, a0, a0 + 1000, 1)), 1);
        assert_int_equal(ct_equal(ct_mul(ct_contiguous(xs), ct_contiguous(fs)), ct_slice(mb, 0, a0, a0 + 1000, 1)), 1);
    }
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- errors ------------------------------------------------------------------------- */
static void test_errors(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(4, 6), CT_F32);
    assert_null(ct_softmax(x, 2));
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    assert_null(ct_layer_norm(x, CT_SHAPE(5), NULL, NULL, 1e-5));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_null(ct_layer_norm(NULL, CT_SHAPE(6), NULL, NULL, 1e-5));
    assert_null(ct_rms_norm(x, CT_SHAPE(6), ct_randn(CT_SHAPE(5), CT_F32), 1e-6));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    /* an integer input to layer_norm takes the composite and its error */
    ct_scope_end(s);
}

int main(void) {
    /* the streaming stores run here on every CPU, also where the library
     * leaves them off by default (ct__stream_stores); read once, so first */
    setenv("CT_STREAM_STORES", "1", 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_column_reductions),
        cmocka_unit_test(test_gradcheck_fused),
        cmocka_unit_test(test_thread_invariance),
        cmocka_unit_test(test_streaming_rows),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
