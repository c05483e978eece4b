/* dataframe_ops.c -- vectorized column expressions: fill_null, cast,
 * arithmetic and comparisons, log, clip, standardize, min-max scale,
 * bucketize, one-hot, string functions, the tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataframe_impl.h"

static inline bool is_num(ct_df_type t) {
    return t == CT_DF_INT64 || t == CT_DF_FLOAT64 || t == CT_DF_FLOAT32 || t == CT_DF_BOOL;
}
static inline double ldd(const ct_column *c, int64_t i) {
    switch (c->type) {
    case CT_DF_INT64: return (double)((const int64_t *)c->data->ptr)[i];
    case CT_DF_FLOAT64: return ((const double *)c->data->ptr)[i];
    case CT_DF_FLOAT32: return ((const float *)c->data->ptr)[i];
    case CT_DF_BOOL: return ct__bit(c->data->ptr, i);
    default: return NAN;
    }
}
static inline int64_t ldi(const ct_column *c, int64_t i) {
    return c->type == CT_DF_INT64 ? ((const int64_t *)c->data->ptr)[i]
         : c->type == CT_DF_BOOL ? (int64_t)ct__bit(c->data->ptr, i) : (int64_t)ldd(c, i);
}
static ct_dfbuf *copy_validity(const ct_column *c) {
    if (!c->validity) return NULL;
    ct_dfbuf *b = ct__dfbuf_zeros(ct__bitmap_bytes(c->length));
    if (b) memcpy(b->ptr, c->validity->ptr, (size_t)(c->length + 7) / 8);
    return b;
}
/* AND of two optional bitmaps; *err on OOM */
static ct_dfbuf *and_validity(const ct_column *a, const ct_column *b, int *err) {
    *err = 0;
    if (!a->validity && !b->validity) return NULL;
    size_t nb = (size_t)(a->length + 7) / 8;
    ct_dfbuf *v = ct__dfbuf_zeros(ct__bitmap_bytes(a->length));
    if (!v) { *err = 1; return NULL; }
    uint8_t *o = v->ptr;
    for (size_t k = 0; k < nb; k++) {
        uint8_t x = a->validity ? ((uint8_t *)a->validity->ptr)[k] : 0xff;
        uint8_t y = b->validity ? ((uint8_t *)b->validity->ptr)[k] : 0xff;
        o[k] = x & y;
    }
    return v;
}
/* a numeric column of type t from a double (or int64) generator */
static ct_column *new_numeric(ct_df_type t, int64_t n, ct_dfbuf *validity, void **ptr) {
    size_t bytes = t == CT_DF_BOOL ? ct__bitmap_bytes(n) : (size_t)n * (t == CT_DF_FLOAT32 ? 4 : 8);
    ct_dfbuf *d = t == CT_DF_BOOL ? ct__dfbuf_zeros(bytes) : ct__dfbuf_new(bytes);
    if (!d) { ct__dfbuf_release(validity); return NULL; }
    *ptr = d->ptr;
    ct_column *c = ct__col_make(t, n, validity, d, NULL, NULL);
    return c;
}
static inline void st(ct_df_type t, void *p, int64_t i, double v) {
    if (t == CT_DF_FLOAT64) ((double *)p)[i] = v;
    else if (t == CT_DF_FLOAT32) ((float *)p)[i] = (float)v;
    else if (t == CT_DF_INT64) ((int64_t *)p)[i] = (int64_t)v;
    else if (v != 0) ct__bit_set(p, i, true);
}

/* ---- fill_null / cast ---- */
ct_column *ct_column_fill_null(const ct_column *c, double value) {
    if (!c) return NULL;
    if (!is_num(c->type))
        return ct__error(CT_ERR_DTYPE, "fill_null: a %s column needs ct_column_fill_null_str", ct_df_type_name(c->type));
    if (c->type == CT_DF_INT64 && (value != floor(value) || !isfinite(value)))
        return ct__error(CT_ERR_ARG, "fill_null: value %g is not an integer (int64 column)", value);
    if (!c->validity) return ct_column_retain((ct_column *)c);
    int64_t n = c->length;
    void *p;
    ct_column *o = new_numeric(c->type, n, NULL, &p);
    if (!o) return NULL;
    const uint8_t *vb = c->validity->ptr;
    switch (c->type) {
    case CT_DF_INT64: { const int64_t *s = c->data->ptr; int64_t *d = p; int64_t fv = (int64_t)value;
        for (int64_t i = 0; i < n; i++) { d[i] = ct__bit(vb, i) ? s[i] : fv; }
        break; }
    case CT_DF_FLOAT64: { const double *s = c->data->ptr; double *d = p;
        for (int64_t i = 0; i < n; i++) { d[i] = ct__bit(vb, i) ? s[i] : value; }
        break; }
    case CT_DF_FLOAT32: { const float *s = c->data->ptr; float *d = p;
        for (int64_t i = 0; i < n; i++) { d[i] = ct__bit(vb, i) ? s[i] : (float)value; }
        break; }
    default:
        for (int64_t i = 0; i < n; i++) if (ct__bit(vb, i) ? ct__bit(c->data->ptr, i) : value != 0) ct__bit_set(p, i, true);
    }
    return o;
}

