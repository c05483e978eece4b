/* test_caching_alloc.c -- the caching device allocator
 * (src/backend/caching_alloc.c) and ctorch/memory.h's statistics.
 *
 * First on a host-memory backend of the test's own (each segment a malloc,
 * counted), where every rule is checked exactly: rounding, the small and
 * large pools and their segment sizes, best fit, splitting, merging of free
 * neighbours, per-stream pools, peaks, empty_cache, the out-of-memory error
 * and its retry.  Then on the OpenCL device (PoCL here), through tensors:
 * reuse, the statistics, 1,000 steps of a small training loop without
 * growth of the reserved memory, and out-of-memory under
 * CT_OPENCL_MEMORY_LIMIT as an error (skipped with the reason when there is
 * no OpenCL device). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/caching_alloc.h"
#include "ctorch/ctorch.h"
#include "test_util.h"

/* ---- a host backend: segments are malloc'd, counted ------------------------ */
typedef struct host_be {
    int nseg;        /* live segments */
    size_t bytes;    /* their bytes */
    size_t fail_over; /* a segment larger than this fails (0: never) */
} host_be;

static uintptr_t h_alloc(void *ctx, int dev, uintptr_t stream, size_t n, char *why, size_t wn) {
    (void)dev; (void)stream;
    host_be *h = ctx;
    if (h->fail_over && n > h->fail_over) {
        snprintf(why, wn, "test driver: no segment over %zu bytes", h->fail_over);
        return 0;
    }
    void *p = malloc(n);
    if (!p) return 0;
    h->nseg++;
    h->bytes += n;
    return (uintptr_t)p;
}

static void h_free(void *ctx, int dev, uintptr_t base, size_t n) {
    (void)dev;
    host_be *h = ctx;
    h->nseg--;
    h->bytes -= n;
    free((void *)base);
}

#define NOREG ((ct_device)CT_DEVICE_COUNT) /* an allocator that registers for no device type */
#define MiB ((size_t)1 << 20)

typedef struct fix { host_be h; ct__calloc *a; } fix;

static ct__calloc *mk(host_be *h, size_t limit, int ndev) {
    ct__calloc_backend be = {"test", h_alloc, h_free, h, limit, "TEST_LIMIT"};
    return ct__calloc_new(NOREG, &be, ndev);
}

static void destroy(ct__calloc *a, host_be *h) {
    ct__calloc_empty_cache(a, -1);
    assert_int_equal(h->nseg, 0); /* everything freed gave its segment back */
    ct__calloc_destroy(a);
}

/* rounding, the small pool's 2 MiB segments, splitting and reuse */
static void small_pool(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 1);
    assert_non_null(a);
    char *p = ct__calloc_alloc(a, 0, 0, 1); /* 1 byte: a 512-byte block of a new 2 MiB segment */
    assert_non_null(p);
    assert_int_equal(h.nseg, 1);
    assert_int_equal(h.bytes, 2 * MiB);
    char *q = ct__calloc_alloc(a, 0, 0, 513); /* 1024 bytes, right after p (the split rest) */
    assert_ptr_equal(q, p + 512);
    char *r = ct__calloc_alloc(a, 0, 0, 1000);
    assert_ptr_equal(r, p + 1536);
    assert_int_equal(h.nseg, 1);
    ct_mem_stats st;
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.allocated_bytes, 512 + 1024 + 1024);
    assert_int_equal(st.requested_bytes, 1 + 513 + 1000);
    assert_int_equal(st.reserved_bytes, 2 * MiB);
    assert_int_equal(st.num_allocs, 3);
    assert_int_equal(st.num_cache_hits, 2); /* q and r came out of the cached rest */
    assert_int_equal(st.active_blocks, 3);
    /* q freed: its 1024 bytes are reused by a request of that class, best fit
     * (the 1024-byte hole, not the big rest) */
    assert_true(ct__calloc_free(a, q));
    char *q2 = ct__calloc_alloc(a, 0, 0, 700);
    assert_ptr_equal(q2, q);
    /* freeing p, q2 and r merges the whole segment back into one block, which
     * a request of 2 MiB - 512 then gets at p */
    assert_true(ct__calloc_free(a, p));
    assert_true(ct__calloc_free(a, r));
    assert_true(ct__calloc_free(a, q2));
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.active_blocks, 0);
    assert_int_equal(st.num_frees, 4);
    char *w = ct__calloc_alloc(a, 0, 0, CT_CALLOC_SMALL_SIZE); /* 1 MiB: still the small pool */
    assert_ptr_equal(w, p);
    assert_int_equal(h.nseg, 1);
    assert_false(ct__calloc_free(a, w + 512)); /* not a block's address: refused, nothing done */
    assert_true(ct__calloc_free(a, w));
    assert_true(ct__calloc_free(a, NULL));
    destroy(a, &h);
}

