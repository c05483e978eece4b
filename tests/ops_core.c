/* ops_core.c -- fixture runners for core ops (add/mul/exp/neg/compare). */
#include "fixture.h"

#define R1(NAME, CALL)                                                          \
    static ct_status run_##NAME(const fx_case *c, ct_tensor *const *in, ct_tensor **out) { \
        (void)c;                                                                \
        out[0] = CALL;                                                          \
        return out[0] ? CT_OK : ct_last_error_code();                           \
    }

R1(add, ct_add(in[0], in[1]))
R1(mul, ct_mul(in[0], in[1]))
R1(exp, ct_exp(in[0]))
R1(neg, ct_neg(in[0]))
R1(lt, ct_lt(in[0], in[1]))

const fx_op fx_ops_core[] = {
    {"add", run_add, 0, 0}, {"mul", run_mul, 0, 0}, {"exp", run_exp, 0, 0},
    {"neg", run_neg, 0, 0}, {"lt", run_lt, 0, 0},
};
const int fx_nops_core = sizeof fx_ops_core / sizeof fx_ops_core[0];
