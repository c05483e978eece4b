/* test_layers.c -- the layer modules of nn.h ("layers A": Linear ... Conv,
 * activations, pooling, Upsample, pads): forward and backward against
 * torch.nn from identical weights (tests/fixtures/layers.txt,
 * tools/fixtures/gen_layers.py), PyTorch's reprs, default initialization,
 * error paths, functional_call, gradcheck of the functional composites, and
 * no leaks. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "fixture.h"

/* ---- building the module a case describes ------------------------------------ */
static int ints(const fx_case *c, const char *name, int64_t *out, int max) { return fx_ints(c, name, out, max); }

static ct_module *make_conv(const fx_case *c, int nd, bool transposed) {
    int64_t k[3], stride[3], padding[3], dilation[3], outpad[3];
    ints(c, "kernel_size", k, 3);
    ct_conv_opts o = {0};
    if (ints(c, "stride", stride, 3) > 0) o.stride = stride;
    if (ints(c, "padding", padding, 3) > 0) o.padding = padding;
    if (ints(c, "dilation", dilation, 3) > 0) o.dilation = dilation;
    if (ints(c, "output_padding", outpad, 3) > 0) o.output_padding = outpad;
    o.padding_str = fx_has(c, "padding_str") ? fx_s(c, "padding_str", NULL) : NULL;
    o.groups = fx_i(c, "groups", 1);
    o.no_bias = !fx_i(c, "bias", 1);
    o.padding_mode = fx_s(c, "padding_mode", "zeros");
    int64_t in = fx_i(c, "in_channels", 0), out = fx_i(c, "out_channels", 0);
    if (transposed) return nd == 1 ? ct_conv_transpose1d_new(in, out, k, &o) : ct_conv_transpose2d_new(in, out, k, &o);
    return nd == 1 ? ct_conv1d_new(in, out, k, &o) : nd == 2 ? ct_conv2d_new(in, out, k, &o) : ct_conv3d_new(in, out, k, &o);
}

static ct_module *make_pool(const fx_case *c) {
    int64_t k[2], s[2], p[2], d[2];
    int nk = ints(c, fx_has(c, "kernel_size") ? "kernel_size" : "output_size", k, 2);
    const int64_t *ps = ints(c, "stride", s, 2) > 0 ? s : NULL;
    const int64_t *pp = ints(c, "padding", p, 2) > 0 ? p : NULL;
    const int64_t *pd = ints(c, "dilation", d, 2) > 0 ? d : NULL;
    bool ceil = fx_i(c, "ceil_mode", 0), ri = fx_i(c, "return_indices", 0);
    bool cip = fx_i(c, "count_include_pad", 1);
    const char *op = c->op;
    (void)nk;
    if (!strcmp(op, "max_pool1d")) return ct_max_pool1d_new(k, ps, pp, pd, ri, ceil);
    if (!strcmp(op, "max_pool2d")) return ct_max_pool2d_new(k, ps, pp, pd, ri, ceil);
    if (!strcmp(op, "avg_pool1d")) return ct_avg_pool1d_new(k, ps, pp, ceil, cip);
    if (!strcmp(op, "avg_pool2d")) return ct_avg_pool2d_new(k, ps, pp, ceil, cip, fx_i(c, "divisor_override", 0));
    if (!strcmp(op, "adaptive_avg_pool1d")) return ct_adaptive_avg_pool1d_new(k[0]);
    if (!strcmp(op, "adaptive_avg_pool2d")) return ct_adaptive_avg_pool2d_new(k);
    if (!strcmp(op, "adaptive_max_pool2d")) return ct_adaptive_max_pool2d_new(k, ri);
    return NULL;
}

static ct_module *make_cnn(void) {
    ct_module *parts[5] = {
        ct_conv2d_new(1, 4, (int64_t[]){3, 3}, &(ct_conv_opts){.padding = (int64_t[]){1, 1}}),
        ct_relu_new(),
        ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, false, false),
        ct_flatten_new(1, -1),
        ct_linear_new(36, 5, true)};
    ct_module *seq = ct_sequential_new(parts, 5);
    for (int i = 0; i < 5; i++) ct_module_release(parts[i]);
    return seq;
}

