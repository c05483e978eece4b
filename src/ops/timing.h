/* timing.h -- the small statistics the compiler's and the optimizers'
 * timings share (ct_compile's probes and max-autotune, ct_optim_compile's
 * probe): a monotonic clock and medians. */
#ifndef CT_OPS_TIMING_H
#define CT_OPS_TIMING_H

/* CLOCK_MONOTONIC in milliseconds. */
double ct__now_ms(void);

/* The median of x[0..n) (n >= 1; x is sorted in place): the middle
 * element, or the mean of the two middle ones when n is even. */
double ct__median(double *x, int n);

/* Samples a[k] and b[k] taken side by side (neighbours in time), n <= 64:
 * returns the median of the ratios a[k] / b[k] and gives each side's own
 * median in *ma, *mb (either may be NULL).  a and b are left as they are.
 * Pairing cancels a shift of the machine's speed that lands on both
 * samples of a pair, which a ratio of the two medians does not. */
double ct__paired_ratio(const double *a, const double *b, int n, double *ma, double *mb);

#endif
