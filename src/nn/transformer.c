/* transformer.c -- torch.nn.MultiheadAttention, TransformerEncoderLayer,
 * TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and
 * Transformer, written with public ops (so autograd differentiates them),
 * following torch.nn.functional.multi_head_attention_forward and
 * torch/nn/modules/transformer.py step by step.  The encoder's inference
 * fast path lives in transformer_fast.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers_impl.h"
#include "transformer_impl.h"

static _Thread_local bool tl_fast, tl_packed;
void ct__tfm_set_last(bool fast, bool packed) { tl_fast = fast, tl_packed = packed; }
bool ct_transformer_last_fast_path(bool *packed) {
    if (packed) *packed = tl_packed;
    return tl_fast;
}


static ct_module *fail(ct_module *m) {
    ct_module_release(m);
    return NULL;
}

ct_tensor *ct__tfm_ln_w(ct_module *ln) { return ct_module_param(ln, 0); }
ct_tensor *ct__tfm_ln_b(ct_module *ln, bool bias) { return bias ? ct_module_param(ln, 1) : NULL; }

/* A float mask from an nn.MultiheadAttention mask: bool true -> -inf. */
static ct_tensor *canon_mask(ct_tensor *m, ct_dtype dt, const char *fn, const char *name) {
    if (!m) return NULL;
    ct_dtype mt = ct_get_dtype(m);
    if (mt == CT_BOOL) return ct_masked_fill(ct_zeros_on(ct_sizes(m), ct_ndim(m), dt, ct_get_device(m)), m, -INFINITY);
    if (ct_dtype_is_floating(mt)) return ct_to_dtype(m, dt);
    return ct__error(CT_ERR_DTYPE, "%s: only bool and floating types of %s are supported, got %s", fn,
                     name, ct_dtype_name(mt));
}

ct_tensor *ct_generate_square_subsequent_mask(int64_t sz) {
    if (sz < 0) return ct__error(CT_ERR_ARG, "generate_square_subsequent_mask: sz must be >= 0, got %lld",
                                 (long long)sz);
    ct_scope s = ct_scope_begin();
    ct_tensor *r = ct_triu(ct_full((int64_t[]){sz, sz}, 2, -INFINITY, ct_get_default_dtype()), 1);
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* ======================================================================
 * MultiheadAttention
 * ====================================================================== */
static ct_status mha_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout);
static const ct_module_class k_mha = {"MultiheadAttention", sizeof(tfm_mha), NULL, NULL, NULL,
                                      mha_forward_multi};

ct_module *ct_multihead_attention_new(int64_t E, int64_t H, double dropout, bool bias, bool add_bias_kv,
                                      bool add_zero_attn, int64_t kdim, int64_t vdim, bool batch_first) {
    if (E <= 0 || H <= 0)
        return ct__error(CT_ERR_ARG, "MultiheadAttention: embed_dim and num_heads must be > 0, got %lld, %lld",
                         (long long)E, (long long)H);
    if (E % H)
        return ct__error(CT_ERR_ARG, "MultiheadAttention: embed_dim must be divisible by num_heads, got "
                         "embed_dim=%lld, num_heads=%lld", (long long)E, (long long)H);
    if (!(dropout >= 0 && dropout <= 1))
        return ct__error(CT_ERR_ARG, "MultiheadAttention: dropout must be in [0, 1], got %g", dropout);
    if (kdim <= 0) kdim = E;
    if (vdim <= 0) vdim = E;
    tfm_mha *a = (tfm_mha *)ct_module_new(&k_mha);
    if (!a) return NULL;
    ct_module *m = &a->base;
    a->embed_dim = E, a->num_heads = H, a->head_dim = E / H, a->kdim = kdim, a->vdim = vdim;
    a->dropout = dropout, a->bias = bias, a->add_bias_kv = add_bias_kv, a->add_zero_attn = add_zero_attn;
    a->batch_first = batch_first;
    a->same_dims = kdim == E && vdim == E;
    ct_dtype dt = ct_get_default_dtype();
    ct_scope s = ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    bool ok = true;
#define REG(name, t) (ok = ok && ct_module_register_parameter(m, name, t) >= 0)
    if (a->same_dims) {
        REG("in_proj_weight", ct_init_xavier_uniform_(ct_empty((int64_t[]){3 * E, E}, 2, dt), 1.0));
        REG("q_proj_weight", NULL), REG("k_proj_weight", NULL), REG("v_proj_weight", NULL);
    } else {
        REG("in_proj_weight", NULL);
        REG("q_proj_weight", ct_init_xavier_uniform_(ct_empty((int64_t[]){E, E}, 2, dt), 1.0));
        REG("k_proj_weight", ct_init_xavier_uniform_(ct_empty((int64_t[]){E, kdim}, 2, dt), 1.0));
        REG("v_proj_weight", ct_init_xavier_uniform_(ct_empty((int64_t[]){E, vdim}, 2, dt), 1.0));
    }
    REG("in_proj_bias", bias ? ct_zeros((int64_t[]){3 * E}, 1, dt) : NULL);
    if (add_bias_kv) {
        REG("bias_k", ct_init_xavier_normal_(ct_empty((int64_t[]){1, 1, E}, 3, dt), 1.0));
        REG("bias_v", ct_init_xavier_normal_(ct_empty((int64_t[]){1, 1, E}, 3, dt), 1.0));
    } else {
        REG("bias_k", NULL), REG("bias_v", NULL);
    }
#undef REG
    ok = ok && ct__layers_add_child(m, "out_proj", ct_linear_new(E, E, bias), &a->out_proj) == 0;
    if (ok && bias) ok = ct_init_zeros_(ct_module_param(a->out_proj, 1)) != NULL;
    ct_set_grad_enabled(prev);
    ct_scope_end(s);
    return ok ? m : fail(m);
}

static bool is_mha(const ct_module *m) { return m && m->cls == &k_mha; }

