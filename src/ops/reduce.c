/* reduce.c -- reductions, scans, softmax (public functions).  Kernels in
 * src/backend/cpu/reduce.c; sorting ops in src/ops/sort_ops.c.
 *
 * One reduction engine: the dims to reduce are moved to the end of a view
 * (kept dims first, in order), so each output element reduces one row of
 * `inner` elements (the kernel makes the view contiguous). */
#include <math.h>

#include "ew.h"
#include "reduce_impl.h"
#include "fused.h"

/* Releases an output the caller did not ask for (after ct__finish_multi
 * registered it; the autograd node keeps its own handle). */
static void ct__drop(ct_tensor *t) {
    if (!t) return;
    (void)ct__scope_take(t);
    ct_release(t);
}

/* ---- the reduction setup ---------------------------------------------- */
typedef struct {
    int mask[CT_MAX_DIMS];        /* 1: reduced */
    int64_t oshape[CT_MAX_DIMS];  /* output shape */
    int ond;
    int64_t outer, inner;
    int zero_dim;                 /* first reduced dim of size 0, or -1 */
    int keepdim;
} red_setup;

static int red_parse(const char *op, ct_tensor *x, const int64_t *dims, int ndims, bool keepdim,
                     red_setup *r) {
    memset(r, 0, sizeof *r);
    int nd = x->ndim;
    if (ndims < 0 || ndims > CT_MAX_DIMS) {
        ct__error(CT_ERR_ARG, "%s: invalid number of dims %d", op, ndims);
        return -1;
    }
    if (!dims || ndims == 0) {
        for (int d = 0; d < nd; d++) r->mask[d] = 1;
    } else {
        for (int k = 0; k < ndims; k++) {
            int64_t d = ct__wrap_dim(op, dims[k], nd);
            if (d < 0) return -1;
            if (nd == 0) continue;
            if (r->mask[d]) {
                ct__error(CT_ERR_ARG, "%s: dim %lld appears multiple times in the list of dims",
                          op, (long long)d);
                return -1;
            }
            r->mask[d] = 1;
        }
    }
    r->outer = 1;
    r->inner = 1;
    r->zero_dim = -1;
    r->keepdim = keepdim;
    for (int d = 0; d < nd; d++) {
        if (r->mask[d]) {
            r->inner *= x->sizes[d];
            if (x->sizes[d] == 0 && r->zero_dim < 0) r->zero_dim = d;
            if (keepdim) r->oshape[r->ond++] = 1;
        } else {
            r->outer *= x->sizes[d];
            r->oshape[r->ond++] = x->sizes[d];
        }
    }
    return 0;
}

/* The view of x with kept dims first and reduced dims last (refcount 1). */
static ct_tensor *red_view(ct_tensor *x, const red_setup *r) {
    int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int d = 0; d < x->ndim; d++)
            if (r->mask[d] == pass) {
                sz[n] = x->sizes[d];
                st[n] = x->strides[d];
                n++;
            }
    return ct__view_of(x, sz, st, n, x->offset);
}

/* Runs reduction op into fresh outputs of dtypes odt[0..nout); returns
 * status; outs receive new tensors (refcount 1, not registered). */
static ct_status red_run(ct_op op, ct_tensor *x, const red_setup *r, const ct_dtype *odt,
                         int nout, ct_args *a, ct_tensor **outs) {
    for (int k = 0; k < nout; k++) outs[k] = NULL;
    ct_tensor *v = red_view(x, r);
    if (!v) return CT_ERR_OOM;
    ct_status st = CT_OK;
    for (int k = 0; k < nout; k++) {
        outs[k] = ct__alloc(r->oshape, r->ond, odt[k], x->storage->device);
        if (!outs[k]) { st = CT_ERR_OOM; goto done; }
    }
    a->p.reduce.inner = r->inner;
    /* for the derivatives: which dims were reduced, and keepdim */
    for (int d = 0; d < x->ndim; d++) a->p.reduce.reduced[d] = r->mask[d];
    a->p.reduce.reduced_n = x->ndim;
    a->p.reduce.keepdim = r->keepdim;
    {
        ct_tensor *in[1] = {v};
        st = ct__dispatch(op, outs, nout, in, 1, a);
    }
done:
    ct_release(v);
    if (st)
        for (int k = 0; k < nout; k++) { ct_release(outs[k]); outs[k] = NULL; }
    return st;
}

