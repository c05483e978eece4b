/* ctorch/nn.h -- modules (torch.nn), layers, the functional API, losses
 * and initialization.
 *
 * A module is a struct that embeds `ct_module` as its first member, plus a
 * class (name, forward, ...).  Parameters, buffers and children are
 * registered by name, so state-dict keys follow PyTorch's module paths
 * exactly ("features.0.weight", "bn1.running_mean").  Modules are
 * reference-counted: a container retains its children.
 *
 *     ct_module *layers[3] = {ct_linear_new(784, 256, true), ct_relu_new(),
 *                             ct_linear_new(256, 10, true)};
 *     ct_module *net = ct_sequential_new(layers, 3);   // retains the layers
 *     for (int i = 0; i < 3; i++) ct_module_release(layers[i]);
 *     ct_tensor *logits = ct_module_forward1(net, x);
 *     ...
 *     ct_module_release(net);
 *
 * Writing a module in C:
 *
 *     typedef struct { ct_module base; int64_t k; } my_mod;
 *     static ct_tensor *my_forward(ct_module *m, ct_tensor *const *in, int n) {
 *         my_mod *self = (my_mod *)m;
 *         return ct_mul_scalar(ct_linear(in[0], ct_module_param(m, 0), NULL), (double)self->k);
 *     }
 *     static const ct_module_class my_class = {"MyMod", sizeof(my_mod), my_forward};
 *     my_mod *m = (my_mod *)ct_module_new(&my_class);
 *     ct_module_register_parameter(&m->base, "weight", w);   // slot 0
 *
 * Inside forward, read parameters and buffers through ct_module_param /
 * ct_module_buffer (by registration slot): that is what lets
 * ct_functional_call substitute them without touching the module.
 */
#ifndef CTORCH_NN_H
#define CTORCH_NN_H

#include "data.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;
typedef struct ct_module_impl ct_module_impl;

typedef struct ct_module_class {
    const char *name;     /* class name, as PyTorch prints it ("Linear") */
    size_t size;          /* sizeof the struct embedding ct_module */
    /* The forward pass.  Returns a new (scope-owned) tensor or NULL. */
    ct_tensor *(*forward)(ct_module *self, ct_tensor *const *inputs, int n);
    /* Optional: "in_features=784, out_features=10, bias=True" (malloc'ed). */
    char *(*extra_repr)(ct_module *self);
    /* Optional: frees what the struct owns beyond registered tensors/children. */
    void (*destroy)(ct_module *self);
    /* Optional: a forward with several outputs (RNNs: output and h_n); writes
     * nout tensors; ct_module_forward uses output 0 when this is set and
     * forward is NULL. */
    ct_status (*forward_multi)(ct_module *self, ct_tensor *const *inputs, int n,
                               ct_tensor **outputs, int nout);
} ct_module_class;

struct ct_module {
    const ct_module_class *cls;
    ct_module_impl *impl;  /* private: names, tensors, children, flags */
};

/* ---- lifetime -------------------------------------------------------- */
/* Allocates cls->size zeroed bytes with the base initialized (refcount 1). */
CT_API ct_module *ct_module_new(const ct_module_class *cls);
CT_API ct_module *ct_module_retain(ct_module *m);
/* Frees the module when the last reference goes: children released,
 * parameters and buffers released, cls->destroy called. */
CT_API void ct_module_release(ct_module *m);

/* ---- registration (returns the slot index, or -1 + error) ------------- */
/* The module keeps a reference to t (a parameter: requires_grad is set). */
CT_API int ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t);
/* persistent buffers are part of the state dict (like PyTorch). t may be NULL (None). */
CT_API int ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t, bool persistent);
/* The module retains child. */
CT_API int ct_module_register_module(ct_module *m, const char *name, ct_module *child);

/* ---- access ------------------------------------------------------------- */
/* The parameter/buffer in a slot (borrowed), honoring ct_functional_call's
 * substitutions.  NULL for an empty (None) slot. */
CT_API ct_tensor *ct_module_param(ct_module *m, int slot);
CT_API ct_tensor *ct_module_buffer(ct_module *m, int slot);
/* Replaces a parameter or buffer tensor (e.g. running stats).  Retained. */
CT_API ct_status ct_module_set_param(ct_module *m, int slot, ct_tensor *t) CT_NODISCARD;
CT_API ct_status ct_module_set_buffer(ct_module *m, int slot, ct_tensor *t) CT_NODISCARD;
CT_API int ct_module_num_children(const ct_module *m);
CT_API ct_module *ct_module_child(const ct_module *m, int i);        /* borrowed */
CT_API const char *ct_module_child_name(const ct_module *m, int i);
/* A descendant by dotted path ("features.0"), or NULL. */
CT_API ct_module *ct_module_get_submodule(ct_module *m, const char *path);
CT_API const char *ct_module_class_name(const ct_module *m);

/* ---- the PyTorch module API ---------------------------------------------- */
CT_API ct_tensor *ct_module_forward(ct_module *m, ct_tensor *const *inputs, int n);
CT_API ct_tensor *ct_module_forward1(ct_module *m, ct_tensor *x);
CT_API ct_status ct_module_forward_multi(ct_module *m, ct_tensor *const *inputs, int n,
                                         ct_tensor **outputs, int nout) CT_NODISCARD;
CT_API void ct_module_train(ct_module *m, bool mode); /* recursive */
CT_API void ct_module_eval(ct_module *m);
CT_API bool ct_module_is_training(const ct_module *m);
CT_API void ct_module_zero_grad(ct_module *m);         /* grads set to NULL */
/* Calls fn on every module, children first (like nn.Module.apply). */
CT_API ct_status ct_module_apply(ct_module *m, ct_status (*fn)(ct_module *m, void *user),
                                 void *user) CT_NODISCARD;
/* named_parameters(): full dotted names and (borrowed) tensors, in
 * registration order, children after own parameters, shared tensors once.
 * Returns the count; writes up to cap entries (names or params may be
 * NULL).  The names are owned by m and stay valid until m's structure
 * changes or m is freed. */
CT_API int ct_module_named_parameters(ct_module *m, const char **names, ct_tensor **params, int cap);
CT_API int ct_module_named_buffers(ct_module *m, const char **names, ct_tensor **bufs, int cap);
CT_API int64_t ct_module_num_parameters(ct_module *m, bool trainable_only);
/* nn.Module.to(device): moves every parameter, buffer and gradient of m
 * and its children to dev, in place (the tensor handles stay the same).
 * From CT_META the parameters get uninitialized storage (torch's
 * to_empty): load a state dict next.  To CT_META they drop their data. */
