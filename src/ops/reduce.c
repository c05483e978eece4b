/* reduce.c -- reductions, scans, softmax (public functions).  Kernels in
 * src/backend/cpu/reduce.c; sorting ops in src/ops/sort_ops.c.
 *
 * One reduction engine: the dims to reduce are moved to the end of a view
 * (kept dims first, in order), so each output element reduces one row of
 * `inner` elements (the kernel makes the view contiguous). */
#include <math.h>

#include "ew.h"
#include "autocast.h"
#include "meta.h"
#include "reduce_impl.h"
#include "fused.h"

/* ---- the reduction setup ---------------------------------------------- */
/* Preparation: the dims argument as the op's parameters: reduced[] (each dim
 * wrapped, once), reduced_n, keepdim, inner and whole (no dims given).  The
 * output's shape, dtype and every other check are the meta function's
 * (ct__meta_reduce); the kernel reduces the view with the reduced dims last. */
static int red_parse(const char *op, ct_tensor *x, const int64_t *dims, int ndims, bool keepdim,
                     ct_args *a) {
    ct_p_reduce *p = &a->p.reduce;
    int nd = x->ndim;
    if (ndims < 0 || ndims > CT_MAX_DIMS) {
        ct__error(CT_ERR_ARG, "%s: invalid number of dims %d", op, ndims);
        return -1;
    }
    if (!dims || ndims == 0) {
        for (int d = 0; d < nd; d++) p->reduced[d] = 1;
        p->whole = true;
    } else {
        for (int k = 0; k < ndims; k++) {
            int64_t d = ct__wrap_dim(op, dims[k], nd);
            if (d < 0) return -1;
            if (nd == 0) continue;
            if (p->reduced[d]) {
                ct__error(CT_ERR_ARG, "%s: dim %lld appears multiple times in the list of dims",
                          op, (long long)d);
                return -1;
            }
            p->reduced[d] = 1;
        }
    }
    int64_t inner = 1;
    for (int d = 0; d < nd; d++)
        if (p->reduced[d]) inner *= x->sizes[d];
    p->reduced_n = nd;
    p->keepdim = keepdim;
    p->inner = inner;
    return 0;
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

static int is_half(ct_dtype dt) { return dt == CT_F16 || dt == CT_BF16; }
/* ct_dtype_is_complex / _is_floating / _is_integral(dt, true), inline: the
 * meta functions run on every call */
static inline bool is_cplx(ct_dtype dt) { return dt == CT_C64 || dt == CT_C128 || dt == CT_C32; }
static inline bool is_flt(ct_dtype dt) { return dt >= CT_F16 && dt <= CT_F64; }
static inline bool is_int(ct_dtype dt) { return (unsigned)dt <= CT_I64; }

/* The meta function of every reduction: in[0] the input, a->p.reduce as
 * red_parse made it.  Outputs: the kept sizes (1 for a reduced dim with
 * keepdim); the dtype: sum / nansum / prod promote integers (bool too) to
 * int64, mean / nanmean and var / std / norm want floats, logsumexp gives
 * the float dtype, all / any bool (uint8 for uint8), count_nonzero and the
 * indices (argmax, max_dim's out[1]) int64, `dtype=` wins where given.
 * var / std with nout 2 (var_mean, std_mean) give the mean too. */
CT_META_FN(ct__meta_reduce) {
    (void)nin;
    const ct_p_reduce *p = &a->p.reduce;
    ct_op op = a->op;
    ct_tensor *x = in[0];
    const char *name = op == CT_OP_max_dim ? "max" : op == CT_OP_min_dim ? "min"
                                                                         : ct__op_info[op].name;
    if (op == CT_OP_norm && isnan(p->p)) return ct__error_status(CT_ERR_ARG, "norm: p must not be NaN");
    if (is_cplx(x->dtype)) return no_complex(name, x);
    if (p->reduced_n != x->ndim)
        return ct__error_status(CT_ERR_ARG, "%s: %d reduced-dim flags for a %d-dim input", name,
                                p->reduced_n, x->ndim);
    int64_t *sizes = out[0].sizes;
    int ond = 0, zero_dim = -1;
    for (int d = 0; d < x->ndim; d++) {
        if (p->reduced[d]) {
            if (x->sizes[d] == 0 && zero_dim < 0) zero_dim = d;
            if (p->keepdim) sizes[ond++] = 1;
        } else {
            sizes[ond++] = x->sizes[d];
        }
    }
    ct_dtype odt = x->dtype;
    switch (op) {
    case CT_OP_sum: case CT_OP_nansum: case CT_OP_prod:
    case CT_OP_mean: case CT_OP_nanmean:
        if (p->has_dtype) {
            if ((unsigned)p->dtype >= CT_DTYPE_COUNT || ct_dtype_is_complex(p->dtype))
                return ct__error_status(CT_ERR_DTYPE, "%s: unsupported dtype %s", name,
                                        ct_dtype_name(p->dtype));
            odt = p->dtype;
        } else if (op == CT_OP_mean || op == CT_OP_nanmean) {
            if (!is_flt(x->dtype))
                return ct__error_status(CT_ERR_DTYPE, "%s(): could not infer output dtype. Input "
                                        "dtype must be either a floating point or complex dtype. "
                                        "Got: %s", name, torch_dtype_name(x->dtype));
        } else if (is_int(x->dtype)) {
            odt = CT_I64;
        }
        break;
    case CT_OP_amax: case CT_OP_amin: case CT_OP_argmax: case CT_OP_argmin:
    case CT_OP_max_dim: case CT_OP_min_dim:
        if (p->whole && ct_numel(x) == 0) {
            if (op == CT_OP_amax || op == CT_OP_amin)
                return ct__error_status(CT_ERR_ARG, "%s(): Expected reduction dim to be specified "
                                        "for input.numel() == 0. Specify the reduction dim with "
                                        "the 'dim' argument.", name);
            if (op == CT_OP_argmax || op == CT_OP_argmin)
                return ct__error_status(CT_ERR_ARG, "%s(): Expected reduction dim to be specified "
                                        "for input.numel() == 0.", name);
        }
        if (zero_dim >= 0)
            return ct__error_status(CT_ERR_INDEX, "%s(): Expected reduction dim %d to have "
                                    "non-zero size.", name, zero_dim);
        if (op == CT_OP_argmax || op == CT_OP_argmin) odt = CT_I64;
        break;
    case CT_OP_all: case CT_OP_any:
        odt = x->dtype == CT_U8 ? CT_U8 : CT_BOOL;
        break;
    case CT_OP_count_nonzero:
        odt = CT_I64;
        break;
    case CT_OP_var: case CT_OP_std: case CT_OP_norm:
        if (!is_flt(x->dtype))
            return ct__error_status(CT_ERR_DTYPE, "%s: input dtype should be either floating point "
                                    "or complex. Got %s instead.", name,
                                    torch_dtype_name(x->dtype));
        odt = ct__float_dtype(x->dtype);
        break;
    case CT_OP_logsumexp:
        odt = ct__float_dtype(x->dtype);
        break;
    default:
        return ct__error_status(CT_ERR_RUNTIME, "%s: not a reduction", name);
    }
    /* out[0]'s sizes are written above; ct__meta_run zeroed its flags */
    out[0].ndim = ond;
    out[0].dtype = odt;
    out[0].device = x->storage->device;
    for (int k = 1; k < nout; k++)
        ct__meta_same(&out[k], &out[0],
                      op == CT_OP_max_dim || op == CT_OP_min_dim ? CT_I64 : odt);
    return CT_OK;
}

/* Releases an output the caller did not ask for (after ct__finish_multi
 * registered it; the autograd node keeps its own handle). */
static void ct__drop(ct_tensor *t) {
    if (!t) return;
    (void)ct__scope_take(t);
    ct_release(t);
}

ct_status ct__red_pair(ct_op op, ct_tensor *x, const ct_args *a, int half, ct_tensor **values,
                       ct_tensor **indices) {
    ct_meta m[2];
    ct_tensor *in[1] = {x};
    ct_status st = ct__meta_run(op, m, 2, in, 1, a);
    if (st) return st;
    ct_dtype vdt = m[0].dtype;
    int conv = half && is_half(vdt);
    ct_tensor *kx = x;
    if (conv && half == 2) {
        kx = ct__contig_as(x, CT_F32);
        if (!kx) return ct_last_error_code();
    }
    if (conv) m[0].dtype = CT_F32;
    ct_tensor *o[2] = {ct__meta_new(&m[0], in), ct__meta_new(&m[1], in)};
    ct_tensor *kin[1] = {kx};
    if (!o[0] || !o[1] || ct__dispatch(op, o, 2, kin, 1, a)) {
        if (kx != x) ct_release(kx);
        ct_release(o[0]);
        ct_release(o[1]);
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    if (kx != x) ct_release(kx);
    if (conv) {
        ct_tensor *h = ct__contig_as(o[0], vdt);
        ct_release(o[0]);
        o[0] = h;
        if (!h) { ct_release(o[1]); return ct_last_error_code(); }
    }
    if (!values) { ct_release(o[0]); o[0] = NULL; }
    /* the indices are recorded even when not wanted: the values' gradient
     * is routed with them */
    ct__finish_multi(op, o, 2, in, 1, a);
    if (values) *values = o[0];
    if (indices) *indices = o[1];
    else ct__drop(o[1]);
    return CT_OK;
}

/* The runner's allocate -> dispatch -> record from a meta computed before
 * (on another tensor of the same geometry: the input before a cast). */
static ct_tensor *run_meta1(ct_op op, const ct_meta *m, ct_tensor *x, const ct_args *a) {
    ct_tensor *in[1] = {x};
    ct_tensor *o = ct__meta_new(m, in);
    if (!o) return NULL;
    ct_tensor *outs[1] = {o};
    if (ct__dispatch(op, outs, 1, in, 1, a)) { ct_release(o); return NULL; }
    return ct__finish(op, o, in, 1, a);
}

/* ---- sum / mean / prod family ------------------------------------------ */
static ct_tensor *accum(ct_op op, const char *name, ct_tensor *x, const int64_t *dims, int ndims,
                        bool keepdim, int dtype_given, ct_dtype dt) {
    CT_NULLCHECK_OP(name, x);
    ct_args a = ct__args(op);
    if (red_parse(name, x, dims, ndims, keepdim, &a)) return NULL;
    if (dtype_given) {
        a.p.reduce.has_dtype = true;
        a.p.reduce.dtype = dt;
    }
    if (!dtype_given || dt == x->dtype) return ct__op(op, &x, 1, &a);
    /* torch casts the input to dtype first (a recorded cast, so the gradient
     * flows back to x); the meta (checked before the cast) is the cast's:
     * the sizes are x's and the result dtype is dtype */
    ct_meta m;
    if (ct__meta_run(op, &m, 1, &x, 1, &a)) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *c = ct_to_dtype(x, dt);
    ct_tensor *res = c ? ct_keep(run_meta1(op, &m, c, &a)) : NULL;
    ct_scope_end(s);
    return res;
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
    CT_AUTOCAST_OP(CT_AC_prod, ct_prod(CT_AC_ARG(0), dims, ndims, keepdim), x);
    return accum(CT_OP_prod, "prod", x, dims, ndims, keepdim, 0, CT_F32);
}

/* ---- the other reductions: preparation, then the runner ------------------ */
static ct_tensor *red(ct_op op, const char *name, ct_tensor *x, const int64_t *dims, int ndims,
                      bool keepdim) {
    CT_NULLCHECK_OP(name, x);
    ct_args a = ct__args(op);
    if (red_parse(name, x, dims, ndims, keepdim, &a)) return NULL;
    return ct__op(op, &x, 1, &a);
}

ct_tensor *ct_amax(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return red(CT_OP_amax, "amax", x, dims, ndims, keepdim);
}
ct_tensor *ct_amin(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return red(CT_OP_amin, "amin", x, dims, ndims, keepdim);
}
ct_tensor *ct_all(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return red(CT_OP_all, "all", x, dims, ndims, keepdim);
}
ct_tensor *ct_any(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return red(CT_OP_any, "any", x, dims, ndims, keepdim);
}
ct_tensor *ct_count_nonzero(ct_tensor *x, const int64_t *dims, int ndims) {
    return red(CT_OP_count_nonzero, "count_nonzero", x, dims, ndims, false);
}

/* ---- float reductions -------------------------------------------------- */
static ct_tensor *floatred(ct_op op, const char *name, ct_tensor *x, const int64_t *dims,
                           int ndims, bool keepdim, double correction, double p,
                           bool take_sqrt) {
    CT_NULLCHECK_OP(name, x);
    ct_args a = ct__args(op);
    if (red_parse(name, x, dims, ndims, keepdim, &a)) return NULL;
    a.p.reduce.correction = correction;
    a.p.reduce.p = p;
    a.p.reduce.take_sqrt = take_sqrt;
    return ct__op(op, &x, 1, &a);
}

ct_tensor *ct_logsumexp(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return floatred(CT_OP_logsumexp, "logsumexp", x, dims, ndims, keepdim, 0, 0, false);
}
ct_tensor *ct_var(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim) {
    return floatred(CT_OP_var, "var", x, dims, ndims, keepdim, correction, 0, false);
}
ct_tensor *ct_std(ct_tensor *x, const int64_t *dims, int ndims, double correction, bool keepdim) {
    return floatred(CT_OP_std, "std", x, dims, ndims, keepdim, correction, 0, true);
}
ct_tensor *ct_norm(ct_tensor *x, double p, const int64_t *dims, int ndims, bool keepdim) {
    return floatred(CT_OP_norm, "norm", x, dims, ndims, keepdim, 0, p, false);
}
ct_tensor *ct_norm_fro(ct_tensor *x, const int64_t *dims, int ndims, bool keepdim) {
    return floatred(CT_OP_norm, "norm", x, dims, ndims, keepdim, 0, 2.0, false);
}

/* var_mean / std_mean: the var / std op with two outputs.  Their own names in
 * the messages, so the input checks come first (the meta's then pass). */
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
    ct_args a = ct__args(op);
    if (red_parse(name, x, dims, ndims, keepdim, &a)) return ct_last_error_code();
    a.p.reduce.correction = correction;
    a.p.reduce.take_sqrt = op == CT_OP_std;
    ct_tensor *outs[2];
    ct_status st = ct__op_multi(op, outs, 2, &x, 1, &a);
    if (st) return st;
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
/* max(x) / min(x): amax / amin of every dim under their own names (their
 * checks first; the meta's then pass). */
static ct_tensor *wholemax(ct_op op, const char *name, ct_tensor *x) {
    CT_NULLCHECK_OP(name, x);
    if (no_complex(name, x)) return NULL;
    if (ct_numel(x) == 0)
        return ct__error(CT_ERR_ARG, "%s(): Expected reduction dim to be specified for "
                         "input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
                         name);
    return red(op, name, x, NULL, 0, false);
}
ct_tensor *ct_max(ct_tensor *x) { return wholemax(CT_OP_amax, "max", x); }
ct_tensor *ct_min(ct_tensor *x) { return wholemax(CT_OP_amin, "min", x); }

static ct_status maxmin_dim(ct_op op, const char *name, ct_tensor *x, int64_t dim, bool keepdim,
                            ct_tensor **values, ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP_S(name, x);
    ct_args a = ct__args(op);
    if (red_parse(name, x, &dim, 1, keepdim, &a)) return ct_last_error_code();
    return ct__red_pair(op, x, &a, 0, values, indices);
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
    int all = dim == CT_DIM_NONE;
    return red(op, name, x, all ? NULL : &dim, all ? 0 : 1, keepdim);
}
ct_tensor *ct_argmax(ct_tensor *x, int64_t dim, bool keepdim) {
    return argmaxmin(CT_OP_argmax, "argmax", x, dim, keepdim);
}
ct_tensor *ct_argmin(ct_tensor *x, int64_t dim, bool keepdim) {
    return argmaxmin(CT_OP_argmin, "argmin", x, dim, keepdim);
}

/* aminmax: the amin and amax kernels into two outputs recorded as one amax
 * node; its own messages first, then amin's meta gives both outputs. */
ct_status ct_aminmax(ct_tensor *x, int64_t dim, bool keepdim, ct_tensor **min, ct_tensor **max) {
    if (min) *min = NULL;
    if (max) *max = NULL;
    CT_NULLCHECK_S(x);
    if (no_complex("aminmax", x)) return CT_ERR_DTYPE;
    ct_args a0 = ct__args(CT_OP_amin);
    int all = dim == CT_DIM_NONE;
    if (red_parse("aminmax", x, all ? NULL : &dim, all ? 0 : 1, keepdim, &a0))
        return ct_last_error_code();
    if (all && ct_numel(x) == 0)
        return ct__error_status(CT_ERR_ARG, "aminmax(): cannot compute aminmax over an empty "
                                "dimension as the operation has no identity.");
    for (int d = 0; d < x->ndim; d++)
        if (a0.p.reduce.reduced[d] && x->sizes[d] == 0)
            return ct__error_status(CT_ERR_INDEX, "aminmax(): Expected reduction dim %d to have "
                                    "non-zero size.", d);
    ct_args a1 = a0;
    a1.op = CT_OP_amax;
    ct_meta m;
    if (ct__meta_run(CT_OP_amin, &m, 1, &x, 1, &a0)) return ct_last_error_code();
    ct_tensor *in[1] = {x};
    ct_tensor *o[2] = {ct__meta_new(&m, in), ct__meta_new(&m, in)};
    if (!o[0] || !o[1] || ct__dispatch(CT_OP_amin, &o[0], 1, in, 1, &a0) ||
        ct__dispatch(CT_OP_amax, &o[1], 1, in, 1, &a1)) {
        ct_release(o[0]);
        ct_release(o[1]);
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
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

/* The meta function of softmax, log_softmax and the scans: x's sizes;
 * cumsum / cumprod promote integers (bool too) to int64, the others want
 * floats; cummax / cummin give int64 indices as out[1]. */
CT_META_FN(ct__meta_scan) {
    (void)nin;
    ct_op op = a->op;
    ct_tensor *x = in[0];
    const char *name = ct__op_info[op].name;
    if (is_cplx(x->dtype)) return no_complex(name, x);
    ct_dtype odt = x->dtype;
    if (op == CT_OP_cumsum || op == CT_OP_cumprod) {
        if (is_int(x->dtype)) odt = CT_I64;
    } else if (op != CT_OP_cummax && op != CT_OP_cummin) {
        if (!is_flt(x->dtype))
            return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for '%s' (expected a "
                                    "floating point input)", name, torch_dtype_name(x->dtype));
    }
    /* x's sizes (ct__meta_run zeroed the flags) */
    out[0].ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) out[0].sizes[d] = x->sizes[d];
    out[0].dtype = odt;
    out[0].device = x->storage->device;
    for (int k = 1; k < nout; k++) ct__meta_same(&out[k], &out[0], CT_I64);
    return CT_OK;
}

static ct_tensor *scan(ct_op op, const char *name, ct_tensor *x, int64_t dim) {
    CT_NULLCHECK_OP(name, x);
    ct_args a = ct__args(op);
    if (along(name, x, dim, &a)) return NULL;
    ct_tensor *in[1] = {x};
    ct_meta m;
    if (ct__meta_run(op, &m, 1, in, 1, &a)) return NULL;
    /* halves: computed in f32 and converted back after, unless the
     * device's kernel reads and writes them itself (ct__half_native) */
    ct_dtype odt = m.dtype;
    if (is_half(odt) && !ct__half_native(x->storage->device, op, odt)) m.dtype = CT_F32;
    ct_tensor *o = ct__meta_new(&m, in);
    if (!o) return NULL;
    ct_tensor *outs[1] = {o};
    if (ct__dispatch(op, outs, 1, in, 1, &a)) { ct_release(o); return NULL; }
    if (m.dtype != odt) {
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

/* ---- cross entropy on half logits (src/nn/loss.c) -------------------------- */
CT_META_FN(ct__meta_softmax_float) {
    if (ct__meta_scan(out, nout, in, nin, a)) return ct_last_error_code();
    if (!is_half(in[0]->dtype))
        return ct__error_status(CT_ERR_DTYPE, "softmax_float: expected a float16 or bfloat16 input, got %s",
                                ct_dtype_name(in[0]->dtype));
    out[0].dtype = CT_F32;
    return CT_OK;
}

ct_tensor *ct__softmax_float(ct_tensor *x, int64_t dim) {
    CT_NULLCHECK_OP("softmax_float", x);
    ct_args a = ct__args(CT_OP_softmax_float);
    if (along("softmax_float", x, dim, &a)) return NULL;
    return ct__op(CT_OP_softmax_float, (ct_tensor *[]){x}, 1, &a);
}

CT_META_FN(ct__meta_ce_grad_lp) {
    (void)nout;
    const char *fn = "ce_grad_lp";
    if (nin != 3) return ct__error_status(CT_ERR_ARG, "%s: expected 3 inputs, got %d", fn, nin);
    ct_tensor *p = in[0], *t = in[1], *c = in[2];
    ct_dtype odt = (ct_dtype)a->p.ce_grad.out_dtype;
    if (p->dtype != CT_F32 || t->dtype != CT_I64 || c->dtype != CT_F32 || !is_half(odt))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected p float32, target int64, coef float32 and a "
                                "float16/bfloat16 result, got %s, %s, %s and %s", fn, ct_dtype_name(p->dtype),
                                ct_dtype_name(t->dtype), ct_dtype_name(c->dtype), ct_dtype_name(odt));
    if (p->ndim != 2 || t->ndim != 1 || c->ndim != 1 || t->sizes[0] != p->sizes[0] || c->sizes[0] != p->sizes[0])
        return ct__error_status(CT_ERR_SHAPE, "%s: expected p [N, C], target [N] and coef [N], got %s, %s and %s",
                                fn, ct__tshape(p), ct__tshape(t), ct__tshape(c));
    ct_device dev;
    if (ct__meta_device(fn, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(&out[0], p->sizes, 2, odt, dev);
    return CT_OK;
}

ct_tensor *ct__ce_grad_lp(ct_tensor *p, ct_tensor *t, ct_tensor *coef, int64_t ignore, ct_dtype odt) {
    CT_NULLCHECK(p);
    CT_NULLCHECK(t);
    CT_NULLCHECK(coef);
    ct_args a = ct__args(CT_OP_ce_grad_lp);
    a.p.ce_grad.ignore_index = ignore;
    a.p.ce_grad.out_dtype = (int64_t)odt;
    return ct__op(CT_OP_ce_grad_lp, (ct_tensor *[]){p, t, coef}, 3, &a);
}

static ct_status cummaxmin(ct_op op, const char *name, ct_tensor *x, int64_t dim,
                           ct_tensor **values, ct_tensor **indices) {
    if (values) *values = NULL;
    if (indices) *indices = NULL;
    CT_NULLCHECK_OP_S(name, x);
    ct_args a = ct__args(op);
    if (along(name, x, dim, &a)) return ct_last_error_code();
    return ct__red_pair(op, x, &a, 1, values, indices);
}
ct_status ct_cummax(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) {
    return cummaxmin(CT_OP_cummax, "cummax", x, dim, values, indices);
}
ct_status ct_cummin(ct_tensor *x, int64_t dim, ct_tensor **values, ct_tensor **indices) {
    return cummaxmin(CT_OP_cummin, "cummin", x, dim, values, indices);
}

/* ---- softmax backward (fused) ------------------------------------------ */
/* The meta function of softmax_backward / log_softmax_backward: g and y of
 * one shape (rank >= 1) and dtype, f32 or f64, on one device, the scan
 * params (pre, n, post) those of y's dim; the gradient is y's shape. */
CT_META_FN(ct__meta_softmax_backward) {
    (void)nout;
    const char *name = ct__op_info[a->op].name;
    if (nin != 2) return ct__error_status(CT_ERR_ARG, "%s: expected 2 inputs, got %d", name, nin);
    ct_tensor *g = in[0], *y = in[1];
    if (g->dtype != y->dtype || (y->dtype != CT_F32 && y->dtype != CT_F64))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected a gradient and an output of one dtype, "
                                "float32 or float64, got %s and %s", name, ct_dtype_name(g->dtype),
                                ct_dtype_name(y->dtype));
    if (g->storage->device != y->storage->device)
        return ct__error_status(CT_ERR_DEVICE, "%s: expected all tensors on the same device, got %s and %s",
                                name, ct_device_name(g->storage->device), ct_device_name(y->storage->device));
    if (y->ndim < 1 || g->ndim != y->ndim || memcmp(g->sizes, y->sizes, sizeof(int64_t) * (size_t)y->ndim))
        return ct__error_status(CT_ERR_SHAPE, "%s: expected a gradient of shape %s (at least 1 dim), got %s",
                                name, ct__tshape(y), ct__tshape(g));
    const ct_p_scan *p = &a->p.scan;
    if (p->dim < 0 || p->dim >= y->ndim || p->n != y->sizes[p->dim] || p->pre * p->n * p->post != ct_numel(y))
        return ct__error_status(CT_ERR_ARG, "%s: the params (dim %lld: %lld x %lld x %lld) do not split %s",
                                name, (long long)p->dim, (long long)p->pre, (long long)p->n,
                                (long long)p->post, ct__tshape(y));
    ct__meta_like(&out[0], y, y->dtype);
    return CT_OK;
}

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
    ct_args a = ct__args(op);
    ct_meta m;
    bool fused = same && !ct__ag_active(gy, 2);
    if (fused) { /* what the op takes: its checks, on both of its paths
                  * (the meta function sets all of m) */
        if (along(name, y, dim, &a) || ct__meta_softmax_backward(&m, 1, gy, 2, &a)) return NULL;
        fused = ct__fused_kernel(op, y->storage->device) != NULL;
    }
    /* the composite: broadcasting, other dtypes, 0-d, recorded (double
     * backward), or no kernel on this device (or disabled: fused.h) */
    if (!fused) {
        int64_t d = dim;
        int nd = y->ndim ? 1 : 0;
        ct_scope s = ct_scope_begin();
        ct_tensor *r = log ? ct_sub(g, ct_mul(ct_exp(y), ct_sum(g, &d, nd, true)))
                           : ct_mul(y, ct_sub(g, ct_sum(ct_mul(g, y), &d, nd, true)));
        r = ct_keep(r);
        ct_scope_end(s);
        return r;
    }
    ct_tensor *o = ct__meta_new(&m, gy);
    if (!o) return NULL;
    if (ct__dispatch(op, &o, 1, gy, 2, &a)) { ct_release(o); return NULL; }
    return ct__finish(op, o, gy, 2, &a);
}
