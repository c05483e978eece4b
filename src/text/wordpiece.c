/* wordpiece.c -- BERT's WordPiece tokenizer (transformers' BertTokenizer:
 * BasicTokenizer then WordpieceTokenizer), see text.h for the steps.
 *
 * Text is decoded once to code points; every step works on uint32 arrays
 * (growable vectors, overflow-checked), and only the greedy piece matcher
 * goes back to UTF-8 bytes to look pieces up in the vocab's hash table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/op_table.h"
#include "ctorch/text.h"
#include "text_impl.h"

#define WP_MAX_TEXT ((size_t)1 << 30)      /* bytes of one text */
#define WP_MAX_VOCAB ((size_t)1 << 30)     /* bytes of a vocab file */
#define WP_MAX_WORD 100                    /* max_input_chars_per_word */

enum { SP_UNK, SP_SEP, SP_PAD, SP_CLS, SP_MASK, SP_N };
static const char *const k_special[SP_N] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};

struct ct_wordpiece {
    bool lower;
    int64_t n;          /* lines = ids */
    char *blob;         /* the tokens, each NUL-terminated */
    size_t *off;        /* token i at blob + off[i] */
    size_t *len;
    int64_t *slot;      /* hash table: id or -1 */
    size_t mask;        /* table size - 1 */
    int64_t sp[SP_N];   /* special ids, -1 when absent */
};

