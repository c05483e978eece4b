/* test_amp.c -- autocast (ctorch/amp.h) against torch.autocast("cpu"):
 * the output dtype and values of every op of torch's CPU autocast lists
 * that ctorch has, bfloat16 and float16 (tests/fixtures/autocast.txt from
 * tools/fixtures/gen_autocast.py), the same cases on meta tensors, the
 * gradients of an MLP and a CNN through an autocast region; nesting,
 * disabling inside a region, the guard, the weight cache, threads, errors,
 * and ct_compile tracing the casts. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>

#include "fixture.h"
#include "test_util.h"

/* a failure inside a fixture runner: recorded as an error the runner reports */
#define ct__test_fail(...) (fprintf(stderr, "  " __VA_ARGS__), fprintf(stderr, "\n"), CT_ERR_RUNTIME)

/* ---- fixture runners: each op under torch.autocast("cpu", dtype=ac) -------------- */
typedef ct_tensor *(*ac_fn)(const fx_case *c, ct_tensor *const *in);

static ct_status under_autocast(const fx_case *c, ct_tensor *const *in, ct_tensor **out, ac_fn fn) {
    ct_status st = ct_autocast_enter(CT_CPU, fx_dtype(fx_s(c, "ac", "bfloat16")));
    if (st) return st;
    out[0] = fn(c, in);
    st = ct_autocast_exit();
    if (st) return st;
    return out[0] ? CT_OK : ct_last_error_code();
}

#define AC_CASE(name, expr)                                                             \
    static ct_tensor *f_##name(const fx_case *c, ct_tensor *const *in) {                \
        (void)c;                                                                        \
        return (expr);                                                                  \
    }                                                                                   \
    static ct_status r_##name(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { \
        return under_autocast(c, in, out, f_##name);                                    \
    }

static const int64_t *ints(const fx_case *c, const char *name, int64_t *buf) {
    return fx_ints(c, name, buf, 8) > 0 ? buf : NULL;
}

static ct_tensor *conv_any(const fx_case *c, ct_tensor *const *in, int nd) {
    int64_t s[8], p[8];
    if (fx_has(c, "padmode"))
        return ct_conv_padmode(in[0], in[1], in[2], nd, NULL, fx_s(c, "padmode", "valid"), NULL, 1);
    const int64_t *st = ints(c, "stride", s), *pd = ints(c, "padding", p);
    return nd == 1 ? ct_conv1d(in[0], in[1], in[2], st, pd, NULL, 1)
         : nd == 2 ? ct_conv2d(in[0], in[1], in[2], st, pd, NULL, 1)
                   : ct_conv3d(in[0], in[1], in[2], st, pd, NULL, 1);
}
static ct_tensor *convt_any(const fx_case *c, ct_tensor *const *in, int nd) {
    int64_t s[8];
    return nd == 1 ? ct_conv_transpose1d(in[0], in[1], in[2], ints(c, "stride", s), NULL, NULL, 1, NULL)
                   : ct_conv_transpose2d(in[0], in[1], in[2], ints(c, "stride", s), NULL, NULL, 1, NULL);
}
static ct_tensor *pad_any(const fx_case *c, ct_tensor *const *in) {
    int64_t p[8];
    int n = fx_ints(c, "pad", p, 8);
    ct_pad_mode m = strcmp(fx_s(c, "mode", ""), "reflect") == 0 ? CT_PAD_REFLECT : CT_PAD_REPLICATE;
    return ct_pad(in[0], p, n, m, 0);
}
static ct_tensor *ce_like(const fx_case *c, ct_tensor *const *in, bool ce) {
    (void)c;
    ct_cross_entropy_opts o = {0};
    o.weight = c->nin > 2 ? in[2] : NULL;
    return ce ? ct_cross_entropy(in[0], in[1], &o) : ct_nll_loss(in[0], in[1], &o);
}
static int64_t dim_of(const fx_case *c) { return fx_i(c, "dim", 0); }

AC_CASE(conv1d, conv_any(c, in, 1))
AC_CASE(conv2d, conv_any(c, in, 2))
AC_CASE(conv3d, conv_any(c, in, 3))
AC_CASE(conv_transpose1d, convt_any(c, in, 1))
AC_CASE(conv_transpose2d, convt_any(c, in, 2))
AC_CASE(bmm, ct_bmm(in[0], in[1]))
AC_CASE(mm, ct_mm(in[0], in[1]))
AC_CASE(baddbmm, ct_baddbmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)))
AC_CASE(addmm, ct_addmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)))
AC_CASE(addbmm, ct_addbmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1)))
AC_CASE(linear, ct_linear(in[0], in[1], in[2]))
AC_CASE(matmul, ct_matmul(in[0], in[1]))
AC_CASE(prelu, ct_prelu(in[0], in[1]))
AC_CASE(sdpa, ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, fx_i(c, "is_causal", 0), 0, false))
AC_CASE(bce, ct_binary_cross_entropy(in[0], in[1], NULL, CT_REDUCTION_MEAN))
AC_CASE(bce_logits, ct_binary_cross_entropy_with_logits(in[0], in[1], NULL, CT_REDUCTION_MEAN, in[2]))
AC_CASE(prod, ct_prod(in[0], (int64_t[]){dim_of(c)}, 1, false))
AC_CASE(cdist, ct_cdist(in[0], in[1], fx_f(c, "p", 2)))
AC_CASE(trace, ct_trace(in[0]))
AC_CASE(pad, pad_any(c, in))
AC_CASE(mse, ct_mse_loss(in[0], in[1], CT_REDUCTION_MEAN))
AC_CASE(l1, ct_l1_loss(in[0], in[1], CT_REDUCTION_MEAN))
AC_CASE(smooth_l1, ct_smooth_l1_loss(in[0], in[1], CT_REDUCTION_MEAN, fx_f(c, "beta", 1)))
AC_CASE(huber, ct_huber_loss(in[0], in[1], CT_REDUCTION_MEAN, fx_f(c, "delta", 1)))
AC_CASE(nll, ce_like(c, in, false))
AC_CASE(ce, ce_like(c, in, true))
AC_CASE(kl_div, ct_kl_div(in[0], in[1], CT_REDUCTION_SUM, false))
AC_CASE(poisson_nll, ct_poisson_nll_loss(in[0], in[1], true, false, 1e-8, CT_REDUCTION_MEAN))
AC_CASE(cosine_emb, ct_cosine_embedding_loss(in[0], in[1], in[2], fx_f(c, "margin", 0), CT_REDUCTION_MEAN))
AC_CASE(hinge_emb, ct_hinge_embedding_loss(in[0], in[1], fx_f(c, "margin", 1), CT_REDUCTION_MEAN))
AC_CASE(margin_rank, ct_margin_ranking_loss(in[0], in[1], in[2], fx_f(c, "margin", 0), CT_REDUCTION_MEAN))
AC_CASE(triplet, ct_triplet_margin_loss(in[0], in[1], in[2], fx_f(c, "margin", 1), 2, 1e-6, false,
                                        CT_REDUCTION_MEAN))
