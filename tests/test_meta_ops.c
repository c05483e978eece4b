/* test_meta_ops.c -- every op on the meta device (PyTorch's device="meta").
 *
 * 1. Every case of every op fixture family (tests/ops_families.h) runs on
 *    cpu inputs, compared with torch's values as in test_ops, and then again
 *    with every input on meta (same sizes, strides and offsets; the default
 *    device stays cpu, except for factories): the meta outputs must have the cpu outputs'
 *    dtype, sizes, strides and offset, on meta (fixture.c, fx_set_meta_check).
 *    Ops whose output shape depends on the input values must refuse meta
 *    inputs with CT_ERR_DEVICE instead.
 * 2. Functional nn ops (norms, losses, embedding, attention) and bad inputs,
 *    on cpu and meta: the same geometry, or the same error code and message.
 * 3. A small model built on meta (ct_set_default_device) runs forward on a
 *    meta input and gives the cpu model's output shape; modules with CPU
 *    fast paths (transformer encoder in eval) too. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctorch/nn.h"
#include "fixture.h"
#include "ops/meta.h"

/* ---- 1. the fixture families ------------------------------------------ */
static bool any_bool_index(const fx_case *c) {
    for (int k = 1; k < c->nin; k++)
        if (ct_get_dtype(c->in[k]) == CT_BOOL) return true;
    return false;
}

/* Cases whose output shape depends on the input values (torch raises for
 * these on meta too: nonzero, masked_select, unique, ... have no meta
 * kernel). */
static bool data_dependent(const fx_case *c) {
    static const char *const always[] = {"nonzero", "argwhere", "masked_select", "unique",
                                         "unique_consecutive", "bincount",
                                         "repeat_interleave_tensor"};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (strcmp(c->op, always[i]) == 0) return true;
    /* boolean indices select as many elements as they have true values */
    if ((strcmp(c->op, "index") == 0 || strncmp(c->op, "index_put", 9) == 0) && any_bool_index(c))
        return true;
    /* num_classes -1: the largest index + 1 */
    if (strcmp(c->op, "one_hot") == 0 && fx_i(c, "num_classes", -1) < 0) return true;
    /* (histc with min == max takes its range from the data, but its shape is bins) */
    return false;
}

/* Every op exit during the family's runs (cpu and meta, op by op and inside
 * composites and derivatives) had its meta function describe the recorded
 * call: dtype, device and sizes of each output (ct__meta_verify_set). */
static long g_verified;
static void verify_done(const char *family) {
    long checked = 0;
    char first[512];
    long bad = ct__meta_verify_result(&checked, first, sizeof first);
    ct__meta_verify_set(false);
    g_verified += checked;
    if (bad)
        fprintf(stderr, "%s: %ld of %ld recorded op calls are not what their meta function gives; "
                "first: %s\n", family, bad, checked, first);
    assert_int_equal(bad, 0);
}

#define FAMILY(name)                                                       \
    extern const fx_op fx_ops_##name[];                                    \
    extern const int fx_nops_##name;                                       \
    static void test_##name(void **state) {                                \
        (void)state;                                                       \
        fx_set_meta_check(data_dependent);                                 \
        ct__meta_verify_set(true);                                         \
        int f = fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, \
                            fx_nops_##name);                               \
        fx_set_meta_check(NULL);                                           \
        assert_int_equal(f, 0);                                            \
        verify_done(#name);                                                \
    }
#include "ops_families.h"
#undef FAMILY

/* ---- 2. functional nn ops and bad inputs, cpu against meta -------------- */
typedef struct in_spec {
    ct_dtype dt;
    int nd;
    int64_t shape[4];
    int64_t hi; /* integer inputs: randint in [0, hi); bool: hi 2 */
} in_spec;

typedef struct pair_case {
    const char *name;
    ct_tensor *(*fn)(ct_tensor *const *in);
    int nin;
    in_spec in[6];
} pair_case;

