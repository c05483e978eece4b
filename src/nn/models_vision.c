/* models_vision.c -- torchvision's ResNet (BasicBlock / Bottleneck, v1.5)
 * and VGG as ctorch modules with torchvision's module paths, registration
 * order (hence state-dict key order) and default initialization. */
#include "layers_impl.h"
#include "../ops/op_table.h"
#include "ctorch/autograd.h"
#include "ctorch/models.h"


static ct_tensor *fwd(ct_module *m, ct_tensor *x) { return m ? ct_module_forward1(m, x) : x; }

/* nn.Conv2d(in, out, k, stride, padding, groups, bias) with torchvision's
 * kaiming_normal_(fan_out, relu) on the weight and a zero bias. */
static ct_module *conv_kaiming(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad,
                               int64_t groups, bool bias) {
    int64_t ks[2] = {k, k}, st[2] = {stride, stride}, pd[2] = {pad, pad};
    ct_conv_opts o = {0};
    o.stride = st;
    o.padding = pd;
    o.groups = groups;
    o.no_bias = !bias;
    ct_module *c = ct_conv2d_new(in, out, ks, &o);
    if (!c) return NULL;
    if (!ct_init_kaiming_normal_(ct_module_param(c, 0), 0.0, CT_FAN_OUT, "relu") ||
        (bias && !ct_init_zeros_(ct_module_param(c, 1)))) {
        ct_module_release(c);
        return NULL;
    }
    return c;
}

static ct_module *bn2d(int64_t c) { return ct_batch_norm2d_new(c, 1e-5, 0.1, true, true); }

/* ======================================================================
 * ResNet
 * ====================================================================== */
typedef struct rn_block {
    ct_module base;
    ct_module *conv1, *bn1, *conv2, *bn2, *conv3, *bn3, *relu, *downsample;
} rn_block;

