/* text_data.h -- what the GPT examples (char_gpt.c, gpt2_train.c) share:
 * a monotonic clock, a seeded random stream, reading a whole stream, the
 * King James Bible from Debian's bible-kjv package, and loading a model's
 * own keys out of a checkpoint that also holds other entries.
 * Header-only: each example is one file plus this one. */
#ifndef CT_EXAMPLES_TEXT_DATA_H
#define CT_EXAMPLES_TEXT_DATA_H

#include <ctorch/amp.h>
#include <ctorch/ctorch.h>
#include <ctorch/io.h>
#include <ctorch/models.h>
#include <ctorch/optim.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double ex_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the examples' own random stream for picking windows */
static inline uint64_t ex_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* All of f, malloc'd (NULL when memory runs out); *n its length. */
static inline char *ex_read_all(FILE *f, size_t *n) {
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t k;
    while ((k = fread(buf + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
    }
    *n = len;
    return buf;
}

/* The KJV text, one verse per line without its reference ("Ge1:1 In the
 * beginning..." -> "In the beginning..."), read through the package's
 * `bible` program (it stores the text in its own compressed format).
 * When the package is missing it says how to install it and returns
 * NULL: it installs nothing itself.  prog names the example in messages. */
static inline char *ex_load_bible(const char *prog, size_t *n) {
    if (access("/usr/bin/bible", X_OK) != 0) {
        fprintf(stderr, "%s: the KJV text comes from Debian's bible-kjv package, which is not installed.\n"
                        "  Install it with `CT_WITH_DATA=1 sh scripts/install-deps.sh` (or, as root, "
                        "`apt-get install bible-kjv`),\n  or train on any text file with --data FILE.\n", prog);
        return NULL;
    }
    FILE *p = popen("/usr/bin/bible -f gen1:1-rev22:21 </dev/null", "r");
    if (!p) {
        fprintf(stderr, "%s: running bible: ", prog);
        perror(NULL);
        return NULL;
    }
    size_t len = 0;
    char *raw = ex_read_all(p, &len);
    int rc = pclose(p);
    if (!raw || rc != 0 || len < 1000000) {
        fprintf(stderr, "%s: `bible -f gen1:1-rev22:21` failed (status %d, %zu bytes)\n", prog, rc, len);
        free(raw);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && raw[e] != '\n') e++;
        size_t s = i;
        while (s < e && raw[s] != ' ') s++;
        if (s < e) s++;
        else s = i;
        memmove(raw + o, raw + s, e - s);
        o += e - s;
        raw[o++] = '\n';
        i = e + 1;
    }
    *n = o;
    return raw;
}

/* Linear warmup over the first `warmup` steps, then cosine from lr0 down
 * to lr0/10 as progress (0..1) goes by. */
static inline double ex_lr(int64_t step, int64_t warmup, double lr0, double progress) {
    return step < warmup ? lr0 * (double)(step + 1) / (double)warmup
                         : lr0 * (0.1 + 0.45 * (1.0 + cos(M_PI * fmin(progress, 1.0))));
}

/* B random windows of T + 1 tokens of tok[0..ntrain): inputs into x,
 * targets (shifted by one) into y, both [B, T] */
static inline void ex_windows(uint64_t *rng, const int64_t *tok, int64_t ntrain, int64_t T, int64_t B, int64_t *x,
                              int64_t *y) {
    for (int64_t r = 0; r < B; r++) {
        int64_t st = (int64_t)(ex_splitmix(rng) % (uint64_t)(ntrain - T - 1));
        memcpy(x + r * T, tok + st, sizeof(int64_t) * (size_t)T);
        memcpy(y + r * T, tok + st + 1, sizeof(int64_t) * (size_t)T);
    }
}

/* autocast to amp for a forward pass (nothing for float32), and off again */
static inline ct_status ex_amp_begin(ct_dtype amp) { return amp == CT_F32 ? CT_OK : ct_autocast_enter(CT_CPU, amp); }
static inline ct_status ex_amp_end(ct_dtype amp) { return amp == CT_F32 ? CT_OK : ct_autocast_exit(); }

/* Mean GPT-2 loss (per token) over nb batches of B fixed windows of T + 1
 * tokens, evenly spaced over val[0..nval), in eval mode without grad and
 * (amp not float32) under autocast to amp; NAN on an error. */
static inline double ex_eval_loss(ct_module *m, const int64_t *val, int64_t nval, int64_t T, int64_t B, int64_t nb,
                                  ct_dtype amp) {
    if (ex_amp_begin(amp)) return NAN;
    bool prev = ct_set_grad_enabled(false);
    ct_module_eval(m);
    int64_t *x = malloc(sizeof(int64_t) * (size_t)(B * T)), *y = malloc(sizeof(int64_t) * (size_t)(B * T));
    double tot = x && y ? 0 : NAN;
    int64_t nwin = B * nb, span = nval - T - 1;
    for (int64_t b = 0; b < nb && x && y; b++) {
        for (int64_t r = 0; r < B; r++) {
            int64_t st = (b * B + r) * span / nwin;
            memcpy(x + r * T, val + st, sizeof(int64_t) * (size_t)T);
            memcpy(y + r * T, val + st + 1, sizeof(int64_t) * (size_t)T);
        }
        ct_scope s = ct_scope_begin();
        ct_tensor *loss = NULL;
        if (ct_gpt2_forward(m, ct_from_array(x, CT_SHAPE(B, T), CT_I64), ct_from_array(y, CT_SHAPE(B, T), CT_I64),
                            NULL, NULL, &loss)) {
            ct_scope_end(s);
            tot = NAN;
            break;
        }
        tot += ct_item(loss);
        ct_scope_end(s);
    }
    free(x);
    free(y);
    ct_module_train(m, true);
    ct_set_grad_enabled(prev);
    if (ex_amp_end(amp)) return NAN;
    return tot / (double)nb;
}

/* n tokens sampled after ids[0..np) (ct_gpt2_generate; the result, [1,
 * np + n], in the caller's scope, or NULL), *dt the seconds it took */
static inline ct_tensor *ex_generate(ct_module *m, const int64_t *ids, int64_t np, int64_t n, double temperature,
                                     int64_t top_k, uint64_t seed, bool cache, double *dt) {
    ct_gpt2_generate_opts go = {.max_new_tokens = n, .temperature = temperature, .top_k = top_k, .seed = seed,
                                .use_cache = cache};
    double t0 = ex_now_s();
    ct_tensor *out = ct_gpt2_generate(m, ct_from_array(ids, CT_SHAPE(1, np), CT_I64), &go);
    *dt = ex_now_s() - t0;
    return out;
}

/* The model's own keys out of a checkpoint sample that also holds other
 * entries (optimizer state, metadata, a tokenizer); a missing key is an
 * error that names it. */
static inline ct_status ex_load_weights(const char *prog, ct_module *m, const ct_sample *all) {
    ct_sample *own = ct_module_state_dict(m), *sd = ct_sample_new();
    ct_status st = own && sd ? CT_OK : ct_last_error_code();
    for (int i = 0; own && sd && !st && i < ct_sample_count(own); i++) {
        ct_tensor *t = ct_sample_get(all, ct_sample_name(own, i));
        if (!t) {
            fprintf(stderr, "%s: checkpoint lacks %s\n", prog, ct_sample_name(own, i));
            st = CT_ERR_FORMAT;
            break;
        }
        st = ct_sample_set(sd, ct_sample_name(own, i), t);
    }
    if (!st) st = ct_module_load_state_dict(m, sd, true);
    ct_sample_free(own);
    ct_sample_free(sd);
    return st;
}

#endif
