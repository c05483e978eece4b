/* arrow.c -- the Arrow C Data Interface: zero-copy export of columns and
 * frames, import of arrays made by other tools (pyarrow). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataframe_impl.h"

/* ---- export ------------------------------------------------------------ */
typedef struct {
    ct_column *col;              /* keeps the buffers alive (NULL for a struct) */
    const void *bufs[3];
    struct ArrowArray **child_ptrs;
    struct ArrowArray *child_arrays;
    int64_t nchild;
} exp_array;

typedef struct {
    char *format, *name;
    struct ArrowSchema **child_ptrs;
    struct ArrowSchema *child_schemas;
    int64_t nchild;
} exp_schema;

static void release_array(struct ArrowArray *a) {
    if (!a || !a->release) return;
    exp_array *p = a->private_data;
    for (int64_t i = 0; i < p->nchild; i++) {
        struct ArrowArray *c = p->child_ptrs[i];
        if (c->release) c->release(c);
    }
    free(p->child_ptrs);
    free(p->child_arrays);
    ct_column_release(p->col);
    free(p);
    a->release = NULL;
}

static void release_schema(struct ArrowSchema *s) {
    if (!s || !s->release) return;
    exp_schema *p = s->private_data;
    for (int64_t i = 0; i < p->nchild; i++) {
        struct ArrowSchema *c = p->child_ptrs[i];
        if (c->release) c->release(c);
    }
    free(p->child_ptrs);
    free(p->child_schemas);
    free(p->format);
    free(p->name);
    free(p);
    s->release = NULL;
}

static const char *format_of(ct_df_type t) {
    switch (t) {
    case CT_DF_INT64: return "l";
    case CT_DF_FLOAT64: return "g";
    case CT_DF_FLOAT32: return "f";
    case CT_DF_BOOL: return "b";
    case CT_DF_STRING: return "u";
    case CT_DF_LIST: return "+l";
    }
    return "?";
}

static int alloc_children(exp_array *pa, exp_schema *ps, int64_t n) {
    pa->nchild = ps->nchild = 0;
    if (!n) return 0;
    pa->child_ptrs = calloc((size_t)n, sizeof *pa->child_ptrs);
    pa->child_arrays = calloc((size_t)n, sizeof *pa->child_arrays);
    ps->child_ptrs = calloc((size_t)n, sizeof *ps->child_ptrs);
    ps->child_schemas = calloc((size_t)n, sizeof *ps->child_schemas);
    if (!pa->child_ptrs || !pa->child_arrays || !ps->child_ptrs || !ps->child_schemas) return -1;
    for (int64_t i = 0; i < n; i++) { pa->child_ptrs[i] = &pa->child_arrays[i]; ps->child_ptrs[i] = &ps->child_schemas[i]; }
    return 0;
}

static ct_status export_col(const ct_column *c, const char *name, struct ArrowSchema *s, struct ArrowArray *a) {
    exp_array *pa = calloc(1, sizeof *pa);
    exp_schema *ps = calloc(1, sizeof *ps);
    if (!pa || !ps) { free(pa); free(ps); return ct__error_status(CT_ERR_OOM, "export_arrow: out of memory"); }
    ps->format = strdup(format_of(c->type));
    ps->name = name ? strdup(name) : NULL;
    pa->col = ct_column_retain((ct_column *)c);
    memset(a, 0, sizeof *a);
    memset(s, 0, sizeof *s);
    a->private_data = pa; a->release = release_array;
    s->private_data = ps; s->release = release_schema;
    if (!ps->format || (name && !ps->name)) goto oom;
    s->format = ps->format;
    s->name = ps->name;
    s->flags = ARROW_FLAG_NULLABLE;
    a->length = c->length;
    a->null_count = c->null_count;
    a->offset = 0;
    a->buffers = pa->bufs;
    pa->bufs[0] = c->validity ? c->validity->ptr : NULL;
    if (c->type == CT_DF_STRING) {
        a->n_buffers = 3;
        pa->bufs[1] = c->offsets->ptr;
        pa->bufs[2] = c->data->ptr;
    } else if (c->type == CT_DF_LIST) {
        a->n_buffers = 2;
        pa->bufs[1] = c->offsets->ptr;
        if (alloc_children(pa, ps, 1)) goto oom;
        if (export_col(c->child, "item", ps->child_ptrs[0], pa->child_ptrs[0])) { a->release(a); s->release(s); return ct_last_error_code(); }
        pa->nchild = ps->nchild = 1;
        a->n_children = s->n_children = 1;
        a->children = pa->child_ptrs;
        s->children = ps->child_ptrs;
    } else {
        a->n_buffers = 2;
        pa->bufs[1] = c->data->ptr;
    }
    return CT_OK;
oom:
    a->release(a);
    s->release(s);
    return ct__error_status(CT_ERR_OOM, "export_arrow: out of memory");
}

