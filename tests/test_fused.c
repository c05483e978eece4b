/* test_fused.c -- fused ops against their composite fallbacks (issue 17
 * item 5): batch norm's batch_norm_fwd / batch_norm_bwd / batch_norm_eval.
 *
 *  - the BatchNorm1d/2d cases of tests/fixtures/norm_rnn.txt (torch: train
 *    forward, input and parameter gradients, running statistics, eval
 *    output), contiguous and non-contiguous, f32 and f64: run once with the
 *    kernels and once with them disabled (ct__fused_disable); the two must
 *    agree to rounding, and the fallback run is compared with torch.  The
 *    eval output is also recomputed with the relu fused (torch's relu of
 *    its eval output);
 *  - the op layer directly, without weight/bias, on a transposed input;
 *  - which path ran: the profiler sees the fused ops only when enabled;
 *  - meta inputs: the fused ops give the right shapes on meta;
 *  - double backward (create_graph) agrees in both modes.
 * The optimizers' steps sgd_step / adam_step (test_optim_*, below):
 *  - the op layer directly, SGD (momentum, dampening, nesterov, weight
 *    decay, maximize, none) and Adam/AdamW (amsgrad, weight decay,
 *    maximize), f32 and f64, parameters of 1 to 100003 elements, 5 steps:
 *    kernel == fallback bit for bit (the kernel's scalar chain rounds like
 *    the op sequence: same casts, same association);
 *  - through the optimizers: fused (kernel and fallback) == op by op bit
 *    for bit, with a non-contiguous parameter (fallback inside a fused
 *    step) and one that gets its first grad late (SGD's fresh buffers);
 *  - which path ran (profiler), meta parameters, error messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fixture.h"
#include "ops/batch_norm_impl.h"
#include "ops/fused.h"
#include "ops/fused_optim.h"

static const ct_op k_bn_ops[3] = {CT_OP_batch_norm_fwd, CT_OP_batch_norm_bwd, CT_OP_batch_norm_eval};

static void fused_off(bool off) {
    for (int i = 0; i < 3; i++) ct__fused_disable(k_bn_ops[i], off);
}

static double num_or_nan(const fx_case *c, const char *name, double def) {
    const char *s = fx_s(c, name, NULL);
    if (s && !strcmp(s, "none")) return NAN;
    return fx_f(c, name, def);
}

static ct_tensor *buffer(ct_module *m, const char *name) {
    const char *names[8];
    ct_tensor *bs[8];
    int n = ct_module_named_buffers(m, names, bs, 8);
    for (int i = 0; i < n && i < 8; i++)
        if (!strcmp(names[i], name)) return bs[i];
    return NULL;
}

static ct_status set_doubles(ct_tensor *dst, const fx_case *c, const char *name) {
    double v[64];
    int n = fx_doubles(c, name, v, 64);
    if (n <= 0) return CT_OK;
    return dst && ct_copy_(dst, ct_from_doubles(v, CT_SHAPE(n), CT_F64)) ? CT_OK : CT_ERR_RUNTIME;
}

/* One BatchNorm case of norm_rnn.txt (as tests/test_norm_rnn.c's
 * run_module): y (last of `steps` training steps), dx, [dw, db] flat,
 * running_mean, running_var, num_batches_tracked (when tracked), the eval
 * output; and out[7]: the eval output with the relu fused. */