AC_CASE(multi_margin, ct_multi_margin_loss(in[0], in[1], 1, 1, NULL, CT_REDUCTION_MEAN))
AC_CASE(ctc, ct_ctc_loss(in[0], in[1], in[2], in[3], 0, CT_REDUCTION_MEAN, false))
AC_CASE(cat, ct_cat(in, 2, dim_of(c)))
AC_CASE(stack, ct_stack(in, 2, dim_of(c)))
AC_CASE(index_copy, ct_index_copy(in[0], dim_of(c), in[1], in[2]))
AC_CASE(softmax, ct_softmax(in[0], dim_of(c)))
AC_CASE(log_softmax, ct_log_softmax(in[0], dim_of(c)))
AC_CASE(layer_norm, ct_layer_norm(in[0], (int64_t[]){ct_size(in[0], -1)}, 1, in[1], in[2], 1e-5))
AC_CASE(relu, ct_relu(in[0]))
AC_CASE(add, ct_add(in[0], in[1]))

/* a forward under autocast and the backward outside it: loss, then the
 * gradients of the floating inputs (x, w1, b1, w2, b2; y is the target) */
static ct_status train_case(const fx_case *c, ct_tensor *const *in, ct_tensor **out, bool cnn) {
    ct_tensor *l[5];
    for (int k = 0; k < 5; k++)
        if (!(l[k] = fx_leaf(in[k]))) return ct_last_error_code();
    ct_status st = ct_autocast_enter(CT_CPU, fx_dtype(fx_s(c, "ac", "bfloat16")));
    if (st) return st;
    ct_tensor *h;
    if (cnn) {
        h = ct_relu(ct_conv2d(l[0], l[1], l[2], NULL, (int64_t[]){1, 1}, NULL, 1));
        h = ct_flatten(ct_max_pool2d(h, (int64_t[]){2, 2}, NULL, NULL, NULL, false, NULL), 1, -1);
    } else {
        h = ct_relu(ct_linear(l[0], l[1], l[2]));
    }
    ct_tensor *loss = ct_cross_entropy(ct_linear(h, l[3], l[4]), in[5], NULL);
    st = ct_autocast_exit();
    if (st) return st;
    if ((st = fx_backward(loss, NULL))) return st;
    out[0] = loss;
    for (int k = 0; k < 5; k++) out[1 + k] = ct_grad(l[k]);
    return CT_OK;
}
static ct_status r_mlp(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return train_case(c, in, out, false);
}
static ct_status r_cnn(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return train_case(c, in, out, true);
}

static const fx_op k_ops[] = {
    {"conv1d", r_conv1d, 0, 0}, {"conv2d", r_conv2d, 0, 0}, {"conv3d", r_conv3d, 0, 0},
    {"conv_transpose1d", r_conv_transpose1d, 0, 0}, {"conv_transpose2d", r_conv_transpose2d, 0, 0},
    {"bmm", r_bmm, 0, 0}, {"mm", r_mm, 0, 0}, {"baddbmm", r_baddbmm, 0, 0}, {"addmm", r_addmm, 0, 0},
    {"addbmm", r_addbmm, 0, 0}, {"linear", r_linear, 0, 0}, {"matmul", r_matmul, 0, 0},
    {"prelu", r_prelu, 0, 0}, {"scaled_dot_product_attention", r_sdpa, 0, 0},
    {"binary_cross_entropy", r_bce, 0, 0}, {"binary_cross_entropy_with_logits", r_bce_logits, 0, 0},
    {"prod", r_prod, 0, 0}, {"cdist", r_cdist, 0, 0}, {"trace", r_trace, 0, 0},
    {"reflection_pad1d", r_pad, 0, 0}, {"reflection_pad2d", r_pad, 0, 0},
    {"replication_pad1d", r_pad, 0, 0}, {"replication_pad2d", r_pad, 0, 0},
    {"replication_pad3d", r_pad, 0, 0}, {"mse_loss", r_mse, 0, 0}, {"l1_loss", r_l1, 0, 0},
    {"smooth_l1_loss", r_smooth_l1, 0, 0}, {"huber_loss", r_huber, 0, 0}, {"nll_loss", r_nll, 0, 0},
    {"cross_entropy_loss", r_ce, 0, 0}, {"kl_div", r_kl_div, 0, 0}, {"poisson_nll_loss", r_poisson_nll, 0, 0},
    {"cosine_embedding_loss", r_cosine_emb, 0, 0}, {"hinge_embedding_loss", r_hinge_emb, 0, 0},
    {"margin_ranking_loss", r_margin_rank, 0, 0}, {"triplet_margin_loss", r_triplet, 0, 0},
    {"multi_margin_loss", r_multi_margin, 0, 0}, {"ctc_loss", r_ctc, 0, 0}, {"cat", r_cat, 0, 0},
    {"stack", r_stack, 0, 0}, {"index_copy", r_index_copy, 0, 0}, {"softmax", r_softmax, 0, 0},
    {"log_softmax", r_log_softmax, 0, 0}, {"layer_norm", r_layer_norm, 0, 0}, {"relu", r_relu, 0, 0},
    {"add", r_add, 0, 0}, {"mlp", r_mlp, 0, 0}, {"cnn", r_cnn, 0, 0},
};

/* every op of src/ops/autocast.def that has a function in ctorch has cases */
static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/autocast.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
    assert_int_equal(ct_autocast_cache_size(), 0);
    assert_false(ct_autocast_is_enabled(CT_CPU));
}

/* ctc's output needs the lengths' values */
static bool data_dependent(const fx_case *c) {
    return strcmp(c->op, "ctc_loss") == 0;
}

