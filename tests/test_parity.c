/* test_parity.c -- training parity with PyTorch (issue 5):
 *
 * 1. "An MLP and a CNN trained 100 steps from identical weights and batches
 *    in both frameworks have matching loss curves within 1e-4 relative."
 *    tests/fixtures/parity.txt (tools/fixtures/gen_parity.py): per case a
 *    synthetic data set, 100 batches of 16 indices, torch's initial weights
 *    (flattened in state-dict order, keys and shapes as params) and torch's
 *    100 losses.  The same architecture is built from ctorch's modules, the
 *    weights loaded with ct_module_load_state_dict under torch's Sequential
 *    keys ("0.weight", ...), and trained with ct_cross_entropy, ct_backward
 *    and ct_sgd_new / ct_adam_new; every loss must match within 1e-4
 *    relative, in float32 and in float64.
 *
 * 2. "A PyTorch-trained state_dict for the demo's architecture loads and
 *    gives the same test accuracy."  tests/fixtures/fmnist_torch.safetensors
 *    (the demo's CNN trained one epoch in torch) is loaded with ct_load_module
 *    into ctorch's copy of the architecture, which is evaluated on the 10,000
 *    FashionMNIST test images (Debian's dataset-fashion-mnist); the number
 *    of correct predictions must equal torch's (parity_fmnist.txt) within 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ctorch/io.h>
#include <ctorch/optim.h>

#include "fixture.h"

#define STEPS 100
#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static double cpu_s(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* ---- the architectures ------------------------------------------------- */

/* Builds Sequential(mods[0..n)) and drops the caller's references. */
static ct_module *sequential_of(ct_module **mods, int n) {
    ct_module *seq = NULL;
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && mods[i];
    if (ok) seq = ct_sequential_new(mods, n);
    for (int i = 0; i < n; i++)
        if (mods[i]) ct_module_release(mods[i]);
    return seq;
}

/* Sequential(Linear(20,32), ReLU, Linear(32,32), ReLU, Linear(32,5)) */
static ct_module *build_mlp(void) {
    ct_module *m[5] = {ct_linear_new(20, 32, true), ct_relu_new(), ct_linear_new(32, 32, true),
                       ct_relu_new(), ct_linear_new(32, 5, true)};
    return sequential_of(m, 5);
}

/* Sequential(Conv2d(1,4,3,padding=1), ReLU, MaxPool2d(2), Conv2d(4,8,3,padding=1),
 *            ReLU, Flatten(), Linear(128,5)) on [N, 1, 8, 8] */
static ct_module *build_cnn(void) {
    const int64_t k3[2] = {3, 3}, k2[2] = {2, 2}, pad1[2] = {1, 1};
    const ct_conv_opts opts = {.padding = pad1};
    ct_module *m[7] = {ct_conv2d_new(1, 4, k3, &opts),
                       ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_conv2d_new(4, 8, k3, &opts),
                       ct_relu_new(),
                       ct_flatten_new(1, -1),
                       ct_linear_new(128, 5, true)};
    return sequential_of(m, 7);
}

/* examples/fashion_mnist.c's model: ModuleDict(features=Sequential(Conv2d(1,32,3,
 * padding=1), ReLU, MaxPool2d(2), Conv2d(32,64,3,padding=1), ReLU, MaxPool2d(2)),
 * flatten=Flatten(), classifier=Sequential(Linear(3136,128), ReLU, Dropout(0.25),
 * Linear(128,10))), run in that order.  hidden != 128 gives a mismatched
 * architecture for the error-path test. */
static ct_module *build_demo(int64_t hidden) {
    const int64_t k3[2] = {3, 3}, k2[2] = {2, 2}, pad1[2] = {1, 1};
    const ct_conv_opts opts = {.padding = pad1};
    ct_module *f[6] = {ct_conv2d_new(1, 32, k3, &opts),
                       ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_conv2d_new(32, 64, k3, &opts),
                       ct_relu_new(),
                       ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false)};
    ct_module *c[4] = {ct_linear_new(3136, hidden, true), ct_relu_new(), ct_dropout_new(0.25),
                       ct_linear_new(hidden, 10, true)};
    ct_module *parts[3] = {sequential_of(f, 6), ct_flatten_new(1, -1), sequential_of(c, 4)};
    static const char *const names[3] = {"features", "flatten", "classifier"};
    ct_module *net = NULL;
    if (parts[0] && parts[1] && parts[2]) net = ct_module_dict_new(names, parts, 3);
    for (int i = 0; i < 3; i++)
        if (parts[i]) ct_module_release(parts[i]);
    return net;
}

