/* datapipe.c -- the DataPipe framework (next/reset/epoch/seed, state blobs,
 * cloning) and the in-memory stages: sources, map, filter, flat_map,
 * batch, unbatch, bucket_batch, shuffle, shard, collate, zip, concat, mux,
 * cycle, header. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datapipe_impl.h"

/* ======================================================================
 * framework
 * ====================================================================== */
ct_datapipe *dp_new(const dp_vt *vt, void *self, ct_datapipe **src, int nsrc) {
    int bad = 0;
    for (int k = 0; k < nsrc; k++)
        if (!src[k]) bad = 1;
    ct_datapipe *p = bad ? NULL : calloc(1, sizeof *p);
    ct_datapipe **s = (!bad && nsrc) ? malloc(sizeof *s * (size_t)nsrc) : NULL;
    if (bad || !p || (nsrc && !s)) {
        if (!bad) ct__error(CT_ERR_OOM, "datapipe %s: out of memory", vt->name);
        else if (ct_last_error_code() == CT_OK)
            ct__error(CT_ERR_NULL, "datapipe %s: a source pipe is NULL", vt->name);
        for (int k = 0; k < nsrc; k++) dp_free(src[k]);
        if (vt->free && self) {
            ct_datapipe tmp = {.vt = vt, .self = self};
            vt->free(&tmp);
        } else {
            free(self);
        }
        free(p);
        free(s);
        return NULL;
    }
    p->vt = vt;
    p->self = self;
    p->src = s;
    p->nsrc = nsrc;
    if (nsrc) memcpy(s, src, sizeof *s * (size_t)nsrc);
    p->num_shards = 1;
    if (vt->reset) vt->reset(p);
    return p;
}

void dp_free(ct_datapipe *p) {
    if (!p) return;
    if (p->vt->quiesce) p->vt->quiesce(p);
    for (int k = 0; k < p->nsrc; k++) dp_free(p->src[k]);
    free(p->src);
    if (p->vt->free) p->vt->free(p);
    else free(p->self);
    free(p);
}
void ct_datapipe_free(ct_datapipe *p) { dp_free(p); }
const char *ct_datapipe_name(const ct_datapipe *p) { return p ? p->vt->name : NULL; }

int dp_next(ct_datapipe *p, ct_pipe_item **out) {
    *out = NULL;
    return p->vt->next(p, out);
}

int ct_datapipe_next(ct_datapipe *p, ct_pipe_item **out) {
    if (!out) {
        ct__error(CT_ERR_NULL, "datapipe_next: out is NULL");
        return -1;
    }
    *out = NULL;
    if (!p) {
        if (ct_last_error_code() == CT_OK) ct__error(CT_ERR_NULL, "datapipe_next: pipe is NULL");
        return -1;
    }
    ct_scope s = ct_scope_begin();
    int r = dp_next(p, out);
    ct_scope_end(s);
    return r;
}

void dp_reset(ct_datapipe *p) {
    if (p->vt->quiesce) p->vt->quiesce(p);
    for (int k = 0; k < p->nsrc; k++) dp_reset(p->src[k]);
    if (p->vt->reset) p->vt->reset(p);
}
void ct_datapipe_reset(ct_datapipe *p) {
    if (p) dp_reset(p);
}

void dp_visit(ct_datapipe *p, void (*fn)(ct_datapipe *, void *), void *ctx, size_t ctx_size);
static void set_epoch_fn(ct_datapipe *p, void *ctx) { p->epoch = *(int64_t *)ctx; }
void ct_datapipe_set_epoch(ct_datapipe *p, int64_t epoch) {
    if (!p) return;
    dp_visit(p, set_epoch_fn, &epoch, sizeof epoch);
    dp_reset(p);
}

typedef struct seed_ctx { uint64_t seed; int64_t k; } seed_ctx;
static void set_seed_fn(ct_datapipe *p, void *ctx) {
    seed_ctx *c = ctx;
    if (!p->vt->random) return;
    uint64_t s = c->seed ^ ((uint64_t)c->k++ * 0x9e3779b97f4a7c15ULL);
    p->seed = dp_rng_next(&s);
}
void ct_datapipe_set_seed(ct_datapipe *p, uint64_t seed) {
    if (!p) return;
    seed_ctx c = {seed, 0};
    dp_visit(p, set_seed_fn, &c, sizeof c);
    dp_reset(p);
}

/* Pre-order visit of the graph, stopping threads first.  Nodes with hidden
 * sub-graphs (the DataLoader2 merge) visit each copy with the same context
 * snapshot, via vt->visit_hidden. */
void dp_visit(ct_datapipe *p, void (*fn)(ct_datapipe *, void *), void *ctx, size_t ctx_size) {
    if (p->vt->quiesce) p->vt->quiesce(p);
    fn(p, ctx);
    for (int k = 0; k < p->nsrc; k++) dp_visit(p->src[k], fn, ctx, ctx_size);
    dp_merge_visit_hidden(p, fn, ctx, ctx_size);
}

/* ---- state --------------------------------------------------------------- */
#define DP_MAGIC "CTDPSTA1"
void dp_save(ct_datapipe *p, dp_wbuf *w) {
    if (p->vt->quiesce) p->vt->quiesce(p);
    size_t ln = strlen(p->vt->name);
    dp_w_u64(w, ln);
    dp_w_bytes(w, p->vt->name, ln);
    dp_w_u64(w, p->seed);
    dp_w_u64(w, (uint64_t)p->epoch);
    dp_w_u64(w, (uint64_t)p->num_shards);
    dp_w_u64(w, (uint64_t)p->shard_id);
    if (p->vt->save) p->vt->save(p, w);
    for (int k = 0; k < p->nsrc; k++) dp_save(p->src[k], w);
}

