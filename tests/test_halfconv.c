/* test_halfconv.c -- float16/bfloat16 <-> float32 conversions bit for bit
 * against torch (tests/fixtures/halfconv.bin.gz, tools/fixtures/gen_halfconv.py):
 *   - all 65,536 bf16 and f16 bit patterns to f32 (NaN payloads, infinities,
 *     subnormals), through the scalar rules (src/core/dtype.c), every
 *     vectorized level this CPU runs (ew_vec.h), and ct_to on tensors
 *     (contiguous and strided, so both the vector and the strided paths);
 *   - f32 values at the rounding boundaries (ties, one ulp either side,
 *     overflow to inf, subnormal results, NaNs) to bf16 and f16, likewise;
 *   - every tail length of the vector loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/ew_vec.h"
#include "core/tensor_impl.h"
#include "test_util.h"

typedef struct {
    uint32_t bf2f[65536], h2f[65536];
    uint32_t n;
    uint32_t *vals;
    uint16_t *to_bf, *to_h;
} fx_t;

static fx_t *g_fx;

static int read_all(gzFile z, void *p, size_t n) { return gzread(z, p, (unsigned)n) == (int)n; }

static int setup(void **state) {
    (void)state;
    const char *path = CT_FIXTURE_DIR "/halfconv.bin.gz";
    gzFile z = gzopen(path, "rb");
    if (!z) { fprintf(stderr, "cannot open %s\n", path); return -1; }
    fx_t *f = calloc(1, sizeof *f);
    uint32_t head[2];
    int ok = f && read_all(z, head, sizeof head) && head[0] == 0x48434f4eu && head[1] == 1 &&
             read_all(z, f->bf2f, sizeof f->bf2f) && read_all(z, f->h2f, sizeof f->h2f) &&
             read_all(z, &f->n, 4) && f->n > 0 && f->n < (1u << 24);
    if (ok) {
        f->vals = malloc(f->n * 4u);
        f->to_bf = malloc(f->n * 2u);
        f->to_h = malloc(f->n * 2u);
        ok = f->vals && f->to_bf && f->to_h && read_all(z, f->vals, f->n * 4u) &&
             read_all(z, f->to_bf, f->n * 2u) && read_all(z, f->to_h, f->n * 2u);
    }
    gzclose(z);
    if (!ok) {
        fprintf(stderr, "%s: bad fixture\n", path);
        if (f) { free(f->vals); free(f->to_bf); free(f->to_h); }
        free(f);
        return -1;
    }
    g_fx = f;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    if (g_fx) { free(g_fx->vals); free(g_fx->to_bf); free(g_fx->to_h); free(g_fx); }
    return 0;
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* the scalar rules of src/core/dtype.c */
static void test_scalar(void **state) {
    (void)state;
    int bad = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t b = fbits(ct__bf16_to_f32((uint16_t)i)), h = fbits(ct__f16_to_f32((uint16_t)i));
        if (b != g_fx->bf2f[i] && bad++ < 5) fprintf(stderr, "bf16 %04x -> %08x, torch %08x\n", i, b, g_fx->bf2f[i]);
        if (h != g_fx->h2f[i] && bad++ < 5) fprintf(stderr, "f16 %04x -> %08x, torch %08x\n", i, h, g_fx->h2f[i]);
    }
    for (uint32_t k = 0; k < g_fx->n; k++) {
        float x = bitsf(g_fx->vals[k]);
        uint16_t b = ct__f32_to_bf16(x), h = ct__f32_to_f16(x);
        if (b != g_fx->to_bf[k] && bad++ < 10)
            fprintf(stderr, "f32 %08x -> bf16 %04x, torch %04x\n", g_fx->vals[k], b, g_fx->to_bf[k]);
        if (h != g_fx->to_h[k] && bad++ < 10)
            fprintf(stderr, "f32 %08x -> f16 %04x, torch %04x\n", g_fx->vals[k], h, g_fx->to_h[k]);
    }
    assert_int_equal(bad, 0);
}

