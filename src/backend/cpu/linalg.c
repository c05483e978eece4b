/* linalg.c (cpu) -- kernels of the linalg family.
 *
 * k_gemm: C[batch..., M, N] = alpha * A[batch..., M, K] @ B[batch..., K, N]
 *         + beta * C, where C (out[0]) is contiguous and A, B (in[0], in[1])
 *         have any strides (batch strides may be 0 for broadcast batch
 *         dims).  f32/f64 go to CBLAS: a matrix whose rows or columns have
 *         unit stride is passed as is (CblasNoTrans / CblasTrans), only a
 *         matrix with neither unit stride is packed.  Integer dtypes (and
 *         bool, as logical and/or) use a simple row-accumulator kernel.
 *         a->p.linalg.alpha, .beta (beta == 0: C is not read).
 *         With a third input (a bias: one contiguous row of N, same dtype),
 *         C is not read: beta's operand is the bias broadcast over the rows
 *         (torch.addmm / linear with a 1-D bias).  The own GEMM adds it as
 *         it stores the tiles; the other paths fill C's rows with it first.
 *         On AVX2 CPUs f32 goes to ctorch's own GEMM instead where its
 *         routing rule says it wins (gemm_avx2.c; any strides, no copy), and
 *         a batch of >= 2 matrices per thread then runs whole matrices in
 *         parallel (its results do not depend on the thread count).
 * k_trace, k_cross, k_cdist: see below.
 */
#include <cblas.h>
#include <limits.h>
#include <math.h>

#include "../../ops/iter.h"
#include "../../ops/route.h"
#include "blas.h"
#include "cpu_caps.h"
#include "ew_vec.h"
#include "gemm_impl.h"

/* Decides how BLAS can read a rows x cols matrix with element strides
 * rs/cs.  Returns 1 and sets trans and ld when no copy is needed. */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans,
                       int64_t *ld) {
    if (rows <= 1) {
        if (cs == 1 || cols <= 1) { *trans = 0; *ld = cols > 1 ? cols : 1; return 1; }
        if (cs >= 1) { *trans = 1; *ld = cs; return 1; }
        return 0;
    }
    if (cols <= 1) {
        if (rs >= 1) { *trans = 0; *ld = rs; return 1; }
        return 0;
    }
    if (cs == 1 && rs >= cols) { *trans = 0; *ld = rs; return 1; }
    if (rs == 1 && cs >= rows) { *trans = 1; *ld = cs; return 1; }
    return 0;
}

/* packs a strided rows x cols matrix into a contiguous row-major buffer */
static void pack(void *dst, const char *src, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                 size_t es) {
    char *d = dst;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++, d += es)
            memcpy(d, src + (r * rs + c * cs) * (int64_t)es, es);
}

typedef struct gemm_job {
    ct_dtype dt;
    int64_t M, N, K;
    int64_t sam, sak, sbk, sbn; /* element strides inside one matrix */
    double alpha, beta;
    const float *bias; /* own GEMM only: beta's operand is this row (C not read) */
    int own;      /* f32 through ctorch's AVX2 GEMM (gemm_impl.h), not BLAS */
    int stream;   /* outer_f32: C written with non-temporal stores (see there) */
    int half;     /* A, B f16/bf16 (CT_GEMM_*), C f32: ct__gemm_avx2_mixed */
    int bfdot;    /* products on bf16 dot products (ct__gemm_bf16dot): A, B bf16
                   * (half), or f32 under float32 matmul precision "medium" */
    int threads;  /* threads for it */
    const float *bpre; /* own GEMM: B packed beforehand (pp_get), or NULL */
    int dnnl;     /* try oneDNN's matmul first (matmul_dnnl.h: AMX CPUs), A, B of
                   * type half (or f32), C f32 */
    int fpmath;   /* with it: f32 operands may compute as bf16 ("high", "medium") */
} gemm_job;

/* ---- kept packed weights (ct_p_linalg.keep_b) ------------------------------------
 * A weight ct_linear may keep (inference mode, or it does not require grad)
 * is packed once into the own GEMM's panel layout (ct__sgemm_avx2_prepack)
 * and reused by every later product with it: a BERT-base batch-1
 * inference spent ~7% of its time packing the same weights again on every
 * call (pack_b; torch.compile's freezing prepacks weights the same way).
 * A copy is keyed by the storage's uid, the view's offset and strides, the
 * sizes and the K blocking, and valid while the storage's version (in-place
 * ops) and exposed count (ct_data_ptr) are those it was made at, as the
 * convolution's weight cache (conv_dnnl.c).  At most CT_PP_MB MiB (256;
 * the environment variable CT_GEMM_PREPACK_MB sets it, 0 turns it off) are
 * held: a weight that does not fit is packed per call as before (no
 * eviction, which would repack on every call of a model larger than the
 * cache); stale copies are replaced, a freed storage drops its copies.  A
 * weight is packed at its second use with the same contents: its first
 * only notes it, so a weight made for one call costs nothing extra. */
#include <pthread.h>

#include "derived.h"
#include "matmul_dnnl.h"
#include "wshadow.h"

#define CT_PP_SLOTS 1024
typedef struct pp_entry {
    ct_dslot d; /* the storage, its stamps, the packed copy (derived.h) */
    int64_t off, sbk, sbn, K, N;
    int kc;
} pp_entry;
static pp_entry g_pp[CT_PP_SLOTS];
static size_t g_pp_bytes, g_pp_cap = (size_t)-1;
static long long g_pp_hits;
static pthread_mutex_t g_pp_mu = PTHREAD_MUTEX_INITIALIZER;

long long ct__gemm_prepack_hits(void) { return ct__dcache_count(&g_pp_mu, &g_pp_hits); }

static void pp_forget(uint64_t uid) { /* a storage free hook */
    ct__dslots_forget_locked(&g_pp_mu, g_pp, CT_PP_SLOTS, sizeof g_pp[0], uid, &g_pp_bytes);
}

