/* test_matmul_precision.c -- ct_set_float32_matmul_precision /
 * ct_get_float32_matmul_precision (torch.set_float32_matmul_precision):
 *   - default "highest"; set/get round trip; bad input refused with the
 *     setting unchanged;
 *   - under each setting, the max error of f32 matmul and conv2d against a
 *     float64 oracle (the same products summed in double) is within torch's
 *     error under that setting on the same inputs (tests/fixtures/
 *     matmul_precision.txt, tools/fixtures/gen_matmul_precision.py: the
 *     inputs come from the same LCG on both sides).  Margin: 1.5x torch's
 *     error -- both are f32 roundings of sums in different orders, whose
 *     max errors spread by tens of percent around each other;
 *   - on a CPU without native bf16 dot products (like torch) "high" and
 *     "medium" give the bits of "highest". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "test_util.h"

static const char *const k_prec[3] = {"highest", "high", "medium"};

static void test_setting(void **state) {
    (void)state;
    assert_string_equal(ct_get_float32_matmul_precision(), "highest");
    for (int k = 2; k >= 0; k--) {
        assert_int_equal(ct_set_float32_matmul_precision(k_prec[k]), CT_OK);
        assert_string_equal(ct_get_float32_matmul_precision(), k_prec[k]);
    }
    assert_int_equal(ct_set_float32_matmul_precision("medium"), CT_OK);
    assert_int_equal(ct_set_float32_matmul_precision("low"), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "invalid precision \"low\""));
    ct_clear_error();
    assert_int_equal(ct_set_float32_matmul_precision(NULL), CT_ERR_ARG);
    ct_clear_error();
    assert_int_equal(ct_set_float32_matmul_precision("Highest"), CT_ERR_ARG);
    ct_clear_error();
    assert_string_equal(ct_get_float32_matmul_precision(), "medium");
    assert_int_equal(ct_set_float32_matmul_precision("highest"), CT_OK);
}

/* the generator of gen_matmul_precision.py */
static void lcg_fill(unsigned seed, float *p, int64_t n, unsigned *state) {
    unsigned r = state ? *state : seed;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        p[i] = (float)((double)(r >> 8) / 16777216.0 * 2.0 - 1.0);
    }
    if (state) *state = r;
}

static ct_tensor *from_floats(const float *v, const int64_t *shape, int nd) {
    ct_tensor *t = ct_empty(shape, nd, CT_F32);
    assert_non_null(t);
    memcpy(ct_data_ptr(t), v, sizeof(float) * (size_t)ct_numel(t));
    return t;
}

static double max_err(ct_tensor *r, const double *ref, int64_t n) {
    ct_tensor *c = ct_contiguous(r);
    assert_non_null(c);
    const float *p = ct_data_ptr(c);
    double e = 0;
    for (int64_t i = 0; i < n; i++) e = fmax(e, fabs((double)p[i] - ref[i]));
    return e;
}

static void check_case(const char *what, ct_tensor *(*run)(ct_tensor *, ct_tensor *), ct_tensor *a,
                       ct_tensor *b, const double *ref, int64_t n, const double *terr) {
    float *first = NULL;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ct_set_float32_matmul_precision(k_prec[k]), CT_OK);
        ct_tensor *r = ct_contiguous(run(a, b));
        assert_non_null(r);
        double e = max_err(r, ref, n);
        printf("  %s %-7s: ctorch max err %.3g, torch %.3g\n", what, k_prec[k], e, terr[k]);
        if (!(e <= 1.5 * terr[k]))
            fail_msg("%s under \"%s\": error %.3g above torch's %.3g", what, k_prec[k], e, terr[k]);
        if (!ct__cpu_has_bf16_dot()) {
            if (k == 0) {
                first = malloc(sizeof(float) * (size_t)n);
                assert_non_null(first);
                memcpy(first, ct_data_ptr(r), sizeof(float) * (size_t)n);
            } else if (memcmp(first, ct_data_ptr(r), sizeof(float) * (size_t)n)) {
                fail_msg("%s: \"%s\" differs from \"highest\" on a CPU without bf16 dot products",
                         what, k_prec[k]);
            }
        }
    }
    free(first);
    assert_int_equal(ct_set_float32_matmul_precision("highest"), CT_OK);
}

