/* philox_avx2.c -- eight Philox 4x32-10 blocks at once (AVX2), bit for bit
 * the blocks of ct__philox (src/core/random_impl.h): lane b of each vector
 * is block `counter + b`.  The kernels that draw many consecutive blocks
 * (bernoulli's masks, the fused attention's dropout) call it when
 * ct__cpu_cap() >= CT_CAP_AVX2; the scalar ct__philox stays the reference
 * (test_random compares the two over counters that carry into the high word).
 *
 * Each round's two 32 x 32 -> 64-bit products go through _mm256_mul_epu32,
 * which multiplies the even 32-bit lanes: the odd lanes are shifted down
 * into a second product, and the high and low halves are blended back into
 * lane order.  Built for baseline x86-64: AVX2 is switched on by a target
 * pragma (as attention_avx2.c; clang gets -mavx2 from CMakeLists.txt). */
#ifndef __clang__
#pragma GCC target("avx2")
#endif
#include <immintrin.h>
#include <math.h>

#include "../../core/random_impl.h"
#include "philox8.h"

static inline void mul_hilo(__m256i a, __m256i m, __m256i *hi, __m256i *lo) {
    __m256i ev = _mm256_mul_epu32(a, m);                        /* lanes 0,2,4,6: 64-bit products */
    __m256i od = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m); /* lanes 1,3,5,7 */
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(ev, 32), od, 0xAA);
    *lo = _mm256_blend_epi32(ev, _mm256_slli_epi64(od, 32), 0xAA);
}

/* the eight blocks' four words, lane b = block counter + b */
static inline void philox8(uint64_t seed, uint64_t counter, __m256i c[4]) {
    uint32_t lo[8], hi[8];
    for (int b = 0; b < 8; b++) {
        uint64_t c = counter + (uint64_t)b;
        lo[b] = (uint32_t)c;
        hi[b] = (uint32_t)(c >> 32);
    }
    __m256i c0 = _mm256_loadu_si256((const __m256i *)lo), c1 = _mm256_loadu_si256((const __m256i *)hi);
    __m256i c2 = _mm256_setzero_si256(), c3 = _mm256_setzero_si256();
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const __m256i m0 = _mm256_set1_epi32((int)CT_PHILOX_M0), m1 = _mm256_set1_epi32((int)CT_PHILOX_M1);
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += CT_PHILOX_W0;
            k1 += CT_PHILOX_W1;
        }
        __m256i hi0, lo0, hi1, lo1;
        mul_hilo(c0, m0, &hi0, &lo0);
        mul_hilo(c2, m1, &hi1, &lo1);
        __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
        __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    c[0] = c0;
    c[1] = c1;
    c[2] = c2;
    c[3] = c3;
}

void ct__philox8_avx2(uint64_t seed, uint64_t counter, uint32_t out[4][8]) {
    __m256i c[4];
    philox8(seed, counter, c);
    for (int j = 0; j < 4; j++) _mm256_storeu_si256((__m256i *)out[j], c[j]);
}

void ct__philox8_bernoulli_f32_avx2(uint64_t seed, uint64_t counter, double th, float dst[32]) {
    __m256i c[4];
    philox8(seed, counter, c);
    /* word < th  <=>  word < ceil(th) (an integer word); th past the
     * largest word: always */
    __m256i keep[4];
    if (th > 4294967295.0) {
        for (int j = 0; j < 4; j++) keep[j] = _mm256_set1_epi32(-1);
    } else {
        const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
        uint32_t t = th > 0 ? (uint32_t)ceil(th) : 0;
        const __m256i tv = _mm256_xor_si256(_mm256_set1_epi32((int)t), sign);
        for (int j = 0; j < 4; j++) keep[j] = _mm256_cmpgt_epi32(tv, _mm256_xor_si256(c[j], sign));
    }
    /* element 4 b + j is word j of block b: a 4 x 8 transpose of the masks */
    __m256i a01 = _mm256_unpacklo_epi32(keep[0], keep[1]), b01 = _mm256_unpackhi_epi32(keep[0], keep[1]);
    __m256i a23 = _mm256_unpacklo_epi32(keep[2], keep[3]), b23 = _mm256_unpackhi_epi32(keep[2], keep[3]);
    __m256i q0 = _mm256_unpacklo_epi64(a01, a23); /* blocks 0 | 4 */
    __m256i q1 = _mm256_unpackhi_epi64(a01, a23); /* blocks 1 | 5 */
    __m256i q2 = _mm256_unpacklo_epi64(b01, b23); /* blocks 2 | 6 */
    __m256i q3 = _mm256_unpackhi_epi64(b01, b23); /* blocks 3 | 7 */
    const __m256 one = _mm256_set1_ps(1.0f);
    _mm256_storeu_ps(dst, _mm256_and_ps(_mm256_castsi256_ps(_mm256_permute2x128_si256(q0, q1, 0x20)), one));
    _mm256_storeu_ps(dst + 8, _mm256_and_ps(_mm256_castsi256_ps(_mm256_permute2x128_si256(q2, q3, 0x20)), one));
    _mm256_storeu_ps(dst + 16, _mm256_and_ps(_mm256_castsi256_ps(_mm256_permute2x128_si256(q0, q1, 0x31)), one));
    _mm256_storeu_ps(dst + 24, _mm256_and_ps(_mm256_castsi256_ps(_mm256_permute2x128_si256(q2, q3, 0x31)), one));
}
