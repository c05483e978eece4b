/* test_vmap.c -- ct_vmap (func.h, issue 20 item 3): batching rules, not a
 * loop.
 *
 * The op fixtures: every case of every family (tests/ops_families.h, the
 * tables test_ops runs) with inputs is rerun under vmap over a batch of
 * B = 3 samples -- sample 0 the case's inputs, samples 1 and 2 the same
 * values rolled by one and two elements (a permutation: every value stays
 * in its op's domain) -- stacked along in_dims 0, 1 and -1, and with the
 * inputs after the first unbatched (CT_VMAP_NONE) when there are several;
 * the result must equal the loop of the case's op over the samples,
 * stacked (bitwise where possible: the count is printed; else at the
 * fixture's tolerance).  Per family it prints how many fixture ops ran
 * every variant batched and which table ops fell back to the per-sample
 * loop or made the call a loop; an op on either path fails the test unless
 * it is listed below with its reason.  Then: out_dims, nested vmap,
 * randomness, chunk_size, the errors, the trace cache, per-sample
 * gradients (vmap of a function that calls ct_autograd_grad), graph breaks,
 * and torch.func.vmap fixtures (tools/fixtures/gen_vmap.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>
#include <ctorch/func.h>
#include "fixture.h"
#include "test_util.h"
#include "ops/op_table.h"

#define B 3

/* ---- expected fallbacks ------------------------------------------------------ */
/* Table ops that may run per sample (no batching rule, or a form of the op
 * the rule leaves to the loop), and fixture ops whose calls may run as a
 * loop of the function (a graph break), with the reason. */
static const struct {
    const char *op, *reason;
} k_op_fallback[] = {
    {"scatter", "no rule yet (scatter family)"},
    {"scatter_add", "no rule yet (scatter family)"},
    {"scatter_reduce", "no rule yet (scatter family)"},
    {"index_add", "no rule yet (index_* family)"},
    {"index_copy", "no rule yet (index_* family)"},
    {"index_fill", "no rule yet (index_* family)"},
    {"index", "no rule yet (advanced indexing)"},
    {"index_put", "no rule yet (advanced indexing)"},
    {"masked_scatter", "no rule yet"},
    {"index_select", "a batched index (or a 0-dim sample) runs per sample"},
    {"gather", "a 0-dim sample runs per sample"},
    {"einsum", "no rule yet"},
    {"bilinear", "no rule yet"},
    {"tensordot", "no rule yet"},
    {"kron", "no rule yet"},
    {"trace", "no rule yet"},
    {"cross", "no rule yet"},
    {"cdist", "no rule yet"},
    {"interpolate", "no rule yet"},
    {"im2col", "no rule yet"},
    {"col2im", "no rule yet"},
    {"conv", "a batched weight runs per sample"},
    {"conv_transpose", "a batched weight runs per sample"},
    {"histc", "no rule yet"},
    {"bucketize", "batched boundaries run per sample"},
    {"vdot", "complex operands run per sample (no conj op to batch with)"},
    {"randperm", "randomness 'different': each sample its own permutation"},
    {"multinomial", "no rule yet"},
};
#define NOPFB (sizeof k_op_fallback / sizeof k_op_fallback[0])

static const struct {
    const char *op, *reason;
} k_loop[] = {
    {"nonzero", "data-dependent output length: graph break"},
    {"argwhere", "data-dependent output length: graph break"},
    {"masked_select", "data-dependent output length: graph break"},
    {"unique", "data-dependent output length: graph break"},
    {"unique_consecutive", "data-dependent output length: graph break"},
    {"bincount", "data-dependent output length: graph break"},
    {"repeat_interleave_tensor", "data-dependent output length: graph break"},
    {"repeat_interleave", "made outside the op layer's exit points: graph break"},
    {"pad", "made outside the op layer's exit points: graph break"},
    {"one_hot", "num_classes -1 reads the data: graph break"},
    {"histc", "min == max reads the data: graph break"},
    {"index", "a boolean index reads the data: graph break"},
    {"index_put", "a boolean index reads the data: graph break"},
    {"index_put_", "a boolean index reads the data: graph break"},
};
#define NLOOP (sizeof k_loop / sizeof k_loop[0])

/* Fixture ops whose result under vmap is not the loop's by design. */
static const struct {
    const char *op, *reason;
} k_nocompare[] = {
    {"as_strided", "torch's rule: each sample's window starts at the storage offset moved by its batch "
                   "stride, where a loop over sample views reads at the one absolute offset "
                   "(checked in t_as_strided)"},
};

