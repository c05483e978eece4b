/* test_gemm.c -- ctorch's own AVX2 f32 GEMM (src/backend/cpu/gemm_avx2.c)
 * against a double-precision naive loop: edge shapes (1, 5, 17, 63, 65, ...),
 * transposed and strided operands, ldc > N (padding untouched), alpha/beta
 * (beta == 0 never reads C), tiny blockings that reach every loop, bit-for-bit
 * equality across runs and thread counts; then the routing through ct_matmul /
 * ct_linear / ct_bmm on non-contiguous inputs, and CT_CPU_CAPABILITY=default
 * keeping OpenBLAS; the bf16 dot-product GEMM (gemm_avx512.c) the same way where
 * the CPU has AVX512_BF16. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/blas.h"
#include "core/tensor_impl.h"
#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/gemm_impl.h"

static unsigned g_seed = 12345u;
static float frand(void) {
    g_seed = g_seed * 1103515245u + 12345u;
    return (float)((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *fbuf(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

/* the kernel itself runs wherever the CPU has AVX2 + FMA */
static int have_avx2(void) { return ct__cpu_cap_detected() >= CT_CAP_AVX2; }

typedef struct gcase {
    int64_t M, N, K;
    int ta, tb;      /* A stored as [K, M] / B stored as [N, K] */
    int64_t pad;     /* extra elements per row of A, B and C */
    int64_t step;    /* element step inside a row of A and B (1 = unit) */
    float alpha, beta;
    int bias;        /* beta's operand is a bias row of N (C is not read) */
} gcase;

/* runs one case with the given blocking and threads; checks against the
 * double loop; returns the result (caller frees) for the bitwise checks */
static float *run_case(const gcase *c, int threads, int kc, int mc, int nc, int dn) {
    int64_t M = c->M, N = c->N, K = c->K, st = c->step;
    /* A: rows (ta ? K : M) of (ta ? M : K) elements, step st, row pitch */
    int64_t ar = c->ta ? K : M, acn = c->ta ? M : K;
    int64_t br = c->tb ? N : K, bcn = c->tb ? K : N;
    int64_t lda = acn * st + c->pad, ldb = bcn * st + c->pad, ldc = N + c->pad;
    unsigned seed0 = g_seed;
    float *A = fbuf(ar * lda), *B = fbuf(br * ldb), *C = fbuf(M * ldc);
    g_seed = seed0;
    float *C0 = malloc(sizeof(float) * (size_t)(M * ldc > 0 ? M * ldc : 1));
    assert_non_null(C0);
    memcpy(C0, C, sizeof(float) * (size_t)(M * ldc));
    float *bias = c->bias ? fbuf(N) : NULL;
    if (c->beta == 0.0f || bias) /* beta == 0 or a bias: C must not be read */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = NAN;
    int64_t sam = c->ta ? st : lda, sak = c->ta ? lda : st;
    int64_t sbk = c->tb ? st : ldb, sbn = c->tb ? ldb : st;
    int r = ct__sgemm_avx2_ex(M, N, K, c->alpha, A, sam, sak, B, sbk, sbn, c->beta, bias, C, ldc,
                              threads, kc, mc, nc, dn);
    assert_int_equal(r, 0);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)A[i * sam + k * sak] * (double)B[k * sbk + j * sbn];
                s += p;
                sa += fabs(p);
            }
            double ref = (double)c->alpha * s, cin = bias ? bias[j] : C0[i * ldc + j];
            if (c->beta != 0.0f) ref += (double)c->beta * (double)cin;
            double tol = 4e-7 * (double)(K + 4) * (fabs((double)c->alpha) * sa +
                                                   fabs((double)c->beta * cin)) + 1e-30;
            double got = C[i * ldc + j];
            if (!(fabs(got - ref) <= tol))
                fail_msg("M=%lld N=%lld K=%lld ta=%d tb=%d pad=%lld step=%lld a=%g b=%g "
                         "thr=%d blk=%d,%d,%d,%d: C[%lld][%lld] = %.9g, want %.9g (tol %.3g)",
                         (long long)M, (long long)N, (long long)K, c->ta, c->tb,
                         (long long)c->pad, (long long)st, c->alpha, c->beta, threads, kc, mc,
                         nc, dn, (long long)i, (long long)j, got, ref, tol);
        }
        for (int64_t j = N; j < ldc; j++) /* the padding of C is not touched */
            assert_true(memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float)) == 0);
    }
    free(A);
    free(B);
    free(C0);
    free(bias);
    return C;
}

static const int64_t g_dims[] = {1, 5, 6, 7, 16, 17, 63, 65};
#define NDIMS ((int)(sizeof(g_dims) / sizeof(g_dims[0])))