ct_column *ct_column_fill_null_str(const ct_column *c, const char *value) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "fill_null_str: column is %s, not string", ct_df_type_name(c->type));
    if (!value) return ct__error(CT_ERR_NULL, "fill_null_str: NULL value");
    ct__strbuild b;
    ct__sb_init(&b, c->length);
    size_t vl = strlen(value);
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (ct__col_valid(c, i)) ct__sb_push(&b, s, (size_t)l, true);
        else ct__sb_push(&b, value, vl, true);
    }
    return ct__sb_finish(&b, "fill_null_str");
}

ct_column *ct_column_cast(const ct_column *c, ct_df_type to) {
    if (!c) return NULL;
    if (!is_num(c->type) || !is_num(to))
        return ct__error(CT_ERR_DTYPE, "cast: cannot cast %s to %s", ct_df_type_name(c->type), ct_df_type_name(to));
    int64_t n = c->length;
    ct_dfbuf *vb = c->validity ? copy_validity(c) : NULL;
    if (c->validity && !vb) return NULL;
    if (to == CT_DF_INT64 && (c->type == CT_DF_FLOAT64 || c->type == CT_DF_FLOAT32)) {
        if (!vb) { if (!(vb = ct__dfbuf_new(ct__bitmap_bytes(n)))) return NULL; memset(vb->ptr, 0xff, ct__bitmap_bytes(n)); }
    }
    void *p;
    ct_column *o = new_numeric(to, n, vb, &p);
    if (!o) return NULL;
    for (int64_t i = 0; i < n; i++) {
        if (to == CT_DF_INT64) {
            double v = ldd(c, i);
            if (c->type == CT_DF_INT64 || c->type == CT_DF_BOOL) ((int64_t *)p)[i] = ldi(c, i);
            else if (!isfinite(v) || fabs(v) >= 9.2e18) { ((int64_t *)p)[i] = 0; ct__bit_set(o->validity->ptr, i, false); }
            else ((int64_t *)p)[i] = (int64_t)v;
        } else st(to, p, i, ldd(c, i));
    }
    if (o->validity) ct__col_fix_nulls(o);
    return o;
}

/* ---- binary ops ---- */
typedef struct { const ct_column *c; double d; int64_t i; int kind; /* 0 col, 1 float, 2 int */ } opnd;
static inline double od(const opnd *o, int64_t r) { return o->kind == 0 ? ldd(o->c, r) : o->kind == 1 ? o->d : (double)o->i; }
static inline int64_t oi(const opnd *o, int64_t r) { return o->kind == 0 ? ldi(o->c, r) : o->i; }
static const char *op_name(ct_df_op op) {
    static const char *n[] = {"+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=", "&", "|"};
    return (unsigned)op < 12 ? n[op] : "?";
}
/* 0 int-like, 1 f32, 2 f64 */
static int tier(const opnd *o) {
    if (o->kind == 1) return 2;
    if (o->kind == 2) return 0;
    return o->c->type == CT_DF_FLOAT64 ? 2 : o->c->type == CT_DF_FLOAT32 ? 1 : 0;
}

