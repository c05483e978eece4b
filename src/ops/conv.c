/* conv.c -- convolution, pooling and resampling (torch.nn.functional).
 *
 * Each op validates its arguments with PyTorch-like messages, makes its
 * inputs contiguous in the compute dtype (f32 or f64; f16/bf16 compute in
 * f32 and convert back), and hands the geometry to the CPU kernels in
 * src/backend/cpu/conv.c in its op's parameter family (a.p.conv,
 * a.p.pool, a.p.resample: src/ops/params_conv.def, params_pool.def,
 * params_resample.def).  1-D and 2-D convolutions run as 3-D ones with
 * leading spatial dims of size 1. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv_impl.h"
#include "autocast.h"
#include "meta.h"
#include "ew.h"

/* ---- helpers ------------------------------------------------------------ */
static bool is_float(ct_dtype dt) {
    return dt == CT_F16 || dt == CT_BF16 || dt == CT_F32 || dt == CT_F64;
}
static ct_dtype compute_dt(ct_dtype dt) { return dt == CT_F64 ? CT_F64 : CT_F32; }
/* The same for op on x's device, where f16/bf16 stay as they are when the
 * device's kernel computes them itself (ct__half_native: the CPU's
 * convolutions in bf16 through oneDNN on AVX512_BF16 CPUs) */
static ct_dtype compute_dt_for(ct_op op, const ct_tensor *x) {
    ct_dtype dt = x->dtype;
    if ((dt == CT_F16 || dt == CT_BF16) && x->storage && ct__half_native(x->storage->device, op, dt)) return dt;
    return compute_dt(dt);
}

/* "(2 x 3)" style list */
static const char *tuple(const int64_t *v, int n, const char *sep) {
    static _Thread_local char bufs[8][128];
    static _Thread_local int next;
    char *b = bufs[next++ & 7];
    size_t k = 0;
    k += (size_t)snprintf(b + k, sizeof bufs[0] - k, "(");
    for (int i = 0; i < n && k < sizeof bufs[0]; i++)
        k += (size_t)snprintf(b + k, sizeof bufs[0] - k, "%s%lld", i ? sep : "", (long long)v[i]);
    if (k < sizeof bufs[0]) snprintf(b + k, sizeof bufs[0] - k, ")");
    return b;
}

/* Converts a fresh compute-dtype result back to dt (releases o on any path). */
static ct_tensor *to_out_dtype(ct_tensor *o, ct_dtype dt) {
    if (!o || o->dtype == dt) return o;
    ct_tensor *c = ct__contig_as(o, dt);
    ct_release(o);
    return c;
}

/* Copies an optional array of n entries (def when NULL); checks each with
 * min: returns false + error otherwise. */
static bool get_arr(const char *op, const char *what, const int64_t *src, int n, int64_t def,
                    int64_t min, int64_t *dst, const char *msg) {
    for (int i = 0; i < n; i++) {
        dst[i] = src ? src[i] : def;
        if (dst[i] < min) {
            ct__error(CT_ERR_ARG, "%s: %s, but got %s=%s", op, msg, what, tuple(dst, i + 1, ", "));
            return false;
        }
    }
    return true;
}

/* The checks conv and conv_transpose share: dtypes, ranks, groups (0 + error). */
static int conv_fail(void *null_from_error) { (void)null_from_error; return 0; }
static int conv_check(const char *op, const ct_tensor *x, const ct_tensor *w, const ct_tensor *b,
                      int nd, int64_t groups) {
    ct_dtype dt = x->dtype;
    if (!is_float(dt))
        return conv_fail(ct__error(CT_ERR_DTYPE, "%s: \"%s\" not implemented for '%s' (floating point input expected)",
                          op, op, ct_dtype_name(dt)));
    if (w->dtype != dt)
        return conv_fail(ct__error(CT_ERR_DTYPE, "%s: Input type (%s) and weight type (%s) should be the same",
                          op, ct_dtype_name(dt), ct_dtype_name(w->dtype)));
    if (b && b->dtype != dt)
        return conv_fail(ct__error(CT_ERR_DTYPE, "%s: Input type (%s) and bias type (%s) should be the same",
                          op, ct_dtype_name(dt), ct_dtype_name(b->dtype)));
    if (w->ndim != nd + 2)
        return conv_fail(ct__error(CT_ERR_SHAPE, "%s: expected weight to be %d-dimensional, but got weight of size %s",
                          op, nd + 2, ct__tshape(w)));
    if (x->ndim != nd + 1 && x->ndim != nd + 2)
        return conv_fail(ct__error(CT_ERR_SHAPE, "%s: Expected %dD (unbatched) or %dD (batched) input to %s, "
                          "but got input of size: %s", op, nd + 1, nd + 2, op, ct__tshape(x)));
    if (groups <= 0) return conv_fail(ct__error(CT_ERR_ARG, "%s: non-positive groups is not supported", op));
    return 1;
}

/* ---- meta functions ------------------------------------------------------ */
#define FAIL(code, ...) return ct__error_status(code, __VA_ARGS__)

/* conv and conv_transpose: x [N, C, *sp] or [C, *sp], w, [b] on the
 * geometry of a->p.conv (what every entry -- the public functions and the
 * derivatives' ct__conv_geom -- passes).  The result: [N,] Co, and the grid
 * (conv) or the image (conv_transpose). */