static ct_module *make_module(const fx_case *c) {
    const char *op = c->op;
    double a = fx_f(c, "a", 0), b = fx_f(c, "b", 0);
    int64_t dim = fx_i(c, "dim", 0);
    if (!strcmp(op, "linear"))
        return ct_linear_new(fx_i(c, "in_features", 0), fx_i(c, "out_features", 0), fx_i(c, "bias", 1));
    if (!strcmp(op, "bilinear"))
        return ct_bilinear_new(fx_i(c, "in1", 0), fx_i(c, "in2", 0), fx_i(c, "out", 0), fx_i(c, "bias", 1));
    if (!strcmp(op, "identity")) return ct_identity_new();
    if (!strcmp(op, "flatten")) return ct_flatten_new(fx_i(c, "start_dim", 1), fx_i(c, "end_dim", -1));
    if (!strcmp(op, "unflatten")) {
        int64_t s[8];
        int n = ints(c, "sizes", s, 8);
        return ct_unflatten_new(dim, s, n);
    }
    if (!strcmp(op, "conv1d")) return make_conv(c, 1, false);
    if (!strcmp(op, "conv2d")) return make_conv(c, 2, false);
    if (!strcmp(op, "conv3d")) return make_conv(c, 3, false);
    if (!strcmp(op, "conv_transpose1d")) return make_conv(c, 1, true);
    if (!strcmp(op, "conv_transpose2d")) return make_conv(c, 2, true);
    if (!strcmp(op, "relu")) return ct_relu_new();
    if (!strcmp(op, "relu6")) return ct_relu6_new();
    if (!strcmp(op, "leaky_relu")) return ct_leaky_relu_new(a);
    if (!strcmp(op, "elu")) return ct_elu_new(a);
    if (!strcmp(op, "selu")) return ct_selu_new();
    if (!strcmp(op, "celu")) return ct_celu_new(a);
    if (!strcmp(op, "gelu"))
        return ct_gelu_new(!strcmp(fx_s(c, "approximate", "none"), "tanh") ? CT_GELU_TANH : CT_GELU_NONE);
    if (!strcmp(op, "silu")) return ct_silu_new();
    if (!strcmp(op, "mish")) return ct_mish_new();
    if (!strcmp(op, "softplus")) return ct_softplus_new(a, b);
    if (!strcmp(op, "softsign")) return ct_softsign_new();
    if (!strcmp(op, "hardtanh")) return ct_hardtanh_new(a, b);
    if (!strcmp(op, "hardsigmoid")) return ct_hardsigmoid_new();
    if (!strcmp(op, "hardswish")) return ct_hardswish_new();
    if (!strcmp(op, "hardshrink")) return ct_hardshrink_new(a);
    if (!strcmp(op, "softshrink")) return ct_softshrink_new(a);
    if (!strcmp(op, "sigmoid")) return ct_sigmoid_new();
    if (!strcmp(op, "tanh")) return ct_tanh_new();
    if (!strcmp(op, "logsigmoid")) return ct_logsigmoid_new();
    if (!strcmp(op, "softmax")) return ct_softmax_new(dim);
    if (!strcmp(op, "log_softmax")) return ct_log_softmax_new(dim);
    if (!strcmp(op, "glu")) return ct_glu_new(dim);
    if (!strcmp(op, "prelu")) return ct_prelu_new(fx_i(c, "num_parameters", 1), fx_f(c, "init", 0.25));
    if (strstr(op, "pool")) return make_pool(c);
    if (!strcmp(op, "upsample")) {
        int64_t size[3];
        double scale[3];
        int ns = ints(c, "size", size, 3), nf = fx_doubles(c, "scale_factor", scale, 3);
        return ct_upsample_new(ns > 0 ? size : NULL, ns, nf > 0 ? scale : NULL, nf, fx_s(c, "mode", "nearest"),
                               fx_i(c, "align_corners", 0));
    }
    if (!strcmp(op, "pixel_shuffle")) return ct_pixel_shuffle_new(fx_i(c, "upscale_factor", 1));
    if (!strcmp(op, "zero_pad2d") || !strcmp(op, "reflection_pad2d")) {
        int64_t p[4];
        ints(c, "padding", p, 4);
        return op[0] == 'z' ? ct_zero_pad2d_new(p) : ct_reflection_pad2d_new(p);
    }
    if (!strcmp(op, "cnn")) return make_cnn();
    return NULL;
}

