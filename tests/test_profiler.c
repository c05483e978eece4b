/* test_profiler.c -- the profiler (include/ctorch/profiler.h): the table
 * names the ops with their call counts, self <= total with nesting, the
 * Chrome trace is valid JSON in trace format (checked with a small JSON
 * parser below), ops from other threads are recorded, CT_PROFILE=1 in the
 * environment of a child program prints the table at exit and writes
 * CT_PROFILE_TRACE; errors.  And the determinism switch: sum / mean / var /
 * softmax / matmul / conv2d give the same bits with 1 and 2 threads. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <cblas.h>

#include "ctorch/ctorch.h"

/* ---- a small JSON parser (a DOM; validates the whole text) -------------- */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;
typedef struct jval {
    jtype t;
    double num;
    char *str;              /* J_STR */
    struct jval **items;    /* J_ARR values / J_OBJ values */
    char **keys;            /* J_OBJ */
    int n, cap;
} jval;

typedef struct { const char *p, *end; int depth; } jparser;

static void jfree(jval *v) {
    if (!v) return;
    for (int i = 0; i < v->n; i++) {
        jfree(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    free(v);
}

static void jws(jparser *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')) j->p++;
}

static char *jstring(jparser *j) {
    if (j->p >= j->end || *j->p != '"') return NULL;
    j->p++;
    size_t cap = 16, n = 0;
    char *s = malloc(cap);
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if ((unsigned char)c < 0x20) { free(s); return NULL; }
        if (c == '\\') {
            if (j->p >= j->end) { free(s); return NULL; }
            char e = *j->p++;
            if (e == 'u') {
                for (int k = 0; k < 4; k++, j->p++)
                    if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) || !*j->p) {
                        free(s);
                        return NULL;
                    }
                c = '?';
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                free(s);
                return NULL;
            }
        }
        if (n + 2 > cap) s = realloc(s, cap *= 2);
        s[n++] = c;
    }
    if (j->p >= j->end) { free(s); return NULL; }
    j->p++;
    s[n] = 0;
    return s;
}

static jval *jparse(jparser *j);

static int jadd(jval *v, jval *item, char *key) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 8;
        v->items = realloc(v->items, sizeof *v->items * (size_t)v->cap);
        if (v->t == J_OBJ) v->keys = realloc(v->keys, sizeof *v->keys * (size_t)v->cap);
    }
    v->items[v->n] = item;
    if (v->t == J_OBJ) v->keys[v->n] = key;
    v->n++;
    return 0;
}

static jval *jparse(jparser *j) {
    jws(j);
    if (j->p >= j->end || ++j->depth > 64) return NULL;
    jval *v = calloc(1, sizeof *v);
    char c = *j->p;
    if (c == '{' || c == '[') {
        v->t = c == '{' ? J_OBJ : J_ARR;
        char close = c == '{' ? '}' : ']';
        j->p++;
        jws(j);
        if (j->p < j->end && *j->p == close) { j->p++; j->depth--; return v; }
        for (;;) {
            char *key = NULL;
            if (v->t == J_OBJ) {
                jws(j);
                key = jstring(j);
                jws(j);
                if (!key || j->p >= j->end || *j->p != ':') { free(key); goto bad; }
                j->p++;
            }
            jval *item = jparse(j);
            if (!item) { free(key); goto bad; }
            jadd(v, item, key);
            jws(j);
            if (j->p >= j->end) goto bad;
            if (*j->p == ',') { j->p++; continue; }
            if (*j->p == close) { j->p++; break; }
            goto bad;
        }
    } else if (c == '"') {
        v->t = J_STR;
        if (!(v->str = jstring(j))) goto bad;
    } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "null", 4)) {
        v->t = c == 't' ? J_BOOL : J_NULL;
        j->p += 4;
    } else if (!strncmp(j->p, "false", 5)) {
        v->t = J_BOOL;
        j->p += 5;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        char *e;
        v->t = J_NUM;
        v->num = strtod(j->p, &e);
        if (e == j->p) goto bad;
        j->p = e;
    } else {
        goto bad;
    }
    j->depth--;
    return v;
