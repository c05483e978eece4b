/* test_compile_models.c -- the repo's models under ct_compile: small
 * configurations of BERT, GPT-2, ResNet-18, a CNN, an MLP and the
 * Transformer encoder layer, compiled with ct_module_compile or as a
 * function of tensors.  Forward passes (eval, no grad) and forward +
 * backward (train mode, gradients of every parameter) equal eager's at
 * float32 tolerance, and the compiled graph really ran (no eager fallback,
 * counted by ct_compiled_stats); training runs through the joint
 * forward + backward graph.  The models are small so that the test
 * stays fast; the full-size ones are benchmarked by bench_compile. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/compile_impl.h"
#include "ctorch/ctorch.h"
#include "ctorch/models.h"

#include "compile_test_util.h"

static void assert_close_tol(ct_tensor *a, ct_tensor *b, double rtol, double atol, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    if (!ct_allclose(a, b, rtol, atol, true)) {
        ct_tensor *d = ct_amax(ct_abs(ct_sub(a, b)), NULL, 0, false);
        fail_msg("%s: compiled differs from eager (max |diff| %g)", what, d ? ct_item(d) : -1.0);
    }
}

/* the compiled graph ran: no call fell back to eager */
static void assert_compiled(ct_compiled *c) {
    assert_non_null(c);
    ct_compile_stats s = ct_compiled_stats(c);
    if (s.eager_calls) {
        char *x = ct_compile_explain(c);
        fprintf(stderr, "%s", x ? x : "?");
        fail_msg("%lld of %lld calls ran eagerly (explained above)", (long long)s.eager_calls, (long long)s.calls);
    }
}

/* m's parameters' gradients, cloned */
static int grads_of(ct_module *m, ct_tensor **g, int cap) {
    ct_tensor *ps[256];
    int n = ct_module_named_parameters(m, NULL, ps, 256);
    assert_true(n <= cap);
    for (int i = 0; i < n; i++) g[i] = ct_grad(ps[i]) ? ct_clone(ct_grad(ps[i])) : NULL;
    return n;
}

/* Eager forward (+ backward of sum(y^2) when train) vs the same through
 * ct_module_compile, twice (the second call runs the cached variant). */
static void check_module(ct_module *m, ct_tensor *const *in, int nin, bool train, double rtol, double atol,
                         bool must_compile) {
    ct_tensor *ge[256] = {0}, *gc[256] = {0};
    ct_module_train(m, train);
    bool prev = ct_set_grad_enabled(train);
    ct_module_zero_grad(m);
    ct_tensor *ye = ct_module_forward(m, in, nin);
    assert_non_null(ye);
    int ng = 0;
    if (train) {
        assert_int_equal(ct_backward(ct_sum(ct_square(ye), NULL, 0, false), NULL, false, false), CT_OK);
        ng = grads_of(m, ge, 256);
    }
    assert_int_equal(ct_module_compile(m, NULL), CT_OK);
    for (int rep = 0; rep < 2; rep++) {
        ct_module_zero_grad(m);
        ct_tensor *yc = ct_module_forward(m, in, nin);
        assert_close_tol(yc, ye, rtol, atol, "output");
        if (train) {
            assert_int_equal(ct_backward(ct_sum(ct_square(yc), NULL, 0, false), NULL, false, false), CT_OK);
            assert_int_equal(grads_of(m, gc, 256), ng);
            for (int i = 0; i < ng; i++)
                if (ge[i]) assert_close_tol(gc[i], ge[i], rtol, atol * 10, "gradient");
        }
    }
    if (must_compile) assert_compiled(ct__module_compiled(m));
    ct_set_grad_enabled(prev);
}

static void t_cnn(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(11);
    ct_conv_opts co = {.padding = (const int64_t[]){1, 1}};
    ct_module *mods[] = {ct_conv2d_new(3, 8, (int64_t[]){3, 3}, &co), ct_relu_new(),
                         ct_max_pool2d_new((int64_t[]){2, 2}, (int64_t[]){2, 2}, (int64_t[]){0, 0},
                                           (int64_t[]){1, 1}, false, false),
                         ct_flatten_new(1, -1), ct_linear_new(8 * 8 * 8, 10, true)};
    ct_module *m = ct_sequential_new(mods, 5);
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3, 16, 16), CT_F32);
    check_module(m, &x, 1, false, 1e-5, 1e-5, true);
    ct_module_release(m);
    m = ct_sequential_new(mods, 5);
    check_module(m, &x, 1, true, 1e-4, 1e-5, true);
    ct_module_release(m);
    for (int i = 0; i < 5; i++) ct_module_release(mods[i]);
    END;
}

