/* datapipe_thread.c -- background runners (one thread pulling a pipe into a
 * queue), the prefetch stage, and DataLoader2 (worker copies of the graph
 * below its sharding_filter, merged round-robin).
 *
 * Threads: a runner's thread opens its own scope around every next() and
 * hands items to the consumer through the queue (items are reference
 * counted and immutable).  Errors travel as (code, message) entries and are
 * re-recorded on the consumer's thread.  Stopping sets a flag, wakes the
 * thread and joins it; the item being computed is still queued, so the
 * queue plus the pipe's position is always an exact position (state save). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datapipe_impl.h"

#define SELF(T) T *s = (T *)((ct_datapipe *)n)->self
#define NODE ((ct_datapipe *)n)

/* ---- runner ---------------------------------------------------------------- */
static ct_status runner_init(dp_runner *r, ct_datapipe *pipe, int worker_id, int64_t stride, int64_t offset,
                             int64_t limit) {
    memset(r, 0, sizeof *r);
    r->pipe = pipe;
    r->worker_id = worker_id;
    r->stride = stride;
    r->offset = offset;
    r->limit = limit;
    if (pthread_mutex_init(&r->mu, NULL)) return ct__error_status(CT_ERR_RUNTIME, "datapipe: mutex init failed");
    if (pthread_cond_init(&r->cv, NULL)) {
        pthread_mutex_destroy(&r->mu);
        return ct__error_status(CT_ERR_RUNTIME, "datapipe: condition init failed");
    }
    return CT_OK;
}

static int q_push(dp_runner *r, dp_entry e) {
    if (r->head + r->count == r->cap) {
        if (r->head > 0) {
            memmove(r->q, r->q + r->head, sizeof *r->q * (size_t)r->count);
            r->head = 0;
        } else {
            int64_t nc = r->cap ? r->cap * 2 : 8;
            dp_entry *nq = realloc(r->q, sizeof *nq * (size_t)nc);
            if (!nq) return -1;
            r->q = nq;
            r->cap = nc;
        }
    }
    r->q[r->head + r->count++] = e;
    return 0;
}

static void entry_free(dp_entry *e) {
    ct_pipe_item_release(e->item);
    free(e->msg);
    e->item = NULL;
    e->msg = NULL;
}

static void *runner_main(void *arg) {
    dp_runner *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (!r->stop && r->count >= r->limit) pthread_cond_wait(&r->cv, &r->mu);
        int stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
        dp_entry e = {0};
        ct_clear_error();
        ct_scope sc = ct_scope_begin();
        e.kind = dp_next(r->pipe, &e.item);
        ct_scope_end(sc);
        if (e.kind < 0) {
            e.code = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
            e.msg = strdup(ct_last_error()[0] ? ct_last_error() : "unknown error");
        }
        pthread_mutex_lock(&r->mu);
        if (q_push(r, e) != 0) {
            entry_free(&e);
            e = (dp_entry){.kind = -1, .code = CT_ERR_OOM, .msg = NULL};
            /* the queue is full and cannot grow: mark done with an error */
            r->done = 2;
        } else if (e.kind == 1) {
            r->produced++;
        } else {
            r->done = 1;
        }
        pthread_cond_broadcast(&r->cv);
        int done = r->done;
        pthread_mutex_unlock(&r->mu);
        if (done) break;
    }
    ct_clear_error();
    return NULL;
}

static void runner_stop(dp_runner *r) {
    if (!r->running) return;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    r->running = 0;
    r->stop = 0;
}

static void runner_clear(dp_runner *r) {
    runner_stop(r);
    for (int64_t k = 0; k < r->count; k++) entry_free(&r->q[r->head + k]);
    r->head = r->count = 0;
    r->done = 0;
    r->produced = 0;
}

