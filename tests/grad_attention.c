/* grad_attention.c -- gradcheck cases for the fused attention op
 * (sdpa_fused: the flash and memory-efficient kernels of
 * ct_scaled_dot_product_attention).  The fused kernels compute in float32,
 * so the case casts its float64 inputs to float32, forces one kernel, and
 * casts the result back; the finite differences use a step of 1e-3 (float32
 * rounding of a 1e-6 step would drown the difference quotient).  The math
 * kernel is checked in float64 in tests/test_attention.c. */
#include "gradcheck_harness.h"

static ct_tensor *sdpa_f32(ct_tensor *const *in, unsigned kernel, ct_tensor *mask, bool causal) {
    unsigned prev = ct_sdp_kernel_set(kernel);
    ct_tensor *o = ct_scaled_dot_product_attention(ct_to_dtype(in[0], CT_F32), ct_to_dtype(in[1], CT_F32),
                                                   ct_to_dtype(in[2], CT_F32), mask, 0.0, causal, 0.0,
                                                   false);
    bool ran = o && ct_sdp_last_backend() == (ct_sdp_backend)kernel;
    (void)ct_sdp_kernel_set(prev);
    if (o && !ran) return NULL; /* the case must exercise the fused kernel it names */
    return ct_to_dtype(o, CT_F64);
}
static ct_tensor *f_flash(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return sdpa_f32(in, CT_SDP_FLASH, NULL, false);
}
static ct_tensor *f_flash_causal(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    return sdpa_f32(in, CT_SDP_FLASH, NULL, true);
}
static ct_tensor *f_mem_float_mask(ct_tensor *const *in, int n, void *u) {
    (void)n; (void)u;
    /* an additive float mask broadcast over batch and heads */
    double mv[5 * 7];
    for (int i = 0; i < 35; i++) mv[i] = (i % 3 == 0) ? -1.5 : 0.25 * (i % 4);
    ct_tensor *m = ct_from_doubles(mv, (const int64_t[]){5, 7}, 2, CT_F32);
    return sdpa_f32(in, CT_SDP_MEM_EFFICIENT, m, false);
}

#define SH3(a, b, c, d) {4, 4, 4}, {{a, b, c, d}, {a, b, 7, d}, {a, b, 7, d}}

const gc_case gc_cases_attention[] = {
    {"sdpa_fused", "flash", f_flash, 3, {4, 4, 4}, {{1, 2, 5, 4}, {1, 2, 7, 4}, {1, 2, 7, 4}},
     0, 0, 0, 2e-3, 2e-3, 1e-3},
    {"sdpa_fused", "flash_causal", f_flash_causal, 3, {4, 4, 4}, {{2, 1, 6, 3}, {2, 1, 6, 3}, {2, 1, 6, 3}},
     0, 0, 0, 2e-3, 2e-3, 1e-3},
    {"sdpa_fused", "mem_efficient_float_mask", f_mem_float_mask, 3, SH3(1, 2, 5, 4),
     0, 0, 0, 2e-3, 2e-3, 1e-3},
};
const int gc_ncases_attention = (int)(sizeof gc_cases_attention / sizeof gc_cases_attention[0]);