/* F.multi_head_attention_forward.  All inputs sequence-first here. */
static ct_status mha_core(tfm_mha *a, ct_tensor *query, ct_tensor *key, ct_tensor *value, ct_tensor *kpm,
                          bool need_weights, ct_tensor *attn_mask, bool average, bool is_causal,
                          ct_tensor **out, ct_tensor **weights) {
    ct_module *m = &a->base;
    const char *fn = "MultiheadAttention";
    int64_t E = a->embed_dim, H = a->num_heads, hd = a->head_dim;
    bool same_qkv = query == key && key == value, same_kv = key == value;
    int qd = ct_ndim(query);
    if (qd != 2 && qd != 3)
        return ct__error_status(CT_ERR_SHAPE, "%s: query should be unbatched 2D or batched 3D, got %s", fn,
                                ct__tshape(query));
    if (ct_ndim(key) != qd || ct_ndim(value) != qd)
        return ct__error_status(CT_ERR_SHAPE, "%s: query %s, key %s and value %s must all be %dD", fn,
                                ct__tshape(query), ct__tshape(key), ct__tshape(value), qd);
    bool batched = qd == 3;
    if (kpm && ct_ndim(kpm) != (batched ? 2 : 1))
        return ct__error_status(CT_ERR_SHAPE, "%s: key_padding_mask should be %dD for %s query, got %s", fn,
                                batched ? 2 : 1, batched ? "batched" : "unbatched", ct__tshape(kpm));
    if (attn_mask && ct_ndim(attn_mask) != 2 && ct_ndim(attn_mask) != 3)
        return ct__error_status(CT_ERR_SHAPE, "%s: attn_mask should be 2D or 3D, got %s", fn,
                                ct__tshape(attn_mask));
    ct_scope s = ct_scope_begin();
    if (a->batch_first && batched) {
        ct_tensor *q2 = ct_transpose(query, 0, 1);
        ct_tensor *k2 = same_qkv ? q2 : ct_transpose(key, 0, 1);
        ct_tensor *v2 = same_kv ? k2 : ct_transpose(value, 0, 1);
        query = q2, key = k2, value = v2;
    }
    if (!batched) {
        ct_tensor *q2 = ct_unsqueeze(query, 1);
        ct_tensor *k2 = same_qkv ? q2 : ct_unsqueeze(key, 1);
        ct_tensor *v2 = same_kv ? k2 : ct_unsqueeze(value, 1);
        query = q2, key = k2, value = v2;
        if (kpm) kpm = ct_unsqueeze(kpm, 0);
    }
    ct_status st = CT_OK;
    ct_tensor *res = NULL, *w = NULL;
    if (!query || !key || !value) goto done;
    int64_t L = ct_size(query, 0), N = ct_size(query, 1), S = ct_size(key, 0);
    if (ct_size(query, 2) != E) {
        st = ct__error_status(CT_ERR_SHAPE, "%s: was expecting embedding dimension of %lld, but got %s", fn,
                              (long long)E, ct__tshape(query));
        goto done;
    }
    if (ct_size(key, 2) != a->kdim || ct_size(value, 2) != a->vdim || ct_size(key, 1) != N ||
        ct_size(value, 1) != N || ct_size(value, 0) != S) {
        st = ct__error_status(CT_ERR_SHAPE, "%s: key %s / value %s do not match query %s (kdim=%lld, vdim=%lld)",
                              fn, ct__tshape(key), ct__tshape(value), ct__tshape(query), (long long)a->kdim,
                              (long long)a->vdim);
        goto done;
    }
    if (kpm && (ct_size(kpm, 0) != N || ct_size(kpm, 1) != S)) {
        st = ct__error_status(CT_ERR_SHAPE, "%s: key_padding_mask %s should be [%lld, %lld]", fn,
                              ct__tshape(kpm), (long long)N, (long long)S);
        goto done;
    }
    if (attn_mask) {
        bool ok2 = ct_ndim(attn_mask) == 2 ? ct_size(attn_mask, 0) == L && ct_size(attn_mask, 1) == S
                                           : ct_size(attn_mask, 0) == N * H && ct_size(attn_mask, 1) == L &&
                                                 ct_size(attn_mask, 2) == S;
        if (!ok2) {
            st = ct__error_status(CT_ERR_SHAPE, "%s: attn_mask %s should be [%lld, %lld] or [%lld, %lld, %lld]",
                                  fn, ct__tshape(attn_mask), (long long)L, (long long)S, (long long)(N * H),
                                  (long long)L, (long long)S);
            goto done;
        }
    }
    ct_dtype dt = ct_get_dtype(query);
    bool sdpa_causal = false;
    if (is_causal && !attn_mask) {
        if (!kpm && !need_weights && L == S && !a->add_bias_kv && !a->add_zero_attn) sdpa_causal = true;
        else attn_mask = ct_triu(ct_full_on((int64_t[]){L, S}, 2, -INFINITY, dt, ct_get_device(query)), 1);
    }
    bool had_kpm = kpm != NULL, had_mask = attn_mask != NULL;
    kpm = canon_mask(kpm, dt, fn, "key_padding_mask");
    attn_mask = canon_mask(attn_mask, dt, fn, "attn_mask");
    if ((had_kpm && !kpm) || (had_mask && !attn_mask)) goto done;
    if (attn_mask && ct_ndim(attn_mask) == 2) attn_mask = ct_unsqueeze(attn_mask, 0);

    /* input projections */
    ct_tensor *b = ct_module_param(m, MHA_IN_B), *bq = NULL, *bk = NULL, *bv = NULL;
    if (b) bq = ct_narrow(b, 0, 0, E), bk = ct_narrow(b, 0, E, E), bv = ct_narrow(b, 0, 2 * E, E);
    ct_tensor *q, *k, *v;
    if (a->same_dims) {
        ct_tensor *W = ct_module_param(m, MHA_IN_W);
        if (same_qkv) {
            ct_tensor *parts[3] = {0};
            ct_tensor *qkv = ct_linear(query, W, b);
            if (ct_chunk(qkv, 3, -1, parts, 3) != 3) goto done;
            q = parts[0], k = parts[1], v = parts[2];
        } else {
            q = ct_linear(query, ct_narrow(W, 0, 0, E), bq);
            if (same_kv) {
                ct_tensor *parts[2] = {0};
                ct_tensor *kv = ct_linear(key, ct_narrow(W, 0, E, 2 * E), b ? ct_narrow(b, 0, E, 2 * E) : NULL);
                if (ct_chunk(kv, 2, -1, parts, 2) != 2) goto done;
                k = parts[0], v = parts[1];
            } else {
                k = ct_linear(key, ct_narrow(W, 0, E, E), bk);
                v = ct_linear(value, ct_narrow(W, 0, 2 * E, E), bv);
            }
        }
    } else {
        q = ct_linear(query, ct_module_param(m, MHA_Q_W), bq);
        k = ct_linear(key, ct_module_param(m, MHA_K_W), bk);
        v = ct_linear(value, ct_module_param(m, MHA_V_W), bv);
    }
    if (a->add_bias_kv) {
        ct_tensor *bkv[2] = {ct_module_param(m, MHA_BIAS_K), ct_module_param(m, MHA_BIAS_V)};
        int64_t shp[3] = {1, N, E};
        k = ct_cat((ct_tensor *[]){k, ct_expand(bkv[0], shp, 3)}, 2, 0);
        v = ct_cat((ct_tensor *[]){v, ct_expand(bkv[1], shp, 3)}, 2, 0);
        if (attn_mask) attn_mask = ct_pad(attn_mask, (int64_t[]){0, 1}, 2, CT_PAD_CONSTANT, 0.0);
        if (kpm) kpm = ct_pad(kpm, (int64_t[]){0, 1}, 2, CT_PAD_CONSTANT, 0.0);
    }
    /* [L, N, E] -> [N*H, L, hd] */
    q = ct_transpose(ct_view(ct_contiguous(q), (int64_t[]){L, N * H, hd}, 3), 0, 1);
    int64_t Sk = ct_size(k, 0);
    k = ct_transpose(ct_view(ct_contiguous(k), (int64_t[]){Sk, N * H, hd}, 3), 0, 1);
    v = ct_transpose(ct_view(ct_contiguous(v), (int64_t[]){Sk, N * H, hd}, 3), 0, 1);
    if (a->add_zero_attn) {
        ct_tensor *z = ct_zeros_on((int64_t[]){N * H, 1, hd}, 3, dt, ct_get_device(k));
        k = ct_cat((ct_tensor *[]){k, z}, 2, 1);
        v = ct_cat((ct_tensor *[]){v, z}, 2, 1);
        if (attn_mask) attn_mask = ct_pad(attn_mask, (int64_t[]){0, 1}, 2, CT_PAD_CONSTANT, 0.0);
        if (kpm) kpm = ct_pad(kpm, (int64_t[]){0, 1}, 2, CT_PAD_CONSTANT, 0.0);
    }
    if (!q || !k || !v) goto done;
    Sk = ct_size(k, 1);
    if (kpm) {
        kpm = ct_reshape(ct_expand(ct_view(kpm, (int64_t[]){N, 1, 1, Sk}, 4), (int64_t[]){N, H, 1, Sk}, 4),
                         (int64_t[]){N * H, 1, Sk}, 3);
        attn_mask = attn_mask ? ct_add(attn_mask, kpm) : kpm;
    }
    double p = ct_module_is_training(m) ? a->dropout : 0.0;
    ct_tensor *o;
    if (need_weights) {
        ct_tensor *sc = ct_bmm(ct_mul_scalar(q, 1.0 / sqrt((double)hd)), ct_transpose(k, -2, -1));
        if (attn_mask) sc = ct_add(sc, attn_mask);
        w = ct_softmax(sc, -1);
        if (p > 0) w = ct_dropout(w, p, true);
        o = ct_bmm(w, v); /* [N*H, L, hd] */
        o = ct_view(ct_contiguous(ct_transpose(o, 0, 1)), (int64_t[]){L * N, E}, 2);
        w = ct_view(w, (int64_t[]){N, H, L, Sk}, 4);
        if (average) w = ct_mean(w, (int64_t[]){1}, 1, false);
        if (!batched) w = ct_squeeze_dim(w, 0);
    } else {
        if (attn_mask) {
            if (ct_size(attn_mask, 0) == 1) attn_mask = ct_unsqueeze(attn_mask, 0);
            else attn_mask = ct_view(attn_mask, (int64_t[]){N, H, -1, Sk}, 4);
        }
        q = ct_view(q, (int64_t[]){N, H, L, hd}, 4);
        k = ct_view(k, (int64_t[]){N, H, Sk, hd}, 4);
        v = ct_view(v, (int64_t[]){N, H, Sk, hd}, 4);
        o = ct_scaled_dot_product_attention(q, k, v, attn_mask, p, sdpa_causal, 0.0, false);
        o = ct_view(ct_contiguous(ct_permute(o, (int64_t[]){2, 0, 1, 3}, 4)), (int64_t[]){L * N, E}, 2);
    }
    o = ct_linear(o, ct_module_param(a->out_proj, 0), ct_module_param(a->out_proj, 1));
    o = ct_view(o, (int64_t[]){L, N, E}, 3);
    if (a->batch_first && batched) o = ct_transpose(o, 0, 1);
    if (!batched) o = ct_squeeze_dim(o, 1);
    res = o;
done:
    if (st == CT_OK && !res) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    if (st == CT_OK && need_weights && !w) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    if (st == CT_OK) {
        *out = ct_keep(res);
        if (weights) *weights = need_weights ? ct_keep(w) : NULL;
    }
    ct_scope_end(s);
    return st;
}

