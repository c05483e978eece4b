/* ctorch/tensor.h -- tensors: dtypes, devices, memory, factories, views,
 * inspection.
 *
 * A ct_tensor is an opaque, reference-counted handle: sizes, strides (in
 * elements) and a storage offset over a reference-counted storage.  Views
 * share storage.  Memory follows "reference counts plus scopes":
 *
 *   - every tensor an op returns joins the innermost scope of the calling
 *     thread; ct_scope_end() releases all of them;
 *   - ct_keep(t) moves t to the enclosing scope (or hands it to the caller
 *     when there is none);
 *   - outside any scope the caller owns what it gets and calls ct_release.
 *
 * In-place ops (names ending in '_') return their first argument, with no
 * new reference.
 */
#ifndef CTORCH_TENSOR_H
#define CTORCH_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum number of dimensions of a tensor. */
#define CT_MAX_DIMS 16

typedef enum ct_dtype {
    CT_BOOL = 0,
    CT_U8,
    CT_I8,
    CT_I16,
    CT_I32,
    CT_I64,
    CT_F16,
    CT_BF16,
    CT_F32,
    CT_F64,
    CT_C64,  /* complex float  (two f32) */
    CT_C128, /* complex double (two f64) */
    CT_C32,  /* complex half   (two f16; storage and conversion only) */
    CT_DTYPE_COUNT
} ct_dtype;

/* Device types.  A device is a type and an index ("cuda:1"); every CPU and
 * meta tensor is on index 0.  CT_META is PyTorch's device="meta": tensors
 * with sizes, strides and dtype and no data, on which every op computes its
 * output shapes and dtypes (and runs its argument checks) without
 * computing values -- build a model there to count its parameters at no
 * memory cost, then ct_module_to it to the cpu and load its weights. */
typedef enum ct_device {
    CT_CPU = 0,
    CT_CUDA = 1,
    CT_META = 2,
    CT_OPENCL = 3, /* OpenCL devices ("opencl:0"), when built with OpenCL */
    CT_DEVICE_COUNT
} ct_device;

typedef struct ct_tensor ct_tensor;

/* A device: its type and its index -- PyTorch's torch.device("cuda:1").
 * CT_DEV(CT_CUDA, 1); every cpu and meta tensor is on index 0.  The *_dev
 * forms (ct_to_dev, ct_zeros_dev, ct_module_to_dev, ...) take a whole
 * device.  The ct_device-only functions (ct_to_device, ct_zeros_on, ...)
 * use the thread's current device of that type, like CUDA's current device
 * (cudaSetDevice): the index ct_set_default_dev or a *_dev call last named,
 * or that of the inputs of the last op this thread ran on that type; index
 * 0 until then.  An op's results (and what it allocates on the way) land on
 * its inputs' device; inputs on two devices of a type are refused: "add:
 * expected all tensors on the same device, got opencl:0 and opencl:1". */
typedef struct ct_dev {
    ct_device type;
    int index;
} ct_dev;
#define CT_DEV(type, index) ((ct_dev){(type), (index)})

/* ---- dtypes ------------------------------------------------------------ */
CT_API size_t ct_dtype_size(ct_dtype dt);       /* bytes per element */
CT_API const char *ct_dtype_name(ct_dtype dt);  /* "float32", like torch */
CT_API bool ct_dtype_is_floating(ct_dtype dt);  /* f16 bf16 f32 f64 */
CT_API bool ct_dtype_is_complex(ct_dtype dt);
CT_API bool ct_dtype_is_integral(ct_dtype dt, bool include_bool);
/* torch.promote_types */
CT_API ct_dtype ct_promote_types(ct_dtype a, ct_dtype b);
/* torch.result_type over n tensors, with PyTorch's three tiers: tensors
 * with dims > 0-dim tensors > wrapped numbers (ct_wrap*). */
