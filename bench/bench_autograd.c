/* bench_autograd.c -- an MLP training step (784-512-512-10, batch 128,
 * ReLU, softmax cross-entropy): forward alone beside forward + backward,
 * per step (median of the repetitions, min..max).  Merged into bench.json
 * as case mlp_train_step (ours = forward+backward, reference = forward). */
#include <ctorch/ctorch.h>
#include <stdio.h>

#include "bench_util.h"

#define REPS 20

static ct_tensor *forward(ct_tensor *x, ct_tensor *y, ct_tensor **p) {
    ct_tensor *h1 = ct_relu(ct_linear(x, p[0], p[1]));
    ct_tensor *h2 = ct_relu(ct_linear(h1, p[2], p[3]));
    ct_tensor *logits = ct_linear(h2, p[4], p[5]);
    ct_tensor *picked = ct_gather(ct_log_softmax(logits, 1), 1, ct_unsqueeze(y, 1));
    return ct_neg(ct_mean(picked, NULL, 0, false));
}

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "build/bench.json";
    ct_manual_seed(0);
    const int64_t sizes[4] = {784, 512, 512, 10};
    ct_tensor *p[6];
    for (int l = 0; l < 3; l++) {
        p[2 * l] = ct_mul_scalar(ct_randn(CT_SHAPE(sizes[l + 1], sizes[l]), CT_F32), 0.05);
        p[2 * l + 1] = ct_zeros(CT_SHAPE(sizes[l + 1]), CT_F32);
        if (ct_set_requires_grad(p[2 * l], true) || ct_set_requires_grad(p[2 * l + 1], true)) return 1;
    }
    ct_tensor *x = ct_randn(CT_SHAPE(128, 784), CT_F32);
    ct_tensor *y = ct_randint(0, 10, CT_SHAPE(128), CT_I64);
    double fwd[REPS], step[REPS];
    for (int r = -3; r < REPS; r++) {
        ct_scope s = ct_scope_begin();
        double t0 = bench_now_ms();
        bool prev = ct_set_grad_enabled(false);
        ct_tensor *l0 = forward(x, y, p);
        ct_set_grad_enabled(prev);
        double t1 = bench_now_ms();
        ct_scope_end(s);
        s = ct_scope_begin();
        double t2 = bench_now_ms();
        ct_tensor *l1 = forward(x, y, p);
        ct_status st = ct_backward(l1, NULL, false, false);
        double t3 = bench_now_ms();
        if (!l0 || st) { fprintf(stderr, "mlp step failed: %s\n", ct_last_error()); return 1; }
        for (int i = 0; i < 6; i++) ct_zero_grad(p[i]);
        ct_scope_end(s);
        if (r >= 0) { fwd[r] = t1 - t0; step[r] = t3 - t2; }
    }
    bench_stat f = bench_stats(fwd, REPS), b = bench_stats(step, REPS);
    printf("mlp 784-512-512-10, batch 128 (%d threads), per step:\n", ct_get_num_threads());
    printf("  forward            %8.3f ms (%.3f..%.3f)\n", f.med, f.min, f.max);
    printf("  forward + backward %8.3f ms (%.3f..%.3f)   ratio %.2f\n", b.med, b.min, b.max, b.med / f.med);
    char extra[128];
    snprintf(extra, sizeof extra, "\"threads\": %d, \"reference_name\": \"forward only\"", ct_get_num_threads());
    bench_json_add(json, "mlp_train_step", b.med, f.med, "ms", extra);
    for (int i = 0; i < 6; i++) ct_release(p[i]);
    ct_release(x);
    ct_release(y);
    return 0;
}
