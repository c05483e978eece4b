/* test_optim_multi.c -- the fused multi-tensor steps of SGD, Adam and AdamW
 * (src/optim/optim.c, fused_step): a group mixing large and small contiguous
 * parameters, a non-contiguous one (op-by-op path) and one without a grad
 * must match the op-by-op step (itself checked bit for bit against torch in
 * test_optim.c), and the fused result must be bitwise identical for 1 and 2
 * threads.  No leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <ctorch/ctorch.h>

#define NP 5

/* NP leaves: [70001] (several chunks), [3, 5], [1], a transposed [40, 30]
 * view (non-contiguous: op-by-op path) and [7] (never gets a grad) */
static void make_params(ct_tensor **p, ct_dtype dt) {
    ct_manual_seed(11);
    bool prev = ct_set_grad_enabled(false);
    p[0] = ct_randn(CT_SHAPE(70001), dt);
    p[1] = ct_randn(CT_SHAPE(3, 5), dt);
    p[2] = ct_randn(CT_SHAPE(1), dt);
    p[3] = ct_t(ct_randn(CT_SHAPE(30, 40), dt));
    p[4] = ct_randn(CT_SHAPE(7), dt);
    ct_set_grad_enabled(prev);
    for (int i = 0; i < NP; i++) assert_int_equal(ct_set_requires_grad(p[i], true), CT_OK);
}

static ct_optimizer *make_opt(const char *kind, ct_tensor **p) {
    if (!strcmp(kind, "sgd")) return ct_sgd_new(p, NP, 0.1, 0.9, 0.1, 0.01, false, false);
    if (!strcmp(kind, "sgd_nesterov")) return ct_sgd_new(p, NP, 0.1, 0.9, 0, 0.01, true, true);
    if (!strcmp(kind, "sgd_plain")) return ct_sgd_new(p, NP, 0.1, 0, 0, 0, false, false);
    if (!strcmp(kind, "adamw")) return ct_adamw_new(p, NP, 0.01, 0.9, 0.99, 1e-8, 0.1, false, false);
    if (!strcmp(kind, "adam_amsgrad")) return ct_adam_new(p, NP, 0.01, 0.9, 0.99, 1e-8, 0.01, true, true);
    return ct_adam_new(p, NP, 0.01, 0.9, 0.99, 1e-8, 0.01, false, false);
}

/* runs 4 steps with the same grads (seeded) on params p */
static void run(const char *kind, ct_tensor **p, ct_dtype dt, bool fused, int threads) {
    ct_set_num_threads(threads);
    ct_optimizer *o = make_opt(kind, p);
    assert_non_null(o);
    if (fused) assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
    ct_manual_seed(3);
    for (int it = 0; it < 4; it++) {
        ct_scope s = ct_scope_begin();
        for (int i = 0; i < NP - 1; i++)
            assert_int_equal(ct_set_grad(p[i], ct_randn(ct_sizes(p[i]), ct_ndim(p[i]), dt)), CT_OK);
        assert_int_equal(ct_optim_step(o), CT_OK);
        ct_scope_end(s);
    }
    /* the state the fused path made is the op-by-op path's */
    assert_non_null(ct_optim_state(o, 0, strncmp(kind, "sgd", 3) ? "exp_avg" : "momentum_buffer") ||
                    !strcmp(kind, "sgd_plain"));
    assert_null(ct_optim_state(o, 4, "step"));
    ct_optim_free(o);
}

static void test_multi_tensor_fused(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int threads0 = ct_get_num_threads();
    const char *kinds[] = {"sgd", "sgd_nesterov", "sgd_plain", "adam", "adam_amsgrad", "adamw"};
    ct_dtype dts[] = {CT_F32, CT_F64};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 6; k++) {
            ct_scope s = ct_scope_begin();
            ct_tensor *ref[NP], *f1[NP], *f2[NP];
            make_params(ref, dts[d]);
            make_params(f1, dts[d]);
            make_params(f2, dts[d]);
            run(kinds[k], ref, dts[d], false, 2);
            run(kinds[k], f1, dts[d], true, 1);
            run(kinds[k], f2, dts[d], true, 2);
            double tol = dts[d] == CT_F32 ? 1e-6 : 1e-14;
            for (int i = 0; i < NP; i++) {
                if (ct_allclose(ref[i], f1[i], tol, tol, false) != 1)
                    print_message("%s %s param %d: fused != op by op\n", kinds[k],
                                  ct_dtype_name(dts[d]), i);
                assert_int_equal(ct_allclose(ref[i], f1[i], tol, tol, false), 1);
                assert_int_equal(ct_equal(f1[i], f2[i]), 1); /* thread count: bitwise */
            }
            assert_int_equal(ct_equal(ref[4], f1[4]), 1); /* no grad: untouched */
            ct_scope_end(s);
        }
    ct_set_num_threads(threads0);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_multi_tensor_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
