/* backend.c -- the CUDA device (CT_CUDA, "cuda:0"): its device vtable,
 * streams and events, pinned memory, and its kernels (ctorch/cuda.h).
 *
 * Loading.  The driver API (libcuda.so.1), NVRTC and cuBLAS are opened with
 * dlopen on first use (a question about CUDA devices, a tensor moved
 * there), never at library load, and no CUDA library is linked: without a
 * driver or a GPU the device type has 0 devices and every use is the error
 * "no CUDA device: <reason>" (ct__device_check), never a crash.  NVRTC is
 * loaded on its own (it runs without a driver): ct__cuda_nvrtc_compile
 * builds kernel text for any architecture, which the tests use to compile
 * every generated kernel where there is no GPU.
 *
 * Devices.  Each device's primary context, made current on the calling
 * thread before each driver call that needs it.  Each thread has a current
 * stream per device (ctorch/cuda.h; the legacy default stream at first);
 * copies, memsets, kernels and cuBLAS calls go to it.  A copy to the host
 * waits for its stream (a host read waits for the work queued before it);
 * copies from the host are asynchronous: from pageable memory the driver
 * returns once the data is staged, from pinned memory (ct_pin_memory) at
 * once.
 *
 * Memory.  The caching allocator (../caching_alloc.h) with one pool per
 * device and stream; its segments are cuMemAlloc buffers, and a block's
 * address is a device pointer (plain pointer arithmetic works on it).
 * CT_CUDA_MEMORY_LIMIT=<bytes> caps what it reserves per device.
 *
 * Kernels.  Copy (same dtype, any strides: by element size) and fill, as
 * CUDA C compiled by NVRTC for the device's architecture on first use and
 * cached in memory by source text and device; strided and broadcast operands
 * through the CPU's iterator (ct__iter_build), as the OpenCL device does.
 * mm / bmm / matmul (float32, float64; float16 and bfloat16 through
 * cublasGemmStridedBatchedEx, summed in float32) through cuBLAS's strided
 * batched GEMM.  The elementwise ops, reductions, softmax/log_softmax, cumsum/
 * cumprod, arange/linspace/eye and dtype conversions run the OpenCL
 * device's generated kernel text, made CUDA C++ by the dialect prelude of
 * ../gpu_dialect.c (k_shared below; every such text is compiled with NVRTC
 * for sm_80 and sm_90 by test_backend_ops), and so do index_select/gather/
 * scatter, masked_fill, im2col/col2im, max_pool and its backward, adaptive
 * avg/max pooling, the
 * fused optimizer steps, layer_norm/rms_norm forward and backward and the
 * random ops (the CPU's Philox streams: NVRTC
 * compiles with --fmad=false, so the arithmetic is the CPU's) through the
 * OpenCL kernel files' texts (ct__ocl_launch's foreign path); conv, conv_transpose and
 * conv_wgrad run k_conv.c's kernel functions the same way, their GEMMs through cuBLAS's
 * strided-batched GEMM (foreign_gemm).  The other ops have no CUDA
 * kernel yet (an error naming the op and the device). */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/device.h"
#include "../../core/tensor_impl.h"
#include "../../ops/iter.h"
#include "../../ops/op_table.h"
#include "../../ops/render.h"
#include "../caching_alloc.h"
#include "../gpu_dialect.h"
#include "ctorch/cuda.h"
#include "cu.h"

#define CU_MAX_DEV 64

static ct_cu_api cu;
static ct_cublas_api cb;
static bool g_have_cublas;
static char g_cublas_why[512];

typedef struct cu_dev {
    CUdevice dev;
    CUcontext ctx;
    char name[256];
    int major, minor;
    size_t total_mem;
    cublasHandle_t blas; /* created on first use (under g_blas_mu) */
} cu_dev;

static cu_dev *g_devs;
static int g_ndev;
static char g_why[512];
static size_t g_limit;
static ct__calloc *g_calloc;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_blas_mu = PTHREAD_MUTEX_INITIALIZER;

struct ct_cuda_stream {
    int device;
    CUstream s;
};
struct ct_cuda_event {
    int device;
    CUevent e;
    bool timing;
};

/* this thread's current stream per device (NULL: the default stream) and
 * the device whose context is current */
static _Thread_local ct_cuda_stream *tl_stream[CU_MAX_DEV];
static _Thread_local int tl_ctx_dev = -1;

