/* bench_gpu.c -- make bench's GPU cases on one device, beside torch on the
 * same GPU.
 *
 *   build/bench_gpu [bench.json] [--reps R] [--device cuda|cuda:N|opencl|opencl:N] [--tiny]
 *
 * Cases (each a median of R reps after a warm-up, each rep ended by
 * ct_dev_synchronize; the model steps take at most 3 reps):
 *   - mm f32 1024^3 and 4096^3, bmm 64 x [128,64] @ [64,128] (cuBLAS on
 *     CUDA, CLBlast or the OpenCL gemm kernel on OpenCL);
 *   - host -> device copies of 64 MiB, pageable and pinned (CUDA only);
 *   - scaled_dot_product_attention forward + backward, [B,H,L,E] =
 *     [8,12,1024,64], float32 and bfloat16 (q, k, v require grad; the
 *     backward from ones);
 *   - a ResNet-50 training step (8 x 3 x 224 x 224, 1000 classes, cross
 *     entropy, SGD momentum 0.9 lr 0.01, fused) and a BERT-base training
 *     step (BertForSequenceClassification, 2 labels, 8 x 128 tokens, AdamW
 *     lr 1e-4, fused): bench_suite's CPU cases, on the device.
 * Each prints ctorch's ms, torch's ms on the same GPU, the speed ratio
 * (torch ms / ctorch ms: above 1, ctorch is faster) and the device's name;
 * the model steps and SDPA also print their loss (or output sum), which must
 * be finite: a non-finite one, or a case that fails, makes the exit status
 * 1.  torch's figures come from bench/gpu_ref.py (CT_TORCH_PYTHON, default
 * python3) with torch on CUDA; without torch or without CUDA in torch it
 * says so and prints ctorch's alone.
 *
 * --tiny (the default on OpenCL, where PoCL runs the kernels on the CPU:
 * a correctness device, not a speed claim): the same code paths on small
 * shapes -- mm 128^3, bmm 4 x [32,16] @ [16,32], SDPA [1,2,32,16], ResNet-50
 * on 2 x 3 x 64 x 64, and BERT with 2 layers, hidden 64, 2 heads, vocab 1000
 * on 2 x 16 tokens -- to check on a machine without a GPU that every case
 * runs end to end with finite losses.  Without the device the cases are
 * skipped with the reason (exit 0). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>
#include <ctorch/models.h>

#include "bench_models.h"
#include "bench_util.h"

static int g_reps = 10;
static const char *g_json;
static bool g_tiny;
static int g_bad; /* failed cases and non-finite losses */
static ct_dev g_dev;
static char g_devname[256];

/* median ms of fn over reps after one warm-up; each rep waits for d; at
 * most 3 reps when the warm-up took over a second (gpu-check.sh's 10
 * minutes) */
typedef int (*rep_fn)(void *ctx);
static double time_ms(rep_fn fn, void *ctx, ct_dev d, int reps) {
    double v[64];
    int n = reps < 64 ? reps : 64;
    double t0 = bench_now_ms();
    ct_scope s = ct_scope_begin();
    int rc = fn(ctx);
    ct_scope_end(s);
    if (rc || ct_dev_synchronize(d)) return -1;
    if (bench_now_ms() - t0 > 1000 && n > 3) n = 3;
    for (int r = 0; r < n; r++) {
        double t0 = bench_now_ms();
        s = ct_scope_begin();
        rc = fn(ctx);
        ct_scope_end(s);
        if (rc || ct_dev_synchronize(d)) return -1;
        v[r] = bench_now_ms() - t0;
    }
    return bench_stats(v, n).med;
}

/* ---- torch on the same GPU (bench/gpu_ref.py) ---------------------------- */
static char g_torch_lines[64][256];
static int g_torch_n = -1;
static char g_torch_dev[256], g_torch_why[640];