ct_status ct_multihead_attention_forward(ct_module *mha, ct_tensor *query, ct_tensor *key, ct_tensor *value,
                                         ct_tensor *key_padding_mask, bool need_weights, ct_tensor *attn_mask,
                                         bool average_attn_weights, bool is_causal, ct_tensor **attn_output,
                                         ct_tensor **attn_weights) {
    if (attn_weights) *attn_weights = NULL;
    if (attn_output) *attn_output = NULL;
    if (!is_mha(mha)) return ct__error_status(CT_ERR_ARG, "multihead_attention_forward: not a MultiheadAttention");
    if (!query || !key || !value || !attn_output)
        return ct__error_status(CT_ERR_NULL, "multihead_attention_forward: NULL query, key, value or output");
    return mha_core((tfm_mha *)mha, query, key, value, key_padding_mask, need_weights && attn_weights != NULL,
                    attn_mask, average_attn_weights, is_causal, attn_output, attn_weights);
}

static ct_status mha_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout) {
    if (n < 3 || n > 5)
        return ct__error_status(CT_ERR_ARG, "MultiheadAttention: forward takes (query, key, value [, "
                                "key_padding_mask [, attn_mask]]), got %d inputs", n);
    if (nout < 1 || nout > 2) return ct__error_status(CT_ERR_ARG, "MultiheadAttention: 1 or 2 outputs, got %d", nout);
    ct_tensor *w = NULL;
    ct_status st = ct_multihead_attention_forward(m, in[0], in[1], in[2], n > 3 ? in[3] : NULL, true,
                                                  n > 4 ? in[4] : NULL, true, false, &out[0], &w);
    if (nout > 1) out[1] = w;
    return st;
}

