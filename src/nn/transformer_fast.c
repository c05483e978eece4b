/* transformer_fast.c -- the BetterTransformer inference fast path of
 * TransformerEncoderLayer / TransformerEncoder (torch's
 * _transformer_encoder_layer_fwd and its nested-tensor path), float32.
 *
 * Tokens live as rows of one contiguous [T, d] matrix, sequence after
 * sequence.  Per layer (post-norm; norm_first moves the norms in front):
 *
 *   qkv  = X Win^T + bin                  one GEMM for Q, K and V   [T, 3d]
 *   attn = SDPA(q, k, v) per sequence     (batched when nothing is padded)
 *   X1   = LN1(X + attn Wo^T + bo)        residual + layer norm: one pass
 *   h    = act(X1 W1^T + b1)              bias + activation: one pass after the GEMM
 *   X2   = LN2(X1 + h W2^T + b2)          residual + layer norm: one pass
 *
 * With a key_padding_mask the encoder (pack) keeps only the real tokens:
 * T = number of real tokens, each sequence attends over its own rows, and
 * the result has zeros at the padded positions (torch's
 * to_padded_tensor(0.0)), before the final norm, as in torch.  Without packing (a single layer), every token is
 * a query and the keys of a sequence are its real tokens: the slow path's
 * result, padded positions included.  Runs with grad mode off: nothing is
 * recorded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transformer_impl.h"

bool ct__tfm_fast_ok(tfm_enc_layer *l, ct_tensor *src, ct_tensor *src_mask, ct_tensor *kpm, bool is_causal) {
    if (!l || !src || ct_module_is_training(&l->base)) return false;
    if (src_mask || is_causal || !l->c.bias) return false;
    if (ct_get_dtype(src) != CT_F32 || ct_ndim(src) != 3 || ct_get_device(src) != CT_CPU) return false;
    if (ct_size(src, -1) != l->c.d_model || ct_numel(src) == 0) return false;
    if (kpm) {
        if (ct_get_dtype(kpm) != CT_BOOL || ct_ndim(kpm) != 2 || ct_get_device(kpm) != CT_CPU) return false;
        /* a sequence with no real token: the slow path's NaN, not ours */
        ct_scope s = ct_scope_begin();
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *allpad = ct_any(ct_all(kpm, (int64_t[]){1}, 1, false), NULL, 0, false);
        bool bad = !allpad || ct_item(allpad) != 0;
        ct_set_grad_enabled(prev);
        ct_scope_end(s);
        if (bad) return false;
    }
    bool grad = ct_is_grad_enabled() && ct_requires_grad(src);
    ct_tensor *ps[64];
    int np = ct_module_named_parameters(&l->base, NULL, ps, 64);
    if (np > 64) return false;
    for (int i = 0; i < np; i++) {
        if (ct_get_dtype(ps[i]) != CT_F32 || !ct_is_contiguous(ps[i]) || !ct__has_host_data(ps[i])) return false;
        if (ct_is_grad_enabled() && ct_requires_grad(ps[i])) grad = true;
    }
    return !grad;
}

/* ---- fused kernels ------------------------------------------------------------------ */
/* The row loops are built for baseline x86-64 and for AVX2+FMA (the second
 * inclusion under a target pragma) and picked once by the CPU's dispatch
 * level (ct_cpu_capability); the OpenMP loops call them per row. */
#define TFM_ROW(f) f##_base
#include "transformer_rows.h"
#undef TFM_ROW
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TFM_ROW(f) f##_avx2
#include "transformer_rows.h"
#undef TFM_ROW
#pragma GCC pop_options
#define TFM_HAVE_AVX2 1
#elif defined(__x86_64__) && defined(__clang__)
/* clang ignores the GCC target pragma; its attribute pragma does the same */
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#define TFM_ROW(f) f##_avx2
#include "transformer_rows.h"
#undef TFM_ROW
#pragma clang attribute pop
#define TFM_HAVE_AVX2 1
#endif

static bool rows_avx2(void) {
#ifdef TFM_HAVE_AVX2
    static int v = -1; /* benign race: every thread computes the same value */
    if (v < 0) v = strcmp(ct_cpu_capability(), "default") != 0;
    return v;
#else
    return false;
#endif
}

