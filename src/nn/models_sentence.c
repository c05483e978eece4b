/* models_sentence.c -- sentence-transformers' encoder (Transformer +
 * Pooling + Normalize) over ctorch's BertModel and WordPiece tokenizer:
 * all-MiniLM-L6-v2 and its kind, loaded from a model folder (models.h). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../ops/op_table.h"
#include "../io/io_impl.h"
#include "ctorch/autograd.h"
#include "ctorch/io.h"
#include "ctorch/models.h"
#include "ctorch/text.h"
#include "models_impl.h"

#define JSON_MAX ((size_t)16 << 20)

/* models_bert.c: a BertModel without BERT's random init, for loading */
ct_module *ct__bert_model_new_for_loading(const ct_bert_config *c, bool add_pooling_layer);
ct_status ct__bert_forward_packed(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor **last_hidden);

struct ct_sentence_encoder {
    ct_module *bert;
    ct_wordpiece *tok;
    int64_t dim, max_length;
    bool cls_pooling, normalize;
};

/* ---- small file helpers ---------------------------------------------------------- */
static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* whole file, NUL-terminated; NULL + error */
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return ct__error(CT_ERR_IO, "sentence_encoder_load: cannot open '%s': %s", path, strerror(errno));
    char *buf = malloc(JSON_MAX + 1);
    size_t n = buf ? fread(buf, 1, JSON_MAX + 1, f) : 0;
    bool err = ferror(f);
    fclose(f);
    if (!buf) return ct__error(CT_ERR_OOM, "sentence_encoder_load: out of memory");
    if (err || n > JSON_MAX) {
        free(buf);
        return ct__error(err ? CT_ERR_IO : CT_ERR_FORMAT, "sentence_encoder_load: %s '%s'",
                         err ? "read error on" : "over 16 MiB:", path);
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

typedef struct {
    char *text;
    size_t len;
    ct_jval root;
    const char *path;
} json_doc;

/* parses text[0..len) (NUL-terminated; d owns it from here on, also on an
 * error) into d, which must hold an object; 0, or -1 + error naming path */
static int json_parse_text(json_doc *d, char *text, size_t len, const char *path) {
    memset(d, 0, sizeof *d);
    d->path = path;
    d->text = text;
    d->len = len;
    size_t bad = 0, off = 0;
    char err[160];
    if (!ct__utf8_valid((const unsigned char *)d->text, d->len, &bad)) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s' is not UTF-8 (byte %zu)", path, bad);
        goto fail;
    }
    if (ct__json_parse(d->text, d->len, &d->root, err, sizeof err, &off)) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s' is not valid JSON: %s at byte %zu", path, err, off);
        goto fail;
    }
    if (d->root.type != CT_JOBJ) {
        ct__json_free(&d->root);
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s' must hold a JSON object", path);
        goto fail;
    }
    return 0;
fail:
    free(d->text);
    d->text = NULL;
    return -1;
}

/* parses path into d (an object); 0, or -1 + error */
static int json_load(const char *path, json_doc *d) {
    size_t len = 0;
    char *text = read_text(path, &len);
    if (!text) {
        memset(d, 0, sizeof *d);
        return -1;
    }
    return json_parse_text(d, text, len, path);
}

static void json_done(json_doc *d) {
    if (d->text) ct__json_free(&d->root);
    free(d->text);
    d->text = NULL;
}

/* integer member (absent: keep *out); -1 + error when not a non-negative integer */
static int json_int(json_doc *d, const char *key, int64_t *out, bool allow_null) {
    const ct_jval *v = ct__json_get(&d->root, key);
    if (!v) return 0;
    if (allow_null && v->type == CT_JNULL) {
        *out = -1;
        return 0;
    }
    if (v->type != CT_JNUM || !v->is_uint || v->u > ((uint64_t)1 << 40)) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': \"%s\" must be a non-negative integer", d->path, key);
        return -1;
    }
    *out = (int64_t)v->u;
    return 0;
}