static ct_tensor *block_forward(ct_module *m, ct_tensor *const *in, int n) {
    rn_block *b = (rn_block *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: expects 1 input, got %d", m->cls->name, n);
    ct_tensor *x = in[0];
    /* relu(bn(.)) as one pass where it can be (ct__batch_norm_relu): the
     * relu module holds no state, so skipping its forward changes nothing */
    ct_tensor *out = ct__batch_norm_relu(b->bn1, fwd(b->conv1, x));
    if (b->conv3) out = fwd(b->bn3, fwd(b->conv3, ct__batch_norm_relu(b->bn2, fwd(b->conv2, out))));
    else out = fwd(b->bn2, fwd(b->conv2, out));
    ct_tensor *identity = b->downsample ? fwd(b->downsample, x) : x;
    ct_tensor *sum = ct_add(out, identity);
    /* the sum is this block's own fresh tensor: with no graph to record,
     * relu runs in place on it (torchvision's ReLU(inplace=True)) */
    if (sum && !ct_requires_grad(sum)) return ct_relu_(sum);
    return fwd(b->relu, sum);
}

static const ct_module_class k_basic = {"BasicBlock", sizeof(rn_block), block_forward, NULL, NULL, NULL};
static const ct_module_class k_bottleneck = {"Bottleneck", sizeof(rn_block), block_forward, NULL, NULL, NULL};

/* downsample = Sequential(conv1x1(inplanes, outp, stride), BatchNorm2d(outp)) */
static ct_module *make_downsample(int64_t inplanes, int64_t outp, int64_t stride) {
    ct_module *ds[2] = {conv_kaiming(inplanes, outp, 1, stride, 0, 1, false), bn2d(outp)};
    ct_module *seq = (ds[0] && ds[1]) ? ct_sequential_new(ds, 2) : NULL;
    ct_module_release(ds[0]);
    ct_module_release(ds[1]);
    return seq;
}

static ct_module *make_block(const ct_resnet_config *c, int64_t inplanes, int64_t planes,
                             int64_t stride, int64_t groups, int64_t base_width) {
    bool bott = c->block == CT_RESNET_BOTTLENECK;
    int64_t exp = bott ? 4 : 1;
    rn_block *b = (rn_block *)ct_module_new(bott ? &k_bottleneck : &k_basic);
    if (!b) return NULL;
    ct_module *m = &b->base;
    int err = 0;
    if (bott) {
        int64_t width = planes * base_width / 64 * groups;
        err |= ct__layers_add_child(m, "conv1", conv_kaiming(inplanes, width, 1, 1, 0, 1, false), &b->conv1);
        if (!err) err |= ct__layers_add_child(m, "bn1", bn2d(width), &b->bn1);
        if (!err) err |= ct__layers_add_child(m, "conv2", conv_kaiming(width, width, 3, stride, 1, groups, false), &b->conv2);
        if (!err) err |= ct__layers_add_child(m, "bn2", bn2d(width), &b->bn2);
        if (!err) err |= ct__layers_add_child(m, "conv3", conv_kaiming(width, planes * exp, 1, 1, 0, 1, false), &b->conv3);
        if (!err) err |= ct__layers_add_child(m, "bn3", bn2d(planes * exp), &b->bn3);
        if (!err) err |= ct__layers_add_child(m, "relu", ct_relu_new(), &b->relu);
    } else {
        err |= ct__layers_add_child(m, "conv1", conv_kaiming(inplanes, planes, 3, stride, 1, 1, false), &b->conv1);
        if (!err) err |= ct__layers_add_child(m, "bn1", bn2d(planes), &b->bn1);
        if (!err) err |= ct__layers_add_child(m, "relu", ct_relu_new(), &b->relu);
        if (!err) err |= ct__layers_add_child(m, "conv2", conv_kaiming(planes, planes, 3, 1, 1, 1, false), &b->conv2);
        if (!err) err |= ct__layers_add_child(m, "bn2", bn2d(planes), &b->bn2);
    }
    if (!err && (stride != 1 || inplanes != planes * exp))
        err |= ct__layers_add_child(m, "downsample", make_downsample(inplanes, planes * exp, stride), &b->downsample);
    if (!err && c->zero_init_residual)
        err |= !ct_init_zeros_(ct_module_param(bott ? b->bn3 : b->bn2, 0));
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

typedef struct rn_model {
    ct_module base;
    ct_module *conv1, *bn1, *relu, *maxpool, *layer[4], *avgpool, *fc;
} rn_model;

static ct_tensor *resnet_forward(ct_module *m, ct_tensor *const *in, int n) {
    rn_model *r = (rn_model *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "ResNet: expects 1 input, got %d", n);
    if (in[0] && ct_ndim(in[0]) != 4)
        return ct__error(CT_ERR_SHAPE, "ResNet: expected an input [N, 3, H, W], got %d dims",
                         ct_ndim(in[0]));
    ct_tensor *x = fwd(r->maxpool, ct__batch_norm_relu(r->bn1, fwd(r->conv1, in[0])));
    for (int i = 0; i < 4; i++) x = fwd(r->layer[i], x);
    x = ct_flatten(fwd(r->avgpool, x), 1, -1);
    return fwd(r->fc, x);
}

static const ct_module_class k_resnet = {"ResNet", sizeof(rn_model), resnet_forward, NULL, NULL, NULL};

ct_module *ct_resnet_new(const ct_resnet_config *cfg) {
    if (!cfg) return ct__error(CT_ERR_NULL, "resnet_new: config is NULL");
    ct_resnet_config c = *cfg;
    if (c.num_classes == 0) c.num_classes = 1000;
    if (c.groups == 0) c.groups = 1;
    if (c.width_per_group == 0) c.width_per_group = 64;
    if (c.block != CT_RESNET_BASIC && c.block != CT_RESNET_BOTTLENECK)
        return ct__error(CT_ERR_ARG, "resnet_new: unknown block type %d", (int)c.block);
    if (c.num_classes < 0 || c.groups < 0 || c.width_per_group < 0)
        return ct__error(CT_ERR_ARG, "resnet_new: num_classes, groups and width_per_group must be "
                                     "positive, got %lld, %lld, %lld", (long long)c.num_classes,
                         (long long)c.groups, (long long)c.width_per_group);
    if (c.block == CT_RESNET_BASIC && (c.groups != 1 || c.width_per_group != 64))
        return ct__error(CT_ERR_ARG, "resnet_new: BasicBlock only supports groups=1 and base_width=64");
    if (c.width_per_group * c.groups > ((int64_t)1 << 24))
        return ct__error(CT_ERR_ARG, "resnet_new: groups * width_per_group too large");
    for (int i = 0; i < 4; i++)
        if (c.layers[i] < 1 || c.layers[i] > 4096)
            return ct__error(CT_ERR_ARG, "resnet_new: layers[%d] must be in [1, 4096], got %lld", i,
                             (long long)c.layers[i]);
    int64_t exp = c.block == CT_RESNET_BOTTLENECK ? 4 : 1;
    rn_model *r = (rn_model *)ct_module_new(&k_resnet);
    if (!r) return NULL;
    ct_module *m = &r->base;
    int err = 0;
    int64_t inplanes = 64;
    err |= ct__layers_add_child(m, "conv1", conv_kaiming(3, inplanes, 7, 2, 3, 1, false), &r->conv1);
    if (!err) err |= ct__layers_add_child(m, "bn1", bn2d(inplanes), &r->bn1);
    if (!err) err |= ct__layers_add_child(m, "relu", ct_relu_new(), &r->relu);
    if (!err) {
        int64_t k[2] = {3, 3}, s[2] = {2, 2}, p[2] = {1, 1};
        err |= ct__layers_add_child(m, "maxpool", ct_max_pool2d_new(k, s, p, NULL, false, false), &r->maxpool);
    }
    for (int i = 0; i < 4 && !err; i++) {
        int64_t planes = (int64_t)64 << i, stride = i == 0 ? 1 : 2;
        ct_module *layer = ct_sequential_new(NULL, 0);
        if (!layer) { err = 1; break; }
        for (int64_t j = 0; j < c.layers[i] && !err; j++) {
            char nm[24];
            snprintf(nm, sizeof nm, "%lld", (long long)j);
            err |= ct__layers_add_child(layer, nm, make_block(&c, inplanes, planes, j == 0 ? stride : 1, c.groups,
                                                   c.width_per_group), NULL);
            inplanes = planes * exp;
        }
        char nm[16];
        snprintf(nm, sizeof nm, "layer%d", i + 1);
        if (err) ct_module_release(layer);
        else err |= ct__layers_add_child(m, nm, layer, &r->layer[i]);
    }
    if (!err) {
        int64_t one[2] = {1, 1};
        err |= ct__layers_add_child(m, "avgpool", ct_adaptive_avg_pool2d_new(one), &r->avgpool);
    }
    if (!err) err |= ct__layers_add_child(m, "fc", ct_linear_new(512 * exp, c.num_classes, true), &r->fc);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

static ct_module *resnet_preset(ct_resnet_block b, int64_t l0, int64_t l1, int64_t l2, int64_t l3,
                                int64_t num_classes) {
    ct_resnet_config c = {0};
    c.block = b;
    c.layers[0] = l0, c.layers[1] = l1, c.layers[2] = l2, c.layers[3] = l3;
    c.num_classes = num_classes;
    return ct_resnet_new(&c);
}
ct_module *ct_resnet18_new(int64_t nc) { return resnet_preset(CT_RESNET_BASIC, 2, 2, 2, 2, nc); }
ct_module *ct_resnet34_new(int64_t nc) { return resnet_preset(CT_RESNET_BASIC, 3, 4, 6, 3, nc); }
ct_module *ct_resnet50_new(int64_t nc) { return resnet_preset(CT_RESNET_BOTTLENECK, 3, 4, 6, 3, nc); }
ct_module *ct_resnet101_new(int64_t nc) { return resnet_preset(CT_RESNET_BOTTLENECK, 3, 4, 23, 3, nc); }
ct_module *ct_resnet152_new(int64_t nc) { return resnet_preset(CT_RESNET_BOTTLENECK, 3, 8, 36, 3, nc); }

/* ======================================================================
 * VGG
 * ====================================================================== */
typedef struct vgg_model {
    ct_module base;
    ct_module *features, *avgpool, *classifier;
} vgg_model;

static ct_tensor *vgg_forward(ct_module *m, ct_tensor *const *in, int n) {
    vgg_model *v = (vgg_model *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "VGG: expects 1 input, got %d", n);
    ct_tensor *x = fwd(v->avgpool, fwd(v->features, in[0]));
    return fwd(v->classifier, ct_flatten(x, 1, -1));
}

static const ct_module_class k_vgg = {"VGG", sizeof(vgg_model), vgg_forward, NULL, NULL, NULL};

/* 0 is 'M' (max pool). */
static const int16_t k_cfg_a[] = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0, -1};
static const int16_t k_cfg_b[] = {64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0, -1};
static const int16_t k_cfg_d[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0,
                                  512, 512, 512, 0, -1};
static const int16_t k_cfg_e[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 256, 0, 512, 512, 512, 512, 0,
                                  512, 512, 512, 512, 0, -1};

static ct_module *linear_normal(int64_t in, int64_t out) {
    ct_module *l = ct_linear_new(in, out, true);
    if (!l) return NULL;
    if (!ct_init_normal_(ct_module_param(l, 0), 0.0, 0.01) || !ct_init_zeros_(ct_module_param(l, 1))) {
        ct_module_release(l);
        return NULL;
    }
    return l;
}

/* Builds a Sequential from an array of new modules (releasing them). */
static ct_module *seq_take(ct_module **mods, int n) {
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && mods[i];
    ct_module *s = ok ? ct_sequential_new(mods, n) : NULL;
    for (int i = 0; i < n; i++) ct_module_release(mods[i]);
    return s;
}

ct_module *ct_vgg_new(int depth, bool batch_norm, int64_t num_classes, double dropout) {
    const int16_t *cfg = depth == 11 ? k_cfg_a : depth == 13 ? k_cfg_b : depth == 16 ? k_cfg_d
                       : depth == 19 ? k_cfg_e : NULL;
    if (!cfg) return ct__error(CT_ERR_ARG, "vgg_new: depth must be 11, 13, 16 or 19, got %d", depth);
    if (num_classes == 0) num_classes = 1000;
    if (num_classes < 0)
        return ct__error(CT_ERR_ARG, "vgg_new: num_classes must be positive, got %lld", (long long)num_classes);
    if (!(dropout >= 0.0 && dropout <= 1.0))
        return ct__error(CT_ERR_ARG, "vgg_new: dropout probability has to be between 0 and 1, but got %g",
                         dropout);
    vgg_model *v = (vgg_model *)ct_module_new(&k_vgg);
    if (!v) return NULL;
    ct_module *m = &v->base;
    ct_module *mods[64];
    int nm = 0;
    int64_t in = 3;
    for (int i = 0; cfg[i] >= 0; i++) {
        if (cfg[i] == 0) {
            int64_t k[2] = {2, 2};
            mods[nm++] = ct_max_pool2d_new(k, k, NULL, NULL, false, false);
        } else {
            mods[nm++] = conv_kaiming(in, cfg[i], 3, 1, 1, 1, true);
            if (batch_norm) mods[nm++] = bn2d(cfg[i]);
            mods[nm++] = ct_relu_new();
            in = cfg[i];
        }
    }
    int err = ct__layers_add_child(m, "features", seq_take(mods, nm), &v->features);
    if (!err) {
        int64_t seven[2] = {7, 7};
        err |= ct__layers_add_child(m, "avgpool", ct_adaptive_avg_pool2d_new(seven), &v->avgpool);
    }
    if (!err) {
        ct_module *cl[7] = {linear_normal(512 * 7 * 7, 4096), ct_relu_new(), ct_dropout_new(dropout),
                            linear_normal(4096, 4096), ct_relu_new(), ct_dropout_new(dropout),
                            linear_normal(4096, num_classes)};
        err |= ct__layers_add_child(m, "classifier", seq_take(cl, 7), &v->classifier);
    }
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

ct_module *ct_vgg16_new(int64_t num_classes) { return ct_vgg_new(16, false, num_classes, 0.5); }
