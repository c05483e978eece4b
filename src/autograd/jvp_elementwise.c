/* jvp_elementwise.c -- forward-mode rules of the elementwise ops.
 *
 * An elementwise op out[i] = f(x[i], y[i], ...) (inputs broadcast to out's
 * shape) has a diagonal Jacobian in each input: d out[i] = sum_k
 * f_k(i) * dx_k[i].  A diagonal matrix is its own transpose, so the op's
 * VJP applied to an incoming gradient of out's shape computes exactly
 * f_k(i) * g[i] -- the JVP once g is input k's tangent broadcast to out's
 * shape.  ct__jvp_ew runs the op's own VJP formula (derivs_elementwise.c,
 * which already handles every branch point: relu at 0, clamp at its
 * bounds, pow at 0, ...) once per input with a tangent, with every input's
 * geometry set to out's shape, dtype and device so that nothing is summed
 * over broadcast dims or cast back (and copy's rule, for a transfer
 * between devices, moves the tangent to out's device).  One formula for both modes; they cannot
 * drift.  (Real dtypes: for complex ones the VJP conjugates.) */
#include "autograd_impl.h"

CT_JVP_RULE(ct__jvp_ew) {
    ct_tensor *o = c->out[0];
    int nin = c->nin;
    if (!o) return CT_OK;
    if (nin > 4) return ct__error_status(CT_ERR_RUNTIME, "%s: forward AD: too many inputs", ct__op_info[c->op].name);
    if (ct_dtype_is_complex(o->dtype))
        return ct__jvp_dvjp(c, tin, tout); /* the VJP conjugates: not its own transpose */
    ct_node n;
    memset(&n, 0, sizeof n);
    n.kind = CT_NODE_OP;
    n.op = c->op;
    snprintf(n.name, sizeof n.name, "%s", ct__op_info[c->op].name);
    n.nin = nin;
    n.nout = 1;
    n.args = (ct_args *)c->a;
    ct_geom geo[4];
    ct_dtype odt = o->dtype;
    int ond = o->ndim;
    int64_t osz[1][CT_MAX_DIMS];
    memcpy(osz[0], o->sizes, sizeof(int64_t) * (size_t)o->ndim);
    n.out_dtype = &odt;
    n.out_ndim = &ond;
    n.out_sizes = osz;
    for (int k = 0; k < nin; k++) {
        memset(&geo[k], 0, sizeof geo[k]);
        geo[k].ndim = c->in[k] ? o->ndim : -1;
        geo[k].dtype = odt;
        geo[k].device = o->storage->device;
        geo[k].device_index = o->storage->device_index;
        memcpy(geo[k].sizes, o->sizes, sizeof(int64_t) * (size_t)o->ndim);
    }
    n.in_geom = geo;
    ct_tensor *acc = NULL;
    ct_vjp_fn vjp = (ct_vjp_fn)ct__op_info[c->op].vjp;
    for (int k = 0; k < nin; k++) {
        if (!tin[k]) continue;
        bool needs[4] = {false, false, false, false};
        needs[k] = true;
        ct_tensor *gin[4] = {NULL, NULL, NULL, NULL};
        ct_tensor *g = ct_to_dtype(ct_expand(tin[k], o->sizes, o->ndim), odt);
        if (!g) return ct_last_error_code();
        ct_vjp_ctx vc = {&n, c->in, nin, c->out, 1, c->a, needs};
        ct_tensor *gs[1] = {g};
        ct_status st = vjp(&vc, gs, gin);
        if (st) return ct_last_error_code() ? ct_last_error_code() : st;
        if (!gin[k]) continue;
        acc = acc ? ct_add(acc, gin[k]) : gin[k];
        if (!acc) return ct_last_error_code();
    }
    tout[0] = acc;
    return CT_OK;
}

/* ops whose VJP is zero (sign, floor, round, ...): the tangent is zero */
CT_JVP_RULE(ct__jvp_zero) {
    (void)c;
    (void)tin;
    (void)tout;
    return CT_OK;
}
