/* image.c -- PNG (libspng) and JPEG (libjpeg-turbo) decoding into uint8
 * [H, W, C] tensors, with size limits and every library error turned into
 * a ctorch error naming the file. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <spng.h>
#include <turbojpeg.h>

#include "transforms_impl.h"

#define CT_IMAGE_MAX_FILE ((size_t)1 << 30) /* 1 GiB: larger files are refused */

static bool is_png(const unsigned char *b, size_t n) {
    return n >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0;
}
static bool is_jpeg(const unsigned char *b, size_t n) {
    return n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF;
}

static ct_status check_dims(int64_t h, int64_t w, const char *what) {
    if (h <= 0 || w <= 0)
        return ct__error_status(CT_ERR_FORMAT, "image_decode: %s: invalid dimensions %lldx%lld",
                                what, (long long)w, (long long)h);
    if (h > CT_IMAGE_MAX_SIDE || w > CT_IMAGE_MAX_SIDE || h * w > CT_IMAGE_MAX_PIXELS)
        return ct__error_status(CT_ERR_FORMAT,
                                "image_decode: %s: image of %lldx%lld pixels exceeds the limits "
                                "(%d per side, %lld pixels)", what, (long long)w, (long long)h,
                                CT_IMAGE_MAX_SIDE, (long long)CT_IMAGE_MAX_PIXELS);
    return CT_OK;
}

/* Converts an interleaved image with sc channels (1: gray, 2: gray+alpha,
 * 3: RGB, 4: RGBA) to oc channels. */
static void convert_channels(const unsigned char *src, int sc, unsigned char *dst, int oc,
                             int64_t npix) {
    if (sc == oc) { memcpy(dst, src, (size_t)npix * (size_t)sc); return; }
    for (int64_t i = 0; i < npix; i++, src += sc, dst += oc) {
        unsigned r, g, b, a = 255;
        if (sc <= 2) { r = g = b = src[0]; if (sc == 2) a = src[1]; }
        else { r = src[0]; g = src[1]; b = src[2]; if (sc == 4) a = src[3]; }
        unsigned l = (sc <= 2) ? r : (299 * r + 587 * g + 114 * b + 500) / 1000;
        switch (oc) {
        case 1: dst[0] = (unsigned char)l; break;
        case 2: dst[0] = (unsigned char)l; dst[1] = (unsigned char)a; break;
        case 3: dst[0] = (unsigned char)r; dst[1] = (unsigned char)g; dst[2] = (unsigned char)b; break;
        default: dst[0] = (unsigned char)r; dst[1] = (unsigned char)g; dst[2] = (unsigned char)b;
                 dst[3] = (unsigned char)a; break;
        }
    }
}

static ct_tensor *finish_image(const unsigned char *pix, int sc, int64_t h, int64_t w,
                               ct_image_mode mode) {
    int oc = mode == CT_IMAGE_UNCHANGED ? sc : (int)mode;
    ct_tensor *t = ct__alloc((const int64_t[]){h, w, oc}, 3, CT_U8, CT_CPU);
    if (!t) return NULL;
    convert_channels(pix, sc, ct__ptr(t), oc, h * w);
    return t;
}

static ct_tensor *decode_png(const unsigned char *buf, size_t n, ct_image_mode mode,
                             const char *what) {
    ct_tensor *out = NULL;
    unsigned char *pix = NULL;
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return ct__error(CT_ERR_OOM, "image_decode: %s: out of memory", what);
    int r = spng_set_image_limits(ctx, CT_IMAGE_MAX_SIDE, CT_IMAGE_MAX_SIDE);
    if (!r) r = spng_set_chunk_limits(ctx, (size_t)1 << 24, (size_t)1 << 26);
    if (!r) r = spng_set_png_buffer(ctx, buf, n);
    struct spng_ihdr ihdr;
    if (!r) r = spng_get_ihdr(ctx, &ihdr);
    if (r) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: invalid PNG: %s", what, spng_strerror(r));
        goto done;
    }
    if (check_dims(ihdr.height, ihdr.width, what)) goto done;
    int stored;
    switch (ihdr.color_type) {
    case SPNG_COLOR_TYPE_GRAYSCALE: stored = 1; break;
    case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: stored = 2; break;
    case SPNG_COLOR_TYPE_TRUECOLOR: stored = 3; break;
    case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: stored = 4; break;
    case SPNG_COLOR_TYPE_INDEXED: {
        struct spng_trns trns;
        stored = spng_get_trns(ctx, &trns) == 0 ? 4 : 3;
        break;
    }
    default:
        ct__error(CT_ERR_FORMAT, "image_decode: %s: invalid PNG color type %d", what,
                  (int)ihdr.color_type);
        goto done;
    }
    /* RGB8 for truecolor without alpha, RGBA8 for everything else (gray
     * samples come out replicated, 16-bit samples keep the high byte). */
    int fmt = stored == 3 ? SPNG_FMT_RGB8 : SPNG_FMT_RGBA8, dc = stored == 3 ? 3 : 4;
    size_t sz;
    r = spng_decoded_image_size(ctx, fmt, &sz);
    if (r) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: invalid PNG: %s", what, spng_strerror(r));
        goto done;
    }
    pix = malloc(sz ? sz : 1);
    if (!pix) { ct__error(CT_ERR_OOM, "image_decode: %s: out of memory (%zu bytes)", what, sz); goto done; }
    r = spng_decode_image(ctx, pix, sz, fmt, SPNG_DECODE_TRNS);
    if (r) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: corrupt PNG: %s", what, spng_strerror(r));
        goto done;
    }
    int64_t h = ihdr.height, w = ihdr.width;
    if (stored <= 2 && dc == 4) {
        /* RGBA with r == g == b: shrink to gray(+alpha) first so that GRAY
         * takes the stored value, not a recomputed luma */
        for (int64_t i = 0; i < h * w; i++) {
            pix[i * stored] = pix[i * 4];
            if (stored == 2) pix[i * 2 + 1] = pix[i * 4 + 3];
        }
        dc = stored;
    }
    out = finish_image(pix, dc, h, w, mode);
