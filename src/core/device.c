/* device.c -- the device vtables registered by the backends, the per-thread
 * default device, and device names. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "device.h"
#include "tensor_impl.h"

static _Atomic(const ct_device_vtbl *) g_dev[CT_DEVICE_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

void ct__devices_init(void) { pthread_once(&g_once, ct__backend_registry_init); }

void ct__device_register(ct_device type, const ct_device_vtbl *vt) {
    if ((unsigned)type < CT_DEVICE_COUNT) atomic_store_explicit(&g_dev[type], vt, memory_order_release);
}

const ct_device_vtbl *ct__device(ct_device type) {
    if ((unsigned)type >= CT_DEVICE_COUNT) return NULL;
    const ct_device_vtbl *vt = atomic_load_explicit(&g_dev[type], memory_order_acquire);
    if (vt) return vt;
    ct__devices_init();
    return atomic_load_explicit(&g_dev[type], memory_order_acquire);
}

static const char *const k_type_name[CT_DEVICE_COUNT] = {"cpu", "cuda", "meta"};

const char *ct_device_name(ct_device d) {
    return (unsigned)d < CT_DEVICE_COUNT ? k_type_name[d] : "invalid";
}

ct_status ct__device_check(const char *op, ct_device type, int index) {
    if ((unsigned)type >= CT_DEVICE_COUNT)
        return ct__error_status(CT_ERR_DEVICE, "%s: invalid device type %d", op, (int)type);
    const ct_device_vtbl *vt = ct__device(type);
    if (!vt)
        return ct__error_status(CT_ERR_DEVICE, "%s: device %s is not available in this build", op,
                                ct_device_name(type));
    int n = vt->count ? vt->count() : 1;
    if (index < 0 || index >= n)
        return ct__error_status(CT_ERR_DEVICE, "%s: device %s:%d is not available (%d %s device%s)",
                                op, ct_device_name(type), index, n, ct_device_name(type),
                                n == 1 ? "" : "s");
    return CT_OK;
}

bool ct_device_is_available(ct_device type) {
    if ((unsigned)type >= CT_DEVICE_COUNT) return false;
    const ct_device_vtbl *vt = ct__device(type);
    return vt && (!vt->count || vt->count() > 0);
}

int ct_device_count(ct_device type) {
    const ct_device_vtbl *vt = (unsigned)type < CT_DEVICE_COUNT ? ct__device(type) : NULL;
    return !vt ? 0 : vt->count ? vt->count() : 1;
}

ct_status ct_device_synchronize(ct_device type, int index) {
    ct_status st = ct__device_check("synchronize", type, index);
    if (st) return st;
    const ct_device_vtbl *vt = ct__device(type);
    return vt->synchronize ? vt->synchronize(index) : CT_OK;
}

/* ---- the default device (per thread, like torch.set_default_device) ---- */
static _Thread_local ct_device tl_default_dev = CT_CPU;

ct_device ct_get_default_device(void) { return tl_default_dev; }

ct_status ct_set_default_device(ct_device dev) {
    ct_status st = ct__device_check("set_default_device", dev, 0);
    if (st) return st;
    tl_default_dev = dev;
    return CT_OK;
}

/* ---- determinism ---------------------------------------------------------- */
/* The process-wide switch (include/ctorch/profiler.h); kernels read it, and
 * each backend whose libraries need telling (the CPU backend's OpenBLAS
 * threads) gets its set_deterministic call on every change. */
static atomic_int g_det;
static pthread_mutex_t g_det_mu = PTHREAD_MUTEX_INITIALIZER;

void ct_use_deterministic_algorithms(bool on) {
    pthread_mutex_lock(&g_det_mu);
    if ((atomic_load(&g_det) != 0) != on) {
        for (int t = 0; t < CT_DEVICE_COUNT; t++) {
            const ct_device_vtbl *vt = ct__device((ct_device)t);
            if (vt && vt->set_deterministic) vt->set_deterministic(on);
        }
        atomic_store(&g_det, on ? 1 : 0);
    }
    pthread_mutex_unlock(&g_det_mu);
}

bool ct_are_deterministic_algorithms_enabled(void) {
    return atomic_load_explicit(&g_det, memory_order_relaxed) != 0;
}
