/* test_autograd.c -- the reverse-mode engine: accumulation, broadcasting,
 * retain_graph, version counters, leaf rules, modes, hooks, retain_grad,
 * custom functions, double backward, in-place on views, anomaly mode,
 * gradcheck.  Expected values are closed forms checked by hand against
 * PyTorch's behavior; op-by-op gradients are in test_gradcheck.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

static ct_tensor *vec(const double *v, int64_t n) { return ct_from_doubles(v, CT_SHAPE(n), CT_F64); }
static double at(ct_tensor *t, int64_t i) { return ((double *)ct_data_ptr(ct_contiguous(ct_to_dtype(t, CT_F64))))[i]; }

static void dbg(void) { fprintf(stderr, "last error: %s\n", ct_last_error()); }
#define SCOPED(...)                                    \
    do {                                               \
        int64_t live__ = ct_live_tensors();            \
        ct_scope s__ = ct_scope_begin();               \
        __VA_ARGS__;                                   \
        ct_scope_end(s__);                             \
        if (ct_live_tensors() != live__) dbg();        \
        assert_int_equal(ct_live_tensors(), live__);   \
    } while (0)

static void test_basic_and_accumulate(void **state) {
    (void)state;
    SCOPED({
        double xv[3] = {0.5, -1.0, 2.0};
        ct_tensor *x = vec(xv, 3);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        assert_true(ct_is_leaf(x));
        ct_tensor *y = ct_add(ct_mul(x, x), ct_exp(x));
        assert_false(ct_is_leaf(y));
        assert_string_equal(ct_grad_fn_name(y), "AddBackward0");
        ct_tensor *ones = ct_ones(CT_SHAPE(3), CT_F64);
        assert_int_equal(ct_backward(y, ones, true, false), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(ct_grad(x), i) - (2 * xv[i] + exp(xv[i]))) < 1e-12);
        /* a second backward accumulates */
        assert_int_equal(ct_backward(y, ones, false, false), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(ct_grad(x), i) - 2 * (2 * xv[i] + exp(xv[i]))) < 1e-12);
        /* and a third, without retain_graph before, fails like PyTorch */
        assert_int_not_equal(ct_backward(y, ones, false, false), CT_OK);
        assert_int_equal(ct_last_error_code(), CT_ERR_AUTOGRAD);
        assert_non_null(strstr(ct_last_error(), "backward through the graph a second time"));
        ct_zero_grad(x);
        assert_null(ct_grad(x));
        /* non-scalar output without grad_output */
        ct_tensor *y2 = ct_mul(x, x);
        assert_int_not_equal(ct_backward(y2, NULL, false, false), CT_OK);
        assert_non_null(strstr(ct_last_error(), "scalar outputs"));
    });
}

static void test_broadcast_grads(void **state) {
    (void)state;
    SCOPED({
        ct_tensor *a = ct_view(ct_arange(1, 4, 1, CT_F64), CT_SHAPE(3, 1));  /* [3,1] */
        ct_tensor *b = ct_arange(1, 5, 1, CT_F64);                           /* [4]   */
        a = ct_clone(a);
        assert_int_equal(ct_set_requires_grad(a, true), CT_OK);
        assert_int_equal(ct_set_requires_grad(b, true), CT_OK);
        ct_tensor *y = ct_mul(a, b); /* [3,4] */
        assert_int_equal(ct_backward(y, ct_ones(CT_SHAPE(3, 4), CT_F64), false, false), CT_OK);
        ct_tensor *ga = ct_grad(a), *gb = ct_grad(b);
        assert_int_equal(ct_ndim(ga), 2);
        assert_int_equal(ct_size(ga, 0), 3);
        assert_int_equal(ct_size(ga, 1), 1);
        for (int i = 0; i < 3; i++) assert_true(at(ga, i) == 10.0); /* 1+2+3+4 */
        for (int j = 0; j < 4; j++) assert_true(at(gb, j) == 6.0);  /* 1+2+3 */
    });
}

