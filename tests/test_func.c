/* test_func.c -- function transforms (func.h, issue 20): the ct_func
 * object the transforms share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <cmocka.h>
#include <ctorch/ctorch.h>
#include "test_util.h"

static ct_status f_sin_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_sin(in[0]), NULL, 0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_fails_half(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_exp(in[0]);                         /* made, then the function fails */
    out[1] = ct_matmul(in[0], in[0]);               /* [3] @ [3] is fine; [3,1] fails below */
    return out[1] ? CT_OK : ct_last_error_code();
}

static ct_status f_leaves_null(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)in; (void)nin; (void)out; (void)nout; (void)ctx;
    return CT_OK;
}

static ct_status f_identity(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = in[0];
    return CT_OK;
}

static void t_call(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_func *f = ct_func_new(f_sin_sum, NULL);
    assert_non_null(f);
    ct_tensor *x = ct_from_array((float[]){0.5f, 1.0f, 2.0f}, (int64_t[]){3}, 1, CT_F32);
    ct_tensor *y = NULL;
    assert_int_equal(ct_func_call(f, &x, 1, &y, 1), CT_OK);
    assert_true(fabs(ct_item(y) - (sin(0.5) + sin(1.0) + sin(2.0))) < 1e-6);
    /* through the ct_fn adapter (what ct_compile takes) */
    ct_tensor *y2 = NULL;
    assert_int_equal(ct_func_fn(&x, 1, &y2, 1, f), CT_OK);
    assert_true(ct_item(y2) == ct_item(y));
    /* references: a retained function survives one free */
    assert_ptr_equal(ct_func_retain(f), f);
    ct_func_free(f);
    assert_int_equal(ct_func_call(f, &x, 1, &y, 1), CT_OK);
    ct_func_free(f);
    SCOPE_END;
}

static int freed;
static void count_free(void *ctx) { (void)ctx; freed++; }

static void t_owned_ctx(void **state) {
    (void)state;
    freed = 0;
    ct_func *f = ct_func_new_owned(f_sin_sum, &freed, count_free);
    ct_func_retain(f);
    ct_func_free(f);
    assert_int_equal(freed, 0);
    ct_func_free(f);
    assert_int_equal(freed, 1);
}

static void t_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    expect_err(ct_func_new(NULL, NULL), CT_ERR_ARG, "fn is NULL");
    ct_tensor *y[2] = {NULL, NULL};
    assert_int_equal(ct_func_call(NULL, NULL, 0, y, 1), CT_ERR_ARG);
    ct_clear_error();
    /* a failing function: its error, its outputs NULL, nothing leaked */
    ct_func *f = ct_func_new(f_fails_half, NULL);
    ct_tensor *x = ct_ones((int64_t[]){3, 1}, 2, CT_F32);
    int64_t live = ct_live_tensors();
    assert_int_equal(ct_func_call(f, &x, 1, y, 2), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "matmul"));
    assert_null(y[0]);
    assert_null(y[1]);
    assert_int_equal(ct_live_tensors(), live);
    ct_clear_error();
    ct_func_free(f);
    /* CT_OK with an output left NULL is an error naming it */
    f = ct_func_new(f_leaves_null, NULL);
    assert_int_equal(ct_func_call(f, &x, 1, y, 1), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "output 0 of 1 NULL"));
    ct_clear_error();
    ct_func_free(f);
    /* an input returned as it is: the caller gets a reference of its own */
    f = ct_func_new(f_identity, NULL);
    assert_int_equal(ct_func_call(f, &x, 1, y, 1), CT_OK);
    assert_ptr_equal(y[0], x);
    ct_func_free(f);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_call),
        cmocka_unit_test(t_owned_ctx),
        cmocka_unit_test(t_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