ct_status dp_restore(ct_datapipe *p, dp_rbuf *r) {
    if (p->vt->quiesce) p->vt->quiesce(p);
    size_t at = r->pos;
    uint64_t ln;
    ct_status st = dp_r_u64(r, &ln);
    if (st) return st;
    size_t want = strlen(p->vt->name);
    if (ln != want || ln > r->n - r->pos || memcmp(r->p + r->pos, p->vt->name, want) != 0)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: at byte %zu expected stage '%s' (the "
                                "blob was saved from a graph of another structure)", at, p->vt->name);
    r->pos += want;
    uint64_t seed;
    int64_t epoch, ns, sid;
    if ((st = dp_r_u64(r, &seed)) || (st = dp_r_i64(r, &epoch)) || (st = dp_r_i64(r, &ns)) ||
        (st = dp_r_i64(r, &sid)))
        return st;
    if (ns < 1 || sid < 0 || sid >= ns)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: stage '%s' at byte %zu has shard %" PRId64
                                " of %" PRId64, p->vt->name, at, sid, ns);
    p->seed = seed;
    p->epoch = epoch;
    p->num_shards = ns;
    p->shard_id = sid;
    if (p->vt->reset) p->vt->reset(p);
    if (p->vt->restore && (st = p->vt->restore(p, r))) return st;
    for (int k = 0; k < p->nsrc; k++)
        if ((st = dp_restore(p->src[k], r))) return st;
    return CT_OK;
}

ct_status ct_datapipe_state_save(ct_datapipe *p, void **blob, size_t *len) {
    if (!p || !blob || !len)
        return ct__error_status(CT_ERR_NULL, "datapipe_state_save: NULL argument");
    *blob = NULL;
    *len = 0;
    dp_wbuf w = {0};
    dp_w_bytes(&w, DP_MAGIC, 8);
    dp_save(p, &w);
    if (w.failed) {
        free(w.p);
        return w.failed == 2 ? ct__error_status(CT_ERR_DEVICE, "datapipe_state_save: buffered items hold "
                                                "non-CPU tensors")
                             : ct__error_status(CT_ERR_OOM, "datapipe_state_save: out of memory");
    }
    *blob = w.p;
    *len = w.n;
    return CT_OK;
}

ct_status ct_datapipe_state_restore(ct_datapipe *p, const void *blob, size_t len) {
    if (!p || (!blob && len))
        return ct__error_status(CT_ERR_NULL, "datapipe_state_restore: NULL argument");
    dp_rbuf r = {blob, len, 0};
    ct_status st;
    if (len < 8 || memcmp(blob, DP_MAGIC, 8) != 0) {
        st = ct__error_status(CT_ERR_FORMAT, "datapipe_state_restore: not a datapipe state blob (bad "
                              "magic, %zu bytes)", len);
    } else {
        r.pos = 8;
        ct_scope s = ct_scope_begin();
        st = dp_restore(p, &r);
        ct_scope_end(s);
        if (!st && r.pos != r.n)
            st = ct__error_status(CT_ERR_FORMAT, "datapipe_state_restore: %zu trailing bytes after byte %zu",
                                  r.n - r.pos, r.pos);
    }
    if (st) {
        /* keep the error, put the pipe back at the start of its epoch */
        ct_status code = ct_last_error_code();
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        dp_reset(p);
        ct__error(code ? code : st, "%s", msg);
    }
    return st;
}

/* ---- cloning (DataLoader2 workers) ---------------------------------------- */
ct_datapipe *dp_clone(ct_datapipe *p) {
    if (!p->vt->clone)
        return ct__error(CT_ERR_ARG, "datapipe %s: this stage cannot be copied into workers", p->vt->name);
    ct_datapipe *srcs[64];
    if (p->nsrc > 64) return ct__error(CT_ERR_ARG, "datapipe %s: too many sources to copy", p->vt->name);
    for (int k = 0; k < p->nsrc; k++) {
        srcs[k] = dp_clone(p->src[k]);
        if (!srcs[k]) {
            for (int q = 0; q < k; q++) dp_free(srcs[q]);
            return NULL;
        }
    }
    ct_datapipe *c = calloc(1, sizeof *c);
    ct_datapipe **s = p->nsrc ? malloc(sizeof *s * (size_t)p->nsrc) : NULL;
    if (!c || (p->nsrc && !s)) {
        free(c);
        free(s);
        for (int k = 0; k < p->nsrc; k++) dp_free(srcs[k]);
        return ct__error(CT_ERR_OOM, "datapipe %s: out of memory", p->vt->name);
    }
    *c = *p;
    c->self = NULL;
    c->src = s;
    if (p->nsrc) memcpy(s, srcs, sizeof *s * (size_t)p->nsrc);
    if (p->vt->clone(p, c) != CT_OK) {
        for (int k = 0; k < p->nsrc; k++) dp_free(srcs[k]);
        free(s);
        free(c);
        return NULL;
    }
    if (c->vt->reset) c->vt->reset(c);
    return c;
}

/* generic clone for nodes whose self is a flat struct of size sz */
static ct_status clone_flat(dp_node *n, dp_node *c, size_t sz) {
    c->self = malloc(sz);
    if (!c->self) return ct__error_status(CT_ERR_OOM, "datapipe: out of memory");
    memcpy(c->self, ((ct_datapipe *)n)->self, sz);
    return CT_OK;
}

void dp_callback_error(const char *stage, int64_t index) {
    ct_status code = ct_last_error_code();
    char msg[900];
    snprintf(msg, sizeof msg, "%s", code ? ct_last_error() : "the callback returned no result");
    ct__error(code ? code : CT_ERR_RUNTIME, "datapipe %s: callback failed on item %" PRId64 ": %s", stage,
              index, msg);
}

#define SELF(T) T *s = (T *)((ct_datapipe *)n)->self
#define NODE ((ct_datapipe *)n)

/* ======================================================================
 * sources
 * ====================================================================== */
typedef struct { ct_pipe_item **items; int64_t n, pos; } items_self;
static int items_next(dp_node *n, ct_pipe_item **out) {
    SELF(items_self);
    if (s->pos >= s->n) return 0;
    *out = ct_pipe_item_retain(s->items[s->pos++]);
    return 1;
}
static void items_reset(dp_node *n) { SELF(items_self); s->pos = 0; }
static void items_save(dp_node *n, dp_wbuf *w) { SELF(items_self); dp_w_u64(w, (uint64_t)s->pos); }
static ct_status items_restore(dp_node *n, dp_rbuf *r) {
    SELF(items_self);
    int64_t v;
    ct_status st = dp_r_i64(r, &v);
    if (st) return st;
    if (v < 0 || v > s->n)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: from_items position %" PRId64
                                " out of range [0, %" PRId64 "]", v, s->n);
    s->pos = v;
    return CT_OK;
}
static void items_free(dp_node *n) {
    SELF(items_self);
    if (!s) return;
    for (int64_t k = 0; k < s->n; k++) ct_pipe_item_release(s->items[k]);
    free(s->items);
    free(s);
}
static ct_status items_clone(dp_node *n, dp_node *c) {
    SELF(items_self);
    items_self *d = calloc(1, sizeof *d);
    if (!d || (s->n && !(d->items = malloc(sizeof *d->items * (size_t)s->n)))) {
        free(d);
        return ct__error_status(CT_ERR_OOM, "datapipe from_items: out of memory");
    }
    d->n = s->n;
    for (int64_t k = 0; k < s->n; k++) d->items[k] = ct_pipe_item_retain(s->items[k]);
    ((ct_datapipe *)c)->self = d;
    return CT_OK;
}
static const dp_vt items_vt = {"from_items", items_next, items_reset, items_save, items_restore,
                               items_clone, items_free, NULL, 0, 0};

