/* derivs_conv.c -- derivatives of the conv family (convolution, pooling,
 * resampling, im2col/col2im).
 *
 * Convolutions carry their whole window geometry in their parameters
 * (a->p.conv, src/ops/params_conv.def): image_size, grid_size,
 * kernel_size, stride, leading padding, dilation.  conv and conv_transpose
 * with the same geometry are each other's adjoints in the image, so
 *   conv:           dx = conv_transpose(g, w),  dw = wgrad(x, g)
 *   conv_transpose: dx = conv(g, w),            dw = wgrad(g, x)
 * where wgrad is itself a conv with the roles of stride/dilation and
 * grid/kernel swapped.  Both go through ct__conv_geom (explicit geometry,
 * so "same" padding, output_padding and ceil-mode pools need no special
 * cases) and are recorded, hence twice differentiable.  Pools and
 * interpolation are linear maps written with conv_transpose (avg_pool),
 * scatter_add via the saved indices (max pools) or matmuls with the
 * per-dim weight matrices (adaptive_avg_pool, interpolate). */
#include "../ops/conv_impl.h"
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define GEO(k) ct__vjp_geom(c, k)
#define TRY(e) do { if (!(e)) return ct_last_error_code(); } while (0)

/* g as a gradient of dtype dt (the engine's gradients have the output's dtype) */
static ct_tensor *as_dt(ct_tensor *g, ct_dtype dt) { return g ? ct_to_dtype(g, dt) : NULL; }

/* dw[c, ci, k] = sum_{n,l} G[n, c, l] * I[n, grp(c)*Cig + ci, l*s - p + k*d]:
 * a conv of I (batch Cig, channels groups*N) with G (as the kernel) whose
 * stride is the dilation and dilation the stride, on groups groups. */
static ct_tensor *wgrad(ct_tensor *I, ct_tensor *G, const ct_p_conv *pc, int nd) {
    if (I->ndim == nd + 1) { /* unbatched */
        I = ct_unsqueeze(I, 0);
        G = ct_unsqueeze(G, 0);
        if (!I || !G) return NULL;
    }
    int64_t groups = pc->groups, N = I->sizes[0];
    int64_t Cig = I->sizes[1] / groups, Cgg = G->sizes[1] / groups;
    int64_t sh[CT_MAX_DIMS], perm[CT_MAX_DIMS], fin[CT_MAX_DIMS];
    /* I [N, groups, Cig, *img] -> [Cig, groups, N, *img] -> [Cig, groups*N, *img] */
    sh[0] = N; sh[1] = groups; sh[2] = Cig;
    perm[0] = 2; perm[1] = 1; perm[2] = 0;
    fin[0] = Cig; fin[1] = groups * N;
    for (int j = 0; j < nd; j++) {
        sh[3 + j] = I->sizes[2 + j];
        perm[3 + j] = 3 + j;
        fin[2 + j] = I->sizes[2 + j];
    }
    ct_tensor *I2 = ct_reshape(ct_permute(ct_reshape(I, sh, nd + 3), perm, nd + 3), fin, nd + 2);
    /* G [N, groups, Cgg, *grid] -> [groups, Cgg, N, *grid] -> [groups*Cgg, N, *grid] */
    sh[2] = Cgg;
    perm[0] = 1; perm[1] = 2; perm[2] = 0;
    fin[0] = groups * Cgg; fin[1] = N;
    for (int j = 0; j < nd; j++) {
        sh[3 + j] = G->sizes[2 + j];
        fin[2 + j] = G->sizes[2 + j];
    }
    ct_tensor *G2 = ct_reshape(ct_permute(ct_reshape(G, sh, nd + 3), perm, nd + 3), fin, nd + 2);
    if (!I2 || !G2) return NULL;
    ct_p_conv s = *pc;
    for (int j = 0; j < 3; j++) {
        s.grid_size[j] = pc->kernel_size[j]; /* grid <- kernel */
        s.kernel_size[j] = pc->grid_size[j]; /* kernel <- grid */
        s.stride[j] = pc->dilation[j];       /* stride <- dilation */
        s.dilation[j] = pc->stride[j];       /* dilation <- stride */
    }
    ct_tensor *r = ct__conv_geom(CT_OP_conv, I2, G2, NULL, &s); /* [Cig, groups*Cgg, *k] */
    return r ? ct_transpose(r, 0, 1) : NULL;
}

