/* layers_misc.c -- pooling (MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d,
 * AdaptiveMaxPool2d), Upsample, PixelShuffle, ZeroPad2d, ReflectionPad2d.
 * (F.logsigmoid, F.prelu and F.glu, used by the activation modules, are in
 * functional.c.) */
#include <math.h>
#include <stdio.h>

#include "layers_impl.h"

/* ---- pooling ---------------------------------------------------------------------- */
typedef enum { P_MAX, P_AVG, P_AAVG, P_AMAX } pool_kind;
typedef struct {
    ct_module base;
    pool_kind kind;
    int nd;
    int64_t k[2], stride[2], padding[2], dilation[2];
    bool ceil_mode, return_indices, count_include_pad;
    int64_t divisor;
} pool_mod;

static ct_status pool_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout) {
    pool_mod *p = (pool_mod *)m;
    const char *name = m->cls->name;
    if (n != 1) return ct__error_status(CT_ERR_ARG, "%s: forward takes 1 input, got %d", name, n);
    int maxout = (p->kind == P_MAX || p->kind == P_AMAX) && p->return_indices ? 2 : 1;
    if (nout < 1 || nout > maxout)
        return ct__error_status(CT_ERR_ARG, "%s: forward gives %d output%s, %d asked", name, maxout,
                                maxout > 1 ? "s" : "", nout);
    ct_tensor *x = in[0], *idx = NULL, **pidx = nout > 1 ? &idx : NULL;
    ct_tensor *y = NULL;
    switch (p->kind) {
    case P_MAX:
        y = p->nd == 1 ? ct_max_pool1d(x, p->k, p->stride, p->padding, p->dilation, p->ceil_mode, pidx)
                       : ct_max_pool2d(x, p->k, p->stride, p->padding, p->dilation, p->ceil_mode, pidx);
        break;
    case P_AVG:
        y = p->nd == 1 ? ct_avg_pool1d(x, p->k, p->stride, p->padding, p->ceil_mode, p->count_include_pad)
                       : ct_avg_pool2d(x, p->k, p->stride, p->padding, p->ceil_mode, p->count_include_pad,
                                       p->divisor);
        break;
    case P_AAVG:
        y = p->nd == 1 ? ct_adaptive_avg_pool1d(x, p->k[0]) : ct_adaptive_avg_pool2d(x, p->k);
        break;
    case P_AMAX:
        y = ct_adaptive_max_pool2d(x, p->k, pidx);
        break;
    }
    if (!y) return ct_last_error_code();
    out[0] = y;
    if (nout > 1) out[1] = idx;
    return CT_OK;
}

static ct_tensor *pool_forward(ct_module *m, ct_tensor *const *in, int n) {
    ct_tensor *y = NULL;
    return pool_multi(m, in, n, &y, 1) ? NULL : y;
}

static char *pool_repr(ct_module *m) {
    pool_mod *p = (pool_mod *)m;
    char k[128], s[128], pd[128], d[128];
    switch (p->kind) {
    case P_MAX:
        ct__layers_int_or_tuple(p->k, p->nd, k, sizeof k);
        ct__layers_int_or_tuple(p->stride, p->nd, s, sizeof s);
        ct__layers_int_or_tuple(p->padding, p->nd, pd, sizeof pd);
        ct__layers_int_or_tuple(p->dilation, p->nd, d, sizeof d);
        return ct__layers_fmt("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", k, s, pd, d,
                              p->ceil_mode ? "True" : "False");
    case P_AVG:
        if (p->nd == 1) { /* AvgPool1d keeps _single tuples */
            ct__layers_tuple(p->k, 1, k, sizeof k);
            ct__layers_tuple(p->stride, 1, s, sizeof s);
            ct__layers_tuple(p->padding, 1, pd, sizeof pd);
        } else {
            ct__layers_int_or_tuple(p->k, 2, k, sizeof k);
            ct__layers_int_or_tuple(p->stride, 2, s, sizeof s);
            ct__layers_int_or_tuple(p->padding, 2, pd, sizeof pd);
        }
        return ct__layers_fmt("kernel_size=%s, stride=%s, padding=%s", k, s, pd);
    default:
        ct__layers_int_or_tuple(p->k, p->nd, k, sizeof k);
        return ct__layers_fmt("output_size=%s", k);
    }
}

