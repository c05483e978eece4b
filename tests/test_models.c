/* test_models.c -- the seed models (models.h): torchvision's ResNet / VGG and
 * Hugging Face's BertModel.
 *
 *  - state-dict keys, dtypes, shapes (in order) and parameter counts equal
 *    torchvision's / transformers' (tests/fixtures/models_keys.txt);
 *  - forward outputs equal torch's from the same weights
 *    (tests/fixtures/models.txt): ResNet-18 and ResNet-50 on [2, 3, 64, 64],
 *    VGG-16 on [1, 3, 32, 32], a tiny BERT with a padding mask and token
 *    types, and its sequence-classification head.  The weights are not in
 *    the fixture: both sides fill the state dict with the integer formula
 *    det_fill (tools/fixtures/gen_models.py has its twin);
 *  - default initialization, a training step, error paths, no leaks.
 * Fixtures: python3 tools/fixtures/gen_models.py tests/fixtures */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixture.h"

/* ---- deterministic weights (twin of det_fill in gen_models.py) ---------------- */
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static void det_fill(ct_module *m) {
    ct_sample *sd = ct_module_state_dict(m);
    assert_non_null(sd);
    int64_t c = 0;
    for (int i = 0; i < ct_sample_count(sd); i++) {
        const char *k = ct_sample_name(sd, i);
        ct_tensor *t = ct_sample_at(sd, i);
        if (!ct_dtype_is_floating(ct_get_dtype(t))) continue;
        assert_int_equal(ct_get_dtype(t), CT_F32);
        assert_true(ct_is_contiguous(t));
        float *p = ct_data_ptr(t);
        int64_t n = ct_numel(t);
        int s = 0;
        if (ct_ndim(t) >= 2) {
            int64_t fan_in = n / ct_size(t, 0);
            while (((int64_t)1 << (2 * (s + 1))) <= fan_in) s++;
            s = s > 0 ? s - 1 : 0;
        }
        for (int64_t j = 0; j < n; j++) {
            int64_t h = ((c + j + 1) * 1103515245 + 12345) % 2147483647;
            double v = (double)(h % 2001 - 1000);
            if (ends_with(k, "running_var")) v = 1.0 + fabs(v) / 4096.0;
            else if (ends_with(k, "running_mean")) v = v / 8192.0;
            else if (ct_ndim(t) == 1 && ends_with(k, "weight")) v = 1.0 + v / 8192.0;
            else if (ct_ndim(t) == 1) v = v / 16384.0;
            else v = v / 1024.0 / ldexp(1.0, s);
            p[j] = (float)v;
        }
        c += n;
    }
    ct_sample_free(sd);
}

static ct_bert_config tiny_config(void) {
    ct_bert_config c = ct_bert_base_config();
    c.vocab_size = 100, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 64, c.max_position_embeddings = 16, c.type_vocab_size = 2;
    return c;
}

/* ---- forward fixtures ---------------------------------------------------------- */
#define NCACHE 8
static struct { char label[96]; ct_module *m; } g_cache[NCACHE];

static ct_module *build(const fx_case *c) {
    for (int i = 0; i < NCACHE; i++)
        if (g_cache[i].m && !strcmp(g_cache[i].label, c->label)) return g_cache[i].m;
    ct_module *m = NULL;
    if (!strcmp(c->op, "resnet")) {
        const char *arch = fx_s(c, "arch", "");
        int64_t nc = fx_i(c, "num_classes", 1000);
        m = !strcmp(arch, "resnet18") ? ct_resnet18_new(nc) : !strcmp(arch, "resnet50") ? ct_resnet50_new(nc) : NULL;
    } else if (!strcmp(c->op, "vgg")) {
        m = ct_vgg16_new(fx_i(c, "num_classes", 1000));
    } else {
        ct_bert_config cfg = ct_bert_base_config();
        cfg.vocab_size = fx_i(c, "vocab_size", 0);
        cfg.hidden_size = fx_i(c, "hidden_size", 0);
        cfg.num_hidden_layers = fx_i(c, "num_hidden_layers", 0);
        cfg.num_attention_heads = fx_i(c, "num_attention_heads", 0);
        cfg.intermediate_size = fx_i(c, "intermediate_size", 0);
        cfg.max_position_embeddings = fx_i(c, "max_position_embeddings", 0);
        cfg.type_vocab_size = fx_i(c, "type_vocab_size", 0);
        m = !strcmp(c->op, "bert") ? ct_bert_model_new(&cfg, true)
                                   : ct_bert_for_sequence_classification_new(&cfg, fx_i(c, "num_labels", 2));
    }
    if (!m) return NULL;
    det_fill(m);
    ct_module_eval(m);
    for (int i = 0; i < NCACHE; i++)
        if (!g_cache[i].m) {
            snprintf(g_cache[i].label, sizeof g_cache[i].label, "%s", c->label);
            g_cache[i].m = m;
            return m;
        }
    ct_module_release(m);
    return NULL;
}

