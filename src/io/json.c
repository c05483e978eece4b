/* json.c -- a small strict JSON parser (RFC 8259) for file headers that come
 * from outside (safetensors).  Recursive descent with a depth limit; every
 * read is bounds-checked against the input length; objects with duplicate
 * keys are rejected; \u escapes (surrogate pairs included) are decoded to
 * UTF-8 and lone surrogates rejected, like serde_json. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io_impl.h"

typedef struct jp {
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    size_t erroff;
    int failed;
} jp;

static int jfail(jp *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int jfail(jp *p, const char *fmt, ...) {
    if (!p->failed) {
        p->failed = 1;
        p->erroff = p->i;
        va_list ap;
        va_start(ap, fmt);
        if (p->err && p->errlen) vsnprintf(p->err, p->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void skip_ws(jp *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->i++;
        else break;
    }
}

static int parse_value(jp *p, ct_jval *v, int depth);

static int hex4(jp *p, unsigned *out) {
    if (p->n - p->i < 4) return jfail(p, "truncated \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i + k];
        u <<= 4;
        if (c >= '0' && c <= '9') u |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') u |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') u |= (unsigned)(c - 'A' + 10);
        else { p->i += (size_t)k; return jfail(p, "invalid hex digit in \\u escape"); }
    }
    p->i += 4;
    *out = u;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* p->s[p->i] == '"' on entry. */
static int parse_string(jp *p, char **out, size_t *outlen) {
    p->i++;
    /* First pass: find the closing quote and check the characters; the
     * decoded string is never longer than the raw one. */
    size_t start = p->i, j = start;
    for (;;) {
        if (j >= p->n) { p->i = j; return jfail(p, "unterminated string"); }
        unsigned char c = (unsigned char)p->s[j];
        if (c == '"') break;
        if (c < 0x20) { p->i = j; return jfail(p, "control character 0x%02x in a string", c); }
        if (c == '\\') {
            if (j + 1 >= p->n) { p->i = j; return jfail(p, "unterminated string"); }
            j += 2;
        } else {
            j++;
        }
    }
    size_t raw = j - start;
    char *o = malloc(raw + 1);
    if (!o) return jfail(p, "out of memory");
    size_t k = 0;
    while (p->i < j) {
        char c = p->s[p->i];
        if (c != '\\') { o[k++] = c; p->i++; continue; }
        char e = p->s[p->i + 1];
        p->i += 2;
        switch (e) {
        case '"': o[k++] = '"'; break;
        case '\\': o[k++] = '\\'; break;
        case '/': o[k++] = '/'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'u': {
            unsigned cp;
            if (p->i > j || hex4(p, &cp)) { free(o); if (!p->failed) jfail(p, "truncated \\u escape"); return -1; }
            if (p->i > j) { free(o); return jfail(p, "truncated \\u escape"); }
            if (cp >= 0xDC00 && cp <= 0xDFFF) { free(o); return jfail(p, "lone trailing surrogate in \\u escape"); }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->i + 2 > j || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u') {
                    free(o);
                    return jfail(p, "lone leading surrogate in \\u escape");
                }
                p->i += 2;
                if (hex4(p, &lo)) { free(o); return -1; }
                if (p->i > j) { free(o); return jfail(p, "truncated \\u escape"); }
                if (lo < 0xDC00 || lo > 0xDFFF) { free(o); return jfail(p, "invalid low surrogate in \\u escape"); }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            /* an escape of n raw bytes (6 or 12) decodes to at most 4 */
            k += put_utf8(o + k, cp);
            break;
        }
        default:
            p->i -= 1;
            free(o);
            return jfail(p, "invalid escape '\\%c'", e);
        }
    }
    o[k] = '\0';
    p->i = j + 1;
    *out = o;
    *outlen = k;
    return 0;
}

