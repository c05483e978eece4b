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
 * 2 warm-ups each, then reps timed runs (default 11) INTERLEAVED rep by rep
 * with the torch process (which stays up between its reps), alternating who
 * goes first, BENCH_SIDE_PAUSE_MS apart (bench_util.h): the host's load changes by the minute here,
 * and this way both sides see the same conditions.  Median and min..max.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAXR 64
typedef struct { const char *name; int64_t d, H, ff, B, L; } shape;
static const shape k_shapes[] = {
    {"suite256", 256, 4, 1024, 16, 128},
    {"bert768", 768, 12, 3072, 8, 128},
};

typedef struct { int ok, n, packed; double ms[MAXR]; } res;

/* ours: the layer, its input and mask, built once per case */
typedef struct {
    ct_module *enc;
    ct_tensor *x, *kpm;
    bool prev;
} ours_case;

static int ours_open(ours_case *c, const shape *s, int pad) {
    memset(c, 0, sizeof *c);
    ct_manual_seed(0);
    ct_module *layer = ct_transformer_encoder_layer_new(s->d, s->H, s->ff, 0.1, CT_TRANSFORMER_RELU, 1e-5, true,
                                                        false, true);
    c->enc = layer ? ct_transformer_encoder_new(layer, 1, NULL, true) : NULL;
    ct_module_release(layer);
    if (!c->enc) return -1;
    ct_module_eval(c->enc);
    c->prev = ct_set_grad_enabled(false);
    c->x = ct_randn((int64_t[]){s->B, s->L, s->d}, 3, CT_F32);
    if (pad) {
        uint8_t *m = calloc((size_t)(s->B * s->L), 1);
        if (!m) return -1;
        for (int64_t i = 0; i < s->B; i++)
            for (int64_t t = (int64_t)((double)s->L * (double)(i + 1) / (double)(s->B + 1) + 0.5); t < s->L; t++)
                m[i * s->L + t] = 1;
        c->kpm = ct_from_array(m, (int64_t[]){s->B, s->L}, 2, CT_BOOL);
        free(m);
    }
    return c->x ? 0 : -1;
}

/* one forward: ms, or -1 on failure; *packed: whether the padding was packed away */
static double ours_step(ours_case *c, int *packed) {
    ct_scope sc = ct_scope_begin();
    double t0 = bench_now_ms();
    ct_tensor *o = ct_transformer_encoder_forward(c->enc, c->x, NULL, c->kpm, false);
    double t1 = bench_now_ms();
    bool pk = false;
    int ok = o && ct_transformer_last_fast_path(&pk);
    if (!o) fprintf(stderr, "ours: %s\n", ct_last_error());
    *packed = pk;
    ct_scope_end(sc);
    return ok ? t1 - t0 : -1;
}

static void ours_close(ours_case *c) {
    ct_release(c->x);
    ct_release(c->kpm);
    ct_set_grad_enabled(c->prev);
    ct_module_release(c->enc);
}

/* torch: bench/transformer_ref.py in its interleaved mode, over two pipes */
/* 0 and *packed (whether torch packed the padding away), or -1 */
static int torch_open(bench_proc *t, int *packed, const char *py, const shape *s, int pad, int threads) {
    *packed = 0;
    char arg[9][24];
    long long v[9] = {s->d, s->H, s->ff, s->B, s->L, pad, threads, 0, 2};
    for (int i = 0; i < 9; i++) snprintf(arg[i], sizeof arg[i], "%lld", v[i]);
    char *const argv[] = {(char *)py, "bench/transformer_ref.py", arg[0], arg[1], arg[2], arg[3], arg[4],
                          arg[5], arg[6], arg[7], arg[8], NULL};
    char line[256];
    if (bench_proc_spawn(t, argv, "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
                         "glibc.malloc.trim_threshold=17179869184", line, sizeof line))
        return -1;
    char *pk = strstr(line, "packed=");
    *packed = pk ? atoi(pk + 7) : 0;
    return 0;
}

/* Both sides of one case, rep by rep. */
static void run_case(const char *py, const shape *s, int pad, int threads, int reps, res *o, res *t) {
    memset(o, 0, sizeof *o);
    memset(t, 0, sizeof *t);
    ours_case oc;
    bench_proc tp;
    char err[256];
    int pk = 0;
    o->ok = ours_open(&oc, s, pad) == 0;
    for (int i = 0; i < 2 && o->ok; i++) o->ok = ours_step(&oc, &pk) >= 0;
    o->packed = pk;
    t->ok = torch_open(&tp, &t->packed, py, s, pad, threads) == 0;
    for (int i = 0; i < reps && (o->ok || t->ok); i++) {
        for (int side = 0; side < 2; side++) {
            bench_pause_ms(BENCH_SIDE_PAUSE_MS);
            if ((side ^ (i & 1)) == 0) {
                if (!o->ok) continue;
                double ms = ours_step(&oc, &pk);
                if (ms < 0) o->ok = 0;
                else o->ms[o->n++] = ms;
            } else {
                if (!t->ok) continue;
                double ms = bench_proc_step(&tp, err, sizeof err);
                if (ms < 0) t->ok = 0;
                else t->ms[t->n++] = ms;
            }
        }
    }
    bench_proc_close(&tp);
    ours_close(&oc);
}

int main(int argc, char **argv) {
    const char *json = NULL;
    int threads = 2, reps = 11;
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
            res o, t;
            run_case(py, s, pad, threads, reps, &o, &t);
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
