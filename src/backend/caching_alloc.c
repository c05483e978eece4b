/* caching_alloc.c -- the caching device allocator (see caching_alloc.h for
 * the rules: size classes, best fit, splitting, merging, per-stream pools,
 * the out-of-memory retry) and the public statistics of ctorch/memory.h.
 *
 * Data: each device has a small and a large pool of free blocks, each a
 * sorted array of block pointers ordered by (stream, size, address), so the
 * best fit is a binary search; the live blocks are in a hash table by
 * address (for free).  The blocks of one segment form a doubly linked list
 * in address order (prev/next), which is what merging walks. */
#include "caching_alloc.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/device.h"
#include "../core/tensor_impl.h"
#include "ctorch/memory.h"

typedef struct blk {
    uintptr_t addr;
    size_t size;   /* bytes of the block (a multiple of 512) */
    size_t req;    /* bytes requested (live blocks) */
    uintptr_t stream;
    int dev;
    bool small;    /* in the small pool */
    bool live;     /* allocated */
    uintptr_t seg; /* the segment's base and size */
    size_t seg_size;
    struct blk *prev, *next; /* neighbours in the segment, by address */
    struct blk *hnext;       /* hash chain of live blocks */
} blk;

typedef struct pool {
    blk **v;
    size_t n, cap;
} pool;

typedef struct devstate {
    pool small, large;
    ct_mem_stats st;
} devstate;

struct ct__calloc {
    ct_device type;
    ct__calloc_backend be;
    int ndev;
    devstate *d;
    pthread_mutex_t mu;
    blk **ht; /* live blocks by address */
    size_t htcap, htn;
};

static _Atomic(ct__calloc *) g_reg[CT_DEVICE_COUNT];

/* ---- pools: sorted by (stream, size, addr) -------------------------------- */
static int key_cmp(const blk *b, uintptr_t stream, size_t size, uintptr_t addr) {
    if (b->stream != stream) return b->stream < stream ? -1 : 1;
    if (b->size != size) return b->size < size ? -1 : 1;
    if (b->addr != addr) return b->addr < addr ? -1 : 1;
    return 0;
}

/* the first index whose block is >= the key */
static size_t pool_lower(const pool *p, uintptr_t stream, size_t size, uintptr_t addr) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(p->v[mid], stream, size, addr) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static bool pool_insert(pool *p, blk *b) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        blk **nv = realloc(p->v, cap * sizeof *nv);
        if (!nv) return false;
        p->v = nv, p->cap = cap;
    }
    size_t i = pool_lower(p, b->stream, b->size, b->addr);
    memmove(p->v + i + 1, p->v + i, (p->n - i) * sizeof *p->v);
    p->v[i] = b;
    p->n++;
    return true;
}

static void pool_remove(pool *p, blk *b) {
    size_t i = pool_lower(p, b->stream, b->size, b->addr);
    if (i < p->n && p->v[i] == b) {
        memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
        p->n--;
    }
}

/* the smallest free block of stream with size >= size (lowest address among
 * equals), taken out of the pool; NULL when none */
static blk *pool_take_best(pool *p, uintptr_t stream, size_t size) {
    size_t i = pool_lower(p, stream, size, 0);
    if (i >= p->n || p->v[i]->stream != stream) return NULL;
    blk *b = p->v[i];
    memmove(p->v + i, p->v + i + 1, (p->n - i - 1) * sizeof *p->v);
    p->n--;
    return b;
}

/* ---- live blocks by address ------------------------------------------------ */
static size_t hslot(const ct__calloc *a, uintptr_t addr) {
    uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 20) & (a->htcap - 1);
}

static bool ht_insert(ct__calloc *a, blk *b) {
    if (a->htn + 1 > a->htcap) {
        size_t cap = a->htcap ? 2 * a->htcap : 1024;
        blk **nt = calloc(cap, sizeof *nt);
        if (!nt) return false;
        blk **old = a->ht;
        size_t oldcap = a->htcap;
        a->ht = nt, a->htcap = cap;
        for (size_t k = 0; k < oldcap; k++)
            for (blk *e = old[k], *nx; e; e = nx) {
                nx = e->hnext;
                size_t s = hslot(a, e->addr);
                e->hnext = a->ht[s];
                a->ht[s] = e;
            }
        free(old);
    }
    size_t s = hslot(a, b->addr);
    b->hnext = a->ht[s];
    a->ht[s] = b;
    a->htn++;
    return true;
}

