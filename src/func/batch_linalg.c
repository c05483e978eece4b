/* batch_linalg.c -- batching rules of the matrix products, convolution,
 * pooling and the random ops (the op table's vmap column).
 *
 * Matrix products: every product of the family is a matmul of (batches of)
 * matrices once vectors are made matrices (a row for the left operand, a
 * column for the right), so each runs as one broadcasting batched matmul
 * over [B, ..., n, k] x [B, ..., k, m] (an unbatched operand broadcasts),
 * and the vector dims are squeezed again; the add* forms add beta * input.
 * Convolution and pooling: the batch folds into the samples dim N (or the
 * planes), so one call convolves every sample.  Random ops draw per the
 * randomness setting: ERROR refuses, DIFFERENT draws [B, ...] at once,
 * SAME draws one sample's worth that every sample shares. */
#include <stdlib.h>
#include <string.h>

#include "func_impl.h"
#include "../ops/meta.h"

/* a (x) b as matmul with vector operands made matrices: a_vec / b_vec say
 * which operands are per-sample vectors to squeeze back */
static ct_status bmatmul(const ct_vmap_call *c, ct_bval a, ct_bval b, ct_bval *res) {
    int la = ct__bv_ndim(a), lb = ct__bv_ndim(b);
    if (la == 0 || lb == 0) return ct__bv_error(c, CT_ERR_SHAPE, "a 0-dim operand in a matrix product");
    ct_tensor *A = ct__bv_front(a), *Bm = ct__bv_front(b);
    if (!A || !Bm) return ct__bv_status();
    bool sqa = la == 1, sqb = lb == 1;
    if (sqa && !(A = ct_unsqueeze(A, -2))) return ct__bv_status();
    if (sqb && !(Bm = ct_unsqueeze(Bm, -1))) return ct__bv_status();
    la += sqa;
    lb += sqb;
    int r = la > lb ? la : lb;
    ct_bval av = {A, a.bdim >= 0 ? 0 : -1}, bv = {Bm, b.bdim >= 0 ? 0 : -1};
    if (!(A = ct__bv_align(av, r)) || !(Bm = ct__bv_align(bv, r))) return ct__bv_status();
    ct_tensor *y = ct_matmul(A, Bm);
    if (y && sqb) y = ct_squeeze_dim(y, -1);
    if (y && sqa) y = ct_squeeze_dim(y, sqb ? -1 : -2);
    if (!y) return ct__bv_status();
    *res = (ct_bval){y, (a.bdim >= 0 || b.bdim >= 0) ? 0 : -1};
    return CT_OK;
}

/* mm, bmm, matmul, dot, vdot, mv, outer */
CT_VMAP_RULE(ct__vmap_matmul) {
    ct_op op = c->n->op;
    ct_bval a = in[0], b = in[1];
    if (op == CT_OP_outer) {
        /* a [n] x b [m] = a as a column times b as a row */
        /* outer is elementwise: let broadcasting do it, batch dims first */
        ct_bval av = {ct__bv_front(a), a.bdim >= 0 ? 0 : -1};
        ct_bval bv = {ct__bv_front(b), b.bdim >= 0 ? 0 : -1};
        if (!av.t || !bv.t) return ct__bv_status();
        ct_tensor *A = ct__bv_align((ct_bval){ct_unsqueeze(av.t, -1), av.bdim}, 2);
        ct_tensor *Bm = ct__bv_align((ct_bval){ct_unsqueeze(bv.t, -2), bv.bdim}, 2);
        if (!A || !Bm) return ct__bv_status();
        ct_tensor *y = ct_mul(A, Bm);
        if (!y) return ct__bv_status();
        out[0] = (ct_bval){y, 0};
        return CT_OK;
    }
    if (op == CT_OP_vdot && (ct_dtype_is_complex(a.t->dtype) || ct_dtype_is_complex(b.t->dtype))) {
        /* conj(a) . b: no conj op to batch with, so sample by sample through ct_vdot */
        ct_tensor *col[64], **cols = c->B <= 64 ? col : malloc(sizeof *cols * (size_t)c->B);
        if (!cols) return ct__error_status(CT_ERR_OOM, "vmap: out of memory");
        ct_status st = CT_OK;
        for (int64_t i = 0; i < c->B && !st; i++) {
            ct_tensor *ai = a.bdim >= 0 ? ct_select(a.t, a.bdim, i) : a.t;
            ct_tensor *bi = b.bdim >= 0 ? ct_select(b.t, b.bdim, i) : b.t;
            if (!(cols[i] = ct_vdot(ai, bi))) st = ct__bv_status();
        }
        ct_tensor *y = st || c->B == 0 ? NULL : ct_stack(cols, (int)c->B, 0);
        if (cols != col) free(cols);
        if (st) return st;
        if (!y) {
            c->fallback = c->B == 0;
            return c->B == 0 ? CT_OK : ct__bv_status();
        }
        c->looped = true;
        out[0] = (ct_bval){y, 0};
        return CT_OK;
    }
    return bmatmul(c, a, b, &out[0]);
}