/* B (f32, host) packed, or NULL (then the GEMM packs it itself) */
static const float *pp_get(const ct_tensor *B, int64_t K, int64_t N, int64_t sbk, int64_t sbn) {
    ct_storage *st = B->storage;
    if (!st || !st->uid || K <= 0 || N <= 0) return NULL;
    pthread_mutex_lock(&g_pp_mu);
    if (g_pp_cap == (size_t)-1) {
        const char *e = getenv("CT_GEMM_PREPACK_MB");
        long mb = e && *e ? atol(e) : 256;
        g_pp_cap = mb > 0 ? (size_t)mb << 20 : 0;
    }
    const float *r = NULL;
    int kc = ct__sgemm_avx2_kc(K);
    pp_entry *hit = NULL, *empty = NULL;
    for (int i = 0; i < CT_PP_SLOTS && !hit; i++) {
        pp_entry *e = &g_pp[i];
        if (!e->d.uid) { if (!empty) empty = e; continue; }
        if (e->d.uid == st->uid && e->off == B->offset && e->sbk == sbk && e->sbn == sbn && e->K == K &&
            e->N == N && e->kc == kc)
            hit = e;
    }
    bool fresh = hit && ct__dslot_fresh(&hit->d, st);
    if (fresh && hit->d.buf) {
        g_pp_hits++;
        r = hit->d.buf;
        goto out;
    }
    size_t bytes = (size_t)ct__sgemm_avx2_prepack_floats(N, K) * sizeof(float);
    if (fresh) {
        /* its second use: packed now (a weight made for one call -- BERT's
         * concatenated q/k/v weights -- is seen once and never packed) */
        if (g_pp_bytes + bytes > g_pp_cap) goto out;
        float *buf = ct__malloc_aligned(bytes);
        if (!buf) goto out;
        ct__sgemm_avx2_prepack(N, K, (const float *)ct__ptr(B), sbk, sbn, buf);
        ct__dslot_hold(&hit->d, buf, bytes, &g_pp_bytes);
        r = buf;
        goto out;
    }
    if (hit) { /* stale: the weight changed; seen once again */
        ct__dslot_drop(&hit->d, sizeof *hit, &g_pp_bytes);
        empty = hit;
    }
    if (!empty || g_pp_bytes + bytes > g_pp_cap) goto out;
    ct__dslot_note(&empty->d, st, pp_forget);
    empty->off = B->offset;
    empty->sbk = sbk;
    empty->sbn = sbn;
    empty->K = K;
    empty->N = N;
    empty->kc = kc;
out:
    pthread_mutex_unlock(&g_pp_mu);
    return r;
}

static int blas_one(const gemm_job *j, const char *A, const char *B, char *C) {
    if (j->dnnl) { /* -2: oneDNN did not take it (C holds nothing the own GEMM reads) */
        int t = j->half ? j->half : CT_GEMM_F32;
        const float *bias = j->bias;
        if (bias && (j->alpha != 1.0 || j->beta != 1.0)) { /* oneDNN's bias is unscaled: C's rows = bias, then beta C */
            for (int64_t r = 0; r < j->M; r++) memcpy(C + r * j->N * (int64_t)sizeof(float), bias, sizeof(float) * (size_t)j->N);
            bias = NULL;
        }
        int r = ct__dnnl_matmul(j->M, j->N, j->K, (float)j->alpha, A, t, j->sam, j->sak, B, t, j->sbk, j->sbn,
                                (float)j->beta, bias, C, CT_GEMM_F32, j->N, j->threads, j->fpmath);
        if (r != -2) return r;
    }
    if (j->bfdot) {
        int t = j->half ? j->half : CT_GEMM_F32;
        return ct__gemm_bf16dot(j->M, j->N, j->K, (float)j->alpha, A, t, j->sam, j->sak, B, t, j->sbk, j->sbn,
                                (float)j->beta, j->bias, C, CT_GEMM_F32, j->N, j->threads);
    }
    if (j->half) /* f16/bf16 converted as they are packed, any strides */
        return ct__gemm_avx2_mixed(j->M, j->N, j->K, (float)j->alpha, A, j->half, j->sam, j->sak,
                                   B, j->half, j->sbk, j->sbn, (float)j->beta, j->bias,
                                   (float *)C, j->N, j->threads);
    if (j->own && j->bpre)
        return ct__sgemm_avx2_prepacked(j->M, j->N, j->K, (float)j->alpha, (const float *)A, j->sam, j->sak,
                                        j->bpre, (float)j->beta, j->bias, (float *)C, j->N, j->threads);
    if (j->own) /* any strides, no copy */
        return ct__sgemm_avx2(j->M, j->N, j->K, (float)j->alpha, (const float *)A, j->sam, j->sak,
                              (const float *)B, j->sbk, j->sbn, (float)j->beta, j->bias,
                              (float *)C, j->N, j->threads);
    size_t es = ct_dtype_size(j->dt);
    int ta, tb;
    int64_t lda, ldb;
    void *pa = NULL, *pb = NULL;
    if (!blas_layout(j->M, j->K, j->sam, j->sak, &ta, &lda)) {
        pa = malloc((size_t)(j->M * j->K) * es);
        if (!pa) return -1;
        pack(pa, A, j->M, j->K, j->sam, j->sak, es);
        A = pa; ta = 0; lda = j->K;
    }
    if (!blas_layout(j->K, j->N, j->sbk, j->sbn, &tb, &ldb)) {
        pb = malloc((size_t)(j->K * j->N) * es);
        if (!pb) { free(pa); return -1; }
        pack(pb, B, j->K, j->N, j->sbk, j->sbn, es);
        B = pb; tb = 0; ldb = j->N;
    }
    if (lda > INT_MAX || ldb > INT_MAX) { free(pa); free(pb); return -2; }
    CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans, TB = tb ? CblasTrans : CblasNoTrans;
    int guard = ct__blas_guard_begin(2.0 * (double)j->M * (double)j->N * (double)j->K);
    if (j->dt == CT_C64) {
        float al[2] = {(float)j->alpha, 0}, be[2] = {(float)j->beta, 0};
        cblas_cgemm(CblasRowMajor, TA, TB, (int)j->M, (int)j->N, (int)j->K, al, A, (int)lda, B,
                    (int)ldb, be, C, (int)j->N);
    } else if (j->dt == CT_C128) {
        double al[2] = {j->alpha, 0}, be[2] = {j->beta, 0};
        cblas_zgemm(CblasRowMajor, TA, TB, (int)j->M, (int)j->N, (int)j->K, al, A, (int)lda, B,
                    (int)ldb, be, C, (int)j->N);
    } else if (j->dt == CT_F32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)j->M, (int)j->N, (int)j->K, (float)j->alpha, (const float *)A, (int)lda,
                    (const float *)B, (int)ldb, (float)j->beta, (float *)C, (int)j->N);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                    (int)j->M, (int)j->N, (int)j->K, j->alpha, (const double *)A, (int)lda,
                    (const double *)B, (int)ldb, j->beta, (double *)C, (int)j->N);
    ct__blas_guard_end(guard);
    free(pa);
    free(pb);
    return 0;
}

/* integer GEMM: row accumulator in uint64 (wrap-around like torch, no UB) */
#define INT_GEMM(T, NAME, ISBOOL)                                                            \
    static int NAME(const gemm_job *j, const char *A_, const char *B_, char *C_) {          \
        const T *A = (const T *)A_, *B = (const T *)B_;                                     \
        T *C = (T *)C_;                                                                     \
        uint64_t *acc = malloc(sizeof(uint64_t) * (size_t)(j->N > 0 ? j->N : 1));          \
        if (!acc) return -1;                                                                \
        uint64_t al = (uint64_t)(int64_t)j->alpha, be = (uint64_t)(int64_t)j->beta;         \
        for (int64_t i = 0; i < j->M; i++) {                                                \
            memset(acc, 0, sizeof(uint64_t) * (size_t)j->N);                                \
            for (int64_t k = 0; k < j->K; k++) {                                            \
                uint64_t av = (uint64_t)(int64_t)A[i * j->sam + k * j->sak];                \
                if (!av) continue;                                                          \
                const T *brow = B + k * j->sbk;                                             \
                if (j->sbn == 1)                                                            \
                    for (int64_t n = 0; n < j->N; n++) acc[n] += av * (uint64_t)(int64_t)brow[n]; \
                else                                                                        \
                    for (int64_t n = 0; n < j->N; n++)                                      \
                        acc[n] += av * (uint64_t)(int64_t)brow[n * j->sbn];                 \
            }                                                                               \
            T *crow = C + i * j->N;                                                         \
            for (int64_t n = 0; n < j->N; n++) {                                            \
                uint64_t r = ISBOOL ? (uint64_t)(acc[n] != 0) : al * acc[n];                \
                if (j->beta != 0) {                                                         \
                    if (ISBOOL) r = r || crow[n];                                           \
                    else r += be * (uint64_t)(int64_t)crow[n];                              \
                }                                                                           \
                crow[n] = ISBOOL ? (T)(r != 0) : (T)(int64_t)r;                             \
            }                                                                               \
        }                                                                                   \
        free(acc);                                                                          \
        return 0;                                                                           \
    }
