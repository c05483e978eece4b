/* dataset.c -- TensorDataset, ConcatDataset, Subset, random_split and the
 * seeded permutation behind every shuffle of the data subsystem. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"

/* ---- seeds -------------------------------------------------------------- */
static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t ct_data_mix(uint64_t a, uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

void ct_randperm_seeded(int64_t n, uint64_t seed, uint64_t stream, int64_t *out) {
    if (n <= 0 || !out) return;
    for (int64_t i = 0; i < n; i++) out[i] = i;
    ct__drng r;
    ct__drng_init(&r, ct_data_mix(seed, stream));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)ct__drng_below(&r, (uint64_t)i + 1);
        int64_t t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

char *ct__ds_read_file(const char *what, const char *path, size_t *size) {
    if (!path) return ct__error(CT_ERR_NULL, "%s: path is NULL", what);
    FILE *f = fopen(path, "rb");
    if (!f) return ct__error(CT_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            size_t nc = cap ? cap * 2 : 65536 * 2;
            char *nb = realloc(buf, nc + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return ct__error(CT_ERR_OOM, "%s: out of memory reading '%s'", what, path);
            }
            buf = nb;
            cap = nc;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        free(buf);
        fclose(f);
        return ct__error(CT_ERR_IO, "%s: read error on '%s'", what, path);
    }
    fclose(f);
    buf[n] = 0;
    *size = n;
    return buf;
}

/* ---- TensorDataset ------------------------------------------------------ */
typedef struct {
    int n;
    char **names;
    ct_tensor **ts;
    int64_t len;
} tensor_ds;

static int64_t tds_len(void *self) { return ((tensor_ds *)self)->len; }
static ct_status tds_get(void *self, int64_t index, ct_sample *out) {
    tensor_ds *d = self;
    ct_scope s = ct_scope_begin();
    ct_status st = CT_OK;
    for (int k = 0; k < d->n && !st; k++) {
        ct_tensor *v = ct_select(d->ts[k], 0, index);
        st = ct_sample_set(out, d->names[k], v);
    }
    ct_scope_end(s);
    return st;
}
static void tds_free(void *self) {
    tensor_ds *d = self;
    for (int k = 0; k < d->n; k++) {
        free(d->names[k]);
        ct_release(d->ts[k]);
    }
    free(d->names);
    free(d->ts);
    free(d);
}
static const ct_dataset_vtable tds_vt = {.len = tds_len, .get = tds_get, .free = tds_free};

ct_dataset *ct_tensor_dataset_new(const char *const *names, ct_tensor *const *tensors, int n) {
    if (!names || !tensors) return ct__error(CT_ERR_NULL, "tensor_dataset_new: names or tensors is NULL");
    if (n < 1) return ct__error(CT_ERR_ARG, "tensor_dataset_new: needs at least one tensor (got %d)", n);
    for (int k = 0; k < n; k++) {
        if (!names[k] || !tensors[k])
            return ct__error(CT_ERR_NULL, "tensor_dataset_new: name or tensor %d is NULL", k);
        if (ct_ndim(tensors[k]) < 1)
            return ct__error(CT_ERR_SHAPE, "tensor_dataset_new: tensor %d ('%s') is 0-dim", k, names[k]);
        if (ct_size(tensors[k], 0) != ct_size(tensors[0], 0))
            return ct__error(CT_ERR_SHAPE, "tensor_dataset_new: size mismatch between tensors: '%s' has "
                             "%lld rows, '%s' has %lld", names[0], (long long)ct_size(tensors[0], 0),
                             names[k], (long long)ct_size(tensors[k], 0));
    }
    tensor_ds *d = calloc(1, sizeof *d);
    if (!d) return ct__error(CT_ERR_OOM, "tensor_dataset_new: out of memory");
    d->names = calloc((size_t)n, sizeof *d->names);
    d->ts = calloc((size_t)n, sizeof *d->ts);
    if (!d->names || !d->ts) { tds_free(d); return ct__error(CT_ERR_OOM, "tensor_dataset_new: out of memory"); }
    for (int k = 0; k < n; k++) {
        d->names[k] = strdup(names[k]);
        d->ts[k] = ct_retain(tensors[k]);
        d->n = k + 1;
        if (!d->names[k]) { tds_free(d); return ct__error(CT_ERR_OOM, "tensor_dataset_new: out of memory"); }
    }
    d->len = ct_size(tensors[0], 0);
    ct_dataset *ds = ct_dataset_new(&tds_vt, d);
    if (!ds) tds_free(d);
    return ds;
}

/* ---- ConcatDataset ------------------------------------------------------ */
typedef struct {
    int n;
    ct_dataset **ds;
    int64_t *cum; /* cum[k] = total length of datasets 0..k */
} concat_ds;

static int64_t cds_len(void *self) {
    concat_ds *d = self;
    return d->n ? d->cum[d->n - 1] : 0;
}
static ct_status cds_get(void *self, int64_t index, ct_sample *out) {
    concat_ds *d = self;
    int lo = 0, hi = d->n - 1; /* first k with cum[k] > index */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (d->cum[mid] > index) hi = mid;
        else lo = mid + 1;
    }
    int64_t base = lo ? d->cum[lo - 1] : 0;
    return ct_dataset_get(d->ds[lo], index - base, out);
}
static void cds_free(void *self) {
    concat_ds *d = self;
    for (int k = 0; k < d->n; k++) ct_dataset_release(d->ds[k]);
    free(d->ds);
    free(d->cum);
    free(d);
}
static const ct_dataset_vtable cds_vt = {.len = cds_len, .get = cds_get, .free = cds_free};

