/* ctorch/nn.h -- modules (torch.nn), layers, the functional API, losses
 * and initialization.
 *
 * A module is a struct that embeds `ct_module` as its first member, plus a
 * class (name, forward, ...).  Parameters, buffers and children are
 * registered by name, so state-dict keys follow PyTorch's module paths
 * exactly ("features.0.weight", "bn1.running_mean").  Modules are
 * reference-counted: a container retains its children.
 *
 *     ct_module *net = ct_sequential_new((ct_module *[]){
 *         ct_linear_new(784, 256, true), ct_relu_new(), ct_linear_new(256, 10, true)}, 3);
 *     ct_tensor *logits = ct_module_forward1(net, x);
 *     ...
 *     ct_module_release(net);
 *
 * Writing a module in C:
 *
 *     typedef struct { ct_module base; int64_t k; } my_mod;
 *     static ct_tensor *my_forward(ct_module *m, ct_tensor *const *in, int n) {
 *         my_mod *self = (my_mod *)m;
 *         return ct_mul_scalar(ct_linear(in[0], ct_module_param(m, 0), NULL), (double)self->k);
 *     }
 *     static const ct_module_class my_class = {"MyMod", sizeof(my_mod), my_forward};
 *     my_mod *m = (my_mod *)ct_module_new(&my_class);
 *     ct_module_register_parameter(&m->base, "weight", w);   // slot 0
 *
 * Inside forward, read parameters and buffers through ct_module_param /
 * ct_module_buffer (by registration slot): that is what lets
 * ct_functional_call substitute them without touching the module.
 */
#ifndef CTORCH_NN_H
#define CTORCH_NN_H

#include "data.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_module ct_module;
typedef struct ct_module_impl ct_module_impl;

typedef struct ct_module_class {
    const char *name;     /* class name, as PyTorch prints it ("Linear") */
    size_t size;          /* sizeof the struct embedding ct_module */
    /* The forward pass.  Returns a new (scope-owned) tensor or NULL. */
    ct_tensor *(*forward)(ct_module *self, ct_tensor *const *inputs, int n);
    /* Optional: "in_features=784, out_features=10, bias=True" (malloc'ed). */
    char *(*extra_repr)(ct_module *self);
    /* Optional: frees what the struct owns beyond registered tensors/children. */
    void (*destroy)(ct_module *self);
    /* Optional: a forward with several outputs (RNNs: output and h_n); writes
     * nout tensors; ct_module_forward uses output 0 when this is set and
     * forward is NULL. */
    ct_status (*forward_multi)(ct_module *self, ct_tensor *const *inputs, int n,
                               ct_tensor **outputs, int nout);
} ct_module_class;

struct ct_module {
    const ct_module_class *cls;
    ct_module_impl *impl;  /* private: names, tensors, children, flags */
};

/* ---- lifetime -------------------------------------------------------- */
/* Allocates cls->size zeroed bytes with the base initialized (refcount 1). */
CT_API ct_module *ct_module_new(const ct_module_class *cls);
CT_API ct_module *ct_module_retain(ct_module *m);
/* Frees the module when the last reference goes: children released,
 * parameters and buffers released, cls->destroy called. */
CT_API void ct_module_release(ct_module *m);

/* ---- registration (returns the slot index, or -1 + error) ------------- */
/* The module keeps a reference to t (a parameter: requires_grad is set). */
CT_API int ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t);
/* persistent buffers are part of the state dict (like PyTorch). t may be NULL (None). */
CT_API int ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t, bool persistent);
/* The module retains child. */
CT_API int ct_module_register_module(ct_module *m, const char *name, ct_module *child);

/* ---- access ------------------------------------------------------------- */
/* The parameter/buffer in a slot (borrowed), honoring ct_functional_call's
 * substitutions.  NULL for an empty (None) slot. */
