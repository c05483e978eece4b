/* wshadow.c -- bf16 shadows of float32 weights for autocast's bf16 products.
 *
 * Under autocast bf16 on a CPU with AVX512_BF16, a linear's products run on
 * gemm_lp with the float32 weight itself as the B operand: the GEMM rounds
 * it to bf16 as it packs it, in the forward (B = W or W^T) and again in the
 * backward's dx (the other layout).  Those packs read 4 bytes per weight
 * element, strided, twice a step.  A bf16 copy of the weight -- its shadow
 * -- halves what they read and drops the conversions: the GEMM then packs
 * bf16 B.  The products of GPT-2's layers ran 5-13% faster with a bf16 B
 * than with the float32 one (Zen 4, 2 threads, cold weights).
 *
 * Keeping the shadow current would cost a conversion pass per step (6 bytes
 * per element: more than it saves), so the fused AdamW writes it instead,
 * as it updates each weight whose shadow exists (2 more bytes per element
 * in a pass that moves 28): optim.c.  Entries are keyed like linalg.c's
 * packed weights (derived.h): the storage's uid and the span of elements
 * the weight covers, valid while the storage's version and exposed count
 * are those stamped.  A weight is noted at its first use and shadowed at
 * its second with the same contents (the backward of the same step), so a
 * weight made for one call costs nothing.  At most CT_AMP_SHADOW_MB MiB
 * (default 1024, 0: off) are held.
 *
 * The bits are those of the float32 path: the shadow holds what the GEMM's
 * packing computes (vcvtneps2bf16; AdamW uses the same instruction). */
#include "wshadow.h"

#include <pthread.h>
#include <stdlib.h>

#include "derived.h"
#include "gemm_impl.h"

#define CT_WS_SLOTS 1024
#define CT_WS_MIN 16384 /* smaller weights: the GEMM's own rounding is as cheap */

typedef struct ws_entry {
    ct_dslot d;   /* the storage and its stamps; d.buf the shadow (or NULL: noted) */
    int64_t off, n; /* the elements [off, off + n) of the storage */
    int valid;    /* d.buf holds the contents the stamps name */
} ws_entry;

static ws_entry g_ws[CT_WS_SLOTS];
static size_t g_ws_bytes, g_ws_cap = (size_t)-1;
static pthread_mutex_t g_ws_mu = PTHREAD_MUTEX_INITIALIZER;
int ct__wshadow_off;
static long long g_ws_hits;

long long ct__wshadow_hits(void) { return ct__dcache_count(&g_ws_mu, &g_ws_hits); }

size_t ct__wshadow_bytes(void) {
    pthread_mutex_lock(&g_ws_mu);
    size_t b = g_ws_bytes;
    pthread_mutex_unlock(&g_ws_mu);
    return b;
}

