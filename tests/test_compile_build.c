/* test_compile_build.c -- src/compile/build.c: generated C -> a loaded
 * shared object through the system C compiler, and its disk cache.
 *
 *   - a small source is built and its symbol called (also an OpenMP loop
 *     and a source with `#include "ew_scalar.h"`, which build.c replaces by
 *     the embedded header text, calling one of its helpers);
 *   - the same source again: the same lib, a cache hit, no compiler run
 *     (ct__cc_counters); after closing it (the in-process table empty) the
 *     disk entry is loaded without the compiler; a second process (this
 *     binary exec'ed with --child-load) loads it without the compiler;
 *   - a truncated, a tampered (one byte) and a foreign entry are detected
 *     and rebuilt;
 *   - a compile error's message has the compiler's diagnostic; CC=
 *     /nonexistent and an empty PATH give "no C compiler";
 *   - four forked processes building one new source at once all succeed,
 *     the compiler ran once in all (the per-key lock), the entry is valid;
 *   - ct__cc_build_many: parallel builds, a duplicate source shares a lib;
 *   - an unusable cache dir: builds still work (a private temp dir);
 *   - a compiler that rejects -fopenmp: retried without it (then remembered);
 *   - CC's words are part of the key (CC="cc -DX=5" builds anew);
 *   - the compiler's --version line is read from the cache dir's record
 *     while the compiler file is unchanged (not run again); a changed file
 *     or a damaged record runs it again;
 *   - six threads building one new source: one compile, one shared lib;
 *   - a source as the code generator writes it (ct__ew_prelude(), rendered
 *     f32 expressions of exp/tanh/sigmoid/erfinv/digamma/silu in an OpenMP
 *     loop) against the eager ops (rtol 1e-5, atol 1e-6);
 *   - SIGCHLD ignored by the program: builds and errors still work;
 *   - a read-only cache dir: its entries load without the compiler, a new
 *     source builds in a private dir (a child dropped to nobody as root).
 * Every test runs with its own CT_CACHE_DIR (mkdtemp), removed after. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <math.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/compile_impl.h"
#include "ctorch/ops.h"
#include "ctorch/tensor.h"
#include "ops/render.h"

static char g_dir[256];
static char *g_saved_path, *g_saved_cc;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/ct-ccbuild-XXXXXX");
    if (!mkdtemp(g_dir)) return -1;
    setenv("CT_CACHE_DIR", g_dir, 1);
    const char *p = getenv("PATH"), *cc = getenv("CC");
    g_saved_path = p ? strdup(p) : NULL;
    g_saved_cc = cc ? strdup(cc) : NULL;
    ct_clear_error();
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_saved_path) setenv("PATH", g_saved_path, 1);
    else unsetenv("PATH");
    if (g_saved_cc) setenv("CC", g_saved_cc, 1);
    else unsetenv("CC");
    free(g_saved_path), free(g_saved_cc);
    g_saved_path = g_saved_cc = NULL;
    chmod(g_dir, 0700);
    nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    unsetenv("CT_CACHE_DIR");
    return 0;
}

static int64_t invocations(void) {
    int64_t i;
    ct__cc_counters(&i, NULL);
    return i;
}
static int64_t hits(void) {
    int64_t h;
    ct__cc_counters(NULL, &h);
    return h;
}

/* a source unique to this run and tag (other runs' caches never hit) */
static char *add_source(const char *tag, int k) {
    static char buf[512];
    snprintf(buf, sizeof buf,
             "/* %s %d %d */\n#include <stdint.h>\n"
             "int64_t ct_test_add(int64_t a, int64_t b) { return a + b + %d; }\n",
             tag, (int)getpid(), k, k);
    return buf;
}

/* the one .so entry in g_dir (its path into out); false if not exactly one */
static bool the_entry(char *out, size_t n) {
    DIR *d = opendir(g_dir);
    if (!d) return false;
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 3 && !strcmp(e->d_name + l - 3, ".so") && strncmp(e->d_name, "tmp-", 4)) {
            snprintf(out, n, "%s/%s", g_dir, e->d_name);
            count++;
        }
    }
    closedir(d);
    return count == 1;
}

