/* cuda.h -- the CUDA device (CT_CUDA, "cuda:0"): availability, streams,
 * events, synchronization and pinned host memory, after torch.cuda.
 *
 * The CUDA driver (libcuda.so.1), NVRTC and cuBLAS are loaded at run time:
 * a build with CUDA runs where no driver or GPU is, and then
 * ct_cuda_is_available() is false, ct_cuda_device_count() 0, and any use of
 * a cuda tensor is the error "... no CUDA device: <reason>".  The build has
 * the device when the CUDA toolkit's headers are found (CMake option
 * CT_CUDA, on by default).
 *
 * Streams.  Every thread has a current stream per device (at first the
 * device's default stream, the legacy NULL stream); work on a device's
 * tensors is queued on the calling thread's current stream of that device,
 * and device memory is cached per stream (ctorch/memory.h).  A host read
 * of a device value (ct_to_dev to the cpu, ct_item) waits for the work
 * queued before it on that stream.
 *
 *     if (ct_cuda_is_available()) {
 *         printf("%d devices, cuda:0 is %s\n", ct_cuda_device_count(), ct_cuda_get_device_name(0));
 *         ct_cuda_stream *s = ct_cuda_stream_new(0);
 *         ct_cuda_set_stream(s);               // this thread's work on cuda:0 goes to s
 *         ct_tensor *x = ct_to_dev(cpu_x, CT_DEV(CT_CUDA, 0));
 *         ...
 *         ct_cuda_set_stream(NULL);            // back to the default stream
 *         ct_cuda_stream_free(s);              // waits for its work first
 *     }
 */
#ifndef CTORCH_CUDA_H
#define CTORCH_CUDA_H

#include <stdbool.h>
#include <stddef.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.cuda.is_available / device_count.  False / 0 with the reason as the
 * last error when there is no device ("no CUDA device: libcuda.so.1 cannot
 * be loaded (...)", "... cuInit failed: CUDA_ERROR_NO_DEVICE"). */
CT_API bool ct_cuda_is_available(void);
CT_API int ct_cuda_device_count(void);
/* torch.cuda.get_device_name: owned by the library; NULL + error when the
 * device does not exist. */
CT_API const char *ct_cuda_get_device_name(int device);
/* torch.cuda.get_device_capability: major and minor (8 and 0 for sm_80). */
CT_API ct_status ct_cuda_get_device_capability(int device, int *major, int *minor) CT_NODISCARD;
/* torch.cuda.synchronize: waits for all work queued on the device. */
CT_API ct_status ct_cuda_synchronize(int device) CT_NODISCARD;

/* ---- streams ---------------------------------------------------------------- */
typedef struct ct_cuda_stream ct_cuda_stream;
/* torch.cuda.Stream(device): a new stream; NULL + error without the device. */
CT_API ct_cuda_stream *ct_cuda_stream_new(int device);
/* Waits for the stream's work, then frees it (NULL: nothing).  It must not
 * be any thread's current stream. */
CT_API void ct_cuda_stream_free(ct_cuda_stream *s);
/* torch.cuda.set_stream: s becomes the calling thread's current stream of
 * s's device; NULL makes the default stream of every device current. */
CT_API ct_status ct_cuda_set_stream(ct_cuda_stream *s) CT_NODISCARD;
/* torch.cuda.current_stream: the thread's current stream of the device
 * (NULL: the default stream). */
CT_API ct_cuda_stream *ct_cuda_current_stream(int device);
/* Stream.synchronize; NULL: the device's default stream. */
CT_API ct_status ct_cuda_stream_synchronize(int device, ct_cuda_stream *s) CT_NODISCARD;

/* ---- events ----------------------------------------------------------------- */
typedef struct ct_cuda_event ct_cuda_event;
/* torch.cuda.Event(enable_timing). */
CT_API ct_cuda_event *ct_cuda_event_new(int device, bool enable_timing);
CT_API void ct_cuda_event_free(ct_cuda_event *e);
/* Event.record(stream): NULL records on the thread's current stream. */
CT_API ct_status ct_cuda_event_record(ct_cuda_event *e, ct_cuda_stream *s) CT_NODISCARD;
CT_API ct_status ct_cuda_event_synchronize(ct_cuda_event *e) CT_NODISCARD;
/* Event.query: whether the work before the recorded point is done. */
CT_API bool ct_cuda_event_query(ct_cuda_event *e);
/* Event.wait(stream): work queued on s (NULL: current) after this call waits
 * for the event. */
CT_API ct_status ct_cuda_event_wait(ct_cuda_event *e, ct_cuda_stream *s) CT_NODISCARD;
/* Event.elapsed_time: milliseconds from start to end (both recorded, with
 * timing enabled, and done); -1 + error otherwise. */
CT_API float ct_cuda_event_elapsed_time(ct_cuda_event *start, ct_cuda_event *end);

/* ---- pinned host memory --------------------------------------------------------- */
/* Tensor.pin_memory(): a copy of the cpu tensor t in page-locked host memory
 * (cuMemHostAlloc), from which copies to the device run asynchronously.
 * Still a cpu tensor.  Error without a CUDA device. */
CT_API ct_tensor *ct_pin_memory(ct_tensor *t);
/* Tensor.is_pinned. */
CT_API bool ct_is_pinned(const ct_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
