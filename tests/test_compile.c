/* test_compile.c -- ct_compile end to end (include/ctorch/compile.h): capture
 * on meta tensors, guards and variants, automatic dynamic sizes, graph
 * breaks and fullgraph, fusion into generated kernels built through the
 * disk cache, in-place ops, random ops, compiled modules (inference and
 * training, which records through the op layer), the eager fallback when no
 * C compiler works, and bad arguments.  The reference is the same function
 * run eagerly (whose ops are checked against PyTorch by the op tests);
 * floats compare at rtol 1e-5 (generated kernels accumulate in double).
 * Every test uses a private CT_CACHE_DIR and checks that no tensor leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/compile_impl.h"
#include "ops/route.h"
#include "ops/fused_rows.h"
#include "ctorch/ctorch.h"

#include "compile_test_util.h"

static void assert_close(ct_tensor *a, ct_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    if (!ct_allclose(a, b, 1e-5, 1e-6, true)) {
        char *sa = ct_to_string(a), *sb = ct_to_string(b);
        fail_msg("compiled %s\neager %s", sa ? sa : "?", sb ? sb : "?");
    }
}

static int64_t cc_runs(void) {
    int64_t inv = 0, hits = 0;
    ct__cc_counters(&inv, &hits);
    return inv;
}

/* ---- functions under test ---- */
static ct_status f_chain(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *a = ct_gelu(in[0], CT_GELU_NONE);
    ct_tensor *b = ct_add(ct_mul(a, in[1]), in[0]);
    out[0] = ct_sum(b, (int64_t[]){1}, 1, false);
    out[1] = ct_tanh(b);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

/* runs f eagerly and compiled on in, compares every output */
static void check_same(ct_compiled *c, ct_fn f, ct_tensor *const *in, int nin, int nout) {
    ct_tensor *o[4] = {0}, *e[4] = {0};
    assert_int_equal(ct_compiled_call(c, in, nin, o, nout), CT_OK);
    assert_int_equal(f(in, nin, e, nout, NULL), CT_OK);
    for (int k = 0; k < nout; k++) assert_close(o[k], e[k]);
}

static void t_fuses_and_caches(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(3);
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(64, 100), CT_F32), ct_randn(CT_SHAPE(64, 100), CT_F32)};
    ct_compiled *c = ct_compile(f_chain, NULL, NULL);
    assert_non_null(c);
    for (int i = 0; i < 3; i++) check_same(c, f_chain, in, 2, 2);
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.calls, 3);
    assert_int_equal(s.traces, 1);
    assert_int_equal(s.variants, 1);
    assert_int_equal(s.recompiles, 0);
    assert_int_equal(s.eager_calls, 0);
    assert_true(s.kernels_built + s.kernels_loaded >= 1);
    /* the profiler shows the kernel as one event named after its ops */
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    check_same(c, f_chain, in, 2, 2);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *tab = ct_profiler_table(NULL, 50);
    assert_non_null(tab);
    if (!strstr(tab, "fused_gelu_mul_add")) fail_msg("no kernel event in\n%s", tab);
    free(tab);
    ct_profiler_clear();
    /* a first call: its trace is one range, its meta ops no events */
    ct_compiled *c2 = ct_compile(f_chain, NULL, NULL);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    check_same(c2, f_chain, in, 2, 2);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    tab = ct_profiler_table(NULL, 50);
    assert_non_null(tab);
    if (!strstr(tab, "ct_compile (trace and build)") || !strstr(tab, "fused_gelu_mul_add"))
        fail_msg("no trace range or kernel event in\n%s", tab);
    /* eager's one gelu (check_same's), not a second from the trace */
    const char *g = strstr(tab, " gelu ");
    if (!g) fail_msg("no eager gelu in\n%s", tab);
    const char *eol = strchr(g, '\n');
    char row[512];
    snprintf(row, sizeof row, "%.*s", (int)(eol ? eol - g : (long)strlen(g)), g);
    long calls = 0; /* name, self %, self, total %, total, average, calls */
    if (sscanf(row, "%*s %*s %*s %*s %*s %*s %ld", &calls) != 1 || calls != 1)
        fail_msg("gelu counted %ld times:\n%s", calls, tab);
    free(tab);
    ct_profiler_clear();
    ct_compiled_free(c2);
    char *x = ct_compile_explain(c);
    assert_non_null(x);
    assert_non_null(strstr(x, "fused kernels"));
    assert_null(strstr(x, " 0 fused kernels")); /* something fused */
    free(x);
    ct_compiled_free(c);
    /* a second compiled copy finds its kernels in the disk cache: nothing built */
    int64_t runs = cc_runs();
    c = ct_compile(f_chain, NULL, NULL);
    check_same(c, f_chain, in, 2, 2);
    s = ct_compiled_stats(c);
    assert_int_equal(s.kernels_built, 0);
    assert_true(s.kernels_loaded >= 1);
    assert_int_equal(cc_runs(), runs);
    ct_compiled_free(c);
    END;
}

static void t_dynamic_auto(void **st) {
    (void)st;
    BEGIN;
    ct_compiled *c = ct_compile(f_chain, NULL, NULL);
    int64_t rows[] = {64, 32, 48, 33, 64};
    int64_t runs_after_second = 0;
    for (int i = 0; i < 5; i++) {
        ct_tensor *in[2] = {ct_randn(CT_SHAPE(rows[i], 20), CT_F32), ct_randn(CT_SHAPE(rows[i], 20), CT_F32)};
        check_same(c, f_chain, in, 2, 2);
        if (i == 1) runs_after_second = cc_runs();
    }
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.variants, 1);  /* one dynamic variant */
    assert_int_equal(s.recompiles, 1); /* the first new size only */
    assert_int_equal(cc_runs(), runs_after_second); /* new sizes build nothing */
    char *x = ct_compile_explain(c);
    assert_non_null(strstr(x, "[any, 20]"));
    free(x);
    /* size 1 is specialized: its own variant, still right */
    ct_tensor *in1[2] = {ct_randn(CT_SHAPE(1, 20), CT_F32), ct_randn(CT_SHAPE(1, 20), CT_F32)};
    check_same(c, f_chain, in1, 2, 2);
    assert_int_equal(ct_compiled_stats(c).variants, 2);
    /* dims that were equal at trace time (duck sizing) must stay equal */
    ct_tensor *in2[2] = {ct_randn(CT_SHAPE(40, 20), CT_F32), ct_randn(CT_SHAPE(1, 20), CT_F32)};
    check_same(c, f_chain, in2, 2, 2);
    ct_compiled_free(c);
    END;
}

static void t_dynamic_false_and_guards(void **st) {
    (void)st;
    BEGIN;
    ct_compile_opts o = {.dynamic = CT_DYNAMIC_FALSE};
    ct_compiled *c = ct_compile(f_chain, NULL, &o);
    ct_tensor *a = ct_randn(CT_SHAPE(16, 24), CT_F32), *b = ct_randn(CT_SHAPE(16, 24), CT_F32);
    ct_tensor *in[2] = {a, b};
    check_same(c, f_chain, in, 2, 2);
    ct_tensor *in2[2] = {ct_randn(CT_SHAPE(8, 24), CT_F32), ct_randn(CT_SHAPE(8, 24), CT_F32)};
    check_same(c, f_chain, in2, 2, 2);
    assert_int_equal(ct_compiled_stats(c).variants, 2);
    /* dtype */
    ct_tensor *in3[2] = {ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64)};
    check_same(c, f_chain, in3, 2, 2);
    assert_int_equal(ct_compiled_stats(c).variants, 3);
    /* stride order: a transposed (non-contiguous) input */
    ct_tensor *at = ct_transpose(ct_randn(CT_SHAPE(24, 16), CT_F32), 0, 1);
    ct_tensor *in4[2] = {at, b};
    check_same(c, f_chain, in4, 2, 2);
    assert_int_equal(ct_compiled_stats(c).variants, 4);
    /* broadcast (stride 0) */
    ct_tensor *bb = ct_expand(ct_randn(CT_SHAPE(1, 24), CT_F32), CT_SHAPE(16, 24));
    ct_tensor *in5[2] = {a, bb};
    check_same(c, f_chain, in5, 2, 2);
    assert_int_equal(ct_compiled_stats(c).variants, 5);
    /* grad mode */
    bool prev = ct_set_grad_enabled(false);
    check_same(c, f_chain, in, 2, 2);
    ct_set_grad_enabled(prev);
    assert_int_equal(ct_compiled_stats(c).variants, 6);
    /* the first variant still serves its inputs */
    int64_t tr = ct_compiled_stats(c).traces;
    check_same(c, f_chain, in, 2, 2);
    assert_int_equal(ct_compiled_stats(c).traces, tr);
    ct_compiled_free(c);
    END;
}

