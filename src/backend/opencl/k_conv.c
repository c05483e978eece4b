/* k_conv.c -- the OpenCL device's convolutions and max pooling, the ops a
 * CNN's training step would otherwise copy to the host every step:
 *
 *   conv            im2col (a kernel) + one CLBlast GEMM per group over all
 *                   the samples (columns [C*K, N*L]), then a permuting copy
 *   conv_transpose  (the conv's input gradient) one GEMM per group into
 *                   columns [Co*K, N*L], then col2im (a kernel)
 *   conv_wgrad      im2col + one GEMM per group with the samples summed in
 *                   its inner dimension
 *   im2col, col2im  the kernels themselves
 *   max_pool        values and (optionally) the flat indices
 *   max_pool_backward
 *   adaptive_avg_pool, adaptive_max_pool (its indices for max_pool_backward;
 *                   the mean's gradient is a composite of device matmuls)
 *
 * The contract is the cpu kernels' (src/backend/cpu/conv.c: contiguous
 * f32/f64 operands, the geometry in a->p.conv / a->p.pool, 1-D and 2-D
 * convolutions as 3-D ones); other dtypes, post_relu, and a device without
 * CLBlast decline to the cpu fallback.
 *
 * col2im gathers instead of scattering: each image element sums the
 * columns of the windows that cover it, in kernel order (the order the cpu's
 * col2im adds them), so no atomics and the same sums.  Both walk whole rows
 * per work item (PoCL runs a work item's loop well; 64-bit divisions per
 * element made im2col ten times slower).  max_pool takes the
 * first maximum in window order, a NaN replacing it, as the cpu;
 * max_pool_backward walks each plane's outputs in order (one work item per
 * plane), so the gradient sums do not depend on scheduling.
 *
 * The kernel bodies use ct__ocl_dialect's CT_KERNEL / CT_GLOBAL / CT_GID
 * only (no OpenCL-only words), to be shared with a CUDA backend.
 *
 * One code for both GPU devices: the CUDA backend calls these kernel
 * functions with its own tensors and ct__gpu_foreign set (../gpu_dialect.h).
 * The kernels (im2col, col2im, the permuting copies) then go through its
 * launcher as CUDA C, the GEMMs through ct__ocl_gemm_batched (CLBlast per
 * group here, one strided-batched cuBLAS call there), and scratch memory
 * and memset through the device interface of the output's device. */
#include <stdio.h>
#include <string.h>

#include "../../core/device.h"
#include "../../ops/op_table.h"
#include "../gpu_dialect.h"
#include "ocl.h"

const char ct__ocl_dialect[] =
    "#define CT_KERNEL __kernel\n"
    "#define CT_GLOBAL __global\n"
    "#define CT_GID ((long)get_global_id(0))\n"
    "typedef struct { long v[24]; } ct_kp;\n";

typedef struct kp { int64_t v[24]; } kp;

/* declines for the device the kernel runs for (CUDA through ct__gpu_foreign) */
static ct_status no_kernel(const char *op, const char *why) {
    return ct__no_device_kernel(op, ct__gpu_foreign ? ct__gpu_foreign->type : CT_OPENCL, why);
}

/* the kernel source: the dialect, T, then body */
static ct_status run(const char *what, ct_dtype dt, const char *body, size_t n, const ct_ocl_arg *args, int nargs) {
    char src[8192];
    int len = snprintf(src, sizeof src, "%s#define T %s\n%s", ct__ocl_dialect, dt == CT_F64 ? "double" : "float", body);
    if (len >= (int)sizeof src) return ct__error_status(CT_ERR_RUNTIME, "%s: kernel text too long", what);
    return ct__ocl_launch(what, src, n, args, nargs);
}

#define TARG(t) {(t), NULL, 0}
#define VARG(v) {NULL, &(v), sizeof(v)}