static int g_pairs_run, g_pairs_matched, g_pairs_refused, g_pairs_same_error;

static bool same_geometry(const char *name, ct_tensor *m, ct_tensor *c) {
    if (!m || !c) {
        fprintf(stderr, "  FAIL %s: NULL %s result\n", name, !m ? "meta" : "cpu");
        return false;
    }
    bool ok = ct_get_device(m) == CT_META && ct_get_dtype(m) == ct_get_dtype(c) &&
              ct_ndim(m) == ct_ndim(c) &&
              memcmp(ct_sizes(m), ct_sizes(c), sizeof(int64_t) * (size_t)ct_ndim(c)) == 0 &&
              memcmp(ct_strides(m), ct_strides(c), sizeof(int64_t) * (size_t)ct_ndim(c)) == 0 &&
              ct_storage_offset(m) == ct_storage_offset(c);
    if (!ok) {
        fprintf(stderr, "  FAIL %s: meta result (%s, %s, ndim %d) differs from cpu's (%s, %s, "
                "ndim %d) in device, dtype, sizes, strides or offset\n", name,
                ct_device_name(ct_get_device(m)), ct_dtype_name(ct_get_dtype(m)), ct_ndim(m),
                ct_device_name(ct_get_device(c)), ct_dtype_name(ct_get_dtype(c)), ct_ndim(c));
        char *sm = ct_to_string(m), *sc = ct_to_string(c);
        fprintf(stderr, "    meta: %.300s\n    cpu:  %.300s\n", sm ? sm : "?", sc ? sc : "?");
        free(sm);
        free(sc);
    }
    return ok;
}

static int run_pair(const pair_case *pc) {
    ct_scope s = ct_scope_begin();
    ct_tensor *cin[6], *min[6];
    int fails = 0;
    for (int k = 0; k < pc->nin; k++) {
        const in_spec *sp = &pc->in[k];
        if (sp->dt == CT_BOOL)
            cin[k] = ct_lt_scalar(ct_rand(sp->shape, sp->nd, CT_F32), 0.5);
        else if (ct_dtype_is_integral(sp->dt, false))
            cin[k] = ct_randint(0, sp->hi, sp->shape, sp->nd, sp->dt);
        else
            cin[k] = ct_randn(sp->shape, sp->nd, sp->dt);
        min[k] = ct_to_device(cin[k], CT_META);
        assert_non_null(min[k]);
    }
    ct_clear_error();
    ct_tensor *yc = pc->fn(cin);
    ct_status stc = yc ? CT_OK : ct_last_error_code();
    char errc[1024];
    snprintf(errc, sizeof errc, "%s", yc ? "" : ct_last_error());
    ct_clear_error(); /* the default device stays cpu: temporaries follow the inputs */
    ct_tensor *ym = pc->fn(min);
    ct_status stm = ym ? CT_OK : ct_last_error_code();
    g_pairs_run++;
    if (stc != CT_OK) {
        if (stm != stc || strcmp(ct_last_error(), errc) != 0) {
            fprintf(stderr, "  FAIL %s: cpu failed with %s \"%s\", meta gave %s \"%s\"\n", pc->name,
                    ct_status_name(stc), errc, ct_status_name(stm), ym ? "" : ct_last_error());
            fails++;
        } else {
            g_pairs_same_error++;
        }
    } else if (stm != CT_OK) {
        fprintf(stderr, "  FAIL %s: on meta: %s: %s\n", pc->name, ct_status_name(stm), ct_last_error());
        fails++;
    } else if (!same_geometry(pc->name, ym, yc)) {
        fails++;
    } else {
        g_pairs_matched++;
    }
    ct_scope_end(s);
    return fails;
}

#define F32(...) {CT_F32, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}, 0}
#define I64(hi, ...) {CT_I64, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}, hi}
#define BOOL(...) {CT_BOOL, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}, 2}
#define FN(name) static ct_tensor *name(ct_tensor *const *in)

