/* test_fwad_ops.c -- forward-mode AD of every op with a VJP, over the
 * gradcheck cases (tests/grad_<family>.c, shared with test_gradcheck):
 * torch.autograd.gradcheck(check_forward_ad=True) in C.
 *
 * For each case, inputs x (float64) and a random tangent v (for the inputs
 * that require grad), the JVP J v from one forward pass on dual tensors
 * (ct_fwad_make_dual / unpack_dual) must equal
 *   - the Jacobian from reverse mode times v: row i of J is the gradient of
 *     y[i] (ct_autograd_grad), so (J v)[i] = sum_k <row_k, v_k>;
 *   - central finite differences in float64: (f(x + e v) - f(x - e v)) / 2e;
 * with contiguous inputs and tangents, and again with non-contiguous ones
 * (transposed storage with a step of 2).  The primal output must equal
 * f(x).  An op with a jvp rule and no passing case fails the coverage test,
 * which prints how many rules are own formulas and how many the generic
 * double-vjp rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_impl.h"
#include "gradcheck_run.h"

#define GC_FAMILY(name)                        \
    extern const gc_case gc_cases_##name[];    \
    extern const int gc_ncases_##name;
#include "grad_families.h"
#undef GC_FAMILY

static char g_passed[CT_OP_COUNT];
static char g_seen[CT_OP_COUNT];
static int g_failures;


static const double *dptr(ct_tensor *t) {
    ct_tensor *c = ct_contiguous(ct_to_dtype(t, CT_F64));
    return c ? (const double *)ct_data_ptr(c) : NULL;
}

static bool wants(const gc_case *c, int k) {
    return !((k == 1 && (c->flags & GC_NO_GRAD_1)) || (k == 2 && (c->flags & GC_NO_GRAD_2)));
}

/* compares got with want elementwise: |got - want| <= atol + rtol |want| */
static int close_all(const char *what, const gc_case *c, const char *layout, ct_tensor *got,
                     ct_tensor *want, double atol, double rtol) {
    int64_t n = ct_numel(want);
    if (ct_numel(got) != n) {
        fprintf(stderr, "  FAIL %s/%s [%s]: %s: %lld elements, expected %lld\n", c->op, c->label, layout, what,
                (long long)ct_numel(got), (long long)n);
        return 0;
    }
    const double *g = dptr(got), *w = dptr(want);
    if (!g || !w) {
        fprintf(stderr, "  FAIL %s/%s [%s]: %s: %s\n", c->op, c->label, layout, what, ct_last_error());
        return 0;
    }
    for (int64_t i = 0; i < n; i++) {
        if (isnan(w[i]) && isnan(g[i])) continue;
        if (!(fabs(g[i] - w[i]) <= atol + rtol * fabs(w[i]))) {
            fprintf(stderr, "  FAIL %s/%s [%s]: %s: element %lld: jvp %.10g, expected %.10g\n", c->op, c->label,
                    layout, what, (long long)i, g[i], w[i]);
            return 0;
        }
    }
    return 1;
}

