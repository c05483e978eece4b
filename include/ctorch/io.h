/* ctorch/io.h -- serialization: safetensors files, module state dicts and
 * optimizer state (checkpoints).
 *
 * The format is Hugging Face's safetensors: an 8-byte little-endian header
 * length N, N bytes of JSON
 *
 *     {"__metadata__":{"format":"pt"},
 *      "fc.weight":{"dtype":"F32","shape":[10,784],"data_offsets":[0,31360]}, ...}
 *
 * padded with spaces, then the raw little-endian tensor bytes.  Files
 * written by Python's `safetensors.torch.save_file` load here, and ours
 * are byte-for-byte what that function writes for the same tensors and
 * (single-entry) metadata, so Python loads them.
 *
 * Reading: ct_safetensors_open reads the whole file into memory (one
 * read, no per-tensor copies; a file another process truncates or
 * rewrites later cannot reach tensors already loaded, and one that shrinks
 * while being read is a CT_ERR_IO error) and validates the whole header
 * before anything is used: header
 * length within the file and at most 100,000,000 bytes, valid UTF-8,
 * strict JSON (RFC 8259, nesting depth <= 64, no duplicate keys), every
 * entry's dtype known, shape non-negative integers with an overflow-checked
 * product, data_offsets [begin, end] with end - begin == numel * itemsize,
 * and the entries covering the data section exactly once (sorted by
 * begin: no gap, no overlap, no trailing bytes -- the checks Python's
 * reader makes).  A file that fails any check is rejected with a
 * CT_ERR_FORMAT error naming the file, the entry and the problem.
 * Tensors are created lazily by ct_safetensors_get: ZERO-COPY views of the
 * file's bytes in memory when the data is aligned for its dtype (those
 * bytes stay alive while any such tensor does, even after
 * ct_safetensors_close; an in-place write to such a tensor changes this
 * process's copy, never the file), copies otherwise (and for BOOL data
 * holding bytes other than 0 and 1, which load normalized to true/false).
 *
 * ct_safetensors_open_mmap / ct_safetensors_load_mmap map the file instead
 * (mmap, copy-on-write; nothing is read up front, pages come in as tensors
 * are used).  DO NOT TRUNCATE OR REWRITE THE FILE IN PLACE WHILE THE FILE
 * OBJECT OR TENSORS FROM IT LIVE: reading a page of a mapping whose file
 * was truncated kills the process with SIGBUS, which no library can turn
 * into an error.  Files replaced by our atomic writer (rename) are safe.
 *
 * dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL C64 map to ctorch's
 * dtypes; U16 and U32 load converted to int32 / int64 (ctorch has no
 * unsigned types wider than a byte); U64 and the F8/F6/F4 formats are
 * recognized (the file opens) but ct_safetensors_get of such an entry
 * fails with CT_ERR_DTYPE.  Writing accepts every ctorch dtype except
 * complex128 and complex32, which safetensors cannot represent.
 *
 * Writing is atomic: a temporary file in the destination's directory is
 * written, flushed and fsync'ed, then renamed over the destination and
 * the directory fsync'ed -- a crash or a kill at any moment leaves either
 * the old file or the new one, never a mix (at worst a stray
 * "<path>.tmp.<pid>.<6 random characters>" file, which the next save of
 * the same path removes once process <pid> is gone).  Little-endian hosts
 * only.
 */
#ifndef CTORCH_IO_H
#define CTORCH_IO_H

#include "data.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reading ------------------------------------------------------------ */
typedef struct ct_safetensors ct_safetensors;

/* Opens a .safetensors file, reads it into memory and validates it.  NULL +
 * error (CT_ERR_IO when it cannot be read, CT_ERR_FORMAT when it is
 * malformed, CT_ERR_OOM when it does not fit in memory). */
CT_API ct_safetensors *ct_safetensors_open(const char *path);
/* The same with the file mapped (mmap) instead of read: for files larger
 * than memory or when only a few tensors are wanted.  Do not truncate or
 * rewrite the file while the file object or tensors from it live (SIGBUS,
 * see above). */
CT_API ct_safetensors *ct_safetensors_open_mmap(const char *path);
/* The same for bytes in memory (copied; the caller keeps its buffer).
 * name is used in error messages (NULL: "<buffer>"). */
CT_API ct_safetensors *ct_safetensors_open_buffer(const void *data, size_t size, const char *name);
/* Closes the file.  Tensors already obtained stay valid. NULL is a no-op. */
CT_API void ct_safetensors_close(ct_safetensors *f);