/* ---- the vocab ------------------------------------------------------------- */
static uint64_t hash_bytes(const char *a, size_t n, const char *b, size_t m) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)a[i]) * 1099511628211ull;
    for (size_t i = 0; i < m; i++) h = (h ^ (unsigned char)b[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* id of the token prefix[0..np) + s[0..n), or -1 */
static int64_t vocab_find2(const ct_wordpiece *t, const char *prefix, size_t np, const char *s, size_t n) {
    size_t i = (size_t)hash_bytes(prefix, np, s, n) & t->mask;
    for (;;) {
        int64_t id = t->slot[i];
        if (id < 0) return -1;
        if (t->len[id] == np + n && memcmp(t->blob + t->off[id], prefix, np) == 0 &&
            memcmp(t->blob + t->off[id] + np, s, n) == 0)
            return id;
        i = (i + 1) & t->mask;
    }
}

/* strict UTF-8 (what Python's str accepts): 1 when valid, else 0 with the
 * offset of the first bad byte */
static int utf8_next(const unsigned char *s, size_t n, size_t *i, uint32_t *cp) {
    unsigned c = s[*i];
    if (c < 0x80) { *cp = c; (*i)++; return 1; }
    int k;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { k = 1; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 2; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 3; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n - *i < (size_t)k + 1) return 0;
    for (int j = 1; j <= k; j++) {
        unsigned d = s[*i + j];
        if ((d & 0xC0) != 0x80) return 0;
        v = (v << 6) | (d & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    *i += (size_t)k + 1;
    return 1;
}

static bool utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
    size_t i = 0;
    uint32_t cp;
    while (i < n)
        if (!utf8_next(s, n, &i, &cp)) {
            *bad = i;
            return false;
        }
    return true;
}

ct_wordpiece *ct_wordpiece_load_buffer(const char *data, size_t size, bool lower_case) {
    if (!data && size) return ct__error(CT_ERR_NULL, "wordpiece_load_buffer: NULL data");
    if (size > WP_MAX_VOCAB)
        return ct__error(CT_ERR_FORMAT, "wordpiece: vocab of %zu bytes is over the 1 GiB limit", size);
    size_t bad = 0;
    if (size && !utf8_valid((const unsigned char *)data, size, &bad))
        return ct__error(CT_ERR_FORMAT, "wordpiece: vocab is not valid UTF-8 (byte %zu)", bad);
    /* lines: \n, \r\n or \r end one (Python's universal newlines) */
    size_t lines = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n' || (data[i] == '\r' && (i + 1 >= size || data[i + 1] != '\n'))) lines++;
    }
    if (size && data[size - 1] != '\n' && data[size - 1] != '\r') lines++;
    if (lines == 0) return ct__error(CT_ERR_FORMAT, "wordpiece: the vocab is empty (no tokens)");
    ct_wordpiece *t = calloc(1, sizeof *t);
    if (!t) return ct__error(CT_ERR_OOM, "wordpiece: out of memory");
    t->lower = lower_case;
    t->n = (int64_t)lines;
    size_t cap = 16;
    while (cap < lines * 2) cap <<= 1;
    t->blob = malloc(size + lines + 1);
    t->off = malloc(sizeof *t->off * lines);
    t->len = malloc(sizeof *t->len * lines);
    t->slot = malloc(sizeof *t->slot * cap);
    if (!t->blob || !t->off || !t->len || !t->slot) {
        ct_wordpiece_free(t);
        return ct__error(CT_ERR_OOM, "wordpiece: out of memory for a vocab of %zu tokens", lines);
    }
    t->mask = cap - 1;
    for (size_t i = 0; i < cap; i++) t->slot[i] = -1;
    size_t w = 0, id = 0, i = 0;
    while (id < lines) {
        size_t st = i;
        while (i < size && data[i] != '\n' && data[i] != '\r') i++;
        size_t L = i - st;
        memcpy(t->blob + w, data + st, L);
        t->blob[w + L] = 0;
        t->off[id] = w;
        t->len[id] = L;
        w += L + 1;
        if (i < size && data[i] == '\r' && i + 1 < size && data[i + 1] == '\n') i++;
        i++;
        /* insert: a repeated token takes the later id, like a dict */
        size_t h = (size_t)hash_bytes(t->blob + t->off[id], L, NULL, 0) & t->mask;
        for (;;) {
            int64_t o = t->slot[h];
            if (o < 0 || (t->len[o] == L && memcmp(t->blob + t->off[o], t->blob + t->off[id], L) == 0)) {
                t->slot[h] = (int64_t)id;
                break;
            }
            h = (h + 1) & t->mask;
        }
        id++;
    }
    for (int k = 0; k < SP_N; k++) t->sp[k] = vocab_find2(t, "", 0, k_special[k], strlen(k_special[k]));
    return t;
}

ct_wordpiece *ct_wordpiece_load(const char *path, bool lower_case) {
    if (!path) return ct__error(CT_ERR_NULL, "wordpiece_load: NULL path");
    FILE *f = fopen(path, "rb");
    if (!f) return ct__error(CT_ERR_IO, "wordpiece_load: cannot open '%s': %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap > WP_MAX_VOCAB) {
                free(buf);
                fclose(f);
                return ct__error(CT_ERR_FORMAT, "wordpiece_load: '%s' is over the 1 GiB limit", path);
            }
            cap = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return ct__error(CT_ERR_OOM, "wordpiece_load: out of memory reading '%s'", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ct__error(CT_ERR_IO, "wordpiece_load: read error on '%s'", path);
    }
    ct_wordpiece *t = ct_wordpiece_load_buffer(buf, n, lower_case);
    free(buf);
    if (!t) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        return ct__error(ct_last_error_code(), "%s ('%s')", msg, path);
    }
    return t;
}

void ct_wordpiece_free(ct_wordpiece *t) {
    if (!t) return;
    free(t->blob);
    free(t->off);
    free(t->len);
    free(t->slot);
    free(t);
}

int64_t ct_wordpiece_vocab_size(const ct_wordpiece *t) { return t ? t->n : 0; }
int64_t ct_wordpiece_cls_id(const ct_wordpiece *t) { return t ? t->sp[SP_CLS] : -1; }
int64_t ct_wordpiece_sep_id(const ct_wordpiece *t) { return t ? t->sp[SP_SEP] : -1; }
int64_t ct_wordpiece_pad_id(const ct_wordpiece *t) { return t ? t->sp[SP_PAD] : -1; }
int64_t ct_wordpiece_unk_id(const ct_wordpiece *t) { return t ? t->sp[SP_UNK] : -1; }

int64_t ct_wordpiece_token_to_id(const ct_wordpiece *t, const char *token) {
    if (!t || !token) return -1;
    return vocab_find2(t, "", 0, token, strlen(token));
}

const char *ct_wordpiece_id_to_token(const ct_wordpiece *t, int64_t id) {
    if (!t) return ct__error(CT_ERR_NULL, "wordpiece_id_to_token: NULL tokenizer");
    if (id < 0 || id >= t->n)
        return ct__error(CT_ERR_INDEX, "wordpiece_id_to_token: id %lld out of range for a vocab of %lld",
                         (long long)id, (long long)t->n);
    return t->blob + t->off[id];
}

/* ---- growable vectors ---------------------------------------------------------- */
typedef struct { uint32_t *p; size_t n, cap; } u32v;
typedef struct { int64_t *p; size_t n, cap; } i64v;

static int u32_push(u32v *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        uint32_t *np = nc > SIZE_MAX / 4 ? NULL : realloc(v->p, nc * sizeof *np);
        if (!np) return -1;
        v->p = np;
        v->cap = nc;
    }
    v->p[v->n++] = x;
    return 0;
}
static int i64_push(i64v *v, int64_t x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 64;
        int64_t *np = nc > SIZE_MAX / 8 ? NULL : realloc(v->p, nc * sizeof *np);
        if (!np) return -1;
        v->p = np;
        v->cap = nc;
    }
    v->p[v->n++] = x;
    return 0;
}