static ct_column *binop(opnd A, ct_df_op op, opnd B) {
    const ct_column *ref = A.kind == 0 ? A.c : B.c;
    int64_t n = ref->length;
    if ((unsigned)op > CT_DF_OR) return ct__error(CT_ERR_ARG, "binary: bad op %d", (int)op);
    if (A.kind == 0 && B.kind == 0 && A.c->length != B.c->length)
        return ct__error(CT_ERR_SHAPE, "binary %s: lengths %lld and %lld differ", op_name(op),
                         (long long)A.c->length, (long long)B.c->length);
    bool cmp = op >= CT_DF_EQ && op <= CT_DF_GE;
    /* strings: comparisons between two string columns */
    if ((A.kind == 0 && A.c->type == CT_DF_STRING) || (B.kind == 0 && B.c->type == CT_DF_STRING)) {
        if (!cmp || A.kind || B.kind || A.c->type != B.c->type)
            return ct__error(CT_ERR_DTYPE, "binary %s: unsupported for %s and %s", op_name(op),
                             A.kind ? "scalar" : ct_df_type_name(A.c->type), B.kind ? "scalar" : ct_df_type_name(B.c->type));
        int e; ct_dfbuf *vb = and_validity(A.c, B.c, &e);
        if (e) return NULL;
        void *p; ct_column *o = new_numeric(CT_DF_BOOL, n, vb, &p);
        if (!o) return NULL;
        for (int64_t i = 0; i < n; i++) {
            int32_t la, lb; const char *sa = ct__col_str(A.c, i, &la), *sb = ct__col_str(B.c, i, &lb);
            int m = memcmp(sa, sb, (size_t)(la < lb ? la : lb));
            int r = m ? m : (la > lb) - (la < lb);
            bool v = op == CT_DF_EQ ? r == 0 : op == CT_DF_NE ? r != 0 : op == CT_DF_LT ? r < 0 : op == CT_DF_LE ? r <= 0 : op == CT_DF_GT ? r > 0 : r >= 0;
            if (v) ct__bit_set(p, i, true);
        }
        return o;
    }
    if ((A.kind == 0 && !is_num(A.c->type)) || (B.kind == 0 && !is_num(B.c->type)))
        return ct__error(CT_ERR_DTYPE, "binary %s: unsupported column type %s", op_name(op),
                         ct_df_type_name((A.kind == 0 && !is_num(A.c->type) ? A.c : B.c)->type));
    if (op == CT_DF_AND || op == CT_DF_OR) {
        if (A.kind || B.kind || A.c->type != CT_DF_BOOL || B.c->type != CT_DF_BOOL)
            return ct__error(CT_ERR_DTYPE, "binary %s: needs two bool columns", op_name(op));
    }
    int e; ct_dfbuf *vb;
    if (A.kind == 0 && B.kind == 0) vb = and_validity(A.c, B.c, &e);
    else { vb = copy_validity(ref); e = ref->validity && !vb; }
    if (e) return NULL;
    int ta = tier(&A), tb = tier(&B);
    /* weak scalars: a float scalar with a float32 column stays float32 */
    if (A.kind == 1 && tb == 1) ta = 1;
    if (B.kind == 1 && ta == 1) tb = 1;
    int t = ta > tb ? ta : tb;
    ct_df_type rt = cmp || op >= CT_DF_AND ? CT_DF_BOOL
                  : op == CT_DF_DIV ? (t == 1 ? CT_DF_FLOAT32 : CT_DF_FLOAT64)
                  : t == 0 ? CT_DF_INT64 : t == 1 ? CT_DF_FLOAT32 : CT_DF_FLOAT64;
    void *p; ct_column *o = new_numeric(rt, n, vb, &p);
    if (!o) return NULL;
    if (rt == CT_DF_BOOL) {
        for (int64_t i = 0; i < n; i++) {
            bool v;
            if (t == 0) {
                int64_t x = oi(&A, i), y = oi(&B, i);
                switch (op) {
                case CT_DF_EQ: v = x == y; break; case CT_DF_NE: v = x != y; break;
                case CT_DF_LT: v = x < y; break; case CT_DF_LE: v = x <= y; break;
                case CT_DF_GT: v = x > y; break; case CT_DF_GE: v = x >= y; break;
                case CT_DF_AND: v = x && y; break; default: v = x || y;
                }
            } else {
                double x = od(&A, i), y = od(&B, i);
                if (t == 1) { x = (float)x; y = (float)y; }
                switch (op) {
                case CT_DF_EQ: v = x == y; break; case CT_DF_NE: v = x != y; break;
                case CT_DF_LT: v = x < y; break; case CT_DF_LE: v = x <= y; break;
                case CT_DF_GT: v = x > y; break; default: v = x >= y; break;
                }
            }
            if (v) ct__bit_set(p, i, true);
        }
    } else if (rt == CT_DF_INT64) {
        int64_t *d = p;
        for (int64_t i = 0; i < n; i++) {
            uint64_t x = (uint64_t)oi(&A, i), y = (uint64_t)oi(&B, i);
            d[i] = (int64_t)(op == CT_DF_ADD ? x + y : op == CT_DF_SUB ? x - y : x * y);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            double x = od(&A, i), y = od(&B, i), v;
            if (rt == CT_DF_FLOAT32) { float xf = (float)x, yf = (float)y;
                v = op == CT_DF_ADD ? xf + yf : op == CT_DF_SUB ? xf - yf : op == CT_DF_MUL ? xf * yf : xf / yf; }
            else v = op == CT_DF_ADD ? x + y : op == CT_DF_SUB ? x - y : op == CT_DF_MUL ? x * y : x / y;
            st(rt, p, i, v);
        }
    }
    return o;
}