CT_API ct_status ct_module_to(ct_module *m, ct_device dev) CT_NODISCARD;
/* The same for a whole device {type, index}. */
CT_API ct_status ct_module_to_dev(ct_module *m, ct_dev dev) CT_NODISCARD;
/* PyTorch's repr (nested, indented), malloc'ed. */
CT_API char *ct_module_to_string(ct_module *m);
CT_API ct_status ct_module_print(ct_module *m);

/* ---- state dicts (an ordered name -> tensor map: ct_sample) ------------- */
/* Parameters and persistent buffers under PyTorch's keys.  The sample holds
 * references to the module's own tensors (no copy). */
CT_API ct_sample *ct_module_state_dict(ct_module *m);
/* Copies values in (shapes must match; dtypes converted).  strict: missing
 * or unexpected keys are an error naming them. */
CT_API ct_status ct_module_load_state_dict(ct_module *m, const ct_sample *sd, bool strict) CT_NODISCARD;

/* ---- functional_call (torch.func.functional_call) ----------------------- */
/* Runs m's forward with the parameters/buffers named in `replace`
 * (full dotted names) substituted, without modifying m.  Thread-safe with
 * respect to other threads using m normally. */
CT_API ct_tensor *ct_functional_call(ct_module *m, const ct_sample *replace,
                                     ct_tensor *const *inputs, int n);

/* ---- containers --------------------------------------------------------- */
/* Sequential/ModuleList retain the given modules (callers keep their refs). */
CT_API ct_module *ct_sequential_new(ct_module *const *mods, int n);
CT_API ct_module *ct_module_list_new(ct_module *const *mods, int n);
CT_API ct_status ct_module_list_append(ct_module *list, ct_module *m) CT_NODISCARD;
CT_API ct_module *ct_module_dict_new(const char *const *names, ct_module *const *mods, int n);

/* ---- section: layers (src/nn/layers*.c) ---- */
/* -- layers A: linear, convolution, activation, pooling, resampling
 * (src/nn/layers.c, layers_conv.c, layers_misc.c).
 * Layers as modules (torch.nn.*).  Each constructor returns a new module
 * (refcount 1; free with ct_module_release) or NULL + error.  Parameters
 * and buffers carry PyTorch's state-dict names and PyTorch's default
 * initialization (drawn from ctorch's generator: ct_manual_seed makes it
 * reproducible, the values differ from torch's).  Parameters are float32
 * (ct_get_default_dtype()).  The printed repr matches PyTorch's
 * ("Linear(in_features=784, out_features=10, bias=True)").
 *
 * Array arguments of the convolution and pooling constructors have one
 * entry per spatial dim; NULL means PyTorch's default. */

/* nn.Linear: y = x W^T + b.  weight [out, in] ~ U(-1/sqrt(in), 1/sqrt(in))
 * (kaiming_uniform_(a=sqrt(5))), bias [out] ~ U(-1/sqrt(in), 1/sqrt(in)). */
CT_API ct_module *ct_linear_new(int64_t in_features, int64_t out_features, bool bias);
/* nn.Bilinear: y = x1^T A x2 + b, forward takes two inputs.  weight
 * [out, in1, in2], bias [out], both ~ U(-1/sqrt(in1), 1/sqrt(in1)). */
CT_API ct_module *ct_bilinear_new(int64_t in1_features, int64_t in2_features,
                                  int64_t out_features, bool bias);
/* nn.Identity: returns its input. */
CT_API ct_module *ct_identity_new(void);
/* nn.Flatten(start_dim=1, end_dim=-1). */
CT_API ct_module *ct_flatten_new(int64_t start_dim, int64_t end_dim);
/* nn.Unflatten(dim, unflattened_size): sizes[0..n), one may be -1. */
CT_API ct_module *ct_unflatten_new(int64_t dim, const int64_t *sizes, int n);

/* Options of the convolution modules (a zeroed struct, or NULL, is
 * PyTorch's defaults: stride 1, padding 0, dilation 1, groups 1, bias,
 * padding_mode "zeros"). */
typedef struct ct_conv_opts {
    const int64_t *stride;          /* NULL: 1 */
    const int64_t *padding;         /* NULL: 0 */
    const char *padding_str;        /* "same" or "valid" (overrides padding) */
    const int64_t *dilation;        /* NULL: 1 */
    int64_t groups;                 /* 0: 1 */
    bool no_bias;                   /* bias=False */
    const char *padding_mode;       /* NULL/"zeros", "reflect", "replicate", "circular" */
    const int64_t *output_padding;  /* transposed convolutions only; NULL: 0 */
} ct_conv_opts;
/* nn.Conv1d/2d/3d: weight [out, in/groups, *kernel_size], bias [out], both
 * ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * prod(kernel). */
CT_API ct_module *ct_conv1d_new(int64_t in_channels, int64_t out_channels,
                                const int64_t kernel_size[1], const ct_conv_opts *opts);
CT_API ct_module *ct_conv2d_new(int64_t in_channels, int64_t out_channels,
                                const int64_t kernel_size[2], const ct_conv_opts *opts);
CT_API ct_module *ct_conv3d_new(int64_t in_channels, int64_t out_channels,
                                const int64_t kernel_size[3], const ct_conv_opts *opts);
/* nn.ConvTranspose1d/2d: weight [in, out/groups, *kernel_size]
 * (fan_in = out/groups * prod(kernel)); padding_mode must be "zeros" and
 * padding_str is not allowed, like PyTorch. */
CT_API ct_module *ct_conv_transpose1d_new(int64_t in_channels, int64_t out_channels,
                                          const int64_t kernel_size[1], const ct_conv_opts *opts);
CT_API ct_module *ct_conv_transpose2d_new(int64_t in_channels, int64_t out_channels,
                                          const int64_t kernel_size[2], const ct_conv_opts *opts);

/* Activations (elementwise; the functional forms are in ops.h). */
CT_API ct_module *ct_relu_new(void);
CT_API ct_module *ct_relu6_new(void);
CT_API ct_module *ct_leaky_relu_new(double negative_slope);          /* 0.01 */
CT_API ct_module *ct_elu_new(double alpha);                          /* 1.0 */
CT_API ct_module *ct_selu_new(void);
CT_API ct_module *ct_celu_new(double alpha);                         /* 1.0 */
CT_API ct_module *ct_gelu_new(ct_gelu_approx approximate);           /* CT_GELU_NONE */
CT_API ct_module *ct_silu_new(void);
CT_API ct_module *ct_mish_new(void);
CT_API ct_module *ct_softplus_new(double beta, double threshold);    /* 1, 20 */
CT_API ct_module *ct_softsign_new(void);
CT_API ct_module *ct_hardtanh_new(double min_val, double max_val);   /* -1.0, 1.0 */
CT_API ct_module *ct_hardsigmoid_new(void);
CT_API ct_module *ct_hardswish_new(void);
CT_API ct_module *ct_hardshrink_new(double lambd);                   /* 0.5 */
CT_API ct_module *ct_softshrink_new(double lambd);                   /* 0.5 */
CT_API ct_module *ct_sigmoid_new(void);
CT_API ct_module *ct_tanh_new(void);
CT_API ct_module *ct_logsigmoid_new(void);
CT_API ct_module *ct_softmax_new(int64_t dim);
CT_API ct_module *ct_log_softmax_new(int64_t dim);
/* nn.PReLU: parameter "weight" [num_parameters] filled with init (0.25);
 * num_parameters is 1 or the number of channels (dim 1 of the input). */
