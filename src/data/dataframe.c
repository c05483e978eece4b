/* dataframe.c -- columns and frames: buffers, constructors, accessors,
 * head/select/rename/filter/with_column/sort_by/drop_nulls/take. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataframe_impl.h"

/* ---- buffers ------------------------------------------------------------ */
ct_dfbuf *ct__dfbuf_new(size_t size) {
    ct_dfbuf *b = malloc(sizeof *b);
    if (!b) return ct__error(CT_ERR_OOM, "dataframe: out of memory");
    size_t asz = (size + 63) / 64 * 64;
    if (asz == 0) asz = 64;
    b->ptr = aligned_alloc(64, asz);
    if (!b->ptr) { free(b); return ct__error(CT_ERR_OOM, "dataframe: cannot allocate %zu bytes", size); }
    atomic_init(&b->rc, 1);
    b->size = size;
    b->owner = NULL;
    return b;
}

ct_dfbuf *ct__dfbuf_zeros(size_t size) {
    ct_dfbuf *b = ct__dfbuf_new(size);
    if (b) memset(b->ptr, 0, size ? (size + 63) / 64 * 64 : 64);
    return b;
}

ct_dfbuf *ct__dfbuf_retain(ct_dfbuf *b) {
    if (b) atomic_fetch_add(&b->rc, 1);
    return b;
}

void ct__dfbuf_release(ct_dfbuf *b) {
    if (!b || atomic_fetch_sub(&b->rc, 1) != 1) return;
    if (b->owner) ct__arrow_owner_release(b->owner);
    else free(b->ptr);
    free(b);
}

/* ---- columns ------------------------------------------------------------ */
const char *ct_df_type_name(ct_df_type t) {
    switch (t) {
    case CT_DF_INT64: return "int64";
    case CT_DF_FLOAT64: return "float64";
    case CT_DF_FLOAT32: return "float32";
    case CT_DF_BOOL: return "bool";
    case CT_DF_STRING: return "string";
    case CT_DF_LIST: return "list";
    }
    return "?";
}

ct_column *ct__col_make(ct_df_type t, int64_t n, ct_dfbuf *validity, ct_dfbuf *data,
                        ct_dfbuf *offsets, ct_column *child) {
    ct_column *c = calloc(1, sizeof *c);
    if (!c) {
        ct__dfbuf_release(validity); ct__dfbuf_release(data); ct__dfbuf_release(offsets);
        ct_column_release(child);
        return ct__error(CT_ERR_OOM, "dataframe: out of memory");
    }
    atomic_init(&c->rc, 1);
    c->type = t;
    c->length = n;
    c->validity = validity;
    c->data = data;
    c->offsets = offsets;
    c->child = child;
    ct__col_fix_nulls(c);
    return c;
}

void ct__col_fix_nulls(ct_column *c) {
    c->null_count = 0;
    if (!c->validity) return;
    const uint8_t *bm = c->validity->ptr;
    int64_t valid = 0, full = c->length / 8;
    for (int64_t i = 0; i < full; i++) valid += __builtin_popcount(bm[i]);
    for (int64_t i = full * 8; i < c->length; i++) valid += ct__bit(bm, i);
    c->null_count = c->length - valid;
    if (c->null_count == 0) { ct__dfbuf_release(c->validity); c->validity = NULL; }
}

ct_column *ct_column_retain(ct_column *c) {
    if (c) atomic_fetch_add(&c->rc, 1);
    return c;
}

void ct_column_release(ct_column *c) {
    if (!c || atomic_fetch_sub(&c->rc, 1) != 1) return;
    ct__dfbuf_release(c->validity);
    ct__dfbuf_release(c->data);
    ct__dfbuf_release(c->offsets);
    ct_column_release(c->child);
    free(c);
}

static ct_dfbuf *valid_from_bytes(const uint8_t *valid, int64_t n) {
    if (!valid) return NULL;
    ct_dfbuf *b = ct__dfbuf_zeros(ct__bitmap_bytes(n));
    if (!b) return NULL;
    for (int64_t i = 0; i < n; i++) if (valid[i]) ct__bit_set(b->ptr, i, true);
    return b;
}