static ct_tensor *red1(ct_op op, ct_tensor *x, const red_setup *r, ct_dtype odt, ct_args *a) {
    ct_tensor *o;
    if (red_run(op, x, r, &odt, 1, a, &o)) return NULL;
    ct_tensor *in[1] = {x};
    return ct__finish(op, o, in, 1, a);
}

static const char *torch_dtype_name(ct_dtype dt) {
    static const char *n[CT_DTYPE_COUNT] = {"Bool", "Byte", "Char", "Short", "Int", "Long", "Half",
                                            "BFloat16", "Float", "Double", "ComplexFloat",
                                            "ComplexDouble"};
    return (unsigned)dt < CT_DTYPE_COUNT && n[dt] ? n[dt] : ct_dtype_name(dt);
}

static ct_status no_complex(const char *op, ct_tensor *x) {
    if (ct_dtype_is_complex(x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: complex input (%s) is not supported", op,
                                ct_dtype_name(x->dtype));
    return CT_OK;
}

/* ---- sum / mean / prod family ------------------------------------------ */
static ct_tensor *accum(ct_op op, const char *name, ct_tensor *x, const int64_t *dims, int ndims,
                        bool keepdim, int dtype_given, ct_dtype dt) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    red_setup r;
    if (red_parse(name, x, dims, ndims, keepdim, &r)) return NULL;
    ct_dtype odt;
    if (dtype_given) {
        if ((unsigned)dt >= CT_DTYPE_COUNT || ct_dtype_is_complex(dt))
            return ct__error(CT_ERR_DTYPE, "%s: unsupported dtype %s", name, ct_dtype_name(dt));
        odt = dt;
    } else if (op == CT_OP_mean || op == CT_OP_nanmean) {
        if (!ct_dtype_is_floating(x->dtype))
            return ct__error(CT_ERR_DTYPE, "%s(): could not infer output dtype. Input dtype must "
                             "be either a floating point or complex dtype. Got: %s", name,
                             torch_dtype_name(x->dtype));
        odt = x->dtype;
    } else {
        odt = ct_dtype_is_integral(x->dtype, true) ? CT_I64 : x->dtype;
    }
    ct_args a = ct__args(op);
    if (dtype_given && dt != x->dtype) {
        /* torch casts the input to dtype first (a recorded cast, so the
         * gradient flows back to x) */
        ct_scope s = ct_scope_begin();
        ct_tensor *c = ct_to_dtype(x, dt);
        ct_tensor *res = c ? ct_keep(red1(op, c, &r, odt, &a)) : NULL;
        ct_scope_end(s);
        return res;
    }
    return red1(op, x, &r, odt, &a);
}

ct_tensor *ct_sum(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return accum(CT_OP_sum, "sum", x, dims, ndims, keepdim, 0, CT_F32);
}
ct_tensor *ct_sum_dtype(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim, ct_dtype dt) {
    return accum(CT_OP_sum, "sum", x, dims, ndims, keepdim, 1, dt);
}
ct_tensor *ct_mean(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return accum(CT_OP_mean, "mean", x, dims, ndims, keepdim, 0, CT_F32);
}
ct_tensor *ct_nansum(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return accum(CT_OP_nansum, "nansum", x, dims, ndims, keepdim, 0, CT_F32);
}
ct_tensor *ct_nanmean(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return accum(CT_OP_nanmean, "nanmean", x, dims, ndims, keepdim, 0, CT_F32);
}
ct_tensor *ct_prod(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return accum(CT_OP_prod, "prod", x, dims, ndims, keepdim, 0, CT_F32);
}

