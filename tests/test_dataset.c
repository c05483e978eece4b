/* test_dataset.c -- built-in datasets (TensorDataset, ConcatDataset,
 * Subset, random_split, IDX, text, CSV) and samplers' documented orders
 * (DistributedSampler against torch). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

#define FX CT_FIXTURE_DIR "/dataset/"

static ct_tensor *arange_i64(int64_t n) { return ct_arange(0, (double)n, 1, CT_I64); }

static void test_tensor_dataset(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    ct_tensor *x = ct_reshape(ct_arange(0, 12, 1, CT_F32), CT_SHAPE(4, 3));
    ct_tensor *y = arange_i64(4);
    const char *names[] = {"x", "y"};
    ct_tensor *ts[] = {x, y};
    ct_dataset *d = ct_tensor_dataset_new(names, ts, 2);
    assert_non_null(d);
    assert_int_equal(ct_dataset_len(d), 4);
    ct_sample *sm = ct_sample_new();
    assert_int_equal(ct_dataset_get(d, 2, sm), CT_OK);
    assert_int_equal(ct_sample_count(sm), 2);
    assert_true(ct_item(ct_select(ct_sample_get(sm, "x"), 0, 1)) == 7.0);
    assert_int_equal(ct_item_int(ct_sample_get(sm, "y")), 2);
    assert_int_not_equal(ct_dataset_get(d, 4, sm), CT_OK);
    assert_int_equal(ct_last_error_code(), CT_ERR_INDEX);
    /* mismatched first dims */
    ct_tensor *bad[] = {x, arange_i64(5)};
    assert_null(ct_tensor_dataset_new(names, bad, 2));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "size mismatch"));
    /* concat and subset */
    ct_dataset *two[] = {d, d};
    ct_dataset *c = ct_concat_dataset_new(two, 2);
    assert_int_equal(ct_dataset_len(c), 8);
    assert_int_equal(ct_dataset_get(c, 5, sm), CT_OK);
    assert_int_equal(ct_item_int(ct_sample_get(sm, "y")), 1);
    int64_t idx[] = {7, 0, 3};
    ct_dataset *sub = ct_subset_new(c, idx, 3);
    assert_int_equal(ct_dataset_len(sub), 3);
    assert_int_equal(ct_dataset_get(sub, 0, sm), CT_OK);
    assert_int_equal(ct_item_int(ct_sample_get(sm, "y")), 3);
    int64_t badidx[] = {0, 8};
    assert_null(ct_subset_new(c, badidx, 2));
    assert_non_null(strstr(ct_last_error(), "indices[1] = 8"));
    ct_sample_free(sm);
    ct_dataset_release(sub);
    ct_dataset_release(c);
    ct_dataset_release(d);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

static void test_random_split(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    ct_tensor *y = arange_i64(10);
    const char *nm[] = {"y"};
    ct_dataset *d = ct_tensor_dataset_new(nm, &y, 1);
    ct_dataset *p[2], *q[2];
    assert_int_equal(ct_random_split(d, (int64_t[]){3, 7}, 2, 42, p), CT_OK);
    assert_int_equal(ct_random_split(d, (int64_t[]){3, 7}, 2, 42, q), CT_OK);
    int seen[10] = {0};
    ct_sample *a = ct_sample_new(), *b = ct_sample_new();
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < ct_dataset_len(p[k]); i++) {
            assert_int_equal(ct_dataset_get(p[k], i, a), CT_OK);
            assert_int_equal(ct_dataset_get(q[k], i, b), CT_OK);
            int64_t v = ct_item_int(ct_sample_get(a, "y"));
            assert_int_equal(v, ct_item_int(ct_sample_get(b, "y"))); /* same seed, same split */
            seen[v]++;
        }
    for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 1); /* a partition */
    for (int k = 0; k < 2; k++) { ct_dataset_release(p[k]); ct_dataset_release(q[k]); }
    assert_int_not_equal(ct_random_split(d, (int64_t[]){3, 6}, 2, 42, p), CT_OK);
    assert_non_null(strstr(ct_last_error(), "does not equal"));
    ct_dataset_release(d);
    /* fraction lengths against torch */
    FILE *f = fopen(FX "random_split.txt", "r");
    assert_non_null(f);
    char line[512];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        double fr[8];
        int nf = 0;
        char *p2 = line;
        int64_t n = strtoll(p2, &p2, 10);
        while (p2 < colon) {
            char *e;
            double v = strtod(p2, &e);
            if (e == p2 || e > colon) break;
            fr[nf++] = v;
            p2 = e;
        }
        ct_tensor *t = arange_i64(n);
        ct_dataset *dd = ct_tensor_dataset_new(nm, &t, 1);
        ct_dataset *parts[8];
        assert_int_equal(ct_random_split_fractions(dd, fr, nf, 1, parts), CT_OK);
        char *q2 = colon + 1;
        for (int k = 0; k < nf; k++) {
            int64_t want = strtoll(q2, &q2, 10);
            assert_int_equal(ct_dataset_len(parts[k]), want);
            ct_dataset_release(parts[k]);
        }
        ct_dataset_release(dd);
        cases++;
    }
    fclose(f);
    assert_int_equal(cases, 4);
    ct_sample_free(a);
    ct_sample_free(b);
    ct_scope_end(s);
}

