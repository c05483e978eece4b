/* test_saved_memory.c -- the autograd tape keeps only what each backward
 * reads (the op's vjp_reads mask, narrowed to the gradients wanted), like
 * PyTorch's SavedVariables: counted in bytes of live tensor storage
 * (ct__alloc_live_bytes), never timed.
 *
 *   - 50 x relu(linear(h)) with every layer in its own scope (as a module's
 *     forward would be): the graph keeps one [64, 256] activation per layer
 *     (relu's output, which the next linear also reads); linear's
 *     pre-activation and relu's input are freed;
 *   - mul(x, mask) with a constant mask keeps the mask, not x (dropout);
 *   - sum / mean / add keep nothing but shapes;
 *   - a gradient of one factor of mm reads only the other factor;
 *   - the gradients are still right, and the tape is freed by backward. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "autograd/autograd_impl.h"

#define B 64
#define D 256
#define LAYERS 50
#define ACT_BYTES ((int64_t)B * D * 4)

static void dbg(void) { fprintf(stderr, "last error: %s\n", ct_last_error()); }

static void test_relu_linear_chain(void **state) {
    (void)state;
    ct_manual_seed(0);
    ct_tensor *w[LAYERS], *b[LAYERS];
    for (int i = 0; i < LAYERS; i++) {
        ct_scope t = ct_scope_begin();
        w[i] = ct_keep(ct_mul_scalar(ct_randn(CT_SHAPE(D, D), CT_F32), 1.0 / 16.0)); /* ours */
        ct_scope_end(t);
        b[i] = ct_zeros(CT_SHAPE(D), CT_F32);
        assert_int_equal(ct_set_requires_grad(w[i], true), CT_OK);
        assert_int_equal(ct_set_requires_grad(b[i], true), CT_OK);
    }
    ct_tensor *x = ct_randn(CT_SHAPE(B, D), CT_F32);
    assert_non_null(x);
    int64_t live0 = ct_live_tensors();
    int64_t base = ct__alloc_live_bytes();
    ct_scope s = ct_scope_begin();
    ct_tensor *h = x;
    for (int i = 0; i < LAYERS; i++) {
        ct_scope l = ct_scope_begin();
        ct_tensor *z = ct_linear(h, w[i], b[i]);
        h = ct_keep(ct_relu(z));
        ct_scope_end(l); /* z and anything else unsaved goes here */
        assert_non_null(h);
    }
    int64_t held = ct__alloc_live_bytes() - base;
    /* one activation per layer (relu's output, read by relu's and the next
     * linear's backward); saving linear's output or relu's input as well
     * would double it */
    fprintf(stderr, "graph of %d relu(linear) layers holds %.2f activations per layer\n", LAYERS,
            (double)held / LAYERS / ACT_BYTES);
    assert_true(held <= (int64_t)LAYERS * ACT_BYTES + ACT_BYTES / 4);
    assert_true(held >= (int64_t)LAYERS * ACT_BYTES);
    ct_tensor *loss = ct_sum(h, NULL, 0, false);
    assert_non_null(loss);
    if (ct_backward(loss, NULL, false, false)) dbg();
    for (int i = 0; i < LAYERS; i++) {
        assert_non_null(ct_grad(w[i]));
        assert_non_null(ct_grad(b[i]));
    }
    ct_scope_end(s);
    /* the graph is gone: only the parameters' gradients remain */
    int64_t grads = (int64_t)LAYERS * (D * D + D) * 4;
    assert_int_equal(ct__alloc_live_bytes() - base, grads);
    assert_int_equal(ct_live_tensors(), live0 + 2 * LAYERS);
    for (int i = 0; i < LAYERS; i++) {
        ct_release(w[i]);
        ct_release(b[i]);
    }
    ct_release(x);
}