/* ---- amax / amin / all / any / count_nonzero ---------------------------- */
static ct_tensor *amaxmin(ct_op op, const char *name, ct_tensor *x, const int64_t *dims,
                          int ndims, bool keepdim) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    red_setup r;
    if (red_parse(name, x, dims, ndims, keepdim, &r)) return NULL;
    if ((!dims || ndims == 0) && ct_numel(x) == 0)
        return ct__error(CT_ERR_ARG, "%s(): Expected reduction dim to be specified for "
                         "input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                         name);
    if (r.zero_dim >= 0)
        return ct__error(CT_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                         name, r.zero_dim);
    ct_args a = ct__args(op);
    return red1(op, x, &r, x->dtype, &a);
}
ct_tensor *ct_amax(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return amaxmin(CT_OP_amax, "amax", x, dims, ndims, keepdim);
}
ct_tensor *ct_amin(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return amaxmin(CT_OP_amin, "amin", x, dims, ndims, keepdim);
}

static ct_tensor *logic(ct_op op, const char *name, ct_tensor *x, const int64_t *dims, int ndims,
                        bool keepdim) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    red_setup r;
    if (red_parse(name, x, dims, ndims, keepdim, &r)) return NULL;
    ct_dtype odt = op == CT_OP_count_nonzero ? CT_I64 : x->dtype == CT_U8 ? CT_U8 : CT_BOOL;
    ct_args a = ct__args(op);
    return red1(op, x, &r, odt, &a);
}
ct_tensor *ct_all(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return logic(CT_OP_all, "all", x, dims, ndims, keepdim);
}
ct_tensor *ct_any(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return logic(CT_OP_any, "any", x, dims, ndims, keepdim);
}
ct_tensor *ct_count_nonzero(ct_tensor *x, const int64_t *dims, int ndims) {
    return logic(CT_OP_count_nonzero, "count_nonzero", x, dims, ndims, false);
}

/* ---- float reductions -------------------------------------------------- */
static ct_tensor *floatred(ct_op op, const char *name, ct_tensor *x, const int64_t *dims,
                           int ndims, bool keepdim, double correction, double p,
                           bool take_sqrt, int allow_int) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    if (!allow_int && !ct_dtype_is_floating(x->dtype))
        return ct__error(CT_ERR_DTYPE, "%s: input dtype should be either floating point or "
                         "complex. Got %s instead.", name, torch_dtype_name(x->dtype));
    red_setup r;
    if (red_parse(name, x, dims, ndims, keepdim, &r)) return NULL;
    ct_args a = ct__args(op);
    a.p.reduce.correction = correction;
    a.p.reduce.p = p;
    a.p.reduce.take_sqrt = take_sqrt;
    return red1(op, x, &r, ct__float_dtype(x->dtype), &a);
}

ct_tensor *ct_logsumexp(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return floatred(CT_OP_logsumexp, "logsumexp", x, dims, ndims, keepdim, 0, 0, false, 1);
}
ct_tensor *ct_var(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim) {
    return floatred(CT_OP_var, "var", x, dims, ndims, keepdim, correction, 0, false, 0);
}
ct_tensor *ct_std(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim) {
    return floatred(CT_OP_std, "std", x, dims, ndims, keepdim, correction, 0, true, 0);
}
ct_tensor *ct_norm(ct_tensor *x, double p, const int64_t *dims, int ndims, bool keepdim) {
    if (x && isnan(p)) return ct__error(CT_ERR_ARG, "norm: p must not be NaN");
    return floatred(CT_OP_norm, "norm", x, dims, ndims, keepdim, 0, p, false, 0);
}
ct_tensor *ct_norm_fro(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return floatred(CT_OP_norm, "norm", x, dims, ndims, keepdim, 0, 2.0, false, 0);
}