ct_column *ct_column_binary(const ct_column *a, ct_df_op op, const ct_column *b) {
    if (!a || !b) return NULL;
    return binop((opnd){a, 0, 0, 0}, op, (opnd){b, 0, 0, 0});
}
ct_column *ct_column_binary_scalar(const ct_column *a, ct_df_op op, double s, bool reverse) {
    if (!a) return NULL;
    opnd x = {a, 0, 0, 0}, y = {NULL, s, 0, 1};
    return reverse ? binop(y, op, x) : binop(x, op, y);
}
ct_column *ct_column_binary_int(const ct_column *a, ct_df_op op, int64_t s, bool reverse) {
    if (!a) return NULL;
    opnd x = {a, 0, 0, 0}, y = {NULL, (double)s, s, 2};
    return reverse ? binop(y, op, x) : binop(x, op, y);
}
ct_column *ct_column_compare_str(const ct_column *a, ct_df_op op, const char *s) {
    if (!a) return NULL;
    if (!s) return ct__error(CT_ERR_NULL, "compare_str: NULL string");
    if (a->type != CT_DF_STRING || op < CT_DF_EQ || op > CT_DF_GE)
        return ct__error(CT_ERR_DTYPE, "compare_str: needs a string column and a comparison");
    const char *one[1] = {s};
    ct_column *sc = ct_column_from_strings(one, 1);
    if (!sc) return NULL;
    int64_t n = a->length;
    int64_t *idx = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    ct_column *b = idx ? ct_column_take(sc, idx, n) : ct__error(CT_ERR_OOM, "compare_str: out of memory");
    free(idx);
    ct_column_release(sc);
    ct_column *o = ct_column_binary(a, op, b);
    ct_column_release(b);
    return o;
}
ct_column *ct_column_not(const ct_column *a) {
    if (!a) return NULL;
    if (a->type != CT_DF_BOOL) return ct__error(CT_ERR_DTYPE, "not: needs a bool column, got %s", ct_df_type_name(a->type));
    ct_dfbuf *vb = copy_validity(a);
    if (a->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(CT_DF_BOOL, a->length, vb, &p);
    if (!o) return NULL;
    for (int64_t i = 0; i < a->length; i++) if (!ct__bit(a->data->ptr, i)) ct__bit_set(p, i, true);
    return o;
}

/* ---- unary numeric ---- */
static ct_column *unary_float(const ct_column *c, const char *op, void *ctx,
                              double (*f)(double, void *)) {
    if (!c) return NULL;
    if (!is_num(c->type)) return ct__error(CT_ERR_DTYPE, "%s: needs a numeric column, got %s", op, ct_df_type_name(c->type));
    ct_df_type rt = c->type == CT_DF_FLOAT32 ? CT_DF_FLOAT32 : CT_DF_FLOAT64;
    ct_dfbuf *vb = copy_validity(c);
    if (c->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(rt, c->length, vb, &p);
    if (!o) return NULL;
    int64_t n = c->length;
    if (c->type == CT_DF_FLOAT64) {
        const double *s = c->data->ptr; double *d = p;
        for (int64_t i = 0; i < n; i++) d[i] = f(s[i], ctx);
    } else for (int64_t i = 0; i < n; i++) st(rt, p, i, f(ldd(c, i), ctx));
    return o;
}
static double f_log(double x, void *ctx) { (void)ctx; return log(x); }
ct_column *ct_column_log(const ct_column *c) { return unary_float(c, "log", NULL, f_log); }

typedef struct { double a, b; } lin;
static double f_lin(double x, void *ctx) { const lin *l = ctx; return (x - l->a) / l->b; }

ct_column *ct_column_clip(const ct_column *c, double lo, double hi) {
    if (!c) return NULL;
    if (!is_num(c->type)) return ct__error(CT_ERR_DTYPE, "clip: needs a numeric column, got %s", ct_df_type_name(c->type));
    if (isnan(lo) || isnan(hi) || lo > hi) return ct__error(CT_ERR_ARG, "clip: bad bounds [%g, %g]", lo, hi);
    bool int_ok = (c->type == CT_DF_INT64 || c->type == CT_DF_BOOL) && (isinf(lo) || lo == floor(lo)) &&
                  (isinf(hi) || hi == floor(hi));
    ct_df_type rt = int_ok ? CT_DF_INT64 : c->type == CT_DF_FLOAT32 ? CT_DF_FLOAT32 : CT_DF_FLOAT64;
    ct_dfbuf *vb = copy_validity(c);
    if (c->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(rt, c->length, vb, &p);
    if (!o) return NULL;
    int64_t n = c->length;
    if (rt == CT_DF_INT64) {
        int64_t l = isinf(lo) ? INT64_MIN : (int64_t)lo, h = isinf(hi) ? INT64_MAX : (int64_t)hi;
        int64_t *d = p;
        for (int64_t i = 0; i < n; i++) { int64_t v = ldi(c, i); d[i] = v < l ? l : v > h ? h : v; }
    } else if (c->type == CT_DF_FLOAT64) {
        const double *s = c->data->ptr; double *d = p;
        for (int64_t i = 0; i < n; i++) { double v = s[i]; d[i] = v < lo ? lo : v > hi ? hi : v; }
    } else for (int64_t i = 0; i < n; i++) { double v = ldd(c, i); st(rt, p, i, v < lo ? lo : v > hi ? hi : v); }
    return o;
}

/* mean and std (ddof 1), min, max over non-null, non-NaN values */
static void moments(const ct_column *c, double *mean, double *sd, double *mn, double *mx) {
    double s = 0, mi = INFINITY, ma = -INFINITY;
    int64_t k = 0, n = c->length;
    for (int64_t i = 0; i < n; i++) {
        if (!ct__col_valid(c, i)) continue;
        double v = ldd(c, i);
        if (isnan(v)) continue;
        s += v; k++;
        if (v < mi) mi = v;
        if (v > ma) ma = v;
    }
    double m = k ? s / (double)k : NAN, q = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!ct__col_valid(c, i)) continue;
        double v = ldd(c, i);
        if (!isnan(v)) q += (v - m) * (v - m);
    }
    *mean = m;
    *sd = k > 1 ? sqrt(q / (double)(k - 1)) : NAN;
    *mn = k ? mi : NAN;
    *mx = k ? ma : NAN;
}

ct_column *ct_column_standardize(const ct_column *c) {
    if (!c) return NULL;
    if (!is_num(c->type)) return ct__error(CT_ERR_DTYPE, "standardize: needs a numeric column, got %s", ct_df_type_name(c->type));
    lin l; double mn, mx;
    moments(c, &l.a, &l.b, &mn, &mx);
    return unary_float(c, "standardize", &l, f_lin);
}
ct_column *ct_column_minmax_scale(const ct_column *c) {
    if (!c) return NULL;
    if (!is_num(c->type)) return ct__error(CT_ERR_DTYPE, "minmax_scale: needs a numeric column, got %s", ct_df_type_name(c->type));
    double m, sd, mn, mx;
    moments(c, &m, &sd, &mn, &mx);
    lin l = {mn, mx - mn == 0 ? NAN : mx - mn};
    return unary_float(c, "minmax_scale", &l, f_lin);
}

ct_column *ct_column_bucketize(const ct_column *c, const double *b, int nb, bool right) {
    if (!c) return NULL;
    if (!is_num(c->type)) return ct__error(CT_ERR_DTYPE, "bucketize: needs a numeric column, got %s", ct_df_type_name(c->type));
    if (nb < 0 || (nb > 0 && !b)) return ct__error(CT_ERR_ARG, "bucketize: bad boundaries");
    for (int k = 1; k < nb; k++)
        if (!(b[k - 1] <= b[k])) return ct__error(CT_ERR_ARG, "bucketize: boundaries not sorted at index %d (%g > %g)", k, b[k - 1], b[k]);
    ct_dfbuf *vb = copy_validity(c);
    if (c->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(CT_DF_INT64, c->length, vb, &p);
    if (!o) return NULL;
    int64_t *d = p;
    for (int64_t i = 0; i < c->length; i++) {
        double x = ldd(c, i);
        int lo = 0, hi = nb;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            bool go_right = right ? !(x < b[mid]) : !(x <= b[mid]);
            if (go_right) lo = mid + 1; else hi = mid;
        }
        d[i] = lo;
    }
    return o;
}

/* ---- one hot ---- */
ct_df *ct_df_one_hot(const ct_df *df, const char *name) {
    if (!df) return NULL;
    const ct_column *c = ct_df_column(df, name);
    if (!c) return NULL;
    if (c->type != CT_DF_INT64 && c->type != CT_DF_STRING && c->type != CT_DF_BOOL)
        return ct__error(CT_ERR_DTYPE, "one_hot: column '%s' is %s (int64, string or bool needed)", name, ct_df_type_name(c->type));
    int64_t n = c->length;
    int64_t *ord = ct__df_argsort(&c, NULL, 1, n);
    if (!ord) return NULL;
    /* distinct values in sorted order: representative rows */
    int64_t *rep = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *grp = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    ct_df *out = NULL, *cur = NULL;
    if (!rep || !grp) { ct__error(CT_ERR_OOM, "one_hot: out of memory"); goto done; }
    int64_t ng = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t r = ord[k];
        if (!ct__col_valid(c, r)) { grp[r] = -1; continue; }
        bool same = false;
        if (ng) {
            int64_t q = rep[ng - 1];
            if (c->type == CT_DF_STRING) {
                int32_t la, lb; const char *a = ct__col_str(c, r, &la), *b = ct__col_str(c, q, &lb);
                same = la == lb && memcmp(a, b, (size_t)la) == 0;
            } else same = ldi(c, r) == ldi(c, q);
        }
        if (!same) rep[ng++] = r;
        grp[r] = ng - 1;
    }
    cur = ct_df_drop(df, name);
    for (int64_t g = 0; g < ng && cur; g++) {
        char label[512];
        int64_t q = rep[g];
        if (c->type == CT_DF_STRING) {
            int32_t l; const char *s = ct__col_str(c, q, &l);
            snprintf(label, sizeof label, "%s_%.*s", name, l > 400 ? 400 : (int)l, s);
        } else if (c->type == CT_DF_BOOL) snprintf(label, sizeof label, "%s_%s", name, ldi(c, q) ? "True" : "False");
        else snprintf(label, sizeof label, "%s_%lld", name, (long long)ldi(c, q));
        void *p;
        ct_column *oc = new_numeric(CT_DF_INT64, n, NULL, &p);
        if (!oc) { ct_df_free(cur); cur = NULL; break; }
        for (int64_t i = 0; i < n; i++) ((int64_t *)p)[i] = grp[i] == g;
        ct_df *nx = ct_df_with_column(cur, label, oc);
        ct_column_release(oc);
        ct_df_free(cur);
        cur = nx;
    }
    out = cur;
done:
    free(ord); free(rep); free(grp);
    return out;
}

