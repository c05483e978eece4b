/* norm.c -- normalization: F.batch_norm, layer_norm, group_norm, rms_norm,
 * instance_norm, local_response_norm, and the modules BatchNorm1d/2d,
 * LayerNorm, GroupNorm, RMSNorm, InstanceNorm2d, LocalResponseNorm.
 *
 * Everything is composed of public ops, so autograd differentiates it (and
 * double backward works).  Shapes, with x [N, C, *]:
 *   batch norm     mean/var over every dim but 1     y = (x-mu)/sqrt(var+eps)*w + b
 *   instance norm  over the spatial dims of each (n, c)
 *   group norm     over [C/G, *] of each (n, g)
 *   layer norm     over the last n dims;  rms norm: x/sqrt(mean(x^2)+eps)*w
 * Running statistics are updated in place under no_grad with the unbiased
 * variance, exactly like torch: r = (1 - momentum) * r + momentum * stat. */
#include "layers_impl.h"
#include "norm_rnn_impl.h"
#include "../ops/op_table.h"
#include "../ops/batch_norm_impl.h" /* batch norm's fused ops and fallbacks */

/* ======================================================================
 * functional
 * ====================================================================== */

static int check_vec(const char *op, const char *what, ct_tensor *v, int64_t C) {
    if (v && ct_numel(v) != C) {
        ct__error(CT_ERR_SHAPE, "%s: %s should contain %lld elements not %lld", op, what, (long long)C,
                  (long long)ct_numel(v));
        return -1;
    }
    return 0;
}

/* r <- (1 - m) * r + m * stat  (no grad; stat is [C]-like) */
static ct_status update_running(ct_tensor *r, ct_tensor *stat, double m) {
    if (!r) return CT_OK;
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *st = ct_reshape(ct_detach(stat), ct_sizes(r), ct_ndim(r));
    ct_tensor *nv = ct_add(ct_mul_scalar(st, m), ct_mul_scalar(r, 1.0 - m));
    ct_tensor *ok = nv ? ct_copy_(r, nv) : NULL;
    ct_set_grad_enabled(prev);
    return ok ? CT_OK : ct_last_error_code();
}

/* (x - mean) * rsqrt(var + eps) with running (eval) statistics */
static ct_tensor *normalize_running(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, int64_t C, double eps) {
    int nd = ct_ndim(x);
    ct_tensor *m = nr_chan_view(rm, C, nd), *v = nr_chan_view(rv, C, nd);
    return ct_mul(ct_sub(x, m), ct_rsqrt(ct_add_scalar(v, eps)));
}

static ct_tensor *affine(ct_tensor *y, ct_tensor *w, ct_tensor *b, int64_t C, int nd) {
    if (w) y = ct_mul(y, nr_chan_view(w, C, nd));
    if (b) y = ct_add(y, nr_chan_view(b, C, nd));
    return y;
}

static ct_tensor *bn_train_fused(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b,
                                 double momentum, double eps, int64_t count);

/* f16/bf16 training through the fused ops: the device's kernels compute
 * halves, w and b (when given) of one dtype, x's or float32, on x's device,
 * and no forward-AD tangents (the composite carries those) */
static bool bn_half_fused_ok(ct_tensor *x, ct_tensor *w, ct_tensor *b) {
    ct_dtype xdt = ct_get_dtype(x), pdt = w ? ct_get_dtype(w) : b ? ct_get_dtype(b) : xdt;
    ct_device dev = ct_get_device(x);
    ct_tensor *fwin[3] = {x, w, b};
    return ct__half_native(dev, CT_OP_batch_norm_fwd, xdt) && ct__half_native(dev, CT_OP_batch_norm_bwd, xdt) &&
           (pdt == xdt || pdt == CT_F32) && (!w || ct_get_dtype(w) == pdt) && (!b || ct_get_dtype(b) == pdt) &&
           (!w || ct_get_device(w) == dev) && (!b || ct_get_device(b) == dev) && !ct__fw_on(fwin, 3);
}

/* relu(r) when relu != 0 (NULL stays NULL) */
static ct_tensor *bn_act(ct_tensor *r, int relu) { return relu && r ? ct_relu(r) : r; }

/* F.batch_norm, then relu when relu != 0: in evaluation the op layer's
 * ct__batch_norm_eval applies it (the fused kernel in its own pass), in
 * training ct_relu on the result.  Training with f32/f64 tensors of one
 * dtype and device runs the fused ops (or their fallback, src/ops/
 * batch_norm.c) inside a function whose backward is batch_norm_bwd; other
 * dtypes run the composite, differentiated op by op. */
