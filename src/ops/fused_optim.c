/* fused_optim.c -- the op layer of the optimizers' fused multi-tensor steps:
 * the table ops sgd_step / adam_step (kernels in src/backend/cpu/optim.c)
 * and their composite fallback, torch.optim's single-tensor algorithms
 * written with public in-place ops, which is also the optimizers' op-by-op
 * path (src/optim/optim.c).  See fused_optim.h.
 *
 * The kernel and the fallback compute the same formulas with the same
 * roundings: each kernel expression casts its scalars to the dtype and
 * associates like the elementwise op it stands for (add's x + (T)alpha*y,
 * addcmul's x + (T)value*y*z, addcdiv's x + (T)value*y/z), and the bias
 * corrections are the same double expressions, so the two agree bit for bit
 * (tests/test_fused.c checks it for f32 and f64). */
#include <math.h>

#include "ew.h"
#include "fused.h"
#include "fused_optim.h"
#include "meta.h"

static ct_status fail_code(void) {
    ct_status st = ct_last_error_code();
    return st ? st : CT_ERR_RUNTIME;
}
#define CK(x) do { if (!(x)) return fail_code(); } while (0)

/* grad (negated when maximize) plus weight_decay * p */
static ct_tensor *eff_grad(ct_tensor *p, ct_tensor *grad, bool maximize, double wd) {
    ct_tensor *g = maximize ? ct_neg(grad) : grad;
    if (wd != 0) g = ct_add_scaled(g, p, wd);
    return g;
}

/* ---- the single-tensor updates (torch.optim's _single_tensor_*) ------------ */
ct_status ct__sgd_update(ct_tensor *p, ct_tensor *grad, ct_tensor *buf, bool first,
                         const ct_p_optim *h) {
    ct_tensor *d = eff_grad(p, grad, h->maximize, h->weight_decay);
    CK(d);
    if (h->momentum != 0) {
        if (!buf) return ct__error_status(CT_ERR_NULL, "SGD: momentum buffer is NULL");
        if (first) {
            CK(ct_copy_(buf, d)); /* torch: buf = clone(d) */
        } else {
            CK(ct_mul_scalar_(buf, h->momentum));
            CK(ct_add_scaled_(buf, d, 1 - h->dampening));
        }
        d = h->nesterov ? ct_add_scaled(d, buf, h->momentum) : buf;
    }
    CK(ct_add_scaled_(p, d, -h->lr));
    return CT_OK;
}

ct_status ct__adam_update(ct_tensor *p, ct_tensor *grad, ct_tensor *m, ct_tensor *v,
                          ct_tensor *vmax, double step, const ct_p_optim *h) {
    if (h->amsgrad && !vmax) return ct__error_status(CT_ERR_NULL, "Adam: max_exp_avg_sq is NULL");
    double bc1 = 1 - pow(h->beta1, step), bc2 = 1 - pow(h->beta2, step);
    double step_size = h->lr / bc1, bc2s = sqrt(bc2);
    ct_tensor *gr = h->maximize ? ct_neg(grad) : grad;
    if (h->decoupled) CK(ct_mul_scalar_(p, 1 - h->lr * h->weight_decay));
    else if (h->weight_decay != 0) gr = ct_add_scaled(gr, p, h->weight_decay);
    CK(gr);
    CK(ct_mul_scalar_(m, h->beta1));
    CK(ct_add_scaled_(m, gr, 1 - h->beta1));
    CK(ct_mul_scalar_(v, h->beta2));
    CK(ct_addcmul_(v, gr, gr, 1 - h->beta2));
    ct_tensor *src = v;
    if (h->amsgrad) { CK(ct_maximum_(vmax, v)); src = vmax; }
    ct_tensor *den = ct_add_scalar_(ct_div_scalar(ct_sqrt(src), bc2s), h->eps);
    CK(den);
    CK(ct_addcdiv_(p, m, den, -step_size));
    return CT_OK;
}

/* ---- the group steps ----------------------------------------------------------- */
/* list l[i] (named what) is there and has p's shape */
static ct_status check_list(const char *who, ct_tensor *const *p, ct_tensor *const *l, const char *what,
                            int n) {
    if (!l) return ct__error_status(CT_ERR_NULL, "%s: the %s list is NULL", who, what);
    for (int i = 0; i < n; i++) {
        if (!l[i]) return ct__error_status(CT_ERR_NULL, "%s: %s %d is NULL", who, what, i);
        if (l == p) continue;
        if (l[i]->ndim != p[i]->ndim ||
            memcmp(l[i]->sizes, p[i]->sizes, sizeof(int64_t) * (size_t)p[i]->ndim))
            return ct__error_status(CT_ERR_SHAPE, "%s: %s %d has shape %s, its parameter %s", who, what, i,
                                    ct__tshape(l[i]), ct__tshape(p[i]));
    }
    return CT_OK;
}

/* a tensor the kernel can take with parameter p on dev */
static bool kernel_ok(const ct_tensor *p, const ct_tensor *t, ct_device dev) {
    return t->storage->device == dev && t->dtype == p->dtype && ct__is_contiguous(t);
}

