/* dataset_impl.h -- private helpers shared by the built-in datasets,
 * samplers and the DataLoader: a seeded Philox stream that never touches
 * the global generator, and whole-file reading. */
#ifndef CT_DATASET_IMPL_H
#define CT_DATASET_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/random_impl.h"
#include "../ops/op_table.h"
#include "ctorch/data.h"

/* A sequential stream of 32-bit words: blocks 0, 1, 2, ... of
 * philox(key, counter). */
typedef struct ct__drng {
    uint64_t key, ctr;
    uint32_t buf[4];
    int pos;
} ct__drng;

static inline void ct__drng_init(ct__drng *r, uint64_t key) {
    r->key = key;
    r->ctr = 0;
    r->pos = 4;
}
static inline uint32_t ct__drng_u32(ct__drng *r) {
    if (r->pos == 4) {
        ct_philox_block b = ct__philox(r->key, r->ctr++);
        for (int i = 0; i < 4; i++) r->buf[i] = b.v[i];
        r->pos = 0;
    }
    return r->buf[r->pos++];
}
/* Uniform integer in [0, range), range >= 1. */
static inline uint64_t ct__drng_below(ct__drng *r, uint64_t range) {
    uint32_t lo = ct__drng_u32(r), hi = ct__drng_u32(r);
    return ct__u64_below(lo, hi, range);
}
/* Uniform double in [0, 1). */
static inline double ct__drng_f64(ct__drng *r) {
    uint32_t lo = ct__drng_u32(r), hi = ct__drng_u32(r);
    return ct__u64_to_f64(lo, hi);
}

/* The callbacks of a dataset (sample.c). */
const ct_dataset_vtable *ct__dataset_vt(ct_dataset *d);

/* Reads a whole file into a malloc'ed buffer (*size bytes, plus a NUL).
 * NULL + CT_ERR_IO naming `what` and the path. */
char *ct__ds_read_file(const char *what, const char *path, size_t *size);

#endif
