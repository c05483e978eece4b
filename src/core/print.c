/* print.c -- ct_to_string / ct_print in PyTorch's repr format
 * (torch/_tensor_str.py with the default print options: precision 4,
 * threshold 1000, edgeitems 3, linewidth 80, sci_mode chosen
 * automatically). */
#include <math.h>
#include <stdio.h>

#include "tensor_impl.h"

#define P_PRECISION 4
#define P_THRESHOLD 1000
#define P_EDGE 3
#define P_LINEWIDTH 80

typedef ct_sbuf sbuf;
#define sb_put ct__sbuf_put
static void sb_spaces(sbuf *b, int n) {
    if (n > 0) sb_put(b, "%*s", n, "");
}

/* ---- element access ----------------------------------------------------- */
enum { K_BOOL, K_INT, K_FLOAT, K_COMPLEX };

static int kind_of(ct_dtype dt) {
    if (dt == CT_BOOL) return K_BOOL;
    if (ct_dtype_is_integral(dt, false)) return K_INT;
    if (ct_dtype_is_complex(dt)) return K_COMPLEX;
    return K_FLOAT;
}

static const char *elem_ptr(const ct_tensor *t, int64_t off) {
    return (const char *)t->storage->data + off * (int64_t)ct_dtype_size(t->dtype);
}

/* part: 0 real (or the value), 1 imaginary */
static double load_part(const ct_tensor *t, int64_t off, int part) {
    const char *p = elem_ptr(t, off);
    switch (t->dtype) {
    case CT_C64: return ((const float *)p)[part];
    case CT_C128: return ((const double *)p)[part];
    case CT_C32: return ct__f16_to_f32(((const uint16_t *)p)[part]);
    case CT_F16: case CT_BF16: return (float)ct__load_f64(p, t->dtype); /* printed as float */
    default: return ct__load_f64(p, t->dtype);
    }
}

/* ---- the formatter (torch._tensor_str._Formatter) ----------------------- */
typedef struct {
    int floating, int_mode, sci_mode, max_width;
    /* pass state */
    int have;            /* any nonzero finite value seen */
    double amin, amax;
    int pass;            /* 1: min/max/int_mode, 2: widths */
    int part;
} fmt_t;

static int fmt_int_str(char *buf, size_t n, const ct_tensor *t, int64_t off) {
    const char *p = elem_ptr(t, off);
    if (t->dtype == CT_BOOL) return snprintf(buf, n, "%s", *p ? "True" : "False");
    return snprintf(buf, n, "%lld", (long long)ct__load_i64(p, t->dtype));
}

/* The unpadded text of a float in the formatter's mode. */
static int fmt_float_raw(const fmt_t *f, double v, char *buf, size_t n) {
    if (isnan(v)) return snprintf(buf, n, "nan");
    if (isinf(v)) return snprintf(buf, n, v > 0 ? "inf" : "-inf");
    if (f->sci_mode) return snprintf(buf, n, "%.*e", P_PRECISION, v);
    if (f->int_mode) return snprintf(buf, n, "%.0f.", v);
    return snprintf(buf, n, "%.*f", P_PRECISION, v);
}

static void fmt_visit(fmt_t *f, const ct_tensor *t, int64_t off) {
    char buf[512];
    if (!f->floating) {
        int k = fmt_int_str(buf, sizeof buf, t, off);
        if (k > f->max_width) f->max_width = k;
        return;
    }
    double v = load_part(t, off, f->part);
    if (!isfinite(v) || v == 0) return;
    if (f->pass == 1) {
        double a = fabs(v);
        if (!f->have) { f->amin = f->amax = a; f->have = 1; }
        else { if (a < f->amin) f->amin = a; if (a > f->amax) f->amax = a; }
        if (v != ceil(v)) f->int_mode = 0;
        return;
    }
    int k;
    if (f->sci_mode) k = snprintf(buf, sizeof buf, "%.*e", P_PRECISION, v);
    else if (f->int_mode) k = snprintf(buf, sizeof buf, "%.0f", v) + 1;
    else k = snprintf(buf, sizeof buf, "%.*f", P_PRECISION, v);
    if (k > f->max_width) f->max_width = k;
}

/* Visits the printed elements (all, or the summarized edges). */
static void walk(fmt_t *f, const ct_tensor *t, int d, int64_t off, int summarize) {
    if (d == t->ndim) { fmt_visit(f, t, off); return; }
    int64_t n = t->sizes[d];
    for (int64_t i = 0; i < n; i++) {
        if (summarize && n > 2 * P_EDGE && i == P_EDGE) i = n - P_EDGE;
        walk(f, t, d + 1, off + i * t->strides[d], summarize);
    }
}

