/* gpu_dialect.h -- private to the GPU backends: kernel text shared between
 * OpenCL C and CUDA C++.
 *
 * The OpenCL device generates its kernels as OpenCL C (a prelude, the
 * scalar helpers of src/ops/ew_scalar.h where needed, and a body per op,
 * dtype and shape class).  ct__cuda_dialect_prelude, put in front of such
 * text, makes it CUDA C++ for NVRTC (compiled with -default-device, so
 * unannotated functions are device functions): the address-space keywords,
 * __kernel, the work-item functions, the OpenCL types and built-ins (as_T,
 * vload_half, vstore_half_rte, vector types, atomics, barrier) mapped to
 * CUDA's.  A work-group is a block: get_local_size(0) is blockDim.x.
 *
 * Recording.  A backend reports each program it builds through
 * ct__gpu_source_seen; while recording is on (tests), the distinct
 * (prelude, helpers, body) triples are kept, so that a test can compile
 * every kernel a run generated as CUDA (tests/test_backend_ops.c with
 * NVRTC, for sm_80 and sm_90). */
#ifndef CT_GPU_DIALECT_H
#define CT_GPU_DIALECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/ctorch.h"

extern const char ct__cuda_dialect_prelude[];

typedef struct ct_gpu_source {
    const char *what;    /* the op it was generated for */
    const char *prelude; /* the generator's prelude (OpenCL C) */
    const char *helpers; /* "" or the scalar helpers' text */
    const char *body;    /* the kernel "k" and what it defines */
} ct_gpu_source;

/* Starts (true) or stops recording; stopping frees what was recorded. */
void ct__gpu_sources_record(bool on);
/* A program a backend builds (the three parts of its text); copied when
 * recording, else nothing.  Thread-safe. */
void ct__gpu_source_seen(const char *what, const char *prelude, const char *helpers, const char *body);
/* The recorded sources, in the order first seen; valid until recording
 * stops.  Returns their number. */
int ct__gpu_sources(const ct_gpu_source **out);

/* ---- the OpenCL device's kernel functions run for another device ----------
 * A GPU backend without kernels of its own for an op (CUDA) calls the
 * OpenCL device's kernel function (ct__kernels[CT_OPENCL][op]) with its own
 * tensors while ct__gpu_foreign points at its launcher.  The OpenCL
 * backend then generates the same kernel text as always but, instead of
 * building and queueing it with OpenCL, hands it to the launcher: its
 * operand "buffers" are the tensors' element addresses (offsets 0), the
 * geometry and the extra argument unchanged.  Only for the ops whose
 * kernel functions go through get_kernel/enqueue/launch_setup/dev_addr
 * (elementwise, reductions, softmax/log_softmax/cumsum/cumprod, arange/
 * linspace/eye, copy, fill), and for those of the kernel files that only
 * launch through ct__ocl_launch (index_select/gather/scatter, masked_fill,
 * im2col/col2im, max_pool and its backward, adaptive avg/max pooling, the
 * optimizer steps, the random
 * ops, layer_norm forward and backward), and for the convolutions (conv,
 * conv_transpose, conv_wgrad of k_conv.c: their im2col/col2im and copy
 * kernels as above, their GEMMs through the launcher's gemm, scratch
 * memory and memset through the device interface); integer division's zero check is not run (those ops then have no
 * kernel there). */
