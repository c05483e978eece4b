/* test_wordpiece.c -- the BERT WordPiece tokenizer against transformers'
 * BertTokenizer (tools/fixtures/gen_minilm.py -> wordpiece_cases.txt):
 * ~110 texts (accents, punctuation, CJK, emoji, long words, control
 * characters, odd whitespace, special tokens in the text, the empty
 * string) must give identical input_ids; truncation, batch padding and
 * decode; and hostile input (invalid UTF-8, bad vocab files, NULLs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ctorch/ctorch.h>

#define VOCAB CT_FIXTURE_DIR "/wordpiece_vocab.txt"
#define CASES CT_FIXTURE_DIR "/wordpiece_cases.txt"

static size_t g_len; /* length of the last unhex */
static char *unhex(const char *h) {
    if (!strcmp(h, "-")) return g_len = 0, strdup("");
    size_t n = strlen(h) / 2;
    g_len = n;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        s[i] = (char)v;
    }
    s[n] = 0;
    return s;
}

/* parses "id id id" into ids; returns count */
static int parse_ids(char *p, int64_t *ids, int cap) {
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(p, " \n", &save); t && n < cap; t = strtok_r(NULL, " \n", &save))
        ids[n++] = strtoll(t, NULL, 10);
    return n;
}

static void check_ids(ct_tensor *got, const int64_t *want, int n, const char *what) {
    if (!got) fail_msg("%s: %s", what, ct_last_error());
    const int64_t *g = ct_data_ptr(got);
    bool same = ct_numel(got) == n;
    for (int i = 0; same && i < n; i++) same = g[i] == want[i];
    if (!same) {
        fprintf(stderr, "mismatch on %s\n  want:", what);
        for (int i = 0; i < n; i++) fprintf(stderr, " %lld", (long long)want[i]);
        fprintf(stderr, "\n  got: ");
        for (int64_t i = 0; i < ct_numel(got); i++) fprintf(stderr, " %lld", (long long)g[i]);
        fprintf(stderr, "\n");
    }
    assert_true(same);
}

static void test_reference_cases(void **state) {
    (void)state;
    ct_wordpiece *tok = ct_wordpiece_load(VOCAB, true);
    assert_non_null(tok);
    assert_int_equal(ct_wordpiece_vocab_size(tok), 30522);
    assert_int_equal(ct_wordpiece_cls_id(tok), 101);
    assert_int_equal(ct_wordpiece_sep_id(tok), 102);
    assert_int_equal(ct_wordpiece_pad_id(tok), 0);
    assert_int_equal(ct_wordpiece_unk_id(tok), 100);
    FILE *f = fopen(CASES, "r");
    assert_non_null(f);
    static char line[1 << 16];
    static int64_t want[4096];
    int nenc = 0, ndec = 0, ntrunc = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        ct_scope s = ct_scope_begin();
        char *save = NULL;
        char *kind = strtok_r(line, " \n", &save);
        if (!kind) continue;
        if (!strcmp(kind, "enc") || !strcmp(kind, "trunc8")) {
            char *text = unhex(strtok_r(NULL, " \n", &save));
            int n = parse_ids(save, want, 4096);
            bool tr = !strcmp(kind, "trunc8");
            size_t len = g_len;
            check_ids(ct_wordpiece_encode_len(tok, text, len, tr ? 8 : 0, true), want, n, text);
            /* without the specials: the middle part */
            if (!tr) check_ids(ct_wordpiece_encode_len(tok, text, len, 0, false), want + 1, n - 2, text);
            free(text);
            nenc += !tr;
            ntrunc += tr;
        } else if (!strcmp(kind, "dec")) {
            int skip = atoi(strtok_r(NULL, " \n", &save));
            char *expect = unhex(strtok_r(NULL, " \n", &save));
            free(unhex(strtok_r(NULL, " \n", &save)));
            int n = parse_ids(save, want, 4096);
            char *got = ct_wordpiece_decode(tok, want, n, skip);
            assert_non_null(got);
            assert_string_equal(got, expect);
            free(got);
            free(expect);
            ndec++;
        }
        ct_scope_end(s);
    }
    fclose(f);
    assert_true(nenc >= 100);
    assert_int_equal(ntrunc, 1);
    assert_true(ndec >= 4);
    ct_wordpiece_free(tok);
}

