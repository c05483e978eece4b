/* conv_impl.h -- private: entry points of the conv family used by its
 * derivatives (src/autograd/derivs_conv.c). */
#ifndef CT_CONV_IMPL_H
#define CT_CONV_IMPL_H

#include "../core/tensor_impl.h"

/* conv (op CT_OP_conv) or transposed conv (CT_OP_conv_transpose) with an
 * explicit window geometry, given as the args of a recorded conv node:
 * v[0] = {img d,h,w, grid d,h,w, k d,h,w}, v[1] stride, v[2] leading
 * padding, v[3] dilation (3 entries each, leading unused dims 1/1/0/1) and
 * i[3] groups.  x is [N, C, *sp] or [C, *sp] with nd = w->ndim - 2 spatial
 * dims; for conv, sp is img and the result's spatial size is grid; for
 * conv_transpose the reverse.  Any consistent geometry is accepted (output
 * padding, asymmetric padding): out-of-image window taps read/write
 * nothing.  Recorded like the public ops, so it is differentiable. */
ct_tensor *ct__conv_geom(ct_op op, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_args *geom);

/* Dense [out, in] (row-major, f64) matrix of interpolate along one dim:
 * row i holds the weights of output i over the inputs (mode as
 * ct_interp_mode; sc the scale factor, 0: none).  The kernel's own tables. */
void ct__interp_matrix(int mode, bool align, int64_t in, int64_t out, double sc, double *m);

#endif
