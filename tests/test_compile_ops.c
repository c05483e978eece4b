/* test_compile_ops.c -- every op of the op fixtures traced and compiled alone
 * (issue 18).
 *
 * Every case of every op fixture family (tests/ops_families.h) runs on cpu
 * inputs, compared with torch's values as in test_ops, and then again
 * through ct_compile (fixture.c, fx_set_compile_check): a fresh compiled
 * function per case and input layout (contiguous, non-contiguous), called
 * twice (trace and build, then the cached graph), each call's outputs
 * compared with torch's at the same tolerances.  A case that ran eagerly
 * (a graph break, a trace that failed) must be one of the data-dependent
 * ops below, whose output shape or values need the data at trace time;
 * any other fallback, any mismatch and any error that differs from the cpu
 * run's fails.  The random family is included: its fixtures are the
 * deterministic corners (empty shapes, degenerate distributions, p in
 * {0, 1}), and the cpu run and each compiled call start from the same
 * seed.  Kernels go to a private CT_CACHE_DIR, removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "compile_test_util.h"
#include "fixture.h"

/* ---- what may run eagerly ------------------------------------------------- */
/* Ops that legitimately break the graph: their output's shape (or, for a
 * few, the work itself) depends on the input values, which a trace on meta
 * tensors does not have (torch.compile breaks on these too, without
 * capture_dynamic_output_shape_ops). */
static const struct {
    const char *op, *reason;
} k_breaks[] = {
    {"nonzero", "output length = number of nonzero elements"},
    {"argwhere", "output length = number of nonzero elements"},
    {"masked_select", "output length = number of true mask elements"},
    {"unique", "output length = number of distinct values"},
    {"unique_consecutive", "output length = number of runs"},
    {"bincount", "output length = largest value + 1"},
    {"repeat_interleave_tensor", "output length = sum of the repeats"},
};

/* KNOWN FAILURES: ops that are not data-dependent but still run eagerly
 * (their values are right: eager's).  Compiler gaps to close, not
 * legitimate breaks; the test fails when one of them stops falling back
 * (take it off the list then). */
#define REPLAY "replay gap: its kernel runs on operands its public function prepares, and exec.c " \
               "replays only matmul/linear/index_select/gather/scatter_add/index_add that way"
static const struct {
    const char *op, *reason;
} k_gaps[] = {
    /* reduce, sort, scan (aminmax: its amax kernel; softmax, cumsum, cummax: bf16 only) */
    {"aminmax", REPLAY}, {"argsort", REPLAY}, {"sort", REPLAY}, {"median", REPLAY},
    {"topk", REPLAY}, {"softmax", REPLAY}, {"cumsum", REPLAY}, {"cummax", REPLAY},
    /* index and shape (cat family, scatter, index: non-contiguous or promoting cases) */
    {"cat", REPLAY}, {"stack", REPLAY}, {"hstack", REPLAY}, {"vstack", REPLAY},
    {"scatter", REPLAY}, {"scatter_value", REPLAY}, {"scatter_reduce", REPLAY},
    {"scatter_", "replay gap: writes the result of scatter into its input"},
    {"index", REPLAY}, {"take", REPLAY}, {"index_copy", REPLAY}, {"index_fill", REPLAY},
    {"index_put", "replay gap: writes the result of index_put into its input"},
    {"index_put_", "replay gap: writes the result of index_put into its input"},
    {"masked_scatter", REPLAY}, {"bucketize", REPLAY}, {"searchsorted", REPLAY},
    {"tril", REPLAY}, {"triu", REPLAY}, {"one_hot", REPLAY}, {"histc", REPLAY},
    {"pad", "a copy made outside the op layer's exit points (not traceable)"},
    {"repeat_interleave", "a copy made outside the op layer's exit points (not traceable)"},
    /* linalg */
    {"mv", REPLAY}, {"dot", REPLAY}, {"vdot", REPLAY}, {"outer", REPLAY}, {"einsum", REPLAY},
    {"addmv", REPLAY}, {"addr", REPLAY}, {"baddbmm", REPLAY}, {"addbmm", REPLAY},
    {"bilinear", REPLAY}, {"tensordot", REPLAY}, {"kron", REPLAY}, {"cross", REPLAY},
    {"cdist", REPLAY},
    /* conv and pooling (non-contiguous inputs, or every case) */
    {"conv1d", REPLAY}, {"conv2d", REPLAY}, {"conv3d", REPLAY}, {"conv_padmode", REPLAY},
    {"conv_transpose1d", REPLAY}, {"conv_transpose2d", REPLAY}, {"max_pool1d", REPLAY},
    {"max_pool1d_indices", REPLAY}, {"max_pool2d", REPLAY}, {"max_pool2d_indices", REPLAY},
    {"avg_pool1d", REPLAY}, {"avg_pool2d", REPLAY}, {"adaptive_avg_pool1d", REPLAY},
    {"adaptive_avg_pool2d", REPLAY}, {"adaptive_max_pool2d", REPLAY},
    {"interpolate_nearest", REPLAY}, {"interpolate_nearest_exact", REPLAY},
    {"interpolate_linear", REPLAY}, {"interpolate_bilinear", REPLAY},
    {"interpolate_bicubic", REPLAY}, {"im2col", REPLAY}, {"col2im", REPLAY},
    /* random: compile.h documents these as breaks for now */
    {"bernoulli", "a random op with tensor operands (bernoulli(p)): a documented break"},
    {"multinomial", "a random op with tensor operands: a documented break"},
};
#define NGAPS (sizeof k_gaps / sizeof k_gaps[0])
static int g_gap_hits[NGAPS];

