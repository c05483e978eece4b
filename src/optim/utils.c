/* utils.c -- gradient clipping (torch.nn.utils.clip_grad_norm_ /
 * clip_grad_value_) and weight averaging (torch.optim.swa_utils.
 * AveragedModel), written with public ops in torch's order. */
#include <math.h>

#include "optim_impl.h"

ct_status ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm, double norm_type,
                             bool error_if_nonfinite, double *total_norm) {
    if (n < 0 || (n > 0 && !params))
        return ct__error_status(CT_ERR_NULL, "clip_grad_norm_: params is NULL");
    if (isnan(norm_type))
        return ct__error_status(CT_ERR_ARG, "clip_grad_norm_: norm_type is nan");
    ct_scope sc = ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    ct_tensor **norms = malloc(sizeof *norms * (size_t)(n ? n : 1));
    ct_tensor **grads = malloc(sizeof *grads * (size_t)(n ? n : 1));
    if (!norms || !grads) { st = ct__error_status(CT_ERR_OOM, "clip_grad_norm_: out of memory"); goto out; }
    int ng = 0;
    for (int i = 0; i < n; i++) {
        if (!params[i]) { st = ct__error_status(CT_ERR_NULL, "clip_grad_norm_: parameter %d is NULL", i); goto out; }
        ct_tensor *g = ct_grad(params[i]);
        if (g) grads[ng++] = g;
    }
    if (ng == 0) {
        if (total_norm) *total_norm = 0.0;
        goto out;
    }
    bool inf = isinf(norm_type) && norm_type > 0;
    for (int i = 0; i < ng; i++) {
        norms[i] = inf ? ct_max(ct_abs(grads[i])) : ct_norm(grads[i], norm_type, NULL, 0, false);
        if (!norms[i]) { st = ct_last_error_code(); goto out; }
    }
    ct_tensor *total;
    if (inf) total = ng == 1 ? norms[0] : ct_max(ct_stack(norms, ng, 0));
    else total = ct_norm(ct_stack(norms, ng, 0), norm_type, NULL, 0, false);
    if (!total) { st = ct_last_error_code(); goto out; }
    double tv = ct_item(total);
    if (error_if_nonfinite && !isfinite(tv)) {
        st = ct__error_status(CT_ERR_RUNTIME, "clip_grad_norm_: the total norm of order %g for "
                              "gradients from `parameters` is non-finite, so it cannot be clipped. "
                              "To disable this error and scale the gradients by the non-finite norm "
                              "anyway, set `error_if_nonfinite=False`", norm_type);
        goto out;
    }
    if (total_norm) *total_norm = tv;
    /* clip_coef = max_norm / (total + 1e-6), clamped to 1 (float / tensor is reciprocal * float) */
    ct_tensor *coef = ct_clamp(ct_mul_scalar(ct_reciprocal(ct_add_scalar(total, 1e-6)), max_norm),
                               NAN, 1.0);
    if (!coef) { st = ct_last_error_code(); goto out; }
    for (int i = 0; i < ng; i++)
        if (!ct_mul_(grads[i], coef)) { st = ct_last_error_code(); goto out; }
out:
    free(norms);
    free(grads);
    ct_set_grad_enabled(prev);
    ct_scope_end(sc);
    return st;
}

ct_status ct_clip_grad_value_(ct_tensor *const *params, int n, double clip_value) {
    if (n < 0 || (n > 0 && !params))
        return ct__error_status(CT_ERR_NULL, "clip_grad_value_: params is NULL");
    if (isnan(clip_value)) return ct__error_status(CT_ERR_ARG, "clip_grad_value_: clip_value is nan");
    bool prev = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    for (int i = 0; i < n && !st; i++) {
        if (!params[i]) { st = ct__error_status(CT_ERR_NULL, "clip_grad_value_: parameter %d is NULL", i); break; }
        ct_tensor *g = ct_grad(params[i]);
        if (g && !ct_clamp_(g, -clip_value, clip_value)) st = ct_last_error_code();
    }
    ct_set_grad_enabled(prev);
    return st;
}

/* ---- AveragedModel ---------------------------------------------------------------- */
struct ct_averaged_model {
    ct_module *m;
    ct_sample *avg;
    bool *is_buf;     /* per entry of avg */
    double decay;     /* NAN: SWA */
    bool use_buffers;
    int64_t n_averaged;
};

void ct_averaged_model_free(ct_averaged_model *a) {
    if (!a) return;
    ct_module_release(a->m);
    ct_sample_free(a->avg);
    free(a->is_buf);
    free(a);
}

