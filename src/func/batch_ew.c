/* batch_ew.c -- batching rules of the elementwise ops, copies, factories
 * and the fused elementwise gradients (the op table's vmap column).
 *
 * Elementwise: the per-sample operands broadcast against each other, so
 * each batched operand gets its batch dim at the front and size-1 dims
 * after it up to the largest per-sample rank ([B, 1.., dims]); unbatched
 * operands stay as they are (broadcasting aligns them from the right).
 * One call of the op then computes every sample, element by element in
 * the same arithmetic as per sample (the results are bitwise equal).
 * Type promotion: a per-sample 0-dim operand has the lower "0-dim" tier,
 * which its batched [B] form would lose, so when one takes part the
 * operands are first converted to the per-sample result type (functorch's
 * binary rules do the same). */
#include <string.h>

#include "func_impl.h"
#include "../ops/ew.h"
#include "../ops/meta.h"

static int max_rank(const ct_bval *in, int nin, const ct_bval *dst) {
    int r = dst ? ct__bv_ndim(*dst) : 0;
    for (int k = 0; k < nin; k++)
        if (in[k].t && ct__bv_ndim(in[k]) > r) r = ct__bv_ndim(in[k]);
    return r;
}

/* The per-sample result type when a batched per-sample 0-dim operand takes
 * part (else -1): ct_result_type over meta stand-ins of the per-sample
 * operands (the first `skip` operands, where's condition, excluded). */
static int logical_type(const ct_bval *in, int nin, int skip) {
    bool need = false;
    for (int k = skip; k < nin; k++)
        if (in[k].t && in[k].bdim >= 0 && in[k].t->ndim == 1) need = true;
    if (!need) return -1;
    ct_tensor *st[8];
    int n = 0;
    for (int k = skip; k < nin && n < 8; k++) {
        if (!in[k].t) continue;
        if (in[k].bdim < 0) {
            st[n++] = ct_retain(in[k].t);
        } else {
            int64_t sh[CT_MAX_DIMS];
            int j = 0;
            for (int d = 0; d < in[k].t->ndim; d++)
                if (d != in[k].bdim) sh[j++] = in[k].t->sizes[d];
            st[n] = ct__alloc(sh, j, in[k].t->dtype, CT_META);
            if (!st[n]) {
                for (int i = 0; i < n; i++) ct_release(st[i]);
                return -2;
            }
            n++;
        }
    }
    ct_dtype dt = ct_result_type(st, n);
    for (int i = 0; i < n; i++) ct_release(st[i]);
    return (int)dt;
}

CT_VMAP_RULE(ct__vmap_ew) {
    const ct_gnode *n = c->n;
    int nin = n->nin;
    if (nin > 8) return ct__bv_error(c, CT_ERR_RUNTIME, "more than 8 operands");
    bool batched = false;
    for (int k = 0; k < nin; k++) batched = batched || in[k].bdim >= 0;
    if (c->dst && c->dst->bdim < 0 && batched)
        return ct__bv_error(c, CT_ERR_ARG, "an in-place op cannot write a value that depends on a batched "
                            "input into a tensor that is not batched (use the out-of-place op)");
    int r = max_rank(in, nin, c->dst);
    int skip = n->op == CT_OP_where ? 1 : 0;
    int lt = logical_type(in, nin, skip);
    if (lt == -2) return ct__bv_status();
    ct_tensor *x[8];
    for (int k = 0; k < nin; k++) {
        x[k] = in[k].t ? ct__bv_align(in[k], r) : NULL;
        if (in[k].t && !x[k]) return ct__bv_status();
        if (x[k] && lt >= 0 && k >= skip && x[k]->dtype != (ct_dtype)lt &&
            !(x[k]->flags & CT_TF_WRAPPED) && !(x[k] = ct_to_dtype(x[k], (ct_dtype)lt)))
            return ct__bv_status();
    }
    ct_tensor *d = NULL;
    if (c->dst) {
        if (c->dst->bdim >= 0) {
            /* the written tensor, batch dim first; its operand in[0] is the same value */
            if (!(d = ct__bv_front(*c->dst))) return ct__bv_status();
            for (int k = 0; k < nin; k++)
                if (n->in[k] == n->dst) x[k] = d;
        } else {
            d = c->dst->t;
        }
    }
    ct_tensor *y = ct__ew(n->op, x, nin, &n->args, d);
    if (!y) return ct__bv_status();
    out[0].t = y;
    out[0].bdim = (batched || (c->dst && c->dst->bdim >= 0)) ? 0 : -1;
    return CT_OK;
}

/* copy: a conversion (dtype, device, or to a given shape), or copy_ into
 * the written tensor (broadcasting the source into it). */