/* sum of g over every dim but the channel one */
static ct_tensor *bias_grad(ct_tensor *g, int nd) {
    if (g->ndim == nd + 2 && ct_is_contiguous(g) && g->sizes[0] > 0 && g->sizes[1] > 0) {
        /* [N, C, L]: the contiguous rows first, then over the samples */
        int64_t N = g->sizes[0], C = g->sizes[1], L = ct_numel(g) / (N * C);
        const int64_t d2[1] = {2}, d0[1] = {0};
        return ct_sum(ct_sum(ct_reshape(g, CT_SHAPE(N, C, L)), d2, 1, false), d0, 1, false);
    }
    int64_t dims[CT_MAX_DIMS];
    int n = 0;
    bool batched = g->ndim == nd + 2;
    if (batched) dims[n++] = 0;
    for (int j = 0; j < nd; j++) dims[n++] = (batched ? 2 : 1) + j;
    return ct_sum(g, dims, n, false);
}

static ct_status vjp_conv_common(const ct_vjp_ctx *c, ct_tensor *const *gout, ct_tensor **gin,
                                 bool transposed) {
    /* the input gradient reads only w, the weight gradient only x */
    const ct_geom *w = GEO(1);
    int nd = w->ndim - 2;
    ct_tensor *g = as_dt(gout[0], GEO(0)->dtype), *x = NULL;
    TRY(g);
    ct_op adj = transposed ? CT_OP_conv : CT_OP_conv_transpose;
    if (NEED(0)) {
        ct_tensor *wt = ct__vjp_in(c, 1);
        TRY(wt);
        TRY(gin[0] = ct__conv_geom(adj, g, wt, NULL, &c->a->p.conv));
    }
    if (NEED(1)) TRY(x = ct__vjp_in(c, 0));
    /* without a graph to build (grad mode off: an ordinary backward), the
     * weight gradient runs as one kernel (see ct__conv_wgrad) */
    if (NEED(1) && !ct_is_grad_enabled() && !ct__fw_active_on((ct_tensor *[]){x, g}, 2))
        TRY(gin[1] = ct__conv_wgrad(transposed ? CT_OP_conv_transpose : CT_OP_conv, x, g, w->sizes,
                                    w->ndim, &c->a->p.conv));
    else if (NEED(1))
        TRY(gin[1] = transposed ? wgrad(g, x, &c->a->p.conv, nd) : wgrad(x, g, &c->a->p.conv, nd));
    if (c->nin > 2 && NEED(2)) TRY(gin[2] = ct__grad_to(bias_grad(g, nd), GEO(2)));
    return CT_OK;
}

ct_status ct__vjp_conv(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    return vjp_conv_common(c, g, gin, false);
}
ct_status ct__vjp_conv_transpose(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    return vjp_conv_common(c, g, gin, true);
}

/* ---- pooling over planes: a->p.pool (src/ops/params_pool.def): planes P,
 * input_size {H, W}, output_size {Ho, Wo}, kernel_size, stride, padding,
 * dilation {h, w} */

/* A cpu constant of a backward formula on the device of like: moved there
 * when that is a device with data other than the cpu (OpenCL, CUDA);
 * kept as it is on the cpu and while tracing on meta (the compiled graph
 * keeps it as a constant with its values). */
static ct_tensor *const_on(ct_tensor *c, const ct_tensor *like) {
    ct_device d = like ? like->storage->device : CT_CPU;
    return d == CT_CPU || d == CT_META ? c : ct_to_dev(c, ct_tensor_dev(like));
}

/* max pools: the gradient of each output goes to its argmax (flat index in
 * its plane, the saved output 1) */
