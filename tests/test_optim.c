/* test_optim.c -- optimizers, schedulers, gradient clipping and weight
 * averaging against torch (tests/fixtures/optim.txt, tools/fixtures/
 * gen_optim.py): 20-step parameter trajectories on a linear regression
 * from the same initial weights; state-dict round trips that resume bit
 * for bit; the fused step against the op-by-op one; error paths; leaks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixture.h"

/* ---- the problem: loss = mean((X W^T + b - Y)^2) ---------------------------- */
static ct_tensor *loss_of(ct_tensor *W, ct_tensor *b, ct_tensor *X, ct_tensor *Y) {
    return ct_mean(ct_square(ct_sub(ct_linear(X, W, b), Y)), NULL, 0, false);
}

static ct_status backward_once(ct_tensor *W, ct_tensor *b, ct_tensor *X, ct_tensor *Y) {
    ct_tensor *l = loss_of(W, b, X, Y);
    if (!l) return ct_last_error_code();
    return ct_backward(l, NULL, false, false);
}

static ct_tensor *leaf(ct_tensor *t) {
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *c = ct_contiguous(ct_clone(t));
    ct_set_grad_enabled(prev);
    if (c && ct_set_requires_grad(c, true)) return NULL;
    return c;
}

static ct_optimizer *make_opt(const fx_case *c, const char *name, ct_tensor *const *ps, int n) {
    double lr = fx_f(c, "lr", 1e-3), wd = fx_f(c, "weight_decay", 0);
    double b1 = fx_f(c, "beta1", 0.9), b2 = fx_f(c, "beta2", 0.999), eps = fx_f(c, "eps", 1e-8);
    bool maximize = fx_i(c, "maximize", 0) != 0;
    if (!strcmp(name, "sgd"))
        return ct_sgd_new(ps, n, lr, fx_f(c, "momentum", 0), fx_f(c, "dampening", 0), wd,
                          fx_i(c, "nesterov", 0), maximize);
    if (!strcmp(name, "adam"))
        return ct_adam_new(ps, n, lr, b1, b2, eps, wd, fx_i(c, "amsgrad", 0), maximize);
    if (!strcmp(name, "adamw"))
        return ct_adamw_new(ps, n, lr, b1, b2, eps, fx_f(c, "weight_decay", 1e-2),
                            fx_i(c, "amsgrad", 0), maximize);
    if (!strcmp(name, "adamax"))
        return ct_adamax_new(ps, n, fx_f(c, "lr", 2e-3), b1, b2, eps, wd, maximize);
    if (!strcmp(name, "nadam"))
        return ct_nadam_new(ps, n, fx_f(c, "lr", 2e-3), b1, b2, eps, wd,
                            fx_f(c, "momentum_decay", 4e-3));
    if (!strcmp(name, "radam")) return ct_radam_new(ps, n, lr, b1, b2, eps, wd);
    if (!strcmp(name, "rmsprop"))
        return ct_rmsprop_new(ps, n, fx_f(c, "lr", 1e-2), fx_f(c, "alpha", 0.99), eps, wd,
                              fx_f(c, "momentum", 0), fx_i(c, "centered", 0), maximize);
    if (!strcmp(name, "adagrad"))
        return ct_adagrad_new(ps, n, fx_f(c, "lr", 1e-2), fx_f(c, "lr_decay", 0), wd,
                              fx_f(c, "initial_accumulator_value", 0), fx_f(c, "eps", 1e-10),
                              maximize);
    if (!strcmp(name, "adadelta"))
        return ct_adadelta_new(ps, n, fx_f(c, "lr", 1.0), fx_f(c, "rho", 0.9),
                               fx_f(c, "eps", 1e-6), wd, maximize);
    return NULL;
}

static double lambda_fn(int64_t e, void *user) {
    (void)user;
    return 1.0 / (1.0 + 0.3 * (double)e);
}

