/* compare.c -- ct_allclose and ct_equal. */
#include <math.h>

#include "op_table.h"

/* Broadcast a and b, copy both to contiguous tensors of dtype dt. */
static int as_pair(const char *op, ct_tensor *a, ct_tensor *b, ct_dtype dt, ct_tensor **ca, ct_tensor **cb) {
    int64_t sh[CT_MAX_DIMS];
    int nd;
    *ca = *cb = NULL;
    if (ct__broadcast_shapes(op, a->sizes, a->ndim, b->sizes, b->ndim, sh, &nd)) return -1;
    ct_tensor *src[2] = {a, b}, **dst[2] = {ca, cb};
    for (int k = 0; k < 2; k++) {
        *dst[k] = ct__alloc(sh, nd, dt, CT_CPU);
        if (!*dst[k]) goto fail;
        ct_tensor *o[1] = {*dst[k]}, *i[1] = {src[k]};
        if (ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL)) goto fail;
    }
    return 0;
fail:
    ct_release(*ca);
    ct_release(*cb);
    *ca = *cb = NULL;
    return -1;
}

int ct_allclose(ct_tensor *a, ct_tensor *b, double rtol, double atol, bool equal_nan) {
    if (!a || !b) { if (!a && !b) ct__error(CT_ERR_NULL, "allclose: NULL tensor"); return -1; }
    ct_tensor *ca, *cb;
    int cplx = ct_dtype_is_complex(a->dtype) || ct_dtype_is_complex(b->dtype);
    if (as_pair("allclose", a, b, cplx ? CT_C128 : CT_F64, &ca, &cb)) return -1;
    int64_t n = ct_numel(ca) * (cplx ? 2 : 1);
    const double *x = ct__ptr(ca), *y = ct__ptr(cb);
    int ok = 1;
    for (int64_t i = 0; i < n && ok; i++) {
        double u = x[i], v = y[i];
        if (isnan(u) || isnan(v)) { ok = equal_nan && isnan(u) && isnan(v); continue; }
        if (u == v) continue;
        if (isinf(u) || isinf(v)) { ok = 0; continue; }
        ok = fabs(u - v) <= atol + rtol * fabs(v);
    }
    ct_release(ca);
    ct_release(cb);
    return ok;
}

int ct_equal(ct_tensor *a, ct_tensor *b) {
    if (!a || !b) { if (!a && !b) ct__error(CT_ERR_NULL, "equal: NULL tensor"); return -1; }
    if (a->ndim != b->ndim || memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) != 0) return 0;
    ct_tensor *in[2] = {a, b};
    ct_dtype dt = ct_result_type(in, 2);
    if (ct_dtype_is_floating(dt)) dt = CT_F64;
    else if (ct_dtype_is_complex(dt)) dt = CT_C128;
    else dt = CT_I64;
    ct_tensor *ca, *cb;
    if (as_pair("equal", a, b, dt, &ca, &cb)) return -1;
    int64_t n = ct_numel(ca);
    int ok = 1;
    if (dt == CT_I64) {
        const int64_t *x = ct__ptr(ca), *y = ct__ptr(cb);
        for (int64_t i = 0; i < n; i++)
            if (x[i] != y[i]) { ok = 0; break; }
    } else {
        const double *x = ct__ptr(ca), *y = ct__ptr(cb);
        if (dt == CT_C128) n *= 2;
        for (int64_t i = 0; i < n; i++)
            if (!(x[i] == y[i])) { ok = 0; break; }
    }
    ct_release(ca);
    ct_release(cb);
    return ok;
}
