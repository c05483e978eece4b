/* test_datapipe.c -- DataPipes and DataLoader2: each stage's output on
 * small inputs (documented orders), save/restore at every position equals
 * an uninterrupted run, identical results with 0/1/2/3 workers, callback
 * and worker errors propagate (never hang), early stop, file stages on a
 * temporary directory, hostile state blobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

/* ---- helpers ----------------------------------------------------------------- */
/* Runs p to the end (at most max items); returns the repr of the list of
 * items, or "ERROR: <message>" */
static char *drain(ct_datapipe *p, int64_t max) {
    ct_pipe_item *all = ct_pipe_item_list(NULL, 0);
    int r;
    ct_pipe_item *x;
    int64_t k = 0;
    while (k++ < max && (r = ct_datapipe_next(p, &x)) == 1) assert_int_equal(ct_pipe_item_list_append(all, x), CT_OK);
    char *s;
    if (k <= max && r < 0) {
        s = malloc(1100);
        snprintf(s, 1100, "ERROR: %s", ct_last_error());
    } else {
        s = ct_pipe_item_to_string(all);
    }
    ct_pipe_item_release(all);
    return s;
}
static void expect(ct_datapipe *p, const char *want) {
    assert_non_null(p);
    char *got = drain(p, 1000000);
    if (strcmp(got, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", got, want);
    assert_string_equal(got, want);
    free(got);
}
static void expect_free(ct_datapipe *p, const char *want) {
    expect(p, want);
    ct_datapipe_free(p);
}

static ct_pipe_item *square(ct_pipe_item *x, void *u) {
    int64_t v = ct_pipe_item_as_int(x);
    return ct_pipe_item_int((int64_t)((uint64_t)v * (uint64_t)v)); /* wraps on hostile-blob values */
}
static int is_odd(ct_pipe_item *x, void *u) { return (int)(ct_pipe_item_as_int(x) & 1); }
static ct_pipe_item *repeat_n(ct_pipe_item *x, void *u) { /* n -> [n, n, ...] (n times) */
    int64_t v = ct_pipe_item_as_int(x);
    ct_pipe_item *l = ct_pipe_item_list(NULL, 0);
    for (int64_t k = 0; k < v; k++) assert_int_equal(ct_pipe_item_list_append(l, ct_pipe_item_int(v)), CT_OK);
    return l;
}
static ct_pipe_item *fail_at_13(ct_pipe_item *x, void *u) {
    if (ct_pipe_item_as_int(x) == 13) return NULL;
    return ct_pipe_item_retain(x);
}
static int64_t key_value(ct_pipe_item *x, void *u) { return ct_pipe_item_as_int(x); }
static ct_pipe_item *to_tensor_sample(ct_pipe_item *x, void *u) {
    int64_t v = ct_pipe_item_as_int(x);
    ct_sample *s = ct_sample_new();
    ct_tensor *img = ct_full(CT_SHAPE(2, 2), (double)v, CT_F32);
    ct_tensor *lab = ct_scalar((double)(v % 3), CT_I64);
    if (ct_sample_set(s, "image", img) || ct_sample_set(s, "label", lab)) {
        ct_sample_free(s);
        return NULL;
    }
    return ct_pipe_item_sample(s);
}

/* ---- items --------------------------------------------------------------------- */
static void test_items(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    ct_tensor *t = ct_arange(0, 6, 1, CT_F32);
    ct_pipe_item *xs[3] = {ct_pipe_item_int(3), ct_pipe_item_str("a'b"), ct_pipe_item_tensor(t)};
    ct_pipe_item *l = ct_pipe_item_list(xs, 3);
    ct_pipe_item *tup = ct_pipe_item_tuple2(l, ct_pipe_item_bytes("x\0y", 3));
    ct_scope_end(sc); /* the item keeps the tensor alive */
    char *s = ct_pipe_item_to_string(tup);
    assert_string_equal(s, "([3, 'a\\'b', tensor(float32, [6])], 'x\\x00y')");
    free(s);
    assert_int_equal(ct_pipe_item_len(tup), 2);
    ct_pipe_item *inner = ct_pipe_item_at(tup, 0);
    assert_int_equal(ct_pipe_item_as_int(ct_pipe_item_at(inner, 0)), 3);
    assert_string_equal(ct_pipe_item_as_str(ct_pipe_item_at(inner, 1)), "a'b");
    assert_int_equal(ct_pipe_item_str_len(ct_pipe_item_at(tup, -1)), 3);
    assert_int_equal(ct_numel(ct_pipe_item_as_tensor(ct_pipe_item_at(inner, 2))), 6);
    /* errors */
    assert_null(ct_pipe_item_at(tup, 2));
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    assert_null(ct_pipe_item_as_str(ct_pipe_item_at(inner, 0)));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "is a int, not a str"));
    /* a shared list is immutable */
    ct_pipe_item *again = ct_pipe_item_retain(inner);
    assert_int_equal(ct_pipe_item_list_append(inner, ct_pipe_item_int(1)), CT_ERR_ARG);
    ct_pipe_item_release(again);
    /* equality is deep */
    ct_pipe_item *a = ct_pipe_item_tuple2(ct_pipe_item_int(1), ct_pipe_item_str("z"));
    ct_pipe_item *b = ct_pipe_item_tuple2(ct_pipe_item_int(1), ct_pipe_item_str("z"));
    ct_pipe_item *c = ct_pipe_item_tuple2(ct_pipe_item_int(2), ct_pipe_item_str("z"));
    assert_true(ct_pipe_item_equal(a, b));
    assert_false(ct_pipe_item_equal(a, c));
    /* NULL propagation: containers steal (and release) what they are given */
    assert_null(ct_pipe_item_tuple2(ct_pipe_item_int(1), NULL));
    ct_pipe_item_release(a);
    ct_pipe_item_release(b);
    ct_pipe_item_release(c);
    ct_pipe_item_release(tup);
}

