/* gpt2_train.c -- GPT-2 small (124M parameters at GPT-2's vocabulary)
 * trained from scratch on the King James Bible, with a byte-level BPE
 * tokenizer learned from the training text, then sampled.
 *
 * Data: the text of Debian's bible-kjv package (one verse per line, the
 * references stripped; see text_data.h), or --data FILE.  The first 90%
 * trains (and teaches the tokenizer), the last 10% validates.
 *
 * Tokenizer: GPT-2's scheme -- bytes are the first 256 tokens, the text is
 * split into pieces first (GPT-2's pattern: the contractions 's 't 're 've
 * 'm 'll 'd, an optional space followed by a run of letters, or of digits,
 * or of other symbols, and runs of white space, the last blank of a run
 * going to the next word), and merges of adjacent tokens are learned in
 * order of frequency and applied in that order.  GPT-2's own vocabulary
 * files are not shipped by any Debian or PyPI package, so the merges are
 * learned here, --vocab of them (4096 by default) from the training text;
 * any byte string encodes (there are no unknown tokens) and decodes back
 * exactly.  Bytes >= 0x80 count as letters, so UTF-8 words stay whole.
 *
 * Model: ct_gpt2_lm_head_model_new with GPT-2 small's configuration (12
 * layers, n_embd 768, 12 heads, 1024 positions, GELU tanh, lm_head tied to
 * the token embedding), no dropout, the vocabulary padded to a multiple of
 * 64 (the padding rows are never a target).  It runs the path that
 * `make bench`'s gpt2_train cases measure: ct_gpt2_forward with its fused
 * cross entropy, flash attention, the AVX-512 GEMMs, AdamW's fused
 * multi-tensor step, and with --dtype bf16 autocast (bf16 products, float32
 * master weights).  Training: AdamW (lr 6e-4, betas 0.9/0.95, weight decay
 * 0.1 on matrices only), linear warmup then cosine decay to lr/10,
 * gradient clipping at norm 1, batch 4 random windows of 64 tokens.
 * The progress line shows tokens/s and the model's GFLOP/s (llm.c's count:
 * 6 N per token plus 12 L C T for attention).  Every --eval-every seconds
 * the validation loss is printed (nats per token and per byte) and a
 * checkpoint is written atomically (--checkpoint FILE; by default
 * gpt2_train.safetensors next to the program): the model under HF's keys,
 * the tokenizer's merges ("tokenizer.merges", int32 [n, 2]) and the run's
 * configuration ("meta.config").
 * --check (the test suite runs it on a small model): the tokenizer must
 * give back the text byte for byte, training must lower the validation
 * loss by at least 1 nat per token, and the checkpoint read back must give
 * the same merges, the same encoding and the same validation loss.
 *
 *   gpt2_train [--time-limit S] [--steps N] [--data FILE] [--vocab V]
 *              [--layers L] [--embd C] [--heads H] [--ctx T] [--batch B]
 *              [--lr LR] [--warmup N] [--eval-every S] [--threads N]
 *              [--seed S] [--dtype f32|bf16] [--checkpoint FILE]
 *              [--sample N] [--check]
 *   gpt2_train --generate N [--checkpoint FILE] [--prompt TEXT]
 *              [--temperature T] [--top-k K] [--seed S]
 */
#include <ctorch/amp.h>
#include <ctorch/ctorch.h>
#include <ctorch/io.h>
#include <ctorch/models.h>
#include <ctorch/optim.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text_data.h"

#define PROG "gpt2_train"

static int fail(const char *what) {
    fprintf(stderr, "\n" PROG ": %s: %s\n", what, ct_last_error());
    return 1;
}

static int oom(void) {
    fprintf(stderr, PROG ": out of memory\n");
    return 1;
}

/* ---- byte-level BPE ---------------------------------------------------------------- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* pair (a, b) -> int64, open addressing (key + 1 stored; 0 is empty) */
typedef struct pmap {
    uint64_t *keys;
    int64_t *vals;
    size_t cap, len;
} pmap;

static uint64_t pkey(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static int64_t *pm_at(pmap *m, uint64_t key, bool create);

static bool pm_grow(pmap *m) {
    pmap n = {calloc(m->cap ? 2 * m->cap : 1024, 8), calloc(m->cap ? 2 * m->cap : 1024, 8),
              m->cap ? 2 * m->cap : 1024, 0};
    if (!n.keys || !n.vals) {
        free(n.keys);
        free(n.vals);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i]) *pm_at(&n, m->keys[i] - 1, true) = m->vals[i];
    free(m->keys);
    free(m->vals);
    *m = n;
    return true;
}

/* the value of key; with create, made (0) when absent (NULL: no memory) */
static int64_t *pm_at(pmap *m, uint64_t key, bool create) {
    if (create && (m->len + 1) * 2 > m->cap && !pm_grow(m)) return NULL;
    if (!m->cap) return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = mix64(key) & mask;; i = (i + 1) & mask) {
        if (m->keys[i] == key + 1) return &m->vals[i];
        if (!m->keys[i]) {
            if (!create) return NULL;
            m->keys[i] = key + 1;
            m->vals[i] = 0;
            m->len++;
            return &m->vals[i];
        }
    }
}

