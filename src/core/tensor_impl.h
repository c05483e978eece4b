/* tensor_impl.h -- private: core's part: the tensor and storage structs,
 * errors, scopes, allocation, shapes, element access, threads.  The op
 * table, dispatch and the hooks autograd installs are the op layer's
 * (src/ops/op_table.h, which includes this file).  Never included by
 * public headers. */
#ifndef CT_TENSOR_IMPL_H
#define CT_TENSOR_IMPL_H

#include <stdatomic.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"

/* ---- storage and tensor ------------------------------------------------ */
typedef struct ct_storage {
    atomic_long refcount;
    void *data;                             /* NULL on devices without data (meta) */
    size_t nbytes;
    ct_device device;                       /* the device is {device, device_index} */
    int device_index;
    void (*deleter)(void *data, void *ctx); /* NULL: the device's free (when owns) */
    void *deleter_ctx;
    int owns;                               /* 0: user memory without deleter */
    atomic_llong version;                   /* bumped by in-place writes */
    /* For caches of data derived from a storage (conv_dnnl.c's reordered
     * weights): uid is unique in the process (0: a user buffer from
     * ct_from_blob, never cached); exposed counts the pointers handed out
     * by ct_data_ptr (a write through one is invisible to version); derived
     * is set once a cache holds something of this storage, and then the
     * hooks of ct__storage_free_hook_add(fn) run fn(uid) when the storage
     * is freed. */
    uint64_t uid;
    atomic_llong exposed;
    atomic_int derived;
} ct_storage;
/* Registers fn (once; at most 4 hooks) to run with the uid of every freed
 * storage marked derived: a cache of derived data drops its entries. */
void ct__storage_free_hook_add(void (*fn)(uint64_t uid));

#define CT_TF_WRAPPED 1u /* wrapped number (lowest promotion tier) */

struct ct_tensor {
    atomic_long refcount;
    ct_storage *storage;
    ct_dtype dtype;
    int ndim;
    int64_t sizes[CT_MAX_DIMS];
    int64_t strides[CT_MAX_DIMS]; /* in elements */
    int64_t offset;               /* in elements */
    unsigned flags;
    void *autograd;               /* reserved for src/autograd */
};

