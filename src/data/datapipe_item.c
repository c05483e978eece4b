/* datapipe_item.c -- ct_pipe_item (the values DataPipes yield) and their
 * (de)serialization inside state blobs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datapipe_impl.h"

static ct_pipe_item *item_alloc(ct_pipe_item_kind k) {
    ct_pipe_item *x = calloc(1, sizeof *x);
    if (!x) return ct__error(CT_ERR_OOM, "pipe_item: out of memory");
    atomic_init(&x->refcount, 1);
    x->kind = k;
    return x;
}

ct_pipe_item *ct_pipe_item_int(int64_t v) {
    ct_pipe_item *x = item_alloc(CT_PIPE_ITEM_INT);
    if (x) x->i = v;
    return x;
}

ct_pipe_item *ct_pipe_item_bytes(const void *p, size_t n) {
    if (!p && n) return ct__error(CT_ERR_NULL, "pipe_item_bytes: data is NULL");
    if (n > SIZE_MAX - 1) return ct__error(CT_ERR_OVERFLOW, "pipe_item_bytes: %zu bytes", n);
    ct_pipe_item *x = item_alloc(CT_PIPE_ITEM_STR);
    if (!x) return NULL;
    x->s = malloc(n + 1);
    if (!x->s) {
        free(x);
        return ct__error(CT_ERR_OOM, "pipe_item_bytes: out of memory (%zu bytes)", n);
    }
    if (n) memcpy(x->s, p, n);
    x->s[n] = 0;
    x->s_len = n;
    return x;
}

ct_pipe_item *ct_pipe_item_str(const char *s) {
    if (!s) return ct__error(CT_ERR_NULL, "pipe_item_str: string is NULL");
    return ct_pipe_item_bytes(s, strlen(s));
}

ct_pipe_item *ct_pipe_item_tensor(ct_tensor *t) {
    if (!t) return NULL;
    ct_pipe_item *x = item_alloc(CT_PIPE_ITEM_TENSOR);
    if (x) x->t = ct_retain(t);
    return x;
}

ct_pipe_item *ct_pipe_item_sample(ct_sample *s) {
    if (!s) return NULL;
    ct_pipe_item *x = item_alloc(CT_PIPE_ITEM_SAMPLE);
    if (!x) {
        ct_sample_free(s);
        return NULL;
    }
    x->sample = s;
    return x;
}

static ct_pipe_item *seq_new(ct_pipe_item_kind k, ct_pipe_item *const *items, int64_t n,
                             const char *what) {
    int bad = n < 0 || (n > 0 && !items);
    for (int64_t j = 0; !bad && j < n; j++)
        if (!items[j]) bad = 1;
    if (bad) {
        for (int64_t j = 0; items && j < n; j++) ct_pipe_item_release(items[j]);
        if (ct_last_error_code() == CT_OK)
            ct__error(CT_ERR_NULL, "%s: NULL element or bad length %" PRId64, what, n);
        return NULL;
    }
    ct_pipe_item *x = item_alloc(k);
    if (x && n) {
        x->xs = malloc(sizeof *x->xs * (size_t)n);
        if (!x->xs) {
            free(x);
            x = ct__error(CT_ERR_OOM, "%s: out of memory", what);
        }
    }
    if (!x) {
        for (int64_t j = 0; j < n; j++) ct_pipe_item_release(items[j]);
        return NULL;
    }
    if (n) memcpy(x->xs, items, sizeof *x->xs * (size_t)n);
    x->n = x->cap = n;
    return x;
}

ct_pipe_item *ct_pipe_item_list(ct_pipe_item *const *items, int64_t n) {
    return seq_new(CT_PIPE_ITEM_LIST, items, n, "pipe_item_list");
}
ct_pipe_item *ct_pipe_item_tuple(ct_pipe_item *const *items, int n) {
    return seq_new(CT_PIPE_ITEM_TUPLE, items, n, "pipe_item_tuple");
}
ct_pipe_item *ct_pipe_item_tuple2(ct_pipe_item *a, ct_pipe_item *b) {
    ct_pipe_item *xs[2] = {a, b};
    return ct_pipe_item_tuple(xs, 2);
}

ct_status ct_pipe_item_list_append(ct_pipe_item *list, ct_pipe_item *x) {
    if (!list || !x) {
        ct_pipe_item_release(x);
        return ct_last_error_code() ? ct_last_error_code()
                                    : ct__error_status(CT_ERR_NULL, "pipe_item_list_append: NULL argument");
    }
    if (list->kind != CT_PIPE_ITEM_LIST || atomic_load(&list->refcount) != 1) {
        ct_pipe_item_release(x);
        return ct__error_status(CT_ERR_ARG, "pipe_item_list_append: not a list, or a list that is "
                                "shared (items are immutable once shared)");
    }
    if (list->n == list->cap) {
        int64_t nc = list->cap ? list->cap * 2 : 8;
        ct_pipe_item **nx = realloc(list->xs, sizeof *nx * (size_t)nc);
        if (!nx) {
            ct_pipe_item_release(x);
            return ct__error_status(CT_ERR_OOM, "pipe_item_list_append: out of memory");
        }
        list->xs = nx;
        list->cap = nc;
    }
    list->xs[list->n++] = x;
    return CT_OK;
}

ct_pipe_item *ct_pipe_item_retain(ct_pipe_item *x) {
    if (x) atomic_fetch_add(&x->refcount, 1);
    return x;
}

void ct_pipe_item_release(ct_pipe_item *x) {
    if (!x || atomic_fetch_sub(&x->refcount, 1) != 1) return;
    free(x->s);
    ct_release(x->t);
    ct_sample_free(x->sample);
    for (int64_t j = 0; j < x->n; j++) ct_pipe_item_release(x->xs[j]);
    free(x->xs);
    free(x);
}

ct_pipe_item_kind ct_pipe_item_get_kind(const ct_pipe_item *x) { return x ? x->kind : CT_PIPE_ITEM_INT; }

static const char *kind_name(ct_pipe_item_kind k) {
    static const char *n[] = {"int", "str", "tensor", "sample", "list", "tuple"};
    return (unsigned)k < 6 ? n[k] : "?";
}

static int want(const ct_pipe_item *x, ct_pipe_item_kind k, const char *fn) {
    if (!x) {
        ct__error(CT_ERR_NULL, "%s: item is NULL", fn);
        return 0;
    }
    if (x->kind != k) {
        ct__error(CT_ERR_ARG, "%s: item is a %s, not a %s", fn, kind_name(x->kind), kind_name(k));
        return 0;
    }
    return 1;
}

int64_t ct_pipe_item_as_int(const ct_pipe_item *x) {
    return want(x, CT_PIPE_ITEM_INT, "pipe_item_as_int") ? x->i : 0;
}
const char *ct_pipe_item_as_str(const ct_pipe_item *x) {
    return want(x, CT_PIPE_ITEM_STR, "pipe_item_as_str") ? x->s : NULL;
}
size_t ct_pipe_item_str_len(const ct_pipe_item *x) {
    return want(x, CT_PIPE_ITEM_STR, "pipe_item_str_len") ? x->s_len : 0;
}
ct_tensor *ct_pipe_item_as_tensor(const ct_pipe_item *x) {
    return want(x, CT_PIPE_ITEM_TENSOR, "pipe_item_as_tensor") ? x->t : NULL;
}
const ct_sample *ct_pipe_item_as_sample(const ct_pipe_item *x) {
    return want(x, CT_PIPE_ITEM_SAMPLE, "pipe_item_as_sample") ? x->sample : NULL;
}
int64_t ct_pipe_item_len(const ct_pipe_item *x) {
    if (!x) {
        ct__error(CT_ERR_NULL, "pipe_item_len: item is NULL");
        return -1;
    }
    if (x->kind != CT_PIPE_ITEM_LIST && x->kind != CT_PIPE_ITEM_TUPLE) {
        ct__error(CT_ERR_ARG, "pipe_item_len: item is a %s, not a list or tuple", kind_name(x->kind));
        return -1;
    }
    return x->n;
}
ct_pipe_item *ct_pipe_item_at(const ct_pipe_item *x, int64_t i) {
    int64_t n = ct_pipe_item_len(x);
    if (n < 0) return NULL;
    int64_t j = i < 0 ? i + n : i;
    if (j < 0 || j >= n)
        return ct__error(CT_ERR_INDEX, "pipe_item_at: index %" PRId64 " out of range for a %s of "
                         "length %" PRId64, i, kind_name(x->kind), n);
    return x->xs[j];
}

int ct_pipe_item_equal(const ct_pipe_item *a, const ct_pipe_item *b) {
    if (a == b) return 1;
    if (!a || !b || a->kind != b->kind) return 0;
    switch (a->kind) {
    case CT_PIPE_ITEM_INT: return a->i == b->i;
    case CT_PIPE_ITEM_STR: return a->s_len == b->s_len && memcmp(a->s, b->s, a->s_len) == 0;
    case CT_PIPE_ITEM_TENSOR: return ct_equal(a->t, b->t) == 1 && ct_get_dtype(a->t) == ct_get_dtype(b->t);
    case CT_PIPE_ITEM_SAMPLE: {
        int n = ct_sample_count(a->sample);
        if (n != ct_sample_count(b->sample)) return 0;
        for (int k = 0; k < n; k++) {
            if (strcmp(ct_sample_name(a->sample, k), ct_sample_name(b->sample, k)) != 0) return 0;
            ct_tensor *x = ct_sample_at(a->sample, k), *y = ct_sample_at(b->sample, k);
            if (ct_get_dtype(x) != ct_get_dtype(y) || ct_equal(x, y) != 1) return 0;
        }
        return 1;
    }
    case CT_PIPE_ITEM_LIST:
    case CT_PIPE_ITEM_TUPLE:
        if (a->n != b->n) return 0;
        for (int64_t j = 0; j < a->n; j++)
            if (!ct_pipe_item_equal(a->xs[j], b->xs[j])) return 0;
        return 1;
    }
    return 0;
}

/* ---- repr ---------------------------------------------------------------- */
typedef struct sbuf { char *p; size_t n, cap; int oom; } sbuf;
static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 64);
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }
static void repr(sbuf *b, const ct_pipe_item *x, int depth) {
    char tmp[64];
    if (!x) { sb_str(b, "None"); return; }
    if (depth > 64) { sb_str(b, "..."); return; }
    switch (x->kind) {
    case CT_PIPE_ITEM_INT:
        snprintf(tmp, sizeof tmp, "%" PRId64, x->i);
        sb_str(b, tmp);
        break;
    case CT_PIPE_ITEM_STR:
        sb_str(b, "'");
        for (size_t j = 0; j < x->s_len; j++) {
            unsigned char c = (unsigned char)x->s[j];
            if (c == '\n') sb_str(b, "\\n");
            else if (c == '\r') sb_str(b, "\\r");
            else if (c == '\t') sb_str(b, "\\t");
            else if (c == '\'' || c == '\\') { sb_put(b, "\\", 1); sb_put(b, (char *)&c, 1); }
            else if (c < 32 || c == 127) { snprintf(tmp, sizeof tmp, "\\x%02x", c); sb_str(b, tmp); }
            else sb_put(b, (char *)&c, 1);
        }
        sb_str(b, "'");
        break;
    case CT_PIPE_ITEM_TENSOR:
        sb_str(b, "tensor(");
        sb_str(b, ct_dtype_name(ct_get_dtype(x->t)));
        sb_str(b, ", ");
        sb_str(b, ct__tshape(x->t));
        sb_str(b, ")");
        break;
    case CT_PIPE_ITEM_SAMPLE:
        sb_str(b, "{");
        for (int k = 0; k < ct_sample_count(x->sample); k++) {
            ct_tensor *t = ct_sample_at(x->sample, k);
            if (k) sb_str(b, ", ");
            sb_str(b, ct_sample_name(x->sample, k));
            sb_str(b, ": tensor(");
            sb_str(b, ct_dtype_name(ct_get_dtype(t)));
            sb_str(b, ", ");
            sb_str(b, ct__tshape(t));
            sb_str(b, ")");
        }
        sb_str(b, "}");
        break;
    case CT_PIPE_ITEM_LIST:
    case CT_PIPE_ITEM_TUPLE:
        sb_str(b, x->kind == CT_PIPE_ITEM_LIST ? "[" : "(");
        for (int64_t j = 0; j < x->n; j++) {
            if (j) sb_str(b, ", ");
            repr(b, x->xs[j], depth + 1);
        }
        if (x->kind == CT_PIPE_ITEM_TUPLE && x->n == 1) sb_str(b, ",");
        sb_str(b, x->kind == CT_PIPE_ITEM_LIST ? "]" : ")");
        break;
    }
}
char *ct_pipe_item_to_string(const ct_pipe_item *x) {
    sbuf b = {0};
    repr(&b, x, 0);
    if (b.oom || !b.p) {
        free(b.p);
        return ct__error(CT_ERR_OOM, "pipe_item_to_string: out of memory");
    }
    return b.p;
}