typedef int64_t (*add_fn)(int64_t, int64_t);

static void test_build_call_hit(void **state) {
    (void)state;
    const char *src = add_source("hit", 3);
    int64_t inv0 = invocations(), hit0 = hits();
    bool fc = true;
    ct_cc_lib *lib = ct__cc_build(src, &fc);
    assert_non_null(lib);
    assert_false(fc);
    assert_int_equal(invocations(), inv0 + 1);
    add_fn f = (add_fn)ct__cc_sym(lib, "ct_test_add");
    assert_non_null(f);
    assert_int_equal(f(40, -1), 42);
    assert_null(ct__cc_sym(lib, "no_such_symbol"));
    assert_int_equal(ct_last_error_code(), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "no_such_symbol"));
    ct_clear_error();

    /* in-process hit: the same lib, no compiler */
    ct_cc_lib *lib2 = ct__cc_build(src, &fc);
    assert_ptr_equal(lib2, lib);
    assert_true(fc);
    assert_int_equal(invocations(), inv0 + 1);
    assert_int_equal(hits(), hit0 + 1);
    ct__cc_close(lib2);
    assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(1, 1), 5); /* still open */
    ct__cc_close(lib);

    /* the table is empty now: the disk entry, no compiler */
    lib = ct__cc_build(src, &fc);
    assert_non_null(lib);
    assert_true(fc);
    assert_int_equal(invocations(), inv0 + 1);
    assert_int_equal(hits(), hit0 + 2);
    assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(2, 2), 7);
    ct__cc_close(lib);

    /* the entry: one <key>.so (64 hex digits), mode 0700 dir, no temp files left */
    char path[512];
    assert_true(the_entry(path, sizeof path));
    const char *base = strrchr(path, '/') + 1;
    assert_int_equal(strlen(base), 64 + 3);
    struct stat st;
    assert_int_equal(stat(g_dir, &st), 0);
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d))) assert_int_not_equal(strncmp(e->d_name, "tmp-", 4), 0);
    closedir(d);
}

static void test_openmp_and_ew_scalar(void **state) {
    (void)state;
    char src[2048];
    snprintf(src, sizeof src,
             "/* omp %d */\n#include <float.h>\n#include <stdint.h>\n#include <tgmath.h>\n"
             "#include \"ew_scalar.h\"\n"
             "double ct_test_sum(int64_t n) {\n"
             "    double s = 0;\n"
             "    #pragma omp parallel for reduction(+:s)\n"
             "    for (int64_t i = 0; i < n; i++) s += (double)i;\n"
             "    return s;\n}\n"
             "double ct_test_digamma(double x) { return ct__ew_digamma(x); }\n"
             "int64_t ct_test_wadd(int64_t a, int64_t b) { return CT_EW_WADD(int64_t, a, b); }\n",
             (int)getpid());
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    if (!lib) fail_msg("%s", ct_last_error());
    double (*sum)(int64_t) = (double (*)(int64_t))ct__cc_sym(lib, "ct_test_sum");
    double (*dg)(double) = (double (*)(double))ct__cc_sym(lib, "ct_test_digamma");
    int64_t (*wadd)(int64_t, int64_t) = (int64_t (*)(int64_t, int64_t))ct__cc_sym(lib, "ct_test_wadd");
    assert_non_null(sum), assert_non_null(dg), assert_non_null(wadd);
    assert_true(sum(100001) == 100000.0 * 100001.0 / 2);
    /* digamma(1) = -Euler-Mascheroni */
    assert_true(fabs(dg(1.0) + 0.57721566490153286) < 1e-12);
    assert_int_equal(wadd(INT64_MAX, 1), INT64_MIN);
    ct__cc_close(lib);
}

