/* test_io.c -- safetensors and checkpoints (src/io/safetensors.c, json.c):
 * files written by Python's safetensors package load; our writer's bytes
 * equal the package's for the same tensors (tests/fixtures/io.txt,
 * tools/fixtures/gen_io.py), so Python loads ours; a PyTorch state_dict
 * loads into the same architecture built in C and gives torch's output;
 * zero-copy and copy paths; hostile headers give clear errors; a child
 * killed in the middle of a save leaves the previous checkpoint intact. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <cmocka.h>

#include "fixture.h"
#include "io/io_impl.h"

static char g_dir[64];

static void path_in(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", g_dir, name); }

static void *read_all(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(sz > 0 ? (size_t)sz : 1);
    *n = fread(b, 1, (size_t)(sz > 0 ? sz : 0), f);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* ---- fixtures ------------------------------------------------------------- */
static const char *const k_group_a[] = {"fc.weight", "fc.bias", "bn.num_batches_tracked", "emb",
                                        "half", "bf", "mask", "c"};
static const char *const k_group_b[] = {"idx", "i16", "i8", "u8", "empty", "scalar", "z.long"};
static const char *const k_group_names[] = {
    "q\"uote", "back\\slash/", "new\nline\ttab\x01",
    "\xc3\xbcnicode.\xe6\xbc\xa2\xe5\xad\x97.\xf0\x9f\x98\x80", ""};

static const char *const *group(const fx_case *c, int *n) {
    const char *g = fx_s(c, "group", "");
    if (!strcmp(g, "a")) { *n = 8; return k_group_a; }
    if (!strcmp(g, "b")) { *n = 7; return k_group_b; }
    if (!strcmp(g, "names")) { *n = 5; return k_group_names; }
    *n = 0;
    return NULL;
}

static ct_status run_serialize(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int n;
    const char *const *names = group(c, &n);
    if (!names || n != c->nin) return CT_ERR_ARG;
    ct_sample *s = ct_sample_new();
    for (int i = 0; i < n; i++)
        if (ct_sample_set(s, names[i], in[i])) { ct_sample_free(s); return ct_last_error_code(); }
    static const char *const pt[] = {"format", "pt", NULL};
    static const char *const empty[] = {NULL};
    const char *meta = fx_s(c, "meta", "none");
    const char *const *md = !strcmp(meta, "pt") ? pt : !strcmp(meta, "empty") ? empty : NULL;
    void *buf;
    size_t sz;
    ct_status st = ct_safetensors_serialize(s, md, &buf, &sz);
    ct_sample_free(s);
    if (st) return st;
    out[0] = ct_from_array(buf, CT_SHAPE((int64_t)sz), CT_U8);
    free(buf);
    /* the atomic file writer writes the same bytes */
    char p[128];
    path_in(p, sizeof p, "serialize.safetensors");
    ct_sample *s2 = ct_sample_new();
    for (int i = 0; i < n; i++) if (ct_sample_set(s2, names[i], in[i])) return CT_ERR_RUNTIME;
    st = ct_safetensors_save(p, s2, md);
    ct_sample_free(s2);
    if (st) return st;
    size_t fn;
    void *fb = read_all(p, &fn);
    int same = fb && fn == sz && ct_numel(out[0]) == (int64_t)fn && !memcmp(fb, ct_data_ptr(out[0]), fn);
    free(fb);
    return same ? CT_OK : CT_ERR_RUNTIME;
}