/* ======================================================================
 * Encoder and decoder layers
 * ====================================================================== */
typedef struct tfm_dec_layer {
    ct_module base;
    tfm_cfg c;
    ct_module *self_attn, *mha, *linear1, *linear2, *norm1, *norm2, *norm3;
} tfm_dec_layer;

static ct_tensor *enc_layer_fwd(ct_module *m, ct_tensor *const *in, int n);
static ct_tensor *dec_layer_fwd(ct_module *m, ct_tensor *const *in, int n);
static const ct_module_class k_enc_layer = {"TransformerEncoderLayer", sizeof(tfm_enc_layer), enc_layer_fwd,
                                            NULL, NULL, NULL};
static const ct_module_class k_dec_layer = {"TransformerDecoderLayer", sizeof(tfm_dec_layer), dec_layer_fwd,
                                            NULL, NULL, NULL};
bool ct__tfm_is_enc_layer(const ct_module *m) { return m && m->cls == &k_enc_layer; }
static bool is_dec_layer(const ct_module *m) { return m && m->cls == &k_dec_layer; }

static bool check_cfg(const char *fn, const tfm_cfg *c) {
    if (c->d_model <= 0 || c->nhead <= 0 || c->dim_ff <= 0) {
        ct__error(CT_ERR_ARG, "%s: d_model, nhead and dim_feedforward must be > 0, got %lld, %lld, %lld", fn,
                  (long long)c->d_model, (long long)c->nhead, (long long)c->dim_ff);
        return false;
    }
    if (c->d_model % c->nhead) {
        ct__error(CT_ERR_ARG, "%s: d_model (%lld) must be divisible by nhead (%lld)", fn, (long long)c->d_model,
                  (long long)c->nhead);
        return false;
    }
    if (!(c->dropout >= 0 && c->dropout <= 1)) {
        ct__error(CT_ERR_ARG, "%s: dropout must be in [0, 1], got %g", fn, c->dropout);
        return false;
    }
    if (c->act != CT_TRANSFORMER_RELU && c->act != CT_TRANSFORMER_GELU) {
        ct__error(CT_ERR_ARG, "%s: activation should be relu or gelu, got %d", fn, (int)c->act);
        return false;
    }
    return true;
}

/* self_attn, [multihead_attn,] linear1, dropout, linear2, norm1, norm2, [norm3,]
 * dropout1, dropout2[, dropout3] -- torch's registration order */
static bool build_layer(ct_module *m, const tfm_cfg *c, bool dec, ct_module **sa, ct_module **mha,
                        ct_module **l1, ct_module **l2, ct_module **n1, ct_module **n2, ct_module **n3) {
    bool ok = ct__layers_add_child(m, "self_attn", ct_multihead_attention_new(c->d_model, c->nhead, c->dropout, c->bias,
                                                                   false, false, 0, 0, c->batch_first), sa) == 0;
    if (ok && dec)
        ok = ct__layers_add_child(m, "multihead_attn", ct_multihead_attention_new(c->d_model, c->nhead, c->dropout, c->bias,
                                                                       false, false, 0, 0, c->batch_first),
                       mha) == 0;
    ok = ok && ct__layers_add_child(m, "linear1", ct_linear_new(c->d_model, c->dim_ff, c->bias), l1) == 0;
    ok = ok && ct__layers_add_child(m, "dropout", ct_dropout_new(c->dropout), NULL) == 0;
    ok = ok && ct__layers_add_child(m, "linear2", ct_linear_new(c->dim_ff, c->d_model, c->bias), l2) == 0;
    ok = ok && ct__layers_add_child(m, "norm1", ct_layer_norm_new(&c->d_model, 1, c->eps, true, c->bias), n1) == 0;
    ok = ok && ct__layers_add_child(m, "norm2", ct_layer_norm_new(&c->d_model, 1, c->eps, true, c->bias), n2) == 0;
    if (dec) ok = ok && ct__layers_add_child(m, "norm3", ct_layer_norm_new(&c->d_model, 1, c->eps, true, c->bias), n3) == 0;
    ok = ok && ct__layers_add_child(m, "dropout1", ct_dropout_new(c->dropout), NULL) == 0;
    ok = ok && ct__layers_add_child(m, "dropout2", ct_dropout_new(c->dropout), NULL) == 0;
    if (dec) ok = ok && ct__layers_add_child(m, "dropout3", ct_dropout_new(c->dropout), NULL) == 0;
    return ok;
}

