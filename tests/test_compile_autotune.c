/* test_compile_autotune.c -- ct_compile's max-autotune (compile.h,
 * src/compile/exec.c): kernel variants timed on the real tensors, GEMM
 * implementations timed per node, the choices kept beside the artifacts.
 *
 *   - max-autotune gives default mode's results bit for bit on fused
 *     kernels (gelu+sum over rows large enough for the parallel path,
 *     softmax, layer norm, an integer chain, a non-contiguous input), every
 *     variant of every kernel was timed (none differed from the default),
 *     the choice is the smallest median (or the default within 2%), and a
 *     kernel's variants cost no extra compiler run;
 *   - the choices are cached: a second process (this binary exec'ed with
 *     --child) times nothing and reads every choice back, with the same
 *     results; a new compile in this process too;
 *   - a corrupt record (truncated, a flipped byte, garbage) is ignored, timed
 *     again and rewritten whole;
 *   - a matmul step: on an AVX2 CPU OpenBLAS and the own GEMM are both timed
 *     (the own one did run: its call counter) and the faster runs (results
 *     within rounding of default mode's); the choice is cached too;
 *   - a convolution step: with oneDNN built in, ctorch's kernels and oneDNN
 *     are both timed the same way (without it, nothing is timed);
 *   - training: the joint graph's forward and backward halves are tuned at
 *     their first runs; loss and gradients agree with default mode's.
 * A private CT_CACHE_DIR per test; no tensor leaks. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cpu/conv_dnnl.h"
#include "backend/cpu/gemm_impl.h"
#include "compile/compile_impl.h"
#include "ctorch/ctorch.h"

#include "compile_test_util.h"

static const ct_compile_opts AUTOTUNE = {.mode = CT_COMPILE_MAX_AUTOTUNE};

/* ---- functions under test ---- */
static ct_status f_gelu_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *h = ct_gelu(ct_add(ct_mul_scalar(in[0], 1.5), in[1]), CT_GELU_NONE);
    out[0] = ct_sum(h, (int64_t[]){-1}, 1, false);
    out[1] = ct_tanh(h);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static ct_status f_softmax_ln(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *x = ct_mul_scalar(in[0], 0.5);
    out[0] = ct_softmax(ct_add(x, in[1]), -1);
    int64_t ns = ct_size(in[0], -1);
    out[1] = ct_layer_norm(ct_sub(in[0], in[1]), &ns, 1, NULL, NULL, 1e-5);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static ct_status f_int(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *a = ct_add(ct_mul(in[0], in[0]), ct_mul_scalar(in[0], 3.0));
    out[0] = ct_sum(a, (int64_t[]){0}, 1, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_mm(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_tanh(ct_add(ct_matmul(in[0], in[1]), in[2]));
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_conv(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    const int64_t one[2] = {1, 1};
    out[0] = ct_relu(ct_conv2d(in[0], in[1], in[2], one, one, one, 1));
    return out[0] ? CT_OK : ct_last_error_code();
}

/* ---- helpers ---- */
static void assert_same_bits(ct_tensor *a, ct_tensor *b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_get_dtype(a), ct_get_dtype(b));
    assert_int_equal(ct_numel(a), ct_numel(b));
    ct_tensor *ca = ct_contiguous(a), *cb = ct_contiguous(b);
    assert_non_null(ca);
    assert_non_null(cb);
    size_t n = (size_t)ct_numel(a) * ct_dtype_size(ct_get_dtype(a));
    if (memcmp(ct_data_ptr(ca), ct_data_ptr(cb), n)) fail_msg("max-autotune's result differs from default mode's");
}

/* runs f compiled in default mode and in max-autotune on in (calls each
 * twice: the second runs what was chosen), compares the outputs bit for bit */
static ct_compiled *check_equal(ct_fn f, ct_tensor *const *in, int nin, int nout) {
    ct_compiled *d = ct_compile(f, NULL, NULL), *a = ct_compile(f, NULL, &AUTOTUNE);
    assert_non_null(d);
    assert_non_null(a);
    for (int call = 0; call < 2; call++) {
        ct_tensor *od[4] = {0}, *oa[4] = {0};
        assert_int_equal(ct_compiled_call(d, in, nin, od, nout), CT_OK);
        assert_int_equal(ct_compiled_call(a, in, nin, oa, nout), CT_OK);
        for (int k = 0; k < nout; k++) assert_same_bits(oa[k], od[k]);
    }
    ct_compile_stats sd = ct_compiled_stats(d);
    assert_int_equal(sd.autotune_timed + sd.autotune_cached, 0); /* default mode times nothing */
    ct_compiled_free(d);
    return a;
}

static int count_str(const char *s, const char *sub) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub)) n++;
    return n;
}

