/* test_gpt.c -- GPT-2 (models.h section "gpt") against Hugging Face's
 * GPT2LMHeadModel:
 *
 *  - a tiny random GPT-2 saved by transformers (HF keys, lm_head.weight left
 *    out as save_pretrained does) loads with ct_gpt2_load; logits, loss and
 *    gradients equal transformers' (tests/fixtures/gpt_tiny*.safetensors);
 *  - greedy generation equals transformers' generate(), with and without
 *    the KV cache; sampled generation with the cache equals it without,
 *    also past n_positions; incremental logits equal full-sequence logits;
 *  - state-dict keys and order, tying, initialization, a few training
 *    steps, error paths, no leaks.
 * Fixtures: python3 tools/fixtures/gen_gpt.py tests/fixtures (pyenv python3
 * with transformers). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>
#include <ctorch/io.h>
#include <ctorch/models.h>
#include <ctorch/optim.h>

#define WEIGHTS CT_FIXTURE_DIR "/gpt_tiny.safetensors"
#define EXPECTED CT_FIXTURE_DIR "/gpt_tiny_expected.safetensors"

static ct_gpt2_config tiny_config(void) {
    ct_gpt2_config c = ct_gpt2_small_config();
    c.vocab_size = 50;
    c.n_positions = 16;
    c.n_embd = 32;
    c.n_layer = 2;
    c.n_head = 4;
    return c;
}

static ct_module *tiny_loaded(void) {
    ct_gpt2_config c = tiny_config();
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    assert_non_null(m);
    ct_status st = ct_gpt2_load(WEIGHTS, m);
    if (st) fprintf(stderr, "%s\n", ct_last_error());
    assert_int_equal(st, CT_OK);
    ct_module_eval(m);
    return m;
}

static ct_tensor *param(ct_module *m, const char *name) {
    const char *names[64];
    ct_tensor *ps[64];
    int n = ct_module_named_parameters(m, names, ps, 64);
    for (int i = 0; i < n && i < 64; i++)
        if (!strcmp(names[i], name)) return ps[i];
    return NULL;
}

static void assert_close(ct_tensor *a, ct_tensor *b, double rtol, double atol, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    int ok = ct_allclose(a, ct_to_dtype(b, ct_get_dtype(a)), rtol, atol, false);
    if (ok != 1) {
        double d = ct_item(ct_max(ct_abs(ct_sub(a, ct_to_dtype(b, ct_get_dtype(a))))));
        fprintf(stderr, "%s: max abs diff %g\n", what, d);
    }
    assert_int_equal(ok, 1);
}

/* targets[b, t] = ids[b, t + 1], -100 at the end (HF's shifted labels). */
static ct_tensor *shifted_targets(ct_tensor *ids) {
    int64_t pad[2] = {0, 1};
    return ct_pad(ct_slice(ids, 1, 1, INT64_MAX, 1), pad, 2, CT_PAD_CONSTANT, -100);
}

