/* index.c (cpu) -- kernels of the copying / indexing / shape family.
 *
 * Conventions (the op layer, src/ops/index.c and src/ops/shape.c, prepares
 * the operands): index tensors arrive as contiguous int64, already bounds
 * checked and wrapped; "data moving" kernels copy es bytes per element and
 * so work for every dtype; arithmetic kernels (scatter_add, index_add,
 * scatter_reduce, index_put accumulate, bincount) are typed for
 * f32 f64 i64 i32 i16 i8 u8 (the op layer converts f16/bf16 to f32).
 * Operands documented as "any strides" are read through their strides. */
#include <math.h>

#include "../../ops/iter.h"

#define ES(t) ((int64_t)ct_dtype_size((t)->dtype))

static int64_t prod_range(const int64_t *s, int a, int b) {
    int64_t p = 1;
    for (int i = a; i < b; i++) p *= s[i];
    return p;
}

/* ---- cat: a->p.index.dim; all inputs contiguous with out's dtype --------- */
static ct_status k_cat(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    (void)nout;
    ct_tensor *o = out[0];
    int dim = (int)a->p.index.dim;
    int64_t es = ES(o);
    int64_t outer = prod_range(o->sizes, 0, dim);
    int64_t post = prod_range(o->sizes, dim + 1, o->ndim);
    int64_t orow = o->sizes[dim] * post * es;
    char *op = ct__ptr(o);
    int64_t off = 0;
    for (int j = 0; j < nin; j++) {
        ct_tensor *t = in[j];
        if (!t) continue;
        int64_t row = t->sizes[dim] * post * es;
        const char *ip = ct__ptr(t);
        if (row > 0) {
#pragma omp parallel for if (outer * row > CT_PAR_GRAIN * 8)
            for (int64_t r = 0; r < outer; r++) memcpy(op + r * orow + off, ip + r * row, (size_t)row);
        }
        off += row;
    }
    return CT_OK;
}

/* ---- index_select: in x (contig), idx; a->p.index.dim ------------------- */
static ct_status k_index_select(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0], *ix = in[1];
    int dim = (int)a->p.index.dim;
    int64_t es = ES(o);
    int64_t n = x->ndim ? x->sizes[dim] : 1;
    int64_t outer = x->ndim ? prod_range(x->sizes, 0, dim) : 1;
    int64_t post = x->ndim ? prod_range(x->sizes, dim + 1, x->ndim) * es : es;
    int64_t m = ct_numel(ix);
    const int64_t *idx = ct__ptr(ix);
    const char *xp = ct__ptr(x);
    char *op = ct__ptr(o);
#pragma omp parallel for if (outer * m * post > CT_PAR_GRAIN * 8)
    for (int64_t r = 0; r < outer; r++)
        for (int64_t j = 0; j < m; j++)
            memcpy(op + (r * m + j) * post, xp + (r * n + idx[j]) * post, (size_t)post);
    return CT_OK;
}

/* ---- gather: in x (contig), idx (shape of out); a->p.index.dim --------- */
static ct_status k_gather(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0], *ix = in[1];
    int dim = (int)a->p.index.dim, nd = o->ndim;
    int64_t es = ES(o), n = ct_numel(o);
    int64_t xst[CT_MAX_DIMS];
    ct__contiguous_strides(x->sizes, x->ndim, xst);
    const int64_t *idx = ct__ptr(ix);
    const char *xp = ct__ptr(x);
    char *op = ct__ptr(o);
#pragma omp parallel for if (n > CT_PAR_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, src = 0;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t c = rem % o->sizes[d];
            rem /= o->sizes[d];
            src += (d == dim ? idx[i] : c) * xst[d];
        }
        memcpy(op + i * es, xp + src * es, (size_t)es);
    }
    return CT_OK;
}

/* ---- typed reductions used by scatter / index_add / index_put ---------- */
enum { RED_SET = 0, RED_SUM, RED_PROD, RED_MEAN, RED_AMAX, RED_AMIN };

#define RED_TYPES(X) X(CT_F32, float, 1) X(CT_F64, double, 1) X(CT_I64, int64_t, 0) \
    X(CT_I32, int32_t, 0) X(CT_I16, int16_t, 0) X(CT_I8, int8_t, 0) X(CT_U8, uint8_t, 0)

