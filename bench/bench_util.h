/* bench_util.h -- timing and the shared build/bench.json writer.
 * Every benchmark prints "case, ours, reference, ratio" and merges its rows
 * into build/bench.json: a JSON list with one object per line,
 * {"case", "ours", "reference", "unit", "ratio"} (ratio = ours/reference in
 * time, lower is better), replacing rows of the same case. */
#ifndef CT_BENCH_UTIL_H
#define CT_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctorch/profiler.h>

static inline double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* ---- a case's process in the interleaved protocol ------------------------
 * Ours (a fork) or torch's script sets its case up, warms it up and prints
 * "ready[ ...]"; then per "r" line it runs one timed repetition and answers
 * "<ms>" ("q" or end of input ends it).  The parent alternates single
 * repetitions of the two sides, bench_pause_ms apart, so both meet the same
 * machine load (the host's speed here changes minute to minute). */
typedef struct { pid_t pid; FILE *to, *from; } bench_proc;

/* Takes over the pipe ends of a started process and reads its first line
 * into line (n bytes): 0 when it is "ready...", else -1. */
static inline int bench_proc_attach(bench_proc *p, pid_t pid, int to_fd, int from_fd, char *line, size_t n) {
    p->pid = pid;
    p->to = fdopen(to_fd, "w");
    p->from = fdopen(from_fd, "r");
    line[0] = 0;
    if (!p->to || !p->from || !fgets(line, (int)n, p->from)) return -1;
    line[strcspn(line, "\n")] = 0;
    return strncmp(line, "ready", 5) ? -1 : 0;
}

/* Sends cmd (a line) and reads the reply: ms, or -1 with the process's
 * reply (or why) in err. */
static inline double bench_proc_send(bench_proc *p, const char *cmd, char *err, size_t errn) {
    char line[1024] = "";
    if (!p->to || fputs(cmd, p->to) == EOF || fflush(p->to) || !fgets(line, sizeof line, p->from)) {
        snprintf(err, errn, "the case's process died");
        return -1;
    }
    line[strcspn(line, "\n")] = 0;
    char *end;
    double v = strtod(line, &end);
    if (end == line || v < 0) {
        snprintf(err, errn, "%s", line);
        return -1;
    }
    return v;
}

/* Starts a reference script in the interleaved protocol: argv[0] the
 * Python, then the script and its arguments; its stdin/stdout are pipes to
 * p, its environment this one's without OPENBLAS_CORETYPE/_L2_SIZE and with
 * OMP_WAIT_POLICY=PASSIVE (and GLIBC_TUNABLES=tunables when not NULL).
 * Reads its first line into line (n bytes): 0 when it is "ready...", else -1. */
static inline int bench_proc_spawn(bench_proc *p, char *const argv[], const char *tunables, char *line,
                                   size_t n) {
    memset(p, 0, sizeof *p);
    int a[2], b[2];
    if (pipe(a)) return -1;
    if (pipe(b)) { close(a[0]); close(a[1]); return -1; }
    pid_t pid = fork();
    if (pid < 0) { close(a[0]); close(a[1]); close(b[0]); close(b[1]); return -1; }
    if (pid == 0) {
        dup2(a[0], 0);
        dup2(b[1], 1);
        close(a[0]); close(a[1]); close(b[0]); close(b[1]);
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv("OPENBLAS_L2_SIZE");
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        setenv("PYTHONWARNINGS", "ignore", 1);
        if (tunables) setenv("GLIBC_TUNABLES", tunables, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    return bench_proc_attach(p, pid, a[1], b[0], line, n);
}

/* One timed repetition: ms, or -1 with the process's reply (or why) in err. */
static inline double bench_proc_step(bench_proc *p, char *err, size_t errn) { return bench_proc_send(p, "r\n", err, errn); }

/* Ends the process; its peak resident set in MB (ru_maxrss), NAN when it
 * did not exit normally with status 0. */
static inline double bench_proc_close(bench_proc *p) {
    if (p->to) { fputs("q\n", p->to); fclose(p->to); }
    if (p->from) fclose(p->from);
    double mb = NAN;
    if (p->pid > 0) {
        int st = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        pid_t r;
        while ((r = wait4(p->pid, &st, 0, &ru)) < 0 && errno == EINTR) {}
        if (r > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) mb = (double)ru.ru_maxrss / 1024.0;
    }
    memset(p, 0, sizeof *p);
    return mb;
}

/* The pause before each side's repetition.  Both sides' thread pools are
 * OpenMP (OpenBLAS's OpenMP build, oneDNN, torch's libgomp) under
 * OMP_WAIT_POLICY=PASSIVE, so they sleep as soon as a repetition ends;
 * the pause only has to let the other process settle.  It was 150 ms (for
 * a pthread OpenBLAS's 0.1 s busy-wait, which is not what we link): on
 * this shared 2-vCPU VM an idle of 20 ms or more makes the next 2-thread
 * repetition a cold start -- the host deschedules both vCPUs, one thread of
 * a 64 MB row sum then starts 1..4 ms late and both halves run slower
 * (3.5 -> 5.8 ms median, for a bare OpenMP loop as for either side), which
 * measured the host's wake-up more than the code.  5 ms keeps the cores
 * in the state a training loop keeps them in (1, 2 and 5 ms: 3.5..3.8 ms). */
#define BENCH_SIDE_PAUSE_MS 5

static inline void bench_pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct { double med, min, max; } bench_stat;

static inline bench_stat bench_stats(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    bench_stat s = {n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
    return s;
}

/* Merge one row into path (atomically: temp file + rename). */
static inline int bench_json_add(const char *path, const char *name, double ours, double ref,
                                 const char *unit, const char *extra) {
    char **rows = NULL;
    int n = 0;
    FILE *f = fopen(path, "r");
    char line[4096];
    char key[300];
    snprintf(key, sizeof key, "{\"case\": \"%s\",", name);
    if (f) {
        while (fgets(line, sizeof line, f)) {
            char *p = line;
            while (*p == ' ') p++;
            if (*p != '{') continue;
            if (strncmp(p, key, strlen(key)) == 0) continue;
            size_t L = strlen(p);
            while (L && (p[L - 1] == '\n' || p[L - 1] == ',')) p[--L] = 0;
            rows = realloc(rows, sizeof(char *) * (size_t)(n + 1));
            rows[n++] = strdup(p);
        }
        fclose(f);
    }
    char row[4096];
    snprintf(row, sizeof row, "{\"case\": \"%s\", \"ours\": %.6g, \"reference\": %.6g, \"unit\": \"%s\", "
             "\"ratio\": %.4f%s%s}", name, ours, ref, unit, ours / ref, extra && *extra ? ", " : "",
             extra ? extra : "");
    rows = realloc(rows, sizeof(char *) * (size_t)(n + 1));
    rows[n++] = strdup(row);
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s%s\n", rows[i], i + 1 < n ? "," : "");
        free(rows[i]);
    }
    fprintf(f, "]\n");
    free(rows);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) { fclose(f); return -1; }
    fclose(f);
    return rename(tmp, path);
}

/* ---- CT_PROFILE=1 per case ------------------------------------------------
 * The per-op table should cover a case's timed repetitions only: after the
 * warm-up, bench_profile_restart() ends the session that saw setup and
 * warm-up (ct_profiler_clear() drops only a stopped session's results) and
 * starts a new one (also after an earlier case's report stopped the
 * profiler); after the repetitions bench_profile_report() prints its table
 * to stderr, stops it and drops it -- with the atexit report's settings:
 * CT_PROFILE_SHAPES=1 groups rows by input shapes, CT_PROFILE_ROWS rows
 * (default 40).  Both do nothing without CT_PROFILE.  restart: 0, or -1
 * with the library's error set. */
static inline int bench_profile_restart(void) {
    const char *v = getenv("CT_PROFILE");
    if (!v || !*v || !strcmp(v, "0")) return 0;
    if (ct_profiler_is_enabled() && ct_profiler_stop() != CT_OK) return -1;
    ct_profiler_clear();
    return ct_profiler_start(NULL) == CT_OK ? 0 : -1;
}
static inline void bench_profile_report(const char *name, int threads, int reps) {
    if (!ct_profiler_is_enabled() || ct_profiler_stop() != CT_OK) return;
    const char *sh = getenv("CT_PROFILE_SHAPES"), *rows = getenv("CT_PROFILE_ROWS");
    int nrows = rows && atoi(rows) > 0 ? atoi(rows) : 40;
    char *tab = sh && !strcmp(sh, "1") ? ct_profiler_table_by_shape("self_cpu_time_total", nrows)
                                       : ct_profiler_table("self_cpu_time_total", nrows);
    fprintf(stderr, "CT_PROFILE: %s, %d thread%s, %d timed repetitions\n%s\n", name, threads,
            threads > 1 ? "s" : "", reps, tab ? tab : "(no table)");
    free(tab);
    ct_profiler_clear(); /* printed: not again by CT_PROFILE's report at exit */
}

#endif
