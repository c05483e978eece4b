/* sbuf.c -- a growing string buffer for reprs and messages. */
#include <stdio.h>

#include "tensor_impl.h"

void ct__sbuf_put(ct_sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) { b->oom = 1; va_end(ap2); return; }
    if (b->n + (size_t)k + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *ns = realloc(b->s, nc);
        if (!ns) { b->oom = 1; va_end(ap2); return; }
        b->s = ns;
        b->cap = nc;
    }
    vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap2);
    va_end(ap2);
    b->n += (size_t)k;
}
