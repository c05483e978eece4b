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
 * 1; returns 0 (no error recorded, *res NULL) when the fused op does not
 * apply -- autograd must record the result (double backward), dtypes other
 * than f32/f64 or differing, shapes or devices differing -- so the caller
 * uses the composite formula; -1 on error (error recorded).  It runs the
 * table op ew_grad (params ew_grad.kind) where the device has its kernel
 * (src/backend/cpu/elementwise.c), else its composite fallback of public
 * ops (fused.h). */
int ct__ew_fused_grad(int kind, ct_tensor *g, ct_tensor *t, ct_tensor **res);

/* The CPU's loop for elementwise op `op` on kernel dtype dt: the one the
 * kernel runs (a vectorized f32 loop for some ops), and the scalar loop
 * generated from ew_math.def, their reference (the same for most pairs);
 * NULL where the op has no loop for dt.  For tests/test_ew_render.c. */
ct_loop_fn ct__cpu_ew_loop(ct_op op, ct_dtype dt);
ct_loop_fn ct__cpu_ew_scalar_loop(ct_op op, ct_dtype dt);

#endif
