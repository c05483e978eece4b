/* gradcheck.c -- ct_gradcheck / ct_gradgradcheck: analytical gradients from
 * the engine against central finite differences, like
 * torch.autograd.gradcheck (full Jacobians; meant for small inputs). */
#include <math.h>
#include <stdio.h>

#include "autograd_impl.h"

/* Element i (in logical row-major order) of t, as a pointer. */
static char *elem_ptr(ct_tensor *t, int64_t i) {
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t sz = t->sizes[d];
        off += (i % sz) * t->strides[d];
        i /= sz;
    }
    return (char *)t->storage->data + off * (int64_t)ct_dtype_size(t->dtype);
}

/* Flattened f(inputs) as a contiguous f64 tensor (owned).  Grad mode stays
 * as it is: gradgradcheck's function itself runs a backward. */
static ct_tensor *eval_flat(ct_grad_fn fn, void *user, ct_tensor *const *inputs, int n) {
    ct_scope s = ct_scope_begin();
    ct_tensor *y = fn(inputs, n, user);
    /* a real copy: y may be a view of an input that is perturbed next */
    ct_tensor *r = y ? ct__alloc(y->sizes, y->ndim, CT_F64, CT_CPU) : NULL;
    if (r) {
        ct_tensor *o[1] = {r}, *i[1] = {y};
        if (ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL)) { ct_release(r); r = NULL; }
    }
    ct_scope_end(s);
    return r;
}

ct_status ct_gradcheck(ct_grad_fn fn, void *user, ct_tensor *const *inputs, int n, double eps,
                       double atol, double rtol) {
    if (!fn) return ct__error_status(CT_ERR_NULL, "gradcheck: function is NULL");
    if (n <= 0 || !inputs) return ct__error_status(CT_ERR_ARG, "gradcheck: no inputs");
    for (int k = 0; k < n; k++) {
        CT_NULLCHECK_AT_S("gradcheck", inputs, k);
        if (ct_dtype_is_complex(inputs[k]->dtype))
            return ct__error_status(CT_ERR_DTYPE, "gradcheck: complex inputs are not supported (input %d)", k);
    }
    if (eps <= 0) eps = 1e-6;
    if (atol <= 0) atol = 1e-5;
    if (rtol <= 0) rtol = 1e-3;
    ct_status st = CT_OK;
    ct_scope s = ct_scope_begin();
    ct_tensor *y = fn(inputs, n, user);
    if (!y) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME; goto out; }
    if (!ct_dtype_is_floating(y->dtype)) {
        st = ct__error_status(CT_ERR_DTYPE, "gradcheck: the output must be floating point (got %s)",
                              ct_dtype_name(y->dtype));
        goto out;
    }
    int64_t m = ct_numel(y);
    /* inputs that require grad */
    ct_tensor *rg[64];
    int idx[64], nrg = 0;
    for (int k = 0; k < n && nrg < 64; k++)
        if (ct_requires_grad(inputs[k])) { rg[nrg] = inputs[k]; idx[nrg++] = k; }
    if (nrg == 0) { st = ct__error_status(CT_ERR_ARG, "gradcheck: no input requires grad"); goto out; }
    if (!ct_requires_grad(y)) {
        st = ct__error_status(CT_ERR_AUTOGRAD, "gradcheck: the output does not require grad (is the "
                              "op differentiable and recorded?)");
        goto out;
    }
    /* analytical Jacobian rows: one backward per output element */
    double *ana[64] = {0};
    for (int r = 0; r < nrg; r++) {
        ana[r] = calloc((size_t)(m * ct_numel(rg[r]) + 1), sizeof(double));
        if (!ana[r]) { st = ct__error_status(CT_ERR_OOM, "gradcheck: out of memory"); goto free_ana; }
    }
    for (int64_t j = 0; j < m; j++) {
        ct_scope s2 = ct_scope_begin();
        ct_tensor *go = ct_zeros(y->sizes, y->ndim, y->dtype);
        if (!go) { st = ct_last_error_code(); ct_scope_end(s2); goto free_ana; }
        ct__store_f64(elem_ptr(go, j), go->dtype, 1.0);
        ct_tensor *grads[64];
        st = ct_autograd_grad(&y, 1, rg, nrg, &go, true, false, true, grads);
        if (st) { ct_scope_end(s2); goto free_ana; }
        for (int r = 0; r < nrg; r++) {
            int64_t ni = ct_numel(rg[r]);
            if (!grads[r]) continue; /* unused input: zero row */
            if (grads[r]->ndim != rg[r]->ndim ||
                memcmp(grads[r]->sizes, rg[r]->sizes, sizeof(int64_t) * (size_t)rg[r]->ndim)) {
                st = ct__error_status(CT_ERR_SHAPE, "gradcheck: gradient of input %d has shape %s, "
                                      "expected %s", idx[r], ct__tshape(grads[r]), ct__tshape(rg[r]));
                ct_scope_end(s2);
                goto free_ana;
            }
            for (int64_t i = 0; i < ni; i++)
                ana[r][j * ni + i] = ct__load_f64(elem_ptr(grads[r], i), grads[r]->dtype);
        }
        ct_scope_end(s2);
    }
    /* numerical Jacobian, column by column */
    for (int r = 0; r < nrg && !st; r++) {
        ct_tensor *x = rg[r];
        int64_t ni = ct_numel(x);
        for (int64_t i = 0; i < ni && !st; i++) {
            char *p = elem_ptr(x, i);
            double orig = ct__load_f64(p, x->dtype);
            ct__store_f64(p, x->dtype, orig + eps);
            ct_tensor *yp = eval_flat(fn, user, inputs, n);
            ct__store_f64(p, x->dtype, orig - eps);
            ct_tensor *ym = eval_flat(fn, user, inputs, n);
            ct__store_f64(p, x->dtype, orig);
            if (!yp || !ym) {
                ct_release(yp);
                ct_release(ym);
                st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
                break;
            }
            const double *a = ct__ptr(yp), *b = ct__ptr(ym);
            for (int64_t j = 0; j < m; j++) {
                double num = (a[j] - b[j]) / (2 * eps);
                double an = ana[r][j * ni + i];
                if (!(fabs(an - num) <= atol + rtol * fabs(num))) {
                    st = ct__error_status(CT_ERR_RUNTIME, "gradcheck: Jacobian mismatch for output 0 "
                                          "with respect to input %d, element %lld of the input and %lld "
                                          "of the output: numerical %.10g, analytical %.10g", idx[r],
                                          (long long)i, (long long)j, num, an);
                    break;
                }
            }
            ct_release(yp);
            ct_release(ym);
        }
    }
