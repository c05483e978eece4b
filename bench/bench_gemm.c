/* bench_gemm.c -- ctorch's own AVX2 f32 GEMM (src/backend/cpu/gemm_avx2.c)
 * against OpenBLAS's cblas_sgemm on the shapes that matter here, the two
 * interleaved rep by rep (A B B A ...) in one process (this host is shared and noisy:
 * compare the medians AND the minima of one run, never runs taken apart).
 *
 *   env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE \
 *       build/bench_gemm [--threads N] [--reps R] [--only SUBSTRING] [--cold]
 *
 * Shapes: 1024^3; 4096x4096 @ 4096x64 (issue 6's skinny case); the four
 * TransformerEncoderLayer linears (2048 tokens, x @ W^T); BERT-base linears
 * (1024 tokens); bmm 64 x [128,64] @ [64,128] (own: one matrix per thread,
 * as linalg.c runs a batch; OpenBLAS: one threaded call per matrix, as
 * before); two conv-as-GEMM shapes (weights [Cout, Cin*k*k] @ columns); the
 * GPT-2 small training step's thirteen shapes at 4 x 64 tokens. */
#define _GNU_SOURCE
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/gemm_impl.h"

typedef struct shape {
    const char *name;
    int M, N, K, tb, batch, ta; /* ta: A is read transposed (A^T stored [K, M], a weight gradient) */
} shape;

static const shape g_shapes[] = {
    {"1024^3", 1024, 1024, 1024, 0, 1, 0},
    {"4096x4096@4096x64", 4096, 64, 4096, 0, 1, 0},
    {"linear 2048 768x256", 2048, 768, 256, 1, 1, 0},
    {"linear 2048 256x256", 2048, 256, 256, 1, 1, 0},
    {"linear 2048 1024x256", 2048, 1024, 256, 1, 1, 0},
    {"linear 2048 256x1024", 2048, 256, 1024, 1, 1, 0},
    {"bert 1024 768x768", 1024, 768, 768, 1, 1, 0},
    {"bert 1024 3072x768", 1024, 3072, 768, 1, 1, 0},
    {"bert 1024 768x3072", 1024, 768, 3072, 1, 1, 0},
    {"bmm 64x[128,64]@[64,128]", 128, 128, 64, 0, 64, 0},
    {"conv 64x576@576x3136", 64, 3136, 576, 0, 1, 0},
    {"conv 256x2304@2304x196", 256, 196, 2304, 0, 1, 0},
    /* GPT-2 small at 4 x 64 tokens (issue 22): Conv1D weights [in, out], the
     * LM head x @ wte^T, the data gradients dY @ W^T and the weight
     * gradients X^T @ dY */
    {"gpt2 qkv 256x2304x768", 256, 2304, 768, 0, 1, 0},
    {"gpt2 fc 256x3072x768", 256, 3072, 768, 0, 1, 0},
    {"gpt2 proj 256x768x3072", 256, 768, 3072, 0, 1, 0},
    {"gpt2 attnproj 256x768x768", 256, 768, 768, 0, 1, 0},
    {"gpt2 lmhead 256x50304x768", 256, 50304, 768, 1, 1, 0},
    {"gpt2 dX qkv 256x768x2304", 256, 768, 2304, 1, 1, 0},
    {"gpt2 dX fc 256x768x3072", 256, 768, 3072, 1, 1, 0},
    {"gpt2 dX proj 256x3072x768", 256, 3072, 768, 1, 1, 0},
    {"gpt2 dX lmhead 256x768x50304", 256, 768, 50304, 0, 1, 0},
    {"gpt2 dW qkv 768x2304x256", 768, 2304, 256, 0, 1, 1},
    {"gpt2 dW fc 768x3072x256", 768, 3072, 256, 0, 1, 1},
    {"gpt2 dW proj 3072x768x256", 3072, 768, 256, 0, 1, 1},
    {"gpt2 dW lmhead 50304x768x256", 50304, 768, 256, 0, 1, 1},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    unsigned s = 1234567u;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        p[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    return p;
}

static void run_own(const shape *s, const float *A, const float *B, float *C, int nt) {
    int64_t M = s->M, N = s->N, K = s->K;
    int64_t sbk = s->tb ? 1 : N, sbn = s->tb ? K : 1;
    if (s->batch > 1) {
#pragma omp parallel for schedule(static) num_threads(nt)
        for (int b = 0; b < s->batch; b++)
            (void)ct__sgemm_avx2(M, N, K, 1.0f, A + b * M * K, K, 1, B + b * K * N, sbk, sbn, 0.0f,
                                 NULL, C + b * M * N, N, 1);
        return;
    }
    int64_t sam = s->ta ? 1 : K, sak = s->ta ? M : 1;
    if (ct__sgemm_avx2(M, N, K, 1.0f, A, sam, sak, B, sbk, sbn, 0.0f, NULL, C, N, nt)) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
}

static void run_blas(const shape *s, const float *A, const float *B, float *C) {
    int M = s->M, N = s->N, K = s->K;
    for (int b = 0; b < s->batch; b++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                    s->tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A + (size_t)b * M * K,
                    s->ta ? M : K, B + (size_t)b * K * N, s->tb ? K : N, 0.0f,
                    C + (size_t)b * M * N, N);
}

int main(int argc, char **argv) {
    int nt = ct_get_num_threads(), reps = 15;
    const char *only = NULL;
    int cold = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) nt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--cold")) cold = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--only SUBSTRING] [--cold]\n", argv[0]);
            return 2;
        }
    }
    if (nt < 1) nt = 1;
    if (reps < 3) reps = 3;
    if (ct__cpu_cap_detected() < CT_CAP_AVX2) {
        printf("bench_gemm: this CPU has no AVX2+FMA; ctorch uses OpenBLAS only\n");
        return 0;
    }
    ct_set_num_threads(nt);