static int g_fb_hits[64], g_loop_hits[64];
static bool op_fallback_ok(const char *op) {
    for (size_t i = 0; i < NOPFB; i++)
        if (strcmp(k_op_fallback[i].op, op) == 0) {
            g_fb_hits[i]++;
            return true;
        }
    return false;
}
static bool loop_ok(const char *op) {
    for (size_t i = 0; i < NLOOP; i++)
        if (strcmp(k_loop[i].op, op) == 0) {
            g_loop_hits[i]++;
            return true;
        }
    return false;
}
static bool no_compare(const char *op) {
    for (size_t i = 0; i < sizeof k_nocompare / sizeof k_nocompare[0]; i++)
        if (strcmp(k_nocompare[i].op, op) == 0) return true;
    return false;
}

/* ---- the tally ---------------------------------------------------------------- */
typedef struct fam_tally {
    int cases, skipped, variants, bitwise, tol;
    int fx_batched, fx_fallback; /* fixture ops: every variant batched / some fell back */
    char fb_ops[2048];           /* table ops that fell back (and looped fixture ops) */
} fam_tally;
static fam_tally g_t;
static char g_fx_seen[512][64];
static bool g_fx_fb[512];
static int g_nfx;
static int g_unexpected;

static void note_fx(const char *op, bool fb) {
    int i = 0;
    while (i < g_nfx && strcmp(g_fx_seen[i], op) != 0) i++;
    if (i == g_nfx && g_nfx < 512) {
        snprintf(g_fx_seen[i], 64, "%s", op);
        g_fx_fb[i] = false;
        g_nfx++;
    }
    if (i < g_nfx && fb) g_fx_fb[i] = true;
}

static void note_fb(const char *what) {
    char key[80];
    snprintf(key, sizeof key, " %s", what);
    if (!strstr(g_t.fb_ops, key) && strlen(g_t.fb_ops) + strlen(key) + 1 < sizeof g_t.fb_ops)
        strcat(g_t.fb_ops, key);
}

/* ---- running a case under vmap --------------------------------------------------- */
typedef struct body_ctx {
    const fx_case *c;
    fx_run_fn run;
} body_ctx;

static ct_status body(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    const body_ctx *x = ctx;
    ct_tensor *o[FX_MAX_T] = {0};
    (void)nin;
    ct_status st = x->run(x->c, in, o);
    for (int k = 0; k < nout && k < FX_MAX_T; k++) out[k] = o[k];
    return st;
}

/* sample b of t: its values rolled by b elements (flattened) */
static ct_tensor *sample(ct_tensor *t, int b) {
    if (b == 0 || ct_numel(t) <= 1) return ct_clone(t);
    ct_tensor *f = ct_flatten(ct_contiguous(t), 0, -1);
    int64_t sh = b;
    int64_t d = 0;
    return ct_contiguous(ct_reshape(ct_roll(f, &sh, 1, &d, 1), ct_sizes(t), ct_ndim(t)));
}

static bool same_bits(ct_tensor *a, ct_tensor *b) {
    if (ct_get_dtype(a) != ct_get_dtype(b) || ct_ndim(a) != ct_ndim(b)) return false;
    if (memcmp(ct_sizes(a), ct_sizes(b), sizeof(int64_t) * (size_t)ct_ndim(a)) != 0) return false;
    ct_tensor *ca = ct_contiguous(a), *cb = ct_contiguous(b);
    size_t n = (size_t)ct_numel(a) * ct_dtype_size(ct_get_dtype(a));
    return n == 0 || memcmp(ct_data_ptr(ca), ct_data_ptr(cb), n) == 0;
}

static bool is_random_case(const fx_case *c) {
    (void)c;
    return false;
}

static int g_family_random; /* the random family runs with randomness 'different' */

/* One variant: in_dims dims[k] (CT_VMAP_NONE: unbatched).  0 passed, 1
 * failed, -1 skipped (the loop over the samples fails: outside the op's
 * domain). */