/* dst op= v * alpha (alpha only for RED_SUM) */
static void red_apply(char *dst, const char *src, ct_dtype dt, int mode, double alpha) {
    switch (dt) {
#define X(DT, T, FL)                                                                   \
    case DT: {                                                                         \
        T *d = (T *)dst;                                                               \
        T v = *(const T *)src;                                                         \
        switch (mode) {                                                                \
        case RED_SET: *d = v; break;                                                   \
        case RED_SUM: case RED_MEAN:                                                   \
            if (alpha == 1.0) *d = (T)(*d + v);                                        \
            else *d = (T)(*d + (FL ? (T)(v * alpha) : (T)(v * (int64_t)alpha)));       \
            break;                                                                     \
        case RED_PROD: *d = (T)(*d * v); break;                                        \
        case RED_AMAX: if (FL && v != v) *d = v; else if (v > *d) *d = v; break;       \
        case RED_AMIN: if (FL && v != v) *d = v; else if (v < *d) *d = v; break;       \
        }                                                                              \
        break;                                                                         \
    }
        RED_TYPES(X)
#undef X
    default: memcpy(dst, src, ct_dtype_size(dt)); break;
    }
}

static void red_identity(char *dst, ct_dtype dt, int mode) {
    double v = 0;
    if (mode == RED_PROD) v = 1;
    int mx = mode == RED_AMAX, mn = mode == RED_AMIN;
    switch (dt) {
    case CT_F32: *(float *)dst = mx ? -INFINITY : mn ? INFINITY : (float)v; return;
    case CT_F64: *(double *)dst = mx ? -INFINITY : mn ? INFINITY : v; return;
    case CT_I64: *(int64_t *)dst = mx ? INT64_MIN : mn ? INT64_MAX : (int64_t)v; return;
    case CT_I32: *(int32_t *)dst = mx ? INT32_MIN : mn ? INT32_MAX : (int32_t)v; return;
    case CT_I16: *(int16_t *)dst = mx ? INT16_MIN : mn ? INT16_MAX : (int16_t)v; return;
    case CT_I8: *(int8_t *)dst = mx ? INT8_MIN : mn ? INT8_MAX : (int8_t)v; return;
    case CT_U8: *(uint8_t *)dst = mx ? 0 : mn ? UINT8_MAX : (uint8_t)v; return;
    default: return;
    }
}

static void red_div(char *dst, ct_dtype dt, int64_t cnt) {
    switch (dt) {
#define X(DT, T, FL)                                                                   \
    case DT: {                                                                         \
        T *d = (T *)dst;                                                               \
        if (FL) *d = (T)(*d / (T)cnt);                                                 \
        else { double q = floor((double)*d / (double)cnt); *d = (T)q; }                \
        break;                                                                         \
    }
        RED_TYPES(X)
#undef X
    default: break;
    }
}

/* ---- scatter family.  out[0]: result (contig, already holds x);
 * in[0] idx (contig int64, shape S), in[1] src (contig, out dtype, sizes >= S)
 * or absent (value p.index.value); p.index.dim, .reduce (the RED_* mode),
 * .include_self. */
