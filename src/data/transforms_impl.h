/* transforms_impl.h -- private: shared helpers of image.c, transforms*.c
 * and image_folder.c. */
#ifndef CT_TRANSFORMS_IMPL_H
#define CT_TRANSFORMS_IMPL_H

#include "../ops/op_table.h"
#include "ctorch/data.h"

/* Decodes buf (n bytes) naming `what` (a path or "<memory>") in errors.
 * Returns a fresh uint8 [H, W, C] tensor NOT in any scope (refcount 1). */
ct_tensor *ct__image_decode_named(const void *buf, size_t n, ct_image_mode mode,
                                  const char *what);
/* Reads a whole file (malloc'ed, caller frees); NULL + CT_ERR_IO naming path. */
void *ct__read_file(const char *path, size_t *n);

/* Per-sample seed (dataloader.c); transforms.c holds a weak default
 * returning 0 so the library links without the DataLoader. */
uint64_t ct_data_current_seed(void);

/* splitmix64-based mixer used for transform seeds. */
static inline uint64_t ct__tf_splitmix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t ct__tf_mix(uint64_t a, uint64_t b) {
    return ct__tf_splitmix(a ^ ct__tf_splitmix(b));
}

#endif