static int run_variant(const fx_case *c, const fx_op *op, ct_tensor *const *ins, const int64_t *dims,
                       const char *vname) {
    int nin = c->nin, nout = c->nout;
    ct_tensor *smp[FX_MAX_T][B], *bat[FX_MAX_T], *lbat[FX_MAX_T];
    for (int k = 0; k < nin; k++) {
        for (int b = 0; b < B; b++) smp[k][b] = dims[k] == CT_VMAP_NONE ? ins[k] : sample(ins[k], b);
        /* the loop reads samples out of a batch of its own with the same layout (the
         * per-sample views vmap's function sees: in-place ops write into them) */
        bat[k] = dims[k] == CT_VMAP_NONE ? ins[k] : ct_stack(smp[k], B, dims[k]);
        lbat[k] = dims[k] == CT_VMAP_NONE ? ins[k] : ct_stack(smp[k], B, dims[k]);
        if (!bat[k] || !lbat[k]) {
            ct_clear_error();
            return -1;
        }
    }
    /* the loop */
    ct_tensor *lo[B][FX_MAX_T];
    for (int b = 0; b < B; b++) {
        ct_tensor *si[FX_MAX_T];
        for (int k = 0; k < nin; k++) si[k] = dims[k] == CT_VMAP_NONE ? ins[k] : ct_select(lbat[k], dims[k], b);
        for (int j = 0; j < FX_MAX_T; j++) lo[b][j] = NULL;
        if (g_family_random) ct_manual_seed(FX_COMPILE_SEED);
        ct_clear_error();
        if (op->run(c, si, lo[b]) != CT_OK) {
            ct_clear_error();
            return -1;
        }
    }
    ct_tensor *expct[FX_MAX_T];
    for (int j = 0; j < nout; j++) {
        ct_tensor *col[B] = {lo[0][j], lo[1][j], lo[2][j]};
        if (!(expct[j] = ct_stack(col, B, 0))) {
            ct_clear_error();
            return -1;
        }
    }
    /* vmap */
    body_ctx bx = {c, op->run};
    ct_func *f = ct_func_new(body, &bx);
    ct_vmap_opts o = CT_VMAP_DEFAULT;
    o.in_dims = dims;
    o.n_in_dims = nin;
    o.randomness = g_family_random ? CT_VMAP_DIFFERENT : CT_VMAP_ERROR;
    ct_func *vf = ct_vmap(f, &o);
    ct_vmap_reset_stats();
    ct_tensor *got[FX_MAX_T] = {0};
    if (g_family_random) ct_manual_seed(FX_COMPILE_SEED);
    ct_status st = ct_func_call(vf, bat, nin, got, nout);
    ct_func_free(vf);
    ct_func_free(f);
    if (st != CT_OK) {
        fprintf(stderr, "  FAIL %s/%s (line %d) [vmap %s]: %s: %s\n", c->op, c->label, c->line, vname,
                ct_status_name(st), ct_last_error());
        ct_clear_error();
        return 1;
    }
    int fails = 0;
    double rtol = fx_f(c, "cmp_rtol", op->rtol), atol = fx_f(c, "cmp_atol", op->atol);
    for (int j = 0; j < nout && no_compare(c->op); j++) /* ran; its values are checked elsewhere */
        if (!got[j] || ct_ndim(got[j]) != ct_ndim(expct[j])) fails++;
    for (int j = 0; j < nout && !no_compare(c->op); j++) {
        if (same_bits(got[j], expct[j])) {
            g_t.bitwise++;
            continue;
        }
        ct_dtype dt = ct_get_dtype(expct[j]);
        double rt = rtol, at = atol;
        if (rt == 0 && at == 0) {
            if (dt == CT_F32 || dt == CT_C64) { rt = 1e-5; at = 1e-6; }
            else if (dt == CT_F16 || dt == CT_BF16) { rt = 1e-2; at = 1e-3; }
            else { rt = 1e-10; at = 1e-12; }
        }
        bool shape_ok = ct_get_dtype(got[j]) == dt && ct_ndim(got[j]) == ct_ndim(expct[j]) &&
                        memcmp(ct_sizes(got[j]), ct_sizes(expct[j]), sizeof(int64_t) * (size_t)ct_ndim(got[j])) == 0;
        int ok = shape_ok && (ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt)) ? ct_allclose(got[j], expct[j], rt, at, true)
                                                                                   : 0;
        if (ok == 1) {
            g_t.tol++;
            continue;
        }
        char *sg = ct_to_string(got[j]), *se = ct_to_string(expct[j]);
        fprintf(stderr, "  FAIL %s/%s (line %d) [vmap %s] out %d: differs from the loop\n    got:      %.600s\n"
                "    expected: %.600s\n", c->op, c->label, c->line, vname, j, sg ? sg : "?", se ? se : "?");
        free(sg);
        free(se);
        ct_clear_error();
        fails++;
    }
    /* which paths ran */
    bool fb = false;
    for (int i = 0; i < CT_OP_COUNT; i++) {
        if (ct_vmap_op_fallbacks(ct__op_info[i].name) <= 0) continue;
        fb = true;
        note_fb(ct__op_info[i].name);
        if (!op_fallback_ok(ct__op_info[i].name)) {
            fprintf(stderr, "  FAIL %s/%s (line %d) [vmap %s]: op %s ran per sample (not expected)\n", c->op,
                    c->label, c->line, vname, ct__op_info[i].name);
            g_unexpected++;
            fails++;
        }
    }
    if (ct_vmap_get_stats().loop_calls > 0) {
        fb = true;
        char w[80];
        snprintf(w, sizeof w, "loop:%s", c->op);
        note_fb(w);
        if (!loop_ok(c->op)) {
            fprintf(stderr, "  FAIL %s/%s (line %d) [vmap %s]: the call ran as a loop (not expected): %s\n",
                    c->op, c->label, c->line, vname, ct_vmap_last_loop_reason());
            g_unexpected++;
            fails++;
        }
    }
    note_fx(c->op, fb);
    g_t.variants++;
    return fails ? 1 : 0;
}