done:
    free(pix);
    spng_ctx_free(ctx);
    return out;
}

static ct_tensor *decode_jpeg(const unsigned char *buf, size_t n, ct_image_mode mode,
                              const char *what) {
    ct_tensor *out = NULL;
    unsigned char *pix = NULL;
    if (n > ULONG_MAX) return ct__error(CT_ERR_FORMAT, "image_decode: %s: JPEG too large", what);
    tjhandle tj = tjInitDecompress();
    if (!tj) return ct__error(CT_ERR_OOM, "image_decode: %s: cannot start libjpeg-turbo: %s",
                              what, tjGetErrorStr2(NULL));
    int w = 0, h = 0, subsamp = 0, cs = 0;
    if (tjDecompressHeader3(tj, buf, (unsigned long)n, &w, &h, &subsamp, &cs) != 0) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: invalid JPEG: %s", what, tjGetErrorStr2(tj));
        goto done;
    }
    if (check_dims(h, w, what)) goto done;
    if (cs == TJCS_CMYK || cs == TJCS_YCCK) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: CMYK JPEGs are not supported", what);
        goto done;
    }
    bool gray_src = cs == TJCS_GRAY;
    /* a gray request on a color JPEG takes its luma channel (like torchvision) */
    int dc = (gray_src || mode == CT_IMAGE_GRAY) ? 1 : 3;
    int pf = dc == 1 ? TJPF_GRAY : TJPF_RGB;
    size_t sz = (size_t)w * (size_t)h * (size_t)dc;
    pix = malloc(sz);
    if (!pix) { ct__error(CT_ERR_OOM, "image_decode: %s: out of memory (%zu bytes)", what, sz); goto done; }
    int flags = 0;
#ifdef TJFLAG_LIMITSCANS
    flags |= TJFLAG_LIMITSCANS; /* refuse progressive JPEGs with > 500 scans (DoS) */
#endif
    if (tjDecompress2(tj, buf, (unsigned long)n, pix, w, w * dc, h, pf, flags) != 0 &&
        tjGetErrorCode(tj) != TJERR_WARNING) {
        ct__error(CT_ERR_FORMAT, "image_decode: %s: corrupt JPEG: %s", what, tjGetErrorStr2(tj));
        goto done;
    }
    out = finish_image(pix, dc, h, w, mode);
done:
    free(pix);
    tjDestroy(tj);
    return out;
}

static ct_status check_mode(ct_image_mode mode, const char *what) {
    if (mode != CT_IMAGE_UNCHANGED && mode != CT_IMAGE_GRAY && mode != CT_IMAGE_RGB &&
        mode != CT_IMAGE_RGBA)
        return ct__error_status(CT_ERR_ARG, "image_decode: %s: invalid mode %d", what, (int)mode);
    return CT_OK;
}

ct_tensor *ct__image_decode_named(const void *buf, size_t n, ct_image_mode mode, const char *what) {
    if (!buf) return ct__error(CT_ERR_NULL, "image_decode: %s: buffer is NULL", what);
    if (check_mode(mode, what)) return NULL;
    const unsigned char *b = buf;
    if (is_png(b, n)) return decode_png(b, n, mode, what);
    if (is_jpeg(b, n)) return decode_jpeg(b, n, mode, what);
    return ct__error(CT_ERR_FORMAT, "image_decode: %s: not a PNG or JPEG file (%zu bytes, "
                     "unknown signature)", what, n);
}

