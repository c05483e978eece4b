/* tensor.c -- tensor and storage lifetime, construction, inspection and
 * shape helpers. */
#include <math.h>

#include "device.h"
#include "tensor_impl.h"

static atomic_llong g_live;

int64_t ct_live_tensors(void) { return (int64_t)atomic_load(&g_live); }

/* ---- shape helpers ----------------------------------------------------- */
int64_t ct__wrap_dim(const char *op, int64_t dim, int ndim) {
    int64_t n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        ct__error(CT_ERR_INDEX, "%s: dim %lld out of range for a %d-D tensor (expected in [%lld, %lld])",
                  op, (long long)dim, ndim, (long long)-n, (long long)(n - 1));
        return -1;
    }
    return dim < 0 ? dim + n : dim;
}

int64_t ct__shape_numel(const char *op, const int64_t *shape, int ndim) {
    if (ndim < 0 || ndim > CT_MAX_DIMS) {
        ct__error(CT_ERR_SHAPE, "%s: %d dims (at most %d supported)", op, ndim, CT_MAX_DIMS);
        return -1;
    }
    if (ndim > 0 && !shape) {
        ct__error(CT_ERR_NULL, "%s: shape is NULL for %d dims", op, ndim);
        return -1;
    }
    /* the product of the nonzero dims must fit even when a zero dim makes
     * numel 0: strides and views multiply the other dims */
    int64_t nz = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char b[256];
            ct__error(CT_ERR_SHAPE, "%s: negative dimension in shape %s", op,
                      ct__shape_str(shape, ndim, b, sizeof b));
            return -1;
        }
        if (shape[i] == 0) { zero = true; continue; }
        if (!ct__mul_i64(nz, shape[i], &nz)) {
            char b[256];
            ct__error(CT_ERR_OVERFLOW, "%s: shape %s has too many elements (the product of its "
                      "nonzero dims overflows int64)", op, ct__shape_str(shape, ndim, b, sizeof b));
            return -1;
        }
    }
    return zero ? 0 : nz;
}

ct_status ct__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b, int nb,
                               int64_t *out_, int *nout) {
    int n = na > nb ? na : nb;
    int64_t out[CT_MAX_DIMS]; /* out_ may alias a or b */
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) {
            char b1[256], b2[256];
            return ct__error_status(CT_ERR_SHAPE,
                                    "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)",
                                    op, ct__shape_str(a, na, b1, sizeof b1),
                                    ct__shape_str(b, nb, b2, sizeof b2), i, (long long)da,
                                    (long long)db);
        }
        out[i] = da == 1 ? db : da;
    }
    memcpy(out_, out, sizeof(int64_t) * (size_t)n);
    *nout = n;
    return CT_OK;
}

void ct__contiguous_strides(const int64_t *shape, int ndim, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        if (shape[i] > 1 && !ct__mul_i64(s, shape[i], &s)) s = INT64_MAX; /* saturate, no UB */
    }
}

bool ct__is_contiguous(const ct_tensor *t) {
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->sizes[i] == 0) return true;
        if (t->sizes[i] != 1 && t->strides[i] != s) return false;
        s *= t->sizes[i];
    }
    return true;
}

/* ---- lifetime ---------------------------------------------------------- */
#define CT_FREE_HOOKS 4
static void (*_Atomic g_free_hooks[CT_FREE_HOOKS])(uint64_t uid);
static atomic_ullong g_storage_uid;

void ct__storage_free_hook_add(void (*fn)(uint64_t uid)) {
    for (int i = 0; i < CT_FREE_HOOKS; i++) {
        void (*cur)(uint64_t) = atomic_load(&g_free_hooks[i]);
        if (cur == fn) return;
        if (!cur) {
            void (*expect)(uint64_t) = NULL;
            if (atomic_compare_exchange_strong(&g_free_hooks[i], &expect, fn) || expect == fn) return;
        }
    }
}

