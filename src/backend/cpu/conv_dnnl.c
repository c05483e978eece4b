/* conv_dnnl.c (cpu) -- f32 and bf16 convolution through oneDNN (Debian libdnnl-dev),
 * built when CMake finds it (CT_HAVE_DNNL).  conv.c's kernels call
 * ct__dnnl_conv() first and run their own im2col + GEMM code when it
 * answers 0 (no oneDNN, a geometry oneDNN cannot express, deterministic
 * algorithms requested, a failure inside oneDNN); see ct__dnnl_route in
 * conv.c for which convolutions take this path.
 *
 * The three passes map onto oneDNN's convolution primitives with the conv's
 * geometry (its parameters, ct_p_conv: image side, grid side, kernel,
 * stride, leading padding, dilation):
 *   CT_DNNL_FWD  conv:             src = image, dst = grid (+ bias)
 *   CT_DNNL_BWD_DATA  conv_transpose (= the conv's input gradient):
 *                                  diff_dst = grid, diff_src = image
 *   CT_DNNL_BWD_WEIGHTS  conv_wgrad: src = image, diff_dst = grid
 * The trailing padding is the one that makes oneDNN's size formula exact:
 * pr = (grid - 1) * stride + (k - 1) * dilation + 1 - image - pl (oneDNN
 * accepts pr > -stride).
 *
 * Tensors stay NCHW (NCDHW) at the API; each primitive is created with
 * format_tag any, so oneDNN picks its blocked layouts (nChw8c, OIhw8i8o on
 * AVX2), and reorders run from and to the plain tensors.  Primitives, their
 * reorders and the memory objects are cached per geometry in a small table
 * (CT_DNNL_CACHE entries, the least recently used one evicted), so a
 * training loop creates them once.  One mutex guards the table and the
 * execution (the primitives run with OpenMP inside, on the thread count
 * ct_set_num_threads set; the count is part of the key).  The blocked
 * temporaries and oneDNN's scratchpad are taken per call from the caching
 * allocator (ct__malloc_aligned), so the cache holds no large buffers. */
#ifdef CT_HAVE_DNNL
#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ctorch/profiler.h"
#include "../../ops/op_table.h"
#include "../../ops/route.h"
#include "blas.h"
#include "conv_dnnl.h"
#include "cpu_caps.h"
#include "derived.h"
#include "dnnl_impl.h"
#include "tr8.h"

#define CT_DNNL_CACHE 64

typedef struct dnnl_key {
    int kind, nd, bias, threads;
    int relu;                  /* FWD: a relu post-op (ct_p_conv.post_relu) */
    int fpmath;                /* oneDNN's fpmath mode bf16: float32 matmul precision
                                * "high"/"medium" on a CPU with bf16 dot products */
    int blk;                   /* FWD, 2-D: ct_p_conv.blocked (bit 0 src, bit 1 dst held
                                * as nChw8c, oneDNN's aBcd8b, by the caller) */
    int bf16;                  /* every buffer bf16 (else f32) */
    int64_t N, C, Co, groups;
    int64_t img[3], grid[3], k[3], s[3], p[3], d[3];
} dnnl_key;

/* one argument of the primitive: the user's plain memory, and when oneDNN
 * wants another layout, that memory and the reorder between the two */
typedef struct dnnl_arg {
    int id;                    /* DNNL_ARG_... */
    int out;                   /* written by the primitive (reorder after) */
    int64_t tr[3];             /* tr[0] > 0: inner is the NHWC form of an NCHW
                                * activation, {N, C, H*W}: our own transpose
                                * replaces the reorder */
    dnnl_memory_t user, inner; /* inner NULL: the primitive uses user */
    dnnl_primitive_t reorder;  /* user -> inner (in) or inner -> user (out) */
    size_t inner_bytes;
} dnnl_arg;

typedef struct dnnl_entry {
    ct__dnnl_head h; /* used: 1 ready, -1 oneDNN cannot do it (run ours) */
    dnnl_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t scratch; /* its buffer comes per call */
    size_t scratch_bytes;
    int narg;
    dnnl_arg arg[4];
} dnnl_entry;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_eng;
static dnnl_stream_t g_stream;
static int g_init; /* 0 not yet, 1 ok, -1 no engine */
static dnnl_entry g_cache[CT_DNNL_CACHE];
static uint64_t g_clock;