CT_API ct_tensor *ct_module_param(ct_module *m, int slot);
CT_API ct_tensor *ct_module_buffer(ct_module *m, int slot);
/* Replaces a parameter or buffer tensor (e.g. running stats).  Retained. */
CT_API ct_status ct_module_set_param(ct_module *m, int slot, ct_tensor *t) CT_NODISCARD;
CT_API ct_status ct_module_set_buffer(ct_module *m, int slot, ct_tensor *t) CT_NODISCARD;
CT_API int ct_module_num_children(const ct_module *m);
CT_API ct_module *ct_module_child(const ct_module *m, int i);        /* borrowed */
CT_API const char *ct_module_child_name(const ct_module *m, int i);
/* A descendant by dotted path ("features.0"), or NULL. */
CT_API ct_module *ct_module_get_submodule(ct_module *m, const char *path);
CT_API const char *ct_module_class_name(const ct_module *m);

/* ---- the PyTorch module API ---------------------------------------------- */
CT_API ct_tensor *ct_module_forward(ct_module *m, ct_tensor *const *inputs, int n);
CT_API ct_tensor *ct_module_forward1(ct_module *m, ct_tensor *x);
CT_API ct_status ct_module_forward_multi(ct_module *m, ct_tensor *const *inputs, int n,
                                         ct_tensor **outputs, int nout) CT_NODISCARD;
CT_API void ct_module_train(ct_module *m, bool mode); /* recursive */
CT_API void ct_module_eval(ct_module *m);
CT_API bool ct_module_is_training(const ct_module *m);
CT_API void ct_module_zero_grad(ct_module *m);         /* grads set to NULL */
/* Calls fn on every module, children first (like nn.Module.apply). */
CT_API ct_status ct_module_apply(ct_module *m, ct_status (*fn)(ct_module *m, void *user),
                                 void *user) CT_NODISCARD;
/* named_parameters(): full dotted names and (borrowed) tensors, in
 * registration order, children after own parameters, shared tensors once.
 * Returns the count; writes up to cap entries (names may be NULL). */
CT_API int ct_module_named_parameters(ct_module *m, const char **names, ct_tensor **params, int cap);
CT_API int ct_module_named_buffers(ct_module *m, const char **names, ct_tensor **bufs, int cap);
CT_API int64_t ct_module_num_parameters(ct_module *m, bool trainable_only);
/* PyTorch's repr (nested, indented), malloc'ed. */
CT_API char *ct_module_to_string(ct_module *m);
CT_API ct_status ct_module_print(ct_module *m);

/* ---- state dicts (an ordered name -> tensor map: ct_sample) ------------- */
/* Parameters and persistent buffers under PyTorch's keys.  The sample holds
 * references to the module's own tensors (no copy). */
CT_API ct_sample *ct_module_state_dict(ct_module *m);
/* Copies values in (shapes must match; dtypes converted).  strict: missing
 * or unexpected keys are an error naming them. */
CT_API ct_status ct_module_load_state_dict(ct_module *m, const ct_sample *sd, bool strict) CT_NODISCARD;

/* ---- functional_call (torch.func.functional_call) ----------------------- */
/* Runs m's forward with the parameters/buffers named in `replace`
 * (full dotted names) substituted, without modifying m.  Thread-safe with
 * respect to other threads using m normally. */
CT_API ct_tensor *ct_functional_call(ct_module *m, const ct_sample *replace,
                                     ct_tensor *const *inputs, int n);

/* ---- containers --------------------------------------------------------- */
/* Sequential/ModuleList retain the given modules (callers keep their refs). */
CT_API ct_module *ct_sequential_new(ct_module *const *mods, int n);
CT_API ct_module *ct_module_list_new(ct_module *const *mods, int n);
CT_API ct_status ct_module_list_append(ct_module *list, ct_module *m) CT_NODISCARD;
CT_API ct_module *ct_module_dict_new(const char *const *names, ct_module *const *mods, int n);

/* ---- section: layers (src/nn/layers*.c) ---- */
/* ---- end section: layers ---- */

/* ---- section: functional and losses (src/nn/functional*.c, loss*.c) ---- */
/* ---- end section: functional and losses ---- */

/* ---- section: init (src/nn/init.c) ---- */
/* ---- end section: init ---- */

#ifdef __cplusplus
}
#endif
#endif
