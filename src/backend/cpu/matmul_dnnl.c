/* matmul_dnnl.c (cpu) -- matrix products through oneDNN's matmul primitive
 * (matmul_dnnl.h).  oneDNN is where a CPU's AMX tiles are reached: its
 * brgemm matmul multiplies bf16 (and, on AMX-FP16 parts, f16) tiles at 16x
 * the AVX-512 f32 FMA rate per core, where the own GEMMs (gemm_avx2.c,
 * gemm_avx512.c's vdpbf16ps kernel) top out at 1x and 2x.  Torch's CPU
 * bf16 matmul takes the same primitive on such CPUs (mkldnn_bf16_gemm).
 *
 * The operands are described to oneDNN as they are: plain 2-D memory with
 * the caller's strides (a transposed operand is a stride swap), so there
 * are no copies on our side; oneDNN's matmul packs B into its tile layout
 * itself.  A layout it refuses (strides it has no kernel for) is answered
 * -2 once and remembered, and the own GEMM runs.  alpha is oneDNN's output
 * scale, beta a sum post-op, the bias its bias input.
 *
 * Primitives are cached per key (shape, strides, types, alpha, beta, bias,
 * fpmath, thread count) in a small table, the least recently used replaced;
 * the memory objects carry no buffers (DNNL_MEMORY_NONE, set per call) and
 * the scratchpad comes per call from the caching allocator, as for the
 * convolutions (conv_dnnl.c, whose engine, stream and lock this shares). */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ctorch/profiler.h"
#include "matmul_dnnl.h"

static int g_mode = -2; /* -2 unread, -1 the rule, 0 never, 1 always */

void ct__dnnl_matmul_set_mode(int mode) { __atomic_store_n(&g_mode, mode < 0 ? -1 : mode ? 1 : 0, __ATOMIC_RELAXED); }

#ifdef CT_HAVE_DNNL
#include <dnnl.h>
#include <stdlib.h>

#include "../../core/tensor_impl.h"
#include "blas.h"
#include "cpu_caps.h"
#include "dnnl_impl.h"
#include "gemm_impl.h"
#ifdef _OPENMP
#include <omp.h>
#endif

#define MM_CACHE 64

typedef struct mm_key {
    int ta, tb, tc, fpmath, threads, bias;
    float alpha, beta;
    int64_t M, N, K, sam, sak, sbk, sbn, ldc;
} mm_key;

typedef struct mm_entry {
    ct__dnnl_head h; /* used: 1 ready, -1 oneDNN refused it (the own GEMM runs) */
    mm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias, scratch;
    size_t scratch_bytes;
} mm_entry;

static mm_entry g_mm[MM_CACHE]; /* under ct__dnnl_enter's lock */
static atomic_llong g_mm_calls;

long long ct__dnnl_matmul_calls(void) { return atomic_load_explicit(&g_mm_calls, memory_order_relaxed); }

int ct__dnnl_matmul_want(int t, int fpmath, int64_t M, int64_t N, int64_t K) {
    int mode = ct__dnnl_env_mode(&g_mode, "CT_DNNL_MATMUL");
    if (mode == 0 || ct_are_deterministic_algorithms_enabled() || M < 4 || N < 4 || K < 1) return 0;
    if (mode == 1) return 1;
    /* Not measured yet: no AMX CPU has been available to this project.  The
     * rule follows the peak rates (AMX-BF16: 1024 bf16 FLOP a cycle a core,
     * against 64 f32 FLOP for AVX-512 FMAs and 128 for vdpbf16ps); the
     * session that first runs on such a CPU should time it against the own
     * kernels with CT_DNNL_MATMUL=0/1 (bench_suite's matmul_bf16 cases print
     * the route) and narrow it to the shapes where it wins. */
    if (t == CT_GEMM_BF16) return ct__cpu_has_amx(0);
    if (t == CT_GEMM_F16) return ct__cpu_has_amx(1);
    if (t == CT_GEMM_F32) return fpmath && ct__cpu_has_amx(0);
    return 0;
}