#define POOL_CLASS(kname, Name) \
    static const ct_module_class kname = {Name, sizeof(pool_mod), pool_forward, pool_repr, NULL, pool_multi};
POOL_CLASS(k_max1, "MaxPool1d")
POOL_CLASS(k_max2, "MaxPool2d")
POOL_CLASS(k_avg1, "AvgPool1d")
POOL_CLASS(k_avg2, "AvgPool2d")
POOL_CLASS(k_aavg1, "AdaptiveAvgPool1d")
POOL_CLASS(k_aavg2, "AdaptiveAvgPool2d")
POOL_CLASS(k_amax2, "AdaptiveMaxPool2d")

static ct_module *pool_new(const ct_module_class *cls, pool_kind kind, int nd, const int64_t *k,
                           const int64_t *stride, const int64_t *padding, const int64_t *dilation) {
    if (!k) return ct__error(CT_ERR_NULL, "%s: %s is NULL", cls->name,
                             kind == P_MAX || kind == P_AVG ? "kernel_size" : "output_size");
    for (int i = 0; i < nd; i++) {
        if (kind == P_MAX || kind == P_AVG) {
            if (k[i] <= 0)
                return ct__error(CT_ERR_ARG, "%s: kernel_size must be greater than zero, but got %lld",
                                 cls->name, (long long)k[i]);
            if (stride && stride[i] <= 0)
                return ct__error(CT_ERR_ARG, "%s: stride must be greater than zero, but got %lld", cls->name,
                                 (long long)stride[i]);
            if (padding && (padding[i] < 0 || padding[i] > k[i] / 2))
                return ct__error(CT_ERR_ARG, "%s: pad should be at most half of kernel size, but got pad=%lld "
                                 "and kernel_size=%lld", cls->name, (long long)padding[i], (long long)k[i]);
            if (dilation && dilation[i] <= 0)
                return ct__error(CT_ERR_ARG, "%s: dilation must be greater than zero, but got %lld",
                                 cls->name, (long long)dilation[i]);
        } else if (k[i] < 0) {
            return ct__error(CT_ERR_ARG, "%s: output_size must be non-negative, but got %lld", cls->name,
                             (long long)k[i]);
        }
    }
    pool_mod *p = (pool_mod *)ct_module_new(cls);
    if (!p) return NULL;
    p->kind = kind;
    p->nd = nd;
    for (int i = 0; i < nd; i++) {
        p->k[i] = k[i];
        p->stride[i] = stride ? stride[i] : k[i];
        p->padding[i] = padding ? padding[i] : 0;
        p->dilation[i] = dilation ? dilation[i] : 1;
    }
    return &p->base;
}

ct_module *ct_max_pool1d_new(const int64_t k[1], const int64_t stride[1], const int64_t padding[1],
                             const int64_t dilation[1], bool return_indices, bool ceil_mode) {
    pool_mod *p = (pool_mod *)pool_new(&k_max1, P_MAX, 1, k, stride, padding, dilation);
    if (p) { p->return_indices = return_indices; p->ceil_mode = ceil_mode; }
    return (ct_module *)p;
}
ct_module *ct_max_pool2d_new(const int64_t k[2], const int64_t stride[2], const int64_t padding[2],
                             const int64_t dilation[2], bool return_indices, bool ceil_mode) {
    pool_mod *p = (pool_mod *)pool_new(&k_max2, P_MAX, 2, k, stride, padding, dilation);
    if (p) { p->return_indices = return_indices; p->ceil_mode = ceil_mode; }
    return (ct_module *)p;
}
ct_module *ct_avg_pool1d_new(const int64_t k[1], const int64_t stride[1], const int64_t padding[1],
                             bool ceil_mode, bool count_include_pad) {
    pool_mod *p = (pool_mod *)pool_new(&k_avg1, P_AVG, 1, k, stride, padding, NULL);
    if (p) { p->ceil_mode = ceil_mode; p->count_include_pad = count_include_pad; }
    return (ct_module *)p;
}
ct_module *ct_avg_pool2d_new(const int64_t k[2], const int64_t stride[2], const int64_t padding[2],
                             bool ceil_mode, bool count_include_pad, int64_t divisor_override) {
    pool_mod *p = (pool_mod *)pool_new(&k_avg2, P_AVG, 2, k, stride, padding, NULL);
    if (p) {
        p->ceil_mode = ceil_mode;
        p->count_include_pad = count_include_pad;
        p->divisor = divisor_override > 0 ? divisor_override : 0;
    }
    return (ct_module *)p;
}
ct_module *ct_adaptive_avg_pool1d_new(int64_t output_size) {
    return pool_new(&k_aavg1, P_AAVG, 1, &output_size, NULL, NULL, NULL);
}
ct_module *ct_adaptive_avg_pool2d_new(const int64_t output_size[2]) {
    return pool_new(&k_aavg2, P_AAVG, 2, output_size, NULL, NULL, NULL);
}
ct_module *ct_adaptive_max_pool2d_new(const int64_t output_size[2], bool return_indices) {
    pool_mod *p = (pool_mod *)pool_new(&k_amax2, P_AMAX, 2, output_size, NULL, NULL, NULL);
    if (p) p->return_indices = return_indices;
    return (ct_module *)p;
}

