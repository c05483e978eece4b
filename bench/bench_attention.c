/* bench_attention.c -- scaled_dot_product_attention beside PyTorch's
 * (issue 7): forward (no grad) and forward + backward at L = S = 512, 1024,
 * 2048, 4096 with B = 1, H = 8, E = 64, float32, no mask, not causal.
 *
 *   build/bench_attention [build/bench.json] [--threads N] [--reps N]
 *                         [--lens 512,1024] [--kernel auto|flash|mem|math]
 *
 * Protocol: for every case ours runs, then torch's (bench/attention_ref.py
 * with $CT_BENCH_PYTHON, else python3 on PATH -- torch >= 2.0 from PyPI),
 * each in a freshly forked process: 1 warm-up, then reps timed repetitions
 * (default 5; 3 at L = 4096), median and min..max; the parent reads the
 * child's peak RSS (ru_maxrss from wait4).  The baseline peak of each side
 * (inputs made, nothing run) is printed, and "extra" is peak - baseline:
 * the memory the attention itself needed.  Same thread count on both
 * sides: ct_set_num_threads(n) / torch.set_num_threads(n).  torch runs with
 * OMP_WAIT_POLICY=PASSIVE and GLIBC_TUNABLES=glibc.malloc.hugetlb=1:
 * glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184.
 * Rows go to bench.json as "sdpa_<fwd|fwdbwd>_L<L>_t<n>" (ms) with the
 * peaks in MB. */
#define _GNU_SOURCE
#include <ctorch/ctorch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define MAXR 64
enum { B_ = 1, H_ = 8, E_ = 64 };

typedef struct res { int ok, n; double ms[MAXR]; double peak_mb; } res;

static double rss_mb(const struct rusage *ru) { return (double)ru->ru_maxrss / 1024.0; }

/* ours, in a forked child; mode 0 fwd, 1 fwdbwd, 2 baseline */
/* The parent's side of a forked case: reads the child's "ok <ms>..." line
 * from rfd, waits for it and takes its peak RSS. */
static res collect(pid_t pid, int rfd) {
    res r = {0};
    FILE *f = fdopen(rfd, "r");
    char line[8192] = {0};
    if (f && fgets(line, sizeof line, f) && !strncmp(line, "ok", 2)) {
        r.ok = 1;
        char *p = line + 2, *e;
        while (r.n < MAXR) {
            double x = strtod(p, &e);
            if (e == p) break;
            r.ms[r.n++] = x;
            p = e;
        }
    }
    if (f) fclose(f);
    else close(rfd);
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) r.ok = 0;
    r.peak_mb = rss_mb(&ru);
    return r;
}

static res run_ours(int mode, int64_t L, int threads, int reps, unsigned kernel) {
    res r = {0};
    int fd[2];
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        ct_set_num_threads(threads);
        ct_sdp_kernel_set(kernel);
        ct_manual_seed(0);
        ct_tensor *q = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
        ct_tensor *k = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
        ct_tensor *v = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
        ct_tensor *g = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
        if (mode == 1)
            if (ct_set_requires_grad(q, true) || ct_set_requires_grad(k, true) ||
                ct_set_requires_grad(v, true))
                _exit(2);
        double ms[MAXR];
        int n = 0;
        for (int it = 0; mode != 2 && it < reps + 1; it++) {
            ct_scope s = ct_scope_begin();
            double t0 = bench_now_ms();
            if (mode == 0) {
                bool prev = ct_set_grad_enabled(false);
                ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0, false);
                ct_set_grad_enabled(prev);
                if (!o) { fprintf(stderr, "%s\n", ct_last_error()); _exit(3); }
            } else {
                ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0, false);
                if (!o || ct_backward(o, g, false, false)) { fprintf(stderr, "%s\n", ct_last_error()); _exit(3); }
                ct_zero_grad(q); ct_zero_grad(k); ct_zero_grad(v);
            }
            double t1 = bench_now_ms();
            ct_scope_end(s);
            if (it > 0 && n < MAXR) ms[n++] = t1 - t0;
        }
        FILE *f = fdopen(fd[1], "w");
        fprintf(f, "ok");
        for (int i = 0; i < n; i++) fprintf(f, " %.4f", ms[i]);
        fprintf(f, "\n");
        fclose(f);
        _exit(0);
    }
    close(fd[1]);
    return collect(pid, fd[0]);
}

