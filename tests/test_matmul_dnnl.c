/* test_matmul_dnnl.c -- the oneDNN matmul path (src/backend/cpu/matmul_dnnl.c).
 *
 * Its rule sends bf16/f16 products (and float32 ones under "high"/"medium")
 * there on AMX CPUs only, but the path itself is the same for every type,
 * so it is checked on any CPU: directly (ct__dnnl_matmul with float32
 * operands, which oneDNN computes everywhere, against a float64 reference:
 * every stride layout, alpha, beta as a sum into C, the bias, odd sizes,
 * one and two threads; bf16/f16 where this CPU's oneDNN has kernels for
 * them), through the ops with CT_DNNL_MATMUL's "always" mode (mm, matmul,
 * addmm, linear, bmm, a backward pass, autocast's gemm_lp) against the own
 * kernels, and for what it must refuse (C left untouched). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/gemm_impl.h"
#include "backend/cpu/matmul_dnnl.h"
#include "test_util.h"

static int built_with_dnnl(void) { return ct__dnnl_matmul_calls() >= 0; }

static float frand(unsigned *r) {
    *r = *r * 1103515245u + 12345u;
    return ((float)(*r >> 9) / 4194304.0f - 1.0f) * 2.0f;
}

static uint16_t to_bf16(float f) { /* to nearest even (no NaNs here) */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* f32 -> f16 of a value f16 holds exactly (normal or zero) */
static uint16_t to_f16_exact(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    uint16_t sgn = (uint16_t)((u >> 16) & 0x8000u);
    int e = (int)((u >> 23) & 0xff);
    return v == 0 ? sgn : (uint16_t)(sgn | (uint16_t)((e - 127 + 15) << 10) | (uint16_t)((u >> 13) & 0x3ffu));
}

/* the float64 reference of alpha * A @ B + beta * C0 (or + bias) */
static void ref_gemm(int64_t M, int64_t N, int64_t K, double alpha, const float *A, int64_t sam, int64_t sak,
                     const float *B, int64_t sbk, int64_t sbn, double beta, const float *C0, const float *bias,
                     double *out) {
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)A[i * sam + k * sak] * (double)B[k * sbk + j * sbn];
            out[i * N + j] = alpha * s + (bias ? (double)bias[j] : beta * (double)C0[i * N + j]);
        }
}

static void check_close(const float *c, const double *ref, int64_t n, double tol, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)c[i] - ref[i]);
        if (!(d <= tol * (1.0 + fabs(ref[i])))) fail_msg("%s: element %lld %g vs %g", what, (long long)i, c[i], ref[i]);
    }
}

