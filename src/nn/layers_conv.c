/* layers_conv.c -- nn.Conv1d/2d/3d and nn.ConvTranspose1d/2d.
 *
 * Like PyTorch's _ConvNd: padding given as numbers or as "same"/"valid";
 * a padding_mode other than "zeros" pads the input with F.pad (reflect,
 * replicate, circular) and convolves without padding. */
#include <math.h>
#include <stdio.h>

#include "layers_impl.h"

typedef struct {
    ct_module base;
    int nd;
    bool transposed;
    int64_t in, out, groups;
    int64_t k[3], stride[3], padding[3], dilation[3], output_padding[3];
    int padstr;          /* 0: numbers, 1: "same", 2: "valid" */
    ct_pad_mode mode;    /* CT_PAD_CONSTANT: "zeros" */
    /* for non-zeros padding modes: F.pad's argument (reversed, repeated twice) */
    int64_t fpad[6];
} conv_mod;

static const char *k_mode_names[] = {"zeros", "reflect", "replicate", "circular"};

static const char *cls_name(int nd, bool transposed) {
    static const char *n[2][3] = {{"Conv1d", "Conv2d", "Conv3d"},
                                  {"ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"}};
    return n[transposed][nd - 1];
}

static ct_tensor *conv_forward(ct_module *m, ct_tensor *const *in, int n) {
    conv_mod *c = (conv_mod *)m;
    const char *name = m->cls->name;
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: forward takes 1 input, got %d", name, n);
    ct_tensor *x = in[0], *w = ct_module_param(m, 0), *b = ct_module_param(m, 1);
    if (ct_ndim(x) != c->nd + 1 && ct_ndim(x) != c->nd + 2)
        return ct__error(CT_ERR_SHAPE, "%s: Expected %dD (unbatched) or %dD (batched) input, but got "
                         "input of size: %s", name, c->nd + 1, c->nd + 2, ct__tshape(x));
    if (c->transposed) {
        switch (c->nd) {
        case 1: return ct_conv_transpose1d(x, w, b, c->stride, c->padding, c->output_padding, c->groups, c->dilation);
        case 2: return ct_conv_transpose2d(x, w, b, c->stride, c->padding, c->output_padding, c->groups, c->dilation);
        default: return ct__error(CT_ERR_ARG, "%s: not supported", name);
        }
    }
    if (c->mode != CT_PAD_CONSTANT) {
        static const int64_t zero[3] = {0, 0, 0};
        ct_tensor *xp = ct_pad(x, c->fpad, 2 * c->nd, c->mode, 0);
        switch (c->nd) {
        case 1: return ct_conv1d(xp, w, b, c->stride, zero, c->dilation, c->groups);
        case 2: return ct_conv2d(xp, w, b, c->stride, zero, c->dilation, c->groups);
        default: return ct_conv3d(xp, w, b, c->stride, zero, c->dilation, c->groups);
        }
    }
    if (c->padstr)
        return ct_conv_padmode(x, w, b, c->nd, c->stride, c->padstr == 1 ? "same" : "valid", c->dilation,
                               c->groups);
    switch (c->nd) {
    case 1: return ct_conv1d(x, w, b, c->stride, c->padding, c->dilation, c->groups);
    case 2: return ct_conv2d(x, w, b, c->stride, c->padding, c->dilation, c->groups);
    default: return ct_conv3d(x, w, b, c->stride, c->padding, c->dilation, c->groups);
    }
}

static bool all_eq(const int64_t *v, int n, int64_t x) {
    for (int i = 0; i < n; i++)
        if (v[i] != x) return false;
    return true;
}

