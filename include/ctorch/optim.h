/* ctorch/optim.h -- optimizers (torch.optim), learning-rate schedulers
 * (torch.optim.lr_scheduler), gradient clipping (torch.nn.utils) and
 * weight averaging (torch.optim.swa_utils).
 *
 *     ct_tensor *params[64];
 *     int n = ct_module_named_parameters(net, NULL, params, 64);
 *     ct_optimizer *opt = ct_adamw_new(params, n, 1e-3, 0.9, 0.999, 1e-8, 1e-2, false, false);
 *     ct_lr_scheduler *sched = ct_cosine_annealing_lr_new(opt, 100, 0.0);
 *     for (int step = 0; step < 100; step++) {
 *         ct_scope s = ct_scope_begin();
 *         ct_optim_zero_grad(opt);
 *         ct_tensor *loss = ct_cross_entropy(ct_module_forward1(net, x), y, NULL);
 *         if (ct_backward(loss, NULL, false, false) || ct_optim_step(opt)) ...;
 *         ct_lr_scheduler_step(sched);
 *         ct_scope_end(s);
 *     }
 *     ct_lr_scheduler_free(sched);
 *     ct_optim_free(opt);
 *
 * An optimizer keeps references to its parameters and owns its state
 * (momentum buffers, moments, step counts).  It has one or more parameter
 * groups; each group holds its parameters and its own copy of every
 * hyperparameter (named like PyTorch's param_groups keys: "lr",
 * "momentum", "weight_decay", "beta1"/"beta2" for betas, "eps", booleans
 * as 0/1: "nesterov", "amsgrad", "maximize", "centered", "fused").  A
 * group added with ct_optim_add_param_group starts from the optimizer's
 * defaults.  Schedulers work by writing a group's "lr" (and "momentum" /
 * "beta1" for OneCycleLR).
 *
 * ct_optim_step runs with grad mode off and writes the parameters in place;
 * parameters without a gradient are skipped (their state is created at
 * their first gradient, like PyTorch).  Parameters may be float32 or
 * float64 and any layout.  With "fused" = 1 (SGD, Adam, AdamW) a group's
 * contiguous parameters are updated together by one OpenMP loop over all of
 * the group's contiguous parameters (multi-tensor, no temporaries; identical
 * results for any thread count) that gives the op-by-op result to within
 * rounding (1e-7 relative); other parameters take the op-by-op path.
 *
 * Not thread-safe: one optimizer is used by one thread at a time.
 */
#ifndef CTORCH_OPTIM_H
#define CTORCH_OPTIM_H

#include "autograd.h"
#include "data.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ct_optimizer ct_optimizer;

/* ---- constructors (PyTorch's defaults in comments) --------------------
 * params[0..n) become parameter group 0; each is retained.  They must be
 * floating-point leaves.  NULL + error on an invalid hyperparameter
 * ("SGD: invalid learning rate: -1"). */
/* torch.optim.SGD(lr, momentum=0, dampening=0, weight_decay=0, nesterov=False,
 * maximize=False).  State: "momentum_buffer". */
CT_API ct_optimizer *ct_sgd_new(ct_tensor *const *params, int n, double lr, double momentum,
                                double dampening, double weight_decay, bool nesterov,
                                bool maximize);
/* torch.optim.Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
 * amsgrad=False, maximize=False).  State: "step", "exp_avg", "exp_avg_sq",
 * "max_exp_avg_sq" (amsgrad). */
CT_API ct_optimizer *ct_adam_new(ct_tensor *const *params, int n, double lr, double beta1,
                                 double beta2, double eps, double weight_decay, bool amsgrad,
                                 bool maximize);
/* torch.optim.AdamW: like Adam with decoupled weight decay
 * (p *= 1 - lr * weight_decay; default weight_decay 1e-2). */
CT_API ct_optimizer *ct_adamw_new(ct_tensor *const *params, int n, double lr, double beta1,
                                  double beta2, double eps, double weight_decay, bool amsgrad,
                                  bool maximize);
/* torch.optim.Adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
 * maximize=False).  State: "step", "exp_avg", "exp_inf". */
