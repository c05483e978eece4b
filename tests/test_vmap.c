/* test_vmap.c -- ct_vmap (func.h, issue 20 item 3): batching rules, not a
 * loop.
 *
 * The op fixtures: every case of every family (tests/ops_families.h, the
 * tables test_ops runs) with inputs is rerun under vmap over a batch of
 * NB = 3 samples -- sample 0 the case's inputs, samples 1 and 2 the same
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
#include "ops/fused_rows.h"

#define NB 3

/* ---- expected fallbacks ------------------------------------------------------ */
/* Table ops that may run per sample (no batching rule, or a form of the op
 * the rule leaves to the loop), and fixture ops whose calls may run as a
 * loop of the function (a graph break), with the reason. */
static const struct {
    const char *op, *reason;
} k_op_fallback[] = {
    {"vdot", "complex operands run sample by sample through ct_vdot (no conj op to batch with)"},
    {"index_put", "sample by sample through ct_index_put (advanced indexing's result layout)"},
};
#define NOPFB (sizeof k_op_fallback / sizeof k_op_fallback[0])

static const struct {
    const char *op, *reason;
} k_loop[] = {
    {"masked_select", "a mask that is an unbatched input is read: graph break"},
    {"bincount", "data-dependent output length: graph break (torch's fallback loops too)"},
    {"repeat_interleave_tensor", "unbatched repeats that are an input are read: graph break"},
    {"repeat_interleave", "made outside the op layer's exit points: graph break"},
    {"pad", "made outside the op layer's exit points: graph break"},
    {"histc", "min == max reads the data: graph break (torch's fallback loops too)"},
    {"index", "an unbatched boolean index that is an input is read: graph break"},
    {"index_put", "an unbatched boolean index that is an input is read: graph break"},
};
#define NLOOP (sizeof k_loop / sizeof k_loop[0])

/* Fixture ops that are an error under vmap when the values they read are
 * batched (a data-dependent output shape: torch.func raises as well): the
 * message must name the op (`named`, the public op that read the values)
 * and say why. */