/* the gradients through the lean tape match the closed forms */
static void test_values_after_lean_save(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_from_doubles((double[]){1, 2, 3, 4, 5, 6}, CT_SHAPE(2, 3), CT_F64);
    ct_tensor *m = ct_from_doubles((double[]){0, 2, 0, 2, 2, 0}, CT_SHAPE(2, 3), CT_F64);
    ct_tensor *w = ct_from_doubles((double[]){1, -1, 0.5, -2, 0, 1}, CT_SHAPE(3, 2), CT_F64);
    assert_int_equal(ct_set_requires_grad(a, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    /* loss = sum(mean(relu(mm(a * m, w)), 0) + 1) */
    ct_tensor *y = ct_mm(ct_mul(a, m), w);
    ct_tensor *loss = ct_sum(ct_add_scalar(ct_mean(ct_relu(y), CT_SHAPE(0), false), 1.0), NULL, 0, false);
    assert_non_null(loss);
    if (ct_backward(loss, NULL, false, false)) dbg();
    /* am = a*m = [[0,4,0],[8,10,0]]; y = am@w = [[2, -8], [13, -28]];
     * relu mask [[1,0],[1,0]]; dL/dy = 0.5*mask */
    ct_tensor *ga = ct_grad(a), *gw = ct_grad(w);
    assert_non_null(ga);
    assert_non_null(gw);
    const double *pa = ct_data_ptr(ga), *pw = ct_data_ptr(gw);
    /* dL/d(am) = dL/dy @ w^T = 0.5 * [w00, w10, w20] per row = 0.5*[1, 0.5, 0] */
    const double ea[6] = {0, 0.5, 0, 1.0, 0.5, 0};
    for (int i = 0; i < 6; i++) assert_true(fabs(pa[i] - ea[i]) < 1e-12);
    /* dL/dw = am^T @ dL/dy: column 0 = 0.5 * (am row0 + am row1), column 1 = 0 */
    const double ew[6] = {4, 0, 7, 0, 0, 0};
    for (int i = 0; i < 6; i++) assert_true(fabs(pw[i] - ew[i]) < 1e-12);
    ct_scope_end(s);
}

/* bytes of storage still alive once the scope that made f's input has
 * ended: x = p + 1 is saved by nobody, so it lives only if f's node keeps
 * it; y (f's result) is counted */
static int64_t held_by(ct_tensor *(*f)(ct_tensor *, ct_tensor *), bool rg_mask) {
    ct_tensor *p = ct_randn(CT_SHAPE(1024), CT_F32); /* 4 KiB leaves */
    ct_tensor *m = ct_randn(CT_SHAPE(1024), CT_F32);
    assert_int_equal(ct_set_requires_grad(p, true), CT_OK);
    if (rg_mask) assert_int_equal(ct_set_requires_grad(m, true), CT_OK);
    int64_t base = ct__alloc_live_bytes();
    ct_scope s = ct_scope_begin();
    ct_scope inner = ct_scope_begin();
    ct_tensor *x = ct_add_scalar(p, 1.0);
    ct_tensor *y = ct_keep(f(x, m));
    ct_scope_end(inner);
    assert_non_null(y);
    int64_t held = ct__alloc_live_bytes() - base;
    ct_scope_end(s);
    ct_release(p);
    ct_release(m);
    return held;
}
static ct_tensor *f_mul(ct_tensor *x, ct_tensor *m) { return ct_mul(x, m); }
static ct_tensor *f_add(ct_tensor *x, ct_tensor *m) { return ct_add(x, m); }
static ct_tensor *f_div(ct_tensor *x, ct_tensor *m) { return ct_div(m, x); }
static ct_tensor *f_relu(ct_tensor *x, ct_tensor *m) { (void)m; return ct_relu(x); }
static ct_tensor *f_sum(ct_tensor *x, ct_tensor *m) { (void)m; return ct_sum(x, NULL, 0, false); }
static ct_tensor *f_mm(ct_tensor *x, ct_tensor *m) {
    return ct_mm(ct_reshape(x, CT_SHAPE(32, 32)), ct_reshape(m, CT_SHAPE(32, 32)));
}

static void test_per_op_saving(void **state) {
    (void)state;
    ct_manual_seed(1);
    const int64_t Y = 4096, X = 4096;
    assert_int_equal(held_by(f_mul, false), Y);     /* mul(x, const): keeps the constant, not x */
    assert_int_equal(held_by(f_mul, true), Y + X);  /* the constant wants a gradient: x is read */
    assert_int_equal(held_by(f_add, true), Y);      /* add keeps nothing but shapes */
    assert_int_equal(held_by(f_div, false), Y + X); /* m / x reads x */
    assert_int_equal(held_by(f_relu, false), Y);    /* relu reads its output only */
    assert_int_equal(held_by(f_sum, false), 4);     /* sum: the shape */
    assert_int_equal(held_by(f_mm, false), Y);      /* d(x@m)/dx reads m only */
    assert_int_equal(held_by(f_mm, true), Y + X);
}

/* a graph whose exp reads its output: log(exp(p)) keeps exp's output
 * (read by exp's backward) and log's input (the same tensor): one buffer */
static void test_shared_saves(void **state) {
    (void)state;
    ct_tensor *p = ct_randn(CT_SHAPE(4096), CT_F32);
    assert_int_equal(ct_set_requires_grad(p, true), CT_OK);
    int64_t base = ct__alloc_live_bytes();
    ct_scope s = ct_scope_begin();
    ct_scope inner = ct_scope_begin();
    ct_tensor *y = ct_keep(ct_sin(ct_log(ct_exp(p))));
    ct_scope_end(inner);
    assert_non_null(y);
    /* exp's output (read by exp and log) + log's output (read by sin) + y */
    assert_int_equal(ct__alloc_live_bytes() - base, 3 * 4096 * 4);
    ct_scope_end(s);
    ct_release(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relu_linear_chain),
        cmocka_unit_test(test_values_after_lean_save),
        cmocka_unit_test(test_per_op_saving),
        cmocka_unit_test(test_shared_saves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