/* every "autotune:" line of the explain: all variants timed, the choice the
 * fastest (or the default within 2%); the number of such lines */
static int check_kernel_choices(ct_compiled *c) {
    char *e = ct_compile_explain(c);
    assert_non_null(e);
    int n = 0;
    for (char *p = e; (p = strstr(p, "      autotune: ")); p++) {
        char chosen[32], how[32];
        assert_int_equal(sscanf(p, "      autotune: %31s (%31[^)])", chosen, how), 2);
        char *line_end = strchr(p, '\n');
        assert_non_null(line_end);
        *line_end = 0;
        if (strstr(p, "differs")) fail_msg("a variant differed from the default: %s", p);
        double ms[CT_KVAR_MAX], best = 1e300, chosen_ms = -1;
        for (int v = 0; v < CT_KVAR_MAX; v++) {
            char pat[48];
            snprintf(pat, sizeof pat, " %s ", ct__kvariant_name(v));
            char *q = strstr(strstr(p, "): ") + 2, pat);
            if (!q) fail_msg("variant %s missing: %s", ct__kvariant_name(v), p);
            ms[v] = strtod(q + strlen(pat), NULL);
            assert_true(ms[v] >= 0);
            if (ms[v] < best) best = ms[v];
            if (!strcmp(chosen, ct__kvariant_name(v))) chosen_ms = ms[v];
        }
        assert_true(chosen_ms >= 0);
        /* (the times as printed, 4 significant digits: a little slack) */
        if (strcmp(chosen, "default")) {
            assert_true(chosen_ms <= best); /* the fastest */
            assert_true(chosen_ms * 1.02 < ms[0] * 1.002);
        } else {
            assert_true(ms[0] <= best * 1.02 * 1.002);
        }
        *line_end = '\n';
        n++;
        p = line_end;
    }
    free(e);
    return n;
}

/* ---- tests ---- */
static void t_equal_default(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(11);
    int64_t inv0 = 0;
    ct__cc_counters(&inv0, NULL);
    /* 64 x 1024: 65536 elements, over the parallel threshold */
    ct_tensor *x = ct_randn(CT_SHAPE(64, 1024), CT_F32), *b = ct_randn(CT_SHAPE(1024), CT_F32);
    ct_compiled *a = check_equal(f_gelu_sum, (ct_tensor *[]){x, b}, 2, 2);
    ct_compile_stats s = ct_compiled_stats(a);
    int nk = check_kernel_choices(a);
    assert_true(nk >= 1);
    assert_int_equal(s.autotune_timed, nk);
    assert_int_equal(s.autotune_cached, 0);
    int64_t inv1 = 0;
    ct__cc_counters(&inv1, NULL);
    /* one compiler run per kernel in each mode: default mode's and
     * max-autotune's (all its variants in one translation unit) */
    assert_int_equal(s.kernels_built, nk);
    assert_int_equal(inv1 - inv0, 2 * nk);
    ct_compiled_free(a);

    /* softmax and layer norm (multi-stage kernels), small: 48 x 200 */
    ct_tensor *y = ct_randn(CT_SHAPE(48, 200), CT_F32), *z = ct_randn(CT_SHAPE(200), CT_F32);
    a = check_equal(f_softmax_ln, (ct_tensor *[]){y, z}, 2, 2);
    assert_true(check_kernel_choices(a) >= 1);
    ct_compiled_free(a);
    /* a transposed (non-contiguous) input */
    ct_tensor *yt = ct_transpose(ct_randn(CT_SHAPE(200, 48), CT_F32), 0, 1);
    a = check_equal(f_softmax_ln, (ct_tensor *[]){yt, z}, 2, 2);
    assert_true(check_kernel_choices(a) >= 1);
    ct_compiled_free(a);

    /* integers (wrapping sums): 3000 x 40 */
    ct_tensor *xi = ct_to_dtype(ct_mul_scalar(ct_randn(CT_SHAPE(3000, 40), CT_F32), 1000.0), CT_I32);
    a = check_equal(f_int, (ct_tensor *[]){xi}, 1, 1);
    assert_true(check_kernel_choices(a) >= 1);
    ct_compiled_free(a);
    END;
}