/* ---- the meta function ------------------------------------------------------ */
/* The kernels' inputs: k lists of nt tensors, one after the other (list l's
 * tensor of parameter i is in[l * nt + i]):
 *   sgd_step:   params, grads, [momentum_buffers when momentum != 0]
 *   adam_step:  params, grads, exp_avgs, exp_avg_sqs, [max_exp_avg_sqs when
 *               amsgrad], steps
 * Parameter i is f32 or f64 and the tensors of its lists are of its dtype,
 * numel and device (the first parameter's), contiguous; a step is a 0-dim
 * float32 cpu tensor.  No outputs: the steps write their inputs. */
CT_META_FN(ct__meta_optim) {
    (void)out;
    (void)nout;
    const ct_p_optim *h = &a->p.optim;
    bool adam = a->op == CT_OP_adam_step;
    const char *who = ct__op_info[a->op].name;
    static const char *const sgd_what[3] = {"parameter", "grad", "momentum_buffer"};
    static const char *const adam_what[5] = {"parameter", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    const char *const *what = adam ? adam_what : sgd_what;
    int nl = adam ? (h->amsgrad ? 5 : 4) : (h->momentum != 0 ? 3 : 2), k = nl + adam;
    if (nin < 0 || nin % k)
        return ct__error_status(CT_ERR_ARG, "%s: expected %d lists of one length, got %d tensors", who, k, nin);
    int nt = nin / k;
    for (int i = 0; i < nt * k; i++)
        if (!in[i])
            return ct__error_status(CT_ERR_NULL, "%s: %s %d is NULL", who, i / nt < nl ? what[i / nt] : "step",
                                    i % nt);
    ct_device dev = nt ? in[0]->storage->device : CT_CPU;
    for (int i = 0; i < nt; i++) {
        ct_tensor *p = in[i];
        if (p->dtype != CT_F32 && p->dtype != CT_F64)
            return ct__error_status(CT_ERR_DTYPE, "%s: the kernel takes float32 or float64 parameters, "
                                    "got parameter %d of %s", who, i, ct_dtype_name(p->dtype));
        for (int l = 0; l < nl; l++) {
            ct_tensor *t = in[l * nt + i];
            if (t->dtype != p->dtype || !ct__same_device(t, in[0]))
                return ct__error_status(CT_ERR_DTYPE, "%s: expected %s %d of dtype %s on %s, got %s on %s", who,
                                        what[l], i, ct_dtype_name(p->dtype), ct_device_name(dev),
                                        ct_dtype_name(t->dtype), ct_device_name(t->storage->device));
            if (ct_numel(t) != ct_numel(p))
                return ct__error_status(CT_ERR_SHAPE, "%s: %s %d has shape %s, its parameter %s", who, what[l],
                                        i, ct__tshape(t), ct__tshape(p));
            if (!ct__is_contiguous(t))
                return ct__error_status(CT_ERR_ARG, "%s: the kernel takes contiguous tensors, %s %d is not",
                                        who, what[l], i);
        }
        if (adam) {
            ct_tensor *st = in[nl * nt + i];
            if (st->ndim != 0 || st->dtype != CT_F32 || st->storage->device != CT_CPU)
                return ct__error_status(CT_ERR_ARG, "%s: step %d should be a 0-dim float32 cpu tensor, got %s "
                                        "%s on %s", who, i, ct__tshape(st), ct_dtype_name(st->dtype),
                                        ct_device_name(st->storage->device));
        }
    }
    return CT_OK;
}

/* The parameters with take[i] (nt of them) through op: their tensors of the
 * k lists lists[0..k) are checked by op's meta function, then, where the
 * device has the kernel, dispatched, and the tensors of the lists whose bit
 * is set in `written` get a new version (*ran = true); where it has none,
 * *ran = false and the caller runs the fallback for them. */
static ct_status run_taken(ct_op op, ct_tensor *const *const *lists, int k, unsigned written,
                           const bool *take, int n, int nt, const ct_p_optim *h, bool *ran) {
    *ran = false;
    ct_tensor **in = malloc(sizeof *in * (size_t)k * (size_t)nt);
    if (!in) return ct__error_status(CT_ERR_OOM, "%s: out of memory", ct__op_info[op].name);
    for (int j = 0, q = 0; j < n; j++)
        if (take[j]) {
            for (int l = 0; l < k; l++) in[l * nt + q] = lists[l][j];
            q++;
        }
    ct_args a = ct__args(op);
    a.p.optim = *h;
    ct_status st = ct__meta_run(op, NULL, 0, in, k * nt, &a);
    if (!st && ct__fused_kernel(op, in[0]->storage->device)) {
        st = ct__dispatch(op, NULL, 0, in, k * nt, &a);
        for (int l = 0; l < k && !st; l++)
            if (written >> l & 1u)
                for (int q = 0; q < nt; q++) ct__bump_version(in[l * nt + q]);
        *ran = true;
    }
    free(in);
    return st;
}

/* which parameters the kernel of op can take (take[i]; their count);
 * lists[0] are the params, lists[1..nl) the tensors of their shape; steps
 * (or NULL): 0-dim float32 cpu tensors */
static int pick(ct_tensor *const *const *lists, int nl, ct_tensor *const *steps, int n, bool *take) {
    ct_device dev = lists[0][0]->storage->device;
    int nt = 0;
    for (int i = 0; i < n; i++) {
        ct_tensor *p = lists[0][i];
        bool ok = p->dtype == CT_F32 || p->dtype == CT_F64;
        for (int l = 0; l < nl && ok; l++) ok = kernel_ok(p, lists[l][i], dev);
        if (ok && steps)
            ok = steps[i]->ndim == 0 && steps[i]->dtype == CT_F32 && steps[i]->storage->device == CT_CPU;
        take[i] = ok;
        nt += ok;
    }
    return nt;
}

/* after run_taken: the parameters left to the fallback */
static void untake(bool *take, int n, bool ran) {
    if (!ran)
        for (int i = 0; i < n; i++) take[i] = false;
}

ct_status ct__sgd_step(ct_tensor *const *p, ct_tensor *const *grad, ct_tensor *const *buf, int n,
                       const ct_p_optim *h) {
    static const char *who = "sgd_step";
    if (n < 0) return ct__error_status(CT_ERR_ARG, "%s: %d parameters", who, n);
    if (n == 0) return CT_OK;
    bool mom = h->momentum != 0;
    ct_tensor *const *lists[3] = {p, grad, buf};
    static const char *const what[3] = {"parameter", "grad", "momentum_buffer"};
    int nl = mom ? 3 : 2;
    for (int l = 0; l < nl; l++)
        if (check_list(who, p, lists[l], what[l], n)) return ct_last_error_code();
    bool *take = malloc(sizeof(bool) * (size_t)n);
    if (!take) return ct__error_status(CT_ERR_OOM, "%s: out of memory", who);
    int nt = pick(lists, nl, NULL, n, take);
    bool ran = false;
    ct_status st = nt ? run_taken(CT_OP_sgd_step, lists, nl, 0x5u, take, n, nt, h, &ran) : CT_OK;
    untake(take, n, ran);
    /* the others: the composite, parameter by parameter */
    bool prev = ct_set_grad_enabled(false);
    for (int i = 0; i < n && !st; i++) {
        if (take[i]) continue;
        ct_scope sc = ct_scope_begin();
        st = ct__sgd_update(p[i], grad[i], mom ? buf[i] : NULL, h->first_step, h);
        ct_scope_end(sc);
    }
    ct_set_grad_enabled(prev);
    free(take);
    return st;
}

ct_status ct__adam_step(ct_tensor *const *p, ct_tensor *const *grad, ct_tensor *const *m,
                        ct_tensor *const *v, ct_tensor *const *vmax, ct_tensor *const *steps, int n,
                        const ct_p_optim *h) {
    static const char *who = "adam_step";
    if (n < 0) return ct__error_status(CT_ERR_ARG, "%s: %d parameters", who, n);
    if (n == 0) return CT_OK;
    ct_tensor *const *lists[6] = {p, grad, m, v, h->amsgrad ? vmax : steps, steps};
    static const char *const what[5] = {"parameter", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    int nl = h->amsgrad ? 5 : 4;
    for (int l = 0; l < nl; l++)
        if (check_list(who, p, lists[l], what[l], n)) return ct_last_error_code();
    if (!steps) return ct__error_status(CT_ERR_NULL, "%s: the step list is NULL", who);
    for (int i = 0; i < n; i++) {
        if (!steps[i]) return ct__error_status(CT_ERR_NULL, "%s: step %d is NULL", who, i);
        if (ct_numel(steps[i]) != 1)
            return ct__error_status(CT_ERR_SHAPE, "%s: step %d has shape %s (one value expected)", who, i,
                                    ct__tshape(steps[i]));
    }
    bool *take = malloc(sizeof(bool) * (size_t)n);
    if (!take) return ct__error_status(CT_ERR_OOM, "%s: out of memory", who);
    int nt = pick(lists, nl, steps, n, take);
    /* the kernel writes params, exp_avg, exp_avg_sq, [max_exp_avg_sq] */
    unsigned written = h->amsgrad ? 0x1du : 0xdu;
    bool ran = false;
    ct_status st = nt ? run_taken(CT_OP_adam_step, lists, nl + 1, written, take, n, nt, h, &ran) : CT_OK;
    untake(take, n, ran);
    bool prev = ct_set_grad_enabled(false);
    for (int i = 0; i < n && !st; i++) {
        if (take[i]) continue;
        double step = ct_item(steps[i]);
        if (isnan(step) && ct_last_error_code()) { st = ct_last_error_code(); break; }
        ct_scope sc = ct_scope_begin();
        st = ct__adam_update(p[i], grad[i], m[i], v[i], h->amsgrad ? vmax[i] : NULL, step, h);
        ct_scope_end(sc);
    }
    ct_set_grad_enabled(prev);
    free(take);
    return st;
}