/* ---- state blobs ----------------------------------------------------------- */
void dp_w_bytes(dp_wbuf *w, const void *p, size_t n) {
    if (w->failed || !n) return;
    if (w->n + n > w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 256;
        while (nc < w->n + n) nc *= 2;
        uint8_t *np = realloc(w->p, nc);
        if (!np) { w->failed = 1; return; }
        w->p = np;
        w->cap = nc;
    }
    memcpy(w->p + w->n, p, n);
    w->n += n;
}
void dp_w_u64(dp_wbuf *w, uint64_t v) {
    uint8_t b[8];
    for (int k = 0; k < 8; k++) b[k] = (uint8_t)(v >> (8 * k));
    dp_w_bytes(w, b, 8);
}
static void w_u8(dp_wbuf *w, uint8_t v) { dp_w_bytes(w, &v, 1); }

#define ITEM_NONE 0xff
void dp_w_item(dp_wbuf *w, const ct_pipe_item *x) {
    if (!x) { w_u8(w, ITEM_NONE); return; }
    w_u8(w, (uint8_t)x->kind);
    switch (x->kind) {
    case CT_PIPE_ITEM_INT: dp_w_u64(w, (uint64_t)x->i); break;
    case CT_PIPE_ITEM_STR: dp_w_u64(w, x->s_len); dp_w_bytes(w, x->s, x->s_len); break;
    case CT_PIPE_ITEM_TENSOR:
    case CT_PIPE_ITEM_SAMPLE: {
        int n = x->kind == CT_PIPE_ITEM_TENSOR ? 1 : ct_sample_count(x->sample);
        if (x->kind == CT_PIPE_ITEM_SAMPLE) dp_w_u64(w, (uint64_t)n);
        for (int k = 0; k < n; k++) {
            ct_tensor *t = x->kind == CT_PIPE_ITEM_TENSOR ? x->t : ct_sample_at(x->sample, k);
            if (x->kind == CT_PIPE_ITEM_SAMPLE) {
                const char *nm = ct_sample_name(x->sample, k);
                dp_w_u64(w, strlen(nm));
                dp_w_bytes(w, nm, strlen(nm));
            }
            if (t->storage->device != CT_CPU) { w->failed = 2; return; }
            ct_tensor *c = ct__contig_as(t, t->dtype);
            if (!c) { w->failed = 1; return; }
            w_u8(w, (uint8_t)t->dtype);
            w_u8(w, (uint8_t)t->ndim);
            for (int d = 0; d < t->ndim; d++) dp_w_u64(w, (uint64_t)t->sizes[d]);
            dp_w_bytes(w, ct__ptr(c), (size_t)ct_numel(c) * ct_dtype_size(c->dtype));
            ct_release(c);
        }
        break;
    }
    case CT_PIPE_ITEM_LIST:
    case CT_PIPE_ITEM_TUPLE:
        dp_w_u64(w, (uint64_t)x->n);
        for (int64_t j = 0; j < x->n; j++) dp_w_item(w, x->xs[j]);
        break;
    }
}

