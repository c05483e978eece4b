/* bn_avx2.c -- the batch-norm kernels of bn.c built for AVX2 + FMA (a target
 * pragma, so the OpenMP loop bodies get it too); bn.c's entry points call
 * them when ct__cpu_cap() reports AVX2. */
#ifndef __clang__ /* clang ignores it: CMakeLists.txt passes -mavx2 -mfma for this file */
#pragma GCC target("avx2,fma")
#endif
#define CT_ISA_NAME(f) f##_avx2
#include "bn.c"