INT_GEMM(int64_t, gemm_i64, 0)
INT_GEMM(int32_t, gemm_i32, 0)
INT_GEMM(int16_t, gemm_i16, 0)
INT_GEMM(int8_t, gemm_i8, 0)
INT_GEMM(uint8_t, gemm_u8, 0)
INT_GEMM(bool, gemm_bool, 1)

typedef int (*gemm_fn)(const gemm_job *, const char *, const char *, char *);

/* K == 1 (an outer product per matrix: what per-sample weight gradients
 * under vmap are, [B, M, 1] @ [B, 1, N]): C = alpha (a b^T) + beta C, one
 * pass over C instead of a GEMM call per matrix (BLAS and the packed GEMM
 * spend more on setup than on one multiply per element).  The product is
 * rounded as BLAS rounds it: a * b, times alpha unless alpha is 1. */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* One row a*b written with non-temporal stores: for an output far larger
 * than the caches (vmap's per-sample weight gradients, [64, 128, 3136] f32
 * = 103 MB) the plain stores first read every line they write (read for
 * ownership), which doubles the memory traffic of a pass that is nothing
 * but memory traffic.  The same products, rounded the same way. */
__attribute__((target("avx"))) static void outer_row_stream(float *crow, float ai, const float *B, int64_t N) {
    __m256 va = _mm256_set1_ps(ai);
    int64_t n = 0;
    for (; n + 8 <= N; n += 8) _mm256_stream_ps(crow + n, _mm256_mul_ps(va, _mm256_loadu_ps(B + n)));
    for (; n < N; n++) crow[n] = ai * B[n];
}
#define CT_OUTER_STREAM 1
#endif

#define OUTER_ONE(T, NAME)                                                                  \
    static int NAME(const gemm_job *j, const char *A_, const char *B_, char *C_) {         \
        const T *A = (const T *)A_, *B = (const T *)B_;                                    \
        T *C = (T *)C_;                                                                    \
        const T al = (T)j->alpha, be = (T)j->beta;                                          \
        if (OUTER_STREAM_OK(T)) {                                                          \
            for (int64_t i = 0; i < j->M; i++)                                             \
                outer_row_stream((float *)(C + i * j->N), (float)A[i * j->sam], (const float *)B, j->N); \
            _mm_sfence();                                                                  \
            return 0;                                                                      \
        }                                                                                  \
        for (int64_t i = 0; i < j->M; i++) {                                               \
            const T ai = A[i * j->sam];                                                    \
            T *crow = C + i * j->N;                                                        \
            if (j->sbn == 1 && j->alpha == 1 && j->beta == 0)                              \
                for (int64_t n = 0; n < j->N; n++) crow[n] = ai * B[n];                    \
            else                                                                           \
                for (int64_t n = 0; n < j->N; n++) {                                       \
                    T v = ai * B[n * j->sbn];                                              \
                    if (j->alpha != 1) v *= al;                                            \
                    crow[n] = j->beta == 0 ? v : v + be * crow[n];                         \
                }                                                                          \
        }                                                                                  \
        return 0;                                                                          \
    }
/* streaming: f32, B's row contiguous, C = a b^T (alpha 1, beta 0) and
 * j->stream (set by the caller for big outputs on 32-byte aligned rows) */
#ifdef CT_OUTER_STREAM
#define OUTER_STREAM_OK(T) (sizeof(T) == 4 && j->stream && j->sbn == 1 && j->alpha == 1 && j->beta == 0)
#else
#define OUTER_STREAM_OK(T) 0
#define outer_row_stream(c, a, b, n) ((void)0)
#define _mm_sfence() ((void)0)
#endif
OUTER_ONE(float, outer_f32)
#undef OUTER_STREAM_OK
#define OUTER_STREAM_OK(T) 0
OUTER_ONE(double, outer_f64)
#undef OUTER_STREAM_OK

/* A batch whose B is the same matrix for every batch (batch strides 0)
 * and whose A's batch dims and rows form one evenly strided run of rows
 * (a [B, M, K] activation against a shared [K, N] weight, as vmap's linear
 * and matmul rules make them) is one GEMM of batch * M rows: returns true
 * and the rows' stride. */
static bool fold_rows(const ct_tensor *A, const ct_tensor *B, const ct_tensor *C, int nb, int64_t *rs) {
    if (nb < 1) return false;
    for (int d = 0; d < nb; d++)
        if (C->sizes[d] > 1 && B->strides[d] != 0) return false;
    bool have = false;
    int64_t expect = 0;
    for (int d = nb; d >= 0; d--) { /* dim nb is M, then the batch dims outward */
        int64_t sz = C->sizes[d];
        if (sz == 1) continue;
        if (!have) {
            *rs = A->strides[d];
            expect = A->strides[d] * sz;
            have = true;
        } else {
            if (A->strides[d] != expect) return false;
            expect *= sz;
        }
    }
    if (!have) *rs = A->strides[nb];
    return true;
}

static ct_status k_gemm_f(ct_tensor *C, ct_tensor *A, ct_tensor *B, ct_tensor *bias,
                          const ct_args *a, int half);

/* f16/bf16 (registered on AVX2 CPUs only, ct__kernel_half): A and B are
 * read as they are by the packing of the own GEMM (f32 accumulation); C is
 * computed in f32 and rounded once (as torch rounds its f32 accumulators):
 * tile group by tile group when K fits one block of the GEMM (see below),
 * else in an f32 buffer converted at the end.  Products too thin for the 6 x 16 tiles (a
 * matrix-vector product) convert A and B to f32 and go the f32 way. */