static void test_version_counter_and_leaf_rules(void **state) {
    (void)state;
    SCOPED({
        double xv[2] = {1, 2};
        ct_tensor *x = vec(xv, 2);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        /* in-place on a leaf that requires grad */
        assert_null(ct_add_(x, x));
        assert_int_equal(ct_last_error_code(), CT_ERR_AUTOGRAD);
        assert_non_null(strstr(ct_last_error(), "a leaf Variable that requires grad is being used in an in-place operation"));
        /* exp saves its output; changing it in place breaks backward */
        ct_tensor *y = ct_exp(x);
        ct_tensor *z = ct_mul(y, y);
        assert_non_null(ct_add_(y, ct_ones(CT_SHAPE(2), CT_F64)));
        assert_int_not_equal(ct_backward(z, ct_ones(CT_SHAPE(2), CT_F64), false, false), CT_OK);
        assert_non_null(strstr(ct_last_error(), "modified by an inplace operation"));
        /* but an in-place op whose values are not needed is fine and rebases history */
        ct_tensor *w = ct_mul(x, x);
        assert_non_null(ct_add_(w, x)); /* w = x*x + x */
        assert_string_equal(ct_grad_fn_name(w), "AddBackward0");
        assert_int_equal(ct_backward(w, ct_ones(CT_SHAPE(2), CT_F64), false, false), CT_OK);
        assert_true(at(ct_grad(x), 0) == 3.0 && at(ct_grad(x), 1) == 5.0);
        /* requires_grad only for float */
        assert_int_equal(ct_set_requires_grad(ct_zeros(CT_SHAPE(2), CT_I64), true), CT_ERR_DTYPE);
    });
}

static void test_modes(void **state) {
    (void)state;
    SCOPED({
        ct_tensor *x = ct_ones(CT_SHAPE(2), CT_F32);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *y = ct_mul(x, x);
        assert_false(ct_requires_grad(y));
        bool inner = ct_set_grad_enabled(true); /* nested enable_grad */
        assert_true(ct_requires_grad(ct_mul(x, x)));
        ct_set_grad_enabled(inner);
        ct_set_grad_enabled(prev);
        assert_true(ct_requires_grad(ct_mul(x, x)));
        /* inference mode */
        bool pi = ct_set_inference_mode(true);
        ct_tensor *t = ct_mul(x, x);
        assert_false(ct_requires_grad(t));
        assert_true(ct_is_inference(t));
        ct_set_inference_mode(pi);
        assert_int_equal(ct_set_requires_grad(t, true), CT_ERR_AUTOGRAD);
        assert_null(ct_mul(t, x));
        assert_non_null(strstr(ct_last_error(), "inference tensors cannot be saved for backward"));
        /* detach */
        ct_tensor *d = ct_detach(ct_mul(x, x));
        assert_false(ct_requires_grad(d));
        assert_true(ct_is_leaf(d));
    });
}

static int g_hook_calls;
static ct_tensor *double_it(ct_tensor *g, void *user) {
    (void)user;
    g_hook_calls++;
    return ct_mul_scalar(g, 2.0);
}

static void test_hooks_and_retain_grad(void **state) {
    (void)state;
    SCOPED({
        double xv[2] = {1, 3};
        ct_tensor *x = vec(xv, 2);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *h = ct_mul(x, x);
        assert_int_equal(ct_retain_grad(h), CT_OK);
        assert_int_equal(ct_register_hook(h, double_it, NULL), CT_OK);
        assert_int_equal(ct_register_hook(x, double_it, NULL), CT_OK);
        ct_tensor *y = ct_mul_scalar(h, 3.0);
        g_hook_calls = 0;
        assert_int_equal(ct_backward(y, ct_ones(CT_SHAPE(2), CT_F64), false, false), CT_OK);
        assert_int_equal(g_hook_calls, 2);
        /* h.grad is after its hook: 3*2 = 6; x.grad = 2 * (6 * 2x) */
        assert_true(at(ct_grad(h), 0) == 6.0);
        assert_true(at(ct_grad(x), 0) == 24.0 && at(ct_grad(x), 1) == 72.0);
    });
}

