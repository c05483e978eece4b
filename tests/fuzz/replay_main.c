/* replay_main.c -- runs a fuzz target (LLVMFuzzerTestOneInput) over every
 * file of its corpus directory: the corpus becomes a regression test in
 * ctest (and under ASan).  Built with -DCT_FUZZ=ON and clang, the same
 * target links against libFuzzer instead. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s corpus_dir\n", argv[0]); return 2; }
    DIR *d = opendir(argv[1]);
    if (!d) { fprintf(stderr, "cannot open corpus %s\n", argv[1]); return 2; }
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *buf = malloc(sz > 0 ? (size_t)sz : 1);
        size_t got = fread(buf, 1, (size_t)(sz > 0 ? sz : 0), f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, got);
        free(buf);
        n++;
    }
    closedir(d);
    printf("%s: replayed %d corpus inputs\n", argv[0], n);
    return 0;
}
