/* test_dataframe.c -- the DataFrame against pandas 1.5 (fixtures from
 * tools/fixtures/gen_dataframe.py), malformed CSVs with exact line and
 * column, and the Arrow C Data Interface against pyarrow's layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>

#define FX CT_FIXTURE_DIR "/dataframe/"

static ct_df *load(const char *name) {
    char p[512];
    snprintf(p, sizeof p, FX "%s", name);
    ct_df *df = ct_df_read_csv(p, NULL);
    if (!df) fprintf(stderr, "load %s: %s\n", name, ct_last_error());
    return df;
}

static bool is_numeric(ct_df_type t) { return t != CT_DF_STRING && t != CT_DF_LIST; }

/* compares got with pandas' CSV; numbers with a relative tolerance */
static void expect_frame(const ct_df *got, const char *fixture) {
    assert_non_null(got);
    ct_df *exp = load(fixture);
    assert_non_null(exp);
    if (ct_df_num_columns(got) != ct_df_num_columns(exp) || ct_df_num_rows(got) != ct_df_num_rows(exp))
        fprintf(stderr, "%s: got %d x %lld, pandas %d x %lld\n", fixture, ct_df_num_columns(got),
                (long long)ct_df_num_rows(got), ct_df_num_columns(exp), (long long)ct_df_num_rows(exp));
    assert_int_equal(ct_df_num_columns(got), ct_df_num_columns(exp));
    assert_int_equal(ct_df_num_rows(got), ct_df_num_rows(exp));
    int bad = 0;
    for (int c = 0; c < ct_df_num_columns(exp); c++) {
        if (strcmp(ct_df_column_name(got, c), ct_df_column_name(exp, c)) != 0) {
            fprintf(stderr, "%s: column %d named '%s', pandas '%s'\n", fixture, c, ct_df_column_name(got, c),
                    ct_df_column_name(exp, c));
            bad++;
            continue;
        }
        ct_column *a = ct_df_column_at(got, c), *b = ct_df_column_at(exp, c);
        for (int64_t r = 0; r < ct_df_num_rows(exp); r++) {
            bool na = ct_column_is_null(a, r), nb = ct_column_is_null(b, r);
            bool ok;
            if (na || nb) ok = na == nb;
            else if (is_numeric(ct_column_type(a)) && is_numeric(ct_column_type(b))) {
                double x = ct_column_get_double(a, r), y = ct_column_get_double(b, r);
                ok = (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= 1e-12 * fmax(1, fabs(y));
            } else if (ct_column_type(a) == CT_DF_STRING && ct_column_type(b) == CT_DF_STRING) {
                int32_t la, lb;
                const char *sa = ct_column_get_string(a, r, &la), *sb = ct_column_get_string(b, r, &lb);
                ok = la == lb && memcmp(sa, sb, (size_t)la) == 0;
            } else ok = false;
            if (!ok) {
                fprintf(stderr, "%s: column '%s' row %lld differs (types %s / %s, %g / %g)\n", fixture,
                        ct_df_column_name(exp, c), (long long)r, ct_df_type_name(ct_column_type(a)),
                        ct_df_type_name(ct_column_type(b)), ct_column_get_double(a, r), ct_column_get_double(b, r));
                bad++;
            }
        }
    }
    ct_df_free(exp);
    assert_int_equal(bad, 0);
}

static void test_read_csv_types(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    assert_int_equal(ct_df_num_rows(df), 8);
    assert_int_equal(ct_df_num_columns(df), 7);
    assert_int_equal(ct_column_type(ct_df_column(df, "id")), CT_DF_INT64);
    assert_int_equal(ct_column_type(ct_df_column(df, "score")), CT_DF_FLOAT64);
    assert_int_equal(ct_column_type(ct_df_column(df, "count")), CT_DF_INT64);  /* pandas: float64 */
    assert_int_equal(ct_column_type(ct_df_column(df, "flag")), CT_DF_BOOL);
    assert_int_equal(ct_column_type(ct_df_column(df, "name")), CT_DF_STRING);
    assert_int_equal(ct_column_null_count(ct_df_column(df, "score")), 2);
    assert_int_equal(ct_column_null_count(ct_df_column(df, "flag")), 1);
    int32_t l;
    const char *s = ct_column_get_string(ct_df_column(df, "name"), 2, &l);
    assert_int_equal(l, 12);
    assert_memory_equal(s, "He said \"hi\"", 12);
    s = ct_column_get_string(ct_df_column(df, "name"), 4, &l);
    assert_memory_equal(s, "multi\nline", 10);
    expect_frame(df, "read.csv");
    ct_df_free(df);
}

static void test_frame_ops(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    ct_df *h = ct_df_head(df, 3);
    expect_frame(h, "head3.csv");
    ct_df_free(h);
    const char *sel[] = {"name", "score"};
    ct_df *s = ct_df_select(df, sel, 2);
    expect_frame(s, "select.csv");
    ct_df_free(s);
    ct_df *r = ct_df_rename(df, "score", "points");
    expect_frame(r, "rename.csv");
    ct_df_free(r);
    ct_df *f = ct_df_filter(df, ct_df_column(df, "flag"));
    expect_frame(f, "filter_flag.csv");
    ct_df_free(f);
    const char *keys[] = {"city", "score"};
    bool asc[] = {true, false};
    ct_df *so = ct_df_sort_by(df, keys, asc, 2);
    expect_frame(so, "sort.csv");
    ct_df_free(so);
    const char *idk[] = {"id"};
    bool desc[] = {false};
    so = ct_df_sort_by(df, idk, desc, 1);
    expect_frame(so, "sort_id_desc.csv");
    ct_df_free(so);
    ct_df *dn = ct_df_drop_nulls(df, NULL, 0);
    expect_frame(dn, "dropna.csv");
    ct_df_free(dn);
    const char *sc[] = {"score"};
    dn = ct_df_drop_nulls(df, sc, 1);
    expect_frame(dn, "dropna_score.csv");
    ct_df_free(dn);
    ct_column *fs = ct_column_fill_null(ct_df_column(df, "score"), 0.0);
    ct_column *fc = ct_column_fill_null(ct_df_column(df, "count"), -1);
    ct_df *t1 = ct_df_with_column(df, "score", fs);
    ct_df *t2 = ct_df_with_column(t1, "count", fc);
    expect_frame(t2, "fillna.csv");
    assert_int_equal(ct_column_null_count(fs), 0);
    ct_df_free(t1); ct_df_free(t2);
    ct_column_release(fs); ct_column_release(fc);
    /* errors */
    assert_null(ct_df_select(df, (const char *[]){"nope"}, 1));
    assert_string_equal(ct_last_error(), "dataframe: no column 'nope'");
    assert_null(ct_df_filter(df, ct_df_column(df, "id")));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_null(ct_df_rename(df, "id", "name"));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    ct_df_free(df);
}

static void test_expressions(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    ct_column *s = ct_df_column(df, "score"), *c = ct_df_column(df, "count"), *i = ct_df_column(df, "id");
    ct_column *cols[13];
    ct_column *t = ct_column_binary_scalar(s, CT_DF_MUL, 2.0, false);
    cols[0] = ct_column_binary(t, CT_DF_ADD, i);
    ct_column_release(t);
    cols[1] = ct_column_binary(i, CT_DF_DIV, c);
    cols[2] = ct_column_binary_int(i, CT_DF_SUB, 3, false);
    cols[3] = ct_column_binary(i, CT_DF_MUL, c);
    cols[4] = ct_column_binary_scalar(s, CT_DF_GT, 1.0, false);
    cols[5] = ct_column_binary_int(i, CT_DF_LE, 4, false);
    cols[6] = ct_column_log(s);
    cols[7] = ct_column_clip(s, 0, 2);
    cols[8] = ct_column_clip(i, 2, 5);
    cols[9] = ct_column_standardize(s);
    cols[10] = ct_column_minmax_scale(s);
    double b[] = {0.0, 1.0, 2.0};
    cols[11] = ct_column_bucketize(s, b, 3, false);
    cols[12] = ct_column_bucketize(s, b, 3, true);
    assert_int_equal(ct_column_type(cols[2]), CT_DF_INT64);
    assert_int_equal(ct_column_type(cols[1]), CT_DF_FLOAT64);
    assert_int_equal(ct_column_type(cols[8]), CT_DF_INT64);
    /* pandas gives NaN for log of a negative; our log gives NaN, pandas' fixture masks it: mask ours too */
    ct_column *pos = ct_column_binary_scalar(s, CT_DF_GT, 0.0, false);
    ct_df *tmp = ct_df_new((const char *[]){"v"}, &cols[6], 1);
    ct_df *tf = ct_df_filter(tmp, pos);
    assert_int_equal(ct_df_num_rows(tf), 5);
    ct_df_free(tmp); ct_df_free(tf);
    ct_column_release(pos);
    const char *names[13] = {"score_x2_plus_id", "id_div_count", "id_minus_3", "id_times_count", "score_gt_1",
                             "id_le_4", "log_score", "clip_score", "clip_id", "std_score", "minmax_score",
                             "bucket_score", "bucket_score_right"};
    ct_df *e = ct_df_new(names, cols, 13);
    assert_non_null(e);
    /* NaN (log of -0.5) vs pandas null */
    ct_df *e2 = NULL;
    {
        ct_column *lg = cols[6];
        int64_t n = ct_column_length(lg);
        double v[16]; uint8_t ok[16];
        for (int64_t k = 0; k < n; k++) { v[k] = ct_column_get_double(lg, k); ok[k] = !isnan(v[k]); }
        ct_column *m = ct_column_from_float64(v, ok, n);
        e2 = ct_df_with_column(e, "log_score", m);
        ct_column_release(m);
    }
    expect_frame(e2, "expr.csv");
    ct_df_free(e); ct_df_free(e2);
    for (int k = 0; k < 13; k++) ct_column_release(cols[k]);
    /* errors */
    assert_null(ct_column_binary(s, CT_DF_ADD, ct_df_column(df, "name")));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    double bad[] = {1, 0};
    assert_null(ct_column_bucketize(s, bad, 2, false));
    assert_string_equal(ct_last_error(), "bucketize: boundaries not sorted at index 1 (1 > 0)");
    ct_df_free(df);
}

static void test_one_hot_strings_tokens(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    const char *sel[] = {"id", "city"};
    ct_df *s = ct_df_select(df, sel, 2);
    ct_df *d = ct_df_one_hot(s, "city");
    expect_frame(d, "dummies.csv");
    ct_df_free(s); ct_df_free(d);
    ct_column *n = ct_df_column(df, "name");
    ct_column *cols[6] = {ct_column_str_lower(n), ct_column_str_upper(n), ct_column_str_strip(n),
                          ct_column_str_length(n), ct_column_str_contains(n, "e"),
                          ct_column_str_replace(n, "a", "@@")};
    const char *names[6] = {"lower", "upper", "strip", "len", "contains_e", "replace"};
    ct_df *st = ct_df_new(names, cols, 6);
    expect_frame(st, "strings.csv");
    ct_df_free(st);
    for (int k = 0; k < 6; k++) ct_column_release(cols[k]);
    /* tokenizer */
    const char *vocab[] = {"<unk>", "the", "quick", "brown", "fox", "dog", "jumps"};
    ct_column *tok = ct_column_tokenize(ct_df_column(df, "text"), vocab, 7, 0);
    assert_non_null(tok);
    FILE *f = fopen(FX "tokens.txt", "r");
    assert_non_null(f);
    char line[512];
    int64_t r = 0, maxlen = 0;
    while (fgets(line, sizeof line, f)) {
        int64_t a, b;
        ct_column *child = ct_column_list_range(tok, r, &a, &b);
        if (strncmp(line, "null", 4) == 0) assert_true(ct_column_is_null(tok, r));
        else {
            char *p = line;
            int64_t k = a;
            for (char *q; (q = strtok(p, " \n")); p = NULL) assert_int_equal(ct_column_get_int64(child, k++), atoll(q));
            assert_int_equal(k, b);
            if (b - a > maxlen) maxlen = b - a;
        }
        r++;
    }
    fclose(f);
    assert_int_equal(r, 8);
    ct_scope sc = ct_scope_begin();
    ct_tensor *lens = NULL;
    ct_tensor *pad = ct_column_to_padded_tensor(tok, -1, -1, &lens);
    assert_non_null(pad);
    assert_int_equal(ct_size(pad, 1), maxlen);
    const int64_t *pd = ct_data_ptr(pad), *ld = ct_data_ptr(lens);
    assert_int_equal(ld[2], 2);                 /* "the dog" */
    assert_int_equal(pd[2 * maxlen + 0], 1);
    assert_int_equal(pd[2 * maxlen + 1], 5);
    assert_int_equal(pd[2 * maxlen + 2], -1);
    assert_int_equal(ld[5], 0);                 /* null row */
    ct_scope_end(sc);
    ct_column_release(tok);
    /* split on ' ' */
    ct_column *sp = ct_column_str_split(ct_df_column(df, "text"), " ");
    f = fopen(FX "split.txt", "r");
    assert_non_null(f);
    r = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        int64_t a, b;
        ct_column *child = ct_column_list_range(sp, r, &a, &b);
        if (strcmp(line, "null") == 0) assert_true(ct_column_is_null(sp, r));
        else {
            char joined[512] = "";
            for (int64_t k = a; k < b; k++) {
                int32_t l;
                const char *s2 = ct_column_get_string(child, k, &l);
                if (k > a) strcat(joined, "|");
                strncat(joined, s2, (size_t)l);
            }
            assert_string_equal(joined, line);
        }
        r++;
    }
    fclose(f);
    ct_column_release(sp);
    ct_df_free(df);
}

