/* stack.c -- torch.func.stack_module_state and a functional module call
 * as a ct_func (func.h): the state of N models of one structure stacked
 * along a new dim 0, and a function that runs one module's forward with
 * parameters and buffers given as inputs (ct_functional_call), so vmap
 * over the stacked state evaluates the N models at once (ensembling), and
 * grad of a loss through it gives per-sample gradients. */
#include <stdlib.h>
#include <string.h>
#include "func_impl.h"
#include "../core/tensor_impl.h"

/* named parameters (kind 0) or buffers (kind 1) of m: counts, malloc'ed arrays */
static int named(ct_module *m, int kind, const char ***names, ct_tensor ***ts) {
    *names = NULL;
    *ts = NULL;
    int n = kind ? ct_module_named_buffers(m, NULL, NULL, 0) : ct_module_named_parameters(m, NULL, NULL, 0);
    if (n < 0) return -1;
    *names = malloc(sizeof(char *) * (size_t)(n + 1));
    *ts = malloc(sizeof(ct_tensor *) * (size_t)(n + 1));
    if (!*names || !*ts) {
        free(*names); free(*ts);
        *names = NULL; *ts = NULL;
        ct__error(CT_ERR_OOM, "stack_module_state: out of memory");
        return -1;
    }
    int k = kind ? ct_module_named_buffers(m, *names, *ts, n) : ct_module_named_parameters(m, *names, *ts, n);
    if (k == n) return n;
    free(*names); free(*ts);
    *names = NULL; *ts = NULL;
    if (!ct_last_error_code()) ct__error(CT_ERR_RUNTIME, "stack_module_state: the module changed while read");
    return -1;
}

static bool same_geometry(ct_tensor *a, ct_tensor *b) {
    return ct_ndim(a) == ct_ndim(b) && ct_get_dtype(a) == ct_get_dtype(b) &&
           ct_get_device(a) == ct_get_device(b) &&
           !memcmp(ct_sizes(a), ct_sizes(b), sizeof(int64_t) * (size_t)ct_ndim(a));
}

/* Stacks one kind of state of every model into *out. */
static ct_status stack_kind(ct_module *const *models, int n, int kind, ct_sample *out) {
    const char *what = kind ? "buffer" : "parameter";
    const char **n0 = NULL, **ni = NULL;
    ct_tensor **t0 = NULL, **ti = NULL;
    ct_tensor **col = malloc(sizeof(ct_tensor *) * (size_t)n);
    ct_tensor ***all = calloc((size_t)n, sizeof(ct_tensor **));
    ct_status st = CT_OK;
    if (!col || !all) { st = ct__error_status(CT_ERR_OOM, "stack_module_state: out of memory"); goto done; }
    int c0 = named(models[0], kind, &n0, &t0);
    if (c0 < 0) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; goto done; }
    all[0] = t0;
    /* every model: the same names in the same order, the same geometry */
    for (int i = 1; i < n && !st; i++) {
        int ci = named(models[i], kind, &ni, &ti);
        if (ci < 0) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; break; }
        all[i] = ti;
        if (ci != c0) {
            st = ct__error_status(CT_ERR_ARG, "stack_module_state: model %d has %d %ss, model 0 has %d", i, ci,
                                  what, c0);
        }
        for (int j = 0; j < c0 && !st; j++) {
            if (strcmp(ni[j], n0[j]))
                st = ct__error_status(CT_ERR_ARG, "stack_module_state: %s %d is '%s' in model %d but '%s' in "
                                      "model 0", what, j, ni[j], i, n0[j]);
            else if (!same_geometry(ti[j], t0[j])) {
                char a[160];
                snprintf(a, sizeof a, "%s %s", ct_dtype_name(ct_get_dtype(ti[j])), ct__tshape(ti[j]));
                st = ct__error_status(CT_ERR_ARG, "stack_module_state: %s '%s' is %s in model %d but %s %s in "
                                      "model 0", what, n0[j], a, i, ct_dtype_name(ct_get_dtype(t0[j])),
                                      ct__tshape(t0[j]));
            } else if (!kind && ct_requires_grad(ti[j]) != ct_requires_grad(t0[j]))
                st = ct__error_status(CT_ERR_ARG, "stack_module_state: Expected %s from each model to have "
                                      "the same .requires_grad (model %d differs from model 0)", n0[j], i);
        }
        free(ni);
        ni = NULL;
    }
    for (int j = 0; j < c0 && !st; j++) {
        ct_scope s = ct_scope_begin();
        for (int i = 0; i < n; i++) col[i] = all[i][j];
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *stacked = ct_stack(col, n, 0); /* a new leaf, not connected to the models */
        ct_set_grad_enabled(prev);
        if (!stacked) st = ct_last_error_code();
        if (!st && !kind && ct_requires_grad(t0[j])) st = ct_set_requires_grad(stacked, true);
        if (!st) st = ct_sample_set(out, n0[j], stacked);
        ct_scope_end(s);
    }
done:
    if (all)
        for (int i = 0; i < n; i++) free(all[i]);
    free(all);
    free(n0);
    free(ni);
    free(col);
    return st;
}

