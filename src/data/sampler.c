/* sampler.c -- samplers: index sequences per epoch, reproducible from
 * (arguments, seed, epoch).  See data.h for each documented order. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"

typedef enum { S_SEQ, S_RANDOM, S_WEIGHTED, S_SUBSET, S_DIST, S_BATCH } skind;

struct ct_sampler {
    atomic_long refcount;
    skind kind;
    int64_t n, num_samples, epoch;
    bool replacement, shuffle, drop_last;
    uint64_t seed;
    double *weights;   /* weighted */
    int64_t *indices;  /* subset */
    int replicas, rank;
    ct_sampler *base;  /* batch */
    int64_t batch_size;
};

/* n elements of es bytes each for op (never 0 bytes); NULL + error when
 * n * es overflows (or exceeds PTRDIFF_MAX) or malloc fails. */
static void *arr_alloc(const char *op, int64_t n, size_t es) {
    size_t nb;
    if (!ct__array_bytes(n ? n : 1, es, &nb) || nb > PTRDIFF_MAX)
        return ct__error(CT_ERR_OVERFLOW, "%s: %lld elements of %zu bytes overflow the address space",
                         op, (long long)n, es);
    void *p = malloc(nb);
    if (!p) ct__error(CT_ERR_OOM, "%s: out of memory (%lld elements of %zu bytes)", op, (long long)n, es);
    return p;
}

static ct_sampler *snew(skind k, int64_t n) {
    ct_sampler *s = calloc(1, sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "sampler: out of memory");
    atomic_init(&s->refcount, 1);
    s->kind = k;
    s->n = n;
    s->num_samples = n;
    return s;
}

ct_sampler *ct_sequential_sampler_new(int64_t n) {
    if (n < 0) return ct__error(CT_ERR_ARG, "sequential_sampler_new: negative length %lld", (long long)n);
    return snew(S_SEQ, n);
}

ct_sampler *ct_random_sampler_new(int64_t n, bool replacement, int64_t num_samples, uint64_t seed) {
    if (n < 0) return ct__error(CT_ERR_ARG, "random_sampler_new: negative length %lld", (long long)n);
    if (num_samples < 0) num_samples = n;
    if (num_samples > 0 && n == 0)
        return ct__error(CT_ERR_ARG, "random_sampler_new: cannot draw %lld samples from an empty dataset",
                         (long long)num_samples);
    ct_sampler *s = snew(S_RANDOM, n);
    if (!s) return NULL;
    s->replacement = replacement;
    s->num_samples = num_samples;
    s->seed = seed;
    return s;
}

ct_sampler *ct_weighted_random_sampler_new(const double *w, int64_t n, int64_t num_samples, bool replacement,
                                           uint64_t seed) {
    if (!w && n) return ct__error(CT_ERR_NULL, "weighted_random_sampler_new: weights is NULL");
    if (n < 1) return ct__error(CT_ERR_ARG, "weighted_random_sampler_new: needs at least one weight (got %lld)", (long long)n);
    if (num_samples < 0) return ct__error(CT_ERR_ARG, "weighted_random_sampler_new: num_samples %lld < 0", (long long)num_samples);
    int64_t nz = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(w[i]) || w[i] < 0)
            return ct__error(CT_ERR_ARG, "weighted_random_sampler_new: weights[%lld] = %g is not a finite "
                             "non-negative number", (long long)i, w[i]);
        nz += w[i] > 0;
    }
    if (nz == 0) return ct__error(CT_ERR_ARG, "weighted_random_sampler_new: all weights are zero");
    if (!replacement && num_samples > nz)
        return ct__error(CT_ERR_ARG, "weighted_random_sampler_new: cannot draw %lld samples without replacement "
                         "from %lld nonzero weights", (long long)num_samples, (long long)nz);
    ct_sampler *s = snew(S_WEIGHTED, n);
    if (!s) return NULL;
    s->weights = arr_alloc("weighted_random_sampler_new", n, sizeof *s->weights);
    if (!s->weights) { free(s); return NULL; }
    memcpy(s->weights, w, sizeof *w * (size_t)n);
    s->num_samples = num_samples;
    s->replacement = replacement;
    s->seed = seed;
    return s;
}

ct_sampler *ct_subset_random_sampler_new(const int64_t *indices, int64_t n, uint64_t seed) {
    if (n < 0) return ct__error(CT_ERR_ARG, "subset_random_sampler_new: negative length %lld", (long long)n);
    if (!indices && n) return ct__error(CT_ERR_NULL, "subset_random_sampler_new: indices is NULL");
    ct_sampler *s = snew(S_SUBSET, n);
    if (!s) return NULL;
    s->indices = arr_alloc("subset_random_sampler_new", n, sizeof *s->indices);
    if (!s->indices) { free(s); return NULL; }
    if (n) memcpy(s->indices, indices, sizeof *indices * (size_t)n);
    s->seed = seed;
    return s;
}