CT_API ct_module *ct_prelu_new(int64_t num_parameters, double init);
CT_API ct_module *ct_glu_new(int64_t dim);                           /* -1 */

/* Pooling.  kernel_size is required; stride NULL means kernel_size. */
/* nn.MaxPool1d/2d.  With return_indices, ct_module_forward_multi gives
 * (output, int64 indices) -- ct_module_forward gives the output alone. */
CT_API ct_module *ct_max_pool1d_new(const int64_t kernel_size[1], const int64_t stride[1],
                                    const int64_t padding[1], const int64_t dilation[1],
                                    bool return_indices, bool ceil_mode);
CT_API ct_module *ct_max_pool2d_new(const int64_t kernel_size[2], const int64_t stride[2],
                                    const int64_t padding[2], const int64_t dilation[2],
                                    bool return_indices, bool ceil_mode);
CT_API ct_module *ct_avg_pool1d_new(const int64_t kernel_size[1], const int64_t stride[1],
                                    const int64_t padding[1], bool ceil_mode,
                                    bool count_include_pad);
/* divisor_override <= 0: none. */
CT_API ct_module *ct_avg_pool2d_new(const int64_t kernel_size[2], const int64_t stride[2],
                                    const int64_t padding[2], bool ceil_mode,
                                    bool count_include_pad, int64_t divisor_override);
CT_API ct_module *ct_adaptive_avg_pool1d_new(int64_t output_size);
CT_API ct_module *ct_adaptive_avg_pool2d_new(const int64_t output_size[2]);
/* With return_indices, forward_multi gives (output, indices). */
CT_API ct_module *ct_adaptive_max_pool2d_new(const int64_t output_size[2], bool return_indices);

/* nn.Upsample: give size (nsize entries) or scale_factor (nscale entries);
 * one entry applies to every spatial dim (printed as a number, like
 * PyTorch's Upsample(scale_factor=2)).  mode: "nearest", "linear",
 * "bilinear", "bicubic", "nearest-exact". */
CT_API ct_module *ct_upsample_new(const int64_t *size, int nsize, const double *scale_factor,
                                  int nscale, const char *mode, bool align_corners);
CT_API ct_module *ct_pixel_shuffle_new(int64_t upscale_factor);
/* nn.ZeroPad2d / nn.ReflectionPad2d: padding (left, right, top, bottom). */
CT_API ct_module *ct_zero_pad2d_new(const int64_t padding[4]);
CT_API ct_module *ct_reflection_pad2d_new(const int64_t padding[4]);

/* -- layers B: normalization, embedding, dropout, recurrent (src/nn/norm.c,
 * embedding.c, dropout.c, rnn.c).  Parameters and buffers are created in
 * the default dtype with PyTorch's initialization and state-dict keys.
 * A momentum of NAN means None (BatchNorm's cumulative moving average);
 * an eps of NAN for RMSNorm means None (the dtype's machine epsilon). */

/* nn.BatchNorm1d ([N, C] or [N, C, L]) and nn.BatchNorm2d ([N, C, H, W]).
 * Keys: weight, bias (affine), running_mean, running_var,
 * num_batches_tracked (int64 0-dim) (track_running_stats).  In training
 * the batch statistics normalize and update the running stats (unbiased
 * variance); in eval mode the running stats are used when tracked. */
CT_API ct_module *ct_batch_norm1d_new(int64_t num_features, double eps, double momentum,
                                      bool affine, bool track_running_stats);
CT_API ct_module *ct_batch_norm2d_new(int64_t num_features, double eps, double momentum,
                                      bool affine, bool track_running_stats);
/* nn.LayerNorm(normalized_shape, eps, elementwise_affine, bias): over the
 * last n dims.  Keys: weight (ones), bias (zeros, when bias). */
CT_API ct_module *ct_layer_norm_new(const int64_t *normalized_shape, int n, double eps,
                                    bool elementwise_affine, bool bias);
/* nn.GroupNorm(num_groups, num_channels, eps, affine) on [N, C, *]. */
CT_API ct_module *ct_group_norm_new(int64_t num_groups, int64_t num_channels, double eps,
                                    bool affine);
/* nn.RMSNorm(normalized_shape, eps=None (NAN), elementwise_affine) as in torch 2.4. */
CT_API ct_module *ct_rms_norm_new(const int64_t *normalized_shape, int n, double eps,
                                  bool elementwise_affine);
/* nn.InstanceNorm2d(num_features, eps=1e-5, momentum=0.1, affine=False,
 * track_running_stats=False) on [N, C, H, W] or unbatched [C, H, W]. */
CT_API ct_module *ct_instance_norm2d_new(int64_t num_features, double eps, double momentum,
                                         bool affine, bool track_running_stats);
/* nn.LocalResponseNorm(size, alpha=1e-4, beta=0.75, k=1.0). */
CT_API ct_module *ct_local_response_norm_new(int64_t size, double alpha, double beta, double k);

/* nn.Embedding(num_embeddings, embedding_dim, padding_idx, max_norm,
 * norm_type, scale_grad_by_freq).  Key: weight ~ N(0, 1), the padding_idx
 * row zeroed.  padding_idx: CT_PADDING_IDX_NONE or an index (negative
 * counts from the end); that row gets no gradient.  max_norm NAN: None;
 * otherwise the looked-up rows are renormalized in place (no grad) like
 * torch.  Forward: int64/int32 indices of any shape -> [*, embedding_dim]. */
#define CT_PADDING_IDX_NONE INT64_MIN
CT_API ct_module *ct_embedding_new(int64_t num_embeddings, int64_t embedding_dim,
                                   int64_t padding_idx, double max_norm, double norm_type,
                                   bool scale_grad_by_freq);
/* nn.Embedding.from_pretrained: copies weight (2-D); freeze: no gradient. */
CT_API ct_module *ct_embedding_from_pretrained(ct_tensor *weight, bool freeze, int64_t padding_idx,
                                               double max_norm, double norm_type,
                                               bool scale_grad_by_freq);
