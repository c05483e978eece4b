/* sort.c (cpu) -- sorting kernels: sort, topk, kthvalue, median_dim, mode,
 * unique.  in[0] is the input (any strides; made contiguous here); the op
 * layer passes a->p.sort.pre, n, post (the sorted dim has n elements and
 * stride post in the contiguous layout).
 *   sort:       out values/indices (pre, n, post); a->p.sort.descending
 *   topk:       out (pre, k, post); a->p.sort.largest, a->p.sort.k
 *   kthvalue:   out (pre, post); a->p.sort.k (1-based)
 *   median_dim: out (pre, post); a->p.sort.ignore_nan (nanmedian)
 *   mode:       out (pre, post)
 *   unique:     in flat; out values (n), inverse (n), counts (n + 1; the last
 *               element receives the number of unique values);
 *               a->p.sort.consecutive: consecutive runs only.
 * Every sort is a stable merge sort; NaN orders as the largest value. */
#include <math.h>

#include "../../ops/iter.h"
#include "../../ops/reduce_impl.h"

#define DT_LIST(X)                                                                 \
    X(CT_BOOL, uint8_t, b, 0) X(CT_U8, uint8_t, u8, 0) X(CT_I8, int8_t, i8, 0)      \
    X(CT_I16, int16_t, i16, 0) X(CT_I32, int32_t, i32, 0) X(CT_I64, int64_t, i64, 0) \
    X(CT_F32, float, f32, 1) X(CT_F64, double, f64, 1)

