/* alloc.c -- aligned host allocation for tensor storage. */
#include "tensor_impl.h"

void *ct__malloc_aligned(size_t n) {
    void *p = NULL;
    if (n == 0) n = 1;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (rounded < n) return NULL;
    if (posix_memalign(&p, 64, rounded) != 0) return NULL;
    return p;
}

void ct__free_aligned(void *p, void *ctx) {
    (void)ctx;
    free(p);
}