free_ana:
    for (int r = 0; r < nrg; r++) free(ana[r]);
out:
    ct_scope_end(s);
    return st;
}

/* ---- gradgradcheck ------------------------------------------------------------- */
typedef struct { ct_grad_fn fn; void *user; int n; } gg_ctx;

/* inputs: the n original inputs then one grad_output v; returns the
 * flattened, concatenated gradients of <fn(inputs), v> w.r.t. the inputs
 * that require grad. */
static ct_tensor *grad_of(ct_tensor *const *inputs, int n, void *user) {
    gg_ctx *g = user;
    ct_tensor *y = g->fn(inputs, g->n, g->user);
    if (!y) return NULL;
    ct_tensor *rg[64];
    int nrg = 0;
    for (int k = 0; k < g->n && nrg < 64; k++)
        if (ct_requires_grad(inputs[k])) rg[nrg++] = inputs[k];
    ct_tensor *grads[64];
    ct_tensor *v = inputs[n - 1];
    if (!ct_requires_grad(y)) return ct__error(CT_ERR_AUTOGRAD, "gradgradcheck: output does not require grad");
    if (ct_autograd_grad(&y, 1, rg, nrg, &v, true, true, true, grads)) return NULL;
    ct_tensor *flat[64];
    for (int r = 0; r < nrg; r++) {
        ct_tensor *gr = grads[r] ? grads[r] : ct_zeros_like(rg[r]);
        flat[r] = ct_reshape(gr, CT_SHAPE(-1));
        if (!flat[r]) return NULL;
    }
    return ct_cat(flat, nrg, 0);
}

ct_status ct_gradgradcheck(ct_grad_fn fn, void *user, ct_tensor *const *inputs, int n, double eps,
                           double atol, double rtol) {
    if (!fn) return ct__error_status(CT_ERR_NULL, "gradgradcheck: function is NULL");
    if (n <= 0 || n >= 63 || !inputs) return ct__error_status(CT_ERR_ARG, "gradgradcheck: bad inputs");
    ct_status st;
    ct_scope s = ct_scope_begin();
    ct_tensor *y = fn(inputs, n, user);
    if (!y) { st = ct_last_error_code(); ct_scope_end(s); return st; }
    /* a fixed pseudo-random grad_output (deterministic, no global RNG use) */
    ct_tensor *v = ct_empty(y->sizes, y->ndim, CT_F64);
    if (!v) { st = ct_last_error_code(); ct_scope_end(s); return st; }
    uint64_t state = 0x9E3779B97F4A7C15ull;
    double *pv = ct_data_ptr(v);
    for (int64_t i = 0; i < ct_numel(v); i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        pv[i] = ((double)(state >> 11) / 9007199254740992.0) * 2.0 - 1.0;
    }
    ct_tensor *vv = ct_to_dtype(v, y->dtype);
    if (!vv || (st = ct_set_requires_grad(vv, true))) { st = ct_last_error_code(); ct_scope_end(s); return st; }
    ct_tensor *all[64];
    for (int k = 0; k < n; k++) all[k] = inputs[k];
    all[n] = vv;
    gg_ctx g = {fn, user, n};
    st = ct_gradcheck(grad_of, &g, all, n + 1, eps, atol, rtol);
    ct_scope_end(s);
    return st;
}