static int run_case(const gc_case *c, int noncontig) {
    ct_scope s = ct_scope_begin();
    const char *layout = noncontig ? "non-contiguous" : "contiguous";
    uint64_t seed = 0x9e3779b9u + (uint64_t)strlen(c->label) * 7919u;
    ct_tensor *x[4] = {0}, *v[4] = {0}, *d[4] = {0};
    (void)v;
    int ok = 1;
    for (int k = 0; k < c->nin && ok; k++) {
        x[k] = gc_make_input(c, k, &seed, noncontig, false);
        if (wants(c, k)) v[k] = gc_make_input(c, k, &seed, noncontig, true);
        if (!x[k] || (wants(c, k) && !v[k])) ok = 0;
    }
    double atol = c->atol ? c->atol : 1e-5, rtol = c->rtol ? c->rtol : 1e-3, eps = c->eps ? c->eps : 1e-6;
    /* forward mode */
    ct_tensor *y0 = NULL, *jv = NULL;
    if (ok) {
        int lvl = ct_fwad_enter_dual_level();
        for (int k = 0; k < c->nin && ok; k++)
            d[k] = v[k] ? ct_fwad_make_dual(x[k], v[k], lvl) : x[k];
        ct_tensor *y = ok ? c->fn(d, c->nin, NULL) : NULL;
        if (!y || ct_fwad_unpack_dual(y, lvl, &y0, &jv)) {
            fprintf(stderr, "  FAIL %s/%s [%s]: forward AD: %s\n", c->op, c->label, layout, ct_last_error());
            ok = 0;
        }
        if (ct_fwad_exit_dual_level(lvl)) ok = 0;
        ct_clear_error();
        if (ok && !jv) jv = ct_zeros_like(y0);
    }
    ct_tensor *yref = ok ? c->fn(x, c->nin, NULL) : NULL;
    if (ok && !yref) ok = 0;
    if (ok) ok = close_all("primal", c, layout, y0, yref, 1e-12, 1e-12);
    /* reverse mode: rows of the Jacobian */
    if (ok && ct_dtype_is_floating(ct_get_dtype(yref))) {
        ct_tensor *xr[4], *xs[4], *vs[4];
        int nx = 0;
        for (int k = 0; k < c->nin; k++) {
            xr[k] = ct_detach(x[k]);
            if (v[k]) {
                if (ct_set_requires_grad(xr[k], true)) ok = 0;
                xs[nx] = xr[k];
                vs[nx++] = v[k];
            }
        }
        ct_tensor *y = ok ? c->fn(xr, c->nin, NULL) : NULL;
        int64_t m = y ? ct_numel(y) : 0;
        ct_tensor *yf = y ? ct_reshape(y, CT_SHAPE(-1)) : NULL;
        double *jr = malloc(sizeof(double) * (size_t)(m ? m : 1));
        for (int64_t i = 0; ok && yf && i < m; i++) {
            ct_scope s2 = ct_scope_begin();
            ct_tensor *yi = ct_select(yf, 0, i), *g[4] = {0};
            jr[i] = 0;
            if (ct_requires_grad(yi) && ct_autograd_grad(&yi, 1, xs, nx, NULL, true, false, true, g)) {
                fprintf(stderr, "  FAIL %s/%s [%s]: reverse row %lld: %s\n", c->op, c->label, layout,
                        (long long)i, ct_last_error());
                ok = 0;
            }
            for (int k = 0; ok && k < nx; k++)
                if (g[k]) jr[i] += ct_item(ct_sum(ct_mul(g[k], vs[k]), NULL, 0, false));
            ct_scope_end(s2);
        }
        if (ok && y) {
            ct_tensor *jrt = ct_reshape(ct_from_doubles(jr, CT_SHAPE(m ? m : 0), CT_F64), ct_sizes(y0), ct_ndim(y0));
            ok = jrt && close_all("J v (reverse-mode rows)", c, layout, jv, jrt, c->atol ? c->atol : 1e-9,
                                  c->rtol ? c->rtol : 1e-7);
        }
        free(jr);
        if (!y) ok = 0;
        ct_clear_error();
    }
    /* central finite differences along v */
    if (ok) {
        ct_tensor *xp[4], *xm[4];
        for (int k = 0; k < c->nin; k++) {
            xp[k] = v[k] ? ct_add(x[k], ct_mul_scalar(v[k], eps)) : x[k];
            xm[k] = v[k] ? ct_sub(x[k], ct_mul_scalar(v[k], eps)) : x[k];
        }
        ct_tensor *fp = c->fn(xp, c->nin, NULL), *fm = c->fn(xm, c->nin, NULL);
        ct_tensor *fd = fp && fm ? ct_div_scalar(ct_sub(ct_to_dtype(fp, CT_F64), ct_to_dtype(fm, CT_F64)), 2 * eps) : NULL;
        ok = fd && close_all("J v (finite differences)", c, layout, jv, fd, atol, rtol);
    }
    ct_clear_error();
    ct_scope_end(s);
    return ok;
}

static void run_family(const char *name, const gc_case *cases, int n) {
    int fails = gc_run_family(name, cases, n, run_case, g_seen, g_passed, NULL);
    printf("fwAD check %s: %d cases, %d failed\n", name, n, fails);
    g_failures += fails;
}

#define GC_FAMILY(name)                                                       \
    static void test_##name(void **state) {                                   \
        (void)state;                                                          \
        int before = g_failures;                                              \
        run_family(#name, gc_cases_##name, gc_ncases_##name);                 \
        assert_int_equal(g_failures, before);                                 \
    }
#include "grad_families.h"
#undef GC_FAMILY

static void test_coverage(void **state) {
    (void)state;
    ct__backends_init();
    int with_jvp = 0, covered = 0, own = 0, dvjp = 0;
    for (int i = 0; i < CT_OP_COUNT; i++) {
        const ct_op_info *oi = &ct__op_info[i];
        if (!oi->vjp || oi->vjp == (void *)ct__vjp_none) continue;
        if (!oi->jvp) {
            fprintf(stderr, "  op '%s' has a VJP but no jvp rule\n", oi->name);
            continue;
        }
        with_jvp++;
        if (oi->jvp == (void *)ct__jvp_dvjp) dvjp++;
        else own++;
        if (g_passed[i]) covered++;
        else fprintf(stderr, "  op '%s' has a jvp but no passing forward-AD case%s\n", oi->name,
                     g_seen[i] ? " (its cases failed)" : "");
    }
    printf("fwAD coverage: %d of %d differentiable ops pass (jvp rules: %d own formulas, %d double-vjp)\n",
           covered, with_jvp, own, dvjp);
    assert_int_equal(covered, with_jvp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define GC_FAMILY(name) cmocka_unit_test(test_##name),
#include "grad_families.h"
#undef GC_FAMILY
        cmocka_unit_test(test_coverage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