/* number member: the parser validated it as a JSON number; its value is
 * read from the text after the top-level key (absent: keep *out) */
static int json_num(json_doc *d, const char *key, double *out) {
    const ct_jval *v = ct__json_get(&d->root, key);
    if (!v) return 0;
    if (v->type != CT_JNUM) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': \"%s\" must be a number", d->path, key);
        return -1;
    }
    /* the number follows the idx-th key at nesting depth 1 (the parser keeps
     * the members in their order; counting keys rather than comparing their
     * raw text also finds a key spelled with \u escapes) */
    long idx = (long)(v - d->root.items), seen = 0;
    int depth = 0;
    for (size_t i = 0; i < d->len; i++) {
        char c = d->text[i];
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') depth--;
        else if (c == '"') {
            size_t j = i + 1;
            while (j < d->len && d->text[j] != '"') j += d->text[j] == '\\' ? 2 : 1;
            if (depth == 1) {
                size_t k = j + 1;
                while (k < d->len && strchr(" \t\r\n", d->text[k])) k++;
                if (k < d->len && d->text[k] == ':' && seen++ == idx) {
                    *out = strtod(d->text + k + 1, NULL);
                    return 0;
                }
            }
            i = j;
        }
    }
    ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': cannot read \"%s\"", d->path, key);
    return -1;
}

static const char *json_str(json_doc *d, const char *key) {
    const ct_jval *v = ct__json_get(&d->root, key);
    return v && v->type == CT_JSTR ? v->s : NULL;
}

static int json_bool(json_doc *d, const char *key, bool *out) {
    const ct_jval *v = ct__json_get(&d->root, key);
    if (!v) return 0;
    if (v->type != CT_JBOOL) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': \"%s\" must be true or false", d->path, key);
        return -1;
    }
    *out = v->b;
    return 0;
}

/* ---- the config ------------------------------------------------------------------- */
/* maps the members of config.json (parsed into d) onto *c; 0, or -1 + error */
static int map_config(json_doc *d, ct_bert_config *c) {
    const char *path = d->path;
    *c = ct_bert_base_config();
    int rc;
    rc = json_int(d, "vocab_size", &c->vocab_size, false) || json_int(d, "hidden_size", &c->hidden_size, false) ||
         json_int(d, "num_hidden_layers", &c->num_hidden_layers, false) ||
         json_int(d, "num_attention_heads", &c->num_attention_heads, false) ||
         json_int(d, "intermediate_size", &c->intermediate_size, false) ||
         json_int(d, "max_position_embeddings", &c->max_position_embeddings, false) ||
         json_int(d, "type_vocab_size", &c->type_vocab_size, false) ||
         json_int(d, "pad_token_id", &c->pad_token_id, true) ||
         json_num(d, "layer_norm_eps", &c->layer_norm_eps) ||
         json_num(d, "hidden_dropout_prob", &c->hidden_dropout_prob) ||
         json_num(d, "attention_probs_dropout_prob", &c->attention_probs_dropout_prob) ||
         json_num(d, "initializer_range", &c->initializer_range) ? -1 : 0;
    const char *mt = json_str(d, "model_type"), *act = json_str(d, "hidden_act"),
               *pos = json_str(d, "position_embedding_type");
    if (!rc && mt && strcmp(mt, "bert") != 0) {
        ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s': model_type \"%s\" is not supported "
                                        "(only \"bert\")", path, mt);
        rc = -1;
    }
    if (!rc && act && strcmp(act, "gelu") != 0) {
        ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s': hidden_act \"%s\" is not supported "
                                        "(only \"gelu\")", path, act);
        rc = -1;
    }
    if (!rc && pos && strcmp(pos, "absolute") != 0) {
        ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s': position_embedding_type \"%s\" is not supported "
                                        "(only \"absolute\")", path, pos);
        rc = -1;
    }
    return rc;
}