CT_META_FN(ct__meta_conv) {
    ct_op op = a->op;
    const char *name = op == CT_OP_conv ? "conv" : "conv_transpose";
    const ct_p_conv *geom = &a->p.conv;
    ct_tensor *x = in[0], *w = in[1], *b = nin > 2 ? in[2] : NULL;
    ct_dtype dt = x->dtype;
    if (!is_float(dt) || w->dtype != dt || (b && b->dtype != dt))
        FAIL(CT_ERR_DTYPE, "%s: expected floating point input, weight and bias of one dtype, but got %s and %s",
             name, ct_dtype_name(dt), ct_dtype_name(w->dtype));
    int nd = w->ndim - 2;
    int64_t blk = op == CT_OP_conv ? geom->blocked : 0;
    /* a channel-blocked x [N, C/8, H, W, 8] reads as [N, C, H, W] */
    int64_t xs[CT_MAX_DIMS];
    int xnd = x->ndim;
    memcpy(xs, x->sizes, sizeof(int64_t) * (size_t)xnd);
    if (blk & ~(int64_t)3) FAIL(CT_ERR_ARG, "%s: bad layout bits %lld", name, (long long)blk);
    if (blk && (nd != 2 || geom->groups != 1 || (blk & 1 && (xnd != 5 || xs[4] != 8)) ||
                (!(blk & 1) && xnd != 4) || (blk & 2 && w->sizes[0] % 8)))
        FAIL(CT_ERR_SHAPE, "%s: a channel-blocked convolution takes a batched 2-D input ([N, C/8, H, W, 8] or "
             "[N, C, H, W]), groups 1 and a multiple of 8 output channels; got input %s, weight %s", name,
             ct__tshape(x), ct__tshape(w));
    if (blk & 1) {
        xs[1] *= 8;
        xnd = 4;
    }
    if (nd < 1 || nd > 3 || (xnd != nd + 1 && xnd != nd + 2))
        FAIL(CT_ERR_SHAPE, "%s: weight of size %s does not fit input of size %s", name, ct__tshape(w),
             ct__tshape(x));
    bool batched = xnd == nd + 2;
    int64_t groups = geom->groups;
    int64_t N = batched ? xs[0] : 1, C = xs[batched ? 1 : 0];
    const int64_t *sp = xs + (batched ? 2 : 1);
    /* conv: x on the image, result on the grid; conv_transpose: the reverse */
    const int64_t *xin = op == CT_OP_conv ? geom->image_size : geom->grid_size;
    const int64_t *xout = op == CT_OP_conv ? geom->grid_size : geom->image_size;
    int64_t Co = op == CT_OP_conv ? w->sizes[0] : w->sizes[1] * groups;
    int64_t Cw = op == CT_OP_conv ? w->sizes[1] * groups : w->sizes[0];
    bool ok = groups > 0 && C == Cw && (op != CT_OP_conv || Co % groups == 0) &&
              (!b || (b->ndim == 1 && b->sizes[0] == Co));
    for (int j = 0; j < 3 && ok; j++) {
        int q = j - (3 - nd);
        if (q < 0) ok = xin[j] == 1 && xout[j] == 1 && geom->kernel_size[j] == 1;
        else ok = xin[j] == sp[q] && geom->kernel_size[j] == w->sizes[2 + q] && xout[j] >= 0;
    }
    if (!ok)
        FAIL(CT_ERR_SHAPE, "%s: input of size %s, weight of size %s and groups=%lld do not fit the geometry",
             name, ct__tshape(x), ct__tshape(w), (long long)groups);
    int64_t oshape[CT_MAX_DIMS];
    int on = 0;
    if (batched) oshape[on++] = N;
    oshape[on++] = Co;
    for (int j = 3 - nd; j < 3; j++) oshape[on++] = xout[j];
    if (blk & 2) { /* [N, Co, H, W] -> [N, Co/8, H, W, 8] */
        oshape[1] /= 8;
        oshape[on++] = 8;
    }
    ct_device dev;
    if (ct__meta_device(name, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, oshape, on, dt, dev);
    return CT_OK;
}

/* conv_wgrad: in = the image side, the grid side (the conv's input and
 * output gradient, or the reverse for conv_transpose); the weight gradient
 * [Cgr, Cim / groups, *k] (the shape of both ops' weights). */
CT_META_FN(ct__meta_conv_wgrad) {
    const ct_p_conv *g = &a->p.conv;
    ct_tensor *im = in[0], *gr = in[1];
    int nd = (int)g->spatial_dims;
    if (!is_float(im->dtype) || gr->dtype != im->dtype || nd < 1 || nd > 3 || im->ndim != gr->ndim ||
        (im->ndim != nd + 1 && im->ndim != nd + 2))
        FAIL(CT_ERR_ARG, "conv weight gradient: input of size %s and gradient of size %s do not fit",
             ct__tshape(im), ct__tshape(gr));
    bool batched = im->ndim == nd + 2;
    int64_t Cim = im->sizes[batched ? 1 : 0], Cgr = gr->sizes[batched ? 1 : 0];
    if (g->groups <= 0 || Cim % g->groups || Cgr % g->groups || (batched && im->sizes[0] != gr->sizes[0]))
        FAIL(CT_ERR_SHAPE, "conv weight gradient: channels %lld and %lld do not fit groups=%lld",
             (long long)Cim, (long long)Cgr, (long long)g->groups);
    int64_t ws[CT_MAX_DIMS] = {Cgr, Cim / g->groups};
    for (int j = 0; j < nd; j++) ws[2 + j] = g->kernel_size[3 - nd + j];
    ct__meta_set(out, ws, nd + 2, im->dtype, im->storage->device);
    return CT_OK;
}

/* the pooling and resampling ops: x's leading dims, then output_size over
 * the last spatial_dims (pools) or ndim - 2 (interpolate) dims; the max
 * pools' second output, the int64 indices, has the same sizes (absent when
 * nout is 1) */
CT_META_FN(ct__meta_planes) {
    ct_tensor *x = in[0];
    const char *name = ct__op_info[a->op].name;
    bool resample = a->op == CT_OP_interpolate;
    int nsp = resample ? x->ndim - 2 : (int)a->p.pool.spatial_dims;
    const int64_t *isz = resample ? a->p.resample.input_size : a->p.pool.input_size;
    const int64_t *osz = resample ? a->p.resample.output_size : a->p.pool.output_size;
    int64_t P = resample ? a->p.resample.planes : a->p.pool.planes;
    if (!is_float(x->dtype))
        FAIL(CT_ERR_DTYPE, "%s: \"%s\" not implemented for '%s'", name, name, ct_dtype_name(x->dtype));
    if (nsp < 1 || nsp > 2 || x->ndim < nsp + (resample ? 2 : 1) || x->ndim > nsp + 2)
        FAIL(CT_ERR_SHAPE, "%s: input of size %s does not fit %d spatial dims", name, ct__tshape(x), nsp);
    int64_t lead = 1;
    for (int d = 0; d < x->ndim - nsp; d++) lead *= x->sizes[d];
    bool ok = lead == P && osz[0] >= 0 && osz[1] >= 0 && isz[1] == x->sizes[x->ndim - 1] &&
              (nsp == 1 ? isz[0] == 1 && osz[0] == 1 : isz[0] == x->sizes[x->ndim - 2]);
    if (!ok)
        FAIL(CT_ERR_SHAPE, "%s: input of size %s does not fit the parameters (%lld planes of %lldx%lld)",
             name, ct__tshape(x), (long long)P, (long long)isz[0], (long long)isz[1]);
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    if (nsp == 2) sh[x->ndim - 2] = osz[0];
    sh[x->ndim - 1] = osz[1];
    ct__meta_set(&out[0], sh, x->ndim, x->dtype, x->storage->device);
    if (nout > 1) ct__meta_set(&out[1], sh, x->ndim, CT_I64, x->storage->device);
    return CT_OK;
}

/* max_pool_backward: in = the output gradient and the indices (the
 * pooled sizes); the input gradient has the pool's input sizes */
CT_META_FN(ct__meta_max_pool_backward) {
    ct_tensor *g = in[0], *idx = in[1];
    const ct_p_pool *pp = &a->p.pool;
    int nsp = (int)pp->spatial_dims;
    int64_t L = pp->output_size[0] * pp->output_size[1];
    if (nsp < 1 || nsp > 2 || g->ndim < nsp || !is_float(g->dtype) || idx->dtype != CT_I64 ||
        ct_numel(g) != pp->planes * L || ct_numel(idx) != pp->planes * L)
        FAIL(CT_ERR_SHAPE, "max_pool backward: gradient of size %s and indices of size %s do not fit the "
             "pool", ct__tshape(g), ct__tshape(idx));
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, g->sizes, sizeof(int64_t) * (size_t)g->ndim);
    if (nsp == 2) sh[g->ndim - 2] = pp->input_size[0];
    sh[g->ndim - 1] = pp->input_size[1];
    ct__meta_set(out, sh, g->ndim, g->dtype, g->storage->device);
    return CT_OK;
}

/* im2col: [N,] C, H, W -> [N,] C*kh*kw, L; col2im: [N,] C*kh*kw, L -> [N,] C, H, W
 * (a->p.conv: in_channels C, image_size and grid_size entries 1..2) */
CT_META_FN(ct__meta_fold) {
    ct_tensor *x = in[0];
    const ct_p_conv *g = &a->p.conv;
    bool im2col = a->op == CT_OP_im2col;
    const char *name = im2col ? "im2col" : "col2im";
    int rank = im2col ? 3 : 2;
    if (!is_float(x->dtype))
        FAIL(CT_ERR_DTYPE, "%s: \"%s\" not implemented for '%s'", name, name, ct_dtype_name(x->dtype));
    if (x->ndim != rank && x->ndim != rank + 1)
        FAIL(CT_ERR_SHAPE, "%s: Expected %dD or %dD (batch mode) tensor for input with possibly 0 batch size "
             "and non-zero dimensions, but got: %s", name, rank, rank + 1, ct__tshape(x));
    bool batched = x->ndim == rank + 1;
    int64_t C = g->in_channels, K = g->kernel_size[1] * g->kernel_size[2];
    int64_t L = g->grid_size[1] * g->grid_size[2];
    const int64_t *s = x->sizes + (batched ? 1 : 0);
    bool ok = im2col ? s[0] == C && s[1] == g->image_size[1] && s[2] == g->image_size[2]
                     : s[0] == C * K && s[1] == L;
    if (!ok || (batched && x->sizes[0] != g->batch))
        FAIL(CT_ERR_SHAPE, "%s: input of size %s does not fit the window geometry", name, ct__tshape(x));
    int64_t sh[4];
    int n = 0;
    if (batched) sh[n++] = x->sizes[0];
    if (im2col) {
        sh[n++] = C * K;
        sh[n++] = L;
    } else {
        sh[n++] = C;
        sh[n++] = g->image_size[1];
        sh[n++] = g->image_size[2];
    }
    ct__meta_set(out, sh, n, x->dtype, x->storage->device);
    return CT_OK;
}

