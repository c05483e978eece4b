/* batch_fused.c -- batching rules of the fused ops: layer / rms norm
 * forward and backward, scaled dot-product attention and its backward,
 * batch norm (training, evaluation, backward) -- the op table's vmap
 * column.
 *
 * Layer norm takes any number of rows, so a batch is more rows when the per-row tensors (weight, bias)
 * are shared; per-sample reductions over rows (the weight and bias
 * gradients of layer norm) are summed per sample.  Attention folds the
 * batch into its leading dim.  Batch norm's statistics are per sample, so
 * the batch folds into the channels (functorch's rule): [N, B*C, ...]. */
#include <string.h>

#include "func_impl.h"
#include "../ops/meta.h"

/* layer_norm_fwd (x, [w], [b]) -> y, mean [M], rstd [M] */
CT_VMAP_RULE(ct__vmap_layer_norm_fwd) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    const ct_p_layer_norm *p = &a.p.layer_norm;
    int64_t B = c->B, nn = p->normalized_numel;
    ct_tensor *x = ct_contiguous(ct__bv_full(in[0], B));
    if (!x) return ct__bv_status();
    bool wb = false;
    for (int k = 1; k < n->nin; k++) wb = wb || in[k].bdim >= 0;
    ct_tensor *ins[3] = {x, NULL, NULL};
    int nin = 1;
    if (!wb) {
        for (int k = 1; k < n->nin; k++) ins[nin++] = in[k].t;
    } else {
        /* per-sample weights: normalize with the op, scale and shift per sample */
        a.p.layer_norm.has_weight = a.p.layer_norm.has_bias = false;
    }
    ct_tensor *y[3] = {0};
    ct_status st = ct__exec_op(n->op, y, 3, ins, nin, &a, 0xFFFFFFFFu);
    if (st) return st;
    ct_tensor *yy = y[0];
    if (wb) {
        int r = ct__bv_ndim(in[0]);
        int k = 1;
        if (n->args.p.layer_norm.has_weight) {
            ct_tensor *w = ct__bv_align(in[k++], r);
            if (!w || !(yy = ct_mul(yy, w))) return ct__bv_status();
        }
        if (n->args.p.layer_norm.has_bias) {
            ct_tensor *b = ct__bv_align(in[k++], r);
            if (!b || !(yy = ct_add(yy, b))) return ct__bv_status();
        }
    }
    out[0] = (ct_bval){yy, 0};
    for (int j = 1; j < n->nout && j < 3; j++) {
        if (!y[j]) continue;
        ct_tensor *m = ct_reshape(y[j], (int64_t[]){B, y[j]->sizes[0] / (B ? B : 1)}, 2);
        if (!m) return ct__bv_status();
        out[j] = (ct_bval){m, 0};
    }
    (void)nn;
    return CT_OK;
}

/* layer_norm_bwd (g, x, mean [M], rstd [M], [w]) -> dx, dw [n], db [n]:
 * dx through the op (rows), dw and db summed over each sample's rows */
CT_VMAP_RULE(ct__vmap_layer_norm_bwd) {
    const ct_gnode *n = c->n;
    ct_args a = n->args;
    const ct_p_layer_norm *p = &n->args.p.layer_norm;
    int64_t B = c->B, nn = p->normalized_numel;
    ct_tensor *g = ct_contiguous(ct__bv_full(in[0], B)), *x = ct_contiguous(ct__bv_full(in[1], B));
    ct_tensor *mean = ct__bv_full(in[2], B), *rstd = ct__bv_full(in[3], B);
    if (!g || !x || !mean || !rstd) return ct__bv_status();
    int64_t M = mean->sizes[1];
    ct_tensor *mf = ct_contiguous(ct_reshape(mean, (int64_t[]){B * M}, 1));
    ct_tensor *rf = ct_contiguous(ct_reshape(rstd, (int64_t[]){B * M}, 1));
    if (!mf || !rf) return ct__bv_status();
    ct_tensor *ins[5] = {g, x, mf, rf, NULL};
    int nin = 4;
    ct_tensor *w = NULL;
    if (p->has_weight) {
        if (in[4].bdim < 0) {
            ins[nin++] = in[4].t;
        } else {
            /* per-sample weights: dx of the unweighted norm for g * w */
            int r = ct__bv_ndim(in[1]);
            w = ct__bv_align(in[4], r);
            if (!w || !(ins[0] = ct_contiguous(ct_mul(g, w)))) return ct__bv_status();
            a.p.layer_norm.has_weight = false;
        }
    }
    ct_tensor *y[3] = {0};
    ct_status st = ct__exec_op(n->op, y, 3, ins, nin, &a, 0xFFFFFFFFu);
    if (st) return st;
    out[0] = (ct_bval){y[0], 0};
    if ((n->nout > 1 && n->out[1] >= 0) || (n->nout > 2 && n->out[2] >= 0)) {
        ct_tensor *g3 = ct_reshape(g, (int64_t[]){B, M, nn}, 3), *x3 = ct_reshape(x, (int64_t[]){B, M, nn}, 3);
        if (!g3 || !x3) return ct__bv_status();
        ct_tensor *xh = p->rms ? x3 : ct_sub(x3, ct_unsqueeze(mean, -1));
        xh = xh ? ct_mul(xh, ct_unsqueeze(rstd, -1)) : NULL;
        ct_tensor *dw = xh ? ct_sum(ct_mul(g3, xh), (int64_t[]){1}, 1, false) : NULL;
        ct_tensor *db = ct_sum(g3, (int64_t[]){1}, 1, false);
        if (!dw || !db) return ct__bv_status();
        if (n->nout > 1 && n->out[1] >= 0) out[1] = (ct_bval){dw, 0};
        if (n->nout > 2 && n->out[2] >= 0) out[2] = (ct_bval){db, 0};
    }
    return CT_OK;
}

