/* k_index.c -- the OpenCL device's indexing kernels that training needs
 * every step (embedding and cross-entropy forward and backward):
 *
 *   index_select  out[outer, m, post] = x[outer, idx[j], post]   any dtype
 *   gather        out[i] = x[i with dim's coordinate := idx[i]]   any dtype
 *   scatter, scatter_add (scatter_reduce "sum"), include_self: one work
 *                 item per line of the index along dim walks it in order,
 *                 so duplicate indices add (or the last write wins) in the
 *                 cpu's order, without atomics; sum for f32 f64 i64 i32,
 *                 plain writes for any dtype
 *   masked_fill   where(mask, value, x) through the elementwise kernel
 *
 * The contracts are the cpu kernels' (src/backend/cpu/index.c: indices
 * contiguous int64, bounded and wrapped by the op layer -- on a device
 * too, see ct__idx_checked).  Other modes and dtypes decline to the cpu
 * fallback.  Kernel bodies use ct__ocl_dialect's words only. */
#include <stdio.h>
#include <string.h>

#include "../../ops/op_table.h"
#include "ocl.h"

typedef struct kp { int64_t v[24]; } kp;

static ct_status no_kernel(const char *op, const char *why) { return ct__no_device_kernel(op, CT_OPENCL, why); }

static ct_status run(const char *what, const char *T, const char *body, size_t n, const ct_ocl_arg *args, int nargs) {
    char src[4096];
    int len = snprintf(src, sizeof src, "%s#define T %s\n%s", ct__ocl_dialect, T, body);
    if (len >= (int)sizeof src) return ct__error_status(CT_ERR_RUNTIME, "%s: kernel text too long", what);
    return ct__ocl_launch(what, src, n, args, nargs);
}

#define TARG(t) {(t), NULL, 0}
#define VARG(v) {NULL, &(v), sizeof(v)}

static int64_t prod_range(const int64_t *s, int a, int b) {
    int64_t p = 1;
    for (int d = a; d < b; d++) p *= s[d];
    return p;
}

/* v: 0 count, 1 n (x's size along dim), 2 m (indices), 3 post */
static const char k_index_select_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *ob, long oo, CT_GLOBAL char *xb, long xo, CT_GLOBAL char *ib, long io, const ct_kp p) {\n"
    " long i = CT_GID; if (i >= p.v[0]) return;\n"
    " long q = i % p.v[3], j = (i / p.v[3]) % p.v[2], r = i / (p.v[3] * p.v[2]);\n"
    " long ix = ((CT_GLOBAL const long *)(ib + io))[j];\n"
    " ((CT_GLOBAL T *)(ob + oo))[i] = ((CT_GLOBAL const T *)(xb + xo))[(r * p.v[1] + ix) * p.v[3] + q];\n}\n";

static ct_status k_index_select(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0], *ix = in[1];
    const char *T = ct__ocl_bits_type(ct_dtype_size(o->dtype));
    if (!T || ix->dtype != CT_I64 || !ct__is_contiguous(o)) return no_kernel("index_select", ct_dtype_name(o->dtype));
    int dim = (int)a->p.index.dim;
    kp p = {{ct_numel(o), x->ndim ? x->sizes[dim] : 1, ct_numel(ix),
             x->ndim ? prod_range(x->sizes, dim + 1, x->ndim) : 1}};
    ct_ocl_arg args[4] = {TARG(o), TARG(x), TARG(ix), VARG(p)};
    return run("index_select", T, k_index_select_src, (size_t)p.v[0], args, 4);
}

