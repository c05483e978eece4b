/* test_loss_init.c -- losses and functional helpers against PyTorch
 * (forward and gradients: tests/fixtures/losses.txt from
 * tools/fixtures/gen_losses.py), their error paths, and torch.nn.init
 * (shapes, statistics, exact eye/dirac, orthogonality, calculate_gain). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/nn.h>

#include "fixture.h"

/* ---- fixture runners ------------------------------------------------------------ */
static ct_reduction red_of(const fx_case *c) {
    const char *r = fx_s(c, "reduction", "mean");
    if (strcmp(r, "sum") == 0) return CT_REDUCTION_SUM;
    if (strcmp(r, "none") == 0) return CT_REDUCTION_NONE;
    if (strcmp(r, "batchmean") == 0) return CT_REDUCTION_BATCHMEAN;
    return CT_REDUCTION_MEAN;
}

/* The loss from in[0..nin-1) (the last input is grad_output). */
typedef ct_tensor *(*loss_fn)(const fx_case *c, ct_tensor *const *in, int n);

/* loss, then d sum(loss * go) / d in[grad[i]] */
static ct_status run_loss(const fx_case *c, ct_tensor *const *in, ct_tensor **out, loss_fn fn) {
    int64_t gi[8];
    int ng = fx_ints(c, "grad", gi, 8);
    if (ng < 0) ng = 0;
    ct_tensor *xs[8];
    for (int i = 0; i < ng; i++) {
        xs[i] = in[gi[i]];
        if (ct_set_requires_grad(xs[i], true)) return ct_last_error_code();
    }
    ct_tensor *go = in[c->nin - 1];
    ct_tensor *loss = fn(c, in, c->nin - 1);
    if (!loss) return ct_last_error_code();
    out[0] = ct_detach(loss);
    if (ng == 0) return CT_OK;
    return ct_autograd_grad(&loss, 1, xs, ng, &go, false, false, false, out + 1);
}

static ct_tensor *opt_in(ct_tensor *const *in, int n, int k) { return k < n ? in[k] : NULL; }

