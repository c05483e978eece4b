/* alloc.c -- host memory for tensor storage.
 *
 * Small blocks come from posix_memalign (64-byte aligned).  Large blocks
 * (>= 1 MiB) are mappings of their own rounded up to 64 KiB, 2 MiB-aligned
 * and backed by transparent huge pages (map_block), kept in a size-keyed
 * cache when freed: a training loop that frees and
 * re-allocates the same large temporaries every step reuses warm memory
 * instead of paying first-touch page faults (measured: ~11 us per fresh
 * 4 KiB page) on every step.  A request takes the smallest cached block
 * that fits (at most a quarter larger than asked: a looser fit kept whole
 * idle huge pages resident under small tensors and inflated the peak RSS
 * of training steps), so near sizes share memory.  Live plus cached large
 * blocks stay within 3/2 of the peak of the live ones (a miss beyond that
 * hands cached blocks back first); at most CT_CACHE_SLOTS blocks and
 * CT_CACHE_MAX bytes are cached, and
 * ct_empty_cache() hands them back to the system.  Free a block with
 * ct__free_aligned(p, (void *)(uintptr_t)n) where n is the size asked for.
 * Measured (2 threads, one training step after a warm-up, with per-node
 * scopes in backward): ResNet-50 b8 peak RSS 1.40 GB with the 2x-fit
 * cache and 64-byte headers in 2 MiB-rounded blocks, 0.95 GB like this;
 * BERT-base b8x128 2.58 -> 1.95 GB; peak live tensor bytes 0.91 / 1.93 GB.
 * With live + cached held to the live peak itself, blocks of the wrong
 * sizes were handed back and fresh ones mapped on every step: ResNet-50
 * (b8, 2 threads, Zen 5) mapped 101 fresh blocks a step (18k page faults,
 * 50..390 ms of kernel time, where direct compaction for the huge pages
 * (THP defrag=madvise) made the step time swing 690..1010 ms); VGG-16
 * (b4) 69 blocks, 120..760 ms of kernel time.  With the quarter of slack
 * no block is mapped fresh from the third step on: ResNet-50 635..655 ms a
 * step, peak RSS 962 -> 1140 MB; VGG-16 1040..1480 -> 990..1035 ms, 1912
 * -> 2221 MB (torch 2.15 on the same steps: 1719 and 2690 MB).  Half of
 * it gave the same.  The bound was 5/4 until the CNN training step of the
 * suites (64x3x32x32, Adam) turned out to churn under it: 5 fresh blocks a
 * step in the steady state (~500 page faults a step, THP or not), because
 * its backward's sizes differ from the forward's it freed; at 3/2 none
 * (AMD EPYC Zen 3, 2 threads: 43k -> 2k page faults over 86 steps, process
 * CPU time 3.6..4.6 s -> 3.5..3.6 s), idle cache 42 -> 51 MB.  BERT-base,
 * ResNet-50, the Transformer layer and the MLP map the same blocks either
 * way (their peak RSS unchanged).
 *
 * Medium blocks (64 KiB .. 1 MiB: a [128, 512] float32 activation) are
 * rounded up to a multiple of 64 KiB and kept on per-size free lists of at
 * most CT_MID_DEPTH blocks each, CT_MID_MAX bytes idle in all: glibc maps
 * such blocks with mmap and unmaps them on free unless told otherwise
 * (torch's benchmark setting GLIBC_TUNABLES=...mmap_max=0 does exactly
 * that), so every op of a training step paid fresh page faults.  The depth
 * was 8 (~70 MB in all): GPT-2 124M at 4 x 64 tokens frees some 50
 * [256, 768] float32 blocks of one class at the end of a step, and the
 * ones past 8 went back to glibc, whose heap trims and regrows then cost
 * 0 to 6,500 page faults a step in the steady state (Zen 4); with 128 a
 * class and 256 MiB in all, none. */
#include <pthread.h>
#include <sys/mman.h>

#include "tensor_impl.h"

/* bytes asked for by live blocks (cached blocks not included): what tensor
 * storage holds right now, for memory tests (ct__alloc_live_bytes) */