/* the window geometry as kernel parameters v[4..21] */
static void win_params(const ct_p_conv *pc, kp *p) {
    for (int j = 0; j < 3; j++) {
        p->v[4 + j] = pc->image_size[j];
        p->v[7 + j] = pc->grid_size[j];
        p->v[10 + j] = pc->kernel_size[j];
        p->v[13 + j] = pc->stride[j];
        p->v[16 + j] = pc->padding[j];
        p->v[19 + j] = pc->dilation[j];
    }
}
static int64_t prod3(const int64_t *a) { return a[0] * a[1] * a[2]; }

#define GEOM_DEFS                                                                                  \
    "#define IMG0 p.v[4]\n#define IMG1 p.v[5]\n#define IMG2 p.v[6]\n"                             \
    "#define GR0 p.v[7]\n#define GR1 p.v[8]\n#define GR2 p.v[9]\n"                                 \
    "#define KS0 p.v[10]\n#define KS1 p.v[11]\n#define KS2 p.v[12]\n"                              \
    "#define ST0 p.v[13]\n#define ST1 p.v[14]\n#define ST2 p.v[15]\n"                              \
    "#define PD0 p.v[16]\n#define PD1 p.v[17]\n#define PD2 p.v[18]\n"                              \
    "#define DL0 p.v[19]\n#define DL1 p.v[20]\n#define DL2 p.v[21]\n"

/* columns from images [N*C, IS]: one work item per column row (nc, k) walks its L window
 * positions (no divisions per element); row (nc, k) is written at (nc * K + k) * L (layout
 * [N, C*K, L], v[2] = 0) or at ((c * K + k) * N + n) * L (layout [C*K, N*L]: v[2] = N, v[3] = C,
 * the samples side by side for one GEMM); v[0] the rows */
static const char k_im2col_src[] = GEOM_DEFS
    "CT_KERNEL void k(CT_GLOBAL char *xb, long xo, CT_GLOBAL char *cb, long co, const ct_kp p) {\n"
    " long r = CT_GID; if (r >= p.v[0]) return;\n"
    " long K = KS0 * KS1 * KS2, L = GR0 * GR1 * GR2, IS = IMG0 * IMG1 * IMG2;\n"
    " long k = r % K, nc = r / K;\n"
    " long kz = k / (KS1 * KS2), ky = (k / KS2) % KS1, kx = k % KS2;\n"
    " CT_GLOBAL const T *x = (CT_GLOBAL const T *)(xb + xo) + nc * IS;\n"
    " long at = p.v[2] ? (((nc % p.v[3]) * K + k) * p.v[2] + nc / p.v[3]) * L : r * L;\n"
    " CT_GLOBAL T *dst = (CT_GLOBAL T *)(cb + co) + at;\n"
    " for (long oz = 0; oz < GR0; oz++) { long iz = oz * ST0 - PD0 + kz * DL0; int zin = iz >= 0 && iz < IMG0;\n"
    "  for (long oy = 0; oy < GR1; oy++) { long iy = oy * ST1 - PD1 + ky * DL1; int yin = zin && iy >= 0 && iy < IMG1;\n"
    "   CT_GLOBAL const T *row = x + (iz * IMG1 + iy) * IMG2;\n"
    "   long ix = -PD2 + kx * DL2;\n"
    "   for (long ox = 0; ox < GR2; ox++, ix += ST2) *dst++ = (yin && ix >= 0 && ix < IMG2) ? row[ix] : (T)0; } }\n"
    "}\n";

/* images [N*C, IS] := the sum of the columns covering each element (layout as
 * im2col's: v[2], v[3]) (+ bias[c] when v[1] > 0: C = v[1]); one work item per image row
 * (nc, iz, iy); v[0] the rows */
