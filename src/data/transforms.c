/* transforms.c -- torchvision.transforms.functional on tensors: to_tensor,
 * normalize, resize, crop, pad, flip, rotate and the color adjustments,
 * with torchvision 0.14's tensor formulas (float32 math, then the same
 * rounding or truncation for uint8). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms_impl.h"

/* torch evaluates a * x + b * y as separate float32 ops (no fused
 * multiply-add); contraction would change uint8 results at truncation
 * boundaries. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

/* ---- helpers -------------------------------------------------------------- */
static bool check_img(const char *op, ct_tensor *img, int min_dims) {
    if (!img) return false; /* NULL propagates, the first error is kept */
    if (img->ndim < min_dims) {
        ct__error(CT_ERR_SHAPE, "%s: expected an image with at least %d dims ([..., %sH, W]), got %s",
                  op, min_dims, min_dims >= 3 ? "C, " : "", ct__tshape(img));
        return false;
    }
    if (img->storage->device != CT_CPU) {
        ct__error(CT_ERR_DEVICE, "%s: only CPU images are supported", op);
        return false;
    }
    return true;
}

static bool check_u8_f32(const char *op, ct_tensor *img) {
    if (img->dtype != CT_U8 && img->dtype != CT_F32) {
        ct__error(CT_ERR_DTYPE, "%s: expected a uint8 or float32 image, got %s", op,
                  ct_dtype_name(img->dtype));
        return false;
    }
    return true;
}

/* The input as a contiguous tensor of its own dtype (new ref, no scope). */
static ct_tensor *contig(ct_tensor *img) { return ct__contig_as(img, img->dtype); }

/* Returns img itself as a result: one more reference, in the scope. */
static ct_tensor *same(ct_tensor *img) { return ct__register(ct_retain(img)); }

/* Output shape: img's leading dims with the last two replaced. */
static void out_shape(ct_tensor *img, int64_t oh, int64_t ow, int64_t *shape) {
    for (int d = 0; d < img->ndim - 2; d++) shape[d] = img->sizes[d];
    shape[img->ndim - 2] = oh;
    shape[img->ndim - 1] = ow;
}

/* Generic geometric copy: out[..., y, x] = in[..., rows[y], cols[x]], or
 * fill where rows[y] < 0 or cols[x] < 0.  Any dtype. */
static ct_tensor *remap(const char *op, ct_tensor *img, int64_t oh, int64_t ow,
                        const int64_t *rows, const int64_t *cols, double fill) {
    ct_tensor *src = contig(img);
    if (!src) return NULL;
    int64_t shape[CT_MAX_DIMS];
    out_shape(img, oh, ow, shape);
    ct_tensor *out = ct__alloc(shape, img->ndim, img->dtype, CT_CPU);
    if (!out) { ct_release(src); return NULL; }
    size_t es = ct_dtype_size(img->dtype);
    unsigned char fillv[16] = {0};
    ct__store_f64(fillv, img->dtype, fill);
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    int64_t planes = 1;
    for (int d = 0; d < img->ndim - 2; d++) planes *= img->sizes[d];
    const unsigned char *s = ct__ptr(src);
    unsigned char *o = ct__ptr(out);
    for (int64_t p = 0; p < planes; p++) {
        const unsigned char *sp = s + (size_t)(p * H * W) * es;
        for (int64_t y = 0; y < oh; y++) {
            unsigned char *orow = o + (size_t)((p * oh + y) * ow) * es;
            int64_t r = rows[y];
            for (int64_t x = 0; x < ow; x++) {
                int64_t c = cols[x];
                const unsigned char *v = (r < 0 || c < 0) ? fillv : sp + (size_t)(r * W + c) * es;
                memcpy(orow + (size_t)x * es, v, es);
            }
        }
    }
    ct_release(src);
    (void)op;
    return ct__register(out);
}

static int64_t *index_map(int64_t n) {
    int64_t *m = malloc(sizeof *m * (size_t)(n > 0 ? n : 1));
    if (!m) ct__error(CT_ERR_OOM, "transforms: out of memory");
    return m;
}

