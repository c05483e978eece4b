/* ew_vec_avx512.c -- the vectorized elementwise loops for AVX-512 F/BW/DQ/VL
 * (CMake compiles this file with those -m flags); used only when the CPU
 * has them (cpu_caps.h). */
#define CT_VW 16
#define CT_SL(f) Sleef_##f##f16_u10avx512f
#define CT_SL35(f) Sleef_##f##f16_u35avx512f
#define CT_VTAB ct__ew_vtab_avx512
#define CT_VTAB_NAME "avx512"
#include "ew_vec_impl.h"