bad:
    jfree(v);
    return NULL;
}

static jval *jparse_text(const char *s, size_t n) {
    jparser j = {s, s + n, 0};
    jval *v = jparse(&j);
    if (!v) return NULL;
    jws(&j);
    if (j.p != j.end) { jfree(v); return NULL; }
    return v;
}

static jval *jget(const jval *o, const char *key) {
    if (!o || o->t != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

static char *read_file(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* Reads a trace file and checks the Chrome trace format: an object with a
 * traceEvents array whose events all have name/ph/ts/dur/pid/tid. */
static jval *load_trace(const char *path) {
    size_t n = 0;
    char *text = read_file(path, &n);
    assert_non_null(text);
    jval *root = jparse_text(text, n);
    free(text);
    assert_non_null(root);
    assert_int_equal(root->t, J_OBJ);
    jval *ev = jget(root, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->t, J_ARR);
    for (int i = 0; i < ev->n; i++) {
        jval *e = ev->items[i];
        assert_int_equal(e->t, J_OBJ);
        jval *nm = jget(e, "name"), *ph = jget(e, "ph");
        assert_true(nm && nm->t == J_STR);
        assert_true(ph && ph->t == J_STR && !strcmp(ph->str, "X"));
        static const char *const num_keys[] = {"ts", "dur", "pid", "tid"};
        for (int k = 0; k < 4; k++) {
            jval *x = jget(e, num_keys[k]);
            assert_true(x && x->t == J_NUM);
        }
        assert_true(jget(e, "dur")->num >= 0);
        jval *args = jget(e, "args");
        assert_true(args && args->t == J_OBJ);
    }
    return root;
}

static void make_tmp(char *buf, size_t n, const char *name) {
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/ct_prof_%d_%s", dir && *dir ? dir : "/tmp", (int)getpid(), name);
}

/* The row of op `name` in a table: fills the # of Calls column. */
static int table_calls(const char *table, const char *name, long *calls) {
    const char *p = table;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        char tok[9][128];
        int nt = sscanf(line, "%127s %127s %127s %127s %127s %127s %127s %127s %127s", tok[0],
                        tok[1], tok[2], tok[3], tok[4], tok[5], tok[6], tok[7], tok[8]);
        if (nt == 9 && !strcmp(tok[0], name)) {
            *calls = strtol(tok[6], NULL, 10);
            return 1;
        }
        p = eol ? eol + 1 : NULL;
    }
    return 0;
}

static void expect_status(ct_status got, ct_status want) { assert_int_equal(got, want); }

/* ---- tests ------------------------------------------------------------------ */
static void test_table_counts_and_flops(void **state) {
    (void)state;
    ct_manual_seed(1);
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_randn(CT_SHAPE(64, 32), CT_F32), *b = ct_randn(CT_SHAPE(32, 16), CT_F32);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 3, 8, 8), CT_F32), *w = ct_randn(CT_SHAPE(4, 3, 3, 3), CT_F32);
    ct_tensor *h = ct_randn(CT_SHAPE(5, 7), CT_F16);
    assert_false(ct_profiler_is_enabled());
    expect_status(ct_profiler_start(NULL), CT_OK);
    assert_true(ct_profiler_is_enabled());
    for (int k = 0; k < 3; k++) assert_non_null(ct_matmul(a, b));
    for (int k = 0; k < 2; k++) assert_non_null(ct_conv2d(x, w, NULL, NULL, NULL, NULL, 1));
    assert_non_null(ct_amax(h, (const int64_t[]){1}, 1, false)); /* f16: nests a copy */
    expect_status(ct_profiler_push_range("my_range"), CT_OK);
    assert_non_null(ct_relu(a));
    expect_status(ct_profiler_pop_range(), CT_OK);
    expect_status(ct_profiler_stop(), CT_OK);
    assert_false(ct_profiler_is_enabled());
    assert_true(ct_profiler_event_count() >= 8);

    char *t = ct_profiler_table(NULL, 0);
    assert_non_null(t);
    fputs(t, stdout);
    assert_non_null(strstr(t, "Self CPU %"));
    assert_non_null(strstr(t, "CPU total %"));
    assert_non_null(strstr(t, "CPU time avg"));
    assert_non_null(strstr(t, "# of Calls"));
    assert_non_null(strstr(t, "GFLOPS"));
    assert_non_null(strstr(t, "Self CPU time total:"));
    long calls = -1;
    /* 2-D matmul runs as the mm or matmul kernel */
    assert_true(table_calls(t, "mm", &calls) || table_calls(t, "matmul", &calls));
    assert_int_equal(calls, 3);
    assert_true(table_calls(t, "conv", &calls));
    assert_int_equal(calls, 2);
    assert_true(table_calls(t, "amax", &calls));
    assert_int_equal(calls, 1);
    assert_true(table_calls(t, "my_range", &calls));
    assert_int_equal(calls, 1);
    assert_true(table_calls(t, "relu", &calls));
    assert_int_equal(calls, 1);
    free(t);

    /* sort keys and row limits */
    static const char *const keys[] = {"self_cpu_time_total", "cpu_time_total", "cpu_time",
                                       "count", "flops"};
    for (int k = 0; k < 5; k++) {
        t = ct_profiler_table(keys[k], 2);
        assert_non_null(t);
        assert_non_null(strstr(t, "(2 of "));
        free(t);
    }
    t = ct_profiler_table("count", 1); /* mm/matmul has the most calls */
    assert_true(table_calls(t, "mm", &calls) || table_calls(t, "matmul", &calls));
    free(t);
    t = ct_profiler_table_by_shape(NULL, 0);
    assert_non_null(t);
    assert_non_null(strstr(t, "Input Shapes"));
    assert_non_null(strstr(t, "[[2, 3, 8, 8], [4, 3, 3, 3]]"));
    free(t);

    /* the trace: exact FLOPs of conv and mm, nesting of amax's copy */
    char path[256];
    make_tmp(path, sizeof path, "trace.json");
    expect_status(ct_profiler_export_chrome_trace(path), CT_OK);
    jval *root = load_trace(path);
    jval *ev = jget(root, "traceEvents");
    assert_true(ev->n >= 8);
    int nconv = 0, ngemm = 0, nrange = 0;
    double amax_ts = -1, amax_end = -1;
    for (int i = 0; i < ev->n; i++) {
        jval *e = ev->items[i], *args = jget(e, "args");
        const char *name = jget(e, "name")->str;
        if (!strcmp(name, "conv")) {
            nconv++;
            /* 2 * N * Cout * Ho * Wo * Cin * kh * kw */
            assert_true(jget(args, "flops")->num == 2.0 * 2 * 4 * 6 * 6 * 3 * 3 * 3);
            jval *dims = jget(args, "Input Dims");
            assert_true(dims && dims->t == J_ARR && dims->n == 2);
            jval *types = jget(args, "Input type");
            assert_true(types && types->t == J_ARR && !strcmp(types->items[0]->str, "float32"));
            /* bytes: inputs + output */
            assert_true(jget(args, "bytes")->num == 4.0 * (2 * 3 * 64 + 4 * 27 + 2 * 4 * 36));
        } else if (!strcmp(name, "mm") || !strcmp(name, "matmul")) {
            ngemm++;
            assert_true(jget(args, "flops")->num == 2.0 * 64 * 16 * 32);
        } else if (!strcmp(name, "my_range")) {
            nrange++;
            assert_string_equal(jget(e, "cat")->str, "user_annotation");
        } else if (!strcmp(name, "amax")) {
            amax_ts = jget(e, "ts")->num;
            amax_end = amax_ts + jget(e, "dur")->num;
        }
    }
    assert_int_equal(nconv, 2);
    assert_int_equal(ngemm, 3);
    assert_int_equal(nrange, 1);
    assert_true(amax_ts >= 0);
    int nested_copy = 0;
    for (int i = 0; i < ev->n; i++) {
        jval *e = ev->items[i];
        if (strcmp(jget(e, "name")->str, "copy")) continue;
        double ts = jget(e, "ts")->num, end = ts + jget(e, "dur")->num;
        if (ts >= amax_ts && end <= amax_end + 1e-3) nested_copy = 1;
    }
    assert_true(nested_copy);
    jfree(root);
    unlink(path);
    ct_scope_end(s);
}

