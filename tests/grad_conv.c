/* grad_conv.c -- gradcheck cases for the conv family (convolution, pooling,
 * resampling, im2col/col2im). */
#include "gradcheck_harness.h"

#define U (void)n; (void)u
#define A(...) ((const int64_t[]){__VA_ARGS__})

/* ---- convolution ---- */
static ct_tensor *f_conv1d(ct_tensor *const *in, int n, void *u) {
    U; /* stride 2, padding 1, groups 2, bias */
    return ct_conv1d(in[0], in[1], in[2], A(2), A(1), NULL, 2);
}
static ct_tensor *f_conv1d_unbatched(ct_tensor *const *in, int n, void *u) {
    U; /* dilation 2, padding 2, stride 3 (windows leave a tail unread) */
    return ct_conv1d(in[0], in[1], in[2], A(3), A(2), A(2), 1);
}
static ct_tensor *f_conv2d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_conv2d(in[0], in[1], in[2], A(2, 1), A(1, 1), NULL, 2);
}
static ct_tensor *f_conv2d_dil(ct_tensor *const *in, int n, void *u) {
    U; /* no bias, dilation, batch 2 */
    return ct_conv2d(in[0], in[1], NULL, NULL, A(0, 1), A(2, 1), 1);
}
static ct_tensor *f_conv2d_1x1(ct_tensor *const *in, int n, void *u) {
    U; /* 1x1 kernel: the direct (no im2col) path */
    return ct_conv2d(in[0], in[1], in[2], NULL, NULL, NULL, 1);
}
static ct_tensor *f_conv3d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_conv3d(in[0], in[1], in[2], A(1, 2, 1), A(1, 0, 0), NULL, 1);
}
static ct_tensor *f_conv1d_same(ct_tensor *const *in, int n, void *u) {
    U; /* even kernel: asymmetric padding (1 left, 2 right) */
    return ct_conv_padmode(in[0], in[1], in[2], 1, NULL, "same", NULL, 1);
}
static ct_tensor *f_conv2d_same(ct_tensor *const *in, int n, void *u) {
    U; /* dilation (1, 2) on a (2, 2) kernel: padding (0|1, 1|1) */
    return ct_conv_padmode(in[0], in[1], NULL, 2, NULL, "same", A(1, 2), 1);
}
static ct_tensor *f_conv2d_valid(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_conv_padmode(in[0], in[1], in[2], 2, A(1, 2), "valid", NULL, 1);
}
static ct_tensor *f_convt1d(ct_tensor *const *in, int n, void *u) {
    U; /* stride 2, padding 1, output_padding 1, groups 2 */
    return ct_conv_transpose1d(in[0], in[1], in[2], A(2), A(1), A(1), 2, NULL);
}
static ct_tensor *f_convt2d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_conv_transpose2d(in[0], in[1], in[2], A(2, 1), A(0, 1), A(1, 0), 1, A(1, 2));
}
static ct_tensor *f_convt2d_unbatched(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_conv_transpose2d(in[0], in[1], NULL, A(1, 2), NULL, NULL, 1, NULL);
}
/* a conv stack (conv -> tanh -> conv_transpose): second derivatives mix both */
static ct_tensor *f_conv_stack(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *h = ct_tanh(ct_conv2d(in[0], in[1], NULL, A(2, 2), A(1, 1), NULL, 1));
    return ct_conv_transpose2d(h, in[2], NULL, A(2, 2), A(1, 1), A(1, 1), 1, NULL);
}