ct_datapipe *ct_datapipe_from_items(ct_pipe_item *const *items, int64_t n) {
    if (n < 0 || (n && !items)) return ct__error(CT_ERR_ARG, "datapipe_from_items: bad items/n (%" PRId64 ")", n);
    for (int64_t k = 0; k < n; k++)
        if (!items[k])
            return ct_last_error_code() ? NULL
                                        : ct__error(CT_ERR_NULL, "datapipe_from_items: item %" PRId64 " is NULL", k);
    items_self *s = calloc(1, sizeof *s);
    if (!s || (n && !(s->items = malloc(sizeof *s->items * (size_t)n)))) {
        free(s);
        return ct__error(CT_ERR_OOM, "datapipe_from_items: out of memory");
    }
    s->n = n;
    for (int64_t k = 0; k < n; k++) s->items[k] = ct_pipe_item_retain(items[k]);
    return dp_new(&items_vt, s, NULL, 0);
}

ct_datapipe *ct_datapipe_from_strings(const char *const *strs, int64_t n) {
    if (n < 0 || (n && !strs)) return ct__error(CT_ERR_ARG, "datapipe_from_strings: bad strs/n (%" PRId64 ")", n);
    ct_pipe_item **xs = calloc(n ? (size_t)n : 1, sizeof *xs);
    if (!xs) return ct__error(CT_ERR_OOM, "datapipe_from_strings: out of memory");
    ct_datapipe *p = NULL;
    int64_t k = 0;
    for (; k < n; k++)
        if (!(xs[k] = strs[k] ? ct_pipe_item_str(strs[k])
                              : ct__error(CT_ERR_NULL, "datapipe_from_strings: string %" PRId64 " is NULL", k)))
            break;
    if (k == n) p = ct_datapipe_from_items(xs, n);
    for (int64_t q = 0; q < k; q++) ct_pipe_item_release(xs[q]);
    free(xs);
    return p;
}

typedef struct { int64_t start, end, pos; } range_self;
static int range_next(dp_node *n, ct_pipe_item **out) {
    SELF(range_self);
    if (s->pos >= s->end) return 0;
    *out = ct_pipe_item_int(s->pos);
    if (!*out) return -1;
    s->pos++;
    return 1;
}
static void range_reset(dp_node *n) { SELF(range_self); s->pos = s->start; }
static void range_save(dp_node *n, dp_wbuf *w) { SELF(range_self); dp_w_u64(w, (uint64_t)s->pos); }
static ct_status range_restore(dp_node *n, dp_rbuf *r) {
    SELF(range_self);
    int64_t v;
    ct_status st = dp_r_i64(r, &v);
    if (st) return st;
    if (v < s->start || (v > s->end && s->end >= s->start))
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: range position %" PRId64 " outside [%" PRId64
                                ", %" PRId64 "]", v, s->start, s->end);
    s->pos = v;
    return CT_OK;
}
static ct_status range_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(range_self)); }
static const dp_vt range_vt = {"from_range", range_next, range_reset, range_save, range_restore,
                               range_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_from_range(int64_t start, int64_t end) {
    range_self *s = calloc(1, sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "datapipe_from_range: out of memory");
    s->start = start;
    s->end = end;
    return dp_new(&range_vt, s, NULL, 0);
}

/* ======================================================================
 * map, filter, collate (a counter for messages), flat_map
 * ====================================================================== */
typedef struct { ct_pipe_map_fn fn; ct_pipe_filter_fn pred; void *user; int64_t count; } fn_self;
static void fn_reset(dp_node *n) { SELF(fn_self); s->count = 0; }
static void fn_save(dp_node *n, dp_wbuf *w) { SELF(fn_self); dp_w_u64(w, (uint64_t)s->count); }
static ct_status fn_restore(dp_node *n, dp_rbuf *r) {
    SELF(fn_self);
    ct_status st = dp_r_i64(r, &s->count);
    if (!st && s->count < 0) st = ct__error_status(CT_ERR_FORMAT, "datapipe state: negative item count");
    return st;
}
static ct_status fn_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(fn_self)); }

static int map_next(dp_node *n, ct_pipe_item **out) {
    SELF(fn_self);
    ct_pipe_item *x;
    int r = dp_next(NODE->src[0], &x);
    if (r <= 0) return r;
    ct_clear_error();
    ct_scope sc = ct_scope_begin();
    *out = s->fn(x, s->user);
    ct_scope_end(sc);
    ct_pipe_item_release(x);
    if (!*out) {
        dp_callback_error(NODE->vt->name, s->count);
        return -1;
    }
    s->count++;
    return 1;
}
static const dp_vt map_vt = {"map", map_next, fn_reset, fn_save, fn_restore, fn_clone, NULL, NULL, 1, 0};

static ct_datapipe *fn_pipe(const dp_vt *vt, ct_datapipe *src, ct_pipe_map_fn fn, ct_pipe_filter_fn pred,
                            void *user, int need_fn) {
    if (need_fn && !fn && !pred) {
        dp_free(src);
        return ct__error(CT_ERR_NULL, "datapipe_%s: callback is NULL", vt->name);
    }
    fn_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_%s: out of memory", vt->name);
    }
    s->fn = fn;
    s->pred = pred;
    s->user = user;
    return dp_new(vt, s, &src, 1);
}
ct_datapipe *ct_datapipe_map(ct_datapipe *src, ct_pipe_map_fn fn, void *user) {
    return fn_pipe(&map_vt, src, fn, NULL, user, 1);
}