/* ---- ToTensor, Normalize -------------------------------------------------- */
ct_tensor *ct_image_to_tensor(ct_tensor *img) {
    if (!img) return NULL;
    if (img->ndim != 2 && img->ndim != 3)
        return ct__error(CT_ERR_SHAPE, "to_tensor: expected an image [H, W, C] or [H, W], got %s",
                         ct__tshape(img));
    int64_t H = img->sizes[0], W = img->sizes[1], C = img->ndim == 3 ? img->sizes[2] : 1;
    ct_dtype sdt = img->dtype == CT_U8 ? CT_U8 : CT_F32;
    ct_tensor *src = ct__contig_as(img, sdt);
    if (!src) return NULL;
    ct_tensor *out = ct__alloc((const int64_t[]){C, H, W}, 3, CT_F32, CT_CPU);
    if (!out) { ct_release(src); return NULL; }
    float *o = ct__ptr(out);
    if (sdt == CT_U8) {
        const uint8_t *s = ct__ptr(src);
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++) o[c * H * W + i] = (float)s[i * C + c] / 255.0f;
    } else {
        const float *s = ct__ptr(src);
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H * W; i++) o[c * H * W + i] = s[i * C + c];
    }
    ct_release(src);
    return ct__register(out);
}

ct_tensor *ct_image_normalize(ct_tensor *img, const double *mean, const double *std, int n) {
    if (!check_img("normalize", img, 3)) return NULL;
    if (!mean || !std) return ct__error(CT_ERR_NULL, "normalize: mean or std is NULL");
    if (!ct_dtype_is_floating(img->dtype))
        return ct__error(CT_ERR_DTYPE, "normalize: expected a float image, got %s",
                         ct_dtype_name(img->dtype));
    int64_t C = img->sizes[img->ndim - 3];
    if (n != C && n != 1)
        return ct__error(CT_ERR_SHAPE, "normalize: %d mean/std values for an image with %lld "
                         "channels", n, (long long)C);
    for (int i = 0; i < n; i++)
        if (std[i] == 0)
            return ct__error(CT_ERR_ARG, "normalize: std[%d] is 0 (division by zero)", i);
    ct_scope s = ct_scope_begin();
    ct_tensor *m = ct_from_doubles(mean, (const int64_t[]){n, 1, 1}, 3, img->dtype);
    ct_tensor *sd = ct_from_doubles(std, (const int64_t[]){n, 1, 1}, 3, img->dtype);
    ct_tensor *out = ct_div(ct_sub(img, m), sd);
    if (out) ct_keep(out);
    ct_scope_end(s);
    return out;
}

/* ---- resize --------------------------------------------------------------- */
static ct_status resize_size(int64_t H, int64_t W, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
    if (w > 0) { *oh = h; *ow = w; return CT_OK; }
    if (H <= 0 || W <= 0)
        return ct__error_status(CT_ERR_SHAPE, "resize: cannot resize an empty image");
    int64_t sh = W <= H ? W : H, lg = W <= H ? H : W;
    int64_t nl = (int64_t)((double)h * (double)lg / (double)sh);
    if (W <= H) { *ow = h; *oh = nl; } else { *oh = h; *ow = nl; }
    return CT_OK;
}

