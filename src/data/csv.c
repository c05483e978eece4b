/* csv.c -- ct_df_read_csv / ct_df_to_csv.
 *
 * The file is read and tokenized in one serial pass into field spans
 * (offset, length, quoted/escaped flags), tracking physical line numbers
 * for errors.  Type inference and conversion then run per column over
 * row chunks in parallel (OpenMP; chunks are multiples of 64 rows so the
 * bitmaps are written without sharing bytes).  Numbers use a fast exact
 * path (Clinger: <= 19 significant digits and |exp10| <= 22 are exact in
 * double arithmetic) with strtod as the fallback. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/dataframe_impl.h"
#include "io/io_impl.h"

/* ---- number parsing ----------------------------------------------------
 * Strict, shared by ct_df_read_csv and ct_csv_dataset_new: decimal only
 * (no hex, no locale), optional sign and surrounding blanks, the whole
 * field consumed (an embedded NUL or any trailing character makes it not a
 * number); "inf", "infinity" and "nan" in any case, like pandas. */
static inline bool is_sp(char c) { return c == ' ' || c == '\t'; }

int ct__parse_int64(const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    while (i < n && is_sp(s[i])) i++;
    while (n > i && is_sp(s[n - 1])) n--;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n) return 0;
    uint64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9) return 0;
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

static const double pow10_tab[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static bool ieq(const char *s, size_t n, const char *lit) {
    size_t m = strlen(lit);
    if (n != m) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c != lit[i]) return false;
    }
    return true;
}

int ct__parse_double(const char *s, size_t n, double *out) {
    size_t i = 0;
    while (i < n && is_sp(s[i])) i++;
    while (n > i && is_sp(s[n - 1])) n--;
    size_t b = i;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n) return 0;
    if (s[i] == 'i' || s[i] == 'I' || s[i] == 'n' || s[i] == 'N') {
        if (ieq(s + i, n - i, "inf") || ieq(s + i, n - i, "infinity")) { *out = neg ? -INFINITY : INFINITY; return 1; }
        if (ieq(s + i, n - i, "nan")) { *out = NAN; return 1; }
        return 0;
    }
    uint64_t m = 0;
    int sig = 0, exp10 = 0, ndig = 0;
    bool overflow_digits = false;
    for (; i < n && (unsigned)(s[i] - '0') <= 9; i++, ndig++) {
        if (m == 0 && s[i] == '0') continue;
        if (sig < 19) { m = m * 10 + (unsigned)(s[i] - '0'); sig++; }
        else { exp10++; if (s[i] != '0') overflow_digits = true; }
    }
    if (i < n && s[i] == '.') {
        i++;
        for (; i < n && (unsigned)(s[i] - '0') <= 9; i++, ndig++) {
            if (m == 0 && s[i] == '0') { exp10--; continue; }
            if (sig < 19) { m = m * 10 + (unsigned)(s[i] - '0'); sig++; exp10--; }
            else if (s[i] != '0') overflow_digits = true;
        }
    }
    if (ndig == 0) return 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= n) return 0;
        int e = 0;
        for (; i < n && (unsigned)(s[i] - '0') <= 9; i++) if (e < 100000) e = e * 10 + (s[i] - '0');
        exp10 += eneg ? -e : e;
    }
    if (i != n) return 0;
    if (!overflow_digits && m <= (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        double v = (double)m;
        v = exp10 < 0 ? v / pow10_tab[-exp10] : v * pow10_tab[exp10];
        *out = neg ? -v : v;
        return 1;
    }
    /* slow path: strtod on a NUL-terminated copy of the validated text */
    char buf[128];
    size_t len = n - b;
    char *p = len < sizeof buf ? buf : malloc(len + 1);
    if (!p) return 0;
    memcpy(p, s + b, len);
    p[len] = 0;
    double v = strtod(p, NULL);
    if (p != buf) free(p);
    /* the text is finite decimal (inf/nan returned above): an infinite
     * result is an overflow, which callers report (underflow to 0 or a
     * subnormal is accepted, like pandas and strtod) */
    if (isinf(v)) return -1;
    *out = v;
    return 1;
}

/* ---- tokenizer --------------------------------------------------------- */
enum { F_QUOTED = 1, F_ESCAPED = 2 };
typedef struct { int64_t off; int32_t len; uint32_t flags; } span;

