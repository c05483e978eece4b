/* ops_conv.c -- fixture runners for the conv family (tests/fixtures/conv.txt). */
#include <stddef.h>

#include "fixture.h"

/* An optional int list param: NULL when absent. */
#define ARR(name, buf) (fx_ints(c, name, buf, 4) > 0 ? (buf) : NULL)
#define RESULT(y) ((out[0] = (y)) ? CT_OK : ct_last_error_code())

static ct_status run_conv(const fx_case *c, ct_tensor *const *in, ct_tensor **out, int nd) {
    int64_t s[4], p[4], d[4];
    ct_tensor *b = c->nin > 2 ? in[2] : NULL;
    int64_t g = fx_i(c, "groups", 1);
    ct_tensor *y = nd == 1   ? ct_conv1d(in[0], in[1], b, ARR("stride", s), ARR("padding", p), ARR("dilation", d), g)
                   : nd == 2 ? ct_conv2d(in[0], in[1], b, ARR("stride", s), ARR("padding", p), ARR("dilation", d), g)
                             : ct_conv3d(in[0], in[1], b, ARR("stride", s), ARR("padding", p), ARR("dilation", d), g);
    return RESULT(y);
}
static ct_status r_conv1d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_conv(c, in, out, 1); }
static ct_status r_conv2d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_conv(c, in, out, 2); }
static ct_status r_conv3d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_conv(c, in, out, 3); }

static ct_status r_conv_padmode(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t s[4], d[4];
    ct_tensor *b = c->nin > 2 ? in[2] : NULL;
    return RESULT(ct_conv_padmode(in[0], in[1], b, (int)fx_i(c, "nd", 2), ARR("stride", s),
                                  fx_s(c, "mode", "same"), ARR("dilation", d), fx_i(c, "groups", 1)));
}

static ct_status run_convt(const fx_case *c, ct_tensor *const *in, ct_tensor **out, int nd) {
    int64_t s[4], p[4], op[4], d[4];
    ct_tensor *b = c->nin > 2 ? in[2] : NULL;
    int64_t g = fx_i(c, "groups", 1);
    ct_tensor *y = nd == 1 ? ct_conv_transpose1d(in[0], in[1], b, ARR("stride", s), ARR("padding", p),
                                                 ARR("output_padding", op), g, ARR("dilation", d))
                           : ct_conv_transpose2d(in[0], in[1], b, ARR("stride", s), ARR("padding", p),
                                                 ARR("output_padding", op), g, ARR("dilation", d));
    return RESULT(y);
}
static ct_status r_convt1d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_convt(c, in, out, 1); }
static ct_status r_convt2d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_convt(c, in, out, 2); }

static ct_status run_maxpool(const fx_case *c, ct_tensor *const *in, ct_tensor **out, int nd, bool idx) {
    int64_t k[4], s[4], p[4], d[4];
    bool ceil = fx_i(c, "ceil_mode", 0) != 0;
    ct_tensor **ip = idx ? &out[1] : NULL;
    ct_tensor *y = nd == 1 ? ct_max_pool1d(in[0], ARR("k", k), ARR("stride", s), ARR("padding", p), ARR("dilation", d), ceil, ip)
                           : ct_max_pool2d(in[0], ARR("k", k), ARR("stride", s), ARR("padding", p), ARR("dilation", d), ceil, ip);
    return RESULT(y);
}
static ct_status r_mp1(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_maxpool(c, in, out, 1, false); }
static ct_status r_mp2(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_maxpool(c, in, out, 2, false); }
static ct_status r_mp1i(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_maxpool(c, in, out, 1, true); }
static ct_status r_mp2i(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_maxpool(c, in, out, 2, true); }

