/* random_impl.h -- private: the Philox 4x32-10 counter-based generator
 * (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11)
 * and the global generator state shared by src/core/random.c,
 * src/ops/random.c and src/backend/cpu/random.c.
 *
 * A draw reserves a range of 128-bit counters [offset, offset + nblocks);
 * block b of the draw is philox(key = seed, counter = offset + b) and yields
 * four 32-bit words.  Element i of a draw always uses block (i / per_block),
 * so values do not depend on how the work is split among threads. */
#ifndef CT_RANDOM_IMPL_H
#define CT_RANDOM_IMPL_H

#include <stdint.h>

#include "tensor_impl.h"

#define CT_PHILOX_M0 0xD2511F53u
#define CT_PHILOX_M1 0xCD9E8D57u
#define CT_PHILOX_W0 0x9E3779B9u
#define CT_PHILOX_W1 0xBB67AE85u

typedef struct { uint32_t v[4]; } ct_philox_block;

/* The Philox 4x32-10 bijection of a 128-bit counter under a 64-bit key. */
static inline ct_philox_block ct__philox4x32(const uint32_t ctr[4], const uint32_t key[2]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) { /* bump the key between rounds */
            k0 += CT_PHILOX_W0;
            k1 += CT_PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)CT_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)CT_PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    ct_philox_block b = {{c0, c1, c2, c3}};
    return b;
}

/* Block `counter` of the stream of `seed`: counter in words 0-1, seed as the key. */
static inline ct_philox_block ct__philox(uint64_t seed, uint64_t counter) {
    const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    return ct__philox4x32(ctr, key);
}

/* Uniform in [0, 1) from 24 bits (float) or 53 bits (two words, double). */
static inline float ct__u32_to_f32(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
static inline double ct__u64_to_f64(uint32_t lo, uint32_t hi) {
    uint64_t x = ((uint64_t)hi << 32) | lo;
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}
/* An integer in [0, range) from 64 random bits (multiply-shift: the bias is
 * at most range / 2^64). range >= 1. */
static inline uint64_t ct__u64_below(uint32_t lo, uint32_t hi, uint64_t range) {
    uint64_t x = ((uint64_t)hi << 32) | lo;
    return (uint64_t)(((unsigned __int128)x * range) >> 64);
}

/* Reserves nblocks counters of the default generator atomically; returns
 * the seed and the first counter. */
void ct__rng_reserve(uint64_t nblocks, uint64_t *seed, uint64_t *offset);

/* Blocks of per_block elements that n elements take (the random ops'
 * parameters, seed and offset included, are ct_p_random: params_random.def). */
static inline uint64_t ct__blocks(int64_t n, int64_t per_block) {
    return (uint64_t)((n + per_block - 1) / per_block);
}

#endif