typedef struct {
    span *v;
    int64_t n, cap;
} spans;

static int spans_push(spans *s, int64_t off, int64_t len, uint32_t flags) {
    if (s->n == s->cap) {
        int64_t nc = s->cap ? s->cap * 2 : 1024;
        span *v = realloc(s->v, sizeof(span) * (size_t)nc);
        if (!v) return -1;
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n].off = off;
    s->v[s->n].len = (int32_t)len;
    s->v[s->n].flags = flags;
    s->n++;
    return 0;
}

/* NA set */
typedef struct {
    const char *const *v;
    int n;
    int32_t lens[64];     /* lengths of the first 64 entries */
    uint32_t lenmask;   /* bit l set: some NA string has length l (< 32) */
    bool long_ones;
} na_set;

static const char *const default_na[] = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                                         "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "n/a",
                                         "nan", "null"};

static inline bool is_na(const na_set *na, const char *s, int32_t len) {
    if (len == 0) return true;
    if (len < 32 && !((na->lenmask >> len) & 1)) return false;
    if (len >= 32 && !na->long_ones) return false;
    for (int k = 0; k < na->n; k++) {
        int32_t l = k < 64 ? na->lens[k] : (int32_t)strlen(na->v[k]);
        if (l == len && na->v[k][0] == s[0] && memcmp(na->v[k], s, (size_t)len) == 0) return true;
    }
    return false;
}

static inline bool parse_bool(const char *s, int32_t n, bool *out) {
    if (n == 4 && (!memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4) || !memcmp(s, "true", 4))) { *out = true; return true; }
    if (n == 5 && (!memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5) || !memcmp(s, "false", 5))) { *out = false; return true; }
    return false;
}

/* unescapes "" -> " into dst; returns the length */
static int32_t unescape(const char *s, int32_t n, char *dst) {
    int32_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        dst[o++] = s[i];
        if (s[i] == '"' && i + 1 < n && s[i + 1] == '"') i++;
    }
    return o;
}

enum { T_BOOL = 1, T_INT = 2, T_FLOAT = 4 };

typedef struct {
    const char *data;
    const span *f;       /* row-major fields */
    int ncols;
    int64_t nrows;
    const na_set *na;
    int nthreads;
    char *const *names;  /* column names, for messages */
} csv_ctx;

/* physical line (1-based) of byte off: for messages only */
static int64_t line_of(const char *data, int64_t off) {
    int64_t line = 1;
    for (const char *p = data, *end = data + off; (p = memchr(p, '\n', (size_t)(end - p))); p++) line++;
    return line;
}

#define FIELD(ctx, r, c) (&(ctx)->f[(r) * (ctx)->ncols + (c)])