typedef struct ct_gpu_foreign {
    ct_device type; /* the device whose tensors the kernels get */
    /* builds (cached) and queues prelude + helpers + body (OpenCL C) on
     * device dev over numel work-items in work-groups of lsz; arguments:
     * the four operand addresses, the geometry (gsize bytes) and extra
     * (esize bytes; NULL: none) */
    ct_status (*launch)(const char *what, const char *prelude, const char *helpers, const char *body, int dev,
                        void *const bufs[4], const void *geom, size_t gsize, const void *extra, size_t esize,
                        int64_t numel, size_t lsz);
    /* builds (cached) and queues prelude + "\n" + body (a kernel file's
     * text: ct__ocl_dialect's words, a kernel k of any parameters) on
     * device dev over global work items (any work-group size: the kernels
     * check their count); its parameters in order, each a pointer to its
     * value and the value's size (a tensor operand is two: its element
     * address and a long byte offset, 0) */
    ct_status (*launch_args)(const char *what, const char *prelude, const char *body, int dev,
                             void *const *vals, const size_t *sizes, int nvals, size_t global);
    /* n bytes of host data copied to device memory of dev (a 0-dim cpu
     * number as an operand); NULL + error on failure */
    void *(*upload)(int dev, const void *host, size_t n);
    /* frees what upload returned, once the launches using it are queued */
    void (*release)(void *p);
    /* row-major, strided-batched GEMM on device dev (the kernel files'
     * GEMM seam, ct__ocl_gemm_batched: im2col + GEMM convolutions): for
     * b < batch, C_b = alpha * op(A_b) @ op(B_b) + beta * C_b with
     * op(A_b) [M, K], op(B_b) [K, N], C_b [M, N]; X_b the element address
     * X + b * sx (elements of dt), ldx its row stride (elements), op(X) the
     * transpose when tx.  NULL: the kernel functions that need it decline
     * (the cpu fallback serves). */
    ct_status (*gemm)(const char *what, int dev, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      double alpha, const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb,
                      double beta, void *C, int64_t ldc, int64_t sc, int64_t batch);
} ct_gpu_foreign;

/* A row-major strided-batched GEMM (the gemm seam's arguments) as the
 * column-major call of cuBLAS's ?gemmStridedBatched: C^T = op(B)^T op(A)^T,
 * so cuBLAS's first operand is B (its op: 'T' when tb, else 'N'), its second
 * A, m = N, n = M, k = K, the leading dimensions and batch strides those of
 * B, A and C.  Pure (no device): the CUDA backend's foreign gemm calls
 * cuBLAS with exactly these, and tests check them without a GPU. */
typedef struct ct_gpu_colmajor_gemm {
    char transa, transb; /* 'N' or 'T', of cuBLAS's first (a) and second (b) operand */
    int64_t m, n, k;
    const void *a, *b; /* cuBLAS's A (the row-major B) and B (the row-major A) */
    void *c;
    int64_t lda, ldb, ldc, stride_a, stride_b, stride_c, batch;
} ct_gpu_colmajor_gemm;
ct_gpu_colmajor_gemm ct__gpu_colmajor_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                                           int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, void *C,
                                           int64_t ldc, int64_t sc, int64_t batch);

/* The calling thread's foreign launcher (NULL: OpenCL runs its kernels). */
extern _Thread_local const ct_gpu_foreign *ct__gpu_foreign;
/* For the OpenCL backend's get_kernel in foreign mode: keeps the text
 * (valid until the launch) and returns a token for enqueue. */
void *ct__gpu_foreign_kernel(const char *what, const char *prelude, const char *helpers, const char *body);
/* For its enqueue in foreign mode: launches the text of the last
 * ct__gpu_foreign_kernel of this thread. */
ct_status ct__gpu_foreign_launch(const char *what, int dev, void *const bufs[4], const void *geom, size_t gsize,
                                 const void *extra, size_t esize, int64_t numel, size_t lsz);
/* For ct__ocl_launch in foreign mode: records the text (tests) and launches
 * it through the launcher's launch_args. */
ct_status ct__gpu_foreign_launch_args(const char *what, const char *prelude, const char *body, int dev,
                                      void *const *vals, const size_t *sizes, int nvals, size_t global);
/* cat on a GPU device: each input copied into its slice of the output (a
 * view along the dim) by the device's own copy kernel (ct__dispatch of
 * copy): any dtype, any layout.  The kernel of both GPU backends. */
struct ct_args;
ct_status ct__gpu_cat(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const struct ct_args *a);
/* FNV-1a of a kernel's text: the key of both GPU backends' kernel caches */
static inline uint64_t ct__gpu_text_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}
/* a counter read under the backend's lock (the kernels-built counts the
 * tests read) */
static inline long ct__gpu_locked_count(pthread_mutex_t *mu, const long *n) {
    pthread_mutex_lock(mu);
    long v = *n;
    pthread_mutex_unlock(mu);
    return v;
}

#endif