CT_API ct_dtype ct_result_type(ct_tensor *const *ts, int n);
/* torch.get_default_dtype / set_default_dtype (float32 / float64 only). */
CT_API ct_dtype ct_get_default_dtype(void);
CT_API ct_status ct_set_default_dtype(ct_dtype dt) CT_NODISCARD;
CT_API const char *ct_device_name(ct_device d);  /* "cpu", "cuda", "meta", "opencl" */
/* Whether this build and machine have a device of that type / how many. */
CT_API bool ct_device_is_available(ct_device d);
CT_API int ct_device_count(ct_device d);
/* Waits for the work queued on device {d, index} (a no-op on cpu/meta). */
CT_API ct_status ct_device_synchronize(ct_device d, int index) CT_NODISCARD;
/* torch.set_default_device / get_default_device, per thread: the device of
 * the tensors factories create (ct_empty, ct_zeros, ct_rand, ct_arange, ...
 * and so module constructors' parameters) when no device is given.  The
 * library's own temporaries follow their inputs' device instead.  Wrapped
 * numbers (ct_wrap*) stay 0-dim cpu tensors, which combine with tensors of
 * any device. */
CT_API ct_status ct_set_default_device(ct_device d) CT_NODISCARD;
CT_API ct_device ct_get_default_device(void);
/* OpenCL devices (CT_OPENCL): their number, in the index order of
 * CT_DEV(CT_OPENCL, i) / "opencl:i", and each one's "platform: device" name
 * in names[0 .. min(count, max)) (strings owned by the library, valid for
 * the process; names may be NULL).  0 with the error set when there is none,
 * saying why: "no OpenCL device: ..." (no ICD loader libOpenCL.so.1, no
 * platform, a build without OpenCL).  The runtime is loaded on first use.
 *
 *     const char *names[8];
 *     int n = ct_opencl_devices(names, 8);
 *     for (int i = 0; i < n && i < 8; i++) printf("opencl:%d %s\n", i, names[i]);
 *     if (n > 0) { ct_tensor *x = ct_to_dev(cpu_tensor, CT_DEV(CT_OPENCL, 0)); ... } */
CT_API int ct_opencl_devices(const char **names, int max);
/* torch.device(string): "cpu", "meta", "cuda", "cuda:1", "opencl:0" (no index: 0).
 * CT_ERR_ARG with torch's message for anything else ("cpu:x", "gpu",
 * "cuda:-1"); whether the device exists is checked where it is used. */
CT_API ct_status ct_dev_parse(const char *s, ct_dev *out) CT_NODISCARD;
/* "cpu", "meta", "cuda:1" (str(torch.device)) into buf of n bytes; returns buf. */
CT_API const char *ct_dev_str(ct_dev d, char *buf, size_t n);
CT_API bool ct_dev_equal(ct_dev a, ct_dev b);
/* Whether this build and machine have that device (its type is available
 * and index < ct_device_count(type)). */
CT_API bool ct_dev_is_available(ct_dev d);
/* Waits for the work queued on d (a no-op on cpu/meta). */
CT_API ct_status ct_dev_synchronize(ct_dev d) CT_NODISCARD;
/* The default device as a whole device (per thread; see ct_set_default_device):
 * its index also becomes the thread's current one of its type (see ct_dev). */
CT_API ct_status ct_set_default_dev(ct_dev d) CT_NODISCARD;
CT_API ct_dev ct_get_default_dev(void);

/* ---- memory ------------------------------------------------------------ */
typedef struct ct_scope { int depth; } ct_scope;
CT_API ct_tensor *ct_retain(ct_tensor *t);   /* +1 reference, returns t */
CT_API void ct_release(ct_tensor *t);        /* -1 reference; NULL is a no-op */
CT_API ct_scope ct_scope_begin(void);
/* Releases every tensor registered in scope s and in scopes opened after it. */
CT_API void ct_scope_end(ct_scope s);
/* Moves t out of the innermost scope into the enclosing one (or to the
 * caller when there is none, who then owns one reference).  Returns t. */
