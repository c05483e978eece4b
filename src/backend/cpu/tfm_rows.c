/* tfm_rows.c (cpu) -- the row kernels of the Transformer fast path, the
 * table ops add_layer_norm and bias_act (src/ops/fused_rows.h), float32
 * over rows of the last dim:
 *   add_layer_norm: s = x + r (r absent: x), y = (s - mean) * rstd * w + b,
 *                   rstd = 1/sqrt(var + eps), mean and biased var of the
 *                   row's s (float accumulation), s kept when wanted
 *   bias_act:       y = act(h + bias), row by row
 * The row loops (moved from src/nn/transformer_rows.h) are built twice:
 * here for baseline x86-64 (names ending _default) and by tfm_rows_avx2.c
 * for AVX2 + FMA (names ending _avx2, a target pragma, as bn.c does); the
 * entry points at the end pick by ct__cpu_cap(), and the op kernels after
 * them (registered by ct__cpu_register_tfm_rows) call those. */
#include <math.h>
#include <string.h>

#include "../../ops/fused_rows.h"
#include "cpu_caps.h"
#include "ew_vec.h"

#ifndef CT_ISA_NAME
#define CT_ISA_NAME(f) f##_default
#define TFM_ENTRY_POINTS 1
#endif

/* one row of add_ln */
static void CT_ISA_NAME(add_ln_row)(const float *xr, const float *rr, float *sr, float *yr, const float *w,
                                  const float *b, float eps, int64_t d) {
    float acc = 0.f;
    if (rr) {
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < d; j++) {
            float v = xr[j] + rr[j];
            sr[j] = v;
            acc += v;
        }
    } else {
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < d; j++) {
            sr[j] = xr[j];
            acc += xr[j];
        }
    }
    float mean = acc / (float)d, var = 0.f;
#pragma omp simd reduction(+ : var)
    for (int64_t j = 0; j < d; j++) {
        float c = sr[j] - mean;
        var += c * c;
    }
    float rstd = 1.0f / sqrtf(var / (float)d + eps);
    if (w && b) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd * w[j] + b[j];
    } else if (w) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd * w[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd;
    }
}

/* one row of bias_act */
static void CT_ISA_NAME(bias_act_row)(float *hr, const float *b, bool gelu, int64_t n) {
    if (gelu) {
        /* the bias, then the vectorized GELU of the elementwise kernels
         * (ew_vec.h): bit for bit gelu(h + b) unfused; scalar libm erff
         * here was 5% of a BERT-base inference step */
        if (b) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) hr[j] += b[j];
        }
        ct__ew_vtab()->unary[CT_VU_GELU](hr, hr, n);
    } else if (b) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) {
            float v = hr[j] + b[j];
            hr[j] = v > 0.f ? v : 0.f;
        }
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) hr[j] = hr[j] > 0.f ? hr[j] : 0.f;
    }
}


/* y = LN(x + r) over rows of d (r may be NULL); sum (may be NULL, may alias
 * x) receives x + r; y may alias x or r. */
void CT_ISA_NAME(ct__tfm_add_ln)(const float *x, const float *r, float *sum, float *y, const float *w,
                                 const float *b, double eps, int64_t T, int64_t d) {
#pragma omp parallel for schedule(static) if (T * d >= 32768)
    for (int64_t t = 0; t < T; t++)
        CT_ISA_NAME(add_ln_row)(x + t * d, r ? r + t * d : NULL, sum ? sum + t * d : y + t * d, y + t * d, w,
                                b, (float)eps, d);
}

/* h = act(h + b) in place (act relu, or gelu when gelu), rows of n. */
void CT_ISA_NAME(ct__tfm_bias_act)(float *h, const float *b, bool gelu, int64_t T, int64_t n) {
#pragma omp parallel for schedule(static) if (T * n >= 32768)
    for (int64_t t = 0; t < T; t++) CT_ISA_NAME(bias_act_row)(h + t * n, b, gelu, n);
}

#ifdef TFM_ENTRY_POINTS
/* ---- entry points: the AVX2 build when the CPU has it -------------------- */
void ct__tfm_add_ln_avx2(const float *x, const float *r, float *sum, float *y, const float *w, const float *b,
                         double eps, int64_t T, int64_t d);
void ct__tfm_bias_act_avx2(float *h, const float *b, bool gelu, int64_t T, int64_t n);

static void tfm_add_ln(const float *x, const float *r, float *sum, float *y, const float *w, const float *b,
                       double eps, int64_t T, int64_t d) {
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__tfm_add_ln_avx2(x, r, sum, y, w, b, eps, T, d);
    else ct__tfm_add_ln_default(x, r, sum, y, w, b, eps, T, d);
}

