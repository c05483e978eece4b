/* derivs.c -- helpers shared by the derivative files (the rules themselves
 * are the op table's vjp column: src/ops/ops.def, rules.h). */
#include "autograd_impl.h"

ct_tensor *ct__sum_to(ct_tensor *g, const int64_t *shape, int ndim) {
    if (!g) return NULL;
    if (g->ndim == ndim && memcmp(g->sizes, shape, sizeof(int64_t) * (size_t)ndim) == 0) return g;
    int lead = g->ndim - ndim;
    if (lead < 0) return ct__error(CT_ERR_SHAPE, "sum_to: gradient %s has fewer dims than %d", ct__tshape(g), ndim);
    int64_t dims[CT_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < g->ndim; i++) {
        if (i < lead) dims[nd++] = i;
        else if (shape[i - lead] == 1 && g->sizes[i] != 1) dims[nd++] = i;
    }
    ct_tensor *r = nd ? ct_sum(g, dims, nd, true) : g;
    if (!r) return NULL;
    if (lead) r = ct_reshape(r, shape, ndim);
    else if (r->ndim != ndim || memcmp(r->sizes, shape, sizeof(int64_t) * (size_t)ndim)) r = ct_reshape(r, shape, ndim);
    return r;
}

ct_tensor *ct__grad_for(ct_tensor *g, const ct_tensor *t) {
    if (!g || !t) return NULL;
    ct_tensor *r = ct__sum_to(g, t->sizes, t->ndim);
    if (r && r->dtype != t->dtype) {
        /* a real input of a complex op gets the real part */
        r = ct_to_dtype(r, t->dtype);
    }
    return r;
}

ct_tensor *ct__grad_to(ct_tensor *g, const ct_geom *t) {
    if (!g || !t) return NULL;
    ct_tensor *r = ct__sum_to(g, t->sizes, t->ndim);
    if (r && r->dtype != t->dtype) r = ct_to_dtype(r, t->dtype);
    return r;
}

/* on t's device and index (not the thread's current index, which the last
 * op run left: a backward interleaving nodes of two devices) */
ct_tensor *ct__zeros_geom(const ct_geom *t, ct_dtype dt) {
    if (!t) return NULL;
    if (t->device == CT_CPU) return ct_zeros_on(t->sizes, t->ndim, dt, CT_CPU); /* meta while tracing */
    return ct_zero_(ct_empty_dev(t->sizes, t->ndim, dt, CT_DEV(t->device, t->device_index)));
}

ct_tensor *ct__eye_on(int64_t n, int64_t m, ct_dtype dt, ct_device dev) {
    ct_tensor *z = ct_zeros_on(CT_SHAPE(n, m), dt, dev);
    return z && ct_fill_(ct_diagonal(z, 0, 0, 1), 1.0) ? z : NULL;
}

ct_tensor *ct__geom_tensor(const ct_geom *t) {
    if (!t) return NULL;
    ct_tensor *z = ct_zeros_on(NULL, 0, t->dtype, t->device);
    if (z && t->device != CT_CPU) z = ct_to_dev(z, CT_DEV(t->device, t->device_index));
    return ct_expand(z, t->sizes, t->ndim);
}