static ct_status run_load_py(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)in;
    int n;
    const char *const *names = group(c, &n);
    char p[512];
    snprintf(p, sizeof p, "%s/io/%s", CT_FIXTURE_DIR, fx_s(c, "file", ""));
    ct_safetensors *f = ct_safetensors_open(p);
    if (!f) return ct_last_error_code();
    ct_status st = CT_OK;
    if (ct_safetensors_count(f) != n || ct_safetensors_metadata_count(f) != 2 ||
        strcmp(ct_safetensors_metadata_get(f, "format"), "pt") != 0 ||
        strcmp(ct_safetensors_metadata_get(f, "by"), "gen_io.py") != 0)
        st = CT_ERR_FORMAT;
    for (int i = 0; i < n && !st; i++) {
        bool zc = false;
        if (ct_safetensors_info(f, names[i], NULL, NULL, NULL, &zc)) { st = ct_last_error_code(); break; }
        out[i] = ct_safetensors_get(f, names[i]);
        if (!out[i]) { st = ct_last_error_code(); break; }
        /* Python's writer aligns every tensor: all non-empty ones are views */
        size_t sz;
        const char *base = ct_safetensors_buffer(f, &sz);
        const char *d = ct_data_ptr(out[i]);
        bool inside = d >= base && d < base + sz;
        if (ct_numel(out[i]) > 0 && (!zc || !inside)) st = CT_ERR_RUNTIME;
    }
    ct_safetensors_close(f); /* the tensors outlive the file object */
    return st;
}

static ct_module *make_model(void) {
    const int64_t k3[2] = {3, 3}, pad1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts o = {0};
    o.padding = pad1;
    ct_module *mods[6] = {
        ct_conv2d_new(1, 4, k3, &o), ct_batch_norm2d_new(4, 1e-5, 0.1, true, true), ct_relu_new(),
        ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false), ct_flatten_new(1, -1),
        ct_linear_new(16, 3, true)};
    for (int i = 0; i < 6; i++)
        if (!mods[i]) return NULL;
    ct_module *m = ct_sequential_new(mods, 6);
    for (int i = 0; i < 6; i++) ct_module_release(mods[i]);
    return m;
}

static ct_status run_model(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    char p[512];
    snprintf(p, sizeof p, "%s/io/%s", CT_FIXTURE_DIR, fx_s(c, "file", ""));
    ct_module *m = make_model();
    if (!m) return ct_last_error_code();
    ct_status st = ct_load_module(p, m, true);
    if (!st) {
        ct_module_eval(m);
        out[0] = ct_module_forward1(m, in[0]);
        if (!out[0]) st = ct_last_error_code();
    }
    char q[128];
    path_in(q, sizeof q, "model.safetensors");
    if (!st) st = ct_save_module(q, m);
    ct_module_release(m);
    if (st) return st;
    size_t n;
    void *b = read_all(q, &n);
    out[1] = ct_from_array(b, CT_SHAPE((int64_t)n), CT_U8);
    free(b);
    return CT_OK;
}