/* BERT's _is_chinese_char: the CJK Unified Ideographs blocks */
static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B820 && c <= 0x2CEAF) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int put_utf8(char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xC0 | (c >> 6)); o[1] = (char)(0x80 | (c & 0x3F)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12)); o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18)); o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F)); o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* working state of one encode call */
typedef struct {
    const ct_wordpiece *t;
    i64v out;
    u32v a, b;
    char *bytes;        /* UTF-8 of the current word (<= 100 chars * 4) */
    size_t boff[WP_MAX_WORD + 1];
} wp_run;

/* WordpieceTokenizer.tokenize of one word (no whitespace, no punctuation
 * inside): greedy longest match first */
static int wordpiece_word(wp_run *r, const uint32_t *w, size_t n) {
    const ct_wordpiece *t = r->t;
    if (n == 0) return 0;
    if (n > WP_MAX_WORD) goto unk;
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        r->boff[i] = nb;
        nb += (size_t)put_utf8(r->bytes + nb, w[i]);
    }
    r->boff[n] = nb;
    size_t first = r->out.n, start = 0;
    while (start < n) {
        int64_t hit = -1;
        size_t end = n;
        for (; end > start; end--) {
            hit = vocab_find2(t, "##", start ? 2 : 0, r->bytes + r->boff[start], r->boff[end] - r->boff[start]);
            if (hit >= 0) break;
        }
        if (hit < 0) {
            r->out.n = first; /* the whole word becomes [UNK] */
            goto unk;
        }
        if (i64_push(&r->out, hit)) return -1;
        start = end;
    }
    return 0;
unk:
    if (t->sp[SP_UNK] < 0) {
        ct__error(CT_ERR_ARG, "wordpiece: a word has no pieces in the vocab and the vocab has no [UNK]");
        return -2;
    }
    return i64_push(&r->out, t->sp[SP_UNK]);
}

/* one whitespace-delimited token of the normalized text: punctuation
 * split off, then word pieces */
static int basic_token(wp_run *r, const uint32_t *w, size_t n) {
    size_t st = 0;
    for (size_t i = 0; i < n; i++) {
        if (ct__uc_is_punct(w[i])) {
            int e = wordpiece_word(r, w + st, i - st);
            if (!e) e = wordpiece_word(r, w + i, 1);
            if (e) return e;
            st = i + 1;
        }
    }
    return wordpiece_word(r, w + st, n - st);
}

