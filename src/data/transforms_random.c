/* transforms_random.c -- transform objects (torchvision.transforms):
 * Compose, ToTensor, Normalize, Resize, CenterCrop, Pad, RandomCrop,
 * RandomResizedCrop, RandomHorizontalFlip, ColorJitter, RandomRotation and
 * user transforms, with seeded randomness (see data.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "transforms_impl.h"

/* Weak default so the library links without the DataLoader's definition. */
__attribute__((weak)) CT_API uint64_t ct_data_current_seed(void) { return 0; }

typedef enum {
    TF_USER, TF_COMPOSE, TF_TO_TENSOR, TF_NORMALIZE, TF_RESIZE, TF_CENTER_CROP, TF_PAD,
    TF_RANDOM_CROP, TF_RANDOM_RESIZED_CROP, TF_HFLIP, TF_COLOR_JITTER, TF_ROTATION
} tf_kind;

/* Parameters (calloc'ed so padding bytes are zero: the salt hashes them). */
typedef struct tf_params {
    int64_t h, w;
    int64_t padding[4];
    int has_padding, pad_if_needed, mode, n;
    double fill, a, b, c, d;
    double mean[16], std[16];
} tf_params;

struct ct_transform {
    tf_kind kind;
    tf_params p;
    uint64_t salt;
    double *mean, *std;          /* Normalize with n > 16 */
    ct_transform **children;     /* Compose */
    int nchildren;
    ct_transform_fn fn;          /* user */
    void *self;
    void (*free_fn)(void *);
};

/* ---- the private generator ------------------------------------------------ */
typedef struct { uint64_t s; } tf_rng;
static uint64_t rng_next(tf_rng *r) {
    uint64_t z = r->s;
    r->s += 0x9E3779B97F4A7C15ull;
    return ct__tf_splitmix(z);
}
static double rng_u(tf_rng *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }
static double rng_uniform(tf_rng *r, double a, double b) { return a + (b - a) * rng_u(r); }
/* uniform integer in [a, b), b > a; rejects the 2^64 mod n lowest values */
static int64_t rng_randint(tf_rng *r, int64_t a, int64_t b) {
    uint64_t n = (uint64_t)(b - a), thr = (0 - n) % n, x;
    do x = rng_next(r); while (x < thr);
    return a + (int64_t)(x % n);
}

/* ---- objects -------------------------------------------------------------- */
static ct_transform *tf_new(tf_kind kind, const tf_params *p) {
    ct_transform *t = calloc(1, sizeof *t);
    if (!t) return ct__error(CT_ERR_OOM, "transform: out of memory");
    t->kind = kind;
    if (p) memcpy(&t->p, p, sizeof *p);
    /* salt: FNV-1a over the kind and the parameter bytes */
    uint64_t hsh = 1469598103934665603ull;
    const unsigned char *bytes = (const unsigned char *)&t->p;
    hsh = (hsh ^ (uint64_t)kind) * 1099511628211ull;
    for (size_t i = 0; i < sizeof t->p; i++) hsh = (hsh ^ bytes[i]) * 1099511628211ull;
    t->salt = hsh;
    return t;
}

void ct_transform_free(ct_transform *t) {
    if (!t) return;
    for (int i = 0; i < t->nchildren; i++) ct_transform_free(t->children[i]);
    free(t->children);
    if (t->free_fn) t->free_fn(t->self);
    free(t->mean);
    free(t->std);
    free(t);
}

ct_transform *ct_transform_new(ct_transform_fn fn, void *self, void (*free_fn)(void *self)) {
    if (!fn) return ct__error(CT_ERR_NULL, "transform_new: fn is NULL");
    ct_transform *t = tf_new(TF_USER, NULL);
    if (!t) return NULL;
    t->fn = fn;
    t->self = self;
    t->free_fn = free_fn;
    return t;
}