static ct_column *from_fixed(const void *v, const uint8_t *valid, int64_t n, size_t esz,
                             ct_df_type t, const char *op) {
    if (n < 0) return ct__error(CT_ERR_ARG, "%s: negative length %lld", op, (long long)n);
    if (n > 0 && !v) return ct__error(CT_ERR_NULL, "%s: NULL values", op);
    ct_dfbuf *d = ct__dfbuf_new((size_t)n * esz);
    if (!d) return NULL;
    if (n) memcpy(d->ptr, v, (size_t)n * esz);
    ct_dfbuf *vb = NULL;
    if (valid && !(vb = valid_from_bytes(valid, n))) { ct__dfbuf_release(d); return NULL; }
    return ct__col_make(t, n, vb, d, NULL, NULL);
}

ct_column *ct_column_from_int64(const int64_t *v, const uint8_t *valid, int64_t n) {
    return from_fixed(v, valid, n, 8, CT_DF_INT64, "ct_column_from_int64");
}
ct_column *ct_column_from_float64(const double *v, const uint8_t *valid, int64_t n) {
    return from_fixed(v, valid, n, 8, CT_DF_FLOAT64, "ct_column_from_float64");
}
ct_column *ct_column_from_float32(const float *v, const uint8_t *valid, int64_t n) {
    return from_fixed(v, valid, n, 4, CT_DF_FLOAT32, "ct_column_from_float32");
}
ct_column *ct_column_from_bool(const bool *v, const uint8_t *valid, int64_t n) {
    if (n < 0) return ct__error(CT_ERR_ARG, "ct_column_from_bool: negative length");
    if (n > 0 && !v) return ct__error(CT_ERR_NULL, "ct_column_from_bool: NULL values");
    ct_dfbuf *d = ct__dfbuf_zeros(ct__bitmap_bytes(n));
    if (!d) return NULL;
    for (int64_t i = 0; i < n; i++) if (v[i]) ct__bit_set(d->ptr, i, true);
    ct_dfbuf *vb = NULL;
    if (valid && !(vb = valid_from_bytes(valid, n))) { ct__dfbuf_release(d); return NULL; }
    return ct__col_make(CT_DF_BOOL, n, vb, d, NULL, NULL);
}

ct_column *ct_column_from_strings(const char *const *v, int64_t n) {
    if (n < 0) return ct__error(CT_ERR_ARG, "ct_column_from_strings: negative length");
    if (n > 0 && !v) return ct__error(CT_ERR_NULL, "ct_column_from_strings: NULL values");
    ct__strbuild b;
    ct__sb_init(&b, n);
    for (int64_t i = 0; i < n; i++) ct__sb_push(&b, v[i] ? v[i] : "", v[i] ? strlen(v[i]) : 0, v[i] != NULL);
    return ct__sb_finish(&b, "ct_column_from_strings");
}

/* ---- string builder ---- */
void ct__sb_init(ct__strbuild *b, int64_t n_hint) {
    memset(b, 0, sizeof *b);
    b->cap = n_hint > 16 ? n_hint : 16;
    b->off = malloc(sizeof(int32_t) * (size_t)(b->cap + 1));
    b->valid = malloc((size_t)b->cap);
    b->dcap = 256;
    b->data = malloc(b->dcap);
    if (!b->off || !b->valid || !b->data) b->err = CT_ERR_OOM;
    else b->off[0] = 0;
}

void ct__sb_push(ct__strbuild *b, const char *s, size_t len, bool valid) {
    if (b->err) return;
    if (b->n == b->cap) {
        int64_t nc = b->cap * 2;
        int32_t *o = realloc(b->off, sizeof(int32_t) * (size_t)(nc + 1));
        if (o) b->off = o;
        uint8_t *v = o ? realloc(b->valid, (size_t)nc) : NULL;
        if (v) b->valid = v;
        if (!o || !v) { b->err = CT_ERR_OOM; return; }
        b->cap = nc;
    }
    if (!valid) len = 0;
    if (b->dlen + len > (size_t)INT32_MAX) { b->err = CT_ERR_OVERFLOW; return; }
    if (b->dlen + len > b->dcap) {
        size_t nc = b->dcap * 2;
        while (nc < b->dlen + len) nc *= 2;
        char *d = realloc(b->data, nc);
        if (!d) { b->err = CT_ERR_OOM; return; }
        b->data = d;
        b->dcap = nc;
    }
    if (len) memcpy(b->data + b->dlen, s, len);
    b->dlen += len;
    b->valid[b->n] = valid;
    b->off[++b->n] = (int32_t)b->dlen;
}