/* The common tail of conv and conv_transpose: output [N,] Co, *out_sp;
 * the kernel geometry in the args (a.p.conv: image_size, grid_size,
 * kernel_size, stride, leading padding, dilation -- the image is the input
 * of a conv and the output of a transposed conv), dispatch in the compute
 * dtype, cast back, record. */
/* The conv's keep_weights parameter: its weight w (what the kernel reads)
 * cannot change while the result is in use, so a backend may keep a
 * reordered copy of it (oneDNN's blocked layout): in inference mode, or
 * when w does not require grad.  The op layer decides; kernels do not ask
 * autograd. */
static bool weights_fixed(const ct_tensor *w) { return ct_is_inference_mode() || !ct_requires_grad(w); }

/* meta -> allocate (in the compute dtype) -> dispatch -> cast back -> record,
 * for conv and conv_transpose on the geometry in a. */
static ct_tensor *conv_dispatch(ct_op opid, ct_tensor *x, ct_tensor *w, ct_tensor *b, ct_args *a) {
    ct_tensor *ins[3] = {x, w, b};
    int nin = b ? 3 : 2;
    ct_meta m;
    if (ct__meta_run(opid, &m, 1, ins, nin, a)) return NULL;
    ct_dtype dt = x->dtype, cdt = compute_dt_for(opid, x);
    ct_tensor *xc = ct__contig_as(x, cdt), *wc = ct__contig_as(w, cdt);
    ct_tensor *bc = b ? ct__contig_as(b, cdt) : NULL;
    ct_tensor *o = ct__alloc(m.sizes, m.ndim, cdt, m.device);
    if (!xc || !wc || (b && !bc) || !o) goto fail;
    a->p.conv.keep_weights = opid == CT_OP_conv && weights_fixed(wc);
    ct_tensor *kin[3] = {xc, wc, bc};
    if (ct__dispatch(opid, &o, 1, kin, nin, a)) goto fail;
    ct_release(xc); ct_release(wc); ct_release(bc);
    o = to_out_dtype(o, dt);
    return ct__finish(opid, o, ins, nin, a);
fail:
    ct_release(xc); ct_release(wc); ct_release(bc); ct_release(o);
    return NULL;
}

static ct_tensor *conv_run(ct_op opid, ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd, bool batched,
                           int64_t N, int64_t C, int64_t Co, int64_t groups, const int64_t *image,
                           const int64_t *grid, const int64_t *k, const int64_t *stride,
                           const int64_t *padl, const int64_t *dil) {
    (void)batched;
    ct_args a = ct__args(opid);
    ct_p_conv *pc = &a.p.conv;
    pc->batch = N; pc->in_channels = C; pc->out_channels = Co; pc->groups = groups;
    pc->spatial_dims = nd;
    for (int j = 0; j < 3; j++) {
        int q = j - (3 - nd); /* spatial index, < 0 for the padding dims */
        pc->image_size[j] = q < 0 ? 1 : image[q];
        pc->grid_size[j] = q < 0 ? 1 : grid[q];
        pc->kernel_size[j] = q < 0 ? 1 : k[q];
        pc->stride[j] = q < 0 ? 1 : stride[q];
        pc->padding[j] = q < 0 ? 0 : padl[q];
        pc->dilation[j] = q < 0 ? 1 : dil[q];
    }
    return conv_dispatch(opid, x, w, b, &a);
}

/* ---- convolution -------------------------------------------------------- */
/* x [N, C, *sp] or [C, *sp]; w [Co, C/groups, *k]; padl/padr the leading
 * and trailing padding (trailing only shapes the output). */
static ct_tensor *conv_core(const char *op, ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd,
                            const int64_t *stride, const int64_t *padl, const int64_t *padr,
                            const int64_t *dil, int64_t groups) {
    if (!conv_check(op, x, w, b, nd, groups)) return NULL;
    bool batched = x->ndim == nd + 2;
    int64_t N = batched ? x->sizes[0] : 1, C = x->sizes[batched ? 1 : 0];
    const int64_t *sp = x->sizes + (batched ? 2 : 1);
    int64_t Co = w->sizes[0], Cg = w->sizes[1];
    const int64_t *k = w->sizes + 2;
    char xs[256];
    if (batched) snprintf(xs, sizeof xs, "%s", ct__tshape(x));
    else { /* torch reports the unsqueezed input */
        int64_t s4[CT_MAX_DIMS];
        s4[0] = 1;
        memcpy(s4 + 1, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
        ct__shape_str(s4, x->ndim + 1, xs, sizeof xs);
    }
    if (Co % groups != 0)
        return ct__error(CT_ERR_SHAPE, "%s: Given groups=%lld, expected weight to be divisible by %lld "
                         "at dimension 0, but got weight of size %s instead", op, (long long)groups,
                         (long long)groups, ct__tshape(w));
    if (C != Cg * groups)
        return ct__error(CT_ERR_SHAPE, "%s: Given groups=%lld, weight of size %s, expected input%s to "
                         "have %lld channels, but got %lld channels instead", op, (long long)groups,
                         ct__tshape(w), xs, (long long)(Cg * groups), (long long)C);
    if (b && (b->ndim != 1 || b->sizes[0] != Co))
        return ct__error(CT_ERR_SHAPE, "%s: Given weight of size %s, expected bias to be 1-dimensional "
                         "with %lld elements, but got bias of size %s instead", op, ct__tshape(w),
                         (long long)Co, ct__tshape(b));
    int64_t padded[3], keff[3], osz[3];
    for (int j = 0; j < nd; j++) {
        padded[j] = sp[j] + padl[j] + padr[j];
        keff[j] = dil[j] * (k[j] - 1) + 1;
    }
    for (int j = 0; j < nd; j++)
        if (padded[j] < keff[j])
            return ct__error(CT_ERR_SHAPE, "%s: Calculated padded input size per channel: %s. Kernel "
                             "size: %s. Kernel size can't be greater than actual input size", op,
                             tuple(padded, nd, " x "), tuple(keff, nd, " x "));
    for (int j = 0; j < nd; j++) osz[j] = (padded[j] - keff[j]) / stride[j] + 1;

    return conv_run(CT_OP_conv, x, w, b, nd, batched, N, C, Co, groups, sp, osz, k, stride, padl, dil);
}

static ct_tensor *conv_nd(const char *op, ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd,
                          const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                          int64_t groups) {
    CT_NULLCHECK_OP(op, x);
    CT_NULLCHECK_OP(op, w);
    int64_t s[3], p[3], d[3];
    if (!get_arr(op, "stride", stride, nd, 1, 1, s, "non-positive stride is not supported")) return NULL;
    if (!get_arr(op, "padding", padding, nd, 0, 0, p, "negative padding is not supported")) return NULL;
    if (!get_arr(op, "dilation", dilation, nd, 1, 1, d, "dilation should be greater than zero")) return NULL;
    return conv_core(op, x, w, b, nd, s, p, p, d, groups);
}

ct_tensor *ct_conv1d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[1],
                     const int64_t padding[1], const int64_t dilation[1], int64_t groups) {
    CT_AUTOCAST_OP(CT_AC_conv1d, ct_conv1d(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), stride, padding, dilation,
                                          groups), x, w, b);
    return conv_nd("conv1d", x, w, b, 1, stride, padding, dilation, groups);
}
ct_tensor *ct_conv2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[2],
                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
    CT_AUTOCAST_OP(CT_AC_conv2d, ct_conv2d(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), stride, padding, dilation,
                                          groups), x, w, b);
    return conv_nd("conv2d", x, w, b, 2, stride, padding, dilation, groups);
}
ct_tensor *ct_conv3d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[3],
                     const int64_t padding[3], const int64_t dilation[3], int64_t groups) {
    CT_AUTOCAST_OP(CT_AC_conv3d, ct_conv3d(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), stride, padding, dilation,
                                          groups), x, w, b);
    return conv_nd("conv3d", x, w, b, 3, stride, padding, dilation, groups);
}