static void torch_load(void) {
    if (g_torch_n >= 0) return;
    g_torch_n = 0;
    if (g_dev.type != CT_CUDA) {
        snprintf(g_torch_why, sizeof g_torch_why, "torch is compared on CUDA only (%s is a correctness device)",
                 ct_device_name(g_dev.type));
        return;
    }
    if (g_tiny) {
        snprintf(g_torch_why, sizeof g_torch_why, "torch is compared at the full sizes only (--tiny)");
        return;
    }
    const char *py = getenv("CT_TORCH_PYTHON") ? getenv("CT_TORCH_PYTHON") : "python3";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s bench/gpu_ref.py %d %d", py, g_reps, g_dev.index);
    FILE *f = popen(cmd, "r");
    if (!f) {
        snprintf(g_torch_why, sizeof g_torch_why, "cannot run %s", cmd);
        return;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "#device\t", 8) == 0) snprintf(g_torch_dev, sizeof g_torch_dev, "%.200s", line + 8);
        else if (strncmp(line, "#skip\t", 6) == 0) snprintf(g_torch_why, sizeof g_torch_why, "%.500s", line + 6);
        else if (g_torch_n < 64) snprintf(g_torch_lines[g_torch_n++], sizeof g_torch_lines[0], "%.250s", line);
    }
    int rc = pclose(f);
    if (!g_torch_why[0] && g_torch_n == 0)
        snprintf(g_torch_why, sizeof g_torch_why, "%s printed no figures (exit status %d; is torch installed?)",
                 cmd, rc);
}

/* torch's ms for a case (-1: none) */
static double torch_ms(const char *name) {
    torch_load();
    size_t L = strlen(name);
    for (int k = 0; k < g_torch_n; k++)
        if (strncmp(g_torch_lines[k], name, L) == 0 && g_torch_lines[k][L] == '\t')
            return atof(g_torch_lines[k] + L + 1);
    return -1;
}

/* one case's line: ctorch ms, torch ms, the ratio, the device; work / ms in
 * unit per second (1e9 for GFLOP/s and GB/s, 1 for steps/s) into the json */
static void report(const char *name, double ms, double work, double scale, const char *unit, const char *note) {
    double ref_ms = torch_ms(name);
    double ours = work / (ms * 1e-3) / scale, ref = ref_ms > 0 ? work / (ref_ms * 1e-3) / scale : 0;
    if (ref_ms > 0)
        printf("%-40s ctorch %9.2f ms  torch %9.2f ms  ratio %5.2f  (%.1f vs %.1f %s)  %s%s\n", name, ms, ref_ms,
               ref_ms / ms, ours, ref, unit, g_devname, note);
    else
        printf("%-40s ctorch %9.2f ms  torch %9s     (%.1f %s)  %s%s\n", name, ms, "-", ours, unit, g_devname, note);
    if (g_json && !g_tiny) {
        char extra[400];
        snprintf(extra, sizeof extra, "\"device\": \"%s\"", g_dev.type == CT_CUDA ? "gpu" : "opencl");
        bench_json_add(g_json, name, ours, ref > 0 ? ref : ours, unit, extra);
    }
}

/* report(), with a value the case computed shown beside it ("loss 2.3026"),
 * counted as a failure (exit 1) when it is not finite */
static void report_checked(const char *name, double ms, double work, double scale, const char *unit,
                           const char *label, double value) {
    char note[96];
    bool fin = isfinite(value);
    snprintf(note, sizeof note, "  %s %.4g%s", label, value, fin ? "" : " NOT FINITE");
    g_bad += !fin;
    report(name, ms, work, scale, unit, note);
}

static void fail_case(const char *name, const char *what) {
    printf("%-40s FAILED: %s: %s\n", name, what, ct_last_error());
    ct_clear_error();
    g_bad++;
}

/* ---- matmul, copies -------------------------------------------------------- */
typedef struct mm_ctx { ct_tensor *a, *b; bool batched; } mm_ctx;
static int rep_mm(void *c) {
    mm_ctx *m = c;
    return (m->batched ? ct_bmm(m->a, m->b) : ct_mm(m->a, m->b)) ? 0 : -1;
}