ct_averaged_model *ct_averaged_model_new(ct_module *m, double decay, bool use_buffers) {
    if (!m) return ct__error(CT_ERR_NULL, "AveragedModel: module is NULL");
    if (!isnan(decay) && decay >= 1)
        return ct__error(CT_ERR_ARG, "AveragedModel: decay must be in [0, 1) (got %g)", decay);
    ct_averaged_model *a = calloc(1, sizeof *a);
    if (!a) return ct__error(CT_ERR_OOM, "AveragedModel: out of memory");
    a->decay = (isnan(decay) || decay < 0) ? NAN : decay;
    a->use_buffers = use_buffers;
    a->m = ct_module_retain(m);
    a->avg = ct_sample_new();
    ct_sample *sd = ct_module_state_dict(m);
    int nb = ct_module_named_buffers(m, NULL, NULL, 0);
    const char **bnames = malloc(sizeof(char *) * (size_t)(nb > 0 ? nb : 1));
    ct_scope sc = ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    if (!a->avg || !sd || !bnames || nb < 0) goto fail;
    ct_module_named_buffers(m, bnames, NULL, nb);
    int cnt = ct_sample_count(sd);
    a->is_buf = calloc((size_t)(cnt ? cnt : 1), sizeof(bool));
    if (!a->is_buf) { ct__error(CT_ERR_OOM, "AveragedModel: out of memory"); goto fail; }
    for (int i = 0; i < cnt; i++) {
        const char *k = ct_sample_name(sd, i);
        for (int j = 0; j < nb; j++)
            if (bnames[j] && strcmp(bnames[j], k) == 0) a->is_buf[i] = true;
        if (ct_sample_set(a->avg, k, ct_clone(ct_detach(ct_sample_at(sd, i))))) goto fail;
    }
    ct_set_grad_enabled(prev);
    ct_scope_end(sc);
    free(bnames);
    ct_sample_free(sd);
    return a;
fail:
    ct_set_grad_enabled(prev);
    ct_scope_end(sc);
    free(bnames);
    ct_sample_free(sd);
    ct_averaged_model_free(a);
    return NULL;
}

ct_status ct_averaged_model_update(ct_averaged_model *a, ct_module *model) {
    if (!a || !model) return ct__error_status(CT_ERR_NULL, "AveragedModel.update_parameters: NULL argument");
    ct_sample *sd = ct_module_state_dict(model);
    if (!sd) return ct_last_error_code();
    ct_status st = CT_OK;
    int cnt = ct_sample_count(a->avg);
    /* validate first */
    for (int i = 0; i < cnt && !st; i++) {
        const char *k = ct_sample_name(a->avg, i);
        ct_tensor *p = ct_sample_get(sd, k), *q = ct_sample_at(a->avg, i);
        if (!p) st = ct__error_status(CT_ERR_ARG, "AveragedModel.update_parameters: model has no '%s'", k);
        else if (ct_numel(p) != ct_numel(q) || ct_ndim(p) != ct_ndim(q))
            st = ct__error_status(CT_ERR_SHAPE, "AveragedModel.update_parameters: '%s' has shape %s, "
                                  "the average %s", k, ct__tshape(p), ct__tshape(q));
    }
    if (st) { ct_sample_free(sd); return st; }
    bool prev = ct_set_grad_enabled(false);
    for (int i = 0; i < cnt && !st; i++) {
        if (a->is_buf[i] && !a->use_buffers) continue;
        ct_scope sc = ct_scope_begin();
        ct_tensor *q = ct_sample_at(a->avg, i);
        ct_tensor *p = ct_detach(ct_sample_get(sd, ct_sample_name(a->avg, i)));
        ct_tensor *v;
        if (a->n_averaged == 0) v = p;
        else if (isnan(a->decay)) v = ct_add(q, ct_div_scalar(ct_sub(p, q), (double)(a->n_averaged + 1)));
        else v = ct_add(ct_mul_scalar(q, a->decay), ct_mul_scalar(p, 1 - a->decay));
        if (!ct_copy_(q, v)) st = ct_last_error_code();
        ct_scope_end(sc);
    }
    ct_set_grad_enabled(prev);
    ct_sample_free(sd);
    if (!st) a->n_averaged++;
    return st;
}

int64_t ct_averaged_model_n_averaged(const ct_averaged_model *a) { return a ? a->n_averaged : -1; }
const ct_sample *ct_averaged_model_state(const ct_averaged_model *a) { return a ? a->avg : NULL; }

ct_tensor *ct_averaged_model_forward(ct_averaged_model *a, ct_tensor *const *inputs, int n) {
    if (!a) return ct__error(CT_ERR_NULL, "AveragedModel.forward: NULL model");
    return ct_functional_call(a->m, a->avg, inputs, n);
}

ct_status ct_averaged_model_copy_to(const ct_averaged_model *a, ct_module *m) {
    if (!a || !m) return ct__error_status(CT_ERR_NULL, "AveragedModel.copy_to: NULL argument");
    return ct_module_load_state_dict(m, a->avg, true);
}
