/* print.c -- ct_to_string / ct_print in PyTorch's repr format. */
#include <math.h>
#include <stdio.h>

#include "tensor_impl.h"

typedef struct { char *s; size_t n, cap; int oom; } sbuf;
static void sb_put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_put(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t nc = (b->cap ? b->cap * 2 : 256);
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) { b->oom = 1; va_end(ap2); return; }
        b->s = ns;
        b->cap = nc;
    }
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap2);
    va_end(ap2);
    b->n += (size_t)k;
}

static void elem(sbuf *b, const ct_tensor *t, int64_t off) {
    const char *p = (const char *)t->storage->data + off * (int64_t)ct_dtype_size(t->dtype);
    if (t->dtype == CT_BOOL) { sb_put(b, "%s", *p ? "True" : "False"); return; }
    if (ct_dtype_is_integral(t->dtype, false)) { sb_put(b, "%lld", (long long)ct__load_i64(p, t->dtype)); return; }
    if (ct_dtype_is_complex(t->dtype)) {
        double re = t->dtype == CT_C64 ? ((const float *)p)[0] : ((const double *)p)[0];
        double im = t->dtype == CT_C64 ? ((const float *)p)[1] : ((const double *)p)[1];
        sb_put(b, "%.4f%s%.4fj", re, im < 0 ? "" : "+", im);
        return;
    }
    double v = ct__load_f64(p, t->dtype);
    if (isnan(v)) sb_put(b, "nan");
    else if (isinf(v)) sb_put(b, v > 0 ? "inf" : "-inf");
    else if (v == floor(v) && fabs(v) < 1e8) sb_put(b, "%.0f.", v);
    else sb_put(b, "%.4f", v);
}

static void rec(sbuf *b, const ct_tensor *t, int d, int64_t off, int indent) {
    if (d == t->ndim) { elem(b, t, off); return; }
    sb_put(b, "[");
    for (int64_t i = 0; i < t->sizes[d]; i++) {
        if (i) {
            if (d == t->ndim - 1) sb_put(b, ", ");
            else {
                sb_put(b, ",");
                for (int k = d; k < t->ndim - 1; k++) sb_put(b, "\n");
                sb_put(b, "%*s", indent + d + 1, "");
            }
        }
        rec(b, t, d + 1, off + i * t->strides[d], indent);
    }
    sb_put(b, "]");
}

char *ct_to_string(ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "to_string: tensor is NULL"); return NULL; }
    sbuf b = {0};
    sb_put(&b, "tensor(");
    rec(&b, t, 0, t->offset, 7);
    if (t->dtype != CT_F32 && t->dtype != CT_I64 && t->dtype != CT_BOOL)
        sb_put(&b, ", dtype=torch.%s", ct_dtype_name(t->dtype));
    sb_put(&b, ")");
    if (b.oom) { free(b.s); ct__error(CT_ERR_OOM, "to_string: out of memory"); return NULL; }
    return b.s;
}

ct_status ct_fprint(FILE *f, ct_tensor *t) {
    char *s = ct_to_string(t);
    if (!s) return ct_last_error_code();
    fprintf(f, "%s\n", s);
    free(s);
    return CT_OK;
}
ct_status ct_print(ct_tensor *t) { return ct_fprint(stdout, t); }