static ct_tensor *f_mse(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_mse_loss(in[0], in[1], red_of(c));
}
static ct_tensor *f_l1(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_l1_loss(in[0], in[1], red_of(c));
}
static ct_tensor *f_smooth_l1(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_smooth_l1_loss(in[0], in[1], red_of(c), fx_f(c, "beta", 1.0));
}
static ct_tensor *f_huber(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_huber_loss(in[0], in[1], red_of(c), fx_f(c, "delta", 1.0));
}
static ct_cross_entropy_opts ce_opts(const fx_case *c, ct_tensor *const *in, int n) {
    ct_cross_entropy_opts o = {0};
    o.weight = opt_in(in, n, 2);
    o.reduction = red_of(c);
    o.label_smoothing = fx_f(c, "label_smoothing", 0.0);
    if (fx_has(c, "ignore_index")) {
        o.has_ignore_index = true;
        o.ignore_index = fx_i(c, "ignore_index", -100);
    }
    return o;
}
static ct_tensor *f_ce(const fx_case *c, ct_tensor *const *in, int n) {
    ct_cross_entropy_opts o = ce_opts(c, in, n);
    return ct_cross_entropy(in[0], in[1], &o);
}
static ct_tensor *f_nll(const fx_case *c, ct_tensor *const *in, int n) {
    ct_cross_entropy_opts o = ce_opts(c, in, n);
    return ct_nll_loss(in[0], in[1], &o);
}
static ct_tensor *f_bce(const fx_case *c, ct_tensor *const *in, int n) {
    return ct_binary_cross_entropy(in[0], in[1], opt_in(in, n, 2), red_of(c));
}
static ct_tensor *f_bce_logits(const fx_case *c, ct_tensor *const *in, int n) {
    return ct_binary_cross_entropy_with_logits(in[0], in[1], opt_in(in, n, 2), red_of(c), opt_in(in, n, 3));
}
static ct_tensor *f_kl(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_kl_div(in[0], in[1], red_of(c), fx_i(c, "log_target", 0) != 0);
}
static ct_tensor *f_poisson(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_poisson_nll_loss(in[0], in[1], fx_i(c, "log_input", 1) != 0, fx_i(c, "full", 0) != 0,
                               fx_f(c, "eps", 1e-8), red_of(c));
}
static ct_tensor *f_gaussian(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_gaussian_nll_loss(in[0], in[1], in[2], fx_i(c, "full", 0) != 0, fx_f(c, "eps", 1e-6), red_of(c));
}
static ct_tensor *f_cosemb(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_cosine_embedding_loss(in[0], in[1], in[2], fx_f(c, "margin", 0.0), red_of(c));
}
static ct_tensor *f_ranking(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_margin_ranking_loss(in[0], in[1], in[2], fx_f(c, "margin", 0.0), red_of(c));
}
static ct_tensor *f_hinge(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_hinge_embedding_loss(in[0], in[1], fx_f(c, "margin", 1.0), red_of(c));
}
static ct_tensor *f_triplet(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_triplet_margin_loss(in[0], in[1], in[2], fx_f(c, "margin", 1.0), fx_f(c, "p", 2.0),
                                  fx_f(c, "eps", 1e-6), fx_i(c, "swap", 0) != 0, red_of(c));
}
static ct_tensor *f_multi_margin(const fx_case *c, ct_tensor *const *in, int n) {
    return ct_multi_margin_loss(in[0], in[1], fx_i(c, "p", 1), fx_f(c, "margin", 1.0), opt_in(in, n, 2),
                                red_of(c));
}
static ct_tensor *f_ctc(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    ct_tensor *lp = ct_log_softmax(in[0], -1);
    return ct_ctc_loss(lp, in[1], in[2], in[3], fx_i(c, "blank", 0), red_of(c), fx_i(c, "zero_infinity", 0) != 0);
}
static ct_tensor *f_logsigmoid(const fx_case *c, ct_tensor *const *in, int n) {
    (void)c, (void)n;
    return ct_logsigmoid(in[0]);
}
static ct_tensor *f_prelu(const fx_case *c, ct_tensor *const *in, int n) {
    (void)c, (void)n;
    return ct_prelu(in[0], in[1]);
}
static ct_tensor *f_glu(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_glu(in[0], fx_i(c, "dim", -1));
}
static ct_tensor *f_normalize(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_normalize(in[0], fx_f(c, "p", 2), fx_i(c, "dim", 1), fx_f(c, "eps", 1e-12));
}
static ct_tensor *f_cossim(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_cosine_similarity(in[0], in[1], fx_i(c, "dim", 1), fx_f(c, "eps", 1e-8));
}
static ct_tensor *f_pdist(const fx_case *c, ct_tensor *const *in, int n) {
    (void)n;
    return ct_pairwise_distance(in[0], in[1], fx_f(c, "p", 2), fx_f(c, "eps", 1e-6), fx_i(c, "keepdim", 0) != 0);
}

#define RUNNER(name, fn) \
    static ct_status name(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { return run_loss(c, in, out, fn); }
RUNNER(r_mse, f_mse)
RUNNER(r_l1, f_l1)
RUNNER(r_smooth_l1, f_smooth_l1)
RUNNER(r_huber, f_huber)
RUNNER(r_ce, f_ce)
RUNNER(r_nll, f_nll)
RUNNER(r_bce, f_bce)
RUNNER(r_bce_logits, f_bce_logits)
RUNNER(r_kl, f_kl)
RUNNER(r_poisson, f_poisson)
RUNNER(r_gaussian, f_gaussian)
RUNNER(r_cosemb, f_cosemb)
RUNNER(r_ranking, f_ranking)
RUNNER(r_hinge, f_hinge)
RUNNER(r_triplet, f_triplet)
RUNNER(r_multi_margin, f_multi_margin)
RUNNER(r_ctc, f_ctc)
RUNNER(r_logsigmoid, f_logsigmoid)
RUNNER(r_prelu, f_prelu)
RUNNER(r_glu, f_glu)
RUNNER(r_normalize, f_normalize)
RUNNER(r_cossim, f_cossim)
RUNNER(r_pdist, f_pdist)

static ct_status r_gain(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)in;
    double g = ct_init_calculate_gain(fx_s(c, "nl", "?"), fx_f(c, "param", NAN));
    if (isnan(g)) return ct_last_error_code();
    out[0] = ct_scalar(g, CT_F64);
    return CT_OK;
}

