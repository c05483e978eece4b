/* test_dataloader.c -- DataLoader: order and content identical with 0..3
 * workers, shuffle reproducible per (seed, epoch), drop_last, custom
 * collate, worker_init seeds, per-sample seeds, a failing sample, early
 * stop (clean under ASan/LSan), persistent workers, iterable datasets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

/* A map-style dataset of n samples: "x" = i64 [2] {index, current seed},
 * "y" = i64 0-dim index.  fail_at >= 0 makes that index fail; jitter makes
 * some gets slow so workers finish out of order. */
typedef struct { int64_t n, fail_at; int jitter; atomic_int gets; } toy;
static int64_t toy_len(void *self) { return ((toy *)self)->n; }
static ct_status toy_get(void *self, int64_t i, ct_sample *out) {
    toy *t = self;
    atomic_fetch_add(&t->gets, 1);
    if (t->jitter && (i * 7) % 5 == 0) usleep(300);
    if (i == t->fail_at) {
        ct_tensor *bad = ct_matmul(ct_zeros(CT_SHAPE(2, 3), CT_F32), ct_zeros(CT_SHAPE(2, 3), CT_F32));
        (void)bad;
        return ct_last_error_code();
    }
    int64_t v[2] = {i, (int64_t)ct_data_current_seed()};
    ct_status st = ct_sample_set(out, "x", ct_from_array(v, CT_SHAPE(2), CT_I64));
    if (!st) st = ct_sample_set(out, "y", ct_scalar((double)i, CT_I64));
    return st;
}
static const ct_dataset_vtable toy_vt = {.len = toy_len, .get = toy_get};

static toy g_toy;
static ct_dataset *toy_new(int64_t n, int64_t fail_at, int jitter) {
    g_toy.n = n;
    g_toy.fail_at = fail_at;
    g_toy.jitter = jitter;
    atomic_store(&g_toy.gets, 0);
    return ct_dataset_new(&toy_vt, &g_toy);
}

/* Runs a whole epoch; returns the concatenated "x" rows (malloc'ed, 2 per
 * sample) and the batch sizes. */
static int64_t run_epoch(ct_dataloader *dl, int64_t epoch, int64_t *out, int64_t *bsizes, int *nb) {
    assert_int_equal(ct_dataloader_begin_epoch(dl, epoch), CT_OK);
    ct_sample *b;
    int r;
    int64_t k = 0;
    *nb = 0;
    while ((r = ct_dataloader_next(dl, &b)) == 1) {
        ct_tensor *x = ct_sample_get(b, "x");
        assert_non_null(x);
        assert_int_equal(ct_ndim(x), 2);
        assert_int_equal(ct_numel(ct_sample_get(b, "y")), ct_size(x, 0));
        memcpy(out + 2 * k, ct_data_ptr(x), sizeof(int64_t) * 2 * (size_t)ct_size(x, 0));
        k += ct_size(x, 0);
        bsizes[(*nb)++] = ct_size(x, 0);
        ct_sample_free(b);
    }
    assert_int_equal(r, 0);
    return k;
}

