/* transformer_rows.h -- the per-row loops of the Transformer fast path
 * (transformer_fast.c), included twice there: for baseline x86-64 and under
 * a target("avx2,fma") pragma, with TFM_ROW naming each build's functions.
 * No include guard on purpose. */
/* one row of add_ln */
static void TFM_ROW(add_ln_row)(const float *xr, const float *rr, float *sr, float *yr, const float *w,
                                  const float *b, float eps, int64_t d) {
    float acc = 0.f;
    if (rr) {
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < d; j++) {
            float v = xr[j] + rr[j];
            sr[j] = v;
            acc += v;
        }
    } else {
#pragma omp simd reduction(+ : acc)
        for (int64_t j = 0; j < d; j++) {
            sr[j] = xr[j];
            acc += xr[j];
        }
    }
    float mean = acc / (float)d, var = 0.f;
#pragma omp simd reduction(+ : var)
    for (int64_t j = 0; j < d; j++) {
        float c = sr[j] - mean;
        var += c * c;
    }
    float rstd = 1.0f / sqrtf(var / (float)d + eps);
    if (w && b) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd * w[j] + b[j];
    } else if (w) {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd * w[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < d; j++) yr[j] = (sr[j] - mean) * rstd;
    }
}

/* one row of bias_act */
static void TFM_ROW(bias_act_row)(float *hr, const float *b, bool gelu, int64_t n) {
    if (gelu) {
        for (int64_t j = 0; j < n; j++) {
            float v = hr[j] + (b ? b[j] : 0.f);
            hr[j] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
        }
    } else if (b) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) {
            float v = hr[j] + b[j];
            hr[j] = v > 0.f ? v : 0.f;
        }
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++) hr[j] = hr[j] > 0.f ? hr[j] : 0.f;
    }
}