static blk *ht_take(ct__calloc *a, uintptr_t addr) {
    if (!a->htcap) return NULL;
    for (blk **pp = &a->ht[hslot(a, addr)]; *pp; pp = &(*pp)->hnext)
        if ((*pp)->addr == addr) {
            blk *b = *pp;
            *pp = b->hnext;
            b->hnext = NULL;
            a->htn--;
            return b;
        }
    return NULL;
}

/* ---- the allocator ---------------------------------------------------------- */
ct__calloc *ct__calloc_new(ct_device type, const ct__calloc_backend *be, int ndev) {
    ct__calloc *a = calloc(1, sizeof *a);
    if (!a) return ct__error(CT_ERR_OOM, "%s: out of host memory for the caching allocator", be->name);
    a->d = calloc(ndev > 0 ? (size_t)ndev : 1, sizeof *a->d);
    if (!a->d) {
        free(a);
        return ct__error(CT_ERR_OOM, "%s: out of host memory for the caching allocator", be->name);
    }
    a->type = type;
    a->be = *be;
    a->ndev = ndev;
    pthread_mutex_init(&a->mu, NULL);
    for (int k = 0; k < ndev; k++) a->d[k].st.limit_bytes = (int64_t)be->limit;
    if ((int)type >= 0 && type < CT_DEVICE_COUNT) atomic_store(&g_reg[type], a);
    return a;
}

ct__calloc *ct__calloc_of(ct_device type) {
    return (int)type >= 0 && type < CT_DEVICE_COUNT ? atomic_load(&g_reg[type]) : NULL;
}

static size_t round_size(size_t n) {
    if (n < CT_CALLOC_MIN_BLOCK) return CT_CALLOC_MIN_BLOCK;
    return (n + CT_CALLOC_MIN_BLOCK - 1) / CT_CALLOC_MIN_BLOCK * CT_CALLOC_MIN_BLOCK;
}

static size_t segment_size(size_t rs) {
    if (rs <= CT_CALLOC_SMALL_SIZE) return CT_CALLOC_SMALL_SEG;
    if (rs < CT_CALLOC_MIN_LARGE) return CT_CALLOC_LARGE_SEG;
    return (rs + CT_CALLOC_ROUND_LARGE - 1) / CT_CALLOC_ROUND_LARGE * CT_CALLOC_ROUND_LARGE;
}

/* a new segment as one free block (not in a pool); NULL with why filled.
 * Under a->mu. */
static blk *new_segment(ct__calloc *a, int dev, uintptr_t stream, size_t size, bool small, char *why, size_t n) {
    devstate *d = &a->d[dev];
    if (a->be.limit && (size_t)d->st.reserved_bytes + size > a->be.limit) {
        snprintf(why, n, "a new segment of %zu bytes would pass the limit", size);
        return NULL;
    }
    blk *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, n, "out of host memory");
        return NULL;
    }
    why[0] = 0;
    uintptr_t base = a->be.seg_alloc(a->be.ctx, dev, stream, size, why, n);
    if (!base) {
        if (!why[0]) snprintf(why, n, "the driver could not allocate %zu bytes", size);
        free(b);
        return NULL;
    }
    *b = (blk){.addr = base, .size = size, .stream = stream, .dev = dev, .small = small, .seg = base, .seg_size = size};
    d->st.reserved_bytes += (int64_t)size;
    d->st.segments++;
    d->st.num_segment_allocs++;
    if (d->st.reserved_bytes > d->st.peak_reserved_bytes) d->st.peak_reserved_bytes = d->st.reserved_bytes;
    return b;
}

/* releases the free whole segments of dev (-1: all).  Under a->mu. */
static void empty_locked(ct__calloc *a, int dev) {
    for (int k = 0; k < a->ndev; k++) {
        if (dev >= 0 && k != dev) continue;
        devstate *d = &a->d[k];
        pool *ps[2] = {&d->small, &d->large};
        for (int q = 0; q < 2; q++) {
            pool *p = ps[q];
            size_t w = 0;
            for (size_t i = 0; i < p->n; i++) {
                blk *b = p->v[i];
                if (b->prev || b->next) {
                    p->v[w++] = b;
                    continue;
                }
                a->be.seg_free(a->be.ctx, k, b->seg, b->seg_size);
                d->st.reserved_bytes -= (int64_t)b->seg_size;
                d->st.segments--;
                d->st.num_segment_frees++;
                free(b);
            }
            p->n = w;
        }
    }
}

