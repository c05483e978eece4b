/* backend.c -- the CPU backend: its device vtable (host memory from the
 * caching allocator of src/core/alloc.c) and its kernel table, filled by
 * each kernel family's register function (the ISA level picked at run time,
 * see cpu_caps.h). */
#include <string.h>

#include "../../core/device.h"
#include "../../ops/op_table.h"
#include "blas.h"
#include "cpu_caps.h"

static int cpu_count(void) { return 1; }

static void *cpu_alloc(size_t nbytes, int index) {
    (void)index;
    void *p = ct__malloc_aligned(nbytes);
    if (!p) ct__error(CT_ERR_OOM, "empty: out of memory allocating %zu bytes", nbytes);
    return p;
}

static void cpu_free(void *p, size_t nbytes, int index) {
    (void)index;
    ct__free_aligned(p, (void *)(uintptr_t)nbytes);
}

static ct_status cpu_copy(void *dst, const void *src, size_t nbytes, int index) {
    (void)index;
    if (nbytes) memmove(dst, src, nbytes);
    return CT_OK;
}

static ct_status cpu_memset(void *dst, int byte, size_t nbytes, int index) {
    (void)index;
    if (nbytes) memset(dst, byte, nbytes);
    return CT_OK;
}

static ct_status cpu_sync(int index) { (void)index; return CT_OK; }

static const ct_device_vtbl k_cpu = {
    .name = "cpu",
    .caps = CT_DEVCAP_HOST_MEMORY,
    .count = cpu_count,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_on_device = cpu_copy,
    .memset = cpu_memset,
    .synchronize = cpu_sync,
    .set_deterministic = ct__blas_set_deterministic,
};

void ct__cpu_backend_register(void) {
    ct_kernel_fn *cpu = ct__kernels[CT_CPU];
    ct__cpu_register_copy(cpu);
    ct__cpu_register_elementwise(cpu);
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__cpu_register_reduce_avx2(cpu);
    else ct__cpu_register_reduce(cpu);
    ct__cpu_register_index(cpu);
    ct__cpu_register_linalg(cpu);
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__cpu_register_conv_avx2(cpu);
    else ct__cpu_register_conv(cpu);
    ct__cpu_register_random(cpu);
    ct__cpu_register_attention(cpu);
    ct__cpu_register_bn(cpu);
    ct__cpu_register_tfm_rows(cpu);
    ct__cpu_register_optim(cpu);
    ct__device_register(CT_CPU, &k_cpu);
}