static ct_status bn_case(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_dtype prev = ct_get_default_dtype();
    if (ct_set_default_dtype(fx_dtype(fx_s(c, "dtype", "float64")))) return ct_last_error_code();
    int64_t C = fx_i(c, "num_features", 0);
    double eps = fx_f(c, "eps", 1e-5);
    bool affine = fx_i(c, "affine", 1), track = fx_i(c, "track", 1);
    ct_module *m = (!strcmp(c->op, "batchnorm1d") ? ct_batch_norm1d_new : ct_batch_norm2d_new)(
        C, eps, num_or_nan(c, "momentum", 0.1), affine, track);
    if (ct_set_default_dtype(prev)) return ct_last_error_code();
    if (!m) return ct_last_error_code();
    ct_tensor *w = affine ? ct_module_param(m, 0) : NULL, *b = affine ? ct_module_param(m, 1) : NULL;
    ct_status st = CT_OK;
    bool pg0 = ct_set_grad_enabled(false);
    if (affine && (!ct_copy_(w, ct_narrow(in[1], 0, 0, C)) || !ct_copy_(b, ct_narrow(in[1], 0, C, C))))
        st = ct_last_error_code();
    ct_set_grad_enabled(pg0);
    if (!st) st = set_doubles(buffer(m, "running_mean"), c, "rm0");
    if (!st) st = set_doubles(buffer(m, "running_var"), c, "rv0");
    ct_tensor *x = in[0];
    if (!st) st = ct_set_requires_grad(x, true);
    ct_module_train(m, true);
    for (int64_t s = 0; s + 1 < fx_i(c, "steps", 1) && !st; s++)
        if (!ct_module_forward1(m, x)) st = ct_last_error_code();
    ct_tensor *y = st ? NULL : ct_module_forward1(m, x);
    if (!st && !y) st = ct_last_error_code();
    ct_tensor *wrt[3] = {x, w, b}, *g[3] = {NULL, NULL, NULL};
    if (!st) st = ct_autograd_grad(&y, 1, wrt, affine ? 3 : 1, &in[2], false, false, true, g);
    int k = 0;
    out[k++] = y;
    out[k++] = g[0];
    if (!st) {
        ct_tensor *p[2] = {affine ? ct_reshape(g[1], CT_SHAPE(-1)) : NULL, affine ? ct_reshape(g[2], CT_SHAPE(-1)) : NULL};
        out[k++] = affine ? ct_cat(p, 2, 0) : ct_zeros(CT_SHAPE(0), ct_get_dtype(x));
    }
    static const char *bufs[] = {"running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 3 && !st && track; i++) out[k++] = ct_clone(buffer(m, bufs[i]));
    if (!st && c->nout > k) {
        ct_module_eval(m);
        bool pg = ct_set_grad_enabled(false);
        out[k++] = ct_module_forward1(m, in[0]);
        /* the same with the relu fused (running statistics required) */
        if (track)
            out[7] = ct__batch_norm_eval(in[0], buffer(m, "running_mean"), buffer(m, "running_var"), w, b, eps, true);
        ct_set_grad_enabled(pg);
    }
    ct_module_release(m);
    return st;
}

static int g_pairs, g_relu_checked;

static bool close_to(ct_tensor *a, ct_tensor *b, ct_dtype dt) {
    double rtol = dt == CT_F32 ? 1e-5 : 1e-10, atol = dt == CT_F32 ? 1e-5 : 1e-12;
    return a && b && ct_allclose(a, b, rtol, atol, true) == 1;
}

/* kernel run vs fallback run; hands the fallback's outputs to the harness */
static ct_status bn_both(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *ok_[FX_MAX_T] = {0}, *fb[FX_MAX_T] = {0};
    ct_status st = bn_case(c, in, ok_);
    fused_off(true);
    ct_status st2 = st ? st : bn_case(c, in, fb);
    fused_off(false);
    if (st || st2) return st ? st : st2;
    ct_dtype dt = ct_get_dtype(in[0]);
    for (int k = 0; k < FX_MAX_T; k++) {
        if (!ok_[k] && !fb[k]) continue;
        g_pairs++;
        if (!close_to(ok_[k], fb[k], dt))
            return ct__error_status(CT_ERR_RUNTIME, "%s/%s: output %d of the kernel and the fallback differ",
                                    c->op, c->label, k);
    }
    /* eval + relu against torch's eval output, relu'd */
    if (ok_[7]) {
        ct_tensor *want = ct_relu(c->out[c->nout - 1]);
        if (!close_to(ok_[7], want, dt) || !close_to(fb[7], want, dt))
            return ct__error_status(CT_ERR_RUNTIME, "%s/%s: batch_norm_eval with relu differs from torch",
                                    c->op, c->label);
        g_relu_checked++;
    }
    for (int k = 0; k < c->nout; k++) out[k] = fb[k];
    return CT_OK;
}

static const fx_op k_ops[] = {{"batchnorm1d", bn_both, 0, 0}, {"batchnorm2d", bn_both, 0, 0}};

/* norm_rnn.txt's BatchNorm cases, copied to a temporary file (the
 * harness fails cases it has no runner for) */
static char *bn_cases_file(void) {
    static char path[] = "/tmp/ct_test_fused_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w"), *in = fopen(CT_FIXTURE_DIR "/norm_rnn.txt", "r");
    assert_non_null(out);
    assert_non_null(in);
    static char line[1 << 20];
    bool keep = false;
    while (fgets(line, sizeof line, in)) {
        if (!strncmp(line, "case ", 5)) keep = !strncmp(line, "case batchnorm", 14);
        if (keep) fputs(line, out);
    }
    fclose(in);
    assert_int_equal(fclose(out), 0);
    return path;
}