ct_status dp_r_bytes(dp_rbuf *r, void *p, size_t n) {
    if (n > r->n - r->pos)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: truncated at byte %zu (need %zu more "
                                "bytes, %zu left)", r->pos, n, r->n - r->pos);
    if (n) memcpy(p, r->p + r->pos, n);
    r->pos += n;
    return CT_OK;
}
ct_status dp_r_u64(dp_rbuf *r, uint64_t *v) {
    uint8_t b[8] = {0};
    ct_status st = dp_r_bytes(r, b, 8);
    if (st) return st;
    *v = 0;
    for (int k = 0; k < 8; k++) *v |= (uint64_t)b[k] << (8 * k);
    return CT_OK;
}
ct_status dp_r_i64(dp_rbuf *r, int64_t *v) {
    uint64_t u = 0;
    ct_status st = dp_r_u64(r, &u);
    *v = (int64_t)u;
    return st;
}
/* a count of elements each taking at least `min` bytes */
static ct_status r_count(dp_rbuf *r, uint64_t *n, size_t min, const char *what) {
    size_t at = r->pos;
    ct_status st = dp_r_u64(r, n);
    if (st) return st;
    if (*n > (r->n - r->pos) / (min ? min : 1))
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: %s count %" PRIu64 " at byte %zu exceeds "
                                "the %zu bytes left", what, *n, at, r->n - r->pos);
    return CT_OK;
}

