/* dataframe_impl.h -- private: the column and frame structs shared by
 * dataframe*.c, csv.c and arrow.c. */
#ifndef CT_DATAFRAME_IMPL_H
#define CT_DATAFRAME_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "../ops/op_table.h"
#include "ctorch/data.h"

/* A reference-counted buffer.  `release` frees ptr (own allocation) or
 * drops a reference on an imported Arrow array (owner). */
typedef struct ct_dfbuf {
    atomic_long rc;
    void *ptr;
    size_t size;
    struct ct_arrow_owner *owner;   /* NULL: ptr is ours (free()) */
} ct_dfbuf;

struct ct_column {
    atomic_long rc;
    ct_df_type type;
    int64_t length, null_count;
    ct_dfbuf *validity;   /* NULL when null_count == 0 */
    ct_dfbuf *data;       /* values / string bytes; NULL for lists */
    ct_dfbuf *offsets;    /* int32 [length + 1] for strings and lists */
    ct_column *child;     /* list child */
};

struct ct_df {
    int ncols;
    int64_t nrows;
    char **names;
    ct_column **cols;
};

/* buffers */
ct_dfbuf *ct__dfbuf_new(size_t size);           /* zeroed? no: uninitialised, 64-aligned */
ct_dfbuf *ct__dfbuf_zeros(size_t size);
ct_dfbuf *ct__dfbuf_retain(ct_dfbuf *b);
void ct__dfbuf_release(ct_dfbuf *b);
void ct__arrow_owner_release(struct ct_arrow_owner *o);

/* a column struct with rc 1 taking ownership of the given buffers */
ct_column *ct__col_make(ct_df_type t, int64_t n, ct_dfbuf *validity, ct_dfbuf *data,
                        ct_dfbuf *offsets, ct_column *child);
/* counts nulls of a bitmap and drops it when there are none */
void ct__col_fix_nulls(ct_column *c);
/* frame with ownership of names (strdup'ed inside) and retains cols */
ct_df *ct__df_make(char *const *names, ct_column *const *cols, int n, int64_t nrows);

static inline bool ct__bit(const uint8_t *bm, int64_t i) { return (bm[i >> 3] >> (i & 7)) & 1; }
static inline void ct__bit_set(uint8_t *bm, int64_t i, bool v) {
    if (v) bm[i >> 3] |= (uint8_t)(1u << (i & 7));
    else bm[i >> 3] &= (uint8_t)~(1u << (i & 7));
}
static inline bool ct__col_valid(const ct_column *c, int64_t i) {
    return !c->validity || ct__bit((const uint8_t *)c->validity->ptr, i);
}
static inline const int32_t *ct__col_off(const ct_column *c) {
    return (const int32_t *)c->offsets->ptr;
}
static inline const char *ct__col_str(const ct_column *c, int64_t i, int32_t *len) {
    const int32_t *o = ct__col_off(c);
    *len = o[i + 1] - o[i];
    return (const char *)c->data->ptr + o[i];
}
static inline size_t ct__bitmap_bytes(int64_t n) { return (size_t)((n + 63) / 64 * 8); }

/* String column builder */
typedef struct ct__strbuild {
    int64_t n, cap;
    int32_t *off;
    char *data;
    size_t dlen, dcap;
    uint8_t *valid;   /* byte per row */
    int err;
} ct__strbuild;
void ct__sb_init(ct__strbuild *b, int64_t n_hint);
void ct__sb_push(ct__strbuild *b, const char *s, size_t len, bool valid);
ct_column *ct__sb_finish(ct__strbuild *b, const char *op);  /* frees b's memory */
void ct__sb_free(ct__strbuild *b);

/* stable argsort of rows by key columns (asc NULL: all ascending); malloc'ed */
int64_t *ct__df_argsort(const ct_column *const *cols, const bool *asc, int n, int64_t rows);

/* fast decimal parsing (csv.c): 1 ok, 0 not a number */
int ct__parse_int64(const char *s, size_t n, int64_t *out);
int ct__parse_double(const char *s, size_t n, double *out);

#endif