static ct_lr_scheduler *make_sched(const fx_case *c, ct_optimizer *o) {
    const char *s = fx_s(c, "sched", "");
    if (!strcmp(s, "step_lr")) return ct_step_lr_new(o, fx_i(c, "step_size", 1), fx_f(c, "gamma", 0.1));
    if (!strcmp(s, "multistep_lr")) {
        int64_t ms[16];
        int n = fx_ints(c, "milestones", ms, 16);
        return ct_multistep_lr_new(o, ms, n, fx_f(c, "gamma", 0.1));
    }
    if (!strcmp(s, "exponential_lr")) return ct_exponential_lr_new(o, fx_f(c, "gamma", 0.9));
    if (!strcmp(s, "cosine_lr"))
        return ct_cosine_annealing_lr_new(o, fx_i(c, "T_max", 1), fx_f(c, "eta_min", 0));
    if (!strncmp(s, "warm_restarts", 13))
        return ct_cosine_annealing_warm_restarts_new(o, fx_i(c, "T_0", 1), fx_i(c, "T_mult", 1),
                                                     fx_f(c, "eta_min", 0));
    if (!strcmp(s, "linear_lr"))
        return ct_linear_lr_new(o, fx_f(c, "start_factor", 1. / 3), fx_f(c, "end_factor", 1),
                                fx_i(c, "total_iters", 5));
    if (!strcmp(s, "constant_lr"))
        return ct_constant_lr_new(o, fx_f(c, "factor", 1. / 3), fx_i(c, "total_iters", 5));
    if (!strcmp(s, "lambda_lr")) return ct_lambda_lr_new(o, lambda_fn, NULL);
    if (!strncmp(s, "one_cycle", 9)) {
        ct_one_cycle_opts op = {0};
        op.max_lr = fx_f(c, "max_lr", 0);
        op.total_steps = fx_i(c, "total_steps", 0);
        op.pct_start = fx_f(c, "pct_start", 0);
        op.three_phase = fx_i(c, "three_phase", 0);
        op.anneal_linear = fx_i(c, "anneal_linear", 0);
        op.div_factor = fx_f(c, "div_factor", 0);
        op.final_div_factor = fx_f(c, "final_div_factor", 0);
        return ct_one_cycle_lr_new(o, &op);
    }
    if (!strcmp(s, "sequential")) {
        ct_lr_scheduler *sub[3] = {ct_linear_lr_new(o, 0.1, 1.0, 4), ct_exponential_lr_new(o, 0.9),
                                   ct_cosine_annealing_lr_new(o, 5, 0.0)};
        ct_lr_scheduler *s2 = ct_sequential_lr_new(o, sub, 3, (const int64_t[]){4, 12});
        if (!s2) for (int i = 0; i < 3; i++) ct_lr_scheduler_free(sub[i]);
        return s2;
    }
    if (!strncmp(s, "plateau", 7))
        return ct_reduce_lr_on_plateau_new(o, fx_s(c, "mode", "min"), fx_f(c, "factor", 0.1),
                                           fx_i(c, "patience", 10), fx_f(c, "threshold", 1e-4),
                                           fx_s(c, "threshold_mode", "rel"), fx_i(c, "cooldown", 0),
                                           fx_f(c, "min_lr", 0), 1e-8);
    return NULL;
}

static const double k_metrics[20] = {1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.8, 0.81, 0.82, 0.83,
                                     0.84, 0.85, 0.7, 0.7, 0.71, 0.72, 0.73, 0.74, 0.75, 0.76};

