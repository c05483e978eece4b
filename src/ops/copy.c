/* copy.c -- copy_, contiguous, clone, dtype/device conversion, fill. */
#include "../core/device.h"
#include "meta.h"

/* ---- the parameters and meta functions of copy and fill ----------------- */
ct_args ct__copy_args(ct_dtype dt, ct_device dev, const int64_t *shape, int ndim) {
    ct_args a = ct__args(CT_OP_copy);
    a.p.copy.dtype = dt;
    a.p.copy.device = dev;
    if (shape || ndim > 0) {
        a.p.copy.has_shape = true;
        a.p.copy.shape_n = ndim;
        if (ndim > 0) memcpy(a.p.copy.shape, shape, sizeof(int64_t) * (size_t)ndim);
    }
    return a;
}

ct_args ct__fill_args(double value, ct_dtype dt, ct_device dev, const int64_t *shape, int ndim) {
    ct_args a = ct__args(CT_OP_fill);
    a.p.factory.value = value;
    a.p.factory.dtype = dt;
    a.p.factory.device = dev;
    a.p.factory.shape_n = ndim;
    if (ndim > 0) memcpy(a.p.factory.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return a;
}

/* copy: in[0] (absent for a tensor made from host memory) converted to the
 * params' dtype on their device; sizes in[0]'s, or the params' shape, to
 * which in[0] must broadcast (copy_) */
CT_META_FN(ct__meta_copy) {
    (void)nout;
    const ct_p_copy *p = &a->p.copy;
    ct_tensor *src = nin > 0 ? in[0] : NULL;
    if ((unsigned)p->dtype >= CT_DTYPE_COUNT || p->device < 0 || p->device >= CT_DEVICE_COUNT)
        return ct__error_status(CT_ERR_ARG, "copy: invalid dtype %d or device %lld", (int)p->dtype,
                                (long long)p->device);
    if (!p->has_shape) {
        if (!src) return ct__error_status(CT_ERR_ARG, "copy: no input and no shape");
        ct__meta_set(out, src->sizes, src->ndim, p->dtype, (ct_device)p->device);
        return CT_OK;
    }
    int nd = (int)p->shape_n;
    if (nd < 0 || nd > CT_MAX_DIMS) return ct__error_status(CT_ERR_ARG, "copy: invalid ndim %d", nd);
    if (src) {
        int64_t bs[CT_MAX_DIMS];
        int nb;
        if (ct__broadcast_shapes("copy_", p->shape, nd, src->sizes, src->ndim, bs, &nb))
            return ct_last_error_code();
        if (nb != nd || memcmp(bs, p->shape, sizeof(int64_t) * (size_t)nb) != 0) {
            char b[256];
            return ct__error_status(CT_ERR_SHAPE, "copy_: source of shape %s cannot be broadcast to the "
                                    "destination shape %s", ct__tshape(src), ct__shape_str(p->shape, nd, b, sizeof b));
        }
    }
    ct__meta_set(out, p->shape, nd, p->dtype, (ct_device)p->device);
    return CT_OK;
}

/* fill (and ct_empty): no input; the params' sizes, dtype and device */
CT_META_FN(ct__meta_fill) {
    (void)nout; (void)in; (void)nin;
    const ct_p_factory *p = &a->p.factory;
    int nd = (int)p->shape_n;
    if (nd < 0 || nd > CT_MAX_DIMS || (unsigned)p->dtype >= CT_DTYPE_COUNT || p->device < 0 ||
        p->device >= CT_DEVICE_COUNT)
        return ct__error_status(CT_ERR_ARG, "fill: invalid shape, dtype or device");
    ct__meta_set(out, p->shape, nd, p->dtype, (ct_device)p->device);
    return CT_OK;
}

ct_tensor *ct_copy_(ct_tensor *dst, ct_tensor *src) {
    CT_NULLCHECK(dst);
    CT_NULLCHECK(src);
    if (!ct__same_device(dst, src) && !(src->ndim == 0 && src->storage->device == CT_CPU) &&
        dst->storage->device != CT_META && src->storage->device != CT_META && !ct__tracer()) {
        /* torch's copy_ across devices: src's values go to dst's device
         * first (ct_to_dev, recorded when src requires grad), then the copy
         * runs there and is recorded as on one device: dst's old values get
         * no gradient, src gets its gradient back on its own device
         * (CopyBackwards) */
        ct_scope s = ct_scope_begin();
        ct_tensor *moved = ct_to_dev(src, CT_DEV(dst->storage->device, dst->storage->device_index));
        ct_tensor *r = moved ? ct_copy_(dst, moved) : NULL;
        ct_scope_end(s);
        return r;
    }
    ct_tensor *srcs[1] = {src};
    ct_args a = ct__copy_args(dst->dtype, dst->storage->device, dst->sizes, dst->ndim);
    ct_meta m;
    if (ct__meta_run(CT_OP_copy, &m, 1, srcs, 1, &a)) return NULL;
    if (ct__inplace_begin(dst, srcs, 1, "copy_")) return NULL;
    ct_tensor *s = src;
    /* overlapping memory: copy through a temporary */
    if (src->storage == dst->storage && src != dst) {
        s = ct__alloc(src->sizes, src->ndim, src->dtype, src->storage->device);
        if (!s) { ct__inplace_abort(dst); return NULL; }
        ct_tensor *o1[1] = {s}, *i1[1] = {src};
        if (ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL)) { ct_release(s); ct__inplace_abort(dst); return NULL; }
    }
    ct_tensor *o[1] = {dst}, *i[1] = {s};
    ct_status st = ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL);
    if (s != src) ct_release(s);
    if (st) { ct__inplace_abort(dst); return NULL; }
    return ct__finish_inplace(CT_OP_copy, dst, srcs, 1, &a);
}