static const struct {
    const char *op, *named;
} k_dynamic[] = {
    {"nonzero", "nonzero"},     {"argwhere", "nonzero"}, {"unique", "unique"},
    {"masked_select", "masked_select"}, {"repeat_interleave_tensor", "repeat_interleave"},
    {"one_hot", "one_hot"},     {"index", "index"},
};
#define NDYN (sizeof k_dynamic / sizeof k_dynamic[0])
static int g_dyn_hits[NDYN];
/* st/msg of a failed vmap call: the expected error of a dynamic op */
static bool dynamic_error_ok(const char *op, ct_status st, const char *msg) {
    for (size_t i = 0; i < NDYN; i++)
        if (strcmp(k_dynamic[i].op, op) == 0) {
            char want[96];
            snprintf(want, sizeof want, "vmap: %s: ", k_dynamic[i].named);
            if (st == CT_ERR_ARG && strstr(msg, want) && strstr(msg, "data-dependent")) {
                g_dyn_hits[i]++;
                return true;
            }
        }
    return false;
}

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
    char key[100];
    snprintf(key, sizeof key, " %.90s", what);
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
                       int64_t od, const char *vname) {
    int nin = c->nin, nout = c->nout;
    ct_tensor *smp[FX_MAX_T][NB], *bat[FX_MAX_T], *lbat[FX_MAX_T];
    for (int k = 0; k < nin; k++) {
        for (int b = 0; b < NB; b++) smp[k][b] = dims[k] == CT_VMAP_NONE ? ins[k] : sample(ins[k], b);
        /* the loop reads samples out of a batch of its own with the same layout (the
         * per-sample views vmap's function sees: in-place ops write into them) */
        bat[k] = dims[k] == CT_VMAP_NONE ? ins[k] : ct_stack(smp[k], NB, dims[k]);
        lbat[k] = dims[k] == CT_VMAP_NONE ? ins[k] : ct_stack(smp[k], NB, dims[k]);
        if (!bat[k] || !lbat[k]) {
            ct_clear_error();
            return -1;
        }
    }
    /* the loop */
    ct_tensor *lo[NB][FX_MAX_T];
    for (int b = 0; b < NB; b++) {
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
        ct_tensor *col[NB] = {lo[0][j], lo[1][j], lo[2][j]};
        if (!(expct[j] = ct_stack(col, NB, 0)) || (od != 0 && !(expct[j] = ct_movedim(expct[j], 0, od)))) {
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
    o.out_dims = &od;
    o.n_out_dims = 1;
    o.randomness = g_family_random ? CT_VMAP_DIFFERENT : CT_VMAP_ERROR;
    ct_func *vf = ct_vmap(f, &o);
    ct_vmap_reset_stats();
    ct_tensor *got[FX_MAX_T] = {0};
    if (g_family_random) ct_manual_seed(FX_COMPILE_SEED);
    ct_status st = ct_func_call(vf, bat, nin, got, nout);
    ct_func_free(vf);
    ct_func_free(f);
    if (st != CT_OK && dynamic_error_ok(c->op, st, ct_last_error())) {
        ct_clear_error();
        g_t.variants++;
        return 0;
    }
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
        if (getenv("VMAP_LOOPS")) fprintf(stderr, "LOOP %s/%s: %s\n", c->op, c->label, ct_vmap_last_loop_reason());
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
    static const int64_t variants[5] = {0, 1, -1, 0, -1};
    static const char *vnames[5] = {"in_dims 0", "in_dims 1", "in_dims -1", "in_dims (0, None...)",
                                    "in_dims -1, out_dims -1"};
    for (int v = 0; v < 5; v++) {
        if (v == 3 && c->nin < 2) continue;
        int64_t dims[FX_MAX_T];
        for (int k = 0; k < c->nin; k++) {
            int nd = ct_ndim(ins[k]) + 1; /* the stacked input's dims */
            int64_t d = v == 3 ? 0 : variants[v];
            if (d >= nd) d = nd - 1;
            dims[k] = v == 3 && k > 0 ? CT_VMAP_NONE : d;
        }
        ct_scope s = ct_scope_begin();
        int r = run_variant(c, op, ins, dims, v == 4 ? -1 : 0, vnames[v]);
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
/* helpers: a vmapped call with in_dims / out_dims given inline */
static ct_status vcall(ct_fn fn, void *ctx, const int64_t *ind, int nind, const int64_t *outd, int noutd,
                       ct_vmap_randomness rnd, int64_t chunk, ct_tensor *const *in, int nin, ct_tensor **out,
                       int nout) {
    ct_func *f = ct_func_new(fn, ctx);
    ct_vmap_opts o = {ind, nind, outd, noutd, rnd, chunk};
    ct_func *vf = ct_vmap(f, &o);
    ct_status st = vf ? ct_func_call(vf, in, nin, out, nout) : ct_last_error_code();
    ct_func_free(vf);
    ct_func_free(f);
    return st;
}

static void assert_close(ct_tensor *a, ct_tensor *b, double rtol, double atol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_ndim(a), ct_ndim(b));
    for (int d = 0; d < ct_ndim(a); d++) assert_int_equal(ct_sizes(a)[d], ct_sizes(b)[d]);
    if (ct_allclose(a, b, rtol, atol, true) != 1) {
        char *sa = ct_to_string(a), *sb = ct_to_string(b);
        fail_msg("differ:\n%s\n%s", sa, sb);
    }
}

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
    ct_tensor *ref = ct_transpose(ct_matmul(m, ct_transpose(vs, 0, 1)), 0, 1);
    assert_close(y, ref, 1e-5, 1e-6);
    assert_int_equal(ct_vmap_op_batched("mv"), 1);
    assert_int_equal(ct_vmap_get_stats().fallback_ops, 0);
    /* the trace is cached per signature: a second call does not retrace, a new
     * per-sample shape does, a new batch size does not */
    assert_int_equal(ct_func_call(bf, (ct_tensor *[]){m, vs}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().traces, 1);
    ct_tensor *vs5 = ct_randn((int64_t[]){5, 4}, 2, CT_F32);
    assert_int_equal(ct_func_call(bf, (ct_tensor *[]){m, vs5}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().traces, 1);
    assert_int_equal(ct_sizes(y)[0], 5);
    ct_tensor *m2 = ct_randn((int64_t[]){2, 4}, 2, CT_F32);
    assert_int_equal(ct_func_call(bf, (ct_tensor *[]){m2, vs}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().traces, 2);
    assert_int_equal(ct_vmap_get_stats().calls, 4);
    ct_func_free(bf);
    ct_func_free(fn);
    SCOPE_END;
}

/* two outputs: sin(x) and a constant that does not depend on x */
static ct_status f_two(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sin(in[0]);
    out[1] = ct_ones((int64_t[]){2}, 1, CT_F32);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static void t_out_dims(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(2);
    ct_tensor *x = ct_randn((int64_t[]){5, 3, 4}, 3, CT_F32), *y[2];
    /* out_dims 1 and -1 */
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){1, -1}, 2, CT_VMAP_ERROR, 0, &x, 1, y, 2), CT_OK);
    assert_close(y[0], ct_movedim(ct_sin(x), 0, 1), 0, 0);
    /* the constant expanded along its out_dim, as torch */
    assert_int_equal(ct_ndim(y[1]), 2);
    assert_int_equal(ct_sizes(y[1])[0], 2);
    assert_int_equal(ct_sizes(y[1])[1], 5);
    assert_close(y[1], ct_ones((int64_t[]){2, 5}, 2, CT_F32), 0, 0);
    /* out_dims None for the constant: returned as it is */
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){0, CT_VMAP_NONE}, 2, CT_VMAP_ERROR, 0, &x, 1, y, 2),
                     CT_OK);
    assert_int_equal(ct_ndim(y[1]), 1);
    /* out_dims None for an output with a batch dim: torch's error */
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){CT_VMAP_NONE}, 1, CT_VMAP_ERROR, 0, &x, 1, y, 2),
                     CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "cannot be unbatched"));
    ct_clear_error();
    /* out of range: an output of 2 dims per sample takes out_dim in [-3, 2] */
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){3, 0}, 2, CT_VMAP_ERROR, 0, &x, 1, y, 2),
                     CT_ERR_INDEX);
    assert_non_null(strstr(ct_last_error(), "out_dim 3 is out of range"));
    ct_clear_error();
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){-3, 0}, 2, CT_VMAP_ERROR, 0, &x, 1, y, 2), CT_OK);
    assert_close(y[0], ct_sin(x), 0, 0);
    SCOPE_END;
}

