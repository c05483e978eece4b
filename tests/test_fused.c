/* test_fused.c -- fused ops against their composite fallbacks (issue 17
 * item 5): batch norm's batch_norm_fwd / batch_norm_bwd / batch_norm_eval;
 * layer_norm_fwd / layer_norm_bwd (LayerNorm and RMSNorm),
 * softmax_backward / log_softmax_backward and ew_grad (the fused gradients
 * of relu, sigmoid, tanh, gelu, silu).
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
 *  - double backward (create_graph) agrees in both modes;
 *  - the layer_norm / rms_norm / softmax / log_softmax cases of
 *    tests/fixtures/norm_fused.txt (torch: outputs and gradients through
 *    the public ops and ct_backward) in both modes, the fallback compared
 *    with torch too;
 *  - layer_norm_fwd/_bwd, the softmax backwards and ew_grad called
 *    directly over shapes (one row, rows of one element, several dims),
 *    f32 and f64, with and without weight/bias, non-contiguous inputs:
 *    kernel == fallback; their profiler events, and the meta device;
 *  - the fused attention op sdpa_fused / sdpa_fused_backward (its own
 *    block below);
 *  - the Transformer encoder's rows add_layer_norm / bias_act (their block).
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
#include "ops/ew.h"
#include "ops/reduce_impl.h"
#include "ops/sdpa_impl.h" /* the sdpa block */
#include "ops/fused_rows.h"
#include "ops/fused_optim.h"
#include "ops/meta.h"

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

/* ======================================================================
 * layer_norm_fwd / layer_norm_bwd, softmax_backward / log_softmax_backward,
 * ew_grad
 * ====================================================================== */
static const ct_op k_norm_ops[5] = {CT_OP_layer_norm_fwd, CT_OP_layer_norm_bwd, CT_OP_softmax_backward,
                                    CT_OP_log_softmax_backward, CT_OP_ew_grad};

static void norm_off(bool off) {
    for (int i = 0; i < 5; i++) ct__fused_disable(k_norm_ops[i], off);
}

/* f32 backward sums differ in their order between kernel and fallback */
static bool close_tol(ct_tensor *a, ct_tensor *b, ct_dtype dt, double f32_tol) {
    double rtol = dt == CT_F32 ? f32_tol : 1e-10, atol = dt == CT_F32 ? f32_tol : 1e-11;
    return a && b && ct_get_dtype(a) == ct_get_dtype(b) && ct_ndim(a) == ct_ndim(b) &&
           !memcmp(ct_sizes(a), ct_sizes(b), sizeof(int64_t) * (size_t)ct_ndim(a)) &&
           ct_allclose(a, b, rtol, atol, true) == 1;
}

/* ---- norm_fused.txt through the public ops, in both modes ---- */
#include "norm_fixture_ops.h"

static int g_norm_pairs;

/* the kernel run vs the fallback run of one case; the fallback's outputs go
 * to the harness (compared with torch) */
static ct_status norm_both(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    fx_run_fn f = !strcmp(c->op, "layer_norm") ? run_layer_norm
                  : !strcmp(c->op, "rms_norm") ? run_rms_norm
                  : !strcmp(c->op, "softmax")  ? run_softmax
                                               : run_log_softmax;
    ct_tensor *k[FX_MAX_T] = {0}, *fb[FX_MAX_T] = {0};
    ct_status st = f(c, in, k);
    norm_off(true);
    ct_status st2 = st ? st : f(c, in, fb);
    norm_off(false);
    if (st || st2) return st ? st : st2;
    ct_dtype dt = ct_get_dtype(in[0]);
    for (int j = 0; j < FX_MAX_T; j++) {
        if (!k[j] && !fb[j]) continue;
        g_norm_pairs++;
        if (!close_tol(k[j], fb[j], dt, 2e-5))
            return ct__error_status(CT_ERR_RUNTIME, "%s/%s: output %d of the kernel and the fallback differ",
                                    c->op, c->label, j);
    }
    for (int j = 0; j < c->nout; j++) out[j] = fb[j];
    return CT_OK;
}