typedef enum ct_bag_mode { CT_BAG_SUM = 0, CT_BAG_MEAN, CT_BAG_MAX } ct_bag_mode;
/* nn.EmbeddingBag(num_embeddings, embedding_dim, max_norm, norm_type,
 * scale_grad_by_freq, mode (PyTorch's default: CT_BAG_MEAN),
 * include_last_offset, padding_idx).  Forward inputs: (input) with a 2-D
 * input (one bag per row); (input, offsets) with a 1-D input;
 * (input, offsets, per_sample_weights); or (input, per_sample_weights)
 * with a 2-D input (per_sample_weights shaped like input, mode sum). */
CT_API ct_module *ct_embedding_bag_new(int64_t num_embeddings, int64_t embedding_dim,
                                       double max_norm, double norm_type, bool scale_grad_by_freq,
                                       ct_bag_mode mode, bool include_last_offset,
                                       int64_t padding_idx);

/* nn.Dropout(p), nn.Dropout2d(p) (whole channels of [N, C, H, W] or
 * [C, H, W]), nn.AlphaDropout(p): identity in eval mode. */
CT_API ct_module *ct_dropout_new(double p);
CT_API ct_module *ct_dropout2d_new(double p);
CT_API ct_module *ct_alpha_dropout_new(double p);

/* nn.RNN / nn.LSTM / nn.GRU: multi-layer, optionally bidirectional, Elman
 * (tanh or relu), LSTM (gates i, f, g, o) and GRU (gates r, z, n) cells.
 * Keys per layer k and direction: weight_ih_l{k}[_reverse] [G*H, in],
 * weight_hh_l{k}[_reverse] [G*H, H], bias_ih_l{k}[_reverse],
 * bias_hh_l{k}[_reverse] (with bias), all ~ U(-1/sqrt(H), 1/sqrt(H)).
 * Input [T, N, in] ([N, T, in] with batch_first, or unbatched [T, in]).
 * Use ct_module_forward_multi:
 *     RNN/GRU: inputs (x) or (x, h0)      -> outputs (output, h_n)
 *     LSTM:    inputs (x) or (x, h0, c0)  -> outputs (output, h_n, c_n)
 * h0/c0/h_n/c_n are [num_layers * num_directions, N, H] ([L*D, H]
 * unbatched); output is [T, N, D*H].  nout may be smaller (ct_module_forward
 * returns output).  dropout applies to the outputs of every layer but the
 * last in training mode. */
typedef enum ct_rnn_nonlinearity { CT_RNN_TANH = 0, CT_RNN_RELU } ct_rnn_nonlinearity;
CT_API ct_module *ct_rnn_new(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                             ct_rnn_nonlinearity nonlinearity, bool bias, bool batch_first,
                             double dropout, bool bidirectional);
CT_API ct_module *ct_lstm_new(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                              bool bias, bool batch_first, double dropout, bool bidirectional);
CT_API ct_module *ct_gru_new(int64_t input_size, int64_t hidden_size, int64_t num_layers,
                             bool bias, bool batch_first, double dropout, bool bidirectional);
/* ---- end section: layers ---- */

/* ---- section: functional and losses (src/nn/functional*.c, loss*.c) ---- */
/* -- distances and normalization (src/nn/functional.c), composites of
 * public ops (differentiable). */
/* F.normalize: x / max(||x||_p over dim, eps) (PyTorch: p 2, dim 1, eps 1e-12). */
CT_API ct_tensor *ct_normalize(ct_tensor *x, double p, int64_t dim, double eps);
/* F.cosine_similarity along dim (broadcasting x1, x2): x1/max(||x1||, eps) .
 * x2/max(||x2||, eps) (PyTorch: dim 1, eps 1e-8). */
CT_API ct_tensor *ct_cosine_similarity(ct_tensor *x1, ct_tensor *x2, int64_t dim, double eps);
/* F.pairwise_distance: ||x1 - x2 + eps||_p over the last dim (PyTorch: p 2,
 * eps 1e-6, keepdim false). */
CT_API ct_tensor *ct_pairwise_distance(ct_tensor *x1, ct_tensor *x2, double p, double eps,
                                       bool keepdim);

/* -- losses (src/nn/loss.c): torch.nn.functional's losses, built from public
 * ops so autograd differentiates them (gradients match torch's).  Every
 * loss takes a reduction; PyTorch's default is CT_REDUCTION_MEAN (0).
 * CT_REDUCTION_BATCHMEAN is for ct_kl_div only (sum / batch size). */
typedef enum ct_reduction {
    CT_REDUCTION_MEAN = 0, CT_REDUCTION_SUM, CT_REDUCTION_NONE, CT_REDUCTION_BATCHMEAN
} ct_reduction;
/* "mean", "sum", "none", "batchmean". */
CT_API const char *ct_reduction_name(ct_reduction r);

/* F.mse_loss: (input - target)^2 (broadcasting). */
CT_API ct_tensor *ct_mse_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction);
/* F.l1_loss: |input - target|. */
CT_API ct_tensor *ct_l1_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction);
/* F.smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta
 * (PyTorch: beta 1.0; beta 0 is l1_loss). */
CT_API ct_tensor *ct_smooth_l1_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction,
                                    double beta);
/* F.huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
 * (PyTorch: delta 1.0). */
CT_API ct_tensor *ct_huber_loss(ct_tensor *input, ct_tensor *target, ct_reduction reduction,
                                double delta);

/* Options of ct_cross_entropy and ct_nll_loss.  NULL, or a zeroed struct,
 * is PyTorch's defaults: no class weights, ignore_index -100, mean,
 * label_smoothing 0. */
typedef struct ct_cross_entropy_opts {
    ct_tensor *weight;        /* [C] class weights, or NULL */
    bool has_ignore_index;    /* false: PyTorch's default ignore_index = -100 */
    int64_t ignore_index;     /* targets equal to it add nothing (class indices only) */
    ct_reduction reduction;   /* mean: weighted mean over the targets not ignored */
    double label_smoothing;   /* in [0, 1]; ct_cross_entropy only */
} ct_cross_entropy_opts;
/* F.cross_entropy: input logits [N, C, d1, ...] (or unbatched [C]); target
 * class indices [N, d1, ...] (integer dtype), or class probabilities with
 * input's shape (floating dtype).  log_softmax over dim 1 then nll_loss,
 * with label smoothing mixing in the uniform distribution like torch. */
CT_API ct_tensor *ct_cross_entropy(ct_tensor *input, ct_tensor *target,
                                   const ct_cross_entropy_opts *opts);
/* F.nll_loss: input log-probabilities [N, C, d1, ...] or [C]; target class
 * indices [N, d1, ...] or [].  loss = -weight[t] * input[t]; mean divides
 * by the sum of the weights of the targets not ignored (NaN when all are). */