/* every M x N x K from g_dims, cycling through layouts and alpha/beta */
static void test_edges_small(void **state) {
    (void)state;
    if (!have_avx2()) skip();
    static const float ab[][2] = {{1, 0}, {1, 1}, {-2, 0.5f}, {0.75f, 0}};
    int n = 0;
    for (int a = 0; a < NDIMS; a++)
        for (int b = 0; b < NDIMS; b++)
            for (int k = 0; k < NDIMS; k++, n++) {
                gcase c = {g_dims[a], g_dims[b], g_dims[k], n & 1, (n >> 1) & 1,
                           (n % 3 == 0) ? 3 : 0, (n % 5 == 0) ? 2 : 1, ab[n % 4][0],
                           ab[n % 4][1], n % 3 == 1};
                /* default blocking, and a tiny one reaching every loop */
                free(run_case(&c, 2, 256, 144, 4096, 128));
                free(run_case(&c, 2, 8, 12, 32, (n & 4) ? 0 : 128));
            }
}

/* larger shapes: several K blocks (K > 256), row and column edges, the
 * in-place A path (N <= 128), both threads' partitions */
static void test_larger(void **state) {
    (void)state;
    if (!have_avx2()) skip();
    static const gcase cs[] = {
        {255, 257, 300, 0, 1, 0, 1, 1, 0, 0},   {131, 64, 513, 0, 0, 5, 1, 1, 1, 0},
        {97, 200, 260, 1, 0, 0, 1, 1, 0, 0},    {200, 33, 129, 1, 1, 2, 2, -1, 0.5f, 0},
        {6, 300, 70, 0, 1, 0, 1, 1, 0, 0},      {1, 1000, 90, 0, 0, 0, 1, 1, 1, 0},
        {1000, 1, 90, 0, 1, 0, 1, 1, 0, 0},     {150, 160, 257, 0, 0, 1, 1, 2, 0, 0},
        {400, 300, 100, 0, 1, 3, 1, 1, 1, 0},
        /* bias rows (linear): partial tiles, several K blocks, alpha/beta */
        {255, 257, 300, 0, 1, 0, 1, 1, 1, 1},  {131, 64, 513, 0, 1, 2, 1, 0.5f, 2, 1},
        {97, 200, 260, 1, 0, 0, 1, -1, 1, 1},  {6, 300, 70, 0, 1, 0, 1, 1, 0, 1},
    };
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        free(run_case(&cs[i], 2, 256, 144, 4096, 128));
        free(run_case(&cs[i], 1, 256, 144, 4096, 128));
        free(run_case(&cs[i], 3, 64, 24, 64, 0));
    }
}

/* alpha == 0 and K == 0: C = beta * C (beta == 0 -> zeros, even over NaN) */
static void test_degenerate(void **state) {
    (void)state;
    if (!have_avx2()) skip();
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 1, 1, 1, 1, 1}, C[4] = {NAN, NAN, NAN, NAN};
    assert_int_equal(ct__sgemm_avx2(2, 2, 3, 1.0f, A, 3, 1, B, 2, 1, 0.0f, NULL, C, 2, 1), 0);
    assert_true(C[0] == 6 && C[1] == 6 && C[2] == 15 && C[3] == 15);
    assert_int_equal(ct__sgemm_avx2(2, 2, 0, 1.0f, A, 3, 1, B, 2, 1, 2.0f, NULL, C, 2, 1), 0);
    assert_true(C[0] == 12 && C[3] == 30);
    assert_int_equal(ct__sgemm_avx2(2, 2, 3, 0.0f, A, 3, 1, B, 2, 1, 0.0f, NULL, C, 2, 2), 0);
    assert_true(C[0] == 0 && C[1] == 0 && C[2] == 0 && C[3] == 0);
    assert_int_equal(ct__sgemm_avx2(0, 2, 3, 1.0f, A, 3, 1, B, 2, 1, 0.0f, NULL, C, 2, 2), 0);
    /* with a bias row: beta * bias, C not read */
    float bias[2] = {3, -1};
    C[0] = C[1] = C[2] = C[3] = NAN;
    assert_int_equal(ct__sgemm_avx2(2, 2, 0, 1.0f, A, 3, 1, B, 2, 1, 2.0f, bias, C, 2, 1), 0);
    assert_true(C[0] == 6 && C[1] == -2 && C[2] == 6 && C[3] == -2);
    assert_int_equal(ct__sgemm_avx2(2, 2, 3, 0.0f, A, 3, 1, B, 2, 1, 1.0f, bias, C, 2, 1), 0);
    assert_true(C[0] == 3 && C[1] == -1 && C[2] == 3 && C[3] == -1);
}

/* bit-for-bit: the same on every run and for 1, 2, 3 threads */
static void test_deterministic(void **state) {
    (void)state;
    if (!have_avx2()) skip();
    /* the last two run in several work units a thread (gemm_worker): rows
     * with A read in place (4100 x 48), columns with A read in place (50 x 128) */
    static const gcase cs[] = {{300, 200, 600, 0, 1, 0, 1, 1, 0, 0}, {257, 64, 700, 0, 0, 0, 1, 1, 1, 0},
                               {4100, 48, 70, 0, 0, 0, 1, 1, 0, 0},   {50, 128, 300, 0, 1, 0, 1, 1, 0, 1}};
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
        unsigned s0 = g_seed;
        float *r1 = run_case(&cs[i], 1, 256, 144, 4096, 128);
        int64_t n = cs[i].M * (cs[i].N + cs[i].pad);
        for (int t = 1; t <= 3; t++)
            for (int rep = 0; rep < 2; rep++) {
                g_seed = s0;
                float *r = run_case(&cs[i], t, 256, 144, 4096, 128);
                assert_true(memcmp(r, r1, sizeof(float) * (size_t)n) == 0);
                free(r);
            }
        free(r1);
    }
}

