/* sched.c -- learning-rate schedulers (torch.optim.lr_scheduler), with
 * PyTorch's recursive get_lr() formulas and its closed forms where torch
 * uses them (step(epoch), as SequentialLR does at a milestone), so the
 * values match torch's in double. */
#include <math.h>

#include "optim_impl.h"

typedef enum {
    S_STEP, S_MULTISTEP, S_EXP, S_COS, S_WARM, S_LINEAR, S_CONST, S_LAMBDA, S_ONECYCLE, S_SEQ,
    S_PLATEAU
} skind;

typedef struct phase { double end_step; int start_lr, end_lr, start_mom, end_mom; } phase;
/* indices for phase fields: 0 initial_lr, 1 max_lr, 2 min_lr; 0 max_mom, 1 base_mom */

struct ct_lr_scheduler {
    skind kind;
    const char *name;
    ct_optimizer *o;
    int ng;
    int64_t last_epoch;
    int64_t step_count;
    double *base_lrs, *last_lr;
    /* parameters */
    int64_t step_size, T_max, T_0, T_mult, total_iters;
    double gamma, eta_min, factor, start_factor, end_factor;
    int64_t *milestones;
    int nm;
    int64_t T_cur, T_i;
    ct_lr_lambda fn;
    void *user;
    /* OneCycleLR */
    int64_t total_steps;
    phase ph[3];
    int nph;
    bool linear, cycle_mom;
    int mom_hp;
    double *lr_pts;   /* per group: initial, max, min */
    double *mom_pts;  /* per group: max_momentum, base_momentum */
    /* SequentialLR */
    ct_lr_scheduler **sub;
    int nsub;
    /* ReduceLROnPlateau */
    bool mode_max, thr_rel;
    double threshold, min_lr, eps, best;
    int64_t patience, cooldown, cooldown_counter, num_bad;
};

static int lr_hp(const ct_optimizer *o) { return ct__optim_hp_index(o, "lr"); }

static ct_lr_scheduler *sched_alloc(ct_optimizer *o, skind kind, const char *name) {
    if (!o) return ct__error(CT_ERR_NULL, "%s: optimizer is NULL", name);
    ct_lr_scheduler *s = calloc(1, sizeof *s);
    if (!s) return ct__error(CT_ERR_OOM, "%s: out of memory", name);
    s->kind = kind;
    s->name = name;
    s->o = o;
    s->ng = o->ng;
    s->base_lrs = calloc((size_t)s->ng, sizeof(double));
    s->last_lr = calloc((size_t)s->ng, sizeof(double));
    if (!s->base_lrs || !s->last_lr) {
        ct_lr_scheduler_free(s);
        return ct__error(CT_ERR_OOM, "%s: out of memory", name);
    }
    return s;
}

void ct_lr_scheduler_free(ct_lr_scheduler *s) {
    if (!s) return;
    for (int i = 0; i < s->nsub; i++) ct_lr_scheduler_free(s->sub[i]);
    free(s->sub);
    free(s->base_lrs);
    free(s->last_lr);
    free(s->milestones);
    free(s->lr_pts);
    free(s->mom_pts);
    free(s);
}

static int64_t pymod(int64_t a, int64_t b) { int64_t r = a % b; return r < 0 ? r + b : r; }

static int bisect_right(const int64_t *a, int n, int64_t x) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (x < a[mid]) hi = mid; else lo = mid + 1;
    }
    return lo;
}

