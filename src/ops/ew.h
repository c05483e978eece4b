/* ew.h -- private: the device-independent driver of elementwise ops. */
#ifndef CT_EW_H
#define CT_EW_H

#include "op_table.h"
#include "iter.h"

/* Runs elementwise op `op` over ins (broadcast), writing a new tensor, or
 * into `inplace` (which must have the broadcast shape and accept the result
 * dtype) when non-NULL.  a may be NULL.  The shapes, dtypes and checks are
 * the op's meta function's (ct__meta_ew, meta.h: run once per call, inlined
 * here); the dtype rule is the op's `.ew_mode` column. */
ct_tensor *ct__ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a, ct_tensor *inplace);
/* A wrapped-number tensor (not in any scope; caller releases). */
ct_tensor *ct__wrapped_tmp(double v);
/* torch.can_cast */
bool ct__can_cast(ct_dtype from, ct_dtype to);
/* Fused backward kernels (PyTorch's threshold_backward, sigmoid_backward,
 * tanh_backward, gelu_backward, silu_backward): one pass instead of a chain
 * of ops.  t is the op's output (relu, sigmoid, tanh) or input (gelu,
 * silu). */
enum {
    CT_EWG_RELU,      /* t <= 0 ? 0 : g          (t = relu's output) */
    CT_EWG_SIGMOID,   /* g * (1 - t) * t         (t = sigmoid's output) */
    CT_EWG_TANH,      /* g * (1 - t*t)           (t = tanh's output) */
    CT_EWG_GELU,      /* g * (Phi(t) + t phi(t)) (t = gelu's input) */
    CT_EWG_GELU_TANH, /* gelu(approximate='tanh')'s derivative */
    CT_EWG_SILU,      /* g * s * (1 + t (1 - s)), s = sigmoid(t) */
    CT_EWG_COUNT
};
/* *res = the fused gradient (a new tensor in the current scope) and returns
 * 1; returns 0 (no error recorded, *res NULL) when the fused kernel does not
 * apply -- autograd must record the result (double backward), dtypes other
 * than f32/f64 or differing, shapes differing, not on the CPU -- so the
 * caller uses the composite formula; -1 on error (error recorded). */
int ct__ew_fused_grad(int kind, ct_tensor *g, ct_tensor *t, ct_tensor **res);
/* The CPU kernel behind it: out = f(g, t), all of out's shape and dtype. */
ct_status ct__cpu_ew_grad(int kind, ct_tensor *out, ct_tensor *g, ct_tensor *t);

/* Fused bias + activation, in place, for the linear layer's epilogue
 * (PyTorch fuses these in its CPU linear+act paths):
 *     y[..., j] = act(y[..., j] + bias[j])
 * row by row while the row is in cache, with the same vector loops (and so
 * the same bits) as ct_add followed by the activation.  Returns 1 when done,
 * 0 when it does not apply (autograd must record y or bias, y not a
 * contiguous f32 tensor with last dim N, bias not a contiguous f32 [N], not
 * on the CPU) -- the caller then uses ct_add and the activation op; -1 on
 * error.  Bumps y's version counter. */
enum { CT_EWA_NONE, CT_EWA_RELU, CT_EWA_GELU, CT_EWA_GELU_TANH, CT_EWA_SILU, CT_EWA_SIGMOID,
       CT_EWA_TANH, CT_EWA_COUNT };
int ct__bias_act_(ct_tensor *y, ct_tensor *bias, int act);
/* The CPU kernel behind it (y [M, N] contiguous f32, bias [N]). */
ct_status ct__cpu_bias_act(float *y, const float *bias, int64_t m, int64_t n, int act);

/* The CPU's loop for elementwise op `op` on kernel dtype dt: the one the
 * kernel runs (a vectorized f32 loop for some ops), and the scalar loop
 * generated from ew_math.def, their reference (the same for most pairs);
 * NULL where the op has no loop for dt.  For tests/test_ew_render.c. */
ct_loop_fn ct__cpu_ew_loop(ct_op op, ct_dtype dt);
ct_loop_fn ct__cpu_ew_scalar_loop(ct_op op, ct_dtype dt);

#endif
