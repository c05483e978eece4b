/* models_bert.c -- Hugging Face transformers' BertModel (and
 * BertForSequenceClassification) as ctorch modules with the same module
 * paths, hence the same state-dict keys:
 *
 *   embeddings.{word_embeddings, position_embeddings, token_type_embeddings, LayerNorm}
 *   encoder.layer.N.attention.self.{query, key, value}
 *   encoder.layer.N.attention.output.{dense, LayerNorm}
 *   encoder.layer.N.intermediate.dense
 *   encoder.layer.N.output.{dense, LayerNorm}
 *   pooler.dense
 *
 * Attention is transformers' default "sdpa" implementation of
 * BertSelfAttention: ct_scaled_dot_product_attention(q, k, v, (1 - mask) *
 * finfo.min, dropout p in training mode), which picks a fused kernel (the
 * flash/memory-efficient kernels keep no [L, L] matrix for the backward).
 *
 * Inference fast path (eval mode, nothing to record, float32 on the CPU):
 * the encoder runs as the Transformer fast path (transformer_fast.c) does,
 * on the tokens as rows of one [T, hidden] matrix: Q, K and V in one GEMM,
 * attention per sequence over its real keys only (the same as the additive
 * finfo.min mask, whose probabilities underflow to exactly 0), residual add
 * + LayerNorm in one pass.  ct_bert_forward keeps every position (padded
 * query rows attend to the real keys, as in transformers);
 * ct__bert_forward_packed (sentence embeddings) drops the padded tokens and
 * leaves zeros at their positions. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "layers_impl.h"
#include "../ops/fused_rows.h"
#include "../core/tensor_impl.h"
#include "../ops/op_table.h"
#include "ctorch/autograd.h"
#include "ctorch/models.h"
#include "transformer_impl.h"


static ct_tensor *fwd(ct_module *m, ct_tensor *x) { return ct_module_forward1(m, x); }
static ct_tensor *fwd2(ct_module *m, ct_tensor *a, ct_tensor *b) {
    ct_tensor *in[2] = {a, b};
    return ct_module_forward(m, in, b ? 2 : 1);
}

/* Set while ct__bert_model_new_for_loading builds a model whose weights a
 * checkpoint will overwrite: BERT's N(0, range) draws are skipped. */
static _Thread_local bool g_skip_init;

/* nn.Linear with BERT's init: weight ~ N(0, range), bias 0. */
static ct_module *bert_linear(int64_t in, int64_t out, double range) {
    ct_module *l = ct_linear_new(in, out, true);
    if (!l || g_skip_init) return l;
    if (!ct_init_normal_(ct_module_param(l, 0), 0.0, range) || !ct_init_zeros_(ct_module_param(l, 1))) {
        ct_module_release(l);
        return NULL;
    }
    return l;
}

/* nn.Embedding with BERT's init: N(0, range), padding row zeroed. */
static ct_module *bert_embedding(int64_t num, int64_t dim, int64_t padding_idx, double range) {
    ct_module *e = ct_embedding_new(num, dim, padding_idx < 0 ? CT_PADDING_IDX_NONE : padding_idx,
                                    NAN, 2.0, false);
    if (!e || g_skip_init) return e;
    ct_tensor *w = ct_module_param(e, 0);
    bool ok = ct_init_normal_(w, 0.0, range) != NULL;
    if (ok && padding_idx >= 0) {
        ct_scope s = ct_scope_begin();
        bool prev = ct_set_grad_enabled(false);
        ok = ct_zero_(ct_select(w, 0, padding_idx)) != NULL;
        ct_set_grad_enabled(prev);
        ct_scope_end(s);
    }
    if (!ok) {
        ct_module_release(e);
        return NULL;
    }
    return e;
}

static ct_module *bert_layer_norm(const ct_bert_config *c) {
    return ct_layer_norm_new(&c->hidden_size, 1, c->layer_norm_eps, true, true);
}

/* ---- BertEmbeddings ---------------------------------------------------------- */
typedef struct bert_emb {
    ct_module base;
    ct_module *word, *pos, *type, *ln, *drop;
    int pos_slot;   /* non-persistent buffer position_ids [1, max_pos] */
} bert_emb;

/* inputs: input_ids [B, L], token_type_ids [B, L] */
static ct_tensor *emb_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_emb *e = (bert_emb *)m;
    if (n != 2) return ct__error(CT_ERR_ARG, "BertEmbeddings: expects (input_ids, token_type_ids), got %d inputs", n);
    int64_t L = ct_size(in[0], 1);
    ct_tensor *pos = ct_slice(ct_module_buffer(m, e->pos_slot), 1, 0, L, 1);
    ct_tensor *x = ct_add(fwd(e->word, in[0]), fwd(e->type, in[1]));
    x = ct_add(x, fwd(e->pos, pos));
    return fwd(e->drop, fwd(e->ln, x));
}
static const ct_module_class k_emb = {"BertEmbeddings", sizeof(bert_emb), emb_forward, NULL, NULL, NULL};

/* position_ids = arange(max_pos)[None], again after ct_module_to from meta
 * (a non-persistent buffer: no state dict restores it) */