int ct__bert_config_parse(const char *text, size_t len, const char *path, ct_bert_config *c) {
    if (len > JSON_MAX) return ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: over 16 MiB: '%s'", path), -1;
    char *copy = malloc(len + 1); /* NUL-terminated, as read_text leaves it */
    if (!copy) return ct__error_status(CT_ERR_OOM, "sentence_encoder_load: out of memory"), -1;
    if (len) memcpy(copy, text, len);
    copy[len] = 0;
    json_doc d;
    if (json_parse_text(&d, copy, len, path)) return -1;
    int rc = map_config(&d, c);
    json_done(&d);
    return rc;
}

static int read_config(const char *dir, ct_bert_config *c) {
    char *path = join(dir, "config.json");
    if (!path) return ct__error_status(CT_ERR_OOM, "sentence_encoder_load: out of memory"), -1;
    json_doc d;
    int rc = json_load(path, &d);
    if (!rc) {
        rc = map_config(&d, c);
        json_done(&d);
    }
    free(path);
    return rc;
}

/* optional JSON file: 1 when present and parsed into d, 0 when absent, -1 on error */
static int json_optional(const char *dir, const char *name, json_doc *d, char **path) {
    *path = join(dir, name);
    if (!*path) return ct__error_status(CT_ERR_OOM, "sentence_encoder_load: out of memory"), -1;
    if (!file_exists(*path)) return 0;
    return json_load(*path, d) ? -1 : 1;
}

static int read_options(const char *dir, ct_sentence_encoder *e, const ct_bert_config *c, bool *lower) {
    json_doc d;
    char *path = NULL;
    int rc = 0, has;
    *lower = true;
    e->max_length = c->max_position_embeddings < 512 ? c->max_position_embeddings : 512;
    e->normalize = true;
    e->cls_pooling = false;
    if ((has = json_optional(dir, "tokenizer_config.json", &d, &path)) < 0) goto fail;
    if (has) {
        rc = json_bool(&d, "do_lower_case", lower);
        json_done(&d);
        if (rc) goto fail;
    }
    free(path);
    if ((has = json_optional(dir, "sentence_bert_config.json", &d, &path)) < 0) goto fail;
    if (has) {
        int64_t m = e->max_length;
        rc = json_int(&d, "max_seq_length", &m, false);
        json_done(&d);
        if (rc) goto fail;
        if (m < 2 || m > c->max_position_embeddings) {
            ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': max_seq_length %lld must be in [2, %lld]", path,
                      (long long)m, (long long)c->max_position_embeddings);
            goto fail;
        }
        e->max_length = m;
    }
    free(path);
    if ((has = json_optional(dir, "1_Pooling/config.json", &d, &path)) < 0) goto fail;
    if (has) {
        bool mean = false, cls = false, mx = false, sq = false;
        rc = json_bool(&d, "pooling_mode_mean_tokens", &mean) || json_bool(&d, "pooling_mode_cls_token", &cls) ||
             json_bool(&d, "pooling_mode_max_tokens", &mx) ||
             json_bool(&d, "pooling_mode_mean_sqrt_len_tokens", &sq);
        json_done(&d);
        if (rc) goto fail;
        if (mean + cls + mx + sq != 1 || mx || sq) {
            ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': only a single mean or cls pooling is supported",
                      path);
            goto fail;
        }
        e->cls_pooling = cls;
    }
    free(path);
    path = join(dir, "modules.json");
    if (!path) goto fail;
    if (file_exists(path)) { /* a JSON list of modules: is a Normalize among them? */
        size_t len;
        char *text = read_text(path, &len);
        if (!text) goto fail;
        e->normalize = strstr(text, "sentence_transformers.models.Normalize") != NULL;
        free(text);
    }
    free(path);
    return 0;
fail:
    free(path);
    return -1;
}

/* ---- the weights ------------------------------------------------------------------ */
/* Sane bounds on the config's sizes, before anything is sized by them (the
 * weights' shapes are then checked against the config before any
 * parameter is allocated). */
