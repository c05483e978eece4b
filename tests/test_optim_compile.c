/* test_optim_compile.c -- ct_optim_compile (include/ctorch/compile.h): the
 * compiled step of every first-order optimizer against its eager step.
 *
 * Each case builds the same parameters twice (odd sizes, two ranks, a
 * second parameter group with its own options where the case says so),
 * steps one copy eagerly and the other compiled N times with the same
 * gradients, a learning-rate scheduler (or OneCycleLR, which also cycles
 * beta1 / momentum) changing the hyperparameters between steps, and one
 * parameter left without a gradient at step 3 (skipped, as eager skips it).
 * Parameters and every state tensor must be equal bit for bit (the compiled
 * update applies eager's ops to the same scalars), and the counters must
 * show two variants (all parameters; all but the one), each traced once,
 * whatever the step count and lr did.  Also: a new parameter group is a new
 * variant; kernels really run (the profiler sees them, the graph is fused
 * with the in-place writes in the kernels); no C compiler still gives the
 * eager numbers; LBFGS and disable step eagerly.  Private CT_CACHE_DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctorch/ctorch.h"

#include "compile_test_util.h"
#include "optim/optim_impl.h"

#define NSTEP 7 /* RAdam rectifies from step 6 */
#define NP 4
#define SKIP_P 3    /* the parameter without a gradient ... */
#define SKIP_STEP 3 /* ... at this step */

typedef ct_optimizer *(*mk_fn)(ct_tensor *const *p, int n);

typedef struct ocase {
    const char *name;
    mk_fn mk;
    int sched;        /* 0: LambdaLR, 1: OneCycleLR, 2: StepLR */
    bool group;       /* parameters 2.. in a second group with overrides */
    const char *gname[3];
    double gval[3];
    int ngh;
    ct_dtype dt;
    bool mixed;       /* parameters of three ranks */
} ocase;

/* odd sizes; the last misses its gradient at SKIP_STEP.  Mixed: three ranks
 * (the last a one-element parameter: a kernel without loops), else all 2-D
 * (one kernel source per variant: the C compiler runs less) */
static const int64_t g_shapes_mixed[NP][2] = {{17, 9}, {31, 0}, {5, 7}, {1, 0}};
static const int64_t g_shapes_2d[NP][2] = {{17, 9}, {3, 31}, {5, 7}, {2, 3}};

/* a leaf requiring grad with base's values (a new reference) */
static ct_tensor *leaf(ct_tensor *base) {
    ct_tensor *c = ct_retain(ct_clone(base));
    assert_non_null(c);
    assert_int_equal(ct_set_requires_grad(c, true), CT_OK);
    return c;
}

static ct_tensor *mkparam(int i, ct_dtype dt) {
    const int64_t *s = g_shapes_mixed[i];
    return leaf(ct_to_dtype(ct_randn(s, s[1] ? 2 : 1, CT_F32), dt));
}

static double lam(int64_t epoch, void *user) {
    (void)user;
    return 1.0 / (1.0 + 0.37 * (double)epoch);
}

static ct_lr_scheduler *mksched(ct_optimizer *o, int kind) {
    if (kind == 1) {
        ct_one_cycle_opts oc = {.max_lr = 0.05, .total_steps = NSTEP + 2};
        return ct_one_cycle_lr_new(o, &oc);
    }
    if (kind == 2) return ct_step_lr_new(o, 2, 0.5);
    return ct_lambda_lr_new(o, lam, NULL);
}

/* bit-for-bit equality (NaN equal to NaN) */
static void assert_same(ct_tensor *a, ct_tensor *b, const char *what, int i) {
    if (!a || !b) {
        assert_true(!a && !b);
        return;
    }
    assert_int_equal(ct_numel(a), ct_numel(b));
    assert_int_equal(ct_get_dtype(a), ct_get_dtype(b));
    ct_tensor *ac = ct_contiguous(a), *bc = ct_contiguous(b);
    size_t nb = (size_t)ct_numel(a) * ct_dtype_size(ct_get_dtype(a));
    if (memcmp(ct_data_ptr(ac), ct_data_ptr(bc), nb) != 0) {
        double md = ct_item(ct_amax(ct_abs(ct_sub(ct_to_dtype(ac, CT_F64), ct_to_dtype(bc, CT_F64))), NULL, 0, false));
        fail_msg("%s of parameter %d differs from eager (max abs diff %g)", what, i, md);
    }
}

