/* test_util.h -- small checks shared by the cmocka tests (include after
 * <cmocka.h> and <ctorch/ctorch.h>). */
#ifndef CT_TEST_UTIL_H
#define CT_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

/* A test body between SCOPE_BEGIN; and SCOPE_END; runs in a scope, starts
 * with no pending error, and must leave no tensor alive that it made. */
#define SCOPE_BEGIN                              \
    int64_t live0_ = ct_live_tensors();          \
    ct_scope s_ = ct_scope_begin();              \
    ct_clear_error()
#define SCOPE_END                                \
    ct_scope_end(s_);                            \
    assert_int_equal(ct_live_tensors(), live0_)

/* r is NULL, the last error has the given code and its message contains
 * part; the error is then cleared. */
static inline void expect_err(const void *r, ct_status code, const char *part) {
    assert_null(r);
    assert_int_equal(ct_last_error_code(), code);
    if (!strstr(ct_last_error(), part)) fail_msg("error \"%s\" lacks \"%s\"", ct_last_error(), part);
    ct_clear_error();
}

/* Writes n bytes to path (replacing it); every step checked. */
static inline void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Copies the file from to the file to; every step checked. */
static inline void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[1 << 15];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0) assert_int_equal(fwrite(buf, 1, k, b), k);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

#endif