static atomic_llong g_live_bytes, g_peak_bytes;
int64_t ct__alloc_live_bytes(void) { return (int64_t)atomic_load(&g_live_bytes); }
/* the most live bytes since the last reset (which sets it to the live bytes) */
int64_t ct__alloc_peak_bytes(void) { return (int64_t)atomic_load(&g_peak_bytes); }
void ct__alloc_reset_peak(void) { atomic_store(&g_peak_bytes, atomic_load(&g_live_bytes)); }
/* large blocks mapped fresh so far, and bytes held idle in the caches */
static atomic_llong g_fresh_maps;
static size_t g_cached, g_mid_cached;

#define CT_LARGE (1u << 20)
#define CT_HUGE (2u << 20)
#define CT_CACHE_SLOTS 512
#define CT_CACHE_MAX ((size_t)2 << 30)

typedef struct { void *p; size_t n; } cblock;
static cblock g_cache[CT_CACHE_SLOTS];
static int g_ncache;
/* bytes of live large blocks, and the most there have been */
static size_t g_live_large, g_high;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* Large blocks start on their 2 MiB boundary and their sizes live in a
 * side table (a header before the data pushed every tensor of exactly
 * k * 2 MiB -- common: [1024, 1024] f32 -- into one more huge page).
 * Open addressing keyed by the block address, linear probing, backward-
 * shift deletion; guarded by g_mu. */
typedef struct { void *p; size_t n; } tslot;
static tslot *g_tab;
static size_t g_tcap, g_tn;
static size_t tab_hash(const void *p) {
    return (size_t)(((uint64_t)(uintptr_t)p >> 21) * 0x9E3779B97F4A7C15ull >> 17);
}
static int tab_put(void *p, size_t n) {
    if (2 * (g_tn + 1) > g_tcap) {
        size_t nc = g_tcap ? 2 * g_tcap : 256;
        tslot *nt = calloc(nc, sizeof *nt);
        if (!nt) return -1;
        for (size_t i = 0; i < g_tcap; i++)
            if (g_tab[i].p) {
                size_t j = tab_hash(g_tab[i].p) & (nc - 1);
                while (nt[j].p) j = (j + 1) & (nc - 1);
                nt[j] = g_tab[i];
            }
        free(g_tab);
        g_tab = nt;
        g_tcap = nc;
    }
    size_t j = tab_hash(p) & (g_tcap - 1);
    while (g_tab[j].p) j = (j + 1) & (g_tcap - 1);
    g_tab[j] = (tslot){p, n};
    g_tn++;
    return 0;
}
/* removes p and returns its size (0: not a large block of ours) */
static size_t tab_take(void *p) {
    if (!g_tcap) return 0;
    size_t m = g_tcap - 1, i = tab_hash(p) & m;
    while (g_tab[i].p && g_tab[i].p != p) i = (i + 1) & m;
    if (!g_tab[i].p) return 0;
    size_t n = g_tab[i].n;
    /* backward-shift: move later entries of the probe run into the hole */
    for (size_t j = (i + 1) & m; g_tab[j].p; j = (j + 1) & m) {
        size_t h = tab_hash(g_tab[j].p) & m;
        /* entry j may move to i if its home h is not in (i, j] cyclically */
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            g_tab[i] = g_tab[j];
            i = j;
        }
    }
    g_tab[i] = (tslot){NULL, 0};
    g_tn--;
    return n;
}
/* A large block: its own mapping, starting on a 2 MiB boundary (huge
 * pages for every whole 2 MiB of it) and ending right after its last
 * 64 KiB: the tail short of a whole huge page is backed by 4 KiB pages as
 * far as it is touched, so a 2.25 MiB tensor (BERT's [768, 768]) keeps
 * 2.25 MiB resident, not 4. */
#define CT_GRAN (64u << 10)
static void *map_block(size_t len) {
    size_t span = len + CT_HUGE;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)m + CT_HUGE - 1) & ~(uintptr_t)(CT_HUGE - 1));
    if (p > m) munmap(m, (size_t)(p - m));
    if (m + span > p + len) munmap(p + len, (size_t)(m + span - (p + len)));
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE);
#endif
    return p;
}
static void unmap_block(void *p, size_t len) { if (p) munmap(p, len); }

/* a cached block serves a request of `total` bytes when it is at most a
 * quarter larger (the whole block is resident: a looser fit trades memory
 * for fewer fresh mappings, which cost little with huge pages) */