CT_API ct_tensor *ct_keep(ct_tensor *t);
/* Returns the cached blocks of the large-block allocator to the system,
 * and the calling thread's cached small blocks (freed tensor handles,
 * autograd nodes, small tensor data: at most 32 MiB a thread, kept for
 * reuse by the next ops and freed when the thread exits). */
CT_API void ct_empty_cache(void);
/* Number of live tensor handles in the process (for leak tests). */
CT_API int64_t ct_live_tensors(void);

/* ---- shapes ------------------------------------------------------------ */
/* CT_SHAPE(2, 3) expands to the two arguments `shape, ndim`. */
#define CT_SHAPE(...) ((const int64_t[]){__VA_ARGS__}), \
    ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* A 0-dim shape. */
#define CT_SCALAR_SHAPE NULL, 0
/* For optional dims: "reduce over everything". */
#define CT_DIM_NONE INT64_MIN

/* ---- factories --------------------------------------------------------- */
/* Factories without a device argument (ct_empty, ct_zeros, ct_ones, ct_full,
 * ct_scalar, ct_arange, ct_linspace, ct_logspace, ct_eye, ct_rand, ct_randn,
 * ct_randint, ct_randperm) create their tensor on the thread's default
 * device (cpu unless ct_set_default_device); the _on variants take one.
 * Factories that copy user data (ct_from_array, ct_from_doubles,
 * ct_from_blob) and wrapped numbers are always on the cpu. */
CT_API ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dt);
CT_API ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_zeros_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_ones_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev);
CT_API ct_tensor *ct_full_on(const int64_t *shape, int ndim, double value, ct_dtype dt, ct_device dev);
/* The same on a whole device (an error naming it when it does not exist). */
CT_API ct_tensor *ct_empty_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev);
CT_API ct_tensor *ct_zeros_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev);
CT_API ct_tensor *ct_ones_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev);
CT_API ct_tensor *ct_full_dev(const int64_t *shape, int ndim, double value, ct_dtype dt, ct_dev dev);
CT_API ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dt);
CT_API ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dt);
CT_API ct_tensor *ct_full(const int64_t *shape, int ndim, double value, ct_dtype dt);
/* A 0-dim tensor holding v. */
CT_API ct_tensor *ct_scalar(double v, ct_dtype dt);
/* Wrapped numbers: 0-dim tensors that take part in type promotion like a
 * Python number (lowest tier): ct_add(x_f16, ct_wrap(2.0)) stays f16. */
CT_API ct_tensor *ct_wrap(double v);
CT_API ct_tensor *ct_wrap_int(int64_t v);
CT_API ct_tensor *ct_wrap_bool(bool v);
CT_API ct_tensor *ct_wrap_complex(double re, double im);
/* torch.arange(start, end, step) -- number of elements ceil((end-start)/step) */
CT_API ct_tensor *ct_arange(double start, double end, double step, ct_dtype dt);
CT_API ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dt);
CT_API ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dt);
CT_API ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dt);
CT_API ct_tensor *ct_empty_like(ct_tensor *t);
CT_API ct_tensor *ct_zeros_like(ct_tensor *t);
CT_API ct_tensor *ct_ones_like(ct_tensor *t);
CT_API ct_tensor *ct_full_like(ct_tensor *t, double value);
/* Wraps user memory without copying.  strides may be NULL (contiguous).
 * deleter(data, ctx) is called when the last view of it is released
 * (deleter may be NULL when the caller keeps the memory alive). */
CT_API ct_tensor *ct_from_blob(void *data, const int64_t *shape, int ndim,
                               const int64_t *strides, ct_dtype dt,
                               void (*deleter)(void *data, void *ctx), void *ctx);
/* Copies a C array of numel(shape) elements of dtype dt. */
CT_API ct_tensor *ct_from_array(const void *data, const int64_t *shape, int ndim, ct_dtype dt);
/* Copies n doubles converted to dtype dt (convenience for tests/examples). */
CT_API ct_tensor *ct_from_doubles(const double *data, const int64_t *shape, int ndim, ct_dtype dt);

