/* mlp_by_hand.c -- a two-layer MLP trained on FashionMNIST with the
 * core tensor library alone: the backward pass written by hand, to show
 * what autograd (examples/fashion_mnist.c) does for you.  Reads the IDX
 * files of Debian's dataset-fashion-mnist.
 *
 *   784 -> 256 (ReLU) -> 10, softmax cross-entropy, SGD with momentum,
 *   batch 128, 4 epochs.  Prints loss, accuracy and samples/s per epoch and
 *   a last line "test accuracy: 0.xxxx". */
#include <ctorch/ctorch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads a gzip'ed IDX file of unsigned bytes into a u8 tensor. */
static ct_tensor *read_idx(const char *path) {
    gzFile f = gzopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return NULL; }
    unsigned char hdr[4];
    ct_tensor *t = NULL;
    if (gzread(f, hdr, 4) != 4 || hdr[0] || hdr[1] || hdr[2] != 0x08 || hdr[3] < 1 || hdr[3] > 3) {
        fprintf(stderr, "%s: not an IDX file of unsigned bytes\n", path);
        goto done;
    }
    int nd = hdr[3];
    int64_t shape[3], n = 1;
    for (int i = 0; i < nd; i++) {
        unsigned char b[4];
        if (gzread(f, b, 4) != 4) { fprintf(stderr, "%s: truncated header\n", path); goto done; }
        shape[i] = ((int64_t)b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
        if (shape[i] <= 0 || shape[i] > 100000000 || n > INT64_MAX / shape[i]) {
            fprintf(stderr, "%s: bad dimension\n", path);
            goto done;
        }
        n *= shape[i];
    }
    t = ct_empty(shape, nd, CT_U8);
    if (!t) goto done;
    unsigned char *p = ct_data_ptr(t);
    for (int64_t off = 0; off < n;) {
        int chunk = n - off > (1 << 30) ? (1 << 30) : (int)(n - off);
        int got = gzread(f, p + off, (unsigned)chunk);
        if (got <= 0) { fprintf(stderr, "%s: truncated data\n", path); ct_release(t); t = NULL; goto done; }
        off += got;
    }
done:
    gzclose(f);
    return t;
}

