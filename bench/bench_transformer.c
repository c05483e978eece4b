/* bench_transformer.c -- TransformerEncoderLayer inference (the
 * BetterTransformer fast path) beside PyTorch's (issue 7).
 *
 *   build/bench_transformer [build/bench.json] [--threads N] [--reps N]
 *
 * Cases: the issue-6 suite shape (d 256, 4 heads, ff 1024, batch 16 x seq
 * 128) and a BERT-base layer (d 768, 12 heads, ff 3072, batch 8 x 128),
 * each without padding and with 50% padding (sequence i keeps its first
 * round(L (i+1) / (B+1)) tokens; a src_key_padding_mask marks the rest).
 * Both sides: nn.TransformerEncoder(layer, 1, enable_nested_tensor) with
 * batch_first, eval mode, no grad (torch: inference_mode; its fast path and
 * nested-tensor packing), float32, random weights, same thread count.
 * 2 warm-ups, then reps timed runs (default 7), median and min..max.
 * torch: bench/transformer_ref.py with $CT_BENCH_PYTHON, else python3 on
 * PATH, run with OMP_WAIT_POLICY=PASSIVE and GLIBC_TUNABLES=
 * glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
 * (from the repository root).  Rows: "tfm_enc_<name>_<nopad|pad50>_t<n>" (ms). */
#define _GNU_SOURCE
#include <ctorch/ctorch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

#define MAXR 64
typedef struct { const char *name; int64_t d, H, ff, B, L; } shape;
static const shape k_shapes[] = {
    {"suite256", 256, 4, 1024, 16, 128},
    {"bert768", 768, 12, 3072, 8, 128},
};

typedef struct { int ok, n, packed; double ms[MAXR]; } res;

static res run_ours(const shape *s, int pad, int reps) {
    res r = {0};
    ct_manual_seed(0);
    ct_module *layer = ct_transformer_encoder_layer_new(s->d, s->H, s->ff, 0.1, CT_TRANSFORMER_RELU, 1e-5, true,
                                                        false, true);
    ct_module *enc = layer ? ct_transformer_encoder_new(layer, 1, NULL, true) : NULL;
    ct_module_release(layer);
    if (!enc) return r;
    ct_module_eval(enc);
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *x = ct_randn((int64_t[]){s->B, s->L, s->d}, 3, CT_F32), *kpm = NULL;
    if (pad) {
        uint8_t *m = calloc((size_t)(s->B * s->L), 1);
        for (int64_t i = 0; i < s->B; i++)
            for (int64_t t = (int64_t)((double)s->L * (double)(i + 1) / (double)(s->B + 1) + 0.5); t < s->L; t++)
                m[i * s->L + t] = 1;
        kpm = ct_from_array(m, (int64_t[]){s->B, s->L}, 2, CT_BOOL);
        free(m);
    }
    r.ok = 1;
    for (int i = 0; i < reps + 2 && r.ok; i++) {
        ct_scope sc = ct_scope_begin();
        double t0 = bench_now_ms();
        ct_tensor *o = ct_transformer_encoder_forward(enc, x, NULL, kpm, false);
        double t1 = bench_now_ms();
        if (!o) {
            fprintf(stderr, "ours: %s\n", ct_last_error());
            r.ok = 0;
        }
        bool packed = false;
        if (!ct_transformer_last_fast_path(&packed)) r.ok = 0;
        r.packed = packed;
        if (i >= 2) r.ms[r.n++] = t1 - t0;
        ct_scope_end(sc);
    }
    ct_release(x);
    ct_release(kpm);
    ct_set_grad_enabled(prev);
    ct_module_release(enc);
    return r;
}

static res run_torch(const char *py, const shape *s, int pad, int threads, int reps) {
    res r = {0};
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "
             "GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 "
             "%s bench/transformer_ref.py %lld %lld %lld %lld %lld %d %d %d 2",
             py, (long long)s->d, (long long)s->H, (long long)s->ff, (long long)s->B, (long long)s->L, pad, threads,
             reps);
    FILE *f = popen(cmd, "r");
    if (!f) return r;
    char line[8192] = {0};
    if (fgets(line, sizeof line, f) && !strncmp(line, "ok", 2)) {
        r.ok = 1;
        char *p = line + 2, *e;
        while (r.n < MAXR) {
            double v = strtod(p, &e);
            if (e == p) break;
            r.ms[r.n++] = v;
            p = e;
        }
        char *pk = strstr(line, "packed=");
        r.packed = pk ? atoi(pk + 7) : 0;
    }
    pclose(f);
    return r;
}

int main(int argc, char **argv) {
    const char *json = NULL;
    int threads = 2, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (argv[i][0] != '-') json = argv[i];
    }
    if (reps < 1) reps = 1;
    if (reps > MAXR - 1) reps = MAXR - 1;
    if (threads < 1) threads = 1;
    ct_set_num_threads(threads);
    const char *py = getenv("CT_BENCH_PYTHON");
    if (!py || !*py) py = "python3";
    printf("TransformerEncoder(1 layer) inference, batch_first, eval, no grad, f32, threads=%d, reference %s "
           "(bench/transformer_ref.py)\n", threads, py);
    printf("%-28s %10s %10s %7s %8s   %s\n", "case", "ours ms", "torch ms", "ratio", "packed", "ranges");
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++)
        for (int pad = 0; pad < 2; pad++) {
            const shape *s = &k_shapes[si];
            res o = run_ours(s, pad, reps);
            res t = run_torch(py, s, pad, threads, reps);
            char name[96];
            snprintf(name, sizeof name, "tfm_enc_%s_%s_t%d", s->name, pad ? "pad50" : "nopad", threads);
            if (!o.ok) {
                printf("%-28s ours failed\n", name);
                continue;
            }
            bench_stat so = bench_stats(o.ms, o.n);
            bench_stat st = t.ok ? bench_stats(t.ms, t.n) : (bench_stat){0, 0, 0};
            printf("%-28s %10.2f %10.2f %7.3f %4d/%-3d   (ours %.2f..%.2f, torch %.2f..%.2f)\n", name, so.med,
                   st.med, t.ok ? so.med / st.med : 0.0, o.packed, t.packed, so.min, so.max, st.min, st.max);
            fflush(stdout);
            if (json && t.ok) {
                char extra[160];
                snprintf(extra, sizeof extra, "\"threads\": %d, \"d_model\": %lld, \"batch\": %lld, \"seq\": %lld",
                         threads, (long long)s->d, (long long)s->B, (long long)s->L);
                bench_json_add(json, name, so.med, st.med, "ms", extra);
            }
        }
    return 0;
}
