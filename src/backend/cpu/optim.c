/* optim.c (cpu) -- the optimizers' fused multi-tensor steps, the kernels of
 * the table ops sgd_step and adam_step (AdamW is adam_step with decoupled
 * weight decay); the op layer (src/ops/fused_optim.c) checks the tensors
 * and passes only contiguous float32/float64 ones (see ops.def for the
 * input lists).
 *
 * All the parameters of a group are updated in ONE OpenMP loop over fixed
 * chunks of FUSED_CHUNK elements (torch's _foreach / fused kernels): one
 * parallel region per step instead of one per parameter, no temporaries.
 * Each element's update is a chain of scalar roundings in the order of
 * torch.optim's single-tensor code, and no value depends on the chunking,
 * so results are identical for any thread count. */
#include <math.h>
#include <stdlib.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

#include "../../ops/op_table.h"
#include "cpu_caps.h"
#include "wshadow.h"

#define FUSED_CHUNK 16384

typedef struct fused_item {
    void *p;
    const void *g;
    void *s[3];          /* state buffers (SGD: momentum; Adam: m, v, vmax) */
    int64_t n;
    ct_dtype dt;
    int fresh;           /* SGD: the momentum buffer starts as the grad */
    double c[2];         /* per-parameter constants (Adam: step_size, sqrt(bc2)) */
    uint16_t *sh;        /* Adam: the parameter's bf16 shadow (wshadow.c), written too, or NULL */
} fused_item;

typedef struct fused_list {
    fused_item *it;
    int n, cap;
} fused_list;

typedef void (*fused_kernel)(const fused_item *it, int64_t lo, int64_t hi, const void *hp);

/* Runs k over every item of l, chunk by chunk, in one parallel loop. */
static ct_status fused_run(fused_list *l, fused_kernel k, const void *hp) {
    int64_t nch = 0, total = 0;
    for (int j = 0; j < l->n; j++) {
        nch += (l->it[j].n + FUSED_CHUNK - 1) / FUSED_CHUNK;
        total += l->it[j].n;
    }
    if (nch == 0) return CT_OK;
    int *owner = malloc(sizeof(int) * (size_t)nch);
    int64_t *lo = malloc(sizeof(int64_t) * (size_t)nch);
    if (!owner || !lo) {
        free(owner);
        free(lo);
        return ct__error_status(CT_ERR_OOM, "optimizer step: out of memory");
    }
    int64_t c = 0;
    for (int j = 0; j < l->n; j++)
        for (int64_t s = 0; s < l->it[j].n; s += FUSED_CHUNK) { owner[c] = j; lo[c++] = s; }
#pragma omp parallel for schedule(static) if (total > CT_PAR_GRAIN && nch > 1)
    for (int64_t q = 0; q < nch; q++) {
        const fused_item *it = &l->it[owner[q]];
        int64_t hi = lo[q] + FUSED_CHUNK < it->n ? lo[q] + FUSED_CHUNK : it->n;
        k(it, lo[q], hi, hp);
    }
    free(owner);
    free(lo);
    return CT_OK;
}

/* the item list of n parameters (freed by the caller) */
static ct_status fused_alloc(fused_list *l, int n, const char *who) {
    l->it = malloc(sizeof *l->it * (size_t)(n ? n : 1));
    l->n = l->cap = n;
    if (!l->it) return ct__error_status(CT_ERR_OOM, "%s: out of memory", who);
    return CT_OK;
}

/* ---- SGD ------------------------------------------------------------------------ */
typedef struct {
    double lr, mom, damp, wd;
    bool nesterov, maximize;
} sgd_hp;

