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

static const char *const k_type_name[CT_DEVICE_COUNT] = {"cpu", "cuda", "meta", "opencl"};

const char *ct_device_name(ct_device d) {
    return (unsigned)d < CT_DEVICE_COUNT ? k_type_name[d] : "invalid";
}

ct_status ct__device_check(const char *op, ct_device type, int index) {
    if ((unsigned)type >= CT_DEVICE_COUNT)
        return ct__error_status(CT_ERR_DEVICE, "%s: invalid device type %d", op, (int)type);
    const ct_device_vtbl *vt = ct__device(type);
    if (!vt) {
        const char *why = ct__backend_missing_why(type);
        return ct__error_status(CT_ERR_DEVICE, "%s: device %s:%d is not available: %s", op,
                                ct_device_name(type), index, why ? why : "no backend in this build");
    }
    int n = vt->count ? vt->count() : 1;
    if (n == 0 && vt->why_none && vt->why_none())
        return ct__error_status(CT_ERR_DEVICE, "%s: device %s:%d is not available: %s", op,
                                ct_device_name(type), index, vt->why_none());
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
/* the current index of each device type on this thread (cudaSetDevice's
 * "current device"): where a device allocation without a tensor to follow
 * goes.  An op sets it to its inputs' index (ct__op_device), so what an op
 * allocates, and what it creates inside, lands beside its inputs; ct_to_dev,
 * the ct_*_dev factories and ct_module_to_dev set it to their target, and
 * ct_set_default_dev to its device. */
static _Thread_local int tl_cur_index[CT_DEVICE_COUNT];

int ct__device_current(ct_device type) {
    return (unsigned)type < CT_DEVICE_COUNT && type != CT_CPU && type != CT_META ? tl_cur_index[type] : 0;
}

void ct__device_set_current(ct_device type, int index) {
    if ((unsigned)type < CT_DEVICE_COUNT && type != CT_CPU && type != CT_META && index >= 0)
        tl_cur_index[type] = index;
}

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

/* ---- whole devices {type, index} (torch.device) ---------------------------- */
ct_status ct_dev_parse(const char *s, ct_dev *out) {
    if (!s) return ct__null_arg_status("device", "argument 's'");
    if (!out) return ct__null_arg_status("device", "argument 'out'");
    size_t n = strcspn(s, ":");
    int type = -1;
    for (int t = 0; t < CT_DEVICE_COUNT; t++)
        if (strlen(k_type_name[t]) == n && strncmp(s, k_type_name[t], n) == 0) type = t;
    if (type < 0)
        return ct__error_status(CT_ERR_ARG, "device: expected one of cpu, cuda, meta, opencl device type at start "
                                "of device string: %s", s);
    int index = 0;
    if (s[n] == ':') {
        const char *p = s + n + 1;
        if (*p == '-' && p[1] >= '0' && p[1] <= '9')
            return ct__error_status(CT_ERR_ARG, "device: device index must not be negative (got '%s')", s);
        if (!*p) return ct__error_status(CT_ERR_ARG, "device: invalid device string: '%s'", s);
        long long v = 0;
        for (; *p; p++) {
            if (*p < '0' || *p > '9' || (v == 0 && p > s + n + 1 && p[-1] == '0'))
                return ct__error_status(CT_ERR_ARG, "device: invalid device string: '%s'", s);
            v = v * 10 + (*p - '0');
            if (v > 1 << 20) return ct__error_status(CT_ERR_ARG, "device: invalid device string: '%s'", s);
        }
        index = (int)v;
    }
    out->type = (ct_device)type;
    out->index = index;
    return CT_OK;
}

const char *ct_dev_str(ct_dev d, char *buf, size_t n) {
    if (!buf || n == 0) return buf;
    if (d.type == CT_CUDA || d.type == CT_OPENCL || d.index != 0)
        snprintf(buf, n, "%s:%d", ct_device_name(d.type), d.index);
    else
        snprintf(buf, n, "%s", ct_device_name(d.type));
    return buf;
}

bool ct_dev_equal(ct_dev a, ct_dev b) { return a.type == b.type && a.index == b.index; }

bool ct_dev_is_available(ct_dev d) {
    return d.index >= 0 && d.index < ct_device_count(d.type);
}

ct_status ct_dev_synchronize(ct_dev d) { return ct_device_synchronize(d.type, d.index); }

ct_status ct_set_default_dev(ct_dev d) {
    ct_status st = ct__device_check("set_default_device", d.type, d.index);
    if (st) return st;
    tl_default_dev = d.type;
    ct__device_set_current(d.type, d.index);
    return CT_OK;
}

ct_dev ct_get_default_dev(void) { return CT_DEV(tl_default_dev, ct__device_current(tl_default_dev)); }