static void test_norm_fixtures_kernel_vs_fallback(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    static const fx_op ops[] = {{"layer_norm", norm_both, 1e-4, 1e-5},
                                {"rms_norm", norm_both, 1e-4, 1e-5},
                                {"softmax", norm_both, 1e-5, 1e-6},
                                {"log_softmax", norm_both, 1e-5, 1e-5}};
    assert_int_equal(fx_run_file(CT_FIXTURE_DIR "/norm_fused.txt", ops, 4), 0);
    /* (contiguous, non-contiguous) x (3 layer_norm x 4 outputs, 3 rms_norm
     * x 3, 8 softmax / log_softmax x 2) */
    printf("kernel/fallback pairs compared: %d\n", g_norm_pairs);
    assert_true(g_norm_pairs >= 2 * (12 + 9 + 16));
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- layer_norm_fwd / _bwd directly ---- */
typedef struct ln_res { ct_tensor *t[6]; } ln_res;

static ln_res ln_run(ct_tensor *x, ct_tensor *w, ct_tensor *b, ct_tensor *g, int64_t n, int rms, bool wdw,
                     bool wdb) {
    ln_res r = {{0}};
    assert_int_equal(ct__layer_norm_fwd(x, w, b, n, 1e-5, rms, &r.t[0], &r.t[1], &r.t[2]), CT_OK);
    assert_int_equal(ct__layer_norm_bwd(g, x, r.t[1], r.t[2], w, n, rms, wdw, wdb, &r.t[3], &r.t[4], &r.t[5]),
                     CT_OK);
    return r;
}

static void test_layer_norm_direct(void **state) {
    (void)state;
    ct_manual_seed(5);
    int64_t live = ct_live_tensors();
    /* shape, normalized numel: several rows, one row, rows of one element,
     * a 3-d x normalized over its last two dims, odd sizes */
    static const struct { int nd; int64_t sh[3]; int64_t n; } shapes[] = {
        {2, {6, 45}, 45}, {2, {1, 37}, 37}, {2, {7, 1}, 1}, {3, {3, 4, 10}, 40}, {3, {2, 5, 16}, 16},
        {1, {1}, 1}, {2, {9, 300}, 300}};
    int checked = 0;
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = d ? CT_F64 : CT_F32;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            ct_scope s = ct_scope_begin();
            int nd = shapes[si].nd;
            int64_t n = shapes[si].n;
            ct_tensor *xc = ct_add_scalar(ct_mul_scalar(ct_randn(shapes[si].sh, nd, dt), 2.0), 0.7);
            ct_tensor *g = ct_randn(shapes[si].sh, nd, dt);
            ct_tensor *w = ct_randn(&n, 1, dt), *b = ct_randn(&n, 1, dt);
            /* the same x non-contiguous: every other element of a wider tensor */
            int64_t wide[3];
            memcpy(wide, shapes[si].sh, sizeof wide);
            wide[nd - 1] *= 2;
            ct_tensor *xn = ct_slice(ct_zeros(wide, nd, dt), nd - 1, 0, wide[nd - 1], 2);
            assert_non_null(ct_copy_(xn, xc));
            if (shapes[si].sh[nd - 1] > 1) assert_false(ct_is_contiguous(xn));
            ct_tensor *gn = ct_transpose(ct_contiguous(ct_transpose(g, 0, nd - 1)), 0, nd - 1);
            for (int rms = 0; rms < 2; rms++)
                for (int aff = 0; aff < 3; aff++) { /* none, weight, weight + bias */
                    if (rms && aff == 2) continue;
                    ct_tensor *wa = aff ? w : NULL, *ba = aff == 2 ? b : NULL;
                    for (int nc = 0; nc < 2; nc++) {
                        ct_tensor *x = nc ? xn : xc, *gg = nc ? gn : g;
                        bool wdw = aff > 0, wdb = aff != 1;
                        ln_res k = ln_run(x, wa, ba, gg, n, rms, wdw, wdb);
                        norm_off(true);
                        ln_res f = ln_run(x, wa, ba, gg, n, rms, wdw, wdb);
                        norm_off(false);
                        for (int i = 0; i < 6; i++) {
                            if (!k.t[i] && !f.t[i]) continue;
                            if (!close_tol(k.t[i], f.t[i], dt, 3e-5))
                                fail_msg("%s shape %zu rms=%d aff=%d noncontig=%d: output %d differs",
                                         ct_dtype_name(dt), si, rms, aff, nc, i);
                            assert_int_equal(ct_get_device(f.t[i]), CT_CPU);
                            checked++;
                        }
                        assert_true(ct_numel(k.t[1]) == ct_numel(x) / n && ct_numel(k.t[2]) == ct_numel(x) / n);
                        assert_true(!k.t[4] == !wdw && !k.t[5] == !wdb && !f.t[4] == !wdw && !f.t[5] == !wdb);
                    }
                }
            /* the statistics themselves */
            ct_tensor *y, *m, *r;
            int64_t last = -1, M = ct_numel(xc) / n;
            assert_int_equal(ct__layer_norm_fwd(xc, NULL, NULL, n, 1e-5, 0, &y, &m, &r), CT_OK);
            ct_tensor *x2 = ct_reshape(xc, CT_SHAPE(M, n));
            assert_true(close_tol(m, ct_mean(x2, &last, 1, false), dt, 1e-5));
            assert_true(close_tol(r, ct_rsqrt(ct_add_scalar(ct_var(x2, &last, 1, 0, false), 1e-5)), dt, 1e-4));
            ct_scope_end(s);
        }
    }
    assert_true(checked >= 2 * 7 * 5 * 2 * 4);
    /* errors: a weight of another dtype, a gradient of another shape */
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F32), *y, *m, *r, *dx, *dw, *db;
    assert_int_equal(ct__layer_norm_fwd(x, ct_ones(CT_SHAPE(4), CT_F64), NULL, 4, 1e-5, 0, &y, &m, &r),
                     CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "layer_norm: expected weight of dtype float32 on cpu, got float64 on cpu");
    assert_int_equal(ct__layer_norm_fwd(x, NULL, NULL, 5, 1e-5, 1, &y, &m, &r), CT_ERR_SHAPE);
    assert_int_equal(ct__layer_norm_fwd(x, NULL, NULL, 4, 1e-5, 0, &y, &m, &r), CT_OK);
    assert_int_equal(ct__layer_norm_bwd(ct_randn(CT_SHAPE(4, 3), CT_F32), x, m, r, NULL, 4, 0, false, false,
                                        &dx, &dw, &db), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(), "layer_norm_backward: expected a gradient of shape [3, 4], got [4, 3]");
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- softmax_backward / log_softmax_backward directly ---- */
static void test_softmax_backward_direct(void **state) {
    (void)state;
    ct_manual_seed(9);
    int64_t live = ct_live_tensors();
    static const struct { int nd; int64_t sh[3]; } shapes[] = {
        {3, {3, 5, 7}}, {2, {1, 9}}, {2, {6, 1}}, {1, {11}}, {3, {2, 1, 70}}, {2, {40, 33}}};
    int checked = 0;
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = d ? CT_F64 : CT_F32;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int nd = shapes[si].nd;
            for (int dim = -1; dim < nd; dim++)
                for (int lg = 0; lg < 2; lg++)
                    for (int nc = 0; nc < 2; nc++) {
                        ct_scope s = ct_scope_begin();
                        ct_tensor *x = ct_mul_scalar(ct_randn(shapes[si].sh, nd, dt), 3.0);
                        ct_tensor *g = ct_randn(shapes[si].sh, nd, dt);
                        if (nc && nd >= 2) { /* stored transposed */
                            x = ct_transpose(ct_contiguous(ct_transpose(x, 0, nd - 1)), 0, nd - 1);
                            g = ct_transpose(ct_contiguous(ct_transpose(g, 0, nd - 1)), 0, nd - 1);
                        }
                        ct_tensor *y = lg ? ct_log_softmax(x, dim) : ct_softmax(x, dim);
                        ct_tensor *k = ct__softmax_backward(g, y, dim, lg);
                        norm_off(true);
                        ct_tensor *f = ct__softmax_backward(g, y, dim, lg);
                        norm_off(false);
                        /* the formula, written out */
                        int64_t dd = dim;
                        ct_tensor *want = lg ? ct_sub(g, ct_mul(ct_exp(y), ct_sum(g, &dd, 1, true)))
                                             : ct_mul(y, ct_sub(g, ct_sum(ct_mul(g, y), &dd, 1, true)));
                        if (!close_tol(k, f, dt, 1e-5) || !close_tol(k, want, dt, 1e-5))
                            fail_msg("%s shape %zu dim %d log %d noncontig %d: kernel and fallback differ",
                                     ct_dtype_name(dt), si, dim, lg, nc);
                        checked++;
                        ct_scope_end(s);
                    }
        }
    }
    assert_true(checked >= 2 * 2 * 2 * 18);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- ew_grad directly: every kind ---- */
static void test_ew_grad_direct(void **state) {
    (void)state;
    ct_manual_seed(13);
    int64_t live = ct_live_tensors();
    int checked = 0;
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = d ? CT_F64 : CT_F32;
        for (int kind = 0; kind < CT_EWG_COUNT; kind++)
            for (int nc = 0; nc < 2; nc++) {
                ct_scope s = ct_scope_begin();
                ct_tensor *g = ct_randn(CT_SHAPE(7, 33), dt);
                ct_tensor *t = ct_mul_scalar(ct_randn(CT_SHAPE(7, 33), dt), 3.0);
                /* relu's output has zeros; sigmoid's / tanh's lie in (0,1) / (-1,1) */
                if (kind == CT_EWG_RELU) t = ct_relu(t);
                if (kind == CT_EWG_SIGMOID) t = ct_sigmoid(t);
                if (kind == CT_EWG_TANH) t = ct_tanh(t);
                if (nc) {
                    g = ct_transpose(ct_contiguous(ct_transpose(g, 0, 1)), 0, 1);
                    t = ct_slice(ct_repeat_interleave(t, 2, 1), 1, 0, 66, 2);
                    assert_false(ct_is_contiguous(t));
                }
                ct_tensor *k = NULL, *f = NULL;
                assert_int_equal(ct__ew_fused_grad(kind, g, t, &k), 1);
                norm_off(true);
                assert_int_equal(ct__ew_fused_grad(kind, g, t, &f), 1);
                norm_off(false);
                if (!close_tol(k, f, dt, 1e-5))
                    fail_msg("%s kind %d noncontig %d: kernel and fallback differ", ct_dtype_name(dt), kind, nc);
                checked++;
                ct_scope_end(s);
            }
    }
    assert_int_equal(checked, 2 * CT_EWG_COUNT * 2);
    /* not applicable: other dtypes, differing shapes (the VJP composes) */
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    assert_int_equal(ct__ew_fused_grad(CT_EWG_RELU, ct_ones(CT_SHAPE(3), CT_I32), ct_ones(CT_SHAPE(3), CT_I32), &r), 0);
    assert_null(r);
    /* f16/bf16: the CPU kernel computes them (test_half_ops checks the values) */
    assert_int_equal(ct__ew_fused_grad(CT_EWG_RELU, ct_ones(CT_SHAPE(3), CT_F16), ct_ones(CT_SHAPE(3), CT_F16), &r), 1);
    assert_int_equal(ct_get_dtype(r), CT_F16);
    r = NULL;
    assert_int_equal(ct__ew_fused_grad(CT_EWG_RELU, ct_ones(CT_SHAPE(3), CT_F32), ct_ones(CT_SHAPE(1), CT_F32), &r), 0);
    assert_null(r);
    assert_int_equal(ct__ew_fused_grad(CT_EWG_COUNT, ct_ones(CT_SHAPE(3), CT_F32), ct_ones(CT_SHAPE(3), CT_F32), &r), -1);
    ct_scope_end(s);
    /* through autograd: the activations' gradients agree in both modes */
    ct_tensor *(*acts[])(ct_tensor *) = {ct_relu, ct_sigmoid, ct_tanh, ct_silu};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        ct_scope s2 = ct_scope_begin();
        ct_tensor *x = ct_randn(CT_SHAPE(5, 8), CT_F32), *gr[2];
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        for (int off = 0; off < 2; off++) {
            norm_off(off);
            ct_tensor *l = ct_sum(ct_mul(acts[i](x), ct_cos(x)), NULL, 0, false);
            assert_int_equal(ct_autograd_grad(&l, 1, &x, 1, NULL, false, false, false, &gr[off]), CT_OK);
            norm_off(false);
        }
        assert_true(close_tol(gr[0], gr[1], CT_F32, 1e-5));
        ct_scope_end(s2);
    }
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- which path ran: their profiler events ---- */
static void run_norm_profiled(bool off, char **table) {
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(4, 6, 10), CT_F32), *w = ct_randn(CT_SHAPE(10), CT_F32);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    norm_off(off);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    ct_tensor *y = ct_layer_norm(x, CT_SHAPE(10), w, NULL, 1e-5);
    y = ct_add(ct_softmax(ct_relu(y), 1), ct_log_softmax(y, -1));
    assert_non_null(y);
    assert_int_equal(ct_backward(ct_sum(ct_mul(y, y), NULL, 0, false), NULL, false, false), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    norm_off(false);
    *table = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(*table);
    ct_scope_end(s);
}

