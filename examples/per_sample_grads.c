/* per_sample_grads.c -- DP-SGD on FashionMNIST with per-sample gradients
 * from function transforms (func.h): vmap(grad(loss)).
 *
 * Differentially private SGD (Abadi et al., 2016) needs each sample's own
 * gradient: it clips every per-sample gradient to an L2 norm of at most C,
 * sums the clipped gradients, adds Gaussian noise of standard deviation
 * sigma * C and divides by the batch size.  An ordinary backward pass only
 * gives the batch's summed gradient, so the per-sample gradients come from
 *
 *     ct_vmap(ct_func_grad(loss_of_one_sample))
 *
 * as in torch.func's per-sample-gradient tutorial: loss_of_one_sample(params,
 * x, y) runs the network functionally (ct_func_functional_call) on one
 * image; grad differentiates it with respect to the parameters; vmap maps it
 * over the batch (in_dims: the parameters shared, the images and labels
 * along dim 0), calling each op once for the whole batch.
 *
 *   per_sample_grads [--data DIR] [--model mlp|cnn] [--steps N] [--batch B]
 *                    [--clip C] [--sigma S] [--lr LR] [--check]
 *
 * Prints, every 50 steps, the loss, the per-sample gradient norms (median,
 * largest) and the share of samples clipped, then the test accuracy.
 * --check first compares the batched per-sample gradients of one batch with
 * a loop of single-sample backward passes (the largest difference, and both
 * times).  The model: mlp (784-256-10, the default) or cnn (the `make demo`
 * network without dropout).
 */
#include <ctorch/ctorch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXP 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what) {
    fprintf(stderr, "per_sample_grads: %s: %s\n", what, ct_last_error());
    return 1;
}

static ct_module *make_mlp(void) {
    ct_module *l[4] = {ct_flatten_new(1, -1), ct_linear_new(784, 256, true), ct_relu_new(),
                       ct_linear_new(256, 10, true)};
    ct_module *net = ct_sequential_new(l, 4);
    for (int i = 0; i < 4; i++) ct_module_release(l[i]);
    return net;
}

static ct_module *make_cnn(void) {
    const int64_t k3[2] = {3, 3}, p1[2] = {1, 1}, k2[2] = {2, 2};
    ct_conv_opts pad = {.padding = p1};
    ct_module *l[10] = {ct_conv2d_new(1, 32, k3, &pad), ct_relu_new(),
                        ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                        ct_conv2d_new(32, 64, k3, &pad), ct_relu_new(),
                        ct_max_pool2d_new(k2, NULL, NULL, NULL, false, false),
                        ct_flatten_new(1, -1), ct_linear_new(64 * 7 * 7, 128, true), ct_relu_new(),
                        ct_linear_new(128, 10, true)};
    ct_module *net = ct_sequential_new(l, 10);
    for (int i = 0; i < 10; i++) ct_module_release(l[i]);
    return net;
}

/* What the loss of one sample needs: the functional network and how many
 * parameters come first among its inputs. */
typedef struct {
    ct_func *net;   /* ct_func_functional_call: in = params..., x */
    int np;
} loss_ctx;

