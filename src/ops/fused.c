/* fused.c -- the switch between a fused op's kernel and its fallback
 * (see fused.h). */
#include <stdatomic.h>

#include "fused.h"

static atomic_bool g_disabled[CT_OP_COUNT];

ct_kernel_fn ct__fused_kernel(ct_op op, ct_device dev) {
    ct__backends_init();
    if ((unsigned)op >= CT_OP_COUNT || (unsigned)dev >= CT_DEVICE_COUNT) return NULL;
    if (atomic_load_explicit(&g_disabled[op], memory_order_relaxed)) return NULL;
    return ct__kernels[dev][op];
}

void ct__fused_disable(ct_op op, bool disabled) {
    if ((unsigned)op < CT_OP_COUNT) atomic_store(&g_disabled[op], disabled);
}