static const char *cu_err(CUresult r) {
    const char *s = NULL;
    if (cu.GetErrorString && cu.GetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "a CUDA error";
}

static uintptr_t seg_alloc(void *ctx, int dev, uintptr_t stream, size_t n, char *why, size_t wn);
static void seg_free(void *ctx, int dev, uintptr_t base, size_t n);

/* ---- loading the driver, finding the devices ------------------------------- */
static void *open_first(const char *const *names, char *err, size_t n) {
    err[0] = 0;
    for (int k = 0; names[k]; k++) {
        void *h = dlopen(names[k], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
        if (!err[0]) {
            const char *e = dlerror();
            snprintf(err, n, "%s", e ? e : "not found");
        }
    }
    return NULL;
}

static void cu_init(void) {
    const char *lim = getenv("CT_CUDA_MEMORY_LIMIT");
    if (lim && *lim) g_limit = (size_t)strtoull(lim, NULL, 10);
    static const char *const libs[] = {"libcuda.so.1", "libcuda.so", NULL};
    char err[256];
    void *h = open_first(libs, err, sizeof err);
    if (!h) {
        snprintf(g_why, sizeof g_why, "no CUDA device: the CUDA driver libcuda.so.1 cannot be loaded (%s)", err);
        return;
    }
#define CT_CU_LOAD(ret, field, sym, params)                                                         \
    *(void **)&cu.field = dlsym(h, sym);                                                           \
    if (!cu.field) {                                                                               \
        snprintf(g_why, sizeof g_why, "no CUDA device: %s is missing from libcuda.so.1 (driver too old)", sym); \
        return;                                                                                    \
    }
    CT_CU_FUNCS(CT_CU_LOAD)
#undef CT_CU_LOAD
    /* the timing of events under its newer name where the driver has it */
    void *et = dlsym(h, "cuEventElapsedTime_v2");
    if (et) *(void **)&cu.EventElapsedTime = et;
    CUresult r = cu.Init(0);
    if (r != CUDA_SUCCESS) {
        snprintf(g_why, sizeof g_why, "no CUDA device: cuInit failed (%s)", cu_err(r));
        return;
    }
    int n = 0;
    r = cu.DeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n <= 0) {
        snprintf(g_why, sizeof g_why, "no CUDA device: the driver sees no GPU (%s)",
                 r != CUDA_SUCCESS ? cu_err(r) : "0 devices");
        return;
    }
    if (n > CU_MAX_DEV) n = CU_MAX_DEV;
    g_devs = calloc((size_t)n, sizeof *g_devs);
    if (!g_devs) {
        snprintf(g_why, sizeof g_why, "no CUDA device: out of host memory");
        return;
    }
    for (int k = 0; k < n; k++) {
        cu_dev *d = &g_devs[g_ndev];
        if (cu.DeviceGet(&d->dev, k) != CUDA_SUCCESS) continue;
        if ((r = cu.DevicePrimaryCtxRetain(&d->ctx, d->dev)) != CUDA_SUCCESS) {
            snprintf(g_why, sizeof g_why, "no CUDA device: cuda:%d has no context (%s)", k, cu_err(r));
            continue;
        }
        cu.DeviceGetName(d->name, (int)sizeof d->name - 1, d->dev);
        cu.DeviceGetAttribute(&d->major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
        cu.DeviceGetAttribute(&d->minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
        cu.DeviceTotalMem(&d->total_mem, d->dev);
        g_ndev++;
    }
    if (g_ndev == 0) return;
    ct__calloc_backend be = {"cuda", seg_alloc, seg_free, NULL, g_limit, "CT_CUDA_MEMORY_LIMIT"};
    if (!(g_calloc = ct__calloc_new(CT_CUDA, &be, g_ndev))) {
        snprintf(g_why, sizeof g_why, "no CUDA device: out of host memory for the allocator");
        g_ndev = 0;
        return;
    }
    static const char *const blas[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so", NULL};
    void *hb = open_first(blas, err, sizeof err);
    if (!hb) {
        snprintf(g_cublas_why, sizeof g_cublas_why, "cuBLAS (libcublas.so) cannot be loaded: %s", err);
        return;
    }
#define CT_CB_LOAD(ret, field, sym, params)                                                         \
    *(void **)&cb.field = dlsym(hb, sym);                                                          \
    if (!cb.field) {                                                                               \
        snprintf(g_cublas_why, sizeof g_cublas_why, "%s is missing from libcublas.so", sym);       \
        return;                                                                                    \
    }
    CT_CUBLAS_FUNCS(CT_CB_LOAD)
#undef CT_CB_LOAD
    g_have_cublas = true;
}

static int cu_count(void) {
    pthread_once(&g_once, cu_init);
    return g_ndev;
}

static const char *cu_why_none(void) { return cu_count() == 0 ? g_why : NULL; }

bool ct_cuda_is_available(void) {
    if (cu_count() > 0) return true;
    ct__error(CT_ERR_DEVICE, "%s", g_why);
    return false;
}

int ct_cuda_device_count(void) {
    int n = cu_count();
    if (n == 0) ct__error(CT_ERR_DEVICE, "%s", g_why);
    return n;
}

/* Error unless device d exists; makes its context current on this thread. */
static ct_status use_dev(const char *op, int d) {
    if (d < 0 || d >= cu_count()) {
        if (g_ndev == 0) return ct__error_status(CT_ERR_DEVICE, "%s: device cuda:%d is not available: %s", op, d, g_why);
        return ct__error_status(CT_ERR_DEVICE, "%s: device cuda:%d is not available (%d cuda device%s)", op, d,
                                g_ndev, g_ndev == 1 ? "" : "s");
    }
    if (tl_ctx_dev != d) {
        CUresult r = cu.CtxSetCurrent(g_devs[d].ctx);
        if (r != CUDA_SUCCESS)
            return ct__error_status(CT_ERR_DEVICE, "%s: cuda:%d: cannot make its context current (%s)", op, d,
                                    cu_err(r));
        tl_ctx_dev = d;
    }
    return CT_OK;
}

static CUstream cur_stream(int d) {
    ct_cuda_stream *s = d >= 0 && d < CU_MAX_DEV ? tl_stream[d] : NULL;
    return s ? s->s : NULL;
}

static ct_status cu_fail(const char *what, int d, CUresult r) {
    return ct__error_status(r == CUDA_ERROR_OUT_OF_MEMORY ? CT_ERR_OOM : CT_ERR_DEVICE, "cuda:%d: %s failed (%s)",
                            d, what, cu_err(r));
}

const char *ct_cuda_get_device_name(int device) {
    if (use_dev("get_device_name", device)) return NULL;
    return g_devs[device].name;
}

ct_status ct_cuda_get_device_capability(int device, int *major, int *minor) {
    CT_NULLCHECK_OP_S("get_device_capability", major);
    CT_NULLCHECK_OP_S("get_device_capability", minor);
    ct_status st = use_dev("get_device_capability", device);
    if (st) return st;
    *major = g_devs[device].major;
    *minor = g_devs[device].minor;
    return CT_OK;
}

ct_status ct_cuda_synchronize(int device) {
    ct_status st = use_dev("synchronize", device);
    if (st) return st;
    CUresult r = cu.CtxSynchronize();
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("synchronize", device, r);
}

/* ---- memory ---------------------------------------------------------------- */
static uintptr_t seg_alloc(void *ctx, int dev, uintptr_t stream, size_t n, char *why, size_t wn) {
    (void)ctx; (void)stream;
    if (use_dev("alloc", dev)) {
        snprintf(why, wn, "%s", ct_last_error());
        ct_clear_error();
        return 0;
    }
    CUdeviceptr p = 0;
    CUresult r = cu.MemAlloc(&p, n);
    if (r != CUDA_SUCCESS) {
        size_t fr = 0, tot = 0;
        cu.MemGetInfo(&fr, &tot);
        snprintf(why, wn, "cuMemAlloc: %s; the GPU has %zu of %zu bytes free", cu_err(r), fr, tot);
        return 0;
    }
    return (uintptr_t)p;
}

static void seg_free(void *ctx, int dev, uintptr_t base, size_t n) {
    (void)ctx; (void)n;
    if (use_dev("free", dev)) { ct_clear_error(); return; }
    /* the allocator frees a segment only when it is wholly free; its last
     * users may still be queued: wait for the device first */
    cu.CtxSynchronize();
    cu.MemFree((CUdeviceptr)base);
}

static void *cuda_alloc(size_t nbytes, int index) {
    if (use_dev("alloc", index)) return NULL;
    return ct__calloc_alloc(g_calloc, index, (uintptr_t)cur_stream(index), nbytes);
}

static void cuda_free(void *p, size_t nbytes, int index) {
    (void)nbytes; (void)index;
    if (g_calloc) ct__calloc_free(g_calloc, p);
}

static ct_status cuda_copy_from_host(void *dst, const void *src, size_t n, int index) {
    if (!n) return CT_OK;
    ct_status st = use_dev("copy from the host", index);
    if (st) return st;
    CUresult r = cu.MemcpyHtoDAsync((CUdeviceptr)dst, src, n, cur_stream(index));
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("copying from the host", index, r);
}

static ct_status cuda_copy_to_host(void *dst, const void *src, size_t n, int index) {
    if (!n) return CT_OK;
    ct_status st = use_dev("copy to the host", index);
    if (st) return st;
    CUstream s = cur_stream(index);
    CUresult r = cu.MemcpyDtoHAsync(dst, (CUdeviceptr)src, n, s);
    if (r == CUDA_SUCCESS) r = cu.StreamSynchronize(s); /* the host reads it next */
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("copying to the host", index, r);
}

static ct_status cuda_copy_on_device(void *dst, const void *src, size_t n, int index) {
    if (!n) return CT_OK;
    ct_status st = use_dev("copy", index);
    if (st) return st;
    CUstream s = cur_stream(index);
    const char *d = dst, *sr = src;
    CUresult r;
    if (d < sr + n && sr < d + n && d != sr) { /* overlapping (memmove): through a temporary */
        void *t = ct__calloc_alloc(g_calloc, index, (uintptr_t)s, n);
        if (!t) return ct_last_error_code();
        r = cu.MemcpyDtoDAsync((CUdeviceptr)t, (CUdeviceptr)src, n, s);
        if (r == CUDA_SUCCESS) r = cu.MemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)t, n, s);
        ct__calloc_free(g_calloc, t); /* reused only on s, after these copies */
    } else {
        r = d == sr ? CUDA_SUCCESS : cu.MemcpyDtoDAsync((CUdeviceptr)dst, (CUdeviceptr)src, n, s);
    }
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("copying on the device", index, r);
}

static ct_status cuda_memset(void *dst, int byte, size_t n, int index) {
    if (!n) return CT_OK;
    ct_status st = use_dev("memset", index);
    if (st) return st;
    CUresult r = cu.MemsetD8Async((CUdeviceptr)dst, (unsigned char)byte, n, cur_stream(index));
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("memset", index, r);
}

static ct_status cuda_sync(int index) { return ct_cuda_synchronize(index); }

static const ct_device_vtbl k_cuda = {
    .name = "cuda",
    .caps = 0,
    .count = cu_count,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy_from_host = cuda_copy_from_host,
    .copy_to_host = cuda_copy_to_host,
    .copy_on_device = cuda_copy_on_device,
    .memset = cuda_memset,
    .synchronize = cuda_sync,
    .why_none = cu_why_none,
};

/* ---- streams and events ----------------------------------------------------- */
ct_cuda_stream *ct_cuda_stream_new(int device) {
    if (use_dev("Stream", device)) return NULL;
    ct_cuda_stream *s = calloc(1, sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "Stream: out of host memory");
    s->device = device;
    CUresult r = cu.StreamCreate(&s->s, CU_STREAM_DEFAULT);
    if (r != CUDA_SUCCESS) {
        free(s);
        cu_fail("cuStreamCreate", device, r);
        return NULL;
    }
    return s;
}

void ct_cuda_stream_free(ct_cuda_stream *s) {
    if (!s) return;
    if (!use_dev("Stream", s->device)) {
        cu.StreamSynchronize(s->s);
        cu.StreamDestroy(s->s);
    }
    if (tl_stream[s->device] == s) tl_stream[s->device] = NULL;
    free(s);
}

ct_status ct_cuda_set_stream(ct_cuda_stream *s) {
    if (!s) {
        for (int d = 0; d < CU_MAX_DEV; d++) tl_stream[d] = NULL;
        return CT_OK;
    }
    ct_status st = use_dev("set_stream", s->device);
    if (st) return st;
    tl_stream[s->device] = s;
    return CT_OK;
}

ct_cuda_stream *ct_cuda_current_stream(int device) {
    if (use_dev("current_stream", device)) return NULL;
    return tl_stream[device];
}

ct_status ct_cuda_stream_synchronize(int device, ct_cuda_stream *s) {
    if (s) device = s->device;
    ct_status st = use_dev("Stream.synchronize", device);
    if (st) return st;
    CUresult r = cu.StreamSynchronize(s ? s->s : NULL);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("cuStreamSynchronize", device, r);
}

ct_cuda_event *ct_cuda_event_new(int device, bool enable_timing) {
    if (use_dev("Event", device)) return NULL;
    ct_cuda_event *e = calloc(1, sizeof *e);
    if (!e) return ct__error(CT_ERR_OOM, "Event: out of host memory");
    e->device = device;
    e->timing = enable_timing;
    CUresult r = cu.EventCreate(&e->e, enable_timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        free(e);
        cu_fail("cuEventCreate", device, r);
        return NULL;
    }
    return e;
}

void ct_cuda_event_free(ct_cuda_event *e) {
    if (!e) return;
    if (!use_dev("Event", e->device)) cu.EventDestroy(e->e);
    free(e);
}

static CUstream stream_of(ct_cuda_stream *s, int device) { return s ? s->s : cur_stream(device); }

ct_status ct_cuda_event_record(ct_cuda_event *e, ct_cuda_stream *s) {
    CT_NULLCHECK_OP_S("Event.record", e);
    if (s && s->device != e->device)
        return ct__error_status(CT_ERR_DEVICE, "Event.record: the event is on cuda:%d, the stream on cuda:%d",
                                e->device, s->device);
    ct_status st = use_dev("Event.record", e->device);
    if (st) return st;
    CUresult r = cu.EventRecord(e->e, stream_of(s, e->device));
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("cuEventRecord", e->device, r);
}

ct_status ct_cuda_event_synchronize(ct_cuda_event *e) {
    CT_NULLCHECK_OP_S("Event.synchronize", e);
    ct_status st = use_dev("Event.synchronize", e->device);
    if (st) return st;
    CUresult r = cu.EventSynchronize(e->e);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("cuEventSynchronize", e->device, r);
}

bool ct_cuda_event_query(ct_cuda_event *e) {
    if (!e || use_dev("Event.query", e->device)) return false;
    return cu.EventQuery(e->e) == CUDA_SUCCESS;
}

ct_status ct_cuda_event_wait(ct_cuda_event *e, ct_cuda_stream *s) {
    CT_NULLCHECK_OP_S("Event.wait", e);
    int d = s ? s->device : e->device;
    ct_status st = use_dev("Event.wait", d);
    if (st) return st;
    CUresult r = cu.StreamWaitEvent(stream_of(s, d), e->e, 0);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail("cuStreamWaitEvent", d, r);
}

float ct_cuda_event_elapsed_time(ct_cuda_event *start, ct_cuda_event *end) {
    if (!start || !end) {
        ct__null_arg("Event.elapsed_time", "an event");
        return -1;
    }
    if (!start->timing || !end->timing) {
        ct__error(CT_ERR_ARG, "Event.elapsed_time: both events need enable_timing");
        return -1;
    }
    if (use_dev("Event.elapsed_time", start->device)) return -1;
    float ms = -1;
    CUresult r = cu.EventElapsedTime(&ms, start->e, end->e);
    if (r != CUDA_SUCCESS) {
        cu_fail("cuEventElapsedTime", start->device, r);
        return -1;
    }
    return ms;
}

/* ---- pinned memory ---------------------------------------------------------- */
static void pinned_free(void *data, void *ctx) {
    (void)ctx;
    /* an asynchronous copy from it may still be queued: wait for the device */
    if (use_dev("pin_memory", 0)) { ct_clear_error(); return; }
    cu.CtxSynchronize();
    cu.MemFreeHost(data);
}

ct_tensor *ct_pin_memory(ct_tensor *t) {
    CT_NULLCHECK(t);
    if (t->storage->device != CT_CPU)
        return ct__error(CT_ERR_DEVICE, "pin_memory: only cpu tensors can be pinned (got one on %s)",
                         ct_device_name(t->storage->device));
    if (use_dev("pin_memory", 0)) return NULL;
    ct_tensor *c = ct__contig_as(t, t->dtype);
    if (!c) return NULL;
    size_t n = (size_t)ct_numel(t) * ct_dtype_size(t->dtype);
    void *p = NULL;
    CUresult r = cu.MemHostAlloc(&p, n ? n : 1, CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
        ct_release(c);
        return ct__error(CT_ERR_OOM, "pin_memory: cuMemHostAlloc of %zu bytes failed (%s)", n, cu_err(r));
    }
    if (n) memcpy(p, ct__ptr(c), n);
    ct_release(c);
    ct_tensor *out = ct_from_blob(p, t->sizes, t->ndim, NULL, t->dtype, pinned_free, NULL);
    if (!out) cu.MemFreeHost(p);
    return out;
}

bool ct_is_pinned(const ct_tensor *t) {
    return t && t->storage && t->storage->device == CT_CPU && t->storage->deleter == pinned_free;
}

/* ---- NVRTC: kernel text to CUBIN ---------------------------------------------- */
static ct_nvrtc_api nv;
static char g_nv_why[256];
static pthread_once_t g_nv_once = PTHREAD_ONCE_INIT;

static void nv_init(void) {
    static const char *const libs[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                                       "/usr/local/cuda/lib64/libnvrtc.so", NULL};
    char err[200];
    void *h = open_first(libs, err, sizeof err);
    if (!h) {
        snprintf(g_nv_why, sizeof g_nv_why, "NVRTC (libnvrtc.so) cannot be loaded (%s)", err);
        return;
    }
#define CT_NV_LOAD(ret, field, sym, params)                                                         \
    *(void **)&nv.field = dlsym(h, sym);                                                           \
    if (!nv.field) {                                                                               \
        snprintf(g_nv_why, sizeof g_nv_why, "%s is missing from libnvrtc.so", sym);                \
        nv.CreateProgram = NULL;                                                                   \
        return;                                                                                    \
    }
    CT_NVRTC_FUNCS(CT_NV_LOAD)
#undef CT_NV_LOAD
}

const char *ct__cuda_nvrtc_missing(void) {
    pthread_once(&g_nv_once, nv_init);
    return nv.CreateProgram ? NULL : g_nv_why;
}

ct_status ct__cuda_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *cubin_size,
                                 char *log, size_t logn) {
    if (log && logn) log[0] = 0;
    if (cubin) *cubin = NULL;
    const char *miss = ct__cuda_nvrtc_missing();
    if (miss) return ct__error_status(CT_ERR_DEVICE, "cuda: %s", miss);
    nvrtcProgram p;
    nvrtcResult r = nv.CreateProgram(&p, src, "ctorch_kernel.cu", 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) return ct__error_status(CT_ERR_DEVICE, "cuda: nvrtcCreateProgram: %s", nv.GetErrorString(r));
    char archopt[64];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    const char *opts[] = {archopt, "--std=c++17", "-default-device", "--fmad=false", "-w"};
    r = nv.CompileProgram(p, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r != NVRTC_SUCCESS) {
        size_t ls = 0;
        nv.GetProgramLogSize(p, &ls);
        char *l = malloc(ls + 1);
        if (l) {
            l[0] = 0;
            nv.GetProgramLog(p, l);
            l[ls] = 0;
            if (log && logn) snprintf(log, logn, "%s", l);
        }
        ct_status st = ct__error_status(CT_ERR_DEVICE, "cuda: NVRTC could not compile the kernel for %s (%s): %.1500s",
                                        arch, nv.GetErrorString(r), l ? l : "");
        free(l);
        nv.DestroyProgram(&p);
        return st;
    }
    if (cubin) {
        size_t n = 0;
        nv.GetCUBINSize(p, &n);
        *cubin = malloc(n ? n : 1);
        if (!*cubin) {
            nv.DestroyProgram(&p);
            return ct__error_status(CT_ERR_OOM, "cuda: out of host memory for a kernel");
        }
        nv.GetCUBIN(p, *cubin);
        if (cubin_size) *cubin_size = n;
    }
    nv.DestroyProgram(&p);
    return CT_OK;
}

/* ---- kernels: built on first use, cached by source and device ------------------- */
typedef struct kentry {
    struct kentry *next;
    char *src;
    int dev;
    CUmodule mod;
    CUfunction fn;
} kentry;

#define KBUCKETS 512
static kentry *g_kcache[KBUCKETS];
static pthread_mutex_t g_kmu = PTHREAD_MUTEX_INITIALIZER;
static long g_kbuilt;


/* the function "k" of src (CUDA C) on device dev (its context current) */
static CUfunction get_kernel(const char *what, const char *src, int dev) {
    pthread_mutex_lock(&g_kmu);
    kentry **b = &g_kcache[ct__gpu_text_hash(src) % KBUCKETS];
    for (kentry *e = *b; e; e = e->next)
        if (e->dev == dev && strcmp(e->src, src) == 0) {
            CUfunction f = e->fn;
            pthread_mutex_unlock(&g_kmu);
            return f;
        }
    char arch[32];
    snprintf(arch, sizeof arch, "sm_%d%d", g_devs[dev].major, g_devs[dev].minor);
    void *bin = NULL;
    if (ct__cuda_nvrtc_compile(src, arch, &bin, NULL, NULL, 0)) {
        pthread_mutex_unlock(&g_kmu);
        return ct__error(CT_ERR_DEVICE, "%s: %s", what, ct_last_error());
    }
    kentry *e = calloc(1, sizeof *e);
    char *copy = strdup(src);
    CUresult r = e && copy ? cu.ModuleLoadData(&e->mod, bin) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) r = cu.ModuleGetFunction(&e->fn, e->mod, "k");
    free(bin);
    if (r != CUDA_SUCCESS) {
        free(e);
        free(copy);
        pthread_mutex_unlock(&g_kmu);
        return ct__error(CT_ERR_DEVICE, "%s: cuda:%d: loading the kernel failed (%s)", what, dev, cu_err(r));
    }
    e->src = copy;
    e->dev = dev;
    e->next = *b;
    *b = e;
    g_kbuilt++;
    CUfunction f = e->fn;
    pthread_mutex_unlock(&g_kmu);
    return f;
}

