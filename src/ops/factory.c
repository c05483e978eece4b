/* factory.c -- tensor factories. */
#include <math.h>

#include "../core/device.h"
#include "meta.h"

/* meta -> allocate -> fill with v (empty: no fill) -> record, as fill */
static ct_tensor *filled_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev, double v,
                            bool fill) {
    if (ndim < 0 || ndim > CT_MAX_DIMS || (ndim > 0 && !shape))
        return ct__alloc(shape, ndim, dt, dev); /* NULL and its error ("ndim", "shape is NULL") */
    dev = ct__trace_dev(dev);
    ct_args a = ct__fill_args(v, dt, dev, shape, ndim);
    a.p.factory.empty = !fill;
    ct_meta m;
    if (ct__meta_run(CT_OP_fill, &m, 1, NULL, 0, &a)) return NULL;
    ct_tensor *t = ct__meta_new(&m, NULL);
    if (!t) return NULL;
    ct_tensor *o[1] = {t};
    if (fill && ct__dispatch(CT_OP_fill, o, 1, NULL, 0, &a)) { ct_release(t); return NULL; }
    return ct__finish(CT_OP_fill, t, NULL, 0, &a);
}

static ct_tensor *filled(const char *op, const int64_t *shape, int ndim, ct_dtype dt,
                         ct_device dev, double v) {
    (void)op;
    return filled_on(shape, ndim, dt, dev, v, true);
}

/* Factories without a device argument create their tensors on the
 * thread's default device (ct_set_default_device). */
ct_tensor *ct_empty(const int64_t *shape, int ndim, ct_dtype dt) {
    return filled_on(shape, ndim, dt, ct_get_default_device(), 0.0, false);
}
ct_tensor *ct_empty_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    return filled_on(shape, ndim, dt, dev, 0.0, false);
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
/* the *_dev forms: the whole device checked and made the thread's current
 * one of its type (where the storage is allocated), then its type */
static bool dev_ok(const char *op, ct_dev d) {
    if (ct__device_check(op, d.type, d.index) != CT_OK) return false;
    ct__device_set_current(d.type, d.index);
    return true;
}
ct_tensor *ct_empty_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev) {
    return dev_ok("empty", dev) ? ct_empty_on(shape, ndim, dt, dev.type) : NULL;
}
ct_tensor *ct_zeros_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev) {
    return dev_ok("zeros", dev) ? ct_zeros_on(shape, ndim, dt, dev.type) : NULL;
}
ct_tensor *ct_ones_dev(const int64_t *shape, int ndim, ct_dtype dt, ct_dev dev) {
    return dev_ok("ones", dev) ? ct_ones_on(shape, ndim, dt, dev.type) : NULL;
}
ct_tensor *ct_full_dev(const int64_t *shape, int ndim, double value, ct_dtype dt, ct_dev dev) {
    return dev_ok("full", dev) ? ct_full_on(shape, ndim, value, dt, dev.type) : NULL;
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
    ct_args a = ct__copy_args(dt, CT_CPU, t->sizes, t->ndim);
    return ct__finish(CT_OP_copy, t, NULL, 0, &a);
}

ct_tensor *ct_from_doubles(const double *data, const int64_t *shape, int ndim, ct_dtype dt) {
    if (!data && ct__shape_numel("from_doubles", shape, ndim) > 0)
        return ct__error(CT_ERR_NULL, "from_doubles: data is NULL");
    ct_tensor *t = ct__alloc(shape, ndim, dt, CT_CPU);
    if (!t) return NULL;
    int64_t n = ct_numel(t);
    if (n) ct__convert(ct__ptr(t), dt, (int64_t)ct_dtype_size(dt), data, CT_F64, 8, n);
    ct_args a = ct__copy_args(dt, CT_CPU, t->sizes, t->ndim);
    return ct__finish(CT_OP_copy, t, NULL, 0, &a);
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

/* arange, linspace, eye: the result [n] / [steps] / [n, m] of the params'
 * dtype on the default device (they take no device argument). */
CT_META_FN(ct__meta_factory) {
    (void)nout; (void)in; (void)nin;
    const ct_p_factory *p = &a->p.factory;
    int64_t sizes[2];
    int ndim = 1;
    if (a->op == CT_OP_arange) {
        double start = p->start, end = p->end, step = p->step;
        if (step == 0) return ct__error_status(CT_ERR_ARG, "arange: step must be nonzero");
        if (!isfinite(start) || !isfinite(end) || !isfinite(step))
            return ct__error_status(CT_ERR_ARG, "arange: start, end and step must be finite");
        if ((step > 0 && start > end) || (step < 0 && start < end))
            return ct__error_status(CT_ERR_ARG, "arange: upper bound and larger bound inconsistent with "
                                    "step sign (start %g, end %g, step %g)", start, end, step);
        double nd = ceil((end - start) / step);
        if (nd > 9.0e15) return ct__error_status(CT_ERR_OVERFLOW, "arange: too many elements (%g)", nd);
        sizes[0] = (int64_t)nd;
    } else if (a->op == CT_OP_linspace) {
        if (p->steps < 0)
            return ct__error_status(CT_ERR_ARG, "%s: number of steps must be non-negative, got %lld",
                                    p->logspace ? "logspace" : "linspace", (long long)p->steps);
        sizes[0] = p->steps;
    } else { /* eye */
        if (p->n < 0) return ct__error_status(CT_ERR_ARG, "eye: n must be non-negative, got %lld", (long long)p->n);
        sizes[0] = p->n;
        sizes[1] = p->m < 0 ? p->n : p->m;
        ndim = 2;
    }
    ct__meta_set(out, sizes, ndim, p->dtype, ct_get_default_device());
    return CT_OK;
}

ct_tensor *ct_arange(double start, double end, double step, ct_dtype dt) {
    ct_args a = ct__args(CT_OP_arange);
    a.p.factory.start = start; a.p.factory.end = end; a.p.factory.step = step;
    a.p.factory.dtype = dt;
    return ct__op(CT_OP_arange, NULL, 0, &a);
}

static ct_tensor *linlog(double start, double end, int64_t steps, double base, int logsp, ct_dtype dt) {
    ct_args a = ct__args(CT_OP_linspace);
    a.p.factory.start = start; a.p.factory.end = end; a.p.factory.base = base;
    a.p.factory.logspace = logsp;
    a.p.factory.steps = steps;
    a.p.factory.dtype = dt;
    return ct__op(CT_OP_linspace, NULL, 0, &a);
}
ct_tensor *ct_linspace(double start, double end, int64_t steps, ct_dtype dt) {
    return linlog(start, end, steps, 10.0, 0, dt);
}
ct_tensor *ct_logspace(double start, double end, int64_t steps, double base, ct_dtype dt) {
    return linlog(start, end, steps, base, 1, dt);
}

ct_tensor *ct_eye(int64_t n, int64_t m, ct_dtype dt) {
    ct_args a = ct__args(CT_OP_eye);
    a.p.factory.n = n;
    a.p.factory.m = m < 0 ? n : m;
    a.p.factory.dtype = dt;
    return ct__op(CT_OP_eye, NULL, 0, &a);
}