/* ---- errors ------------------------------------------------------------ */
/* Records the thread-local error; always returns NULL (for `return`). */
void *ct__error(ct_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ct_status ct__error_status(ct_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "[3, 4]" into buf (>= 256 bytes recommended). Returns buf. */
char *ct__shape_str(const int64_t *sizes, int ndim, char *buf, size_t n);
/* Thread-local small buffers for messages: ct__tshape(t) -> "[3, 4]". */
const char *ct__tshape(const ct_tensor *t);
/* A NULL argument.  Records CT_ERR_NULL "op: <what> is NULL" (what is
 * printf-formatted: "argument 'b'", "element 2 of argument 'ts'") unless an
 * error is already pending on this thread (ct_last_error_code() != CT_OK):
 * then the NULL is most likely the result of that failed call and its
 * message, the first error, is kept.  op may be a C function name
 * (__func__): a leading "ct_" and a trailing "_impl" are dropped.
 * ct__null_arg returns NULL, ct__null_arg_status CT_ERR_NULL. */
void *ct__null_arg(const char *op, const char *what, ...) __attribute__((format(printf, 2, 3)));
ct_status ct__null_arg_status(const char *op, const char *what, ...) __attribute__((format(printf, 2, 3)));
/* Counts the errors raised on this thread: a caller can tell whether a
 * callback it ran recorded one (the count changed) or failed silently. */
unsigned long ct__error_count(void);
/* Every op's NULL check: the error names the function and the argument. */
#define CT_NULLCHECK(x) do { if (!(x)) return ct__null_arg(__func__, "argument '%s'", #x); } while (0)
#define CT_NULLCHECK_S(x) do { if (!(x)) return ct__null_arg_status(__func__, "argument '%s'", #x); } while (0)
/* The same for helpers shared by several ops: name is the op's name. */
#define CT_NULLCHECK_OP(name, x) do { if (!(x)) return ct__null_arg((name), "argument '%s'", #x); } while (0)
#define CT_NULLCHECK_OP_S(name, x) do { if (!(x)) return ct__null_arg_status((name), "argument '%s'", #x); } while (0)
/* Element i of an array argument: "cat: element 1 of argument 'ts' is NULL". */
#define CT_NULLCHECK_AT(name, arr, i) \
    do { if (!(arr)[i]) return ct__null_arg((name), "element %d of argument '%s'", (int)(i), #arr); } while (0)
#define CT_NULLCHECK_AT_S(name, arr, i) \
    do { if (!(arr)[i]) return ct__null_arg_status((name), "element %d of argument '%s'", (int)(i), #arr); } while (0)
#define CT_ASSERT(c) do { if (!(c)) ct__assert_fail(#c, __FILE__, __LINE__); } while (0)
_Noreturn void ct__assert_fail(const char *expr, const char *file, int line);

/* ---- tensor construction ----------------------------------------------- */
/* A fresh contiguous tensor with refcount 1, not in any scope, its storage
 * from the device's allocator, on the thread's current index of that device
 * type (ct__device_current: an op's inputs' index while it runs). */
ct_tensor *ct__alloc(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev);
/* The same with explicit strides (a dense, non-overlapping layout: the
 * storage holds the span they address). */
ct_tensor *ct__alloc_strided(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dt,
                             ct_device dev);
/* True when t's data cannot be read on the host by op-layer code (a meta
 * tensor, or later a tensor in GPU memory): such code calls ct__need_data
 * first, which records "op: ... meta tensors have no data" and returns false. */
static inline bool ct__has_host_data(const ct_tensor *t) { return t->storage->device == CT_CPU; }
bool ct__need_data(const char *op, const ct_tensor *t);
/* A contiguous cpu copy of t's values in dtype dt (refcount 1, not in any
 * scope), for op-layer code that checks values on the host (index bounds,
 * targets) of a tensor on a device with data; NULL + error on failure or
 * for a meta tensor. */
ct_tensor *ct__host_copy(ct_tensor *t, ct_dtype dt);
/* Set by the compiler's tracer on its thread while it traces: called when
 * ct__need_data refuses a tensor (a graph break); NULL otherwise.  Read on
 * the refusal path only. */
extern _Thread_local void (*ct__need_data_hook)(const char *op);
/* The tensor ct__need_data refused, while the hook runs (else NULL). */
extern _Thread_local const ct_tensor *ct__need_data_tensor;
/* Set by the tracer on its thread while it traces: ct_get_device then
 * reports cpu tensors as meta (the op layer's rule for cpu constants met
 * with meta tensors), so device checks that pick a fused path agree. */
extern _Thread_local bool ct__tracing;
/* The device a factory makes its tensor on: dev, but meta for the cpu
 * while tracing (a tensor made inside a traced function is a node of the
 * graph, run on the real device at each call, never a cpu constant made at
 * trace time -- nor a draw from the generator then). */
static inline ct_device ct__trace_dev(ct_device dev) {
    return __builtin_expect(ct__tracing, 0) && dev == CT_CPU ? CT_META : dev;
}
/* Moves t (the same handle) onto dev: new storage of t's size there, t's
 * values copied when both devices hold data (uninitialized memory when t
 * was on meta), contiguous strides.  Views of t's old storage keep it.
 * Bumps the version.  Used by ct_module_to. */
ct_status ct__tensor_move_to(ct_tensor *t, ct_device dev);
/* A new handle viewing t's storage, refcount 1, not in any scope. */
ct_tensor *ct__view_of(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                       int64_t offset);
/* Puts t in the innermost scope (if any); returns t. */
ct_tensor *ct__register(ct_tensor *t);
/* Removes and returns t from the innermost scope if it is there
 * (its reference passes to the caller); else NULL. */
int ct__scope_take(ct_tensor *t);
/* Storage allocator (large blocks are cached, see alloc.c).  A block from
 * ct__malloc_aligned(n) must be freed with ct__free_aligned(p, (void *)(uintptr_t)n).
 * For kernel scratch memory use plain malloc/free. */
void ct__free_aligned(void *p, void *ctx);
void *ct__malloc_aligned(size_t n);
/* Small fixed-size objects on the path of every op (tensor handles,
 * storages, autograd metadata and nodes): malloc/free through a per-thread
 * cache of freed blocks by 64-byte size class (alloc.c).  A block from
 * ct__obj_alloc(n) / ct__obj_calloc(n) (zeroed) must be freed with
 * ct__obj_free(p, n) for the same n (any thread may free it). */
void *ct__obj_alloc(size_t n);
void *ct__obj_calloc(size_t n);
void ct__obj_free(void *p, size_t n);
/* Bytes the calling thread's free lists hold (0 where nothing is cached:
 * AddressSanitizer builds, CT_SMALL_CACHE_MB=0). */
size_t ct__small_cached_bytes(void);

/* ---- overflow-safe arithmetic ------------------------------------------ */
/* *r = a * b (a + b); false, *r unspecified, when the result overflows. */
static inline bool ct__mul_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool ct__add_i64(int64_t a, int64_t b, int64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool ct__mul_size(size_t a, size_t b, size_t *r) { return !__builtin_mul_overflow(a, b, r); }
/* n elements of es bytes: *bytes = n * es; false when n < 0 or it overflows. */
static inline bool ct__array_bytes(int64_t n, size_t es, size_t *bytes) {
    return n >= 0 && (uint64_t)n <= SIZE_MAX && ct__mul_size((size_t)n, es, bytes);
}

/* ---- shape helpers ----------------------------------------------------- */
/* Wraps a possibly negative dim; -1 + error "op: dim d out of range for
 * a N-D tensor" otherwise.  ndim 0 accepts dims -1 and 0 (like torch). */
int64_t ct__wrap_dim(const char *op, int64_t dim, int ndim);
/* numel of a shape with overflow check; -1 + error on overflow or negative.
 * The product of the nonzero dims must fit in int64 too (a zero dim makes
 * numel 0, but strides and views of the other dims still multiply them). */
int64_t ct__shape_numel(const char *op, const int64_t *shape, int ndim);
ct_status ct__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b,
                               int nb, int64_t *out, int *nout);
/* Row-major strides (dims of size 0 or 1 count as 1).  Overflow-safe: a
 * stride that would overflow saturates at INT64_MAX (shapes that passed
 * ct__shape_numel never get there). */
void ct__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides);
bool ct__is_contiguous(const ct_tensor *t);
static inline void *ct__ptr(const ct_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)ct_dtype_size(t->dtype);
}
static inline void ct__bump_version(ct_tensor *t) { atomic_fetch_add(&t->storage->version, 1); }
/* Returns a contiguous tensor with t's data converted to dt: t itself (one
 * new ref) when it already is; the caller releases it.  Not in any scope. */
ct_tensor *ct__contig_as(ct_tensor *t, ct_dtype dt);
/* The maximum-likelihood compute dtype for float ops on dt (ints -> default float). */
ct_dtype ct__float_dtype(ct_dtype dt);

/* ---- element access (generic, slow paths and tests) -------------------- */
double ct__load_f64(const void *p, ct_dtype dt);
int64_t ct__load_i64(const void *p, ct_dtype dt);
void ct__store_f64(void *p, ct_dtype dt, double v);
void ct__store_i64(void *p, ct_dtype dt, int64_t v);
/* Converts n elements between dtypes with element strides in bytes. */
void ct__convert(void *dst, ct_dtype ddt, int64_t dstride, const void *src, ct_dtype sdt,
                 int64_t sstride, int64_t n);
float ct__f16_to_f32(uint16_t h);
uint16_t ct__f32_to_f16(float f);
float ct__bf16_to_f32(uint16_t h);
uint16_t ct__f32_to_bf16(float f);

/* ---- strings ----------------------------------------------------------- */
/* A growing string: zero-initialize, ct__sbuf_put(&b, fmt, ...), then own
 * b.s (malloc'ed; NULL when nothing was written) unless b.oom is set. */
typedef struct ct_sbuf { char *s; size_t n, cap; int oom; } ct_sbuf;
void ct__sbuf_put(ct_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- threads ----------------------------------------------------------- */
/* Minimum elements per thread before an elementwise loop goes parallel. */
#define CT_GRAIN 32768
int ct__num_threads(void);
/* Whether OpenMP's idle threads sleep at once (OMP_WAIT_POLICY=passive;
 * GOMP_SPINCOUNT, when set, decides instead: 0 is passive), so that every
 * parallel region first pays for waking them. */
bool ct__omp_passive(void);
bool ct__omp_passive_reload(void); /* reads the environment again (tests) */
/* The grain's factor for the decision to go parallel: 4 when passive, else
 * 1 (see dispatch.c).  Only the decision: how a loop is cut into chunks
 * (and so the bits of a reduction) never depends on it. */
int ct__grain_scale(void);
#define CT_PAR_GRAIN (CT_GRAIN * (int64_t)ct__grain_scale())

#endif
