/* bench_compile.c -- issue 18's benchmark: ctorch compiled (ct_compile) vs
 * ctorch eager vs torch.compile (inductor, default mode) vs torch eager,
 * case by case, at 2 threads, in one run; and the compile times, cold and
 * warm, beside torch.compile's.
 *
 *   build/bench_compile [build/bench.json] [--threads N] [--cases a,b] [--quick]
 *                       [--reps N] [--max-autotune] [--list]
 *
 * Protocol
 *   - Each case runs in a fresh forked process of ours and a fresh process
 *     of torch's (bench/compile_ref.py, a long-lived child over two pipes,
 *     forks one per case).  Each process holds ONE model and optimizer and
 *     runs both of its sides on it: the eager step calls the module, the
 *     compiled step calls ct_compile of the module's forward (ours) /
 *     torch.compile(module) (torch's); the loss, the backward and the
 *     optimizer step are the same eager code on both.  The kernels
 *     (gelu_sum, softmax, layer_norm) compile the whole function.
 *   - Timed single steps ALTERNATE over the four sides, in a balanced order
 *     (k_order: each framework's two sides swap places every repetition),
 *     BENCH_SIDE_PAUSE_MS apart (bench_util.h): all four
 *     medians come from the same stretch of the host's load.  10
 *     repetitions (6 for the big models: an even number, both orders
 *     equally often); a case of a few ms a step goes on
 *     (up to MAX_EXTRA_REPS) until each ctorch side has run EXTRA_BUDGET_MS;
 *     the reps column says how many ran.  The time columns are medians;
 *     the ratio columns are medians of the repetitions' ratios (the sides
 *     of one repetition ran side by side: paired_ratio).
 *   - Cold compile: each case gets a fresh empty cache folder for each side
 *     (CT_CACHE_DIR for ours, TORCHINDUCTOR_CACHE_DIR for torch); the first
 *     compiled call of the fresh process is timed (trace, passes, the C
 *     compiler, one step).  Warm: after the case, another fresh process with
 *     the cache as the first left it runs one eager step, untimed, then
 *     times its first compiled call (without that step the warm start also
 *     paid the process's first touch of a step's memory: on BERT-base
 *     training 0.9-2.9 s on this host, where loading the kernels took tens
 *     of ms).  The compile time printed is "first call - median compiled
 *     step" for both sides (the same method); ours also prints
 *     ct_compiled_stats's compile_ms and the kernels built / loaded from the
 *     disk cache.
 *   - Same threads on both sides: ct_set_num_threads + openblas_set_num_
 *     threads / torch.set_num_threads; torch's environment as in
 *     bench_suite (ATEN_CPU_CAPABILITY, OMP_WAIT_POLICY=PASSIVE,
 *     GLIBC_TUNABLES).
 *   - The reference Python: $CT_BENCH_PYTHON, else the python3 on PATH.
 *     Without torch >= 2 the run goes on with ctorch's columns only, and
 *     the install command is printed.
 *
 * --max-autotune: ctorch's compiled side compiles with CT_COMPILE_MAX_AUTOTUNE
 * (its first call, timed as the cold compile, includes the autotuning; rows
 * "compile_ma_<case>_t<n>"; torch's side stays torch.compile's default mode).
 *
 * Rows go to build/bench.json as "compile_<case>_t<n>": ours = ctorch
 * compiled, reference = torch.compile (ms per step), with the eager times
 * and the compile times beside.
 */
#define _GNU_SOURCE
#include <cblas.h>
#include <ctorch/compile.h>
#include <ctorch/ctorch.h>
#include <ctorch/models.h>
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_models.h"
#include "bench_util.h"

/* CT_BENCH_COMPILE_EAGER (a -D of a hand build, never the default): the
 * "compiled" side calls the function eagerly, for testing this harness
 * where the compiler is not built; the run says so on its first line. */
#ifdef CT_BENCH_COMPILE_EAGER
struct ct_compiled { ct_fn fn; void *ctx; int64_t calls; };
static ct_compiled *stub_compile(ct_fn fn, void *ctx, const ct_compile_opts *o) {
    (void)o;
    ct_compiled *c = calloc(1, sizeof *c);
    if (c) { c->fn = fn; c->ctx = ctx; }
    return c;
}
static ct_status stub_call(ct_compiled *c, ct_tensor *const *in, int nin, ct_tensor **out, int nout) {
    c->calls++;
    return c->fn(in, nin, out, nout, c->ctx);
}
static ct_compile_stats stub_stats(const ct_compiled *c) {
    ct_compile_stats st = {0};
    st.calls = st.eager_calls = c->calls;
    return st;
}
#define ct_compile stub_compile
#define ct_compiled_call stub_call
static char *stub_explain(const ct_compiled *c) { (void)c; return NULL; }
#define ct_compiled_stats stub_stats
#define ct_compile_explain stub_explain
#define ct_compiled_free free
#endif

#define MAX_REPS 200
/* The order of the four sides in repetition i is k_order[i % 2]: each
 * framework's two sides swap places every repetition, so each follows the
 * other equally often (across the repetitions' boundaries too: 0 1 2 3 1 0
 * 3 2 0 1 ...).  The side right after its twin finds the input that step
 * just read still in the caches: a plain rotation, where ctorch eager
 * always ran right after ctorch compiled, read layer_norm (the same kernel
 * on both sides) at 1.28 compiled/eager, 1.00 alternated alone. */
static const int k_order[2][4] = {{0, 1, 2, 3}, {1, 0, 3, 2}};

