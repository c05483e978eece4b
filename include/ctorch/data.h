/* ctorch/data.h -- data loading: samples, datasets, samplers, the
 * DataLoader, transforms, DataPipes (TorchData) and the DataFrame
 * (TorchArrow).
 *
 * A sample is a small ordered dictionary of named tensors ("image",
 * "label", ...); a batch is a sample whose tensors have a leading batch
 * dim.  Objects here are not tensors: each has its own _new/_free (or
 * _retain/_release) pair, and tensors stored in them are retained by them.
 */
#ifndef CTORCH_DATA_H
#define CTORCH_DATA_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================
 * Samples: ordered name -> tensor maps
 * ====================================================================== */
typedef struct ct_sample ct_sample;
CT_API ct_sample *ct_sample_new(void);
CT_API void ct_sample_free(ct_sample *s);
/* Sets (or replaces) the tensor under name; t is retained. */
CT_API ct_status ct_sample_set(ct_sample *s, const char *name, ct_tensor *t) CT_NODISCARD;
/* Borrowed (owned by s), or NULL when absent (no error recorded). */
CT_API ct_tensor *ct_sample_get(const ct_sample *s, const char *name);
CT_API int ct_sample_count(const ct_sample *s);
CT_API const char *ct_sample_name(const ct_sample *s, int i);
CT_API ct_tensor *ct_sample_at(const ct_sample *s, int i);
/* Removes every entry. */
CT_API void ct_sample_clear(ct_sample *s);

/* ======================================================================
 * Datasets.  Map-style: a length and get(index).  Iterable: begin/next.
 * A dataset is reference-counted so wrappers (Subset, ConcatDataset, the
 * DataLoader) can share it; get() may be called from several worker
 * threads at once and must be thread-safe.
 * ====================================================================== */
typedef struct ct_dataset ct_dataset;
typedef struct ct_dataset_vtable {
    /* map-style (len and get) */
    int64_t (*len)(void *self);
    ct_status (*get)(void *self, int64_t index, ct_sample *out);
    /* iterable-style (iter_begin and iter_next; len may be NULL): one
     * iterator per worker, which sees worker_id of num_workers */
    void *(*iter_begin)(void *self, int worker_id, int num_workers);
    /* 1: a sample was written, 0: exhausted, -1: error (recorded) */
    int (*iter_next)(void *self, void *it, ct_sample *out);
    void (*iter_end)(void *self, void *it);
    void (*free)(void *self);
} ct_dataset_vtable;
/* Wraps user callbacks; vt must outlive the dataset. */
CT_API ct_dataset *ct_dataset_new(const ct_dataset_vtable *vt, void *self);
CT_API ct_dataset *ct_dataset_retain(ct_dataset *d);
CT_API void ct_dataset_release(ct_dataset *d);
CT_API bool ct_dataset_is_iterable(const ct_dataset *d);
CT_API int64_t ct_dataset_len(ct_dataset *d);           /* -1 + error if unknown */
CT_API ct_status ct_dataset_get(ct_dataset *d, int64_t index, ct_sample *out) CT_NODISCARD;
/* The object passed to ct_dataset_new (for wrappers written by users). */
CT_API void *ct_dataset_self(ct_dataset *d);

/* ---- section: built-in datasets and samplers (src/data/dataset*.c, sampler.c) ---- */
/* ---- end section: built-in datasets and samplers ---- */

/* ---- section: DataLoader (src/data/dataloader.c) ---- */
/* ---- end section: DataLoader ---- */

/* ---- section: transforms (src/data/transforms*.c, image.c) ---- */
/* ---- end section: transforms ---- */

/* ---- section: DataPipes and DataLoader2 (src/data/datapipe*.c) ---- */
/* ---- end section: DataPipes ---- */

/* ---- section: DataFrame (src/data/dataframe*.c, arrow.c) ---- */
/* ---- end section: DataFrame ---- */

#ifdef __cplusplus
}
#endif
#endif