static tfm_cfg make_cfg(int64_t d, int64_t h, int64_t ff, double dropout, ct_transformer_activation act,
                        double eps, bool bf, bool nf, bool bias) {
    tfm_cfg c = {d, h, ff, dropout, eps, act, bf, nf, bias};
    return c;
}

ct_module *ct_transformer_encoder_layer_new(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                            double dropout, ct_transformer_activation activation,
                                            double layer_norm_eps, bool batch_first, bool norm_first, bool bias) {
    tfm_cfg c = make_cfg(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias);
    if (!check_cfg("TransformerEncoderLayer", &c)) return NULL;
    tfm_enc_layer *l = (tfm_enc_layer *)ct_module_new(&k_enc_layer);
    if (!l) return NULL;
    l->c = c;
    if (!build_layer(&l->base, &c, false, &l->self_attn, NULL, &l->linear1, &l->linear2, &l->norm1, &l->norm2,
                     NULL))
        return fail(&l->base);
    return &l->base;
}

ct_module *ct_transformer_decoder_layer_new(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                            double dropout, ct_transformer_activation activation,
                                            double layer_norm_eps, bool batch_first, bool norm_first, bool bias) {
    tfm_cfg c = make_cfg(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias);
    if (!check_cfg("TransformerDecoderLayer", &c)) return NULL;
    tfm_dec_layer *l = (tfm_dec_layer *)ct_module_new(&k_dec_layer);
    if (!l) return NULL;
    l->c = c;
    if (!build_layer(&l->base, &c, true, &l->self_attn, &l->mha, &l->linear1, &l->linear2, &l->norm1, &l->norm2,
                     &l->norm3))
        return fail(&l->base);
    return &l->base;
}

static ct_tensor *ln(ct_module *norm, const tfm_cfg *c, ct_tensor *x) {
    return ct_layer_norm(x, &c->d_model, 1, ct__tfm_ln_w(norm), ct__tfm_ln_b(norm, c->bias), c->eps);
}
static ct_tensor *drop(ct_module *owner, const tfm_cfg *c, ct_tensor *x) {
    return c->dropout > 0 && ct_module_is_training(owner) ? ct_dropout(x, c->dropout, true) : x;
}
static ct_tensor *ff_block(ct_module *m, const tfm_cfg *c, ct_module *l1, ct_module *l2, ct_tensor *x) {
    ct_tensor *h = ct_linear(x, ct_module_param(l1, 0), ct_module_param(l1, 1));
    h = c->act == CT_TRANSFORMER_GELU ? ct_gelu(h, CT_GELU_NONE) : ct_relu(h);
    h = drop(m, c, h);
    return drop(m, c, ct_linear(h, ct_module_param(l2, 0), ct_module_param(l2, 1)));
}
static ct_tensor *attn_block(ct_module *m, const tfm_cfg *c, ct_module *mha, ct_tensor *x, ct_tensor *mem,
                             ct_tensor *mask, ct_tensor *kpm, bool causal) {
    ct_tensor *o = NULL;
    if (!x || !mem) return NULL;
    if (mha_core((tfm_mha *)mha, x, mem, mem, kpm, false, mask, true, causal, &o, NULL)) return NULL;
    return drop(m, c, o);
}

static ct_tensor *enc_layer_slow(tfm_enc_layer *l, ct_tensor *x, ct_tensor *mask, ct_tensor *kpm, bool causal) {
    ct_module *m = &l->base;
    const tfm_cfg *c = &l->c;
    if (c->norm_first) {
        ct_tensor *h = ln(l->norm1, c, x);
        x = ct_add(x, attn_block(m, c, l->self_attn, h, h, mask, kpm, causal));
        x = ct_add(x, ff_block(m, c, l->linear1, l->linear2, ln(l->norm2, c, x)));
    } else {
        x = ln(l->norm1, c, ct_add(x, attn_block(m, c, l->self_attn, x, x, mask, kpm, causal)));
        x = ln(l->norm2, c, ct_add(x, ff_block(m, c, l->linear1, l->linear2, x)));
    }
    return x;
}

static bool kpm_ok(const char *fn, ct_tensor *src, ct_tensor *kpm, bool batch_first) {
    if (!kpm) return true;
    int nd = ct_ndim(src);
    bool ok;
    if (nd == 3) ok = ct_ndim(kpm) == 2 && ct_size(kpm, 0) == ct_size(src, batch_first ? 0 : 1) &&
                      ct_size(kpm, 1) == ct_size(src, batch_first ? 1 : 0);
    else ok = nd == 2 && ct_ndim(kpm) == 1 && ct_size(kpm, 0) == ct_size(src, 0);
    if (!ok) ct__error(CT_ERR_SHAPE, "%s: src_key_padding_mask %s does not match src %s%s", fn, ct__tshape(kpm),
                       ct__tshape(src), batch_first ? " (batch_first)" : "");
    return ok;
}

static ct_tensor *src_ok(const char *fn, ct_tensor *src, int64_t d) {
    if (!src) return NULL;
    if ((ct_ndim(src) != 2 && ct_ndim(src) != 3) || ct_size(src, -1) != d)
        return ct__error(CT_ERR_SHAPE, "%s: expected a 2-D or 3-D input with %lld features in its last dim, got %s",
                         fn, (long long)d, ct__tshape(src));
    return src;
}

ct_tensor *ct_transformer_encoder_layer_forward(ct_module *layer, ct_tensor *src, ct_tensor *src_mask,
                                                ct_tensor *kpm, bool is_causal) {
    const char *fn = "TransformerEncoderLayer";
    if (!ct__tfm_is_enc_layer(layer))
        return ct__error(CT_ERR_ARG, "transformer_encoder_layer_forward: not a TransformerEncoderLayer");
    tfm_enc_layer *l = (tfm_enc_layer *)layer;
    if (!src_ok(fn, src, l->c.d_model) || !kpm_ok(fn, src, kpm, l->c.batch_first)) return NULL;
    if (ct__tfm_fast_ok(l, src, src_mask, kpm, is_causal)) {
        ct_tensor *r = ct__tfm_fast_run(&l, 1, NULL, src, kpm, false);
        ct__tfm_set_last(true, false);
        return r;
    }
    ct__tfm_set_last(false, false);
    ct_scope s = ct_scope_begin();
    ct_tensor *r = ct_keep(enc_layer_slow(l, src, src_mask, kpm, is_causal));
    ct_scope_end(s);
    return r;
}

