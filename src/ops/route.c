/* route.c -- the per-thread implementation overrides of route.h. */
#include <stdatomic.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "../core/tensor_impl.h"
#include "route.h"

_Thread_local signed char ct__route[CT_ROUTE_NKIND];
_Thread_local bool ct__route_seen[CT_ROUTE_NKIND];
int (*ct__conv_blocked_pays)(const struct ct_p_conv *pc);

const char *ct__route_name(int kind, int route) {
    static const char *const names[CT_ROUTE_NKIND][3] = {{"rule", "blas", "own"}, {"rule", "ctorch", "onednn"}};
    if (kind < 0 || kind >= CT_ROUTE_NKIND || route < 0 || route > 2) return "?";
    return names[kind][route];
}

/* ---- torch.set_float32_matmul_precision ---------------------------------- */
static atomic_int g_precision; /* 0 highest (the default), 1 high, 2 medium */
static const char *const k_prec[3] = {"highest", "high", "medium"};

ct_status ct_set_float32_matmul_precision(const char *precision) {
    if (!precision)
        return ct__error_status(CT_ERR_ARG, "set_float32_matmul_precision: precision is NULL "
                                "(expected \"highest\", \"high\" or \"medium\")");
    for (int k = 0; k < 3; k++)
        if (!strcmp(precision, k_prec[k])) {
            atomic_store(&g_precision, k);
            return CT_OK;
        }
    return ct__error_status(CT_ERR_ARG, "set_float32_matmul_precision: invalid precision \"%s\" "
                            "(expected \"highest\", \"high\" or \"medium\")", precision);
}

const char *ct_get_float32_matmul_precision(void) { return k_prec[atomic_load(&g_precision)]; }

int ct__matmul_precision(void) { return atomic_load(&g_precision); }
