/* test_gradcheck.c -- runs every gradcheck case (tests/grad_<family>.c) and
 * checks that every op with a VJP in the op table has a passing case. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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



static int run_case(const gc_case *c, int noncontig) {
    ct_scope s = ct_scope_begin();
    uint64_t seed = 0x12345678u + (uint64_t)strlen(c->label) * 7919u;
    ct_tensor *in[4];
    int ok = 1;
    for (int k = 0; k < c->nin; k++) {
        in[k] = gc_make_input(c, k, &seed, noncontig, false);
        bool rg = !((k == 1 && (c->flags & GC_NO_GRAD_1)) || (k == 2 && (c->flags & GC_NO_GRAD_2)));
        if (!in[k] || (rg && ct_set_requires_grad(in[k], true))) ok = 0;
    }
    const char *what = noncontig ? "non-contiguous" : "contiguous";
    if (ok && ct_gradcheck(c->fn, NULL, in, c->nin, c->eps, c->atol, c->rtol) != CT_OK) {
        fprintf(stderr, "  FAIL gradcheck %s/%s [%s]: %s\n", c->op, c->label, what, ct_last_error());
        ok = 0;
    }
    if (ok && (c->flags & GC_GRADGRAD) &&
        ct_gradgradcheck(c->fn, NULL, in, c->nin, c->eps, c->atol, c->rtol) != CT_OK) {
        fprintf(stderr, "  FAIL gradgradcheck %s/%s [%s]: %s\n", c->op, c->label, what, ct_last_error());
        ok = 0;
    }
    ct_scope_end(s);
    return ok;
}

static void run_family(const char *name, const gc_case *cases, int n) {
    int gg = 0;
    int fails = gc_run_family(name, cases, n, run_case, g_seen, g_passed, &gg);
    printf("gradcheck %s: %d cases, %d failed, %d with gradgradcheck\n", name, n, fails, gg);
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
    int with_vjp = 0, covered = 0;
    for (int i = 0; i < CT_OP_COUNT; i++) {
        if (!ct__op_info[i].vjp) continue;
        with_vjp++;
        if (g_passed[i]) covered++;
        else fprintf(stderr, "  op '%s' has a VJP but no passing gradcheck case%s\n",
                     ct__op_info[i].name, g_seen[i] ? " (its cases failed)" : "");
    }
    printf("gradcheck coverage: %d of %d ops with a VJP\n", covered, with_vjp);
    assert_int_equal(covered, with_vjp);
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
