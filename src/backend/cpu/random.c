/* random.c (cpu) -- kernels of the random family. */
#include "../../ops/iter.h"

void ct__cpu_register_random(ct_kernel_fn *t) { (void)t; }
