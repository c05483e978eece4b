/* models_gpt.c -- Hugging Face transformers' GPT2LMHeadModel as ctorch
 * modules with the same module paths, hence the same state-dict keys:
 *
 *   transformer.{wte, wpe, drop, h, ln_f}
 *   transformer.h.N.{ln_1, attn.{c_attn, c_proj, attn_dropout, resid_dropout},
 *                    ln_2, mlp.{c_fc, c_proj, act, dropout}}
 *   lm_head (weight tied to transformer.wte.weight)
 *
 * The block (modeling_gpt2.GPT2Block, pre-norm):
 *   x = x + resid_dropout(c_proj(attn(ln_1(x))))
 *   x = x + dropout(c_proj(gelu_tanh(c_fc(ln_2(x)))))
 * with attn = causal scaled_dot_product_attention over n_head heads of the
 * packed q|k|v = c_attn(h) [B, T, 3C].
 *
 * KV cache: per layer, preallocated keys/values [B, H, max_len, D]; an
 * incremental forward of T tokens at position p writes its keys/values at
 * [p, p+T) and attends to [0, p+T) with the causal mask shifted by p. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers_impl.h"
#include "../ops/op_table.h"
#include "ctorch/autograd.h"
#include "ctorch/io.h"
#include "ctorch/models.h"


/* A new parameter: N(0, v) when fill == 0, else filled with v. */
static int new_param(ct_module *m, const char *name, const int64_t *shape, int nd, int fill, double v) {
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_empty(shape, nd, ct_get_default_dtype());
    bool ok = t != NULL;
    if (ok) {
        bool prev = ct_set_grad_enabled(false);
        ok = (fill == 0 ? ct_init_normal_(t, 0.0, v) : ct_fill_(t, v)) != NULL;
        ct_set_grad_enabled(prev);
    }
    int r = ok ? ct_module_register_parameter(m, name, t) : -1;
    ct_scope_end(s);
    return r;
}

/* ---- Conv1D (transformers.pytorch_utils.Conv1D): y = x W + b, W [nx, nf] ---- */
typedef struct conv1d_mod {
    ct_module base;
    int64_t nf, nx;
} conv1d_mod;

static ct_tensor *conv1d_apply(ct_module *m, ct_tensor *x) {
    conv1d_mod *c = (conv1d_mod *)m;
    if (!x) return NULL;
    int nd = ct_ndim(x);
    if (nd < 1 || ct_size(x, -1) != c->nx)
        return ct__error(CT_ERR_SHAPE, "Conv1D: expected input [..., %lld], got %s", (long long)c->nx,
                         ct__tshape(x));
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, ct_sizes(x), sizeof(int64_t) * (size_t)nd);
    shape[nd - 1] = c->nf;
    ct_tensor *x2 = ct_reshape(x, (const int64_t[]){-1, c->nx}, 2);
    ct_tensor *y = ct_addmm(ct_module_param(m, 1), x2, ct_module_param(m, 0), 1.0, 1.0);
    return ct_view(y, shape, nd);
}

static ct_tensor *conv1d_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "Conv1D: expects 1 input, got %d", n);
    return conv1d_apply(m, in[0]);
}

static char *conv1d_repr(ct_module *m) {
    conv1d_mod *c = (conv1d_mod *)m;
    char *s = malloc(64);
    if (s) snprintf(s, 64, "nf=%lld, nx=%lld", (long long)c->nf, (long long)c->nx);
    return s;
}
static const ct_module_class k_conv1d = {"Conv1D", sizeof(conv1d_mod), conv1d_forward, conv1d_repr, NULL, NULL};

