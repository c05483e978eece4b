/* test_transformer.c -- MultiheadAttention and the Transformer modules
 * against torch.nn from identical weights (tests/fixtures/transformer.txt,
 * tools/fixtures/gen_transformer.py): outputs, attention weights, gradients
 * of the inputs and of every parameter, state-dict keys in torch's order;
 * the inference fast path against torch's fast path and against our slow
 * path (with and without padding, packed or not); error paths; no leaks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>

/* ---- the fixture file ------------------------------------------------------------ */
#define MAXT 160
#define MAXP 24
typedef struct tcase {
    char kind[32], label[96];
    int np, nt;
    char pn[MAXP][32], pv[MAXP][64];
    char *keys;                /* space-separated */
    char tn[MAXT][96];
    ct_tensor *t[MAXT];
} tcase;

static const char *P(const tcase *c, const char *n) {
    for (int i = 0; i < c->np; i++)
        if (!strcmp(c->pn[i], n)) return c->pv[i];
    fail_msg("%s %s: no param %s", c->kind, c->label, n);
    return "";
}
static long long PI(const tcase *c, const char *n) { return strtoll(P(c, n), NULL, 10); }
static double PF(const tcase *c, const char *n) { return strtod(P(c, n), NULL); }
static ct_tensor *T(const tcase *c, const char *n) {
    for (int i = 0; i < c->nt; i++)
        if (!strcmp(c->tn[i], n)) return c->t[i];
    return NULL;
}

static ct_tensor *parse_tensor(char *s, char *name) {
    char *save = NULL, *tok = strtok_r(s, " ", &save); /* "t" */
    tok = strtok_r(NULL, " ", &save);
    snprintf(name, 96, "%s", tok);
    char *dts = strtok_r(NULL, " ", &save);
    int nd = atoi(strtok_r(NULL, " ", &save));
    int64_t shape[8], n = 1;
    for (int i = 0; i < nd; i++) shape[i] = atoll(strtok_r(NULL, " ", &save)), n *= shape[i];
    strtok_r(NULL, " ", &save); /* ":" */
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = strtod(strtok_r(NULL, " ", &save), NULL);
    ct_dtype dt = !strcmp(dts, "bool") ? CT_BOOL : !strcmp(dts, "float64") ? CT_F64 : CT_F32;
    ct_tensor *t = ct_from_doubles(v, shape, nd, dt);
    free(v);
    return t;
}

static void free_case(tcase *c) {
    for (int i = 0; i < c->nt; i++) ct_release(c->t[i]);
    free(c->keys);
    memset(c, 0, sizeof *c);
}

/* Reads the next case; 0 at end of file. */
static int read_case(FILE *f, tcase *c) {
    static char line[1 << 20];
    memset(c, 0, sizeof *c);
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        assert_true(len < sizeof line - 1);
        if (len && line[len - 1] == '\n') line[--len] = 0;
        if (!strncmp(line, "case ", 5)) {
            sscanf(line + 5, "%31s %95s", c->kind, c->label);
            in = 1;
        } else if (!in) {
            continue;
        } else if (!strncmp(line, "param ", 6)) {
            assert_true(c->np < MAXP);
            sscanf(line + 6, "%31s %63s", c->pn[c->np], c->pv[c->np]);
            c->np++;
        } else if (!strncmp(line, "keys ", 5)) {
            c->keys = strdup(line + 5);
        } else if (!strncmp(line, "t ", 2)) {
            assert_true(c->nt < MAXT);
            c->t[c->nt] = parse_tensor(line, c->tn[c->nt]);
            assert_non_null(c->t[c->nt]);
            c->nt++;
        } else if (!strcmp(line, "end")) {
            return 1;
        }
    }
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */
static void expect_close(const tcase *c, const char *what, ct_tensor *got, ct_tensor *want, double rtol,
                         double atol) {
    if (!got) fail_msg("%s %s: %s is NULL (%s)", c->kind, c->label, what, ct_last_error());
    assert_non_null(want);
    if (ct_ndim(got) != ct_ndim(want)) fail_msg("%s %s: %s has %d dims, want %d", c->kind, c->label, what,
                                                ct_ndim(got), ct_ndim(want));
    for (int i = 0; i < ct_ndim(got); i++)
        if (ct_size(got, i) != ct_size(want, i))
            fail_msg("%s %s: %s dim %d is %lld, want %lld", c->kind, c->label, what, i, (long long)ct_size(got, i),
                     (long long)ct_size(want, i));
    ct_scope s = ct_scope_begin();
    ct_tensor *g = ct_contiguous(ct_to_dtype(got, CT_F64)), *w = ct_contiguous(ct_to_dtype(want, CT_F64));
    const double *a = ct_data_ptr(g), *b = ct_data_ptr(w);
    for (int64_t i = 0; i < ct_numel(g); i++)
        if (!(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i])))
            fail_msg("%s %s: %s[%lld] = %.8g, torch %.8g", c->kind, c->label, what, (long long)i, a[i], b[i]);
    ct_scope_end(s);
}