static ct_tensor *enc_layer_fwd(ct_module *m, ct_tensor *const *in, int n) {
    if (n < 1 || n > 3)
        return ct__error(CT_ERR_ARG, "TransformerEncoderLayer: forward takes (src [, src_mask [, "
                         "src_key_padding_mask]]), got %d inputs", n);
    return ct_transformer_encoder_layer_forward(m, in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, false);
}

static ct_tensor *dec_layer_slow(tfm_dec_layer *l, ct_tensor *x, ct_tensor *mem, ct_tensor *tmask,
                                 ct_tensor *mmask, ct_tensor *tkpm, ct_tensor *mkpm, bool tc, bool mc) {
    ct_module *m = &l->base;
    const tfm_cfg *c = &l->c;
    if (c->norm_first) {
        ct_tensor *h = ln(l->norm1, c, x);
        x = ct_add(x, attn_block(m, c, l->self_attn, h, h, tmask, tkpm, tc));
        x = ct_add(x, attn_block(m, c, l->mha, ln(l->norm2, c, x), mem, mmask, mkpm, mc));
        x = ct_add(x, ff_block(m, c, l->linear1, l->linear2, ln(l->norm3, c, x)));
    } else {
        x = ln(l->norm1, c, ct_add(x, attn_block(m, c, l->self_attn, x, x, tmask, tkpm, tc)));
        x = ln(l->norm2, c, ct_add(x, attn_block(m, c, l->mha, x, mem, mmask, mkpm, mc)));
        x = ln(l->norm3, c, ct_add(x, ff_block(m, c, l->linear1, l->linear2, x)));
    }
    return x;
}

ct_tensor *ct_transformer_decoder_layer_forward(ct_module *layer, ct_tensor *tgt, ct_tensor *memory,
                                                ct_tensor *tgt_mask, ct_tensor *memory_mask, ct_tensor *tkpm,
                                                ct_tensor *mkpm, bool tgt_is_causal, bool memory_is_causal) {
    const char *fn = "TransformerDecoderLayer";
    if (!is_dec_layer(layer))
        return ct__error(CT_ERR_ARG, "transformer_decoder_layer_forward: not a TransformerDecoderLayer");
    tfm_dec_layer *l = (tfm_dec_layer *)layer;
    if (!src_ok(fn, tgt, l->c.d_model) || !src_ok(fn, memory, l->c.d_model)) return NULL;
    if (ct_ndim(tgt) != ct_ndim(memory))
        return ct__error(CT_ERR_SHAPE, "%s: tgt %s and memory %s must have the same number of dims", fn,
                         ct__tshape(tgt), ct__tshape(memory));
    ct_scope s = ct_scope_begin();
    ct_tensor *r = ct_keep(dec_layer_slow(l, tgt, memory, tgt_mask, memory_mask, tkpm, mkpm, tgt_is_causal,
                                          memory_is_causal));
    ct_scope_end(s);
    return r;
}

static ct_tensor *dec_layer_fwd(ct_module *m, ct_tensor *const *in, int n) {
    if (n < 2 || n > 4)
        return ct__error(CT_ERR_ARG, "TransformerDecoderLayer: forward takes (tgt, memory [, tgt_mask [, "
                         "memory_mask]]), got %d inputs", n);
    return ct_transformer_decoder_layer_forward(m, in[0], in[1], n > 2 ? in[2] : NULL, n > 3 ? in[3] : NULL,
                                                NULL, NULL, false, false);
}

/* ======================================================================
 * TransformerEncoder / TransformerDecoder / Transformer
 * ====================================================================== */
static ct_tensor *enc_fwd(ct_module *m, ct_tensor *const *in, int n);
static ct_tensor *dec_fwd(ct_module *m, ct_tensor *const *in, int n);
static const ct_module_class k_enc = {"TransformerEncoder", sizeof(tfm_stack), enc_fwd, NULL, NULL, NULL};
static const ct_module_class k_dec = {"TransformerDecoder", sizeof(tfm_stack), dec_fwd, NULL, NULL, NULL};

/* A deep copy of one of our layers: same config, same weights, same mode. */
static ct_module *copy_layer(ct_module *src) {
    ct_module *c;
    if (ct__tfm_is_enc_layer(src)) {
        const tfm_cfg *k = &((tfm_enc_layer *)src)->c;
        c = ct_transformer_encoder_layer_new(k->d_model, k->nhead, k->dim_ff, k->dropout, k->act, k->eps,
                                             k->batch_first, k->norm_first, k->bias);
    } else {
        const tfm_cfg *k = &((tfm_dec_layer *)src)->c;
        c = ct_transformer_decoder_layer_new(k->d_model, k->nhead, k->dim_ff, k->dropout, k->act, k->eps,
                                             k->batch_first, k->norm_first, k->bias);
    }
    if (!c) return NULL;
    ct_sample *sd = ct_module_state_dict(src);
    ct_status st = sd ? ct_module_load_state_dict(c, sd, true) : CT_ERR_OOM;
    ct_sample_free(sd);
    if (st) return fail(c);
    ct_module_train(c, ct_module_is_training(src));
    return c;
}

