/* render.c -- ew_math.def as strings, and the renderer of render.h. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "render.h"

typedef struct ew_line {
    ct_op op;
    int kind;  /* CT_EWK_* */
    char cls;  /* 'F' 'I' 'B' 'A' */
    bool bool_out;
    const char *expr;
} ew_line;

/* The stringification happens here, at the first expansion, so #expr is the
 * text of ew_math.def (no macro in it expanded). */
#define EW_CLS_F 'F'
#define EW_CLS_I 'I'
#define EW_CLS_B 'B'
#define EW_CLS_A 'A'
#define EW_OUT_SAME false
#define EW_OUT_BOOL true
#define CT_EW(OP, KIND, CLASS, OUT, EXPR) \
    {CT_OP_##OP, CT_EWK_##KIND, EW_CLS_##CLASS, EW_OUT_##OUT, #EXPR},
static const ew_line g_lines[] = {
#include "ew_math.def"
};
#undef CT_EW
enum { NLINES = (int)(sizeof g_lines / sizeof g_lines[0]) };

static bool class_has(char cls, ct_dtype dt) {
    bool f = dt == CT_F32 || dt == CT_F64, b = dt == CT_BOOL;
    bool i = dt == CT_U8 || dt == CT_I8 || dt == CT_I16 || dt == CT_I32 || dt == CT_I64;
    switch (cls) {
    case 'F': return f;
    case 'I': return i;
    case 'B': return b;
    case 'A': return f || i || b;
    default: return false;
    }
}

static const ew_line *find(ct_op op, ct_dtype dt) {
    for (int k = 0; k < NLINES; k++)
        if (g_lines[k].op == op && class_has(g_lines[k].cls, dt)) return &g_lines[k];
    return NULL;
}

int ct__ew_kind(ct_op op) {
    for (int k = 0; k < NLINES; k++)
        if (g_lines[k].op == op) return g_lines[k].kind;
    return CT_EWK_NONE;
}

int ct__ew_arity(ct_op op) {
    switch (ct__ew_kind(op)) {
    case CT_EWK_UNARY: return 1;
    case CT_EWK_BINARY: return 2;
    case CT_EWK_TERNARY: case CT_EWK_WHERE: return 3;
    default: return 0;
    }
}

bool ct__ew_supports(ct_op op, ct_dtype dt) { return find(op, dt) != NULL; }

int ct__ew_out_dtype(ct_op op, ct_dtype dt) {
    const ew_line *l = find(op, dt);
    return l ? (int)(l->bool_out ? CT_BOOL : dt) : -1;
}

const char *ct__ew_expr(ct_op op, ct_dtype dt) {
    const ew_line *l = find(op, dt);
    return l ? l->expr : NULL;
}

const char *ct__ew_ctype(ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: case CT_U8: return "uint8_t";
    case CT_I8: return "int8_t";
    case CT_I16: return "int16_t";
    case CT_I32: return "int32_t";
    case CT_I64: return "int64_t";
    case CT_F32: return "float";
    case CT_F64: return "double";
    default: return NULL;
    }
}

const char *ct__ew_prelude(void) {
    /* the kernels' order: <tgmath.h> before ew_scalar.h */
    return "#include <float.h>\n#include <stdint.h>\n#include <tgmath.h>\n#include \"ew_scalar.h\"\n";
}

int ct__ew_literal_f64(char *buf, size_t n, double v) {
    if (isnan(v)) return snprintf(buf, n, signbit(v) ? "(-(double)NAN)" : "((double)NAN)");
    if (isinf(v)) return snprintf(buf, n, v < 0 ? "(-(double)INFINITY)" : "((double)INFINITY)");
    return snprintf(buf, n, "(%a)", v);
}

/* ---- the renderer: a pass over the expression's C tokens ---- */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *t = realloc(b->s, cap);
        if (!t) { b->oom = true; return; }
        b->s = t, b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* the literal of ct_p_ew field `name` (n chars) of p into buf; false when
 * the family has no such field */
static _Thread_local const char *tl_param_prefix; /* ct__ew_render_named */

