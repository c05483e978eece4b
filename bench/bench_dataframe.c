/* bench_dataframe.c -- read_csv + a 5-step preprocessing (fill_null,
 * standardize, clip, filter, group_by mean) of a 1M-row CSV, beside
 * pandas doing the same (bench/dataframe_ref.py, Debian's python3) in the
 * same run.  The CSV is generated into /tmp with a fixed seed if missing.
 * Usage: bench_dataframe [bench.json] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>

#include "../bench/bench_util.h"

#define CSV_PATH "/tmp/ctorch_bench_df_1M.csv"
#define ROWS 1000000
#define REPS 5

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double unif(void) { return (double)(next() >> 11) / 9007199254740992.0; }

static int make_csv(void) {
    struct stat st;
    if (stat(CSV_PATH, &st) == 0 && st.st_size > 0) return 0;
    char tmp[] = CSV_PATH ".tmp";
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    static const char *cats[] = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    fprintf(f, "id,x,y,cat,flag\n");
    for (int i = 0; i < ROWS; i++) {
        double x = (unif() - 0.5) * 4, y = unif() * 100;
        if (next() % 10 == 0) fprintf(f, "%d,,%.6f,%s,%s\n", i, y, cats[next() % 8], next() & 1 ? "True" : "False");
        else fprintf(f, "%d,%.6f,%.6f,%s,%s\n", i, x, y, cats[next() % 8], next() & 1 ? "True" : "False");
    }
    if (fclose(f) != 0) return -1;
    return rename(tmp, CSV_PATH);
}

static ct_df *pipeline(void) {
    ct_df *df = ct_df_read_csv(CSV_PATH, NULL);
    if (!df) return NULL;
    ct_column *x = ct_column_fill_null(ct_df_column(df, "x"), 0.0);          /* 1 */
    ct_column *y = ct_column_standardize(ct_df_column(df, "y"));             /* 2 */
    ct_column *xc = ct_column_clip(x, -1.0, 1.0);                            /* 3 */
    ct_df *a = ct_df_with_column(df, "x", xc);
    ct_df *b = ct_df_with_column(a, "y", y);
    ct_df *c = ct_df_filter(b, ct_df_column(b, "flag"));                     /* 4 */
    const char *key = "cat";
    ct_df_agg aggs[] = {{"x", CT_DF_MEAN, "x_mean"}, {"y", CT_DF_MEAN, "y_mean"}};
    ct_df *g = ct_df_group_by(c, &key, 1, aggs, 2);                          /* 5 */
    ct_column_release(x); ct_column_release(y); ct_column_release(xc);
    ct_df_free(df); ct_df_free(a); ct_df_free(b); ct_df_free(c);
    return g;
}

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "build/bench.json";
    if (make_csv()) { fprintf(stderr, "bench_dataframe: cannot write %s\n", CSV_PATH); return 1; }
    double ours[REPS];
    ct_df *g = NULL;
    for (int r = 0; r < REPS; r++) {
        ct_df_free(g);
        double t0 = bench_now_ms();
        g = pipeline();
        ours[r] = bench_now_ms() - t0;
        if (!g) { fprintf(stderr, "bench_dataframe: %s\n", ct_last_error()); return 1; }
    }
    double sx = 0, sy = 0;
    for (int64_t i = 0; i < ct_df_num_rows(g); i++) {
        sx += ct_column_get_double(ct_df_column(g, "x_mean"), i);
        sy += ct_column_get_double(ct_df_column(g, "y_mean"), i);
    }
    int64_t ng = ct_df_num_rows(g);
    ct_df_free(g);
    bench_stat so = bench_stats(ours, REPS);
    /* pandas, same machine, same run */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 bench/dataframe_ref.py %s %d", CSV_PATH, REPS);
    FILE *p = popen(cmd, "r");
    double ref[REPS];
    int nref = 0;
    char line[4096], check[256] = "";
    if (p) {
        if (fgets(line, sizeof line, p)) {
            char *s = line, *e;
            while (nref < REPS) { double v = strtod(s, &e); if (e == s) break; ref[nref++] = v; s = e; }
        }
        if (fgets(check, sizeof check, p)) check[strcspn(check, "\n")] = 0;
        pclose(p);
    }
    printf("check ours:   %lld %.9f %.9f\ncheck pandas: %s\n", (long long)ng, sx, sy, check + (check[0] ? 6 : 0));
    printf("%-24s %12s %22s %12s %22s %8s\n", "case", "ours ms", "(min..max)", "pandas ms", "(min..max)", "ratio");
    if (nref != REPS) {
        fprintf(stderr, "bench_dataframe: the pandas reference did not run (%s)\n", cmd);
        printf("%-24s %12.1f (%8.1f..%8.1f)\n", "dataframe_csv_1M", so.med, so.min, so.max);
        return 0;
    }
    bench_stat sr = bench_stats(ref, REPS);
    printf("%-24s %12.1f (%8.1f..%8.1f) %12.1f (%8.1f..%8.1f) %8.3f\n", "dataframe_csv_1M", so.med, so.min, so.max,
           sr.med, sr.min, sr.max, so.med / sr.med);
    bench_json_add(json, "dataframe_csv_1M", so.med, sr.med, "ms", NULL);
    return 0;
}