static void test_mlp_step(void **state) {
    (void)state;
    ct_manual_seed(2);
    ct_scope s = ct_scope_begin();
    ct_module *mods[3] = {ct_linear_new(8, 16, true), ct_relu_new(), ct_linear_new(16, 4, true)};
    ct_module *mlp = ct_sequential_new(mods, 3);
    assert_non_null(mlp);
    for (int k = 0; k < 3; k++) ct_module_release(mods[k]);
    ct_tensor *params[8];
    int np = ct_module_named_parameters(mlp, NULL, params, 8);
    assert_int_equal(np, 4);
    ct_optimizer *opt = ct_sgd_new(params, np, 0.1, 0, 0, 0, false, false);
    assert_non_null(opt);
    ct_tensor *x = ct_randn(CT_SHAPE(32, 8), CT_F32), *y = ct_randn(CT_SHAPE(32, 4), CT_F32);
    expect_status(ct_profiler_start(&(ct_profiler_opts){.record_shapes = true, .with_flops = true}),
                  CT_OK);
    for (int step = 0; step < 2; step++) {
        ct_scope s2 = ct_scope_begin();
        expect_status(ct_profiler_push_range("train_step"), CT_OK);
        ct_optim_zero_grad(opt, true);
        ct_tensor *loss = ct_mse_loss(ct_module_forward1(mlp, x), y, CT_REDUCTION_MEAN);
        assert_non_null(loss);
        expect_status(ct_profiler_push_range("backward"), CT_OK);
        expect_status(ct_backward(loss, NULL, false, false), CT_OK);
        expect_status(ct_profiler_pop_range(), CT_OK);
        expect_status(ct_optim_step(opt), CT_OK);
        expect_status(ct_profiler_pop_range(), CT_OK);
        ct_scope_end(s2);
    }
    expect_status(ct_profiler_stop(), CT_OK);
    char *t = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(t);
    fputs(t, stdout);
    long calls;
    assert_true(table_calls(t, "train_step", &calls));
    assert_int_equal(calls, 2);
    assert_true(table_calls(t, "backward", &calls));
    assert_int_equal(calls, 2);
    assert_true(table_calls(t, "relu", &calls));
    assert_true(calls >= 2);
    /* the optimizer's fused update does not pass through the op table: it is
     * a range of its own, named like torch's record_function */
    assert_true(table_calls(t, "Optimizer.step#SGD.step", &calls));
    assert_int_equal(calls, 2);
    free(t);
    char path[256];
    make_tmp(path, sizeof path, "mlp.json");
    expect_status(ct_profiler_export_chrome_trace(path), CT_OK);
    jval *root = load_trace(path);
    /* each train_step contains its ops: the sum of the ops' self times
     * inside the ranges is at most the ranges' total */
    jval *ev = jget(root, "traceEvents");
    double range_total = 0, op_total = 0;
    for (int i = 0; i < ev->n; i++) {
        jval *e = ev->items[i];
        if (!strcmp(jget(e, "name")->str, "train_step")) range_total += jget(e, "dur")->num;
        else if (!strcmp(jget(e, "cat")->str, "cpu_op")) op_total += 0; /* nested: not additive */
    }
    assert_true(range_total > 0);
    (void)op_total;
    jfree(root);
    unlink(path);
    ct_optim_free(opt);
    ct_module_release(mlp);
    ct_scope_end(s);
}