static void entry_free(dnnl_entry *e) {
    for (int i = 0; i < e->narg; i++) {
        dnnl_arg *a = &e->arg[i];
        if (a->reorder) dnnl_primitive_destroy(a->reorder);
        if (a->inner) dnnl_memory_destroy(a->inner);
        if (a->user) dnnl_memory_destroy(a->user);
    }
    if (e->prim) dnnl_primitive_destroy(e->prim);
    if (e->scratch) dnnl_memory_destroy(e->scratch);
    memset(e, 0, sizeof *e);
}

static void tag_dims(const dnnl_key *k, dnnl_dims_t src, dnnl_dims_t wei, dnnl_dims_t dst,
                     int *wnd) {
    int off = 3 - k->nd;
    src[0] = k->N; src[1] = k->C;
    dst[0] = k->N; dst[1] = k->Co;
    int w = 0;
    if (k->groups > 1) wei[w++] = k->groups;
    wei[w++] = k->Co / k->groups;
    wei[w++] = k->C / k->groups;
    for (int j = 0; j < k->nd; j++) {
        src[2 + j] = k->img[off + j];
        dst[2 + j] = k->grid[off + j];
        wei[w++] = k->k[off + j];
    }
    *wnd = w;
}

static dnnl_format_tag_t act_tag(int nd) { return nd == 2 ? dnnl_nchw : dnnl_ncdhw; }
static dnnl_format_tag_t wei_tag(int nd, int grouped) {
    if (nd == 2) return grouped ? dnnl_goihw : dnnl_oihw;
    return grouped ? dnnl_goidhw : dnnl_oidhw;
}

/* ---- NCHW <-> NHWC ---------------------------------------------------------
 * oneDNN's AVX-512 forward convolutions (brgconv) take their activations
 * channels-last; its reorder between NCHW and NHWC ran at ~2 GB/s here
 * (VGG-16 training at batch 4: ~165 ms of a ~1050 ms step in those two
 * reorders).  Per image this is a plain transpose of a [C][H*W] matrix,
 * done here in 32 x 32 tiles (8 x 8 register transposes with AVX2) spread
 * over the threads. */
#define CT_TT 32

static void tr_tile_scalar(const float *s, int64_t ls, float *d, int64_t ld, int64_t rn,
                           int64_t sn) {
    for (int64_t r = 0; r < rn; r++)
        for (int64_t c = 0; c < sn; c++) d[c * ld + r] = s[r * ls + c];
}

__attribute__((target("avx2"))) static void tr_tile_avx2(const float *s, int64_t ls, float *d,
                                                         int64_t ld, int64_t rn, int64_t sn) {
    if (rn != CT_TT || sn != CT_TT) {
        tr_tile_scalar(s, ls, d, ld, rn, sn);
        return;
    }
    for (int rb = 0; rb < CT_TT; rb += 8)
        for (int cb = 0; cb < CT_TT; cb += 8) {
            __m256 v[8];
            for (int q = 0; q < 8; q++) v[q] = _mm256_loadu_ps(s + (rb + q) * ls + cb);
            ct__tr8(v);
            for (int q = 0; q < 8; q++) _mm256_storeu_ps(d + (cb + q) * ld + rb, v[q]);
        }
}

/* dst image n = the transpose of src image n: [R][S] -> [S][R], n < nimg */
static void transpose_planes(const float *src, float *dst, int64_t nimg, int64_t R, int64_t S) {
    int64_t tr = (R + CT_TT - 1) / CT_TT, ts = (S + CT_TT - 1) / CT_TT, total = nimg * tr * ts;
    int avx2 = ct__cpu_cap() >= CT_CAP_AVX2;
    int nt = ct__num_threads();
    if (nimg * R * S < (1 << 15)) nt = 1;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t t = 0; t < total; t++) {
        int64_t n = t / (tr * ts), i = t % (tr * ts) / ts, j = t % ts;
        int64_t r0 = i * CT_TT, s0 = j * CT_TT;
        int64_t rn = R - r0 < CT_TT ? R - r0 : CT_TT, sn = S - s0 < CT_TT ? S - s0 : CT_TT;
        const float *sp = src + n * R * S + r0 * S + s0;
        float *dp = dst + n * R * S + s0 * R + r0;
        if (avx2) tr_tile_avx2(sp, S, dp, R, rn, sn);
        else tr_tile_scalar(sp, S, dp, R, rn, sn);
    }
}