static void add_ln_row(const float *xr, const float *rr, float *sr, float *yr, const float *w, const float *b,
                       float eps, int64_t d) {
#ifdef TFM_HAVE_AVX2
    if (rows_avx2()) {
        add_ln_row_avx2(xr, rr, sr, yr, w, b, eps, d);
        return;
    }
#endif
    add_ln_row_base(xr, rr, sr, yr, w, b, eps, d);
}

static void bias_act_row(float *hr, const float *b, bool gelu, int64_t n) {
#ifdef TFM_HAVE_AVX2
    if (rows_avx2()) {
        bias_act_row_avx2(hr, b, gelu, n);
        return;
    }
#endif
    bias_act_row_base(hr, b, gelu, n);
}

/* y = LN(x + r) over rows of d (r may be NULL); sum (may be NULL, may alias
 * x) receives x + r. */
static void add_ln(const float *x, const float *r, float *sum, float *y, const float *w, const float *b,
                   double eps, int64_t T, int64_t d) {
#pragma omp parallel for schedule(static) if (T * d >= 32768)
    for (int64_t t = 0; t < T; t++)
        add_ln_row(x + t * d, r ? r + t * d : NULL, sum ? sum + t * d : y + t * d, y + t * d, w, b, (float)eps,
                   d);
}

void ct__tfm_add_ln(const float *x, const float *r, float *sum, float *y, const float *w, const float *b,
                    double eps, int64_t T, int64_t d) {
    add_ln(x, r, sum, y, w, b, eps, T, d);
}

/* h = act(h + b) in place, rows of n. */
static void bias_act(float *h, const float *b, bool gelu, int64_t T, int64_t n) {
#pragma omp parallel for schedule(static) if (T * n >= 32768)
    for (int64_t t = 0; t < T; t++) bias_act_row(h + t * n, b, gelu, n);
}

/* x += r */
static void add_inplace(float *x, const float *r, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) x[i] += r[i];
}

static float *fp(ct_tensor *t) { return t ? (float *)ct_data_ptr(t) : NULL; }


/* Attention of every sequence over its own rows of the packed [T, 3, H, hd]
 * QKV projection (contiguous float32): returns attn [T, H*hd] (contiguous,
 * in the caller's scope) or NULL.  When nothing is padded: one batched SDPA
 * call on strided views of qkv, whose [N, L, H, hd]-stored output already is
 * attn (no copies); else one call per sequence (over its real keys in dense
 * mode) writing its rows of attn. */
ct_tensor *ct__tfm_packed_attention(const ct__tfm_seqs *sq, ct_tensor *qkv, int64_t H, int64_t hd) {
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    if (sq->uniform) {
        ct_tensor *v5 = ct_permute(ct_view(qkv, (int64_t[]){sq->N, sq->L, 3, H, hd}, 5),
                                   (int64_t[]){2, 0, 3, 1, 4}, 5); /* [3, N, H, L, hd] */
        ct_tensor *o = ct_scaled_dot_product_attention(ct_select(v5, 0, 0), ct_select(v5, 0, 1),
                                                       ct_select(v5, 0, 2), NULL, 0.0, false, 0.0, false);
        /* a view when o is stored [N, L, H, hd] (the fused kernels), else a copy */
        r = ct_reshape(ct_permute(o, (int64_t[]){0, 2, 1, 3}, 4), (int64_t[]){sq->T, H * hd}, 2);
    } else {
        ct_tensor *attn = ct_empty_on((int64_t[]){sq->T, H * hd}, 2, CT_F32, CT_CPU);
        if (!attn) goto done;
        for (int64_t n = 0; n < sq->N; n++) {
            if (sq->cnt[n] == 0) continue;
            ct_scope s2 = ct_scope_begin();
            ct_tensor *rows = ct_permute(ct_view(ct_narrow(qkv, 0, sq->off[n], sq->cnt[n]),
                                                 (int64_t[]){sq->cnt[n], 3, H, hd}, 4),
                                         (int64_t[]){1, 2, 0, 3}, 4); /* [3, H, cnt, hd] */
            ct_tensor *q = ct_select(rows, 0, 0), *k = ct_select(rows, 0, 1), *v = ct_select(rows, 0, 2);
            if (sq->keys && sq->keys[n]) {
                k = ct_index_select(k, 1, sq->keys[n]);
                v = ct_index_select(v, 1, sq->keys[n]);
            }
            ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, 0.0, false);
            ct_tensor *dst = ct_view(ct_narrow(attn, 0, sq->off[n], sq->cnt[n]), (int64_t[]){sq->cnt[n], H, hd}, 3);
            bool ok = ct_copy_(dst, ct_permute(o, (int64_t[]){1, 0, 2}, 3)) != NULL;
            ct_scope_end(s2);
            if (!ok) goto done;
        }
        r = attn;
    }
    if (r && !ct_is_contiguous(r)) r = ct_contiguous(r);