/* BatchNorm's fused kernels are table ops: batch_norm_fwd (training),
 * batch_norm_bwd and batch_norm_eval, recorded with shapes and FLOPs */
static void test_batch_norm_events(void **state) {
    (void)state;
    ct_manual_seed(3);
    ct_scope s = ct_scope_begin();
    ct_module *bn = ct_batch_norm2d_new(4, 1e-5, 0.1, true, true);
    assert_non_null(bn);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 4, 5, 5), CT_F32);
    expect_status(ct_set_requires_grad(x, true), CT_OK);
    expect_status(ct_profiler_start(&(ct_profiler_opts){.record_shapes = true, .with_flops = true}),
                  CT_OK);
    ct_tensor *y = ct_module_forward1(bn, x);
    assert_non_null(y);
    expect_status(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
    ct_module_eval(bn); /* inference: the fused evaluation kernel */
    bool prev = ct_set_grad_enabled(false);
    assert_non_null(ct_module_forward1(bn, x));
    ct_set_grad_enabled(prev);
    expect_status(ct_profiler_stop(), CT_OK);
    char *t = ct_profiler_table("cpu_time_total", 0);
    assert_non_null(t);
    long calls;
    assert_true(table_calls(t, "batch_norm_fwd", &calls));
    assert_int_equal(calls, 1);
    assert_true(table_calls(t, "batch_norm_eval", &calls));
    assert_int_equal(calls, 1);
    assert_true(table_calls(t, "batch_norm_bwd", &calls));
    assert_int_equal(calls, 1);
    free(t);
    t = ct_profiler_table_by_shape("cpu_time_total", 0);
    assert_non_null(t);
    assert_non_null(strstr(t, "[[2, 4, 5, 5], [4], [4]]"));
    free(t);
    ct_module_release(bn);
    ct_scope_end(s);
}

