/* fashion_mnist.c -- `make demo`: a small CNN trained on FashionMNIST.
 *
 *   conv3x3(1->32)+ReLU+maxpool2, conv3x3(32->64)+ReLU+maxpool2,
 *   linear(3136->128)+ReLU, linear(128->10); Adam (fused), batch 128.
 *
 * Reads the IDX files of Debian's dataset-fashion-mnist through the
 * DataLoader (two worker threads), shows a progress bar per epoch with
 * loss, accuracy and samples/s, prints "test accuracy: 0.xxxx" as its last
 * line and saves a safetensors checkpoint (atomically).
 *
 *   fashion_mnist [--data DIR] [--epochs N] [--checkpoint FILE] [--compile] [--device DEV]
 *                 [--amp bf16|f16]
 *   fashion_mnist --predict [--checkpoint FILE] [--count N]
 *       reloads the checkpoint and classifies test images.
 *
 * --device opencl (or opencl:1, cpu) trains and evaluates on that device:
 * the parameters and the optimizer's state live there, each batch is copied
 * there, and the loss and accuracy are read back once per batch.  With the
 * same seed it reaches the cpu's accuracy (the dropout masks are drawn from
 * the same generator).
 *
 * --compile runs the network's forward through ct_compile (compile.h):
 * training goes through the compiled joint forward + backward graph, the
 * evaluation through a compiled inference variant; with the same seed it
 * reaches eager's accuracy (tests/fashion_compile.sh checks that).
 *
 * --amp bf16 (or f16) trains with automatic mixed precision (amp.h): the
 * forward and the loss run under ct_autocast (convolutions and linears in
 * bfloat16, the loss in float32) while Adam keeps float32 master weights;
 * f16 adds a GradScaler (dynamic loss scaling), as torch's AMP recipe.
 */
#include <ctorch/amp.h>
#include <ctorch/compile.h>
#include <ctorch/ctorch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *k_classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what) {
    fprintf(stderr, "fashion_mnist: %s: %s\n", what, ct_last_error());
    return 1;
}

/* The network, with PyTorch's module paths: features.0.weight, ... */
static ct_module *make_model(void) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *f[6] = {ct_conv2d_new(1, 32, k3, &pad), ct_relu_new(), ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                       ct_conv2d_new(32, 64, k3, &pad), ct_relu_new(), ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false)};
    ct_module *c[4] = {ct_linear_new(64 * 7 * 7, 128, true), ct_relu_new(), ct_dropout_new(0.25), ct_linear_new(128, 10, true)};
    ct_module *features = ct_sequential_new(f, 6), *classifier = ct_sequential_new(c, 4);
    ct_module *flat = ct_flatten_new(1, -1);
    ct_module *top[3] = {features, flat, classifier};
    const char *names[3] = {"features", "flatten", "classifier"};
    ct_module *net = ct_module_dict_new(names, top, 3);
    for (int i = 0; i < 6; i++) ct_module_release(f[i]);
    for (int i = 0; i < 4; i++) ct_module_release(c[i]);
    ct_module_release(features);
    ct_module_release(classifier);
    ct_module_release(flat);
    return net;
}

/* x: [N, 1, 28, 28] in [0, 1] -> logits [N, 10] */
static ct_tensor *forward_eager(ct_module *net, ct_tensor *x) {
    ct_tensor *h = ct_div_scalar(ct_sub_scalar(x, 0.2860), 0.3530);
    h = ct_module_forward1(ct_module_get_submodule(net, "features"), h);
    h = ct_module_forward1(ct_module_get_submodule(net, "flatten"), h);
    return ct_module_forward1(ct_module_get_submodule(net, "classifier"), h);
}

/* the same as a function of tensors for ct_compile (ctx: the network) */
static ct_status forward_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout;
    out[0] = forward_eager(ctx, in[0]);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_compiled *g_compiled; /* --compile */
static ct_dev g_dev = {CT_CPU, 0}; /* --device */
static ct_dtype g_amp = CT_F32;  /* --amp: the autocast dtype (CT_F32: off) */

static ct_tensor *forward_plain(ct_module *net, ct_tensor *x) {
    if (!g_compiled) return forward_eager(net, x);
    ct_tensor *y = NULL;
    return ct_compiled_call(g_compiled, &x, 1, &y, 1) == CT_OK ? y : NULL;
}

/* the logits, under autocast with --amp; with y, *loss = cross entropy (also under it) */
static ct_tensor *forward_loss(ct_module *net, ct_tensor *x, ct_tensor *y, ct_tensor **loss) {
    ct_tensor *logits = NULL;
    if (g_amp == CT_F32) {
        logits = forward_plain(net, x);
        if (y) *loss = ct_cross_entropy(logits, y, NULL);
        return logits;
    }
    CT_AUTOCAST(CT_CPU, g_amp) {
        logits = forward_plain(net, x);
        if (y) *loss = ct_cross_entropy(logits, y, NULL);
    }
    return logits;
}

