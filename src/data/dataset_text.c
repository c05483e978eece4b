/* dataset_text.c -- text datasets: the lines of a file, and a character
 * stream with a byte vocabulary for next-character prediction. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"

/* ---- lines ---------------------------------------------------------------- */
typedef struct {
    char *buf;
    int64_t n;
    int64_t *start, *len;
} lines_ds;

static int64_t lds_len(void *self) { return ((lines_ds *)self)->n; }
static ct_status lds_get(void *self, int64_t i, ct_sample *out) {
    lines_ds *d = self;
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_from_array(d->buf + d->start[i], CT_SHAPE(d->len[i]), CT_U8);
    ct_status st = ct_sample_set(out, "text", t);
    ct_scope_end(s);
    return st;
}
static void lds_free(void *self) {
    lines_ds *d = self;
    free(d->buf);
    free(d->start);
    free(d->len);
    free(d);
}
static const ct_dataset_vtable lds_vt = {.len = lds_len, .get = lds_get, .free = lds_free};

ct_dataset *ct_text_lines_dataset_new(const char *path) {
    size_t n = 0;
    char *buf = ct__ds_read_file("text_lines_dataset_new", path, &n);
    if (!buf) return NULL;
    lines_ds *d = calloc(1, sizeof *d);
    if (!d) { free(buf); return ct__error(CT_ERR_OOM, "text_lines_dataset_new: out of memory"); }
    d->buf = buf;
    int64_t cnt = 0;
    for (size_t i = 0; i < n; i++) cnt += buf[i] == '\n';
    if (n && buf[n - 1] != '\n') cnt++;
    d->start = malloc(sizeof(int64_t) * (size_t)(cnt + 1));
    d->len = malloc(sizeof(int64_t) * (size_t)(cnt + 1));
    if (!d->start || !d->len) { lds_free(d); return ct__error(CT_ERR_OOM, "text_lines_dataset_new: out of memory"); }
    size_t a = 0;
    for (size_t i = 0; i <= n && d->n < cnt; i++) {
        if (i == n || buf[i] == '\n') {
            size_t e = i;
            if (e > a && buf[e - 1] == '\r') e--;
            d->start[d->n] = (int64_t)a;
            d->len[d->n] = (int64_t)(e - a);
            d->n++;
            a = i + 1;
        }
    }
    ct_dataset *ds = ct_dataset_new(&lds_vt, d);
    if (!ds) lds_free(d);
    return ds;
}

/* ---- character stream ---------------------------------------------------- */
typedef struct {
    uint8_t *ids;
    int64_t nbytes, seq_len, stride, n;
    char vocab[257];
    int nvocab;
} char_ds;

static int64_t chs_len(void *self) { return ((char_ds *)self)->n; }
static ct_status chs_get(void *self, int64_t i, ct_sample *out) {
    char_ds *d = self;
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct__alloc(CT_SHAPE(d->seq_len + 1), CT_I64, CT_CPU);
    ct_status st;
    if (t) {
        int64_t *p = ct__ptr(t);
        const uint8_t *q = d->ids + i * d->stride;
        for (int64_t k = 0; k <= d->seq_len; k++) p[k] = q[k];
        st = ct_sample_set(out, "ids", ct__register(t));
    } else {
        st = ct_last_error_code();
    }
    ct_scope_end(s);
    return st;
}
/* The char datasets alive, so ct_char_dataset_vocab can tell them apart
 * from other datasets' self pointers without reading them. */
typedef struct live_node { char_ds *d; struct live_node *next; } live_node;
static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static live_node *g_live;

static void chs_free(void *self) {
    char_ds *d = self;
    pthread_mutex_lock(&g_live_lock);
    for (live_node **p = &g_live; *p; p = &(*p)->next)
        if ((*p)->d == d) { live_node *x = *p; *p = x->next; free(x); break; }
    pthread_mutex_unlock(&g_live_lock);
    free(d->ids);
    free(d);
}
static const ct_dataset_vtable chs_vt = {.len = chs_len, .get = chs_get, .free = chs_free};

ct_dataset *ct_char_dataset_new(const char *path, int64_t seq_len, int64_t stride, const char *vocab) {
    if (seq_len < 1 || stride < 1)
        return ct__error(CT_ERR_ARG, "char_dataset_new: seq_len (%lld) and stride (%lld) must be >= 1",
                         (long long)seq_len, (long long)stride);
    size_t n = 0;
    char *buf = ct__ds_read_file("char_dataset_new", path, &n);
    if (!buf) return NULL;
    char_ds *d = calloc(1, sizeof *d);
    if (!d) { free(buf); return ct__error(CT_ERR_OOM, "char_dataset_new: out of memory"); }
    int map[256];
    for (int c = 0; c < 256; c++) map[c] = -1;
    if (vocab) {
        size_t L = strlen(vocab);
        for (size_t k = 0; k < L; k++) {
            uint8_t c = (uint8_t)vocab[k];
            if (map[c] >= 0) {
                free(buf);
                free(d);
                return ct__error(CT_ERR_ARG, "char_dataset_new: vocab has byte 0x%02x twice (positions %d and %zu)",
                                 c, map[c], k);
            }
            map[c] = (int)k;
            d->vocab[d->nvocab++] = (char)c;
        }
    } else {
        bool seen[256] = {false};
        for (size_t i = 0; i < n; i++) seen[(uint8_t)buf[i]] = true;
        for (int c = 0; c < 256; c++)
            if (seen[c]) { map[c] = d->nvocab; d->vocab[d->nvocab++] = (char)c; }
    }
    d->ids = malloc(n ? n : 1);
    if (!d->ids) { free(buf); free(d); return ct__error(CT_ERR_OOM, "char_dataset_new: out of memory"); }
    for (size_t i = 0; i < n; i++) {
        int id = map[(uint8_t)buf[i]];
        if (id < 0) {
            ct__error(CT_ERR_FORMAT, "char_dataset_new: %s: byte 0x%02x at offset %zu is not in the vocabulary",
                      path, (uint8_t)buf[i], i);
            free(buf);
            chs_free(d);
            return NULL;
        }
        d->ids[i] = (uint8_t)id;
    }
    free(buf);
    d->nbytes = (int64_t)n;
    d->seq_len = seq_len;
    d->stride = stride;
    d->n = d->nbytes >= seq_len + 1 ? (d->nbytes - seq_len - 1) / stride + 1 : 0;
    live_node *ln = malloc(sizeof *ln);
    if (!ln) { chs_free(d); return ct__error(CT_ERR_OOM, "char_dataset_new: out of memory"); }
    ln->d = d;
    pthread_mutex_lock(&g_live_lock);
    ln->next = g_live;
    g_live = ln;
    pthread_mutex_unlock(&g_live_lock);
    ct_dataset *ds = ct_dataset_new(&chs_vt, d);
    if (!ds) chs_free(d);
    return ds;
}

const char *ct_char_dataset_vocab(ct_dataset *ds, int *n) {
    if (!ds) return NULL;
    char_ds *d = ct_dataset_self(ds);
    bool found = false;
    pthread_mutex_lock(&g_live_lock);
    for (live_node *p = g_live; p; p = p->next)
        if (p->d == d) { found = true; break; }
    pthread_mutex_unlock(&g_live_lock);
    if (!found) return NULL;
    if (n) *n = d->nvocab;
    return d->vocab;
}
