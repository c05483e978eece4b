/* char_gpt.c -- a character-level GPT-2 trained from scratch on the King
 * James Bible, then sampled.
 *
 * Data: the text of Debian's bible-kjv package, read through its `bible`
 * program (the package stores the text compressed in its own format):
 * `bible -f gen1:1-rev22:21` prints one verse per line ("Ge1:1 In the
 * beginning ..."); the references are stripped, so the model sees the
 * verses, one per line (4,137,850 characters, 63 distinct).  When
 * `bible` is missing the example says how to install it
 * (`CT_WITH_DATA=1 sh scripts/install-deps.sh`) and stops: it installs
 * nothing itself.  --data FILE trains on any text file.
 * The first 90% of the text trains, the last 10% validates.
 *
 * Model: ct_gpt2_lm_head_model_new (HF GPT-2 architecture and keys), by
 * default 4 layers, n_embd 128, 4 heads, context 64, no dropout (0.8 M
 * parameters); batch 16, lr 2e-3.  On the 2-core test machine, shared with
 * other jobs (load average about 20), 10 minutes reached validation loss
 * 1.46 nats/char at about 4,500 tokens/s (below 1.8 after 3 minutes).
 * Training: AdamW (betas 0.9/0.99, weight decay 0.1 on matrices only),
 * linear warmup then cosine decay to lr/10 over the run (the run's length
 * is --steps, or --time-limit seconds of training), gradient clipping at
 * norm 1, random windows of the training text.  One progress line (\r)
 * shows loss, learning rate and tokens/s; every --eval-every seconds the
 * validation loss (fixed windows of the validation text) is printed and a
 * checkpoint is written atomically (--checkpoint FILE; by default
 * char_gpt.safetensors next to the program, build/ in the source tree): one safetensors file holding the
 * model under HF's keys (transformer.wte.weight, ...), the optimizer state
 * ("optim.*") and the run's metadata ("meta.*": step, elapsed time,
 * configuration, vocabulary).  At the end it prints the final validation
 * loss (in nats per character) and a sample of generated text.
 * --compile runs each training step's forward pass (the model and its
 * loss) through ct_compile (include/ctorch/compile.h); what the compiler
 * did is printed at the end (ct_compile_explain's first line).
 * --dtype bf16 (or f16) trains and evaluates with automatic mixed
 * precision (amp.h): the model's forward and loss under ct_autocast, AdamW
 * on float32 master weights; f16 adds a GradScaler (the gradients are
 * unscaled before clipping).  The default f32 is the float32 run.
 *
 *   char_gpt [--time-limit S] [--steps N] [--checkpoint FILE] [--resume]
 *            [--data FILE] [--layers L] [--embd C] [--heads H] [--ctx T]
 *            [--batch B] [--lr LR] [--warmup N] [--eval-every S] [--threads N]
 *            [--seed S] [--sample N] [--compile] [--dtype f32|bf16|f16]
 *   char_gpt --generate N [--checkpoint FILE] [--prompt TEXT]
 *            [--temperature T] [--top-k K] [--seed S] [--no-cache]
 */
#include <ctorch/amp.h>
#include <ctorch/compile.h>
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

#include "text_data.h"

typedef struct opts {
    double time_limit, lr, eval_every, temperature;
    int64_t steps, layers, embd, heads, ctx, batch, warmup, top_k, generate, sample;
    int threads, resume, no_cache, compile;
    uint64_t seed;
    const char *ckpt, *data, *prompt;
} opts;

static int fail(const char *what) {
    fprintf(stderr, "\nchar_gpt: %s: %s\n", what, ct_last_error());
    return 1;
}

/* ---- the compiled step ---- */
/* The forward pass and the loss as a function of tensors for ct_compile:
 * in = {input ids [B, T], targets [B, T]}, out = {the loss}. */
static ct_status gpt_loss_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin;
    (void)nout;
    return ct_gpt2_forward(ctx, in[0], in[1], NULL, NULL, &out[0]);
}

/* ---- checkpoints ------------------------------------------------------------ */
typedef struct meta {
    int64_t step, vocab, n_positions, n_embd, n_layer, n_head;
    double elapsed, best_val;
    unsigned char chars[256];
} meta;