/* ---- Upsample ---------------------------------------------------------------------- */
typedef struct {
    ct_module base;
    int nsize, nscale;
    int64_t size[3];
    double scale[3];
    ct_interp_mode mode;
    bool align_corners;
} upsample_mod;

static const char *k_interp_names[] = {"nearest", "linear", "bilinear", "bicubic", "nearest-exact"};

static ct_tensor *upsample_forward(ct_module *m, ct_tensor *const *in, int n) {
    upsample_mod *u = (upsample_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "Upsample: forward takes 1 input, got %d", n);
    int nsp = ct_ndim(in[0]) - 2;
    int given = u->nsize ? u->nsize : u->nscale;
    if (nsp < 1 || nsp > 3 || (given > 1 && given != nsp))
        return ct__error(CT_ERR_SHAPE, "Upsample: Input Error: %s of %d entries does not fit input of size %s "
                         "(%d spatial dims)", u->nsize ? "size" : "scale_factor", given, ct__tshape(in[0]),
                         nsp < 0 ? 0 : nsp);
    int64_t size[3];
    double scale[3];
    for (int i = 0; i < nsp; i++) {
        size[i] = u->size[given > 1 ? i : 0];
        scale[i] = u->scale[given > 1 ? i : 0];
    }
    return ct_interpolate(in[0], u->nsize ? size : NULL, u->nsize ? NULL : scale, nsp, u->mode,
                          u->align_corners);
}

static char *upsample_repr(ct_module *m) {
    upsample_mod *u = (upsample_mod *)m;
    char buf[256];
    if (u->nscale) {
        size_t k = 0;
        if (u->nscale > 1) k += (size_t)snprintf(buf, sizeof buf, "(");
        for (int i = 0; i < u->nscale; i++) {
            char num[64];
            ct__layers_pyfloat(u->scale[i], num, sizeof num);
            k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? ", " : "", num);
        }
        if (u->nscale > 1) snprintf(buf + k, sizeof buf - k, ")");
        return ct__layers_fmt("scale_factor=%s, mode=%s", buf, k_interp_names[u->mode]);
    }
    if (u->nsize > 1) ct__layers_tuple(u->size, u->nsize, buf, sizeof buf);
    else snprintf(buf, sizeof buf, "%lld", (long long)u->size[0]);
    return ct__layers_fmt("size=%s, mode=%s", buf, k_interp_names[u->mode]);
}

static const ct_module_class k_upsample = {"Upsample", sizeof(upsample_mod), upsample_forward,
                                           upsample_repr, NULL, NULL};

