/* test_opencl_train.c -- autograd and training on the OpenCL device end to
 * end (through PoCL on a machine without a GPU), against the same run on
 * the cpu:
 *
 *   train_cnn    a small CNN (conv 1->8 3x3 + relu + max_pool 2, linear
 *                1568->10) trained 200 steps with fused Adam on 512
 *                FashionMNIST images (batch 32): the same seed, the same
 *                batches on both devices; the device's loss falls (the last
 *                25 steps' mean under half the first 25's) and every step's
 *                loss stays within 2e-3 (relative) of the cpu's, the
 *                parameters after training within 1e-3; the device's steps
 *                run without the cpu fallback.
 *   optim_steps  fused SGD (momentum, nesterov, weight decay) and AdamW
 *                (amsgrad) steps on the device equal the cpu's, without the
 *                fallback.
 *   random_same  a seeded ct_randn / ct_rand / dropout on the device gives
 *                the cpu's numbers bit for bit (the same Philox streams: the
 *                device draws through the cpu generator).
 *
 * Skipped (with the reason printed) when there is no OpenCL device or no
 * FashionMNIST (dataset-fashion-mnist). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ctorch/ctorch.h"
#include "test_util.h"

static ct_dev g_dev;
long ct__fallback_runs(int op); /* src/backend/fallback.c: calls run through the cpu fallback */
static const ct_dev k_cpu = {CT_CPU, 0};
static const char *k_data = "/usr/share/datasets/fashion-mnist";

#define NSAMP 512
#define BATCH 32
#define STEPS 200

/* the first NSAMP training images [NSAMP, 1, 28, 28] in [0, 1] and their labels */
static bool load_subset(ct_tensor **x, ct_tensor **y) {
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", k_data);
    snprintf(p2, sizeof p2, "%s/train-labels-idx1-ubyte.gz", k_data);
    ct_dataset *ds = ct_idx_dataset_new(p1, p2, CT_F32);
    if (!ds) return false;
    ct_dataloader_opts o = {.batch_size = NSAMP};
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    ct_sample *b = NULL;
    bool ok = dl && ct_dataloader_begin_epoch(dl, 0) == CT_OK && ct_dataloader_next(dl, &b) == 1;
    if (ok) {
        *x = ct_clone(ct_sample_get(b, "image"));
        *y = ct_clone(ct_sample_get(b, "label"));
        ok = *x && *y;
    }
    ct_sample_free(b);
    ct_dataloader_free(dl);
    ct_dataset_release(ds);
    return ok;
}

static ct_module *make_net(void) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *l[6] = {ct_conv2d_new(1, 8, k3, &pad), ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false), ct_flatten_new(1, -1),
                       ct_linear_new(8 * 14 * 14, 10, true), NULL};
    ct_module *net = ct_sequential_new(l, 5);
    for (int i = 0; i < 5; i++) ct_module_release(l[i]);
    return net;
}

/* trains a fresh net (seed 0) on dev; losses[STEPS]; the trained parameters to params (cpu) */
static void train(ct_dev dev, ct_tensor *x, ct_tensor *y, double *losses, ct_tensor **params, int *np) {
    ct_manual_seed(0);
    ct_module *net = make_net();
    assert_non_null(net);
    assert_int_equal(ct_module_to_dev(net, dev), CT_OK);
    ct_tensor *ps[8];
    int n = ct_module_named_parameters(net, NULL, ps, 8);
    assert_int_equal(n, 4);
    ct_optimizer *opt = ct_adam_new(ps, n, 2e-3, 0.9, 0.999, 1e-8, 0.0, false, false);
    assert_non_null(opt);
    assert_int_equal(ct_optim_set_all(opt, "fused", 1), CT_OK);
    ct_tensor *xd = ct_to_dev(x, dev), *yd = ct_to_dev(y, dev);
    assert_non_null(xd);
    assert_non_null(yd);
    for (int s = 0; s < STEPS; s++) {
        ct_scope sc = ct_scope_begin();
        int64_t b0 = (int64_t)(s % (NSAMP / BATCH)) * BATCH;
        ct_tensor *xb = ct_narrow(xd, 0, b0, BATCH), *yb = ct_narrow(yd, 0, b0, BATCH);
        ct_tensor *loss = ct_cross_entropy(ct_module_forward1(net, xb), yb, NULL);
        ct_optim_zero_grad(opt, true);
        if (!loss || ct_backward(loss, NULL, false, false) || ct_optim_step(opt))
            fail_msg("step %d on %s: %s", s, dev.type == CT_CPU ? "cpu" : "opencl", ct_last_error());
        assert_true(ct_dev_equal(ct_tensor_dev(loss), dev));
        losses[s] = ct_item(loss);
        ct_scope_end(sc);
    }
    n = ct_module_named_parameters(net, NULL, ps, 8);
    for (int k = 0; k < n; k++) {
        assert_true(ct_dev_equal(ct_tensor_dev(ps[k]), dev));
        params[k] = ct_to_dev(ps[k], k_cpu);
    }
    *np = n;
    ct_optim_free(opt);
    ct_module_release(net);
}

static double mean(const double *v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return s / n;
}