ct_tensor *ct_image_resize(ct_tensor *img, int64_t h, int64_t w, ct_interp_mode mode) {
    if (!check_img("resize", img, 2)) return NULL;
    if (h <= 0) return ct__error(CT_ERR_ARG, "resize: size %lld must be positive", (long long)h);
    if (mode != CT_INTERP_BILINEAR && mode != CT_INTERP_NEAREST && mode != CT_INTERP_BICUBIC)
        return ct__error(CT_ERR_ARG, "resize: interpolation must be nearest, bilinear or bicubic");
    if (img->dtype != CT_U8 && img->dtype != CT_F32 && img->dtype != CT_F64)
        return ct__error(CT_ERR_DTYPE, "resize: expected a uint8, float32 or float64 image, got %s",
                         ct_dtype_name(img->dtype));
    int nd = img->ndim;
    int64_t H = img->sizes[nd - 2], W = img->sizes[nd - 1], oh = 0, ow = 0;
    if (resize_size(H, W, h, w, &oh, &ow)) return NULL;
    if (oh <= 0 || ow <= 0)
        return ct__error(CT_ERR_ARG, "resize: output size [%lld, %lld] of a %lldx%lld image is empty",
                         (long long)oh, (long long)ow, (long long)H, (long long)W);
    if (oh == H && ow == W) return same(img);
    ct_scope s = ct_scope_begin();
    ct_tensor *x = img->dtype == CT_U8 ? ct_to_dtype(img, CT_F32) : img;
    int64_t lead = 1;
    for (int d = 0; d < nd - 2; d++) lead *= img->sizes[d];
    int64_t c = nd >= 3 ? img->sizes[nd - 3] : 1;
    int64_t n = nd >= 3 ? lead / (c ? c : 1) : 1;
    if (nd >= 3 && c == 0) n = 0;
    ct_tensor *x4 = ct_reshape(x, (const int64_t[]){n, c, H, W}, 4);
    ct_tensor *y = ct_interpolate(x4, (const int64_t[]){oh, ow}, NULL, 2, mode, false);
    if (img->dtype == CT_U8) {
        if (mode == CT_INTERP_BICUBIC) y = ct_clamp(y, 0, 255);
        y = ct_to_dtype(ct_round(y), CT_U8);
    }
    int64_t shape[CT_MAX_DIMS];
    out_shape(img, oh, ow, shape);
    ct_tensor *out = ct_reshape(y, shape, nd);
    if (out) {
        out = ct_contiguous(out);
        if (out) ct_keep(out);
    }
    ct_scope_end(s);
    return out;
}

/* ---- crop, center crop, pad, flip ----------------------------------------- */
ct_tensor *ct_image_crop(ct_tensor *img, int64_t top, int64_t left, int64_t h, int64_t w) {
    if (!check_img("crop", img, 2)) return NULL;
    if (h <= 0 || w <= 0)
        return ct__error(CT_ERR_ARG, "crop: size [%lld, %lld] must be positive", (long long)h,
                         (long long)w);
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    int64_t *rows = index_map(h), *cols = index_map(w);
    ct_tensor *out = NULL;
    if (rows && cols) {
        for (int64_t y = 0; y < h; y++) rows[y] = (top + y >= 0 && top + y < H) ? top + y : -1;
        for (int64_t x = 0; x < w; x++) cols[x] = (left + x >= 0 && left + x < W) ? left + x : -1;
        out = remap("crop", img, h, w, rows, cols, 0);
    }
    free(rows);
    free(cols);
    return out;
}

ct_tensor *ct_image_center_crop(ct_tensor *img, int64_t h, int64_t w) {
    if (!check_img("center_crop", img, 2)) return NULL;
    if (h <= 0 || w <= 0)
        return ct__error(CT_ERR_ARG, "center_crop: size [%lld, %lld] must be positive",
                         (long long)h, (long long)w);
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    int64_t pl = w > W ? (w - W) / 2 : 0, pt = h > H ? (h - H) / 2 : 0;
    int64_t pr = w > W ? (w - W + 1) / 2 : 0, pb = h > H ? (h - H + 1) / 2 : 0;
    int64_t Hp = H + pt + pb, Wp = W + pl + pr;
    int64_t top = (int64_t)nearbyint((double)(Hp - h) / 2.0);
    int64_t left = (int64_t)nearbyint((double)(Wp - w) / 2.0);
    return ct_image_crop(img, top - pt, left - pl, h, w);
}

/* Source index of padded position i (in [-before, n + after)). */
static int64_t pad_index(int64_t i, int64_t n, ct_padding_mode mode) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case CT_PADDING_EDGE: return i < 0 ? 0 : n - 1;
    case CT_PADDING_REFLECT: return i < 0 ? -i : 2 * (n - 1) - i;
    case CT_PADDING_SYMMETRIC: return i < 0 ? -i - 1 : 2 * n - 1 - i;
    default: return -1;
    }
}

static const char *pad_mode_name(ct_padding_mode m) {
    static const char *names[] = {"constant", "edge", "reflect", "symmetric"};
    return (unsigned)m < 4 ? names[m] : "?";
}