/* --child-load <source tag> <k>: a second process loading the entry */
static int child_load(const char *tag, int k, int parent) {
    char buf[512];
    snprintf(buf, sizeof buf,
             "/* %s %d %d */\n#include <stdint.h>\n"
             "int64_t ct_test_add(int64_t a, int64_t b) { return a + b + %d; }\n",
             tag, parent, k, k);
    bool fc = false;
    ct_cc_lib *lib = ct__cc_build(buf, &fc);
    if (!lib) { fprintf(stderr, "child: %s\n", ct_last_error()); return 2; }
    add_fn f = (add_fn)ct__cc_sym(lib, "ct_test_add");
    int rc = (f && f(1, 2) == 3 + k && fc && invocations() == 0 && hits() == 1) ? 0 : 3;
    ct__cc_close(lib);
    return rc;
}

static void test_second_process(void **state) {
    (void)state;
    ct_cc_lib *lib = ct__cc_build(add_source("proc", 5), NULL);
    assert_non_null(lib);
    ct__cc_close(lib);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char parent[32];
        snprintf(parent, sizeof parent, "%d", (int)getppid());
        execl("/proc/self/exe", "test_compile_build", "--child-load", "proc", "5", parent, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* replaces the entry's bytes (through a new file renamed over it, as a
 * loaded mapping must not change) */
static void rewrite_entry(const char *path, int how) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 22];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 1000 && n < sizeof buf);
    if (how == 0) n /= 2;                      /* truncated */
    else if (how == 1) buf[n / 2] ^= 0x40;     /* one byte changed */
    else memcpy(buf, "not an ELF object", 17); /* foreign */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    f = fopen(tmp, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

static void test_corrupt_rebuilt(void **state) {
    (void)state;
    const char *src = add_source("corrupt", 7);
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    assert_non_null(lib);
    ct__cc_close(lib);
    char path[512];
    assert_true(the_entry(path, sizeof path));
    for (int how = 0; how < 3; how++) {
        rewrite_entry(path, how);
        int64_t inv0 = invocations();
        bool fc = true;
        lib = ct__cc_build(src, &fc);
        if (!lib) fail_msg("how %d: %s", how, ct_last_error());
        assert_false(fc);
        assert_int_equal(invocations(), inv0 + 1);
        assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(1, 1), 9);
        ct__cc_close(lib);
        /* and the rebuilt entry is good */
        lib = ct__cc_build(src, &fc);
        assert_non_null(lib);
        assert_true(fc);
        assert_int_equal(invocations(), inv0 + 1);
        ct__cc_close(lib);
    }
}