/* float32 operands: every stride layout, alpha, beta, bias, 1 and 2 threads */
static void test_direct_f32(void **state) {
    (void)state;
    if (!built_with_dnnl()) {
        float a = 1, b = 1, c = 7;
        assert_int_equal(ct__dnnl_matmul(1, 1, 1, 1, &a, CT_GEMM_F32, 1, 1, &b, CT_GEMM_F32, 1, 1, 0, NULL, &c,
                                         CT_GEMM_F32, 1, 1, 0), -2);
        assert_true(c == 7);
        skip();
    }
    const int64_t shapes[][3] = {{4, 4, 1}, {7, 17, 9}, {33, 5, 64}, {64, 130, 70}, {100, 64, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
        float *C = malloc(sizeof(float) * (size_t)(M * N)), *C0 = malloc(sizeof(float) * (size_t)(M * N));
        float *bias = malloc(sizeof(float) * (size_t)N);
        double *ref = malloc(sizeof(double) * (size_t)(M * N));
        assert_true(A && B && C && C0 && bias && ref);
        unsigned r = 77u + (unsigned)s;
        for (int64_t i = 0; i < M * K; i++) A[i] = frand(&r);
        for (int64_t i = 0; i < K * N; i++) B[i] = frand(&r);
        for (int64_t i = 0; i < M * N; i++) C0[i] = frand(&r);
        for (int64_t j = 0; j < N; j++) bias[j] = frand(&r);
        for (int lay = 0; lay < 16; lay++) {
            const int at = lay & 1, bt = (lay >> 1) & 1, kind = lay >> 2; /* 0 plain, 1 alpha+beta, 2 bias, 3 beta 1 */
            const int64_t sam = at ? 1 : K, sak = at ? M : 1, sbk = bt ? 1 : N, sbn = bt ? K : 1;
            const float alpha = kind == 1 ? 0.75f : 1.0f, beta = kind == 1 ? -0.5f : kind == 3 ? 1.0f : 0.0f;
            const float *bi = kind == 2 ? bias : NULL;
            memcpy(C, C0, sizeof(float) * (size_t)(M * N));
            long long n0 = ct__dnnl_matmul_calls();
            int rc = ct__dnnl_matmul(M, N, K, alpha, A, CT_GEMM_F32, sam, sak, B, CT_GEMM_F32, sbk, sbn,
                                     bi ? 1.0f : beta, bi, C, CT_GEMM_F32, N, 1 + (lay & 1), 0);
            assert_int_equal(rc, 0);
            assert_true(ct__dnnl_matmul_calls() == n0 + 1);
            ref_gemm(M, N, K, alpha, A, sam, sak, B, sbk, sbn, beta, C0, bi, ref);
            char what[96];
            snprintf(what, sizeof what, "f32 %lldx%lldx%lld layout %d", (long long)M, (long long)N, (long long)K, lay);
            check_close(C, ref, M * N, 1e-5 * (double)K, what);
        }
        /* refusals leave C alone: a scaled bias, mixed operand types, a C type
         * that is neither f32 nor the operands' */
        memcpy(C, C0, sizeof(float) * (size_t)(M * N));
        assert_int_equal(ct__dnnl_matmul(M, N, K, 2.0f, A, CT_GEMM_F32, K, 1, B, CT_GEMM_F32, N, 1, 1.0f, bias, C,
                                         CT_GEMM_F32, N, 1, 0), -2);
        assert_int_equal(ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_F32, K, 1, B, CT_GEMM_BF16, N, 1, 0.0f, NULL, C,
                                         CT_GEMM_F32, N, 1, 0), -2);
        assert_int_equal(ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_F32, K, 1, B, CT_GEMM_F32, N, 1, 0.0f, NULL, C,
                                         CT_GEMM_BF16, N, 1, 0), -2);
        assert_memory_equal(C, C0, sizeof(float) * (size_t)(M * N));
        free(A); free(B); free(C); free(C0); free(bias); free(ref);
    }
    /* C with rows wider than N (ldc > N): the gap is not written */
    {
        const int64_t M = 9, N = 20, K = 11, ldc = 24;
        float A[9 * 11], B[11 * 20], C[9 * 24];
        double ref[9 * 20];
        unsigned r = 5u;
        for (int i = 0; i < M * K; i++) A[i] = frand(&r);
        for (int i = 0; i < K * N; i++) B[i] = frand(&r);
        for (int i = 0; i < M * ldc; i++) C[i] = 123.0f;
        assert_int_equal(ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_F32, K, 1, B, CT_GEMM_F32, N, 1, 0.0f, NULL, C,
                                         CT_GEMM_F32, ldc, 2, 0), 0);
        ref_gemm(M, N, K, 1.0, A, K, 1, B, N, 1, 0.0, C, NULL, ref);
        for (int64_t i = 0; i < M; i++) {
            check_close(C + i * ldc, ref + i * N, N, 1e-4, "f32 ldc > N");
            for (int64_t j = N; j < ldc; j++) assert_true(C[i * ldc + j] == 123.0f);
        }
    }
}

/* bf16 / f16 operands where this CPU's oneDNN has kernels for them (AVX-512
 * with bf16 for bf16, AVX512-FP16 for f16; elsewhere the call answers -2
 * and leaves C alone); C f32 or rounded once */