/* shared by "optim" and "sched" cases */
static ct_status run_traj(const fx_case *c, ct_tensor *const *in, ct_tensor **out, bool sched) {
    ct_tensor *W = leaf(in[0]), *b = leaf(in[1]);
    if (!W || !b) return ct_last_error_code();
    const char *name = fx_s(c, "opt", "");
    bool groups = fx_has(c, "lr1");
    ct_tensor *ps[2] = {W, b};
    ct_optimizer *o = make_opt(c, name, ps, groups ? 1 : 2);
    if (!o) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_ARG;
    ct_status st = CT_OK;
    ct_lr_scheduler *s = NULL;
    if (groups) {
        const char *nm[1] = {"lr"};
        double v[1] = {fx_f(c, "lr1", 0)};
        if (ct_optim_add_param_group(o, &b, 1, nm, v, 1) < 0) { st = ct_last_error_code(); goto out; }
    }
    if (fx_i(c, "fused", 0) && (st = ct_optim_set_all(o, "fused", 1))) goto out;
    if (sched && !(s = make_sched(c, o))) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_ARG; goto out; }
    ct_tensor *Ws[20], *bs[20];
    double lrs[40], moms[20];
    int ng = ct_optim_num_groups(o);
    for (int k = 0; k < 20; k++) {
        ct_optim_zero_grad(o, true);
        if ((st = backward_once(W, b, in[2], in[3]))) goto out;
        if ((st = ct_optim_step(o))) goto out;
        if (s) {
            if (!strncmp(fx_s(c, "sched", ""), "plateau", 7)) st = ct_lr_scheduler_step_metric(s, k_metrics[k]);
            else st = ct_lr_scheduler_step(s);
            if (st) goto out;
            if (ct_lr_scheduler_get_last_lr(s, lrs + k * ng, 2) != ng) { st = CT_ERR_RUNTIME; goto out; }
            moms[k] = ct_optim_has(o, "beta1") ? ct_optim_get(o, 0, "beta1") : ct_optim_get(o, 0, "momentum");
        }
        Ws[k] = ct_detach(ct_clone(W));
        bs[k] = ct_detach(ct_clone(b));
    }
    out[0] = ct_stack(Ws, 20, 0);
    out[1] = ct_stack(bs, 20, 0);
    if (s) {
        out[2] = ct_from_doubles(lrs, CT_SHAPE(20, ng), CT_F64);
        out[3] = ct_from_doubles(moms, CT_SHAPE(20), CT_F64);
    }
out:
    ct_lr_scheduler_free(s);
    ct_optim_free(o);
    return st;
}

static ct_status run_optim(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_traj(c, in, out, false);
}
static ct_status run_sched(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_traj(c, in, out, true);
}

typedef struct { ct_tensor *W, *b, *X, *Y; ct_optimizer *o; } closure_ctx;
static double closure(void *user) {
    closure_ctx *cc = user;
    ct_optim_zero_grad(cc->o, true);
    ct_scope s = ct_scope_begin();
    ct_tensor *l = loss_of(cc->W, cc->b, cc->X, cc->Y);
    double v = l ? ct_item(l) : NAN;
    if (!l || ct_backward(l, NULL, false, false)) v = NAN;
    ct_scope_end(s);
    return v;
}

static ct_status run_lbfgs(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *W = leaf(in[0]), *b = leaf(in[1]);
    if (!W || !b) return ct_last_error_code();
    const char *ls = fx_s(c, "line_search_fn", "none");
    ct_tensor *ps[2] = {W, b};
    ct_optimizer *o = ct_lbfgs_new(ps, 2, fx_f(c, "lr", 1), fx_i(c, "max_iter", 20), 0, 1e-7, 1e-9,
                                   fx_i(c, "history_size", 100),
                                   strcmp(ls, "none") ? ls : NULL);
    if (!o) return ct_last_error_code();
    closure_ctx cc = {W, b, in[2], in[3], o};
    ct_tensor *Ws[6], *bs[6];
    double losses[6];
    ct_status st = CT_OK;
    for (int k = 0; k < 6 && !st; k++) {
        st = ct_optim_step_closure(o, closure, &cc, &losses[k]);
        Ws[k] = ct_detach(ct_clone(W));
        bs[k] = ct_detach(ct_clone(b));
    }
    if (!st) {
        out[0] = ct_stack(Ws, 6, 0);
        out[1] = ct_stack(bs, 6, 0);
        out[2] = ct_from_doubles(losses, CT_SHAPE(6), CT_F64);
    }
    ct_optim_free(o);
    return st;
}

static ct_status run_clip_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *a = leaf(in[0]), *b = leaf(in[1]);
    if (!a || !b) return ct_last_error_code();
    ct_tensor *ps[2] = {a, b};
    ct_status st = ct_set_grad(a, ct_clone(in[0]));
    if (!st) st = ct_set_grad(b, ct_clone(in[1]));
    double tot = 0;
    if (!st) st = ct_clip_grad_norm_(ps, 2, fx_f(c, "max_norm", 1), fx_f(c, "norm_type", 2), false, &tot);
    if (st) return st;
    out[0] = ct_scalar(tot, CT_F32);
    out[1] = ct_clone(ct_grad(a));
    out[2] = ct_clone(ct_grad(b));
    return CT_OK;
}

