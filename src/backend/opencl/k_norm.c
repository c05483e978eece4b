/* k_norm.c -- the OpenCL device's fused layer_norm / rms_norm kernels
 * (layer_norm_fwd, layer_norm_bwd), float32 and float64; the contract is
 * the cpu kernels' (src/backend/cpu/norm.c): x contiguous, viewed as
 * [M, N] rows of the normalized numel N.
 *   forward:  one work item per row: mean = sum(x)/N, var = sum((x -
 *             mean)^2)/N, both summed in double, rstd = 1/sqrt(var + eps)
 *             (rms_norm: mean 0), y = (x - mean) * rstd * w + b in the
 *             dtype; mean and rstd [M] in the dtype.
 *   backward: one work item per row for dx = rstd * (gw - sum(gw)/N - xhat *
 *             sum(gw * xhat)/N) (gw = g * w, xhat = (x - mean) * rstd; rms:
 *             without the sum(gw)/N term), then one per column for dw =
 *             sum over rows of g * xhat and db = sum of g, in double.
 * The sums are in double where the cpu's float32 kernel sums in float
 * lanes: the values agree to the dtype's rounding, not bit for bit.
 * float16/bfloat16 decline (the fused op's entry then runs the cpu
 * fallback through dispatch).  Their texts are plain kernel-file texts
 * (ct__ocl_launch), so the CUDA device runs them too (../gpu_dialect.h). */
#include <stdio.h>
#include <string.h>

#include "../../ops/op_table.h"
#include "ocl.h"

static ct_status no_kernel(const char *op, const char *why) { return ct__no_device_kernel(op, CT_OPENCL, why); }

typedef struct kp { int64_t v[24]; } kp;
#define TARG(t) {(t), NULL, 0}
#define VARG(v) {NULL, &(v), sizeof(v)}

static ct_status run(const char *what, ct_dtype dt, const char *body, size_t n, const ct_ocl_arg *args, int nargs) {
    char src[4096];
    int len = snprintf(src, sizeof src, "%s#pragma OPENCL FP_CONTRACT OFF\n#define T %s\n%s", ct__ocl_dialect,
                       dt == CT_F64 ? "double" : "float", body);
    if (len >= (int)sizeof src) return ct__error_status(CT_ERR_RUNTIME, "%s: kernel text too long", what);
    return ct__ocl_launch(what, src, n, args, nargs);
}

/* v: 0 M, 1 N, 2 has weight, 3 has bias, 4 rms */
static const char k_fwd_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *xb, long xo, CT_GLOBAL char *wb, long wo, CT_GLOBAL char *bb, long bo,\n"
    "                 CT_GLOBAL char *yb, long yo, CT_GLOBAL char *mb, long mo, CT_GLOBAL char *rb, long ro,\n"
    "                 const ct_kp p, const double eps) {\n"
    " const long r = CT_GID; if (r >= p.v[0]) return;\n"
    " const long n = p.v[1];\n"
    " CT_GLOBAL const T *x = (CT_GLOBAL const T *)(xb + xo) + r * n;\n"
    " CT_GLOBAL const T *w = (CT_GLOBAL const T *)(wb + wo), *b = (CT_GLOBAL const T *)(bb + bo);\n"
    " CT_GLOBAL T *y = (CT_GLOBAL T *)(yb + yo) + r * n;\n"
    " double s = 0;\n"
    " if (!p.v[4]) for (long i = 0; i < n; i++) s += (double)x[i];\n"
    " const T mean = p.v[4] ? (T)0 : (T)(s / (double)n);\n"
    " double q = 0;\n"
    " for (long i = 0; i < n; i++) { const double d = (double)(x[i] - mean); q += d * d; }\n"
    " const T rstd = (T)(1.0 / sqrt(q / (double)n + eps));\n"
    " ((CT_GLOBAL T *)(mb + mo))[r] = mean; ((CT_GLOBAL T *)(rb + ro))[r] = rstd;\n"
    " for (long i = 0; i < n; i++) {\n"
    "  T v = (x[i] - mean) * rstd;\n"
    "  if (p.v[2]) v = v * w[i];\n"
    "  if (p.v[3]) v = v + b[i];\n"
    "  y[i] = v;\n }\n}\n";

/* v: 0 M, 1 N, 2 has weight, 4 rms */
static const char k_bwd_dx_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *gb, long go, CT_GLOBAL char *xb, long xo, CT_GLOBAL char *mb, long mo,\n"
    "                 CT_GLOBAL char *rb, long ro, CT_GLOBAL char *wb, long wo, CT_GLOBAL char *db, long dof,\n"
    "                 const ct_kp p) {\n"
    " const long r = CT_GID; if (r >= p.v[0]) return;\n"
    " const long n = p.v[1];\n"
    " CT_GLOBAL const T *g = (CT_GLOBAL const T *)(gb + go) + r * n, *x = (CT_GLOBAL const T *)(xb + xo) + r * n;\n"
    " CT_GLOBAL const T *w = (CT_GLOBAL const T *)(wb + wo);\n"
    " CT_GLOBAL T *dx = (CT_GLOBAL T *)(db + dof) + r * n;\n"
    " const T mean = ((CT_GLOBAL const T *)(mb + mo))[r], rstd = ((CT_GLOBAL const T *)(rb + ro))[r];\n"
    " double sg = 0, sgx = 0;\n"
    " for (long i = 0; i < n; i++) {\n"
    "  const T xh = (x[i] - mean) * rstd, gw = p.v[2] ? g[i] * w[i] : g[i];\n"
    "  sg += (double)gw; sgx += (double)gw * (double)xh;\n }\n"
    " const T c1 = p.v[4] ? (T)0 : (T)(sg / (double)n), c2 = (T)(sgx / (double)n);\n"
    " for (long i = 0; i < n; i++) {\n"
    "  const T xh = (x[i] - mean) * rstd, gw = p.v[2] ? g[i] * w[i] : g[i];\n"
    "  dx[i] = (gw - c1 - xh * c2) * rstd;\n }\n}\n";

