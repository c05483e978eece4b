/* derivs_reduce.c -- derivatives of reductions, scans, softmax and sorting.
 * Reductions record the reduced dims in a->v[3][d] (1 = reduced) and
 * keepdim in a->i[6] (src/ops/reduce.c). */
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])

/* g with the reduced dims restored (size 1), ready to broadcast against x */
static ct_tensor *unreduce(ct_tensor *g, const ct_tensor *x, const ct_args *a) {
    if (a->i[6]) return g;
    for (int d = 0; d < x->ndim && g; d++)
        if (a->v[3][d]) g = ct_unsqueeze(g, d);
    return g;
}

static int64_t reduced_count(const ct_tensor *x, const ct_args *a) {
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (a->v[3][d]) n *= x->sizes[d];
    return n;
}

static ct_status vjp_sum(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = c->in[0];
    if (NEED(0)) gin[0] = ct_to_dtype(ct_expand(unreduce(g[0], x, c->a), x->sizes, x->ndim), x->dtype);
    return CT_OK;
}

static ct_status vjp_mean(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x = c->in[0];
    if (NEED(0)) {
        ct_tensor *e = ct_expand(unreduce(g[0], x, c->a), x->sizes, x->ndim);
        gin[0] = ct_to_dtype(ct_div_scalar(e, (double)reduced_count(x, c->a)), x->dtype);
    }
    return CT_OK;
}

void ct__vjp_register_reduce(void) {
    CT_VJP(sum, vjp_sum);   CT_VJP_READS(sum, 0);
    CT_VJP(mean, vjp_mean); CT_VJP_READS(mean, 0);
}
