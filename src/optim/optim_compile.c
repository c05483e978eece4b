/* optim_compile.c -- ct_optim_compile: an optimizer's step run as compiled
 * kernels (torch.compile(opt.step)); see include/ctorch/compile.h.
 *
 * The step is written again over tensors only (torch's "capturable" form):
 * the update of a parameter with a gradient reads the parameter, its
 * gradient, its state tensors and 0-dim tensors holding the step's scalars
 * -- the hyperparameters and what the step count makes of them (bias
 * corrections, the effective learning rate) -- and writes the parameter and
 * its states in place (copy_, which lower.c folds into the kernel's stores:
 * one pass reads and writes each tensor once).  The host computes the
 * scalars at each step with the eager step's own double expressions and
 * stores them in the parameter's dtype (the conversion eager's ops apply to
 * their scalars), and the update applies them with eager's elementwise ops
 * in eager's order (addcmul's x + v*y*z as (v*y)*z, ...), so the compiled
 * step gives the eager step's results bit for bit.  A scheduler changing
 * lr, a cycled beta1, the step count: new scalar values, the same graph.
 *
 * What changes the graph selects another variant, traced once and cached
 * (counted as a recompile): the set of parameters with gradients and the
 * options that switch a term on or off (weight_decay zero or not, amsgrad,
 * momentum zero or not, nesterov, centered, maximize).  Branches that
 * depend on the step (SGD's first momentum step, RAdam's rectification)
 * are 0-dim bool inputs of a where, so they keep one graph too.  A variant
 * is one ct_compile'd function per chunk of OC_CHUNK parameters (bounded
 * inputs and trace time).
 *
 * State is made on the host before the call, as eager makes it at a
 * parameter's first step (zeros, Adagrad's initial accumulator, NAdam's
 * mu_product), in eager's order, and the host-side counters (the float32
 * "step", NAdam's mu_product) advance as eager's do; the traced function
 * touches only its inputs, so tracing on meta tensors leaves the optimizer
 * alone.  Where ct_compile cannot build kernels it runs the same function
 * op by op, which gives the same numbers. */
#include <math.h>
#include <stdio.h>

#include "optim_impl.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/compile.h"
#include "../ops/timing.h"

#define OC_CHUNK 128
#define OC_MAXST 4
#define OC_MAXSC 12
#define OC_MAXFL 2

/* the option bits of a parameter's update */
enum { O_MAX = 1, O_WD = 2, O_MOM = 4, O_NES = 8, O_DEC = 16, O_AMS = 32, O_CEN = 64 };

typedef struct oc_slot {
    int pi;           /* the parameter (index over all groups) */
    int grp;          /* its group */
    uint32_t code;    /* option bits */
    int nst, nsc, nfl; /* its state tensors, scalars, flags */
    ct_dtype dt;
} oc_slot;

/* one step's host-side values of a slot */
typedef struct oc_prep {
    ct_tensor *st[OC_MAXST];
    double sc[OC_MAXSC];
    bool fl[OC_MAXFL];
    int src;          /* the slot whose scalar tensors this one is handed (itself, or an equal earlier one) */
} oc_prep;

typedef struct oc_kind {
    const char *name;
    int nsc, nfl;
    /* the option bits of group g and the number of state tensors they take */
    uint32_t (*code)(const ct_optimizer *o, int g, int *nst);
    /* param i of group g before its update: its state made, its counters
     * advanced, the scalars and flags of this step */
    ct_status (*prep)(ct_optimizer *o, int g, int i, uint32_t code, oc_prep *pr);
    /* the update: t = param, grad, states; s scalars; f flags; returns the
     * parameter written (NULL + error) */
    ct_tensor *(*update)(uint32_t code, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f);
} oc_kind;

typedef struct oc_entry oc_entry;
typedef struct oc_chunk {
    const oc_entry *e;
    int s0, n;        /* slots [s0, s0 + n) */
    int nin;
    ct_tensor **in;   /* the call's inputs (filled at each step) */
    ct_compiled *c;
} oc_chunk;

struct oc_entry {
    const oc_kind *k;
    oc_slot *slot;
    int nslot;
    ct_tensor **sct;  /* per slot, at sc_off[s]: its nsc scalars then nfl flags (owned) */
    int *sc_off;
    oc_chunk *ch;
    int nch;
};

#define OPROBE_N 5

struct opt_compiled {
    const oc_kind *k;
    ct_compile_opts opts;
    oc_entry **e;
    int ne;
    int64_t steps, eager_steps;
    /* the probe (ct__optim_compiled_step): steps seen, samples per side
     * ([0] compiled, [1] eager), eager steps it ran, its verdict */
    int pcalls, pn[2];
    double pms[2][OPROBE_N];
    int64_t probe_eager;
    bool pdone, slower;
    char why[200];
    bool warned_limit, warned_device;
    /* per-step scratch */
    oc_slot *cur;
    oc_prep *prep;
    int cap;
};

static ct_status fail_code(void) {
    ct_status st = ct_last_error_code();
    return st ? st : CT_ERR_RUNTIME;
}

