/* dataset_csv.c -- a CSV file as a dataset of numeric "features" and a
 * "label".  RFC-4180 parsing (quotes, "" escapes, CRLF, newlines inside
 * quotes); malformed input is reported with line and column. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dataframe_impl.h" /* ct__parse_double, shared with read_csv */
#include "dataset_impl.h"

typedef struct {
    const char *p, *end;
    int64_t line;     /* physical line of the cursor, 1-based */
    char *field;      /* unescaped field text */
    size_t flen, fcap;
} csv_reader;

static ct_status fld_push(csv_reader *r, char c) {
    if (r->flen + 1 >= r->fcap) {
        size_t nc = r->fcap ? r->fcap * 2 : 64;
        char *nf = realloc(r->field, nc);
        if (!nf) return ct__error_status(CT_ERR_OOM, "csv_dataset: out of memory");
        r->field = nf;
        r->fcap = nc;
    }
    r->field[r->flen++] = c;
    r->field[r->flen] = 0;
    return CT_OK;
}

/* Reads one field at r->p.  *eol is set when the field ended its record
 * (newline or end of input).  col is for messages. */
static ct_status csv_field(csv_reader *r, int64_t col, bool *eol) {
    r->flen = 0;
    if (fld_push(r, 0)) return CT_ERR_OOM;
    r->flen = 0;
    if (r->p < r->end && *r->p == '"') {
        int64_t qline = r->line;
        r->p++;
        for (;;) {
            if (r->p >= r->end)
                return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: unterminated quoted field",
                                        (long long)qline, (long long)col);
            char c = *r->p++;
            if (c == '"') {
                if (r->p < r->end && *r->p == '"') { r->p++; if (fld_push(r, '"')) return CT_ERR_OOM; continue; }
                break;
            }
            if (c == '\n') r->line++;
            if (c == '\0')
                return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: NUL byte in a field",
                                        (long long)r->line, (long long)col);
            if (fld_push(r, c)) return CT_ERR_OOM;
        }
        if (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r')
            return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: unexpected character '%c' "
                                    "after a closing quote", (long long)r->line, (long long)col, *r->p);
    } else {
        while (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r') {
            if (*r->p == '"')
                return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: quote inside an "
                                        "unquoted field", (long long)r->line, (long long)col);
            if (*r->p == '\0')
                return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: NUL byte in a field",
                                        (long long)r->line, (long long)col);
            if (fld_push(r, *r->p++)) return CT_ERR_OOM;
        }
    }
    *eol = true;
    if (r->p >= r->end) return CT_OK;
    if (*r->p == ',') { r->p++; *eol = false; return CT_OK; }
    if (*r->p == '\r') {
        r->p++;
        if (r->p < r->end && *r->p == '\n') r->p++;
        else
            return ct__error_status(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: bare carriage return",
                                    (long long)r->line, (long long)col);
    } else {
        r->p++;
    }
    r->line++;
    return CT_OK;
}

static bool at_blank_line(csv_reader *r) {
    if (r->p < r->end && *r->p == '\n') { r->p++; r->line++; return true; }
    if (r->end - r->p >= 2 && r->p[0] == '\r' && r->p[1] == '\n') { r->p += 2; r->line++; return true; }
    return false;
}

typedef struct {
    ct_tensor *features; /* f32 [rows, nfeat] */
    ct_tensor *labels;   /* [rows] or NULL */
    int64_t rows;
} csv_ds;

static int64_t csv_len(void *self) { return ((csv_ds *)self)->rows; }
static ct_status csv_get(void *self, int64_t i, ct_sample *out) {
    csv_ds *d = self;
    ct_scope s = ct_scope_begin();
    ct_status st = ct_sample_set(out, "features", ct_select(d->features, 0, i));
    if (!st && d->labels) st = ct_sample_set(out, "label", ct_select(d->labels, 0, i));
    ct_scope_end(s);
    return st;
}
static void csv_free(void *self) {
    csv_ds *d = self;
    ct_release(d->features);
    ct_release(d->labels);
    free(d);
}
static const ct_dataset_vtable csv_vt = {.len = csv_len, .get = csv_get, .free = csv_free};