void ct__sb_free(ct__strbuild *b) {
    free(b->off); free(b->valid); free(b->data);
    memset(b, 0, sizeof *b);
}

ct_column *ct__sb_finish(ct__strbuild *b, const char *op) {
    if (b->err) {
        int e = b->err;
        ct__sb_free(b);
        if (e == CT_ERR_OVERFLOW) return ct__error(CT_ERR_OVERFLOW, "%s: string data exceeds 2 GiB", op);
        return ct__error(CT_ERR_OOM, "%s: out of memory", op);
    }
    int64_t n = b->n;
    ct_dfbuf *off = ct__dfbuf_new(sizeof(int32_t) * (size_t)(n + 1));
    ct_dfbuf *data = ct__dfbuf_new(b->dlen);
    ct_dfbuf *vb = ct__dfbuf_zeros(ct__bitmap_bytes(n));
    if (!off || !data || !vb) {
        ct__dfbuf_release(off); ct__dfbuf_release(data); ct__dfbuf_release(vb);
        ct__sb_free(b);
        return NULL;
    }
    memcpy(off->ptr, b->off, sizeof(int32_t) * (size_t)(n + 1));
    if (b->dlen) memcpy(data->ptr, b->data, b->dlen);
    for (int64_t i = 0; i < n; i++) if (b->valid[i]) ct__bit_set(vb->ptr, i, true);
    ct__sb_free(b);
    return ct__col_make(CT_DF_STRING, n, vb, data, off, NULL);
}

/* ---- accessors ---- */
ct_df_type ct_column_type(const ct_column *c) { return c ? c->type : CT_DF_INT64; }
int64_t ct_column_length(const ct_column *c) { return c ? c->length : 0; }
int64_t ct_column_null_count(const ct_column *c) { return c ? c->null_count : 0; }
bool ct_column_is_null(const ct_column *c, int64_t i) {
    if (!c || i < 0 || i >= c->length) return true;
    return !ct__col_valid(c, i);
}
int64_t ct_column_get_int64(const ct_column *c, int64_t i) {
    if (ct_column_is_null(c, i)) return 0;
    switch (c->type) {
    case CT_DF_INT64: return ((const int64_t *)c->data->ptr)[i];
    case CT_DF_BOOL: return ct__bit(c->data->ptr, i);
    case CT_DF_FLOAT64: { double v = ((const double *)c->data->ptr)[i]; return isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0; }
    case CT_DF_FLOAT32: { float v = ((const float *)c->data->ptr)[i]; return isfinite(v) && fabsf(v) < 9.2e18f ? (int64_t)v : 0; }
    default: return 0;
    }
}
double ct_column_get_double(const ct_column *c, int64_t i) {
    if (ct_column_is_null(c, i)) return NAN;
    switch (c->type) {
    case CT_DF_INT64: return (double)((const int64_t *)c->data->ptr)[i];
    case CT_DF_BOOL: return ct__bit(c->data->ptr, i);
    case CT_DF_FLOAT64: return ((const double *)c->data->ptr)[i];
    case CT_DF_FLOAT32: return ((const float *)c->data->ptr)[i];
    default: return NAN;
    }
}
bool ct_column_get_bool(const ct_column *c, int64_t i) {
    if (ct_column_is_null(c, i)) return false;
    if (c->type == CT_DF_BOOL) return ct__bit(c->data->ptr, i);
    if (c->type == CT_DF_STRING || c->type == CT_DF_LIST) return false;
    return ct_column_get_double(c, i) != 0;
}
const char *ct_column_get_string(const ct_column *c, int64_t i, int32_t *len) {
    if (len) *len = 0;
    if (!c || c->type != CT_DF_STRING || ct_column_is_null(c, i)) return NULL;
    int32_t l;
    const char *s = ct__col_str(c, i, &l);
    if (len) *len = l;
    return s;
}
ct_column *ct_column_list_range(const ct_column *c, int64_t i, int64_t *start, int64_t *end) {
    if (start) *start = 0;
    if (end) *end = 0;
    if (!c || c->type != CT_DF_LIST) return NULL;
    if (i >= 0 && i < c->length && ct__col_valid(c, i)) {
        if (start) *start = ct__col_off(c)[i];
        if (end) *end = ct__col_off(c)[i + 1];
    }
    return c->child;
}
const void *ct_column_data(const ct_column *c) { return c && c->data ? c->data->ptr : NULL; }
const uint8_t *ct_column_validity(const ct_column *c) { return c && c->validity ? c->validity->ptr : NULL; }
const int32_t *ct_column_offsets(const ct_column *c) { return c && c->offsets ? c->offsets->ptr : NULL; }

