/* bench_models.h -- the model helpers bench_suite and bench_compile share:
 * a Sequential taking ownership of its layers, an optimizer by name. */
#ifndef CT_BENCH_MODELS_H
#define CT_BENCH_MODELS_H

#include <stdio.h>
#include <string.h>

#include <ctorch/ctorch.h>
#include <ctorch/optim.h>

/* A Sequential of mods[0..n) (the caller's references move into it), or
 * NULL (all released) when one is NULL. */
static inline ct_module *seq_take(ct_module **mods, int n) {
    for (int i = 0; i < n; i++)
        if (!mods[i]) {
            for (int j = 0; j < n; j++) if (mods[j]) ct_module_release(mods[j]);
            return NULL;
        }
    ct_module *m = ct_sequential_new(mods, n);
    for (int i = 0; i < n; i++) ct_module_release(mods[i]);
    return m;
}

/* sgd, sgdm (momentum 0.9), adam, adamw (weight decay 1e-2), fused steps. */
static inline ct_optimizer *make_opt(ct_module *m, const char *kind, double lr) {
    ct_tensor *params[512];
    int np = ct_module_named_parameters(m, NULL, params, 512);
    if (np < 0 || np > 512) { fprintf(stderr, "bench: %d parameters\n", np); return NULL; }
    ct_optimizer *o = NULL;
    if (!strcmp(kind, "sgd")) o = ct_sgd_new(params, np, lr, 0, 0, 0, false, false);
    else if (!strcmp(kind, "sgdm")) o = ct_sgd_new(params, np, lr, 0.9, 0, 0, false, false);
    else if (!strcmp(kind, "adam")) o = ct_adam_new(params, np, lr, 0.9, 0.999, 1e-8, 0, false, false);
    else if (!strcmp(kind, "adamw")) o = ct_adamw_new(params, np, lr, 0.9, 0.999, 1e-8, 1e-2, false, false);
    if (o && ct_optim_set_all(o, "fused", 1) != CT_OK) { ct_optim_free(o); return NULL; }
    return o;
}

#endif