static const char k_col2im_src[] = GEOM_DEFS
    "CT_KERNEL void k(CT_GLOBAL char *cb, long co, CT_GLOBAL char *xb, long xo, CT_GLOBAL char *bb, long bo, const ct_kp p) {\n"
    " long r = CT_GID; if (r >= p.v[0]) return;\n"
    " CT_GLOBAL const T *col = (CT_GLOBAL const T *)(cb + co);\n"
    " long K = KS0 * KS1 * KS2, L = GR0 * GR1 * GR2;\n"
    " long iy = r % IMG1, iz = (r / IMG1) % IMG0, nc = r / (IMG1 * IMG0);\n"
    " long rowst = p.v[2] ? p.v[2] * L : L;\n"
    " CT_GLOBAL const T *cbase = col + (p.v[2] ? ((nc % p.v[3]) * K * p.v[2] + nc / p.v[3]) * L : nc * K * L);\n"
    " CT_GLOBAL T *x = (CT_GLOBAL T *)(xb + xo) + r * IMG2;\n"
    " T bias = p.v[1] > 0 ? ((CT_GLOBAL const T *)(bb + bo))[nc % p.v[1]] : (T)0;\n"
    " for (long ix = 0; ix < IMG2; ix++) {\n"
    "  T s = (T)0;\n"
    "  for (long kz = 0; kz < KS0; kz++) { long tz = iz + PD0 - kz * DL0; if (tz < 0 || (ST0 != 1 && tz % ST0)) continue; long oz = ST0 == 1 ? tz : tz / ST0; if (oz >= GR0) continue;\n"
    "   for (long ky = 0; ky < KS1; ky++) { long ty = iy + PD1 - ky * DL1; if (ty < 0 || (ST1 != 1 && ty % ST1)) continue; long oy = ST1 == 1 ? ty : ty / ST1; if (oy >= GR1) continue;\n"
    "    for (long kx = 0; kx < KS2; kx++) { long tx = ix + PD2 - kx * DL2; if (tx < 0 || (ST2 != 1 && tx % ST2)) continue; long ox = ST2 == 1 ? tx : tx / ST2; if (ox >= GR2) continue;\n"
    "     s += cbase[((kz * KS1 + ky) * KS2 + kx) * rowst + (oz * GR1 + oy) * GR2 + ox]; } } }\n"
    "  x[ix] = s + bias; }\n"
    "}\n";

/* side: 0 layout [N, C*K, L], else N (layout [C*K, N*L], C channels) */
static ct_status im2col_run(const char *what, ct_dtype dt, ct_tensor *x, ct_tensor *cols, int64_t NC, int64_t side,
                            int64_t C, const ct_p_conv *pc) {
    kp p = {{0}};
    win_params(pc, &p);
    p.v[0] = NC * prod3(pc->kernel_size);
    p.v[2] = side;
    p.v[3] = C;
    ct_ocl_arg args[3] = {TARG(x), TARG(cols), VARG(p)};
    return run(what, dt, k_im2col_src, (size_t)p.v[0], args, 3);
}

static ct_status col2im_run(const char *what, ct_dtype dt, ct_tensor *cols, ct_tensor *img, ct_tensor *bias, int64_t NC,
                            int64_t side, int64_t C, const ct_p_conv *pc) {
    kp p = {{0}};
    win_params(pc, &p);
    p.v[0] = NC * pc->image_size[0] * pc->image_size[1];
    p.v[1] = bias ? C : 0;
    p.v[2] = side;
    p.v[3] = C;
    ct_ocl_arg args[4] = {TARG(cols), TARG(img), TARG(bias ? bias : img), VARG(p)};
    return run(what, dt, k_col2im_src, (size_t)p.v[0], args, 4);
}

static bool float_dt(ct_dtype dt) { return dt == CT_F32 || dt == CT_F64; }

/* scratch memory and memset on the device of `like`, through the device
 * interface (this device's, or CUDA's when run through ct__gpu_foreign) */
static ct_tensor *device_empty(const ct_tensor *like, int64_t n, ct_dtype dt) {
    return ct__alloc(&n, 1, dt, like->storage->device);
}
static ct_status device_zero(const ct_tensor *t, int64_t n) {
    const ct_device_vtbl *vt = ct__device(t->storage->device);
    if (!vt || !vt->memset) return ct__error_status(CT_ERR_DEVICE, "conv: the tensor's device has no memset");
    return vt->memset(ct__ptr(t), 0, (size_t)n * ct_dtype_size(t->dtype), t->storage->device_index);
}

/* [N, C, img] -> [N, C*K, L] */
static ct_status k_im2col(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    if (!float_dt(out[0]->dtype)) return no_kernel("im2col", ct_dtype_name(out[0]->dtype));
    return im2col_run("im2col", out[0]->dtype, in[0], out[0], a->p.conv.batch * a->p.conv.in_channels, 0,
                      a->p.conv.in_channels, &a->p.conv);
}