static const fx_op k_ops[] = {
    {"serialize", run_serialize, 0, 0},
    {"load_py", run_load_py, 1e-15, 1e-300},
    {"model", run_model, 1e-5, 1e-6},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/io.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- round trips ------------------------------------------------------------ */
static void test_roundtrip_dtypes(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_scope sc = ct_scope_begin();
    ct_sample *s = ct_sample_new();
    const ct_dtype dts[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_I32, CT_I64, CT_F16, CT_BF16, CT_F32, CT_F64, CT_C64};
    char name[32];
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        ct_tensor *t = ct_to_dtype(ct_arange(0, 12, 1, CT_F64), dts[i]);
        t = ct_transpose(ct_reshape(t, CT_SHAPE(3, 4)), 0, 1); /* non-contiguous */
        snprintf(name, sizeof name, "t_%s", ct_dtype_name(dts[i]));
        assert_int_equal(ct_sample_set(s, name, t), CT_OK);
    }
    assert_int_equal(ct_sample_set(s, "zero_dim", ct_scalar(-3.5, CT_F32)), CT_OK);
    assert_int_equal(ct_sample_set(s, "zero_size", ct_zeros(CT_SHAPE(0, 5), CT_F64)), CT_OK);
    char p[128];
    path_in(p, sizeof p, "rt.safetensors");
    const char *meta[] = {"zeta", "last", "alpha", "first \"quoted\"", NULL};
    assert_int_equal(ct_safetensors_save(p, s, meta), CT_OK);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    mode_t um = umask(0);
    umask(um);
    assert_int_equal(sb.st_mode & 0777, 0666 & ~um); /* like fopen(path, "w") */

    ct_safetensors *f = ct_safetensors_open(p);
    assert_non_null(f);
    assert_int_equal(ct_safetensors_count(f), ct_sample_count(s));
    assert_int_equal(ct_safetensors_metadata_count(f), 2);
    assert_string_equal(ct_safetensors_metadata_get(f, "alpha"), "first \"quoted\"");
    assert_string_equal(ct_safetensors_metadata_get(f, "zeta"), "last");
    assert_null(ct_safetensors_metadata_get(f, "nope"));
    for (int i = 0; i < ct_sample_count(s); i++) {
        const char *nm = ct_sample_name(s, i);
        ct_tensor *t = ct_safetensors_get(f, nm);
        assert_non_null(t);
        assert_int_equal(ct_get_dtype(t), ct_get_dtype(ct_sample_at(s, i)));
        assert_int_equal(ct_equal(t, ct_sample_at(s, i)), 1);
        const char *dn;
        int nd;
        int64_t sh[CT_MAX_DIMS];
        bool zc;
        assert_int_equal(ct_safetensors_info(f, nm, &dn, &nd, sh, &zc), CT_OK);
        assert_int_equal(nd, ct_ndim(t));
        assert_int_equal(zc, ct_numel(t) > 0);
    }
    /* entries come in file order: by descending dtype rank, then name */
    assert_string_equal(ct_safetensors_name(f, 0), "t_int64");
    assert_string_equal(ct_safetensors_name(f, 1), "t_float64");
    /* a zero-copy tensor keeps the mapping alive after close, and writing
     * to it (copy-on-write) does not touch the file */
    ct_tensor *w = ct_safetensors_get(f, "t_float32");
    ct_safetensors_close(f);
    assert_non_null(ct_fill_(w, 42.0));
    assert_float_equal(ct_item(ct_sum(w, NULL, 0, false)), 42.0 * 12, 0);
    ct_sample *again = ct_safetensors_load(p);
    assert_non_null(again);
    assert_int_equal(ct_equal(ct_sample_get(again, "t_float32"), ct_sample_get(s, "t_float32")), 1);
    ct_sample_free(again);

    /* optimizer-style state: owned copies */
    assert_int_equal(ct_save_state(p, s), CT_OK);
    ct_sample *st = ct_load_state(p);
    assert_non_null(st);
    assert_int_equal(ct_sample_count(st), ct_sample_count(s));
    assert_int_equal(ct_equal(ct_sample_get(st, "zero_dim"), ct_scalar(-3.5, CT_F32)), 1);
    ct_sample_free(st);
    f = ct_safetensors_open(p);
    assert_string_equal(ct_safetensors_metadata_get(f, "format"), "ctorch-state");
    ct_safetensors_close(f);

    ct_sample_free(s);
    ct_scope_end(sc);
    assert_int_equal(ct_live_tensors(), live);
}

/* A file whose header length is not a multiple of 8 (legal): tensors are
 * misaligned in the data section, so they load as copies. */