static void test_fixtures_kernel_vs_fallback(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    char *path = bn_cases_file();
    int f = fx_run_file(path, k_ops, 2);
    unlink(path);
    assert_int_equal(f, 0);
    /* 9 cases x (contiguous, non-contiguous); 5-8 outputs each */
    assert_true(g_pairs >= 18 * 5);
    assert_true(g_relu_checked >= 12);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- the op layer directly: no weight/bias, a transposed x, f32 and f64 ---- */
typedef struct bn_res { ct_tensor *t[10]; } bn_res;

static bn_res run_ops(ct_tensor *x, ct_tensor *w, ct_tensor *b, ct_tensor *g, ct_tensor *rm, ct_tensor *rv) {
    bn_res r = {{0}};
    assert_int_equal(ct__batch_norm_fwd(x, w, b, 1e-3, &r.t[0], &r.t[1], &r.t[2], &r.t[3]), CT_OK);
    assert_int_equal(ct__batch_norm_bwd(x, g, w, r.t[1], r.t[2], true, w != NULL, true, &r.t[4], &r.t[5],
                                        &r.t[6]), CT_OK);
    r.t[7] = ct__batch_norm_eval(x, rm, rv, w, b, 1e-3, false);
    r.t[8] = ct__batch_norm_eval(x, rm, rv, w, b, 1e-3, true);
    assert_non_null(r.t[7]);
    assert_non_null(r.t[8]);
    return r;
}

static void test_ops_direct(void **state) {
    (void)state;
    ct_manual_seed(7);
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = d ? CT_F64 : CT_F32;
        ct_scope s = ct_scope_begin();
        /* x [4, 3, 5, 6] as a transposed view of [4, 3, 6, 5] */
        ct_tensor *x = ct_transpose(ct_add_scalar(ct_randn(CT_SHAPE(4, 3, 6, 5), dt), 0.5), 2, 3);
        ct_tensor *g = ct_randn(CT_SHAPE(4, 3, 5, 6), dt);
        ct_tensor *w = ct_randn(CT_SHAPE(3), dt), *b = ct_randn(CT_SHAPE(3), dt);
        ct_tensor *rm = ct_randn(CT_SHAPE(3), dt), *rv = ct_add_scalar(ct_rand(CT_SHAPE(3), dt), 0.5);
        assert_false(ct_is_contiguous(x));
        for (int aff = 0; aff < 2; aff++) {
            ct_tensor *wa = aff ? w : NULL, *ba = aff ? b : NULL;
            bn_res k = run_ops(x, wa, ba, g, rm, rv);
            fused_off(true);
            bn_res f = run_ops(x, wa, ba, g, rm, rv);
            fused_off(false);
            for (int i = 0; i < 9; i++) {
                if (!k.t[i] && !f.t[i]) continue;
                if (!close_to(k.t[i], f.t[i], dt)) fail_msg("%s affine=%d: output %d differs", ct_dtype_name(dt), aff, i);
            }
            /* shapes */
            assert_int_equal(ct_ndim(k.t[0]), 4);
            for (int i = 1; i < 4; i++) assert_int_equal(ct_numel(k.t[i]), 3);
            /* the statistics themselves */
            const int64_t dims[3] = {0, 2, 3};
            assert_true(close_to(k.t[1], ct_mean(x, dims, 3, false), dt));
            assert_true(close_to(k.t[3], ct_var(x, dims, 3, 0, false), dt));
        }
        ct_scope_end(s);
    }
}

/* ---- which path ran: the profiler's op names ----------------------------- */
static int count_event(const char *table, const char *name) {
    size_t n = strlen(name);
    for (const char *p = table; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        while (*p == ' ') p++;
        if (!strncmp(p, name, n) && p[n] == ' ') return 1;
    }
    return 0;
}

static void run_profiled(bool off, char **table) {
    ct_scope s = ct_scope_begin();
    ct_module *bn = ct_batch_norm2d_new(4, 1e-5, 0.1, true, true);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4, 5, 5), CT_F32);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    fused_off(off);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    ct_tensor *y = ct_module_forward1(bn, x);
    assert_non_null(y);
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
    ct_module_eval(bn);
    bool pg = ct_set_grad_enabled(false);
    assert_non_null(ct_module_forward1(bn, x));
    ct_set_grad_enabled(pg);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    fused_off(false);
    *table = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(*table);
    ct_module_release(bn);
    ct_scope_end(s);
}