/* An eval model whose encoder traced its inference fast path: the graph
 * holds the fused rows (add_layer_norm, bias_act) as single nodes, and
 * exactly `kernels` fused kernels were built or loaded (none for them) */
static void assert_fast_rows(ct_compiled *c, int64_t kernels) {
    char *ex = ct_compile_explain(c);
    assert_non_null(ex);
    bool ok = strstr(ex, "= add_layer_norm(") && strstr(ex, "= bias_act(");
    if (!ok) fprintf(stderr, "%s", ex);
    free(ex);
    assert_true(ok);
    ct_compile_stats st = ct_compiled_stats(c);
    assert_int_equal(st.kernels_built + st.kernels_loaded, kernels);
}

static void t_transformer_layer(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(12);
    ct_module *l = ct_transformer_encoder_layer_new(32, 4, 64, 0.0, CT_TRANSFORMER_GELU, 1e-5, true, false, true);
    assert_non_null(l);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 10, 32), CT_F32);
    check_module(l, &x, 1, false, 1e-4, 1e-5, true);
    /* inference: the trace follows the fast path (transformer_fast.c), so
     * the graph holds its fused rows (add_layer_norm, bias_act) as single
     * nodes, and nothing needs a C compiler */
    assert_fast_rows(ct__module_compiled(l), 0);
    ct_module_release(l);
    /* the same with the sequence first (a transpose in and out) and the
     * norms first (the residual added in place) */
    l = ct_transformer_encoder_layer_new(32, 4, 64, 0.0, CT_TRANSFORMER_RELU, 1e-5, false, true, true);
    ct_tensor *xs = ct_randn(CT_SHAPE(10, 3, 32), CT_F32);
    check_module(l, &xs, 1, false, 1e-4, 1e-5, true);
    assert_fast_rows(ct__module_compiled(l), 0);
    ct_module_release(l);
    l = ct_transformer_encoder_layer_new(32, 4, 64, 0.0, CT_TRANSFORMER_RELU, 1e-5, true, true, true);
    /* training: through the joint forward + backward graph (the fused
     * layer norm's custom autograd function is traced through) */
    check_module(l, &x, 1, true, 1e-4, 1e-5, true);
    char *ex = ct_compile_explain(ct__module_compiled(l));
    assert_non_null(strstr(ex, "joint forward + backward graph"));
    free(ex);
    ct_module_release(l);
    END;
}

static void t_resnet18(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(13);
    ct_module *m = ct_resnet18_new(10);
    assert_non_null(m);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 32, 32), CT_F32);
    check_module(m, &x, 1, false, 1e-4, 1e-4, true);
    ct_module_release(m);
    /* training: batch statistics and gradients */
    ct_manual_seed(13);
    m = ct_resnet18_new(10);
    check_module(m, &x, 1, true, 1e-3, 1e-4, true);
    ct_module_release(m);
    /* the running statistics, updated in place by each training call */
    ct_manual_seed(13);
    ct_module *a = ct_resnet18_new(10);
    ct_manual_seed(13);
    ct_module *b = ct_resnet18_new(10);
    assert_int_equal(ct_module_compile(b, NULL), CT_OK);
    for (int rep = 0; rep < 2; rep++) {
        assert_non_null(ct_module_forward(a, &x, 1));
        assert_non_null(ct_module_forward(b, &x, 1));
    }
    const char *na[128];
    ct_tensor *ba[128], *bb[128];
    int nb = ct_module_named_buffers(a, na, ba, 128);
    assert_int_equal(ct_module_named_buffers(b, NULL, bb, 128), nb);
    assert_true(nb > 0);
    for (int i = 0; i < nb; i++) assert_close_tol(bb[i], ba[i], 1e-4, 1e-5, na[i]);
    assert_compiled(ct__module_compiled(b));
    ct_module_release(a);
    ct_module_release(b);
    END;
}

static ct_bert_config tiny_bert(void) {
    ct_bert_config c = ct_bert_base_config();
    c.vocab_size = 97;
    c.hidden_size = 32;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 64;
    c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.0;
    c.attention_probs_dropout_prob = 0.0;
    return c;
}