static double anneal(const ct_lr_scheduler *s, double start, double end, double pct) {
    if (s->linear) return (end - start) * pct + start;
    double cos_out = cos(M_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

/* get_lr() (recursive forms) for group g with current lr */
static ct_status get_lr(ct_lr_scheduler *s, int g, double lr, double *out) {
    int64_t e = s->last_epoch;
    double base = s->base_lrs[g];
    switch (s->kind) {
    case S_STEP:
        *out = (e == 0 || e % s->step_size != 0) ? lr : lr * s->gamma;
        return CT_OK;
    case S_MULTISTEP: {
        int cnt = 0;
        for (int i = 0; i < s->nm; i++) cnt += s->milestones[i] == e;
        *out = cnt ? lr * pow(s->gamma, cnt) : lr;
        return CT_OK;
    }
    case S_EXP:
        *out = e == 0 ? lr : lr * s->gamma;
        return CT_OK;
    case S_COS: {
        double T = (double)s->T_max;
        if (e == 0) *out = lr;
        else if (s->step_count == 1 && e > 0)
            *out = s->eta_min + (base - s->eta_min) * (1 + cos(e * M_PI / T)) / 2;
        else if (pymod(e - 1 - s->T_max, 2 * s->T_max) == 0)
            *out = lr + (base - s->eta_min) * (1 - cos(M_PI / T)) / 2;
        else
            *out = (1 + cos(M_PI * e / T)) / (1 + cos(M_PI * (e - 1) / T)) * (lr - s->eta_min) +
                   s->eta_min;
        return CT_OK;
    }
    case S_WARM:
        *out = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * s->T_cur / (double)s->T_i)) / 2;
        return CT_OK;
    case S_LINEAR:
        if (e == 0) *out = lr * s->start_factor;
        else if (e > s->total_iters) *out = lr;
        else
            *out = lr * (1. + (s->end_factor - s->start_factor) /
                                  (s->total_iters * s->start_factor +
                                   (e - 1) * (s->end_factor - s->start_factor)));
        return CT_OK;
    case S_CONST:
        if (e == 0) *out = lr * s->factor;
        else if (e != s->total_iters) *out = lr;
        else *out = lr * (1.0 / s->factor);
        return CT_OK;
    case S_LAMBDA:
        *out = base * s->fn(e, s->user);
        return CT_OK;
    case S_ONECYCLE: {
        if (e > s->total_steps)
            return ct__error_status(CT_ERR_ARG, "OneCycleLR: tried to step %lld times. The specified "
                                    "number of total steps is %lld", (long long)e,
                                    (long long)s->total_steps);
        double start_step = 0, clr = lr, cmom = 0;
        for (int i = 0; i < s->nph; i++) {
            double end_step = s->ph[i].end_step;
            if (e <= end_step || i == s->nph - 1) {
                double pct = (e - start_step) / (end_step - start_step);
                clr = anneal(s, s->lr_pts[3 * g + s->ph[i].start_lr], s->lr_pts[3 * g + s->ph[i].end_lr], pct);
                if (s->cycle_mom)
                    cmom = anneal(s, s->mom_pts[2 * g + s->ph[i].start_mom],
                                  s->mom_pts[2 * g + s->ph[i].end_mom], pct);
                break;
            }
            start_step = s->ph[i].end_step;
        }
        *out = clr;
        if (s->cycle_mom) s->o->g[g].v[s->mom_hp] = cmom;
        return CT_OK;
    }
    default:
        return ct__error_status(CT_ERR_ARG, "%s: get_lr not available", s->name);
    }
}

/* _get_closed_form_lr(), where torch has one (else get_lr) */
static ct_status closed_form(ct_lr_scheduler *s, int g, double lr, double *out) {
    int64_t e = s->last_epoch;
    double base = s->base_lrs[g];
    switch (s->kind) {
    case S_STEP: *out = base * pow(s->gamma, (double)((e - pymod(e, s->step_size)) / s->step_size)); return CT_OK;
    case S_MULTISTEP: *out = base * pow(s->gamma, bisect_right(s->milestones, s->nm, e)); return CT_OK;
    case S_EXP: *out = base * pow(s->gamma, (double)e); return CT_OK;
    case S_COS:
        *out = s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * e / (double)s->T_max)) / 2;
        return CT_OK;
    case S_LINEAR:
        *out = base * (s->start_factor + (s->end_factor - s->start_factor) *
                                             (double)(e < s->total_iters ? e : s->total_iters) /
                                             (double)s->total_iters);
        return CT_OK;
    case S_CONST:
        *out = base * (s->factor + (e >= s->total_iters) * (1 - s->factor));
        return CT_OK;
    default: return get_lr(s, g, lr, out);
    }
}