static double hp(const ct_optimizer *o, int g, const char *name) {
    int h = ct__optim_hp_index(o, name);
    return h < 0 ? 0 : o->g[g].v[h];
}

/* grad (negated with maximize) plus wd * p: eager's eff_grad with the weight decay a tensor */
static ct_tensor *eff(uint32_t c, ct_tensor *p, ct_tensor *grad, ct_tensor *wd) {
    ct_tensor *g = c & O_MAX ? ct_neg(grad) : grad;
    return c & O_WD ? ct_add(g, ct_mul(wd, p)) : g;
}
/* m * b + (1 - b) * g: mul_(m, b) then add_(m, g, alpha = 1 - b) */
static ct_tensor *lerp_avg(ct_tensor *m, ct_tensor *b, ct_tensor *omb, ct_tensor *g) {
    return ct_add(ct_mul(m, b), ct_mul(omb, g));
}
/* v * b + (1 - b) * g * g: mul_(v, b) then addcmul_(v, g, g, value = 1 - b) */
static ct_tensor *sq_avg(ct_tensor *v, ct_tensor *b, ct_tensor *omb, ct_tensor *g) {
    return ct_add(ct_mul(v, b), ct_mul(ct_mul(omb, g), g));
}
/* x + v * y / z: addcdiv_(x, y, z, value = v) */
static ct_tensor *addcdiv_t(ct_tensor *x, ct_tensor *v, ct_tensor *y, ct_tensor *z) {
    return ct_add(x, ct_div(ct_mul(v, y), z));
}
/* The writes, after the whole update is computed (the states', then the
 * parameter's): lower.c folds them into the kernel that computed their
 * values, and a group that wrote takes no unrelated node, so each
 * parameter's update is one kernel.  Returns the parameter written. */
static ct_tensor *write_back(ct_tensor *const *dst, ct_tensor *const *src, int n, ct_tensor *p, ct_tensor *p2) {
    for (int k = 0; k < n; k++)
        if (!ct_copy_(dst[k], src[k])) return NULL;
    return ct_copy_(p, p2);
}

#define ST(name, fill) do { if (!(pr->st[ns++] = ct__optim_state_or_new(o, i, name, fill))) return fail_code(); } while (0)
#define STEP(v) do { if (isnan((v) = ct__optim_bump_step(o, i))) return fail_code(); } while (0)

/* ---- SGD: scalars -lr, wd, momentum, 1 - dampening; flag: a fresh buffer ---- */
static uint32_t sgd_code(const ct_optimizer *o, int g, int *nst) {
    uint32_t c = (hp(o, g, "maximize") != 0 ? O_MAX : 0) | (hp(o, g, "weight_decay") != 0 ? O_WD : 0) |
                 (hp(o, g, "momentum") != 0 ? O_MOM : 0) | (hp(o, g, "nesterov") != 0 ? O_NES : 0);
    *nst = c & O_MOM ? 1 : 0;
    return c;
}
static ct_status sgd_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    if (c & O_MOM) {
        pr->st[0] = ct_optim_state(o, i, "momentum_buffer");
        pr->fl[0] = !pr->st[0]; /* eager: a fresh buffer starts as the grad */
        if (!pr->st[0] && !(pr->st[0] = ct__optim_state_or_new(o, i, "momentum_buffer", 0))) return fail_code();
    }
    pr->sc[0] = -hp(o, g, "lr");
    pr->sc[1] = hp(o, g, "weight_decay");
    pr->sc[2] = hp(o, g, "momentum");
    pr->sc[3] = 1 - hp(o, g, "dampening");
    return CT_OK;
}
static ct_tensor *sgd_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    ct_tensor *p = t[0], *d = eff(c, p, t[1], s[1]), *nb = NULL;
    if (c & O_MOM) {
        nb = ct_where(f[0], d, lerp_avg(t[2], s[2], s[3], d));
        d = c & O_NES ? ct_add(d, ct_mul(s[2], nb)) : nb;
    }
    return write_back(t + 2, &nb, c & O_MOM ? 1 : 0, p, ct_add(p, ct_mul(s[0], d)));
}