static int parse_number(jp *p, ct_jval *v) {
    size_t st = p->i;
    int neg = 0, frac = 0, ex = 0;
    if (p->i < p->n && p->s[p->i] == '-') { neg = 1; p->i++; }
    if (p->i >= p->n) return jfail(p, "truncated number");
    if (p->s[p->i] == '0') {
        p->i++;
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            return jfail(p, "leading zero in a number");
    } else if (p->s[p->i] >= '1' && p->s[p->i] <= '9') {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    } else {
        return jfail(p, "invalid number");
    }
    size_t int_end = p->i;
    if (p->i < p->n && p->s[p->i] == '.') {
        frac = 1;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "digit expected after '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        ex = 1;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return jfail(p, "digit expected in exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    v->type = CT_JNUM;
    v->is_uint = false;
    if (!neg && !frac && !ex) {
        uint64_t u = 0;
        bool ok = true;
        for (size_t k = st; k < int_end; k++) {
            unsigned d = (unsigned)(p->s[k] - '0');
            if (u > (UINT64_MAX - d) / 10) { ok = false; break; }
            u = u * 10 + d;
        }
        v->is_uint = ok;
        v->u = ok ? u : 0;
    }
    return 0;
}

static int lit(jp *p, const char *w) {
    size_t L = strlen(w);
    if (p->n - p->i < L || memcmp(p->s + p->i, w, L) != 0) return jfail(p, "invalid literal");
    p->i += L;
    return 0;
}

static int grow(jp *p, ct_jval *v, bool obj) {
    if (v->n < v->cap) return 0;
    int nc = v->cap ? v->cap * 2 : 4;
    if (nc > (1 << 28)) return jfail(p, "too many items");
    ct_jval *ni = realloc(v->items, sizeof *ni * (size_t)nc);
    if (!ni) return jfail(p, "out of memory");
    v->items = ni;
    if (obj) {
        char **nk = realloc(v->keys, sizeof *nk * (size_t)nc);
        if (!nk) return jfail(p, "out of memory");
        v->keys = nk;
        size_t *nl = realloc(v->keylens, sizeof *nl * (size_t)nc);
        if (!nl) return jfail(p, "out of memory");
        v->keylens = nl;
    }
    v->cap = nc;
    return 0;
}

typedef struct { const char *k; size_t n; } keyref;
static int keycmp(const void *a, const void *b) {
    const keyref *x = a, *y = b;
    size_t m = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->k, y->k, m);
    if (c) return c;
    return (x->n > y->n) - (x->n < y->n);
}

static int check_dup_keys(jp *p, const ct_jval *v, size_t obj_start) {
    if (v->n < 2) return 0;
    keyref *r = malloc(sizeof *r * (size_t)v->n);
    if (!r) return jfail(p, "out of memory");
    for (int i = 0; i < v->n; i++) { r[i].k = v->keys[i]; r[i].n = v->keylens[i]; }
    qsort(r, (size_t)v->n, sizeof *r, keycmp);
    for (int i = 1; i < v->n; i++)
        if (keycmp(&r[i - 1], &r[i]) == 0) {
            char shown[80];
            size_t m = r[i].n < 60 ? r[i].n : 60;
            for (size_t q = 0; q < m; q++) {
                unsigned char c = (unsigned char)r[i].k[q];
                shown[q] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
            }
            shown[m] = '\0';
            const char *more = r[i].n > 60 ? "..." : "";
            free(r);
            p->i = obj_start;
            return jfail(p, "duplicate key \"%s%s\"", shown, more);
        }
    free(r);
    return 0;
}