ct_tensor *ct_image_pad(ct_tensor *img, const int64_t padding[4], double fill, ct_padding_mode mode) {
    if (!check_img("pad", img, 2)) return NULL;
    if (!padding) return ct__error(CT_ERR_NULL, "pad: padding is NULL");
    if ((unsigned)mode > CT_PADDING_SYMMETRIC)
        return ct__error(CT_ERR_ARG, "pad: invalid padding mode %d", (int)mode);
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    for (int k = 0; k < 4; k++) {
        if (padding[k] < 0 || padding[k] > CT_IMAGE_MAX_SIDE)
            return ct__error(CT_ERR_ARG, "pad: padding[%d] = %lld must be in [0, %d]", k,
                             (long long)padding[k], CT_IMAGE_MAX_SIDE);
        int64_t n = (k % 2) ? H : W;
        if (padding[k] > 0 && ((mode == CT_PADDING_REFLECT && padding[k] >= n) ||
                               (mode != CT_PADDING_CONSTANT && padding[k] > n) || (n == 0 && mode)))
            return ct__error(CT_ERR_ARG, "pad: %s padding of %lld is too large for a dim of size "
                             "%lld (reflect needs padding < size, edge/symmetric <= size)",
                             pad_mode_name(mode), (long long)padding[k], (long long)n);
    }
    int64_t oh = H + padding[1] + padding[3], ow = W + padding[0] + padding[2];
    int64_t *rows = index_map(oh), *cols = index_map(ow);
    ct_tensor *out = NULL;
    if (rows && cols) {
        for (int64_t y = 0; y < oh; y++) rows[y] = pad_index(y - padding[1], H, mode);
        for (int64_t x = 0; x < ow; x++) cols[x] = pad_index(x - padding[0], W, mode);
        out = remap("pad", img, oh, ow, rows, cols, fill);
    }
    free(rows);
    free(cols);
    return out;
}

ct_tensor *ct_image_hflip(ct_tensor *img) {
    if (!check_img("hflip", img, 2)) return NULL;
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    int64_t *rows = index_map(H), *cols = index_map(W);
    ct_tensor *out = NULL;
    if (rows && cols) {
        for (int64_t y = 0; y < H; y++) rows[y] = y;
        for (int64_t x = 0; x < W; x++) cols[x] = W - 1 - x;
        out = remap("hflip", img, H, W, rows, cols, 0);
    }
    free(rows);
    free(cols);
    return out;
}

/* ---- rotate --------------------------------------------------------------- */
/* Follows F.rotate -> _get_inverse_affine_matrix(center 0, -angle) ->
 * _gen_affine_grid -> grid_sample(align_corners=False, zeros) with the
 * mask channel that blends `fill`, all in float32. */