/* ---- Adam / AdamW: b1, 1-b1, b2, 1-b2, sqrt(bc2), eps, -lr/bc1, wd (AdamW: 1 - lr*wd) ---- */
static uint32_t adam_code_(const ct_optimizer *o, int g, int *nst, bool decoupled) {
    uint32_t c = (hp(o, g, "maximize") != 0 ? O_MAX : 0) | (hp(o, g, "amsgrad") != 0 ? O_AMS : 0);
    if (decoupled) c |= O_DEC;
    else if (hp(o, g, "weight_decay") != 0) c |= O_WD;
    *nst = c & O_AMS ? 3 : 2;
    return c;
}
static uint32_t adam_code(const ct_optimizer *o, int g, int *nst) { return adam_code_(o, g, nst, false); }
static uint32_t adamw_code(const ct_optimizer *o, int g, int *nst) { return adam_code_(o, g, nst, true); }
static ct_status adam_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    int ns = 0;
    double step;
    ST("exp_avg", 0);
    ST("exp_avg_sq", 0);
    if (c & O_AMS) ST("max_exp_avg_sq", 0);
    STEP(step);
    double lr = hp(o, g, "lr"), b1 = hp(o, g, "beta1"), b2 = hp(o, g, "beta2"), wd = hp(o, g, "weight_decay");
    /* ct__adam_update's expressions */
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    double step_size = lr / bc1, bc2s = sqrt(bc2);
    double v[8] = {b1, 1 - b1, b2, 1 - b2, bc2s, hp(o, g, "eps"), -step_size, c & O_DEC ? 1 - lr * wd : wd};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *adam_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *m = t[2], *v = t[3], *pp = p;
    ct_tensor *gr = c & O_MAX ? ct_neg(t[1]) : t[1];
    if (c & O_DEC) pp = ct_mul(p, s[7]);
    else if (c & O_WD) gr = ct_add(gr, ct_mul(s[7], p));
    ct_tensor *m2 = lerp_avg(m, s[0], s[1], gr), *v2 = sq_avg(v, s[2], s[3], gr), *src = v2;
    if (c & O_AMS) src = ct_maximum(t[4], v2);
    ct_tensor *den = ct_add(ct_div(ct_sqrt(src), s[4]), s[5]);
    ct_tensor *p2 = addcdiv_t(pp, s[6], m2, den);
    ct_tensor *w[3] = {m2, v2, src};
    return write_back(t + 2, w, c & O_AMS ? 3 : 2, p, p2);
}

/* ---- Adamax: b1, 1-b1, b2, eps, -lr/(1-b1^t), wd ---- */
static uint32_t maxwd_code(const ct_optimizer *o, int g, int *nst, int n) {
    *nst = n;
    return (hp(o, g, "maximize") != 0 ? O_MAX : 0) | (hp(o, g, "weight_decay") != 0 ? O_WD : 0);
}
static uint32_t adamax_code(const ct_optimizer *o, int g, int *nst) { return maxwd_code(o, g, nst, 2); }
static ct_status adamax_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    (void)c;
    int ns = 0;
    double step;
    ST("exp_avg", 0);
    ST("exp_inf", 0);
    STEP(step);
    double b1 = hp(o, g, "beta1");
    double v[6] = {b1, 1 - b1, hp(o, g, "beta2"), hp(o, g, "eps"), -(hp(o, g, "lr") / (1 - pow(b1, step))),
                   hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *adamax_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *m = t[2], *u = t[3], *gr = eff(c, p, t[1], s[5]);
    ct_tensor *m2 = lerp_avg(m, s[0], s[1], gr);
    /* amax(cat([exp_inf * beta2, |g| + eps])) == maximum of the two (eager's form) */
    ct_tensor *u2 = ct_maximum(ct_mul(u, s[2]), ct_add(ct_abs(gr), s[3]));
    ct_tensor *w[2] = {m2, u2};
    return write_back(t + 2, w, 2, p, addcdiv_t(p, s[4], m2, u2));
}

/* ---- NAdam: b1, 1-b1, b2, 1-b2, bc2, eps, c1, c2, wd ---- */
static uint32_t nadam_code(const ct_optimizer *o, int g, int *nst) {
    *nst = 2;
    return hp(o, g, "weight_decay") != 0 ? O_WD : 0;
}
static ct_status nadam_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    (void)c;
    int ns = 0;
    double step;
    ST("exp_avg", 0);
    ST("exp_avg_sq", 0);
    ct_tensor *mup = ct_optim_state(o, i, "mu_product");
    if (!mup) {
        if (!(mup = ct_full_on(NULL, 0, 1.0, CT_F32, CT_CPU))) return fail_code();
        ct_status st = ct__optim_state_put(o, i, "mu_product", mup);
        if (st) return st;
    }
    STEP(step);
    /* nadam_update's host side, as it is */
    double lr = hp(o, g, "lr"), b1 = hp(o, g, "beta1"), b2 = hp(o, g, "beta2"), md = hp(o, g, "momentum_decay");
    double bc2 = 1 - pow(b2, step);
    double mu = b1 * (1. - 0.5 * pow(0.96, step * md));
    double mu_next = b1 * (1. - 0.5 * pow(0.96, (step + 1) * md));
    float *mp = ct_data_ptr(mup);
    *mp = *mp * (float)mu;
    float mpn = (*mp * (float)mu) * (float)mu_next;
    double v[9] = {b1, 1 - b1, b2, 1 - b2, bc2, hp(o, g, "eps"), -lr * (1. - mu) / (1. - (double)*mp),
                   -lr * mu_next / (1. - (double)mpn), hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *nadam_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *m = t[2], *v = t[3], *gr = eff(c & O_WD, p, t[1], s[8]);
    ct_tensor *m2 = lerp_avg(m, s[0], s[1], gr), *v2 = sq_avg(v, s[2], s[3], gr);
    ct_tensor *den = ct_add(ct_sqrt(ct_div(v2, s[4])), s[5]);
    ct_tensor *w[2] = {m2, v2};
    return write_back(t + 2, w, 2, p, addcdiv_t(addcdiv_t(p, s[6], gr, den), s[7], m2, den));
}

