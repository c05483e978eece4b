/* copy.c (cpu) -- copy with broadcasting and dtype conversion, fill,
 * arange/linspace/eye. */
#include <math.h>

#include "../../ops/iter.h"
#include "ew_vec.h"

typedef struct { ct_dtype d, s; } conv_ctx;

static const ct_ew_vtab *g_vt; /* vectorized conversions (ew_vec.h) */

static void copy_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
    conv_ctx *c = vctx;
    size_t ds = ct_dtype_size(c->d), ss = ct_dtype_size(c->s);
    if (s[0] == (int64_t)ds && s[1] == (int64_t)ss) { /* contiguous conversions */
        if (c->d == CT_BF16 && c->s == CT_F32) { g_vt->f32_to_bf16((uint16_t *)p[0], (const float *)p[1], n); return; }
        if (c->d == CT_F32 && c->s == CT_BF16) { g_vt->bf16_to_f32((float *)p[0], (const uint16_t *)p[1], n); return; }
        if (c->d == CT_F16 && c->s == CT_F32) { g_vt->f32_to_f16((uint16_t *)p[0], (const float *)p[1], n); return; }
        if (c->d == CT_F32 && c->s == CT_F16) { g_vt->f16_to_f32((float *)p[0], (const uint16_t *)p[1], n); return; }
        if (c->d == CT_F32 && c->s == CT_F64) { g_vt->f64_to_f32((float *)p[0], (const double *)p[1], n); return; }
        if (c->d == CT_F64 && c->s == CT_F32) { g_vt->f32_to_f64((double *)p[0], (const float *)p[1], n); return; }
    }
    ct__convert(p[0], c->d, s[0], p[1], c->s, s[1], n);
}

static ct_status k_copy(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    ct_iter it;
    ct_tensor *ts[2] = {out[0], in[0]};
    ct_status st = ct__iter_build(&it, ts, 2);
    if (st) return st;
    conv_ctx c = {out[0]->dtype, in[0]->dtype};
    ct__iter_run(&it, copy_loop, &c, CT_GRAIN * 4);
    return CT_OK;
}

typedef struct { unsigned char v[16]; size_t es; } fill_ctx;

static void fill_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
    fill_ctx *c = vctx;
    if (c->es == 4 && s[0] == 4) {
        uint32_t v; memcpy(&v, c->v, 4);
        uint32_t *q = (uint32_t *)p[0];
        for (int64_t i = 0; i < n; i++) q[i] = v;
        return;
    }
    if (c->es == 2 && s[0] == 2) { /* f16/bf16 (a zero gradient), i16 */
        uint16_t v; memcpy(&v, c->v, 2);
        uint16_t *q = (uint16_t *)p[0];
        for (int64_t i = 0; i < n; i++) q[i] = v;
        return;
    }
    if (c->es == 1 && s[0] == 1) {
        memset(p[0], c->v[0], (size_t)n);
        return;
    }
    if (c->es == 8 && s[0] == 8) {
        uint64_t v; memcpy(&v, c->v, 8);
        uint64_t *q = (uint64_t *)p[0];
        for (int64_t i = 0; i < n; i++) q[i] = v;
        return;
    }
    for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0], c->v, c->es);
}

/* p.factory.value; p.factory.is_int: use the exact integer p.factory.int_value */
static ct_status k_fill(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_iter it;
    ct_status st = ct__iter_build(&it, out, 1);
    if (st) return st;
    fill_ctx c;
    c.es = ct_dtype_size(out[0]->dtype);
    memset(c.v, 0, sizeof c.v);
    if (a->p.factory.is_int) ct__store_i64(c.v, out[0]->dtype, a->p.factory.int_value);
    else ct__store_f64(c.v, out[0]->dtype, a->p.factory.value);
    ct__iter_run(&it, fill_loop, &c, CT_GRAIN * 4);
    return CT_OK;
}

/* out[i] = start + i*step, computed in double (ints exactly in int64) */
static ct_status k_arange(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(o);
    char *p = ct__ptr(o);
    size_t es = ct_dtype_size(o->dtype);
    double start = a->p.factory.start, step = a->p.factory.step;
    if (ct_dtype_is_integral(o->dtype, false) && start == floor(start) && step == floor(step)) {
        for (int64_t i = 0; i < n; i++)
            ct__store_i64(p + i * es, o->dtype, (int64_t)start + i * (int64_t)step);
    } else {
        for (int64_t i = 0; i < n; i++) ct__store_f64(p + i * es, o->dtype, start + (double)i * step);
    }
    return CT_OK;
}

/* torch.linspace: the first half counts from start, the second from end */
static ct_status k_linspace(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(o);
    char *p = ct__ptr(o);
    size_t es = ct_dtype_size(o->dtype);
    double start = a->p.factory.start, end = a->p.factory.end, base = a->p.factory.base;
    int logsp = a->p.factory.logspace;
    if (n == 1) {
        double v = logsp ? pow(base, start) : start;
        ct__store_f64(p, o->dtype, v);
        return CT_OK;
    }
    int single = o->dtype == CT_F32 || o->dtype == CT_F16 || o->dtype == CT_BF16;
    double step = (end - start) / (double)(n - 1);
    int64_t half = n / 2;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (single) {
            float fs = (float)start, fe = (float)end, fst = (float)step;
            v = i < half ? (double)(fs + fst * (float)i) : (double)(fe - fst * (float)(n - 1 - i));
        } else {
            v = i < half ? start + step * (double)i : end - step * (double)(n - 1 - i);
        }
        if (logsp) v = pow(base, v);
        if (ct_dtype_is_integral(o->dtype, false)) ct__store_i64(p + i * es, o->dtype, (int64_t)v);
        else ct__store_f64(p + i * es, o->dtype, v);
    }
    return CT_OK;
}

static ct_status k_eye(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    (void)nout; (void)in; (void)nin; (void)a;
    ct_tensor *o = out[0];
    int64_t n = o->sizes[0], m = o->sizes[1];
    char *p = ct__ptr(o);
    size_t es = ct_dtype_size(o->dtype);
    memset(p, 0, (size_t)(n * m) * es);
    for (int64_t i = 0; i < n && i < m; i++) ct__store_f64(p + (i * m + i) * (int64_t)es, o->dtype, 1.0);
    return CT_OK;
}

void ct__cpu_register_copy(ct_kernel_fn *t) {
    g_vt = ct__ew_vtab();
    t[CT_OP_copy] = k_copy;
    t[CT_OP_fill] = k_fill;
    t[CT_OP_arange] = k_arange;
    t[CT_OP_linspace] = k_linspace;
    t[CT_OP_eye] = k_eye;
}