/* ---- through the ops ------------------------------------------------------- */

static double *to_doubles(ct_tensor *t) { /* any strides; inside a scope */
    ct_tensor *c = ct_contiguous(t);
    assert_non_null(c);
    int64_t n = ct_numel(c);
    double *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    const float *f = ct_data_ptr(c);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    return d; /* c belongs to the caller's scope */
}

static ct_tensor *randt(int64_t r, int64_t c) {
    float *v = fbuf(r * c);
    ct_tensor *t = ct_from_array(v, CT_SHAPE(r, c), CT_F32);
    free(v);
    return t;
}

/* out[b] ?= x[b] @ w[b] (+ bias), all in double from the inputs' values */
static void check_mm(ct_tensor *out, ct_tensor *x, ct_tensor *w, int64_t nb, int64_t M,
                     int64_t N, int64_t K, const double *bias) {
    assert_non_null(out);
    double *X = to_doubles(x), *W = to_doubles(w), *O = to_doubles(out);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double s = bias ? bias[j] : 0, sa = bias ? fabs(bias[j]) : 0;
                for (int64_t k = 0; k < K; k++) {
                    double p = X[(b * M + i) * K + k] * W[(b * K + k) * N + j];
                    s += p;
                    sa += fabs(p);
                }
                double got = O[(b * M + i) * N + j];
                if (!(fabs(got - s) <= 4e-7 * (double)(K + 4) * sa + 1e-30))
                    fail_msg("[%lld][%lld][%lld] = %.9g, want %.9g", (long long)b, (long long)i,
                             (long long)j, got, s);
            }
    free(X);
    free(W);
    free(O);
}

static void test_ops_noncontiguous(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    long long calls0 = ct__sgemm_avx2_calls();
    /* A^T (stored [K, M]) @ B sliced with step 2 along columns */
    ct_tensor *at = ct_transpose(randt(70, 37), 0, 1);       /* [37, 70] */
    ct_tensor *bs = ct_slice(randt(70, 90), 1, 0, 90, 2);     /* [70, 45] */
    check_mm(ct_matmul(at, bs), at, bs, 1, 37, 45, 70, NULL);
    /* rows sliced with a step (neither stride unit for BLAS) */
    ct_tensor *a2 = ct_slice(ct_slice(randt(80, 60), 0, 0, 80, 2), 1, 1, 60, 3); /* [40, 20] */
    ct_tensor *b2 = ct_transpose(ct_slice(randt(66, 40), 1, 0, 40, 2), 0, 1);    /* [20, 66] */
    check_mm(ct_matmul(a2, b2), a2, b2, 1, 40, 66, 20, NULL);
    /* linear: x @ W^T + b */
    ct_tensor *x = randt(33, 50), *W = randt(29, 50), *bias = ct_from_array(
        (float[29]){0}, CT_SHAPE(29), CT_F32);
    float *bv = ct_data_ptr(bias);
    double bd[29];
    for (int j = 0; j < 29; j++) bd[j] = bv[j] = frand();
    check_mm(ct_linear(x, W, bias), x, ct_transpose(W, 0, 1), 1, 33, 29, 50, bd);
    /* shapes the own kernel takes, which adds the bias as it stores C: a
     * 3-D input folded to [50, 70] rows, and addmm's beta * bias */
    ct_tensor *x3 = ct_reshape(randt(50, 70), CT_SHAPE(2, 25, 70)), *W2 = randt(40, 70);
    ct_tensor *b2v = ct_from_array((float[40]){0}, CT_SHAPE(40), CT_F32);
    float *b2p = ct_data_ptr(b2v);
    double bd2[40], bd3[40];
    for (int j = 0; j < 40; j++) {
        bd2[j] = b2p[j] = frand();
        bd3[j] = 0.5 * bd2[j];
    }
    check_mm(ct_linear(x3, W2, b2v), x3, ct_transpose(W2, 0, 1), 1, 50, 40, 70, bd2);
    ct_tensor *x2 = ct_reshape(x3, CT_SHAPE(50, 70));
    ct_tensor *am = ct_addmm(b2v, x2, ct_transpose(W2, 0, 1), 0.5, 1.0);
    check_mm(am, x2, ct_transpose(W2, 0, 1), 1, 50, 40, 70, bd3);
    /* bmm: 8 matrices (the batch-parallel path), B transposed per matrix */
    float *av = fbuf(8 * 30 * 40), *bv2 = fbuf(8 * 36 * 40);
    ct_tensor *ba = ct_from_array(av, CT_SHAPE(8, 30, 40), CT_F32);
    ct_tensor *bb = ct_transpose(ct_from_array(bv2, CT_SHAPE(8, 36, 40), CT_F32), 1, 2);
    free(av);
    free(bv2);
    check_mm(ct_bmm(ba, bb), ba, bb, 8, 30, 36, 40, NULL);
    /* and a broadcast batch (stride 0) through matmul */
    ct_tensor *w3 = ct_expand(randt(40, 33), CT_SHAPE(8, 40, 33));
    check_mm(ct_matmul(ba, w3), ba, w3, 8, 30, 33, 40, NULL);
    /* the f32 products above went through the own kernel on AVX2 CPUs
     * (the routing rule may leave some to BLAS, never all) */
    if (ct__cpu_cap() >= CT_CAP_AVX2 && ct__sgemm_avx2_preferred(37, 45, 70))
        assert_true(ct__sgemm_avx2_calls() > calls0);
    ct_scope_end(s);
}