static ct_column *convert_column(const csv_ctx *x, int c) {
    const int64_t n = x->nrows;
    const int T = n >= 4096 ? x->nthreads : 1;
    /* 1. one pass: inference, validity, and the values parsed as int64
     * and as double (whichever type wins, its buffer is the column's);
     * chunks are multiples of 64 rows so bitmap bytes are not shared */
    const int64_t nblk = (n + 63) / 64;
    ct_dfbuf *vb = ct__dfbuf_zeros(ct__bitmap_bytes(n));
    ct_dfbuf *ib = ct__dfbuf_new((size_t)n * 8), *db = ct__dfbuf_new((size_t)n * 8);
    if (!vb || !ib || !db) { ct__dfbuf_release(vb); ct__dfbuf_release(ib); ct__dfbuf_release(db); return NULL; }
    uint8_t *valid = vb->ptr;
    int64_t *iv = ib->ptr;
    double *dv = db->ptr;
    unsigned can = T_BOOL | T_INT | T_FLOAT;
    int64_t nvalid = 0, ovf = INT64_MAX; /* ovf: first row whose number overflows a double */
#pragma omp parallel for num_threads(T) reduction(& : can) reduction(+ : nvalid) reduction(min : ovf) schedule(static)
    for (int t = 0; t < T; t++) {
        int64_t r0 = nblk * t / T * 64, r1 = nblk * (t + 1) / T * 64;
        if (r1 > n) r1 = n;
        unsigned k = T_BOOL | T_INT | T_FLOAT;
        int64_t nv = 0;
        for (int64_t r = r0; r < r1; r++) {
            const span *sp = FIELD(x, r, c);
            const char *s = x->data + sp->off;
            iv[r] = 0;
            dv[r] = 0;
            if (!(sp->flags & F_ESCAPED) && is_na(x->na, s, sp->len)) continue;
            valid[r >> 3] |= (uint8_t)(1u << (r & 7));
            nv++;
            if (!k) continue;
            if (sp->flags & F_ESCAPED) { k = 0; continue; }
            if (k & T_BOOL) { bool b; if (!parse_bool(s, sp->len, &b)) k &= ~(unsigned)T_BOOL; }
            if (k & T_INT) {
                if (ct__parse_int64(s, (size_t)sp->len, &iv[r])) { dv[r] = (double)iv[r]; continue; }
                k &= ~(unsigned)T_INT;
            }
            if (k & T_FLOAT) {
                int pr = ct__parse_double(s, (size_t)sp->len, &dv[r]);
                if (pr == 0) k &= ~(unsigned)T_FLOAT;
                else if (pr < 0 && r < ovf) ovf = r;
            }
        }
        can &= k;
        nvalid += nv;
    }
    ct_df_type type = nvalid == 0 ? CT_DF_STRING
                      : (can & T_BOOL) ? CT_DF_BOOL
                      : (can & T_INT) ? CT_DF_INT64
                      : (can & T_FLOAT) ? CT_DF_FLOAT64 : CT_DF_STRING;
    if (type == CT_DF_INT64) { ct__dfbuf_release(db); return ct__col_make(type, n, vb, ib, NULL, NULL); }
    if (type == CT_DF_FLOAT64 && ovf < n) {
        const span *sp = FIELD(x, ovf, c);
        ct__dfbuf_release(vb);
        ct__dfbuf_release(ib);
        ct__dfbuf_release(db);
        return ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %d ('%s'): '%.*s' is out of range for float64",
                         (long long)line_of(x->data, sp->off), c + 1, x->names[c], sp->len > 40 ? 40 : (int)sp->len,
                         x->data + sp->off);
    }
    if (type == CT_DF_FLOAT64) { ct__dfbuf_release(ib); return ct__col_make(type, n, vb, db, NULL, NULL); }
    ct__dfbuf_release(ib);
    ct__dfbuf_release(db);
    if (type == CT_DF_BOOL) {
        ct_dfbuf *d = ct__dfbuf_zeros(ct__bitmap_bytes(n));
        if (!d) { ct__dfbuf_release(vb); return NULL; }
        for (int64_t r = 0; r < n; r++) {
            const span *sp = FIELD(x, r, c);
            bool v = false;
            if (ct__bit(valid, r) && parse_bool(x->data + sp->off, sp->len, &v) && v) ct__bit_set(d->ptr, r, true);
        }
        return ct__col_make(type, n, vb, d, NULL, NULL);
    }
    /* strings: lengths, prefix sum, copy */
    ct_dfbuf *ob = ct__dfbuf_new(sizeof(int32_t) * (size_t)(n + 1));
    if (!ob) { ct__dfbuf_release(vb); return NULL; }
    int32_t *off = ob->ptr;
    int64_t total = 0;
    off[0] = 0;
    for (int64_t r = 0; r < n; r++) {
        const span *sp = FIELD(x, r, c);
        bool ok = ct__bit(valid, r);
        int32_t l = 0;
        if (ok) {
            l = sp->len;
            if (sp->flags & F_ESCAPED)
                for (int32_t i = 0; i + 1 < sp->len; i++)
                    if (x->data[sp->off + i] == '"' && x->data[sp->off + i + 1] == '"') { l--; i++; }
        }
        total += l;
        if (total > INT32_MAX) {
            ct__dfbuf_release(vb); ct__dfbuf_release(ob);
            return ct__error(CT_ERR_OVERFLOW, "read_csv: string column %d exceeds 2 GiB", c + 1);
        }
        off[r + 1] = (int32_t)total;
    }
    ct_dfbuf *d = ct__dfbuf_new((size_t)total);
    if (!d) { ct__dfbuf_release(vb); ct__dfbuf_release(ob); return NULL; }
    char *dst = d->ptr;