typedef struct cp_ctx { ct_tensor *src; ct_dev d; } cp_ctx;
static int rep_copy(void *c) {
    cp_ctx *p = c;
    return ct_to_dev(p->src, p->d) ? 0 : -1;
}

static void mm_cases(void) {
    ct_dev d = g_dev;
    static const struct { const char *name; int64_t M, N, K, B; bool tiny; } mm[] = {
        {"gpu mm f32 1024^3", 1024, 1024, 1024, 0, false},
        {"gpu mm f32 4096^3", 4096, 4096, 4096, 0, false},
        {"gpu bmm f32 64x[128,64]@[64,128]", 128, 128, 64, 64, false},
        {"gpu mm f32 128^3 (tiny)", 128, 128, 128, 0, true},
        {"gpu bmm f32 4x[32,16]@[16,32] (tiny)", 32, 32, 16, 4, true},
    };
    for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++) {
        if (mm[k].tiny != g_tiny) continue;
        ct_scope s = ct_scope_begin();
        mm_ctx c = {NULL, NULL, mm[k].B > 0};
        if (c.batched) {
            c.a = ct_to_dev(ct_randn((int64_t[]){mm[k].B, mm[k].M, mm[k].K}, 3, CT_F32), d);
            c.b = ct_to_dev(ct_randn((int64_t[]){mm[k].B, mm[k].K, mm[k].N}, 3, CT_F32), d);
        } else {
            c.a = ct_to_dev(ct_randn((int64_t[]){mm[k].M, mm[k].K}, 2, CT_F32), d);
            c.b = ct_to_dev(ct_randn((int64_t[]){mm[k].K, mm[k].N}, 2, CT_F32), d);
        }
        double ms = c.a && c.b ? time_ms(rep_mm, &c, d, g_reps) : -1;
        if (ms < 0) fail_case(mm[k].name, "run");
        else {
            double flop = 2.0 * (double)mm[k].M * (double)mm[k].N * (double)mm[k].K * (double)(c.batched ? mm[k].B : 1);
            report(mm[k].name, ms, flop, 1e9, "GFLOP/s", "");
        }
        ct_scope_end(s);
    }
    if (d.type != CT_CUDA || g_tiny) return;
    for (int pinned = 0; pinned < 2; pinned++) {
        ct_scope s = ct_scope_begin();
        const char *name = pinned ? "gpu h2d 64MiB pinned" : "gpu h2d 64MiB pageable";
        ct_tensor *x = ct_rand((int64_t[]){16 << 20}, 1, CT_F32);
        cp_ctx c = {pinned ? ct_pin_memory(x) : x, d};
        double ms = c.src ? time_ms(rep_copy, &c, d, g_reps) : -1;
        if (ms < 0) fail_case(name, "run");
        else report(name, ms, (double)(64 << 20), 1e9, "GB/s", "");
        ct_scope_end(s);
    }
}

/* ---- scaled_dot_product_attention, forward + backward ---------------------- */
typedef struct sdpa_ctx { ct_tensor *q, *k, *v, *go; double sum; } sdpa_ctx;
static int rep_sdpa(void *p) {
    sdpa_ctx *c = p;
    ct_zero_grad(c->q);
    ct_zero_grad(c->k);
    ct_zero_grad(c->v);
    ct_tensor *o = ct_scaled_dot_product_attention(c->q, c->k, c->v, NULL, 0.0, false, 0.0, false);
    if (!o || ct_backward(o, c->go, false, false) != CT_OK) return -1;
    /* the output's and q's gradient's sums, read back: must be finite */
    ct_tensor *s = ct_add(ct_sum(ct_to_dtype(o, CT_F32), NULL, 0, false),
                          ct_sum(ct_to_dtype(ct_grad(c->q), CT_F32), NULL, 0, false));
    if (!s) return -1;
    c->sum = ct_item(s);
    return 0;
}