static void test_compile_error(void **state) {
    (void)state;
    const char *src = "int ct_test_broken(int a) { return a + undeclared_thing_xyz; }\n";
    assert_null(ct__cc_build(src, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_RUNTIME);
    const char *m = ct_last_error();
    assert_non_null(strstr(m, "compile:"));
    assert_non_null(strstr(m, "undeclared_thing_xyz")); /* the compiler's diagnostic */
    assert_non_null(strstr(m, "error"));
    ct_clear_error();
    /* a failed build leaves nothing in the cache dir but its lock file */
    DIR *d = opendir(g_dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        assert_false(l > 3 && !strcmp(e->d_name + l - 3, ".so"));
        assert_int_not_equal(strncmp(e->d_name, "tmp-", 4), 0);
    }
    closedir(d);
}

static void test_no_compiler(void **state) {
    (void)state;
    const char *src = add_source("nocc", 1);
    setenv("CC", "/nonexistent/cc", 1);
    int64_t inv0 = invocations();
    assert_null(ct__cc_build(src, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_RUNTIME);
    assert_string_equal(ct_last_error(), "compile: no C compiler: set CC or install gcc (apt-get install gcc)");
    ct_clear_error();
    unsetenv("CC");
    setenv("PATH", "", 1);
    assert_null(ct__cc_build(src, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "no C compiler"));
    ct_clear_error();
    /* build_many reports it too */
    ct_cc_lib *libs[2];
    const char *srcs[2] = {src, add_source("nocc", 2)};
    assert_int_equal(ct__cc_build_many(srcs, 2, libs, NULL), CT_ERR_RUNTIME);
    assert_null(libs[0]), assert_null(libs[1]);
    ct_clear_error();
    assert_int_equal(invocations(), inv0);
    /* back: it works again */
    setenv("PATH", g_saved_path ? g_saved_path : "/usr/bin:/bin", 1);
    if (g_saved_cc) setenv("CC", g_saved_cc, 1);
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    assert_non_null(lib);
    ct__cc_close(lib);
}

static void test_concurrent_processes(void **state) {
    (void)state;
    /* slow enough to compile that the children overlap */
    static char src[16384];
    int len = snprintf(src, sizeof src, "/* conc %d */\n#include <stdint.h>\n", (int)getpid());
    for (int i = 0; i < 40 && len < (int)sizeof src - 200; i++)
        len += snprintf(src + len, sizeof src - len,
                        "int64_t ct_test_f%d(int64_t x) { int64_t s = 0; for (int64_t i = 0; i < x; i++) s += i * %d; return s; }\n",
                        i, i);
    enum { NCHILD = 4 };
    pid_t pids[NCHILD];
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    for (int c = 0; c < NCHILD; c++) {
        pids[c] = fork();
        assert_true(pids[c] >= 0);
        if (pids[c] == 0) {
            close(pipefd[0]);
            int64_t inv0 = invocations();
            ct_cc_lib *lib = ct__cc_build(src, NULL);
            int64_t (*f)(int64_t) = lib ? (int64_t (*)(int64_t))ct__cc_sym(lib, "ct_test_f3") : NULL;
            char r = (char)(invocations() - inv0);
            if (write(pipefd[1], &r, 1) != 1) _exit(4);
            _exit(f && f(10) == 45 * 3 ? 0 : 3);
        }
    }
    close(pipefd[1]);
    int total = 0;
    for (int c = 0; c < NCHILD; c++) {
        int st;
        assert_int_equal(waitpid(pids[c], &st, 0), pids[c]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    char r;
    while (read(pipefd[0], &r, 1) == 1) total += r;
    close(pipefd[0]);
    assert_int_equal(total, 1); /* one compiled, the others waited and loaded */
    int64_t inv0 = invocations();
    bool fc = false;
    ct_cc_lib *lib = ct__cc_build(src, &fc);
    assert_non_null(lib);
    assert_true(fc);
    assert_int_equal(invocations(), inv0);
    ct__cc_close(lib);
}

static void test_build_many(void **state) {
    (void)state;
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s", add_source("many", 10));
    snprintf(b, sizeof b, "%s", add_source("many", 11));
    snprintf(c, sizeof c, "%s", add_source("many", 12));
    const char *srcs[4] = {a, b, a, c};
    ct_cc_lib *libs[4];
    bool fc[4];
    int64_t inv0 = invocations();
    assert_int_equal(ct__cc_build_many(srcs, 4, libs, fc), CT_OK);
    assert_int_equal(invocations(), inv0 + 3);
    assert_ptr_equal(libs[0], libs[2]);
    int expect[4] = {10, 11, 10, 12};
    for (int i = 0; i < 4; i++) {
        assert_false(fc[i]);
        assert_int_equal(((add_fn)ct__cc_sym(libs[i], "ct_test_add"))(0, 0), expect[i]);
    }
    for (int i = 0; i < 4; i++) ct__cc_close(libs[i]);
    /* again: all from the cache */
    assert_int_equal(ct__cc_build_many(srcs, 4, libs, fc), CT_OK);
    assert_int_equal(invocations(), inv0 + 3);
    for (int i = 0; i < 4; i++) assert_true(fc[i]);
    for (int i = 0; i < 4; i++) ct__cc_close(libs[i]);
    /* one broken source: the error, no lib kept */
    const char *bad[3] = {a, "int broken( {\n", c};
    assert_int_equal(ct__cc_build_many(bad, 3, libs, NULL), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "compile:"));
    for (int i = 0; i < 3; i++) assert_null(libs[i]);
    ct_clear_error();
}

static void test_unusable_cache_dir(void **state) {
    (void)state;
    /* a regular file where a dir should be: not creatable, even for root */
    char file[300], dir[400];
    snprintf(file, sizeof file, "%s/plain-file", g_dir);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", file);
    setenv("CT_CACHE_DIR", dir, 1);
    const char *src = add_source("unusable", 13);
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    setenv("CT_CACHE_DIR", g_dir, 1);
    if (!lib) fail_msg("%s", ct_last_error());
    assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(0, 0), 13);
    ct__cc_close(lib);
}

/* a compiler that rejects -fopenmp: retried without it, and not passed again */
static void test_no_openmp_compiler(void **state) {
    (void)state;
    char fake[400];
    snprintf(fake, sizeof fake, "%s/fakecc", g_dir);
    FILE *f = fopen(fake, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n"
               "for a in \"$@\"; do\n"
               "  if [ \"$a\" = -fopenmp ]; then echo \"fakecc: error: unsupported option '-fopenmp'\" >&2; exit 1; fi\n"
               "done\n"
               "exec %s \"$@\"\n",
            g_saved_cc && *g_saved_cc ? g_saved_cc : "cc");
    fclose(f);
    assert_int_equal(chmod(fake, 0755), 0);
    setenv("CC", fake, 1);
    int64_t inv0 = invocations();
    ct_cc_lib *lib = ct__cc_build(add_source("noomp", 21), NULL);
    if (!lib) fail_msg("%s", ct_last_error());
    assert_int_equal(invocations(), inv0 + 2); /* with -fopenmp, then without */
    assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(0, 0), 21);
    ct__cc_close(lib);
    lib = ct__cc_build(add_source("noomp", 22), NULL);
    assert_non_null(lib);
    assert_int_equal(invocations(), inv0 + 3); /* remembered: one run */
    ct__cc_close(lib);
    /* a real error through it is still reported */
    assert_null(ct__cc_build("int broken( {\n", NULL));
    assert_non_null(strstr(ct_last_error(), "compile:"));
    ct_clear_error();
}

/* The compiler's --version line is recorded in the cache dir with its
 * file's identity: a new probe (here: CC's value changed, its words not)
 * reads it instead of running the compiler; the compiler file changed, or
 * the record damaged, and it runs again (and the record is rewritten). */
static void write_fake_cc(const char *path, const char *extra) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n# %s\nexec %s \"$@\"\n", extra, g_saved_cc && *g_saved_cc ? g_saved_cc : "cc");
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static void build_with(const char *cc, const char *tag, int k) {
    setenv("CC", cc, 1);
    ct_cc_lib *lib = ct__cc_build(add_source(tag, k), NULL);
    if (!lib) fail_msg("%s", ct_last_error());
    ct__cc_close(lib);
}

static void test_ident_recorded(void **state) {
    (void)state;
    char fake[400], cc2[420], cc3[420];
    snprintf(fake, sizeof fake, "%s/identcc", g_dir);
    snprintf(cc2, sizeof cc2, "%s ", fake);  /* the same words, another CC value: probed again */
    snprintf(cc3, sizeof cc3, "%s  ", fake);
    write_fake_cc(fake, "one");
    int64_t v0 = ct__cc_version_runs();
    build_with(fake, "ident", 31);
    assert_int_equal(ct__cc_version_runs(), v0 + 1);
    build_with(cc2, "ident", 32);
    assert_int_equal(ct__cc_version_runs(), v0 + 1); /* read from the record */
    /* the compiler file changed (size, mtime): run again */
    write_fake_cc(fake, "two, a longer comment");
    build_with(fake, "ident", 33);
    assert_int_equal(ct__cc_version_runs(), v0 + 2);
    /* a damaged record: run again, and it is written anew */
    DIR *d = opendir(g_dir);
    assert_non_null(d);
    struct dirent *e;
    int nrec = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, "cc-", 3) || n < 6 || strcmp(e->d_name + n - 6, ".ident")) continue;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        FILE *f = fopen(p, "w");
        assert_non_null(f);
        fputs("ctorch-cc-ident-1\ngarbage\n", f);
        fclose(f);
        nrec++;
    }
    closedir(d);
    assert_true(nrec >= 1);
    build_with(cc3, "ident", 34);
    assert_int_equal(ct__cc_version_runs(), v0 + 3);
    build_with(cc2, "ident", 35);
    assert_int_equal(ct__cc_version_runs(), v0 + 3);
}

