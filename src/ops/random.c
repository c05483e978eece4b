/* random.c -- the public random ops: factories (rand, randn, randint,
 * randperm, *_like), in-place samplers (uniform_, normal_, exponential_,
 * random_, bernoulli_), bernoulli, multinomial and dropout.  Kernels are in
 * src/backend/cpu/random.c; the generator state in src/core/random.c. */
#include <math.h>

#include "ew.h"
#include "../core/random_impl.h"
#include "meta.h"

/* Fills t (any layout) by running the random kernel `op` with args a,
 * after reserving the generator counters.  per_block: elements per Philox
 * block; kdt: the dtype the kernel writes (t's dtype when it has a kernel). */
static ct_status fill_random(ct_op op, ct_tensor *t, ct_args *a, int64_t per_block, ct_dtype kdt,
                             ct_tensor *const *in, int nin) {
    /* meta tensors have no values to draw (nor draw from the generator) */
    if (t->storage->device == CT_META) return CT_OK;
    int64_t n = ct_numel(t);
    uint64_t seed, off;
    ct__rng_reserve(ct__blocks(n, per_block), &seed, &off);
    a->p.random.seed = (int64_t)seed;
    a->p.random.offset = (int64_t)off;
    if (t->dtype == kdt && ct__is_contiguous(t)) {
        ct_tensor *o[1] = {t};
        return ct__dispatch(op, o, 1, in, nin, a);
    }
    ct_tensor *tmp = ct__alloc(t->sizes, t->ndim, kdt, t->storage->device);
    if (!tmp) return ct_last_error_code();
    ct_tensor *o[1] = {tmp};
    ct_status st = ct__dispatch(op, o, 1, in, nin, a);
    if (!st && !ct_copy_(t, tmp)) st = ct_last_error_code();
    ct_release(tmp);
    return st;
}

/* f16/bf16 are sampled in f32. */
static ct_dtype float_kernel_dtype(ct_dtype dt) { return dt == CT_F64 ? CT_F64 : CT_F32; }

static bool is_real_float(ct_dtype dt) { return ct_dtype_is_floating(dt); }

static const char *dtype_name_or(ct_dtype dt) {
    return (unsigned)dt < CT_DTYPE_COUNT ? ct_dtype_name(dt) : "?";
}

/* Largest integer m such that every integer in [-m, m] is exact in dt. */
static int64_t dtype_int_max(ct_dtype dt, int64_t *min) {
    switch (dt) {
    case CT_BOOL: *min = 0; return 1;
    case CT_U8: *min = 0; return 255;
    case CT_I8: *min = -128; return 127;
    case CT_I16: *min = -32768; return 32767;
    case CT_I32: *min = INT32_MIN; return INT32_MAX;
    case CT_I64: *min = INT64_MIN; return INT64_MAX;
    case CT_F16: *min = -(1 << 11); return 1 << 11;
    case CT_BF16: *min = -(1 << 8); return 1 << 8;
    case CT_F32: *min = -(1 << 24); return 1 << 24;
    case CT_F64: *min = -(INT64_C(1) << 53); return INT64_C(1) << 53;
    default: *min = 0; return -1;
    }
}

static ct_status check_int_range(const char *name, int64_t from, int64_t to, ct_dtype dt) {
    if ((unsigned)dt >= CT_DTYPE_COUNT || ct_dtype_is_complex(dt))
        return ct__error_status(CT_ERR_DTYPE, "%s: \"random_\" not implemented for '%s'", name,
                                dtype_name_or(dt));
    if (from >= to)
        return ct__error_status(CT_ERR_ARG, "%s: random_ expects 'from' to be less than 'to', but "
                                "got from=%lld >= to=%lld", name, (long long)from, (long long)to);
    int64_t mn, mx = dtype_int_max(dt, &mn);
    if (from < mn || from > mx)
        return ct__error_status(CT_ERR_ARG, "%s: from is out of bounds for %s", name, ct_dtype_name(dt));
    if (to - 1 < mn || to - 1 > mx)
        return ct__error_status(CT_ERR_ARG, "%s: to - 1 is out of bounds for %s", name, ct_dtype_name(dt));
    return CT_OK;
}