static const char *human(size_t n, char *buf, size_t len) {
    if (n >= ((size_t)1 << 30)) snprintf(buf, len, "%.2f GiB", (double)n / (double)((size_t)1 << 30));
    else if (n >= ((size_t)1 << 20)) snprintf(buf, len, "%.2f MiB", (double)n / (double)((size_t)1 << 20));
    else if (n >= 1024) snprintf(buf, len, "%.2f KiB", (double)n / 1024.0);
    else snprintf(buf, len, "%zu bytes", n);
    return buf;
}

void *ct__calloc_alloc(ct__calloc *a, int dev, uintptr_t stream, size_t nbytes) {
    if (dev < 0 || dev >= a->ndev)
        return ct__error(CT_ERR_DEVICE, "%s: device %s:%d is not available (%d %s devices)", a->be.name,
                         a->be.name, dev, a->ndev, a->be.name);
    if (nbytes > SIZE_MAX / 2)
        return ct__error(CT_ERR_OOM, "%s:%d: out of memory: %zu bytes requested", a->be.name, dev, nbytes);
    size_t rs = round_size(nbytes);
    bool small = rs <= CT_CALLOC_SMALL_SIZE;
    pthread_mutex_lock(&a->mu);
    devstate *d = &a->d[dev];
    pool *p = small ? &d->small : &d->large;
    blk *b = pool_take_best(p, stream, rs);
    bool hit = b != NULL;
    char why[256] = "";
    if (!b) {
        size_t seg = segment_size(rs);
        b = new_segment(a, dev, stream, seg, small, why, sizeof why);
        if (!b) { /* release the cache and try again, then with just the request */
            empty_locked(a, dev);
            b = new_segment(a, dev, stream, seg, small, why, sizeof why);
            if (!b && seg > rs) b = new_segment(a, dev, stream, rs, small, why, sizeof why);
        }
    }
    if (!b) {
        d->st.num_ooms++;
        int64_t al = d->st.allocated_bytes, re = d->st.reserved_bytes;
        pthread_mutex_unlock(&a->mu);
        char h1[32], h2[32], h3[32], lim[160];
        if (a->be.limit)
            snprintf(lim, sizeof lim, "the limit is %zu bytes (%s)", a->be.limit,
                     a->be.limit_name ? a->be.limit_name : "the memory limit");
        else
            snprintf(lim, sizeof lim, "no limit set but the device's");
        return ct__error(CT_ERR_OOM, "%s:%d: out of memory: %zu bytes requested (%s); %lld bytes allocated "
                         "(%s) and %lld reserved (%s) by ctorch's caching allocator on the device; %s (%s)",
                         a->be.name, dev, nbytes, human(nbytes, h1, sizeof h1), (long long)al,
                         human((size_t)al, h2, sizeof h2), (long long)re, human((size_t)re, h3, sizeof h3), lim,
                         why);
    }
    /* split off what is left when it is worth keeping */
    size_t rest = b->size - rs;
    if (small ? rest >= CT_CALLOC_MIN_BLOCK : rest > CT_CALLOC_SMALL_SIZE) {
        blk *r = malloc(sizeof *r);
        if (r) {
            *r = *b;
            r->addr = b->addr + rs;
            r->size = rest;
            r->live = false;
            r->hnext = NULL;
            r->prev = b;
            r->next = b->next;
            if (b->next) b->next->prev = r;
            b->next = r;
            b->size = rs;
            if (!pool_insert(p, r)) { /* keep it whole instead */
                b->next = r->next;
                if (r->next) r->next->prev = b;
                b->size += rest;
                free(r);
            }
        }
    }
    if (!ht_insert(a, b)) {
        pool_insert(p, b); /* back (the table could not grow) */
        pthread_mutex_unlock(&a->mu);
        return ct__error(CT_ERR_OOM, "%s:%d: out of host memory for the allocator's table", a->be.name, dev);
    }
    b->live = true;
    b->req = nbytes;
    b->stream = stream;
    d->st.allocated_bytes += (int64_t)b->size;
    d->st.requested_bytes += (int64_t)nbytes;
    d->st.active_blocks++;
    d->st.num_allocs++;
    d->st.num_cache_hits += hit;
    if (d->st.allocated_bytes > d->st.peak_allocated_bytes) d->st.peak_allocated_bytes = d->st.allocated_bytes;
    pthread_mutex_unlock(&a->mu);
    return (void *)b->addr;
}