CT_API ct_optimizer *ct_adamax_new(ct_tensor *const *params, int n, double lr, double beta1,
                                   double beta2, double eps, double weight_decay, bool maximize);
/* torch.optim.NAdam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
 * momentum_decay=4e-3).  State: "step", "mu_product" (float32, like torch),
 * "exp_avg", "exp_avg_sq". */
CT_API ct_optimizer *ct_nadam_new(ct_tensor *const *params, int n, double lr, double beta1,
                                  double beta2, double eps, double weight_decay,
                                  double momentum_decay);
/* torch.optim.RAdam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0).
 * State: "step", "exp_avg", "exp_avg_sq". */
CT_API ct_optimizer *ct_radam_new(ct_tensor *const *params, int n, double lr, double beta1,
                                  double beta2, double eps, double weight_decay);
/* torch.optim.RMSprop(lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0,
 * momentum=0, centered=False, maximize=False).  State: "step",
 * "square_avg", "momentum_buffer" (momentum > 0), "grad_avg" (centered). */
CT_API ct_optimizer *ct_rmsprop_new(ct_tensor *const *params, int n, double lr, double alpha,
                                    double eps, double weight_decay, double momentum,
                                    bool centered, bool maximize);
/* torch.optim.Adagrad(lr=1e-2, lr_decay=0, weight_decay=0,
 * initial_accumulator_value=0, eps=1e-10, maximize=False).  State: "step", "sum". */
CT_API ct_optimizer *ct_adagrad_new(ct_tensor *const *params, int n, double lr, double lr_decay,
                                    double weight_decay, double initial_accumulator_value,
                                    double eps, bool maximize);
/* torch.optim.Adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0,
 * maximize=False).  State: "step", "square_avg", "acc_delta". */
CT_API ct_optimizer *ct_adadelta_new(ct_tensor *const *params, int n, double lr, double rho,
                                     double eps, double weight_decay, bool maximize);
/* torch.optim.LBFGS(lr=1, max_iter=20, max_eval=None (max_iter*5/4 when
 * <= 0 here), tolerance_grad=1e-7, tolerance_change=1e-9, history_size=100,
 * line_search_fn=None (NULL) or "strong_wolfe").  One parameter group only;
 * step with ct_optim_step_closure.  The search runs in float64 on the
 * flattened parameters. */
CT_API ct_optimizer *ct_lbfgs_new(ct_tensor *const *params, int n, double lr, int64_t max_iter,
                                  int64_t max_eval, double tolerance_grad,
                                  double tolerance_change, int64_t history_size,
                                  const char *line_search_fn);
CT_API void ct_optim_free(ct_optimizer *opt);

/* ---- the optimizer API --------------------------------------------------- */
/* "SGD", "Adam", ... */
CT_API const char *ct_optim_name(const ct_optimizer *opt);
/* Adds a group: its params (retained; none may already be in the
 * optimizer) and hyperparameter overrides names[i] = values[i] (nh may be
 * 0; unknown names are an error).  Returns the group index or -1 + error. */
CT_API int ct_optim_add_param_group(ct_optimizer *opt, ct_tensor *const *params, int n,
                                    const char *const *names, const double *values, int nh);
CT_API int ct_optim_num_groups(const ct_optimizer *opt);
/* The params of a group (borrowed): returns the count, writes up to cap. */
CT_API int ct_optim_group_params(const ct_optimizer *opt, int group, ct_tensor **params, int cap);
/* True when the optimizer has a hyperparameter of that name. */
CT_API bool ct_optim_has(const ct_optimizer *opt, const char *name);
/* A group's hyperparameter (NAN + error when unknown). */
CT_API double ct_optim_get(const ct_optimizer *opt, int group, const char *name);
CT_API ct_status ct_optim_set(ct_optimizer *opt, int group, const char *name,
                              double value) CT_NODISCARD;
/* Sets a hyperparameter in every group and in the defaults. */
CT_API ct_status ct_optim_set_all(ct_optimizer *opt, const char *name, double value) CT_NODISCARD;
/* One update of every parameter that has a gradient. */
CT_API ct_status ct_optim_step(ct_optimizer *opt) CT_NODISCARD;
/* A closure re-evaluates the model: zero the grads, compute the loss, run
 * backward, return the loss value (NAN + error to abort). */