static void tfm_bias_act(float *h, const float *b, bool gelu, int64_t T, int64_t n) {
    if (ct__cpu_cap() >= CT_CAP_AVX2) ct__tfm_bias_act_avx2(h, b, gelu, T, n);
    else ct__tfm_bias_act_default(h, b, gelu, T, n);
}

static const float *fp(ct_tensor *t) { return t ? (const float *)ct__ptr(t) : NULL; }

/* ---- the op kernels ---------------------------------------------------- */
/* in: x, [r], [w], [b]; out: [sum], y (contiguous f32, rows of x's last dim) */
static ct_status k_add_layer_norm(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                  const ct_args *a) {
    (void)nout;
    (void)nin;
    const ct_p_fused_rows p = a->p.fused_rows;
    int k = 1;
    ct_tensor *x = in[0], *r = p.has_residual ? in[k++] : NULL;
    ct_tensor *w = p.has_weight ? in[k++] : NULL, *b = p.has_bias ? in[k++] : NULL;
    if (b && !w)
        return ct__error_status(CT_ERR_ARG, "add_layer_norm: the kernel needs a weight when it has a bias");
    int64_t d = x->ndim ? x->sizes[x->ndim - 1] : 1, n = ct_numel(x);
    if (n == 0 || d == 0) return CT_OK;
    tfm_add_ln(fp(x), fp(r), out[0] ? (float *)ct__ptr(out[0]) : NULL, (float *)ct__ptr(out[1]), fp(w), fp(b),
               p.eps, n / d, d);
    return CT_OK;
}

/* The activation ops' vectorized loops, row by row (the same bits as add
 * then the op). */
static ct_status bias_act_vec(float *y, const float *h, const float *bias, int64_t m, int64_t n, int act) {
    static const int vu[CT_EWA_COUNT] = {
        [CT_EWA_NONE] = -1, [CT_EWA_RELU] = CT_VU_RELU, [CT_EWA_GELU] = CT_VU_GELU,
        [CT_EWA_GELU_TANH] = CT_VU_GELU_TANH, [CT_EWA_SILU] = CT_VU_SILU,
        [CT_EWA_SIGMOID] = CT_VU_SIGMOID, [CT_EWA_TANH] = CT_VU_TANH};
    const ct_ew_vtab *vt = ct__ew_vtab();
    ct_vb_fn add = vt->binary[CT_VB_ADD];
    ct_vu_fn f = vu[act] >= 0 ? vt->unary[vu[act]] : NULL;
    int64_t grain = act == CT_EWA_NONE || act == CT_EWA_RELU ? CT_GRAIN : CT_GRAIN / 8;
    int par = m > 1 && m * n >= 2 * grain && ct__num_threads() > 1;
#pragma omp parallel for if (par) schedule(static)
    for (int64_t i = 0; i < m; i++) {
        float *row = y + i * n;
        const float *hr = h + i * n;
        if (bias) add(row, hr, bias, n, 1, 1);
        else if (row != hr) memcpy(row, hr, sizeof(float) * (size_t)n);
        if (f) f(row, row, n);
    }
    return CT_OK;
}

/* in: h, [bias]; out: y (h's shape, contiguous f32; may be h) */
static ct_status k_bias_act(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout;
    (void)nin;
    const ct_p_fused_rows p = a->p.fused_rows;
    if (p.act < 0 || p.act >= CT_EWA_COUNT)
        return ct__error_status(CT_ERR_ARG, "bias_act: bad activation %lld", (long long)p.act);
    if (p.row_loops && p.act != CT_EWA_RELU && p.act != CT_EWA_GELU)
        return ct__error_status(CT_ERR_ARG, "bias_act: the row loops take relu or gelu, not activation %lld",
                                (long long)p.act);
    ct_tensor *h = in[0], *bias = p.has_bias ? in[1] : NULL;
    int64_t n = h->ndim ? h->sizes[h->ndim - 1] : 1, numel = ct_numel(h);
    if (numel == 0 || n == 0) return CT_OK;
    float *y = (float *)ct__ptr(out[0]);
    const float *hp = fp(h);
    if (!p.row_loops) return bias_act_vec(y, hp, fp(bias), numel / n, n, (int)p.act);
    if (y != hp) memcpy(y, hp, sizeof(float) * (size_t)numel);
    tfm_bias_act(y, fp(bias), p.act == CT_EWA_GELU, numel / n, n);
    return CT_OK;
}

void ct__cpu_register_tfm_rows(ct_kernel_fn *t) {
    t[CT_OP_add_layer_norm] = k_add_layer_norm;
    t[CT_OP_bias_act] = k_bias_act;
}
#endif
