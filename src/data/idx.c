/* idx.c -- IDX files (MNIST / FashionMNIST), raw or gzip, and the
 * image+label dataset over a pair of them.  Input is hostile: every size is
 * validated and overflow-checked, and gzip output is bounded by the size
 * the header announces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset_impl.h"

#define IDX_MAX_BYTES ((uint64_t)1 << 40)

static int idx_dtype(uint8_t code, ct_dtype *dt) {
    switch (code) {
    case 0x08: *dt = CT_U8; return 1;
    case 0x09: *dt = CT_I8; return 1;
    case 0x0B: *dt = CT_I16; return 1;
    case 0x0C: *dt = CT_I32; return 1;
    case 0x0D: *dt = CT_F32; return 1;
    case 0x0E: *dt = CT_F64; return 1;
    default: return 0;
    }
}

/* Parses the header of b[0..n); on success fills shape/ndim/dt and the
 * header length and the expected total length. */
static ct_status idx_header(const char *src, const uint8_t *b, size_t n, int64_t *shape, int *ndim,
                            ct_dtype *dt, size_t *hdr, uint64_t *total) {
    if (n < 4)
        return ct__error_status(CT_ERR_FORMAT, "idx_load: %s: file too short for the IDX header (%zu bytes)", src, n);
    if (b[0] != 0 || b[1] != 0)
        return ct__error_status(CT_ERR_FORMAT, "idx_load: %s: bad magic %02x %02x (expected 00 00)", src, b[0], b[1]);
    if (!idx_dtype(b[2], dt))
        return ct__error_status(CT_ERR_FORMAT, "idx_load: %s: unknown dtype byte 0x%02x", src, b[2]);
    int nd = b[3];
    if (nd < 1 || nd > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_FORMAT, "idx_load: %s: ndim %d out of range [1, %d]", src, nd, CT_MAX_DIMS);
    size_t h = 4 + 4 * (size_t)nd;
    if (n < h)
        return ct__error_status(CT_ERR_FORMAT, "idx_load: %s: truncated header (%zu bytes, %zu needed for %d dims)",
                                src, n, h, nd);
    uint64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        const uint8_t *p = b + 4 + 4 * i;
        uint64_t d = ((uint64_t)p[0] << 24) | ((uint64_t)p[1] << 16) | ((uint64_t)p[2] << 8) | p[3];
        shape[i] = (int64_t)d;
        if (d && numel > IDX_MAX_BYTES / d)
            return ct__error_status(CT_ERR_OVERFLOW, "idx_load: %s: dims overflow (dim %d = %llu)", src, i,
                                    (unsigned long long)d);
        numel *= d;
    }
    uint64_t es = ct_dtype_size(*dt);
    if (numel > (IDX_MAX_BYTES - h) / es)
        return ct__error_status(CT_ERR_OVERFLOW, "idx_load: %s: data size overflows", src);
    *ndim = nd;
    *hdr = h;
    *total = h + numel * es;
    return CT_OK;
}

static ct_tensor *idx_parse(const char *src, const uint8_t *b, size_t n) {
    int64_t shape[CT_MAX_DIMS];
    int nd;
    ct_dtype dt;
    size_t h;
    uint64_t total;
    if (idx_header(src, b, n, shape, &nd, &dt, &h, &total)) return NULL;
    if ((uint64_t)n != total)
        return ct__error(CT_ERR_FORMAT, "idx_load: %s: %s data: the header announces %llu bytes, the file has %zu",
                         src, (uint64_t)n < total ? "truncated" : "trailing", (unsigned long long)total, n);
    ct_tensor *t = ct__alloc(shape, nd, dt, CT_CPU);
    if (!t) return NULL;
    size_t es = ct_dtype_size(dt);
    size_t cnt = (size_t)((total - h) / es);
    uint8_t *dst = ct__ptr(t);
    const uint8_t *p = b + h;
    if (es == 1) {
        memcpy(dst, p, cnt);
    } else {
        for (size_t i = 0; i < cnt; i++)
            for (size_t k = 0; k < es; k++) dst[i * es + k] = p[i * es + es - 1 - k];
    }
    return ct__register(t);
}