ct_status ct__vjp_max_pool(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0); /* the input itself is not saved: its indices are */
    const ct_p_pool *pp = &c->a->p.pool;
    int64_t P = pp->planes, HW = pp->input_size[0] * pp->input_size[1],
            L = pp->output_size[0] * pp->output_size[1];
    if (!g[0]) { TRY(gin[0] = ct__zeros_geom(x, x->dtype)); return CT_OK; }
    ct_tensor *idx = c->nout > 1 ? ct__vjp_out(c, 1) : NULL;
    if (!idx)
        return ct_last_error_code() ? ct_last_error_code()
               : ct__error_status(CT_ERR_AUTOGRAD, "%s backward: the indices were not saved",
                                  ct__op_info[c->a->op].name);
    if (!ct_is_grad_enabled() && !ct__fw_active_on(g, 1)) { /* no graph to build: one kernel (x's geometry only) */
        TRY(gin[0] = ct__max_pool_backward(g[0], idx, ct__geom_tensor(x), pp));
        return CT_OK;
    }
    ct_tensor *gf = ct_reshape(as_dt(g[0], x->dtype), CT_SHAPE(P, L));
    ct_tensor *ix = ct_reshape(ct_detach(idx), CT_SHAPE(P, L));
    ct_tensor *z = const_on(ct_zeros(CT_SHAPE(P, HW), x->dtype), gf);
    TRY(gf && ix && z);
    TRY(gin[0] = ct_reshape(ct_scatter_add(z, 1, ix, gf), x->sizes, x->ndim));
    return CT_OK;
}

/* avg_pool: each output's gradient, divided by its divisor, spread over its
 * window: a transposed conv with a ones kernel on the pooling geometry */
ct_status ct__vjp_avg_pool(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_geom *x = GEO(0);
    const ct_p_pool *pp = &c->a->p.pool;
    int64_t P = pp->planes, H = pp->input_size[0], W = pp->input_size[1];
    int64_t Ho = pp->output_size[0], Wo = pp->output_size[1];
    int64_t kh = pp->kernel_size[0], kw = pp->kernel_size[1];
    int64_t sh = pp->stride[0], sw = pp->stride[1], ph = pp->padding[0], pw = pp->padding[1];
    bool count_pad = pp->count_include_pad;
    int64_t divisor = pp->divisor_override;
    double *coef = malloc(sizeof(double) * (size_t)(Ho * Wo > 0 ? Ho * Wo : 1));
    if (!coef) return ct__error_status(CT_ERR_OOM, "avg_pool backward: out of memory");
    for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) { /* as the kernel computes it */
            int64_t hs = oh * sh - ph, ws = ow * sw - pw, he = hs + kh, we = ws + kw;
            if (he > H + ph) he = H + ph;
            if (we > W + pw) we = W + pw;
            int64_t pool = (he - hs) * (we - ws);
            if (hs < 0) hs = 0;
            if (ws < 0) ws = 0;
            if (he > H) he = H;
            if (we > W) we = W;
            int64_t div = divisor > 0 ? divisor : count_pad ? pool : (he - hs) * (we - ws);
            coef[oh * Wo + ow] = (hs >= he || ws >= we || div <= 0) ? 0.0 : 1.0 / (double)div;
        }
    ct_tensor *ct = const_on(ct_from_doubles(coef, CT_SHAPE(Ho, Wo), x->dtype), g[0]);
    free(coef);
    ct_tensor *gs = ct_mul(ct_reshape(as_dt(g[0], x->dtype), CT_SHAPE(P, 1, Ho, Wo)), ct);
    ct_tensor *ones = const_on(ct_ones(CT_SHAPE(1, 1, kh, kw), x->dtype), g[0]);
    TRY(gs && ones);
    /* the pool's window as a conv geometry (depth 1, dilation 1, one group) */
    ct_p_conv geo = {
        .image_size = {1, H, W}, .grid_size = {1, Ho, Wo}, .kernel_size = {1, kh, kw},
        .stride = {1, sh, sw}, .padding = {0, ph, pw}, .dilation = {1, 1, 1}, .groups = 1,
    };
    ct_tensor *r = ct__conv_geom(CT_OP_conv_transpose, gs, ones, NULL, &geo);
    TRY(gin[0] = ct_reshape(r, x->sizes, x->ndim));
    return CT_OK;
}

/* separable linear maps y[p] = Mh x[p] Mw^T on P planes [H, W] -> [Ho, Wo]:
 * dx[p] = Mh^T g[p] Mw */
