/* bench_func.c -- function transforms (func.h, issue 20) beside torch.func
 * (bench/func_ref.py, the same cases), one repetition of each side in
 * turn (ref_serve.py's interleaved mode), medians of --reps:
 *
 *   psg_cnn      per-sample gradients of the FashionMNIST demo CNN (no
 *                dropout), batch 64: ct_vmap(ct_func_grad(loss)) against
 *                torch.func.vmap(grad(loss))
 *   psg_loop     the same gradients by a loop of 64 single-sample backward
 *                passes, ctorch against torch; below it, ctorch's loop over
 *                ctorch's vmap(grad) (issue 20 asks >= 5x)
 *   hessian_mlp  the Hessian of a 100-parameter MLP's loss (7 -> 11 tanh ->
 *                1, MSE over 32 samples, flat parameters):
 *                ct_func_hessian against torch.func.hessian (both jacfwd
 *                of jacrev)
 *   jvp_encoder  ct_func_jvp of a TransformerEncoderLayer(256, 4, 1024,
 *                dropout 0, relu, batch_first) at x [16, 128, 256] against
 *                torch.func.jvp (which must run torch's math attention: its
 *                CPU flash kernel has no forward-mode rule)
 *   fwd_encoder  that layer's forward alone (no grad), for scale
 *
 *   bench_func [build/bench.json] [--threads N] [--reps N] [--cases a,b]
 *
 * The reference: bench/func_ref.py with $CT_BENCH_PYTHON, else python3.
 * Ratios are ctorch's time over torch's (lower is better).  CT_PROFILE=1
 * prints each case's per-op table of its timed repetitions (stderr;
 * CT_PROFILE_SHAPES=1, CT_PROFILE_ROWS as bench_suite). */
#include <ctorch/ctorch.h>
#include <signal.h>
#include <stdbool.h>

#include "bench_util.h"

#define MAXR 64
#define MAXP 16

static const char *cpu_name(void) {
    static char name[256] = "unknown CPU";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *p = strchr(line, ':');
            if (p) {
                p += 1 + strspn(p + 1, " \t");
                p[strcspn(p, "\n")] = 0;
                snprintf(name, sizeof name, "%s", p);
            }
            break;
        }
    if (f) fclose(f);
    return name;
}

/* ---- the ctorch side of each case ---- */
typedef struct ours {
    ct_module *net;
    ct_func *fnet, *loss, *t1, *t2;
    ct_sample *pnames;
    ct_tensor *params[MAXP], *in[MAXP + 2];
    int np, nin, nout;
    ct_tensor *x, *y, *t, *w;
    bool loop, fwd;
} ours;

static ct_module *make_cnn(void) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *l[10] = {ct_conv2d_new(1, 32, k3, &pad), ct_relu_new(),
                        ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                        ct_conv2d_new(32, 64, k3, &pad), ct_relu_new(),
                        ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                        ct_flatten_new(1, -1), ct_linear_new(64 * 7 * 7, 128, true), ct_relu_new(),
                        ct_linear_new(128, 10, true)};
    ct_module *net = ct_sequential_new(l, 10);
    for (int i = 0; i < 10; i++) ct_module_release(l[i]);
    return net;
}

