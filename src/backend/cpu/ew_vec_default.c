/* ew_vec_default.c -- the vectorized elementwise loops for baseline x86-64
 * (SSE2; CMake compiles this file with -march=x86-64). */
#define CT_VW 4
#define CT_SL(f) Sleef_##f##f4_u10sse2
#define CT_SL35(f) Sleef_##f##f4_u35sse2
#define CT_VTAB ct__ew_vtab_default
#define CT_VTAB_NAME "default"
#include "ew_vec_impl.h"