/* ---- frames ------------------------------------------------------------- */
ct_df *ct__df_make(char *const *names, ct_column *const *cols, int n, int64_t nrows) {
    ct_df *df = calloc(1, sizeof *df);
    if (!df) return ct__error(CT_ERR_OOM, "dataframe: out of memory");
    df->ncols = n;
    df->nrows = nrows;
    df->names = calloc((size_t)(n ? n : 1), sizeof(char *));
    df->cols = calloc((size_t)(n ? n : 1), sizeof(ct_column *));
    if (!df->names || !df->cols) { ct_df_free(df); return ct__error(CT_ERR_OOM, "dataframe: out of memory"); }
    for (int i = 0; i < n; i++) {
        df->names[i] = strdup(names[i]);
        df->cols[i] = ct_column_retain(cols[i]);
        if (!df->names[i]) { ct_df_free(df); return ct__error(CT_ERR_OOM, "dataframe: out of memory"); }
    }
    return df;
}

ct_df *ct_df_new(const char *const *names, ct_column *const *cols, int n) {
    if (n < 0) return ct__error(CT_ERR_ARG, "ct_df_new: negative column count %d", n);
    if (n > 0 && (!names || !cols)) return ct__error(CT_ERR_NULL, "ct_df_new: NULL names or columns");
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        if (!cols[i]) return NULL;
        if (!names[i]) return ct__error(CT_ERR_ARG, "ct_df_new: column %d has a NULL name", i);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return ct__error(CT_ERR_ARG, "ct_df_new: duplicate column name '%s'", names[i]);
        if (i == 0) rows = cols[i]->length;
        else if (cols[i]->length != rows)
            return ct__error(CT_ERR_SHAPE, "ct_df_new: column '%s' has %lld rows, '%s' has %lld",
                             names[i], (long long)cols[i]->length, names[0], (long long)rows);
    }
    return ct__df_make((char *const *)names, cols, n, rows);
}

void ct_df_free(ct_df *df) {
    if (!df) return;
    for (int i = 0; i < df->ncols; i++) {
        if (df->names) free(df->names[i]);
        if (df->cols) ct_column_release(df->cols[i]);
    }
    free(df->names);
    free(df->cols);
    free(df);
}

int64_t ct_df_num_rows(const ct_df *df) { return df ? df->nrows : 0; }
int ct_df_num_columns(const ct_df *df) { return df ? df->ncols : 0; }
const char *ct_df_column_name(const ct_df *df, int i) {
    return df && i >= 0 && i < df->ncols ? df->names[i] : NULL;
}
int ct_df_column_index(const ct_df *df, const char *name) {
    if (!df || !name) return -1;
    for (int i = 0; i < df->ncols; i++) if (strcmp(df->names[i], name) == 0) return i;
    return -1;
}
ct_column *ct_df_column_at(const ct_df *df, int i) {
    if (!df) return NULL;
    if (i < 0 || i >= df->ncols)
        return ct__error(CT_ERR_INDEX, "ct_df_column_at: index %d out of range for %d columns", i, df->ncols);
    return df->cols[i];
}
ct_column *ct_df_column(const ct_df *df, const char *name) {
    if (!df) return NULL;
    if (!name) return ct__error(CT_ERR_NULL, "ct_df_column: NULL name");
    int i = ct_df_column_index(df, name);
    if (i < 0) return ct__error(CT_ERR_ARG, "dataframe: no column '%s'", name);
    return df->cols[i];
}