static void test_hf_logits_loss_grads(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_module *m = tiny_loaded();
    ct_scope s = ct_scope_begin();
    ct_sample *exp = ct_safetensors_load(EXPECTED);
    assert_non_null(exp);
    ct_tensor *ids = ct_sample_get(exp, "input_ids");
    ct_tensor *logits = NULL, *loss = NULL;
    assert_int_equal(ct_gpt2_forward(m, ids, shifted_targets(ids), NULL, &logits, &loss), CT_OK);
    assert_close(logits, ct_sample_get(exp, "logits"), 1e-5, 1e-5, "logits");
    assert_close(loss, ct_sample_get(exp, "loss"), 1e-5, 1e-6, "loss");
    /* the module API gives the same */
    ct_tensor *lg2 = ct_module_forward1(m, ids);
    assert_close(lg2, logits, 0, 0, "module forward");
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    for (int i = 0; i < ct_sample_count(exp); i++) {
        const char *k = ct_sample_name(exp, i);
        if (strncmp(k, "grad.", 5)) continue;
        ct_tensor *p = param(m, k + 5);
        assert_non_null(p);
        assert_close(ct_grad(p), ct_sample_at(exp, i), 1e-4, 1e-6, k);
    }
    /* unbatched input gives the rows of the batched one */
    ct_tensor *l1 = NULL;
    assert_int_equal(ct_gpt2_forward(m, ct_select(ids, 0, 1), NULL, NULL, &l1, NULL), CT_OK);
    assert_int_equal(ct_ndim(l1), 2);
    assert_close(l1, ct_select(logits, 0, 1), 1e-6, 1e-6, "unbatched");
    ct_sample_free(exp);
    ct_scope_end(s);
    ct_module_release(m);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_hf_greedy(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_module *m = tiny_loaded();
    ct_scope s = ct_scope_begin();
    ct_sample *exp = ct_safetensors_load(EXPECTED);
    assert_non_null(exp);
    ct_tensor *prompt = ct_slice(ct_sample_get(exp, "input_ids"), 1, 0, 4, 1);
    ct_tensor *want = ct_sample_get(exp, "generate.greedy");
    for (int cache = 0; cache < 2; cache++) {
        ct_gpt2_generate_opts o = {.max_new_tokens = 8, .use_cache = cache};
        ct_tensor *got = ct_gpt2_generate(m, prompt, &o);
        assert_non_null(got);
        assert_int_equal(ct_equal(got, want), 1);
    }
    assert_false(ct_module_is_training(m));
    ct_sample_free(exp);
    ct_scope_end(s);
    ct_module_release(m);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_cache_equals_no_cache(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_module *m = tiny_loaded();
    ct_module_train(m, true); /* generate must switch dropout off and restore the flag */
    ct_scope s = ct_scope_begin();
    ct_tensor *prompt = ct_from_array((const int64_t[]){3, 14, 15, 9, 2, 6}, CT_SHAPE(2, 3), CT_I64);
    /* sampled, 25 new tokens: the window slides past n_positions 16 */
    ct_gpt2_generate_opts o = {.max_new_tokens = 25, .temperature = 0.9, .top_k = 10, .seed = 42};
    ct_tensor *a = ct_gpt2_generate(m, prompt, &o);
    o.use_cache = true;
    ct_tensor *b = ct_gpt2_generate(m, prompt, &o);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_size(a, 1), 28);
    assert_int_equal(ct_equal(a, b), 1);
    assert_int_equal(ct_equal(ct_slice(a, 1, 0, 3, 1), prompt), 1);
    /* the same seed gives the same text, another seed another one */
    ct_tensor *c = ct_gpt2_generate(m, prompt, &o);
    assert_int_equal(ct_equal(b, c), 1);
    o.seed = 43;
    ct_tensor *d = ct_gpt2_generate(m, prompt, &o);
    assert_int_equal(ct_equal(b, d), 0);
    assert_true(ct_module_is_training(m));
    ct_module_eval(m);

    /* incremental logits: 5 tokens, then 1, then a chunk of 4 (the shifted
     * causal mask), then 1, equal the full 11-token forward */
    ct_tensor *ids = ct_slice(a, 1, 0, 11, 1), *full = NULL;
    assert_int_equal(ct_gpt2_forward(m, ids, NULL, NULL, &full, NULL), CT_OK);
    ct_gpt2_kv_cache *kv = ct_gpt2_kv_cache_new(m, 2, 0);
    assert_non_null(kv);
    int64_t cuts[5] = {0, 5, 6, 10, 11};
    for (int i = 0; i < 4; i++) {
        ct_tensor *part = NULL;
        assert_int_equal(ct_gpt2_forward(m, ct_slice(ids, 1, cuts[i], cuts[i + 1], 1), NULL, kv, &part, NULL),
                         CT_OK);
        assert_false(ct_requires_grad(part));
        assert_close(part, ct_slice(full, 1, cuts[i], cuts[i + 1], 1), 1e-5, 1e-5, "incremental");
        assert_int_equal(ct_gpt2_kv_cache_length(kv), cuts[i + 1]);
    }
    ct_gpt2_kv_cache_reset(kv);
    assert_int_equal(ct_gpt2_kv_cache_length(kv), 0);
    ct_gpt2_kv_cache_free(kv);
    ct_scope_end(s);
    ct_module_release(m);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_keys_and_tying(void **state) {
    (void)state;
    ct_gpt2_config c = tiny_config();
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    assert_non_null(m);
    ct_sample *sd = ct_module_state_dict(m);
    assert_non_null(sd);
    const char *per_layer[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
    char want[64][64];
    int n = 0;
    snprintf(want[n++], 64, "transformer.wte.weight");
    snprintf(want[n++], 64, "transformer.wpe.weight");
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 12; k++) snprintf(want[n++], 64, "transformer.h.%d.%s", l, per_layer[k]);
    snprintf(want[n++], 64, "transformer.ln_f.weight");
    snprintf(want[n++], 64, "transformer.ln_f.bias");
    snprintf(want[n++], 64, "lm_head.weight");
    assert_int_equal(ct_sample_count(sd), n);
    for (int i = 0; i < n; i++) assert_string_equal(ct_sample_name(sd, i), want[i]);
    /* Conv1D layout [in, out] */
    ct_tensor *ca = ct_sample_get(sd, "transformer.h.0.attn.c_attn.weight");
    assert_int_equal(ct_size(ca, 0), 32);
    assert_int_equal(ct_size(ca, 1), 96);
    assert_int_equal(ct_size(ct_sample_get(sd, "transformer.h.1.mlp.c_fc.weight"), 1), 128);
    /* tied: one tensor under two keys, counted once */
    assert_ptr_equal(ct_sample_get(sd, "lm_head.weight"), ct_sample_get(sd, "transformer.wte.weight"));
    assert_int_equal(ct_module_num_parameters(m, false),
                     50 * 32 + 16 * 32 + 2 * (4 * 32 + 32 * 96 + 96 + 32 * 32 + 32 + 32 * 128 + 128 + 128 * 32 + 32) +
                         2 * 32);
    ct_sample_free(sd);
    /* the HF file has no lm_head.weight: a strict generic load names it */
    assert_int_not_equal(ct_load_module(WEIGHTS, m, true), CT_OK);
    assert_non_null(strstr(ct_last_error(), "lm_head.weight"));
    assert_int_equal(ct_load_module(WEIGHTS, m, false), CT_OK);
    /* our own checkpoint round-trips with the generic loader */
    char path[] = "/tmp/ct_test_gpt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(ct_save_module(path, m), CT_OK);
    ct_module *m2 = ct_gpt2_lm_head_model_new(&c);
    assert_int_equal(ct_load_module(path, m2, true), CT_OK);
    ct_scope s = ct_scope_begin();
    ct_tensor *ids = ct_from_array((const int64_t[]){1, 2, 3, 4}, CT_SHAPE(1, 4), CT_I64);
    ct_module_eval(m);
    ct_module_eval(m2);
    assert_int_equal(ct_equal(ct_module_forward1(m, ids), ct_module_forward1(m2, ids)), 1);
    ct_scope_end(s);
    remove(path);
    char *str = ct_module_to_string(m);
    assert_non_null(str);
    assert_non_null(strstr(str, "(c_attn): Conv1D(nf=96, nx=32)"));
    assert_non_null(strstr(str, "(lm_head): Linear(in_features=32, out_features=50, bias=False)"));
    free(str);
    ct_gpt2_config got = ct_gpt2_get_config(m);
    assert_int_equal(got.n_embd, 32);
    ct_module_release(m2);
    ct_module_release(m);
}

static double std_of(ct_tensor *t) { return ct_item(ct_std(t, NULL, 0, 1, false)); }

static void test_init(void **state) {
    (void)state;
    ct_manual_seed(7);
    ct_gpt2_config c = tiny_config();
    c.n_embd = 64;
    c.n_layer = 2;
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    assert_non_null(m);
    ct_scope s = ct_scope_begin();
    assert_true(fabs(std_of(param(m, "transformer.h.0.attn.c_attn.weight")) - 0.02) < 0.001);
    assert_true(fabs(std_of(param(m, "transformer.h.1.mlp.c_fc.weight")) - 0.02) < 0.001);
    assert_true(fabs(std_of(param(m, "transformer.h.0.attn.c_proj.weight")) - 0.01) < 0.0006);
    assert_true(fabs(std_of(param(m, "transformer.h.1.mlp.c_proj.weight")) - 0.01) < 0.0006);
    assert_true(fabs(std_of(param(m, "transformer.wte.weight")) - 0.02) < 0.002);
    assert_true(ct_item(ct_amax(ct_abs(param(m, "transformer.h.0.attn.c_attn.bias")), NULL, 0, false)) == 0.0);
    assert_true(ct_item(ct_mean(param(m, "transformer.ln_f.weight"), NULL, 0, false)) == 1.0);
    ct_scope_end(s);
    ct_module_release(m);
}

static void test_train_steps(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(3);
    ct_gpt2_config c = tiny_config();
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0;
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    ct_tensor *ps[64];
    int np = ct_module_named_parameters(m, NULL, ps, 64);
    ct_optimizer *opt = ct_adamw_new(ps, np, 1e-2, 0.9, 0.99, 1e-8, 0.0, false, false);
    assert_non_null(opt);
    ct_scope s0 = ct_scope_begin();
    ct_tensor *ids = ct_randint(0, 50, CT_SHAPE(4, 9), CT_I64);
    ct_tensor *x = ct_slice(ids, 1, 0, 8, 1), *y = ct_slice(ids, 1, 1, 9, 1);
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        ct_scope s = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        ct_tensor *out[2] = {0};
        assert_int_equal(ct_module_forward_multi(m, (ct_tensor *const[]){x, y}, 2, out, 2), CT_OK);
        assert_int_equal(ct_backward(out[1], NULL, false, false), CT_OK);
        assert_int_equal(ct_clip_grad_norm_(ps, np, 1.0, 2.0, false, NULL), CT_OK);
        assert_int_equal(ct_optim_step(opt), CT_OK);
        if (step == 0) first = ct_item(out[1]);
        last = ct_item(out[1]);
        ct_scope_end(s);
    }
    assert_true(fabs(first - log(50.0)) < 0.3);
    assert_true(last < first - 1.0);
    ct_scope_end(s0);
    ct_optim_free(opt);
    ct_module_release(m);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_gpt2_config c = tiny_config();
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    assert_non_null(m);
    ct_scope s = ct_scope_begin();
    ct_tensor *lg = NULL, *loss = NULL;
    /* longer than n_positions */
    ct_tensor *long_ids = ct_zeros(CT_SHAPE(1, 17), CT_I64);
    assert_int_not_equal(ct_gpt2_forward(m, long_ids, NULL, NULL, &lg, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "exceeds n_positions 16"));
    assert_null(ct_module_forward1(m, long_ids));
    /* token ids out of range */
    ct_tensor *bad = ct_from_array((const int64_t[]){1, 50}, CT_SHAPE(1, 2), CT_I64);
    assert_int_not_equal(ct_gpt2_forward(m, bad, NULL, NULL, &lg, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "50"));
    bad = ct_from_array((const int64_t[]){-1, 3}, CT_SHAPE(1, 2), CT_I64);
    assert_int_not_equal(ct_gpt2_forward(m, bad, NULL, NULL, &lg, NULL), CT_OK);
    /* float ids, 3-D ids, empty sequence, NULLs */
    assert_int_not_equal(ct_gpt2_forward(m, ct_zeros(CT_SHAPE(1, 3), CT_F32), NULL, NULL, &lg, NULL), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(m, ct_zeros(CT_SHAPE(1, 1, 3), CT_I64), NULL, NULL, &lg, NULL), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(m, ct_zeros(CT_SHAPE(1, 0), CT_I64), NULL, NULL, &lg, NULL), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(m, NULL, NULL, NULL, &lg, NULL), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(NULL, long_ids, NULL, NULL, &lg, NULL), CT_OK);
    ct_module *lin = ct_linear_new(2, 2, true);
    assert_int_not_equal(ct_gpt2_forward(lin, long_ids, NULL, NULL, &lg, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "expected a GPT2LMHeadModel"));
    ct_module_release(lin);
    /* targets: wrong shape, loss without targets */
    ct_tensor *ids = ct_zeros(CT_SHAPE(2, 4), CT_I64);
    assert_int_not_equal(ct_gpt2_forward(m, ids, ct_zeros(CT_SHAPE(2, 3), CT_I64), NULL, &lg, &loss), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(m, ids, NULL, NULL, &lg, &loss), CT_OK);
    /* KV cache: overflow, batch mismatch, bad sizes */
    ct_gpt2_kv_cache *kv = ct_gpt2_kv_cache_new(m, 2, 6);
    assert_non_null(kv);
    assert_int_equal(ct_gpt2_forward(m, ids, NULL, kv, &lg, NULL), CT_OK);
    assert_int_not_equal(ct_gpt2_forward(m, ids, NULL, kv, &lg, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "exceeds the KV cache's max_len 6"));
    assert_int_equal(ct_gpt2_kv_cache_length(kv), 4);
    assert_int_not_equal(ct_gpt2_forward(m, ct_zeros(CT_SHAPE(3, 1), CT_I64), NULL, kv, &lg, NULL), CT_OK);
    ct_gpt2_kv_cache_free(kv);
    assert_null(ct_gpt2_kv_cache_new(m, 0, 4));
    assert_null(ct_gpt2_kv_cache_new(m, 1, 17));
    /* generation arguments */
    ct_gpt2_generate_opts o = {.max_new_tokens = -1};
    assert_null(ct_gpt2_generate(m, ids, &o));
    assert_null(ct_gpt2_generate(m, ids, NULL));
    o.max_new_tokens = 2;
    assert_null(ct_gpt2_generate(m, ct_zeros(CT_SHAPE(4), CT_I64), &o));
    /* configurations */
    ct_gpt2_config bc = c;
    bc.n_head = 5;
    assert_null(ct_gpt2_lm_head_model_new(&bc));
    bc = c;
    bc.attn_pdrop = 1.5;
    assert_null(ct_gpt2_lm_head_model_new(&bc));
    assert_null(ct_gpt2_lm_head_model_new(NULL));
    /* loading: missing file, wrong shapes */
    assert_int_not_equal(ct_gpt2_load("/nonexistent/gpt.safetensors", m), CT_OK);
    bc = c;
    bc.n_embd = 16;
    ct_module *small = ct_gpt2_lm_head_model_new(&bc);
    assert_int_not_equal(ct_gpt2_load(WEIGHTS, small), CT_OK);
    ct_module_release(small);
    ct_scope_end(s);
    ct_module_release(m);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_logits_loss_grads), cmocka_unit_test(test_hf_greedy),
        cmocka_unit_test(test_cache_equals_no_cache), cmocka_unit_test(test_keys_and_tying),
        cmocka_unit_test(test_init), cmocka_unit_test(test_train_steps), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