static void storage_release(ct_storage *s) {
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (atomic_load(&s->derived))
        for (int i = 0; i < CT_FREE_HOOKS; i++) {
            void (*fn)(uint64_t) = atomic_load(&g_free_hooks[i]);
            if (fn) fn(s->uid);
        }
    if (s->deleter) s->deleter(s->data, s->deleter_ctx);
    else if (s->owns && s->data) ct__device(s->device)->free(s->data, s->nbytes, s->device_index);
    ct__obj_free(s, sizeof *s);
}

ct_tensor *ct_retain(ct_tensor *t) {
    if (t) atomic_fetch_add(&t->refcount, 1);
    return t;
}

void ct_release(ct_tensor *t) {
    if (!t) return;
    if (atomic_fetch_sub(&t->refcount, 1) != 1) return;
    extern void (*ct__autograd_free_hook)(ct_tensor *);
    if (t->autograd && ct__autograd_free_hook) ct__autograd_free_hook(t);
    storage_release(t->storage);
    atomic_fetch_sub(&g_live, 1);
    ct__obj_free(t, sizeof *t);
}

void (*ct__autograd_free_hook)(ct_tensor *);

static ct_tensor *tensor_new(ct_storage *s, ct_dtype dt, const int64_t *sizes,
                             const int64_t *strides, int ndim, int64_t offset) {
    ct_tensor *t = ct__obj_calloc(sizeof *t);
    if (!t) return ct__error(CT_ERR_OOM, "out of memory allocating a tensor handle");
    atomic_init(&t->refcount, 1);
    t->storage = s;
    t->dtype = dt;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        t->sizes[i] = sizes[i];
        t->strides[i] = strides[i];
    }
    t->offset = offset;
    atomic_fetch_add(&g_live, 1);
    return t;
}

/* A storage of nbytes on dev (refcount 1). */
static ct_storage *storage_new(size_t nbytes, ct_device dev, const int64_t *shape, int ndim,
                               ct_dtype dt) {
    const ct_device_vtbl *vt = ct__device(dev);
    if (!vt) {
        const char *why = ct__backend_missing_why(dev);
        ct__error(CT_ERR_DEVICE, "empty: device %s is not available: %s", ct_device_name(dev),
                  why ? why : "no backend in this build");
        return NULL;
    }
    ct_storage *s = ct__obj_calloc(sizeof *s);
    if (!s) { ct__error(CT_ERR_OOM, "empty: out of memory"); return NULL; }
    s->nbytes = nbytes;
    /* on the thread's current device of this type (an op made its inputs'
     * current: ct__op_device) */
    int index = ct__device_current(dev);
    if (!(vt->caps & CT_DEVCAP_NO_DATA)) {
        s->data = vt->alloc(nbytes, index);
        if (!s->data) {
            ct__obj_free(s, sizeof *s);
            char b[256], why[512];
            /* a device's own reason (its limits), kept after ours; the cpu's
             * is this message */
            ct_status code = (vt->caps & CT_DEVCAP_HOST_MEMORY) ? CT_OK : ct_last_error_code();
            snprintf(why, sizeof why, "%s", code ? ct_last_error() : "");
            ct__error(code && code != CT_ERR_OOM ? code : CT_ERR_OOM,
                      "empty: out of memory allocating %zu bytes for %s %s on %s%s%s", nbytes,
                      ct_dtype_name(dt), ct__shape_str(shape, ndim, b, sizeof b), vt->name,
                      why[0] ? ": " : "", why);
            return NULL;
        }
    }
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->device = dev;
    s->device_index = index;
    s->owns = 1;
    s->uid = atomic_fetch_add(&g_storage_uid, 1) + 1;
    return s;
}