ct_module *ct_upsample_new(const int64_t *size, int nsize, const double *scale_factor, int nscale,
                           const char *mode, bool align_corners) {
    if (!size) nsize = 0;
    if (!scale_factor) nscale = 0;
    if ((nsize > 0) == (nscale > 0))
        return ct__error(CT_ERR_ARG, "Upsample: %s", nsize > 0 ? "only one of size or scale_factor should be defined"
                                                                : "either size or scale_factor should be defined");
    if (nsize > 3 || nscale > 3)
        return ct__error(CT_ERR_ARG, "Upsample: at most 3 spatial dims, got %d", nsize > 3 ? nsize : nscale);
    int md = 0;
    const char *mname = mode ? mode : "nearest";
    for (; md < 5; md++)
        if (!strcmp(mname, k_interp_names[md])) break;
    if (md == 5)
        return ct__error(CT_ERR_ARG, "Upsample: unsupported mode '%s' (nearest, linear, bilinear, bicubic, "
                         "nearest-exact)", mname);
    for (int i = 0; i < nsize; i++)
        if (size[i] <= 0)
            return ct__error(CT_ERR_ARG, "Upsample: size must be positive, got %lld", (long long)size[i]);
    for (int i = 0; i < nscale; i++)
        if (!(scale_factor[i] > 0) || !isfinite(scale_factor[i]))
            return ct__error(CT_ERR_ARG, "Upsample: scale_factor must be positive and finite, got %g",
                             scale_factor[i]);
    upsample_mod *u = (upsample_mod *)ct_module_new(&k_upsample);
    if (!u) return NULL;
    u->nsize = nsize;
    u->nscale = nscale;
    for (int i = 0; i < nsize; i++) u->size[i] = size[i];
    for (int i = 0; i < nscale; i++) u->scale[i] = scale_factor[i];
    u->mode = (ct_interp_mode)md;
    u->align_corners = align_corners;
    return &u->base;
}

/* ---- PixelShuffle ---------------------------------------------------------------------- */
typedef struct { ct_module base; int64_t r; } shuffle_mod;
static ct_tensor *shuffle_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "PixelShuffle: forward takes 1 input, got %d", n);
    return ct_pixel_shuffle(in[0], ((shuffle_mod *)m)->r);
}
static char *shuffle_repr(ct_module *m) {
    return ct__layers_fmt("upscale_factor=%lld", (long long)((shuffle_mod *)m)->r);
}
static const ct_module_class k_shuffle = {"PixelShuffle", sizeof(shuffle_mod), shuffle_forward,
                                          shuffle_repr, NULL, NULL};
ct_module *ct_pixel_shuffle_new(int64_t upscale_factor) {
    if (upscale_factor <= 0)
        return ct__error(CT_ERR_ARG, "PixelShuffle: upscale_factor must be positive, got %lld",
                         (long long)upscale_factor);
    shuffle_mod *s = (shuffle_mod *)ct_module_new(&k_shuffle);
    if (s) s->r = upscale_factor;
    return (ct_module *)s;
}

/* ---- ZeroPad2d / ReflectionPad2d -------------------------------------------------------- */
typedef struct { ct_module base; int64_t pad[4]; ct_pad_mode mode; } pad_mod;
static ct_tensor *pad_forward(ct_module *m, ct_tensor *const *in, int n) {
    pad_mod *p = (pad_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: forward takes 1 input, got %d", m->cls->name, n);
    if (ct_ndim(in[0]) != 3 && ct_ndim(in[0]) != 4)
        return ct__error(CT_ERR_SHAPE, "%s: expected 3D or 4D input, but got input of size %s", m->cls->name,
                         ct__tshape(in[0]));
    return ct_pad(in[0], p->pad, 4, p->mode, 0.0);
}
static char *pad_repr(ct_module *m) {
    char t[256];
    ct__layers_tuple(((pad_mod *)m)->pad, 4, t, sizeof t);
    return ct__layers_fmt("%s", t);
}
static const ct_module_class k_zero_pad = {"ZeroPad2d", sizeof(pad_mod), pad_forward, pad_repr, NULL, NULL};
static const ct_module_class k_reflection_pad = {"ReflectionPad2d", sizeof(pad_mod), pad_forward, pad_repr,
                                                 NULL, NULL};
static ct_module *pad_new(const ct_module_class *cls, const int64_t padding[4], ct_pad_mode mode) {
    if (!padding) return ct__error(CT_ERR_NULL, "%s: padding is NULL", cls->name);
    pad_mod *p = (pad_mod *)ct_module_new(cls);
    if (!p) return NULL;
    memcpy(p->pad, padding, sizeof p->pad);
    p->mode = mode;
    return &p->base;
}
ct_module *ct_zero_pad2d_new(const int64_t padding[4]) { return pad_new(&k_zero_pad, padding, CT_PAD_CONSTANT); }
ct_module *ct_reflection_pad2d_new(const int64_t padding[4]) {
    return pad_new(&k_reflection_pad, padding, CT_PAD_REFLECT);
}
