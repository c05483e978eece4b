/* init.c -- torch.nn.init: in-place initializers, run under no_grad so
 * parameters that require grad can be filled, drawing from ctorch's
 * generator (ct_uniform_ / ct_normal_).  orthogonal_ uses a Householder QR
 * in double precision written here (there is no QR op). */
#include <math.h>
#include <stdio.h>

#include "../ops/op_table.h"
#include "ctorch/nn.h"

/* ---- helpers ---------------------------------------------------------------- */
static bool need_float_t(const char *op, ct_tensor *t) {
    if (!t) return true;
    if (!ct_dtype_is_floating(ct_get_dtype(t))) {
        ct__error(CT_ERR_DTYPE, "%s: expected a floating point tensor, got %s", op, ct_dtype_name(ct_get_dtype(t)));
        return true;
    }
    return false;
}

/* Runs body under no_grad in a private scope; the tensor t is returned. */
#define INIT_BEGIN                              \
    ct_scope init_scope__ = ct_scope_begin();   \
    bool init_prev__ = ct_set_grad_enabled(false)
#define INIT_END(ok)                            \
    do {                                        \
        bool init_ok__ = (ok);                  \
        ct_set_grad_enabled(init_prev__);       \
        ct_scope_end(init_scope__);             \
        return init_ok__ ? t : NULL;            \
    } while (0)

double ct_init_calculate_gain(const char *nl, double param) {
    if (!nl) nl = "leaky_relu";
    static const char *linear[] = {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                   "conv_transpose2d", "conv_transpose3d", "sigmoid"};
    for (size_t i = 0; i < sizeof linear / sizeof linear[0]; i++)
        if (strcmp(nl, linear[i]) == 0) return 1.0;
    if (strcmp(nl, "tanh") == 0) return 5.0 / 3;
    if (strcmp(nl, "relu") == 0) return sqrt(2.0);
    if (strcmp(nl, "leaky_relu") == 0) {
        double slope = isnan(param) ? 0.01 : param;
        if (isinf(slope)) {
            ct__error(CT_ERR_ARG, "calculate_gain: negative_slope %g is not a valid number", slope);
            return NAN;
        }
        return sqrt(2.0 / (1 + slope * slope));
    }
    if (strcmp(nl, "selu") == 0) return 3.0 / 4; /* value found empirically (torch) */
    ct__error(CT_ERR_ARG, "calculate_gain: unsupported nonlinearity %s", nl);
    return NAN;
}

ct_status ct_init_calculate_fan_in_and_fan_out(ct_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t) return ct__error_status(CT_ERR_NULL, "calculate_fan_in_and_fan_out: NULL tensor");
    if (ct_ndim(t) < 2)
        return ct__error_status(CT_ERR_SHAPE, "calculate_fan_in_and_fan_out: fan in and fan out can not be "
                                "computed for tensor with fewer than 2 dimensions (got %s)", ct__tshape(t));
    int64_t rf = 1;
    for (int i = 2; i < ct_ndim(t); i++) rf *= ct_size(t, i);
    if (fan_in) *fan_in = ct_size(t, 1) * rf;
    if (fan_out) *fan_out = ct_size(t, 0) * rf;
    return CT_OK;
}

/* ---- simple fills ---------------------------------------------------------------- */
ct_tensor *ct_init_uniform_(ct_tensor *t, double a, double b) {
    if (need_float_t("uniform_", t)) return NULL;
    if (!(a <= b)) return ct__error(CT_ERR_ARG, "uniform_: expects a <= b, got a=%g, b=%g", a, b);
    INIT_BEGIN;
    INIT_END(ct_uniform_(t, a, b) != NULL);
}

ct_tensor *ct_init_normal_(ct_tensor *t, double mean, double std) {
    if (need_float_t("normal_", t)) return NULL;
    if (!(std >= 0)) return ct__error(CT_ERR_ARG, "normal_: expects std >= 0.0, got std=%g", std);
    INIT_BEGIN;
    INIT_END(ct_normal_(t, mean, std) != NULL);
}

ct_tensor *ct_init_constant_(ct_tensor *t, double val) {
    CT_NULLCHECK(t);
    INIT_BEGIN;
    INIT_END(ct_fill_(t, val) != NULL);
}
ct_tensor *ct_init_zeros_(ct_tensor *t) { return ct_init_constant_(t, 0.0); }
ct_tensor *ct_init_ones_(ct_tensor *t) { return ct_init_constant_(t, 1.0); }

ct_tensor *ct_init_eye_(ct_tensor *t) {
    CT_NULLCHECK(t);
    if (ct_ndim(t) != 2)
        return ct__error(CT_ERR_SHAPE, "eye_: only tensors with 2 dimensions are supported, got %s", ct__tshape(t));
    if (ct_get_device(t) == CT_META) return t; /* no values to set */
    INIT_BEGIN;
    ct_tensor *z = ct_zeros_on(ct_sizes(t), 2, ct_get_dtype(t), CT_CPU); /* the identity, on the host */
    INIT_END(z && ct_fill_(ct_diagonal(z, 0, 0, 1), 1.0) && ct_copy_(t, z) != NULL);
}