/* Sets up one argument: the plain user memory and, when the primitive's
 * layout differs, its own memory and the reorder. */
static int arg_init(dnnl_arg *a, int id, int out, const dnnl_memory_desc_t *user_md,
                    const dnnl_memory_desc_t *prim_md, int blocked) {
    a->id = id;
    a->out = out;
    if (dnnl_memory_create(&a->user, user_md, g_eng, DNNL_MEMORY_NONE)) return -1;
    if (dnnl_memory_desc_equal(user_md, prim_md)) return 0;
    if (dnnl_memory_create(&a->inner, prim_md, g_eng, DNNL_MEMORY_NONE)) return -1;
    a->inner_bytes = dnnl_memory_desc_get_size(prim_md);
    int nd = user_md->ndims;
    dnnl_memory_desc_t cl;
    if (!blocked && id != DNNL_ARG_WEIGHTS && id != DNNL_ARG_DIFF_WEIGHTS && id != DNNL_ARG_BIAS &&
        (nd == 4 || nd == 5) &&
        dnnl_memory_desc_init_by_tag(&cl, nd, user_md->dims, dnnl_f32,
                                     nd == 4 ? dnnl_nhwc : dnnl_ndhwc) == dnnl_success &&
        dnnl_memory_desc_equal(&cl, prim_md)) {
        a->tr[0] = user_md->dims[0];
        a->tr[1] = user_md->dims[1];
        a->tr[2] = 1;
        for (int j = 2; j < nd; j++) a->tr[2] *= user_md->dims[j];
        return 0; /* no reorder primitive needed */
    }
    dnnl_primitive_desc_t rpd;
    if (out ? dnnl_reorder_primitive_desc_create(&rpd, prim_md, g_eng, user_md, g_eng, NULL)
            : dnnl_reorder_primitive_desc_create(&rpd, user_md, g_eng, prim_md, g_eng, NULL))
        return -1;
    dnnl_status_t st = dnnl_primitive_create(&a->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return st ? -1 : 0;
}

static int entry_build(dnnl_entry *e) {
    const dnnl_key *k = &e->key;
    dnnl_dims_t sd, wd, dd, st, dil, pl, pr;
    int wnd;
    tag_dims(k, sd, wd, dd, &wnd);
    int off = 3 - k->nd;
    for (int j = 0; j < k->nd; j++) {
        st[j] = k->s[off + j];
        dil[j] = k->d[off + j] - 1;
        pl[j] = k->p[off + j];
        pr[j] = (k->grid[off + j] - 1) * k->s[off + j] + (k->k[off + j] - 1) * k->d[off + j] + 1 -
                k->img[off + j] - pl[j];
        if (pr[j] + st[j] <= 0) return -1;
    }
    int and = k->nd + 2, grouped = k->groups > 1;
    dnnl_memory_desc_t src_u, wei_u, dst_u, bias_u, src_a, wei_a, dst_a, bias_a;
    dnnl_dims_t bd = {k->Co};
    dnnl_format_tag_t stag = k->blk & 1 ? dnnl_aBcd8b : act_tag(k->nd);
    dnnl_format_tag_t dtag = k->blk & 2 ? dnnl_aBcd8b : act_tag(k->nd);
    const dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32;
    if (dnnl_memory_desc_init_by_tag(&src_u, and, sd, dt, stag) ||
        dnnl_memory_desc_init_by_tag(&dst_u, and, dd, dt, dtag) ||
        dnnl_memory_desc_init_by_tag(&wei_u, wnd, wd, dt, wei_tag(k->nd, grouped)) ||
        dnnl_memory_desc_init_by_tag(&bias_u, 1, bd, dt, dnnl_x) ||
        dnnl_memory_desc_init_by_tag(&src_a, and, sd, dt, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&dst_a, and, dd, dt, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&wei_a, wnd, wd, dt, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&bias_a, 1, bd, dt, dnnl_format_tag_any))
        return -1;
    dnnl_primitive_attr_t attr = NULL;
    if (dnnl_primitive_attr_create(&attr)) return -1;
    dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (k->fpmath && dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16)) {
        dnnl_primitive_attr_destroy(attr);
        return -1;
    }
    if (k->relu) { /* relu on the result while it is in registers */
        dnnl_post_ops_t po = NULL;
        int bad = dnnl_post_ops_create(&po) != dnnl_success ||
                  dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f) != dnnl_success ||
                  dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success;
        if (po) dnnl_post_ops_destroy(po);
        if (bad) {
            dnnl_primitive_attr_destroy(attr);
            return -1;
        }
    }
    dnnl_convolution_desc_t fd, bd_;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    int rc = -1;
    if (dnnl_dilated_convolution_forward_desc_init(
            &fd, k->kind == CT_DNNL_FWD ? dnnl_forward_inference : dnnl_forward_training,
            dnnl_convolution_direct, &src_a, &wei_a, k->bias ? &bias_a : NULL, &dst_a, st, dil,
            pl, pr))
        goto done;
    if (k->kind == CT_DNNL_FWD) {
        if (dnnl_primitive_desc_create(&pd, &fd, attr, g_eng, NULL)) goto done;
    } else {
        if (dnnl_primitive_desc_create(&fpd, &fd, NULL, g_eng, NULL)) goto done;
        if (k->kind == CT_DNNL_BWD_DATA) {
            if (dnnl_dilated_convolution_backward_data_desc_init(&bd_, dnnl_convolution_direct,
                                                                 &src_a, &wei_a, &dst_a, st, dil,
                                                                 pl, pr))
                goto done;
        } else if (dnnl_dilated_convolution_backward_weights_desc_init(
                       &bd_, dnnl_convolution_direct, &src_a, &wei_a, NULL, &dst_a, st, dil, pl,
                       pr)) {
            goto done;
        }
        if (dnnl_primitive_desc_create(&pd, &bd_, attr, g_eng, fpd)) goto done;
    }
    if (dnnl_primitive_create(&e->prim, pd)) goto done;
