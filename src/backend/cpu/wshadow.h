/* wshadow.h (cpu) -- private: bf16 shadows of float32 weights for autocast's
 * bf16 products (wshadow.c; used by linalg.c's gemm_lp and optim.c's AdamW). */
#ifndef CT_CPU_WSHADOW_H
#define CT_CPU_WSHADOW_H

#include <stdint.h>

#include "../../core/tensor_impl.h"

/* The bf16 shadow of a float32 B operand of gemm_lp (a weight or its
 * transpose), positioned at B's first element and read with B's strides,
 * or NULL: then the GEMM rounds B itself as it packs it.  A weight is noted
 * at its first use and shadowed from its second use with the same
 * contents on (the backward of a step); the fused AdamW then writes the
 * shadow as it updates the weight, so later steps find it fresh. */
const uint16_t *ct__wshadow_get(const ct_tensor *B);
/* For the fused AdamW kernel: the shadow buffer of parameter p (all of
 * its elements in order), or NULL when it has none. */
uint16_t *ct__wshadow_find(const ct_tensor *p);
/* After the kernel wrote p's shadow from p's new values: fresh for the
 * version the adam_step op gives p next (its current version + 1). */
void ct__wshadow_stamp_next(const ct_tensor *p);
/* x[0..n) rounded to bf16 as the vdpbf16ps GEMM rounds float32 operands
 * (vcvtneps2bf16: to nearest even, subnormal inputs as zero); only where
 * ct__gemm_bf16dot_ok(). */
void ct__wshadow_round(uint16_t *o, const float *x, int64_t n);
/* tests: 1 turns shadows off (every product rounds its float32 B itself);
 * the products that read a shadow so far */
extern int ct__wshadow_off;
long long ct__wshadow_hits(void);
/* the bytes the shadows hold now */
size_t ct__wshadow_bytes(void);

#endif