static ct_tensor *r_tensor(dp_rbuf *r) {
    size_t at = r->pos;
    uint8_t dt = 0, nd = 0;
    if (dp_r_bytes(r, &dt, 1) || dp_r_bytes(r, &nd, 1)) return NULL;
    if (dt >= CT_DTYPE_COUNT || nd > CT_MAX_DIMS)
        return ct__error(CT_ERR_FORMAT, "datapipe state: bad tensor header at byte %zu (dtype %d, "
                         "ndim %d)", at, dt, nd);
    int64_t shape[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        uint64_t v;
        if (dp_r_u64(r, &v)) return NULL;
        if (v > (uint64_t)INT64_MAX / 2)
            return ct__error(CT_ERR_FORMAT, "datapipe state: bad tensor size %" PRIu64 " at byte %zu", v, at);
        shape[d] = (int64_t)v;
    }
    int64_t numel = ct__shape_numel("datapipe state", shape, nd);
    if (numel < 0) return NULL;
    size_t es = ct_dtype_size((ct_dtype)dt);
    if ((uint64_t)numel > (r->n - r->pos) / es)
        return ct__error(CT_ERR_FORMAT, "datapipe state: tensor at byte %zu needs %" PRId64 " elements, "
                         "only %zu bytes left", at, numel, r->n - r->pos);
    ct_tensor *t = ct__alloc(shape, nd, (ct_dtype)dt, CT_CPU);
    if (!t) return NULL;
    if (dp_r_bytes(r, ct__ptr(t), (size_t)numel * es)) {
        ct_release(t);
        return NULL;
    }
    return t;
}