/* A new contiguous tensor of dtype dt with t's values, refcount 1, no scope
 * (a: the copy's params, which the caller records). */
static ct_tensor *copy_as_args(ct_tensor *t, const ct_args *a) {
    ct_tensor *is[1] = {t};
    ct_meta m;
    if (ct__meta_run(CT_OP_copy, &m, 1, is, 1, a)) return NULL;
    ct_tensor *o = ct__meta_new(&m, is);
    if (!o) return NULL;
    ct_tensor *os[1] = {o};
    if (ct__dispatch(CT_OP_copy, os, 1, is, 1, a)) {
        ct_release(o);
        return NULL;
    }
    return o;
}

static ct_tensor *copy_as(ct_tensor *t, ct_dtype dt) {
    ct_args a = ct__copy_args(dt, t->storage->device, NULL, 0);
    return copy_as_args(t, &a);
}

ct_tensor *ct__contig_as(ct_tensor *t, ct_dtype dt) {
    if (!t) return NULL;
    if (t->dtype == dt && ct__is_contiguous(t)) return ct_retain(t);
    return copy_as(t, dt);
}

/* a recorded copy of t as dtype dt */
static ct_tensor *copy_op(ct_tensor *t, ct_dtype dt) {
    ct_tensor *in[1] = {t};
    ct_args a = ct__copy_args(dt, t->storage->device, NULL, 0);
    return ct__finish(CT_OP_copy, copy_as_args(t, &a), in, 1, &a);
}

ct_tensor *ct_contiguous(ct_tensor *t) {
    CT_NULLCHECK(t);
    if (ct__is_contiguous(t)) return ct__register(ct_retain(t));
    return copy_op(t, t->dtype);
}

ct_tensor *ct_clone(ct_tensor *t) {
    CT_NULLCHECK(t);
    return copy_op(t, t->dtype);
}

ct_tensor *ct_to_dtype(ct_tensor *t, ct_dtype dt) {
    CT_NULLCHECK(t);
    if ((unsigned)dt >= CT_DTYPE_COUNT) return ct__error(CT_ERR_DTYPE, "to: invalid dtype %d", (int)dt);
    if (t->dtype == dt) return ct__register(ct_retain(t));
    return copy_op(t, dt);
}