#pragma omp parallel for num_threads(T) schedule(static)
    for (int64_t r = 0; r < n; r++) {
        const span *sp = FIELD(x, r, c);
        int32_t l = off[r + 1] - off[r];
        if (!l) continue;
        if (sp->flags & F_ESCAPED) unescape(x->data + sp->off, sp->len, dst + off[r]);
        else memcpy(dst + off[r], x->data + sp->off, (size_t)l);
    }
    return ct__col_make(CT_DF_STRING, n, vb, d, ob, NULL);
}

/* pandas' mangling of duplicate column names (mangle_dupe_cols=True):
 * "a", "a" -> "a", "a.1"; a generated name that is taken gets another
 * suffix ("a", "a.1", "a" -> "a", "a.1", "a.2"; "a", "a", "a.1" -> "a", "a.1",
 * "a.1.1").  names[i] are malloc'ed and may be replaced.  0, or -1 (OOM). */
typedef struct { const char *key; int64_t count; } name_count;

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static name_count *name_slot(name_count *t, uint64_t mask, const char *key) {
    for (uint64_t i = name_hash(key) & mask;; i = (i + 1) & mask)
        if (!t[i].key || strcmp(t[i].key, key) == 0) return &t[i];
}

static int dedup_names(char **names, int64_t n) {
    uint64_t cap = 16;
    while (cap < (uint64_t)n * 2) cap <<= 1;
    name_count *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    int rc = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        char *col = names[i];
        name_count *e = name_slot(t, cap - 1, col);
        int64_t cur = e->key ? e->count : 0;
        while (cur > 0) {
            e->count = cur + 1;
            size_t l = strlen(col) + 24;
            char *nc = malloc(l);
            if (!nc) { rc = -1; break; }
            snprintf(nc, l, "%s.%lld", col, (long long)cur);
            if (col != names[i]) free(col);
            col = nc;
            e = name_slot(t, cap - 1, col);
            cur = e->key ? e->count : 0;
        }
        if (rc) { if (col != names[i]) free(col); break; }
        if (col != names[i]) { free(names[i]); names[i] = col; }
        e->key = names[i];
        e->count = cur + 1;
    }
    free(t);
    return rc;
}