CT_API ct_tensor *ct_nll_loss(ct_tensor *input, ct_tensor *target,
                              const ct_cross_entropy_opts *opts);
/* F.binary_cross_entropy: -w (t log(x) + (1 - t) log(1 - x)) with input x
 * in [0, 1], target shaped like input; the logs are clamped at -100 like
 * torch.  weight (broadcast to input) may be NULL. */
CT_API ct_tensor *ct_binary_cross_entropy(ct_tensor *input, ct_tensor *target, ct_tensor *weight,
                                          ct_reduction reduction);
/* F.binary_cross_entropy_with_logits: sigmoid + BCE in the numerically
 * stable form; pos_weight (broadcast along the last dim, e.g. [C]) weighs
 * the positive term; weight and pos_weight may be NULL. */
CT_API ct_tensor *ct_binary_cross_entropy_with_logits(ct_tensor *input, ct_tensor *target,
                                                      ct_tensor *weight, ct_reduction reduction,
                                                      ct_tensor *pos_weight);
/* F.kl_div: input log-probabilities; target probabilities (log-probabilities
 * with log_target): target (log target - input).  reduction may be
 * CT_REDUCTION_BATCHMEAN (sum / input.size(0), the mathematically right
 * one); mean averages over every element like torch. */
CT_API ct_tensor *ct_kl_div(ct_tensor *input, ct_tensor *target, ct_reduction reduction,
                            bool log_target);
/* F.poisson_nll_loss: exp(input) - target input (log_input) or
 * input - target log(input + eps); full adds the Stirling term where
 * target > 1 (PyTorch: log_input true, full false, eps 1e-8). */
CT_API ct_tensor *ct_poisson_nll_loss(ct_tensor *input, ct_tensor *target, bool log_input,
                                      bool full, double eps, ct_reduction reduction);
/* F.gaussian_nll_loss: 0.5 (log(var) + (input - target)^2 / var) (+ 0.5
 * log(2 pi) with full); var shaped like input, or like input without its
 * last dim, or with last dim 1; clamped at eps without stopping its
 * gradient, like torch (PyTorch: full false, eps 1e-6). */
CT_API ct_tensor *ct_gaussian_nll_loss(ct_tensor *input, ct_tensor *target, ct_tensor *var,
                                       bool full, double eps, ct_reduction reduction);
/* F.cosine_embedding_loss: x1, x2 [N, D] with target [N] (or [D], [D], [])
 * of 1 / -1: 1 - cos, or max(0, cos - margin) (PyTorch: margin 0). */
CT_API ct_tensor *ct_cosine_embedding_loss(ct_tensor *x1, ct_tensor *x2, ct_tensor *target,
                                           double margin, ct_reduction reduction);
/* F.margin_ranking_loss: max(0, -target (x1 - x2) + margin) (margin 0). */
CT_API ct_tensor *ct_margin_ranking_loss(ct_tensor *x1, ct_tensor *x2, ct_tensor *target,
                                         double margin, ct_reduction reduction);
/* F.hinge_embedding_loss: x where target is 1, max(0, margin - x) where it
 * is -1 (PyTorch: margin 1.0). */
CT_API ct_tensor *ct_hinge_embedding_loss(ct_tensor *input, ct_tensor *target, double margin,
                                          ct_reduction reduction);
/* F.triplet_margin_loss: max(d(a, p) - d(a, n) + margin, 0) with the
 * pairwise distance d (p-norm, eps); swap uses min(d(a, n), d(p, n))
 * (PyTorch: margin 1.0, p 2, eps 1e-6, swap false). */
CT_API ct_tensor *ct_triplet_margin_loss(ct_tensor *anchor, ct_tensor *positive,
                                         ct_tensor *negative, double margin, double p, double eps,
                                         bool swap, ct_reduction reduction);
/* F.multi_margin_loss: input [N, C] (or [C]), target [N] (or []):
 * sum over j != y of w[y] max(0, margin - x[y] + x[j])^p / C, p 1 or 2
 * (PyTorch: p 1, margin 1, weight NULL). */
CT_API ct_tensor *ct_multi_margin_loss(ct_tensor *input, ct_tensor *target, int64_t p,
                                       double margin, ct_tensor *weight, ct_reduction reduction);
/* F.ctc_loss: log_probs [T, N, C] (or unbatched [T, C]) from log_softmax;
 * targets padded [N, S] or concatenated 1-D (sum(target_lengths));
 * input_lengths, target_lengths integer [N] (or [] unbatched).  The alpha
 * recursion in log space; mean divides each loss by its target length and
 * averages, like torch; zero_infinity turns impossible alignments (inf)
 * into 0 (PyTorch: blank 0, mean, zero_infinity false).
 * Gradients: exact with respect to log_probs (torch's CTC backward instead
 * assumes log_probs come from log_softmax: both agree through it). */
CT_API ct_tensor *ct_ctc_loss(ct_tensor *log_probs, ct_tensor *targets, ct_tensor *input_lengths,
                              ct_tensor *target_lengths, int64_t blank, ct_reduction reduction,
                              bool zero_infinity);

/* -- activations used by the layer modules (src/nn/functional.c), composites
 * of public ops (differentiable). */
/* F.logsigmoid: log(sigmoid(x)) = -softplus(-x), stable for large |x|. */
CT_API ct_tensor *ct_logsigmoid(ct_tensor *x);
/* F.prelu: max(0, x) + weight * min(0, x); weight has 1 element or one per
 * channel (dim 1 of x; dim 0 of a 1-D x). */
CT_API ct_tensor *ct_prelu(ct_tensor *x, ct_tensor *weight);
/* F.glu: a * sigmoid(b), where a, b are the two halves of x along dim. */
CT_API ct_tensor *ct_glu(ct_tensor *x, int64_t dim);

/* -- normalization, embedding and dropout (src/nn/norm.c, embedding.c,
 * dropout.c).  Optional tensors (running stats, weight, bias) may be NULL. */
/* F.batch_norm: x [N, C, *].  training: normalize with the batch statistics
 * (biased variance) and, when running_mean/running_var are given, update
 * them in place: r = (1 - momentum) * r + momentum * batch_stat (unbiased
 * variance).  Otherwise normalize with the running stats. */
CT_API ct_tensor *ct_batch_norm(ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var,
                                ct_tensor *weight, ct_tensor *bias, bool training,
                                double momentum, double eps);
/* F.layer_norm over the last n dims (which must equal normalized_shape). */
CT_API ct_tensor *ct_layer_norm(ct_tensor *x, const int64_t *normalized_shape, int n,
                                ct_tensor *weight, ct_tensor *bias, double eps);
