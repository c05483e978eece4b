/* embed.c -- sentence embeddings with all-MiniLM-L6-v2 (or any BERT
 * sentence-transformers folder), like
 *     SentenceTransformer(MODEL_DIR).encode(sentences)
 *
 *   embed MODEL_DIR [--file F] [--cosine] [--batch N] sentence...
 *
 * Sentences come from the command line and/or a file (one per line).  Prints
 * each sentence's embedding (first values and norm, or all values with
 * --full), or with --cosine the matrix of cosine similarities.  Nothing is
 * downloaded: MODEL_DIR must already hold config.json, model.safetensors and
 * vocab.txt, e.g. the all-MiniLM-L6-v2 folder that `sh scripts/install-deps.sh
 * --model` (run by make test) links at .deps/all-MiniLM-L6-v2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: %s MODEL_DIR [--file F] [--cosine] [--full] [--batch N] sentence...\n"
            "  MODEL_DIR  a sentence-transformers folder (config.json, model.safetensors, vocab.txt),\n"
            "             e.g. .deps/all-MiniLM-L6-v2 in the source tree, which\n"
            "             `sh scripts/install-deps.sh --model` installs (make test runs it)\n"
            "  --file F   also read sentences from F, one per line\n"
            "  --cosine   print the cosine-similarity matrix instead of the embeddings\n"
            "  --full     print every value of each embedding\n"
            "  --batch N  sentences per forward pass (default 32)\n",
            prog);
}

static int add_text(char ***texts, int *n, int *cap, const char *s) {
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        char **nt = realloc(*texts, sizeof *nt * (size_t)nc);
        if (!nt) return -1;
        *texts = nt;
        *cap = nc;
    }
    (*texts)[*n] = strdup(s);
    return (*texts)[(*n)++] ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argv[0]);
        return argc < 2 ? 2 : 0;
    }
    const char *dir = argv[1], *file = NULL;
    bool cosine = false, full = false;
    long batch = 32;
    char **texts = NULL;
    int n = 0, cap = 0, rc = 1;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--cosine")) cosine = true;
        else if (!strcmp(argv[i], "--full")) full = true;
        else if (!strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
            char *end;
            batch = strtol(argv[++i], &end, 10);
            if (*end || batch < 1) {
                fprintf(stderr, "embed: --batch needs a positive integer, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "embed: unknown option '%s'\n", argv[i]);
            usage(argv[0]);
            return 2;
        } else if (add_text(&texts, &n, &cap, argv[i])) {
            fprintf(stderr, "embed: out of memory\n");
            return 1;
        }
    }
    if (file) {
        FILE *f = fopen(file, "r");
        if (!f) {
            perror(file);
            goto out;
        }
        char *line = NULL;
        size_t lcap = 0;
        ssize_t len;
        while ((len = getline(&line, &lcap, f)) >= 0) {
            while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
            if (add_text(&texts, &n, &cap, line)) break;
        }
        free(line);
        fclose(f);
    }
    if (n == 0) {
        fprintf(stderr, "embed: no sentences (give them on the command line or with --file)\n");
        usage(argv[0]);
        rc = 2;
        goto out;
    }
    ct_sentence_encoder *enc = ct_sentence_encoder_load(dir);
    if (!enc) {
        fprintf(stderr, "embed: %s\n", ct_last_error());
        fprintf(stderr, "embed: MODEL_DIR must be a local folder; install all-MiniLM-L6-v2 into "
                        ".deps/all-MiniLM-L6-v2 with `sh scripts/install-deps.sh --model`\n");
        goto out;
    }
    ct_scope s = ct_scope_begin();
    ct_tensor *emb = ct_sentence_encoder_encode(enc, (const char *const *)texts, n, batch);
    if (!emb) {
        fprintf(stderr, "embed: %s\n", ct_last_error());
    } else if (cosine) {
        /* rows are unit vectors: cosine = emb @ emb^T (normalized again in
         * case the model does not normalize) */
        ct_tensor *u = ct_normalize(emb, 2.0, 1, 1e-12);
        ct_tensor *sim = ct_contiguous(ct_matmul(u, ct_t(u)));
        if (!sim) {
            fprintf(stderr, "embed: %s\n", ct_last_error());
        } else {
            const float *p = ct_data_ptr(sim);
            printf("cosine similarity (%d sentences, all-pairs):\n     ", n);
            for (int j = 0; j < n; j++) printf("  [%2d]", j);
            printf("\n");
            for (int i = 0; i < n; i++) {
                printf("[%2d] ", i);
                for (int j = 0; j < n; j++) printf(" %6.3f", p[i * n + j]);
                printf("   %.60s\n", texts[i]);
            }
            rc = 0;
        }
    } else {
        int64_t d = ct_size(emb, 1);
        const float *p = ct_data_ptr(emb);
        for (int i = 0; i < n; i++) {
            double nrm = 0;
            for (int64_t j = 0; j < d; j++) nrm += (double)p[i * d + j] * p[i * d + j];
            printf("[%d] %s\n    dim %lld, norm %.6f: [", i, texts[i], (long long)d, nrm > 0 ? sqrt(nrm) : 0.0);
            int64_t show = full ? d : (d < 8 ? d : 8);
            for (int64_t j = 0; j < show; j++) printf("%s%.6f", j ? ", " : "", p[i * d + j]);
            printf("%s]\n", show < d ? ", ..." : "");
        }
        rc = 0;
    }
    ct_scope_end(s);
    ct_sentence_encoder_free(enc);
out:
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    return rc;
}