static int filter_next(dp_node *n, ct_pipe_item **out) {
    SELF(fn_self);
    for (;;) {
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r <= 0) return r;
        ct_clear_error();
        ct_scope sc = ct_scope_begin();
        int keep = s->pred(x, s->user);
        ct_scope_end(sc);
        if (keep < 0) {
            ct_pipe_item_release(x);
            dp_callback_error("filter", s->count);
            return -1;
        }
        s->count++;
        if (keep) {
            *out = x;
            return 1;
        }
        ct_pipe_item_release(x);
    }
}
static const dp_vt filter_vt = {"filter", filter_next, fn_reset, fn_save, fn_restore, fn_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_filter(ct_datapipe *src, ct_pipe_filter_fn fn, void *user) {
    return fn_pipe(&filter_vt, src, NULL, fn, user, 1);
}

/* ---- default collate ---- */
static ct_pipe_item *collate_default(ct_pipe_item *batch, int depth);
static ct_pipe_item *collate_tensors(ct_tensor **ts, int64_t n) {
    if (n > INT32_MAX) return ct__error(CT_ERR_ARG, "collate: batch of %" PRId64 " is too large", n);
    ct_tensor *t = ct_stack(ts, (int)n, 0);
    return t ? ct_pipe_item_tensor(t) : NULL;
}
static ct_pipe_item *collate_default(ct_pipe_item *b, int depth) {
    if (b->kind != CT_PIPE_ITEM_LIST)
        return ct__error(CT_ERR_ARG, "collate: expected a list (a batch), got a %s",
                         b->kind == CT_PIPE_ITEM_TUPLE ? "tuple" : "single item");
    if (depth > 32) return ct__error(CT_ERR_ARG, "collate: items nested too deeply");
    int64_t n = b->n;
    if (n == 0) return ct_pipe_item_retain(b);
    ct_pipe_item_kind k = b->xs[0]->kind;
    for (int64_t j = 1; j < n; j++)
        if (b->xs[j]->kind != k)
            return ct__error(CT_ERR_ARG, "collate: element %" PRId64 " of the batch is not of the kind "
                             "of element 0", j);
    switch (k) {
    case CT_PIPE_ITEM_STR:
    case CT_PIPE_ITEM_LIST:
        return ct_pipe_item_retain(b);
    case CT_PIPE_ITEM_INT: {
        ct_tensor *t = ct_empty_on(CT_SHAPE(n), CT_I64, CT_CPU);
        if (!t) return NULL;
        int64_t *d = ct_data_ptr(t);
        for (int64_t j = 0; j < n; j++) d[j] = b->xs[j]->i;
        return ct_pipe_item_tensor(t);
    }
    case CT_PIPE_ITEM_TENSOR: {
        ct_tensor **ts = malloc(sizeof *ts * (size_t)n);
        if (!ts) return ct__error(CT_ERR_OOM, "collate: out of memory");
        for (int64_t j = 0; j < n; j++) ts[j] = b->xs[j]->t;
        ct_pipe_item *r = collate_tensors(ts, n);
        free(ts);
        return r;
    }
    case CT_PIPE_ITEM_SAMPLE: {
        ct_tensor **ts = malloc(sizeof *ts * (size_t)n);
        ct_sample *out = ct_sample_new();
        if (!ts || !out) {
            free(ts);
            ct_sample_free(out);
            return ct__error(CT_ERR_OOM, "collate: out of memory");
        }
        const ct_sample *s0 = b->xs[0]->sample;
        for (int c = 0; c < ct_sample_count(s0); c++) {
            const char *name = ct_sample_name(s0, c);
            for (int64_t j = 0; j < n; j++) {
                ts[j] = ct_sample_get(b->xs[j]->sample, name);
                if (!ts[j]) {
                    free(ts);
                    ct_sample_free(out);
                    return ct__error(CT_ERR_ARG, "collate: sample %" PRId64 " of the batch has no '%s'", j, name);
                }
            }
            ct_tensor *t = ct_stack(ts, (int)n, 0);
            if (!t || ct_sample_set(out, name, t)) {
                free(ts);
                ct_sample_free(out);
                return NULL;
            }
        }
        free(ts);
        return ct_pipe_item_sample(out);
    }
    case CT_PIPE_ITEM_TUPLE: {
        int64_t m = b->xs[0]->n;
        for (int64_t j = 1; j < n; j++)
            if (b->xs[j]->n != m)
                return ct__error(CT_ERR_ARG, "collate: tuple %" PRId64 " has %" PRId64 " elements, tuple 0 "
                                 "has %" PRId64, j, b->xs[j]->n, m);
        ct_pipe_item **cols = calloc((size_t)m + 1, sizeof *cols);
        if (!cols) return ct__error(CT_ERR_OOM, "collate: out of memory");
        int64_t c = 0;
        for (; c < m; c++) {
            ct_pipe_item *col = ct_pipe_item_list(NULL, 0);
            for (int64_t j = 0; col && j < n; j++)
                if (ct_pipe_item_list_append(col, ct_pipe_item_retain(b->xs[j]->xs[c]))) {
                    ct_pipe_item_release(col);
                    col = NULL;
                }
            cols[c] = col ? collate_default(col, depth + 1) : NULL;
            ct_pipe_item_release(col);
            if (!cols[c]) break;
        }
        ct_pipe_item *r = NULL;
        if (c == m) r = ct_pipe_item_tuple(cols, (int)m);
        else
            for (int64_t q = 0; q < c; q++) ct_pipe_item_release(cols[q]);
        free(cols);
        return r;
    }
    }
    return NULL;
}
static ct_pipe_item *collate_default_cb(ct_pipe_item *x, void *user) { return collate_default(x, 0); }
static const dp_vt collate_vt = {"collate", map_next, fn_reset, fn_save, fn_restore, fn_clone, NULL, NULL, 1, 0};
ct_datapipe *ct_datapipe_collate(ct_datapipe *src, ct_pipe_map_fn fn, void *user) {
    return fn_pipe(&collate_vt, src, fn ? fn : collate_default_cb, NULL, user, 1);
}

/* ---- flat_map / unbatch: a current list and a position ---- */
typedef struct { ct_pipe_map_fn fn; void *user; int64_t count; ct_pipe_item *cur; int64_t pos; } flat_self;
static int flat_next(dp_node *n, ct_pipe_item **out) {
    SELF(flat_self);
    for (;;) {
        if (s->cur && s->pos < s->cur->n) {
            *out = ct_pipe_item_retain(s->cur->xs[s->pos++]);
            return 1;
        }
        ct_pipe_item_release(s->cur);
        s->cur = NULL;
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r <= 0) return r;
        if (s->fn) {
            ct_clear_error();
            ct_scope sc = ct_scope_begin();
            ct_pipe_item *y = s->fn(x, s->user);
            ct_scope_end(sc);
            ct_pipe_item_release(x);
            if (!y) {
                dp_callback_error("flat_map", s->count);
                return -1;
            }
            x = y;
        }
        if (x->kind != CT_PIPE_ITEM_LIST && x->kind != CT_PIPE_ITEM_TUPLE) {
            ct_pipe_item_release(x);
            ct__error(CT_ERR_ARG, "datapipe %s: item %" PRId64 " is not a list", NODE->vt->name, s->count);
            return -1;
        }
        s->count++;
        s->cur = x;
        s->pos = 0;
    }
}
static void flat_reset(dp_node *n) {
    SELF(flat_self);
    ct_pipe_item_release(s->cur);
    s->cur = NULL;
    s->pos = s->count = 0;
}
static void flat_save(dp_node *n, dp_wbuf *w) {
    SELF(flat_self);
    dp_w_u64(w, (uint64_t)s->count);
    dp_w_u64(w, (uint64_t)s->pos);
    dp_w_item(w, s->cur);
}
static ct_status flat_restore(dp_node *n, dp_rbuf *r) {
    SELF(flat_self);
    ct_status st;
    if ((st = dp_r_i64(r, &s->count)) || (st = dp_r_i64(r, &s->pos)) || (st = dp_r_item(r, &s->cur))) return st;
    if (s->count < 0 || s->pos < 0 ||
        (s->cur && ((s->cur->kind != CT_PIPE_ITEM_LIST && s->cur->kind != CT_PIPE_ITEM_TUPLE) || s->pos > s->cur->n)))
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: bad %s position %" PRId64, NODE->vt->name, s->pos);
    return CT_OK;
}
static void flat_free(dp_node *n) {
    SELF(flat_self);
    if (s) ct_pipe_item_release(s->cur);
    free(s);
}
static ct_status flat_clone(dp_node *n, dp_node *c) {
    ct_status st = clone_flat(n, c, sizeof(flat_self));
    if (!st) ((flat_self *)((ct_datapipe *)c)->self)->cur = NULL;
    return st;
}
static const dp_vt flat_vt = {"flat_map", flat_next, flat_reset, flat_save, flat_restore, flat_clone,
                              flat_free, NULL, 0, 0};