static void runner_destroy(dp_runner *r, int owns_pipe) {
    runner_clear(r);
    free(r->q);
    r->q = NULL;
    if (owns_pipe) dp_free(r->pipe);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

/* 1 item (moved to *out), 0 end, -1 error (recorded) */
static int runner_pop(dp_runner *r, ct_pipe_item **out) {
    if (!r->running && !r->done) {
        if (pthread_create(&r->th, NULL, runner_main, r) != 0) {
            ct__error(CT_ERR_RUNTIME, "datapipe: cannot start a %s thread",
                      r->worker_id >= 0 ? "worker" : "prefetch");
            return -1;
        }
        r->running = 1;
    }
    pthread_mutex_lock(&r->mu);
    while (r->count == 0 && !(r->done == 2)) pthread_cond_wait(&r->cv, &r->mu);
    if (r->count == 0) { /* done == 2: out of memory in the worker */
        pthread_mutex_unlock(&r->mu);
        ct__error(CT_ERR_OOM, "datapipe: out of memory in a background thread");
        return -1;
    }
    dp_entry *e = &r->q[r->head];
    int kind = e->kind;
    if (kind == 1) {
        *out = e->item;
        e->item = NULL;
        r->head++;
        r->count--;
        pthread_cond_broadcast(&r->cv);
    } else if (kind < 0) { /* sticky: stays at the head */
        int64_t idx = r->produced * r->stride + r->offset;
        if (r->worker_id >= 0)
            ct__error(e->code, "dataloader2: worker %d, item %" PRId64 ": %s", r->worker_id, idx,
                      e->msg ? e->msg : "error");
        else
            ct__error(e->code, "%s", e->msg ? e->msg : "datapipe prefetch: error");
    }
    pthread_mutex_unlock(&r->mu);
    return kind;
}

static void runner_save(dp_runner *r, dp_wbuf *w) {
    runner_stop(r);
    dp_w_u64(w, (uint64_t)r->produced);
    dp_w_u64(w, (uint64_t)r->done);
    dp_w_u64(w, (uint64_t)r->count);
    for (int64_t k = 0; k < r->count; k++) {
        dp_entry *e = &r->q[r->head + k];
        dp_w_u64(w, (uint64_t)(int64_t)e->kind);
        if (e->kind == 1) dp_w_item(w, e->item);
        if (e->kind < 0) {
            const char *m = e->msg ? e->msg : "";
            dp_w_u64(w, (uint64_t)e->code);
            dp_w_u64(w, strlen(m));
            dp_w_bytes(w, m, strlen(m));
        }
    }
}

static ct_status runner_restore(dp_runner *r, dp_rbuf *rb) {
    runner_clear(r);
    int64_t produced, cnt;
    uint64_t done;
    ct_status st;
    if ((st = dp_r_i64(rb, &produced)) || (st = dp_r_u64(rb, &done)) || (st = dp_r_i64(rb, &cnt))) return st;
    if (produced < 0 || done > 1 || cnt < 0 || (uint64_t)cnt > rb->n - rb->pos)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: bad background queue header at byte %zu", rb->pos);
    for (int64_t k = 0; k < cnt; k++) {
        dp_entry e = {0};
        int64_t kind;
        if ((st = dp_r_i64(rb, &kind))) return st;
        if (kind < -1 || kind > 1)
            return ct__error_status(CT_ERR_FORMAT, "datapipe state: bad queue entry kind %" PRId64, kind);
        e.kind = (int)kind;
        if (kind == 1) {
            if ((st = dp_r_item(rb, &e.item))) return st;
            if (!e.item) return ct__error_status(CT_ERR_FORMAT, "datapipe state: None in a queue");
        } else if (kind < 0) {
            uint64_t code, ln;
            if ((st = dp_r_u64(rb, &code)) || (st = dp_r_u64(rb, &ln))) return st;
            if (ln > 4096 || ln > rb->n - rb->pos || code == 0 || code > CT_ERR_AUTOGRAD)
                return ct__error_status(CT_ERR_FORMAT, "datapipe state: bad queued error at byte %zu", rb->pos);
            e.code = (ct_status)code;
            e.msg = malloc((size_t)ln + 1);
            if (!e.msg) return ct__error_status(CT_ERR_OOM, "datapipe state: out of memory");
            memcpy(e.msg, rb->p + rb->pos, (size_t)ln);
            e.msg[ln] = 0;
            rb->pos += (size_t)ln;
        }
        if (q_push(r, e)) {
            entry_free(&e);
            return ct__error_status(CT_ERR_OOM, "datapipe state: out of memory");
        }
    }
    r->produced = produced;
    r->done = (int)done;
    if (r->count > 0 && r->q[r->head + r->count - 1].kind <= 0) r->done = 1;
    return CT_OK;
}

/* ======================================================================
 * prefetch: one runner over src[0] (not owned by the runner)
 * ====================================================================== */
typedef struct { dp_runner r; int64_t size; } pf_self;
static int pf_next(dp_node *n, ct_pipe_item **out) { SELF(pf_self); return runner_pop(&s->r, out); }
static void pf_quiesce(dp_node *n) { SELF(pf_self); runner_stop(&s->r); }
static void pf_reset(dp_node *n) { SELF(pf_self); runner_clear(&s->r); }
static void pf_save(dp_node *n, dp_wbuf *w) { SELF(pf_self); runner_save(&s->r, w); }
static ct_status pf_restore(dp_node *n, dp_rbuf *r) { SELF(pf_self); return runner_restore(&s->r, r); }
static void pf_free(dp_node *n) {
    SELF(pf_self);
    if (!s) return;
    if (s->r.pipe) runner_destroy(&s->r, 0);
    free(s);
}
static ct_status pf_clone(dp_node *n, dp_node *c) {
    SELF(pf_self);
    pf_self *d = calloc(1, sizeof *d);
    if (!d) return ct__error_status(CT_ERR_OOM, "datapipe prefetch: out of memory");
    if (runner_init(&d->r, ((ct_datapipe *)c)->src[0], -1, 1, 0, s->size)) {
        free(d);
        return ct_last_error_code();
    }
    d->size = s->size;
    ((ct_datapipe *)c)->self = d;
    return CT_OK;
}
static const dp_vt pf_vt = {"prefetch", pf_next, pf_reset, pf_save, pf_restore, pf_clone, pf_free, pf_quiesce, 0, 0};

ct_datapipe *ct_datapipe_prefetch(ct_datapipe *src, int64_t buffer_size) {
    if (!src) return NULL;
    if (buffer_size < 1 || buffer_size > (1 << 20)) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_prefetch: buffer_size must be in [1, 2^20], got %" PRId64, buffer_size);
    }
    pf_self *s = calloc(1, sizeof *s);
    if (!s || runner_init(&s->r, src, -1, 1, 0, buffer_size)) {
        free(s);
        dp_free(src);
        return ct_last_error_code() ? NULL : ct__error(CT_ERR_OOM, "datapipe_prefetch: out of memory");
    }
    s->size = buffer_size;
    return dp_new(&pf_vt, s, &src, 1);
}