/* ==== sdpa_fused / sdpa_fused_backward (src/ops/attention.c) ===========
 * The fused attention op's kernels (flash and mem-efficient tiling) against
 * its composite fallback, forward (out, logsumexp) and backward (dq, dk,
 * dv), every pairing of kernel and fallback between forward and backward,
 * on shapes with and without bool / float masks, causal (L < S and L > S),
 * GQA, L != S, Ev != E, fully masked rows, a strided q, dropout; the
 * fallback against the math backend; the public function with either;
 * which path ran (profiler); meta shapes. */
static void sdpa_off(bool fwd, bool bwd) {
    ct__fused_disable(CT_OP_sdpa_fused, fwd);
    ct__fused_disable(CT_OP_sdpa_fused_backward, bwd);
}

typedef struct sdpa_cfg {
    const char *name;
    int64_t B, Hq, Hk, L, S, E, Ev;
    int mask;       /* 0 none, 1 bool, 2 float */
    bool causal;
    int64_t dead;   /* a query row with every key masked (-1: none) */
    bool strided_q; /* q a [B, L, Hq, E] tensor's transposed view */
    double p;       /* dropout */
} sdpa_cfg;

static const sdpa_cfg k_sdpa_cfgs[] = {
    {"plain", 2, 2, 2, 5, 7, 8, 8, 0, false, -1, false, 0.0},
    {"bool mask, dead row, L!=S, Ev!=E, tiles", 1, 3, 3, 70, 130, 16, 24, 1, false, 1, false, 0.0},
    {"float mask, dead row, GQA", 2, 6, 2, 65, 33, 4, 12, 2, false, 64, false, 0.0},
    {"causal GQA Ev!=E", 2, 4, 2, 9, 9, 8, 5, 0, true, -1, false, 0.0},
    {"causal L>S strided q", 1, 2, 1, 10, 6, 8, 8, 0, true, -1, true, 0.0},
    {"causal L<S", 1, 2, 2, 67, 140, 8, 8, 0, true, -1, false, 0.0},
    {"dropout", 2, 2, 2, 33, 70, 8, 6, 0, false, -1, false, 0.3},
    {"dropout bool mask GQA", 1, 4, 2, 20, 17, 8, 8, 1, false, 3, false, 0.25},
    {"dropout causal strided q", 1, 2, 2, 70, 70, 16, 16, 0, true, -1, true, 0.5},
};
enum { N_SDPA_CFGS = sizeof k_sdpa_cfgs / sizeof k_sdpa_cfgs[0] };

typedef struct sdpa_in { ct_tensor *q, *k, *v, *mask, *g; } sdpa_in;

static sdpa_in sdpa_inputs(const sdpa_cfg *c) {
    sdpa_in in;
    in.q = c->strided_q ? ct_transpose(ct_randn(CT_SHAPE(c->B, c->L, c->Hq, c->E), CT_F32), 1, 2)
                        : ct_randn(CT_SHAPE(c->B, c->Hq, c->L, c->E), CT_F32);
    in.k = ct_randn(CT_SHAPE(c->B, c->Hk, c->S, c->E), CT_F32);
    in.v = ct_randn(CT_SHAPE(c->B, c->Hk, c->S, c->Ev), CT_F32);
    in.g = ct_randn(CT_SHAPE(c->B, c->Hq, c->L, c->Ev), CT_F32);
    in.mask = NULL;
    if (c->mask) {
        ct_tensor *r = ct_rand(CT_SHAPE(c->B, c->Hq, c->L, c->S), CT_F32);
        ct_tensor *row = ct_eq_scalar(ct_reshape(ct_arange(0, (double)c->L, 1, CT_F32), CT_SHAPE(c->L, 1)),
                                      (double)c->dead);
        if (c->mask == 1) { /* keep ~70%, nothing on the dead row */
            in.mask = ct_logical_and(ct_gt_scalar(r, 0.3), ct_logical_not(row));
        } else { /* additive: values in [-2, 2), -inf at ~20% and on the dead row */
            ct_tensor *f = ct_sub_scalar(ct_mul_scalar(ct_rand(CT_SHAPE(c->B, c->Hq, c->L, c->S), CT_F32), 4.0), 2.0);
            in.mask = ct_masked_fill(ct_masked_fill(f, ct_lt_scalar(r, 0.2), -INFINITY), row, -INFINITY);
        }
    }
    ct_tensor *t[3] = {in.q, in.k, in.v};
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad(t[i], true), CT_OK);
    return in;
}

/* r: out, lse, dq, dk, dv (through the op layer and autograd) */
static void sdpa_run(const sdpa_cfg *c, const sdpa_in *in, int mode, ct_tensor **r) {
    ct_manual_seed(1234); /* the same dropout stream in every run */
    double scale = 1.0 / sqrt((double)c->E);
    ct_tensor *lse = NULL;
    ct_tensor *o = ct__sdpa_fused(mode, in->q, in->k, in->v, in->mask, c->p, c->causal, scale, &lse);
    if (!o || !lse) fail_msg("%s: %s", c->name, ct_last_error());
    ct_tensor *wrt[3] = {in->q, in->k, in->v}, *g[3] = {NULL, NULL, NULL};
    if (ct_autograd_grad(&o, 1, wrt, 3, &in->g, false, false, false, g))
        fail_msg("%s: backward: %s", c->name, ct_last_error());
    r[0] = o;
    r[1] = lse;
    for (int i = 0; i < 3; i++) r[2 + i] = g[i];
}

static bool sdpa_close(ct_tensor *a, ct_tensor *b) {
    return a && b && ct_allclose(a, b, 1e-4, 2e-5, true) == 1;
}

static const char *const k_sdpa_names[5] = {"out", "logsumexp", "dq", "dk", "dv"};

static void test_sdpa_kernel_vs_fallback(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(5);
    int pairs = 0, dead_checked = 0;
    for (int ci = 0; ci < N_SDPA_CFGS; ci++) {
        const sdpa_cfg *c = &k_sdpa_cfgs[ci];
        ct_scope s = ct_scope_begin();
        sdpa_in in = sdpa_inputs(c);
        for (int m = 0; m < 2; m++) {
            int mode = m ? CT_SDP_MEM_EFFICIENT : CT_SDP_FLASH;
            ct_tensor *base[5], *r[5];
            sdpa_run(c, &in, mode, base);
            /* forward, backward: fallback/fallback, fallback/kernel, kernel/fallback */
            for (int combo = 0; combo < 3; combo++) {
                sdpa_off(combo != 2, combo != 1);
                sdpa_run(c, &in, mode, r);
                sdpa_off(false, false);
                for (int i = 0; i < 5; i++, pairs++)
                    if (!sdpa_close(base[i], r[i]))
                        fail_msg("%s, mode %d, combo %d: %s of the kernel and the fallback differ", c->name,
                                 mode, combo, k_sdpa_names[i]);
                /* the same [B, L, Hq, Ev] layout of the output either way */
                assert_memory_equal(ct_strides(base[0]), ct_strides(r[0]), 4 * sizeof(int64_t));
                if (c->dead >= 0 && combo == 0) { /* zeros and lse = +inf on the dead row */
                    ct_tensor *orow = ct_select(ct_select(r[0], 2, c->dead), 0, 0);
                    ct_tensor *lrow = ct_select(ct_select(r[1], 2, c->dead), 0, 0);
                    assert_true(ct_item(ct_sum(ct_abs(orow), NULL, 0, false)) == 0.0);
                    assert_true(ct_item(ct_all(ct_eq_scalar(lrow, INFINITY), NULL, 0, false)) == 1.0);
                    assert_true(ct_item(ct_sum(ct_abs(ct_select(ct_select(r[2], 2, c->dead), 0, 0)), NULL, 0,
                                               false)) == 0.0);
                    dead_checked++;
                }
            }
        }
        /* without dropout: the fallback is the math backend's function */
        if (c->p == 0) {
            sdpa_off(true, true);
            ct_tensor *r[5];
            sdpa_run(c, &in, CT_SDP_FLASH, r);
            sdpa_off(false, false);
            ct_sdp_kernel_set(CT_SDP_MATH);
            ct_tensor *o = ct_scaled_dot_product_attention(in.q, in.k, in.v, in.mask, 0.0, c->causal, 0.0, true);
            ct_sdp_kernel_set(CT_SDP_ALL);
            assert_non_null(o);
            ct_tensor *wrt[3] = {in.q, in.k, in.v}, *g[3] = {NULL, NULL, NULL};
            assert_int_equal(ct_autograd_grad(&o, 1, wrt, 3, &in.g, false, false, false, g), CT_OK);
            ct_tensor *m[5] = {o, NULL, g[0], g[1], g[2]};
            for (int i = 0; i < 5; i++)
                if (m[i] && !sdpa_close(m[i], r[i]))
                    fail_msg("%s: %s of the fallback and the math backend differ", c->name, k_sdpa_names[i]);
        }
        ct_scope_end(s);
    }
    assert_int_equal(pairs, N_SDPA_CFGS * 2 * 3 * 5);
    assert_int_equal(dead_checked, 3 * 2);
    assert_int_equal(ct_live_tensors(), live);
}