/* beta * input + alpha * p, broadcasting input per sample (beta 0: input
 * not read, NaN included, as torch) */
static ct_status add_scaled(const ct_vmap_call *c, ct_bval input, ct_bval p, double beta, double alpha,
                            ct_bval *res) {
    int r = ct__bv_ndim(p);
    ct_tensor *y = ct__bv_align(p, r);
    if (!y) return ct__bv_status();
    if (alpha != 1 && !(y = ct_mul_scalar(y, alpha))) return ct__bv_status();
    if (beta != 0) {
        ct_tensor *I = ct__bv_align(input, r);
        if (I && beta != 1) I = ct_mul_scalar(I, beta);
        if (!I || !(y = ct_add(I, y))) return ct__bv_status();
    }
    bool batched = p.bdim >= 0 || (beta != 0 && input.bdim >= 0);
    if (!batched && input.bdim >= 0) { /* the samples agree: expanded, as the result of a batched call */
        if (!(y = ct__bv_full((ct_bval){y, -1}, c->B))) return ct__bv_status();
        batched = true;
    }
    *res = (ct_bval){y, batched ? 0 : -1};
    return CT_OK;
}

/* addmm, addmv, addr, baddbmm, addbmm: beta * input + alpha * product */
CT_VMAP_RULE(ct__vmap_addmm) {
    const ct_gnode *n = c->n;
    const ct_p_linalg *p = &n->args.p.linalg;
    ct_bval prod;
    ct_status st;
    if (n->op == CT_OP_addr) {
        ct_gnode sub = *n;
        sub.op = CT_OP_outer;
        ct_vmap_call c2 = *c;
        c2.n = &sub;
        st = ct__vmap_matmul(&c2, in + 1, &prod);
    } else {
        st = bmatmul(c, in[1], in[2], &prod);
    }
    if (st) return st;
    if (n->op == CT_OP_addbmm) {
        int64_t d = prod.bdim >= 0 ? 1 : 0;
        ct_tensor *s = ct_sum(prod.t, &d, 1, false);
        if (!s) return ct__bv_status();
        prod.t = s;
    }
    return add_scaled(c, in[0], prod, p->beta, p->alpha, &out[0]);
}

/* linear(x, w, b) = x w^T + b */
CT_VMAP_RULE(ct__vmap_linear) {
    const ct_gnode *n = c->n;
    ct_bval b = n->nin > 2 ? in[2] : (ct_bval){NULL, -1};
    if (in[1].bdim < 0 && b.bdim < 0 && ct__bv_ndim(in[0]) >= 1) {
        ct_tensor *x = ct__bv_front(in[0]);
        if (!x) return ct__bv_status();
        ct_tensor *y = ct_linear(x, in[1].t, b.t);
        if (!y) return ct__bv_status();
        out[0] = (ct_bval){y, 0};
        return CT_OK;
    }
    ct_bval wt = in[1];
    if (ct__bv_ndim(wt) == 2) {
        ct_tensor *w = ct__bv_front(wt);
        if (!w || !(w = ct_transpose(w, -1, -2))) return ct__bv_status();
        wt = (ct_bval){w, wt.bdim >= 0 ? 0 : -1};
    }
    ct_bval prod;
    ct_status st = bmatmul(c, in[0], wt, &prod);
    if (st || !b.t) {
        if (!st) out[0] = prod;
        return st;
    }
    return add_scaled(c, b, prod, 1, 1, &out[0]);
}

/* conv / conv_transpose (x, w, [b]).  Weights unbatched: the batch folds
 * into the samples dim N ([B*N, C, ...]).  Weights batched: the batch
 * folds into the channels as groups (functorch's trick): x [N, B*C, ...]
 * convolved with w [B*Cout, C/g, ...] in B*g groups gives [N, B*Cout, ...],
 * each sample's channels against its own filters; conv_transpose's weight
 * is [Cin, Cout/g, ...], so its batch folds into dim 0 the same way. */