static ct_status save_checkpoint(const char *path, ct_module *m, ct_optimizer *opt, const meta *mt) {
    ct_scope s = ct_scope_begin();
    ct_sample *all = ct_module_state_dict(m);
    ct_sample *os = opt ? ct_optim_state_dict(opt) : NULL;
    ct_status st = all && (!opt || os) ? CT_OK : ct_last_error_code();
    char key[256];
    for (int i = 0; os && !st && i < ct_sample_count(os); i++) {
        snprintf(key, sizeof key, "optim.%s", ct_sample_name(os, i));
        st = ct_sample_set(all, key, ct_sample_at(os, i));
    }
    if (!st) {
        int64_t cfg[6] = {mt->step, mt->vocab, mt->n_positions, mt->n_embd, mt->n_layer, mt->n_head};
        double f[2] = {mt->elapsed, mt->best_val};
        ct_tensor *c = ct_from_array(cfg, CT_SHAPE(6), CT_I64);
        ct_tensor *ft = ct_from_array(f, CT_SHAPE(2), CT_F64);
        ct_tensor *ch = ct_from_array(mt->chars, CT_SHAPE(mt->vocab), CT_U8);
        if (!c || !ft || !ch) st = ct_last_error_code();
        if (!st) st = ct_sample_set(all, "meta.config", c);
        if (!st) st = ct_sample_set(all, "meta.times", ft);
        if (!st) st = ct_sample_set(all, "meta.vocab", ch);
    }
    if (!st) st = ct_safetensors_save(path, all, (const char *[]){"format", "pt", NULL});
    ct_sample_free(os);
    ct_sample_free(all);
    ct_scope_end(s);
    return st;
}

/* Reads meta from a checkpoint (the sample stays open for the weights). */
static ct_sample *read_checkpoint(const char *path, meta *mt) {
    ct_sample *all = ct_safetensors_load(path);
    if (!all) return NULL;
    ct_tensor *c = ct_sample_get(all, "meta.config"), *ft = ct_sample_get(all, "meta.times");
    ct_tensor *ch = ct_sample_get(all, "meta.vocab");
    if (!c || !ft || !ch || ct_numel(c) != 6 || ct_get_dtype(c) != CT_I64 || ct_numel(ft) != 2 ||
        ct_get_dtype(ft) != CT_F64 || ct_get_dtype(ch) != CT_U8 || ct_numel(ch) < 1 || ct_numel(ch) > 256) {
        fprintf(stderr, "char_gpt: %s is not a char_gpt checkpoint (meta.* entries missing or malformed)\n", path);
        ct_sample_free(all);
        return NULL;
    }
    const int64_t *cfg = ct_data_ptr(c);
    const double *f = ct_data_ptr(ft);
    mt->step = cfg[0];
    mt->vocab = cfg[1];
    mt->n_positions = cfg[2];
    mt->n_embd = cfg[3];
    mt->n_layer = cfg[4];
    mt->n_head = cfg[5];
    mt->elapsed = f[0];
    mt->best_val = f[1];
    if (mt->vocab != ct_numel(ch)) {
        fprintf(stderr, "char_gpt: %s: vocabulary size %lld does not match meta.vocab (%lld)\n", path,
                (long long)mt->vocab, (long long)ct_numel(ch));
        ct_sample_free(all);
        return NULL;
    }
    memcpy(mt->chars, ct_data_ptr(ch), (size_t)mt->vocab);
    return all;
}

static ct_status load_optim(ct_optimizer *opt, const ct_sample *all) {
    ct_sample *os = ct_sample_new();
    ct_status st = os ? CT_OK : ct_last_error_code();
    for (int i = 0; !st && i < ct_sample_count(all); i++)
        if (!strncmp(ct_sample_name(all, i), "optim.", 6))
            st = ct_sample_set(os, ct_sample_name(all, i) + 6, ct_sample_at(all, i));
    if (!st) st = ct_optim_load_state_dict(opt, os);
    ct_sample_free(os);
    return st;
}

