/* derivs_elementwise.c -- derivatives of elementwise ops, written with
 * public ops (so they are differentiable themselves).  Inputs of binary ops
 * may have been broadcast: ct__grad_for sums each gradient back to its
 * input's shape and dtype. */
#include <math.h>

#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define IN(k) (c->in[k])
#define OUT(k) (c->out[k])

static ct_status vjp_add(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(g[0], IN(0));
    if (NEED(1)) gin[1] = ct__grad_for(c->a->i[0] ? ct_mul_scalar(g[0], c->a->f[0]) : g[0], IN(1));
    return CT_OK;
}
static ct_status vjp_sub(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(g[0], IN(0));
    if (NEED(1)) gin[1] = ct__grad_for(ct_mul_scalar(g[0], c->a->i[0] ? -c->a->f[0] : -1.0), IN(1));
    return CT_OK;
}
static ct_status vjp_mul(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(ct_mul(g[0], IN(1)), IN(0));
    if (NEED(1)) gin[1] = ct__grad_for(ct_mul(g[0], IN(0)), IN(1));
    return CT_OK;
}
static ct_status vjp_div(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(ct_div(g[0], IN(1)), IN(0));
    if (NEED(1)) gin[1] = ct__grad_for(ct_neg(ct_div(ct_mul(g[0], IN(0)), ct_mul(IN(1), IN(1)))), IN(1));
    return CT_OK;
}
static ct_status vjp_neg(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(ct_neg(g[0]), IN(0));
    return CT_OK;
}
static ct_status vjp_exp(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_for(ct_mul(g[0], OUT(0)), IN(0));
    return CT_OK;
}

void ct__vjp_register_elementwise(void) {
    CT_VJP(add, vjp_add);   CT_VJP_READS(add, 0);
    CT_VJP(sub, vjp_sub);   CT_VJP_READS(sub, 0);
    CT_VJP(mul, vjp_mul);   CT_VJP_READS(mul, CT_READS_IN(0) | CT_READS_IN(1));
    CT_VJP(div, vjp_div);   CT_VJP_READS(div, CT_READS_IN(0) | CT_READS_IN(1));
    CT_VJP(neg, vjp_neg);   CT_VJP_READS(neg, 0);
    CT_VJP(exp, vjp_exp);   CT_VJP_READS(exp, CT_READS_OUT(0));
}