/* ---- stages ------------------------------------------------------------------- */
static void test_basic_stages(void **state) {
    (void)state;
    expect_free(ct_datapipe_from_range(0, 5), "[0, 1, 2, 3, 4]");
    expect_free(ct_datapipe_map(ct_datapipe_from_range(0, 5), square, NULL), "[0, 1, 4, 9, 16]");
    expect_free(ct_datapipe_filter(ct_datapipe_from_range(0, 8), is_odd, NULL), "[1, 3, 5, 7]");
    expect_free(ct_datapipe_flat_map(ct_datapipe_from_range(0, 4), repeat_n, NULL), "[1, 2, 2, 3, 3, 3]");
    expect_free(ct_datapipe_batch(ct_datapipe_from_range(0, 7), 3, false), "[[0, 1, 2], [3, 4, 5], [6]]");
    expect_free(ct_datapipe_batch(ct_datapipe_from_range(0, 7), 3, true), "[[0, 1, 2], [3, 4, 5]]");
    expect_free(ct_datapipe_unbatch(ct_datapipe_batch(ct_datapipe_from_range(0, 5), 2, false)), "[0, 1, 2, 3, 4]");
    expect_free(ct_datapipe_header(ct_datapipe_from_range(0, 100), 3), "[0, 1, 2]");
    expect_free(ct_datapipe_cycle(ct_datapipe_from_range(0, 3), 2), "[0, 1, 2, 0, 1, 2]");
    expect_free(ct_datapipe_header(ct_datapipe_cycle(ct_datapipe_from_range(0, 2), -1), 5), "[0, 1, 0, 1, 0]");
    expect_free(ct_datapipe_cycle(ct_datapipe_from_range(0, 0), -1), "[]");
    expect_free(ct_datapipe_shard(ct_datapipe_from_range(0, 10), 3, 1), "[1, 4, 7]");
    expect_free(ct_datapipe_sharding_filter(ct_datapipe_from_range(0, 3)), "[0, 1, 2]");
    ct_datapipe *two[2] = {ct_datapipe_from_range(0, 3), ct_datapipe_from_range(10, 12)};
    expect_free(ct_datapipe_concat(two, 2), "[0, 1, 2, 10, 11]");
    const char *names[] = {"a", "b", "c"};
    ct_datapipe *z[2] = {ct_datapipe_from_range(0, 5), ct_datapipe_from_strings(names, 3)};
    expect_free(ct_datapipe_zip(z, 2), "[(0, 'a'), (1, 'b'), (2, 'c')]");
    /* torchdata's mux example */
    ct_datapipe *m[3] = {ct_datapipe_from_range(0, 3), ct_datapipe_from_range(10, 15), ct_datapipe_from_range(20, 25)};
    expect_free(ct_datapipe_mux(m, 3), "[0, 10, 20, 1, 11, 21, 2, 12, 22]");
    /* a partial round is dropped, like torchdata's Multiplexer */
    ct_datapipe *m2[2] = {ct_datapipe_from_range(0, 5), ct_datapipe_from_range(10, 12)};
    expect_free(ct_datapipe_mux(m2, 2), "[0, 10, 1, 11]");
    /* reset replays the epoch */
    ct_datapipe *p = ct_datapipe_map(ct_datapipe_from_range(1, 4), square, NULL);
    expect(p, "[1, 4, 9]");
    expect(p, "[]");
    ct_datapipe_reset(p);
    expect_free(p, "[1, 4, 9]");
    /* bad arguments free their sources and say why */
    assert_null(ct_datapipe_batch(ct_datapipe_from_range(0, 3), 0, false));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_null(ct_datapipe_shard(ct_datapipe_from_range(0, 3), 2, 2));
    assert_non_null(strstr(ct_last_error(), "shard_id 2"));
    assert_null(ct_datapipe_map(NULL, square, NULL));
}