ct_transform *ct_transform_compose(ct_transform *const *ts, int n) {
    if (n < 0 || (n > 0 && !ts)) return ct__error(CT_ERR_ARG, "Compose: invalid list of %d transforms", n);
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            for (int k = 0; k < n; k++) ct_transform_free(ts[k]);
            return ct__error(CT_ERR_NULL, "Compose: transform %d is NULL", i);
        }
    ct_transform *t = tf_new(TF_COMPOSE, NULL);
    if (t && n) t->children = malloc(sizeof *t->children * (size_t)n);
    if (!t || (n && !t->children)) {
        for (int k = 0; k < n; k++) ct_transform_free(ts[k]);
        ct_transform_free(t);
        return ct__error(CT_ERR_OOM, "Compose: out of memory");
    }
    memcpy(t->children, ts, sizeof *t->children * (size_t)n);
    t->nchildren = n;
    return t;
}

ct_transform *ct_transform_to_tensor(void) { return tf_new(TF_TO_TENSOR, NULL); }

ct_transform *ct_transform_normalize(const double *mean, const double *std, int n) {
    if (!mean || !std) return ct__error(CT_ERR_NULL, "Normalize: mean or std is NULL");
    if (n <= 0) return ct__error(CT_ERR_ARG, "Normalize: %d values (need >= 1)", n);
    for (int i = 0; i < n; i++)
        if (std[i] == 0 || !isfinite(std[i]) || !isfinite(mean[i]))
            return ct__error(CT_ERR_ARG, "Normalize: std[%d] = %g / mean[%d] = %g is invalid "
                             "(std must be finite and non-zero)", i, std[i], i, mean[i]);
    tf_params p = {0};
    p.n = n;
    ct_transform *t = tf_new(TF_NORMALIZE, &p);
    if (!t) return NULL;
    t->mean = malloc(sizeof(double) * (size_t)n);
    t->std = malloc(sizeof(double) * (size_t)n);
    if (!t->mean || !t->std) { ct_transform_free(t); return ct__error(CT_ERR_OOM, "Normalize: out of memory"); }
    memcpy(t->mean, mean, sizeof(double) * (size_t)n);
    memcpy(t->std, std, sizeof(double) * (size_t)n);
    return t;
}

static bool interp_ok(const char *op, ct_interp_mode m, bool cubic) {
    if (m == CT_INTERP_NEAREST || m == CT_INTERP_BILINEAR || (cubic && m == CT_INTERP_BICUBIC)) return true;
    ct__error(CT_ERR_ARG, "%s: unsupported interpolation mode %d", op, (int)m);
    return false;
}

ct_transform *ct_transform_resize(int64_t h, int64_t w, ct_interp_mode mode) {
    if (h <= 0) return ct__error(CT_ERR_ARG, "Resize: size %lld must be positive", (long long)h);
    if (!interp_ok("Resize", mode, true)) return NULL;
    tf_params p = {0};
    p.h = h; p.w = w > 0 ? w : 0; p.mode = mode;
    return tf_new(TF_RESIZE, &p);
}

ct_transform *ct_transform_center_crop(int64_t h, int64_t w) {
    if (h <= 0 || w <= 0)
        return ct__error(CT_ERR_ARG, "CenterCrop: size [%lld, %lld] must be positive", (long long)h, (long long)w);
    tf_params p = {0};
    p.h = h; p.w = w;
    return tf_new(TF_CENTER_CROP, &p);
}

static bool padding_ok(const char *op, const int64_t *padding, ct_padding_mode mode) {
    if ((unsigned)mode > CT_PADDING_SYMMETRIC) {
        ct__error(CT_ERR_ARG, "%s: invalid padding mode %d", op, (int)mode);
        return false;
    }
    for (int k = 0; padding && k < 4; k++)
        if (padding[k] < 0 || padding[k] > CT_IMAGE_MAX_SIDE) {
            ct__error(CT_ERR_ARG, "%s: padding[%d] = %lld must be in [0, %d]", op, k,
                      (long long)padding[k], CT_IMAGE_MAX_SIDE);
            return false;
        }
    return true;
}

ct_transform *ct_transform_pad(const int64_t padding[4], double fill, ct_padding_mode mode) {
    if (!padding) return ct__error(CT_ERR_NULL, "Pad: padding is NULL");
    if (!padding_ok("Pad", padding, mode)) return NULL;
    tf_params p = {0};
    memcpy(p.padding, padding, sizeof p.padding);
    p.has_padding = 1; p.fill = fill; p.mode = mode;
    return tf_new(TF_PAD, &p);
}