static ct_status var_mean2(ct_op op, const char *name, ct_tensor *x, const int64_t *dims,
                           int ndims, double correction, bool keepdim, ct_tensor **o0,
                           ct_tensor **o1) {
    if (o0) *o0 = NULL;
    if (o1) *o1 = NULL;
    CT_NULLCHECK_OP_S(name, x);
    if (no_complex(name, x)) return CT_ERR_DTYPE;
    if (!ct_dtype_is_floating(x->dtype))
        return ct__error_status(CT_ERR_DTYPE, "%s: input dtype should be either floating point or "
                                "complex. Got %s instead.", name, torch_dtype_name(x->dtype));
    red_setup r;
    if (red_parse(name, x, dims, ndims, keepdim, &r)) return ct_last_error_code();
    ct_args a = ct__args(op);
    a.p.reduce.correction = correction;
    a.p.reduce.take_sqrt = op == CT_OP_std;
    ct_dtype odt[2] = {x->dtype, x->dtype};
    ct_tensor *outs[2];
    ct_status st = red_run(op, x, &r, odt, 2, &a, outs);
    if (st) return st;
    ct_tensor *in[1] = {x};
    ct__finish_multi(op, outs, 2, in, 1, &a);
    if (o0) *o0 = outs[0];
    if (o1) *o1 = outs[1];
    return CT_OK;
}
ct_status ct_var_mean(ct_tensor *x, const int64_t *dims, int ndims, double correction,
                      bool keepdim, ct_tensor **var, ct_tensor **mean) {
    return var_mean2(CT_OP_var, "var_mean", x, dims, ndims, correction, keepdim, var, mean);
}
ct_status ct_std_mean(ct_tensor *x, const int64_t *dims, int ndims, double correction,
                      bool keepdim, ct_tensor **std, ct_tensor **mean) {
    return var_mean2(CT_OP_std, "std_mean", x, dims, ndims, correction, keepdim, std, mean);
}

/* ---- max / min / argmax / aminmax --------------------------------------- */
static ct_tensor *wholemax(ct_op op, const char *name, ct_tensor *x) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    if (ct_numel(x) == 0)
        return ct__error(CT_ERR_ARG, "%s(): Expected reduction dim to be specified for "
                         "input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                         name);
    red_setup r;
    if (red_parse(name, x, NULL, 0, false, &r)) return NULL;
    ct_args a = ct__args(op);
    return red1(op, x, &r, x->dtype, &a);
}
ct_tensor *ct_max(ct_tensor *x) { return wholemax(CT_OP_amax, "max", x); }
ct_tensor *ct_min(ct_tensor *x) { return wholemax(CT_OP_amin, "min", x); }

static ct_status maxmin_dim(ct_op op, const char *name, ct_tensor *x, int64_t dim, bool keepdim,
                            ct_tensor **values, ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP_S(name, x);
    if (no_complex(name, x)) return CT_ERR_DTYPE;
    red_setup r;
    if (red_parse(name, x, &dim, 1, keepdim, &r)) return ct_last_error_code();
    if (r.zero_dim >= 0)
        return ct__error_status(CT_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero "
                                "size.", name, r.zero_dim);
    ct_args a = ct__args(op);
    ct_dtype odt[2] = {x->dtype, CT_I64};
    ct_tensor *outs[2];
    ct_status st = red_run(op, x, &r, odt, 2, &a, outs);
    if (st) return st;
    if (!values) { ct_release(outs[0]); outs[0] = NULL; }
    /* the indices are recorded even when not wanted: the values' gradient
     * is routed with them */
    ct_tensor *in[1] = {x};
    ct__finish_multi(op, outs, 2, in, 1, &a);
    if (values) *values = outs[0];
    if (indices) *indices = outs[1];
    else ct__drop(outs[1]);
    return CT_OK;
}
ct_status ct_max_dim(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                     ct_tensor **indices) {
    return maxmin_dim(CT_OP_max_dim, "max", x, dim, keepdim, values, indices);
}
ct_status ct_min_dim(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **values,
                     ct_tensor **indices) {
    return maxmin_dim(CT_OP_min_dim, "min", x, dim, keepdim, values, indices);
}

static ct_tensor *argmaxmin(ct_op op, const char *name, ct_tensor *x, int64_t dim, bool keepdim) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    red_setup r;
    int all = dim == CT_DIM_NONE;
    if (red_parse(name, x, all ? NULL : &dim, all ? 0 : 1, keepdim, &r)) return NULL;
    if (all && ct_numel(x) == 0)
        return ct__error(CT_ERR_ARG, "%s(): Expected reduction dim to be specified for "
                         "input.numel() == 0.", name);
    if (r.zero_dim >= 0)
        return ct__error(CT_ERR_INDEX, "%s(): Expected reduction dim %d to have non-zero size.",
                         name, r.zero_dim);
    ct_args a = ct__args(op);
    return red1(op, x, &r, CT_I64, &a);
}
ct_tensor *ct_argmax(ct_tensor *x, int64_t dim, bool keepdim) {
    return argmaxmin(CT_OP_argmax, "argmax", x, dim, keepdim);
}
ct_tensor *ct_argmin(ct_tensor *x, int64_t dim, bool keepdim) {
    return argmaxmin(CT_OP_argmin, "argmin", x, dim, keepdim);
}