static void t_recompile_limit(void **st) {
    (void)st;
    BEGIN;
    ct_compile_opts o = {.dynamic = CT_DYNAMIC_FALSE, .recompile_limit = 2};
    ct_compiled *c = ct_compile(f_chain, NULL, &o);
    for (int i = 0; i < 4; i++) {
        ct_tensor *in[2] = {ct_randn(CT_SHAPE(4 + i, 8), CT_F32), ct_randn(CT_SHAPE(4 + i, 8), CT_F32)};
        check_same(c, f_chain, in, 2, 2);
    }
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.variants, 2);
    assert_int_equal(s.eager_calls, 2);
    ct_compiled_free(c);
    END;
}

/* a graph break: ct_item needs data */
static ct_status f_item(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *m = ct_amax(in[0], NULL, 0, false);
    double v = ct_item(m);
    if (ct_last_error_code()) return ct_last_error_code();
    out[0] = ct_mul_scalar(ct_exp(in[0]), 1.0 / (1.0 + v * v));
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_graph_break(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *in[1] = {ct_randn(CT_SHAPE(5, 7), CT_F32)};
    ct_compiled *c = ct_compile(f_item, NULL, NULL);
    check_same(c, f_item, in, 1, 1);
    check_same(c, f_item, in, 1, 1);
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.graph_breaks, 1);
    assert_int_equal(s.eager_calls, 2);
    assert_int_equal(s.traces, 1);
    char *x = ct_compile_explain(c);
    assert_non_null(strstr(x, "graph break"));
    assert_non_null(strstr(x, "item"));
    free(x);
    ct_compiled_free(c);
    ct_compile_opts o = {.fullgraph = true};
    c = ct_compile(f_item, NULL, &o);
    ct_tensor *out = (ct_tensor *)1;
    assert_int_not_equal(ct_compiled_call(c, in, 1, &out, 1), CT_OK);
    assert_null(out);
    assert_non_null(strstr(ct_last_error(), "fullgraph"));
    ct_clear_error();
    ct_compiled_free(c);
    END;
}

/* in-place ops on a temporary and on an input (functionalization) */
static ct_status f_inplace(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *t = ct_mul_scalar(in[0], 2.0);
    if (!ct_add_scalar_(t, 1.0)) return ct_last_error_code();
    ct_tensor *u = ct_exp(t);
    if (!ct_mul_(in[1], t)) return ct_last_error_code(); /* writes an input */
    out[0] = ct_add(u, in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_inplace(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(6, 9), CT_F32), *y = ct_randn(CT_SHAPE(6, 9), CT_F32);
    ct_compiled *c = ct_compile(f_inplace, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        ct_tensor *yc = ct_clone(y), *ye = ct_clone(y);
        ct_tensor *ic[2] = {x, yc}, *ie[2] = {x, ye}, *o = NULL, *e = NULL;
        assert_int_equal(ct_compiled_call(c, ic, 2, &o, 1), CT_OK);
        assert_int_equal(f_inplace(ie, 2, &e, 1, NULL), CT_OK);
        assert_close(o, e);
        assert_close(yc, ye); /* the input was written the same way */
    }
    ct_compiled_free(c);
    END;
}

/* in-place writes into inputs fuse: the kernels store into the inputs (a
 * chain of writes, a copy_, a read of a written input after); inputs that
 * share memory at a call (not at the trace) run eagerly, with eager's result */
static ct_status f_inplace_inputs(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    if (!ct_mul_(in[0], in[1]) || !ct_add_scaled_(in[0], in[2], 0.5)) return ct_last_error_code();
    if (!ct_copy_(in[2], ct_add(ct_exp(in[1]), in[0]))) return ct_last_error_code();
    out[0] = ct_mul(in[0], in[2]);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* one call compiled and one eager on copies of x and z (x also as in[1]
 * when aliased): the results and the written inputs agree */
static void inplace_call(ct_compiled *c, ct_tensor *x, ct_tensor *y, ct_tensor *z, bool aliased) {
    ct_tensor *xc = ct_clone(x), *xe = ct_clone(x), *zc = ct_clone(z), *ze = ct_clone(z);
    ct_tensor *ic[3] = {xc, aliased ? xc : y, zc}, *ie[3] = {xe, aliased ? xe : y, ze}, *o = NULL, *e = NULL;
    assert_int_equal(ct_compiled_call(c, ic, 3, &o, 1), CT_OK);
    assert_int_equal(f_inplace_inputs(ie, 3, &e, 1, NULL), CT_OK);
    assert_close(o, e);
    assert_close(xc, xe);
    assert_close(zc, ze);
}

static void t_inplace_inputs(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(7, 33), CT_F32), *y = ct_randn(CT_SHAPE(7, 33), CT_F32);
    ct_tensor *z = ct_randn(CT_SHAPE(7, 33), CT_F32);
    ct_compiled *c = ct_compile(f_inplace_inputs, NULL, NULL);
    for (int i = 0; i < 2; i++) inplace_call(c, x, y, z, false);
    char *ex = ct_compile_explain(c);
    assert_non_null(ex);
    assert_non_null(strstr(ex, "0 op calls, 2 fused kernels")); /* no copy pass left */
    free(ex);
    /* x passed as both in[0] (written) and in[1]: eager runs it */
    inplace_call(c, x, y, z, true);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 1);
    ct_compiled_free(c);
    END;
}

/* teams: independent kernels run in one parallel region.  f_team's two
 * kernels touch disjoint inputs (a team of 2); in f_team_dep the first
 * kernel reads e and the second writes e in place, so those two must not
 * share a team (a thread could write e before the other read it), while
 * the second and the third, independent again, do. */