/* ======================================================================
 * merge: W runners over owned worker copies, round-robin
 * ====================================================================== */
typedef struct { dp_runner *rs; int w; int64_t turn; } merge_self;
static int merge_next(dp_node *n, ct_pipe_item **out) {
    SELF(merge_self);
    int r = runner_pop(&s->rs[s->turn], out);
    if (r == 1) s->turn = (s->turn + 1) % s->w;
    return r;
}
static void merge_quiesce(dp_node *n) {
    SELF(merge_self);
    for (int k = 0; k < s->w; k++) runner_stop(&s->rs[k]);
}
static void merge_reset(dp_node *n) {
    SELF(merge_self);
    if (!s->rs) return;
    for (int k = 0; k < s->w; k++) {
        runner_clear(&s->rs[k]);
        dp_reset(s->rs[k].pipe);
    }
    s->turn = 0;
}
static void merge_save(dp_node *n, dp_wbuf *w) {
    SELF(merge_self);
    dp_w_u64(w, (uint64_t)s->w);
    dp_w_u64(w, (uint64_t)s->turn);
    for (int k = 0; k < s->w; k++) {
        runner_save(&s->rs[k], w);
        dp_save(s->rs[k].pipe, w);
    }
}
static ct_status merge_restore(dp_node *n, dp_rbuf *r) {
    SELF(merge_self);
    uint64_t w, turn;
    ct_status st;
    if ((st = dp_r_u64(r, &w)) || (st = dp_r_u64(r, &turn))) return st;
    if (w != (uint64_t)s->w || turn >= w)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: saved with %" PRIu64 " workers (turn %" PRIu64
                                "), this DataLoader2 has %d", w, turn, s->w);
    s->turn = (int64_t)turn;
    for (int k = 0; k < s->w; k++)
        if ((st = runner_restore(&s->rs[k], r)) || (st = dp_restore(s->rs[k].pipe, r))) return st;
    return CT_OK;
}
static void merge_free(dp_node *n) {
    SELF(merge_self);
    if (!s) return;
    for (int k = 0; s->rs && k < s->w; k++)
        if (s->rs[k].pipe) runner_destroy(&s->rs[k], 1);
    free(s->rs);
    free(s);
}
static const dp_vt merge_vt = {"dataloader2_workers", merge_next, merge_reset, merge_save, merge_restore,
                               NULL, merge_free, merge_quiesce, 0, 0};