ct_tensor *ct_conv_padmode(ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd, const int64_t *stride,
                           const char *padding, const int64_t *dilation, int64_t groups) {
    if (nd >= 1 && nd <= 3)
        CT_AUTOCAST_OP(nd == 1 ? CT_AC_conv1d : nd == 2 ? CT_AC_conv2d : CT_AC_conv3d,
                       ct_conv_padmode(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), nd, stride, padding, dilation,
                                       groups), x, w, b);
    CT_NULLCHECK(x);
    CT_NULLCHECK(w);
    if (nd < 1 || nd > 3)
        return ct__error(CT_ERR_ARG, "conv: number of spatial dims must be 1, 2 or 3, but got %d", nd);
    const char *op = nd == 1 ? "conv1d" : nd == 2 ? "conv2d" : "conv3d";
    if (!padding) return ct__error(CT_ERR_NULL, "%s: padding string is NULL", op);
    int64_t s[3], d[3], pl[3] = {0, 0, 0}, pr[3] = {0, 0, 0};
    if (!get_arr(op, "stride", stride, nd, 1, 1, s, "non-positive stride is not supported")) return NULL;
    if (!get_arr(op, "dilation", dilation, nd, 1, 1, d, "dilation should be greater than zero")) return NULL;
    if (strcmp(padding, "same") == 0) {
        for (int j = 0; j < nd; j++)
            if (s[j] != 1)
                return ct__error(CT_ERR_ARG, "%s: padding='same' is not supported for strided convolutions", op);
        if (w->ndim == nd + 2) {
            for (int j = 0; j < nd; j++) {
                int64_t total = d[j] * (w->sizes[2 + j] - 1);
                pl[j] = total / 2;
                pr[j] = total - pl[j];
            }
        }
    } else if (strcmp(padding, "valid") != 0) {
        return ct__error(CT_ERR_ARG, "%s: Invalid padding string: '%s'", op, padding);
    }
    return conv_core(op, x, w, b, nd, s, pl, pr, d, groups);
}

static ct_tensor *conv_transpose_nd(const char *op, ct_tensor *x, ct_tensor *w, ct_tensor *b, int nd,
                                    const int64_t *stride, const int64_t *padding,
                                    const int64_t *output_padding, int64_t groups,
                                    const int64_t *dilation) {
    CT_NULLCHECK_OP(op, x);
    CT_NULLCHECK_OP(op, w);
    int64_t s[3], p[3], op_[3], d[3];
    if (!get_arr(op, "stride", stride, nd, 1, 1, s, "non-positive stride is not supported")) return NULL;
    if (!get_arr(op, "padding", padding, nd, 0, 0, p, "negative padding is not supported")) return NULL;
    if (!get_arr(op, "output_padding", output_padding, nd, 0, 0, op_,
                 "negative output_padding is not supported")) return NULL;
    if (!get_arr(op, "dilation", dilation, nd, 1, 1, d, "dilation should be greater than zero")) return NULL;
    if (!conv_check(op, x, w, b, nd, groups)) return NULL;
    for (int j = 0; j < nd; j++)
        if (op_[j] >= s[j] && op_[j] >= d[j])
            return ct__error(CT_ERR_ARG, "%s: output padding must be smaller than either stride or "
                             "dilation, but got output_padding=%s, stride=%s, dilation=%s", op,
                             tuple(op_, nd, ", "), tuple(s, nd, ", "), tuple(d, nd, ", "));
    bool batched = x->ndim == nd + 2;
    int64_t N = batched ? x->sizes[0] : 1, C = x->sizes[batched ? 1 : 0];
    const int64_t *sp = x->sizes + (batched ? 2 : 1);
    int64_t Cw = w->sizes[0], Og = w->sizes[1], Co = Og * groups;
    const int64_t *k = w->sizes + 2;
    if (Cw % groups != 0)
        return ct__error(CT_ERR_SHAPE, "%s: Given groups=%lld, expected weight to be divisible by %lld "
                         "at dimension 0, but got weight of size %s instead", op, (long long)groups,
                         (long long)groups, ct__tshape(w));
    if (C != Cw)
        return ct__error(CT_ERR_SHAPE, "%s: Given transposed=1, weight of size %s, expected input %s to "
                         "have %lld channels, but got %lld channels instead", op, ct__tshape(w),
                         ct__tshape(x), (long long)Cw, (long long)C);
    if (b && (b->ndim != 1 || b->sizes[0] != Co))
        return ct__error(CT_ERR_SHAPE, "%s: Given transposed=1, weight of size %s, expected bias to be "
                         "1-dimensional with %lld elements, but got bias of size %s instead", op,
                         ct__tshape(w), (long long)Co, ct__tshape(b));
    int64_t osz[3];
    for (int j = 0; j < nd; j++) {
        osz[j] = (sp[j] - 1) * s[j] - 2 * p[j] + d[j] * (k[j] - 1) + op_[j] + 1;
        if (osz[j] <= 0)
            return ct__error(CT_ERR_SHAPE, "%s: Given input size per channel: %s. Calculated output "
                             "size per channel: %s. Output size is too small", op,
                             tuple(sp, nd, " x "), tuple(osz, j + 1, " x "));
    }
    return conv_run(CT_OP_conv_transpose, x, w, b, nd, batched, N, C, Co, groups, osz, sp, k, s, p, d);
}

ct_tensor *ct_conv_transpose1d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[1],
                               const int64_t padding[1], const int64_t output_padding[1],
                               int64_t groups, const int64_t dilation[1]) {
    CT_AUTOCAST_OP(CT_AC_conv_transpose1d, ct_conv_transpose1d(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), stride,
                                                              padding, output_padding, groups, dilation), x, w, b);
    return conv_transpose_nd("conv_transpose1d", x, w, b, 1, stride, padding, output_padding, groups,
                             dilation);
}
ct_tensor *ct_conv_transpose2d(ct_tensor *x, ct_tensor *w, ct_tensor *b, const int64_t stride[2],
                               const int64_t padding[2], const int64_t output_padding[2],
                               int64_t groups, const int64_t dilation[2]) {
    CT_AUTOCAST_OP(CT_AC_conv_transpose2d, ct_conv_transpose2d(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), stride,
                                                              padding, output_padding, groups, dilation), x, w, b);
    return conv_transpose_nd("conv_transpose2d", x, w, b, 2, stride, padding, output_padding, groups,
                             dilation);
}

/* ---- explicit geometry (the derivatives' entry point) -------------------- */
ct_tensor *ct__conv_geom(ct_op op, ct_tensor *x, ct_tensor *w, ct_tensor *b, const ct_p_conv *geom) {
    const char *name = op == CT_OP_conv ? "conv" : "conv_transpose";
    CT_NULLCHECK(x);
    CT_NULLCHECK(w);
    if (!geom || (op != CT_OP_conv && op != CT_OP_conv_transpose))
        return ct__error(CT_ERR_ARG, "%s: invalid geometry", name);
    ct_args a = ct__args(op);
    a.p.conv = *geom;
    int nd = w->ndim - 2;
    bool batched = x->ndim == nd + 2;
    a.p.conv.batch = batched ? x->sizes[0] : 1;
    a.p.conv.in_channels = x->ndim >= 2 ? x->sizes[batched ? 1 : 0] : 0;
    a.p.conv.out_channels = w->ndim >= 2 ? (op == CT_OP_conv ? w->sizes[0] : w->sizes[1] * geom->groups) : 0;
    a.p.conv.spatial_dims = nd;
    return conv_dispatch(op, x, w, b, &a);
}