/* fold [B, N, ...] -> [B*N, ...] and back */
static ct_tensor *fold0(ct_tensor *t) {
    int64_t sh[CT_MAX_DIMS];
    sh[0] = t->sizes[0] * t->sizes[1];
    for (int d = 2; d < t->ndim; d++) sh[d - 1] = t->sizes[d];
    return ct_contiguous(ct_reshape(t, sh, t->ndim - 1));
}
static ct_tensor *unfold0(ct_tensor *t, int64_t B) {
    int64_t sh[CT_MAX_DIMS];
    sh[0] = B;
    sh[1] = t->sizes[0] / (B ? B : 1);
    for (int d = 1; d < t->ndim; d++) sh[d + 1] = t->sizes[d];
    return ct_reshape(t, sh, t->ndim + 1);
}

/* sdpa_fused (q, k, v, [mask]) -> out, logsumexp; sdpa_fused_backward
 * (q, k, v, out, lse, gout, [mask]) -> dq, dk, dv: 4-D operands [N, H, ...]
 * (lse [N, H, L]); the batch folds into N.  With dropout each sample draws
 * its own mask: per sample. */
CT_VMAP_RULE(ct__vmap_sdpa) {
    const ct_gnode *n = c->n;
    if (n->args.p.sdpa.has_dropout || n->nin > 8) {
        if (c->randomness == CT_VMAP_ERROR)
            return ct__error_status(CT_ERR_ARG, "vmap: attention dropout is a random operation and randomness "
                                    "is 'error' (use CT_VMAP_DIFFERENT, or dropout_p 0)");
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *ins[8];
    for (int k = 0; k < n->nin; k++) {
        if (!in[k].t) {
            ins[k] = NULL;
            continue;
        }
        ct_tensor *t = ct__bv_full(in[k], c->B);
        if (!t || !(ins[k] = fold0(t))) return ct__bv_status();
    }
    ct_tensor *y[3] = {0};
    ct_status st = ct__bv_run(c, y, ins, n->nin, &n->args);
    if (st) return st;
    for (int j = 0; j < n->nout; j++) {
        if (!y[j]) continue;
        ct_tensor *u = unfold0(y[j], c->B);
        if (!u) return ct__bv_status();
        out[j] = (ct_bval){u, 0};
    }
    return CT_OK;
}

/* batch_norm_eval (x [N, C, *], running_mean, running_var, [w], [b]): with
 * the statistics shared, the batch is more samples */
CT_VMAP_RULE(ct__vmap_batch_norm_eval) {
    const ct_gnode *n = c->n;
    for (int k = 1; k < n->nin; k++)
        if (in[k].bdim >= 0) {
            c->fallback = true;
            return CT_OK;
        }
    ct_tensor *ins[8];
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x || !(ins[0] = fold0(x))) return ct__bv_status();
    for (int k = 1; k < n->nin && k < 8; k++) ins[k] = in[k].t;
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, ins, n->nin, &n->args);
    if (st) return st;
    ct_tensor *u = unfold0(y, c->B);
    if (!u) return ct__bv_status();
    out[0] = (ct_bval){u, 0};
    return CT_OK;
}

