/* dnnl_impl.h -- private: what the oneDNN paths share (conv_dnnl.c owns it;
 * matmul_dnnl.c uses it).  Only files built with CT_HAVE_DNNL include this. */
#ifndef CT_DNNL_IMPL_H
#define CT_DNNL_IMPL_H
#include <dnnl.h>

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
 * ct__dnnl_threads_end must restore (0: nothing).  *threads gets the count,
 * which is part of every primitive's cache key. */
int ct__dnnl_threads_begin(double flops, int nthreads, int *threads);
void ct__dnnl_threads_end(int saved);
#endif