ct_status ct_column_export_arrow(const ct_column *c, const char *name, struct ArrowSchema *schema,
                                 struct ArrowArray *array) {
    if (!c || !schema || !array) return ct__error_status(CT_ERR_NULL, "export_arrow: NULL argument");
    return export_col(c, name, schema, array);
}

ct_status ct_df_export_arrow(const ct_df *df, struct ArrowSchema *s, struct ArrowArray *a) {
    if (!df || !s || !a) return ct__error_status(CT_ERR_NULL, "export_arrow: NULL argument");
    exp_array *pa = calloc(1, sizeof *pa);
    exp_schema *ps = calloc(1, sizeof *ps);
    if (!pa || !ps) { free(pa); free(ps); return ct__error_status(CT_ERR_OOM, "export_arrow: out of memory"); }
    memset(a, 0, sizeof *a);
    memset(s, 0, sizeof *s);
    a->private_data = pa; a->release = release_array;
    s->private_data = ps; s->release = release_schema;
    ps->format = strdup("+s");
    ps->name = strdup("");
    if (!ps->format || !ps->name || alloc_children(pa, ps, df->ncols)) {
        a->release(a); s->release(s);
        return ct__error_status(CT_ERR_OOM, "export_arrow: out of memory");
    }
    s->format = ps->format;
    s->name = ps->name;
    s->flags = 0;
    a->length = df->nrows;
    a->null_count = 0;
    a->n_buffers = 1;
    a->buffers = pa->bufs;
    for (int i = 0; i < df->ncols; i++) {
        if (export_col(df->cols[i], df->names[i], ps->child_ptrs[i], pa->child_ptrs[i])) {
            ct_status st = ct_last_error_code();
            a->release(a); s->release(s);
            return st;
        }
        pa->nchild = ps->nchild = i + 1;
    }
    a->n_children = s->n_children = df->ncols;
    a->children = pa->child_ptrs;
    s->children = ps->child_ptrs;
    return CT_OK;
}

/* ---- import ------------------------------------------------------------ */
struct ct_arrow_owner {
    atomic_long rc;
    struct ArrowArray arr;   /* the moved array */
    bool armed;              /* call arr.release at the end */
};

void ct__arrow_owner_release(struct ct_arrow_owner *o) {
    if (!o || atomic_fetch_sub(&o->rc, 1) != 1) return;
    if (o->armed && o->arr.release) o->arr.release(&o->arr);
    free(o);
}

static ct_dfbuf *wrap(struct ct_arrow_owner *o, const void *p, size_t size) {
    ct_dfbuf *b = malloc(sizeof *b);
    if (!b) return ct__error(CT_ERR_OOM, "import_arrow: out of memory");
    atomic_init(&b->rc, 1);
    b->ptr = (void *)p;
    b->size = size;
    b->owner = o;
    atomic_fetch_add(&o->rc, 1);
    return b;
}

