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
#include <stdlib.h>
#include <string.h>

#include "transformer_impl.h"
#include "../ops/fused_rows.h"

bool ct__tfm_fast_ok(tfm_enc_layer *l, ct_tensor *src, ct_tensor *src_mask, ct_tensor *kpm, bool is_causal) {
    if (!l || !src || ct_module_is_training(&l->base)) return false;
    if (src_mask || is_causal || !l->c.bias) return false;
    /* meta: ct_compile's trace, which then records the fast path's ops
     * (without a padding mask they are all table ops, see ct__tfm_fast_run) */
    ct_device dev = ct_get_device(src);
    if (ct_get_dtype(src) != CT_F32 || ct_ndim(src) != 3 || (dev != CT_CPU && !(dev == CT_META && !kpm)))
        return false;
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
    /* forward AD: the layer's ops, which carry tangents */
    if (ct__fw_on(&src, 1) || ct__fw_on(ps, np)) return false;
    return !grad;
}

/* ---- fused rows --------------------------------------------------------------------- */
/* The residual add + layer norm and the bias + activation run as the table
 * ops add_layer_norm and bias_act (src/ops/fused_rows.h; the CPU's kernels,
 * with their baseline and AVX2 builds, in src/backend/cpu/tfm_rows.c; their
 * composite fallbacks where a device has no kernel). */

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
    int64_t H = c->nhead, hd = c->d_model / H;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    ct_tensor *n1w = ct__tfm_ln_w(l->norm1), *n1b = ct__tfm_ln_b(l->norm1, c->bias);
    ct_tensor *n2w = ct__tfm_ln_w(l->norm2), *n2b = ct__tfm_ln_b(l->norm2, c->bias);
    ct_tensor *Xin = X;
    if (c->norm_first) {
        Xin = ct__add_layer_norm(X, NULL, n1w, n1b, c->eps, NULL, NULL);
        if (!Xin) goto done;
    }
    /* one GEMM for the packed Q, K, V projection */
    ct_tensor *qkv = ct_contiguous(ct_linear(Xin, ct_module_param(&a->base, MHA_IN_W),
                                             ct_module_param(&a->base, MHA_IN_B)));
    ct_tensor *attn = qkv ? ct__tfm_packed_attention(sq, qkv, H, hd) : NULL;
    if (!attn) goto done;
    ct_tensor *proj = ct_contiguous(ct_linear(attn, ct_module_param(a->out_proj, 0), ct_module_param(a->out_proj, 1)));
    if (!proj) goto done;
    ct_tensor *X1 = NULL, *Xf;
    if (c->norm_first) {
        /* X1 = X + proj; Xf = LN2(X1) */
        Xf = ct__add_layer_norm(X, proj, n2w, n2b, c->eps, &X1, NULL);
    } else {
        X1 = Xf = ct__add_layer_norm(X, proj, n1w, n1b, c->eps, NULL, NULL);
    }
    if (!Xf) goto done;
    /* h = act(Xf W1^T + b1): the bias and the activation in one pass, in
     * place (out of place on meta: ct_compile's trace then records the
     * fused op as one node, see fused_rows.c) */
    bool tr = ct_get_device(X) == CT_META;
    ct_tensor *h = ct_contiguous(ct_linear(Xf, ct_module_param(l->linear1, 0), NULL));
    if (h) h = ct__bias_act(h, ct_module_param(l->linear1, 1),
                            c->act == CT_TRANSFORMER_GELU ? CT_EWA_GELU : CT_EWA_RELU, true, tr ? NULL : h);
    if (!h) goto done;
    ct_tensor *y = ct_contiguous(ct_linear(h, ct_module_param(l->linear2, 0), ct_module_param(l->linear2, 1)));
    if (!y) goto done;
    if (c->norm_first) {
        r = ct_add_scaled_(X1, y, 1.0);
    } else {
        r = ct__add_layer_norm(X1, y, n2w, n2b, c->eps, NULL, tr ? NULL : y);
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
    if (!kpm) {
        /* no padding: the rows of X are src's tokens in order (a transpose
         * when not batch_first), moved with ops, so that ct_compile's trace
         * (on meta tensors) records the whole path as table ops */
        ct_tensor *X = ct_reshape(bf ? src : ct_permute(src, (int64_t[]){1, 0, 2}, 3), (int64_t[]){N * L, d}, 2);
        X = X ? ct_contiguous(X) : NULL;
        ct__tfm_seqs su = {N, L, N * L, NULL, NULL, NULL, true};
        for (int i = 0; i < nl && X; i++) {
            ct_scope s2 = ct_scope_begin();
            X = ct_keep(layer_run(layers[i], X, &su));
            ct_scope_end(s2);
        }
        if (X && norm) X = ct_module_forward1(norm, X);
        if (X) X = ct_view(X, (int64_t[]){N, L, d}, 3);
        if (X && !bf) X = ct_permute(X, (int64_t[]){1, 0, 2}, 3);
        out = X ? ct_contiguous(X) : NULL;
        out = ct_keep(out);
        ct_scope_end(s);
        ct_set_grad_enabled(prev);
        return out;
    }
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