static ct_status k_gemm(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    (void)nout;
    ct_tensor *C = out[0], *A = in[0], *B = in[1], *bias = nin > 2 ? in[2] : NULL;
    ct_dtype dt = C->dtype;
    if (dt != CT_F16 && dt != CT_BF16) return k_gemm_f(C, A, B, bias, a, 0);
    const char *opname = ct__op_info[a->op].name;
    if (A->dtype != dt || B->dtype != dt || (bias && bias->dtype != dt) || C->ndim < 2)
        return ct__error_status(CT_ERR_DTYPE, "%s: internal gemm dtype mismatch", opname);
    int nd = C->ndim;
    int thin = C->sizes[nd - 1] < 4 || C->sizes[nd - 2] < 4 || ct__cpu_cap() < CT_CAP_AVX2;
    ct_status st = CT_ERR_OOM;
    ct_tensor *Cf = NULL, *bf = NULL, *Af = NULL, *Bf = NULL;
    if (bias && !(bf = ct__contig_as(bias, CT_F32))) goto done;
    /* a product of one K block (a weight gradient over the batch's tokens)
     * rounds its tiles straight into C: no f32 C written out and converted
     * in a pass of its own; the same bits (ct__gemm_avx2_mixed_out) */
    const int ht = dt == CT_BF16 ? CT_GEMM_BF16 : CT_GEMM_F16;
    if (!thin && nd == 2 && A->ndim == 2 && B->ndim == 2 && ct__is_contiguous(C) &&
        ct__dnnl_matmul_want(ht, 0, C->sizes[0], C->sizes[1], A->sizes[1])) {
        /* oneDNN's matmul (AMX): C rounded once from its f32 sums; -2 when
         * it did not take the product (the kernels below then run) */
        int r = ct__dnnl_matmul(C->sizes[0], C->sizes[1], A->sizes[1], (float)a->p.linalg.alpha, ct__ptr(A), ht,
                                A->strides[0], A->strides[1], ct__ptr(B), ht, B->strides[0], B->strides[1],
                                (float)a->p.linalg.beta, bf ? (const float *)ct__ptr(bf) : NULL, ct__ptr(C), ht,
                                C->sizes[1], ct__num_threads(), 0);
        if (r == 0) { st = CT_OK; goto done; }
        if (r == -1) goto done;
    }
    if (!thin && nd == 2 && A->ndim == 2 && B->ndim == 2 && ct__is_contiguous(C) && (a->p.linalg.beta == 0 || bf) &&
        (!bf || ct_numel(bf) == C->sizes[1]) && dt == CT_BF16 && ct__gemm_bf16dot_ok()) {
        int r = ct__gemm_bf16dot(C->sizes[0], C->sizes[1], A->sizes[1], (float)a->p.linalg.alpha, ct__ptr(A),
                                 CT_GEMM_BF16, A->strides[0], A->strides[1], ct__ptr(B), CT_GEMM_BF16,
                                 B->strides[0], B->strides[1], (float)a->p.linalg.beta,
                                 bf ? (const float *)ct__ptr(bf) : NULL, ct__ptr(C), CT_GEMM_BF16, C->sizes[1],
                                 ct__num_threads());
        if (r == 0) st = CT_OK;
        if (r != -2) goto done; /* -1: out of memory */
    } else if (!thin && nd == 2 && A->ndim == 2 && B->ndim == 2 && ct__is_contiguous(C) &&
               (a->p.linalg.beta == 0 || bf) && (!bf || ct_numel(bf) == C->sizes[1])) {
        int t = dt == CT_BF16 ? CT_GEMM_BF16 : CT_GEMM_F16;
        int r = ct__gemm_avx2_mixed_out(C->sizes[0], C->sizes[1], A->sizes[1], (float)a->p.linalg.alpha,
                                        ct__ptr(A), t, A->strides[0], A->strides[1], ct__ptr(B), t,
                                        B->strides[0], B->strides[1], (float)a->p.linalg.beta,
                                        bf ? (const float *)ct__ptr(bf) : NULL, ct__ptr(C), t,
                                        C->sizes[1], ct__num_threads());
        if (r == 0) st = CT_OK;
        if (r != -2) goto done; /* -1: out of memory */
    }
    if (!(Cf = ct__alloc(C->sizes, C->ndim, CT_F32, CT_CPU))) goto done;
    if (a->p.linalg.beta != 0 && !bias) {
        ct_tensor *o1[1] = {Cf}, *i1[1] = {C};
        if ((st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL))) goto done;
    }
    if (thin) {
        if (!(Af = ct__contig_as(A, CT_F32)) || !(Bf = ct__contig_as(B, CT_F32))) goto done;
        st = k_gemm_f(Cf, Af, Bf, bf, a, 0);
    } else {
        st = k_gemm_f(Cf, A, B, bf, a, dt == CT_BF16 ? CT_GEMM_BF16 : CT_GEMM_F16);
    }
    if (!st) {
        ct_tensor *o1[1] = {C}, *i1[1] = {Cf};
        st = ct__dispatch(CT_OP_copy, o1, 1, i1, 1, NULL);
    }
done:
    ct_release(Cf);
    ct_release(bf);
    ct_release(Af);
    ct_release(Bf);
    if (st == CT_ERR_OOM && !ct_last_error_code())
        return ct__error_status(CT_ERR_OOM, "%s: out of memory", opname);
    return st;
}

/* gemm_lp (src/ops/autocast_linear.c): C = round_bf16(A @ B + round_bf16(bias))
 * with A, B f32 or bf16 (each value rounded to bf16), C bf16 or f32 holding
 * bf16 values.  On AVX512_BF16 the vdpbf16ps GEMM rounds the operands as it
 * packs them and the results in its stores (one K block; longer K sums in
 * an f32 C rounded afterwards); on AVX2 the own GEMM does the same with
 * f32 FMAs (up to K = 4096; beyond, an f32 C rounded afterwards); without
 * AVX2 the operands are rounded into f32 copies for the f32 GEMM (what
 * the op means, not a fast path: autocast uses gemm_lp only where
 * ct__kernel_half marks it). */
int ct__gemm_lp_portable; /* tests: 1 runs the portable route where a rounding GEMM would */

/* k_gemm_lp's rounding GEMM: the vdpbf16ps one (dot) or the AVX2 one, C of
 * type tc (CT_GEMM_F32: f32 sums, any K); B's data at bp (a shadow, or B's
 * own), its strides B's */
static int lp_gemm(int dot, int64_t M, int64_t N, int64_t K, const ct_tensor *A, int ta, const void *bp, int tb,
                   const ct_tensor *B, const float *br, void *C, int tc, int nt) {
    const float beta = br ? 1.0f : 0.0f;
    if (dot)
        return ct__gemm_bf16dot(M, N, K, 1.0f, ct__ptr(A), ta, A->strides[0], A->strides[1], bp, tb, B->strides[0],
                                B->strides[1], beta, br, C, tc, N, nt);
    if (tc == CT_GEMM_F32)
        return ct__gemm_avx2_mixed(M, N, K, 1.0f, ct__ptr(A), ta, A->strides[0], A->strides[1], bp, tb,
                                   B->strides[0], B->strides[1], beta, br, C, N, nt);
    return ct__gemm_avx2_mixed_out(M, N, K, 1.0f, ct__ptr(A), ta, A->strides[0], A->strides[1], bp, tb,
                                   B->strides[0], B->strides[1], beta, br, C, tc, N, nt);
}
/* X [rows, cols] (f32, any strides) rounded to bf16 into a dense copy of
 * the same orientation (rows contiguous unless X's columns are the
 * contiguous dim); its strides in *s0, *s1.  NULL: out of memory. */