static ct_status r_ap1(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t k[4], s[4], p[4];
    return RESULT(ct_avg_pool1d(in[0], ARR("k", k), ARR("stride", s), ARR("padding", p),
                                fx_i(c, "ceil_mode", 0) != 0, fx_i(c, "count_include_pad", 1) != 0));
}
static ct_status r_ap2(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t k[4], s[4], p[4];
    return RESULT(ct_avg_pool2d(in[0], ARR("k", k), ARR("stride", s), ARR("padding", p),
                                fx_i(c, "ceil_mode", 0) != 0, fx_i(c, "count_include_pad", 1) != 0,
                                fx_i(c, "divisor_override", 0)));
}
static ct_status r_aap1(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return RESULT(ct_adaptive_avg_pool1d(in[0], fx_i(c, "output_size", 1)));
}
static ct_status r_aap2(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t o[4];
    return RESULT(ct_adaptive_avg_pool2d(in[0], ARR("output_size", o)));
}
static ct_status r_amp2(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t o[4];
    return RESULT(ct_adaptive_max_pool2d(in[0], ARR("output_size", o), &out[1]));
}

static ct_status run_interp(const fx_case *c, ct_tensor *const *in, ct_tensor **out, ct_interp_mode m) {
    int64_t sz[4];
    double sc[4];
    const double *scp = fx_doubles(c, "scale", sc, 4) > 0 ? sc : NULL;
    return RESULT(ct_interpolate(in[0], ARR("size", sz), scp, (int)fx_i(c, "nsp", 1), m,
                                 fx_i(c, "align_corners", 0) != 0));
}
static ct_status r_in_n(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_interp(c, in, out, CT_INTERP_NEAREST); }
static ct_status r_in_ne(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_interp(c, in, out, CT_INTERP_NEAREST_EXACT); }
static ct_status r_in_l(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_interp(c, in, out, CT_INTERP_LINEAR); }
static ct_status r_in_bl(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_interp(c, in, out, CT_INTERP_BILINEAR); }
static ct_status r_in_bc(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_interp(c, in, out, CT_INTERP_BICUBIC); }

static ct_status r_ps(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return RESULT(ct_pixel_shuffle(in[0], fx_i(c, "r", 1)));
}
static ct_status r_pu(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return RESULT(ct_pixel_unshuffle(in[0], fx_i(c, "r", 1)));
}
static ct_status r_im2col(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t k[4], d[4], p[4], s[4];
    return RESULT(ct_im2col(in[0], ARR("k", k), ARR("dilation", d), ARR("padding", p), ARR("stride", s)));
}
static ct_status r_col2im(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t o[4], k[4], d[4], p[4], s[4];
    return RESULT(ct_col2im(in[0], ARR("output_size", o), ARR("k", k), ARR("dilation", d),
                            ARR("padding", p), ARR("stride", s)));
}

#define CONV_TOL 1e-4, 1e-5
const fx_op fx_ops_conv[] = {
    {"conv1d", r_conv1d, CONV_TOL},
    {"conv2d", r_conv2d, CONV_TOL},
    {"conv3d", r_conv3d, CONV_TOL},
    {"conv_padmode", r_conv_padmode, CONV_TOL},
    {"conv_transpose1d", r_convt1d, CONV_TOL},
    {"conv_transpose2d", r_convt2d, CONV_TOL},
    {"max_pool1d", r_mp1, 0, 0},
    {"max_pool2d", r_mp2, 0, 0},
    {"max_pool1d_indices", r_mp1i, 0, 0},
    {"max_pool2d_indices", r_mp2i, 0, 0},
    {"avg_pool1d", r_ap1, 0, 0},
    {"avg_pool2d", r_ap2, 0, 0},
    {"adaptive_avg_pool1d", r_aap1, 0, 0},
    {"adaptive_avg_pool2d", r_aap2, 0, 0},
    {"adaptive_max_pool2d", r_amp2, 0, 0},
    {"interpolate_nearest", r_in_n, 0, 0},
    {"interpolate_nearest_exact", r_in_ne, 0, 0},
    {"interpolate_linear", r_in_l, 0, 0},
    {"interpolate_bilinear", r_in_bl, 0, 0},
    {"interpolate_bicubic", r_in_bc, 0, 0},
    {"pixel_shuffle", r_ps, 0, 0},
    {"pixel_unshuffle", r_pu, 0, 0},
    {"im2col", r_im2col, 0, 0},
    {"col2im", r_col2im, 0, 0},
};
const int fx_nops_conv = (int)(sizeof fx_ops_conv / sizeof fx_ops_conv[0]);