ct_tensor *ct__conv_wgrad(ct_op op, ct_tensor *x, ct_tensor *g, const int64_t *wshape, int wnd,
                          const ct_p_conv *geom) {
    CT_NULLCHECK(x);
    CT_NULLCHECK(g);
    const char *name = op == CT_OP_conv ? "conv" : "conv_transpose";
    int nd = wnd - 2;
    if (!geom || (op != CT_OP_conv && op != CT_OP_conv_transpose) || nd < 1 || nd > 3)
        return ct__error(CT_ERR_ARG, "%s weight gradient: input of size %s and gradient of size %s do "
                         "not fit", name, ct__tshape(x), ct__tshape(g));
    /* the image side and the grid side */
    ct_tensor *im = op == CT_OP_conv ? x : g, *gr = op == CT_OP_conv ? g : x;
    bool batched = x->ndim == nd + 2;
    ct_args a = ct__args(CT_OP_conv_wgrad);
    a.p.conv = *geom;
    a.p.conv.batch = batched ? x->sizes[0] : 1;
    a.p.conv.in_channels = im->ndim > 1 ? im->sizes[batched ? 1 : 0] : 0;
    a.p.conv.out_channels = gr->ndim > 1 ? gr->sizes[batched ? 1 : 0] : 0;
    a.p.conv.spatial_dims = nd;
    a.p.conv.keep_weights = false; /* the conv's flag; not the weight gradient's */
    ct_tensor *sides[2] = {im, gr};
    ct_meta m;
    if (ct__meta_run(CT_OP_conv_wgrad, &m, 1, sides, 2, &a)) return NULL;
    if (m.ndim != wnd || memcmp(m.sizes, wshape, sizeof(int64_t) * (size_t)wnd))
        return ct__error(CT_ERR_SHAPE, "%s weight gradient: weight of size %s does not fit the geometry",
                         name, ct__tshape(x));
    ct_dtype dt = x->dtype, cdt = compute_dt_for(CT_OP_conv_wgrad, x);
    ct_tensor *imc = ct__contig_as(im, cdt), *grc = ct__contig_as(gr, cdt);
    ct_tensor *o = ct__alloc(m.sizes, m.ndim, cdt, m.device);
    if (!imc || !grc || !o) goto fail;
    ct_tensor *kin[2] = {imc, grc};
    if (ct__dispatch(CT_OP_conv_wgrad, &o, 1, kin, 2, &a)) goto fail;
    ct_release(imc); ct_release(grc);
    o = to_out_dtype(o, dt);
    return o ? ct__register(o) : NULL;
fail:
    ct_release(imc); ct_release(grc); ct_release(o);
    return NULL;
}

ct_tensor *ct__max_pool_backward(ct_tensor *g, ct_tensor *idx, ct_tensor *x, const ct_p_pool *pool) {
    CT_NULLCHECK(g);
    CT_NULLCHECK(idx);
    CT_NULLCHECK(x);
    int64_t P = pool->planes, HW = pool->input_size[0] * pool->input_size[1];
    ct_dtype dt = x->dtype, cdt = compute_dt(dt);
    ct_args b = ct__args(CT_OP_max_pool_backward);
    b.p.pool = *pool;
    ct_tensor *chk[2] = {g, idx};
    ct_meta m;
    if (ct_numel(x) != P * HW || ct__meta_run(CT_OP_max_pool_backward, &m, 1, chk, 2, &b))
        return ct_last_error_code() ? NULL
               : ct__error(CT_ERR_SHAPE, "max_pool backward: gradient of size %s and indices of size %s "
                           "do not fit the input of size %s", ct__tshape(g), ct__tshape(idx),
                           ct__tshape(x));
    ct_tensor *gc = ct__contig_as(g, cdt), *ic = ct__contig_as(idx, CT_I64);
    /* the input's sizes (the pool's, as the meta function gives them from g) */
    ct_tensor *o = ct__alloc(x->sizes, x->ndim, cdt, m.device);
    if (!gc || !ic || !o) goto fail;
    ct_tensor *kin[2] = {gc, ic};
    if (ct__dispatch(CT_OP_max_pool_backward, &o, 1, kin, 2, &b)) goto fail;
    ct_release(gc); ct_release(ic);
    o = to_out_dtype(o, dt);
    return o ? ct__register(o) : NULL;
fail:
    ct_release(gc); ct_release(ic); ct_release(o);
    return NULL;
}

/* ---- pooling ------------------------------------------------------------ */
/* Checks x is a float tensor with nsp spatial dims plus 1 or 2 leading ones
 * (non-batch dims non-empty); returns the number of planes P. */
static int64_t planes_of(const char *op, ct_tensor *x, int nsp) {
    if (!is_float(x->dtype)) {
        ct__error(CT_ERR_DTYPE, "%s: \"%s\" not implemented for '%s'", op, op, ct_dtype_name(x->dtype));
        return -1;
    }
    if (x->ndim != nsp + 1 && x->ndim != nsp + 2) {
        ct__error(CT_ERR_SHAPE, "%s: Expected %dD or %dD (batch mode) tensor with optional 0 dim batch "
                  "size for input, but got: %s", op, nsp + 1, nsp + 2, ct__tshape(x));
        return -1;
    }
    int64_t P = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (x->sizes[i] == 0 && !(x->ndim == nsp + 2 && i == 0)) {
            ct__error(CT_ERR_SHAPE, "%s: Expected %dD or %dD (batch mode) tensor with optional 0 dim "
                      "batch size for input, but got: %s", op, nsp + 1, nsp + 2, ct__tshape(x));
            return -1;
        }
        if (i < x->ndim - nsp) P *= x->sizes[i];
    }
    return P;
}

static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) o--;
    return o;
}

/* Fills the pooling geometry (2 spatial dims; 1-D pools use H = 1).
 * Returns false + error. */
static bool pool_geom(const char *op, ct_tensor *x, int nsp, const int64_t *k, const int64_t *stride,
                      const int64_t *padding, const int64_t *dilation, bool ceil_mode, ct_p_pool *q) {
    int64_t kk[2], s[2], p[2], d[2];
    if (!k) {
        ct__error(CT_ERR_NULL, "%s: kernel_size is NULL", op);
        return false;
    }
    if (!get_arr(op, "kernel_size", k, nsp, 1, 1, kk, "kernel size should be greater than zero")) return false;
    if (!get_arr(op, "stride", stride ? stride : k, nsp, 1, 1, s, "stride should be greater than zero")) return false;
    if (!get_arr(op, "padding", padding, nsp, 0, 0, p, "pad must be non-negative")) return false;
    if (!get_arr(op, "dilation", dilation, nsp, 1, 1, d, "dilation should be greater than zero")) return false;
    for (int j = 0; j < nsp; j++)
        if (p[j] > kk[j] / 2) {
            ct__error(CT_ERR_ARG, "%s: pad should be at most half of kernel size, but got pad=%lld and "
                      "kernel_size=%lld", op, (long long)p[j], (long long)kk[j]);
            return false;
        }
    int64_t H = nsp == 2 ? x->sizes[x->ndim - 2] : 1, W = x->sizes[x->ndim - 1];
    int64_t Ho = 1, Wo;
    int j = 0;
    if (nsp == 2) { Ho = pool_out(H, kk[0], p[0], s[0], d[0], ceil_mode); j = 1; }
    Wo = pool_out(W, kk[j], p[j], s[j], d[j], ceil_mode);
    if (Ho < 1 || Wo < 1) {
        int64_t C = x->ndim > nsp ? x->sizes[x->ndim - nsp - 1] : 1;
        ct__error(CT_ERR_SHAPE, "%s: Given input size: (%lldx%lldx%lld). Calculated output size: "
                  "(%lldx%lldx%lld). Output size is too small", op, (long long)C, (long long)H,
                  (long long)W, (long long)C, (long long)Ho, (long long)Wo);
        return false;
    }
    q->input_size[0] = H; q->input_size[1] = W; q->output_size[0] = Ho; q->output_size[1] = Wo;
    if (nsp == 2) {
        q->kernel_size[0] = kk[0]; q->kernel_size[1] = kk[1]; q->stride[0] = s[0]; q->stride[1] = s[1];
        q->padding[0] = p[0]; q->padding[1] = p[1]; q->dilation[0] = d[0]; q->dilation[1] = d[1];
    } else {
        q->kernel_size[0] = 1; q->kernel_size[1] = kk[0]; q->stride[0] = 1; q->stride[1] = s[0];
        q->padding[0] = 0; q->padding[1] = p[0]; q->dilation[0] = 1; q->dilation[1] = d[0];
    }
    return true;
}