bool ct__calloc_free(ct__calloc *a, void *ptr) {
    if (!ptr) return true;
    pthread_mutex_lock(&a->mu);
    blk *b = ht_take(a, (uintptr_t)ptr);
    if (!b) {
        pthread_mutex_unlock(&a->mu);
        return false;
    }
    devstate *d = &a->d[b->dev];
    pool *p = b->small ? &d->small : &d->large;
    d->st.allocated_bytes -= (int64_t)b->size;
    d->st.requested_bytes -= (int64_t)b->req;
    d->st.active_blocks--;
    d->st.num_frees++;
    b->live = false;
    b->req = 0;
    /* merge with free neighbours (same segment, so same pool and stream) */
    if (b->prev && !b->prev->live) {
        blk *q = b->prev;
        pool_remove(p, q);
        q->size += b->size;
        q->next = b->next;
        if (b->next) b->next->prev = q;
        free(b);
        b = q;
    }
    if (b->next && !b->next->live) {
        blk *q = b->next;
        pool_remove(p, q);
        b->size += q->size;
        b->next = q->next;
        if (q->next) q->next->prev = b;
        free(q);
    }
    if (!pool_insert(p, b)) { /* no host memory to cache it: give the segment back when whole */
        if (!b->prev && !b->next) {
            a->be.seg_free(a->be.ctx, b->dev, b->seg, b->seg_size);
            d->st.reserved_bytes -= (int64_t)b->seg_size;
            d->st.segments--;
            d->st.num_segment_frees++;
            free(b);
        } /* else it stays out of the pool: lost for reuse until process end */
    }
    pthread_mutex_unlock(&a->mu);
    return true;
}

void ct__calloc_empty_cache(ct__calloc *a, int dev) {
    pthread_mutex_lock(&a->mu);
    empty_locked(a, dev);
    pthread_mutex_unlock(&a->mu);
}

void ct__calloc_get_stats(ct__calloc *a, int dev, ct_mem_stats *out) {
    memset(out, 0, sizeof *out);
    if (dev < 0 || dev >= a->ndev) return;
    pthread_mutex_lock(&a->mu);
    *out = a->d[dev].st;
    pthread_mutex_unlock(&a->mu);
}

void ct__calloc_reset_peaks(ct__calloc *a, int dev) {
    if (dev < 0 || dev >= a->ndev) return;
    pthread_mutex_lock(&a->mu);
    ct_mem_stats *s = &a->d[dev].st;
    s->peak_allocated_bytes = s->allocated_bytes;
    s->peak_reserved_bytes = s->reserved_bytes;
    pthread_mutex_unlock(&a->mu);
}

void ct__calloc_destroy(ct__calloc *a) {
    if (!a) return;
    if ((int)a->type >= 0 && a->type < CT_DEVICE_COUNT) {
        ct__calloc *me = a;
        atomic_compare_exchange_strong(&g_reg[a->type], &me, NULL);
    }
    pthread_mutex_lock(&a->mu);
    /* live blocks back into their pools (merging), then every segment out */
    for (size_t k = 0; k < a->htcap; k++)
        while (a->ht[k]) {
            blk *b = a->ht[k];
            pthread_mutex_unlock(&a->mu);
            ct__calloc_free(a, (void *)b->addr);
            pthread_mutex_lock(&a->mu);
        }
    empty_locked(a, -1);
    for (int k = 0; k < a->ndev; k++) {
        free(a->d[k].small.v);
        free(a->d[k].large.v);
    }
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    free(a->ht);
    free(a->d);
    free(a);
}