#define MD(q) dnnl_primitive_desc_query_md(pd, q, 0)
    const dnnl_memory_desc_t *smd = MD(dnnl_query_scratchpad_md);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (e->scratch_bytes && dnnl_memory_create(&e->scratch, smd, g_eng, DNNL_MEMORY_NONE))
        goto done;
    int bad = 0;
    switch (k->kind) {
    case CT_DNNL_FWD:
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_SRC, 0, &src_u, MD(dnnl_query_src_md), k->blk & 1);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_WEIGHTS, 0, &wei_u, MD(dnnl_query_weights_md), 0);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_DST, 1, &dst_u, MD(dnnl_query_dst_md), k->blk & 2);
        if (k->bias)
            bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_BIAS, 0, &bias_u,
                            dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), 0);
        break;
    case CT_DNNL_BWD_DATA:
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_DIFF_DST, 0, &dst_u,
                        MD(dnnl_query_diff_dst_md), 0);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_WEIGHTS, 0, &wei_u, MD(dnnl_query_weights_md), 0);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_DIFF_SRC, 1, &src_u,
                        MD(dnnl_query_diff_src_md), 0);
        break;
    default:
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_SRC, 0, &src_u, MD(dnnl_query_src_md), 0);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_DIFF_DST, 0, &dst_u,
                        MD(dnnl_query_diff_dst_md), 0);
        bad |= arg_init(&e->arg[e->narg++], DNNL_ARG_DIFF_WEIGHTS, 1, &wei_u,
                        MD(dnnl_query_diff_weights_md), 0);
        break;
    }
#undef MD
    rc = bad ? -1 : 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

