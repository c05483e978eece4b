/* test_vexp_avx2.c -- the softmax exp of src/backend/cpu/vmath.h
 * (ct__v8_expf_neg, used by the SDPA kernels) against the general AVX2 expf
 * (ct__v8_expf), and that one against the scalar ct__expf_s (swept against
 * libm in test_red_perf.c).  This file is
 * compiled for AVX2+FMA (a target pragma) and skips on CPUs without them. */
#ifndef __clang__ /* clang ignores it: CMakeLists.txt passes -mavx2 -mfma for this file */
#pragma GCC target("avx2,fma")
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "backend/cpu/vmath.h"

/* the softmax exp (x <= 0): the bits of ct__v8_expf from FLT_MIN up, +0 below */
static void test_expf_neg(void **state) {
    (void)state;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) skip();
    float xs[8], ys[8], zs[8];
    /* every 97th non-positive float down to -104 (about 11 million values) */
    for (uint64_t u = 0x80000000u; u <= 0xC2D00000u; u += 97 * 8) {
        for (int k = 0; k < 8; k++) {
            uint32_t b = (uint32_t)(u + (uint64_t)k * 97);
            memcpy(&xs[k], &b, 4);
        }
        __m256 x = _mm256_loadu_ps(xs);
        _mm256_storeu_ps(ys, ct__v8_expf_neg(x));
        _mm256_storeu_ps(zs, ct__v8_expf(x));
        for (int k = 0; k < 8; k++) {
            if (xs[k] >= CT__EXP_NEG_LO) assert_memory_equal(&ys[k], &zs[k], 4);
            else assert_true(ys[k] == 0.0f && !signbit(ys[k]));
        }
    }
    const float sp[8] = {-INFINITY, NAN, -0.0f, 0.0f, CT__EXP_NEG_LO, -87.34f, -1e-30f, -88.0f};
    _mm256_storeu_ps(ys, ct__v8_expf_neg(_mm256_loadu_ps(sp)));
    assert_true(ys[0] == 0.0f);
    assert_true(isnan(ys[1]));
    assert_true(ys[2] == 1.0f && ys[3] == 1.0f);
    assert_true(ys[4] >= 1.1754942e-38f * 0.99999f && ys[4] < 1.2e-38f);
    assert_true(ys[5] == 0.0f && ys[7] == 0.0f);
    assert_true(ys[6] == 1.0f);
}

/* the general AVX2 expf gives the scalar ct__expf_s's bits (that one is
 * swept against libm in test_red_perf.c, which is built for baseline x86-64
 * and so never reaches the vector path) */
static void test_expf_vec(void **state) {
    (void)state;
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) skip();
    float xs[8], ys[8];
    for (uint64_t u = 0; u < (1ull << 32); u += 251 * 8) {
        for (int k = 0; k < 8; k++) {
            uint32_t b = (uint32_t)(u + (uint64_t)k * 251);
            memcpy(&xs[k], &b, 4);
        }
        _mm256_storeu_ps(ys, ct__v8_expf(_mm256_loadu_ps(xs)));
        for (int k = 0; k < 8; k++) {
            float s = ct__expf_s(xs[k]);
            if (isnan(s)) assert_true(isnan(ys[k]));
            else assert_memory_equal(&s, &ys[k], 4);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expf_vec),
        cmocka_unit_test(test_expf_neg),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