/* ---- take / filter ---- */
ct_column *ct_column_take(const ct_column *c, const int64_t *idx, int64_t n) {
    if (!c) return NULL;
    if (n < 0 || (n > 0 && !idx)) return ct__error(CT_ERR_ARG, "ct_column_take: bad index list");
    for (int64_t k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= c->length)
            return ct__error(CT_ERR_INDEX, "ct_column_take: index %lld (position %lld) out of range for %lld rows",
                             (long long)idx[k], (long long)k, (long long)c->length);
    ct_dfbuf *vb = NULL;
    if (c->validity) {
        if (!(vb = ct__dfbuf_zeros(ct__bitmap_bytes(n)))) return NULL;
        for (int64_t k = 0; k < n; k++) if (ct__col_valid(c, idx[k])) ct__bit_set(vb->ptr, k, true);
    }
    switch (c->type) {
    case CT_DF_INT64: case CT_DF_FLOAT64: case CT_DF_FLOAT32: {
        size_t esz = c->type == CT_DF_FLOAT32 ? 4 : 8;
        ct_dfbuf *d = ct__dfbuf_new((size_t)n * esz);
        if (!d) { ct__dfbuf_release(vb); return NULL; }
        if (esz == 8) {
            const int64_t *s = c->data->ptr; int64_t *o = d->ptr;
            for (int64_t k = 0; k < n; k++) o[k] = s[idx[k]];
        } else {
            const int32_t *s = c->data->ptr; int32_t *o = d->ptr;
            for (int64_t k = 0; k < n; k++) o[k] = s[idx[k]];
        }
        return ct__col_make(c->type, n, vb, d, NULL, NULL);
    }
    case CT_DF_BOOL: {
        ct_dfbuf *d = ct__dfbuf_zeros(ct__bitmap_bytes(n));
        if (!d) { ct__dfbuf_release(vb); return NULL; }
        for (int64_t k = 0; k < n; k++) if (ct__bit(c->data->ptr, idx[k])) ct__bit_set(d->ptr, k, true);
        return ct__col_make(CT_DF_BOOL, n, vb, d, NULL, NULL);
    }
    case CT_DF_STRING: {
        ct__dfbuf_release(vb);
        ct__strbuild b;
        ct__sb_init(&b, n);
        for (int64_t k = 0; k < n; k++) {
            int32_t l;
            const char *s = ct__col_str(c, idx[k], &l);
            ct__sb_push(&b, s, (size_t)l, ct__col_valid(c, idx[k]));
        }
        return ct__sb_finish(&b, "take");
    }
    case CT_DF_LIST: {
        const int32_t *o = ct__col_off(c);
        int64_t total = 0;
        for (int64_t k = 0; k < n; k++) total += o[idx[k] + 1] - o[idx[k]];
        if (total > INT32_MAX) { ct__dfbuf_release(vb); return ct__error(CT_ERR_OVERFLOW, "take: list too long"); }
        int64_t *cidx = malloc(sizeof(int64_t) * (size_t)(total ? total : 1));
        ct_dfbuf *ob = ct__dfbuf_new(sizeof(int32_t) * (size_t)(n + 1));
        if (!cidx || !ob) { free(cidx); ct__dfbuf_release(ob); ct__dfbuf_release(vb); return ct__error(CT_ERR_OOM, "take: out of memory"); }
        int32_t *no = ob->ptr;
        int64_t p = 0;
        no[0] = 0;
        for (int64_t k = 0; k < n; k++) {
            for (int32_t j = o[idx[k]]; j < o[idx[k] + 1]; j++) cidx[p++] = j;
            no[k + 1] = (int32_t)p;
        }
        ct_column *child = ct_column_take(c->child, cidx, total);
        free(cidx);
        if (!child) { ct__dfbuf_release(ob); ct__dfbuf_release(vb); return NULL; }
        return ct__col_make(CT_DF_LIST, n, vb, NULL, ob, child);
    }
    }
    ct__dfbuf_release(vb);
    return ct__error(CT_ERR_DTYPE, "take: bad column type");
}