static ct_tensor *run_mm(ct_tensor *a, ct_tensor *b) { return ct_matmul(a, b); }
static int64_t g_pad;
static ct_tensor *run_conv(ct_tensor *x, ct_tensor *w) {
    return ct_conv2d(x, w, NULL, (int64_t[]){1, 1}, (int64_t[]){g_pad, g_pad}, (int64_t[]){1, 1}, 1);
}

static void test_error_within_torch(void **state) {
    (void)state;
    FILE *f = fopen(CT_FIXTURE_DIR "/matmul_precision.txt", "r");
    assert_non_null(f);
    char line[1024];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        SCOPE_BEGIN;
        char op[32];
        unsigned seed;
        double terr[3];
        long long d[7];
        if (sscanf(line, "mm %u %lld %lld %lld %lf %lf %lf", &seed, &d[0], &d[1], &d[2], &terr[0],
                   &terr[1], &terr[2]) == 7) {
            int64_t M = d[0], K = d[1], N = d[2];
            float *av = malloc(sizeof(float) * (size_t)(M * K)), *bv = malloc(sizeof(float) * (size_t)(K * N));
            double *ref = calloc((size_t)(M * N), sizeof(double));
            assert_true(av && bv && ref);
            unsigned st = seed;
            lcg_fill(seed, av, M * K, &st);
            lcg_fill(seed, bv, K * N, &st);
            for (int64_t i = 0; i < M; i++)
                for (int64_t k = 0; k < K; k++)
                    for (int64_t j = 0; j < N; j++) ref[i * N + j] += (double)av[i * K + k] * (double)bv[k * N + j];
            snprintf(op, sizeof op, "mm %lldx%lldx%lld", d[0], d[1], d[2]);
            check_case(op, run_mm, from_floats(av, (int64_t[]){M, K}, 2), from_floats(bv, (int64_t[]){K, N}, 2),
                       ref, M * N, terr);
            free(av); free(bv); free(ref);
            cases++;
        } else if (sscanf(line, "conv2d %u %lld %lld %lld %lld %lld %lld %lld %lf %lf %lf", &seed, &d[0],
                          &d[1], &d[2], &d[3], &d[4], &d[5], &d[6], &terr[0], &terr[1], &terr[2]) == 11) {
            int64_t N = d[0], C = d[1], H = d[2], W = d[3], Co = d[4], k = d[5], p = d[6];
            int64_t Ho = H + 2 * p - k + 1, Wo = W + 2 * p - k + 1;
            float *xv = malloc(sizeof(float) * (size_t)(N * C * H * W));
            float *wv = malloc(sizeof(float) * (size_t)(Co * C * k * k));
            double *ref = calloc((size_t)(N * Co * Ho * Wo), sizeof(double));
            assert_true(xv && wv && ref);
            unsigned st = seed;
            lcg_fill(seed, xv, N * C * H * W, &st);
            lcg_fill(seed, wv, Co * C * k * k, &st);
            for (int64_t n = 0; n < N; n++)
                for (int64_t o = 0; o < Co; o++)
                    for (int64_t y = 0; y < Ho; y++)
                        for (int64_t x = 0; x < Wo; x++) {
                            double s = 0;
                            for (int64_t c = 0; c < C; c++)
                                for (int64_t i = 0; i < k; i++)
                                    for (int64_t j = 0; j < k; j++) {
                                        int64_t yy = y + i - p, xx = x + j - p;
                                        if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                                        s += (double)xv[((n * C + c) * H + yy) * W + xx] *
                                             (double)wv[((o * C + c) * k + i) * k + j];
                                    }
                            ref[((n * Co + o) * Ho + y) * Wo + x] = s;
                        }
            g_pad = p;
            check_case("conv2d", run_conv, from_floats(xv, (int64_t[]){N, C, H, W}, 4),
                       from_floats(wv, (int64_t[]){Co, C, k, k}, 4), ref, N * Co * Ho * Wo, terr);
            free(xv); free(wv); free(ref);
            cases++;
        } else {
            fail_msg("bad fixture line: %s", line);
        }
        SCOPE_END;
    }
    fclose(f);
    assert_int_equal(cases, 3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setting),
        cmocka_unit_test(test_error_within_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