/* Inflates a gzip buffer; the output is bounded by the header's size + 1
 * (so an over-long stream is detected without inflating it all). */
static uint8_t *gunzip(const char *src, const uint8_t *in, size_t n, size_t *outn) {
    if (n > UINT32_MAX) return ct__error(CT_ERR_FORMAT, "idx_load: %s: gzip input over 4 GiB", src);
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return ct__error(CT_ERR_RUNTIME, "idx_load: %s: inflateInit failed", src);
    size_t cap = 1 << 16, len = 0;
    uint64_t limit = 4 + 4 * CT_MAX_DIMS; /* until the header is known */
    int have_limit = 0;
    uint8_t *out = malloc(cap);
    if (!out) { inflateEnd(&z); return ct__error(CT_ERR_OOM, "idx_load: %s: out of memory", src); }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    for (;;) {
        if (len == cap) {
            if (have_limit && (uint64_t)cap > limit) break; /* more than announced */
            size_t nc = cap * 2;
            if (have_limit && (uint64_t)nc > limit + 1) nc = (size_t)(limit + 1);
            uint8_t *no = realloc(out, nc);
            if (!no) { free(out); inflateEnd(&z); return ct__error(CT_ERR_OOM, "idx_load: %s: out of memory", src); }
            out = no;
            cap = nc;
        }
        z.next_out = out + len;
        z.avail_out = (uInt)((cap - len) > UINT32_MAX ? UINT32_MAX : (cap - len));
        size_t before = cap - len;
        int r = inflate(&z, Z_NO_FLUSH);
        len += before - z.avail_out;
        if (!have_limit && len >= 4) {
            size_t need = len >= 4 && out[3] <= CT_MAX_DIMS ? 4 + 4 * (size_t)out[3] : 4;
            if (len >= need || r == Z_STREAM_END) {
                int64_t shape[CT_MAX_DIMS];
                int nd;
                ct_dtype dt;
                size_t h;
                uint64_t total;
                if (idx_header(src, out, len, shape, &nd, &dt, &h, &total)) {
                    free(out);
                    inflateEnd(&z);
                    return NULL;
                }
                limit = total;
                have_limit = 1;
            }
        }
        if (r == Z_STREAM_END) break;
        if (r == Z_BUF_ERROR && z.avail_in == 0) {
            free(out);
            inflateEnd(&z);
            return ct__error(CT_ERR_FORMAT, "idx_load: %s: truncated gzip stream (after %zu bytes of output)", src, len);
        }
        if (r != Z_OK && r != Z_BUF_ERROR) {
            free(out);
            const char *m = z.msg ? z.msg : "error";
            ct__error(CT_ERR_FORMAT, "idx_load: %s: corrupt gzip data (%s)", src, m);
            inflateEnd(&z);
            return NULL;
        }
        if (have_limit && (uint64_t)len > limit) break;
    }
    inflateEnd(&z);
    *outn = len;
    return out;
}

static ct_tensor *idx_from_bytes(const char *src, const uint8_t *b, size_t n) {
    if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
        size_t m = 0;
        uint8_t *raw = gunzip(src, b, n, &m);
        if (!raw) return NULL;
        ct_tensor *t = idx_parse(src, raw, m);
        free(raw);
        return t;
    }
    return idx_parse(src, b, n);
}

ct_tensor *ct_idx_load_buffer(const void *data, size_t size) {
    if (!data && size) return ct__error(CT_ERR_NULL, "idx_load: data is NULL");
    return idx_from_bytes("<buffer>", data ? data : (const void *)"", size);
}

ct_tensor *ct_idx_load(const char *path) {
    size_t n = 0;
    char *buf = ct__ds_read_file("idx_load", path, &n);
    if (!buf) return NULL;
    ct_tensor *t = idx_from_bytes(path, (const uint8_t *)buf, n);
    free(buf);
    return t;
}