/* ---- pooling ---- */
static ct_tensor *f_max_pool2d(ct_tensor *const *in, int n, void *u) {
    U; /* unbatched, padding, stride (1, 2) */
    return ct_max_pool2d(in[0], A(2, 3), A(1, 2), A(1, 1), NULL, false, NULL);
}
static ct_tensor *f_max_pool2d_ceil(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_max_pool2d(in[0], A(3, 3), A(2, 2), A(1, 0), A(1, 2), true, NULL);
}
static ct_tensor *f_max_pool2d_idx(ct_tensor *const *in, int n, void *u) {
    U; /* indices asked for: the same node, both outputs */
    ct_tensor *idx = NULL;
    ct_tensor *y = ct_max_pool2d(in[0], A(2, 2), NULL, NULL, NULL, false, &idx);
    return idx ? y : NULL;
}
static ct_tensor *f_max_pool1d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_max_pool1d(in[0], A(3), A(2), A(1), A(2), false, NULL);
}
static ct_tensor *f_avg_pool2d(ct_tensor *const *in, int n, void *u) {
    U; /* ceil mode, padding excluded from the divisor */
    return ct_avg_pool2d(in[0], A(3, 2), A(2, 1), A(1, 1), true, false, 0);
}
static ct_tensor *f_avg_pool2d_pad(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_avg_pool2d(in[0], A(2, 3), A(2, 2), A(1, 1), true, true, 0);
}
static ct_tensor *f_avg_pool2d_div(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_avg_pool2d(in[0], A(2, 2), A(1, 2), NULL, false, true, 3);
}
static ct_tensor *f_avg_pool1d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_avg_pool1d(in[0], A(3), A(2), A(1), false, true);
}
static ct_tensor *f_adaptive_avg2d(ct_tensor *const *in, int n, void *u) {
    U; /* overlapping windows (5 -> 3) and shrinking (3 -> 2) */
    return ct_adaptive_avg_pool2d(in[0], A(3, 2));
}
static ct_tensor *f_adaptive_avg1d(ct_tensor *const *in, int n, void *u) {
    U; /* unbatched [C, L], growing (4 -> 6) */
    return ct_adaptive_avg_pool1d(in[0], 6);
}
static ct_tensor *f_adaptive_max2d(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_adaptive_max_pool2d(in[0], A(2, 3), NULL);
}
static ct_tensor *f_adaptive_max2d_idx(ct_tensor *const *in, int n, void *u) {
    U;
    ct_tensor *idx = NULL;
    ct_tensor *y = ct_adaptive_max_pool2d(in[0], A(3, 2), &idx);
    return idx ? y : NULL;
}

/* ---- interpolation ---- */
static ct_tensor *f_nearest(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(5, 7), NULL, 2, CT_INTERP_NEAREST, false);
}
static ct_tensor *f_nearest_down(ct_tensor *const *in, int n, void *u) {
    U; /* 1-D, downsampling: some inputs get no gradient */
    return ct_interpolate(in[0], A(3), NULL, 1, CT_INTERP_NEAREST, false);
}
static ct_tensor *f_nearest_exact(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], NULL, (const double[]){1.5, 0.75}, 2, CT_INTERP_NEAREST_EXACT, false);
}
static ct_tensor *f_linear(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(8), NULL, 1, CT_INTERP_LINEAR, false);
}
static ct_tensor *f_linear_ac(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(7), NULL, 1, CT_INTERP_LINEAR, true);
}
static ct_tensor *f_bilinear(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(5, 3), NULL, 2, CT_INTERP_BILINEAR, false);
}
static ct_tensor *f_bilinear_ac(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], NULL, (const double[]){2.0, 1.5}, 2, CT_INTERP_BILINEAR, true);
}
static ct_tensor *f_bicubic(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(6, 5), NULL, 2, CT_INTERP_BICUBIC, false);
}
static ct_tensor *f_bicubic_ac(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_interpolate(in[0], A(5, 3), NULL, 2, CT_INTERP_BICUBIC, true);
}