/* The median over repetitions i of a[i] / b[i]: the two sides' steps of
 * one repetition ran next to each other, in the same state of the host.
 * Step times here are often bimodal (a shared L3, neighbours' load: the
 * same layer_norm kernel takes 1.5 or 2.5 ms, about half and half), and
 * the ratio of two medians then depends on which mode each median lands
 * in: identical code on both sides read 1.16. */
static double paired_ratio(const double *a, int na, const double *b, int nb) {
    int n = na < nb ? na : nb;
    if (n <= 0) return NAN;
    double r[MAX_REPS];
    for (int i = 0; i < n; i++) r[i] = a[i] / b[i];
    return bench_stats(r, n).med;
}
#define MAX_EXTRA_REPS 60       /* fast cases: repetitions up to this ... */
#define EXTRA_BUDGET_MS 600.0   /* ... while a ctorch side has run less than this */

/* ======================================================================
 * The cases (ours): the definitions and sizes of bench_suite.c.
 * ====================================================================== */
enum { K_KERNEL, K_TRAIN, K_INFER, K_OPTIM };

typedef struct cstate {
    ct_tensor *t[4];
    int nin;            /* kernels: inputs t[0..nin) */
    ct_module *model;
    ct_optimizer *opt;
    ct_optimizer *copt; /* K_OPTIM: the same parameters' optimizer, ct_optim_compile'd */
    int loss;           /* 0 cross_entropy, 1 mse */
    ct_fn fn;           /* what is compiled */
    ct_compiled *c;
} cstate;

static int fail_ct(const char *what) {
    fprintf(stderr, "bench_compile: %s: %s\n", what, ct_last_error());
    return -1;
}