ct_transform *ct_transform_random_crop(int64_t h, int64_t w, const int64_t padding[4],
                                       bool pad_if_needed, double fill, ct_padding_mode mode) {
    if (h <= 0 || w <= 0)
        return ct__error(CT_ERR_ARG, "RandomCrop: size [%lld, %lld] must be positive", (long long)h, (long long)w);
    if (!padding_ok("RandomCrop", padding, mode)) return NULL;
    tf_params p = {0};
    p.h = h; p.w = w;
    if (padding) { memcpy(p.padding, padding, sizeof p.padding); p.has_padding = 1; }
    p.pad_if_needed = pad_if_needed; p.fill = fill; p.mode = mode;
    return tf_new(TF_RANDOM_CROP, &p);
}

ct_transform *ct_transform_random_resized_crop(int64_t h, int64_t w, double scale_min,
                                               double scale_max, double ratio_min, double ratio_max,
                                               ct_interp_mode mode) {
    if (h <= 0 || w <= 0)
        return ct__error(CT_ERR_ARG, "RandomResizedCrop: size [%lld, %lld] must be positive",
                         (long long)h, (long long)w);
    if (!(scale_min >= 0 && scale_min <= scale_max && isfinite(scale_max)) ||
        !(ratio_min > 0 && ratio_min <= ratio_max && isfinite(ratio_max)))
        return ct__error(CT_ERR_ARG, "RandomResizedCrop: need 0 <= scale (%g, %g) ordered and "
                         "0 < ratio (%g, %g) ordered", scale_min, scale_max, ratio_min, ratio_max);
    if (!interp_ok("RandomResizedCrop", mode, true)) return NULL;
    tf_params p = {0};
    p.h = h; p.w = w; p.a = scale_min; p.b = scale_max; p.c = ratio_min; p.d = ratio_max; p.mode = mode;
    return tf_new(TF_RANDOM_RESIZED_CROP, &p);
}

ct_transform *ct_transform_random_horizontal_flip(double p_) {
    if (!(p_ >= 0 && p_ <= 1))
        return ct__error(CT_ERR_ARG, "RandomHorizontalFlip: p = %g is not in [0, 1]", p_);
    tf_params p = {0};
    p.a = p_;
    return tf_new(TF_HFLIP, &p);
}

ct_transform *ct_transform_color_jitter(double brightness, double contrast, double saturation,
                                        double hue) {
    if (!(brightness >= 0 && contrast >= 0 && saturation >= 0) || !isfinite(brightness) ||
        !isfinite(contrast) || !isfinite(saturation))
        return ct__error(CT_ERR_ARG, "ColorJitter: brightness %g, contrast %g, saturation %g must "
                         "be finite and >= 0", brightness, contrast, saturation);
    if (!(hue >= 0 && hue <= 0.5))
        return ct__error(CT_ERR_ARG, "ColorJitter: hue %g is not in [0, 0.5]", hue);
    tf_params p = {0};
    p.a = brightness; p.b = contrast; p.c = saturation; p.d = hue;
    return tf_new(TF_COLOR_JITTER, &p);
}

ct_transform *ct_transform_random_rotation(double min_deg, double max_deg, ct_interp_mode mode,
                                           double fill) {
    if (!(min_deg <= max_deg) || !isfinite(min_deg) || !isfinite(max_deg) || !isfinite(fill))
        return ct__error(CT_ERR_ARG, "RandomRotation: degrees (%g, %g) must be finite and ordered",
                         min_deg, max_deg);
    if (!interp_ok("RandomRotation", mode, false)) return NULL;
    tf_params p = {0};
    p.a = min_deg; p.b = max_deg; p.mode = mode; p.fill = fill;
    return tf_new(TF_ROTATION, &p);
}

/* ---- application ---------------------------------------------------------- */
static ct_tensor *same_ref(ct_tensor *img) { return ct__register(ct_retain(img)); }