/* the routing rule (gemm_avx2.c), unless CT_GEMM overrides it */
/* ct_linear keeps its weight packed where it cannot change (inference mode,
 * or it does not require grad; linalg.c pp_get): the same bits as the
 * product with the weight packed on the fly (the same linear on a copy of
 * the weight that requires grad, outside inference mode: not kept), hits
 * once it is packed (at its second use), and a weight written in place (an
 * op, or through ct_data_ptr) packed again.  Shapes with a K tail (K not a
 * multiple of the 256 blocking) and N not a multiple of 16, x strided. */
static ct_tensor *linear_unkept(ct_tensor *x, ct_tensor *w, ct_tensor *bias) {
    bool prev = ct_set_inference_mode(false);
    ct_tensor *wr = ct_clone(w);
    assert_int_equal(ct_set_requires_grad(wr, true), CT_OK);
    ct_tensor *r = ct_detach(ct_linear(x, wr, bias));
    ct_set_inference_mode(prev);
    return r;
}
long long ct__gemm_prepack_hits(void);
static void test_linear_kept_weights(void **state) {
    (void)state;
    if (!have_avx2()) skip();
    static const int64_t shapes[][3] = {{64, 37, 300}, {130, 768, 768}, {48, 100, 513}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        ct_scope sc = ct_scope_begin();
        ct_tensor *w = randt(N, K), *b = randt(1, N);
        ct_tensor *bias = ct_reshape(b, CT_SHAPE(N));
        ct_tensor *x = ct_transpose(randt(K, M), 0, 1); /* [M, K], strided */
        bool prev = ct_set_inference_mode(true);
        long long h0 = ct__gemm_prepack_hits();
        for (int call = 0; call < 4; call++) {
            if (call == 2) assert_non_null(ct_mul_scalar_(w, -0.5)); /* in place: a new version */
            if (call == 3) { float *p = ct_data_ptr(w); p[0] += 1.0f; p[K * N - 1] -= 2.0f; }
            ct_tensor *y = ct_linear(x, w, bias);
            ct_tensor *r = linear_unkept(x, w, bias);
            assert_non_null(y);
            assert_non_null(r);
            if (!ct_equal(y, r)) fail_msg("linear %lldx%lldx%lld call %d differs from the unkept weight's", (long long)M,
                                         (long long)N, (long long)K, call);
            assert_true(ct_equal(ct_linear(x, w, NULL), linear_unkept(x, w, NULL)));
        }
        /* a weight is noted at its first use and packed at its second (call
         * 0's product without bias), so call 1's two products hit; calls 2
         * and 3 changed it: noted and packed again */
        /* (only products routed to the own GEMMs keep packed weights: on an
         * AVX-512 CPU other than Zen 4 these go to OpenBLAS, and nothing is
         * kept) */
        assert_int_equal(ct__gemm_prepack_hits() - h0, ct__sgemm_avx2_preferred(M, N, K) ? 2 : 0);
        ct_set_inference_mode(prev);
        /* a weight that requires grad outside inference mode is not kept */
        assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
        long long h1 = ct__gemm_prepack_hits();
        ct_tensor *y = ct_linear(x, w, bias);
        assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
        assert_int_equal(ct__gemm_prepack_hits(), h1);
        ct_scope_end(sc);
    }
}

static void test_routing_rule(void **state) {
    (void)state;
    if (getenv("CT_GEMM")) skip();
    /* own on AVX2 CPUs and Zen 4, OpenBLAS's AVX-512 kernels on other AVX-512 CPUs */
    int own = ct__cpu_cap() < CT_CAP_AVX512 || ct__cpu_avx512_halved();
    assert_int_equal(ct__sgemm_avx2_preferred(2048, 768, 256), own);   /* transformer linear */
    assert_int_equal(ct__sgemm_avx2_preferred(4096, 64, 4096), own);   /* skinny N */
    assert_int_equal(ct__sgemm_avx2_preferred(128, 128, 64), own);     /* bmm matrices */
    assert_int_equal(ct__sgemm_avx2_preferred(1024, 1024, 1024), own); /* large square */
    assert_false(ct__sgemm_avx2_preferred(1, 1000, 1000));   /* GEMV shapes */
    assert_false(ct__sgemm_avx2_preferred(1000, 1, 1000));
    assert_false(ct__sgemm_avx2_preferred(64, 3136, 576));   /* few rows, wide B */
}