static ct_status position_ids_init(ct_tensor *t) {
    if (!ct__need_data("BertEmbeddings.position_ids", t)) return ct_last_error_code();
    int64_t *p = ct__ptr(t), n = ct_numel(t);
    for (int64_t i = 0; i < n; i++) p[i] = i;
    return CT_OK;
}

static ct_module *emb_new(const ct_bert_config *c) {
    bert_emb *e = (bert_emb *)ct_module_new(&k_emb);
    if (!e) return NULL;
    ct_module *m = &e->base;
    int err = ct__layers_add_child(m, "word_embeddings",
                        bert_embedding(c->vocab_size, c->hidden_size, c->pad_token_id, c->initializer_range),
                        &e->word);
    if (!err) err |= ct__layers_add_child(m, "position_embeddings",
                               bert_embedding(c->max_position_embeddings, c->hidden_size, -1,
                                              c->initializer_range), &e->pos);
    if (!err) err |= ct__layers_add_child(m, "token_type_embeddings",
                               bert_embedding(c->type_vocab_size, c->hidden_size, -1, c->initializer_range),
                               &e->type);
    if (!err) err |= ct__layers_add_child(m, "LayerNorm", bert_layer_norm(c), &e->ln);
    if (!err) err |= ct__layers_add_child(m, "dropout", ct_dropout_new(c->hidden_dropout_prob), &e->drop);
    if (!err) {
        ct_scope s = ct_scope_begin();
        ct_tensor *ids = ct_unsqueeze(ct_arange(0, (double)c->max_position_embeddings, 1, CT_I64), 0);
        e->pos_slot = ids ? ct_module_register_buffer(m, "position_ids", ids, false) : -1;
        ct_scope_end(s);
        if (e->pos_slot < 0 || ct__module_buffer_init(m, e->pos_slot, position_ids_init)) err = 1;
    }
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- BertSelfAttention --------------------------------------------------------- */
typedef struct bert_self {
    ct_module base;
    ct_module *q, *k, *v, *drop;
    int64_t heads, head_size;
    double attn_drop; /* attention_probs_dropout_prob */
    /* the inference fast path's packed projection (pk_w: the q, k, v
     * weights concatenated, [3H, H]; pk_b: the biases): made at first use
     * and kept while the six source storages hold the same data (uid,
     * version, exposed count: an optimizer step, a state-dict load or a
     * write through ct_data_ptr remakes it), so a forward does not copy
     * 7 MB per layer and the GEMM's packed-weight cache can keep pk_w */
    pthread_mutex_t pk_mu;
    ct_tensor *pk_w, *pk_b;
    uint64_t pk_uid[6];
    long long pk_ver[6], pk_exp[6];
} bert_self;

/* [B, L, H] -> [B, heads, L, head_size] */
static ct_tensor *split_heads(bert_self *s, ct_tensor *x) {
    if (!x) return NULL;
    int64_t shape[4] = {ct_size(x, 0), ct_size(x, 1), s->heads, s->head_size};
    return ct_permute(ct_view(x, shape, 4), (const int64_t[]){0, 2, 1, 3}, 4);
}

/* inputs: hidden [B, L, H] and optionally the additive mask [B, 1, 1, L] */
static ct_tensor *self_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_self *s = (bert_self *)m;
    if (n != 1 && n != 2)
        return ct__error(CT_ERR_ARG, "BertSelfAttention: expects (hidden_states[, mask]), got %d inputs", n);
    ct_tensor *h = in[0];
    if (ct_ndim(h) != 3)
        return ct__error(CT_ERR_SHAPE, "BertSelfAttention: expected hidden states [B, L, H], got %d dims",
                         ct_ndim(h));
    ct_tensor *q = split_heads(s, fwd(s->q, h));
    ct_tensor *k = split_heads(s, fwd(s->k, h));
    ct_tensor *v = split_heads(s, fwd(s->v, h));
    /* the fused attention (transformers' "sdpa" implementation, its default):
     * same math as softmax(q k^T / sqrt(d) + mask) v, with the attention
     * dropout inside the kernel in training mode */
    double p = ct_module_is_training(m) ? s->attn_drop : 0.0;
    ct_tensor *att = ct_scaled_dot_product_attention(q, k, v, n == 2 ? in[1] : NULL, p, false, 0.0, false);
    ct_tensor *ctx = ct_contiguous(ct_permute(att, (const int64_t[]){0, 2, 1, 3}, 4));
    if (!ctx) return NULL;
    int64_t shape[3] = {ct_size(ctx, 0), ct_size(ctx, 1), s->heads * s->head_size};
    return ct_view(ctx, shape, 3);
}
static void self_destroy(ct_module *m) {
    bert_self *s = (bert_self *)m;
    ct_release(s->pk_w);
    ct_release(s->pk_b);
    pthread_mutex_destroy(&s->pk_mu);
}
static const ct_module_class k_self = {"BertSelfAttention", sizeof(bert_self), self_forward, NULL, self_destroy,
                                       NULL};

/* ---- BertSelfOutput / BertOutput: LayerNorm(dropout(dense(h)) + input) -------- */
typedef struct bert_out {
    ct_module base;
    ct_module *dense, *ln, *drop;
} bert_out;