/* The geometry of one launch, as the OpenCL device's (ct_geom in the
 * kernel text): dim 0 innermost, byte strides per operand. */
#define CU_NT 4
_Static_assert(CT_MAX_DIMS == 16, "the kernels' ct_geom has 16 dims");
typedef struct cu_geom {
    int64_t ndim, numel;
    int64_t shape[CT_MAX_DIMS];
    int64_t st[CT_MAX_DIMS][CU_NT];
    int64_t off[CU_NT];
} cu_geom;

static const char k_head[] =
    "typedef unsigned char uchar; typedef unsigned short ushort; typedef unsigned int uint;\n"
    "typedef unsigned long ulong;\n"
    "typedef struct { long ndim, numel; long shape[16]; long st[16][4]; long off[4]; } ct_geom;\n"
    "#define CT_OFFSETS(NT) \\\n"
    "    long i = (long)blockIdx.x * (long)blockDim.x + (long)threadIdx.x; if (i >= g.numel) return; \\\n"
    "    long o[4] = {0, 0, 0, 0}; long r = i; \\\n"
    "    for (int d = 0; d < g.ndim; d++) { long c = r % g.shape[d]; r /= g.shape[d]; \\\n"
    "        for (int k = 0; k < (NT); k++) o[k] += c * g.st[d][k]; }\n";