#define SGD_FUSED(T, SUF)                                                                   \
    static void sgd_fused_##SUF(const fused_item *it, int64_t lo, int64_t hi,               \
                                const sgd_hp *h) {                                          \
        T *restrict p = it->p, *restrict buf = it->s[0];                                    \
        const T *restrict gr = it->g;                                                       \
        const T wdT = (T)h->wd, momT = (T)h->mom, dampT = (T)(1 - h->damp), nlr = (T)(-h->lr); \
        const bool fresh = it->fresh, nesterov = h->nesterov, maximize = h->maximize;       \
        const bool wd = h->wd != 0, mom = h->mom != 0;                                      \
        for (int64_t i = lo; i < hi; i++) {                                                 \
            T d = maximize ? -gr[i] : gr[i];                                                \
            if (wd) d = d + wdT * p[i];                                                     \
            if (mom) {                                                                      \
                T b;                                                                        \
                if (fresh) b = d;                                                           \
                else { b = buf[i] * momT; b = b + dampT * d; }                              \
                buf[i] = b;                                                                 \
                d = nesterov ? d + momT * b : b;                                            \
            }                                                                               \
            p[i] = p[i] + nlr * d;                                                          \
        }                                                                                   \
    }
SGD_FUSED(float, f32)
SGD_FUSED(double, f64)

static void sgd_fused_kernel(const fused_item *it, int64_t lo, int64_t hi, const void *hp) {
    if (it->dt == CT_F32) sgd_fused_f32(it, lo, hi, hp);
    else sgd_fused_f64(it, lo, hi, hp);
}

/* in: params[n], grads[n], [momentum_buffers[n] when momentum != 0] */
static ct_status k_sgd_step(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    const ct_p_optim pp = a->p.optim;
    const int per = pp.momentum != 0 ? 3 : 2, n = nin / per;
    if (nin % per) return ct__error_status(CT_ERR_ARG, "sgd_step: %d inputs for %d lists", nin, per);
    const sgd_hp h = {pp.lr, pp.momentum, pp.dampening, pp.weight_decay, pp.nesterov, pp.maximize};
    fused_list l;
    ct_status st = fused_alloc(&l, n, "SGD");
    if (st) return st;
    for (int i = 0; i < n; i++)
        l.it[i] = (fused_item){.p = ct__ptr(in[i]), .g = ct__ptr(in[n + i]), .n = ct_numel(in[i]),
                               .dt = in[i]->dtype, .fresh = per == 3 && pp.first_step,
                               .s = {per == 3 ? ct__ptr(in[2 * n + i]) : NULL}};
    st = fused_run(&l, sgd_fused_kernel, &h);
    free(l.it);
    return st;
}

/* ---- Adam / AdamW ---------------------------------------------------------------- */
typedef struct {
    double lr, b1, b2, eps, wd;
    bool amsgrad, maximize, decoupled;
} adam_hp;

#define ADAM_FUSED(T, SQRT, SUF)                                                            \
    static void adam_fused_##SUF(const fused_item *it, int64_t lo, int64_t hi,              \
                                 const adam_hp *h) {                                        \
        T *restrict p = it->p, *restrict m = it->s[0], *restrict v = it->s[1];              \
        T *restrict vmax = it->s[2];                                                        \
        const T *restrict gr = it->g;                                                       \
        const T b1T = (T)h->b1, b2T = (T)h->b2, a1 = (T)(1 - h->b1), a2 = (T)(1 - h->b2);   \
        const T wdT = (T)h->wd, decayT = (T)(1 - h->lr * h->wd), bcT = (T)it->c[1];         \
        const T epsT = (T)h->eps, nss = (T)(-it->c[0]);                                     \
        const bool decoupled = h->decoupled, wd = h->wd != 0, maximize = h->maximize;       \
        for (int64_t i = lo; i < hi; i++) {                                                 \
            T g = maximize ? -gr[i] : gr[i];                                                \
            T pi = p[i];                                                                    \
            if (decoupled) pi = pi * decayT;                                                \
            else if (wd) g = g + wdT * pi;                                                  \
            T mi = m[i] * b1T;                                                              \
            mi = mi + a1 * g;                                                               \
            T vi = v[i] * b2T;                                                              \
            vi = vi + a2 * g * g;                                                           \
            m[i] = mi;                                                                      \
            v[i] = vi;                                                                      \
            T vu = vi;                                                                      \
            if (vmax) { vu = vmax[i] > vi || vmax[i] != vmax[i] ? vmax[i] : vi; vmax[i] = vu; } \
            T den = SQRT(vu) / bcT + epsT;                                                  \
            p[i] = pi + nss * mi / den;                                                     \
        }                                                                                   \
    }