static void test_shuffle(void **state) {
    (void)state;
    ct_datapipe *p = ct_datapipe_shuffle(ct_datapipe_from_range(0, 20), 5, 42);
    char *e0 = drain(p, 1000);
    ct_datapipe_reset(p);
    char *e0b = drain(p, 1000);
    assert_string_equal(e0, e0b); /* same (seed, epoch): same order */
    ct_datapipe_set_epoch(p, 1);
    char *e1 = drain(p, 1000);
    assert_string_not_equal(e0, e1);
    ct_datapipe_set_epoch(p, 0);
    char *e0c = drain(p, 1000);
    assert_string_equal(e0, e0c);
    ct_datapipe_set_seed(p, 7);
    char *s7 = drain(p, 1000);
    assert_string_not_equal(e0, s7);
    /* a permutation; with a buffer of 5, item i can only come out at i-4 or later */
    ct_datapipe_set_epoch(p, 3);
    int seen[20] = {0}, pos = 0;
    ct_pipe_item *x;
    while (ct_datapipe_next(p, &x) == 1) {
        int64_t v = ct_pipe_item_as_int(x);
        assert_true(v >= 0 && v < 20 && !seen[v]);
        assert_true(pos >= v - 4);
        seen[v] = 1;
        pos++;
        ct_pipe_item_release(x);
    }
    assert_int_equal(pos, 20);
    printf("shuffle(range(20), 5, seed 42), epoch 0: %s\n", e0);
    free(e0);
    free(e0b);
    free(e1);
    free(e0c);
    free(s7);
    ct_datapipe_free(p);
    /* buffer 1: identity */
    expect_free(ct_datapipe_shuffle(ct_datapipe_from_range(0, 4), 1, 3), "[0, 1, 2, 3]");
}

static void test_bucket_batch(void **state) {
    (void)state;
    /* descending values, buckets of 2*3 sorted ascending, batches of 2 */
    ct_datapipe *p = ct_datapipe_bucket_batch(ct_datapipe_from_range(0, 12), 2, false, 3, 1, key_value, NULL, 5);
    int n = 0, nb = 0;
    ct_pipe_item *b;
    while (ct_datapipe_next(p, &b) == 1) {
        assert_int_equal(ct_pipe_item_len(b), 2);
        int64_t v0 = ct_pipe_item_as_int(ct_pipe_item_at(b, 0)), v1 = ct_pipe_item_as_int(ct_pipe_item_at(b, 1));
        assert_true(v0 <= v1);             /* each batch sorted by key */
        assert_true(v1 - v0 == 1);         /* neighbours of a sorted bucket */
        assert_true(v0 / 6 == (nb / 3));   /* bucket k holds items 6k..6k+5 */
        n += 2;
        nb++;
        ct_pipe_item_release(b);
    }
    assert_int_equal(n, 12);
    ct_datapipe_free(p);
    /* no key: a shuffled pool cut into batches; drop_last */
    p = ct_datapipe_bucket_batch(ct_datapipe_from_range(0, 11), 3, true, 2, 2, NULL, NULL, 1);
    nb = 0;
    int seen[11] = {0};
    while (ct_datapipe_next(p, &b) == 1) {
        assert_int_equal(ct_pipe_item_len(b), 3);
        for (int k = 0; k < 3; k++) seen[ct_pipe_item_as_int(ct_pipe_item_at(b, k))]++;
        nb++;
        ct_pipe_item_release(b);
    }
    assert_int_equal(nb, 3);
    int tot = 0;
    for (int k = 0; k < 11; k++) {
        assert_true(seen[k] <= 1);
        tot += seen[k];
    }
    assert_int_equal(tot, 9);
    ct_datapipe_free(p);
}

static void test_collate(void **state) {
    (void)state;
    ct_datapipe *p = ct_datapipe_collate(ct_datapipe_batch(ct_datapipe_map(ct_datapipe_from_range(0, 5),
                                                                           to_tensor_sample, NULL), 2, false),
                                         NULL, NULL);
    expect(p, "[{image: tensor(float32, [2, 2, 2]), label: tensor(int64, [2])}, {image: tensor(float32, [2, 2, 2]), "
              "label: tensor(int64, [2])}, {image: tensor(float32, [1, 2, 2]), label: tensor(int64, [1])}]");
    ct_datapipe_reset(p);
    ct_pipe_item *b;
    assert_int_equal(ct_datapipe_next(p, &b), 1);
    ct_datapipe_free(p);
    const ct_sample *s = ct_pipe_item_as_sample(b);
    ct_scope sc = ct_scope_begin();
    assert_int_equal(ct_item_int(ct_select(ct_sample_get(s, "label"), 0, 1)), 1);
    assert_true(ct_item(ct_select(ct_flatten(ct_sample_get(s, "image"), 0, -1), 0, 7)) == 1.0);
    ct_scope_end(sc);
    ct_pipe_item_release(b);
    /* ints -> int64 tensor; tuples -> tuple of columns */
    const char *names[] = {"a", "b", "c"};
    ct_datapipe *z[2] = {ct_datapipe_from_range(0, 3), ct_datapipe_from_strings(names, 3)};
    expect_free(ct_datapipe_collate(ct_datapipe_batch(ct_datapipe_zip(z, 2), 3, false), NULL, NULL),
                "[(tensor(int64, [3]), ['a', 'b', 'c'])]");
}

