/* layers_impl.h -- private helpers shared by src/nn/layers*.c: PyTorch-style
 * formatting for extra_repr, parameter creation with PyTorch's default
 * initialization. */
#ifndef CT_NN_LAYERS_IMPL_H
#define CT_NN_LAYERS_IMPL_H

#include "../ops/op_table.h"
#include "ctorch/nn.h"

/* printf into a malloc'ed string (NULL on OOM). */
char *ct__layers_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Python's repr(float): "1.0", "0.01", "1e-05", "inf". */
void ct__layers_pyfloat(double v, char *buf, size_t n);
/* Python's str of a number that PyTorch stores as given (int or float):
 * integral values print as ints ("20"), others like repr(float). */
void ct__layers_pynum(double v, char *buf, size_t n);
/* "(3, 3)", "(3,)". */
void ct__layers_tuple(const int64_t *v, int n, char *buf, size_t cap);
/* "2" when every entry is equal (PyTorch keeps the int it was given), else "(2, 3)". */
void ct__layers_int_or_tuple(const int64_t *v, int n, char *buf, size_t cap);
/* Registers a new parameter of the default dtype filled from
 * U(-bound, bound) (bound <= 0: zeros) or with `fill` when uniform is false.
 * Returns the slot or -1 + error. */
int ct__layers_param_uniform(ct_module *m, const char *name, const int64_t *shape, int nd,
                             double bound);
int ct__layers_param_fill(ct_module *m, const char *name, const int64_t *shape, int nd,
                          double fill);
/* Registers child under name, drops the caller's reference and stores the
 * borrowed pointer in *slot (slot may be NULL).  A NULL child (a failed
 * constructor) keeps its error.  0, or -1 + error. */
/* Buffer `slot` of m is computed by init (in place, on the buffer's device)
 * when ct_module_to brings it from meta: for non-persistent buffers, which
 * no state dict restores (BERT's position_ids). */
ct_status ct__module_buffer_init(ct_module *m, int slot, ct_status (*init)(ct_tensor *t));
int ct__layers_add_child(ct_module *m, const char *name, ct_module *child, ct_module **slot);

/* relu(bn(x)) for a BatchNorm1d/2d module bn (norm.c): the same values as the
 * two modules one after the other; in evaluation mode with nothing needing a
 * gradient the relu runs inside the normalization's pass (the models' conv ->
 * bn -> relu chains) */
ct_tensor *ct__batch_norm_relu(ct_module *bn, ct_tensor *x);
/* A module whose destroy is the generic one and which failed half-way. */
static inline ct_module *ct__layers_fail(ct_module *m) {
    ct_module_release(m);
    return NULL;
}

#endif