static ct_status run_clip_value(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *a = leaf(in[0]), *b = leaf(in[1]);
    if (!a || !b) return ct_last_error_code();
    ct_tensor *ps[2] = {a, b};
    ct_status st = ct_set_grad(a, ct_clone(in[0]));
    if (!st) st = ct_set_grad(b, ct_clone(in[1]));
    if (!st) st = ct_clip_grad_value_(ps, 2, fx_f(c, "clip_value", 1));
    if (st) return st;
    out[0] = ct_clone(ct_grad(a));
    out[1] = ct_clone(ct_grad(b));
    return CT_OK;
}

static ct_status run_averaged(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_module *lin = ct_linear_new(4, 3, true);
    if (!lin) return ct_last_error_code();
    ct_averaged_model *a = ct_averaged_model_new(lin, fx_f(c, "decay", -1), false);
    ct_status st = a ? CT_OK : ct_last_error_code();
    ct_sample *sd = ct_sample_new();
    for (int k = 0; k < 3 && !st; k++) {
        if ((st = ct_sample_set(sd, "weight", in[1 + 2 * k]))) break;
        if ((st = ct_sample_set(sd, "bias", in[2 + 2 * k]))) break;
        if ((st = ct_module_load_state_dict(lin, sd, true))) break;
        st = ct_averaged_model_update(a, lin);
    }
    if (!st) {
        const ct_sample *avg = ct_averaged_model_state(a);
        out[0] = ct_clone(ct_sample_get(avg, "weight"));
        out[1] = ct_clone(ct_sample_get(avg, "bias"));
        out[2] = ct_detach(ct_averaged_model_forward(a, &in[0], 1));
        if (!out[2]) st = ct_last_error_code();
        if (ct_averaged_model_n_averaged(a) != 3) st = CT_ERR_RUNTIME;
        /* copy-back gives the same forward */
        ct_module *lin2 = ct_linear_new(4, 3, true);
        if (!st) st = ct_averaged_model_copy_to(a, lin2);
        if (!st && ct_allclose(ct_module_forward1(lin2, in[0]), out[2], 0, 0, false) != 1)
            st = CT_ERR_RUNTIME;
        ct_module_release(lin2);
    }
    ct_sample_free(sd);
    ct_averaged_model_free(a);
    ct_module_release(lin);
    return st;
}

static const fx_op k_ops[] = {
    {"optim", run_optim, 1e-5, 1e-6},
    {"sched", run_sched, 1e-5, 1e-6},
    {"lbfgs", run_lbfgs, 1e-7, 1e-9},
    {"clip_norm", run_clip_norm, 1e-6, 1e-7},
    {"clip_value", run_clip_value, 0, 0},
    {"averaged", run_averaged, 1e-6, 1e-6},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/optim.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- state dict round trip: resumes bit for bit ----------------------------------- */
typedef ct_optimizer *(*mk_fn)(ct_tensor *const *ps, int n);
static ct_optimizer *mk_sgd(ct_tensor *const *p, int n) { return ct_sgd_new(p, n, 0.05, 0.9, 0, 0.01, true, false); }
static ct_optimizer *mk_adam(ct_tensor *const *p, int n) { return ct_adam_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0.01, true, false); }
static ct_optimizer *mk_adamw(ct_tensor *const *p, int n) {
    ct_optimizer *o = ct_adamw_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0.01, false, false);
    if (o && ct_optim_set_all(o, "fused", 1)) { ct_optim_free(o); return NULL; }
    return o;
}
static ct_optimizer *mk_adamax(ct_tensor *const *p, int n) { return ct_adamax_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0, false); }
static ct_optimizer *mk_nadam(ct_tensor *const *p, int n) { return ct_nadam_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0, 4e-3); }
static ct_optimizer *mk_radam(ct_tensor *const *p, int n) { return ct_radam_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0); }
static ct_optimizer *mk_rmsprop(ct_tensor *const *p, int n) { return ct_rmsprop_new(p, n, 0.01, 0.99, 1e-8, 0, 0.9, true, false); }
static ct_optimizer *mk_adagrad(ct_tensor *const *p, int n) { return ct_adagrad_new(p, n, 0.1, 0.01, 0, 0.1, 1e-10, false); }
static ct_optimizer *mk_adadelta(ct_tensor *const *p, int n) { return ct_adadelta_new(p, n, 1.0, 0.9, 1e-6, 0, false); }