void dp_merge_visit_hidden(ct_datapipe *p, void (*fn)(ct_datapipe *, void *), void *ctx, size_t ctx_size) {
    if (p->vt != &merge_vt) return;
    merge_self *s = p->self;
    void *snap = malloc(ctx_size ? ctx_size : 1);
    if (!snap) return;
    memcpy(snap, ctx, ctx_size);
    for (int k = 0; k < s->w; k++) {
        memcpy(ctx, snap, ctx_size); /* every copy sees the same context (same seeds) */
        dp_visit(s->rs[k].pipe, fn, ctx, ctx_size);
    }
    free(snap);
}

/* ======================================================================
 * DataLoader2
 * ====================================================================== */
struct ct_dataloader2 {
    ct_datapipe *root;     /* what next() runs */
    ct_datapipe *detached; /* the subtree the workers copied (owned, unused) */
};

extern const dp_vt dp_sharding_filter_vt;

/* depth-first search for the first sharding_filter; fills the path */
static int find_filter(ct_datapipe *p, ct_datapipe **path, int *idx, int depth) {
    if (depth >= 256) return -1;
    path[depth] = p;
    if (p->is_sharding_filter) return depth;
    for (int k = 0; k < p->nsrc; k++) {
        idx[depth] = k;
        int d = find_filter(p->src[k], path, idx, depth + 1);
        if (d >= 0) return d;
    }
    return -1;
}

static ct_datapipe *first_filter(ct_datapipe *p) {
    if (p->is_sharding_filter) return p;
    for (int k = 0; k < p->nsrc; k++) {
        ct_datapipe *f = first_filter(p->src[k]);
        if (f) return f;
    }
    return NULL;
}