static const char *const g_state_names[] = {"step", "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq",
                                            "exp_inf", "mu_product", "square_avg", "grad_avg", "sum", "acc_delta"};

static void compare(ct_optimizer *e, ct_optimizer *c, ct_tensor **pe, ct_tensor **pc) {
    for (int i = 0; i < NP; i++) {
        assert_same(pe[i], pc[i], "the value", i);
        for (size_t k = 0; k < sizeof g_state_names / sizeof g_state_names[0]; k++)
            assert_same(ct_optim_state(e, i, g_state_names[k]), ct_optim_state(c, i, g_state_names[k]),
                        g_state_names[k], i);
    }
}

/* runs the case: returns the compiled side's counters */
static ct_compile_stats run_case(const ocase *k) {
    ct_manual_seed(11);
    ct_tensor *pe[NP], *pc[NP];
    for (int i = 0; i < NP; i++) {
        const int64_t *sh = k->mixed ? g_shapes_mixed[i] : g_shapes_2d[i];
        ct_tensor *base = ct_to_dtype(ct_randn(sh, sh[1] ? 2 : 1, CT_F32), k->dt);
        pe[i] = leaf(base);
        pc[i] = leaf(base);
    }
    int n0 = k->group ? 2 : NP;
    ct_optimizer *oe = k->mk(pe, n0), *oc = k->mk(pc, n0);
    assert_non_null(oe);
    assert_non_null(oc);
    if (k->group) {
        assert_int_equal(ct_optim_add_param_group(oe, pe + 2, NP - 2, k->gname, k->gval, k->ngh), 1);
        assert_int_equal(ct_optim_add_param_group(oc, pc + 2, NP - 2, k->gname, k->gval, k->ngh), 1);
    }
    assert_int_equal(ct_optim_compile(oc, NULL), CT_OK);
    ct_lr_scheduler *se = mksched(oe, k->sched), *sc = mksched(oc, k->sched);
    assert_non_null(se);
    assert_non_null(sc);
    double lr0 = ct_optim_get(oc, 0, "lr");
    for (int s = 1; s <= NSTEP; s++) {
        ct_scope sp = ct_scope_begin();
        for (int i = 0; i < NP; i++) {
            if (i == SKIP_P && s == SKIP_STEP) {
                ct_zero_grad(pe[i]);
                ct_zero_grad(pc[i]);
                continue;
            }
            ct_tensor *g = ct_to_dtype(ct_randn(ct_sizes(pe[i]), ct_ndim(pe[i]), CT_F32), k->dt);
            assert_int_equal(ct_set_grad(pe[i], ct_clone(g)), CT_OK);
            assert_int_equal(ct_set_grad(pc[i], ct_clone(g)), CT_OK);
        }
        assert_int_equal(ct_optim_step(oe), CT_OK);
        assert_int_equal(ct_optim_step(oc), CT_OK);
        assert_int_equal(ct_lr_scheduler_step(se), CT_OK);
        assert_int_equal(ct_lr_scheduler_step(sc), CT_OK);
        if (s == 4) { /* a state-dict round trip: new state tensors, the same variants */
            ct_sample *de = ct_optim_state_dict(oe), *dc = ct_optim_state_dict(oc);
            assert_non_null(de);
            assert_non_null(dc);
            assert_int_equal(ct_optim_load_state_dict(oe, de), CT_OK);
            assert_int_equal(ct_optim_load_state_dict(oc, dc), CT_OK);
            ct_sample_free(de);
            ct_sample_free(dc);
        }
        ct_scope_end(sp);
        compare(oe, oc, pe, pc);
    }
    /* the scheduler really moved lr (and the compiled step followed it) */
    assert_true(ct_optim_get(oc, 0, "lr") != lr0);
    ct_compile_stats st = ct_optim_compile_stats(oc);
    ct_lr_scheduler_free(se);
    ct_lr_scheduler_free(sc);
    ct_optim_free(oe);
    ct_optim_free(oc);
    for (int i = 0; i < NP; i++) {
        ct_release(pe[i]);
        ct_release(pc[i]);
    }
    return st;
}