/* The demo's forward: the dict's children in order. */
static ct_tensor *demo_forward(ct_module *net, ct_tensor *x) {
    for (int i = 0; i < ct_module_num_children(net) && x; i++)
        x = ct_module_forward1(ct_module_child(net, i), x);
    return x;
}

/* ---- 1. loss curves ----------------------------------------------------------- */

/* "32x20" -> {32, 20}; returns ndim or -1 */
static int parse_shape(const char *s, size_t len, int64_t *shape) {
    int nd = 0;
    char buf[64];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = 0;
    for (char *tok = strtok(buf, "x"); tok; tok = strtok(NULL, "x")) {
        if (nd == CT_MAX_DIMS) return -1;
        shape[nd++] = strtoll(tok, NULL, 10);
    }
    return nd;
}

/* The state dict of the case: flat weights split by the "keys"/"shapes"
 * params into tensors under torch's keys. */
static ct_sample *case_state_dict(const fx_case *c, ct_tensor *flat) {
    const char *keys = fx_s(c, "keys", ""), *shapes = fx_s(c, "shapes", "");
    ct_sample *sd = ct_sample_new();
    int64_t off = 0;
    while (sd && *keys && *shapes) {
        size_t kl = strcspn(keys, ","), sl = strcspn(shapes, ",");
        char key[128];
        int64_t shape[CT_MAX_DIMS], n = 1;
        int nd = parse_shape(shapes, sl, shape);
        if (nd < 0 || kl >= sizeof key) goto fail;
        memcpy(key, keys, kl);
        key[kl] = 0;
        for (int i = 0; i < nd; i++) n *= shape[i];
        ct_tensor *t = ct_reshape(ct_narrow(flat, 0, off, n), shape, nd);
        if (!t || ct_sample_set(sd, key, t)) goto fail;
        off += n;
        keys += kl + (keys[kl] == ',');
        shapes += sl + (shapes[sl] == ',');
    }
    if (sd && off == ct_numel(flat)) return sd;
    fprintf(stderr, "  %s: keys/shapes do not cover the %lld weights\n", c->label,
            (long long)ct_numel(flat));
fail:
    ct_sample_free(sd);
    return NULL;
}

/* in: x [N, ...], y [N] int64, order [STEPS, 16] int64, flat initial weights.
 * out: the STEPS losses (float64). */
