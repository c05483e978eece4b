/* dropout.c -- F.dropout2d, F.alpha_dropout and the modules Dropout,
 * Dropout2d, AlphaDropout (identity in eval mode).
 *
 * Masks are drawn with ct_bernoulli_ (1 - p) and applied with public ops,
 * so autograd gives the backward (the mask is a constant). */
#include "norm_rnn_impl.h"

static int check_p(const char *op, double p) {
    if (!(p >= 0.0 && p <= 1.0)) {
        ct__error(CT_ERR_ARG, "%s: dropout probability has to be between 0 and 1, but got %g", op, p);
        return -1;
    }
    return 0;
}

static int check_float(const char *op, ct_tensor *x) {
    if (!ct_dtype_is_floating(ct_get_dtype(x))) {
        ct__error(CT_ERR_DTYPE, "%s: expected a floating point input, got %s", op, ct_dtype_name(ct_get_dtype(x)));
        return -1;
    }
    return 0;
}

/* Bernoulli(1 - p) noise shaped like x ([N, C, 1, 1, ...] for feature dropout). */
static ct_tensor *noise_for(ct_tensor *x, double p, bool feature, int batch_dims) {
    int64_t sh[CT_MAX_DIMS];
    int nd = ct_ndim(x);
    memcpy(sh, ct_sizes(x), sizeof(int64_t) * (size_t)nd);
    if (feature)
        for (int i = batch_dims; i < nd; i++) sh[i] = 1;
    ct_tensor *noise = ct_empty_on(sh, nd, ct_get_dtype(x), ct_get_device(x));
    return noise ? ct_bernoulli_(noise, 1.0 - p) : NULL;
}

ct_tensor *ct_dropout2d(ct_tensor *x, double p, bool training) {
    CT_NULLCHECK(x);
    if (check_p("dropout2d", p)) return NULL;
    int nd = ct_ndim(x);
    if (nd != 3 && nd != 4)
        return ct__error(CT_ERR_SHAPE, "dropout2d: expected a 4-D [N, C, H, W] or 3-D [C, H, W] input, got %s",
                         ct__tshape(x));
    if (!training || p == 0.0) return ct__register(ct_retain(x));
    if (check_float("dropout2d", x)) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *r;
    if (p == 1.0) r = ct_mul_scalar(x, 0.0);
    else r = ct_mul(x, ct_div_scalar(noise_for(x, p, true, nd == 4 ? 2 : 1), 1.0 - p));
    return nr_end(s, r);
}

ct_tensor *ct_alpha_dropout(ct_tensor *x, double p, bool training) {
    CT_NULLCHECK(x);
    if (check_p("alpha_dropout", p)) return NULL;
    if (!training || p == 0.0) return ct__register(ct_retain(x));
    if (check_float("alpha_dropout", x)) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *r;
    if (p == 1.0) {
        r = ct_mul_scalar(x, 0.0);
    } else {
        /* ATen's _dropout_impl: a = 1/sqrt((alpha^2 p + 1)(1 - p)),
         * out = x * noise * a + (noise - 1) * alpha * a + alpha * a * p */
        const double alpha = 1.7580993408473766;
        double a = 1.0 / sqrt((alpha * alpha * p + 1.0) * (1.0 - p));
        ct_tensor *noise = noise_for(x, p, false, 0);
        ct_tensor *b = ct_add_scalar(ct_mul_scalar(ct_sub_scalar(noise, 1.0), alpha * a), alpha * a * p);
        r = ct_add(ct_mul(x, ct_mul_scalar(noise, a)), b);
    }
    return nr_end(s, r);
}

/* ---- modules ----------------------------------------------------------------- */
typedef struct {
    ct_module base;
    double p;
} drop_mod;

static char *drop_repr(ct_module *m) {
    char f[64], *r = malloc(100);
    if (!r) return NULL;
    nr_pyfloat(f, sizeof f, ((drop_mod *)m)->p);
    snprintf(r, 100, "p=%s, inplace=False", f);
    return r;
}

static ct_tensor *drop_forward(ct_module *m, ct_tensor *const *in, int n) {
    drop_mod *d = (drop_mod *)m;
    const char *name = m->cls->name;
    if (n != 1) return ct__error(CT_ERR_ARG, "%s: expects one input, got %d", name, n);
    bool tr = ct_module_is_training(m);
    if (name[0] == 'A') return ct_alpha_dropout(in[0], d->p, tr);
    if (!strcmp(name, "Dropout2d")) return ct_dropout2d(in[0], d->p, tr);
    return ct_dropout(in[0], d->p, tr);
}

static const ct_module_class k_drop = {"Dropout", sizeof(drop_mod), drop_forward, drop_repr, NULL, NULL};
static const ct_module_class k_drop2d = {"Dropout2d", sizeof(drop_mod), drop_forward, drop_repr, NULL, NULL};
static const ct_module_class k_alpha = {"AlphaDropout", sizeof(drop_mod), drop_forward, drop_repr, NULL, NULL};

static ct_module *drop_new(const ct_module_class *cls, double p) {
    if (check_p(cls->name, p)) return NULL;
    drop_mod *d = (drop_mod *)ct_module_new(cls);
    if (d) d->p = p;
    return d ? &d->base : NULL;
}

ct_module *ct_dropout_new(double p) { return drop_new(&k_drop, p); }
ct_module *ct_dropout2d_new(double p) { return drop_new(&k_drop2d, p); }
ct_module *ct_alpha_dropout_new(double p) { return drop_new(&k_alpha, p); }