static ct_transformer_activation act_of(const tcase *c) {
    return !strcmp(P(c, "act"), "gelu") ? CT_TRANSFORMER_GELU : CT_TRANSFORMER_RELU;
}

static ct_module *build(const tcase *c) {
    const char *k = c->kind;
    if (!strcmp(k, "mha"))
        return ct_multihead_attention_new(PI(c, "E"), PI(c, "H"), 0.0, PI(c, "bias"), PI(c, "add_bias_kv"),
                                          PI(c, "add_zero_attn"), PI(c, "kdim"), PI(c, "vdim"), PI(c, "batch_first"));
    int64_t d = PI(c, "d"), H = PI(c, "H"), ff = PI(c, "ff");
    double eps = PF(c, "eps");
    bool bf = PI(c, "batch_first"), nf = PI(c, "norm_first"), bias = PI(c, "bias");
    if (!strcmp(k, "enc_layer")) return ct_transformer_encoder_layer_new(d, H, ff, 0.0, act_of(c), eps, bf, nf, bias);
    if (!strcmp(k, "dec_layer")) return ct_transformer_decoder_layer_new(d, H, ff, 0.0, act_of(c), eps, bf, nf, bias);
    if (!strcmp(k, "transformer"))
        return ct_transformer_new(d, H, PI(c, "num_encoder_layers"), PI(c, "num_decoder_layers"), ff, 0.0, act_of(c),
                                  eps, bf, nf, bias);
    bool enc = !strcmp(k, "encoder");
    ct_module *layer = enc ? ct_transformer_encoder_layer_new(d, H, ff, 0.0, act_of(c), eps, bf, nf, bias)
                           : ct_transformer_decoder_layer_new(d, H, ff, 0.0, act_of(c), eps, bf, nf, bias);
    ct_module *norm = PI(c, "has_norm") ? ct_layer_norm_new(&d, 1, 1e-5, true, true) : NULL;
    ct_module *m = enc ? ct_transformer_encoder_new(layer, PI(c, "num_layers"), norm, true)
                       : ct_transformer_decoder_new(layer, PI(c, "num_layers"), norm);
    ct_module_release(layer);
    ct_module_release(norm);
    return m;
}

/* Loads torch's weights, checking the keys and their order. */
static void load_weights(const tcase *c, ct_module *m) {
    ct_sample *mine = ct_module_state_dict(m);
    assert_non_null(mine);
    char *keys = strdup(c->keys), *save = NULL;
    int i = 0;
    for (char *k = strtok_r(keys, " ", &save); k; k = strtok_r(NULL, " ", &save), i++) {
        if (i >= ct_sample_count(mine)) fail_msg("%s %s: torch has key %s, we have none", c->kind, c->label, k);
        if (strcmp(ct_sample_name(mine, i), k))
            fail_msg("%s %s: key %d is %s, torch's is %s", c->kind, c->label, i, ct_sample_name(mine, i), k);
    }
    if (i != ct_sample_count(mine)) fail_msg("%s %s: %d keys, torch has %d", c->kind, c->label, ct_sample_count(mine), i);
    free(keys);
    ct_sample *sd = ct_sample_new();
    for (int j = 0; j < c->nt; j++)
        if (!strncmp(c->tn[j], "sd.", 3)) assert_int_equal(ct_sample_set(sd, c->tn[j] + 3, c->t[j]), CT_OK);
    assert_int_equal(ct_module_load_state_dict(m, sd, true), CT_OK);
    ct_sample_free(sd);
    ct_sample_free(mine);
}