/* out := the params' shape, dtype and device (a factory's or an in-place
 * form's tensor). */
static ct_status shaped(ct_meta *out, const char *name, const ct_p_random *p) {
    int ndim = p->shape_n;
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_ARG, "%s: ndim must be in [0, %d], got %d", name, CT_MAX_DIMS, ndim);
    if (ct__shape_numel(name, p->shape, ndim) < 0) return ct_last_error_code();
    ct__meta_set(out, p->shape, ndim, p->dtype, (ct_device)p->device);
    return CT_OK;
}

/* Every random op: its argument checks (the factories' and the in-place
 * forms' messages differ: p->inplace) and its result.  The checks of the
 * probabilities bernoulli and multinomial draw from read data: their
 * public functions make them. */
CT_META_FN(ct__meta_random) {
    (void)nout;
    const ct_p_random *p = &a->p.random;
    ct_dtype dt = p->dtype;
    bool bad_float = (unsigned)dt >= CT_DTYPE_COUNT || !is_real_float(dt);
    switch (a->op) {
    case CT_OP_uniform:
        if (!p->inplace) {
            if (bad_float)
                return ct__error_status(CT_ERR_DTYPE, "rand: \"check_uniform_bounds\" not implemented for "
                                        "'%s' (expected a floating point dtype)", dtype_name_or(dt));
            return shaped(out, "rand", p);
        }
        if (bad_float)
            return ct__error_status(CT_ERR_DTYPE, "uniform_: \"check_uniform_bounds\" not implemented "
                                    "for '%s'", dtype_name_or(dt));
        if (!(p->from <= p->to))
            return ct__error_status(CT_ERR_ARG, "uniform_: expects to return a [from, to) range, but "
                                    "found from=%g > to=%g", p->from, p->to);
        if (!isfinite(p->to - p->from))
            return ct__error_status(CT_ERR_ARG, "uniform_: [from, to) is not finite (from=%g, to=%g)",
                                    p->from, p->to);
        return shaped(out, "uniform_", p);
    case CT_OP_normal:
        if (!p->inplace) {
            if (bad_float)
                return ct__error_status(CT_ERR_DTYPE, "randn: \"normal_kernel_cpu\" not implemented for "
                                        "'%s' (normal expects a floating point dtype)", dtype_name_or(dt));
            return shaped(out, "randn", p);
        }
        if (bad_float)
            return ct__error_status(CT_ERR_DTYPE, "normal_: \"normal_kernel_cpu\" not implemented for '%s'",
                                    dtype_name_or(dt));
        if (!(p->std >= 0.0))
            return ct__error_status(CT_ERR_ARG, "normal_: normal expects std >= 0.0, but found std %g", p->std);
        return shaped(out, "normal_", p);
    case CT_OP_exponential: /* only in place (exponential_) */
        if (bad_float)
            return ct__error_status(CT_ERR_DTYPE, "exponential_: \"exponential_cpu\" not implemented for '%s'",
                                    dtype_name_or(dt));
        if (!(p->lambd >= 0.0))
            return ct__error_status(CT_ERR_ARG, "exponential_: expects lambda >= 0.0, but found lambda=%g",
                                    p->lambd);
        return shaped(out, "exponential_", p);
    case CT_OP_randint: {
        const char *name = p->inplace ? "random_" : "randint";
        if (check_int_range(name, p->low, p->high, dt)) return ct_last_error_code();
        return shaped(out, name, p);
    }
    case CT_OP_randperm: {
        if ((unsigned)dt >= CT_DTYPE_COUNT || dt == CT_BOOL || ct_dtype_is_complex(dt))
            return ct__error_status(CT_ERR_DTYPE, "randperm: \"randperm\" not implemented for '%s'",
                                    dtype_name_or(dt));
        int64_t n = p->n;
        if (n < 0) return ct__error_status(CT_ERR_ARG, "randperm: n must be non-negative, got %lld", (long long)n);
        int64_t mn, mx = dtype_int_max(dt, &mn);
        if (n > 0 && n - 1 > mx)
            return ct__error_status(CT_ERR_ARG, "randperm: n is too large for result tensor type %s (n = %lld)",
                                    ct_dtype_name(dt), (long long)n);
        ct__meta_set(out, &n, 1, dt, (ct_device)p->device);
        return CT_OK;
    }
    case CT_OP_bernoulli:
        if (nin == 1) { /* bernoulli(p): p's sizes, dtype and device */
            const ct_tensor *pt = in[0];
            if (!is_real_float(pt->dtype))
                return ct__error_status(CT_ERR_DTYPE, "bernoulli: \"bernoulli_tensor_cpu_p_\" not "
                                        "implemented for '%s' (expected a floating point tensor of "
                                        "probabilities)", ct_dtype_name(pt->dtype));
            ct__meta_like(out, pt, pt->dtype);
            return CT_OK;
        }
        if ((unsigned)dt >= CT_DTYPE_COUNT || ct_dtype_is_complex(dt))
            return ct__error_status(CT_ERR_DTYPE, "bernoulli_: not implemented for '%s'", dtype_name_or(dt));
        if (!(p->p >= 0.0 && p->p <= 1.0))
            return ct__error_status(CT_ERR_ARG, "bernoulli_: expects p to be in [0, 1], but got p=%g", p->p);
        return shaped(out, "bernoulli_", p);
    case CT_OP_multinomial: {
        const ct_tensor *probs = in[0];
        if (!is_real_float(probs->dtype))
            return ct__error_status(CT_ERR_DTYPE, "multinomial: multinomial only supports floating-point "
                                    "dtypes for input, got: %s", ct_dtype_name(probs->dtype));
        if (probs->ndim != 1 && probs->ndim != 2)
            return ct__error_status(CT_ERR_SHAPE, "multinomial: prob_dist must be 1 or 2 dim, got shape %s",
                                    ct__tshape(probs));
        int64_t num_samples = p->num_samples;
        if (num_samples <= 0)
            return ct__error_status(CT_ERR_ARG, "multinomial: cannot sample n_sample <= 0 samples (got %lld)",
                                    (long long)num_samples);
        int64_t n = probs->sizes[probs->ndim - 1];
        if (!p->replacement && num_samples > n)
            return ct__error_status(CT_ERR_ARG, "multinomial: cannot sample n_sample > prob_dist.size(-1) "
                                    "samples without replacement (n_sample = %lld, size = %lld)",
                                    (long long)num_samples, (long long)n);
        if (n > (INT64_C(1) << 24))
            return ct__error_status(CT_ERR_ARG, "multinomial: number of categories cannot exceed 2^24");
        int64_t oshape[2] = {probs->ndim == 2 ? probs->sizes[0] : 1, num_samples};
        if (probs->ndim == 2) ct__meta_set(out, oshape, 2, CT_I64, probs->storage->device);
        else ct__meta_set(out, oshape + 1, 1, CT_I64, probs->storage->device);
        return CT_OK;
    }
    default:
        return ct__error_status(CT_ERR_RUNTIME, "%s: not a random op", ct__op_info[a->op].name);
    }
}

