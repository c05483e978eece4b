/* inplace.c -- in-place ops under autograd.
 *
 * An in-place op that must be recorded first clones the old value of its
 * target (ct__inplace_begin), writes the target, and then records its node
 * with the clone as input and the target as output, so the target's history
 * is rebased onto the op (ct__finish_inplace).  When the target is a view,
 * its base gets a CopySlices node (the base's gradient with the view's
 * region going through the op), and the view then reads its history from the
 * base, as in PyTorch. */
#include "autograd_impl.h"

/* old: t's value before the op (with t's tangents, the clone being an op);
 * ag: the op is recorded for reverse mode; fw: it has tangents to update */
typedef struct { ct_tensor *t, *old; bool ag, fw; } pending;
static _Thread_local pending tl_pend[16];
static _Thread_local int tl_npend;

static ct_tensor *root_base(ct_tensor *t) {
    ct_ag_meta *m = ct__ag_peek(t);
    return m && m->base ? m->base : NULL;
}

ct_status ct__ag_inplace_begin(ct_tensor *t, ct_tensor *const *in, int nin, const char *opname) {
    bool fw = ct__fw_nlevels && (ct__fw_any(&t, 1) || ct__fw_any(in, nin));
    bool ag = false;
    if (ct_is_grad_enabled()) {
        ct_ag_meta *m = ct__ag_peek(t);
        ct_tensor *base = root_base(t);
        bool t_rg = m && m->requires_grad;
        if (t_rg && !m->grad_fn && !m->weak_fn && !base)
            return ct__error_status(CT_ERR_AUTOGRAD, "%s: a leaf Variable that requires grad is being "
                                    "used in an in-place operation.", opname);
        if (base && ct__ag_requires_grad(base) && ct_is_leaf(base))
            return ct__error_status(CT_ERR_AUTOGRAD, "%s: a view of a leaf Variable that requires grad is "
                                    "being used in an in-place operation.", opname);
        ag = t_rg || ct__ag_needed(in, nin);
        if (ag && ct_is_inference(t))
            return ct__error_status(CT_ERR_AUTOGRAD, "%s: inplace update to inference tensor outside "
                                    "InferenceMode is not allowed.", opname);
    }
    if (!ag && !fw) return CT_OK;
    if (tl_npend == 16)
        return ct__error_status(CT_ERR_RUNTIME, "%s: in-place ops nested too deeply", opname);
    ct_scope s = ct_scope_begin();
    ct_tensor *old = ct_clone(t);
    ct_retain(old);
    ct_scope_end(s);
    if (!old) return ct_last_error_code();
    tl_pend[tl_npend++] = (pending){t, old, ag, fw};
    return CT_OK;
}

/* Drops a pending clone after a failed in-place op. */
void ct__ag_inplace_abort(ct_tensor *t) {
    if (tl_npend && tl_pend[tl_npend - 1].t == t) ct_release(tl_pend[--tl_npend].old);
}

ct_tensor *ct__inplace_pending(ct_tensor *t) {
    if (tl_npend && tl_pend[tl_npend - 1].t == t) return tl_pend[tl_npend - 1].old;
    return NULL;
}

/* ---- CopySlices and the view-from-base node -------------------------------- */
static ct_tensor *flat_like_storage(ct_tensor *base, ct_dtype dt) {
    int64_t n = (int64_t)(base->storage->nbytes / ct_dtype_size(base->dtype));
    return ct_zeros_on(CT_SHAPE(n), dt, base->storage->device);
}

/* grad of base from grad of a view of it: zeros with the view's region = gv */
ct_tensor *ct__as_strided_backward(ct_tensor *gv, ct_tensor *base, int vnd, const int64_t *vsizes,
                                   const int64_t *vstrides, int64_t voffset) {
    ct_tensor *flat = flat_like_storage(base, gv->dtype);
    ct_tensor *region = ct_as_strided(flat, vsizes, vstrides, vnd, voffset);
    if (!region || !ct_copy_(region, gv)) return NULL;
    return ct_as_strided(flat, base->sizes, base->strides, base->ndim, base->offset);
}

ct_status ct__copy_slices_backward(ct_node *n, ct_tensor **gout, ct_tensor **gin) {
    ct_tensor *gb = gout[0];
    ct_tensor *base = n->in[0];
    ct_tensor *flat = flat_like_storage(base, gb->dtype);
    ct_tensor *bview = ct_as_strided(flat, base->sizes, base->strides, base->ndim, base->offset);
    if (!bview || !ct_copy_(bview, gb)) return ct_last_error_code();
    ct_tensor *region = ct_as_strided(flat, n->vsizes, n->vstrides, n->vnd, n->voffset);
    gin[1] = ct_clone(region);
    if (!gin[1] || !ct_fill_(region, 0.0)) return ct_last_error_code();
    gin[0] = ct_clone(bview);
    return gin[0] ? CT_OK : ct_last_error_code();
}

/* VJP of the view-from-base node: in[0] is the base (shape only). */
static ct_status vjp_view_of_base(const ct_vjp_ctx *c, ct_tensor *const *gout, ct_tensor **gin) {
    const ct_node *n = c->node;
    gin[0] = ct__as_strided_backward(gout[0], c->in[0], n->vnd, n->vsizes, n->vstrides, n->voffset);
    return gin[0] ? CT_OK : ct_last_error_code();
}

