/* test_norm_rnn.c -- normalization, embedding, dropout and recurrent
 * modules: forward and backward against PyTorch from identical weights
 * (tests/fixtures/norm_rnn.txt, tools/fixtures/gen_norm_rnn.py), running
 * statistics in train and eval, reprs, state-dict keys, initialization,
 * dropout behaviour, error paths, and no leaks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixture.h"

/* ---- fixture helpers -------------------------------------------------------- */
static double num_or_nan(const fx_case *c, const char *name, double def) {
    const char *s = fx_s(c, name, NULL);
    if (s && !strcmp(s, "none")) return NAN;
    return fx_f(c, name, def);
}

/* Checks the parameter names against param keys and loads the flat vector. */
static ct_status load_flat(ct_module *m, const fx_case *c, ct_tensor *flat) {
    const char *names[64];
    ct_tensor *ps[64];
    int np = ct_module_named_parameters(m, names, ps, 64);
    if (np < 0 || np > 64) return CT_ERR_RUNTIME;
    char joined[1024] = "";
    for (int i = 0; i < np; i++)
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? "," : "", names[i]);
    if (!np) strcpy(joined, "none");
    const char *want = fx_s(c, "keys", "none");
    if (strcmp(joined, want)) {
        fprintf(stderr, "  parameter names %s, torch has %s\n", joined, want);
        return CT_ERR_ARG;
    }
    ct_sample *sd = ct_sample_new();
    int64_t off = 0;
    ct_status st = CT_OK;
    for (int i = 0; i < np && !st; i++) {
        int64_t k = ct_numel(ps[i]);
        if (off + k > ct_numel(flat)) { st = CT_ERR_SHAPE; break; }
        ct_tensor *piece = ct_reshape(ct_narrow(flat, 0, off, k), ct_sizes(ps[i]), ct_ndim(ps[i]));
        off += k;
        st = piece ? ct_sample_set(sd, names[i], piece) : ct_last_error_code();
    }
    if (!st && off != ct_numel(flat)) st = CT_ERR_SHAPE;
    if (!st) st = ct_module_load_state_dict(m, sd, false);
    ct_sample_free(sd);
    return st;
}

/* d(sum outs*gouts)/d(x, params, extra...): gx, flat param grads, extra grads */
static ct_status grads(ct_module *m, ct_tensor *const *outs, ct_tensor *const *gouts, int no, ct_tensor *x,
                       ct_tensor *const *extra, int nextra, ct_tensor **gx, ct_tensor **gflat, ct_tensor **gextra) {
    ct_tensor *wrt[80], *g[80] = {0};
    int nw = 0;
    if (x) wrt[nw++] = x;
    ct_tensor *ps[64];
    int np = ct_module_named_parameters(m, NULL, ps, 64);
    for (int i = 0; i < np; i++) wrt[nw++] = ps[i];
    for (int i = 0; i < nextra; i++) wrt[nw++] = extra[i];
    ct_status st = ct_autograd_grad(outs, no, wrt, nw, gouts, false, false, true, g);
    if (st) return st;
    for (int i = 0; i < nw; i++)
        if (!g[i]) g[i] = ct_zeros_like(wrt[i]);
    int k = 0;
    if (x) *gx = g[k++];
    ct_tensor *pieces[64];
    for (int i = 0; i < np; i++) pieces[i] = ct_reshape(g[k++], CT_SHAPE(-1));
    *gflat = np ? ct_cat(pieces, np, 0) : ct_zeros(CT_SHAPE(0), x ? ct_get_dtype(x) : ct_get_default_dtype());
    for (int i = 0; i < nextra; i++) gextra[i] = g[k++];
    return *gflat ? CT_OK : ct_last_error_code();
}

static ct_status with_dtype(const fx_case *c, ct_dtype *prev) {
    *prev = ct_get_default_dtype();
    return ct_set_default_dtype(fx_dtype(fx_s(c, "dtype", "float64")));
}

static void restore_dtype(ct_dtype prev) {
    if (ct_set_default_dtype(prev)) fprintf(stderr, "restoring the default dtype failed\n");
}