ct_tensor *ct_init_dirac_(ct_tensor *t, int64_t groups) {
    CT_NULLCHECK(t);
    int nd = ct_ndim(t);
    if (nd < 3 || nd > 5)
        return ct__error(CT_ERR_SHAPE, "dirac_: only tensors with 3, 4, or 5 dimensions are supported, got %s",
                         ct__tshape(t));
    if (groups < 1 || ct_size(t, 0) % groups != 0)
        return ct__error(CT_ERR_ARG, "dirac_: dim 0 (%lld) must be divisible by groups (%lld)",
                         (long long)ct_size(t, 0), (long long)groups);
    int64_t per = ct_size(t, 0) / groups;
    int64_t mind = per < ct_size(t, 1) ? per : ct_size(t, 1);
    if (ct_get_device(t) == CT_META) return t; /* no values to set */
    INIT_BEGIN;
    ct_tensor *z = ct_zeros_on(ct_sizes(t), nd, CT_F64, CT_CPU); /* built on the host */
    bool ok = z != NULL;
    if (ok) {
        int64_t st[CT_MAX_DIMS];
        ct__contiguous_strides(ct_sizes(t), nd, st);
        double *p = ct__ptr(z);
        for (int64_t g = 0; g < groups; g++)
            for (int64_t d = 0; d < mind; d++) {
                int64_t off = (g * per + d) * st[0] + d * st[1];
                for (int i = 2; i < nd; i++) off += (ct_size(t, i) / 2) * st[i];
                p[off] = 1.0;
            }
        ok = ct_copy_(t, z) != NULL;
    }
    INIT_END(ok);
}

/* ---- scaled random fills ---------------------------------------------------------- */
ct_tensor *ct_init_xavier_uniform_(ct_tensor *t, double gain) {
    int64_t fi, fo;
    if (need_float_t("xavier_uniform_", t)) return NULL;
    if (ct_init_calculate_fan_in_and_fan_out(t, &fi, &fo) != CT_OK) return NULL;
    double std = gain * sqrt(2.0 / (double)(fi + fo));
    double a = sqrt(3.0) * std;
    return ct_init_uniform_(t, -a, a);
}

ct_tensor *ct_init_xavier_normal_(ct_tensor *t, double gain) {
    int64_t fi, fo;
    if (need_float_t("xavier_normal_", t)) return NULL;
    if (ct_init_calculate_fan_in_and_fan_out(t, &fi, &fo) != CT_OK) return NULL;
    return ct_init_normal_(t, 0.0, gain * sqrt(2.0 / (double)(fi + fo)));
}

/* std of the kaiming initializers, or NAN + error. */
static double kaiming_std(const char *op, ct_tensor *t, double a, ct_fan_mode mode, const char *nl) {
    if (mode != CT_FAN_IN && mode != CT_FAN_OUT) {
        ct__error(CT_ERR_ARG, "%s: mode %d not supported, please use fan_in or fan_out", op, (int)mode);
        return NAN;
    }
    int64_t fi, fo;
    if (ct_init_calculate_fan_in_and_fan_out(t, &fi, &fo) != CT_OK) return NAN;
    double gain = ct_init_calculate_gain(nl, a);
    if (isnan(gain)) return NAN;
    return gain / sqrt((double)(mode == CT_FAN_IN ? fi : fo));
}

ct_tensor *ct_init_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode, const char *nonlinearity) {
    if (need_float_t("kaiming_uniform_", t)) return NULL;
    if (ct_numel(t) == 0) return t; /* torch warns "Initializing zero-element tensors is a no-op" */
    double std = kaiming_std("kaiming_uniform_", t, a, mode, nonlinearity);
    if (isnan(std)) return NULL;
    double bound = sqrt(3.0) * std;
    return ct_init_uniform_(t, -bound, bound);
}

ct_tensor *ct_init_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode, const char *nonlinearity) {
    if (need_float_t("kaiming_normal_", t)) return NULL;
    if (ct_numel(t) == 0) return t;
    double std = kaiming_std("kaiming_normal_", t, a, mode, nonlinearity);
    if (isnan(std)) return NULL;
    return ct_init_normal_(t, 0.0, std);
}

static double norm_cdf(double x) { return (1.0 + erf(x / sqrt(2.0))) / 2.0; }