static void pm_free(pmap *m) {
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* A set of distinct byte strings (the text's pieces), each with a count
 * and a span of int32 symbols (its tokens). */
typedef struct pieces {
    uint8_t *bytes;  /* the strings, one after another */
    size_t nbytes, capbytes;
    size_t *off;     /* string i: bytes[off[i] .. off[i] + len[i]) */
    int32_t *len;
    int64_t *count;
    int32_t *sym;    /* symbols of string i: sym[soff[i] .. soff[i] + nsym[i]) */
    size_t *soff, nsymtot, capsym;
    int32_t *nsym;
    int32_t n, cap;
    int32_t *slot;   /* hash table of indices, -1 empty */
    size_t nslot;
} pieces;

static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static bool pc_rehash(pieces *w) {
    size_t ns = w->nslot ? 2 * w->nslot : 4096;
    int32_t *s = malloc(ns * sizeof *s);
    if (!s) return false;
    memset(s, 0xff, ns * sizeof *s);
    for (int32_t i = 0; i < w->n; i++) {
        size_t j = fnv(w->bytes + w->off[i], (size_t)w->len[i]) & (ns - 1);
        while (s[j] >= 0) j = (j + 1) & (ns - 1);
        s[j] = i;
    }
    free(w->slot);
    w->slot = s;
    w->nslot = ns;
    return true;
}

#define GROW(ptr, cap, need)                                                      \
    do {                                                                          \
        if ((need) > (cap)) {                                                     \
            size_t nc_ = (cap) ? (size_t)(cap) : 64;                              \
            while (nc_ < (size_t)(need)) nc_ *= 2;                                \
            void *np_ = realloc((ptr), nc_ * sizeof *(ptr));                      \
            if (!np_) return -2;                                                  \
            (ptr) = np_;                                                          \
        }                                                                         \
    } while (0)

/* the index of string p[0..n) (added, count 0, when absent and add);
 * -1: absent, -2: no memory */
static int32_t pc_find(pieces *w, const uint8_t *p, int32_t n, bool add) {
    if ((size_t)(w->n + 1) * 2 > w->nslot && !pc_rehash(w)) return -2;
    size_t mask = w->nslot - 1, j = fnv(p, (size_t)n) & mask;
    for (; w->slot[j] >= 0; j = (j + 1) & mask) {
        int32_t i = w->slot[j];
        if (w->len[i] == n && !memcmp(w->bytes + w->off[i], p, (size_t)n)) return i;
    }
    if (!add) return -1;
    if (w->n == w->cap) {
        int32_t nc = w->cap ? 2 * w->cap : 1024;
        GROW(w->off, w->cap, nc);
        GROW(w->soff, w->cap, nc);
        GROW(w->len, w->cap, nc);
        GROW(w->nsym, w->cap, nc);
        GROW(w->count, w->cap, nc);
        w->cap = nc;
    }
    GROW(w->bytes, w->capbytes, w->nbytes + (size_t)n);
    memcpy(w->bytes + w->nbytes, p, (size_t)n);
    int32_t i = w->n++;
    w->off[i] = w->nbytes;
    w->len[i] = n;
    w->count[i] = 0;
    w->soff[i] = 0;
    w->nsym[i] = 0;
    w->nbytes += (size_t)n;
    w->slot[j] = i;
    return i;
}

static void pc_free(pieces *w) {
    free(w->bytes);
    free(w->off);
    free(w->len);
    free(w->count);
    free(w->sym);
    free(w->soff);
    free(w->nsym);
    free(w->slot);
    memset(w, 0, sizeof *w);
}

/* GPT-2's pre-tokenizer pattern over bytes: 0 white space, 1 letter (any
 * byte >= 0x80 too), 2 digit, 3 anything else */
static int cls(uint8_t c) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return 0;
    if ((c | 32) >= 'a' && (c | 32) <= 'z') return 1;
    if (c >= 0x80) return 1;
    if (c >= '0' && c <= '9') return 2;
    return 3;
}

/* where the piece that starts at s[i] ends */
static size_t piece_end(const uint8_t *s, size_t n, size_t i) {
    static const char *const contr[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    if (s[i] == '\'')
        for (int k = 0; k < 7; k++) {
            size_t l = strlen(contr[k]);
            if (i + 1 + l <= n && !memcmp(s + i + 1, contr[k], l)) return i + 1 + l;
        }
    size_t j = i;
    if (s[j] == ' ' && j + 1 < n && cls(s[j + 1])) j++;
    int c = cls(s[j]);
    if (c) {
        while (j < n && cls(s[j]) == c) j++;
        return j;
    }
    size_t e = j;
    while (e < n && !cls(s[e])) e++;
    if (e < n && e - j > 1) e--; /* \s+(?!\S): the last blank goes with the next word */
    return e;
}

typedef struct bpe {
    int32_t nmerges;
    int32_t (*merges)[2]; /* merge r makes token 256 + r of merges[r] */
    pmap rank;             /* (a, b) -> r */
    uint8_t **tok;         /* the bytes of each token */
    int32_t *toklen;
} bpe;

static void bpe_free(bpe *t) {
    if (t->tok)
        for (int32_t i = 0; i < 256 + t->nmerges; i++) free(t->tok[i]);
    free(t->tok);
    free(t->toklen);
    free(t->merges);
    pm_free(&t->rank);
    memset(t, 0, sizeof *t);
}

/* the rank map and every token's bytes, from merges[0..nmerges) */
static bool bpe_index(bpe *t) {
    int32_t nt = 256 + t->nmerges;
    t->tok = calloc((size_t)nt, sizeof *t->tok);
    t->toklen = calloc((size_t)nt, sizeof *t->toklen);
    if (!t->tok || !t->toklen) return false;
    for (int32_t i = 0; i < nt; i++) {
        int32_t a = i < 256 ? -1 : t->merges[i - 256][0], b = i < 256 ? -1 : t->merges[i - 256][1];
        if (i >= 256 && (a < 0 || b < 0 || a >= i || b >= i)) {
            fprintf(stderr, PROG ": merge %d refers to token %d or %d, not made before it\n", i - 256, a, b);
            return false;
        }
        t->toklen[i] = i < 256 ? 1 : t->toklen[a] + t->toklen[b];
        if (!(t->tok[i] = malloc((size_t)t->toklen[i]))) return false;
        if (i < 256) t->tok[i][0] = (uint8_t)i;
        else {
            memcpy(t->tok[i], t->tok[a], (size_t)t->toklen[a]);
            memcpy(t->tok[i] + t->toklen[a], t->tok[b], (size_t)t->toklen[b]);
        }
        int64_t *r = i >= 256 ? pm_at(&t->rank, pkey(a, b), true) : NULL;
        if (i >= 256 && !r) return false;
        if (r) *r = i - 256;
    }
    return true;
}

/* adds (add = 1) or removes (-1) the adjacent pairs of one symbol string,
 * weighted by count */
static bool count_pairs(pmap *pc, const int32_t *s, int32_t n, int64_t count) {
    for (int32_t k = 0; k + 1 < n; k++) {
        int64_t *v = pm_at(pc, pkey(s[k], s[k + 1]), true);
        if (!v) return false;
        *v += count;
    }
    return true;
}

/* replaces each (a, b) in s[0..n) by z, left to right; the new length */
static int32_t merge_in(int32_t *s, int32_t n, int32_t a, int32_t b, int32_t z) {
    int32_t o = 0;
    for (int32_t k = 0; k < n; k++) {
        if (k + 1 < n && s[k] == a && s[k + 1] == b) {
            s[o++] = z;
            k++;
        } else {
            s[o++] = s[k];
        }
    }
    return o;
}

static bool contains(const int32_t *s, int32_t n, int32_t a, int32_t b) {
    for (int32_t k = 0; k + 1 < n; k++)
        if (s[k] == a && s[k + 1] == b) return true;
    return false;
}

/* every piece of text[0..n) into w, counted; symbols = the bytes */
static int split_pieces(pieces *w, const uint8_t *text, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t e = piece_end(text, n, i);
        if (e - i > INT32_MAX / 2) return -2;
        int32_t k = pc_find(w, text + i, (int32_t)(e - i), true);
        if (k < 0) return k;
        w->count[k]++;
        i = e;
    }
    GROW(w->sym, w->capsym, w->nbytes);
    for (int32_t i = 0; i < w->n; i++) {
        w->soff[i] = w->off[i];
        w->nsym[i] = w->len[i];
        for (int32_t k = 0; k < w->len[i]; k++) w->sym[w->off[i] + (size_t)k] = w->bytes[w->off[i] + (size_t)k];
    }
    w->nsymtot = w->nbytes;
    return 0;
}

/* Learns up to nmerges merges from text (fewer when no pair occurs
 * twice): each round merges the most frequent adjacent pair (ties: the
 * smaller token ids), counting each distinct piece once with its weight. */
static bool bpe_train(bpe *t, const uint8_t *text, size_t n, int32_t nmerges) {
    pieces w = {0};
    pmap pc = {0};
    bool ok = split_pieces(&w, text, n) == 0 && (t->merges = malloc((size_t)(nmerges ? nmerges : 1) * sizeof *t->merges));
    for (int32_t i = 0; ok && i < w.n; i++) ok = count_pairs(&pc, w.sym + w.soff[i], w.nsym[i], w.count[i]);
    t->nmerges = 0;
    while (ok && t->nmerges < nmerges) {
        int64_t best = 1;
        uint64_t bk = 0;
        for (size_t i = 0; i < pc.cap; i++)
            if (pc.keys[i] && (pc.vals[i] > best || (pc.vals[i] == best && best > 1 && pc.keys[i] - 1 < bk))) {
                best = pc.vals[i];
                bk = pc.keys[i] - 1;
            }
        if (best < 2) break;
        int32_t a = (int32_t)(bk >> 32), b = (int32_t)(uint32_t)bk, z = 256 + t->nmerges;
        for (int32_t i = 0; ok && i < w.n; i++) {
            int32_t *s = w.sym + w.soff[i];
            if (!contains(s, w.nsym[i], a, b)) continue;
            ok = count_pairs(&pc, s, w.nsym[i], -w.count[i]);
            w.nsym[i] = merge_in(s, w.nsym[i], a, b, z);
            ok = ok && count_pairs(&pc, s, w.nsym[i], w.count[i]);
        }
        t->merges[t->nmerges][0] = a;
        t->merges[t->nmerges][1] = b;
        t->nmerges++;
    }
    pc_free(&w);
    pm_free(&pc);
    return ok && bpe_index(t);
}

/* GPT-2's encoding of one piece: merge the lowest-ranked adjacent pair,
 * everywhere in the piece, until no pair has a rank */
static int32_t bpe_piece(const bpe *t, const uint8_t *p, int32_t n, int32_t *out) {
    for (int32_t k = 0; k < n; k++) out[k] = p[k];
    for (;;) {
        int64_t best = INT64_MAX;
        for (int32_t k = 0; k + 1 < n; k++) {
            int64_t *r = pm_at((pmap *)&t->rank, pkey(out[k], out[k + 1]), false);
            if (r && *r < best) best = *r;
        }
        if (best == INT64_MAX) return n;
        n = merge_in(out, n, t->merges[best][0], t->merges[best][1], 256 + (int32_t)best);
    }
}

/* text[0..n) as tokens into *out (malloc'd, *ntok of them); each distinct
 * piece is encoded once.  0, or -2 when memory runs out. */
static int bpe_encode(const bpe *t, const uint8_t *text, size_t n, int64_t **out, int64_t *ntok) {
    pieces cache = {0};
    int64_t *tok = malloc((n ? n : 1) * sizeof *tok);
    int64_t nt = 0;
    int rc = tok ? 0 : -2;
    for (size_t i = 0; !rc && i < n;) {
        size_t e = piece_end(text, n, i);
        int32_t k = e - i > INT32_MAX / 2 ? -2 : pc_find(&cache, text + i, (int32_t)(e - i), true);
        if (k < 0) {
            rc = -2;
            break;
        }
        if (cache.count[k]++ == 0) { /* first time: encode it */
            size_t need = cache.nsymtot + (e - i);
            if (need > cache.capsym) {
                size_t nc = cache.capsym ? cache.capsym : 4096;
                while (nc < need) nc *= 2;
                int32_t *ns = realloc(cache.sym, nc * sizeof *ns);
                if (!ns) {
                    rc = -2;
                    break;
                }
                cache.sym = ns;
                cache.capsym = nc;
            }
            cache.soff[k] = cache.nsymtot;
            cache.nsym[k] = bpe_piece(t, text + i, (int32_t)(e - i), cache.sym + cache.nsymtot);
            cache.nsymtot += (size_t)cache.nsym[k];
        }
        for (int32_t q = 0; q < cache.nsym[k]; q++) tok[nt++] = cache.sym[cache.soff[k] + (size_t)q];
        i = e;
    }
    pc_free(&cache);
    if (rc) {
        free(tok);
        return rc;
    }
    *out = tok;
    *ntok = nt;
    return 0;
}

/* tokens -> bytes (malloc'd, NUL-terminated, *n bytes); ids outside the
 * vocabulary (padding rows) come out as nothing */
static char *bpe_decode(const bpe *t, const int64_t *tok, int64_t ntok, size_t *n) {
    size_t len = 0;
    for (int64_t i = 0; i < ntok; i++)
        if (tok[i] >= 0 && tok[i] < 256 + t->nmerges) len += (size_t)t->toklen[tok[i]];
    char *s = malloc(len + 1);
    if (!s) return NULL;
    size_t o = 0;
    for (int64_t i = 0; i < ntok; i++)
        if (tok[i] >= 0 && tok[i] < 256 + t->nmerges) {
            memcpy(s + o, t->tok[tok[i]], (size_t)t->toklen[tok[i]]);
            o += (size_t)t->toklen[tok[i]];
        }
    s[o] = 0;
    *n = o;
    return s;
}

/* ---- checkpoints ---------------------------------------------------------------- */
enum { META_STEP, META_VOCAB, META_POS, META_EMBD, META_LAYER, META_HEAD, META_N };

static ct_status save_checkpoint(const char *path, ct_module *m, const bpe *t, const int64_t meta[META_N]) {
    ct_scope s = ct_scope_begin();
    ct_sample *all = ct_module_state_dict(m);
    ct_status st = all ? CT_OK : ct_last_error_code();
    ct_tensor *mg = st ? NULL : ct_from_array(t->merges, CT_SHAPE(t->nmerges, 2), CT_I32);
    ct_tensor *c = st ? NULL : ct_from_array(meta, CT_SHAPE(META_N), CT_I64);
    if (!st && (!mg || !c)) st = ct_last_error_code();
    if (!st) st = ct_sample_set(all, "tokenizer.merges", mg);
    if (!st) st = ct_sample_set(all, "meta.config", c);
    if (!st) st = ct_safetensors_save(path, all, (const char *[]){"format", "pt", NULL});
    ct_sample_free(all);
    ct_scope_end(s);
    return st;
}

/* the tokenizer and a model with its weights, from a checkpoint */
static ct_module *load_checkpoint(const char *path, bpe *t, int64_t meta[META_N]) {
    ct_sample *all = ct_safetensors_load(path);
    if (!all) {
        fprintf(stderr, PROG ": reading the checkpoint: %s\n", ct_last_error());
        return NULL;
    }
    ct_tensor *c = ct_sample_get(all, "meta.config"), *mg = ct_sample_get(all, "tokenizer.merges");
    if (!c || !mg || ct_numel(c) != META_N || ct_get_dtype(c) != CT_I64 || ct_get_dtype(mg) != CT_I32 ||
        ct_ndim(mg) != 2 || ct_size(mg, 1) != 2 || ct_size(mg, 0) > 1000000) {
        fprintf(stderr, PROG ": %s is not a gpt2_train checkpoint (meta.config or tokenizer.merges missing or "
                        "malformed)\n", path);
        ct_sample_free(all);
        return NULL;
    }
    memcpy(meta, ct_data_ptr(c), sizeof(int64_t) * META_N);
    memset(t, 0, sizeof *t);
    t->nmerges = (int32_t)ct_size(mg, 0);
    t->merges = malloc((size_t)(t->nmerges ? t->nmerges : 1) * sizeof *t->merges);
    if (t->merges) memcpy(t->merges, ct_data_ptr(mg), (size_t)t->nmerges * sizeof *t->merges);
    ct_gpt2_config cfg = ct_gpt2_small_config();
    cfg.vocab_size = meta[META_VOCAB];
    cfg.n_positions = meta[META_POS];
    cfg.n_embd = meta[META_EMBD];
    cfg.n_layer = meta[META_LAYER];
    cfg.n_head = meta[META_HEAD];
    cfg.embd_pdrop = cfg.attn_pdrop = cfg.resid_pdrop = 0.0;
    ct_module *m = NULL;
    if (!t->merges || !bpe_index(t)) fprintf(stderr, PROG ": %s: the tokenizer could not be rebuilt\n", path);
    else if (cfg.vocab_size < 256 + t->nmerges)
        fprintf(stderr, PROG ": %s: vocabulary %lld is smaller than the tokenizer's %d tokens\n", path,
                (long long)cfg.vocab_size, 256 + t->nmerges);
    else if (!(m = ct_gpt2_lm_head_model_new(&cfg)))
        fprintf(stderr, PROG ": %s: %s\n", path, ct_last_error());
    else if (ex_load_weights(PROG, m, all)) {
        fprintf(stderr, PROG ": %s: %s\n", path, ct_last_error());
        ct_module_release(m);
        m = NULL;
    }
    ct_sample_free(all);
    return m;
}

/* ---- training and evaluation ------------------------------------------------------ */
static ct_dtype g_amp = CT_F32; /* --dtype: autocast for the forward passes (text_data.h) */

static int generate(ct_module *m, const bpe *t, const char *prompt, int64_t n, double temperature, int64_t top_k,
                    uint64_t seed, int64_t n_positions) {
    int64_t *ids = NULL, np = 0;
    if (bpe_encode(t, (const uint8_t *)prompt, strlen(prompt), &ids, &np)) return oom();
    if (np == 0) ids[np++] = '\n';
    if (np >= n_positions) {
        free(ids);
        fprintf(stderr, PROG ": the prompt is %lld tokens; the model sees at most %lld\n", (long long)np,
                (long long)n_positions);
        return 1;
    }
    if (n > n_positions - np) n = n_positions - np;
    ct_scope s = ct_scope_begin();
    double dt;
    ct_tensor *out = ex_generate(m, ids, np, n, temperature, top_k, seed, true, &dt);
    free(ids);
    size_t len = 0;
    char *txt = out ? bpe_decode(t, ct_data_ptr(out), ct_size(out, 1), &len) : NULL;
    ct_scope_end(s);
    if (!out) return fail("generating");
    if (!txt) return oom();
    fwrite(txt, 1, len, stdout);
    printf("\n[%lld tokens in %.2f s, %.1f tokens/s, temperature %g, top-k %lld]\n", (long long)n, dt,
           (double)n / dt, temperature, (long long)top_k);
    free(txt);
    return 0;
}

static int usage(const char *argv0) { /* 2: the exit status */
    fprintf(stderr,
            "usage: %s [--time-limit S] [--steps N] [--data FILE] [--vocab V] [--layers L] [--embd C]\n"
            "          [--heads H] [--ctx T] [--batch B] [--lr LR] [--warmup N] [--eval-every S]\n"
            "          [--threads N] [--seed S] [--dtype f32|bf16] [--checkpoint FILE] [--sample N] [--check]\n"
            "       %s --generate N [--checkpoint FILE] [--prompt TEXT] [--temperature T] [--top-k K] [--seed S]\n",
            argv0, argv0);
    return 2;
}

int main(int argc, char **argv) {
    double time_limit = 600, lr0 = 6e-4, eval_every = 120, temperature = 0.8;
    int64_t steps = 0, vocab = 4096, layers = 12, embd = 768, heads = 12, ctx = 64, batch = 4, warmup = 20;
    int64_t top_k = 40, ngen = 0, nsample = 200;
    int threads = 0, check = 0;
    uint64_t seed = 1337;
    const char *ckpt = NULL, *data = NULL, *prompt = "And God said";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
#define ARG(name) (!strcmp(a, name) && has && ++i)
        if (ARG("--time-limit")) time_limit = atof(argv[i]);
        else if (ARG("--steps")) steps = atoll(argv[i]);
        else if (ARG("--data")) data = argv[i];
        else if (ARG("--vocab")) vocab = atoll(argv[i]);
        else if (ARG("--layers")) layers = atoll(argv[i]);
        else if (ARG("--embd")) embd = atoll(argv[i]);
        else if (ARG("--heads")) heads = atoll(argv[i]);
        else if (ARG("--ctx")) ctx = atoll(argv[i]);
        else if (ARG("--batch")) batch = atoll(argv[i]);
        else if (ARG("--lr")) lr0 = atof(argv[i]);
        else if (ARG("--warmup")) warmup = atoll(argv[i]);
        else if (ARG("--eval-every")) eval_every = atof(argv[i]);
        else if (ARG("--threads")) threads = atoi(argv[i]);
        else if (ARG("--seed")) seed = strtoull(argv[i], NULL, 10);
        else if (ARG("--checkpoint")) ckpt = argv[i];
        else if (ARG("--sample")) nsample = atoll(argv[i]);
        else if (ARG("--generate")) ngen = atoll(argv[i]);
        else if (ARG("--prompt")) prompt = argv[i];
        else if (ARG("--temperature")) temperature = atof(argv[i]);
        else if (ARG("--top-k")) top_k = atoll(argv[i]);
        else if (!strcmp(a, "--check")) check = 1;
        else if (ARG("--dtype") && (!strcmp(argv[i], "f32") || !strcmp(argv[i], "bf16")))
            g_amp = !strcmp(argv[i], "bf16") ? CT_BF16 : CT_F32;
        else
            return usage(argv[0]);
#undef ARG
    }
    if (vocab < 256 || vocab > 1 << 20 || ctx < 2 || ctx > 1024 || batch < 1 || layers < 1 || embd < 1 ||
        heads < 1 || embd % heads || warmup < 1) {
        fprintf(stderr, PROG ": need 256 <= --vocab <= 2^20, 2 <= --ctx <= 1024, --heads dividing --embd, "
                        "positive --batch, --layers and --warmup\n");
        return 2;
    }
    char default_ckpt[4096];
    if (!ckpt) { /* next to the program (build/), not in the current directory */
        ssize_t k = readlink("/proc/self/exe", default_ckpt, sizeof default_ckpt - 32);
        if (k <= 0) k = (ssize_t)strlen(strncpy(default_ckpt, argv[0], sizeof default_ckpt - 33));
        default_ckpt[k] = 0;
        char *slash = strrchr(default_ckpt, '/');
        snprintf(slash ? slash + 1 : default_ckpt, 32, "gpt2_train.safetensors");
        ckpt = default_ckpt;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (threads > 0) ct_set_num_threads(threads);
    ct_manual_seed(seed);

    /* ---- --generate: sample from a checkpoint ---- */
    if (ngen > 0) {
        bpe t;
        int64_t meta[META_N];
        ct_module *m = load_checkpoint(ckpt, &t, meta);
        if (!m) return 1;
        printf("checkpoint %s: step %lld, vocabulary %d tokens\n", ckpt, (long long)meta[META_STEP], 256 + t.nmerges);
        int rc = generate(m, &t, prompt, ngen, temperature, top_k, seed, meta[META_POS]);
        ct_module_release(m);
        bpe_free(&t);
        return rc;
    }

    /* ---- data and tokenizer ---- */
    size_t n = 0;
    char *text = NULL;
    if (data) {
        FILE *f = fopen(data, "rb");
        if (!f) {
            fprintf(stderr, PROG ": ");
            perror(data);
            return 1;
        }
        text = ex_read_all(f, &n);
        fclose(f);
    } else {
        text = ex_load_bible(PROG, &n);
    }
    if (!text) return 1;
    size_t ntrain_b = n * 9 / 10;
    double t0 = ex_now_s();
    bpe tk = {0};
    if (!bpe_train(&tk, (const uint8_t *)text, ntrain_b, (int32_t)(vocab - 256))) return oom();
    int64_t *tok = NULL, ntok = 0, ntrain = 0, nval = 0;
    if (bpe_encode(&tk, (const uint8_t *)text, ntrain_b, &tok, &ntrain)) return oom();
    int64_t *vtok = NULL;
    if (bpe_encode(&tk, (const uint8_t *)text + ntrain_b, n - ntrain_b, &vtok, &nval)) return oom();
    double t_tok = ex_now_s() - t0;
    ntok = ntrain + nval;
    int64_t *all = realloc(tok, sizeof(int64_t) * (size_t)(ntok ? ntok : 1));
    if (!all) return oom();
    memcpy(all + ntrain, vtok, sizeof(int64_t) * (size_t)nval);
    free(vtok);
    tok = all;
    const int64_t *val = tok + ntrain;
    int64_t T = ctx, B = batch;
    printf(PROG ": %zu bytes; byte-level BPE with %d merges learned from the first %zu in %.2f s: %lld train and "
           "%lld validation tokens (%.2f bytes a token)\n",
           n, tk.nmerges, ntrain_b, t_tok, (long long)ntrain, (long long)nval, (double)n / (double)(ntok ? ntok : 1));
    if (check) { /* the tokenizer gives the text back byte for byte */
        size_t dn = 0;
        char *back = bpe_decode(&tk, tok, ntok, &dn);
        if (!back) return oom();
        size_t bad = 0;
        while (bad < dn && bad < n && back[bad] == text[bad]) bad++;
        free(back);
        if (dn != n || bad != n) {
            fprintf(stderr, PROG ": check failed: decoding the tokens gives %zu bytes, differing from the text's %zu "
                            "at byte %zu\n", dn, n, bad);
            return 1;
        }
        printf("check: decode(encode(text)) is the text, %zu bytes\n", n);
    }
    free(text);
    if (nval < T + 2 || ntrain < T + 2) {
        fprintf(stderr, PROG ": the text is too short for windows of %lld tokens (%lld train, %lld validation)\n",
                (long long)T, (long long)ntrain, (long long)nval);
        free(tok);
        bpe_free(&tk);
        return 1;
    }

    /* ---- model and optimizer ---- */
    ct_gpt2_config c = ct_gpt2_small_config();
    c.vocab_size = (256 + tk.nmerges + 63) / 64 * 64;
    c.n_embd = embd;
    c.n_layer = layers;
    c.n_head = heads;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0;
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    if (!m) return fail("building the model");
    ct_tensor *ps[512], *decay[512], *nodecay[512];
    int np = ct_module_named_parameters(m, NULL, ps, 512), nd = 0, nn = 0;
    if (np < 0 || np > 512) return fail("listing the parameters");
    for (int i = 0; i < np; i++) {
        if (ct_ndim(ps[i]) >= 2) decay[nd++] = ps[i];
        else nodecay[nn++] = ps[i];
    }
    ct_optimizer *opt = ct_adamw_new(decay, nd, lr0, 0.9, 0.95, 1e-8, 0.1, false, false);
    if (!opt ||
        ct_optim_add_param_group(opt, nodecay, nn, (const char *[]){"weight_decay"}, (const double[]){0.0}, 1) < 0 ||
        ct_optim_set_all(opt, "fused", 1))
        return fail("building the optimizer");
    int64_t nparam = ct_module_num_parameters(m, false);
    /* llm.c's count, as bench_suite's gpt2_train prints it: 6 N a token
     * for the weight products (the tied lm_head once, embeddings free) plus
     * 12 L C T a token for QK^T and AV */
    double Nw = (double)layers * 12.0 * (double)(embd * embd) + (double)c.vocab_size * (double)embd;
    double flops_step = 6.0 * Nw * (double)(B * T) + 12.0 * (double)layers * (double)(B * T) * (double)T * (double)embd;
    printf("GPT-2: %lld layers, n_embd %lld, %lld heads, vocabulary %lld (padded from %d), %lld parameters; "
           "batch %lld x %lld tokens, lr %g, %s, %d threads\n",
           (long long)layers, (long long)embd, (long long)heads, (long long)c.vocab_size, 256 + tk.nmerges,
           (long long)nparam, (long long)B, (long long)T, lr0,
           g_amp == CT_F32 ? "float32" : "autocast bf16 (float32 master weights)", ct_get_num_threads());
    const int64_t eval_batches = check ? 8 : 4;
    double vl0 = check ? ex_eval_loss(m, val, nval, T, B, eval_batches, g_amp) : NAN;
    if (check) printf("validation loss before training %.4f nats/token\n", vl0);

    /* ---- training ---- */
    uint64_t rng = seed;
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)(B * T)), *yb = malloc(sizeof(int64_t) * (size_t)(B * T));
    if (!xb || !yb) return oom();
    double bytes_per_tok = (double)n / (double)ntok;
    double t_start = ex_now_s(), last_eval = t_start, t_train = 0, loss_ema = NAN;
    int64_t step = 0;
    bool tty = isatty(1);
    for (;;) {
        double progress = steps > 0 ? (double)step / (double)steps : (ex_now_s() - t_start) / time_limit;
        if (progress >= 1.0) break;
        double lr = ex_lr(step, warmup, lr0, progress);
        if (ct_optim_set_all(opt, "lr", lr)) return fail("setting the learning rate");
        ex_windows(&rng, tok, ntrain, T, B, xb, yb);
        double ts = ex_now_s();
        ct_scope s = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        ct_tensor *loss = NULL;
        if (ex_amp_begin(g_amp) ||
            ct_gpt2_forward(m, ct_from_array(xb, CT_SHAPE(B, T), CT_I64), ct_from_array(yb, CT_SHAPE(B, T), CT_I64),
                            NULL, NULL, &loss) ||
            ex_amp_end(g_amp) || ct_backward(loss, NULL, false, false) || ct_clip_grad_norm_(ps, np, 1.0, 2.0, false, NULL) ||
            ct_optim_step(opt))
            return fail("training step");
        double lv = ct_item(loss);
        ct_scope_end(s);
        t_train += ex_now_s() - ts;
        step++;
        loss_ema = isnan(loss_ema) ? lv : 0.9 * loss_ema + 0.1 * lv;
        double tps = (double)(step * B * T) / t_train, gf = flops_step * (double)step / t_train * 1e-9;
        if (tty || step % 10 == 0 || step <= 3) {
            printf("%sstep %5lld  %3.0f%%  loss %.4f  lr %.2e  %5.0f tok/s  %6.1f GFLOP/s  %5.0f s%s", tty ? "\r" : "",
                   (long long)step, 100 * fmin(progress, 1.0), loss_ema, lr, tps, gf, ex_now_s() - t_start,
                   tty ? "" : "\n");
            fflush(stdout);
        }
        if (!check && ex_now_s() - last_eval >= eval_every) {
            double vl = ex_eval_loss(m, val, nval, T, B, eval_batches, g_amp);
            printf("%sstep %5lld  validation loss %.4f nats/token (%.4f nats/byte)\n", tty ? "\n" : "",
                   (long long)step, vl, vl / bytes_per_tok);
            int64_t meta[META_N] = {step, c.vocab_size, c.n_positions, embd, layers, heads};
            if (save_checkpoint(ckpt, m, &tk, meta)) return fail("saving the checkpoint");
            last_eval = ex_now_s();
        }
    }
    double vl = ex_eval_loss(m, val, nval, T, B, 4 * eval_batches, g_amp);
    printf("%sfinal: step %lld, %.1f s of training (%.0f tokens/s, %.1f GFLOP/s), train loss %.4f, validation "
           "loss %.4f nats/token = %.4f nats/byte\n",
           tty ? "\n" : "", (long long)step, t_train, (double)(step * B * T) / t_train,
           flops_step * (double)step / t_train * 1e-9, loss_ema, vl, vl / bytes_per_tok);
    int64_t meta[META_N] = {step, c.vocab_size, c.n_positions, embd, layers, heads};
    if (save_checkpoint(ckpt, m, &tk, meta)) return fail("saving the checkpoint");
    printf("saved %s (try: %s --generate 200 --checkpoint %s)\n", ckpt, argv[0], ckpt);
    int rc = 0;
    if (check) {
        double v0 = ex_eval_loss(m, val, nval, T, B, eval_batches, g_amp);
        bpe t2;
        int64_t meta2[META_N];
        ct_module *m2 = load_checkpoint(ckpt, &t2, meta2);
        if (!m2) return 1;
        double v2 = ex_eval_loss(m2, val, nval, T, B, eval_batches, g_amp);
        int64_t *tok2 = NULL, ntok2 = 0;
        bool same_merges = t2.nmerges == tk.nmerges &&
                           !memcmp(t2.merges, tk.merges, (size_t)tk.nmerges * sizeof *tk.merges);
        size_t vb = 0;
        char *vtext = bpe_decode(&tk, val, nval, &vb);
        if (!vtext || bpe_encode(&t2, (const uint8_t *)vtext, vb, &tok2, &ntok2)) return oom();
        bool same_tokens = ntok2 == nval && !memcmp(tok2, val, sizeof(int64_t) * (size_t)nval);
        printf("check: validation loss %.4f -> %.4f (%.4f drop, at least 1 needed); read back: merges %s, "
               "encoding %s, validation loss %.6f vs %.6f\n",
               vl0, v0, vl0 - v0, same_merges ? "equal" : "DIFFER", same_tokens ? "equal" : "DIFFERS", v2, v0);
        if (!(vl0 - v0 >= 1.0) || !same_merges || !same_tokens || v2 != v0 || meta2[META_STEP] != step) {
            fprintf(stderr, PROG ": check failed\n");
            rc = 1;
        }
        free(vtext);
        free(tok2);
        bpe_free(&t2);
        ct_module_release(m2);
    }
    if (!rc && nsample > 0) rc = generate(m, &tk, prompt, nsample, temperature, top_k, seed, c.n_positions);
    free(xb);
    free(yb);
    free(tok);
    bpe_free(&tk);
    ct_optim_free(opt);
    ct_module_release(m);
    return rc;
}