static void test_misaligned_copy(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    const char *h = "{\"x\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                    "\"u\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[16,20]},"
                    "\"v\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[20,24]},"
                    "\"q\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[24,32]},"
                    "\"f8\":{\"dtype\":\"F8_E4M3\",\"shape\":[3],\"data_offsets\":[32,35]},"
                    "\"b\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[35,37]}}";
    size_t hn = strlen(h) | 1; /* odd length */
    unsigned char buf[1024] = {0};
    for (int k = 0; k < 8; k++) buf[k] = (unsigned char)((uint64_t)hn >> (8 * k));
    memset(buf + 8, ' ', hn);
    memcpy(buf + 8, h, strlen(h));
    unsigned char *d = buf + 8 + hn;
    double xs[2] = {1.5, -2.25};
    memcpy(d, xs, 16);
    uint16_t us[2] = {65535, 7};
    memcpy(d + 16, us, 4);
    uint32_t v = 4000000000u;
    memcpy(d + 20, &v, 4);
    d[35] = 5; /* not a valid C bool: loads normalized, as a copy */
    size_t total = 8 + hn + 37;
    char p[128];
    path_in(p, sizeof p, "odd.safetensors");
    write_all(p, buf, total);

    ct_scope sc = ct_scope_begin();
    ct_safetensors *f = ct_safetensors_open(p);
    assert_non_null(f);
    bool zc = true;
    assert_int_equal(ct_safetensors_info(f, "x", NULL, NULL, NULL, &zc), CT_OK);
    assert_false(zc);
    ct_tensor *x = ct_safetensors_get(f, "x");
    assert_non_null(x);
    assert_float_equal(ct_item(ct_select(x, 0, 1)), -2.25, 0);
    ct_tensor *u = ct_safetensors_get(f, "u");
    assert_int_equal(ct_get_dtype(u), CT_I32);
    assert_int_equal(ct_item_int(ct_select(u, 0, 0)), 65535);
    ct_tensor *vv = ct_safetensors_get(f, "v");
    assert_int_equal(ct_get_dtype(vv), CT_I64);
    assert_int_equal(ct_item_int(ct_select(vv, 0, 0)), 4000000000ll);
    assert_int_equal(ct_safetensors_info(f, "b", NULL, NULL, NULL, &zc), CT_OK);
    assert_false(zc);
    ct_tensor *bb = ct_safetensors_get(f, "b");
    assert_int_equal(((unsigned char *)ct_data_ptr(bb))[0], 1);
    assert_int_equal(ct_item_int(ct_sum(bb, NULL, 0, false)), 1);
    assert_null(ct_safetensors_get(f, "q"));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_non_null(strstr(ct_last_error(), "U64"));
    assert_null(ct_safetensors_get(f, "f8"));
    assert_non_null(strstr(ct_last_error(), "F8_E4M3"));
    assert_null(ct_safetensors_get(f, "missing"));
    assert_non_null(strstr(ct_last_error(), "no tensor \"missing\""));
    ct_clear_error();
    ct_safetensors_close(f);
    ct_scope_end(sc);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- hostile headers ----------------------------------------------------------- */
typedef struct bad_case { const char *what, *header; long long hlen; size_t data, trailing; const char *expect; } bad_case;

static void test_hostile_headers(void **state) {
    (void)state;
    const char *ok1 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const bad_case cases[] = {
        {"header length > file", ok1, 4096, 8, 0, "exceeds the file"},
        {"huge header length", ok1, 1ll << 40, 8, 0, "exceeds the limit"},
        {"data truncated", ok1, -1, 4, 0, "out of range of the 4-byte data section"},
        {"data truncated 2", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 0, 0,
         "out of range of the 0-byte data section"},
        {"data short", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", -1, 4, 8,
         "cover 4 bytes but the data section has 12"},
        {"trailing bytes", ok1, -1, 8, 3, "trailing bytes"},
        {"offsets out of range", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", -1, 8, 0, "out of range"},
        {"end before begin", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", -1, 8, 0, "end before"},
        {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, 0, "overlaps"},
        {"gap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", -1, 8, 0, "gap"},
        {"shape/offset mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", -1, 8, 0,
         "hold 8 bytes but shape [3] of F32 needs 12"},
        {"bad dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, 0, "unknown dtype \"F33\""},
        {"negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", -1, 8, 0, "shape[0]"},
        {"fractional dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", -1, 8, 0, "shape[0]"},
        {"huge number", "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999999],\"data_offsets\":[0,8]}}", -1, 8, 0, "shape[0]"},
        {"numel overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,0],\"data_offsets\":[0,8]}}", -1, 8, 0,
         "hold 8 bytes but shape"},
        {"numel overflow 2", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", -1, 8, 0, "overflows"},
        {"bytes overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}}", -1, 8, 0, "overflows"},
        {"offsets not pair", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", -1, 8, 0, "[begin, end]"},
        {"missing field", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", -1, 8, 0, "lacks \"shape\""},
        {"bad JSON", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2] \"data_offsets\":[0,8]}}", -1, 8, 0, "invalid JSON header"},
        {"trailing comma", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", -1, 8, 0, "invalid JSON"},
        {"unterminated", "{\"a\":{\"dtype\":\"F32", -1, 8, 0, "unterminated string"},
        {"duplicate key", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 16, 0, "duplicate key \"a\""},
        {"not an object", "[1,2]", -1, 0, 0, "not a JSON object"},
        {"metadata not strings", "{\"__metadata__\":{\"k\":1}}", -1, 0, 0, "not a string"},
        {"NUL in name", "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, 0, "NUL"},
        {"lone surrogate", "{\"\\ud800\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, 0, "surrogate"},
        {"invalid UTF-8", "{\"\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", -1, 8, 0, "UTF-8"},
        {"too many dims", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", -1, 4, 0,
         "at most 16"},
        {"tiny header len", "{", -1, 0, 0, "too small"},
    };
    int64_t live = ct_live_tensors();
    char p[128];
    path_in(p, sizeof p, "bad.safetensors");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *b = &cases[i];
        size_t hn = strlen(b->header);
        size_t total = 8 + hn + b->data + b->trailing;
        unsigned char *buf = calloc(1, total);
        uint64_t L = b->hlen >= 0 ? (uint64_t)b->hlen : hn;
        for (int k = 0; k < 8; k++) buf[k] = (unsigned char)(L >> (8 * k));
        memcpy(buf + 8, b->header, hn);
        write_all(p, buf, total);
        ct_clear_error();
        ct_safetensors *f = ct_safetensors_open(p);
        if (f || !strstr(ct_last_error(), b->expect))
            fail_msg("%s: expected an error containing \"%s\", got %s: %s", b->what, b->expect,
                     f ? "a file" : "NULL", ct_last_error());
        assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
        assert_non_null(strstr(ct_last_error(), "bad.safetensors")); /* names the file */
        /* the same bytes from memory */
        ct_clear_error();
        f = ct_safetensors_open_buffer(buf, total, "mem");
        if (f || !strstr(ct_last_error(), b->expect))
            fail_msg("%s (buffer): expected \"%s\", got: %s", b->what, b->expect, ct_last_error());
        free(buf);
    }
    /* nesting deeper than the parser's limit */
    {
        char deep[256];
        size_t k = 0;
        k += (size_t)sprintf(deep, "{\"x\":");
        for (int d = 0; d < 80; d++) deep[k++] = '[';
        for (int d = 0; d < 80; d++) deep[k++] = ']';
        deep[k++] = '}';
        unsigned char buf[300] = {0};
        buf[0] = (unsigned char)k;
        memcpy(buf + 8, deep, k);
        write_all(p, buf, 8 + k);
        assert_null(ct_safetensors_open(p));
        assert_non_null(strstr(ct_last_error(), "nesting deeper than 64"));
    }
    /* a file shorter than the length field, an empty file, a directory, a missing file */
    write_all(p, "\x08\x00\x00", 3);
    assert_null(ct_safetensors_open(p));
    assert_non_null(strstr(ct_last_error(), "too small for the 8-byte header length"));
    write_all(p, "", 0);
    assert_null(ct_safetensors_open(p));
    assert_null(ct_safetensors_open(g_dir));
    assert_non_null(strstr(ct_last_error(), "not a regular file"));
    path_in(p, sizeof p, "does_not_exist.safetensors");
    assert_null(ct_safetensors_open(p));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "does_not_exist.safetensors"));
    assert_null(ct_safetensors_open(NULL));
    assert_null(ct_safetensors_load(p));
    assert_null(ct_load_state(p));
    ct_clear_error();
    assert_int_equal(ct_live_tensors(), live);
}

/* The JSON parser on its own: strictness and escapes. */
static void test_json(void **state) {
    (void)state;
    const char *good[] = {"{}", " [ ] ", "{\"a\":[1,-2.5e+3,0,true,false,null,\"x\\u00e9\\ud83d\\ude00\\n\"]}",
                          "18446744073709551615", "\"\\/\\b\\f\\r\\t\\\"\\\\\""};
    const char *bad[] = {"", "{", "[1,]", "01", "1.", "-", "+1", "{\"a\" 1}", "{\"a\":1,\"a\":2}", "tru",
                         "\"\\x\"", "\"\t\"", "[1] 2", "{1:2}", "\"\\ud800\\u0041\"", "\"\\udc00\"", "nul",
                         "\"\\u12\""};
    char err[128];
    size_t off;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        ct_jval v;
        if (ct__json_parse(good[i], strlen(good[i]), &v, err, sizeof err, &off))
            fail_msg("rejected %s: %s", good[i], err);
        ct__json_free(&v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_jval v;
        if (!ct__json_parse(bad[i], strlen(bad[i]), &v, err, sizeof err, &off)) {
            ct__json_free(&v);
            fail_msg("accepted %s", bad[i]);
        }
    }
    ct_jval v;
    const char *s = "{\"k\":\"x\\u00e9\\ud83d\\ude00\",\"n\":18446744073709551615,\"m\":18446744073709551616}";
    assert_int_equal(ct__json_parse(s, strlen(s), &v, err, sizeof err, &off), 0);
    assert_string_equal(ct__json_get(&v, "k")->s, "x\xc3\xa9\xf0\x9f\x98\x80");
    assert_true(ct__json_get(&v, "n")->is_uint);
    assert_true(ct__json_get(&v, "n")->u == UINT64_MAX);
    assert_false(ct__json_get(&v, "m")->is_uint);
    ct__json_free(&v);
}

/* ---- module checkpoints ------------------------------------------------------------ */
static void test_module_checkpoint(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    ct_manual_seed(5);
    ct_module *a = make_model(), *b = make_model();
    assert_non_null(a);
    assert_non_null(b);
    char p[128];
    path_in(p, sizeof p, "module.safetensors");
    assert_int_equal(ct_save_module(p, a), CT_OK);
    assert_int_equal(ct_load_module(p, b, true), CT_OK);
    ct_scope sc = ct_scope_begin();
    ct_sample *sa = ct_module_state_dict(a), *sb = ct_module_state_dict(b);
    assert_int_equal(ct_sample_count(sa), 9);
    for (int i = 0; i < ct_sample_count(sa); i++)
        assert_int_equal(ct_equal(ct_sample_at(sa, i), ct_sample_get(sb, ct_sample_name(sa, i))), 1);
    ct_safetensors *f = ct_safetensors_open(p);
    assert_non_null(f);
    assert_string_equal(ct_safetensors_metadata_get(f, "format"), "pt");
    assert_true(ct_safetensors_find(f, "1.num_batches_tracked") >= 0);
    assert_true(ct_safetensors_find(f, "5.weight") >= 0);
    ct_safetensors_close(f);
    ct_sample_free(sa);
    ct_sample_free(sb);

    /* a different architecture: strict names the missing/unexpected keys,
     * a shape mismatch is named too */
    ct_module *lin = ct_linear_new(16, 3, true);
    assert_int_not_equal(ct_load_module(p, lin, true), CT_OK);
    assert_non_null(strstr(ct_last_error(), "Unexpected key(s)"));
    assert_non_null(strstr(ct_last_error(), "module.safetensors"));
    ct_sample *one = ct_sample_new();
    assert_int_equal(ct_sample_set(one, "weight", ct_zeros(CT_SHAPE(3, 15), CT_F32)), CT_OK);
    assert_int_equal(ct_safetensors_save(p, one, NULL), CT_OK);
    assert_int_equal(ct_load_module(p, lin, false), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "size mismatch"));
    assert_int_not_equal(ct_load_module(p, lin, true), CT_OK);
    assert_non_null(strstr(ct_last_error(), "Missing key(s)"));
    ct_sample_free(one);
    ct_module_release(lin);

    /* writer errors */
    ct_sample *bad = ct_sample_new();
    assert_int_equal(ct_sample_set(bad, "z", ct_zeros(CT_SHAPE(2), CT_C128)), CT_OK);
    assert_int_equal(ct_safetensors_save(p, bad, NULL), CT_ERR_DTYPE);
    assert_non_null(strstr(ct_last_error(), "complex128"));
    ct_sample_clear(bad);
    assert_int_equal(ct_sample_set(bad, "__metadata__", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    assert_int_equal(ct_safetensors_save(p, bad, NULL), CT_ERR_ARG);
    ct_sample_clear(bad);
    assert_int_equal(ct_sample_set(bad, "x", ct_zeros(CT_SHAPE(2), CT_F32)), CT_OK);
    const char *dup[] = {"k", "1", "k", "2", NULL};
    assert_int_equal(ct_safetensors_save(p, bad, dup), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "duplicate metadata key"));
    const char *novalue[] = {"k", NULL, NULL};
    assert_int_equal(ct_safetensors_save(p, bad, novalue), CT_ERR_ARG);
    assert_int_equal(ct_safetensors_save("/nonexistent-dir/x.safetensors", bad, NULL), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "/nonexistent-dir/x.safetensors"));
    assert_int_equal(ct_safetensors_save(NULL, bad, NULL), CT_ERR_NULL);
    assert_int_equal(ct_save_module(p, NULL), CT_ERR_NULL);
    ct_sample_free(bad);
    ct_clear_error();

    ct_module_release(a);
    ct_module_release(b);
    ct_scope_end(sc);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- atomicity: a child killed in the middle of a save ------------------------------ */
static void kill_self_hook(size_t written) {
    if (written >= 3 * CT_IO_CHUNK) raise(SIGKILL);
}

static ct_sample *big_state(double v, int64_t n) {
    ct_sample *s = ct_sample_new();
    ct_tensor *t = ct_full(CT_SHAPE(n), v, CT_F32);
    if (ct_sample_set(s, "w", t)) return NULL;
    ct_release(t);
    t = ct_scalar(v, CT_I64);
    if (ct_sample_set(s, "step", t)) return NULL;
    ct_release(t);
    return s;
}

static void check_intact(const char *p, double v, int64_t n) {
    ct_sample *s = ct_load_state(p);
    assert_non_null(s);
    ct_scope sc = ct_scope_begin();
    ct_tensor *w = ct_sample_get(s, "w");
    assert_non_null(w);
    assert_int_equal(ct_numel(w), n);
    assert_float_equal(ct_item(ct_amin(w, NULL, 0, false)), v, 0);
    assert_float_equal(ct_item(ct_amax(w, NULL, 0, false)), v, 0);
    assert_int_equal(ct_item_int(ct_sample_get(s, "step")), (int64_t)v);
    ct_scope_end(sc);
    ct_sample_free(s);
}

static void remove_tmp_files(void) {
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) {
            snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
}

static void test_kill_during_save(void **state) {
    (void)state;
    /* The states are built before fork(): the children only serialize
     * (memcpy/fwrite, no OpenMP, which is not fork-safe). */
    const int64_t n = 2 * 1024 * 1024; /* 8 MiB: 8 fwrite chunks */
    char p[128];
    path_in(p, sizeof p, "ckpt.safetensors");
    ct_sample *old = big_state(1.0, n), *s2 = big_state(2.0, n), *s10 = big_state(10.0, n),
              *s11 = big_state(11.0, n);
    assert_non_null(old);
    assert_non_null(s2);
    assert_non_null(s10);
    assert_non_null(s11);
    assert_int_equal(ct_save_state(p, old), CT_OK);
    check_intact(p, 1.0, n);

    /* 1. deterministic: the child kills itself after 3 MiB of the new file */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ct__io_write_hook = kill_self_hook;
        ct_status st = ct_save_state(p, s2);
        _exit(st == CT_OK ? 0 : 3); /* not reached: killed in the middle */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    check_intact(p, 1.0, n);
    remove_tmp_files();

    /* 2. the parent kills a child that saves in a loop, after a short delay:
     * whenever it lands, the file is one complete checkpoint */
    for (int round = 0; round < 3; round++) {
        fflush(NULL);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            for (int k = 0;; k++)
                if (ct_save_state(p, k % 2 ? s11 : s10)) _exit(3);
        }
        struct timespec ts = {0, (long)(20 + 17 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        ct_sample *s = ct_load_state(p);
        assert_non_null(s);
        double v = ct_item(ct_sample_get(s, "step"));
        ct_sample_free(s);
        assert_true(v == 1.0 || v == 10.0 || v == 11.0);
        check_intact(p, v, n);
        remove_tmp_files();
    }
    ct_sample_free(old);
    ct_sample_free(s2);
    ct_sample_free(s10);
    ct_sample_free(s11);
}

static int setup(void **state) {
    (void)state;
    strcpy(g_dir, "/tmp/ct_test_io_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    DIR *d = opendir(g_dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(g_dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_roundtrip_dtypes),
        cmocka_unit_test(test_misaligned_copy),
        cmocka_unit_test(test_hostile_headers),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_module_checkpoint),
        cmocka_unit_test(test_kill_during_save),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