static dnnl_data_type_t dt_of(int t) {
    return t == CT_GEMM_BF16 ? dnnl_bf16 : t == CT_GEMM_F16 ? dnnl_f16 : dnnl_f32;
}

static void mm_free(mm_entry *e) {
    if (e->prim) dnnl_primitive_destroy(e->prim);
    dnnl_memory_t *m[5] = {&e->a, &e->b, &e->c, &e->bias, &e->scratch};
    for (int i = 0; i < 5; i++)
        if (*m[i]) dnnl_memory_destroy(*m[i]);
    memset(e, 0, sizeof *e);
}

static int mm_build(mm_entry *e, dnnl_engine_t eng) {
    const mm_key *k = &e->key;
    dnnl_memory_desc_t a, b, c, bias;
    dnnl_dims_t da = {k->M, k->K}, db = {k->K, k->N}, dc = {k->M, k->N}, dbias = {1, k->N};
    dnnl_dims_t sa = {k->sam, k->sak}, sb = {k->sbk, k->sbn}, sc = {k->ldc, 1}, sbias = {k->N, 1};
    if (dnnl_memory_desc_init_by_strides(&a, 2, da, dt_of(k->ta), sa) ||
        dnnl_memory_desc_init_by_strides(&b, 2, db, dt_of(k->tb), sb) ||
        dnnl_memory_desc_init_by_strides(&c, 2, dc, dt_of(k->tc), sc) ||
        dnnl_memory_desc_init_by_strides(&bias, 2, dbias, dnnl_f32, sbias))
        return -1;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &a, &b, k->bias ? &bias : NULL, &c)) return -1;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int rc = -1;
    if (dnnl_primitive_attr_create(&attr)) return -1;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) goto done;
    if (k->fpmath && dnnl_primitive_attr_set_fpmath_mode(attr, dnnl_fpmath_mode_bf16)) goto done;
    if (k->alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha)) goto done;
    if (k->beta != 0.0f && !k->bias) { /* C = alpha A B + beta C */
        if (dnnl_post_ops_create(&po) || dnnl_post_ops_append_sum(po, k->beta) ||
            dnnl_primitive_attr_set_post_ops(attr, po))
            goto done;
    }
    if (dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL)) goto done;
    if (dnnl_primitive_create(&e->prim, pd)) goto done;
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    e->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (e->scratch_bytes && dnnl_memory_create(&e->scratch, smd, eng, DNNL_MEMORY_NONE)) goto done;
    if (dnnl_memory_create(&e->a, &a, eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&e->b, &b, eng, DNNL_MEMORY_NONE) ||
        dnnl_memory_create(&e->c, &c, eng, DNNL_MEMORY_NONE) ||
        (k->bias && dnnl_memory_create(&e->bias, &bias, eng, DNNL_MEMORY_NONE)))
        goto done;
    rc = 0;
done:
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return rc;
}

static int mm_build_cb(void *e, void *eng) { return mm_build(e, eng); }
static void mm_free_cb(void *e) { mm_free(e); }

/* 0 done, -1 out of memory, -2 nothing written, -3 failed after C may have
 * been written */
static int mm_run(mm_entry *e, dnnl_stream_t s, const void *A, const void *B, const float *bias, void *C) {
    void *scratch = NULL;
    dnnl_exec_arg_t xa[5];
    int nx = 0, rc = -2;
    if (dnnl_memory_set_data_handle(e->a, (void *)A) || dnnl_memory_set_data_handle(e->b, (void *)B) ||
        dnnl_memory_set_data_handle(e->c, C) || (e->bias && dnnl_memory_set_data_handle(e->bias, (void *)bias)))
        return -2;
    xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_SRC, e->a};
    xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_WEIGHTS, e->b};
    xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_DST, e->c};
    if (e->bias) xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->bias};
    if (e->scratch) {
        scratch = ct__malloc_aligned(e->scratch_bytes);
        if (!scratch) return -1;
        if (dnnl_memory_set_data_handle(e->scratch, scratch)) goto done;
        xa[nx++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, e->scratch};
    }
    rc = dnnl_primitive_execute(e->prim, s, nx, xa) || dnnl_stream_wait(s) ? -3 : 0;