static void test_direct_half(void **state) {
    (void)state;
    if (!built_with_dnnl()) skip();
    const int64_t M = 37, N = 45, K = 96;
    float *Af = malloc(sizeof(float) * (size_t)(M * K)), *Bf = malloc(sizeof(float) * (size_t)(K * N));
    uint16_t *A = malloc(2 * (size_t)(M * K)), *B = malloc(2 * (size_t)(K * N)), *Ch = malloc(2 * (size_t)(M * N));
    float *C = malloc(sizeof(float) * (size_t)(M * N));
    double *ref = malloc(sizeof(double) * (size_t)(M * N));
    assert_true(Af && Bf && A && B && Ch && C && ref);
    unsigned r = 99u;
    for (int64_t i = 0; i < M * K; i++) {
        A[i] = to_bf16(frand(&r));
        Af[i] = from_bf16(A[i]);
    }
    for (int64_t i = 0; i < K * N; i++) {
        B[i] = to_bf16(frand(&r));
        Bf[i] = from_bf16(B[i]);
    }
    ref_gemm(M, N, K, 1.0, Af, K, 1, Bf, 1, K, 0.0, C, NULL, ref); /* B read transposed */
    for (int i = 0; i < M * N; i++) C[i] = -9.0f;
    int rc = ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_BF16, K, 1, B, CT_GEMM_BF16, 1, K, 0.0f, NULL, C, CT_GEMM_F32,
                             N, 2, 0);
    if (rc == -2) {
        for (int i = 0; i < M * N; i++) assert_true(C[i] == -9.0f);
        printf("  bf16: oneDNN has no bf16 matmul on this CPU (answered -2, C untouched)\n");
    } else {
        assert_int_equal(rc, 0);
        check_close(C, ref, M * N, 1e-5 * (double)K, "bf16 operands, f32 C");
        assert_int_equal(ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_BF16, K, 1, B, CT_GEMM_BF16, 1, K, 0.0f, NULL, Ch,
                                         CT_GEMM_BF16, N, 2, 0), 0);
        for (int64_t i = 0; i < M * N; i++) /* rounded once: within half an ulp of bf16 */
            if (!(fabs((double)from_bf16(Ch[i]) - ref[i]) <= fabs(ref[i]) * (1.0 / 256) + 1e-5 * (double)K))
                fail_msg("bf16 C element %lld: %g vs %g", (long long)i, from_bf16(Ch[i]), ref[i]);
        printf("  bf16: oneDNN's bf16 matmul checked (f32 and bf16 C)\n");
    }
    /* f16 operands: the f16 bits of small integers and halves are exact */
    for (int64_t i = 0; i < M * K; i++) A[i] = to_f16_exact(Af[i] = (float)((int)(i % 9) - 4) * 0.5f);
    for (int64_t i = 0; i < K * N; i++) B[i] = to_f16_exact(Bf[i] = (float)((int)(i % 5) - 2));
    ref_gemm(M, N, K, 1.0, Af, K, 1, Bf, N, 1, 0.0, C, NULL, ref);
    for (int i = 0; i < M * N; i++) C[i] = -9.0f;
    rc = ct__dnnl_matmul(M, N, K, 1.0f, A, CT_GEMM_F16, K, 1, B, CT_GEMM_F16, N, 1, 0.0f, NULL, C, CT_GEMM_F32, N, 2, 0);
    if (rc == -2) {
        for (int i = 0; i < M * N; i++) assert_true(C[i] == -9.0f);
        printf("  f16: oneDNN has no f16 matmul on this CPU (answered -2, C untouched)\n");
    } else {
        assert_int_equal(rc, 0);
        check_close(C, ref, M * N, 0.0, "f16 operands (exact sums)");
        printf("  f16: oneDNN's f16 matmul checked\n");
    }
    free(Af); free(Bf); free(A); free(B); free(Ch); free(C); free(ref);
}

