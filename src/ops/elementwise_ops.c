/* elementwise_ops.c -- the public elementwise functions, each a thin call
 * of the driver (ew.h) with its dtype mode and parameters. */
#include <math.h>

#include "ew.h"

/* out-of-place and in-place pair of a unary op */
#define UNARY_PAIR(NAME, MODE)                                                     \
    ct_tensor *ct_##NAME(ct_tensor *x) {                                           \
        ct_tensor *in[1] = {x};                                                    \
        return ct__ew(CT_OP_##NAME, in, 1, NULL, MODE, NULL);                      \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *x) {                                        \
        ct_tensor *in[1] = {x};                                                    \
        return ct__ew(CT_OP_##NAME, in, 1, NULL, MODE, x);                         \
    }
#define BINARY_PAIR(NAME, MODE)                                                    \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ct__ew(CT_OP_##NAME, in, 2, NULL, MODE, NULL);                      \
    }                                                                              \
    ct_tensor *ct_##NAME##_(ct_tensor *a, ct_tensor *b) {                          \
        ct_tensor *in[2] = {a, b};                                                 \
        return ct__ew(CT_OP_##NAME, in, 2, NULL, MODE, a);                         \
    }
#define COMPARE(NAME)                                                              \
    ct_tensor *ct_##NAME(ct_tensor *a, ct_tensor *b) {                             \
        ct_tensor *in[2] = {a, b};                                                 \
        return ct__ew(CT_OP_##NAME, in, 2, NULL, CT_EW_BOOL_OUT, NULL);            \
    }

UNARY_PAIR(neg, CT_EW_NO_BOOL)
UNARY_PAIR(exp, CT_EW_FLOAT)
BINARY_PAIR(mul, CT_EW_SAME)
BINARY_PAIR(div, CT_EW_FLOAT)
COMPARE(eq) COMPARE(ne) COMPARE(lt) COMPARE(le) COMPARE(gt) COMPARE(ge)

static ct_tensor *add_sub(ct_op op, ct_tensor *a, ct_tensor *b, double alpha, int has_alpha,
                          ct_tensor *inplace) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_args args = ct__args(op);
    args.f[0] = alpha;
    args.i[0] = has_alpha && alpha != 1.0;
    ct_tensor *in[2] = {a, b};
    if (args.i[0]) {
        ct_dtype r = ct_result_type(in, 2);
        if (ct_dtype_is_integral(r, true) && alpha != floor(alpha))
            return ct__error(CT_ERR_ARG, "%s: for integral input tensors, argument alpha must not "
                             "be a floating point number (got %g)", ct__op_info[op].name, alpha);
    }
    if (op == CT_OP_sub && ct_result_type(in, 2) == CT_BOOL)
        return ct__error(CT_ERR_DTYPE, "sub: subtraction with two bool tensors is not supported; "
                         "use logical_xor instead");
    return ct__ew(op, in, 2, &args, CT_EW_SAME, inplace);
}

ct_tensor *ct_add(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_add, a, b, 1, 0, NULL); }
ct_tensor *ct_add_(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_add, a, b, 1, 0, a); }
ct_tensor *ct_sub(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_sub, a, b, 1, 0, NULL); }
ct_tensor *ct_sub_(ct_tensor *a, ct_tensor *b) { return add_sub(CT_OP_sub, a, b, 1, 0, a); }
ct_tensor *ct_add_scaled(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_add, a, b, alpha, 1, NULL);
}
ct_tensor *ct_add_scaled_(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_add, a, b, alpha, 1, a);
}
ct_tensor *ct_sub_scaled(ct_tensor *a, ct_tensor *b, double alpha) {
    return add_sub(CT_OP_sub, a, b, alpha, 1, NULL);
}

/* scalar forms: the scalar is a wrapped number */
#define SCALAR_FORM(FN, CALL)                                                      \
    ct_tensor *FN(ct_tensor *a, double s) {                                        \
        CT_NULLCHECK(a);                                                           \
        ct_tensor *w = ct__wrapped_tmp(s);                                         \
        if (!w) return NULL;                                                       \
        ct_tensor *r = CALL(a, w);                                                 \
        ct_release(w);                                                             \
        return r;                                                                  \
    }
SCALAR_FORM(ct_add_scalar, ct_add)
SCALAR_FORM(ct_sub_scalar, ct_sub)
SCALAR_FORM(ct_mul_scalar, ct_mul)
SCALAR_FORM(ct_div_scalar, ct_div)
SCALAR_FORM(ct_add_scalar_, ct_add_)
SCALAR_FORM(ct_mul_scalar_, ct_mul_)
SCALAR_FORM(ct_eq_scalar, ct_eq)
SCALAR_FORM(ct_gt_scalar, ct_gt)
SCALAR_FORM(ct_lt_scalar, ct_lt)