ct_df *ct_df_take(const ct_df *df, const int64_t *idx, int64_t n) {
    if (!df) return NULL;
    for (int64_t k = 0; k < n; k++)
        if (idx[k] < 0 || idx[k] >= df->nrows)
            return ct__error(CT_ERR_INDEX, "ct_df_take: index %lld (position %lld) out of range for %lld rows",
                             (long long)idx[k], (long long)k, (long long)df->nrows);
    ct_column **cols = calloc((size_t)(df->ncols ? df->ncols : 1), sizeof *cols);
    if (!cols) return ct__error(CT_ERR_OOM, "take: out of memory");
    ct_df *out = NULL;
    int ok = 1;
    for (int i = 0; i < df->ncols && ok; i++) ok = (cols[i] = ct_column_take(df->cols[i], idx, n)) != NULL;
    if (ok) out = ct__df_make(df->names, cols, df->ncols, n);
    for (int i = 0; i < df->ncols; i++) ct_column_release(cols[i]);
    free(cols);
    return out;
}

ct_df *ct_df_head(const ct_df *df, int64_t n) {
    if (!df) return NULL;
    if (n < 0) n = 0;
    if (n > df->nrows) n = df->nrows;
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!idx) return ct__error(CT_ERR_OOM, "head: out of memory");
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    ct_df *out = ct_df_take(df, idx, n);
    free(idx);
    return out;
}

ct_df *ct_df_filter(const ct_df *df, const ct_column *mask) {
    if (!df || !mask) return NULL;
    if (mask->type != CT_DF_BOOL)
        return ct__error(CT_ERR_DTYPE, "filter: mask must be a bool column, got %s", ct_df_type_name(mask->type));
    if (mask->length != df->nrows)
        return ct__error(CT_ERR_SHAPE, "filter: mask has %lld rows, frame has %lld",
                         (long long)mask->length, (long long)df->nrows);
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(df->nrows ? df->nrows : 1));
    if (!idx) return ct__error(CT_ERR_OOM, "filter: out of memory");
    int64_t n = 0;
    for (int64_t i = 0; i < df->nrows; i++)
        if (ct__col_valid(mask, i) && ct__bit(mask->data->ptr, i)) idx[n++] = i;
    ct_df *out = ct_df_take(df, idx, n);
    free(idx);
    return out;
}

ct_df *ct_df_select(const ct_df *df, const char *const *names, int n) {
    if (!df) return NULL;
    if (n < 0 || (n > 0 && !names)) return ct__error(CT_ERR_ARG, "select: bad name list");
    ct_column **cols = calloc((size_t)(n ? n : 1), sizeof *cols);
    if (!cols) return ct__error(CT_ERR_OOM, "select: out of memory");
    ct_df *out = NULL;
    int i;
    for (i = 0; i < n; i++) {
        if (!names[i] || !(cols[i] = ct_df_column(df, names[i]))) break;
    }
    if (i == n) out = ct_df_new(names, cols, n);
    else if (!names[i]) ct__error(CT_ERR_NULL, "select: NULL name at %d", i);
    if (out && n == 0) out->nrows = df->nrows;
    free(cols);
    return out;
}

ct_df *ct_df_rename(const ct_df *df, const char *from, const char *to) {
    if (!df) return NULL;
    if (!from || !to) return ct__error(CT_ERR_NULL, "rename: NULL name");
    int i = ct_df_column_index(df, from);
    if (i < 0) return ct__error(CT_ERR_ARG, "rename: no column '%s'", from);
    int j = ct_df_column_index(df, to);
    if (j >= 0 && j != i) return ct__error(CT_ERR_ARG, "rename: column '%s' already exists", to);
    char **names = malloc(sizeof(char *) * (size_t)df->ncols);
    if (!names) return ct__error(CT_ERR_OOM, "rename: out of memory");
    for (int k = 0; k < df->ncols; k++) names[k] = k == i ? (char *)to : df->names[k];
    ct_df *out = ct__df_make(names, df->cols, df->ncols, df->nrows);
    free(names);
    return out;
}