/* F.group_norm: x [N, C, *], C divisible by num_groups; weight/bias [C]. */
CT_API ct_tensor *ct_group_norm(ct_tensor *x, int64_t num_groups, ct_tensor *weight,
                                ct_tensor *bias, double eps);
/* F.rms_norm (torch 2.4): x * rsqrt(mean(x^2 over the last n dims) + eps) * weight;
 * eps NAN: the machine epsilon of x's dtype. */
CT_API ct_tensor *ct_rms_norm(ct_tensor *x, const int64_t *normalized_shape, int n,
                              ct_tensor *weight, double eps);
/* F.instance_norm: x [N, C, *]; per-instance statistics when use_input_stats
 * (running stats, when given, are updated with their batch mean), else the
 * running stats. */
CT_API ct_tensor *ct_instance_norm(ct_tensor *x, ct_tensor *running_mean, ct_tensor *running_var,
                                   ct_tensor *weight, ct_tensor *bias, bool use_input_stats,
                                   double momentum, double eps);
/* F.local_response_norm: x [N, C, *] (at least 3-D). */
CT_API ct_tensor *ct_local_response_norm(ct_tensor *x, int64_t size, double alpha, double beta,
                                         double k);
/* F.embedding: weight[input]; padding_idx CT_PADDING_IDX_NONE or a row that
 * gets no gradient; max_norm NAN: None, else rows looked up are renormalized
 * in place (no grad) to at most max_norm in norm_type; scale_grad_by_freq
 * divides each row's gradient by its count in input. */
CT_API ct_tensor *ct_embedding(ct_tensor *input, ct_tensor *weight, int64_t padding_idx,
                               double max_norm, double norm_type, bool scale_grad_by_freq);
/* F.embedding_bag: input 2-D [B, L] (offsets NULL) or 1-D with offsets
 * (bag starts; include_last_offset: the last entry ends the last bag).
 * per_sample_weights (mode sum only) shaped like input, or NULL.  Entries
 * equal to padding_idx are left out of their bags; an empty bag gives zeros. */
CT_API ct_tensor *ct_embedding_bag(ct_tensor *input, ct_tensor *weight, ct_tensor *offsets,
                                   double max_norm, double norm_type, bool scale_grad_by_freq,
                                   ct_bag_mode mode, ct_tensor *per_sample_weights,
                                   bool include_last_offset, int64_t padding_idx);
/* F.dropout2d: zeroes whole channels of [N, C, H, W] (or unbatched
 * [C, H, W]) with probability p, scales the rest by 1/(1-p). */
CT_API ct_tensor *ct_dropout2d(ct_tensor *x, double p, bool training);
/* F.alpha_dropout: keeps the mean and variance of SELU activations. */
CT_API ct_tensor *ct_alpha_dropout(ct_tensor *x, double p, bool training);
/* ---- end section: functional and losses ---- */

/* ---- section: attention (src/ops/attention.c) ---- */
/* scaled_dot_product_attention (torch.nn.functional.scaled_dot_product_attention).
 *
 *   q [..., Hq, L, E], k [..., Hk, S, E], v [..., Hk, S, Ev]  ->  [..., Hq, L, Ev]
 *
 * softmax(q k^T * scale + mask) @ v.  q, k, v: the same floating dtype, at
 * least 2-D; their leading dims (and the mask's) broadcast, like torch's
 * math kernel.  attn_mask (NULL: none) broadcasts to [..., L, S]: a bool
 * mask keeps the positions that are true, a mask of q's dtype is added to
 * the scores (and gets a gradient when it requires grad).  is_causal masks
 * the upper triangle j > i (top-left aligned, like torch; an error together
 * with attn_mask).  A row with every position masked gives zeros (torch >= 2.5).
 * dropout_p in [0, 1) drops attention weights with the seeded generator
 * (ct_manual_seed; training use -- pass 0 in eval).  scale: 0.0 means the
 * default 1/sqrt(E) (torch's None).  enable_gqa: Hq may be a multiple of
 * Hk == Hv (grouped-query attention, head dim -3); otherwise head dims
 * broadcast like batch dims.  Errors (NULL + message): dtype or shape
 * mismatch, bad GQA ratio, mask shape or dtype, causal with a mask, dropout_p
 * out of range, no enabled kernel that can run the call.
 *
 * Kernels (all with backward):
 *   MATH          composite of public ops (matmul, masked_fill, softmax,
 *                 dropout, matmul): any dtype, double backward, mask grads.
 *   FLASH         f32 on the CPU: tiles of 64 queries x 64 keys, online
 *                 softmax, only the logsumexp per row saved (extra memory
 *                 O(L), never L x S); causal tiles above the diagonal are
 *                 skipped; the backward recomputes the tiles.  Dropout by a
 *                 counter-based (Philox) mask regenerated in the backward.
 *   MEM_EFFICIENT f32 on the CPU: blocks of 64 query rows x all S keys
 *                 (one [64, S] block of scores at a time), backward likewise.
 *   FLASH and MEM_EFFICIENT are one fused op; a device without its kernel
 *   runs its composite fallback, which computes the same results.
 * Automatic choice (all enabled): FLASH when the inputs are f32 and there
 * is no float mask; MEM_EFFICIENT for f32 with a float mask; MATH otherwise
 * (f64/f16/bf16, a mask that requires grad).  A disabled kernel is skipped;
 * a forced fused kernel also runs float masks.  The fused kernels have no
 * double backward (an error names it; enable only MATH for that).
 * ct_sdp_last_backend() tells which kernel ran. */
typedef enum ct_sdp_backend {
    CT_SDP_MATH = 1,          /* composite of public ops: the reference */
    CT_SDP_FLASH = 2,         /* tiled, online softmax, O(L) extra memory */
    CT_SDP_MEM_EFFICIENT = 4, /* row blocks of [64, S] scores */
    CT_SDP_ALL = 7
} ct_sdp_backend;
CT_API ct_tensor *ct_scaled_dot_product_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v,
                                                  ct_tensor *attn_mask, double dropout_p,
                                                  bool is_causal, double scale, bool enable_gqa);
/* Enables exactly the backends in the mask (torch.backends.cuda.sdp_kernel /
 * torch.nn.attention.sdpa_kernel); returns the previous mask.  Thread-local
 * (a new thread starts with CT_SDP_ALL). */
CT_API unsigned ct_sdp_kernel_set(unsigned enabled_mask);
CT_API unsigned ct_sdp_kernel_enabled(void);
/* The backend the last successful ct_scaled_dot_product_attention on this
 * thread ran (0 before any). */
CT_API ct_sdp_backend ct_sdp_last_backend(void);
/* ---- end section: attention ---- */

