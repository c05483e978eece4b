/* blas.c -- the CPU backend's BLAS settings: OpenBLAS's thread count under
 * the determinism switch (the switch itself is core's, src/core/device.c). */
#include <cblas.h>
#include <pthread.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ctorch/ctorch.h"
#include "blas.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_pinned; /* OpenBLAS's threads pinned to 1 by the switch */
static int g_saved;  /* its thread count before the switch went on */

void ct__blas_set_deterministic(bool on) {
    pthread_mutex_lock(&g_mu);
    if (on && !g_pinned) {
        g_saved = openblas_get_num_threads();
        openblas_set_num_threads(1);
        g_pinned = 1;
    } else if (!on && g_pinned) {
        if (g_saved > 0) openblas_set_num_threads(g_saved);
        g_pinned = 0;
    }
    pthread_mutex_unlock(&g_mu);
}

void ct__blas_set_num_threads(int n) {
    if (n <= 0) return;
    pthread_mutex_lock(&g_mu);
    if (g_pinned) g_saved = n;
    else openblas_set_num_threads(n);
    pthread_mutex_unlock(&g_mu);
}

int ct__blas_guard_begin(void) {
#ifdef _OPENMP
    if (!ct_are_deterministic_algorithms_enabled()) return 0;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    return saved;
#else
    return 0;
#endif
}

void ct__blas_guard_end(int saved) {
#ifdef _OPENMP
    if (saved > 0) omp_set_num_threads(saved);
#else
    (void)saved;
#endif
}