FN(f_bn_train) { return ct_batch_norm(in[0], in[1], in[2], in[3], in[4], true, 0.1, 1e-5); }
FN(f_bn_eval) { return ct_batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5); }
FN(f_bn_nostats) { return ct_batch_norm(in[0], NULL, NULL, NULL, NULL, true, 0.1, 1e-5); }
FN(f_ln) { return ct_layer_norm(in[0], (int64_t[]){6}, 1, in[1], in[2], 1e-5); }
FN(f_ln2) { return ct_layer_norm(in[0], (int64_t[]){4, 6}, 2, NULL, NULL, 1e-5); }
FN(f_gn) { return ct_group_norm(in[0], 2, in[1], in[2], 1e-5); }
FN(f_rms) { return ct_rms_norm(in[0], (int64_t[]){6}, 1, in[1], NAN); }
FN(f_in) { return ct_instance_norm(in[0], NULL, NULL, NULL, NULL, true, 0.1, 1e-5); }
FN(f_lrn) { return ct_local_response_norm(in[0], 3, 1e-4, 0.75, 1.0); }
FN(f_emb) { return ct_embedding(in[0], in[1], CT_PADDING_IDX_NONE, NAN, 2.0, false); }
FN(f_emb_pad) { return ct_embedding(in[0], in[1], 1, NAN, 2.0, false); }
FN(f_emb_maxnorm) { return ct_embedding(in[0], in[1], CT_PADDING_IDX_NONE, 1.0, 2.0, false); }
FN(f_mse) { return ct_mse_loss(in[0], in[1], CT_REDUCTION_MEAN); }
FN(f_mse_none) { return ct_mse_loss(in[0], in[1], CT_REDUCTION_NONE); }
FN(f_l1) { return ct_l1_loss(in[0], in[1], CT_REDUCTION_SUM); }
FN(f_smooth_l1) { return ct_smooth_l1_loss(in[0], in[1], CT_REDUCTION_MEAN, 1.0); }
FN(f_ce) { return ct_cross_entropy(in[0], in[1], NULL); }
FN(f_ce_none) {
    ct_cross_entropy_opts o = {.reduction = CT_REDUCTION_NONE};
    return ct_cross_entropy(in[0], in[1], &o);
}
FN(f_ce_smooth) {
    ct_cross_entropy_opts o = {.label_smoothing = 0.1};
    return ct_cross_entropy(in[0], in[1], &o);
}
FN(f_ce_probs) { return ct_cross_entropy(in[0], ct_softmax(in[1], 1), NULL); }
FN(f_nll) { return ct_nll_loss(ct_log_softmax(in[0], 1), in[1], NULL); }
FN(f_nll_w) {
    ct_cross_entropy_opts o = {.weight = in[2]};
    return ct_nll_loss(ct_log_softmax(in[0], 1), in[1], &o);
}
FN(f_bce) { return ct_binary_cross_entropy(ct_sigmoid(in[0]), ct_sigmoid(in[1]), NULL, CT_REDUCTION_MEAN); }
FN(f_bcel) { return ct_binary_cross_entropy_with_logits(in[0], ct_sigmoid(in[1]), NULL, CT_REDUCTION_MEAN, NULL); }
FN(f_kl) { return ct_kl_div(ct_log_softmax(in[0], 1), ct_softmax(in[1], 1), CT_REDUCTION_BATCHMEAN, false); }
FN(f_huber) { return ct_huber_loss(in[0], in[1], CT_REDUCTION_MEAN, 1.0); }
FN(f_sdpa) { return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, false, 0.0, false); }
FN(f_sdpa_causal) { return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, true, 0.0, false); }
FN(f_sdpa_fmask) { return ct_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, false, 0.0, false); }
FN(f_sdpa_bmask) { return ct_scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, false, 0.0, false); }
FN(f_normalize) { return ct_normalize(in[0], 2.0, 1, 1e-12); }
FN(f_cos) { return ct_cosine_similarity(in[0], in[1], 1, 1e-8); }
FN(f_prelu) { return ct_prelu(in[0], in[1]); }
FN(f_glu) { return ct_glu(in[0], -1); }
FN(f_logsigmoid) { return ct_logsigmoid(in[0]); }
FN(f_dropout_eval) { return ct_dropout(in[0], 0.5, false); }
FN(f_dropout_train) { return ct_dropout(in[0], 0.5, true); }
FN(f_dropout2d) { return ct_dropout2d(in[0], 0.5, true); }
FN(f_bias_relu) { return ct_relu(ct_add(ct_matmul(in[0], ct_t(in[1])), in[2])); }
FN(f_linear) { return ct_linear(in[0], in[1], in[2]); }
/* bad inputs: the error must be the same on meta */
FN(f_bad_matmul) { return ct_matmul(in[0], in[1]); }
FN(f_bad_add) { return ct_add(in[0], in[1]); }
FN(f_bad_sum) { return ct_sum(in[0], (int64_t[]){5}, 1, false); }
FN(f_bad_cat) { return ct_cat(in, 2, 0); }
FN(f_bad_reshape) { return ct_reshape(in[0], (int64_t[]){4}, 1); }
FN(f_bad_conv) { return ct_conv2d(in[0], in[1], NULL, NULL, NULL, NULL, 1); }
FN(f_bad_index_select) { return ct_index_select(in[0], 0, in[1]); }
FN(f_bad_ln) { return ct_layer_norm(in[0], (int64_t[]){5}, 1, NULL, NULL, 1e-5); }
FN(f_bad_ce) { return ct_cross_entropy(in[0], in[1], NULL); }
FN(f_bad_emb) { return ct_embedding(in[0], in[1], CT_PADDING_IDX_NONE, NAN, 2.0, false); }
FN(f_bad_bn) { return ct_batch_norm(in[0], in[1], in[2], NULL, NULL, false, 0.1, 1e-5); }
FN(f_bad_sdpa) { return ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, false, 0.0, false); }

