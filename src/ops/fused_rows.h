/* fused_rows.h -- private: the op layer of the row-wise fused ops of the
 * Transformer fast path (src/ops/fused_rows.c): add_layer_norm and
 * bias_act, table ops with a composite fallback (fused.h).  Called by the
 * encoder's inference fast path (src/nn/transformer_fast.c) and BERT's
 * (src/nn/models_bert.c).
 *
 * Each entry dispatches its table op when every tensor is float32 on one
 * device that has the kernel (ct__fused_kernel) and the operands suit it
 * (non-contiguous ones are made contiguous first); otherwise it runs the
 * fallback, written with public ops, which gives the same values to float
 * rounding.  Neither is recorded by autograd: the entries run with grad
 * mode off (inference). */
#ifndef CT_FUSED_ROWS_H
#define CT_FUSED_ROWS_H

#include "op_table.h"

/* y = LN(x + r) * w + b over rows of x's last dim d (r may be NULL: y =
 * LN(x)), LN(s) = (s - mean) / sqrt(var + eps), var biased, per row.
 * r has x's shape; w and b hold d elements (either may be NULL).
 * sum: when non-NULL, *sum receives x + r (a new tensor).
 * y_out: NULL, y is a new tensor; else y is written into y_out (x's shape;
 * it may be x or r: in place) and y_out is returned.
 * Returns y, NULL + error on failure.  The kernel: f32 everything, y_out
 * contiguous, and w present when b is. */
ct_tensor *ct__add_layer_norm(ct_tensor *x, ct_tensor *r, ct_tensor *w, ct_tensor *b, double eps,
                              ct_tensor **sum, ct_tensor *y_out);

/* Activations of bias_act (params fused_rows.act). */
enum { CT_EWA_NONE, CT_EWA_RELU, CT_EWA_GELU, CT_EWA_GELU_TANH, CT_EWA_SILU, CT_EWA_SIGMOID,
       CT_EWA_TANH, CT_EWA_COUNT };

/* y = act(h + bias) over h's last dim n (bias [n] or NULL), computed row
 * by row while the row is in cache (PyTorch fuses these in its CPU
 * linear+act epilogues).  out: NULL, y is a new tensor; else y is written
 * into out (h's shape; may be h: in place) and out is returned.
 *
 * row_loops false: the vectorized loops of the activation ops -- the same
 * bits as ct_add followed by ct_relu / ct_gelu / ct_gelu(tanh) / ct_silu /
 * ct_sigmoid / ct_tanh.  row_loops true (act relu or gelu only): the
 * Transformer fast path's one-pass row loops, which it has always run:
 * relu maps NaN to 0, and gelu calls libm's erff for each element (more
 * accurate than the vectorized gelu's erf, |error| < 1.5e-7, and about 8x
 * slower).
 * The kernel: h, bias, out f32, out contiguous.  The fallback: ct_add then
 * the activation op (any floating dtype; relu keeps NaN). */
ct_tensor *ct__bias_act(ct_tensor *h, ct_tensor *bias, int act, bool row_loops, ct_tensor *out);

#endif