ct_df *ct_df_read_csv_buffer(const char *data, size_t size, const ct_csv_opts *opts) {
    if (!data && size) return ct__error(CT_ERR_NULL, "read_csv: NULL data");
    /* a UTF-8 byte-order mark is not part of the first column's name */
    if (size >= 3 && !memcmp(data, "\xEF\xBB\xBF", 3)) { data += 3; size -= 3; }
    char delim = opts && opts->delimiter ? opts->delimiter : ',';
    if (delim == '"' || delim == '\n' || delim == '\r')
        return ct__error(CT_ERR_ARG, "read_csv: invalid delimiter 0x%02x", (unsigned char)delim);
    na_set na = {default_na, (int)(sizeof default_na / sizeof *default_na), {0}, 0, false};
    if (opts && opts->na_values) { na.v = opts->na_values; na.n = opts->n_na_values; }
    na.lenmask = 1;
    for (int k = 0; k < na.n; k++) {
        if (!na.v[k]) return ct__error(CT_ERR_NULL, "read_csv: NULL NA string %d", k);
        size_t l = strlen(na.v[k]);
        if (k < 64) na.lens[k] = (int32_t)(l > INT32_MAX ? INT32_MAX : l);
        if (l < 32) na.lenmask |= 1u << l;
        else na.long_ones = true;
    }
    spans sp = {0};
    /* one allocation for the worst case (a field takes at least one byte
     * or a delimiter): untouched pages cost nothing */
    sp.cap = (int64_t)(size / 2) + 16;
    sp.v = malloc(sizeof(span) * (size_t)sp.cap);
    if (!sp.v) sp.cap = 0;
    int64_t pos = 0, line = 1, ncols = -1, nrows = 0;
    const int64_t sz = (int64_t)size;
    ct_df *out = NULL;
    ct_column **cols = NULL;
    char **names = NULL;
    while (pos < sz) {
        /* blank lines */
        if (data[pos] == '\n') { pos++; line++; continue; }
        if (data[pos] == '\r' && (pos + 1 == sz || data[pos + 1] == '\n')) {
            pos += pos + 1 < sz ? 2 : 1;
            line++;
            continue;
        }
        int64_t row_line = line, nf = 0;
        for (;;) {
            int64_t col = nf + 1;
            if (ncols >= 0 && nf >= ncols) {
                ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: expected %lld fields, got more",
                          (long long)row_line, (long long)col, (long long)ncols);
                goto fail;
            }
            int64_t start, len;
            uint32_t flags = 0;
            if (pos < sz && data[pos] == '"') {
                int64_t qline = line;
                pos++;
                start = pos;
                flags = F_QUOTED;
                for (;;) {
                    const char *q = memchr(data + pos, '"', (size_t)(sz - pos));
                    if (!q) {
                        ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: unterminated quoted field",
                                  (long long)qline, (long long)col);
                        goto fail;
                    }
                    int64_t qp = q - data;
                    for (const char *nl = data + pos; (nl = memchr(nl, '\n', (size_t)(q - nl))); nl++) line++;
                    if (qp + 1 < sz && data[qp + 1] == '"') { flags |= F_ESCAPED; pos = qp + 2; continue; }
                    len = qp - start;
                    pos = qp + 1;
                    break;
                }
                if (memchr(data + start, 0, (size_t)len)) {
                    ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: NUL byte in a field",
                              (long long)qline, (long long)col);
                    goto fail;
                }
                if (pos < sz && data[pos] != delim && data[pos] != '\n' &&
                    !(data[pos] == '\r' && (pos + 1 == sz || data[pos + 1] == '\n'))) {
                    unsigned char ch = (unsigned char)data[pos];
                    ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: unexpected character '%c' (0x%02x) after a closing quote",
                              (long long)line, (long long)col, ch >= 32 && ch < 127 ? ch : '?', ch);
                    goto fail;
                }
            } else {
                start = pos;
                while (pos < sz) {
                    char ch = data[pos];
                    if (ch == delim || ch == '\n') break;
                    if (ch == '\r' && (pos + 1 == sz || data[pos + 1] == '\n')) break;
                    if (ch == '\0') {
                        ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: NUL byte in a field",
                                  (long long)line, (long long)col);
                        goto fail;
                    }
                    pos++;
                }
                len = pos - start;
            }
            if (len > INT32_MAX) {
                ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: field longer than 2 GiB",
                          (long long)row_line, (long long)col);
                goto fail;
            }
            if (spans_push(&sp, start, len, flags)) { ct__error(CT_ERR_OOM, "read_csv: out of memory"); goto fail; }
            nf++;
            if (pos < sz && data[pos] == delim) { pos++; continue; }
            if (pos < sz && data[pos] == '\r') pos++;
            if (pos < sz && data[pos] == '\n') { pos++; line++; }
            break;
        }
        if (ncols < 0) ncols = nf;
        else {
            if (nf != ncols) {
                ct__error(CT_ERR_FORMAT, "read_csv: line %lld, column %lld: expected %lld fields, got %lld",
                          (long long)row_line, (long long)(nf + 1), (long long)ncols, (long long)nf);
                goto fail;
            }
            nrows++;
        }
    }
    if (ncols < 0) {
        ct__error(CT_ERR_FORMAT, "read_csv: no header row (empty input)");
        goto fail;
    }
    bool header = !(opts && opts->no_header);
    if (!header) nrows++;
    names = calloc((size_t)ncols, sizeof(char *));
    cols = calloc((size_t)ncols, sizeof(ct_column *));
    if (!names || !cols) { ct__error(CT_ERR_OOM, "read_csv: out of memory"); goto fail; }
    for (int64_t c = 0; c < ncols; c++) {
        if (header) {
            const span *h = &sp.v[c];
            names[c] = malloc((size_t)h->len + 1);
            if (!names[c]) { ct__error(CT_ERR_OOM, "read_csv: out of memory"); goto fail; }
            int32_t l = unescape(data + h->off, h->len, names[c]);
            names[c][l] = 0;
        } else {
            names[c] = malloc(24);
            if (!names[c]) { ct__error(CT_ERR_OOM, "read_csv: out of memory"); goto fail; }
            snprintf(names[c], 24, "%lld", (long long)c);
        }
    }
    if (header && dedup_names(names, ncols)) { ct__error(CT_ERR_OOM, "read_csv: out of memory"); goto fail; }
    int nth = opts && opts->num_threads > 0 ? opts->num_threads : omp_get_max_threads();
    csv_ctx x = {data, sp.v + (header ? ncols : 0), (int)ncols, nrows, &na, nth < 1 ? 1 : nth, names};
    for (int64_t c = 0; c < ncols; c++)
        if (!(cols[c] = convert_column(&x, (int)c))) goto fail;
    out = ct__df_make(names, cols, (int)ncols, nrows);