static ct_tensor *forward(ct_module *net, ct_tensor *x) { return forward_loss(net, x, NULL, NULL); }

/* accuracy of net on a whole dataset, batched, no grad */
static double evaluate(ct_module *net, ct_dataset *ds) {
    ct_dataloader_opts o = {.batch_size = 1000};
    ct_dataloader *dl = ct_dataloader_new(ds, &o);
    if (!dl || ct_dataloader_begin_epoch(dl, 0)) return NAN;
    bool prev = ct_set_grad_enabled(false);
    int64_t correct = 0, seen = 0;
    ct_sample *b;
    int r;
    while ((r = ct_dataloader_next(dl, &b)) == 1) {
        ct_scope s = ct_scope_begin();
        ct_tensor *y = ct_to_dev(ct_sample_get(b, "label"), g_dev);
        ct_tensor *pred = ct_argmax(forward(net, ct_to_dev(ct_sample_get(b, "image"), g_dev)), 1, false);
        correct += ct_item_int(ct_sum(ct_eq(pred, y), NULL, 0, false));
        seen += ct_numel(y);
        ct_scope_end(s);
        ct_sample_free(b);
    }
    ct_set_grad_enabled(prev);
    ct_dataloader_free(dl);
    return r < 0 || seen == 0 ? NAN : (double)correct / (double)seen;
}

