/* ew_vec.h -- private: the vectorized f32 inner loops of the hot elementwise
 * ops, compiled once per ISA level (ew_vec_default.c, ew_vec_avx2.c,
 * ew_vec_avx512.c include ew_vec_impl.h with different -m flags) and picked
 * at run time (cpu_caps.h).  Transcendentals come from SLEEF's vector
 * functions for that ISA (1.0-ulp variants).
 *
 * Every loop takes contiguous arrays (or a step of 0: a broadcast scalar)
 * and handles its tail with one more full vector computed on a padded copy,
 * so an element's result does not depend on where a chunk starts: results
 * are the same for any thread count and for strided inputs (which the
 * callers gather into blocks and run through the same loops). */
#ifndef CT_EW_VEC_H
#define CT_EW_VEC_H

#include <stdint.h>

/* unary f32: o[i] = f(x[i]) */
enum {
    CT_VU_EXP, CT_VU_LOG, CT_VU_TANH, CT_VU_SIGMOID, CT_VU_SILU, CT_VU_GELU, CT_VU_GELU_TANH,
    CT_VU_ERF, CT_VU_RELU, CT_VU_EXPM1, CT_VU_LOG1P, CT_VU_SQRT, CT_VU_RSQRT, CT_VU_RECIPROCAL,
    CT_VU_NEG, CT_VU_ABS, CT_VU_SQUARE, CT_VU_SIN, CT_VU_COS, CT_VU_LOG2,
    CT_VU_COUNT
};
/* binary f32: o[i] = f(x[i*sx], y[i*sy]), sx/sy 0 or 1 */
enum { CT_VB_ADD, CT_VB_SUB, CT_VB_MUL, CT_VB_DIV, CT_VB_COUNT };
/* fused backward f32: o[i] = f(g[i*sg], t[i*st]) with t the op's input or
 * output as noted (PyTorch's *_backward kernels) */
enum {
    CT_VG_RELU,      /* threshold_backward(g, y, 0): y <= 0 ? 0 : g */
    CT_VG_SIGMOID,   /* sigmoid_backward(g, y): g * (1 - y) * y */
    CT_VG_TANH,      /* tanh_backward(g, y): g * (1 - y*y) */
    CT_VG_GELU,      /* gelu_backward(g, x), exact */
    CT_VG_GELU_TANH, /* gelu_backward(g, x), tanh approximation */
    CT_VG_SILU,      /* silu_backward(g, x): g * s * (1 + x * (1 - s)), s = sigmoid(x) */
    CT_VG_COUNT
};

typedef void (*ct_vu_fn)(float *o, const float *x, int64_t n);
typedef void (*ct_vb_fn)(float *o, const float *x, const float *y, int64_t n, int64_t sx,
                         int64_t sy);

typedef struct ct_ew_vtab {
    const char *name;
    ct_vu_fn unary[CT_VU_COUNT];
    ct_vb_fn binary[CT_VB_COUNT];
    ct_vb_fn grad[CT_VG_COUNT];
    /* o = x + alpha * y (add with alpha; sub passes -alpha) */
    void (*add_alpha)(float *o, const float *x, const float *y, int64_t n, int64_t sx, int64_t sy,
                      float alpha);
    /* where: o = c ? x : y; c bool bytes; steps 0 or 1 */
    void (*where)(float *o, const uint8_t *c, const float *x, const float *y, int64_t n,
                  int64_t sc, int64_t sx, int64_t sy);
    /* contiguous dtype conversions, bit for bit torch's (src/core/dtype.c) */
    void (*f32_to_bf16)(uint16_t *o, const float *x, int64_t n);
    void (*bf16_to_f32)(float *o, const uint16_t *x, int64_t n);
    void (*f32_to_f16)(uint16_t *o, const float *x, int64_t n);
    void (*f16_to_f32)(float *o, const uint16_t *x, int64_t n);
    void (*f64_to_f32)(float *o, const double *x, int64_t n);
    void (*f32_to_f64)(double *o, const float *x, int64_t n);
} ct_ew_vtab;

extern const ct_ew_vtab ct__ew_vtab_default;
extern const ct_ew_vtab ct__ew_vtab_avx2;
extern const ct_ew_vtab ct__ew_vtab_avx512;

/* The table for the level in use (cpu_caps.h). */
const ct_ew_vtab *ct__ew_vtab(void);

#endif