CT_VMAP_RULE(ct__vmap_conv) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    int sd = (int)a.p.conv.spatial_dims;
    int64_t B = c->B;
    bool has_n = ct__bv_ndim(in[0]) == sd + 2;
    ct_bval bias = n->nin > 2 ? in[2] : (ct_bval){NULL, -1};
    bool wb = in[1].bdim >= 0 || bias.bdim >= 0;
    if (!wb) {
        ct_tensor *x = ct_contiguous(ct__bv_front(in[0]));
        if (!x) return ct__bv_status();
        int64_t N = has_n ? x->sizes[1] : 1;
        if (has_n) {
            int64_t sh[CT_MAX_DIMS];
            sh[0] = B * N;
            for (int d = 2; d < x->ndim; d++) sh[d - 1] = x->sizes[d];
            if (!(x = ct_reshape(x, sh, x->ndim - 1))) return ct__bv_status();
        }
        a.p.conv.batch = B * N;
        ct_tensor *ins[3] = {x, ct_contiguous(in[1].t), bias.t ? ct_contiguous(bias.t) : NULL};
        ct_tensor *y;
        ct_status st = ct__bv_run(c, &y, ins, n->nin, &a);
        if (st) return st;
        if (has_n) {
            int64_t sh[CT_MAX_DIMS];
            sh[0] = B;
            sh[1] = N;
            for (int d = 1; d < y->ndim; d++) sh[d + 1] = y->sizes[d];
            if (!(y = ct_reshape(y, sh, y->ndim + 1))) return ct__bv_status();
        }
        out[0] = (ct_bval){y, 0};
        return CT_OK;
    }
    /* batched weights (or bias): channels as groups */
    ct_tensor *x = ct__bv_full(in[0], B); /* [B, N, C, *] or [B, C, *] */
    if (!x) return ct__bv_status();
    if (!has_n && !(x = ct_unsqueeze(x, 1))) return ct__bv_status();
    int64_t N = x->sizes[1], C = x->sizes[2];
    int64_t sh[CT_MAX_DIMS];
    /* [N, B, C, *] -> [N, B*C, *] */
    if (!(x = ct_movedim(x, 0, 1))) return ct__bv_status();
    sh[0] = N;
    sh[1] = B * C;
    for (int d = 3; d < x->ndim; d++) sh[d - 1] = x->sizes[d];
    if (!(x = ct_contiguous(ct_reshape(x, sh, x->ndim - 1)))) return ct__bv_status();
    ct_tensor *w = ct__bv_full(in[1], B); /* [B, W0, W1, *] -> [B*W0, W1, *] */
    if (!w) return ct__bv_status();
    sh[0] = B * w->sizes[1];
    for (int d = 2; d < w->ndim; d++) sh[d - 1] = w->sizes[d];
    if (!(w = ct_contiguous(ct_reshape(w, sh, w->ndim - 1)))) return ct__bv_status();
    ct_tensor *b = NULL;
    if (bias.t) {
        b = ct__bv_full(bias, B);
        int64_t bs = B * (b ? b->sizes[1] : 0);
        if (!b || !(b = ct_contiguous(ct_reshape(b, &bs, 1)))) return ct__bv_status();
    }
    a.p.conv.batch = N;
    a.p.conv.in_channels *= B;
    a.p.conv.out_channels *= B;
    a.p.conv.groups *= B;
    ct_tensor *ins[3] = {x, w, b};
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, ins, n->nin, &a);
    if (st) return st;
    /* [N, B*Cout, *] -> [N, B, Cout, *] -> batch first */
    int64_t Co = y->sizes[1] / B;
    sh[0] = N;
    sh[1] = B;
    sh[2] = Co;
    for (int d = 2; d < y->ndim; d++) sh[d + 1] = y->sizes[d];
    if (!(y = ct_reshape(y, sh, y->ndim + 1)) || !(y = ct_movedim(y, 1, 0))) return ct__bv_status();
    if (!has_n && !(y = ct_squeeze_dim(y, 1))) return ct__bv_status();
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* conv_wgrad (image side [N, C, *] or [C, *], grid side [N, Cout, *]): each
 * sample's weight gradient, all at once with the batch folded into the
 * channels as groups -- [N, B*C, *] and [N, B*Cout, *] in B*g groups give
 * [B*Cout, C/g, k...], sample b's filters in rows b*Cout.. (2-D convs of
 * one group: a batched matmul over im2col's columns instead) */
