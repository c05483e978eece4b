/* function.c -- custom autograd functions (torch.autograd.Function): user
 * forward and backward callbacks with a context that saves tensors. */
#include "autograd_impl.h"

struct ct_function_ctx {
    void *user;
    ct_tensor **saved;
    int64_t *ver;
    int nsaved;
    bool released;
    bool final; /* during a backward after which the saved tensors go (no retain_graph) */
};

void ct__function_ctx_free(struct ct_function_ctx *c) {
    if (!c) return;
    for (int i = 0; i < c->nsaved; i++) ct_release(c->saved[i]);
    free(c->saved);
    free(c->ver);
    free(c);
}

void ct__function_ctx_release_saved(struct ct_function_ctx *c) {
    for (int i = 0; i < c->nsaved; i++) { ct_release(c->saved[i]); c->saved[i] = NULL; }
    c->released = true;
}

void *ct_ctx_user(ct_function_ctx *ctx) { return ctx ? ctx->user : NULL; }

/* Inside a backward callback: true when the engine releases the saved
 * tensors right after it (no retain_graph / create_graph), so the callback
 * may take them (ct__ctx_take_saved) and drop each one as soon as it is
 * done with it, as the engine does node by node for its own ops. */
bool ct__ctx_final(const ct_function_ctx *ctx) { return ctx && ctx->final && !ctx->released; }

/* Moves the references of saved tensors [0, n) into dst (the caller owns
 * them) after the version checks of ct_ctx_saved; the ctx is then released
 * (a second backward says so).  Only where ct__ctx_final. */
ct_status ct__ctx_take_saved(ct_function_ctx *ctx, ct_tensor **dst, int n) {
    if (!ct__ctx_final(ctx))
        return ct__error_status(CT_ERR_AUTOGRAD, "ctx_take_saved: the saved tensors are still needed");
    if (n < 0 || n > ctx->nsaved)
        return ct__error_status(CT_ERR_INDEX, "ctx_take_saved: %d of %d saved", n, ctx->nsaved);
    for (int i = 0; i < n; i++)
        if (!ct_ctx_saved(ctx, i) && ct_last_error_code()) return ct_last_error_code();
    for (int i = 0; i < n; i++) { dst[i] = ctx->saved[i]; ctx->saved[i] = NULL; }
    for (int i = n; i < ctx->nsaved; i++) { ct_release(ctx->saved[i]); ctx->saved[i] = NULL; }
    ctx->released = true;
    return CT_OK;
}

ct_status ct_ctx_save_for_backward(ct_function_ctx *ctx, ct_tensor *const *ts, int n) {
    if (!ctx) return ct__error_status(CT_ERR_NULL, "save_for_backward: ctx is NULL");
    if (n < 0 || (n > 0 && !ts)) return ct__error_status(CT_ERR_ARG, "save_for_backward: bad tensor list");
    ct_tensor **ns = realloc(ctx->saved, sizeof *ns * (size_t)(ctx->nsaved + n + 1));
    if (!ns) return ct__error_status(CT_ERR_OOM, "save_for_backward: out of memory");
    ctx->saved = ns;
    int64_t *nv = realloc(ctx->ver, sizeof *nv * (size_t)(ctx->nsaved + n + 1));
    if (!nv) return ct__error_status(CT_ERR_OOM, "save_for_backward: out of memory");
    ctx->ver = nv;
    for (int i = 0; i < n; i++) {
        ctx->saved[ctx->nsaved] = ct_retain(ts[i]);
        ctx->ver[ctx->nsaved] = ts[i] ? ct_version(ts[i]) : 0;
        ctx->nsaved++;
    }
    return CT_OK;
}

ct_tensor *ct_ctx_saved(ct_function_ctx *ctx, int i) {
    if (!ctx) return ct__error(CT_ERR_NULL, "ctx_saved: ctx is NULL");
    if (ctx->released)
        return ct__error(CT_ERR_AUTOGRAD, "ctx_saved: Trying to backward through the graph a second "
                         "time (or directly access saved tensors after they have already been freed)");
    if (i < 0 || i >= ctx->nsaved)
        return ct__error(CT_ERR_INDEX, "ctx_saved: index %d out of range (%d saved)", i, ctx->nsaved);
    ct_tensor *t = ctx->saved[i];
    if (t && ct_version(t) != ctx->ver[i])
        return ct__error(CT_ERR_AUTOGRAD, "one of the variables needed for gradient computation has been "
                         "modified by an inplace operation: saved tensor %d is at version %lld; expected "
                         "version %lld instead.", i, (long long)ct_version(t), (long long)ctx->ver[i]);
    return t;
}