static ct_tensor *out_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_out *o = (bert_out *)m;
    if (n != 2) return ct__error(CT_ERR_ARG, "%s: expects (hidden_states, input_tensor), got %d inputs",
                                 m->cls->name, n);
    return fwd(o->ln, ct_add(fwd(o->drop, fwd(o->dense, in[0])), in[1]));
}
static const ct_module_class k_self_out = {"BertSelfOutput", sizeof(bert_out), out_forward, NULL, NULL, NULL};
static const ct_module_class k_out = {"BertOutput", sizeof(bert_out), out_forward, NULL, NULL, NULL};

static ct_module *out_new(const ct_module_class *cls, const ct_bert_config *c, int64_t in) {
    bert_out *o = (bert_out *)ct_module_new(cls);
    if (!o) return NULL;
    ct_module *m = &o->base;
    int err = ct__layers_add_child(m, "dense", bert_linear(in, c->hidden_size, c->initializer_range), &o->dense);
    if (!err) err |= ct__layers_add_child(m, "LayerNorm", bert_layer_norm(c), &o->ln);
    if (!err) err |= ct__layers_add_child(m, "dropout", ct_dropout_new(c->hidden_dropout_prob), &o->drop);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- BertAttention ------------------------------------------------------------- */
typedef struct bert_attn {
    ct_module base;
    ct_module *self, *output;
} bert_attn;

static ct_tensor *attn_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_attn *a = (bert_attn *)m;
    if (n != 1 && n != 2)
        return ct__error(CT_ERR_ARG, "BertAttention: expects (hidden_states[, mask]), got %d inputs", n);
    return fwd2(a->output, ct_module_forward(a->self, in, n), in[0]);
}
static const ct_module_class k_attn = {"BertAttention", sizeof(bert_attn), attn_forward, NULL, NULL, NULL};

static ct_module *attn_new(const ct_bert_config *c) {
    bert_attn *a = (bert_attn *)ct_module_new(&k_attn);
    if (!a) return NULL;
    ct_module *m = &a->base;
    bert_self *s = (bert_self *)ct_module_new(&k_self);
    int err = s ? 0 : 1;
    if (s) {
        pthread_mutex_init(&s->pk_mu, NULL);
        s->heads = c->num_attention_heads;
        s->head_size = c->hidden_size / c->num_attention_heads;
        s->attn_drop = c->attention_probs_dropout_prob;
        ct_module *sm = &s->base;
        double r = c->initializer_range;
        err |= ct__layers_add_child(sm, "query", bert_linear(c->hidden_size, c->hidden_size, r), &s->q);
        if (!err) err |= ct__layers_add_child(sm, "key", bert_linear(c->hidden_size, c->hidden_size, r), &s->k);
        if (!err) err |= ct__layers_add_child(sm, "value", bert_linear(c->hidden_size, c->hidden_size, r), &s->v);
        if (!err) err |= ct__layers_add_child(sm, "dropout", ct_dropout_new(c->attention_probs_dropout_prob), &s->drop);
        if (err) ct_module_release(sm);
        else err |= ct__layers_add_child(m, "self", sm, &a->self);
    }
    if (!err) err |= ct__layers_add_child(m, "output", out_new(&k_self_out, c, c->hidden_size), &a->output);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- BertIntermediate: gelu(dense(h)) ------------------------------------------ */
typedef struct bert_inter {
    ct_module base;
    ct_module *dense;
} bert_inter;

static ct_tensor *inter_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (n != 1) return ct__error(CT_ERR_ARG, "BertIntermediate: expects 1 input, got %d", n);
    return ct_gelu(fwd(((bert_inter *)m)->dense, in[0]), CT_GELU_NONE);
}
static const ct_module_class k_inter = {"BertIntermediate", sizeof(bert_inter), inter_forward, NULL, NULL, NULL};

/* ---- BertLayer ------------------------------------------------------------------ */
typedef struct bert_layer {
    ct_module base;
    ct_module *attention, *intermediate, *output;
} bert_layer;

static ct_tensor *layer_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_layer *l = (bert_layer *)m;
    if (n != 1 && n != 2)
        return ct__error(CT_ERR_ARG, "BertLayer: expects (hidden_states[, mask]), got %d inputs", n);
    ct_tensor *a = ct_module_forward(l->attention, in, n);
    return fwd2(l->output, fwd(l->intermediate, a), a);
}
static const ct_module_class k_layer = {"BertLayer", sizeof(bert_layer), layer_forward, NULL, NULL, NULL};

static ct_module *layer_new(const ct_bert_config *c) {
    bert_layer *l = (bert_layer *)ct_module_new(&k_layer);
    if (!l) return NULL;
    ct_module *m = &l->base;
    int err = ct__layers_add_child(m, "attention", attn_new(c), &l->attention);
    if (!err) {
        bert_inter *it = (bert_inter *)ct_module_new(&k_inter);
        err |= it ? 0 : 1;
        if (it) {
            err |= ct__layers_add_child(&it->base, "dense",
                             bert_linear(c->hidden_size, c->intermediate_size, c->initializer_range), &it->dense);
            if (err) ct_module_release(&it->base);
            else err |= ct__layers_add_child(m, "intermediate", &it->base, &l->intermediate);
        }
    }
    if (!err) err |= ct__layers_add_child(m, "output", out_new(&k_out, c, c->intermediate_size), &l->output);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* ---- BertEncoder ----------------------------------------------------------------- */
typedef struct bert_enc {
    ct_module base;
    ct_module *layer; /* ModuleList */
} bert_enc;

static ct_tensor *enc_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_enc *e = (bert_enc *)m;
    if (n != 1 && n != 2)
        return ct__error(CT_ERR_ARG, "BertEncoder: expects (hidden_states[, mask]), got %d inputs", n);
    ct_tensor *h = in[0];
    int nl = ct_module_num_children(e->layer);
    for (int i = 0; i < nl && h; i++) h = fwd2(ct_module_child(e->layer, i), h, n == 2 ? in[1] : NULL);
    return h;
}
static const ct_module_class k_enc = {"BertEncoder", sizeof(bert_enc), enc_forward, NULL, NULL, NULL};