/* ---- the public statistics (ctorch/memory.h) --------------------------------- */
static ct__calloc *alloc_for(const char *op, ct_dev d) {
    if ((int)d.type < 0 || d.type >= CT_DEVICE_COUNT)
        return ct__error(CT_ERR_DEVICE, "%s: not a device type (%d)", op, (int)d.type);
    if (d.type == CT_CPU || d.type == CT_META)
        return ct__error(CT_ERR_DEVICE, "%s: device %s has no caching allocator (cuda and opencl devices have)",
                         op, ct_device_name(d.type));
    if (ct__device_check(op, d.type, d.index)) return NULL;
    ct__calloc *a = ct__calloc_of(d.type);
    if (!a || d.index >= a->ndev)
        return ct__error(CT_ERR_DEVICE, "%s: device %s:%d has no caching allocator", op, ct_device_name(d.type),
                         d.index);
    return a;
}

ct_status ct_memory_stats(ct_dev d, ct_mem_stats *out) {
    if (!out) return ct__null_arg_status(__func__, "argument 'out'");
    memset(out, 0, sizeof *out);
    ct__calloc *a = alloc_for("memory_stats", d);
    if (!a) return ct_last_error_code();
    ct__calloc_get_stats(a, d.index, out);
    return CT_OK;
}

int64_t ct_memory_allocated(ct_dev d) {
    ct_mem_stats s;
    return ct_memory_stats(d, &s) ? 0 : s.allocated_bytes;
}

int64_t ct_max_memory_allocated(ct_dev d) {
    ct_mem_stats s;
    return ct_memory_stats(d, &s) ? 0 : s.peak_allocated_bytes;
}

int64_t ct_memory_reserved(ct_dev d) {
    ct_mem_stats s;
    return ct_memory_stats(d, &s) ? 0 : s.reserved_bytes;
}

int64_t ct_max_memory_reserved(ct_dev d) {
    ct_mem_stats s;
    return ct_memory_stats(d, &s) ? 0 : s.peak_reserved_bytes;
}

ct_status ct_reset_peak_memory_stats(ct_dev d) {
    ct__calloc *a = alloc_for("reset_peak_memory_stats", d);
    if (!a) return ct_last_error_code();
    ct__calloc_reset_peaks(a, d.index);
    return CT_OK;
}

ct_status ct_empty_cache_dev(ct_dev d) {
    ct__calloc *a = alloc_for("empty_cache", d);
    if (!a) return ct_last_error_code();
    ct__calloc_empty_cache(a, d.index);
    return CT_OK;
}

char *ct_memory_summary(ct_dev d) {
    ct_mem_stats s;
    if (ct_memory_stats(d, &s)) return NULL;
    char dn[32], b[6][32];
    ct_dev_str(d, dn, sizeof dn);
    size_t n = 2048;
    char *out = malloc(n);
    if (!out) return ct__error(CT_ERR_OOM, "memory_summary: out of host memory");
    snprintf(out, n,
             "|===================== ctorch memory summary, device %-10s =====================|\n"
             "|                   current                        peak                            |\n"
             "| allocated   %14lld (%-10s)   %14lld (%-10s)           |\n"
             "| reserved    %14lld (%-10s)   %14lld (%-10s)           |\n"
             "| requested   %14lld bytes in %lld live blocks, %lld segments\n"
             "| allocations %lld (%lld from the cache), frees %lld\n"
             "| driver allocations %lld, driver frees %lld, out-of-memory errors %lld\n"
             "| limit       %s\n"
             "|==================================================================================|\n",
             dn, (long long)s.allocated_bytes, human((size_t)s.allocated_bytes, b[0], 32),
             (long long)s.peak_allocated_bytes, human((size_t)s.peak_allocated_bytes, b[1], 32),
             (long long)s.reserved_bytes, human((size_t)s.reserved_bytes, b[2], 32),
             (long long)s.peak_reserved_bytes, human((size_t)s.peak_reserved_bytes, b[3], 32),
             (long long)s.requested_bytes, (long long)s.active_blocks, (long long)s.segments,
             (long long)s.num_allocs, (long long)s.num_cache_hits, (long long)s.num_frees,
             (long long)s.num_segment_allocs, (long long)s.num_segment_frees, (long long)s.num_ooms,
             s.limit_bytes ? human((size_t)s.limit_bytes, b[4], 32) : "none (the device's memory)");
    return out;
}