#ifdef _OPENMP
    omp_set_num_threads(nt); /* the OpenMP OpenBLAS follows it */
#endif
    /* --cold: 128 MiB written before every timed product, so that its
     * operands come from DRAM, as a model's weights and saved activations
     * do in a training step (warm: they stay in L3 rep to rep) */
    size_t nflush = cold ? ((size_t)128 << 20) / sizeof(float) : 0;
    float *flush = cold ? rnd(nflush) : NULL;
    printf("GFLOP/s, %d thread%s, median / min time of %d interleaved reps%s\n", nt,
           nt > 1 ? "s" : "", reps, cold ? ", caches flushed before each (--cold)" : "");
    printf("%-26s %17s %17s %13s\n", "shape", "own med/best", "openblas med/best",
           "time ratio");
    double *to = malloc(sizeof(double) * (size_t)reps), *tb = malloc(sizeof(double) * (size_t)reps);
    for (size_t si = 0; si < sizeof(g_shapes) / sizeof(g_shapes[0]); si++) {
        const shape *s = &g_shapes[si];
        if (only && !strstr(s->name, only)) continue;
        size_t na = (size_t)s->batch * s->M * s->K, nb = (size_t)s->batch * s->K * s->N,
               nc = (size_t)s->batch * s->M * s->N;
        float *A = rnd(na), *B = rnd(nb), *C = rnd(nc);
        double fl = 2.0 * s->M * s->N * s->K * s->batch;
        int inner = fl < 2e8 ? (int)(2e8 / fl) + 1 : 1;
        /* A B B A ...: neither side always runs right after the other */
        for (int r = -1; r < reps; r++) {
            double t_own = 0, t_blas = 0;
            for (int side = 0; side < 2; side++) {
                int own = (side == 0) == ((r & 1) == 0);
                if (flush) {
#pragma omp parallel for num_threads(nt) schedule(static)
                    for (size_t q = 0; q < nflush; q += 16) flush[q] += 1.0f;
                }
                double t0 = now();
                for (int i = 0; i < inner; i++) {
                    if (own) run_own(s, A, B, C, nt);
                    else run_blas(s, A, B, C);
                }
                double t = (now() - t0) / inner;
                if (own) t_own = t;
                else t_blas = t;
            }
            if (r >= 0) {
                to[r] = t_own;
                tb[r] = t_blas;
            }
        }
        qsort(to, (size_t)reps, sizeof(double), cmpd);
        qsort(tb, (size_t)reps, sizeof(double), cmpd);
        double mo = to[reps / 2], mb = tb[reps / 2];
        printf("%-26s %8.1f/%8.1f %8.1f/%8.1f %6.2f/%6.2f\n", s->name, fl / mo * 1e-9,
               fl / to[0] * 1e-9, fl / mb * 1e-9, fl / tb[0] * 1e-9, mo / mb, to[0] / tb[0]);
        fflush(stdout);
        free(A);
        free(B);
        free(C);
    }
    free(to);
    free(tb);
    free(flush);
    return 0;
}