done:
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* One encoder layer on X [T, d] (contiguous, owned).  Returns the new X
 * (in the caller's scope) or NULL. */
static ct_tensor *layer_run(tfm_enc_layer *l, ct_tensor *X, const ct__tfm_seqs *sq) {
    const tfm_cfg *c = &l->c;
    tfm_mha *a = (tfm_mha *)l->self_attn;
    int64_t T = sq->T, d = c->d_model, H = c->nhead, hd = d / H, ff = c->dim_ff;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    const float *n1w = fp(ct__tfm_ln_w(l->norm1)), *n1b = fp(ct__tfm_ln_b(l->norm1, c->bias));
    const float *n2w = fp(ct__tfm_ln_w(l->norm2)), *n2b = fp(ct__tfm_ln_b(l->norm2, c->bias));
    ct_tensor *Xin = X;
    if (c->norm_first) {
        Xin = ct_empty_on((int64_t[]){T, d}, 2, CT_F32, CT_CPU);
        if (!Xin) goto done;
        add_ln(fp(X), NULL, NULL, fp(Xin), n1w, n1b, c->eps, T, d);
    }
    /* one GEMM for the packed Q, K, V projection */
    ct_tensor *qkv = ct_contiguous(ct_linear(Xin, ct_module_param(&a->base, MHA_IN_W),
                                             ct_module_param(&a->base, MHA_IN_B)));
    ct_tensor *attn = qkv ? ct__tfm_packed_attention(sq, qkv, H, hd) : NULL;
    if (!attn) goto done;
    ct_tensor *proj = ct_contiguous(ct_linear(attn, ct_module_param(a->out_proj, 0), ct_module_param(a->out_proj, 1)));
    ct_tensor *X1 = ct_empty_on((int64_t[]){T, d}, 2, CT_F32, CT_CPU), *Xf;
    if (!proj || !X1) goto done;
    if (c->norm_first) {
        /* X1 = X + proj; Xf = LN2(X1) */
        Xf = ct_empty_on((int64_t[]){T, d}, 2, CT_F32, CT_CPU);
        if (!Xf) goto done;
        add_ln(fp(X), fp(proj), fp(X1), fp(Xf), n2w, n2b, c->eps, T, d);
    } else {
        add_ln(fp(X), fp(proj), NULL, fp(X1), n1w, n1b, c->eps, T, d);
        Xf = X1;
    }
    ct_tensor *h = ct_contiguous(ct_linear(Xf, ct_module_param(l->linear1, 0), NULL));
    if (!h) goto done;
    bias_act(fp(h), fp(ct_module_param(l->linear1, 1)), c->act == CT_TRANSFORMER_GELU, T, ff);
    ct_tensor *y = ct_contiguous(ct_linear(h, ct_module_param(l->linear2, 0), ct_module_param(l->linear2, 1)));
    if (!y) goto done;
    if (c->norm_first) {
        add_inplace(fp(X1), fp(y), T * d);
        r = X1;
    } else {
        add_ln(fp(X1), fp(y), NULL, fp(y), n2w, n2b, c->eps, T, d);
        r = y;
    }
done:
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

ct_tensor *ct__tfm_fast_run(tfm_enc_layer *const *layers, int nl, ct_module *norm, ct_tensor *src, ct_tensor *kpm,
                            bool pack) {
    const tfm_cfg *c = &layers[0]->c;
    bool bf = c->batch_first;
    int64_t d = c->d_model, N = ct_size(src, bf ? 0 : 1), L = ct_size(src, bf ? 1 : 0);
    bool prev = ct_set_grad_enabled(false);
    ct_scope s = ct_scope_begin();
    ct_tensor *out = NULL;
    ct__tfm_seqs sq = {N, L, 0, calloc((size_t)N + 1, sizeof(int64_t)), calloc((size_t)N + 1, sizeof(int64_t)), NULL,
               !kpm};
    int64_t *rowsrc = NULL; /* packed row -> row of src viewed as [*, d] */
    if (!sq.off || !sq.cnt) {
        ct__error(CT_ERR_OOM, "TransformerEncoder: out of memory");
        goto done;
    }
    ct_tensor *xs = ct_contiguous(src);
    ct_tensor *km = kpm ? ct_contiguous(kpm) : NULL;
    if (!xs || (kpm && !km)) goto done;
    const uint8_t *mk = km ? (const uint8_t *)ct_data_ptr(km) : NULL;
    for (int64_t n = 0; n < N; n++) {
        int64_t cnt = L;
        if (pack) {
            cnt = 0;
            for (int64_t t = 0; t < L; t++) cnt += !mk[n * L + t];
        }
        sq.cnt[n] = cnt;
        sq.off[n + 1] = sq.off[n] + cnt;
    }
    sq.T = sq.off[N];
    rowsrc = malloc(sizeof(int64_t) * (size_t)(sq.T > 0 ? sq.T : 1));
    if (!rowsrc) {
        ct__error(CT_ERR_OOM, "TransformerEncoder: out of memory");
        goto done;
    }
    for (int64_t n = 0, r = 0; n < N; n++)
        for (int64_t t = 0; t < L; t++) {
            if (pack && mk[n * L + t]) continue;
            rowsrc[r++] = bf ? n * L + t : t * N + n;
        }
    if (kpm && !pack) {
        sq.keys = calloc((size_t)N, sizeof(ct_tensor *));
        if (!sq.keys) {
            ct__error(CT_ERR_OOM, "TransformerEncoder: out of memory");
            goto done;
        }
        int64_t *buf = malloc(sizeof(int64_t) * (size_t)L);
        if (!buf) {
            ct__error(CT_ERR_OOM, "TransformerEncoder: out of memory");
            goto done;
        }
        for (int64_t n = 0; n < N; n++) {
            int64_t k = 0;
            for (int64_t t = 0; t < L; t++)
                if (!mk[n * L + t]) buf[k++] = t;
            if (k < L) sq.keys[n] = ct_from_array(buf, &k, 1, CT_I64);
        }
        free(buf);
    }
    ct_tensor *X = ct_empty_on((int64_t[]){sq.T, d}, 2, CT_F32, CT_CPU);
    if (!X) goto done;
    const float *sp = fp(xs);
    float *xp = fp(X);
#pragma omp parallel for schedule(static) if (sq.T * d >= 65536)
    for (int64_t r = 0; r < sq.T; r++) memcpy(xp + r * d, sp + rowsrc[r] * d, sizeof(float) * (size_t)d);
    for (int i = 0; i < nl && X; i++) {
        ct_scope s2 = ct_scope_begin();
        X = ct_keep(layer_run(layers[i], X, &sq));
        ct_scope_end(s2);
    }
    /* torch: to_padded_tensor(0.0) first, then the final norm (so padded
     * positions hold norm(0), the norm's bias) */
    if (X && norm && !pack) X = ct_contiguous(ct_module_forward1(norm, X));
    if (!X) goto done;
    out = pack ? ct_zeros_on(ct_sizes(src), 3, CT_F32, CT_CPU) : ct_empty_on(ct_sizes(src), 3, CT_F32, CT_CPU);
    if (!out) goto done;
    float *op = fp(out);
    xp = fp(X);
#pragma omp parallel for schedule(static) if (sq.T * d >= 65536)
    for (int64_t r = 0; r < sq.T; r++) memcpy(op + rowsrc[r] * d, xp + r * d, sizeof(float) * (size_t)d);
    if (norm && pack) out = ct_module_forward1(norm, out);
done:
    out = ct_keep(out);
    ct_scope_end(s);
    ct_set_grad_enabled(prev);
    free(sq.off);
    free(sq.cnt);
    free(sq.keys);
    free(rowsrc);
    return out;
}