/* a custom square: forward x*x, backward 2*x*g */
static ct_status sq_fwd(ct_function_ctx *ctx, ct_tensor *const *in, int n, ct_tensor **out) {
    (void)n;
    if (ct_ctx_save_for_backward(ctx, in, 1)) return CT_ERR_RUNTIME;
    out[0] = ct_mul(in[0], in[0]);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status sq_bwd(ct_function_ctx *ctx, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = ct_ctx_saved(ctx, 0);
    gin[0] = ct_mul(ct_mul_scalar(x, 2.0), g[0]);
    return gin[0] ? CT_OK : ct_last_error_code();
}
static const ct_function_def k_square = {"Square", 1, sq_fwd, sq_bwd, NULL};

static void test_custom_function(void **state) {
    (void)state;
    SCOPED({
        double xv[3] = {1, -2, 0.5};
        ct_tensor *x = vec(xv, 3);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *y;
        assert_int_equal(ct_function_apply(&k_square, &x, 1, NULL, &y), CT_OK);
        assert_string_equal(ct_grad_fn_name(y), "SquareBackward");
        assert_int_equal(ct_backward(ct_exp(y), ct_ones(CT_SHAPE(3), CT_F64), false, false), CT_OK);
        for (int i = 0; i < 3; i++)
            assert_true(fabs(at(ct_grad(x), i) - 2 * xv[i] * exp(xv[i] * xv[i])) < 1e-12);
    });
}

static void test_double_backward(void **state) {
    (void)state;
    SCOPED({
        double xv[3] = {1, 2, -1.5};
        ct_tensor *x = vec(xv, 3);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *y = ct_mul(ct_mul(x, x), x);     /* x^3 */
        ct_tensor *ones = ct_ones(CT_SHAPE(3), CT_F64);
        ct_tensor *g;
        assert_int_equal(ct_autograd_grad(&y, 1, &x, 1, &ones, false, true, false, &g), CT_OK);
        assert_true(ct_requires_grad(g));
        for (int i = 0; i < 3; i++) assert_true(fabs(at(g, i) - 3 * xv[i] * xv[i]) < 1e-12);
        assert_null(ct_grad(x)); /* autograd_grad leaves .grad alone */
        ct_tensor *g2;
        assert_int_equal(ct_autograd_grad(&g, 1, &x, 1, &ones, true, false, false, &g2), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(g2, i) - 6 * xv[i]) < 1e-12);
        /* Hessian-vector product of f(x) = sum(x^3) with v: 6 x v */
        double vv[3] = {0.5, -1, 2};
        ct_tensor *v = vec(vv, 3);
        ct_tensor *hv;
        assert_int_equal(ct_autograd_grad(&g, 1, &x, 1, &v, false, false, false, &hv), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(hv, i) - 6 * xv[i] * vv[i]) < 1e-12);
        /* the graph is freed now */
        assert_int_not_equal(ct_autograd_grad(&g, 1, &x, 1, &v, false, false, false, &hv), CT_OK);
    });
}

static int g_count_calls;
static ct_tensor *count_it(ct_tensor *g, void *user) {
    (void)user;
    g_count_calls++;
    return g;
}

/* autograd.grad runs only the nodes that lead to its inputs (PyTorch's
 * exec_info): beyond them no hook fires, no retain_grad is written, no saved
 * tensor is freed, nothing is computed. */
static void test_autograd_grad_prunes(void **state) {
    (void)state;
    SCOPED({
        double xv[3] = {1, 2, -1.5};
        ct_tensor *x = vec(xv, 3);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *u = ct_mul(x, x);                 /* saves x twice */
        ct_tensor *h = ct_mul_scalar(u, 3.0);        /* h = 3 x^2 */
        assert_int_equal(ct_register_hook(u, count_it, NULL), CT_OK);
        assert_int_equal(ct_retain_grad(u), CT_OK);
        assert_int_equal(ct_register_hook(h, count_it, NULL), CT_OK);
        assert_int_equal(ct_retain_grad(h), CT_OK);
        ct_tensor *y = ct_sum(ct_mul(h, h), NULL, 0, false);
        ct_tensor *g;
        g_count_calls = 0;
        assert_int_equal(ct_autograd_grad(&y, 1, &h, 1, NULL, false, false, false, &g), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(g, i) - 6 * xv[i] * xv[i]) < 1e-12);
        /* h is the capture point: its hook and retain_grad run, as torch's */
        assert_int_equal(g_count_calls, 1);
        assert_non_null(ct_grad(h));
        /* u and x lie beyond: untouched, and their nodes still have their
         * saved tensors (the graph was not retained, but they did not run) */
        assert_null(ct_grad(u));
        assert_null(ct_grad(x));
        assert_int_equal(ct_backward(ct_sum(u, NULL, 0, false), NULL, false, false), CT_OK);
        for (int i = 0; i < 3; i++) assert_true(fabs(at(ct_grad(x), i) - 2 * xv[i]) < 1e-12);
        assert_int_equal(g_count_calls, 2);
    });
}

/* the leaf [1, 2, 3, 4] (f64, requires grad), in the caller's scope */
static ct_tensor *leaf_1234(void) {
    double xv[4] = {1, 2, 3, 4};
    ct_tensor *x = vec(xv, 4);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    return x;
}