typedef double (*ct_optim_closure)(void *user);
/* step(closure): required by LBFGS, accepted by all (the closure runs once
 * first, with grad mode on).  *loss (may be NULL) gets the first loss. */
CT_API ct_status ct_optim_step_closure(ct_optimizer *opt, ct_optim_closure fn, void *user,
                                       double *loss) CT_NODISCARD;
/* zero_grad(set_to_none): set_to_none drops the grads, otherwise they are
 * zeroed in place. */
CT_API void ct_optim_zero_grad(ct_optimizer *opt, bool set_to_none);
/* The state tensor `name` of parameter index i (index over all groups, in
 * order), borrowed, or NULL when it has none (yet). */
CT_API ct_tensor *ct_optim_state(const ct_optimizer *opt, int param_index, const char *name);

/* ---- state dicts -----------------------------------------------------------
 * A ct_sample of named tensors with PyTorch's keys: "state.<i>.<name>"
 * (copies; "step" is a float32 0-dim tensor), "param_groups.<g>.<hp>"
 * (float64 0-dim; betas as "param_groups.<g>.betas" [2]) and
 * "param_groups.<g>.params" (int64 indices).  Loading into an optimizer of
 * the same kind and group layout restores the state exactly, so training
 * resumes bit for bit.  Free the sample with ct_sample_free. */
CT_API ct_sample *ct_optim_state_dict(const ct_optimizer *opt);
CT_API ct_status ct_optim_load_state_dict(ct_optimizer *opt, const ct_sample *sd) CT_NODISCARD;

/* ======================================================================
 * Learning-rate schedulers.  Like PyTorch, construction performs the
 * initial step (epoch 0) and records each group's "initial_lr"; call
 * ct_lr_scheduler_step after each ct_optim_step.  The recursive
 * (chainable) formulas of PyTorch are used, so values match torch's bit
 * for bit in double.  A scheduler borrows its optimizer (which must
 * outlive it).
 * ====================================================================== */
typedef struct ct_lr_scheduler ct_lr_scheduler;
CT_API ct_lr_scheduler *ct_step_lr_new(ct_optimizer *opt, int64_t step_size, double gamma);
CT_API ct_lr_scheduler *ct_multistep_lr_new(ct_optimizer *opt, const int64_t *milestones, int n,
                                            double gamma);
CT_API ct_lr_scheduler *ct_exponential_lr_new(ct_optimizer *opt, double gamma);
/* CosineAnnealingLR(T_max, eta_min=0) (PyTorch's recursive formula). */
CT_API ct_lr_scheduler *ct_cosine_annealing_lr_new(ct_optimizer *opt, int64_t T_max,
                                                   double eta_min);
/* CosineAnnealingWarmRestarts(T_0, T_mult=1, eta_min=0). */
CT_API ct_lr_scheduler *ct_cosine_annealing_warm_restarts_new(ct_optimizer *opt, int64_t T_0,
                                                              int64_t T_mult, double eta_min);
/* LinearLR(start_factor=1/3, end_factor=1.0, total_iters=5). */
CT_API ct_lr_scheduler *ct_linear_lr_new(ct_optimizer *opt, double start_factor,
                                         double end_factor, int64_t total_iters);
/* ConstantLR(factor=1/3, total_iters=5). */
CT_API ct_lr_scheduler *ct_constant_lr_new(ct_optimizer *opt, double factor, int64_t total_iters);
/* LambdaLR: lr = initial_lr * fn(epoch, user). */
typedef double (*ct_lr_lambda)(int64_t epoch, void *user);
CT_API ct_lr_scheduler *ct_lambda_lr_new(ct_optimizer *opt, ct_lr_lambda fn, void *user);
/* OneCycleLR options; zeroed fields take PyTorch's defaults. */
typedef struct ct_one_cycle_opts {
    double max_lr;              /* required (> 0), every group */
    int64_t total_steps;        /* required (> 0) */
    double pct_start;           /* 0: 0.3 */
    bool anneal_linear;         /* false: 'cos', true: 'linear' */
    bool no_cycle_momentum;     /* false: cycle_momentum=True */
    double base_momentum;       /* 0: 0.85 */
    double max_momentum;        /* 0: 0.95 */
    double div_factor;          /* 0: 25 */
    double final_div_factor;    /* 0: 1e4 */
    bool three_phase;
} ct_one_cycle_opts;
/* OneCycleLR; with cycle_momentum it also cycles "momentum" (SGD, RMSprop)
 * or "beta1" (Adam-like), like torch. */