/* the public function (its reshapes, broadcasting, GQA, backend choice)
 * with the kernels and with the fallback */
static ct_tensor *sdpa_public(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, double p, bool causal,
                              bool gqa, ct_tensor *g, unsigned kernel) {
    ct_manual_seed(77);
    ct_sdp_kernel_set(kernel);
    ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, mask, p, causal, 0.0, gqa);
    ct_sdp_kernel_set(CT_SDP_ALL);
    if (!o) fail_msg("%s", ct_last_error());
    assert_int_equal(ct_sdp_last_backend(), kernel); /* the choice does not depend on the kernel */
    ct_tensor *wrt[3] = {q, k, v}, *d[3] = {NULL, NULL, NULL};
    assert_int_equal(ct_autograd_grad(&o, 1, wrt, 3, &g, false, false, false, d), CT_OK);
    ct_tensor *parts[4] = {ct_reshape(o, CT_SHAPE(-1)), ct_reshape(d[0], CT_SHAPE(-1)),
                           ct_reshape(d[1], CT_SHAPE(-1)), ct_reshape(d[2], CT_SHAPE(-1))};
    return ct_cat(parts, 4, 0);
}

static void test_sdpa_public(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(6);
    ct_scope s = ct_scope_begin();
    /* 3-dim inputs, a broadcast [L, S] float mask; 5-dim GQA with a bool mask; causal with dropout */
    ct_tensor *q3 = ct_randn(CT_SHAPE(3, 11, 8), CT_F32), *k3 = ct_randn(CT_SHAPE(3, 13, 8), CT_F32);
    ct_tensor *v3 = ct_randn(CT_SHAPE(3, 13, 4), CT_F32), *g3 = ct_randn(CT_SHAPE(3, 11, 4), CT_F32);
    ct_tensor *fm = ct_randn(CT_SHAPE(11, 13), CT_F32);
    ct_tensor *q5 = ct_randn(CT_SHAPE(2, 2, 4, 7, 8), CT_F32), *k5 = ct_randn(CT_SHAPE(2, 2, 2, 9, 8), CT_F32);
    ct_tensor *v5 = ct_randn(CT_SHAPE(2, 2, 2, 9, 6), CT_F32), *g5 = ct_randn(CT_SHAPE(2, 2, 4, 7, 6), CT_F32);
    ct_tensor *bm = ct_gt_scalar(ct_rand(CT_SHAPE(2, 1, 1, 7, 9), CT_F32), 0.4);
    ct_tensor *t[6] = {q3, k3, v3, q5, k5, v5};
    for (int i = 0; i < 6; i++) assert_int_equal(ct_set_requires_grad(t[i], true), CT_OK);
    for (int kk = 0; kk < 2; kk++) {
        unsigned kern = kk ? CT_SDP_MEM_EFFICIENT : CT_SDP_FLASH;
        for (int cs = 0; cs < 3; cs++) {
            ct_tensor *a, *b;
            for (int off = 0; off < 2; off++) {
                sdpa_off(off, off);
                ct_tensor *r = cs == 0   ? sdpa_public(q3, k3, v3, fm, 0.0, false, false, g3, kern)
                               : cs == 1 ? sdpa_public(q5, k5, v5, bm, 0.0, false, true, g5, kern)
                                         : sdpa_public(q3, k3, v3, NULL, 0.4, true, false, g3, kern);
                sdpa_off(false, false);
                if (off) b = r;
                else a = r;
            }
            if (!sdpa_close(a, b)) fail_msg("public case %d, kernel %u: kernel and fallback differ", cs, kern);
        }
    }
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

static void sdpa_profiled(bool off, char **table) {
    ct_scope s = ct_scope_begin();
    ct_tensor *q = ct_randn(CT_SHAPE(1, 2, 9, 8), CT_F32), *k = ct_randn(CT_SHAPE(1, 2, 9, 8), CT_F32);
    ct_tensor *v = ct_randn(CT_SHAPE(1, 2, 9, 8), CT_F32);
    assert_int_equal(ct_set_requires_grad(q, true), CT_OK);
    sdpa_off(off, off);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, 0.0, false);
    assert_non_null(o);
    assert_int_equal(ct_backward(ct_sum(o, NULL, 0, false), NULL, false, false), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    sdpa_off(false, false);
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_FLASH);
    *table = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(*table);
    ct_scope_end(s);
}

static void test_norm_fallback_runs_when_disabled(void **state) {
    (void)state;
    char *on, *off;
    run_norm_profiled(false, &on);
    run_norm_profiled(true, &off);
    static const char *names[] = {"layer_norm_fwd", "layer_norm_bwd", "softmax_backward", "log_softmax_backward",
                                  "ew_grad"};
    for (int i = 0; i < 5; i++) {
        if (!count_event(on, names[i])) fail_msg("kernel on: no %s event\n%s", names[i], on);
        if (count_event(off, names[i])) fail_msg("kernel off: a %s event\n%s", names[i], off);
    }
    assert_true(count_event(off, "rsqrt"));
    assert_false(count_event(on, "rsqrt"));
    free(on);
    free(off);
}

static void test_sdpa_fallback_runs_when_disabled(void **state) {
    (void)state;
    char *on, *off;
    sdpa_profiled(false, &on);
    sdpa_profiled(true, &off);
    static const char *names[] = {"sdpa_fused", "sdpa_fused_backward"};
    for (int i = 0; i < 2; i++) {
        if (!count_event(on, names[i])) fail_msg("kernel on: no %s event\n%s", names[i], on);
        if (count_event(off, names[i])) fail_msg("kernel off: a %s event\n%s", names[i], off);
    }
    /* the fallback is made of public ops */
    assert_true(count_event(off, "exp"));
    assert_false(count_event(on, "exp"));
    free(on);
    free(off);
}