/* k_head + body, malloc'd (NULL: out of memory) */
static char *full_source(const char *body) {
    size_t n = strlen(k_head) + strlen(body) + 2;
    char *src = malloc(n);
    if (src) snprintf(src, n, "%s%s", k_head, body);
    return src;
}

/* declined (a dtype, a layout this backend has no code for): dispatch runs
 * the cpu fallback (../fallback.c) */
static ct_status no_kernel(const char *op, const char *why) { return ct__no_device_kernel(op, CT_CUDA, why); }

/* Runs the kernel of body over ts (ts[0] the output) with the operands'
 * device pointers (each at its first element) and the iterator's strides:
 * k(char *p0, const char *p1, ..., ct_geom g[, extra]). */
static ct_status run_kernel(const char *what, const char *body, ct_tensor *const *ts, int nt, const void *extra,
                            size_t extra_size) {
    int dev = ts[0]->storage->device_index;
    ct_status st = use_dev(what, dev);
    if (st) return st;
    ct_iter it;
    if ((st = ct__iter_build(&it, ts, nt))) return st;
    if (it.numel == 0) return CT_OK;
    cu_geom g;
    memset(&g, 0, sizeof g);
    g.ndim = it.ndim;
    g.numel = it.numel;
    for (int d = 0; d < it.ndim; d++) {
        g.shape[d] = it.shape[d];
        for (int k = 0; k < nt; k++) g.st[d][k] = it.strides[d][k];
    }
    CUdeviceptr p[CU_NT] = {0, 0, 0, 0};
    for (int k = 0; k < nt; k++) {
        if (ts[k]->storage->device != CT_CUDA || ts[k]->storage->device_index != dev)
            return ct__error_status(CT_ERR_DEVICE, "%s: operand %d is not on cuda:%d", what, k, dev);
        p[k] = (CUdeviceptr)it.base[k];
    }
    char *src = full_source(body);
    if (!src) return ct__error_status(CT_ERR_OOM, "%s: out of host memory", what);
    CUfunction f = get_kernel(what, src, dev);
    free(src);
    if (!f) return ct_last_error_code();
    void *args[CU_NT + 2];
    for (int k = 0; k < CU_NT; k++) args[k] = &p[k];
    args[CU_NT] = &g;
    args[CU_NT + 1] = (void *)extra;
    (void)extra_size;
    unsigned block = 256;
    uint64_t grid = ((uint64_t)it.numel + block - 1) / block;
    if (grid > 0x7fffffffu) return ct__error_status(CT_ERR_OVERFLOW, "%s: %lld elements are too many for one launch",
                                                    what, (long long)it.numel);
    CUresult r = cu.LaunchKernel(f, (unsigned)grid, 1, 1, block, 1, 1, 0, cur_stream(dev), args, NULL);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail(what, dev, r);
}