CT_API ct_lr_scheduler *ct_one_cycle_lr_new(ct_optimizer *opt, const ct_one_cycle_opts *o);
/* SequentialLR: the schedulers (built on opt; SequentialLR takes them
 * over and frees them) run one after another, switching at milestones
 * (n - 1 of them). */
CT_API ct_lr_scheduler *ct_sequential_lr_new(ct_optimizer *opt, ct_lr_scheduler *const *scheds,
                                             int n, const int64_t *milestones);
/* ReduceLROnPlateau(mode "min"/"max", factor=0.1, patience=10,
 * threshold=1e-4, threshold_mode "rel"/"abs", cooldown=0, min_lr=0,
 * eps=1e-8); step with ct_lr_scheduler_step_metric. */
CT_API ct_lr_scheduler *ct_reduce_lr_on_plateau_new(ct_optimizer *opt, const char *mode,
                                                    double factor, int64_t patience,
                                                    double threshold, const char *threshold_mode,
                                                    int64_t cooldown, double min_lr, double eps);
CT_API ct_status ct_lr_scheduler_step(ct_lr_scheduler *s) CT_NODISCARD;
CT_API ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric) CT_NODISCARD;
/* get_last_lr(): returns the group count, writes up to cap values. */
CT_API int ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, double *lrs, int cap);
CT_API int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s);
CT_API void ct_lr_scheduler_free(ct_lr_scheduler *s);

/* ======================================================================
 * Gradient clipping (torch.nn.utils)
 * ====================================================================== */
/* clip_grad_norm_: total norm of the grads of params (norm_type may be
 * INFINITY), then every grad *= min(1, max_norm / (total + 1e-6)).
 * Params without a grad are skipped (total 0 when none).  With
 * error_if_nonfinite a NaN/Inf total is an error and nothing is changed.
 * *total_norm (may be NULL) receives the norm. */
CT_API ct_status ct_clip_grad_norm_(ct_tensor *const *params, int n, double max_norm,
                                    double norm_type, bool error_if_nonfinite,
                                    double *total_norm) CT_NODISCARD;
/* clip_grad_value_: grads clamped to [-clip_value, clip_value]. */
CT_API ct_status ct_clip_grad_value_(ct_tensor *const *params, int n,
                                     double clip_value) CT_NODISCARD;

/* ======================================================================
 * Weight averaging (torch.optim.swa_utils.AveragedModel)
 * ====================================================================== */
typedef struct ct_averaged_model ct_averaged_model;
/* A deep copy of m's parameters and persistent buffers (m is retained for
 * forward).  decay in [0, 1): EMA avg = decay * avg + (1 - decay) * p;
 * decay NAN (or < 0): SWA, the running mean avg + (p - avg) / (n + 1).
 * use_buffers: buffers are averaged too (else kept as copied). */
CT_API ct_averaged_model *ct_averaged_model_new(ct_module *m, double decay, bool use_buffers);
/* update_parameters(model): the first update copies, later ones average. */
CT_API ct_status ct_averaged_model_update(ct_averaged_model *a, ct_module *model) CT_NODISCARD;
CT_API int64_t ct_averaged_model_n_averaged(const ct_averaged_model *a);
/* The averaged tensors under m's state-dict keys (borrowed). */
CT_API const ct_sample *ct_averaged_model_state(const ct_averaged_model *a);
/* m's forward with the averaged weights (ct_functional_call). */
CT_API ct_tensor *ct_averaged_model_forward(ct_averaged_model *a, ct_tensor *const *inputs, int n);
/* Copies the averaged weights into a module of the same architecture. */
CT_API ct_status ct_averaged_model_copy_to(const ct_averaged_model *a, ct_module *m) CT_NODISCARD;
CT_API void ct_averaged_model_free(ct_averaged_model *a);

#ifdef __cplusplus
}
#endif
#endif
