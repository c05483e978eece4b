/* test_core.c -- dtypes and type promotion (against torch), half-precision
 * conversion, the error model, scopes and reference counts, from_blob. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "fixture.h"

/* ---- promotion against torch.promote_types / torch.result_type -------- */
static ct_tensor *operand(const char *tier, const char *dt) {
    if (strcmp(tier, "num") == 0) {
        if (strcmp(dt, "bool") == 0) return ct_wrap_bool(true);
        if (strcmp(dt, "int64") == 0) return ct_wrap_int(3);
        if (strcmp(dt, "float64") == 0) return ct_wrap(2.5);
        return ct_wrap_complex(1, 2);
    }
    if (strcmp(tier, "dim") == 0) return ct_zeros(CT_SHAPE(2), fx_dtype(dt));
    return ct_zeros(CT_SCALAR_SHAPE, fx_dtype(dt));
}

static void test_promotion_matches_torch(void **state) {
    (void)state;
    FILE *f = fopen(CT_FIXTURE_DIR "/promote.txt", "r");
    assert_non_null(f);
    char line[256];
    int n = 0, bad = 0;
    ct_scope s = ct_scope_begin();
    while (fgets(line, sizeof line, f)) {
        char a[32], b[32], r[32], ta[32], tb[32];
        if (sscanf(line, "promote %31s %31s %31s", a, b, r) == 3) {
            ct_dtype got = ct_promote_types(fx_dtype(a), fx_dtype(b));
            if (got != fx_dtype(r)) {
                fprintf(stderr, "promote %s %s: got %s, torch %s\n", a, b, ct_dtype_name(got), r);
                bad++;
            }
            n++;
        } else if (sscanf(line, "result %31s %31s %31s %31s -> %31s", ta, a, tb, b, r) == 5) {
            ct_tensor *ops[2] = {operand(ta, a), operand(tb, b)};
            ct_dtype got = ct_result_type(ops, 2);
            if (got != fx_dtype(r)) {
                fprintf(stderr, "result_type %s %s, %s %s: got %s, torch %s\n", ta, a, tb, b,
                        ct_dtype_name(got), r);
                bad++;
            }
            n++;
        }
    }
    fclose(f);
    ct_scope_end(s);
    printf("type promotion: %d cases against torch, %d mismatches\n", n, bad);
    assert_true(n > 300);
    assert_int_equal(bad, 0);
}

static void test_dtype_info(void **state) {
    (void)state;
    assert_int_equal(ct_dtype_size(CT_BOOL), 1);
    assert_int_equal(ct_dtype_size(CT_BF16), 2);
    assert_int_equal(ct_dtype_size(CT_C128), 16);
    assert_int_equal(ct_dtype_size(CT_C32), 4);
    assert_string_equal(ct_dtype_name(CT_F32), "float32");
    assert_string_equal(ct_dtype_name(CT_BF16), "bfloat16");
    assert_true(ct_dtype_is_floating(CT_F16));
    assert_false(ct_dtype_is_floating(CT_C64));
    assert_true(ct_dtype_is_integral(CT_BOOL, true));
    assert_false(ct_dtype_is_integral(CT_BOOL, false));
}