ct_tensor *ct_column_one_hot_tensor(const ct_column *c, int64_t num_classes) {
    if (!c) return NULL;
    if (c->type != CT_DF_INT64) return ct__error(CT_ERR_DTYPE, "one_hot_tensor: needs an int64 column, got %s", ct_df_type_name(c->type));
    if (c->null_count) return ct__error(CT_ERR_ARG, "one_hot_tensor: column has %lld nulls", (long long)c->null_count);
    const int64_t *v = c->data->ptr;
    int64_t n = c->length;
    if (num_classes < 0) {
        num_classes = 0;
        for (int64_t i = 0; i < n; i++) if (v[i] + 1 > num_classes) num_classes = v[i] + 1;
    }
    for (int64_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= num_classes)
            return ct__error(CT_ERR_INDEX, "one_hot_tensor: row %lld: class %lld out of range [0, %lld)",
                             (long long)i, (long long)v[i], (long long)num_classes);
    int64_t shape[2] = {n, num_classes};
    ct_tensor *t = ct_zeros_on(shape, 2, CT_I64, CT_CPU);
    if (!t) return NULL;
    int64_t *d = ct_data_ptr(t);
    for (int64_t i = 0; i < n; i++) d[i * num_classes + v[i]] = 1;
    return t;
}

/* ---- strings ---- */
static ct_column *str_map(const ct_column *c, const char *op, int mode) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "%s: needs a string column, got %s", op, ct_df_type_name(c->type));
    ct__strbuild b;
    ct__sb_init(&b, c->length);
    char small[256];
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (!ct__col_valid(c, i)) { ct__sb_push(&b, "", 0, false); continue; }
        if (mode == 2) {
            while (l && (*s == ' ' || (*s >= '\t' && *s <= '\r'))) { s++; l--; }
            while (l && (s[l - 1] == ' ' || (s[l - 1] >= '\t' && s[l - 1] <= '\r'))) l--;
            ct__sb_push(&b, s, (size_t)l, true);
            continue;
        }
        char *t = (size_t)l <= sizeof small ? small : malloc((size_t)l);
        if (!t) { b.err = CT_ERR_OOM; break; }
        for (int32_t k = 0; k < l; k++) {
            char ch = s[k];
            if (mode == 0 && ch >= 'A' && ch <= 'Z') ch = (char)(ch + 32);
            if (mode == 1 && ch >= 'a' && ch <= 'z') ch = (char)(ch - 32);
            t[k] = ch;
        }
        ct__sb_push(&b, t, (size_t)l, true);
        if (t != small) free(t);
    }
    return ct__sb_finish(&b, op);
}
ct_column *ct_column_str_lower(const ct_column *c) { return str_map(c, "str_lower", 0); }
ct_column *ct_column_str_upper(const ct_column *c) { return str_map(c, "str_upper", 1); }
ct_column *ct_column_str_strip(const ct_column *c) { return str_map(c, "str_strip", 2); }