fail:
    if (cols) for (int64_t c = 0; c < ncols; c++) ct_column_release(cols[c]);
    if (names) for (int64_t c = 0; c < ncols; c++) free(names[c]);
    free(cols);
    free(names);
    free(sp.v);
    return out;
}

ct_df *ct_df_read_csv(const char *path, const ct_csv_opts *opts) {
    if (!path) return ct__error(CT_ERR_NULL, "read_csv: NULL path");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ct__error(CT_ERR_IO, "read_csv: cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ct__error(CT_ERR_IO, "read_csv: '%s' is not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) { close(fd); return ct_df_read_csv_buffer("", 0, opts); }
    /* read, not mapped: a file truncated by another process while being
     * parsed would kill a mapping's reader with SIGBUS */
    char *m = malloc(size);
    if (!m) { close(fd); return ct__error(CT_ERR_OOM, "read_csv: out of memory reading '%s' (%zu bytes)", path, size); }
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, m + got, size - got < ((size_t)1 << 30) ? size - got : (size_t)1 << 30);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            free(m);
            if (k < 0) return ct__error(CT_ERR_IO, "read_csv: reading '%s' failed: %s", path, strerror(e));
            return ct__error(CT_ERR_IO, "read_csv: '%s' shrank from %zu to %zu bytes while being read", path, size, got);
        }
        got += (size_t)k;
    }
    close(fd);
    ct_df *df = ct_df_read_csv_buffer(m, size, opts);
    free(m);
    return df;
}

/* ---- to_csv ------------------------------------------------------------ */
static void write_str(FILE *f, const char *s, int32_t l) {
    bool q = false;
    for (int32_t i = 0; i < l && !q; i++) q = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!q) { fwrite(s, 1, (size_t)l, f); return; }
    fputc('"', f);
    for (int32_t i = 0; i < l; i++) {
        if (s[i] == '"') fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

static void write_value(FILE *f, const ct_column *c, int64_t i, const char *ff) {
    if (!ct__col_valid(c, i)) return;
    switch (c->type) {
    case CT_DF_INT64: fprintf(f, "%lld", (long long)((const int64_t *)c->data->ptr)[i]); break;
    case CT_DF_FLOAT64: case CT_DF_FLOAT32: fprintf(f, ff, ct_column_get_double(c, i)); break;
    case CT_DF_BOOL: fputs(ct__bit(c->data->ptr, i) ? "True" : "False", f); break;
    case CT_DF_STRING: { int32_t l; const char *s = ct__col_str(c, i, &l); write_str(f, s, l); break; }
    case CT_DF_LIST: {
        const int32_t *o = ct__col_off(c);
        fputs("\"[", f);
        for (int32_t j = o[i]; j < o[i + 1]; j++) {
            if (j > o[i]) fputs(", ", f);
            if (c->child->type == CT_DF_STRING) {
                int32_t l; const char *s = ct__col_str(c->child, j, &l);
                fputc('\'', f);
                for (int32_t k = 0; k < l; k++) { if (s[k] == '"') fputc('"', f); fputc(s[k], f); }
                fputc('\'', f);
            } else write_value(f, c->child, j, ff);
        }
        fputs("]\"", f);
        break;
    }
    }
}

ct_status ct_df_to_csv(const ct_df *df, const char *path, const char *float_fmt) {
    if (!df || !path) return ct__error_status(CT_ERR_NULL, "to_csv: NULL frame or path");
    const char *ff = float_fmt ? float_fmt : "%.17g";
    ct_atomic_file af;
    ct_status st = ct__atomic_begin("to_csv", path, &af);
    if (st) return st;
    FILE *f = af.fp;
    for (int c = 0; c < df->ncols; c++) {
        if (c) fputc(',', f);
        write_str(f, df->names[c], (int32_t)strlen(df->names[c]));
    }
    fputc('\n', f);
    for (int64_t r = 0; r < df->nrows; r++) {
        for (int c = 0; c < df->ncols; c++) {
            if (c) fputc(',', f);
            write_value(f, df->cols[c], r, ff);
        }
        fputc('\n', f);
    }
    return ct__atomic_commit("to_csv", &af);
}
