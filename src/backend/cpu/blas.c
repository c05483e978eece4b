/* blas.c -- the CPU backend's BLAS settings: OpenBLAS's thread count under
 * the determinism switch (the switch itself is core's, src/core/device.c),
 * and for products too small to pay for waking a sleeping thread. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ctorch/ctorch.h"
#include "../../core/tensor_impl.h"
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

/* Under OMP_WAIT_POLICY=passive (or GOMP_SPINCOUNT=0) libgomp's idle
 * threads sleep at once, and every parallel region first wakes them: on
 * this project's 2-vCPU VMs 20-70 us at best (an empty region: 0.4 us on
 * one thread, 20 us on two; a 64K-float update 23 us on one thread, 91 on
 * two), 100-250 us a region under load.  A loop of per-sample backward
 * passes of the FashionMNIST CNN (bench_func psg_loop) spent 2/3 of its
 * time there: 140 ms under passive against 45 ms under active, the regions
 * opened by oneDNN's and OpenBLAS's calls on one image.  So under the
 * passive policy a product below CT_PASSIVE_MIN_MFLOP (default 8) MFLOP
 * runs on the calling thread; with spinning threads (the default policy)
 * a region costs ~1 us and nothing changes. */
static double g_small_flops = -1;
static pthread_once_t g_small_once = PTHREAD_ONCE_INIT;

static void small_init(void) {
    int passive = ct__omp_passive();
    const char *m = getenv("CT_PASSIVE_MIN_MFLOP");
    double mf = m && *m ? atof(m) : 8.0;
    g_small_flops = passive && mf > 0 ? mf * 1e6 : 0;
}

int ct__par_too_small(double flops) {
    pthread_once(&g_small_once, small_init);
    return flops < g_small_flops;
}

double ct__par_small_reload(void) {
    pthread_once(&g_small_once, small_init);
    ct__omp_passive_reload();
    small_init();
    return g_small_flops;
}

int ct__blas_guard_begin(double flops) {
#ifdef _OPENMP
    if (!ct_are_deterministic_algorithms_enabled() && !ct__par_too_small(flops)) return 0;
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