static void test_fallback_runs_when_disabled(void **state) {
    (void)state;
    char *on, *off;
    run_profiled(false, &on);
    run_profiled(true, &off);
    static const char *names[] = {"batch_norm_fwd", "batch_norm_bwd", "batch_norm_eval"};
    for (int i = 0; i < 3; i++) {
        if (!count_event(on, names[i])) fail_msg("kernel on: no %s event\n%s", names[i], on);
        if (count_event(off, names[i])) fail_msg("kernel off: a %s event\n%s", names[i], off);
    }
    /* the fallback is made of public ops */
    assert_true(count_event(off, "rsqrt"));
    assert_true(count_event(off, "mean"));
    assert_false(count_event(on, "rsqrt"));
    free(on);
    free(off);
}

/* ---- meta: the fused ops give the shapes (the meta table fills every slot) ---- */
static void test_meta(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_empty_on(CT_SHAPE(8, 3, 7, 5), CT_F32, CT_META);
    ct_tensor *w = ct_empty_on(CT_SHAPE(3), CT_F32, CT_META), *b = ct_empty_on(CT_SHAPE(3), CT_F32, CT_META);
    assert_non_null(ct__fused_kernel(CT_OP_batch_norm_fwd, CT_META));
    ct_tensor *y, *mean, *is, *var, *dx, *dw, *db;
    assert_int_equal(ct__batch_norm_fwd(x, w, b, 1e-5, &y, &mean, &is, &var), CT_OK);
    ct_tensor *o[4] = {y, mean, is, var};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ct_get_device(o[i]), CT_META);
        assert_int_equal(ct_get_dtype(o[i]), CT_F32);
    }
    assert_int_equal(ct_ndim(y), 4);
    assert_memory_equal(ct_sizes(y), ((int64_t[]){8, 3, 7, 5}), 4 * sizeof(int64_t));
    for (int i = 1; i < 4; i++) {
        assert_int_equal(ct_ndim(o[i]), 1);
        assert_int_equal(ct_sizes(o[i])[0], 3);
    }
    assert_int_equal(ct__batch_norm_bwd(x, y, w, mean, is, true, true, true, &dx, &dw, &db), CT_OK);
    assert_int_equal(ct_get_device(dx), CT_META);
    assert_memory_equal(ct_sizes(dx), ct_sizes(x), 4 * sizeof(int64_t));
    assert_int_equal(ct_sizes(dw)[0], 3);
    assert_int_equal(ct_sizes(db)[0], 3);
    ct_tensor *e = ct__batch_norm_eval(x, mean, var, w, b, 1e-5, true);
    assert_non_null(e);
    assert_int_equal(ct_get_device(e), CT_META);
    assert_memory_equal(ct_sizes(e), ct_sizes(x), 4 * sizeof(int64_t));
    /* a module trains on meta through them (forward and backward) */
    ct_module *bn = ct_batch_norm2d_new(3, 1e-5, 0.1, true, true);
    assert_int_equal(ct_module_to(bn, CT_META), CT_OK);
    ct_tensor *xm = ct_empty_on(CT_SHAPE(8, 3, 7, 5), CT_F32, CT_META);
    assert_int_equal(ct_set_requires_grad(xm, true), CT_OK);
    ct_tensor *ym = ct_module_forward1(bn, xm);
    assert_non_null(ym);
    assert_int_equal(ct_get_device(ym), CT_META);
    assert_int_equal(ct_backward(ct_sum(ym, NULL, 0, false), NULL, false, false), CT_OK);
    assert_non_null(ct_grad(xm));
    assert_int_equal(ct_get_device(ct_grad(xm)), CT_META);
    ct_module_release(bn);
    /* errors in the library's style */
    ct_tensor *w5 = ct_empty_on(CT_SHAPE(5), CT_F32, CT_META);
    assert_int_equal(ct__batch_norm_fwd(x, w5, NULL, 1e-5, &y, &mean, &is, &var), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(), "batch_norm: weight should contain 3 elements not 5");
    ct_tensor *x16 = ct_empty_on(CT_SHAPE(8, 3), CT_F16, CT_META);
    assert_int_equal(ct__batch_norm_fwd(x16, NULL, NULL, 1e-5, &y, &mean, &is, &var), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "batch_norm: fused kernel needs float32 or float64, got float16");
    ct_scope_end(s);
}

