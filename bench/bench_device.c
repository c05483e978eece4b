/* bench_device.c -- each OpenCL device beside the cpu, in one run, for a
 * few cases (`make bench`):
 *   device_matmul_512:  ct_matmul 512x512x512 f32 (CLBlast on the device)
 *   device_cnn_step_64: one training step of the FashionMNIST CNN of
 *                       examples/fashion_mnist.c (conv 1->32->64, pools,
 *                       linear 3136->128->10, cross-entropy, backward, fused
 *                       Adam) on a batch of 64 random images
 * "ours" is the device, "reference" the cpu; each row also prints the
 * largest difference of the results (the matmul's values, the loss after
 * the timed steps).  On a machine without a GPU the OpenCL device is PoCL
 * on the same cores: it is a correctness device, and these figures are NOT
 * a speed claim (they are here so that a GPU machine prints its own).
 * Without an OpenCL device the program says so and exits 0. */
#include <ctorch/ctorch.h>
#include <math.h>
#include <stdio.h>

#include "bench_util.h"

#define REPS 5

static ct_module *make_cnn(void) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *l[9] = {ct_conv2d_new(1, 32, k3, &pad), ct_relu_new(), ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_conv2d_new(32, 64, k3, &pad), ct_relu_new(), ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_flatten_new(1, -1), ct_linear_new(64 * 7 * 7, 128, true), ct_linear_new(128, 10, true)};
    ct_module *net = ct_sequential_new(l, 9);
    for (int i = 0; i < 9; i++) ct_module_release(l[i]);
    return net;
}

/* median ms of REPS training steps on dev (after one warm-up step); *loss: the last */
static double cnn_steps(ct_dev dev, ct_tensor *x, ct_tensor *y, double *loss) {
    ct_manual_seed(3);
    ct_module *net = make_cnn();
    if (!net || ct_module_to_dev(net, dev)) return NAN;
    ct_tensor *ps[16];
    int np = ct_module_named_parameters(net, NULL, ps, 16);
    ct_optimizer *opt = ct_adam_new(ps, np, 1e-3, 0.9, 0.999, 1e-8, 0.0, false, false);
    if (!opt || ct_optim_set_all(opt, "fused", 1)) return NAN;
    ct_tensor *xd = ct_to_dev(x, dev), *yd = ct_to_dev(y, dev);
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        double t0 = bench_now_ms();
        ct_scope s = ct_scope_begin();
        ct_tensor *l = ct_cross_entropy(ct_module_forward1(net, xd), yd, NULL);
        ct_optim_zero_grad(opt, true);
        if (!l || ct_backward(l, NULL, false, false) || ct_optim_step(opt)) { ct_scope_end(s); return NAN; }
        *loss = ct_item(l); /* waits for the device */
        ct_scope_end(s);
        if (r >= 0) t[r] = bench_now_ms() - t0;
    }
    ct_optim_free(opt);
    ct_module_release(net);
    return bench_stats(t, REPS).med;
}

static double matmul_ms(ct_tensor *a, ct_tensor *b, ct_tensor **keep) {
    double t[REPS];
    for (int r = -1; r < REPS; r++) {
        double t0 = bench_now_ms();
        ct_tensor *c = ct_to_dev(ct_matmul(a, b), CT_DEV(CT_CPU, 0)); /* waits for the device */
        if (!c) return NAN;
        if (r >= 0) t[r] = bench_now_ms() - t0;
        *keep = c;
    }
    return bench_stats(t, REPS).med;
}

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "build/bench.json";
    const char *names[8];
    int n = ct_opencl_devices(names, 8);
    if (n <= 0) {
        printf("bench_device: no OpenCL device (%s): nothing to compare\n", ct_last_error());
        return 0;
    }
    printf("devices beside the cpu (%d threads; medians of %d runs, each including the copy of the result "
           "to the host)\n", ct_get_num_threads(), REPS);
    int rc = 0;
    for (int d = 0; d < n; d++) {
        ct_dev dev = CT_DEV(CT_OPENCL, d);
        char dn[32];
        ct_dev_str(dev, dn, sizeof dn);
        bool pocl = strstr(names[d], "Portable Computing Language") != NULL;
        const char *mark = pocl ? "PoCL on the cpu's cores: a correctness device, not a speed claim" : names[d];
        printf("%s  %s\n", dn, names[d]);
        ct_scope s = ct_scope_begin();
        ct_manual_seed(1);
        ct_tensor *a = ct_randn(CT_SHAPE(512, 512), CT_F32), *b = ct_randn(CT_SHAPE(512, 512), CT_F32);
        ct_tensor *cc = NULL, *cd = NULL;
        double tc = matmul_ms(a, b, &cc), td = matmul_ms(ct_to_dev(a, dev), ct_to_dev(b, dev), &cd);
        double diff = cc && cd ? ct_item(ct_amax(ct_abs(ct_sub(cc, cd)), NULL, 0, false)) : NAN;
        printf("  device_matmul_512   %s %9.2f ms   cpu %9.2f ms   max |diff| %.2e   (%s)\n", dn, td, tc, diff, mark);
        char extra[512], name[64];
        snprintf(extra, sizeof extra, "\"device\": \"%s\", \"reference_name\": \"cpu\", \"max_abs_diff\": %.3g, "
                 "\"correctness_device\": %s", names[d], diff, pocl ? "true" : "false");
        snprintf(name, sizeof name, "device_matmul_512_%s", dn);
        if (!isnan(td) && !isnan(tc)) bench_json_add(json, name, td, tc, "ms", extra);
        else rc = 1;
        ct_tensor *x = ct_rand(CT_SHAPE(64, 1, 28, 28), CT_F32);
        ct_tensor *y = ct_randint(0, 10, CT_SHAPE(64), CT_I64);
        double lc = NAN, ld = NAN;
        tc = cnn_steps(CT_DEV(CT_CPU, 0), x, y, &lc);
        td = cnn_steps(dev, x, y, &ld);
        printf("  device_cnn_step_64  %s %9.2f ms   cpu %9.2f ms   loss %.6f vs %.6f   (%s)\n", dn, td, tc, ld, lc,
               mark);
        snprintf(extra, sizeof extra, "\"device\": \"%s\", \"reference_name\": \"cpu\", \"loss_diff\": %.3g, "
                 "\"correctness_device\": %s", names[d], fabs(ld - lc), pocl ? "true" : "false");
        snprintf(name, sizeof name, "device_cnn_step_64_%s", dn);
        if (!isnan(td) && !isnan(tc)) bench_json_add(json, name, td, tc, "ms", extra);
        else { fprintf(stderr, "bench_device: %s\n", ct_last_error()); rc = 1; }
        ct_scope_end(s);
    }
    return rc;
}