static ct_status k_scatter(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout;
    ct_tensor *o = out[0], *ix = in[0], *src = nin > 1 ? in[1] : NULL;
    int dim = (int)a->p.index.dim, mode = (int)a->p.index.reduce, incl = (int)a->p.index.include_self;
    int nd = ix->ndim;
    int64_t es = ES(o), n = ct_numel(ix);
    int64_t ost[CT_MAX_DIMS], sst[CT_MAX_DIMS];
    ct__contiguous_strides(o->sizes, o->ndim, ost);
    if (src) ct__contiguous_strides(src->sizes, src->ndim, sst);
    const int64_t *idx = ct__ptr(ix);
    char *op = ct__ptr(o);
    const char *sp = src ? ct__ptr(src) : NULL;
    unsigned char val[16] = {0};
    if (!src) ct__store_f64(val, o->dtype, a->p.index.value);
    int64_t *cnt = NULL;
    int64_t on = ct_numel(o);
    if (mode == RED_MEAN) {
        cnt = calloc((size_t)(on ? on : 1), sizeof(int64_t));
        if (!cnt) return ct__error_status(CT_ERR_OOM, "scatter_reduce: out of memory");
        for (int64_t i = 0; i < on; i++) cnt[i] = incl ? 1 : 0;
    }
    /* pass 1: positions' offsets; reset to identity when !include_self */
    for (int pass = (mode != RED_SET && !incl) ? 0 : 1; pass < 2; pass++) {
        for (int64_t i = 0; i < n; i++) {
            int64_t rem = i, dst = 0, so = 0;
            for (int d = nd - 1; d >= 0; d--) {
                int64_t c = rem % ix->sizes[d];
                rem /= ix->sizes[d];
                dst += (d == dim ? idx[i] : c) * ost[d];
                if (src) so += c * sst[d];
            }
            if (pass == 0) { red_identity(op + dst * es, o->dtype, mode); continue; }
            const char *v = src ? sp + so * es : (const char *)val;
            red_apply(op + dst * es, v, o->dtype, mode, 1.0);
            if (cnt) cnt[dst]++;
        }
    }
    if (cnt) {
        for (int64_t i = 0; i < on; i++)
            if (cnt[i] > 1) red_div(op + i * es, o->dtype, cnt[i]);
        free(cnt);
    }
    return CT_OK;
}

/* ---- index_add / index_copy / index_fill.  out[0]: result (contig, holds
 * x); in[0] idx (contig int64, m); in[1] src (contig, out dtype) or absent;
 * p.index.dim, .reduce (RED_SET copy, RED_SUM add, -1 fill), .alpha (add),
 * .value (fill). */
static ct_status k_index_add(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    (void)nout;
    ct_tensor *o = out[0], *ix = in[0], *src = nin > 1 ? in[1] : NULL;
    int dim = (int)a->p.index.dim, mode = (int)a->p.index.reduce;
    int64_t es = ES(o);
    int64_t n = o->ndim ? o->sizes[dim] : 1;
    int64_t outer = o->ndim ? prod_range(o->sizes, 0, dim) : 1;
    int64_t post = o->ndim ? prod_range(o->sizes, dim + 1, o->ndim) : 1;
    int64_t m = ct_numel(ix);
    const int64_t *idx = ct__ptr(ix);
    char *op = ct__ptr(o);
    const char *sp = src ? ct__ptr(src) : NULL;
    unsigned char val[16] = {0};
    if (mode < 0) ct__store_f64(val, o->dtype, a->p.index.value);
#pragma omp parallel for if (outer > 1 && outer * m * post > CT_PAR_GRAIN)
    for (int64_t r = 0; r < outer; r++)
        for (int64_t j = 0; j < m; j++) {
            char *d = op + ((r * n + idx[j]) * post) * es;
            if (mode < 0) {
                for (int64_t k = 0; k < post; k++) memcpy(d + k * es, val, (size_t)es);
            } else if (mode == RED_SET) {
                memcpy(d, sp + ((r * m + j) * post) * es, (size_t)(post * es));
            } else {
                const char *s = sp + ((r * m + j) * post) * es;
                for (int64_t k = 0; k < post; k++) red_apply(d + k * es, s + k * es, o->dtype, RED_SUM, a->p.index.alpha);
            }
        }
    return CT_OK;
}

/* ---- masked_fill: out[0] (any strides), in[0] x (broadcast, any strides),
 * in[1] mask (bool, broadcast); a->p.index.value ------------------------ */
typedef struct { unsigned char v[16]; int64_t es; } mf_ctx;
static void mf_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
    mf_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++) {
        char *d = p[0] + i * s[0];
        if (*(const uint8_t *)(p[2] + i * s[2])) memcpy(d, c->v, (size_t)c->es);
        else if (p[0] != p[1] || s[0] != s[1]) memcpy(d, p[1] + i * s[1], (size_t)c->es);
    }
}
static ct_status k_masked_fill(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                               const ct_args *a) {
    (void)nout; (void)nin;
    ct_iter it;
    ct_tensor *ts[3] = {out[0], in[0], in[1]};
    ct_status st = ct__iter_build(&it, ts, 3);
    if (st) return st;
    mf_ctx c;
    memset(&c, 0, sizeof c);
    c.es = ES(out[0]);
    ct__store_f64(c.v, out[0]->dtype, a->p.index.value);
    ct__iter_run(&it, mf_loop, &c, CT_GRAIN);
    return CT_OK;
}

