/* alloc.c -- host memory for tensor storage.
 *
 * Small blocks come from posix_memalign (64-byte aligned).  Large blocks
 * (>= 1 MiB) are rounded up to 2 MiB, backed by transparent huge pages and
 * kept in a size-keyed cache when freed: a training loop that frees and
 * re-allocates the same large temporaries every step reuses warm memory
 * instead of paying first-touch page faults (measured: ~11 us per fresh
 * 4 KiB page) on every step.  A request takes the smallest cached block
 * that fits (up to twice its size), so near sizes share memory.  The cache holds at most CT_CACHE_MAX bytes;
 * ct_empty_cache() hands it back to the system.  Free a block with
 * ct__free_aligned(p, (void *)(uintptr_t)n) where n is the size asked for.
 *
 * Medium blocks (64 KiB .. 1 MiB: a [128, 512] float32 activation) are
 * rounded up to a multiple of 64 KiB and kept on per-size free lists of at
 * most CT_MID_DEPTH blocks each (at most ~70 MB idle in all): glibc maps
 * such blocks with mmap and unmaps them on free unless told otherwise
 * (torch's benchmark setting GLIBC_TUNABLES=...mmap_max=0 does exactly
 * that), so every op of a training step paid fresh page faults. */
#include <pthread.h>
#include <sys/mman.h>

#include "tensor_impl.h"

#define CT_LARGE (1u << 20)
#define CT_HUGE (2u << 20)
#define CT_CACHE_SLOTS 64
#define CT_CACHE_MAX ((size_t)2 << 30)

typedef struct { void *p; size_t n; } cblock;
static cblock g_cache[CT_CACHE_SLOTS];
static int g_ncache;
static size_t g_cached;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* A small header before large blocks remembers their size. */
#define HDR 64

#define CT_MID_MIN (64u << 10)
#define CT_MID_STEP (64u << 10)
#define CT_MID_CLASSES (CT_LARGE / CT_MID_STEP) /* 64 KiB .. 1 MiB */
#define CT_MID_DEPTH 8
static void *g_mid[CT_MID_CLASSES][CT_MID_DEPTH];
static int g_nmid[CT_MID_CLASSES];

static size_t mid_class(size_t n) { return (n + CT_MID_STEP - 1) / CT_MID_STEP - 1; }

void *ct__malloc_aligned(size_t n) {
    void *p = NULL;
    if (n == 0) n = 1;
    if (n >= CT_MID_MIN && n < CT_LARGE) {
        size_t c = mid_class(n);
        pthread_mutex_lock(&g_mu);
        if (g_nmid[c] > 0) p = g_mid[c][--g_nmid[c]];
        pthread_mutex_unlock(&g_mu);
        if (p) return p;
        if (posix_memalign(&p, 64, (c + 1) * CT_MID_STEP) != 0) return NULL;
        return p;
    }
    if (n < CT_LARGE) {
        size_t rounded = (n + 63) & ~(size_t)63;
        if (rounded < n) return NULL;
        if (posix_memalign(&p, 64, rounded) != 0) return NULL;
        return p;
    }
    if (n > SIZE_MAX - CT_HUGE - HDR) return NULL;
    size_t total = (n + HDR + CT_HUGE - 1) & ~(size_t)(CT_HUGE - 1);
    /* best fit among the cached blocks of total..2*total bytes: a block a
     * little larger than asked is reused (its pages are already resident)
     * rather than left idle while fresh memory is mapped beside it */
    pthread_mutex_lock(&g_mu);
    int best = -1;
    for (int i = 0; i < g_ncache; i++) {
        size_t bn = g_cache[i].n;
        if (bn >= total && bn / 2 <= total && (best < 0 || bn < g_cache[best].n)) best = i;
        if (bn == total) break;
    }
    if (best >= 0) {
        p = g_cache[best].p;
        total = g_cache[best].n;
        g_cached -= total;
        g_cache[best] = g_cache[--g_ncache];
    }
    /* a miss: hand back cached blocks (too small for this request) of about
     * the size about to be mapped, so idle cache plus the new block does
     * not grow the resident set */
    void *evict[CT_CACHE_SLOTS];
    int nev = 0;
    for (size_t freed = 0; best < 0 && freed < total && g_ncache > 0;) {
        /* the largest block smaller than asked, else the smallest one */
        int j = -1;
        for (int i = 0; i < g_ncache; i++)
            if (g_cache[i].n < total && (j < 0 || g_cache[i].n > g_cache[j].n)) j = i;
        if (j < 0)
            for (int i = 0; i < g_ncache; i++)
                if (j < 0 || g_cache[i].n < g_cache[j].n) j = i;
        if (j < 0) break;
        freed += g_cache[j].n;
        g_cached -= g_cache[j].n;
        evict[nev++] = g_cache[j].p;
        g_cache[j] = g_cache[--g_ncache];
    }
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < nev; i++) free(evict[i]);
    if (!p) {
        if (posix_memalign(&p, CT_HUGE, total) != 0) return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, total, MADV_HUGEPAGE);
#endif
    }
    *(size_t *)p = total;
    return (char *)p + HDR;
}

/* ctx is the size that was requested from ct__malloc_aligned, cast to a
 * pointer (NULL for small blocks). */
void ct__free_aligned(void *p, void *ctx) {
    if (!p) return;
    if ((uintptr_t)ctx >= CT_MID_MIN && (uintptr_t)ctx < CT_LARGE) {
        size_t c = mid_class((size_t)(uintptr_t)ctx);
        pthread_mutex_lock(&g_mu);
        if (g_nmid[c] < CT_MID_DEPTH) {
            g_mid[c][g_nmid[c]++] = p;
            p = NULL;
        }
        pthread_mutex_unlock(&g_mu);
        free(p);
        return;
    }
    if ((uintptr_t)ctx < CT_LARGE) {
        free(p);
        return;
    }
    void *base = (char *)p - HDR;
    size_t total = *(size_t *)base;
    pthread_mutex_lock(&g_mu);
    if (g_ncache < CT_CACHE_SLOTS && g_cached + total <= CT_CACHE_MAX) {
        g_cache[g_ncache++] = (cblock){base, total};
        g_cached += total;
        base = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    free(base);
}

void ct_empty_cache(void) {
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_ncache; i++) free(g_cache[i].p);
    for (size_t c = 0; c < CT_MID_CLASSES; c++) {
        for (int i = 0; i < g_nmid[c]; i++) free(g_mid[c][i]);
        g_nmid[c] = 0;
    }
    g_ncache = 0;
    g_cached = 0;
    pthread_mutex_unlock(&g_mu);
}