static void train_cnn(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = NULL, *y = NULL;
    if (!load_subset(&x, &y)) {
        printf("train_cnn: skipped: no FashionMNIST in %s (%s)\n", k_data, ct_last_error());
        ct_clear_error();
        SCOPE_END;
        skip();
    }
    static double lc[STEPS], ld[STEPS];
    ct_tensor *pc[8], *pd[8];
    int nc = 0, nd = 0;
    train(k_cpu, x, y, lc, pc, &nc);
    long fb0 = ct__fallback_runs(-1);
    train(g_dev, x, y, ld, pd, &nd);
    /* every op of the step (conv, pool, linear, cross-entropy, backward, fused Adam) on own kernels */
    assert_int_equal(ct__fallback_runs(-1), fb0);
    double first = mean(ld, 25), last = mean(ld + STEPS - 25, 25);
    printf("train_cnn: opencl loss %.4f -> %.4f (cpu %.4f -> %.4f) over %d steps\n", first, last, mean(lc, 25),
           mean(lc + STEPS - 25, 25), STEPS);
    assert_true(last < 0.5 * first);
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double d = fabs(ld[s] - lc[s]) / fmax(fabs(lc[s]), 1e-3);
        if (d > worst) worst = d;
    }
    printf("train_cnn: largest relative loss difference from the cpu's: %.2e\n", worst);
    assert_true(worst < 2e-3);
    assert_int_equal(nc, nd);
    for (int k = 0; k < nc; k++) assert_int_equal(ct_allclose(pd[k], pc[k], 1e-3, 1e-4, false), 1);
    SCOPE_END;
}

static void random_same(void **state) {
    (void)state;
    SCOPE_BEGIN;
    const int64_t sh[2] = {37, 29};
    ct_manual_seed(1234);
    ct_tensor *a = ct_randn(sh, 2, CT_F32);
    ct_tensor *u = ct_rand(sh, 2, CT_F64);
    ct_tensor *dr = ct_dropout(ct_ones(sh, 2, CT_F32), 0.3, true);
    ct_manual_seed(1234);
    assert_int_equal(ct_set_default_dev(g_dev), CT_OK);
    ct_tensor *b = ct_randn(sh, 2, CT_F32);
    ct_tensor *v = ct_rand(sh, 2, CT_F64);
    assert_int_equal(ct_set_default_dev(k_cpu), CT_OK);
    ct_tensor *dd = ct_dropout(ct_ones_dev(sh, 2, CT_F32, g_dev), 0.3, true);
    assert_non_null(b);
    assert_non_null(v);
    assert_non_null(dd);
    assert_true(ct_dev_equal(ct_tensor_dev(b), g_dev));
    assert_true(ct_dev_equal(ct_tensor_dev(dd), g_dev));
    assert_int_equal(ct_equal(ct_to_dev(b, k_cpu), a), 1);
    assert_int_equal(ct_equal(ct_to_dev(v, k_cpu), u), 1);
    assert_int_equal(ct_equal(ct_to_dev(dd, k_cpu), dr), 1);
    /* and the stream moved on as on the cpu: the next draw differs from the first */
    ct_tensor *c = ct_randn_like(b);
    assert_int_equal(ct_equal(ct_to_dev(c, k_cpu), a), 0);
    SCOPE_END;
}

/* the fused SGD (momentum, nesterov, weight decay) and AdamW (amsgrad) steps on the device give
 * the cpu's parameters and state, on their own kernels */
static void optim_steps(void **state) {
    (void)state;
    SCOPE_BEGIN;
    for (int which = 0; which < 2; which++)
        for (int dt = 0; dt < 2; dt++) {
            ct_dtype d = dt ? CT_F64 : CT_F32;
            ct_manual_seed(77);
            ct_tensor *p0 = ct_randn((int64_t[]){300, 7}, 2, d), *g0 = ct_randn((int64_t[]){300, 7}, 2, d);
            ct_tensor *pc = ct_clone(p0), *pd = ct_to_dev(p0, g_dev);
            assert_int_equal(ct_set_requires_grad(pc, true), CT_OK);
            assert_int_equal(ct_set_requires_grad(pd, true), CT_OK);
            ct_tensor *res[2];
            for (int side = 0; side < 2; side++) {
                ct_tensor *p = side ? pd : pc;
                ct_optimizer *o = which ? ct_adamw_new(&p, 1, 1e-2, 0.9, 0.99, 1e-8, 0.1, true, false)
                                        : ct_sgd_new(&p, 1, 1e-2, 0.9, 0.0, 1e-3, true, false);
                assert_non_null(o);
                assert_int_equal(ct_optim_set_all(o, "fused", 1), CT_OK);
                long fb0 = ct__fallback_runs(-1);
                for (int s = 1; s <= 3; s++) {
                    ct_tensor *g = ct_to_dev(ct_mul_scalar(g0, (double)s), ct_tensor_dev(p));
                    assert_int_equal(ct_set_grad(p, g), CT_OK);
                    assert_int_equal(ct_optim_step(o), CT_OK);
                }
                if (side) assert_int_equal(ct__fallback_runs(-1), fb0);
                res[side] = ct_to_dev(ct_detach(p), k_cpu);
                ct_optim_free(o);
            }
            if (ct_allclose(res[1], res[0], dt ? 1e-12 : 1e-6, dt ? 1e-14 : 1e-7, false) != 1)
                fail_msg("%s %s: the device's parameters differ from the cpu's", which ? "AdamW" : "SGD",
                         ct_dtype_name(d));
        }
    SCOPE_END;
}

int main(void) {
    const char *names[4];
    int n = ct_opencl_devices(names, 4);
    if (n <= 0) {
        printf("test_opencl_train: skipped: %s\n", ct_last_error());
        return 0;
    }
    printf("opencl:0  %s\n", names[0]);
    g_dev = CT_DEV(CT_OPENCL, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_same),
        cmocka_unit_test(optim_steps),
        cmocka_unit_test(train_cnn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