static void test_group_merge_tensor(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    ct_df_agg aggs[] = {{"score", CT_DF_SUM, NULL}, {"score", CT_DF_MEAN, NULL}, {"score", CT_DF_COUNT, NULL},
                        {"score", CT_DF_MIN, NULL}, {"score", CT_DF_MAX, NULL}, {"id", CT_DF_SUM, NULL}};
    const char *keys[] = {"city"};
    ct_df *g = ct_df_group_by(df, keys, 1, aggs, 6);
    expect_frame(g, "groupby.csv");
    ct_df_free(g);
    const char *keys2[] = {"city", "flag"};
    ct_df_agg a2[] = {{"id", CT_DF_MAX, "id_max"}};
    g = ct_df_group_by(df, keys2, 2, a2, 1);
    expect_frame(g, "groupby2.csv");
    ct_df_free(g);
    ct_df *cities = load("cities.csv");
    const char *sel[] = {"id", "city", "score"};
    ct_df *l = ct_df_select(df, sel, 3);
    ct_df *m = ct_df_merge_inner(l, cities, "city");
    expect_frame(m, "merge.csv");
    ct_df_free(m); ct_df_free(l); ct_df_free(cities);
    /* to_tensor */
    ct_scope sc = ct_scope_begin();
    const char *num[] = {"id", "score"};
    assert_null(ct_df_to_tensor(df, num, 2, CT_F32, false));
    assert_string_equal(ct_last_error(), "to_tensor: column 'score' has a null at row 1 (pass null_as_nan)");
    ct_tensor *t = ct_df_to_tensor(df, num, 2, CT_F64, true);
    assert_non_null(t);
    assert_int_equal(ct_size(t, 0), 8);
    const double *d = ct_data_ptr(t);
    assert_true(d[0] == 1 && d[1] == 1.5 && isnan(d[3]) && d[12] == 7 && d[13] == 100);
    ct_tensor *oh = ct_column_one_hot_tensor(ct_df_column(df, "id"), 10);
    assert_int_equal(((int64_t *)ct_data_ptr(oh))[2 * 10 + 3], 1);
    ct_scope_end(sc);
    ct_df_free(df);
}