ct_status ct_aminmax(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **min, ct_tensor **max) {
    if (min) *min = NULL;
    if (max) *max = NULL;
    CT_NULLCHECK_S(x);
    if (no_complex("aminmax", x)) return CT_ERR_DTYPE;
    red_setup r;
    int all = dim == CT_DIM_NONE;
    if (red_parse("aminmax", x, all ? NULL : &dim, all ? 0 : 1, keepdim, &r))
        return ct_last_error_code();
    if (all && ct_numel(x) == 0)
        return ct__error_status(CT_ERR_ARG, "aminmax(): cannot compute aminmax over an empty "
                                "dimension as the operation has no identity.");
    if (r.zero_dim >= 0)
        return ct__error_status(CT_ERR_INDEX, "aminmax(): Expected reduction dim %d to have "
                                "non-zero size.", r.zero_dim);
    ct_args a0 = ct__args(CT_OP_amin), a1 = ct__args(CT_OP_amax);
    ct_tensor *o[2];
    if (red_run(CT_OP_amin, x, &r, &x->dtype, 1, &a0, &o[0])) return ct_last_error_code();
    if (red_run(CT_OP_amax, x, &r, &x->dtype, 1, &a1, &o[1])) {
        ct_release(o[0]);
        return ct_last_error_code();
    }
    ct_tensor *in[1] = {x};
    ct__finish_multi(CT_OP_amax, o, 2, in, 1, &a1);
    if (min) *min = o[0];
    if (max) *max = o[1];
    return CT_OK;
}

/* ---- scans and softmax over (pre, n, post) ----------------------------- */
static int along(const char *name, ct_tensor *x, int64_t dim, ct_args *a) {
    int64_t d = ct__wrap_dim(name, dim, x->ndim);
    if (d < 0) return -1;
    int64_t pre = 1, post = 1, n = 1;
    for (int k = 0; k < x->ndim; k++) {
        if (k < d) pre *= x->sizes[k];
        else if (k > d) post *= x->sizes[k];
        else n = x->sizes[k];
    }
    a->p.scan.pre = pre;
    a->p.scan.n = n;
    a->p.scan.post = post;
    a->p.scan.dim = d;
    return 0;
}

static ct_tensor *scan(ct_op op, const char *name, ct_tensor *x, int64_t dim) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    ct_args a = ct__args(op);
    if (along(name, x, dim, &a)) return NULL;
    ct_dtype odt, kdt;
    if (op == CT_OP_cumsum || op == CT_OP_cumprod) {
        odt = ct_dtype_is_integral(x->dtype, true) ? CT_I64 : x->dtype;
    } else {
        if (!ct_dtype_is_floating(x->dtype))
            return ct__error(CT_ERR_DTYPE, "%s: not implemented for '%s' (expected a floating "
                             "point input)", name, torch_dtype_name(x->dtype));
        odt = x->dtype;
    }
    kdt = (odt == CT_F16 || odt == CT_BF16) ? CT_F32 : odt;
    ct_tensor *o = ct__alloc(x->sizes, x->ndim, kdt, x->storage->device);
    if (!o) return NULL;
    ct_tensor *outs[1] = {o}, *in[1] = {x};
    if (ct__dispatch(op, outs, 1, in, 1, &a)) { ct_release(o); return NULL; }
    if (kdt != odt) {
        ct_tensor *h = ct__contig_as(o, odt);
        ct_release(o);
        if (!h) return NULL;
        o = h;
    }
    return ct__finish(op, o, in, 1, &a);
}
ct_tensor *ct_softmax(ct_tensor *x, int64_t dim) { return scan(CT_OP_softmax, "softmax", x, dim); }
ct_tensor *ct_log_softmax(ct_tensor *x, int64_t dim) {
    return scan(CT_OP_log_softmax, "log_softmax", x, dim);
}
ct_tensor *ct_cumsum(ct_tensor *x, int64_t dim) { return scan(CT_OP_cumsum, "cumsum", x, dim); }
ct_tensor *ct_cumprod(ct_tensor *x, int64_t dim) { return scan(CT_OP_cumprod, "cumprod", x, dim); }
ct_tensor *ct_logcumsumexp(ct_tensor *x, int64_t dim) {
    return scan(CT_OP_logcumsumexp, "logcumsumexp", x, dim);
}

