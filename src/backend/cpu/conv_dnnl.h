/* conv_dnnl.h -- private: the oneDNN path of the f32 and bf16 convolution kernels
 * (conv_dnnl.c, built with CT_HAVE_DNNL; conv.c calls it). */
#ifndef CT_CONV_DNNL_H
#define CT_CONV_DNNL_H
#include <stdint.h>

#include "../../ops/params.h"

enum { CT_DNNL_FWD = 1, CT_DNNL_BWD_DATA = 2, CT_DNNL_BWD_WEIGHTS = 3 };

/* Runs one pass of an f32 convolution with oneDNN.  geom: {N, image-side
 * channels, grid-side channels, groups}; win: the conv's parameters, of
 * which the window is read (image_size, grid_size, kernel_size, stride,
 * leading padding, dilation; src/ops/params_conv.def), the channels being
 * in geom.  Contiguous NC(D)HW buffers: img [N, C, image], grid
 * [N, Co, grid], w [Co, C/groups, k], bias [Co] or NULL (forward only).
 * FWD reads img, w, bias and writes grid; BWD_DATA reads grid and w and
 * writes img; BWD_WEIGHTS reads img and grid and writes w.
 * Returns 1 when done, 0 when oneDNN did not run it (the caller computes it
 * itself; nothing is reported as an error). */
/* wid: the weights' identity when their reordered copy may be kept
 * across calls (FWD only; NULL: reorder into a temporary every call), see
 * "reordered weights" in conv_dnnl.c. */
typedef struct ct__dnnl_wid {
    struct ct_storage *s;
    int64_t off;
} ct__dnnl_wid;
/* bf16: all the buffers are bf16 instead (autocast's convolutions on a
 * CPU with AVX512_BF16: oneDNN's bf16 kernels, f32 accumulation). */
int ct__dnnl_conv(int kind, const int64_t *geom, const ct_p_conv *win, void *img, void *w,
                  void *bias, void *grid, const ct__dnnl_wid *wid, int bf16);
/* 1 unless CT_DNNL=0 (or ct__dnnl_set_mode(0)) or deterministic algorithms
 * are on: bf16 convolutions go to oneDNN whenever it is allowed, their
 * other way being whole-tensor conversions to f32 and back. */
int ct__dnnl_allowed(void);

/* Whether conv.c should try ct__dnnl_conv for this pass (same arguments):
 * the routing rule (conv_dnnl.c), CT_DNNL=0 / CT_DNNL=1 in the environment
 * (never / always, for measuring), and never with deterministic
 * algorithms on. */
int ct__dnnl_want(int kind, const int64_t *geom, const ct_p_conv *win);
/* How many forward convolutions reused a kept weight copy (-1: built
 * without oneDNN); for the tests. */
long long ct__dnnl_wcache_hits(void);
/* Overrides CT_DNNL for this process: -1 the rule, 0 never, 1 always
 * (benchmarks interleave the paths with it). */
void ct__dnnl_set_mode(int mode);
#endif