static void *worker(void *p) {
    ct_tensor *a = p;
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < 10; k++) ct_add(a, a);
    ct_scope_end(s);
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    ct_tensor *a = ct_ones(CT_SHAPE(16), CT_F32);
    expect_status(ct_profiler_start(NULL), CT_OK);
    pthread_t th[3];
    for (int k = 0; k < 3; k++) assert_int_equal(pthread_create(&th[k], NULL, worker, a), 0);
    for (int k = 0; k < 3; k++) pthread_join(th[k], NULL);
    expect_status(ct_profiler_stop(), CT_OK);
    char *t = ct_profiler_table(NULL, 0);
    long calls;
    assert_true(table_calls(t, "add", &calls));
    assert_int_equal(calls, 30);
    free(t);
    char path[256];
    make_tmp(path, sizeof path, "threads.json");
    expect_status(ct_profiler_export_chrome_trace(path), CT_OK);
    jval *root = load_trace(path);
    jval *ev = jget(root, "traceEvents");
    double tids[3];
    int ntid = 0;
    for (int i = 0; i < ev->n; i++) {
        double tid = jget(ev->items[i], "tid")->num;
        int seen = 0;
        for (int k = 0; k < ntid; k++) seen |= tids[k] == tid;
        if (!seen && ntid < 3) tids[ntid++] = tid;
    }
    assert_int_equal(ntid, 3);
    jfree(root);
    unlink(path);
    ct_release(a);
    /* an op with many inputs: the shape list is cut at a whole entry and
     * the trace stays valid JSON */
    ct_scope s = ct_scope_begin();
    ct_tensor *parts[300];
    for (int k = 0; k < 300; k++) parts[k] = ct_ones(CT_SHAPE(1, 2, 3), CT_F32);
    expect_status(ct_profiler_start(NULL), CT_OK);
    assert_non_null(ct_cat(parts, 300, 0));
    expect_status(ct_profiler_stop(), CT_OK);
    expect_status(ct_profiler_export_chrome_trace(path), CT_OK);
    root = load_trace(path);
    int found = 0;
    ev = jget(root, "traceEvents");
    for (int i = 0; i < ev->n; i++) {
        if (strcmp(jget(ev->items[i], "name")->str, "cat")) continue;
        jval *dims = jget(jget(ev->items[i], "args"), "Input Dims");
        assert_true(dims && dims->t == J_ARR && dims->n > 10 && dims->n < 300);
        found = 1;
    }
    assert_true(found);
    jfree(root);
    unlink(path);
    ct_scope_end(s);
    /* a second session starts clean */
    expect_status(ct_profiler_start(NULL), CT_OK);
    expect_status(ct_profiler_stop(), CT_OK);
    assert_int_equal(ct_profiler_event_count(), 0);
}

