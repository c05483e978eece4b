/* bench_dataloader.c -- DataLoader samples/s on FashionMNIST (60000 train
 * images, Debian's dataset-fashion-mnist) with RandomCrop(28, padding 4) +
 * Normalize, batch 128, shuffled, 0 and 2 worker threads, beside torch's
 * DataLoader doing the same (bench/dataloader_ref.py, run here via popen).
 * Prints ms per epoch (median of REPS epochs, min..max) and samples/s, and
 * merges rows dataloader_fmnist_w0 / _w2 into build/bench.json
 * (ratio = ours / torch in time).
 * Usage: bench_dataloader [bench.json] [reps] [data_dir] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "../bench/bench_util.h"

typedef struct {
    ct_dataset *base;
    ct_transform *tf;
} aug_ds;

static int64_t aug_len(void *self) { return ct_dataset_len(((aug_ds *)self)->base); }
static ct_status aug_get(void *self, int64_t i, ct_sample *out) {
    aug_ds *a = self;
    ct_status st = ct_dataset_get(a->base, i, out);
    if (st) return st;
    ct_scope s = ct_scope_begin();
    st = ct_sample_set(out, "image", ct_transform_apply(a->tf, ct_sample_get(out, "image")));
    ct_scope_end(s);
    return st;
}
static const ct_dataset_vtable aug_vt = {.len = aug_len, .get = aug_get};

int main(int argc, char **argv) {
    const char *json = argc > 1 ? argv[1] : "build/bench.json";
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    const char *root = argc > 3 ? argv[3] : "/usr/share/datasets/fashion-mnist";
    if (reps < 1 || reps > 64) reps = 3;
    char ip[1024], lp[1024];
    snprintf(ip, sizeof ip, "%s/train-images-idx3-ubyte.gz", root);
    snprintf(lp, sizeof lp, "%s/train-labels-idx1-ubyte.gz", root);
    ct_dataset *base = ct_idx_dataset_new(ip, lp, CT_F32);
    if (!base) {
        fprintf(stderr, "bench_dataloader: %s (install Debian's dataset-fashion-mnist)\n", ct_last_error());
        return 1;
    }
    double mean = 0.2860, std = 0.3530;
    int64_t pad[4] = {4, 4, 4, 4};
    ct_transform *ts[2] = {ct_transform_random_crop(28, 28, pad, false, 0.0, CT_PADDING_CONSTANT),
                           ct_transform_normalize(&mean, &std, 1)};
    aug_ds a = {base, ct_transform_compose(ts, 2)};
    if (!a.tf) { fprintf(stderr, "bench_dataloader: %s\n", ct_last_error()); return 1; }
    ct_dataset *ds = ct_dataset_new(&aug_vt, &a);
    int64_t n = ct_dataset_len(ds);

    /* the reference, in the same run */
    double ref[2][3] = {{0}};
    char cmd[2048], src[1024];
    snprintf(src, sizeof src, "%s", __FILE__);
    char *slash = strrchr(src, '/');
    if (slash) *slash = 0;
    else snprintf(src, sizeof src, "bench");
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/dataloader_ref.py %d %s", src, reps, root);
    FILE *p = popen(cmd, "r");
    char line[512];
    int got = 0;
    while (p && fgets(line, sizeof line, p)) {
        int w;
        double med, mn, mx;
        if (sscanf(line, "dataloader_fmnist_w%d %lf %lf %lf", &w, &med, &mn, &mx) == 4 && (w == 0 || w == 2)) {
            ref[w / 2][0] = med, ref[w / 2][1] = mn, ref[w / 2][2] = mx;
            got++;
        }
    }
    if (p) pclose(p);
    if (got != 2) fprintf(stderr, "bench_dataloader: the torch reference did not run (%s)\n", cmd);

    printf("%-24s %28s %28s %7s\n", "case (ms/epoch, 60000)", "ctorch median (min..max)", "torch median (min..max)", "ratio");
    for (int k = 0; k < 2; k++) {
        int nw = k * 2;
        ct_dataloader_opts o = {.batch_size = 128, .shuffle = true, .seed = 0, .num_workers = nw};
        ct_dataloader *dl = ct_dataloader_new(ds, &o);
        double t[64];
        for (int r = 0; r < reps; r++) {
            double t0 = bench_now_ms();
            if (ct_dataloader_begin_epoch(dl, r)) { fprintf(stderr, "%s\n", ct_last_error()); return 1; }
            ct_sample *b;
            int64_t seen = 0;
            int rc;
            while ((rc = ct_dataloader_next(dl, &b)) == 1) {
                seen += ct_size(ct_sample_get(b, "image"), 0);
                ct_sample_free(b);
            }
            if (rc < 0 || seen != n) { fprintf(stderr, "bench_dataloader: %s\n", ct_last_error()); return 1; }
            t[r] = bench_now_ms() - t0;
        }
        ct_dataloader_free(dl);
        bench_stat s = bench_stats(t, reps);
        char name[64];
        snprintf(name, sizeof name, "dataloader_fmnist_w%d", nw);
        printf("%-24s %9.1f (%7.1f..%7.1f) %9.1f (%7.1f..%7.1f) %7.3f   %.0f vs %.0f samples/s\n", name, s.med,
               s.min, s.max, ref[k][0], ref[k][1], ref[k][2], got == 2 ? s.med / ref[k][0] : 0.0,
               (double)n / s.med * 1e3, got == 2 ? (double)n / ref[k][0] * 1e3 : 0.0);
        if (got == 2) {
            char extra[160];
            snprintf(extra, sizeof extra, "\"samples_per_s\": %.0f, \"torch_samples_per_s\": %.0f",
                     (double)n / s.med * 1e3, (double)n / ref[k][0] * 1e3);
            bench_json_add(json, name, s.med, ref[k][0], "ms/epoch", extra);
        }
    }
    ct_dataset_release(ds);
    ct_transform_free(a.tf);
    ct_dataset_release(base);
    return 0;
}