/* the large pool: 20 MiB segments under 10 MiB, splitting only with more
 * than 1 MiB left, big requests rounded to 2 MiB, merging */
static void large_pool(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 1);
    char *x = ct__calloc_alloc(a, 0, 0, 3 * MiB);
    assert_int_equal(h.bytes, 20 * MiB);
    char *y = ct__calloc_alloc(a, 0, 0, 16 * MiB); /* the 17 MiB rest, split: 1 MiB is not > 1 MiB */
    assert_ptr_equal(y, x + 3 * MiB);
    ct_mem_stats st;
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.allocated_bytes, 3 * MiB + 17 * MiB); /* y took the whole rest */
    assert_int_equal(h.nseg, 1);
    char *z = ct__calloc_alloc(a, 0, 0, 11 * MiB + 1); /* >= 10 MiB: its own segment, 12 MiB */
    assert_int_equal(h.nseg, 2);
    assert_int_equal(h.bytes, 32 * MiB);
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.allocated_bytes, 32 * MiB); /* the 512 KiB left of z's segment is not split off */
    assert_int_equal(st.peak_reserved_bytes, 32 * MiB);
    /* a small request never takes large-pool memory */
    ct__calloc_free(a, y);
    char *s = ct__calloc_alloc(a, 0, 0, 4096);
    assert_int_equal(h.nseg, 3);
    ct__calloc_free(a, s);
    /* x and y free and merged: 20 MiB at x serves 19 MiB */
    ct__calloc_free(a, x);
    char *x2 = ct__calloc_alloc(a, 0, 0, 19 * MiB);
    assert_ptr_equal(x2, x);
    assert_int_equal(h.nseg, 3);
    ct__calloc_free(a, x2);
    ct__calloc_free(a, z);
    /* empty_cache gives the three whole free segments back */
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes, 34 * MiB);
    ct__calloc_empty_cache(a, 0);
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.reserved_bytes, 0);
    assert_int_equal(st.segments, 0);
    assert_int_equal(st.num_segment_frees, 3);
    assert_int_equal(st.peak_reserved_bytes, 34 * MiB);
    assert_int_equal(h.nseg, 0);
    destroy(a, &h);
}

/* a split block's segment is not released while part of it is live */
static void empty_cache_keeps_live(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 2);
    char *p = ct__calloc_alloc(a, 1, 0, 100); /* device 1 */
    char *q = ct__calloc_alloc(a, 1, 0, 100);
    char *d0 = ct__calloc_alloc(a, 0, 0, 100); /* device 0: a segment of its own */
    assert_int_equal(h.nseg, 2);
    assert_true(d0 < p || d0 >= p + 2 * MiB);
    ct__calloc_free(a, p);
    ct__calloc_empty_cache(a, 1);
    assert_int_equal(h.nseg, 2); /* q keeps device 1's segment */
    ct__calloc_free(a, q);
    ct__calloc_empty_cache(a, 1);
    assert_int_equal(h.nseg, 1); /* device 0's is live */
    ct__calloc_free(a, d0);
    assert_null(ct__calloc_alloc(a, 2, 0, 1)); /* no device 2 */
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    ct_clear_error();
    destroy(a, &h);
}

/* pools per stream: a block freed on stream 1 is not reused on stream 2 */
static void streams(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 1);
    char *p = ct__calloc_alloc(a, 0, 1, 4096);
    ct__calloc_free(a, p);
    char *q = ct__calloc_alloc(a, 0, 2, 4096);
    assert_int_equal(h.nseg, 2);
    assert_true(q < p || q >= p + 2 * MiB);
    char *p2 = ct__calloc_alloc(a, 0, 1, 4096);
    assert_ptr_equal(p2, p);
    assert_int_equal(h.nseg, 2);
    ct__calloc_free(a, q);
    ct__calloc_free(a, p2);
    destroy(a, &h);
}

