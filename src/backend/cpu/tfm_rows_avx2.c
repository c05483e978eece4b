/* tfm_rows_avx2.c -- the Transformer fast path's row loops of tfm_rows.c
 * built for AVX2 + FMA (a target pragma, so the OpenMP loop bodies get it
 * too); tfm_rows.c's entry points call them when ct__cpu_cap() reports AVX2. */
#ifndef __clang__ /* clang ignores it: CMakeLists.txt passes -mavx2 -mfma for this file */
#pragma GCC target("avx2,fma")
#endif
#define CT_ISA_NAME(f) f##_avx2
#include "tfm_rows.c"