static void test_order_same_for_any_workers(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_dataset *d = toy_new(37, -1, 1);
    int64_t ref[2][80], refb[2][40];
    int refnb[2];
    int64_t refk[2];
    for (int shuffle = 0; shuffle < 2; shuffle++)
        for (int nw = 0; nw <= 3; nw++) {
            ct_dataloader_opts o = {.batch_size = 4, .shuffle = shuffle, .seed = 11, .num_workers = nw,
                                    .prefetch_factor = nw == 3 ? 1 : 2};
            ct_dataloader *dl = ct_dataloader_new(d, &o);
            assert_non_null(dl);
            assert_int_equal(ct_dataloader_len(dl), 10);
            for (int64_t ep = 0; ep < 2; ep++) {
                int64_t got[80], bs[40];
                int nb;
                int64_t k = run_epoch(dl, ep, got, bs, &nb);
                assert_int_equal(k, 37);
                assert_int_equal(nb, 10);
                assert_int_equal(bs[9], 1);
                for (int i = 0; i < 37; i++)
                    assert_int_equal((uint64_t)got[2 * i + 1], ct_data_sample_seed(11, ep, got[2 * i]));
                if (!shuffle)
                    for (int i = 0; i < 37; i++) assert_int_equal(got[2 * i], i);
                if (nw == 0) {
                    memcpy(ref[ep], got, sizeof got);
                    memcpy(refb[ep], bs, sizeof bs);
                    refnb[ep] = nb;
                    refk[ep] = k;
                } else {
                    assert_int_equal(k, refk[ep]);
                    assert_int_equal(nb, refnb[ep]);
                    assert_memory_equal(got, ref[ep], sizeof(int64_t) * 74);
                }
            }
            if (shuffle) {
                /* shuffled: reproducible per (seed, epoch) and different across epochs */
                assert_true(memcmp(ref[0], ref[1], sizeof(int64_t) * 74) != 0);
                int64_t perm[37];
                ct_randperm_seeded(37, 11, 0, perm);
                for (int i = 0; i < 37; i++) assert_int_equal(ref[0][2 * i], perm[i]);
            }
            ct_dataloader_free(dl);
        }
    ct_dataset_release(d);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_drop_last_and_samplers(void **state) {
    (void)state;
    ct_dataset *d = toy_new(10, -1, 0);
    for (int nw = 0; nw <= 2; nw++) {
        ct_dataloader_opts o = {.batch_size = 3, .drop_last = true, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        int64_t got[40], bs[10];
        int nb;
        assert_int_equal(run_epoch(dl, 0, got, bs, &nb), 9);
        assert_int_equal(nb, 3);
        ct_dataloader_free(dl);
        /* a given sampler, and a batch sampler */
        int64_t sub[] = {9, 2, 4};
        ct_sampler *s = ct_subset_random_sampler_new(sub, 3, 1);
        ct_dataloader_opts o2 = {.batch_size = 2, .sampler = s, .num_workers = nw};
        dl = ct_dataloader_new(d, &o2);
        ct_sampler_release(s);
        assert_int_equal(run_epoch(dl, 0, got, bs, &nb), 3);
        assert_true(got[0] + got[2] + got[4] == 15);
        ct_dataloader_free(dl);
        ct_sampler *base = ct_sequential_sampler_new(10);
        ct_sampler *bsm = ct_batch_sampler_new(base, 4, false);
        ct_sampler_release(base);
        ct_dataloader_opts o3 = {.batch_sampler = bsm, .num_workers = nw};
        dl = ct_dataloader_new(d, &o3);
        assert_int_equal(run_epoch(dl, 0, got, bs, &nb), 10);
        assert_true(nb == 3 && bs[0] == 4 && bs[2] == 2);
        ct_dataloader_free(dl);
        ct_dataloader_opts bad = {.batch_sampler = bsm, .batch_size = 4};
        assert_null(ct_dataloader_new(d, &bad));
        assert_non_null(strstr(ct_last_error(), "mutually exclusive"));
        ct_sampler_release(bsm);
    }
    ct_dataset_release(d);
}

/* custom collate: sum of "y" as a 0-dim tensor "sum" and the count */
static ct_status sum_collate(ct_sample *const *ss, int n, ct_sample *out, void *user) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += ct_item_int(ct_sample_get(ss[i], "y"));
    atomic_fetch_add((atomic_int *)user, 1);
    ct_status st = ct_sample_set(out, "sum", ct_scalar((double)s, CT_I64));
    if (!st) st = ct_sample_set(out, "n", ct_scalar(n, CT_I64));
    return st;
}

static void test_custom_collate(void **state) {
    (void)state;
    ct_dataset *d = toy_new(10, -1, 0);
    for (int nw = 0; nw <= 2; nw++) {
        atomic_int calls = 0;
        ct_dataloader_opts o = {.batch_size = 4, .collate = sum_collate, .collate_user = &calls, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        ct_sample *b;
        int64_t sums[3], k = 0;
        while (ct_dataloader_next(dl, &b) == 1) {
            sums[k++] = ct_item_int(ct_sample_get(b, "sum"));
            ct_sample_free(b);
        }
        assert_int_equal(k, 3);
        assert_true(sums[0] == 6 && sums[1] == 22 && sums[2] == 17);
        assert_int_equal(atomic_load(&calls), 3);
        ct_dataloader_free(dl);
    }
    ct_dataset_release(d);
}

static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_init_calls[8];
static uint64_t g_init_seed[8];
static void winit(int id, uint64_t seed, void *user) {
    (void)user;
    int wid, nw;
    assert_true(ct_data_worker_info(&wid, &nw));
    pthread_mutex_lock(&g_init_mu);
    g_init_calls[id]++;
    g_init_seed[id] = seed;
    pthread_mutex_unlock(&g_init_mu);
    (void)ct_zeros(CT_SHAPE(3), CT_F32); /* in the worker's scope */
}

static void test_worker_init_and_persistent(void **state) {
    (void)state;
    ct_dataset *d = toy_new(20, -1, 0);
    for (int persistent = 0; persistent < 2; persistent++) {
        memset(g_init_calls, 0, sizeof g_init_calls);
        ct_dataloader_opts o = {.batch_size = 3, .seed = 5, .num_workers = 3, .worker_init = winit,
                                .persistent_workers = persistent, .shuffle = true};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        int64_t ref[3][40];
        for (int ep = 0; ep < 3; ep++) {
            int64_t got[40], bs[10];
            int nb;
            assert_int_equal(run_epoch(dl, ep, got, bs, &nb), 20);
            memcpy(ref[ep], got, sizeof got);
            uint64_t base = ct_dataloader_base_seed(dl);
            assert_int_equal(base, ct_data_mix(5, persistent ? 0 : (uint64_t)ep));
            for (int w = 0; w < 3; w++) {
                assert_int_equal(g_init_calls[w], persistent ? 1 : ep + 1);
                assert_int_equal(g_init_seed[w], base + (uint64_t)w);
            }
        }
        assert_true(memcmp(ref[1], ref[2], sizeof ref[1]) != 0);
        /* epoch 1 again: same order */
        int64_t got[40], bs[10];
        int nb;
        run_epoch(dl, 1, got, bs, &nb);
        assert_memory_equal(got, ref[1], sizeof got);
        ct_dataloader_free(dl);
    }
    assert_false(ct_data_worker_info(NULL, NULL));
    ct_dataset_release(d);
}

static void test_failing_sample(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_dataset *d = toy_new(50, 37, 1);
    for (int nw = 0; nw <= 3; nw++) {
        ct_dataloader_opts o = {.batch_size = 4, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        ct_sample *b;
        int r, k = 0;
        while ((r = ct_dataloader_next(dl, &b)) == 1) {
            k++;
            ct_sample_free(b);
        }
        assert_int_equal(r, -1);
        assert_int_equal(k, 9); /* batches 0..8 come first; batch 9 holds 37 */
        assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
        assert_non_null(strstr(ct_last_error(), "sample 37: "));
        assert_non_null(strstr(ct_last_error(), "matmul"));
        if (nw) {
            char want[64];
            snprintf(want, sizeof want, "DataLoader worker %d: sample 37", 9 % nw);
            assert_non_null(strstr(ct_last_error(), want));
        }
        assert_int_equal(ct_dataloader_next(dl, &b), -1); /* the epoch is over */
        /* a new epoch works again up to the failure */
        assert_int_equal(ct_dataloader_begin_epoch(dl, 1), CT_OK);
        assert_int_equal(ct_dataloader_next(dl, &b), 1);
        ct_sample_free(b);
        ct_dataloader_free(dl);
    }
    ct_dataset_release(d);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_early_stop(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_dataset *d = toy_new(200, -1, 1);
    for (int nw = 0; nw <= 3; nw++)
        for (int persistent = 0; persistent < 2; persistent++) {
            ct_dataloader_opts o = {.batch_size = 2, .num_workers = nw, .prefetch_factor = 4,
                                    .persistent_workers = persistent, .shuffle = true};
            ct_dataloader *dl = ct_dataloader_new(d, &o);
            ct_sample *b;
            assert_int_equal(ct_dataloader_next(dl, &b), 1);
            ct_sample_free(b);
            usleep(2000); /* let workers fill their rings */
            /* a new epoch in the middle: stops and restarts */
            assert_int_equal(ct_dataloader_begin_epoch(dl, 1), CT_OK);
            for (int i = 0; i < 3; i++) {
                assert_int_equal(ct_dataloader_next(dl, &b), 1);
                ct_sample_free(b);
            }
            ct_dataloader_free(dl); /* mid-epoch */
        }
    ct_dataloader_free(NULL);
    ct_dataset_release(d);
    assert_int_equal(ct_live_tensors(), live);
}

/* An iterable dataset: 0..n-1, sharded by worker (i % num_workers == id). */
typedef struct { int64_t n, fail_at; } iter_ds;
typedef struct { int64_t next, step; } iter_state;
static void *it_begin(void *self, int id, int nw) {
    (void)self;
    iter_state *s = malloc(sizeof *s);
    s->next = id;
    s->step = nw;
    return s;
}
static int it_next(void *self, void *it, ct_sample *out) {
    iter_ds *d = self;
    iter_state *s = it;
    if (s->next >= d->n) return 0;
    if (s->next == d->fail_at) {
        ct_clear_error();
        (void)ct_reshape(ct_zeros(CT_SHAPE(5), CT_F32), CT_SHAPE(2, 2));
        return -1;
    }
    int64_t v[2] = {s->next, (int64_t)ct_data_current_seed()};
    s->next += s->step;
    if (ct_sample_set(out, "x", ct_from_array(v, CT_SHAPE(2), CT_I64))) return -1;
    if (ct_sample_set(out, "y", ct_scalar((double)v[0], CT_I64))) return -1;
    return 1;
}
static void it_end(void *self, void *it) {
    (void)self;
    free(it);
}
static const ct_dataset_vtable it_vt = {.iter_begin = it_begin, .iter_next = it_next, .iter_end = it_end};

static void test_iterable(void **state) {
    (void)state;
    iter_ds src = {11, -1};
    ct_dataset *d = ct_dataset_new(&it_vt, &src);
    assert_true(ct_dataset_is_iterable(d));
    for (int nw = 0; nw <= 3; nw++) {
        ct_dataloader_opts o = {.batch_size = 2, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        assert_int_equal(ct_dataloader_len(dl), -1);
        int64_t got[40], bs[20];
        int nb;
        int64_t k = run_epoch(dl, 0, got, bs, &nb);
        assert_int_equal(k, 11);
        int seen[11] = {0};
        for (int i = 0; i < 11; i++) seen[got[2 * i]]++;
        for (int i = 0; i < 11; i++) assert_int_equal(seen[i], 1);
        if (nw == 2) {
            /* torch's order: round-robin over workers: [0,2] [1,3] [4,6] [5,7] [8,10] [9] */
            int64_t want[] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9};
            for (int i = 0; i < 11; i++) assert_int_equal(got[2 * i], want[i]);
        }
        k = run_epoch(dl, 1, got, bs, &nb); /* a second epoch restarts the iterators */
        assert_int_equal(k, 11);
        ct_dataloader_free(dl);
    }
    /* a failing iterator: the error names the worker and its sample */
    src.fail_at = 5;
    for (int nw = 0; nw <= 2; nw++) {
        ct_dataloader_opts o = {.batch_size = 2, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(d, &o);
        ct_sample *b;
        int r;
        while ((r = ct_dataloader_next(dl, &b)) == 1) ct_sample_free(b);
        assert_int_equal(r, -1);
        const char *want[] = {"DataLoader: sample 5 of the iterator", "DataLoader worker 0: sample 5 of its iterator",
                              "DataLoader worker 1: sample 2 of its iterator"};
        assert_non_null(strstr(ct_last_error(), want[nw]));
        assert_non_null(strstr(ct_last_error(), "reshape"));
        ct_dataloader_free(dl);
    }
    src.fail_at = -1;
    ct_sampler *s = ct_sequential_sampler_new(3);
    ct_dataloader_opts bad = {.sampler = s};
    assert_null(ct_dataloader_new(d, &bad));
    ct_sampler_release(s);
    ct_dataset_release(d);
}

static void test_default_collate_errors(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    ct_sample *a = ct_sample_new(), *b = ct_sample_new(), *out = ct_sample_new();
    assert_int_equal(ct_sample_set(a, "x", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    assert_int_equal(ct_sample_set(b, "x", ct_zeros(CT_SHAPE(3), CT_F32)), CT_OK);
    ct_sample *ss[] = {a, b};
    assert_int_not_equal(ct_default_collate(ss, 2, out, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "'x' of sample 1"));
    ct_sample_clear(b);
    assert_int_equal(ct_sample_set(b, "z", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    assert_int_not_equal(ct_default_collate(ss, 2, out, NULL), CT_OK);
    assert_non_null(strstr(ct_last_error(), "sample 1 of the batch has no 'x'"));
    ct_sample_free(a);
    ct_sample_free(b);
    ct_sample_free(out);
    ct_scope_end(sc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_same_for_any_workers),
        cmocka_unit_test(test_drop_last_and_samplers),
        cmocka_unit_test(test_custom_collate),
        cmocka_unit_test(test_worker_init_and_persistent),
        cmocka_unit_test(test_failing_sample),
        cmocka_unit_test(test_early_stop),
        cmocka_unit_test(test_iterable),
        cmocka_unit_test(test_default_collate_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
