/* k_optim.c -- the OpenCL device's fused optimizer steps (sgd_step,
 * adam_step: SGD with momentum/nesterov/weight decay, Adam, AdamW,
 * amsgrad), one launch per parameter, one work item per element.
 *
 * The contract and the arithmetic are the cpu kernels'
 * (src/backend/cpu/optim.c): contiguous f32/f64 lists, each element's
 * update the same chain of roundings in torch.optim's order (no
 * contraction into fused multiply-adds: FP_CONTRACT OFF), Adam's
 * per-parameter step size and sqrt(1 - beta2^step) computed on the host in
 * double from the step (a 0-dim float32 cpu tensor).  So a step on the
 * device gives the cpu's values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../ops/op_table.h"
#include "ocl.h"

typedef struct hp { double v[12]; } hp;

static ct_status run(const char *what, ct_dtype dt, const char *body, size_t n, const ct_ocl_arg *args, int nargs) {
    char src[4096];
    int len = snprintf(src, sizeof src, "%s#pragma OPENCL FP_CONTRACT OFF\n#define T %s\n#define SQRT %s\n%s",
                       ct__ocl_dialect, dt == CT_F64 ? "double" : "float", dt == CT_F64 ? "sqrt" : "sqrt", body);
    if (len >= (int)sizeof src) return ct__error_status(CT_ERR_RUNTIME, "%s: kernel text too long", what);
    return ct__ocl_launch(what, src, n, args, nargs);
}

#define TARG(t) {(t), NULL, 0}
#define VARG(v) {NULL, &(v), sizeof(v)}

/* hp: 0 lr, 1 momentum, 2 1 - dampening, 3 weight decay, 4 nesterov, 5 maximize, 6 fresh, 7 n */
static const char k_sgd_src[] =
    "typedef struct { double v[12]; } ct_hp;\n"
    "CT_KERNEL void k(CT_GLOBAL char *pb, long po, CT_GLOBAL char *gb, long go, CT_GLOBAL char *bb, long bo, const ct_hp h) {\n"
    " long i = CT_GID; if (i >= (long)h.v[7]) return;\n"
    " CT_GLOBAL T *p = (CT_GLOBAL T *)(pb + po); CT_GLOBAL const T *gr = (CT_GLOBAL const T *)(gb + go);\n"
    " CT_GLOBAL T *buf = (CT_GLOBAL T *)(bb + bo);\n"
    " const T wdT = (T)h.v[3], momT = (T)h.v[1], dampT = (T)h.v[2], nlr = (T)(-h.v[0]);\n"
    " T d = h.v[5] != 0 ? -gr[i] : gr[i];\n"
    " if (h.v[3] != 0) d = d + wdT * p[i];\n"
    " if (h.v[1] != 0) { T b; if (h.v[6] != 0) b = d; else { b = buf[i] * momT; b = b + dampT * d; }\n"
    "  buf[i] = b; d = h.v[4] != 0 ? d + momT * b : b; }\n"
    " p[i] = p[i] + nlr * d;\n}\n";

static ct_status k_sgd_step(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)out; (void)nout;
    const ct_p_optim pp = a->p.optim;
    const int per = pp.momentum != 0 ? 3 : 2, n = nin / per;
    if (nin % per) return ct__error_status(CT_ERR_ARG, "sgd_step: %d inputs for %d lists", nin, per);
    ct_status st = CT_OK;
    for (int i = 0; i < n && !st; i++) {
        hp h = {{pp.lr, pp.momentum, 1 - pp.dampening, pp.weight_decay, pp.nesterov, pp.maximize,
                 per == 3 && pp.first_step, (double)ct_numel(in[i])}};
        ct_tensor *buf = per == 3 ? in[2 * n + i] : in[i];
        ct_ocl_arg args[4] = {TARG(in[i]), TARG(in[n + i]), TARG(buf), VARG(h)};
        st = run("sgd_step", in[i]->dtype, k_sgd_src, (size_t)ct_numel(in[i]), args, 4);
    }
    return st;
}

