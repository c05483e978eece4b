/* jvp_view.c -- forward-mode rules of the view ops and of cat: the
 * tangent of a view is the same view of the tangent (the op rerun on the
 * tangent with the same parameters, through the op layer as the compiled
 * graphs replay views); as_strided first lays the tangent out like the
 * primal (its strides and offset are absolute in the storage). */
#include "autograd_impl.h"
#include "../ops/meta.h"

CT_JVP_RULE(ct__jvp_view) {
    ct_tensor *t = tin[0];
    if (!t) return CT_OK;
    if (c->op == CT_OP_view) { /* a view of the primal may need strides the tangent lacks */
        tout[0] = ct_reshape(t, c->out[0]->sizes, c->out[0]->ndim);
    } else {
        ct_tensor *ins[1] = {t};
        tout[0] = ct__op(c->op, ins, 1, c->a);
    }
    return tout[0] ? CT_OK : ct_last_error_code();
}

CT_JVP_RULE(ct__jvp_as_strided) {
    ct_tensor *t = tin[0], *o = c->out[0];
    if (!t) return CT_OK;
    ct_tensor *tl = ct__fw_like_meta(t, c->in[0]);
    tout[0] = tl ? ct_as_strided(tl, o->sizes, o->strides, o->ndim, o->offset) : NULL;
    return tout[0] ? CT_OK : ct_last_error_code();
}

CT_JVP_RULE(ct__jvp_cat) {
    int n = c->nin;
    ct_tensor *local[16] = {0}, **ts = n <= 16 ? local : malloc(sizeof *ts * (size_t)n);
    if (!ts) return ct__error_status(CT_ERR_OOM, "cat: forward AD: out of memory");
    ct_status st = CT_OK;
    for (int k = 0; k < n && st == CT_OK; k++) {
        ts[k] = tin[k] ? tin[k] : ct_zeros_like(c->in[k]);
        if (!ts[k]) st = ct_last_error_code();
        else if (ts[k]->dtype != c->out[0]->dtype && !(ts[k] = ct_to_dtype(ts[k], c->out[0]->dtype)))
            st = ct_last_error_code();
    }
    if (st == CT_OK && !(tout[0] = ct_cat(ts, n, c->a->p.index.dim))) st = ct_last_error_code();
    if (ts != local) free(ts);
    return st;
}