static void t_bert(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(14);
    ct_bert_config c = tiny_bert();
    ct_module *m = ct_bert_for_sequence_classification_new(&c, 3);
    assert_non_null(m);
    int64_t ids[2 * 12];
    for (int i = 0; i < 24; i++) ids[i] = (i * 37 + 5) % 97;
    int64_t mask[2 * 12];
    for (int i = 0; i < 24; i++) mask[i] = i % 12 < (i < 12 ? 12 : 8);
    ct_tensor *in[2] = {ct_from_array(ids, CT_SHAPE(2, 12), CT_I64), ct_from_array(mask, CT_SHAPE(2, 12), CT_I64)};
    check_module(m, in, 2, false, 1e-4, 1e-5, true);
    ct_module_release(m);
    /* without a mask, inference traces the encoder's fast path: its fused
     * rows are single nodes, no kernel is built for them */
    m = ct_bert_for_sequence_classification_new(&c, 3);
    assert_non_null(m);
    check_module(m, in, 1, false, 1e-4, 1e-5, true);
    ct_compiled *cb = ct__module_compiled(m);
    /* one kernel: the embeddings' last sum and their layer norm, fused */
    assert_fast_rows(cb, 1);
    char *ex = ct_compile_explain(cb);
    char *pl = strstr(ex, "plan: ");
    assert_non_null(pl);
    assert_non_null(strstr(pl, "kernel fused_add_layer_norm_fwd"));
    free(ex);
    ct_module_release(m);
    END;
}

/* GPT-2's loss as a function of tensors: {ids, targets} -> {loss} */
static ct_status gpt_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    return ct_gpt2_forward(ctx, in[0], in[1], NULL, NULL, &out[0]);
}

static void t_gpt2(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(15);
    ct_gpt2_config c = ct_gpt2_small_config();
    c.vocab_size = 61;
    c.n_positions = 32;
    c.n_embd = 32;
    c.n_layer = 2;
    c.n_head = 4;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0;
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    assert_non_null(m);
    ct_module_eval(m);
    int64_t ids[2 * 16], tg[2 * 16];
    for (int i = 0; i < 32; i++) ids[i] = (i * 7 + 3) % 61, tg[i] = (i * 11 + 1) % 61;
    ct_tensor *in[2] = {ct_from_array(ids, CT_SHAPE(2, 16), CT_I64), ct_from_array(tg, CT_SHAPE(2, 16), CT_I64)};
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *le = NULL, *lc = NULL;
    assert_int_equal(gpt_loss(in, 2, &le, 1, m), CT_OK);
    ct_compiled *f = ct_compile(gpt_loss, m, NULL);
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(ct_compiled_call(f, in, 2, &lc, 1), CT_OK);
        assert_close_tol(lc, le, 1e-5, 1e-6, "loss");
    }
    assert_compiled(f);
    ct_set_grad_enabled(prev);
    ct_compiled_free(f);
    /* training: the loss's gradients through the joint graph equal eager's */
    ct_module_train(m, true);
    ct_tensor *ge[256] = {0}, *gc[256] = {0};
    ct_module_zero_grad(m);
    assert_int_equal(gpt_loss(in, 2, &le, 1, m), CT_OK);
    assert_int_equal(ct_backward(le, NULL, false, false), CT_OK);
    int ng = grads_of(m, ge, 256);
    f = ct_compile(gpt_loss, m, NULL);
    for (int rep = 0; rep < 2; rep++) {
        ct_module_zero_grad(m);
        assert_int_equal(ct_compiled_call(f, in, 2, &lc, 1), CT_OK);
        assert_close_tol(lc, le, 1e-5, 1e-6, "training loss");
        assert_int_equal(ct_backward(lc, NULL, false, false), CT_OK);
        assert_int_equal(grads_of(m, gc, 256), ng);
        const char *names[256];
        ct_tensor *pp[256];
        ct_module_named_parameters(m, names, pp, 256);
        for (int i = 0; i < ng; i++)
            if (ge[i]) assert_close_tol(gc[i], ge[i], 1e-4, 1e-6, names[i]);
    }
    assert_compiled(f);
    char *ex = ct_compile_explain(f);
    assert_non_null(strstr(ex, "joint forward + backward graph"));
    free(ex);
    ct_compiled_free(f);
    ct_module_release(m);
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_cnn), cmocka_unit_test(t_transformer_layer), cmocka_unit_test(t_resnet18),
        cmocka_unit_test(t_bert), cmocka_unit_test(t_gpt2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