static const char k_sig[] =
    "extern \"C\" __global__ void k(char *p0, const char *p1, const char *p2, const char *p3, const ct_geom g";

static const char *bits_type(size_t es) {
    switch (es) {
    case 1: return "uchar";
    case 2: return "ushort";
    case 4: return "uint";
    case 8: return "ulong";
    case 16: return "ulonglong2";
    default: return NULL;
    }
}

/* ---- the OpenCL device's generated kernels, run here ----------------------------
 * (../gpu_dialect.h): the elementwise ops, reductions, softmax/log_softmax,
 * cumsum/cumprod, arange/linspace/eye and conversions call the OpenCL
 * device's kernel function with ct__gpu_foreign set to this launcher; the
 * OpenCL C text it generates becomes CUDA C++ through the dialect prelude
 * and is compiled by NVRTC (cached like the rest), launched over the same
 * geometry with work-groups as blocks. */
static ct_status foreign_launch(const char *what, const char *prelude, const char *helpers, const char *body, int dev,
                                void *const bufs[4], const void *geom, size_t gsize, const void *extra, size_t esize,
                                int64_t numel, size_t lsz) {
    (void)gsize; (void)esize; /* the driver knows the parameters' sizes from the kernel */
    ct_status st = use_dev(what, dev);
    if (st) return st;
    if (numel <= 0) return CT_OK;
    size_t n = strlen(ct__cuda_dialect_prelude) + strlen(prelude) + strlen(helpers) + strlen(body) + 4;
    char *src = malloc(n);
    if (!src) return ct__error_status(CT_ERR_OOM, "%s: out of host memory", what);
    snprintf(src, n, "%s%s%s\n%s", ct__cuda_dialect_prelude, prelude, helpers, body);
    CUfunction f = get_kernel(what, src, dev);
    free(src);
    if (!f) return ct_last_error_code();
    CUdeviceptr p[4];
    for (int k = 0; k < 4; k++) p[k] = (CUdeviceptr)bufs[k];
    void *args[6] = {&p[0], &p[1], &p[2], &p[3], (void *)geom, (void *)extra};
    if (lsz == 0 || lsz > 1024) lsz = 64;
    uint64_t grid = ((uint64_t)numel + lsz - 1) / lsz;
    if (grid > 0x7fffffffu)
        return ct__error_status(CT_ERR_OVERFLOW, "%s: %lld elements are too many for one launch", what, (long long)numel);
    CUresult r = cu.LaunchKernel(f, (unsigned)grid, 1, 1, (unsigned)lsz, 1, 1, 0, cur_stream(dev), args, NULL);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail(what, dev, r);
}

/* a kernel file's text (ct__ocl_launch's): its parameters as given, blocks
 * of 256 over global work items (the kernels check their count) */
static ct_status foreign_launch_args(const char *what, const char *prelude, const char *body, int dev,
                                     void *const *vals, const size_t *sizes, int nvals, size_t global) {
    (void)sizes; /* the driver knows the parameters' sizes from the kernel */
    ct_status st = use_dev(what, dev);
    if (st) return st;
    if (global == 0) return CT_OK;
    size_t n = strlen(ct__cuda_dialect_prelude) + strlen(prelude) + strlen(body) + 4;
    char *src = malloc(n);
    if (!src) return ct__error_status(CT_ERR_OOM, "%s: out of host memory", what);
    snprintf(src, n, "%s%s\n%s", ct__cuda_dialect_prelude, prelude, body);
    CUfunction f = get_kernel(what, src, dev);
    free(src);
    if (!f) return ct_last_error_code();
    const unsigned block = 256;
    uint64_t grid = ((uint64_t)global + block - 1) / block;
    if (grid > 0x7fffffffu)
        return ct__error_status(CT_ERR_OVERFLOW, "%s: %zu work items are too many for one launch", what, global);
    (void)nvals;
    CUresult r = cu.LaunchKernel(f, (unsigned)grid, 1, 1, block, 1, 1, 0, cur_stream(dev), (void **)vals, NULL);
    return r == CUDA_SUCCESS ? CT_OK : cu_fail(what, dev, r);
}