static ct_status f_team(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_tanh(ct_add(ct_mul(in[0], in[1]), in[0]));
    out[1] = ct_mul(ct_sigmoid(in[2]), ct_exp(in[3]));
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}
static ct_status f_team_dep(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    /* reads e = in[1] (a column sum: not fusible with the write below) */
    out[0] = ct_sum(ct_mul(ct_sigmoid(in[1]), ct_exp(in[0])), (int64_t[]){0}, 1, false);
    if (!ct_add_scalar_(ct_mul_scalar_(in[1], 2.0), 1.0)) return ct_last_error_code(); /* writes e */
    out[1] = ct_tanh(ct_add(ct_mul(in[2], in[2]), in[2]));          /* unrelated */
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static int count_str(const char *s, const char *what) {
    int n = 0;
    for (const char *q = s; (q = strstr(q, what)); q++) n++;
    return n;
}

static void t_team(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(11);
    /* sizes above the kernels' parallel threshold, shapes that do not fuse */
    ct_tensor *in[4] = {ct_randn(CT_SHAPE(256, 1000), CT_F32), ct_randn(CT_SHAPE(256, 1000), CT_F32),
                        ct_randn(CT_SHAPE(300, 517), CT_F32), ct_randn(CT_SHAPE(300, 517), CT_F32)};
    ct_compiled *c = ct_compile(f_team, NULL, NULL);
    for (int i = 0; i < 2; i++) check_same(c, f_team, in, 4, 2);
    char *ex = ct_compile_explain(c);
    assert_non_null(ex);
    if (count_str(ex, "team of 2 independent kernels") != 1) fail_msg("%s", ex);
    free(ex);
    /* the profiler shows the team as one event */
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    check_same(c, f_team, in, 4, 2);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *tab = ct_profiler_table(NULL, 50);
    assert_non_null(tab);
    if (ct_get_num_threads() > 1 && !strstr(tab, "team2_")) fail_msg("no team event in\n%s", tab);
    free(tab);
    ct_profiler_clear();
    ct_compiled_free(c);

    /* the dependent pair: bit for bit eager's, e written the same */
    ct_tensor *x = ct_randn(CT_SHAPE(256, 1000), CT_F32), *e0 = ct_randn(CT_SHAPE(256, 1000), CT_F32);
    ct_tensor *w = ct_randn(CT_SHAPE(300, 517), CT_F32);
    ct_tensor *ec = ct_clone(e0), *ee = ct_clone(e0);
    c = ct_compile(f_team_dep, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        ct_tensor *o[2] = {0}, *r[2] = {0};
        assert_int_equal(ct_compiled_call(c, (ct_tensor *[]){x, ec, w}, 3, o, 2), CT_OK);
        assert_int_equal(f_team_dep((ct_tensor *[]){x, ee, w}, 3, r, 2, NULL), CT_OK);
        assert_true(ct_equal(ec, ee));
        for (int k = 0; k < 2; k++) assert_close(o[k], r[k]);
    }
    ex = ct_compile_explain(c);
    assert_non_null(ex);
    if (!strstr(ex, "3 fused kernels") || count_str(ex, "team of 2 independent kernels") != 1) fail_msg("%s", ex);
    assert_int_equal(count_str(ex, "team of 3"), 0);
    free(ex);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* the "# of Calls" of the profiler table's row of op name, -1 if none
 * (a row's columns end with "# of Calls, Total FLOPs, GFLOPS") */
static int prof_calls(const char *tab, const char *name) {
    for (const char *l = tab; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] ? 1 : 0)) {
        char line[512], *cols[16];
        int nc = 0;
        snprintf(line, sizeof line, "%.*s", (int)strcspn(l, "\n"), l);
        for (char *q = strtok(line, " "); q && nc < 16; q = strtok(NULL, " ")) cols[nc++] = q;
        if (nc >= 4 && !strcmp(cols[0], name)) return atoi(cols[nc - 3]);
    }
    return -1;
}

/* A traced ct_empty replays as an allocation alone (no fill pass), while
 * ct_zeros still writes its zeros: the profiler of a compiled call shows
 * one fill (the zeros), not two; values equal eager's (same seed). */
static ct_status f_empty(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *e = ct_empty(CT_SHAPE(64, 300), CT_F32);
    ct_tensor *z = ct_zeros(CT_SHAPE(64, 300), CT_F32);
    if (!ct_uniform_(e, -1.0, 1.0)) return ct_last_error_code();
    out[0] = ct_add(ct_mul(e, in[0]), z);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_empty_replay(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(64, 300), CT_F32);
    ct_compiled *c = ct_compile(f_empty, NULL, NULL);
    for (int i = 0; i < 3; i++) {
        ct_tensor *o = NULL, *r = NULL;
        ct_manual_seed(100 + i);
        assert_int_equal(ct_compiled_call(c, &x, 1, &o, 1), CT_OK);
        ct_manual_seed(100 + i);
        assert_int_equal(f_empty(&x, 1, &r, 1, NULL), CT_OK);
        assert_true(ct_equal(o, r));
    }
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    ct_tensor *o = NULL;
    assert_int_equal(ct_compiled_call(c, &x, 1, &o, 1), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *tab = ct_profiler_table(NULL, 50);
    assert_non_null(tab);
    /* each run of the function draws once and fills once (the zeros): a
     * call may run compiled, or compiled and eagerly (the probe) */
    int fills = prof_calls(tab, "fill"), draws = prof_calls(tab, "uniform");
    if (draws < 1 || fills != draws) fail_msg("%d fills for %d draws (the empty must not fill):\n%s", fills, draws, tab);
    free(tab);
    ct_profiler_clear();
    ct_compiled_free(c);
    END;
}

/* rows: softmax, log_softmax, layer_norm, a mean */
static ct_status f_rows(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *h = ct_add(in[0], in[1]);
    out[0] = ct_softmax(h, -1);
    out[1] = ct_log_softmax(ct_mul_scalar(h, 0.5), -1);
    out[2] = ct_layer_norm(h, (int64_t[]){h ? ct_size(h, -1) : 1}, 1, in[2], NULL, 1e-5);
    out[3] = ct_mean(ct_relu(h), (int64_t[]){0}, 1, true);
    for (int k = 0; k < 4; k++)
        if (!out[k]) return ct_last_error_code();
    return CT_OK;
}

static void t_rows(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *in[3] = {ct_randn(CT_SHAPE(12, 33), CT_F32), ct_randn(CT_SHAPE(33), CT_F32),
                        ct_randn(CT_SHAPE(33), CT_F32)};
    ct_compiled *c = ct_compile(f_rows, NULL, NULL);
    check_same(c, f_rows, in, 3, 4);
    check_same(c, f_rows, in, 3, 4);
    ct_compiled_free(c);
    END;
}

/* a shape error inside fn: the call fails as eager does, no crash */
static ct_status f_bad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_matmul(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_errors(void **st) {
    (void)st;
    BEGIN;
    assert_null(ct_compile(NULL, NULL, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_NULL);
    ct_clear_error();
    ct_tensor *o = NULL;
    assert_int_equal(ct_compiled_call(NULL, NULL, 0, &o, 1), CT_ERR_NULL);
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(3, 4), CT_F32), ct_randn(CT_SHAPE(5, 6), CT_F32)};
    ct_compiled *c = ct_compile(f_bad, NULL, NULL);
    assert_int_equal(ct_compiled_call(c, in, 2, &o, 1), CT_ERR_SHAPE);
    assert_null(o);
    assert_non_null(strstr(ct_last_error(), "matmul"));
    ct_clear_error();
    ct_tensor *in_ok[2] = {in[0], ct_randn(CT_SHAPE(4, 2), CT_F32)};
    check_same(c, f_bad, in_ok, 2, 1);
    assert_int_equal(ct_compiled_call(c, in_ok, 1, &o, 1), CT_ERR_ARG); /* wrong arity */
    ct_tensor *in_null[2] = {in[0], NULL};
    assert_int_equal(ct_compiled_call(c, in_null, 2, &o, 1), CT_ERR_NULL);
    ct_clear_error();
    ct_compiled_free(c);
    ct_compiled_free(NULL);
    assert_null(ct_compile_explain(NULL));
    END;
}

static void t_disable(void **st) {
    (void)st;
    BEGIN;
    ct_compile_opts o = {.disable = true};
    ct_compiled *c = ct_compile(f_chain, NULL, &o);
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(4, 5), CT_F32), ct_randn(CT_SHAPE(4, 5), CT_F32)};
    check_same(c, f_chain, in, 2, 2);
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.traces, 0);
    assert_int_equal(s.eager_calls, 1);
    ct_compiled_free(c);
    END;
}

/* random ops: the compiled graph draws anew at each call, in eager's order
 * with eager's counters, so a seeded call gives eager's numbers (tracing on
 * meta draws nothing) */