static ct_status apply_lrs(ct_lr_scheduler *s, const double *vals) {
    int h = lr_hp(s->o);
    for (int g = 0; g < s->ng && g < s->o->ng; g++) {
        s->o->g[g].v[h] = vals[g];
        s->last_lr[g] = vals[g];
    }
    return CT_OK;
}

/* _LRScheduler.step(epoch) */
static ct_status base_step(ct_lr_scheduler *s, bool has_epoch, int64_t epoch) {
    if (s->o->ng != s->ng)
        return ct__error_status(CT_ERR_ARG, "%s: the optimizer's parameter groups changed (%d, "
                                "scheduler made for %d)", s->name, s->o->ng, s->ng);
    s->step_count++;
    int h = lr_hp(s->o);
    double vals[64];
    double *v = s->ng <= 64 ? vals : malloc(sizeof(double) * (size_t)s->ng);
    if (!v) return ct__error_status(CT_ERR_OOM, "%s: out of memory", s->name);
    ct_status st = CT_OK;
    if (s->kind == S_WARM) {
        /* CosineAnnealingWarmRestarts.step(epoch) */
        if (!has_epoch && s->last_epoch < 0) { has_epoch = true; epoch = 0; }
        if (!has_epoch) {
            epoch = s->last_epoch + 1;
            s->T_cur = s->T_cur + 1;
            if (s->T_cur >= s->T_i) {
                s->T_cur = s->T_cur - s->T_i;
                s->T_i = s->T_i * s->T_mult;
            }
        } else {
            if (epoch < 0) { st = ct__error_status(CT_ERR_ARG, "%s: expected non-negative epoch, "
                                                   "but got %lld", s->name, (long long)epoch); goto out; }
            if (epoch >= s->T_0) {
                if (s->T_mult == 1) {
                    s->T_cur = epoch % s->T_0;
                } else {
                    int64_t n = (int64_t)(log((double)epoch / s->T_0 * (s->T_mult - 1) + 1) /
                                          log((double)s->T_mult));
                    int64_t p = 1;
                    for (int64_t k = 0; k < n; k++) p *= s->T_mult;
                    s->T_cur = epoch - s->T_0 * (p - 1) / (s->T_mult - 1);
                    s->T_i = s->T_0 * p;
                }
            } else {
                s->T_i = s->T_0;
                s->T_cur = epoch;
            }
        }
        s->last_epoch = epoch;
        for (int g = 0; g < s->ng && !st; g++) st = get_lr(s, g, s->o->g[g].v[h], &v[g]);
    } else if (!has_epoch) {
        s->last_epoch++;
        for (int g = 0; g < s->ng && !st; g++) st = get_lr(s, g, s->o->g[g].v[h], &v[g]);
    } else {
        s->last_epoch = epoch;
        for (int g = 0; g < s->ng && !st; g++) st = closed_form(s, g, s->o->g[g].v[h], &v[g]);
    }
    if (!st) apply_lrs(s, v);
out:
    if (v != vals) free(v);
    return st;
}

/* _LRScheduler.__init__ with last_epoch = -1 */
static ct_lr_scheduler *sched_init(ct_lr_scheduler *s) {
    int h = lr_hp(s->o);
    for (int g = 0; g < s->ng; g++) {
        if (isnan(s->o->g[g].initial_lr)) s->o->g[g].initial_lr = s->o->g[g].v[h];
        s->base_lrs[g] = s->o->g[g].initial_lr;
    }
    s->last_epoch = -1;
    s->step_count = 0;
    if (base_step(s, false, 0)) { ct_lr_scheduler_free(s); return NULL; }
    return s;
}