static uint16_t *bf16_rounded(const ct_tensor *X, int64_t rows, int64_t cols, int64_t *s0, int64_t *s1) {
    const ct_ew_vtab *vt = ct__ew_vtab();
    const float *x = ct__ptr(X);
    const int64_t xs0 = X->strides[0], xs1 = X->strides[1];
    const int colmajor = xs1 != 1 && xs0 == 1;
    const int64_t nl = colmajor ? cols : rows, len = colmajor ? rows : cols, ls = colmajor ? xs1 : xs0;
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(rows * cols + 1));
    if (!h) return NULL;
    *s0 = colmajor ? 1 : cols;
    *s1 = colmajor ? rows : 1;
#pragma omp parallel for schedule(static) if (rows * cols > CT_PAR_GRAIN)
    for (int64_t l = 0; l < nl; l++) {
        if (xs0 == 1 || xs1 == 1) {
            vt->f32_to_bf16(h + l * len, x + l * ls, len);
        } else { /* neither dim dense: element by element */
            for (int64_t e = 0; e < len; e++) vt->f32_to_bf16(h + l * len + e, x + l * xs0 + e * xs1, 1);
        }
    }
    return h;
}

/* gemm_lp through oneDNN's bf16 matmul (matmul_dnnl.h; AMX CPUs): each
 * operand as bf16 -- a bf16 tensor as it is, a float32 weight's shadow
 * (wshadow.c) where it has one, else a rounded copy -- and C bf16, or f32
 * sums (c_f32: the caller rounds them).  0, -1 (out of memory), -2 (not
 * taken, C untouched). */
static int lp_dnnl(int64_t M, int64_t N, int64_t K, const ct_tensor *A, const ct_tensor *B, const float *br,
                   void *C, int c_f32, int nt) {
    const void *ap = ct__ptr(A), *bp = ct__ptr(B);
    int64_t sa0 = A->strides[0], sa1 = A->strides[1], sb0 = B->strides[0], sb1 = B->strides[1];
    uint16_t *ah = NULL, *bh = NULL;
    int r = -1;
    if (A->dtype != CT_BF16 && !(ap = ah = bf16_rounded(A, M, K, &sa0, &sa1))) goto done;
    if (B->dtype != CT_BF16) {
        const uint16_t *sh = ct__wshadow_get(B);
        if (sh) bp = sh;
        else if (!(bp = bh = bf16_rounded(B, K, N, &sb0, &sb1))) goto done;
    }
    r = ct__dnnl_matmul(M, N, K, 1.0f, ap, CT_GEMM_BF16, sa0, sa1, bp, CT_GEMM_BF16, sb0, sb1, br ? 1.0f : 0.0f, br,
                        C, c_f32 ? CT_GEMM_F32 : CT_GEMM_BF16, N, nt, 0);
done:
    free(ah);
    free(bh);
    return r;
}

static ct_status k_gemm_lp(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout;
    ct_tensor *C = out[0], *A = in[0], *B = in[1], *bias = nin > 2 ? in[2] : NULL;
    const ct_ew_vtab *vt = ct__ew_vtab();
    int64_t M = C->sizes[0], N = C->sizes[1], K = A->sizes[1];
    if (!ct__is_contiguous(C) || (bias && !ct__is_contiguous(bias)))
        return ct__error_status(CT_ERR_ARG, "gemm_lp: C and the bias must be contiguous");
    float *br = NULL, *Cf = NULL, *Af = NULL, *Bf = NULL;
    ct_status st = CT_ERR_OOM;
    if (bias) { /* the bias as autocast's bf16 copy holds it */
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(N + 1));
        br = malloc(sizeof(float) * (size_t)(N + 1));
        if (h && br) {
            vt->f32_to_bf16(h, ct__ptr(bias), N);
            vt->bf16_to_f32(br, h, N);
        }
        free(h);
        if (!h) goto done;
        if (!br) goto done;
    }
    int ta = A->dtype == CT_BF16 ? CT_GEMM_BF16 : CT_GEMM_F32, tb = B->dtype == CT_BF16 ? CT_GEMM_BF16 : CT_GEMM_F32;
    int bf16c = C->dtype == CT_BF16;
    int nt = ct__num_threads();
    if (M == 0 || N == 0) { st = CT_OK; goto done; }
    const int dot = ct__gemm_bf16dot_ok();
    int dn = !ct__gemm_lp_portable && ct__dnnl_matmul_want(CT_GEMM_BF16, 0, M, N, K) && K > 0
                 ? lp_dnnl(M, N, K, A, B, br, ct__ptr(C), !bf16c, nt)
                 : -2;
    if (dn == -1) goto done;
    if (dn == 0) { /* a bf16 C is rounded; an f32 one holds the sums, rounded below */
        if (bf16c) { st = CT_OK; goto done; }
    } else if (!ct__gemm_lp_portable && (dot || ct__cpu_cap() >= CT_CAP_AVX2)) {
        /* the vdpbf16ps GEMM rounds float32 operands as it packs them; the
         * AVX2 one takes them as CT_GEMM_F32B (rounded as packed, products
         * and sums in f32: bit for bit the bf16 copies' product on this
         * CPU, without the copies) */
        const void *bp = ct__ptr(B);
        if (dot) { /* a float32 B (a weight): its bf16 shadow where it has one (wshadow.c) */
            const uint16_t *sh = tb == CT_GEMM_F32 ? ct__wshadow_get(B) : NULL;
            if (sh) {
                bp = sh;
                tb = CT_GEMM_BF16;
            }
        } else {
            ta = ta == CT_GEMM_BF16 ? CT_GEMM_BF16 : CT_GEMM_F32B;
            tb = tb == CT_GEMM_BF16 ? CT_GEMM_BF16 : CT_GEMM_F32B;
        }
        int r = lp_gemm(dot, M, N, K, A, ta, bp, tb, B, br, ct__ptr(C), bf16c ? CT_GEMM_BF16 : CT_GEMM_F32R, nt);
        if (r == 0) { st = CT_OK; goto done; }
        if (r == -1) goto done;
        /* -2: K past what the rounding GEMM holds (or K 0): f32 sums, rounded below */
        /* (from the storage allocator: a large block comes back warm from its cache) */
        float *dst = bf16c ? (Cf = ct__malloc_aligned(sizeof(float) * (size_t)(M * N))) : (float *)ct__ptr(C);
        if (!dst) goto done;
        if (lp_gemm(dot, M, N, K, A, ta, bp, tb, B, br, dst, CT_GEMM_F32, nt)) goto done;
    } else {
        /* operands rounded to bf16 values in dense f32 copies */
        Af = malloc(sizeof(float) * (size_t)(M * K + 1));
        Bf = malloc(sizeof(float) * (size_t)(K * N + 1));
        Cf = bf16c ? ct__malloc_aligned(sizeof(float) * (size_t)(M * N)) : NULL;
        if (!Af || !Bf || (bf16c && !Cf)) goto done;
        ct_tensor *src[2] = {A, B};
        float *dstf[2] = {Af, Bf};
        int64_t rows[2] = {M, K}, cols[2] = {K, N};
        for (int t = 0; t < 2; t++) {
            const ct_tensor *X = src[t];
            for (int64_t i = 0; i < rows[t]; i++)
                for (int64_t j = 0; j < cols[t]; j++) {
                    const char *p = (const char *)ct__ptr(X) + (i * X->strides[0] + j * X->strides[1]) *
                                                                   (int64_t)ct_dtype_size(X->dtype);
                    float v = X->dtype == CT_BF16 ? ct__bf16_to_f32(*(const uint16_t *)p) : *(const float *)p;
                    uint16_t hv;
                    vt->f32_to_bf16(&hv, &v, 1);
                    vt->bf16_to_f32(&dstf[t][i * cols[t] + j], &hv, 1);
                }
        }
        float *dst = bf16c ? Cf : (float *)ct__ptr(C);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) dst[i * N + j] = br ? br[j] : 0.0f;
        if (K > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, Af, (int)K, Bf,
                        (int)N, 1.0f, dst, (int)N);
    }
    /* round the f32 sums once, in chunks of 4096 (on the team when large:
     * a weight gradient of GPT-2's vocabulary is 38.6 M elements) */
    {
        float *c = bf16c ? Cf : (float *)ct__ptr(C);
        uint16_t *ch = bf16c ? (uint16_t *)ct__ptr(C) : NULL;
        const int64_t nch = (M * N + 4095) / 4096;
#pragma omp parallel for schedule(static) if (M * N > CT_PAR_GRAIN)
        for (int64_t q = 0; q < nch; q++) {
            const int64_t i0 = q * 4096, n = M * N - i0 < 4096 ? M * N - i0 : 4096;
            if (ch) {
                vt->f32_to_bf16(ch + i0, c + i0, n);
            } else {
                uint16_t h[4096];
                vt->f32_to_bf16(h, c + i0, n);
                vt->bf16_to_f32(c + i0, h, n);
            }
        }
    }
    st = CT_OK;