static ct_status f_dropout(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_mul_scalar(ct_dropout(ct_relu(in[0]), 0.5, true), 3.0);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_random(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *in[1] = {ct_randn(CT_SHAPE(50, 40), CT_F32)};
    ct_compiled *c = ct_compile(f_dropout, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        ct_tensor *o = NULL, *e = NULL;
        ct_manual_seed(77 + (uint64_t)i);
        assert_int_equal(ct_compiled_call(c, in, 1, &o, 1), CT_OK);
        ct_manual_seed(77 + (uint64_t)i);
        assert_int_equal(f_dropout(in, 1, &e, 1, NULL), CT_OK);
        assert_close(o, e);
    }
    assert_int_equal(ct_compiled_stats(c).graph_breaks, 0);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    /* training (the joint graph): the mask drawn in the forward, read by the backward */
    ct_tensor *x = ct_randn(CT_SHAPE(30, 20), CT_F32);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_tensor *xin[1] = {x};
    c = ct_compile(f_dropout, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        ct_tensor *o = NULL, *e = NULL;
        ct_manual_seed(99 + (uint64_t)i);
        assert_int_equal(f_dropout(xin, 1, &e, 1, NULL), CT_OK);
        assert_int_equal(ct_backward(ct_sum(ct_square(e), NULL, 0, false), NULL, false, false), CT_OK);
        ct_tensor *ge = ct_clone(ct_grad(x));
        ct_zero_grad(x);
        ct_manual_seed(99 + (uint64_t)i);
        assert_int_equal(ct_compiled_call(c, xin, 1, &o, 1), CT_OK);
        assert_close(o, e);
        assert_int_equal(ct_backward(ct_sum(ct_square(o), NULL, 0, false), NULL, false, false), CT_OK);
        assert_close(ct_grad(x), ge);
        ct_zero_grad(x);
    }
    char *ex = ct_compile_explain(c);
    assert_non_null(strstr(ex, "joint forward + backward graph"));
    free(ex);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* attention dropout: the forward's draw, and the backward replaying it */
static ct_status f_attn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.3, false, 0.0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_attention_dropout(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *in[3];
    for (int k = 0; k < 3; k++) {
        in[k] = ct_randn(CT_SHAPE(2, 2, 9, 8), CT_F32);
        assert_int_equal(ct_set_requires_grad(in[k], true), CT_OK);
    }
    ct_compiled *c = ct_compile(f_attn, NULL, NULL);
    for (int i = 0; i < 2; i++) {
        ct_tensor *o = NULL, *e = NULL, *ge[3];
        ct_manual_seed(5 + (uint64_t)i);
        assert_int_equal(f_attn(in, 3, &e, 1, NULL), CT_OK);
        assert_int_equal(ct_backward(ct_sum(ct_square(e), NULL, 0, false), NULL, false, false), CT_OK);
        for (int k = 0; k < 3; k++) { ge[k] = ct_clone(ct_grad(in[k])); ct_zero_grad(in[k]); }
        ct_manual_seed(5 + (uint64_t)i);
        assert_int_equal(ct_compiled_call(c, in, 3, &o, 1), CT_OK);
        assert_close(o, e);
        assert_int_equal(ct_backward(ct_sum(ct_square(o), NULL, 0, false), NULL, false, false), CT_OK);
        for (int k = 0; k < 3; k++) { assert_close(ct_grad(in[k]), ge[k]); ct_zero_grad(in[k]); }
    }
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.eager_calls, 0);
    assert_int_equal(s.graph_breaks, 0);
    char *ex = ct_compile_explain(c);
    assert_non_null(strstr(ex, "joint forward + backward graph"));
    free(ex);
    ct_compiled_free(c);
    END;
}

/* compiled modules: inference fuses; training records through the op layer
 * and gives eager's gradients */
static void t_module(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(5);
    ct_module *mods[3] = {ct_linear_new(10, 16, true), ct_relu_new(), ct_linear_new(16, 3, true)};
    ct_module *m = ct_sequential_new(mods, 3);
    assert_non_null(m);
    ct_tensor *x = ct_randn(CT_SHAPE(8, 10), CT_F32);
    /* eager reference: outputs and gradients */
    ct_tensor *ye = ct_module_forward(m, &x, 1);
    ct_tensor *loss = ct_sum(ct_square(ye), NULL, 0, false);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *w0 = ct_module_param(mods[0], 0);
    ct_tensor *ge = ct_clone(ct_grad(w0));
    ct_module_zero_grad(m);
    assert_int_equal(ct_module_compile(m, NULL), CT_OK);
    ct_compiled *c = ct__module_compiled(m);
    assert_non_null(c);
    for (int i = 0; i < 2; i++) {
        ct_module_zero_grad(m);
        ct_tensor *yc = ct_module_forward(m, &x, 1);
        assert_close(yc, ye);
        ct_tensor *lc = ct_sum(ct_square(yc), NULL, 0, false);
        assert_int_equal(ct_backward(lc, NULL, false, false), CT_OK);
        assert_close(ct_grad(w0), ge);
    }
    /* eval + no grad: another variant, same values */
    ct_module_eval(m);
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *yi = ct_module_forward(m, &x, 1);
    ct_set_grad_enabled(prev);
    assert_close(yi, ye);
    char *ex = ct_compile_explain(c);
    if (ct_compiled_stats(c).eager_calls) fail_msg("%s", ex);
    free(ex);
    assert_true(ct_compiled_stats(c).variants >= 2);
    ct_module_release(m);
    for (int i = 0; i < 3; i++) ct_module_release(mods[i]);
    END;
}

/* training through the joint graph: w and b require grad; the pointwise
 * chain and its gradient fuse in the forward and the backward halves; the
 * gradients (through ct_backward, as usual) equal eager's */
static ct_status f_train(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    ct_tensor **wb = ctx;
    ct_tensor *h = ct_add(ct_mul(in[0], wb[0]), wb[1]);
    out[0] = ct_mul_scalar(ct_tanh(ct_gelu(h, CT_GELU_NONE)), 0.5);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_joint(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(21);
    ct_tensor *wb[2] = {ct_randn(CT_SHAPE(24), CT_F32), ct_randn(CT_SHAPE(24), CT_F32)};
    for (int k = 0; k < 2; k++) assert_int_equal(ct_set_requires_grad(wb[k], true), CT_OK);
    ct_tensor *x = ct_randn(CT_SHAPE(16, 24), CT_F32);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_tensor *in[1] = {x}, *y = NULL;
    /* eager reference */
    assert_int_equal(f_train(in, 1, &y, 1, wb), CT_OK);
    assert_int_equal(ct_backward(ct_sum(ct_square(y), NULL, 0, false), NULL, false, false), CT_OK);
    ct_tensor *ge[3] = {ct_clone(ct_grad(x)), ct_clone(ct_grad(wb[0])), ct_clone(ct_grad(wb[1]))};
    ct_compiled *c = ct_compile(f_train, wb, NULL);
    for (int rep = 0; rep < 2; rep++) {
        ct_zero_grad(x), ct_zero_grad(wb[0]), ct_zero_grad(wb[1]);
        ct_tensor *yc = NULL;
        assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
        assert_close(yc, y);
        if (!strstr(ct_grad_fn_name(yc) ? ct_grad_fn_name(yc) : "", "CompiledFunction")) { char *e = ct_compile_explain(c); fail_msg("grad_fn %s\n%s", ct_grad_fn_name(yc), e); }
        assert_int_equal(ct_backward(ct_sum(ct_square(yc), NULL, 0, false), NULL, false, false), CT_OK);
        assert_close(ct_grad(x), ge[0]);
        assert_close(ct_grad(wb[0]), ge[1]);
        assert_close(ct_grad(wb[1]), ge[2]);
    }
    char *ex = ct_compile_explain(c);
    assert_non_null(strstr(ex, "joint forward + backward graph"));
    if (!strstr(ex, "forward plan: 1 steps: 0 op calls, 1 fused kernels")) fail_msg("%s", ex);
    assert_null(strstr(ex, "backward plan: 0 steps"));
    free(ex);
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.eager_calls, 0);
    assert_int_equal(s.graph_breaks, 0);
    ct_compiled_free(c);
    END;
}

/* The compiled backward frees what the forward saved as it goes, as the
 * engine does node by node for eager: the saved tensors are the ctx's alone
 * (not also the caller's scope), a backward without retain_graph takes them
 * (ct__exec_donated), and a value read only through its views, or made by
 * an op call, goes after its last step rather than when the run ends.  A
 * chain of 8 layers whose activations (2 MiB each) dwarf its weights
 * (256 KiB): the backward's peak over its start stays near eager's, where
 * holding everything to the end costs the saved activations again.  With
 * retain_graph the saved tensors stay: a second backward gives the same
 * gradients, and a third (after one without retain) is refused. */
int64_t ct__alloc_live_bytes(void);
int64_t ct__alloc_peak_bytes(void);
void ct__alloc_reset_peak(void);
#define MEM_LAYERS 8
static ct_status f_mem(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    ct_tensor **w = ctx;
    ct_scope sc = ct_scope_begin(); /* a module's forward: intermediates go with the graph */
    ct_tensor *h = in[0];
    for (int i = 0; i < MEM_LAYERS; i++) {
        h = ct_relu(ct_matmul(h, w[i]));
        h = ct_reshape(ct_transpose(ct_reshape(h, CT_SHAPE(16, 128, 256)), 0, 1), CT_SHAPE(2048, 256));
    }
    out[0] = ct_keep(h);
    ct_scope_end(sc);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* the backward's peak live bytes over its start; the gradients into g */
static int64_t mem_backward(ct_tensor *y, bool retain, ct_tensor **w, ct_tensor **g) {
    ct_tensor *loss = ct_sum(ct_square(y), NULL, 0, false);
    assert_non_null(loss);
    int64_t before = ct__alloc_live_bytes();
    ct__alloc_reset_peak();
    assert_int_equal(ct_backward(loss, NULL, retain, false), CT_OK);
    int64_t peak = ct__alloc_peak_bytes() - before;
    for (int i = 0; i < MEM_LAYERS; i++) g[i] = ct_clone(ct_grad(w[i]));
    return peak;
}

static void t_train_memory(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(29);
    ct_tensor *w[MEM_LAYERS], *ge[MEM_LAYERS], *gc[MEM_LAYERS], *g2[MEM_LAYERS];
    for (int i = 0; i < MEM_LAYERS; i++) {
        w[i] = ct_mul_scalar(ct_randn(CT_SHAPE(256, 256), CT_F32), 0.07);
        assert_int_equal(ct_set_requires_grad(w[i], true), CT_OK);
    }
    ct_tensor *x = ct_randn(CT_SHAPE(2048, 256), CT_F32), *in[1] = {x}, *y = NULL;
    int64_t pe = -1, pc = -1;
    for (int rep = 0; rep < 2; rep++) { /* the second of each: the allocator warm */
        for (int i = 0; i < MEM_LAYERS; i++) ct_zero_grad(w[i]);
        ct_scope sc = ct_scope_begin();
        assert_int_equal(f_mem(in, 1, &y, 1, w), CT_OK);
        pe = mem_backward(y, false, w, ge);
        for (int i = 0; i < MEM_LAYERS; i++) ge[i] = ct_keep(ge[i]);
        ct_scope_end(sc);
    }
    ct_compiled *c = ct_compile(f_mem, w, NULL);
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < MEM_LAYERS; i++) ct_zero_grad(w[i]);
        ct_scope sc = ct_scope_begin();
        ct_tensor *yc = NULL;
        assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
        if (!strstr(ct_grad_fn_name(yc) ? ct_grad_fn_name(yc) : "", "CompiledFunction")) fail_msg("not compiled");
        pc = mem_backward(yc, false, w, gc);
        for (int i = 0; i < MEM_LAYERS; i++) {
            assert_close(gc[i], ge[i]);
            gc[i] = ct_keep(gc[i]);
        }
        ct_scope_end(sc);
    }
    /* 8 saved activations of 2 MiB (and their relu outputs) held to the
     * end would add >= 16 MiB over eager's peak */
    if (pc > pe + pe / 4 + (2 << 20))
        fail_msg("compiled backward peak %lld KiB over its start, eager's %lld KiB", (long long)(pc >> 10),
                 (long long)(pe >> 10));
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    /* retain_graph: the saved tensors stay for a second backward */
    for (int i = 0; i < MEM_LAYERS; i++) ct_zero_grad(w[i]);
    ct_tensor *yc = NULL;
    assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
    (void)mem_backward(yc, true, w, gc);
    for (int i = 0; i < MEM_LAYERS; i++) ct_zero_grad(w[i]);
    (void)mem_backward(yc, false, w, g2);
    for (int i = 0; i < MEM_LAYERS; i++) assert_close(g2[i], gc[i]);
    ct_tensor *loss = ct_sum(ct_square(yc), NULL, 0, false);
    assert_int_not_equal(ct_backward(loss, NULL, false, false), CT_OK);
    if (!strstr(ct_last_error(), "second time")) fail_msg("%s", ct_last_error());
    ct_clear_error();
    ct_compiled_free(c);
    END;
}