#define SORT_T(DT, T, SFX, ISF)                                                    \
    static inline int lt_##SFX(T a, T b) {                                         \
        if (ISF) {                                                                 \
            if (b != b) return a == a;                                             \
            if (a != a) return 0;                                                  \
        }                                                                          \
        return a < b;                                                              \
    }                                                                              \
    static inline int isnan_##SFX(T a) { return ISF && a != a; }                   \
    /* stable merge sort of idx[0..n) by v[idx]; tmp has n slots */                \
    static void msort_##SFX(const T *v, int64_t *idx, int64_t *tmp, int64_t n, int desc) { \
        for (int64_t i = 1; i < n; i++) { /* insertion sort runs of 16 */          \
            if (i % 16 == 0) continue;                                             \
            int64_t cur = idx[i], j = i - 1;                                       \
            int64_t lo = i - i % 16;                                               \
            while (j >= lo && (desc ? lt_##SFX(v[idx[j]], v[cur]) : lt_##SFX(v[cur], v[idx[j]]))) { \
                idx[j + 1] = idx[j];                                               \
                j--;                                                               \
            }                                                                      \
            idx[j + 1] = cur;                                                      \
        }                                                                          \
        int64_t *src = idx, *dst = tmp;                                            \
        for (int64_t w = 16; w < n; w *= 2) {                                      \
            for (int64_t s = 0; s < n; s += 2 * w) {                               \
                int64_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n; \
                int64_t l = s, r = m, k = s;                                       \
                while (l < m && r < e) {                                           \
                    int before = desc ? lt_##SFX(v[src[l]], v[src[r]]) : lt_##SFX(v[src[r]], v[src[l]]); \
                    dst[k++] = before ? src[r++] : src[l++];                       \
                }                                                                  \
                while (l < m) dst[k++] = src[l++];                                 \
                while (r < e) dst[k++] = src[r++];                                 \
            }                                                                      \
            int64_t *t = src; src = dst; dst = t;                                  \
        }                                                                          \
        if (src != idx) memcpy(idx, src, sizeof(int64_t) * (size_t)n);             \
    }                                                                              \
    static void sortrows_##SFX(const T *x, ct_tensor *const *out, const ct_args *a) { \
        int64_t pre = a->p.sort.pre, n = a->p.sort.n, post = a->p.sort.post;       \
        int64_t rows = pre * post;                                                 \
        ct_op op = a->op;                                                          \
        int desc = op == CT_OP_topk ? a->p.sort.largest : a->p.sort.descending;    \
        int64_t k = a->p.sort.k;                                                   \
        T *vo = out[0] ? (T *)ct__ptr(out[0]) : NULL;                              \
        int64_t *io = out[1] ? (int64_t *)ct__ptr(out[1]) : NULL;                  \
        _Pragma("omp parallel for if (rows > 1 && rows * n > 4096) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                       \
            int64_t a0 = r / post, b0 = r % post, off = a0 * n * post + b0;        \
            T *v = malloc(sizeof(T) * (size_t)(n ? n : 1));                        \
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));          \
            if (!v || !idx) { free(v); free(idx); continue; }                      \
            for (int64_t i = 0; i < n; i++) { v[i] = x[off + i * post]; idx[i] = i; } \
            int d = op == CT_OP_sort || op == CT_OP_topk ? desc : 0;               \
            msort_##SFX(v, idx, idx + n, n, d);                                    \
            if (op == CT_OP_sort) {                                                \
                for (int64_t i = 0; i < n; i++) {                                  \
                    vo[off + i * post] = v[idx[i]];                                \
                    io[off + i * post] = idx[i];                                   \
                }                                                                  \
            } else if (op == CT_OP_topk) {                                         \
                int64_t o2 = a0 * k * post + b0;                                   \
                for (int64_t i = 0; i < k; i++) {                                  \
                    vo[o2 + i * post] = v[idx[i]];                                 \
                    io[o2 + i * post] = idx[i];                                    \
                }                                                                  \
            } else {                                                               \
                int64_t sel = 0;                                                   \
                if (op == CT_OP_kthvalue) sel = k - 1;                             \
                else if (op == CT_OP_median_dim) {                                 \
                    int64_t nn = 0, firstnan = -1;                                 \
                    for (int64_t i = 0; i < n; i++) {                              \
                        if (isnan_##SFX(v[i])) { if (firstnan < 0) firstnan = i; } \
                        else nn++;                                                 \
                    }                                                              \
                    if (a->p.sort.ignore_nan) sel = nn > 0 ? (nn - 1) / 2 : 0;     \
                    else if (firstnan >= 0) { sel = -1; idx[0] = firstnan; }       \
                    else sel = (n - 1) / 2;                                        \
                    if (sel < 0) sel = 0;                                          \
                } else { /* mode: longest run, the smallest value on ties, its last index */ \
                    int64_t best = 0, bestlen = 0, run = 0;                        \
                    for (int64_t i = 0; i < n; i++) {                              \
                        run++;                                                     \
                        if (i == n - 1 || v[idx[i]] != v[idx[i + 1]]) {            \
                            if (run > bestlen) { bestlen = run; best = i; }        \
                            run = 0;                                               \
                        }                                                          \
                    }                                                              \
                    sel = best;                                                    \
                }                                                                  \
                if (vo) vo[a0 * post + b0] = v[idx[sel]];                          \
                if (io) io[a0 * post + b0] = idx[sel];                             \
            }                                                                      \
            free(v);                                                               \
            free(idx);                                                             \
        }                                                                          \
    }                                                                              \
    static void unique_##SFX(const T *x, int64_t n, ct_tensor *const *out, int consecutive) { \
        T *vo = (T *)ct__ptr(out[0]);                                              \
        int64_t *inv = (int64_t *)ct__ptr(out[1]), *cnt = (int64_t *)ct__ptr(out[2]); \
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));              \
        if (!idx) return;                                                          \
        for (int64_t i = 0; i < n; i++) idx[i] = i;                                \
        if (!consecutive) msort_##SFX(x, idx, idx + n, n, 0);                      \
        int64_t u = -1;                                                            \
        for (int64_t i = 0; i < n; i++) {                                          \
            T cur = x[idx[i]];                                                     \
            if (i == 0 || cur != x[idx[i - 1]]) {                                  \
                u++;                                                               \
                vo[u] = cur;                                                       \
                cnt[u] = 0;                                                        \
            }                                                                      \
            inv[idx[i]] = u;                                                       \
            cnt[u]++;                                                              \
        }                                                                          \
        cnt[n] = u + 1;                                                            \
        free(idx);                                                                 \
    }
DT_LIST(SORT_T)

static ct_status k_sort(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    ct_dtype dt = in[0]->dtype;
    ct_tensor *c = ct__contig_as(in[0], dt);
    if (!c) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    const void *x = ct__ptr(c);
    ct_status st = CT_OK;
    if (a->op == CT_OP_unique) {
        int64_t n = ct_numel(c);
        switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: unique_##SFX((const T *)x, n, out, a->p.sort.consecutive); break;
            DT_LIST(CASE)
#undef CASE
        default: st = CT_ERR_DTYPE;
        }
    } else {
        ct_tensor *o2[2] = {out[0], nout > 1 ? out[1] : NULL};
        switch (dt) {
#define CASE(DT, T, SFX, ISF) case DT: sortrows_##SFX((const T *)x, o2, a); break;
            DT_LIST(CASE)
#undef CASE
        default: st = CT_ERR_DTYPE;
        }
    }
    ct_release(c);
    if (st)
        return ct__error_status(st, "%s: not implemented for %s", ct__op_info[a->op].name,
                                ct_dtype_name(dt));
    return CT_OK;
}

void ct__cpu_register_sort(ct_kernel_fn *t) {
    t[CT_OP_sort] = k_sort;
    t[CT_OP_topk] = k_sort;
    t[CT_OP_kthvalue] = k_sort;
    t[CT_OP_median_dim] = k_sort;
    t[CT_OP_mode] = k_sort;
    t[CT_OP_unique] = k_sort;
}