/* every vector level this CPU runs, at every tail length from 0 to 40 */
static void test_vector_levels(void **state) {
    (void)state;
    const ct_ew_vtab *lv[CT_CAP_COUNT] = {&ct__ew_vtab_default, &ct__ew_vtab_avx2, &ct__ew_vtab_avx512};
    int top = ct__cpu_cap();
    uint32_t n = g_fx->n;
    uint16_t *pat = malloc(65536 * 2), *ob = malloc((size_t)n * 2), *oh = malloc((size_t)n * 2);
    uint32_t *o32 = malloc(65536 * 4);
    float *vals = malloc((size_t)n * 4);
    assert_non_null(pat); assert_non_null(ob); assert_non_null(oh); assert_non_null(o32); assert_non_null(vals);
    for (uint32_t i = 0; i < 65536; i++) pat[i] = (uint16_t)i;
    memcpy(vals, g_fx->vals, (size_t)n * 4);
    for (int l = 0; l <= top; l++) {
        const ct_ew_vtab *vt = lv[l];
        vt->bf16_to_f32((float *)o32, pat, 65536);
        assert_memory_equal(o32, g_fx->bf2f, 65536 * 4);
        vt->f16_to_f32((float *)o32, pat, 65536);
        for (uint32_t i = 0; i < 65536; i++)
            if (o32[i] != g_fx->h2f[i]) fail_msg("%s: f16 %04x -> %08x, torch %08x", vt->name, i, o32[i], g_fx->h2f[i]);
        vt->f32_to_bf16(ob, vals, n);
        vt->f32_to_f16(oh, vals, n);
        for (uint32_t k = 0; k < n; k++) {
            if (ob[k] != g_fx->to_bf[k]) fail_msg("%s: f32 %08x -> bf16 %04x, torch %04x", vt->name, g_fx->vals[k], ob[k], g_fx->to_bf[k]);
            if (oh[k] != g_fx->to_h[k]) fail_msg("%s: f32 %08x -> f16 %04x, torch %04x", vt->name, g_fx->vals[k], oh[k], g_fx->to_h[k]);
        }
        /* tails: a run of m elements starting at an odd offset; the element
         * past the end stays untouched */
        for (int m = 0; m <= 40; m++) {
            uint16_t b[48], h[48];
            float f[48];
            for (int j = 0; j < 48; j++) b[j] = h[j] = 0xABCD;
            vt->f32_to_bf16(b + 1, vals + 100, m);
            vt->f32_to_f16(h + 1, vals + 100, m);
            for (int j = 0; j < m; j++) {
                assert_int_equal(b[1 + j], g_fx->to_bf[100 + j]);
                assert_int_equal(h[1 + j], g_fx->to_h[100 + j]);
            }
            assert_int_equal(b[1 + m], 0xABCD);
            assert_int_equal(h[1 + m], 0xABCD);
            for (int j = 0; j < 48; j++) f[j] = -7.0f;
            vt->f16_to_f32(f + 1, pat + 0x7bf0, m);
            for (int j = 0; j < m; j++) assert_int_equal(fbits(f[1 + j]), g_fx->h2f[0x7bf0 + j]);
            assert_true(f[1 + m] == -7.0f);
            vt->bf16_to_f32(f + 1, pat + 0xff70, m);
            for (int j = 0; j < m; j++) assert_int_equal(fbits(f[1 + j]), g_fx->bf2f[0xff70 + j]);
            assert_true(f[1 + m] == -7.0f);
        }
    }
    free(pat); free(ob); free(oh); free(o32); free(vals);
}

/* ct_to on tensors: contiguous (the copy kernel's vector path) and a
 * strided view (the iterator's strided path) */
static void test_tensor_to(void **state) {
    (void)state;
    SCOPE_BEGIN;
    uint32_t n = g_fx->n;
    int64_t sz[1] = {65536};
    ct_dtype hdt[2] = {CT_BF16, CT_F16};
    const uint32_t *want32[2] = {g_fx->bf2f, g_fx->h2f};
    for (int d = 0; d < 2; d++) {
        ct_tensor *h = ct_empty(sz, 1, hdt[d]);
        assert_non_null(h);
        uint16_t *pp = ct_data_ptr(h);
        for (int i = 0; i < 65536; i++) pp[i] = (uint16_t)i;
        ct_tensor *f = ct_to_dtype(h, CT_F32);
        assert_non_null(f);
        assert_memory_equal(ct_data_ptr(f), want32[d], 65536 * 4);
        /* every other element, then reversed pairs: strided */
        ct_tensor *hs = ct_slice(h, 0, 1, 65536, 2);
        ct_tensor *fs = ct_to_dtype(hs, CT_F32);
        assert_non_null(fs);
        const uint32_t *got = ct_data_ptr(fs);
        for (int i = 0; i < 32768; i++) assert_int_equal(got[i], want32[d][1 + 2 * i]);
    }
    int64_t nv[1] = {n};
    ct_tensor *x = ct_empty(nv, 1, CT_F32);
    assert_non_null(x);
    memcpy(ct_data_ptr(x), g_fx->vals, (size_t)n * 4);
    const uint16_t *want16[2] = {g_fx->to_bf, g_fx->to_h};
    for (int d = 0; d < 2; d++) {
        ct_tensor *y = ct_to_dtype(x, hdt[d]);
        assert_non_null(y);
        assert_memory_equal(ct_data_ptr(y), want16[d], (size_t)n * 2);
        ct_tensor *xs = ct_slice(x, 0, 0, n, 3);
        ct_tensor *ys = ct_to_dtype(xs, hdt[d]);
        assert_non_null(ys);
        const uint16_t *got = ct_data_ptr(ys);
        for (uint32_t k = 0; 3 * k < n; k++) assert_int_equal(got[k], want16[d][3 * k]);
    }
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_vector_levels),
        cmocka_unit_test(test_tensor_to),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