static const dp_vt unbatch_vt = {"unbatch", flat_next, flat_reset, flat_save, flat_restore, flat_clone,
                                 flat_free, NULL, 0, 0};
static ct_datapipe *flat_pipe(const dp_vt *vt, ct_datapipe *src, ct_pipe_map_fn fn, void *user) {
    flat_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_%s: out of memory", vt->name);
    }
    s->fn = fn;
    s->user = user;
    return dp_new(vt, s, &src, 1);
}
ct_datapipe *ct_datapipe_flat_map(ct_datapipe *src, ct_pipe_map_fn fn, void *user) {
    if (!fn) {
        dp_free(src);
        return ct__error(CT_ERR_NULL, "datapipe_flat_map: callback is NULL");
    }
    return flat_pipe(&flat_vt, src, fn, user);
}
ct_datapipe *ct_datapipe_unbatch(ct_datapipe *src) { return flat_pipe(&unbatch_vt, src, NULL, NULL); }

/* ======================================================================
 * batch
 * ====================================================================== */
typedef struct { int64_t size; bool drop_last; } batch_self;
static int batch_next(dp_node *n, ct_pipe_item **out) {
    SELF(batch_self);
    ct_pipe_item *b = ct_pipe_item_list(NULL, 0);
    if (!b) return -1;
    while (b->n < s->size) {
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r < 0) {
            ct_pipe_item_release(b);
            return -1;
        }
        if (r == 0) break;
        if (ct_pipe_item_list_append(b, x)) {
            ct_pipe_item_release(b);
            return -1;
        }
    }
    if (b->n == 0 || (b->n < s->size && s->drop_last)) {
        ct_pipe_item_release(b);
        return 0;
    }
    *out = b;
    return 1;
}
static ct_status batch_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(batch_self)); }
static const dp_vt batch_vt = {"batch", batch_next, NULL, NULL, NULL, batch_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_batch(ct_datapipe *src, int64_t batch_size, bool drop_last) {
    if (batch_size < 1) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_batch: batch_size must be >= 1, got %" PRId64, batch_size);
    }
    batch_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_batch: out of memory");
    }
    s->size = batch_size;
    s->drop_last = drop_last;
    return dp_new(&batch_vt, s, &src, 1);
}

/* ======================================================================
 * shuffle, in-batch shuffle, sort by key, bucket_batch
 * ====================================================================== */