done:
    free(br);
    ct__free_aligned(Cf, (void *)(uintptr_t)(sizeof(float) * (size_t)(M * N)));
    free(Af);
    free(Bf);
    if (st == CT_ERR_OOM) return ct__error_status(CT_ERR_OOM, "gemm_lp: out of memory");
    return st;
}

/* C f32 and A, B of C's dtype, or (half) A, B f16/bf16 */
static ct_status k_gemm_f(ct_tensor *C, ct_tensor *A, ct_tensor *B, ct_tensor *bias,
                          const ct_args *a, int half) {
    int nd = C->ndim, nb = nd - 2;
    const char *opname = ct__op_info[a->op].name;
    if (nd < 2 || A->ndim != nd || B->ndim != nd)
        return ct__error_status(CT_ERR_SHAPE, "%s: internal gemm rank mismatch", opname);
    if (bias && (bias->dtype != C->dtype || !ct__is_contiguous(bias) ||
                 ct_numel(bias) != C->sizes[nd - 1]))
        return ct__error_status(CT_ERR_SHAPE, "%s: internal gemm bias mismatch", opname);
    gemm_job j;
    j.dt = C->dtype;
    j.M = C->sizes[nd - 2];
    j.N = C->sizes[nd - 1];
    j.K = A->sizes[nd - 1];
    j.sam = A->strides[nd - 2];
    j.sak = A->strides[nd - 1];
    j.sbk = B->strides[nd - 2];
    j.sbn = B->strides[nd - 1];
    j.alpha = a->p.linalg.alpha;
    j.beta = a->p.linalg.beta;
    j.threads = ct__num_threads();
    j.bias = NULL;
    j.half = half;
    gemm_fn fn = NULL;
    switch (j.dt) {
    case CT_F32: case CT_F64: case CT_C64: case CT_C128: fn = blas_one; break;
    case CT_I64: fn = gemm_i64; break;
    case CT_I32: fn = gemm_i32; break;
    case CT_I16: fn = gemm_i16; break;
    case CT_I8: fn = gemm_i8; break;
    case CT_U8: fn = gemm_u8; break;
    case CT_BOOL: fn = gemm_bool; break;
    default:
        return ct__error_status(CT_ERR_DTYPE, "%s: no cpu kernel for dtype %s", opname,
                                ct_dtype_name(j.dt));
    }
    if (j.M > INT_MAX || j.N > INT_MAX || j.K > INT_MAX)
        return ct__error_status(CT_ERR_OVERFLOW, "%s: matrix dims too large for BLAS", opname);
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) nbatch *= C->sizes[d];
    int64_t rows_stride = 0;
    if (nbatch > 1 && fold_rows(A, B, C, nb, &rows_stride) && nbatch * j.M <= INT_MAX) {
        /* one GEMM of nbatch * M rows: C is contiguous, so its rows follow on */
        j.M *= nbatch;
        j.sam = rows_stride;
        nb = 0;
        nbatch = 1;
    }
    if (j.K == 1 && (j.dt == CT_F32 || j.dt == CT_F64) && !bias && !half)
        fn = j.dt == CT_F32 ? outer_f32 : outer_f64;
    /* non-temporal stores when C is well beyond the last-level cache (32 MB
     * of outputs: more than a Zen 3 CCX's L3 or a Xeon's per-core share) and
     * every row starts 32-byte aligned (AVX; the CPU has AVX2) */
    j.stream = fn == outer_f32 && ct__cpu_cap() >= CT_CAP_AVX2 && j.N % 8 == 0 &&
               ((uintptr_t)ct__ptr(C) & 31) == 0 && nbatch * j.M * j.N >= ((int64_t)8 << 20);
    int64_t work = j.M * j.N * j.K;
    /* bf16 operands on bf16 dot products (AVX512_BF16); matrix-vector
     * shapes keep the f32 kernels.  (f32 under "medium" does not come
     * here: torch's "medium" on such a CPU keeps f32-level accuracy -- 1024^3
     * max error 1.3e-4 against "highest"'s 6.0e-5, where rounding the
     * operands to bf16 gives 0.37 -- so it computes in compensated bf16
     * (three products per product), which at twice the f32 FMA's rate is
     * slower than this f32 GEMM; only AMX's 16x rate would make it pay.) */
    j.bfdot = j.dt == CT_F32 && fn == blas_one && half == CT_GEMM_BF16 && j.M >= 4 && j.N >= 4 &&
              ct__gemm_bf16dot_ok();
    j.own = j.dt == CT_F32 && fn == blas_one &&
            (j.bfdot || (ct__cpu_cap() >= CT_CAP_AVX2 && (half || ct__sgemm_avx2_preferred(j.M, j.N, j.K))));
    /* oneDNN's matmul first where its rule says so (AMX CPUs: half
     * operands, or f32 ones under "high"/"medium"; matmul_dnnl.h) */
    j.fpmath = !half && ct__matmul_precision() > 0;
    j.dnnl = j.dt == CT_F32 && fn == blas_one && ct__dnnl_matmul_want(half ? half : CT_GEMM_F32, j.fpmath, j.M, j.N, j.K);
    if (nbatch == 0 || j.M == 0 || j.N == 0) return CT_OK;
    j.bpre = NULL;
    if (a->p.linalg.keep_b && j.own && !j.dnnl && !half && !j.bfdot && nbatch == 1 && B->dtype == CT_F32)
        j.bpre = pp_get(B, j.K, j.N, j.sbk, j.sbn);
    size_t es = ct_dtype_size(j.dt);
    char *cbase = ct__ptr(C);
    if (bias && j.own && nbatch == 1 && j.K > 0) j.bias = ct__ptr(bias);
    else if (bias) { /* C's rows = the bias; then C = beta * C + alpha * A @ B */
        size_t row = (size_t)j.N * es;
        for (int64_t r = 0; r < nbatch * j.M; r++) memcpy(cbase + r * row, ct__ptr(bias), row);
    }
    if (j.K == 0) { /* C = beta * C */
        int64_t n = nbatch * j.M * j.N;
        for (int64_t i = 0; i < n; i++) {
            void *p = cbase + i * (int64_t)es;
            if (j.beta == 0) memset(p, 0, es);
            else if (j.dt == CT_C64) { ((float *)p)[0] *= (float)j.beta; ((float *)p)[1] *= (float)j.beta; }
            else if (j.dt == CT_C128) { ((double *)p)[0] *= j.beta; ((double *)p)[1] *= j.beta; }
            else if (ct_dtype_is_floating(j.dt)) ct__store_f64(p, j.dt, j.beta * ct__load_f64(p, j.dt));
            else if (j.dt != CT_BOOL)
                ct__store_i64(p, j.dt, (int64_t)((uint64_t)(int64_t)j.beta * (uint64_t)ct__load_i64(p, j.dt)));
        }
        return CT_OK;
    }
    const char *abase = ct__ptr(A), *bbase = ct__ptr(B);
    const int64_t ies = (int64_t)ct_dtype_size(A->dtype); /* A's, B's (C's unless half) */
    int par = nbatch > 1 && work < 64 * 64 * 64 && nbatch * work > CT_GRAIN && ct__num_threads() > 1;
    /* a batch of at least two matrices per thread runs one whole matrix per
     * thread: the own GEMM single-threaded, BLAS single-threaded inside the
     * parallel region (threaded per matrix, OpenBLAS ran a 64 x [128,64] @
     * [64,128] bmm at 73 GFLOP/s on 2 threads; one matrix a thread, 2.5x
     * that); either way each matrix's bits do not depend on the thread */
    if (nbatch >= 2 * j.threads && j.threads > 1 && nbatch * work > CT_GRAIN) par = 1;
    if (par) j.threads = 1;
    int err = 0;
    /* big BLAS GEMMs thread themselves: batches go parallel only when small.
     * The serial case must not sit inside an OpenMP region at all (even an
     * inactive one): the OpenMP OpenBLAS then runs single-threaded. */