/* ---- the functions compiled ---- */
static ct_status fn_gelu_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    const int64_t d[1] = {-1};
    out[0] = ct_sum(ct_gelu(ct_add(ct_mul(in[0], in[1]), in[2]), CT_GELU_NONE), d, 1, false);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status fn_softmax(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_softmax(in[0], -1);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status fn_layer_norm(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    const int64_t ns[1] = {1024};
    out[0] = ct_layer_norm(in[0], ns, 1, in[1], in[2], 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}
/* a module's forward: ctx is the module (its parameters are reached
 * through it, as in ct_module_compile) */
static ct_status fn_forward(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout;
    out[0] = ct_module_forward1((ct_module *)ctx, in[0]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static int setup_rows(cstate *s) {
    s->t[0] = ct_randn(CT_SHAPE(4096, 1024), CT_F32);
    s->t[1] = ct_randn(CT_SHAPE(1024), CT_F32);
    s->t[2] = ct_randn(CT_SHAPE(1024), CT_F32);
    return s->t[0] && s->t[1] && s->t[2] ? 0 : -1;
}
static int setup_gelu_sum(cstate *s) { s->fn = fn_gelu_sum; s->nin = 3; return setup_rows(s); }
static int setup_softmax(cstate *s) { s->fn = fn_softmax; s->nin = 1; return setup_rows(s); }
static int setup_layer_norm(cstate *s) { s->fn = fn_layer_norm; s->nin = 3; return setup_rows(s); }

static int model_case(cstate *s, ct_module *m, const char *opt, double lr) {
    if (!(s->model = m)) return -1;
    s->fn = fn_forward;
    if (!opt) { ct_module_eval(m); return 0; }
    return (s->opt = make_opt(m, opt, lr)) ? 0 : -1;
}

static int setup_mlp_train(cstate *s) {
    ct_module *m[5] = {ct_linear_new(784, 512, true), ct_relu_new(), ct_linear_new(512, 512, true),
                       ct_relu_new(), ct_linear_new(512, 10, true)};
    s->t[0] = ct_randn(CT_SHAPE(128, 784), CT_F32);
    s->t[1] = ct_randint(0, 10, CT_SHAPE(128), CT_I64);
    return s->t[0] && s->t[1] ? model_case(s, seq_take(m, 5), "sgd", 0.01) : -1;
}

static int setup_cnn_train(cstate *s) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *m[8] = {ct_conv2d_new(3, 32, k3, &pad), ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_conv2d_new(32, 64, k3, &pad), ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_flatten_new(1, -1), ct_linear_new(64 * 8 * 8, 10, true)};
    s->t[0] = ct_randn(CT_SHAPE(64, 3, 32, 32), CT_F32);
    s->t[1] = ct_randint(0, 10, CT_SHAPE(64), CT_I64);
    return s->t[0] && s->t[1] ? model_case(s, seq_take(m, 8), "adam", 1e-3) : -1;
}

static ct_module *encoder_layer(cstate *s) {
    s->t[0] = ct_randn(CT_SHAPE(16, 128, 256), CT_F32);
    s->t[1] = ct_randn(CT_SHAPE(16, 128, 256), CT_F32);
    if (!s->t[0] || !s->t[1]) return NULL;
    return ct_transformer_encoder_layer_new(256, 4, 1024, 0.1, CT_TRANSFORMER_RELU, 1e-5, true, false,
                                            true);
}
static int setup_transformer_train(cstate *s) {
    s->loss = 1;
    return model_case(s, encoder_layer(s), "adam", 1e-4);
}
static int setup_transformer_infer(cstate *s) { return model_case(s, encoder_layer(s), NULL, 0); }

static int setup_bert(cstate *s, int64_t batch, const char *opt) {
    ct_bert_config cfg = ct_bert_base_config();
    s->t[0] = ct_randint(0, cfg.vocab_size, CT_SHAPE(batch, 128), CT_I64);
    s->t[1] = ct_randint(0, 2, CT_SHAPE(batch), CT_I64);
    if (!s->t[0] || !s->t[1]) return -1;
    return model_case(s, ct_bert_for_sequence_classification_new(&cfg, 2), opt, 1e-4);
}
static int setup_bert_train(cstate *s) { return setup_bert(s, 8, "adamw"); }
static int setup_bert_infer1(cstate *s) { return setup_bert(s, 1, NULL); }

static int setup_resnet(cstate *s, int64_t batch, const char *opt) {
    s->t[0] = ct_randn(CT_SHAPE(batch, 3, 224, 224), CT_F32);
    s->t[1] = ct_randint(0, 1000, CT_SHAPE(batch), CT_I64);
    if (!s->t[0] || !s->t[1]) return -1;
    return model_case(s, ct_resnet50_new(1000), opt, 0.01);
}
static int setup_resnet50_train(cstate *s) { return setup_resnet(s, 8, "sgdm"); }

/* The optimizer step alone: AdamW over a TransformerEncoderLayer 512/8/2048's
 * parameters (3.2M, 16 tensors) with fixed random gradients; eager is the
 * fused multi-tensor step (make_opt), compiled is ct_optim_compile of a
 * second optimizer over the same parameters (torch: torch.compile of
 * opt.step). */
static int setup_adamw_step(cstate *s) {
    ct_module *m = ct_transformer_encoder_layer_new(512, 8, 2048, 0.1, CT_TRANSFORMER_RELU, 1e-5, true,
                                                    false, true);
    if (!(s->model = m) || !(s->opt = make_opt(m, "adamw", 1e-3)) || !(s->copt = make_opt(m, "adamw", 1e-3)))
        return -1;
    ct_tensor *params[64];
    int np = ct_module_named_parameters(m, NULL, params, 64);
    for (int i = 0; i < np && i < 64; i++)
        if (ct_set_grad(params[i], ct_randn_like(params[i])) != CT_OK) return -1;
    return ct_optim_compile(s->copt, NULL) == CT_OK ? 0 : -1;
}
static int setup_resnet50_infer1(cstate *s) { return setup_resnet(s, 1, NULL); }

/* One step of either side: compiled (through s->c) or eager (s->fn called
 * directly, or the module's forward). */
static ct_tensor *forward(cstate *s, int compiled) {
    ct_tensor *y = NULL;
    ct_tensor *const *in = s->t;
    int nin = s->model ? 1 : s->nin;
    ct_status st = compiled ? ct_compiled_call(s->c, in, nin, &y, 1) : s->fn(in, nin, &y, 1, s->model);
    return st == CT_OK ? y : NULL;
}

static int step(cstate *s, int kind, int compiled) {
    if (kind == K_KERNEL) return forward(s, compiled) ? 0 : fail_ct("kernel");
    if (kind == K_OPTIM) return ct_optim_step(compiled ? s->copt : s->opt) == CT_OK ? 0 : fail_ct("step");
    if (kind == K_INFER) {
        bool prev = ct_set_inference_mode(true);
        ct_tensor *y = forward(s, compiled);
        ct_set_inference_mode(prev);
        return y ? 0 : fail_ct("forward");
    }
    ct_optim_zero_grad(s->opt, true);
    ct_tensor *out = forward(s, compiled);
    if (!out) return fail_ct("forward");
    ct_tensor *loss = s->loss == 1 ? ct_mse_loss(out, s->t[1], CT_REDUCTION_MEAN)
                                   : ct_cross_entropy(out, s->t[1], NULL);
    if (!loss) return fail_ct("loss");
    if (ct_backward(loss, NULL, false, false) != CT_OK) return fail_ct("backward");
    if (ct_optim_step(s->opt) != CT_OK) return fail_ct("optimizer step");
    return 0;
}

/* ======================================================================
 * The case table.
 * ====================================================================== */
typedef struct {
    const char *name;
    const char *desc;
    int (*setup)(cstate *s);
    int kind;
    int big;   /* steps of seconds: fewer repetitions */
} case_def;

static const case_def k_cases[] = {
    {"gelu_sum", "sum(gelu(x*a+b), -1), x [4096,1024] f32, a,b [1024]", setup_gelu_sum, K_KERNEL, 0},
    {"softmax", "softmax(-1) of [4096,1024]", setup_softmax, K_KERNEL, 0},
    {"layer_norm", "layer_norm(1024) of [4096,1024], affine", setup_layer_norm, K_KERNEL, 0},
    {"mlp_train", "MLP 784-512-512-10 train step, b128, SGD", setup_mlp_train, K_TRAIN, 0},
    {"cnn_train", "CNN 2xconv3x3 train step, 64x3x32x32, Adam", setup_cnn_train, K_TRAIN, 0},
    {"transformer_train", "TransformerEncoderLayer 256/4/1024 train, 16x128, Adam",
     setup_transformer_train, K_TRAIN, 0},
    {"transformer_infer", "TransformerEncoderLayer 256/4/1024 eval, 16x128", setup_transformer_infer,
     K_INFER, 0},
    {"bert_train", "BERT-base seq-classif. train step, 8x128, AdamW", setup_bert_train, K_TRAIN, 1},
    {"bert_infer1", "BERT-base seq-classif. inference, 1x128", setup_bert_infer1, K_INFER, 0},
    {"resnet50_train", "ResNet-50 train step, 8x3x224x224, SGD m0.9", setup_resnet50_train, K_TRAIN, 1},
    {"resnet50_infer1", "ResNet-50 inference latency, batch 1", setup_resnet50_infer1, K_INFER, 0},
    {"adamw_step", "AdamW step alone, TransformerEncoderLayer 512/8/2048 params (3.2M)", setup_adamw_step,
     K_OPTIM, 0},
};
#define N_CASES ((int)(sizeof k_cases / sizeof k_cases[0]))

/* ======================================================================
 * Our case process: "c" / "e" lines -> one timed step's ms; "s" -> the
 * compile stats; "q" ends it.  It starts with the first compiled call
 * timed (the cold or warm compile) and answers
 * "ready <first ms> <stats>"; warm_only: it stops there.
 * ====================================================================== */
static void set_threads(int n) {
    ct_set_num_threads(n);
    openblas_set_num_threads(n);
}

static void put_stats(FILE *out, const cstate *s) {
    ct_compile_stats st = s->copt ? ct_optim_compile_stats(s->copt) : ct_compiled_stats(s->c);
    fprintf(out, "%lld %lld %.3f %lld %lld %lld %lld %lld", (long long)st.kernels_built,
            (long long)st.kernels_loaded, st.compile_ms, (long long)st.traces, (long long)st.recompiles,
            (long long)st.graph_breaks, (long long)st.eager_calls, (long long)st.calls);
    /* the compiler's own timing of the graph against eager (compile.h), as
     * ct_compile_explain words it: why the compiled side ran eagerly, if it did */
    char *x = s->c ? ct_compile_explain(s->c) : s->copt ? ct_optim_compile_explain(s->copt) : NULL;
    static const char *const keys[] = {"eager training steps were faster", "training steps timed",
                                       "eager was faster", "steps timed"};
    for (int k = 0; x && k < 4; k++) {
        const char *w = strstr(x, keys[k]);
        if (!w) continue;
        int n = (int)strcspn(w, "\n");
        fprintf(out, " | %.*s", n > 300 ? 300 : n, w);
        break;
    }
    free(x);
    ct_clear_error();
}

/* --max-autotune: our compiled side compiles in CT_COMPILE_MAX_AUTOTUNE */
static int g_max_autotune;

static void child_serve(const case_def *cd, int threads, int warmup, int warm_only, int rfd, int wfd) {
    FILE *in = fdopen(rfd, "r"), *out = fdopen(wfd, "w");
    if (!in || !out) return;
    set_threads(threads);
    ct_manual_seed(0);
    cstate s;
    memset(&s, 0, sizeof s);
    if (cd->setup(&s) != 0) {
        fprintf(out, "err setup failed: %s\n", ct_last_error());
        goto done;
    }
    if (cd->kind != K_OPTIM && !(s.c = ct_compile(s.fn, s.model, g_max_autotune ? &(ct_compile_opts){.mode = CT_COMPILE_MAX_AUTOTUNE} : NULL))) {
        fprintf(out, "err ct_compile: %s\n", ct_last_error());
        goto done;
    }
    ct_scope sc;
    int rc;
    if (warm_only) { /* one eager step first: its first-touch costs are not the warm start's */
        sc = ct_scope_begin();
        rc = step(&s, cd->kind, 0);
        ct_scope_end(sc);
        if (rc) {
            fprintf(out, "err the eager step before the warm start failed: %s\n", ct_last_error());
            goto done;
        }
    }
    double t0 = bench_now_ms();
    sc = ct_scope_begin();
    rc = step(&s, cd->kind, 1);
    ct_scope_end(sc);
    double first = bench_now_ms() - t0;
    if (rc) {
        fprintf(out, "err first compiled call failed: %s\n", ct_last_error());
        goto done;
    }
    for (int r = 0; !warm_only && r < warmup; r++)
        for (int side = 1; side >= 0; side--) {
            sc = ct_scope_begin();
            rc = step(&s, cd->kind, side);
            ct_scope_end(sc);
            if (rc) {
                fprintf(out, "err warm-up step (%s) failed: %s\n", side ? "compiled" : "eager",
                        ct_last_error());
                goto done;
            }
        }
    fprintf(out, "ready %.3f ", first);
    put_stats(out, &s);
    fprintf(out, "\n");
    fflush(out);
    char line[64];
    while (!warm_only && fgets(line, sizeof line, in) && (line[0] == 'c' || line[0] == 'e' || line[0] == 's')) {
        if (line[0] == 's') {
            fprintf(out, "ok ");
            put_stats(out, &s);
            fprintf(out, "\n");
            fflush(out);
            continue;
        }
        t0 = bench_now_ms();
        sc = ct_scope_begin();
        rc = step(&s, cd->kind, line[0] == 'c');
        ct_scope_end(sc);
        double t1 = bench_now_ms();
        if (rc) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            for (char *q = msg; *q; q++)
                if (*q == '\n') *q = ' ';
            fprintf(out, "err step failed: %s\n", msg);
            fflush(out);
            break;
        }
        fprintf(out, "%.6f\n", t1 - t0);
        fflush(out);
    }
done:
    fflush(out);
    if (s.c) ct_compiled_free(s.c);
    if (s.opt) ct_optim_free(s.opt);
    if (s.copt) ct_optim_free(s.copt);
    if (s.model) ct_module_release(s.model);
    for (int i = 0; i < 4; i++) ct_release(s.t[i]);
}

typedef struct {
    double first;
    long long built, loaded, traces, recompiles, breaks, eager_calls, calls;
    double compile_ms;
    char why[320]; /* the compiler's timing against eager, when it gave one */
} ours_start;

static int parse_stats(const char *p, ours_start *o) {
    const char *w = strstr(p, " | ");
    snprintf(o->why, sizeof o->why, "%.*s", w ? (int)strcspn(w + 3, "\n") : 0, w ? w + 3 : "");
    return sscanf(p, "%lld %lld %lf %lld %lld %lld %lld %lld", &o->built, &o->loaded, &o->compile_ms,
                  &o->traces, &o->recompiles, &o->breaks, &o->eager_calls, &o->calls) == 8 ? 0 : -1;
}

/* Forks our case process with CT_CACHE_DIR=cache; 0 when it is ready (o
 * filled), else -1 with the message in err. */
static int case_open(bench_proc *cp, const case_def *cd, int threads, int warmup, int warm_only,
                     const char *cache, ours_start *o, char *err, size_t errn) {
    memset(cp, 0, sizeof *cp);
    int a[2], b[2];
    snprintf(err, errn, "cannot start the case's process");
    if (pipe(a)) return -1;
    if (pipe(b)) { close(a[0]); close(a[1]); return -1; }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) { close(a[0]); close(a[1]); close(b[0]); close(b[1]); return -1; }
    if (pid == 0) {
        close(a[1]);
        close(b[0]);
        setenv("CT_CACHE_DIR", cache, 1);
        child_serve(cd, threads, warmup, warm_only, a[0], b[1]);
        _exit(0);
    }
    close(a[0]);
    close(b[1]);
    char line[1024];
    if (bench_proc_attach(cp, pid, a[1], b[0], line, sizeof line)) {
        snprintf(err, errn, "%s", line[0] ? line : "the case's process died");
        return -1;
    }
    char *end;
    o->first = strtod(line + 5, &end);
    if (parse_stats(end, o)) {
        snprintf(err, errn, "bad reply: %s", line);
        return -1;
    }
    return 0;
}

/* The stats of an open case process ("s"). */
static int case_stats(bench_proc *cp, ours_start *o) {
    char line[512];
    if (!cp->to || fputs("s\n", cp->to) == EOF || fflush(cp->to) || !fgets(line, sizeof line, cp->from) ||
        strncmp(line, "ok ", 3))
        return -1;
    return parse_stats(line + 3, o);
}

static double case_step(bench_proc *cp, int compiled, char *err, size_t errn) {
    return bench_proc_send(cp, compiled ? "c\n" : "e\n", err, errn);
}

/* ======================================================================
 * The PyTorch child (bench/compile_ref.py).
 * ====================================================================== */
typedef struct { pid_t pid; FILE *in, *out; } ref_proc;

static int ref_start(ref_proc *rp, const char *aten_cap, const char *py) {
    char script[4096];
    const char *env_script = getenv("CT_BENCH_COMPILE_REF");
    if (env_script) snprintf(script, sizeof script, "%s", env_script);
    else {
        snprintf(script, sizeof script, "%s", __FILE__);   /* .../bench/bench_compile.c */
        char *slash = strrchr(script, '/');
        if (slash) snprintf(slash + 1, sizeof script - (size_t)(slash + 1 - script), "compile_ref.py");
        else snprintf(script, sizeof script, "bench/compile_ref.py");
    }
    int to[2], from[2];
    if (pipe(to) || pipe(from)) return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(to[0], 0);
        dup2(from[1], 1);
        close(to[0]); close(to[1]); close(from[0]); close(from[1]);
        /* inductor's "No CUDA runtime is found" warning and the like */
        FILE *null = getenv("CT_BENCH_VERBOSE") ? NULL : fopen("/dev/null", "w");
        if (null) dup2(fileno(null), 2);
        setenv("ATEN_CPU_CAPABILITY", aten_cap, 1);
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        setenv("GLIBC_TUNABLES",
               "glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:"
               "glibc.malloc.trim_threshold=17179869184", 1);
        execl(py, py, "-u", "-W", "ignore::UserWarning", script, (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    rp->pid = pid;
    rp->in = fdopen(to[1], "w");
    rp->out = fdopen(from[0], "r");
    return rp->in && rp->out ? 0 : -1;
}

/* Sends a command, returns the reply line (malloc'ed) or NULL if the child is gone. */
static char *ref_cmd(ref_proc *rp, const char *cmd) {
    if (!rp->in) return NULL;
    if (fprintf(rp->in, "%s\n", cmd) < 0 || fflush(rp->in) != 0) return NULL;
    size_t cap = 1 << 16;
    char *line = malloc(cap);
    if (!line) return NULL;
    if (!fgets(line, (int)cap, rp->out)) { free(line); return NULL; }
    line[strcspn(line, "\n")] = 0;
    return line;
}

static void ref_stop(ref_proc *rp) {
    if (rp->in) { fprintf(rp->in, "quit\n"); fclose(rp->in); rp->in = NULL; }
    if (rp->out) { fclose(rp->out); rp->out = NULL; }
    if (rp->pid > 0) waitpid(rp->pid, NULL, 0);
    rp->pid = 0;
}

/* ======================================================================
 * main
 * ====================================================================== */
static int case_selected(const char *list, const char *name) {
    if (!list) return 1;
    size_t L = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == L && !strncmp(p, name, L)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}
static void rm_tree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

static void cpu_model(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    fclose(f);
}

static void fmt_ms(char *buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "-");
    else if (v >= 100) snprintf(buf, n, "%.1f", v);
    else snprintf(buf, n, "%.3f", v);
}
static void fmt_ratio(char *buf, size_t n, double a, double b) {
    if (isnan(a) || isnan(b) || b <= 0) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.3f", a / b);
}

int main(int argc, char **argv) {
    const char *json = "build/bench.json", *cases = NULL;
    int threads = 2, quick = 0, reps_override = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--max-autotune")) g_max_autotune = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps_override = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--list")) {
            for (int c = 0; c < N_CASES; c++) printf("%-18s %s\n", k_cases[c].name, k_cases[c].desc);
            return 0;
        } else if (argv[i][0] != '-') json = argv[i];
        else {
            fprintf(stderr, "usage: %s [bench.json] [--threads N] [--cases a,b] [--quick] [--reps N] "
                            "[--max-autotune] [--list]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || threads > 1024) threads = 2;
    if (reps_override < 0 || reps_override > MAX_REPS) reps_override = 0;
    if (cases) {
        for (const char *p = cases; *p;) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            int found = 0;
            for (int c = 0; c < N_CASES; c++)
                if (strlen(k_cases[c].name) == n && !strncmp(k_cases[c].name, p, n)) found = 1;
            if (!found) {
                fprintf(stderr, "bench_compile: unknown case '%.*s' (--list shows them)\n", (int)n, p);
                return 2;
            }
            if (!e) break;
            p = e + 1;
        }
    }
    signal(SIGPIPE, SIG_IGN);

    __builtin_cpu_init();
    const char *aten_cap = __builtin_cpu_supports("avx512f") ? "avx512" : "avx2";
    char cpu[256];
    cpu_model(cpu, sizeof cpu);
    double load0[3] = {0, 0, 0};
    if (getloadavg(load0, 3) < 0) load0[0] = NAN;
#ifdef CT_BENCH_COMPILE_EAGER
    printf("*** CT_BENCH_COMPILE_EAGER build: the \"compiled\" ctorch side runs EAGERLY (a test of the "
           "harness, not a measurement of the compiler) ***\n");
#endif
    printf("ctorch compiled (ct_compile) vs ctorch eager vs torch.compile (inductor, default mode) vs "
           "torch eager,\n%d thread%s, one run, alternating step by step%s\n", threads,
           threads > 1 ? "s" : "", quick ? " (--quick)" : "");
    printf("machine: %s, %ld CPUs online; load average %.2f %.2f %.2f at start\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), load0[0], load0[1], load0[2]);
    const char *cc = getenv("CC");
    printf("ctorch's C compiler: %s; caches: a fresh empty CT_CACHE_DIR / TORCHINDUCTOR_CACHE_DIR per "
           "case (cold),\n         reused by a second fresh process (warm)\n", cc && *cc ? cc : "cc");

    ref_proc rp = {0, NULL, NULL};
    char torch_version[512] = "", torch_short[64] = "none";
    const char *py = getenv("CT_BENCH_PYTHON");
    if (!py || !*py) py = "python3";
    char pypath[4096];
    if (!strchr(py, '/')) {  /* execl needs a path: look python3 up on PATH */
        const char *path = getenv("PATH");
        pypath[0] = 0;
        for (const char *p = path ? path : ""; *p;) {
            const char *e = strchr(p, ':');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len > 0 && len < sizeof pypath - 16) {
                snprintf(pypath, sizeof pypath, "%.*s/%s", (int)len, p, py);
                if (access(pypath, X_OK) == 0) break;
            }
            pypath[0] = 0;
            if (!e) break;
            p = e + 1;
        }
        if (pypath[0]) py = pypath;
    }
    int have_ref = 0;
    char ref_why[1024] = "no reply";
    if (ref_start(&rp, aten_cap, py) == 0) {
        char *v = ref_cmd(&rp, "version");
        if (v && !strncmp(v, "ok ", 3)) {
            have_ref = 1;
            snprintf(torch_version, sizeof torch_version, "%s", v + 3);
            sscanf(torch_version, "torch %63s", torch_short);
        } else if (v) snprintf(ref_why, sizeof ref_why, "%s", v);
        else snprintf(ref_why, sizeof ref_why, "%s does not import torch", py);
        free(v);
    }
    if (have_ref) {
        printf("reference: %s, run by %s\n", torch_version, py);
        printf("torch env: torch.set_num_threads(%d), ATEN_CPU_CAPABILITY=%s, OMP_WAIT_POLICY=PASSIVE, "
               "GLIBC_TUNABLES as in bench_suite\n", threads, aten_cap);
    } else {
        ref_stop(&rp);
        printf("reference: none (%s): ctorch's columns only.\n"
               "           torch >= 2 with torch.compile is needed: CT_WITH_TORCH_PYPI=1 sh "
               "scripts/install-deps.sh\n           (into .deps/venv; `make bench` passes it as "
               "CT_BENCH_PYTHON)\n", ref_why);
    }
    printf("ratios: c/e = compiled / eager of the same framework; ct/t = ctorch / torch of the same "
           "mode (lower: ctorch faster)\n");
    printf("compile = first compiled call - median compiled step, cold (empty cache) and warm (fresh "
           "process, cache kept, one eager step first)\n");

    printf("\n%-18s %10s %10s %10s %10s   %7s %7s %7s %7s  %s\n", "case (ms/step)", "ct.comp", "ct.eager",
           "torch.comp", "torch.eag", "ct c/e", "t c/e", "ct/t c", "ct/t e", "reps");
    int failures = 0;
    double geo_ce = 0, geo_ct = 0;
    int geo_ce_n = 0, geo_ct_n = 0;
    char worst_case[64] = "";
    double worst = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        const case_def *cd = &k_cases[ci];
        if (!case_selected(cases, cd->name)) continue;
        /* even: k_order's two orders equally often (with 5, the side
         * that goes first after a torch step -- caches and TLB cold from
         * torch's gigabytes -- was ctorch compiled in 3 of them) */
        int reps = quick ? 2 : cd->big ? 6 : 10;
        /* warm-up steps on both sides: past ct_compile's timing of itself
         * against eager (calls 2-6, include/ctorch/compile.h; training
         * steps and optimizer steps: calls 3-12, decided at call 13) for the
         * small cases and the training ones; big inference cases amortize
         * it over their steps */
        int warmup = quick ? 1 : cd->kind == K_TRAIN || cd->kind == K_OPTIM ? 12 : cd->big ? 2 : 6;
        if (reps_override) reps = reps_override;
        char dir[] = "/tmp/ct-bench-compile.XXXXXX";
        if (!mkdtemp(dir)) { perror("bench_compile: mkdtemp"); return 1; }
        char ct_cache[256], t_cache[256];
        snprintf(ct_cache, sizeof ct_cache, "%s/ctorch", dir);
        snprintf(t_cache, sizeof t_cache, "%s/inductor", dir);
        mkdir(ct_cache, 0700);
        mkdir(t_cache, 0700);

        /* both cases' processes: set up, first compiled call (cold), warm-up */
        double v[4][MAX_REPS];
        int nv[4] = {0, 0, 0, 0};
        int ok[4] = {0, 0, 0, 0};
        char err[4][1024] = {"", "", "", ""};
        bench_proc cp;
        ours_start cold = {.first = NAN}, warm = {.first = NAN}, after = {.first = NAN};
        int ok_o = case_open(&cp, cd, threads, warmup, 0, ct_cache, &cold, err[0], sizeof err[0]) == 0;
        if (!ok_o) snprintf(err[1], sizeof err[1], "%s", err[0]);
        ok[0] = ok[1] = ok_o;
        double t_cold = NAN, t_warm = NAN;
        if (have_ref) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "open %s %d %d %s", cd->name, threads, warmup, t_cache);
            char *r = ref_cmd(&rp, cmd);
            if (r && !strncmp(r, "ok ", 3)) {
                char *end;
                t_cold = strtod(r + 3, &end);
                ok[2] = !isnan(t_cold);
                ok[3] = 1;
                if (!ok[2]) snprintf(err[2], sizeof err[2], "torch.compile failed:%s", end);
            } else {
                snprintf(err[2], sizeof err[2], "%s", r ? r : "no reply");
                snprintf(err[3], sizeof err[3], "%s", err[2]);
            }
            free(r);
        }
        /* alternate: sides 0 ct compiled, 1 ct eager, 2 torch compiled, 3
         * torch eager, in the orders of k_order.  Cases of a few
         * ms a step go on past reps (up to MAX_EXTRA_REPS) until each of
         * ctorch's sides has run EXTRA_BUDGET_MS: ten steps of 2 ms are at
         * the mercy of one burst of a shared host's noise */
        double spent[2] = {0, 0};
        int rounds = reps;
        for (int i = 0; i < rounds; i++) {
            if (i == rounds - 2 && !reps_override && !quick && rounds < MAX_EXTRA_REPS &&
                (spent[0] < EXTRA_BUDGET_MS || spent[1] < EXTRA_BUDGET_MS))
                rounds += 2; /* in pairs: both orders */
            for (int k = 0; k < 4; k++) {
                int side = k_order[i % 2][k];
                if (!ok[side]) continue;
                bench_pause_ms(BENCH_SIDE_PAUSE_MS);
                double t;
                if (side < 2) t = case_step(&cp, side == 0, err[side], sizeof err[side]);
                else {
                    char *r = ref_cmd(&rp, side == 2 ? "step c" : "step e");
                    t = r && !strncmp(r, "ok ", 3) ? atof(r + 3) : -1;
                    if (t < 0) snprintf(err[side], sizeof err[side], "%s", r ? r : "no reply");
                    free(r);
                }
                if (t < 0) ok[side] = 0;
                else {
                    v[side][nv[side]++] = t;
                    if (side < 2) spent[side] += t;
                }
            }
        }
        reps = rounds;
        if (ok_o && case_stats(&cp, &after)) after.calls = -1;
        bench_proc_close(&cp);
        if (have_ref) free(ref_cmd(&rp, "close"));
        /* warm starts: fresh processes, the caches as the cold ones left them */
        bench_proc wp;
        char werr[1024] = "";
        int ok_w = ok_o && case_open(&wp, cd, threads, 0, 1, ct_cache, &warm, werr, sizeof werr) == 0;
        if (ok_o) bench_proc_close(&wp);
        if (have_ref && ok[2]) {
            char cmd[512];
            snprintf(cmd, sizeof cmd, "warm %s %d %s", cd->name, threads, t_cache);
            char *r = ref_cmd(&rp, cmd);
            if (r && !strncmp(r, "ok ", 3)) t_warm = atof(r + 3);
            free(r);
        }
        rm_tree(dir);

        double med[4];
        for (int s = 0; s < 4; s++) med[s] = nv[s] > 0 ? bench_stats(v[s], nv[s]).med : NAN;
        /* the ratios: medians of the per-repetition ratios (see paired_ratio) */
        double rce = paired_ratio(v[0], nv[0], v[1], nv[1]);
        char m[4][16], r1[16], r2[16], r3[16], r4[16];
        for (int s = 0; s < 4; s++) fmt_ms(m[s], sizeof m[s], med[s]);
        fmt_ratio(r1, sizeof r1, rce, 1.0);
        fmt_ratio(r2, sizeof r2, paired_ratio(v[2], nv[2], v[3], nv[3]), 1.0);
        fmt_ratio(r3, sizeof r3, paired_ratio(v[0], nv[0], v[2], nv[2]), 1.0);
        fmt_ratio(r4, sizeof r4, paired_ratio(v[1], nv[1], v[3], nv[3]), 1.0);
        printf("%-18s %10s %10s %10s %10s   %7s %7s %7s %7s  %d\n", cd->name, m[0], m[1], m[2], m[3], r1, r2,
               r3, r4, reps);
        for (int s = 0; s < 4; s++)
            if (nv[s] == 0 && (s < 2 || have_ref)) {
                static const char *nm[4] = {"ctorch compiled", "ctorch eager", "torch.compile", "torch eager"};
                printf("    %s: %s\n", nm[s], err[s][0] ? err[s] : "no result");
                failures++;
            }
        if (ok_o) {
            double cc_cold = cold.first - med[0], cc_warm = ok_w ? warm.first - med[0] : NAN;
            double tc_cold = t_cold - med[2], tc_warm = t_warm - med[2];
            char a[16], b[16], c[16], d[16], rc[16], rw[16];
            fmt_ms(a, sizeof a, cc_cold);
            fmt_ms(b, sizeof b, cc_warm);
            fmt_ms(c, sizeof c, tc_cold);
            fmt_ms(d, sizeof d, tc_warm);
            fmt_ratio(rc, sizeof rc, cc_cold, tc_cold);
            fmt_ratio(rw, sizeof rw, cc_warm, tc_warm);
            printf("    compile ms: ctorch cold %s warm %s | torch.compile cold %s warm %s | ct/t cold %s "
                   "warm %s\n", a, b, have_ref ? c : "-", have_ref ? d : "-", rc, rw);
            printf("    ctorch stats: cold: %lld kernels built, %lld loaded, compile_ms %.1f; warm: %lld "
                   "built, %lld loaded, compile_ms %.1f; after the run: %lld calls, %lld traces, "
                   "%lld recompiles, %lld graph breaks, %lld eager calls\n",
                   cold.built, cold.loaded, cold.compile_ms, warm.built,
                   warm.loaded, warm.compile_ms, after.calls, after.traces, after.recompiles, after.breaks,
                   after.eager_calls);
            if (!ok_w) printf("    ctorch warm start: %s\n", werr);
            if (after.eager_calls > 0)
                printf("    note: ctorch's compiled side ran eagerly in %lld of %lld calls (the compiler's "
                       "fallback)\n", after.eager_calls, after.calls);
            if (after.why[0]) printf("    ct_compile's timing against eager: %s\n", after.why);
        }
        fflush(stdout);
        if ((cd->kind == K_TRAIN || cd->kind == K_INFER) && nv[0] > 0 && nv[1] > 0) {
            geo_ce += log(rce);
            geo_ce_n++;
        }
        if (nv[0] > 0 && nv[1] > 0 && rce > worst) {
            worst = rce;
            snprintf(worst_case, sizeof worst_case, "%s", cd->name);
        }
        if (nv[0] > 0 && nv[2] > 0) {
            geo_ct += log(paired_ratio(v[0], nv[0], v[2], nv[2]));
            geo_ct_n++;
        }
        if (nv[0] > 0 && nv[2] > 0) {
            char name[128], extra[1024], j[6][32];
            double jv[6] = {med[1], med[3], cold.first - med[0], ok_w ? warm.first - med[0] : NAN,
                            t_cold - med[2], t_warm - med[2]};
            for (int q = 0; q < 6; q++) /* JSON has no NaN */
                snprintf(j[q], sizeof j[q], isnan(jv[q]) ? "null" : "%.6g", jv[q]);
            snprintf(name, sizeof name, "compile_%s%s_t%d", g_max_autotune ? "ma_" : "", cd->name, threads);
            snprintf(extra, sizeof extra,
                     "\"threads\": %d, \"ct_eager\": %s, \"torch_eager\": %s, \"torch_version\": "
                     "\"%s\", \"reps\": %d, \"ct_compile_cold_ms\": %s, \"ct_compile_warm_ms\": %s, "
                     "\"torch_compile_cold_ms\": %s, \"torch_compile_warm_ms\": %s, "
                     "\"kernels_built\": %lld, \"kernels_loaded_warm\": %lld, \"ct_compiled_over_eager\": %.4f",
                     threads, j[0], j[1], torch_short, reps, j[2], j[3], j[4], j[5], cold.built, warm.loaded,
                     nv[1] > 0 ? rce : 0.0);
            if (bench_json_add(json, name, med[0], med[2], "ms", extra) != 0)
                fprintf(stderr, "bench_compile: cannot write %s\n", json);
        }
    }
    ref_stop(&rp);
    if (geo_ce_n)
        printf("geometric mean of ctorch compiled / ctorch eager over the %d training and inference "
               "cases: %.3f (issue 18: <= 0.8)\n", geo_ce_n, exp(geo_ce / geo_ce_n));
    if (worst_case[0])
        printf("slowest case of ctorch compiled against eager: %s, %.3f (issue 18: none above 1.02)\n",
               worst_case, worst);
    if (geo_ct_n)
        printf("geometric mean of ctorch compiled / torch.compile over %d cases: %.3f (issue 18: every "
               "case < 1)\n", geo_ct_n, exp(geo_ct / geo_ct_n));
    double load1[3] = {0, 0, 0};
    if (getloadavg(load1, 3) < 0) load1[0] = NAN;
    printf("load average %.2f %.2f %.2f at the end\n", load1[0], load1[1], load1[2]);
    printf("wrote %s%s\n", json, failures ? " (cases with a failed side marked above)" : "");
    return failures ? 1 : 0;
}
