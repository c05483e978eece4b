/* reduce_avx2.c -- the reduce kernels of reduce.c built for AVX2 + FMA (CMakeLists.txt
 * gives this file the AVX2 flags; see cpu_caps.h). */
#define CT_ISA_NAME(f) f##_avx2
#include "reduce.c"