ct_lr_scheduler *ct_step_lr_new(ct_optimizer *o, int64_t step_size, double gamma) {
    if (step_size <= 0) return ct__error(CT_ERR_ARG, "StepLR: step_size must be positive (got %lld)",
                                         (long long)step_size);
    ct_lr_scheduler *s = sched_alloc(o, S_STEP, "StepLR");
    if (!s) return NULL;
    s->step_size = step_size;
    s->gamma = gamma;
    return sched_init(s);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

ct_lr_scheduler *ct_multistep_lr_new(ct_optimizer *o, const int64_t *milestones, int n, double gamma) {
    if (n < 0 || (n > 0 && !milestones)) return ct__error(CT_ERR_NULL, "MultiStepLR: milestones is NULL");
    ct_lr_scheduler *s = sched_alloc(o, S_MULTISTEP, "MultiStepLR");
    if (!s) return NULL;
    s->milestones = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!s->milestones) { ct_lr_scheduler_free(s); return ct__error(CT_ERR_OOM, "MultiStepLR: out of memory"); }
    memcpy(s->milestones, milestones, sizeof(int64_t) * (size_t)n);
    qsort(s->milestones, (size_t)n, sizeof(int64_t), cmp_i64);
    s->nm = n;
    s->gamma = gamma;
    return sched_init(s);
}

ct_lr_scheduler *ct_exponential_lr_new(ct_optimizer *o, double gamma) {
    ct_lr_scheduler *s = sched_alloc(o, S_EXP, "ExponentialLR");
    if (!s) return NULL;
    s->gamma = gamma;
    return sched_init(s);
}

ct_lr_scheduler *ct_cosine_annealing_lr_new(ct_optimizer *o, int64_t T_max, double eta_min) {
    if (T_max <= 0) return ct__error(CT_ERR_ARG, "CosineAnnealingLR: T_max must be positive (got %lld)",
                                     (long long)T_max);
    ct_lr_scheduler *s = sched_alloc(o, S_COS, "CosineAnnealingLR");
    if (!s) return NULL;
    s->T_max = T_max;
    s->eta_min = eta_min;
    return sched_init(s);
}

ct_lr_scheduler *ct_cosine_annealing_warm_restarts_new(ct_optimizer *o, int64_t T_0, int64_t T_mult,
                                                       double eta_min) {
    if (T_0 <= 0) return ct__error(CT_ERR_ARG, "CosineAnnealingWarmRestarts: expected positive integer "
                                   "T_0, but got %lld", (long long)T_0);
    if (T_mult < 1) return ct__error(CT_ERR_ARG, "CosineAnnealingWarmRestarts: expected integer "
                                     "T_mult >= 1, but got %lld", (long long)T_mult);
    ct_lr_scheduler *s = sched_alloc(o, S_WARM, "CosineAnnealingWarmRestarts");
    if (!s) return NULL;
    s->T_0 = s->T_i = T_0;
    s->T_mult = T_mult;
    s->eta_min = eta_min;
    s->T_cur = -1;
    return sched_init(s);
}

ct_lr_scheduler *ct_linear_lr_new(ct_optimizer *o, double start_factor, double end_factor,
                                  int64_t total_iters) {
    if (!(start_factor > 0 && start_factor <= 1))
        return ct__error(CT_ERR_ARG, "LinearLR: starting multiplicative factor expected to be greater "
                         "than 0 and less or equal to 1 (got %g)", start_factor);
    if (!(end_factor >= 0 && end_factor <= 1))
        return ct__error(CT_ERR_ARG, "LinearLR: ending multiplicative factor expected to be between 0 "
                         "and 1 (got %g)", end_factor);
    if (total_iters <= 0) return ct__error(CT_ERR_ARG, "LinearLR: total_iters must be positive");
    ct_lr_scheduler *s = sched_alloc(o, S_LINEAR, "LinearLR");
    if (!s) return NULL;
    s->start_factor = start_factor;
    s->end_factor = end_factor;
    s->total_iters = total_iters;
    return sched_init(s);
}

