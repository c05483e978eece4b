/* compile_test_util.h -- what the ct_compile tests share: a private
 * CT_CACHE_DIR for the group (cmocka group setup/teardown) and the
 * live-tensor check around each test.  Include after cmocka.h. */
#ifndef CT_COMPILE_TEST_UTIL_H
#define CT_COMPILE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctorch/ctorch.h"

#define BEGIN int64_t live0 = ct_live_tensors(); ct_scope s_ = ct_scope_begin()
#define END ct_scope_end(s_); assert_int_equal(ct_live_tensors(), live0)

static char g_dir[256];

/* A fresh temporary cache folder as CT_CACHE_DIR. */
static int setup(void **st) {
    (void)st;
    snprintf(g_dir, sizeof g_dir, "/tmp/ct_test_compile_XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    setenv("CT_CACHE_DIR", g_dir, 1);
    return 0;
}

static int teardown(void **st) {
    (void)st;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* No working C compiler (CC names none), with a cache of its own under the
 * group's: returns the CC to restore (malloc'ed or NULL) for no_cc_end. */
static inline char *no_cc_begin(void) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/nocc", g_dir);
    setenv("CT_CACHE_DIR", dir, 1);
    const char *old = getenv("CC");
    char *saved = old ? strdup(old) : NULL;
    setenv("CC", "/nonexistent/cc", 1);
    return saved;
}

static inline void no_cc_end(char *saved) {
    if (saved) setenv("CC", saved, 1);
    else unsetenv("CC");
    free(saved);
    setenv("CT_CACHE_DIR", g_dir, 1);
}

#endif