/* 2-D, one group: per-sample weight gradients as one batched matmul of
 * the grid side [B, Cout, N*L] by the image side's columns (im2col)
 * [B, N*L, C*kh*kw] -- far faster than B*g groups; *res NULL (CT_OK) when
 * the geometry does not fit (asymmetric padding: the grid is not
 * im2col's) */
static ct_status wgrad_bmm(const ct_vmap_call *c, const ct_bval *in, bool has_n, ct_tensor **res) {
    const ct_p_conv *p = &c->n->args.p.conv;
    int64_t B = c->B;
    *res = NULL;
    ct_tensor *im = ct__bv_full(in[0], B), *gr = ct__bv_full(in[1], B);
    if (!im || !gr) return ct__bv_status();
    if (!has_n && (!(im = ct_unsqueeze(im, 1)) || !(gr = ct_unsqueeze(gr, 1)))) return ct__bv_status();
    int64_t N = im->sizes[1], C = im->sizes[2], Co = gr->sizes[2], L = gr->sizes[3] * gr->sizes[4];
    int64_t kh = p->kernel_size[1], kw = p->kernel_size[2];
    ct_tensor *cols = ct_im2col(ct_reshape(im, (int64_t[]){B * N, C, im->sizes[3], im->sizes[4]}, 4),
                                (int64_t[]){kh, kw}, (int64_t[]){p->dilation[1], p->dilation[2]},
                                (int64_t[]){p->padding[1], p->padding[2]}, (int64_t[]){p->stride[1], p->stride[2]});
    if (!cols) return ct__bv_status();
    if (cols->sizes[2] != L) return CT_OK; /* not im2col's grid */
    int64_t K = C * kh * kw;
    /* [B, N, K, L] -> [B, N*L, K] and [B, N, Co, L] -> [B, Co, N*L] */
    ct_tensor *cl = ct_reshape(ct_permute(ct_reshape(cols, (int64_t[]){B, N, K, L}, 4), (int64_t[]){0, 1, 3, 2}, 4),
                               (int64_t[]){B, N * L, K}, 3);
    ct_tensor *gl = ct_reshape(ct_permute(ct_reshape(gr, (int64_t[]){B, N, Co, L}, 4), (int64_t[]){0, 2, 1, 3}, 4),
                               (int64_t[]){B, Co, N * L}, 3);
    ct_tensor *dw = cl && gl ? ct_bmm(gl, cl) : NULL;
    if (!dw || !(*res = ct_reshape(dw, (int64_t[]){B, Co, C, kh, kw}, 5))) return ct__bv_status();
    return CT_OK;
}

CT_VMAP_RULE(ct__vmap_conv_wgrad) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    int64_t B = c->B;
    int sd = (int)a.p.conv.spatial_dims;
    bool has_n = ct__bv_ndim(in[0]) == sd + 2;
    /* one image per sample on the CPU: the grouped form below moves no data
     * ([B, 1, C, *] is [1, B*C, *] as it is) and the CPU kernel runs it a
     * group per thread with each group's columns in the cache
     * (conv_wgrad_groups, src/backend/cpu/conv_tmpl.h): for the
     * FashionMNIST CNN's per-sample gradients (batch 64, one thread, a
     * loaded machine, minimum over 40 steps) its two weight gradients took
     * 7.8-10.7 ms where im2col + bmm took 10.9-18.6 ms */
    ct_device dev = ct_get_device(in[0].t);
    bool cpu1 = (dev == CT_CPU || dev == CT_META) && (!has_n || in[0].t->sizes[in[0].bdim == 0 ? 1 : 0] == 1);
    if (sd == 2 && a.p.conv.groups == 1 && B > 0 && !cpu1) {
        ct_tensor *dw;
        ct_status st = wgrad_bmm(c, in, has_n, &dw);
        if (st) return st;
        if (dw) {
            out[0] = (ct_bval){dw, 0};
            return CT_OK;
        }
    }
    ct_tensor *t[2];
    int64_t N = 1;
    for (int k = 0; k < 2; k++) {
        ct_tensor *x = ct__bv_full(in[k], B); /* [B, N, C, *] or [B, C, *] */
        if (x && !has_n) x = ct_unsqueeze(x, 1);
        if (x) x = ct_movedim(x, 0, 1); /* [N, B, C, *] */
        if (!x) return ct__bv_status();
        int64_t sh[CT_MAX_DIMS];
        N = x->sizes[0];
        sh[0] = N;
        sh[1] = B * x->sizes[2];
        for (int d = 3; d < x->ndim; d++) sh[d - 1] = x->sizes[d];
        if (!(t[k] = ct_contiguous(ct_reshape(x, sh, x->ndim - 1)))) return ct__bv_status();
        if (!has_n && !(t[k] = ct_squeeze_dim(t[k], 0))) return ct__bv_status();
    }
    a.p.conv.batch = N;
    a.p.conv.groups *= B;
    a.p.conv.in_channels *= B;
    a.p.conv.out_channels *= B;
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, t, 2, &a);
    if (st) return st;
    int64_t sh[CT_MAX_DIMS];
    sh[0] = B;
    sh[1] = y->sizes[0] / (B ? B : 1);
    for (int d = 1; d < y->ndim; d++) sh[d + 1] = y->sizes[d];
    if (!(y = ct_reshape(y, sh, y->ndim + 1))) return ct__bv_status();
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* max_pool_backward (gradient, indices of the pooled windows): the batch is
 * more planes */