/* [N, C*K, L] -> [N, C, img] */
static ct_status k_col2im(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    if (!float_dt(out[0]->dtype)) return no_kernel("col2im", ct_dtype_name(out[0]->dtype));
    return col2im_run("col2im", out[0]->dtype, in[0], out[0], NULL, a->p.conv.batch * a->p.conv.in_channels, 0,
                      a->p.conv.in_channels, &a->p.conv);
}

/* dst := src viewed with sizes/strides (a permutation), through the device's copy kernel */
static ct_status copy_view(ct_tensor *dst, const int64_t *dsz, const int64_t *dst_st, ct_tensor *src,
                           const int64_t *ssz, const int64_t *src_st, int nd) {
    ct_tensor *dv = ct__view_of(dst, dsz, dst_st, nd, dst->offset);
    ct_tensor *sv = ct__view_of(src, ssz, src_st, nd, src->offset);
    ct_tensor *o[1] = {dv}, *i[1] = {sv};
    ct_status st = dv && sv ? ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL) : CT_ERR_OOM;
    ct_release(dv);
    ct_release(sv);
    return st;
}

/* y[N, Co, L] = w[Co, Cg*K] @ im2col(x) per group (+ b), all samples in one GEMM per group:
 * the columns [C*K, N*L], the product [Co, N*L] (its rows the bias first), then permuted */
static ct_status k_conv(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const ct_p_conv *pc = &a->p.conv;
    ct_tensor *y = out[0], *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
    ct_dtype dt = y->dtype;
    if (!float_dt(dt)) return no_kernel("conv", ct_dtype_name(dt));
    if (pc->post_relu) return no_kernel("conv", "post_relu");
    if (pc->blocked) return no_kernel("conv", "a channel-blocked layout");
    int64_t N = pc->batch, C = pc->in_channels, Co = pc->out_channels, G = pc->groups;
    int64_t K = prod3(pc->kernel_size), L = prod3(pc->grid_size), Cg = C / G, Og = Co / G, CK = Cg * K, NL = N * L;
    if (N == 0 || Co == 0 || L == 0) return CT_OK;
    if (CK == 0 && !b) return device_zero(y, N * Co * L);
    ct_tensor *prod = device_empty(y, Co * NL, dt), *cols = CK ? device_empty(y, C * K * NL, dt) : NULL;
    ct_status st = !prod || (CK && !cols) ? ct_last_error_code() : CT_OK;
    if (!st && b) st = copy_view(prod, (int64_t[]){Co, NL}, (int64_t[]){NL, 1}, b, (int64_t[]){Co, NL}, (int64_t[]){1, 0}, 2);
    if (!st && CK) st = im2col_run("conv", dt, x, cols, N * C, N, C, pc);
    if (!st && CK)
        st = ct__ocl_gemm_batched("conv", dt, false, false, Og, NL, CK, 1.0, w, 0, CK, Og * CK, cols, 0, NL, CK * NL,
                                  b ? 1.0 : 0.0, prod, 0, NL, Og * NL, G);
    /* [Co, N, L] -> [N, Co, L] */
    if (!st) st = copy_view(y, (int64_t[]){Co, N, L}, (int64_t[]){L, Co * L, 1}, prod, (int64_t[]){Co, N, L},
                            (int64_t[]){NL, L, 1}, 3);
    ct_release(prod);
    ct_release(cols);
    return st;
}

/* y[N, Co, img] = col2im(w^T @ x) per group (+ b): x [N, C, grid] permuted to [C, N*L],
 * the columns [Co*K, N*L] in one GEMM per group */