ct_lr_scheduler *ct_constant_lr_new(ct_optimizer *o, double factor, int64_t total_iters) {
    if (!(factor >= 0 && factor <= 1))
        return ct__error(CT_ERR_ARG, "ConstantLR: constant multiplicative factor expected to be between "
                         "0 and 1 (got %g)", factor);
    ct_lr_scheduler *s = sched_alloc(o, S_CONST, "ConstantLR");
    if (!s) return NULL;
    s->factor = factor;
    s->total_iters = total_iters;
    return sched_init(s);
}

ct_lr_scheduler *ct_lambda_lr_new(ct_optimizer *o, ct_lr_lambda fn, void *user) {
    if (!fn) return ct__error(CT_ERR_NULL, "LambdaLR: lr_lambda is NULL");
    ct_lr_scheduler *s = sched_alloc(o, S_LAMBDA, "LambdaLR");
    if (!s) return NULL;
    s->fn = fn;
    s->user = user;
    return sched_init(s);
}

ct_lr_scheduler *ct_one_cycle_lr_new(ct_optimizer *o, const ct_one_cycle_opts *op) {
    if (!op) return ct__error(CT_ERR_NULL, "OneCycleLR: options are NULL");
    if (op->total_steps <= 0)
        return ct__error(CT_ERR_ARG, "OneCycleLR: expected positive integer total_steps, but got %lld",
                         (long long)op->total_steps);
    double pct = op->pct_start ? op->pct_start : 0.3;
    if (!(pct >= 0 && pct <= 1))
        return ct__error(CT_ERR_ARG, "OneCycleLR: expected float between 0 and 1 pct_start, but got %g", pct);
    if (!(op->max_lr > 0)) return ct__error(CT_ERR_ARG, "OneCycleLR: max_lr must be positive (got %g)",
                                            op->max_lr);
    ct_lr_scheduler *s = sched_alloc(o, S_ONECYCLE, "OneCycleLR");
    if (!s) return NULL;
    double div = op->div_factor ? op->div_factor : 25., fdiv = op->final_div_factor ? op->final_div_factor : 1e4;
    double base_m = op->base_momentum ? op->base_momentum : 0.85;
    double max_m = op->max_momentum ? op->max_momentum : 0.95;
    s->total_steps = op->total_steps;
    s->linear = op->anneal_linear;
    double T = (double)op->total_steps;
    /* lr points: 0 initial, 1 max, 2 min; momentum points: 0 max, 1 base */
    if (op->three_phase) {
        s->nph = 3;
        s->ph[0] = (phase){pct * T - 1, 0, 1, 0, 1};
        s->ph[1] = (phase){2 * pct * T - 2, 1, 0, 1, 0};
        s->ph[2] = (phase){T - 1, 0, 2, 0, 0};
    } else {
        s->nph = 2;
        s->ph[0] = (phase){pct * T - 1, 0, 1, 0, 1};
        s->ph[1] = (phase){T - 1, 1, 2, 1, 0};
    }
    s->lr_pts = calloc((size_t)s->ng * 3, sizeof(double));
    s->mom_pts = calloc((size_t)s->ng * 2, sizeof(double));
    if (!s->lr_pts || !s->mom_pts) { ct_lr_scheduler_free(s); return ct__error(CT_ERR_OOM, "OneCycleLR: out of memory"); }
    int h = lr_hp(o);
    for (int g = 0; g < s->ng; g++) {
        double ilr = op->max_lr / div;
        o->g[g].initial_lr = ilr;
        o->g[g].v[h] = ilr; /* the initial step sets it anyway */
        s->lr_pts[3 * g] = ilr;
        s->lr_pts[3 * g + 1] = op->max_lr;
        s->lr_pts[3 * g + 2] = ilr / fdiv;
    }
    s->cycle_mom = !op->no_cycle_momentum;
    if (s->cycle_mom) {
        s->mom_hp = ct__optim_hp_index(o, "beta1");
        if (s->mom_hp < 0) s->mom_hp = ct__optim_hp_index(o, "momentum");
        if (s->mom_hp < 0) {
            ct_lr_scheduler_free(s);
            return ct__error(CT_ERR_ARG, "OneCycleLR: optimizer %s must support momentum or beta1 with "
                             "`cycle_momentum` option enabled", o->k->name);
        }
        for (int g = 0; g < s->ng; g++) {
            o->g[g].v[s->mom_hp] = max_m;
            s->mom_pts[2 * g] = max_m;
            s->mom_pts[2 * g + 1] = base_m;
        }
    }
    return sched_init(s);
}

