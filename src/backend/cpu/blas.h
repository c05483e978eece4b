/* blas.h -- private to the CPU backend: OpenBLAS's threads under the
 * determinism switch (ct_use_deterministic_algorithms). */
#ifndef CT_CPU_BLAS_H
#define CT_CPU_BLAS_H

#include <stdbool.h>

/* Whether a product of `flops` is too small to pay for waking the other
 * threads: only under OMP_WAIT_POLICY=passive (GOMP_SPINCOUNT=0), below
 * CT_PASSIVE_MIN_MFLOP (8) MFLOP; see blas.c. */
int ct__par_too_small(double flops);
/* Reads the environment again (tests); returns the flop threshold, 0 when
 * nothing is too small. */
double ct__par_small_reload(void);
/* Around every BLAS call (flops: its size): under
 * ct_use_deterministic_algorithms, or when ct__par_too_small(flops), the
 * call runs on one thread (the OpenMP build of OpenBLAS follows the
 * caller's OpenMP thread count, so a 1-thread ICV is set for the call's
 * duration).  begin returns what end needs. */
int ct__blas_guard_begin(double flops);
void ct__blas_guard_end(int saved);
/* The CPU device's set_deterministic: pins OpenBLAS's own thread count to 1
 * while the switch is on, and restores it when it goes off. */
void ct__blas_set_deterministic(bool on);
/* Sets OpenBLAS's thread count unless deterministic mode pins it to 1;
 * then n is what it returns to when the switch goes off.  For
 * ct_set_num_threads, should it ever drive the BLAS threads. */
void ct__blas_set_num_threads(int n);

#endif