/* the same cases on meta tensors: the dtypes (and geometry) the cpu run had */
static void test_fixtures_meta(void **state) {
    (void)state;
    fx_set_meta_check(data_dependent);
    int f = fx_run_file(CT_FIXTURE_DIR "/autocast.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    fx_set_meta_check(NULL);
    fx_meta_print_summary();
    fx_meta_tally t = fx_meta_summary();
    assert_int_equal(f, 0);
    assert_int_equal(t.failed, 0);
    assert_true(t.matched > 100);
}

/* ---- state ----------------------------------------------------------------------- */
static ct_dtype mm_dtype(void) {
    ct_tensor *a = ct_ones(CT_SHAPE(2, 2), CT_F32);
    ct_tensor *r = ct_mm(a, a);
    assert_non_null(r);
    return ct_get_dtype(r);
}

static void test_nesting(void **state) {
    (void)state;
    SCOPE_BEGIN;
    assert_false(ct_autocast_is_enabled(CT_CPU));
    assert_int_equal(ct_autocast_get_dtype(CT_CPU), CT_BF16);
    assert_true(ct_autocast_is_cache_enabled());
    assert_int_equal(mm_dtype(), CT_F32);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    assert_true(ct_autocast_is_enabled(CT_CPU));
    assert_int_equal(mm_dtype(), CT_BF16);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_F16), CT_OK);
    assert_int_equal(ct_autocast_get_dtype(CT_CPU), CT_F16);
    assert_int_equal(mm_dtype(), CT_F16);
    /* torch.autocast("cpu", enabled=False) inside an enabled region */
    assert_int_equal(ct_autocast_enter_ex(CT_CPU, CT_BF16, false, false), CT_OK);
    assert_false(ct_autocast_is_enabled(CT_CPU));
    assert_false(ct_autocast_is_cache_enabled());
    assert_int_equal(mm_dtype(), CT_F32);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_true(ct_autocast_is_enabled(CT_CPU));
    assert_true(ct_autocast_is_cache_enabled());
    assert_int_equal(mm_dtype(), CT_F16);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_int_equal(ct_autocast_get_dtype(CT_CPU), CT_BF16);
    assert_int_equal(mm_dtype(), CT_BF16);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_false(ct_autocast_is_enabled(CT_CPU));
    assert_int_equal(mm_dtype(), CT_F32);
    /* the guard */
    int ran = 0;
    CT_AUTOCAST(CT_CPU, CT_F16) {
        ran++;
        assert_int_equal(mm_dtype(), CT_F16);
    }
    assert_int_equal(ran, 1);
    assert_false(ct_autocast_is_enabled(CT_CPU));
    SCOPE_END;
}

static void test_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    assert_int_equal(ct_autocast_exit(), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "without a matching enter"));
    ct_clear_error();
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_F32), CT_ERR_DTYPE);
    assert_non_null(strstr(ct_last_error(), "bfloat16 or float16, got float32"));
    ct_clear_error();
    assert_int_equal(ct_autocast_enter(CT_CUDA, CT_F16), CT_ERR_DEVICE);
    ct_clear_error();
    assert_false(ct_autocast_is_enabled(CT_CPU));
    /* a failed enter: the guard's body does not run */
    int ran = 0;
    CT_AUTOCAST(CT_CPU, CT_I32) { ran++; }
    assert_int_equal(ran, 0);
    ct_clear_error();
    /* promote (cat): float16 before any float32 in a bfloat16 region is refused, as
     * torch's prioritize ("Unexpected floating ScalarType"); after a float32 it is fine */
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32), *h = ct_to_dtype(a, CT_F16);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    expect_err(ct_cat((ct_tensor *[]){h, a}, 2, 0), CT_ERR_DTYPE, "cannot promote an operand of dtype float16");
    ct_tensor *r = ct_cat((ct_tensor *[]){a, h}, 2, 0);
    assert_non_null(r);
    assert_int_equal(ct_get_dtype(r), CT_F32);
    /* float64 is never cast; NULL propagates with the first error */
    ct_tensor *d = ct_to_dtype(a, CT_F64);
    assert_int_equal(ct_get_dtype(ct_mm(d, ct_transpose(d, 0, 1))), CT_F64);
    expect_err(ct_mm(a, NULL), CT_ERR_NULL, "mm");
    expect_err(ct_mm(a, a), CT_ERR_SHAPE, "mm");
    assert_int_equal(ct_autocast_exit(), CT_OK);
    SCOPE_END;
}

/* the weight cache: a float32 leaf that requires grad is cast once per region */
/* ---- linear / addmm with the casts folded into the product ---------------
 * Where the CPU computes bf16 products itself, autocast runs bf16 linear and
 * addmm as one custom function (src/ops/autocast_linear.c): its output and
 * gradients must be bit for bit those of the casts, computed here outside
 * autocast on explicit bf16 copies. */
static ct_tensor *leaf_of(ct_tensor *t) {
    ct_tensor *l = ct_detach(ct_contiguous(t));
    assert_non_null(l);
    assert_int_equal(ct_set_requires_grad(l, true), CT_OK);
    return l;
}

static void bit_equal(ct_tensor *a, ct_tensor *b, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    if (ct_get_dtype(a) != ct_get_dtype(b) || ct_equal(a, b) != 1) {
        print_error("%s: the fused result differs from the casts' (%s vs %s, max abs diff %g)\n", what,
                    ct_dtype_name(ct_get_dtype(a)), ct_dtype_name(ct_get_dtype(b)),
                    ct_item(ct_amax(ct_abs(ct_sub(ct_to_dtype(a, CT_F32), ct_to_dtype(b, CT_F32))), NULL, 0, false)));
        fail();
    }
}

static void fused_case(bool addmm, int64_t M, int64_t K, int64_t N, bool bias, bool xbf16, bool create_graph) {
    SCOPE_BEGIN;
    ct_manual_seed(21);
    bool three = !addmm && M % 2 == 0; /* linear: x [2, M/2, K] */
    ct_tensor *x0 = three ? ct_randn(CT_SHAPE(2, M / 2, K), CT_F32) : ct_randn(CT_SHAPE(M, K), CT_F32);
    if (xbf16) x0 = ct_to_dtype(x0, CT_BF16);
    ct_tensor *W0 = addmm ? ct_randn(CT_SHAPE(K, N), CT_F32) : ct_randn(CT_SHAPE(N, K), CT_F32);
    /* a non-contiguous bias: every other element of a longer vector */
    ct_tensor *b0 = bias ? ct_slice(ct_randn(CT_SHAPE(2 * N), CT_F32), 0, 0, 2 * N, 2) : NULL;
    ct_tensor *x = leaf_of(x0), *W = leaf_of(W0), *b = bias ? leaf_of(b0) : NULL;
    ct_tensor *xr = leaf_of(x0), *Wr = leaf_of(W0), *br = bias ? leaf_of(b0) : NULL;
    ct_tensor *bl = NULL;
    if (bias) { /* a strided bias (a view of a leaf twice as long) */
        bl = leaf_of(ct_randn(CT_SHAPE(2 * N), CT_F32));
        assert_non_null(ct_copy_(ct_slice(ct_detach(bl), 0, 0, 2 * N, 2), b0));
        b = ct_slice(bl, 0, 0, 2 * N, 2);
        assert_false(ct_is_contiguous(b));
    }
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    ct_tensor *y = addmm ? ct_addmm(b, x, W, 1.0, 1.0) : ct_linear(x, W, b);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_non_null(y);
    printf("  %s %lldx%lldx%lld%s%s: %s\n", addmm ? "addmm" : "linear", (long long)M, (long long)K, (long long)N,
           bias ? " bias" : "", xbf16 ? " bf16 x" : "", ct_grad_fn_name(y));
    ct_tensor *bc = bias ? ct_to_dtype(br, CT_BF16) : NULL;
    ct_tensor *yr = addmm ? ct_addmm(bc, ct_to_dtype(xr, CT_BF16), ct_to_dtype(Wr, CT_BF16), 1.0, 1.0)
                          : ct_linear(ct_to_dtype(xr, CT_BF16), ct_to_dtype(Wr, CT_BF16), bc);
    bit_equal(y, yr, "output");
    ct_tensor *g = ct_to_dtype(ct_randn(ct_sizes(y), ct_ndim(y), CT_F32), CT_BF16);
    ct_tensor *in[3] = {x, W, bl}, *inr[3] = {xr, Wr, br}, *d[3] = {0}, *dr[3] = {0};
    int n = bias ? 3 : 2;
    assert_int_equal(ct_autograd_grad(&y, 1, in, n, &g, false, create_graph, false, d), CT_OK);
    assert_int_equal(ct_autograd_grad(&yr, 1, inr, n, &g, false, create_graph, false, dr), CT_OK);
    if (bias) d[2] = ct_slice(d[2], 0, 0, 2 * N, 2); /* the view's part of its base's gradient */
    const char *nm[3] = {"dx", "dW", "db"};
    for (int i = 0; i < n; i++) bit_equal(d[i], dr[i], nm[i]);
    SCOPE_END;
}