/* Entries in the order of their data offsets; names are borrowed (valid
 * until close). */
CT_API int ct_safetensors_count(const ct_safetensors *f);
CT_API const char *ct_safetensors_name(const ct_safetensors *f, int i);
/* Index of an entry by name, or -1 (no error recorded). */
CT_API int ct_safetensors_find(const ct_safetensors *f, const char *name);
/* An entry's description without loading it: its safetensors dtype name
 * ("F32"), ndim and shape (up to CT_MAX_DIMS entries written to shape,
 * which may be NULL), and whether it loads zero-copy. */
CT_API ct_status ct_safetensors_info(const ct_safetensors *f, const char *name,
                                     const char **dtype_name, int *ndim, int64_t *shape,
                                     bool *zero_copy) CT_NODISCARD;
/* The tensor under name (a new scope-owned tensor, like an op's result):
 * a view of the mapping when aligned, else a copy.  NULL + error when the
 * name is absent or the dtype is unsupported. */
CT_API ct_tensor *ct_safetensors_get(ct_safetensors *f, const char *name);
/* Every tensor, in file order, as a new sample (the caller frees it with
 * ct_sample_free). */
CT_API ct_sample *ct_safetensors_tensors(ct_safetensors *f);

/* The "__metadata__" string map: count, key/value i, value by key (NULL
 * when absent).  Borrowed, valid until close. */
CT_API int ct_safetensors_metadata_count(const ct_safetensors *f);
CT_API const char *ct_safetensors_metadata_key(const ct_safetensors *f, int i);
CT_API const char *ct_safetensors_metadata_value(const ct_safetensors *f, int i);
CT_API const char *ct_safetensors_metadata_get(const ct_safetensors *f, const char *key);
/* The bytes of the whole file as read or mapped (for checks and tools). */
CT_API const void *ct_safetensors_buffer(const ct_safetensors *f, size_t *size);

/* Convenience: open, every tensor into a new sample (zero-copy views of the
 * file's bytes in memory where possible; those bytes live as long as the
 * tensors), close.  Truncating the file afterwards cannot hurt them. */
CT_API ct_sample *ct_safetensors_load(const char *path);
/* The same over a mapping (ct_safetensors_open_mmap): do not truncate or
 * rewrite the file while tensors from it live. */
CT_API ct_sample *ct_safetensors_load_mmap(const char *path);

/* ---- writing ------------------------------------------------------------- */
/* metadata: NULL, or a NULL-terminated array of alternating keys and
 * values: (const char *[]){"format", "pt", NULL}.  Keys are written
 * sorted (Python's writer uses hash order, so only files with at most one
 * metadata entry are byte-identical to Python's).  The tensors are
 * written in Python's order (by descending dtype rank, then by name);
 * non-contiguous tensors are written contiguously.  Names must be unique
 * (a ct_sample's are) and must not be "__metadata__". */
CT_API ct_status ct_safetensors_save(const char *path, const ct_sample *tensors,
                                     const char *const *metadata) CT_NODISCARD;
/* The same file image in memory: *out (malloc'ed; free()) and *size. */
CT_API ct_status ct_safetensors_serialize(const ct_sample *tensors, const char *const *metadata,
                                          void **out, size_t *size) CT_NODISCARD;

/* ---- module state dicts and checkpoints ----------------------------------- */
/* Saves ct_module_state_dict(m) (PyTorch's keys: "features.0.weight",
 * "bn1.num_batches_tracked", ...) with metadata {"format": "pt"}, like
 * safetensors.torch.save_model: a PyTorch model of the same architecture
 * loads it with load_model / load_state_dict, and vice versa. */
CT_API ct_status ct_save_module(const char *path, ct_module *m) CT_NODISCARD;
/* Loads a safetensors state dict into m (values copied, dtypes converted,
 * shapes must match).  strict: missing or unexpected keys are an error
 * naming them (like load_state_dict(strict=True)). */
CT_API ct_status ct_load_module(const char *path, ct_module *m, bool strict) CT_NODISCARD;
/* Any named state (an optimizer's state_dict, scheduler state, step
 * counters as 0-dim tensors), with metadata {"format": "ctorch-state"}. */
CT_API ct_status ct_save_state(const char *path, const ct_sample *state) CT_NODISCARD;
/* Loads such a file: a new sample of owned (copied, writable, not mapped)
 * tensors in file order; NULL + error.  Free with ct_sample_free. */
CT_API ct_sample *ct_load_state(const char *path);

#ifdef __cplusplus
}
#endif
#endif