/* Runs the module of case c on its inputs; *w gets MHA's weights. */
static ct_tensor *run(const tcase *c, ct_module *m, ct_tensor **w) {
    const char *k = c->kind;
    *w = NULL;
    if (!strcmp(k, "mha")) {
        ct_tensor *q = T(c, "in.query"), *key = T(c, "in.key"), *v = T(c, "in.value");
        if (!strcmp(P(c, "kind"), "self")) key = v = q;
        else if (!strcmp(P(c, "kind"), "kv")) v = key;
        ct_tensor *o = NULL;
        bool nw = PI(c, "need_weights");
        ct_status st = ct_multihead_attention_forward(m, q, key, v, T(c, "in.key_padding_mask"), nw,
                                                      T(c, "in.attn_mask"), PI(c, "average"), PI(c, "is_causal"),
                                                      &o, nw ? w : NULL);
        if (st) fail_msg("%s %s: %s", c->kind, c->label, ct_last_error());
        return o;
    }
    if (!strcmp(k, "enc_layer"))
        return ct_transformer_encoder_layer_forward(m, T(c, "in.src"), T(c, "in.src_mask"),
                                                    T(c, "in.src_key_padding_mask"), false);
    if (!strcmp(k, "dec_layer"))
        return ct_transformer_decoder_layer_forward(m, T(c, "in.tgt"), T(c, "in.memory"), T(c, "in.tgt_mask"), NULL,
                                                    T(c, "in.tgt_key_padding_mask"),
                                                    T(c, "in.memory_key_padding_mask"), false, false);
    if (!strcmp(k, "encoder"))
        return ct_transformer_encoder_forward(m, T(c, "in.src"), NULL, T(c, "in.src_key_padding_mask"), false);
    if (!strcmp(k, "decoder"))
        return ct_transformer_decoder_forward(m, T(c, "in.tgt"), T(c, "in.memory"), T(c, "in.tgt_mask"), NULL, NULL,
                                              T(c, "in.memory_key_padding_mask"), false, false);
    return ct_transformer_forward(m, T(c, "in.src"), T(c, "in.tgt"), NULL, T(c, "in.tgt_mask"), NULL,
                                  T(c, "in.src_key_padding_mask"), NULL, T(c, "in.memory_key_padding_mask"), false,
                                  false, false);
}

static int g_cases, g_fast_cases;

static void check_case(tcase *c) {
    ct_module *m = build(c);
    if (!m) fail_msg("%s %s: build: %s", c->kind, c->label, ct_last_error());
    load_weights(c, m);
    /* float inputs with a torch gradient require grad */
    char gname[128];
    for (int j = 0; j < c->nt; j++)
        if (!strncmp(c->tn[j], "in.", 3)) {
            snprintf(gname, sizeof gname, "g.%s", c->tn[j]);
            if (T(c, gname)) assert_int_equal(ct_set_requires_grad(c->t[j], true), CT_OK);
        }
    ct_scope s = ct_scope_begin();
    ct_tensor *w = NULL, *o = run(c, m, &w);
    expect_close(c, "output", o, T(c, "out"), 1e-4, 2e-5);
    ct_tensor *loss = ct_sum(ct_mul(o, T(c, "cot")), NULL, 0, false);
    if (T(c, "weights")) {
        expect_close(c, "attn_weights", w, T(c, "weights"), 1e-4, 1e-6);
        loss = ct_add(loss, ct_sum(ct_mul(w, T(c, "cotw")), NULL, 0, false));
    }
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    for (int j = 0; j < c->nt; j++) {
        if (strncmp(c->tn[j], "g.", 2)) continue;
        const char *name = c->tn[j] + 2;
        ct_tensor *g = NULL;
        if (!strncmp(name, "in.", 3)) {
            g = ct_grad(T(c, name));
        } else {
            ct_tensor *ps[256];
            const char *names[256];
            int np = ct_module_named_parameters(m, names, ps, 256);
            for (int i = 0; i < np; i++)
                if (!strcmp(names[i], name + 3)) g = ct_grad(ps[i]);
        }
        expect_close(c, c->tn[j], g, c->t[j], 2e-4, 5e-5);
    }
    /* eval + no grad: the fast path where torch's conditions hold */
    if (!strcmp(c->kind, "encoder") || !strcmp(c->kind, "enc_layer")) {
        ct_module_eval(m);
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *f = run(c, m, &w);
        bool packed = false, fast = ct_transformer_last_fast_path(&packed);
        ct_set_grad_enabled(prev);
        ct_tensor *want = T(c, "fast") ? T(c, "fast") : T(c, "out");
        expect_close(c, "fast path output", f, want, 1e-4, 2e-5);
        bool eligible = PI(c, "bias") && !T(c, "in.src_mask");
        if (fast != eligible) fail_msg("%s %s: fast path %d, expected %d", c->kind, c->label, fast, eligible);
        bool want_packed = !strcmp(c->kind, "encoder") && PI(c, "batch_first") && !PI(c, "norm_first") &&
                           !strstr(c->label, "hole");
        if (packed != want_packed) fail_msg("%s %s: packed %d, expected %d", c->kind, c->label, packed, want_packed);
        g_fast_cases += fast;
    }
    ct_scope_end(s);
    ct_module_release(m);
    g_cases++;
}