/* ---- meta: shapes, with the (meta) kernels and with the fallbacks ---- */
static void test_norm_meta(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    for (int off = 0; off < 2; off++) {
        norm_off(off);
        ct_tensor *x = ct_empty_on(CT_SHAPE(4, 3, 10), CT_F32, CT_META);
        ct_tensor *w = ct_empty_on(CT_SHAPE(30), CT_F32, CT_META), *b = ct_empty_on(CT_SHAPE(30), CT_F32, CT_META);
        ct_tensor *y, *m, *r, *dx, *dw, *db;
        assert_int_equal(ct__layer_norm_fwd(x, w, b, 30, 1e-5, 0, &y, &m, &r), CT_OK);
        ct_tensor *o[3] = {y, m, r};
        for (int i = 0; i < 3; i++) {
            assert_int_equal(ct_get_device(o[i]), CT_META);
            assert_int_equal(ct_get_dtype(o[i]), CT_F32);
        }
        assert_int_equal(ct_ndim(y), 3);
        assert_memory_equal(ct_sizes(y), ct_sizes(x), 3 * sizeof(int64_t));
        assert_int_equal(ct_ndim(m), 1);
        assert_int_equal(ct_sizes(m)[0], 4);
        assert_int_equal(ct_sizes(r)[0], 4);
        assert_int_equal(ct__layer_norm_bwd(y, x, m, r, w, 30, 0, true, true, &dx, &dw, &db), CT_OK);
        assert_int_equal(ct_get_device(dx), CT_META);
        assert_memory_equal(ct_sizes(dx), ct_sizes(x), 3 * sizeof(int64_t));
        assert_int_equal(ct_numel(dw), 30);
        assert_int_equal(ct_numel(db), 30);
        assert_int_equal(ct_get_device(db), CT_META);
        /* mixing devices is an error */
        assert_int_equal(ct__layer_norm_fwd(x, ct_ones(CT_SHAPE(30), CT_F32), NULL, 30, 1e-5, 0, &y, &m, &r),
                         CT_ERR_DTYPE);
        assert_string_equal(ct_last_error(), "layer_norm: expected weight of dtype float32 on meta, got float32 on cpu");
        /* softmax backward, ew_grad */
        for (int lg = 0; lg < 2; lg++) {
            ct_tensor *gx = ct__softmax_backward(x, x, 1, lg);
            assert_non_null(gx);
            assert_int_equal(ct_get_device(gx), CT_META);
            assert_memory_equal(ct_sizes(gx), ct_sizes(x), 3 * sizeof(int64_t));
        }
        ct_tensor *eg = NULL;
        assert_int_equal(ct__ew_fused_grad(CT_EWG_GELU, x, x, &eg), 1);
        assert_int_equal(ct_get_device(eg), CT_META);
        assert_memory_equal(ct_sizes(eg), ct_sizes(x), 3 * sizeof(int64_t));
        /* their meta functions' checks, on both paths */
        assert_int_equal(ct__ew_fused_grad(99, x, x, &eg), -1);
        assert_string_equal(ct_last_error(), "ew_grad: bad kind 99");
        ct_tensor *m5 = ct_empty_on(CT_SHAPE(5), CT_F32, CT_META);
        assert_int_equal(ct__layer_norm_bwd(x, x, m5, ct_empty_on(CT_SHAPE(4), CT_F32, CT_META), w, 30, 1, true, true, &dx, &dw, &db), CT_ERR_SHAPE);
        assert_string_equal(ct_last_error(), "rms_norm_backward: expected mean of 4 elements, got [5]");
        assert_null(ct__softmax_backward(x, x, 3, 0));
        assert_string_equal(ct_last_error(), "softmax_backward: dim 3 out of range for a 3-D tensor "
                            "(expected in [-3, 2])");
        ct_meta mt;
        ct_args sa = ct__args(CT_OP_log_softmax_backward);
        sa.p.scan = (ct_p_scan){.dim = 2, .pre = 12, .n = 10, .post = 1};
        ct_tensor *gy[2] = {ct_empty_on(CT_SHAPE(4, 3, 9), CT_F32, CT_META), x};
        assert_int_equal(ct__meta_run(CT_OP_log_softmax_backward, &mt, 1, gy, 2, &sa), CT_ERR_SHAPE);
        assert_string_equal(ct_last_error(), "log_softmax_backward: expected a gradient of shape [4, 3, 10] "
                            "(at least 1 dim), got [4, 3, 9]");
        gy[0] = x;
        sa.p.scan.n = 9;
        assert_int_equal(ct__meta_run(CT_OP_log_softmax_backward, &mt, 1, gy, 2, &sa), CT_ERR_ARG);
        assert_string_equal(ct_last_error(), "log_softmax_backward: the params (dim 2: 12 x 9 x 1) do not split "
                            "[4, 3, 10]");
        /* LayerNorm / RMSNorm modules train on meta through them */
        for (int rms = 0; rms < 2; rms++) {
            ct_module *ln = rms ? ct_rms_norm_new(CT_SHAPE(10), 1e-6, true) : ct_layer_norm_new(CT_SHAPE(10), 1e-5, true, true);
            assert_non_null(ln);
            assert_int_equal(ct_module_to(ln, CT_META), CT_OK);
            ct_tensor *xm = ct_empty_on(CT_SHAPE(4, 3, 10), CT_F32, CT_META);
            assert_int_equal(ct_set_requires_grad(xm, true), CT_OK);
            ct_tensor *ym = ct_softmax(ct_module_forward1(ln, xm), -1);
            assert_non_null(ym);
            assert_int_equal(ct_get_device(ym), CT_META);
            assert_int_equal(ct_backward(ct_sum(ct_gelu(ym, CT_GELU_NONE), NULL, 0, false), NULL, false, false), CT_OK);
            assert_non_null(ct_grad(xm));
            assert_int_equal(ct_get_device(ct_grad(xm)), CT_META);
            assert_memory_equal(ct_sizes(ct_grad(xm)), ct_sizes(xm), 3 * sizeof(int64_t));
            ct_module_release(ln);
        }
    }
    norm_off(false);
    ct_scope_end(s);
}

static void test_sdpa_meta(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    assert_non_null(ct__fused_kernel(CT_OP_sdpa_fused, CT_META));
    assert_non_null(ct__fused_kernel(CT_OP_sdpa_fused_backward, CT_META));
    for (int off = 0; off < 2; off++) {
        sdpa_off(off, off);
        ct_tensor *q = ct_empty_on(CT_SHAPE(2, 6, 5, 8), CT_F32, CT_META);
        ct_tensor *k = ct_empty_on(CT_SHAPE(2, 3, 7, 8), CT_F32, CT_META);
        ct_tensor *v = ct_empty_on(CT_SHAPE(2, 3, 7, 4), CT_F32, CT_META);
        ct_tensor *m = ct_expand(ct_empty_on(CT_SHAPE(5, 7), CT_BOOL, CT_META), CT_SHAPE(2, 6, 5, 7));
        ct_tensor *t[3] = {q, k, v};
        for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad(t[i], true), CT_OK);
        ct_tensor *lse = NULL;
        ct_tensor *o = ct__sdpa_fused(CT_SDP_FLASH, q, k, v, m, 0.1, false, 0.5, &lse);
        assert_non_null(o);
        assert_non_null(lse);
        assert_int_equal(ct_get_device(o), CT_META);
        assert_int_equal(ct_get_device(lse), CT_META);
        assert_memory_equal(ct_sizes(o), ((int64_t[]){2, 6, 5, 4}), 4 * sizeof(int64_t));
        assert_memory_equal(ct_strides(o), ((int64_t[]){5 * 6 * 4, 4, 6 * 4, 1}), 4 * sizeof(int64_t));
        assert_int_equal(ct_ndim(lse), 3);
        assert_memory_equal(ct_sizes(lse), ((int64_t[]){2, 6, 5}), 3 * sizeof(int64_t));
        /* the backward, on meta (allocated on the inputs' device) */
        assert_int_equal(ct_backward(ct_sum(o, NULL, 0, false), NULL, false, false), CT_OK);
        for (int i = 0; i < 3; i++) {
            assert_non_null(ct_grad(t[i]));
            assert_int_equal(ct_get_device(ct_grad(t[i])), CT_META);
            assert_memory_equal(ct_sizes(ct_grad(t[i])), ct_sizes(t[i]), 4 * sizeof(int64_t));
        }
        /* the public function on meta: the same shapes */
        ct_tensor *q3 = ct_empty_on(CT_SHAPE(4, 5, 8), CT_F32, CT_META);
        ct_tensor *k3 = ct_empty_on(CT_SHAPE(4, 9, 8), CT_F32, CT_META);
        ct_tensor *v3 = ct_empty_on(CT_SHAPE(4, 9, 3), CT_F32, CT_META);
        ct_tensor *o3 = ct_scaled_dot_product_attention(q3, k3, v3, NULL, 0.2, true, 0.0, false);
        assert_non_null(o3);
        assert_int_equal(ct_sdp_last_backend(), CT_SDP_FLASH);
        assert_int_equal(ct_get_device(o3), CT_META);
        assert_memory_equal(ct_sizes(o3), ((int64_t[]){4, 5, 3}), 3 * sizeof(int64_t));
        sdpa_off(false, false);
    }
    /* errors in the library's style */
    ct_tensor *q = ct_empty_on(CT_SHAPE(2, 3, 5, 8), CT_F32, CT_META);
    ct_tensor *k = ct_empty_on(CT_SHAPE(2, 2, 7, 8), CT_F32, CT_META);
    ct_tensor *v = ct_empty_on(CT_SHAPE(2, 2, 7, 4), CT_F32, CT_META);
    assert_null(ct__sdpa_fused(CT_SDP_FLASH, q, k, v, NULL, 0.0, false, 1.0, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(), "scaled_dot_product_attention: q [2, 3, 5, 8], k [B, Hk, S, E], "
                        "v [B, Hk, S, Ev] with Hk dividing Hq expected, got k [2, 2, 7, 8]");
    /* the meta function's checks, on both paths: one device */
    ct_tensor *k3 = ct_empty_on(CT_SHAPE(2, 3, 7, 8), CT_F32, CT_META);
    ct_tensor *v3 = ct_empty_on(CT_SHAPE(2, 3, 7, 4), CT_F32, CT_META);
    ct_tensor *cm = ct_ones(CT_SHAPE(2, 3, 5, 7), CT_BOOL);
    for (int off = 0; off < 2; off++) {
        sdpa_off(off, off);
        assert_null(ct__sdpa_fused(CT_SDP_FLASH, q, k3, v3, cm, 0.0, false, 1.0, NULL));
        assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
        assert_string_equal(ct_last_error(), "scaled_dot_product_attention: expected all tensors on the same "
                            "device, got meta and cpu");
        ct_tensor *o = ct_empty_on(CT_SHAPE(2, 3, 5, 4), CT_F32, CT_META), *d[3];
        ct_tensor *lc = ct_zeros(CT_SHAPE(2, 3, 5), CT_F32);
        ct_args fa = ct__args(CT_OP_sdpa_fused);
        fa.p.sdpa.scale = 1.0;
        assert_int_equal(ct__sdpa_fused_backward(&fa, q, k3, v3, o, lc, o, NULL, (const bool[]){true, true, true}, d),
                         CT_ERR_DEVICE);
        assert_string_equal(ct_last_error(), "scaled_dot_product_attention backward: expected all tensors on the "
                            "same device, got meta and cpu");
        sdpa_off(false, false);
    }
    ct_clear_error();
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}
/* Double backward (create_graph: the gradient written with public ops)
 * through a fully masked row: a float mask (-inf) gives the second-order
 * gradients the equivalent bool mask gives, finite (the dead row's scores
 * are zeroed before the softmax; they were NaN), for every input. */
