/* test_hostile.c -- hostile inputs found by fuzzing: sizes that overflow
 * (samplers, shapes with a zero dim, expand, pad), NULL arguments whose
 * error must name the argument, a dataset with a negative length, and the
 * autograd free hook written from several threads.  Each case failed (a
 * crash, UB, a silently wrong result or an empty message) before its fix. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

#include "ops/op_table.h"
#include "test_util.h"

#define BIG_N (((int64_t)1 << 61) + 1) /* 8 * BIG_N wraps to 8 in size_t */

/* The call failed with `code` and a message containing every part. */
static void expect_msg(ct_status code, const char *part1, const char *part2) {
    assert_int_equal(ct_last_error_code(), code);
    const char *m = ct_last_error();
    if (!strstr(m, part1)) fail_msg("error \"%s\" lacks \"%s\"", m, part1);
    if (part2 && !strstr(m, part2)) fail_msg("error \"%s\" lacks \"%s\"", m, part2);
    ct_clear_error();
}

/* ---- 1. sampler index buffers: 8 * n must not wrap --------------------- */
static void check_indices_fail(ct_sampler *s) {
    assert_non_null(s);
    int64_t *idx = (int64_t *)(uintptr_t)1;
    ct_clear_error();
    assert_int_equal(ct_sampler_indices(s, &idx), -1);
    assert_null(idx);
    expect_msg(CT_ERR_OVERFLOW, "sampler_indices", "overflow");
    int64_t *off = NULL;
    assert_int_equal(ct_sampler_batches(s, &idx, &off), -1);
    assert_null(idx);
    assert_null(off);
    expect_msg(CT_ERR_OVERFLOW, "sampler_indices", NULL);
}

static void test_sampler_huge_length(void **state) {
    (void)state;
    ct_sampler *seq = ct_sequential_sampler_new(BIG_N);
    check_indices_fail(seq);
    assert_int_equal(ct_sampler_len(seq), BIG_N);
    ct_sampler *bs = ct_batch_sampler_new(seq, 3, false);
    check_indices_fail(bs);
    assert_int_equal(ct_sampler_len(bs), BIG_N / 3 + (BIG_N % 3 != 0));
    ct_sampler_release(bs);
    ct_sampler_release(seq);
    /* without replacement: a permutation of BIG_N */
    ct_sampler *rnd = ct_random_sampler_new(BIG_N, false, -1, 7);
    check_indices_fail(rnd);
    ct_sampler_release(rnd);
    /* with replacement: BIG_N draws from 10 */
    ct_sampler *rep = ct_random_sampler_new(10, true, BIG_N, 7);
    check_indices_fail(rep);
    ct_sampler_release(rep);
    /* the batch count of a near-INT64_MAX length does not overflow */
    ct_sampler *mx = ct_sequential_sampler_new(INT64_MAX);
    ct_sampler *mb = ct_batch_sampler_new(mx, 2, false);
    assert_int_equal(ct_sampler_len(mb), INT64_MAX / 2 + 1);
    ct_sampler_release(mb);
    ct_sampler_release(mx);
    /* a distributed sampler whose padded total overflows int64 */
    ct_clear_error();
    assert_null(ct_distributed_sampler_new(INT64_MAX, 2, 0, false, 0, false));
    expect_msg(CT_ERR_OVERFLOW, "distributed_sampler_new", NULL);
}

static int64_t big_len(void *self) { (void)self; return BIG_N; }
static int64_t neg_len(void *self) { (void)self; return -5; }
static ct_status no_get(void *self, int64_t i, ct_sample *out) {
    (void)self; (void)i; (void)out;
    return ct__error_status(CT_ERR_RUNTIME, "get must not be called");
}

