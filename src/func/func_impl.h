/* func_impl.h -- private: the ct_func object shared by the transforms. */
#ifndef CT_FUNC_IMPL_H
#define CT_FUNC_IMPL_H

#include <stdatomic.h>
#include "ctorch/func.h"

struct ct_func {
    atomic_long refcount;
    ct_fn fn;
    void *ctx;
    void (*free_ctx)(void *ctx);
};

#endif
