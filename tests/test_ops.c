/* test_ops.c -- runs every op fixture family against PyTorch's outputs,
 * with contiguous and non-contiguous inputs, and prints how many ops were
 * checked.  Each family's runners live in tests/ops_<family>.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

#include "fixture.h"

#define FAMILY(name)                                                       \
    extern const fx_op fx_ops_##name[];                                    \
    extern const int fx_nops_##name;                                       \
    static void test_##name(void **state) {                                \
        (void)state;                                                       \
        int f = fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, \
                            fx_nops_##name);                               \
        assert_int_equal(f, 0);                                            \
    }
#include "ops_families.h"
#undef FAMILY

static int summary(void **state) {
    (void)state;
    fx_print_summary();
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
    };
    return cmocka_run_group_tests(tests, NULL, summary);
}