static void test_dataloader_huge_length(void **state) {
    (void)state;
    static const ct_dataset_vtable vt = {.len = big_len, .get = no_get};
    for (int shuffle = 0; shuffle < 2; shuffle++) {
        ct_dataset *ds = ct_dataset_new(&vt, NULL);
        assert_non_null(ds);
        ct_dataloader_opts o = {.batch_size = 4, .shuffle = shuffle, .seed = 1};
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        assert_non_null(dl);
        ct_clear_error();
        assert_int_equal(ct_dataloader_begin_epoch(dl, 0), CT_ERR_OVERFLOW);
        expect_msg(CT_ERR_OVERFLOW, "sampler_indices", NULL);
        ct_dataloader_free(dl);
        ct_dataset_release(ds);
    }
}

/* ---- 2. a zero dim next to huge dims: strides must not overflow -------- */
static void test_zero_dim_huge_shape(void **state) {
    (void)state;
    const int64_t big = (int64_t)1 << 62;
    ct_clear_error();
    expect_err(ct_empty(CT_SHAPE(0, big, big), CT_F32), CT_ERR_OVERFLOW, "empty: shape [0, ");
    expect_err(ct_zeros(CT_SHAPE(big, 0, big, 4), CT_U8), CT_ERR_OVERFLOW, "nonzero dims");
    /* still fine: zero dims with a product of the others that fits */
    ct_tensor *e = ct_empty(CT_SHAPE(0, big, 1), CT_F32);
    assert_non_null(e);
    assert_int_equal(ct_numel(e), 0);
    assert_int_equal(ct_stride(e, 0), big);
    /* a view of an empty tensor to such a shape */
    expect_err(ct_view(e, CT_SHAPE(0, big, big)), CT_ERR_OVERFLOW, "view");
    ct_release(e);
    /* the helper itself saturates instead of overflowing (UBSan checks) */
    int64_t st[3];
    ct__contiguous_strides((const int64_t[]){0, big, big}, 3, st);
    assert_int_equal(st[2], 1);
    assert_int_equal(st[1], big);
    assert_int_equal(st[0], INT64_MAX);
}

/* a 20-byte IDX file: uint8, 4 dims 0 x (2^32-1)^3, no data */
static void test_idx_zero_dim_huge_shape(void **state) {
    (void)state;
    const uint8_t b[20] = {0, 0, 0x08, 4, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
                           0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    char path[] = "/tmp/ct_hostile_idx_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b, sizeof b), (ssize_t)sizeof b);
    close(fd);
    ct_clear_error();
    expect_err(ct_idx_load(path), CT_ERR_OVERFLOW, "too many elements");
    expect_err(ct_idx_load_buffer(b, sizeof b), CT_ERR_OVERFLOW, "too many elements");
    unlink(path);
    /* a legitimately empty IDX file still loads: 0 x 3 */
    const uint8_t ok[12] = {0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 3};
    ct_tensor *t = ct_idx_load_buffer(ok, sizeof ok);
    assert_non_null(t);
    assert_int_equal(ct_numel(t), 0);
    ct_release(t);
}

/* ---- 3. expand to a shape whose numel overflows ------------------------ */
static void test_expand_overflow(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(1, 1), CT_F32);
    const int64_t b32 = (int64_t)1 << 32;
    ct_clear_error();
    expect_err(ct_expand(x, CT_SHAPE(b32, b32)), CT_ERR_OVERFLOW, "expand: shape [4294967296, 4294967296]");
    expect_err(ct_expand(x, CT_SHAPE(3, b32, b32)), CT_ERR_OVERFLOW, "expand");
    ct_tensor *x3 = ct_zeros(CT_SHAPE(1, 1, 1), CT_F32);
    expect_err(ct_expand(x3, CT_SHAPE(0, (int64_t)1 << 62, (int64_t)1 << 62)), CT_ERR_OVERFLOW, "expand");
    expect_err(ct_expand(x, NULL, 2), CT_ERR_NULL, "expand: argument 'shape'");
    /* a large but representable expansion still works */
    ct_tensor *v = ct_expand(x, CT_SHAPE(b32, 4));
    assert_non_null(v);
    assert_int_equal(ct_numel(v), b32 * 4);
    ct_scope_end(s);
}