static char *conv_repr(ct_module *m) {
    conv_mod *c = (conv_mod *)m;
    char buf[1024], t[256];
    size_t k = 0;
    ct__layers_tuple(c->k, c->nd, t, sizeof t);
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%lld, %lld, kernel_size=%s", (long long)c->in,
                          (long long)c->out, t);
    ct__layers_tuple(c->stride, c->nd, t, sizeof t);
    k += (size_t)snprintf(buf + k, sizeof buf - k, ", stride=%s", t);
    if (c->padstr) {
        k += (size_t)snprintf(buf + k, sizeof buf - k, ", padding=%s", c->padstr == 1 ? "same" : "valid");
    } else if (!all_eq(c->padding, c->nd, 0)) {
        ct__layers_tuple(c->padding, c->nd, t, sizeof t);
        k += (size_t)snprintf(buf + k, sizeof buf - k, ", padding=%s", t);
    }
    if (!all_eq(c->dilation, c->nd, 1)) {
        ct__layers_tuple(c->dilation, c->nd, t, sizeof t);
        k += (size_t)snprintf(buf + k, sizeof buf - k, ", dilation=%s", t);
    }
    if (!all_eq(c->output_padding, c->nd, 0)) {
        ct__layers_tuple(c->output_padding, c->nd, t, sizeof t);
        k += (size_t)snprintf(buf + k, sizeof buf - k, ", output_padding=%s", t);
    }
    if (c->groups != 1) k += (size_t)snprintf(buf + k, sizeof buf - k, ", groups=%lld", (long long)c->groups);
    if (!ct_module_param(m, 1)) k += (size_t)snprintf(buf + k, sizeof buf - k, ", bias=False");
    if (c->mode != CT_PAD_CONSTANT)
        k += (size_t)snprintf(buf + k, sizeof buf - k, ", padding_mode=%s", k_mode_names[c->mode]);
    return ct__layers_fmt("%s", buf);
}

