/* cpu_caps.h -- private: runtime CPU dispatch (after ATen's DispatchStub).
 *
 * Hot kernels are compiled once per ISA level (src/backend/cpu/ew_vec_*.c,
 * the same source built with different -m flags); at first use the best
 * level the CPU and the OS support is picked with __builtin_cpu_supports.
 * CT_CPU_CAPABILITY=default|avx2|avx512 (like ATEN_CPU_CAPABILITY) forces a
 * lower level; a higher level than the CPU has is ignored. */
#ifndef CT_CPU_CAPS_H
#define CT_CPU_CAPS_H

typedef enum ct_cpu_cap {
    CT_CAP_DEFAULT = 0, /* baseline x86-64 (SSE2) */
    CT_CAP_AVX2 = 1,    /* AVX2 + FMA + F16C */
    CT_CAP_AVX512 = 2,  /* AVX-512 F/BW/DQ/VL */
    CT_CAP_COUNT
} ct_cpu_cap;

/* The level in use (detected once, thread-safe). */
ct_cpu_cap ct__cpu_cap(void);
/* The best level this CPU supports, ignoring CT_CPU_CAPABILITY. */
ct_cpu_cap ct__cpu_cap_detected(void);
/* Whether f32 outputs far larger than the cache are written with
 * non-temporal stores (vmath.h's CT_STREAM_MIN rule): measured to help on
 * Zen 3 (AVX2) and to hurt on Zen 5 (AMD with AVX-512: a 16M-float mul 2x
 * slower on one thread, no gain on two), so off on AMD CPUs with AVX-512.
 * CT_STREAM_STORES=0|1 overrides it (read once). */
int ct__stream_stores(void);
/* 1 when the CPU computes bf16 dot products natively (AVX512_BF16 or
 * AMX-BF16, with the OS saving the AVX-512 state): only there do the
 * reduced float32 matmul precisions ("high", "medium") change anything, as
 * in torch, whose CPU kernels check the same (mkldnn_bf16_device_check). */
int ct__cpu_has_bf16_dot(void);
/* 1 on an AVX-512 CPU whose 512-bit FMAs run as two 256-bit halves, so
 * that its f32 FMA peak is AVX2's: AMD Zen 4 (family 19h; Zen 3, the same
 * family, has no AVX-512).  There the own AVX2 GEMM (gemm_avx2.c) is as
 * fast as OpenBLAS's AVX-512 one; on Zen 5 (two full 512-bit FMA units)
 * and Intel's AVX-512 server parts it is not. */
int ct__cpu_avx512_halved(void);
/* 1 when the CPU has AMX tiles with bf16 (fp16 = 0: AMX-BF16, Sapphire
 * Rapids on) or fp16 (fp16 = 1: AMX-FP16, Granite Rapids on) products and
 * the OS saves the tile state. */
int ct__cpu_has_amx(int fp16);
/* "default", "avx2", "avx512" */
const char *ct__cpu_cap_name(ct_cpu_cap c);

#endif