static void test_errors(void **state) {
    (void)state;
    ct_profiler_clear();
    assert_null(ct_profiler_table(NULL, 0));
    assert_int_equal(ct_last_error_code(), CT_ERR_RUNTIME);
    expect_status(ct_profiler_export_chrome_trace("/tmp/never.json"), CT_ERR_RUNTIME);
    expect_status(ct_profiler_stop(), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "no session"));
    /* ranges are no-ops when the profiler is off */
    expect_status(ct_profiler_push_range("off"), CT_OK);
    expect_status(ct_profiler_pop_range(), CT_OK);
    expect_status(ct_profiler_start(NULL), CT_OK);
    expect_status(ct_profiler_start(NULL), CT_ERR_RUNTIME);
    expect_status(ct_profiler_pop_range(), CT_ERR_RUNTIME);
    expect_status(ct_profiler_push_range(NULL), CT_ERR_NULL);
    expect_status(ct_profiler_push_range("left open"), CT_OK);
    expect_status(ct_profiler_stop(), CT_OK);
    expect_status(ct_profiler_pop_range(), CT_OK); /* closes the stale frame, drops it */
    assert_null(ct_profiler_table("bogus", 0));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "bogus"));
    expect_status(ct_profiler_export_chrome_trace(NULL), CT_ERR_NULL);
    expect_status(ct_profiler_export_chrome_trace("/nonexistent-dir/x/trace.json"), CT_ERR_IO);
    /* the limit on events */
    ct_tensor *a = ct_ones(CT_SHAPE(4), CT_F32);
    expect_status(ct_profiler_start(&(ct_profiler_opts){.max_events = 5}), CT_OK);
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < 9; k++) ct_neg(a);
    ct_scope_end(s);
    expect_status(ct_profiler_stop(), CT_OK);
    assert_int_equal(ct_profiler_event_count(), 5);
    char *t = ct_profiler_table(NULL, 0);
    assert_non_null(strstr(t, "events dropped beyond the limit of 5"));
    assert_null(strstr(t, "[")); /* record_shapes off: no shapes anywhere */
    free(t);
    ct_release(a);
    ct_profiler_clear();
}

/* CT_PROFILE=1: a child program (this binary with --profile-child) prints
 * the table at exit and writes the trace. */
static int child_main(void) {
    ct_manual_seed(3);
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_randn(CT_SHAPE(32, 32), CT_F32);
    for (int k = 0; k < 4; k++) ct_relu(ct_matmul(a, a));
    ct_sum(a, NULL, 0, false);
    ct_scope_end(s);
    return ct_profiler_is_enabled() ? 0 : 3;
}

static void test_env_child(void **state) {
    (void)state;
    char out[256], trace[256];
    make_tmp(out, sizeof out, "child.txt");
    make_tmp(trace, sizeof trace, "child.json");
    unlink(trace);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0) _exit(5);
        close(fd);
        setenv("CT_PROFILE", "1", 1);
        setenv("CT_PROFILE_TRACE", trace, 1);
        setenv("CT_PROFILE_SHAPES", "1", 1);
        execl("/proc/self/exe", "test_profiler", "--profile-child", (char *)NULL);
        _exit(6);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    size_t n;
    char *text = read_file(out, &n);
    assert_non_null(text);
    fputs(text, stdout);
    assert_non_null(strstr(text, "Self CPU time total:"));
    assert_non_null(strstr(text, "Input Shapes"));
    long calls;
    assert_true(table_calls(text, "relu", &calls));
    assert_int_equal(calls, 4);
    free(text);
    jval *root = load_trace(trace);
    assert_true(jget(root, "traceEvents")->n >= 9);
    jfree(root);
    unlink(out);
    unlink(trace);
}