/* CT_CPU_CAPABILITY=default: no call reaches the AVX2 kernel.  Runs in a
 * child process (the level is picked once, at the first op). */
static void test_default_capability_uses_blas(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("CT_CPU_CAPABILITY", "default", 1);
        ct_scope s = ct_scope_begin();
        ct_tensor *a = ct_ones(CT_SHAPE(64, 64), CT_F32);
        ct_tensor *m = ct_matmul(a, a);
        int ok = m && strcmp(ct_cpu_capability(), "default") == 0 &&
                 ct__sgemm_avx2_calls() == 0 && ((const float *)ct_data_ptr(m))[0] == 64.0f;
        ct_scope_end(s);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the bf16 dot-product GEMM (gemm_avx512.c; CPUs with AVX512_BF16) -------------- */

/* torch's f32 -> bf16 rounding (to nearest even) */
static uint16_t bf_round(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float bf_value(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* One case of ct__gemm_bf16dot_ex: A and B of type t (f32: rounded to bf16
 * as they are packed) in layout la / lb (0 row-major, 1 transposed, 2 both
 * strides != 1), against a double loop over the bf16 values; the result of
 * 1 and 2 threads bit for bit the same, and a bf16 C (one K block) the f32
 * result rounded. */
static void bf_case_w(int64_t M, int64_t N, int64_t K, int t, int la, int lb, float alpha, float beta,
                      int use_bias, int kc, int mc, int nc, int wide) {
    const int64_t pad = 3;
    /* A [M, K]: la 0: row stride K + pad; 1: stored [K, M]; 2: [M, K] with step 2; 3: row
     * stride K + pad + 1 (even for an even K: a bf16 A the kernel reads in place) */
    int64_t sam = la == 0 ? K + pad : la == 1 ? 1 : la == 2 ? 2 * K + pad : K + pad + 1;
    int64_t sak = la == 0 || la == 3 ? 1 : la == 1 ? M + pad : 2;
    int64_t sbk = lb == 0 ? N + pad : lb == 1 ? 1 : 2 * N + pad, sbn = lb == 0 ? 1 : lb == 1 ? K + pad : 2;
    int64_t na = (M - 1) * sam + (K - 1) * sak + 1, nb = (K - 1) * sbk + (N - 1) * sbn + 1;
    float *Af = fbuf(na), *Bf = fbuf(nb), *bias = use_bias ? fbuf(N) : NULL;
    uint16_t *Ah = malloc(2 * (size_t)na), *Bh = malloc(2 * (size_t)nb);
    assert_non_null(Ah);
    assert_non_null(Bh);
    for (int64_t i = 0; i < na; i++) Ah[i] = bf_round(Af[i]);
    for (int64_t i = 0; i < nb; i++) Bh[i] = bf_round(Bf[i]);
    const void *A = t == CT_GEMM_BF16 ? (const void *)Ah : (const void *)Af;
    const void *B = t == CT_GEMM_BF16 ? (const void *)Bh : (const void *)Bf;
    const int64_t ldc = N + pad;
    float *C0 = fbuf(M * ldc), *C[2];
    for (int th = 0; th < 2; th++) {
        C[th] = malloc(sizeof(float) * (size_t)(M * ldc));
        assert_non_null(C[th]);
        memcpy(C[th], C0, sizeof(float) * (size_t)(M * ldc));
        if (beta == 0.0f || bias) /* C must not be read */
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) C[th][i * ldc + j] = NAN;
        if (wide)
            assert_int_equal(ct__sgemm_avx512_ex(M, N, K, alpha, Af, sam, sak, Bf, sbk, sbn, beta, bias, C[th], ldc,
                                                 th + 1, kc, mc, nc), 0);
        else
            assert_int_equal(ct__gemm_bf16dot_ex(M, N, K, alpha, A, t, sam, sak, B, t, sbk, sbn, beta, bias,
                                                 C[th], CT_GEMM_F32, ldc, th + 1, kc, mc, nc), 0);
    }
    if (memcmp(C[0], C[1], sizeof(float) * (size_t)(M * ldc)))
        fail_msg("bf16dot %lldx%lldx%lld t=%d la=%d lb=%d: 1 and 2 threads differ", (long long)M, (long long)N,
                 (long long)K, t, la, lb);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = wide ? (double)Af[i * sam + k * sak] * (double)Bf[k * sbk + j * sbn]
                                : (double)bf_value(Ah[i * sam + k * sak]) * (double)bf_value(Bh[k * sbk + j * sbn]);
                s += p;
                sa += fabs(p);
            }
            double cin = bias ? bias[j] : C0[i * ldc + j], ref = (double)alpha * s;
            if (beta != 0.0f) ref += (double)beta * cin;
            double tol = 4e-7 * (double)(K + 4) * (fabs((double)alpha) * sa + fabs((double)beta * cin)) + 1e-30;
            double got = C[0][i * ldc + j];
            if (!(fabs(got - ref) <= tol))
                fail_msg("%s %lldx%lldx%lld t=%d la=%d lb=%d a=%g b=%g bias=%d blk=%d,%d,%d: C[%lld][%lld] = "
                         "%.9g, want %.9g (tol %.3g)",
                         wide ? "sgemm_avx512" : "bf16dot", (long long)M, (long long)N, (long long)K, t, la, lb, alpha, beta, use_bias, kc, mc, nc,
                         (long long)i, (long long)j, got, ref, tol);
        }
        for (int64_t j = N; j < ldc; j++) /* the padding of C is not touched */
            assert_true(memcmp(&C[0][i * ldc + j], &C0[i * ldc + j], sizeof(float)) == 0);
    }
    /* a bf16 C: one K block, beta 0 unless a bias; the f32 result rounded once */
    if (wide) {
    } else if (K <= kc && alpha != 0.0f && (beta == 0.0f || bias)) {
        uint16_t *Ch = malloc(2 * (size_t)(M * ldc));
        assert_non_null(Ch);
        memset(Ch, 0xab, 2 * (size_t)(M * ldc));
        assert_int_equal(ct__gemm_bf16dot_ex(M, N, K, alpha, A, t, sam, sak, B, t, sbk, sbn, beta, bias, Ch,
                                             CT_GEMM_BF16, ldc, 2, kc, mc, nc), 0);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                uint16_t want = j < N ? bf_round(C[0][i * ldc + j]) : 0xabab;
                if (Ch[i * ldc + j] != want)
                    fail_msg("bf16dot bf16 C %lldx%lldx%lld: [%lld][%lld] = %#x, want %#x", (long long)M,
                             (long long)N, (long long)K, (long long)i, (long long)j, Ch[i * ldc + j], want);
            }
        /* CT_GEMM_F32R: the same values as floats (bf16 widened), padding untouched */
        float *Cr = malloc(sizeof(float) * (size_t)(M * ldc));
        assert_non_null(Cr);
        memcpy(Cr, C0, sizeof(float) * (size_t)(M * ldc));
        assert_int_equal(ct__gemm_bf16dot_ex(M, N, K, alpha, A, t, sam, sak, B, t, sbk, sbn, beta, bias, Cr,
                                             CT_GEMM_F32R, ldc, 2, kc, mc, nc), 0);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldc; j++) {
                float want = j < N ? bf_value(Ch[i * ldc + j]) : C0[i * ldc + j];
                if (memcmp(&Cr[i * ldc + j], &want, sizeof want))
                    fail_msg("bf16dot f32r C %lldx%lldx%lld: [%lld][%lld] = %.9g, want %.9g", (long long)M,
                             (long long)N, (long long)K, (long long)i, (long long)j, Cr[i * ldc + j], want);
            }
        free(Cr);
        free(Ch);
    } else if (K > kc) { /* more than one K block: refused for a bf16 C */
        uint16_t one = 0;
        assert_int_equal(ct__gemm_bf16dot_ex(M, N, K, alpha, A, t, sam, sak, B, t, sbk, sbn, 0.0f, NULL, &one,
                                             CT_GEMM_BF16, ldc, 1, kc, mc, nc), -2);
    }
    free(Af); free(Bf); free(Ah); free(Bh); free(bias); free(C0); free(C[0]); free(C[1]);
}