/* ---- section: transformer (src/nn/transformer*.c) ---- */
/* torch.nn.MultiheadAttention and the Transformer modules, with PyTorch's
 * parameter layout, defaults, initialization and state-dict keys
 * (src/nn/transformer.c), and the BetterTransformer inference fast path
 * (src/nn/transformer_fast.c).
 *
 * Masks follow nn.MultiheadAttention (not SDPA): a bool attn_mask or
 * key_padding_mask is true where attention is NOT allowed; a float mask is
 * added to the attention scores.  attn_mask is [L, S] or [N*num_heads, L, S];
 * key_padding_mask is [N, S] ([S] for unbatched input).  Tensors are
 * [L, N, E] (sequence first), or [N, L, E] with batch_first, or unbatched
 * [L, E].  is_causal is a hint, as in torch 2.x; unlike torch (which raises
 * "Need attn_mask if specifying the is_causal hint"), is_causal without an
 * attn_mask builds the square subsequent mask itself. */

/* nn.MultiheadAttention(embed_dim, num_heads, dropout=0, bias=True,
 * add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None,
 * batch_first=False).  kdim/vdim <= 0 mean embed_dim.  Keys:
 * in_proj_weight [3E, E] (xavier_uniform) when kdim == vdim == E, else
 * q_proj_weight [E, E], k_proj_weight [E, kdim], v_proj_weight [E, vdim]
 * (xavier_uniform); in_proj_bias [3E] (zeros, with bias); bias_k, bias_v
 * [1, 1, E] (xavier_normal, with add_bias_kv); out_proj.weight [E, E]
 * (Linear's init), out_proj.bias [E] (zeros).
 * ct_module_forward / forward_multi take (query, key, value
 * [, key_padding_mask [, attn_mask]]) and give (attn_output,
 * attn_weights) with need_weights and average_attn_weights true. */
CT_API ct_module *ct_multihead_attention_new(int64_t embed_dim, int64_t num_heads, double dropout,
                                             bool bias, bool add_bias_kv, bool add_zero_attn,
                                             int64_t kdim, int64_t vdim, bool batch_first);
/* MultiheadAttention.forward: writes attn_output ([L, N, E], or [N, L, E]
 * with batch_first, or [L, E]) and, when need_weights and attn_weights is
 * not NULL, attn_weights: [N, L, S] averaged over heads with
 * average_attn_weights, else [N, num_heads, L, S] ([L, S] / [H, L, S]
 * unbatched); otherwise *attn_weights is set to NULL.  key_padding_mask and
 * attn_mask may be NULL.  Dropout on the attention weights in training
 * mode.  Differentiable. */
CT_API ct_status ct_multihead_attention_forward(ct_module *mha, ct_tensor *query, ct_tensor *key,
                                                ct_tensor *value, ct_tensor *key_padding_mask,
                                                bool need_weights, ct_tensor *attn_mask,
                                                bool average_attn_weights, bool is_causal,
                                                ct_tensor **attn_output,
                                                ct_tensor **attn_weights) CT_NODISCARD;

typedef enum ct_transformer_activation {
    CT_TRANSFORMER_RELU = 0, CT_TRANSFORMER_GELU   /* F.relu, F.gelu (erf) */
} ct_transformer_activation;

/* nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048,
 * dropout=0.1, activation=relu, layer_norm_eps=1e-5, batch_first=False,
 * norm_first=False, bias=True).  Keys: self_attn.*, linear1.*, linear2.*,
 * norm1.*, norm2.*.  ct_module_forward takes (src [, src_mask
 * [, src_key_padding_mask]]).
 * Fast path: in eval mode when no gradient is needed (grad mode off, or
 * neither the input nor a parameter requires grad), with a float32 3-D
 * (or 2-D) input, bias, no src_mask and is_causal false (torch's
 * conditions), the layer runs fused: one packed QKV GEMM, the SDPA kernel
 * per sequence over its non-padded keys, bias + activation fused after
 * the first FFN GEMM, residual + layer norm in one pass.  Its result equals
 * the slow path's (padded positions included). */
CT_API ct_module *ct_transformer_encoder_layer_new(int64_t d_model, int64_t nhead,
                                                   int64_t dim_feedforward, double dropout,
                                                   ct_transformer_activation activation,
                                                   double layer_norm_eps, bool batch_first,
                                                   bool norm_first, bool bias);
CT_API ct_tensor *ct_transformer_encoder_layer_forward(ct_module *layer, ct_tensor *src,
                                                       ct_tensor *src_mask,
                                                       ct_tensor *src_key_padding_mask,
                                                       bool is_causal);
/* nn.TransformerDecoderLayer (same arguments).  Keys: self_attn.*,
 * multihead_attn.*, linear1.*, linear2.*, norm1.*, norm2.*, norm3.*.
 * ct_module_forward takes (tgt, memory [, tgt_mask [, memory_mask]]). */
CT_API ct_module *ct_transformer_decoder_layer_new(int64_t d_model, int64_t nhead,
                                                   int64_t dim_feedforward, double dropout,
                                                   ct_transformer_activation activation,
                                                   double layer_norm_eps, bool batch_first,
                                                   bool norm_first, bool bias);
CT_API ct_tensor *ct_transformer_decoder_layer_forward(ct_module *layer, ct_tensor *tgt,
                                                       ct_tensor *memory, ct_tensor *tgt_mask,
                                                       ct_tensor *memory_mask,
                                                       ct_tensor *tgt_key_padding_mask,
                                                       ct_tensor *memory_key_padding_mask,
                                                       bool tgt_is_causal, bool memory_is_causal);
/* nn.TransformerEncoder(encoder_layer, num_layers, norm=None,
 * enable_nested_tensor=True): num_layers deep copies of encoder_layer (a
 * TransformerEncoderLayer; its weights and train/eval mode are copied; the
 * caller keeps its reference) under keys layers.0. ... layers.{n-1}., and
 * norm (retained; may be NULL).  ct_module_forward takes (src [, mask
 * [, src_key_padding_mask]]).
 * Fast path: every layer takes its fast path; in addition, like torch's
 * nested-tensor path (enable_nested_tensor, a src_key_padding_mask, no
 * mask, batch_first, norm_first false, an even nhead), the padded tokens
 * are packed away: only the real tokens go through the projections and
 * the feed-forward, each sequence attends over its real length, and the
 * padded positions get ZEROS (torch's to_padded_tensor(0.0)) before the
 * final norm, so they hold norm(0) = the norm's bias when there is one,
 * exactly like torch; real positions equal the slow path's.  Torch packs
 * only a left-aligned mask (padding at the end of each row): so do we;
 * otherwise every layer runs its fast path unpacked. */
CT_API ct_module *ct_transformer_encoder_new(ct_module *encoder_layer, int64_t num_layers,
                                             ct_module *norm, bool enable_nested_tensor);