static void test_fixtures(void **state) {
    (void)state;
    FILE *f = fopen(CT_FIXTURE_DIR "/transformer.txt", "r");
    assert_non_null(f);
    tcase *c = calloc(1, sizeof *c);
    while (read_case(f, c)) {
        check_case(c);
        free_case(c);
    }
    free(c);
    fclose(f);
    printf("transformer fixtures: %d cases, %d through the fast path\n", g_cases, g_fast_cases);
    assert_true(g_cases >= 30);
    assert_true(g_fast_cases >= 6);
}

/* ---- fast path == slow path on a larger random encoder --------------------------------- */
static void fast_vs_slow(bool batch_first, bool norm_first, ct_transformer_activation act, int holes) {
    const int64_t d = 32, H = 4, ff = 64, N = 4, L = 9;
    ct_manual_seed(7);
    ct_module *layer = ct_transformer_encoder_layer_new(d, H, ff, 0.1, act, 1e-5, batch_first, norm_first, true);
    ct_module *norm = ct_layer_norm_new(&d, 1, 1e-5, true, true);
    bool g0 = ct_set_grad_enabled(false);
    assert_non_null(ct_fill_(ct_module_param(norm, 1), 0.25)); /* norm(0) = 0.25 */
    ct_set_grad_enabled(g0);
    ct_module *enc = ct_transformer_encoder_new(layer, 2, norm, true);
    assert_non_null(enc);
    ct_module_eval(enc);
    ct_scope s = ct_scope_begin();
    int64_t shp[3] = {batch_first ? N : L, batch_first ? L : N, d};
    ct_tensor *x = ct_randn(shp, 3, CT_F32);
    uint8_t mk[4 * 9] = {0};
    int64_t lens[4] = {9, 5, 1, 7};
    for (int n = 0; n < N; n++)
        for (int t = 0; t < L; t++) mk[n * L + t] = t >= lens[n];
    if (holes) mk[0 * L + 3] = 1;
    ct_tensor *kpm = ct_from_array(mk, (int64_t[]){N, L}, 2, CT_BOOL);
    for (int with_mask = 0; with_mask < 2; with_mask++) {
        ct_tensor *km = with_mask ? kpm : NULL;
        /* slow: grad mode on (the parameters require grad) */
        ct_tensor *slow = ct_transformer_encoder_forward(enc, x, NULL, km, false);
        assert_false(ct_transformer_last_fast_path(NULL));
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *fast = ct_transformer_encoder_forward(enc, x, NULL, km, false);
        bool packed;
        assert_true(ct_transformer_last_fast_path(&packed));
        /* the single-layer fast path, too */
        ct_module *l0 = ct_module_child(ct_module_get_submodule(enc, "layers"), 0);
        ct_tensor *f1 = ct_transformer_encoder_layer_forward(l0, x, NULL, km, false);
        assert_true(ct_transformer_last_fast_path(NULL));
        ct_set_grad_enabled(prev);
        ct_tensor *s1 = ct_transformer_encoder_layer_forward(l0, x, NULL, km, false);
        assert_non_null(slow);
        assert_non_null(fast);
        assert_true(ct_allclose(f1, s1, 1e-4, 1e-5, false));
        bool want_packed = with_mask && batch_first && !norm_first && !holes;
        assert_int_equal(packed, want_packed);
        if (!packed) {
            assert_true(ct_allclose(fast, slow, 1e-4, 1e-5, false));
        } else {
            /* real tokens equal; padded tokens zero before the final norm
             * (torch's to_padded_tensor(0.0)), so they hold the norm's bias */
            ct_tensor *real = ct_unsqueeze(ct_logical_not(kpm), -1);
            ct_tensor *slow0 = ct_where(real, slow, ct_full_like(slow, 0.25));
            assert_true(ct_allclose(fast, slow0, 1e-4, 1e-5, false));
        }
    }
    ct_scope_end(s);
    ct_module_release(layer);
    ct_module_release(norm);
    ct_module_release(enc);
}