/* Every M x N x K of a few edge sizes (the 12 x 32 tiles' edges), cycling
 * through layouts, alpha/beta and bias, at a default and a tiny blocking
 * (every loop; an odd kc for f32), then larger shapes with several K, row
 * and column blocks.  wide: the f32 GEMM (f32 inputs); else the bf16 one
 * (every third case f32 inputs, rounded as packed). */
static void bf_sweep(int wide) {
    static const int64_t dims[] = {1, 5, 12, 13, 31, 33, 65};
    static const float ab[][2] = {{1, 0}, {1, 1}, {-2, 0.5f}, {0.75f, 0}};
    const int nd = (int)(sizeof dims / sizeof dims[0]), bf = wide ? CT_GEMM_F32 : CT_GEMM_BF16;
    int n = 0;
    for (int a = 0; a < nd; a++)
        for (int b = 0; b < nd; b++)
            for (int k = 0; k < nd; k++, n++) {
                int t = n % 3 == 2 ? CT_GEMM_F32 : bf;
                bf_case_w(dims[a], dims[b], dims[k], t, n % 3, (n / 3) % 3, ab[n % 4][0], ab[n % 4][1],
                          n % 5 == 1, 512, wide ? 96 : 192, 4096, wide);
                bf_case_w(dims[a], dims[b], dims[k], t, (n + 1) % 3, (n / 2) % 3, ab[n % 4][0], ab[n % 4][1],
                          n % 5 == 2, wide ? 5 : 6, 12, 32, wide);
            }
    bf_case_w(200, 300, 1100, bf, 0, 1, 1.0f, 0.0f, 1, 512, wide ? 96 : 192, 4096, wide);
    bf_case_w(130, 250, 515, bf, 1, 0, 1.0f, 1.0f, 0, 64, 24, 64, wide);
    bf_case_w(77, 700, 96, CT_GEMM_F32, wide ? 2 : 0, wide ? 2 : 0, 0.5f, 0.0f, 0, 512, wide ? 96 : 192, 4096, wide);
    /* A rows along k with an even stride: read in place (whole 12-row
     * panels), the edge panel packed; several row, column and K blocks */
    for (int n = 0; n < nd; n++)
        bf_case_w(dims[n] + 24, dims[(n + 3) % nd] + 40, 2 * dims[(n + 5) % nd], bf, 3, n % 3, ab[n % 4][0],
                  ab[n % 4][1], n % 2, n % 2 ? 16 : 512, n % 2 ? 24 : 192, n % 2 ? 64 : 4096, wide);
    bf_case_w(200, 300, 1100, bf, 3, 0, 1.0f, 0.0f, 1, 512, wide ? 96 : 192, 4096, wide);
    bf_case_w(250, 130, 64, bf, 3, 1, 1.0f, 0.0f, 0, 64, 36, 64, wide);
    /* last row panels of exactly 8 and 4 rows (200 = 16 x 12 + 8, 256 = 21
     * x 12 + 4: the 8- and 4-row kernels write them directly), packed A and
     * A in place, bf16 C with a bias */
    bf_case_w(200, 96, 768, bf, 0, 0, 1.0f, 0.0f, 1, 4096, wide ? 96 : 192, 4096, wide);
    bf_case_w(256, 64, 640, bf, 3, 1, 1.0f, 0.0f, 1, 4096, 96, 4096, wide);
    bf_case_w(256, 70, 66, bf, 0, 2, -1.5f, 0.0f, 0, 64, 96, 64, wide);
}