ct_dataloader2 *ct_dataloader2_new_v2(ct_datapipe *pipe, int num_workers, int prefetch_factor) {
    if (!pipe) return NULL;
    if (num_workers < 0 || num_workers > 256 || prefetch_factor < 1 || prefetch_factor > (1 << 20)) {
        dp_free(pipe);
        return ct__error(CT_ERR_ARG, "dataloader2_new: num_workers %d must be in [0, 256] and prefetch_factor "
                         "%d in [1, 2^20]", num_workers, prefetch_factor);
    }
    ct_dataloader2 *dl = calloc(1, sizeof *dl);
    if (!dl) {
        dp_free(pipe);
        return ct__error(CT_ERR_OOM, "dataloader2_new: out of memory");
    }
    if (num_workers == 0) {
        dl->root = pipe;
        dp_reset(pipe);
        return dl;
    }
    /* the split point T: the sharding_filter and the 1:1 stages right above it */
    ct_datapipe *path[257];
    int idx[257];
    int depth = find_filter(pipe, path, idx, 0);
    int top = depth;
    if (depth >= 0)
        while (top > 0 && path[top - 1]->vt->one_to_one && path[top - 1]->nsrc == 1) top--;
    ct_datapipe *T = depth >= 0 ? path[top] : pipe;

    merge_self *ms = calloc(1, sizeof *ms);
    dp_runner *rs = calloc((size_t)num_workers, sizeof *rs);
    ct_datapipe *merge = NULL;
    if (!ms || !rs) {
        free(ms);
        free(rs);
        ct__error(CT_ERR_OOM, "dataloader2_new: out of memory");
        goto fail;
    }
    ms->rs = rs;
    ms->w = num_workers;
    for (int w = 0; w < num_workers; w++) {
        ct_datapipe *c = dp_clone(T);
        if (c && depth < 0) c = ct_datapipe_sharding_filter(c); /* no filter: shard at the root */
        ct_datapipe *f = c ? first_filter(c) : NULL;
        if (c && f) {
            f->num_shards = num_workers;
            f->shard_id = w;
        }
        if (!c || runner_init(&rs[w], c, w, num_workers, w, prefetch_factor)) {
            dp_free(c);
            for (int q = 0; q < w; q++) runner_destroy(&rs[q], 1);
            free(rs);
            free(ms);
            goto fail;
        }
    }
    merge = dp_new(&merge_vt, ms, NULL, 0);
    if (!merge) goto fail_noms;
    if (T == pipe) {
        dl->root = merge;
        dl->detached = pipe;
    } else {
        ct_datapipe *parent = path[top - 1];
        parent->src[idx[top - 1]] = merge;
        dl->root = pipe;
        dl->detached = T;
    }
    dp_reset(dl->root);
    return dl;
fail:
fail_noms:
    dp_free(pipe);
    free(dl);
    return NULL;
}

ct_dataloader2 *ct_dataloader2_new(ct_datapipe *pipe, int num_workers) {
    return ct_dataloader2_new_v2(pipe, num_workers, 2);
}

int ct_dataloader2_next(ct_dataloader2 *dl, ct_pipe_item **out) {
    if (!dl) {
        if (out) *out = NULL;
        if (ct_last_error_code() == CT_OK) ct__error(CT_ERR_NULL, "dataloader2_next: loader is NULL");
        return -1;
    }
    return ct_datapipe_next(dl->root, out);
}
void ct_dataloader2_set_seed(ct_dataloader2 *dl, uint64_t seed) {
    if (dl) ct_datapipe_set_seed(dl->root, seed);
}
void ct_dataloader2_set_epoch(ct_dataloader2 *dl, int64_t epoch) {
    if (dl) ct_datapipe_set_epoch(dl->root, epoch);
}
void ct_dataloader2_reset(ct_dataloader2 *dl) {
    if (dl) dp_reset(dl->root);
}
ct_status ct_dataloader2_state_save(ct_dataloader2 *dl, void **blob, size_t *len) {
    if (!dl) return ct__error_status(CT_ERR_NULL, "dataloader2_state_save: loader is NULL");
    return ct_datapipe_state_save(dl->root, blob, len);
}
ct_status ct_dataloader2_state_restore(ct_dataloader2 *dl, const void *blob, size_t len) {
    if (!dl) return ct__error_status(CT_ERR_NULL, "dataloader2_state_restore: loader is NULL");
    return ct_datapipe_state_restore(dl->root, blob, len);
}
void ct_dataloader2_free(ct_dataloader2 *dl) {
    if (!dl) return;
    dp_free(dl->root);
    dp_free(dl->detached);
    free(dl);
}