static res run_torch(const char *py, int mode, int64_t L, int threads, int reps) {
    res r = {0};
    int fd[2];
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
               "glibc.malloc.trim_threshold=17179869184", 1);
        char a[8][32];
        snprintf(a[0], 32, "%d", B_); snprintf(a[1], 32, "%d", H_);
        snprintf(a[2], 32, "%lld", (long long)L); snprintf(a[3], 32, "%d", E_);
        snprintf(a[4], 32, "%d", threads); snprintf(a[5], 32, "%d", reps);
        const char *m = mode == 0 ? "fwd" : mode == 1 ? "fwdbwd" : "none";
        execlp(py, py, "bench/attention_ref.py", m, a[0], a[1], a[2], a[3], a[4], a[5], "1",
               (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    return collect(pid, fd[0]);
}

int main(int argc, char **argv) {
    const char *json = NULL;
    int threads = 1, reps = 5;
    int64_t lens[8] = {512, 1024, 2048, 4096};
    int nl = 4;
    unsigned kernel = CT_SDP_ALL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lens") && i + 1 < argc) {
            nl = 0;
            for (char *p = argv[++i]; *p && nl < 8;) {
                lens[nl++] = strtoll(p, &p, 10);
                if (*p == ',') p++;
                else break;
            }
        } else if (!strcmp(argv[i], "--kernel") && i + 1 < argc) {
            const char *k = argv[++i];
            kernel = !strcmp(k, "flash") ? CT_SDP_FLASH : !strcmp(k, "mem") ? CT_SDP_MEM_EFFICIENT
                   : !strcmp(k, "math") ? CT_SDP_MATH : CT_SDP_ALL;
        } else if (argv[i][0] != '-') json = argv[i];
    }
    if (reps < 1) reps = 1;
    if (reps > MAXR - 1) reps = MAXR - 1;
    const char *py = getenv("CT_BENCH_PYTHON");
    if (!py || !*py) py = "python3";
    printf("sdpa: B=%d H=%d E=%d f32, no mask, threads=%d, kernel mask %u, reference %s "
           "(bench/attention_ref.py)\n", B_, H_, E_, threads, kernel, py);
    res bo = run_ours(2, 512, threads, 0, kernel), bt = run_torch(py, 2, 512, threads, 0);
    printf("baseline peak RSS: ours %.1f MB, torch %.1f MB%s\n", bo.peak_mb, bt.peak_mb,
           bt.ok ? "" : " (torch side failed)");
    printf("%-22s %10s %10s %7s %22s %22s\n", "case", "ours ms", "torch ms", "ratio",
           "ours peak/extra MB", "torch peak/extra MB");
    for (int mode = 0; mode < 2; mode++) {
        for (int li = 0; li < nl; li++) {
            int64_t L = lens[li];
            int rp = L >= 4096 && reps > 3 ? 3 : reps;
            res o = run_ours(mode, L, threads, rp, kernel);
            res t = run_torch(py, mode, L, threads, rp);
            char name[96];
            snprintf(name, sizeof name, "sdpa_%s_L%lld_t%d", mode ? "fwdbwd" : "fwd", (long long)L,
                     threads);
            if (!o.ok) { printf("%-22s ours failed\n", name); continue; }
            bench_stat so = bench_stats(o.ms, o.n);
            bench_stat st = t.ok ? bench_stats(t.ms, t.n) : (bench_stat){0, 0, 0};
            char ob[64], tb[64];
            snprintf(ob, sizeof ob, "%.1f / %.1f", o.peak_mb, o.peak_mb - bo.peak_mb);
            snprintf(tb, sizeof tb, "%.1f / %.1f", t.peak_mb, t.peak_mb - bt.peak_mb);
            printf("%-22s %10.2f %10.2f %7.3f %22s %22s   (ours %.2f..%.2f, torch %.2f..%.2f)\n",
                   name, so.med, st.med, t.ok ? so.med / st.med : 0.0, ob, t.ok ? tb : "failed",
                   so.min, so.max, st.min, st.max);
            fflush(stdout);
            if (json && t.ok) {
                char extra[256];
                snprintf(extra, sizeof extra, "\"threads\": %d, \"peak_mb_ours\": %.1f, "
                         "\"peak_mb_ref\": %.1f, \"extra_mb_ours\": %.1f, \"extra_mb_ref\": %.1f",
                         threads, o.peak_mb, t.peak_mb, o.peak_mb - bo.peak_mb, t.peak_mb - bt.peak_mb);
                bench_json_add(json, name, so.med, st.med, "ms", extra);
            }
        }
    }
    return 0;
}