/* ---- constructors ---- */
static ct_optimizer *sgd_plain(ct_tensor *const *p, int n) { return ct_sgd_new(p, n, 0.1, 0, 0, 0, false, false); }
static ct_optimizer *sgd_mom(ct_tensor *const *p, int n) { return ct_sgd_new(p, n, 0.1, 0.9, 0.1, 1e-2, false, false); }
static ct_optimizer *sgd_nest(ct_tensor *const *p, int n) { return ct_sgd_new(p, n, 0.1, 0.9, 0, 0, true, true); }
static ct_optimizer *adam_def(ct_tensor *const *p, int n) { return ct_adam_new(p, n, 1e-2, 0.9, 0.999, 1e-8, 0, false, false); }
static ct_optimizer *adam_all(ct_tensor *const *p, int n) { return ct_adam_new(p, n, 1e-2, 0.8, 0.99, 1e-6, 1e-2, true, true); }
static ct_optimizer *adamw_def(ct_tensor *const *p, int n) { return ct_adamw_new(p, n, 1e-2, 0.9, 0.999, 1e-8, 1e-2, false, false); }
static ct_optimizer *adamw_ams(ct_tensor *const *p, int n) { return ct_adamw_new(p, n, 1e-2, 0.9, 0.99, 1e-8, 0.1, true, false); }
static ct_optimizer *adamax_wd(ct_tensor *const *p, int n) { return ct_adamax_new(p, n, 2e-2, 0.9, 0.99, 1e-8, 1e-2, true); }
static ct_optimizer *nadam_wd(ct_tensor *const *p, int n) { return ct_nadam_new(p, n, 2e-2, 0.9, 0.99, 1e-8, 1e-2, 4e-3); }
static ct_optimizer *radam_def(ct_tensor *const *p, int n) { return ct_radam_new(p, n, 1e-2, 0.9, 0.99, 1e-8, 0); }
static ct_optimizer *rms_all(ct_tensor *const *p, int n) { return ct_rmsprop_new(p, n, 1e-2, 0.9, 1e-8, 1e-2, 0.9, true, false); }
static ct_optimizer *rms_max(ct_tensor *const *p, int n) { return ct_rmsprop_new(p, n, 1e-2, 0.99, 1e-8, 0, 0, false, true); }
static ct_optimizer *adagrad_all(ct_tensor *const *p, int n) { return ct_adagrad_new(p, n, 1e-1, 1e-2, 1e-2, 0.1, 1e-10, true); }
static ct_optimizer *adadelta_all(ct_tensor *const *p, int n) { return ct_adadelta_new(p, n, 1.0, 0.9, 1e-6, 1e-2, true); }

static const ocase g_cases[] = {
    {"SGD", sgd_plain, 0, false, {0}, {0}, 0, CT_F32, true},
    {"SGD momentum dampening wd", sgd_mom, 1, false, {0}, {0}, 0, CT_F32, false},
    {"SGD nesterov maximize, group without momentum", sgd_nest, 2, true, {"momentum", "nesterov", "lr"}, {0, 0, 0.3}, 3, CT_F32, false},
    {"Adam", adam_def, 1, false, {0}, {0}, 0, CT_F32, true},
    {"Adam amsgrad wd maximize, group wd 0", adam_all, 0, true, {"weight_decay", "amsgrad", "lr"}, {0, 0, 0.05}, 3, CT_F32, false},
    {"Adam f64", adam_all, 0, false, {0}, {0}, 0, CT_F64, false},
    {"AdamW", adamw_def, 1, false, {0}, {0}, 0, CT_F32, false},
    {"AdamW amsgrad", adamw_ams, 2, false, {0}, {0}, 0, CT_F32, false},
    {"Adamax wd maximize", adamax_wd, 1, false, {0}, {0}, 0, CT_F32, false},
    {"NAdam wd", nadam_wd, 0, false, {0}, {0}, 0, CT_F32, false},
    {"RAdam", radam_def, 2, true, {"weight_decay"}, {0.1}, 1, CT_F32, false},
    {"RMSprop centered momentum wd", rms_all, 1, false, {0}, {0}, 0, CT_F32, true},
    {"RMSprop maximize", rms_max, 0, false, {0}, {0}, 0, CT_F32, false},
    {"Adagrad", adagrad_all, 2, false, {0}, {0}, 0, CT_F32, false},
    {"Adadelta", adadelta_all, 0, false, {0}, {0}, 0, CT_F32, false},
};

