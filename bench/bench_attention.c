/* bench_attention.c -- scaled_dot_product_attention beside PyTorch's
 * (issue 7): forward (no grad) and forward + backward at L = S = 512, 1024,
 * 2048, 4096 with B = 1, H = 8, E = 64, float32, no mask, not causal.
 *
 *   build/bench_attention [build/bench.json] [--threads N] [--reps N]
 *                         [--lens 512,1024] [--kernel auto|flash|mem|math]
 *
 * Protocol: for every case both sides (ours in a forked process, torch's
 * bench/attention_ref.py with $CT_BENCH_PYTHON, else python3 on PATH --
 * torch >= 2.0 from PyPI -- in its own) make the inputs and run 1 warm-up;
 * then single timed repetitions alternate (who goes first alternates,
 * BENCH_SIDE_PAUSE_MS between sides), reps of each (default 15; 5 at L = 4096), median and
 * min..max: the host's load changes by the minute here, and this way both
 * sides see the same stretch of it.  The parent reads each process's peak
 * RSS (ru_maxrss from wait4).  The baseline peak of each side
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
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAXR 64
enum { B_ = 1, H_ = 8, E_ = 64 };

typedef struct res { int ok, n; double ms[MAXR]; double peak_mb; } res;


/* one repetition of ours: ms, or -1 */
static double ours_step(int mode, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *g) {
    ct_scope s = ct_scope_begin();
    double t0 = bench_now_ms();
    int ok;
    if (mode == 0) {
        bool prev = ct_set_grad_enabled(false);
        ok = ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0, false) != NULL;
        ct_set_grad_enabled(prev);
    } else {
        ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0, false);
        ok = o && ct_backward(o, g, false, false) == CT_OK;
        ct_zero_grad(q); ct_zero_grad(k); ct_zero_grad(v);
    }
    double t1 = bench_now_ms();
    if (!ok) fprintf(stderr, "ours: %s\n", ct_last_error());
    ct_scope_end(s);
    return ok ? t1 - t0 : -1;
}

/* ours: mode 0 fwd, 1 fwdbwd, 2 baseline (inputs made, nothing run) */
static void ours_child(int mode, int64_t L, int threads, unsigned kernel, FILE *in, FILE *out) {
    ct_set_num_threads(threads);
    ct_sdp_kernel_set(kernel);
    ct_manual_seed(0);
    ct_tensor *q = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
    ct_tensor *k = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
    ct_tensor *v = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
    ct_tensor *g = ct_randn(CT_SHAPE(B_, H_, L, E_), CT_F32);
    if (!in || !out) _exit(2);
    if (mode == 1)
        if (ct_set_requires_grad(q, true) || ct_set_requires_grad(k, true) || ct_set_requires_grad(v, true))
            _exit(2);
    if (mode != 2 && ours_step(mode, q, k, v, g) < 0) _exit(3); /* warm-up */
    fprintf(out, "ready\n");
    fflush(out);
    char line[64];
    while (fgets(line, sizeof line, in) && line[0] == 'r') {
        double ms = ours_step(mode, q, k, v, g);
        if (ms < 0) _exit(3);
        fprintf(out, "%.4f\n", ms);
        fflush(out);
    }
    _exit(0);
}

/* Starts one side's process for a case (torch when py is non-NULL). */
static int proc_open(bench_proc *p, const char *py, int mode, int64_t L, int threads, unsigned kernel) {
    memset(p, 0, sizeof *p);
    int a[2], b[2];
    if (pipe(a)) return -1;
    if (pipe(b)) { close(a[0]); close(a[1]); return -1; }
    fflush(NULL);
    p->pid = fork();
    if (p->pid < 0) return -1;
    if (p->pid == 0) {
        close(a[1]);
        close(b[0]);
        if (!py) ours_child(mode, L, threads, kernel, fdopen(a[0], "r"), fdopen(b[1], "w"));
        dup2(a[0], 0);
        dup2(b[1], 1);
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
               "glibc.malloc.trim_threshold=17179869184", 1);
        char x[8][32];
        snprintf(x[0], 32, "%d", B_); snprintf(x[1], 32, "%d", H_);
        snprintf(x[2], 32, "%lld", (long long)L); snprintf(x[3], 32, "%d", E_);
        snprintf(x[4], 32, "%d", threads);
        const char *m = mode == 0 ? "fwd" : mode == 1 ? "fwdbwd" : "none";
        if (mode == 2) /* the baseline: "none" prints "ok" and exits */
            execlp(py, py, "bench/attention_ref.py", m, x[0], x[1], x[2], x[3], x[4], "0", "0", (char *)NULL);
        execlp(py, py, "bench/attention_ref.py", m, x[0], x[1], x[2], x[3], x[4], "0", "1", (char *)NULL);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    char line[256];
    int rc = bench_proc_attach(p, p->pid, a[1], b[0], line, sizeof line);
    if (py && mode == 2) /* torch's baseline: it replies "ok" and exits */
        return !strncmp(line, "ok", 2) ? 0 : -1;
    return rc;
}

/* Both sides of one case, single repetitions alternating (who goes first
 * alternates too), BENCH_SIDE_PAUSE_MS apart (bench_util.h). */
static void run_case(const char *py, int mode, int64_t L, int threads, int reps, unsigned kernel, res *o,
                     res *t) {
    memset(o, 0, sizeof *o);
    memset(t, 0, sizeof *t);
    bench_proc po, pt;
    char err[256];
    o->ok = proc_open(&po, NULL, mode, L, threads, kernel) == 0;
    t->ok = proc_open(&pt, py, mode, L, threads, kernel) == 0;
    for (int i = 0; mode != 2 && i < reps && (o->ok || t->ok); i++)
        for (int side = 0; side < 2; side++) {
            bench_pause_ms(BENCH_SIDE_PAUSE_MS);
            res *r = (side ^ (i & 1)) == 0 ? o : t;
            if (!r->ok) continue;
            double ms = bench_proc_step(r == o ? &po : &pt, err, sizeof err);
            if (ms < 0) r->ok = 0;
            else if (r->n < MAXR) r->ms[r->n++] = ms;
        }
    o->peak_mb = bench_proc_close(&po);
    t->peak_mb = bench_proc_close(&pt);
    if (o->peak_mb != o->peak_mb) o->ok = 0;
    if (t->peak_mb != t->peak_mb) t->ok = 0;
}

int main(int argc, char **argv) {
    const char *json = NULL;
    int threads = 1, reps = 15;
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
    signal(SIGPIPE, SIG_IGN);
    printf("sdpa: B=%d H=%d E=%d f32, no mask, threads=%d, kernel mask %u, reference %s "
           "(bench/attention_ref.py)\n", B_, H_, E_, threads, kernel, py);
    res bo, bt;
    run_case(py, 2, 512, threads, 0, kernel, &bo, &bt);
    printf("baseline peak RSS: ours %.1f MB, torch %.1f MB%s\n", bo.peak_mb, bt.peak_mb,
           bt.ok ? "" : " (torch side failed)");
    printf("%-22s %10s %10s %7s %22s %22s\n", "case", "ours ms", "torch ms", "ratio",
           "ours peak/extra MB", "torch peak/extra MB");
    for (int mode = 0; mode < 2; mode++) {
        for (int li = 0; li < nl; li++) {
            int64_t L = lens[li];
            int rp = L >= 4096 && reps > 5 ? 5 : reps;
            res o, t;
            run_case(py, mode, L, threads, rp, kernel, &o, &t);
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
