/* test_transforms.c -- image decoding (against PIL), the functional
 * transforms (against torchvision 0.14's tensor outputs), ImageFolder
 * (against torchvision's sample list), the seeded random transforms
 * (reproducibility and their documented distributions), and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctorch/ctorch.h>
#include <ctorch/data.h>

#include "fixture.h"

/* ---- fixtures --------------------------------------------------------------- */
static ct_interp_mode interp(const fx_case *c) {
    const char *m = fx_s(c, "mode", "bilinear");
    return strcmp(m, "nearest") == 0 ? CT_INTERP_NEAREST
         : strcmp(m, "bicubic") == 0 ? CT_INTERP_BICUBIC : CT_INTERP_BILINEAR;
}
static ct_padding_mode padmode(const fx_case *c) {
    const char *m = fx_s(c, "mode", "constant");
    return strcmp(m, "edge") == 0 ? CT_PADDING_EDGE : strcmp(m, "reflect") == 0 ? CT_PADDING_REFLECT
         : strcmp(m, "symmetric") == 0 ? CT_PADDING_SYMMETRIC : CT_PADDING_CONSTANT;
}
#define RET(x) do { out[0] = (x); return out[0] ? CT_OK : ct_last_error_code(); } while (0)
static ct_status run_to_tensor(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { RET(ct_image_to_tensor(in[0])); }
static ct_status run_normalize(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    double m[8], s[8];
    int n = fx_doubles(c, "mean", m, 8);
    fx_doubles(c, "std", s, 8);
    RET(ct_image_normalize(in[0], m, s, n));
}
static ct_status run_resize(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_resize(in[0], fx_i(c, "h", 0), fx_i(c, "w", 0), interp(c)));
}
static ct_status run_resize_u8(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_to_dtype(ct_image_resize(in[0], fx_i(c, "h", 0), fx_i(c, "w", 0), interp(c)), CT_F32));
}
static ct_status run_center_crop(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_center_crop(in[0], fx_i(c, "h", 0), fx_i(c, "w", 0)));
}
static ct_status run_crop(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_crop(in[0], fx_i(c, "top", 0), fx_i(c, "left", 0), fx_i(c, "h", 0), fx_i(c, "w", 0)));
}
static ct_status run_pad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t p[4];
    fx_ints(c, "padding", p, 4);
    RET(ct_image_pad(in[0], p, fx_f(c, "fill", 0), padmode(c)));
}
static ct_status run_hflip(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { RET(ct_image_hflip(in[0])); }
static ct_status run_rotate(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_rotate(in[0], fx_f(c, "angle", 0), interp(c), fx_f(c, "fill", 0)));
}
static ct_status run_brightness(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_adjust_brightness(in[0], fx_f(c, "factor", 1)));
}
static ct_status run_contrast(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_adjust_contrast(in[0], fx_f(c, "factor", 1)));
}
static ct_status run_saturation(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_adjust_saturation(in[0], fx_f(c, "factor", 1)));
}
static ct_status run_hue(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    RET(ct_image_adjust_hue(in[0], fx_f(c, "factor", 0)));
}
static ct_status run_gray(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { RET(ct_image_rgb_to_grayscale(in[0])); }
static ct_status run_decode(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/images/%s", CT_FIXTURE_DIR, fx_s(c, "file", ""));
    out[0] = ct_image_read(path);
    out[1] = ct_image_read_mode(path, CT_IMAGE_RGB);
    return out[0] && out[1] ? CT_OK : ct_last_error_code();
}

static void test_fixtures(void **state) {
    (void)state;
    /* Tolerances: crops, pads, flips and every uint8 result are exact.
     * Float arithmetic (to_tensor, normalize, brightness, saturation) is the
     * same float32 expression as torch: 1e-6.  Contrast's mean is summed in
     * double here and pairwise in float32 by torch; resize and rotate go
     * through float32 index/weight arithmetic whose rounding (and FMA
     * contraction) can differ by a few ulps; hue divides by small
     * differences of channels (rc = (max - r) / (max - min)): 1e-5. */
    static const fx_op table[] = {
        {"to_tensor", run_to_tensor, 1e-6, 1e-7},
        {"normalize", run_normalize, 1e-6, 1e-6},
        {"resize", run_resize, 1e-5, 1e-5},
        /* uint8 bilinear/bicubic resize: torch rounds a float32 result whose
         * last bits depend on its vectorized kernel; a value within an ulp
         * of x.5 may round the other way: at most 1 apart */
        {"resize_u8", run_resize_u8, 0, 1.0},
        {"center_crop", run_center_crop, 0, 0},
        {"crop", run_crop, 0, 0},
        {"pad", run_pad, 0, 0},
        {"hflip", run_hflip, 0, 0},
        {"rotate", run_rotate, 1e-5, 1e-5},
        {"adjust_brightness", run_brightness, 1e-6, 1e-6},
        {"adjust_contrast", run_contrast, 1e-5, 1e-6},
        {"adjust_saturation", run_saturation, 1e-6, 1e-6},
        {"adjust_hue", run_hue, 1e-5, 1e-5},
        {"rgb_to_grayscale", run_gray, 1e-6, 1e-6},
        {"decode", run_decode, 0, 0},
    };
    int fails = fx_run_file(CT_FIXTURE_DIR "/transforms.txt", table, (int)(sizeof table / sizeof *table));
    assert_int_equal(fails, 0);
}

/* ---- decoding errors -------------------------------------------------------- */
static void *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc((size_t)sz);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void test_decode_errors(void **state) {
    (void)state;
    ct_scope s = ct_scope_begin();
    int64_t live = ct_live_tensors();
    size_t n = 0;
    unsigned char *png = slurp(CT_FIXTURE_DIR "/images/rgb.png", &n);
    assert_non_null(png);
    /* truncated PNG */
    assert_null(ct_image_decode(png, n / 2));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    assert_non_null(strstr(ct_last_error(), "PNG"));
    /* corrupted pixel data (CRC error) */
    unsigned char *bad = malloc(n);
    memcpy(bad, png, n);
    bad[n - 20] ^= 0x55;
    assert_null(ct_image_decode(bad, n));
    /* absurd dimensions in the header: 100000 x 100000 */
    memcpy(bad, png, n);
    bad[16] = 0; bad[17] = 1; bad[18] = 0x86; bad[19] = 0xA0;
    memcpy(bad + 20, bad + 16, 4);
    ct_clear_error();
    assert_null(ct_image_decode(bad, n));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    free(bad);
    free(png);
    /* garbage and empty input */
    assert_null(ct_image_decode("hello world", 11));
    assert_non_null(strstr(ct_last_error(), "not a PNG or JPEG"));
    assert_null(ct_image_decode("", 0));
    assert_null(ct_image_decode(NULL, 3));
    assert_int_equal(ct_last_error_code(), CT_ERR_NULL);
    /* a missing file names the path */
    assert_null(ct_image_read("/nonexistent/dir/x.png"));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_non_null(strstr(ct_last_error(), "/nonexistent/dir/x.png"));
    /* JPEG: garbage after the SOI marker is an error; info reads the header */
    unsigned char *jpg = slurp(CT_FIXTURE_DIR "/images/rgb.jpg", &n);
    int64_t h, w;
    int c;
    assert_int_equal(ct_image_info(jpg, n, &h, &w, &c), CT_OK);
    assert_int_equal(h, 12);
    assert_int_equal(w, 17);
    assert_int_equal(c, 3);
    assert_null(ct_image_decode(jpg, 40));
    assert_int_equal(ct_last_error_code(), CT_ERR_FORMAT);
    /* gray request: 1 channel */
    ct_tensor *g = ct_image_decode_mode(jpg, n, CT_IMAGE_GRAY);
    assert_non_null(g);
    assert_int_equal(ct_size(g, 2), 1);
    free(jpg);
    ct_scope_end(s);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- ImageFolder ------------------------------------------------------------ */
static void test_image_folder(void **state) {
    (void)state;
    FILE *f = fopen(CT_FIXTURE_DIR "/image_folder.txt", "r");
    assert_non_null(f);
    char line[512], cls[3][32];
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(sscanf(line, "%31s %31s %31s", cls[0], cls[1], cls[2]), 3);
    int64_t live = ct_live_tensors();
    ct_dataset *d = ct_image_folder_new(CT_FIXTURE_DIR "/image_folder", NULL);
    assert_non_null(d);
    assert_int_equal(ct_image_folder_num_classes(d), 3);
    for (int i = 0; i < 3; i++) assert_string_equal(ct_image_folder_class_name(d, i), cls[i]);
    ct_sample *s = ct_sample_new();
    int64_t i = 0;
    char rel[256];
    int label, h, w;
    while (fgets(line, sizeof line, f) && sscanf(line, "%255s %d %d %d", rel, &label, &h, &w) == 4) {
        assert_true(i < ct_dataset_len(d));
        const char *p = ct_image_folder_path(d, i);
        assert_non_null(strstr(p, rel));
        assert_int_equal(ct_dataset_get(d, i, s), CT_OK);
        ct_tensor *img = ct_sample_get(s, "image"), *lab = ct_sample_get(s, "label");
        assert_int_equal(ct_item_int(lab), label);
        assert_int_equal(ct_get_dtype(lab), CT_I64);
        assert_int_equal(ct_size(img, 0), h);
        assert_int_equal(ct_size(img, 1), w);
        assert_int_equal(ct_size(img, 2), 3);
        i++;
    }
    fclose(f);
    assert_int_equal(i, ct_dataset_len(d));
    ct_sample_free(s);
    ct_dataset_release(d);

    /* with a transform, and a corrupt file whose error names it */
    char dir[] = "/tmp/ct_imgfolder_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char p[512];
    snprintf(p, sizeof p, "%s/a", dir);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/a/broken.png", dir);
    FILE *o = fopen(p, "wb");
    fwrite("\x89PNG\r\n\x1a\nxxxx", 1, 12, o);
    fclose(o);
    ct_transform *ts[] = {ct_transform_to_tensor(), ct_transform_center_crop(2, 2)};
    d = ct_image_folder_new(dir, ct_transform_compose(ts, 2));
    assert_non_null(d);
    s = ct_sample_new();
    assert_int_not_equal(ct_dataset_get(d, 0, s), CT_OK);
    assert_non_null(strstr(ct_last_error(), "broken.png"));
    assert_non_null(strstr(ct_last_error(), "sample 0"));
    ct_sample_free(s);
    ct_dataset_release(d);
    remove(p);
    snprintf(p, sizeof p, "%s/a", dir);
    /* an empty class is an error naming it */
    assert_null(ct_image_folder_new(dir, NULL));
    assert_non_null(strstr(ct_last_error(), "class a"));
    rmdir(p);
    rmdir(dir);
    assert_null(ct_image_folder_new("/nonexistent_root", NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_IO);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- random transforms ------------------------------------------------------ */
static ct_tensor *test_image(void) {
    ct_tensor *x = ct_arange(0, 3 * 10 * 12, 1, CT_F32);
    return ct_div_scalar(ct_reshape(x, CT_SHAPE(3, 10, 12)), 360.0);
}

static void test_reproducible(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    int64_t pad[4] = {2, 2, 2, 2};
    ct_transform *ts[] = {
        ct_transform_random_resized_crop(8, 8, 0.08, 1.0, 3.0 / 4, 4.0 / 3, CT_INTERP_BILINEAR),
        ct_transform_random_crop(6, 6, pad, false, 0, CT_PADDING_REFLECT),
        ct_transform_random_horizontal_flip(0.5),
        ct_transform_color_jitter(0.4, 0.4, 0.4, 0.1),
        ct_transform_random_rotation(-30, 30, CT_INTERP_BILINEAR, 0),
        ct_transform_normalize((double[]){0.5, 0.5, 0.5}, (double[]){0.2, 0.2, 0.2}, 3),
    };
    ct_transform *t = ct_transform_compose(ts, 6);
    assert_non_null(t);
    ct_tensor *x = test_image();
    int differ = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        ct_tensor *a = ct_transform_apply_seeded(t, x, seed);
        ct_tensor *b = ct_transform_apply_seeded(t, x, seed);
        ct_tensor *c = ct_transform_apply_seeded(t, x, seed + 1000);
        assert_non_null(a);
        assert_int_equal(ct_size(a, 1), 6);
        assert_int_equal(ct_equal(a, b), 1);
        differ += ct_equal(a, c) == 0;
    }
    assert_true(differ >= 19);
    /* with the DataLoader's per-sample seed (weak default or the real one) */
    ct_tensor *a = ct_transform_apply(t, x), *b = ct_transform_apply(t, x);
    assert_int_equal(ct_equal(a, b), 1);
    ct_transform_free(t);
    ct_scope_end(sc);
}

/* RandomCrop: top and left uniform over [0, H - h]; RandomHorizontalFlip
 * with p; RandomRotation angle uniform; RandomResizedCrop sizes in range. */
static void test_distributions(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    /* image whose value is its column index, one row per channel index */
    ct_tensor *cols = ct_expand(ct_reshape(ct_arange(0, 12, 1, CT_F32), CT_SHAPE(1, 1, 12)), CT_SHAPE(1, 10, 12));
    ct_tensor *rows = ct_expand(ct_reshape(ct_arange(0, 10, 1, CT_F32), CT_SHAPE(1, 10, 1)), CT_SHAPE(1, 10, 12));
    ct_tensor *x = ct_cat((ct_tensor *[]){cols, rows}, 2, 0);
    ct_transform *rc = ct_transform_random_crop(4, 5, NULL, false, 0, CT_PADDING_CONSTANT);
    ct_transform *fl = ct_transform_random_horizontal_flip(0.3);
    int N = 7000, count_left[8] = {0}, count_top[7] = {0}, flips = 0;
    for (int i = 0; i < N; i++) {
        ct_scope s = ct_scope_begin();
        ct_tensor *y = ct_transform_apply_seeded(rc, x, (uint64_t)i);
        int left = (int)ct_item(ct_select(ct_select(ct_select(y, 0, 0), 0, 0), 0, 0));
        int top = (int)ct_item(ct_select(ct_select(ct_select(y, 0, 1), 0, 0), 0, 0));
        assert_true(left >= 0 && left <= 7 && top >= 0 && top <= 6);
        count_left[left]++;
        count_top[top]++;
        ct_tensor *z = ct_transform_apply_seeded(fl, x, (uint64_t)i);
        flips += ct_item(ct_select(ct_select(ct_select(z, 0, 0), 0, 0), 0, 0)) == 11;
        ct_scope_end(s);
    }
    /* chi-square against uniform: 7 dof (left) and 6 dof (top); the 0.999
     * quantiles are 24.3 and 22.5 */
    double chi = 0;
    for (int k = 0; k < 8; k++) chi += pow(count_left[k] - N / 8.0, 2) / (N / 8.0);
    assert_true(chi < 24.3);
    chi = 0;
    for (int k = 0; k < 7; k++) chi += pow(count_top[k] - N / 7.0, 2) / (N / 7.0);
    assert_true(chi < 22.5);
    /* flips ~ Binomial(N, 0.3): sd = 38 */
    assert_true(fabs(flips - 0.3 * N) < 5 * sqrt(N * 0.21));
    ct_transform_free(rc);
    ct_transform_free(fl);

    /* RandomResizedCrop on a 1x40x40 image, scale (0.25, 0.5), ratio (1, 1):
     * the crop is square with side in [20, 28]; output always 8x8 */
    ct_transform *rrc = ct_transform_random_resized_crop(8, 8, 0.25, 0.5, 1, 1, CT_INTERP_NEAREST);
    ct_tensor *big = ct_reshape(ct_arange(0, 1600, 1, CT_F32), CT_SHAPE(1, 40, 40));
    for (int i = 0; i < 200; i++) {
        ct_scope s = ct_scope_begin();
        ct_tensor *y = ct_transform_apply_seeded(rrc, big, (uint64_t)i);
        assert_int_equal(ct_size(y, 1), 8);
        assert_int_equal(ct_size(y, 2), 8);
        ct_scope_end(s);
    }
    ct_transform_free(rrc);
    /* impossible ratio -> fallback central crop (no draws): constant result */
    rrc = ct_transform_random_resized_crop(4, 4, 0.9, 1.0, 10, 20, CT_INTERP_NEAREST);
    ct_tensor *a = ct_transform_apply_seeded(rrc, big, 1), *b = ct_transform_apply_seeded(rrc, big, 2);
    assert_int_equal(ct_equal(a, b), 1);
    ct_transform_free(rrc);

    /* ColorJitter with only brightness b: the output/input ratio is the
     * factor, uniform in [1 - b, 1 + b]: mean 1, variance b^2 / 3 */
    ct_transform *cj = ct_transform_color_jitter(0.5, 0, 0, 0);
    ct_tensor *half = ct_full(CT_SHAPE(3, 2, 2), 0.25, CT_F32);
    double sum = 0, sum2 = 0;
    int M = 3000;
    for (int i = 0; i < M; i++) {
        ct_scope s = ct_scope_begin();
        double f = ct_item(ct_select(ct_select(ct_select(ct_transform_apply_seeded(cj, half, (uint64_t)i), 0, 0), 0, 0), 0, 0)) / 0.25;
        assert_true(f >= 0.5 - 1e-6 && f <= 1.5 + 1e-6);
        sum += f;
        sum2 += f * f;
        ct_scope_end(s);
    }
    double mean = sum / M, var = sum2 / M - mean * mean;
    assert_true(fabs(mean - 1.0) < 0.02);
    assert_true(fabs(var - 0.25 / 3) < 0.01);
    ct_transform_free(cj);
    ct_scope_end(sc);
}

static void test_errors(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    int64_t live0 = ct_live_tensors();
    ct_tensor *x = test_image();
    ct_transform *rc = ct_transform_random_crop(20, 20, NULL, false, 0, CT_PADDING_CONSTANT);
    assert_null(ct_transform_apply_seeded(rc, x, 1));
    assert_non_null(strstr(ct_last_error(), "larger than"));
    ct_transform_free(rc);
    /* pad_if_needed makes it work */
    rc = ct_transform_random_crop(20, 20, NULL, true, 0, CT_PADDING_CONSTANT);
    ct_tensor *y = ct_transform_apply_seeded(rc, x, 1);
    assert_non_null(y);
    assert_int_equal(ct_size(y, 1), 20);
    ct_transform_free(rc);
    assert_null(ct_image_pad(x, (int64_t[]){12, 0, 0, 0}, 0, CT_PADDING_REFLECT));
    assert_null(ct_image_adjust_hue(x, 0.7));
    assert_null(ct_image_adjust_contrast(ct_zeros(CT_SHAPE(2, 3, 3), CT_F32), 1.5));
    assert_non_null(strstr(ct_last_error(), "channels"));
    assert_null(ct_image_normalize(ct_zeros(CT_SHAPE(3, 3, 3), CT_U8), (double[]){0}, (double[]){1}, 1));
    assert_null(ct_transform_normalize((double[]){0}, (double[]){0}, 1));
    assert_null(ct_transform_color_jitter(0, 0, 0, 0.6));
    assert_null(ct_transform_apply(NULL, x));
    ct_clear_error();
    ct_transform *t = ct_transform_to_tensor();
    assert_null(ct_transform_apply(t, NULL)); /* NULL propagates */
    ct_transform_free(t);
    assert_null(ct_image_resize(x, 0, 3, CT_INTERP_BILINEAR));
    ct_scope_end(sc);
    assert_true(ct_live_tensors() <= live0); /* every temporary and error path released */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_image_folder),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_distributions),
        cmocka_unit_test(test_errors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    fx_print_summary();
    return r;
}
