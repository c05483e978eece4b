/* backend.c -- the meta device (PyTorch's device="meta"): tensors with
 * sizes, strides and dtype and no data.  An op on meta tensors runs its
 * shape, dtype and argument checks and allocates its outputs on meta, like
 * on any device; the kernel it then dispatches has nothing to compute, so
 * every slot of the meta kernel table is the same kernel that does nothing.
 * Ops whose output shape depends on the data (nonzero, masked_select,
 * unique, item, ...) refuse meta tensors before they get here (see
 * ct__need_data in tensor_impl.h). */
#include "../../core/device.h"
#include "../../ops/op_table.h"

static int meta_count(void) { return 1; }
static void *meta_alloc(size_t nbytes, int index) { (void)nbytes; (void)index; return NULL; }
static void meta_free(void *p, size_t nbytes, int index) { (void)p; (void)nbytes; (void)index; }
static ct_status meta_copy(void *dst, const void *src, size_t nbytes, int index) {
    (void)dst; (void)src; (void)nbytes; (void)index;
    return CT_OK;
}
static ct_status meta_memset(void *dst, int byte, size_t nbytes, int index) {
    (void)dst; (void)byte; (void)nbytes; (void)index;
    return CT_OK;
}
static ct_status meta_sync(int index) { (void)index; return CT_OK; }

static const ct_device_vtbl k_meta = {
    .name = "meta",
    .caps = CT_DEVCAP_NO_DATA,
    .count = meta_count,
    .alloc = meta_alloc,
    .free = meta_free,
    .copy_from_host = meta_copy,
    .copy_to_host = meta_copy,
    .copy_on_device = meta_copy,
    .memset = meta_memset,
    .synchronize = meta_sync,
};

/* The outputs were allocated by the op with their final sizes, strides and
 * dtype; on meta that is the whole result. */
static ct_status meta_kernel(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    (void)out; (void)nout; (void)in; (void)nin; (void)a;
    return CT_OK;
}

void ct__meta_backend_register(void) {
    ct_kernel_fn *t = ct__kernels[CT_META];
    for (int op = 0; op < CT_OP_COUNT; op++) t[op] = meta_kernel;
    ct__device_register(CT_META, &k_meta);
}