#define CT_BATCH_BODY                                                                   \
    {                                                                                   \
        int64_t rem = b, oa = 0, ob = 0;                                                \
        for (int d = nb - 1; d >= 0; d--) {                                             \
            int64_t idx = rem % C->sizes[d];                                            \
            rem /= C->sizes[d];                                                         \
            oa += idx * A->strides[d];                                                  \
            ob += idx * B->strides[d];                                                  \
        }                                                                               \
        int r = fn(&j, abase + oa * ies, bbase + ob * ies,                              \
                   cbase + b * j.M * j.N * (int64_t)es);                                \
        if (r) err |= r == -2 ? 2 : 1;                                                  \
    }
    if (par) {
#pragma omp parallel for schedule(static) reduction(| : err)
        for (int64_t b = 0; b < nbatch; b++) CT_BATCH_BODY
    } else {
        for (int64_t b = 0; b < nbatch; b++) CT_BATCH_BODY
    }
#undef CT_BATCH_BODY
    if (err & 2) return ct__error_status(CT_ERR_OVERFLOW, "%s: leading dimension too large for BLAS", opname);
    if (err) return ct__error_status(CT_ERR_OOM, "%s: out of memory packing a matrix", opname);
    return CT_OK;
}

/* trace of a 2-D tensor (any strides) into a 0-dim out (i64 for integers) */
static ct_status k_trace(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin; (void)a;
    ct_tensor *x = in[0], *o = out[0];
    int64_t n = x->sizes[0] < x->sizes[1] ? x->sizes[0] : x->sizes[1];
    int64_t st = x->strides[0] + x->strides[1];
    size_t es = ct_dtype_size(x->dtype);
    const char *p = ct__ptr(x);
    if (ct_dtype_is_floating(x->dtype)) {
        double s = 0;
        if (x->dtype == CT_F32) {
            const float *f = (const float *)p;
            for (int64_t i = 0; i < n; i++) s += f[i * st];
        } else if (x->dtype == CT_F64) {
            const double *f = (const double *)p;
            for (int64_t i = 0; i < n; i++) s += f[i * st];
        } else {
            for (int64_t i = 0; i < n; i++) s += ct__load_f64(p + i * st * (int64_t)es, x->dtype);
        }
        ct__store_f64(ct__ptr(o), o->dtype, s);
    } else {
        uint64_t s = 0;
        for (int64_t i = 0; i < n; i++) s += (uint64_t)ct__load_i64(p + i * st * (int64_t)es, x->dtype);
        ct__store_i64(ct__ptr(o), o->dtype, (int64_t)s);
    }
    return CT_OK;
}

/* cross product along a dim: in[0], in[1], out[0] are views with that dim
 * removed (selected at index 0); a->p.linalg.dim_strides[0..2] are the byte
 * strides of the dim for out, a, b. */
typedef struct cross_ctx { int64_t ds[3]; ct_dtype dt; } cross_ctx;

#define CROSS_LOOP(T, NAME)                                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx_) {                   \
        const cross_ctx *c = ctx_;                                                          \
        for (int64_t i = 0; i < n; i++) {                                                   \
            char *o = p[0] + i * s[0];                                                      \
            const char *x = p[1] + i * s[1], *y = p[2] + i * s[2];                          \
            T x0 = *(const T *)x, x1 = *(const T *)(x + c->ds[1]),                          \
              x2 = *(const T *)(x + 2 * c->ds[1]);                                          \
            T y0 = *(const T *)y, y1 = *(const T *)(y + c->ds[2]),                          \
              y2 = *(const T *)(y + 2 * c->ds[2]);                                          \
            *(T *)o = (T)(x1 * y2 - x2 * y1);                                               \
            *(T *)(o + c->ds[0]) = (T)(x2 * y0 - x0 * y2);                                  \
            *(T *)(o + 2 * c->ds[0]) = (T)(x0 * y1 - x1 * y0);                              \
        }                                                                                   \
    }