/* ---- inspection -------------------------------------------------------- */
CT_API int ct_ndim(const ct_tensor *t);
CT_API int64_t ct_size(const ct_tensor *t, int64_t dim);   /* negative dims ok; -1 on error */
CT_API int64_t ct_stride(const ct_tensor *t, int64_t dim);
CT_API const int64_t *ct_sizes(const ct_tensor *t);
CT_API const int64_t *ct_strides(const ct_tensor *t);
CT_API int64_t ct_storage_offset(const ct_tensor *t);
CT_API int64_t ct_numel(const ct_tensor *t);
CT_API ct_dtype ct_get_dtype(const ct_tensor *t);
CT_API ct_device ct_get_device(const ct_tensor *t);
/* tensor.device: type and index ({CT_CPU, -1} for NULL). */
CT_API ct_dev ct_tensor_dev(const ct_tensor *t);
CT_API int ct_get_device_index(const ct_tensor *t); /* 0 for cpu and meta; -1 for NULL */
CT_API bool ct_is_contiguous(const ct_tensor *t);
/* Pointer to element 0 (storage base + offset).  NULL for NULL input.
 * Writing through it is allowed; each call marks the storage as possibly
 * written, so copies derived from it (the reordered convolution weights
 * that inference keeps, see ct_conv2d) are made again at their next use.
 * After writing through a pointer obtained before the tensor was last used
 * by an op, call ct_data_ptr again so that the write is seen. */
CT_API void *ct_data_ptr(const ct_tensor *t);
/* Value of a one-element tensor as double (NaN + error otherwise). */
CT_API double ct_item(ct_tensor *t);
CT_API int64_t ct_item_int(ct_tensor *t);
/* torch.allclose / torch.equal: 1 true, 0 false, -1 error. */
CT_API int ct_allclose(ct_tensor *a, ct_tensor *b, double rtol, double atol, bool equal_nan);
CT_API int ct_equal(ct_tensor *a, ct_tensor *b);
/* PyTorch's repr: "tensor([[1., 2.],\n        [3., 4.]])".  The string is
 * malloc'ed; free it with free(). */
CT_API char *ct_to_string(ct_tensor *t);
CT_API ct_status ct_print(ct_tensor *t);
CT_API ct_status ct_fprint(FILE *f, ct_tensor *t);
/* Storage version counter (bumped by every in-place write). */
CT_API int64_t ct_version(const ct_tensor *t);
/* True when a and b share storage. */
CT_API bool ct_shares_storage(const ct_tensor *a, const ct_tensor *b);

/* ---- conversion and copies -------------------------------------------- */
CT_API ct_tensor *ct_to_dtype(ct_tensor *t, ct_dtype dt);  /* t itself (retained) if same */
CT_API ct_tensor *ct_to_device(ct_tensor *t, ct_device dev);
/* Tensor.to(device) for a whole device: t itself (a new reference) when it
 * is already there, else a contiguous copy there (see ct_to_device).  The
 * copy is differentiable like torch's (ToCopyBackward): with grad mode on
 * and t requiring grad, the result requires grad and its gradient goes
 * back to t's device and index (opencl:1 -> opencl:0 through the host) and
 * dtype; forward AD moves t's tangent with it.  Under ct_no_grad, or of
 * ct_detach(t), nothing is recorded.  Copies from or to meta are never
 * recorded.  Scope-owned; NULL with an error for a device that is absent.
 *
 *     ct_tensor *x = ct_randn(CT_SHAPE(3), CT_F32);      // cpu
 *     ct_set_requires_grad(x, true);
 *     ct_tensor *y = ct_to_dev(x, CT_DEV(CT_OPENCL, 0));
 *     ct_backward(ct_sum(ct_mul(y, y), NULL, 0, false), NULL, false, false);
 *     // ct_grad(x) is 2x, on the cpu */