/* v: 0 count, 1 ndim, 2 dim, 3.. sizes of out (8), 11.. contiguous strides of x (8) */
static const char k_gather_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *ob, long oo, CT_GLOBAL char *xb, long xo, CT_GLOBAL char *ib, long io, const ct_kp p) {\n"
    " long i = CT_GID; if (i >= p.v[0]) return;\n"
    " long ix = ((CT_GLOBAL const long *)(ib + io))[i];\n"
    " long rem = i, src = 0;\n"
    " for (int d = (int)p.v[1] - 1; d >= 0; d--) { long c = rem % p.v[3 + d]; rem /= p.v[3 + d];\n"
    "  src += (d == p.v[2] ? ix : c) * p.v[11 + d]; }\n"
    " ((CT_GLOBAL T *)(ob + oo))[i] = ((CT_GLOBAL const T *)(xb + xo))[src];\n}\n";

static ct_status k_gather(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *o = out[0], *x = in[0], *ix = in[1];
    const char *T = ct__ocl_bits_type(ct_dtype_size(o->dtype));
    if (!T || ix->dtype != CT_I64 || o->ndim > 8 || !ct__is_contiguous(o)) return no_kernel("gather", "layout");
    kp p = {{ct_numel(o), o->ndim, a->p.index.dim}};
    int64_t xst[CT_MAX_DIMS];
    ct__contiguous_strides(x->sizes, x->ndim, xst);
    for (int d = 0; d < o->ndim; d++) p.v[3 + d] = o->sizes[d], p.v[11 + d] = xst[d];
    ct_ocl_arg args[4] = {TARG(o), TARG(x), TARG(ix), VARG(p)};
    return run("gather", T, k_gather_src, (size_t)p.v[0], args, 4);
}

/* One work item per line of the index along dim (its other coordinates c), walking k
 * in order: out[c with dim := idx[c, k]] (+)= src[c, k] (or the value).
 * v: 0 lines, 1 ndim, 2 dim, 3 add, 4 has src, 5 value bits, 6.. index sizes (8),
 * 14.. out strides (8), 22 unused; src strides in a second struct */
static const char k_scatter_src[] =
    "typedef struct { long v[8]; } ct_st;\n"
    "CT_KERNEL void k(CT_GLOBAL char *ob, long oo, CT_GLOBAL char *ib, long io, CT_GLOBAL char *sb, long so,\n"
    "                 const ct_kp p, const ct_st sst) {\n"
    " long line = CT_GID; if (line >= p.v[0]) return;\n"
    " int nd = (int)p.v[1], dim = (int)p.v[2];\n"
    " long rem = line, obase = 0, sbase = 0, ibase = 0, ist = 1;\n"
    " for (int d = nd - 1; d >= 0; d--) { long sz = p.v[6 + d];\n"
    "  if (d == dim) { ist *= sz; continue; }\n"
    "  long c = rem % sz; rem /= sz; obase += c * p.v[14 + d]; sbase += c * sst.v[d]; ibase += c * ist; ist *= sz; }\n"
    " long idst = 1; for (int d = nd - 1; d > dim; d--) idst *= p.v[6 + d];\n"
    " CT_GLOBAL T *o = (CT_GLOBAL T *)(ob + oo); CT_GLOBAL const long *ix = (CT_GLOBAL const long *)(ib + io);\n"
    " CT_GLOBAL const T *s = (CT_GLOBAL const T *)(sb + so);\n"
    " T val = (T)0; if (!p.v[4]) { union { long l; T t; } u; u.l = p.v[5]; val = u.t; }\n"
    " for (long k = 0; k < p.v[6 + dim]; k++) {\n"
    "  long j = ix[ibase + k * idst];\n"
    "  T v = p.v[4] ? s[sbase + k * sst.v[dim]] : val;\n"
    "  CT_GLOBAL T *d = o + obase + j * p.v[14 + dim];\n"
    "  if (p.v[3]) *d = *d + v; else *d = v; }\n}\n";

static ct_status k_scatter(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const char *name = ct__op_info[a->op].name;
    ct_tensor *o = out[0], *ix = in[0], *src = nin > 1 ? in[1] : NULL;
    int mode = (int)a->p.index.reduce; /* 0 set, 1 sum (the cpu's RED_SET, RED_SUM) */
    if ((mode != 0 && mode != 1) || (mode == 1 && !a->p.index.include_self)) return no_kernel(name, "reduce mode");
    if (ix->dtype != CT_I64 || ix->ndim > 8 || ix->ndim == 0 || !ct__is_contiguous(o)) return no_kernel(name, "layout");
    const char *T = NULL;
    if (mode == 1) {
        switch (o->dtype) {
        case CT_F32: T = "float"; break;
        case CT_F64: T = "double"; break;
        case CT_I64: T = "long"; break;
        case CT_I32: T = "int"; break;
        default: return no_kernel(name, ct_dtype_name(o->dtype));
        }
    } else if (ct_dtype_size(o->dtype) <= 8) {
        T = ct__ocl_bits_type(ct_dtype_size(o->dtype));
    }
    if (!T) return no_kernel(name, ct_dtype_name(o->dtype));
    int dim = (int)a->p.index.dim, nd = ix->ndim;
    int64_t lines = ct_numel(ix) / (ix->sizes[dim] ? ix->sizes[dim] : 1);
    if (ix->sizes[dim] == 0 || ct_numel(ix) == 0) return CT_OK;
    kp p = {{lines, nd, dim, mode == 1, src != NULL}};
    if (!src) {
        unsigned char v[16] = {0};
        ct__store_f64(v, o->dtype, a->p.index.value);
        memcpy(&p.v[5], v, 8);
    }
    int64_t ost[CT_MAX_DIMS];
    ct__contiguous_strides(o->sizes, o->ndim, ost);
    struct { int64_t v[8]; } sst = {{0}};
    if (src) ct__contiguous_strides(src->sizes, src->ndim, sst.v);
    for (int d = 0; d < nd; d++) p.v[6 + d] = ix->sizes[d], p.v[14 + d] = ost[d];
    ct_ocl_arg args[5] = {TARG(o), TARG(ix), TARG(src ? src : o), VARG(p), VARG(sst)};
    return run(name, T, k_scatter_src, (size_t)lines, args, 5);
}

/* masked_fill: out = where(mask, value, x), the elementwise kernel (any strides, broadcasting) */
static ct_status k_masked_fill(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *x = in[0], *mask = in[1];
    if (mask->dtype != CT_BOOL || ct_dtype_is_complex(x->dtype)) return no_kernel("masked_fill", "dtype");
    ct_tensor *v = ct__alloc(NULL, 0, x->dtype, CT_CPU); /* a 0-dim cpu number: any device */
    if (!v) return ct_last_error_code();
    ct__store_f64(ct__ptr(v), x->dtype, a->p.index.value);
    ct_tensor *i3[3] = {mask, v, x};
    ct_status st = ct__dispatch(CT_OP_where, out, 1, i3, 3, NULL);
    ct_release(v);
    return st;
}

void ct__ocl_register_index(ct_kernel_fn *t) {
    t[CT_OP_index_select] = k_index_select;
    t[CT_OP_gather] = k_gather;
    t[CT_OP_scatter] = k_scatter;
    t[CT_OP_scatter_add] = k_scatter;
    t[CT_OP_scatter_reduce] = k_scatter;
    t[CT_OP_masked_fill] = k_masked_fill;
}