ct_column *ct_column_str_length(const ct_column *c) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "str_length: needs a string column, got %s", ct_df_type_name(c->type));
    ct_dfbuf *vb = copy_validity(c);
    if (c->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(CT_DF_INT64, c->length, vb, &p);
    if (!o) return NULL;
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        int64_t k = 0;
        for (int32_t j = 0; j < l; j++) k += ((unsigned char)s[j] & 0xC0) != 0x80;
        ((int64_t *)p)[i] = k;
    }
    return o;
}

static const char *find(const char *h, size_t hl, const char *nd, size_t nl) {
    if (nl == 0) return h;
    if (hl < nl) return NULL;
    for (size_t i = 0; i + nl <= hl; i++) {
        const char *q = memchr(h + i, nd[0], hl - nl - i + 1);
        if (!q) return NULL;
        if (memcmp(q, nd, nl) == 0) return q;
        i = (size_t)(q - h);
    }
    return NULL;
}

ct_column *ct_column_str_contains(const ct_column *c, const char *pat) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "str_contains: needs a string column, got %s", ct_df_type_name(c->type));
    if (!pat) return ct__error(CT_ERR_NULL, "str_contains: NULL pattern");
    ct_dfbuf *vb = copy_validity(c);
    if (c->validity && !vb) return NULL;
    void *p; ct_column *o = new_numeric(CT_DF_BOOL, c->length, vb, &p);
    if (!o) return NULL;
    size_t pl = strlen(pat);
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (find(s, (size_t)l, pat, pl)) ct__bit_set(p, i, true);
    }
    return o;
}

