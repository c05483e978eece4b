/* fuzz_json.c -- the strict JSON parser (src/io/json.c: safetensors
 * headers, model configs) and the BERT config.json reader of the sentence
 * encoder loader (ct__bert_config_parse, src/nn/models_sentence.c) on
 * arbitrary bytes.
 *
 * Checks beyond "no crash, leak, UB or out-of-bounds read":
 *   - ct__utf8_valid's bad offset and the parser's error offset lie inside
 *     the input, and a failed parse leaves a message and an empty value;
 *   - a parsed tree is well formed (strings and keys NUL-terminated at their
 *     length, n <= cap, depth <= CT_JSON_MAX_DEPTH, no duplicate keys, every
 *     key found by ct__json_get when it holds no NUL byte);
 *   - it round-trips: written back as JSON (strings escaped, non-integer
 *     numbers replaced by a placeholder) it parses again to an equal tree;
 *   - the config reader accepts exactly the documents that follow its rules
 *     (restated here, config_ok) and maps the integers it was given. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "io/io_impl.h"
#include "nn/models_impl.h"

#define CHECK(c)                                                                                                      \
    do {                                                                                                              \
        if (!(c)) {                                                                                                   \
            fprintf(stderr, "fuzz_json: check failed: %s (line %d)\n", #c, __LINE__);                               \
            abort();                                                                                                  \
        }                                                                                                             \
    } while (0)

/* ---- a growable output buffer ---- */
typedef struct {
    char *p;
    size_t n, cap;
} obuf;

static void put(obuf *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        size_t nc = o->cap ? o->cap : 256;
        while (o->n + n + 1 > nc) nc *= 2;
        char *np = realloc(o->p, nc);
        CHECK(np);
        o->p = np;
        o->cap = nc;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

static void put_str(obuf *o, const char *s, size_t n) {
    put(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, (const char *)&s[i], 1);
        }
    }
    put(o, "\"", 1);
}

static void write_json(obuf *o, const ct_jval *v) {
    char num[32];
    switch (v->type) {
    case CT_JNULL: put(o, "null", 4); break;
    case CT_JBOOL: v->b ? put(o, "true", 4) : put(o, "false", 5); break;
    case CT_JNUM:
        if (v->is_uint) {
            int k = snprintf(num, sizeof num, "%llu", (unsigned long long)v->u);
            put(o, num, (size_t)k);
        } else {
            put(o, "-0.5e-1", 7); /* the value's text is not kept: a placeholder */
        }
        break;
    case CT_JSTR: put_str(o, v->s, v->slen); break;
    case CT_JARR:
    case CT_JOBJ:
        put(o, v->type == CT_JARR ? "[" : "{", 1);
        for (int i = 0; i < v->n; i++) {
            if (i) put(o, ", ", 2);
            if (v->type == CT_JOBJ) {
                put_str(o, v->keys[i], v->keylens[i]);
                put(o, ":", 1);
            }
            write_json(o, &v->items[i]);
        }
        put(o, v->type == CT_JARR ? "]" : "}", 1);
        break;
    }
}

/* ---- tree checks ---- */
static void check_tree(const ct_jval *v, int depth) {
    CHECK(depth <= CT_JSON_MAX_DEPTH + 1);
    switch (v->type) {
    case CT_JNULL:
    case CT_JBOOL: break;
    case CT_JNUM: CHECK(v->is_uint || v->u == 0); break;
    case CT_JSTR: CHECK(v->s && v->s[v->slen] == 0); break;
    case CT_JARR:
    case CT_JOBJ:
        CHECK(v->n >= 0 && v->n <= v->cap && (v->n == 0 || v->items));
        CHECK(depth <= CT_JSON_MAX_DEPTH);
        for (int i = 0; i < v->n; i++) {
            if (v->type == CT_JOBJ) {
                CHECK(v->keys && v->keylens && v->keys[i] && v->keys[i][v->keylens[i]] == 0);
                for (int k = 0; k < i; k++)
                    CHECK(v->keylens[k] != v->keylens[i] || memcmp(v->keys[k], v->keys[i], v->keylens[i]) != 0);
                if (strlen(v->keys[i]) == v->keylens[i]) CHECK(ct__json_get(v, v->keys[i]) == &v->items[i]);
            }
            check_tree(&v->items[i], depth + 1);
        }
        break;
    default: CHECK(!"bad type");
    }
}

static void check_equal(const ct_jval *a, const ct_jval *b) {
    CHECK(a->type == b->type);
    switch (a->type) {
    case CT_JNULL: break;
    case CT_JBOOL: CHECK(a->b == b->b); break;
    case CT_JNUM: CHECK(a->is_uint == b->is_uint && a->u == b->u); break;
    case CT_JSTR: CHECK(a->slen == b->slen && memcmp(a->s, b->s, a->slen) == 0); break;
    case CT_JARR:
    case CT_JOBJ:
        CHECK(a->n == b->n);
        for (int i = 0; i < a->n; i++) {
            if (a->type == CT_JOBJ)
                CHECK(a->keylens[i] == b->keylens[i] && memcmp(a->keys[i], b->keys[i], a->keylens[i]) == 0);
            check_equal(&a->items[i], &b->items[i]);
        }
        break;
    }
}