/* ---- determinism across thread counts ---------------------------------------- */
#define NRES 9

static void run_cases(ct_tensor *const *in, ct_tensor **res) {
    res[0] = ct_sum(in[0], NULL, 0, false);                      /* f64 [1<<20]: chunked */
    res[1] = ct_sum(in[1], NULL, 0, false);                      /* f32 */
    res[2] = ct_mean(in[0], NULL, 0, false);
    res[3] = ct_var(in[0], NULL, 0, 1.0, false);
    res[4] = ct_softmax(in[2], 1);
    res[5] = ct_matmul(in[3], in[4]);
    res[6] = ct_conv2d(in[5], in[6], NULL, NULL, (const int64_t[]){1, 1}, NULL, 1);
    res[7] = ct_sum(in[2], (const int64_t[]){0}, 1, false);
    res[8] = ct_mean(in[7], NULL, 0, false);                     /* f32 [3<<18] */
}

static void test_determinism(void **state) {
    (void)state;
    int nth0 = ct_get_num_threads();
    assert_false(ct_are_deterministic_algorithms_enabled());
    ct_manual_seed(4);
    ct_scope s = ct_scope_begin();
    ct_tensor *in[8] = {
        ct_randn(CT_SHAPE(1 << 20), CT_F64),      ct_randn(CT_SHAPE(1 << 20), CT_F32),
        ct_randn(CT_SHAPE(64, 1000), CT_F32),     ct_randn(CT_SHAPE(256, 192), CT_F32),
        ct_randn(CT_SHAPE(192, 320), CT_F32),     ct_randn(CT_SHAPE(4, 8, 32, 32), CT_F32),
        ct_randn(CT_SHAPE(16, 8, 3, 3), CT_F32),  ct_randn(CT_SHAPE(3 << 18), CT_F32),
    };
    /* OpenBLAS's sgemm gives other bits with 1 and 2 threads for these
     * shapes: the switch must pin it to one thread and restore it after */
    int ob0 = openblas_get_num_threads();
    openblas_set_num_threads(2);
    ct_use_deterministic_algorithms(true);
    assert_true(ct_are_deterministic_algorithms_enabled());
    assert_int_equal(openblas_get_num_threads(), 1);
    ct_tensor *r1[NRES], *r2[NRES];
    ct_set_num_threads(1);
    run_cases(in, r1);
    ct_set_num_threads(2);
    run_cases(in, r2);
    for (int k = 0; k < NRES; k++) {
        assert_non_null(r1[k]);
        assert_non_null(r2[k]);
        ct_tensor *c1 = ct_contiguous(r1[k]), *c2 = ct_contiguous(r2[k]);
        size_t nb = (size_t)ct_numel(c1) * ct_dtype_size(ct_get_dtype(c1));
        assert_int_equal(ct_numel(c1), ct_numel(c2));
        if (memcmp(ct_data_ptr(c1), ct_data_ptr(c2), nb) != 0)
            fail_msg("case %d differs between 1 and 2 threads under the switch", k);
    }
    /* the chunked sum is still right */
    double ref = 0;
    const double *p = ct_data_ptr(in[0]);
    for (int64_t i = 0; i < (1 << 20); i++) ref += p[i];
    assert_true(fabs(ct_item(r1[0]) - ref) < 1e-9 * 1024);
    ct_use_deterministic_algorithms(false);
    assert_false(ct_are_deterministic_algorithms_enabled());
    assert_int_equal(openblas_get_num_threads(), 2);
    openblas_set_num_threads(ob0);
    ct_set_num_threads(nth0);
    ct_scope_end(s);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--profile-child")) return child_main();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_counts_and_flops),
        cmocka_unit_test(test_mlp_step),
        cmocka_unit_test(test_batch_norm_events),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_env_child),
        cmocka_unit_test(test_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