static void t_matches_eager(void **st) {
    (void)st;
    BEGIN;
    for (size_t c = 0; c < sizeof g_cases / sizeof g_cases[0]; c++) {
        const ocase *k = &g_cases[c];
        ct_compile_stats s = run_case(k);
        /* two variants (every parameter; all but SKIP_P at SKIP_STEP), each traced once */
        if (s.traces != 2 || s.recompiles != 1 || s.calls != NSTEP || s.eager_calls != 0 || s.graph_breaks != 0)
            fail_msg("%s: %lld traces, %lld recompiles, %lld calls, %lld eager, %lld breaks", k->name,
                     (long long)s.traces, (long long)s.recompiles, (long long)s.calls, (long long)s.eager_calls,
                     (long long)s.graph_breaks);
        assert_true(s.kernels_built + s.kernels_loaded > 0);
        if (getenv("CT_TEST_VERBOSE")) fprintf(stderr, "%s: %lld built, %.0f ms compiling\n", k->name, (long long)s.kernels_built, s.compile_ms);
    }
    END;
}

/* the kernels: the update and its in-place writes in one kernel per parameter,
 * named in the profiler; a new parameter group traces a new variant */
static void t_kernels_and_groups(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(5);
    ct_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = mkparam(i, CT_F32);
    ct_optimizer *o = ct_adam_new(p, 2, 1e-2, 0.9, 0.999, 1e-8, 0, false, false);
    assert_int_equal(ct_optim_compile(o, NULL), CT_OK);
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_grad(p[i], ct_randn(ct_sizes(p[i]), ct_ndim(p[i]), CT_F32)), CT_OK);
    assert_int_equal(ct_profiler_start(NULL), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *t = ct_profiler_table("self_cpu_time_total", 50);
    assert_non_null(t);
    assert_non_null(strstr(t, "Optimizer.step#Adam.step"));
    assert_non_null(strstr(t, "fused_"));
    assert_null(strstr(t, "addcdiv")); /* no op-by-op update left */
    free(t);
    char *x = ct_optim_compile_explain(o);
    assert_non_null(x);
    /* one kernel per parameter, nothing left as op calls but nothing */
    assert_non_null(strstr(x, "plan: 2 steps: 0 op calls, 2 fused kernels"));
    free(x);
    ct_compile_stats s = ct_optim_compile_stats(o);
    assert_int_equal(s.traces, 1);
    /* a changed parameter set: a new variant, then both are reused */
    assert_int_equal(ct_optim_add_param_group(o, p + 2, 1, NULL, NULL, 0), 1);
    assert_int_equal(ct_optim_step(o), CT_OK);
    s = ct_optim_compile_stats(o);
    assert_int_equal(s.traces, 2);
    assert_int_equal(s.recompiles, 1);
    ct_zero_grad(p[2]);
    assert_int_equal(ct_optim_step(o), CT_OK); /* the first variant again */
    assert_int_equal(ct_set_grad(p[2], ct_randn(ct_sizes(p[2]), ct_ndim(p[2]), CT_F32)), CT_OK);
    for (int k = 0; k < 3; k++) assert_int_equal(ct_optim_step(o), CT_OK);
    s = ct_optim_compile_stats(o);
    assert_int_equal(s.traces, 2);
    assert_int_equal(s.calls, 6);
    assert_int_equal(s.eager_calls, 0);
    /* steps: 6 for the first two, 4 for the one added (it missed one) */
    assert_true(ct_item(ct_optim_state(o, 0, "step")) == 6.0);
    assert_true(ct_item(ct_optim_state(o, 2, "step")) == 4.0);
    /* lr, betas: values, no trace; weight_decay 0 -> 0.1 switches a term on: a variant */
    assert_int_equal(ct_optim_set_all(o, "lr", 3e-3), CT_OK);
    assert_int_equal(ct_optim_set_all(o, "beta1", 0.8), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_int_equal(ct_optim_compile_stats(o).traces, 2);
    assert_int_equal(ct_optim_set(o, 1, "weight_decay", 0.1), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_int_equal(ct_optim_set(o, 1, "weight_decay", 0), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    s = ct_optim_compile_stats(o);
    assert_int_equal(s.traces, 3);
    assert_int_equal(s.recompiles, 2);
    ct_optim_free(o);
    for (int i = 0; i < 3; i++) ct_release(p[i]);
    END;
}

/* no working C compiler: the compiled step runs its graph op by op, same numbers */
static void t_no_compiler(void **st) {
    (void)st;
    BEGIN;
    char *saved = no_cc_begin();
    ocase k = {"Adagrad f64 (no compiler)", adagrad_all, 0, false, {0}, {0}, 0, CT_F64, false};
    ct_compile_stats s = run_case(&k);
    assert_int_equal(s.kernels_built, 0);
    assert_int_equal(s.traces, 2);
    no_cc_end(saved);
    END;
}

static double quad_loss(void *user) {
    ct_tensor *p = user;
    ct_zero_grad(p);
    ct_tensor *l = ct_sum(ct_square(ct_sub_scalar(p, 1.5)), NULL, 0, false);
    if (!l || ct_backward(l, NULL, false, false)) return NAN;
    return ct_item(l);
}

/* LBFGS is not compiled (its step calls a closure): it steps eagerly; with
 * fullgraph that is an error; disable returns to the eager step */
static void t_fallbacks(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *p = ct_retain(ct_zeros(CT_SHAPE(3), CT_F32));
    assert_int_equal(ct_set_requires_grad(p, true), CT_OK);
    ct_optimizer *o = ct_lbfgs_new(&p, 1, 1, 20, 0, 1e-7, 1e-9, 10, NULL);
    ct_compile_opts fg = {.fullgraph = true};
    assert_int_not_equal(ct_optim_compile(o, &fg), CT_OK);
    assert_non_null(strstr(ct_last_error(), "closure"));
    ct_clear_error();
    assert_int_equal(ct_optim_compile(o, NULL), CT_OK);
    double loss = 0;
    assert_int_equal(ct_optim_step_closure(o, quad_loss, p, &loss), CT_OK);
    assert_true(fabs(ct_item(ct_sum(p, NULL, 0, false)) - 4.5) < 1e-4);
    assert_int_equal(ct_optim_compile_stats(o).calls, 0);
    ct_optim_free(o);

    /* disable: the eager step, no counters */
    ct_tensor *q = mkparam(1, CT_F32);
    o = ct_sgd_new(&q, 1, 0.1, 0, 0, 0, false, false);
    assert_int_equal(ct_optim_compile(o, NULL), CT_OK);
    ct_compile_opts off = {.disable = true};
    assert_int_equal(ct_optim_compile(o, &off), CT_OK);
    assert_int_equal(ct_set_grad(q, ct_ones_like(q)), CT_OK);
    ct_tensor *q0 = ct_clone(q);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_true(ct_allclose(q, ct_sub_scalar(q0, 0.1), 1e-6, 1e-6, false) == 1);
    assert_int_equal(ct_optim_compile_stats(o).calls, 0);
    assert_int_not_equal(ct_optim_compile(NULL, NULL), CT_OK);
    ct_clear_error();
    ct_optim_free(o);
    ct_release(p);
    ct_release(q);
    END;
}

/* The probe (optim_compile.c): steps 1-2 compiled, 3-12 alternating from
 * compiled, the samples given by the test (ct__optim_probe_sample: 10 ms
 * plus a side's cost, 1.7x over steps 5-9 where slow is set: the host's
 * slow mode), then the side whose paired ratio wins, for good; every
 * step's result equals eager's bit for bit either way. */
static double g_cost[2];
static unsigned g_slow;
static int g_step;
static double probe_sample(int side, double ms) {
    (void)ms;
    double t = 10 + g_cost[side];
    return g_slow >> g_step & 1 ? 1.7 * t : t;
}

static void probe_case(double compiled_cost, double eager_cost, unsigned slow, bool want_eager) {
    BEGIN;
    ct_manual_seed(9);
    ct_tensor *pe[NP] = {0}, *pc[NP] = {0}; /* compare() looks at NP: the rest absent on both sides */
    for (int i = 0; i < 2; i++) {
        ct_tensor *base = ct_randn(g_shapes_2d[i], 2, CT_F32);
        pe[i] = leaf(base);
        pc[i] = leaf(base);
    }
    ct_optimizer *oe = ct_adamw_new(pe, 2, 1e-2, 0.9, 0.999, 1e-8, 1e-2, false, false);
    ct_optimizer *oc = ct_adamw_new(pc, 2, 1e-2, 0.9, 0.999, 1e-8, 1e-2, false, false);
    assert_int_equal(ct_optim_compile(oc, NULL), CT_OK);
    g_cost[0] = compiled_cost;
    g_cost[1] = eager_cost;
    g_slow = slow;
    ct__optim_probe_sample = probe_sample;
    ct__optim_probe_force = 1;
    for (g_step = 1; g_step <= 16; g_step++) {
        ct_scope sp = ct_scope_begin();
        for (int i = 0; i < 2; i++) {
            ct_tensor *g = ct_randn(ct_sizes(pe[i]), 2, CT_F32);
            assert_int_equal(ct_set_grad(pe[i], ct_clone(g)), CT_OK);
            assert_int_equal(ct_set_grad(pc[i], ct_clone(g)), CT_OK);
        }
        assert_int_equal(ct_optim_step(oe), CT_OK);
        assert_int_equal(ct_optim_step(oc), CT_OK);
        ct_scope_end(sp);
        compare(oe, oc, pe, pc);
    }
    ct__optim_probe_sample = NULL;
    ct__optim_probe_force = 0;
    char *x = ct_optim_compile_explain(oc);
    assert_non_null(x);
    const char *verdict = want_eager ? "the eager step runs" : "the compiled step runs";
    if (!strstr(x, verdict)) fail_msg("want \"%s\":\n%s", verdict, x);
    /* compiled: steps 1-3, 5, 7, 9, 11, then all or none of 13-16 */
    char want[64];
    snprintf(want, sizeof want, "%d steps compiled, %d eager", want_eager ? 7 : 11, want_eager ? 9 : 5);
    if (!strstr(x, want)) fail_msg("want \"%s\":\n%s", want, x);
    free(x);
    /* the probe's eager steps are no fallback; those after an eager verdict are */
    ct_compile_stats cs = ct_optim_compile_stats(oc);
    assert_int_equal(cs.eager_calls, want_eager ? 4 : 0);
    assert_int_equal(cs.calls, 16);
    ct_optim_free(oe);
    ct_optim_free(oc);
    for (int i = 0; i < 2; i++) {
        ct_release(pe[i]);
        ct_release(pc[i]);
    }
    END;
}

/* Every case with the probe on: steps 3-7 alternate compiled and eager
 * steps of one optimizer, which share its state (the step counts, NAdam's
 * mu_product, SGD's fresh momentum buffer); each step still equals the
 * eager optimizer's bit for bit (run_case compares after every step). */
static double zero_sample(int side, double ms) {
    (void)side, (void)ms;
    return 1.0;
}
static void t_probe_alternates(void **st) {
    (void)st;
    BEGIN;
    ct__optim_probe_force = 1;
    ct__optim_probe_sample = zero_sample;
    for (size_t c = 0; c < sizeof g_cases / sizeof g_cases[0]; c++) {
        ct_compile_stats s = run_case(&g_cases[c]);
        if (s.calls != NSTEP || s.eager_calls != 0)
            fail_msg("%s: %lld calls, %lld eager", g_cases[c].name, (long long)s.calls, (long long)s.eager_calls);
    }
    ct__optim_probe_sample = NULL;
    ct__optim_probe_force = 0;
    END;
}

static void t_probe(void **st) {
    (void)st;
    probe_case(0, 2, 0, false); /* compiled steps shorter: compiled stays */
    probe_case(2, 0, 0, true);  /* eager steps shorter: eager from step 13 */
    /* compiled 3% faster while the host is 1.7x slower over steps 5-9: the
     * medians of each side would pick eager, each pair but one has
     * compiled faster, so compiled stays */
    probe_case(0, 0.3, 0x3e0u, false);
    probe_case(0.5, 0, 0x3e0u, true); /* compiled 5% slower through the same shift: eager */
}

int main(void) {
    /* a timing must not decide the other tests (t_probe turns the probe on) */
    setenv("CT_COMPILE_PROBE", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_matches_eager),
        cmocka_unit_test(t_kernels_and_groups),
        cmocka_unit_test(t_no_compiler),
        cmocka_unit_test(t_fallbacks),
        cmocka_unit_test(t_probe),
        cmocka_unit_test(t_probe_alternates),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
