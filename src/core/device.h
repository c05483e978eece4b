/* device.h -- private: the device interface.  A device is {type, index};
 * each device type is served by one backend, which registers a vtable here
 * (memory: allocate, free, copies, memset, synchronize; its name and
 * capabilities) and its kernel table in ct__kernels[type] (one slot per op
 * of ops.def; NULL: the op does not run on this device).  Backends register
 * from src/backend/registry.c, which the op layer's initialization calls;
 * core and dispatch name no backend, they go through these tables. */
#ifndef CT_DEVICE_H
#define CT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "ctorch/ctorch.h"

/* capabilities */
#define CT_DEVCAP_HOST_MEMORY 1u /* data pointers are host memory ops may read */
#define CT_DEVCAP_NO_DATA     2u /* tensors have sizes, strides and dtype only (meta) */

typedef struct ct_device_vtbl {
    const char *name;   /* "cpu", "meta", like torch.device's type */
    unsigned caps;      /* CT_DEVCAP_* */
    int (*count)(void); /* number of devices of this type */
    /* nbytes of device memory on device `index`; NULL + error on failure.
     * NO_DATA devices return NULL with no error. */
    void *(*alloc)(size_t nbytes, int index);
    void (*free)(void *p, size_t nbytes, int index);
    /* contiguous byte copies; each returns CT_OK or records an error */
    ct_status (*copy_from_host)(void *dst, const void *src, size_t nbytes, int index);
    ct_status (*copy_to_host)(void *dst, const void *src, size_t nbytes, int index);
    ct_status (*copy_on_device)(void *dst, const void *src, size_t nbytes, int index);
    ct_status (*memset)(void *dst, int byte, size_t nbytes, int index);
    /* waits for the work queued on device `index` */
    ct_status (*synchronize)(int index);
    /* ct_use_deterministic_algorithms changed to `on` (NULL: nothing to do);
     * called under the switch's lock, only on a change */
    void (*set_deterministic)(bool on);
    /* why this type has no device, when count() is 0 ("no OpenCL device:
     * no OpenCL platform is installed"); NULL: nothing to add */
    const char *(*why_none)(void);
} ct_device_vtbl;

/* The current index of a device type on this thread (0 for cpu and meta):
 * where storage of that type is allocated (see device.c). */
int ct__device_current(ct_device type);
void ct__device_set_current(ct_device type, int index);

/* Called by a backend's register function (under the registry's once). */
void ct__device_register(ct_device type, const ct_device_vtbl *vt);
/* The vtable of a device type after initialization; NULL when no backend
 * serves it (not built, or not a device type). */
const ct_device_vtbl *ct__device(ct_device type);
/* Error unless device {type, index} exists: "op: device cuda:1 is not
 * available (...)". */
ct_status ct__device_check(const char *op, ct_device type, int index);
/* The backends' single registration entry point (src/backend/registry.c). */
void ct__backend_registry_init(void);
/* Why device type has no backend compiled in ("no CUDA device: this build
 * ..."), or NULL (src/backend/registry.c). */
const char *ct__backend_missing_why(ct_device type);
/* Runs ct__backend_registry_init once (idempotent, thread-safe): called by
 * ct__device on first use and by the op layer's initialization. */
void ct__devices_init(void);
#endif
