/* dataloader.c -- the DataLoader: batches in sampler order from worker
 * threads.
 *
 * Design: worker w makes batches w, w + W, w + 2W, ... (map-style) or
 * batches of its own iterator (iterable) and pushes them, in order, into
 * its own ring of prefetch_factor slots.  next() takes batch b from the
 * ring of worker b % W (map-style) or round-robin over the workers that are
 * not exhausted (iterable), so the order never depends on timing.  One
 * mutex guards all shared state; `work` wakes workers (new epoch, free
 * slot, abort, shutdown), `ready` wakes the consumer (a result, a worker
 * going idle).  A batch crosses threads as a ct_sample, which holds
 * references to its tensors; the worker's scope is closed before it is
 * published. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"

/* ---- thread-local seed and worker info ----------------------------------- */
static _Thread_local uint64_t tl_seed;
static _Thread_local int tl_worker_id = -1, tl_num_workers = 0;

uint64_t ct_data_current_seed(void) { return tl_seed; }
void ct_data_set_current_seed(uint64_t seed) { tl_seed = seed; }
bool ct_data_worker_info(int *id, int *num) {
    bool in = tl_worker_id >= 0;
    if (id) *id = in ? tl_worker_id : 0;
    if (num) *num = in ? tl_num_workers : 1;
    return in;
}
uint64_t ct_data_sample_seed(uint64_t seed, int64_t epoch, int64_t index) {
    return ct_data_mix(ct_data_mix(seed, (uint64_t)epoch), (uint64_t)index);
}

/* ---- default collate ----------------------------------------------------- */
ct_status ct_default_collate(ct_sample *const *samples, int n, ct_sample *out, void *user) {
    (void)user;
    if (!samples || !out) return ct__error_status(CT_ERR_NULL, "default_collate: NULL argument");
    if (n < 1) return ct__error_status(CT_ERR_ARG, "default_collate: no samples");
    ct_tensor *stack_buf[64];
    ct_tensor **ts = n <= 64 ? stack_buf : malloc(sizeof *ts * (size_t)n);
    if (!ts) return ct__error_status(CT_ERR_OOM, "default_collate: out of memory");
    ct_status st = CT_OK;
    ct_scope s = ct_scope_begin();
    int nk = ct_sample_count(samples[0]);
    for (int k = 0; k < nk && !st; k++) {
        const char *name = ct_sample_name(samples[0], k);
        for (int i = 0; i < n && !st; i++) {
            ts[i] = ct_sample_get(samples[i], name);
            if (!ts[i])
                st = ct__error_status(CT_ERR_ARG, "default_collate: sample %d of the batch has no '%s'", i, name);
            else if (ct_get_dtype(ts[i]) != ct_get_dtype(ts[0]) || ct_ndim(ts[i]) != ct_ndim(ts[0]) ||
                     memcmp(ct_sizes(ts[i]), ct_sizes(ts[0]), sizeof(int64_t) * (size_t)ct_ndim(ts[0])) != 0) {
                char a[64];
                snprintf(a, sizeof a, "%s", ct__tshape(ts[0]));
                st = ct__error_status(CT_ERR_SHAPE, "default_collate: '%s' of sample %d is %s %s, sample 0 has %s %s",
                                      name, i, ct_dtype_name(ct_get_dtype(ts[i])), ct__tshape(ts[i]),
                                      ct_dtype_name(ct_get_dtype(ts[0])), a);
            }
        }
        if (!st) st = ct_sample_set(out, name, ct_stack(ts, n, 0));
    }
    ct_scope_end(s);
    if (ts != stack_buf) free(ts);
    return st;
}

/* ---- the loader ---------------------------------------------------------- */
typedef struct {
    ct_sample *batch; /* NULL: an error */
    ct_status code;
    char *msg;
} slot;

typedef struct worker {
    struct ct_dataloader *dl;
    pthread_t th;
    int id;
    slot *ring;
    int head, count;
    bool done;      /* no more results this epoch (after those in the ring) */
    bool busy;      /* inside an epoch's work */
    bool started;
} worker;