static ct_tensor *random_crop(const ct_transform *t, ct_tensor *img, tf_rng *rng) {
    const tf_params *p = &t->p;
    if (!img) return NULL;
    if (img->ndim < 2)
        return ct__error(CT_ERR_SHAPE, "RandomCrop: expected an image [..., H, W], got %s", ct__tshape(img));
    ct_tensor *x = img;
    if (p->has_padding) x = ct_image_pad(x, p->padding, p->fill, (ct_padding_mode)p->mode);
    if (!x) return NULL;
    int64_t H = x->sizes[x->ndim - 2], W = x->sizes[x->ndim - 1];
    if (p->pad_if_needed && W < p->w) {
        int64_t d = p->w - W;
        x = ct_image_pad(x, (const int64_t[]){d, 0, d, 0}, p->fill, (ct_padding_mode)p->mode);
        if (!x) return NULL;
        W = x->sizes[x->ndim - 1];
    }
    if (p->pad_if_needed && H < p->h) {
        int64_t d = p->h - H;
        x = ct_image_pad(x, (const int64_t[]){0, d, 0, d}, p->fill, (ct_padding_mode)p->mode);
        if (!x) return NULL;
        H = x->sizes[x->ndim - 2];
    }
    if (H < p->h || W < p->w)
        return ct__error(CT_ERR_SHAPE, "RandomCrop: required crop size (%lld, %lld) is larger than "
                         "the input image size (%lld, %lld)", (long long)p->h, (long long)p->w,
                         (long long)H, (long long)W);
    if (H == p->h && W == p->w) return x == img ? same_ref(img) : x;
    int64_t top = rng_randint(rng, 0, H - p->h + 1);
    int64_t left = rng_randint(rng, 0, W - p->w + 1);
    return ct_image_crop(x, top, left, p->h, p->w);
}

static ct_tensor *random_resized_crop(const ct_transform *t, ct_tensor *img, tf_rng *rng) {
    const tf_params *p = &t->p;
    if (!img) return NULL;
    if (img->ndim < 2)
        return ct__error(CT_ERR_SHAPE, "RandomResizedCrop: expected an image [..., H, W], got %s",
                         ct__tshape(img));
    int64_t H = img->sizes[img->ndim - 2], W = img->sizes[img->ndim - 1];
    if (H <= 0 || W <= 0) return ct__error(CT_ERR_SHAPE, "RandomResizedCrop: empty image %s", ct__tshape(img));
    double area = (double)H * (double)W, lr0 = log(p->c), lr1 = log(p->d);
    int64_t top = -1, left = 0, ch = 0, cw = 0;
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * rng_uniform(rng, p->a, p->b);
        double ar = exp(rng_uniform(rng, lr0, lr1));
        int64_t w = (int64_t)nearbyint(sqrt(target * ar));
        int64_t h = (int64_t)nearbyint(sqrt(target / ar));
        if (0 < w && w <= W && 0 < h && h <= H) {
            top = rng_randint(rng, 0, H - h + 1);
            left = rng_randint(rng, 0, W - w + 1);
            ch = h; cw = w;
            break;
        }
    }
    if (top < 0) {
        double in_ratio = (double)W / (double)H;
        if (in_ratio < p->c) { cw = W; ch = (int64_t)nearbyint((double)cw / p->c); }
        else if (in_ratio > p->d) { ch = H; cw = (int64_t)nearbyint((double)ch * p->d); }
        else { cw = W; ch = H; }
        top = (H - ch) / 2;
        left = (W - cw) / 2;
    }
    return ct_image_resize(ct_image_crop(img, top, left, ch, cw), p->h, p->w, (ct_interp_mode)p->mode);
}