static ct_module *conv1d_new(int64_t nf, int64_t nx, double std) {
    conv1d_mod *c = (conv1d_mod *)ct_module_new(&k_conv1d);
    if (!c) return NULL;
    c->nf = nf;
    c->nx = nx;
    ct_module *m = &c->base;
    if (new_param(m, "weight", (const int64_t[]){nx, nf}, 2, 0, std) < 0 ||
        new_param(m, "bias", &nf, 1, 1, 0.0) < 0) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* dropout, skipped when it is the identity (p 0 or eval mode) */
static ct_tensor *drop(ct_tensor *x, double p, bool training) {
    return training && p > 0 ? ct_dropout(x, p, true) : x;
}

static ct_module *gpt_layer_norm(const ct_gpt2_config *c) {
    return ct_layer_norm_new(&c->n_embd, 1, c->layer_norm_epsilon, true, true);
}

/* ---- the KV cache --------------------------------------------------------------- */
struct ct_gpt2_kv_cache {
    ct_module *model;
    int64_t batch, max_len, len, nl;
    ct_tensor **k, **v;
};

/* ---- GPT2Attention ---------------------------------------------------------------- */
typedef struct gpt_attn {
    ct_module base;
    ct_module *c_attn, *c_proj;
    int64_t n_embd, n_head;
    double attn_pdrop, resid_pdrop;
} gpt_attn;

/* [B, T, C] -> [B, H, T, D] (a view) */
static ct_tensor *split_heads(ct_tensor *x, int64_t H) {
    if (!x) return NULL;
    int64_t B = ct_size(x, 0), T = ct_size(x, 1), C = ct_size(x, 2);
    return ct_transpose(ct_view(x, (const int64_t[]){B, T, H, C / H}, 4), 1, 2);
}

/* x [B, T, C]; cache may be NULL (then layer is unused). */
static ct_tensor *attn_apply(ct_module *m, ct_tensor *x, ct_gpt2_kv_cache *cache, int64_t layer) {
    gpt_attn *a = (gpt_attn *)m;
    if (!x) return NULL;
    if (ct_ndim(x) != 3 || ct_size(x, 2) != a->n_embd)
        return ct__error(CT_ERR_SHAPE, "GPT2Attention: expected hidden states [B, T, %lld], got %s",
                         (long long)a->n_embd, ct__tshape(x));
    bool training = ct_module_is_training(m);
    int64_t B = ct_size(x, 0), T = ct_size(x, 1), C = a->n_embd;
    ct_tensor *qkv = conv1d_apply(a->c_attn, x);
    if (!qkv) return NULL;
    ct_tensor *parts[3];
    if (ct_split(qkv, C, 2, parts, 3) != 3) return NULL;
    ct_tensor *q = split_heads(parts[0], a->n_head);
    ct_tensor *k = split_heads(parts[1], a->n_head);
    ct_tensor *v = split_heads(parts[2], a->n_head);
    ct_tensor *y;
    if (cache) {
        int64_t p = cache->len;
        ct_tensor *kd = ct_slice(cache->k[layer], 2, p, p + T, 1);
        ct_tensor *vd = ct_slice(cache->v[layer], 2, p, p + T, 1);
        if (!ct_copy_(kd, k) || !ct_copy_(vd, v)) return NULL;
        ct_tensor *K = ct_slice(cache->k[layer], 2, 0, p + T, 1);
        ct_tensor *V = ct_slice(cache->v[layer], 2, 0, p + T, 1);
        if (p == 0) {
            y = ct_scaled_dot_product_attention(q, K, V, NULL, 0.0, T > 1, 0.0, false);
        } else if (T == 1) {
            y = ct_scaled_dot_product_attention(q, K, V, NULL, 0.0, false, 0.0, false);
        } else {
            /* query i (position p + i) sees keys j <= p + i */
            ct_tensor *mask = ct_tril(ct_ones((const int64_t[]){T, p + T}, 2, CT_BOOL), p);
            y = ct_scaled_dot_product_attention(q, K, V, mask, 0.0, false, 0.0, false);
        }
    } else {
        y = ct_scaled_dot_product_attention(q, k, v, NULL, training ? a->attn_pdrop : 0.0, true, 0.0, false);
    }
    if (!y) return NULL;
    y = ct_reshape(ct_transpose(y, 1, 2), (const int64_t[]){B, T, C}, 3);
    return drop(conv1d_apply(a->c_proj, y), a->resid_pdrop, training);
}

static ct_tensor *attn_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "GPT2Attention: expects 1 input, got %d", n);
    return attn_apply(m, in[0], NULL, 0);
}
static const ct_module_class k_attn = {"GPT2Attention", sizeof(gpt_attn), attn_forward, NULL, NULL, NULL};

