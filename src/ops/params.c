/* params.c -- the descriptor tables generated from params.def, and the
 * equality, hash and printing of an op's parameters computed from them. */
#include <inttypes.h>
#include <stdio.h>

#include "op_table.h"

/* one descriptor array per family */
#define CT_PARAM_BEGIN(fam) static const ct_pfield fields_##fam[] = {
#define CT_PARAM(fam, kind, name) {#name, CT_PK_##kind, offsetof(ct_p_##fam, name), 1, 0},
#define CT_PARAM_ARR(fam, name, N) {#name, CT_PK_ARR, offsetof(ct_p_##fam, name), N, 0},
#define CT_PARAM_LIST(fam, name, N) \
    {#name, CT_PK_LIST, offsetof(ct_p_##fam, name), N, offsetof(ct_p_##fam, name##_n)},
#define CT_PARAM_END(fam) };
#include "params.def"

const ct_pfamily_info ct__pfamilies[CT_PFAM_COUNT] = {
    [CT_PFAM_none] = {"none", 0, NULL, 0},
#define CT_PARAM_BEGIN(fam) \
    [CT_PFAM_##fam] = {#fam, sizeof(ct_p_##fam), fields_##fam, (int)(sizeof fields_##fam / sizeof(ct_pfield))},
#include "params.def"
};

const unsigned char ct__op_pfam[CT_OP_COUNT] = {
#define CT_PARAM_OP(op, fam) [CT_OP_##op] = CT_PFAM_##fam,
#include "params.def"
};

static int list_count(const ct_pfield *f, const char *base) {
    int n;
    memcpy(&n, base + f->count_off, sizeof n);
    return n < 0 ? 0 : n > f->n ? f->n : n;
}

static bool field_equal(const ct_pfield *f, const char *a, const char *b) {
    switch (f->kind) {
    case CT_PK_I64: case CT_PK_F64: /* bits: -0.0 != 0.0, NaN == NaN */
        return memcmp(a + f->off, b + f->off, 8) == 0;
    case CT_PK_BOOL: return *(const bool *)(const void *)(a + f->off) == *(const bool *)(const void *)(b + f->off);
    case CT_PK_DTYPE: return memcmp(a + f->off, b + f->off, sizeof(ct_dtype)) == 0;
    case CT_PK_STR: {
        const char *x, *y;
        memcpy(&x, a + f->off, sizeof x);
        memcpy(&y, b + f->off, sizeof y);
        return x == y || (x && y && strcmp(x, y) == 0);
    }
    case CT_PK_ARR: return memcmp(a + f->off, b + f->off, sizeof(int64_t) * (size_t)f->n) == 0;
    case CT_PK_LIST: {
        int n = list_count(f, a);
        return n == list_count(f, b) && memcmp(a + f->off, b + f->off, sizeof(int64_t) * (size_t)n) == 0;
    }
    }
    return false;
}

bool ct__args_equal(const ct_args *a, const ct_args *b) {
    if (a->op != b->op) return false;
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[a->op]];
    const char *x = (const char *)&a->p, *y = (const char *)&b->p;
    for (int k = 0; k < fi->nfields; k++)
        if (!field_equal(&fi->fields[k], x, y)) return false;
    return true;
}

/* FNV-1a, 64 bit */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 0x100000001b3ull; }
    return h;
}

uint64_t ct__args_hash(const ct_args *a) {
    uint64_t h = 0xcbf29ce484222325ull;
    int op = (int)a->op;
    h = fnv(h, &op, sizeof op);
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[a->op]];
    const char *x = (const char *)&a->p;
    for (int k = 0; k < fi->nfields; k++) {
        const ct_pfield *f = &fi->fields[k];
        h = fnv(h, &k, sizeof k); /* which field: equal values in different fields differ */
        switch (f->kind) {
        case CT_PK_I64: case CT_PK_F64: h = fnv(h, x + f->off, 8); break;
        case CT_PK_BOOL: { unsigned char v = *(const bool *)(const void *)(x + f->off); h = fnv(h, &v, 1); break; }
        case CT_PK_DTYPE: h = fnv(h, x + f->off, sizeof(ct_dtype)); break;
        case CT_PK_STR: {
            const char *s;
            memcpy(&s, x + f->off, sizeof s);
            if (s) h = fnv(h, s, strlen(s) + 1);
            break;
        }
        case CT_PK_ARR: h = fnv(h, x + f->off, sizeof(int64_t) * (size_t)f->n); break;
        case CT_PK_LIST: {
            int n = list_count(f, x);
            h = fnv(h, &n, sizeof n);
            h = fnv(h, x + f->off, sizeof(int64_t) * (size_t)n);
            break;
        }
        }
    }
    return h;
}

static void put_ints(ct_sbuf *sb, const int64_t *v, int n) {
    ct__sbuf_put(sb, "[");
    for (int i = 0; i < n; i++) ct__sbuf_put(sb, "%s%" PRId64, i ? ", " : "", v[i]);
    ct__sbuf_put(sb, "]");
}

char *ct__args_str(const ct_args *a) {
    ct_sbuf sb = {0};
    ct__sbuf_put(&sb, "%s(", ct__op_info[a->op].name);
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[a->op]];
    const char *x = (const char *)&a->p;
    for (int k = 0; k < fi->nfields; k++) {
        const ct_pfield *f = &fi->fields[k];
        ct__sbuf_put(&sb, "%s%s=", k ? ", " : "", f->name);
        const void *p = x + f->off;
        switch (f->kind) {
        case CT_PK_I64: { int64_t v; memcpy(&v, p, 8); ct__sbuf_put(&sb, "%" PRId64, v); break; }
        case CT_PK_F64: { double v; memcpy(&v, p, 8); ct__sbuf_put(&sb, "%.17g", v); break; }
        case CT_PK_BOOL: ct__sbuf_put(&sb, "%s", *(const bool *)p ? "true" : "false"); break;
        case CT_PK_DTYPE: {
            ct_dtype d;
            memcpy(&d, p, sizeof d);
            ct__sbuf_put(&sb, "%s", (unsigned)d < CT_DTYPE_COUNT ? ct_dtype_name(d) : "?");
            break;
        }
        case CT_PK_STR: {
            const char *s;
            memcpy(&s, p, sizeof s);
            if (s) ct__sbuf_put(&sb, "\"%s\"", s); else ct__sbuf_put(&sb, "%s", "NULL");
            break;
        }
        case CT_PK_ARR: put_ints(&sb, p, f->n); break;
        case CT_PK_LIST: put_ints(&sb, p, list_count(f, x)); break;
        }
    }
    ct__sbuf_put(&sb, ")");
    if (sb.oom) { free(sb.s); return NULL; }
    return sb.s;
}