typedef struct { int64_t size, n; ct_pipe_item **buf; uint64_t rng; int exhausted; } shuf_self;
static int shuf_next(dp_node *n, ct_pipe_item **out) {
    SELF(shuf_self);
    while (!s->exhausted) {
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r < 0) return -1;
        if (r == 0) {
            s->exhausted = 1;
            break;
        }
        if (s->n == s->size) {
            uint64_t idx = dp_rng_below(&s->rng, (uint64_t)s->n);
            *out = s->buf[idx];
            s->buf[idx] = x;
            return 1;
        }
        s->buf[s->n++] = x;
    }
    if (s->n == 0) return 0;
    uint64_t idx = dp_rng_below(&s->rng, (uint64_t)s->n);
    *out = s->buf[idx];
    memmove(&s->buf[idx], &s->buf[idx + 1], sizeof *s->buf * (size_t)(s->n - (int64_t)idx - 1));
    s->n--;
    return 1;
}
static void shuf_clear(shuf_self *s) {
    for (int64_t k = 0; k < s->n; k++) ct_pipe_item_release(s->buf[k]);
    s->n = 0;
    s->exhausted = 0;
}
static void shuf_reset(dp_node *n) {
    SELF(shuf_self);
    shuf_clear(s);
    s->rng = dp_rng_seed(NODE->seed, NODE->epoch);
}
static void shuf_save(dp_node *n, dp_wbuf *w) {
    SELF(shuf_self);
    dp_w_u64(w, s->rng);
    dp_w_u64(w, (uint64_t)s->exhausted);
    dp_w_u64(w, (uint64_t)s->n);
    for (int64_t k = 0; k < s->n; k++) dp_w_item(w, s->buf[k]);
}
static ct_status shuf_restore(dp_node *n, dp_rbuf *r) {
    SELF(shuf_self);
    uint64_t ex, cnt;
    ct_status st;
    if ((st = dp_r_u64(r, &s->rng)) || (st = dp_r_u64(r, &ex)) || (st = dp_r_u64(r, &cnt))) return st;
    if (ex > 1 || cnt > (uint64_t)s->size)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: shuffle buffer of %" PRIu64 " items for a "
                                "buffer_size of %" PRId64, cnt, s->size);
    s->exhausted = (int)ex;
    for (uint64_t k = 0; k < cnt; k++) {
        ct_pipe_item *x;
        if ((st = dp_r_item(r, &x))) return st;
        if (!x) return ct__error_status(CT_ERR_FORMAT, "datapipe state: None in a shuffle buffer");
        s->buf[s->n++] = x;
    }
    return CT_OK;
}
static void shuf_free(dp_node *n) {
    SELF(shuf_self);
    if (!s) return;
    shuf_clear(s);
    free(s->buf);
    free(s);
}
static shuf_self *shuf_alloc(int64_t size) {
    shuf_self *s = calloc(1, sizeof *s);
    if (s && !(s->buf = malloc(sizeof *s->buf * (size_t)size))) {
        free(s);
        s = NULL;
    }
    return s;
}
static ct_status shuf_clone(dp_node *n, dp_node *c) {
    SELF(shuf_self);
    shuf_self *d = shuf_alloc(s->size);
    if (!d) return ct__error_status(CT_ERR_OOM, "datapipe shuffle: out of memory");
    d->size = s->size;
    ((ct_datapipe *)c)->self = d;
    return CT_OK;
}
static const dp_vt shuf_vt = {"shuffle", shuf_next, shuf_reset, shuf_save, shuf_restore, shuf_clone,
                              shuf_free, NULL, 0, 1};
ct_datapipe *ct_datapipe_shuffle(ct_datapipe *src, int64_t buffer_size, uint64_t seed) {
    if (buffer_size < 1 || buffer_size > ((int64_t)1 << 40)) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_shuffle: buffer_size must be in [1, 2^40], got %" PRId64,
                         buffer_size);
    }
    shuf_self *s = shuf_alloc(buffer_size);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_shuffle: out of memory (buffer of %" PRId64 ")", buffer_size);
    }
    s->size = buffer_size;
    ct_datapipe *p = dp_new(&shuf_vt, s, &src, 1);
    if (p) {
        p->seed = seed;
        shuf_reset((dp_node *)p);
    }
    return p;
}

/* in-batch shuffle (random.shuffle on each list: Fisher-Yates from the end) */
typedef struct { uint64_t rng; } ibs_self;
static int ibs_next(dp_node *n, ct_pipe_item **out) {
    SELF(ibs_self);
    ct_pipe_item *x;
    int r = dp_next(NODE->src[0], &x);
    if (r <= 0) return r;
    if (x->kind != CT_PIPE_ITEM_LIST) {
        ct_pipe_item_release(x);
        ct__error(CT_ERR_ARG, "datapipe in_batch_shuffle: item is not a list");
        return -1;
    }
    ct_pipe_item **xs = malloc(sizeof *xs * (size_t)(x->n ? x->n : 1));
    if (!xs) {
        ct_pipe_item_release(x);
        ct__error(CT_ERR_OOM, "datapipe in_batch_shuffle: out of memory");
        return -1;
    }
    for (int64_t k = 0; k < x->n; k++) xs[k] = ct_pipe_item_retain(x->xs[k]);
    for (int64_t k = x->n - 1; k > 0; k--) {
        uint64_t j = dp_rng_below(&s->rng, (uint64_t)k + 1);
        ct_pipe_item *t = xs[k];
        xs[k] = xs[j];
        xs[j] = t;
    }
    *out = ct_pipe_item_list(xs, x->n);
    ct_pipe_item_release(x);
    free(xs);
    return *out ? 1 : -1;
}
static void ibs_reset(dp_node *n) { SELF(ibs_self); s->rng = dp_rng_seed(NODE->seed, NODE->epoch); }
static void ibs_save(dp_node *n, dp_wbuf *w) { SELF(ibs_self); dp_w_u64(w, s->rng); }
static ct_status ibs_restore(dp_node *n, dp_rbuf *r) { SELF(ibs_self); return dp_r_u64(r, &s->rng); }
static ct_status ibs_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(ibs_self)); }
static const dp_vt ibs_vt = {"in_batch_shuffle", ibs_next, ibs_reset, ibs_save, ibs_restore, ibs_clone,
                             NULL, NULL, 0, 1};
static ct_datapipe *in_batch_shuffle(ct_datapipe *src, uint64_t seed) {
    ibs_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe in_batch_shuffle: out of memory");
    }
    ct_datapipe *p = dp_new(&ibs_vt, s, &src, 1);
    if (p) {
        p->seed = seed;
        ibs_reset((dp_node *)p);
    }
    return p;
}

/* stable sort of a list by key */
typedef struct { ct_pipe_key_fn key; void *user; } key_self;
typedef struct { int64_t key, idx; } keyed;
static int keyed_cmp(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}
static int sortkey_next(dp_node *n, ct_pipe_item **out) {
    SELF(key_self);
    ct_pipe_item *x;
    int r = dp_next(NODE->src[0], &x);
    if (r <= 0) return r;
    keyed *k = malloc(sizeof *k * (size_t)(x->n ? x->n : 1));
    ct_pipe_item **xs = malloc(sizeof *xs * (size_t)(x->n ? x->n : 1));
    if (!k || !xs) {
        free(k);
        free(xs);
        ct_pipe_item_release(x);
        ct__error(CT_ERR_OOM, "datapipe bucket_batch: out of memory");
        return -1;
    }
    ct_scope sc = ct_scope_begin();
    for (int64_t j = 0; j < x->n; j++) k[j] = (keyed){s->key(x->xs[j], s->user), j};
    ct_scope_end(sc);
    qsort(k, (size_t)x->n, sizeof *k, keyed_cmp);
    for (int64_t j = 0; j < x->n; j++) xs[j] = ct_pipe_item_retain(x->xs[k[j].idx]);
    *out = ct_pipe_item_list(xs, x->n);
    ct_pipe_item_release(x);
    free(k);
    free(xs);
    return *out ? 1 : -1;
}
static ct_status sortkey_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(key_self)); }
static const dp_vt sortkey_vt = {"sort_by_key", sortkey_next, NULL, NULL, NULL, sortkey_clone, NULL, NULL, 1, 0};