static void test_idx(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    FILE *f = fopen(FX "images.txt", "r");
    assert_non_null(f);
    int px[60], lb[5];
    for (int i = 0; i < 60; i++) assert_int_equal(fscanf(f, "%d", &px[i]), 1);
    for (int i = 0; i < 5; i++) assert_int_equal(fscanf(f, "%d", &lb[i]), 1);
    fclose(f);
    ct_tensor *im = ct_idx_load(FX "small-images-idx3-ubyte.gz");
    assert_non_null(im);
    assert_int_equal(ct_ndim(im), 3);
    assert_int_equal(ct_size(im, 1), 4);
    const uint8_t *p = ct_data_ptr(im);
    for (int i = 0; i < 60; i++) assert_int_equal(p[i], px[i]);
    ct_tensor *g = ct_idx_load(FX "f32-idx2");
    assert_non_null(g);
    assert_int_equal(ct_get_dtype(g), CT_F32);
    assert_true(((float *)ct_data_ptr(g))[1] == -2.25f && ((float *)ct_data_ptr(g))[2] == 3e10f);
    /* datasets */
    ct_dataset *d = ct_idx_dataset_new(FX "small-images-idx3-ubyte.gz", FX "small-labels-idx1-ubyte", CT_U8);
    assert_non_null(d);
    ct_dataset *df = ct_idx_dataset_new(FX "small-images-idx3-ubyte.gz", FX "small-labels-idx1-ubyte", CT_F32);
    ct_sample *sm = ct_sample_new();
    assert_int_equal(ct_dataset_get(d, 3, sm), CT_OK);
    assert_int_equal(ct_item_int(ct_sample_get(sm, "label")), lb[3]);
    assert_int_equal(ct_get_dtype(ct_sample_get(sm, "label")), CT_I64);
    assert_int_equal(ct_ndim(ct_sample_get(sm, "image")), 2);
    assert_int_equal(((uint8_t *)ct_data_ptr(ct_sample_get(sm, "image")))[5], px[36 + 5]);
    assert_int_equal(ct_dataset_get(df, 3, sm), CT_OK);
    assert_int_equal(ct_ndim(ct_sample_get(sm, "image")), 3);
    assert_true(((float *)ct_data_ptr(ct_sample_get(sm, "image")))[5] == (float)px[41] / 255.0f);
    ct_sample_free(sm);
    ct_dataset_release(d);
    ct_dataset_release(df);
    /* hostile inputs */
    uint8_t bad1[] = {0, 0, 8, 1, 0, 0, 0, 9, 1, 2, 3};
    assert_null(ct_idx_load_buffer(bad1, sizeof bad1));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_non_null(strstr(ct_last_error(), "truncated"));
    uint8_t bad2[] = {1, 0, 8, 1, 0, 0, 0, 1, 1};
    assert_null(ct_idx_load_buffer(bad2, sizeof bad2));
    assert_non_null(strstr(ct_last_error(), "magic"));
    uint8_t bad3[] = {0, 0, 7, 1, 0, 0, 0, 1, 1};
    assert_null(ct_idx_load_buffer(bad3, sizeof bad3));
    assert_non_null(strstr(ct_last_error(), "dtype byte 0x07"));
    uint8_t bad4[] = {0, 0, 8, 0};
    assert_null(ct_idx_load_buffer(bad4, sizeof bad4));
    assert_non_null(strstr(ct_last_error(), "ndim 0"));
    uint8_t bad5[] = {0, 0, 0x0E, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    assert_null(ct_idx_load_buffer(bad5, sizeof bad5));
    assert_int_equal(ct_last_error_code(), CT_ERR_OVERFLOW);
    uint8_t bad6[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2, 3};
    assert_null(ct_idx_load_buffer(bad6, sizeof bad6));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_null(ct_idx_load(FX "no-such-file"));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_null(ct_idx_dataset_new(FX "small-labels-idx1-ubyte", FX "small-labels-idx1-ubyte", CT_U8));
    assert_non_null(strstr(ct_last_error(), "images must be uint8 [N, H, W]"));
    ct_scope_end(s);
}

static char *write_tmp(const char *text) {
    static char path[4][64];
    static int k;
    char *p = path[k++ % 4];
    snprintf(p, 64, "/tmp/ct_test_dataset_%d_%d.txt", (int)getpid(), k);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    return p;
}

static void test_text(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    char *p = write_tmp("hello\r\n\nworld"), *first = p;
    ct_dataset *d = ct_text_lines_dataset_new(p);
    assert_int_equal(ct_dataset_len(d), 3);
    ct_sample *sm = ct_sample_new();
    assert_int_equal(ct_dataset_get(d, 0, sm), CT_OK);
    assert_int_equal(ct_numel(ct_sample_get(sm, "text")), 5);
    assert_int_equal(ct_dataset_get(d, 1, sm), CT_OK);
    assert_int_equal(ct_numel(ct_sample_get(sm, "text")), 0);
    assert_int_equal(ct_dataset_get(d, 2, sm), CT_OK);
    assert_memory_equal(ct_data_ptr(ct_sample_get(sm, "text")), "world", 5);
    ct_dataset_release(d);
    /* char stream: "abcab" with seq_len 2, stride 1 -> 3 samples */
    p = write_tmp("abcab");
    ct_dataset *c = ct_char_dataset_new(p, 2, 1, NULL);
    assert_int_equal(ct_dataset_len(c), 3);
    int nv = 0;
    const char *v = ct_char_dataset_vocab(c, &nv);
    assert_int_equal(nv, 3);
    assert_memory_equal(v, "abc", 3);
    assert_null(ct_char_dataset_vocab(d = ct_text_lines_dataset_new(p), NULL));
    ct_dataset_release(d);
    assert_int_equal(ct_dataset_get(c, 2, sm), CT_OK);
    const int64_t *ids = ct_data_ptr(ct_sample_get(sm, "ids"));
    assert_int_equal(ct_numel(ct_sample_get(sm, "ids")), 3);
    assert_true(ids[0] == 2 && ids[1] == 0 && ids[2] == 1);
    ct_dataset_release(c);
    c = ct_char_dataset_new(p, 2, 2, "cba");
    assert_int_equal(ct_dataset_len(c), 2);
    assert_int_equal(ct_dataset_get(c, 1, sm), CT_OK);
    ids = ct_data_ptr(ct_sample_get(sm, "ids"));
    assert_true(ids[0] == 0 && ids[1] == 2 && ids[2] == 1);
    ct_dataset_release(c);
    assert_null(ct_char_dataset_new(p, 2, 1, "ab"));
    assert_non_null(strstr(ct_last_error(), "offset 2"));
    ct_sample_free(sm);
    ct_scope_end(s);
    unlink(first); /* the two text files this test wrote */
    unlink(p);
}

static void test_csv(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    FILE *f = fopen(FX "small_csv.txt", "r");
    assert_non_null(f);
    int rows, cols;
    assert_int_equal(fscanf(f, "%d %d", &rows, &cols), 2);
    double want[64];
    int64_t wl[16];
    for (int i = 0; i < rows * cols; i++) assert_int_equal(fscanf(f, "%lf", &want[i]), 1);
    for (int i = 0; i < rows; i++) assert_int_equal(fscanf(f, "%ld", &wl[i]), 1);
    fclose(f);
    ct_dataset *d = ct_csv_dataset_new(FX "small.csv", "label", CT_I64);
    assert_non_null(d);
    assert_int_equal(ct_dataset_len(d), rows);
    ct_sample *sm = ct_sample_new();
    for (int r = 0; r < rows; r++) {
        assert_int_equal(ct_dataset_get(d, r, sm), CT_OK);
        ct_tensor *x = ct_sample_get(sm, "features");
        assert_int_equal(ct_numel(x), cols);
        for (int c = 0; c < cols; c++) assert_true(((float *)ct_data_ptr(x))[c] == (float)want[r * cols + c]);
        assert_int_equal(ct_item_int(ct_sample_get(sm, "label")), wl[r]);
    }
    ct_dataset_release(d);
    ct_sample_free(sm);
    struct { const char *text, *msg; } bad[] = {
        {"a,b\n1,2\n3\n", "line 3: 1 fields"},
        {"a,b\n1,2\n3,x\n", "line 3, column 2 ('b'): 'x' is not a number"},
        {"a,b\n1,\"2\n", "line 2, column 2: unterminated"},
        {"a,b\n1,\"2\"x\n", "line 2, column 2: unexpected character 'x'"},
        {"a,b\n1,2,3\n", "line 2, column 3: more fields"},
        {"a,b\n1,\n", "missing value"},
        {"", "empty input"},
        {"a,b\n1,2.5\n", "label 2.5 is not an integer"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *lab = i == 7 ? "b" : NULL;
        assert_null(ct_csv_dataset_from_buffer(bad[i].text, strlen(bad[i].text), lab, CT_I64));
        if (!strstr(ct_last_error(), bad[i].msg)) fprintf(stderr, "case %zu: %s\n", i, ct_last_error());
        assert_non_null(strstr(ct_last_error(), bad[i].msg));
    }
    assert_null(ct_csv_dataset_from_buffer("a\n1\n", 4, "zz", CT_I64));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    ct_scope_end(s);
}

static int64_t *idxs(ct_sampler *s, int64_t *n) {
    int64_t *o = NULL;
    *n = ct_sampler_indices(s, &o);
    return o;
}

static int is_perm(const int64_t *v, int64_t n) {
    char *seen = calloc((size_t)n + 1, 1);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] >= n || seen[v[i]]) ok = 0;
        else seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_samplers(void **state) {
    (void)state;
    int64_t n, n2;
    ct_sampler *s = ct_sequential_sampler_new(5);
    int64_t *v = idxs(s, &n);
    assert_int_equal(n, 5);
    for (int i = 0; i < 5; i++) assert_int_equal(v[i], i);
    free(v);
    /* batch sampler */
    ct_sampler *b = ct_batch_sampler_new(s, 2, false);
    assert_int_equal(ct_sampler_len(b), 3);
    int64_t *ix, *off;
    assert_int_equal(ct_sampler_batches(b, &ix, &off), 3);
    assert_true(off[0] == 0 && off[1] == 2 && off[2] == 4 && off[3] == 5 && ix[4] == 4);
    free(ix);
    free(off);
    ct_sampler_release(b);
    b = ct_batch_sampler_new(s, 2, true);
    assert_int_equal(ct_sampler_len(b), 2);
    assert_int_equal(ct_sampler_batches(b, &ix, &off), 2);
    assert_int_equal(off[2], 4);
    free(ix);
    free(off);
    ct_sampler_release(b);
    ct_sampler_release(s);
    /* random: a permutation, reproducible per (seed, epoch), different across epochs */
    s = ct_random_sampler_new(100, false, -1, 7);
    v = idxs(s, &n);
    assert_true(is_perm(v, n));
    int64_t *ref = malloc(sizeof *ref * 100);
    ct_randperm_seeded(100, 7, 0, ref);
    assert_memory_equal(v, ref, sizeof *ref * 100);
    ct_sampler_set_epoch(s, 1);
    int64_t *w = idxs(s, &n2);
    assert_true(is_perm(w, n2));
    assert_true(memcmp(v, w, sizeof *v * 100) != 0);
    ct_sampler_set_epoch(s, 0);
    free(w);
    w = idxs(s, &n2);
    assert_memory_equal(v, w, sizeof *v * 100);
    free(v);
    free(w);
    free(ref);
    ct_sampler_release(s);
    /* num_samples > n without replacement: whole permutations then a partial one */
    s = ct_random_sampler_new(4, false, 10, 3);
    v = idxs(s, &n);
    assert_int_equal(n, 10);
    assert_true(is_perm(v, 4) && is_perm(v + 4, 4));
    free(v);
    ct_sampler_release(s);
    s = ct_random_sampler_new(3, true, 50, 3);
    v = idxs(s, &n);
    int cnt[3] = {0};
    for (int i = 0; i < n; i++) { assert_true(v[i] >= 0 && v[i] < 3); cnt[v[i]]++; }
    assert_true(cnt[0] && cnt[1] && cnt[2]);
    free(v);
    ct_sampler_release(s);
    /* weighted */
    double wts[] = {0, 1, 0, 3};
    s = ct_weighted_random_sampler_new(wts, 4, 400, true, 1);
    v = idxs(s, &n);
    int c4[4] = {0};
    for (int i = 0; i < n; i++) c4[v[i]]++;
    assert_true(c4[0] == 0 && c4[2] == 0 && c4[3] > 2 * c4[1] && c4[1] > 50);
    free(v);
    ct_sampler_release(s);
    s = ct_weighted_random_sampler_new(wts, 4, 2, false, 1);
    v = idxs(s, &n);
    assert_int_equal(n, 2);
    assert_true((v[0] == 1 && v[1] == 3) || (v[0] == 3 && v[1] == 1));
    free(v);
    ct_sampler_release(s);
    assert_null(ct_weighted_random_sampler_new(wts, 4, 3, false, 1));
    double neg[] = {1, -1};
    assert_null(ct_weighted_random_sampler_new(neg, 2, 1, true, 1));
    assert_non_null(strstr(ct_last_error(), "weights[1]"));
    /* subset random */
    int64_t sub[] = {10, 20, 30, 40};
    s = ct_subset_random_sampler_new(sub, 4, 9);
    v = idxs(s, &n);
    ref = malloc(sizeof *ref * 4);
    ct_randperm_seeded(4, 9, 0, ref);
    for (int i = 0; i < 4; i++) assert_int_equal(v[i], sub[ref[i]]);
    free(v);
    free(ref);
    ct_sampler_release(s);
    assert_null(ct_distributed_sampler_new(10, 2, 2, false, 0, false));
    assert_null(ct_batch_sampler_new(NULL, 2, false));
}

static void test_distributed_vs_torch(void **state) {
    (void)state;
    FILE *f = fopen(FX "distributed.txt", "r");
    assert_non_null(f);
    char line[4096];
    int cases = 0;
    while (fgets(line, sizeof line, f)) {
        int n, R, drop, rank;
        assert_int_equal(sscanf(line, "%d %d %d %d", &n, &R, &drop, &rank), 4);
        ct_sampler *s = ct_distributed_sampler_new(n, R, rank, false, 0, drop);
        assert_non_null(s);
        int64_t m, *v = idxs(s, &m);
        char *p = strchr(line, ':') + 1;
        int64_t k = 0;
        for (;;) {
            char *e;
            long x = strtol(p, &e, 10);
            if (e == p) break;
            p = e;
            assert_true(k < m);
            assert_int_equal(v[k], x);
            k++;
        }
        assert_int_equal(k, m);
        assert_int_equal(ct_sampler_len(s), m);
        free(v);
        ct_sampler_release(s);
        cases++;
    }
    fclose(f);
    assert_true(cases > 100);
    /* shuffle: ranks partition a permutation, plus torch's padding */
    for (int drop = 0; drop < 2; drop++) {
        int64_t N = 13, R = 4, got[64], total = 0;
        for (int r = 0; r < R; r++) {
            ct_sampler *s = ct_distributed_sampler_new(N, (int)R, r, true, 5, drop);
            ct_sampler_set_epoch(s, 3);
            int64_t m, *v = idxs(s, &m);
            for (int64_t i = 0; i < m; i++) got[(i * R + r)] = v[i];
            total += m;
            free(v);
            ct_sampler_release(s);
        }
        int64_t perm[13];
        ct_randperm_seeded(N, 5, 3, perm);
        assert_int_equal(total, drop ? 12 : 16);
        for (int64_t p = 0; p < total; p++) assert_int_equal(got[p], perm[p % N]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_dataset), cmocka_unit_test(test_random_split),
        cmocka_unit_test(test_idx),            cmocka_unit_test(test_text),
        cmocka_unit_test(test_csv),            cmocka_unit_test(test_samplers),
        cmocka_unit_test(test_distributed_vs_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