static void fmt_build(fmt_t *f, const ct_tensor *t, int summarize, int part) {
    memset(f, 0, sizeof *f);
    f->floating = kind_of(t->dtype) >= K_FLOAT;
    f->int_mode = 1;
    f->max_width = 1;
    f->part = part;
    if (!f->floating) { walk(f, t, 0, t->offset, summarize); return; }
    f->pass = 1;
    walk(f, t, 0, t->offset, summarize);
    if (!f->have) return;
    if (f->int_mode)
        f->sci_mode = f->amax / f->amin > 1000.0 || f->amax > 1.0e8;
    else
        f->sci_mode = f->amax / f->amin > 1000.0 || f->amax > 1.0e8 || f->amin < 1.0e-4;
    f->pass = 2;
    walk(f, t, 0, t->offset, summarize);
}

/* Formatter.format: the padded text of one value. */
static void fmt_value(const fmt_t *f, const ct_tensor *t, int64_t off, int part, char *buf, size_t n) {
    char raw[512];
    int k;
    if (f->floating) k = fmt_float_raw(f, load_part(t, off, part), raw, sizeof raw);
    else k = fmt_int_str(raw, sizeof raw, t, off);
    int pad = f->max_width - k;
    snprintf(buf, n, "%*s%s", pad > 0 ? pad : 0, "", raw);
}

typedef struct { fmt_t f1, f2; int cplx; } fmts_t;

static void put_value(sbuf *b, const fmts_t *F, const ct_tensor *t, int64_t off) {
    char re[600], im[600];
    fmt_value(&F->f1, t, off, 0, re, sizeof re);
    if (!F->cplx) { sb_put(b, "%s", re); return; }
    fmt_value(&F->f2, t, off, 1, im, sizeof im);
    const char *s = im;
    while (*s == ' ') s++; /* lstrip */
    if (*s == '+' || *s == '-') sb_put(b, "%s%sj", re, s);
    else sb_put(b, "%s+%sj", re, s);
}

static void put_vector(sbuf *b, const fmts_t *F, const ct_tensor *t, int d, int64_t off, int indent,
                       int summarize) {
    int elen = F->f1.max_width + 2;
    if (F->cplx) elen += F->f2.max_width + 1;
    int epl = (P_LINEWIDTH - indent) / elen;
    if (epl < 1) epl = 1;
    int64_t n = t->sizes[d];
    sb_put(b, "[");
    int64_t k = 0; /* data item index (" ..." counts as one) */
    for (int64_t i = 0; i < n; i++, k++) {
        if (k > 0) {
            if (k % epl == 0) { sb_put(b, ",\n"); sb_spaces(b, indent + 1); }
            else sb_put(b, ", ");
        }
        if (summarize && n > 2 * P_EDGE && i == P_EDGE) {
            sb_put(b, " ...");
            i = n - P_EDGE - 1;
            continue;
        }
        put_value(b, F, t, off + i * t->strides[d]);
    }
    sb_put(b, "]");
}

static void put_tensor(sbuf *b, const fmts_t *F, const ct_tensor *t, int d, int64_t off, int indent,
                       int summarize) {
    int dim = t->ndim - d;
    if (dim == 0) { put_value(b, F, t, off); return; }
    if (dim == 1) { put_vector(b, F, t, d, off, indent, summarize); return; }
    int64_t n = t->sizes[d];
    sb_put(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_put(b, ",");
            for (int k = 0; k < dim - 1; k++) sb_put(b, "\n");
            sb_spaces(b, indent + 1);
        }
        if (summarize && n > 2 * P_EDGE && i == P_EDGE) {
            sb_put(b, "...");
            i = n - P_EDGE - 1;
            continue;
        }
        put_tensor(b, F, t, d + 1, off + i * t->strides[d], indent + 1, summarize);
    }
    sb_put(b, "]");
}

/* ---- suffixes (torch._tensor_str._add_suffixes) ------------------------- */
static void add_suffix(sbuf *b, const char *suffix, int indent, int64_t *last_line_len) {
    int64_t len = (int64_t)strlen(suffix);
    if (*last_line_len + len + 2 > P_LINEWIDTH) {
        sb_put(b, ",\n");
        sb_spaces(b, indent);
        sb_put(b, "%s", suffix);
        *last_line_len = indent + len;
    } else {
        sb_put(b, ", %s", suffix);
        *last_line_len += len + 2;
    }
}

/* device='opencl:0' while printing a device tensor's cpu copy */
static _Thread_local char tl_dev_suffix[64];