struct ct_dataloader {
    ct_dataset *ds;
    ct_dataloader_opts o;
    bool iterable;
    ct_sampler *bsamp; /* the batch sampler (map-style) */
    pthread_mutex_t mu;
    pthread_cond_t work, ready;
    worker *w;
    int nw, pf;
    bool have_workers, shutdown, abort_epoch;
    uint64_t gen;      /* bumped by each begin_epoch */
    uint64_t base_seed;
    /* the epoch */
    bool begun, finished, failed;
    int64_t epoch;
    int64_t *idx, *off, nb;
    int64_t consumed;  /* map-style: next batch number */
    int rr;            /* iterable: next worker to take from */
    void *iter0;       /* iterable without workers */
    int64_t iter0_count;
    bool iter0_done;
};

static void slot_clear(slot *s) {
    ct_sample_free(s->batch);
    free(s->msg);
    memset(s, 0, sizeof *s);
}

/* Loads batch b (map-style) on this thread.  On failure returns NULL with
 * the error recorded, prefixed with who and which sample. */
static ct_sample *make_batch(ct_dataloader *dl, int64_t b, int wid) {
    int64_t a = dl->off[b], e = dl->off[b + 1], n = e - a;
    ct_sample **ss = calloc((size_t)n, sizeof *ss);
    ct_sample *out = ct_sample_new();
    if (!ss || !out) {
        free(ss);
        ct_sample_free(out);
        ct__error(CT_ERR_OOM, "DataLoader: out of memory");
        return NULL;
    }
    ct_scope sc = ct_scope_begin();
    ct_status st = CT_OK;
    int64_t bad = -1;
    for (int64_t i = 0; i < n && !st; i++) {
        int64_t index = dl->idx[a + i];
        ss[i] = ct_sample_new();
        if (!ss[i]) { st = CT_ERR_OOM; bad = index; break; }
        ct_clear_error();
        tl_seed = ct_data_sample_seed(dl->o.seed, dl->epoch, index);
        st = ct_dataset_get(dl->ds, index, ss[i]);
        tl_seed = 0;
        if (st) bad = index;
    }
    if (!st) {
        ct_clear_error();
        st = dl->o.collate ? dl->o.collate(ss, (int)n, out, dl->o.collate_user)
                           : ct_default_collate(ss, (int)n, out, NULL);
        if (st && ct_last_error_code() == CT_OK) ct__error(st, "the collate function failed");
        if (st) bad = -2;
    }
    ct_scope_end(sc);
    for (int64_t i = 0; i < n; i++) ct_sample_free(ss[i]);
    free(ss);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_status code = ct_last_error_code() ? ct_last_error_code() : st;
        char who[64];
        if (wid >= 0) snprintf(who, sizeof who, "DataLoader worker %d", wid);
        else snprintf(who, sizeof who, "DataLoader");
        if (bad >= 0) ct__error(code, "%s: sample %lld: %s", who, (long long)bad, msg);
        else ct__error(code, "%s: batch %lld: %s", who, (long long)b, msg);
        ct_sample_free(out);
        return NULL;
    }
    return out;
}

/* Iterable: up to batch_size samples of iterator `it`.  Returns 1 with a
 * batch, 0 exhausted, -1 error (recorded). */
static int make_iter_batch(ct_dataloader *dl, void *it, int wid, int64_t *count, ct_sample **res) {
    int64_t bs = dl->o.batch_size;
    ct_sample **ss = calloc((size_t)bs, sizeof *ss);
    if (!ss) { ct__error(CT_ERR_OOM, "DataLoader: out of memory"); return -1; }
    int64_t n = 0;
    int r = 1;
    ct_scope sc = ct_scope_begin();
    const ct_dataset_vtable *vt = ct__dataset_vt(dl->ds);
    void *self = ct_dataset_self(dl->ds);
    while (n < bs) {
        ss[n] = ct_sample_new();
        if (!ss[n]) { r = -1; break; }
        ct_clear_error();
        int64_t k = (*count)++;
        tl_seed = ct_data_sample_seed(dl->o.seed, dl->epoch, ((int64_t)(wid < 0 ? 0 : wid) << 40) | k);
        r = vt->iter_next(self, it, ss[n]);
        tl_seed = 0;
        if (r != 1) {
            if (r < 0) {
                char msg[1024];
                snprintf(msg, sizeof msg, "%s", ct_last_error()[0] ? ct_last_error() : "iter_next failed");
                ct_status code = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
                if (wid >= 0) ct__error(code, "DataLoader worker %d: sample %lld of its iterator: %s", wid, (long long)k, msg);
                else ct__error(code, "DataLoader: sample %lld of the iterator: %s", (long long)k, msg);
            }
            ct_sample_free(ss[n]);
            ss[n] = NULL;
            break;
        }
        n++;
        r = 1;
    }
    int ret;
    if (r < 0) ret = -1;
    else if (n == 0 || (n < bs && dl->o.drop_last)) ret = 0;
    else {
        ct_sample *out = ct_sample_new();
        ct_clear_error();
        ct_status st = !out ? CT_ERR_OOM
                       : dl->o.collate ? dl->o.collate(ss, (int)n, out, dl->o.collate_user)
                                       : ct_default_collate(ss, (int)n, out, NULL);
        if (st) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", ct_last_error()[0] ? ct_last_error() : "the collate function failed");
            char who[64];
            if (wid >= 0) snprintf(who, sizeof who, "DataLoader worker %d", wid);
            else snprintf(who, sizeof who, "DataLoader");
            ct__error(ct_last_error_code() ? ct_last_error_code() : st, "%s: collate: %s", who, msg);
            ct_sample_free(out);
            ret = -1;
        } else {
            *res = out;
            ret = 1;
        }
    }
    ct_scope_end(sc);
    for (int64_t i = 0; i < n; i++) ct_sample_free(ss[i]);
    free(ss);
    return ret;
}