static const pair_case k_pairs[] = {
    {"batch_norm/train", f_bn_train, 5, {F32(4, 3, 5, 5), F32(3), F32(3), F32(3), F32(3)}},
    {"batch_norm/eval", f_bn_eval, 5, {F32(4, 3, 5, 5), F32(3), F32(3), F32(3), F32(3)}},
    {"batch_norm/1d", f_bn_train, 5, {F32(8, 3), F32(3), F32(3), F32(3), F32(3)}},
    {"batch_norm/nostats", f_bn_nostats, 1, {F32(4, 3, 7)}},
    {"layer_norm", f_ln, 3, {F32(2, 4, 6), F32(6), F32(6)}},
    {"layer_norm/2d", f_ln2, 1, {F32(2, 4, 6)}},
    {"group_norm", f_gn, 3, {F32(2, 4, 3, 3), F32(4), F32(4)}},
    {"rms_norm", f_rms, 2, {F32(3, 6), F32(6)}},
    {"instance_norm", f_in, 1, {F32(2, 3, 4, 4)}},
    {"local_response_norm", f_lrn, 1, {F32(2, 5, 4, 4)}},
    {"embedding", f_emb, 2, {I64(10, 2, 5), F32(10, 4)}},
    {"embedding/padding_idx", f_emb_pad, 2, {I64(10, 7), F32(10, 4)}},
    {"embedding/max_norm", f_emb_maxnorm, 2, {I64(10, 7), F32(10, 4)}},
    {"mse_loss", f_mse, 2, {F32(3, 4), F32(3, 4)}},
    {"mse_loss/none", f_mse_none, 2, {F32(3, 4), F32(4)}},
    {"l1_loss", f_l1, 2, {F32(3, 4), F32(3, 4)}},
    {"smooth_l1_loss", f_smooth_l1, 2, {F32(3, 4), F32(3, 4)}},
    {"huber_loss", f_huber, 2, {F32(3, 4), F32(3, 4)}},
    {"cross_entropy", f_ce, 2, {F32(6, 5), I64(5, 6)}},
    {"cross_entropy/none", f_ce_none, 2, {F32(6, 5, 3), I64(5, 6, 3)}},
    {"cross_entropy/smoothing", f_ce_smooth, 2, {F32(6, 5), I64(5, 6)}},
    {"cross_entropy/probs", f_ce_probs, 2, {F32(6, 5), F32(6, 5)}},
    {"nll_loss", f_nll, 2, {F32(6, 5), I64(5, 6)}},
    {"nll_loss/weight", f_nll_w, 3, {F32(6, 5), I64(5, 6), F32(5)}},
    {"binary_cross_entropy", f_bce, 2, {F32(3, 4), F32(3, 4)}},
    {"bce_with_logits", f_bcel, 2, {F32(3, 4), F32(3, 4)}},
    {"kl_div", f_kl, 2, {F32(3, 4), F32(3, 4)}},
    {"sdpa/f32", f_sdpa, 3, {F32(2, 2, 5, 8), F32(2, 2, 7, 8), F32(2, 2, 7, 8)}},
    {"sdpa/causal", f_sdpa_causal, 3, {F32(2, 2, 5, 8), F32(2, 2, 5, 8), F32(2, 2, 5, 8)}},
    {"sdpa/float_mask", f_sdpa_fmask, 4, {F32(2, 5, 8), F32(2, 7, 8), F32(2, 7, 8), F32(5, 7)}},
    {"sdpa/bool_mask", f_sdpa_bmask, 4, {F32(2, 5, 8), F32(2, 7, 8), F32(2, 7, 8), BOOL(5, 7)}},
    {"normalize", f_normalize, 1, {F32(3, 4)}},
    {"cosine_similarity", f_cos, 2, {F32(3, 4), F32(3, 4)}},
    {"prelu", f_prelu, 2, {F32(2, 3, 4), F32(3)}},
    {"glu", f_glu, 1, {F32(2, 6)}},
    {"logsigmoid", f_logsigmoid, 1, {F32(2, 6)}},
    {"dropout/eval", f_dropout_eval, 1, {F32(2, 6)}},
    {"dropout/train", f_dropout_train, 1, {F32(2, 6)}},
    {"dropout2d", f_dropout2d, 1, {F32(2, 3, 4, 4)}},
    {"matmul+bias+relu", f_bias_relu, 3, {F32(4, 6), F32(5, 6), F32(5)}},
    {"linear", f_linear, 3, {F32(2, 4, 6), F32(5, 6), F32(5)}},
    {"bad/matmul", f_bad_matmul, 2, {F32(3, 4), F32(5, 6)}},
    {"bad/add", f_bad_add, 2, {F32(3, 4), F32(5)}},
    {"bad/sum_dim", f_bad_sum, 1, {F32(3, 4)}},
    {"bad/cat", f_bad_cat, 2, {F32(3, 4), F32(3, 5)}},
    {"bad/reshape", f_bad_reshape, 1, {F32(3, 4)}},
    {"bad/conv2d_channels", f_bad_conv, 2, {F32(1, 3, 5, 5), F32(2, 4, 3, 3)}},
    {"bad/index_select_dtype", f_bad_index_select, 2, {F32(3, 4), F32(2)}},
    {"bad/layer_norm_shape", f_bad_ln, 1, {F32(3, 4)}},
    {"bad/cross_entropy_shape", f_bad_ce, 2, {F32(6, 5), I64(5, 7)}},
    {"bad/embedding_dtype", f_bad_emb, 2, {F32(2, 5), F32(10, 4)}},
    {"bad/batch_norm_stats", f_bad_bn, 3, {F32(4, 3, 5), F32(4), F32(4)}},
    {"bad/sdpa_shape", f_bad_sdpa, 3, {F32(2, 5, 8), F32(2, 7, 6), F32(2, 7, 8)}},
};