/* ---- 4. pad: the padded size overflows --------------------------------- */
static void test_pad_overflow(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_zeros(CT_SHAPE(2, 3), CT_F32);
    ct_clear_error();
    expect_err(ct_pad(x, (const int64_t[]){INT64_MAX, 1}, 2, CT_PAD_CONSTANT, 0), CT_ERR_OVERFLOW,
               "pad: the padded size overflows");
    expect_err(ct_pad(x, (const int64_t[]){1, INT64_MAX}, 2, CT_PAD_CONSTANT, 0), CT_ERR_OVERFLOW,
               "padded size overflows");
    expect_err(ct_pad(x, (const int64_t[]){0, 0, INT64_MAX, INT64_MAX}, 4, CT_PAD_CONSTANT, 0),
               CT_ERR_OVERFLOW, "padded size overflows");
    /* INT64_MIN + INT64_MAX + 3 = 2 would "fit", but -INT64_MIN does not */
    expect_err(ct_pad(x, (const int64_t[]){INT64_MIN, INT64_MAX}, 2, CT_PAD_CONSTANT, 0), CT_ERR_OVERFLOW,
               "padded size overflows");
    /* each dim fits, their product does not */
    const int64_t b40 = (int64_t)1 << 40;
    expect_err(ct_pad(x, (const int64_t[]){b40, 0, b40, 0}, 4, CT_PAD_CONSTANT, 0), CT_ERR_OVERFLOW, "pad: shape");
    /* replicate: 2^61 + 3 indices of 8 bytes (used to wrap and overrun) */
    ct_tensor *x3 = ct_zeros(CT_SHAPE(1, 2, 3), CT_F32);
    expect_err(ct_pad(x3, (const int64_t[]){(int64_t)1 << 61, 0}, 2, CT_PAD_REPLICATE, 0), CT_ERR_OVERFLOW,
               "pad: the 2305843009213693955 indices");
    /* the genuine negative-size error keeps its message */
    expect_err(ct_pad(x, (const int64_t[]){-2, -2}, 2, CT_PAD_CONSTANT, 0), CT_ERR_ARG, "negative output size");
    ct_tensor *p = ct_pad(x, (const int64_t[]){1, 2}, 2, CT_PAD_CONSTANT, 0);
    assert_non_null(p);
    assert_int_equal(ct_size(p, 1), 6);
    ct_scope_end(s);
}

/* ---- 5. NULL arguments name the op and the argument -------------------- */
static void test_null_arguments(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_ones(CT_SHAPE(2, 2), CT_F32);
    ct_clear_error();
    expect_err(ct_add(x, NULL), CT_ERR_NULL, "add: argument 'b' is NULL");
    expect_err(ct_add(NULL, x), CT_ERR_NULL, "add: argument 'a' is NULL");
    expect_err(ct_add_(x, NULL), CT_ERR_NULL, "add: argument 'b' is NULL");
    expect_err(ct_matmul(x, NULL), CT_ERR_NULL, "matmul: argument 'b' is NULL");
    expect_err(ct_exp(NULL), CT_ERR_NULL, "exp: input 0 is NULL");
    expect_err(ct_mul(x, NULL), CT_ERR_NULL, "mul: input 1 is NULL");
    expect_err(ct_sum(NULL, NULL, 0, false), CT_ERR_NULL, "sum: argument 'x' is NULL");
    expect_err(ct_transpose(NULL, 0, 1), CT_ERR_NULL, "transpose: argument");
    ct_tensor *list[3] = {x, NULL, x};
    expect_err(ct_cat(list, 3, 0), CT_ERR_NULL, "cat: element 1 of argument 'ts' is NULL");
    expect_err(ct_stack(list, 3, 0), CT_ERR_NULL, "stack: element 1");
    ct_module *lin = ct_linear_new(2, 3, true);
    assert_non_null(lin);
    expect_err(ct_module_forward1(lin, NULL), CT_ERR_NULL, "module_forward: input 0 of the Linear module is NULL");
    ct_module_release(lin);
    /* status-returning calls */
    assert_int_equal(ct_backward(NULL, NULL, false, false), CT_ERR_NULL);
    expect_msg(CT_ERR_NULL, "backward: argument 't' is NULL", NULL);
    assert_int_equal(ct_set_requires_grad(NULL, true), CT_ERR_NULL);
    expect_msg(CT_ERR_NULL, "set_requires_grad: argument 't' is NULL", NULL);
    /* a pending error is kept: the NULL came from the failed matmul */
    ct_tensor *w = ct_ones(CT_SHAPE(3, 5), CT_F32);
    ct_tensor *y = ct_relu(ct_add(ct_matmul(x, w), x));
    expect_err(y, CT_ERR_SHAPE, "matmul");
    assert_int_equal(ct_backward(ct_sum(ct_matmul(w, x), NULL, 0, false), NULL, false, false), CT_ERR_NULL);
    expect_msg(CT_ERR_SHAPE, "matmul", NULL);
    ct_scope_end(s);
}