/* ---- worker threads ------------------------------------------------------- */
static void push_result(worker *w, ct_sample *batch) {
    slot *s = &w->ring[(w->head + w->count) % w->dl->pf];
    s->batch = batch;
    if (!batch) {
        s->code = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
        s->msg = strdup(ct_last_error());
    }
    w->count++;
}

static void *worker_main(void *arg) {
    worker *w = arg;
    ct_dataloader *dl = w->dl;
    tl_worker_id = w->id;
    tl_num_workers = dl->nw;
    if (dl->o.worker_init) {
        ct_scope s = ct_scope_begin();
        dl->o.worker_init(w->id, dl->base_seed + (uint64_t)w->id, dl->o.worker_init_user);
        ct_scope_end(s);
    }
    const ct_dataset_vtable *vt = ct__dataset_vt(dl->ds);
    void *self = ct_dataset_self(dl->ds);
    uint64_t my_gen = 0;
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        while (!dl->shutdown && (dl->gen == my_gen || dl->abort_epoch || !dl->begun))
            pthread_cond_wait(&dl->work, &dl->mu);
        if (dl->shutdown) break;
        my_gen = dl->gen;
        w->busy = true;
        void *it = NULL;
        int64_t count = 0;
        if (dl->iterable) {
            pthread_mutex_unlock(&dl->mu);
            ct_clear_error();
            it = vt->iter_begin(self, w->id, dl->nw);
            char msg[1024];
            ct_status code = CT_OK;
            if (!it && ct_last_error_code()) {
                snprintf(msg, sizeof msg, "%s", ct_last_error());
                code = ct_last_error_code();
                ct__error(code, "DataLoader worker %d: iter_begin: %s", w->id, msg);
            }
            pthread_mutex_lock(&dl->mu);
            if (code) {
                push_result(w, NULL);
                w->done = true;
                pthread_cond_broadcast(&dl->ready);
                goto epoch_end;
            }
            if (!it) { /* no iterator and no error: nothing to read */
                w->done = true;
                pthread_cond_broadcast(&dl->ready);
                goto epoch_end;
            }
        }
        int64_t next_b = w->id;
        for (;;) {
            while (!dl->shutdown && dl->gen == my_gen && !dl->abort_epoch && w->count >= dl->pf)
                pthread_cond_wait(&dl->work, &dl->mu);
            if (dl->shutdown || dl->gen != my_gen || dl->abort_epoch) break;
            if (!dl->iterable && next_b >= dl->nb) {
                w->done = true;
                pthread_cond_broadcast(&dl->ready);
                break;
            }
            int64_t b = next_b;
            next_b += dl->nw;
            pthread_mutex_unlock(&dl->mu);
            ct_sample *batch = NULL;
            int r;
            if (dl->iterable) {
                r = make_iter_batch(dl, it, w->id, &count, &batch);
            } else {
                batch = make_batch(dl, b, w->id);
                r = batch ? 1 : -1;
            }
            pthread_mutex_lock(&dl->mu);
            if (dl->shutdown || dl->gen != my_gen || dl->abort_epoch) {
                ct_sample_free(batch);
                break;
            }
            if (r == 0) {
                w->done = true;
                pthread_cond_broadcast(&dl->ready);
                break;
            }
            push_result(w, batch);
            pthread_cond_broadcast(&dl->ready);
            if (r < 0) {
                w->done = true;
                break;
            }
        }
    epoch_end:
        if (it) {
            pthread_mutex_unlock(&dl->mu);
            if (vt->iter_end) vt->iter_end(self, it);
            pthread_mutex_lock(&dl->mu);
        }
        w->busy = false;
        pthread_cond_broadcast(&dl->ready);
    }
    pthread_mutex_unlock(&dl->mu);
    ct_clear_error();
    return NULL;
}