ct_datapipe *ct_datapipe_bucket_batch(ct_datapipe *src, int64_t batch_size, bool drop_last,
                                      int64_t batch_num, int64_t bucket_num, ct_pipe_key_fn key,
                                      void *user, uint64_t seed) {
    if (!src) return NULL;
    if (batch_size < 1 || batch_num < 1 || bucket_num < 1 || batch_size > INT64_MAX / batch_num ||
        batch_size * batch_num > ((int64_t)1 << 40) / bucket_num) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_bucket_batch: batch_size %" PRId64 ", batch_num %" PRId64
                         ", bucket_num %" PRId64 " must be >= 1 with a pool of at most 2^40 items",
                         batch_size, batch_num, bucket_num);
    }
    int64_t bucket_size = batch_size * batch_num, pool = bucket_size * bucket_num;
    ct_datapipe *p = src;
    if (bucket_num > 1 || !key) p = ct_datapipe_unbatch(in_batch_shuffle(ct_datapipe_batch(p, pool, false), seed));
    if (key) {
        key_self *k = calloc(1, sizeof *k);
        if (!k) {
            dp_free(p);
            return ct__error(CT_ERR_OOM, "datapipe_bucket_batch: out of memory");
        }
        k->key = key;
        k->user = user;
        ct_datapipe *b = ct_datapipe_batch(p, bucket_size, false);
        p = ct_datapipe_unbatch(b ? dp_new(&sortkey_vt, k, &b, 1) : (free(k), NULL));
    }
    p = ct_datapipe_batch(p, batch_size, drop_last);
    if (key)
        p = ct_datapipe_unbatch(in_batch_shuffle(ct_datapipe_batch(p, bucket_num, false),
                                                 seed ^ 0x2545f4914f6cdd1dULL));
    return p;
}

/* ======================================================================
 * shard / sharding_filter (the shard lives in the node: num_shards, shard_id)
 * ====================================================================== */
typedef struct { int64_t i; } shard_self;
static int shard_next(dp_node *n, ct_pipe_item **out) {
    SELF(shard_self);
    for (;;) {
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r <= 0) return r;
        int64_t i = s->i++;
        if (i % NODE->num_shards == NODE->shard_id) {
            *out = x;
            return 1;
        }
        ct_pipe_item_release(x);
    }
}
static void shard_reset(dp_node *n) { SELF(shard_self); s->i = 0; }
static void shard_save(dp_node *n, dp_wbuf *w) { SELF(shard_self); dp_w_u64(w, (uint64_t)s->i); }
static ct_status shard_restore(dp_node *n, dp_rbuf *r) {
    SELF(shard_self);
    ct_status st = dp_r_i64(r, &s->i);
    if (!st && s->i < 0) st = ct__error_status(CT_ERR_FORMAT, "datapipe state: negative shard counter");
    return st;
}
static ct_status shard_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(shard_self)); }
static const dp_vt shard_vt = {"shard", shard_next, shard_reset, shard_save, shard_restore, shard_clone,
                               NULL, NULL, 0, 0};
const dp_vt dp_sharding_filter_vt = {"sharding_filter", shard_next, shard_reset, shard_save, shard_restore,
                                     shard_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_shard(ct_datapipe *src, int64_t num_shards, int64_t shard_id) {
    if (num_shards < 1 || shard_id < 0 || shard_id >= num_shards) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_shard: shard_id %" PRId64 " is not in [0, num_shards=%" PRId64 ")",
                         shard_id, num_shards);
    }
    shard_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_shard: out of memory");
    }
    ct_datapipe *p = dp_new(&shard_vt, s, &src, 1);
    if (p) {
        p->num_shards = num_shards;
        p->shard_id = shard_id;
    }
    return p;
}
ct_datapipe *ct_datapipe_sharding_filter(ct_datapipe *src) {
    shard_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_sharding_filter: out of memory");
    }
    ct_datapipe *p = dp_new(&dp_sharding_filter_vt, s, &src, 1);
    if (p) p->is_sharding_filter = 1;
    return p;
}

/* ======================================================================
 * zip, concat, mux
 * ====================================================================== */
static ct_datapipe *multi_new(const dp_vt *vt, void *self, ct_datapipe *const *srcs, int n) {
    if (n < 1 || n > 64 || !srcs) {
        for (int k = 0; srcs && k < n; k++) dp_free(srcs[k]);
        free(self);
        return ct__error(CT_ERR_ARG, "datapipe_%s: needs 1 to 64 source pipes, got %d", vt->name, n);
    }
    ct_datapipe *tmp[64];
    memcpy(tmp, srcs, sizeof *tmp * (size_t)n);
    if (!self) {
        for (int k = 0; k < n; k++) dp_free(tmp[k]);
        return ct__error(CT_ERR_OOM, "datapipe_%s: out of memory", vt->name);
    }
    return dp_new(vt, self, tmp, n);
}

typedef struct { int dummy; } zip_self;
static int zip_next(dp_node *n, ct_pipe_item **out) {
    ct_pipe_item *xs[64];
    int k = 0, r = 1;
    for (; k < NODE->nsrc; k++)
        if ((r = dp_next(NODE->src[k], &xs[k])) <= 0) break;
    if (r <= 0) {
        for (int q = 0; q < k; q++) ct_pipe_item_release(xs[q]);
        return r;
    }
    *out = ct_pipe_item_tuple(xs, NODE->nsrc);
    return *out ? 1 : -1;
}
static ct_status zip_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(zip_self)); }
static const dp_vt zip_vt = {"zip", zip_next, NULL, NULL, NULL, zip_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_zip(ct_datapipe *const *srcs, int n) {
    return multi_new(&zip_vt, calloc(1, sizeof(zip_self)), srcs, n);
}

typedef struct { int64_t cur; } cur_self;
static void cur_reset(dp_node *n) { SELF(cur_self); s->cur = 0; }
static void cur_save(dp_node *n, dp_wbuf *w) { SELF(cur_self); dp_w_u64(w, (uint64_t)s->cur); }
static ct_status cur_restore(dp_node *n, dp_rbuf *r) {
    SELF(cur_self);
    ct_status st = dp_r_i64(r, &s->cur);
    if (!st && (s->cur < 0 || s->cur > NODE->nsrc))
        st = ct__error_status(CT_ERR_FORMAT, "datapipe state: %s source index %" PRId64 " out of range",
                              NODE->vt->name, s->cur);
    return st;
}
static ct_status cur_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(cur_self)); }
static int concat_next(dp_node *n, ct_pipe_item **out) {
    SELF(cur_self);
    while (s->cur < NODE->nsrc) {
        int r = dp_next(NODE->src[s->cur], out);
        if (r != 0) return r;
        s->cur++;
    }
    return 0;
}
static const dp_vt concat_vt = {"concat", concat_next, cur_reset, cur_save, cur_restore, cur_clone, NULL, NULL, 0, 0};
ct_datapipe *ct_datapipe_concat(ct_datapipe *const *srcs, int n) {
    return multi_new(&concat_vt, calloc(1, sizeof(cur_self)), srcs, n);
}