CROSS_LOOP(float, cross_f32)
CROSS_LOOP(double, cross_f64)
/* integers: wrap-around arithmetic in uint64 */
#define CROSS_ILOOP(T, NAME)                                                                 \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx_) {                   \
        const cross_ctx *c = ctx_;                                                          \
        for (int64_t i = 0; i < n; i++) {                                                   \
            char *o = p[0] + i * s[0];                                                      \
            const char *x = p[1] + i * s[1], *y = p[2] + i * s[2];                          \
            uint64_t x0 = (uint64_t)(int64_t)*(const T *)x,                                 \
                     x1 = (uint64_t)(int64_t)*(const T *)(x + c->ds[1]),                    \
                     x2 = (uint64_t)(int64_t)*(const T *)(x + 2 * c->ds[1]);                \
            uint64_t y0 = (uint64_t)(int64_t)*(const T *)y,                                 \
                     y1 = (uint64_t)(int64_t)*(const T *)(y + c->ds[2]),                    \
                     y2 = (uint64_t)(int64_t)*(const T *)(y + 2 * c->ds[2]);                \
            *(T *)o = (T)(int64_t)(x1 * y2 - x2 * y1);                                      \
            *(T *)(o + c->ds[0]) = (T)(int64_t)(x2 * y0 - x0 * y2);                         \
            *(T *)(o + 2 * c->ds[0]) = (T)(int64_t)(x0 * y1 - x1 * y0);                     \
        }                                                                                   \
    }
CROSS_ILOOP(int64_t, cross_i64)
CROSS_ILOOP(int32_t, cross_i32)
CROSS_ILOOP(int16_t, cross_i16)
CROSS_ILOOP(int8_t, cross_i8)
CROSS_ILOOP(uint8_t, cross_u8)

static ct_status k_cross(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin;
    cross_ctx c;
    c.dt = out[0]->dtype;
    for (int k = 0; k < 3; k++) c.ds[k] = a->p.linalg.dim_strides[k];
    ct_loop_fn fn;
    switch (c.dt) {
    case CT_F32: fn = cross_f32; break;
    case CT_F64: fn = cross_f64; break;
    case CT_I64: fn = cross_i64; break;
    case CT_I32: fn = cross_i32; break;
    case CT_I16: fn = cross_i16; break;
    case CT_I8: fn = cross_i8; break;
    case CT_U8: fn = cross_u8; break;
    default:
        return ct__error_status(CT_ERR_DTYPE, "cross: no cpu kernel for dtype %s", ct_dtype_name(c.dt));
    }
    ct_tensor *ts[3] = {out[0], in[0], in[1]};
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, 3);
    if (st) return st;
    ct__iter_run(&it, fn, &c, CT_GRAIN / 4);
    return CT_OK;
}

/* cdist: in[0] [B, P, M], in[1] [B, R, M] contiguous; out [B, P, R];
 * a->p.linalg.p = p. */
#define CDIST(T, NAME)                                                                       \
    static void NAME(const T *x1, const T *x2, T *o, int64_t nb, int64_t P, int64_t R,      \
                     int64_t M, double p) {                                                 \
        int64_t rows = nb * P;                                                              \
        _Pragma("omp parallel for if(rows * R * M > CT_PAR_GRAIN)")                            \
        for (int64_t bp = 0; bp < rows; bp++) {                                             \
            int64_t b = bp / P;                                                             \
            const T *u = x1 + bp * M;                                                       \
            for (int64_t r = 0; r < R; r++) {                                               \
                const T *v = x2 + (b * R + r) * M;                                          \
                double s = 0;                                                               \
                if (p == 2) {                                                               \
                    for (int64_t m = 0; m < M; m++) { double d = (double)u[m] - v[m]; s += d * d; } \
                    s = sqrt(s);                                                            \
                } else if (p == 1) {                                                        \
                    for (int64_t m = 0; m < M; m++) s += fabs((double)u[m] - v[m]);         \
                } else if (p == 0) {                                                        \
                    for (int64_t m = 0; m < M; m++) s += ((double)u[m] - v[m]) != 0;        \
                } else if (isinf(p)) {                                                      \
                    for (int64_t m = 0; m < M; m++) {                                       \
                        double d = fabs((double)u[m] - v[m]);                               \
                        if (d > s || isnan(d)) s = d;                                       \
                    }                                                                       \
                } else {                                                                    \
                    for (int64_t m = 0; m < M; m++) s += pow(fabs((double)u[m] - v[m]), p); \
                    s = pow(s, 1.0 / p);                                                    \
                }                                                                           \
                o[bp * R + r] = (T)s;                                                       \
            }                                                                               \
        }                                                                                   \
    }
CDIST(float, cdist_f32)
CDIST(double, cdist_f64)

static ct_status k_cdist(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                         const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *x1 = in[0], *x2 = in[1], *o = out[0];
    int64_t nb = x1->sizes[0], P = x1->sizes[1], M = x1->sizes[2], R = x2->sizes[1];
    if (o->dtype == CT_F32)
        cdist_f32(ct__ptr(x1), ct__ptr(x2), ct__ptr(o), nb, P, R, M, a->p.linalg.p);
    else if (o->dtype == CT_F64)
        cdist_f64(ct__ptr(x1), ct__ptr(x2), ct__ptr(o), nb, P, R, M, a->p.linalg.p);
    else
        return ct__error_status(CT_ERR_DTYPE, "cdist: no cpu kernel for dtype %s", ct_dtype_name(o->dtype));
    return CT_OK;
}

void ct__cpu_register_linalg(ct_kernel_fn *t) {
    t[CT_OP_mm] = k_gemm;
    t[CT_OP_bmm] = k_gemm;
    t[CT_OP_matmul] = k_gemm;
    t[CT_OP_addmm] = k_gemm;
    t[CT_OP_baddbmm] = k_gemm;
    t[CT_OP_dot] = k_gemm;
    t[CT_OP_einsum] = k_gemm;
    t[CT_OP_mv] = k_gemm;
    t[CT_OP_vdot] = k_gemm;
    t[CT_OP_outer] = k_gemm;
    t[CT_OP_addmv] = k_gemm;
    t[CT_OP_addr] = k_gemm;
    t[CT_OP_addbmm] = k_gemm;
    t[CT_OP_linear] = k_gemm;
    t[CT_OP_bilinear] = k_gemm;
    t[CT_OP_tensordot] = k_gemm;
    t[CT_OP_kron] = k_gemm;
    t[CT_OP_trace] = k_trace;
    t[CT_OP_cross] = k_cross;
    t[CT_OP_cdist] = k_cdist;
    /* k_gemm computes f16/bf16 itself (through the own GEMM's packing) */
    static const ct_op gemm_ops[] = {CT_OP_mm, CT_OP_bmm, CT_OP_matmul, CT_OP_addmm, CT_OP_baddbmm,
                                     CT_OP_dot, CT_OP_einsum, CT_OP_mv, CT_OP_vdot, CT_OP_outer,
                                     CT_OP_addmv, CT_OP_addr, CT_OP_addbmm, CT_OP_linear,
                                     CT_OP_bilinear, CT_OP_tensordot, CT_OP_kron};
    for (size_t k = 0; k < sizeof gemm_ops / sizeof gemm_ops[0]; k++)
        ct__kernel_half[CT_CPU][gemm_ops[k]] = CT_HALF_F16 | CT_HALF_BF16;
    /* autocast folds its casts into gemm_lp where the GEMM rounds the
     * operands as it packs them: the vdpbf16ps GEMM, or the AVX2 one */
    t[CT_OP_gemm_lp] = k_gemm_lp;
    if (ct__gemm_bf16dot_ok() || ct__cpu_cap() >= CT_CAP_AVX2) ct__kernel_half[CT_CPU][CT_OP_gemm_lp] = CT_HALF_BF16;
}