/* Autocast cross entropy over half logits runs the fused function on the
 * logits themselves (src/nn/loss.c ce_autocast_half: ops softmax_float and
 * ce_grad_lp): the loss and the logits' gradient must be bit for bit those
 * of the ordinary path, the float32 cast then cross entropy, computed here
 * outside autocast.  Rows cover an ignored target and a target whose
 * probability underflows float32 (the logsumexp fallback); a transposed
 * (non-contiguous) input; each reduction; bf16 and f16; a graph-building
 * backward. */
static void ce_half_case(ct_dtype dt, ct_reduction red, bool transposed, bool create_graph) {
    SCOPE_BEGIN;
    ct_manual_seed(33);
    const int64_t N = 37, C = 300;
    ct_tensor *x0 = ct_mul_scalar(ct_randn(CT_SHAPE(N, C), CT_F32), 4.0);
    /* row 0: its target (class 5) 120 below the row's largest logit */
    assert_non_null(ct_fill_(ct_select(x0, 0, 0), 60.0));
    assert_non_null(ct_fill_(ct_select(ct_select(x0, 0, 0), 0, 5), -60.0));
    if (transposed) x0 = ct_t(ct_contiguous(ct_t(x0)));
    double tv[37];
    for (int64_t i = 0; i < N; i++) tv[i] = (double)((i * 7919) % C);
    tv[0] = 5;
    tv[3] = -100; /* ignored */
    tv[11] = -100;
    ct_tensor *t = ct_from_doubles(tv, CT_SHAPE(N), CT_I64);
    ct_tensor *xh = ct_to_dtype(x0, dt);
    if (transposed) xh = ct_t(ct_contiguous(ct_t(xh)));
    assert_int_equal(ct_is_contiguous(xh), !transposed);
    ct_tensor *x = ct_detach(xh), *xr = ct_detach(ct_clone(xh));
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(xr, true), CT_OK);
    ct_cross_entropy_opts o = {NULL, false, -100, red, 0.0};
    ct_profiler_opts po = {0};
    assert_int_equal(ct_profiler_start(&po), CT_OK);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    ct_tensor *l = ct_cross_entropy(x, t, &o);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_int_equal(ct_profiler_stop(), CT_OK);
    char *tab = ct_profiler_table("self_cpu_time_total", 40);
    assert_non_null(tab);
    assert_non_null(strstr(tab, "softmax_float")); /* the fused route ran */
    free(tab);
    ct_tensor *lr = ct_cross_entropy(ct_to_dtype(xr, CT_F32), t, &o);
    assert_non_null(l);
    assert_int_equal(ct_get_dtype(l), CT_F32);
    bit_equal(l, lr, "loss");
    ct_tensor *g = ct_randn(ct_sizes(l), ct_ndim(l), CT_F32), *d = NULL, *dr = NULL;
    assert_int_equal(ct_autograd_grad(&l, 1, &x, 1, &g, false, create_graph, false, &d), CT_OK);
    assert_int_equal(ct_autograd_grad(&lr, 1, &xr, 1, &g, false, create_graph, false, &dr), CT_OK);
    assert_int_equal(ct_get_dtype(d), dt);
    bit_equal(d, dr, "dlogits");
    printf("  cross entropy %s %s%s%s: loss %g\n", ct_dtype_name(dt), ct_reduction_name(red),
           transposed ? " transposed" : "", create_graph ? " create_graph" : "",
           red == CT_REDUCTION_NONE ? ct_item(ct_sum(l, NULL, 0, false)) : ct_item(l));
    SCOPE_END;
}

static void test_ce_half(void **state) {
    (void)state;
    const ct_reduction reds[3] = {CT_REDUCTION_MEAN, CT_REDUCTION_SUM, CT_REDUCTION_NONE};
    for (int r = 0; r < 3; r++) ce_half_case(CT_BF16, reds[r], false, false);
    ce_half_case(CT_F16, CT_REDUCTION_MEAN, false, false);
    ce_half_case(CT_BF16, CT_REDUCTION_MEAN, true, false);
    ce_half_case(CT_BF16, CT_REDUCTION_MEAN, false, true);
}

/* The op under it, gemm_lp, on both of its routes (the vdpbf16ps GEMM where
 * the CPU has it; the portable one -- operands rounded into f32 copies --
 * forced with ct__gemm_lp_portable) against the formula in double: A, B
 * and the bias rounded to bf16, the exact sum rounded once (one bf16 ulp
 * for the f32 summation order); a float32 result holds bf16 values. */
extern int ct__gemm_lp_portable;
ct_tensor *ct__gemm_lp(ct_tensor *A, ct_tensor *B, ct_tensor *bias, ct_dtype odt);

static ct_tensor *bf16_f64(ct_tensor *t) { return ct_to_dtype(ct_to_dtype(t, CT_BF16), CT_F64); }