/* Runs a plane kernel: x (nsp spatial dims) -> [*lead, Ho(, Wo)] values and
 * optionally int64 indices; osz = {Ho, Wo}, the output_size of a's family
 * (pool or resample, planes filled in by the caller). */
static ct_tensor *run_planes(ct_op opc, ct_tensor *x, int nsp, const int64_t *osz, ct_args *a,
                             ct_tensor **indices) {
    (void)osz;
    if (opc != CT_OP_interpolate) a->p.pool.spatial_dims = nsp;
    ct_dtype dt = x->dtype, cdt = compute_dt(dt);
    ct_tensor *ins[1] = {x};
    /* max pools: the derivative routes the gradient with the indices, so
     * they are computed (and saved by the node) whenever autograd records */
    bool is_max = opc == CT_OP_max_pool || opc == CT_OP_adaptive_max_pool;
    bool want_idx = indices || (is_max && ct__ag_active(ins, 1));
    ct_meta m[2];
    if (ct__meta_run(opc, m, want_idx ? 2 : 1, ins, 1, a)) return NULL;
    ct_tensor *xc = ct__contig_as(x, cdt);
    ct_tensor *outs[2] = {ct__alloc(m[0].sizes, m[0].ndim, cdt, m[0].device), NULL};
    if (want_idx) outs[1] = ct__meta_new(&m[1], ins);
    if (!xc || !outs[0] || (want_idx && !outs[1])) goto fail;
    if (ct__dispatch(opc, outs, want_idx ? 2 : 1, &xc, 1, a)) goto fail;
    ct_release(xc);
    outs[0] = to_out_dtype(outs[0], dt);
    if (!outs[0]) { ct_release(outs[1]); return NULL; }
    if (want_idx) {
        ct__finish_multi(opc, outs, 2, ins, 1, a);
        if (indices) *indices = outs[1];
        else if (outs[1]) { /* only the node keeps them */
            ct__scope_take(outs[1]);
            ct_release(outs[1]);
        }
        return outs[0];
    }
    return ct__finish(opc, outs[0], ins, 1, a);
fail:
    ct_release(xc); ct_release(outs[0]); ct_release(outs[1]);
    return NULL;
}

static ct_tensor *max_pool_nd(const char *op, ct_tensor *x, int nsp, const int64_t *k,
                              const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                              bool ceil_mode, ct_tensor **indices) {
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP(op, x);
    int64_t P = planes_of(op, x, nsp);
    if (P < 0) return NULL;
    ct_args a = ct__args(CT_OP_max_pool);
    if (!pool_geom(op, x, nsp, k, stride, padding, dilation, ceil_mode, &a.p.pool)) return NULL;
    a.p.pool.planes = P;
    return run_planes(CT_OP_max_pool, x, nsp, a.p.pool.output_size, &a, indices);
}

ct_tensor *ct_max_pool1d(ct_tensor *x, const int64_t k[1], const int64_t stride[1],
                         const int64_t padding[1], const int64_t dilation[1], bool ceil_mode,
                         ct_tensor **indices) {
    return max_pool_nd("max_pool1d", x, 1, k, stride, padding, dilation, ceil_mode, indices);
}
ct_tensor *ct_max_pool2d(ct_tensor *x, const int64_t k[2], const int64_t stride[2],
                         const int64_t padding[2], const int64_t dilation[2], bool ceil_mode,
                         ct_tensor **indices) {
    return max_pool_nd("max_pool2d", x, 2, k, stride, padding, dilation, ceil_mode, indices);
}

static ct_tensor *avg_pool_nd(const char *op, ct_tensor *x, int nsp, const int64_t *k,
                              const int64_t *stride, const int64_t *padding, bool ceil_mode,
                              bool count_include_pad, int64_t divisor_override) {
    CT_NULLCHECK_OP(op, x);
    int64_t P = planes_of(op, x, nsp);
    if (P < 0) return NULL;
    ct_args a = ct__args(CT_OP_avg_pool);
    if (!pool_geom(op, x, nsp, k, stride, padding, NULL, ceil_mode, &a.p.pool)) return NULL;
    a.p.pool.count_include_pad = count_include_pad;
    a.p.pool.divisor_override = divisor_override > 0 ? divisor_override : 0;
    a.p.pool.planes = P;
    return run_planes(CT_OP_avg_pool, x, nsp, a.p.pool.output_size, &a, NULL);
}

ct_tensor *ct_avg_pool1d(ct_tensor *x, const int64_t k[1], const int64_t stride[1],
                         const int64_t padding[1], bool ceil_mode, bool count_include_pad) {
    return avg_pool_nd("avg_pool1d", x, 1, k, stride, padding, ceil_mode, count_include_pad, 0);
}
ct_tensor *ct_avg_pool2d(ct_tensor *x, const int64_t k[2], const int64_t stride[2],
                         const int64_t padding[2], bool ceil_mode, bool count_include_pad,
                         int64_t divisor_override) {
    return avg_pool_nd("avg_pool2d", x, 2, k, stride, padding, ceil_mode, count_include_pad,
                       divisor_override);
}

static ct_tensor *adaptive_nd(const char *op, ct_op opc, ct_tensor *x, int nsp, const int64_t *osz,
                              ct_tensor **indices) {
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP(op, x);
    if (!osz) return ct__error(CT_ERR_NULL, "%s: output_size is NULL", op);
    int64_t P = planes_of(op, x, nsp);
    if (P < 0) return NULL;
    for (int j = 0; j < nsp; j++)
        if (osz[j] < 0)
            return ct__error(CT_ERR_ARG, "%s: output_size must be non-negative, but got %s", op,
                             tuple(osz, nsp, ", "));
    ct_args a = ct__args(opc);
    a.p.pool.input_size[0] = nsp == 2 ? x->sizes[x->ndim - 2] : 1;
    a.p.pool.input_size[1] = x->sizes[x->ndim - 1];
    a.p.pool.output_size[0] = nsp == 2 ? osz[0] : 1;
    a.p.pool.output_size[1] = osz[nsp - 1];
    a.p.pool.planes = P;
    return run_planes(opc, x, nsp, a.p.pool.output_size, &a, indices);
}

ct_tensor *ct_adaptive_avg_pool1d(ct_tensor *x, int64_t output_size) {
    return adaptive_nd("adaptive_avg_pool1d", CT_OP_adaptive_avg_pool, x, 1, &output_size, NULL);
}
ct_tensor *ct_adaptive_avg_pool2d(ct_tensor *x, const int64_t output_size[2]) {
    return adaptive_nd("adaptive_avg_pool2d", CT_OP_adaptive_avg_pool, x, 2, output_size, NULL);
}
ct_tensor *ct_adaptive_max_pool2d(ct_tensor *x, const int64_t output_size[2], ct_tensor **indices) {
    return adaptive_nd("adaptive_max_pool2d", CT_OP_adaptive_max_pool, x, 2, output_size, indices);
}

/* ---- interpolation ------------------------------------------------------ */
static const char *mode_name(ct_interp_mode m) {
    switch (m) {
    case CT_INTERP_NEAREST: return "nearest";
    case CT_INTERP_LINEAR: return "linear";
    case CT_INTERP_BILINEAR: return "bilinear";
    case CT_INTERP_BICUBIC: return "bicubic";
    case CT_INTERP_NEAREST_EXACT: return "nearest-exact";
    }
    return "?";
}