/* the cache dir's .tune records (paths into out, at most max); their count */
static int tune_files(char out[][512], int max) {
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".tune") && strncmp(e->d_name, "tmp-", 4)) {
            if (n < max) snprintf(out[n], 512, "%s/%s", g_dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static ct_tensor *child_input(int k) {
    /* deterministic data: the child builds the same tensors */
    ct_manual_seed(100 + k);
    return k == 0 ? ct_randn(CT_SHAPE(96, 700), CT_F32) : ct_randn(CT_SHAPE(700), CT_F32);
}

/* --child: a second process with the parent's cache dir */
static int child(void) {
    ct_scope s = ct_scope_begin();
    ct_tensor *in[2] = {child_input(0), child_input(1)};
    ct_compiled *a = ct_compile(f_gelu_sum, NULL, &AUTOTUNE), *d = ct_compile(f_gelu_sum, NULL, NULL);
    ct_tensor *oa[2] = {0}, *od[2] = {0};
    int rc = 0;
    if (ct_compiled_call(a, in, 2, oa, 2) || ct_compiled_call(d, in, 2, od, 2)) rc = 2;
    ct_compile_stats st = ct_compiled_stats(a);
    if (!rc && (st.autotune_timed != 0 || st.autotune_cached < 1 || st.kernels_built != 0)) {
        fprintf(stderr, "child: timed %lld cached %lld built %lld\n", (long long)st.autotune_timed,
                (long long)st.autotune_cached, (long long)st.kernels_built);
        rc = 3;
    }
    for (int k = 0; k < 2 && !rc; k++) {
        size_t n = (size_t)ct_numel(oa[k]) * 4;
        if (memcmp(ct_data_ptr(ct_contiguous(oa[k])), ct_data_ptr(ct_contiguous(od[k])), n)) rc = 4;
    }
    printf("%lld\n", (long long)st.autotune_cached);
    ct_compiled_free(a);
    ct_compiled_free(d);
    ct_scope_end(s);
    return rc;
}

static void t_cached_second_process(void **st) {
    (void)st;
    BEGIN;
    ct_tensor *in[2] = {child_input(0), child_input(1)};
    ct_compiled *a = ct_compile(f_gelu_sum, NULL, &AUTOTUNE);
    ct_tensor *o[2] = {0};
    assert_int_equal(ct_compiled_call(a, in, 2, o, 2), CT_OK);
    ct_compile_stats s = ct_compiled_stats(a);
    assert_true(s.autotune_timed >= 1);
    assert_int_equal(s.autotune_cached, 0);
    char files[8][512];
    assert_int_equal(tune_files(files, 8), s.autotune_timed);
    /* another process reads every choice */
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl("/proc/self/exe", "test_compile_autotune", "--child", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    char buf[64] = "";
    ssize_t r = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
    assert_true(r > 0);
    assert_int_equal(atoll(buf), s.autotune_timed);
    /* a new compile in this process reads them too, and runs the same choices */
    ct_compiled *b = ct_compile(f_gelu_sum, NULL, &AUTOTUNE);
    ct_tensor *ob[2] = {0};
    assert_int_equal(ct_compiled_call(b, in, 2, ob, 2), CT_OK);
    ct_compile_stats sb = ct_compiled_stats(b);
    assert_int_equal(sb.autotune_timed, 0);
    assert_int_equal(sb.autotune_cached, s.autotune_timed);
    for (int k = 0; k < 2; k++) assert_same_bits(ob[k], o[k]);
    char *e = ct_compile_explain(b);
    assert_non_null(e);
    assert_non_null(strstr(e, "(from the cache)"));
    free(e);
    ct_compiled_free(b);
    ct_compiled_free(a);
    END;
}

static void corrupt(const char *path, int how) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 20 && n < sizeof buf);
    if (how == 0) n /= 2;                        /* truncated */
    else if (how == 1) buf[n - 3] ^= 1;          /* one bit of the record */
    else n = (size_t)snprintf(buf, sizeof buf, "choice serial\n"); /* foreign text */
    f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static void t_corrupt_record(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(5);
    ct_tensor *y = ct_randn(CT_SHAPE(64, 300), CT_F32), *z = ct_randn(CT_SHAPE(300), CT_F32);
    ct_tensor *in[2] = {y, z};
    ct_compiled *a = ct_compile(f_softmax_ln, NULL, &AUTOTUNE);
    ct_tensor *o[2] = {0};
    assert_int_equal(ct_compiled_call(a, in, 2, o, 2), CT_OK);
    int64_t nt = ct_compiled_stats(a).autotune_timed;
    assert_true(nt >= 1);
    char files[8][512];
    int nf = tune_files(files, 8);
    assert_int_equal(nf, nt);
    for (int how = 0; how < 3; how++) {
        for (int i = 0; i < nf; i++) corrupt(files[i], how);
        ct_compiled *b = ct_compile(f_softmax_ln, NULL, &AUTOTUNE);
        ct_tensor *ob[2] = {0};
        assert_int_equal(ct_compiled_call(b, in, 2, ob, 2), CT_OK);
        ct_compile_stats sb = ct_compiled_stats(b);
        assert_int_equal(sb.autotune_cached, 0); /* ignored ... */
        assert_int_equal(sb.autotune_timed, nt); /* ... timed again ... */
        for (int k = 0; k < 2; k++) assert_same_bits(ob[k], o[k]);
        ct_compiled_free(b);
        /* ... and rewritten: the next compile reads them */
        assert_int_equal(tune_files(files, 8), nf);
        ct_compiled *c = ct_compile(f_softmax_ln, NULL, &AUTOTUNE);
        assert_int_equal(ct_compiled_call(c, in, 2, ob, 2), CT_OK);
        ct_compile_stats sc = ct_compiled_stats(c);
        assert_int_equal(sc.autotune_timed, 0);
        assert_int_equal(sc.autotune_cached, nt);
        ct_compiled_free(c);
    }
    ct_compiled_free(a);
    END;
}

static void t_gemm_choice(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(9);
    ct_tensor *x = ct_randn(CT_SHAPE(96, 160), CT_F32), *w = ct_randn(CT_SHAPE(160, 128), CT_F32);
    ct_tensor *bias = ct_randn(CT_SHAPE(128), CT_F32);
    ct_tensor *in[3] = {x, w, bias};
    ct_compiled *d = ct_compile(f_mm, NULL, NULL), *a = ct_compile(f_mm, NULL, &AUTOTUNE);
    ct_tensor *od = NULL, *oa = NULL;
    assert_int_equal(ct_compiled_call(d, in, 3, &od, 1), CT_OK);
    long long own0 = ct__sgemm_avx2_calls();
    assert_int_equal(ct_compiled_call(a, in, 3, &oa, 1), CT_OK);
    long long own_runs = ct__sgemm_avx2_calls() - own0;
    assert_true(ct_allclose(oa, od, 1e-4, 1e-5, false) == 1);
    char *e = ct_compile_explain(a);
    assert_non_null(e);
    const char *cap = ct_cpu_capability();
    bool avx2 = !strcmp(cap, "avx2") || !strcmp(cap, "avx512");
    const char *gemm = strstr(e, "    op ");
    ct_compile_stats s = ct_compiled_stats(a);
    if (avx2 && !getenv("CT_GEMM")) {
        if (!gemm) fail_msg("no GEMM choice in:\n%s", e);
        char chosen[16];
        double tb, to;
        assert_int_equal(sscanf(strstr(gemm, "autotune: "), "autotune: %15s (timed): blas %lf ms, own %lf ms",
                                chosen, &tb, &to), 3);
        assert_true(tb > 0 && to > 0);
        assert_true(own_runs >= 1 + 3); /* its check run and at least 3 timed ones */
        if (tb != to) assert_string_equal(chosen, tb < to ? "blas" : "own"); /* (as printed) */
        assert_int_equal(s.autotune_timed, count_str(e, "(timed)"));
        /* a later call runs the chosen GEMM: the same result as the first */
        ct_tensor *oa2 = NULL;
        assert_int_equal(ct_compiled_call(a, in, 3, &oa2, 1), CT_OK);
        assert_same_bits(oa2, oa);
        /* cached: a new compile reads the choice */
        ct_compiled *b = ct_compile(f_mm, NULL, &AUTOTUNE);
        ct_tensor *ob = NULL;
        assert_int_equal(ct_compiled_call(b, in, 3, &ob, 1), CT_OK);
        assert_same_bits(ob, oa);
        ct_compile_stats sb = ct_compiled_stats(b);
        assert_int_equal(sb.autotune_timed, 0);
        assert_int_equal(sb.autotune_cached, s.autotune_timed);
        ct_compiled_free(b);
    } else {
        assert_null(gemm); /* one implementation only: nothing to time */
    }
    free(e);
    ct_compiled_free(a);
    ct_compiled_free(d);
    END;
}

static void t_conv_choice(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(13);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 8, 20, 20), CT_F32), *w = ct_randn(CT_SHAPE(16, 8, 3, 3), CT_F32);
    ct_tensor *b = ct_randn(CT_SHAPE(16), CT_F32);
    ct_tensor *in[3] = {x, w, b};
    ct_compiled *d = ct_compile(f_conv, NULL, NULL), *a = ct_compile(f_conv, NULL, &AUTOTUNE);
    ct_tensor *od = NULL, *oa = NULL;
    assert_int_equal(ct_compiled_call(d, in, 3, &od, 1), CT_OK);
    assert_int_equal(ct_compiled_call(a, in, 3, &oa, 1), CT_OK);
    assert_true(ct_allclose(oa, od, 1e-4, 1e-4, false) == 1);
    char *e = ct_compile_explain(a);
    assert_non_null(e);
    const char *conv = strstr(e, "    op conv");
    if (ct__dnnl_wcache_hits() >= 0 && !getenv("CT_DNNL")) { /* oneDNN built in */
        if (!conv) fail_msg("no convolution choice in:\n%s", e);
        char chosen[16];
        double tc, td;
        assert_int_equal(sscanf(strstr(conv, "autotune: "), "autotune: %15s (timed): ctorch %lf ms, onednn %lf ms",
                                chosen, &tc, &td), 3);
        assert_true(tc > 0 && td > 0);
        if (tc != td) assert_string_equal(chosen, tc < td ? "ctorch" : "onednn");
        ct_tensor *oa2 = NULL;
        assert_int_equal(ct_compiled_call(a, in, 3, &oa2, 1), CT_OK);
        assert_same_bits(oa2, oa);
    } else {
        assert_null(conv);
    }
    free(e);
    ct_compiled_free(a);
    ct_compiled_free(d);
    END;
}