ct_sampler *ct_distributed_sampler_new(int64_t n, int R, int rank, bool shuffle, uint64_t seed, bool drop_last) {
    if (n < 0) return ct__error(CT_ERR_ARG, "distributed_sampler_new: negative length %lld", (long long)n);
    if (R < 1) return ct__error(CT_ERR_ARG, "distributed_sampler_new: num_replicas %d < 1", R);
    if (rank < 0 || rank >= R)
        return ct__error(CT_ERR_ARG, "distributed_sampler_new: invalid rank %d, rank should be in the interval [0, %d]",
                         rank, R - 1);
    ct_sampler *s = snew(S_DIST, n);
    if (!s) return NULL;
    s->replicas = R;
    s->rank = rank;
    s->shuffle = shuffle;
    s->seed = seed;
    s->drop_last = drop_last;
    if (drop_last && n % R != 0) s->num_samples = (n - R + R - 1) / R; /* ceil((n - R) / R), n - R may be < 0 */
    else s->num_samples = n / R + (n % R != 0);                          /* ceil(n / R), no overflow */
    if (s->num_samples < 0) s->num_samples = 0;
    int64_t total;
    if (!ct__mul_i64(s->num_samples, R, &total)) {
        free(s);
        return ct__error(CT_ERR_OVERFLOW, "distributed_sampler_new: length %lld padded to a multiple of %d "
                         "replicas overflows int64", (long long)n, R);
    }
    return s;
}

ct_sampler *ct_batch_sampler_new(ct_sampler *base, int64_t batch_size, bool drop_last) {
    if (!base) return ct__error(CT_ERR_NULL, "batch_sampler_new: base sampler is NULL");
    if (base->kind == S_BATCH) return ct__error(CT_ERR_ARG, "batch_sampler_new: the base is already a batch sampler");
    if (batch_size < 1) return ct__error(CT_ERR_ARG, "batch_sampler_new: batch_size should be a positive integer, got %lld",
                                         (long long)batch_size);
    ct_sampler *s = snew(S_BATCH, 0);
    if (!s) return NULL;
    s->base = ct_sampler_retain(base);
    s->batch_size = batch_size;
    s->drop_last = drop_last;
    return s;
}

ct_sampler *ct_sampler_retain(ct_sampler *s) {
    if (s) atomic_fetch_add(&s->refcount, 1);
    return s;
}

void ct_sampler_release(ct_sampler *s) {
    if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
    ct_sampler_release(s->base);
    free(s->weights);
    free(s->indices);
    free(s);
}

void ct_sampler_set_epoch(ct_sampler *s, int64_t epoch) {
    if (!s) return;
    s->epoch = epoch;
    if (s->base) ct_sampler_set_epoch(s->base, epoch);
}

bool ct_sampler_is_batch(const ct_sampler *s) { return s && s->kind == S_BATCH; }

static int64_t plain_len(const ct_sampler *s) { return s->kind == S_SUBSET ? s->n : s->num_samples; }

int64_t ct_sampler_len(ct_sampler *s) {
    if (!s) { ct__error(CT_ERR_NULL, "sampler_len: sampler is NULL"); return -1; }
    if (s->kind != S_BATCH) return plain_len(s);
    int64_t n = plain_len(s->base);
    return n / s->batch_size + (!s->drop_last && n % s->batch_size != 0); /* no overflow near INT64_MAX */
}

typedef struct { double key; int64_t i; } wkey;
static int wkey_cmp(const void *a, const void *b) {
    const wkey *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1; /* decreasing */
    return x->i < y->i ? -1 : x->i > y->i;
}