static ct_tensor *batch_norm_act(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w,
                                 ct_tensor *b, bool training, double momentum, double eps,
                                 int relu) {
    CT_NULLCHECK_OP("batch_norm", x);
    int nd = ct_ndim(x);
    if (nd < 2)
        return ct__error(CT_ERR_SHAPE, "batch_norm: expected an input of at least 2 dims [N, C, *], got %s",
                         ct__tshape(x));
    if (!ct_dtype_is_floating(ct_get_dtype(x)))
        return ct__error(CT_ERR_DTYPE, "batch_norm: expected a floating point input, got %s",
                         ct_dtype_name(ct_get_dtype(x)));
    int64_t C = ct_size(x, 1);
    if (check_vec("batch_norm", "running_mean", rm, C) || check_vec("batch_norm", "running_var", rv, C) ||
        check_vec("batch_norm", "weight", w, C) || check_vec("batch_norm", "bias", b, C))
        return NULL;
    if (!training && (!rm || !rv))
        return ct__error(CT_ERR_ARG, "batch_norm: running_mean and running_var must be defined in "
                         "evaluation mode");
    ct_scope s = ct_scope_begin();
    ct_tensor *y;
    ct_dtype xdt = ct_get_dtype(x);
    bool any_grad = false;
    {
        ct_tensor *t5[5] = {x, rm, rv, w, b};
        for (int i = 0; i < 5 && ct_is_grad_enabled(); i++) any_grad = any_grad || (t5[i] && ct_requires_grad(t5[i]));
    }
    if ((xdt == CT_F16 || xdt == CT_BF16) && !training && !any_grad &&
        ct__half_native(ct_get_device(x), CT_OP_batch_norm_eval, xdt) && ct_get_dtype(rm) == xdt &&
        ct_get_dtype(rv) == xdt && (!w || ct_get_dtype(w) == xdt) && (!b || ct_get_dtype(b) == xdt)) {
        /* f16/bf16 inference: the fused eval kernel computes them itself
         * (f32 inside, rounded once) */
        y = ct__batch_norm_eval(x, rm, rv, w, b, eps, relu != 0);
        return nr_end(s, y);
    }
    if ((xdt == CT_F16 || xdt == CT_BF16) && !training) {
        /* f16/bf16 evaluation with gradients (or mixed dtypes): computed in
         * f32 and rounded once, as torch's kernels do (the composite in the
         * half dtype rounds after every op, off by several ulps); whole-
         * tensor conversions here */
        ct_tensor *wf = w ? ct_to_dtype(w, CT_F32) : NULL, *bf = b ? ct_to_dtype(b, CT_F32) : NULL;
        y = ct_to_dtype(batch_norm_act(ct_to_dtype(x, CT_F32), ct_to_dtype(rm, CT_F32),
                                       ct_to_dtype(rv, CT_F32), wf, bf, false, momentum, eps, relu), xdt);
        return nr_end(s, y);
    }
    if ((xdt == CT_F16 || xdt == CT_BF16) && bn_half_fused_ok(x, w, b)) {
        /* f16/bf16 training where the device's fused kernels compute halves
         * (src/backend/cpu/bn.c): one pass for the statistics and y, one for
         * dx/dw/db, no f32 copies; w and b in x's dtype (statistics rounded
         * to it, as below) or float32 (torch's mixed type: unrounded) */
        int64_t count = C ? ct_numel(x) / C : 0;
        if (count <= 1) {
            ct__error(CT_ERR_SHAPE, "batch_norm: Expected more than 1 value per channel when training, "
                      "got input size %s", ct__tshape(x));
            return nr_end(s, NULL);
        }
        return nr_end(s, bn_act(bn_train_fused(x, rm, rv, w, b, momentum, eps, count), relu));
    }
    if (xdt == CT_F16 || xdt == CT_BF16) {
        /* f16/bf16 training, torch's way: the batch mean and invstd computed
         * in f32 and rounded to x's dtype (torch saves them in it), x
         * normalized with those in f32, the result rounded once; running
         * stats from the f32 statistics */
        int64_t count = C ? ct_numel(x) / C : 0;
        if (count <= 1) {
            ct__error(CT_ERR_SHAPE, "batch_norm: Expected more than 1 value per channel when training, "
                      "got input size %s", ct__tshape(x));
            return nr_end(s, NULL);
        }
        int64_t dims[CT_MAX_DIMS], bshape[CT_MAX_DIMS];
        int k = 0;
        for (int i = 0; i < nd; i++) {
            if (i != 1) dims[k++] = i;
            bshape[i] = i == 1 ? C : 1;
        }
        ct_tensor *xf = ct_to_dtype(x, CT_F32);
        ct_tensor *mean = ct_mean(xf, dims, k, true);
        ct_tensor *var = ct_mean(ct_square(ct_sub(xf, mean)), dims, k, true);
        ct_tensor *inv = ct_rsqrt(ct_add_scalar(var, eps));
        ct_tensor *mh = ct_to_dtype(ct_to_dtype(mean, xdt), CT_F32);
        ct_tensor *ih = ct_to_dtype(ct_to_dtype(inv, xdt), CT_F32);
        ct_tensor *yf = ct_mul(ct_sub(xf, mh), ih);
        if (w) yf = ct_mul(yf, ct_reshape(ct_to_dtype(w, CT_F32), bshape, nd));
        if (b) yf = ct_add(yf, ct_reshape(ct_to_dtype(b, CT_F32), bshape, nd));
        y = ct_to_dtype(bn_act(yf, relu), xdt);
        if (y && (rm || rv)) {
            ct_tensor *bm = ct_reshape(mean, CT_SHAPE(C)), *bv = ct_reshape(var, CT_SHAPE(C));
            if (update_running(rm, bm, momentum) ||
                update_running(rv, ct_mul_scalar(bv, (double)count / (double)(count - 1)), momentum))
                y = NULL;
        }
        return nr_end(s, y);
    }
    if (training) {
        int64_t count = C ? ct_numel(x) / C : 0;
        if (count <= 1) {
            ct__error(CT_ERR_SHAPE, "batch_norm: Expected more than 1 value per channel when training, "
                      "got input size %s", ct__tshape(x));
            return nr_end(s, NULL);
        }
        ct_tensor *fwin[3] = {x, w, b};
        if (ct__batch_norm_fusable(x, w, b) && !ct__fw_on(fwin, 3)) /* forward AD: the composite */
            return nr_end(s, bn_act(bn_train_fused(x, rm, rv, w, b, momentum, eps, count), relu));
        ct_tensor *mean, *var;
        y = ct__batch_norm_train_composite(x, w, b, eps, &mean, &var);
        if (y && (rm || rv)) {
            if (update_running(rm, mean, momentum) ||
                update_running(rv, ct_mul_scalar(var, (double)count / (double)(count - 1)), momentum))
                y = NULL;
        }
    } else {
        y = ct__batch_norm_eval(x, rm, rv, w, b, eps, relu != 0);
    }
    return nr_end(s, y);
}

ct_tensor *ct_batch_norm(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b,
                         bool training, double momentum, double eps) {
    return batch_norm_act(x, rm, rv, w, b, training, momentum, eps, 0);
}