/* What the config reader must do with a parsed document (the same rules,
 * written out again): 1 when it must accept it; *want gets the integers. */
static int config_ok(const ct_jval *root, ct_bert_config *want) {
    static const char *const ints[] = {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                       "intermediate_size", "max_position_embeddings", "type_vocab_size",
                                       "pad_token_id"};
    static const char *const nums[] = {"layer_norm_eps", "hidden_dropout_prob", "attention_probs_dropout_prob",
                                       "initializer_range"};
    static const char *const strs[][2] = {
        {"model_type", "bert"}, {"hidden_act", "gelu"}, {"position_embedding_type", "absolute"}};
    if (root->type != CT_JOBJ) return 0;
    *want = ct_bert_base_config();
    int64_t *dst[] = {&want->vocab_size, &want->hidden_size, &want->num_hidden_layers, &want->num_attention_heads,
                      &want->intermediate_size, &want->max_position_embeddings, &want->type_vocab_size,
                      &want->pad_token_id};
    for (int i = 0; i < 8; i++) {
        const ct_jval *v = ct__json_get(root, ints[i]);
        if (!v) continue;
        if (i == 7 && v->type == CT_JNULL) *dst[i] = -1;
        else if (v->type == CT_JNUM && v->is_uint && v->u <= ((uint64_t)1 << 40)) *dst[i] = (int64_t)v->u;
        else return 0;
    }
    for (int i = 0; i < 4; i++) {
        const ct_jval *v = ct__json_get(root, nums[i]);
        if (v && v->type != CT_JNUM) return 0;
    }
    for (int i = 0; i < 3; i++) {
        const ct_jval *v = ct__json_get(root, strs[i][0]);
        if (v && v->type == CT_JSTR && strcmp(v->s, strs[i][1]) != 0) return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *s = (const char *)data;
    size_t bad = (size_t)-1;
    int utf8 = ct__utf8_valid(data, size, &bad);
    CHECK(utf8 || bad < size);

    ct_jval v;
    char err[128];
    err[0] = 0;
    size_t off = (size_t)-1;
    int parsed = 0, cfg_ok = 0;
    ct_bert_config want = {0};
    if (ct__json_parse(s, size, &v, err, sizeof err, &off) == 0) {
        parsed = 1;
        check_tree(&v, 0);
        cfg_ok = utf8 && config_ok(&v, &want);
        /* round trip */
        obuf o = {0};
        write_json(&o, &v);
        ct_jval w;
        char err2[128];
        size_t off2 = 0;
        int rc = ct__json_parse(o.p, o.n, &w, err2, sizeof err2, &off2);
        if (rc) fprintf(stderr, "fuzz_json: re-parse failed: %s at %zu of %.*s\n", err2, off2, (int)o.n, o.p);
        CHECK(rc == 0);
        check_equal(&v, &w);
        ct__json_free(&w);
        free(o.p);
        /* lookups the loaders do */
        static const char *const keys[] = {"hidden_size", "dtype", "shape", "data_offsets", "__metadata__", ""};
        volatile uintptr_t sink = 0;
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) sink += (uintptr_t)ct__json_get(&v, keys[k]);
        (void)sink;
        ct__json_free(&v);
        CHECK(v.type == CT_JNULL && v.n == 0 && v.items == NULL);
    } else {
        CHECK(off <= size);
        CHECK(err[0] != 0);
        CHECK(v.type == CT_JNULL && v.n == 0 && v.items == NULL && v.s == NULL);
    }

    /* the config reader: on the bytes as they are (it checks UTF-8 itself);
     * it accepts exactly the documents config_ok accepts */
    ct_bert_config c;
    int rc = ct__bert_config_parse(s, size, "fuzz/config.json", &c);
    if (rc != 0 && cfg_ok) fprintf(stderr, "fuzz_json: valid config rejected: %s\n", ct_last_error());
    CHECK((rc == 0) == cfg_ok);
    if (rc == 0) {
        CHECK(utf8 && parsed);
        CHECK(c.vocab_size == want.vocab_size && c.hidden_size == want.hidden_size);
        CHECK(c.num_hidden_layers == want.num_hidden_layers && c.num_attention_heads == want.num_attention_heads);
        CHECK(c.intermediate_size == want.intermediate_size);
        CHECK(c.max_position_embeddings == want.max_position_embeddings);
        CHECK(c.type_vocab_size == want.type_vocab_size && c.pad_token_id == want.pad_token_id);
        const int64_t lim = (int64_t)1 << 40;
        CHECK(c.vocab_size >= 0 && c.vocab_size <= lim && c.hidden_size >= 0 && c.hidden_size <= lim);
        CHECK(c.num_hidden_layers >= 0 && c.num_hidden_layers <= lim);
        CHECK(c.num_attention_heads >= 0 && c.num_attention_heads <= lim);
        CHECK(c.intermediate_size >= 0 && c.intermediate_size <= lim);
        CHECK(c.max_position_embeddings >= 0 && c.max_position_embeddings <= lim);
        CHECK(c.type_vocab_size >= 0 && c.type_vocab_size <= lim);
        CHECK(c.pad_token_id >= -1 && c.pad_token_id <= lim);
    } else {
        CHECK(ct_last_error_code() != CT_OK);
    }
    ct_clear_error();
    return 0;
}