static ct_status separable_back(const ct_vjp_ctx *c, ct_tensor *g, double *mh, double *mw,
                                int64_t P, const int64_t *in, const int64_t *out,
                                ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    int64_t H = in[0], W = in[1], Ho = out[0], Wo = out[1];
    ct_tensor *Mh = const_on(ct_from_doubles(mh, CT_SHAPE(Ho, H), x->dtype), g);
    ct_tensor *Mw = const_on(ct_from_doubles(mw, CT_SHAPE(Wo, W), x->dtype), g);
    ct_tensor *g3 = ct_reshape(as_dt(g, x->dtype), CT_SHAPE(P, Ho, Wo));
    TRY(Mh && Mw && g3);
    ct_tensor *r = ct_matmul(ct_matmul(ct_transpose(Mh, 0, 1), g3), Mw);
    TRY(gin[0] = ct_reshape(r, x->sizes, x->ndim));
    return CT_OK;
}

static void adaptive_matrix(int64_t in, int64_t out, double *m) {
    memset(m, 0, sizeof(double) * (size_t)(in * out));
    for (int64_t o = 0; o < out; o++) { /* the kernel's windows */
        int64_t s = (o * in) / out, e = ((o + 1) * in + out - 1) / out;
        for (int64_t i = s; i < e; i++) m[o * in + i] = 1.0 / (double)(e - s);
    }
}

static ct_status vjp_separable(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin,
                               bool interp) {
    if (!NEED(0)) return CT_OK;
    /* interpolate (a->p.resample) and adaptive_avg_pool (a->p.pool): the
     * same plane geometry */
    const ct_p_resample *r = &c->a->p.resample;
    const ct_p_pool *pp = &c->a->p.pool;
    int64_t P = interp ? r->planes : pp->planes;
    const int64_t *in = interp ? r->input_size : pp->input_size;
    const int64_t *out = interp ? r->output_size : pp->output_size;
    int64_t H = in[0], W = in[1], Ho = out[0], Wo = out[1];
    double *mh = malloc(sizeof(double) * (size_t)(Ho * H > 0 ? Ho * H : 1));
    double *mw = malloc(sizeof(double) * (size_t)(Wo * W > 0 ? Wo * W : 1));
    if (!mh || !mw) {
        free(mh);
        free(mw);
        return ct__error_status(CT_ERR_OOM, "%s backward: out of memory", ct__op_info[c->a->op].name);
    }
    if (interp) {
        int mode = (int)r->mode;
        bool align = r->align_corners;
        int hmode = mode == CT_INTERP_LINEAR ? CT_INTERP_BILINEAR : mode;
        ct__interp_matrix(hmode, align, H, Ho, r->scales_h, mh);
        ct__interp_matrix(mode, align, W, Wo, r->scales_w, mw);
    } else {
        adaptive_matrix(H, Ho, mh);
        adaptive_matrix(W, Wo, mw);
    }
    ct_status st = separable_back(c, g[0], mh, mw, P, in, out, gin);
    free(mh);
    free(mw);
    return st;
}

ct_status ct__vjp_adaptive_avg_pool(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    return vjp_separable(c, g, gin, false);
}
ct_status ct__vjp_interpolate(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    return vjp_separable(c, g, gin, true);
}

/* ---- im2col / col2im: adjoint pair (a->p.conv, a 2-D window: entries 1..2
 * of image_size, kernel_size, dilation, padding, stride) */
ct_status ct__vjp_im2col(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_p_conv *pc = &c->a->p.conv;
    TRY(gin[0] = ct_col2im(as_dt(g[0], GEO(0)->dtype), &pc->image_size[1], &pc->kernel_size[1],
                           &pc->dilation[1], &pc->padding[1], &pc->stride[1]));
    return CT_OK;
}
ct_status ct__vjp_col2im(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (!NEED(0)) return CT_OK;
    const ct_p_conv *pc = &c->a->p.conv;
    TRY(gin[0] = ct_im2col(as_dt(g[0], GEO(0)->dtype), &pc->kernel_size[1], &pc->dilation[1],
                           &pc->padding[1], &pc->stride[1]));
    return CT_OK;
}