static void clear_rings(ct_dataloader *dl) {
    for (int i = 0; i < dl->nw; i++) {
        worker *w = &dl->w[i];
        for (int k = 0; k < w->count; k++) slot_clear(&w->ring[(w->head + k) % dl->pf]);
        w->head = w->count = 0;
        w->done = false;
    }
}

/* Stops the current epoch's work: workers go idle; prefetched batches are
 * freed.  Called with the lock held. */
static void abort_epoch_locked(ct_dataloader *dl) {
    if (!dl->have_workers) return;
    dl->abort_epoch = true;
    pthread_cond_broadcast(&dl->work);
    for (;;) {
        bool busy = false;
        for (int i = 0; i < dl->nw; i++) busy |= dl->w[i].busy;
        if (!busy) break;
        pthread_cond_wait(&dl->ready, &dl->mu);
    }
    clear_rings(dl);
}

static void stop_workers(ct_dataloader *dl) {
    if (!dl->have_workers) return;
    pthread_mutex_lock(&dl->mu);
    dl->shutdown = true;
    pthread_cond_broadcast(&dl->work);
    pthread_mutex_unlock(&dl->mu);
    for (int i = 0; i < dl->nw; i++)
        if (dl->w[i].started) pthread_join(dl->w[i].th, NULL);
    pthread_mutex_lock(&dl->mu);
    for (int i = 0; i < dl->nw; i++) dl->w[i].started = dl->w[i].busy = false;
    clear_rings(dl);
    dl->shutdown = false;
    dl->have_workers = false;
    pthread_mutex_unlock(&dl->mu);
}

static ct_status start_workers(ct_dataloader *dl) {
    dl->base_seed = ct_data_mix(dl->o.seed, (uint64_t)dl->epoch);
    dl->have_workers = true;
    for (int i = 0; i < dl->nw; i++) {
        worker *w = &dl->w[i];
        w->dl = dl;
        w->id = i;
        if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
            stop_workers(dl);
            return ct__error_status(CT_ERR_RUNTIME, "DataLoader: cannot start worker thread %d", i);
        }
        w->started = true;
    }
    return CT_OK;
}