/* peaks, and their reset to the current values */
static void peaks(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 1);
    char *p = ct__calloc_alloc(a, 0, 0, 5 * MiB);
    char *q = ct__calloc_alloc(a, 0, 0, 3 * MiB);
    ct__calloc_free(a, p);
    char *r = ct__calloc_alloc(a, 0, 0, 1 * MiB + 512);
    ct_mem_stats st;
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.peak_allocated_bytes, 8 * MiB);
    assert_int_equal(st.allocated_bytes, 4 * MiB + 512);
    ct__calloc_reset_peaks(a, 0);
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.peak_allocated_bytes, 4 * MiB + 512);
    assert_int_equal(st.peak_reserved_bytes, 20 * MiB);
    ct__calloc_free(a, q);
    ct__calloc_free(a, r);
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.peak_allocated_bytes, 4 * MiB + 512);
    destroy(a, &h);
}

/* out of memory: the limit, the retry after releasing the cache, the
 * fallback to a segment of the request's size, and the error's text */
static void oom(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 24 * MiB, 1);
    char *p = ct__calloc_alloc(a, 0, 0, 100);       /* 2 MiB reserved */
    char *big = ct__calloc_alloc(a, 0, 0, 12 * MiB); /* 14 MiB */
    assert_non_null(big);
    /* 3 MiB wants a 20 MiB segment: over the limit, so one of 3 MiB */
    char *m = ct__calloc_alloc(a, 0, 0, 3 * MiB);
    assert_non_null(m);
    assert_int_equal(h.bytes, 17 * MiB);
    ct__calloc_free(a, big); /* cached: reserved stays 17 MiB */
    /* 13 MiB (a 14 MiB segment): only after the cached 12 MiB one is released */
    char *c = ct__calloc_alloc(a, 0, 0, 13 * MiB);
    assert_non_null(c);
    ct_mem_stats st;
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.num_segment_frees, 1);
    assert_true(st.reserved_bytes <= (int64_t)(24 * MiB));
    /* 10 MiB more cannot fit: the error names the sizes and the limit */
    char *no = ct__calloc_alloc(a, 0, 0, 10 * MiB);
    assert_null(no);
    assert_int_equal(ct_last_error_code(), CT_ERR_OOM);
    const char *e = ct_last_error();
    char want[160];
    snprintf(want, sizeof want, "%zu bytes requested", 10 * MiB);
    assert_non_null(strstr(e, want));
    snprintf(want, sizeof want, "%lld bytes allocated", (long long)st.allocated_bytes);
    assert_non_null(strstr(e, want));
    snprintf(want, sizeof want, "%lld reserved", (long long)st.reserved_bytes);
    assert_non_null(strstr(e, want));
    assert_non_null(strstr(e, "the limit is 25165824 bytes (TEST_LIMIT)"));
    ct_clear_error();
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.num_ooms, 1);
    /* the driver failing: its reason is in the error */
    h.fail_over = 1 * MiB;
    ct__calloc_free(a, c);
    ct__calloc_free(a, m);
    assert_null(ct__calloc_alloc(a, 0, 0, 15 * MiB)); /* no cached block fits: the driver is asked */
    assert_non_null(strstr(ct_last_error(), "test driver: no segment over 1048576 bytes"));
    ct_clear_error();
    h.fail_over = 0;
    ct__calloc_free(a, p);
    destroy(a, &h);
}

/* many blocks of mixed sizes freed in a shuffled order: the statistics
 * balance and every segment is whole again at the end */
static void churn(void **state) {
    (void)state;
    host_be h = {0};
    ct__calloc *a = mk(&h, 0, 1);
    enum { N = 600 };
    char *ps[N];
    unsigned s = 12345;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < N; i++) {
            s = s * 1103515245u + 12345u;
            size_t n = (s >> 8) % (i % 7 == 0 ? 3 * MiB : 64 * 1024) + 1;
            ps[i] = ct__calloc_alloc(a, 0, 0, n);
            assert_non_null(ps[i]);
            memset(ps[i], i & 0xff, n < 64 ? n : 64); /* the memory is ours (ASan) */
        }
        for (int i = 0; i < N; i++) {
            int j = (int)((unsigned)(i * 7919) % N);
            assert_true(ct__calloc_free(a, ps[j]));
        }
    }
    ct_mem_stats st;
    ct__calloc_get_stats(a, 0, &st);
    assert_int_equal(st.allocated_bytes, 0);
    assert_int_equal(st.num_allocs, 4 * N);
    assert_int_equal(st.num_frees, 4 * N);
    assert_true(st.num_cache_hits > 3 * N); /* rounds 2..4 reuse the first's memory */
    ct__calloc_empty_cache(a, 0);
    assert_int_equal(h.nseg, 0);
    destroy(a, &h);
}

