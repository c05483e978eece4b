/* meta.c -- the op runner (meta -> allocate -> dispatch -> record) and the
 * helpers meta functions share.  See meta.h. */
#include "meta.h"

ct_status ct__meta_run(ct_op op, ct_meta *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    ct_meta_fn fn = ct__op_info[op].meta;
    if (!fn)
        return ct__error_status(CT_ERR_RUNTIME, "%s: the op has no meta function",
                                ct__op_info[op].name);
    for (int k = 0; k < nout; k++) {
        out[k].ndim = 0;
        out[k].flags = 0;
        out[k].offset = 0;
        out[k].base = 0;
    }
    ct_args local;
    if (!a) {
        local = ct__args(op);
        a = &local;
    }
    ct__follow_inputs(in, nin);
    ct_status st = fn(out, nout, in, nin, a);
    if (__builtin_expect(st == CT_OK, 1) && ct__tracer()) {
        /* tracing: a fresh output of an op on meta tensors is on meta, even
         * where the meta function took a cpu constant's device */
        bool meta = false;
        for (int k = 0; k < nin; k++) meta = meta || (in[k] && in[k]->storage->device == CT_META);
        for (int k = 0; meta && k < nout; k++)
            if (!(out[k].flags & CT_META_VIEW)) out[k].device = CT_META;
    }
    return st;
}

ct_tensor *ct__meta_new(const ct_meta *m, ct_tensor *const *in) {
    if (m->ndim < 0) return NULL;
    if (m->flags & CT_META_DYNAMIC)
        return ct__error(CT_ERR_RUNTIME, "meta: an output whose sizes depend on the data "
                         "is allocated by its kernel");
    if (m->flags & CT_META_VIEW)
        return ct__view_of(in[m->base], m->sizes, m->strides, m->ndim, m->offset);
    if (m->flags & CT_META_STRIDED)
        return ct__alloc_strided(m->sizes, m->strides, m->ndim, m->dtype, m->device);
    return ct__alloc(m->sizes, m->ndim, m->dtype, m->device);
}

ct_status ct__meta_alloc(const ct_meta *m, ct_tensor **out, int nout, const bool *want,
                         ct_tensor *const *in) {
    for (int j = 0; j < nout; j++) out[j] = NULL;
    for (int j = 0; j < nout; j++)
        if ((!want || want[j]) && !(out[j] = ct__meta_new(&m[j], in)) && m[j].ndim >= 0)
            return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    return CT_OK;
}

/* Allocates out[0..nout) from m and runs the kernel (not for view ops). */
static ct_status alloc_dispatch(ct_op op, const ct_meta *m, ct_tensor **out, int nout,
                                ct_tensor *const *in, int nin, const ct_args *a) {
    if (ct__meta_alloc(m, out, nout, NULL, in)) goto fail;
    if (!(ct__op_info[op].flags & CT_OPF_VIEW) && ct__dispatch(op, out, nout, in, nin, a)) goto fail;
    return CT_OK;
fail:
    for (int k = 0; k < nout; k++) { ct_release(out[k]); out[k] = NULL; }
    return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
}

ct_tensor *ct__op(ct_op op, ct_tensor *const *in, int nin, const ct_args *a) {
    ct_meta m;
    if (ct__meta_run(op, &m, 1, in, nin, a)) return NULL;
    ct_tensor *out;
    if (alloc_dispatch(op, &m, &out, 1, in, nin, a)) return NULL;
    return ct__finish(op, out, in, nin, a);
}

ct_status ct__op_multi(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    ct_meta m[8];
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (nout > 8) return ct__error_status(CT_ERR_RUNTIME, "%s: too many outputs", ct__op_info[op].name);
    ct_status st = ct__meta_run(op, m, nout, in, nin, a);
    if (st) return st;
    st = alloc_dispatch(op, m, out, nout, in, nin, a);
    if (st) return st;
    ct__finish_multi(op, out, nout, in, nin, a);
    for (int k = 0; k < nout; k++)
        if (!out[k] && m[k].ndim >= 0) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    return CT_OK;
}