ct_lr_scheduler *ct_sequential_lr_new(ct_optimizer *o, ct_lr_scheduler *const *scheds, int n,
                                      const int64_t *milestones) {
    if (!o || !scheds || n <= 0 || (n > 1 && !milestones))
        return ct__error(CT_ERR_NULL, "SequentialLR: NULL or empty argument");
    for (int i = 0; i < n; i++) {
        if (!scheds[i]) return ct__error(CT_ERR_NULL, "SequentialLR: scheduler %d is NULL", i);
        if (scheds[i]->o != o)
            return ct__error(CT_ERR_ARG, "SequentialLR: Sequential Schedulers expects all schedulers to "
                             "belong to the same optimizer, but got schedulers at index %d to be "
                             "different than the optimizer passed in.", i);
        if (scheds[i]->kind == S_PLATEAU || scheds[i]->kind == S_SEQ)
            return ct__error(CT_ERR_ARG, "SequentialLR: scheduler %d (%s) cannot be chained", i,
                             scheds[i]->name);
    }
    for (int i = 0; i + 1 < n - 1; i++)
        if (milestones[i] > milestones[i + 1])
            return ct__error(CT_ERR_ARG, "SequentialLR: milestones must be increasing");
    ct_lr_scheduler *s = sched_alloc(o, S_SEQ, "SequentialLR");
    if (!s) return NULL;
    s->sub = malloc(sizeof *s->sub * (size_t)n);
    s->milestones = malloc(sizeof(int64_t) * (size_t)n);
    if (!s->sub || !s->milestones) { ct_lr_scheduler_free(s); return ct__error(CT_ERR_OOM, "SequentialLR: out of memory"); }
    for (int i = 0; i < n; i++) s->sub[i] = scheds[i];
    for (int i = 0; i < n - 1; i++) s->milestones[i] = milestones[i];
    s->nsub = n;
    s->nm = n - 1;
    s->last_epoch = 0;
    int h = lr_hp(o);
    for (int g = 0; g < s->ng; g++)
        if (!isnan(o->g[g].initial_lr)) o->g[g].v[h] = o->g[g].initial_lr;
    for (int i = 0; i < n; i++) s->sub[i]->last_epoch -= 1;
    s->sub[0]->step_count = 0;
    if (base_step(s->sub[0], false, 0)) {
        s->nsub = 0; /* the caller keeps ownership on failure */
        ct_lr_scheduler_free(s);
        return NULL;
    }
    memcpy(s->last_lr, s->sub[0]->last_lr, sizeof(double) * (size_t)s->ng);
    return s;
}