/* ---- the OpenCL device, through tensors ----------------------------------- */
static ct_dev g_ocl;
static bool g_have_ocl;

static void ocl_reuse_and_stats(void **state) {
    (void)state;
    if (!g_have_ocl) { skip(); }
    SCOPE_BEGIN;
    assert_int_equal(ct_empty_cache_dev(g_ocl), CT_OK);
    ct_mem_stats s0, s1;
    assert_int_equal(ct_memory_stats(g_ocl, &s0), CT_OK);
    ct_tensor *x = ct_zeros_dev((int64_t[]){256, 256}, 2, CT_F32, g_ocl); /* 256 KiB */
    assert_non_null(x);
    assert_int_equal(ct_memory_allocated(g_ocl), s0.allocated_bytes + 256 * 1024);
    assert_int_equal(ct_memory_stats(g_ocl, &s1), CT_OK);
    assert_int_equal(s1.reserved_bytes, s0.reserved_bytes + (int64_t)(2 * MiB));
    ct_release(ct_keep(x)); /* freed: cached */
    assert_int_equal(ct_memory_allocated(g_ocl), s0.allocated_bytes);
    assert_int_equal(ct_memory_reserved(g_ocl), s1.reserved_bytes);
    ct_tensor *y = ct_full_dev((int64_t[]){1000}, 1, 3.0, CT_F32, g_ocl); /* from the cache */
    assert_non_null(y);
    assert_int_equal(ct_memory_stats(g_ocl, &s1), CT_OK);
    assert_int_equal(s1.num_segment_allocs, s0.num_segment_allocs + 1);
    assert_true(s1.num_cache_hits > s0.num_cache_hits);
    assert_float_equal(ct_item(ct_sum(y, NULL, 0, false)), 3000.0, 0);
    assert_true(ct_max_memory_allocated(g_ocl) >= 256 * 1024);
    assert_int_equal(ct_reset_peak_memory_stats(g_ocl), CT_OK);
    assert_int_equal(ct_max_memory_allocated(g_ocl), ct_memory_allocated(g_ocl));
    char *sum = ct_memory_summary(g_ocl);
    assert_non_null(sum);
    assert_non_null(strstr(sum, "opencl:0"));
    assert_non_null(strstr(sum, "allocated"));
    assert_non_null(strstr(sum, "reserved"));
    free(sum);
    /* devices without a caching allocator, and ones that do not exist */
    assert_int_equal(ct_memory_allocated(CT_DEV(CT_CPU, 0)), 0);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "cpu has no caching allocator"));
    ct_clear_error();
    assert_int_equal(ct_empty_cache_dev(CT_DEV(CT_OPENCL, 99)), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "opencl:99"));
    ct_clear_error();
    assert_int_equal(ct_memory_stats(g_ocl, NULL), CT_ERR_NULL);
    ct_clear_error();
    SCOPE_END;
}

/* 1,000 steps of a small training loop (a linear model, squared loss,
 * autograd, an SGD update) on the device: after the first steps the
 * reserved memory does not grow, and every allocation comes from the cache. */
