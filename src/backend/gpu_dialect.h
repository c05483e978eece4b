/* gpu_dialect.h -- private to the GPU backends: kernel text shared between
 * OpenCL C and CUDA C++.
 *
 * The OpenCL device generates its kernels as OpenCL C (a prelude, the
 * scalar helpers of src/ops/ew_scalar.h where needed, and a body per op,
 * dtype and shape class).  ct__cuda_dialect_prelude, put in front of such
 * text, makes it CUDA C++ for NVRTC (compiled with -default-device, so
 * unannotated functions are device functions): the address-space keywords,
 * __kernel, the work-item functions, the OpenCL types and built-ins (as_T,
 * vload_half, vstore_half_rte, vector types, atomics, barrier) mapped to
 * CUDA's.  A work-group is a block: get_local_size(0) is blockDim.x.
 *
 * Recording.  A backend reports each program it builds through
 * ct__gpu_source_seen; while recording is on (tests), the distinct
 * (prelude, helpers, body) triples are kept, so that a test can compile
 * every kernel a run generated as CUDA (tests/test_backend_ops.c with
 * NVRTC, for sm_80 and sm_90). */
#ifndef CT_GPU_DIALECT_H
#define CT_GPU_DIALECT_H

#include <stdbool.h>

extern const char ct__cuda_dialect_prelude[];

typedef struct ct_gpu_source {
    const char *what;    /* the op it was generated for */
    const char *prelude; /* the generator's prelude (OpenCL C) */
    const char *helpers; /* "" or the scalar helpers' text */
    const char *body;    /* the kernel "k" and what it defines */
} ct_gpu_source;

/* Starts (true) or stops recording; stopping frees what was recorded. */
void ct__gpu_sources_record(bool on);
/* A program a backend builds (the three parts of its text); copied when
 * recording, else nothing.  Thread-safe. */
void ct__gpu_source_seen(const char *what, const char *prelude, const char *helpers, const char *body);
/* The recorded sources, in the order first seen; valid until recording
 * stops.  Returns their number. */
int ct__gpu_sources(const ct_gpu_source **out);
#endif
