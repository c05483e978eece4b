/* scope.c -- per-thread scopes: every tensor an op returns joins the
 * innermost scope; ct_scope_end releases them all. */
#include "tensor_impl.h"

typedef struct scope_frame {
    ct_tensor **items;
    size_t n, cap;
} scope_frame;

static _Thread_local scope_frame *tl_frames;
static _Thread_local int tl_depth, tl_cap;

static void thread_cleanup(void) {
    /* Frames left open at thread exit are the caller's bug; nothing to do
     * portably here -- the frame memory is freed when depth returns to 0. */
}

ct_scope ct_scope_begin(void) {
    (void)thread_cleanup;
    if (tl_depth == tl_cap) {
        int ncap = tl_cap ? tl_cap * 2 : 8;
        scope_frame *nf = realloc(tl_frames, (size_t)ncap * sizeof *nf);
        if (!nf) {
            ct__error(CT_ERR_OOM, "scope_begin: out of memory");
            return (ct_scope){tl_depth};
        }
        tl_frames = nf;
        tl_cap = ncap;
    }
    tl_frames[tl_depth] = (scope_frame){NULL, 0, 0};
    return (ct_scope){tl_depth++};
}

void ct_scope_end(ct_scope s) {
    if (s.depth < 0) return;
    while (tl_depth > s.depth) {
        scope_frame *f = &tl_frames[--tl_depth];
        /* release in reverse order of creation */
        for (size_t i = f->n; i-- > 0;) ct_release(f->items[i]);
        free(f->items);
        f->items = NULL;
        f->n = f->cap = 0;
    }
    if (tl_depth == 0) {
        free(tl_frames);
        tl_frames = NULL;
        tl_cap = 0;
    }
}

static int frame_push(scope_frame *f, ct_tensor *t) {
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 16;
        ct_tensor **ni = realloc(f->items, ncap * sizeof *ni);
        if (!ni) return -1;
        f->items = ni;
        f->cap = ncap;
    }
    f->items[f->n++] = t;
    return 0;
}

ct_tensor *ct__register(ct_tensor *t) {
    if (!t || tl_depth == 0) return t;
    if (frame_push(&tl_frames[tl_depth - 1], t) != 0) {
        ct_release(t);
        return ct__error(CT_ERR_OOM, "scope: out of memory registering a tensor");
    }
    return t;
}

int ct__scope_take(ct_tensor *t) {
    if (tl_depth == 0) return 0;
    scope_frame *f = &tl_frames[tl_depth - 1];
    for (size_t i = f->n; i-- > 0;) {
        if (f->items[i] == t) {
            memmove(&f->items[i], &f->items[i + 1], (f->n - i - 1) * sizeof *f->items);
            f->n--;
            return 1;
        }
    }
    return 0;
}

ct_tensor *ct_keep(ct_tensor *t) {
    if (!t) return NULL;
    if (!ct__scope_take(t)) ct_retain(t); /* not ours to move: take a new reference */
    if (tl_depth >= 2) {
        if (frame_push(&tl_frames[tl_depth - 2], t) != 0) {
            ct_release(t);
            return ct__error(CT_ERR_OOM, "keep: out of memory");
        }
    }
    return t;
}