static void steps(ct_optimizer *o, ct_tensor *W, ct_tensor *b, ct_tensor *X, ct_tensor *Y, int n) {
    for (int k = 0; k < n; k++) {
        ct_scope s = ct_scope_begin();
        ct_optim_zero_grad(o, true);
        assert_int_equal(backward_once(W, b, X, Y), CT_OK);
        assert_int_equal(ct_optim_step(o), CT_OK);
        ct_scope_end(s);
    }
}

static void test_state_dict_roundtrip(void **state) {
    (void)state;
    mk_fn mks[] = {mk_sgd, mk_adam, mk_adamw, mk_adamax, mk_nadam, mk_radam, mk_rmsprop,
                   mk_adagrad, mk_adadelta};
    int64_t live = ct_live_tensors();
    for (size_t m = 0; m < sizeof mks / sizeof mks[0]; m++) {
        ct_scope s = ct_scope_begin();
        ct_manual_seed(1);
        ct_tensor *X = ct_randn(CT_SHAPE(8, 4), CT_F32), *Y = ct_randn(CT_SHAPE(8, 3), CT_F32);
        ct_tensor *W = leaf(ct_randn(CT_SHAPE(3, 4), CT_F32)), *b = leaf(ct_randn(CT_SHAPE(3), CT_F32));
        ct_optimizer *o = mks[m]((ct_tensor *[]){W, b}, 2);
        assert_non_null(o);
        steps(o, W, b, X, Y, 5);
        ct_sample *sd = ct_optim_state_dict(o);
        assert_non_null(sd);
        assert_non_null(ct_sample_get(sd, "param_groups.0.lr"));
        ct_tensor *W2 = leaf(W), *b2 = leaf(b);
        ct_optimizer *o2 = mks[m]((ct_tensor *[]){W2, b2}, 2);
        assert_non_null(o2);
        /* hyperparameters come from the state dict too */
        assert_int_equal(ct_optim_set(o2, 0, "lr", 123.0), CT_OK);
        assert_int_equal(ct_optim_load_state_dict(o2, sd), CT_OK);
        assert_true(ct_optim_get(o2, 0, "lr") == ct_optim_get(o, 0, "lr"));
        steps(o, W, b, X, Y, 5);
        steps(o2, W2, b2, X, Y, 5);
        assert_int_equal(ct_equal(W, W2), 1);
        assert_int_equal(ct_equal(b, b2), 1);
        ct_sample_free(sd);
        ct_optim_free(o);
        ct_optim_free(o2);
        ct_scope_end(s);
    }
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- fused vs op-by-op -------------------------------------------------------------- */
static void test_fused_matches_ops(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    const char *kinds[] = {"sgd", "sgd_nesterov", "adam", "adam_amsgrad", "adamw"};
    ct_dtype dts[] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 5; k++) {
            ct_scope s = ct_scope_begin();
            ct_manual_seed(5);
            ct_tensor *p0 = ct_randn(CT_SHAPE(70001), dts[d]);
            ct_tensor *pa = leaf(p0), *pb = leaf(p0);
            ct_optimizer *oa, *ob;
            if (!strcmp(kinds[k], "sgd")) {
                oa = ct_sgd_new(&pa, 1, 0.1, 0.9, 0.1, 0.01, false, false);
                ob = ct_sgd_new(&pb, 1, 0.1, 0.9, 0.1, 0.01, false, false);
            } else if (!strcmp(kinds[k], "sgd_nesterov")) {
                oa = ct_sgd_new(&pa, 1, 0.1, 0.9, 0, 0, true, true);
                ob = ct_sgd_new(&pb, 1, 0.1, 0.9, 0, 0, true, true);
            } else if (!strcmp(kinds[k], "adamw")) {
                oa = ct_adamw_new(&pa, 1, 0.01, 0.9, 0.99, 1e-8, 0.1, false, false);
                ob = ct_adamw_new(&pb, 1, 0.01, 0.9, 0.99, 1e-8, 0.1, false, false);
            } else {
                bool ams = !strcmp(kinds[k], "adam_amsgrad");
                oa = ct_adam_new(&pa, 1, 0.01, 0.9, 0.99, 1e-8, 0.01, ams, ams);
                ob = ct_adam_new(&pb, 1, 0.01, 0.9, 0.99, 1e-8, 0.01, ams, ams);
            }
            assert_non_null(oa);
            assert_non_null(ob);
            assert_int_equal(ct_optim_set_all(ob, "fused", 1), CT_OK);
            for (int it = 0; it < 5; it++) {
                ct_scope s2 = ct_scope_begin();
                ct_tensor *g = ct_randn(CT_SHAPE(70001), dts[d]);
                assert_int_equal(ct_set_grad(pa, ct_clone(g)), CT_OK);
                assert_int_equal(ct_set_grad(pb, ct_clone(g)), CT_OK);
                assert_int_equal(ct_optim_step(oa), CT_OK);
                assert_int_equal(ct_optim_step(ob), CT_OK);
                ct_scope_end(s2);
            }
            /* a few ulps of the O(1) values: the fused loop may contract a
             * multiply-add the elementwise kernels round twice */
            double tol = dts[d] == CT_F32 ? 1e-6 : 1e-14;
            int close = ct_allclose(pa, pb, tol, tol, false);
            ct_tensor *diff = ct_max(ct_abs(ct_sub(pa, pb)));
            if (close != 1 || getenv("CT_OPTIM_VERBOSE"))
                print_message("fused %s %s: max abs diff %g\n", kinds[k], ct_dtype_name(dts[d]),
                              ct_item(diff));
            assert_int_equal(close, 1);
            ct_optim_free(oa);
            ct_optim_free(ob);
            ct_scope_end(s);
        }
    assert_int_equal(ct_live_tensors(), live);
}