static void ws_forget(uint64_t uid) {
    ct__dslots_forget_locked(&g_ws_mu, g_ws, CT_WS_SLOTS, sizeof g_ws[0], uid, &g_ws_bytes);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define WS_X86 1
__attribute__((target("avx512f,avx512bf16,avx512vl"))) void ct__wshadow_round(uint16_t *o, const float *x,
                                                                               int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(o + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(o + i, m, h);
    }
}
#else
#define WS_X86 0
void ct__wshadow_round(uint16_t *o, const float *x, int64_t n) { /* never called: no shadows here */
    (void)o;
    (void)x;
    (void)n;
}
#endif

/* the elements [*off, *off + *n) of its storage that a 2-D float32 view
 * covers exactly (strides a permutation of a contiguous matrix's) */
static int ws_span(const ct_tensor *B, int64_t *off, int64_t *n) {
    if (B->ndim != 2 || B->dtype != CT_F32 || !B->storage || !B->storage->uid || !B->storage->data ||
        B->storage->device != CT_CPU)
        return 0;
    int64_t r = B->sizes[0], c = B->sizes[1], s0 = B->strides[0], s1 = B->strides[1];
    if (r < 1 || c < 1 || !((s1 == 1 && s0 == c) || (s0 == 1 && s1 == r))) return 0;
    *off = B->offset;
    *n = r * c;
    return *n >= CT_WS_MIN;
}

static ws_entry *ws_lookup(uint64_t uid, int64_t off, int64_t n, ws_entry **empty) {
    if (empty) *empty = NULL;
    for (int i = 0; i < CT_WS_SLOTS; i++) {
        ws_entry *e = &g_ws[i];
        if (!e->d.uid) {
            if (empty && !*empty) *empty = e;
            continue;
        }
        if (e->d.uid == uid && e->off == off && e->n == n) return e;
    }
    return NULL;
}

const uint16_t *ct__wshadow_get(const ct_tensor *B) {
    int64_t off, n;
    if (!WS_X86 || ct__wshadow_off || !ct__gemm_bf16dot_ok() || !ws_span(B, &off, &n)) return NULL;
    ct_storage *st = B->storage;
    const uint16_t *r = NULL;
    pthread_mutex_lock(&g_ws_mu);
    if (g_ws_cap == (size_t)-1) {
        const char *e = getenv("CT_AMP_SHADOW_MB");
        long mb = e && *e ? atol(e) : 1024;
        g_ws_cap = mb > 0 ? (size_t)mb << 20 : 0;
    }
    ws_entry *empty, *e = ws_lookup(st->uid, off, n, &empty);
    if (e && ct__dslot_fresh(&e->d, st)) {
        if (!e->valid) { /* the second use with these contents: shadowed now */
            size_t bytes = (size_t)n * sizeof(uint16_t);
            if (!e->d.buf) {
                void *buf = g_ws_bytes + bytes <= g_ws_cap ? ct__malloc_aligned(bytes) : NULL;
                if (!buf) goto out;
                ct__dslot_hold(&e->d, buf, bytes, &g_ws_bytes);
            }
            ct__wshadow_round(e->d.buf, (const float *)st->data + off, n);
            e->valid = 1;
        }
        r = (const uint16_t *)e->d.buf + (B->offset - off);
        g_ws_hits++;
        goto out;
    }
    if (e) { /* changed since: noted again at these contents (the buffer is kept) */
        void *buf = e->d.buf;
        size_t bytes = e->d.bytes;
        ct__dslot_note(&e->d, st, ws_forget);
        e->d.buf = buf;
        e->d.bytes = bytes;
        e->valid = 0;
        goto out;
    }
    if (!empty || g_ws_cap == 0) goto out;
    ct__dslot_note(&empty->d, st, ws_forget);
    empty->off = off;
    empty->n = n;
    empty->valid = 0;
out:
    pthread_mutex_unlock(&g_ws_mu);
    return r;
}

uint16_t *ct__wshadow_find(const ct_tensor *p) {
    if (ct__wshadow_off || p->dtype != CT_F32 || !p->storage || !p->storage->uid) return NULL;
    pthread_mutex_lock(&g_ws_mu);
    ws_entry *e = ws_lookup(p->storage->uid, p->offset, ct_numel(p), NULL);
    if (e && !e->d.buf) { /* noted by a product, never shadowed (a weight read once a step) */
        size_t bytes = (size_t)e->n * sizeof(uint16_t);
        void *buf = g_ws_bytes + bytes <= g_ws_cap ? ct__malloc_aligned(bytes) : NULL;
        if (buf) ct__dslot_hold(&e->d, buf, bytes, &g_ws_bytes);
    }
    uint16_t *r = e ? e->d.buf : NULL;
    if (r) e->valid = 0; /* until stamped */
    pthread_mutex_unlock(&g_ws_mu);
    return r;
}

void ct__wshadow_stamp_next(const ct_tensor *p) {
    pthread_mutex_lock(&g_ws_mu);
    ws_entry *e = ws_lookup(p->storage->uid, p->offset, ct_numel(p), NULL);
    if (e && e->d.buf) {
        e->d.version = atomic_load(&p->storage->version) + 1;
        e->d.exposed = atomic_load(&p->storage->exposed);
        e->valid = 1;
    }
    pthread_mutex_unlock(&g_ws_mu);
}