/* The rule on this CPU, and what turns the path off. */
static void test_rule(void **state) {
    (void)state;
    ct__dnnl_matmul_set_mode(-1);
    int dn = built_with_dnnl();
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_BF16, 0, 64, 64, 64), dn && ct__cpu_has_amx(0));
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_F16, 0, 64, 64, 64), dn && ct__cpu_has_amx(1));
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_F32, 1, 64, 64, 64), dn && ct__cpu_has_amx(0));
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_F32, 0, 64, 64, 64), 0);
    ct__dnnl_matmul_set_mode(1);
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_F32, 0, 64, 64, 64), dn);
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_F32, 0, 3, 64, 64), 0); /* a matrix-vector shape */
    ct_use_deterministic_algorithms(true);
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_BF16, 0, 64, 64, 64), 0);
    ct_use_deterministic_algorithms(false);
    ct__dnnl_matmul_set_mode(0);
    assert_int_equal(ct__dnnl_matmul_want(CT_GEMM_BF16, 0, 64, 64, 64), 0);
    ct__dnnl_matmul_set_mode(-1);
}

/* f runs under mode 1 (oneDNN for every product it takes) and mode 0 (the
 * own kernels); its results agree within tol */
typedef ct_tensor *(*op_fn)(ct_tensor *const *in);

static ct_tensor *f_mm(ct_tensor *const *in) { return ct_mm(in[0], in[1]); }
static ct_tensor *f_mm_t(ct_tensor *const *in) { return ct_mm(ct_transpose(in[1], 0, 1), ct_transpose(in[0], 0, 1)); }
static ct_tensor *f_addmm(ct_tensor *const *in) { return ct_addmm(in[2], in[0], in[1], 1.0, 1.0); }
static ct_tensor *f_addmm_s(ct_tensor *const *in) { return ct_addmm(in[2], in[0], in[1], 0.5, -2.0); }
static ct_tensor *f_linear(ct_tensor *const *in) { return ct_linear(in[0], ct_transpose(in[1], 0, 1), in[2]); }
/* two matrices of 72 x 80 x 72: a batch too small to run a matrix a thread */
static ct_tensor *f_bmm(ct_tensor *const *in) { return ct_bmm(in[3], ct_transpose(in[3], 1, 2)); }

static void run_both(op_fn f, ct_tensor *const *in, ct_dtype dt, double tol, const char *name, int expect_taken) {
    ct__dnnl_matmul_set_mode(0);
    ct_tensor *own = ct_to_dtype(f(in), CT_F32);
    assert_non_null(own);
    ct__dnnl_matmul_set_mode(1);
    long long n0 = ct__dnnl_matmul_calls();
    ct_tensor *dn = ct_to_dtype(f(in), CT_F32);
    long long n1 = ct__dnnl_matmul_calls();
    ct__dnnl_matmul_set_mode(-1);
    assert_non_null(dn);
    if (expect_taken && n1 == n0) fail_msg("%s (%s): oneDNN ran no product", name, ct_dtype_name(dt));
    if (!ct_allclose(dn, own, tol, tol, false)) fail_msg("%s (%s): oneDNN and the own kernels differ", name, ct_dtype_name(dt));
}

static void test_ops_forced(void **state) {
    (void)state;
    SCOPE_BEGIN;
    /* does this CPU's oneDNN multiply bf16 at all? */
    int bf_ok;
    {
        uint16_t a[16], b[16], c[16];
        for (int i = 0; i < 16; i++) a[i] = b[i] = 0x3f80; /* 1.0 */
        bf_ok = built_with_dnnl() && ct__dnnl_matmul(4, 4, 4, 1.0f, a, CT_GEMM_BF16, 4, 1, b, CT_GEMM_BF16, 4, 1, 0.0f,
                                                     NULL, c, CT_GEMM_BF16, 4, 1, 0) == 0;
        if (bf_ok) assert_true(c[5] == 0x4080); /* 4.0 */
    }
    ct_tensor *in[4];
    in[0] = ct_randn(CT_SHAPE(120, 40), CT_F32);
    in[1] = ct_randn(CT_SHAPE(40, 56), CT_F32);
    in[2] = ct_randn(CT_SHAPE(56), CT_F32);
    in[3] = ct_randn(CT_SHAPE(2, 72, 80), CT_F32);
    op_fn fs[] = {f_mm, f_mm_t, f_addmm, f_addmm_s, f_linear, f_bmm};
    const char *names[] = {"mm", "mm of transposes", "addmm", "addmm beta 0.5 alpha -2", "linear", "batched matmul"};
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = d ? CT_BF16 : CT_F32;
        ct_tensor *x[4];
        for (int i = 0; i < 4; i++) assert_non_null(x[i] = ct_to_dtype(in[i], dt));
        for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++)
            run_both(fs[k], x, dt, d ? 2e-2 : 1e-4, names[k], built_with_dnnl() && (d ? bf_ok : 1));
    }
    SCOPE_END;
}

