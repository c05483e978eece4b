/* derivs_index.c -- derivatives of the copying and indexing ops. */
#include "autograd_impl.h"

#define NEED(k) (c->needs[k])

/* cat: each input gets its slice of the gradient (legacy empty 1-D inputs,
 * which cat skips, get an empty gradient) */
static ct_status vjp_cat(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t d = c->a->i[0], off = 0;
    for (int k = 0; k < c->nin; k++) {
        ct_tensor *x = c->in[k];
        bool skipped = x->ndim == 1 && x->sizes[0] == 0 && g[0]->ndim != 1;
        if (skipped) {
            if (NEED(k)) gin[k] = ct_zeros(x->sizes, x->ndim, x->dtype);
            continue;
        }
        int64_t len = x->sizes[d];
        if (NEED(k)) gin[k] = ct__grad_for(ct_narrow(g[0], d, off, len), x);
        off += len;
    }
    return CT_OK;
}

void ct__vjp_register_index(void) {
    CT_VJP(cat, vjp_cat);
    CT_VJP_READS(cat, 0);
}