/* ---- half precision: bit patterns as torch produces them --------------- */
static uint16_t bits_of(ct_tensor *t) { return *(uint16_t *)ct_data_ptr(t); }
static void test_half_conversion(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    struct { double v; uint16_t f16, bf16; } cases[] = {
        {1.0, 0x3c00, 0x3f80},      {-2.0, 0xc000, 0xc000},      {65504.0, 0x7bff, 0x4780},
        {65520.0, 0x7c00, 0x4780},  {1e-8, 0x0000, 0x322c},      {6e-8, 0x0001, 0x3381},
        {1.00390625, 0x3c04, 0x3f80}, {1.01171875, 0x3c0c, 0x3f82}, {INFINITY, 0x7c00, 0x7f80},
        {0.1, 0x2e66, 0x3dcd},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_tensor *h = ct_full(CT_SCALAR_SHAPE, cases[i].v, CT_F16);
        ct_tensor *b = ct_full(CT_SCALAR_SHAPE, cases[i].v, CT_BF16);
        if (bits_of(h) != cases[i].f16 || bits_of(b) != cases[i].bf16)
            fprintf(stderr, "value %g: f16 %04x (want %04x) bf16 %04x (want %04x)\n", cases[i].v,
                    bits_of(h), cases[i].f16, bits_of(b), cases[i].bf16);
        assert_int_equal(bits_of(h), cases[i].f16);
        assert_int_equal(bits_of(b), cases[i].bf16);
        /* and back */
        double back = ct_item(ct_to_dtype(h, CT_F64));
        if (isfinite(cases[i].v) && cases[i].v < 65504.5) assert_true(fabs(back - cases[i].v) <= fabs(cases[i].v) * 1e-3 + 6e-8);
    }
    ct_tensor *nanh = ct_full(CT_SCALAR_SHAPE, NAN, CT_F16);
    assert_true(isnan(ct_item(nanh)));
    ct_tensor *nanb = ct_full(CT_SCALAR_SHAPE, NAN, CT_BF16);
    assert_true(isnan(ct_item(nanb)));
    /* float -> int conversions wrap like torch on x86 */
    assert_int_equal(ct_item_int(ct_to_dtype(ct_scalar(-1, CT_I64), CT_U8)), 255);
    assert_int_equal(ct_item_int(ct_to_dtype(ct_scalar(300, CT_I32), CT_I8)), 44);
    assert_int_equal(ct_item_int(ct_to_dtype(ct_scalar(-2.7, CT_F32), CT_I32)), -2);
    assert_int_equal(ct_item_int(ct_to_dtype(ct_scalar(0.5, CT_F32), CT_BOOL)), 1);
    ct_scope_end(s);
}

/* ---- the error model ---------------------------------------------------- */
static int g_handler_calls;
static void handler(ct_status code, const char *msg, void *user) {
    (void)msg;
    *(int *)user += 1;
    assert_true(code != CT_OK);
}

static void test_errors_propagate(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_clear_error();
    assert_int_equal(ct_last_error_code(), CT_OK);
    assert_string_equal(ct_last_error(), "");
    ct_tensor *a = ct_zeros(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *b = ct_zeros(CT_SHAPE(5, 6), CT_F32);
    ct_tensor *bad = ct_add(a, b);
    assert_null(bad);
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "add"));
    assert_non_null(strstr(ct_last_error(), "[3, 4]"));
    assert_non_null(strstr(ct_last_error(), "[5, 6]"));
    char first[1024];
    snprintf(first, sizeof first, "%s", ct_last_error());
    /* NULL propagates through a whole expression and keeps the first error */
    ct_tensor *y = ct_exp(ct_mul(ct_add(bad, a), a));
    assert_null(y);
    assert_string_equal(ct_last_error(), first);
    assert_null(ct_view(NULL, CT_SHAPE(1)));
    assert_string_equal(ct_last_error(), first);
    /* handler sees every error */
    ct_set_error_handler(handler, &g_handler_calls);
    assert_null(ct_view(a, CT_SHAPE(5)));
    assert_int_equal(g_handler_calls, 1);
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "shape '[5]' is invalid for input of size 12"));
    ct_set_error_handler(NULL, NULL);
    assert_null(ct_transpose(a, 0, 2));
    assert_int_equal(g_handler_calls, 1);
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    assert_non_null(strstr(ct_last_error(), "dim 2 out of range"));
    assert_string_equal(ct_status_name(CT_ERR_INDEX), "CT_ERR_INDEX");
    /* shape product overflow */
    assert_null(ct_empty(CT_SHAPE(1LL << 40, 1LL << 40), CT_F32));
    assert_int_equal(ct_last_error_code(), CT_ERR_OVERFLOW);
    assert_null(ct_empty(CT_SHAPE(3, -1), CT_F32));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    /* item of a multi-element tensor */
    assert_true(isnan(ct_item(a)));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    /* dims: 16 fine, 17 refused */
    int64_t sh[17];
    for (int i = 0; i < 17; i++) sh[i] = 1;
    assert_non_null(ct_zeros(sh, 16, CT_F32));
    assert_null(ct_zeros(sh, 17, CT_F32));
    ct_clear_error();
    assert_int_equal(ct_last_error_code(), CT_OK);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- scopes and reference counts ---------------------------------------- */