/* The public functions call ct__meta_random directly (it is every random
 * op's table entry and sets all of its output on success): no ct__meta_run
 * on the per-call path. */

/* A fresh tensor of shape/dt on dev filled by op (factories); shape NULL
 * and ndim 0 for randperm, whose size is its n. */
static ct_tensor *new_random_on(const char *name, ct_op op, const int64_t *shape, int ndim, ct_dtype dt,
                                ct_args *a, int64_t per_block, ct_dtype kdt, ct_device dev) {
    dev = ct__trace_dev(dev);
    a->p.random.dtype = dt;
    a->p.random.device = dev;
    a->p.random.shape_n = ndim;
    if (shape && ndim > 0 && ndim <= CT_MAX_DIMS)
        memcpy(a->p.random.shape, shape, sizeof(int64_t) * (size_t)ndim);
    ct_meta m;
    if (ct__meta_random(&m, 1, NULL, 0, a)) return NULL;
    if (ndim > 0 && !shape) return ct__error(CT_ERR_NULL, "%s: shape is NULL", name);
    ct_tensor *t = ct__meta_new(&m, NULL);
    if (!t) return NULL;
    if (fill_random(op, t, a, per_block, kdt, NULL, 0)) { ct_release(t); return NULL; }
    return ct__finish(op, t, NULL, 0, a);
}
/* the same on the default device (factories without a device argument) */
static ct_tensor *new_random(const char *name, ct_op op, const int64_t *shape, int ndim, ct_dtype dt,
                             ct_args *a, int64_t per_block, ct_dtype kdt) {
    return new_random_on(name, op, shape, ndim, dt, a, per_block, kdt, ct_get_default_device());
}