static ct_tensor *color_jitter(const ct_transform *t, ct_tensor *img, tf_rng *rng) {
    const tf_params *p = &t->p;
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i >= 1; i--) {
        int j = (int)rng_randint(rng, 0, i + 1);
        int tmp = order[i]; order[i] = order[j]; order[j] = tmp;
    }
    double f[4] = {0};
    bool on[4] = {p->a > 0, p->b > 0, p->c > 0, p->d > 0};
    const double amount[4] = {p->a, p->b, p->c, p->d};
    for (int k = 0; k < 3; k++)
        if (on[k]) f[k] = rng_uniform(rng, fmax(0.0, 1.0 - amount[k]), 1.0 + amount[k]);
    if (on[3]) f[3] = rng_uniform(rng, -p->d, p->d);
    ct_tensor *x = img;
    for (int k = 0; k < 4 && x; k++) {
        int c = order[k];
        if (!on[c]) continue;
        switch (c) {
        case 0: x = ct_image_adjust_brightness(x, f[0]); break;
        case 1: x = ct_image_adjust_contrast(x, f[1]); break;
        case 2: x = ct_image_adjust_saturation(x, f[2]); break;
        default: x = ct_image_adjust_hue(x, f[3]); break;
        }
    }
    return x == img ? same_ref(img) : x;
}

static ct_tensor *run(const ct_transform *t, ct_tensor *img, uint64_t seed) {
    tf_rng rng = {seed};
    const tf_params *p = &t->p;
    switch (t->kind) {
    case TF_USER: return t->fn(t->self, img, seed);
    case TF_COMPOSE: {
        ct_tensor *x = img;
        for (int i = 0; i < t->nchildren && x; i++)
            x = ct_transform_apply_seeded(t->children[i], x, ct__tf_mix(seed, (uint64_t)i));
        return x == img ? same_ref(img) : x;
    }
    case TF_TO_TENSOR: return ct_image_to_tensor(img);
    case TF_NORMALIZE: {
        if (p->n == 1 && img->ndim >= 3 && img->sizes[img->ndim - 3] != 1) {
            /* one value for every channel */
            int64_t C = img->sizes[img->ndim - 3];
            if (C > 4096) return ct__error(CT_ERR_SHAPE, "Normalize: too many channels (%lld)", (long long)C);
            double *m = malloc(sizeof(double) * (size_t)C), *s = malloc(sizeof(double) * (size_t)C);
            ct_tensor *out = NULL;
            if (m && s) {
                for (int64_t c = 0; c < C; c++) { m[c] = t->mean[0]; s[c] = t->std[0]; }
                out = ct_image_normalize(img, m, s, (int)C);
            } else {
                ct__error(CT_ERR_OOM, "Normalize: out of memory");
            }
            free(m); free(s);
            return out;
        }
        return ct_image_normalize(img, t->mean, t->std, p->n);
    }
    case TF_RESIZE: return ct_image_resize(img, p->h, p->w, (ct_interp_mode)p->mode);
    case TF_CENTER_CROP: return ct_image_center_crop(img, p->h, p->w);
    case TF_PAD: return ct_image_pad(img, p->padding, p->fill, (ct_padding_mode)p->mode);
    case TF_RANDOM_CROP: return random_crop(t, img, &rng);
    case TF_RANDOM_RESIZED_CROP: return random_resized_crop(t, img, &rng);
    case TF_HFLIP: return rng_u(&rng) < p->a ? ct_image_hflip(img) : same_ref(img);
    case TF_COLOR_JITTER: return color_jitter(t, img, &rng);
    case TF_ROTATION:
        return ct_image_rotate(img, rng_uniform(&rng, p->a, p->b), (ct_interp_mode)p->mode, p->fill);
    }
    return ct__error(CT_ERR_RUNTIME, "transform: unknown kind %d", (int)t->kind);
}

ct_tensor *ct_transform_apply_seeded(ct_transform *t, ct_tensor *img, uint64_t seed) {
    if (!t) return ct__error(CT_ERR_NULL, "transform_apply: transform is NULL");
    if (!img) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *out = run(t, img, ct__tf_mix(seed, t->salt));
    if (out) ct_retain(out);
    else if (ct_last_error_code() == CT_OK)
        ct__error(CT_ERR_RUNTIME, "transform_apply: a user transform returned NULL without an error");
    ct_scope_end(s);
    return out ? ct__register(out) : NULL;
}

ct_tensor *ct_transform_apply(ct_transform *t, ct_tensor *img) {
    return ct_transform_apply_seeded(t, img, ct_data_current_seed());
}