/* The training tests' operands: a weight w (the function's ctx; its grad
 * too when w_grad) and an input x requiring grad, seeded. */
static void train_operands(uint64_t seed, const int64_t *ws, int wn, const int64_t *xs, int xn, ct_dtype dt,
                           bool w_grad, ct_tensor **w, ct_tensor **x) {
    ct_manual_seed(seed);
    *w = ct_randn(ws, wn, dt);
    *x = ct_randn(xs, xn, dt);
    assert_non_null(*w);
    assert_non_null(*x);
    if (w_grad) assert_int_equal(ct_set_requires_grad(*w, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(*x, true), CT_OK);
}

/* One call of f: through c when side is 1, else eagerly. */
static void call_side(ct_compiled *c, ct_fn f, void *ctx, int side, ct_tensor *const *in, int nin, ct_tensor **out,
                      int nout) {
    if (side) assert_int_equal(ct_compiled_call(c, in, nin, out, nout), CT_OK);
    else assert_int_equal(f(in, nin, out, nout, ctx), CT_OK);
}

/* A value a kernel stores and a later loop of the same kernel reads again
 * (codegen.c: read back, not computed again; fuzz seed 23316): the
 * forward kernel stores m = minimum(log(|x|+1), x) for the backward and
 * reduces it to its row max after the softmax's loops.  Computed again
 * there, m could differ in the last bit (one loop vectorized through
 * libmvec's logf, the other not), and amax's backward found no element
 * equal to the max: count 0, NaN and wrong gradients. */
static ct_status f_stored_again(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *x1 = ct_narrow(in[0], 1, 11, 16);
    ct_tensor *e = ct_to_dtype(ct_exp(x1), CT_F64);
    out[2] = ct_softmax(e, 1);
    ct_tensor *m = ct_minimum(ct_log(ct_add_scalar(ct_abs(x1), 1.0)), x1);
    out[0] = ct_amax(m, (int64_t[]){1}, 1, false);
    out[1] = ct_neg(in[0]);
    return out[0] && out[1] && out[2] ? CT_OK : ct_last_error_code();
}

static void t_train_stored_again(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(23316);
    ct_tensor *x = ct_add_scalar(ct_mul_scalar(ct_rand(CT_SHAPE(9, 35), CT_F32), 8.0), -4.0);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_compiled *c = ct_compile(f_stored_again, NULL, NULL);
    ct_tensor *g[2];
    for (int call = 0; call < 3; call++) {
        int side = call > 0; /* eager, then two compiled calls */
        ct_zero_grad(x);
        ct_tensor *o[3] = {NULL, NULL, NULL};
        call_side(c, f_stored_again, NULL, side, &x, 1, o, 3);
        ct_tensor *loss = NULL;
        for (int k = 0; k < 3; k++) {
            ct_tensor *t = ct_sum(ct_to_dtype(o[k], CT_F64), NULL, 0, false);
            loss = loss ? ct_add(loss, t) : t;
        }
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        g[side] = ct_clone(ct_grad(x));
        if (side) assert_close(g[1], g[0]);
    }
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* Recomputation in the backward (compile.c pick_recompute): a = x * w and
 * b = sin(a) are read by the backward only in elementwise gradients (cos(a)
 * for sin, b for b * b), and x and w are at hand there anyway, so the
 * forward saves neither: after the compiled forward only its output is
 * new memory, where eager's autograd holds a and b (2 x 2 MiB); the
 * gradients equal eager's. */
static ct_status f_recompute(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    ct_tensor *b = ct_sin(ct_mul(in[0], (ct_tensor *)ctx));
    out[0] = ct_sum(ct_mul(b, b), (int64_t[]){1}, 1, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_recompute(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *w, *x;
    train_operands(37, CT_SHAPE(1024), CT_SHAPE(512, 1024), CT_F32, true, &w, &x);
    ct_tensor *in[1] = {x}, *y = NULL, *ge[2], *gc[2];
    int64_t held[2] = {0, 0};
    ct_compiled *c = ct_compile(f_recompute, w, NULL);
    for (int side = 0; side < 2; side++)
        for (int rep = 0; rep < 2; rep++) { /* the second of each: the allocator warm */
            ct_zero_grad(x), ct_zero_grad(w);
            ct_scope sc = ct_scope_begin();
            int64_t before = ct__alloc_live_bytes();
            call_side(c, f_recompute, w, side, in, 1, &y, 1);
            held[side] = ct__alloc_live_bytes() - before;
            if (side && !strstr(ct_grad_fn_name(y) ? ct_grad_fn_name(y) : "", "CompiledFunction"))
                fail_msg("not compiled");
            assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
            ct_tensor **g = side ? gc : ge;
            g[0] = ct_keep(ct_clone(ct_grad(x)));
            g[1] = ct_keep(ct_clone(ct_grad(w)));
            ct_scope_end(sc); /* ct_keep moved g[] to BEGIN's scope */
        }
    assert_close(gc[0], ge[0]);
    assert_close(gc[1], ge[1]);
    char *ex = ct_compile_explain(c);
    assert_non_null(ex);
    if (!strstr(ex, "which recomputes 2")) fail_msg("%s", ex);
    free(ex);
    /* eager: a and b saved (4 MiB); compiled: the output (2 KiB) and small change */
    if (held[0] < (4 << 20) || held[1] > (1 << 20))
        fail_msg("held after the forward: eager %lld KiB, compiled %lld KiB", (long long)(held[0] >> 10),
                 (long long)(held[1] >> 10));
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* An elementwise node whose output has two dims where its group's domain
 * has one: with x [n], a = tanh(x.unsqueeze(1)) ([n, 1]) and b =
 * sigmoid(x) ([n]) share the domain [n]; c = b * a is [n, n].  Both of
 * c's dims mapped onto the domain's one dim, so the kernel looped over n
 * and wrote c's diagonal only (test_compile_fuzz seeds 9182, 9365); such
 * a node now starts its own group. */
static ct_status f_outer(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *a = ct_tanh(ct_unsqueeze(in[0], 1)), *b = ct_sigmoid(in[0]);
    out[0] = ct_mul(b, a);
    out[1] = ct_mul(a, a);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static void t_outer_product_group(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(47);
    ct_tensor *in[1] = {ct_randn(CT_SHAPE(32), CT_F32)};
    ct_compiled *c = ct_compile(f_outer, NULL, NULL);
    for (int i = 0; i < 2; i++) check_same(c, f_outer, in, 1, 2);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* The gradient an output receives is whatever the ops after the function
 * made: a sum's backward gives expanded ones (stride 0), a transpose's a
 * transposed tensor.  The backward graph was traced with contiguous
 * gradients, and layer_norm_bwd reads its gradient as dense: with the
 * expanded ones it read past them (values like 1e247, found by
 * test_compile_fuzz's training stage).  jbwd copies such gradients first. */
static ct_status f_ln(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    out[0] = ct_layer_norm(ct_mul(in[0], (ct_tensor *)ctx), (int64_t[]){8}, 1, NULL, NULL, 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_strided_grad(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *w, *x;
    train_operands(43, CT_SHAPE(8), CT_SHAPE(6, 8), CT_F64, false, &w, &x);
    ct_tensor *wt = ct_randn(CT_SHAPE(8, 6), CT_F64);
    ct_tensor *in[1] = {x}, *o = NULL, *g[2][2] = {{0}};
    ct_compiled *c = ct_compile(f_ln, w, NULL);
    for (int side = 0; side < 2; side++)
        for (int how = 0; how < 2; how++) {
            ct_zero_grad(x);
            call_side(c, f_ln, w, side, in, 1, &o, 1);
            /* how 0: sum (expanded ones); 1: through a transpose (a transposed gradient) */
            ct_tensor *loss = how ? ct_sum(ct_mul(ct_transpose(o, 0, 1), wt), NULL, 0, false)
                                  : ct_sum(o, NULL, 0, false);
            assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
            g[side][how] = ct_clone(ct_grad(x));
        }
    assert_close(g[1][0], g[0][0]);
    assert_close(g[1][1], g[0][1]);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* A training function returning one tensor twice: the compiled call's
 * autograd node becomes that tensor's grad_fn once per slot (the second
 * time it replaced itself, and freed itself first: a use after free under
 * ASan, found by test_compile_fuzz's training stage); the gradient equals
 * eager's. */
static ct_status f_dup_out(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    out[0] = out[1] = ct_tanh(ct_mul(in[0], (ct_tensor *)ctx));
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_dup_output(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *w, *x;
    train_operands(41, CT_SHAPE(8), CT_SHAPE(4, 8), CT_F32, false, &w, &x);
    ct_tensor *in[1] = {x}, *o[2] = {0}, *g[2] = {0};
    ct_compiled *c = ct_compile(f_dup_out, w, NULL);
    for (int side = 0; side < 2; side++) {
        ct_zero_grad(x);
        call_side(c, f_dup_out, w, side, in, 1, o, 2);
        assert_ptr_equal(o[0], o[1]);
        ct_tensor *loss = ct_add(ct_sum(o[0], NULL, 0, false), ct_sum(ct_square(o[1]), NULL, 0, false));
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        g[side] = ct_clone(ct_grad(x));
    }
    assert_close(g[1], g[0]);
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* Training variants probe whole steps (include/ctorch/compile.h): calls 3-12
 * alternate compiled / eager and the period from each call to the next is
 * timed -- here on a test clock the loop advances: 10 ms of "rest of the
 * step", plus a cost for the side the call ran (eager: f_probe ran on real
 * tensors).  When eager's steps are shorter the variant runs eagerly from
 * call 13 on, else compiled; the gradients equal eager's on every call. */
static double g_clock_ms;
static int g_probe_eager; /* f_probe's runs on real tensors (not the trace) */
static double test_clock(void) { return g_clock_ms; }
static ct_status f_probe(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    if (ct_get_device(in[0]) != CT_META) g_probe_eager++;
    return f_train(in, nin, out, nout, ctx);
}

static void probe_case(double eager_cost, double compiled_cost, unsigned slow_calls, bool want_eager) {
    BEGIN;
    ct_manual_seed(23);
    ct_tensor *wb[2] = {ct_randn(CT_SHAPE(24), CT_F32), ct_randn(CT_SHAPE(24), CT_F32)};
    for (int k = 0; k < 2; k++) assert_int_equal(ct_set_requires_grad(wb[k], true), CT_OK);
    ct_tensor *x = ct_randn(CT_SHAPE(16, 24), CT_F32), *in[1] = {x}, *y = NULL;
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(f_train(in, 1, &y, 1, wb), CT_OK);
    assert_int_equal(ct_backward(ct_sum(ct_square(y), NULL, 0, false), NULL, false, false), CT_OK);
    ct_tensor *ge[3] = {ct_clone(ct_grad(x)), ct_clone(ct_grad(wb[0])), ct_clone(ct_grad(wb[1]))};
    ct__compile_clock = test_clock;
    g_clock_ms = 1000;
    ct_compiled *c = ct_compile(f_probe, wb, NULL);
    int sides[16];
    for (int call = 1; call <= 16; call++) {
        ct_zero_grad(x), ct_zero_grad(wb[0]), ct_zero_grad(wb[1]);
        int before = g_probe_eager;
        ct_tensor *yc = NULL;
        assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
        assert_int_equal(ct_backward(ct_sum(ct_square(yc), NULL, 0, false), NULL, false, false), CT_OK);
        assert_close(yc, y);
        assert_close(ct_grad(x), ge[0]);
        assert_close(ct_grad(wb[0]), ge[1]);
        assert_close(ct_grad(wb[1]), ge[2]);
        sides[call - 1] = g_probe_eager > before;
        double period = 10 + (sides[call - 1] ? eager_cost : compiled_cost);
        g_clock_ms += slow_calls >> call & 1 ? 1.7 * period : period; /* the host's slow mode */
    }
    ct__compile_clock = NULL;
    /* calls 1-2 compiled, 3-12 alternating from compiled, then the winner */
    for (int call = 1; call <= 16; call++) {
        int want = call <= 2 ? 0 : call <= 12 ? (call - 3) % 2 : want_eager;
        if (sides[call - 1] != want) fail_msg("call %d ran %s", call, sides[call - 1] ? "eagerly" : "compiled");
    }
    char *ex = ct_compile_explain(c);
    if (want_eager != (strstr(ex, "eager training steps were faster") != NULL)) fail_msg("%s", ex);
    if (!want_eager && !strstr(ex, "runs compiled: training steps timed: median")) fail_msg("%s", ex);
    free(ex);
    /* the probing calls are no fallback; the calls after the decision are */
    assert_int_equal(ct_compiled_stats(c).eager_calls, want_eager ? 4 : 0);
    ct_compiled_free(c);
    END;
}

static void t_train_probe(void **st) {
    (void)st;
    g_probe_eager = 0;
    probe_case(5, 0, 0, false); /* eager's steps longer: compiled stays */
    probe_case(0, 5, 0, true);  /* the compiled steps longer: eager from call 13 */
    probe_case(0, 0.1, 0, false); /* compiled 1% slower, within 2%: compiled stays */
    /* compiled 3% faster, the machine 1.7x slower over calls 5-9: the
     * medians (17 compiled, 10.3 eager) would pick eager; each pair of
     * neighbours but one has compiled faster, so compiled stays */
    probe_case(0.3, 0, 0x3e0u, false);
    probe_case(0, 0.5, 0x3e0u, true); /* compiled 5% slower through the same shift: eager */
}

/* Training conv -> relu -> max pool: the joint graph's relu gradient runs
 * before the pool's scatter, on the pooled size, and the bias gradient
 * sums the pooled gradient (ct__pass_pool_grad); the gradients equal
 * eager's -- with windows of only non-positive values (relu's zeros: ties,
 * whose gradient is 0 either way), overlapping windows (3x3 stride 2,
 * padded: a position can be the argmax of several windows) and plain 2x2
 * ones. */
typedef struct { ct_tensor *w, *b; int64_t k, s, p; } pool_ctx;
static ct_status f_conv_pool(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    pool_ctx *pc = ctx;
    const int64_t p1[2] = {1, 1}, k[2] = {pc->k, pc->k}, s[2] = {pc->s, pc->s}, p[2] = {pc->p, pc->p};
    out[0] = ct_max_pool2d(ct_relu(ct_conv2d(in[0], pc->w, pc->b, NULL, p1, NULL, 1)), k, s, p, NULL, false, NULL);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void pool_grad_case(int64_t k, int64_t s, int64_t p) {
    BEGIN;
    ct_manual_seed(31);
    pool_ctx pc = {ct_mul_scalar(ct_randn(CT_SHAPE(6, 3, 3, 3), CT_F32), 0.3),
                   ct_sub_scalar(ct_rand(CT_SHAPE(6), CT_F32), 0.9), k, s, p};
    assert_int_equal(ct_set_requires_grad(pc.w, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(pc.b, true), CT_OK);
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3, 10, 10), CT_F32);
    /* a quarter of the image negative: whole windows of zeros after the relu */
    float *xp = ct_data_ptr(x);
    for (int64_t i = 0; i < ct_numel(x); i++)
        if (i % 100 < 25) xp[i] = -1.0f;
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_tensor *in[1] = {x}, *y = NULL;
    assert_int_equal(f_conv_pool(in, 1, &y, 1, &pc), CT_OK);
    ct_tensor *gy = ct_randn_like(y);
    assert_int_equal(ct_backward(y, gy, false, false), CT_OK);
    ct_tensor *ge[3] = {ct_clone(ct_grad(x)), ct_clone(ct_grad(pc.w)), ct_clone(ct_grad(pc.b))};
    /* the pass on the joint graph: the relu gradient moved, the bias's sum rewritten */
    ct_graph g;
    ct__graph_init(&g);
    assert_int_equal(ct__trace_joint(f_conv_pool, &pc, in, 1, 1, true, &g), CT_OK);
    assert_true(g.joint);
    int moved = 0;
    assert_int_equal(ct__pass_pool_grad(&g, &moved), CT_OK);
    assert_int_equal(moved, 2);
    bool pooled_grad = false;
    for (int i = g.nfwd_nodes; i < g.nn; i++)
        if (!g.n[i].dead && g.n[i].op == CT_OP_ew_grad)
            pooled_grad = g.v[g.n[i].out[0]].meta.sizes[2] == y->sizes[2];
    assert_true(pooled_grad);
    ct__graph_free(&g);
    ct_compiled *c = ct_compile(f_conv_pool, &pc, NULL);
    for (int rep = 0; rep < 2; rep++) {
        ct_zero_grad(x), ct_zero_grad(pc.w), ct_zero_grad(pc.b);
        ct_tensor *yc = NULL;
        assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
        assert_non_null(strstr(ct_grad_fn_name(yc) ? ct_grad_fn_name(yc) : "", "CompiledFunction"));
        assert_close(yc, y);
        assert_int_equal(ct_backward(yc, gy, false, false), CT_OK);
        assert_close(ct_grad(x), ge[0]);
        assert_close(ct_grad(pc.w), ge[1]);
        assert_close(ct_grad(pc.b), ge[2]);
    }
    assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
    ct_compiled_free(c);
    END;
}

static void t_train_pool_grad(void **st) {
    (void)st;
    pool_grad_case(2, 2, 0);
    pool_grad_case(3, 2, 1);
}

/* ct_detach inside a traced training function: no graph break, and the
 * detached operand stays cut from autograd -- d/dx sum(x * detach(x) * w)
 * is detach(x) * w, not 2 x w -- in the compiled joint graph as eagerly */
static ct_status f_detach(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    out[0] = ct_mul(ct_mul(in[0], ct_detach(in[0])), (ct_tensor *)ctx);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_detach(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(22);
    ct_tensor *w = ct_randn(CT_SHAPE(8, 6), CT_F32), *x = ct_randn(CT_SHAPE(8, 6), CT_F32);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    ct_compiled *c = ct_compile(f_detach, w, NULL);
    for (int rep = 0; rep < 2; rep++) {
        ct_zero_grad(x), ct_zero_grad(w);
        ct_tensor *y = NULL;
        assert_int_equal(ct_compiled_call(c, &x, 1, &y, 1), CT_OK);
        assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
        assert_close(ct_grad(x), ct_mul(ct_detach(x), ct_detach(w)));
        assert_close(ct_grad(w), ct_mul(ct_detach(x), ct_detach(x)));
    }
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.graph_breaks, 0);
    assert_int_equal(s.eager_calls, 0);
    ct_compiled_free(c);
    END;
}

/* training: each activation's gradient (the fused ew_grad op eager runs)
 * fuses with what reads it in the backward half -- here the weight
 * gradient's reduction over the batch -- and the gradients equal eager's */
static int g_act;
static ct_status f_act(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    ct_tensor **wb = ctx;
    ct_tensor *h = ct_add(ct_mul(in[0], wb[0]), wb[1]), *a;
    switch (g_act) {
    case 0: a = ct_relu(h); break;
    case 1: a = ct_sigmoid(h); break;
    case 2: a = ct_tanh(h); break;
    case 3: a = ct_gelu(h, CT_GELU_NONE); break;
    case 4: a = ct_gelu(h, CT_GELU_TANH); break;
    default: a = ct_silu(h); break;
    }
    out[0] = ct_mul(a, a);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_train_act_grad(void **st) {
    (void)st;
    BEGIN;
    for (g_act = 0; g_act < 6; g_act++) {
        ct_manual_seed(30 + g_act);
        ct_tensor *wb[2] = {ct_randn(CT_SHAPE(40), CT_F32), ct_randn(CT_SHAPE(40), CT_F32)};
        for (int k = 0; k < 2; k++) assert_int_equal(ct_set_requires_grad(wb[k], true), CT_OK);
        /* zeros in x: relu's gradient at its kink (t == 0: gradient 0) */
        ct_tensor *x = ct_randn(CT_SHAPE(32, 40), CT_F32);
        bool g0 = ct_set_grad_enabled(false);
        assert_non_null(ct_mul_(x, ct_gt_scalar(ct_abs(x), 0.3)));
        ct_set_grad_enabled(g0);
        ct_tensor *in[1] = {x}, *y = NULL;
        assert_int_equal(f_act(in, 1, &y, 1, wb), CT_OK);
        ct_tensor *gy = ct_randn(CT_SHAPE(32, 40), CT_F32);
        assert_int_equal(ct_backward(y, gy, false, false), CT_OK);
        ct_tensor *ge[2] = {ct_clone(ct_grad(wb[0])), ct_clone(ct_grad(wb[1]))};
        ct_compiled *c = ct_compile(f_act, wb, NULL);
        ct_zero_grad(wb[0]), ct_zero_grad(wb[1]);
        ct_tensor *yc = NULL;
        assert_int_equal(ct_compiled_call(c, in, 1, &yc, 1), CT_OK);
        assert_close(yc, y);
        assert_int_equal(ct_backward(yc, gy, false, false), CT_OK);
        assert_close(ct_grad(wb[0]), ge[0]);
        assert_close(ct_grad(wb[1]), ge[1]);
        char *ex = ct_compile_explain(c);
        assert_non_null(ex);
        const char *bp = strstr(ex, "backward plan:");
        if (!bp || !strstr(bp, "ew_grad")) fail_msg("activation %d:\n%s", g_act, ex);
        free(ex);
        ct_compiled_free(c);
    }
    END;
}

/* inference: conv -> batch norm (eval) -> relu folds into one conv with a
 * relu epilogue (the batch norm into its weights, the relu a oneDNN
 * post-op), conv -> relu_ (in place) fuses too; values equal eager's, and
 * follow changes of the running statistics (an in-place op) and of the
 * conv weights (a write through ct_data_ptr) */
static void t_conv_epilogue(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(8);
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1};
    ct_conv_opts pad = {.padding = p1};
    ct_module *mods[5] = {ct_conv2d_new(3, 8, k3, &pad), ct_batch_norm2d_new(8, 1e-5, 0.1, true, true),
                          ct_relu_new(), ct_conv2d_new(8, 4, k3, NULL), ct_relu_new()};
    ct_module *m = ct_sequential_new(mods, 5);
    assert_non_null(m);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 12, 12), CT_F32);
    /* running statistics that are not the initial 0 / 1, and an affine part */
    for (int i = 0; i < 3; i++) assert_non_null(ct_module_forward(m, &x, 1));
    ct_tensor *bn_w = ct_module_param(mods[1], 0), *bn_b = ct_module_param(mods[1], 1);
    bool g0 = ct_set_grad_enabled(false);
    assert_non_null(ct_copy_(bn_w, ct_add_scalar(ct_rand(CT_SHAPE(8), CT_F32), 0.5)));
    assert_non_null(ct_copy_(bn_b, ct_randn(CT_SHAPE(8), CT_F32)));
    ct_set_grad_enabled(g0);
    ct_module_eval(m);
    assert_int_equal(ct_module_compile(m, NULL), CT_OK);
    ct_compiled *c = ct__module_compiled(m);
    bool prev = ct_set_grad_enabled(false);
    for (int call = 0; call < 3; call++) {
        if (call == 1) { /* the running variance changes in place */
            const char *names[8];
            ct_tensor *bufs[8];
            int nb = ct_module_named_buffers(mods[1], names, bufs, 8);
            int iv = -1;
            for (int k = 0; k < nb; k++)
                if (!strcmp(names[k], "running_var")) iv = k;
            assert_true(iv >= 0);
            assert_non_null(ct_mul_scalar_(bufs[iv], 3.0));
        }
        if (call == 2) { /* the first conv's weights, through a raw pointer */
            ct_tensor *w = ct_module_param(mods[0], 0);
            float *p = ct_data_ptr(w);
            for (int64_t k = 0; k < ct_numel(w); k++) p[k] *= -0.5f;
        }
        ct_tensor *yc = ct_module_forward(m, &x, 1);
        ct_tensor *ye = x; /* eager: the children one by one (they are not compiled) */
        for (int k = 0; k < 5; k++) ye = ct_module_forward(mods[k], &ye, 1);
        assert_close(yc, ye);
    }
    ct_set_grad_enabled(prev);
    char *ex = ct_compile_explain(c);
    assert_non_null(ex);
    if (strstr(ex, "batch_norm_eval") || !strstr(ex, "post_relu") || strstr(ex, "relu(")) fail_msg("%s", ex);
    free(ex);
    ct_module_release(m);
    for (int i = 0; i < 5; i++) ct_module_release(mods[i]);
    END;
}

/* Parameters folded in inference graphs (passes.c, fold_params) and the
 * fused rows written over their dying operand (exec.c): a linear over the
 * concatenation of two weights and of two biases (BERT's packed q/k/v),
 * then bias + gelu (ct__bias_act, as eager's fast path calls it).  The
 * cats run once at compile time; a parameter changed in place, or through
 * ct_data_ptr, remakes them at the next call.  f_fold_keep also returns
 * the linear's result, which bias_act then must not overwrite. */
static ct_status fold_body(ct_tensor *const *in, ct_tensor **out, void *ctx, bool keep) {
    ct_tensor *const *P = ctx;
    ct_tensor *w = ct_cat((ct_tensor *[]){P[0], P[1]}, 2, 0), *b = ct_cat((ct_tensor *[]){P[2], P[3]}, 2, 0);
    ct_tensor *h = ct_contiguous(ct_linear(in[0], w, b));
    out[0] = h ? ct__bias_act(h, P[4], CT_EWA_GELU, true, NULL) : NULL;
    if (keep) out[1] = h;
    return out[0] && (!keep || out[1]) ? CT_OK : ct_last_error_code();
}
static ct_status f_fold(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    return fold_body(in, out, ctx, false);
}
static ct_status f_fold_keep(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    return fold_body(in, out, ctx, true);
}

static void t_fold_params(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(21);
    ct_tensor *P[5] = {ct_randn(CT_SHAPE(5, 7), CT_F32), ct_randn(CT_SHAPE(3, 7), CT_F32), ct_randn(CT_SHAPE(5), CT_F32),
                       ct_randn(CT_SHAPE(3), CT_F32), ct_randn(CT_SHAPE(8), CT_F32)};
    ct_tensor *x = ct_randn(CT_SHAPE(6, 7), CT_F32);
    bool prev = ct_set_grad_enabled(false);
    for (int keep = 0; keep < 2; keep++) {
        ct_fn fn = keep ? f_fold_keep : f_fold;
        int nout = 1 + keep;
        ct_compiled *c = ct_compile(fn, P, NULL);
        for (int call = 0; call < 4; call++) {
            if (call == 1) assert_non_null(ct_mul_scalar_(P[0], -2.0)); /* in place: version */
            if (call == 2) {                                             /* a raw pointer: exposed */
                float *q = ct_data_ptr(P[3]);
                for (int k = 0; k < 3; k++) q[k] += 1.5f;
            }
            ct_tensor *o[2] = {NULL, NULL}, *e[2] = {NULL, NULL};
            assert_int_equal(ct_compiled_call(c, &x, 1, o, nout), CT_OK);
            assert_int_equal(fn(&x, 1, e, nout, P), CT_OK);
            for (int k = 0; k < nout; k++) assert_close(o[k], e[k]);
        }
        char *ex = ct_compile_explain(c);
        assert_non_null(ex);
        if (!strstr(ex, "2 nodes of parameters folded") || strstr(ex, "cat(")) fail_msg("%s", ex);
        free(ex);
        assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
        ct_compiled_free(c);
    }
    ct_set_grad_enabled(prev);
    END;
}

/* Channel-blocked activations between convolutions (passes.c, conv_layout):
 * a residual block's values stay [N, C/8, H, W, 8] between the oneDNN
 * convolutions; what leaves the chain is NCHW.  f_block returns a conv
 * output (NCHW: a graph output); f_block_out also returns the block's
 * inner value e, which makes e and every value of the same elementwise
 * chain NCHW (the fixed point).  Both equal eager; the oneDNN-less path of
 * a blocked convolution (deterministic algorithms on after compiling:
 * oneDNN is not used then) too. */
typedef struct { ct_tensor *w1, *b1, *w2, *b2, *wd, *w3, *b3, *w4; } blk_w;
static ct_tensor *cv(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t pad) {
    const int64_t p[2] = {pad, pad};
    return ct_conv2d(x, w, b, NULL, p, NULL, 1);
}
static ct_status f_block2(ct_tensor *const *in, ct_tensor **out, int nout, const blk_w *W) {
    ct_tensor *x = in[0];
    ct_tensor *a = ct_relu(cv(x, W->w1, W->b1, 1));
    ct_tensor *b = cv(a, W->w2, W->b2, 1);
    ct_tensor *r = ct_relu(ct_add(b, cv(x, W->wd, NULL, 0)));
    ct_tensor *e = ct_add(ct_relu(cv(r, W->w3, W->b3, 0)), r);
    out[0] = cv(e, W->w4, NULL, 1);
    if (nout > 1) out[1] = e;
    for (int k = 0; k < nout; k++)
        if (!out[k]) return ct_last_error_code();
    return CT_OK;
}
static ct_status f_block(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin;
    return f_block2(in, out, nout, ctx);
}

static void t_conv_layout(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(12);
    blk_w W = {ct_mul_scalar(ct_randn(CT_SHAPE(16, 8, 3, 3), CT_F32), 0.2), ct_randn(CT_SHAPE(16), CT_F32),
               ct_mul_scalar(ct_randn(CT_SHAPE(16, 16, 3, 3), CT_F32), 0.1), ct_randn(CT_SHAPE(16), CT_F32),
               ct_mul_scalar(ct_randn(CT_SHAPE(16, 8, 1, 1), CT_F32), 0.3),
               ct_mul_scalar(ct_randn(CT_SHAPE(16, 16, 1, 1), CT_F32), 0.2), ct_randn(CT_SHAPE(16), CT_F32),
               ct_mul_scalar(ct_randn(CT_SHAPE(8, 16, 3, 3), CT_F32), 0.1)};
    bool prev = ct_set_grad_enabled(false);
    bool dnnl = ct__conv_blocked_pays != NULL;
    for (int nout = 1; nout <= 2; nout++) {
        ct_tensor *x = ct_randn(CT_SHAPE(1, 8, 10, 12), CT_F32);
        ct_compiled *c = ct_compile(f_block, &W, NULL);
        for (int call = 0; call < 3; call++) {
            if (call == 2) ct_use_deterministic_algorithms(true); /* the blocked convs without oneDNN */
            ct_tensor *o[2] = {0}, *e[2] = {0};
            assert_int_equal(ct_compiled_call(c, &x, 1, o, nout), CT_OK);
            assert_int_equal(f_block(&x, 1, e, nout, &W), CT_OK);
            for (int k = 0; k < nout; k++) {
                assert_int_equal(ct_ndim(o[k]), 4);
                assert_close(o[k], e[k]);
            }
        }
        ct_use_deterministic_algorithms(false);
        char *ex = ct_compile_explain(c);
        assert_non_null(ex);
        /* nout 1: every conv but the first reads blocked, every one but the
         * last writes blocked; nout 2: e, an output, is NCHW, so are the
         * operands of its add (r, conv3's result), of r's add (conv2's and
         * the downsample's results): only conv1 -> conv2 stays blocked */
        int b1 = count_str(ex, "blocked=1"), b2 = count_str(ex, "blocked=2"), b3 = count_str(ex, "blocked=3");
        if (!dnnl) {
            if (b1 + b2 + b3) fail_msg("blocked without oneDNN:\n%s", ex);
        } else if (nout == 1 ? (b1 != 1 || b2 != 2 || b3 != 2) : (b1 != 1 || b2 != 1 || b3 != 0)) {
            fail_msg("nout %d: blocked=1 x%d, =2 x%d, =3 x%d\n%s", nout, b1, b2, b3, ex);
        }
        free(ex);
        assert_int_equal(ct_compiled_stats(c).eager_calls, 0);
        ct_compiled_free(c);
    }
    ct_set_grad_enabled(prev);
    END;
}

/* no working C compiler: the graph runs op by op (a warning), same results */
static void t_no_compiler(void **st) {
    (void)st;
    BEGIN;
    char *saved = no_cc_begin();
    ct_compiled *c = ct_compile(f_chain, NULL, NULL);
    ct_tensor *in[2] = {ct_randn(CT_SHAPE(9, 11), CT_F32), ct_randn(CT_SHAPE(9, 11), CT_F32)};
    check_same(c, f_chain, in, 2, 2);
    ct_compile_stats s = ct_compiled_stats(c);
    assert_int_equal(s.kernels_built, 0);
    assert_int_equal(s.eager_calls, 0);
    ct_compiled_free(c);
    no_cc_end(saved);
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_fuses_and_caches), cmocka_unit_test(t_dynamic_auto),
        cmocka_unit_test(t_dynamic_false_and_guards), cmocka_unit_test(t_recompile_limit),
        cmocka_unit_test(t_graph_break), cmocka_unit_test(t_inplace), cmocka_unit_test(t_inplace_inputs),
        cmocka_unit_test(t_rows), cmocka_unit_test(t_team), cmocka_unit_test(t_empty_replay), cmocka_unit_test(t_errors),
        cmocka_unit_test(t_disable), cmocka_unit_test(t_random),
        cmocka_unit_test(t_attention_dropout), cmocka_unit_test(t_module), cmocka_unit_test(t_train_joint), cmocka_unit_test(t_train_memory), cmocka_unit_test(t_train_recompute), cmocka_unit_test(t_train_stored_again), cmocka_unit_test(t_train_dup_output), cmocka_unit_test(t_outer_product_group), cmocka_unit_test(t_train_strided_grad), cmocka_unit_test(t_train_probe), cmocka_unit_test(t_train_pool_grad), cmocka_unit_test(t_conv_epilogue), cmocka_unit_test(t_fold_params), cmocka_unit_test(t_conv_layout), cmocka_unit_test(t_train_act_grad), cmocka_unit_test(t_train_detach), cmocka_unit_test(t_no_compiler),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