CT_VMAP_RULE(ct__vmap_max_pool_backward) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    ct_tensor *t[2];
    for (int k = 0; k < 2; k++)
        if (!(t[k] = ct_contiguous(ct__bv_full(in[k], c->B)))) return ct__bv_status();
    a.p.pool.planes *= c->B;
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, t, 2, &a);
    if (st) return st;
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* max_pool, avg_pool, adaptive_*: the batch is more planes, folded into
 * the leading dim when the sample has one beside its channels */
CT_VMAP_RULE(ct__vmap_pool) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    ct_dtype orig = x ? x->dtype : CT_F32;
    /* half precision: the public ops pool in f32 (no kernel for it) */
    if (x && (orig == CT_F16 || orig == CT_BF16)) x = ct_to_dtype(x, CT_F32);
    if (!(x = ct_contiguous(x))) return ct__bv_status();
    int sd = (int)a.p.pool.spatial_dims;
    bool fold = ct__bv_ndim(in[0]) == sd + 2;
    int64_t N = fold ? x->sizes[1] : 1;
    if (fold) {
        int64_t sh[CT_MAX_DIMS];
        sh[0] = c->B * N;
        for (int d = 2; d < x->ndim; d++) sh[d - 1] = x->sizes[d];
        if (!(x = ct_reshape(x, sh, x->ndim - 1))) return ct__bv_status();
    }
    a.p.pool.planes *= c->B;
    ct_tensor *y[2] = {0};
    ct_status st = ct__bv_run(c, y, &x, 1, &a);
    if (st) return st;
    for (int k = 0; k < n->nout; k++) {
        if (!y[k]) continue;
        if (fold) {
            int64_t sh[CT_MAX_DIMS];
            sh[0] = c->B;
            sh[1] = N;
            for (int d = 1; d < y[k]->ndim; d++) sh[d + 1] = y[k]->sizes[d];
            if (!(y[k] = ct_reshape(y[k], sh, y[k]->ndim + 1))) return ct__bv_status();
        }
        if (y[k]->dtype == CT_F32 && ct__bv_out_meta(c, k)->dtype == orig && orig != CT_F32 &&
            !(y[k] = ct_to_dtype(y[k], orig)))
            return ct__bv_status();
        out[k] = (ct_bval){y[k], 0};
    }
    return CT_OK;
}

/* ---- random ---- */
/* a fresh draw of op with args a into a new tensor of `shape` */
static ct_tensor *draw(ct_op op, const ct_args *a0, const int64_t *shape, int nd, ct_dtype dt) {
    ct_args a = *a0;
    a.p.random.inplace = false;
    a.p.random.dtype = dt;
    a.p.random.shape_n = nd;
    memcpy(a.p.random.shape, shape, sizeof(int64_t) * (size_t)nd);
    ct_meta m;
    if (ct__meta_run(op, &m, 1, NULL, 0, &a)) return NULL;
    ct_tensor *t = ct__meta_new(&m, NULL);
    if (!t) return NULL;
    if (ct__random_replay(op, t, &a)) {
        ct_release(t);
        return NULL;
    }
    return ct__finish(op, t, NULL, 0, &a);
}

