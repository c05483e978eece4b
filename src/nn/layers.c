/* layers.c -- nn.Linear, nn.Bilinear, nn.Identity, nn.Flatten, nn.Unflatten
 * and the activation modules (ReLU ... GLU), plus the formatting and
 * initialization helpers of layers_impl.h.
 *
 * Every forward reads its parameters through ct_module_param (so
 * ct_functional_call can substitute them) and computes with public ops, so
 * autograd records it like any user code. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "layers_impl.h"

/* ---- helpers ------------------------------------------------------------ */
int ct__layers_add_child(ct_module *m, const char *name, ct_module *child, ct_module **slot) {
    if (!child) return -1;
    int r = ct_module_register_module(m, name, child);
    ct_module_release(child);
    if (r < 0) return -1;
    if (slot) *slot = child;
    return 0;
}

char *ct__layers_fmt(const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = k >= 0 ? malloc((size_t)k + 1) : NULL;
    if (s) vsnprintf(s, (size_t)k + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

void ct__layers_pyfloat(double v, char *buf, size_t n) {
    if (isnan(v)) { snprintf(buf, n, "nan"); return; }
    if (isinf(v)) { snprintf(buf, n, v > 0 ? "inf" : "-inf"); return; }
    if (v == 0) { snprintf(buf, n, signbit(v) ? "-0.0" : "0.0"); return; }
    /* the shortest number of significant digits that round-trips */
    char tmp[64];
    int digits = 1;
    for (; digits <= 17; digits++) {
        snprintf(tmp, sizeof tmp, "%.*e", digits - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    int exp10 = atoi(strchr(tmp, 'e') + 1);
    if (exp10 >= -4 && exp10 < 16) {
        int dec = digits - 1 - exp10;
        if (dec < 1) dec = 1;
        snprintf(buf, n, "%.*f", dec, v);
    } else {
        /* mantissa without trailing zeros, exponent with at least 2 digits */
        char mant[40];
        snprintf(mant, sizeof mant, "%.*e", digits - 1, v);
        *strchr(mant, 'e') = 0;
        snprintf(buf, n, "%se%c%02d", mant, exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

void ct__layers_pynum(double v, char *buf, size_t n) {
    if (isfinite(v) && v == floor(v) && fabs(v) < 1e15) snprintf(buf, n, "%lld", (long long)v);
    else ct__layers_pyfloat(v, buf, n);
}

void ct__layers_tuple(const int64_t *v, int n, char *buf, size_t cap) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "(");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (k < cap) snprintf(buf + k, cap - k, n == 1 ? ",)" : ")");
}

void ct__layers_int_or_tuple(const int64_t *v, int n, char *buf, size_t cap) {
    for (int i = 1; i < n; i++)
        if (v[i] != v[0]) { ct__layers_tuple(v, n, buf, cap); return; }
    snprintf(buf, cap, "%lld", (long long)v[0]);
}

static int new_param(ct_module *m, const char *name, const int64_t *shape, int nd, int uniform,
                     double a) {
    ct_scope s = ct_scope_begin();
    int slot = -1;
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *t = ct_empty(shape, nd, ct_get_default_dtype());
    if (t) {
        if (!uniform) t = ct_fill_(t, a);
        else if (a > 0) t = ct_uniform_(t, -a, a);
        else t = ct_zero_(t);
    }
    ct_set_grad_enabled(prev);
    if (t) slot = ct_module_register_parameter(m, name, t);
    ct_scope_end(s);
    return slot;
}
int ct__layers_param_uniform(ct_module *m, const char *name, const int64_t *shape, int nd,
                             double bound) {
    return new_param(m, name, shape, nd, 1, bound);
}
int ct__layers_param_fill(ct_module *m, const char *name, const int64_t *shape, int nd, double fill) {
    return new_param(m, name, shape, nd, 0, fill);
}

static const char *tf(bool b) { return b ? "True" : "False"; }

/* ---- Linear ---------------------------------------------------------------- */
typedef struct { ct_module base; int64_t in, out; } linear_mod;

static ct_tensor *linear_forward(ct_module *m, ct_tensor *const *in, int n) {
    linear_mod *self = (linear_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "Linear: forward takes 1 input, got %d", n);
    ct_tensor *x = in[0];
    if (ct_ndim(x) < 1 || ct_size(x, -1) != self->in)
        return ct__error(CT_ERR_SHAPE, "Linear(in_features=%lld, out_features=%lld): expected an input "
                         "with %lld features in its last dim, got input of size %s",
                         (long long)self->in, (long long)self->out, (long long)self->in, ct__tshape(x));
    return ct_linear(x, ct_module_param(m, 0), ct_module_param(m, 1));
}
static char *linear_repr(ct_module *m) {
    linear_mod *self = (linear_mod *)m;
    return ct__layers_fmt("in_features=%lld, out_features=%lld, bias=%s", (long long)self->in,
                          (long long)self->out, tf(ct_module_param(m, 1) != NULL));
}
static const ct_module_class k_linear = {"Linear", sizeof(linear_mod), linear_forward, linear_repr,
                                         NULL, NULL};

ct_module *ct_linear_new(int64_t in_features, int64_t out_features, bool bias) {
    if (in_features < 0 || out_features < 0)
        return ct__error(CT_ERR_ARG, "Linear: in_features and out_features must be non-negative, got "
                         "in_features=%lld, out_features=%lld", (long long)in_features,
                         (long long)out_features);
    linear_mod *self = (linear_mod *)ct_module_new(&k_linear);
    if (!self) return NULL;
    self->in = in_features;
    self->out = out_features;
    ct_module *m = &self->base;
    double bound = in_features > 0 ? 1.0 / sqrt((double)in_features) : 0;
    if (ct__layers_param_uniform(m, "weight", (int64_t[]){out_features, in_features}, 2, bound) < 0)
        return ct__layers_fail(m);
    if (bias ? ct__layers_param_uniform(m, "bias", &out_features, 1, bound) < 0
             : ct_module_register_parameter(m, "bias", NULL) < 0)
        return ct__layers_fail(m);
    return m;
}

/* ---- Bilinear -------------------------------------------------------------- */
typedef struct { ct_module base; int64_t in1, in2, out; } bilinear_mod;

static ct_tensor *bilinear_forward(ct_module *m, ct_tensor *const *in, int n) {
    bilinear_mod *self = (bilinear_mod *)m;
    if (n != 2) return ct__error(CT_ERR_ARG, "Bilinear: forward takes 2 inputs, got %d", n);
    if (ct_ndim(in[0]) < 1 || ct_size(in[0], -1) != self->in1 || ct_ndim(in[1]) < 1 ||
        ct_size(in[1], -1) != self->in2) {
        char a[256];
        snprintf(a, sizeof a, "%s", ct__tshape(in[0]));
        return ct__error(CT_ERR_SHAPE, "Bilinear(in1_features=%lld, in2_features=%lld): got inputs of "
                         "size %s and %s", (long long)self->in1, (long long)self->in2, a,
                         ct__tshape(in[1]));
    }
    return ct_bilinear(in[0], in[1], ct_module_param(m, 0), ct_module_param(m, 1));
}
static char *bilinear_repr(ct_module *m) {
    bilinear_mod *self = (bilinear_mod *)m;
    return ct__layers_fmt("in1_features=%lld, in2_features=%lld, out_features=%lld, bias=%s",
                          (long long)self->in1, (long long)self->in2, (long long)self->out,
                          tf(ct_module_param(m, 1) != NULL));
}
static const ct_module_class k_bilinear = {"Bilinear", sizeof(bilinear_mod), bilinear_forward,
                                           bilinear_repr, NULL, NULL};

ct_module *ct_bilinear_new(int64_t in1, int64_t in2, int64_t out, bool bias) {
    if (in1 < 0 || in2 < 0 || out < 0)
        return ct__error(CT_ERR_ARG, "Bilinear: feature counts must be non-negative, got %lld, %lld, %lld",
                         (long long)in1, (long long)in2, (long long)out);
    bilinear_mod *self = (bilinear_mod *)ct_module_new(&k_bilinear);
    if (!self) return NULL;
    self->in1 = in1;
    self->in2 = in2;
    self->out = out;
    ct_module *m = &self->base;
    double bound = in1 > 0 ? 1.0 / sqrt((double)in1) : 0;
    if (ct__layers_param_uniform(m, "weight", (int64_t[]){out, in1, in2}, 3, bound) < 0)
        return ct__layers_fail(m);
    if (bias ? ct__layers_param_uniform(m, "bias", &out, 1, bound) < 0
             : ct_module_register_parameter(m, "bias", NULL) < 0)
        return ct__layers_fail(m);
    return m;
}

/* ---- Identity, Flatten, Unflatten ------------------------------------------- */
static ct_tensor *identity_forward(ct_module *m, ct_tensor *const *in, int n) {
    (void)m;
    if (n < 1) return ct__error(CT_ERR_ARG, "Identity: forward takes 1 input, got %d", n);
    /* a new handle (a view) so the result is owned like any op's */
    return ct_expand(in[0], ct_sizes(in[0]), ct_ndim(in[0]));
}
static const ct_module_class k_identity = {"Identity", sizeof(ct_module), identity_forward, NULL,
                                           NULL, NULL};
ct_module *ct_identity_new(void) { return ct_module_new(&k_identity); }

typedef struct { ct_module base; int64_t start, end; } flatten_mod;
static ct_tensor *flatten_forward(ct_module *m, ct_tensor *const *in, int n) {
    flatten_mod *self = (flatten_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "Flatten: forward takes 1 input, got %d", n);
    return ct_flatten(in[0], self->start, self->end);
}
static char *flatten_repr(ct_module *m) {
    flatten_mod *self = (flatten_mod *)m;
    return ct__layers_fmt("start_dim=%lld, end_dim=%lld", (long long)self->start, (long long)self->end);
}
static const ct_module_class k_flatten = {"Flatten", sizeof(flatten_mod), flatten_forward,
                                          flatten_repr, NULL, NULL};
ct_module *ct_flatten_new(int64_t start_dim, int64_t end_dim) {
    flatten_mod *self = (flatten_mod *)ct_module_new(&k_flatten);
    if (!self) return NULL;
    self->start = start_dim;
    self->end = end_dim;
    return &self->base;
}

typedef struct { ct_module base; int64_t dim; int n; int64_t sizes[CT_MAX_DIMS]; } unflatten_mod;
static ct_tensor *unflatten_forward(ct_module *m, ct_tensor *const *in, int n) {
    unflatten_mod *self = (unflatten_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "Unflatten: forward takes 1 input, got %d", n);
    return ct_unflatten(in[0], self->dim, self->sizes, self->n);
}
static char *unflatten_repr(ct_module *m) {
    unflatten_mod *self = (unflatten_mod *)m;
    char t[512];
    ct__layers_tuple(self->sizes, self->n, t, sizeof t);
    return ct__layers_fmt("dim=%lld, unflattened_size=%s", (long long)self->dim, t);
}
static const ct_module_class k_unflatten = {"Unflatten", sizeof(unflatten_mod), unflatten_forward,
                                            unflatten_repr, NULL, NULL};
ct_module *ct_unflatten_new(int64_t dim, const int64_t *sizes, int n) {
    if (!sizes || n < 1 || n > CT_MAX_DIMS)
        return ct__error(CT_ERR_ARG, "Unflatten: unflattened_size must have 1 to %d entries, got %d",
                         CT_MAX_DIMS, sizes ? n : 0);
    unflatten_mod *self = (unflatten_mod *)ct_module_new(&k_unflatten);
    if (!self) return NULL;
    self->dim = dim;
    self->n = n;
    memcpy(self->sizes, sizes, sizeof(int64_t) * (size_t)n);
    return &self->base;
}

/* ---- activations ------------------------------------------------------------ */
/* One struct for all: a, b are the float arguments, dim the int one. */
typedef struct { ct_module base; double a, b; int64_t dim; } act_mod;

static ct_tensor *act_check(const char *name, int n) {
    return ct__error(CT_ERR_ARG, "%s: forward takes 1 input, got %d", name, n);
}
#define ACT_FORWARD(fname, Name, expr)                                                  \
    static ct_tensor *fname(ct_module *m, ct_tensor *const *in, int n) {               \
        act_mod *self = (act_mod *)m;                                                   \
        (void)self;                                                                     \
        if (n != 1) return act_check(Name, n);                                          \
        ct_tensor *x = in[0];                                                           \
        return expr;                                                                    \
    }
#define ACT_CLASS(kname, Name, fname, rname) \
    static const ct_module_class kname = {Name, sizeof(act_mod), fname, rname, NULL, NULL};

static ct_module *act_new(const ct_module_class *cls, double a, double b, int64_t dim) {
    act_mod *self = (act_mod *)ct_module_new(cls);
    if (!self) return NULL;
    self->a = a;
    self->b = b;
    self->dim = dim;
    return &self->base;
}

static char *repr_a(const char *key, double v) {
    char num[64];
    ct__layers_pyfloat(v, num, sizeof num);
    return key ? ct__layers_fmt("%s=%s", key, num) : ct__layers_fmt("%s", num);
}
static char *repr_negative_slope(ct_module *m) { return repr_a("negative_slope", ((act_mod *)m)->a); }
static char *repr_alpha(ct_module *m) { return repr_a("alpha", ((act_mod *)m)->a); }
static char *repr_lambd(ct_module *m) { return repr_a(NULL, ((act_mod *)m)->a); }
static char *repr_dim(ct_module *m) { return ct__layers_fmt("dim=%lld", (long long)((act_mod *)m)->dim); }
static char *repr_softplus(ct_module *m) {
    char a[64], b[64];
    ct__layers_pynum(((act_mod *)m)->a, a, sizeof a);
    ct__layers_pynum(((act_mod *)m)->b, b, sizeof b);
    return ct__layers_fmt("beta=%s, threshold=%s", a, b);
}
static char *repr_hardtanh(ct_module *m) {
    char a[64], b[64];
    ct__layers_pyfloat(((act_mod *)m)->a, a, sizeof a);
    ct__layers_pyfloat(((act_mod *)m)->b, b, sizeof b);
    return ct__layers_fmt("min_val=%s, max_val=%s", a, b);
}
static char *repr_gelu(ct_module *m) {
    return ct__layers_fmt("approximate='%s'", ((act_mod *)m)->dim == CT_GELU_TANH ? "tanh" : "none");
}

ACT_FORWARD(f_relu, "ReLU", ct_relu(x))
ACT_FORWARD(f_relu6, "ReLU6", ct_relu6(x))
ACT_FORWARD(f_leaky, "LeakyReLU", ct_leaky_relu(x, self->a))
ACT_FORWARD(f_elu, "ELU", ct_elu(x, self->a))
ACT_FORWARD(f_selu, "SELU", ct_selu(x))
ACT_FORWARD(f_celu, "CELU", ct_celu(x, self->a))
ACT_FORWARD(f_gelu, "GELU", ct_gelu(x, (ct_gelu_approx)self->dim))
ACT_FORWARD(f_silu, "SiLU", ct_silu(x))
ACT_FORWARD(f_mish, "Mish", ct_mish(x))
ACT_FORWARD(f_softplus, "Softplus", ct_softplus(x, self->a, self->b))
ACT_FORWARD(f_softsign, "Softsign", ct_softsign(x))
ACT_FORWARD(f_hardtanh, "Hardtanh", ct_hardtanh(x, self->a, self->b))
ACT_FORWARD(f_hardsigmoid, "Hardsigmoid", ct_hardsigmoid(x))
ACT_FORWARD(f_hardswish, "Hardswish", ct_hardswish(x))
ACT_FORWARD(f_hardshrink, "Hardshrink", ct_hardshrink(x, self->a))
ACT_FORWARD(f_softshrink, "Softshrink", ct_softshrink(x, self->a))
ACT_FORWARD(f_sigmoid, "Sigmoid", ct_sigmoid(x))
ACT_FORWARD(f_tanh, "Tanh", ct_tanh(x))
ACT_FORWARD(f_logsigmoid, "LogSigmoid", ct_logsigmoid(x))
ACT_FORWARD(f_softmax, "Softmax", ct_softmax(x, self->dim))
ACT_FORWARD(f_log_softmax, "LogSoftmax", ct_log_softmax(x, self->dim))
ACT_FORWARD(f_glu, "GLU", ct_glu(x, self->dim))

ACT_CLASS(k_relu, "ReLU", f_relu, NULL)
ACT_CLASS(k_relu6, "ReLU6", f_relu6, NULL)
ACT_CLASS(k_leaky, "LeakyReLU", f_leaky, repr_negative_slope)
ACT_CLASS(k_elu, "ELU", f_elu, repr_alpha)
ACT_CLASS(k_selu, "SELU", f_selu, NULL)
ACT_CLASS(k_celu, "CELU", f_celu, repr_alpha)
ACT_CLASS(k_gelu, "GELU", f_gelu, repr_gelu)
ACT_CLASS(k_silu, "SiLU", f_silu, NULL)
ACT_CLASS(k_mish, "Mish", f_mish, NULL)
ACT_CLASS(k_softplus, "Softplus", f_softplus, repr_softplus)
ACT_CLASS(k_softsign, "Softsign", f_softsign, NULL)
ACT_CLASS(k_hardtanh, "Hardtanh", f_hardtanh, repr_hardtanh)
ACT_CLASS(k_hardsigmoid, "Hardsigmoid", f_hardsigmoid, NULL)
ACT_CLASS(k_hardswish, "Hardswish", f_hardswish, NULL)
ACT_CLASS(k_hardshrink, "Hardshrink", f_hardshrink, repr_lambd)
ACT_CLASS(k_softshrink, "Softshrink", f_softshrink, repr_lambd)
ACT_CLASS(k_sigmoid, "Sigmoid", f_sigmoid, NULL)
ACT_CLASS(k_tanh, "Tanh", f_tanh, NULL)
ACT_CLASS(k_logsigmoid, "LogSigmoid", f_logsigmoid, NULL)
ACT_CLASS(k_softmax, "Softmax", f_softmax, repr_dim)
ACT_CLASS(k_log_softmax, "LogSoftmax", f_log_softmax, repr_dim)
ACT_CLASS(k_glu, "GLU", f_glu, repr_dim)

ct_module *ct_relu_new(void) { return act_new(&k_relu, 0, 0, 0); }
ct_module *ct_relu6_new(void) { return act_new(&k_relu6, 0, 0, 0); }
ct_module *ct_leaky_relu_new(double negative_slope) { return act_new(&k_leaky, negative_slope, 0, 0); }
ct_module *ct_elu_new(double alpha) { return act_new(&k_elu, alpha, 0, 0); }
ct_module *ct_selu_new(void) { return act_new(&k_selu, 0, 0, 0); }
ct_module *ct_celu_new(double alpha) {
    if (alpha == 0) return ct__error(CT_ERR_ARG, "CELU: ZeroDivisionError: alpha cannot be 0");
    return act_new(&k_celu, alpha, 0, 0);
}
ct_module *ct_gelu_new(ct_gelu_approx approximate) {
    if (approximate != CT_GELU_NONE && approximate != CT_GELU_TANH)
        return ct__error(CT_ERR_ARG, "GELU: approximate must be CT_GELU_NONE or CT_GELU_TANH, got %d",
                         (int)approximate);
    return act_new(&k_gelu, 0, 0, approximate);
}
ct_module *ct_silu_new(void) { return act_new(&k_silu, 0, 0, 0); }
ct_module *ct_mish_new(void) { return act_new(&k_mish, 0, 0, 0); }
ct_module *ct_softplus_new(double beta, double threshold) {
    return act_new(&k_softplus, beta, threshold, 0);
}
ct_module *ct_softsign_new(void) { return act_new(&k_softsign, 0, 0, 0); }
ct_module *ct_hardtanh_new(double min_val, double max_val) {
    if (!(max_val > min_val))
        return ct__error(CT_ERR_ARG, "Hardtanh: max_val (%g) must be greater than min_val (%g)", max_val,
                         min_val);
    return act_new(&k_hardtanh, min_val, max_val, 0);
}
ct_module *ct_hardsigmoid_new(void) { return act_new(&k_hardsigmoid, 0, 0, 0); }
ct_module *ct_hardswish_new(void) { return act_new(&k_hardswish, 0, 0, 0); }
ct_module *ct_hardshrink_new(double lambd) { return act_new(&k_hardshrink, lambd, 0, 0); }
ct_module *ct_softshrink_new(double lambd) {
    if (lambd < 0)
        return ct__error(CT_ERR_ARG, "Softshrink: lambda must be greater or equal to 0, but found to be %g",
                         lambd);
    return act_new(&k_softshrink, lambd, 0, 0);
}
ct_module *ct_sigmoid_new(void) { return act_new(&k_sigmoid, 0, 0, 0); }
ct_module *ct_tanh_new(void) { return act_new(&k_tanh, 0, 0, 0); }
ct_module *ct_logsigmoid_new(void) { return act_new(&k_logsigmoid, 0, 0, 0); }
ct_module *ct_softmax_new(int64_t dim) { return act_new(&k_softmax, 0, 0, dim); }
ct_module *ct_log_softmax_new(int64_t dim) { return act_new(&k_log_softmax, 0, 0, dim); }
ct_module *ct_glu_new(int64_t dim) { return act_new(&k_glu, 0, 0, dim); }

/* ---- PReLU ------------------------------------------------------------------- */
typedef struct { ct_module base; int64_t num; } prelu_mod;
static ct_tensor *prelu_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return act_check("PReLU", n);
    return ct_prelu(in[0], ct_module_param(m, 0));
}
static char *prelu_repr(ct_module *m) {
    return ct__layers_fmt("num_parameters=%lld", (long long)((prelu_mod *)m)->num);
}
static const ct_module_class k_prelu = {"PReLU", sizeof(prelu_mod), prelu_forward, prelu_repr, NULL,
                                        NULL};
ct_module *ct_prelu_new(int64_t num_parameters, double init) {
    if (num_parameters < 1)
        return ct__error(CT_ERR_ARG, "PReLU: num_parameters must be positive, got %lld",
                         (long long)num_parameters);
    prelu_mod *self = (prelu_mod *)ct_module_new(&k_prelu);
    if (!self) return NULL;
    self->num = num_parameters;
    if (ct__layers_param_fill(&self->base, "weight", &num_parameters, 1, init) < 0)
        return ct__layers_fail(&self->base);
    return &self->base;
}