static void test_gemm_lp(void **state) {
    (void)state;
    /* (M, K, N); 300 x 300 x 200: K past one block, the f32 sums rounded on the team */
    static const int64_t cases[][3] = {{7, 33, 20}, {25, 64, 40}, {3, 4100, 5}, {1, 1, 1}, {300, 300, 200}};
    for (int portable = 0; portable < 2; portable++) {
        ct__gemm_lp_portable = portable;
        for (int c = 0; c < 5; c++)
            for (int v = 0; v < 4; v++) {
                SCOPE_BEGIN;
                int64_t M = cases[c][0], K = cases[c][1], N = cases[c][2];
                /* v: A bf16 or f32, B stored transposed or not, bias or not, result dtype */
                ct_tensor *A = ct_randn(CT_SHAPE(M, K), CT_F32);
                if (v & 1) A = ct_to_dtype(A, CT_BF16);
                ct_tensor *B = v & 2 ? ct_t(ct_randn(CT_SHAPE(N, K), CT_F32)) : ct_randn(CT_SHAPE(K, N), CT_F32);
                ct_tensor *bias = v != 1 ? ct_randn(CT_SHAPE(N), CT_F32) : NULL;
                ct_dtype odt = v >= 2 ? CT_F32 : CT_BF16;
                ct_tensor *got = ct__gemm_lp(A, B, bias, odt);
                assert_non_null(got);
                assert_int_equal(ct_get_dtype(got), odt);
                ct_tensor *ref = ct_matmul(bf16_f64(A), bf16_f64(B));
                if (bias) ref = ct_add(ref, bf16_f64(bias));
                ct_tensor *g64 = ct_to_dtype(got, CT_F64);
                if (ct_allclose(g64, ref, 0x1p-7, 1e-6, false) != 1) {
                    print_error("gemm_lp %s %lldx%lldx%lld v=%d: max abs diff %g\n", portable ? "portable" : "native",
                                (long long)M, (long long)K, (long long)N, v,
                                ct_item(ct_amax(ct_abs(ct_sub(g64, ref)), NULL, 0, false)));
                    fail();
                }
                if (odt == CT_F32) /* bf16 values */
                    assert_int_equal(ct_equal(got, ct_to_dtype(ct_to_dtype(got, CT_BF16), CT_F32)), 1);
                SCOPE_END;
            }
    }
    ct__gemm_lp_portable = 0;
    /* bad calls get errors, not crashes */
    SCOPE_BEGIN;
    ct_tensor *A = ct_randn(CT_SHAPE(3, 4), CT_F32), *B = ct_randn(CT_SHAPE(5, 6), CT_F32);
    assert_null(ct__gemm_lp(A, B, NULL, CT_BF16));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    ct_clear_error();
    assert_null(ct__gemm_lp(A, ct_randn(CT_SHAPE(4, 6), CT_F64), NULL, CT_BF16));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    ct_clear_error();
    assert_null(ct__gemm_lp(A, ct_randn(CT_SHAPE(4, 6), CT_F32), NULL, CT_F16));
    ct_clear_error();
    assert_null(ct__gemm_lp(A, ct_randn(CT_SHAPE(4, 6), CT_F32), ct_randn(CT_SHAPE(5), CT_F32), CT_BF16));
    ct_clear_error();
    SCOPE_END;
}

static void test_fused_linear(void **state) {
    (void)state;
    fused_case(false, 10, 40, 24, true, false, false);   /* x [2, 5, 40] */
    fused_case(false, 7, 33, 20, false, false, false);   /* odd K, no bias */
    fused_case(false, 12, 64, 48, true, true, false);    /* a bf16 x */
    fused_case(true, 7, 33, 20, true, false, false);     /* Conv1D's addmm */
    fused_case(true, 30, 96, 64, true, false, true);     /* a graph-building backward */
    fused_case(false, 3, 16, 4100, true, false, false);  /* dx sums K = 4100: past one block */
    fused_case(true, 4100, 8, 6, true, false, false);    /* dW sums K = 4100 tokens */
}

static void test_weight_cache(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(3);
    /* matmul with [in, out] weights: linear and addmm fold their casts into
     * the product where the CPU has bf16 dot products (test_fused_linear) */
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3), CT_F32), *w = ct_randn(CT_SHAPE(3, 5), CT_F32);
    ct_tensor *w2 = ct_randn(CT_SHAPE(3, 5), CT_F32);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w2, true), CT_OK);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    ct_tensor *y1 = ct_matmul(x, w);
    assert_int_equal(ct_autocast_cache_size(), 1);
    int64_t live = ct_live_tensors();
    /* reuses the cast of w: new are y2 and x's cast (saved by y2's node for w's gradient) */
    ct_tensor *y2 = ct_matmul(x, w);
    assert_int_equal(ct_live_tensors() - live, 2);
    assert_int_equal(ct_autocast_cache_size(), 1);
    assert_int_equal(ct_get_dtype(y2), CT_BF16);
    /* not cached: x (no grad), a non-leaf, another dtype region's cast */
    ct_tensor *nl = ct_mul_scalar(w2, 1.0);
    assert_non_null(ct_matmul(x, nl));
    assert_int_equal(ct_autocast_cache_size(), 1);
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK); /* nested: the same cache */
    assert_non_null(ct_matmul(x, w2));
    assert_int_equal(ct_autocast_cache_size(), 2);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_int_equal(ct_autocast_cache_size(), 2);               /* only the outermost exit clears */
    assert_int_equal(ct_autocast_enter_ex(CT_CPU, CT_BF16, true, false), CT_OK);
    assert_non_null(ct_mm(ct_transpose(w2, 0, 1), ct_transpose(x, 0, 1))); /* a view: never cached */
    ct_tensor *w3 = ct_randn(CT_SHAPE(3, 5), CT_F32);
    assert_int_equal(ct_set_requires_grad(w3, true), CT_OK);
    assert_non_null(ct_matmul(x, w3));                         /* cache_enabled false */
    assert_int_equal(ct_autocast_cache_size(), 2);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    ct_tensor *loss = ct_add(ct_sum(ct_to_dtype(y1, CT_F32), NULL, 0, false),
                             ct_sum(ct_to_dtype(y2, CT_F32), NULL, 0, false));
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_int_equal(ct_autocast_cache_size(), 0);
    /* the gradient flows through the one cached cast twice: 2 * colsum(x) per row, float32 */
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *g = ct_grad(w);
    assert_int_equal(ct_get_dtype(g), CT_F32);
    ct_tensor *want = ct_expand(ct_transpose(ct_mul_scalar(ct_sum(ct_to_dtype(ct_to_dtype(x, CT_BF16), CT_F32),
                                                                  (int64_t[]){0}, 1, true), 2.0), 0, 1),
                                CT_SHAPE(3, 5));
    assert_true(ct_allclose(g, want, 1e-2, 1e-2, false));
    SCOPE_END;
}