void *ct__dnnl_cache_get(void *tab, int n, size_t esz, size_t koff, const void *key, size_t ksz,
                         int (*build)(void *e, void *ctx), void (*release)(void *e), void *ctx) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = key;
    for (size_t i = 0; i < ksz; i++) h = (h ^ p[i]) * 1099511628211ull;
    /* 4-way set: the slots h, h+1, h+2, h+3 */
    ct__dnnl_head *victim = NULL;
    for (int j = 0; j < 4; j++) {
        ct__dnnl_head *e = (ct__dnnl_head *)((char *)tab + (size_t)((h + (uint64_t)j) % (uint64_t)n) * esz);
        if (e->used && memcmp((char *)e + koff, key, ksz) == 0) {
            e->stamp = ++g_clock;
            return e;
        }
        /* an empty slot, else the least recently used one */
        if (!victim || (victim->used && (!e->used || e->stamp < victim->stamp))) victim = e;
    }
    release(victim);
    memcpy((char *)victim + koff, key, ksz);
    if (build(victim, ctx) != 0) { /* keep the negative answer, free the rest */
        release(victim);
        memcpy((char *)victim + koff, key, ksz);
        victim->used = -1;
    } else {
        victim->used = 1;
    }
    victim->stamp = ++g_clock;
    return victim;
}

static int conv_build(void *e, void *ctx) {
    (void)ctx;
    return entry_build(e);
}
static void conv_release(void *e) { entry_free(e); }

static dnnl_entry *lookup(const dnnl_key *k) {
    return ct__dnnl_cache_get(g_cache, CT_DNNL_CACHE, sizeof g_cache[0], offsetof(dnnl_entry, key), k, sizeof *k,
                              conv_build, conv_release, NULL);
}

/* ---- reordered weights of evaluation-time convolutions ------------------
 * A forward convolution reorders its weights into oneDNN's blocked layout
 * on every call: for ResNet-50 at batch 1 (AVX-512) that was 15.8 of ~50 ms,
 * more than the convolutions themselves.  When the weights cannot change
 * under the call's feet -- the caller passes their identity only in
 * inference mode or for weights that do not require grad (conv.c) -- the
 * reordered copy is kept, keyed by the storage's uid, the offset and the
 * primitive's key, and valid while the storage's version (every in-place
 * op bumps it) and its exposed count (every ct_data_ptr call bumps it) are
 * those it was made at.  The least recently used copies go beyond
 * CT_DNNL_WCACHE_BYTES; a freed storage drops its copies
 * (ct__storage_free_hook_add). */
#define CT_DNNL_WCACHE 256
#define CT_DNNL_WCACHE_BYTES ((size_t)256 << 20)

typedef struct wc_entry {
    ct_dslot d; /* the storage, its stamps, the reordered copy (derived.h) */
    int64_t off;
    dnnl_key key;
    uint64_t stamp;
} wc_entry;

static wc_entry g_wc[CT_DNNL_WCACHE];
static size_t g_wc_bytes;
static long long g_wc_hits;

long long ct__dnnl_wcache_hits(void) { return ct__dcache_count(&g_lock, &g_wc_hits); }

static void wc_forget(uint64_t uid) { /* a storage free hook */
    ct__dslots_forget_locked(&g_lock, g_wc, CT_DNNL_WCACHE, sizeof g_wc[0], uid, &g_wc_bytes);
}

/* The cached copy of these weights in this primitive's layout: reused when
 * still valid, else (re)made by the reorder.  NULL when it cannot be kept
 * (the caller then reorders into a temporary as usual). */