static void test_inplace_on_view(void **state) {
    (void)state;
    SCOPED({
        ct_tensor *x = leaf_1234();
        ct_tensor *a = ct_mul_scalar(x, 1.0);       /* non-leaf copy of x */
        ct_tensor *v = ct_slice(a, 0, 1, 3, 1);     /* a[1:3] */
        ct_tensor *xs = ct_slice(x, 0, 0, 2, 1);
        assert_null(ct_mul_(xs, xs)); /* view of a leaf: refused */
        assert_non_null(strstr(ct_last_error(), "a view of a leaf Variable"));
        assert_non_null(ct_mul_(v, v));             /* a[1:3] = a[1:3]^2 */
        assert_string_equal(ct_grad_fn_name(a), "CopySlices");
        ct_tensor *y = ct_mul(a, ct_ones(CT_SHAPE(4), CT_F64));
        assert_int_equal(ct_backward(y, ct_ones(CT_SHAPE(4), CT_F64), false, false), CT_OK);
        double want[4] = {1, 4, 6, 1};
        for (int i = 0; i < 4; i++) assert_true(fabs(at(ct_grad(x), i) - want[i]) < 1e-12);
        assert_true(at(a, 1) == 4.0 && at(a, 2) == 9.0);
    });
}

/* torch's names for the copies: clone and contiguous CloneBackward0, a
 * dtype change ToCopyBackward0, copy_ CopyBackwards; the gradients flow
 * back through each */
static void test_copy_node_names(void **state) {
    (void)state;
    SCOPED({
        ct_tensor *x = leaf_1234();
        ct_tensor *c = ct_clone(x);
        assert_string_equal(ct_grad_fn_name(c), "CloneBackward0");
        ct_tensor *x2 = ct_reshape(x, CT_SHAPE(2, 2));
        assert_string_equal(ct_grad_fn_name(ct_contiguous(ct_transpose(x2, 0, 1))), "CloneBackward0");
        ct_tensor *f = ct_to_dtype(x, CT_F32);
        assert_string_equal(ct_grad_fn_name(f), "ToCopyBackward0");
        ct_tensor *y = ct_zeros(CT_SHAPE(4), CT_F64);
        assert_non_null(ct_copy_(y, x));
        assert_string_equal(ct_grad_fn_name(y), "CopyBackwards");
        ct_tensor *s = ct_add(ct_add(ct_sum(c, NULL, 0, false), ct_to_dtype(ct_sum(f, NULL, 0, false), CT_F64)),
                              ct_sum(ct_mul_scalar(y, 2.0), NULL, 0, false));
        assert_int_equal(ct_backward(s, NULL, false, false), CT_OK);
        for (int i = 0; i < 4; i++) assert_true(fabs(at(ct_grad(x), i) - 4.0) < 1e-12);
    });
}

static void test_anomaly(void **state) {
    (void)state;
    SCOPED({
        double xv[2] = {1, 2}, zv[2] = {0, 1};
        ct_tensor *x = vec(xv, 2), *z = vec(zv, 2);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        assert_int_equal(ct_set_requires_grad(z, true), CT_OK);
        ct_tensor *y = ct_div(x, z);
        bool prev = ct_set_detect_anomaly(true);
        assert_int_not_equal(ct_backward(y, ct_ones(CT_SHAPE(2), CT_F64), false, false), CT_OK);
        ct_set_detect_anomaly(prev);
        assert_non_null(strstr(ct_last_error(), "DivBackward0"));
        assert_non_null(strstr(ct_last_error(), "nan"));
    });
}

static ct_tensor *f_muldiv(ct_tensor *const *in, int n, void *user) {
    (void)n; (void)user;
    return ct_div(ct_mul(in[0], ct_exp(in[1])), ct_add(in[1], ct_wrap(3.0)));
}

/* max |a - b| over all elements */
static double maxdiff(ct_tensor *a, ct_tensor *b) {
    return ct_item(ct_amax(ct_abs(ct_sub(a, b)), NULL, 0, false));
}

/* VJPs that add their part straight into the gradient the engine holds
 * (ct__vjp_accum): a tied embedding (index_select + the output projection
 * through W^T, duplicate ids) and the pieces of a split, against the same
 * gradients assembled by hand; with create_graph (no in-place path) the
 * same values; and a gradient passed through unchanged twice to one
 * input (x + x) still counts twice. */