ct_tensor *ct_interpolate(ct_tensor *x, const int64_t *size, const double *scale_factor, int nsp,
                          ct_interp_mode mode, bool align_corners) {
    const char *op = "interpolate";
    CT_NULLCHECK(x);
    if ((unsigned)mode > CT_INTERP_NEAREST_EXACT)
        return ct__error(CT_ERR_ARG, "%s: invalid mode %d", op, (int)mode);
    if (nsp < 1 || nsp > 2)
        return ct__error(CT_ERR_ARG, "%s: nsp must be 1 or 2, but got %d", op, nsp);
    if (x->ndim != nsp + 2)
        return ct__error(CT_ERR_SHAPE, "%s: Input Error: expected a %dD input for %d spatial dim(s) "
                         "(got %dD input of size %s)", op, nsp + 2, nsp, x->ndim, ct__tshape(x));
    if (mode == CT_INTERP_LINEAR && nsp != 1)
        return ct__error(CT_ERR_ARG, "%s: Got %dD input, but linear mode needs 3D input", op, x->ndim);
    if ((mode == CT_INTERP_BILINEAR || mode == CT_INTERP_BICUBIC) && nsp != 2)
        return ct__error(CT_ERR_ARG, "%s: Got %dD input, but %s mode needs 4D input", op, x->ndim,
                         mode_name(mode));
    if (align_corners && (mode == CT_INTERP_NEAREST || mode == CT_INTERP_NEAREST_EXACT))
        return ct__error(CT_ERR_ARG, "%s: align_corners option can only be set with the interpolating "
                         "modes: linear | bilinear | bicubic | trilinear", op);
    if (size && scale_factor)
        return ct__error(CT_ERR_ARG, "%s: only one of size or scale_factor should be defined", op);
    if (!size && !scale_factor)
        return ct__error(CT_ERR_ARG, "%s: either size or scale_factor should be defined", op);
    if (!is_float(x->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: \"upsample_%s\" not implemented for '%s'", op,
                         mode_name(mode), ct_dtype_name(x->dtype));
    int64_t in[2], out[2];
    double sc[2] = {0, 0};
    for (int j = 0; j < nsp; j++) {
        in[j] = x->sizes[2 + j];
        if (size) {
            out[j] = size[j];
        } else {
            if (!(scale_factor[j] > 0) || !isfinite(scale_factor[j]))
                return ct__error(CT_ERR_ARG, "%s: scale_factor must be positive and finite, but got %g",
                                 op, scale_factor[j]);
            out[j] = (int64_t)floor((double)in[j] * scale_factor[j]);
            sc[j] = scale_factor[j];
        }
    }
    for (int j = 0; j < nsp; j++)
        if (in[j] <= 0 || out[j] <= 0)
            return ct__error(CT_ERR_SHAPE, "%s: Input and output sizes should be greater than 0, but "
                             "got input %s output %s", op, tuple(in, nsp, ", "), tuple(out, nsp, ", "));
    ct_args a = ct__args(CT_OP_interpolate);
    ct_p_resample *r = &a.p.resample;
    r->input_size[0] = nsp == 2 ? in[0] : 1;
    r->input_size[1] = in[nsp - 1];
    r->output_size[0] = nsp == 2 ? out[0] : 1;
    r->output_size[1] = out[nsp - 1];
    r->mode = mode;
    r->align_corners = align_corners;
    r->scales_h = nsp == 2 ? sc[0] : 0;
    r->scales_w = sc[nsp - 1];
    r->planes = x->sizes[0] * x->sizes[1];
    return run_planes(CT_OP_interpolate, x, nsp, r->output_size, &a, NULL);
}

/* ---- pixel shuffle (composites of views) -------------------------------- */
static ct_tensor *shuffle(const char *op, ct_tensor *x, int64_t r, bool up) {
    CT_NULLCHECK_OP(op, x);
    if (x->ndim < 3)
        return ct__error(CT_ERR_SHAPE, "%s expects input to have at least 3 dimensions, but got input "
                         "with %d dimension(s)", op, x->ndim);
    if (r <= 0)
        return ct__error(CT_ERR_ARG, "%s expects a positive %s, but got %lld", op,
                         up ? "upscale_factor" : "downscale_factor", (long long)r);
    int nd = x->ndim;
    int64_t C = x->sizes[nd - 3], H = x->sizes[nd - 2], W = x->sizes[nd - 1];
    if (up && C % (r * r) != 0)
        return ct__error(CT_ERR_SHAPE, "%s expects its input's 'channel' dimension to be divisible by "
                         "the square of upscale_factor, but input.size(-3)=%lld is not divisible by %lld",
                         op, (long long)C, (long long)(r * r));
    if (!up && H % r != 0)
        return ct__error(CT_ERR_SHAPE, "%s expects height to be divisible by downscale_factor, but "
                         "input.size(-2)=%lld is not divisible by %lld", op, (long long)H, (long long)r);
    if (!up && W % r != 0)
        return ct__error(CT_ERR_SHAPE, "%s expects width to be divisible by downscale_factor, but "
                         "input.size(-1)=%lld is not divisible by %lld", op, (long long)W, (long long)r);
    int lead = nd - 3;
    int64_t s6[CT_MAX_DIMS + 3], perm[CT_MAX_DIMS + 3], fin[CT_MAX_DIMS];
    if (lead + 6 > CT_MAX_DIMS)
        return ct__error(CT_ERR_SHAPE, "%s: input has too many dimensions (%d)", op, nd);
    memcpy(s6, x->sizes, sizeof(int64_t) * (size_t)lead);
    memcpy(fin, x->sizes, sizeof(int64_t) * (size_t)lead);
    for (int i = 0; i < lead; i++) perm[i] = i;
    if (up) { /* [*, C', r, r, H, W] -> [*, C', H, r, W, r] */
        int64_t c2 = C / (r * r);
        s6[lead] = c2; s6[lead + 1] = r; s6[lead + 2] = r; s6[lead + 3] = H; s6[lead + 4] = W;
        const int64_t p[5] = {0, 3, 1, 4, 2};
        for (int i = 0; i < 5; i++) perm[lead + i] = lead + p[i];
        fin[lead] = c2; fin[lead + 1] = H * r; fin[lead + 2] = W * r;
    } else { /* [*, C, H', r, W', r] -> [*, C, r, r, H', W'] */
        int64_t h2 = H / r, w2 = W / r;
        s6[lead] = C; s6[lead + 1] = h2; s6[lead + 2] = r; s6[lead + 3] = w2; s6[lead + 4] = r;
        const int64_t p[5] = {0, 2, 4, 1, 3};
        for (int i = 0; i < 5; i++) perm[lead + i] = lead + p[i];
        fin[lead] = C * r * r; fin[lead + 1] = h2; fin[lead + 2] = w2;
    }
    ct_scope s = ct_scope_begin();
    ct_tensor *v = ct_reshape(x, s6, lead + 5);
    ct_tensor *pm = ct_permute(v, perm, lead + 5);
    ct_tensor *c = ct_contiguous(pm);
    ct_tensor *res = ct_reshape(c, fin, lead + 3);
    if (res && ct_shares_storage(res, x)) res = ct_clone(res);
    ct_tensor *r2 = res ? ct_keep(res) : NULL;
    ct_scope_end(s);
    return r2;
}

ct_tensor *ct_pixel_shuffle(ct_tensor *x, int64_t upscale_factor) {
    return shuffle("pixel_shuffle", x, upscale_factor, true);
}
ct_tensor *ct_pixel_unshuffle(ct_tensor *x, int64_t downscale_factor) {
    return shuffle("pixel_unshuffle", x, downscale_factor, false);
}

/* ---- im2col / col2im ---------------------------------------------------- */
static bool fold_params(const char *op, const int64_t *k, const int64_t *dilation,
                        const int64_t *padding, const int64_t *stride, int64_t *kk, int64_t *d,
                        int64_t *p, int64_t *s) {
    if (!k) {
        ct__error(CT_ERR_NULL, "%s: kernel_size is NULL", op);
        return false;
    }
    return get_arr(op, "kernel_size", k, 2, 1, 1, kk, "kernel size should be greater than zero") &&
           get_arr(op, "dilation", dilation, 2, 1, 1, d, "dilation should be greater than zero") &&
           get_arr(op, "padding", padding, 2, 0, 0, p, "padding should be non-negative") &&
           get_arr(op, "stride", stride, 2, 1, 1, s, "stride should be greater than zero");
}

/* im2col/col2im's window geometry as a conv's (a 2-D window: depth 1) */
static void fold_args(ct_p_conv *g, int64_t N, int64_t C, const int64_t *img, const int64_t *grid,
                      const int64_t *kk, const int64_t *s, const int64_t *p, const int64_t *d) {
    g->batch = N; g->in_channels = C; g->out_channels = C; g->groups = 1;
    g->image_size[0] = 1; g->grid_size[0] = 1; g->kernel_size[0] = 1;
    g->stride[0] = 1; g->padding[0] = 0; g->dilation[0] = 1;
    for (int j = 0; j < 2; j++) {
        g->image_size[1 + j] = img[j];
        g->grid_size[1 + j] = grid[j];
        g->kernel_size[1 + j] = kk[j];
        g->stride[1 + j] = s[j];
        g->padding[1 + j] = p[j];
        g->dilation[1 + j] = d[j];
    }
}

static ct_tensor *run_fold(ct_op opc, ct_tensor *x, const int64_t *oshape, int on, ct_args *a) {
    (void)oshape; (void)on;
    a->p.conv.spatial_dims = 2;
    ct_tensor *ins[1] = {x};
    ct_meta m;
    if (ct__meta_run(opc, &m, 1, ins, 1, a)) return NULL;
    ct_dtype dt = x->dtype, cdt = compute_dt(dt);
    ct_tensor *xc = ct__contig_as(x, cdt);
    ct_tensor *o = ct__alloc(m.sizes, m.ndim, cdt, m.device);
    if (!xc || !o || ct__dispatch(opc, &o, 1, &xc, 1, a)) {
        ct_release(xc);
        ct_release(o);
        return NULL;
    }
    ct_release(xc);
    o = to_out_dtype(o, dt);
    return ct__finish(opc, o, ins, 1, a);
}

ct_tensor *ct_im2col(ct_tensor *x, const int64_t k[2], const int64_t dilation[2],
                     const int64_t padding[2], const int64_t stride[2]) {
    const char *op = "im2col";
    CT_NULLCHECK(x);
    int64_t kk[2], d[2], p[2], s[2];
    if (!fold_params(op, k, dilation, padding, stride, kk, d, p, s)) return NULL;
    if (!is_float(x->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: \"im2col\" not implemented for '%s'", op, ct_dtype_name(x->dtype));
    if (x->ndim != 3 && x->ndim != 4)
        return ct__error(CT_ERR_SHAPE, "%s: Expected 3D or 4D (batch mode) tensor for input with "
                         "possibly 0 batch size and non-zero dimensions, but got: %s", op, ct__tshape(x));
    bool batched = x->ndim == 4;
    int64_t N = batched ? x->sizes[0] : 1, C = x->sizes[x->ndim - 3];
    int64_t img[2] = {x->sizes[x->ndim - 2], x->sizes[x->ndim - 1]}, grid[2];
    for (int j = 0; j < 2; j++) grid[j] = (img[j] + 2 * p[j] - d[j] * (kk[j] - 1) - 1) / s[j] + 1;
    if (img[0] + 2 * p[0] - d[0] * (kk[0] - 1) - 1 < 0 || img[1] + 2 * p[1] - d[1] * (kk[1] - 1) - 1 < 0 ||
        grid[0] < 1 || grid[1] < 1)
        return ct__error(CT_ERR_SHAPE, "%s: Given input with spatial size %s, kernel_size=%s, "
                         "dilation=%s, padding=%s, calculated shape of the array of sliding blocks as "
                         "%s, but its components must be at least one.", op, tuple(img, 2, ", "),
                         tuple(kk, 2, ", "), tuple(d, 2, ", "), tuple(p, 2, ", "),
                         tuple((const int64_t[]){img[0] + 2 * p[0] - d[0] * (kk[0] - 1) - 1 < 0 ? 0 : grid[0],
                                                 img[1] + 2 * p[1] - d[1] * (kk[1] - 1) - 1 < 0 ? 0 : grid[1]},
                               2, ", "));
    ct_args a = ct__args(CT_OP_im2col);
    fold_args(&a.p.conv, N, C, img, grid, kk, s, p, d);
    int64_t oshape[3];
    int on = 0;
    if (batched) oshape[on++] = N;
    oshape[on++] = C * kk[0] * kk[1];
    oshape[on++] = grid[0] * grid[1];
    return run_fold(CT_OP_im2col, x, oshape, on, &a);
}

ct_tensor *ct_col2im(ct_tensor *x, const int64_t output_size[2], const int64_t k[2],
                     const int64_t dilation[2], const int64_t padding[2], const int64_t stride[2]) {
    const char *op = "col2im";
    CT_NULLCHECK(x);
    if (!output_size) return ct__error(CT_ERR_NULL, "%s: output_size is NULL", op);
    int64_t kk[2], d[2], p[2], s[2];
    if (!fold_params(op, k, dilation, padding, stride, kk, d, p, s)) return NULL;
    if (output_size[0] < 1 || output_size[1] < 1)
        return ct__error(CT_ERR_ARG, "%s: output_size should be greater than zero, but got %s", op,
                         tuple(output_size, 2, ", "));
    if (!is_float(x->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: \"col2im\" not implemented for '%s'", op, ct_dtype_name(x->dtype));
    if (x->ndim != 2 && x->ndim != 3)
        return ct__error(CT_ERR_SHAPE, "%s: Expected 2D or 3D (batch mode) tensor for input with "
                         "possibly 0 batch size and non-zero dimensions, but got: %s", op, ct__tshape(x));
    bool batched = x->ndim == 3;
    int64_t N = batched ? x->sizes[0] : 1, CK = x->sizes[x->ndim - 2], L = x->sizes[x->ndim - 1];
    int64_t K = kk[0] * kk[1];
    if (CK % K != 0)
        return ct__error(CT_ERR_SHAPE, "%s: Expected size of input's dimension %d to be divisible by "
                         "the product of kernel_size, but got input.size(%d)=%lld and kernel_size=%s",
                         op, batched ? 1 : 0, batched ? 1 : 0, (long long)CK, tuple(kk, 2, ", "));
    int64_t grid[2];
    for (int j = 0; j < 2; j++) {
        int64_t num = output_size[j] + 2 * p[j] - d[j] * (kk[j] - 1) - 1;
        grid[j] = num < 0 ? 0 : num / s[j] + 1;
    }
    if (grid[0] < 1 || grid[1] < 1 || grid[0] * grid[1] != L)
        return ct__error(CT_ERR_SHAPE, "%s: Given output_size=%s, kernel_size=%s, dilation=%s, "
                         "padding=%s, stride=%s, expected size of input's dimension %d to match the "
                         "calculated number of sliding blocks %lld * %lld = %lld, but got input.size(%d)=%lld.",
                         op, tuple(output_size, 2, ", "), tuple(kk, 2, ", "), tuple(d, 2, ", "),
                         tuple(p, 2, ", "), tuple(s, 2, ", "), batched ? 2 : 1, (long long)grid[0],
                         (long long)grid[1], (long long)(grid[0] * grid[1]), batched ? 2 : 1, (long long)L);
    int64_t C = CK / K;
    ct_args a = ct__args(CT_OP_col2im);
    fold_args(&a.p.conv, N, C, output_size, grid, kk, s, p, d);
    int64_t oshape[4];
    int on = 0;
    if (batched) oshape[on++] = N;
    oshape[on++] = C;
    oshape[on++] = output_size[0];
    oshape[on++] = output_size[1];
    return run_fold(CT_OP_col2im, x, oshape, on, &a);
}