static ct_status k_conv_transpose(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const ct_p_conv *pc = &a->p.conv;
    ct_tensor *y = out[0], *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
    ct_dtype dt = y->dtype;
    if (!float_dt(dt)) return no_kernel("conv_transpose", ct_dtype_name(dt));
    int64_t N = pc->batch, C = pc->in_channels, Co = pc->out_channels, G = pc->groups;
    int64_t K = prod3(pc->kernel_size), L = prod3(pc->grid_size), Cg = C / G, Og = Co / G, OK = Og * K, NL = N * L;
    if (N == 0 || Co == 0 || prod3(pc->image_size) == 0) return CT_OK;
    int64_t ncols = Co * K * NL > 0 ? Co * K * NL : 1;
    ct_tensor *cols = device_empty(y, ncols, dt), *xp = C * NL > 0 ? device_empty(y, C * NL, dt) : NULL;
    ct_status st = !cols || (C * NL > 0 && !xp) ? ct_last_error_code() : CT_OK;
    bool work = Cg > 0 && L > 0 && OK > 0;
    if (!st && !work) st = device_zero(cols, ncols);
    if (!st && work)
        st = copy_view(xp, (int64_t[]){C, N, L}, (int64_t[]){NL, L, 1}, x, (int64_t[]){C, N, L},
                       (int64_t[]){L, C * L, 1}, 3);
    if (!st && work)
        st = ct__ocl_gemm_batched("conv_transpose", dt, true, false, OK, NL, Cg, 1.0, w, 0, OK, Cg * OK, xp, 0, NL,
                                  Cg * NL, 0.0, cols, 0, NL, OK * NL, G);
    if (!st) st = col2im_run("conv_transpose", dt, cols, y, b, N * Co, N, Co, pc);
    ct_release(cols);
    ct_release(xp);
    return st;
}

/* dw[Cgr, Cim/G, k] = gr' @ cols^T per group: gr [N, Cgr, grid] permuted to [Cgr, N*L], the
 * columns [Cim*K, N*L] (one GEMM over every sample) */
static ct_status k_conv_wgrad(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    const ct_p_conv *pc = &a->p.conv;
    ct_tensor *dw = out[0], *im = in[0], *gr = in[1];
    ct_dtype dt = dw->dtype;
    if (!float_dt(dt)) return no_kernel("conv weight gradient", ct_dtype_name(dt));
    int64_t N = pc->batch, Cim = pc->in_channels, Cgr = pc->out_channels, G = pc->groups;
    int64_t K = prod3(pc->kernel_size), L = prod3(pc->grid_size), Cg = Cim / G, Og = Cgr / G, CK = Cg * K, NL = N * L;
    if (Cgr * CK == 0) return CT_OK;
    if (NL == 0 || Og == 0) return device_zero(dw, Cgr * CK);
    ct_tensor *cols = device_empty(dw, Cim * K * NL, dt), *gp = device_empty(dw, Cgr * NL, dt);
    ct_status st = !cols || !gp ? ct_last_error_code() : CT_OK;
    if (!st) st = im2col_run("conv weight gradient", dt, im, cols, N * Cim, N, Cim, pc);
    if (!st)
        st = copy_view(gp, (int64_t[]){Cgr, N, L}, (int64_t[]){NL, L, 1}, gr, (int64_t[]){Cgr, N, L},
                       (int64_t[]){L, Cgr * L, 1}, 3);
    if (!st)
        st = ct__ocl_gemm_batched("conv weight gradient", dt, false, true, Og, CK, NL, 1.0, gp, 0, NL, Og * NL, cols,
                                  0, NL, CK * NL, 0.0, dw, 0, CK, Og * CK, G);
    ct_release(cols);
    ct_release(gp);
    return st;
}

/* ---- max pooling on planes [P, H, W] ---------------------------------------
 * v: 0 count (P*Ho*Wo), 1 H, 2 W, 3 Ho, 4 Wo, 5 kh, 6 kw, 7 sh, 8 sw, 9 ph,
 * 10 pw, 11 dh, 12 dw, 13 indices wanted */
