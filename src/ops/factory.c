/* factory.c -- tensor factories. */
#include <math.h>

#include "op_table.h"

static ct_tensor *filled(const char *op, const int64_t *shape, int ndim, ct_dtype dt,
                         ct_device dev, double v) {
    (void)op;
    ct_tensor *t = ct__alloc(shape, ndim, dt, dev);
    if (!t) return NULL;
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = CT_OP_fill;
    a.p.factory.value = v;
    ct_tensor *o[1] = {t};
    if (ct__dispatch(CT_OP_fill, o, 1, NULL, 0, &a)) { ct_release(t); return NULL; }
    return ct__finish(CT_OP_fill, t, NULL, 0, &a);
}

/* Factories without a device argument create their tensors on the
 * thread's default device (ct_set_default_device). */
ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dt) {
    return ct__finish(CT_OP_fill, ct__alloc(shape, ndim, dt, ct_get_default_device()), NULL, 0, NULL);
}
ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    return ct__finish(CT_OP_fill, ct__alloc(shape, ndim, dt, dev), NULL, 0, NULL);
}
ct_tensor *ct_zeros(const int64_t *shape, int ndim, ct_dtype dt) {
    return filled("zeros", shape, ndim, dt, ct_get_default_device(), 0.0);
}
ct_tensor *ct_zeros_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    return filled("zeros", shape, ndim, dt, dev, 0.0);
}
ct_tensor *ct_ones(const int64_t *shape, int ndim, ct_dtype dt) {
    return filled("ones", shape, ndim, dt, ct_get_default_device(), 1.0);
}
ct_tensor *ct_ones_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    return filled("ones", shape, ndim, dt, dev, 1.0);
}
ct_tensor *ct_full(const int64_t *shape, int ndim, double value, ct_dtype dt) {
    return filled("full", shape, ndim, dt, ct_get_default_device(), value);
}
ct_tensor *ct_full_on(const int64_t *shape, int ndim, double value, ct_dtype dt, ct_device dev) {
    return filled("full", shape, ndim, dt, dev, value);
}
ct_tensor *ct_scalar(double v, ct_dtype dt) { return filled("scalar", NULL, 0, dt, ct_get_default_device(), v); }

static ct_tensor *wrapped(ct_dtype dt, double re, double im, int64_t iv, int is_int) {
    ct_tensor *t = ct__alloc(NULL, 0, dt, CT_CPU);
    if (!t) return NULL;
    if (is_int) ct__store_i64(ct__ptr(t), dt, iv);
    else if (dt == CT_C128) { ((double *)ct__ptr(t))[0] = re; ((double *)ct__ptr(t))[1] = im; }
    else ct__store_f64(ct__ptr(t), dt, re);
    t->flags |= CT_TF_WRAPPED;
    return ct__register(t);
}
ct_tensor *ct_wrap(double v) { return wrapped(CT_F64, v, 0, 0, 0); }
ct_tensor *ct_wrap_int(int64_t v) { return wrapped(CT_I64, 0, 0, v, 1); }
ct_tensor *ct_wrap_bool(bool v) { return wrapped(CT_BOOL, 0, 0, v, 1); }
ct_tensor *ct_wrap_complex(double re, double im) { return wrapped(CT_C128, re, im, 0, 0); }

ct_tensor *ct_from_array(const void *data, const int64_t *shape, int ndim, ct_dtype dt) {
    if (!data && ct__shape_numel("from_array", shape, ndim) > 0)
        return ct__error(CT_ERR_NULL, "from_array: data is NULL");
    ct_tensor *t = ct__alloc(shape, ndim, dt, CT_CPU);
    if (!t) return NULL;
    size_t n = (size_t)ct_numel(t) * ct_dtype_size(dt);
    if (n) memcpy(ct__ptr(t), data, n);
    return ct__finish(CT_OP_copy, t, NULL, 0, NULL);
}