/* ---- masked_select: in[0] x contig, in[1] mask contig bool same shape -- */
static ct_status k_masked_select(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                 const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    int64_t es = ES(out[0]), n = ct_numel(in[0]), k = 0, cap = ct_numel(out[0]);
    const uint8_t *m = ct__ptr(in[1]);
    const char *xp = ct__ptr(in[0]);
    char *op = ct__ptr(out[0]);
    for (int64_t i = 0; i < n && k < cap; i++)
        if (m[i]) memcpy(op + (k++) * es, xp + i * es, (size_t)es);
    return CT_OK;
}

/* ---- masked_scatter: out[0] contig (holds x), in[0] mask contig bool,
 * in[1] source contig (out dtype) ------------------------------------------ */
static ct_status k_masked_scatter(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                  const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    int64_t es = ES(out[0]), n = ct_numel(out[0]), k = 0, cap = ct_numel(in[1]);
    const uint8_t *m = ct__ptr(in[0]);
    const char *sp = ct__ptr(in[1]);
    char *op = ct__ptr(out[0]);
    for (int64_t i = 0; i < n; i++)
        if (m[i]) {
            if (k >= cap) return ct__error_status(CT_ERR_SHAPE, "masked_scatter: expected source to have at least as many elements as ones in mask");
            memcpy(op + i * es, sp + (k++) * es, (size_t)es);
        }
    return CT_OK;
}

/* ---- index (gather by element offsets): in[0] x (any strides; offsets
 * are relative to its first element), in[1] offsets (contig int64) ------- */
static ct_status k_index(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    int64_t es = ES(out[0]), n = ct_numel(out[0]);
    const int64_t *off = ct__ptr(in[1]);
    const char *xp = ct__ptr(in[0]);
    char *op = ct__ptr(out[0]);
    if (es == 4) {
#pragma omp parallel for if (n > CT_PAR_GRAIN)
        for (int64_t i = 0; i < n; i++) memcpy(op + i * 4, xp + off[i] * 4, 4);
    } else if (es == 8) {
#pragma omp parallel for if (n > CT_PAR_GRAIN)
        for (int64_t i = 0; i < n; i++) memcpy(op + i * 8, xp + off[i] * 8, 8);
    } else {
#pragma omp parallel for if (n > CT_PAR_GRAIN)
        for (int64_t i = 0; i < n; i++) memcpy(op + i * es, xp + off[i] * es, (size_t)es);
    }
    return CT_OK;
}

/* ---- index_put: out[0] x (any strides), in[0] offsets, in[1] values
 * (contig, x dtype, numel = numel(offsets)); a->p.index.accumulate ------- */
static ct_status k_index_put(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *x = out[0];
    int64_t es = ES(x), n = ct_numel(in[0]);
    const int64_t *off = ct__ptr(in[0]);
    const char *vp = ct__ptr(in[1]);
    char *xp = ct__ptr(x);
    for (int64_t i = 0; i < n; i++) {
        if (a->p.index.accumulate) red_apply(xp + off[i] * es, vp + i * es, x->dtype, RED_SUM, 1.0);
        else memcpy(xp + off[i] * es, vp + i * es, (size_t)es);
    }
    return CT_OK;
}

/* ---- nonzero: in[0] x contig; out [nnz, ndim] int64 ---------------------- */
static int nz_at(const char *p, ct_dtype dt) {
    switch (dt) {
    case CT_F32: return *(const float *)p != 0;
    case CT_F64: return *(const double *)p != 0;
    case CT_F16: case CT_BF16: return ct__load_f64(p, dt) != 0;
    case CT_C64: return ((const float *)p)[0] != 0 || ((const float *)p)[1] != 0;
    case CT_C128: return ((const double *)p)[0] != 0 || ((const double *)p)[1] != 0;
    default: {
        size_t es = ct_dtype_size(dt);
        for (size_t k = 0; k < es; k++)
            if (p[k]) return 1;
        return 0;
    }
    }
}
static ct_status k_nonzero(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    ct_tensor *x = in[0];
    int64_t es = ES(x), n = ct_numel(x), k = 0, cap = out[0]->sizes[0];
    int nd = x->ndim;
    const char *xp = ct__ptr(x);
    int64_t *op = ct__ptr(out[0]);
    int64_t c[CT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        if (nz_at(xp + i * es, x->dtype) && k < cap) {
            for (int d = 0; d < nd; d++) op[k * nd + d] = c[d];
            k++;
        }
        for (int d = nd - 1; d >= 0; d--) {
            if (++c[d] < x->sizes[d]) break;
            c[d] = 0;
        }
    }
    return CT_OK;
}