/* Loads the case's weights, runs forward and backward; out: output,
 * [indices], grads of the inputs, grads of the parameters. */
static ct_status run_module(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_module *m = make_module(c);
    if (!m) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_ARG;
    ct_status st = CT_OK;
    int nx = (int)fx_i(c, "nx", 1);
    ct_sample *sd = ct_sample_new();
    char keys[512];
    snprintf(keys, sizeof keys, "%s", fx_s(c, "keys", ""));
    int nk = 0;
    for (char *tok = strtok(keys, ","); tok && !st; tok = strtok(NULL, ","))
        st = ct_sample_set(sd, tok, in[nx + 1 + nk++]);
    if (!st) st = ct_module_load_state_dict(m, sd, true);
    ct_sample_free(sd);
    for (int i = 0; i < nx && !st; i++) st = ct_set_requires_grad(in[i], true);
    int nout = fx_i(c, "return_indices", 0) ? 2 : 1;
    ct_tensor *res[2] = {0};
    if (!st) st = ct_module_forward_multi(m, in, nx, res, nout);
    if (!st) {
        ct_tensor *wrt[8];
        for (int i = 0; i < nx; i++) wrt[i] = in[i];
        int np = ct_module_named_parameters(m, NULL, wrt + nx, 8 - nx);
        if (np != nk) st = CT_ERR_ARG; /* the module's parameters are exactly the fixture's */
        ct_tensor *gy = in[nx];
        if (!st) st = ct_autograd_grad(&res[0], 1, wrt, nx + np, &gy, false, false, false, out + nout);
        out[0] = res[0];
        if (nout > 1) out[1] = res[1];
    }
    ct_module_release(m);
    return st;
}

