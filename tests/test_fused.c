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
 *  - double backward (create_graph) agrees in both modes. */
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
#include "ops/fused_rows.h"

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
                    /* the activation ops' loops: the same bits as add then the op */
                    if (!rl && act != CT_EWA_NONE) assert_true(ct_equal(yk, yf));
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
    assert_true(rows_close(ct__bias_act(ht, b5, CT_EWA_GELU, true, NULL), ct_gelu(ct_add(ht, b5), CT_GELU_NONE)));
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_kernel_vs_fallback),
        cmocka_unit_test(test_ops_direct),
        cmocka_unit_test(test_fallback_runs_when_disabled),
        cmocka_unit_test(test_meta),
        cmocka_unit_test(test_double_backward),
        cmocka_unit_test(test_rows_add_layer_norm),
        cmocka_unit_test(test_rows_bias_act),
        cmocka_unit_test(test_rows_meta),
        cmocka_unit_test(test_rows_encoder_fast_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