ct_column *ct_column_str_replace(const ct_column *c, const char *old, const char *repl) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "str_replace: needs a string column, got %s", ct_df_type_name(c->type));
    if (!old || !repl) return ct__error(CT_ERR_NULL, "str_replace: NULL pattern or replacement");
    size_t ol = strlen(old), rl = strlen(repl);
    if (!ol) return ct__error(CT_ERR_ARG, "str_replace: empty pattern");
    ct__strbuild b;
    ct__sb_init(&b, c->length);
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (!ct__col_valid(c, i)) { ct__sb_push(&b, "", 0, false); continue; }
        size_t cap = (size_t)l + 16, len = 0;
        char *t = malloc(cap);
        if (!t) { b.err = CT_ERR_OOM; break; }
        const char *p = s, *e = s + l, *q;
        while ((q = find(p, (size_t)(e - p), old, ol))) {
            size_t need = len + (size_t)(q - p) + rl;
            if (need > cap) { cap = need * 2; char *u = realloc(t, cap); if (!u) { free(t); t = NULL; break; } t = u; }
            memcpy(t + len, p, (size_t)(q - p)); len += (size_t)(q - p);
            memcpy(t + len, repl, rl); len += rl;
            p = q + ol;
        }
        if (!t) { b.err = CT_ERR_OOM; break; }
        if (len + (size_t)(e - p) > cap) { cap = len + (size_t)(e - p); char *u = realloc(t, cap); if (!u) { free(t); b.err = CT_ERR_OOM; break; } t = u; }
        memcpy(t + len, p, (size_t)(e - p)); len += (size_t)(e - p);
        ct__sb_push(&b, t, len, true);
        free(t);
    }
    return ct__sb_finish(&b, "str_replace");
}

static bool is_ws(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

ct_column *ct_column_str_split(const ct_column *c, const char *sep) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "str_split: needs a string column, got %s", ct_df_type_name(c->type));
    size_t sl = sep ? strlen(sep) : 0;
    ct__strbuild b;
    ct__sb_init(&b, c->length * 2);
    ct_dfbuf *ob = ct__dfbuf_new(sizeof(int32_t) * (size_t)(c->length + 1));
    ct_dfbuf *vb = copy_validity(c);
    if (!ob || (c->validity && !vb)) { ct__sb_free(&b); ct__dfbuf_release(ob); ct__dfbuf_release(vb); return NULL; }
    int32_t *off = ob->ptr;
    off[0] = 0;
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (ct__col_valid(c, i)) {
            const char *p = s, *e = s + l;
            if (!sl) {
                for (;;) {
                    while (p < e && is_ws(*p)) p++;
                    if (p == e) break;
                    const char *q = p;
                    while (q < e && !is_ws(*q)) q++;
                    ct__sb_push(&b, p, (size_t)(q - p), true);
                    p = q;
                }
            } else {
                const char *q;
                while ((q = find(p, (size_t)(e - p), sep, sl))) { ct__sb_push(&b, p, (size_t)(q - p), true); p = q + sl; }
                ct__sb_push(&b, p, (size_t)(e - p), true);
            }
        }
        if (b.n > INT32_MAX) b.err = CT_ERR_OVERFLOW;
        off[i + 1] = (int32_t)b.n;
    }
    ct_column *child = ct__sb_finish(&b, "str_split");
    if (!child) { ct__dfbuf_release(ob); ct__dfbuf_release(vb); return NULL; }
    return ct__col_make(CT_DF_LIST, c->length, vb, NULL, ob, child);
}