/* [N,28,28] u8 -> [N,784] f32 normalized like torchvision (mean .2860, std .3530) */
static ct_tensor *prep_images(ct_tensor *u8) {
    ct_tensor *x = ct_to_dtype(ct_flatten(u8, 1, -1), CT_F32);
    return ct_div_scalar(ct_sub_scalar(ct_div_scalar(x, 255.0), 0.2860), 0.3530);
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
    int epochs = argc > 2 ? atoi(argv[2]) : 4;
    char path[1024];
    ct_scope top = ct_scope_begin();
    snprintf(path, sizeof path, "%s/train-images-idx3-ubyte.gz", dir);
    ct_tensor *xtr = prep_images(read_idx(path));
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte.gz", dir);
    ct_tensor *ytr = ct_to_dtype(read_idx(path), CT_I64);
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", dir);
    ct_tensor *xte = prep_images(read_idx(path));
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", dir);
    ct_tensor *yte = ct_to_dtype(read_idx(path), CT_I64);
    if (!xtr || !ytr || !xte || !yte) {
        fprintf(stderr, "demo: loading FashionMNIST failed: %s\n", ct_last_error());
        return 1;
    }
    int64_t ntr = ct_size(xtr, 0), nte = ct_size(xte, 0);
    printf("FashionMNIST: %lld training and %lld test images\n", (long long)ntr, (long long)nte);

    /* parameters: Kaiming-uniform-like init as nn.Linear does */
    ct_manual_seed(42);
    const int H = 256, B = 128;
    ct_tensor *w1 = ct_mul_scalar(ct_sub_scalar(ct_rand(CT_SHAPE(784, H), CT_F32), 0.5), 2.0 / sqrt(784.0));
    ct_tensor *b1 = ct_zeros(CT_SHAPE(H), CT_F32);
    ct_tensor *w2 = ct_mul_scalar(ct_sub_scalar(ct_rand(CT_SHAPE(H, 10), CT_F32), 0.5), 2.0 / sqrt((double)H));
    ct_tensor *b2 = ct_zeros(CT_SHAPE(10), CT_F32);
    ct_tensor *params[4] = {w1, b1, w2, b2};
    ct_tensor *vel[4];
    for (int i = 0; i < 4; i++) vel[i] = ct_zeros_like(params[i]);
    const double lr = 0.05, momentum = 0.9;

    for (int ep = 1; ep <= epochs; ep++) {
        double t0 = now_s(), loss_sum = 0;
        int64_t correct = 0, seen = 0;
        ct_tensor *perm = ct_randperm(ntr, CT_I64);
        int64_t nb = ntr / B;
        for (int64_t bi = 0; bi < nb; bi++) {
            ct_scope s = ct_scope_begin();
            ct_tensor *idx = ct_narrow(perm, 0, bi * B, B);
            ct_tensor *x = ct_index_select(xtr, 0, idx);
            ct_tensor *y = ct_index_select(ytr, 0, idx);
            /* forward */
            ct_tensor *z1 = ct_addmm(b1, x, w1, 1.0, 1.0);
            ct_tensor *h = ct_relu(z1);
            ct_tensor *logits = ct_addmm(b2, h, w2, 1.0, 1.0);
            ct_tensor *logp = ct_log_softmax(logits, 1);
            ct_tensor *onehot = ct_to_dtype(ct_one_hot(y, 10), CT_F32);
            ct_tensor *loss = ct_neg(ct_mean(ct_sum(ct_mul(logp, onehot), (const int64_t[]){1}, 1, false), NULL, 0, false));
            /* backward by hand */
            ct_tensor *dlogits = ct_div_scalar(ct_sub(ct_exp(logp), onehot), (double)B);
            ct_tensor *grads[4];
            grads[2] = ct_matmul(ct_t(h), dlogits);
            grads[3] = ct_sum(dlogits, (const int64_t[]){0}, 1, false);
            ct_tensor *dh = ct_mul(ct_matmul(dlogits, ct_t(w2)), ct_to_dtype(ct_gt_scalar(z1, 0), CT_F32));
            grads[0] = ct_matmul(ct_t(x), dh);
            grads[1] = ct_sum(dh, (const int64_t[]){0}, 1, false);
            /* SGD with momentum (in place on the parameters) */
            for (int i = 0; i < 4; i++) {
                ct_add_(ct_mul_scalar_(vel[i], momentum), grads[i]);
                ct_add_scaled_(params[i], vel[i], -lr);
            }
            if (!loss) { fprintf(stderr, "demo: step failed: %s\n", ct_last_error()); return 1; }
            loss_sum += ct_item(loss) * B;
            ct_tensor *pred = ct_argmax(logits, 1, false);
            correct += ct_item_int(ct_sum(ct_eq(pred, y), NULL, 0, false));
            seen += B;
            ct_scope_end(s);
            if (bi % 47 == 0 || bi == nb - 1) {
                int bar = (int)(30 * (bi + 1) / nb);
                printf("\repoch %d [%.*s%*s] loss %.4f acc %.4f %.0f samples/s", ep, bar,
                       "==============================", 30 - bar, "", loss_sum / seen,
                       (double)correct / seen, seen / (now_s() - t0));
                fflush(stdout);
            }
        }
        printf("\n");
    }
    /* test accuracy */
    ct_scope s = ct_scope_begin();
    ct_tensor *logits = ct_addmm(b2, ct_relu(ct_addmm(b1, xte, w1, 1.0, 1.0)), w2, 1.0, 1.0);
    double acc = ct_item(ct_mean(ct_to_dtype(ct_eq(ct_argmax(logits, 1, false), yte), CT_F32), NULL, 0, false));
    ct_scope_end(s);
    ct_scope_end(top);
    if (isnan(acc)) { fprintf(stderr, "demo: evaluation failed: %s\n", ct_last_error()); return 1; }
    printf("test accuracy: %.4f\n", acc);
    return 0;
}