/* the compiler (CC's words) is part of the key */
static void test_key_has_compiler(void **state) {
    (void)state;
    char src[256];
    snprintf(src, sizeof src, "/* key %d */\n#ifndef CT_X\n#define CT_X 0\n#endif\nint ct_test_x(void) { return CT_X; }\n",
             (int)getpid());
    int64_t inv0 = invocations();
    ct_cc_lib *a = ct__cc_build(src, NULL);
    assert_non_null(a);
    char cc[300];
    snprintf(cc, sizeof cc, "%s -DCT_X=5", g_saved_cc && *g_saved_cc ? g_saved_cc : "cc");
    setenv("CC", cc, 1);
    bool fc = true;
    ct_cc_lib *b = ct__cc_build(src, &fc);
    assert_non_null(b);
    assert_false(fc);
    assert_ptr_not_equal(a, b);
    assert_int_equal(invocations(), inv0 + 2);
    assert_int_equal(((int (*)(void))ct__cc_sym(a, "ct_test_x"))(), 0);
    assert_int_equal(((int (*)(void))ct__cc_sym(b, "ct_test_x"))(), 5);
    ct__cc_close(a), ct__cc_close(b);
}

/* threads building one new source at once: one compile, one lib */
typedef struct { const char *src; ct_cc_lib *lib; } thr_arg;
static void *thr_build(void *p) {
    thr_arg *a = p;
    a->lib = ct__cc_build(a->src, NULL);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    const char *src = add_source("threads", 31);
    enum { NT = 6 };
    pthread_t th[NT];
    thr_arg args[NT];
    int64_t inv0 = invocations();
    for (int i = 0; i < NT; i++) {
        args[i].src = src, args[i].lib = NULL;
        assert_int_equal(pthread_create(&th[i], NULL, thr_build, &args[i]), 0);
    }
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    assert_int_equal(invocations(), inv0 + 1);
    for (int i = 0; i < NT; i++) {
        assert_non_null(args[i].lib);
        assert_ptr_equal(args[i].lib, args[0].lib);
    }
    assert_int_equal(((add_fn)ct__cc_sym(args[0].lib, "ct_test_add"))(0, 0), 31);
    for (int i = 0; i < NT; i++) ct__cc_close(args[i].lib);
}