/* ---- BertPooler: tanh(dense(h[:, 0])) --------------------------------------------- */
typedef struct bert_pool {
    ct_module base;
    ct_module *dense, *act;
} bert_pool;

static ct_tensor *pool_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_pool *p = (bert_pool *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "BertPooler: expects 1 input, got %d", n);
    return fwd(p->act, fwd(p->dense, ct_select(in[0], 1, 0)));
}
static const ct_module_class k_pool = {"BertPooler", sizeof(bert_pool), pool_forward, NULL, NULL, NULL};

/* ---- BertModel ------------------------------------------------------------------- */
typedef struct bert_model {
    ct_module base;
    ct_module *embeddings, *encoder, *pooler;
    int64_t max_pos;
    double eps;
} bert_model;

/* ---- inference fast path --------------------------------------------------------- */
static ct_status note_training(ct_module *m, void *user) {
    if (ct_module_is_training(m)) *(bool *)user = true;
    return CT_OK;
}

/* meta h: ct_compile's trace, which records the fast path's ops when
 * there is no attention mask (with one, the path reads the mask's values) */
static bool fast_ok(bert_model *b, ct_tensor *h, bool masked) {
    ct_device dev = h ? ct_get_device(h) : CT_CPU;
    if (!h || ct_get_dtype(h) != CT_F32 || (dev != CT_CPU && !(dev == CT_META && !masked)) || ct_ndim(h) != 3 ||
        ct_numel(h) == 0)
        return false;
    bool training = false;
    if (ct_module_apply(b->encoder, note_training, &training) != CT_OK || training) return false;
    ct_tensor *ps[256];
    int np = ct_module_named_parameters(b->encoder, NULL, ps, 256);
    if (np > 256) return false;
    for (int i = 0; i < np; i++) {
        /* (tracing, the weights read as meta too) */
        if (ct_get_dtype(ps[i]) != CT_F32 || ct_get_device(ps[i]) != dev || !ct_is_contiguous(ps[i]))
            return false;
        if (ct_is_grad_enabled() && ct_requires_grad(ps[i])) return false;
    }
    if (ct__fw_on(&h, 1) || ct__fw_on(ps, np)) return false; /* forward AD: the layers' ops */
    return !(ct_is_grad_enabled() && ct_requires_grad(h));
}

static float *fptr(ct_tensor *t) { return t ? (float *)ct_data_ptr(t) : NULL; }

typedef ct__tfm_seqs bseqs;

/* The packed q/k/v weight and bias into w, b (new references, NULL +
 * error on failure): sa's kept copies when their sources have not changed
 * since, else made again (and kept, unless a source has no uid: a user
 * buffer).  Tracing (meta X) concatenates as ops, so that the compiled
 * graph reads the parameters at each call. */
static ct_status packed_qkv(bert_self *sa, bool trace, ct_tensor **w, ct_tensor **b) {
    ct_tensor *src[6] = {ct_module_param(sa->q, 0), ct_module_param(sa->k, 0), ct_module_param(sa->v, 0),
                         ct_module_param(sa->q, 1), ct_module_param(sa->k, 1), ct_module_param(sa->v, 1)};
    *w = *b = NULL;
    bool keep = !trace;
    for (int i = 0; i < 6; i++) {
        if (!src[i]) return ct__error_status(CT_ERR_ARG, "BertSelfAttention: a projection parameter is missing");
        if (!src[i]->storage || !src[i]->storage->uid) keep = false;
    }
    if (keep) {
        pthread_mutex_lock(&sa->pk_mu);
        bool fresh = sa->pk_w && sa->pk_b;
        for (int i = 0; i < 6 && fresh; i++) {
            ct_storage *st = src[i]->storage;
            fresh = sa->pk_uid[i] == st->uid && sa->pk_ver[i] == atomic_load(&st->version) &&
                    sa->pk_exp[i] == atomic_load(&st->exposed);
        }
        if (fresh) {
            *w = ct_retain(sa->pk_w);
            *b = ct_retain(sa->pk_b);
        }
        pthread_mutex_unlock(&sa->pk_mu);
        if (fresh) return CT_OK;
    }
    /* stamps before the copy: a write racing with it leaves them stale */
    uint64_t uid[6];
    long long ver[6], exp[6];
    for (int i = 0; i < 6; i++) {
        ct_storage *st = src[i]->storage;
        uid[i] = st ? st->uid : 0;
        ver[i] = st ? atomic_load(&st->version) : 0;
        exp[i] = st ? atomic_load(&st->exposed) : 0;
    }
    ct_scope sc = ct_scope_begin();
    ct_tensor *cw = ct_cat(src, 3, 0), *cb = ct_cat(src + 3, 3, 0);
    if (cw && cb) {
        *w = ct_retain(cw);
        *b = ct_retain(cb);
    }
    ct_scope_end(sc);
    if (!*w) return ct_last_error_code();
    if (keep) {
        pthread_mutex_lock(&sa->pk_mu);
        ct_release(sa->pk_w);
        ct_release(sa->pk_b);
        sa->pk_w = ct_retain(*w);
        sa->pk_b = ct_retain(*b);
        memcpy(sa->pk_uid, uid, sizeof uid);
        memcpy(sa->pk_ver, ver, sizeof ver);
        memcpy(sa->pk_exp, exp, sizeof exp);
        pthread_mutex_unlock(&sa->pk_mu);
    }
    return CT_OK;
}

