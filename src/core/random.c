/* random.c -- the default generator's state: a seed and a counter offset
 * for the Philox 4x32-10 generator (random_impl.h).  Draws reserve
 * disjoint counter ranges under a lock, so concurrent draws from different
 * threads never overlap and each is reproducible given its offset. */
#include <pthread.h>

#include "random_impl.h"

/* PyTorch's default seed (c10::detail::default_rng_seed_val). */
#define CT_DEFAULT_SEED 67280421310721ull

static pthread_mutex_t g_rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_seed = CT_DEFAULT_SEED;
static uint64_t g_offset = 0;

void ct_manual_seed(uint64_t seed) {
    pthread_mutex_lock(&g_rng_lock);
    g_seed = seed;
    g_offset = 0;
    pthread_mutex_unlock(&g_rng_lock);
}

uint64_t ct_initial_seed(void) {
    pthread_mutex_lock(&g_rng_lock);
    uint64_t s = g_seed;
    pthread_mutex_unlock(&g_rng_lock);
    return s;
}

void ct__rng_reserve(uint64_t nblocks, uint64_t *seed, uint64_t *offset) {
    pthread_mutex_lock(&g_rng_lock);
    *seed = g_seed;
    *offset = g_offset;
    g_offset += nblocks;
    pthread_mutex_unlock(&g_rng_lock);
}