static const fx_op k_ops[] = {
    {"mse", r_mse, 0, 0},
    {"l1", r_l1, 0, 0},
    {"smooth_l1", r_smooth_l1, 0, 0},
    {"huber", r_huber, 0, 0},
    {"cross_entropy", r_ce, 0, 0},
    {"nll", r_nll, 0, 0},
    {"bce", r_bce, 0, 0},
    {"bce_logits", r_bce_logits, 0, 0},
    {"kl_div", r_kl, 0, 0},
    {"poisson_nll", r_poisson, 0, 0},
    {"gaussian_nll", r_gaussian, 0, 0},
    {"cosine_embedding", r_cosemb, 0, 0},
    {"margin_ranking", r_ranking, 0, 0},
    {"hinge_embedding", r_hinge, 0, 0},
    {"triplet_margin", r_triplet, 0, 0},
    {"multi_margin", r_multi_margin, 0, 0},
    {"ctc", r_ctc, 1e-8, 1e-10},
    {"ctc_f32", r_ctc, 1e-4, 1e-6},
    {"logsigmoid", r_logsigmoid, 0, 0},
    {"prelu", r_prelu, 0, 0},
    {"glu", r_glu, 0, 0},
    {"normalize", r_normalize, 0, 0},
    {"cosine_similarity", r_cossim, 0, 0},
    {"pairwise_distance", r_pdist, 0, 0},
    {"calculate_gain", r_gain, 0, 0},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/losses.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- error paths ---------------------------------------------------------------- */
#define EXPECT_ERR(expr, code, substr)                                                         \
    do {                                                                                       \
        ct_clear_error();                                                                      \
        ct_tensor *r__ = (expr);                                                               \
        if (r__ != NULL || ct_last_error_code() != (code) || !strstr(ct_last_error(), substr)) \
            fail_msg("%s: got %s \"%s\", expected %s containing \"%s\"", #expr,                \
                     r__ ? "a tensor" : ct_status_name(ct_last_error_code()), ct_last_error(), \
                     ct_status_name(code), substr);                                            \
    } while (0)

static void test_errors(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_randn(CT_SHAPE(4, 3), CT_F32);
    ct_tensor *t = ct_from_array((int64_t[]){0, 2, 1, 3}, CT_SHAPE(4), CT_I64);
    ct_tensor *tf = ct_zeros(CT_SHAPE(4), CT_F32);
    EXPECT_ERR(ct_cross_entropy(x, t, NULL), CT_ERR_INDEX, "cross_entropy: target 3 is out of bounds for 3 classes");
    EXPECT_ERR(ct_cross_entropy(x, ct_zeros(CT_SHAPE(5), CT_I64), NULL), CT_ERR_SHAPE, "expected target of shape [4]");
    EXPECT_ERR(ct_cross_entropy(x, tf, NULL), CT_ERR_SHAPE, "class probabilities must have the input's shape");
    EXPECT_ERR(ct_cross_entropy(x, ct_zeros(CT_SHAPE(4), CT_I64), &(ct_cross_entropy_opts){.label_smoothing = 1.5}),
               CT_ERR_ARG, "label_smoothing must be between 0.0 and 1.0");
    EXPECT_ERR(ct_cross_entropy(x, ct_zeros(CT_SHAPE(4), CT_I64),
                                &(ct_cross_entropy_opts){.weight = ct_ones(CT_SHAPE(2), CT_F32)}),
               CT_ERR_SHAPE, "weight tensor should be defined either for all 3 classes");
    EXPECT_ERR(ct_nll_loss(x, tf, NULL), CT_ERR_DTYPE, "nll_loss: expected target of an integer dtype");
    EXPECT_ERR(ct_nll_loss(x, ct_zeros(CT_SHAPE(4), CT_I64), &(ct_cross_entropy_opts){.reduction = CT_REDUCTION_BATCHMEAN}),
               CT_ERR_ARG, "nll_loss: batchmean is not a valid value for reduction");
    EXPECT_ERR(ct_mse_loss(x, ct_zeros(CT_SHAPE(5), CT_F32), CT_REDUCTION_MEAN), CT_ERR_SHAPE, "");
    EXPECT_ERR(ct_smooth_l1_loss(x, x, CT_REDUCTION_MEAN, -1), CT_ERR_ARG, "negative values for beta");
    EXPECT_ERR(ct_huber_loss(x, x, CT_REDUCTION_MEAN, 0), CT_ERR_ARG, "non-positive values for delta");
    EXPECT_ERR(ct_binary_cross_entropy(x, ct_zeros_like(x), NULL, CT_REDUCTION_MEAN), CT_ERR_ARG,
               "all elements of input should be between 0 and 1");
    EXPECT_ERR(ct_binary_cross_entropy(ct_sigmoid(x), tf, NULL, CT_REDUCTION_MEAN), CT_ERR_SHAPE,
               "different to the input size ([4, 3])");
    EXPECT_ERR(ct_binary_cross_entropy_with_logits(x, tf, NULL, CT_REDUCTION_MEAN, NULL), CT_ERR_SHAPE,
               "target size ([4]) must be the same as input size ([4, 3])");
    EXPECT_ERR(ct_gaussian_nll_loss(x, x, ct_ones(CT_SHAPE(3), CT_F32), false, 1e-6, CT_REDUCTION_MEAN),
               CT_ERR_SHAPE, "var is of incorrect size");
    EXPECT_ERR(ct_gaussian_nll_loss(x, x, ct_full(CT_SHAPE(4, 3), -1, CT_F32), false, 1e-6, CT_REDUCTION_MEAN),
               CT_ERR_ARG, "var has negative entry");
    EXPECT_ERR(ct_cosine_embedding_loss(x, x, ct_ones(CT_SHAPE(4, 1), CT_F32), 0, CT_REDUCTION_MEAN), CT_ERR_SHAPE,
               "multi-target not supported");
    EXPECT_ERR(ct_triplet_margin_loss(x, x, ct_ones(CT_SHAPE(3), CT_F32), 1, 2, 1e-6, false, CT_REDUCTION_MEAN),
               CT_ERR_SHAPE, "same number of dimensions");
    EXPECT_ERR(ct_multi_margin_loss(x, t, 3, 1, NULL, CT_REDUCTION_MEAN), CT_ERR_ARG, "only p == 1 and p == 2");
    EXPECT_ERR(ct_multi_margin_loss(x, t, 1, 1, NULL, CT_REDUCTION_MEAN), CT_ERR_INDEX, "target 3 is out of bounds");
    EXPECT_ERR(ct_mse_loss(x, x, (ct_reduction)42), CT_ERR_ARG, "not a valid value for reduction");
    EXPECT_ERR(ct_glu(x, 1), CT_ERR_SHAPE, "glu: Halving dimension must be even, but dimension 1 is size 3");
    EXPECT_ERR(ct_prelu(x, ct_ones(CT_SHAPE(2), CT_F32)), CT_ERR_SHAPE, "prelu: mismatch of parameter numbers");
    /* ctc */
    ct_tensor *lp = ct_log_softmax(ct_randn(CT_SHAPE(5, 2, 4), CT_F32), 2);
    ct_tensor *tg = ct_from_array((int64_t[]){1, 2, 3, 1}, CT_SHAPE(2, 2), CT_I64);
    ct_tensor *il = ct_from_array((int64_t[]){5, 6}, CT_SHAPE(2), CT_I64);
    ct_tensor *tl = ct_from_array((int64_t[]){2, 2}, CT_SHAPE(2), CT_I64);
    EXPECT_ERR(ct_ctc_loss(lp, tg, il, tl, 0, CT_REDUCTION_MEAN, false), CT_ERR_ARG,
               "expected input_lengths to have values in [1, 5], but got 6");
    EXPECT_ERR(ct_ctc_loss(lp, tg, tl, tl, 7, CT_REDUCTION_MEAN, false), CT_ERR_INDEX, "blank must be in label range");
    EXPECT_ERR(ct_ctc_loss(lp, ct_from_array((int64_t[]){1, 9, 3, 1}, CT_SHAPE(2, 2), CT_I64), tl, tl, 0,
                           CT_REDUCTION_MEAN, false), CT_ERR_INDEX, "target 9 is out of bounds for 4 classes");
    EXPECT_ERR(ct_ctc_loss(lp, tg, tl, ct_from_array((int64_t[]){2, 3}, CT_SHAPE(2), CT_I64), 0, CT_REDUCTION_MEAN,
                           false), CT_ERR_ARG, "target length 3 of batch element 1 is out of range");
    /* NULL propagates, keeping the first error */
    ct_clear_error();
    assert_null(ct_cross_entropy(NULL, t, NULL));
    assert_null(ct_mse_loss(x, NULL, CT_REDUCTION_SUM));
    /* the DESIGN.md idiom: defaults with NULL options */
    ct_tensor *ok = ct_cross_entropy(x, ct_zeros(CT_SHAPE(4), CT_I64), NULL);
    assert_non_null(ok);
    assert_int_equal(ct_ndim(ok), 0);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* gradcheck of a few losses in float64 (finite differences) */
static ct_tensor *gc_ce_ls(ct_tensor *const *in, int n, void *user) {
    (void)n;
    ct_cross_entropy_opts o = {.weight = in[1], .label_smoothing = 0.25, .has_ignore_index = true, .ignore_index = 1};
    return ct_cross_entropy(in[0], (ct_tensor *)user, &o);
}
static ct_tensor *gc_ctc(ct_tensor *const *in, int n, void *user) {
    (void)n;
    ct_tensor **a = user;
    return ct_ctc_loss(in[0], a[0], a[1], a[2], 0, CT_REDUCTION_MEAN, false);
}
static ct_tensor *gc_gauss(ct_tensor *const *in, int n, void *user) {
    (void)n, (void)user;
    return ct_gaussian_nll_loss(in[0], in[1], in[2], true, 1e-6, CT_REDUCTION_SUM);
}
static void test_gradcheck(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(3);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 4), CT_F64);
    ct_tensor *w = ct_add_scalar(ct_rand(CT_SHAPE(4), CT_F64), 0.5);
    ct_tensor *t = ct_from_array((int64_t[]){0, 1, 3, 2, 1}, CT_SHAPE(5), CT_I64);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    ct_status st = ct_gradcheck(gc_ce_ls, t, (ct_tensor *[]){x, w}, 2, 0, 0, 0);
    if (st) fail_msg("cross_entropy: %s", ct_last_error());

    ct_tensor *lp = ct_log_softmax(ct_randn(CT_SHAPE(6, 2, 4), CT_F64), 2);
    lp = ct_detach(lp);
    assert_int_equal(ct_set_requires_grad(lp, true), CT_OK);
    ct_tensor *args[3] = {ct_from_array((int64_t[]){1, 1, 2, 3}, CT_SHAPE(2, 2), CT_I64),
                          ct_from_array((int64_t[]){6, 5}, CT_SHAPE(2), CT_I64),
                          ct_from_array((int64_t[]){2, 1}, CT_SHAPE(2), CT_I64)};
    st = ct_gradcheck(gc_ctc, args, &lp, 1, 0, 0, 0);
    if (st) fail_msg("ctc_loss: %s", ct_last_error());

    ct_tensor *gi[3] = {ct_randn(CT_SHAPE(3, 2), CT_F64), ct_randn(CT_SHAPE(3, 2), CT_F64),
                        ct_add_scalar(ct_rand(CT_SHAPE(3, 2), CT_F64), 0.2)};
    for (int i = 0; i < 3; i++) assert_int_equal(ct_set_requires_grad(gi[i], true), CT_OK);
    st = ct_gradcheck(gc_gauss, NULL, gi, 3, 0, 0, 0);
    if (st) fail_msg("gaussian_nll_loss: %s", ct_last_error());
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* The fused cross entropy (float32 [N, C] over class indices, no weight, no
 * label smoothing) against the composite run in float64: loss, gradient and
 * (create_graph) a second derivative, with ignored targets, every reduction
 * and a non-contiguous input. */
static void ce_close(ct_tensor *a, ct_tensor *b64, const char *what) {
    ct_tensor *d = ct_amax(ct_abs(ct_sub(ct_to_dtype(a, CT_F64), b64)), NULL, 0, false);
    double m = ct_item(d), s = ct_item(ct_amax(ct_abs(b64), NULL, 0, false));
    if (!(m <= 1e-5 * (1 + s))) fail_msg("%s: max abs diff %g (scale %g)", what, m, s);
}

static void test_cross_entropy_fused(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(11);
    const int64_t N = 23, C = 517;
    ct_tensor *tt[2] = {ct_randint(0, C, CT_SHAPE(N), CT_I64), ct_randint(0, C, CT_SHAPE(N), CT_I64)};
    int64_t *tp = ct_data_ptr(tt[0]), *tq = ct_data_ptr(tt[1]);
    tp[2] = -100; tp[7] = -100; tp[11] = 3; /* ignored by default; 3 is a class */
    tq[2] = 3; tq[7] = 3;                   /* ignored by ignore_index 3 */
    const ct_reduction reds[3] = {CT_REDUCTION_MEAN, CT_REDUCTION_SUM, CT_REDUCTION_NONE};
    for (int layout = 0; layout < 2; layout++)
        for (int r = 0; r < 3; r++)
            for (int ig = 0; ig < 2; ig++) {
                int64_t shp[2] = {layout ? C : N, layout ? N : C};
                ct_tensor *base = ct_mul_scalar(ct_randn(shp, 2, CT_F32), 3.0);
                ct_tensor *x = layout ? ct_transpose(base, 0, 1) : base; /* non-contiguous */
                x = ct_detach(x);
                assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
                ct_tensor *x64 = ct_detach(ct_to_dtype(x, CT_F64));
                assert_int_equal(ct_set_requires_grad(x64, true), CT_OK);
                ct_tensor *t = tt[ig];
                ct_cross_entropy_opts o = {.reduction = reds[r], .has_ignore_index = ig == 1, .ignore_index = 3};
                ct_tensor *l = ct_cross_entropy(x, t, &o), *l64 = ct_cross_entropy(x64, t, &o);
                assert_non_null(l);
                assert_non_null(l64);
                assert_string_equal(ct_grad_fn_name(l), "CrossEntropyLossBackward"); /* the fused path ran */
                ce_close(l, l64, "cross_entropy fused: loss");
                ct_tensor *w = ct_randn(ct_sizes(l), ct_ndim(l), CT_F32);
                ct_tensor *lw = ct_sum(ct_mul(l, w), NULL, 0, false);
                ct_tensor *lw64 = ct_sum(ct_mul(l64, ct_to_dtype(w, CT_F64)), NULL, 0, false);
                ct_tensor *g, *g64;
                assert_int_equal(ct_autograd_grad(&lw, 1, &x, 1, NULL, true, true, false, &g), CT_OK);
                assert_int_equal(ct_autograd_grad(&lw64, 1, &x64, 1, NULL, true, true, false, &g64), CT_OK);
                ce_close(g, g64, "cross_entropy fused: grad");
                if (r != 1) continue;
                /* create_graph: d/dx sum(g * v) */
                ct_tensor *v = ct_randn(CT_SHAPE(N, C), CT_F32), *h, *h64;
                ct_tensor *gv = ct_sum(ct_mul(g, v), NULL, 0, false);
                ct_tensor *gv64 = ct_sum(ct_mul(g64, ct_to_dtype(v, CT_F64)), NULL, 0, false);
                ct_status hs = ct_autograd_grad(&gv, 1, &x, 1, NULL, false, false, false, &h);
                if (hs) fail_msg("second derivative: %s", ct_last_error());
                assert_int_equal(ct_autograd_grad(&gv64, 1, &x64, 1, NULL, false, false, false, &h64), CT_OK);
                ce_close(h, h64, "cross_entropy fused: second derivative");
            }
    /* a target whose softmax underflows in float32: the loss is still finite
     * and exact (the row's logsumexp is recomputed) */
    ct_tensor *xu = ct_randn(CT_SHAPE(3, 50), CT_F32);
    ct_tensor *tu = ct_from_array((int64_t[]){4, 9, 0}, CT_SHAPE(3), CT_I64);
    ((float *)ct_data_ptr(xu))[50 + 9] = -200.0f;
    ((float *)ct_data_ptr(xu))[0 + 4] = -120.0f;
    assert_int_equal(ct_set_requires_grad(xu, true), CT_OK);
    ct_tensor *lu = ct_cross_entropy(xu, tu, NULL);
    assert_string_equal(ct_grad_fn_name(lu), "CrossEntropyLossBackward");
    assert_true(isfinite(ct_item(lu)));
    ce_close(lu, ct_cross_entropy(ct_detach(ct_to_dtype(xu, CT_F64)), tu, NULL), "cross_entropy fused: underflow");
    /* every target ignored: the mean is NaN, as torch's */
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5), CT_F32);
    ct_tensor *ti = ct_full(CT_SHAPE(2), -100, CT_I64);
    assert_true(isnan(ct_item(ct_cross_entropy(x, ti, NULL))));
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- init ----------------------------------------------------------------------- */
static void stats(ct_tensor *t, double *mean, double *std, double *lo, double *hi) {
    ct_tensor *d = ct_to_dtype(t, CT_F64);
    *mean = ct_item(ct_mean(d, NULL, 0, false));
    *std = ct_item(ct_std(d, NULL, 0, 1, false));
    *lo = ct_item(ct_min(d));
    *hi = ct_item(ct_max(d));
}