ct_tensor *ct_image_rotate(ct_tensor *img, double angle, ct_interp_mode mode, double fill) {
    if (!check_img("rotate", img, 2) || !check_u8_f32("rotate", img)) return NULL;
    if (mode != CT_INTERP_NEAREST && mode != CT_INTERP_BILINEAR)
        return ct__error(CT_ERR_ARG, "rotate: interpolation must be nearest or bilinear");
    if (!isfinite(angle) || !isfinite(fill))
        return ct__error(CT_ERR_ARG, "rotate: angle and fill must be finite");
    ct_tensor *src = ct__contig_as(img, CT_F32);
    if (!src) return NULL;
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    int64_t planes = 1;
    for (int d = 0; d < img->ndim - 2; d++) planes *= img->sizes[d];
    ct_tensor *out = ct__alloc(img->sizes, img->ndim, img->dtype, CT_CPU);
    float *tmp = malloc(sizeof(float) * (size_t)(H * W > 0 ? H * W : 1));
    if (!out || !tmp) {
        ct_release(src); ct_release(out); free(tmp);
        return out ? ct__error(CT_ERR_OOM, "rotate: out of memory") : NULL;
    }
    double rot = -angle * M_PI / 180.0;
    /* inverse affine matrix [d, -b, 0, -c, a, 0] with a = d = cos, b = -sin, c = sin */
    float th[2][3] = {{(float)cos(rot), (float)sin(rot), 0.0f}, {(float)-sin(rot), (float)cos(rot), 0.0f}};
    float sx = (float)(0.5 * (double)W), sy = (float)(0.5 * (double)H);
    float r[3][2];
    for (int k = 0; k < 3; k++) { r[k][0] = th[0][k] / sx; r[k][1] = th[1][k] / sy; }
    const float *s = ct__ptr(src);
    float ff = (float)fill;
    for (int64_t p = 0; p < planes; p++) {
        const float *sp = s + p * H * W;
        for (int64_t oy = 0; oy < H; oy++) {
            float by = (float)(-(double)H * 0.5 + 0.5 + (double)oy);
            for (int64_t ox = 0; ox < W; ox++) {
                float bx = (float)(-(double)W * 0.5 + 0.5 + (double)ox);
                float gx = bx * r[0][0] + by * r[1][0] + r[2][0];
                float gy = bx * r[0][1] + by * r[1][1] + r[2][1];
                float ix = ((gx + 1.0f) * (float)W - 1.0f) / 2.0f;
                float iy = ((gy + 1.0f) * (float)H - 1.0f) / 2.0f;
                float v, m;
                if (mode == CT_INTERP_NEAREST) {
                    int64_t xn = (int64_t)nearbyintf(ix), yn = (int64_t)nearbyintf(iy);
                    bool in = xn >= 0 && xn < W && yn >= 0 && yn < H;
                    v = in ? sp[yn * W + xn] : ff;
                    m = 1;
                    (void)m;
                } else {
                    float x0f = floorf(ix), y0f = floorf(iy);
                    int64_t x0 = (int64_t)x0f, y0 = (int64_t)y0f;
                    float we = ix - x0f, ww = 1.0f - we, wn = iy - y0f, ws = 1.0f - wn;
                    float wnw = ws * ww, wne = ws * we, wsw = wn * ww, wse = wn * we;
                    bool inx0 = x0 >= 0 && x0 < W, inx1 = x0 + 1 >= 0 && x0 + 1 < W;
                    bool iny0 = y0 >= 0 && y0 < H, iny1 = y0 + 1 >= 0 && y0 + 1 < H;
                    float vnw = inx0 && iny0 ? sp[y0 * W + x0] : 0.0f;
                    float vne = inx1 && iny0 ? sp[y0 * W + x0 + 1] : 0.0f;
                    float vsw = inx0 && iny1 ? sp[(y0 + 1) * W + x0] : 0.0f;
                    float vse = inx1 && iny1 ? sp[(y0 + 1) * W + x0 + 1] : 0.0f;
                    v = vnw * wnw + vne * wne + vsw * wsw + vse * wse;
                    m = (inx0 && iny0 ? wnw : 0.0f) + (inx1 && iny0 ? wne : 0.0f) +
                        (inx0 && iny1 ? wsw : 0.0f) + (inx1 && iny1 ? wse : 0.0f);
                    v = v * m + (1.0f - m) * ff;
                }
                tmp[oy * W + ox] = v;
            }
        }
        if (img->dtype == CT_F32) {
            memcpy((float *)ct__ptr(out) + p * H * W, tmp, sizeof(float) * (size_t)(H * W));
        } else {
            uint8_t *o = (uint8_t *)ct__ptr(out) + p * H * W;
            for (int64_t i = 0; i < H * W; i++) {
                float v = nearbyintf(tmp[i]);
                o[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
    }
    free(tmp);
    ct_release(src);
    return ct__register(out);
}

/* ---- color ---------------------------------------------------------------- */
typedef struct {
    ct_tensor *src;  /* contiguous, uint8 or float32, new ref */
    int64_t B, C, HW;
} color_img;

static bool color_begin(const char *op, ct_tensor *img, color_img *ci, bool need3) {
    if (!check_img(op, img, 3) || !check_u8_f32(op, img)) return false;
    int nd = img->ndim;
    ci->C = img->sizes[nd - 3];
    ci->HW = img->sizes[nd - 2] * img->sizes[nd - 1];
    if (ci->C != 1 && ci->C != 3) {
        ct__error(CT_ERR_SHAPE, "%s: expected 1 or 3 channels in dim -3, got %s", op, ct__tshape(img));
        return false;
    }
    if (need3 && ci->C != 3) {
        ct__error(CT_ERR_SHAPE, "%s: expected 3 channels in dim -3, got %s", op, ct__tshape(img));
        return false;
    }
    ci->B = 1;
    for (int d = 0; d < nd - 3; d++) ci->B *= img->sizes[d];
    ci->src = contig(img);
    return ci->src != NULL;
}

static inline float ld(const ct_tensor *t, int64_t i) {
    return t->dtype == CT_U8 ? (float)((const uint8_t *)ct__ptr(t))[i] : ((const float *)ct__ptr(t))[i];
}
/* torch's .to(uint8) truncates toward zero after the clamp */
static inline void st_val(ct_tensor *t, int64_t i, float v) {
    if (t->dtype == CT_U8) ((uint8_t *)ct__ptr(t))[i] = (uint8_t)(int)v;
    else ((float *)ct__ptr(t))[i] = v;
}

/* rgb_to_grayscale of batch b into g[HW] (already converted to img dtype,
 * then to float: uint8 truncates). */
static void gray_of(const color_img *ci, int64_t b, float *g) {
    const ct_tensor *t = ci->src;
    int64_t base = b * 3 * ci->HW;
    for (int64_t i = 0; i < ci->HW; i++) {
        float r = ld(t, base + i), gg = ld(t, base + ci->HW + i), bb = ld(t, base + 2 * ci->HW + i);
        float l = 0.2989f * r + 0.587f * gg + 0.114f * bb;
        g[i] = t->dtype == CT_U8 ? (float)(uint8_t)(int)l : l;
    }
}

ct_tensor *ct_image_rgb_to_grayscale(ct_tensor *img) {
    color_img ci;
    if (!color_begin("rgb_to_grayscale", img, &ci, true)) return NULL;
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, img->sizes, sizeof(int64_t) * (size_t)img->ndim);
    shape[img->ndim - 3] = 1;
    ct_tensor *out = ct__alloc(shape, img->ndim, img->dtype, CT_CPU);
    float *g = malloc(sizeof(float) * (size_t)(ci.HW ? ci.HW : 1));
    if (!out || !g) {
        ct_release(ci.src); free(g);
        if (out) { ct_release(out); return ct__error(CT_ERR_OOM, "rgb_to_grayscale: out of memory"); }
        return NULL;
    }
    for (int64_t b = 0; b < ci.B; b++) {
        gray_of(&ci, b, g);
        for (int64_t i = 0; i < ci.HW; i++) st_val(out, b * ci.HW + i, g[i]);
    }
    free(g);
    ct_release(ci.src);
    return ct__register(out);
}

/* _blend(img, other, ratio) where other is 0 (kind 0), the per-batch mean
 * of the grayscale image (kind 1), or the grayscale image (kind 2). */
static ct_tensor *blend(const char *op, ct_tensor *img, double ratio, int kind) {
    if (!(ratio >= 0) || !isfinite(ratio))
        return ct__error(CT_ERR_ARG, "%s: factor %g must be a finite non-negative number", op, ratio);
    color_img ci;
    if (!color_begin(op, img, &ci, false)) return NULL;
    if (kind == 2 && ci.C == 1) { ct_release(ci.src); return same(img); }
    ct_tensor *out = ct__alloc(img->sizes, img->ndim, img->dtype, CT_CPU);
    float *g = malloc(sizeof(float) * (size_t)(ci.HW ? ci.HW : 1));
    if (!out || !g) {
        ct_release(ci.src); free(g);
        if (out) { ct_release(out); return ct__error(CT_ERR_OOM, "%s: out of memory", op); }
        return NULL;
    }
    float bound = img->dtype == CT_U8 ? 255.0f : 1.0f;
    float r1 = (float)ratio, r2 = (float)(1.0 - ratio);
    for (int64_t b = 0; b < ci.B; b++) {
        int64_t base = b * ci.C * ci.HW;
        float mean = 0;
        if (kind >= 1) {
            if (ci.C == 3) gray_of(&ci, b, g);
            else for (int64_t i = 0; i < ci.HW; i++) g[i] = ld(ci.src, base + i);
        }
        if (kind == 1) {
            double acc = 0;
            for (int64_t i = 0; i < ci.HW; i++) acc += g[i];
            mean = (float)(acc / (double)(ci.HW ? ci.HW : 1));
        }
        for (int64_t c = 0; c < ci.C; c++)
            for (int64_t i = 0; i < ci.HW; i++) {
                int64_t k = base + c * ci.HW + i;
                float other = kind == 0 ? 0.0f : kind == 1 ? mean : g[i];
                float v = r1 * ld(ci.src, k) + r2 * other;
                v = v < 0 ? 0 : v > bound ? bound : v;
                st_val(out, k, v);
            }
    }
    free(g);
    ct_release(ci.src);
    return ct__register(out);
}

ct_tensor *ct_image_adjust_brightness(ct_tensor *img, double factor) {
    return blend("adjust_brightness", img, factor, 0);
}
ct_tensor *ct_image_adjust_contrast(ct_tensor *img, double factor) {
    return blend("adjust_contrast", img, factor, 1);
}
ct_tensor *ct_image_adjust_saturation(ct_tensor *img, double factor) {
    return blend("adjust_saturation", img, factor, 2);
}

static inline float clamp01(float v) { return v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v; }

ct_tensor *ct_image_adjust_hue(ct_tensor *img, double factor) {
    if (!(factor >= -0.5 && factor <= 0.5))
        return ct__error(CT_ERR_ARG, "adjust_hue: hue_factor %g is not in [-0.5, 0.5]", factor);
    color_img ci;
    if (!color_begin("adjust_hue", img, &ci, false)) return NULL;
    if (ci.C == 1) { ct_release(ci.src); return same(img); }
    ct_tensor *out = ct__alloc(img->sizes, img->ndim, img->dtype, CT_CPU);
    if (!out) { ct_release(ci.src); return NULL; }
    bool u8 = img->dtype == CT_U8;
    float hf = (float)factor;
    for (int64_t b = 0; b < ci.B; b++) {
        int64_t base = b * 3 * ci.HW;
        for (int64_t i = 0; i < ci.HW; i++) {
            float rgb[3];
            for (int c = 0; c < 3; c++) {
                float v = ld(ci.src, base + c * ci.HW + i);
                rgb[c] = u8 ? v / 255.0f : v;
            }
            float r = rgb[0], g = rgb[1], bl = rgb[2];
            /* _rgb2hsv */
            float maxc = fmaxf(r, fmaxf(g, bl)), minc = fminf(r, fminf(g, bl));
            bool eqc = maxc == minc;
            float cr = maxc - minc;
            float s = cr / (eqc ? 1.0f : maxc);
            float crd = eqc ? 1.0f : cr;
            float rc = (maxc - r) / crd, gc = (maxc - g) / crd, bc = (maxc - bl) / crd;
            float hr = (maxc == r) ? (bc - gc) : 0.0f;
            float hg = (maxc == g && maxc != r) ? (2.0f + rc - bc) : 0.0f;
            float hb = (maxc != g && maxc != r) ? (4.0f + gc - rc) : 0.0f;
            float h = hr + hg + hb;
            h = fmodf(h / 6.0f + 1.0f, 1.0f);
            float v = maxc;
            /* (h + hue_factor) % 1.0 (torch.remainder) */
            h = h + hf;
            float md = fmodf(h, 1.0f);
            if (md != 0 && md < 0) md += 1.0f;
            h = md;
            /* _hsv2rgb */
            float i6 = floorf(h * 6.0f);
            float f = h * 6.0f - i6;
            int ii = (int)i6;
            float p = clamp01(v * (1.0f - s));
            float q = clamp01(v * (1.0f - s * f));
            float t = clamp01(v * (1.0f - s * (1.0f - f)));
            ii %= 6;
            if (ii < 0) ii += 6;
            float o[3];
            switch (ii) {
            case 0: o[0] = v; o[1] = t; o[2] = p; break;
            case 1: o[0] = q; o[1] = v; o[2] = p; break;
            case 2: o[0] = p; o[1] = v; o[2] = t; break;
            case 3: o[0] = p; o[1] = q; o[2] = v; break;
            case 4: o[0] = t; o[1] = p; o[2] = v; break;
            default: o[0] = v; o[1] = p; o[2] = q; break;
            }
            for (int c = 0; c < 3; c++) {
                int64_t k = base + c * ci.HW + i;
                if (u8) {
                    float x = o[c] * 255.0f;
                    ((uint8_t *)ct__ptr(out))[k] = (uint8_t)(int)(x < 0 ? 0 : x > 255 ? 255 : x);
                } else {
                    ((float *)ct__ptr(out))[k] = o[c];
                }
            }
        }
    }
    ct_release(ci.src);
    return ct__register(out);
}
