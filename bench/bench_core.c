/* bench_core.c -- the core library beside its references, in one run:
 *   matmul_f32_1024: ct_matmul 1024x1024x1024 f32 vs a bare cblas_sgemm
 *   axpb_f32_16M:    y = a*x + b on 16M f32 (one fused op, ct_add_scaled)
 *                    vs a plain C loop compiled -O3 -march=native
 * Alternates ours and the reference, warm-up then >= 10 timed repetitions,
 * prints median (min..max) and the ratio, merges rows into bench.json. */
#include <cblas.h>
#include <ctorch/ctorch.h>
#include <stdio.h>

#include "bench_util.h"

#define REPS 15

static void report(const char *json, const char *name, double *ours, double *ref, int n,
                   const char *note) {
    bench_stat o = bench_stats(ours, n), r = bench_stats(ref, n);
    printf("%-18s ours %9.3f ms (%.3f..%.3f)   reference %9.3f ms (%.3f..%.3f)   ratio %.3f  %s\n",
           name, o.med, o.min, o.max, r.med, r.min, r.max, o.med / r.med, note);
    char extra[256];
    snprintf(extra, sizeof extra, "\"threads\": %d, \"reference_name\": \"%s\"", ct_get_num_threads(), note);
    bench_json_add(json, name, o.med, r.med, "ms", extra);
}

__attribute__((noinline)) static void axpb_ref(float *restrict y, const float *restrict x, float a,
                                               float b, long n) {
    for (long i = 0; i < n; i++) y[i] = a * x[i] + b;
}

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "build/bench.json";
    printf("ctorch core benchmarks (%d threads; medians of %d runs, min..max)\n",
           ct_get_num_threads(), REPS);
    ct_manual_seed(1);
    double ours[REPS], ref[REPS];

    /* ---- matmul 1024^3 f32 ---- */
    {
        const int N = 1024;
        ct_tensor *a = ct_randn(CT_SHAPE(N, N), CT_F32);
        ct_tensor *b = ct_randn(CT_SHAPE(N, N), CT_F32);
        ct_tensor *c = ct_empty(CT_SHAPE(N, N), CT_F32);
        const float *pa = ct_data_ptr(a), *pb = ct_data_ptr(b);
        float *pc = ct_data_ptr(c);
        for (int w = 0; w < 2; w++) {
            ct_scope s = ct_scope_begin();
            ct_matmul(a, b);
            ct_scope_end(s);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.f, pa, N, pb, N, 0.f, pc, N);
        }
        for (int r = 0; r < REPS; r++) {
            double t0 = bench_now_ms();
            ct_scope s = ct_scope_begin();
            ct_tensor *y = ct_matmul(a, b);
            ct_scope_end(s);
            double t1 = bench_now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.f, pa, N, pb, N, 0.f, pc, N);
            double t2 = bench_now_ms();
            if (!y) { fprintf(stderr, "matmul failed: %s\n", ct_last_error()); return 1; }
            ours[r] = t1 - t0;
            ref[r] = t2 - t1;
        }
        report(json, "matmul_f32_1024", ours, ref, REPS, "cblas_sgemm");
        ct_release(a); ct_release(b); ct_release(c);
    }

    /* ---- y = a*x + b, 16M f32: one thread on both sides (the C loop is serial) ---- */
    {
        int saved_threads = ct_get_num_threads();
        ct_set_num_threads(1);
        const long n = 16L << 20;
        const float av = 1.5f, bv = -0.25f;
        ct_tensor *x = ct_randn(CT_SHAPE(n), CT_F32);
        ct_tensor *yref = ct_empty(CT_SHAPE(n), CT_F32);
        ct_tensor *bt = ct_scalar(bv, CT_F32);
        const float *px = ct_data_ptr(x);
        float *py = ct_data_ptr(yref);
        for (int w = 0; w < 2; w++) {
            ct_scope s = ct_scope_begin();
            ct_add_scaled(bt, x, av);
            ct_scope_end(s);
            axpb_ref(py, px, av, bv, n);
        }
        int ok = 1;
        for (int r = 0; r < REPS; r++) {
            double t0 = bench_now_ms();
            ct_scope s = ct_scope_begin();
            ct_tensor *y = ct_add_scaled(bt, x, av);
            double t1 = bench_now_ms();
            if (!y) { fprintf(stderr, "axpb failed: %s\n", ct_last_error()); return 1; }
            if (r == 0) ok = ct_allclose(y, yref, 1e-6, 1e-6, false) == 1;
            ct_scope_end(s);
            double t2 = bench_now_ms();
            axpb_ref(py, px, av, bv, n);
            double t3 = bench_now_ms();
            ours[r] = t1 - t0; /* releasing the result (t1..t2) is not timed */
            ref[r] = t3 - t2;
        }
        if (!ok) { fprintf(stderr, "axpb: results differ from the reference loop\n"); return 1; }
        report(json, "axpb_f32_16M", ours, ref, REPS, "C loop -O3 -march=native, 1 thread");
        ct_set_num_threads(saved_threads);
        ct_release(x); ct_release(yref); ct_release(bt);
    }
    printf("wrote %s\n", json);
    return 0;
}
