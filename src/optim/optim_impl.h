/* optim_impl.h -- private: the optimizer object shared by the optimizers
 * (optim.c), LBFGS (lbfgs.c) and the schedulers (sched.c). */
#ifndef CT_OPTIM_IMPL_H
#define CT_OPTIM_IMPL_H

#include "../ops/op_table.h"

#define OPT_HP_MAX 12
#define OPT_ST_MAX 6
#define OPT_ST_NAME 32

typedef struct opt_group {
    int n;
    int *idx;                 /* indices into ct_optimizer.ps */
    double v[OPT_HP_MAX];     /* aligned with kind->hp */
    double initial_lr;        /* set by the first scheduler (NAN: unset) */
} opt_group;

typedef struct opt_pstate {
    ct_tensor *p;             /* retained */
    int nst;
    char sname[OPT_ST_MAX][OPT_ST_NAME];
    ct_tensor *st[OPT_ST_MAX]; /* owned */
} opt_pstate;

typedef struct opt_kind {
    const char *name;
    int nhp;
    const char *hp[OPT_HP_MAX];
    /* updates the params of group g that have grads (grad mode off, inside a scope) */
    ct_status (*step_group)(ct_optimizer *o, int g);
} opt_kind;

typedef struct opt_compiled opt_compiled; /* optim_compile.c */

struct ct_optimizer {
    const opt_kind *k;
    double def[OPT_HP_MAX];
    opt_group *g;
    int ng;
    opt_pstate *ps;
    int np;
    void *extra;                    /* LBFGS state */
    void (*extra_free)(void *);
    opt_compiled *cs;               /* ct_optim_compile's step, or NULL */
};

int ct__optim_hp_index(const ct_optimizer *o, const char *name);
ct_optimizer *ct__optim_new(const opt_kind *k, const double *def, ct_tensor *const *params, int n);
/* The state tensor `name` of param i, created by init() when missing
 * (init returns a scope-owned tensor; it is retained here). */
ct_tensor *ct__optim_state_get(ct_optimizer *o, int i, const char *name);
ct_status ct__optim_state_put(ct_optimizer *o, int i, const char *name, ct_tensor *t);
/* The state `name` of param i, made (full like the param, of fill) when
 * missing: the eager steps' state at a parameter's first step. */
ct_tensor *ct__optim_state_or_new(ct_optimizer *o, int i, const char *name, double fill);
/* Increments the float32 "step" state of param i (made at 0 when missing)
 * and returns its new value (NAN + error). */
double ct__optim_bump_step(ct_optimizer *o, int i);

/* ct_optim_compile (optim_compile.c): the compiled step of every group,
 * run by ct_optim_step (grad mode off) when o->cs is set; freeing it. */
ct_status ct__optim_compiled_step(ct_optimizer *o);
/* Tests: when set, the probe records sample(side, measured ms) (side 0
 * compiled, 1 eager) instead of the measured time. */
extern double (*ct__optim_probe_sample)(int side, double ms);
/* Tests: nonzero runs the probe whatever CT_COMPILE_PROBE says. */
extern int ct__optim_probe_force;
void ct__optim_compiled_free(opt_compiled *cs);

#endif