/* An in-place form on t: its meta function's checks, then inplace_begin. */
static ct_status begin_inplace(ct_op op, ct_tensor *t, ct_args *a, const char *name) {
    a->p.random.inplace = true;
    a->p.random.dtype = t->dtype;
    a->p.random.device = t->storage->device;
    a->p.random.shape_n = t->ndim;
    memcpy(a->p.random.shape, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    ct_meta m;
    ct_status st = ct__meta_random(&m, 1, NULL, 0, a);
    if (st) return st;
    return ct__inplace_begin(t, NULL, 0, name);
}

bool ct__random_replayable(ct_op op, int nin) {
    return nin == 0 && (op == CT_OP_uniform || op == CT_OP_normal || op == CT_OP_exponential ||
                        op == CT_OP_randint || op == CT_OP_bernoulli || op == CT_OP_randperm);
}

ct_status ct__random_replay(ct_op op, ct_tensor *t, ct_args *a) {
    ct_dtype k = float_kernel_dtype(t->dtype);
    switch (op) {
    case CT_OP_uniform: return fill_random(op, t, a, k == CT_F32 ? 4 : 2, k, NULL, 0);
    case CT_OP_normal:
    case CT_OP_exponential: return fill_random(op, t, a, 2, k, NULL, 0);
    case CT_OP_randint: return fill_random(op, t, a, 2, t->dtype, NULL, 0);
    case CT_OP_bernoulli: return fill_random(op, t, a, 4, t->dtype, NULL, 0);
    case CT_OP_randperm: return fill_random(op, t, a, 1, t->dtype, NULL, 0);
    default:
        return ct__error_status(CT_ERR_RUNTIME, "%s: no replay of this random op", ct__op_info[op].name);
    }
}

/* ---- uniform / normal --------------------------------------------------- */
static ct_tensor *rand_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    ct_args a = ct__args(CT_OP_uniform);
    a.p.random.from = 0.0; a.p.random.to = 1.0;
    ct_dtype k = float_kernel_dtype(dt);
    return new_random_on("rand", CT_OP_uniform, shape, ndim, dt, &a, k == CT_F32 ? 4 : 2, k, dev);
}
ct_tensor *ct_rand(const int64_t *shape, int ndim, ct_dtype dt) {
    return rand_on(shape, ndim, dt, ct_get_default_device());
}

static ct_tensor *randn_on(const int64_t *shape, int ndim, ct_dtype dt, ct_device dev) {
    ct_args a = ct__args(CT_OP_normal);
    a.p.random.mean = 0.0; a.p.random.std = 1.0;
    return new_random_on("randn", CT_OP_normal, shape, ndim, dt, &a, 2, float_kernel_dtype(dt), dev);
}
ct_tensor *ct_randn(const int64_t *shape, int ndim, ct_dtype dt) {
    return randn_on(shape, ndim, dt, ct_get_default_device());
}

ct_tensor *ct_rand_like(ct_tensor *t) {
    CT_NULLCHECK(t);
    return rand_on(t->sizes, t->ndim, t->dtype, t->storage->device); /* t's device, like torch */
}

ct_tensor *ct_randn_like(ct_tensor *t) {
    CT_NULLCHECK(t);
    return randn_on(t->sizes, t->ndim, t->dtype, t->storage->device);
}