/* ---- public ----------------------------------------------------------------- */
ct_dataloader *ct_dataloader_new(ct_dataset *ds, const ct_dataloader_opts *opts) {
    if (!ds || !opts) return ct__error(CT_ERR_NULL, "dataloader_new: dataset or opts is NULL");
    ct_dataloader_opts o = *opts;
    if (o.num_workers < 0 || o.num_workers > 1024)
        return ct__error(CT_ERR_ARG, "dataloader_new: num_workers option should be in [0, 1024], got %d", o.num_workers);
    if (o.prefetch_factor <= 0) o.prefetch_factor = 2;
    bool iterable = ct_dataset_is_iterable(ds);
    if (o.batch_sampler) {
        if (o.batch_size > 1 || o.shuffle || o.sampler || o.drop_last)
            return ct__error(CT_ERR_ARG, "dataloader_new: batch_sampler option is mutually exclusive with "
                             "batch_size, shuffle, sampler, and drop_last");
        if (!ct_sampler_is_batch(o.batch_sampler))
            return ct__error(CT_ERR_ARG, "dataloader_new: batch_sampler is not a batch sampler (use ct_batch_sampler_new)");
    }
    if (o.batch_size <= 0) o.batch_size = 1;
    if (o.sampler && o.shuffle) return ct__error(CT_ERR_ARG, "dataloader_new: sampler option is mutually exclusive with shuffle");
    if (o.sampler && ct_sampler_is_batch(o.sampler))
        return ct__error(CT_ERR_ARG, "dataloader_new: sampler is a batch sampler (pass it as batch_sampler)");
    if (iterable && (o.sampler || o.batch_sampler || o.shuffle))
        return ct__error(CT_ERR_ARG, "dataloader_new: an iterable dataset takes no sampler, batch_sampler or shuffle");
    ct_dataloader *dl = calloc(1, sizeof *dl);
    if (!dl) return ct__error(CT_ERR_OOM, "dataloader_new: out of memory");
    dl->o = o;
    dl->iterable = iterable;
    dl->nw = o.num_workers;
    dl->pf = o.prefetch_factor;
    pthread_mutex_init(&dl->mu, NULL);
    pthread_cond_init(&dl->work, NULL);
    pthread_cond_init(&dl->ready, NULL);
    if (!iterable) {
        if (o.batch_sampler) {
            dl->bsamp = ct_sampler_retain(o.batch_sampler);
        } else {
            ct_sampler *base;
            if (o.sampler) base = ct_sampler_retain(o.sampler);
            else {
                int64_t n = ct_dataset_len(ds);
                base = n < 0 ? NULL : o.shuffle ? ct_random_sampler_new(n, false, -1, o.seed) : ct_sequential_sampler_new(n);
            }
            if (base) dl->bsamp = ct_batch_sampler_new(base, o.batch_size, o.drop_last);
            ct_sampler_release(base);
        }
        if (!dl->bsamp) { ct_dataloader_free(dl); return NULL; }
    }
    dl->o.sampler = dl->o.batch_sampler = NULL; /* held through bsamp */
    if (dl->nw) {
        dl->w = calloc((size_t)dl->nw, sizeof *dl->w);
        if (!dl->w) { ct_dataloader_free(dl); return ct__error(CT_ERR_OOM, "dataloader_new: out of memory"); }
        for (int i = 0; i < dl->nw; i++) {
            dl->w[i].ring = calloc((size_t)dl->pf, sizeof(slot));
            if (!dl->w[i].ring) { ct_dataloader_free(dl); return ct__error(CT_ERR_OOM, "dataloader_new: out of memory"); }
        }
    }
    dl->ds = ct_dataset_retain(ds);
    return dl;
}

static void end_iter0(ct_dataloader *dl) {
    if (dl->iter0) {
        const ct_dataset_vtable *vt = ct__dataset_vt(dl->ds);
        if (vt->iter_end) vt->iter_end(ct_dataset_self(dl->ds), dl->iter0);
        dl->iter0 = NULL;
    }
}

/* Ends the current epoch: non-persistent workers are joined, persistent
 * ones go idle; everything prefetched is freed. */
static void finish_epoch(ct_dataloader *dl) {
    pthread_mutex_lock(&dl->mu);
    dl->begun = false;
    pthread_mutex_unlock(&dl->mu);
    if (dl->have_workers) {
        if (dl->o.persistent_workers) {
            pthread_mutex_lock(&dl->mu);
            abort_epoch_locked(dl);
            dl->abort_epoch = false;
            dl->begun = false;
            pthread_mutex_unlock(&dl->mu);
        } else {
            stop_workers(dl);
        }
    }
    end_iter0(dl);
    free(dl->idx);
    free(dl->off);
    dl->idx = dl->off = NULL;
    dl->nb = 0;
    dl->finished = true;
}

void ct_dataloader_free(ct_dataloader *dl) {
    if (!dl) return;
    stop_workers(dl);
    if (dl->ds) end_iter0(dl);
    free(dl->idx);
    free(dl->off);
    if (dl->w)
        for (int i = 0; i < dl->nw; i++) free(dl->w[i].ring);
    free(dl->w);
    ct_sampler_release(dl->bsamp);
    ct_dataset_release(dl->ds);
    pthread_mutex_destroy(&dl->mu);
    pthread_cond_destroy(&dl->work);
    pthread_cond_destroy(&dl->ready);
    free(dl);
}

ct_status ct_dataloader_begin_epoch(ct_dataloader *dl, int64_t epoch) {
    if (!dl) return ct__error_status(CT_ERR_NULL, "dataloader_begin_epoch: dataloader is NULL");
    finish_epoch(dl);
    dl->finished = dl->failed = false;
    dl->epoch = epoch;
    dl->consumed = 0;
    dl->rr = 0;
    dl->iter0_count = 0;
    dl->iter0_done = false;
    if (!dl->iterable) {
        ct_sampler_set_epoch(dl->bsamp, epoch);
        dl->nb = ct_sampler_batches(dl->bsamp, &dl->idx, &dl->off);
        if (dl->nb < 0) { dl->nb = 0; dl->finished = true; return ct_last_error_code(); }
    } else if (dl->nw == 0) {
        const ct_dataset_vtable *vt = ct__dataset_vt(dl->ds);
        ct_clear_error();
        dl->iter0 = vt->iter_begin(ct_dataset_self(dl->ds), 0, 1);
        if (!dl->iter0 && ct_last_error_code()) { dl->finished = true; return ct_last_error_code(); }
    }
    if (dl->nw) {
        if (!dl->have_workers) {
            ct_status st = start_workers(dl);
            if (st) { dl->finished = true; return st; }
        }
        pthread_mutex_lock(&dl->mu);
        abort_epoch_locked(dl); /* no worker busy, rings empty */
        dl->abort_epoch = false;
        dl->begun = true;
        dl->gen++;
        pthread_cond_broadcast(&dl->work);
        pthread_mutex_unlock(&dl->mu);
    }
    if (!dl->nw) dl->begun = true;
    return CT_OK;
}