ct_lr_scheduler *ct_reduce_lr_on_plateau_new(ct_optimizer *o, const char *mode, double factor,
                                             int64_t patience, double threshold,
                                             const char *threshold_mode, int64_t cooldown,
                                             double min_lr, double eps) {
    if (!(factor < 1.0)) return ct__error(CT_ERR_ARG, "ReduceLROnPlateau: factor should be < 1.0 (got %g)", factor);
    bool mmax;
    if (!mode || strcmp(mode, "min") == 0) mmax = false;
    else if (strcmp(mode, "max") == 0) mmax = true;
    else return ct__error(CT_ERR_ARG, "ReduceLROnPlateau: mode %s is unknown!", mode);
    bool rel;
    if (!threshold_mode || strcmp(threshold_mode, "rel") == 0) rel = true;
    else if (strcmp(threshold_mode, "abs") == 0) rel = false;
    else return ct__error(CT_ERR_ARG, "ReduceLROnPlateau: threshold mode %s is unknown!", threshold_mode);
    ct_lr_scheduler *s = sched_alloc(o, S_PLATEAU, "ReduceLROnPlateau");
    if (!s) return NULL;
    s->mode_max = mmax;
    s->thr_rel = rel;
    s->factor = factor;
    s->patience = patience;
    s->threshold = threshold;
    s->cooldown = cooldown;
    s->min_lr = min_lr;
    s->eps = eps;
    s->best = mmax ? -INFINITY : INFINITY;
    s->last_epoch = 0;
    int h = lr_hp(o);
    for (int g = 0; g < s->ng; g++) s->last_lr[g] = o->g[g].v[h];
    return s;
}

static bool is_better(const ct_lr_scheduler *s, double a, double best) {
    if (!s->mode_max && s->thr_rel) return a < best * (1. - s->threshold);
    if (!s->mode_max) return a < best - s->threshold;
    if (s->thr_rel) return a > best * (s->threshold + 1.);
    return a > best + s->threshold;
}

ct_status ct_lr_scheduler_step_metric(ct_lr_scheduler *s, double metric) {
    if (!s) return ct__error_status(CT_ERR_NULL, "lr_scheduler_step: scheduler is NULL");
    if (s->kind != S_PLATEAU) return ct_lr_scheduler_step(s);
    s->last_epoch++;
    if (is_better(s, metric, s->best)) { s->best = metric; s->num_bad = 0; }
    else s->num_bad++;
    if (s->cooldown_counter > 0) { s->cooldown_counter--; s->num_bad = 0; }
    int h = lr_hp(s->o);
    if (s->num_bad > s->patience) {
        for (int g = 0; g < s->ng && g < s->o->ng; g++) {
            double old_lr = s->o->g[g].v[h];
            double new_lr = fmax(old_lr * s->factor, s->min_lr);
            if (old_lr - new_lr > s->eps) s->o->g[g].v[h] = new_lr;
        }
        s->cooldown_counter = s->cooldown;
        s->num_bad = 0;
    }
    for (int g = 0; g < s->ng && g < s->o->ng; g++) s->last_lr[g] = s->o->g[g].v[h];
    return CT_OK;
}

ct_status ct_lr_scheduler_step(ct_lr_scheduler *s) {
    if (!s) return ct__error_status(CT_ERR_NULL, "lr_scheduler_step: scheduler is NULL");
    if (s->kind == S_PLATEAU)
        return ct__error_status(CT_ERR_ARG, "ReduceLROnPlateau: step needs a metric "
                                "(ct_lr_scheduler_step_metric)");
    if (s->kind == S_SEQ) {
        s->last_epoch++;
        int idx = bisect_right(s->milestones, s->nm, s->last_epoch);
        ct_lr_scheduler *sub = s->sub[idx];
        ct_status st;
        if (idx > 0 && s->milestones[idx - 1] == s->last_epoch) st = base_step(sub, true, 0);
        else st = base_step(sub, false, 0);
        if (st) return st;
        memcpy(s->last_lr, sub->last_lr, sizeof(double) * (size_t)s->ng);
        return CT_OK;
    }
    return base_step(s, false, 0);
}

int ct_lr_scheduler_get_last_lr(const ct_lr_scheduler *s, double *lrs, int cap) {
    if (!s) { ct__error(CT_ERR_NULL, "lr_scheduler_get_last_lr: scheduler is NULL"); return -1; }
    for (int g = 0; g < s->ng && g < cap; g++) lrs[g] = s->last_lr[g];
    return s->ng;
}

int64_t ct_lr_scheduler_last_epoch(const ct_lr_scheduler *s) { return s ? s->last_epoch : -1; }