static ct_module *stack_new(const ct_module_class *cls, ct_module *layer, int64_t num_layers, ct_module *norm,
                            bool nested) {
    const char *fn = cls->name;
    bool enc = cls == &k_enc;
    if (!layer) return ct__error(CT_ERR_NULL, "%s: the layer is NULL", fn);
    if (enc ? !ct__tfm_is_enc_layer(layer) : !is_dec_layer(layer))
        return ct__error(CT_ERR_ARG, "%s: expected a %s, got %s", fn,
                         enc ? "TransformerEncoderLayer" : "TransformerDecoderLayer", ct_module_class_name(layer));
    if (num_layers < 0 || num_layers > 100000)
        return ct__error(CT_ERR_ARG, "%s: num_layers must be >= 0, got %lld", fn, (long long)num_layers);
    tfm_stack *t = (tfm_stack *)ct_module_new(cls);
    if (!t) return NULL;
    t->num_layers = num_layers;
    t->nested = nested;
    ct_module *list = ct_module_list_new(NULL, 0);
    if (ct__layers_add_child(&t->base, "layers", list, &t->layers)) return fail(&t->base);
    for (int64_t i = 0; i < num_layers; i++) {
        ct_module *c = copy_layer(layer);
        if (!c) return fail(&t->base);
        ct_status st = ct_module_list_append(t->layers, c);
        ct_module_release(c);
        if (st) return fail(&t->base);
    }
    if (norm) {
        if (ct_module_register_module(&t->base, "norm", norm) < 0) return fail(&t->base);
        t->norm = norm;
    }
    return &t->base;
}

ct_module *ct_transformer_encoder_new(ct_module *encoder_layer, int64_t num_layers, ct_module *norm,
                                      bool enable_nested_tensor) {
    return stack_new(&k_enc, encoder_layer, num_layers, norm, enable_nested_tensor);
}
ct_module *ct_transformer_decoder_new(ct_module *decoder_layer, int64_t num_layers, ct_module *norm) {
    return stack_new(&k_dec, decoder_layer, num_layers, norm, false);
}

static tfm_stack *as_stack(ct_module *m, const ct_module_class *cls) {
    return m && m->cls == cls ? (tfm_stack *)m : NULL;
}

/* every row of a bool [N, L] padding mask is real tokens then padding */
static bool left_aligned(ct_tensor *kpm) {
    ct_scope s = ct_scope_begin();
    ct_tensor *k = ct_contiguous(kpm);
    bool ok = k != NULL;
    if (ok) {
        const uint8_t *p = ct_data_ptr(k);
        int64_t N = ct_size(k, 0), L = ct_size(k, 1);
        for (int64_t n = 0; n < N && ok; n++)
            for (int64_t t = 1; t < L && ok; t++) ok = !(p[n * L + t - 1] && !p[n * L + t]);
    }
    ct_scope_end(s);
    return ok;
}

ct_tensor *ct_transformer_encoder_forward(ct_module *encoder, ct_tensor *src, ct_tensor *mask, ct_tensor *kpm,
                                          bool is_causal) {
    tfm_stack *t = as_stack(encoder, &k_enc);
    if (!t) return ct__error(CT_ERR_ARG, "transformer_encoder_forward: not a TransformerEncoder");
    CT_NULLCHECK(src);
    int nl = (int)t->num_layers;
    tfm_enc_layer **ls = calloc((size_t)(nl > 0 ? nl : 1), sizeof *ls);
    if (!ls) return ct__error(CT_ERR_OOM, "TransformerEncoder: out of memory");
    for (int i = 0; i < nl; i++) ls[i] = (tfm_enc_layer *)ct_module_child(t->layers, i);
    ct_tensor *r = NULL;
    if (nl > 0) {
        const tfm_cfg *c = &ls[0]->c;
        if (!src_ok("TransformerEncoder", src, c->d_model) || !kpm_ok("TransformerEncoder", src, kpm, c->batch_first))
            goto out;
    }
    bool fast = nl > 0;
    for (int i = 0; i < nl && fast; i++) fast = ct__tfm_fast_ok(ls[i], src, mask, kpm, is_causal);
    if (fast) {
        const tfm_cfg *c = &ls[0]->c;
        /* torch's sparsity conditions (TransformerEncoder.__init__ and forward) */
        bool pack = t->nested && kpm && ct_ndim(src) == 3 && c->batch_first && !c->norm_first &&
                    c->nhead % 2 == 0 && left_aligned(kpm);
        r = ct__tfm_fast_run(ls, nl, t->norm, src, kpm, pack);
        ct__tfm_set_last(true, pack);
        goto out;
    }
    {
        ct_scope s = ct_scope_begin();
        ct_tensor *x = src;
        for (int i = 0; i < nl; i++) x = enc_layer_slow(ls[i], x, mask, kpm, is_causal);
        if (t->norm) x = ct_module_forward1(t->norm, x);
        r = ct_keep(x);
        ct_scope_end(s);
        ct__tfm_set_last(false, false);
    }
out:
    free(ls);
    return r;
}

static ct_tensor *enc_fwd(ct_module *m, ct_tensor *const *in, int n) {
    if (n < 1 || n > 3)
        return ct__error(CT_ERR_ARG, "TransformerEncoder: forward takes (src [, mask [, src_key_padding_mask]]), "
                         "got %d inputs", n);
    return ct_transformer_encoder_forward(m, in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, false);
}

ct_tensor *ct_transformer_decoder_forward(ct_module *decoder, ct_tensor *tgt, ct_tensor *memory, ct_tensor *tgt_mask,
                                          ct_tensor *memory_mask, ct_tensor *tkpm, ct_tensor *mkpm, bool tc,
                                          bool mc) {
    tfm_stack *t = as_stack(decoder, &k_dec);
    if (!t) return ct__error(CT_ERR_ARG, "transformer_decoder_forward: not a TransformerDecoder");
    CT_NULLCHECK(tgt);
    CT_NULLCHECK(memory);
    ct_scope s = ct_scope_begin();
    ct_tensor *x = tgt;
    for (int i = 0; i < (int)t->num_layers; i++)
        x = ct_transformer_decoder_layer_forward(ct_module_child(t->layers, i), x, memory, tgt_mask, memory_mask,
                                                 tkpm, mkpm, tc, mc);
    if (t->norm) x = ct_module_forward1(t->norm, x);
    ct_tensor *r = ct_keep(x);
    ct_scope_end(s);
    return r;
}