static bool any_bool_index(const fx_case *c) {
    for (int k = 1; k < c->nin; k++)
        if (ct_get_dtype(c->in[k]) == CT_BOOL) return true;
    return false;
}

static bool allowed_break(const fx_case *c) {
    for (size_t i = 0; i < sizeof k_breaks / sizeof k_breaks[0]; i++)
        if (strcmp(c->op, k_breaks[i].op) == 0) return true;
    /* boolean indices select as many elements as they have true values */
    if ((strcmp(c->op, "index") == 0 || strncmp(c->op, "index_put", 9) == 0) && any_bool_index(c))
        return true;
    /* num_classes -1: the largest index + 1 */
    if (strcmp(c->op, "one_hot") == 0 && fx_i(c, "num_classes", -1) < 0) return true;
    /* min == max: the range is the data's minimum and maximum */
    if (strcmp(c->op, "histc") == 0 && fx_f(c, "min", 0) == fx_f(c, "max", 0)) return true;
    return false;
}

/* 0: not expected to break; 1: a data-dependent op; 2: a known gap */
static int break_kind(const fx_case *c) {
    if (allowed_break(c)) return 1;
    for (size_t i = 0; i < NGAPS; i++)
        if (strcmp(c->op, k_gaps[i].op) == 0) {
            g_gap_hits[i]++;
            return 2;
        }
    return 0;
}

/* ---- the tally of fallbacks, by op ------------------------------------------ */
#define MAX_FB 256
static struct {
    char op[64];
    char why[72]; /* the first case's reason, shortened */
    int n;
    int kind;     /* break_kind */
} g_fb[MAX_FB];
static int g_nfb, g_unexpected;

static bool on_fallback(const fx_case *c, const char *variant, const char *why) {
    (void)variant;
    int kind = break_kind(c);
    if (!kind) g_unexpected++;
    int i = 0;
    while (i < g_nfb && (strcmp(g_fb[i].op, c->op) != 0 || g_fb[i].kind != kind)) i++;
    if (i == g_nfb && g_nfb < MAX_FB) {
        snprintf(g_fb[i].op, sizeof g_fb[i].op, "%s", c->op);
        snprintf(g_fb[i].why, sizeof g_fb[i].why, "%s", why);
        g_fb[i].kind = kind;
        g_nfb++;
    }
    if (i < g_nfb) g_fb[i].n++;
    return kind != 0;
}

/* ---- the families ---------------------------------------------------------- */
#define FAMILY(name)                                                       \
    extern const fx_op fx_ops_##name[];                                    \
    extern const int fx_nops_##name;                                       \
    static void test_##name(void **state) {                                \
        (void)state;                                                       \
        fx_set_compile_check(on_fallback);                                 \
        int f = fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, \
                            fx_nops_##name);                               \
        fx_set_compile_check(NULL);                                        \
        assert_int_equal(f, 0);                                            \
    }
#include "ops_families.h"
#undef FAMILY

static struct timespec g_t0;

static void test_compile_tally(void **state) {
    (void)state;
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fx_compile_tally t = fx_compile_summary();
    fx_compile_print_summary();
    static const char *const kinds[] = {"UNEXPECTED", "data-dependent", "known gap"};
    int nkind[3] = {0, 0, 0}, ops[3] = {0, 0, 0};
    printf("eager fallbacks by op (case runs, the first one's reason):\n");
    for (int i = 0; i < g_nfb; i++) {
        printf("  %-26s %4d  %-14s %s\n", g_fb[i].op, g_fb[i].n, kinds[g_fb[i].kind], g_fb[i].why);
        nkind[g_fb[i].kind] += g_fb[i].n;
        ops[g_fb[i].kind]++;
    }
    printf("eager fallbacks: %d case runs of %d data-dependent ops, %d of %d known-gap ops, %d of %d "
           "unexpected ops\n", nkind[1], ops[1], nkind[2], ops[2], nkind[0], ops[0]);
    int stale = 0;
    for (size_t i = 0; i < NGAPS; i++)
        if (!g_gap_hits[i]) {
            printf("  known gap %s no longer falls back: take it off the list\n", k_gaps[i].op);
            stale++;
        }
    printf("%.1f s for all families, compiled twice each\n",
           (double)(t1.tv_sec - g_t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - g_t0.tv_nsec));
    /* every family ran compiled, every case accounted for */
    assert_true(t.run > 6000);
    assert_int_equal(t.failed, 0);
    assert_int_equal(g_unexpected, 0);
    assert_int_equal(stale, 0);
    assert_int_equal(t.run, t.compiled + t.eager + t.same_error);
    assert_true(t.compiled > t.eager);
}

static int group_setup(void **st) {
    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    return setup(st);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
        cmocka_unit_test(test_compile_tally),
    };
    return cmocka_run_group_tests(tests, group_setup, teardown);
}