static void test_nn_functional(void **state) {
    (void)state;
    ct_manual_seed(7);
    int fails = 0;
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) fails += run_pair(&k_pairs[i]);
    assert_int_equal(fails, 0);
}

/* ctc_loss with valid targets and lengths: the alpha recursion runs over the lengths' values */
static void test_ctc_refused(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *lp = ct_log_softmax(ct_randn(CT_SHAPE(6, 2, 4), CT_F32), 2);
    ct_tensor *tg = ct_from_array((int64_t[]){1, 2, 3, 1, 1, 2}, CT_SHAPE(2, 3), CT_I64);
    ct_tensor *il = ct_from_array((int64_t[]){6, 5}, CT_SHAPE(2), CT_I64);
    ct_tensor *tl = ct_from_array((int64_t[]){3, 2}, CT_SHAPE(2), CT_I64);
    ct_tensor *yc = ct_ctc_loss(lp, tg, il, tl, 0, CT_REDUCTION_MEAN, false);
    assert_non_null(yc);
    ct_tensor *m[4] = {ct_to_device(lp, CT_META), ct_to_device(tg, CT_META),
                       ct_to_device(il, CT_META), ct_to_device(tl, CT_META)};
    ct_clear_error();
    ct_tensor *ym = ct_ctc_loss(m[0], m[1], m[2], m[3], 0, CT_REDUCTION_MEAN, false);
    assert_null(ym);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "meta"));
    g_pairs_run++;
    g_pairs_refused++;
    ct_scope_end(s);
}