/* After an in-place op recorded on view t of base: base <- CopySlices. */
static ct_status rebase_view(ct_tensor *t, ct_tensor *base) {
    extern ct_node *ct__ag_new_node(int kind, int nin, int nout, const char *name);
    extern ct_edge ct__ag_gradient_edge(ct_tensor *t);
    ct_ag_meta *tm = ct__ag_peek(t);
    ct_node *cs = ct__ag_new_node(CT_NODE_COPY_SLICES, 2, 1, "CopySlices");
    if (!cs) return ct_last_error_code();
    cs->vnd = t->ndim;
    memcpy(cs->vsizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(cs->vstrides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    cs->voffset = t->offset;
    cs->next[0] = ct__ag_gradient_edge(base);
    cs->next[1].node = tm->grad_fn; /* take over t's reference */
    cs->next[1].nr = tm->output_nr;
    tm->grad_fn = NULL;
    cs->in[0] = ct__view_of(base, base->sizes, base->strides, base->ndim, base->offset);
    cs->in_ver[0] = -1;
    cs->out_dtype[0] = base->dtype;
    cs->out_ndim[0] = base->ndim;
    memcpy(cs->out_sizes[0], base->sizes, sizeof(int64_t) * (size_t)base->ndim);
    ct_ag_meta *bm = ct__ag_meta(base);
    if (!bm) { ct__ag_node_release(cs); return CT_ERR_OOM; }
    ct__ag_node_release(bm->grad_fn);
    bm->grad_fn = cs; /* cs's first reference */
    bm->output_nr = 0;
    bm->requires_grad = true;
    /* t now reads its history from the base */
    return ct__ag_view_from_base(t, base);
    return CT_OK;
}

/* t's grad_fn <- AsStridedBackward over base's current history. */
ct_status ct__ag_view_from_base(ct_tensor *t, ct_tensor *base) {
    ct_ag_meta *tm = ct__ag_meta(t);
    if (!tm) return CT_ERR_OOM;
    ct_node *vn = ct__ag_new_node(CT_NODE_OP, 1, 1, "AsStridedBackward0");
    if (!vn) return ct_last_error_code();
    vn->op = CT_OP_as_strided;
    vn->vnd = t->ndim;
    memcpy(vn->vsizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(vn->vstrides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    vn->voffset = t->offset;
    vn->next[0] = ct__ag_gradient_edge(base);
    vn->in[0] = ct__view_of(base, base->sizes, base->strides, base->ndim, base->offset);
    vn->in_ver[0] = -1;
    vn->out_dtype[0] = t->dtype;
    vn->out_ndim[0] = t->ndim;
    memcpy(vn->out_sizes[0], t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    vn->view_vjp = vjp_view_of_base;
    ct__ag_node_release(tm->grad_fn);
    tm->grad_fn = vn;
    tm->output_nr = 0;
    tm->requires_grad = true;
    tm->base_fn_seq = ct__ag_fn_seq(base);
    return CT_OK;
}

ct_tensor *ct__ag_finish_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin, const ct_args *a) {
    if (!t) return NULL;
    ct__bump_version(t);
    pending p = {NULL, NULL, false, false};
    if (tl_npend && tl_pend[tl_npend - 1].t == t) p = tl_pend[--tl_npend];
    ct_tensor *old = p.old;
    if (!old) {
        if (ct_is_grad_enabled() && (ct__ag_requires_grad(t) || ct__ag_needed(in, nin))) {
            ct__error(CT_ERR_AUTOGRAD, "%s_: this in-place op does not support autograd yet (its "
                      "target or an input requires grad)", ct__op_info[op].name);
            return NULL;
        }
        if (ct__fw_nlevels && (ct__fw_any(&t, 1) || ct__fw_any(in, nin))) {
            ct__error(CT_ERR_AUTOGRAD, "%s_: this in-place op does not support forward AD yet (its "
                      "target or an input has a tangent)", ct__op_info[op].name);
            return NULL;
        }
        return t;
    }
    /* the old value stands in for t among the inputs; when t is not an
     * input (fill_, copy_, normal_, ...) it is appended, and the op's VJP
     * leaves its gradient empty: the old values were overwritten */
    ct_tensor *ins[16];
    int n = nin < 15 ? nin : 15, found = 0;
    for (int k = 0; k < n; k++) {
        ins[k] = in[k] == t ? old : in[k];
        if (in[k] == t) found = 1;
    }
    if (!found) ins[n++] = old;
    ct_tensor *outs[1] = {t};
    ct_status st = p.ag ? ct__ag_record(op, outs, 1, ins, n, a) : CT_OK;
    if (st == CT_OK && p.ag && op == CT_OP_copy && ct__ag_peek(t) && ct__ag_peek(t)->grad_fn)
        snprintf(ct__ag_peek(t)->grad_fn->name, sizeof ct__ag_peek(t)->grad_fn->name, "CopyBackwards");
    if (st == CT_OK && p.fw) st = ct__fw_inplace(op, t, ins, n, a, !found);
    ct_release(old);
    if (st) return NULL;
    ct_tensor *base = root_base(t);
    if (p.ag && base && base != t && ct__ag_peek(t)->grad_fn) {
        if (rebase_view(t, base)) return NULL;
    }
    return t;
}
