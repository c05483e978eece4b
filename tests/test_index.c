/* test_index.c -- bad input for the copying/indexing/shape ops. */
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

static ct_tensor *ar(int64_t n, ct_dtype dt) { return ct_arange(0, (double)n, 1, dt); }
static ct_tensor *idx(const int64_t *v, int64_t n) { return ct_from_array(v, CT_SHAPE(n), CT_I64); }

static void test_null(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *i = idx((int64_t[]){0, 1}, 2);
    ct_clear_error();
    ct_tensor *a = ct_add(NULL, x); /* sets a first error (NULL) */
    (void)a;
    const char *first = ct_last_error();
    char saved[256];
    snprintf(saved, sizeof saved, "%s", first);
    assert_null(ct_index_select(NULL, 0, i));
    assert_null(ct_index_select(x, 0, NULL));
    assert_null(ct_gather(NULL, 0, i));
    assert_null(ct_scatter(x, 0, i, NULL));
    assert_null(ct_masked_fill(x, NULL, 1));
    assert_null(ct_index(NULL, NULL, 0));
    assert_null(ct_take(x, NULL));
    assert_null(ct_nonzero(NULL));
    assert_null(ct_tril(NULL, 0));
    assert_null(ct_flip(NULL, NULL, 0));
    assert_null(ct_pad(NULL, (int64_t[]){1, 1}, 2, CT_PAD_CONSTANT, 0));
    assert_null(ct_one_hot(NULL, 3));
    assert_null(ct_bincount(NULL, NULL, 0));
    ct_tensor *l[2] = {x, NULL};
    assert_null(ct_cat(l, 2, 0));
    assert_null(ct_stack(l, 2, 0));
    assert_string_equal(ct_last_error(), saved);
    END;
}

