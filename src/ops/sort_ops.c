/* sort_ops.c -- sorting ops (public functions): sort, argsort, topk,
 * kthvalue, median, nanmedian, mode, unique, unique_consecutive.  Kernels in
 * src/backend/cpu/sort.c (see the layout contract there). */
#include <math.h>

#include "ew.h"
#include "meta.h"
#include "reduce_impl.h"

/* Preparation: the dim (wrapped) and the input's (pre, n, post) as the
 * op's parameters; every check on them is the meta function's. */
static int setup(const char *name, ct_tensor *x, int64_t dim, ct_args *a) {
    int64_t d = ct__wrap_dim(name, dim, x->ndim);
    if (d < 0) return -1;
    int64_t pre = 1, post = 1, n = 1;
    for (int k = 0; k < x->ndim; k++) {
        if (k < d) pre *= x->sizes[k];
        else if (k > d) post *= x->sizes[k];
        else n = x->sizes[k];
    }
    a->p.sort.pre = pre;
    a->p.sort.n = n;
    a->p.sort.post = post;
    a->p.sort.dim = d;
    return 0;
}

/* The meta function of the sorting ops: values in x's dtype and int64
 * indices, of x's sizes (sort), with the dim k long (topk) or the dim
 * removed unless keepdim (kthvalue, median_dim, mode).  unique: values and
 * counts of a data-dependent length (CT_META_DYNAMIC, 1-d), the inverse of
 * x's sizes. */
CT_META_FN(ct__meta_sort) {
    (void)nin;
    const ct_p_sort *p = &a->p.sort;
    ct_op op = a->op;
    ct_tensor *x = in[0];
    ct_device dev = x->storage->device;
    if (op == CT_OP_unique) {
        const char *name = p->consecutive ? "unique_consecutive" : "unique";
        if (ct_dtype_is_complex(x->dtype) || x->dtype == CT_F16 || x->dtype == CT_BF16)
            return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for %s", name,
                                    ct_dtype_name(x->dtype));
        int64_t unknown = -1; /* the number of distinct values */
        ct__meta_set(&out[0], &unknown, 1, x->dtype, dev);
        out[0].flags = CT_META_DYNAMIC;
        if (nout > 1) ct__meta_like(&out[1], x, CT_I64);
        if (nout > 2) {
            ct__meta_set(&out[2], &unknown, 1, CT_I64, dev);
            out[2].flags = CT_META_DYNAMIC;
        }
        return CT_OK;
    }
    const char *name = op == CT_OP_median_dim ? "median" : ct__op_info[op].name;
    if (op == CT_OP_median_dim && p->empty_whole) { /* median() of an empty tensor: NaN */
        if (ct_numel(x) != 0)
            return ct__error_status(CT_ERR_ARG, "median: empty_whole on a non-empty input %s", ct__tshape(x));
        ct__meta_set(&out[0], NULL, 0, x->dtype, dev);
        for (int k = 1; k < nout; k++) ct__meta_same(&out[k], &out[0], CT_I64);
        return CT_OK;
    }
    if (x->dtype == CT_C64 || x->dtype == CT_C128 || x->dtype == CT_C32) /* complex */
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for %s", name,
                                ct_dtype_name(x->dtype));
    int64_t *sizes = out[0].sizes;
    int nd = 0;
    switch (op) {
    case CT_OP_sort:
    case CT_OP_topk:
        if (op == CT_OP_topk && (p->k < 0 || p->k > p->n))
            return ct__error_status(CT_ERR_INDEX, "topk(): selected index k out of range (k = "
                                    "%lld, dim size %lld)", (long long)p->k, (long long)p->n);
        nd = x->ndim;
        for (int k = 0; k < nd; k++) sizes[k] = x->sizes[k];
        if (op == CT_OP_topk && nd > 0) sizes[p->dim] = p->k;
        break;
    case CT_OP_kthvalue:
    case CT_OP_median_dim:
    case CT_OP_mode:
        if (op == CT_OP_kthvalue && (p->k < 1 || p->k > p->n))
            return ct__error_status(CT_ERR_INDEX, "kthvalue(): selected number k out of range for "
                                    "dimension %lld (k = %lld, size %lld)", (long long)p->dim,
                                    (long long)p->k, (long long)p->n);
        if (op != CT_OP_kthvalue && p->n == 0)
            return ct__error_status(CT_ERR_INDEX, "%s(): Expected reduction dim %lld to have "
                                    "non-zero size.", name, (long long)p->dim);
        for (int k = 0; k < x->ndim; k++) {
            if (k == p->dim) { if (p->keepdim) sizes[nd++] = 1; }
            else sizes[nd++] = x->sizes[k];
        }
        break;
    default:
        return ct__error_status(CT_ERR_RUNTIME, "%s: not a sorting op", name);
    }
    /* out[0]'s sizes are written above; ct__meta_run zeroed its flags */
    out[0].ndim = nd;
    out[0].dtype = x->dtype;
    out[0].device = dev;
    for (int k = 1; k < nout; k++) ct__meta_same(&out[k], &out[0], CT_I64);
    return CT_OK;
}

