/* philox8.h -- private: eight consecutive Philox 4x32-10 blocks at once
 * (philox_avx2.c).  out[j][b] = word j of block ct__philox(seed, counter + b).
 * Call only when ct__cpu_cap() >= CT_CAP_AVX2. */
#ifndef CT_PHILOX8_H
#define CT_PHILOX8_H

#include <stdint.h>

void ct__philox8_avx2(uint64_t seed, uint64_t counter, uint32_t out[4][8]);
/* bernoulli's float32 draws from those blocks: dst[4 b + j] = 1.0f when
 * word j of block counter + b is < th (p * 2^32), else 0.0f */
void ct__philox8_bernoulli_f32_avx2(uint64_t seed, uint64_t counter, double th, float dst[32]);

#endif