static ct_tensor *sdpa_gradgrad(ct_tensor *const *t, ct_tensor *mask, ct_tensor *g, ct_tensor *const *r) {
    ct_tensor *lse = NULL;
    ct_tensor *o = ct__sdpa_fused(CT_SDP_MEM_EFFICIENT, t[0], t[1], t[2], mask, 0.0, false, 0.5, &lse);
    assert_non_null(o);
    ct_tensor *d[3] = {NULL, NULL, NULL}, *dd[3] = {NULL, NULL, NULL};
    assert_int_equal(ct_autograd_grad(&o, 1, t, 3, &g, true, true, false, d), CT_OK);
    ct_tensor *loss = ct_add(ct_add(ct_sum(ct_mul(d[0], r[0]), NULL, 0, false), ct_sum(ct_mul(d[1], r[1]), NULL, 0, false)),
                             ct_sum(ct_mul(d[2], r[2]), NULL, 0, false));
    assert_int_equal(ct_autograd_grad(&loss, 1, t, 3, NULL, false, false, false, dd), CT_OK);
    ct_tensor *parts[6] = {ct_reshape(d[0], CT_SHAPE(-1)), ct_reshape(d[1], CT_SHAPE(-1)),
                           ct_reshape(d[2], CT_SHAPE(-1)), ct_reshape(dd[0], CT_SHAPE(-1)),
                           ct_reshape(dd[1], CT_SHAPE(-1)), ct_reshape(dd[2], CT_SHAPE(-1))};
    return ct_cat(parts, 6, 0);
}

static void test_sdpa_double_backward_dead_row(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(11);
    ct_scope s = ct_scope_begin();
    ct_tensor *t[3] = {ct_randn(CT_SHAPE(2, 2, 5, 4), CT_F32), ct_randn(CT_SHAPE(2, 2, 6, 4), CT_F32),
                       ct_randn(CT_SHAPE(2, 2, 6, 3), CT_F32)};
    ct_tensor *r[3] = {ct_randn(CT_SHAPE(2, 2, 5, 4), CT_F32), ct_randn(CT_SHAPE(2, 2, 6, 4), CT_F32),
                       ct_randn(CT_SHAPE(2, 2, 6, 3), CT_F32)};
    ct_tensor *g = ct_randn(CT_SHAPE(2, 2, 5, 3), CT_F32);
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad(t[i], true), CT_OK);
    /* keep ~70%, and nothing on query row 2 */
    ct_tensor *row = ct_eq_scalar(ct_reshape(ct_arange(0, 5, 1, CT_F32), CT_SHAPE(5, 1)), 2.0);
    ct_tensor *keep = ct_logical_and(ct_gt_scalar(ct_rand(CT_SHAPE(2, 2, 5, 6), CT_F32), 0.3), ct_logical_not(row));
    ct_tensor *fmask = ct_masked_fill(ct_zeros(CT_SHAPE(2, 2, 5, 6), CT_F32), ct_logical_not(keep), -INFINITY);
    for (int off = 0; off < 2; off++) {
        sdpa_off(off, off);
        ct_tensor *b = sdpa_gradgrad(t, keep, g, r), *f = sdpa_gradgrad(t, fmask, g, r);
        sdpa_off(false, false);
        assert_int_equal(ct_item(ct_all(ct_isfinite(f), NULL, 0, false)), 1.0);
        if (!sdpa_close(b, f)) fail_msg("off %d: float and bool masks give different second-order gradients", off);
    }
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ==== end of the sdpa block ==== */
/* ==== fused rows: add_layer_norm and bias_act (src/ops/fused_rows.h) ======
 * The Transformer fast path's row ops: kernel (src/backend/cpu/tfm_rows.c)
 * == composite fallback for every combination of their optional inputs and
 * row lengths that are not multiples of the vector width; the fallback runs
 * when the kernels are disabled; meta shapes; the encoder's fast path gives
 * the same output through either. */
static const ct_op k_row_ops[2] = {CT_OP_add_layer_norm, CT_OP_bias_act};

static void rows_off(bool off) {
    for (int i = 0; i < 2; i++) ct__fused_disable(k_row_ops[i], off);
}

static bool rows_close(ct_tensor *a, ct_tensor *b) {
    return a && b && ct_allclose(a, b, 1e-5, 1e-5, false) == 1;
}

static const int64_t k_row_d[] = {1, 5, 8, 13, 64, 100};