/* a kernel as the code generator writes it: ct__ew_prelude() (its
 * `#include "ew_scalar.h"` filled in by build.c), rendered expressions,
 * an OpenMP loop; against the eager ops */
static void test_rendered_kernels_vs_eager(void **state) {
    (void)state;
    static const ct_op ops[] = {CT_OP_exp, CT_OP_tanh, CT_OP_sigmoid, CT_OP_erfinv, CT_OP_digamma, CT_OP_silu};
    ct_tensor *(*const eager[])(ct_tensor *) = {ct_exp, ct_tanh, ct_sigmoid, ct_erfinv, ct_digamma, ct_silu};
    enum { NOPS = sizeof ops / sizeof ops[0], N = 1001 };
    static char src[1 << 15];
    int len = snprintf(src, sizeof src, "%s/* eager-check %d */\n", ct__ew_prelude(), (int)getpid());
    const char *operand[1] = {"x[i]"};
    for (int k = 0; k < NOPS; k++) {
        ct_args a = ct__args(ops[k]);
        char *e = ct__ew_render(ops[k], CT_F32, operand, &a.p.ew);
        assert_non_null(e);
        len += snprintf(src + len, sizeof src - len,
                        "void ct_test_k%d(const float *restrict x, float *restrict y, int64_t n) {\n"
                        "    #pragma omp parallel for\n"
                        "    for (int64_t i = 0; i < n; i++) y[i] = (float)(%s);\n}\n",
                        k, e);
        free(e);
        assert_true(len < (int)sizeof src);
    }
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    if (!lib) fail_msg("%s", ct_last_error());
    ct_scope sc = ct_scope_begin();
    ct_tensor *x = ct_linspace(-0.95, 0.95, N, CT_F32); /* erfinv's domain; digamma(0) = -inf */
    assert_non_null(x);
    const float *xs = ct_data_ptr(x);
    static float y[N];
    for (int k = 0; k < NOPS; k++) {
        char name[32];
        snprintf(name, sizeof name, "ct_test_k%d", k);
        void (*f)(const float *, float *, int64_t) = (void (*)(const float *, float *, int64_t))ct__cc_sym(lib, name);
        assert_non_null(f);
        f(xs, y, N);
        ct_tensor *r = eager[k](x);
        assert_non_null(r);
        const float *ref = ct_data_ptr(r);
        for (int i = 0; i < N; i++) {
            bool ok = (isnan(ref[i]) && isnan(y[i])) || (isinf(ref[i]) && ref[i] == y[i]) ||
                      fabsf(y[i] - ref[i]) <= 1e-6f + 1e-5f * fabsf(ref[i]);
            if (!ok) fail_msg("op %d x=%.9g: compiled %.9g eager %.9g", k, xs[i], y[i], ref[i]);
        }
    }
    ct_scope_end(sc);
    ct__cc_close(lib);
}