/* mux: one round is pulled whole (one item per source), then yielded */
typedef struct { ct_pipe_item *round[64]; int n, pos, ended; } mux_self;
static void mux_clear(mux_self *s) {
    for (int k = s->pos; k < s->n; k++) ct_pipe_item_release(s->round[k]);
    s->n = s->pos = 0;
}
static int mux_next(dp_node *n, ct_pipe_item **out) {
    SELF(mux_self);
    if (s->pos < s->n) {
        *out = s->round[s->pos++];
        return 1;
    }
    if (s->ended) return 0;
    s->n = s->pos = 0;
    for (int k = 0; k < NODE->nsrc; k++) {
        int r = dp_next(NODE->src[k], &s->round[k]);
        if (r <= 0) {
            for (int q = 0; q < k; q++) ct_pipe_item_release(s->round[q]);
            if (r == 0) s->ended = 1;
            return r;
        }
    }
    s->n = NODE->nsrc;
    *out = s->round[s->pos++];
    return 1;
}
static void mux_reset(dp_node *n) { SELF(mux_self); mux_clear(s); s->ended = 0; }
static void mux_save(dp_node *n, dp_wbuf *w) {
    SELF(mux_self);
    dp_w_u64(w, (uint64_t)s->ended);
    dp_w_u64(w, (uint64_t)(s->n - s->pos));
    for (int k = s->pos; k < s->n; k++) dp_w_item(w, s->round[k]);
}
static ct_status mux_restore(dp_node *n, dp_rbuf *r) {
    SELF(mux_self);
    uint64_t ended, cnt;
    ct_status st;
    if ((st = dp_r_u64(r, &ended)) || (st = dp_r_u64(r, &cnt))) return st;
    if (ended > 1 || cnt > (uint64_t)NODE->nsrc)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: mux round of %" PRIu64 " items for %d sources",
                                cnt, NODE->nsrc);
    s->ended = (int)ended;
    for (uint64_t k = 0; k < cnt; k++) {
        ct_pipe_item *x;
        if ((st = dp_r_item(r, &x))) return st;
        if (!x) return ct__error_status(CT_ERR_FORMAT, "datapipe state: None in a mux round");
        s->round[s->n++] = x;
    }
    return CT_OK;
}
static void mux_free(dp_node *n) {
    SELF(mux_self);
    if (s) mux_clear(s);
    free(s);
}
static ct_status mux_clone(dp_node *n, dp_node *c) {
    ((ct_datapipe *)c)->self = calloc(1, sizeof(mux_self));
    return ((ct_datapipe *)c)->self ? CT_OK : ct__error_status(CT_ERR_OOM, "datapipe mux: out of memory");
}
static const dp_vt mux_vt = {"mux", mux_next, mux_reset, mux_save, mux_restore, mux_clone, mux_free, NULL, 0, 0};
ct_datapipe *ct_datapipe_mux(ct_datapipe *const *srcs, int n) {
    return multi_new(&mux_vt, calloc(1, sizeof(mux_self)), srcs, n);
}

/* ======================================================================
 * cycle, header
 * ====================================================================== */
typedef struct { int64_t limit, i; } count_self;
static void count_reset(dp_node *n) { SELF(count_self); s->i = 0; }
static void count_save(dp_node *n, dp_wbuf *w) { SELF(count_self); dp_w_u64(w, (uint64_t)s->i); }
static ct_status count_restore(dp_node *n, dp_rbuf *r) {
    SELF(count_self);
    ct_status st = dp_r_i64(r, &s->i);
    if (!st && (s->i < 0 || (s->limit >= 0 && s->i > s->limit)))
        st = ct__error_status(CT_ERR_FORMAT, "datapipe state: %s counter %" PRId64 " out of range",
                              NODE->vt->name, s->i);
    return st;
}
static ct_status count_clone(dp_node *n, dp_node *c) { return clone_flat(n, c, sizeof(count_self)); }

static int cycle_next(dp_node *n, ct_pipe_item **out) {
    SELF(count_self);
    if ((s->limit >= 0 && s->i >= s->limit) || s->i == INT64_MAX) return 0;
    int r = dp_next(NODE->src[0], out);
    if (r != 0) return r;
    s->i++;
    if (s->limit >= 0 && s->i >= s->limit) return 0;
    dp_reset(NODE->src[0]);
    r = dp_next(NODE->src[0], out);
    if (r == 0) s->i = s->limit >= 0 ? s->limit : INT64_MAX; /* an empty source: stop */
    return r;
}
static const dp_vt cycle_vt = {"cycle", cycle_next, count_reset, count_save, count_restore, count_clone,
                               NULL, NULL, 0, 0};
static int header_next(dp_node *n, ct_pipe_item **out) {
    SELF(count_self);
    if (s->i >= s->limit) return 0;
    int r = dp_next(NODE->src[0], out);
    if (r == 1) s->i++;
    return r;
}
static const dp_vt header_vt = {"header", header_next, count_reset, count_save, count_restore, count_clone,
                                NULL, NULL, 0, 0};
static ct_datapipe *count_pipe(const dp_vt *vt, ct_datapipe *src, int64_t limit) {
    count_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_%s: out of memory", vt->name);
    }
    s->limit = limit;
    return dp_new(vt, s, &src, 1);
}
ct_datapipe *ct_datapipe_cycle(ct_datapipe *src, int64_t count) { return count_pipe(&cycle_vt, src, count < 0 ? -1 : count); }
ct_datapipe *ct_datapipe_header(ct_datapipe *src, int64_t n) {
    if (n < 0) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_header: limit must be >= 0, got %" PRId64, n);
    }
    return count_pipe(&header_vt, src, n);
}