ct_tensor *ct_instance_norm(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b,
                            bool use_input_stats, double momentum, double eps) {
    CT_NULLCHECK(x);
    int nd = ct_ndim(x);
    if (nd < 3)
        return ct__error(CT_ERR_SHAPE, "instance_norm: expected an input of at least 3 dims [N, C, *], "
                         "got %s", ct__tshape(x));
    if (!ct_dtype_is_floating(ct_get_dtype(x)))
        return ct__error(CT_ERR_DTYPE, "instance_norm: expected a floating point input, got %s",
                         ct_dtype_name(ct_get_dtype(x)));
    int64_t N = ct_size(x, 0), C = ct_size(x, 1);
    if (check_vec("instance_norm", "running_mean", rm, C) || check_vec("instance_norm", "running_var", rv, C) ||
        check_vec("instance_norm", "weight", w, C) || check_vec("instance_norm", "bias", b, C))
        return NULL;
    if (!use_input_stats && (!rm || !rv))
        return ct__error(CT_ERR_ARG, "instance_norm: Expected running_mean and running_var to be "
                         "defined when use_input_stats is false");
    ct_scope s = ct_scope_begin();
    ct_tensor *y;
    if (use_input_stats) {
        int64_t count = (N > 0 && C > 0) ? ct_numel(x) / (N * C) : 0;
        if (count <= 1) {
            ct__error(CT_ERR_SHAPE, "instance_norm: Expected more than 1 spatial element when training, "
                      "got input size %s", ct__tshape(x));
            return nr_end(s, NULL);
        }
        int64_t dims[CT_MAX_DIMS];
        int k = 0;
        for (int i = 2; i < nd; i++) dims[k++] = i;
        ct_tensor *mean = ct_mean(x, dims, k, true);
        ct_tensor *xc = ct_sub(x, mean);
        ct_tensor *var = ct_mean(ct_square(xc), dims, k, true);
        y = ct_mul(xc, ct_rsqrt(ct_add_scalar(var, eps)));
        if (y && (rm || rv)) {
            const int64_t red[1] = {0};
            ct_tensor *bm = ct_mean(ct_reshape(mean, CT_SHAPE(N, C)), red, 1, false);
            ct_tensor *bv = ct_mean(ct_reshape(ct_mul_scalar(var, (double)count / (double)(count - 1)),
                                               CT_SHAPE(N, C)), red, 1, false);
            if (update_running(rm, bm, momentum) || update_running(rv, bv, momentum)) y = NULL;
        }
    } else {
        y = normalize_running(x, rm, rv, C, eps);
    }
    return nr_end(s, affine(y, w, b, C, nd));
}

static int check_normalized(const char *op, ct_tensor *x, const int64_t *shape, int n) {
    int nd = ct_ndim(x);
    int ok = shape && n >= 1 && n <= nd;
    for (int i = 0; ok && i < n; i++) ok = ct_sizes(x)[nd - n + i] == shape[i];
    if (!ok) {
        char buf[256], star[300];
        ct__shape_str(shape, shape && n > 0 ? n : 0, buf, sizeof buf);
        snprintf(star, sizeof star, "[*%s%s", n > 0 && shape ? ", " : "]", n > 0 && shape ? buf + 1 : "");
        ct__error(CT_ERR_SHAPE, "%s: Given normalized_shape=%s, expected input with shape %s, but got input "
                  "of size %s", op, buf, star, ct__tshape(x));
        return -1;
    }
    return 0;
}

static int check_same_shape(const char *op, const char *what, ct_tensor *t, const int64_t *shape, int n) {
    if (!t) return 0;
    if (ct_ndim(t) != n || memcmp(ct_sizes(t), shape, sizeof(int64_t) * (size_t)n)) {
        char buf[256];
        ct__error(CT_ERR_SHAPE, "%s: expected %s of shape %s, got %s", op, what,
                  ct__shape_str(shape, n, buf, sizeof buf), ct__tshape(t));
        return -1;
    }
    return 0;
}

/* the fused layer_norm / rms_norm (defined at the end of this file) */
static int ln_fused(ct_tensor *x, int n, ct_tensor *w, ct_tensor *b, double eps, int rms, ct_tensor **y);

ct_tensor *ct_layer_norm(ct_tensor *x, const int64_t *shape, int n, ct_tensor *w, ct_tensor *b, double eps) {
    CT_NULLCHECK(x);
    if (check_normalized("layer_norm", x, shape, n) || check_same_shape("layer_norm", "weight", w, shape, n) ||
        check_same_shape("layer_norm", "bias", b, shape, n))
        return NULL;
    ct_tensor *yf;
    if (ln_fused(x, n, w, b, eps, 0, &yf)) return yf;
    int nd = ct_ndim(x);
    int64_t dims[CT_MAX_DIMS];
    for (int i = 0; i < n; i++) dims[i] = nd - n + i;
    ct_scope s = ct_scope_begin();
    ct_tensor *mean = ct_mean(x, dims, n, true);
    ct_tensor *xc = ct_sub(x, mean);
    ct_tensor *var = ct_mean(ct_square(xc), dims, n, true);
    ct_tensor *y = ct_mul(xc, ct_rsqrt(ct_add_scalar(var, eps)));
    if (w) y = ct_mul(y, w);
    if (b) y = ct_add(y, b);
    return nr_end(s, y);
}

static double machine_eps(ct_dtype dt) {
    switch (dt) {
    case CT_F64: return 2.220446049250313e-16;
    case CT_F16: return 0.0009765625;
    case CT_BF16: return 0.0078125;
    default: return 1.1920928955078125e-07;
    }
}

ct_tensor *ct_rms_norm(ct_tensor *x, const int64_t *shape, int n, ct_tensor *w, double eps) {
    CT_NULLCHECK(x);
    if (check_normalized("rms_norm", x, shape, n) || check_same_shape("rms_norm", "weight", w, shape, n))
        return NULL;
    if (isnan(eps)) eps = machine_eps(ct_get_dtype(x));
    ct_tensor *yf;
    if (ln_fused(x, n, w, NULL, eps, 1, &yf)) return yf;
    int nd = ct_ndim(x);
    int64_t dims[CT_MAX_DIMS];
    for (int i = 0; i < n; i++) dims[i] = nd - n + i;
    ct_scope s = ct_scope_begin();
    ct_tensor *ms = ct_mean(ct_square(x), dims, n, true);
    ct_tensor *y = ct_mul(x, ct_rsqrt(ct_add_scalar(ms, eps)));
    if (w) y = ct_mul(y, w);
    return nr_end(s, y);
}

ct_tensor *ct_group_norm(ct_tensor *x, int64_t G, ct_tensor *w, ct_tensor *b, double eps) {
    CT_NULLCHECK(x);
    int nd = ct_ndim(x);
    if (nd < 2)
        return ct__error(CT_ERR_SHAPE, "group_norm: expected an input of at least 2 dims [N, C, *], got %s",
                         ct__tshape(x));
    int64_t N = ct_size(x, 0), C = ct_size(x, 1);
    if (G <= 0 || C % G)
        return ct__error(CT_ERR_SHAPE, "group_norm: Expected number of channels in input to be divisible by "
                         "num_groups, but got input of shape %s and num_groups=%lld", ct__tshape(x),
                         (long long)G);
    if (check_vec("group_norm", "weight", w, C) || check_vec("group_norm", "bias", b, C)) return NULL;
    ct_scope s = ct_scope_begin();
    const int64_t d2[1] = {2};
    ct_tensor *xg = ct_reshape(x, CT_SHAPE(N, G, -1));
    ct_tensor *mean = ct_mean(xg, d2, 1, true);
    ct_tensor *xc = ct_sub(xg, mean);
    ct_tensor *var = ct_mean(ct_square(xc), d2, 1, true);
    ct_tensor *y = ct_mul(xc, ct_rsqrt(ct_add_scalar(var, eps)));
    y = ct_reshape(y, ct_sizes(x), nd);
    return nr_end(s, affine(y, w, b, C, nd));
}