/* bf16 shadows of float32 weights (src/backend/cpu/wshadow.c): under
 * autocast on an AVX512_BF16 CPU, a weight's products read a bf16 copy of
 * it that the fused AdamW writes as it updates the weight.  Training with
 * them must be bit for bit training without them (ct__wshadow_off): a
 * linear (B = W^T) and Conv1D's addmm (B = W), five AdamW steps; and a
 * weight changed behind the optimizer's back -- in place (its version) or
 * through ct_data_ptr (its exposed count) -- must not be read from a stale
 * shadow. */
extern int ct__wshadow_off;
long long ct__wshadow_hits(void);
size_t ct__wshadow_bytes(void);
int ct__gemm_bf16dot_ok(void);

static void shadow_run(bool off, bool poke, double *losses, ct_tensor **final) {
    ct__wshadow_off = off;
    ct_manual_seed(41);
    ct_tensor *p[4] = {ct_mul_scalar(ct_randn(CT_SHAPE(160, 128), CT_F32), 0.05), ct_randn(CT_SHAPE(160), CT_F32),
                       ct_mul_scalar(ct_randn(CT_SHAPE(160, 128), CT_F32), 0.05), ct_randn(CT_SHAPE(128), CT_F32)};
    for (int i = 0; i < 4; i++) {
        p[i] = ct_detach(p[i]);
        assert_int_equal(ct_set_requires_grad(p[i], true), CT_OK);
    }
    ct_tensor *x = ct_randn(CT_SHAPE(32, 128), CT_F32);
    ct_optimizer *opt = ct_adamw_new(p, 4, 1e-2, 0.9, 0.999, 1e-8, 0.01, false, false);
    assert_non_null(opt);
    assert_int_equal(ct_optim_set_all(opt, "fused", 1), CT_OK);
    for (int s = 0; s < 5; s++) {
        ct_scope sc = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
        ct_tensor *h = ct_gelu(ct_linear(x, p[0], p[1]), false);
        ct_tensor *y = ct_addmm(p[3], h, p[2], 1.0, 1.0); /* Conv1D: W2 [160, 128] is [K, N] */
        assert_int_equal(ct_autocast_exit(), CT_OK);
        ct_tensor *loss = ct_mean(ct_square(ct_to_dtype(y, CT_F32)), NULL, 0, false);
        assert_non_null(loss);
        losses[s] = ct_item(loss);
        assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        assert_int_equal(ct_optim_step(opt), CT_OK);
        ct_scope_end(sc);
        if (poke && s == 1) { /* in place: the version moves */
            bool prev = ct_set_grad_enabled(false);
            assert_non_null(ct_mul_scalar_(p[2], 0.5));
            ct_set_grad_enabled(prev);
        }
        if (poke && s == 2) ((float *)ct_data_ptr(p[0]))[7] += 1.0f; /* through a pointer: exposed */
    }
    for (int i = 0; i < 4; i++) final[i] = ct_clone(p[i]);
    ct_optim_free(opt);
    ct__wshadow_off = 0;
}

static void test_weight_shadow(void **state) {
    (void)state;
    size_t held = ct__wshadow_bytes();
    SCOPE_BEGIN;
    for (int poke = 0; poke < 2; poke++) {
        double l0[5], l1[5];
        ct_tensor *f0[4], *f1[4];
        long long hits = ct__wshadow_hits();
        shadow_run(false, poke, l0, f0);
        long long used = ct__wshadow_hits() - hits;
        shadow_run(true, poke, l1, f1);
        assert_int_equal(ct__wshadow_hits() - hits, used); /* none while off */
        for (int s = 0; s < 5; s++)
            if (memcmp(&l0[s], &l1[s], sizeof(double)))
                fail_msg("%s step %d: loss %.9g with shadows, %.9g without", poke ? "poked" : "plain", s, l0[s],
                         l1[s]);
        for (int i = 0; i < 4; i++) bit_equal(f0[i], f1[i], "parameter after 5 steps");
        printf("  weight shadows (%s): %lld products read one, loss %.6g -> %.6g\n", poke ? "weights poked" : "plain",
               used, l0[0], l0[4]);
        /* where the CPU computes bf16 products itself they are read: from the
         * backward of the first step on, by both weights' products (a poked
         * weight's next two products round it again) */
        if (ct__gemm_bf16dot_ok()) assert_true(used >= 8);
    }
    SCOPE_END;
    /* the weights are freed: so are their shadows */
    assert_int_equal(ct__wshadow_bytes(), held);
}

/* backward inside the region gives what it gives outside (autocast is off in the
 * backward pass), and the gradients of float32 leaves are float32 */
static void test_backward_inside(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(5);
    ct_tensor *x = ct_randn(CT_SHAPE(6, 4), CT_F32), *w = ct_randn(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *g[2];
    for (int inside = 0; inside < 2; inside++) {
        ct_tensor *wl = ct_detach(w);
        assert_int_equal(ct_set_requires_grad(wl, true), CT_OK);
        assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
        ct_tensor *loss = ct_sum(ct_square(ct_matmul(x, ct_transpose(wl, 0, 1))), NULL, 0, false);
        assert_int_equal(ct_get_dtype(loss), CT_BF16);
        if (inside) assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        assert_int_equal(ct_autocast_exit(), CT_OK);
        if (!inside) assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
        g[inside] = ct_grad(wl);
        assert_int_equal(ct_get_dtype(g[inside]), CT_F32);
    }
    assert_true(ct_equal(g[0], g[1]));
    SCOPE_END;
}

/* the state is per thread */
static void *other_thread(void *arg) {
    int *r = arg;
    ct_scope s = ct_scope_begin();
    r[0] = ct_autocast_is_enabled(CT_CPU);
    ct_tensor *a = ct_ones(CT_SHAPE(2, 2), CT_F32);
    r[1] = (int)ct_get_dtype(ct_mm(a, a));
    ct_scope_end(s);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    SCOPE_BEGIN;
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    int r[2] = {-1, -1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, r), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(r[0], 0);
    assert_int_equal(r[1], (int)CT_F32);
    assert_int_equal(mm_dtype(), CT_BF16);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    SCOPE_END;
}

/* ---- ct_compile: the trace records the casts; the autocast state is a guard ---- */
static ct_status mlp_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_relu(ct_linear(in[0], in[1], in[2]));
    return out[0] ? CT_OK : ct_last_error_code();
}

