/* custom_module.c -- writing your own nn module in C.
 *
 * A module is a struct that embeds ct_module as its first member, plus a
 * ct_module_class: the name PyTorch would print, the struct size, a forward
 * callback and (optionally) an extra_repr.  Parameters are registered by
 * name -- they appear in state dicts and named_parameters like any built-in
 * layer's -- and are read in forward through ct_module_param (which is what
 * lets ct_functional_call substitute them).
 *
 * Here: the Snake activation (x + sin^2(alpha x) / alpha, with a learnable
 * frequency alpha per feature) between two Linear layers in a Sequential,
 * fitted to y = sin(3x) + 0.3x with plain SGD on autograd's gradients.
 *
 *     ./custom_module [steps]
 */
#include <ctorch/ctorch.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- the module ------------------------------------------------------------- */
typedef struct {
    ct_module base;      /* first: a snake_mod * is a ct_module * */
    int64_t features;
    int alpha_slot;      /* slot of the registered parameter */
} snake_mod;

static ct_tensor *snake_forward(ct_module *m, ct_tensor *const *in, int n) {
    snake_mod *self = (snake_mod *)m;
    if (n != 1) return NULL;
    ct_tensor *x = in[0];
    ct_tensor *alpha = ct_module_param(m, self->alpha_slot); /* [features], broadcasts over the batch */
    ct_tensor *s = ct_sin(ct_mul(x, alpha));
    return ct_add(x, ct_div(ct_square(s), alpha));
}

static char *snake_repr(ct_module *m) {
    char *s = malloc(48);
    if (s) snprintf(s, 48, "features=%lld", (long long)((snake_mod *)m)->features);
    return s; /* freed by the library */
}

static const ct_module_class snake_class = {
    .name = "Snake", .size = sizeof(snake_mod), .forward = snake_forward, .extra_repr = snake_repr};

static ct_module *snake_new(int64_t features) {
    snake_mod *self = (snake_mod *)ct_module_new(&snake_class);
    if (!self) return NULL;
    self->features = features;
    ct_tensor *alpha = ct_ones(&features, 1, CT_F32); /* no scope open: we own it */
    self->alpha_slot = ct_module_register_parameter(&self->base, "alpha", alpha);
    ct_release(alpha);                                /* the module keeps its own reference */
    if (self->alpha_slot < 0) {
        ct_module_release(&self->base);
        return NULL;
    }
    return &self->base;
}

/* ---- training --------------------------------------------------------------- */
int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 400;
    const float lr = 0.02f;
    ct_manual_seed(0);

    ct_module *layers[3] = {ct_linear_new(1, 32, true), snake_new(32), ct_linear_new(32, 1, true)};
    ct_module *net = ct_sequential_new(layers, 3);
    for (int i = 0; i < 3; i++) ct_module_release(layers[i]); /* the Sequential holds them now */
    if (!net) {
        fprintf(stderr, "error: %s\n", ct_last_error());
        return 1;
    }
    if (ct_module_print(net) != CT_OK) return 1;

    /* names are borrowed from the module: valid until its next walk
     * (named_parameters, num_parameters, state_dict) */
    printf("%lld parameters:", (long long)ct_module_num_parameters(net, true));
    const char *names[8];
    ct_tensor *params[8];
    int np = ct_module_named_parameters(net, names, params, 8);
    for (int i = 0; i < np; i++) printf(" %s", names[i]);
    printf("\n");

    /* the toy problem: 128 points of y = sin(3x) + 0.3x on [-2, 2] */
    ct_scope data = ct_scope_begin();
    ct_tensor *x = ct_reshape(ct_linspace(-2, 2, 128, CT_F32), (int64_t[]){128, 1}, 2);
    ct_tensor *y = ct_add(ct_sin(ct_mul_scalar(x, 3)), ct_mul_scalar(x, 0.3));

    double first = 0, last = 0;
    for (int step = 0; step <= steps; step++) {
        ct_scope s = ct_scope_begin(); /* every temporary of this step goes at its end */
        ct_tensor *loss = ct_mean(ct_square(ct_sub(ct_module_forward1(net, x), y)), NULL, 0, false);
        ct_module_zero_grad(net);
        if (!loss || ct_backward(loss, NULL, false, false) != CT_OK) {
            fprintf(stderr, "error: %s\n", ct_last_error());
            return 1;
        }
        double l = ct_item(loss);
        if (step == 0) first = l;
        last = l;
        if (step % 50 == 0) printf("step %4d  loss %.5f\n", step, l);
        /* SGD: p -= lr * grad, outside autograd */
        bool prev = ct_set_grad_enabled(false);
        for (int i = 0; i < np; i++) ct_add_scaled_(params[i], ct_grad(params[i]), -lr);
        ct_set_grad_enabled(prev);
        ct_scope_end(s);
    }
    ct_scope_end(data);
    printf("loss %.5f -> %.5f (%s)\n", first, last, last < first ? "going down" : "NOT going down");
    ct_module_release(net);
    return last < first ? 0 : 1;
}