ct_df *ct_df_with_column(const ct_df *df, const char *name, ct_column *col) {
    if (!df || !col) return NULL;
    if (!name) return ct__error(CT_ERR_NULL, "with_column: NULL name");
    if (df->ncols > 0 && col->length != df->nrows)
        return ct__error(CT_ERR_SHAPE, "with_column: column '%s' has %lld rows, frame has %lld", name,
                         (long long)col->length, (long long)df->nrows);
    int i = ct_df_column_index(df, name);
    int n = df->ncols + (i < 0);
    char **names = malloc(sizeof(char *) * (size_t)n);
    ct_column **cols = malloc(sizeof(ct_column *) * (size_t)n);
    if (!names || !cols) { free(names); free(cols); return ct__error(CT_ERR_OOM, "with_column: out of memory"); }
    for (int k = 0; k < df->ncols; k++) { names[k] = df->names[k]; cols[k] = df->cols[k]; }
    if (i < 0) i = df->ncols;
    names[i] = (char *)name;
    cols[i] = col;
    ct_df *out = ct__df_make(names, cols, n, col->length);
    free(names); free(cols);
    return out;
}

ct_df *ct_df_drop(const ct_df *df, const char *name) {
    if (!df) return NULL;
    int i = ct_df_column_index(df, name);
    if (i < 0) return ct__error(CT_ERR_ARG, "drop: no column '%s'", name ? name : "(null)");
    char **names = malloc(sizeof(char *) * (size_t)df->ncols);
    ct_column **cols = malloc(sizeof(ct_column *) * (size_t)df->ncols);
    if (!names || !cols) { free(names); free(cols); return ct__error(CT_ERR_OOM, "drop: out of memory"); }
    int n = 0;
    for (int k = 0; k < df->ncols; k++) if (k != i) { names[n] = df->names[k]; cols[n++] = df->cols[k]; }
    ct_df *out = ct__df_make(names, cols, n, df->nrows);
    free(names); free(cols);
    return out;
}

ct_df *ct_df_drop_nulls(const ct_df *df, const char *const *names, int n) {
    if (!df) return NULL;
    int m = n > 0 ? n : df->ncols;
    const ct_column **cols = malloc(sizeof(ct_column *) * (size_t)(m ? m : 1));
    int64_t *idx = malloc(sizeof(int64_t) * (size_t)(df->nrows ? df->nrows : 1));
    ct_df *out = NULL;
    if (!cols || !idx) { ct__error(CT_ERR_OOM, "drop_nulls: out of memory"); goto done; }
    for (int k = 0; k < m; k++) {
        cols[k] = n > 0 ? ct_df_column(df, names[k]) : df->cols[k];
        if (!cols[k]) goto done;
    }
    int64_t cnt = 0;
    for (int64_t i = 0; i < df->nrows; i++) {
        bool ok = true;
        for (int k = 0; k < m && ok; k++) ok = ct__col_valid(cols[k], i);
        if (ok) idx[cnt++] = i;
    }
    out = ct_df_take(df, idx, cnt);
done:
    free(cols); free(idx);
    return out;
}

/* ---- sort ---- */
typedef struct { const ct_column *c; bool asc; } sort_key;
typedef struct { sort_key *k; int n; } sort_ctx;

