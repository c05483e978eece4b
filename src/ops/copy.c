/* copy.c -- copy_, contiguous, clone, dtype/device conversion, fill. */
#include "../core/device.h"
#include "op_table.h"

ct_tensor *ct_copy_(ct_tensor *dst, ct_tensor *src) {
    CT_NULLCHECK(dst);
    CT_NULLCHECK(src);
    int64_t bs[CT_MAX_DIMS];
    int nb;
    if (ct__broadcast_shapes("copy_", dst->sizes, dst->ndim, src->sizes, src->ndim, bs, &nb))
        return NULL;
    if (nb != dst->ndim || memcmp(bs, dst->sizes, sizeof(int64_t) * (size_t)nb) != 0)
        return ct__error(CT_ERR_SHAPE, "copy_: source of shape %s cannot be broadcast to the "
                         "destination shape %s", ct__tshape(src), ct__tshape(dst));
    ct_tensor *srcs[1] = {src};
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
    return ct__finish_inplace(CT_OP_copy, dst, srcs, 1, NULL);
}

/* A new contiguous tensor of dtype dt with t's values, refcount 1, no scope. */
static ct_tensor *copy_as(ct_tensor *t, ct_dtype dt) {
    ct_tensor *o = ct__alloc(t->sizes, t->ndim, dt, t->storage->device);
    if (!o) return NULL;
    ct_tensor *os[1] = {o}, *is[1] = {t};
    if (ct__dispatch(CT_OP_copy, os, 1, is, 1, NULL)) {
        ct_release(o);
        return NULL;
    }
    return o;
}

ct_tensor *ct__contig_as(ct_tensor *t, ct_dtype dt) {
    if (!t) return NULL;
    if (t->dtype == dt && ct__is_contiguous(t)) return ct_retain(t);
    return copy_as(t, dt);
}

ct_tensor *ct_contiguous(ct_tensor *t) {
    CT_NULLCHECK(t);
    if (ct__is_contiguous(t)) return ct__register(ct_retain(t));
    ct_tensor *in[1] = {t};
    return ct__finish(CT_OP_copy, copy_as(t, t->dtype), in, 1, NULL);
}

ct_tensor *ct_clone(ct_tensor *t) {
    CT_NULLCHECK(t);
    ct_tensor *in[1] = {t};
    return ct__finish(CT_OP_copy, copy_as(t, t->dtype), in, 1, NULL);
}

ct_tensor *ct_to_dtype(ct_tensor *t, ct_dtype dt) {
    CT_NULLCHECK(t);
    if ((unsigned)dt >= CT_DTYPE_COUNT) return ct__error(CT_ERR_DTYPE, "to: invalid dtype %d", (int)dt);
    if (t->dtype == dt) return ct__register(ct_retain(t));
    ct_tensor *in[1] = {t};
    return ct__finish(CT_OP_copy, copy_as(t, dt), in, 1, NULL);
}

/* Tensor.to(device): a contiguous copy on dev (t itself when it is there).
 * Values are copied through the devices' vtables when both hold data; from
 * meta the result is uninitialized (to_empty), to meta it has none.  The
 * result is not connected to t's autograd graph yet (torch records
 * ToCopyBackward): that comes with the first device whose gradients must
 * flow back, see issue 19. */
ct_tensor *ct_to_device(ct_tensor *t, ct_device dev) {
    CT_NULLCHECK(t);
    if (t->storage->device == dev) return ct__register(ct_retain(t));
    if (ct__device_check("to", dev, 0)) return NULL;
    ct_tensor *n = ct__alloc(t->sizes, t->ndim, t->dtype, dev);
    if (!n) return NULL;
    if (t->storage->data && n->storage->data && ct_numel(t) > 0) {
        ct_tensor *c = ct__contig_as(t, t->dtype);
        if (!c) { ct_release(n); return NULL; }
        ct_status st;
        if (t->storage->device == CT_CPU)
            st = ct__device(dev)->copy_from_host(n->storage->data, ct__ptr(c), n->storage->nbytes, 0);
        else if (dev == CT_CPU)
            st = ct__device(t->storage->device)->copy_to_host(n->storage->data, ct__ptr(c),
                                                              n->storage->nbytes, 0);
        else
            st = ct__error_status(CT_ERR_DEVICE, "to: no copy from %s to %s; go through the cpu",
                                  ct_device_name(t->storage->device), ct_device_name(dev));
        ct_release(c);
        if (st) { ct_release(n); return NULL; }
    }
    return ct__finish(CT_OP_copy, n, NULL, 0, NULL);
}

ct_tensor *ct_to_dev(ct_tensor *t, ct_dev dev) {
    CT_NULLCHECK(t);
    if (ct__device_check("to", dev.type, dev.index)) return NULL;
    if (t->storage->device == dev.type && t->storage->device_index == dev.index)
        return ct__register(ct_retain(t));
    return ct_to_device(t, dev.type);
}

ct_tensor *ct_fill_(ct_tensor *t, double value) {
    CT_NULLCHECK(t);
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = CT_OP_fill;
    a.p.factory.value = value;
    ct_tensor *o[1] = {t};
    if (ct__inplace_begin(t, NULL, 0, "fill_")) return NULL;
    if (ct__dispatch(CT_OP_fill, o, 1, NULL, 0, &a)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_fill, t, NULL, 0, &a);
}

ct_tensor *ct_zero_(ct_tensor *t) { return ct_fill_(t, 0.0); }
