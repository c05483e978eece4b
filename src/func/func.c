/* func.c -- the ct_func object (func.h): a ct_fn and its context,
 * reference-counted so transforms can hold the functions they wrap. */
#include <stdlib.h>
#include "func_impl.h"
#include "../core/tensor_impl.h"

ct_func *ct_func_new_owned(ct_fn fn, void *ctx, void (*free_ctx)(void *ctx)) {
    if (!fn) return ct__error(CT_ERR_ARG, "ct_func_new: fn is NULL");
    ct_func *f = calloc(1, sizeof *f);
    if (!f) return ct__error(CT_ERR_OOM, "ct_func_new: out of memory");
    atomic_init(&f->refcount, 1);
    f->fn = fn;
    f->ctx = ctx;
    f->free_ctx = free_ctx;
    return f;
}

ct_func *ct_func_new(ct_fn fn, void *ctx) { return ct_func_new_owned(fn, ctx, NULL); }

ct_func *ct_func_retain(ct_func *f) {
    if (f) atomic_fetch_add(&f->refcount, 1);
    return f;
}

void ct_func_free(ct_func *f) {
    if (!f || atomic_fetch_sub(&f->refcount, 1) != 1) return;
    if (f->free_ctx) f->free_ctx(f->ctx);
    free(f);
}

ct_status ct_func_call(ct_func *f, ct_tensor *const *in, int nin, ct_tensor **out, int nout) {
    if (!f) return ct__error_status(CT_ERR_ARG, "ct_func_call: the function is NULL");
    if (nin < 0 || nout < 0 || (nin > 0 && !in) || (nout > 0 && !out))
        return ct__error_status(CT_ERR_ARG, "ct_func_call: bad arguments (nin %d, nout %d)", nin, nout);
    for (int k = 0; k < nout; k++) out[k] = NULL;
    /* the call runs in a scope of its own: on success the outputs move to
     * the caller's scope (or to the caller), on failure whatever fn made
     * is released, so a failing function leaks nothing */
    ct_scope s = ct_scope_begin();
    ct_status st = f->fn(in, nin, out, nout, f->ctx);
    if (st == CT_OK) {
        for (int k = 0; k < nout && st == CT_OK; k++)
            if (!out[k])
                st = ct__error_status(CT_ERR_RUNTIME, "ct_func_call: the function returned CT_OK "
                                      "but left output %d of %d NULL", k, nout);
    } else if (!ct_last_error_code()) {
        st = ct__error_status(st, "ct_func_call: the function failed (%s)", ct_status_name(st));
    }
    if (st == CT_OK)
        for (int k = 0; k < nout; k++)
            if (!ct_keep(out[k])) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    ct_scope_end(s);
    if (st != CT_OK)
        for (int k = 0; k < nout; k++) out[k] = NULL;
    return st;
}

ct_status ct_func_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    return ct_func_call((ct_func *)ctx, in, nin, out, nout);
}