CT_API ct_tensor *ct_to_dev(ct_tensor *t, ct_dev dev);
CT_API ct_tensor *ct_contiguous(ct_tensor *t);             /* t itself (retained) if contiguous */
CT_API ct_tensor *ct_clone(ct_tensor *t);
/* dst <- src, broadcasting src to dst's shape, converting dtype, any layout,
 * any two devices (src goes to dst's device first, as with ct_to_dev).
 * Differentiable in src (torch's CopyBackwards), across devices too: dst's
 * history is overwritten as by any in-place op, its old values get no
 * gradient, and src gets dst's gradient summed over the broadcast dims,
 * on src's own device and in src's dtype.  Returns dst. */
CT_API ct_tensor *ct_copy_(ct_tensor *dst, ct_tensor *src);
CT_API ct_tensor *ct_fill_(ct_tensor *t, double value);
CT_API ct_tensor *ct_zero_(ct_tensor *t);

/* ---- views (share storage, no copy) ------------------------------------ */
CT_API ct_tensor *ct_view(ct_tensor *t, const int64_t *shape, int ndim);  /* one -1 allowed */
CT_API ct_tensor *ct_reshape(ct_tensor *t, const int64_t *shape, int ndim); /* copies only if it must */
CT_API ct_tensor *ct_permute(ct_tensor *t, const int64_t *dims, int ndim);
CT_API ct_tensor *ct_transpose(ct_tensor *t, int64_t dim0, int64_t dim1);
CT_API ct_tensor *ct_t(ct_tensor *t);  /* 0-, 1- or 2-D */
CT_API ct_tensor *ct_expand(ct_tensor *t, const int64_t *shape, int ndim); /* -1 keeps a size */
CT_API ct_tensor *ct_broadcast_to(ct_tensor *t, const int64_t *shape, int ndim);
CT_API ct_tensor *ct_squeeze(ct_tensor *t);                 /* all size-1 dims */
CT_API ct_tensor *ct_squeeze_dim(ct_tensor *t, int64_t dim);
CT_API ct_tensor *ct_unsqueeze(ct_tensor *t, int64_t dim);
/* t[start:end:step] along dim; start/end are clamped like Python slices;
 * pass INT64_MAX as end for "to the end". step > 0. */
CT_API ct_tensor *ct_slice(ct_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step);
CT_API ct_tensor *ct_select(ct_tensor *t, int64_t dim, int64_t index);
CT_API ct_tensor *ct_narrow(ct_tensor *t, int64_t dim, int64_t start, int64_t length);
CT_API ct_tensor *ct_diagonal(ct_tensor *t, int64_t offset, int64_t dim1, int64_t dim2);
CT_API ct_tensor *ct_as_strided(ct_tensor *t, const int64_t *sizes, const int64_t *strides,
                                int ndim, int64_t storage_offset);
CT_API ct_tensor *ct_flatten(ct_tensor *t, int64_t start_dim, int64_t end_dim);
CT_API ct_tensor *ct_unflatten(ct_tensor *t, int64_t dim, const int64_t *sizes, int n);
/* Tensor.unfold: windows of `size` every `step` along dim, as a new last dim. */
CT_API ct_tensor *ct_unfold(ct_tensor *t, int64_t dim, int64_t size, int64_t step);
CT_API ct_tensor *ct_movedim(ct_tensor *t, int64_t source, int64_t destination);
/* Multi-output views: write up to cap tensors to out, return how many
 * (the number needed, even if > cap), or -1 on error. */
CT_API int ct_chunk(ct_tensor *t, int64_t chunks, int64_t dim, ct_tensor **out, int cap);
CT_API int ct_split(ct_tensor *t, int64_t split_size, int64_t dim, ct_tensor **out, int cap);
CT_API int ct_split_sizes(ct_tensor *t, const int64_t *sizes, int n, int64_t dim,
                          ct_tensor **out, int cap);
CT_API int ct_unbind(ct_tensor *t, int64_t dim, ct_tensor **out, int cap);

#ifdef __cplusplus
}
#endif
#endif