static void test_index_errors(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ar(5, CT_F32);
    ct_tensor *bad = idx((int64_t[]){7}, 1);
    assert_null(ct_index_select(x, 0, bad));
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    assert_string_equal(ct_last_error(), "index_select: index 7 is out of bounds for dimension 0 with size 5");
    assert_null(ct_index_select(x, 0, idx((int64_t[]){-1}, 1)));
    ERR(CT_ERR_INDEX, "index -1 is out of bounds");
    assert_null(ct_index_select(x, 1, idx((int64_t[]){0}, 1)));
    ERR(CT_ERR_INDEX, "dim 1 out of range");
    assert_null(ct_index_select(x, 0, ct_ones(CT_SHAPE(1), CT_F32)));
    ERR(CT_ERR_DTYPE, "int32 or int64");
    assert_null(ct_gather(x, 0, bad));
    ERR(CT_ERR_INDEX, "gather: index 7 is out of bounds");
    assert_null(ct_gather(ct_ones(CT_SHAPE(2, 2), CT_F32), 0, ct_zeros(CT_SHAPE(2), CT_I64)));
    ERR(CT_ERR_SHAPE, "same number of dimensions");
    assert_null(ct_scatter(x, 0, bad, x));
    ERR(CT_ERR_INDEX, "scatter: index 7");
    assert_null(ct_scatter(x, 0, idx((int64_t[]){0}, 1), ar(5, CT_F64)));
    ERR(CT_ERR_DTYPE, "src.dtype");
    assert_null(ct_scatter_reduce(x, 0, idx((int64_t[]){0}, 1), x, "max", true));
    ERR(CT_ERR_ARG, "reduce argument");
    assert_null(ct_index_add(x, 0, idx((int64_t[]){5}, 1), ar(1, CT_F32), 1));
    ERR(CT_ERR_INDEX, "index 5 is out of bounds");
    assert_null(ct_index_copy(x, 0, idx((int64_t[]){0, 1}, 2), ar(1, CT_F32)));
    ERR(CT_ERR_SHAPE, "index_copy");
    assert_null(ct_take(x, idx((int64_t[]){5}, 1)));
    ERR(CT_ERR_INDEX, "take: index 5 out of range");
    assert_non_null(ct_take(x, idx((int64_t[]){-5}, 1)));
    ct_tensor *m = ct_ones(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *i2[2] = {idx((int64_t[]){3}, 1), NULL};
    assert_null(ct_index(m, i2, 1));
    ERR(CT_ERR_INDEX, "index: index 3 is out of bounds for dimension 0 with size 3");
    ct_tensor *i3[2] = {ct_zeros(CT_SHAPE(2), CT_I64), ct_zeros(CT_SHAPE(3), CT_I64)};
    assert_null(ct_index(m, i3, 2));
    ERR(CT_ERR_INDEX, "could not be broadcast");
    ct_tensor *fi[1] = {ct_zeros(CT_SHAPE(2), CT_F32)};
    assert_null(ct_index(m, fi, 1));
    ERR(CT_ERR_DTYPE, "long, int, byte or bool");
    ct_tensor *bm[1] = {ct_ones(CT_SHAPE(2), CT_BOOL)};
    assert_null(ct_index(m, bm, 1));
    ERR(CT_ERR_INDEX, "shape of the mask");
    ct_tensor *ok[1] = {idx((int64_t[]){0, 1}, 2)};
    assert_null(ct_index_put_(m, ok, 1, ct_ones(CT_SHAPE(3), CT_F32), false));
    ERR(CT_ERR_SHAPE, "shape mismatch");
    END;
}

static void test_masked_shape_errors(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_ones(CT_SHAPE(3, 4), CT_F32);
    assert_null(ct_masked_fill(x, ct_ones(CT_SHAPE(3, 4), CT_F32), 1));
    ERR(CT_ERR_DTYPE, "boolean masks");
    assert_null(ct_masked_fill(x, ct_ones(CT_SHAPE(3), CT_BOOL), 1));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_null(ct_masked_fill_(x, ct_ones(CT_SHAPE(2, 3, 4), CT_BOOL), 1));
    ERR(CT_ERR_SHAPE, "masked_fill_");
    assert_null(ct_masked_scatter(x, ct_ones(CT_SHAPE(3, 4), CT_BOOL), ct_ones(CT_SHAPE(5), CT_F32)));
    ERR(CT_ERR_SHAPE, "masked_scatter");
    ct_tensor *l[2] = {x, ct_ones(CT_SHAPE(2, 3), CT_F32)};
    assert_null(ct_cat(l, 2, 0));
    ERR(CT_ERR_SHAPE, "Expected size 4 but got size 3 for tensor number 1");
    assert_null(ct_cat(l, 2, 2));
    ERR(CT_ERR_INDEX, "dim 2 out of range");
    assert_null(ct_stack(l, 2, 0));
    ERR(CT_ERR_SHAPE, "stack: expects each tensor to be equal size, but got [3, 4] at entry 0 and [2, 3] at entry 1");
    ct_tensor *z[1] = {ct_scalar(1, CT_F32)};
    assert_null(ct_cat(z, 1, 0));
    ERR(CT_ERR_SHAPE, "zero-dimensional");
    assert_null(ct_tril(ar(3, CT_F32), 0));
    ERR(CT_ERR_SHAPE, "at least 2 dimensions");
    assert_null(ct_flip(x, (int64_t[]){0, -2}, 2));
    ERR(CT_ERR_ARG, "multiple times");
    assert_null(ct_repeat(x, (int64_t[]){2}, 1));
    ERR(CT_ERR_ARG, "can not be smaller");
    assert_null(ct_rot90(x, 1, (int64_t[]){0, 0}));
    ERR(CT_ERR_ARG, "rot90");
    assert_null(ct_roll(x, (int64_t[]){1, 2}, 2, (int64_t[]){0}, 1));
    ERR(CT_ERR_ARG, "shifts and dimensions must align");
    END;
}

static void test_misc_errors(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *x = ct_zeros(CT_SHAPE(1, 1, 3), CT_F32);
    assert_null(ct_pad(x, (int64_t[]){3, 3}, 2, CT_PAD_REFLECT, 0));
    ERR(CT_ERR_ARG, "Padding size should be less than the corresponding input dimension, but got: "
                    "padding (3, 3) at dimension 2 of input [1, 1, 3]");
    assert_null(ct_pad(ar(3, CT_F32), (int64_t[]){1, 1}, 2, CT_PAD_REFLECT, 0));
    ERR(CT_ERR_ARG, "only 2D, 3D, 4D, 5D padding");
    assert_null(ct_pad(x, (int64_t[]){1}, 1, CT_PAD_CONSTANT, 0));
    ERR(CT_ERR_ARG, "divisible by 2");
    assert_null(ct_pad(x, (int64_t[]){-2, -2}, 2, CT_PAD_CONSTANT, 0));
    ERR(CT_ERR_ARG, "negative output size");
    ct_tensor *c = idx((int64_t[]){0, 3}, 2);
    assert_null(ct_one_hot(c, 2));
    ERR(CT_ERR_INDEX, "smaller than num_classes");
    assert_null(ct_one_hot(idx((int64_t[]){-1}, 1), 3));
    ERR(CT_ERR_INDEX, "non-negative");
    assert_null(ct_one_hot(ar(3, CT_I32), 3));
    ERR(CT_ERR_DTYPE, "one_hot");
    assert_null(ct_bincount(idx((int64_t[]){0, -1}, 2), NULL, 0));
    ERR(CT_ERR_ARG, "non-negative");
    assert_null(ct_bincount(ar(3, CT_F32), NULL, 0));
    ERR(CT_ERR_SHAPE, "1-d non-negative integral");
    assert_null(ct_histc(ar(3, CT_I64), 3, 0, 1));
    ERR(CT_ERR_DTYPE, "histc");
    assert_null(ct_histc(ar(3, CT_F32), 3, 2, 1));
    ERR(CT_ERR_ARG, "max must be larger than min");
    assert_null(ct_bucketize(ar(3, CT_F32), ct_ones(CT_SHAPE(2, 2), CT_F32), false));
    ERR(CT_ERR_SHAPE, "boundaries tensor must be 1 dimension");
    assert_null(ct_searchsorted(ct_ones(CT_SHAPE(2, 2), CT_F32), ct_ones(CT_SHAPE(3, 2), CT_F32), false));
    ERR(CT_ERR_SHAPE, "first N-1");
    assert_null(ct_repeat_interleave_tensor(ar(3, CT_F32), idx((int64_t[]){1, 2}, 2), 0));
    ERR(CT_ERR_SHAPE, "repeat_interleave");
    ct_tensor *out[2];
    ct_tensor *mg[2] = {ar(2, CT_F32), ct_ones(CT_SHAPE(2, 2), CT_F32)};
    assert_null(ct_meshgrid_ij(mg, 2, out));
    ERR(CT_ERR_SHAPE, "0D or 1D");
    /* in-place ops write through and return their argument */
    ct_tensor *y = ct_zeros(CT_SHAPE(2, 3), CT_F32);
    ct_tensor *yt = ct_transpose(y, 0, 1);
    ct_tensor *r = ct_masked_fill_(yt, ct_ones(CT_SHAPE(3, 2), CT_BOOL), 2);
    assert_ptr_equal(r, yt);
    assert_true(ct_item(ct_select(ct_select(y, 0, 1), 0, 2)) == 2.0);
    r = ct_index_add_(y, 1, idx((int64_t[]){0, 0}, 2), ct_ones(CT_SHAPE(2, 2), CT_F32), 1.0);
    assert_ptr_equal(r, y);
    assert_true(ct_item(ct_select(ct_select(y, 0, 0), 0, 0)) == 4.0);
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null),
        cmocka_unit_test(test_index_errors),
        cmocka_unit_test(test_masked_shape_errors),
        cmocka_unit_test(test_misc_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