static ct_status check_config_bounds(const char *dir, const ct_bert_config *c) {
    static const struct { const char *key; size_t off; int64_t lo, hi; } k_bounds[] = {
        {"vocab_size", offsetof(ct_bert_config, vocab_size), 1, (int64_t)1 << 24},
        {"hidden_size", offsetof(ct_bert_config, hidden_size), 1, (int64_t)1 << 16},
        {"num_hidden_layers", offsetof(ct_bert_config, num_hidden_layers), 0, 1024},
        {"num_attention_heads", offsetof(ct_bert_config, num_attention_heads), 1, (int64_t)1 << 16},
        {"intermediate_size", offsetof(ct_bert_config, intermediate_size), 1, (int64_t)1 << 20},
        {"max_position_embeddings", offsetof(ct_bert_config, max_position_embeddings), 1, (int64_t)1 << 20},
        {"type_vocab_size", offsetof(ct_bert_config, type_vocab_size), 1, (int64_t)1 << 16},
    };
    ct_sbuf b = {0};
    for (size_t i = 0; i < sizeof k_bounds / sizeof k_bounds[0]; i++) { /* every field out of range */
        int64_t v = *(const int64_t *)((const char *)c + k_bounds[i].off);
        if (v < k_bounds[i].lo || v > k_bounds[i].hi)
            ct__sbuf_put(&b, "%s%s %lld is out of range [%lld, %lld]", b.n ? "; " : "", k_bounds[i].key, (long long)v,
                         (long long)k_bounds[i].lo, (long long)k_bounds[i].hi);
    }
    if (b.n || b.oom) {
        ct_status st = ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s/config.json': %s", dir,
                                        b.s && !b.oom ? b.s : "sizes out of range");
        free(b.s);
        return st;
    }
    if (c->hidden_size % c->num_attention_heads)
        return ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s/config.json': hidden_size %lld is not a "
                                "multiple of num_attention_heads %lld", dir, (long long)c->hidden_size,
                                (long long)c->num_attention_heads);
    if (c->pad_token_id < -1 || c->pad_token_id >= c->vocab_size)
        return ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s/config.json': pad_token_id %lld is out of "
                                "range for vocab_size %lld", dir, (long long)c->pad_token_id, (long long)c->vocab_size);
    return CT_OK;
}

/* index of key in f, with or without the "bert." prefix, or -1 */
static int find_weight(const ct_safetensors *f, const char *key) {
    int i = ct_safetensors_find(f, key);
    if (i >= 0) return i;
    char buf[160];
    snprintf(buf, sizeof buf, "bert.%s", key);
    return ct_safetensors_find(f, buf);
}

/* the 2-dim shape of weight key into sh: 1; absent or not 2 dims: 0 */
static int weight_shape(const ct_safetensors *f, const char *key, const char **name, int64_t *sh) {
    int i = find_weight(f, key), nd = 0;
    int64_t s[CT_MAX_DIMS];
    *name = key;
    if (i < 0) return 0;
    *name = ct_safetensors_name(f, i);
    if (ct_safetensors_info(f, *name, NULL, &nd, s, NULL) || nd != 2) return 0;
    sh[0] = s[0];
    sh[1] = s[1];
    return 1;
}

/* Appends "<field> is <config value> but <weight> has shape [a, b]" for
 * each dim of weight key that disagrees with its config field (f0 for dim
 * 0, f1 for dim 1; NULL: not checked); a missing or non-matrix weight is
 * reported too.  Returns the problems: 1 dim 0, 2 dim 1, 4 missing. */