ct_tensor *ct_local_response_norm(ct_tensor *x, int64_t size, double alpha, double beta, double k) {
    CT_NULLCHECK(x);
    int nd = ct_ndim(x);
    if (nd < 3)
        return ct__error(CT_ERR_SHAPE, "local_response_norm: Expected 3D or higher dimensionality input "
                         "(got %d dimensions)", nd);
    if (size <= 0) return ct__error(CT_ERR_ARG, "local_response_norm: size must be positive, got %lld", (long long)size);
    int64_t N = ct_size(x, 0), C = ct_size(x, 1);
    ct_scope s = ct_scope_begin();
    ct_tensor *x3 = ct_reshape(x, CT_SHAPE(N, C, -1));
    const int64_t pad[4] = {0, 0, size / 2, (size - 1) / 2};
    ct_tensor *sq = ct_pad(ct_square(x3), pad, 4, CT_PAD_CONSTANT, 0.0);
    ct_tensor *acc = NULL;
    for (int64_t i = 0; i < size; i++) {
        ct_tensor *part = ct_narrow(sq, 1, i, C);
        acc = acc ? ct_add(acc, part) : part;
    }
    ct_tensor *div = ct_div_scalar(acc, (double)size);
    div = ct_pow_scalar(ct_add_scalar(ct_mul_scalar(div, alpha), k), beta);
    ct_tensor *y = ct_reshape(ct_div(x3, div), ct_sizes(x), nd);
    return nr_end(s, y);
}

/* ======================================================================
 * modules
 * ====================================================================== */

/* ---- BatchNorm1d/2d and InstanceNorm2d (PyTorch's _NormBase) ---------------- */
typedef struct {
    ct_module base;
    int64_t num_features;
    double eps, momentum;
    bool affine, track;
    int pw, pb;            /* parameter slots (-1 when not affine) */
    int brm, brv, bnbt;    /* buffer slots */
} norm_mod;

static char *norm_repr(ct_module *m) {
    norm_mod *b = (norm_mod *)m;
    char e[64], mo[64], *r = malloc(256);
    if (!r) return NULL;
    nr_pyfloat(e, sizeof e, b->eps);
    if (isnan(b->momentum)) snprintf(mo, sizeof mo, "None");
    else nr_pyfloat(mo, sizeof mo, b->momentum);
    snprintf(r, 256, "%lld, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", (long long)b->num_features,
             e, mo, b->affine ? "True" : "False", b->track ? "True" : "False");
    return r;
}

/* BatchNorm1d/2d's forward, then relu when relu != 0 (batch_norm_act) */
static ct_tensor *bn_module_forward(ct_module *m, ct_tensor *x, int relu) {
    norm_mod *b = (norm_mod *)m;
    const char *name = m->cls->name;
    int nd = ct_ndim(x);
    bool is1d = !strcmp(name, "BatchNorm1d");
    if (is1d ? (nd != 2 && nd != 3) : nd != 4)
        return ct__error(CT_ERR_SHAPE, "%s: expected %s input (got %dD input)", name, is1d ? "2D or 3D" : "4D", nd);
    if (ct_size(x, 1) != b->num_features)
        return ct__error(CT_ERR_SHAPE, "%s: expected %lld channels (num_features) in dim 1 of the input, got "
                         "input of size %s", name, (long long)b->num_features, ct__tshape(x));
    bool training = ct_module_is_training(m);
    double eaf = isnan(b->momentum) ? 0.0 : b->momentum;
    ct_tensor *rm = b->track ? ct_module_buffer(m, b->brm) : NULL;
    ct_tensor *rv = b->track ? ct_module_buffer(m, b->brv) : NULL;
    if (training && b->track) {
        ct_tensor *nbt = ct_module_buffer(m, b->bnbt);
        if (nbt) {
            bool prev = ct_set_grad_enabled(false);
            ct_scope s = ct_scope_begin();
            ct_tensor *ok = ct_add_(nbt, ct_wrap_int(1));
            ct_scope_end(s);
            ct_set_grad_enabled(prev);
            if (!ok) return NULL;
            if (isnan(b->momentum)) eaf = 1.0 / (double)ct_item_int(nbt);
        }
    }
    bool bn_training = training || (!rm && !rv);
    ct_tensor *w = b->affine ? ct_module_param(m, b->pw) : NULL;
    ct_tensor *bias = b->affine ? ct_module_param(m, b->pb) : NULL;
    return batch_norm_act(x, !training || b->track ? rm : NULL, !training || b->track ? rv : NULL, w, bias,
                          bn_training, eaf, b->eps, relu);
}

static ct_tensor *bn_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: expects one input, got %d", m->cls->name, n);
    return bn_module_forward(m, in[0], 0);
}

static const ct_module_class k_bn1d, k_bn2d;

ct_tensor *ct__batch_norm_relu(ct_module *bn, ct_tensor *x) {
    if (!bn || (bn->cls != &k_bn1d && bn->cls != &k_bn2d))
        return ct__error(CT_ERR_ARG, "batch_norm_relu: expected a BatchNorm1d/2d module, got %s",
                         bn ? bn->cls->name : "NULL");
    CT_NULLCHECK(x);
    return bn_module_forward(bn, x, 1);
}