static void sdpa_cases(void) {
    int64_t B = 8, H = 12, L = 1024, E = 64;
    if (g_tiny) B = 1, H = 2, L = 32, E = 16;
    static const ct_dtype dts[2] = {CT_F32, CT_BF16};
    for (int k = 0; k < 2; k++) {
        char name[96];
        snprintf(name, sizeof name, "gpu sdpa fwd+bwd %s [%lld,%lld,%lld,%lld]", k ? "bf16" : "f32", (long long)B,
                 (long long)H, (long long)L, (long long)E);
        ct_scope s = ct_scope_begin();
        ct_manual_seed(1);
        sdpa_ctx c = {0};
        const int64_t sh[4] = {B, H, L, E};
        ct_tensor **t[3] = {&c.q, &c.k, &c.v};
        bool ok = true;
        for (int j = 0; j < 3 && ok; j++) {
            *t[j] = ct_to_dev(ct_to_dtype(ct_randn(sh, 4, CT_F32), dts[k]), g_dev);
            ok = *t[j] && ct_set_requires_grad(*t[j], true) == CT_OK;
        }
        c.go = ok ? ct_ones_dev(sh, 4, dts[k], g_dev) : NULL;
        double ms = c.go ? time_ms(rep_sdpa, &c, g_dev, g_reps) : -1;
        if (ms < 0) fail_case(name, "run");
        else /* forward 4 B H L^2 E, backward twice that */
            report_checked(name, ms, 12.0 * (double)B * (double)H * (double)L * (double)L * (double)E, 1e9,
                           "GFLOP/s", "out+dq sum", c.sum);
        ct_scope_end(s);
    }
}

/* ---- training steps ---------------------------------------------------------- */
typedef struct train_ctx {
    ct_module *model;
    ct_optimizer *opt;
    ct_tensor *x, *y;
    bool bert;
    double loss;
} train_ctx;

static int rep_train(void *p) {
    train_ctx *c = p;
    ct_optim_zero_grad(c->opt, true);
    ct_tensor *out = ct_module_forward1(c->model, c->x);
    ct_tensor *loss = out ? ct_cross_entropy(out, c->y, NULL) : NULL;
    if (!loss || ct_backward(loss, NULL, false, false) != CT_OK || ct_optim_step(c->opt) != CT_OK) return -1;
    c->loss = ct_item(loss);
    return 0;
}

static void train_case(const char *name, ct_module *m, ct_tensor *x, ct_tensor *y, const char *opt, double lr,
                       double samples) {
    train_ctx c = {m, NULL, NULL, NULL, false, 0};
    if (!m || !x || !y) { fail_case(name, "setup"); return; }
    if (ct_module_to_dev(m, g_dev) != CT_OK) { fail_case(name, "moving the model"); ct_module_release(m); return; }
    c.x = ct_to_dev(x, g_dev);
    c.y = ct_to_dev(y, g_dev);
    c.opt = c.x && c.y ? make_opt(m, opt, lr) : NULL;
    if (!c.opt) { fail_case(name, "setup on the device"); ct_module_release(m); return; }
    int reps = g_reps < 3 ? g_reps : 3;
    double ms = time_ms(rep_train, &c, g_dev, reps);
    if (ms < 0) fail_case(name, "step");
    else report_checked(name, ms, samples, 1, "samples/s", "loss", c.loss);
    ct_optim_free(c.opt);
    ct_module_release(m);
}

