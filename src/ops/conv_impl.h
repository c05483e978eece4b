/* conv_impl.h -- private: entry points of the conv family used by its
 * derivatives (src/autograd/derivs_conv.c). */
#ifndef CT_CONV_IMPL_H
#define CT_CONV_IMPL_H

#include "op_table.h"

/* conv (op CT_OP_conv) or transposed conv (CT_OP_conv_transpose) with an
 * explicit window geometry, given as the parameters of a recorded conv
 * node (src/ops/params_conv.def): image_size, grid_size, kernel_size,
 * stride, leading padding, dilation (3 entries each, leading unused dims
 * 1/1/0/1) and groups; batch and the channels are taken from x and w.
 * x is [N, C, *sp] or [C, *sp] with nd = w->ndim - 2 spatial dims; for
 * conv, sp is the image and the result's spatial size the grid; for
 * conv_transpose the reverse.  Any consistent geometry is accepted (output
 * padding, asymmetric padding): out-of-image window taps read/write
 * nothing.  Recorded like the public ops, so it is differentiable. */
ct_tensor *ct__conv_geom(ct_op op, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_p_conv *geom);

/* The weight gradient of the conv (op CT_OP_conv) or transposed conv
 * (CT_OP_conv_transpose) recorded with parameters geom, given its input x and the
 * gradient g of its output: dw of w's shape (wshape, wnd dims), in x's
 * dtype.  One kernel (columns of a block of samples, one GEMM per block),
 * not recorded: for backward passes that build no graph (grad mode off);
 * the differentiable form is a conv with the roles of stride/dilation and
 * grid/kernel swapped (src/autograd/derivs_conv.c). */
ct_tensor *ct__conv_wgrad(ct_op op, ct_tensor *x, ct_tensor *g, const int64_t *wshape, int wnd,
                          const ct_p_conv *geom);

/* The input gradient of a max pool (CT_OP_max_pool or
 * CT_OP_adaptive_max_pool) recorded with parameters pool (planes,
 * input_size, output_size: src/ops/params_pool.def): g the output
 * gradient, idx the saved indices (flat in each plane), x the input (shape
 * and dtype of the result).  One kernel, not recorded: for backward passes
 * that build no graph; the differentiable form is a scatter_add. */
ct_tensor *ct__max_pool_backward(ct_tensor *g, ct_tensor *idx, ct_tensor *x, const ct_p_pool *pool);

/* Dense [out, in] (row-major, f64) matrix of interpolate along one dim:
 * row i holds the weights of output i over the inputs (mode as
 * ct_interp_mode; sc the scale factor, 0: none).  The kernel's own tables. */
void ct__interp_matrix(int mode, bool align, int64_t in, int64_t out, double sc, double *m);

#endif