static ct_module *attn_new(const ct_gpt2_config *c) {
    gpt_attn *a = (gpt_attn *)ct_module_new(&k_attn);
    if (!a) return NULL;
    a->n_embd = c->n_embd;
    a->n_head = c->n_head;
    a->attn_pdrop = c->attn_pdrop;
    a->resid_pdrop = c->resid_pdrop;
    ct_module *m = &a->base;
    double r = c->initializer_range, rp = r / sqrt(2.0 * (double)c->n_layer);
    int err = ct__layers_add_child(m, "c_attn", conv1d_new(3 * c->n_embd, c->n_embd, r), &a->c_attn);
    if (!err) err = ct__layers_add_child(m, "c_proj", conv1d_new(c->n_embd, c->n_embd, rp), &a->c_proj);
    if (!err) err = ct__layers_add_child(m, "attn_dropout", ct_dropout_new(c->attn_pdrop), NULL);
    if (!err) err = ct__layers_add_child(m, "resid_dropout", ct_dropout_new(c->resid_pdrop), NULL);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- GPT2MLP: dropout(c_proj(gelu_tanh(c_fc(x)))) ------------------------------------ */
typedef struct gpt_mlp {
    ct_module base;
    ct_module *c_fc, *c_proj;
    double pdrop;
} gpt_mlp;

static ct_tensor *mlp_apply(ct_module *m, ct_tensor *x) {
    gpt_mlp *p = (gpt_mlp *)m;
    ct_tensor *h = ct_gelu(conv1d_apply(p->c_fc, x), CT_GELU_TANH);
    return drop(conv1d_apply(p->c_proj, h), p->pdrop, ct_module_is_training(m));
}

static ct_tensor *mlp_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "GPT2MLP: expects 1 input, got %d", n);
    return mlp_apply(m, in[0]);
}
static const ct_module_class k_mlp = {"GPT2MLP", sizeof(gpt_mlp), mlp_forward, NULL, NULL, NULL};

static ct_module *mlp_new(const ct_gpt2_config *c) {
    gpt_mlp *p = (gpt_mlp *)ct_module_new(&k_mlp);
    if (!p) return NULL;
    p->pdrop = c->resid_pdrop;
    ct_module *m = &p->base;
    int64_t inner = c->n_inner > 0 ? c->n_inner : 4 * c->n_embd;
    double r = c->initializer_range, rp = r / sqrt(2.0 * (double)c->n_layer);
    int err = ct__layers_add_child(m, "c_fc", conv1d_new(inner, c->n_embd, r), &p->c_fc);
    if (!err) err = ct__layers_add_child(m, "c_proj", conv1d_new(c->n_embd, inner, rp), &p->c_proj);
    if (!err) err = ct__layers_add_child(m, "act", ct_gelu_new(CT_GELU_TANH), NULL);
    if (!err) err = ct__layers_add_child(m, "dropout", ct_dropout_new(c->resid_pdrop), NULL);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- GPT2Block ---------------------------------------------------------------------- */
typedef struct gpt_block {
    ct_module base;
    ct_module *ln_1, *attn, *ln_2, *mlp;
} gpt_block;

static ct_tensor *block_apply(ct_module *m, ct_tensor *x, ct_gpt2_kv_cache *cache, int64_t layer) {
    gpt_block *b = (gpt_block *)m;
    x = ct_add(x, attn_apply(b->attn, ct_module_forward1(b->ln_1, x), cache, layer));
    return ct_add(x, mlp_apply(b->mlp, ct_module_forward1(b->ln_2, x)));
}

static ct_tensor *block_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "GPT2Block: expects 1 input, got %d", n);
    return block_apply(m, in[0], NULL, 0);
}
static const ct_module_class k_block = {"GPT2Block", sizeof(gpt_block), block_forward, NULL, NULL, NULL};