static int parse_value(jp *p, ct_jval *v, int depth) {
    memset(v, 0, sizeof *v);
    skip_ws(p);
    if (p->i >= p->n) return jfail(p, "unexpected end of input");
    char c = p->s[p->i];
    switch (c) {
    case 'n': v->type = CT_JNULL; return lit(p, "null");
    case 't': v->type = CT_JBOOL; v->b = true; return lit(p, "true");
    case 'f': v->type = CT_JBOOL; v->b = false; return lit(p, "false");
    case '"': v->type = CT_JSTR; return parse_string(p, &v->s, &v->slen);
    case '[': {
        if (depth >= CT_JSON_MAX_DEPTH) return jfail(p, "nesting deeper than %d", CT_JSON_MAX_DEPTH);
        v->type = CT_JARR;
        p->i++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ']') { p->i++; return 0; }
        for (;;) {
            if (grow(p, v, false)) return -1;
            if (parse_value(p, &v->items[v->n], depth + 1)) { v->n++; return -1; }
            v->n++;
            skip_ws(p);
            if (p->i >= p->n) return jfail(p, "unterminated array");
            if (p->s[p->i] == ',') { p->i++; continue; }
            if (p->s[p->i] == ']') { p->i++; return 0; }
            return jfail(p, "',' or ']' expected in an array");
        }
    }
    case '{': {
        if (depth >= CT_JSON_MAX_DEPTH) return jfail(p, "nesting deeper than %d", CT_JSON_MAX_DEPTH);
        size_t obj_start = p->i;
        v->type = CT_JOBJ;
        p->i++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == '}') { p->i++; return 0; }
        for (;;) {
            skip_ws(p);
            if (p->i >= p->n) return jfail(p, "unterminated object");
            if (p->s[p->i] != '"') return jfail(p, "string key expected in an object");
            if (grow(p, v, true)) return -1;
            char *key;
            size_t klen;
            if (parse_string(p, &key, &klen)) return -1;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { free(key); return jfail(p, "':' expected after an object key"); }
            p->i++;
            v->keys[v->n] = key;
            v->keylens[v->n] = klen;
            if (parse_value(p, &v->items[v->n], depth + 1)) { v->n++; return -1; }
            v->n++;
            skip_ws(p);
            if (p->i >= p->n) return jfail(p, "unterminated object");
            if (p->s[p->i] == ',') { p->i++; continue; }
            if (p->s[p->i] == '}') { p->i++; return check_dup_keys(p, v, obj_start); }
            return jfail(p, "',' or '}' expected in an object");
        }
    }
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
        return jfail(p, "unexpected character '%c'", (c >= 0x20 && c < 0x7f) ? c : '?');
    }
}

void ct__json_free(ct_jval *v) {
    if (!v) return;
    if (v->type == CT_JSTR) free(v->s);
    if (v->type == CT_JARR || v->type == CT_JOBJ) {
        for (int i = 0; i < v->n; i++) {
            ct__json_free(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        free(v->keylens);
    }
    memset(v, 0, sizeof *v);
}

int ct__json_parse(const char *s, size_t n, ct_jval *out, char *err, size_t errlen, size_t *erroff) {
    jp p = {s, n, 0, err, errlen, 0, 0};
    memset(out, 0, sizeof *out);
    int r = parse_value(&p, out, 0);
    if (!r) {
        skip_ws(&p);
        if (p.i != p.n) r = jfail(&p, "trailing characters after the JSON value");
    }
    if (r) {
        ct__json_free(out);
        if (erroff) *erroff = p.erroff;
        return -1;
    }
    return 0;
}

const ct_jval *ct__json_get(const ct_jval *v, const char *key) {
    if (!v || v->type != CT_JOBJ) return NULL;
    size_t L = strlen(key);
    for (int i = 0; i < v->n; i++)
        if (v->keylens[i] == L && memcmp(v->keys[i], key, L) == 0) return &v->items[i];
    return NULL;
}

int ct__utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        unsigned cp, min;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
        else goto fail;
        if (n - i < len) goto fail;
        for (size_t k = 1; k < len; k++) {
            unsigned d = s[i + k];
            if ((d & 0xC0) != 0x80) goto fail;
            cp = (cp << 6) | (d & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto fail;
        i += len;
    }
    return 1;
fail:
    if (bad) *bad = i;
    return 0;
}
