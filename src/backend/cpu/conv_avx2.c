/* conv_avx2.c -- the conv-family kernels of conv.c (im2col/col2im, pooling,
 * interpolation, the GEMM drivers) built for AVX2 + FMA (CMakeLists.txt gives
 * this file the AVX2 flags; see cpu_caps.h). */
#define CT_ISA_NAME(f) f##_avx2
#include "conv.c"