static void *wc_get(const ct__dnnl_wid *w, const dnnl_key *k, dnnl_arg *a) {
    if (!w || !w->s || !w->s->uid || a->inner_bytes > CT_DNNL_WCACHE_BYTES / 2) return NULL;
    wc_entry *c = NULL, *victim = NULL;
    for (int i = 0; i < CT_DNNL_WCACHE && !c; i++) {
        wc_entry *x = &g_wc[i];
        if (x->d.uid == w->s->uid && x->off == w->off && !memcmp(&x->key, k, sizeof *k)) c = x;
        else if (!victim || (victim->d.uid && (!x->d.uid || x->stamp < victim->stamp))) victim = x;
    }
    if (c && ct__dslot_fresh(&c->d, w->s)) {
        c->stamp = ++g_clock;
        g_wc_hits++;
        return c->d.buf;
    }
    if (c) ct__dslot_drop(&c->d, sizeof *c, &g_wc_bytes); /* stale */
    else c = victim;
    while (g_wc_bytes + a->inner_bytes > CT_DNNL_WCACHE_BYTES) { /* least recently used out */
        wc_entry *lru = NULL;
        for (int i = 0; i < CT_DNNL_WCACHE; i++)
            if (g_wc[i].d.uid && (!lru || g_wc[i].stamp < lru->stamp)) lru = &g_wc[i];
        if (!lru) break;
        ct__dslot_drop(&lru->d, sizeof *lru, &g_wc_bytes);
    }
    if (c->d.uid) ct__dslot_drop(&c->d, sizeof *c, &g_wc_bytes);
    void *buf = ct__malloc_aligned(a->inner_bytes);
    if (!buf) return NULL;
    if (dnnl_memory_set_data_handle(a->inner, buf)) {
        ct__free_aligned(buf, (void *)(uintptr_t)a->inner_bytes);
        return NULL;
    }
    /* the stamps before the reorder reads the weights */
    ct__dslot_note(&c->d, w->s, wc_forget);
    dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->inner}};
    if (dnnl_primitive_execute(a->reorder, g_stream, 2, r) || dnnl_stream_wait(g_stream)) {
        ct__free_aligned(buf, (void *)(uintptr_t)a->inner_bytes);
        memset(c, 0, sizeof *c);
        return NULL;
    }
    c->off = w->off;
    c->key = *k;
    c->stamp = ++g_clock;
    ct__dslot_hold(&c->d, buf, a->inner_bytes, &g_wc_bytes);
    return buf;
}

static int run(dnnl_entry *e, void *const *ptrs, const ct__dnnl_wid *wid) {
    dnnl_exec_arg_t xa[6];
    void *tmp[4] = {0}, *scratch = NULL;
    int nx = 0, rc = -1;
    for (int i = 0; i < e->narg; i++) {
        dnnl_arg *a = &e->arg[i];
        if (dnnl_memory_set_data_handle(a->user, ptrs[i])) goto done;
        void *cached = a->inner && a->id == DNNL_ARG_WEIGHTS && !a->out && e->key.kind == CT_DNNL_FWD
                           ? wc_get(wid, &e->key, a)
                           : NULL;
        if (cached) {
            if (dnnl_memory_set_data_handle(a->inner, cached)) goto done;
        } else if (a->inner) {
            tmp[i] = ct__malloc_aligned(a->inner_bytes);
            if (!tmp[i] || dnnl_memory_set_data_handle(a->inner, tmp[i])) goto done;
            if (a->tr[0] > 0) {
                if (!a->out) transpose_planes(ptrs[i], tmp[i], a->tr[0], a->tr[1], a->tr[2]);
            } else if (!a->out) {
                dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->inner}};
                if (dnnl_primitive_execute(a->reorder, g_stream, 2, r)) goto done;
            }
        }
        xa[nx].arg = a->id;
        xa[nx++].memory = a->inner ? a->inner : a->user;
    }
    if (e->scratch) {
        scratch = ct__malloc_aligned(e->scratch_bytes);
        if (!scratch || dnnl_memory_set_data_handle(e->scratch, scratch)) goto done;
        xa[nx].arg = DNNL_ARG_SCRATCHPAD;
        xa[nx++].memory = e->scratch;
    }
    if (dnnl_primitive_execute(e->prim, g_stream, nx, xa)) goto done;
    for (int i = 0; i < e->narg; i++) {
        dnnl_arg *a = &e->arg[i];
        if (a->inner && a->out && a->tr[0] > 0) {
            if (dnnl_stream_wait(g_stream)) goto done;
            transpose_planes(tmp[i], ptrs[i], a->tr[0], a->tr[2], a->tr[1]);
        } else if (a->inner && a->out) {
            dnnl_exec_arg_t r[2] = {{DNNL_ARG_FROM, a->inner}, {DNNL_ARG_TO, a->user}};
            if (dnnl_primitive_execute(a->reorder, g_stream, 2, r)) goto done;
        }
    }
    rc = dnnl_stream_wait(g_stream) ? -1 : 0;