CT_API ct_tensor *ct_transformer_encoder_forward(ct_module *encoder, ct_tensor *src,
                                                 ct_tensor *mask,
                                                 ct_tensor *src_key_padding_mask,
                                                 bool is_causal);
/* nn.TransformerDecoder(decoder_layer, num_layers, norm=None): keys
 * layers.N.*, norm.*.  ct_module_forward takes (tgt, memory [, tgt_mask
 * [, memory_mask]]). */
CT_API ct_module *ct_transformer_decoder_new(ct_module *decoder_layer, int64_t num_layers,
                                             ct_module *norm);
CT_API ct_tensor *ct_transformer_decoder_forward(ct_module *decoder, ct_tensor *tgt,
                                                 ct_tensor *memory, ct_tensor *tgt_mask,
                                                 ct_tensor *memory_mask,
                                                 ct_tensor *tgt_key_padding_mask,
                                                 ct_tensor *memory_key_padding_mask,
                                                 bool tgt_is_causal, bool memory_is_causal);
/* nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6,
 * num_decoder_layers=6, dim_feedforward=2048, dropout=0.1, activation,
 * layer_norm_eps=1e-5, batch_first, norm_first, bias): encoder
 * (TransformerEncoder with a final LayerNorm "encoder.norm") and decoder
 * (with "decoder.norm"); every parameter with more than one dim is
 * re-initialized with xavier_uniform_, like torch.  ct_module_forward
 * takes (src, tgt [, src_mask [, tgt_mask [, memory_mask]]]). */
CT_API ct_module *ct_transformer_new(int64_t d_model, int64_t nhead, int64_t num_encoder_layers,
                                     int64_t num_decoder_layers, int64_t dim_feedforward,
                                     double dropout, ct_transformer_activation activation,
                                     double layer_norm_eps, bool batch_first, bool norm_first,
                                     bool bias);
CT_API ct_tensor *ct_transformer_forward(ct_module *transformer, ct_tensor *src, ct_tensor *tgt,
                                         ct_tensor *src_mask, ct_tensor *tgt_mask,
                                         ct_tensor *memory_mask,
                                         ct_tensor *src_key_padding_mask,
                                         ct_tensor *tgt_key_padding_mask,
                                         ct_tensor *memory_key_padding_mask,
                                         bool src_is_causal, bool tgt_is_causal,
                                         bool memory_is_causal);
/* nn.Transformer.generate_square_subsequent_mask(sz): float [sz, sz] in the
 * default dtype, -inf above the diagonal, 0 elsewhere. */
CT_API ct_tensor *ct_generate_square_subsequent_mask(int64_t sz);
/* Whether the last encoder layer / encoder forward on this thread took the
 * fast path (and, for the encoder, whether it packed the padding away). */
CT_API bool ct_transformer_last_fast_path(bool *packed);
/* ---- end section: transformer ---- */

/* ---- section: init (src/nn/init.c) ---- */
/* torch.nn.init: fill a tensor in place under no_grad (a parameter that
 * requires grad is fine), drawing from ctorch's generator (ct_manual_seed
 * makes it reproducible; the numbers differ from torch's).  Each returns t,
 * or NULL + error. */
typedef enum ct_fan_mode { CT_FAN_IN = 0, CT_FAN_OUT } ct_fan_mode;
/* nn.init.calculate_gain: nonlinearity "linear", "conv1d".."conv3d",
 * "conv_transpose1d".."3d", "sigmoid" (1), "tanh" (5/3), "relu" (sqrt 2),
 * "leaky_relu" (sqrt(2 / (1 + param^2)); param NAN: 0.01), "selu" (3/4).
 * NAN + error for an unknown name. */
CT_API double ct_init_calculate_gain(const char *nonlinearity, double param);
/* nn.init._calculate_fan_in_and_fan_out: t at least 2-D;
 * fan_in = size(1) * receptive field, fan_out = size(0) * receptive field. */
CT_API ct_status ct_init_calculate_fan_in_and_fan_out(ct_tensor *t, int64_t *fan_in,
                                                      int64_t *fan_out) CT_NODISCARD;
CT_API ct_tensor *ct_init_uniform_(ct_tensor *t, double a, double b);        /* 0, 1 */
CT_API ct_tensor *ct_init_normal_(ct_tensor *t, double mean, double std);    /* 0, 1 */
CT_API ct_tensor *ct_init_constant_(ct_tensor *t, double val);
CT_API ct_tensor *ct_init_zeros_(ct_tensor *t);
CT_API ct_tensor *ct_init_ones_(ct_tensor *t);
/* nn.init.eye_: 2-D only, the identity (ones on the main diagonal). */
CT_API ct_tensor *ct_init_eye_(ct_tensor *t);
/* nn.init.dirac_: 3-, 4- or 5-D conv weights preserving the identity of the
 * input channels in each of `groups` groups (PyTorch: groups 1). */
CT_API ct_tensor *ct_init_dirac_(ct_tensor *t, int64_t groups);
/* nn.init.xavier_uniform_ / xavier_normal_: std = gain sqrt(2 / (fan_in + fan_out))
 * (uniform bound sqrt(3) std; PyTorch: gain 1). */
CT_API ct_tensor *ct_init_xavier_uniform_(ct_tensor *t, double gain);
CT_API ct_tensor *ct_init_xavier_normal_(ct_tensor *t, double gain);
/* nn.init.kaiming_uniform_ / kaiming_normal_: std = gain / sqrt(fan) with
 * gain = calculate_gain(nonlinearity, a) (uniform bound sqrt(3) std).
 * PyTorch: a 0, CT_FAN_IN, nonlinearity "leaky_relu" (NULL means it).
 * A tensor with no elements is left as it is. */
CT_API ct_tensor *ct_init_kaiming_uniform_(ct_tensor *t, double a, ct_fan_mode mode,
                                           const char *nonlinearity);
CT_API ct_tensor *ct_init_kaiming_normal_(ct_tensor *t, double a, ct_fan_mode mode,
                                          const char *nonlinearity);
/* nn.init.trunc_normal_: N(mean, std) truncated to [a, b] by inverse-CDF
 * sampling (PyTorch: 0, 1, -2, 2). */
CT_API ct_tensor *ct_init_trunc_normal_(ct_tensor *t, double mean, double std, double a,
                                        double b);
/* nn.init.orthogonal_: t (at least 2-D) viewed as [size(0), numel/size(0)]
 * gets a (semi-)orthogonal matrix times gain: Q of the QR decomposition of a
 * standard normal matrix (Householder QR in double), with the signs of
 * diag(R) folded in like torch (PyTorch: gain 1). */
CT_API ct_tensor *ct_init_orthogonal_(ct_tensor *t, double gain);
/* ---- end section: init ---- */

#ifdef __cplusplus
}
#endif
#endif