/* ---- double backward (create_graph): the same in both modes ---------------- */
static ct_tensor *gradgrad(ct_tensor *x, ct_module *bn) {
    ct_tensor *y = ct_module_forward1(bn, x);
    ct_tensor *l = ct_sum(ct_mul(y, ct_sin(y)), NULL, 0, false);
    ct_tensor *gx = NULL;
    assert_int_equal(ct_autograd_grad(&l, 1, &x, 1, NULL, true, true, false, &gx), CT_OK);
    ct_tensor *l2 = ct_sum(ct_square(gx), NULL, 0, false);
    ct_tensor *ggx = NULL;
    assert_int_equal(ct_autograd_grad(&l2, 1, &x, 1, NULL, false, false, false, &ggx), CT_OK);
    return ct_cat((ct_tensor *[]){ct_reshape(gx, CT_SHAPE(-1)), ct_reshape(ggx, CT_SHAPE(-1))}, 2, 0);
}

static void test_double_backward(void **state) {
    (void)state;
    ct_manual_seed(11);
    ct_scope s = ct_scope_begin();
    ct_dtype prev = ct_get_default_dtype();
    assert_int_equal(ct_set_default_dtype(CT_F64), CT_OK);
    ct_module *bn = ct_batch_norm2d_new(3, 1e-5, 0.1, true, false);
    assert_int_equal(ct_set_default_dtype(prev), CT_OK);
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3, 3, 2), CT_F64);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_tensor *a = gradgrad(x, bn);
    fused_off(true);
    ct_tensor *b = gradgrad(x, bn);
    fused_off(false);
    assert_true(close_to(a, b, CT_F64));
    ct_module_release(bn);
    ct_scope_end(s);
}

/* ==== the optimizers' steps: sgd_step / adam_step (src/ops/fused_optim.c) ==== */
#define OPT_NP 7
static const int64_t k_opt_sizes[OPT_NP] = {1, 7, 8, 16, 17, 33, 100003};

typedef struct opt_cfg {
    const char *name;
    bool adam;
    ct_p_optim h;
} opt_cfg;

static const opt_cfg k_opt_cfgs[] = {
    {"sgd momentum", false, {.lr = 0.1, .momentum = 0.9}},
    {"sgd dampening wd", false, {.lr = 0.05, .momentum = 0.8, .dampening = 0.1, .weight_decay = 0.01}},
    {"sgd nesterov wd maximize", false,
     {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true, .maximize = true}},
    {"sgd no momentum wd maximize", false, {.lr = 0.1, .weight_decay = 0.02, .maximize = true}},
    {"sgd plain", false, {.lr = 0.3}},
    {"adam", true, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8}},
    {"adam amsgrad wd maximize", true,
     {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01, .amsgrad = true,
      .maximize = true}},
    {"adamw", true, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1, .decoupled = true}},
    {"adamw amsgrad maximize", true,
     {.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.05, .amsgrad = true,
      .maximize = true, .decoupled = true}},
};
#define OPT_NCFG ((int)(sizeof k_opt_cfgs / sizeof k_opt_cfgs[0]))

static ct_op opt_op(const opt_cfg *c) { return c->adam ? CT_OP_adam_step : CT_OP_sgd_step; }

/* `steps` steps of c on OPT_NP seeded parameters of dtype dt through the op
 * layer (kernel, or fallback when off); the parameters and states, flat */