CT_VMAP_RULE(ct__vmap_copy) {
    const ct_gnode *n = c->n;
    if (c->dst) {
        ct_bval src = n->nin > 0 ? in[n->nin - 1] : (ct_bval){NULL, -1};
        if (c->dst->bdim < 0 && src.bdim >= 0)
            return ct__bv_error(c, CT_ERR_ARG, "an in-place op cannot write a value that depends on a "
                                "batched input into a tensor that is not batched (use the out-of-place op)");
        ct_tensor *d = ct__bv_front(*c->dst);
        ct_tensor *s = src.t ? ct__bv_align(src, ct__bv_ndim(*c->dst)) : NULL;
        if (!d || (src.t && !s)) return ct__bv_status();
        if (!s) { /* copy_ without a source operand: not recorded that way */
            c->fallback = true;
            return CT_OK;
        }
        if (!ct_copy_(d, s)) return ct__bv_status();
        out[0] = (ct_bval){d, c->dst->bdim >= 0 ? 0 : -1};
        return CT_OK;
    }
    if (n->nin != 1 || in[0].bdim < 0) {
        c->fallback = in[0].bdim >= 0;
        if (!c->fallback) return ct__bv_error(c, CT_ERR_RUNTIME, "an unbatched copy reached its rule");
        return CT_OK;
    }
    ct_args a = n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x) return ct__bv_status();
    if (a.p.copy.has_shape) {
        if (a.p.copy.shape_n + 1 > CT_MAX_DIMS) return ct__bv_error(c, CT_ERR_SHAPE, "too many dims");
        memmove(a.p.copy.shape + 1, a.p.copy.shape, sizeof(int64_t) * (size_t)a.p.copy.shape_n);
        a.p.copy.shape[0] = c->B;
        a.p.copy.shape_n++;
    }
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, &x, 1, &a);
    if (st) return st;
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* fill: a factory (the same for every sample), or fill_ of the written
 * tensor (every sample gets the value). */
CT_VMAP_RULE(ct__vmap_fill) {
    const ct_gnode *n = c->n;
    if (c->dst && c->dst->bdim >= 0) {
        const ct_p_factory *p = &n->args.p.factory;
        if (!ct_fill_(c->dst->t, p->is_int ? (double)p->int_value : p->value)) return ct__bv_status();
        out[0] = *c->dst;
        return CT_OK;
    }
    (void)in;
    c->fallback = true; /* unbatched: never reached (the graph runs it once) */
    return CT_OK;
}

/* arange, linspace, eye: no operands, the same for every sample */
CT_VMAP_RULE(ct__vmap_factory) {
    (void)in;
    ct_tensor *y;
    ct_status st = ct__exec_op(c->n->op, &y, 1, NULL, 0, &c->n->args, 0);
    if (st) return st;
    out[0] = (ct_bval){y, -1};
    return CT_OK;
}

/* ew_grad (g, t of one shape): both at [B, ...] */
CT_VMAP_RULE(ct__vmap_ew_grad) {
    ct_tensor *x[2];
    for (int k = 0; k < 2; k++) {
        x[k] = ct_contiguous(ct__bv_full(in[k], c->B));
        if (!x[k]) return ct__bv_status();
    }
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, x, 2, &c->n->args);
    if (st) return st;
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* masked_fill(x, mask): the result has x's shape with the mask broadcast
 * into it; x at [B, ...] when the mask is batched */
CT_VMAP_RULE(ct__vmap_masked_fill) {
    const ct_gnode *n = c->n;
    if (n->nin != 2) {
        c->fallback = true;
        return CT_OK;
    }
    if (c->dst) {
        /* x.masked_fill_(mask, value) */
        if (c->dst->bdim < 0 && in[1].bdim >= 0)
            return ct__bv_error(c, CT_ERR_ARG, "an in-place op cannot write a value that depends on a "
                                "batched input into a tensor that is not batched (use the out-of-place op)");
        ct_tensor *d = ct__bv_front(*c->dst);
        ct_tensor *m = d ? ct__bv_align(in[1], ct__bv_ndim(*c->dst)) : NULL;
        if (!m || !ct_masked_fill_(d, m, n->args.p.index.value)) return ct__bv_status();
        out[0] = (ct_bval){d, c->dst->bdim >= 0 ? 0 : -1};
        return CT_OK;
    }
    int r = ct__bv_ndim(in[0]) > ct__bv_ndim(in[1]) ? ct__bv_ndim(in[0]) : ct__bv_ndim(in[1]);
    ct_bval xv = in[0];
    ct_tensor *x = xv.bdim >= 0 ? ct__bv_align(xv, r) : (in[1].bdim >= 0 ? ct__bv_full(xv, c->B) : xv.t);
    if (x && xv.bdim < 0 && in[1].bdim >= 0 && ct__bv_ndim(xv) < r) {
        ct_bval fv = {x, 0};
        x = ct__bv_align(fv, r);
    }
    ct_tensor *m = ct__bv_align(in[1], r);
    if (!x || !m) return ct__bv_status();
    ct_tensor *y = ct_masked_fill(x, m, n->args.p.index.value);
    if (!y) return ct__bv_status();
    out[0] = (ct_bval){y, (in[0].bdim >= 0 || in[1].bdim >= 0) ? 0 : -1};
    return CT_OK;
}