/* hp: 0 beta1, 1 beta2, 2 1 - beta1, 3 1 - beta2, 4 weight decay, 5 1 - lr * wd, 6 sqrt(bc2),
 * 7 eps, 8 -step_size, 9 decoupled, 10 maximize, 11 amsgrad; n in a long */
static const char k_adam_src[] =
    "typedef struct { double v[12]; } ct_hp;\n"
    "CT_KERNEL void k(CT_GLOBAL char *pb, long po, CT_GLOBAL char *gb, long go, CT_GLOBAL char *mb, long mo,\n"
    "                 CT_GLOBAL char *vb, long vo, CT_GLOBAL char *xb, long xo, const ct_hp h, const long n) {\n"
    " long i = CT_GID; if (i >= n) return;\n"
    " CT_GLOBAL T *p = (CT_GLOBAL T *)(pb + po); CT_GLOBAL const T *gr = (CT_GLOBAL const T *)(gb + go);\n"
    " CT_GLOBAL T *m = (CT_GLOBAL T *)(mb + mo); CT_GLOBAL T *v = (CT_GLOBAL T *)(vb + vo);\n"
    " CT_GLOBAL T *vmax = (CT_GLOBAL T *)(xb + xo);\n"
    " const T b1T = (T)h.v[0], b2T = (T)h.v[1], a1 = (T)h.v[2], a2 = (T)h.v[3];\n"
    " const T wdT = (T)h.v[4], decayT = (T)h.v[5], bcT = (T)h.v[6], epsT = (T)h.v[7], nss = (T)h.v[8];\n"
    " T g = h.v[10] != 0 ? -gr[i] : gr[i];\n"
    " T pi = p[i];\n"
    " if (h.v[9] != 0) pi = pi * decayT; else if (h.v[4] != 0) g = g + wdT * pi;\n"
    " T mi = m[i] * b1T; mi = mi + a1 * g;\n"
    " T vi = v[i] * b2T; vi = vi + a2 * g * g;\n"
    " m[i] = mi; v[i] = vi;\n"
    " T vu = vi;\n"
    " if (h.v[11] != 0) { vu = vmax[i] > vi || vmax[i] != vmax[i] ? vmax[i] : vi; vmax[i] = vu; }\n"
    " T den = SQRT(vu) / bcT + epsT;\n"
    " p[i] = pi + nss * mi / den;\n}\n";

static ct_status k_adam_step(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)out; (void)nout;
    const ct_p_optim pp = a->p.optim;
    const int per = pp.amsgrad ? 6 : 5, n = nin / per;
    if (nin % per) return ct__error_status(CT_ERR_ARG, "adam_step: %d inputs for %d lists", nin, per);
    ct_status st = CT_OK;
    for (int i = 0; i < n && !st; i++) {
        double step = (double)*(const float *)ct__ptr(in[(per - 1) * n + i]); /* a cpu tensor */
        double bc1 = 1 - pow(pp.beta1, step), bc2 = 1 - pow(pp.beta2, step);
        hp h = {{pp.beta1, pp.beta2, 1 - pp.beta1, 1 - pp.beta2, pp.weight_decay, 1 - pp.lr * pp.weight_decay,
                 sqrt(bc2), pp.eps, -(pp.lr / bc1), pp.decoupled, pp.maximize, pp.amsgrad}};
        int64_t ne = ct_numel(in[i]);
        ct_tensor *vmax = pp.amsgrad ? in[4 * n + i] : in[i];
        ct_ocl_arg args[7] = {TARG(in[i]), TARG(in[n + i]), TARG(in[2 * n + i]), TARG(in[3 * n + i]), TARG(vmax),
                              VARG(h), VARG(ne)};
        st = run("adam_step", in[i]->dtype, k_adam_src, (size_t)ne, args, 7);
    }
    return st;
}

void ct__ocl_register_optim(ct_kernel_fn *t) {
    t[CT_OP_sgd_step] = k_sgd_step;
    t[CT_OP_adam_step] = k_adam_step;
}