/* the sweep of one mode where this CPU runs it, else a skip that says why */
static void sweep_if(int ok, const char *missing, const char *what, int wide) {
    if (!ok) {
        printf("  (no %s on this CPU: the %s is not run)\n", missing, what);
        skip();
    }
    bf_sweep(wide);
}

/* the f32 AVX-512 GEMM (the same driver, f32 words, FMA) */
static void test_sgemm_avx512(void **state) {
    (void)state;
    sweep_if(ct__sgemm_avx512_ok(), "AVX-512", "f32 AVX-512 GEMM", 1);
}

static void test_bf16dot(void **state) {
    (void)state;
    sweep_if(ct__gemm_bf16dot_ok(), "AVX512_BF16", "bf16 dot-product GEMM", 0);
}

/* A large f32 C written once (one K block, beta 0, no bias) is streamed
 * (ct__gemm_stream_min_bytes): the same bits as plain stores, full and
 * partial column tiles and 12/8/4-row panels alike, the padding of C
 * untouched, and a product with a bias or over two K blocks unaffected. */
static void test_stream_c(void **state) {
    (void)state;
    if (ct__cpu_cap() < CT_CAP_AVX2) skip();
    static const int64_t shapes[][3] = {{100, 96, 256}, {37, 160, 31}, {256, 70, 200}, {12, 32, 1}, {20, 64, 700},
                                        {300, 2048, 64}};
    /* the AVX2 sgemm, the AVX-512 sgemm, bf16dot with an f32 C, bf16dot with an F32R C */
    for (int bf = -1; bf < 3; bf++) {
        if (bf == 0 && !ct__sgemm_avx512_ok()) continue;
        if (bf > 0 && !ct__gemm_bf16dot_ok()) continue;
        int tc = bf == 2 ? CT_GEMM_F32R : CT_GEMM_F32;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int bias_on = 0; bias_on < 2; bias_on++) {
                int64_t M = shapes[i][0], N = shapes[i][1], K = shapes[i][2], ldc = (N + 16) / 16 * 16;
                float *A = fbuf(M * K), *B = fbuf(K * N), *bias = bias_on ? fbuf(N) : NULL;
                float *C[2];
                for (int v = 0; v < 2; v++) {
                    C[v] = aligned_alloc(64, (size_t)(M * ldc) * sizeof(float));
                    assert_non_null(C[v]);
                    for (int64_t k = 0; k < M * ldc; k++) C[v][k] = -7.0f;
                    int64_t old = ct__gemm_stream_min_bytes(v ? 0 : INT64_MAX);
                    if (bf < 0) /* 256-deep K blocks: {20, 64, 700} runs three, never streamed */
                        assert_int_equal(ct__sgemm_avx2_ex(M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, bias, C[v], ldc, 2,
                                                           256, 144, 4096, 128), 0);
                    else if (bf)
                        assert_int_equal(ct__gemm_bf16dot(M, N, K, 1.0f, A, CT_GEMM_F32, K, 1, B, CT_GEMM_F32, N,
                                                          1, 0.0f, bias, C[v], tc, ldc, 2), 0);
                    else
                        assert_int_equal(ct__sgemm_avx512_ex(M, N, K, 1.0f, A, K, 1, B, N, 1, 0.0f, bias, C[v], ldc,
                                                             2, 256, 96, 4096), 0);
                    ct__gemm_stream_min_bytes(old);
                }
                if (memcmp(C[0], C[1], (size_t)(M * ldc) * sizeof(float)))
                    fail_msg("streamed C differs: %s %lldx%lldx%lld bias %d",
                             bf == 2 ? "bf16dot f32r" : bf == 1 ? "bf16dot" : bf == 0 ? "sgemm avx512" : "sgemm avx2",
                             (long long)M, (long long)N, (long long)K, bias_on);
                for (int64_t r = 0; r < M; r++)
                    for (int64_t j = N; j < ldc; j++) assert_true(C[1][r * ldc + j] == -7.0f);
                free(A); free(B); free(bias); free(C[0]); free(C[1]);
            }
    }
}