static const ct_module_class k_conv[2][3] = {
    {{"Conv1d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL},
     {"Conv2d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL},
     {"Conv3d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL}},
    {{"ConvTranspose1d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL},
     {"ConvTranspose2d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL},
     {"ConvTranspose3d", sizeof(conv_mod), conv_forward, conv_repr, NULL, NULL}}};

static ct_module *conv_new(int nd, bool transposed, int64_t in, int64_t out, const int64_t *kernel,
                           const ct_conv_opts *o) {
    const char *name = cls_name(nd, transposed);
    static const ct_conv_opts defaults = {0};
    if (!o) o = &defaults;
    if (!kernel) return ct__error(CT_ERR_NULL, "%s: kernel_size is NULL", name);
    int64_t groups = o->groups ? o->groups : 1;
    if (groups < 0) return ct__error(CT_ERR_ARG, "%s: groups must be a positive integer, got %lld", name, (long long)groups);
    if (in < 0 || out < 0)
        return ct__error(CT_ERR_ARG, "%s: in_channels and out_channels must be non-negative, got %lld and %lld",
                         name, (long long)in, (long long)out);
    if (in % groups) return ct__error(CT_ERR_ARG, "%s: in_channels must be divisible by groups", name);
    if (out % groups) return ct__error(CT_ERR_ARG, "%s: out_channels must be divisible by groups", name);
    for (int i = 0; i < nd; i++) {
        if (kernel[i] <= 0)
            return ct__error(CT_ERR_ARG, "%s: kernel_size must be positive, got %lld", name, (long long)kernel[i]);
        if (o->stride && o->stride[i] <= 0)
            return ct__error(CT_ERR_ARG, "%s: stride must be positive, got %lld", name, (long long)o->stride[i]);
        if (o->dilation && o->dilation[i] <= 0)
            return ct__error(CT_ERR_ARG, "%s: dilation must be positive, got %lld", name, (long long)o->dilation[i]);
        if (o->padding && o->padding[i] < 0)
            return ct__error(CT_ERR_ARG, "%s: padding must be non-negative, got %lld", name, (long long)o->padding[i]);
        if (o->output_padding && o->output_padding[i] < 0)
            return ct__error(CT_ERR_ARG, "%s: output_padding must be non-negative, got %lld", name,
                             (long long)o->output_padding[i]);
    }
    int mode = 0;
    if (o->padding_mode) {
        for (mode = 0; mode < 4; mode++)
            if (!strcmp(o->padding_mode, k_mode_names[mode])) break;
        if (mode == 4)
            return ct__error(CT_ERR_ARG, "%s: padding_mode must be one of 'zeros', 'reflect', 'replicate' "
                             "or 'circular', but got padding_mode='%s'", name, o->padding_mode);
    }
    int padstr = 0;
    if (o->padding_str) {
        if (!strcmp(o->padding_str, "same")) padstr = 1;
        else if (!strcmp(o->padding_str, "valid")) padstr = 2;
        else
            return ct__error(CT_ERR_ARG, "%s: Invalid padding string '%s', should be one of ['valid', 'same']",
                             name, o->padding_str);
        if (padstr == 1 && o->stride && !all_eq(o->stride, nd, 1))
            return ct__error(CT_ERR_ARG, "%s: padding='same' is not supported for strided convolutions", name);
    }
    if (transposed) {
        if (mode != 0)
            return ct__error(CT_ERR_ARG, "%s: Only \"zeros\" padding mode is supported for %s", name, name);
        if (padstr) return ct__error(CT_ERR_ARG, "%s: padding must be numbers, not '%s'", name, o->padding_str);
    } else if (o->output_padding && !all_eq(o->output_padding, nd, 0)) {
        return ct__error(CT_ERR_ARG, "%s: output_padding is only for transposed convolutions", name);
    }

    conv_mod *c = (conv_mod *)ct_module_new(&k_conv[transposed][nd - 1]);
    if (!c) return NULL;
    c->nd = nd;
    c->transposed = transposed;
    c->in = in;
    c->out = out;
    c->groups = groups;
    c->padstr = padstr;
    c->mode = (ct_pad_mode)mode;
    int64_t receptive = 1;
    for (int i = 0; i < nd; i++) {
        c->k[i] = kernel[i];
        c->stride[i] = o->stride ? o->stride[i] : 1;
        c->padding[i] = o->padding && !padstr ? o->padding[i] : 0;
        c->dilation[i] = o->dilation ? o->dilation[i] : 1;
        c->output_padding[i] = o->output_padding ? o->output_padding[i] : 0;
        receptive *= kernel[i];
        /* F.pad argument for non-zeros modes: last dim first */
        int64_t left = c->padding[i], right = c->padding[i];
        if (padstr == 1) {
            int64_t total = c->dilation[i] * (kernel[i] - 1);
            left = total / 2;
            right = total - left;
        }
        c->fpad[2 * (nd - 1 - i)] = left;
        c->fpad[2 * (nd - 1 - i) + 1] = right;
    }
    int64_t shape[5];
    shape[0] = transposed ? in : out;
    shape[1] = transposed ? out / groups : in / groups;
    for (int i = 0; i < nd; i++) shape[2 + i] = kernel[i];
    int64_t fan_in = shape[1] * receptive;
    double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0;
    ct_module *m = &c->base;
    if (ct__layers_param_uniform(m, "weight", shape, nd + 2, bound) < 0) return ct__layers_fail(m);
    if (!o->no_bias ? ct__layers_param_uniform(m, "bias", &out, 1, bound) < 0
                    : ct_module_register_parameter(m, "bias", NULL) < 0)
        return ct__layers_fail(m);
    return m;
}

ct_module *ct_conv1d_new(int64_t in, int64_t out, const int64_t k[1], const ct_conv_opts *o) {
    return conv_new(1, false, in, out, k, o);
}
ct_module *ct_conv2d_new(int64_t in, int64_t out, const int64_t k[2], const ct_conv_opts *o) {
    return conv_new(2, false, in, out, k, o);
}
ct_module *ct_conv3d_new(int64_t in, int64_t out, const int64_t k[3], const ct_conv_opts *o) {
    return conv_new(3, false, in, out, k, o);
}
ct_module *ct_conv_transpose1d_new(int64_t in, int64_t out, const int64_t k[1], const ct_conv_opts *o) {
    return conv_new(1, true, in, out, k, o);
}
ct_module *ct_conv_transpose2d_new(int64_t in, int64_t out, const int64_t k[2], const ct_conv_opts *o) {
    return conv_new(2, true, in, out, k, o);
}
