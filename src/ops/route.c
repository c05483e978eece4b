/* route.c -- the per-thread implementation overrides of route.h. */
#include "route.h"

_Thread_local signed char ct__route[CT_ROUTE_NKIND];
_Thread_local bool ct__route_seen[CT_ROUTE_NKIND];

const char *ct__route_name(int kind, int route) {
    static const char *const names[CT_ROUTE_NKIND][3] = {{"rule", "blas", "own"}, {"rule", "ctorch", "onednn"}};
    if (kind < 0 || kind >= CT_ROUTE_NKIND || route < 0 || route > 2) return "?";
    return names[kind][route];
}
