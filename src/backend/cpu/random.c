/* random.c (cpu) -- kernels of the random family.
 *
 * Every kernel writes a contiguous output (the op layer makes one and
 * copies it into strided or half-precision destinations).  Work is split
 * over Philox blocks: block b (counter a->p.random.offset + b) produces the values of
 * elements [b*P, b*P + P), so results are bitwise identical whatever the
 * number of threads. */
#include <math.h>
#include <stdlib.h>

#include "../../core/random_impl.h"
#include "../../ops/op_table.h"
#include "cpu_caps.h"
#include "philox8.h"

#define RNG_GRAIN (CT_GRAIN / 4)

static inline void store_d(char *base, ct_dtype dt, int64_t i, double v) {
    switch (dt) {
    case CT_F32: ((float *)base)[i] = (float)v; break;
    case CT_F64: ((double *)base)[i] = v; break;
    case CT_I64: ((int64_t *)base)[i] = (int64_t)v; break;
    case CT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case CT_I16: ((int16_t *)base)[i] = (int16_t)v; break;
    case CT_I8: ((int8_t *)base)[i] = (int8_t)v; break;
    case CT_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case CT_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: ct__store_f64(base + i * (int64_t)ct_dtype_size(dt), dt, v); break;
    }
}

static inline void store_i(char *base, ct_dtype dt, int64_t i, int64_t v) {
    switch (dt) {
    case CT_F32: ((float *)base)[i] = (float)v; break;
    case CT_F64: ((double *)base)[i] = (double)v; break;
    case CT_I64: ((int64_t *)base)[i] = v; break;
    case CT_I32: ((int32_t *)base)[i] = (int32_t)v; break;
    case CT_I16: ((int16_t *)base)[i] = (int16_t)v; break;
    case CT_I8: ((int8_t *)base)[i] = (int8_t)v; break;
    case CT_U8: ((uint8_t *)base)[i] = (uint8_t)v; break;
    case CT_BOOL: ((uint8_t *)base)[i] = v != 0; break;
    default: ct__store_i64(base + i * (int64_t)ct_dtype_size(dt), dt, v); break;
    }
}

#define SEED(a) ((uint64_t)(a)->p.random.seed)
#define OFF(a) ((uint64_t)(a)->p.random.offset)

/* uniform [from, to): f32 takes 24 bits (4 per block), f64 53 bits (2). */
static ct_status k_uniform(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(o);
    uint64_t seed = SEED(a), off = OFF(a);
    double from = a->p.random.from, to = a->p.random.to;
    if (o->dtype == CT_F32) {
        float *p = ct__ptr(o);
        float lo = (float)from, w = (float)(to - from);
        int64_t nb = (int64_t)ct__blocks(n, 4);
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
        for (int64_t b = 0; b < nb; b++) {
            ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
            for (int j = 0; j < 4 && b * 4 + j < n; j++) {
                float v = ct__u32_to_f32(r.v[j]) * w + lo;
                /* rounding may reach `to`: keep the half-open range */
                if (v >= (float)to && to > from) v = nextafterf((float)to, -INFINITY);
                p[b * 4 + j] = v;
            }
        }
    } else if (o->dtype == CT_F64) {
        double *p = ct__ptr(o);
        int64_t nb = (int64_t)ct__blocks(n, 2);
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
        for (int64_t b = 0; b < nb; b++) {
            ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
            for (int j = 0; j < 2 && b * 2 + j < n; j++) {
                double v = ct__u64_to_f64(r.v[2 * j], r.v[2 * j + 1]) * (to - from) + from;
                if (v >= to && to > from) v = nextafter(to, -INFINITY);
                p[b * 2 + j] = v;
            }
        }
    } else {
        return ct__error_status(CT_ERR_DTYPE, "uniform: kernel got %s", ct_dtype_name(o->dtype));
    }
    return CT_OK;
}

/* normal(mean, std): Box-Muller on pairs of 53-bit uniforms, 2 per block. */
static ct_status k_normal(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    if (o->dtype != CT_F32 && o->dtype != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "normal: kernel got %s", ct_dtype_name(o->dtype));
    int64_t n = ct_numel(o);
    uint64_t seed = SEED(a), off = OFF(a);
    double mean = a->p.random.mean, sd = a->p.random.std;
    char *p = ct__ptr(o);
    ct_dtype dt = o->dtype;
    int64_t nb = (int64_t)ct__blocks(n, 2);
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
    for (int64_t b = 0; b < nb; b++) {
        ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
        double u1 = 1.0 - ct__u64_to_f64(r.v[0], r.v[1]); /* (0, 1] */
        double u2 = ct__u64_to_f64(r.v[2], r.v[3]);
        double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
        double z[2] = {rad * cos(th), rad * sin(th)};
        for (int j = 0; j < 2 && b * 2 + j < n; j++) {
            if (dt == CT_F32) ((float *)p)[b * 2 + j] = (float)(z[j] * sd + mean);
            else ((double *)p)[b * 2 + j] = z[j] * sd + mean;
        }
    }
    return CT_OK;
}