ct_status ct_func_stack_module_state(ct_module *const *models, int n, ct_sample **params, ct_sample **buffers) {
    if (params) *params = NULL;
    if (buffers) *buffers = NULL;
    if (!models || !params || !buffers)
        return ct__error_status(CT_ERR_NULL, "stack_module_state: models, params and buffers must not be NULL");
    if (n < 1) return ct__error_status(CT_ERR_ARG, "stack_module_state: Expected at least one model, got %d.", n);
    for (int i = 0; i < n; i++) {
        if (!models[i]) return ct__error_status(CT_ERR_NULL, "stack_module_state: model %d is NULL", i);
        if (models[i]->cls != models[0]->cls)
            return ct__error_status(CT_ERR_ARG, "stack_module_state: Expected all models to be of the same "
                                    "class (model %d is %s, model 0 is %s).", i, ct_module_class_name(models[i]),
                                    ct_module_class_name(models[0]));
        if (ct_module_is_training(models[i]) != ct_module_is_training(models[0]))
            return ct__error_status(CT_ERR_ARG, "stack_module_state: Expected all models to have the same "
                                    "training/eval mode (model %d differs from model 0).", i);
    }
    ct_sample *p = ct_sample_new(), *b = ct_sample_new();
    ct_status st = (!p || !b) ? ct__error_status(CT_ERR_OOM, "stack_module_state: out of memory") : CT_OK;
    if (!st) st = stack_kind(models, n, 0, p);
    if (!st) st = stack_kind(models, n, 1, b);
    if (st) {
        ct_sample_free(p);
        ct_sample_free(b);
        return st;
    }
    *params = p;
    *buffers = b;
    return CT_OK;
}

/* ---- functional_call as a ct_func ------------------------------------------ */

typedef struct fcall_ctx {
    ct_module *m;
    int np;        /* parameters then buffers: names[0..np) */
    char **names;
} fcall_ctx;

static void fcall_free(void *p) {
    fcall_ctx *c = p;
    if (!c) return;
    for (int i = 0; i < c->np; i++) free(c->names[i]);
    free(c->names);
    ct_module_release(c->m);
    free(c);
}

static ct_status fcall_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    fcall_ctx *c = ctx;
    if (nout != 1)
        return ct__error_status(CT_ERR_ARG, "functional_call: the module's forward has one output (nout %d)", nout);
    if (nin < c->np)
        return ct__error_status(CT_ERR_ARG, "functional_call: expected %d parameter and buffer tensors before "
                                "the module's inputs, got %d inputs", c->np, nin);
    ct_sample *rep = ct_sample_new();
    if (!rep) return ct__error_status(CT_ERR_OOM, "functional_call: out of memory");
    ct_status st = CT_OK;
    for (int i = 0; i < c->np && !st; i++) {
        if (!in[i]) st = ct__error_status(CT_ERR_NULL, "functional_call: the tensor for '%s' (input %d) is NULL",
                                          c->names[i], i);
        else st = ct_sample_set(rep, c->names[i], in[i]);
    }
    if (!st) {
        out[0] = ct_functional_call(c->m, rep, in + c->np, nin - c->np);
        if (!out[0]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    }
    ct_sample_free(rep);
    return st;
}

static bool has_name(const char **names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], s)) return true;
    return false;
}

ct_func *ct_func_functional_call(ct_module *m, const ct_sample *params, const ct_sample *buffers) {
    if (!m) return ct__error(CT_ERR_NULL, "functional_call: the module is NULL");
    int np = params ? ct_sample_count(params) : 0, nb = buffers ? ct_sample_count(buffers) : 0;
    const char **pn = NULL, **bn = NULL;
    ct_tensor **pt = NULL, **bt = NULL;
    fcall_ctx *c = calloc(1, sizeof *c);
    ct_func *r = NULL;
    int cp = named(m, 0, &pn, &pt), cb = cp < 0 ? -1 : named(m, 1, &bn, &bt);
    if (cp < 0 || cb < 0) goto done;
    if (!c || !(c->names = calloc((size_t)(np + nb) + 1, sizeof(char *)))) {
        ct__error(CT_ERR_OOM, "functional_call: out of memory");
        goto done;
    }
    c->m = ct_module_retain(m);
    for (int i = 0; i < np + nb; i++) {
        const char *s = i < np ? ct_sample_name(params, i) : ct_sample_name(buffers, i - np);
        bool ok = i < np ? has_name(pn, cp, s) : has_name(bn, cb, s);
        if (!ok) {
            ct__error(CT_ERR_ARG, "functional_call: %s has no %s named '%s'", ct_module_class_name(m),
                      i < np ? "parameter" : "buffer", s);
            goto done;
        }
        for (int j = 0; j < c->np; j++)
            if (!strcmp(c->names[j], s)) {
                ct__error(CT_ERR_ARG, "functional_call: '%s' is given twice", s);
                goto done;
            }
        if (!(c->names[c->np] = strdup(s))) {
            ct__error(CT_ERR_OOM, "functional_call: out of memory");
            goto done;
        }
        c->np++;
    }
    r = ct_func_new_owned(fcall_fn, c, fcall_free);
    if (r) c = NULL;
done:
    fcall_free(c);
    free(pn); free(pt); free(bn); free(bt);
    return r;
}