/* ---- 3. models on meta ------------------------------------------------- */
static ct_module *small_cnn(void) {
    /* [N, 3, 8, 8] -> Conv2d(3, 4, 3, padding 1) -> BatchNorm2d(4) -> ReLU
     * -> MaxPool2d(2) -> Flatten -> Linear(64, 10) -> ReLU -> LayerNorm(10) */
    ct_conv_opts co = {.padding = (int64_t[]){1, 1}};
    ct_module *layers[] = {
        ct_conv2d_new(3, 4, (int64_t[]){3, 3}, &co),
        ct_batch_norm2d_new(4, 1e-5, 0.1, true, true),
        ct_relu_new(),
        ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, false, false),
        ct_flatten_new(1, -1),
        ct_linear_new(64, 10, true),
        ct_relu_new(),
        ct_layer_norm_new((int64_t[]){10}, 1, 1e-5, true, true),
    };
    int n = (int)(sizeof layers / sizeof layers[0]);
    for (int i = 0; i < n; i++) assert_non_null(layers[i]);
    ct_module *net = ct_sequential_new(layers, n);
    for (int i = 0; i < n; i++) ct_module_release(layers[i]);
    assert_non_null(net);
    return net;
}

static void check_params_on(ct_module *m, ct_device dev) {
    ct_tensor *ps[64];
    int n = ct_module_named_parameters(m, NULL, ps, 64);
    assert_true(n > 0);
    for (int i = 0; i < n && i < 64; i++) assert_int_equal(ct_get_device(ps[i]), dev);
    n = ct_module_named_buffers(m, NULL, ps, 64);
    for (int i = 0; i < n && i < 64; i++) assert_int_equal(ct_get_device(ps[i]), dev);
}