/* integers in [low, high), 64 random bits each, 2 per block; any dtype. */
static ct_status k_randint(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(o);
    uint64_t seed = SEED(a), off = OFF(a);
    int64_t low = a->p.random.low, high = a->p.random.high;
    uint64_t range = (uint64_t)high - (uint64_t)low;
    char *p = ct__ptr(o);
    ct_dtype dt = o->dtype;
    int64_t nb = (int64_t)ct__blocks(n, 2);
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
    for (int64_t b = 0; b < nb; b++) {
        ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
        for (int j = 0; j < 2 && b * 2 + j < n; j++) {
            uint64_t z = ct__u64_below(r.v[2 * j], r.v[2 * j + 1], range);
            store_i(p, dt, b * 2 + j, (int64_t)((uint64_t)low + z));
        }
    }
    return CT_OK;
}

/* 1 with probability p (in[0]: contiguous f64 probabilities, or f[0]).
 * Element i takes word i % 4 of block i / 4: u = word / 2^32 (exact in
 * double), 1 when u < p (p = 0: never, p = 1: always).  A float32 or byte
 * output with one p (dropout's masks) is stored without the per-element
 * dtype switch. */
static ct_status k_bernoulli(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a) {
    (void)nout;
    ct_tensor *o = out[0];
    int64_t n = ct_numel(o);
    uint64_t seed = SEED(a), off = OFF(a);
    const double *pp = nin > 0 && in[0] ? (const double *)ct__ptr(in[0]) : NULL;
    double pscalar = a->p.random.p;
    char *p = ct__ptr(o);
    ct_dtype dt = o->dtype;
    const double sc = 1.0 / 4294967296.0;
    int64_t nb = (int64_t)ct__blocks(n, 4);
    if (!pp && (dt == CT_F32 || dt == CT_BOOL || dt == CT_U8)) {
        /* u < p  <=>  word < p * 2^32 (both sides exact: the threshold is
         * compared as a double) */
        const double th = pscalar * 4294967296.0;
        float *pf = dt == CT_F32 ? (float *)(void *)p : NULL;
        uint8_t *pb = (uint8_t *)p;
        /* groups of 8 blocks (32 elements): eight at once with AVX2 */
        const int avx2 = ct__cpu_cap() >= CT_CAP_AVX2;
        int64_t ng = (nb + 7) / 8;
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
        for (int64_t g = 0; g < ng; g++) {
            uint32_t w[4][8];
            int64_t b0 = g * 8, nbk = nb - b0 < 8 ? nb - b0 : 8;
            if (avx2 && pf && (b0 + 8) * 4 <= n) { /* 32 whole elements */
                ct__philox8_bernoulli_f32_avx2(seed, off + (uint64_t)b0, th, pf + b0 * 4);
                continue;
            }
            if (avx2 && nbk == 8) ct__philox8_avx2(seed, off + (uint64_t)b0, w);
            else
                for (int64_t k = 0; k < nbk; k++) {
                    ct_philox_block r = ct__philox(seed, off + (uint64_t)(b0 + k));
                    for (int j = 0; j < 4; j++) w[j][k] = r.v[j];
                }
            for (int64_t k = 0; k < nbk; k++) {
                int64_t i0 = (b0 + k) * 4, m = n - i0 < 4 ? n - i0 : 4;
                if (pf)
                    for (int j = 0; j < m; j++) pf[i0 + j] = (double)w[j][k] < th ? 1.0f : 0.0f;
                else
                    for (int j = 0; j < m; j++) pb[i0 + j] = (double)w[j][k] < th;
            }
        }
        return CT_OK;
    }
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
    for (int64_t b = 0; b < nb; b++) {
        ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
        for (int j = 0; j < 4 && b * 4 + j < n; j++) {
            int64_t i = b * 4 + j;
            double u = (double)r.v[j] * sc;
            store_i(p, dt, i, u < (pp ? pp[i] : pscalar) ? 1 : 0);
        }
    }
    return CT_OK;
}

/* exponential(lambda): -log(1 - u) / lambda, 2 per block. */
static ct_status k_exponential(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                               const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    if (o->dtype != CT_F32 && o->dtype != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "exponential: kernel got %s", ct_dtype_name(o->dtype));
    int64_t n = ct_numel(o);
    uint64_t seed = SEED(a), off = OFF(a);
    double lambd = a->p.random.lambd;
    char *p = ct__ptr(o);
    ct_dtype dt = o->dtype;
    int64_t nb = (int64_t)ct__blocks(n, 2);
#pragma omp parallel for if (nb > RNG_GRAIN) num_threads(ct__num_threads())
    for (int64_t b = 0; b < nb; b++) {
        ct_philox_block r = ct__philox(seed, off + (uint64_t)b);
        for (int j = 0; j < 2 && b * 2 + j < n; j++) {
            double u = ct__u64_to_f64(r.v[2 * j], r.v[2 * j + 1]);
            store_d(p, dt, b * 2 + j, -log1p(-u) / lambd);
        }
    }
    return CT_OK;
}