static ct_module *block_new(const ct_gpt2_config *c) {
    gpt_block *b = (gpt_block *)ct_module_new(&k_block);
    if (!b) return NULL;
    ct_module *m = &b->base;
    int err = ct__layers_add_child(m, "ln_1", gpt_layer_norm(c), &b->ln_1);
    if (!err) err = ct__layers_add_child(m, "attn", attn_new(c), &b->attn);
    if (!err) err = ct__layers_add_child(m, "ln_2", gpt_layer_norm(c), &b->ln_2);
    if (!err) err = ct__layers_add_child(m, "mlp", mlp_new(c), &b->mlp);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- GPT2Model ---------------------------------------------------------------------- */
typedef struct gpt_model {
    ct_module base;
    ct_module *wte, *wpe, *h, *ln_f;
    double embd_pdrop;
    int64_t n_positions, vocab;
} gpt_model;

/* ids [B, T] int -> hidden [B, T, C]; positions start at p0. */
static ct_tensor *model_apply(ct_module *m, ct_tensor *ids, int64_t p0, ct_gpt2_kv_cache *cache) {
    gpt_model *g = (gpt_model *)m;
    int64_t T = ct_size(ids, 1);
    ct_tensor *pos = ct_arange((double)p0, (double)(p0 + T), 1, CT_I64);
    ct_tensor *x = ct_add(ct_module_forward1(g->wte, ids), ct_module_forward1(g->wpe, pos));
    x = drop(x, g->embd_pdrop, ct_module_is_training(m));
    int nl = ct_module_num_children(g->h);
    for (int i = 0; i < nl && x; i++) x = block_apply(ct_module_child(g->h, i), x, cache, i);
    return ct_module_forward1(g->ln_f, x);
}

static ct_status check_ids(const char *who, ct_tensor *ids, int64_t max_pos, int64_t p0, const char *limit) {
    if (!ids) return ct__error_status(CT_ERR_NULL, "%s: input_ids is NULL", who);
    if (ct_ndim(ids) != 2 || !ct_dtype_is_integral(ct_get_dtype(ids), false))
        return ct__error_status(CT_ERR_SHAPE, "%s: expected input_ids [batch, seq_len] of an integer dtype, "
                                              "got %d dims of %s", who, ct_ndim(ids),
                                ct_dtype_name(ct_get_dtype(ids)));
    if (ct_size(ids, 1) < 1)
        return ct__error_status(CT_ERR_SHAPE, "%s: input_ids %s has no tokens", who, ct__tshape(ids));
    if (p0 + ct_size(ids, 1) > max_pos)
        return ct__error_status(CT_ERR_SHAPE, "%s: sequence length %lld (from position %lld) exceeds "
                                              "%s %lld", who, (long long)ct_size(ids, 1),
                                (long long)p0, limit, (long long)max_pos);
    return CT_OK;
}

static ct_tensor *model_forward(ct_module *m, ct_tensor *const *in, int n) {
    gpt_model *g = (gpt_model *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "GPT2Model: expects (input_ids), got %d inputs", n);
    if (check_ids("GPT2Model", in[0], g->n_positions, 0, "n_positions")) return NULL;
    return model_apply(m, in[0], 0, NULL);
}
static const ct_module_class k_model = {"GPT2Model", sizeof(gpt_model), model_forward, NULL, NULL, NULL};

/* ---- GPT2LMHeadModel ------------------------------------------------------------------- */
typedef struct gpt_lm {
    ct_module base;
    ct_module *transformer, *lm_head;
    ct_gpt2_config cfg;
} gpt_lm;

static const ct_module_class k_lm;

static gpt_lm *as_lm(ct_module *m, const char *who) {
    if (!m) return ct__error(CT_ERR_NULL, "%s: module is NULL", who);
    if (m->cls != &k_lm)
        return ct__error(CT_ERR_ARG, "%s: expected a GPT2LMHeadModel, got %s", who, m->cls->name);
    return (gpt_lm *)m;
}

ct_gpt2_config ct_gpt2_get_config(ct_module *m) {
    ct_gpt2_config z;
    memset(&z, 0, sizeof z);
    gpt_lm *g = as_lm(m, "gpt2_get_config");
    return g ? g->cfg : z;
}

static ct_status gpt2_forward_impl(ct_module *m, ct_tensor *ids, ct_tensor *targets, ct_gpt2_kv_cache *cache,
                                   ct_tensor **logits, ct_tensor **loss) {
    gpt_lm *g = as_lm(m, "gpt2_forward");
    if (!g) return ct_last_error_code();
    if (!ids) return ct__error_status(CT_ERR_NULL, "gpt2_forward: input_ids is NULL");
    bool unbatched = ct_ndim(ids) == 1;
    if (unbatched) ids = ct_unsqueeze(ids, 0);
    if (targets && unbatched && ct_ndim(targets) == 1) targets = ct_unsqueeze(targets, 0);
    int64_t p0 = 0;
    if (cache) {
        if (cache->model != m)
            return ct__error_status(CT_ERR_ARG, "gpt2_forward: the KV cache belongs to another model");
        p0 = cache->len;
    }
    ct_status st = check_ids("GPT2LMHeadModel", ids, cache ? cache->max_len : g->cfg.n_positions, p0,
                             cache ? "the KV cache's max_len" : "n_positions");
    if (st) return st;
    int64_t B = ct_size(ids, 0), T = ct_size(ids, 1), V = g->cfg.vocab_size;
    if (cache && B != cache->batch)
        return ct__error_status(CT_ERR_SHAPE, "gpt2_forward: batch %lld differs from the KV cache's %lld",
                                (long long)B, (long long)cache->batch);
    if (targets && (ct_ndim(targets) != 2 || ct_size(targets, 0) != B || ct_size(targets, 1) != T))
        return ct__error_status(CT_ERR_SHAPE, "gpt2_forward: targets %s must be [%lld, %lld] like input_ids",
                                ct__tshape(targets), (long long)B, (long long)T);
    bool prev = true;
    if (cache) prev = ct_set_grad_enabled(false);
    ct_tensor *h = model_apply(g->transformer, ids, p0, cache);
    ct_tensor *lg = ct_linear(h, ct_module_param(g->lm_head, 0), NULL);
    if (cache) ct_set_grad_enabled(prev);
    if (!lg) return ct_last_error_code();
    if (cache) cache->len += T;
    if (loss) {
        if (!targets) return ct__error_status(CT_ERR_ARG, "gpt2_forward: a loss needs targets");
        *loss = ct_cross_entropy(ct_reshape(lg, (const int64_t[]){B * T, V}, 2),
                                 ct_reshape(targets, (const int64_t[]){B * T}, 1), NULL);
        if (!*loss) return ct_last_error_code();
    }
    if (logits) *logits = unbatched ? ct_squeeze_dim(lg, 0) : lg;
    return logits && !*logits ? ct_last_error_code() : CT_OK;
}

/* The forward's temporaries live in a scope of their own (outside any
 * scope they would be nobody's to release); the results are kept. */
ct_status ct_gpt2_forward(ct_module *m, ct_tensor *ids, ct_tensor *targets, ct_gpt2_kv_cache *cache,
                          ct_tensor **logits, ct_tensor **loss) {
    ct_tensor *lg = NULL, *ls = NULL;
    ct_scope s = ct_scope_begin();
    ct_status st = gpt2_forward_impl(m, ids, targets, cache, logits ? &lg : NULL, loss ? &ls : NULL);
    if (logits) *logits = st ? NULL : ct_keep(lg);
    if (loss) *loss = st ? NULL : ct_keep(ls);
    ct_scope_end(s);
    return st;
}

static ct_status lm_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout) {
    if (n < 1 || n > 2)
        return ct__error_status(CT_ERR_ARG, "GPT2LMHeadModel: expects (input_ids[, targets]), got %d inputs", n);
    if (nout < 1 || nout > 2 || (nout == 2 && n < 2))
        return ct__error_status(CT_ERR_ARG, "GPT2LMHeadModel: outputs are (logits[, loss]) (the loss needs "
                                            "targets); %d requested with %d inputs", nout, n);
    return ct_gpt2_forward(m, in[0], n > 1 ? in[1] : NULL, NULL, &out[0], nout > 1 ? &out[1] : NULL);
}

