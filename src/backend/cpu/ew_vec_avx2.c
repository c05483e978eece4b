/* ew_vec_avx2.c -- the vectorized elementwise loops for AVX2 + FMA (CMake
 * compiles this file with -mavx2 -mfma -mf16c); used only when the CPU has
 * them (cpu_caps.h). */
#define CT_VW 8
#define CT_SL(f) Sleef_##f##f8_u10avx2
#define CT_SL35(f) Sleef_##f##f8_u35avx2
#define CT_VTAB ct__ew_vtab_avx2
#define CT_VTAB_NAME "avx2"
#define CT_ERF_FMA 1
#include "ew_vec_impl.h"