CT_VMAP_RULE(ct__vmap_random) {
    const ct_gnode *n = c->n;
    const char *name = ct__op_info[n->op].name;
    if (c->randomness == CT_VMAP_ERROR)
        return ct__error_status(CT_ERR_ARG, "vmap: called a random operation (%s) while randomness is 'error' "
                                "(use CT_VMAP_SAME or CT_VMAP_DIFFERENT, or draw outside vmap)", name);
    bool same = c->randomness == CT_VMAP_SAME;
    if (n->nin == 0 && ct__random_replayable(n->op, 0)) {
        if (c->dst) {
            /* x.uniform_() and the like */
            ct_bval d = *c->dst;
            if (!same && d.bdim < 0)
                return ct__error_status(CT_ERR_ARG, "vmap: %s_: randomness 'different' cannot draw in place "
                                        "into a tensor that is not batched", name);
            ct_tensor *D = ct__bv_front(d);
            if (!D) return ct__bv_status();
            int skip = same && d.bdim >= 0 ? 1 : 0;
            ct_tensor *r = draw(n->op, &n->args, D->sizes + skip, D->ndim - skip, D->dtype);
            if (!r || !ct_copy_(D, r)) return ct__bv_status();
            out[0] = (ct_bval){D, d.bdim >= 0 ? 0 : -1};
            return CT_OK;
        }
        if (n->op == CT_OP_randperm && !same) {
            c->fallback = true; /* each sample its own permutation */
            return CT_OK;
        }
        const ct_p_random *p = &n->args.p.random;
        int64_t sh[CT_MAX_DIMS];
        int nd = p->shape_n;
        if (n->op == CT_OP_randperm) {
            ct_tensor *y;
            ct_status st = ct__exec_op(n->op, &y, 1, NULL, 0, &n->args, 0);
            if (st) return st;
            out[0] = (ct_bval){y, -1};
            return CT_OK;
        }
        if (!same) {
            if (nd + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
            sh[0] = c->B;
            memcpy(sh + 1, p->shape, sizeof(int64_t) * (size_t)nd);
            nd++;
        } else {
            memcpy(sh, p->shape, sizeof(int64_t) * (size_t)nd);
        }
        ct_tensor *y = draw(n->op, &n->args, sh, nd, p->dtype);
        if (!y) return ct__bv_status();
        out[0] = (ct_bval){y, same ? -1 : 0};
        return CT_OK;
    }
    if (n->op == CT_OP_bernoulli && n->nin == 1 && !c->dst) {
        if (same && in[0].bdim >= 0)
            return ct__error_status(CT_ERR_ARG, "vmap: bernoulli: randomness 'same' with batched "
                                    "probabilities (each sample's p differs, so its draw cannot be shared)");
        ct_tensor *p = same ? in[0].t : ct__bv_full(in[0], c->B);
        ct_tensor *y = p ? ct_bernoulli(p) : NULL;
        if (!y) return ct__bv_status();
        out[0] = (ct_bval){y, same ? -1 : 0};
        return CT_OK;
    }
    if (n->op == CT_OP_multinomial && n->nin == 1 && !c->dst && !same) {
        /* rows of probabilities: the batch is more rows */
        const ct_p_random *p = &n->args.p.random;
        ct_tensor *P = ct__bv_full(in[0], c->B);
        if (!P) return ct__bv_status();
        int64_t sh[CT_MAX_DIMS];
        int nd = P->ndim;
        memcpy(sh, P->sizes, sizeof(int64_t) * (size_t)nd);
        int64_t rows = nd == 3 ? sh[0] * sh[1] : sh[0], cols = sh[nd - 1];
        ct_tensor *y = ct_multinomial(ct_reshape(P, (int64_t[]){rows, cols}, 2), p->num_samples, p->replacement);
        if (y && nd == 3) y = ct_reshape(y, (int64_t[]){sh[0], sh[1], p->num_samples}, 3);
        if (!y) return ct__bv_status();
        out[0] = (ct_bval){y, 0};
        return CT_OK;
    }
    if (same)
        return ct__error_status(CT_ERR_ARG, "vmap: %s: randomness 'same' is not supported for this form of "
                                "the op", name);
    c->fallback = true;
    return CT_OK;
}