/* The fused Adam / AdamW step bit for bit against a scalar oracle written
 * here in torch.optim's order of roundings (the AVX2 kernel's lanes and the
 * scalar tail must both give exactly these floats): 70001 elements (chunks
 * of 16384 plus a tail that is not a multiple of 8), three steps, with
 * L2 or decoupled weight decay, maximize on and off. */
static void test_fused_adam_exact(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    const int64_t n = 70001;
    const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
    for (int variant = 0; variant < 3; variant++) {
        bool decoupled = variant != 1, maximize = variant == 2;
        ct_scope s = ct_scope_begin();
        ct_manual_seed(11 + variant);
        ct_tensor *p = leaf(ct_randn(CT_SHAPE(n), CT_F32));
        ct_optimizer *o = decoupled ? ct_adamw_new(&p, 1, lr, b1, b2, eps, wd, false, maximize)
                                    : ct_adam_new(&p, 1, lr, b1, b2, eps, wd, false, maximize);
        assert_non_null(o);
        assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
        float *rp = malloc(sizeof(float) * (size_t)n), *rm = calloc((size_t)n, sizeof(float));
        float *rv = calloc((size_t)n, sizeof(float));
        assert_true(rp && rm && rv);
        memcpy(rp, ct_data_ptr(p), sizeof(float) * (size_t)n);
        for (int step = 1; step <= 3; step++) {
            ct_scope s2 = ct_scope_begin();
            ct_tensor *g = ct_randn(CT_SHAPE(n), CT_F32);
            assert_int_equal(ct_set_grad(p, g), CT_OK);
            assert_int_equal(ct_optim_step(o), CT_OK);
            const float *gp = ct_data_ptr(g);
            double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
            const float nss = (float)(-(lr / bc1)), bc = (float)sqrt(bc2), decay = (float)(1 - lr * wd);
            for (int64_t i = 0; i < n; i++) {
                float gi = maximize ? -gp[i] : gp[i], pi = rp[i];
                if (decoupled) pi = pi * decay;
                else gi = gi + (float)wd * pi;
                float mi = rm[i] * (float)b1;
                mi = mi + (float)(1 - b1) * gi;
                float vi = rv[i] * (float)b2;
                float t = (float)(1 - b2) * gi;
                vi = vi + t * gi;
                rm[i] = mi;
                rv[i] = vi;
                float num = nss * mi, den = sqrtf(vi) / bc + (float)eps;
                rp[i] = pi + num / den;
            }
            ct_scope_end(s2);
        }
        const float *pp = ct_data_ptr(p);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) bad += memcmp(&pp[i], &rp[i], sizeof(float)) != 0;
        if (bad) print_message("adam variant %d: %lld of %lld elements differ\n", variant, (long long)bad,
                               (long long)n);
        assert_int_equal(bad, 0);
        free(rp);
        free(rm);
        free(rv);
        ct_optim_free(o);
        ct_scope_end(s);
    }
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- the API around the steps ---------------------------------------------------------- */
static void test_groups_and_hparams(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *a = leaf(ct_ones(CT_SHAPE(3), CT_F32)), *b = leaf(ct_ones(CT_SHAPE(2), CT_F32));
    ct_optimizer *o = ct_sgd_new(&a, 1, 0.1, 0.5, 0, 0, false, false);
    assert_non_null(o);
    assert_string_equal(ct_optim_name(o), "SGD");
    const char *nm[] = {"lr", "momentum"};
    double v[] = {0.01, 0.0};
    assert_int_equal(ct_optim_add_param_group(o, &b, 1, nm, v, 2), 1);
    assert_int_equal(ct_optim_num_groups(o), 2);
    assert_true(ct_optim_get(o, 0, "lr") == 0.1);
    assert_true(ct_optim_get(o, 1, "lr") == 0.01);
    assert_true(ct_optim_get(o, 1, "momentum") == 0.0);
    assert_true(ct_optim_get(o, 1, "dampening") == 0.0);
    assert_int_equal(ct_optim_set(o, 1, "lr", 0.5), CT_OK);
    assert_true(ct_optim_get(o, 1, "lr") == 0.5);
    ct_tensor *gp[4];
    assert_int_equal(ct_optim_group_params(o, 1, gp, 4), 1);
    assert_ptr_equal(gp[0], b);
    /* grads: a step moves only params that have one */
    assert_int_equal(ct_set_grad(a, ct_ones(CT_SHAPE(3), CT_F32)), CT_OK);
    assert_int_equal(ct_optim_step(o), CT_OK);
    assert_true(fabs(ct_item(ct_select(a, 0, 0)) - 0.9) < 1e-6);
    assert_true(ct_item(ct_select(b, 0, 0)) == 1.0);
    assert_non_null(ct_optim_state(o, 0, "momentum_buffer"));
    assert_null(ct_optim_state(o, 1, "momentum_buffer"));
    /* zero_grad: in place, then to none */
    ct_optim_zero_grad(o, false);
    assert_non_null(ct_grad(a));
    assert_true(ct_item(ct_sum(ct_grad(a), NULL, 0, false)) == 0.0);
    ct_optim_zero_grad(o, true);
    assert_null(ct_grad(a));
    /* errors */
    assert_true(isnan(ct_optim_get(o, 0, "betas")));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_int_equal(ct_optim_set(o, 0, "lr", -1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "invalid learning rate"));
    assert_int_equal(ct_optim_set(o, 5, "lr", 1), CT_ERR_INDEX);
    assert_int_equal(ct_optim_add_param_group(o, &a, 1, NULL, NULL, 0), -1);
    assert_non_null(strstr(ct_last_error(), "more than one parameter group"));
    const char *bad[] = {"lrr"};
    ct_tensor *c = leaf(ct_ones(CT_SHAPE(1), CT_F32));
    assert_int_equal(ct_optim_add_param_group(o, &c, 1, bad, v, 1), -1);
    assert_non_null(strstr(ct_last_error(), "unknown hyperparameter 'lrr'"));
    ct_optim_free(o);

    assert_null(ct_sgd_new(&a, 1, -0.1, 0, 0, 0, false, false));
    assert_non_null(strstr(ct_last_error(), "SGD: invalid learning rate"));
    assert_null(ct_sgd_new(&a, 1, 0.1, 0, 0, 0, true, false));
    assert_null(ct_adam_new(&a, 1, 0.1, 1.0, 0.999, 1e-8, 0, false, false));
    assert_non_null(strstr(ct_last_error(), "beta parameter at index 0"));
    assert_null(ct_adam_new(NULL, 0, 0.1, 0.9, 0.999, 1e-8, 0, false, false));
    ct_tensor *nonleaf = ct_mul_scalar(a, 2.0);
    assert_null(ct_adam_new(&nonleaf, 1, 0.1, 0.9, 0.999, 1e-8, 0, false, false));
    assert_non_null(strstr(ct_last_error(), "non-leaf"));
    ct_tensor *it = ct_ones(CT_SHAPE(2), CT_I64);
    assert_null(ct_sgd_new(&it, 1, 0.1, 0, 0, 0, false, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_null(ct_lbfgs_new(&a, 1, 1, 20, 0, 1e-7, 1e-9, 100, "armijo"));
    /* LBFGS needs a closure, and one group */
    ct_optimizer *lb = ct_lbfgs_new(&a, 1, 1, 20, 0, 1e-7, 1e-9, 10, NULL);
    assert_non_null(lb);
    assert_int_equal(ct_optim_step(lb), CT_ERR_ARG);
    assert_int_equal(ct_optim_add_param_group(lb, &b, 1, NULL, NULL, 0), -1);
    ct_optim_free(lb);

    /* state dict mismatch */
    ct_optimizer *o1 = ct_adam_new(&a, 1, 0.1, 0.9, 0.999, 1e-8, 0, false, false);
    ct_optimizer *o2 = ct_adam_new((ct_tensor *[]){a, b}, 2, 0.1, 0.9, 0.999, 1e-8, 0, false, false);
    assert_int_equal(ct_set_grad(a, ct_ones(CT_SHAPE(3), CT_F32)), CT_OK);
    assert_int_equal(ct_optim_step(o1), CT_OK);
    ct_sample *sd = ct_optim_state_dict(o1);
    assert_non_null(ct_sample_get(sd, "state.0.exp_avg"));
    assert_non_null(ct_sample_get(sd, "state.0.step"));
    assert_int_equal(ct_get_dtype(ct_sample_get(sd, "state.0.step")), CT_F32);
    assert_int_equal(ct_numel(ct_sample_get(sd, "param_groups.0.betas")), 2);
    assert_int_equal(ct_optim_load_state_dict(o2, sd), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "doesn't match the size"));
    ct_sample_free(sd);
    ct_optim_free(o1);
    ct_optim_free(o2);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_sched_and_clip_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *a = leaf(ct_ones(CT_SHAPE(3), CT_F32));
    ct_optimizer *o = ct_adagrad_new(&a, 1, 0.1, 0, 0, 0, 1e-10, false);
    assert_null(ct_step_lr_new(o, 0, 0.1));
    assert_null(ct_linear_lr_new(o, 0, 1, 5));
    ct_one_cycle_opts op = {.max_lr = 0.1, .total_steps = 3};
    assert_null(ct_one_cycle_lr_new(o, &op)); /* Adagrad has no momentum to cycle */
    assert_non_null(strstr(ct_last_error(), "momentum or beta1"));
    op.no_cycle_momentum = true;
    ct_lr_scheduler *oc = ct_one_cycle_lr_new(o, &op);
    assert_non_null(oc);
    for (int i = 0; i < 3; i++) assert_int_equal(ct_lr_scheduler_step(oc), CT_OK);
    assert_int_equal(ct_lr_scheduler_step(oc), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "total steps is 3"));
    ct_lr_scheduler_free(oc);
    ct_lr_scheduler *pl = ct_reduce_lr_on_plateau_new(o, "min", 0.1, 1, 1e-4, "rel", 0, 0, 1e-8);
    assert_int_equal(ct_lr_scheduler_step(pl), CT_ERR_ARG);
    assert_null(ct_reduce_lr_on_plateau_new(o, "median", 0.1, 1, 1e-4, "rel", 0, 0, 1e-8));
    ct_lr_scheduler_free(pl);
    /* clipping: no grads -> 0; non-finite with error_if_nonfinite */
    double tot = -1;
    assert_int_equal(ct_clip_grad_norm_(&a, 1, 1.0, 2.0, true, &tot), CT_OK);
    assert_true(tot == 0.0);
    ct_tensor *g = ct_from_doubles((const double[]){1, NAN, 2}, CT_SHAPE(3), CT_F32);
    assert_int_equal(ct_set_grad(a, g), CT_OK);
    assert_int_equal(ct_clip_grad_norm_(&a, 1, 1.0, 2.0, true, &tot), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "non-finite"));
    assert_true(ct_item(ct_select(ct_grad(a), 0, 0)) == 1.0); /* untouched */
    assert_int_equal(ct_clip_grad_norm_(NULL, 2, 1.0, 2.0, false, NULL), CT_ERR_NULL);
    ct_optim_free(o);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_state_dict_roundtrip),
        cmocka_unit_test(test_fused_matches_ops),
        cmocka_unit_test(test_fused_adam_exact),
        cmocka_unit_test(test_groups_and_hparams),
        cmocka_unit_test(test_sched_and_clip_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