static void expect_csv_error(const char *csv, const char *msg) {
    ct_df *df = ct_df_read_csv_buffer(csv, strlen(csv), NULL);
    if (df || strcmp(ct_last_error(), msg) != 0) fprintf(stderr, "csv %s: got '%s'\n", csv, ct_last_error());
    assert_null(df);
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_string_equal(ct_last_error(), msg);
}

static void test_malformed_csv(void **state) {
    (void)state;
    expect_csv_error("a,b\n1,2\n3,\"x\n\nyy\n", "read_csv: line 3, column 2: unterminated quoted field");
    expect_csv_error("a,b\n1,2\n3\n", "read_csv: line 3, column 2: expected 2 fields, got 1");
    expect_csv_error("a,b\n\"1\n2\",2\n3,4,5\n", "read_csv: line 4, column 3: expected 2 fields, got more");
    expect_csv_error("a,b\r\n1,\"2\"x\r\n", "read_csv: line 2, column 2: unexpected character 'x' (0x78) after a closing quote");
    /* duplicate names are mangled like pandas ("a", "a.1"): test_hostile_io.c */
    expect_csv_error("", "read_csv: no header row (empty input)");
    assert_null(ct_df_read_csv("/nonexistent/x.csv", NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    /* accepted: CRLF, blank lines, no trailing newline, other delimiter, NA list */
    const char *ok = "a;b\r\n\r\n1;x\r\n2;-\n\n3;\"q;r\"";
    const char *na[] = {"-"};
    ct_csv_opts o = {.delimiter = ';', .na_values = na, .n_na_values = 1};
    ct_df *df = ct_df_read_csv_buffer(ok, strlen(ok), &o);
    assert_non_null(df);
    assert_int_equal(ct_df_num_rows(df), 3);
    assert_true(ct_column_is_null(ct_df_column(df, "b"), 1));
    int32_t l;
    assert_memory_equal(ct_column_get_string(ct_df_column(df, "b"), 2, &l), "q;r", 3);
    ct_df_free(df);
    /* type promotion int -> float -> string, int64 overflow -> float */
    const char *pr = "a,b,c,d\n1,1,1,9223372036854775807\n2,2.5,x,9223372036854775808\n";
    df = ct_df_read_csv_buffer(pr, strlen(pr), NULL);
    assert_int_equal(ct_column_type(ct_df_column(df, "a")), CT_DF_INT64);
    assert_int_equal(ct_column_type(ct_df_column(df, "b")), CT_DF_FLOAT64);
    assert_int_equal(ct_column_type(ct_df_column(df, "c")), CT_DF_STRING);
    assert_int_equal(ct_column_type(ct_df_column(df, "d")), CT_DF_FLOAT64);
    ct_df_free(df);
}

/* ---- Arrow ---- */
typedef struct { char name[32], fmt[8]; int64_t len, nulls, off; uint8_t *buf[3]; size_t blen[3]; } fx_arr;

static uint8_t *hexdec(const char *h, size_t *n) {
    if (!strcmp(h, "-")) { *n = 0; return NULL; }
    if (!strcmp(h, "empty")) { *n = 0; return calloc(1, 8); }
    size_t L = strlen(h) / 2;
    uint8_t *b = aligned_alloc(64, (L + 63) / 64 * 64 + 64);
    for (size_t i = 0; i < L; i++) { unsigned v; sscanf(h + 2 * i, "%2x", &v); b[i] = (uint8_t)v; }
    *n = L;
    return b;
}

static int read_arrow_fixture(fx_arr *arrs, int max) {
    FILE *f = fopen(FX "arrow.txt", "r");
    if (!f) return -1;
    static char line[1 << 14];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "array ", 6) && n < max) {
            fx_arr *a = &arrs[n++];
            memset(a, 0, sizeof *a);
            sscanf(line, "array %31s %7s %ld %ld %ld", a->name, a->fmt, &a->len, &a->nulls, &a->off);
        } else if (!strncmp(line, "buffer ", 7)) {
            int k; char hx[1 << 13];
            sscanf(line, "buffer %d %8191s", &k, hx);
            arrs[n - 1].buf[k] = hexdec(hx, &arrs[n - 1].blen[k]);
        }
    }
    fclose(f);
    return n;
}