/* ---- tril / triu: in[0] x contig (>= 2-D); a->p.index.diagonal --------- */
static ct_status k_tri(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0];
    int upper = a->op == CT_OP_triu;
    int64_t k = a->p.index.diagonal, es = ES(o);
    int64_t R = o->sizes[o->ndim - 2], C = o->sizes[o->ndim - 1];
    int64_t B = prod_range(o->sizes, 0, o->ndim - 2);
    const char *xp = ct__ptr(x);
    char *op = ct__ptr(o);
#pragma omp parallel for if (B * R * C > CT_PAR_GRAIN)
    for (int64_t br = 0; br < B * R; br++) {
        int64_t i = br % R;
        const char *s = xp + br * C * es;
        char *d = op + br * C * es;
        for (int64_t j = 0; j < C; j++) {
            int keep = upper ? (j - i >= k) : (j - i <= k);
            if (keep) memcpy(d + j * es, s + j * es, (size_t)es);
            else memset(d + j * es, 0, (size_t)es);
        }
    }
    return CT_OK;
}

/* ---- flip / roll: in[0] x (any strides), out contig same shape.
 * flip: p.index.flipped[d] != 0 flips dim d.  roll: p.index.shifts[d] =
 * shift of dim d (already reduced to [0, size)). ------------------------- */
static ct_status k_remap(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0];
    int nd = o->ndim, roll = a->op == CT_OP_roll;
    const int64_t *pd = roll ? a->p.index.shifts : a->p.index.flipped; /* per dim */
    int64_t es = ES(o), n = ct_numel(o);
    if (n == 0) return CT_OK;
    if (nd == 0) { memcpy(ct__ptr(o), ct__ptr(x), (size_t)es); return CT_OK; }
    int64_t C = o->sizes[nd - 1], rows = n / C;
    const char *xp = ct__ptr(x);
    char *op = ct__ptr(o);
#pragma omp parallel for if (n > CT_PAR_GRAIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t rem = r, base = 0;
        for (int d = nd - 2; d >= 0; d--) {
            int64_t c = rem % o->sizes[d], sz = o->sizes[d];
            rem /= sz;
            int64_t sc = roll ? (c - pd[d] + sz) % sz : (pd[d] ? sz - 1 - c : c);
            base += sc * x->strides[d];
        }
        char *d = op + r * C * es;
        int64_t sl = x->strides[nd - 1], sh = pd[nd - 1];
        for (int64_t j = 0; j < C; j++) {
            int64_t sc = roll ? (j - sh + C) % C : (sh ? C - 1 - j : j);
            memcpy(d + j * es, xp + (base + sc * sl) * es, (size_t)es);
        }
    }
    return CT_OK;
}

/* ---- one_hot: in[0] int64 contig (checked); a->p.index.num_classes ----- */
static ct_status k_one_hot(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout; (void)nin;
    int64_t C = a->p.index.num_classes, n = ct_numel(in[0]);
    const int64_t *x = ct__ptr(in[0]);
    int64_t *o = ct__ptr(out[0]);
    if (n > 0 && C > 0) memset(o, 0, (size_t)(n * C) * sizeof(int64_t));
    for (int64_t i = 0; i < n; i++) o[i * C + x[i]] = 1;
    return CT_OK;
}

/* ---- bucketize / searchsorted: in[0] values (contig f64), in[1]
 * boundaries (contig f64, rows of K); p.index.right, .boundaries_len (K),
 * .values_per_row (0: one row for all) ---------------------------------- */