#define FX(name) {name, run_module, 1e-4, 1e-5}
static const fx_op k_ops[] = {
    FX("linear"), FX("bilinear"), FX("identity"), FX("flatten"), FX("unflatten"),
    FX("conv1d"), FX("conv2d"), FX("conv3d"), FX("conv_transpose1d"), FX("conv_transpose2d"),
    FX("relu"), FX("relu6"), FX("leaky_relu"), FX("elu"), FX("selu"), FX("celu"), FX("gelu"),
    FX("silu"), FX("mish"), FX("softplus"), FX("softsign"), FX("hardtanh"), FX("hardsigmoid"),
    FX("hardswish"), FX("hardshrink"), FX("softshrink"), FX("sigmoid"), FX("tanh"),
    FX("logsigmoid"), FX("softmax"), FX("log_softmax"), FX("glu"), FX("prelu"),
    FX("max_pool1d"), FX("max_pool2d"), FX("avg_pool1d"), FX("avg_pool2d"),
    FX("adaptive_avg_pool1d"), FX("adaptive_avg_pool2d"), FX("adaptive_max_pool2d"),
    FX("upsample"), FX("pixel_shuffle"), FX("zero_pad2d"), FX("reflection_pad2d"), FX("cnn"),
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/layers.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- repr ------------------------------------------------------------------------ */
static void check_repr(ct_module *m, const char *expected) {
    assert_non_null(m);
    char *s = ct_module_to_string(m);
    assert_non_null(s);
    if (strcmp(s, expected)) fprintf(stderr, "repr: got      %s\n      expected %s\n", s, expected);
    assert_string_equal(s, expected);
    free(s);
    ct_module_release(m);
}

static void test_repr(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    check_repr(ct_linear_new(3, 4, true), "Linear(in_features=3, out_features=4, bias=True)");
    check_repr(ct_bilinear_new(2, 3, 4, false), "Bilinear(in1_features=2, in2_features=3, out_features=4, bias=False)");
    check_repr(ct_identity_new(), "Identity()");
    check_repr(ct_flatten_new(1, -1), "Flatten(start_dim=1, end_dim=-1)");
    check_repr(ct_unflatten_new(1, (int64_t[]){2, 5}, 2), "Unflatten(dim=1, unflattened_size=(2, 5))");
    check_repr(ct_conv1d_new(3, 4, (int64_t[]){3}, NULL), "Conv1d(3, 4, kernel_size=(3,), stride=(1,))");
    check_repr(ct_conv2d_new(3, 16, (int64_t[]){3, 3}, &(ct_conv_opts){.padding = (int64_t[]){1, 1}}),
               "Conv2d(3, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))");
    check_repr(ct_conv2d_new(4, 8, (int64_t[]){3, 5},
                             &(ct_conv_opts){.stride = (int64_t[]){2, 2}, .padding_str = "valid",
                                             .dilation = (int64_t[]){2, 2}, .groups = 2, .no_bias = true,
                                             .padding_mode = "reflect"}),
               "Conv2d(4, 8, kernel_size=(3, 5), stride=(2, 2), padding=valid, dilation=(2, 2), groups=2, "
               "bias=False, padding_mode=reflect)");
    check_repr(ct_conv2d_new(4, 8, (int64_t[]){3, 3}, &(ct_conv_opts){.padding_str = "same"}),
               "Conv2d(4, 8, kernel_size=(3, 3), stride=(1, 1), padding=same)");
    check_repr(ct_conv_transpose2d_new(4, 6, (int64_t[]){3, 3},
                                       &(ct_conv_opts){.stride = (int64_t[]){2, 2}, .output_padding = (int64_t[]){1, 1}}),
               "ConvTranspose2d(4, 6, kernel_size=(3, 3), stride=(2, 2), output_padding=(1, 1))");
    check_repr(ct_conv3d_new(2, 3, (int64_t[]){2, 2, 2}, NULL), "Conv3d(2, 3, kernel_size=(2, 2, 2), stride=(1, 1, 1))");
    check_repr(ct_relu_new(), "ReLU()");
    check_repr(ct_relu6_new(), "ReLU6()");
    check_repr(ct_leaky_relu_new(0.01), "LeakyReLU(negative_slope=0.01)");
    check_repr(ct_leaky_relu_new(1e-5), "LeakyReLU(negative_slope=1e-05)");
    check_repr(ct_elu_new(1.0), "ELU(alpha=1.0)");
    check_repr(ct_elu_new(100.0), "ELU(alpha=100.0)");
    check_repr(ct_selu_new(), "SELU()");
    check_repr(ct_celu_new(1.0), "CELU(alpha=1.0)");
    check_repr(ct_gelu_new(CT_GELU_NONE), "GELU(approximate='none')");
    check_repr(ct_gelu_new(CT_GELU_TANH), "GELU(approximate='tanh')");
    check_repr(ct_silu_new(), "SiLU()");
    check_repr(ct_mish_new(), "Mish()");
    check_repr(ct_softplus_new(1, 20), "Softplus(beta=1, threshold=20)");
    check_repr(ct_softplus_new(2.5, 10.5), "Softplus(beta=2.5, threshold=10.5)");
    check_repr(ct_softsign_new(), "Softsign()");
    check_repr(ct_hardtanh_new(-1, 1), "Hardtanh(min_val=-1.0, max_val=1.0)");
    check_repr(ct_hardsigmoid_new(), "Hardsigmoid()");
    check_repr(ct_hardswish_new(), "Hardswish()");
    check_repr(ct_hardshrink_new(0.5), "Hardshrink(0.5)");
    check_repr(ct_softshrink_new(0.5), "Softshrink(0.5)");
    check_repr(ct_sigmoid_new(), "Sigmoid()");
    check_repr(ct_tanh_new(), "Tanh()");
    check_repr(ct_logsigmoid_new(), "LogSigmoid()");
    check_repr(ct_softmax_new(1), "Softmax(dim=1)");
    check_repr(ct_log_softmax_new(-1), "LogSoftmax(dim=-1)");
    check_repr(ct_prelu_new(1, 0.25), "PReLU(num_parameters=1)");
    check_repr(ct_glu_new(-1), "GLU(dim=-1)");
    check_repr(ct_avg_pool1d_new((int64_t[]){2}, NULL, NULL, false, true),
               "AvgPool1d(kernel_size=(2,), stride=(2,), padding=(0,))");
    check_repr(ct_avg_pool2d_new((int64_t[]){2, 2}, NULL, NULL, false, true, 0),
               "AvgPool2d(kernel_size=2, stride=2, padding=0)");
    check_repr(ct_avg_pool2d_new((int64_t[]){2, 3}, (int64_t[]){1, 1}, (int64_t[]){1, 0}, false, true, 0),
               "AvgPool2d(kernel_size=(2, 3), stride=1, padding=(1, 0))");
    check_repr(ct_max_pool1d_new((int64_t[]){3}, NULL, NULL, NULL, false, false),
               "MaxPool1d(kernel_size=3, stride=3, padding=0, dilation=1, ceil_mode=False)");
    check_repr(ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, false, false),
               "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)");
    check_repr(ct_max_pool2d_new((int64_t[]){2, 3}, NULL, NULL, NULL, true, false),
               "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)");
    check_repr(ct_adaptive_avg_pool1d_new(4), "AdaptiveAvgPool1d(output_size=4)");
    check_repr(ct_adaptive_avg_pool2d_new((int64_t[]){2, 3}), "AdaptiveAvgPool2d(output_size=(2, 3))");
    check_repr(ct_adaptive_max_pool2d_new((int64_t[]){2, 2}, true), "AdaptiveMaxPool2d(output_size=2)");
    check_repr(ct_upsample_new(NULL, 0, (double[]){2}, 1, "nearest", false), "Upsample(scale_factor=2.0, mode=nearest)");
    check_repr(ct_upsample_new((int64_t[]){4, 5}, 2, NULL, 0, "bilinear", true), "Upsample(size=(4, 5), mode=bilinear)");
    check_repr(ct_upsample_new((int64_t[]){5}, 1, NULL, 0, NULL, false), "Upsample(size=5, mode=nearest)");
    check_repr(ct_pixel_shuffle_new(2), "PixelShuffle(upscale_factor=2)");
    check_repr(ct_zero_pad2d_new((int64_t[]){1, 1, 1, 1}), "ZeroPad2d((1, 1, 1, 1))");
    check_repr(ct_reflection_pad2d_new((int64_t[]){1, 2, 3, 4}), "ReflectionPad2d((1, 2, 3, 4))");
    check_repr(make_cnn(),
               "Sequential(\n"
               "  (0): Conv2d(1, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))\n"
               "  (1): ReLU()\n"
               "  (2): MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)\n"
               "  (3): Flatten(start_dim=1, end_dim=-1)\n"
               "  (4): Linear(in_features=36, out_features=5, bias=True)\n"
               ")");
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- default initialization and state-dict keys --------------------------------------- */
static void check_param(ct_module *m, const char *key, const int64_t *shape, int nd, double bound) {
    ct_sample *sd = ct_module_state_dict(m);
    assert_non_null(sd);
    ct_tensor *t = ct_sample_get(sd, key);
    assert_non_null(t);
    assert_int_equal(ct_ndim(t), nd);
    for (int i = 0; i < nd; i++) assert_int_equal(ct_size(t, i), shape[i]);
    assert_int_equal(ct_get_dtype(t), ct_get_default_dtype());
    assert_true(ct_requires_grad(t));
    ct_scope s = ct_scope_begin();
    double mx = ct_item(ct_amax(t, NULL, 0, false)), mn = ct_item(ct_amin(t, NULL, 0, false));
    assert_true(mx <= bound && mn >= -bound);
    if (ct_numel(t) >= 200) { /* U(-b, b): spread over the range, std b/sqrt(3) */
        assert_true(mx > 0.9 * bound && mn < -0.9 * bound);
        double sd_ = ct_item(ct_std(t, NULL, 0, 1, false));
        assert_true(fabs(sd_ - bound / sqrt(3.0)) < 0.1 * bound);
    }
    ct_scope_end(s);
    ct_sample_free(sd);
}

static void test_init(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(123);
    ct_module *m = ct_linear_new(784, 10, true);
    check_param(m, "weight", (int64_t[]){10, 784}, 2, 1 / sqrt(784.0));
    check_param(m, "bias", (int64_t[]){10}, 1, 1 / sqrt(784.0));
    assert_int_equal(ct_module_num_parameters(m, false), 7850);
    ct_module_release(m);
    m = ct_linear_new(4, 3, false);
    ct_sample *sd = ct_module_state_dict(m);
    assert_int_equal(ct_sample_count(sd), 1);
    assert_string_equal(ct_sample_name(sd, 0), "weight");
    ct_sample_free(sd);
    ct_module_release(m);
    m = ct_conv2d_new(3, 16, (int64_t[]){3, 3}, NULL);
    check_param(m, "weight", (int64_t[]){16, 3, 3, 3}, 4, 1 / sqrt(27.0));
    check_param(m, "bias", (int64_t[]){16}, 1, 1 / sqrt(27.0));
    ct_module_release(m);
    m = ct_conv2d_new(8, 16, (int64_t[]){3, 3}, &(ct_conv_opts){.groups = 4});
    check_param(m, "weight", (int64_t[]){16, 2, 3, 3}, 4, 1 / sqrt(18.0));
    ct_module_release(m);
    m = ct_conv_transpose2d_new(4, 6, (int64_t[]){3, 3}, &(ct_conv_opts){.groups = 2});
    check_param(m, "weight", (int64_t[]){4, 3, 3, 3}, 4, 1 / sqrt(27.0));
    check_param(m, "bias", (int64_t[]){6}, 1, 1 / sqrt(27.0));
    ct_module_release(m);
    m = ct_conv1d_new(2, 3, (int64_t[]){5}, NULL);
    check_param(m, "weight", (int64_t[]){3, 2, 5}, 3, 1 / sqrt(10.0));
    ct_module_release(m);
    m = ct_conv3d_new(2, 3, (int64_t[]){2, 3, 4}, NULL);
    check_param(m, "weight", (int64_t[]){3, 2, 2, 3, 4}, 5, 1 / sqrt(48.0));
    ct_module_release(m);
    m = ct_bilinear_new(5, 7, 3, true);
    check_param(m, "weight", (int64_t[]){3, 5, 7}, 3, 1 / sqrt(5.0));
    check_param(m, "bias", (int64_t[]){3}, 1, 1 / sqrt(5.0));
    ct_module_release(m);
    m = ct_prelu_new(3, 0.25);
    ct_scope s = ct_scope_begin();
    sd = ct_module_state_dict(m);
    assert_int_equal(ct_equal(ct_sample_get(sd, "weight"), ct_full(CT_SHAPE(3), 0.25, CT_F32)), 1);
    ct_sample_free(sd);
    ct_scope_end(s);
    ct_module_release(m);
    /* reproducible with the seed */
    ct_manual_seed(7);
    ct_module *a = ct_linear_new(3, 2, true);
    ct_manual_seed(7);
    ct_module *b = ct_linear_new(3, 2, true);
    assert_int_equal(ct_equal(ct_module_param(a, 0), ct_module_param(b, 0)), 1);
    ct_module_release(a);
    ct_module_release(b);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- errors ------------------------------------------------------------------------- */
static void expect_error(void *p, const char *needle) {
    assert_null(p);
    if (!strstr(ct_last_error(), needle)) fprintf(stderr, "error: '%s' lacks '%s'\n", ct_last_error(), needle);
    assert_non_null(strstr(ct_last_error(), needle));
    ct_clear_error();
}

static void test_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_module *lin = ct_linear_new(4, 3, true);
    expect_error(ct_module_forward1(lin, ct_zeros(CT_SHAPE(2, 5), CT_F32)),
                 "Linear(in_features=4, out_features=3): expected an input with 4 features in its last dim, "
                 "got input of size [2, 5]");
    expect_error(ct_module_forward1(lin, NULL), "");
    ct_tensor *two[2] = {ct_zeros(CT_SHAPE(2, 4), CT_F32), ct_zeros(CT_SHAPE(2, 4), CT_F32)};
    expect_error(ct_module_forward(lin, two, 2), "Linear: forward takes 1 input, got 2");
    ct_module_release(lin);
    expect_error(ct_linear_new(-1, 3, true), "Linear: in_features and out_features must be non-negative");

    ct_module *conv = ct_conv2d_new(3, 4, (int64_t[]){3, 3}, NULL);
    expect_error(ct_module_forward1(conv, ct_zeros(CT_SHAPE(1, 2, 5, 5), CT_F32)), "to have 3 channels");
    expect_error(ct_module_forward1(conv, ct_zeros(CT_SHAPE(5, 5), CT_F32)),
                 "Conv2d: Expected 3D (unbatched) or 4D (batched) input, but got input of size: [5, 5]");
    ct_module_release(conv);
    expect_error(ct_conv2d_new(3, 4, (int64_t[]){3, 3}, &(ct_conv_opts){.groups = 2}),
                 "Conv2d: in_channels must be divisible by groups");
    expect_error(ct_conv2d_new(4, 3, (int64_t[]){3, 3}, &(ct_conv_opts){.groups = 2}),
                 "Conv2d: out_channels must be divisible by groups");
    expect_error(ct_conv2d_new(4, 4, (int64_t[]){3, 3}, &(ct_conv_opts){.padding_mode = "mirror"}),
                 "padding_mode='mirror'");
    expect_error(ct_conv1d_new(4, 4, (int64_t[]){3}, &(ct_conv_opts){.padding_str = "full"}),
                 "Conv1d: Invalid padding string 'full'");
    expect_error(ct_conv2d_new(4, 4, (int64_t[]){3, 3},
                               &(ct_conv_opts){.padding_str = "same", .stride = (int64_t[]){2, 2}}),
                 "padding='same' is not supported for strided convolutions");
    expect_error(ct_conv_transpose2d_new(4, 4, (int64_t[]){3, 3}, &(ct_conv_opts){.padding_mode = "reflect"}),
                 "Only \"zeros\" padding mode is supported for ConvTranspose2d");
    expect_error(ct_conv2d_new(4, 4, (int64_t[]){0, 3}, NULL), "kernel_size must be positive");
    expect_error(ct_conv2d_new(4, 4, NULL, NULL), "kernel_size is NULL");

    expect_error(ct_glu(ct_zeros(CT_SHAPE(2, 5), CT_F32), -1),
                 "glu: Halving dimension must be even, but dimension 1 is size 5");
    expect_error(ct_glu(ct_zeros(CT_SHAPE(2, 4), CT_F32), 2), "out of range");
    expect_error(ct_prelu(ct_zeros(CT_SHAPE(2, 4), CT_F32), ct_zeros(CT_SHAPE(3), CT_F32)),
                 "prelu: mismatch of parameter numbers and input channel size");
    expect_error(ct_prelu_new(0, 0.25), "PReLU: num_parameters must be positive");
    expect_error(ct_hardtanh_new(1, -1), "Hardtanh: max_val");

    ct_module *pool = ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, false, false);
    ct_tensor *outs[2];
    ct_tensor *x = ct_zeros(CT_SHAPE(1, 1, 4, 4), CT_F32);
    assert_int_not_equal(ct_module_forward_multi(pool, &x, 1, outs, 2), CT_OK);
    assert_non_null(strstr(ct_last_error(), "MaxPool2d: forward gives 1 output, 2 asked"));
    ct_clear_error();
    ct_module_release(pool);
    pool = ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, true, false);
    assert_int_equal(ct_module_forward_multi(pool, &x, 1, outs, 2), CT_OK);
    assert_int_equal(ct_get_dtype(outs[1]), CT_I64);
    assert_int_equal(ct_size(outs[0], 2), 2);
    assert_non_null(ct_module_forward1(pool, x)); /* output only */
    ct_module_release(pool);
    expect_error(ct_max_pool2d_new((int64_t[]){2, 2}, NULL, (int64_t[]){2, 2}, NULL, false, false),
                 "pad should be at most half of kernel size");
    expect_error(ct_upsample_new((int64_t[]){4}, 1, (double[]){2}, 1, "nearest", false),
                 "only one of size or scale_factor should be defined");
    expect_error(ct_upsample_new(NULL, 0, NULL, 0, "nearest", false), "either size or scale_factor");
    expect_error(ct_upsample_new(NULL, 0, (double[]){2}, 1, "trilinear", false), "unsupported mode 'trilinear'");
    ct_module *up = ct_upsample_new(NULL, 0, (double[]){2, 2}, 2, "nearest", false);
    expect_error(ct_module_forward1(up, ct_zeros(CT_SHAPE(1, 1, 4), CT_F32)), "Upsample: Input Error");
    ct_module_release(up);
    ct_module *pad = ct_reflection_pad2d_new((int64_t[]){1, 1, 1, 1});
    expect_error(ct_module_forward1(pad, ct_zeros(CT_SHAPE(4, 4), CT_F32)),
                 "ReflectionPad2d: expected 3D or 4D input, but got input of size [4, 4]");
    ct_module_release(pad);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- functional_call and training a module --------------------------------------------------- */