ADAM_FUSED(float, sqrtf, f32)
ADAM_FUSED(double, sqrt, f64)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* adam_fused_f32 eight lanes at a time (AVX2; no amsgrad): the same chain
 * of roundings per element -- separate multiplies and adds (no FMA
 * contraction), true division and square root, all exactly rounded like
 * their scalar forms -- so the result is bit for bit the scalar loop's.
 * The scalar loop is bound by its divisions and square root (measured ~6x
 * slower than a loop with the same memory traffic on Zen 3: GPT-2 124M's
 * AdamW step was 8% of a training step); this one streams at memory speed. */
#if defined(__clang__)
#define CT_NO_CONTRACT
#else /* GCC contracts the intrinsics' mul + add into FMA under a target that has it */
#define CT_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#endif

/* the constants of one parameter's update, 8 lanes */
typedef struct adam_v8 {
    __m256 b1, b2, a1, a2, wd, decay, bc, eps, nss, neg;
    bool decoupled, wdon, maximize;
} adam_v8;

__attribute__((target("avx2"), always_inline)) CT_NO_CONTRACT static inline adam_v8
adam_v8_make(const fused_item *it, const adam_hp *h) {
    return (adam_v8){.b1 = _mm256_set1_ps((float)h->b1), .b2 = _mm256_set1_ps((float)h->b2),
                     .a1 = _mm256_set1_ps((float)(1 - h->b1)), .a2 = _mm256_set1_ps((float)(1 - h->b2)),
                     .wd = _mm256_set1_ps((float)h->wd), .decay = _mm256_set1_ps((float)(1 - h->lr * h->wd)),
                     .bc = _mm256_set1_ps((float)it->c[1]), .eps = _mm256_set1_ps((float)h->eps),
                     .nss = _mm256_set1_ps((float)(-it->c[0])), .neg = _mm256_set1_ps(-0.0f),
                     .decoupled = h->decoupled, .wdon = h->wd != 0, .maximize = h->maximize};
}

/* one 8-lane step: *m and *v (in: the old moments) become the new ones,
 * the new parameter values are returned -- the scalar loop's roundings */
__attribute__((target("avx2"), always_inline)) CT_NO_CONTRACT static inline __m256
adam_v8_step(const adam_v8 *c, __m256 g, __m256 pi, __m256 *m, __m256 *v) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
    if (c->maximize) g = _mm256_xor_ps(g, c->neg);
    if (c->decoupled) pi = _mm256_mul_ps(pi, c->decay);
    else if (c->wdon) g = _mm256_add_ps(g, _mm256_mul_ps(c->wd, pi));
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(*m, c->b1), _mm256_mul_ps(c->a1, g));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(*v, c->b2), _mm256_mul_ps(_mm256_mul_ps(c->a2, g), g));
    *m = mi;
    *v = vi;
    __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), c->bc), c->eps);
    return _mm256_add_ps(pi, _mm256_div_ps(_mm256_mul_ps(c->nss, mi), den));
}

__attribute__((target("avx2"))) CT_NO_CONTRACT static int64_t adam_f32_avx2(const fused_item *it, int64_t lo,
                                                                            int64_t hi, const adam_hp *h) {
    float *restrict p = it->p, *restrict m = it->s[0], *restrict v = it->s[1];
    const float *restrict gr = it->g;
    const adam_v8 c = adam_v8_make(it, h);
    int64_t i = lo;
    for (; i + 8 <= hi; i += 8) {
        __m256 mi = _mm256_loadu_ps(m + i), vi = _mm256_loadu_ps(v + i);
        __m256 pn = adam_v8_step(&c, _mm256_loadu_ps(gr + i), _mm256_loadu_ps(p + i), &mi, &vi);
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        _mm256_storeu_ps(p + i, pn);
    }
    return i;
}

/* adam_f32_avx2 with the parameter's bf16 shadow written too (it->sh:
 * the new values as the GEMM's packing rounds them, vcvtneps2bf16), the
 * tail of fewer than 8 lanes masked (each lane rounded as the scalar loop
 * rounds it); only where the CPU has AVX512_BF16 (a shadow exists only
 * there) and without amsgrad. */