static ct_tensor *opt_run(const opt_cfg *c, ct_dtype dt, bool off, int steps) {
    ct__fused_disable(opt_op(c), off);
    ct_manual_seed(21);
    ct_tensor *p[OPT_NP], *m[OPT_NP], *v[OPT_NP], *vm[OPT_NP], *st[OPT_NP], *g[OPT_NP];
    for (int i = 0; i < OPT_NP; i++) {
        p[i] = ct_randn(CT_SHAPE(k_opt_sizes[i]), dt);
        m[i] = ct_zeros(CT_SHAPE(k_opt_sizes[i]), dt);
        v[i] = ct_zeros(CT_SHAPE(k_opt_sizes[i]), dt);
        vm[i] = ct_zeros(CT_SHAPE(k_opt_sizes[i]), dt);
        st[i] = ct_full_on(NULL, 0, 0.0, CT_F32, CT_CPU);
        assert_non_null(st[i]);
    }
    for (int s = 0; s < steps; s++) {
        ct_scope sc = ct_scope_begin();
        for (int i = 0; i < OPT_NP; i++) {
            g[i] = ct_randn(CT_SHAPE(k_opt_sizes[i]), dt);
            *(float *)ct_data_ptr(st[i]) += 1.0f;
        }
        ct_p_optim h = c->h;
        h.first_step = s == 0;
        int64_t ver = ct_version(p[3]);
        if (c->adam)
            assert_int_equal(ct__adam_step(p, g, m, v, h.amsgrad ? vm : NULL, st, OPT_NP, &h), CT_OK);
        else
            assert_int_equal(ct__sgd_step(p, g, h.momentum != 0 ? m : NULL, OPT_NP, &h), CT_OK);
        assert_true(ct_version(p[3]) > ver); /* written, on either path */
        ct_scope_end(sc);
    }
    ct__fused_disable(opt_op(c), false);
    ct_tensor *all[4 * OPT_NP];
    for (int i = 0; i < OPT_NP; i++) {
        all[4 * i] = p[i];
        all[4 * i + 1] = m[i];
        all[4 * i + 2] = v[i];
        all[4 * i + 3] = vm[i];
    }
    return ct_cat(all, 4 * OPT_NP, 0);
}

static void test_optim_kernel_vs_fallback(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    const ct_dtype dts[2] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < OPT_NCFG; k++) {
            ct_scope s = ct_scope_begin();
            ct_tensor *a = opt_run(&k_opt_cfgs[k], dts[d], false, 5);
            ct_tensor *b = opt_run(&k_opt_cfgs[k], dts[d], true, 5);
            ct_tensor *p0 = opt_run(&k_opt_cfgs[k], dts[d], true, 0);
            assert_non_null(a);
            assert_non_null(b);
            if (ct_equal(a, b) != 1)
                fail_msg("%s %s: kernel != fallback (max abs diff %g)", k_opt_cfgs[k].name,
                         ct_dtype_name(dts[d]), ct_item(ct_max(ct_abs(ct_sub(a, b)))));
            assert_int_equal(ct_equal(a, p0), 0); /* the steps did something */
            ct_scope_end(s);
        }
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- through the optimizers ---------------------------------------------------- */
#define OPT_NQ 5
/* OPT_NQ leaves: [100003], [17], [1], a transposed [9, 4] (non-contiguous:
 * the fallback inside a fused step), [8] (its first grad at step 2) */
static void opt_leaves(ct_tensor **p, ct_dtype dt) {
    ct_manual_seed(5);
    bool pg = ct_set_grad_enabled(false);
    p[0] = ct_randn(CT_SHAPE(100003), dt);
    p[1] = ct_randn(CT_SHAPE(17), dt);
    p[2] = ct_randn(CT_SHAPE(1), dt);
    p[3] = ct_t(ct_randn(CT_SHAPE(4, 9), dt));
    p[4] = ct_randn(CT_SHAPE(8), dt);
    ct_set_grad_enabled(pg);
    for (int i = 0; i < OPT_NQ; i++) assert_int_equal(ct_set_requires_grad(p[i], true), CT_OK);
}

static ct_optimizer *opt_make_n(int kind, ct_tensor **p, int n) {
    switch (kind) {
    case 0: return ct_sgd_new(p, n, 0.1, 0.9, 0.1, 0.01, false, false);
    case 1: return ct_sgd_new(p, n, 0.1, 0.9, 0, 0.01, true, true);
    case 2: return ct_sgd_new(p, n, 0.1, 0, 0, 0.01, false, true);
    case 3: return ct_adam_new(p, n, 0.01, 0.9, 0.99, 1e-8, 0.01, false, false);
    case 4: return ct_adam_new(p, n, 0.01, 0.9, 0.99, 1e-8, 0.01, true, true);
    case 5: return ct_adamw_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0.1, false, false);
    default: return ct_adamw_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0.1, true, true);
    }
}
static ct_optimizer *opt_make(int kind, ct_tensor **p) { return opt_make_n(kind, p, OPT_NQ); }