done:
    for (int i = 0; i < e->narg; i++)
        if (tmp[i]) ct__free_aligned(tmp[i], (void *)(uintptr_t)e->arg[i].inner_bytes);
    if (scratch) ct__free_aligned(scratch, (void *)(uintptr_t)e->scratch_bytes);
    return rc;
}

/* ---- the engine, the stream, the lock (dnnl_impl.h) ---------------------- */
int ct__dnnl_enter(dnnl_engine_t *eng, dnnl_stream_t *stream) {
    pthread_mutex_lock(&g_lock);
    if (!g_init) {
        g_init = -1;
        if (dnnl_engine_create(&g_eng, dnnl_cpu, 0) == dnnl_success) {
            if (dnnl_stream_create(&g_stream, g_eng, dnnl_stream_default_flags) == dnnl_success)
                g_init = 1;
            else
                dnnl_engine_destroy(g_eng);
        }
    }
    *eng = g_eng;
    *stream = g_stream;
    return g_init == 1;
}

void ct__dnnl_leave(void) { pthread_mutex_unlock(&g_lock); }

int ct__dnnl_threads_begin(double flops, int nthreads, int *threads) {
#ifdef _OPENMP
    int cur = omp_get_max_threads(), want = nthreads > 0 && nthreads < cur ? nthreads : cur;
    if (want > 1 && ct__par_too_small(flops)) want = 1;
    *threads = want;
    if (want == cur) return 0;
    omp_set_num_threads(want);
    return cur;
#else
    (void)flops;
    (void)nthreads;
    *threads = 1;
    return 0;
#endif
}

/* ---- routing ------------------------------------------------------------ */
int ct__dnnl_env_mode(int *slot, const char *var) {
    int mode = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (mode == -2) {
        const char *e = getenv(var);
        mode = e && *e == '0' ? 0 : e && *e == '1' ? 1 : -1;
        __atomic_store_n(slot, mode, __ATOMIC_RELAXED);
    }
    return mode;
}

static int g_mode = -2; /* -2 unread, -1 the rule, 0 never, 1 always */

void ct__dnnl_set_mode(int mode) { __atomic_store_n(&g_mode, mode < 0 ? -1 : mode ? 1 : 0, __ATOMIC_RELAXED); }

static int mode_now(void) { return ct__dnnl_env_mode(&g_mode, "CT_DNNL"); }

int ct__dnnl_allowed(void) { return mode_now() != 0 && !ct_are_deterministic_algorithms_enabled(); }

int ct__dnnl_want(int kind, const int64_t *geom, const ct_p_conv *win) {
    int mode = mode_now();
    if (mode == 0 || ct_are_deterministic_algorithms_enabled()) return 0;
    if (mode == 1) return 1;
    if (ct__route[CT_ROUTE_CONV]) { /* max-autotune's choice (ops/route.h); CT_DNNL fixes it */
        ct__route_seen[CT_ROUTE_CONV] = true;
        return ct__route[CT_ROUTE_CONV] == 2;
    }
    /* The rule, from interleaved runs on this machine (AVX2, 2 threads; the
     * cnn_train, ResNet-50 and VGG-16 shapes): windows larger than one
     * pixel go to oneDNN (its direct AVX2 kernels: 0.4-0.95x our im2col +
     * GEMM time, training and inference); 1x1 convolutions stay on ours,
     * which are plain GEMMs on the NCHW tensors, where oneDNN pays the
     * reorders to and from its blocked layouts (1.0-1.4x ours in training
     * on 14x14 .. 56x56 planes), except on output planes of at most 64
     * positions (ResNet's 7x7 stage: 0.5-0.9x ours) and in the forward of
     * a single image (ResNet-50 batch-1 inference, all convs through
     * oneDNN: 143-149 ms vs 172-185 ms with its 1x1 convs on ours). */
    if (kind == CT_DNNL_FWD && geom[0] == 1) return 1;
    /* Weight gradients of windowed convolutions with many channel pairs
     * (C/groups x Co >= 128 x 256) stay on ours: one GEMM per image of
     * [Co, H*W] @ [H*W, C*k] after im2col runs near the GEMM peak, where
     * oneDNN 2.7's AVX2 backward-weights kernel reached ~40%.  Measured per
     * layer (3x3, stride 1, 2 threads, ours / oneDNN time): batch 4: 128->256
     * at 56^2 0.65, 256->256 at 56^2 0.63, 256->512 at 28^2 0.61, 512->512
     * at 28^2 0.55 and at 14^2 0.82; batch 8: 256->256 at 14^2 0.86,
     * 512->512 at 7^2 0.77.  Fewer channels stay on oneDNN: 128->128 at
     * 112^2 1.05..1.10, 64->64 at 224^2 1.56, 128->128 at 28^2 (batch 8)
     * 1.04, 3->32 and 32->64 at batch 64 (the CNN case) 2.7 and 1.8.  A
     * VGG-16 training step (batch 4): 4309 -> 3860 ms median; ResNet-50
     * (batch 8): 2620 -> 2542 ms. */
    const int64_t *k = win->kernel_size, *grid = win->grid_size;
    if (kind == CT_DNNL_BWD_WEIGHTS && k[0] * k[1] * k[2] > 1 &&
        geom[1] / geom[3] * geom[2] >= 128 * 256)
        return 0;
    return k[0] * k[1] * k[2] > 1 || grid[0] * grid[1] * grid[2] <= 64;
}