/* text[0..n) contains no special token: BertNormalizer (clean, CJK
 * spacing, with lower_case strip accents then lower case, character by
 * character), then BertPreTokenizer (whitespace, punctuation) */
static int basic_segment(wp_run *r, const uint32_t *cp, size_t n) {
    const bool lower = r->t->lower;
    r->a.n = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = cp[i];
        if (ct__uc_is_drop(c)) continue;
        if (ct__uc_is_space(c)) c = ' ';
        if (is_cjk(c)) {
            if (u32_push(&r->a, ' ') || u32_push(&r->a, c) || u32_push(&r->a, ' ')) return -1;
            continue;
        }
        if (!lower) {
            if (u32_push(&r->a, c)) return -1;
            continue;
        }
        const uint32_t *seq;
        uint32_t buf[3];
        int k = ct__uc_strip_accents(c, &seq, buf);
        for (int j = 0; j < k; j++) {
            uint32_t lo[2];
            int m = ct__uc_lower(seq[j], lo);
            for (int q = 0; q < m; q++)
                if (u32_push(&r->a, lo[q])) return -1;
        }
    }
    size_t i = 0;
    while (i < r->a.n) {
        while (i < r->a.n && (r->a.p[i] == ' ' || ct__uc_is_split(r->a.p[i]))) i++;
        size_t st = i;
        while (i < r->a.n && r->a.p[i] != ' ' && !ct__uc_is_split(r->a.p[i])) i++;
        if (i > st) {
            int e = basic_token(r, r->a.p + st, i - st);
            if (e) return e;
        }
    }
    return 0;
}

/* all ids of text (no [CLS]/[SEP]) into r->out; 0, or < 0 with an error set */
static int tokenize(wp_run *r, const char *text, size_t n, const char *who) {
    if (n > WP_MAX_TEXT)
        return ct__error_status(CT_ERR_ARG, "%s: text of %zu bytes is over the 2^30-byte limit", who, n), -2;
    const unsigned char *s = (const unsigned char *)text;
    r->b.n = 0;
    size_t i = 0;
    while (i < n) {
        /* a special token written in the text */
        if (s[i] == '[') {
            int hit = -1;
            for (int k = 0; k < SP_N && hit < 0; k++) {
                size_t L = strlen(k_special[k]);
                if (r->t->sp[k] >= 0 && n - i >= L && memcmp(s + i, k_special[k], L) == 0) hit = k;
            }
            if (hit >= 0) {
                int e = basic_segment(r, r->b.p, r->b.n);
                if (e) return e;
                r->b.n = 0;
                if (i64_push(&r->out, r->t->sp[hit])) return -1;
                i += strlen(k_special[hit]);
                continue;
            }
        }
        uint32_t c;
        size_t at = i;
        if (!utf8_next(s, n, &i, &c)) {
            ct__error(CT_ERR_ARG, "%s: invalid UTF-8 at byte %zu of the text", who, at);
            return -2;
        }
        if (u32_push(&r->b, c)) return -1;
    }
    return basic_segment(r, r->b.p, r->b.n);
}

static void run_free(wp_run *r) {
    free(r->out.p);
    free(r->a.p);
    free(r->b.p);
    free(r->bytes);
}