/* Tensor.to(device): a contiguous copy on dev (t itself when it is there).
 * Values are copied through the devices' vtables when both hold data; from
 * meta the result is uninitialized (to_empty), to meta it has none.  Like
 * torch's ToCopyBackward, the copy is recorded by autograd (a copy node
 * whose input is t) when grad mode is on and t requires grad: its gradient
 * goes back to t's device and index (ct__vjp_copy), and forward AD moves a
 * tangent with its primal (copy's JVP).  A copy from or to meta is not
 * recorded (no values travel).  ct_to_device goes to the thread's current
 * device of the type (see ct_to_dev), ct_to_dev to the one named. */
static ct_tensor *to_index(ct_tensor *t, ct_device dev);

ct_tensor *ct_to_device(ct_tensor *t, ct_device dev) {
    CT_NULLCHECK(t);
    if (t->storage->device == dev) return ct__register(ct_retain(t));
    if (ct__device_check("to", dev, ct__device_current(dev))) return NULL;
    return to_index(t, dev);
}

/* t copied to the thread's current device of type dev (not t's own) */
static ct_tensor *to_index(ct_tensor *t, ct_device dev) {
    ct_args a = ct__copy_args(t->dtype, dev, t->sizes, t->ndim);
    ct_meta m;
    if (ct__meta_run(CT_OP_copy, &m, 1, NULL, 0, &a)) return NULL;
    ct_tensor *n = ct__meta_new(&m, NULL);
    if (!n) return NULL;
    if (t->storage->data && n->storage->data && ct_numel(t) > 0) {
        int index = n->storage->device_index;
        ct_tensor *c = ct__contig_as(t, t->dtype);
        ct__device_set_current(dev, index); /* an op on t made t's device current */
        if (!c) { ct_release(n); return NULL; }
        ct_status st;
        const ct_device_vtbl *vs = ct__device(t->storage->device), *vd = ct__device(dev);
        size_t nb = n->storage->nbytes;
        if (t->storage->device == CT_CPU)
            st = vd->copy_from_host(n->storage->data, ct__ptr(c), nb, n->storage->device_index);
        else if (dev == CT_CPU)
            st = vs->copy_to_host(n->storage->data, ct__ptr(c), nb, c->storage->device_index);
        else if (t->storage->device == dev) { /* another device of the type: through the host */
            void *h = malloc(nb);
            st = !h ? ct__error_status(CT_ERR_OOM, "to: out of memory (%zu bytes)", nb)
                    : vs->copy_to_host(h, ct__ptr(c), nb, c->storage->device_index);
            if (!st) st = vd->copy_from_host(n->storage->data, h, nb, n->storage->device_index);
            free(h);
        } else
            st = ct__error_status(CT_ERR_DEVICE, "to: no copy from %s to %s; go through the cpu",
                                  ct_device_name(t->storage->device), ct_device_name(dev));
        ct_release(c);
        if (st) { ct_release(n); return NULL; }
    }
    /* recorded with t as its input when autograd wants it (t requires grad
     * with grad mode on, or carries a tangent): copy's VJP sends the
     * gradient back to t's device and index, its JVP moves the tangent
     * here.  Otherwise, as a tensor made from data (nothing to record, and
     * the compiler's tracer keeps it a constant). */
    ct_tensor *in[1] = {t};
    bool rec = t->storage->device != CT_META && dev != CT_META && ct__ag_active(in, 1);
    return ct__finish(CT_OP_copy, n, in, rec ? 1 : 0, &a);
}

ct_tensor *ct_to_dev(ct_tensor *t, ct_dev dev) {
    CT_NULLCHECK(t);
    if (ct__device_check("to", dev.type, dev.index)) return NULL;
    if (t->storage->device == dev.type && t->storage->device_index == dev.index)
        return ct__register(ct_retain(t));
    ct__device_set_current(dev.type, dev.index);
    return to_index(t, dev.type);
}

ct_tensor *ct_fill_(ct_tensor *t, double value) {
    CT_NULLCHECK(t);
    ct_args a = ct__fill_args(value, t->dtype, t->storage->device, t->sizes, t->ndim);
    ct_tensor *o[1] = {t};
    if (ct__inplace_begin(t, NULL, 0, "fill_")) return NULL;
    if (ct__dispatch(CT_OP_fill, o, 1, NULL, 0, &a)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_fill, t, NULL, 0, &a);
}

ct_tensor *ct_zero_(ct_tensor *t) { return ct_fill_(t, 0.0); }