/* A backward pass (the products of dX = dY W and dW = X^T dY read
 * transposed operands) and autocast's gemm_lp, under both modes. */
static void mlp_grads(ct_tensor *x, ct_tensor *w1, ct_tensor *w2, ct_tensor **g1, ct_tensor **g2, int amp) {
    assert_int_equal(ct_set_requires_grad(w1, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w2, true), CT_OK);
    if (amp) assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    ct_tensor *h = ct_relu(ct_linear(x, w1, NULL));
    ct_tensor *y = ct_linear(h, w2, NULL);
    if (amp) assert_int_equal(ct_autocast_exit(), CT_OK);
    ct_tensor *loss = ct_sum(ct_to_dtype(y, CT_F32), NULL, 0, false);
    assert_non_null(loss);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    *g1 = ct_clone(ct_grad(w1));
    *g2 = ct_clone(ct_grad(w2));
    assert_non_null(*g1);
    assert_non_null(*g2);
    assert_int_equal(ct_set_grad(w1, NULL), CT_OK);
    assert_int_equal(ct_set_grad(w2, NULL), CT_OK);
    assert_int_equal(ct_set_requires_grad(w1, false), CT_OK);
    assert_int_equal(ct_set_requires_grad(w2, false), CT_OK);
}

static void test_backward_and_autocast(void **state) {
    (void)state;
    SCOPE_BEGIN;
    for (int amp = 0; amp < 2; amp++) {
        ct_tensor *x = ct_randn(CT_SHAPE(64, 48), CT_F32);
        ct_tensor *w1 = ct_randn(CT_SHAPE(80, 48), CT_F32), *w2 = ct_randn(CT_SHAPE(24, 80), CT_F32);
        ct_tensor *a1, *a2, *b1, *b2;
        ct__dnnl_matmul_set_mode(0);
        mlp_grads(x, w1, w2, &a1, &a2, amp);
        ct__dnnl_matmul_set_mode(1);
        long long n0 = ct__dnnl_matmul_calls();
        mlp_grads(x, w1, w2, &b1, &b2, amp);
        long long n1 = ct__dnnl_matmul_calls();
        ct__dnnl_matmul_set_mode(-1);
        if (!amp && built_with_dnnl()) assert_true(n1 - n0 >= 4); /* 2 forward, 2 dW (+ 1 dX) */
        double tol = amp ? 3e-2 : 1e-4;
        if (!ct_allclose(a1, b1, tol, tol * 10, false) || !ct_allclose(a2, b2, tol, tol * 10, false)) {
            ct_tensor *d1 = ct_amax(ct_abs(ct_sub(a1, b1)), NULL, 0, false), *d2 = ct_amax(ct_abs(ct_sub(a2, b2)), NULL, 0, false);
            fail_msg("%s: weight gradients differ by up to %g and %g", amp ? "autocast" : "float32",
                     ct_item(d1), ct_item(d2));
        }
        printf("  %s: %lld products through oneDNN\n", amp ? "autocast bf16" : "float32", n1 - n0);
    }
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_f32),
        cmocka_unit_test(test_direct_half),
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_ops_forced),
        cmocka_unit_test(test_backward_and_autocast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
