/* route.h -- private: per-thread overrides of the library's choice between
 * two implementations of one computation, for ct_compile's max-autotune,
 * which times both on the real shapes and runs the faster (compile/exec.c).
 *
 *   CT_ROUTE_GEMM  f32 matrix products on AVX2 CPUs (backend/cpu/linalg.c
 *                  asks ct__sgemm_avx2_preferred): 1 OpenBLAS, 2 ctorch's
 *                  packed AVX2 GEMM (gemm_avx2.c)
 *   CT_ROUTE_CONV  f32 convolutions with oneDNN built in (ct__dnnl_want):
 *                  1 ctorch's own kernels (im2col + GEMM), 2 oneDNN
 *
 * ct__route[kind] 0 (the default) leaves the library's rule in charge.  A
 * backend consulting an override it can honour sets ct__route_seen[kind],
 * so the tuner knows the choice was a real one: where the second
 * implementation does not exist (no AVX2, no oneDNN, f64, deterministic
 * algorithms on) nothing is marked and nothing is timed.  Both are read and
 * written on the calling thread only (the backends decide before their
 * parallel regions). */
#ifndef CT_OPS_ROUTE_H
#define CT_OPS_ROUTE_H

#include <stdbool.h>

enum { CT_ROUTE_GEMM = 0, CT_ROUTE_CONV = 1, CT_ROUTE_NKIND = 2 };

extern _Thread_local signed char ct__route[CT_ROUTE_NKIND];
extern _Thread_local bool ct__route_seen[CT_ROUTE_NKIND];

/* The names of kind's implementations 1 and 2 ("blas", "own"; "ctorch", "onednn"). */
const char *ct__route_name(int kind, int route);

/* Set by the CPU backend where oneDNN is built in (backend/cpu/conv.c):
 * whether a forward f32 2-D convolution with these parameters runs through
 * oneDNN (its routing rule, ct__dnnl_want), which keeps activations
 * channel-blocked, so that a graph holding them blocked between two such
 * convolutions (ct_p_conv.blocked, ct_compile's layout pass) saves the
 * reorders to and from NCHW.  NULL without oneDNN: nothing is blocked. */
struct ct_p_conv;
extern int (*ct__conv_blocked_pays)(const struct ct_p_conv *pc);

/* torch.set_float32_matmul_precision, per process: 0 "highest", 1 "high",
 * 2 "medium" (ct_set_float32_matmul_precision). */
int ct__matmul_precision(void);

#endif