/* ---- RAdam: b1, 1-b1, b2, 1-b2, bc1, lr, eps, sqrt(bc2), rect, wd; flag: rectified ---- */
static uint32_t radam_code(const ct_optimizer *o, int g, int *nst) { return nadam_code(o, g, nst); }
static ct_status radam_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    (void)c;
    int ns = 0;
    double step;
    ST("exp_avg", 0);
    ST("exp_avg_sq", 0);
    STEP(step);
    double b1 = hp(o, g, "beta1"), b2 = hp(o, g, "beta2");
    double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
    double rho_inf = 2 / (1 - b2) - 1;
    double rho_t = rho_inf - 2 * step * pow(b2, step) / bc2;
    pr->fl[0] = rho_t > 5.;
    double rect = pr->fl[0] ? sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                            : 1;
    double v[10] = {b1, 1 - b1, b2, 1 - b2, bc1, hp(o, g, "lr"), hp(o, g, "eps"), sqrt(bc2), rect,
                    hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *radam_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    ct_tensor *p = t[0], *m = t[2], *v = t[3], *gr = eff(c & O_WD, p, t[1], s[9]);
    ct_tensor *m2 = lerp_avg(m, s[0], s[1], gr), *v2 = sq_avg(v, s[2], s[3], gr);
    ct_tensor *bl = ct_mul(ct_div(m2, s[4]), s[5]); /* bias-corrected exp_avg * lr */
    /* python's float / tensor is tensor.reciprocal() * float (eager's form) */
    ct_tensor *adaptive = ct_mul(ct_reciprocal(ct_add(ct_sqrt(v2), s[6])), s[7]);
    ct_tensor *upd = ct_where(f[0], ct_mul(ct_mul(bl, adaptive), s[8]), bl);
    ct_tensor *w[2] = {m2, v2};
    return write_back(t + 2, w, 2, p, ct_add_scaled(p, upd, -1.0));
}

/* ---- RMSprop: alpha, 1-alpha, eps, -lr, momentum, wd ---- */
static uint32_t rmsprop_code(const ct_optimizer *o, int g, int *nst) {
    uint32_t c = (hp(o, g, "maximize") != 0 ? O_MAX : 0) | (hp(o, g, "weight_decay") != 0 ? O_WD : 0) |
                 (hp(o, g, "momentum") > 0 ? O_MOM : 0) | (hp(o, g, "centered") != 0 ? O_CEN : 0);
    *nst = 1 + !!(c & O_MOM) + !!(c & O_CEN);
    return c;
}
static ct_status rmsprop_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    int ns = 0;
    double step;
    ST("square_avg", 0);
    if (c & O_MOM) ST("momentum_buffer", 0);
    if (c & O_CEN) ST("grad_avg", 0);
    STEP(step);
    double a = hp(o, g, "alpha");
    double v[6] = {a, 1 - a, hp(o, g, "eps"), -hp(o, g, "lr"), hp(o, g, "momentum"), hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *rmsprop_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *sq = t[2], *buf = c & O_MOM ? t[3] : NULL, *ga = c & O_CEN ? t[c & O_MOM ? 4 : 3] : NULL;
    (void)sq;
    ct_tensor *gr = eff(c, p, t[1], s[5]);
    ct_tensor *sq2 = sq_avg(sq, s[0], s[1], gr), *avg, *ga2 = NULL, *b2 = NULL, *p2;
    if (c & O_CEN) {
        ga2 = lerp_avg(ga, s[0], s[1], gr);
        avg = ct_sqrt(ct_addcmul(sq2, ga2, ga2, -1));
    } else {
        avg = ct_sqrt(sq2);
    }
    avg = ct_add(avg, s[2]);
    if (c & O_MOM) {
        b2 = ct_addcdiv(ct_mul(buf, s[4]), gr, avg, 1);
        p2 = ct_add(p, ct_mul(s[3], b2));
    } else {
        p2 = addcdiv_t(p, s[3], gr, avg);
    }
    /* t[2..]: square_avg, [momentum_buffer], [grad_avg] */
    ct_tensor *w[3] = {sq2, NULL, NULL};
    int nw = 1;
    if (c & O_MOM) w[nw++] = b2;
    if (c & O_CEN) w[nw++] = ga2;
    return write_back(t + 2, w, nw, p, p2);
}

/* ---- Adagrad: eps, -lr/(1 + (t-1) lr_decay), wd ---- */
static uint32_t adagrad_code(const ct_optimizer *o, int g, int *nst) { return maxwd_code(o, g, nst, 1); }
static ct_status adagrad_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    (void)c;
    int ns = 0;
    double step;
    ST("sum", hp(o, g, "initial_accumulator_value"));
    STEP(step);
    double v[3] = {hp(o, g, "eps"), -(hp(o, g, "lr") / (1 + (step - 1) * hp(o, g, "lr_decay"))),
                   hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *adagrad_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *sum = t[2], *gr = eff(c, p, t[1], s[2]);
    ct_tensor *sum2 = ct_addcmul(sum, gr, gr, 1);
    return write_back(t + 2, &sum2, 1, p, addcdiv_t(p, s[1], gr, ct_add(ct_sqrt(sum2), s[0])));
}

