/* datapipe_impl.h -- private: the DataPipe node, its vtable, item
 * internals, the state-blob writer/reader and the background runner shared
 * by prefetch and DataLoader2.  Never included by public headers. */
#ifndef CT_DATAPIPE_IMPL_H
#define CT_DATAPIPE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../ops/op_table.h"
#include "ctorch/data.h"

/* ---- items ------------------------------------------------------------- */
struct ct_pipe_item {
    atomic_long refcount;
    ct_pipe_item_kind kind;
    int64_t i;            /* INT */
    char *s;              /* STR: NUL-terminated, s_len bytes before the NUL */
    size_t s_len;
    ct_tensor *t;         /* TENSOR (one reference) */
    ct_sample *sample;    /* SAMPLE (owned) */
    ct_pipe_item **xs;    /* LIST / TUPLE (one reference each) */
    int64_t n, cap;
};

/* ---- state blobs: a growable little-endian writer and a bounded reader -- */
typedef struct dp_wbuf {
    uint8_t *p;
    size_t n, cap;
    int failed;
} dp_wbuf;
typedef struct dp_rbuf {
    const uint8_t *p;
    size_t n, pos;
} dp_rbuf;

void dp_w_bytes(dp_wbuf *w, const void *p, size_t n);
void dp_w_u64(dp_wbuf *w, uint64_t v);
void dp_w_item(dp_wbuf *w, const ct_pipe_item *x); /* x may be NULL ("none") */
/* Readers return CT_OK or record a CT_ERR_FORMAT error naming the offset. */
ct_status dp_r_bytes(dp_rbuf *r, void *p, size_t n);
ct_status dp_r_u64(dp_rbuf *r, uint64_t *v);
ct_status dp_r_i64(dp_rbuf *r, int64_t *v);
/* *out is a new item or NULL ("none"). */
ct_status dp_r_item(dp_rbuf *r, ct_pipe_item **out);

/* ---- nodes --------------------------------------------------------------- */
typedef struct ct_datapipe dp_node;
typedef struct dp_vt {
    const char *name;  /* "shuffle", ... -- also the tag in state blobs */
    /* 1: *out is a new item, 0: exhausted, -1: error recorded */
    int (*next)(dp_node *n, ct_pipe_item **out);
    /* back to the start of the epoch (sources are reset by the framework
     * before this is called); may be NULL */
    void (*reset)(dp_node *n);
    /* this node's own position (sources are handled by the framework) */
    void (*save)(dp_node *n, dp_wbuf *w);
    ct_status (*restore)(dp_node *n, dp_rbuf *r);
    /* copies parameters (not the position) into c, whose sources are set */
    ct_status (*clone)(dp_node *n, dp_node *c);
    void (*free)(dp_node *n);           /* frees n->self (not the sources) */
    /* called before the framework saves/resets/frees the sources: stops
     * background threads that use them (prefetch, workers); may be NULL */
    void (*quiesce)(dp_node *n);
    int one_to_one;     /* 1 item in -> 1 item out: may run inside workers */
    int random;         /* takes a seed */
} dp_vt;

struct ct_datapipe {
    const dp_vt *vt;
    void *self;
    ct_datapipe **src;
    int nsrc;
    uint64_t seed;      /* random stages */
    int64_t epoch;
    /* sharding (shard / sharding_filter stages) */
    int64_t num_shards, shard_id;
    int is_sharding_filter;
};

ct_datapipe *dp_new(const dp_vt *vt, void *self, ct_datapipe **src, int nsrc);
/* Frees the node and its sources. */
void dp_free(ct_datapipe *p);
/* Internal next: no scope handling. */
int dp_next(ct_datapipe *p, ct_pipe_item **out);
void dp_reset(ct_datapipe *p);
void dp_save(ct_datapipe *p, dp_wbuf *w);
ct_status dp_restore(ct_datapipe *p, dp_rbuf *r);
ct_datapipe *dp_clone(ct_datapipe *p);
/* Pre-order visit (threads stopped first); hidden worker copies each see
 * the same snapshot of ctx (ctx_size bytes). */
void dp_visit(ct_datapipe *p, void (*fn)(ct_datapipe *, void *), void *ctx, size_t ctx_size);
void dp_merge_visit_hidden(ct_datapipe *p, void (*fn)(ct_datapipe *, void *), void *ctx, size_t ctx_size);
/* Runs fn with the error cleared and a scope open; the error of a failing
 * callback is re-recorded as "stage: item k: <message>". */
void dp_callback_error(const char *stage, int64_t index);

/* ---- random numbers: splitmix64, one 64-bit state ------------------------ */
static inline uint64_t dp_rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* uniform in [0, n) */
static inline uint64_t dp_rng_below(uint64_t *s, uint64_t n) {
    return (uint64_t)(((unsigned __int128)dp_rng_next(s) * n) >> 64);
}
static inline uint64_t dp_rng_seed(uint64_t seed, int64_t epoch) {
    uint64_t s = seed ^ 0x5851f42d4c957f2dULL;
    dp_rng_next(&s);
    s ^= (uint64_t)epoch * 0xd1342543de82ef95ULL;
    dp_rng_next(&s);
    return s;
}

/* ---- background runner: one thread pulling a pipe into a queue ----------- */
typedef struct dp_entry {
    int kind;              /* 1 item, 0 end, -1 error */
    ct_pipe_item *item;
    ct_status code;
    char *msg;
} dp_entry;

typedef struct dp_runner {
    ct_datapipe *pipe;     /* owned */
    int worker_id;         /* for messages; -1: prefetch */
    int64_t stride, offset;/* produced item k has index k*stride+offset */
    int64_t produced;
    pthread_t th;
    int running;
    int stop;              /* guarded by mu */
    int done;              /* the thread pushed end or error */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dp_entry *q;           /* FIFO, q[head..head+count) in a plain array */
    int64_t head, count, cap;
    int64_t limit;         /* soft bound on count while running */
} dp_runner;

#endif