/* numel of shape as bytes of dt, with the checks every allocation makes */
static bool alloc_bytes(const int64_t *shape, int ndim, ct_dtype dt, size_t *nbytes) {
    if ((unsigned)dt >= CT_DTYPE_COUNT) { ct__error(CT_ERR_DTYPE, "empty: invalid dtype %d", (int)dt); return false; }
    int64_t n = ct__shape_numel("empty", shape, ndim);
    if (n < 0) return false;
    size_t es = ct_dtype_size(dt);
    if ((uint64_t)n > (uint64_t)(SIZE_MAX / 2) / es) {
        ct__error(CT_ERR_OVERFLOW, "empty: %lld elements of %s overflow the address space",
                  (long long)n, ct_dtype_name(dt));
        return false;
    }
    *nbytes = (size_t)n * es;
    return true;
}

ct_tensor *ct__alloc(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    size_t nbytes;
    if (!alloc_bytes(shape, ndim, dt, &nbytes)) return NULL;
    ct_storage *s = storage_new(nbytes, dev, shape, ndim, dt);
    if (!s) return NULL;
    int64_t strides[CT_MAX_DIMS];
    ct__contiguous_strides(shape, ndim, strides);
    ct_tensor *t = tensor_new(s, dt, shape, strides, ndim, 0);
    if (!t) storage_release(s);
    return t;
}

ct_tensor *ct__alloc_strided(const int64_t *shape, const int64_t *strides, int ndim, ct_dtype dt,
                             ct_device dev) {
    size_t nbytes;
    if (!alloc_bytes(shape, ndim, dt, &nbytes)) return NULL;
    int64_t span = 0; /* the elements the strides reach (dense: numel) */
    if (nbytes) {
        span = 1;
        for (int d = 0; d < ndim; d++) span += (shape[d] - 1) * strides[d];
        nbytes = (size_t)span * ct_dtype_size(dt);
    }
    ct_storage *s = storage_new(nbytes, dev, shape, ndim, dt);
    if (!s) return NULL;
    ct_tensor *t = tensor_new(s, dt, shape, strides, ndim, 0);
    if (!t) storage_release(s);
    return t;
}

_Thread_local void (*ct__need_data_hook)(const char *op);
_Thread_local const ct_tensor *ct__need_data_tensor;

bool ct__need_data(const char *op, const ct_tensor *t) {
    if (ct__has_host_data(t)) return true;
    if (ct__need_data_hook) {
        ct__need_data_tensor = t;
        ct__need_data_hook(op);
        ct__need_data_tensor = NULL;
    }
    if (t->storage->device == CT_META)
        ct__error(CT_ERR_DEVICE, "%s: cannot read the values of a meta tensor (meta tensors have no "
                  "data)", op);
    else
        ct__error(CT_ERR_DEVICE, "%s: the values of a %s tensor cannot be read on the host here "
                  "(copy it to the cpu first)", op, ct_device_name(t->storage->device));
    return false;
}

ct_tensor *ct__host_copy(ct_tensor *t, ct_dtype dt) {
    if (t->storage->device == CT_META) { (void)ct__need_data("host copy", t); return NULL; }
    ct_tensor *c = ct__contig_as(t, dt);
    if (!c || ct__has_host_data(c)) return c;
    ct_tensor *h = ct__alloc(c->sizes, c->ndim, dt, CT_CPU);
    size_t n = (size_t)ct_numel(c) * ct_dtype_size(dt);
    if (h && n && ct__device(c->storage->device)->copy_to_host(ct__ptr(h), ct__ptr(c), n, c->storage->device_index)) {
        ct_release(h);
        h = NULL;
    }
    ct_release(c);
    return h;
}