/* Under the passive wait policy a product below CT_PASSIVE_MIN_MFLOP runs
 * on the calling thread (blas.c); GOMP_SPINCOUNT, when set, decides
 * instead; the own GEMM's bits do not change with it. */
static void test_passive_small(void **state) {
    (void)state;
    const char *keep[3] = {getenv("OMP_WAIT_POLICY"), getenv("GOMP_SPINCOUNT"), getenv("CT_PASSIVE_MIN_MFLOP")};
    char *saved[3];
    for (int i = 0; i < 3; i++) saved[i] = keep[i] ? strdup(keep[i]) : NULL;
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("CT_PASSIVE_MIN_MFLOP");
    setenv("OMP_WAIT_POLICY", "active", 1);
    assert_true(ct__par_small_reload() == 0 && !ct__par_too_small(1.0));
    setenv("OMP_WAIT_POLICY", "Passive", 1);
    assert_true(ct__par_small_reload() == 8e6);
    assert_true(ct__par_too_small(2.0 * 64 * 64 * 64) && !ct__par_too_small(2.0 * 256 * 256 * 256));
    setenv("CT_PASSIVE_MIN_MFLOP", "0.5", 1);
    assert_true(ct__par_small_reload() == 5e5);
    setenv("GOMP_SPINCOUNT", "30000", 1); /* spinning after all */
    assert_true(ct__par_small_reload() == 0);
    setenv("OMP_WAIT_POLICY", "active", 1);
    setenv("GOMP_SPINCOUNT", "0", 1);
    assert_true(ct__par_small_reload() == 5e5);
    /* a product that then runs on one thread gives the bits of two */
    unsetenv("CT_PASSIVE_MIN_MFLOP");
    assert_true(ct__par_small_reload() == 8e6);
    if (have_avx2()) { /* 3.6 MFLOP: one thread, then two */
        gcase c = {60, 100, 300, 0, 1, 0, 1, 1, 0, 0};
        unsigned s0 = g_seed;
        float *r1 = run_case(&c, 2, 256, 144, 4096, 128);
        unsetenv("GOMP_SPINCOUNT");
        setenv("OMP_WAIT_POLICY", "active", 1);
        ct__par_small_reload();
        g_seed = s0;
        float *r2 = run_case(&c, 2, 256, 144, 4096, 128);
        assert_memory_equal(r1, r2, sizeof(float) * 60 * 100);
        free(r1);
        free(r2);
    }
    /* row loops go parallel later when passive (CT_PAR_GRAIN), the bits the
     * same: a column sum, a row softmax and a layer norm of [100, 700] (70K
     * elements: two threads when active, one when passive) */
    ct_set_num_threads(2);
    float *res[2][3];
    for (int pass = 0; pass < 2; pass++) {
        setenv("OMP_WAIT_POLICY", pass ? "passive" : "active", 1);
        unsetenv("GOMP_SPINCOUNT");
        ct__par_small_reload();
        assert_int_equal(ct__grain_scale(), pass ? 4 : 1);
        ct_scope sc = ct_scope_begin();
        ct_manual_seed(7);
        ct_tensor *x = ct_randn(CT_SHAPE(100, 700), CT_F32);
        int64_t d0 = 0, ns = 700;
        ct_tensor *r[3] = {ct_sum(x, &d0, 1, false), ct_softmax(x, 1), ct_layer_norm(x, &ns, 1, NULL, NULL, 1e-5)};
        for (int k = 0; k < 3; k++) {
            assert_non_null(r[k]);
            size_t nb = sizeof(float) * (size_t)ct_numel(r[k]);
            res[pass][k] = malloc(nb);
            memcpy(res[pass][k], ct_data_ptr(r[k]), nb);
            if (pass) {
                assert_memory_equal(res[0][k], res[1][k], nb);
                free(res[0][k]);
                free(res[1][k]);
            }
        }
        ct_scope_end(sc);
    }
    const char *names[3] = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "CT_PASSIVE_MIN_MFLOP"};
    for (int i = 0; i < 3; i++) {
        if (saved[i]) setenv(names[i], saved[i], 1);
        else unsetenv(names[i]);
        free(saved[i]);
    }
    ct__par_small_reload();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        /* first: it forks before this process has picked its CPU level */
        cmocka_unit_test(test_default_capability_uses_blas),
        cmocka_unit_test(test_stream_c),
        cmocka_unit_test(test_passive_small),
        cmocka_unit_test(test_routing_rule),
        cmocka_unit_test(test_degenerate),
        cmocka_unit_test(test_edges_small),
        cmocka_unit_test(test_larger),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_ops_noncontiguous),
        cmocka_unit_test(test_linear_kept_weights),
        cmocka_unit_test(test_bf16dot),
        cmocka_unit_test(test_sgemm_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