static void test_accumulate_into_buffer(void **state) {
    (void)state;
    SCOPED({
        ct_manual_seed(7);
        for (int cg = 0; cg < 2; cg++) {
            ct_tensor *W = ct_randn(CT_SHAPE(5, 3), CT_F64), *R = ct_randn(CT_SHAPE(4, 5), CT_F64);
            ct_tensor *ids = ct_from_array((int64_t[]){1, 3, 1, 0}, CT_SHAPE(4), CT_I64);
            assert_int_equal(ct_set_requires_grad(W, true), CT_OK);
            ct_tensor *h = ct_index_select(W, 0, ids);
            ct_tensor *loss = ct_sum(ct_mul(ct_linear(h, W, NULL), R), NULL, 0, false);
            assert_int_equal(ct_backward(loss, NULL, cg == 1, cg == 1), CT_OK);
            bool prev = ct_set_grad_enabled(false);
            ct_tensor *Wd = ct_detach(W), *hd = ct_index_select(Wd, 0, ids);
            ct_tensor *want = ct_index_add(ct_matmul(ct_t(R), hd), 0, ids, ct_matmul(R, Wd), 1.0);
            ct_set_grad_enabled(prev);
            assert_non_null(ct_grad(W));
            assert_true(maxdiff(ct_grad(W), want) < 1e-12);
            assert_int_equal(ct_set_grad(W, NULL), CT_OK); /* a graph-carrying grad would cycle */
        }
        /* q | k | v of a non-leaf, each piece weighted differently */
        ct_tensor *x = ct_randn(CT_SHAPE(4, 6), CT_F64), *a = ct_randn(CT_SHAPE(4, 6), CT_F64);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *parts[3];
        assert_int_equal(ct_split(ct_mul_scalar(x, 2.0), 2, 1, parts, 3), 3);
        ct_tensor *ap[3];
        assert_int_equal(ct_split(a, 2, 1, ap, 3), 3);
        ct_tensor *l2 = ct_add(ct_add(ct_sum(ct_mul(parts[0], ap[0]), NULL, 0, false),
                                      ct_sum(ct_mul(parts[2], ap[2]), NULL, 0, false)),
                               ct_sum(ct_exp(parts[1]), NULL, 0, false));
        assert_int_equal(ct_backward(l2, NULL, false, false), CT_OK);
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *xd = ct_detach(x);
        ct_tensor *mid = ct_mul_scalar(ct_exp(ct_mul_scalar(ct_narrow(xd, 1, 2, 2), 2.0)), 2.0);
        ct_tensor *want2 = ct_cat((ct_tensor *[]){ct_mul_scalar(ap[0], 2.0), mid, ct_mul_scalar(ap[2], 2.0)}, 3, 1);
        ct_set_grad_enabled(prev);
        assert_true(maxdiff(ct_grad(x), want2) < 1e-12);
        /* one gradient tensor handed to the same input twice */
        ct_tensor *y = ct_randn(CT_SHAPE(3), CT_F64);
        assert_int_equal(ct_set_requires_grad(y, true), CT_OK);
        assert_int_equal(ct_backward(ct_sum(ct_add(ct_exp(y), ct_exp(y)), NULL, 0, false), NULL, false, false), CT_OK);
        prev = ct_set_grad_enabled(false);
        assert_true(maxdiff(ct_grad(y), ct_mul_scalar(ct_exp(ct_detach(y)), 2.0)) < 1e-12);
        ct_set_grad_enabled(prev);
    });
}

static void test_gradcheck_utility(void **state) {
    (void)state;
    SCOPED({
        double av[6] = {0.1, 0.5, -0.3, 1.2, 0.7, -0.9}, bv[3] = {0.2, -0.4, 0.9};
        ct_tensor *a = ct_from_doubles(av, CT_SHAPE(2, 3), CT_F64);
        ct_tensor *b = ct_from_doubles(bv, CT_SHAPE(3), CT_F64);
        assert_int_equal(ct_set_requires_grad(a, true), CT_OK);
        assert_int_equal(ct_set_requires_grad(b, true), CT_OK);
        ct_tensor *in[2] = {a, b};
        assert_int_equal(ct_gradcheck(f_muldiv, NULL, in, 2, 0, 0, 0), CT_OK);
        assert_int_equal(ct_gradgradcheck(f_muldiv, NULL, in, 2, 0, 0, 0), CT_OK);
    });
}

static void setup_dbg(ct_status c, const char *m, void *u) { (void)c; (void)u; fprintf(stderr, "[ctorch error] %s\n", m); }
int main(void) {
    if (getenv("CT_TEST_VERBOSE")) ct_set_error_handler(setup_dbg, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_and_accumulate),
        cmocka_unit_test(test_broadcast_grads),
        cmocka_unit_test(test_version_counter_and_leaf_rules),
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_hooks_and_retain_grad),
        cmocka_unit_test(test_custom_function),
        cmocka_unit_test(test_double_backward),
        cmocka_unit_test(test_autograd_grad_prunes),
        cmocka_unit_test(test_inplace_on_view), cmocka_unit_test(test_copy_node_names),
        cmocka_unit_test(test_anomaly),
        cmocka_unit_test(test_gradcheck_utility),
        cmocka_unit_test(test_accumulate_into_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