/* mode 0: op by op, 1: fused (kernel), 2: fused with the kernel disabled */
static void opt_train(int kind, ct_tensor **p, ct_dtype dt, int mode) {
    ct_optimizer *o = opt_make(kind, p);
    assert_non_null(o);
    if (mode) assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
    ct_op op = kind < 3 ? CT_OP_sgd_step : CT_OP_adam_step;
    ct__fused_disable(op, mode == 2);
    ct_manual_seed(9);
    for (int it = 0; it < 4; it++) {
        ct_scope s = ct_scope_begin();
        for (int i = 0; i < OPT_NQ; i++) {
            ct_tensor *g = ct_randn(ct_sizes(p[i]), ct_ndim(p[i]), dt);
            if (i < OPT_NQ - 1 || it >= 2) assert_int_equal(ct_set_grad(p[i], g), CT_OK);
        }
        assert_int_equal(ct_optim_step(o), CT_OK);
        ct_scope_end(s);
    }
    ct__fused_disable(op, false);
    /* the state is the op-by-op path's: step counts, buffers */
    if (kind >= 3) {
        assert_float_equal(ct_item(ct_optim_state(o, 0, "step")), 4.0, 0);
        assert_float_equal(ct_item(ct_optim_state(o, 4, "step")), 2.0, 0);
    } else if (kind < 2) {
        assert_non_null(ct_optim_state(o, 4, "momentum_buffer"));
    }
    ct_optim_free(o);
}

static void test_optim_fused_vs_ops(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    const ct_dtype dts[2] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++)
        for (int kind = 0; kind < 7; kind++) {
            ct_scope s = ct_scope_begin();
            ct_tensor *r[3][OPT_NQ];
            for (int mode = 0; mode < 3; mode++) {
                opt_leaves(r[mode], dts[d]);
                opt_train(kind, r[mode], dts[d], mode);
            }
            for (int mode = 1; mode < 3; mode++)
                for (int i = 0; i < OPT_NQ; i++)
                    if (ct_equal(r[0][i], r[mode][i]) != 1)
                        fail_msg("optimizer %d %s param %d: %s != op by op (max abs diff %g)", kind,
                                 ct_dtype_name(dts[d]), i, mode == 1 ? "fused kernel" : "fused fallback",
                                 ct_item(ct_max(ct_abs(ct_sub(r[0][i], r[mode][i])))));
            ct_scope_end(s);
        }
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- which path ran ---------------------------------------------------------------- */
static char *opt_profiled(int kind, bool off) {
    ct_scope s = ct_scope_begin();
    ct_tensor *p[OPT_NQ];
    opt_leaves(p, CT_F32);
    ct_optimizer *o = opt_make(kind, p);
    assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
    for (int i = 0; i < OPT_NQ; i++)
        assert_int_equal(ct_set_grad(p[i], ct_ones(ct_sizes(p[i]), ct_ndim(p[i]), CT_F32)), CT_OK);
    ct_op op = kind < 3 ? CT_OP_sgd_step : CT_OP_adam_step;
    ct__fused_disable(op, off);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    ct__fused_disable(op, false);
    char *t = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(t);
    ct_optim_free(o);
    ct_scope_end(s);
    return t;
}

static void test_optim_which_path(void **state) {
    (void)state;
    for (int kind = 0; kind < 7; kind += 3) {
        const char *name = kind < 3 ? "sgd_step" : "adam_step";
        char *on = opt_profiled(kind, false), *off = opt_profiled(kind, true);
        if (!count_event(on, name)) fail_msg("kernel on: no %s event\n%s", name, on);
        if (count_event(off, name)) fail_msg("kernel off: a %s event\n%s", name, off);
        /* the fallback is made of public ops; with the kernel only the
         * non-contiguous parameter takes them */
        const char *op = kind < 3 ? "add" : "addcdiv";
        if (!count_event(off, op)) fail_msg("kernel off: no %s event\n%s", op, off);
        assert_true(count_event(on, op));
        free(on);
        free(off);
    }
    /* a group of contiguous parameters: the kernel alone */
    ct_scope s = ct_scope_begin();
    ct_tensor *p = ct_randn(CT_SHAPE(1000), CT_F32);
    assert_int_equal(ct_set_requires_grad(p, true), CT_OK);
    ct_optimizer *o = ct_adam_new(&p, 1, 0.01, 0.9, 0.99, 1e-8, 0, false, false);
    assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
    assert_int_equal(ct_set_grad(p, ct_ones(CT_SHAPE(1000), CT_F32)), CT_OK);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *t = ct_profiler_table("cpu_time_total", 0);
    assert_true(count_event(t, "adam_step"));
    assert_false(count_event(t, "addcdiv"));
    assert_false(count_event(t, "sqrt"));
    free(t);
    ct_optim_free(o);
    ct_scope_end(s);
}

