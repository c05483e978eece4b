/* derived.h (cpu) -- private: the slots of the caches that hold data
 * derived from a storage's contents (conv_dnnl.c: weights reordered into
 * oneDNN's layout; linalg.c: weights packed for ctorch's GEMM).
 *
 * Each cache's entry type starts with a ct_dslot: the storage's uid (0: an
 * empty slot), its version and exposed count when the data was derived (the
 * copy is valid while both are unchanged: in-place ops bump the version,
 * ct_data_ptr the exposed count), and the buffer (ct__malloc_aligned,
 * bytes; NULL: noted, nothing derived yet).  A slot that is filled marks
 * its storage derived and registers the cache's forget function, so a
 * freed storage drops its copies.  The cache's own lock guards its slots;
 * *held is the cache's total of bytes. */
#ifndef CT_CPU_DERIVED_H
#define CT_CPU_DERIVED_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "../../core/tensor_impl.h"

typedef struct ct_dslot {
    uint64_t uid;
    long long version, exposed;
    void *buf;
    size_t bytes;
} ct_dslot;

/* slot d (uid and stamps) set from storage s, nothing held yet */
static inline void ct__dslot_note(ct_dslot *d, ct_storage *s, void (*forget)(uint64_t uid)) {
    d->uid = s->uid;
    d->version = atomic_load(&s->version);
    d->exposed = atomic_load(&s->exposed);
    d->buf = NULL;
    d->bytes = 0;
    atomic_store(&s->derived, 1);
    ct__storage_free_hook_add(forget);
}

/* whether d's data was derived from s's current contents */
static inline bool ct__dslot_fresh(const ct_dslot *d, ct_storage *s) {
    return d->uid == s->uid && d->version == atomic_load(&s->version) &&
           d->exposed == atomic_load(&s->exposed);
}

/* d holds buf (bytes) from now on */
static inline void ct__dslot_hold(ct_dslot *d, void *buf, size_t bytes, size_t *held) {
    d->buf = buf;
    d->bytes = bytes;
    *held += bytes;
}

/* the entry starting with d (size bytes) emptied, its buffer freed */
static inline void ct__dslot_drop(ct_dslot *d, size_t size, size_t *held) {
    if (d->buf) ct__free_aligned(d->buf, (void *)(uintptr_t)d->bytes);
    *held -= d->bytes;
    memset(d, 0, size);
}

/* every entry of slots[0..n) (each size bytes) derived from storage uid dropped */
static inline void ct__dslots_forget(void *slots, int n, size_t size, uint64_t uid, size_t *held) {
    for (int i = 0; i < n; i++) {
        ct_dslot *d = (ct_dslot *)(void *)((char *)slots + (size_t)i * size);
        if (d->uid == uid) ct__dslot_drop(d, size, held);
    }
}

/* the same under the cache's lock (a storage free hook's body) */
static inline void ct__dslots_forget_locked(pthread_mutex_t *mu, void *slots, int n, size_t size, uint64_t uid,
                                            size_t *held) {
    pthread_mutex_lock(mu);
    ct__dslots_forget(slots, n, size, uid, held);
    pthread_mutex_unlock(mu);
}

/* a cache's counter (hits) read under its lock */
static inline long long ct__dcache_count(pthread_mutex_t *mu, const long long *count) {
    pthread_mutex_lock(mu);
    long long n = *count;
    pthread_mutex_unlock(mu);
    return n;
}

#endif