static void *foreign_upload(int dev, const void *host, size_t n) {
    if (use_dev("upload", dev)) return NULL;
    CUstream s = cur_stream(dev);
    void *p = ct__calloc_alloc(g_calloc, dev, (uintptr_t)s, n);
    if (!p) return NULL;
    CUresult r = cu.MemcpyHtoDAsync((CUdeviceptr)p, host, n, s); /* pageable: staged before it returns */
    if (r != CUDA_SUCCESS) {
        ct__calloc_free(g_calloc, p);
        cu_fail("copying a cpu number to the device", dev, r);
        return NULL;
    }
    return p;
}

/* the launches using p are queued on this stream: its block is reused
 * only by later work on the same stream */
static void foreign_release(void *p) { ct__calloc_free(g_calloc, p); }

static ct_status foreign_gemm(const char *what, int dev, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N,
                              int64_t K, double alpha, const void *A, int64_t lda, int64_t sa, const void *B,
                              int64_t ldb, int64_t sb, double beta, void *C, int64_t ldc, int64_t sc, int64_t batch);

static const ct_gpu_foreign k_foreign = {CT_CUDA,        foreign_launch,  foreign_launch_args,
                                         foreign_upload, foreign_release, foreign_gemm};

static ct_status k_shared(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    const char *name = ct__op_info[a->op].name;
    ct_kernel_fn f = ct__kernels[CT_OPENCL][a->op];
    if (!f) return no_kernel(name, "the OpenCL device generates none either (a build without OpenCL)");
    const ct_gpu_foreign *prev = ct__gpu_foreign;
    ct__gpu_foreign = &k_foreign;
    ct_status st = f(out, nout, in, nin, a);
    ct__gpu_foreign = prev;
    return st;
}

/* the convolutions (k_conv.c): the OpenCL kernel function's im2col/col2im
 * and copy texts through the launcher, its GEMMs through foreign_gemm
 * (cuBLAS); without cuBLAS the call is declined (the cpu fallback) */
static ct_status k_shared_blas(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    if (!g_have_cublas) return no_kernel(ct__op_info[a->op].name, g_cublas_why);
    return k_shared(out, nout, in, nin, a);
}

/* the ops whose OpenCL kernel functions take the foreign path */
static bool shared_op(ct_op op) {
    if (ct__ew_kind(op) != CT_EWK_NONE) return true;
    switch (op) {
    case CT_OP_sum: case CT_OP_mean: case CT_OP_nansum: case CT_OP_nanmean: case CT_OP_prod:
    case CT_OP_amax: case CT_OP_amin: case CT_OP_max_dim: case CT_OP_min_dim: case CT_OP_argmax:
    case CT_OP_argmin: case CT_OP_all: case CT_OP_any: case CT_OP_count_nonzero:
    case CT_OP_softmax: case CT_OP_log_softmax: case CT_OP_cumsum: case CT_OP_cumprod:
    case CT_OP_arange: case CT_OP_linspace: case CT_OP_eye:
    /* the kernel files' ops that launch through ct__ocl_launch only */
    case CT_OP_index_select: case CT_OP_gather: case CT_OP_scatter: case CT_OP_scatter_add:
    case CT_OP_scatter_reduce: case CT_OP_masked_fill: case CT_OP_im2col: case CT_OP_col2im:
    case CT_OP_max_pool: case CT_OP_max_pool_backward: case CT_OP_sgd_step: case CT_OP_adam_step:
    case CT_OP_uniform: case CT_OP_normal: case CT_OP_randint: case CT_OP_bernoulli: case CT_OP_exponential:
    case CT_OP_layer_norm_fwd: case CT_OP_layer_norm_bwd:
    case CT_OP_adaptive_avg_pool: case CT_OP_adaptive_max_pool:
        return true;
    default:
        return false;
    }
}

static const char k_copy_body_fmt[] =
    "%s) { CT_OFFSETS(2)\n *(%s *)(p0 + o[0]) = *(const %s *)(p1 + o[1]); }\n";

static const char k_fill_body_fmt[] = "%s, const %s v) { CT_OFFSETS(1)\n *(%s *)(p0 + o[0]) = v; }\n";

static ct_status k_copy(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    ct_dtype dd = out[0]->dtype, sd = in[0]->dtype;
    if (dd != sd) return k_shared(out, nout, in, nin, a); /* a conversion: the OpenCL device's kernel text */
    const char *T = bits_type(ct_dtype_size(dd));
    char body[512];
    snprintf(body, sizeof body, k_copy_body_fmt, k_sig, T, T);
    ct_tensor *ts[2] = {out[0], in[0]};
    return run_kernel("copy", body, ts, 2, NULL, 0);
}

static ct_status k_fill(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    size_t es = ct_dtype_size(out[0]->dtype);
    unsigned char v[16] = {0};
    if (a->p.factory.is_int) ct__store_i64(v, out[0]->dtype, a->p.factory.int_value);
    else ct__store_f64(v, out[0]->dtype, a->p.factory.value);
    const char *T = bits_type(es);
    char body[512];
    snprintf(body, sizeof body, k_fill_body_fmt, k_sig, T, T);
    return run_kernel("fill", body, out, 1, v, es);
}

/* ---- matmul through cuBLAS ------------------------------------------------------
 * Row-major C[M,N] = A[M,K] @ B[K,N] is column-major C^T = B^T A^T: cuBLAS's
 * first operand is B, its second A, m = N, n = M.  A row-major matrix X
 * [R, C] with element strides (rs, cs) is, column-major, X^T with leading
 * dimension rs when cs == 1 (op N), or X itself with leading dimension cs
 * when rs == 1 (op T); any other layout is copied contiguous first. */
static bool blas_view(int64_t rows, int64_t cols, int64_t rs, int64_t cs, cublasOperation_t *op, int64_t *ld) {
    if (cols <= 1 || cs == 1) {
        if (rows <= 1) rs = cols > 1 ? cols : 1;
        if (rs >= (cols > 1 ? cols : 1)) { *op = CUBLAS_OP_N; *ld = rs; return true; }
    }
    if (rows <= 1 || rs == 1) {
        if (cols <= 1) cs = rows > 1 ? rows : 1;
        if (cs >= (rows > 1 ? rows : 1)) { *op = CUBLAS_OP_T; *ld = cs; return true; }
    }
    return false;
}

/* the stride between the nb batch dims' matrices when one stride walks them
 * all (row-major order of the batch dims), else false */
static bool batch_stride(const ct_tensor *t, int nb, const int64_t *bsizes, int64_t *stride) {
    int64_t s = 0;
    bool set = false;
    for (int d = nb - 1; d >= 0; d--) {
        if (bsizes[d] == 1) continue;
        int64_t want = t->sizes[d] == 1 ? 0 : t->strides[d];
        if (!set) { s = want; set = true; continue; }
        /* the next outer dim must step over the inner ones exactly */
        int64_t inner = 1;
        for (int e = d + 1; e < nb; e++) inner *= bsizes[e];
        if (want != s * inner) return false;
    }
    *stride = s;
    return true;
}

