/* bench_util.h -- timing and the shared build/bench.json writer.
 * Every benchmark prints "case, ours, reference, ratio" and merges its rows
 * into build/bench.json: a JSON list with one object per line,
 * {"case", "ours", "reference", "unit", "ratio"} (ratio = ours/reference in
 * time, lower is better), replacing rows of the same case. */
#ifndef CT_BENCH_UTIL_H
#define CT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
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

#endif