/* One BertLayer on X [T, d] (contiguous).  Returns the new X or NULL. */
static ct_tensor *fast_layer(bert_layer *ly, ct_tensor *X, const bseqs *sq, double eps) {
    bert_attn *at = (bert_attn *)ly->attention;
    bert_self *sa = (bert_self *)at->self;
    bert_out *ao = (bert_out *)at->output, *oo = (bert_out *)ly->output;
    bert_inter *it = (bert_inter *)ly->intermediate;
    int64_t H = sa->heads, hd = sa->head_size;
    ct_scope s = ct_scope_begin();
    ct_tensor *r = NULL;
    /* packed QKV projection: one GEMM, rows laid out [T, 3, H, hd] */
    bool tr = ct_get_device(X) == CT_META;
    ct_tensor *w = NULL, *bias = NULL;
    if (packed_qkv(sa, tr, &w, &bias)) goto done;
    ct_tensor *qkv = ct_contiguous(ct_linear(X, w, bias));
    ct_release(w);
    ct_release(bias);
    ct_tensor *attn = qkv ? ct__tfm_packed_attention(sq, qkv, H, hd) : NULL;
    if (!attn) goto done;
    /* attention.output: LayerNorm(dense(attn) + X), add + norm in one pass */
    ct_tensor *proj = ct_contiguous(ct_linear(attn, ct_module_param(ao->dense, 0), ct_module_param(ao->dense, 1)));
    if (!proj) goto done;
    /* in place, except on meta (ct_compile's trace records the fused rows
     * as single nodes only out of place, see fused_rows.c) */
    ct_tensor *X1 = ct__add_layer_norm(X, proj, ct_module_param(ao->ln, 0), ct_module_param(ao->ln, 1), eps, NULL,
                                       tr ? NULL : proj);
    if (!X1) goto done;
    /* intermediate: gelu(dense(X1)), the bias and the GELU in one pass;
     * output: LayerNorm(dense(h) + X1) */
    ct_tensor *h = ct_contiguous(ct_linear(X1, ct_module_param(it->dense, 0), NULL));
    if (h) h = ct__bias_act(h, ct_module_param(it->dense, 1), CT_EWA_GELU, true, tr ? NULL : h);
    ct_tensor *y = h ? ct_contiguous(ct_linear(h, ct_module_param(oo->dense, 0), ct_module_param(oo->dense, 1))) : NULL;
    if (!y) goto done;
    r = ct__add_layer_norm(X1, y, ct_module_param(oo->ln, 0), ct_module_param(oo->ln, 1), eps, NULL, tr ? NULL : y);
done:
    r = ct_keep(r);
    ct_scope_end(s);
    return r;
}

/* The encoder on h [B, L, d] (embeddings output) with the 0/1 mask mk
 * [B, L] (NULL: none).  pack: only the real tokens (zeros at the padded
 * positions of the result).  NULL + error on failure. */