/* training: the joint graph's forward and backward plans are tuned too
 * (their GEMMs may take the other implementation: gradients agree to rounding) */
static ct_status f_train(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *h = ct_gelu(ct_add(ct_matmul(in[0], in[1]), in[2]), CT_GELU_NONE);
    out[0] = ct_sum(ct_mul(h, h), NULL, 0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void t_training(void **st) {
    (void)st;
    BEGIN;
    ct_manual_seed(21);
    ct_tensor *x = ct_randn(CT_SHAPE(64, 96), CT_F32);
    ct_tensor *g[2][2] = {{0}};
    ct_tensor *loss[2] = {0};
    for (int m = 0; m < 2; m++) {
        ct_manual_seed(22);
        ct_tensor *w = ct_randn(CT_SHAPE(96, 80), CT_F32), *b = ct_randn(CT_SHAPE(80), CT_F32);
        assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
        assert_int_equal(ct_set_requires_grad(b, true), CT_OK);
        ct_compiled *c = ct_compile(f_train, NULL, m ? &AUTOTUNE : NULL);
        ct_tensor *in[3] = {x, w, b};
        assert_int_equal(ct_compiled_call(c, in, 3, &loss[m], 1), CT_OK);
        assert_int_equal(ct_backward(loss[m], NULL, false, false), CT_OK);
        g[m][0] = ct_clone(ct_grad(w));
        g[m][1] = ct_clone(ct_grad(b));
        if (m) {
            char *e = ct_compile_explain(c);
            assert_non_null(e);
            assert_non_null(strstr(e, "joint forward + backward graph"));
            assert_true(count_str(e, "      autotune: ") >= 2); /* kernels of both halves */
            assert_int_equal(count_str(e, "not run yet"), 0);
            free(e);
            assert_true(check_kernel_choices(c) >= 2);
        }
        ct_compiled_free(c);
    }
    assert_true(ct_allclose(loss[1], loss[0], 1e-4, 1e-5, false) == 1);
    for (int k = 0; k < 2; k++) assert_true(ct_allclose(g[1][k], g[0][k], 1e-4, 1e-4, false) == 1);
    END;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--child")) return child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(t_equal_default, setup, teardown),
        cmocka_unit_test_setup_teardown(t_cached_second_process, setup, teardown),
        cmocka_unit_test_setup_teardown(t_corrupt_record, setup, teardown),
        cmocka_unit_test_setup_teardown(t_gemm_choice, setup, teardown),
        cmocka_unit_test_setup_teardown(t_conv_choice, setup, teardown),
        cmocka_unit_test_setup_teardown(t_training, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