static void ocl_training_steady(void **state) {
    (void)state;
    if (!g_have_ocl) { skip(); }
    SCOPE_BEGIN;
    ct_manual_seed(3);
    ct_tensor *xc = ct_randn((int64_t[]){32, 16}, 2, CT_F32);
    ct_tensor *wt = ct_randn((int64_t[]){16}, 1, CT_F32);
    ct_tensor *X = ct_to_dev(xc, g_ocl);
    ct_tensor *Y = ct_to_dev(ct_sum(ct_mul(xc, wt), (int64_t[]){1}, 1, false), g_ocl);
    ct_tensor *w = ct_zeros_dev((int64_t[]){16}, 1, CT_F32, g_ocl);
    assert_non_null(Y);
    assert_non_null(w);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    ct_mem_stats a, b;
    double first_loss = 0, loss = 0;
    for (int step = 0; step < 1000; step++) {
        if (step == 10) assert_int_equal(ct_memory_stats(g_ocl, &a), CT_OK);
        ct_scope s = ct_scope_begin();
        ct_tensor *pred = ct_sum(ct_mul(X, w), (int64_t[]){1}, 1, false);
        ct_tensor *d = ct_sub(pred, Y);
        ct_tensor *l = ct_mean(ct_mul(d, d), NULL, 0, false);
        assert_non_null(l);
        assert_int_equal(ct_backward(l, NULL, false, false), CT_OK);
        bool was = ct_set_grad_enabled(false);
        assert_non_null(ct_add_scaled_(w, ct_grad(w), -0.05));
        ct_set_grad_enabled(was);
        ct_zero_grad(w);
        if (step == 0) first_loss = ct_item(l);
        if (step == 999) loss = ct_item(l);
        ct_scope_end(s);
    }
    assert_int_equal(ct_memory_stats(g_ocl, &b), CT_OK);
    printf("training steps 10..1000: reserved %lld -> %lld bytes, allocations %lld (%lld from the cache), "
           "driver allocations %lld -> %lld, loss %.4g -> %.3g\n", (long long)a.reserved_bytes,
           (long long)b.reserved_bytes, (long long)(b.num_allocs - a.num_allocs),
           (long long)(b.num_cache_hits - a.num_cache_hits), (long long)a.num_segment_allocs,
           (long long)b.num_segment_allocs, first_loss, loss);
    assert_int_equal(b.reserved_bytes, a.reserved_bytes);
    assert_int_equal(b.num_segment_allocs, a.num_segment_allocs);
    assert_true(b.num_allocs - a.num_allocs >= 990 * 5); /* the steps did allocate */
    assert_int_equal(b.num_cache_hits - a.num_cache_hits, b.num_allocs - a.num_allocs);
    assert_true(loss < first_loss * 1e-3); /* and trained */
    SCOPE_END;
}

/* out of memory on the device under CT_OPENCL_MEMORY_LIMIT (64 MiB, set in
 * main): a clear error naming the sizes, not an abort; the memory is
 * usable again after the tensors are freed */
static void ocl_oom(void **state) {
    (void)state;
    if (!g_have_ocl) { skip(); }
    SCOPE_BEGIN;
    assert_int_equal(ct_empty_cache_dev(g_ocl), CT_OK); /* nothing cached: the reserved bytes are a's */
    ct_tensor *a = ct_empty_dev((int64_t[]){40 << 20}, 1, CT_U8, g_ocl);
    assert_non_null(a);
    int64_t al = ct_memory_allocated(g_ocl), re = ct_memory_reserved(g_ocl);
    ct_tensor *b = ct_empty_dev((int64_t[]){30 << 20}, 1, CT_U8, g_ocl);
    char want[128];
    assert_null(b);
    assert_int_equal(ct_last_error_code(), CT_ERR_OOM);
    const char *e = ct_last_error();
    assert_non_null(strstr(e, "opencl:0: out of memory: 31457280 bytes requested"));
    snprintf(want, sizeof want, "%lld bytes allocated", (long long)al);
    assert_non_null(strstr(e, want));
    snprintf(want, sizeof want, "%lld reserved", (long long)re);
    assert_non_null(strstr(e, want));
    assert_non_null(strstr(e, "the limit is 67108864 bytes (CT_OPENCL_MEMORY_LIMIT)"));
    ct_clear_error();
    /* an op whose output does not fit: the same error through the op */
    ct_tensor *c = ct_clone(a);
    assert_null(c);
    assert_int_equal(ct_last_error_code(), CT_ERR_OOM);
    assert_non_null(strstr(ct_last_error(), "41943040 bytes requested"));
    ct_clear_error();
    ct_release(ct_keep(a));
    b = ct_empty_dev((int64_t[]){30 << 20}, 1, CT_U8, g_ocl); /* fits now (from the cache) */
    assert_non_null(b);
    SCOPE_END;
}

int main(void) {
    setenv("CT_OPENCL_MEMORY_LIMIT", "67108864", 1);
    const char *names[4];
    g_have_ocl = ct_opencl_devices(names, 4) > 0;
    if (!g_have_ocl) printf("test_caching_alloc: the OpenCL cases are skipped: %s\n", ct_last_error());
    ct_clear_error();
    g_ocl = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_pool),
        cmocka_unit_test(large_pool),
        cmocka_unit_test(empty_cache_keeps_live),
        cmocka_unit_test(streams),
        cmocka_unit_test(peaks),
        cmocka_unit_test(oom),
        cmocka_unit_test(churn),
        cmocka_unit_test(ocl_reuse_and_stats),
        cmocka_unit_test(ocl_training_steady),
        cmocka_unit_test(ocl_oom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
