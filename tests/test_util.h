/* test_util.h -- small checks shared by the cmocka tests (include after
 * <cmocka.h> and <ctorch/ctorch.h>). */
#ifndef CT_TEST_UTIL_H
#define CT_TEST_UTIL_H

#include <string.h>

/* r is NULL, the last error has the given code and its message contains
 * part; the error is then cleared. */
static inline void expect_err(const void *r, ct_status code, const char *part) {
    assert_null(r);
    assert_int_equal(ct_last_error_code(), code);
    if (!strstr(ct_last_error(), part)) fail_msg("error \"%s\" lacks \"%s\"", ct_last_error(), part);
    ct_clear_error();
}

#endif