static ct_tensor *fast_encoder(bert_model *b, ct_tensor *h, const float *mk, bool pack) {
    bert_enc *e = (bert_enc *)b->encoder;
    int64_t N = ct_size(h, 0), L = ct_size(h, 1), d = ct_size(h, 2);
    ct_scope s = ct_scope_begin();
    ct_tensor *out = NULL;
    if (!mk) {
        /* no mask: the rows are h's tokens in order (a view), so that
         * ct_compile's trace (on meta tensors) records the path as ops */
        ct_tensor *X = ct_contiguous(ct_reshape(h, (int64_t[]){N * L, d}, 2));
        bseqs su = {N, L, N * L, NULL, NULL, NULL, true};
        int nl = ct_module_num_children(e->layer);
        for (int i = 0; i < nl && X; i++) {
            ct_scope s2 = ct_scope_begin();
            X = ct_keep(fast_layer((bert_layer *)ct_module_child(e->layer, i), X, &su, b->eps));
            ct_scope_end(s2);
        }
        out = X ? ct_keep(ct_view(X, (int64_t[]){N, L, d}, 3)) : NULL;
        ct_scope_end(s);
        return out;
    }
    bseqs sq = {N, L, 0, calloc((size_t)N + 1, sizeof(int64_t)), calloc((size_t)N + 1, sizeof(int64_t)), NULL,
                true};
    int64_t *rowsrc = NULL, *buf = NULL;
    if (!sq.off || !sq.cnt) goto oom;
    for (int64_t n = 0; n < N; n++) {
        int64_t real = 0;
        for (int64_t t = 0; t < L; t++) real += mk ? mk[n * L + t] != 0.f : 1;
        if (real < L) sq.uniform = false;
        sq.cnt[n] = pack ? real : L;
        sq.off[n + 1] = sq.off[n] + sq.cnt[n];
    }
    sq.T = sq.off[N];
    rowsrc = malloc(sizeof(int64_t) * (size_t)(sq.T > 0 ? sq.T : 1));
    if (!rowsrc) goto oom;
    for (int64_t n = 0, r = 0; n < N; n++)
        for (int64_t t = 0; t < L; t++)
            if (!pack || !mk || mk[n * L + t] != 0.f) rowsrc[r++] = n * L + t;
    if (!sq.uniform && !pack) {
        sq.keys = calloc((size_t)N, sizeof(ct_tensor *));
        buf = malloc(sizeof(int64_t) * (size_t)L);
        if (!sq.keys || !buf) goto oom;
        for (int64_t n = 0; n < N; n++) {
            int64_t k = 0;
            for (int64_t t = 0; t < L; t++)
                if (mk[n * L + t] != 0.f) buf[k++] = t;
            if (k < L && !(sq.keys[n] = ct_from_array(buf, &k, 1, CT_I64))) goto done;
        }
    }
    ct_tensor *xs = ct_contiguous(h), *X = ct_empty_on((int64_t[]){sq.T, d}, 2, CT_F32, CT_CPU);
    if (!xs || !X) goto done;
    const float *sp = fptr(xs);
    float *xp = fptr(X);
#pragma omp parallel for schedule(static) if (sq.T * d >= 65536)
    for (int64_t r = 0; r < sq.T; r++) memcpy(xp + r * d, sp + rowsrc[r] * d, sizeof(float) * (size_t)d);
    int nl = ct_module_num_children(e->layer);
    for (int i = 0; i < nl && X; i++) {
        ct_scope s2 = ct_scope_begin();
        X = ct_keep(fast_layer((bert_layer *)ct_module_child(e->layer, i), X, &sq, b->eps));
        ct_scope_end(s2);
    }
    if (!X) goto done;
    if (!pack || sq.T == N * L) {
        out = ct_view(X, (int64_t[]){N, L, d}, 3);
        goto done;
    }
    out = ct_zeros_on((int64_t[]){N, L, d}, 3, CT_F32, CT_CPU);
    if (!out) goto done;
    float *op = fptr(out);
    xp = fptr(X);
#pragma omp parallel for schedule(static) if (sq.T * d >= 65536)
    for (int64_t r = 0; r < sq.T; r++) memcpy(op + rowsrc[r] * d, xp + r * d, sizeof(float) * (size_t)d);
    goto done;
oom:
    ct__error(CT_ERR_OOM, "BertModel: out of memory");
done:
    out = ct_keep(out);
    ct_scope_end(s);
    free(sq.off);
    free(sq.cnt);
    free(sq.keys);
    free(rowsrc);
    free(buf);
    return out;
}

/* The mask as float 0/1 values [B, L] if every value is 0 or 1 and every
 * sequence has a real token (else NULL, no error: the general path). */
static ct_tensor *fast_mask(ct_tensor *mask) {
    ct_tensor *m = ct_contiguous(ct_to_dtype(mask, CT_F32));
    if (!m) return NULL; /* the general path reports it */
    const float *p = fptr(m);
    int64_t B = ct_size(m, 0), L = ct_size(m, 1);
    for (int64_t n = 0; n < B; n++) {
        bool any = false;
        for (int64_t t = 0; t < L; t++) {
            float v = p[n * L + t];
            if (v != 0.f && v != 1.f) return NULL;
            any |= v != 0.f;
        }
        if (!any) return NULL;
    }
    return m;
}

static const ct_module_class k_bert;