#define FITS(bn, total) ((bn) >= (total) && (bn) - (total) <= (total) / 4)

#define CT_MID_MIN (64u << 10)
#define CT_MID_STEP (64u << 10)
#define CT_MID_CLASSES (CT_LARGE / CT_MID_STEP) /* 64 KiB .. 1 MiB */
#define CT_MID_DEPTH 128
#define CT_MID_MAX ((size_t)256 << 20)
static void *g_mid[CT_MID_CLASSES][CT_MID_DEPTH];
static int g_nmid[CT_MID_CLASSES];

static size_t mid_class(size_t n) { return (n + CT_MID_STEP - 1) / CT_MID_STEP - 1; }

/* ---- small blocks: per-thread free lists --------------------------------
 * Every op makes a tensor handle, a storage and, for a small result, a
 * small data block; with autograd on, also the result's autograd metadata
 * and a graph node.  Through glibc's malloc, freeing a scope's worth of
 * them went through its fast bins and then malloc_consolidate, which walks
 * every freed chunk and its neighbours when a larger request comes: most
 * of the cache misses of tiny_add_grad (10000 recorded adds freed at once).
 * Freed blocks up to 2 KiB go instead on the freeing thread's LIFO list of
 * their 16-byte size class (one list for ct__obj_* objects, one for
 * 64-byte aligned tensor data), at most CT_SMALL_CACHE_MAX bytes a thread;
 * a request pops the last block freed of its class (warm in cache) before
 * asking malloc.  A thread's lists are freed when it exits (a pthread key's
 * destructor) and the calling thread's by ct_empty_cache().  Under
 * AddressSanitizer nothing is cached (it would hide use-after-free);
 * CT_SMALL_CACHE_MB=N in the environment sets the per-thread cap (0: off).
 * Measured (bench_suite's tiny cases, 2 threads, this Zen 3 under load 4-6,
 * bench/ab_suite.py, 10 alternating runs, f986202 -> this): tiny_add_grad 22.4 -> 9.2 ms,
 * tiny_add 7.1 -> 3.3 ms; per recorded add 6900 -> 3900 instructions and
 * 28 -> 18 read misses of a 512 KiB cache (cachegrind). */
#define CT_SMALL_STEP 16u
#define CT_SMALL_CLASSES 128u /* blocks up to 2 KiB */
#ifndef CT_SMALL_CACHE_MAX
#define CT_SMALL_CACHE_MAX ((size_t)32 << 20)
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CT_SMALL_CACHE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CT_SMALL_CACHE 0
#endif
#endif
#ifndef CT_SMALL_CACHE
#define CT_SMALL_CACHE 1
#endif

enum { SMALL_OBJ = 0, SMALL_DATA = 1 };
typedef struct small_cache {
    void *head[2][CT_SMALL_CLASSES];
    size_t bytes;
    bool registered, dead;
} small_cache;
static _Thread_local small_cache tl_small;
static pthread_key_t g_small_key;
static pthread_once_t g_small_once = PTHREAD_ONCE_INIT;
static size_t g_small_max = CT_SMALL_CACHE_MAX;

static void small_flush(small_cache *sc) {
    for (int k = 0; k < 2; k++)
        for (unsigned c = 0; c < CT_SMALL_CLASSES; c++) {
            void *p = sc->head[k][c];
            sc->head[k][c] = NULL;
            while (p) {
                void *nx = *(void **)p;
                free(p);
                p = nx;
            }
        }
    sc->bytes = 0;
}
/* thread exit: free the lists, and cache nothing more on this thread */
static void small_thread_exit(void *v) {
    small_cache *sc = v;
    sc->dead = true;
    small_flush(sc);
}
static void small_key_init(void) {
    const char *e = getenv("CT_SMALL_CACHE_MB");
    if (e) g_small_max = (size_t)atol(e) << 20;
    if (pthread_key_create(&g_small_key, small_thread_exit)) g_small_max = 0;
}