ct_tensor *ct_uniform_(ct_tensor *t, double from, double to) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_uniform);
    a.p.random.from = from; a.p.random.to = to;
    if (begin_inplace(CT_OP_uniform, t, &a, "uniform_")) return NULL;
    ct_dtype k = float_kernel_dtype(t->dtype);
    if (fill_random(CT_OP_uniform, t, &a, k == CT_F32 ? 4 : 2, k, NULL, 0)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_uniform, t, NULL, 0, &a);
}

ct_tensor *ct_normal_(ct_tensor *t, double mean, double std) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_normal);
    a.p.random.mean = mean; a.p.random.std = std;
    if (begin_inplace(CT_OP_normal, t, &a, "normal_")) return NULL;
    if (fill_random(CT_OP_normal, t, &a, 2, float_kernel_dtype(t->dtype), NULL, 0)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_normal, t, NULL, 0, &a);
}

ct_tensor *ct_exponential_(ct_tensor *t, double lambd) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_exponential);
    a.p.random.lambd = lambd;
    if (begin_inplace(CT_OP_exponential, t, &a, "exponential_")) return NULL;
    if (fill_random(CT_OP_exponential, t, &a, 2, float_kernel_dtype(t->dtype), NULL, 0)) {
        ct__inplace_abort(t);
        return NULL;
    }
    return ct__finish_inplace(CT_OP_exponential, t, NULL, 0, &a);
}

/* ---- integers ----------------------------------------------------------- */
ct_tensor *ct_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, ct_dtype dt) {
    ct_args a = ct__args(CT_OP_randint);
    a.p.random.low = low; a.p.random.high = high;
    return new_random("randint", CT_OP_randint, shape, ndim, dt, &a, 2, dt);
}

ct_tensor *ct_random_(ct_tensor *t, int64_t from, int64_t to) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_randint);
    a.p.random.low = from; a.p.random.high = to;
    if (begin_inplace(CT_OP_randint, t, &a, "random_")) return NULL;
    if (fill_random(CT_OP_randint, t, &a, 2, t->dtype, NULL, 0)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_randint, t, NULL, 0, &a);
}

ct_tensor *ct_randperm(int64_t n, ct_dtype dt) {
    ct_args a = ct__args(CT_OP_randperm);
    a.p.random.n = n;
    return new_random("randperm", CT_OP_randperm, NULL, 0, dt, &a, 1, dt);
}

/* ---- bernoulli ---------------------------------------------------------- */
ct_tensor *ct_bernoulli(ct_tensor *p) {
    CT_NULLCHECK(p);
    ct_args a = ct__args(CT_OP_bernoulli);
    ct_tensor *orig[1] = {p};
    ct_meta m;
    if (ct__meta_random(&m, 1, orig, 1, &a)) return NULL;
    ct_tensor *pc = ct__contig_as(p, CT_F64);
    if (!pc) return NULL;
    const double *pv = ct__ptr(pc);
    int64_t n = ct__has_host_data(pc) ? ct_numel(pc) : 0; /* meta: no probabilities to check */
    for (int64_t i = 0; i < n; i++) {
        if (!(pv[i] >= 0.0 && pv[i] <= 1.0)) {
            double bad = pv[i];
            ct_release(pc);
            return ct__error(CT_ERR_ARG, "bernoulli: expected all probabilities in [0, 1] "
                             "(p_in >= 0 && p_in <= 1), but got %g", bad);
        }
    }
    ct_tensor *out = ct__meta_new(&m, orig);
    if (!out) { ct_release(pc); return NULL; }
    ct_tensor *in[1] = {pc};
    ct_status st = fill_random(CT_OP_bernoulli, out, &a, 4, p->dtype, in, 1);
    ct_release(pc);
    if (st) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_bernoulli, out, orig, 1, &a);
}

ct_tensor *ct_bernoulli_(ct_tensor *t, double p) {
    CT_NULLCHECK(t);
    ct_args a = ct__args(CT_OP_bernoulli);
    a.p.random.p = p;
    if (begin_inplace(CT_OP_bernoulli, t, &a, "bernoulli_")) return NULL;
    if (fill_random(CT_OP_bernoulli, t, &a, 4, t->dtype, NULL, 0)) { ct__inplace_abort(t); return NULL; }
    return ct__finish_inplace(CT_OP_bernoulli, t, NULL, 0, &a);
}