static ct_status run_train(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_status st = CT_ERR_ARG;
    ct_dtype dt = ct_get_dtype(in[3]), prev = ct_get_default_dtype();
    ct_module *net = NULL;
    ct_optimizer *opt = NULL;
    ct_sample *sd = NULL;
    double losses[STEPS];
    const char *arch = fx_s(c, "arch", "");

    /* parameters in the weights' dtype, like torch's model.to(dtype) */
    if (ct_set_default_dtype(dt)) return ct_last_error_code();
    net = !strcmp(arch, "mlp") ? build_mlp() : !strcmp(arch, "cnn") ? build_cnn() : NULL;
    if (ct_set_default_dtype(prev) || !net) goto done;
    if (!(sd = case_state_dict(c, in[3]))) goto done;
    if (ct_module_load_state_dict(net, sd, true)) goto done;

    ct_tensor *params[16];
    int np = ct_module_named_parameters(net, NULL, params, 16);
    double lr = fx_f(c, "lr", 0);
    opt = !strcmp(fx_s(c, "opt", ""), "sgd")
              ? ct_sgd_new(params, np, lr, 0.9, 0.0, 0.0, false, false)
              : ct_adam_new(params, np, lr, 0.9, 0.999, 1e-8, 0.0, false, false);
    if (!opt) goto done;

    ct_module_train(net, true);
    for (int s = 0; s < STEPS; s++) {
        ct_scope sc = ct_scope_begin();
        ct_tensor *b = ct_select(in[2], 0, s);
        ct_optim_zero_grad(opt, true);
        ct_tensor *logits = ct_module_forward1(net, ct_index_select(in[0], 0, b));
        ct_tensor *loss = ct_cross_entropy(logits, ct_index_select(in[1], 0, b), NULL);
        losses[s] = loss ? ct_item(loss) : NAN;
        bool ok = loss && !ct_backward(loss, NULL, false, false) && !ct_optim_step(opt);
        ct_scope_end(sc);
        if (!ok) goto done;
    }
    out[0] = ct_from_doubles(losses, CT_SHAPE(STEPS), CT_F64);
    if (!out[0]) goto done;

    /* how close: the largest relative deviation from torch's curve */
    if (c->nout == 1 && ct_numel(c->out[0]) == STEPS) {
        const double *ref = ct_data_ptr(c->out[0]);
        double worst = 0;
        int at = 0;
        for (int s = 0; s < STEPS; s++) {
            double r = fabs(losses[s] - ref[s]) / fabs(ref[s]);
            if (!(r <= worst)) worst = r, at = s;
        }
        printf("  %-16s loss %.6f -> %.6f, max relative deviation from torch %.2e (step %d)\n",
               c->label, losses[0], losses[STEPS - 1], worst, at);
    }
    st = CT_OK;
done:
    if (st && ct_last_error_code()) st = ct_last_error_code();
    ct_optim_free(opt);
    ct_sample_free(sd);
    if (net) ct_module_release(net);
    return st;
}

static const fx_op parity_ops[] = {
    {"train", run_train, 1e-4, 0.0},
};

static void test_loss_curves(void **state) {
    (void)state;
    double t0 = cpu_s();
    assert_int_equal(fx_run_file(CT_FIXTURE_DIR "/parity.txt", parity_ops, 1), 0);
    printf("  (%.1f s CPU)\n", cpu_s() - t0);
}

