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

#ifdef __cplusplus
}
#endif
#endif
