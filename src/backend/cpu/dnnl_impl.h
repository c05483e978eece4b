/* dnnl_impl.h -- private: what the oneDNN paths share (conv_dnnl.c owns it;
 * matmul_dnnl.c uses it).  Only files built with CT_HAVE_DNNL include this. */
#ifndef CT_DNNL_IMPL_H
#define CT_DNNL_IMPL_H
#include <dnnl.h>
#include <stddef.h>
#include <stdint.h>

/* The process's oneDNN CPU engine and stream, made at the first call.
 * Takes the lock that guards them, the primitive caches and every
 * execution (primitives run with OpenMP inside); returns 1 with *eng and
 * *stream set, 0 when no engine could be made.  ct__dnnl_leave() releases
 * the lock in both cases. */
int ct__dnnl_enter(dnnl_engine_t *eng, dnnl_stream_t *stream);
void ct__dnnl_leave(void);

/* The OpenMP thread count a primitive of `flops` is created and run with:
 * at most nthreads (<= 0: the current count), and 1 when the work is too
 * small to pay for waking the team (ct__par_too_small, under the passive
 * wait policy).  Sets the calling thread's ICV; returns what
 * ct__blas_guard_end (blas.h) must restore (0: nothing).  *threads gets the
 * count, which is part of every primitive's cache key. */
int ct__dnnl_threads_begin(double flops, int nthreads, int *threads);

/* A routing switch read from the environment variable var at first use:
 * *slot starts at -2; then -1 (the rule; unset or anything else), 0 ("0":
 * never) or 1 ("1": always). */
int ct__dnnl_env_mode(int *slot, const char *var);
/* The head every entry of a primitive cache starts with (conv_dnnl.c,
 * matmul_dnnl.c); the entry's key follows it at koff. */
typedef struct ct__dnnl_head {
    int used;       /* 0 empty, 1 ready, -1 oneDNN refused the key (the own kernels run) */
    uint64_t stamp; /* its last use: the least recently used one is replaced */
} ct__dnnl_head;

/* The entry of key (ksz bytes) in a cache of n entries of esz bytes: a
 * 4-way set chosen by the key's hash.  Not there, the set's empty slot or
 * else its least recently used entry is emptied (release: frees what an
 * entry holds and zeroes it), given the key and build(entry, ctx)'s
 * verdict (0: ready); a refusal keeps only its key.  Under the lock. */
void *ct__dnnl_cache_get(void *tab, int n, size_t esz, size_t koff, const void *key, size_t ksz,
                         int (*build)(void *e, void *ctx), void (*release)(void *e), void *ctx);
#endif