/* ---- generation ---------------------------------------------------------------- */
static int generate(ct_module *m, const meta *mt, const opts *o, const char *prompt, int64_t n) {
    int idx[256];
    for (int i = 0; i < 256; i++) idx[i] = -1;
    for (int64_t i = 0; i < mt->vocab; i++) idx[mt->chars[i]] = (int)i;
    size_t pl = strlen(prompt);
    int64_t *ids = malloc(sizeof(int64_t) * (pl ? pl : 1));
    int64_t np = 0;
    for (size_t i = 0; i < pl; i++)
        if (idx[(unsigned char)prompt[i]] >= 0) ids[np++] = idx[(unsigned char)prompt[i]];
    if (np == 0) ids[np++] = idx['\n'] >= 0 ? idx['\n'] : 0;
    ct_scope s = ct_scope_begin();
    double dt;
    ct_tensor *out = ex_generate(m, ids, np, n, o->temperature, o->top_k, o->seed, !o->no_cache, &dt);
    free(ids);
    if (!out) {
        ct_scope_end(s);
        return fail("generating");
    }
    const int64_t *t = ct_data_ptr(out);
    for (int64_t i = 0; i < ct_size(out, 1); i++) putchar(mt->chars[t[i]]);
    printf("\n[%lld characters in %.2f s, %.0f chars/s, temperature %g, top-k %lld, %s]\n", (long long)n, dt,
           (double)n / dt, o->temperature, (long long)o->top_k, o->no_cache ? "no KV cache" : "KV cache");
    ct_scope_end(s);
    return 0;
}

static ct_dtype g_amp = CT_F32; /* --dtype: autocast for the forward passes (text_data.h) */

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--time-limit S] [--steps N] [--checkpoint FILE] [--resume] [--data FILE]\n"
            "          [--layers L] [--embd C] [--heads H] [--ctx T] [--batch B] [--lr LR] [--warmup N]\n"
            "          [--eval-every S] [--threads N] [--seed S] [--sample N] [--compile] [--dtype f32|bf16|f16]\n"
            "       %s --generate N [--checkpoint FILE] [--prompt TEXT] [--temperature T] [--top-k K]\n"
            "          [--seed S] [--no-cache]\n",
            argv0, argv0);
}