static void test_dataset_negative_length(void **state) {
    (void)state;
    static const ct_dataset_vtable vt = {.len = neg_len, .get = no_get};
    ct_dataset *ds = ct_dataset_new(&vt, NULL);
    assert_non_null(ds);
    ct_clear_error();
    assert_true(ct_dataset_len(ds) < 0);
    expect_msg(CT_ERR_ARG, "dataset_len: the dataset's len() returned -5", NULL);
    assert_int_equal(ct_dataset_len(ds), -1); /* the documented failure value */
    ct_clear_error();
    ct_dataloader_opts o = {.batch_size = 2};
    expect_err(ct_dataloader_new(ds, &o), CT_ERR_ARG, "len() returned -5");
    o.shuffle = true;
    expect_err(ct_dataloader_new(ds, &o), CT_ERR_ARG, "len() returned -5");
    ct_dataset_release(ds);
}

/* ---- 6. autograd metadata created on several threads at once ----------- */
#define HT_THREADS 8
#define HT_ITERS 200
static pthread_barrier_t g_barrier;

static void *meta_worker(void *arg) {
    (void)arg;
    long bad = 0;
    pthread_barrier_wait(&g_barrier);
    for (int i = 0; i < HT_ITERS; i++) {
        ct_tensor *t = ct_empty(CT_SHAPE(4), CT_F32);
        if (!t || ct_set_requires_grad(t, true) != CT_OK || !ct_requires_grad(t)) bad++;
        ct_release(t); /* runs the free hook on this thread */
    }
    return (void *)bad;
}

static void test_autograd_meta_threads(void **state) {
    (void)state;
    pthread_t th[HT_THREADS];
    assert_int_equal(pthread_barrier_init(&g_barrier, NULL, HT_THREADS), 0);
    int64_t live = ct_live_tensors();
    for (int i = 0; i < HT_THREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, meta_worker, NULL), 0);
    long bad = 0;
    for (int i = 0; i < HT_THREADS; i++) {
        void *r;
        assert_int_equal(pthread_join(th[i], &r), 0);
        bad += (long)r;
    }
    pthread_barrier_destroy(&g_barrier);
    assert_int_equal(bad, 0);
    assert_int_equal(ct_live_tensors(), live);
}

int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. "test_pad*" */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sampler_huge_length),
        cmocka_unit_test(test_dataloader_huge_length),
        cmocka_unit_test(test_zero_dim_huge_shape),
        cmocka_unit_test(test_idx_zero_dim_huge_shape),
        cmocka_unit_test(test_expand_overflow),
        cmocka_unit_test(test_pad_overflow),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_dataset_negative_length),
        cmocka_unit_test(test_autograd_meta_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