/* -1/0/1; nulls (and NaN) last whatever the direction */
static int cmp_row(const ct_column *c, bool asc, int64_t a, int64_t b) {
    bool va = ct__col_valid(c, a), vb = ct__col_valid(c, b);
    int r = 0;
    switch (c->type) {
    case CT_DF_INT64: {
        if (!va || !vb) return va == vb ? 0 : va ? -1 : 1;
        int64_t x = ((const int64_t *)c->data->ptr)[a], y = ((const int64_t *)c->data->ptr)[b];
        r = (x > y) - (x < y);
        break;
    }
    case CT_DF_FLOAT64: case CT_DF_FLOAT32: {
        double x = ct_column_get_double(c, a), y = ct_column_get_double(c, b);
        va = va && !isnan(x); vb = vb && !isnan(y);
        if (!va || !vb) return va == vb ? 0 : va ? -1 : 1;
        r = (x > y) - (x < y);
        break;
    }
    case CT_DF_BOOL: {
        if (!va || !vb) return va == vb ? 0 : va ? -1 : 1;
        r = (int)ct__bit(c->data->ptr, a) - (int)ct__bit(c->data->ptr, b);
        break;
    }
    case CT_DF_STRING: {
        if (!va || !vb) return va == vb ? 0 : va ? -1 : 1;
        int32_t la, lb;
        const char *sa = ct__col_str(c, a, &la), *sb = ct__col_str(c, b, &lb);
        int m = memcmp(sa, sb, (size_t)(la < lb ? la : lb));
        r = m ? (m > 0) - (m < 0) : (la > lb) - (la < lb);
        break;
    }
    default: break;
    }
    return asc ? r : -r;
}

static void merge_sort(int64_t *v, int64_t *tmp, int64_t n, const sort_ctx *s) {
    if (n < 2) return;
    if (n <= 16) { /* insertion sort (stable) */
        for (int64_t i = 1; i < n; i++) {
            int64_t x = v[i], j = i;
            while (j > 0) {
                int r = 0;
                for (int k = 0; k < s->n && !r; k++) r = cmp_row(s->k[k].c, s->k[k].asc, v[j - 1], x);
                if (r <= 0) break;
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    int64_t h = n / 2;
    merge_sort(v, tmp, h, s);
    merge_sort(v + h, tmp, n - h, s);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) {
        int r = 0;
        for (int k = 0; k < s->n && !r; k++) r = cmp_row(s->k[k].c, s->k[k].asc, v[i], v[j]);
        tmp[o++] = r <= 0 ? v[i++] : v[j++];
    }
    while (i < h) tmp[o++] = v[i++];
    while (j < n) tmp[o++] = v[j++];
    memcpy(v, tmp, sizeof(int64_t) * (size_t)n);
}

/* Stable sort of row indices 0..n-1 by the given keys (used by group_by). */
int64_t *ct__df_argsort(const ct_column *const *cols, const bool *asc, int n, int64_t rows) {
    sort_key *k = malloc(sizeof *k * (size_t)(n ? n : 1));
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    int64_t *tmp = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    if (!k || !v || !tmp) { free(k); free(v); free(tmp); return ct__error(CT_ERR_OOM, "sort: out of memory"); }
    for (int i = 0; i < n; i++) { k[i].c = cols[i]; k[i].asc = asc ? asc[i] : true; }
    for (int64_t i = 0; i < rows; i++) v[i] = i;
    sort_ctx s = {k, n};
    merge_sort(v, tmp, rows, &s);
    free(k); free(tmp);
    return v;
}

ct_df *ct_df_sort_by(const ct_df *df, const char *const *names, const bool *ascending, int n) {
    if (!df) return NULL;
    if (n < 1 || !names) return ct__error(CT_ERR_ARG, "sort_by: need at least one column");
    const ct_column **cols = malloc(sizeof(ct_column *) * (size_t)n);
    if (!cols) return ct__error(CT_ERR_OOM, "sort_by: out of memory");
    for (int i = 0; i < n; i++) {
        cols[i] = ct_df_column(df, names[i]);
        if (!cols[i]) { free(cols); return NULL; }
        if (cols[i]->type == CT_DF_LIST) {
            free(cols);
            return ct__error(CT_ERR_DTYPE, "sort_by: cannot sort by list column '%s'", names[i]);
        }
    }
    int64_t *idx = ct__df_argsort(cols, ascending, n, df->nrows);
    free(cols);
    if (!idx) return NULL;
    ct_df *out = ct_df_take(df, idx, df->nrows);
    free(idx);
    return out;
}