static ct_tensor *lm_forward(ct_module *m, ct_tensor *const *in, int n) {
    ct_tensor *out = NULL;
    return lm_forward_multi(m, in, n, &out, 1) ? NULL : out;
}
static const ct_module_class k_lm = {"GPT2LMHeadModel", sizeof(gpt_lm), lm_forward, NULL, NULL, lm_forward_multi};

ct_gpt2_config ct_gpt2_small_config(void) {
    ct_gpt2_config c = {50257, 1024, 768, 12, 12, 0, 1e-5, 0.1, 0.1, 0.1, 0.02};
    return c;
}

static ct_status check_config(const ct_gpt2_config *c) {
    if (!c) return ct__error_status(CT_ERR_NULL, "gpt2: config is NULL");
    const int64_t lim = (int64_t)1 << 31;
    if (c->vocab_size <= 0 || c->n_positions <= 0 || c->n_embd <= 0 || c->n_layer < 0 || c->n_head <= 0 ||
        c->n_inner < 0 || c->vocab_size > lim || c->n_positions > lim || c->n_embd > lim ||
        c->n_layer > 100000 || c->n_inner > lim)
        return ct__error_status(CT_ERR_ARG, "gpt2: sizes must be positive (vocab_size %lld, n_positions %lld, "
                                            "n_embd %lld, n_layer %lld, n_head %lld, n_inner %lld)",
                                (long long)c->vocab_size, (long long)c->n_positions, (long long)c->n_embd,
                                (long long)c->n_layer, (long long)c->n_head, (long long)c->n_inner);
    if (c->n_embd % c->n_head)
        return ct__error_status(CT_ERR_ARG, "gpt2: n_embd (%lld) is not a multiple of n_head (%lld)",
                                (long long)c->n_embd, (long long)c->n_head);
    double d[3] = {c->embd_pdrop, c->attn_pdrop, c->resid_pdrop};
    for (int i = 0; i < 3; i++)
        if (!(d[i] >= 0 && d[i] <= 1))
            return ct__error_status(CT_ERR_ARG, "gpt2: dropout probabilities must be in [0, 1], got %g", d[i]);
    if (!(c->layer_norm_epsilon >= 0) || !(c->initializer_range >= 0))
        return ct__error_status(CT_ERR_ARG, "gpt2: layer_norm_epsilon and initializer_range must be >= 0");
    return CT_OK;
}