/* ---- im2col / col2im, pixel shuffle ---- */
static ct_tensor *f_im2col(ct_tensor *const *in, int n, void *u) {
    U;
    return ct_im2col(in[0], A(2, 2), A(1, 2), A(1, 0), A(2, 1));
}
static ct_tensor *f_col2im(ct_tensor *const *in, int n, void *u) {
    U; /* [1, 1*2*2, 2*3] -> [1, 1, 3, 4] */
    return ct_col2im(in[0], A(3, 4), A(2, 2), NULL, NULL, NULL);
}
static ct_tensor *f_col2im_strided(ct_tensor *const *in, int n, void *u) {
    U; /* unbatched [2*2*2, 2*1] -> [2, 3, 4], stride 2, padding (1, 0), dilation (1, 2) */
    return ct_col2im(in[0], A(3, 4), A(2, 2), A(1, 2), A(1, 0), A(2, 2));
}
static ct_tensor *f_pixel_shuffle(ct_tensor *const *in, int n, void *u) {
    U; /* a composite of views: differentiated through its parts */
    return ct_pixel_unshuffle(ct_mul(ct_pixel_shuffle(in[0], 2), ct_pixel_shuffle(in[0], 2)), 2);
}

#define GG GC_GRADGRAD
#define D GC_DISTINCT
const gc_case gc_cases_conv[] = {
    {"conv", "conv1d_stride_pad_groups_bias", f_conv1d, 3, {3, 3, 1}, {{1, 4, 5}, {4, 2, 3}, {4}}, 0, 0, GG, 0, 0},
    {"conv", "conv1d_unbatched_dilation", f_conv1d_unbatched, 3, {2, 3, 1}, {{2, 7}, {3, 2, 2}, {3}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_stride_pad_groups_bias", f_conv2d, 3, {4, 4, 1}, {{1, 2, 3, 4}, {4, 1, 2, 2}, {4}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_dilation_batch2", f_conv2d_dil, 2, {4, 4}, {{2, 1, 4, 3}, {2, 1, 2, 2}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_1x1", f_conv2d_1x1, 3, {4, 4, 1}, {{2, 2, 2, 3}, {3, 2, 1, 1}, {3}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_weight_frozen", f_conv2d, 3, {4, 4, 1}, {{1, 2, 3, 4}, {4, 1, 2, 2}, {4}}, 0, 0, GC_NO_GRAD_1, 0, 0},
    {"conv", "conv3d", f_conv3d, 3, {5, 5, 1}, {{1, 1, 3, 3, 2}, {2, 1, 2, 2, 1}, {2}}, 0, 0, GG, 0, 0},
    {"conv", "conv1d_same_even_kernel", f_conv1d_same, 3, {3, 3, 1}, {{1, 2, 5}, {3, 2, 4}, {3}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_same_dilation", f_conv2d_same, 2, {4, 4}, {{1, 1, 4, 3}, {2, 1, 2, 2}}, 0, 0, GG, 0, 0},
    {"conv", "conv2d_valid_stride", f_conv2d_valid, 3, {4, 4, 1}, {{1, 2, 3, 5}, {2, 2, 2, 2}, {2}}, 0, 0, 0, 0, 0},
    {"conv_transpose", "convt1d_stride_pad_outpad_groups", f_convt1d, 3, {3, 3, 1}, {{1, 4, 3}, {4, 1, 3}, {2}}, 0, 0, GG, 0, 0},
    {"conv_transpose", "convt2d_stride_dilation_outpad", f_convt2d, 3, {4, 4, 1}, {{1, 2, 3, 2}, {2, 3, 2, 2}, {3}}, 0, 0, GG, 0, 0},
    {"conv_transpose", "convt2d_unbatched", f_convt2d_unbatched, 2, {3, 4}, {{2, 2, 3}, {2, 2, 1, 2}}, 0, 0, GG, 0, 0},
    {"conv_transpose", "conv_stack", f_conv_stack, 3, {4, 4, 4}, {{1, 1, 4, 4}, {2, 1, 3, 3}, {2, 1, 3, 3}}, 0, 0, GG, 0, 0},
    {"max_pool", "max_pool2d_unbatched_pad", f_max_pool2d, 1, {3}, {{2, 3, 4}}, 0, 0, D, 0, 0},
    {"max_pool", "max_pool2d_ceil_dilation", f_max_pool2d_ceil, 1, {4}, {{1, 1, 5, 5}}, 0, 0, D, 0, 0},
    {"max_pool", "max_pool2d_indices", f_max_pool2d_idx, 1, {4}, {{1, 2, 4, 2}}, 0, 0, D, 0, 0},
    {"max_pool", "max_pool1d", f_max_pool1d, 1, {3}, {{2, 2, 6}}, 0, 0, D, 0, 0},
    {"avg_pool", "avg_pool2d_ceil_nopad_count", f_avg_pool2d, 1, {4}, {{1, 2, 4, 3}}, 0, 0, GG, 0, 0},
    {"avg_pool", "avg_pool2d_ceil_count_pad", f_avg_pool2d_pad, 1, {3}, {{2, 3, 4}}, 0, 0, GG, 0, 0},
    {"avg_pool", "avg_pool2d_divisor_override", f_avg_pool2d_div, 1, {4}, {{1, 2, 3, 4}}, 0, 0, GG, 0, 0},
    {"avg_pool", "avg_pool1d", f_avg_pool1d, 1, {3}, {{2, 2, 5}}, 0, 0, GG, 0, 0},
    {"adaptive_avg_pool", "adaptive_avg_pool2d", f_adaptive_avg2d, 1, {4}, {{1, 1, 5, 3}}, 0, 0, GG, 0, 0},
    {"adaptive_avg_pool", "adaptive_avg_pool1d_unbatched", f_adaptive_avg1d, 1, {2}, {{2, 4}}, 0, 0, GG, 0, 0},
    {"adaptive_max_pool", "adaptive_max_pool2d", f_adaptive_max2d, 1, {4}, {{1, 1, 5, 4}}, 0, 0, D, 0, 0},
    {"adaptive_max_pool", "adaptive_max_pool2d_indices", f_adaptive_max2d_idx, 1, {3}, {{2, 4, 3}}, 0, 0, D, 0, 0},
    {"interpolate", "nearest_2d", f_nearest, 1, {4}, {{1, 1, 3, 4}}, 0, 0, GG, 0, 0},
    {"interpolate", "nearest_1d_down", f_nearest_down, 1, {3}, {{1, 2, 7}}, 0, 0, GG, 0, 0},
    {"interpolate", "nearest_exact_scale", f_nearest_exact, 1, {4}, {{1, 2, 2, 4}}, 0, 0, GG, 0, 0},
    {"interpolate", "linear", f_linear, 1, {3}, {{1, 2, 5}}, 0, 0, GG, 0, 0},
    {"interpolate", "linear_align_corners", f_linear_ac, 1, {3}, {{2, 1, 4}}, 0, 0, GG, 0, 0},
    {"interpolate", "bilinear", f_bilinear, 1, {4}, {{1, 1, 3, 4}}, 0, 0, GG, 0, 0},
    {"interpolate", "bilinear_align_corners_scale", f_bilinear_ac, 1, {4}, {{1, 2, 2, 3}}, 0, 0, GG, 0, 0},
    {"interpolate", "bicubic", f_bicubic, 1, {4}, {{1, 1, 4, 4}}, 0, 0, GG, 0, 0},
    {"interpolate", "bicubic_align_corners", f_bicubic_ac, 1, {4}, {{1, 1, 3, 4}}, 0, 0, GG, 0, 0},
    {"im2col", "im2col", f_im2col, 1, {4}, {{1, 2, 3, 4}}, 0, 0, GG, 0, 0},
    {"col2im", "col2im", f_col2im, 1, {3}, {{1, 4, 6}}, 0, 0, GG, 0, 0},
    {"col2im", "col2im_unbatched_strided", f_col2im_strided, 1, {2}, {{8, 2}}, 0, 0, GG, 0, 0},
    {"permute", "pixel_shuffle_unshuffle", f_pixel_shuffle, 1, {4}, {{1, 4, 2, 2}}, 0, 0, GG, 0, 0},
};
const int gc_ncases_conv = sizeof gc_cases_conv / sizeof gc_cases_conv[0];