/* the class of an n-byte block (n >= 1), CT_SMALL_CLASSES when too large */
static inline unsigned small_class(size_t n) {
    return n - 1 < CT_SMALL_CLASSES * CT_SMALL_STEP ? (unsigned)((n - 1) / CT_SMALL_STEP) : CT_SMALL_CLASSES;
}
static inline void *small_pop(int kind, unsigned c) {
    small_cache *sc = &tl_small;
    void *p = sc->head[kind][c];
    if (p) {
        sc->head[kind][c] = *(void **)p;
        sc->bytes -= (c + 1) * CT_SMALL_STEP;
    }
    return p;
}
/* false: not cached (the caller frees it) */
static inline bool small_push(int kind, unsigned c, void *p) {
    small_cache *sc = &tl_small;
    size_t b = (c + 1) * CT_SMALL_STEP;
    if (!CT_SMALL_CACHE || sc->dead) return false;
    if (!sc->registered) {
        pthread_once(&g_small_once, small_key_init);
        if (!g_small_max || pthread_setspecific(g_small_key, sc)) return false;
        sc->registered = true;
    }
    if (sc->bytes + b > g_small_max) return false;
    *(void **)p = sc->head[kind][c];
    sc->head[kind][c] = p;
    sc->bytes += b;
    return true;
}

size_t ct__small_cached_bytes(void) { return tl_small.bytes; }

void *ct__obj_alloc(size_t n) {
    unsigned c = small_class(n);
    if (!CT_SMALL_CACHE || c == CT_SMALL_CLASSES) return malloc(n ? n : 1);
    void *p = small_pop(SMALL_OBJ, c);
    return p ? p : malloc((c + 1) * CT_SMALL_STEP);
}
void *ct__obj_calloc(size_t n) {
    void *p = ct__obj_alloc(n);
    if (p) memset(p, 0, n);
    return p;
}
void ct__obj_free(void *p, size_t n) {
    if (!p) return;
    unsigned c = small_class(n);
    if (c < CT_SMALL_CLASSES && small_push(SMALL_OBJ, c, p)) return;
    free(p);
}

static void *malloc_aligned(size_t n);

void *ct__malloc_aligned(size_t n) {
    void *p = malloc_aligned(n);
    if (p) {
        long long now = atomic_fetch_add(&g_live_bytes, (long long)n) + (long long)n;
        long long peak = atomic_load(&g_peak_bytes);
        while (now > peak && !atomic_compare_exchange_weak(&g_peak_bytes, &peak, now)) {}
    }
    return p;
}

static void *malloc_aligned(size_t n) {
    void *p = NULL;
    if (n == 0) n = 1;
    if (n >= CT_MID_MIN && n < CT_LARGE) {
        size_t c = mid_class(n);
        pthread_mutex_lock(&g_mu);
        if (g_nmid[c] > 0) {
            p = g_mid[c][--g_nmid[c]];
            g_mid_cached -= (c + 1) * CT_MID_STEP;
        }
        pthread_mutex_unlock(&g_mu);
        if (p) return p;
        if (posix_memalign(&p, 64, (c + 1) * CT_MID_STEP) != 0) return NULL;
        return p;
    }
    if (n < CT_LARGE) {
        size_t rounded = (n + 63) & ~(size_t)63;
        if (rounded < n) return NULL;
        unsigned c = small_class(rounded);
        if (CT_SMALL_CACHE && c < CT_SMALL_CLASSES && (p = small_pop(SMALL_DATA, c))) return p;
        if (posix_memalign(&p, 64, rounded) != 0) return NULL;
        return p;
    }
    if (n > SIZE_MAX / 2) return NULL;
    size_t total = (n + CT_GRAN - 1) & ~(size_t)(CT_GRAN - 1);
    /* best fit among the cached blocks that FIT: a block a little larger
     * than asked is reused (its pages are already resident) rather than
     * left idle while fresh memory is mapped beside it */
    pthread_mutex_lock(&g_mu);
    int best = -1;
    for (int i = 0; i < g_ncache; i++) {
        size_t bn = g_cache[i].n;
        if (FITS(bn, total) && (best < 0 || bn < g_cache[best].n)) best = i;
        if (bn == total) break;
    }
    if (best >= 0) {
        p = g_cache[best].p;
        total = g_cache[best].n;
        g_cached -= total;
        g_cache[best] = g_cache[--g_ncache];
    }
    /* a miss: the large-block footprint (live + cached + this block) may
     * reach 3/2 of the peak of the live large blocks; beyond that cached
     * blocks are handed back first (see the top of the file) */
    if (best < 0 && g_live_large + total > g_high) g_high = g_live_large + total;
    cblock evict[CT_CACHE_SLOTS];
    int nev = 0;
    while (best < 0 && g_live_large + g_cached + total > g_high * 3 / 2 && g_ncache > 0) {
        /* the largest block smaller than asked, else the smallest one */
        int j = -1;
        for (int i = 0; i < g_ncache; i++)
            if (g_cache[i].n < total && (j < 0 || g_cache[i].n > g_cache[j].n)) j = i;
        if (j < 0)
            for (int i = 0; i < g_ncache; i++)
                if (j < 0 || g_cache[i].n < g_cache[j].n) j = i;
        if (j < 0) break;
        g_cached -= g_cache[j].n;
        evict[nev++] = g_cache[j];
        g_cache[j] = g_cache[--g_ncache];
    }
    g_live_large += total;
    if (g_live_large > g_high) g_high = g_live_large;
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < nev; i++) unmap_block(evict[i].p, evict[i].n);
    if (!p) {
        if (!(p = map_block(total))) return NULL;
        atomic_fetch_add(&g_fresh_maps, 1);
    }
    pthread_mutex_lock(&g_mu);
    int bad = tab_put(p, total);
    if (bad) g_live_large -= total;
    pthread_mutex_unlock(&g_mu);
    if (bad) { unmap_block(p, total); return NULL; }
    return p;
}