static ct_module *gpt_embedding(int64_t num, int64_t dim, double range) {
    ct_module *e = ct_embedding_new(num, dim, CT_PADDING_IDX_NONE, NAN, 2.0, false);
    if (e && !ct_init_normal_(ct_module_param(e, 0), 0.0, range)) {
        ct_module_release(e);
        return NULL;
    }
    return e;
}

static ct_module *model_new(const ct_gpt2_config *c) {
    gpt_model *g = (gpt_model *)ct_module_new(&k_model);
    if (!g) return NULL;
    g->embd_pdrop = c->embd_pdrop;
    g->n_positions = c->n_positions;
    g->vocab = c->vocab_size;
    ct_module *m = &g->base;
    int err = ct__layers_add_child(m, "wte", gpt_embedding(c->vocab_size, c->n_embd, c->initializer_range), &g->wte);
    if (!err) err = ct__layers_add_child(m, "wpe", gpt_embedding(c->n_positions, c->n_embd, c->initializer_range), &g->wpe);
    if (!err) err = ct__layers_add_child(m, "drop", ct_dropout_new(c->embd_pdrop), NULL);
    if (!err) err = ct__layers_add_child(m, "h", ct_module_list_new(NULL, 0), &g->h);
    for (int64_t i = 0; i < c->n_layer && !err; i++) {
        ct_module *b = block_new(c);
        err = b ? 0 : 1;
        if (b) {
            err = ct_module_list_append(g->h, b) ? 1 : 0;
            ct_module_release(b);
        }
    }
    if (!err) err = ct__layers_add_child(m, "ln_f", gpt_layer_norm(c), &g->ln_f);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

ct_module *ct_gpt2_lm_head_model_new(const ct_gpt2_config *c) {
    if (check_config(c)) return NULL;
    gpt_lm *g = (gpt_lm *)ct_module_new(&k_lm);
    if (!g) return NULL;
    g->cfg = *c;
    ct_module *m = &g->base;
    int err = ct__layers_add_child(m, "transformer", model_new(c), &g->transformer);
    if (!err) err = ct__layers_add_child(m, "lm_head", ct_linear_new(c->n_embd, c->vocab_size, false), &g->lm_head);
    /* tie: lm_head.weight is transformer.wte.weight */
    if (!err) err = ct_module_set_param(g->lm_head, 0, ct_module_param(((gpt_model *)g->transformer)->wte, 0)) ? 1 : 0;
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- KV cache ------------------------------------------------------------------------------ */
ct_gpt2_kv_cache *ct_gpt2_kv_cache_new(ct_module *m, int64_t batch, int64_t max_len) {
    gpt_lm *g = as_lm(m, "gpt2_kv_cache_new");
    if (!g) return NULL;
    if (max_len == 0) max_len = g->cfg.n_positions;
    if (batch <= 0 || max_len < 0 || max_len > g->cfg.n_positions)
        return ct__error(CT_ERR_ARG, "gpt2_kv_cache_new: batch (%lld) must be positive and max_len (%lld) in "
                                     "[1, n_positions %lld]", (long long)batch, (long long)max_len,
                         (long long)g->cfg.n_positions);
    ct_gpt2_kv_cache *c = calloc(1, sizeof *c);
    int64_t nl = g->cfg.n_layer;
    if (c) {
        c->k = calloc((size_t)(nl ? nl : 1), sizeof(ct_tensor *));
        c->v = calloc((size_t)(nl ? nl : 1), sizeof(ct_tensor *));
    }
    if (!c || !c->k || !c->v) {
        if (c) { free(c->k); free(c->v); free(c); }
        return ct__error(CT_ERR_OOM, "gpt2_kv_cache_new: out of memory");
    }
    c->model = ct_module_retain(m);
    c->batch = batch;
    c->max_len = max_len;
    c->nl = nl;
    int64_t H = g->cfg.n_head, D = g->cfg.n_embd / H;
    ct_dtype dt = ct_get_dtype(ct_module_param(g->lm_head, 0));
    ct_scope s = ct_scope_begin();
    bool ok = true;
    for (int64_t i = 0; i < nl && ok; i++) {
        c->k[i] = ct_zeros((const int64_t[]){batch, H, max_len, D}, 4, dt);
        c->v[i] = ct_zeros((const int64_t[]){batch, H, max_len, D}, 4, dt);
        ok = c->k[i] && c->v[i];
        if (c->k[i]) ct_retain(c->k[i]);
        if (c->v[i]) ct_retain(c->v[i]);
    }
    ct_scope_end(s);
    if (!ok) {
        ct_gpt2_kv_cache_free(c);
        return NULL;
    }
    return c;
}

void ct_gpt2_kv_cache_free(ct_gpt2_kv_cache *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->nl; i++) {
        ct_release(c->k[i]);
        ct_release(c->v[i]);
    }
    free(c->k);
    free(c->v);
    ct_module_release(c->model);
    free(c);
}

int64_t ct_gpt2_kv_cache_length(const ct_gpt2_kv_cache *c) { return c ? c->len : 0; }
void ct_gpt2_kv_cache_reset(ct_gpt2_kv_cache *c) {
    if (c) c->len = 0;
}

/* ---- generation ---------------------------------------------------------------------------- */
static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* One token from a row of logits. w: scratch of 2 V doubles. */
static int64_t sample_row(const float *l, int64_t V, const ct_gpt2_generate_opts *o, uint64_t *rng, double *w) {
    int64_t best = 0;
    for (int64_t j = 1; j < V; j++)
        if (l[j] > l[best]) best = j;
    if (!(o->temperature > 0)) return best;
    double thr = -INFINITY;
    if (o->top_k > 0 && o->top_k < V) {
        double *srt = w + V;
        for (int64_t j = 0; j < V; j++) srt[j] = l[j];
        qsort(srt, (size_t)V, sizeof(double), cmp_desc);
        thr = srt[o->top_k - 1];
    }
    double mx = l[best] / o->temperature, tot = 0;
    for (int64_t j = 0; j < V; j++) {
        w[j] = (double)l[j] >= thr ? exp(l[j] / o->temperature - mx) : 0.0;
        tot += w[j];
    }
    double u = (double)(splitmix(rng) >> 11) * 0x1.0p-53 * tot, acc = 0;
    for (int64_t j = 0; j < V; j++) {
        acc += w[j];
        if (w[j] > 0 && u < acc) return j;
    }
    return best;
}

ct_tensor *ct_gpt2_generate(ct_module *m, ct_tensor *input_ids, const ct_gpt2_generate_opts *o) {
    gpt_lm *g = as_lm(m, "gpt2_generate");
    if (!g) return NULL;
    if (!input_ids || !o) return ct__error(CT_ERR_NULL, "gpt2_generate: NULL %s", o ? "input_ids" : "options");
    if (ct_ndim(input_ids) != 2 || !ct_dtype_is_integral(ct_get_dtype(input_ids), false) ||
        ct_size(input_ids, 1) < 1)
        return ct__error(CT_ERR_SHAPE, "gpt2_generate: expected input_ids [batch, seq_len >= 1] of an integer "
                                       "dtype, got %s of %s", ct__tshape(input_ids),
                         ct_dtype_name(ct_get_dtype(input_ids)));
    if (o->max_new_tokens < 0 || o->top_k < 0)
        return ct__error(CT_ERR_ARG, "gpt2_generate: max_new_tokens (%lld) and top_k (%lld) must be >= 0",
                         (long long)o->max_new_tokens, (long long)o->top_k);
    int64_t B = ct_size(input_ids, 0), T0 = ct_size(input_ids, 1), N = o->max_new_tokens;
    int64_t L = T0 + N, V = g->cfg.vocab_size, P = g->cfg.n_positions;
    ct_tensor *out = ct_empty_on((const int64_t[]){B, L}, 2, CT_I64, CT_CPU); /* filled on the host */
    if (!out) return NULL;
    int64_t *tok = ct_data_ptr(out);
    {
        ct_scope s = ct_scope_begin();
        ct_tensor *src = ct_contiguous(ct_to_dtype(input_ids, CT_I64));
        if (src)
            for (int64_t b = 0; b < B; b++) memcpy(tok + b * L, (int64_t *)ct_data_ptr(src) + b * T0, sizeof(int64_t) * (size_t)T0);
        ct_scope_end(s);
        if (!src) return NULL;
    }
    double *w = malloc(sizeof(double) * 2 * (size_t)V);
    int64_t *win = malloc(sizeof(int64_t) * (size_t)(B * (P < L ? P : L)));
    ct_gpt2_kv_cache *cache = o->use_cache ? ct_gpt2_kv_cache_new(m, B, 0) : NULL;
    bool training = ct_module_is_training(m), prev = ct_set_grad_enabled(false);
    ct_module_train(m, false);
    uint64_t rng = o->seed;
    bool ok = w && win && (!o->use_cache || cache);
    if (!w || !win) ct__error(CT_ERR_OOM, "gpt2_generate: out of memory");
    for (int64_t step = 0; step < N && ok; step++) {
        int64_t cur = T0 + step, ws = cur > P ? cur - P : 0, from = ws;
        if (cache) {
            if (ws > 0) ct_gpt2_kv_cache_reset(cache);
            else from = cache->len;
        }
        int64_t n = cur - from;
        for (int64_t b = 0; b < B; b++) memcpy(win + b * n, tok + b * L + from, sizeof(int64_t) * (size_t)n);
        ct_scope s = ct_scope_begin();
        ct_tensor *ids = ct_from_array(win, (const int64_t[]){B, n}, 2, CT_I64);
        ct_tensor *h = ids ? model_apply(g->transformer, ids, cache ? cache->len : 0, cache) : NULL;
        ct_tensor *last = ct_contiguous(ct_to_dtype(
            ct_linear(ct_select(h, 1, n - 1), ct_module_param(g->lm_head, 0), NULL), CT_F32));
        if (!last) ok = false;
        else {
            if (cache) cache->len += n;
            const float *lp = ct_data_ptr(last);
            for (int64_t b = 0; b < B; b++) tok[b * L + cur] = sample_row(lp + b * V, V, o, &rng, w);
        }
        ct_scope_end(s);
    }
    ct_module_train(m, training);
    ct_set_grad_enabled(prev);
    ct_gpt2_kv_cache_free(cache);
    free(w);
    free(win);
    return ok ? out : NULL;
}

/* ---- loading --------------------------------------------------------------------------------- */
static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

ct_status ct_gpt2_load(const char *path, ct_module *m) {
    if (!as_lm(m, "gpt2_load")) return ct_last_error_code();
    if (!path) return ct__error_status(CT_ERR_NULL, "gpt2_load: path is NULL");
    ct_sample *all = ct_safetensors_load(path);
    if (!all) return ct_last_error_code();
    ct_sample *sd = ct_sample_new();
    ct_status st = sd ? CT_OK : ct__error_status(CT_ERR_OOM, "gpt2_load: out of memory");
    for (int i = 0; i < ct_sample_count(all) && !st; i++) {
        const char *k = ct_sample_name(all, i);
        /* older transformers saved the causal-mask buffers; they are not state */
        if (ends_with(k, ".attn.bias") || ends_with(k, ".attn.masked_bias")) continue;
        st = ct_sample_set(sd, k, ct_sample_at(all, i));
    }
    ct_tensor *wte = st ? NULL : ct_sample_get(sd, "transformer.wte.weight");
    if (!st && wte && !ct_sample_get(sd, "lm_head.weight")) st = ct_sample_set(sd, "lm_head.weight", wte);
    if (!st) st = ct_module_load_state_dict(m, sd, true);
    ct_sample_free(sd);
    ct_sample_free(all);
    return st;
}