/* Error paths of the loading step: a wrong key or shape is reported by name. */
static void test_load_errors(void **state) {
    (void)state;
    ct_scope sc = ct_scope_begin();
    ct_module *net = build_mlp();
    assert_non_null(net);
    ct_sample *sd = ct_module_state_dict(net);
    assert_non_null(sd);

    /* a torch key that is not in the module, strict */
    ct_sample *bad = ct_sample_new();
    for (int i = 0; i < ct_sample_count(sd); i++)
        assert_int_equal(ct_sample_set(bad, i == 0 ? "0.weights" : ct_sample_name(sd, i),
                                       ct_sample_at(sd, i)), CT_OK);
    assert_int_not_equal(ct_module_load_state_dict(net, bad, true), CT_OK);
    printf("  strict load with a wrong key: %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "0.weight"));
    ct_sample_free(bad);

    /* a transposed weight: shape mismatch */
    bad = ct_sample_new();
    for (int i = 0; i < ct_sample_count(sd); i++) {
        ct_tensor *t = ct_sample_at(sd, i);
        if (i == 0) t = ct_contiguous(ct_transpose(t, 0, 1));
        assert_int_equal(ct_sample_set(bad, ct_sample_name(sd, i), t), CT_OK);
    }
    assert_int_not_equal(ct_module_load_state_dict(net, bad, true), CT_OK);
    printf("  load with a transposed weight: %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "0.weight"));
    ct_sample_free(bad);
    ct_sample_free(sd);

    /* the torch-trained demo weights into an architecture of another width */
    ct_module *other = build_demo(64);
    assert_non_null(other);
    assert_int_not_equal(ct_load_module(CT_FIXTURE_DIR "/fmnist_torch.safetensors", other, true),
                         CT_OK);
    printf("  demo weights into Linear(3136, 64): %s\n", ct_last_error());
    assert_non_null(strstr(ct_last_error(), "classifier.0.weight"));
    ct_module_release(other);

    /* a missing file */
    other = build_demo(128);
    assert_int_not_equal(ct_load_module(CT_FIXTURE_DIR "/no_such_file.safetensors", other, true),
                         CT_OK);
    assert_non_null(strstr(ct_last_error(), "no_such_file"));
    ct_module_release(other);
    ct_module_release(net);
    ct_scope_end(sc);
}

/* ---- 2. the torch-trained demo model ----------------------------------------- */

/* parity_fmnist.txt: "correct <n>" and "total <n>" lines. */
static int read_torch_result(int64_t *correct, int64_t *total) {
    FILE *f = fopen(CT_FIXTURE_DIR "/parity_fmnist.txt", "r");
    char line[256];
    *correct = *total = -1;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        long long v;
        if (sscanf(line, "correct %lld", &v) == 1) *correct = v;
        if (sscanf(line, "total %lld", &v) == 1) *total = v;
    }
    fclose(f);
    return *correct >= 0 && *total > 0 ? 0 : -1;
}

static bool readable(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static void test_fmnist_torch_weights(void **state) {
    (void)state;
    const char *img_path = FMNIST_DIR "/t10k-images-idx3-ubyte.gz";
    const char *lbl_path = FMNIST_DIR "/t10k-labels-idx1-ubyte.gz";
    if (!readable(img_path) || !readable(lbl_path))
        fail_msg("FashionMNIST test set not found (%s, %s): install Debian's "
                 "dataset-fashion-mnist (CT_WITH_DATA=1 sh scripts/install-deps.sh)",
                 img_path, lbl_path);
    int64_t torch_correct, total;
    if (read_torch_result(&torch_correct, &total))
        fail_msg("cannot read %s", CT_FIXTURE_DIR "/parity_fmnist.txt");

    ct_scope sc = ct_scope_begin();
    ct_module *net = build_demo(128);
    assert_non_null(net);
    ct_status st = ct_load_module(CT_FIXTURE_DIR "/fmnist_torch.safetensors", net, true);
    if (st) fail_msg("loading the torch state dict: %s", ct_last_error());
    ct_module_eval(net);

    ct_tensor *images = ct_idx_load(img_path), *labels = ct_idx_load(lbl_path);
    if (!images || !labels) fail_msg("reading FashionMNIST: %s", ct_last_error());
    int64_t n = ct_size(images, 0);
    assert_int_equal(n, total);
    assert_int_equal(ct_size(labels, 0), n);
    ct_tensor *lab64 = ct_to_dtype(labels, CT_I64);

    /* One thread: the evaluation is ~75 GFLOP of GEMMs (a few seconds on one
     * core); on a loaded 2-core machine OpenMP's spinning threads made it
     * 20x slower in CPU time. */
    int threads = ct_get_num_threads();
    ct_set_num_threads(1);
    double t0 = cpu_s();
    bool grad = ct_set_grad_enabled(false);
    int64_t correct = 0;
    const int64_t B = 500;
    for (int64_t i = 0; i < n; i += B) {
        ct_scope bs = ct_scope_begin();
        int64_t len = n - i < B ? n - i : B;
        /* (x / 255 - 0.2860) / 0.3530 in float32, [len, 1, 28, 28] */
        ct_tensor *x = ct_to_dtype(ct_narrow(images, 0, i, len), CT_F32);
        x = ct_div_scalar(ct_sub_scalar(ct_div_scalar(x, 255.0), 0.2860), 0.3530);
        x = ct_unsqueeze(x, 1);
        ct_tensor *pred = ct_argmax(demo_forward(net, x), 1, false);
        ct_tensor *hits = ct_sum(ct_eq(pred, ct_narrow(lab64, 0, i, len)), NULL, 0, false);
        if (!hits) fail_msg("evaluating batch at %lld: %s", (long long)i, ct_last_error());
        correct += ct_item_int(hits);
        ct_scope_end(bs);
    }
    ct_set_grad_enabled(grad);
    ct_set_num_threads(threads);
    printf("  FashionMNIST test accuracy of the torch-trained weights: ctorch %.4f (%lld/%lld), "
           "torch %.4f (%lld/%lld), %.1f s CPU\n",
           (double)correct / (double)n, (long long)correct, (long long)n,
           (double)torch_correct / (double)total, (long long)torch_correct, (long long)total,
           cpu_s() - t0);
    assert_true(llabs(correct - torch_correct) <= 1);
    ct_module_release(net);
    ct_scope_end(sc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_curves),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_fmnist_torch_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