static ct_status blas_handle(int dev, cublasHandle_t *h) {
    if (!g_have_cublas) return no_kernel("matmul", g_cublas_why);
    pthread_mutex_lock(&g_blas_mu);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (!g_devs[dev].blas) s = cb.Create(&g_devs[dev].blas);
    *h = g_devs[dev].blas;
    pthread_mutex_unlock(&g_blas_mu);
    if (s != CUBLAS_STATUS_SUCCESS)
        return ct__error_status(CT_ERR_DEVICE, "matmul: cuda:%d: cublasCreate failed (status %d)", dev, (int)s);
    return CT_OK;
}

/* the loaded entry points have the toolkit header's types */
_Static_assert(__builtin_types_compatible_p(__typeof__(&cublasGemmStridedBatchedEx),
                                            __typeof__(((ct_cublas_api *)0)->GemmStridedBatchedEx)),
               "cublasGemmStridedBatchedEx's type");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cublasSgemmStridedBatched),
                                            __typeof__(((ct_cublas_api *)0)->SgemmStridedBatched)),
               "cublasSgemmStridedBatched's type");

static ct_status k_gemm(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const char *name = ct__op_info[a->op].name;
    ct_tensor *C = out[0], *A = in[0], *B = in[1], *bias = nin > 2 ? in[2] : NULL;
    int nd = C->ndim, nb = nd - 2;
    /* float16 / bfloat16: cublasGemmStridedBatchedEx, products summed in float32 */
    bool half = C->dtype == CT_F16 || C->dtype == CT_BF16;
    if (C->dtype != CT_F32 && C->dtype != CT_F64 && !half) return no_kernel(name, ct_dtype_name(C->dtype));
    if (nd < 2 || A->ndim != nd || B->ndim != nd)
        return ct__error_status(CT_ERR_SHAPE, "%s: internal gemm rank mismatch", name);
    if (A->dtype != C->dtype || B->dtype != C->dtype)
        return ct__error_status(CT_ERR_DTYPE, "%s: kernel expects %s operands", name, ct_dtype_name(C->dtype));
    if (!ct__is_contiguous(C)) return no_kernel(name, "a strided output");
    if (bias && (bias->dtype != C->dtype || !ct__is_contiguous(bias) || ct_numel(bias) != C->sizes[nd - 1]))
        return ct__error_status(CT_ERR_SHAPE, "%s: internal gemm bias mismatch", name);
    int dev = C->storage->device_index;
    ct_status st = use_dev(name, dev);
    if (st) return st;
    int64_t M = C->sizes[nd - 2], N = C->sizes[nd - 1], K = A->sizes[nd - 1], nbatch = 1;
    for (int d = 0; d < nb; d++) nbatch *= C->sizes[d];
    if (nbatch == 0 || M == 0 || N == 0) return CT_OK;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || nbatch > INT32_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "%s: matrix dims too large for cuBLAS", name);
    cublasHandle_t h = NULL;
    if ((st = blas_handle(dev, &h))) return st;
    double alpha = a->p.linalg.alpha, beta = a->p.linalg.beta;
    size_t es = ct_dtype_size(C->dtype);
    if (bias) { /* C's rows = the bias (broadcast by the iterator), then C = beta * C + alpha * A @ B */
        char body[512];
        const char *T = bits_type(es);
        snprintf(body, sizeof body, k_copy_body_fmt, k_sig, T, T);
        ct_tensor *ts[2] = {C, bias};
        if ((st = run_kernel(name, body, ts, 2, NULL, 0))) return st;
    }
    if (K == 0) { /* C = beta * C: only beta 0 (the products' case) or 1 (a bias) */
        if (beta == 0 && !bias) return cuda_memset(ct__ptr(C), 0, (size_t)ct_numel(C) * es, dev);
        if (beta == 1) return CT_OK;
        return no_kernel(name, "an empty product with beta other than 0 and 1");
    }
    /* operands cuBLAS cannot read as they are: contiguous copies (freed
     * after the GEMM is queued: their blocks are reused on this stream only) */
    ct_tensor *Ac = NULL, *Bc = NULL;
    cublasOperation_t opa, opb;
    int64_t lda, ldb, sa = 0, sb = 0;
    if (!blas_view(M, K, A->strides[nd - 2], A->strides[nd - 1], &opa, &lda) || !batch_stride(A, nb, C->sizes, &sa)) {
        if (!(Ac = ct__contig_as(A, A->dtype))) return ct_last_error_code();
        A = Ac;
        if (!blas_view(M, K, A->strides[nd - 2], A->strides[nd - 1], &opa, &lda) || !batch_stride(A, nb, C->sizes, &sa)) {
            ct_release(Ac);
            return no_kernel(name, "an operand layout cuBLAS cannot read");
        }
    }
    if (!blas_view(K, N, B->strides[nd - 2], B->strides[nd - 1], &opb, &ldb) || !batch_stride(B, nb, C->sizes, &sb)) {
        if (!(Bc = ct__contig_as(B, B->dtype))) { ct_release(Ac); return ct_last_error_code(); }
        B = Bc;
        if (!blas_view(K, N, B->strides[nd - 2], B->strides[nd - 1], &opb, &ldb) || !batch_stride(B, nb, C->sizes, &sb)) {
            ct_release(Ac);
            ct_release(Bc);
            return no_kernel(name, "an operand layout cuBLAS cannot read");
        }
    }
    if (lda > INT32_MAX || ldb > INT32_MAX) {
        ct_release(Ac);
        ct_release(Bc);
        return ct__error_status(CT_ERR_OVERFLOW, "%s: a leading dimension too large for cuBLAS", name);
    }
    if (nbatch == 1) sa = sb = 0;
    cublasStatus_t bs;
    pthread_mutex_lock(&g_blas_mu); /* the handle is shared by the threads */
    bs = cb.SetStream(h, (cudaStream_t)cur_stream(dev));
    if (bs == CUBLAS_STATUS_SUCCESS) {
        if (half) {
            float fa = (float)alpha, fb = (float)beta;
            cudaDataType t = C->dtype == CT_F16 ? CUDA_R_16F : CUDA_R_16BF;
            bs = cb.GemmStridedBatchedEx(h, opb, opa, (int)N, (int)M, (int)K, &fa, ct__ptr(B), t, (int)ldb, sb,
                                         ct__ptr(A), t, (int)lda, sa, &fb, ct__ptr(C), t, (int)N, M * N, (int)nbatch,
                                         CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        } else if (C->dtype == CT_F32) {
            float fa = (float)alpha, fb = (float)beta;
            bs = cb.SgemmStridedBatched(h, opb, opa, (int)N, (int)M, (int)K, &fa, (const float *)ct__ptr(B), (int)ldb,
                                        sb, (const float *)ct__ptr(A), (int)lda, sa, &fb, (float *)ct__ptr(C),
                                        (int)N, M * N, (int)nbatch);
        } else {
            bs = cb.DgemmStridedBatched(h, opb, opa, (int)N, (int)M, (int)K, &alpha, (const double *)ct__ptr(B),
                                        (int)ldb, sb, (const double *)ct__ptr(A), (int)lda, sa, &beta,
                                        (double *)ct__ptr(C), (int)N, M * N, (int)nbatch);
        }
    }
    pthread_mutex_unlock(&g_blas_mu);
    ct_release(Ac);
    ct_release(Bc);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return ct__error_status(CT_ERR_DEVICE, "%s: cuda:%d: cuBLAS gemm (%lld x %lld x %lld, batch %lld) failed "
                                "(status %d)", name, dev, (long long)M, (long long)N, (long long)K,
                                (long long)nbatch, (int)bs);
    return CT_OK;
}

