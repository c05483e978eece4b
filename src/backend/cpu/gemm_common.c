/* gemm_common.c -- what the own GEMMs (gemm_avx2.c, gemm_avx512.c) share
 * (gemm_impl.h): the degenerate product, the rule that splits C between
 * threads, the team that runs the per-thread workers, and the walk that
 * packs B once for kept weights.  Plain C: the ISA-specific work stays in
 * the callbacks. */
#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "blas.h"
#include "cpu_caps.h"
#include "gemm_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

void ct__gemm_scale_c(int64_t M, int64_t N, float beta, const float *bias, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        if (beta == 0.0f) memset(c, 0, sizeof(float) * (size_t)N);
        else if (bias)
            for (int64_t j = 0; j < N; j++) c[j] = beta == 1.0f ? bias[j] : beta * bias[j];
        else if (beta != 1.0f)
            for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
}

/* ---- gemm_avx512.c's settings and CPU check (plain code: see gemm_impl.h) */
static ct_gemm512_cfg g_cfg512 = {4096, 96, 4096, 256, 96, 4096, 0, 0, 0};
static pthread_once_t g_cfg512_once = PTHREAD_ONCE_INIT;

static void cfg512_init(void) {
    ct_gemm512_cfg *c = &g_cfg512;
    const int MR = CT_GEMM512_MR, NR = CT_GEMM512_NR;
    const char *s = getenv("CT_GEMM_BF16_BLOCK");
    int kc, mc, nc;
    if (s && sscanf(s, "%d,%d,%d", &kc, &mc, &nc) == 3 && kc >= 2 && kc <= 8192 && mc >= MR &&
        mc <= 4096 && nc >= NR && nc <= 65536) {
        c->kc = kc / 2 * 2;
        c->mc = mc / MR * MR;
        c->nc = nc / NR * NR;
    }
    s = getenv("CT_GEMM_AVX512_BLOCK");
    if (s && sscanf(s, "%d,%d,%d", &kc, &mc, &nc) == 3 && kc >= 1 && kc <= 8192 && mc >= MR && mc <= 4096 &&
        nc >= NR && nc <= 65536) {
        c->kcw = kc;
        c->mcw = mc / MR * MR;
        c->ncw = nc / NR * NR;
    }
    s = getenv("CT_GEMM_BF16_APACK");
    c->apack = s && *s == '1';
    unsigned a = 0, b = 0, cx = 0, d = 0;
    int bf16 = __get_cpuid_count(7, 1, &a, &b, &cx, &d) && ((a >> 5) & 1);
    c->ok512 = ct__cpu_cap() >= CT_CAP_AVX512;
    c->ok = bf16 && c->ok512;
}

const ct_gemm512_cfg *ct__gemm512_cfg(void) {
    pthread_once(&g_cfg512_once, cfg512_init);
    return &g_cfg512;
}

int ct__gemm_bf16dot_ok(void) { return ct__gemm512_cfg()->ok; }
int ct__sgemm_avx512_ok(void) { return ct__gemm512_cfg()->ok512; }

/* an f32 C of at least this many bytes, written once (one K block, beta 0,
 * no bias), is written with non-temporal stores by both own GEMMs:
 * CT_GEMM_STREAM_MB (4; 0 turns it off) */
static _Atomic int64_t g_stream_bytes = (int64_t)4 << 20;
static pthread_once_t g_stream_once = PTHREAD_ONCE_INIT;

static void stream_init(void) {
    const char *s = getenv("CT_GEMM_STREAM_MB");
    if (s && *s) g_stream_bytes = atol(s) > 0 ? (int64_t)atol(s) << 20 : INT64_MAX;
}

int64_t ct__gemm_stream_min_bytes(int64_t bytes) {
    pthread_once(&g_stream_once, stream_init);
    if (bytes < 0) return atomic_load_explicit(&g_stream_bytes, memory_order_relaxed);
    return atomic_exchange_explicit(&g_stream_bytes, bytes, memory_order_relaxed);
}

/* work units per thread of the own GEMMs' dynamic split: CT_GEMM_UNITS
 * (4; 1 gives each thread one contiguous share, the static split) */
static _Atomic int g_units = 4;
static pthread_once_t g_units_once = PTHREAD_ONCE_INIT;