ct_dataset *ct_concat_dataset_new(ct_dataset *const *datasets, int n) {
    if (!datasets) return ct__error(CT_ERR_NULL, "concat_dataset_new: datasets is NULL");
    if (n < 1) return ct__error(CT_ERR_ARG, "concat_dataset_new: needs at least one dataset (got %d)", n);
    for (int k = 0; k < n; k++) {
        if (!datasets[k]) return ct__error(CT_ERR_NULL, "concat_dataset_new: dataset %d is NULL", k);
        if (ct_dataset_is_iterable(datasets[k]))
            return ct__error(CT_ERR_ARG, "concat_dataset_new: dataset %d is iterable (map-style needed)", k);
    }
    concat_ds *d = calloc(1, sizeof *d);
    if (!d) return ct__error(CT_ERR_OOM, "concat_dataset_new: out of memory");
    d->ds = calloc((size_t)n, sizeof *d->ds);
    d->cum = calloc((size_t)n, sizeof *d->cum);
    if (!d->ds || !d->cum) { cds_free(d); return ct__error(CT_ERR_OOM, "concat_dataset_new: out of memory"); }
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        int64_t L = ct_dataset_len(datasets[k]);
        if (L < 0) { cds_free(d); return NULL; }
        if (total > INT64_MAX - L) { cds_free(d); return ct__error(CT_ERR_OVERFLOW, "concat_dataset_new: total length overflows"); }
        total += L;
        d->cum[k] = total;
        d->ds[k] = ct_dataset_retain(datasets[k]);
        d->n = k + 1;
    }
    ct_dataset *ds = ct_dataset_new(&cds_vt, d);
    if (!ds) cds_free(d);
    return ds;
}

/* ---- Subset ------------------------------------------------------------- */
typedef struct {
    ct_dataset *base;
    int64_t n;
    int64_t *idx;
} subset_ds;

static int64_t sub_len(void *self) { return ((subset_ds *)self)->n; }
static ct_status sub_get(void *self, int64_t index, ct_sample *out) {
    subset_ds *d = self;
    return ct_dataset_get(d->base, d->idx[index], out);
}
static void sub_free(void *self) {
    subset_ds *d = self;
    ct_dataset_release(d->base);
    free(d->idx);
    free(d);
}
static const ct_dataset_vtable sub_vt = {.len = sub_len, .get = sub_get, .free = sub_free};