typedef struct { double score; int64_t idx; } scored;

static int cmp_scored(const void *x, const void *y) {
    const scored *a = x, *b = y;
    if (a->score > b->score) return -1;
    if (a->score < b->score) return 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* probs [m, n] contiguous f64 (validated by the op layer), out int64
 * [m, k] contiguous.  With replacement: inverse CDF, one block per sample
 * (counter off + r*k + j).  Without: the top k of p / Exp(1) (Gumbel-style
 * trick, like torch), one block per category (counter off + r*n + c). */
static ct_status k_multinomial(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                               const ct_args *a) {
    (void)nout; (void)nin;
    ct_tensor *pr = in[0], *o = out[0];
    int64_t m = pr->ndim == 2 ? pr->sizes[0] : 1, n = pr->sizes[pr->ndim - 1];
    int64_t k = a->p.random.num_samples;
    int repl = a->p.random.replacement;
    uint64_t seed = SEED(a), off = OFF(a);
    const double *P = ct__ptr(pr);
    int64_t *O = ct__ptr(o);
    int fail = 0;
#pragma omp parallel for if (m * (n + k) > RNG_GRAIN) num_threads(ct__num_threads())
    for (int64_t r = 0; r < m; r++) {
        const double *row = P + r * n;
        int64_t *orow = O + r * k;
        if (repl) {
            double *cdf = malloc(sizeof(double) * (size_t)(n ? n : 1));
            if (!cdf) {
#pragma omp atomic write
                fail = 1;
                continue;
            }
            double acc = 0;
            int64_t last = 0;
            for (int64_t c = 0; c < n; c++) {
                acc += row[c];
                cdf[c] = acc;
                if (row[c] > 0) last = c;
            }
            for (int64_t j = 0; j < k; j++) {
                ct_philox_block b = ct__philox(seed, off + (uint64_t)(r * k + j));
                double t = ct__u64_to_f64(b.v[0], b.v[1]) * acc;
                int64_t lo = 0, hi = n - 1;
                while (lo < hi) { /* first c with cdf[c] > t */
                    int64_t mid = lo + (hi - lo) / 2;
                    if (cdf[mid] > t) hi = mid;
                    else lo = mid + 1;
                }
                if (lo > last) lo = last;
                orow[j] = lo;
            }
            free(cdf);
        } else {
            scored *s = malloc(sizeof(scored) * (size_t)(n ? n : 1));
            if (!s) {
#pragma omp atomic write
                fail = 1;
                continue;
            }
            for (int64_t c = 0; c < n; c++) {
                ct_philox_block b = ct__philox(seed, off + (uint64_t)(r * n + c));
                double e = -log1p(-ct__u64_to_f64(b.v[0], b.v[1]));
                s[c].idx = c;
                s[c].score = row[c] > 0 ? (e > 0 ? row[c] / e : INFINITY) : 0.0;
            }
            qsort(s, (size_t)n, sizeof(scored), cmp_scored);
            for (int64_t j = 0; j < k; j++) orow[j] = s[j].idx;
            free(s);
        }
    }
    if (fail) return ct__error_status(CT_ERR_OOM, "multinomial: out of memory");
    return CT_OK;
}

/* Fisher-Yates: for i in [0, n-1): swap(r[i], r[i + below(n - i)]), the
 * draw for step i from block off + i. */
static ct_status k_randperm(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a) {
    (void)nout; (void)in; (void)nin;
    ct_tensor *o = out[0];
    int64_t n = a->p.random.n;
    uint64_t seed = SEED(a), off = OFF(a);
    int64_t *r = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!r) return ct__error_status(CT_ERR_OOM, "randperm: out of memory");
    for (int64_t i = 0; i < n; i++) r[i] = i;
    for (int64_t i = 0; i + 1 < n; i++) {
        ct_philox_block b = ct__philox(seed, off + (uint64_t)i);
        int64_t z = (int64_t)ct__u64_below(b.v[0], b.v[1], (uint64_t)(n - i));
        int64_t tmp = r[i];
        r[i] = r[i + z];
        r[i + z] = tmp;
    }
    char *p = ct__ptr(o);
    for (int64_t i = 0; i < n; i++) store_i(p, o->dtype, i, r[i]);
    free(r);
    return CT_OK;
}

void ct__cpu_register_random(ct_kernel_fn *t) {
    t[CT_OP_uniform] = k_uniform;
    t[CT_OP_normal] = k_normal;
    t[CT_OP_randint] = k_randint;
    t[CT_OP_bernoulli] = k_bernoulli;
    t[CT_OP_exponential] = k_exponential;
    t[CT_OP_multinomial] = k_multinomial;
    t[CT_OP_randperm] = k_randperm;
}