static void model_cases(void) {
    char name[96];
    {
        int64_t n = g_tiny ? 2 : 8, hw = g_tiny ? 64 : 224;
        snprintf(name, sizeof name, "gpu resnet50 train step %lldx3x%lldx%lld", (long long)n, (long long)hw,
                 (long long)hw);
        ct_scope s = ct_scope_begin();
        ct_manual_seed(2);
        ct_module *m = ct_resnet50_new(1000);
        train_case(name, m, ct_randn((int64_t[]){n, 3, hw, hw}, 4, CT_F32),
                   ct_randint(0, 1000, (int64_t[]){n}, 1, CT_I64), "sgdm", 0.01, (double)n);
        ct_scope_end(s);
    }
    {
        ct_bert_config cfg = ct_bert_base_config();
        int64_t n = 8, len = 128;
        if (g_tiny) {
            cfg.vocab_size = 1000, cfg.hidden_size = 64, cfg.num_hidden_layers = 2;
            cfg.num_attention_heads = 2, cfg.intermediate_size = 256;
            n = 2, len = 16;
        }
        snprintf(name, sizeof name, "gpu bert%s train step %lldx%lld", g_tiny ? "(tiny)" : "-base", (long long)n,
                 (long long)len);
        ct_scope s = ct_scope_begin();
        ct_manual_seed(3);
        ct_module *m = ct_bert_for_sequence_classification_new(&cfg, 2);
        train_case(name, m, ct_randint(0, cfg.vocab_size, (int64_t[]){n, len}, 2, CT_I64),
                   ct_randint(0, 2, (int64_t[]){n}, 1, CT_I64), "adamw", 1e-4, (double)n);
        ct_scope_end(s);
    }
}

int main(int argc, char **argv) {
    const char *devs = "cuda";
    bool tiny_set = false;
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--reps") == 0 && k + 1 < argc) g_reps = atoi(argv[++k]);
        else if (strcmp(argv[k], "--device") == 0 && k + 1 < argc) devs = argv[++k];
        else if (strcmp(argv[k], "--tiny") == 0) g_tiny = tiny_set = true;
        else if (argv[k][0] == '-') {
            fprintf(stderr, "usage: bench_gpu [bench.json] [--reps R] [--device cuda|opencl[:N]] [--tiny]\n");
            return 2;
        } else g_json = argv[k];
    }
    if (g_reps < 1) g_reps = 1;
    if (ct_dev_parse(devs, &g_dev) != CT_OK || (g_dev.type != CT_CUDA && g_dev.type != CT_OPENCL)) {
        fprintf(stderr, "bench_gpu: --device %s: expected cuda[:N] or opencl[:N]\n", devs);
        return 2;
    }
    const char *onames[16];
    int nocl = g_dev.type == CT_OPENCL ? ct_opencl_devices(onames, 16) : 0;
    bool have = g_dev.type == CT_CUDA ? ct_cuda_is_available() && g_dev.index < ct_cuda_device_count()
                                      : g_dev.index < nocl;
    if (!have) {
        printf("bench_gpu: %s cases skipped: %s\n", devs,
               ct_last_error()[0] ? ct_last_error() : "no such device index");
        ct_clear_error();
        return 0;
    }
    if (g_dev.type == CT_CUDA) {
        const char *nm = ct_cuda_get_device_name(g_dev.index);
        snprintf(g_devname, sizeof g_devname, "[%s]", nm ? nm : "?");
    } else {
        snprintf(g_devname, sizeof g_devname, "[%.200s: correctness device]", onames[g_dev.index]);
        if (!tiny_set) g_tiny = true;
    }
    char ds[32];
    torch_load();
    printf("bench_gpu: %s is %s%s%s; torch: %s\n", ct_dev_str(g_dev, ds, sizeof ds), g_devname,
           g_tiny ? " (--tiny shapes)" : "", g_dev.type == CT_OPENCL ? " (not a speed claim)" : "",
           g_torch_dev[0] ? g_torch_dev : "not compared");
    if (g_torch_why[0]) printf("bench_gpu: torch: %s\n", g_torch_why);
    ct_manual_seed(0);
    mm_cases();
    sdpa_cases();
    model_cases();
    if (g_bad) printf("bench_gpu: %d case(s) failed or gave a non-finite loss\n", g_bad);
    return g_bad ? 1 : 0;
}