/* validity as our own bitmap or a wrapped one */
static int import_validity(struct ct_arrow_owner *o, const struct ArrowArray *a, const char *path, ct_dfbuf **out) {
    *out = NULL;
    const void *bm = a->buffers[0];
    if (a->null_count == 0 || !bm) {
        if (a->null_count > 0) { ct__error(CT_ERR_FORMAT, "import_arrow: %s: null_count %lld without a validity buffer", path, (long long)a->null_count); return -1; }
        return 0;
    }
    if (a->offset % 8 == 0) {
        *out = wrap(o, (const uint8_t *)bm + a->offset / 8, (size_t)(a->length + 7) / 8);
        return *out ? 0 : -1;
    }
    ct_dfbuf *b = ct__dfbuf_zeros(ct__bitmap_bytes(a->length));
    if (!b) return -1;
    for (int64_t i = 0; i < a->length; i++) if (ct__bit(bm, a->offset + i)) ct__bit_set(b->ptr, i, true);
    *out = b;
    return 0;
}

static ct_column *import_col(struct ct_arrow_owner *o, const struct ArrowArray *a, const struct ArrowSchema *s,
                             const char *path, int depth) {
    if (!a || !s || !s->format) return ct__error(CT_ERR_FORMAT, "import_arrow: %s: NULL array or schema", path);
    if (depth > 8) return ct__error(CT_ERR_FORMAT, "import_arrow: %s: nesting too deep", path);
    if (!a->release) return ct__error(CT_ERR_FORMAT, "import_arrow: %s: array already released", path);
    if (a->length < 0 || a->offset < 0 || a->null_count < -1 || a->length > INT64_MAX / 16 - a->offset)
        return ct__error(CT_ERR_FORMAT, "import_arrow: %s: bad length %lld / offset %lld / null_count %lld", path,
                         (long long)a->length, (long long)a->offset, (long long)a->null_count);
    if (a->dictionary || s->dictionary) return ct__error(CT_ERR_FORMAT, "import_arrow: %s: dictionary arrays are not supported", path);
    const char *f = s->format;
    int nb = strcmp(f, "u") == 0 ? 3 : 2;
    if (a->n_buffers != nb || !a->buffers)
        return ct__error(CT_ERR_FORMAT, "import_arrow: %s: format '%s' needs %d buffers, got %lld", path, f, nb, (long long)a->n_buffers);
    int64_t n = a->length, off = a->offset;
    int64_t null_count = a->null_count;
    if (null_count == -1) null_count = a->buffers[0] ? 1 : 0; /* recomputed below */
    struct ArrowArray tmp = *a;
    tmp.null_count = null_count;
    ct_dfbuf *vb;
    if (import_validity(o, &tmp, path, &vb)) return NULL;
    ct_column *c = NULL;
    size_t esz = 0;
    ct_df_type t;
    if (!strcmp(f, "l")) { esz = 8; t = CT_DF_INT64; }
    else if (!strcmp(f, "g")) { esz = 8; t = CT_DF_FLOAT64; }
    else if (!strcmp(f, "f")) { esz = 4; t = CT_DF_FLOAT32; }
    else if (!strcmp(f, "i") || !strcmp(f, "s") || !strcmp(f, "c")) { esz = f[0] == 'i' ? 4 : f[0] == 's' ? 2 : 1; t = CT_DF_INT64; }
    else if (!strcmp(f, "b")) t = CT_DF_BOOL;
    else if (!strcmp(f, "u")) t = CT_DF_STRING;
    else if (!strcmp(f, "+l")) t = CT_DF_LIST;
    else { ct__dfbuf_release(vb); return ct__error(CT_ERR_FORMAT, "import_arrow: %s: unsupported format '%s'", path, f); }
    const void *b1 = a->buffers[1];
    if (!b1 && n > 0) { ct__dfbuf_release(vb); return ct__error(CT_ERR_FORMAT, "import_arrow: %s: missing data buffer", path); }
    if (t == CT_DF_BOOL) {
        ct_dfbuf *d;
        if (off % 8 == 0 && b1) d = wrap(o, (const uint8_t *)b1 + off / 8, (size_t)(n + 7) / 8);
        else if ((d = ct__dfbuf_zeros(ct__bitmap_bytes(n))))
            for (int64_t i = 0; i < n; i++) if (ct__bit(b1, off + i)) ct__bit_set(d->ptr, i, true);
        if (!d) { ct__dfbuf_release(vb); return NULL; }
        return ct__col_make(t, n, vb, d, NULL, NULL);
    }
    if (t != CT_DF_STRING && t != CT_DF_LIST) {
        if (n == 0 || !b1) {
            ct_dfbuf *d = ct__dfbuf_new(0);
            if (!d) { ct__dfbuf_release(vb); return NULL; }
            return ct__col_make(t, 0, vb, d, NULL, NULL);
        }
        const char *src = (const char *)b1 + off * (int64_t)esz;
        ct_dfbuf *d;
        bool native = (esz == 8 || (esz == 4 && t == CT_DF_FLOAT32));
        if (native && ((uintptr_t)src % esz) == 0 && b1) d = wrap(o, src, (size_t)n * esz);
        else if ((d = ct__dfbuf_new((size_t)n * (t == CT_DF_FLOAT32 ? 4 : 8)))) {
            if (native) memcpy(d->ptr, src, (size_t)n * esz);
            else for (int64_t i = 0; i < n; i++) {
                int64_t v = esz == 4 ? ((const int32_t *)(const void *)src)[i] : esz == 2 ? ((const int16_t *)(const void *)src)[i] : ((const int8_t *)src)[i];
                ((int64_t *)d->ptr)[i] = v;
            }
        }
        if (!d) { ct__dfbuf_release(vb); return NULL; }
        return ct__col_make(t, n, vb, d, NULL, NULL);
    }
    /* strings and lists: int32 offsets */
    const int32_t *ofs = (const int32_t *)b1;
    if (!ofs) { ct__dfbuf_release(vb); return ct__error(CT_ERR_FORMAT, "import_arrow: %s: missing offsets", path); }
    ofs += off;
    for (int64_t i = 0; i < n; i++)
        if (ofs[i] < 0 || ofs[i + 1] < ofs[i]) {
            ct__dfbuf_release(vb);
            return ct__error(CT_ERR_FORMAT, "import_arrow: %s: offsets decrease or are negative at index %lld (%d, %d)",
                             path, (long long)i, ofs[i], ofs[i + 1]);
        }
    ct_dfbuf *ob;
    if (((uintptr_t)ofs % 4) == 0) ob = wrap(o, ofs, sizeof(int32_t) * (size_t)(n + 1));
    else if ((ob = ct__dfbuf_new(sizeof(int32_t) * (size_t)(n + 1)))) memcpy(ob->ptr, ofs, sizeof(int32_t) * (size_t)(n + 1));
    if (!ob) { ct__dfbuf_release(vb); return NULL; }
    if (t == CT_DF_STRING) {
        const void *b2 = a->buffers[2];
        if (!b2 && ofs[n] > 0) { ct__dfbuf_release(vb); ct__dfbuf_release(ob); return ct__error(CT_ERR_FORMAT, "import_arrow: %s: missing string data", path); }
        static const char empty[1] = {0};
        ct_dfbuf *d = wrap(o, b2 ? b2 : empty, (size_t)ofs[n]);
        if (!d) { ct__dfbuf_release(vb); ct__dfbuf_release(ob); return NULL; }
        c = ct__col_make(t, n, vb, d, ob, NULL);
        return c;
    }
    if (a->n_children != 1 || !a->children || s->n_children != 1 || !s->children) {
        ct__dfbuf_release(vb); ct__dfbuf_release(ob);
        return ct__error(CT_ERR_FORMAT, "import_arrow: %s: a list needs exactly one child", path);
    }
    char cp[256];
    snprintf(cp, sizeof cp, "%s.item", path);
    ct_column *child = import_col(o, a->children[0], s->children[0], cp, depth + 1);
    if (!child) { ct__dfbuf_release(vb); ct__dfbuf_release(ob); return NULL; }
    if (ofs[n] > child->length) {
        int64_t cl = child->length;
        ct_column_release(child); ct__dfbuf_release(vb); ct__dfbuf_release(ob);
        return ct__error(CT_ERR_FORMAT, "import_arrow: %s: last offset %d exceeds the child's length %lld", path, ofs[n], (long long)cl);
    }
    if (child->type == CT_DF_LIST) {
        ct_column_release(child); ct__dfbuf_release(vb); ct__dfbuf_release(ob);
        return ct__error(CT_ERR_FORMAT, "import_arrow: %s: nested lists are not supported", path);
    }
    return ct__col_make(t, n, vb, NULL, ob, child);
}