static ct_status bert_forward_impl(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor *tt,
                                   ct_tensor **last_hidden, ct_tensor **pooled, bool pack) {
    if (!m || !ids) return ct__error_status(CT_ERR_NULL, "bert_forward: NULL %s", m ? "input_ids" : "module");
    if (m->cls != &k_bert)
        return ct__error_status(CT_ERR_ARG, "bert_forward: expected a BertModel, got %s", m->cls->name);
    bert_model *b = (bert_model *)m;
    if (pooled && !b->pooler)
        return ct__error_status(CT_ERR_ARG, "bert_forward: this BertModel has no pooler (add_pooling_layer=false)");
    if (ct_ndim(ids) != 2 || !ct_dtype_is_integral(ct_get_dtype(ids), false))
        return ct__error_status(CT_ERR_SHAPE, "BertModel: expected input_ids [batch, seq_len] of an integer "
                                              "dtype, got %d dims of %s",
                                ct_ndim(ids), ct_dtype_name(ct_get_dtype(ids)));
    int64_t B = ct_size(ids, 0), L = ct_size(ids, 1);
    if (L > b->max_pos)
        return ct__error_status(CT_ERR_SHAPE, "BertModel: sequence length %lld exceeds "
                                              "max_position_embeddings %lld", (long long)L, (long long)b->max_pos);
    for (int i = 0; i < 2; i++) {
        ct_tensor *t = i ? tt : mask;
        if (t && (ct_ndim(t) != 2 || ct_size(t, 0) != B || ct_size(t, 1) != L))
            return ct__error_status(CT_ERR_SHAPE, "BertModel: %s must be [%lld, %lld] like input_ids",
                                    i ? "token_type_ids" : "attention_mask", (long long)B, (long long)L);
    }
    if (!tt) tt = ct_zeros_like(ids);
    ct_tensor *h = ct_module_forward(b->embeddings, (ct_tensor *const[]){ids, tt}, 2);
    ct_tensor *mf = NULL;
    if (h && fast_ok(b, h, mask != NULL) && (!mask || (mf = fast_mask(mask)))) {
        h = fast_encoder(b, h, mf ? fptr(mf) : NULL, pack);
    } else {
        ct_tensor *ext = NULL;
        if (mask) {
            /* (1 - mask[:, None, None, :]) * finfo(dtype).min, in the hidden dtype */
            ct_dtype dt = h ? ct_get_dtype(h) : CT_F32;
            double mn = dt == CT_F64 ? -DBL_MAX : -FLT_MAX;
            ct_tensor *m4 = ct_reshape(ct_to_dtype(mask, dt), (const int64_t[]){B, 1, 1, L}, 4);
            ext = ct_mul_scalar(ct_add_scalar(ct_neg(m4), 1.0), mn);
            if (!ext) return ct_last_error_code();
        }
        h = fwd2(b->encoder, h, ext);
    }
    if (!h) return ct_last_error_code();
    if (pooled) {
        *pooled = fwd(b->pooler, h);
        if (!*pooled) return ct_last_error_code();
    }
    if (last_hidden) *last_hidden = h;
    return CT_OK;
}

/* bert_forward_impl in a scope of its own: only the results outlive it */
static ct_status bert_forward_scoped(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor *tt,
                                     ct_tensor **last_hidden, ct_tensor **pooled, bool pack) {
    ct_tensor *lh = NULL, *pl = NULL;
    ct_scope s = ct_scope_begin();
    ct_status st = bert_forward_impl(m, ids, mask, tt, &lh, pooled ? &pl : NULL, pack);
    if (last_hidden) *last_hidden = st ? NULL : ct_keep(lh);
    if (pooled) *pooled = st ? NULL : ct_keep(pl);
    ct_scope_end(s);
    return st;
}

ct_status ct_bert_forward(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor *tt,
                          ct_tensor **last_hidden, ct_tensor **pooled) {
    return bert_forward_scoped(m, ids, mask, tt, last_hidden, pooled, false);
}

/* For sentence embeddings (models_sentence.c): last_hidden_state where the
 * positions with mask 0 may hold zeros instead of their values (the
 * inference fast path computes only the real tokens); the real positions
 * are ct_bert_forward's. */
ct_status ct__bert_forward_packed(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor **last_hidden);
ct_status ct__bert_forward_packed(ct_module *m, ct_tensor *ids, ct_tensor *mask, ct_tensor **last_hidden) {
    return bert_forward_scoped(m, ids, mask, NULL, last_hidden, NULL, true);
}

static ct_status bert_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout) {
    if (n < 1 || n > 3)
        return ct__error_status(CT_ERR_ARG, "BertModel: expects (input_ids[, attention_mask[, token_type_ids]]), "
                                            "got %d inputs", n);
    if (nout < 1 || nout > 2)
        return ct__error_status(CT_ERR_ARG, "BertModel: has 2 outputs (last_hidden_state, pooler_output), "
                                            "%d requested", nout);
    return ct_bert_forward(m, in[0], n > 1 ? in[1] : NULL, n > 2 ? in[2] : NULL, &out[0],
                           nout > 1 ? &out[1] : NULL);
}

static ct_tensor *bert_forward1(ct_module *m, ct_tensor *const *in, int n) {
    ct_tensor *out = NULL;
    return bert_forward_multi(m, in, n, &out, 1) ? NULL : out;
}

static const ct_module_class k_bert = {"BertModel", sizeof(bert_model), bert_forward1, NULL, NULL,
                                       bert_forward_multi};

ct_bert_config ct_bert_base_config(void) {
    ct_bert_config c = {30522, 768, 12, 12, 3072, 512, 2, 0, 1e-12, 0.1, 0.1, 0.02};
    return c;
}

