/* blas.h -- private to the CPU backend: OpenBLAS's threads under the
 * determinism switch (ct_use_deterministic_algorithms). */
#ifndef CT_CPU_BLAS_H
#define CT_CPU_BLAS_H

#include <stdbool.h>

/* Around every BLAS call: under ct_use_deterministic_algorithms the call
 * runs on one thread (the OpenMP build of OpenBLAS follows the caller's
 * OpenMP thread count, so a 1-thread ICV is set for the call's duration).
 * begin returns what end needs. */
int ct__blas_guard_begin(void);
void ct__blas_guard_end(int saved);
/* The CPU device's set_deterministic: pins OpenBLAS's own thread count to 1
 * while the switch is on, and restores it when it goes off. */
void ct__blas_set_deterministic(bool on);
/* Sets OpenBLAS's thread count unless deterministic mode pins it to 1;
 * then n is what it returns to when the switch goes off.  For
 * ct_set_num_threads, should it ever drive the BLAS threads. */
void ct__blas_set_num_threads(int n);

#endif
