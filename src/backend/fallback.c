/* fallback.c -- the cpu fallback of devices without host memory (PyTorch's
 * MPS fallback): an op whose kernel slot is empty on the device, or whose
 * device kernel declines the call (ct__no_device_kernel: a dtype, a layout
 * it has no code for), runs the cpu kernel on host copies of its operands,
 * through the device vtable's copies only -- so it serves every device
 * type that registers a vtable (OpenCL now, CUDA later), not one backend.
 *
 * How.  Every device storage the call touches (its outputs' and inputs')
 * is mirrored once on the host: the whole storage (a kernel may reach past
 * the views it is given: cross reads the other components through strides
 * in its parameters), copied to a cpu storage.  Each operand
 * becomes a cpu tensor on its storage's mirror with the same sizes, strides
 * and dtype, so
 *   - views and strides are the device's (a transposed or sliced operand is
 *     the same transposed or sliced view of the mirror);
 *   - aliasing survives: an in-place op's output and input that share a
 *     storage share one mirror (and the same handle, when they were one);
 *   - several outputs are each copied back.
 * After the cpu kernel, the mirror of each storage an output lives on is
 * copied back over the same byte range (the bytes no output wrote go back
 * unchanged, as they were read).  Outputs are read first too: some kernels
 * write only part of their output (scatter's public op fills it with the
 * input first, index_fill's kernel writes the selected rows).
 *
 * The device's queue is in order and every copy to the host blocks, so the
 * host reads what the device work queued before produced, and the copies
 * back come before whatever is queued after.
 *
 * CT_DEVICE_FALLBACK=0 turns it off (the op is then "no kernel for device
 * <dev>"); CT_DEVICE_FALLBACK=warn prints each op once as it first falls
 * back (to find the ops a device still lacks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/device.h"
#include "../ops/op_table.h"

static _Thread_local bool tl_declined;
static _Thread_local char tl_why[256]; /* the last declined call's reason (warn mode prints it) */
static atomic_long g_runs[CT_OP_COUNT];
static atomic_int g_warned[CT_OP_COUNT];

ct_status ct__no_device_kernel(const char *op, ct_device dev, const char *why) {
    tl_declined = true;
    snprintf(tl_why, sizeof tl_why, "%s", why);
    return ct__error_status(CT_ERR_DEVICE, "%s: no kernel for device %s (%s)", op, ct_device_name(dev), why);
}

bool ct__device_kernel_declined(void) {
    bool d = tl_declined;
    tl_declined = false;
    return d;
}

long ct__fallback_runs(int op) {
    if (op < 0) {
        long n = 0;
        for (int k = 0; k < CT_OP_COUNT; k++) n += atomic_load(&g_runs[k]);
        return n;
    }
    return op < CT_OP_COUNT ? atomic_load(&g_runs[op]) : 0;
}

/* 0 off, 1 on, 2 on and warn */
static int fallback_mode(void) {
    static atomic_int mode = -1;
    int m = atomic_load(&mode);
    if (m < 0) {
        const char *e = getenv("CT_DEVICE_FALLBACK");
        m = !e || !*e ? 1 : strcmp(e, "0") == 0 ? 0 : strcmp(e, "warn") == 0 ? 2 : 1;
        atomic_store(&mode, m);
    }
    return m;
}

bool ct__fallback_serves(ct_device dev) {
    const ct_device_vtbl *vt = ct__device(dev);
    return vt && !(vt->caps & (CT_DEVCAP_HOST_MEMORY | CT_DEVCAP_NO_DATA)) && vt->copy_to_host &&
           vt->copy_from_host && fallback_mode() != 0;
}

#define FB_MAX 64 /* operands of one call (inputs + outputs) */

typedef struct fb_store {
    ct_storage *dev;  /* the device storage */
    size_t lo, hi;    /* byte range mirrored */
    ct_tensor *host;  /* the mirror: u8 [hi - lo] on the cpu */
    bool written;     /* an output lives on it */
} fb_store;

/* the byte range t reaches in its storage; false when it reaches none (then it needs no mirror) */
static bool byte_range(const ct_tensor *t, size_t *lo, size_t *hi) {
    int64_t mn = t->offset, mx = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->sizes[d] == 0) return false;
        int64_t e = (t->sizes[d] - 1) * t->strides[d];
        if (e < 0) mn += e;
        else mx += e;
    }
    size_t es = ct_dtype_size(t->dtype);
    *lo = (size_t)mn * es;
    *hi = (size_t)(mx + 1) * es;
    return true;
}

