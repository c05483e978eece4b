/* test_view.c -- bad input for views and factories; storage sharing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>

#define BEGIN int64_t live0 = ct_live_tensors(); ct_scope s_ = ct_scope_begin()
#define END ct_scope_end(s_); assert_int_equal(ct_live_tensors(), live0)
#define ERR(code, key) do { assert_int_equal(ct_last_error_code(), code); \
    if (!strstr(ct_last_error(), key)) fail_msg("message '%s' lacks '%s'", ct_last_error(), key); } while (0)

static void test_view_errors(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_arange(0, 24, 1, CT_F32);
    ct_tensor *m = ct_view(x, CT_SHAPE(4, 6));
    assert_non_null(m);
    ct_tensor *mt = ct_transpose(m, 0, 1);
    assert_null(ct_view(mt, CT_SHAPE(24)));
    ERR(CT_ERR_SHAPE, "view");
    assert_null(ct_reshape(x, CT_SHAPE(-1, -1)));
    ERR(CT_ERR_SHAPE, "only one dimension can be inferred");
    assert_null(ct_view(x, CT_SHAPE(5, 5)));
    ERR(CT_ERR_SHAPE, "shape '[5, 5]' is invalid for input of size 24");
    assert_null(ct_expand(m, CT_SHAPE(3, 6)));
    ERR(CT_ERR_SHAPE, "must match the existing size (4) at non-singleton dimension 0");
    assert_null(ct_select(m, 0, 4));
    ERR(CT_ERR_INDEX, "select: index 4 out of range");
    assert_null(ct_select(m, 2, 0));
    ERR(CT_ERR_INDEX, "dim 2 out of range");
    assert_null(ct_narrow(m, 1, 4, 3));
    ERR(CT_ERR_INDEX, "exceeds dimension size");
    assert_null(ct_permute(m, (int64_t[]){0, 0}, 2));
    ERR(CT_ERR_ARG, "repeated dim");
    assert_null(ct_permute(m, (int64_t[]){0}, 1));
    ERR(CT_ERR_SHAPE, "number of dims don't match");
    assert_null(ct_as_strided(x, (int64_t[]){5, 5}, (int64_t[]){5, 1}, 2, 0));
    ERR(CT_ERR_INDEX, "as_strided");
    assert_null(ct_arange(0, 5, 0, CT_F32));
    ERR(CT_ERR_ARG, "step must be nonzero");
    assert_null(ct_linspace(0, 1, -1, CT_F32));
    ERR(CT_ERR_ARG, "non-negative");
    ct_tensor *out[4];
    assert_int_equal(ct_chunk(m, 0, 0, out, 4), -1);
    ERR(CT_ERR_ARG, "chunk");
    assert_int_equal(ct_split_sizes(m, (int64_t[]){1, 2}, 2, 0, out, 4), -1);
    ERR(CT_ERR_SHAPE, "split_with_sizes");
    assert_null(ct_copy_(ct_zeros(CT_SHAPE(2, 3), CT_F32), ct_ones(CT_SHAPE(3, 2), CT_F32)));
    ERR(CT_ERR_SHAPE, "copy_");
    END;
}

static void test_view_null(void **st) {
    (void)st;
    BEGIN;
    ct_clear_error();
    assert_null(ct_neg(NULL));
    char saved[256];
    snprintf(saved, sizeof saved, "%s", ct_last_error());
    assert_null(ct_view(NULL, CT_SHAPE(2)));
    assert_null(ct_reshape(NULL, CT_SHAPE(2)));
    assert_null(ct_permute(NULL, NULL, 0));
    assert_null(ct_transpose(NULL, 0, 1));
    assert_null(ct_expand(NULL, CT_SHAPE(2)));
    assert_null(ct_select(NULL, 0, 0));
    assert_null(ct_slice(NULL, 0, 0, 1, 1));
    assert_null(ct_diagonal(NULL, 0, 0, 1));
    assert_null(ct_contiguous(NULL));
    assert_null(ct_clone(NULL));
    assert_null(ct_zeros_like(NULL));
    assert_int_equal(ct_unbind(NULL, 0, NULL, 0), -1);
    assert_string_equal(ct_last_error(), saved);
    END;
}

static void test_sharing(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_arange(0, 12, 1, CT_F32);
    ct_tensor *m = ct_view(x, CT_SHAPE(3, 4));
    assert_true(ct_shares_storage(m, x));
    assert_true(ct_shares_storage(ct_transpose(m, 0, 1), x));
    assert_true(ct_shares_storage(ct_slice(m, 1, 0, 4, 2), x));
    assert_true(ct_shares_storage(ct_expand(ct_unsqueeze(x, 0), CT_SHAPE(2, 12)), x));
    assert_true(ct_shares_storage(ct_reshape(m, CT_SHAPE(12)), x));
    ct_tensor *r = ct_reshape(ct_transpose(m, 0, 1), CT_SHAPE(12));
    assert_non_null(r);
    assert_false(ct_shares_storage(r, x));
    assert_true(ct_item(ct_select(r, 0, 1)) == 4.0);
    assert_false(ct_shares_storage(ct_clone(m), x));
    assert_true(ct_shares_storage(ct_contiguous(m), x));
    /* a write through a view is seen by the base */
    assert_non_null(ct_fill_(ct_select(m, 0, 1), 5.0));
    assert_true(ct_item(ct_select(x, 0, 4)) == 5.0);
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_errors),
        cmocka_unit_test(test_view_null),
        cmocka_unit_test(test_sharing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