ct_status ct__tensor_move_to(ct_tensor *t, ct_device dev) {
    if (t->storage->device == dev && t->storage->device_index == ct__device_current(dev)) return CT_OK;
    int index = ct__device_current(dev);
    ct_tensor *n = ct__alloc(t->sizes, t->ndim, t->dtype, dev);
    if (!n) return ct_last_error_code();
    if (t->storage->data && n->storage->data && ct_numel(t) > 0) {
        /* the values, dense, through the devices' copies (host memory on one
         * side, or a host buffer between two devices) */
        ct_tensor *c = ct__contig_as(t, t->dtype);
        ct__device_set_current(dev, index); /* an op on t made t's device current */
        if (!c) { ct_release(n); return ct_last_error_code(); }
        const ct_device_vtbl *vs = ct__device(t->storage->device), *vd = ct__device(dev);
        size_t nb = n->storage->nbytes;
        ct_status st;
        if (ct__has_host_data(c)) {
            st = vd->copy_from_host(n->storage->data, ct__ptr(c), nb, n->storage->device_index);
        } else if (vd->caps & CT_DEVCAP_HOST_MEMORY) {
            st = vs->copy_to_host(n->storage->data, ct__ptr(c), nb, c->storage->device_index);
        } else {
            void *h = malloc(nb);
            st = !h ? ct__error_status(CT_ERR_OOM, "to: out of memory (%zu bytes)", nb)
                    : vs->copy_to_host(h, ct__ptr(c), nb, c->storage->device_index);
            if (!st) st = vd->copy_from_host(n->storage->data, h, nb, n->storage->device_index);
            free(h);
        }
        ct_release(c);
        if (st) { ct_release(n); return st; }
    }
    ct_storage *old = t->storage;
    t->storage = n->storage;
    n->storage = old;
    memcpy(t->strides, n->strides, sizeof t->strides);
    t->offset = 0;
    atomic_fetch_add(&t->storage->version, 1);
    ct_release(n);
    return CT_OK;
}

ct_tensor *ct__view_of(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int ndim,
                       int64_t offset) {
    atomic_fetch_add(&t->storage->refcount, 1);
    ct_tensor *v = tensor_new(t->storage, t->dtype, sizes, strides, ndim, offset);
    if (!v) storage_release(t->storage);
    return v;
}

ct_tensor *ct_from_blob(void *data, const int64_t *shape, int ndim, const int64_t *strides,
                        ct_dtype dt, void (*deleter)(void *, void *), void *ctx) {
    if (!data) return ct__error(CT_ERR_NULL, "from_blob: data is NULL");
    if ((unsigned)dt >= CT_DTYPE_COUNT) return ct__error(CT_ERR_DTYPE, "from_blob: invalid dtype %d", (int)dt);
    int64_t n = ct__shape_numel("from_blob", shape, ndim);
    if (n < 0) return NULL;
    int64_t st[CT_MAX_DIMS];
    if (strides) {
        for (int i = 0; i < ndim; i++) {
            if (strides[i] < 0)
                return ct__error(CT_ERR_ARG, "from_blob: negative stride %lld at dim %d",
                                 (long long)strides[i], i);
            st[i] = strides[i];
        }
    } else {
        ct__contiguous_strides(shape, ndim, st);
    }
    int64_t span = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) span = 0;
    if (span) for (int i = 0; i < ndim; i++) span += (shape[i] - 1) * st[i];
    ct_storage *s = ct__obj_calloc(sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "from_blob: out of memory");
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = data;
    s->nbytes = (size_t)span * ct_dtype_size(dt);
    s->device = CT_CPU;
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    ct_tensor *t = tensor_new(s, dt, shape, st, ndim, 0);
    if (!t) { ct__obj_free(s, sizeof *s); return NULL; }
    return ct__register(t);
}