ct_status ct__fallback_run(ct_op op, ct_device dev, ct_tensor *const *out, int nout, ct_tensor *const *in,
                           int nin, const ct_args *a) {
    const char *name = ct__op_info[op].name;
    ct_kernel_fn cpu = ct__kernels[CT_CPU][op];
    if (!cpu)
        return ct__error_status(CT_ERR_DEVICE, "%s: no kernel for device %s (and none on the cpu to fall "
                                "back to)", name, ct_device_name(dev));
    if (nout + nin > FB_MAX)
        return ct__error_status(CT_ERR_DEVICE, "%s: no kernel for device %s (the cpu fallback takes at most "
                                "%d operands, the call has %d)", name, ct_device_name(dev), FB_MAX, nout + nin);
    const ct_device_vtbl *vt = ct__device(dev);
    if (fallback_mode() == 2 && atomic_exchange(&g_warned[op], 1) == 0)
        fprintf(stderr, "ctorch: %s has no kernel on %s%s%s%s: it runs on the cpu (copies to and from the device)\n",
                name, ct_device_name(dev), tl_why[0] ? " (" : "", tl_why, tl_why[0] ? ")" : "");
    tl_why[0] = 0;
    ct_tensor *const *ops[2] = {out, in};
    int counts[2] = {nout, nin};
    fb_store st[FB_MAX];
    int nst = 0;
    int which[2][FB_MAX]; /* each operand's store, -1: none (NULL, a cpu operand, nothing reached) */
    /* the stores and their ranges */
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < counts[s]; k++) {
            ct_tensor *t = ops[s][k];
            which[s][k] = -1;
            if (!t || t->storage->device != dev) continue;
            size_t lo, hi;
            if (!byte_range(t, &lo, &hi)) continue;
            int j = 0;
            while (j < nst && st[j].dev != t->storage) j++;
            if (j == nst) {
                st[nst++] = (fb_store){t->storage, lo, hi, NULL, false};
            } else {
                if (lo < st[j].lo) st[j].lo = lo;
                if (hi > st[j].hi) st[j].hi = hi;
            }
            which[s][k] = j;
            if (s == 0) st[j].written = true;
        }
    ct_status rc = CT_OK;
    ct_tensor *mir[2][FB_MAX];
    memset(mir, 0, sizeof mir);
    /* the mirrors, read from the device */
    for (int j = 0; j < nst && !rc; j++) {
        /* the whole storage: kernels may reach past the views they are given (cross reads the
         * other two components through strides in its parameters) */
        st[j].lo = 0;
        st[j].hi = st[j].dev->nbytes;
        int64_t n = (int64_t)(st[j].hi - st[j].lo);
        st[j].host = ct__alloc(&n, 1, CT_U8, CT_CPU);
        if (!st[j].host) { rc = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; break; }
        rc = vt->copy_to_host(st[j].host->storage->data, (char *)st[j].dev->data + st[j].lo, (size_t)n,
                                  st[j].dev->device_index);
    }
    /* the operands as views of the mirrors (one handle per distinct operand) */
    for (int s = 0; s < 2 && !rc; s++)
        for (int k = 0; k < counts[s] && !rc; k++) {
            ct_tensor *t = ops[s][k];
            if (!t) continue;
            ct_tensor *prev = NULL;
            for (int s2 = 0; s2 <= s && !prev; s2++)
                for (int k2 = 0; k2 < (s2 < s ? counts[s2] : k) && !prev; k2++)
                    if (ops[s2][k2] == t) prev = mir[s2][k2];
            if (prev) { mir[s][k] = ct_retain(prev); continue; }
            if (t->storage->device != dev) { mir[s][k] = ct_retain(t); continue; } /* a 0-dim cpu number */
            int j = which[s][k];
            size_t es = ct_dtype_size(t->dtype);
            int64_t off = j >= 0 ? (int64_t)(((size_t)t->offset * es - st[j].lo) / es) : 0;
            ct_tensor *base = j >= 0 ? st[j].host : NULL;
            if (!base) { /* reaches nothing (0 elements): an empty cpu tensor of its shape */
                mir[s][k] = ct__alloc(t->sizes, t->ndim, t->dtype, CT_CPU);
            } else {
                mir[s][k] = ct__view_of(base, t->sizes, t->strides, t->ndim, off);
                if (mir[s][k]) mir[s][k]->dtype = t->dtype;
            }
            if (!mir[s][k]) rc = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
            else mir[s][k]->flags = t->flags;
        }
    if (!rc) {
        atomic_fetch_add(&g_runs[op], 1);
        rc = cpu(mir[0], nout, mir[1], nin, a);
    }
    /* the outputs' storages back to the device */
    for (int j = 0; j < nst && !rc; j++)
        if (st[j].written)
            rc = vt->copy_from_host((char *)st[j].dev->data + st[j].lo, st[j].host->storage->data,
                                    st[j].hi - st[j].lo, st[j].dev->device_index);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < counts[s]; k++) ct_release(mir[s][k]);
    for (int j = 0; j < nst; j++) ct_release(st[j].host);
    return rc;
}