static ct_status r_item(dp_rbuf *r, ct_pipe_item **out, int depth) {
    *out = NULL;
    size_t at = r->pos;
    uint8_t k = 0;
    ct_status st = dp_r_bytes(r, &k, 1);
    if (st) return st;
    if (k == ITEM_NONE) return CT_OK;
    if (depth > 64)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: items nested too deeply at byte %zu", at);
    uint64_t n;
    switch (k) {
    case CT_PIPE_ITEM_INT: {
        int64_t v;
        if ((st = dp_r_i64(r, &v))) return st;
        *out = ct_pipe_item_int(v);
        break;
    }
    case CT_PIPE_ITEM_STR:
        if ((st = r_count(r, &n, 1, "string byte"))) return st;
        *out = ct_pipe_item_bytes(r->p + r->pos, (size_t)n);
        r->pos += (size_t)n;
        break;
    case CT_PIPE_ITEM_TENSOR: {
        ct_tensor *t = r_tensor(r);
        if (!t) return ct_last_error_code();
        *out = ct_pipe_item_tensor(t);
        ct_release(t);
        break;
    }
    case CT_PIPE_ITEM_SAMPLE: {
        if ((st = r_count(r, &n, 10, "sample entry"))) return st;
        ct_sample *s = ct_sample_new();
        if (!s) return ct_last_error_code();
        for (uint64_t j = 0; j < n; j++) {
            uint64_t ln;
            char name[256];
            if ((st = r_count(r, &ln, 1, "name byte"))) { ct_sample_free(s); return st; }
            if (ln >= sizeof name) {
                ct_sample_free(s);
                return ct__error_status(CT_ERR_FORMAT, "datapipe state: sample name of %" PRIu64 " bytes at "
                                        "byte %zu", ln, r->pos);
            }
            memcpy(name, r->p + r->pos, (size_t)ln);
            name[ln] = 0;
            r->pos += (size_t)ln;
            ct_tensor *t = r_tensor(r);
            st = t ? ct_sample_set(s, name, t) : ct_last_error_code();
            ct_release(t);
            if (st) { ct_sample_free(s); return st; }
        }
        *out = ct_pipe_item_sample(s);
        break;
    }
    case CT_PIPE_ITEM_LIST:
    case CT_PIPE_ITEM_TUPLE: {
        if ((st = r_count(r, &n, 1, "list element"))) return st;
        if (k == CT_PIPE_ITEM_TUPLE && n > INT32_MAX)
            return ct__error_status(CT_ERR_FORMAT, "datapipe state: tuple too long at byte %zu", at);
        ct_pipe_item **xs = n ? calloc((size_t)n, sizeof *xs) : NULL;
        if (n && !xs) return ct__error_status(CT_ERR_OOM, "datapipe state: out of memory");
        for (uint64_t j = 0; j < n; j++) {
            if ((st = r_item(r, &xs[j], depth + 1)) == CT_OK && !xs[j])
                st = ct__error_status(CT_ERR_FORMAT, "datapipe state: None inside a list at byte %zu", r->pos);
            if (st) {
                for (uint64_t q = 0; q < j; q++) ct_pipe_item_release(xs[q]);
                free(xs);
                return st;
            }
        }
        *out = k == CT_PIPE_ITEM_LIST ? ct_pipe_item_list(xs, (int64_t)n) : ct_pipe_item_tuple(xs, (int)n);
        free(xs);
        break;
    }
    default:
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: unknown item kind %d at byte %zu", k, at);
    }
    return *out ? CT_OK : ct_last_error_code();
}

ct_status dp_r_item(dp_rbuf *r, ct_pipe_item **out) { return r_item(r, out, 0); }
