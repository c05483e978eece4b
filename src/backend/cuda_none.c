/* cuda_none.c -- ctorch/cuda.h in a build without the CUDA device
 * (-DCT_CUDA=OFF, or no CUDA toolkit headers at build time): no device, and
 * every call says why. */
#ifndef CT_HAVE_CUDA
#include <stdlib.h>

#include "../core/device.h"
#include "../core/tensor_impl.h"
#include "ctorch/cuda.h"

#define NO_CUDA "%s", ct__backend_missing_why(CT_CUDA)

bool ct_cuda_is_available(void) { ct__error(CT_ERR_DEVICE, NO_CUDA); return false; }
int ct_cuda_device_count(void) { ct__error(CT_ERR_DEVICE, NO_CUDA); return 0; }
const char *ct_cuda_get_device_name(int device) { (void)device; return ct__error(CT_ERR_DEVICE, NO_CUDA); }
ct_status ct_cuda_get_device_capability(int device, int *major, int *minor) {
    (void)device; (void)major; (void)minor;
    return ct__error_status(CT_ERR_DEVICE, NO_CUDA);
}
ct_status ct_cuda_synchronize(int device) { (void)device; return ct__error_status(CT_ERR_DEVICE, NO_CUDA); }
ct_cuda_stream *ct_cuda_stream_new(int device) { (void)device; return ct__error(CT_ERR_DEVICE, NO_CUDA); }
void ct_cuda_stream_free(ct_cuda_stream *s) { (void)s; }
ct_status ct_cuda_set_stream(ct_cuda_stream *s) { return s ? ct__error_status(CT_ERR_DEVICE, NO_CUDA) : CT_OK; }
ct_cuda_stream *ct_cuda_current_stream(int device) { (void)device; return ct__error(CT_ERR_DEVICE, NO_CUDA); }
ct_status ct_cuda_stream_synchronize(int device, ct_cuda_stream *s) {
    (void)device; (void)s;
    return ct__error_status(CT_ERR_DEVICE, NO_CUDA);
}
ct_cuda_event *ct_cuda_event_new(int device, bool enable_timing) {
    (void)device; (void)enable_timing;
    return ct__error(CT_ERR_DEVICE, NO_CUDA);
}
void ct_cuda_event_free(ct_cuda_event *e) { (void)e; }
ct_status ct_cuda_event_record(ct_cuda_event *e, ct_cuda_stream *s) {
    (void)e; (void)s;
    return ct__error_status(CT_ERR_DEVICE, NO_CUDA);
}
ct_status ct_cuda_event_synchronize(ct_cuda_event *e) { (void)e; return ct__error_status(CT_ERR_DEVICE, NO_CUDA); }
bool ct_cuda_event_query(ct_cuda_event *e) { (void)e; ct__error(CT_ERR_DEVICE, NO_CUDA); return false; }
ct_status ct_cuda_event_wait(ct_cuda_event *e, ct_cuda_stream *s) {
    (void)e; (void)s;
    return ct__error_status(CT_ERR_DEVICE, NO_CUDA);
}
float ct_cuda_event_elapsed_time(ct_cuda_event *a, ct_cuda_event *b) {
    (void)a; (void)b;
    ct__error(CT_ERR_DEVICE, NO_CUDA);
    return -1;
}
ct_tensor *ct_pin_memory(ct_tensor *t) { (void)t; return ct__error(CT_ERR_DEVICE, "pin_memory: " NO_CUDA); }
bool ct_is_pinned(const ct_tensor *t) { (void)t; return false; }

/* the tests' NVRTC entry points (src/backend/cuda/backend.c) */
const char *ct__cuda_nvrtc_missing(void) { return "this build of ctorch has no CUDA backend"; }
ct_status ct__cuda_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *cubin_size, char *log,
                                 size_t logn) {
    (void)src; (void)arch; (void)cubin_size; (void)log; (void)logn;
    if (cubin) *cubin = NULL;
    return ct__error_status(CT_ERR_DEVICE, NO_CUDA);
}
long ct__cuda_kernels_built(void) { return 0; }
int ct__cuda_builtin_sources(char ***out) { *out = NULL; return 0; }
/* test_op_table: no CUDA kernel table in this build */
const char *ct__cuda_kernel_route(int op) { (void)op; return NULL; }
#endif