/* ---- multinomial -------------------------------------------------------- */
ct_tensor *ct_multinomial(ct_tensor *probs, int64_t num_samples, bool replacement) {
    CT_NULLCHECK(probs);
    ct_args a = ct__args(CT_OP_multinomial);
    a.p.random.num_samples = num_samples;
    a.p.random.replacement = replacement;
    ct_tensor *orig[1] = {probs};
    ct_meta m;
    if (ct__meta_random(&m, 1, orig, 1, &a)) return NULL;
    int64_t n = probs->sizes[probs->ndim - 1];
    int64_t rows = probs->ndim == 2 ? probs->sizes[0] : 1;
    ct_tensor *pc = ct__contig_as(probs, CT_F64);
    if (!pc) return NULL;
    const double *pv = ct__ptr(pc);
    bool host = ct__has_host_data(pc); /* meta: no probabilities to check, nothing to draw */
    for (int64_t r = 0; host && r < rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < n; c++) {
            double v = pv[r * n + c];
            if (!(v >= 0.0) || isinf(v)) {
                ct_release(pc);
                return ct__error(CT_ERR_ARG, "multinomial: probability tensor contains either `inf`, "
                                 "`nan` or element < 0");
            }
            s += v;
        }
        if (!(s > 0.0)) {
            ct_release(pc);
            return ct__error(CT_ERR_ARG, "multinomial: invalid multinomial distribution (sum of "
                             "probabilities <= 0)");
        }
    }
    ct_tensor *out = ct__meta_new(&m, orig);
    if (!out) { ct_release(pc); return NULL; }
    uint64_t seed = 0, off = 0;
    if (host) ct__rng_reserve((uint64_t)(rows * (replacement ? num_samples : n)), &seed, &off);
    a.p.random.seed = (int64_t)seed;
    a.p.random.offset = (int64_t)off;
    ct_tensor *o[1] = {out}, *in[1] = {pc};
    ct_status st = ct__dispatch(CT_OP_multinomial, o, 1, in, 1, &a);
    ct_release(pc);
    if (st) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_multinomial, out, orig, 1, &a);
}

/* ---- dropout (composite) ------------------------------------------------ */
ct_tensor *ct_dropout(ct_tensor *x, double p, bool training) {
    CT_NULLCHECK(x);
    if (!(p >= 0.0 && p <= 1.0))
        return ct__error(CT_ERR_ARG, "dropout: dropout probability has to be between 0 and 1, "
                         "but got %g", p);
    /* like torch: p == 0 (or an empty input) returns the input and draws nothing */
    if (!training || p == 0.0 || ct_numel(x) == 0) return ct__register(ct_retain(x));
    if (!is_real_float(x->dtype) && !ct_dtype_is_complex(x->dtype))
        return ct__error(CT_ERR_DTYPE, "dropout: result type %s can't be cast to the desired output "
                         "type %s (dropout expects a floating point tensor when training)",
                         ct_dtype_name(ct__float_dtype(x->dtype)), ct_dtype_name(x->dtype));
    ct_scope s = ct_scope_begin();
    ct_tensor *r;
    if (p == 1.0) {
        /* like torch: input * 0 (NaN and inf stay NaN) */
        r = ct_mul_scalar(x, 0.0);
    } else {
        ct_dtype ndt = ct_dtype_is_complex(x->dtype) ? (x->dtype == CT_C128 ? CT_F64 : CT_F32) : x->dtype;
        ct_tensor *noise = ct_empty_on(x->sizes, x->ndim, ndt, x->storage->device);
        noise = ct_bernoulli_(noise, 1.0 - p);
        noise = ct_div_scalar(noise, 1.0 - p);
        r = ct_mul(x, noise);
    }
    if (r) r = ct_keep(r);
    ct_scope_end(s);
    return r;
}