static void test_functional_call(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_module *lin = ct_linear_new(2, 2, true);
    ct_tensor *w = ct_eye(2, 2, CT_F32), *b = ct_full(CT_SHAPE(2), 1.0, CT_F32);
    ct_sample *rep = ct_sample_new();
    assert_int_equal(ct_sample_set(rep, "weight", w), CT_OK);
    assert_int_equal(ct_sample_set(rep, "bias", b), CT_OK);
    ct_tensor *x = ct_from_doubles((double[]){1, 2, 3, 4}, CT_SHAPE(2, 2), CT_F32);
    ct_tensor *y = ct_functional_call(lin, rep, &x, 1);
    ct_tensor *expect = ct_from_doubles((double[]){2, 3, 4, 5}, CT_SHAPE(2, 2), CT_F32);
    assert_int_equal(ct_allclose(y, expect, 1e-6, 1e-6, false), 1);
    /* the module itself is unchanged */
    assert_int_not_equal(ct_equal(ct_module_param(lin, 0), w), 1);
    ct_sample_free(rep);
    ct_module_release(lin);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* A few SGD steps on a small conv net: the loss goes down and nothing leaks. */
static void test_train_steps(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(1);
    ct_module *parts[6] = {
        ct_conv2d_new(1, 3, (int64_t[]){3, 3}, &(ct_conv_opts){.padding_str = "same", .padding_mode = "reflect"}),
        ct_prelu_new(3, 0.25), ct_avg_pool2d_new((int64_t[]){2, 2}, NULL, NULL, false, true, 0),
        ct_flatten_new(1, -1), ct_linear_new(18, 2, true), ct_log_softmax_new(1)};
    ct_module *net = ct_sequential_new(parts, 6);
    for (int i = 0; i < 6; i++) ct_module_release(parts[i]);
    ct_scope outer = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(8, 1, 4, 6), CT_F32);
    ct_tensor *target = ct_randint(0, 2, CT_SHAPE(8, 1), CT_I64);
    double first = 0, last = 0;
    for (int step = 0; step < 20; step++) {
        ct_scope s = ct_scope_begin();
        ct_tensor *loss = ct_neg(ct_mean(ct_gather(ct_module_forward1(net, x), 1, target), NULL, 0, false));
        if (!loss) fprintf(stderr, "%s\n", ct_last_error());
        assert_non_null(loss);
        if (step == 0) first = ct_item(loss);
        last = ct_item(loss);
        ct_module_zero_grad(net);
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        ct_tensor *ps[16];
        int np = ct_module_named_parameters(net, NULL, ps, 16);
        bool prev = ct_set_grad_enabled(false);
        for (int i = 0; i < np; i++) assert_non_null(ct_add_scaled_(ps[i], ct_grad(ps[i]), -0.2));
        ct_set_grad_enabled(prev);
        ct_scope_end(s);
    }
    assert_true(last < first);
    ct_scope_end(outer);
    ct_module_release(net);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- gradcheck of the functional composites (float64) ----------------------------------------- */
static ct_tensor *g_logsigmoid(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_logsigmoid(in[0]); }
static ct_tensor *g_prelu(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_prelu(in[0], in[1]); }
static ct_tensor *g_glu(ct_tensor *const *in, int n, void *u) { (void)n; (void)u; return ct_glu(in[0], 1); }

static void test_gradcheck(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 4), CT_F64);
    ct_tensor *w = ct_from_doubles((double[]){0.1, -0.4, 0.7}, CT_SHAPE(3), CT_F64);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    assert_int_equal(ct_gradcheck(g_logsigmoid, NULL, &x, 1, 0, 0, 0), CT_OK);
    ct_tensor *xw[2] = {x, w};
    assert_int_equal(ct_gradcheck(g_prelu, NULL, xw, 2, 0, 0, 0), CT_OK);
    ct_tensor *x2 = ct_randn(CT_SHAPE(2, 4, 3), CT_F64);
    assert_int_equal(ct_set_requires_grad(x2, true), CT_OK);
    assert_int_equal(ct_gradcheck(g_glu, NULL, &x2, 1, 0, 0, 0), CT_OK);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures), cmocka_unit_test(test_repr), cmocka_unit_test(test_init),
        cmocka_unit_test(test_errors), cmocka_unit_test(test_functional_call),
        cmocka_unit_test(test_train_steps), cmocka_unit_test(test_gradcheck),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