/* [B, N, C, *] -> [N, B*C, *] (a sample's channels are channels of their own) */
static ct_tensor *to_channels(ct_tensor *x) {
    ct_tensor *t = ct_movedim(x, 0, 1);
    if (!t) return NULL;
    int64_t sh[CT_MAX_DIMS];
    sh[0] = t->sizes[0];
    sh[1] = t->sizes[1] * t->sizes[2];
    for (int d = 3; d < t->ndim; d++) sh[d - 1] = t->sizes[d];
    return ct_contiguous(ct_reshape(t, sh, t->ndim - 1));
}
static ct_tensor *from_channels(ct_tensor *y, int64_t B) {
    int64_t sh[CT_MAX_DIMS];
    sh[0] = y->sizes[0];
    sh[1] = B;
    sh[2] = y->sizes[1] / (B ? B : 1);
    for (int d = 2; d < y->ndim; d++) sh[d + 1] = y->sizes[d];
    ct_tensor *t = ct_reshape(y, sh, y->ndim + 1);
    return t ? ct_movedim(t, 1, 0) : NULL;
}
/* a per-channel [C] value at [B*C] (shared ones repeated per sample) */
static ct_tensor *per_channel(ct_bval v, int64_t B) {
    ct_tensor *t = ct__bv_full(v, B);
    return t ? ct_contiguous(ct_reshape(t, (int64_t[]){B * t->sizes[1]}, 1)) : NULL;
}

/* batch_norm_fwd (x, [w], [b]) -> y, mean, invstd, var (training: each
 * sample's own statistics) and batch_norm_bwd (x, g, [w], mean, invstd)
 * -> dx, dw, db: the batch folded into the channels */
CT_VMAP_RULE(ct__vmap_batch_norm_train) {
    const ct_gnode *n = c->n;
    int64_t B = c->B;
    if (ct__bv_ndim(in[0]) < 2 || n->nin > 8) {
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *ins[8];
    bool bwd = n->op == CT_OP_batch_norm_bwd;
    for (int k = 0; k < n->nin; k++) {
        if (!in[k].t) {
            ins[k] = NULL;
            continue;
        }
        bool image = k == 0 || (bwd && k == 1);
        ct_tensor *t = image ? ct__bv_full(in[k], B) : NULL;
        ins[k] = image ? (t ? to_channels(t) : NULL) : per_channel(in[k], B);
        if (!ins[k]) return ct__bv_status();
    }
    ct_tensor *y[4] = {0};
    ct_status st = ct__bv_run(c, y, ins, n->nin, &n->args);
    if (st) return st;
    for (int j = 0; j < n->nout && j < 4; j++) {
        if (!y[j]) continue;
        ct_tensor *u = j == 0 ? from_channels(y[j], B)
                              : ct_reshape(y[j], (int64_t[]){B, y[j]->sizes[0] / (B ? B : 1)}, 2);
        if (!u) return ct__bv_status();
        out[j] = (ct_bval){u, 0};
    }
    return CT_OK;
}

/* add_layer_norm (x, [residual], [w], [b]) -> sum, y and bias_act (h,
 * [bias]) -> y: rows of the last dim, so a batch is more rows when the
 * per-row tensors (w, b, bias) are shared: x (and the residual) at
 * [B, ...], contiguous, through the op once.  Per-sample row tensors run
 * per sample. */
CT_VMAP_RULE(ct__vmap_fused_rows) {
    const ct_gnode *n = c->n;
    const ct_p_fused_rows *p = &n->args.p.fused_rows;
    int nx = n->op == CT_OP_add_layer_norm && p->has_residual ? 2 : 1;
    for (int k = nx; k < n->nin; k++)
        if (in[k].bdim >= 0) {
            c->fallback = true;
            return CT_OK;
        }
    if (c->dst) { /* written in place: the out-of-place form, then the write */
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *ins[4];
    for (int k = 0; k < n->nin && k < 4; k++) {
        ins[k] = k < nx ? ct_contiguous(ct__bv_full(in[k], c->B)) : in[k].t;
        if (!ins[k]) return ct__bv_status();
    }
    ct_tensor *y[2] = {0};
    ct_status st = ct__bv_run(c, y, ins, n->nin, &n->args);
    if (st) return st;
    for (int j = 0; j < n->nout && j < 2; j++)
        if (y[j]) out[j] = (ct_bval){y[j], 0};
    return CT_OK;
}