static int released;
static void fake_release(struct ArrowArray *a) { released++; a->release = NULL; }

static void test_arrow_import_export(void **state) {
    (void)state;
    fx_arr A[16];
    int n = read_arrow_fixture(A, 16);
    assert_true(n >= 8);
    for (int k = 0; k < n; k++) {
        fx_arr *a = &A[k];
        if (!strcmp(a->name, "item")) continue;
        /* import: a struct like pyarrow's export of the same array */
        bool list = !strcmp(a->fmt, "+l");
        struct ArrowSchema child_s = {.format = "l", .name = "item", .flags = 2, .release = NULL};
        struct ArrowSchema *cs[1] = {&child_s};
        struct ArrowSchema s = {.format = a->fmt, .name = a->name, .flags = 2, .n_children = list,
                                .children = list ? cs : NULL};
        const void *bufs[3] = {a->buf[0], a->buf[1], a->buf[2]};
        const void *cbufs[2] = {list ? A[k + 1].buf[0] : NULL, list ? A[k + 1].buf[1] : NULL};
        struct ArrowArray child = {.length = list ? A[k + 1].len : 0, .n_buffers = 2, .buffers = cbufs,
                                   .release = fake_release};
        struct ArrowArray *ca[1] = {&child};
        struct ArrowArray arr = {.length = a->len, .null_count = a->nulls, .offset = a->off,
                                 .n_buffers = strcmp(a->fmt, "u") ? 2 : 3, .buffers = bufs,
                                 .n_children = list, .children = list ? ca : NULL, .release = fake_release};
        released = 0;
        ct_column *c = ct_column_import_arrow(&arr, &s);
        if (!c) fprintf(stderr, "import %s: %s\n", a->name, ct_last_error());
        assert_non_null(c);
        assert_null(arr.release);                    /* moved */
        assert_int_equal(ct_column_length(c), a->len);
        assert_int_equal(ct_column_null_count(c), a->nulls);
        if (!strcmp(a->fmt, "l") || !strcmp(a->fmt, "g") || !strcmp(a->fmt, "u"))
            assert_ptr_equal(ct_column_data(c), a->buf[strcmp(a->fmt, "u") ? 1 : 2]);  /* zero-copy */
        /* export back: pyarrow's layout */
        struct ArrowSchema es;
        struct ArrowArray ea;
        assert_int_equal(ct_column_export_arrow(c, a->name, &es, &ea), CT_OK);
        ct_column_release(c);                        /* the export keeps the buffers alive */
        assert_int_equal(released, 0);
        const char *efmt = !strcmp(a->fmt, "i") ? "l" : a->fmt;
        assert_string_equal(es.format, efmt);
        assert_string_equal(es.name, a->name);
        assert_int_equal(ea.length, a->len);
        assert_int_equal(ea.null_count, a->nulls);
        assert_int_equal(ea.n_buffers, !strcmp(efmt, "u") ? 3 : 2);
        size_t vbytes = (size_t)(a->len + 7) / 8;
        for (size_t i = 0; i < vbytes && a->nulls; i++) {
            uint8_t mask = i + 1 == vbytes && a->len % 8 ? (uint8_t)((1u << (a->len % 8)) - 1) : 0xff;
            assert_int_equal(((const uint8_t *)ea.buffers[0])[i] & mask, a->buf[0][i] & mask);
        }
        if (!strcmp(efmt, "u") || list) assert_memory_equal(ea.buffers[1], a->buf[1], a->blen[1]);
        if (!strcmp(efmt, "u")) assert_memory_equal(ea.buffers[2], a->buf[2], a->blen[2]);
        if (!strcmp(efmt, "l") || !strcmp(efmt, "g") || !strcmp(efmt, "f")) {
            size_t esz = strcmp(efmt, "f") ? 8 : 4;
            for (int64_t i = 0; i < a->len; i++) {
                if (a->nulls && !((a->buf[0][i / 8] >> (i % 8)) & 1)) continue;
                if (!strcmp(a->fmt, "i")) assert_int_equal(((const int64_t *)ea.buffers[1])[i], ((const int32_t *)(void *)a->buf[1])[i]);
                else assert_memory_equal((const char *)ea.buffers[1] + i * esz, a->buf[1] + i * esz, esz);
            }
        }
        if (list) {
            assert_int_equal(ea.n_children, 1);
            assert_string_equal(es.children[0]->format, "l");
            assert_memory_equal(ea.children[0]->buffers[1], A[k + 1].buf[1], A[k + 1].blen[1]);
        }
        if (!strcmp(efmt, "b"))
            for (int64_t i = 0; i < a->len; i++)
                assert_int_equal((((const uint8_t *)ea.buffers[1])[i / 8] >> (i % 8)) & 1, (a->buf[1][i / 8] >> (i % 8)) & 1);
        es.release(&es);
        assert_null(es.release);
        ea.release(&ea);
        assert_null(ea.release);
        assert_int_equal(released, 1);               /* the producer's release ran once */
        for (int b = 0; b < 3; b++) free(a->buf[b]);
        if (list) { for (int b = 0; b < 3; b++) free(A[k + 1].buf[b]); k++; }
    }
}