static void test_model_forward(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_module *cpu = small_cnn();
    assert_int_equal(ct_set_default_device(CT_META), CT_OK);
    ct_module *meta = small_cnn();
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    check_params_on(cpu, CT_CPU);
    check_params_on(meta, CT_META);
    assert_int_equal(ct_module_num_parameters(meta, false), ct_module_num_parameters(cpu, false));
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 8, 8), CT_F32);
    ct_tensor *xm = ct_to_device(x, CT_META);
    for (int mode = 0; mode < 2; mode++) { /* training, then eval */
        ct_module_train(cpu, mode == 0);
        ct_module_train(meta, mode == 0);
        ct_tensor *yc = ct_module_forward1(cpu, x);
        assert_non_null(yc);
        ct_tensor *ym = ct_module_forward1(meta, xm);
        if (!ym) fprintf(stderr, "meta forward: %s\n", ct_last_error());
        assert_non_null(ym);
        assert_true(same_geometry(mode == 0 ? "cnn/train" : "cnn/eval", ym, yc));
        assert_int_equal(ct_ndim(ym), 2);
        assert_int_equal(ct_sizes(ym)[0], 2);
        assert_int_equal(ct_sizes(ym)[1], 10);
    }
    /* backward on meta: every parameter gets a meta gradient of its shape */
    ct_module_train(meta, true);
    ct_tensor *loss = ct_sum(ct_module_forward1(meta, xm), NULL, 0, false);
    assert_non_null(loss);
    ct_status bst = ct_backward(loss, NULL, false, false);
    if (bst) fprintf(stderr, "backward on meta: %s\n", ct_last_error());
    assert_int_equal(bst, CT_OK);
    ct_tensor *ps[64];
    int np = ct_module_named_parameters(meta, NULL, ps, 64);
    for (int i = 0; i < np; i++) {
        ct_tensor *g = ct_grad(ps[i]);
        assert_non_null(g);
        assert_int_equal(ct_get_device(g), CT_META);
        assert_int_equal(ct_ndim(g), ct_ndim(ps[i]));
        assert_memory_equal(ct_sizes(g), ct_sizes(ps[i]), sizeof(int64_t) * (size_t)ct_ndim(g));
    }
    /* to the cpu (to_empty) and the model computes */
    assert_int_equal(ct_module_to(meta, CT_CPU), CT_OK);
    check_params_on(meta, CT_CPU);
    ct_module_eval(meta);
    ct_tensor *y2 = ct_module_forward1(meta, x);
    assert_non_null(y2);
    ct_module_release(cpu);
    ct_module_release(meta);
    ct_scope_end(s);
}

/* Modules with CPU fast paths (fused encoder layer in eval, embedding,
 * LSTM): on meta they take their composite paths. */
static void test_fast_path_modules(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_module *mods[2][4];
    for (int d = 0; d < 2; d++) {
        assert_int_equal(ct_set_default_device(d ? CT_META : CT_CPU), CT_OK);
        ct_module *layer = ct_transformer_encoder_layer_new(16, 4, 32, 0.1, CT_TRANSFORMER_RELU, 1e-5,
                                                           true, false, true);
        assert_non_null(layer);
        mods[d][0] = layer;
        mods[d][1] = ct_transformer_encoder_new(layer, 2, NULL, true);
        mods[d][2] = ct_embedding_new(20, 16, 0, NAN, 2.0, false);
        mods[d][3] = ct_lstm_new(16, 8, 1, true, true, 0.0, false);
        for (int i = 0; i < 4; i++) assert_non_null(mods[d][i]);
        for (int i = 0; i < 4; i++) ct_module_eval(mods[d][i]);
    }
    assert_int_equal(ct_set_default_device(CT_CPU), CT_OK);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 16), CT_F32);
    ct_tensor *tok = ct_randint(0, 20, CT_SHAPE(2, 5), CT_I64);
    /* left-aligned padding: the packed nested-tensor path */
    ct_tensor *pad = ct_from_array((uint8_t[]){0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, CT_SHAPE(2, 5), CT_BOOL);
    ct_tensor *ins[2][3];
    ins[0][0] = x;
    ins[0][1] = tok;
    ins[0][2] = pad;
    for (int i = 0; i < 3; i++) ins[1][i] = ct_to_device(ins[0][i], CT_META);
    ct_tensor *y[2][5];
    bool was = ct_set_grad_enabled(false);
    for (int d = 0; d < 2; d++) {
        y[d][0] = ct_transformer_encoder_layer_forward(mods[d][0], ins[d][0], NULL, NULL, false);
        y[d][1] = ct_transformer_encoder_layer_forward(mods[d][0], ins[d][0], NULL, ins[d][2], false);
        y[d][2] = ct_transformer_encoder_forward(mods[d][1], ins[d][0], NULL, ins[d][2], false);
        y[d][3] = ct_module_forward1(mods[d][2], ins[d][1]);
        y[d][4] = ct_module_forward1(mods[d][3], ins[d][0]);
        if (d == 1)
            for (int i = 0; i < 5; i++)
                if (!y[d][i]) fprintf(stderr, "fast-path module %d on meta: %s\n", i, ct_last_error());
    }
    (void)ct_set_grad_enabled(was);
    static const char *const names[] = {"encoder_layer", "encoder_layer/padding",
                                        "encoder/nested", "embedding", "lstm"};
    int fails = 0;
    for (int i = 0; i < 5; i++) fails += !same_geometry(names[i], y[1][i], y[0][i]);
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 4; i++) ct_module_release(mods[d][i]);
    ct_scope_end(s);
    assert_int_equal(fails, 0);
}