static void units_init(void) {
    const char *s = getenv("CT_GEMM_UNITS");
    if (s && atoi(s) >= 1 && atoi(s) <= 64) g_units = atoi(s);
}

int ct__gemm_units(int units) {
    pthread_once(&g_units_once, units_init);
    if (units < 1) return atomic_load_explicit(&g_units, memory_order_relaxed);
    return atomic_exchange_explicit(&g_units, units, memory_order_relaxed);
}

int ct__gemm_split(int nthreads, int64_t M, int64_t N, int64_t K, int64_t nbm, int64_t npn, int cols_first,
                   int *split_n) {
    int nt = nthreads < 1 ? 1 : nthreads;
    /* below ~1 MFLOP a second thread costs more than it brings; under the
     * passive wait policy below what waking it costs (ct__par_too_small) */
    if ((double)M * (double)N * (double)K < 128.0 * 64 * 64 || ct__par_too_small(2.0 * (double)M * (double)N * (double)K))
        nt = 1;
    /* split the dimension whose partition repeats less packing: splitting
     * the rows makes every thread pack all of B (K x N), splitting the
     * columns makes every thread pack all of A (M x K, nothing when A is
     * read in place); each side needs a few tiles per thread */
    *split_n = 0;
    if (nt > 1) {
        int rows_ok = nbm >= 4 * nt, cols_ok = npn >= 4 * nt;
        if (cols_ok && (!rows_ok || cols_first || M < N)) *split_n = 1;
        else if (!rows_ok && nbm < 2 * nt) {
            if (npn >= 2 * nt) *split_n = 1;
            else nt = 1;
        }
    }
    return nt;
}

int64_t ct__gemm_plan_units(int nt, int64_t nsplit, int repack, int64_t extent, int64_t unit_min, int64_t *per) {
    /* units: ct__gemm_units() per thread, each at least 2 panels; where
     * every unit packs the other operand again (the B block in a row split,
     * a packed A in a column split) at least unit_min rows or columns each,
     * so that packing stays a few % of the unit's products; a multiple of nt */
    int64_t umax = repack ? extent / unit_min : nsplit / 2;
    if (umax > (int64_t)nt * ct__gemm_units(0)) umax = (int64_t)nt * ct__gemm_units(0);
    int64_t nunits = umax < nt ? nt : umax / nt * nt;
    *per = (nsplit + nunits - 1) / nunits;
    return nunits;
}

int ct__gemm_take_unit(atomic_llong *next, int64_t nunits, int64_t np, int64_t *p0, int64_t *p1) {
    for (;;) {
        int64_t u = atomic_fetch_add_explicit(next, 1, memory_order_relaxed);
        if (u >= nunits) return 0;
        *p0 = np * u / nunits;
        *p1 = np * (u + 1) / nunits;
        if (*p0 < *p1) return 1;
    }
}

void ct__gemm_team(int nt, ct_gemm_worker_fn fn, const void *ctx) {
#ifdef _OPENMP
    if (nt > 1) {
#pragma omp parallel num_threads(nt)
        {
            /* a smaller team than asked (nested or limited OpenMP) runs the
             * same nt workers, some threads more than one */
            int t = omp_get_thread_num(), n = omp_get_num_threads();
            for (int w = t; w < nt; w += n) fn(ctx, w, t);
        }
        return;
    }
#endif
    for (int w = 0; w < nt; w++) fn(ctx, w, 0);
}

int64_t ct__gemm_prepack_floats(int64_t N, int64_t K, int nr) { return K * ((N + nr - 1) / nr) * nr; }

void ct__gemm_prepack(int64_t N, int64_t K, int64_t kc, int nr_w, ct_gemm_pack_fn pack, const float *B,
                      int64_t sbk, int64_t sbn, float *dst) {
    const int64_t npn = (N + nr_w - 1) / nr_w, nkb = (K + kc - 1) / kc;
    const int nt = K * N >= (1 << 16) ? ct__num_threads() : 1;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t t = 0; t < nkb * npn; t++) {
        const int64_t pc = t / npn * kc, p = t % npn, kcb = K - pc < kc ? K - pc : kc;
        const int nr = (int)(N - p * nr_w < nr_w ? N - p * nr_w : nr_w);
        pack(kcb, nr, B + pc * sbk + p * nr_w * sbn, sbk, sbn, dst + pc * npn * nr_w + p * kcb * nr_w);
    }
}