ct_tensor *ct_init_trunc_normal_(ct_tensor *t, double mean, double std, double a, double b) {
    if (need_float_t("trunc_normal_", t)) return NULL;
    if (!(std > 0) || !(a < b))
        return ct__error(CT_ERR_ARG, "trunc_normal_: expects std > 0 and a < b, got std=%g, a=%g, b=%g", std, a, b);
    double l = norm_cdf((a - mean) / std), u = norm_cdf((b - mean) / std);
    INIT_BEGIN;
    /* uniform in [2l-1, 2u-1], then the inverse CDF of the standard normal */
    bool ok = ct_uniform_(t, 2 * l - 1, 2 * u - 1) && ct_erfinv_(t) && ct_mul_scalar_(t, std * sqrt(2.0)) &&
              ct_add_scalar_(t, mean) && ct_clamp_(t, a, b);
    INIT_END(ok);
}

/* ---- orthogonal ------------------------------------------------------------------- */
/* Reduced QR of the m x n row-major matrix A (m >= n; overwritten) by
 * Householder reflections: writes Q (m x n, row-major) and the signs of
 * diag(R).  V (m x n) holds the reflection vectors.  Q diag(sign(R)) is
 * unique for a full-rank A, whatever the reflections' sign convention. */
static void householder_qr(double *A, int64_t m, int64_t n, double *Q, double *rsign, double *V) {
    for (int64_t k = 0; k < n; k++) {
        double norm = 0;
        for (int64_t i = k; i < m; i++) norm += A[i * n + k] * A[i * n + k];
        norm = sqrt(norm);
        double alpha = A[k * n + k] > 0 ? -norm : norm; /* R[k][k] after the reflection */
        rsign[k] = alpha < 0 ? -1.0 : 1.0;
        double vn = 0;
        for (int64_t i = 0; i < m; i++) {
            double vi = i < k ? 0 : A[i * n + k] - (i == k ? alpha : 0);
            V[i * n + k] = vi;
            vn += vi * vi;
        }
        if (vn == 0) continue; /* already reduced: H = I (V column stays 0) */
        for (int64_t i = k; i < m; i++) V[i * n + k] /= sqrt(vn / 2); /* H = I - v v^T */
        for (int64_t j = k; j < n; j++) {
            double s = 0;
            for (int64_t i = k; i < m; i++) s += V[i * n + k] * A[i * n + j];
            for (int64_t i = k; i < m; i++) A[i * n + j] -= s * V[i * n + k];
        }
    }
    /* Q = H_0 H_1 ... H_{n-1} [I_n; 0] */
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) Q[i * n + j] = i == j ? 1.0 : 0.0;
    for (int64_t k = n - 1; k >= 0; k--)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t i = k; i < m; i++) s += V[i * n + k] * Q[i * n + j];
            for (int64_t i = k; i < m; i++) Q[i * n + j] -= s * V[i * n + k];
        }
}

ct_tensor *ct_init_orthogonal_(ct_tensor *t, double gain) {
    if (need_float_t("orthogonal_", t)) return NULL;
    if (ct_ndim(t) < 2)
        return ct__error(CT_ERR_SHAPE, "orthogonal_: only tensors with 2 or more dimensions are supported, got %s",
                         ct__tshape(t));
    if (ct_numel(t) == 0 || ct_get_device(t) == CT_META) return t; /* meta: nothing to draw or set */
    int64_t rows = ct_size(t, 0), cols = ct_numel(t) / rows;
    bool tr = rows < cols;
    int64_t m = tr ? cols : rows, n = tr ? rows : cols;
    INIT_BEGIN;
    bool ok = false;
    double *A = malloc(sizeof(double) * (size_t)(m * n));
    double *Q = malloc(sizeof(double) * (size_t)(m * n));
    double *sg = malloc(sizeof(double) * (size_t)n);
    double *v = malloc(sizeof(double) * (size_t)(m * n));
    /* host temporaries (ct_randn would follow the default device) */
    ct_tensor *g = ct_normal_(ct_empty_on((int64_t[]){rows, cols}, 2, CT_F64, CT_CPU), 0.0, 1.0);
    if (!A || !Q || !sg || !v) {
        ct__error(CT_ERR_OOM, "orthogonal_: out of memory for a %lld x %lld matrix", (long long)rows, (long long)cols);
    } else if (g) {
        const double *gp = ct__ptr(g);
        for (int64_t i = 0; i < m; i++) /* A = g, or g^T when rows < cols */
            for (int64_t j = 0; j < n; j++) A[i * n + j] = tr ? gp[j * cols + i] : gp[i * cols + j];
        householder_qr(A, m, n, Q, sg, v);
        ct_tensor *q = ct_empty_on((int64_t[]){rows, cols}, 2, CT_F64, CT_CPU);
        if (q) {
            double *qp = ct__ptr(q);
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double val = Q[i * n + j] * sg[j] * gain;
                    if (tr) qp[j * cols + i] = val;
                    else qp[i * cols + j] = val;
                }
            ct_tensor *qv = ct_reshape(q, ct_sizes(t), ct_ndim(t));
            ok = qv && ct_copy_(t, qv) != NULL;
        }
    }
    free(A);
    free(Q);
    free(sg);
    free(v);
    INIT_END(ok);
}