/* ---- tokenizer ---- */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    return h;
}

ct_column *ct_column_tokenize(const ct_column *c, const char *const *vocab, int nv, int64_t unk_id) {
    if (!c) return NULL;
    if (c->type != CT_DF_STRING) return ct__error(CT_ERR_DTYPE, "tokenize: needs a string column, got %s", ct_df_type_name(c->type));
    if (nv < 0 || (nv > 0 && !vocab)) return ct__error(CT_ERR_ARG, "tokenize: bad vocabulary");
    size_t cap = 16;
    while (cap < (size_t)nv * 2) cap *= 2;
    int *tab = malloc(sizeof(int) * cap);
    ct_dfbuf *ob = ct__dfbuf_new(sizeof(int32_t) * (size_t)(c->length + 1));
    ct_dfbuf *vb = copy_validity(c);
    int64_t *ids = NULL;
    size_t nids = 0, idcap = 64;
    ids = malloc(sizeof(int64_t) * idcap);
    char *low = NULL;
    ct_column *out = NULL;
    if (!tab || !ob || !ids || (c->validity && !vb)) { ct__error(CT_ERR_OOM, "tokenize: out of memory"); goto done; }
    for (size_t k = 0; k < cap; k++) tab[k] = -1;
    for (int k = 0; k < nv; k++) {
        if (!vocab[k]) { ct__error(CT_ERR_NULL, "tokenize: vocabulary entry %d is NULL", k); goto done; }
        size_t l = strlen(vocab[k]);
        size_t h = hash_bytes(vocab[k], l) & (cap - 1);
        bool dup = false;
        while (tab[h] >= 0) { if (strcmp(vocab[tab[h]], vocab[k]) == 0) { dup = true; break; } h = (h + 1) & (cap - 1); }
        if (!dup) tab[h] = k;
    }
    int32_t *off = ob->ptr;
    off[0] = 0;
    size_t lowcap = 0;
    for (int64_t i = 0; i < c->length; i++) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        if (ct__col_valid(c, i)) {
            if ((size_t)l > lowcap) { free(low); lowcap = (size_t)l; low = malloc(lowcap); if (!low) { ct__error(CT_ERR_OOM, "tokenize: out of memory"); goto done; } }
            for (int32_t k = 0; k < l; k++) low[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
            const char *p = low, *e = low + l;
            for (;;) {
                while (p < e && is_ws(*p)) p++;
                if (p == e) break;
                const char *q = p;
                while (q < e && !is_ws(*q)) q++;
                size_t tl = (size_t)(q - p);
                size_t h = hash_bytes(p, tl) & (cap - 1);
                int64_t id = unk_id;
                while (tab[h] >= 0) {
                    if (strlen(vocab[tab[h]]) == tl && memcmp(vocab[tab[h]], p, tl) == 0) { id = tab[h]; break; }
                    h = (h + 1) & (cap - 1);
                }
                if (nids == idcap) { idcap *= 2; int64_t *u = realloc(ids, sizeof(int64_t) * idcap); if (!u) { ct__error(CT_ERR_OOM, "tokenize: out of memory"); goto done; } ids = u; }
                ids[nids++] = id;
                p = q;
            }
        }
        if (nids > INT32_MAX) { ct__error(CT_ERR_OVERFLOW, "tokenize: more than 2^31 tokens"); goto done; }
        off[i + 1] = (int32_t)nids;
    }
    ct_column *child = ct_column_from_int64(ids, NULL, (int64_t)nids);
    if (!child) goto done;
    out = ct__col_make(CT_DF_LIST, c->length, vb, NULL, ob, child);
    vb = ob = NULL;
done:
    free(tab); free(ids); free(low);
    ct__dfbuf_release(ob); ct__dfbuf_release(vb);
    return out;
}