/* ---- meta parameters and errors --------------------------------------------------- */
static void test_optim_meta_and_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    for (int kind = 0; kind < 7; kind++)
        for (int off = 0; off < 2; off++) {
            ct_scope s = ct_scope_begin();
            ct_tensor *p[2] = {ct_empty_on(CT_SHAPE(33, 5), CT_F32, CT_META),
                               ct_t(ct_empty_on(CT_SHAPE(4, 3), CT_F64, CT_META))};
            for (int i = 0; i < 2; i++) assert_int_equal(ct_set_requires_grad(p[i], true), CT_OK);
            ct_optimizer *o = opt_make_n(kind, p, 2);
            assert_non_null(o);
            assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
            ct_op op = kind < 3 ? CT_OP_sgd_step : CT_OP_adam_step;
            ct__fused_disable(op, off);
            for (int step = 0; step < 2; step++) {
                for (int i = 0; i < 2; i++)
                    assert_int_equal(ct_set_grad(p[i], ct_empty_on(ct_sizes(p[i]), ct_ndim(p[i]),
                                                                   ct_get_dtype(p[i]), CT_META)),
                                     CT_OK);
                assert_int_equal(ct_optim_step(o), CT_OK);
            }
            ct__fused_disable(op, false);
            for (int i = 0; i < 2; i++) {
                assert_int_equal(ct_get_device(p[i]), CT_META);
                const char *sn = kind < 2 ? "momentum_buffer" : kind >= 3 ? "exp_avg_sq" : NULL;
                if (!sn) continue;
                ct_tensor *b = ct_optim_state(o, i, sn);
                assert_non_null(b);
                assert_int_equal(ct_get_device(b), CT_META);
                assert_int_equal(ct_get_dtype(b), ct_get_dtype(p[i]));
                assert_memory_equal(ct_sizes(b), ct_sizes(p[i]), sizeof(int64_t) * (size_t)ct_ndim(p[i]));
                if (kind >= 3) assert_float_equal(ct_item(ct_optim_state(o, i, "step")), 2.0, 0);
            }
            ct_optim_free(o);
            ct_scope_end(s);
        }
    /* errors: in the library's style, nothing written */
    ct_scope s = ct_scope_begin();
    ct_tensor *p = ct_zeros(CT_SHAPE(6), CT_F32), *g = ct_ones(CT_SHAPE(6), CT_F32);
    ct_tensor *b5 = ct_zeros(CT_SHAPE(5), CT_F32), *z = ct_zeros(CT_SHAPE(6), CT_F32);
    ct_tensor *one = ct_full_on(NULL, 0, 1.0, CT_F32, CT_CPU), *nul = NULL;
    ct_p_optim h = {.lr = 0.1, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8};
    assert_int_equal(ct__sgd_step(&p, &g, &b5, 1, &h), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(), "sgd_step: momentum_buffer 0 has shape [5], its parameter [6]");
    assert_int_equal(ct__sgd_step(&p, &g, NULL, 1, &h), CT_ERR_NULL);
    assert_string_equal(ct_last_error(), "sgd_step: the momentum_buffer list is NULL");
    assert_int_equal(ct__adam_step(&p, &nul, &z, &z, NULL, &one, 1, &h), CT_ERR_NULL);
    assert_string_equal(ct_last_error(), "adam_step: grad 0 is NULL");
    assert_int_equal(ct__adam_step(&p, &g, &z, &z, NULL, &z, 1, &h), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(), "adam_step: step 0 has shape [6] (one value expected)");
    assert_int_equal(ct_equal(p, ct_zeros(CT_SHAPE(6), CT_F32)), 1);
    assert_int_equal(ct__sgd_step(NULL, NULL, NULL, 0, &h), CT_OK); /* empty group */
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_kernel_vs_fallback),
        cmocka_unit_test(test_ops_direct),
        cmocka_unit_test(test_fallback_runs_when_disabled),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_double_backward),
        cmocka_unit_test(test_optim_kernel_vs_fallback),
        cmocka_unit_test(test_optim_fused_vs_ops),
        cmocka_unit_test(test_optim_which_path),
        cmocka_unit_test(test_optim_meta_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