ct_tensor *ct_from_doubles(const double *data, const int64_t *shape, int ndim, ct_dtype dt) {
    if (!data && ct__shape_numel("from_doubles", shape, ndim) > 0)
        return ct__error(CT_ERR_NULL, "from_doubles: data is NULL");
    ct_tensor *t = ct__alloc(shape, ndim, dt, CT_CPU);
    if (!t) return NULL;
    int64_t n = ct_numel(t);
    if (n) ct__convert(ct__ptr(t), dt, (int64_t)ct_dtype_size(dt), data, CT_F64, 8, n);
    return ct__finish(CT_OP_copy, t, NULL, 0, NULL);
}

ct_tensor *ct_empty_like(ct_tensor *t) {
    CT_NULLCHECK(t);
    return ct_empty_on(t->sizes, t->ndim, t->dtype, t->storage->device);
}
ct_tensor *ct_zeros_like(ct_tensor *t) {
    CT_NULLCHECK(t);
    return filled("zeros_like", t->sizes, t->ndim, t->dtype, t->storage->device, 0.0);
}
ct_tensor *ct_ones_like(ct_tensor *t) {
    CT_NULLCHECK(t);
    return filled("ones_like", t->sizes, t->ndim, t->dtype, t->storage->device, 1.0);
}
ct_tensor *ct_full_like(ct_tensor *t, double v) {
    CT_NULLCHECK(t);
    return filled("full_like", t->sizes, t->ndim, t->dtype, t->storage->device, v);
}

ct_tensor *ct_arange(double start, double end, double step, ct_dtype dt) {
    if (step == 0) return ct__error(CT_ERR_ARG, "arange: step must be nonzero");
    if (!isfinite(start) || !isfinite(end) || !isfinite(step))
        return ct__error(CT_ERR_ARG, "arange: start, end and step must be finite");
    if ((step > 0 && start > end) || (step < 0 && start < end))
        return ct__error(CT_ERR_ARG, "arange: upper bound and larger bound inconsistent with step sign "
                         "(start %g, end %g, step %g)", start, end, step);
    double nd = ceil((end - start) / step);
    if (nd > 9.0e15) return ct__error(CT_ERR_OVERFLOW, "arange: too many elements (%g)", nd);
    int64_t n = (int64_t)nd;
    ct_tensor *t = ct__alloc(CT_SHAPE(n), dt, ct_get_default_device());
    if (!t) return NULL;
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = CT_OP_arange;
    a.p.factory.start = start; a.p.factory.end = end; a.p.factory.step = step;
    ct_tensor *o[1] = {t};
    if (ct__dispatch(CT_OP_arange, o, 1, NULL, 0, &a)) { ct_release(t); return NULL; }
    return ct__finish(CT_OP_arange, t, NULL, 0, &a);
}

static ct_tensor *linlog(const char *op, double start, double end, int64_t steps, double base,
                         int logsp, ct_dtype dt) {
    if (steps < 0) return ct__error(CT_ERR_ARG, "%s: number of steps must be non-negative, got %lld",
                                    op, (long long)steps);
    ct_tensor *t = ct__alloc(CT_SHAPE(steps), dt, ct_get_default_device());
    if (!t) return NULL;
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = CT_OP_linspace;
    a.p.factory.start = start; a.p.factory.end = end; a.p.factory.base = base;
    a.p.factory.logspace = logsp;
    ct_tensor *o[1] = {t};
    if (ct__dispatch(CT_OP_linspace, o, 1, NULL, 0, &a)) { ct_release(t); return NULL; }
    return ct__finish(CT_OP_linspace, t, NULL, 0, &a);
}
ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dt) {
    return linlog("linspace", start, end, steps, 10.0, 0, dt);
}
ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dt) {
    return linlog("logspace", start, end, steps, base, 1, dt);
}

ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dt) {
    if (m < 0) m = n;
    if (n < 0) return ct__error(CT_ERR_ARG, "eye: n must be non-negative, got %lld", (long long)n);
    ct_tensor *t = ct__alloc(CT_SHAPE(n, m), dt, ct_get_default_device());
    if (!t) return NULL;
    ct_tensor *o[1] = {t};
    if (ct__dispatch(CT_OP_eye, o, 1, NULL, 0, NULL)) { ct_release(t); return NULL; }
    return ct__finish(CT_OP_eye, t, NULL, 0, NULL);
}