static void test_arrow_frame_roundtrip(void **state) {
    (void)state;
    ct_df *df = load("df.csv");
    assert_non_null(df);
    struct ArrowSchema s;
    struct ArrowArray a;
    assert_int_equal(ct_df_export_arrow(df, &s, &a), CT_OK);
    assert_string_equal(s.format, "+s");
    assert_int_equal(s.n_children, 7);
    assert_string_equal(s.children[5]->name, "city");
    assert_string_equal(s.children[5]->format, "u");
    assert_ptr_equal(a.children[1]->buffers[1], ct_column_data(ct_df_column(df, "score")));
    ct_df *back = ct_df_import_arrow(&a, &s);   /* our own export, moved back in */
    assert_non_null(back);
    assert_null(a.release);
    ct_df_free(df);                             /* back keeps the buffers alive */
    expect_frame(back, "read.csv");
    ct_df_free(back);
    s.release(&s);
    /* bad input */
    const void *bufs[2] = {NULL, NULL};
    struct ArrowSchema bs = {.format = "l"};
    struct ArrowArray ba = {.length = 3, .null_count = 1, .n_buffers = 2, .buffers = bufs, .release = fake_release};
    assert_null(ct_column_import_arrow(&ba, &bs));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_non_null(ba.release);                  /* untouched on error */
    bs.format = "Z";
    ba.null_count = 0;
    assert_null(ct_column_import_arrow(&ba, &bs));
    assert_string_equal(ct_last_error(), "import_arrow: array: unsupported format 'Z'");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_csv_types),
        cmocka_unit_test(test_frame_ops),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_one_hot_strings_tokens),
        cmocka_unit_test(test_group_merge_tensor),
        cmocka_unit_test(test_malformed_csv),
        cmocka_unit_test(test_arrow_import_export),
        cmocka_unit_test(test_arrow_frame_roundtrip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