/* dot of two vectors, vmapped twice: a [4, 5, 3] batch of batches */
static ct_status f_dot(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_dot(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_nested(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(3);
    ct_tensor *a = ct_randn((int64_t[]){4, 5, 3}, 3, CT_F64), *b = ct_randn((int64_t[]){5, 3}, 2, CT_F64);
    ct_func *f = ct_func_new(f_dot, NULL);
    ct_vmap_opts oi = {(int64_t[]){0, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0};   /* inner: over the 5 */
    ct_vmap_opts oo = {(int64_t[]){0, CT_VMAP_NONE}, 2, (int64_t[]){1}, 1, CT_VMAP_ERROR, 0}; /* outer: the 4 */
    ct_func *inner = ct_vmap(f, &oi), *outer = ct_vmap(inner, &oo);
    ct_func_free(inner); /* the outer function holds it */
    ct_tensor *y = NULL;
    ct_vmap_reset_stats();
    assert_int_equal(ct_func_call(outer, (ct_tensor *[]){a, b}, 2, &y, 1), CT_OK);
    /* the loop: y[j, i] = dot(a[i, j], b[j]) (out_dims 1 puts the outer batch second) */
    ct_tensor *ref = ct_empty((int64_t[]){5, 4}, 2, CT_F64);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            assert_non_null(ct_fill_(ct_select(ct_select(ref, 0, j), 0, i),
                                     ct_item(ct_dot(ct_select(ct_select(a, 0, i), 0, j), ct_select(b, 0, j)))));
    assert_close(y, ref, 1e-12, 1e-12);
    /* each op ran once, batched (the inner vmap's ops recorded into the outer trace) */
    assert_int_equal(ct_vmap_get_stats().fallback_ops, 0);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 0);
    assert_true(ct_vmap_op_batched("dot") + ct_vmap_op_batched("matmul") >= 1);
    ct_func_free(outer);
    ct_func_free(f);
    SCOPE_END;
}

/* x + a draw: a factory (rand) and an in-place sampler on a clone */
static ct_status f_rand(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *r = ct_rand((int64_t[]){4}, 1, CT_F32);
    ct_tensor *u = ct_uniform_(ct_clone(in[0]), 0, 1);
    out[0] = ct_add(ct_add(in[0], r), u);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_bern(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_bernoulli(in[0]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_randomness(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_zeros((int64_t[]){6, 4}, 2, CT_F32), *y;
    /* error (the default) */
    assert_int_equal(vcall(f_rand, NULL, NULL, 0, NULL, 0, CT_VMAP_ERROR, 0, &x, 1, &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "randomness is 'error'"));
    ct_clear_error();
    /* different: the rows differ; same: every row equal */
    assert_int_equal(vcall(f_rand, NULL, NULL, 0, NULL, 0, CT_VMAP_DIFFERENT, 0, &x, 1, &y, 1), CT_OK);
    assert_int_equal(ct_equal(ct_select(y, 0, 0), ct_select(y, 0, 1)), 0);
    assert_true(ct_item(ct_amin(y, NULL, 0, false)) >= 0 && ct_item(ct_amax(y, NULL, 0, false)) < 2);
    assert_int_equal(vcall(f_rand, NULL, NULL, 0, NULL, 0, CT_VMAP_SAME, 0, &x, 1, &y, 1), CT_OK);
    for (int b = 1; b < 6; b++) assert_int_equal(ct_equal(ct_select(y, 0, 0), ct_select(y, 0, b)), 1);
    assert_int_equal(ct_equal(ct_select(ct_select(y, 0, 0), 0, 0), ct_select(ct_select(y, 0, 0), 0, 1)), 0);
    /* bernoulli(p): different draws with batched p; same refuses a batched p */
    ct_tensor *p = ct_full((int64_t[]){6, 200}, 2, 0.5, CT_F32);
    assert_int_equal(vcall(f_bern, NULL, NULL, 0, NULL, 0, CT_VMAP_DIFFERENT, 0, &p, 1, &y, 1), CT_OK);
    assert_int_equal(ct_equal(ct_select(y, 0, 0), ct_select(y, 0, 1)), 0);
    double mean = ct_item(ct_mean(y, NULL, 0, false));
    assert_true(mean > 0.4 && mean < 0.6);
    assert_int_equal(vcall(f_bern, NULL, NULL, 0, NULL, 0, CT_VMAP_SAME, 0, &p, 1, &y, 1), CT_ERR_ARG);
    ct_clear_error();
    SCOPE_END;
}

/* softmax(x @ w) with w shared */
static ct_status f_sm(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_softmax(ct_matmul(in[0], in[1]), -1);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_chunk(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(4);
    ct_tensor *x = ct_randn((int64_t[]){7, 2, 3}, 3, CT_F64), *w = ct_randn((int64_t[]){3, 5}, 2, CT_F64), *y0, *y3;
    int64_t ind[2] = {0, CT_VMAP_NONE};
    assert_int_equal(vcall(f_sm, NULL, ind, 2, NULL, 0, CT_VMAP_ERROR, 0, (ct_tensor *[]){x, w}, 2, &y0, 1), CT_OK);
    ct_vmap_reset_stats();
    assert_int_equal(vcall(f_sm, NULL, ind, 2, (int64_t[]){2}, 1, CT_VMAP_ERROR, 3, (ct_tensor *[]){x, w}, 2, &y3, 1),
                     CT_OK);
    /* three chunks (3 + 3 + 1), one signature traced (the batch size is not part of
     * it), each op once per chunk */
    assert_int_equal(ct_vmap_get_stats().traces, 1);
    assert_int_equal(ct_vmap_op_batched("softmax"), 3);
    assert_close(y3, ct_movedim(y0, 0, 2), 0, 0);
    SCOPE_END;
}

static ct_status f_add_(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_add_(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_sin(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sin(in[0]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *a = ct_zeros((int64_t[]){3, 4}, 2, CT_F32), *b = ct_zeros((int64_t[]){4, 4}, 2, CT_F32), *y;
    /* mismatched batch sizes */
    assert_int_equal(vcall(f_add_, NULL, NULL, 0, NULL, 0, CT_VMAP_ERROR, 0, (ct_tensor *[]){a, b}, 2, &y, 1),
                     CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "same size in the mapped dim, got 3 (input 0, dim 0) and 4"));
    ct_clear_error();
    /* in_dim out of range */
    assert_int_equal(vcall(f_sin, NULL, (int64_t[]){2}, 1, NULL, 0, CT_VMAP_ERROR, 0, &a, 1, &y, 1), CT_ERR_INDEX);
    assert_non_null(strstr(ct_last_error(), "in_dim 2 for input 0 is out of range"));
    ct_clear_error();
    assert_int_equal(vcall(f_sin, NULL, (int64_t[]){-3}, 1, NULL, 0, CT_VMAP_ERROR, 0, &a, 1, &y, 1), CT_ERR_INDEX);
    ct_clear_error();
    /* no batched input */
    assert_int_equal(vcall(f_sin, NULL, (int64_t[]){CT_VMAP_NONE}, 1, NULL, 0, CT_VMAP_ERROR, 0, &a, 1, &y, 1),
                     CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "at least one input must be batched"));
    ct_clear_error();
    /* in_dims / out_dims of the wrong length */
    assert_int_equal(vcall(f_sin, NULL, (int64_t[]){0, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0, &a, 1, &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "in_dims has 2 entries"));
    ct_clear_error();
    assert_int_equal(vcall(f_two, NULL, NULL, 0, (int64_t[]){0, 0, 0}, 3, CT_VMAP_ERROR, 0, &a, 1, (ct_tensor *[]){NULL, NULL}, 2),
                     CT_ERR_ARG);
    ct_clear_error();
    /* a NULL input */
    ct_tensor *nul = NULL;
    assert_int_equal(vcall(f_sin, NULL, NULL, 0, NULL, 0, CT_VMAP_ERROR, 0, &nul, 1, &y, 1), CT_ERR_NULL);
    ct_clear_error();
    /* an in-place op writing a batched value into an unbatched tensor */
    ct_tensor *c = ct_zeros((int64_t[]){4}, 1, CT_F32);
    assert_int_equal(vcall(f_add_, NULL, (int64_t[]){CT_VMAP_NONE, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){c, a}, 2, &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "in-place"));
    ct_clear_error();
    /* ... and into a batched one: the caller's tensor is written, as torch */
    ct_tensor *ones = ct_ones((int64_t[]){4}, 1, CT_F32);
    assert_int_equal(vcall(f_add_, NULL, (int64_t[]){0, CT_VMAP_NONE}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){a, ones}, 2, &y, 1), CT_OK);
    assert_close(a, ct_ones((int64_t[]){3, 4}, 2, CT_F32), 0, 0);
    /* bad options */
    ct_func *f = ct_func_new(f_sin, NULL);
    ct_vmap_opts o = CT_VMAP_DEFAULT;
    o.chunk_size = -1;
    expect_err(ct_vmap(f, &o), CT_ERR_ARG, "chunk_size");
    o = CT_VMAP_DEFAULT;
    o.randomness = (ct_vmap_randomness)7;
    expect_err(ct_vmap(f, &o), CT_ERR_ARG, "randomness");
    o = CT_VMAP_DEFAULT;
    o.n_in_dims = 1;
    expect_err(ct_vmap(f, &o), CT_ERR_ARG, "in_dims");
    expect_err(ct_vmap(NULL, NULL), CT_ERR_NULL, "NULL");
    ct_func_free(f);
    SCOPE_END;
}

/* x * sum(x) read as a number: a graph break, so the call runs as a loop */
static ct_status f_item(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    double s = ct_item(ct_sum(in[0], NULL, 0, false));
    out[0] = ct_mul_scalar(in[0], s);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_graph_break(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_arange(0, 6, 1, CT_F32), *y;
    x = ct_reshape(x, (int64_t[]){2, 3}, 2);
    ct_vmap_reset_stats();
    assert_int_equal(vcall(f_item, NULL, NULL, 0, NULL, 0, CT_VMAP_ERROR, 0, &x, 1, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 1);
    assert_non_null(strstr(ct_vmap_last_loop_reason(), "graph break"));
    /* row 0: [0,1,2] * 3, row 1: [3,4,5] * 12 */
    float want[6] = {0, 3, 6, 36, 48, 60};
    assert_close(y, ct_from_array(want, (int64_t[]){2, 3}, 2, CT_F32), 0, 0);
    SCOPE_END;
}

/* as_strided under vmap: each sample's window at its own offset (torch's rule) */
static ct_status f_window(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_as_strided(in[0], (int64_t[]){2, 2}, (int64_t[]){2, 1}, 2, 1);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_as_strided(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_reshape(ct_arange(0, 12, 1, CT_F32), (int64_t[]){2, 6}, 2), *y;
    assert_int_equal(vcall(f_window, NULL, NULL, 0, NULL, 0, CT_VMAP_ERROR, 0, &x, 1, &y, 1), CT_OK);
    float want[8] = {1, 2, 3, 4, 7, 8, 9, 10};
    assert_close(y, ct_from_array(want, (int64_t[]){2, 2, 2}, 3, CT_F32), 0, 0);
    SCOPE_END;
}

/* ---- per-sample gradients: vmap of a function that calls ct_autograd_grad ---- */
/* the gradient of mse(linear(x, w, b), t) with respect to w and b, for one sample */
static ct_status f_mlp_grad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *w = ct_detach(in[0]), *b = ct_detach(in[1]);
    if (!w || !b || ct_set_requires_grad(w, true) || ct_set_requires_grad(b, true)) return ct_last_error_code();
    ct_tensor *h = ct_tanh(ct_linear(in[2], w, b));
    ct_tensor *loss = ct_mse_loss(h, in[3], CT_REDUCTION_SUM);
    if (!loss) return ct_last_error_code();
    ct_tensor *g[2];
    ct_status st = ct_autograd_grad(&loss, 1, (ct_tensor *[]){w, b}, 2, NULL, false, false, false, g);
    out[0] = g[0];
    out[1] = g[1];
    return st;
}

static void t_per_sample_grads(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(5);
    int64_t B = 6;
    ct_tensor *w = ct_randn((int64_t[]){3, 4}, 2, CT_F64), *b = ct_randn((int64_t[]){3}, 1, CT_F64);
    ct_tensor *x = ct_randn((int64_t[]){B, 4}, 2, CT_F64), *t = ct_randn((int64_t[]){B, 3}, 2, CT_F64);
    ct_tensor *g[2];
    int64_t ind[4] = {CT_VMAP_NONE, CT_VMAP_NONE, 0, 0};
    ct_vmap_reset_stats();
    assert_int_equal(vcall(f_mlp_grad, NULL, ind, 4, NULL, 0, CT_VMAP_ERROR, 0, (ct_tensor *[]){w, b, x, t}, 4, g, 2),
                     CT_OK);
    assert_int_equal(ct_ndim(g[0]), 3);
    assert_int_equal(ct_sizes(g[0])[0], B);
    for (int64_t i = 0; i < B; i++) {
        ct_tensor *gi[2];
        assert_int_equal(f_mlp_grad((ct_tensor *[]){w, b, ct_select(x, 0, i), ct_select(t, 0, i)}, 4, gi, 2, NULL), CT_OK);
        assert_close(ct_select(g[0], 0, i), gi[0], 1e-12, 1e-12);
        assert_close(ct_select(g[1], 0, i), gi[1], 1e-12, 1e-12);
    }
    /* every op of the forward and the backward ran batched */
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (ct_vmap_op_fallbacks(ct__op_info[i].name) > 0) fail_msg("op %s ran per sample", ct__op_info[i].name);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 0);
    SCOPE_END;
}

/* a small CNN's per-sample gradients: conv -> relu -> max_pool -> linear -> cross_entropy */
static ct_status f_cnn_grad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *cw = ct_detach(in[0]), *cb = ct_detach(in[1]), *lw = ct_detach(in[2]);
    if (ct_set_requires_grad(cw, true) || ct_set_requires_grad(cb, true) || ct_set_requires_grad(lw, true))
        return ct_last_error_code();
    ct_tensor *x = ct_unsqueeze(in[3], 0); /* one sample [1, C, H, W] */
    ct_tensor *h = ct_conv2d(x, cw, cb, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, 1);
    h = ct_max_pool2d(ct_relu(h), (int64_t[]){2, 2}, (int64_t[]){2, 2}, (int64_t[]){0, 0}, (int64_t[]){1, 1},
                      false, NULL);
    ct_tensor *logits = ct_linear(ct_flatten(h, 1, -1), lw, NULL);
    ct_tensor *loss = ct_cross_entropy(logits, ct_unsqueeze(in[4], 0), NULL);
    if (!loss) return ct_last_error_code();
    ct_tensor *g[3];
    ct_status st = ct_autograd_grad(&loss, 1, (ct_tensor *[]){cw, cb, lw}, 3, NULL, false, false, false, g);
    for (int k = 0; k < 3; k++) out[k] = g[k];
    return st;
}

/* the conv has 4 -> 8 channels on 6x6 images and the batch is 8: its
 * per-sample weight gradients take the CPU's grouped kernel
 * (conv_wgrad_groups: a group per thread, 8 channels and 36 column rows
 * per group), in f64 (BLAS) and f32 (ctorch's own GEMM) */
static void t_per_sample_cnn(void **state) {
    (void)state;
    for (int d = 0; d < 2; d++) {
        SCOPE_BEGIN;
        ct_dtype dt = d == 0 ? CT_F64 : CT_F32;
        double rtol = d == 0 ? 1e-10 : 1e-4, atol = d == 0 ? 1e-12 : 1e-5;
        ct_manual_seed(6);
        int64_t B = 8;
        ct_tensor *cw = ct_randn((int64_t[]){8, 4, 3, 3}, 4, dt), *cb = ct_randn((int64_t[]){8}, 1, dt);
        ct_tensor *lw = ct_randn((int64_t[]){5, 8 * 3 * 3}, 2, dt);
        ct_tensor *x = ct_randn((int64_t[]){B, 4, 6, 6}, 4, dt);
        ct_tensor *t = ct_from_array((int64_t[]){0, 3, 4, 1, 2, 2, 0, 4}, (int64_t[]){B}, 1, CT_I64);
        ct_tensor *g[3];
        int64_t ind[5] = {CT_VMAP_NONE, CT_VMAP_NONE, CT_VMAP_NONE, 0, 0};
        ct_vmap_reset_stats();
        assert_int_equal(vcall(f_cnn_grad, NULL, ind, 5, NULL, 0, CT_VMAP_ERROR, 0, (ct_tensor *[]){cw, cb, lw, x, t}, 5, g, 3),
                         CT_OK);
        for (int64_t i = 0; i < B; i++) {
            ct_tensor *gi[3];
            assert_int_equal(f_cnn_grad((ct_tensor *[]){cw, cb, lw, ct_select(x, 0, i), ct_select(t, 0, i)}, 5, gi, 3, NULL),
                             CT_OK);
            for (int k = 0; k < 3; k++) assert_close(ct_select(g[k], 0, i), gi[k], rtol, atol);
        }
        int fb = 0;
        for (int i = 0; i < CT_OP_COUNT; i++)
            if (ct_vmap_op_fallbacks(ct__op_info[i].name) > 0) {
                printf("per-sample CNN gradients: op %s ran per sample\n", ct__op_info[i].name);
                fb++;
            }
        assert_int_equal(fb, 0);
        assert_int_equal(ct_vmap_get_stats().loop_calls, 0);
        SCOPE_END;
    }
}

/* ---- the fused ops: layer norm, attention, batch norm (and their backwards) ---- */
static ct_status f_ln(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_layer_norm(in[0], (int64_t[]){5}, 1, in[1], in[2], 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}
/* gradients of sum(layer_norm(x) * t) for w, b and x */
static ct_status f_ln_grad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *w = ct_detach(in[0]), *b = ct_detach(in[1]), *x = ct_detach(in[2]);
    if (ct_set_requires_grad(w, true) || ct_set_requires_grad(b, true) || ct_set_requires_grad(x, true))
        return ct_last_error_code();
    ct_tensor *l = ct_sum(ct_mul(ct_layer_norm(x, (int64_t[]){5}, 1, w, b, 1e-5), in[3]), NULL, 0, false);
    if (!l) return ct_last_error_code();
    return ct_autograd_grad(&l, 1, (ct_tensor *[]){w, b, x}, 3, NULL, false, false, false, out);
}
static ct_status f_sdpa(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0, true, 0.0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_sdpa_grad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *q = ct_detach(in[0]), *k = ct_detach(in[1]), *v = ct_detach(in[2]);
    if (ct_set_requires_grad(q, true) || ct_set_requires_grad(k, true) || ct_set_requires_grad(v, true))
        return ct_last_error_code();
    ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0, false, 0.0, false);
    ct_tensor *l = o ? ct_sum(ct_mul(o, o), NULL, 0, false) : NULL;
    if (!l) return ct_last_error_code();
    return ct_autograd_grad(&l, 1, (ct_tensor *[]){q, k, v}, 3, NULL, false, false, false, out);
}
static ct_status f_bn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_bn_grad(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *w = ct_detach(in[0]), *b = ct_detach(in[1]), *x = ct_detach(in[2]);
    if (ct_set_requires_grad(w, true) || ct_set_requires_grad(b, true) || ct_set_requires_grad(x, true))
        return ct_last_error_code();
    ct_tensor *y = ct_batch_norm(x, NULL, NULL, w, b, true, 0.1, 1e-5);
    ct_tensor *l = y ? ct_sum(ct_mul(ct_tanh(y), in[3]), NULL, 0, false) : NULL;
    if (!l) return ct_last_error_code();
    return ct_autograd_grad(&l, 1, (ct_tensor *[]){w, b, x}, 3, NULL, false, false, false, out);
}
static ct_status f_bn_eval(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* vmap of fn over in (in_dims ind) against the loop of fn over the samples:
 * every output within tolerance, no op per sample, no loop */
static void check_vs_loop(ct_fn fn, ct_tensor *const *in, const int64_t *ind, int nin, int nout, double tol) {
    ct_tensor *got[4] = {0};
    ct_vmap_reset_stats();
    ct_status st = vcall(fn, NULL, ind, nin, NULL, 0, CT_VMAP_ERROR, 0, in, nin, got, nout);
    if (st) fail_msg("vmap: %s: %s", ct_status_name(st), ct_last_error());
    int64_t B = -1;
    for (int k = 0; k < nin; k++)
        if (ind[k] != CT_VMAP_NONE) B = ct_sizes(in[k])[ind[k]];
    for (int64_t i = 0; i < B; i++) {
        ct_tensor *si[8], *o[4] = {0};
        for (int k = 0; k < nin; k++) si[k] = ind[k] == CT_VMAP_NONE ? in[k] : ct_select(in[k], ind[k], i);
        assert_int_equal(fn(si, nin, o, nout, NULL), CT_OK);
        for (int j = 0; j < nout; j++) assert_close(ct_select(got[j], 0, i), o[j], tol, tol);
    }
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (ct_vmap_op_fallbacks(ct__op_info[i].name) > 0) fail_msg("op %s ran per sample", ct__op_info[i].name);
    if (ct_vmap_get_stats().loop_calls) fail_msg("ran as a loop: %s", ct_vmap_last_loop_reason());
}

static void t_fused(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(7);
    ct_dtype d = CT_F64;
    /* layer norm: shared, then per-sample weights; gradients per sample */
    ct_tensor *x = ct_randn((int64_t[]){3, 4, 5}, 3, d), *w = ct_randn((int64_t[]){5}, 1, d), *b = ct_randn((int64_t[]){5}, 1, d);
    ct_tensor *ws = ct_randn((int64_t[]){3, 5}, 2, d), *bs = ct_randn((int64_t[]){3, 5}, 2, d), *t = ct_randn((int64_t[]){3, 4, 5}, 3, d);
    check_vs_loop(f_ln, (ct_tensor *[]){x, w, b}, (int64_t[]){0, CT_VMAP_NONE, CT_VMAP_NONE}, 3, 1, 1e-12);
    check_vs_loop(f_ln, (ct_tensor *[]){x, ws, bs}, (int64_t[]){0, 0, 0}, 3, 1, 1e-12);
    check_vs_loop(f_ln_grad, (ct_tensor *[]){w, b, x, t}, (int64_t[]){CT_VMAP_NONE, CT_VMAP_NONE, 0, 0}, 4, 3, 1e-10);
    check_vs_loop(f_ln_grad, (ct_tensor *[]){ws, bs, x, t}, (int64_t[]){0, 0, 0, 0}, 4, 3, 1e-10);
    /* attention [N, H, L, E] per sample, f32 (the fused kernel's dtype) */
    ct_tensor *q = ct_randn((int64_t[]){3, 2, 2, 4, 8}, 5, CT_F32), *k = ct_randn((int64_t[]){3, 2, 2, 6, 8}, 5, CT_F32);
    ct_tensor *v = ct_randn((int64_t[]){3, 2, 2, 6, 8}, 5, CT_F32);
    ct_tensor *qc = ct_randn((int64_t[]){2, 2, 6, 8}, 4, CT_F32);
    check_vs_loop(f_sdpa, (ct_tensor *[]){q, k, v}, (int64_t[]){0, 0, 0}, 3, 1, 1e-5);
    check_vs_loop(f_sdpa, (ct_tensor *[]){qc, k, v}, (int64_t[]){CT_VMAP_NONE, 0, 0}, 3, 1, 1e-5);
    check_vs_loop(f_sdpa_grad, (ct_tensor *[]){q, k, v}, (int64_t[]){0, 0, 0}, 3, 3, 1e-4);
    /* batch norm: each sample's own statistics (training), shared running ones (eval) */
    ct_tensor *xb = ct_randn((int64_t[]){3, 4, 2, 5}, 4, d), *gb = ct_randn((int64_t[]){3, 4, 2, 5}, 4, d);
    ct_tensor *wb = ct_randn((int64_t[]){2}, 1, d), *bb = ct_randn((int64_t[]){2}, 1, d);
    ct_tensor *rm = ct_randn((int64_t[]){2}, 1, d), *rv = ct_add_scalar(ct_rand((int64_t[]){2}, 1, d), 0.5);
    check_vs_loop(f_bn, (ct_tensor *[]){xb, wb, bb}, (int64_t[]){0, CT_VMAP_NONE, CT_VMAP_NONE}, 3, 1, 1e-12);
    check_vs_loop(f_bn_grad, (ct_tensor *[]){wb, bb, xb, gb}, (int64_t[]){CT_VMAP_NONE, CT_VMAP_NONE, 0, 0}, 4, 3, 1e-10);
    check_vs_loop(f_bn_eval, (ct_tensor *[]){xb, rm, rv, wb, bb},
                  (int64_t[]){0, CT_VMAP_NONE, CT_VMAP_NONE, CT_VMAP_NONE, CT_VMAP_NONE}, 5, 1, 1e-12);
    SCOPE_END;
}

/* reverse mode through a vmapped function: the batched ops are recorded by
 * autograd like eager ones (and a custom function -- layer norm -- breaks
 * the trace then, so the call runs as a loop autograd records) */
static void t_grad_through(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(8);
    ct_tensor *x = ct_randn((int64_t[]){4, 3}, 2, CT_F64), *m = ct_randn((int64_t[]){2, 3}, 2, CT_F64), *y;
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(vcall(f_mv, NULL, (int64_t[]){CT_VMAP_NONE, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){m, x}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_backward(ct_sum(ct_sin(y), NULL, 0, false), NULL, false, false), CT_OK);
    /* d/dx sum(sin(x m^T)) = cos(x m^T) m */
    ct_tensor *want = ct_matmul(ct_cos(ct_matmul(x, ct_transpose(m, 0, 1))), m);
    assert_close(ct_grad(x), want, 1e-12, 1e-12);
    ct_tensor *w = ct_randn((int64_t[]){5}, 1, CT_F64), *b = ct_randn((int64_t[]){5}, 1, CT_F64);
    ct_tensor *xs = ct_randn((int64_t[]){3, 4, 5}, 3, CT_F64);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    ct_vmap_reset_stats();
    assert_int_equal(vcall(f_ln, NULL, (int64_t[]){0, CT_VMAP_NONE, CT_VMAP_NONE}, 3, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){xs, w, b}, 3, &y, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 1);
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
    /* d/dw sum(layer_norm(x) w + b) = the sum of the normalized x over the rows */
    ct_tensor *xn = ct_layer_norm(xs, (int64_t[]){5}, 1, NULL, NULL, 1e-5);
    assert_close(ct_grad(w), ct_sum(ct_reshape(xn, (int64_t[]){12, 5}, 2), (int64_t[]){0}, 1, false), 1e-12, 1e-12);
    SCOPE_END;
}

/* an op the graph cannot replay alone (cat, sort: their kernels take what
 * their public functions prepare) on unbatched operands only: its rule on
 * a batch of one */
static ct_status f_unbatched_cat(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *vals = NULL;
    ct_tensor *w2 = ct_cat((ct_tensor *[]){in[1], in[1]}, 2, 0);
    if (ct_sort(w2, 0, false, false, &vals, NULL)) return ct_last_error_code();
    out[0] = ct_add(in[0], vals);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_unbatched_ops(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_reshape(ct_arange(0, 12, 1, CT_F32), (int64_t[]){2, 6}, 2);
    ct_tensor *w = ct_from_array((float[]){3, 1, 2}, (int64_t[]){3}, 1, CT_F32), *y;
    assert_int_equal(vcall(f_unbatched_cat, NULL, (int64_t[]){0, CT_VMAP_NONE}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){x, w}, 2, &y, 1), CT_OK);
    float want[12] = {1, 2, 4, 5, 7, 8, 7, 8, 10, 11, 13, 14};
    assert_close(y, ct_from_array(want, (int64_t[]){2, 6}, 2, CT_F32), 0, 0);
    SCOPE_END;
}

/* ---- torch.func.vmap fixtures (tests/fixtures/vmap.txt, tools/fixtures/gen_vmap.py) ---- */
typedef ct_status (*pf_fn)(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx);

static ct_status pf_mv(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_mv(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status pf_sin_mul_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_mul(ct_sin(in[0]), in[1]), (int64_t[]){-1}, 1, false);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status pf_softmax_matmul(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_softmax(ct_matmul(in[0], in[1]), -1);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status pf_conv2d(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout;
    int64_t pad = ctx ? 1 : 0;
    out[0] = ct_conv2d(in[0], in[1], in[2], (int64_t[]){1, 1}, (int64_t[]){pad, pad}, (int64_t[]){1, 1}, 1);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status pf_amax_cumsum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_amax(in[0], (int64_t[]){0}, 1, false);
    out[1] = ct_cumsum(in[0], 1);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

/* in_dims / out_dims params (-100: None) */
static int fx_dims(const fx_case *c, const char *name, int64_t *d) {
    int n = fx_ints(c, name, d, FX_MAX_T);
    for (int i = 0; i < n; i++)
        if (d[i] == -100) d[i] = CT_VMAP_NONE;
    return n;
}

static ct_status run_vmapped(const fx_case *c, ct_tensor *const *in, ct_tensor **out, ct_func *f) {
    int64_t ind[FX_MAX_T], outd[FX_MAX_T];
    int ni = fx_dims(c, "in_dims", ind), no = fx_dims(c, "out_dims", outd);
    ct_vmap_opts o = {ind, ni, outd, no, CT_VMAP_ERROR, 0};
    ct_func *vf = ct_vmap(f, &o);
    ct_func_free(f);
    ct_status st = vf ? ct_func_call(vf, in, c->nin, out, c->nout) : ct_last_error_code();
    ct_func_free(vf);
    return st;
}

#define PF_RUN(name, fn, ctx)                                                           \
    static ct_status fx_##name(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { \
        return run_vmapped(c, in, out, ct_func_new(fn, ctx));                           \
    }
PF_RUN(mv, pf_mv, NULL)
PF_RUN(sin_mul_sum, pf_sin_mul_sum, NULL)
PF_RUN(softmax_matmul, pf_softmax_matmul, NULL)
PF_RUN(amax_cumsum, pf_amax_cumsum, NULL)
PF_RUN(per_sample_grad, f_mlp_grad, NULL)
static int g_pad1 = 1;
static ct_status fx_conv2d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    /* the shared-weight case pads by 1, the per-sample-weight case does not */
    return run_vmapped(c, in, out, ct_func_new(pf_conv2d, strcmp(c->label, "0_none_none") == 0 ? &g_pad1 : NULL));
}
static ct_status fx_nested_dot(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_func *f = ct_func_new(f_dot, NULL);
    ct_vmap_opts oi = {(int64_t[]){0, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0};
    ct_func *inner = ct_vmap(f, &oi);
    ct_func_free(f);
    return run_vmapped(c, in, out, inner);
}

static const fx_op k_torch_ops[] = {
    {"mv", fx_mv, 0, 0}, {"sin_mul_sum", fx_sin_mul_sum, 0, 0}, {"softmax_matmul", fx_softmax_matmul, 0, 0},
    {"nested_dot", fx_nested_dot, 0, 0}, {"per_sample_grad", fx_per_sample_grad, 0, 0},
    {"conv2d", fx_conv2d, 0, 0}, {"amax_cumsum", fx_amax_cumsum, 0, 0},
};

static void t_torch_fixtures(void **state) {
    (void)state;
    ct_vmap_reset_stats();
    int f = fx_run_file(CT_FIXTURE_DIR "/vmap.txt", k_torch_ops, (int)(sizeof k_torch_ops / sizeof k_torch_ops[0]));
    assert_int_equal(f, 0);
    /* every op of these functions ran batched */
    assert_int_equal(ct_vmap_get_stats().fallback_ops, 0);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 0);
    assert_true(ct_vmap_get_stats().batched_ops > 0);
}

/* masked_select with a mask that is not batched: batched (no loop, no per-
 * sample op); with a batched mask, and nonzero / unique of batched values:
 * errors naming the op (data-dependent shapes, as torch.func); the same
 * ops on unbatched inputs inside vmap still run (as a loop). */
static ct_tensor *g_mask;
static ct_status f_msel(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_masked_select(in[0], g_mask);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_msel2(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_masked_select(in[0], in[1]);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_nz_plus(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    /* in[0] batched, in[1] not: the count of in[1]'s nonzeros scales in[0] */
    ct_tensor *nz = ct_nonzero(in[1]);
    out[0] = nz ? ct_mul_scalar(in[0], (double)ct_size(nz, 0)) : NULL;
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_unique(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    return ct_unique(in[0], false, false, out, NULL, NULL);
}
/* the fused rows of the Transformer fast path, shared w / b / bias */
static ct_status f_rows(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *sum = NULL;
    out[0] = ct__add_layer_norm(in[0], in[1], in[2], in[3], 1e-5, &sum, NULL);
    out[1] = sum;
    out[2] = ct__bias_act(in[0], in[3], CT_EWA_GELU, true, NULL);
    return out[0] && out[1] && out[2] ? CT_OK : ct_last_error_code();
}

static void t_dynamic_shapes(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(11);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 2, 5), CT_F64);
    g_mask = ct_gt(ct_randn(CT_SHAPE(5), CT_F64), ct_wrap(0.0));
    /* an unbatched (constant) mask, broadcast over each sample's [2, 5] */
    check_vs_loop(f_msel, &x, (int64_t[]){0}, 1, 1, 0);
    assert_int_equal(ct_vmap_op_batched("masked_select"), 1);
    ct_tensor *xt = ct_permute(x, (int64_t[]){1, 2, 0}, 3); /* [2, 5, 3]: the batch along dim 2 */
    check_vs_loop(f_msel, &xt, (int64_t[]){2}, 1, 1, 0);
    /* a batched mask: each sample would select its own count */
    ct_tensor *mb = ct_gt(ct_randn(CT_SHAPE(3, 2, 5), CT_F64), ct_wrap(0.0)), *y = NULL;
    assert_int_equal(vcall(f_msel2, NULL, (int64_t[]){0, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0, (ct_tensor *[]){x, mb}, 2,
                           &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "vmap: masked_select: "));
    assert_non_null(strstr(ct_last_error(), "data-dependent"));
    ct_clear_error();
    /* nonzero of a batched input: an error; of an unbatched one: it runs */
    ct_tensor *u = ct_from_doubles((double[]){0, 1, 0, 2}, CT_SHAPE(4), CT_F64);
    assert_int_equal(vcall(f_nz_plus, NULL, (int64_t[]){0, 0}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){x, ct_randn(CT_SHAPE(3, 4), CT_F64)}, 2, &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "vmap: nonzero: "));
    ct_clear_error();
    ct_vmap_reset_stats();
    assert_int_equal(vcall(f_nz_plus, NULL, (int64_t[]){0, CT_VMAP_NONE}, 2, NULL, 0, CT_VMAP_ERROR, 0,
                           (ct_tensor *[]){x, u}, 2, &y, 1), CT_OK);
    assert_int_equal(ct_equal(y, ct_mul_scalar(x, 2.0)), 1);
    ct_tensor *yu = NULL;
    assert_int_equal(vcall(f_unique, NULL, (int64_t[]){0}, 1, NULL, 0, CT_VMAP_ERROR, 0, &x, 1, &yu, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "vmap: unique: "));
    ct_clear_error();
    /* fused rows: batched as more rows */
    ct_tensor *xf = ct_randn(CT_SHAPE(3, 4, 8), CT_F32), *rf = ct_randn(CT_SHAPE(3, 4, 8), CT_F32);
    ct_tensor *w = ct_randn(CT_SHAPE(8), CT_F32), *b = ct_randn(CT_SHAPE(8), CT_F32);
    check_vs_loop(f_rows, (ct_tensor *[]){xf, rf, w, b}, (int64_t[]){0, 0, CT_VMAP_NONE, CT_VMAP_NONE}, 4, 3, 0);
    assert_int_equal(ct_vmap_op_batched("add_layer_norm"), 1);
    assert_int_equal(ct_vmap_op_batched("bias_act"), 1);
    SCOPE_END;
}

/* after the families: every listed fallback still happens (else take it off its list) */
static void t_lists(void **state) {
    (void)state;
    int stale = 0;
    for (size_t i = 0; i < NOPFB; i++)
        if (!g_fb_hits[i]) {
            printf("  listed fallback %s no longer runs per sample: take it off the list\n", k_op_fallback[i].op);
            stale++;
        }
    for (size_t i = 0; i < NLOOP; i++)
        if (!g_loop_hits[i]) {
            printf("  listed loop %s no longer runs as a loop: take it off the list\n", k_loop[i].op);
            stale++;
        }
    for (size_t i = 0; i < NDYN; i++)
        if (!g_dyn_hits[i]) {
            printf("  listed dynamic-shape op %s no longer errs under vmap: take it off the list\n", k_dynamic[i].op);
            stale++;
        }
    printf("expected fallbacks: %d ops per sample, %d fixture ops as loops (data-dependent graph breaks); "
           "%d fixture ops an error on batched values (data-dependent shapes, as torch.func)\n",
           (int)NOPFB, (int)NLOOP, (int)NDYN);
    assert_int_equal(stale, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_basic),
        cmocka_unit_test(t_out_dims),
        cmocka_unit_test(t_nested),
        cmocka_unit_test(t_randomness),
        cmocka_unit_test(t_chunk),
        cmocka_unit_test(t_errors),
        cmocka_unit_test(t_graph_break),
        cmocka_unit_test(t_as_strided),
        cmocka_unit_test(t_per_sample_grads),
        cmocka_unit_test(t_per_sample_cnn),
        cmocka_unit_test(t_fused),
        cmocka_unit_test(t_grad_through),
        cmocka_unit_test(t_unbatched_ops),
        cmocka_unit_test(t_dynamic_shapes),
        cmocka_unit_test(t_torch_fixtures),
#define FAMILY(name) cmocka_unit_test(test_##name),
#include "ops_families.h"
#undef FAMILY
        cmocka_unit_test(t_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