/* ---- Adadelta: rho, 1-rho, eps, -lr, wd ---- */
static uint32_t adadelta_code(const ct_optimizer *o, int g, int *nst) { return maxwd_code(o, g, nst, 2); }
static ct_status adadelta_prep(ct_optimizer *o, int g, int i, uint32_t c, oc_prep *pr) {
    (void)c;
    int ns = 0;
    double step;
    ST("square_avg", 0);
    ST("acc_delta", 0);
    STEP(step);
    double r = hp(o, g, "rho");
    double v[5] = {r, 1 - r, hp(o, g, "eps"), -hp(o, g, "lr"), hp(o, g, "weight_decay")};
    memcpy(pr->sc, v, sizeof v);
    return CT_OK;
}
static ct_tensor *adadelta_update(uint32_t c, ct_tensor *const *t, ct_tensor *const *s, ct_tensor *const *f) {
    (void)f;
    ct_tensor *p = t[0], *sq = t[2], *acc = t[3], *gr = eff(c, p, t[1], s[4]);
    ct_tensor *sq2 = sq_avg(sq, s[0], s[1], gr);
    ct_tensor *std = ct_sqrt(ct_add(sq2, s[2]));
    ct_tensor *delta = ct_mul(ct_div(ct_sqrt(ct_add(acc, s[2])), std), gr);
    ct_tensor *acc2 = sq_avg(acc, s[0], s[1], delta);
    ct_tensor *w[2] = {sq2, acc2};
    return write_back(t + 2, w, 2, p, ct_add(p, ct_mul(s[3], delta)));
}

static const oc_kind g_kinds[] = {
    {"SGD", 4, 1, sgd_code, sgd_prep, sgd_update},
    {"Adam", 8, 0, adam_code, adam_prep, adam_update},
    {"AdamW", 8, 0, adamw_code, adam_prep, adam_update},
    {"Adamax", 6, 0, adamax_code, adamax_prep, adamax_update},
    {"NAdam", 9, 0, nadam_code, nadam_prep, nadam_update},
    {"RAdam", 10, 1, radam_code, radam_prep, radam_update},
    {"RMSprop", 6, 0, rmsprop_code, rmsprop_prep, rmsprop_update},
    {"Adagrad", 3, 0, adagrad_code, adagrad_prep, adagrad_update},
    {"Adadelta", 5, 0, adadelta_code, adadelta_prep, adadelta_update},
};

/* ---- variants ---------------------------------------------------------------- */
/* The traced function of a chunk: each slot's update, in order. */
static ct_status chunk_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nout;
    const oc_chunk *ch = ctx;
    const oc_entry *e = ch->e;
    ct_tensor *last = NULL;
    int j = 0;
    for (int q = 0; q < ch->n; q++) {
        const oc_slot *sl = &e->slot[ch->s0 + q];
        int w = 2 + sl->nst + sl->nsc + sl->nfl;
        if (j + w > nin)
            return ct__error_status(CT_ERR_ARG, "%s: compiled step: %d inputs, slot %d wants more", e->k->name,
                                    nin, q);
        ct_tensor *const *t = in + j, *const *s = in + j + 2 + sl->nst, *const *f = s + sl->nsc;
        j += w;
        if (!(last = e->k->update(sl->code, t, s, f))) return fail_code();
    }
    out[0] = last;
    return CT_OK;
}

static void entry_free(oc_entry *e) {
    if (!e) return;
    for (int c = 0; c < e->nch; c++) {
        ct_compiled_free(e->ch[c].c);
        free(e->ch[c].in);
    }
    if (e->sct && e->sc_off)
        for (int s = 0; s < e->nslot; s++)
            for (int k = 0; k < e->slot[s].nsc + e->slot[s].nfl; k++) ct_release(e->sct[e->sc_off[s] + k]);
    free(e->ch);
    free(e->sct);
    free(e->sc_off);
    free(e->slot);
    free(e);
}

static bool same_slots(const oc_entry *e, const oc_slot *s, int n) {
    if (e->nslot != n) return false;
    for (int i = 0; i < n; i++) {
        const oc_slot *a = &e->slot[i], *b = &s[i];
        if (a->pi != b->pi || a->code != b->code || a->nst != b->nst || a->nsc != b->nsc || a->nfl != b->nfl ||
            a->dt != b->dt)
            return false;
    }
    return true;
}