static ct_status check_config(const ct_bert_config *c) {
    if (!c) return ct__error_status(CT_ERR_NULL, "bert: config is NULL");
    const int64_t lim = (int64_t)1 << 31;
    if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->num_hidden_layers < 0 ||
        c->num_attention_heads <= 0 || c->intermediate_size <= 0 || c->max_position_embeddings <= 0 ||
        c->type_vocab_size <= 0 || c->vocab_size > lim || c->hidden_size > lim ||
        c->num_hidden_layers > 100000 || c->intermediate_size > lim || c->max_position_embeddings > lim ||
        c->type_vocab_size > lim)
        return ct__error_status(CT_ERR_ARG, "bert: sizes must be positive (vocab %lld, hidden %lld, layers %lld, "
                                            "heads %lld, intermediate %lld, max positions %lld, type vocab %lld)",
                                (long long)c->vocab_size, (long long)c->hidden_size,
                                (long long)c->num_hidden_layers, (long long)c->num_attention_heads,
                                (long long)c->intermediate_size, (long long)c->max_position_embeddings,
                                (long long)c->type_vocab_size);
    if (c->hidden_size % c->num_attention_heads)
        return ct__error_status(CT_ERR_ARG, "bert: The hidden size (%lld) is not a multiple of the number of "
                                            "attention heads (%lld)",
                                (long long)c->hidden_size, (long long)c->num_attention_heads);
    if (c->pad_token_id < -1 || c->pad_token_id >= c->vocab_size)
        return ct__error_status(CT_ERR_ARG, "bert: pad_token_id %lld out of range for vocab_size %lld",
                                (long long)c->pad_token_id, (long long)c->vocab_size);
    if (!(c->layer_norm_eps >= 0) || !(c->initializer_range >= 0) || !(c->hidden_dropout_prob >= 0) ||
        !(c->hidden_dropout_prob <= 1) || !(c->attention_probs_dropout_prob >= 0) ||
        !(c->attention_probs_dropout_prob <= 1))
        return ct__error_status(CT_ERR_ARG, "bert: layer_norm_eps and initializer_range must be >= 0 and "
                                            "dropout probabilities in [0, 1]");
    return CT_OK;
}

ct_module *ct_bert_model_new(const ct_bert_config *c, bool add_pooling_layer) {
    if (check_config(c)) return NULL;
    bert_model *b = (bert_model *)ct_module_new(&k_bert);
    if (!b) return NULL;
    b->max_pos = c->max_position_embeddings;
    b->eps = c->layer_norm_eps;
    ct_module *m = &b->base;
    int err = ct__layers_add_child(m, "embeddings", emb_new(c), &b->embeddings);
    if (!err) {
        bert_enc *e = (bert_enc *)ct_module_new(&k_enc);
        err |= e ? 0 : 1;
        if (e) {
            err |= ct__layers_add_child(&e->base, "layer", ct_module_list_new(NULL, 0), &e->layer);
            for (int64_t i = 0; i < c->num_hidden_layers && !err; i++) {
                ct_module *l = layer_new(c);
                err |= l ? 0 : 1;
                if (l) {
                    err |= ct_module_list_append(e->layer, l) ? 1 : 0;
                    ct_module_release(l);
                }
            }
            if (err) ct_module_release(&e->base);
            else err |= ct__layers_add_child(m, "encoder", &e->base, &b->encoder);
        }
    }
    if (!err && add_pooling_layer) {
        bert_pool *p = (bert_pool *)ct_module_new(&k_pool);
        err |= p ? 0 : 1;
        if (p) {
            err |= ct__layers_add_child(&p->base, "dense", bert_linear(c->hidden_size, c->hidden_size, c->initializer_range),
                             &p->dense);
            if (!err) err |= ct__layers_add_child(&p->base, "activation", ct_tanh_new(), &p->act);
            if (err) ct_module_release(&p->base);
            else err |= ct__layers_add_child(m, "pooler", &p->base, &b->pooler);
        }
    }
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}

/* For loaders (models_sentence.c): the same model without BERT's random
 * init (the layers keep their default init), for a checkpoint to fill. */
ct_module *ct__bert_model_new_for_loading(const ct_bert_config *c, bool add_pooling_layer);
ct_module *ct__bert_model_new_for_loading(const ct_bert_config *c, bool add_pooling_layer) {
    bool prev = g_skip_init;
    g_skip_init = true;
    ct_module *m = ct_bert_model_new(c, add_pooling_layer);
    g_skip_init = prev;
    return m;
}

/* ---- BertForSequenceClassification ------------------------------------------------ */
typedef struct bert_cls {
    ct_module base;
    ct_module *bert, *drop, *classifier;
} bert_cls;

static ct_tensor *cls_forward(ct_module *m, ct_tensor *const *in, int n) {
    bert_cls *c = (bert_cls *)m;
    ct_tensor *out[2] = {0};
    if (ct_module_forward_multi(c->bert, in, n, out, 2)) return NULL;
    return fwd(c->classifier, fwd(c->drop, out[1]));
}
static const ct_module_class k_cls = {"BertForSequenceClassification", sizeof(bert_cls), cls_forward, NULL,
                                      NULL, NULL};

ct_module *ct_bert_for_sequence_classification_new(const ct_bert_config *c, int64_t num_labels) {
    if (check_config(c)) return NULL;
    if (num_labels <= 0)
        return ct__error(CT_ERR_ARG, "bert_for_sequence_classification_new: num_labels must be positive, "
                                     "got %lld", (long long)num_labels);
    bert_cls *b = (bert_cls *)ct_module_new(&k_cls);
    if (!b) return NULL;
    ct_module *m = &b->base;
    int err = ct__layers_add_child(m, "bert", ct_bert_model_new(c, true), &b->bert);
    if (!err) err |= ct__layers_add_child(m, "dropout", ct_dropout_new(c->hidden_dropout_prob), &b->drop);
    if (!err) err |= ct__layers_add_child(m, "classifier", bert_linear(c->hidden_size, num_labels, c->initializer_range),
                               &b->classifier);
    if (err) {
        ct_module_release(m);
        return NULL;
    }
    return m;
}