static const char k_max_pool_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *xb, long xo, CT_GLOBAL char *yb, long yo, CT_GLOBAL char *ib, long io, const ct_kp p) {\n"
    " long i = CT_GID; if (i >= p.v[0]) return;\n"
    " long H = p.v[1], W = p.v[2], Ho = p.v[3], Wo = p.v[4];\n"
    " long ow = i % Wo, oh = (i / Wo) % Ho, pl = i / (Wo * Ho);\n"
    " CT_GLOBAL const T *xp = (CT_GLOBAL const T *)(xb + xo) + pl * H * W;\n"
    " long hs = oh * p.v[7] - p.v[9], he = hs + (p.v[5] - 1) * p.v[11] + 1; if (he > H) he = H;\n"
    " while (hs < 0) hs += p.v[11];\n"
    " long ws = ow * p.v[8] - p.v[10], we = ws + (p.v[6] - 1) * p.v[12] + 1; if (we > W) we = W;\n"
    " while (ws < 0) ws += p.v[12];\n"
    " long mi = hs * W + ws; T mv = -INFINITY;\n"
    " for (long ih = hs; ih < he; ih += p.v[11]) for (long iw = ws; iw < we; iw += p.v[12]) {\n"
    "  T v = xp[ih * W + iw]; if (v > mv || v != v) { mv = v; mi = ih * W + iw; } }\n"
    " ((CT_GLOBAL T *)(yb + yo))[i] = mv;\n"
    " if (p.v[13]) ((CT_GLOBAL long *)(ib + io))[i] = mi;\n}\n";

/* dx[P, HW] from g[P, L] and the indices: one item per plane, its outputs in order
 * (v: 0 P, 1 HW, 2 L) */
static const char k_max_pool_bwd_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *gb, long go, CT_GLOBAL char *ib, long io, CT_GLOBAL char *db, long dof, const ct_kp p) {\n"
    " long pl = CT_GID; if (pl >= p.v[0]) return;\n"
    " long HW = p.v[1], L = p.v[2];\n"
    " CT_GLOBAL const T *g = (CT_GLOBAL const T *)(gb + go) + pl * L;\n"
    " CT_GLOBAL const long *ix = (CT_GLOBAL const long *)(ib + io) + pl * L;\n"
    " CT_GLOBAL T *d = (CT_GLOBAL T *)(db + dof) + pl * HW;\n"
    " for (long j = 0; j < HW; j++) d[j] = (T)0;\n"
    " for (long o = 0; o < L; o++) d[ix[o]] += g[o];\n}\n";

/* adaptive pooling of planes [P, H, W] to [P, Ho, Wo]: one item per output,
 * the window [oh*H/Ho, ceil((oh+1)*H/Ho)) x (the same along W), as the
 * cpu's: the mean summed in window order then divided by the count, or the
 * first maximum (a NaN replacing it) and its flat index
 * (v: 0 count P*Ho*Wo, 1 H, 2 W, 3 Ho, 4 Wo, 5 max, 6 indices wanted) */
static const char k_adaptive_pool_src[] =
    "CT_KERNEL void k(CT_GLOBAL char *xb, long xo, CT_GLOBAL char *yb, long yo, CT_GLOBAL char *ib, long io, const ct_kp p) {\n"
    " long i = CT_GID; if (i >= p.v[0]) return;\n"
    " long H = p.v[1], W = p.v[2], Ho = p.v[3], Wo = p.v[4];\n"
    " long ow = i % Wo, oh = (i / Wo) % Ho, pl = i / (Wo * Ho);\n"
    " CT_GLOBAL const T *xp = (CT_GLOBAL const T *)(xb + xo) + pl * H * W;\n"
    " long hs = (oh * H) / Ho, he = ((oh + 1) * H + Ho - 1) / Ho;\n"
    " long ws = (ow * W) / Wo, we = ((ow + 1) * W + Wo - 1) / Wo;\n"
    " T r;\n"
    " if (p.v[5]) {\n"
    "  long mi = hs * W + ws; T mv = -INFINITY;\n"
    "  for (long ih = hs; ih < he; ih++) for (long iw = ws; iw < we; iw++) {\n"
    "   T v = xp[ih * W + iw]; if (v > mv || v != v) { mv = v; mi = ih * W + iw; } }\n"
    "  r = mv;\n"
    "  if (p.v[6]) ((CT_GLOBAL long *)(ib + io))[i] = mi;\n"
    " } else {\n"
    "  T s = (T)0;\n"
    "  for (long ih = hs; ih < he; ih++) for (long iw = ws; iw < we; iw++) s += xp[ih * W + iw];\n"
    "  r = s / (T)((he - hs) * (we - ws));\n"
    " }\n"
    " ((CT_GLOBAL T *)(yb + yo))[i] = r;\n}\n";

static ct_status adaptive_pool(const char *what, ct_tensor *const *out, int nout, ct_tensor *const *in,
                               const ct_args *a, bool is_max) {
    const ct_p_pool *q = &a->p.pool;
    ct_dtype dt = out[0]->dtype;
    if (!float_dt(dt)) return no_kernel(what, ct_dtype_name(dt));
    ct_tensor *idx = is_max && nout > 1 ? out[1] : NULL;
    if (idx && idx->dtype != CT_I64) return no_kernel(what, ct_dtype_name(idx->dtype));
    kp p = {{q->planes * q->output_size[0] * q->output_size[1], q->input_size[0], q->input_size[1],
             q->output_size[0], q->output_size[1], is_max, idx != NULL}};
    if (p.v[0] == 0) return CT_OK;
    if (p.v[1] * p.v[2] == 0) return no_kernel(what, "an empty input plane");
    ct_ocl_arg args[4] = {TARG(in[0]), TARG(out[0]), TARG(idx ? idx : out[0]), VARG(p)};
    return run(what, dt, k_adaptive_pool_src, (size_t)p.v[0], args, 4);
}

static ct_status k_adaptive_avg_pool(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                     const ct_args *a) {
    (void)nin;
    return adaptive_pool("adaptive_avg_pool", out, nout, in, a, false);
}

static ct_status k_adaptive_max_pool(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                                     const ct_args *a) {
    (void)nin;
    return adaptive_pool("adaptive_max_pool", out, nout, in, a, true);
}

static ct_status k_max_pool(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nin;
    const ct_p_pool *q = &a->p.pool;
    ct_dtype dt = out[0]->dtype;
    if (!float_dt(dt)) return no_kernel("max_pool", ct_dtype_name(dt));
    ct_tensor *idx = nout > 1 ? out[1] : NULL;
    kp p = {{q->planes * q->output_size[0] * q->output_size[1], q->input_size[0], q->input_size[1],
             q->output_size[0], q->output_size[1], q->kernel_size[0], q->kernel_size[1], q->stride[0],
             q->stride[1], q->padding[0], q->padding[1], q->dilation[0], q->dilation[1], idx != NULL}};
    ct_ocl_arg args[4] = {TARG(in[0]), TARG(out[0]), TARG(idx ? idx : out[0]), VARG(p)};
    return run("max_pool", dt, k_max_pool_src, (size_t)p.v[0], args, 4);
}

static ct_status k_max_pool_backward(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout; (void)nin;
    const ct_p_pool *q = &a->p.pool;
    ct_dtype dt = out[0]->dtype;
    if (!float_dt(dt) || in[1]->dtype != CT_I64) return no_kernel("max_pool backward", ct_dtype_name(dt));
    kp p = {{q->planes, q->input_size[0] * q->input_size[1], q->output_size[0] * q->output_size[1]}};
    ct_ocl_arg args[4] = {TARG(in[0]), TARG(in[1]), TARG(out[0]), VARG(p)};
    return run("max_pool backward", dt, k_max_pool_bwd_src, (size_t)p.v[0], args, 4);
}

void ct__ocl_register_conv(ct_kernel_fn *t) {
    t[CT_OP_conv] = k_conv;
    t[CT_OP_conv_transpose] = k_conv_transpose;
    t[CT_OP_conv_wgrad] = k_conv_wgrad;
    t[CT_OP_im2col] = k_im2col;
    t[CT_OP_col2im] = k_col2im;
    t[CT_OP_max_pool] = k_max_pool;
    t[CT_OP_max_pool_backward] = k_max_pool_backward;
    t[CT_OP_adaptive_avg_pool] = k_adaptive_avg_pool;
    t[CT_OP_adaptive_max_pool] = k_adaptive_max_pool;
}