static ct_tensor *find_buffer(ct_module *m, const char *name) {
    const char *names[16];
    ct_tensor *bs[16];
    int n = ct_module_named_buffers(m, names, bs, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (!strcmp(names[i], name)) return bs[i];
    return NULL;
}

/* The generic module case: train forward (steps), backward, buffers, eval. */
static ct_status run_module(const fx_case *c, ct_module *m, ct_tensor *const *in, ct_tensor **out) {
    if (!m) return ct_last_error_code();
    ct_status st = load_flat(m, c, in[1]);
    double v[64];
    int n;
    if (!st && (n = fx_doubles(c, "rm0", v, 64)) > 0)
        st = ct_copy_(find_buffer(m, "running_mean"), ct_from_doubles(v, CT_SHAPE(n), CT_F64)) ? CT_OK : CT_ERR_RUNTIME;
    if (!st && (n = fx_doubles(c, "rv0", v, 64)) > 0)
        st = ct_copy_(find_buffer(m, "running_var"), ct_from_doubles(v, CT_SHAPE(n), CT_F64)) ? CT_OK : CT_ERR_RUNTIME;
    ct_tensor *x = in[0];
    if (!st) st = ct_set_requires_grad(x, true);
    ct_module_train(m, true);
    int64_t steps = fx_i(c, "steps", 1);
    for (int64_t s = 0; s + 1 < steps && !st; s++)
        if (!ct_module_forward1(m, x)) st = ct_last_error_code();
    ct_tensor *y = st ? NULL : ct_module_forward1(m, x);
    if (!st && !y) st = ct_last_error_code();
    if (!st) st = grads(m, &y, &in[2], 1, x, NULL, 0, &out[1], &out[2], NULL);
    int k = 3;
    static const char *bufs[] = {"running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 3 && !st; i++) {
        ct_tensor *b = find_buffer(m, bufs[i]);
        if (b) out[k++] = ct_clone(b);
    }
    if (!st && c->nout > k) {
        ct_module_eval(m);
        bool prev = ct_set_grad_enabled(false);
        out[k++] = ct_module_forward1(m, in[0]);
        ct_set_grad_enabled(prev);
    }
    out[0] = y;
    ct_module_release(m);
    return st;
}

#define MODULE_RUNNER(fn, make)                                                       \
    static ct_status fn(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {    \
        ct_dtype prev;                                                                \
        if (with_dtype(c, &prev)) return ct_last_error_code();                        \
        ct_module *m = make;                                                          \
        restore_dtype(prev);                                                          \
        return run_module(c, m, in, out);                                             \
    }

MODULE_RUNNER(run_bn1d, ct_batch_norm1d_new(fx_i(c, "num_features", 0), fx_f(c, "eps", 1e-5),
                                            num_or_nan(c, "momentum", 0.1), fx_i(c, "affine", 1),
                                            fx_i(c, "track", 1)))
MODULE_RUNNER(run_bn2d, ct_batch_norm2d_new(fx_i(c, "num_features", 0), fx_f(c, "eps", 1e-5),
                                            num_or_nan(c, "momentum", 0.1), fx_i(c, "affine", 1),
                                            fx_i(c, "track", 1)))
MODULE_RUNNER(run_in2d, ct_instance_norm2d_new(fx_i(c, "num_features", 0), fx_f(c, "eps", 1e-5),
                                               num_or_nan(c, "momentum", 0.1), fx_i(c, "affine", 0),
                                               fx_i(c, "track", 0)))
MODULE_RUNNER(run_gn, ct_group_norm_new(fx_i(c, "num_groups", 1), fx_i(c, "num_channels", 1), fx_f(c, "eps", 1e-5),
                                        fx_i(c, "affine", 1)))
MODULE_RUNNER(run_lrn, ct_local_response_norm_new(fx_i(c, "size", 1), fx_f(c, "alpha", 1e-4), fx_f(c, "beta", 0.75),
                                                  fx_f(c, "k", 1.0)))

static ct_status run_ln(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t ns[8];
    int n = fx_ints(c, "normalized_shape", ns, 8);
    ct_dtype prev;
    if (with_dtype(c, &prev)) return ct_last_error_code();
    ct_module *m = ct_layer_norm_new(ns, n, fx_f(c, "eps", 1e-5), fx_i(c, "affine", 1), fx_i(c, "bias", 1));
    restore_dtype(prev);
    return run_module(c, m, in, out);
}

static ct_status run_rms(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t ns[8];
    int n = fx_ints(c, "normalized_shape", ns, 8);
    ct_dtype prev;
    if (with_dtype(c, &prev)) return ct_last_error_code();
    ct_module *m = ct_rms_norm_new(ns, n, num_or_nan(c, "eps", NAN), fx_i(c, "affine", 1));
    restore_dtype(prev);
    return run_module(c, m, in, out);
}

static int64_t padding_of(const fx_case *c) {
    const char *s = fx_s(c, "padding_idx", "none");
    return strcmp(s, "none") ? fx_i(c, "padding_idx", 0) : CT_PADDING_IDX_NONE;
}

static ct_status run_embedding(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_dtype prev;
    if (with_dtype(c, &prev)) return ct_last_error_code();
    ct_module *m = ct_embedding_new(fx_i(c, "num", 0), fx_i(c, "dim", 0), padding_of(c), num_or_nan(c, "max_norm", NAN),
                                    fx_f(c, "norm_type", 2.0), fx_i(c, "freq", 0));
    restore_dtype(prev);
    if (!m) return ct_last_error_code();
    ct_status st = load_flat(m, c, in[1]);
    ct_tensor *y = st ? NULL : ct_module_forward1(m, in[0]);
    if (!st && !y) st = ct_last_error_code();
    if (!st) st = grads(m, &y, &in[2], 1, NULL, NULL, 0, NULL, &out[1], NULL);
    if (!st) out[2] = ct_reshape(ct_clone(ct_module_param(m, 0)), CT_SHAPE(-1));
    out[0] = y;
    ct_module_release(m);
    return st;
}

static ct_status run_embedding_bag(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    static const char *modes[] = {"sum", "mean", "max"};
    ct_bag_mode mode = CT_BAG_MEAN;
    for (int i = 0; i < 3; i++) if (!strcmp(fx_s(c, "mode", "mean"), modes[i])) mode = (ct_bag_mode)i;
    ct_dtype prev;
    if (with_dtype(c, &prev)) return ct_last_error_code();
    ct_module *m = ct_embedding_bag_new(fx_i(c, "num", 0), fx_i(c, "dim", 0), NAN, 2.0, fx_i(c, "freq", 0), mode,
                                        fx_i(c, "last", 0), padding_of(c));
    restore_dtype(prev);
    if (!m) return ct_last_error_code();
    ct_status st = load_flat(m, c, in[1]);
    ct_tensor *args[3] = {in[0]};
    int n = 1, k = 3;
    bool off = fx_i(c, "has_offsets", 0), psw = fx_i(c, "psw", 0);
    if (off) args[n++] = in[k++];
    ct_tensor *w = psw ? in[k++] : NULL;
    if (psw && !st) st = ct_set_requires_grad(w, true);
    if (psw) args[n++] = w;
    ct_tensor *y = st ? NULL : ct_module_forward(m, args, n);
    if (!st && !y) st = ct_last_error_code();
    if (!st) st = grads(m, &y, &in[2], 1, NULL, psw ? &w : NULL, psw, NULL, &out[1], &out[2]);
    out[0] = y;
    ct_module_release(m);
    return st;
}

static ct_status run_recurrent(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    const char *op = c->op;
    bool lstm = !strcmp(op, "lstm");
    ct_dtype prev;
    if (with_dtype(c, &prev)) return ct_last_error_code();
    int64_t is = fx_i(c, "input_size", 0), hs = fx_i(c, "hidden_size", 0), nl = fx_i(c, "num_layers", 1);
    bool bias = fx_i(c, "bias", 1), bf = fx_i(c, "batch_first", 0), bi = fx_i(c, "bidirectional", 0);
    ct_module *m = lstm ? ct_lstm_new(is, hs, nl, bias, bf, 0.0, bi)
                   : !strcmp(op, "gru") ? ct_gru_new(is, hs, nl, bias, bf, 0.0, bi)
                   : ct_rnn_new(is, hs, nl, strcmp(fx_s(c, "nonlinearity", "tanh"), "relu") ? CT_RNN_TANH : CT_RNN_RELU,
                                bias, bf, 0.0, bi);
    restore_dtype(prev);
    if (!m) return ct_last_error_code();
    ct_status st = load_flat(m, c, in[1]);
    int nouts = lstm ? 3 : 2;
    ct_tensor *gouts[3] = {in[2], in[3], lstm ? in[4] : NULL};
    int k = lstm ? 5 : 4;
    bool h0 = fx_i(c, "h0", 0);
    ct_tensor *args[3] = {in[0]}, *states[2];
    int n = 1, ns = 0;
    if (h0) {
        for (int i = 0; i < (lstm ? 2 : 1); i++) {
            states[ns] = in[k++];
            if (!st) st = ct_set_requires_grad(states[ns], true);
            args[n++] = states[ns++];
        }
    }
    if (!st) st = ct_set_requires_grad(in[0], true);
    ct_module_eval(m);
    ct_tensor *res[3] = {0};
    if (!st) st = ct_module_forward_multi(m, args, n, res, nouts);
    ct_tensor *gx = NULL, *gflat = NULL, *gs[2] = {0};
    if (!st) st = grads(m, res, gouts, nouts, in[0], states, ns, &gx, &gflat, gs);
    int o = 0;
    for (int i = 0; i < nouts; i++) out[o++] = res[i];
    out[o++] = gx;
    out[o++] = gflat;
    for (int i = 0; i < ns; i++) out[o++] = gs[i];
    ct_module_release(m);
    return st;
}

static const fx_op k_ops[] = {
    {"batchnorm1d", run_bn1d, 0, 0},   {"batchnorm2d", run_bn2d, 0, 0},
    {"instancenorm2d", run_in2d, 0, 0}, {"groupnorm", run_gn, 0, 0},
    {"layernorm", run_ln, 0, 0},        {"rmsnorm", run_rms, 0, 0},
    {"lrn", run_lrn, 0, 0},             {"embedding", run_embedding, 0, 0},
    {"embedding_bag", run_embedding_bag, 0, 0},
    {"rnn", run_recurrent, 0, 0},       {"lstm", run_recurrent, 0, 0},
    {"gru", run_recurrent, 0, 0},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(0);
    int f = fx_run_file(CT_FIXTURE_DIR "/norm_rnn.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- reprs, keys, init ------------------------------------------------------------ */
static void check_repr(ct_module *m, const char *want) {
    assert_non_null(m);
    char *s = ct_module_to_string(m);
    assert_non_null(s);
    if (strcmp(s, want)) fprintf(stderr, "repr: got  %s\n      want %s\n", s, want);
    assert_string_equal(s, want);
    free(s);
    ct_module_release(m);
}

static void test_repr(void **state) {
    (void)state;
    check_repr(ct_batch_norm1d_new(3, 1e-5, 0.1, true, true),
               "BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)");
    check_repr(ct_batch_norm2d_new(3, 1e-5, NAN, false, true),
               "BatchNorm2d(3, eps=1e-05, momentum=None, affine=False, track_running_stats=True)");
    check_repr(ct_layer_norm_new(CT_SHAPE(4, 5), 1e-5, true, true), "LayerNorm((4, 5), eps=1e-05, elementwise_affine=True)");
    check_repr(ct_layer_norm_new(CT_SHAPE(4), 1e-5, false, true), "LayerNorm((4,), eps=1e-05, elementwise_affine=False)");
    check_repr(ct_group_norm_new(2, 4, 1e-5, true), "GroupNorm(2, 4, eps=1e-05, affine=True)");
    check_repr(ct_rms_norm_new(CT_SHAPE(4), NAN, true), "RMSNorm((4,), eps=None, elementwise_affine=True)");
    check_repr(ct_instance_norm2d_new(3, 1e-5, 0.1, false, false),
               "InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)");
    check_repr(ct_local_response_norm_new(2, 1e-4, 0.75, 1.0), "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)");
    check_repr(ct_embedding_new(10, 3, 0, 1.0, 2.0, false), "Embedding(10, 3, padding_idx=0, max_norm=1.0)");
    check_repr(ct_embedding_new(10, 3, CT_PADDING_IDX_NONE, NAN, 1.0, true),
               "Embedding(10, 3, norm_type=1.0, scale_grad_by_freq=True)");
    check_repr(ct_embedding_new(10, 3, -1, NAN, 2.0, false), "Embedding(10, 3, padding_idx=9)");
    check_repr(ct_embedding_bag_new(10, 3, NAN, 2.0, false, CT_BAG_MEAN, false, CT_PADDING_IDX_NONE),
               "EmbeddingBag(10, 3, mode=mean)");
    check_repr(ct_embedding_bag_new(10, 3, NAN, 2.0, false, CT_BAG_MAX, false, 2),
               "EmbeddingBag(10, 3, mode=max, padding_idx=2)");
    check_repr(ct_dropout_new(0.5), "Dropout(p=0.5, inplace=False)");
    check_repr(ct_dropout2d_new(0.3), "Dropout2d(p=0.3, inplace=False)");
    check_repr(ct_alpha_dropout_new(0.2), "AlphaDropout(p=0.2, inplace=False)");
    check_repr(ct_rnn_new(3, 4, 1, CT_RNN_TANH, true, false, 0, false), "RNN(3, 4)");
    check_repr(ct_rnn_new(3, 4, 2, CT_RNN_RELU, false, true, 0.5, true),
               "RNN(3, 4, num_layers=2, bias=False, batch_first=True, dropout=0.5, bidirectional=True)");
    check_repr(ct_lstm_new(3, 4, 1, true, false, 0, false), "LSTM(3, 4)");
    check_repr(ct_gru_new(3, 4, 2, true, false, 0, false), "GRU(3, 4, num_layers=2)");
}

static void test_keys_and_init(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_module *bn = ct_batch_norm2d_new(3, 1e-5, 0.1, true, true);
    ct_sample *sd = ct_module_state_dict(bn);
    assert_int_equal(ct_sample_count(sd), 5);
    const char *bk[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
    for (int i = 0; i < 5; i++) assert_string_equal(ct_sample_name(sd, i), bk[i]);
    ct_tensor *nbt = ct_sample_get(sd, "num_batches_tracked");
    assert_int_equal(ct_get_dtype(nbt), CT_I64);
    assert_int_equal(ct_ndim(nbt), 0);
    assert_true(ct_equal(ct_sample_get(sd, "weight"), ct_ones(CT_SHAPE(3), CT_F32)) == 1);
    assert_true(ct_equal(ct_sample_get(sd, "running_var"), ct_ones(CT_SHAPE(3), CT_F32)) == 1);
    assert_true(ct_equal(ct_sample_get(sd, "bias"), ct_zeros(CT_SHAPE(3), CT_F32)) == 1);
    ct_sample_free(sd);
    /* a train step bumps num_batches_tracked; eval does not */
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3, 2, 2), CT_F32);
    assert_non_null(ct_module_forward1(bn, x));
    ct_module_eval(bn);
    assert_non_null(ct_module_forward1(bn, x));
    assert_int_equal(ct_item_int(ct_module_buffer(bn, 2)), 1);
    ct_module_release(bn);

    ct_module *lstm = ct_lstm_new(3, 4, 2, true, false, 0, true);
    const char *names[32];
    ct_tensor *ps[32];
    int n = ct_module_named_parameters(lstm, names, ps, 32);
    assert_int_equal(n, 16);
    const char *want[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l0_reverse",
                          "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse", "weight_ih_l1"};
    for (int i = 0; i < 9; i++) assert_string_equal(names[i], want[i]);
    assert_int_equal(ct_size(ps[0], 0), 16);
    assert_int_equal(ct_size(ps[0], 1), 3);
    assert_int_equal(ct_size(ps[8], 1), 8); /* layer 1 reads both directions */
    for (int i = 0; i < n; i++) {
        assert_true(ct_item(ct_max(ps[i])) <= 0.5);
        assert_true(ct_item(ct_min(ps[i])) >= -0.5);
    }
    ct_module_release(lstm);

    ct_module *gru = ct_gru_new(5, 6, 1, false, false, 0, false);
    n = ct_module_named_parameters(gru, names, ps, 32);
    assert_int_equal(n, 2);
    assert_int_equal(ct_size(ps[0], 0), 18);

    ct_module *emb = ct_embedding_new(6, 4, 2, NAN, 2.0, false);
    ct_tensor *w = ct_module_param(emb, 0);
    assert_true(ct_equal(ct_select(w, 0, 2), ct_zeros(CT_SHAPE(4), CT_F32)) == 1);
    assert_true(ct_item(ct_sum(ct_abs(w), NULL, 0, false)) > 0);
    ct_module_release(emb);
    ct_module_release(gru);

    ct_module *frozen = ct_embedding_from_pretrained(ct_ones(CT_SHAPE(3, 2), CT_F32), true, CT_PADDING_IDX_NONE,
                                                     NAN, 2.0, false);
    assert_int_equal(ct_module_num_parameters(frozen, true), 0);
    assert_int_equal(ct_module_num_parameters(frozen, false), 6);
    ct_module_release(frozen);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- dropout ---------------------------------------------------------------------------- */
static void test_dropout(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(7);
    ct_tensor *x = ct_add_scalar(ct_rand(CT_SHAPE(8, 16, 3, 3), CT_F64), 1.0); /* > 0 everywhere */
    ct_module *d2 = ct_dropout2d_new(0.5);
    ct_tensor *y = ct_module_forward1(d2, x);
    assert_non_null(y);
    /* every channel is either all zero or all exactly 2x */
    ct_tensor *ratio = ct_div(y, x);
    const int64_t sp[2] = {2, 3};
    ct_tensor *mx = ct_amax(ratio, sp, 2, false), *mn = ct_amin(ratio, sp, 2, false);
    assert_true(ct_equal(mx, mn) == 1);
    ct_tensor *zeros = ct_sum(ct_eq_scalar(mx, 0.0), NULL, 0, false);
    ct_tensor *twos = ct_sum(ct_eq_scalar(mx, 2.0), NULL, 0, false);
    assert_int_equal(ct_item_int(zeros) + ct_item_int(twos), 8 * 16);
    assert_true(ct_item_int(zeros) > 20 && ct_item_int(twos) > 20);
    ct_module_eval(d2);
    assert_true(ct_module_forward1(d2, x) == x);
    ct_module_release(d2);

    ct_module *ad = ct_alpha_dropout_new(0.2);
    ct_tensor *z = ct_randn(CT_SHAPE(200000), CT_F64);
    ct_tensor *az = ct_module_forward1(ad, z);
    ct_tensor *var = NULL, *mean = NULL;
    assert_int_equal(ct_var_mean(az, NULL, 0, 1.0, false, &var, &mean), CT_OK);
    assert_true(fabs(ct_item(mean)) < 0.02);
    assert_true(fabs(ct_item(var) - 1.0) < 0.03);
    /* dropped elements all take the same value alpha * a * (p - 1) */
    double alpha = 1.7580993408473766, p = 0.2, a = 1.0 / sqrt((alpha * alpha * p + 1) * (1 - p));
    ct_tensor *dropped = ct_sum(ct_isclose(az, ct_full(CT_SHAPE(1), alpha * a * (p - 1), CT_F64), 0, 1e-12, false),
                                NULL, 0, false);
    assert_true(fabs((double)ct_item_int(dropped) / 200000.0 - 0.2) < 0.01);
    ct_module_eval(ad);
    assert_true(ct_module_forward1(ad, z) == z);
    ct_module_release(ad);

    /* RNN dropout acts between layers only in training */
    ct_module *rnn = ct_gru_new(3, 4, 2, true, false, 0.9, false);
    ct_tensor *xs = ct_randn(CT_SHAPE(5, 2, 3), CT_F32);
    ct_tensor *y_tr = ct_module_forward1(rnn, xs);
    ct_module_eval(rnn);
    ct_tensor *y_ev1 = ct_module_forward1(rnn, xs), *y_ev2 = ct_module_forward1(rnn, xs);
    assert_true(ct_equal(y_ev1, y_ev2) == 1);
    assert_true(ct_equal(y_tr, y_ev1) == 0);
    ct_module_release(rnn);
    rnn = ct_rnn_new(3, 4, 1, CT_RNN_TANH, true, false, 0.9, false); /* one layer: no dropout */
    y_tr = ct_module_forward1(rnn, xs);
    ct_module_eval(rnn);
    assert_true(ct_equal(y_tr, ct_module_forward1(rnn, xs)) == 1);
    ct_module_release(rnn);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- functional_call, gradcheck ------------------------------------------------------------- */
static ct_tensor *ln_fn(ct_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return ct_layer_norm(in[0], CT_SHAPE(3), in[1], in[2], 1e-5);
}
static ct_tensor *gn_fn(ct_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return ct_group_norm(in[0], 2, in[1], in[2], 1e-5);
}
static ct_tensor *lrn_fn(ct_tensor *const *in, int n, void *user) {
    (void)n;
    (void)user;
    return ct_local_response_norm(in[0], 3, 0.5, 0.75, 1.0);
}

static void test_functional(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4, 3), CT_F64), *w = ct_randn(CT_SHAPE(3), CT_F64),
              *b = ct_randn(CT_SHAPE(3), CT_F64);
    assert_int_equal(ct_set_requires_grad(x, true) | ct_set_requires_grad(w, true) | ct_set_requires_grad(b, true), 0);
    ct_tensor *in1[3] = {x, w, b};
    assert_int_equal(ct_gradcheck(ln_fn, NULL, in1, 3, 0, 0, 0), CT_OK);
    ct_tensor *w4 = ct_randn(CT_SHAPE(4), CT_F64), *b4 = ct_randn(CT_SHAPE(4), CT_F64);
    assert_int_equal(ct_set_requires_grad(w4, true) | ct_set_requires_grad(b4, true), 0);
    ct_tensor *in2[3] = {x, w4, b4};
    assert_int_equal(ct_gradcheck(gn_fn, NULL, in2, 3, 0, 0, 0), CT_OK);
    assert_int_equal(ct_gradcheck(lrn_fn, NULL, &x, 1, 0, 0, 0), CT_OK);

    /* EmbeddingBag scale_grad_by_freq: each row's gradient divided by its count in input */
    ct_tensor *wb = ct_randn(CT_SHAPE(6, 2), CT_F64);
    assert_int_equal(ct_set_requires_grad(wb, true), CT_OK);
    ct_tensor *bag_ids = ct_from_doubles((double[]){1, 1, 4, 4, 1, 3}, CT_SHAPE(2, 3), CT_I64);
    ct_tensor *yb = ct_embedding_bag(bag_ids, wb, NULL, NAN, 2, true, CT_BAG_SUM, NULL, false, CT_PADDING_IDX_NONE);
    assert_int_equal(ct_backward(yb, ct_ones_like(yb), false, false), CT_OK);
    double want_g[12] = {0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0};
    assert_true(ct_allclose(ct_grad(wb), ct_from_doubles(want_g, CT_SHAPE(6, 2), CT_F64), 1e-12, 1e-12, false) == 1);

    /* functional_call substitutes BatchNorm's weight without touching the module */
    ct_module *bn = ct_batch_norm1d_new(4, 1e-5, 0.1, true, true);
    ct_module_eval(bn);
    ct_sample *rep = ct_sample_new();
    assert_int_equal(ct_sample_set(rep, "weight", ct_full(CT_SHAPE(4), 2.0, CT_F32)), CT_OK);
    ct_tensor *xf = ct_randn(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *y1 = ct_module_forward1(bn, xf), *y2 = ct_functional_call(bn, rep, &xf, 1);
    assert_true(ct_allclose(ct_mul_scalar(y1, 2.0), y2, 1e-6, 1e-6, false) == 1);
    assert_true(ct_equal(ct_module_param(bn, 0), ct_ones(CT_SHAPE(4), CT_F32)) == 1);
    ct_sample_free(rep);
    ct_module_release(bn);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- errors ------------------------------------------------------------------------------------ */
#define EXPECT_ERR(expr, code, substr)                                                         \
    do {                                                                                       \
        ct_clear_error();                                                                      \
        assert_null(expr);                                                                     \
        assert_int_equal(ct_last_error_code(), code);                                          \
        if (!strstr(ct_last_error(), substr)) fprintf(stderr, "message: %s\n", ct_last_error()); \
        assert_non_null(strstr(ct_last_error(), substr));                                      \
    } while (0)

static void test_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_module *bn = ct_batch_norm1d_new(3, 1e-5, 0.1, true, true);
    EXPECT_ERR(ct_module_forward1(bn, ct_zeros(CT_SHAPE(2, 3, 4, 5), CT_F32)), CT_ERR_SHAPE,
               "BatchNorm1d: expected 2D or 3D input (got 4D input)");
    EXPECT_ERR(ct_module_forward1(bn, ct_zeros(CT_SHAPE(1, 3), CT_F32)), CT_ERR_SHAPE,
               "Expected more than 1 value per channel when training, got input size [1, 3]");
    EXPECT_ERR(ct_module_forward1(bn, ct_zeros(CT_SHAPE(2, 4), CT_F32)), CT_ERR_SHAPE, "expected 3 channels");
    ct_module_release(bn);
    EXPECT_ERR(ct_batch_norm(ct_zeros(CT_SHAPE(2, 3), CT_F32), ct_zeros(CT_SHAPE(4), CT_F32), NULL, NULL, NULL, true,
                             0.1, 1e-5),
               CT_ERR_SHAPE, "running_mean should contain 3 elements not 4");
    EXPECT_ERR(ct_layer_norm(ct_zeros(CT_SHAPE(2, 3), CT_F32), CT_SHAPE(4), NULL, NULL, 1e-5), CT_ERR_SHAPE,
               "Given normalized_shape=[4], expected input with shape [*, 4], but got input of size [2, 3]");
    EXPECT_ERR(ct_group_norm(ct_zeros(CT_SHAPE(2, 5, 3), CT_F32), 2, NULL, NULL, 1e-5), CT_ERR_SHAPE,
               "divisible by num_groups");
    EXPECT_ERR(ct_group_norm_new(3, 4, 1e-5, true), CT_ERR_ARG, "divisible");
    EXPECT_ERR(ct_local_response_norm(ct_zeros(CT_SHAPE(2, 3), CT_F32), 2, 1e-4, 0.75, 1), CT_ERR_SHAPE,
               "Expected 3D or higher dimensionality input (got 2 dimensions)");
    ct_tensor *wt = ct_randn(CT_SHAPE(5, 2), CT_F32);
    EXPECT_ERR(ct_embedding(ct_from_doubles((double[]){1, 5}, CT_SHAPE(2), CT_I64), wt, CT_PADDING_IDX_NONE, NAN, 2,
                            false),
               CT_ERR_INDEX, "index 5 is out of range for num_embeddings=5");
    EXPECT_ERR(ct_embedding(ct_zeros(CT_SHAPE(2), CT_F32), wt, CT_PADDING_IDX_NONE, NAN, 2, false), CT_ERR_DTYPE,
               "indices");
    EXPECT_ERR(ct_embedding_new(5, 2, 5, NAN, 2, false), CT_ERR_ARG, "Padding_idx must be within num_embeddings");
    ct_tensor *ids = ct_from_doubles((double[]){1, 2, 3}, CT_SHAPE(3), CT_I64);
    EXPECT_ERR(ct_embedding_bag(ids, wt, ct_from_doubles((double[]){0, 1}, CT_SHAPE(2), CT_I64), NAN, 2, false,
                                CT_BAG_MAX, ct_ones(CT_SHAPE(3), CT_F32), false, CT_PADDING_IDX_NONE),
               CT_ERR_ARG, "per_sample_weights is only supported for mode='sum' (got mode='max')");
    EXPECT_ERR(ct_embedding_bag(ids, wt, ct_from_doubles((double[]){1, 2}, CT_SHAPE(2), CT_I64), NAN, 2, false,
                                CT_BAG_SUM, NULL, false, CT_PADDING_IDX_NONE),
               CT_ERR_ARG, "offsets[0] has to be 0");
    EXPECT_ERR(ct_embedding_bag(ids, wt, NULL, NAN, 2, false, CT_BAG_SUM, NULL, false, CT_PADDING_IDX_NONE),
               CT_ERR_ARG, "offsets has to be a 1D Tensor but got None");
    EXPECT_ERR(ct_dropout_new(1.5), CT_ERR_ARG, "dropout probability has to be between 0 and 1, but got 1.5");
    EXPECT_ERR(ct_dropout2d(ct_zeros(CT_SHAPE(2, 3), CT_F32), 0.5, true), CT_ERR_SHAPE, "dropout2d");
    ct_module *lstm = ct_lstm_new(3, 4, 1, true, false, 0, false);
    ct_tensor *outs[3];
    ct_tensor *xin[2] = {ct_zeros(CT_SHAPE(2, 1, 5), CT_F32), ct_zeros(CT_SHAPE(1, 1, 4), CT_F32)};
    ct_clear_error();
    assert_int_equal(ct_module_forward_multi(lstm, xin, 1, outs, 3), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "input.size(-1) must be equal to input_size. Expected 3, got 5"));
    xin[0] = ct_zeros(CT_SHAPE(2, 1, 3), CT_F32);
    assert_int_equal(ct_module_forward_multi(lstm, xin, 2, outs, 3), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "(input, h0, c0)"));
    ct_tensor *xin3[3] = {xin[0], ct_zeros(CT_SHAPE(2, 1, 4), CT_F32), ct_zeros(CT_SHAPE(1, 1, 4), CT_F32)};
    assert_int_equal(ct_module_forward_multi(lstm, xin3, 3, outs, 3), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "Expected hidden size [1, 1, 4], got [2, 1, 4]"));
    assert_int_equal(ct_module_forward_multi(lstm, xin, 1, outs, 4), CT_ERR_ARG);
    /* unbatched input works and gives 2-D states */
    ct_tensor *u = ct_zeros(CT_SHAPE(6, 3), CT_F32);
    assert_int_equal(ct_module_forward_multi(lstm, &u, 1, outs, 3), CT_OK);
    assert_int_equal(ct_ndim(outs[0]), 2);
    assert_int_equal(ct_ndim(outs[2]), 2);
    ct_module_release(lstm);
    EXPECT_ERR(ct_lstm_new(3, 0, 1, true, false, 0, false), CT_ERR_ARG, "hidden_size must be positive");
    /* NULL propagates */
    ct_clear_error();
    assert_null(ct_batch_norm(NULL, NULL, NULL, NULL, NULL, true, 0.1, 1e-5));
    assert_null(ct_layer_norm(NULL, CT_SHAPE(3), NULL, NULL, 1e-5));
    assert_null(ct_embedding(NULL, wt, CT_PADDING_IDX_NONE, NAN, 2, false));
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),   cmocka_unit_test(test_repr),   cmocka_unit_test(test_keys_and_init),
        cmocka_unit_test(test_dropout),    cmocka_unit_test(test_functional), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