static int check_dims(const ct_safetensors *f, ct_sbuf *b, const char *key, const char *f0, int64_t v0,
                      const char *f1, int64_t v1) {
    const char *name;
    int64_t sh[2];
    if (!weight_shape(f, key, &name, sh)) {
        ct__sbuf_put(b, "%s%s is missing or not a 2-dim matrix (sized by %s)", b->n ? "; " : "", name, f0);
        return 4;
    }
    int bad = 0;
    if (f1 && sh[1] != v1) {
        ct__sbuf_put(b, "%s%s is %lld but %s has shape [%lld, %lld]", b->n ? "; " : "", f1, (long long)v1, name,
                     (long long)sh[0], (long long)sh[1]);
        bad |= 2;
    }
    if (sh[0] != v0) {
        ct__sbuf_put(b, "%s%s is %lld but %s has shape [%lld, %lld]", b->n ? "; " : "", f0, (long long)v0, name,
                     (long long)sh[0], (long long)sh[1]);
        bad |= 1;
    }
    return bad;
}

/* The config against the weights' shapes (the safetensors header alone),
 * before any parameter is allocated: every size of the model is one of
 * the checked dims, so a config that passes allocates about what the file
 * holds.  The error lists every field that disagrees. */
static ct_status check_config_vs_weights(const char *dir, const ct_safetensors *f, const ct_bert_config *c) {
    ct_sbuf b = {0};
    int w = check_dims(f, &b, "embeddings.word_embeddings.weight", "vocab_size", c->vocab_size, "hidden_size",
                       c->hidden_size);
    int bad = w; /* a wrong hidden_size is reported once */
    bad |= check_dims(f, &b, "embeddings.position_embeddings.weight", "max_position_embeddings",
                      c->max_position_embeddings, w & 2 ? NULL : "hidden_size", c->hidden_size);
    bad |= check_dims(f, &b, "embeddings.token_type_embeddings.weight", "type_vocab_size", c->type_vocab_size, NULL, 0);
    /* layers: one past the highest encoder.layer.<n> in the file */
    int64_t layers = 0;
    for (int k = 0; k < ct_safetensors_count(f); k++) {
        const char *nm = ct_safetensors_name(f, k);
        if (!strncmp(nm, "bert.", 5)) nm += 5;
        if (strncmp(nm, "encoder.layer.", 14) || nm[14] < '0' || nm[14] > '9') continue;
        char *end;
        errno = 0;
        long long n = strtoll(nm + 14, &end, 10);
        if (*end == '.' && errno == 0 && n < INT32_MAX && n + 1 > layers) layers = n + 1;
    }
    if (layers != c->num_hidden_layers) {
        ct__sbuf_put(&b, "%snum_hidden_layers is %lld but the file has %lld layers", b.n ? "; " : "",
                     (long long)c->num_hidden_layers, (long long)layers);
        bad = 1;
    }
    if (layers > 0)
        bad |= check_dims(f, &b, "encoder.layer.0.intermediate.dense.weight", "intermediate_size",
                          c->intermediate_size, NULL, 0);
    ct_status st = CT_OK;
    if (bad)
        st = ct__error_status(CT_ERR_FORMAT, "sentence_encoder_load: '%s': config.json does not match "
                                             "model.safetensors: %s", dir, b.s && !b.oom ? b.s : "out of memory");
    free(b.s);
    return st;
}

static ct_status load_weights(const char *path, ct_safetensors *f, ct_module *bert) {
    ct_status st = CT_OK;
    ct_scope s = ct_scope_begin();
    ct_sample *sd = ct_sample_new();
    if (!sd) {
        st = ct_last_error_code();
        goto done;
    }
    for (int i = 0; i < ct_safetensors_count(f); i++) {
        const char *name = ct_safetensors_name(f, i), *key = name;
        if (!strncmp(key, "bert.", 5)) key += 5;
        if (!strcmp(key, "embeddings.position_ids") || !strncmp(key, "pooler.", 7)) continue;
        ct_tensor *t = ct_safetensors_get(f, name);
        if (!t || ct_sample_set(sd, key, t)) {
            st = ct_last_error_code();
            goto done;
        }
    }
    st = ct_module_load_state_dict(bert, sd, true);
    if (st) {
        char msg[768];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        st = ct__error_status(st, "sentence_encoder_load: '%s': %s", path, msg);
    }
done:
    ct_sample_free(sd);
    ct_scope_end(s);
    return st;
}