/* ---- inspection -------------------------------------------------------- */
int ct_ndim(const ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "ndim: tensor is NULL"); return -1; }
    return t->ndim;
}
int64_t ct_size(const ct_tensor *t, int64_t dim) {
    if (!t) { ct__error(CT_ERR_NULL, "size: tensor is NULL"); return -1; }
    if (t->ndim == 0) { ct__error(CT_ERR_INDEX, "size: dimension specified as %lld but tensor has no dimensions", (long long)dim); return -1; }
    int64_t d = ct__wrap_dim("size", dim, t->ndim);
    return d < 0 ? -1 : t->sizes[d];
}
int64_t ct_stride(const ct_tensor *t, int64_t dim) {
    if (!t) { ct__error(CT_ERR_NULL, "stride: tensor is NULL"); return -1; }
    if (t->ndim == 0) { ct__error(CT_ERR_INDEX, "stride: tensor has no dimensions"); return -1; }
    int64_t d = ct__wrap_dim("stride", dim, t->ndim);
    return d < 0 ? -1 : t->strides[d];
}
const int64_t *ct_sizes(const ct_tensor *t) { return t ? t->sizes : NULL; }
const int64_t *ct_strides(const ct_tensor *t) { return t ? t->strides : NULL; }
int64_t ct_storage_offset(const ct_tensor *t) { return t ? t->offset : -1; }
int64_t ct_numel(const ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "numel: tensor is NULL"); return -1; }
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->sizes[i];
    return n;
}
ct_dtype ct_get_dtype(const ct_tensor *t) { return t ? t->dtype : (ct_dtype)-1; }
_Thread_local bool ct__tracing;

ct_device ct_get_device(const ct_tensor *t) {
    if (!t) return (ct_device)-1;
    /* tracing (ct_compile): cpu tensors count as meta, as in the op layer's
     * device rules, so that code choosing a path by device takes the one
     * it takes for the real inputs */
    if (__builtin_expect(ct__tracing, 0) && t->storage->device == CT_CPU) return CT_META;
    return t->storage->device;
}
int ct_get_device_index(const ct_tensor *t) { return t ? t->storage->device_index : -1; }
ct_dev ct_tensor_dev(const ct_tensor *t) {
    return t ? CT_DEV(t->storage->device, t->storage->device_index) : CT_DEV(CT_CPU, -1);
}
bool ct_is_contiguous(const ct_tensor *t) { return t && ct__is_contiguous(t); }
void *ct_data_ptr(const ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "data_ptr: tensor is NULL"); return NULL; }
    /* the caller may write through it: caches derived from the storage
     * (see ct_storage) are stale from here on */
    if (!ct__need_data("data_ptr", t)) return NULL;
    atomic_fetch_add(&t->storage->exposed, 1);
    return ct__ptr(t);
}
int64_t ct_version(const ct_tensor *t) { return t ? (int64_t)atomic_load(&t->storage->version) : -1; }
bool ct_shares_storage(const ct_tensor *a, const ct_tensor *b) {
    return a && b && a->storage == b->storage;
}

/* the one element of t into v: from host memory, or copied from its device
 * (a blocking read: it waits for the work queued there); meta has none */
static bool item_bytes(ct_tensor *t, unsigned char *v) {
    size_t es = ct_dtype_size(t->dtype);
    if (ct__has_host_data(t)) {
        memcpy(v, ct__ptr(t), es);
        return true;
    }
    const ct_device_vtbl *vt = ct__device(t->storage->device);
    if (vt && !(vt->caps & CT_DEVCAP_NO_DATA) && t->storage->data)
        return vt->copy_to_host(v, ct__ptr(t), es, t->storage->device_index) == CT_OK;
    return ct__need_data("item", t);
}

double ct_item(ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "item: tensor is NULL"); return NAN; }
    if (ct_numel(t) != 1) {
        ct__error(CT_ERR_SHAPE, "item: a tensor with %lld elements cannot be converted to a scalar (shape %s)",
                  (long long)ct_numel(t), ct__tshape(t));
        return NAN;
    }
    unsigned char v[16];
    if (!item_bytes(t, v)) return NAN;
    return ct__load_f64(v, t->dtype);
}

int64_t ct_item_int(ct_tensor *t) {
    if (!t) { ct__error(CT_ERR_NULL, "item: tensor is NULL"); return 0; }
    if (ct_numel(t) != 1) {
        ct__error(CT_ERR_SHAPE, "item: a tensor with %lld elements cannot be converted to a scalar (shape %s)",
                  (long long)ct_numel(t), ct__tshape(t));
        return 0;
    }
    unsigned char v[16];
    if (!item_bytes(t, v)) return 0;
    return ct__load_i64(v, t->dtype);
}