static ct_status k_bucketize(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    (void)nout; (void)nin;
    int right = (int)a->p.index.right;
    int64_t K = a->p.index.boundaries_len, per = a->p.index.values_per_row, n = ct_numel(in[0]);
    const double *v = ct__ptr(in[0]), *b = ct__ptr(in[1]);
    int64_t *o = ct__ptr(out[0]);
#pragma omp parallel for if (n > CT_PAR_GRAIN)
    for (int64_t i = 0; i < n; i++) {
        const double *row = per ? b + (i / per) * K : b;
        double x = v[i];
        int64_t lo = 0, hi = K;
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            int go_right = right ? !(row[mid] > x) : (row[mid] < x);
            if (go_right) lo = mid + 1;
            else hi = mid;
        }
        o[i] = lo;
    }
    return CT_OK;
}

/* ---- bincount: in[0] x int64 contig (checked >= 0), in[1] weights (contig,
 * out dtype) or absent; out zero-initialised here ------------------------- */
static ct_status k_bincount(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout; (void)a;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(in[0]), nb = ct_numel(o), es = ES(o);
    const int64_t *x = ct__ptr(in[0]);
    char *op = ct__ptr(o);
    if (nb) memset(op, 0, (size_t)(nb * es));
    if (nin < 2 || !in[1]) {
        int64_t *c = (int64_t *)op;
        for (int64_t i = 0; i < n; i++) c[x[i]]++;
    } else if (o->dtype == CT_F32) {
        float *c = (float *)op;
        const float *w = ct__ptr(in[1]);
        for (int64_t i = 0; i < n; i++) c[x[i]] += w[i];
    } else {
        double *c = (double *)op;
        const double *w = ct__ptr(in[1]);
        for (int64_t i = 0; i < n; i++) c[x[i]] += w[i];
    }
    return CT_OK;
}

/* ---- histc: in[0] x contig (f32/f64); a->p.index.min, .max ------------- */
static ct_status k_histc(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0];
    int64_t bins = ct_numel(o), n = ct_numel(x);
    double lo = a->p.index.min, hi = a->p.index.max;
    double *cnt = calloc((size_t)(bins ? bins : 1), sizeof(double));
    if (!cnt) return ct__error_status(CT_ERR_OOM, "histc: out of memory");
    for (int64_t i = 0; i < n; i++) {
        double v = x->dtype == CT_F32 ? (double)((const float *)ct__ptr(x))[i]
                                      : ((const double *)ct__ptr(x))[i];
        if (!(v >= lo && v <= hi)) continue;
        int64_t b = (int64_t)((v - lo) * (double)bins / (hi - lo));
        if (b >= bins) b = bins - 1;
        if (b < 0) b = 0;
        cnt[b] += 1;
    }
    for (int64_t b = 0; b < bins; b++) ct__store_f64((char *)ct__ptr(o) + b * ES(o), o->dtype, cnt[b]);
    free(cnt);
    return CT_OK;
}

void ct__cpu_register_index(ct_kernel_fn *t) {
    t[CT_OP_cat] = k_cat;
    t[CT_OP_index_select] = k_index_select;
    t[CT_OP_gather] = k_gather;
    t[CT_OP_scatter] = k_scatter;
    t[CT_OP_scatter_add] = k_scatter;
    t[CT_OP_scatter_reduce] = k_scatter;
    t[CT_OP_index_add] = k_index_add;
    t[CT_OP_index_copy] = k_index_add;
    t[CT_OP_index_fill] = k_index_add;
    t[CT_OP_masked_fill] = k_masked_fill;
    t[CT_OP_masked_select] = k_masked_select;
    t[CT_OP_masked_scatter] = k_masked_scatter;
    t[CT_OP_index] = k_index;
    t[CT_OP_index_put] = k_index_put;
    t[CT_OP_nonzero] = k_nonzero;
    t[CT_OP_tril] = k_tri;
    t[CT_OP_triu] = k_tri;
    t[CT_OP_flip] = k_remap;
    t[CT_OP_roll] = k_remap;
    t[CT_OP_one_hot] = k_one_hot;
    t[CT_OP_bucketize] = k_bucketize;
    t[CT_OP_bincount] = k_bincount;
    t[CT_OP_histc] = k_histc;
}