static void free_cache(void) {
    for (int i = 0; i < NCACHE; i++) {
        ct_module_release(g_cache[i].m);
        g_cache[i].m = NULL;
    }
}

static ct_status run_model(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_module *m = build(c);
    if (!m) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    if (!strcmp(c->op, "bert")) {
        st = ct_module_forward_multi(m, in, c->nin, out, 2);
    } else {
        out[0] = ct_module_forward(m, in, c->nin);
        st = out[0] ? CT_OK : ct_last_error_code();
    }
    ct_set_grad_enabled(prev);
    return st;
}

static const fx_op k_ops[] = {
    {"resnet", run_model, 1e-5, 1e-5},
    {"vgg", run_model, 1e-5, 1e-5},
    {"bert", run_model, 1e-5, 1e-5},
    {"bert_cls", run_model, 1e-5, 1e-5},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/models.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    free_cache();
    fx_print_summary();
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- keys, shapes and parameter counts ----------------------------------------------- */
static ct_module *model_by_name(const char *name) {
    if (!strcmp(name, "resnet18")) return ct_resnet18_new(0);
    if (!strcmp(name, "resnet34")) return ct_resnet34_new(0);
    if (!strcmp(name, "resnet50")) return ct_resnet50_new(0);
    if (!strcmp(name, "resnet101")) return ct_resnet101_new(0);
    if (!strcmp(name, "vgg16")) return ct_vgg16_new(0);
    if (!strcmp(name, "vgg16_bn")) return ct_vgg_new(16, true, 0, 0.5);
    ct_bert_config base = ct_bert_base_config(), tiny = tiny_config();
    if (!strcmp(name, "bert_base")) return ct_bert_model_new(&base, true);
    if (!strcmp(name, "bert_tiny")) return ct_bert_model_new(&tiny, true);
    if (!strcmp(name, "bert_tiny_cls3")) return ct_bert_for_sequence_classification_new(&tiny, 3);
    return NULL;
}

static int check_model_keys(FILE *f, const char *name, int nkeys, long long nparams) {
    ct_module *m = model_by_name(name);
    if (!m) {
        fprintf(stderr, "%s: cannot build: %s\n", name, ct_last_error());
        return 1;
    }
    int bad = 0;
    ct_sample *sd = ct_module_state_dict(m);
    if (ct_sample_count(sd) != nkeys) {
        fprintf(stderr, "%s: %d keys, torch has %d\n", name, ct_sample_count(sd), nkeys);
        bad++;
    }
    long long np = (long long)ct_module_num_parameters(m, false);
    if (np != nparams) {
        fprintf(stderr, "%s: %lld parameters, torch has %lld\n", name, np, nparams);
        bad++;
    }
    char line[512];
    for (int i = 0; i < nkeys && fgets(line, sizeof line, f); i++) {
        char key[256], dt[32], dims[128];
        if (sscanf(line, "key %255s %31s %127s", key, dt, dims) != 3) {
            fprintf(stderr, "bad line: %s", line);
            bad++;
            break;
        }
        if (i >= ct_sample_count(sd)) continue;
        const char *ours = ct_sample_name(sd, i);
        ct_tensor *t = ct_sample_at(sd, i);
        char ourdims[128] = "-";
        size_t pos = 0;
        for (int d = 0; d < ct_ndim(t); d++)
            pos += snprintf(ourdims + pos, sizeof ourdims - pos, d ? ",%lld" : "%lld", (long long)ct_size(t, d));
        if (strcmp(ours, key) || strcmp(ct_dtype_name(ct_get_dtype(t)), dt) || strcmp(ourdims, dims)) {
            if (bad < 10)
                fprintf(stderr, "%s: key %d: ours %s %s [%s], torch %s %s [%s]\n", name, i, ours,
                        ct_dtype_name(ct_get_dtype(t)), ourdims, key, dt, dims);
            bad++;
        }
    }
    ct_sample_free(sd);
    ct_module_release(m);
    return bad;
}

static void test_keys(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    FILE *f = fopen(CT_FIXTURE_DIR "/models_keys.txt", "r");
    assert_non_null(f);
    char line[512];
    int models = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64];
        int nkeys;
        long long nparams;
        if (sscanf(line, "model %63s %d %lld", name, &nkeys, &nparams) != 3) continue;
        bad += check_model_keys(f, name, nkeys, nparams);
        models++;
    }
    fclose(f);
    assert_int_equal(models, 9);
    assert_int_equal(bad, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* The counts the issue names, exactly (test_keys checks ours equal the fixture's). */
static void test_param_counts(void **state) {
    (void)state;
    FILE *f = fopen(CT_FIXTURE_DIR "/models_keys.txt", "r");
    assert_non_null(f);
    char line[512];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        char name[64];
        int nkeys;
        long long np;
        if (sscanf(line, "model %63s %d %lld", name, &nkeys, &np) != 3) continue;
        if (!strcmp(name, "resnet50")) assert_int_equal(np, 25557032), found++;
        if (!strcmp(name, "vgg16")) assert_int_equal(np, 138357544), found++;
        if (!strcmp(name, "bert_base")) assert_int_equal(np, 109482240), found++;
    }
    fclose(f);
    assert_int_equal(found, 3);
    /* without the pooler: one hidden x hidden Linear less */
    ct_bert_config c = tiny_config();
    ct_module *m = ct_bert_model_new(&c, true), *m2 = ct_bert_model_new(&c, false);
    assert_non_null(m);
    assert_non_null(m2);
    assert_int_equal(ct_module_num_parameters(m, false) - ct_module_num_parameters(m2, false), 32 * 32 + 32);
    ct_module_release(m);
    ct_module_release(m2);
}

/* ---- initialization --------------------------------------------------------------- */
static double std_of(ct_tensor *t) { return ct_item(ct_std(t, NULL, 0, 1, false)); }
static double mean_of(ct_tensor *t) { return ct_item(ct_mean(t, NULL, 0, false)); }
static ct_tensor *param(ct_module *m, const char *path, const char *pname) {
    ct_module *sub = ct_module_get_submodule(m, path);
    assert_non_null(sub);
    const char *names[8];
    ct_tensor *ts[8];
    int n = ct_module_named_parameters(sub, names, ts, 8);
    for (int i = 0; i < n && i < 8; i++)
        if (!strcmp(names[i], pname)) return ts[i];
    fail_msg("%s.%s not found", path, pname);
    return NULL;
}

static void test_init(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(0);
    ct_scope s = ct_scope_begin();
    ct_module *r = ct_resnet18_new(10);
    assert_non_null(r);
    /* kaiming_normal_(fan_out, relu): std sqrt(2 / (out * k * k)) */
    assert_true(fabs(std_of(param(r, "layer3.0.conv1", "weight")) - sqrt(2.0 / (256 * 9))) < 0.002);
    assert_true(fabs(std_of(param(r, "conv1", "weight")) - sqrt(2.0 / (64 * 49))) < 0.002);
    assert_true(fabs(mean_of(param(r, "layer1.0.bn2", "weight")) - 1.0) < 1e-12);
    assert_true(fabs(std_of(param(r, "layer1.0.bn2", "bias"))) < 1e-12);
    /* fc keeps nn.Linear's default U(-1/sqrt(512), 1/sqrt(512)) */
    double b = 1.0 / sqrt(512.0);
    assert_true(ct_item(ct_amax(param(r, "fc", "weight"), NULL, 0, false)) <= b);
    assert_true(fabs(std_of(param(r, "fc", "weight")) - b / sqrt(3.0)) < 0.003);
    ct_module_release(r);
    ct_resnet_config zc = {CT_RESNET_BOTTLENECK, {1, 1, 1, 1}, 5, true, 0, 0};
    r = ct_resnet_new(&zc);
    assert_non_null(r);
    assert_true(fabs(std_of(param(r, "layer2.0.bn3", "weight"))) == 0 &&
                fabs(mean_of(param(r, "layer2.0.bn3", "weight"))) == 0);
    assert_true(mean_of(param(r, "layer2.0.bn2", "weight")) == 1.0);
    ct_module_release(r);

    ct_bert_config c = tiny_config();
    c.hidden_size = 64, c.vocab_size = 1000;
    ct_module *bert = ct_bert_model_new(&c, true);
    assert_non_null(bert);
    ct_tensor *we = param(bert, "embeddings.word_embeddings", "weight");
    assert_true(fabs(std_of(ct_slice(we, 0, 1, INT64_MAX, 1)) - 0.02) < 0.001);
    assert_true(ct_item(ct_amax(ct_abs(ct_select(we, 0, 0)), NULL, 0, false)) == 0.0);
    assert_true(fabs(std_of(param(bert, "encoder.layer.1.intermediate.dense", "weight")) - 0.02) < 0.001);
    assert_true(ct_item(ct_amax(ct_abs(param(bert, "encoder.layer.1.output.dense", "bias")), NULL, 0, false)) == 0.0);
    assert_true(mean_of(param(bert, "encoder.layer.0.attention.output.LayerNorm", "weight")) == 1.0);
    ct_module_release(bert);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- training steps ---------------------------------------------------------------- */
static void test_train_step(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(1);
    ct_scope s = ct_scope_begin();
    /* tiny BERT + classification head, dropout on */
    ct_bert_config c = tiny_config();
    ct_module *m = ct_bert_for_sequence_classification_new(&c, 3);
    assert_non_null(m);
    ct_module_train(m, true);
    ct_tensor *ids = ct_randint(0, 100, CT_SHAPE(2, 8), CT_I64);
    ct_tensor *mask = ct_ones(CT_SHAPE(2, 8), CT_I64);
    ct_tensor *in[2] = {ids, mask};
    ct_tensor *logits = ct_module_forward(m, in, 2);
    assert_non_null(logits);
    assert_int_equal(ct_size(logits, 1), 3);
    ct_tensor *y = ct_from_doubles((double[]){0, 2}, CT_SHAPE(2), CT_I64);
    ct_tensor *loss = ct_cross_entropy(logits, y, NULL);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    const char *names[64];
    ct_tensor *ps[64];
    int n = ct_module_named_parameters(m, names, ps, 64);
    assert_int_equal(n, 41 - 0);
    for (int i = 0; i < n; i++) {
        if (!ct_grad(ps[i])) fail_msg("no gradient for %s", names[i]);
    }
    /* the padding row of the word embeddings gets no gradient */
    ct_tensor *g = ct_grad(param(m, "bert.embeddings.word_embeddings", "weight"));
    assert_true(ct_item(ct_amax(ct_abs(ct_select(g, 0, 0)), NULL, 0, false)) == 0.0);
    ct_module_release(m);

    /* ResNet-18 on [2, 3, 32, 32]: backward and BatchNorm's running stats */
    m = ct_resnet18_new(4);
    assert_non_null(m);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 32, 32), CT_F32);
    loss = ct_cross_entropy(ct_module_forward1(m, x), ct_from_doubles((double[]){1, 3}, CT_SHAPE(2), CT_I64), NULL);
    assert_non_null(loss);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    assert_non_null(ct_grad(param(m, "conv1", "weight")));
    assert_non_null(ct_grad(param(m, "layer4.1.bn2", "weight")));
    ct_sample *sd = ct_module_state_dict(m);
    assert_int_equal(ct_item_int(ct_sample_get(sd, "bn1.num_batches_tracked")), 1);
    assert_true(ct_item(ct_amax(ct_abs(ct_sample_get(sd, "bn1.running_mean")), NULL, 0, false)) > 0);
    /* state dict round trip into a fresh model */
    ct_module *m2 = ct_resnet18_new(4);
    assert_int_equal(ct_module_load_state_dict(m2, sd, true), CT_OK);
    ct_module_eval(m);
    ct_module_eval(m2);
    assert_int_equal(ct_equal(ct_module_forward1(m, x), ct_module_forward1(m2, x)), 1);
    ct_sample_free(sd);
    ct_module_release(m2);
    ct_module_release(m);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- BertModel's entry points agree; errors ---------------------------------------- */
static void test_bert_api(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_bert_config c = tiny_config();
    ct_module *m = ct_bert_model_new(&c, true);
    assert_non_null(m);
    ct_module_eval(m);
    ct_tensor *ids = ct_randint(1, 100, CT_SHAPE(3, 5), CT_I64);
    ct_tensor *h = NULL, *p = NULL;
    assert_int_equal(ct_bert_forward(m, ids, NULL, NULL, &h, &p), CT_OK);
    assert_int_equal(ct_ndim(h), 3);
    assert_int_equal(ct_size(h, 2), 32);
    assert_int_equal(ct_size(p, 1), 32);
    assert_int_equal(ct_equal(ct_module_forward1(m, ids), h), 1);
    /* an all-ones mask and zero token types are the defaults */
    ct_tensor *ones = ct_ones(CT_SHAPE(3, 5), CT_F32), *zeros = ct_zeros(CT_SHAPE(3, 5), CT_I64);
    ct_tensor *in[3] = {ids, ones, zeros}, *out[2] = {0};
    assert_int_equal(ct_module_forward_multi(m, in, 3, out, 2), CT_OK);
    assert_int_equal(ct_allclose(out[0], h, 1e-6, 1e-6, false), 1);
    assert_int_equal(ct_allclose(out[1], p, 1e-6, 1e-6, false), 1);
    /* int32 ids work like int64 */
    assert_int_equal(ct_allclose(ct_module_forward1(m, ct_to_dtype(ids, CT_I32)), h, 1e-6, 1e-6, false), 1);
    /* grad mode off: the inference fast path (packed QKV, fused rows), with
     * no mask (rows moved by ops) and with the all-ones mask, against the
     * general path above */
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *hf = NULL, *hm = NULL;
    assert_int_equal(ct_bert_forward(m, ids, NULL, NULL, &hf, NULL), CT_OK);
    assert_int_equal(ct_bert_forward(m, ids, ones, NULL, &hm, NULL), CT_OK);
    ct_set_grad_enabled(prev);
    assert_int_equal(ct_allclose(hf, h, 1e-5, 1e-5, false), 1);
    assert_int_equal(ct_allclose(hm, h, 1e-5, 1e-5, false), 1);
    /* the fast path keeps its packed q/k/v projection between calls; each
     * way of changing a source parameter makes it again: an in-place op,
     * a copy_ (a state-dict load), a write through ct_data_ptr */
    {
        const char *names[64];
        ct_tensor *ps[64], *qw = NULL, *kb = NULL, *vw = NULL;
        int np = ct_module_named_parameters(m, names, ps, 64);
        for (int i = 0; i < np && i < 64; i++) {
            if (!strcmp(names[i], "encoder.layer.0.attention.self.query.weight")) qw = ps[i];
            if (!strcmp(names[i], "encoder.layer.1.attention.self.value.bias")) kb = ps[i];
            if (!strcmp(names[i], "encoder.layer.0.attention.self.value.weight")) vw = ps[i];
        }
        assert_non_null(qw);
        assert_non_null(kb);
        assert_non_null(vw);
        for (int change = 0; change < 3; change++) {
            prev = ct_set_grad_enabled(false);
            if (change == 0) assert_non_null(ct_mul_scalar_(qw, 50.0));
            if (change == 1) assert_non_null(ct_copy_(vw, ct_randn_like(vw)));
            if (change == 2) {
                float *pb = ct_data_ptr(kb);
                for (int j = 0; j < 32; j++) pb[j] += 3.0f;
            }
            ct_tensor *fast = NULL, *gen = NULL;
            assert_int_equal(ct_bert_forward(m, ids, NULL, NULL, &fast, NULL), CT_OK);
            ct_set_grad_enabled(true);
            assert_int_equal(ct_bert_forward(m, ids, NULL, NULL, &gen, NULL), CT_OK);
            ct_set_grad_enabled(prev);
            assert_int_equal(ct_allclose(gen, h, 1e-3, 1e-3, false), 0); /* the change shows */
            if (!ct_allclose(fast, gen, 1e-5, 1e-5, false)) fail_msg("change %d: the fast path kept stale weights", change);
        }
    }

    /* errors, never aborts */
    assert_null(ct_module_forward1(m, ct_to_dtype(ids, CT_F32)));
    assert_non_null(strstr(ct_last_error(), "input_ids"));
    assert_null(ct_module_forward1(m, ct_randint(1, 100, CT_SHAPE(1, 17), CT_I64)));
    assert_non_null(strstr(ct_last_error(), "max_position_embeddings"));
    assert_null(ct_module_forward1(m, ct_randint(1, 100, CT_SHAPE(2, 3, 4), CT_I64)));
    ct_tensor *bad[2] = {ids, ct_ones(CT_SHAPE(3, 4), CT_F32)};
    assert_null(ct_module_forward(m, bad, 2));
    assert_non_null(strstr(ct_last_error(), "attention_mask"));
    assert_null(ct_module_forward1(m, ct_from_doubles((double[]){5, 100}, CT_SHAPE(1, 2), CT_I64)));
    ct_tensor *four[4] = {ids, ones, zeros, zeros};
    assert_null(ct_module_forward(m, four, 4));
    assert_int_not_equal(ct_bert_forward(m, NULL, NULL, NULL, &h, NULL), CT_OK);
    assert_int_not_equal(ct_bert_forward(NULL, ids, NULL, NULL, &h, NULL), CT_OK);
    ct_module *nopool = ct_bert_model_new(&c, false);
    assert_non_null(nopool);
    assert_int_not_equal(ct_bert_forward(nopool, ids, NULL, NULL, &h, &p), CT_OK);
    assert_non_null(strstr(ct_last_error(), "pooler"));
    assert_int_equal(ct_bert_forward(nopool, ids, NULL, NULL, &h, NULL), CT_OK);
    ct_module_release(nopool);
    ct_module *r = ct_resnet18_new(2);
    assert_int_not_equal(ct_bert_forward(r, ids, NULL, NULL, &h, NULL), CT_OK);
    assert_null(ct_module_forward1(r, ct_randn(CT_SHAPE(3, 32, 32), CT_F32)));
    assert_null(ct_module_forward1(r, ct_randn(CT_SHAPE(1, 4, 32, 32), CT_F32)));
    ct_module_release(r);
    ct_module_release(m);

    ct_bert_config bc = tiny_config();
    bc.num_attention_heads = 3;
    assert_null(ct_bert_model_new(&bc, true));
    assert_non_null(strstr(ct_last_error(), "multiple"));
    bc = tiny_config();
    bc.pad_token_id = 100;
    assert_null(ct_bert_model_new(&bc, true));
    bc = tiny_config();
    bc.hidden_dropout_prob = 1.5;
    assert_null(ct_bert_model_new(&bc, true));
    bc = tiny_config();
    bc.vocab_size = 0;
    assert_null(ct_bert_for_sequence_classification_new(&bc, 2));
    assert_null(ct_bert_for_sequence_classification_new(NULL, 2));
    bc = tiny_config();
    assert_null(ct_bert_for_sequence_classification_new(&bc, 0));
    assert_null(ct_bert_model_new(NULL, true));
    assert_null(ct_resnet_new(NULL));
    ct_resnet_config rc = {CT_RESNET_BASIC, {2, 2, 2, 2}, 10, false, 2, 0};
    assert_null(ct_resnet_new(&rc));
    rc.groups = 0;
    rc.layers[2] = 0;
    assert_null(ct_resnet_new(&rc));
    rc.layers[2] = 2;
    rc.block = (ct_resnet_block)7;
    assert_null(ct_resnet_new(&rc));
    assert_null(ct_resnet50_new(-3));
    assert_null(ct_vgg_new(17, false, 10, 0.5));
    assert_null(ct_vgg_new(11, false, 10, 2.0));
    assert_null(ct_vgg_new(11, false, -1, 0.5));
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- reprs follow PyTorch's nesting ---------------------------------------------------- */
static void test_repr(void **state) {
    (void)state;
    ct_resnet_config rc = {CT_RESNET_BOTTLENECK, {1, 1, 1, 1}, 10, false, 0, 0};
    ct_module *r = ct_resnet_new(&rc);
    char *s = ct_module_to_string(r);
    assert_non_null(s);
    assert_non_null(strstr(s, "ResNet(\n  (conv1): Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)"));
    assert_non_null(strstr(s, "(layer1): Sequential(\n    (0): Bottleneck(\n"));
    assert_non_null(strstr(s, "(downsample): Sequential(\n        (0): Conv2d(64, 256, kernel_size=(1, 1), stride=(1, 1), bias=False)"));
    free(s);
    ct_module_release(r);
    ct_bert_config c = tiny_config();
    ct_module *b = ct_bert_for_sequence_classification_new(&c, 2);
    s = ct_module_to_string(b);
    assert_non_null(s);
    assert_non_null(strstr(s, "BertForSequenceClassification(\n  (bert): BertModel(\n    (embeddings): BertEmbeddings(\n"
                              "      (word_embeddings): Embedding(100, 32, padding_idx=0)"));
    assert_non_null(strstr(s, "(self): BertSelfAttention(\n"));
    assert_non_null(strstr(s, "(classifier): Linear(in_features=32, out_features=2, bias=True)"));
    free(s);
    ct_module_release(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures), cmocka_unit_test(test_keys), cmocka_unit_test(test_param_counts),
        cmocka_unit_test(test_init), cmocka_unit_test(test_train_step), cmocka_unit_test(test_bert_api),
        cmocka_unit_test(test_repr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