int main(int argc, char **argv) {
    opts o = {.time_limit = 600, .lr = 2e-3, .eval_every = 60, .temperature = 0.8, .steps = 0, .layers = 4,
              .embd = 128, .heads = 4, .ctx = 64, .batch = 16, .warmup = 50, .top_k = 20, .generate = 0,
              .sample = 600, .threads = 0, .seed = 1337, .ckpt = NULL,
              .prompt = "And God said"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has = i + 1 < argc;
#define ARG(name) (!strcmp(a, name) && has && ++i)
        if (ARG("--time-limit")) o.time_limit = atof(argv[i]);
        else if (ARG("--steps")) o.steps = atoll(argv[i]);
        else if (ARG("--checkpoint")) o.ckpt = argv[i];
        else if (ARG("--data")) o.data = argv[i];
        else if (ARG("--layers")) o.layers = atoll(argv[i]);
        else if (ARG("--embd")) o.embd = atoll(argv[i]);
        else if (ARG("--heads")) o.heads = atoll(argv[i]);
        else if (ARG("--ctx")) o.ctx = atoll(argv[i]);
        else if (ARG("--batch")) o.batch = atoll(argv[i]);
        else if (ARG("--lr")) o.lr = atof(argv[i]);
        else if (ARG("--warmup")) o.warmup = atoll(argv[i]);
        else if (ARG("--eval-every")) o.eval_every = atof(argv[i]);
        else if (ARG("--threads")) o.threads = atoi(argv[i]);
        else if (ARG("--seed")) o.seed = strtoull(argv[i], NULL, 10);
        else if (ARG("--sample")) o.sample = atoll(argv[i]);
        else if (ARG("--generate")) o.generate = atoll(argv[i]);
        else if (ARG("--prompt")) o.prompt = argv[i];
        else if (ARG("--temperature")) o.temperature = atof(argv[i]);
        else if (ARG("--top-k")) o.top_k = atoll(argv[i]);
        else if (!strcmp(a, "--resume")) o.resume = 1;
        else if (!strcmp(a, "--no-cache")) o.no_cache = 1;
        else if (!strcmp(a, "--compile")) o.compile = 1;
        else if (ARG("--dtype") && (!strcmp(argv[i], "f32") || !strcmp(argv[i], "bf16") || !strcmp(argv[i], "f16")))
            g_amp = !strcmp(argv[i], "bf16") ? CT_BF16 : !strcmp(argv[i], "f16") ? CT_F16 : CT_F32;
        else {
            usage(argv[0]);
            return 2;
        }
#undef ARG
    }
    /* the default checkpoint lies next to the program, not in the current directory */
    char default_ckpt[4096];
    if (!o.ckpt) {
        ssize_t k = readlink("/proc/self/exe", default_ckpt, sizeof default_ckpt - 32);
        if (k <= 0) k = (ssize_t)strlen(strncpy(default_ckpt, argv[0], sizeof default_ckpt - 33));
        default_ckpt[k] = 0;
        char *slash = strrchr(default_ckpt, '/');
        snprintf(slash ? slash + 1 : default_ckpt, 32, "char_gpt.safetensors");
        o.ckpt = default_ckpt;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows up in logs as it happens */
    if (o.threads > 0) ct_set_num_threads(o.threads);
    ct_manual_seed(o.seed);

    /* ---- --generate: sample from a checkpoint ---- */
    if (o.generate > 0) {
        meta mt;
        ct_sample *all = read_checkpoint(o.ckpt, &mt);
        if (!all) return ct_last_error_code() ? fail("reading the checkpoint") : 1;
        ct_gpt2_config c = ct_gpt2_small_config();
        c.vocab_size = mt.vocab;
        c.n_positions = mt.n_positions;
        c.n_embd = mt.n_embd;
        c.n_layer = mt.n_layer;
        c.n_head = mt.n_head;
        ct_module *m = ct_gpt2_lm_head_model_new(&c);
        if (!m || ex_load_weights("char_gpt", m, all)) return fail("loading the model");
        ct_sample_free(all);
        printf("checkpoint %s: step %lld, %.0f s of training, validation loss %.4f\n", o.ckpt, (long long)mt.step,
               mt.elapsed, mt.best_val);
        int rc = generate(m, &mt, &o, o.prompt, o.generate);
        ct_module_release(m);
        return rc;
    }

    /* ---- data ---- */
    size_t n = 0;
    char *text = NULL;
    if (o.data) {
        FILE *f = fopen(o.data, "rb");
        if (!f) {
            perror(o.data);
            return 1;
        }
        text = ex_read_all(f, &n);
        fclose(f);
    } else {
        text = ex_load_bible("char_gpt", &n);
    }
    if (!text || n < (size_t)(20 * (o.ctx + 1))) {
        fprintf(stderr, "char_gpt: no usable text (%zu characters)\n", n);
        free(text);
        return 1;
    }
    meta mt;
    memset(&mt, 0, sizeof mt);
    mt.best_val = NAN;
    ct_sample *ck = NULL;
    if (o.resume) {
        ck = read_checkpoint(o.ckpt, &mt);
        if (!ck) {
            free(text);
            return ct_last_error_code() ? fail("reading the checkpoint") : 1;
        }
    } else {
        bool seen[256] = {0};
        for (size_t i = 0; i < n; i++) seen[(unsigned char)text[i]] = true;
        for (int c = 0; c < 256; c++)
            if (seen[c]) mt.chars[mt.vocab++] = (unsigned char)c;
        mt.n_positions = o.ctx;
        mt.n_embd = o.embd;
        mt.n_layer = o.layers;
        mt.n_head = o.heads;
    }
    int idx[256];
    for (int i = 0; i < 256; i++) idx[i] = -1;
    for (int64_t i = 0; i < mt.vocab; i++) idx[mt.chars[i]] = (int)i;
    int64_t *tok = malloc(sizeof(int64_t) * n);
    if (!tok) return 1;
    for (size_t i = 0; i < n; i++) {
        if (idx[(unsigned char)text[i]] < 0) {
            fprintf(stderr, "char_gpt: character 0x%02x is not in the checkpoint's vocabulary\n", (unsigned char)text[i]);
            return 1;
        }
        tok[i] = idx[(unsigned char)text[i]];
    }
    free(text);
    int64_t ntrain = (int64_t)n * 9 / 10, nval = (int64_t)n - ntrain;
    const int64_t *val = tok + ntrain;
    int64_t T = mt.n_positions, B = o.batch;

    /* ---- model and optimizer ---- */
    ct_gpt2_config c = ct_gpt2_small_config();
    c.vocab_size = mt.vocab;
    c.n_positions = T;
    c.n_embd = mt.n_embd;
    c.n_layer = mt.n_layer;
    c.n_head = mt.n_head;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0;
    ct_module *m = ct_gpt2_lm_head_model_new(&c);
    if (!m) return fail("building the model");
    ct_tensor *ps[512], *decay[512], *nodecay[512];
    int np = ct_module_named_parameters(m, NULL, ps, 512), nd = 0, nn = 0;
    for (int i = 0; i < np && i < 512; i++) {
        if (ct_ndim(ps[i]) >= 2) decay[nd++] = ps[i];
        else nodecay[nn++] = ps[i];
    }
    ct_optimizer *opt = ct_adamw_new(decay, nd, o.lr, 0.9, 0.99, 1e-8, 0.1, false, false);
    if (!opt || ct_optim_add_param_group(opt, nodecay, nn, (const char *[]){"weight_decay"}, (const double[]){0.0}, 1) < 0 ||
        ct_optim_set_all(opt, "fused", 1))
        return fail("building the optimizer");
    /* --dtype f16: dynamic loss scaling (a pass-through otherwise) */
    ct_grad_scaler *scaler = ct_grad_scaler_new(65536.0, 2.0, 0.5, 2000, g_amp == CT_F16);
    if (!scaler) return fail("building the GradScaler");
    if (g_amp != CT_F32) printf("mixed precision: autocast %s, float32 master weights\n", ct_dtype_name(g_amp));
    if (ck) {
        if (ex_load_weights("char_gpt", m, ck) || load_optim(opt, ck)) return fail("resuming from the checkpoint");
        ct_sample_free(ck);
        printf("resumed %s at step %lld (%.0f s trained, validation loss %.4f)\n", o.ckpt, (long long)mt.step,
               mt.elapsed, mt.best_val);
    }
    printf("char_gpt: %zu characters (%lld train, %lld val), vocabulary %lld; GPT-2 %lld layers, n_embd %lld, "
           "%lld heads, context %lld, %lld parameters; batch %lld, lr %g, %d threads\n",
           n, (long long)ntrain, (long long)nval, (long long)mt.vocab, (long long)c.n_layer, (long long)c.n_embd,
           (long long)c.n_head, (long long)T, (long long)ct_module_num_parameters(m, false), (long long)B, o.lr,
           ct_get_num_threads());
    const int64_t eval_batches = 8; /* periodic; the final one uses 8x more */
    ct_compiled *step_fn = NULL;
    if (o.compile && !(step_fn = ct_compile(gpt_loss_fn, m, NULL))) return fail("compiling the training step");

    /* ---- training ---- */
    uint64_t rng = o.seed ^ (uint64_t)mt.step * 0x9E3779B97F4A7C15ull;
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)(B * T)), *yb = malloc(sizeof(int64_t) * (size_t)(B * T));
    double t_start = ex_now_s(), elapsed0 = mt.elapsed, last_eval = t_start, tok_t0 = t_start;
    int64_t tok_count = 0;
    double loss_ema = NAN;
    bool tty = isatty(1);
    for (;;) {
        double el = elapsed0 + (ex_now_s() - t_start);
        double progress = o.steps > 0 ? (double)mt.step / (double)o.steps : el / o.time_limit;
        if (progress >= 1.0) break;
        /* warmup, then cosine from lr to lr/10 */
        double lr = ex_lr(mt.step, o.warmup, o.lr, progress);
        if (ct_optim_set_all(opt, "lr", lr)) return fail("setting the learning rate");
        ex_windows(&rng, tok, ntrain, T, B, xb, yb);
        ct_scope s = ct_scope_begin();
        ct_optim_zero_grad(opt, true);
        ct_tensor *loss = NULL;
        ct_tensor *xy[2] = {ct_from_array(xb, CT_SHAPE(B, T), CT_I64), ct_from_array(yb, CT_SHAPE(B, T), CT_I64)};
        if (ex_amp_begin(g_amp) ||
            (step_fn ? ct_compiled_call(step_fn, xy, 2, &loss, 1)
                     : ct_gpt2_forward(m, xy[0], xy[1], NULL, NULL, &loss)) || ex_amp_end(g_amp) ||
            ct_backward(ct_grad_scaler_scale(scaler, loss), NULL, false, false) ||
            ct_grad_scaler_unscale_(scaler, opt) || ct_clip_grad_norm_(ps, np, 1.0, 2.0, false, NULL) ||
            ct_grad_scaler_step(scaler, opt, NULL) || ct_grad_scaler_update(scaler))
            return fail("training step");
        double lv = ct_item(loss);
        ct_scope_end(s);
        mt.step++;
        tok_count += B * T;
        loss_ema = isnan(loss_ema) ? lv : 0.9 * loss_ema + 0.1 * lv;
        double now = ex_now_s(), tps = (double)tok_count / (now - tok_t0);
        if (tty || mt.step % 50 == 0 || mt.step <= 3) {
            int w = 24, done = (int)(w * fmin(progress, 1.0));
            printf("%sstep %6lld [%.*s%*s] %3.0f%%  loss %.4f  lr %.2e  %6.0f tok/s  %4.0f s%s",
                   tty ? "\r" : "", (long long)mt.step, done, "########################", w - done, "",
                   100 * progress, loss_ema, lr, tps, elapsed0 + now - t_start, tty ? "" : "\n");
            fflush(stdout);
        }
        if (now - last_eval >= o.eval_every) {
            double vl = ex_eval_loss(m, val, nval, T, B, eval_batches, g_amp);
            mt.elapsed = elapsed0 + ex_now_s() - t_start;
            mt.best_val = vl;
            printf("%sstep %6lld  %5.0f s  train loss %.4f  val loss %.4f  (%.0f tok/s)\n", tty ? "\n" : "",
                   (long long)mt.step, mt.elapsed, loss_ema, vl, tps);
            if (save_checkpoint(o.ckpt, m, opt, &mt)) return fail("saving the checkpoint");
            last_eval = ex_now_s();
            /* evaluation and saving are not training time for the tokens/s figure */
            tok_t0 += last_eval - now;
        }
    }
    mt.elapsed = elapsed0 + ex_now_s() - t_start;
    double t_eval = ex_now_s();
    double vl = ex_eval_loss(m, val, nval, T, B, 8 * eval_batches, g_amp);
    mt.best_val = vl;
    printf("%sfinal: step %lld, %.0f s of training, train loss %.4f, validation loss %.4f nats/char "
           "(%lld windows of %lld; eval %.1f s)\n",
           tty ? "\n" : "", (long long)mt.step, mt.elapsed, loss_ema, vl, (long long)(8 * eval_batches * B),
           (long long)T, ex_now_s() - t_eval);
    if (save_checkpoint(o.ckpt, m, opt, &mt)) return fail("saving the checkpoint");
    printf("saved %s (try: %s --generate 500 --checkpoint %s)\n", o.ckpt, argv[0], o.ckpt);
    if (step_fn) {
        char *ex = ct_compile_explain(step_fn);
        if (ex) {
            char *nl = strchr(ex, '\n');
            if (nl) *nl = 0;
            printf("compiled step: %s\n", ex);
        }
        free(ex);
        ct_compiled_free(step_fn);
    }
    int rc = o.sample > 0 ? generate(m, &mt, &o, o.prompt, o.sample) : 0;
    free(xb);
    free(yb);
    free(tok);
    ct_optim_free(opt);
    ct_grad_scaler_free(scaler);
    ct_module_release(m);
    return rc;
}
