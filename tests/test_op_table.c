/* test_op_table.c -- the op table, one row per op: its parameter family
 * (with its field count), its meta function, whether the CPU and meta
 * devices have a kernel, whether the OpenCL device has one ("-" in a build
 * without it; none is no failure: its ops grow with issue 19), its vjp,
 * its jvp (own: a formula of its own; dvjp: the generic rule from its VJP),
 * its batching rule (vmap: "-" runs per sample under ct_vmap), and the C
 * expression the compiler renders.  It fails when an op has no meta
 * function (the .meta column), when an op that computes something (not a
 * view, not composite) has no CPU kernel, when a device's table misses an
 * op the meta device must run, when a differentiable op (flags without
 * CT_OPF_NODIFF / CT_OPF_UNRECORDED and with tensor inputs) has no vjp,
 * when an op with a VJP (other than ct__vjp_none) has no jvp or no batching
 * rule (every differentiable op has both: forward mode and vmap), or
 * when a parameter family is declared for no op. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "ops/op_table.h"
#include "ops/render.h"
#include "ops/rules.h"

/* the rendered expression of an elementwise op (float32, else the first
 * dtype it supports), from ew_math.def */
static const char *expr_of(int op) {
    static const ct_dtype dts[] = {CT_F32, CT_F64, CT_I64, CT_I32, CT_BOOL, CT_U8};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        if (ct__ew_supports((ct_op)op, dts[k])) {
            const char *e = ct__ew_expr((ct_op)op, dts[k]);
            if (e) return e;
        }
    return "";
}

static void table(void **state) {
    (void)state;
    ct__backends_init();
    bool have_ocl = ct__device(CT_OPENCL) != NULL; /* built with the OpenCL backend */
    int n_ocl = 0;
    int n_metafn = 0, n_cpu = 0, n_meta = 0, n_vjp = 0, n_need_vjp = 0, n_params = 0, n_expr = 0, bad = 0;
    int n_jvp_own = 0, n_jvp_dvjp = 0, n_need_jvp = 0;
    int n_vmap = 0, n_vmap_diff = 0;
    printf("%-22s %-11s %6s %4s %4s %6s %4s %4s %4s  %s\n", "op", "params", "metafn", "cpu", "meta", "opencl",
           "vjp", "jvp", "vmap", "c_expr");
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_op_info *in = &ct__op_info[op];
        int fam = ct__op_pfam[op];
        bool cpu = ct__kernels[CT_CPU][op] != NULL, meta = ct__kernels[CT_META][op] != NULL;
        bool view = in->flags & CT_OPF_VIEW, comp = in->flags & CT_OPF_COMPOSITE;
        bool need_vjp = !(in->flags & (CT_OPF_NODIFF | CT_OPF_UNRECORDED | CT_OPF_COMPOSITE)) && in->nin != 0 &&
                        !(in->flags & CT_OPF_RANDOM);
        bool need_jvp = in->vjp && in->vjp != (void *)ct__vjp_none;
        const char *jvp = in->jvp ? (in->jvp == (void *)ct__jvp_dvjp ? "dvjp" : "own") : need_jvp ? "NO" : "-";
        char fbuf[32];
        snprintf(fbuf, sizeof fbuf, "%s(%d)", ct__pfamilies[fam].name, ct__pfamilies[fam].nfields);
        bool ocl = ct__kernels[CT_OPENCL][op] != NULL;
        n_ocl += ocl;
        printf("%-22s %-11s %6s %4s %4s %6s %4s %4s %4s  %s\n", in->name, fam ? fbuf : "-",
               in->meta ? "yes" : "NO", cpu ? "yes" : view ? "view" : comp ? "comp" : "NO", meta ? "yes" : "NO",
               !have_ocl ? "-" : ocl ? "yes" : view ? "view" : comp ? "comp" : "none",
               in->vjp ? "yes" : need_vjp ? "NO" : "-", jvp, in->vmap ? "yes" : "-",
               expr_of(op));
        n_metafn += in->meta != NULL;
        n_cpu += cpu || view || comp;
        n_meta += meta;
        n_vjp += in->vjp != NULL;
        n_vmap += in->vmap != NULL;
        n_need_vjp += need_vjp;
        n_need_jvp += need_jvp;
        n_jvp_own += in->jvp && in->jvp != (void *)ct__jvp_dvjp;
        n_jvp_dvjp += in->jvp == (void *)ct__jvp_dvjp;
        if (need_jvp && !in->jvp) { printf("  ^ %s has a vjp but no jvp\n", in->name); bad++; }
        n_vmap_diff += need_jvp && in->vmap;
        if (need_jvp && !in->vmap) { printf("  ^ %s has a vjp but no batching rule (vmap)\n", in->name); bad++; }
        n_params += fam != 0;
        n_expr += ct__ew_kind((ct_op)op) != CT_EWK_NONE;
        if (!cpu && !view && !comp) { printf("  ^ %s has no CPU kernel\n", in->name); bad++; }
        if (!meta) { printf("  ^ %s has no meta kernel\n", in->name); bad++; }
        if (!in->meta) { printf("  ^ %s has no meta function\n", in->name); bad++; }
        if (need_vjp && !in->vjp) { printf("  ^ %s is differentiable but has no vjp\n", in->name); bad++; }
        if (cpu && (view || comp)) { printf("  ^ %s is marked view/composite but has a kernel\n", in->name); bad++; }
    }
    for (int f = 1; f < CT_PFAM_COUNT; f++) {
        int users = 0;
        for (int op = 0; op < CT_OP_COUNT; op++) users += ct__op_pfam[op] == f;
        if (!users) { printf("  ^ parameter family %s has no op\n", ct__pfamilies[f].name); bad++; }
    }
    printf("%d ops: meta function %d/%d, CPU kernel or view/composite %d/%d, meta %d/%d, typed params %d (the other %d take "
           "none), vjp %d (%d needed), rendered C %d\n",
           CT_OP_COUNT, n_metafn, CT_OP_COUNT, n_cpu, CT_OP_COUNT, n_meta, CT_OP_COUNT, n_params, CT_OP_COUNT - n_params,
           n_vjp, n_need_vjp, n_expr);
    printf("jvp: %d of %d ops with a VJP (%d own formulas, %d from the VJP by the double-vjp rule)\n",
           n_jvp_own + n_jvp_dvjp, n_need_jvp, n_jvp_own, n_jvp_dvjp);
    printf("vmap: %d of %d ops with a VJP have a batching rule\n", n_vmap_diff, n_need_jvp);
    printf("batching rules (vmap) %d/%d; without one (run per sample under vmap):", n_vmap, CT_OP_COUNT);
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (!ct__op_info[op].vmap) printf(" %s", ct__op_info[op].name);
    printf("\n");
    if (have_ocl) {
        int n_kernel_ops = 0; /* ops that need a kernel on a device (not views, not composites) */
        for (int op = 0; op < CT_OP_COUNT; op++)
            n_kernel_ops += !(ct__op_info[op].flags & (CT_OPF_VIEW | CT_OPF_COMPOSITE));
        printf("OpenCL kernels: %d of the %d ops that need one\n", n_ocl, n_kernel_ops);
    } else {
        printf("OpenCL: not in this build\n");
    }
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(table)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