static ct_tensor *in_forward(ct_module *m, ct_tensor *const *in, int n) {
    norm_mod *b = (norm_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "InstanceNorm2d: expects one input, got %d", n);
    ct_tensor *x = in[0];
    int nd = ct_ndim(x);
    if (nd != 3 && nd != 4) return ct__error(CT_ERR_SHAPE, "InstanceNorm2d: expected 3D or 4D input (got %dD input)", nd);
    int fdim = nd - 3;
    if (b->affine && ct_size(x, fdim) != b->num_features)
        return ct__error(CT_ERR_SHAPE, "InstanceNorm2d: expected input's size at dim=%d to match num_features "
                         "(%lld), but got: %lld.", fdim, (long long)b->num_features, (long long)ct_size(x, fdim));
    ct_tensor *rm = b->track ? ct_module_buffer(m, b->brm) : NULL;
    ct_tensor *rv = b->track ? ct_module_buffer(m, b->brv) : NULL;
    ct_tensor *w = b->affine ? ct_module_param(m, b->pw) : NULL;
    ct_tensor *bias = b->affine ? ct_module_param(m, b->pb) : NULL;
    bool use_input = ct_module_is_training(m) || !b->track;
    if (nd == 3) {
        ct_scope s = ct_scope_begin();
        ct_tensor *y = ct_instance_norm(ct_unsqueeze(x, 0), rm, rv, w, bias, use_input, b->momentum, b->eps);
        return nr_end(s, ct_squeeze_dim(y, 0));
    }
    return ct_instance_norm(x, rm, rv, w, bias, use_input, b->momentum, b->eps);
}

static const ct_module_class k_bn1d = {"BatchNorm1d", sizeof(norm_mod), bn_forward, norm_repr, NULL, NULL};
static const ct_module_class k_bn2d = {"BatchNorm2d", sizeof(norm_mod), bn_forward, norm_repr, NULL, NULL};
static const ct_module_class k_in2d = {"InstanceNorm2d", sizeof(norm_mod), in_forward, norm_repr, NULL, NULL};

static ct_module *norm_new(const ct_module_class *cls, int64_t nf, double eps, double momentum, bool affine,
                           bool track) {
    if (nf <= 0) return ct__error(CT_ERR_ARG, "%s: num_features must be positive, got %lld", cls->name, (long long)nf);
    if (!(eps >= 0)) return ct__error(CT_ERR_ARG, "%s: eps must be >= 0, got %g", cls->name, eps);
    if (cls == &k_in2d && isnan(momentum))
        return ct__error(CT_ERR_ARG, "%s: momentum must be a number (None is not supported)", cls->name);
    norm_mod *b = (norm_mod *)ct_module_new(cls);
    if (!b) return NULL;
    ct_module *m = &b->base;
    b->num_features = nf;
    b->eps = eps;
    b->momentum = momentum;
    b->affine = affine;
    b->track = track;
    b->pw = b->pb = b->brm = b->brv = b->bnbt = -1;
    ct_dtype dt = ct_get_default_dtype();
    int fail = 0;
    if (affine) {
        b->pw = nr_param_full(m, "weight", CT_SHAPE(nf), 1.0);
        b->pb = nr_param_full(m, "bias", CT_SHAPE(nf), 0.0);
        fail |= b->pw < 0 || b->pb < 0;
    }
    if (track) {
        b->brm = nr_buffer_full(m, "running_mean", CT_SHAPE(nf), 0.0, dt);
        b->brv = nr_buffer_full(m, "running_var", CT_SHAPE(nf), 1.0, dt);
        b->bnbt = nr_buffer_full(m, "num_batches_tracked", CT_SCALAR_SHAPE, 0.0, CT_I64);
        fail |= b->brm < 0 || b->brv < 0 || b->bnbt < 0;
    }
    if (fail) { ct_module_release(m); return NULL; }
    return m;
}

ct_module *ct_batch_norm1d_new(int64_t nf, double eps, double momentum, bool affine, bool track) {
    return norm_new(&k_bn1d, nf, eps, momentum, affine, track);
}
ct_module *ct_batch_norm2d_new(int64_t nf, double eps, double momentum, bool affine, bool track) {
    return norm_new(&k_bn2d, nf, eps, momentum, affine, track);
}
ct_module *ct_instance_norm2d_new(int64_t nf, double eps, double momentum, bool affine, bool track) {
    return norm_new(&k_in2d, nf, eps, momentum, affine, track);
}

/* ---- LayerNorm and RMSNorm ----------------------------------------------------- */
typedef struct {
    ct_module base;
    int64_t shape[CT_MAX_DIMS];
    int n;
    double eps;
    bool affine, bias;
    int pw, pb;
} ln_mod;

static char *ln_repr(ct_module *m) {
    ln_mod *l = (ln_mod *)m;
    char sh[300], e[64], *r = malloc(400);
    if (!r) return NULL;
    nr_pytuple(sh, sizeof sh, l->shape, l->n);
    if (isnan(l->eps)) snprintf(e, sizeof e, "None");
    else nr_pyfloat(e, sizeof e, l->eps);
    snprintf(r, 400, "%s, eps=%s, elementwise_affine=%s", sh, e, l->affine ? "True" : "False");
    return r;
}

