/* fused_optim.h -- private: the optimizers' steps in the op layer (used by
 * src/optim/optim.c).  The hyperparameters are the optim params family
 * (params_optim.def).
 *
 *  - ct__sgd_update / ct__adam_update: one parameter, torch.optim's
 *    _single_tensor_sgd / _single_tensor_adam(w) with public in-place ops
 *    (the optimizers' op-by-op path and the fused ops' fallback);
 *  - ct__sgd_step / ct__adam_step: a whole group, the table ops sgd_step /
 *    adam_step: the parameters whose tensors are contiguous float32/float64
 *    of one device with a kernel there go to ONE dispatch (one parallel loop
 *    over all of them), the others (and all of them where the device has no
 *    kernel, or ct__fused_disable switched it off) through the single-tensor
 *    update one by one.
 * The state tensors must exist (zeros for a fresh state) and have their
 * parameter's shape; they are updated in place.  Call with grad mode off
 * (the optimizer's step does).  CT_OK or the first error. */
#ifndef CT_FUSED_OPTIM_H
#define CT_FUSED_OPTIM_H

#include "op_table.h"

/* buf: the momentum buffer (NULL when h->momentum == 0); first: it is fresh
 * and starts as the grad (h->first_step is ignored here) */
ct_status ct__sgd_update(ct_tensor *p, ct_tensor *grad, ct_tensor *buf, bool first,
                         const ct_p_optim *h);
/* step: the parameter's step count, already incremented for this step;
 * vmax: max_exp_avg_sq, only read when h->amsgrad */
ct_status ct__adam_update(ct_tensor *p, ct_tensor *grad, ct_tensor *m, ct_tensor *v,
                          ct_tensor *vmax, double step, const ct_p_optim *h);

/* n parameters; buf NULL when h->momentum == 0; h->first_step: every buffer
 * is fresh (callers split a group whose buffers are partly fresh) */
ct_status ct__sgd_step(ct_tensor *const *p, ct_tensor *const *grad, ct_tensor *const *buf, int n,
                       const ct_p_optim *h);
/* vmax NULL unless h->amsgrad; steps: each parameter's step count, a 0-dim
 * float32 cpu tensor already incremented for this step */
ct_status ct__adam_step(ct_tensor *const *p, ct_tensor *const *grad, ct_tensor *const *m,
                        ct_tensor *const *v, ct_tensor *const *vmax, ct_tensor *const *steps, int n,
                        const ct_p_optim *h);

#endif
