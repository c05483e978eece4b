/* cu.h -- private to the CUDA backend: the entry points of the CUDA driver
 * (libcuda.so.1), NVRTC (libnvrtc.so) and cuBLAS (libcublas.so) it uses,
 * all loaded at run time with dlopen: the library links none of them, and
 * loads and runs where no driver is installed (the CUDA device then has no
 * devices: "no CUDA device: ...").  Only the toolkit's headers are needed to
 * build (for the types).
 *
 * X(return type, field, "exported symbol", parameter list).  The field
 * names drop the "cu" prefix: cuda.h #defines cuMemAlloc as cuMemAlloc_v2
 * and so on, and the exported symbol is the versioned one. */
#ifndef CT_CU_H
#define CT_CU_H

#include <cuda.h>
#include <nvrtc.h>
#include <cublas_v2.h>

#define CT_CU_FUNCS(X)                                                                         \
    X(CUresult, Init, "cuInit", (unsigned))                                                    \
    X(CUresult, DriverGetVersion, "cuDriverGetVersion", (int *))                               \
    X(CUresult, DeviceGetCount, "cuDeviceGetCount", (int *))                                   \
    X(CUresult, DeviceGet, "cuDeviceGet", (CUdevice *, int))                                   \
    X(CUresult, DeviceGetName, "cuDeviceGetName", (char *, int, CUdevice))                     \
    X(CUresult, DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t *, CUdevice))                   \
    X(CUresult, DeviceGetAttribute, "cuDeviceGetAttribute", (int *, CUdevice_attribute, CUdevice)) \
    X(CUresult, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))   \
    X(CUresult, CtxSetCurrent, "cuCtxSetCurrent", (CUcontext))                                 \
    X(CUresult, CtxSynchronize, "cuCtxSynchronize", (void))                                    \
    X(CUresult, MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                            \
    X(CUresult, MemFree, "cuMemFree_v2", (CUdeviceptr))                                        \
    X(CUresult, MemGetInfo, "cuMemGetInfo_v2", (size_t *, size_t *))                           \
    X(CUresult, MemHostAlloc, "cuMemHostAlloc", (void **, size_t, unsigned))                   \
    X(CUresult, MemFreeHost, "cuMemFreeHost", (void *))                                        \
    X(CUresult, MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, CUstream)) \
    X(CUresult, MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream)) \
    X(CUresult, MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, size_t, CUstream)) \
    X(CUresult, MemsetD8Async, "cuMemsetD8Async", (CUdeviceptr, unsigned char, size_t, CUstream)) \
    X(CUresult, StreamCreate, "cuStreamCreate", (CUstream *, unsigned))                        \
    X(CUresult, StreamDestroy, "cuStreamDestroy_v2", (CUstream))                               \
    X(CUresult, StreamSynchronize, "cuStreamSynchronize", (CUstream))                          \
    X(CUresult, StreamWaitEvent, "cuStreamWaitEvent", (CUstream, CUevent, unsigned))           \
    X(CUresult, EventCreate, "cuEventCreate", (CUevent *, unsigned))                           \
    X(CUresult, EventRecord, "cuEventRecord", (CUevent, CUstream))                             \
    X(CUresult, EventSynchronize, "cuEventSynchronize", (CUevent))                             \
    X(CUresult, EventQuery, "cuEventQuery", (CUevent))                                         \
    X(CUresult, EventElapsedTime, "cuEventElapsedTime", (float *, CUevent, CUevent))           \
    X(CUresult, EventDestroy, "cuEventDestroy_v2", (CUevent))                                  \
    X(CUresult, ModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                \
    X(CUresult, ModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *)) \
    X(CUresult, LaunchKernel, "cuLaunchKernel", (CUfunction, unsigned, unsigned, unsigned,     \
                                                 unsigned, unsigned, unsigned, unsigned,       \
                                                 CUstream, void **, void **))                  \
    X(CUresult, GetErrorString, "cuGetErrorString", (CUresult, const char **))

#define CT_NVRTC_FUNCS(X)                                                                      \
    X(nvrtcResult, CreateProgram, "nvrtcCreateProgram", (nvrtcProgram *, const char *, const char *, \
                                                          int, const char *const *, const char *const *)) \
    X(nvrtcResult, CompileProgram, "nvrtcCompileProgram", (nvrtcProgram, int, const char *const *)) \
    X(nvrtcResult, GetProgramLogSize, "nvrtcGetProgramLogSize", (nvrtcProgram, size_t *))      \
    X(nvrtcResult, GetProgramLog, "nvrtcGetProgramLog", (nvrtcProgram, char *))                \
    X(nvrtcResult, GetCUBINSize, "nvrtcGetCUBINSize", (nvrtcProgram, size_t *))                \
    X(nvrtcResult, GetCUBIN, "nvrtcGetCUBIN", (nvrtcProgram, char *))                          \
    X(nvrtcResult, DestroyProgram, "nvrtcDestroyProgram", (nvrtcProgram *))                    \
    X(nvrtcResult, Version, "nvrtcVersion", (int *, int *))                                    \
    X(const char *, GetErrorString, "nvrtcGetErrorString", (nvrtcResult))

#define CT_CUBLAS_FUNCS(X)                                                                     \
    X(cublasStatus_t, Create, "cublasCreate_v2", (cublasHandle_t *))                           \
    X(cublasStatus_t, SetStream, "cublasSetStream_v2", (cublasHandle_t, cudaStream_t))         \
    X(cublasStatus_t, SetMathMode, "cublasSetMathMode", (cublasHandle_t, cublasMath_t))        \
    X(cublasStatus_t, SgemmStridedBatched, "cublasSgemmStridedBatched",                        \
      (cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float *,     \
       const float *, int, long long, const float *, int, long long, const float *, float *,   \
       int, long long, int))                                                                   \
    X(cublasStatus_t, DgemmStridedBatched, "cublasDgemmStridedBatched",                        \
      (cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const double *,    \
       const double *, int, long long, const double *, int, long long, const double *,         \
       double *, int, long long, int))                                                         \
    X(cublasStatus_t, GemmStridedBatchedEx, "cublasGemmStridedBatchedEx",                     \
      (cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,      \
       const void *, cudaDataType, int, long long, const void *, cudaDataType, int, long long, \
       const void *, void *, cudaDataType, int, long long, int, cublasComputeType_t,           \
       cublasGemmAlgo_t))

#define CT_CU_PTR(ret, field, sym, params) ret (*field) params;
typedef struct ct_cu_api { CT_CU_FUNCS(CT_CU_PTR) } ct_cu_api;
typedef struct ct_nvrtc_api { CT_NVRTC_FUNCS(CT_CU_PTR) } ct_nvrtc_api;
typedef struct ct_cublas_api { CT_CUBLAS_FUNCS(CT_CU_PTR) } ct_cublas_api;
#undef CT_CU_PTR

#endif