/* the kernels sort halves as f32 (converted back after) */
ct_status ct_sort(ct_tensor *x, int64_t dim, bool descending, bool stable, ct_tensor **values,
                  ct_tensor **indices) {
    (void)stable; /* the kernel's merge sort is always stable */
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_S(x);
    ct_args a = ct__args(CT_OP_sort);
    if (setup("sort", x, dim, &a)) return ct_last_error_code();
    a.p.sort.descending = descending;
    return ct__red_pair(CT_OP_sort, x, &a, 2, values, indices);
}

ct_tensor *ct_argsort(ct_tensor *x, int64_t dim, bool descending, bool stable) {
    CT_NULLCHECK(x);
    ct_tensor *idx = NULL;
    if (ct_sort(x, dim, descending, stable, NULL, &idx)) return NULL;
    return idx;
}

ct_status ct_topk(ct_tensor *x, int64_t k, int64_t dim, bool largest, bool sorted,
                  ct_tensor **values, ct_tensor **indices) {
    (void)sorted; /* results are always sorted */
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_S(x);
    ct_args a = ct__args(CT_OP_topk);
    if (setup("topk", x, dim, &a)) return ct_last_error_code();
    a.p.sort.largest = largest;
    a.p.sort.k = k;
    return ct__red_pair(CT_OP_topk, x, &a, 2, values, indices);
}

ct_status ct_kthvalue(ct_tensor *x, int64_t k, int64_t dim, bool keepdim, ct_tensor **values,
                      ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_S(x);
    ct_args a = ct__args(CT_OP_kthvalue);
    if (setup("kthvalue", x, dim, &a)) return ct_last_error_code();
    a.p.sort.k = k;
    a.p.sort.keepdim = keepdim;
    return ct__red_pair(CT_OP_kthvalue, x, &a, 2, values, indices);
}

static ct_status median_like(ct_op op, const char *name, ct_tensor *x, int64_t dim, bool keepdim,
                             int ignore_nan, ct_tensor **values, ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP_S(name, x);
    ct_args a = ct__args(op);
    if (setup(name, x, dim, &a)) return ct_last_error_code();
    a.p.sort.ignore_nan = ignore_nan;
    a.p.sort.keepdim = keepdim;
    return ct__red_pair(op, x, &a, 2, values, indices);
}

ct_status ct_median_dim(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                        ct_tensor **indices) {
    return median_like(CT_OP_median_dim, "median", x, dim, keepdim, 0, values, indices);
}
ct_status ct_mode(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                  ct_tensor **indices) {
    return median_like(CT_OP_mode, "mode", x, dim, keepdim, 0, values, indices);
}

