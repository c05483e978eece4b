/* memory.h -- device memory: the caching allocator's statistics and cache,
 * PyTorch's torch.cuda.memory_allocated / memory_stats / empty_cache /
 * memory_summary, for every device type with a caching allocator (cuda and
 * opencl devices; cpu and meta have none).
 *
 * Device memory freed by tensors stays reserved by ctorch's caching
 * allocator and is reused by later allocations on the same device (and
 * stream); "allocated" counts the bytes in live blocks (requests rounded up
 * to 512 bytes), "reserved" the bytes held from the driver, allocated or
 * cached.  ct_empty_cache_dev gives the cached whole segments back to the
 * driver (ct_empty_cache(), of tensor.h, does so for the cpu's host cache).
 *
 *     ct_tensor *x = ct_zeros_dev((int64_t[]){1024, 1024}, 2, CT_F32, CT_DEV(CT_OPENCL, 0));
 *     printf("%lld\n", (long long)ct_memory_allocated(CT_DEV(CT_OPENCL, 0)));  // 4194304
 *     char *s = ct_memory_summary(CT_DEV(CT_OPENCL, 0));
 *     if (s) { fputs(s, stdout); free(s); }
 */
#ifndef CTORCH_MEMORY_H
#define CTORCH_MEMORY_H

#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.cuda.memory_stats: the counters of one device's caching allocator. */
typedef struct ct_mem_stats {
    int64_t allocated_bytes;      /* in live blocks now */
    int64_t reserved_bytes;       /* held from the driver (live + cached) */
    int64_t peak_allocated_bytes; /* maxima since start or ct_reset_peak_memory_stats */
    int64_t peak_reserved_bytes;
    int64_t requested_bytes;      /* what callers asked for (before rounding), live */
    int64_t active_blocks;        /* live blocks */
    int64_t segments;             /* driver buffers held */
    int64_t num_allocs;           /* allocations served */
    int64_t num_frees;
    int64_t num_cache_hits;       /* allocations served from cached memory */
    int64_t num_segment_allocs;   /* driver allocations (cudaMalloc, clCreateBuffer) */
    int64_t num_segment_frees;    /* driver frees (ct_empty_cache_dev, or to retry on out-of-memory) */
    int64_t num_ooms;             /* out-of-memory errors returned */
    int64_t limit_bytes;          /* the most that may be reserved (0: no limit but the device's) */
} ct_mem_stats;

/* Fills *out for device d; CT_ERR_DEVICE for a device without a caching
 * allocator (cpu, meta) or one that does not exist. */
CT_API ct_status ct_memory_stats(ct_dev d, ct_mem_stats *out) CT_NODISCARD;
/* torch.cuda.memory_allocated / max_memory_allocated / memory_reserved /
 * max_memory_reserved: 0 with the error set when ct_memory_stats fails. */
CT_API int64_t ct_memory_allocated(ct_dev d);
CT_API int64_t ct_max_memory_allocated(ct_dev d);
CT_API int64_t ct_memory_reserved(ct_dev d);
CT_API int64_t ct_max_memory_reserved(ct_dev d);
/* torch.cuda.reset_peak_memory_stats: the peaks become the current values. */
CT_API ct_status ct_reset_peak_memory_stats(ct_dev d) CT_NODISCARD;
/* torch.cuda.empty_cache, for device d (ct_empty_cache() is the cpu's):
 * gives the cached, wholly free segments back to the driver (memory in use
 * stays). */
CT_API ct_status ct_empty_cache_dev(ct_dev d) CT_NODISCARD;
/* torch.cuda.memory_summary: a printable table of d's statistics (current
 * and peak allocated/reserved bytes, counts); the caller frees it with
 * free().  NULL + error as ct_memory_stats. */
CT_API char *ct_memory_summary(ct_dev d);

#ifdef __cplusplus
}
#endif
#endif