static void test_fast_path(void **state) {
    (void)state;
    for (int bf = 0; bf < 2; bf++)
        for (int nf = 0; nf < 2; nf++)
            for (int holes = 0; holes < 2; holes++)
                fast_vs_slow(bf, nf, (bf ^ nf) ? CT_TRANSFORMER_GELU : CT_TRANSFORMER_RELU, holes);
}

/* ---- API details ------------------------------------------------------------------------- */
static void test_mask_and_api(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *m = ct_generate_square_subsequent_mask(3);
    assert_non_null(m);
    float *p = ct_data_ptr(m);
    float want[9] = {0, -INFINITY, -INFINITY, 0, 0, -INFINITY, 0, 0, 0};
    for (int i = 0; i < 9; i++) assert_true(p[i] == want[i]);
    /* MultiheadAttention through ct_module_forward_multi: (output, averaged weights) */
    ct_module *a = ct_multihead_attention_new(8, 2, 0.0, true, false, false, 0, 0, true);
    assert_non_null(a);
    ct_tensor *x = ct_randn((int64_t[]){2, 5, 8}, 3, CT_F32);
    ct_tensor *outs[2] = {0};
    assert_int_equal(ct_module_forward_multi(a, (ct_tensor *[]){x, x, x}, 3, outs, 2), CT_OK);
    assert_int_equal(ct_size(outs[0], 0), 2);
    assert_int_equal(ct_size(outs[1], 1), 5);
    assert_int_equal(ct_size(outs[1], 2), 5);
    /* the default init: biases zero, in_proj xavier-bounded */
    ct_sample *sd = ct_module_state_dict(a);
    assert_int_equal(ct_sample_count(sd), 4);
    assert_true(ct_item(ct_amax(ct_abs(ct_sample_get(sd, "in_proj_bias")), NULL, 0, false)) == 0);
    assert_true(ct_item(ct_amax(ct_abs(ct_sample_get(sd, "in_proj_weight")), NULL, 0, false)) <= sqrt(6.0 / 32));
    ct_sample_free(sd);
    /* Transformer: keys and xavier re-init */
    ct_module *t = ct_transformer_new(16, 4, 2, 2, 32, 0.1, CT_TRANSFORMER_RELU, 1e-5, false, false, true);
    assert_non_null(t);
    assert_non_null(ct_module_get_submodule(t, "encoder.layers.1.self_attn.out_proj"));
    assert_non_null(ct_module_get_submodule(t, "decoder.layers.1.multihead_attn"));
    assert_non_null(ct_module_get_submodule(t, "decoder.norm"));
    assert_string_equal(ct_module_class_name(ct_module_get_submodule(t, "encoder")), "TransformerEncoder");
    char *r = ct_module_to_string(ct_module_get_submodule(t, "encoder.layers.0"));
    assert_non_null(strstr(r, "TransformerEncoderLayer("));
    assert_non_null(strstr(r, "(self_attn): MultiheadAttention("));
    free(r);
    ct_module_release(t);
    ct_module_release(a);
    ct_scope_end(s);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(ct_multihead_attention_new(10, 3, 0.0, true, false, false, 0, 0, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "divisible"));
    assert_null(ct_transformer_encoder_layer_new(8, 2, 16, 1.5, CT_TRANSFORMER_RELU, 1e-5, false, false, true));
    ct_module *a = ct_multihead_attention_new(8, 2, 0.0, true, false, false, 0, 0, false);
    ct_module *l = ct_transformer_encoder_layer_new(8, 2, 16, 0.0, CT_TRANSFORMER_RELU, 1e-5, false, false, true);
    ct_scope s = ct_scope_begin();
    ct_tensor *o = NULL, *w = NULL;
    ct_tensor *bad = ct_randn((int64_t[]){5, 2, 6}, 3, CT_F32);
    assert_int_equal(ct_multihead_attention_forward(a, bad, bad, bad, NULL, true, NULL, true, false, &o, &w),
                     CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "embedding dimension of 8"));
    assert_null(o);
    ct_tensor *x = ct_randn((int64_t[]){5, 2, 8}, 3, CT_F32);
    ct_tensor *kpm = ct_zeros((int64_t[]){2, 4}, 2, CT_BOOL);
    assert_int_equal(ct_multihead_attention_forward(a, x, x, x, kpm, true, NULL, true, false, &o, &w), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "key_padding_mask"));
    ct_tensor *im = ct_zeros((int64_t[]){5, 5}, 2, CT_I64);
    assert_int_equal(ct_multihead_attention_forward(a, x, x, x, NULL, true, im, true, false, &o, &w), CT_ERR_DTYPE);
    assert_null(ct_transformer_encoder_layer_forward(l, bad, NULL, NULL, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_null(ct_transformer_encoder_layer_forward(l, x, NULL, kpm, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_null(ct_transformer_encoder_new(a, 2, NULL, true));
    assert_non_null(strstr(ct_last_error(), "TransformerEncoderLayer"));
    assert_null(ct_transformer_encoder_layer_forward(a, x, NULL, NULL, false));
    /* NULL propagates */
    assert_null(ct_transformer_encoder_layer_forward(l, NULL, NULL, NULL, false));
    assert_null(ct_module_forward1(l, NULL));
    assert_int_equal(ct_multihead_attention_forward(a, NULL, x, x, NULL, true, NULL, true, false, &o, &w), CT_ERR_NULL);
    assert_null(ct_generate_square_subsequent_mask(-1));
    ct_scope_end(s);
    ct_module_release(a);
    ct_module_release(l);
}

/* ---- gradcheck in float64 (finite differences) ----------------------------------------- */
typedef struct { ct_module *m; ct_tensor *kpm; bool need_weights; } gc_ctx;
static ct_tensor *gc_mha(ct_tensor *const *in, int n, void *user) {
    gc_ctx *g = user;
    ct_tensor *o = NULL, *w = NULL;
    if (ct_multihead_attention_forward(g->m, in[0], in[1], in[2], g->kpm, g->need_weights, NULL, true, false, &o,
                                       g->need_weights ? &w : NULL))
        return NULL;
    if (!w) return o;
    return ct_cat((ct_tensor *[]){ct_flatten(o, 0, -1), ct_flatten(w, 0, -1)}, 2, 0);
}
static ct_tensor *gc_layer(ct_tensor *const *in, int n, void *user) {
    gc_ctx *g = user;
    return ct_transformer_encoder_layer_forward(g->m, in[0], NULL, g->kpm, false);
}

static void test_gradcheck(void **state) {
    (void)state;
    assert_int_equal(ct_set_default_dtype(CT_F64), CT_OK);
    ct_manual_seed(3);
    ct_module *a = ct_multihead_attention_new(6, 2, 0.0, true, true, true, 4, 5, false);
    ct_module *l = ct_transformer_encoder_layer_new(6, 3, 8, 0.0, CT_TRANSFORMER_GELU, 1e-5, true, true, true);
    assert_int_equal(ct_set_default_dtype(CT_F32), CT_OK);
    assert_non_null(a);
    assert_non_null(l);
    ct_scope s = ct_scope_begin();
    ct_tensor *q = ct_randn((int64_t[]){3, 2, 6}, 3, CT_F64), *k = ct_randn((int64_t[]){4, 2, 4}, 3, CT_F64),
              *v = ct_randn((int64_t[]){4, 2, 5}, 3, CT_F64);
    uint8_t mk[8] = {0, 0, 1, 0, 0, 0, 0, 1};
    ct_tensor *kpm = ct_from_array(mk, (int64_t[]){2, 4}, 2, CT_BOOL);
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad((ct_tensor *[]){q, k, v}[i], true), CT_OK);
    for (int nw = 0; nw < 2; nw++) {
        gc_ctx g = {a, kpm, nw};
        ct_status st = ct_gradcheck(gc_mha, &g, (ct_tensor *[]){q, k, v}, 3, 1e-6, 1e-5, 1e-3);
        if (st) fail_msg("MultiheadAttention gradcheck (need_weights %d): %s", nw, ct_last_error());
    }
    ct_tensor *x = ct_randn((int64_t[]){2, 4, 6}, 3, CT_F64);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    gc_ctx g = {l, kpm, false};
    if (ct_gradcheck(gc_layer, &g, &x, 1, 1e-6, 1e-5, 1e-3))
        fail_msg("TransformerEncoderLayer gradcheck: %s", ct_last_error());
    ct_scope_end(s);
    ct_module_release(a);
    ct_module_release(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_fast_path),
        cmocka_unit_test(test_mask_and_api),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