ct_tensor *ct_image_decode_mode(const void *buf, size_t n, ct_image_mode mode) {
    return ct__register(ct__image_decode_named(buf, n, mode, "<memory>"));
}
ct_tensor *ct_image_decode(const void *buf, size_t n) {
    return ct_image_decode_mode(buf, n, CT_IMAGE_UNCHANGED);
}

void *ct__read_file(const char *path, size_t *n) {
    if (!path) return ct__error(CT_ERR_NULL, "image_read: path is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return ct__error(CT_ERR_IO, "image_read: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ct__error(CT_ERR_IO, "image_read: %s is not a regular file", path);
    }
    if ((uint64_t)st.st_size > CT_IMAGE_MAX_FILE) {
        fclose(f);
        return ct__error(CT_ERR_FORMAT, "image_read: %s: file of %lld bytes is too large",
                         path, (long long)st.st_size);
    }
    size_t sz = (size_t)st.st_size;
    unsigned char *buf = malloc(sz ? sz : 1);
    if (!buf) { fclose(f); return ct__error(CT_ERR_OOM, "image_read: %s: out of memory", path); }
    size_t got = fread(buf, 1, sz, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != sz) {
        free(buf);
        return ct__error(CT_ERR_IO, "image_read: %s: read error", path);
    }
    *n = sz;
    return buf;
}

ct_tensor *ct_image_read_mode(const char *path, ct_image_mode mode) {
    size_t n = 0;
    void *buf = ct__read_file(path, &n);
    if (!buf) return NULL;
    ct_tensor *t = ct__image_decode_named(buf, n, mode, path);
    free(buf);
    return ct__register(t);
}
ct_tensor *ct_image_read(const char *path) { return ct_image_read_mode(path, CT_IMAGE_UNCHANGED); }

ct_status ct_image_info(const void *buf, size_t n, int64_t *height, int64_t *width, int *channels) {
    if (!buf) return ct__error_status(CT_ERR_NULL, "image_info: buffer is NULL");
    const unsigned char *b = buf;
    int64_t h = 0, w = 0;
    int c = 0;
    if (is_png(b, n)) {
        spng_ctx *ctx = spng_ctx_new(0);
        if (!ctx) return ct__error_status(CT_ERR_OOM, "image_info: out of memory");
        struct spng_ihdr ihdr;
        int r = spng_set_png_buffer(ctx, b, n);
        if (!r) r = spng_get_ihdr(ctx, &ihdr);
        if (r) {
            spng_ctx_free(ctx);
            return ct__error_status(CT_ERR_FORMAT, "image_info: invalid PNG: %s", spng_strerror(r));
        }
        h = ihdr.height; w = ihdr.width;
        switch (ihdr.color_type) {
        case SPNG_COLOR_TYPE_GRAYSCALE: c = 1; break;
        case SPNG_COLOR_TYPE_GRAYSCALE_ALPHA: c = 2; break;
        case SPNG_COLOR_TYPE_TRUECOLOR: c = 3; break;
        case SPNG_COLOR_TYPE_TRUECOLOR_ALPHA: c = 4; break;
        default: { struct spng_trns t; c = spng_get_trns(ctx, &t) == 0 ? 4 : 3; }
        }
        spng_ctx_free(ctx);
    } else if (is_jpeg(b, n)) {
        tjhandle tj = tjInitDecompress();
        if (!tj) return ct__error_status(CT_ERR_OOM, "image_info: cannot start libjpeg-turbo");
        int iw, ih, ss, cs;
        if (n > ULONG_MAX || tjDecompressHeader3(tj, b, (unsigned long)n, &iw, &ih, &ss, &cs) != 0) {
            ct_status st = ct__error_status(CT_ERR_FORMAT, "image_info: invalid JPEG: %s",
                                            tjGetErrorStr2(tj));
            tjDestroy(tj);
            return st;
        }
        tjDestroy(tj);
        h = ih; w = iw;
        c = cs == TJCS_GRAY ? 1 : (cs == TJCS_CMYK || cs == TJCS_YCCK) ? 4 : 3;
    } else {
        return ct__error_status(CT_ERR_FORMAT, "image_info: not a PNG or JPEG (unknown signature)");
    }
    ct_status st = check_dims(h, w, "<memory>");
    if (st) return st;
    if (height) *height = h;
    if (width) *width = w;
    if (channels) *channels = c;
    return CT_OK;
}