/* 0: the first column (in header order) whose name repeats an earlier
 * one, or -1 */
typedef struct { const char *s; int64_t i; } name_idx;
static int by_name(const void *a, const void *b) {
    const name_idx *x = a, *y = b;
    int c = strcmp(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}
static int64_t first_duplicate(char *const *names, int64_t n, ct_status *st) {
    *st = CT_OK;
    if (n < 2) return -1;
    name_idx *v = malloc(sizeof *v * (size_t)n);
    if (!v) { *st = ct__error_status(CT_ERR_OOM, "csv_dataset: out of memory"); return -1; }
    for (int64_t i = 0; i < n; i++) v[i] = (name_idx){names[i], i};
    qsort(v, (size_t)n, sizeof *v, by_name);
    int64_t dup = -1;
    for (int64_t i = 1; i < n; i++)
        if (!strcmp(v[i].s, v[i - 1].s) && (dup < 0 || v[i].i < dup)) dup = v[i].i;
    free(v);
    return dup;
}

ct_dataset *ct_csv_dataset_from_buffer(const char *data, size_t size, const char *label_column, ct_dtype label_dtype) {
    if (!data && size) return ct__error(CT_ERR_NULL, "csv_dataset: data is NULL");
    if (label_column && label_dtype != CT_I64 && label_dtype != CT_F32 && label_dtype != CT_F64)
        return ct__error(CT_ERR_DTYPE, "csv_dataset: label dtype must be int64, float32 or float64 (got %s)",
                         ct_dtype_name(label_dtype));
    csv_reader r = {.p = data ? data : "", .end = (data ? data : "") + size, .line = 1};
    char **names = NULL;
    int64_t ncol = 0, ncap = 0, label = -1;
    float *feat = NULL;
    double *lab = NULL;
    int64_t rows = 0, cap = 0;
    ct_dataset *ds = NULL;
    bool eol = false;
    /* header (after a UTF-8 byte-order mark, which is not part of the name) */
    if (r.end - r.p >= 3 && !memcmp(r.p, "\xEF\xBB\xBF", 3)) r.p += 3;
    while (r.p < r.end && at_blank_line(&r)) {}
    if (r.p >= r.end) { ct__error(CT_ERR_FORMAT, "csv_dataset: empty input (no header row)"); goto done; }
    int64_t header_line = r.line;
    while (!eol) {
        if (csv_field(&r, ncol + 1, &eol)) goto done;
        if (ncol >= 1 << 20) { ct__error(CT_ERR_FORMAT, "csv_dataset: line 1: too many columns"); goto done; }
        if (ncol == ncap) { /* geometric growth: a wide header stays linear */
            int64_t nc = ncap ? 2 * ncap : 16;
            char **nn = realloc(names, sizeof *nn * (size_t)nc);
            if (!nn) { ct__error(CT_ERR_OOM, "csv_dataset: out of memory"); goto done; }
            names = nn;
            ncap = nc;
        }
        names[ncol] = strdup(r.field ? r.field : "");
        if (!names[ncol]) { ct__error(CT_ERR_OOM, "csv_dataset: out of memory"); goto done; }
        if (label_column && label < 0 && strcmp(names[ncol], label_column) == 0) label = ncol;
        ncol++;
    }
    {
        ct_status dst;
        int64_t dup = first_duplicate(names, ncol, &dst);
        if (dst) goto done;
        if (dup >= 0) {
            ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: duplicate column name '%s'",
                      (long long)header_line, (long long)(dup + 1), names[dup]);
            goto done;
        }
    }
    if (label_column && label < 0) { ct__error(CT_ERR_ARG, "csv_dataset: no column named '%s' in the header", label_column); goto done; }
    int64_t nfeat = ncol - (label >= 0);
    /* rows */
    for (;;) {
        while (r.p < r.end && at_blank_line(&r)) {}
        if (r.p >= r.end) break;
        if (rows == cap) {
            int64_t nc = cap ? cap * 2 : 64;
            float *nf = realloc(feat, sizeof *nf * (size_t)(nc * (nfeat ? nfeat : 1)));
            if (!nf) { ct__error(CT_ERR_OOM, "csv_dataset: out of memory"); goto done; }
            feat = nf;
            double *nl = realloc(lab, sizeof *nl * (size_t)nc);
            if (!nl) { ct__error(CT_ERR_OOM, "csv_dataset: out of memory"); goto done; }
            lab = nl;
            cap = nc;
        }
        int64_t line = r.line, c = 0, f = 0;
        eol = false;
        while (!eol) {
            if (csv_field(&r, c + 1, &eol)) goto done;
            if (c >= ncol) {
                ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld: more fields than the %lld header columns",
                          (long long)line, (long long)(c + 1), (long long)ncol);
                goto done;
            }
            double v = 0;
            int pr = ct__parse_double(r.field ? r.field : "", r.flen, &v);
            if (pr <= 0) {
                ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld ('%s'): '%.40s' %s",
                          (long long)line, (long long)(c + 1), names[c], r.field ? r.field : "",
                          pr < 0 ? "is out of range for float64"
                          : r.flen ? "is not a number" : "is not a number (missing value)");
                goto done;
            }
            bool is_f32 = c != label || label_dtype == CT_F32;
            if (is_f32 && isfinite(v) && isinf((float)v)) {
                ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld ('%s'): '%.40s' is out of range for "
                          "float32", (long long)line, (long long)(c + 1), names[c], r.field);
                goto done;
            }
            if (c == label) {
                if (label_dtype == CT_I64 && (v != floor(v) || fabs(v) > 9.007199254740992e15)) {
                    ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld, column %lld ('%s'): label %s is not an integer",
                              (long long)line, (long long)(c + 1), names[c], r.field);
                    goto done;
                }
                lab[rows] = v;
            } else {
                feat[rows * nfeat + f++] = (float)v;
            }
            c++;
        }
        if (c != ncol) {
            ct__error(CT_ERR_FORMAT, "csv_dataset: line %lld: %lld fields, the header has %lld columns",
                      (long long)line, (long long)c, (long long)ncol);
            goto done;
        }
        rows++;
    }
    csv_ds *d = calloc(1, sizeof *d);
    if (!d) { ct__error(CT_ERR_OOM, "csv_dataset: out of memory"); goto done; }
    d->rows = rows;
    d->features = ct__alloc(CT_SHAPE(rows, nfeat), CT_F32, CT_CPU);
    if (d->features && rows > 0 && nfeat > 0) memcpy(ct__ptr(d->features), feat, sizeof(float) * (size_t)(rows * nfeat));
    if (label >= 0) {
        d->labels = ct__alloc(CT_SHAPE(rows), label_dtype, CT_CPU);
        if (d->labels)
            for (int64_t i = 0; i < rows; i++) ct__store_f64((char *)ct__ptr(d->labels) + i * (int64_t)ct_dtype_size(label_dtype), label_dtype, lab[i]);
        if (d->labels && label_dtype == CT_I64)
            for (int64_t i = 0; i < rows; i++) ((int64_t *)ct__ptr(d->labels))[i] = (int64_t)lab[i];
    }
    if (!d->features || (label >= 0 && !d->labels)) { csv_free(d); goto done; }
    ds = ct_dataset_new(&csv_vt, d);
    if (!ds) csv_free(d);
done:
    for (int64_t k = 0; k < ncol; k++) free(names[k]);
    free(names);
    free(feat);
    free(lab);
    free(r.field);
    return ds;
}

ct_dataset *ct_csv_dataset_new(const char *path, const char *label_column, ct_dtype label_dtype) {
    size_t n = 0;
    char *buf = ct__ds_read_file("csv_dataset_new", path, &n);
    if (!buf) return NULL;
    ct_dataset *ds = ct_csv_dataset_from_buffer(buf, n, label_column, label_dtype);
    free(buf);
    if (!ds) {
        /* prefix the path to the message */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_status code = ct_last_error_code();
        ct__error(code, "%s (file '%s')", msg, path);
    }
    return ds;
}