static ct_tensor *dec_fwd(ct_module *m, ct_tensor *const *in, int n) {
    if (n < 2 || n > 4)
        return ct__error(CT_ERR_ARG, "TransformerDecoder: forward takes (tgt, memory [, tgt_mask [, "
                         "memory_mask]]), got %d inputs", n);
    return ct_transformer_decoder_forward(m, in[0], in[1], n > 2 ? in[2] : NULL, n > 3 ? in[3] : NULL, NULL, NULL,
                                          false, false);
}

typedef struct tfm_full {
    ct_module base;
    tfm_cfg c;
    ct_module *encoder, *decoder;
} tfm_full;

static ct_tensor *full_fwd(ct_module *m, ct_tensor *const *in, int n);
static const ct_module_class k_full = {"Transformer", sizeof(tfm_full), full_fwd, NULL, NULL, NULL};

ct_module *ct_transformer_new(int64_t d_model, int64_t nhead, int64_t num_encoder_layers, int64_t num_decoder_layers,
                              int64_t dim_feedforward, double dropout, ct_transformer_activation activation,
                              double layer_norm_eps, bool batch_first, bool norm_first, bool bias) {
    tfm_cfg c = make_cfg(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                         norm_first, bias);
    if (!check_cfg("Transformer", &c)) return NULL;
    tfm_full *t = (tfm_full *)ct_module_new(&k_full);
    if (!t) return NULL;
    t->c = c;
    ct_module *m = &t->base;
    ct_module *el = ct_transformer_encoder_layer_new(d_model, nhead, dim_feedforward, dropout, activation,
                                                     layer_norm_eps, batch_first, norm_first, bias);
    ct_module *en = ct_layer_norm_new(&c.d_model, 1, layer_norm_eps, true, bias);
    ct_module *enc = el && en ? ct_transformer_encoder_new(el, num_encoder_layers, en, true) : NULL;
    ct_module_release(el);
    ct_module_release(en);
    if (ct__layers_add_child(m, "encoder", enc, &t->encoder)) return fail(m);
    ct_module *dl = ct_transformer_decoder_layer_new(d_model, nhead, dim_feedforward, dropout, activation,
                                                     layer_norm_eps, batch_first, norm_first, bias);
    ct_module *dn = ct_layer_norm_new(&c.d_model, 1, layer_norm_eps, true, bias);
    ct_module *dec = dl && dn ? ct_transformer_decoder_new(dl, num_decoder_layers, dn) : NULL;
    ct_module_release(dl);
    ct_module_release(dn);
    if (ct__layers_add_child(m, "decoder", dec, &t->decoder)) return fail(m);
    /* _reset_parameters: xavier_uniform_ on every parameter with dim > 1 */
    int np = ct_module_named_parameters(m, NULL, NULL, 0);
    ct_tensor **ps = calloc((size_t)(np > 0 ? np : 1), sizeof *ps);
    if (!ps) return fail(m);
    ct_module_named_parameters(m, NULL, ps, np);
    bool ok = true;
    for (int i = 0; i < np && ok; i++)
        if (ct_ndim(ps[i]) > 1) ok = ct_init_xavier_uniform_(ps[i], 1.0) != NULL;
    free(ps);
    return ok ? m : fail(m);
}

ct_tensor *ct_transformer_forward(ct_module *transformer, ct_tensor *src, ct_tensor *tgt, ct_tensor *src_mask,
                                  ct_tensor *tgt_mask, ct_tensor *memory_mask, ct_tensor *skpm, ct_tensor *tkpm,
                                  ct_tensor *mkpm, bool src_is_causal, bool tgt_is_causal, bool memory_is_causal) {
    if (!transformer || transformer->cls != &k_full)
        return ct__error(CT_ERR_ARG, "transformer_forward: not a Transformer");
    tfm_full *t = (tfm_full *)transformer;
    CT_NULLCHECK(src);
    CT_NULLCHECK(tgt);
    bool batched = ct_ndim(src) == 3;
    if (ct_ndim(src) != ct_ndim(tgt) || (ct_ndim(src) != 2 && ct_ndim(src) != 3))
        return ct__error(CT_ERR_SHAPE, "Transformer: src %s and tgt %s must both be 2-D or 3-D", ct__tshape(src),
                         ct__tshape(tgt));
    int bd = t->c.batch_first ? 0 : 1;
    if (batched && ct_size(src, bd) != ct_size(tgt, bd))
        return ct__error(CT_ERR_SHAPE, "Transformer: the batch number of src %s and tgt %s must be equal",
                         ct__tshape(src), ct__tshape(tgt));
    if (ct_size(src, -1) != t->c.d_model || ct_size(tgt, -1) != t->c.d_model)
        return ct__error(CT_ERR_SHAPE, "Transformer: the feature number of src %s and tgt %s must be equal to "
                         "d_model (%lld)", ct__tshape(src), ct__tshape(tgt), (long long)t->c.d_model);
    ct_scope s = ct_scope_begin();
    ct_tensor *mem = ct_transformer_encoder_forward(t->encoder, src, src_mask, skpm, src_is_causal);
    ct_tensor *r = ct_keep(ct_transformer_decoder_forward(t->decoder, tgt, mem, tgt_mask, memory_mask, tkpm, mkpm,
                                                          tgt_is_causal, memory_is_causal));
    ct_scope_end(s);
    return r;
}

static ct_tensor *full_fwd(ct_module *m, ct_tensor *const *in, int n) {
    if (n < 2 || n > 5)
        return ct__error(CT_ERR_ARG, "Transformer: forward takes (src, tgt [, src_mask [, tgt_mask [, "
                         "memory_mask]]]), got %d inputs", n);
    return ct_transformer_forward(m, in[0], in[1], n > 2 ? in[2] : NULL, n > 3 ? in[3] : NULL,
                                  n > 4 ? in[4] : NULL, NULL, NULL, NULL, false, false, false);
}
