/* transformer_impl.h -- private structs shared by transformer.c (modules,
 * slow path) and transformer_fast.c (the BetterTransformer fast path). */
#ifndef CT_NN_TRANSFORMER_IMPL_H
#define CT_NN_TRANSFORMER_IMPL_H

#include "../ops/op_table.h"
#include "ctorch/autograd.h"
#include "ctorch/nn.h"

/* MultiheadAttention parameter slots (registration order = torch's). */
enum { MHA_IN_W = 0, MHA_Q_W, MHA_K_W, MHA_V_W, MHA_IN_B, MHA_BIAS_K, MHA_BIAS_V };

typedef struct tfm_mha {
    ct_module base;
    int64_t embed_dim, num_heads, head_dim, kdim, vdim;
    double dropout;
    bool bias, add_bias_kv, add_zero_attn, batch_first, same_dims;
    ct_module *out_proj;  /* borrowed (child) */
} tfm_mha;

typedef struct tfm_cfg {
    int64_t d_model, nhead, dim_ff;
    double dropout, eps;
    ct_transformer_activation act;
    bool batch_first, norm_first, bias;
} tfm_cfg;

typedef struct tfm_enc_layer {
    ct_module base;
    tfm_cfg c;
    ct_module *self_attn, *linear1, *linear2, *norm1, *norm2;  /* borrowed children */
} tfm_enc_layer;

typedef struct tfm_stack {
    ct_module base;
    int64_t num_layers;
    bool nested;           /* encoder: enable_nested_tensor */
    ct_module *layers;     /* ModuleList (child) */
    ct_module *norm;       /* child or NULL */
} tfm_stack;

bool ct__tfm_is_enc_layer(const ct_module *m);
ct_tensor *ct__tfm_ln_w(ct_module *ln);
ct_tensor *ct__tfm_ln_b(ct_module *ln, bool bias);

/* The fast path (transformer_fast.c).  ct__tfm_fast_ok: whether layer can
 * take it for these inputs (torch's conditions).  ct__tfm_fast_run runs
 * layers[0..n) then norm (may be NULL) on src; pack: drop the padded tokens
 * (zeros at padded positions in the result).  NULL + error on failure. */
bool ct__tfm_fast_ok(tfm_enc_layer *l, ct_tensor *src, ct_tensor *src_mask, ct_tensor *kpm,
                     bool is_causal);
ct_tensor *ct__tfm_fast_run(tfm_enc_layer *const *layers, int n, ct_module *norm, ct_tensor *src,
                            ct_tensor *kpm, bool pack);
void ct__tfm_set_last(bool fast, bool packed);

/* Packed sequences of the fast path (also BERT's inference path). */
typedef struct ct__tfm_seqs {
    int64_t N, L, T;
    int64_t *off, *cnt;   /* rows of sequence n: [off[n], off[n] + cnt[n]) */
    ct_tensor **keys;     /* dense mode with padding: int64 positions of real keys, per sequence */
    bool uniform;         /* every sequence has L rows and all its keys */
} ct__tfm_seqs;
ct_tensor *ct__tfm_packed_attention(const ct__tfm_seqs *sq, ct_tensor *qkv, int64_t H, int64_t hd);

#endif