/* initializers on meta have nothing to draw or compute and return the tensor */
static void test_init_on_meta(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *w = ct_empty_on(CT_SHAPE(6, 4, 3, 3), CT_F32, CT_META);
    ct_tensor *w2 = ct_empty_on(CT_SHAPE(8, 5), CT_F32, CT_META);
    assert_ptr_equal(ct_init_dirac_(w, 1), w);
    assert_ptr_equal(ct_init_orthogonal_(w2, 1.0), w2);
    assert_ptr_equal(ct_init_eye_(w2), w2);
    assert_ptr_equal(ct_init_kaiming_uniform_(w, 0.0, CT_FAN_IN, NULL), w);
    assert_ptr_equal(ct_init_kaiming_normal_(w, 0.0, CT_FAN_OUT, "relu"), w);
    assert_ptr_equal(ct_init_xavier_uniform_(w, 1.0), w);
    assert_ptr_equal(ct_init_uniform_(w2, -1.0, 1.0), w2);
    assert_ptr_equal(ct_init_normal_(w2, 0.0, 1.0), w2);
    assert_ptr_equal(ct_init_zeros_(w2), w2);
    assert_ptr_equal(ct_init_ones_(w2), w2);
    assert_ptr_equal(ct_init_xavier_normal_(w2, 1.0), w2);
    assert_ptr_equal(ct_init_trunc_normal_(w2, 0.0, 1.0, -2.0, 2.0), w2);
    assert_ptr_equal(ct_init_constant_(w2, 3.0), w2);
    assert_int_equal(ct_get_device(w), CT_META);
    ct_scope_end(s);
}

static void test_meta_tally(void **state) {
    (void)state;
    fx_meta_tally t = fx_meta_summary();
    fx_meta_print_summary();
    printf("functional and bad-input pairs on meta: %d run: %d matched, %d same error, %d "
           "data-dependent refusals\n", g_pairs_run, g_pairs_matched, g_pairs_same_error,
           g_pairs_refused);
    printf("recorded op calls checked against their meta function: %ld\n", g_verified);
    assert_true(g_verified > 1000);
    /* every family ran on meta, every case accounted for */
    assert_true(t.run > 3000);
    assert_int_equal(t.failed, 0);
    assert_int_equal(t.run, t.matched + t.refused + t.same_error);
    assert_true(t.refused > 0);
    assert_int_equal(g_pairs_run, g_pairs_matched + g_pairs_refused + g_pairs_same_error);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
        cmocka_unit_test(test_nn_functional),
        cmocka_unit_test(test_ctc_refused),
        cmocka_unit_test(test_model_forward),
        cmocka_unit_test(test_fast_path_modules),
        cmocka_unit_test(test_init_on_meta),
        cmocka_unit_test(test_meta_tally),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
