/* caching_alloc.h -- private to the device backends: a caching allocator for
 * device memory, after PyTorch's CUDACachingAllocator, generic over devices.
 *
 * A backend gives it two functions: allocate a segment (one driver buffer:
 * cuMemAlloc, clCreateBuffer) and free one.  Segments are addressed by a
 * nonzero base address the backend chooses (a device pointer for CUDA, a
 * virtual address for OpenCL); blocks are ranges [addr, addr + size) inside
 * a segment, and ct__calloc_alloc returns a block's address.
 *
 * Sizes.  A request is rounded up to a multiple of 512 bytes.  Requests up
 * to 1 MiB come from the small pool, carved out of 2 MiB segments; larger
 * ones from the large pool: a request under 10 MiB takes a 20 MiB segment,
 * a bigger one a segment of its size rounded up to 2 MiB.  The best fit
 * (the smallest free block of the pool and stream that is large enough,
 * then the lowest address) is reused; when what is left of it is big enough
 * (>= 512 bytes in the small pool, > 1 MiB in the large) the block is split
 * and the rest stays free.  A freed block merges with its free neighbours
 * of the same segment.  Freed memory stays reserved (cached) until
 * ct__calloc_empty_cache releases the free whole segments to the driver.
 *
 * Streams.  Pools are per device and per stream: a block freed on a stream
 * is reused only by allocations on that stream, so on an in-order stream a
 * block's next user runs after its last one (no synchronization needed).
 * Devices without streams pass stream 0.  A block used on another stream
 * than the one it was allocated on must not be freed before that stream is
 * done (PyTorch's record_stream; not implemented: ctorch does not use a
 * tensor on two streams).
 *
 * Out of memory.  When a segment cannot be had (the limit, or the driver
 * fails), the cached free segments of the device are released and the
 * segment tried again, then a segment of just the rounded request; failing
 * that, a CT_ERR_OOM error names the requested bytes, the allocated and
 * reserved bytes and the limit.  Never an abort.
 *
 * Thread-safe (one mutex per allocator). */
#ifndef CT_CACHING_ALLOC_H
#define CT_CACHING_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "ctorch/ctorch.h"
#include "ctorch/memory.h"

typedef struct ct__calloc_backend {
    const char *name; /* the device type's name: "opencl", "cuda" */
    /* A segment of nbytes on device dev: its base address (nonzero), or 0
     * with the driver's reason written into why (n bytes). */
    uintptr_t (*seg_alloc)(void *ctx, int dev, uintptr_t stream, size_t nbytes, char *why, size_t n);
    /* Gives a segment back to the driver (work queued on it may still run:
     * the backend waits or defers as its driver needs). */
    void (*seg_free)(void *ctx, int dev, uintptr_t base, size_t nbytes);
    void *ctx;
    /* the most bytes reserved per device (0: no limit but the driver's) and
     * where it comes from ("CT_OPENCL_MEMORY_LIMIT") */
    size_t limit;
    const char *limit_name;
} ct__calloc_backend;

typedef struct ct__calloc ct__calloc;

/* An allocator for device type `type` with ndev devices; it registers itself
 * as that type's allocator for ct_memory_stats and friends (the last one
 * created for a type wins).  NULL + error when out of host memory. */
ct__calloc *ct__calloc_new(ct_device type, const ct__calloc_backend *be, int ndev);
/* nbytes on device dev for stream: an address, or NULL + CT_ERR_OOM. */
void *ct__calloc_alloc(ct__calloc *a, int dev, uintptr_t stream, size_t nbytes);
/* Frees an address of ct__calloc_alloc (NULL: nothing); false when p is not
 * one (nothing is done). */
bool ct__calloc_free(ct__calloc *a, void *p);
/* Releases the free whole segments of device dev (-1: every device). */
void ct__calloc_empty_cache(ct__calloc *a, int dev);
/* The statistics of device dev (ctorch/memory.h's counters); its peaks
 * reset to the current values. */
void ct__calloc_get_stats(ct__calloc *a, int dev, ct_mem_stats *out);
void ct__calloc_reset_peaks(ct__calloc *a, int dev);
/* Frees the allocator and its cached segments (the live blocks must have
 * been freed; their segments are given back too).  Unregisters it. */
void ct__calloc_destroy(ct__calloc *a);
/* The allocator registered for a device type (NULL: none). */
ct__calloc *ct__calloc_of(ct_device type);
/* sizes (PyTorch's constants) */
#define CT_CALLOC_MIN_BLOCK  ((size_t)512)
#define CT_CALLOC_SMALL_SIZE ((size_t)1 << 20)
#define CT_CALLOC_SMALL_SEG  ((size_t)2 << 20)
#define CT_CALLOC_LARGE_SEG  ((size_t)20 << 20)
#define CT_CALLOC_MIN_LARGE  ((size_t)10 << 20)
#define CT_CALLOC_ROUND_LARGE ((size_t)2 << 20)
#endif