static ct_tensor *ln_forward(ct_module *m, ct_tensor *const *in, int n) {
    ln_mod *l = (ln_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: expects one input, got %d", m->cls->name, n);
    ct_tensor *w = l->pw >= 0 ? ct_module_param(m, l->pw) : NULL;
    ct_tensor *b = l->pb >= 0 ? ct_module_param(m, l->pb) : NULL;
    if (!strcmp(m->cls->name, "RMSNorm")) return ct_rms_norm(in[0], l->shape, l->n, w, l->eps);
    return ct_layer_norm(in[0], l->shape, l->n, w, b, l->eps);
}

static const ct_module_class k_ln = {"LayerNorm", sizeof(ln_mod), ln_forward, ln_repr, NULL, NULL};
static const ct_module_class k_rms = {"RMSNorm", sizeof(ln_mod), ln_forward, ln_repr, NULL, NULL};

static ct_module *ln_new(const ct_module_class *cls, const int64_t *shape, int n, double eps, bool affine,
                         bool bias) {
    if (!shape || n < 1 || n > CT_MAX_DIMS)
        return ct__error(CT_ERR_ARG, "%s: normalized_shape must have 1 to %d dims, got %d", cls->name,
                         CT_MAX_DIMS, n);
    for (int i = 0; i < n; i++)
        if (shape[i] < 0) return ct__error(CT_ERR_ARG, "%s: negative size in normalized_shape", cls->name);
    ln_mod *l = (ln_mod *)ct_module_new(cls);
    if (!l) return NULL;
    memcpy(l->shape, shape, sizeof(int64_t) * (size_t)n);
    l->n = n;
    l->eps = eps;
    l->affine = affine;
    l->bias = bias;
    l->pw = l->pb = -1;
    if (affine) {
        l->pw = nr_param_full(&l->base, "weight", shape, n, 1.0);
        if (bias) l->pb = nr_param_full(&l->base, "bias", shape, n, 0.0);
        if (l->pw < 0 || (bias && l->pb < 0)) { ct_module_release(&l->base); return NULL; }
    }
    return &l->base;
}

ct_module *ct_layer_norm_new(const int64_t *shape, int n, double eps, bool affine, bool bias) {
    return ln_new(&k_ln, shape, n, eps, affine, bias);
}
ct_module *ct_rms_norm_new(const int64_t *shape, int n, double eps, bool affine) {
    return ln_new(&k_rms, shape, n, eps, affine, false);
}

/* ---- GroupNorm ---------------------------------------------------------------------- */
typedef struct {
    ct_module base;
    int64_t groups, channels;
    double eps;
    bool affine;
} gn_mod;

static char *gn_repr(ct_module *m) {
    gn_mod *g = (gn_mod *)m;
    char e[64], *r = malloc(200);
    if (!r) return NULL;
    nr_pyfloat(e, sizeof e, g->eps);
    snprintf(r, 200, "%lld, %lld, eps=%s, affine=%s", (long long)g->groups, (long long)g->channels, e,
             g->affine ? "True" : "False");
    return r;
}

static ct_tensor *gn_forward(ct_module *m, ct_tensor *const *in, int n) {
    gn_mod *g = (gn_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "GroupNorm: expects one input, got %d", n);
    if (ct_ndim(in[0]) < 2 || ct_size(in[0], 1) != g->channels)
        return ct__error(CT_ERR_SHAPE, "GroupNorm: expected input of shape [N, %lld, *], got %s",
                         (long long)g->channels, ct__tshape(in[0]));
    return ct_group_norm(in[0], g->groups, g->affine ? ct_module_param(m, 0) : NULL,
                         g->affine ? ct_module_param(m, 1) : NULL, g->eps);
}

static const ct_module_class k_gn = {"GroupNorm", sizeof(gn_mod), gn_forward, gn_repr, NULL, NULL};

ct_module *ct_group_norm_new(int64_t groups, int64_t channels, double eps, bool affine) {
    if (groups <= 0 || channels <= 0 || channels % groups)
        return ct__error(CT_ERR_ARG, "GroupNorm: num_channels must be divisible by num_groups (got %lld and %lld)",
                         (long long)channels, (long long)groups);
    gn_mod *g = (gn_mod *)ct_module_new(&k_gn);
    if (!g) return NULL;
    g->groups = groups;
    g->channels = channels;
    g->eps = eps;
    g->affine = affine;
    if (affine && (nr_param_full(&g->base, "weight", CT_SHAPE(channels), 1.0) < 0 ||
                   nr_param_full(&g->base, "bias", CT_SHAPE(channels), 0.0) < 0)) {
        ct_module_release(&g->base);
        return NULL;
    }
    return &g->base;
}

/* ---- LocalResponseNorm ------------------------------------------------------------------ */
typedef struct {
    ct_module base;
    int64_t size;
    double alpha, beta, k;
} lrn_mod;

static char *lrn_repr(ct_module *m) {
    lrn_mod *l = (lrn_mod *)m;
    char a[64], b[64], k[64], *r = malloc(256);
    if (!r) return NULL;
    nr_pyfloat(a, sizeof a, l->alpha);
    nr_pyfloat(b, sizeof b, l->beta);
    nr_pyfloat(k, sizeof k, l->k);
    snprintf(r, 256, "%lld, alpha=%s, beta=%s, k=%s", (long long)l->size, a, b, k);
    return r;
}

static ct_tensor *lrn_forward(ct_module *m, ct_tensor *const *in, int n) {
    lrn_mod *l = (lrn_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "LocalResponseNorm: expects one input, got %d", n);
    return ct_local_response_norm(in[0], l->size, l->alpha, l->beta, l->k);
}

static const ct_module_class k_lrn = {"LocalResponseNorm", sizeof(lrn_mod), lrn_forward, lrn_repr, NULL, NULL};

ct_module *ct_local_response_norm_new(int64_t size, double alpha, double beta, double k) {
    if (size <= 0) return ct__error(CT_ERR_ARG, "LocalResponseNorm: size must be positive, got %lld", (long long)size);
    lrn_mod *l = (lrn_mod *)ct_module_new(&k_lrn);
    if (!l) return NULL;
    l->size = size;
    l->alpha = alpha;
    l->beta = beta;
    l->k = k;
    return &l->base;
}

/* ======================================================================
 * fused batch norm (training mode, f32/f64): the op layer's
 * ct__batch_norm_fwd (the table op batch_norm_fwd, or its composite
 * fallback where the device has no kernel) gives the statistics and the
 * normalized, affine output; ct__batch_norm_bwd gives dx/dw/db.  Saved for
 * backward: the input, the weight, the per-channel mean and invstd (and
 * eps) -- no centered or normalized copies.  When the backward pass builds
 * a graph (create_graph), the gradient is composed of public ops instead,
 * with the statistics recomputed from x so that double backward sees their
 * dependence on x.
 * ====================================================================== */
typedef struct bnf_user {
    double eps;
    ct_tensor *mean, *var; /* out: [C] statistics (biased var) in x's dtype */
} bnf_user;

static ct_status bnf_forward(ct_function_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out) {
    (void)nin;
    bnf_user *u = ct_ctx_user(ctx);
    ct_tensor *x = ct_contiguous(in[0]), *w = ct_contiguous(in[1]);
    if (!x || !w) return ct_last_error_code();
    ct_tensor *y, *is;
    if (ct__batch_norm_fwd(x, w, in[2], u->eps, &y, &u->mean, &is, &u->var)) return ct_last_error_code();
    ct_tensor *eps = ct_full_on(NULL, 0, u->eps, CT_F64, CT_CPU);
    if (!eps) return ct_last_error_code();
    ct_tensor *save[5] = {x, w, u->mean, is, eps};
    if (ct_ctx_save_for_backward(ctx, save, 5)) return ct_last_error_code();
    out[0] = y;
    return CT_OK;
}

/* the gradient from public ops (differentiable), statistics from x */
static ct_status bnf_backward_graph(ct_tensor *x, ct_tensor *w, ct_tensor *g, double eps,
                                    ct_tensor **gin) {
    int nd = ct_ndim(x);
    int64_t C = ct_size(x, 1), dims[CT_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < nd; i++) if (i != 1) dims[k++] = i;
    double M = (double)(ct_numel(x) / C);
    ct_tensor *xc = ct_sub(x, ct_mean(x, dims, k, true));
    ct_tensor *is = ct_rsqrt(ct_add_scalar(ct_mean(ct_square(xc), dims, k, true), eps));
    ct_tensor *xh = ct_mul(xc, is);
    ct_tensor *sdy = ct_sum(g, dims, k, true), *sdyxh = ct_sum(ct_mul(g, xh), dims, k, true);
    ct_tensor *t = ct_sub(ct_sub(g, ct_mul_scalar(sdy, 1.0 / M)), ct_mul(xh, ct_mul_scalar(sdyxh, 1.0 / M)));
    /* (f16/bf16 x with float32 w: each gradient in its input's dtype) */
    gin[0] = ct_to_dtype(ct_mul(t, ct_mul(nr_chan_view(w, C, nd), is)), ct_get_dtype(x));
    gin[1] = ct_to_dtype(ct_reshape(sdyxh, ct_sizes(w), ct_ndim(w)), ct_get_dtype(w));
    gin[2] = ct_to_dtype(ct_reshape(sdy, ct_sizes(w), ct_ndim(w)), ct_get_dtype(w));
    return gin[0] && gin[1] && gin[2] ? CT_OK : ct_last_error_code();
}

static ct_status bnf_backward(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    ct_tensor *x = ct_ctx_saved(ctx, 0), *w = ct_ctx_saved(ctx, 1), *mean = ct_ctx_saved(ctx, 2);
    ct_tensor *is = ct_ctx_saved(ctx, 3), *eps = ct_ctx_saved(ctx, 4);
    if (!x || !w || !mean || !is || !eps) return ct_last_error_code();
    ct_dtype dt = ct_get_dtype(x);
    ct_tensor *g = ct_to_dtype(gout[0], dt);
    if (ct_is_grad_enabled()) return bnf_backward_graph(x, w, g, ct_item(eps), gin);
    ct_tensor *dx, *dw, *db;
    if (ct__batch_norm_bwd(x, g, w, mean, is, true, true, true, &dx, &dw, &db)) return ct_last_error_code();
    gin[0] = dx;
    gin[1] = ct_reshape(dw, ct_sizes(w), ct_ndim(w));
    gin[2] = ct_reshape(db, ct_sizes(w), ct_ndim(w));
    return gin[1] && gin[2] ? CT_OK : ct_last_error_code();
}

static const ct_function_def k_bn_fused = {"NativeBatchNorm", 1, bnf_forward, bnf_backward, NULL};

/* y = batch_norm(x) * w + b in training mode with the fused ops; the
 * running statistics updated like the composite path. */
static ct_tensor *bn_train_fused(ct_tensor *x, ct_tensor *rm, ct_tensor *rv, ct_tensor *w, ct_tensor *b,
                                 double momentum, double eps, int64_t count) {
    int64_t C = ct_size(x, 1);
    /* a missing weight or bias: ones / zeros of the given one's dtype (f16/
     * bf16 x: float32 or x's, which decides the mixed type), else x's */
    ct_dtype pdt = w ? ct_get_dtype(w) : b ? ct_get_dtype(b) : ct_get_dtype(x);
    ct_tensor *wt = w ? w : ct_ones_on(CT_SHAPE(C), pdt, ct_get_device(x));
    ct_tensor *bt = b ? b : ct_zeros_on(CT_SHAPE(C), pdt, ct_get_device(x));
    if (!wt || !bt) return NULL;
    bnf_user u = {eps, NULL, NULL};
    ct_tensor *ins[3] = {x, wt, bt}, *y = NULL;
    if (ct_function_apply(&k_bn_fused, ins, 3, &u, &y)) return NULL;
    if (rm || rv) {
        if (update_running(rm, u.mean, momentum) ||
            update_running(rv, ct_mul_scalar(u.var, (double)count / (double)(count - 1)), momentum))
            return NULL;
    }
    return y;
}

/* ======================================================================
 * fused layer_norm / rms_norm (f32/f64, x, w, b on one device): one kernel
 * writes y and saves the per-row mean and rstd, one computes dx, dw, db
 * (src/ops/norm_ops.c, src/backend/cpu/norm.c; a device without them runs
 * the op layer's composite fallback).  Saved for backward: the
 * input, the weight, mean, rstd and eps -- no centered or normalized copies.
 * When the backward pass builds a graph (create_graph), the gradient is
 * composed of public ops, the statistics recomputed from x so that double
 * backward sees their dependence on x.  Inputs: x, [w], [b].
 * ====================================================================== */
ct_status ct__layer_norm_fwd(ct_tensor *x, ct_tensor *w, ct_tensor *b, int64_t n, double eps,
                             int rms, ct_tensor **y, ct_tensor **mean, ct_tensor **rstd);
ct_status ct__layer_norm_bwd(ct_tensor *g, ct_tensor *x, ct_tensor *mean, ct_tensor *rstd,
                             ct_tensor *w, int64_t n, int rms, bool want_dw, bool want_db,
                             ct_tensor **dx, ct_tensor **dw, ct_tensor **db);

typedef struct lnf_user {
    double eps;
    int n;       /* normalized dims */
    int hw, hb;  /* inputs 1 / 2 present */
} lnf_user;

static ct_status lnf_forward_impl(ct_function_ctx *ctx, ct_tensor *const *in, ct_tensor **out, int rms) {
    lnf_user *u = ct_ctx_user(ctx);
    ct_tensor *x = ct_contiguous(in[0]);
    ct_tensor *w = u->hw ? ct_contiguous(in[1]) : NULL, *b = u->hb ? ct_contiguous(in[1 + u->hw]) : NULL;
    if (!x || (u->hw && !w) || (u->hb && !b)) return ct_last_error_code();
    int64_t N = 1;
    for (int i = 0; i < u->n; i++) N *= ct_size(x, ct_ndim(x) - u->n + i);
    ct_tensor *y, *mean, *rstd;
    if (ct__layer_norm_fwd(x, w, b, N, u->eps, rms, &y, &mean, &rstd)) return ct_last_error_code();
    ct_tensor *eps = ct_full_on(NULL, 0, u->eps, CT_F64, CT_CPU);
    ct_tensor *nt = ct_from_doubles((const double[]){(double)u->n, (double)u->hb}, CT_SHAPE(2), CT_I64);
    if (!eps || !nt) return ct_last_error_code();
    ct_tensor *save[6] = {x, w, mean, rstd, eps, nt};
    if (ct_ctx_save_for_backward(ctx, save, 6)) return ct_last_error_code();
    out[0] = y;
    return CT_OK;
}
static ct_status lnf_forward_ln(ct_function_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out) {
    (void)nin;
    return lnf_forward_impl(ctx, in, out, 0);
}
static ct_status lnf_forward_rms(ct_function_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out) {
    (void)nin;
    return lnf_forward_impl(ctx, in, out, 1);
}

/* the gradient from public ops (differentiable), statistics from x;
 * x2, g2: [M, N] */
static ct_status lnf_backward_graph(ct_tensor *x, ct_tensor *w, ct_tensor *g, double eps, int rms,
                                    int64_t N, bool hb, ct_tensor **gin) {
    int64_t M = N > 0 ? ct_numel(x) / N : 0, last = -1, first = 0;
    ct_tensor *x2 = ct_reshape(x, CT_SHAPE(M, N)), *g2 = ct_reshape(g, CT_SHAPE(M, N));
    ct_tensor *xc = rms ? x2 : ct_sub(x2, ct_mean(x2, &last, 1, true));
    ct_tensor *rstd = ct_rsqrt(ct_add_scalar(ct_mean(ct_square(xc), &last, 1, true), eps));
    ct_tensor *xh = ct_mul(xc, rstd);
    ct_tensor *gw = w ? ct_mul(g2, ct_reshape(w, CT_SHAPE(N))) : g2;
    ct_tensor *t = ct_sub(gw, ct_mul(xh, ct_mean(ct_mul(gw, xh), &last, 1, true)));
    if (!rms) t = ct_sub(t, ct_mean(gw, &last, 1, true));
    gin[0] = ct_reshape(ct_mul(t, rstd), ct_sizes(x), ct_ndim(x));
    if (!gin[0]) return ct_last_error_code();
    if (w) {
        gin[1] = ct_reshape(ct_sum(ct_mul(g2, xh), &first, 1, false), ct_sizes(w), ct_ndim(w));
        if (!gin[1]) return ct_last_error_code();
    }
    if (hb) {
        gin[1 + (w != NULL)] = ct_sum(g2, &first, 1, false);
        if (!gin[1 + (w != NULL)]) return ct_last_error_code();
    }
    return CT_OK;
}

static ct_status lnf_backward_impl(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin, int rms) {
    ct_tensor *x = ct_ctx_saved(ctx, 0), *w = ct_ctx_saved(ctx, 1), *mean = ct_ctx_saved(ctx, 2);
    ct_tensor *rstd = ct_ctx_saved(ctx, 3), *eps = ct_ctx_saved(ctx, 4), *meta = ct_ctx_saved(ctx, 5);
    if (!x || !mean || !rstd || !eps || !meta) return ct_last_error_code();
    const int64_t *mv = ct__ptr(meta);
    int n = (int)mv[0];
    bool hb = mv[1] != 0;
    /* the bias has the normalized shape (checked by the callers) */
    const int64_t *nshape = ct_sizes(x) + ct_ndim(x) - n;
    int64_t N = 1;
    for (int i = 0; i < n; i++) N *= nshape[i];
    ct_dtype dt = ct_get_dtype(x);
    ct_tensor *g = ct_to_dtype(gout[0], dt);
    if (!g) return ct_last_error_code();
    int bi = 1 + (w != NULL);
    /* f16/bf16: the gradient from public ops (the fused backward kernel
     * takes f32/f64) */
    if (ct_is_grad_enabled() || dt == CT_F16 || dt == CT_BF16) {
        ct_status st = lnf_backward_graph(x, w, g, ct_item(eps), rms, N, hb, gin);
        if (!st && hb && !(gin[bi] = ct_reshape(gin[bi], nshape, n))) return ct_last_error_code();
        return st;
    }
    g = ct_contiguous(g);
    if (!g) return ct_last_error_code();
    ct_tensor *dx, *dw, *db;
    if (ct__layer_norm_bwd(g, x, mean, rstd, w, N, rms, w != NULL, hb, &dx, &dw, &db))
        return ct_last_error_code();
    gin[0] = dx;
    if (w && !(gin[1] = ct_reshape(dw, ct_sizes(w), ct_ndim(w)))) return ct_last_error_code();
    if (hb && !(gin[bi] = ct_reshape(db, nshape, n))) return ct_last_error_code();
    return CT_OK;
}
static ct_status lnf_backward_ln(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    return lnf_backward_impl(ctx, gout, gin, 0);
}
static ct_status lnf_backward_rms(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    return lnf_backward_impl(ctx, gout, gin, 1);
}

static const ct_function_def k_ln_fused = {"NativeLayerNorm", 1, lnf_forward_ln, lnf_backward_ln, NULL};
static const ct_function_def k_rms_fused = {"FusedRmsNorm", 1, lnf_forward_rms, lnf_backward_rms, NULL};

/* 0: not fusable (the caller runs the composite); 1: *y is the result
 * (NULL on error) */
static int ln_fused(ct_tensor *x, int n, ct_tensor *w, ct_tensor *b, double eps, int rms, ct_tensor **y) {
    ct_dtype dt = ct_get_dtype(x);
    *y = NULL;
    ct_device dev = ct_get_device(x);
    ct_tensor *fwin[3] = {x, w, b};
    if (ct__fw_on(fwin, 3)) return 0; /* forward AD: the composite's ops carry tangents */
    /* f16/bf16 where the device's kernel computes them (in f32, rounded once) */
    bool half_ok = ct__half_native(dev, CT_OP_layer_norm_fwd, dt);
    if ((dt != CT_F32 && dt != CT_F64 && !half_ok) || ct_numel(x) == 0 ||
        (w && (ct_get_dtype(w) != dt || ct_get_device(w) != dev)) ||
        (b && (ct_get_dtype(b) != dt || ct_get_device(b) != dev)))
        return 0;
    lnf_user u = {eps, n, w != NULL, b != NULL};
    ct_tensor *ins[3] = {x, NULL, NULL};
    int nin = 1;
    if (w) ins[nin++] = w;
    if (b) ins[nin++] = b;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    if (ct_function_apply(rms ? &k_rms_fused : &k_ln_fused, ins, nin, &u, &r)) r = NULL;
    *y = ct_keep(r);
    ct_scope_end(s);
    return 1;
}