/* in = params[0..np), x [1, 28, 28], y (0-dim int64) -> cross-entropy (0-dim) */
static ct_status sample_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *vctx) {
    (void)nin, (void)nout;
    const loss_ctx *c = vctx;
    ct_tensor *fin[MAXP + 1];
    for (int k = 0; k < c->np; k++) fin[k] = in[k];
    /* normalized with the training set's mean and deviation, as a batch of one */
    fin[c->np] = ct_unsqueeze(ct_div_scalar(ct_sub_scalar(in[c->np], 0.2860), 0.3530), 0);
    ct_tensor *logits = NULL;
    ct_status st = ct_func_call(c->net, fin, c->np + 1, &logits, 1);
    if (st) return st;
    out[0] = ct_cross_entropy(logits, ct_unsqueeze(in[c->np + 1], 0), NULL);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* The per-sample gradients of a batch: g[k] is [B, ...shape of params[k]]. */
static ct_status per_sample(ct_func *psg, ct_tensor *const *params, int np, ct_tensor *x, ct_tensor *y,
                            ct_tensor **g) {
    ct_tensor *in[MAXP + 2];
    for (int k = 0; k < np; k++) in[k] = ct_detach(params[k]);
    in[np] = x;
    in[np + 1] = y;
    bool prev = ct_set_grad_enabled(false);
    ct_status st = ct_func_call(psg, in, np + 2, g, np);
    ct_set_grad_enabled(prev);
    return st;
}

/* The same gradients by a loop of single-sample backward passes (--check). */
static ct_status per_sample_loop(ct_module *net, ct_tensor *const *params, int np, ct_tensor *x, ct_tensor *y,
                                 ct_tensor **g) {
    int64_t B = ct_size(x, 0);
    ct_tensor *rows[MAXP][256];
    if (B > 256) return CT_ERR_ARG;
    for (int64_t b = 0; b < B; b++) {
        ct_tensor *xb = ct_unsqueeze(ct_select(x, 0, b), 0);
        ct_tensor *h = ct_div_scalar(ct_sub_scalar(xb, 0.2860), 0.3530);
        ct_tensor *loss = ct_cross_entropy(ct_module_forward1(net, h), ct_unsqueeze(ct_select(y, 0, b), 0), NULL);
        ct_tensor *gb[MAXP];
        if (!loss || ct_autograd_grad(&loss, 1, params, np, NULL, false, false, false, gb)) return ct_last_error_code();
        for (int k = 0; k < np; k++) rows[k][b] = gb[k];
    }
    for (int k = 0; k < np; k++)
        if (!(g[k] = ct_stack(rows[k], (int)B, 0))) return ct_last_error_code();
    return CT_OK;
}

/* DP-SGD's update from per-sample gradients: clip each sample to norm C,
 * sum, add N(0, (sigma C)^2) noise, divide by B; sets each parameter's
 * .grad.  *med / *max / *clipped: the norms' median and largest, the share
 * of samples clipped. */
static ct_status dp_grads(ct_tensor *const *params, int np, ct_tensor **g, double C, double sigma,
                          double *med, double *max, double *clipped) {
    int64_t B = ct_size(g[0], 0);
    ct_tensor *sq = NULL;
    for (int k = 0; k < np; k++) {
        ct_tensor *s = ct_sum(ct_square(ct_flatten(g[k], 1, -1)), (int64_t[]){1}, 1, false); /* [B] */
        sq = sq ? ct_add(sq, s) : s;
    }
    ct_tensor *norm = ct_sqrt(sq);
    ct_tensor *factor = ct_clamp(ct_div(ct_wrap(C), ct_add_scalar(norm, 1e-6)), NAN, 1.0); /* min(1, C/|g|) */
    ct_tensor *sorted = NULL, *order = NULL;
    if (!factor || ct_sort(norm, 0, false, false, &sorted, &order)) return ct_last_error_code();
    *med = ct_item(ct_select(sorted, 0, B / 2));
    *max = ct_item(ct_select(sorted, 0, B - 1));
    *clipped = ct_item(ct_mean(ct_to_dtype(ct_gt(norm, ct_wrap(C)), CT_F32), NULL, 0, false));
    for (int k = 0; k < np; k++) {
        int64_t shape[8] = {B};
        int nd = ct_ndim(g[k]);
        for (int d = 1; d < nd; d++) shape[d] = 1;
        ct_tensor *sum = ct_sum(ct_mul(g[k], ct_reshape(factor, shape, nd)), (int64_t[]){0}, 1, false);
        ct_tensor *noise = ct_mul_scalar(ct_randn_like(sum), sigma * C);
        ct_tensor *grad = ct_div_scalar(ct_add(sum, noise), (double)B);
        if (!grad || ct_set_grad(params[k], grad)) return ct_last_error_code();
    }
    return CT_OK;
}

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
        ct_tensor *y = ct_sample_get(b, "label");
        ct_tensor *h = ct_div_scalar(ct_sub_scalar(ct_sample_get(b, "image"), 0.2860), 0.3530);
        ct_tensor *pred = ct_argmax(ct_module_forward1(net, h), 1, false);
        correct += ct_item_int(ct_sum(ct_eq(pred, y), NULL, 0, false));
        seen += ct_numel(y);
        ct_scope_end(s);
        ct_sample_free(b);
    }
    ct_set_grad_enabled(prev);
    ct_dataloader_free(dl);
    return r < 0 || seen == 0 ? NAN : (double)correct / (double)seen;
}