static oc_entry *entry_new(const opt_compiled *cs, const oc_slot *s, int n) {
    const char *who = cs->k->name;
    oc_entry *e = calloc(1, sizeof *e);
    if (!e) return ct__error(CT_ERR_OOM, "%s: out of memory compiling the step", who);
    e->k = cs->k;
    e->nslot = n;
    e->nch = (n + OC_CHUNK - 1) / OC_CHUNK;
    int nsct = 0;
    for (int i = 0; i < n; i++) nsct += s[i].nsc + s[i].nfl;
    e->slot = malloc(sizeof *e->slot * (size_t)(n ? n : 1));
    e->sc_off = malloc(sizeof *e->sc_off * (size_t)(n ? n : 1));
    e->sct = calloc((size_t)(nsct ? nsct : 1), sizeof *e->sct);
    e->ch = calloc((size_t)(e->nch ? e->nch : 1), sizeof *e->ch);
    if (!e->slot || !e->sc_off || !e->sct || !e->ch) {
        entry_free(e);
        return ct__error(CT_ERR_OOM, "%s: out of memory compiling the step", who);
    }
    memcpy(e->slot, s, sizeof *s * (size_t)n);
    /* the scalars: 0-dim host tensors of the parameter's dtype, flags bool */
    ct_scope sc = ct_scope_begin();
    int off = 0;
    for (int i = 0; i < n; i++) {
        e->sc_off[i] = off;
        for (int k = 0; k < s[i].nsc + s[i].nfl; k++) {
            ct_tensor *t = ct_full_on(NULL, 0, 0.0, k < s[i].nsc ? s[i].dt : CT_BOOL, CT_CPU);
            if (!t) {
                ct_scope_end(sc);
                entry_free(e);
                return NULL;
            }
            e->sct[off++] = ct_retain(t);
        }
    }
    ct_scope_end(sc);
    for (int c = 0; c < e->nch; c++) {
        oc_chunk *ch = &e->ch[c];
        ch->e = e;
        ch->s0 = c * OC_CHUNK;
        ch->n = n - ch->s0 < OC_CHUNK ? n - ch->s0 : OC_CHUNK;
        for (int q = 0; q < ch->n; q++) {
            const oc_slot *sl = &s[ch->s0 + q];
            ch->nin += 2 + sl->nst + sl->nsc + sl->nfl;
        }
        ch->in = malloc(sizeof *ch->in * (size_t)(ch->nin ? ch->nin : 1));
        ch->c = ch->in ? ct_compile(chunk_fn, ch, &cs->opts) : NULL;
        if (!ch->c) {
            entry_free(e);
            return ct_last_error_code() ? NULL : ct__error(CT_ERR_OOM, "%s: out of memory", who);
        }
    }
    return e;
}