/* tokenize + specials + truncation into r->out */
static int encode_ids(wp_run *r, const char *text, size_t len, int64_t max_length, bool special,
                      const char *who) {
    r->out.n = 0;
    if (!text) {
        ct__error(CT_ERR_NULL, "%s: NULL text", who);
        return -2;
    }
    const ct_wordpiece *t = r->t;
    if (special && (t->sp[SP_CLS] < 0 || t->sp[SP_SEP] < 0)) {
        ct__error(CT_ERR_ARG, "%s: the vocab has no %s token", who, t->sp[SP_CLS] < 0 ? "[CLS]" : "[SEP]");
        return -2;
    }
    if (max_length < 0 || (special && max_length == 1)) {
        ct__error(CT_ERR_ARG, "%s: max_length %lld is invalid (0: no limit; >= 2 with special tokens)", who,
                  (long long)max_length);
        return -2;
    }
    if (special && i64_push(&r->out, t->sp[SP_CLS])) return -1;
    int e = tokenize(r, text, len, who);
    if (e) return e;
    if (max_length > 0 && r->out.n + (special ? 1 : 0) > (size_t)max_length)
        r->out.n = (size_t)max_length - (special ? 1 : 0);
    if (special && i64_push(&r->out, t->sp[SP_SEP])) return -1;
    return 0;
}

static bool run_init(wp_run *r, const ct_wordpiece *t) {
    memset(r, 0, sizeof *r);
    r->t = t;
    r->bytes = malloc(WP_MAX_WORD * 4 + 4);
    return r->bytes != NULL;
}

ct_tensor *ct_wordpiece_encode_len(const ct_wordpiece *t, const char *text, size_t len, int64_t max_length,
                                   bool add_special_tokens) {
    if (!t) return ct__error(CT_ERR_NULL, "wordpiece_encode: NULL tokenizer");
    wp_run r;
    if (!run_init(&r, t)) return ct__error(CT_ERR_OOM, "wordpiece_encode: out of memory");
    int e = encode_ids(&r, text, len, max_length, add_special_tokens, "wordpiece_encode");
    ct_tensor *res = NULL;
    if (e == -1) ct__error(CT_ERR_OOM, "wordpiece_encode: out of memory");
    else if (!e) res = ct_from_array(r.out.p ? r.out.p : (int64_t[]){0}, (const int64_t[]){(int64_t)r.out.n}, 1,
                                     CT_I64);
    run_free(&r);
    return res;
}

ct_status ct_wordpiece_encode_batch(const ct_wordpiece *t, const char *const *texts, int64_t n,
                                    int64_t max_length, ct_tensor **input_ids, ct_tensor **attention_mask) {
    if (!t || !texts || !input_ids)
        return ct__error_status(CT_ERR_NULL, "wordpiece_encode_batch: NULL %s",
                                !t ? "tokenizer" : !texts ? "texts" : "input_ids");
    if (n < 1 || n > ((int64_t)1 << 31))
        return ct__error_status(CT_ERR_ARG, "wordpiece_encode_batch: n must be in [1, 2^31], got %lld",
                                (long long)n);
    wp_run r;
    if (!run_init(&r, t)) return ct__error_status(CT_ERR_OOM, "wordpiece_encode_batch: out of memory");
    int64_t **rows = calloc((size_t)n, sizeof *rows);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int64_t *ids = NULL, *mask = NULL;
    ct_status st = CT_OK;
    size_t L = 0;
    if (!rows || !lens) goto oom;
    for (int64_t i = 0; i < n; i++) {
        int e = encode_ids(&r, texts[i], texts[i] ? strlen(texts[i]) : 0, max_length, true,
                           "wordpiece_encode_batch");
        if (e == -1) goto oom;
        if (e) {
            st = ct_last_error_code();
            goto done;
        }
        rows[i] = malloc(r.out.n * sizeof(int64_t));
        if (!rows[i]) goto oom;
        memcpy(rows[i], r.out.p, r.out.n * sizeof(int64_t));
        lens[i] = r.out.n;
        if (r.out.n > L) L = r.out.n;
    }
    for (int64_t i = 0; i < n; i++)
        if (lens[i] < L && t->sp[SP_PAD] < 0) {
            st = ct__error_status(CT_ERR_ARG, "wordpiece_encode_batch: the vocab has no [PAD] token to pad with");
            goto done;
        }
    if ((size_t)n > SIZE_MAX / 8 / L) goto oom;
    ids = malloc((size_t)n * L * sizeof *ids);
    mask = malloc((size_t)n * L * sizeof *mask);
    if (!ids || !mask) goto oom;
    for (int64_t i = 0; i < n; i++)
        for (size_t j = 0; j < L; j++) {
            bool in = j < lens[i];
            ids[(size_t)i * L + j] = in ? rows[i][j] : t->sp[SP_PAD];
            mask[(size_t)i * L + j] = in;
        }
    {
        int64_t shape[2] = {n, (int64_t)L};
        ct_tensor *ti = ct_from_array(ids, shape, 2, CT_I64);
        ct_tensor *tm = attention_mask ? ct_from_array(mask, shape, 2, CT_I64) : NULL;
        if (!ti || (attention_mask && !tm)) {
            st = ct_last_error_code();
            goto done;
        }
        *input_ids = ti;
        if (attention_mask) *attention_mask = tm;
    }
    goto done;
oom:
    st = ct__error_status(CT_ERR_OOM, "wordpiece_encode_batch: out of memory");
done:
    if (rows)
        for (int64_t i = 0; i < n; i++) free(rows[i]);
    free(rows);
    free(lens);
    free(ids);
    free(mask);
    run_free(&r);
    return st;
}

