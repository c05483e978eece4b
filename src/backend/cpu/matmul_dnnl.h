/* matmul_dnnl.h -- private: matrix products through oneDNN's matmul
 * primitive (matmul_dnnl.c; built with CT_HAVE_DNNL, else every call
 * answers "not taken").  linalg.c routes f16/bf16 products there on CPUs
 * with AMX, and float32 ones under matmul precision "high"/"medium" on
 * AMX-BF16 CPUs (oneDNN's fpmath mode bf16, torch's mkldnn path there). */
#ifndef CT_MATMUL_DNNL_H
#define CT_MATMUL_DNNL_H
#include <stdint.h>

/* C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C, or, with bias (alpha and
 * beta 1), A @ B + bias[N] on every row (C not read).  A, B of type ta, tb
 * (gemm_impl.h's CT_GEMM_F32, CT_GEMM_BF16, CT_GEMM_F16; oneDNN takes them
 * equal), element strides sam, sak, sbk, sbn; C of type tc (CT_GEMM_F32,
 * or the operands' half type: the f32 sums rounded once, to nearest even),
 * rows ldc elements apart, unit column stride; bias f32.  fpmath: oneDNN
 * may compute float32 operands as bf16 (matmul precision "high"/"medium").
 * Runs on at most nthreads threads (<= 0: the current count), one thread
 * for work ct__par_too_small calls small.  Primitives are cached by shape,
 * strides, types and thread count.
 * Returns 0 when done, -2 when oneDNN did not run it and C is untouched
 * (not built with oneDNN, a layout or type it refuses, called inside a
 * parallel region; the caller computes it itself), -1 out of memory. */
int ct__dnnl_matmul(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                    int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                    const float *bias, void *C, int tc, int64_t ldc, int nthreads, int fpmath);

/* Whether linalg.c should try ct__dnnl_matmul for an M x K x N product of
 * operand type t (fpmath as above).  The rule: bf16 operands on AMX-BF16
 * CPUs, f16 ones on AMX-FP16 CPUs, float32 ones with fpmath on AMX-BF16
 * CPUs; never below 4 rows or columns, never with deterministic algorithms
 * on (the own GEMMs give the same bits for any thread count).
 * CT_DNNL_MATMUL=0 / =1 in the environment (or ct__dnnl_matmul_set_mode)
 * means never / always (float32 included: for measuring and testing the
 * path on any CPU; where oneDNN has no kernel for a type the call answers
 * -2 and the own GEMM runs). */
int ct__dnnl_matmul_want(int t, int fpmath, int64_t M, int64_t N, int64_t K);
/* -1 the rule, 0 never, 1 always (overrides CT_DNNL_MATMUL) */
void ct__dnnl_matmul_set_mode(int mode);
/* products oneDNN ran so far (-1: built without oneDNN); tests, benchmarks */
long long ct__dnnl_matmul_calls(void);
#endif