static int vmap_check(const fx_case *c, const fx_op *op, ct_tensor *const *ins) {
    if (c->nin == 0 || is_random_case(c)) {
        g_t.skipped++;
        return 0;
    }
    g_t.cases++;
    int fails = 0;
    static const int64_t variants[3] = {0, 1, -1};
    static const char *vnames[3] = {"in_dims 0", "in_dims 1", "in_dims -1"};
    for (int v = 0; v < 4; v++) {
        if (v == 3 && c->nin < 2) break;
        int64_t dims[FX_MAX_T];
        for (int k = 0; k < c->nin; k++) {
            int nd = ct_ndim(ins[k]) + 1; /* the stacked input's dims */
            int64_t d = v == 3 ? 0 : variants[v];
            if (d >= nd) d = nd - 1;
            dims[k] = v == 3 && k > 0 ? CT_VMAP_NONE : d;
        }
        ct_scope s = ct_scope_begin();
        int r = run_variant(c, op, ins, dims, v == 3 ? "in_dims (0, None...)" : vnames[v]);
        ct_scope_end(s);
        if (r > 0) fails++;
    }
    ct_clear_error();
    return fails ? 1 : 0;
}

#define FAMILY(name)                                                                          \
    extern const fx_op fx_ops_##name[];                                                       \
    extern const int fx_nops_##name;                                                          \
    static void test_##name(void **state) {                                                   \
        (void)state;                                                                          \
        memset(&g_t, 0, sizeof g_t);                                                          \
        g_nfx = 0;                                                                            \
        g_family_random = strcmp(#name, "random") == 0;                                       \
        fx_set_vmap_check(vmap_check);                                                        \
        int f = fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, fx_nops_##name);  \
        fx_set_vmap_check(NULL);                                                              \
        int nb = 0, nf = 0;                                                                   \
        for (int i = 0; i < g_nfx; i++) { if (g_fx_fb[i]) nf++; else nb++; }                    \
        printf("vmap %-12s %4d cases (%d without inputs skipped), %4d variants: %4d outputs bitwise, " \
               "%3d at tolerance; fixture ops %3d batched, %2d with fallbacks:%s\n",          \
               #name, g_t.cases, g_t.skipped, g_t.variants, g_t.bitwise, g_t.tol, nb, nf,     \
               g_t.fb_ops[0] ? g_t.fb_ops : " none");                                         \
        assert_int_equal(f, 0);                                                               \
    }
#include "ops_families.h"
#undef FAMILY

/* ---- unit tests ------------------------------------------------------------------ */
static ct_status f_mv(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_mv(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_basic(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(1);
    ct_tensor *m = ct_randn((int64_t[]){3, 4}, 2, CT_F32), *vs = ct_randn((int64_t[]){8, 4}, 2, CT_F32);
    ct_func *fn = ct_func_new(f_mv, NULL);
    ct_vmap_opts o = CT_VMAP_DEFAULT;
    o.in_dims = (int64_t[]){CT_VMAP_NONE, 0};
    o.n_in_dims = 2;
    ct_func *bf = ct_vmap(fn, &o);
    ct_tensor *y = NULL;
    ct_vmap_reset_stats();
    assert_int_equal(ct_func_call(bf, (ct_tensor *[]){m, vs}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_ndim(y), 2);
    assert_int_equal(ct_sizes(y)[0], 8);
    assert_int_equal(ct_sizes(y)[1], 3);
    ct_tensor *ref = ct_transpose(ct_matmul(m, ct_transpose(vs, 0, 1)), 0, 1);
    assert_int_equal(ct_allclose(y, ref, 1e-5, 1e-6, false), 1);
    assert_int_equal(ct_vmap_op_batched("mv"), 1);
    assert_int_equal(ct_vmap_get_stats().fallback_ops, 0);
    /* the trace is cached per signature */
    assert_int_equal(ct_func_call(bf, (ct_tensor *[]){m, vs}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().traces, 1);
    ct_func_free(bf);
    ct_func_free(fn);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_basic),
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
