/* test_core.c -- tensor basics, memory, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>

static void test_sum_exact_placeholder(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_ones(CT_SHAPE(2, 3), CT_F32);
    assert_non_null(t);
    assert_int_equal(ct_numel(t), 6);
    ct_tensor *u = ct_add(t, t);
    assert_non_null(u);
    assert_true(ct_item(ct_select(ct_select(u, 0, 1), 0, 2)) == 2.0);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_exact_placeholder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