static int64_t plain_indices(ct_sampler *s, int64_t *o) {
    int64_t n = s->n;
    uint64_t e = (uint64_t)s->epoch;
    switch (s->kind) {
    case S_SEQ:
        for (int64_t i = 0; i < n; i++) o[i] = i;
        return n;
    case S_RANDOM: {
        int64_t m = s->num_samples;
        if (s->replacement) {
            ct__drng r;
            ct__drng_init(&r, ct_data_mix(s->seed, e));
            for (int64_t i = 0; i < m; i++) o[i] = (int64_t)ct__drng_below(&r, (uint64_t)n);
            return m;
        }
        int64_t *perm = arr_alloc("sampler_indices", n, sizeof *perm);
        if (!perm) return -1;
        for (int64_t k = 0, off = 0; off < m; k++) {
            ct_randperm_seeded(n, s->seed, e + ((uint64_t)k << 32), perm);
            int64_t take = m - off < n ? m - off : n;
            memcpy(o + off, perm, sizeof *perm * (size_t)take);
            off += take;
        }
        free(perm);
        return m;
    }
    case S_WEIGHTED: {
        int64_t m = s->num_samples;
        ct__drng r;
        ct__drng_init(&r, ct_data_mix(s->seed, e));
        if (s->replacement) {
            double *cdf = arr_alloc("sampler_indices", n, sizeof *cdf);
            if (!cdf) return -1;
            double acc = 0;
            for (int64_t i = 0; i < n; i++) cdf[i] = acc += s->weights[i];
            for (int64_t k = 0; k < m; k++) {
                double u = ct__drng_f64(&r) * acc;
                int64_t lo = 0, hi = n - 1; /* first i with cdf[i] > u */
                while (lo < hi) {
                    int64_t mid = (lo + hi) / 2;
                    if (cdf[mid] > u) hi = mid;
                    else lo = mid + 1;
                }
                while (lo > 0 && s->weights[lo] == 0) lo--; /* never a zero weight */
                o[k] = lo;
            }
            free(cdf);
            return m;
        }
        wkey *keys = arr_alloc("sampler_indices", n, sizeof *keys);
        if (!keys) return -1;
        for (int64_t i = 0; i < n; i++) {
            double u = ct__drng_f64(&r);
            keys[i].i = i;
            /* log(u^(1/w)) = log(u)/w, monotone; zero weights last */
            keys[i].key = s->weights[i] > 0 ? log(u > 0 ? u : 1e-300) / s->weights[i] : -INFINITY;
        }
        qsort(keys, (size_t)n, sizeof *keys, wkey_cmp);
        for (int64_t k = 0; k < m; k++) o[k] = keys[k].i;
        free(keys);
        return m;
    }
    case S_SUBSET: {
        int64_t *perm = arr_alloc("sampler_indices", n, sizeof *perm);
        if (!perm) return -1;
        ct_randperm_seeded(n, s->seed, e, perm);
        for (int64_t i = 0; i < n; i++) o[i] = s->indices[perm[i]];
        free(perm);
        return n;
    }
    case S_DIST: {
        int64_t R = s->replicas, total = s->num_samples * R;
        int64_t *ord = arr_alloc("sampler_indices", n, sizeof *ord);
        if (!ord) return -1;
        if (s->shuffle) ct_randperm_seeded(n, s->seed, e, ord);
        else for (int64_t i = 0; i < n; i++) ord[i] = i;
        int64_t k = 0;
        for (int64_t p = s->rank; p < total; p += R) o[k++] = ord[p % n]; /* padding repeats from the start */
        free(ord);
        return k;
    }
    default: return -1;
    }
}

int64_t ct_sampler_indices(ct_sampler *s, int64_t **out) {
    if (!s || !out) { ct__error(CT_ERR_NULL, "sampler_indices: NULL argument"); return -1; }
    *out = NULL;
    ct_sampler *p = s->kind == S_BATCH ? s->base : s;
    int64_t m = plain_len(p);
    if (m == 0) return 0;
    /* checked before any allocation: 8 * m wraps for m >= 2^61 */
    int64_t *o = arr_alloc("sampler_indices", m, sizeof *o);
    if (!o) return -1;
    int64_t k = plain_indices(p, o);
    if (k < 0) { free(o); return -1; }
    if (s->kind == S_BATCH && s->drop_last) k = k / s->batch_size * s->batch_size;
    if (k == 0) { free(o); return 0; }
    *out = o;
    return k;
}

int64_t ct_sampler_batches(ct_sampler *s, int64_t **indices, int64_t **offsets) {
    if (!s || !indices || !offsets) { ct__error(CT_ERR_NULL, "sampler_batches: NULL argument"); return -1; }
    *indices = NULL;
    *offsets = NULL;
    int64_t k = ct_sampler_indices(s, indices);
    if (k < 0) return -1;
    int64_t bs = s->kind == S_BATCH ? s->batch_size : 1;
    int64_t nb = (k + bs - 1) / bs;
    int64_t *off = malloc(sizeof *off * (size_t)(nb + 1));
    if (!off) { free(*indices); *indices = NULL; ct__error(CT_ERR_OOM, "sampler_batches: out of memory"); return -1; }
    for (int64_t b = 0; b < nb; b++) off[b] = b * bs;
    off[nb] = k;
    *offsets = off;
    return nb;
}