static void test_scopes(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_tensor *kept;
    ct_scope outer = ct_scope_begin();
    {
        ct_scope inner = ct_scope_begin();
        ct_tensor *a = ct_ones(CT_SHAPE(4), CT_F32);
        ct_tensor *b = ct_add(a, a);
        kept = ct_keep(b); /* moves to outer */
        assert_ptr_equal(kept, b);
        assert_int_equal(ct_live_tensors(), live + 2);
        ct_scope_end(inner);
    }
    assert_int_equal(ct_live_tensors(), live + 1);
    assert_true(ct_item(ct_select(kept, 0, 0)) == 2.0);
    ct_retain(kept);
    ct_tensor *owned = ct_keep(kept); /* no enclosing scope: the scope's ref passes to us */
    ct_scope_end(outer);
    /* we hold two references now: ours and the one the scope handed over */
    assert_int_equal(ct_live_tensors(), live + 1);
    ct_release(owned);
    assert_int_equal(ct_live_tensors(), live + 1);
    ct_release(kept);
    assert_int_equal(ct_live_tensors(), live);
    /* outside any scope the caller owns results */
    ct_tensor *c = ct_zeros(CT_SHAPE(2), CT_I64);
    ct_tensor *v = ct_view(c, CT_SHAPE(1, 2));
    ct_release(c); /* the view keeps the storage alive */
    assert_int_equal(ct_numel(v), 2);
    ct_fill_(v, 3);
    assert_true(((int64_t *)ct_data_ptr(v))[1] == 3);
    ct_release(v);
    ct_release(NULL);
    assert_int_equal(ct_live_tensors(), live);
}

static int g_deleted;
static void deleter(void *data, void *ctx) {
    (void)data;
    *(int *)ctx += 1;
}

static void test_from_blob(void **state) {
    (void)state;
    float buf[6] = {1, 2, 3, 4, 5, 6};
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_from_blob(buf, CT_SHAPE(2, 3), NULL, CT_F32, deleter, &g_deleted);
    ct_tensor *tt = ct_t(t);
    assert_false(ct_is_contiguous(tt));
    assert_true(ct_shares_storage(t, tt));
    assert_true(ct_item(ct_select(ct_select(tt, 0, 2), 0, 1)) == 6.0);
    buf[5] = 60;
    assert_true(ct_item(ct_select(ct_select(tt, 0, 2), 0, 1)) == 60.0);
    ct_tensor *strided = ct_from_blob(buf, CT_SHAPE(3), (const int64_t[]){2}, CT_F32, NULL, NULL);
    assert_true(ct_item(ct_select(strided, 0, 2)) == 5.0);
    assert_int_equal(g_deleted, 0);
    ct_scope_end(s);
    assert_int_equal(g_deleted, 1);
    assert_null(ct_from_blob(NULL, CT_SHAPE(2), NULL, CT_F32, NULL, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_NULL);
}

static void test_version_counter(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_zeros(CT_SHAPE(3), CT_F32);
    ct_tensor *v = ct_slice(a, 0, 1, 3, 1);
    int64_t v0 = ct_version(a);
    assert_non_null(ct_fill_(v, 2.0));
    assert_true(ct_version(a) > v0);
    assert_true(ct_item(ct_select(a, 0, 2)) == 2.0);
    assert_true(ct_item(ct_select(a, 0, 0)) == 0.0);
    ct_scope_end(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promotion_matches_torch),
        cmocka_unit_test(test_dtype_info),
        cmocka_unit_test(test_half_conversion),
        cmocka_unit_test(test_errors_propagate),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_from_blob),
        cmocka_unit_test(test_version_counter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