ct_sentence_encoder *ct_sentence_encoder_load(const char *dir) {
    if (!dir) return ct__error(CT_ERR_NULL, "sentence_encoder_load: NULL folder");
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return ct__error(CT_ERR_IO, "sentence_encoder_load: model folder '%s' does not exist (or is not a folder)",
                         dir);
    const char *need[] = {"config.json", "model.safetensors", "vocab.txt"};
    for (int i = 0; i < 3; i++) {
        char *p = join(dir, need[i]);
        bool ok = p && file_exists(p);
        free(p);
        if (!ok)
            return ct__error(CT_ERR_IO, "sentence_encoder_load: model folder '%s' has no %s", dir, need[i]);
    }
    ct_bert_config c;
    if (read_config(dir, &c) || check_config_bounds(dir, &c)) return NULL;
    ct_sentence_encoder *e = calloc(1, sizeof *e);
    if (!e) return ct__error(CT_ERR_OOM, "sentence_encoder_load: out of memory");
    bool lower = true;
    if (read_options(dir, e, &c, &lower)) goto fail;
    e->dim = c.hidden_size;
    {
        char *wp = join(dir, "model.safetensors");
        ct_safetensors *f = wp ? ct_safetensors_open(wp) : NULL;
        if (!wp) ct__error(CT_ERR_OOM, "sentence_encoder_load: out of memory");
        bool ok = f && !check_config_vs_weights(dir, f, &c);
        if (ok) {
            bool prev = ct_set_grad_enabled(false);
            e->bert = ct__bert_model_new_for_loading(&c, false);
            ct_set_grad_enabled(prev);
            ok = e->bert && !load_weights(wp, f, e->bert);
        }
        ct_safetensors_close(f);
        free(wp);
        if (!ok) goto fail;
    }
    ct_module_eval(e->bert);
    char *vp = join(dir, "vocab.txt");
    e->tok = vp ? ct_wordpiece_load(vp, lower) : NULL;
    free(vp);
    if (!e->tok) goto fail;
    if (ct_wordpiece_vocab_size(e->tok) > c.vocab_size) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': vocab.txt has %lld tokens, more than the model's "
                                 "vocab_size %lld", dir, (long long)ct_wordpiece_vocab_size(e->tok),
                  (long long)c.vocab_size);
        goto fail;
    }
    if (ct_wordpiece_cls_id(e->tok) < 0 || ct_wordpiece_sep_id(e->tok) < 0 || ct_wordpiece_pad_id(e->tok) < 0) {
        ct__error(CT_ERR_FORMAT, "sentence_encoder_load: '%s': vocab.txt lacks [CLS], [SEP] or [PAD]", dir);
        goto fail;
    }
    return e;
fail:
    ct_sentence_encoder_free(e);
    return NULL;
}

void ct_sentence_encoder_free(ct_sentence_encoder *e) {
    if (!e) return;
    if (e->bert) ct_module_release(e->bert);
    ct_wordpiece_free(e->tok);
    free(e);
}

ct_module *ct_sentence_encoder_model(const ct_sentence_encoder *e) { return e ? e->bert : NULL; }
const struct ct_wordpiece *ct_sentence_encoder_tokenizer(const ct_sentence_encoder *e) { return e ? e->tok : NULL; }
int64_t ct_sentence_encoder_dim(const ct_sentence_encoder *e) { return e ? e->dim : 0; }
int64_t ct_sentence_encoder_max_length(const ct_sentence_encoder *e) { return e ? e->max_length : 0; }