/* v: 0 M, 1 N, 5 want dw, 6 want db */
static const char k_bwd_dwdb_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *gb, long go, CT_GLOBAL char *xb, long xo, CT_GLOBAL char *mb, long mo,\n"
    "                 CT_GLOBAL char *rb, long ro, CT_GLOBAL char *wb, long wo, CT_GLOBAL char *bb, long bo,\n"
    "                 const ct_kp p) {\n"
    " const long j = CT_GID; if (j >= p.v[1]) return;\n"
    " const long n = p.v[1], M = p.v[0];\n"
    " CT_GLOBAL const T *g = (CT_GLOBAL const T *)(gb + go), *x = (CT_GLOBAL const T *)(xb + xo);\n"
    " CT_GLOBAL const T *mean = (CT_GLOBAL const T *)(mb + mo), *rstd = (CT_GLOBAL const T *)(rb + ro);\n"
    " double sw = 0, sb = 0;\n"
    " for (long r = 0; r < M; r++) {\n"
    "  const T gv = g[r * n + j];\n"
    "  sw += (double)gv * (double)((x[r * n + j] - mean[r]) * rstd[r]);\n"
    "  sb += (double)gv;\n }\n"
    " if (p.v[5]) ((CT_GLOBAL T *)(wb + wo))[j] = (T)sw;\n"
    " if (p.v[6]) ((CT_GLOBAL T *)(bb + bo))[j] = (T)sb;\n}\n";

static bool float_dt(ct_dtype dt) { return dt == CT_F32 || dt == CT_F64; }

/* in: x, [w], [b]; out: y, mean [M], rstd [M] */
static ct_status k_ln_fwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const ct_p_layer_norm *q = &a->p.layer_norm;
    ct_tensor *x = in[0];
    ct_dtype dt = x->dtype;
    if (!float_dt(dt)) return no_kernel("layer_norm", ct_dtype_name(dt));
    for (int k = 0; k < nin; k++)
        if (in[k]->dtype != dt || !ct__is_contiguous(in[k])) return no_kernel("layer_norm", "operand layout");
    for (int k = 0; k < 3; k++)
        if (!ct__is_contiguous(out[k])) return no_kernel("layer_norm", "a strided output");
    int64_t n = q->normalized_numel, M = n > 0 ? ct_numel(x) / n : 0;
    if (M == 0 || n == 0) return CT_OK;
    ct_tensor *w = q->has_weight ? in[1] : x, *b = q->has_bias ? in[1 + q->has_weight] : x;
    kp p = {{M, n, q->has_weight, q->has_bias, q->rms}};
    double eps = q->eps;
    ct_ocl_arg args[8] = {TARG(x), TARG(w), TARG(b), TARG(out[0]), TARG(out[1]), TARG(out[2]), VARG(p), VARG(eps)};
    return run("layer_norm", dt, k_fwd_src, (size_t)M, args, 8);
}

/* in: g, x, mean, rstd, [w]; out: dx, dw (or NULL), db (or NULL) */
static ct_status k_ln_bwd(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    const ct_p_layer_norm *q = &a->p.layer_norm;
    ct_tensor *x = in[1];
    ct_dtype dt = x->dtype;
    if (!float_dt(dt)) return no_kernel("layer_norm backward", ct_dtype_name(dt));
    for (int k = 0; k < nin; k++)
        if (in[k]->dtype != dt || !ct__is_contiguous(in[k])) return no_kernel("layer_norm backward", "operand layout");
    ct_tensor *dx = out[0], *dw = nout > 1 ? out[1] : NULL, *db = nout > 2 ? out[2] : NULL;
    for (int k = 0; k < nout; k++)
        if (out[k] && !ct__is_contiguous(out[k])) return no_kernel("layer_norm backward", "a strided output");
    int64_t n = q->normalized_numel, M = n > 0 ? ct_numel(x) / n : 0;
    if (n == 0) return CT_OK;
    ct_tensor *w = q->has_weight ? in[4] : x;
    kp p = {{M, n, q->has_weight, 0, q->rms, dw != NULL, db != NULL}};
    ct_status st = CT_OK;
    if (M > 0) {
        ct_ocl_arg args[7] = {TARG(in[0]), TARG(x), TARG(in[2]), TARG(in[3]), TARG(w), TARG(dx), VARG(p)};
        st = run("layer_norm backward", dt, k_bwd_dx_src, (size_t)M, args, 7);
    }
    for (int k = 1; k < 3 && M == 0 && !st; k++) /* no rows: dw and db are zeros (the device's fill) */
        if (k < nout && out[k]) {
            ct_args fa;
            memset(&fa, 0, sizeof fa);
            fa.op = CT_OP_fill;
            ct_tensor *o1[1] = {out[k]};
            st = ct__dispatch(CT_OP_fill, o1, 1, NULL, 0, &fa);
        }
    if (!st && M > 0 && (dw || db)) {
        ct_ocl_arg args[7] = {TARG(in[0]), TARG(x), TARG(in[2]), TARG(in[3]), TARG(dw ? dw : db), TARG(db ? db : dw),
                              VARG(p)};
        st = run("layer_norm backward", dt, k_bwd_dwdb_src, (size_t)n, args, 7);
    }
    return st;
}

void ct__ocl_register_norm(ct_kernel_fn *t) {
    t[CT_OP_layer_norm_fwd] = k_ln_fwd;
    t[CT_OP_layer_norm_bwd] = k_ln_bwd;
}
