/* timing.c -- see timing.h. */
#include "timing.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double ct__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double ct__median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_dbl);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double ct__paired_ratio(const double *a, const double *b, int n, double *ma, double *mb) {
    double r[64], s[64];
    if (n > 64) n = 64;
    for (int k = 0; k < n; k++) r[k] = a[k] / b[k];
    if (ma) {
        memcpy(s, a, sizeof(double) * (size_t)n);
        *ma = ct__median(s, n);
    }
    if (mb) {
        memcpy(s, b, sizeof(double) * (size_t)n);
        *mb = ct__median(s, n);
    }
    return ct__median(r, n);
}