static bool param_literal(const char *name, size_t n, const ct_p_ew *p, char *buf, size_t cap) {
    static const ct_p_ew zero;
    if (!p) p = &zero;
    const ct_pfamily_info *fam = &ct__pfamilies[CT_PFAM_ew];
    for (int k = 0; k < fam->nfields; k++) {
        const ct_pfield *f = &fam->fields[k];
        if (strlen(f->name) != n || memcmp(f->name, name, n) != 0) continue;
        if (tl_param_prefix) { /* the field by name: the program defines it */
            snprintf(buf, cap, "%s%s", tl_param_prefix, f->name);
            return true;
        }
        const char *at = (const char *)p + f->off;
        switch (f->kind) {
        case CT_PK_F64: {
            double v;
            memcpy(&v, at, sizeof v);
            ct__ew_literal_f64(buf, cap, v);
            return true;
        }
        case CT_PK_I64: {
            int64_t v;
            memcpy(&v, at, sizeof v);
            if (v == INT64_MIN) snprintf(buf, cap, "((int64_t)(-9223372036854775807LL - 1))");
            else snprintf(buf, cap, "((int64_t)%" PRId64 "LL)", v);
            return true;
        }
        case CT_PK_BOOL: {
            bool v;
            memcpy(&v, at, sizeof v);
            snprintf(buf, cap, "%d", v ? 1 : 0);
            return true;
        }
        default: return false;
        }
    }
    return false;
}

char *ct__ew_render(ct_op op, ct_dtype dt, const char *const *operands, const ct_p_ew *p) {
    const char *opname = (unsigned)op < CT_OP_COUNT ? ct__op_info[op].name : "ew_render";
    const ew_line *l = (unsigned)op < CT_OP_COUNT ? find(op, dt) : NULL;
    if (!l) {
        ct__error(CT_ERR_DTYPE, "%s: no elementwise expression for dtype %s", opname,
                  (unsigned)dt < CT_DTYPE_COUNT ? ct_dtype_name(dt) : "?");
        return NULL;
    }
    int nops = ct__ew_arity(op);
    for (int k = 0; k < nops; k++)
        if (!operands || !operands[k]) {
            ct__error(CT_ERR_ARG, "%s: operand %d of the rendered expression is NULL", opname, k);
            return NULL;
        }
    const char *ctype = ct__ew_ctype(dt);
    sbuf b = {0};
    const char *s = l->expr;
    while (*s) {
        char c = *s;
        if ((c >= '0' && c <= '9') || (c == '.' && s[1] >= '0' && s[1] <= '9')) {
            /* a preprocessing number: 0x1p+3, 1e-5, 0.5f (its letters are
             * not identifiers) */
            const char *e = s + 1;
            while (ident_char(*e) || *e == '.' ||
                   ((*e == '+' || *e == '-') && strchr("eEpP", e[-1])))
                e++;
            put(&b, s, (size_t)(e - s));
            s = e;
        } else if (c == '\'' || c == '"') { /* a character or string literal, verbatim */
            const char *e = s + 1;
            while (*e && *e != c) e += (*e == '\\' && e[1]) ? 2 : 1;
            if (*e) e++;
            put(&b, s, (size_t)(e - s));
            s = e;
        } else if (ident_start(c)) {
            const char *e = s;
            while (ident_char(*e)) e++;
            size_t n = (size_t)(e - s);
            /* a member name (after '.' or '->') is not an operand */
            const char *q = s;
            while (q > l->expr && q[-1] == ' ') q--;
            bool member = q > l->expr && (q[-1] == '.' || (q[-1] == '>' && q - 1 > l->expr && q[-2] == '-'));
            if (!member && n == 2 && memcmp(s, "ew", 2) == 0) {
                const char *f = e;
                while (*f == ' ') f++;
                if (*f != '.') goto plain;
                f++;
                while (*f == ' ') f++;
                const char *fe = f;
                while (ident_char(*fe)) fe++;
                char lit[64];
                if (!param_literal(f, (size_t)(fe - f), p, lit, sizeof lit)) {
                    ct__error(CT_ERR_ARG, "%s: ew_math.def names ew.%.*s, which ct_p_ew does not have",
                              opname, (int)(fe - f), f);
                    free(b.s);
                    return NULL;
                }
                puts_(&b, lit);
                s = fe;
                continue;
            }
            if (!member && n == 1 && (*s == 'x' || *s == 'y' || *s == 'z') && *s - 'x' < nops) {
                puts_(&b, "(");
                puts_(&b, operands[*s - 'x']);
                puts_(&b, ")");
                s = e;
                continue;
            }
            if (!member && n == 8 && memcmp(s, "scalar_t", 8) == 0) {
                puts_(&b, ctype);
                s = e;
                continue;
            }
        plain:
            put(&b, s, n);
            s = e;
        } else {
            put(&b, s, 1);
            s++;
        }
    }
    if (b.oom || !b.s) {
        free(b.s);
        ct__error(CT_ERR_OOM, "%s: out of memory rendering its expression", opname);
        return NULL;
    }
    return b.s;
}

char *ct__ew_render_named(ct_op op, ct_dtype dt, const char *const *operands, const char *prefix) {
    tl_param_prefix = prefix;
    char *r = ct__ew_render(op, dt, operands, NULL);
    tl_param_prefix = NULL;
    return r;
}