/* ---- errors in callbacks ------------------------------------------------------- */
static void test_callback_errors(void **state) {
    (void)state;
    ct_datapipe *p = ct_datapipe_map(ct_datapipe_from_range(10, 20), fail_at_13, NULL);
    char *s = drain(p, 100);
    assert_string_equal(s, "ERROR: datapipe map: callback failed on item 3: the callback returned no result");
    free(s);
    ct_datapipe_free(p);
    /* through a prefetch thread, the error arrives in order */
    p = ct_datapipe_prefetch(ct_datapipe_map(ct_datapipe_from_range(10, 20), fail_at_13, NULL), 4);
    ct_pipe_item *x;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ct_datapipe_next(p, &x), 1);
        ct_pipe_item_release(x);
    }
    assert_int_equal(ct_datapipe_next(p, &x), -1);
    assert_non_null(strstr(ct_last_error(), "callback failed on item 3"));
    assert_int_equal(ct_datapipe_next(p, &x), -1); /* sticky, never hangs */
    ct_datapipe_free(p);
    /* collate of mismatched samples names the index */
    ct_pipe_item *xs[2];
    ct_sample *a = ct_sample_new(), *b = ct_sample_new();
    ct_scope sc = ct_scope_begin();
    assert_int_equal(ct_sample_set(a, "x", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    assert_int_equal(ct_sample_set(b, "y", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    ct_scope_end(sc);
    xs[0] = ct_pipe_item_sample(a);
    xs[1] = ct_pipe_item_sample(b);
    ct_pipe_item *l = ct_pipe_item_list(xs, 2);
    p = ct_datapipe_collate(ct_datapipe_from_items(&l, 1), NULL, NULL);
    ct_pipe_item_release(l);
    s = drain(p, 10);
    assert_non_null(strstr(s, "sample 1 of the batch has no 'x'"));
    free(s);
    ct_datapipe_free(p);
}

/* ---- save / restore ------------------------------------------------------------ */
typedef ct_datapipe *(*builder)(void *ctx);

/* for every position k: run k items, save, build a fresh graph, restore,
 * and the rest equals the uninterrupted run's rest */
static void check_resume(builder build, void *ctx, const char *name) {
    ct_datapipe *p = build(ctx);
    assert_non_null(p);
    ct_pipe_item *full = ct_pipe_item_list(NULL, 0);
    ct_pipe_item *x;
    int r;
    while ((r = ct_datapipe_next(p, &x)) == 1) assert_int_equal(ct_pipe_item_list_append(full, x), CT_OK);
    assert_int_equal(r, 0);
    ct_datapipe_free(p);
    int64_t n = ct_pipe_item_len(full);
    for (int64_t k = 0; k <= n; k++) {
        p = build(ctx);
        for (int64_t j = 0; j < k; j++) {
            assert_int_equal(ct_datapipe_next(p, &x), 1);
            assert_true(ct_pipe_item_equal(x, ct_pipe_item_at(full, j)));
            ct_pipe_item_release(x);
        }
        void *blob;
        size_t len;
        assert_int_equal(ct_datapipe_state_save(p, &blob, &len), CT_OK);
        /* the saved pipe itself continues correctly after a save */
        if (k < n) {
            assert_int_equal(ct_datapipe_next(p, &x), 1);
            assert_true(ct_pipe_item_equal(x, ct_pipe_item_at(full, k)));
            ct_pipe_item_release(x);
        }
        ct_datapipe_free(p);
        ct_datapipe *q = build(ctx);
        ct_status st = ct_datapipe_state_restore(q, blob, len);
        if (st) fprintf(stderr, "%s: restore at %lld: %s\n", name, (long long)k, ct_last_error());
        assert_int_equal(st, CT_OK);
        for (int64_t j = k; j < n; j++) {
            r = ct_datapipe_next(q, &x);
            if (r != 1 || !ct_pipe_item_equal(x, ct_pipe_item_at(full, j))) {
                char *a = ct_pipe_item_to_string(x), *b = ct_pipe_item_to_string(ct_pipe_item_at(full, j));
                fprintf(stderr, "%s: resumed at %lld, item %lld: got %s (r=%d %s), want %s\n", name, (long long)k,
                        (long long)j, a, r, r < 0 ? ct_last_error() : "", b);
                free(a);
                free(b);
                fail();
            }
            ct_pipe_item_release(x);
        }
        assert_int_equal(ct_datapipe_next(q, &x), 0);
        /* every truncation of the blob is refused without a crash */
        if (k == n / 2)
            for (size_t cut = 0; cut < len; cut += 1 + len / 64) {
                assert_int_not_equal(ct_datapipe_state_restore(q, blob, cut), CT_OK);
                assert_true(ct_last_error_code() == CT_ERR_FORMAT);
            }
        ct_datapipe_free(q);
        free(blob);
    }
    ct_pipe_item_release(full);
}

static ct_datapipe *b_shuffle_chain(void *ctx) {
    ct_datapipe *p = ct_datapipe_shuffle(ct_datapipe_from_range(0, 30), 7, 11);
    ct_datapipe_set_epoch(p, 2);
    p = ct_datapipe_batch(ct_datapipe_map(p, square, NULL), 4, false);
    p = ct_datapipe_unbatch(p);
    return ct_datapipe_header(ct_datapipe_filter(p, is_odd, NULL), 12);
}
static ct_datapipe *b_combine(void *ctx) {
    ct_datapipe *m[2] = {ct_datapipe_flat_map(ct_datapipe_from_range(0, 6), repeat_n, NULL),
                         ct_datapipe_cycle(ct_datapipe_from_range(100, 103), 3)};
    ct_datapipe *c[2] = {ct_datapipe_mux(m, 2), ct_datapipe_shard(ct_datapipe_from_range(0, 9), 2, 1)};
    ct_datapipe *z[2] = {ct_datapipe_concat(c, 2), ct_datapipe_from_range(0, 1000)};
    return ct_datapipe_zip(z, 2);
}
static ct_datapipe *b_bucket(void *ctx) {
    ct_datapipe *p = ct_datapipe_bucket_batch(ct_datapipe_map(ct_datapipe_from_range(0, 25), square, NULL), 2, false, 3, 2,
                                 key_value, NULL, 9);
    ct_datapipe *z[2] = {p, ct_datapipe_collate(ct_datapipe_batch(ct_datapipe_map(ct_datapipe_from_range(0, 40),
                                                                                  to_tensor_sample, NULL),
                                                                  3, false),
                                                NULL, NULL)};
    return ct_datapipe_zip(z, 2);
}
static ct_datapipe *b_prefetch(void *ctx) {
    ct_datapipe *p = ct_datapipe_shuffle(ct_datapipe_from_range(0, 20), 4, 3);
    p = ct_datapipe_prefetch(ct_datapipe_map(p, square, NULL), 3);
    return ct_datapipe_prefetch(ct_datapipe_batch(p, 3, false), 2);
}

static void test_state_resume(void **state) {
    (void)state;
    check_resume(b_shuffle_chain, NULL, "shuffle chain");
    check_resume(b_combine, NULL, "mux/concat/zip/cycle/flat_map/shard");
    check_resume(b_bucket, NULL, "bucket_batch/collate");
    check_resume(b_prefetch, NULL, "prefetch");
}

static void test_state_hostile(void **state) {
    (void)state;
    ct_datapipe *p = b_shuffle_chain(NULL);
    ct_pipe_item *x;
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ct_datapipe_next(p, &x), 1);
        ct_pipe_item_release(x);
    }
    void *blob;
    size_t len;
    assert_int_equal(ct_datapipe_state_save(p, &blob, &len), CT_OK);
    /* another structure */
    ct_datapipe *other = ct_datapipe_batch(ct_datapipe_from_range(0, 3), 2, false);
    assert_int_equal(ct_datapipe_state_restore(other, blob, len), CT_ERR_FORMAT);
    assert_non_null(strstr(ct_last_error(), "expected stage 'batch'"));
    expect_free(other, "[[0, 1], [2]]"); /* reset to the start of the epoch */
    /* garbage, bad magic, flipped bytes: errors or valid positions, never crashes */
    assert_int_equal(ct_datapipe_state_restore(p, "hello", 5), CT_ERR_FORMAT);
    uint8_t *b = malloc(len);
    for (size_t k = 8; k < len; k++) {
        memcpy(b, blob, len);
        b[k] ^= 0xa5;
        if (ct_datapipe_state_restore(p, b, len) == CT_OK) {
            char *s = drain(p, 100);
            free(s);
        }
    }
    free(b);
    free(blob);
    ct_datapipe_free(p);
}

/* ---- DataLoader2 --------------------------------------------------------------- */
static ct_pipe_item *retain_cb(ct_pipe_item *x, void *u) { return ct_pipe_item_retain(x); }
static ct_datapipe *dl_graph2(int with_filter) {
    ct_datapipe *p = ct_datapipe_shuffle(ct_datapipe_from_range(0, 37), 8, 5);
    if (with_filter) p = ct_datapipe_sharding_filter(p);
    p = ct_datapipe_map(ct_datapipe_map(p, to_tensor_sample, NULL), retain_cb, NULL);
    return ct_datapipe_collate(ct_datapipe_batch(p, 4, false), NULL, NULL);
}

static ct_pipe_item *run_loader(ct_dataloader2 *dl) {
    ct_pipe_item *all = ct_pipe_item_list(NULL, 0), *x;
    int r;
    while ((r = ct_dataloader2_next(dl, &x)) == 1) assert_int_equal(ct_pipe_item_list_append(all, x), CT_OK);
    if (r < 0) fprintf(stderr, "loader: %s\n", ct_last_error());
    assert_int_equal(r, 0);
    return all;
}

static void test_dataloader2_workers(void **state) {
    (void)state;
    for (int filt = 0; filt < 2; filt++) {
        ct_pipe_item *ref[3] = {NULL, NULL, NULL};
        for (int w = 0; w <= 3; w++) {
            ct_dataloader2 *dl = ct_dataloader2_new(dl_graph2(filt), w);
            assert_non_null(dl);
            for (int epoch = 0; epoch < 2; epoch++) {
                ct_dataloader2_set_epoch(dl, epoch);
                ct_pipe_item *got = run_loader(dl);
                assert_int_equal(ct_pipe_item_len(got), 10);
                if (w == 0) ref[epoch] = got;
                else {
                    assert_true(ct_pipe_item_equal(got, ref[epoch]));
                    ct_pipe_item_release(got);
                }
            }
            ct_dataloader2_set_seed(dl, 99);
            ct_pipe_item *got = run_loader(dl);
            if (w == 0) ref[2] = got;
            else {
                assert_true(ct_pipe_item_equal(got, ref[2]));
                ct_pipe_item_release(got);
            }
            ct_dataloader2_free(dl);
        }
        assert_false(ct_pipe_item_equal(ref[0], ref[1]));
        assert_false(ct_pipe_item_equal(ref[0], ref[2]));
        for (int k = 0; k < 3; k++) ct_pipe_item_release(ref[k]);
    }
}

static void test_dataloader2_errors_and_early_stop(void **state) {
    (void)state;
    for (int w = 0; w <= 2; w++) {
        ct_datapipe *p = ct_datapipe_map(ct_datapipe_sharding_filter(ct_datapipe_from_range(0, 40)), fail_at_13, NULL);
        ct_dataloader2 *dl = ct_dataloader2_new(p, w);
        ct_pipe_item *x;
        for (int k = 0; k < 13; k++) {
            assert_int_equal(ct_dataloader2_next(dl, &x), 1);
            assert_int_equal(ct_pipe_item_as_int(x), k);
            ct_pipe_item_release(x);
        }
        assert_int_equal(ct_dataloader2_next(dl, &x), -1);
        if (w == 2)
            assert_string_equal(ct_last_error(), "dataloader2: worker 1, item 13: datapipe map: callback failed on "
                                "item 6: the callback returned no result");
        else if (w == 1)
            assert_non_null(strstr(ct_last_error(), "worker 0, item 13: datapipe map: callback failed on item 13"));
        else
            assert_non_null(strstr(ct_last_error(), "callback failed on item 13"));
        ct_dataloader2_free(dl);
    }
    /* early stop: take 3 batches out of many, free with workers running */
    for (int w = 1; w <= 2; w++) {
        ct_dataloader2 *dl = ct_dataloader2_new_v2(dl_graph2(1), w, 3);
        ct_pipe_item *x;
        for (int k = 0; k < 3; k++) {
            assert_int_equal(ct_dataloader2_next(dl, &x), 1);
            ct_pipe_item_release(x);
        }
        ct_dataloader2_reset(dl);
        assert_int_equal(ct_dataloader2_next(dl, &x), 1);
        ct_pipe_item_release(x);
        ct_dataloader2_free(dl);
    }
    assert_null(ct_dataloader2_new(ct_datapipe_from_range(0, 3), -1));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
}

static void test_dataloader2_state(void **state) {
    (void)state;
    ct_dataloader2 *ref = ct_dataloader2_new(dl_graph2(1), 0);
    ct_dataloader2_set_epoch(ref, 1);
    ct_pipe_item *full = run_loader(ref);
    ct_dataloader2_free(ref);
    int64_t n = ct_pipe_item_len(full);
    for (int64_t k = 0; k <= n; k += 3) {
        ct_dataloader2 *dl = ct_dataloader2_new(dl_graph2(1), 2);
        ct_dataloader2_set_epoch(dl, 1);
        ct_pipe_item *x;
        for (int64_t j = 0; j < k; j++) {
            assert_int_equal(ct_dataloader2_next(dl, &x), 1);
            ct_pipe_item_release(x);
        }
        void *blob;
        size_t len;
        assert_int_equal(ct_dataloader2_state_save(dl, &blob, &len), CT_OK);
        ct_dataloader2_free(dl);
        dl = ct_dataloader2_new(dl_graph2(1), 2);
        assert_int_equal(ct_dataloader2_state_restore(dl, blob, len), CT_OK);
        for (int64_t j = k; j < n; j++) {
            assert_int_equal(ct_dataloader2_next(dl, &x), 1);
            assert_true(ct_pipe_item_equal(x, ct_pipe_item_at(full, j)));
            ct_pipe_item_release(x);
        }
        assert_int_equal(ct_dataloader2_next(dl, &x), 0);
        ct_dataloader2_free(dl);
        /* a 3-worker loader refuses a 2-worker state */
        dl = ct_dataloader2_new(dl_graph2(1), 3);
        assert_int_equal(ct_dataloader2_state_restore(dl, blob, len), CT_ERR_FORMAT);
        ct_dataloader2_free(dl);
        free(blob);
    }
    ct_pipe_item_release(full);
}

/* ---- file stages ---------------------------------------------------------------- */
static char tmpdir[256];
static void write_file(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}
static int setup_files(void **state) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ct_datapipe_XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    mkdir(sub, 0700);
    write_file("b.txt", "hello\nworld\r\nlast");
    write_file("a.txt", "one\n\nthree\n");
    write_file("sub/c.txt", "");
    write_file("sub/d.txt", "deep\n");
    write_file("data.csv", "name,score,note\nann,1.5,\"likes, commas\"\nbob,2,\"say \"\"hi\"\"\"\n"
                           "cy,3,\"multi\nline\"\n");
    write_file("bad.csv", "a,b\n\"open,2\n3,4\n");
    write_file("skip.bin", "x");
    return 0;
}
static int teardown_files(void **state) {
    const char *rel[] = {"b.txt", "a.txt", "sub/c.txt", "sub/d.txt", "data.csv", "bad.csv", "skip.bin"};
    char path[512];
    for (int k = 0; k < 7; k++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, rel[k]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/sub", tmpdir);
    rmdir(path);
    rmdir(tmpdir);
    return 0;
}
/* the repr with tmpdir replaced by "T" */
static void expect_files(ct_datapipe *p, const char *want) {
    char *got = drain(p, 100000), *o = malloc(strlen(got) + 1), *q = o;
    size_t tl = strlen(tmpdir);
    for (const char *s = got; *s;)
        if (strncmp(s, tmpdir, tl) == 0) { *q++ = 'T'; s += tl; }
        else *q++ = *s++;
    *q = 0;
    if (strcmp(o, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", o, want);
    assert_string_equal(o, want);
    free(got);
    free(o);
}

static void test_file_stages(void **state) {
    (void)state;
    const char *txt[] = {"*.txt"}, *two[] = {"*.csv", "a.*"};
    ct_datapipe *p = ct_datapipe_file_lister(tmpdir, txt, 1, true);
    expect_files(p, "['T/a.txt', 'T/b.txt', 'T/sub/c.txt', 'T/sub/d.txt']");
    ct_datapipe_free(p);
    p = ct_datapipe_file_lister(tmpdir, txt, 1, false);
    expect_files(p, "['T/a.txt', 'T/b.txt']");
    ct_datapipe_free(p);
    p = ct_datapipe_file_lister(tmpdir, two, 2, false);
    expect_files(p, "['T/a.txt', 'T/bad.csv', 'T/data.csv']");
    ct_datapipe_free(p);
    /* lines from paths, and from (path, contents) */
    p = ct_datapipe_line_reader(ct_datapipe_file_lister(tmpdir, txt, 1, true));
    const char *lines = "[('T/a.txt', 'one'), ('T/a.txt', ''), ('T/a.txt', 'three'), ('T/b.txt', 'hello'), "
                        "('T/b.txt', 'world'), ('T/b.txt', 'last'), ('T/sub/d.txt', 'deep')]";
    expect_files(p, lines);
    ct_datapipe_free(p);
    p = ct_datapipe_line_reader(ct_datapipe_file_opener(ct_datapipe_file_lister(tmpdir, txt, 1, true), 0));
    expect_files(p, lines);
    ct_datapipe_free(p);
    p = ct_datapipe_file_opener(ct_datapipe_file_lister(tmpdir, txt, 1, false), 0);
    expect_files(p, "[('T/a.txt', 'one\\n\\nthree\\n'), ('T/b.txt', 'hello\\nworld\\r\\nlast')]");
    ct_datapipe_free(p);
    /* CSV: quotes, "" escapes, newlines in quotes, header skipped */
    const char *csvm[] = {"data.csv"};
    p = ct_datapipe_csv_parser(ct_datapipe_file_lister(tmpdir, csvm, 1, false), ',', 1, false);
    expect_files(p, "[['ann', '1.5', 'likes, commas'], ['bob', '2', 'say \"hi\"'], ['cy', '3', 'multi\\nline']]");
    ct_datapipe_free(p);
    p = ct_datapipe_csv_parser(ct_datapipe_file_opener(ct_datapipe_file_lister(tmpdir, csvm, 1, false), 0), ',', 3,
                               true);
    expect_files(p, "[('T/data.csv', ['cy', '3', 'multi\\nline'])]");
    ct_datapipe_free(p);
    /* malformed CSV: file, line, column */
    const char *badm[] = {"bad.csv"};
    p = ct_datapipe_csv_parser(ct_datapipe_file_lister(tmpdir, badm, 1, false), ',', 0, false);
    expect_files(p, "ERROR: datapipe csv_parser: T/bad.csv:2:1: unterminated quoted field");
    ct_datapipe_free(p);
    /* a missing directory; a file over the size limit */
    p = ct_datapipe_file_lister("/nonexistent/ct_dir", NULL, 0, true);
    char *s = drain(p, 10);
    assert_non_null(strstr(s, "cannot open directory '/nonexistent/ct_dir'"));
    free(s);
    ct_datapipe_free(p);
    p = ct_datapipe_file_opener(ct_datapipe_file_lister(tmpdir, txt, 1, false), 4);
    expect_files(p, "ERROR: datapipe file_opener: 'T/a.txt' has 11 bytes, more than the limit of 4");
    ct_datapipe_free(p);
}

static int not_bad(ct_pipe_item *x, void *u) { return strstr(ct_pipe_item_as_str(x), "bad.csv") == NULL; }
static ct_datapipe *b_files2(void *ctx) {
    const char *m[] = {"*.txt", "*.csv"};
    ct_datapipe *l = ct_datapipe_filter(ct_datapipe_file_lister(tmpdir, m, 2, true), not_bad, NULL);
    ct_datapipe *a = ct_datapipe_shuffle(ct_datapipe_line_reader(l), 3, 4);
    const char *c[] = {"data.csv"};
    ct_datapipe *b = ct_datapipe_csv_parser(ct_datapipe_file_opener(ct_datapipe_file_lister(tmpdir, c, 1, false), 0),
                                            ',', 0, true);
    ct_datapipe *z[2] = {a, ct_datapipe_cycle(b, 3)};
    return ct_datapipe_zip(z, 2);
}

static void test_file_state_and_workers(void **state) {
    (void)state;
    check_resume(b_files2, NULL, "file stages");
    /* a file graph with workers: lister -> sharding_filter -> opener -> lines */
    const char *m[] = {"*.txt", "*.csv"};
    ct_pipe_item *ref = NULL;
    for (int w = 0; w <= 2; w++) {
        ct_datapipe *p = ct_datapipe_filter(ct_datapipe_file_lister(tmpdir, m, 2, true), not_bad, NULL);
        p = ct_datapipe_line_reader(ct_datapipe_file_opener(ct_datapipe_sharding_filter(p), 0));
        ct_dataloader2 *dl = ct_dataloader2_new(p, w);
        ct_pipe_item *got = run_loader(dl);
        ct_dataloader2_free(dl);
        assert_int_equal(ct_pipe_item_len(got), 12);
        if (!ref) ref = got;
        else {
            assert_true(ct_pipe_item_equal(ref, got));
            ct_pipe_item_release(got);
        }
    }
    ct_pipe_item_release(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_items),
        cmocka_unit_test(test_basic_stages),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_bucket_batch),
        cmocka_unit_test(test_collate),
        cmocka_unit_test(test_callback_errors),
        cmocka_unit_test(test_state_resume),
        cmocka_unit_test(test_state_hostile),
        cmocka_unit_test(test_dataloader2_workers),
        cmocka_unit_test(test_dataloader2_errors_and_early_stop),
        cmocka_unit_test(test_dataloader2_state),
        cmocka_unit_test(test_file_stages),
        cmocka_unit_test(test_file_state_and_workers),
    };
    int64_t live0 = ct_live_tensors();
    setup_files(NULL);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    teardown_files(NULL);
    if (ct_live_tensors() != live0) {
        fprintf(stderr, "leaked %lld tensors\n", (long long)(ct_live_tensors() - live0));
        rc = 1;
    }
    return rc;
}