static int predict(ct_module *net, ct_dataset *test, const char *ckpt, int count) {
    if (ct_load_module(ckpt, net, true)) return fail("loading the checkpoint");
    ct_module_eval(net);
    printf("loaded %s\n", ckpt);
    bool prev = ct_set_grad_enabled(false);
    ct_sample *smp = ct_sample_new();
    int correct = 0;
    for (int i = 0; i < count; i++) {
        ct_scope s = ct_scope_begin();
        if (ct_dataset_get(test, i, smp)) return fail("reading a test image");
        ct_tensor *x = ct_to_dev(ct_unsqueeze(ct_sample_get(smp, "image"), 0), g_dev);
        ct_tensor *p = ct_softmax(forward(net, x), 1);
        int64_t k = ct_item_int(ct_argmax(p, 1, false));
        int64_t y = ct_item_int(ct_sample_get(smp, "label"));
        double conf = ct_item(ct_select(ct_select(p, 0, 0), 0, k));
        correct += k == y;
        printf("image %5d: predicted %-12s (%5.1f%%)  true %-12s %s\n", i, k_classes[k], 100 * conf,
               k_classes[y], k == y ? "" : "  <- wrong");
        ct_scope_end(s);
    }
    ct_set_grad_enabled(prev);
    ct_sample_free(smp);
    printf("%d of %d correct\n", correct, count);
    printf("test accuracy: %.4f\n", evaluate(net, test));
    return 0;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/share/datasets/fashion-mnist", *ckpt = "fashion_mnist.safetensors";
    int epochs = 3, count = 10, do_predict = 0, use_compile = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--epochs") && i + 1 < argc) epochs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--checkpoint") && i + 1 < argc) ckpt = argv[++i];
        else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--predict")) do_predict = 1;
        else if (!strcmp(argv[i], "--compile")) use_compile = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
            if (ct_dev_parse(argv[++i], &g_dev)) return fail("--device");
        } else if (!strcmp(argv[i], "--amp") && i + 1 < argc && !strcmp(argv[i + 1], "bf16")) g_amp = CT_BF16, i++;
        else if (!strcmp(argv[i], "--amp") && i + 1 < argc && !strcmp(argv[i + 1], "f16")) g_amp = CT_F16, i++;
        else { fprintf(stderr, "usage: %s [--data DIR] [--epochs N] [--checkpoint FILE] [--compile] [--device DEV] [--amp bf16|f16] [--predict [--count N]]\n", argv[0]); return 2; }
    }
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(p2, sizeof p2, "%s/train-labels-idx1-ubyte.gz", dir);
    ct_dataset *train = ct_idx_dataset_new(p1, p2, CT_F32);
    snprintf(p1, sizeof p1, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(p2, sizeof p2, "%s/t10k-labels-idx1-ubyte.gz", dir);
    ct_dataset *test = ct_idx_dataset_new(p1, p2, CT_F32);
    if (!train || !test) return fail("loading FashionMNIST");
    ct_manual_seed(0);
    ct_module *net = make_model();
    if (!net) return fail("building the model");
    if (g_dev.type != CT_CPU) {
        char dn[32];
        if (ct_module_to_dev(net, g_dev)) return fail("moving the model to the device");
        printf("device: %s\n", ct_dev_str(g_dev, dn, sizeof dn));
    }
    if (use_compile && !(g_compiled = ct_compile(forward_fn, net, NULL))) return fail("ct_compile");
    int rc = 0;
    if (do_predict) {
        rc = predict(net, test, ckpt, count);
        goto done;
    }
    printf("FashionMNIST: %lld training, %lld test images\n", (long long)ct_dataset_len(train),
           (long long)ct_dataset_len(test));
    ct_module_print(net);
    printf("%lld parameters\n", (long long)ct_module_num_parameters(net, true));
    ct_tensor *params[16];
    int np = ct_module_named_parameters(net, NULL, params, 16);
    ct_optimizer *opt = ct_adam_new(params, np, 1e-3, 0.9, 0.999, 1e-8, 0.0, false, false);
    if (!opt || ct_optim_set_all(opt, "fused", 1)) return fail("creating the optimizer");
    /* float16 gradients underflow without loss scaling (bfloat16 has float32's range) */
    ct_grad_scaler *scaler = ct_grad_scaler_new(65536.0, 2.0, 0.5, 2000, g_amp == CT_F16);
    if (!scaler) return fail("creating the GradScaler");
    if (g_amp != CT_F32) printf("mixed precision: autocast %s, float32 master weights%s\n", ct_dtype_name(g_amp),
                                g_amp == CT_F16 ? ", GradScaler" : "");
    ct_dataloader_opts o = {.batch_size = 128, .shuffle = true, .seed = 0, .num_workers = 2};
    ct_dataloader *dl = ct_dataloader_new(train, &o);
    if (!dl) return fail("creating the DataLoader");
    int64_t nb = ct_dataloader_len(dl);
    for (int ep = 1; ep <= epochs; ep++) {
        ct_module_train(net, true);
        if (ct_dataloader_begin_epoch(dl, ep)) return fail("starting an epoch");
        double t0 = now_s(), loss_sum = 0;
        int64_t correct = 0, seen = 0, bi = 0;
        ct_sample *b;
        int r;
        while ((r = ct_dataloader_next(dl, &b)) == 1) {
            ct_scope s = ct_scope_begin();
            ct_tensor *x = ct_to_dev(ct_sample_get(b, "image"), g_dev), *y = ct_to_dev(ct_sample_get(b, "label"), g_dev);
            ct_tensor *loss = NULL, *logits = forward_loss(net, x, y, &loss);
            ct_optim_zero_grad(opt, true);
            if (!loss || ct_backward(ct_grad_scaler_scale(scaler, loss), NULL, false, false) ||
                ct_grad_scaler_step(scaler, opt, NULL) || ct_grad_scaler_update(scaler))
                return fail("training step");
            int64_t n = ct_numel(y);
            loss_sum += ct_item(loss) * (double)n;
            correct += ct_item_int(ct_sum(ct_eq(ct_argmax(logits, 1, false), y), NULL, 0, false));
            seen += n;
            ct_scope_end(s);
            ct_sample_free(b);
            bi++;
            if (bi % 10 == 0 || bi == nb) {
                int bar = (int)(30 * bi / nb);
                printf("\repoch %d/%d [%.*s%*s] %3d%%  loss %.4f  acc %.4f  %6.0f samples/s", ep, epochs, bar,
                       "==============================", 30 - bar, "", (int)(100 * bi / nb), loss_sum / (double)seen,
                       (double)correct / (double)seen, (double)seen / (now_s() - t0));
                fflush(stdout);
            }
        }
        printf("\n");
        if (r < 0) return fail("reading a batch");
    }
    ct_module_eval(net);
    double acc = evaluate(net, test);
    if (isnan(acc)) return fail("evaluating");
    if (ct_save_module(ckpt, net)) return fail("saving the checkpoint");
    printf("saved %s (try: %s --predict)\n", ckpt, argv[0]);
    printf("test accuracy: %.4f\n", acc);
    ct_dataloader_free(dl);
    ct_optim_free(opt);
    ct_grad_scaler_free(scaler);
done:
    if (g_compiled) {
        ct_compile_stats cs = ct_compiled_stats(g_compiled);
        printf("ct_compile: %lld calls, %lld traces, %lld recompiles, %lld eager calls, %lld kernels built, "
               "%lld loaded, %.0f ms compiling\n", (long long)cs.calls, (long long)cs.traces,
               (long long)cs.recompiles, (long long)cs.eager_calls, (long long)cs.kernels_built,
               (long long)cs.kernels_loaded, cs.compile_ms);
        ct_compiled_free(g_compiled);
    }
    ct_module_release(net);
    ct_dataset_release(train);
    ct_dataset_release(test);
    return rc;
}