static void test_compile(void **state) {
    (void)state;
    char dir[] = "/tmp/ct_test_amp_XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("CT_CACHE_DIR", dir, 1);
    SCOPE_BEGIN;
    ct_manual_seed(7);
    ct_tensor *in[3] = {ct_randn(CT_SHAPE(4, 3), CT_F32), ct_randn(CT_SHAPE(5, 3), CT_F32),
                        ct_randn(CT_SHAPE(5), CT_F32)};
    ct_tensor *eager;
    assert_int_equal(ct_autocast_enter(CT_CPU, CT_BF16), CT_OK);
    assert_int_equal(mlp_fn(in, 3, &eager, 1, NULL), CT_OK);
    ct_compiled *f = ct_compile(mlp_fn, NULL, NULL);
    assert_non_null(f);
    ct_tensor *o1, *o2, *o3;
    assert_int_equal(ct_compiled_call(f, in, 3, &o1, 1), CT_OK);
    assert_int_equal(ct_compiled_call(f, in, 3, &o2, 1), CT_OK);
    assert_int_equal(ct_autocast_exit(), CT_OK);
    assert_int_equal(ct_get_dtype(o1), CT_BF16);
    assert_int_equal(ct_get_dtype(o2), CT_BF16);
    assert_true(ct_equal(o2, eager));
    ct_compile_stats st = ct_compiled_stats(f);
    assert_int_equal(st.traces, 1);
    assert_int_equal(st.eager_calls, 0);
    char *ex = ct_compile_explain(f);
    assert_non_null(ex);
    if (!strstr(ex, "copy") || !strstr(ex, "autocast=bfloat16")) fail_msg("explain lacks the casts:\n%s", ex);
    free(ex);
    /* autocast off: a new variant in float32 */
    assert_int_equal(ct_compiled_call(f, in, 3, &o3, 1), CT_OK);
    assert_int_equal(ct_get_dtype(o3), CT_F32);
    assert_int_equal(ct_compiled_stats(f).traces, 2);
    ct_compiled_free(f);
    SCOPE_END;
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}


/* ---- GradScaler ------------------------------------------------------------------ */
/* the run of tools/fixtures/gen_autocast.py's grad_scaler(): the scale and tracker
 * after each update (exactly torch's), the weights after each step, the last grad */
static ct_status r_grad_scaler(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t steps = ct_size(in[1], 0);
    ct_tensor *p = ct_detach(ct_clone(in[0]));
    if (!p || ct_set_requires_grad(p, true)) return ct_last_error_code();
    ct_optimizer *opt = ct_sgd_new(&p, 1, 0.1, 0, 0, 0, false, false);
    ct_grad_scaler *gs = ct_grad_scaler_new(fx_f(c, "init_scale", 0), fx_f(c, "growth_factor", 0),
                                            fx_f(c, "backoff_factor", 0), fx_i(c, "growth_interval", 0), true);
    if (!opt || !gs) return ct_last_error_code();
    ct_tensor *scales = ct_zeros(CT_SHAPE(steps), CT_F32), *trackers = ct_zeros(CT_SHAPE(steps), CT_I64);
    ct_tensor *ws = ct_zeros(CT_SHAPE(steps, 4), CT_F32);
    ct_status st = CT_OK;
    for (int64_t t = 0; t < steps && !st; t++) {
        ct_scope sc = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        ct_tensor *before = ct_clone(p);
        ct_tensor *loss = ct_sum(ct_mul(p, ct_select(in[1], 0, t)), NULL, 0, false);
        st = ct_backward(ct_grad_scaler_scale(gs, loss), NULL, false, false);
        int64_t inj = (int64_t)ct_item(ct_select(in[2], 0, t));
        if (!st && inj && !ct_fill_(ct_select(ct_grad(p), 0, t % 4), inj == 1 ? INFINITY : NAN))
            st = ct_last_error_code();
        bool stepped = true;
        if (!st) st = ct_grad_scaler_step(gs, opt, &stepped);
        if (!st) st = ct_grad_scaler_update(gs);
        if (!st && stepped == (inj != 0)) st = ct__test_fail("step %lld: stepped %d with inject %lld", (long long)t,
                                                            stepped, (long long)inj);
        /* a skipped step leaves the parameters bit for bit */
        if (!st && !stepped && !ct_equal(before, p)) st = ct__test_fail("step %lld: skipped but p changed", (long long)t);
        if (!st) {
            ct_fill_(ct_select(scales, 0, t), ct_grad_scaler_get_scale(gs));
            ct_fill_(ct_select(trackers, 0, t), (double)ct_grad_scaler_get_growth_tracker(gs));
            ct_copy_(ct_select(ws, 0, t), p);
        }
        ct_scope_end(sc);
    }
    if (!st) {
        out[0] = scales;
        out[1] = trackers;
        out[2] = ws;
        out[3] = ct_clone(ct_grad(p));
        /* exact: the scale and the tracker are torch's bit for bit */
        if (!ct_equal(scales, c->out[0]) || !ct_equal(trackers, c->out[1]))
            st = ct__test_fail("scale trajectory differs from torch's");
    }
    ct_grad_scaler_free(gs);
    ct_optim_free(opt);
    return st;
}

static const fx_op k_scaler_ops[] = {{"grad_scaler", r_grad_scaler, 0, 0}};