/* ctx is the size that was requested from ct__malloc_aligned, cast to a
 * pointer (NULL for small blocks). */
void ct__free_aligned(void *p, void *ctx) {
    if (!p) return;
    atomic_fetch_sub(&g_live_bytes, (long long)(uintptr_t)ctx);
    if ((uintptr_t)ctx >= CT_MID_MIN && (uintptr_t)ctx < CT_LARGE) {
        size_t c = mid_class((size_t)(uintptr_t)ctx);
        pthread_mutex_lock(&g_mu);
        if (g_nmid[c] < CT_MID_DEPTH && g_mid_cached + (c + 1) * CT_MID_STEP <= CT_MID_MAX) {
            g_mid[c][g_nmid[c]++] = p;
            g_mid_cached += (c + 1) * CT_MID_STEP;
            p = NULL;
        }
        pthread_mutex_unlock(&g_mu);
        free(p);
        return;
    }
    if ((uintptr_t)ctx < CT_LARGE) {
        /* the block was rounded up to 64 bytes (0 bytes asked: 64) */
        size_t r = ((size_t)(uintptr_t)ctx + 63) & ~(size_t)63;
        unsigned c = small_class(r ? r : 64);
        if (c < CT_SMALL_CLASSES && small_push(SMALL_DATA, c, p)) return;
        free(p);
        return;
    }
    pthread_mutex_lock(&g_mu);
    size_t total = tab_take(p);
    g_live_large -= total;
    if (total && g_ncache < CT_CACHE_SLOTS && g_cached + total <= CT_CACHE_MAX) {
        g_cache[g_ncache++] = (cblock){p, total};
        g_cached += total;
        p = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    if (p) {
        CT_ASSERT(total != 0); /* a large block we did not map */
        unmap_block(p, total);
    }
}

void ct_empty_cache(void) {
    small_flush(&tl_small);
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < g_ncache; i++) unmap_block(g_cache[i].p, g_cache[i].n);
    for (size_t c = 0; c < CT_MID_CLASSES; c++) {
        for (int i = 0; i < g_nmid[c]; i++) free(g_mid[c][i]);
        g_nmid[c] = 0;
    }
    g_mid_cached = 0;
    g_ncache = 0;
    g_cached = 0;
    g_high = g_live_large;
    pthread_mutex_unlock(&g_mu);
}

void ct__alloc_counts(int64_t *fresh_maps, int64_t *cached_bytes) {
    pthread_mutex_lock(&g_mu);
    *fresh_maps = (int64_t)atomic_load(&g_fresh_maps);
    *cached_bytes = (int64_t)(g_cached + g_mid_cached);
    pthread_mutex_unlock(&g_mu);
}