char *ct_to_string(ct_tensor *t) {
    if (!t) { /* keep the first error of a failed expression */
        if (ct_last_error_code() == CT_OK) ct__error(CT_ERR_NULL, "to_string: tensor is NULL");
        return NULL;
    }
    if (t->storage->device != CT_CPU && t->storage->device != CT_META) {
        /* a device tensor: its values copied to the cpu (a host read, which
         * waits), printed as torch does: tensor([...], device='opencl:0') */
        ct_dev d = ct_tensor_dev(t);
        ct_scope s = ct_scope_begin();
        ct_tensor *c = ct_to_dev(t, CT_DEV(CT_CPU, 0));
        char *r = NULL;
        if (c) {
            char dn[32];
            snprintf(tl_dev_suffix, sizeof tl_dev_suffix, "device='%s'", ct_dev_str(d, dn, sizeof dn));
            r = ct_to_string(c);
            tl_dev_suffix[0] = 0;
        }
        ct_scope_end(s);
        return r;
    }
    const int indent = 7; /* strlen("tensor(") */
    sbuf b = {0};
    if (t->storage->device == CT_META) { /* torch: tensor(..., device='meta', size=(2, 3)) */
        sb_put(&b, "tensor(..., device='meta', size=(");
        for (int d = 0; d < t->ndim; d++) sb_put(&b, "%s%lld", d ? ", " : "", (long long)t->sizes[d]);
        sb_put(&b, t->ndim == 1 ? ",)" : ")");
        if (t->dtype != ct_get_default_dtype()) sb_put(&b, ", dtype=torch.%s", ct_dtype_name(t->dtype));
        sb_put(&b, ")");
        if (b.oom) { free(b.s); ct__error(CT_ERR_OOM, "to_string: out of memory"); return NULL; }
        return b.s;
    }
    sb_put(&b, "tensor(");
    int64_t numel = ct_numel(t);
    ct_dtype def = ct_get_default_dtype();
    ct_dtype defc = def == CT_F64 ? CT_C128 : CT_C64;
    char suffixes[3][512];
    int ns = 0;
    if (tl_dev_suffix[0]) snprintf(suffixes[ns++], sizeof suffixes[0], "%s", tl_dev_suffix);
    if (numel == 0) {
        sb_put(&b, "[]");
        if (t->ndim != 1) {
            int k = snprintf(suffixes[ns], sizeof suffixes[ns], "size=(");
            for (int d = 0; d < t->ndim; d++)
                k += snprintf(suffixes[ns] + k, sizeof suffixes[ns] - (size_t)k, "%s%lld",
                              d ? ", " : "", (long long)t->sizes[d]);
            snprintf(suffixes[ns] + k, sizeof suffixes[ns] - (size_t)k, ")");
            ns++;
        }
        if (t->dtype != def) snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=torch.%s",
                                      ct_dtype_name(t->dtype));
    } else {
        int summarize = numel > P_THRESHOLD;
        fmts_t F;
        F.cplx = kind_of(t->dtype) == K_COMPLEX;
        fmt_build(&F.f1, t, summarize, 0);
        if (F.cplx) fmt_build(&F.f2, t, summarize, 1);
        put_tensor(&b, &F, t, 0, t->offset, indent, summarize);
        if (t->dtype != def && t->dtype != defc && t->dtype != CT_I64 && t->dtype != CT_BOOL)
            snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=torch.%s", ct_dtype_name(t->dtype));
    }
    if (!b.oom) {
        /* last_line_len = len(s) - s.rfind("\n") + 1, with rfind -1 when absent */
        int64_t nl = -1;
        for (int64_t i = (int64_t)b.n - 1; i >= 0; i--)
            if (b.s[i] == '\n') { nl = i; break; }
        int64_t last = (int64_t)b.n - nl + 1;
        for (int k = 0; k < ns; k++) add_suffix(&b, suffixes[k], indent, &last);
    }
    sb_put(&b, ")");
    if (b.oom) { free(b.s); ct__error(CT_ERR_OOM, "to_string: out of memory"); return NULL; }
    return b.s;
}

ct_status ct_fprint(FILE *f, ct_tensor *t) {
    if (!t) {
        if (ct_last_error_code() == CT_OK) ct__error(CT_ERR_NULL, "print: tensor is NULL");
        return CT_ERR_NULL;
    }
    if (!f) return ct__error_status(CT_ERR_NULL, "print: FILE is NULL");
    char *s = ct_to_string(t);
    if (!s) return ct_last_error_code();
    int r = fprintf(f, "%s\n", s);
    free(s);
    if (r < 0) return ct__error_status(CT_ERR_IO, "print: write failed");
    return CT_OK;
}
ct_status ct_print(ct_tensor *t) { return ct_fprint(stdout, t); }