ct_dataset *ct_subset_new(ct_dataset *base, const int64_t *indices, int64_t n) {
    if (!base) return ct__error(CT_ERR_NULL, "subset_new: dataset is NULL");
    if (n < 0) return ct__error(CT_ERR_ARG, "subset_new: negative length %lld", (long long)n);
    if (n > 0 && !indices) return ct__error(CT_ERR_NULL, "subset_new: indices is NULL");
    if (ct_dataset_is_iterable(base)) return ct__error(CT_ERR_ARG, "subset_new: the dataset is iterable");
    int64_t L = ct_dataset_len(base);
    if (L < 0) return NULL;
    for (int64_t i = 0; i < n; i++)
        if (indices[i] < 0 || indices[i] >= L)
            return ct__error(CT_ERR_INDEX, "subset_new: indices[%lld] = %lld out of range for a dataset of "
                             "length %lld", (long long)i, (long long)indices[i], (long long)L);
    subset_ds *d = calloc(1, sizeof *d);
    if (!d) return ct__error(CT_ERR_OOM, "subset_new: out of memory");
    d->idx = malloc(sizeof *d->idx * (size_t)(n ? n : 1));
    if (!d->idx) { free(d); return ct__error(CT_ERR_OOM, "subset_new: out of memory"); }
    if (n) memcpy(d->idx, indices, sizeof *d->idx * (size_t)n);
    d->n = n;
    d->base = ct_dataset_retain(base);
    ct_dataset *ds = ct_dataset_new(&sub_vt, d);
    if (!ds) sub_free(d);
    return ds;
}

/* ---- random_split ------------------------------------------------------- */
ct_status ct_random_split(ct_dataset *d, const int64_t *lengths, int n, uint64_t seed, ct_dataset **out) {
    if (!d || !lengths || !out) return ct__error_status(CT_ERR_NULL, "random_split: NULL argument");
    if (n < 1) return ct__error_status(CT_ERR_ARG, "random_split: needs at least one length (got %d)", n);
    int64_t L = ct_dataset_len(d);
    if (L < 0) return ct_last_error_code();
    int64_t sum = 0;
    for (int k = 0; k < n; k++) {
        if (lengths[k] < 0 || lengths[k] > L)
            return ct__error_status(CT_ERR_ARG, "random_split: lengths[%d] = %lld is invalid", k, (long long)lengths[k]);
        sum += lengths[k];
    }
    if (sum != L)
        return ct__error_status(CT_ERR_ARG, "random_split: sum of input lengths (%lld) does not equal the "
                                "length of the input dataset (%lld)", (long long)sum, (long long)L);
    int64_t *perm = malloc(sizeof *perm * (size_t)(L ? L : 1));
    if (!perm) return ct__error_status(CT_ERR_OOM, "random_split: out of memory");
    ct_randperm_seeded(L, seed, 0, perm);
    int64_t off = 0;
    for (int k = 0; k < n; k++) {
        out[k] = ct_subset_new(d, perm + off, lengths[k]);
        if (!out[k]) {
            for (int j = 0; j < k; j++) { ct_dataset_release(out[j]); out[j] = NULL; }
            free(perm);
            return ct_last_error_code();
        }
        off += lengths[k];
    }
    free(perm);
    return CT_OK;
}

ct_status ct_random_split_fractions(ct_dataset *d, const double *fr, int n, uint64_t seed, ct_dataset **out) {
    if (!d || !fr || !out) return ct__error_status(CT_ERR_NULL, "random_split: NULL argument");
    if (n < 1) return ct__error_status(CT_ERR_ARG, "random_split: needs at least one fraction (got %d)", n);
    int64_t L = ct_dataset_len(d);
    if (L < 0) return ct_last_error_code();
    double s = 0;
    for (int k = 0; k < n; k++) {
        if (!(fr[k] >= 0 && fr[k] <= 1))
            return ct__error_status(CT_ERR_ARG, "random_split: fraction at index %d is not between 0 and 1 (%g)", k, fr[k]);
        s += fr[k];
    }
    if (fabs(s - 1.0) > 1e-6)
        return ct__error_status(CT_ERR_ARG, "random_split: fractions sum to %g, not 1", s);
    int64_t *len = malloc(sizeof *len * (size_t)n);
    if (!len) return ct__error_status(CT_ERR_OOM, "random_split: out of memory");
    int64_t tot = 0;
    for (int k = 0; k < n; k++) {
        len[k] = (int64_t)floor((double)L * fr[k]);
        tot += len[k];
    }
    for (int64_t r = 0; r < L - tot; r++) len[r % n]++;
    ct_status st = ct_random_split(d, len, n, seed, out);
    free(len);
    return st;
}