static int fail(ct_dataloader *dl) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_status code = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    finish_epoch(dl);
    dl->failed = true;
    ct__error(code, "%s", msg);
    return -1;
}

int ct_dataloader_next(ct_dataloader *dl, ct_sample **batch) {
    if (!dl || !batch) { ct__error(CT_ERR_NULL, "dataloader_next: NULL argument"); return -1; }
    *batch = NULL;
    if (!dl->begun && !dl->finished) {
        if (ct_dataloader_begin_epoch(dl, 0)) return -1;
    }
    if (dl->failed) {
        ct__error(CT_ERR_RUNTIME, "dataloader_next: the epoch stopped at an earlier error; call "
                  "ct_dataloader_begin_epoch");
        return -1;
    }
    if (dl->finished) return 0;
    if (dl->nw == 0) {
        if (!dl->iterable) {
            if (dl->consumed >= dl->nb) { finish_epoch(dl); return 0; }
            ct_sample *b = make_batch(dl, dl->consumed, -1);
            if (!b) return fail(dl);
            dl->consumed++;
            *batch = b;
            return 1;
        }
        if (dl->iter0_done || !dl->iter0) { finish_epoch(dl); return 0; }
        ct_sample *b = NULL;
        int r = make_iter_batch(dl, dl->iter0, -1, &dl->iter0_count, &b);
        if (r < 0) return fail(dl);
        if (r == 0) { dl->iter0_done = true; finish_epoch(dl); return 0; }
        *batch = b;
        return 1;
    }
    pthread_mutex_lock(&dl->mu);
    for (;;) {
        worker *w;
        if (!dl->iterable) {
            if (dl->consumed >= dl->nb) break;
            w = &dl->w[dl->consumed % dl->nw];
        } else {
            int k = 0;
            while (k < dl->nw && dl->w[dl->rr].done && dl->w[dl->rr].count == 0 && !dl->w[dl->rr].busy) {
                dl->rr = (dl->rr + 1) % dl->nw;
                k++;
            }
            if (k == dl->nw) break;
            w = &dl->w[dl->rr];
        }
        while (w->count == 0 && !(w->done && !w->busy)) pthread_cond_wait(&dl->ready, &dl->mu);
        if (w->count == 0) {
            if (!dl->iterable) break; /* cannot happen: worker w makes every batch b = w mod W */
            continue;                 /* exhausted: the next worker */
        }
        slot s = w->ring[w->head];
        memset(&w->ring[w->head], 0, sizeof(slot));
        w->head = (w->head + 1) % dl->pf;
        w->count--;
        pthread_cond_broadcast(&dl->work);
        pthread_mutex_unlock(&dl->mu);
        if (!s.batch) {
            ct__error(s.code, "%s", s.msg ? s.msg : "DataLoader: a worker failed");
            free(s.msg);
            return fail(dl);
        }
        dl->consumed++;
        if (dl->iterable) dl->rr = (dl->rr + 1) % dl->nw;
        *batch = s.batch;
        return 1;
    }
    pthread_mutex_unlock(&dl->mu);
    finish_epoch(dl);
    return 0;
}

int64_t ct_dataloader_len(ct_dataloader *dl) {
    if (!dl) { ct__error(CT_ERR_NULL, "dataloader_len: dataloader is NULL"); return -1; }
    if (dl->iterable) { ct__error(CT_ERR_ARG, "dataloader_len: the dataset is iterable (no length)"); return -1; }
    return ct_sampler_len(dl->bsamp);
}

uint64_t ct_dataloader_base_seed(const ct_dataloader *dl) { return dl ? dl->base_seed : 0; }
