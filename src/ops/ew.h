/* ew.h -- private: the device-independent driver of elementwise ops. */
#ifndef CT_EW_H
#define CT_EW_H

#include "../core/tensor_impl.h"

/* How an elementwise op picks dtypes. */
enum {
    CT_EW_SAME = 0,     /* compute and output in the promoted dtype */
    CT_EW_FLOAT = 1,    /* integers/bool promote to the default float */
    CT_EW_BOOL_OUT = 2, /* compute in the promoted dtype, output bool */
    CT_EW_INT_ONLY = 4, /* integers and bool only (bitwise ops) */
    CT_EW_NO_BOOL = 8,  /* bool input not allowed (neg, sub) */
    CT_EW_NO_COMPLEX = 16,
    CT_EW_REAL_OUT = 32 /* complex input gives its real dtype (abs) */
};

/* Runs elementwise op `op` over ins (broadcast), writing a new tensor, or
 * into `inplace` (which must have the broadcast shape and accept the result
 * dtype) when non-NULL.  a may be NULL. */
ct_tensor *ct__ew(ct_op op, ct_tensor *const *ins, int nin, const ct_args *a, unsigned mode,
                  ct_tensor *inplace);
/* A wrapped-number tensor (not in any scope; caller releases). */
ct_tensor *ct__wrapped_tmp(double v);
/* torch.can_cast */
bool ct__can_cast(ct_dtype from, ct_dtype to);
/* args with op set and everything else zero */
static inline ct_args ct__args(ct_op op) {
    ct_args a;
    memset(&a, 0, sizeof a);
    a.op = op;
    return a;
}

#endif