/* per-sample loss: in = params..., x [1, 28, 28], y (0-dim) */
static ct_status psg_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *vctx) {
    (void)nin, (void)nout;
    ours *o = vctx;
    ct_tensor *fin[MAXP + 1];
    for (int k = 0; k < o->np; k++) fin[k] = in[k];
    fin[o->np] = ct_unsqueeze(in[o->np], 0);
    ct_tensor *logits = NULL;
    ct_status st = ct_func_call(o->fnet, fin, o->np + 1, &logits, 1);
    if (st) return st;
    out[0] = ct_cross_entropy(logits, ct_unsqueeze(in[o->np + 1], 0), NULL);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* the MLP's loss of its 100 flat parameters: in[0] = w, ctx: x, t */
static ct_status mlp_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *vctx) {
    (void)nin, (void)nout;
    ours *o = vctx;
    ct_tensor *w = in[0];
    ct_tensor *w1 = ct_view(ct_narrow(w, 0, 0, 77), CT_SHAPE(11, 7)), *b1 = ct_narrow(w, 0, 77, 11);
    ct_tensor *w2 = ct_view(ct_narrow(w, 0, 88, 11), CT_SHAPE(1, 11)), *b2 = ct_narrow(w, 0, 99, 1);
    ct_tensor *h = ct_tanh(ct_linear(o->x, w1, b1));
    out[0] = ct_mse_loss(ct_linear(h, w2, b2), o->t, CT_REDUCTION_MEAN);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status layer_fwd(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *vctx) {
    (void)nin, (void)nout;
    out[0] = ct_transformer_encoder_layer_forward(((ours *)vctx)->net, in[0], NULL, NULL, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void ours_close(ours *o) {
    ct_func_free(o->t2);
    ct_func_free(o->t1);
    ct_func_free(o->loss);
    ct_func_free(o->fnet);
    ct_sample_free(o->pnames);
    ct_release(o->x);
    ct_release(o->y);
    ct_release(o->t);
    ct_release(o->w);
    ct_module_release(o->net);
    memset(o, 0, sizeof *o);
}

static int ours_open(ours *o, const char *c) {
    memset(o, 0, sizeof *o);
    ct_manual_seed(0);
    if (!strcmp(c, "psg_cnn") || !strcmp(c, "psg_loop")) {
        o->loop = !strcmp(c, "psg_loop");
        if (!(o->net = make_cnn())) return -1;
        const char *names[MAXP];
        o->np = ct_module_named_parameters(o->net, names, o->params, MAXP);
        o->x = ct_randn(CT_SHAPE(64, 1, 28, 28), CT_F32);
        o->y = ct_randint(0, 10, CT_SHAPE(64), CT_I64);
        if (o->loop) return o->x && o->y ? 0 : -1;
        if (!(o->pnames = ct_sample_new())) return -1;
        for (int k = 0; k < o->np; k++)
            if (ct_sample_set(o->pnames, names[k], o->params[k])) return -1;
        o->fnet = ct_func_functional_call(o->net, o->pnames, NULL);
        o->loss = ct_func_new(psg_loss, o);
        int argnums[MAXP];
        for (int k = 0; k < o->np; k++) argnums[k] = k;
        ct_func_grad_opts go = {argnums, o->np, false};
        o->t1 = ct_func_grad(o->loss, &go);
        int64_t in_dims[MAXP + 2];
        for (int k = 0; k < o->np; k++) in_dims[k] = CT_VMAP_NONE;
        in_dims[o->np] = in_dims[o->np + 1] = 0;
        ct_vmap_opts vo = CT_VMAP_DEFAULT;
        vo.in_dims = in_dims;
        vo.n_in_dims = o->np + 2;
        o->t2 = ct_vmap(o->t1, &vo);
        for (int k = 0; k < o->np; k++) o->in[k] = o->params[k];
        o->in[o->np] = o->x;
        o->in[o->np + 1] = o->y;
        o->nin = o->np + 2;
        o->nout = o->np;
        return o->x && o->y && o->fnet && o->loss && o->t1 && o->t2 ? 0 : -1;
    }
    if (!strcmp(c, "hessian_mlp")) {
        o->x = ct_randn(CT_SHAPE(32, 7), CT_F32);
        o->t = ct_randn(CT_SHAPE(32, 1), CT_F32);
        ct_tensor *r = ct_randn(CT_SHAPE(100), CT_F32);
        o->in[0] = o->w = ct_mul_scalar(r, 0.3);
        ct_release(r);
        o->nin = o->nout = 1;
        o->loss = ct_func_new(mlp_loss, o);
        o->t2 = ct_func_hessian(o->loss, NULL);
        return o->x && o->t && o->in[0] && o->t2 ? 0 : -1;
    }
    if (!strcmp(c, "jvp_encoder") || !strcmp(c, "fwd_encoder")) {
        o->fwd = !strcmp(c, "fwd_encoder");
        o->net = ct_transformer_encoder_layer_new(256, 4, 1024, 0.0, CT_TRANSFORMER_RELU, 1e-5, true, false, true);
        o->x = ct_randn(CT_SHAPE(16, 128, 256), CT_F32);
        o->t = ct_randn(CT_SHAPE(16, 128, 256), CT_F32);
        o->loss = ct_func_new(layer_fwd, o);
        return o->net && o->x && o->t && o->loss ? 0 : -1;
    }
    return -1;
}

/* one timed repetition (ms), or -1 */
static double ours_step(ours *o) {
    ct_scope s = ct_scope_begin();
    double t0 = bench_now_ms();
    int ok = 1;
    if (o->loop) {
        for (int64_t b = 0; b < 64 && ok; b++) {
            ct_tensor *l = ct_cross_entropy(ct_module_forward1(o->net, ct_narrow(o->x, 0, b, 1)),
                                            ct_narrow(o->y, 0, b, 1), NULL);
            ct_tensor *g[MAXP];
            ok = l && ct_autograd_grad(&l, 1, o->params, o->np, NULL, false, false, false, g) == CT_OK;
        }
    } else if (o->fwd) {
        bool prev = ct_set_grad_enabled(false);
        ok = ct_transformer_encoder_layer_forward(o->net, o->x, NULL, NULL, false) != NULL;
        ct_set_grad_enabled(prev);
    } else if (o->net && !o->t2) { /* jvp_encoder */
        ct_tensor *y, *jv;
        bool prev = ct_set_grad_enabled(false);
        ok = ct_func_jvp(o->loss, &o->x, &o->t, 1, &y, &jv, 1) == CT_OK;
        ct_set_grad_enabled(prev);
    } else {
        ct_tensor *out[MAXP];
        bool prev = ct_set_grad_enabled(false);
        ok = ct_func_call(o->t2, o->in, o->nin, out, o->nout) == CT_OK;
        ct_set_grad_enabled(prev);
    }
    double ms = bench_now_ms() - t0;
    ct_scope_end(s);
    if (!ok) {
        fprintf(stderr, "bench_func: ctorch step failed: %s\n", ct_last_error());
        return -1;
    }
    return ms;
}

/* ---- torch's side ---- */
static int torch_open(bench_proc *t, const char *py, const char *c, int threads) {
    char th[16], line[256];
    snprintf(th, sizeof th, "%d", threads);
    char *const argv[] = {(char *)py, "bench/func_ref.py", (char *)c, th, NULL};
    return bench_proc_spawn(t, argv, NULL, line, sizeof line);
}

typedef struct { double ms[MAXR]; int n; bool ok; } res;

static void run_case(const char *py, const char *c, int threads, int reps, res *o, res *t) {
    memset(o, 0, sizeof *o);
    memset(t, 0, sizeof *t);
    ours oc;
    bench_proc tp;
    char err[256];
    o->ok = ours_open(&oc, c) == 0;
    if (!o->ok) fprintf(stderr, "bench_func: %s: ctorch setup failed: %s\n", c, ct_last_error());
    for (int i = 0; i < 2 && o->ok; i++) o->ok = ours_step(&oc) >= 0; /* warm-up (vmap traces here) */
    if (o->ok && bench_profile_restart()) /* CT_PROFILE=1: a table of the timed reps, per case */
        fprintf(stderr, "bench_func: %s: profiler restart failed: %s\n", c, ct_last_error());
    t->ok = torch_open(&tp, py, c, threads) == 0;
    for (int i = 0; i < reps && (o->ok || t->ok); i++) {
        for (int side = 0; side < 2; side++) {
            bench_pause_ms(BENCH_SIDE_PAUSE_MS);
            if ((side ^ (i & 1)) == 0) {
                if (!o->ok) continue;
                double ms = ours_step(&oc);
                if (ms < 0) o->ok = false;
                else o->ms[o->n++] = ms;
            } else {
                if (!t->ok) continue;
                double ms = bench_proc_step(&tp, err, sizeof err);
                if (ms < 0) {
                    fprintf(stderr, "bench_func: %s: torch: %s\n", c, err);
                    t->ok = false;
                } else t->ms[t->n++] = ms;
            }
        }
    }
    bench_proc_close(&tp);
    bench_profile_report(c, threads, o->n);
    ours_close(&oc);
}

int main(int argc, char **argv) {
    const char *json = NULL, *only = NULL;
    int threads = 2, reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) only = argv[++i];
        else if (argv[i][0] != '-') json = argv[i];
    }
    signal(SIGPIPE, SIG_IGN); /* a reference that died: its pipe's writes fail, not this process */
    if (reps < 1) reps = 1;
    if (reps > MAXR) reps = MAXR;
    if (threads < 1) threads = 1;
    ct_set_num_threads(threads);
    const char *py = getenv("CT_BENCH_PYTHON");
    if (!py || !*py) py = "python3";
    static const char *cases[] = {"psg_cnn", "psg_loop", "hessian_mlp", "jvp_encoder", "fwd_encoder"};
    printf("function transforms (issue 20) against torch.func, %s, %d thread%s, median of %d, "
           "reference %s (bench/func_ref.py)\n", cpu_name(), threads, threads > 1 ? "s" : "", reps, py);
    printf("%-14s %12s %12s %7s   %s\n", "case", "ctorch ms", "torch ms", "ratio", "ranges");
    double psg = NAN, loop = NAN;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (only && !strstr(only, cases[k])) continue;
        res o, t;
        run_case(py, cases[k], threads, reps, &o, &t);
        if (!o.ok || !o.n) {
            printf("%-14s ctorch failed\n", cases[k]);
            continue;
        }
        bench_stat so = bench_stats(o.ms, o.n);
        bench_stat st = t.ok && t.n ? bench_stats(t.ms, t.n) : (bench_stat){NAN, NAN, NAN};
        printf("%-14s %12.2f %12.2f %7.3f   (ctorch %.2f..%.2f, torch %.2f..%.2f)\n", cases[k], so.med, st.med,
               so.med / st.med, so.min, so.max, st.min, st.max);
        fflush(stdout);
        if (!strcmp(cases[k], "psg_cnn")) psg = so.med;
        if (!strcmp(cases[k], "psg_loop")) loop = so.med;
        if (json && t.ok && t.n) {
            char name[64], extra[96];
            snprintf(name, sizeof name, "func_%s_t%d", cases[k], threads);
            snprintf(extra, sizeof extra, "\"threads\": %d", threads);
            bench_json_add(json, name, so.med, st.med, "ms", extra);
        }
    }
    if (!isnan(psg) && !isnan(loop))
        printf("ctorch per-sample gradients: a loop of backward passes / vmap(grad) = %.1fx\n", loop / psg);
    return 0;
}