static ct_tensor *median_all(const char *name, ct_tensor *x, int ignore_nan) {
    CT_NULLCHECK_OP(name, x);
    if (ct_dtype_is_complex(x->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: not implemented for %s", name, ct_dtype_name(x->dtype));
    int64_t n = ct_numel(x);
    if (n == 0) {
        ct_args a = ct__args(CT_OP_median_dim);
        a.p.sort.empty_whole = true;
        a.p.sort.ignore_nan = ignore_nan;
        ct_tensor *in[1] = {x};
        ct_meta m;
        if (ct__meta_run(CT_OP_median_dim, &m, 1, in, 1, &a)) return NULL;
        ct_tensor *o = ct__meta_new(&m, in);
        if (!o) return NULL;
        if (ct__has_host_data(o)) {
            ct__store_f64(ct__ptr(o), x->dtype, NAN);
        } else if (o->storage->data) { /* a device: its fill kernel (meta: no value) */
            ct_args fa = ct__fill_args(NAN, o->dtype, o->storage->device, o->sizes, o->ndim);
            ct_tensor *oo[1] = {o};
            if (ct__dispatch(CT_OP_fill, oo, 1, NULL, 0, &fa)) { ct_release(o); return NULL; }
        }
        return ct__finish(CT_OP_median_dim, o, in, 1, &a);
    }
    /* the median of the flattened tensor, as reshape + median_dim (both
     * recorded: the gradient reaches the selected entry) */
    ct_scope s = ct_scope_begin();
    ct_tensor *flat = ct_reshape(x, &n, 1), *v = NULL;
    if (flat) (void)median_like(CT_OP_median_dim, name, flat, 0, false, ignore_nan, &v, NULL);
    v = ct_keep(v);
    ct_scope_end(s);
    return v;
}
ct_tensor *ct_median(ct_tensor *x) { return median_all("median", x, 0); }
ct_tensor *ct_nanmedian(ct_tensor *x) { return median_all("nanmedian", x, 1); }

static ct_status unique_impl(const char *name, ct_tensor *x, int consecutive, ct_tensor **values,
                             ct_tensor **inverse, ct_tensor **counts) {
    if (values) *values = NULL;
    if (inverse) *inverse = NULL;
    if (counts) *counts = NULL;
    CT_NULLCHECK_OP_S(name, x);
    ct_args a = ct__args(CT_OP_unique);
    a.p.sort.consecutive = consecutive;
    ct_meta m[3];
    if (ct__meta_run(CT_OP_unique, m, 3, &x, 1, &a)) return ct_last_error_code();
    if (ct__values_on_device(x)) { /* the output size is the data's: on a host copy, results moved back */
        ct_scope s = ct_scope_begin();
        ct_tensor *r[3] = {NULL, NULL, NULL};
        ct_dev dev = ct_tensor_dev(x);
        ct_status st = unique_impl(name, ct_to_dev(x, CT_DEV(CT_CPU, 0)), consecutive, values ? &r[0] : NULL,
                                   inverse ? &r[1] : NULL, counts ? &r[2] : NULL);
        for (int k = 0; k < 3 && !st; k++)
            if (r[k] && !(r[k] = ct_to_dev(r[k], dev))) st = ct_last_error_code();
        for (int k = 0; k < 3 && !st; k++) r[k] = ct_keep(r[k]); /* all or none leave the scope */
        ct_scope_end(s);
        if (st) return st;
        if (values) *values = r[0];
        if (inverse) *inverse = r[1];
        if (counts) *counts = r[2];
        return CT_OK;
    }
    if (!ct__need_data(name, x)) return ct_last_error_code(); /* the output size is the data's */
    int64_t n = ct_numel(x);
    ct_tensor *flat = ct__contig_as(x, x->dtype);
    if (!flat) return ct_last_error_code();
    ct_tensor *v = ct__view_of(flat, &n, (const int64_t[]){1}, 1, flat->offset);
    ct_release(flat);
    if (!v) return CT_ERR_OOM;
    /* the kernel writes into buffers of the largest sizes (n values, n + 1
     * counts: the last is the number of distinct values) */
    int64_t n1 = n + 1;
    ct_tensor *o[3] = {ct__alloc(&n, 1, m[0].dtype, m[0].device), ct__meta_new(&m[1], &x),
                       ct__alloc(&n1, 1, m[2].dtype, m[2].device)};
    ct_tensor *in[1] = {v}, *res[3] = {NULL, NULL, NULL};
    ct_status st = (!o[0] || !o[1] || !o[2]) ? CT_ERR_OOM : ct__dispatch(CT_OP_unique, o, 3, in, 1, &a);
    ct_release(v);
    if (!st) {
        int64_t u = ((int64_t *)ct__ptr(o[2]))[n];
        res[0] = ct__alloc(&u, 1, m[0].dtype, m[0].device);
        res[2] = ct__alloc(&u, 1, m[2].dtype, m[2].device);
        if (!res[0] || !res[2]) st = CT_ERR_OOM;
        else {
            if (u) {
                memcpy(ct__ptr(res[0]), ct__ptr(o[0]), (size_t)u * ct_dtype_size(x->dtype));
                memcpy(ct__ptr(res[2]), ct__ptr(o[2]), (size_t)u * sizeof(int64_t));
            }
            res[1] = ct_retain(o[1]);
        }
    }
    for (int k = 0; k < 3; k++) ct_release(o[k]);
    if (st) {
        for (int k = 0; k < 3; k++) ct_release(res[k]);
        return st;
    }
    if (!values) { ct_release(res[0]); res[0] = NULL; }
    if (!inverse) { ct_release(res[1]); res[1] = NULL; }
    if (!counts) { ct_release(res[2]); res[2] = NULL; }
    in[0] = x;
    ct__finish_multi(CT_OP_unique, res, 3, in, 1, &a);
    if (values) *values = res[0];
    if (inverse) *inverse = res[1];
    if (counts) *counts = res[2];
    return CT_OK;
}

ct_status ct_unique(ct_tensor *x, bool return_inverse, bool return_counts, ct_tensor **values,
                    ct_tensor **inverse, ct_tensor **counts) {
    return unique_impl("unique", x, 0, values, return_inverse ? inverse : NULL,
                       return_counts ? counts : NULL);
}
ct_status ct_unique_consecutive(ct_tensor *x, ct_tensor **values, ct_tensor **inverse,
                                ct_tensor **counts) {
    return unique_impl("unique_consecutive", x, 1, values, inverse, counts);
}