int main(int argc, char **argv) {
    const char *dir = "/usr/share/datasets/fashion-mnist", *model = "mlp";
    int steps = 400, batch = 64;
    double C = 1.0, sigma = 0.5, lr = 0.5;
    bool check = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--clip") && i + 1 < argc) C = atof(argv[++i]);
        else if (!strcmp(argv[i], "--sigma") && i + 1 < argc) sigma = atof(argv[++i]);
        else if (!strcmp(argv[i], "--lr") && i + 1 < argc) lr = atof(argv[++i]);
        else if (!strcmp(argv[i], "--check")) check = true;
        else {
            fprintf(stderr, "usage: %s [--data DIR] [--model mlp|cnn] [--steps N] [--batch B] [--clip C] "
                            "[--sigma S] [--lr LR] [--check]\n", argv[0]);
            return 2;
        }
    }
    if (steps < 1 || batch < 2 || batch > 256 || !(C > 0) || !(sigma >= 0) || !(lr > 0) ||
        (strcmp(model, "mlp") && strcmp(model, "cnn"))) {
        fprintf(stderr, "per_sample_grads: bad option value (steps >= 1, 2 <= batch <= 256, clip > 0, "
                        "sigma >= 0, lr > 0, model mlp or cnn)\n");
        return 2;
    }
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(p2, sizeof p2, "%s/train-labels-idx1-ubyte.gz", dir);
    ct_dataset *train = ct_idx_dataset_new(p1, p2, CT_F32);
    snprintf(p1, sizeof p1, "%s/t10k-images-idx3-ubyte.gz", dir);
    snprintf(p2, sizeof p2, "%s/t10k-labels-idx1-ubyte.gz", dir);
    ct_dataset *test = ct_idx_dataset_new(p1, p2, CT_F32);
    if (!train || !test) {
        fprintf(stderr, "per_sample_grads: cannot read FashionMNIST in %s (%s); install it with: "
                        "apt-get install dataset-fashion-mnist\n", dir, ct_last_error());
        return 1;
    }
    ct_manual_seed(0);
    ct_module *net = strcmp(model, "cnn") ? make_mlp() : make_cnn();
    if (!net) return fail("building the model");
    const char *names[MAXP];
    ct_tensor *params[MAXP];
    int np = ct_module_named_parameters(net, names, params, MAXP);
    /* the network as a function of its parameters and an image batch */
    ct_sample *pnames = ct_sample_new();
    for (int k = 0; pnames && k < np; k++)
        if (ct_sample_set(pnames, names[k], params[k])) return fail("naming the parameters");
    loss_ctx lc = {ct_func_functional_call(net, pnames, NULL), np};
    ct_func *loss = ct_func_new(sample_loss, &lc);
    int argnums[MAXP];
    for (int k = 0; k < np; k++) argnums[k] = k;
    ct_func_grad_opts go = {argnums, np, false};
    ct_func *grad = ct_func_grad(loss, &go);
    int64_t in_dims[MAXP + 2];
    for (int k = 0; k < np; k++) in_dims[k] = CT_VMAP_NONE;
    in_dims[np] = 0;
    in_dims[np + 1] = 0;
    ct_vmap_opts vo = CT_VMAP_DEFAULT;
    vo.in_dims = in_dims;
    vo.n_in_dims = np + 2;
    ct_func *psg = ct_vmap(grad, &vo);
    if (!lc.net || !loss || !grad || !psg) return fail("building the per-sample gradient function");
    ct_optimizer *opt = ct_sgd_new(params, np, lr, 0.0, 0.0, 0.0, false, false);
    ct_dataloader_opts o = {.batch_size = batch, .shuffle = true, .seed = 0, .drop_last = true};
    ct_dataloader *dl = ct_dataloader_new(train, &o);
    if (!opt || !dl) return fail("creating the optimizer and the DataLoader");
    printf("DP-SGD on FashionMNIST: %s, %lld parameters, batch %d, clip %.3g, noise multiplier %.3g, lr %.3g\n",
           model, (long long)ct_module_num_parameters(net, true), batch, C, sigma, lr);
    int rc = 0, step = 0, epoch = 0;
    double t0 = now_s(), loss_sum = 0, tpsg = 0;
    int nloss = 0;
    while (step < steps) {
        if (ct_dataloader_begin_epoch(dl, epoch++)) return fail("starting an epoch");
        ct_sample *b;
        int r;
        while (step < steps && (r = ct_dataloader_next(dl, &b)) == 1) {
            ct_scope s = ct_scope_begin();
            ct_tensor *x = ct_sample_get(b, "image"), *y = ct_sample_get(b, "label");
            ct_tensor *g[MAXP];
            double ta = now_s();
            if (per_sample(psg, params, np, x, y, g)) { rc = fail("per-sample gradients"); goto out; }
            tpsg += now_s() - ta;
            if (check && step == 0) {
                ct_tensor *gl[MAXP];
                double tb = now_s();
                if (per_sample_loop(net, params, np, x, y, gl)) { rc = fail("the loop of backward passes"); goto out; }
                double tl = now_s() - tb, dmax = 0;
                for (int k = 0; k < np; k++)
                    dmax = fmax(dmax, ct_item(ct_max(ct_abs(ct_sub(g[k], gl[k])))));
                printf("check: per-sample gradients of %d samples, vmap(grad) %.1f ms, a loop of backward "
                       "passes %.1f ms (%.1fx); largest difference %.3g\n", batch, (now_s() - ta - tl) * 1e3,
                       tl * 1e3, tl / (now_s() - ta - tl), dmax);
                ct_vmap_stats vs = ct_vmap_get_stats();
                printf("check: vmap ran %lld ops batched, %lld per sample, %lld calls as a loop of the "
                       "function%s%s\n", (long long)vs.batched_ops, (long long)vs.fallback_ops,
                       (long long)vs.loop_calls, vs.loop_calls ? ": " : "",
                       vs.loop_calls ? ct_vmap_last_loop_reason() : "");
                if (!(dmax < 1e-4)) { fprintf(stderr, "per_sample_grads: the check failed\n"); rc = 1; goto out; }
            }
            double med = 0, mx = 0, clipped = 0;
            if (dp_grads(params, np, g, C, sigma, &med, &mx, &clipped) || ct_optim_step(opt)) {
                rc = fail("the DP-SGD step");
                goto out;
            }
            /* the batch's loss, for the progress line only */
            bool prev = ct_set_grad_enabled(false);
            ct_tensor *h = ct_div_scalar(ct_sub_scalar(x, 0.2860), 0.3530);
            loss_sum += ct_item(ct_cross_entropy(ct_module_forward1(net, h), y, NULL));
            ct_set_grad_enabled(prev);
            nloss++;
            step++;
            if (step % 50 == 0 || step == steps) {
                printf("step %4d  loss %.4f  per-sample grad norm: median %.3f, max %.3f, %3.0f%% clipped  "
                       "%.0f samples/s (per-sample gradients %.1f ms a batch)\n", step, loss_sum / nloss, med, mx,
                       100 * clipped, (double)step * batch / (now_s() - t0), tpsg / step * 1e3);
                fflush(stdout);
                loss_sum = 0;
                nloss = 0;
            }
        out:
            ct_scope_end(s);
            ct_sample_free(b);
            if (rc) goto done;
        }
        if (step < steps && r < 0) { rc = fail("reading a batch"); goto done; }
    }
    {
        double acc = evaluate(net, test);
        if (isnan(acc)) { rc = fail("evaluating"); goto done; }
        printf("test accuracy: %.4f\n", acc);
    }
done:
    ct_dataloader_free(dl);
    ct_optim_free(opt);
    ct_func_free(psg);
    ct_func_free(grad);
    ct_func_free(loss);
    ct_func_free(lc.net);
    ct_sample_free(pnames);
    ct_module_release(net);
    ct_dataset_release(train);
    ct_dataset_release(test);
    return rc;
}