__attribute__((target("avx2,avx512f,avx512bf16,avx512vl"))) CT_NO_CONTRACT static void
adam_f32_sh(const fused_item *it, int64_t lo, int64_t hi, const adam_hp *h) {
    float *restrict p = it->p, *restrict m = it->s[0], *restrict v = it->s[1];
    const float *restrict gr = it->g;
    uint16_t *restrict sh = it->sh;
    const adam_v8 c = adam_v8_make(it, h);
    for (int64_t i = lo; i < hi; i += 8) {
        __mmask8 k = hi - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (hi - i)) - 1);
        __m256 mi = _mm256_maskz_loadu_ps(k, m + i), vi = _mm256_maskz_loadu_ps(k, v + i);
        __m256 pn = adam_v8_step(&c, _mm256_maskz_loadu_ps(k, gr + i), _mm256_maskz_loadu_ps(k, p + i), &mi, &vi);
        _mm256_mask_storeu_ps(m + i, k, mi);
        _mm256_mask_storeu_ps(v + i, k, vi);
        _mm256_mask_storeu_ps(p + i, k, pn);
        __m128i hb = (__m128i)_mm256_cvtneps_pbh(pn);
        /* the shadow is next read by the forward's GEMM, long after this
         * pass: streamed past the caches (no read for ownership) */
        if (k == 0xff && ((uintptr_t)(sh + i) & 15) == 0) _mm_stream_si128((__m128i *)(void *)(sh + i), hb);
        else _mm_mask_storeu_epi16(sh + i, k, hb);
    }
    _mm_sfence();
}
#endif

static void adam_fused_kernel(const fused_item *it, int64_t lo, int64_t hi, const void *hp) {
    if (it->dt == CT_F32) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
        const adam_hp *h = hp;
        if (it->sh) {
            adam_f32_sh(it, lo, hi, h);
            return;
        }
        if (!it->s[2] && ct__cpu_cap() >= CT_CAP_AVX2) lo = adam_f32_avx2(it, lo, hi, h);
#endif
        adam_fused_f32(it, lo, hi, hp);
    } else {
        adam_fused_f64(it, lo, hi, hp);
    }
}

/* in: params[n], grads[n], exp_avgs[n], exp_avg_sqs[n], [max_exp_avg_sqs[n]],
 * steps[n] (0-dim float32 on the cpu).  Per parameter, in double, from its
 * step: step_size = lr / (1 - beta1^step), sqrt(1 - beta2^step). */
static ct_status k_adam_step(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    const ct_p_optim pp = a->p.optim;
    const int per = pp.amsgrad ? 6 : 5, n = nin / per;
    if (nin % per) return ct__error_status(CT_ERR_ARG, "adam_step: %d inputs for %d lists", nin, per);
    const adam_hp h = {pp.lr, pp.beta1, pp.beta2, pp.eps, pp.weight_decay,
                       pp.amsgrad, pp.maximize, pp.decoupled};
    fused_list l;
    ct_status st = fused_alloc(&l, n, pp.decoupled ? "AdamW" : "Adam");
    if (st) return st;
    for (int i = 0; i < n; i++) {
        double step = (double)*(const float *)ct__ptr(in[(per - 1) * n + i]);
        double bc1 = 1 - pow(h.b1, step), bc2 = 1 - pow(h.b2, step);
        l.it[i] = (fused_item){.p = ct__ptr(in[i]), .g = ct__ptr(in[n + i]), .n = ct_numel(in[i]),
                               .dt = in[i]->dtype, .c = {h.lr / bc1, sqrt(bc2)},
                               .s = {ct__ptr(in[2 * n + i]), ct__ptr(in[3 * n + i]),
                                     pp.amsgrad ? ct__ptr(in[4 * n + i]) : NULL},
                               .sh = pp.amsgrad || in[i]->dtype != CT_F32 ? NULL : ct__wshadow_find(in[i])};
    }
    st = fused_run(&l, adam_fused_kernel, &h);
    /* the shadows written hold the values the op's version bump names */
    for (int i = 0; i < n && !st; i++)
        if (l.it[i].sh) ct__wshadow_stamp_next(in[i]);
    free(l.it);
    return st;
}

void ct__cpu_register_optim(ct_kernel_fn *t) {
    t[CT_OP_sgd_step] = k_sgd_step;
    t[CT_OP_adam_step] = k_adam_step;
}