static void test_rows_add_layer_norm(void **state) {
    (void)state;
    ct_manual_seed(21);
    assert_non_null(ct__fused_kernel(CT_OP_add_layer_norm, CT_CPU));
    for (size_t di = 0; di < sizeof k_row_d / sizeof k_row_d[0]; di++) {
        int64_t d = k_row_d[di];
        for (int combo = 0; combo < 8; combo++) {
            bool hr = combo & 1, hw = combo & 2, hb = combo & 4;
            ct_scope s = ct_scope_begin();
            ct_tensor *x = ct_randn(CT_SHAPE(2, 3, d), CT_F32), *r = hr ? ct_randn(CT_SHAPE(2, 3, d), CT_F32) : NULL;
            ct_tensor *w = hw ? ct_add_scalar(ct_randn(CT_SHAPE(d), CT_F32), 1.0) : NULL;
            ct_tensor *b = hb ? ct_randn(CT_SHAPE(d), CT_F32) : NULL;
            ct_tensor *sk = NULL, *sf = NULL;
            ct_tensor *yk = ct__add_layer_norm(x, r, w, b, 1e-5, &sk, NULL);
            /* in place into the residual (or x), no sum */
            ct_tensor *dst = ct_clone(hr ? r : x);
            ct_tensor *yi = ct__add_layer_norm(hr ? x : dst, hr ? dst : NULL, w, b, 1e-5, NULL, dst);
            rows_off(true);
            ct_tensor *yf = ct__add_layer_norm(x, r, w, b, 1e-5, &sf, NULL);
            ct_tensor *dst2 = ct_clone(hr ? r : x);
            ct_tensor *yi2 = ct__add_layer_norm(hr ? x : dst2, hr ? dst2 : NULL, w, b, 1e-5, NULL, dst2);
            rows_off(false);
            if (!rows_close(yk, yf) || !rows_close(sk, sf) || !rows_close(yi, yf) || !rows_close(yi2, yf))
                fail_msg("add_layer_norm d=%lld residual %d weight %d bias %d: kernel != fallback", (long long)d, hr,
                         hw, hb);
            assert_ptr_equal(yi, dst);
            assert_ptr_equal(yi2, dst2);
            /* the sum is x + r exactly; and y is F.layer_norm of it */
            assert_true(ct_equal(sk, hr ? ct_add(x, r) : x));
            ct_tensor *ref = ct_layer_norm(hr ? ct_add(x, r) : x, &d, 1, w, b, 1e-5);
            assert_true(rows_close(yk, ref));
            ct_scope_end(s);
        }
    }
    /* non-contiguous operands are copied for the kernel */
    ct_scope s = ct_scope_begin();
    ct_tensor *xt = ct_transpose(ct_randn(CT_SHAPE(6, 4), CT_F32), 0, 1), *rt = ct_randn(CT_SHAPE(4, 6), CT_F32);
    ct_tensor *y1 = ct__add_layer_norm(xt, rt, NULL, NULL, 1e-5, NULL, NULL);
    int64_t d6 = 6;
    assert_true(rows_close(y1, ct_layer_norm(ct_add(xt, rt), &d6, 1, NULL, NULL, 1e-5)));
    /* errors */
    assert_null(ct__add_layer_norm(rt, ct_randn(CT_SHAPE(4, 5), CT_F32), NULL, NULL, 1e-5, NULL, NULL));
    assert_string_equal(ct_last_error(), "add_layer_norm: expected residual of shape [4, 6], got [4, 5]");
    assert_null(ct__add_layer_norm(rt, NULL, ct_ones(CT_SHAPE(5), CT_F32), NULL, 1e-5, NULL, NULL));
    assert_string_equal(ct_last_error(), "add_layer_norm: weight should contain 6 elements not 5");
    assert_null(ct__add_layer_norm(rt, NULL, ct_ones(CT_SHAPE(6), CT_F64), NULL, 1e-5, NULL, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_null(ct__add_layer_norm(NULL, NULL, NULL, NULL, 1e-5, NULL, NULL));
    /* f64 takes the fallback */
    ct_tensor *x64 = ct_randn(CT_SHAPE(3, 7), CT_F64);
    int64_t d7 = 7;
    assert_true(ct_allclose(ct__add_layer_norm(x64, NULL, NULL, NULL, 1e-5, NULL, NULL),
                            ct_layer_norm(x64, &d7, 1, NULL, NULL, 1e-5), 1e-10, 1e-12, false) == 1);
    ct_scope_end(s);
}

static void test_rows_bias_act(void **state) {
    (void)state;
    ct_manual_seed(22);
    assert_non_null(ct__fused_kernel(CT_OP_bias_act, CT_CPU));
    static const int acts[] = {CT_EWA_RELU, CT_EWA_GELU, CT_EWA_NONE, CT_EWA_TANH};
    for (size_t di = 0; di < sizeof k_row_d / sizeof k_row_d[0]; di++) {
        int64_t d = k_row_d[di];
        for (int ai = 0; ai < 4; ai++)
            for (int rl = 0; rl < 2; rl++)
                for (int hb = 0; hb < 2; hb++) {
                    int act = acts[ai];
                    if (rl && act != CT_EWA_RELU && act != CT_EWA_GELU) continue;
                    ct_scope s = ct_scope_begin();
                    ct_tensor *h = ct_randn(CT_SHAPE(7, d), CT_F32), *b = hb ? ct_randn(CT_SHAPE(d), CT_F32) : NULL;
                    ct_tensor *yk = ct__bias_act(h, b, act, rl, NULL);
                    ct_tensor *hi = ct_clone(h);
                    ct_tensor *yi = ct__bias_act(hi, b, act, rl, hi);
                    rows_off(true);
                    ct_tensor *yf = ct__bias_act(h, b, act, rl, NULL);
                    ct_tensor *hf = ct_clone(h);
                    ct_tensor *yfi = ct__bias_act(hf, b, act, rl, hf);
                    rows_off(false);
                    assert_ptr_equal(yi, hi);
                    assert_ptr_equal(yfi, hf);
                    if (!rows_close(yk, yf) || !ct_equal(yk, yi) || !ct_equal(yf, yfi))
                        fail_msg("bias_act d=%lld act %d row_loops %d bias %d: kernel != fallback", (long long)d, act,
                                 rl, hb);
                    /* the activation ops' loops: the same bits as add then the op;
                     * the row loops' GELU is the gelu op's vector loop too */
                    if ((!rl || act == CT_EWA_GELU) && act != CT_EWA_NONE) assert_true(ct_equal(yk, yf));
                    if (hb || act == CT_EWA_GELU || act == CT_EWA_TANH) assert_false(ct_equal(yk, h));
                    ct_scope_end(s);
                }
    }
    ct_scope s = ct_scope_begin();
    /* the row loops' relu maps NaN to 0; the activation ops' keeps it */
    ct_tensor *hn = ct_full(CT_SHAPE(2, 3), NAN, CT_F32);
    assert_float_equal(ct_item(ct_sum(ct__bias_act(hn, NULL, CT_EWA_RELU, true, NULL), NULL, 0, false)), 0.0, 0.0);
    assert_true(isnan(ct_item(ct_sum(ct__bias_act(hn, NULL, CT_EWA_RELU, false, NULL), NULL, 0, false))));
    /* a contiguous output from a non-contiguous h */
    ct_tensor *ht = ct_transpose(ct_randn(CT_SHAPE(5, 3), CT_F32), 0, 1), *b5 = ct_randn(CT_SHAPE(5), CT_F32);
    assert_true(ct_equal(ct__bias_act(ht, b5, CT_EWA_GELU, true, NULL), ct_gelu(ct_add(ht, b5), CT_GELU_NONE)));
    ct_scope_end(s);
}

static void test_rows_meta(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_empty_on(CT_SHAPE(4, 9, 13), CT_F32, CT_META), *r = ct_empty_on(CT_SHAPE(4, 9, 13), CT_F32, CT_META);
    ct_tensor *w = ct_empty_on(CT_SHAPE(13), CT_F32, CT_META), *b = ct_empty_on(CT_SHAPE(13), CT_F32, CT_META);
    assert_non_null(ct__fused_kernel(CT_OP_add_layer_norm, CT_META));
    assert_non_null(ct__fused_kernel(CT_OP_bias_act, CT_META));
    ct_tensor *sum = NULL, *y = ct__add_layer_norm(x, r, w, b, 1e-5, &sum, NULL);
    ct_tensor *o[2] = {y, sum};
    for (int i = 0; i < 2; i++) {
        assert_non_null(o[i]);
        assert_int_equal(ct_get_device(o[i]), CT_META);
        assert_int_equal(ct_get_dtype(o[i]), CT_F32);
        assert_int_equal(ct_ndim(o[i]), 3);
        assert_memory_equal(ct_sizes(o[i]), ((int64_t[]){4, 9, 13}), 3 * sizeof(int64_t));
    }
    assert_ptr_equal(ct__add_layer_norm(x, r, w, NULL, 1e-5, NULL, r), r);
    ct_tensor *h = ct__bias_act(x, b, CT_EWA_GELU, true, NULL);
    assert_non_null(h);
    assert_int_equal(ct_get_device(h), CT_META);
    assert_memory_equal(ct_sizes(h), ((int64_t[]){4, 9, 13}), 3 * sizeof(int64_t));
    assert_ptr_equal(ct__bias_act(x, NULL, CT_EWA_RELU, false, x), x);
    assert_null(ct__bias_act(x, ct_empty_on(CT_SHAPE(12), CT_F32, CT_META), CT_EWA_RELU, false, NULL));
    assert_string_equal(ct_last_error(), "bias_act: bias should contain 13 elements not 12");
    /* the out= tensor against the meta function's output, on both paths */
    for (int off = 0; off < 2; off++) {
        rows_off(off);
        assert_null(ct__bias_act(x, b, CT_EWA_RELU, false, ct_empty_on(CT_SHAPE(4, 9), CT_F32, CT_META)));
        assert_string_equal(ct_last_error(), "bias_act: expected out of shape [4, 9, 13], got [4, 9]");
        assert_null(ct__add_layer_norm(x, r, w, b, 1e-5, NULL, ct_empty_on(CT_SHAPE(4, 9, 13), CT_F64, CT_META)));
        assert_string_equal(ct_last_error(), "add_layer_norm: expected out of dtype float32 on meta, got float64 on meta");
        assert_null(ct__add_layer_norm(x, ct_empty_on(CT_SHAPE(4, 9, 13), CT_F32, CT_CPU), w, b, 1e-5, NULL, NULL));
        assert_string_equal(ct_last_error(), "add_layer_norm: expected residual of dtype float32 on meta, got float32 on cpu");
        assert_null(ct__bias_act(x, b, CT_EWA_SILU, true, NULL));
        assert_string_equal(ct_last_error(), "bias_act: the row loops take relu or gelu, not activation 4");
    }
    rows_off(false);
    ct_scope_end(s);
}

/* The encoder's fast path through the kernels and through the fallbacks:
 * the same output (to float rounding), and that of the slow path; the
 * profiler sees the row ops only with the kernels on. */
static ct_tensor *encoder_run(ct_module *enc, ct_tensor *x, ct_tensor *km, bool off, char **table) {
    rows_off(off);
    bool prev = ct_set_grad_enabled(false);
    if (table) assert_int_equal(ct_profiler_start(NULL), CT_OK);
    ct_tensor *y = ct_transformer_encoder_forward(enc, x, NULL, km, false);
    if (table) {
        assert_int_equal(ct_profiler_stop(), CT_OK);
        *table = ct_profiler_table("cpu_time_total", 0);
    }
    bool fast = ct_transformer_last_fast_path(NULL);
    ct_set_grad_enabled(prev);
    rows_off(false);
    assert_true(fast);
    return y;
}

static void test_rows_encoder_fast_path(void **state) {
    (void)state;
    for (int cfg = 0; cfg < 8; cfg++) {
        bool bf = cfg & 1, nf = cfg & 2, gelu = cfg & 4;
        const int64_t d = 36, H = 4, ff = 70, N = 4, L = 9;
        ct_manual_seed(30 + cfg);
        ct_module *layer = ct_transformer_encoder_layer_new(d, H, ff, 0.1, gelu ? CT_TRANSFORMER_GELU : CT_TRANSFORMER_RELU,
                                                            1e-5, bf, nf, true);
        ct_module *norm = ct_layer_norm_new(&d, 1, 1e-5, true, true);
        ct_module *enc = ct_transformer_encoder_new(layer, 2, norm, true);
        assert_non_null(enc);
        ct_module_eval(enc);
        ct_scope s = ct_scope_begin();
        ct_tensor *x = ct_randn((int64_t[]){bf ? N : L, bf ? L : N, d}, 3, CT_F32);
        uint8_t mk[4 * 9] = {0};
        const int lens[4] = {9, 5, 1, 7};
        for (int n = 0; n < N; n++)
            for (int t = 0; t < L; t++) mk[n * L + t] = t >= lens[n];
        ct_tensor *kpm = ct_from_array(mk, (int64_t[]){N, L}, 2, CT_BOOL);
        for (int with_mask = 0; with_mask < 2; with_mask++) {
            ct_tensor *km = with_mask ? kpm : NULL;
            char *ton = NULL, *toff = NULL;
            ct_tensor *yk = encoder_run(enc, x, km, false, cfg == 0 ? &ton : NULL);
            ct_tensor *yf = encoder_run(enc, x, km, true, cfg == 0 ? &toff : NULL);
            ct_tensor *slow = ct_transformer_encoder_forward(enc, x, NULL, km, false); /* grad on: slow path */
            assert_false(ct_transformer_last_fast_path(NULL));
            assert_non_null(yk);
            assert_non_null(yf);
            if (ct_allclose(yk, yf, 1e-5, 1e-5, false) != 1)
                fail_msg("encoder cfg %d mask %d: kernels != fallbacks", cfg, with_mask);
            if (!with_mask || !bf || nf) /* not packed: the slow path's values everywhere */
                assert_true(ct_allclose(yk, slow, 1e-4, 1e-5, false) == 1);
            if (ton) {
                assert_true(count_event(ton, "add_layer_norm") && count_event(ton, "bias_act"));
                assert_false(count_event(toff, "add_layer_norm") || count_event(toff, "bias_act"));
                assert_true(count_event(toff, "rsqrt") && count_event(toff, "relu"));
            }
            free(ton);
            free(toff);
        }
        ct_scope_end(s);
        ct_module_release(layer);
        ct_module_release(norm);
        ct_module_release(enc);
    }
}
/* ==== end of fused rows ==== */

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
    /* the kernels' meta function: their flat tensor lists (the entries give
     * it only what the kernel takes) */
    ct_args oa = ct__args(CT_OP_sgd_step);
    oa.p.optim = h;
    ct_tensor *pt = ct_t(ct_zeros(CT_SHAPE(2, 3), CT_F32)), *gt = ct_zeros(CT_SHAPE(3, 2), CT_F32);
    ct_tensor *sl[3] = {p, g, z}, *tl[3] = {gt, pt, gt};
    assert_int_equal(ct__meta_run(CT_OP_sgd_step, NULL, 0, sl, 3, &oa), CT_OK);
    assert_int_equal(ct__meta_run(CT_OP_sgd_step, NULL, 0, sl, 2, &oa), CT_ERR_ARG);
    assert_string_equal(ct_last_error(), "sgd_step: expected 3 lists of one length, got 2 tensors");
    assert_int_equal(ct__meta_run(CT_OP_sgd_step, NULL, 0, tl, 3, &oa), CT_ERR_ARG);
    assert_string_equal(ct_last_error(), "sgd_step: the kernel takes contiguous tensors, grad 0 is not");
    sl[2] = ct_zeros(CT_SHAPE(6), CT_F64);
    assert_int_equal(ct__meta_run(CT_OP_sgd_step, NULL, 0, sl, 3, &oa), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "sgd_step: expected momentum_buffer 0 of dtype float32 on cpu, got float64 on cpu");
    oa = ct__args(CT_OP_adam_step);
    oa.p.optim = h;
    ct_tensor *al[5] = {p, g, z, z, z};
    assert_int_equal(ct__meta_run(CT_OP_adam_step, NULL, 0, al, 5, &oa), CT_ERR_ARG);
    assert_string_equal(ct_last_error(), "adam_step: step 0 should be a 0-dim float32 cpu tensor, got [6] float32 on cpu");
    al[4] = one;
    assert_int_equal(ct__meta_run(CT_OP_adam_step, NULL, 0, al, 5, &oa), CT_OK);
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
        cmocka_unit_test(test_norm_fixtures_kernel_vs_fallback),
        cmocka_unit_test(test_layer_norm_direct),
        cmocka_unit_test(test_softmax_backward_direct),
        cmocka_unit_test(test_ew_grad_direct),
        cmocka_unit_test(test_norm_fallback_runs_when_disabled),
        cmocka_unit_test(test_norm_meta),
        /* sdpa */
        cmocka_unit_test(test_sdpa_kernel_vs_fallback),
        cmocka_unit_test(test_sdpa_public),
        cmocka_unit_test(test_sdpa_fallback_runs_when_disabled),
        cmocka_unit_test(test_sdpa_meta),
        cmocka_unit_test(test_sdpa_double_backward_dead_row),
        cmocka_unit_test(test_rows_add_layer_norm),
        cmocka_unit_test(test_rows_bias_act),
        cmocka_unit_test(test_rows_meta),
        cmocka_unit_test(test_rows_encoder_fast_path),
        cmocka_unit_test(test_optim_kernel_vs_fallback),
        cmocka_unit_test(test_optim_fused_vs_ops),
        cmocka_unit_test(test_optim_which_path),
        cmocka_unit_test(test_optim_meta_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