/* a program that ignores SIGCHLD (the compiler's status is lost): still builds,
 * and a failed compile is still an error */
static void test_sigchld_ignored(void **state) {
    (void)state;
    struct sigaction old, ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGCHLD, &ign, &old), 0);
    ct_cc_lib *lib = ct__cc_build(add_source("sigchld", 41), NULL);
    const char *err = lib ? "" : ct_last_error();
    ct_cc_lib *bad = ct__cc_build("int broken( {\n", NULL);
    sigaction(SIGCHLD, &old, NULL);
    if (!lib) fail_msg("%s", err);
    assert_null(bad);
    ct_clear_error();
    assert_int_equal(((add_fn)ct__cc_sym(lib, "ct_test_add"))(0, 0), 41);
    ct__cc_close(lib);
}

/* a read-only cache dir (a shared, prebuilt cache): its entries load, new
 * sources build in a private dir.  A child process that cannot write the
 * dir (as root: dropped to nobody) checks it. */
static void test_readonly_cache_dir(void **state) {
    (void)state;
    const char *src = add_source("ro", 51);
    ct_cc_lib *lib = ct__cc_build(src, NULL);
    assert_non_null(lib);
    ct__cc_close(lib);
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s/tmp", g_dir); /* the child's TMPDIR: removed with g_dir */
    assert_int_equal(mkdir(tmp, 0700), 0);
    assert_int_equal(chmod(tmp, 01777), 0);
    assert_int_equal(chmod(g_dir, 0555), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(77);
        if (access(g_dir, W_OK) == 0) _exit(77); /* cannot make it unwritable here */
        setenv("TMPDIR", tmp, 1);
        int64_t inv0 = invocations();
        bool fc = false;
        ct_cc_lib *a = ct__cc_build(src, &fc);
        if (!a || !fc || invocations() != inv0) _exit(2);
        if (((add_fn)ct__cc_sym(a, "ct_test_add"))(0, 0) != 51) _exit(3);
        ct_cc_lib *b = ct__cc_build(add_source("ro", 52), &fc);
        if (!b) fprintf(stderr, "child: %s\n", ct_last_error());
        if (!b || fc || invocations() != inv0 + 1) _exit(4);
        if (((add_fn)ct__cc_sym(b, "ct_test_add"))(0, 0) != 52) _exit(5);
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    chmod(g_dir, 0700);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) skip();
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--child-load")) return child_load(argv[2], atoi(argv[3]), atoi(argv[4]));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_build_call_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_openmp_and_ew_scalar, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compile_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unusable_cache_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_openmp_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ident_recorded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key_has_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rendered_kernels_vs_eager, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigchld_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_cache_dir, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