static void test_init_stats(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_manual_seed(7);
    double m, sd, lo, hi;
    /* a parameter that requires grad is filled in place (no_grad inside) */
    ct_tensor *w = ct_empty(CT_SHAPE(256, 128, 3, 3), CT_F32); /* fan_in 1152, fan_out 2304 */
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    int64_t fi, fo;
    assert_int_equal(ct_init_calculate_fan_in_and_fan_out(w, &fi, &fo), CT_OK);
    assert_int_equal(fi, 1152);
    assert_int_equal(fo, 2304);

    assert_ptr_equal(ct_init_uniform_(w, -0.5, 2.0), w);
    stats(w, &m, &sd, &lo, &hi);
    assert_true(fabs(m - 0.75) < 0.01 && fabs(sd - 2.5 / sqrt(12)) < 0.01 && lo >= -0.5 && hi <= 2.0);
    assert_true(ct_is_leaf(w) && ct_requires_grad(w));

    assert_non_null(ct_init_normal_(w, 1.0, 3.0));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(fabs(m - 1.0) < 0.02 && fabs(sd - 3.0) < 0.02);

    assert_non_null(ct_init_kaiming_uniform_(w, sqrt(5.0), CT_FAN_IN, "leaky_relu"));
    double bound = 1.0 / sqrt(1152.0); /* PyTorch's Linear/Conv default */
    stats(w, &m, &sd, &lo, &hi);
    assert_true(lo >= -bound && hi <= bound && lo < -0.99 * bound && hi > 0.99 * bound);
    assert_true(fabs(sd - bound / sqrt(3.0)) < 0.01 * bound);

    assert_non_null(ct_init_kaiming_normal_(w, 0, CT_FAN_OUT, "relu"));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(fabs(sd - sqrt(2.0 / 2304)) < 0.01 * sqrt(2.0 / 2304) && fabs(m) < 1e-3);

    assert_non_null(ct_init_xavier_uniform_(w, 2.0));
    double xb = 2.0 * sqrt(6.0 / (1152 + 2304));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(lo >= -xb && hi <= xb && hi > 0.99 * xb);

    assert_non_null(ct_init_xavier_normal_(w, 1.0));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(fabs(sd - sqrt(2.0 / (1152 + 2304))) < 0.01 * sqrt(2.0 / (1152 + 2304)));

    assert_non_null(ct_init_trunc_normal_(w, 0.5, 1.0, -1.0, 1.5));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(lo >= -1.0 && hi <= 1.5 && lo < -0.99 && hi > 1.49);
    /* mean of N(0.5, 1) truncated to [-1.5, 1] (standardized), computed by scipy: 0.3595 */
    assert_true(fabs(m - (0.5 + (exp(-1.125) - exp(-0.5)) / sqrt(2 * M_PI) /
                                  (0.5 * (erf(1.0 / sqrt(2.0)) - erf(-1.5 / sqrt(2.0)))))) < 0.01);

    assert_non_null(ct_init_constant_(w, 0.25));
    stats(w, &m, &sd, &lo, &hi);
    assert_true(lo == 0.25 && hi == 0.25);
    assert_non_null(ct_init_zeros_(w));
    assert_true(ct_item(ct_max(ct_abs(w))) == 0);
    assert_non_null(ct_init_ones_(w));
    assert_true(ct_item(ct_min(w)) == 1 && ct_item(ct_max(w)) == 1);
    assert_null(ct_grad(w));

    /* non-contiguous target */
    ct_tensor *big = ct_zeros(CT_SHAPE(64, 200), CT_F64);
    ct_tensor *view = ct_t(ct_slice(big, 1, 0, 200, 2)); /* [100, 64] */
    assert_non_null(ct_init_kaiming_uniform_(view, 0, CT_FAN_IN, NULL));
    stats(ct_slice(big, 1, 1, 200, 2), &m, &sd, &lo, &hi);
    assert_true(lo == 0 && hi == 0); /* the other columns untouched */

    /* zero elements: no-op */
    assert_non_null(ct_init_kaiming_uniform_(ct_empty(CT_SHAPE(0, 3), CT_F32), 0, CT_FAN_IN, NULL));
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_init_exact(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *e = ct_init_eye_(ct_randn(CT_SHAPE(3, 5), CT_F32));
    assert_int_equal(ct_equal(e, ct_eye(3, 5, CT_F32)), 1);

    /* dirac_: [6, 2, 3, 3] in 2 groups: out channel g*3 + d takes input d at the centre */
    ct_tensor *d = ct_init_dirac_(ct_randn(CT_SHAPE(6, 2, 3, 3), CT_F64), 2);
    assert_non_null(d);
    assert_int_equal((int)ct_item(ct_sum(d, NULL, 0, false)), 4);
    const double *p = ct_data_ptr(d);
    int64_t ones[4][2] = {{0, 0}, {1, 1}, {3, 0}, {4, 1}};
    for (int k = 0; k < 4; k++) assert_true(p[ones[k][0] * 18 + ones[k][1] * 9 + 4] == 1.0);
    /* conv with a dirac kernel is the identity */
    ct_tensor *w1 = ct_init_dirac_(ct_empty(CT_SHAPE(3, 3, 5), CT_F64), 1);
    ct_tensor *xin = ct_randn(CT_SHAPE(2, 3, 7), CT_F64);
    assert_int_equal(ct_allclose(ct_conv1d(xin, w1, NULL, NULL, (int64_t[]){2}, NULL, 1), xin, 0, 0, false), 1);

    /* orthogonal_: tall, wide and 4-D */
    ct_manual_seed(11);
    int64_t shapes[3][4] = {{40, 12, 1, 1}, {12, 40, 1, 1}, {8, 3, 2, 2}};
    int nds[3] = {2, 2, 4};
    for (int k = 0; k < 3; k++) {
        ct_tensor *q = ct_init_orthogonal_(ct_empty(shapes[k], nds[k], CT_F64), 1.5);
        assert_non_null(q);
        ct_tensor *m = ct_reshape(q, (int64_t[]){shapes[k][0], -1}, 2);
        bool tall = ct_size(m, 0) >= ct_size(m, 1);
        ct_tensor *g = tall ? ct_matmul(ct_t(m), m) : ct_matmul(m, ct_t(m));
        int64_t n = ct_size(g, 0);
        ct_tensor *want = ct_mul_scalar(ct_eye(n, n, CT_F64), 2.25);
        if (ct_allclose(g, want, 1e-10, 1e-10, false) != 1) fail_msg("orthogonal_ %d: Q^T Q != gain^2 I", k);
    }
    ct_tensor *q32 = ct_init_orthogonal_(ct_empty(CT_SHAPE(16, 16), CT_F32), 1.0);
    assert_int_equal(ct_allclose(ct_matmul(ct_t(q32), q32), ct_eye(16, 16, CT_F32), 1e-5, 1e-5, false), 1);

    /* gains */
    assert_true(ct_init_calculate_gain("tanh", NAN) == 5.0 / 3);
    assert_true(ct_init_calculate_gain("relu", NAN) == sqrt(2.0));
    assert_true(ct_init_calculate_gain(NULL, 0.0) == sqrt(2.0));
    ct_clear_error();
    assert_true(isnan(ct_init_calculate_gain("swish", NAN)));
    assert_non_null(strstr(ct_last_error(), "unsupported nonlinearity swish"));

    /* errors */
    EXPECT_ERR(ct_init_eye_(ct_empty(CT_SHAPE(2, 2, 2), CT_F32)), CT_ERR_SHAPE, "only tensors with 2 dimensions");
    EXPECT_ERR(ct_init_dirac_(ct_empty(CT_SHAPE(3, 3), CT_F32), 1), CT_ERR_SHAPE, "3, 4, or 5 dimensions");
    EXPECT_ERR(ct_init_dirac_(ct_empty(CT_SHAPE(3, 3, 3), CT_F32), 2), CT_ERR_ARG, "must be divisible by groups");
    EXPECT_ERR(ct_init_xavier_uniform_(ct_empty(CT_SHAPE(3), CT_F32), 1), CT_ERR_SHAPE,
               "fewer than 2 dimensions");
    EXPECT_ERR(ct_init_orthogonal_(ct_empty(CT_SHAPE(3), CT_F32), 1), CT_ERR_SHAPE, "2 or more dimensions");
    EXPECT_ERR(ct_init_kaiming_normal_(ct_empty(CT_SHAPE(3, 3), CT_F32), 0, CT_FAN_IN, "bogus"), CT_ERR_ARG,
               "unsupported nonlinearity bogus");
    EXPECT_ERR(ct_init_normal_(ct_empty(CT_SHAPE(3, 3), CT_I64), 0, 1), CT_ERR_DTYPE, "floating point");
    EXPECT_ERR(ct_init_trunc_normal_(ct_empty(CT_SHAPE(3, 3), CT_F32), 0, 1, 2, -2), CT_ERR_ARG, "a < b");
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),  cmocka_unit_test(test_errors),     cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_cross_entropy_fused),
        cmocka_unit_test(test_init_stats), cmocka_unit_test(test_init_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