static void store_scalar(ct_tensor *t, double v) {
    void *p = ct_data_ptr(t);
    switch (t->dtype) {
    case CT_F32: *(float *)p = (float)v; break;
    case CT_F64: *(double *)p = v; break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

/* ---- the step ---------------------------------------------------------------- */
/* The eager step (o->cs set aside so that the groups' own updates run);
 * probe: one of the probe's samples, not a fallback. */
static ct_status eager_step_(ct_optimizer *o, bool probe) {
    opt_compiled *cs = o->cs;
    if (probe) cs->probe_eager++;
    else cs->eager_steps++;
    ct_status st = CT_OK;
    for (int g = 0; g < o->ng && st == CT_OK; g++) {
        ct_scope sc = ct_scope_begin();
        st = o->k->step_group(o, g);
        ct_scope_end(sc);
    }
    return st;
}

static ct_status eager_step(ct_optimizer *o) { return eager_step_(o, false); }

static ct_status compiled_step(ct_optimizer *o) {
    opt_compiled *cs = o->cs;
    const oc_kind *k = cs->k;
    if (cs->cap < o->np) {
        oc_slot *ns = realloc(cs->cur, sizeof *ns * (size_t)o->np);
        if (ns) cs->cur = ns;
        oc_prep *np = ns ? realloc(cs->prep, sizeof *np * (size_t)o->np) : NULL;
        if (np) cs->prep = np;
        if (!ns || !np) return ct__error_status(CT_ERR_OOM, "%s: out of memory", k->name);
        cs->cap = o->np;
    }
    /* the variant's signature: each parameter with a grad, its options and dtype */
    int n = 0;
    for (int g = 0; g < o->ng; g++) {
        int nst;
        uint32_t code = k->code(o, g, &nst);
        for (int q = 0; q < o->g[g].n; q++) {
            int i = o->g[g].idx[q];
            ct_tensor *p = o->ps[i].p, *grad = ct_grad(p);
            if (!grad) continue;
            if (p->storage->device != CT_CPU || grad->storage->device != CT_CPU) {
                if (!cs->warned_device) {
                    fprintf(stderr, "[ct_compile] warning: %s: ct_optim_compile: parameter %d is not on the "
                            "cpu; the step runs eagerly\n", k->name, i);
                    cs->warned_device = true;
                }
                return eager_step(o);
            }
            cs->cur[n++] = (oc_slot){.pi = i, .grp = g, .code = code, .nst = nst, .nsc = k->nsc, .nfl = k->nfl,
                                     .dt = p->dtype};
        }
    }
    if (n == 0) return CT_OK;
    oc_entry *e = NULL;
    for (int j = 0; j < cs->ne && !e; j++)
        if (same_slots(cs->e[j], cs->cur, n)) e = cs->e[j];
    if (!e) {
        int limit = cs->opts.recompile_limit > 0 ? cs->opts.recompile_limit : 8;
        if (cs->ne >= limit) {
            if (!cs->warned_limit) {
                fprintf(stderr, "[ct_compile] warning: %s: ct_optim_compile hit the recompile limit (%d "
                        "variants); new parameter sets step eagerly\n", k->name, limit);
                cs->warned_limit = true;
            }
            return eager_step(o);
        }
        oc_entry **ne = realloc(cs->e, sizeof *ne * (size_t)(cs->ne + 1));
        if (!ne) return ct__error_status(CT_ERR_OOM, "%s: out of memory", k->name);
        cs->e = ne;
        if (!(e = entry_new(cs, cs->cur, n))) return fail_code();
        cs->e[cs->ne++] = e;
    }
    /* the host side: state, counters, this step's scalars (in parameter order, as eager) */
    for (int s = 0; s < n; s++) {
        int i = cs->cur[s].pi, g = cs->cur[s].grp;
        memset(&cs->prep[s], 0, sizeof cs->prep[s]);
        ct_status st = k->prep(o, g, i, cs->cur[s].code, &cs->prep[s]);
        if (st) return st;
        /* A slot whose scalars equal an earlier slot's of its group and
         * chunk (the usual case: the same hyperparameters and step count)
         * is handed that slot's 0-dim tensors: the kernels read the same
         * few bytes, and a step touches a handful of scalar tensors instead
         * of a dozen per parameter (their headers, scattered over the heap,
         * were most of the compiled step's host time when the caches are
         * cold, as they are after a forward and backward).  The inputs are
         * only read, and the trace gives every input its own meta tensor,
         * so the graph is the same either way. */
        int src = s;
        for (int r = s - s % OC_CHUNK; r < s && src == s; r++)
            if (cs->prep[r].src == r && cs->cur[r].grp == g && cs->cur[r].dt == cs->cur[s].dt &&
                !memcmp(cs->prep[r].sc, cs->prep[s].sc, sizeof(double) * (size_t)k->nsc) &&
                !memcmp(cs->prep[r].fl, cs->prep[s].fl, sizeof(bool) * (size_t)k->nfl))
                src = r;
        cs->prep[s].src = src;
        if (src != s) continue;
        for (int q = 0; q < k->nsc; q++) store_scalar(e->sct[e->sc_off[s] + q], cs->prep[s].sc[q]);
        for (int q = 0; q < k->nfl; q++) store_scalar(e->sct[e->sc_off[s] + k->nsc + q], cs->prep[s].fl[q]);
    }
    cs->steps++;
    for (int c = 0; c < e->nch; c++) {
        oc_chunk *ch = &e->ch[c];
        int j = 0;
        for (int q = 0; q < ch->n; q++) {
            int s = ch->s0 + q;
            const oc_slot *sl = &e->slot[s];
            ct_tensor *p = o->ps[sl->pi].p;
            ch->in[j++] = p;
            ch->in[j++] = ct_grad(p);
            for (int t = 0; t < sl->nst; t++) ch->in[j++] = cs->prep[s].st[t];
            const int so = e->sc_off[cs->prep[s].src];
            for (int t = 0; t < sl->nsc + sl->nfl; t++) ch->in[j++] = e->sct[so + t];
        }
        ct_scope sc = ct_scope_begin();
        ct_tensor *out = NULL;
        ct_status st = ct_compiled_call(ch->c, ch->in, ch->nin, &out, 1);
        ct_scope_end(sc);
        if (st) return st;
    }
    return CT_OK;
}

double (*ct__optim_probe_sample)(int side, double ms);
int ct__optim_probe_force;

/* CT_COMPILE_PROBE=0 turns this probe off as it does ct_compile's (the
 * variable is read once; tests force it on with ct__optim_probe_force) */
static bool probes_on(void) {
    static atomic_int on = -1;
    int v = atomic_load(&on);
    if (v < 0) {
        const char *p = getenv("CT_COMPILE_PROBE");
        v = !(p && !strcmp(p, "0"));
        atomic_store(&on, v);
    }
    return v || ct__optim_probe_force;
}

/* The step, probed against the eager one, as ct_compile probes graphs
 * (compile.h): compiled code must not make the step slower, and here the
 * two sides give the same numbers bit for bit, so the faster one can run.
 * Steps 1 and 2 run compiled (the trace; a step that may still warm the
 * caches); steps 3 to 12 alternate compiled / eager, each timed whole (the
 * host's scalars, the guards, the kernels; the eager step's fused
 * multi-tensor update); the k-th compiled and the k-th eager step
 * (neighbours in time) make a pair, and when the median of the pairs' ratios, compiled over eager, is
 * above 1 the eager step runs from then on.  A compiled step that traced a
 * new variant is not a sample.  CT_COMPILE_PROBE=0: no probe. */
ct_status ct__optim_compiled_step(ct_optimizer *o) {
    opt_compiled *cs = o->cs;
    if (cs->slower) return eager_step(o);
    if (cs->pdone || !probes_on()) return compiled_step(o);
    int call = ++cs->pcalls;
    int side = call < 3 ? 0 : cs->pn[0] <= cs->pn[1] ? 0 : 1;
    int ne0 = cs->ne;
    double t0 = ct__now_ms();
    ct_status st = side ? eager_step_(o, true) : compiled_step(o);
    double dt = ct__now_ms() - t0;
    if (st || call < 3 || cs->ne != ne0 || cs->pn[side] >= OPROBE_N) return st;
    cs->pms[side][cs->pn[side]++] = ct__optim_probe_sample ? ct__optim_probe_sample(side, dt) : dt;
    if (cs->pn[0] < OPROBE_N || cs->pn[1] < OPROBE_N) return st;
    double mc, me, mr = ct__paired_ratio(cs->pms[0], cs->pms[1], OPROBE_N, &mc, &me);
    cs->pdone = true;
    cs->slower = mr > 1.0;
    snprintf(cs->why, sizeof cs->why, "steps timed: median %.3f ms compiled, %.3f ms eager, paired ratio %.3f: "
             "the %s step runs", mc, me, mr, cs->slower ? "eager" : "compiled");
    return st;
}

void ct__optim_compiled_free(opt_compiled *cs) {
    if (!cs) return;
    for (int j = 0; j < cs->ne; j++) entry_free(cs->e[j]);
    free(cs->e);
    free(cs->cur);
    free(cs->prep);
    free(cs);
}

/* ---- the public side ------------------------------------------------------------ */
ct_status ct_optim_compile(ct_optimizer *o, const ct_compile_opts *opts) {
    if (!o) return ct__error_status(CT_ERR_NULL, "optim_compile: optimizer is NULL");
    const oc_kind *k = NULL;
    for (size_t j = 0; j < sizeof g_kinds / sizeof g_kinds[0]; j++)
        if (strcmp(g_kinds[j].name, o->k->name) == 0) k = &g_kinds[j];
    ct__optim_compiled_free(o->cs);
    o->cs = NULL;
    if (opts && opts->disable) return CT_OK; /* torch.compile(disable=True): the eager step */
    if (!k) {
        /* LBFGS: its step re-evaluates the model through a closure */
        if (opts && opts->fullgraph)
            return ct__error_status(CT_ERR_ARG, "optim_compile: fullgraph: %s's step cannot be captured (it "
                                    "calls a closure)", o->k->name);
        fprintf(stderr, "[ct_compile] warning: ct_optim_compile: %s's step calls a closure and is not "
                "compiled; it runs eagerly\n", o->k->name);
        return CT_OK;
    }
    opt_compiled *cs = calloc(1, sizeof *cs);
    if (!cs) return ct__error_status(CT_ERR_OOM, "optim_compile: out of memory");
    cs->k = k;
    if (opts) cs->opts = *opts;
    o->cs = cs;
    return CT_OK;
}

ct_compile_stats ct_optim_compile_stats(const ct_optimizer *o) {
    ct_compile_stats s;
    memset(&s, 0, sizeof s);
    if (!o || !o->cs) return s;
    const opt_compiled *cs = o->cs;
    for (int j = 0; j < cs->ne; j++)
        for (int c = 0; c < cs->e[j]->nch; c++) {
            ct_compile_stats x = ct_compiled_stats(cs->e[j]->ch[c].c);
            s.traces += x.traces;
            s.variants += x.variants;
            s.recompiles += x.recompiles;
            s.kernels_built += x.kernels_built;
            s.kernels_loaded += x.kernels_loaded;
            s.graph_breaks += x.graph_breaks;
            s.eager_calls += x.eager_calls;
            s.compile_ms += x.compile_ms;
        }
    s.calls = cs->steps + cs->eager_steps + cs->probe_eager;
    s.eager_calls += cs->eager_steps;
    s.recompiles += cs->ne > 1 ? cs->ne - 1 : 0; /* each variant after the first */
    return s;
}

char *ct_optim_compile_explain(const ct_optimizer *o) {
    if (!o || !o->cs || !o->cs->ne) return NULL;
    const opt_compiled *cs = o->cs;
    ct_sbuf b = {0};
    ct__sbuf_put(&b, "%s: compiled step: %lld steps compiled, %lld eager, %d variants (parameter sets)\n",
                 cs->k->name, (long long)cs->steps, (long long)(cs->eager_steps + cs->probe_eager), cs->ne);
    if (cs->why[0]) ct__sbuf_put(&b, "probe: %s\n", cs->why);
    for (int j = 0; j < cs->ne; j++) {
        const oc_entry *e = cs->e[j];
        ct__sbuf_put(&b, "variant %d: %d parameters in %d compiled function%s\n", j, e->nslot, e->nch,
                     e->nch == 1 ? "" : "s");
        for (int c = 0; c < e->nch; c++) {
            char *x = ct_compile_explain(e->ch[c].c);
            if (x) {
                ct__sbuf_put(&b, "%s", x);
                free(x);
            }
        }
    }
    if (b.oom) {
        free(b.s);
        return ct__error(CT_ERR_OOM, "optim_compile_explain: out of memory");
    }
    return b.s;
}