/* ---- the MNIST-style dataset --------------------------------------------- */
typedef struct {
    ct_tensor *images; /* u8 [N, H, W] */
    ct_tensor *labels; /* i64 [N] */
    ct_dtype dt;
    int64_t n;
} idx_ds;

static int64_t ids_len(void *self) { return ((idx_ds *)self)->n; }
static ct_status ids_get(void *self, int64_t i, ct_sample *out) {
    idx_ds *d = self;
    ct_scope s = ct_scope_begin();
    ct_tensor *img = ct_select(d->images, 0, i);
    if (img && d->dt != CT_U8) {
        int64_t H = ct_size(img, 0), W = ct_size(img, 1);
        ct_tensor *f = ct__alloc(CT_SHAPE(1, H, W), d->dt, CT_CPU);
        if (f) {
            const uint8_t *p = ct__ptr(img);
            if (d->dt == CT_F32) {
                float *q = ct__ptr(f);
                for (int64_t k = 0; k < H * W; k++) q[k] = (float)p[k] / 255.0f;
            } else {
                double *q = ct__ptr(f);
                for (int64_t k = 0; k < H * W; k++) q[k] = (double)p[k] / 255.0;
            }
            ct__register(f);
        }
        img = f;
    }
    ct_status st = ct_sample_set(out, "image", img);
    if (!st) st = ct_sample_set(out, "label", ct_select(d->labels, 0, i));
    ct_scope_end(s);
    return st;
}
static void ids_free(void *self) {
    idx_ds *d = self;
    ct_release(d->images);
    ct_release(d->labels);
    free(d);
}
static const ct_dataset_vtable ids_vt = {.len = ids_len, .get = ids_get, .free = ids_free};

ct_dataset *ct_idx_dataset_new(const char *images_path, const char *labels_path, ct_dtype image_dtype) {
    if (!images_path || !labels_path) return ct__error(CT_ERR_NULL, "idx_dataset_new: path is NULL");
    if (image_dtype != CT_U8 && image_dtype != CT_F32 && image_dtype != CT_F64)
        return ct__error(CT_ERR_DTYPE, "idx_dataset_new: image dtype must be uint8, float32 or float64 (got %s)",
                         ct_dtype_name(image_dtype));
    ct_scope s = ct_scope_begin();
    ct_dataset *ds = NULL;
    ct_tensor *im = ct_idx_load(images_path);
    if (!im) goto done;
    ct_tensor *lb = ct_idx_load(labels_path);
    if (!lb) goto done;
    if (ct_get_dtype(im) != CT_U8 || ct_ndim(im) != 3) {
        ct__error(CT_ERR_FORMAT, "idx_dataset_new: %s: images must be uint8 [N, H, W], got %s %s", images_path,
                  ct_dtype_name(ct_get_dtype(im)), ct__tshape(im));
        goto done;
    }
    if (!ct_dtype_is_integral(ct_get_dtype(lb), false) || ct_ndim(lb) != 1) {
        ct__error(CT_ERR_FORMAT, "idx_dataset_new: %s: labels must be integers [N], got %s %s", labels_path,
                  ct_dtype_name(ct_get_dtype(lb)), ct__tshape(lb));
        goto done;
    }
    if (ct_size(lb, 0) != ct_size(im, 0)) {
        ct__error(CT_ERR_FORMAT, "idx_dataset_new: %lld images (%s) but %lld labels (%s)",
                  (long long)ct_size(im, 0), images_path, (long long)ct_size(lb, 0), labels_path);
        goto done;
    }
    ct_tensor *lb64 = ct_to_dtype(lb, CT_I64);
    if (!lb64) goto done;
    idx_ds *d = calloc(1, sizeof *d);
    if (!d) { ct__error(CT_ERR_OOM, "idx_dataset_new: out of memory"); goto done; }
    d->images = ct_retain(im);
    d->labels = ct_retain(lb64);
    d->dt = image_dtype;
    d->n = ct_size(im, 0);
    ds = ct_dataset_new(&ids_vt, d);
    if (!ds) ids_free(d);
done:
    ct_scope_end(s);
    return ds;
}