/* the kernel files' GEMM seam (../gpu_dialect.h's gemm): row-major
 * strided-batched C_b = alpha op(A_b) op(B_b) + beta C_b as cuBLAS's
 * column-major C_b^T = op(B_b)^T op(A_b)^T, one S/DgemmStridedBatched call */
static ct_status foreign_gemm(const char *what, int dev, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N,
                              int64_t K, double alpha, const void *A, int64_t lda, int64_t sa, const void *B,
                              int64_t ldb, int64_t sb, double beta, void *C, int64_t ldc, int64_t sc, int64_t batch) {
    if (!g_have_cublas) return no_kernel(what, g_cublas_why);
    if (dt != CT_F32 && dt != CT_F64) return no_kernel(what, ct_dtype_name(dt));
    ct_status st = use_dev(what, dev);
    if (st) return st;
    if (batch <= 0 || M == 0 || N == 0) return CT_OK;
    if (K == 0) return no_kernel(what, "an empty GEMM inner dimension");
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch > INT32_MAX || lda > INT32_MAX ||
        ldb > INT32_MAX || ldc > INT32_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "%s: GEMM dims too large for cuBLAS", what);
    cublasHandle_t h = NULL;
    if ((st = blas_handle(dev, &h))) return st;
    ct_gpu_colmajor_gemm g = ct__gpu_colmajor_gemm(ta, tb, M, N, K, A, lda, sa, B, ldb, sb, C, ldc, sc, batch);
    cublasOperation_t oa = g.transa == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, ob = g.transb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t bs;
    pthread_mutex_lock(&g_blas_mu);
    bs = cb.SetStream(h, (cudaStream_t)cur_stream(dev));
    if (bs == CUBLAS_STATUS_SUCCESS) {
        if (dt == CT_F32) {
            float fa = (float)alpha, fb = (float)beta;
            bs = cb.SgemmStridedBatched(h, oa, ob, (int)g.m, (int)g.n, (int)g.k, &fa, (const float *)g.a, (int)g.lda,
                                        g.stride_a, (const float *)g.b, (int)g.ldb, g.stride_b, &fb, (float *)g.c,
                                        (int)g.ldc, g.stride_c, (int)g.batch);
        } else {
            bs = cb.DgemmStridedBatched(h, oa, ob, (int)g.m, (int)g.n, (int)g.k, &alpha, (const double *)g.a,
                                        (int)g.lda, g.stride_a, (const double *)g.b, (int)g.ldb, g.stride_b, &beta,
                                        (double *)g.c, (int)g.ldc, g.stride_c, (int)g.batch);
        }
    }
    pthread_mutex_unlock(&g_blas_mu);
    if (bs != CUBLAS_STATUS_SUCCESS)
        return ct__error_status(CT_ERR_DEVICE, "%s: cuda:%d: cuBLAS gemm (%lld x %lld x %lld, batch %lld) failed "
                                "(status %d)", what, dev, (long long)M, (long long)N, (long long)K, (long long)batch,
                                (int)bs);
    return CT_OK;
}

/* The full text of every kernel this backend can generate (copy and the
 * bias rows by element size, fill by element size), for the tests to
 * compile with NVRTC where there is no GPU: n strings into out (malloc'd,
 * the caller frees each and the array); -1 when out of memory. */
int ct__cuda_builtin_sources(char ***out) {
    static const size_t sizes[] = {1, 2, 4, 8, 16};
    int n = 0, cap = 2 * (int)(sizeof sizes / sizeof sizes[0]);
    char **v = calloc((size_t)cap, sizeof *v);
    if (!v) return -1;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const char *T = bits_type(sizes[k]);
        char body[512];
        snprintf(body, sizeof body, k_copy_body_fmt, k_sig, T, T);
        v[n++] = full_source(body);
        snprintf(body, sizeof body, k_fill_body_fmt, k_sig, T, T);
        v[n++] = full_source(body);
    }
    for (int k = 0; k < n; k++)
        if (!v[k]) {
            for (int j = 0; j < n; j++) free(v[j]);
            free(v);
            return -1;
        }
    *out = v;
    return n;
}

/* kernels this process built (tests) */
long ct__cuda_kernels_built(void) { return ct__gpu_locked_count(&g_kmu, &g_kbuilt); }

/* How this backend serves op, from its kernel table (test_op_table's
 * CUDA column): "cublas" (the matmul family through cuBLAS), "nvrtc" (CUDA
 * C of its own compiled by NVRTC: copy and fill, and cat through its
 * copies; copy's dtype conversions take the OpenCL device's text), "ocl-text" (the OpenCL device's kernel
 * text through the dialect prelude and NVRTC, ../gpu_dialect.h),
 * "ocl-text+cublas" (the convolutions: the OpenCL kernel function's texts
 * and its GEMMs through cuBLAS), or NULL:
 * no kernel (dispatch runs the cpu fallback).  A kernel that declines a
 * call (a dtype, a layout) also ends in the fallback for that call. */
const char *ct__cuda_kernel_route(int op) {
    if (op < 0 || op >= CT_OP_COUNT) return NULL;
    ct_kernel_fn f = ct__kernels[CT_CUDA][op];
    if (!f) return NULL;
    if (f == k_gemm) return "cublas";
    if (f == k_copy || f == k_fill || f == ct__gpu_cat) return "nvrtc";
    if (f == k_shared) return "ocl-text";
    if (f == k_shared_blas) return "ocl-text+cublas";
    return "cuda"; /* a kernel of its own of another kind */
}

void ct__cuda_backend_register(void) {
    ct_kernel_fn *t = ct__kernels[CT_CUDA];
    t[CT_OP_copy] = k_copy;
    t[CT_OP_fill] = k_fill;
    t[CT_OP_mm] = k_gemm;
    t[CT_OP_bmm] = k_gemm;
    t[CT_OP_matmul] = k_gemm;
    t[CT_OP_cat] = ct__gpu_cat; /* its copy kernel, per input (../gpu_dialect.c) */
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (!t[op] && shared_op((ct_op)op) && ct__kernels[CT_OPENCL][op]) t[op] = k_shared;
    static const ct_op conv_ops[] = {CT_OP_conv, CT_OP_conv_transpose, CT_OP_conv_wgrad};
    for (size_t k = 0; k < sizeof conv_ops / sizeof conv_ops[0]; k++)
        if (!t[conv_ops[k]] && ct__kernels[CT_OPENCL][conv_ops[k]]) t[conv_ops[k]] = k_shared_blas;
    ct__device_register(CT_CUDA, &k_cuda);
}
