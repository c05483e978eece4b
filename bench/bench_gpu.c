/* bench_gpu.c -- make bench's GPU cases, per device present.
 *
 *   build/bench_gpu [bench.json] [--reps R]
 *
 * CUDA (each case only where a CUDA device is): mm f32 1024^3 and 4096^3,
 * bmm 64 x [128,64] @ [64,128] (cuBLAS), and host -> device copies of
 * 64 MiB from pageable and from pinned memory; in GFLOP/s or GB/s, medians
 * of R reps after a warm-up, each rep ended by ct_cuda_synchronize.  With
 * torch on the same GPU (CT_TORCH_PYTHON, default python3, running
 * bench/gpu_ref.py), torch's figure is printed beside each and written as
 * the reference.
 *
 * The OpenCL devices are bench_device.c's (beside the cpu, marked as a
 * correctness device on PoCL).
 *
 * Without a CUDA device the cases are skipped with the reason. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "bench_util.h"

static int g_reps = 10;
static const char *g_json;

/* median ms of fn over g_reps after one warm-up; each rep waits for d */
typedef void (*rep_fn)(void *ctx);
static double time_ms(rep_fn fn, void *ctx, ct_dev d) {
    double v[64];
    int n = g_reps < 64 ? g_reps : 64;
    fn(ctx);
    if (ct_dev_synchronize(d)) return -1;
    for (int r = 0; r < n; r++) {
        double t0 = bench_now_ms();
        ct_scope s = ct_scope_begin();
        fn(ctx);
        ct_scope_end(s);
        if (ct_dev_synchronize(d)) return -1;
        v[r] = bench_now_ms() - t0;
    }
    return bench_stats(v, n).med;
}

typedef struct mm_ctx { ct_tensor *a, *b; bool batched; } mm_ctx;
static void rep_mm(void *c) {
    mm_ctx *m = c;
    if (!(m->batched ? ct_bmm(m->a, m->b) : ct_mm(m->a, m->b))) fprintf(stderr, "bench_gpu: %s\n", ct_last_error());
}

typedef struct cp_ctx { ct_tensor *src; ct_dev d; } cp_ctx;
static void rep_copy(void *c) {
    cp_ctx *p = c;
    if (!ct_to_dev(p->src, p->d)) fprintf(stderr, "bench_gpu: %s\n", ct_last_error());
}

/* torch's ms for a case on the same GPU, from bench/gpu_ref.py (-1: none) */
static double torch_ms(const char *name) {
    static char lines[64][160];
    static int nl = -1;
    if (nl < 0) {
        nl = 0;
        const char *py = getenv("CT_TORCH_PYTHON") ? getenv("CT_TORCH_PYTHON") : "python3";
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s bench/gpu_ref.py %d 2>/dev/null", py, g_reps);
        FILE *f = popen(cmd, "r");
        if (f) {
            while (nl < 64 && fgets(lines[nl], sizeof lines[nl], f)) nl++;
            pclose(f);
        }
    }
    size_t L = strlen(name);
    for (int k = 0; k < nl; k++)
        if (strncmp(lines[k], name, L) == 0 && lines[k][L] == '\t') return atof(lines[k] + L + 1);
    return -1;
}

static void report(const char *name, double ms, double work, const char *unit, double ref_ms, const char *refname) {
    double ours = work / ms / 1e6, ref = ref_ms > 0 ? work / ref_ms / 1e6 : 0; /* per s, in 1e9 */
    if (ref > 0)
        printf("%-44s %9.2f ms %9.1f %s   %s %9.2f ms %9.1f %s\n", name, ms, ours, unit, refname, ref_ms, ref, unit);
    else
        printf("%-44s %9.2f ms %9.1f %s   (%s: not measured)\n", name, ms, ours, unit, refname);
    if (g_json) bench_json_add(g_json, name, ours, ref > 0 ? ref : ours, unit, "\"device\": \"gpu\"");
}

static void cuda_cases(void) {
    if (!ct_cuda_is_available()) {
        printf("bench_gpu: CUDA cases skipped: %s\n", ct_last_error());
        ct_clear_error();
        return;
    }
    ct_dev d = CT_DEV(CT_CUDA, 0);
    printf("bench_gpu: cuda:0 is %s (torch beside it where bench/gpu_ref.py runs)\n", ct_cuda_get_device_name(0));
    ct_manual_seed(0);
    static const struct { const char *name; int64_t M, N, K, B; } mm[] = {
        {"gpu mm f32 1024^3", 1024, 1024, 1024, 0},
        {"gpu mm f32 4096^3", 4096, 4096, 4096, 0},
        {"gpu bmm f32 64x[128,64]@[64,128]", 128, 128, 64, 64},
    };
    for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
        ct_scope s = ct_scope_begin();
        mm_ctx c = {NULL, NULL, mm[k].B > 0};
        if (c.batched) {
            c.a = ct_to_dev(ct_randn((int64_t[]){mm[k].B, mm[k].M, mm[k].K}, 3, CT_F32), d);
            c.b = ct_to_dev(ct_randn((int64_t[]){mm[k].B, mm[k].K, mm[k].N}, 3, CT_F32), d);
        } else {
            c.a = ct_to_dev(ct_randn((int64_t[]){mm[k].M, mm[k].K}, 2, CT_F32), d);
            c.b = ct_to_dev(ct_randn((int64_t[]){mm[k].K, mm[k].N}, 2, CT_F32), d);
        }
        double ms = c.a && c.b ? time_ms(rep_mm, &c, d) : -1;
        if (ms < 0) { printf("%s: %s\n", mm[k].name, ct_last_error()); ct_clear_error(); ct_scope_end(s); continue; }
        double flop = 2.0 * (double)mm[k].M * (double)mm[k].N * (double)mm[k].K * (double)(c.batched ? mm[k].B : 1);
        report(mm[k].name, ms, flop, "GFLOP/s", torch_ms(mm[k].name), "torch");
        ct_scope_end(s);
    }
    for (int pinned = 0; pinned < 2; pinned++) {
        ct_scope s = ct_scope_begin();
        const char *name = pinned ? "gpu h2d 64MiB pinned" : "gpu h2d 64MiB pageable";
        ct_tensor *x = ct_rand((int64_t[]){16 << 20}, 1, CT_F32);
        cp_ctx c = {pinned ? ct_pin_memory(x) : x, d};
        double ms = c.src ? time_ms(rep_copy, &c, d) : -1;
        if (ms < 0) { printf("%s: %s\n", name, ct_last_error()); ct_clear_error(); }
        else report(name, ms, (double)(64 << 20), "GB/s", torch_ms(name), "torch");
        ct_scope_end(s);
    }
}

int main(int argc, char **argv) {
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--reps") == 0 && k + 1 < argc) g_reps = atoi(argv[++k]);
        else g_json = argv[k];
    }
    if (g_reps < 1) g_reps = 1;
    cuda_cases();
    return 0;
}