done:
    if (scratch) ct__free_aligned(scratch, (void *)(uintptr_t)e->scratch_bytes);
    return rc;
}

int ct__dnnl_matmul(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                    int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                    const float *bias, void *C, int tc, int64_t ldc, int nthreads, int fpmath) {
    if (M <= 0 || N <= 0 || K <= 0 || !A || !B || !C) return -2;
    if (bias && (alpha != 1.0f || beta != 1.0f)) return -2; /* bias unscaled, C not read */
    if (ta != tb || (ta != CT_GEMM_F32 && ta != CT_GEMM_BF16 && ta != CT_GEMM_F16)) return -2;
    if (tc != CT_GEMM_F32 && tc != ta) return -2;
#ifdef _OPENMP
    if (omp_in_parallel()) return -2; /* one matrix a thread: the caller's batch loop */
#endif
    mm_key k;
    memset(&k, 0, sizeof k); /* the key is hashed and compared as bytes */
    k.ta = ta;
    k.tb = tb;
    k.tc = tc;
    k.fpmath = fpmath && ta == CT_GEMM_F32;
    k.bias = bias != NULL;
    k.alpha = alpha;
    k.beta = bias ? 0.0f : beta;
    k.M = M; k.N = N; k.K = K;
    k.sam = sam; k.sak = sak; k.sbk = sbk; k.sbn = sbn; k.ldc = ldc;
    /* a stride of a size-1 dim is never stepped: normalized so that the
     * layouts that are equal share one primitive */
    if (M == 1) k.sam = K;
    if (K == 1) { k.sak = 1; k.sbk = N; }
    if (N == 1) k.sbn = 1;
    int saved = ct__dnnl_threads_begin(2.0 * (double)M * (double)N * (double)K, nthreads, &k.threads);
    dnnl_engine_t eng;
    dnnl_stream_t s;
    int rc = -2;
    if (ct__dnnl_enter(&eng, &s)) {
        mm_entry *e = ct__dnnl_cache_get(g_mm, MM_CACHE, sizeof g_mm[0], offsetof(mm_entry, key), &k, sizeof k,
                                         mm_build_cb, mm_free_cb, eng);
        if (e->h.used == 1) rc = mm_run(e, s, A, B, bias, C);
    }
    ct__dnnl_leave();
    ct__blas_guard_end(saved);
    if (rc == 0) atomic_fetch_add_explicit(&g_mm_calls, 1, memory_order_relaxed);
    /* an execution that failed after it may have written C: the caller must
     * not recompute from it unless C was not an input (beta 0) */
    if (rc == -3) rc = beta == 0.0f || bias ? -2 : -1;
    return rc;
}

#else /* built without oneDNN: no product is taken */
int ct__dnnl_matmul(int64_t M, int64_t N, int64_t K, float alpha, const void *A, int ta, int64_t sam,
                    int64_t sak, const void *B, int tb, int64_t sbk, int64_t sbn, float beta,
                    const float *bias, void *C, int tc, int64_t ldc, int nthreads, int fpmath) {
    (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)ta; (void)sam; (void)sak; (void)B; (void)tb;
    (void)sbk; (void)sbn; (void)beta; (void)bias; (void)C; (void)tc; (void)ldc; (void)nthreads; (void)fpmath;
    return -2;
}
int ct__dnnl_matmul_want(int t, int fpmath, int64_t M, int64_t N, int64_t K) {
    (void)t; (void)fpmath; (void)M; (void)N; (void)K;
    return 0;
}
long long ct__dnnl_matmul_calls(void) { return -1; }
#endif