static void test_grad_scaler_fixture(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/grad_scaler.txt", k_scaler_ops, 1);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* errors, disabled scalers, the fused unscale over several gradients and dtypes,
 * the state dict through a file */
static void test_grad_scaler_api(void **state) {
    (void)state;
    SCOPE_BEGIN;
    expect_err(ct_grad_scaler_new(0, 2, 0.5, 10, true), CT_ERR_ARG, "init_scale");
    expect_err(ct_grad_scaler_new(1, 1.0, 0.5, 10, true), CT_ERR_ARG, "growth factor must be > 1.0");
    expect_err(ct_grad_scaler_new(1, 2, 1.0, 10, true), CT_ERR_ARG, "backoff factor must be < 1.0");
    expect_err(ct_grad_scaler_new(1, 2, 0.5, 0, true), CT_ERR_ARG, "growth_interval");
    ct_manual_seed(11);
    /* parameters: a big float32 one (several chunks, several threads), a float64
     * one, a strided float32 one (its .grad set by hand: the ops path); a grad-less
     * one is skipped */
    ct_tensor *ps[4] = {ct_randn(CT_SHAPE(300, 400), CT_F32), ct_randn(CT_SHAPE(7), CT_F64),
                        ct_randn(CT_SHAPE(5, 3), CT_F32), ct_randn(CT_SHAPE(2), CT_F32)};
    for (int k = 0; k < 4; k++) assert_int_equal(ct_set_requires_grad(ps[k], true), CT_OK);
    ct_optimizer *opt = ct_sgd_new(ps, 4, 0.5, 0, 0, 0, false, false);
    if (!opt) fail_msg("%s", ct_last_error());
    ct_grad_scaler *gs = ct_grad_scaler_new(CT_GRAD_SCALER_DEFAULTS);
    assert_non_null(gs);
    assert_true(ct_grad_scaler_is_enabled(gs));
    assert_true(ct_grad_scaler_get_scale(gs) == 65536.0);
    assert_int_equal(ct_grad_scaler_update(gs), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "No inf checks were recorded"));
    ct_clear_error();
    ct_tensor *loss = NULL;
    for (int k = 0; k < 2; k++) {
        ct_tensor *l = ct_sum(ct_to_dtype(ct_square(ps[k]), CT_F32), NULL, 0, false);
        loss = loss ? ct_add(loss, l) : l;
    }
    ct_tensor *scaled = ct_grad_scaler_scale(gs, loss);
    assert_int_equal(ct_get_dtype(scaled), CT_F32);
    assert_int_equal(ct_backward(scaled, NULL, false, false), CT_OK);
    ct_tensor *g2t = ct_transpose(ct_mul_scalar(ct_contiguous(ct_transpose(ps[2], 0, 1)), 2.0 * 65536.0), 0, 1);
    assert_int_equal(ct_set_grad(ps[2], ct_detach(g2t)), CT_OK);
    assert_int_equal(ct_grad_scaler_unscale_(gs, opt), CT_OK);
    for (int k = 0; k < 3; k++) /* 2 p exactly: 2 p 65536 / 65536 */
        assert_true(ct_equal(ct_grad(ps[k]), ct_mul_scalar(ps[k], 2.0)));
    assert_null(ct_grad(ps[3]));
    assert_int_equal(ct_grad_scaler_unscale_(gs, opt), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "already been called on this optimizer"));
    ct_clear_error();
    ct_tensor *p0 = ct_clone(ps[0]);
    bool stepped = false;
    assert_int_equal(ct_grad_scaler_step(gs, opt, &stepped), CT_OK);
    assert_true(stepped);
    assert_false(ct_equal(p0, ps[0]));
    assert_int_equal(ct_grad_scaler_step(gs, opt, NULL), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "step() has already been called"));
    ct_clear_error();
    assert_int_equal(ct_grad_scaler_unscale_(gs, opt), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "after step()"));
    ct_clear_error();
    assert_int_equal(ct_grad_scaler_update(gs), CT_OK);
    assert_int_equal(ct_grad_scaler_get_growth_tracker(gs), 1);
    /* a NaN deep in the big gradient (another chunk than the first): skipped, backed off */
    ct_optim_zero_grad(opt, true);
    assert_int_equal(ct_backward(ct_grad_scaler_scale(gs, ct_sum(ps[0], NULL, 0, false)), NULL, false, false), CT_OK);
    assert_non_null(ct_fill_(ct_select(ct_select(ct_grad(ps[0]), 0, 299), 0, 399), NAN));
    p0 = ct_clone(ps[0]);
    assert_int_equal(ct_grad_scaler_step(gs, opt, &stepped), CT_OK);
    assert_false(stepped);
    assert_true(ct_equal(p0, ps[0]));
    assert_int_equal(ct_grad_scaler_update(gs), CT_OK);
    assert_true(ct_grad_scaler_get_scale(gs) == 32768.0);
    assert_int_equal(ct_grad_scaler_get_growth_tracker(gs), 0);
    /* an inf in a gradient set by hand (transposed) is found too */
    ct_optim_zero_grad(opt, true);
    assert_int_equal(ct_set_grad(ps[2], ct_detach(ct_transpose(ct_full(CT_SHAPE(3, 5), INFINITY, CT_F32), 0, 1))),
                     CT_OK);
    assert_int_equal(ct_grad_scaler_step(gs, opt, &stepped), CT_OK);
    assert_false(stepped);
    assert_int_equal(ct_grad_scaler_update(gs), CT_OK);
    assert_true(ct_grad_scaler_get_scale(gs) == 16384.0);
    /* state dict through a file */
    assert_int_equal(ct_grad_scaler_update_to(gs, 1234.5), CT_OK);
    ct_sample *sd = ct_grad_scaler_state_dict(gs);
    assert_int_equal(ct_sample_count(sd), 5);
    char path[] = "/tmp/ct_test_amp_sdXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ct_save_state(path, sd), CT_OK);
    ct_sample *back = ct_load_state(path);
    assert_non_null(back);
    remove(path);
    ct_grad_scaler *g2 = ct_grad_scaler_new(8.0, 3.0, 0.25, 7, true);
    assert_int_equal(ct_grad_scaler_load_state_dict(g2, back), CT_OK);
    assert_true(ct_grad_scaler_get_scale(g2) == 1234.5);
    ct_sample *sd2 = ct_grad_scaler_state_dict(g2);
    for (int k = 0; k < 5; k++) {
        assert_string_equal(ct_sample_name(sd, k), ct_sample_name(sd2, k));
        assert_true(ct_equal(ct_sample_at(sd, k), ct_sample_at(sd2, k)));
    }
    /* bad state dicts */
    ct_sample *empty = ct_sample_new();
    assert_int_equal(ct_grad_scaler_load_state_dict(g2, empty), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "saved from a disabled instance"));
    ct_clear_error();
    assert_int_equal(ct_sample_set(back, "_growth_tracker", ct_scalar(2000, CT_I64)), CT_OK);
    assert_int_equal(ct_grad_scaler_load_state_dict(g2, back), CT_ERR_ARG);
    ct_clear_error();
    /* disabled: pass-through */
    ct_grad_scaler *off = ct_grad_scaler_new(65536.0, 2.0, 0.5, 2000, false);
    assert_non_null(off);
    assert_true(ct_grad_scaler_get_scale(off) == 1.0);
    assert_true(ct_grad_scaler_scale(off, loss) != NULL);
    assert_true(ct_equal(ct_grad_scaler_scale(off, loss), loss));
    ct_sample *sdo = ct_grad_scaler_state_dict(off);
    assert_int_equal(ct_sample_count(sdo), 0);
    ct_sample_free(sdo);
    ct_sample_free(empty);
    ct_sample_free(sd);
    ct_sample_free(sd2);
    ct_sample_free(back);
    ct_grad_scaler_free(off);
    ct_grad_scaler_free(g2);
    ct_grad_scaler_free(gs);
    ct_optim_free(opt);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),   cmocka_unit_test(test_fixtures_meta),
        cmocka_unit_test(test_nesting),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_weight_cache), cmocka_unit_test(test_fused_linear), cmocka_unit_test(test_gemm_lp),
        cmocka_unit_test(test_weight_shadow),
        cmocka_unit_test(test_backward_inside), cmocka_unit_test(test_ce_half),
        cmocka_unit_test(test_threads),    cmocka_unit_test(test_compile),
        cmocka_unit_test(test_grad_scaler_fixture), cmocka_unit_test(test_grad_scaler_api),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    fx_print_summary();
    return r;
}
