/* ocl.h -- private to the OpenCL backend: the OpenCL entry points it uses,
 * loaded at run time from the ICD loader (libOpenCL.so.1) with dlopen, so
 * the library links no OpenCL library and loads and runs where none is
 * installed (the OpenCL device then has no devices: "no OpenCL device").
 * Only the headers (opencl-headers) are needed to build. */
#ifndef CT_OCL_H
#define CT_OCL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

/* X(return type, name, parameter list) for each entry point used */
#define CT_OCL_FUNCS(X)                                                                        \
    X(cl_int, clGetPlatformIDs, (cl_uint, cl_platform_id *, cl_uint *))                       \
    X(cl_int, clGetPlatformInfo, (cl_platform_id, cl_platform_info, size_t, void *, size_t *)) \
    X(cl_int, clGetDeviceIDs, (cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *)) \
    X(cl_int, clGetDeviceInfo, (cl_device_id, cl_device_info, size_t, void *, size_t *))       \
    X(cl_context, clCreateContext, (const cl_context_properties *, cl_uint, const cl_device_id *, \
                                    void(CL_CALLBACK *)(const char *, const void *, size_t, void *), \
                                    void *, cl_int *))                                         \
    X(cl_int, clReleaseContext, (cl_context))                                                  \
    X(cl_command_queue, clCreateCommandQueue, (cl_context, cl_device_id, cl_command_queue_properties, \
                                               cl_int *))                                      \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue))                                       \
    X(cl_mem, clCreateBuffer, (cl_context, cl_mem_flags, size_t, void *, cl_int *))            \
    X(cl_int, clReleaseMemObject, (cl_mem))                                                    \
    X(cl_program, clCreateProgramWithSource, (cl_context, cl_uint, const char **, const size_t *, \
                                              cl_int *))                                       \
    X(cl_int, clBuildProgram, (cl_program, cl_uint, const cl_device_id *, const char *,        \
                               void(CL_CALLBACK *)(cl_program, void *), void *))               \
    X(cl_int, clGetProgramBuildInfo, (cl_program, cl_device_id, cl_program_build_info, size_t,  \
                                      void *, size_t *))                                       \
    X(cl_int, clReleaseProgram, (cl_program))                                                  \
    X(cl_kernel, clCreateKernel, (cl_program, const char *, cl_int *))                         \
    X(cl_int, clReleaseKernel, (cl_kernel))                                                    \
    X(cl_int, clSetKernelArg, (cl_kernel, cl_uint, size_t, const void *))                      \
    X(cl_int, clEnqueueNDRangeKernel, (cl_command_queue, cl_kernel, cl_uint, const size_t *,   \
                                       const size_t *, const size_t *, cl_uint, const cl_event *, \
                                       cl_event *))                                            \
    X(cl_int, clEnqueueReadBuffer, (cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *,  \
                                    cl_uint, const cl_event *, cl_event *))                    \
    X(cl_int, clEnqueueWriteBuffer, (cl_command_queue, cl_mem, cl_bool, size_t, size_t,         \
                                     const void *, cl_uint, const cl_event *, cl_event *))     \
    X(cl_int, clEnqueueCopyBuffer, (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t,   \
                                    cl_uint, const cl_event *, cl_event *))                    \
    X(cl_int, clEnqueueFillBuffer, (cl_command_queue, cl_mem, const void *, size_t, size_t,     \
                                    size_t, cl_uint, const cl_event *, cl_event *))            \
    X(cl_int, clFinish, (cl_command_queue))

typedef struct ct_ocl_api {
#define CT_OCL_PTR(ret, name, params) ret(CL_API_CALL *name) params;
    CT_OCL_FUNCS(CT_OCL_PTR)
#undef CT_OCL_PTR
} ct_ocl_api;

/* ---- for the backend's kernel files (k_*.c), from backend.c -------------- */
#include <stdbool.h>
#include "../../ops/op_table.h"
/* the buffer, byte offset and device of an address of an opencl storage */
bool ct__ocl_lookup(const void *p, cl_mem *mem, size_t *off, int *dev);
/* device dev's in-order queue */
cl_command_queue ct__ocl_queue(int dev);
/* the lock every enqueue holds (kernel arguments are per kernel object) */
void ct__ocl_lock(void);
void ct__ocl_unlock(void);
/* n bytes at device address p := byte */
ct_status ct__ocl_memset(void *p, int byte, size_t n);
/* One argument of ct__ocl_launch: a device tensor becomes two kernel
 * arguments, its buffer (__global char *) and the byte offset of its first
 * element (long); anything else is size bytes passed by value. */
typedef struct ct_ocl_arg {
    const ct_tensor *t; /* non-NULL: the pair (buffer, byte offset) */
    const void *val;    /* else: size bytes of a scalar/struct argument */
    size_t size;
} ct_ocl_arg;
/* Builds (once, cached by source) the kernel "k" of src (after the
 * backend's prelude) on the device of the first tensor argument and runs it
 * over global work items (rounded up to the work-group size: the kernel
 * skips the items past its count).  CT_OK or the error. */
ct_status ct__ocl_launch(const char *what, const char *src, size_t global, const ct_ocl_arg *args, int nargs);
/* C = alpha * op(A) @ op(B) + beta * C through CLBlast (k_blas.c): each
 * operand a device tensor, an element offset from its first element and a
 * leading dimension; declines (ct__no_device_kernel) without CLBlast */
ct_status ct__ocl_gemm(const char *what, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       double alpha, const ct_tensor *A, int64_t aoff, int64_t lda, const ct_tensor *B,
                       int64_t boff, int64_t ldb, double beta, const ct_tensor *C, int64_t coff, int64_t ldc);
/* batch GEMMs as ct__ocl_gemm's, operand b at aoff + b * sa (bo, co
 * likewise): one CLBlast GEMM each here; when ct__gpu_foreign is set (a
 * kernel function run for another device, ../gpu_dialect.h) one call of its
 * launcher's strided-batched gemm (cuBLAS on CUDA) instead */
ct_status ct__ocl_gemm_batched(const char *what, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                               double alpha, const ct_tensor *A, int64_t aoff, int64_t lda, int64_t sa,
                               const ct_tensor *B, int64_t boff, int64_t ldb, int64_t sb, double beta,
                               const ct_tensor *C, int64_t coff, int64_t ldc, int64_t sc, int64_t batch);
/* The source text every kernel of k_conv.c / k_nn.c starts with: the few
 * words that differ between OpenCL C and CUDA C (CT_KERNEL, CT_GLOBAL,
 * CT_GID), so that the bodies can be shared with a CUDA backend. */
extern const char ct__ocl_dialect[];
/* the OpenCL type moving an element of es bytes (uchar .. ulong2), NULL for
 * other sizes */
const char *ct__ocl_bits_type(size_t es);
void ct__ocl_register_conv(ct_kernel_fn *t);  /* k_conv.c */
void ct__ocl_register_index(ct_kernel_fn *t); /* k_index.c */
void ct__ocl_register_optim(ct_kernel_fn *t); /* k_optim.c */
void ct__ocl_register_random(ct_kernel_fn *t); /* k_random.c */
void ct__ocl_register_norm(ct_kernel_fn *t);   /* k_norm.c */
/* what the matmul family runs on (k_blas.c) */
const char *ct__ocl_blas_status(void);
void ct__ocl_register_blas(ct_kernel_fn *t);
#endif