static void test_batch_and_lookup(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_wordpiece *tok = ct_wordpiece_load(VOCAB, true);
    assert_non_null(tok);
    assert_int_equal(ct_wordpiece_token_to_id(tok, "hello"), 7592);
    assert_int_equal(ct_wordpiece_token_to_id(tok, "##ing"), 2075);
    assert_int_equal(ct_wordpiece_token_to_id(tok, "no-such-token"), -1);
    assert_string_equal(ct_wordpiece_id_to_token(tok, 7592), "hello");
    assert_null(ct_wordpiece_id_to_token(tok, 30522));
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    const char *texts[3] = {"Hello, world!", "", "The quick brown fox jumps over the lazy dog."};
    ct_tensor *ids = NULL, *mask = NULL;
    assert_int_equal(ct_wordpiece_encode_batch(tok, texts, 3, 0, &ids, &mask), CT_OK);
    assert_int_equal(ct_size(ids, 0), 3);
    assert_int_equal(ct_size(ids, 1), 12);
    const int64_t *p = ct_data_ptr(ids), *m = ct_data_ptr(mask);
    const int64_t row0[12] = {101, 7592, 1010, 2088, 999, 102, 0, 0, 0, 0, 0, 0};
    for (int j = 0; j < 12; j++) {
        assert_int_equal(p[j], row0[j]);
        assert_int_equal(m[j], j < 6);
        assert_int_equal(p[12 + j], j == 0 ? 101 : j == 1 ? 102 : 0);
        assert_int_equal(m[24 + j], 1);
    }
    /* truncation to 5 keeps [CLS] + 3 pieces + [SEP] */
    assert_int_equal(ct_wordpiece_encode_batch(tok, texts, 3, 5, &ids, NULL), CT_OK);
    assert_int_equal(ct_size(ids, 1), 5);
    p = ct_data_ptr(ids);
    assert_int_equal(p[4], 102);
    assert_int_equal(p[14], 102);
    /* decode of a batch row with padding skipped */
    char *d = ct_wordpiece_decode(tok, (const int64_t[]){101, 7592, 1010, 2088, 999, 102, 0}, 7, true);
    assert_string_equal(d, "hello, world!");
    free(d);
    ct_wordpiece_free(tok);
    ct_scope_end(s);
}

static void test_cased_and_small_vocab(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    const char vocab[] = "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nHello\rhello\n##lo\nhel\n,\nHe\n\xc3\xa9\nhello";
    ct_wordpiece *cased = ct_wordpiece_load_buffer(vocab, sizeof vocab - 1, false);
    ct_wordpiece *lower = ct_wordpiece_load_buffer(vocab, sizeof vocab - 1, true);
    assert_non_null(cased);
    assert_non_null(lower);
    assert_int_equal(ct_wordpiece_vocab_size(cased), 12);
    /* a repeated token takes its last line */
    assert_int_equal(ct_wordpiece_token_to_id(cased, "hello"), 11);
    assert_string_equal(ct_wordpiece_id_to_token(cased, 5), "hello");
    ct_tensor *a = ct_wordpiece_encode(cased, "Hello, Helo \xc3\xa9", 0, false);
    check_ids(a, (const int64_t[]){4, 8, 9, 6, 10}, 5, "cased");
    ct_tensor *b = ct_wordpiece_encode(lower, "Hello, Helo \xc3\xa9", 0, false);
    /* lower: hello , [UNK] (hel + "##o" is not in the vocab) [UNK] (nor is e) */
    check_ids(b, (const int64_t[]){11, 8, 1, 1}, 4, "lower");
    ct_wordpiece_free(cased);
    ct_wordpiece_free(lower);
    /* no [UNK]: an unknown word is an error, not a crash */
    ct_wordpiece *nounk = ct_wordpiece_load_buffer("a\nb\n", 4, true);
    assert_non_null(nounk);
    assert_null(ct_wordpiece_encode(nounk, "a c", 0, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_null(ct_wordpiece_encode(nounk, "a", 0, true)); /* no [CLS] */
    ct_tensor *ids = NULL;
    assert_int_not_equal(ct_wordpiece_encode_batch(nounk, (const char *[]){"a"}, 1, 0, &ids, NULL), CT_OK);
    ct_wordpiece_free(nounk);
    ct_scope_end(s);
}

static void test_errors(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    assert_null(ct_wordpiece_load(CT_FIXTURE_DIR "/no-such-vocab.txt", true));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "no-such-vocab.txt"));
    assert_null(ct_wordpiece_load(NULL, true));
    assert_null(ct_wordpiece_load_buffer("", 0, true));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_null(ct_wordpiece_load_buffer("a\n\xff\n", 4, true));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    ct_wordpiece *tok = ct_wordpiece_load(VOCAB, true);
    assert_non_null(tok);
    const char *bad[] = {"\xff", "abc\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok \xe2\x82"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(ct_wordpiece_encode(tok, bad[i], 0, true));
        assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
        assert_non_null(strstr(ct_last_error(), "UTF-8"));
    }
    assert_null(ct_wordpiece_encode(tok, NULL, 0, true));
    assert_null(ct_wordpiece_encode(NULL, "a", 0, true));
    assert_null(ct_wordpiece_encode(tok, "a", 1, true));
    assert_null(ct_wordpiece_encode(tok, "a", -3, false));
    ct_tensor *ids = NULL;
    assert_int_not_equal(ct_wordpiece_encode_batch(tok, (const char *[]){"a", "\xff"}, 2, 0, &ids, NULL), CT_OK);
    assert_null(ids);
    assert_int_not_equal(ct_wordpiece_encode_batch(tok, (const char *[]){"a"}, 0, 0, &ids, NULL), CT_OK);
    assert_null(ct_wordpiece_decode(tok, (const int64_t[]){5, 99999}, 2, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    /* a large input: 1 MB of words and CJK */
    size_t n = 1 << 20;
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = "ab cd, "[i % 7];
    memcpy(big + 1000, "\xe4\xb8\xad\xe4\xb8\xad", 6);
    big[n] = 0;
    ct_tensor *t = ct_wordpiece_encode(tok, big, 0, true);
    assert_non_null(t);
    assert_true(ct_numel(t) > 400000);
    free(big);
    ct_wordpiece_free(tok);
    ct_wordpiece_free(NULL);
    ct_scope_end(s);
    ct_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_cases),
        cmocka_unit_test(test_batch_and_lookup),
        cmocka_unit_test(test_cased_and_small_vocab),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