ct_tensor *ct_mean_pooling(ct_tensor *h, ct_tensor *mask) {
    if (!h || !mask) return ct__error(CT_ERR_NULL, "mean_pooling: NULL %s", h ? "attention_mask" : "hidden");
    if (ct_ndim(h) != 3 || ct_ndim(mask) != 2 || ct_size(mask, 0) != ct_size(h, 0) ||
        ct_size(mask, 1) != ct_size(h, 1) || !ct_dtype_is_floating(ct_get_dtype(h)))
        return ct__error(CT_ERR_SHAPE, "mean_pooling: expected floating hidden [B, L, H] and mask [B, L], got %d "
                                       "and %d dims", ct_ndim(h), ct_ndim(mask));
    ct_scope s = ct_scope_begin();
    ct_tensor *m = ct_unsqueeze(ct_to_dtype(mask, ct_get_dtype(h)), -1);
    ct_tensor *sum = ct_sum(ct_mul(h, m), (const int64_t[]){1}, 1, false);
    ct_tensor *cnt = ct_clamp(ct_sum(m, (const int64_t[]){1}, 1, false), 1e-9, INFINITY);
    ct_tensor *r = ct_keep(ct_div(sum, cnt));
    ct_scope_end(s);
    return r;
}

typedef struct { size_t len; int64_t idx; } len_idx;
static int by_len_desc(const void *a, const void *b) {
    const len_idx *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

ct_tensor *ct_sentence_encoder_encode(const ct_sentence_encoder *e, const char *const *texts, int64_t n,
                                      int64_t batch_size) {
    if (!e || !texts) return ct__error(CT_ERR_NULL, "sentence_encoder_encode: NULL %s", e ? "texts" : "encoder");
    if (n < 1 || batch_size < 0)
        return ct__error(CT_ERR_ARG, "sentence_encoder_encode: need n >= 1 and batch_size >= 0, got %lld and %lld",
                         (long long)n, (long long)batch_size);
    for (int64_t i = 0; i < n; i++)
        if (!texts[i]) return ct__error(CT_ERR_NULL, "sentence_encoder_encode: texts[%lld] is NULL", (long long)i);
    if (batch_size == 0) batch_size = 32;
    ct_tensor *out = ct_empty_on((const int64_t[]){n, e->dim}, 2, CT_F32, CT_CPU);
    len_idx *order = malloc(sizeof *order * (size_t)n);
    const char **batch = malloc(sizeof *batch * (size_t)batch_size);
    if (!out || !order || !batch) {
        free(order);
        free(batch);
        return out ? ct__error(CT_ERR_OOM, "sentence_encoder_encode: out of memory") : NULL;
    }
    for (int64_t i = 0; i < n; i++) order[i] = (len_idx){strlen(texts[i]), i};
    qsort(order, (size_t)n, sizeof *order, by_len_desc);
    bool prev = ct_set_grad_enabled(false);
    float *dst = ct_data_ptr(out);
    bool ok = true;
    for (int64_t b0 = 0; b0 < n && ok; b0 += batch_size) {
        int64_t nb = n - b0 < batch_size ? n - b0 : batch_size;
        for (int64_t j = 0; j < nb; j++) batch[j] = texts[order[b0 + j].idx];
        ct_scope s = ct_scope_begin();
        ct_tensor *ids = NULL, *mask = NULL, *h = NULL;
        ok = ct_wordpiece_encode_batch(e->tok, batch, nb, e->max_length, &ids, &mask) == CT_OK &&
             ct__bert_forward_packed(e->bert, ids, mask, &h) == CT_OK;
        ct_tensor *emb = NULL;
        if (ok) {
            emb = e->cls_pooling ? ct_select(h, 1, 0) : ct_mean_pooling(h, mask);
            if (e->normalize) emb = ct_normalize(emb, 2.0, 1, 1e-12);
            emb = ct_contiguous(ct_to_dtype(emb, CT_F32));
            ok = emb != NULL;
        }
        if (ok) {
            const float *src = ct_data_ptr(emb);
            for (int64_t j = 0; j < nb; j++)
                memcpy(dst + order[b0 + j].idx * e->dim, src + j * e->dim, sizeof(float) * (size_t)e->dim);
        }
        ct_scope_end(s);
    }
    ct_set_grad_enabled(prev);
    free(order);
    free(batch);
    return ok ? out : NULL; /* on failure out stays in the caller's scope, the error recorded */
}