static struct ct_arrow_owner *owner_new(const struct ArrowArray *a) {
    struct ct_arrow_owner *o = malloc(sizeof *o);
    if (!o) return ct__error(CT_ERR_OOM, "import_arrow: out of memory");
    atomic_init(&o->rc, 1);
    o->arr = *a;
    o->armed = false;
    return o;
}

ct_column *ct_column_import_arrow(struct ArrowArray *array, const struct ArrowSchema *schema) {
    if (!array || !schema) return ct__error(CT_ERR_NULL, "import_arrow: NULL array or schema");
    if (!array->release) return ct__error(CT_ERR_FORMAT, "import_arrow: array already released");
    struct ct_arrow_owner *o = owner_new(array);
    if (!o) return NULL;
    ct_column *c = import_col(o, &o->arr, schema, schema->name && *schema->name ? schema->name : "array", 0);
    if (c) { o->armed = true; array->release = NULL; }
    ct__arrow_owner_release(o);
    return c;
}

ct_df *ct_df_import_arrow(struct ArrowArray *array, const struct ArrowSchema *schema) {
    if (!array || !schema) return ct__error(CT_ERR_NULL, "import_arrow: NULL array or schema");
    if (!array->release) return ct__error(CT_ERR_FORMAT, "import_arrow: array already released");
    if (!schema->format || strcmp(schema->format, "+s") != 0)
        return ct__error(CT_ERR_FORMAT, "import_arrow: a frame needs a struct array ('+s'), got '%s'", schema->format ? schema->format : "(null)");
    int64_t n = array->n_children;
    if (n < 0 || n > 100000 || n != schema->n_children || (n && (!array->children || !schema->children)))
        return ct__error(CT_ERR_FORMAT, "import_arrow: struct has %lld children, schema %lld", (long long)n, (long long)schema->n_children);
    if (array->null_count > 0 && array->n_buffers >= 1 && array->buffers && array->buffers[0])
        return ct__error(CT_ERR_FORMAT, "import_arrow: struct-level nulls are not supported");
    if (array->offset != 0 || array->length < 0)
        return ct__error(CT_ERR_FORMAT, "import_arrow: struct offset %lld / length %lld not supported", (long long)array->offset, (long long)array->length);
    struct ct_arrow_owner *o = owner_new(array);
    if (!o) return NULL;
    ct_column **cols = calloc((size_t)(n ? n : 1), sizeof *cols);
    const char **names = calloc((size_t)(n ? n : 1), sizeof *names);
    ct_df *df = NULL;
    int64_t k = 0;
    if (!cols || !names) { ct__error(CT_ERR_OOM, "import_arrow: out of memory"); goto done; }
    for (; k < n; k++) {
        const struct ArrowSchema *cs = schema->children[k];
        names[k] = cs && cs->name ? cs->name : "";
        if (!(cols[k] = import_col(o, array->children[k], cs, names[k], 1))) goto done;
        if (cols[k]->length != array->length) {
            ct__error(CT_ERR_FORMAT, "import_arrow: child '%s' has %lld rows, struct %lld", names[k],
                      (long long)cols[k]->length, (long long)array->length);
            k++;
            goto done;
        }
    }
    df = ct_df_new(names, cols, (int)n);
    if (df) { df->nrows = array->length; o->armed = true; array->release = NULL; }
done:
    for (int64_t i = 0; i < k && cols; i++) ct_column_release(cols[i]);
    free(cols); free(names);
    ct__arrow_owner_release(o);
    return df;
}