int ct__dnnl_conv(int kind, const int64_t *geom, const ct_p_conv *win, void *img, void *w,
                  void *bias, void *grid, const ct__dnnl_wid *wid, int bf16) {
    dnnl_key k;
    memset(&k, 0, sizeof k);
    k.kind = kind;
    k.bf16 = bf16 != 0;
    k.N = geom[0]; k.C = geom[1]; k.Co = geom[2]; k.groups = geom[3];
    k.bias = bias != NULL;
    k.relu = kind == CT_DNNL_FWD && win->post_relu;
    k.blk = kind == CT_DNNL_FWD ? (int)win->blocked : 0;
    k.fpmath = !bf16 && ct__matmul_precision() > 0 && ct__cpu_has_bf16_dot();
    if (k.N <= 0 || k.C <= 0 || k.Co <= 0 || k.groups <= 0) return 0;
    int deep = 0;
    for (int j = 0; j < 3; j++) {
        k.img[j] = win->image_size[j];
        k.grid[j] = win->grid_size[j];
        k.k[j] = win->kernel_size[j];
        k.s[j] = win->stride[j];
        k.p[j] = win->padding[j];
        k.d[j] = win->dilation[j];
        if (k.img[j] <= 0 || k.grid[j] <= 0 || k.k[j] <= 0) return 0;
    }
    deep = k.img[0] != 1 || k.grid[0] != 1 || k.k[0] != 1 || k.p[0] != 0;
    k.nd = deep ? 3 : 2;
    if (k.blk && (deep || k.groups != 1)) return 0;
    /* a convolution too small to pay for waking the other threads
     * (ct__par_too_small: only under the passive wait policy) runs on the
     * calling thread: created and run with a 1-thread ICV, its own cache
     * entry (k.threads) */
    double flops = 2.0 * (double)k.N * (double)k.Co * (double)(k.C / k.groups);
    for (int j = 0; j < 3; j++) flops *= (double)k.grid[j] * (double)k.k[j];
    int saved = ct__dnnl_threads_begin(flops, 0, &k.threads);
    int ok = 0;
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    if (ct__dnnl_enter(&eng, &stream)) {
        dnnl_entry *e = lookup(&k);
        if (e->h.used == 1) {
            void *ptrs[4];
            switch (kind) {
            case CT_DNNL_FWD: ptrs[0] = img; ptrs[1] = w; ptrs[2] = grid; ptrs[3] = bias; break;
            case CT_DNNL_BWD_DATA: ptrs[0] = grid; ptrs[1] = w; ptrs[2] = img; break;
            default: ptrs[0] = img; ptrs[1] = grid; ptrs[2] = w; break;
            }
            ok = run(e, ptrs, kind == CT_DNNL_FWD ? wid : NULL) == 0;
        }
    }
    ct__dnnl_leave();
    ct__blas_guard_end(saved);
    return ok;
}
#else
long long ct__dnnl_wcache_hits(void) { return -1; }
#endif