ct_tensor *ct_wordpiece_encode(const ct_wordpiece *t, const char *text, int64_t max_length,
                               bool add_special_tokens) {
    return ct_wordpiece_encode_len(t, text, text ? strlen(text) : 0, max_length, add_special_tokens);
}

/* ---- decode ---------------------------------------------------------------------- */
/* s with every occurrence of from replaced by to (left to right, like
 * str.replace); to is never longer than from, so in place */
static void replace_all(char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    char *r = s, *w = s;
    while (*r) {
        if (strncmp(r, from, fl) == 0) {
            memcpy(w, to, tl);
            w += tl;
            r += fl;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

char *ct_wordpiece_decode(const ct_wordpiece *t, const int64_t *ids, int64_t n, bool skip_special_tokens) {
    if (!t || (!ids && n > 0)) return ct__error(CT_ERR_NULL, "wordpiece_decode: NULL %s", t ? "ids" : "tokenizer");
    if (n < 0) return ct__error(CT_ERR_ARG, "wordpiece_decode: negative count %lld", (long long)n);
    size_t total = 1, longest = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n)
            return ct__error(CT_ERR_INDEX, "wordpiece_decode: id %lld (position %lld) out of range for a vocab "
                                           "of %lld", (long long)ids[i], (long long)i, (long long)t->n);
        total += t->len[ids[i]] + 1;
        if (t->len[ids[i]] > longest) longest = t->len[ids[i]];
    }
    char *s = malloc(total), *piece = malloc(longest + 2);
    if (!s || !piece) {
        free(s);
        free(piece);
        return ct__error(CT_ERR_OOM, "wordpiece_decode: out of memory");
    }
    /* tokenizers' WordPiece decoder: token i > 0 loses a leading "##" or
     * gets a leading space, then the clean-up runs on each token alone */
    static const char *const k_clean[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                             {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
                                             {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    size_t w = 0;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++) {
        bool sp = false;
        for (int q = 0; q < SP_N; q++) sp |= ids[i] == t->sp[q];
        if (skip_special_tokens && sp) continue;
        const char *tok = t->blob + t->off[ids[i]];
        size_t L = t->len[ids[i]], pl = 0;
        if (k > 0 && L >= 2 && tok[0] == '#' && tok[1] == '#') {
            tok += 2;
            L -= 2;
        } else if (k > 0) {
            piece[pl++] = ' ';
        }
        memcpy(piece + pl, tok, L);
        pl += L;
        piece[pl] = 0;
        for (size_t c = 0; c < sizeof k_clean / sizeof k_clean[0]; c++) replace_all(piece, k_clean[c][0], k_clean[c][1]);
        pl = strlen(piece);
        memcpy(s + w, piece, pl);
        w += pl;
        k++;
    }
    s[w] = 0;
    free(piece);
    return s;
}