ct_status ct__function_backward(ct_node *n, ct_tensor **gout, ct_tensor **gin, bool final) {
    const ct_function_def *def = n->fdef;
    /* missing output gradients are zeros, like PyTorch's materialize_grads */
    for (int j = 0; j < n->nout; j++) {
        if (gout[j]) continue;
        gout[j] = ct_zeros(n->out_sizes[j], n->out_ndim[j], n->out_dtype[j]);
        if (!gout[j]) return ct_last_error_code();
    }
    n->fctx->final = final;
    ct_status st = def->backward(n->fctx, gout, gin);
    n->fctx->final = false;
    if (st) return ct_last_error_code() ? ct_last_error_code() : st;
    for (int k = 0; k < n->nin; k++) {
        if (!gin[k] || !n->next[k].node) continue;
        /* check the shape against the input's */
        ct_tensor *in = n->in ? n->in[k] : NULL;
        if (in && (gin[k]->ndim != in->ndim ||
                   memcmp(gin[k]->sizes, in->sizes, sizeof(int64_t) * (size_t)in->ndim)))
            return ct__error_status(CT_ERR_SHAPE, "Function %s returned an invalid gradient at index "
                                    "%d - got %s but expected shape compatible with %s", n->name, k,
                                    ct__tshape(gin[k]), ct__tshape(in));
    }
    return CT_OK;
}

/* def->backward on gout (NULL entries: zeros like the outputs), for the
 * forward-mode double-vjp rule (forward.c): no shape checks. */
ct_status ct__function_backward_raw(const ct_function_def *def, struct ct_function_ctx *ctx,
                                    ct_tensor *const *outs, ct_tensor **gout, ct_tensor **gin) {
    for (int j = 0; j < def->noutputs; j++)
        if (!gout[j] && !(gout[j] = ct_zeros_like(outs[j]))) return ct_last_error_code();
    ct_status st = def->backward(ctx, gout, gin);
    if (st) return ct_last_error_code() ? ct_last_error_code() : st;
    return CT_OK;
}

ct_status ct_function_apply(const ct_function_def *def, ct_tensor *const *inputs, int ninputs,
                            void *user, ct_tensor **outputs) {
    if (!def || !def->forward || !def->backward || def->noutputs <= 0)
        return ct__error_status(CT_ERR_ARG, "function_apply: the definition needs forward, backward "
                                "and noutputs > 0");
    if (!outputs) return ct__error_status(CT_ERR_NULL, "function_apply: outputs is NULL");
    for (int k = 0; k < ninputs; k++) CT_NULLCHECK_AT_S("function_apply", inputs, k);
    struct ct_function_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return ct__error_status(CT_ERR_OOM, "function_apply: out of memory");
    ctx->user = user;
    for (int j = 0; j < def->noutputs; j++) outputs[j] = NULL;
    bool need = ct__ag_needed(inputs, ninputs);
    ct_trace_hook *th = ct__tracer();
    if (need && th && !th->joint) /* its backward is C code an op-by-op replay cannot record */
        th->brk(th, def->name ? def->name : "function_apply",
                "a custom autograd function (ct_function_apply) under autograd");
    /* forward AD: the forward sees plain tensors (no tangents); the
     * outputs' tangents come from def->jvp (or its backward) below */
    bool fw = ct__fw_nlevels && ct__fw_any(inputs, ninputs);
    unsigned fw_prev = fw ? ct__fw_hide_all() : 0;
    bool prev = ct_set_grad_enabled(false);
    ct_status st = def->forward(ctx, inputs, ninputs, outputs);
    ct_set_grad_enabled(prev);
    if (fw) ct__fw_unhide_all(fw_prev);
    if (st == CT_OK)
        for (int j = 0; j < def->noutputs; j++)
            if (!outputs[j]) st = ct__error_status(CT_ERR_RUNTIME, "function %s: forward returned no output %d",
                                                   def->name ? def->name : "?", j);
    if (st) {
        ct__function_ctx_free(ctx);
        return ct_last_error_code() ? ct_last_error_code() : st;
    }
    /* an output that is an input itself becomes a view, so the input's
     * history is left alone */
    for (int j = 0; j < def->noutputs; j++)
        for (int k = 0; k < ninputs; k++)
            if (outputs[j] == inputs[k]) {
                ct_tensor *o = outputs[j];
                outputs[j] = ct__register(ct__view_of(o, o->sizes, o->strides, o->ndim, o->offset));
                if (!outputs[j]) { ct__function_ctx_free(ctx); return ct_last_error_code(); }
            }
    if (fw && (st = ct__fw_function(def, ctx, inputs, ninputs, outputs))) {
        ct__function_ctx_free(ctx);
        for (int j = 0; j < def->noutputs; j++) outputs[j] = NULL;
        return st;
    }
    if (!need) {
        ct__function_ctx_free(ctx);
        return CT_OK;
    }
    extern ct_node *ct__ag_custom_node(const ct_function_def *def, struct ct_function_ctx *ctx,
                                       ct_tensor *const *inputs, int ninputs, ct_tensor **outputs);
    if (!ct__ag_custom_node(def, ctx, inputs, ninputs, outputs)) return ct_last_error_code();
    return CT_OK;
}