bool ct__meta_same_sizes(const ct_meta *m, const ct_tensor *t) {
    if (m->ndim != t->ndim) return false;
    for (int d = 0; d < m->ndim; d++)
        if (m->sizes[d] != t->sizes[d]) return false;
    return true;
}

static const char *meta_shape(const ct_meta *m) {
    static _Thread_local char buf[16 * 22 + 4];
    int n = 0;
    buf[n++] = '[';
    for (int d = 0; d < m->ndim && n < (int)sizeof buf - 24; d++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, d ? ", %lld" : "%lld", (long long)m->sizes[d]);
    buf[n++] = ']';
    buf[n] = 0;
    return buf;
}

ct_tensor *ct__op_into(ct_op op, ct_tensor *dst, ct_tensor *const *in, int nin, const ct_args *a) {
    ct_meta m;
    if (ct__meta_run(op, &m, 1, in, nin, a)) return NULL;
    if (!ct__meta_same_sizes(&m, dst))
        return ct__error(CT_ERR_SHAPE, "%s: output with shape %s doesn't match the broadcast shape %s",
                         ct__op_info[op].name, ct__tshape(dst), meta_shape(&m));
    if (ct__inplace_begin(dst, in, nin, ct__op_info[op].name)) return NULL;
    ct_tensor *out[1] = {dst};
    if (ct__dispatch(op, out, 1, in, nin, a)) {
        ct__inplace_abort(dst);
        return NULL;
    }
    return ct__finish_inplace(op, dst, in, nin, a);
}

/* ---- helpers ------------------------------------------------------------------ */
void ct__meta_set(ct_meta *m, const int64_t *sizes, int ndim, ct_dtype dt, ct_device dev) {
    m->ndim = ndim;
    if (ndim > 0) memcpy(m->sizes, sizes, sizeof(int64_t) * (size_t)ndim);
    m->dtype = dt;
    m->device = dev;
    m->flags = 0;
    m->offset = 0;
    m->base = 0;
}

void ct__meta_like(ct_meta *m, const ct_tensor *t, ct_dtype dt) {
    ct__meta_set(m, t->sizes, t->ndim, dt, t->storage->device);
}

void ct__meta_absent(ct_meta *m) {
    m->ndim = -1;
    m->flags = 0;
}

void ct__meta_view(ct_meta *m, int base, const ct_tensor *t, const int64_t *sizes,
                   const int64_t *strides, int ndim, int64_t offset) {
    ct__meta_set(m, sizes, ndim, t->dtype, t->storage->device);
    if (ndim > 0) memcpy(m->strides, strides, sizeof(int64_t) * (size_t)ndim);
    m->flags = CT_META_VIEW;
    m->offset = offset;
    m->base = base;
}

ct_status ct__meta_device(const char *op, ct_tensor *const *in, int nin, ct_device *dev) {
    ct_device d = ct__op_device(in, nin);
    const ct_tensor *ref = NULL;
    for (int k = 0; k < nin && !ref; k++)
        if (in[k] && !(in[k]->ndim == 0 && in[k]->storage->device == CT_CPU)) ref = in[k];
    for (int k = 0; k < nin; k++) {
        if (in[k] && !(in[k]->ndim == 0 && in[k]->storage->device == CT_CPU) &&
            (in[k]->storage->device != d || (ref && !ct__same_device(in[k], ref)))) {
            /* cpu constants traced with meta */
            if (ct__tracer() && in[k]->storage->device != d) { *dev = CT_META; return CT_OK; }
            char b0[32], b1[32];
            return ct__error_status(CT_ERR_DEVICE, "%s: expected all tensors on the same device, "
                                    "got %s and %s", op,
                                    ref ? ct__tensor_dev_str(ref, b0, sizeof b0) : ct_device_name(d),
                                    ct__tensor_dev_str(in[k], b1, sizeof b1));
        }
    }
    *dev = d;
    return CT_OK;
}