static ct_status cummaxmin(ct_op op, const char *name, ct_tensor *x, int64_t dim,
                           ct_tensor **values, ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP_S(name, x);
    if (no_complex(name, x)) return CT_ERR_DTYPE;
    ct_args a = ct__args(op);
    if (along(name, x, dim, &a)) return ct_last_error_code();
    ct_dtype kdt = (x->dtype == CT_F16 || x->dtype == CT_BF16) ? CT_F32 : x->dtype;
    ct_tensor *o[2] = {ct__alloc(x->sizes, x->ndim, kdt, x->storage->device),
                       ct__alloc(x->sizes, x->ndim, CT_I64, x->storage->device)};
    ct_tensor *in[1] = {x};
    if (!o[0] || !o[1] || ct__dispatch(op, o, 2, in, 1, &a)) {
        ct_release(o[0]);
        ct_release(o[1]);
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    if (kdt != x->dtype) {
        ct_tensor *h = ct__contig_as(o[0], x->dtype);
        ct_release(o[0]);
        o[0] = h;
        if (!h) { ct_release(o[1]); return ct_last_error_code(); }
    }
    if (!values) { ct_release(o[0]); o[0] = NULL; }
    ct__finish_multi(op, o, 2, in, 1, &a); /* indices recorded: they route the gradient */
    if (values) *values = o[0];
    if (indices) *indices = o[1];
    else ct__drop(o[1]);
    return CT_OK;
}
ct_status ct_cummax(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) {
    return cummaxmin(CT_OP_cummax, "cummax", x, dim, values, indices);
}
ct_status ct_cummin(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) {
    return cummaxmin(CT_OP_cummin, "cummin", x, dim, values, indices);
}

/* ---- softmax backward (fused) ------------------------------------------ */
ct_tensor *ct__softmax_backward(ct_tensor *g, ct_tensor *y, int64_t dim, int log) {
    CT_NULLCHECK(g);
    CT_NULLCHECK(y);
    const char *name = log ? "log_softmax_backward" : "softmax_backward";
    ct_op op = log ? CT_OP_log_softmax_backward : CT_OP_softmax_backward;
    int same = g->dtype == y->dtype && g->ndim == y->ndim &&
               !memcmp(g->sizes, y->sizes, sizeof(int64_t) * (size_t)y->ndim) &&
               (y->dtype == CT_F32 || y->dtype == CT_F64) && y->ndim > 0 &&
               g->storage->device == y->storage->device;
    ct_tensor *gy[2] = {g, y};
    /* the composite: broadcasting, other dtypes, 0-d, recorded (double
     * backward), or no kernel on this device (or disabled: fused.h) */
    if (!same || ct__ag_active(gy, 2) || !ct__fused_kernel(op, y->storage->device)) {
        int64_t d = dim;
        int nd = y->ndim ? 1 : 0;
        ct_scope s = ct_scope_begin();
        ct_tensor *r = log ? ct_sub(g, ct_mul(ct_exp(y), ct_sum(g, &d, nd, true)))
                           : ct_mul(y, ct_sub(g, ct_sum(ct_mul(g, y), &d, nd, true)));
        r = ct_keep(r);
        ct_scope_end(s);
        return r;
    }
    ct_args a = ct__args(op);
    if (along(name, y, dim, &a)) return NULL;
    ct_tensor *o = ct__alloc(y->sizes, y->ndim, y->dtype, y->storage->device);
    if (!o) return NULL;
    ct_tensor *outs[1] = {o}, *in[2] = {g, y};
    if (ct__dispatch(op, outs, 1, in, 2, &a)) { ct_release(o); return NULL; }
    return ct__finish(op, o, in, 2, &a);
}
