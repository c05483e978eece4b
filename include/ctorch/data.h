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
/* Every constructor returns a new dataset (one reference: release it with
 * ct_dataset_release) or NULL with the error recorded.  Wrappers retain
 * the datasets they wrap.  All built-in datasets are thread-safe.  Tensors
 * a get() writes into the sample may be views of the dataset's storage:
 * treat them as read-only (clone before writing in place). */

/* torch.utils.data.TensorDataset: n named tensors sharing the size of
 * their first dim; sample i is {names[k]: tensors[k][i]} (views).  The
 * tensors are retained; names are copied.  Errors: n < 1, a NULL
 * tensor/name, a 0-dim tensor, first dims that differ (CT_ERR_SHAPE). */
CT_API ct_dataset *ct_tensor_dataset_new(const char *const *names, ct_tensor *const *tensors, int n);
/* torch.utils.data.ConcatDataset: the n map-style datasets one after the
 * other (index i goes to the first dataset whose cumulative length
 * exceeds i).  Lengths are read once, at construction. */
CT_API ct_dataset *ct_concat_dataset_new(ct_dataset *const *datasets, int n);
/* torch.utils.data.Subset: sample i is d[indices[i]].  indices are copied
 * and checked against len(d) (CT_ERR_INDEX naming the position). */
CT_API ct_dataset *ct_subset_new(ct_dataset *d, const int64_t *indices, int64_t n);
/* torch.utils.data.random_split with lengths that sum to len(d): writes n
 * new Subsets to out (the caller releases each).  The split is a
 * permutation of range(len(d)) determined only by seed (see
 * ct_randperm_seeded), so a seed gives the same split every time; subset k
 * takes the next lengths[k] entries of that permutation. */
CT_API ct_status ct_random_split(ct_dataset *d, const int64_t *lengths, int n, uint64_t seed,
                                 ct_dataset **out) CT_NODISCARD;
/* random_split with fractions summing to 1 (within 1e-6): lengths are
 * floor(len * f[k]), and the remainder is added one by one, round-robin,
 * from the first subset on (torch's rule). */
CT_API ct_status ct_random_split_fractions(ct_dataset *d, const double *fractions, int n,
                                           uint64_t seed, ct_dataset **out) CT_NODISCARD;

/* Deterministic shuffling used by every seeded component here: writes a
 * permutation of 0..n-1 to out, a Fisher-Yates shuffle (from the last
 * position down, j = uniform below i+1) driven by the Philox 4x32-10
 * stream whose key is ct_data_mix(seed, stream).  Never touches the global
 * generator. */
CT_API void ct_randperm_seeded(int64_t n, uint64_t seed, uint64_t stream, int64_t *out);
/* The 64-bit mixer behind every derived seed (splitmix64 of a ^ mix(b)). */
CT_API uint64_t ct_data_mix(uint64_t a, uint64_t b);

/* ---- IDX files (MNIST, FashionMNIST) ----
 * Format: magic 00 00 <dtype> <ndim>, then ndim big-endian u32 dims, then
 * the big-endian elements.  dtype 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32,
 * 0x0D f32, 0x0E f64; 1 <= ndim <= CT_MAX_DIMS.  gzip is detected by its
 * magic (1f 8b).  The data length must match the dims exactly (a shorter
 * or longer file is CT_ERR_FORMAT naming both sizes); size computations are
 * overflow-checked.  Returns a new contiguous tensor of that dtype (joins
 * the caller's scope).  Errors: CT_ERR_IO (open/read, naming the path),
 * CT_ERR_FORMAT (bad magic, dtype byte, ndim, sizes, corrupt gzip). */
CT_API ct_tensor *ct_idx_load(const char *path);
/* The same from memory (raw or gzip bytes). */
CT_API ct_tensor *ct_idx_load_buffer(const void *data, size_t size);
/* MNIST-style dataset: images [N, H, W] u8 and labels [N] (any integer
 * IDX dtype), N equal.  Sample i: "image" and "label" (int64 0-dim).  With
 * image_dtype CT_U8 the image is the u8 [H, W] view; with CT_F32 or CT_F64
 * it is [1, H, W] scaled to [0, 1] (torchvision's ToTensor). */
CT_API ct_dataset *ct_idx_dataset_new(const char *images_path, const char *labels_path,
                                      ct_dtype image_dtype);

/* ---- text ----
 * Lines of a text file ('\n' or "\r\n" separated; a last line without
 * newline counts; an empty file has 0 lines).  Sample i: "text", the bytes
 * of line i as a u8 [len] tensor (without the line ending). */
CT_API ct_dataset *ct_text_lines_dataset_new(const char *path);
/* A character stream for next-character prediction.  vocab: the byte
 * alphabet in id order (NUL-terminated), or NULL for the sorted distinct
 * bytes of the file.  Sample i: "ids", int64 [seq_len + 1], the ids of
 * bytes [i*stride, i*stride + seq_len + 1) (input = ids[:-1], target =
 * ids[1:]).  len = (nbytes - seq_len - 1) / stride + 1 (0 when the file is
 * shorter).  A byte not in vocab is CT_ERR_FORMAT naming its offset. */
CT_API ct_dataset *ct_char_dataset_new(const char *path, int64_t seq_len, int64_t stride,
                                       const char *vocab);
/* The vocabulary of a char dataset (borrowed, NUL-free bytes) and its size
 * in *n; NULL when d is not a char dataset. */
CT_API const char *ct_char_dataset_vocab(ct_dataset *d, int *n);

/* ---- CSV ----
 * RFC-4180: a header row of column names, then rows of the same field
 * count; fields separated by ',', optionally quoted with '"' ("" inside
 * quotes is a quote; quoted fields may hold ',' and newlines); "\n" or
 * "\r\n" line ends; blank lines are skipped.  Every column except
 * label_column must be numeric (strtod, surrounding spaces allowed).
 * Sample i: "features" f32 [ncolumns - 1] and, when label_column is not
 * NULL, "label" (0-dim, label_dtype: CT_I64 needs integral values, or
 * CT_F32 / CT_F64).  Errors are CT_ERR_FORMAT with "line L, column C"
 * (1-based, header = line 1) and the column name; a missing label column
 * is CT_ERR_ARG. */
CT_API ct_dataset *ct_csv_dataset_new(const char *path, const char *label_column,
                                      ct_dtype label_dtype);
/* The same over size bytes in memory (need not be NUL-terminated). */
CT_API ct_dataset *ct_csv_dataset_from_buffer(const char *data, size_t size,
                                              const char *label_column, ct_dtype label_dtype);

/* ---- samplers ----
 * A sampler produces the index sequence of an epoch.  Orders are fully
 * determined by the constructor arguments and the epoch (set with
 * ct_sampler_set_epoch, default 0); seeded ones use the stream
 * ct_data_mix(seed, epoch) (see ct_randperm_seeded), so an order is
 * reproducible per (seed, epoch) and differs between epochs.
 * Reference-counted: _new gives one reference; wrappers and the
 * DataLoader retain what they hold.  Not thread-safe (one user at a time). */
typedef struct ct_sampler ct_sampler;
/* 0, 1, ..., n-1 */
CT_API ct_sampler *ct_sequential_sampler_new(int64_t n);
/* RandomSampler.  Without replacement: the permutation
 * ct_randperm_seeded(n, seed, epoch), repeated with streams epoch,
 * epoch + 2^32, ... when num_samples > n (cut to num_samples).  With
 * replacement: num_samples uniform draws below n.  num_samples < 0: n. */
CT_API ct_sampler *ct_random_sampler_new(int64_t n, bool replacement, int64_t num_samples,
                                         uint64_t seed);
/* WeightedRandomSampler: num_samples indices drawn with probability
 * proportional to weights[i] (finite, >= 0, some > 0; copied).  With
 * replacement: inverse-CDF draws; without: the num_samples largest keys
 * u_i^(1/w_i) (Efraimidis-Spirakis, the same law as successive draws), in
 * decreasing key order; num_samples must not exceed the nonzero weights. */
CT_API ct_sampler *ct_weighted_random_sampler_new(const double *weights, int64_t n,
                                                  int64_t num_samples, bool replacement,
                                                  uint64_t seed);
/* SubsetRandomSampler: indices[perm[k]] with perm = ct_randperm_seeded(n,
 * seed, epoch).  indices are copied. */
CT_API ct_sampler *ct_subset_random_sampler_new(const int64_t *indices, int64_t n, uint64_t seed);
/* DistributedSampler, torch's rules: num_samples = ceil(n / R) (with
 * drop_last and n % R != 0: ceil((n - R) / R)); total = num_samples * R;
 * the order is range(n) or, with shuffle, ct_randperm_seeded(n, seed,
 * epoch) (identical on every rank); without drop_last it is padded to
 * total by repeating it from the start, with drop_last cut to total; rank
 * r takes positions r, r + R, r + 2R, ...  Errors: R < 1, rank outside
 * [0, R). */
CT_API ct_sampler *ct_distributed_sampler_new(int64_t n, int num_replicas, int rank, bool shuffle,
                                              uint64_t seed, bool drop_last);
/* BatchSampler: groups the indices of base (retained) into batches of
 * batch_size in order; the last, smaller batch is dropped with drop_last. */
CT_API ct_sampler *ct_batch_sampler_new(ct_sampler *base, int64_t batch_size, bool drop_last);
CT_API ct_sampler *ct_sampler_retain(ct_sampler *s);
CT_API void ct_sampler_release(ct_sampler *s);
/* Sets the epoch (passed on to a batch sampler's base). */
CT_API void ct_sampler_set_epoch(ct_sampler *s, int64_t epoch);
CT_API bool ct_sampler_is_batch(const ct_sampler *s);
/* Number of indices of an epoch (of batches, for a batch sampler). */
CT_API int64_t ct_sampler_len(ct_sampler *s);
/* The current epoch's indices in a new malloc'ed array (*out; free() it;
 * NULL when empty); returns their count, or -1 with the error recorded.
 * For a batch sampler: all batches' indices, concatenated. */
CT_API int64_t ct_sampler_indices(ct_sampler *s, int64_t **out);
/* The current epoch as batches: *indices as above and *offsets (nb + 1
 * entries, free() both): batch b is indices[offsets[b] .. offsets[b+1]).
 * A plain sampler gives batches of one index.  Returns nb or -1. */
CT_API int64_t ct_sampler_batches(ct_sampler *s, int64_t **indices, int64_t **offsets);
/* ---- end section: built-in datasets and samplers ---- */

/* ---- section: DataLoader (src/data/dataloader.c) ---- */
/* torch.utils.data.DataLoader with worker THREADS.
 *
 *   ct_dataloader_opts o = {.batch_size = 64, .shuffle = true, .seed = 1,
 *                           .num_workers = 2};
 *   ct_dataloader *dl = ct_dataloader_new(ds, &o);
 *   for (int epoch = 0; epoch < 10; epoch++) {
 *       if (ct_dataloader_begin_epoch(dl, epoch)) goto fail;
 *       ct_sample *batch; int r;
 *       while ((r = ct_dataloader_next(dl, &batch)) == 1) {
 *           ... ct_sample_get(batch, "image") ...
 *           ct_sample_free(batch);
 *       }
 *       if (r < 0) goto fail;        // ct_last_error() names worker and sample
 *   }
 *   ct_dataloader_free(dl);
 *
 * Order: batches come in sampler order whatever num_workers is: the
 * batch sampler's batch b is made by worker b % num_workers and handed out
 * in order b = 0, 1, ...  Randomness: during each get() the calling
 * thread's ct_data_current_seed() is ct_data_sample_seed(seed, epoch,
 * index) (index = the dataset index), so seeded augmentations give
 * identical results with 0, 1 or N workers.  Iterable datasets: each
 * worker w runs its own iterator iter_begin(w, num_workers) (0, 1 without
 * workers) and batches its own samples; batches are taken round-robin over
 * the workers that are not exhausted (torch's order); sample k of worker
 * w gets the seed ct_data_sample_seed(seed, epoch, (w << 40) | k).
 *
 * Threads: workers open their own scope for each batch; the batch sample
 * holds its tensors (retained) and passes to the caller of next(), who
 * owns it.  A failing get()/collate in worker w stops the epoch: next()
 * returns -1 with "DataLoader worker w: sample i: <original error>" (the
 * original code kept); without workers "DataLoader: sample i: ...".
 * Breaking out early is fine: ct_dataloader_begin_epoch or
 * ct_dataloader_free stop the workers, join them and free every
 * prefetched batch.  A dataloader is used by one thread at a time. */
typedef struct ct_dataloader ct_dataloader;
/* Merge n samples (all non-NULL) into the batch `out` (empty on entry). */
typedef ct_status (*ct_collate_fn)(ct_sample *const *samples, int n, ct_sample *out, void *user);
typedef struct ct_dataloader_opts {
    int64_t batch_size;       /* <= 0: 1 */
    bool shuffle;             /* RandomSampler(seed) when no sampler is given */
    uint64_t seed;            /* shuffling, per-sample and per-worker seeds */
    ct_sampler *sampler;      /* optional (retained); excludes shuffle */
    ct_sampler *batch_sampler; /* optional (retained); excludes batch_size>1,
                                  shuffle, sampler, drop_last */
    bool drop_last;
    ct_collate_fn collate;    /* NULL: ct_default_collate */
    void *collate_user;
    int num_workers;          /* 0: everything on the calling thread */
    int prefetch_factor;      /* batches in flight per worker; <= 0: 2 */
    bool persistent_workers;  /* keep the threads across epochs */
    /* Called once in each new worker thread before its first batch, with
     * seed = base_seed + worker_id (see ct_dataloader_base_seed). */
    void (*worker_init)(int worker_id, uint64_t seed, void *user);
    void *worker_init_user;
} ct_dataloader_opts;
/* The dataset is retained.  Errors: NULL dataset/opts, conflicting
 * options (CT_ERR_ARG naming them), a sampler on an iterable dataset. */
CT_API ct_dataloader *ct_dataloader_new(ct_dataset *dataset, const ct_dataloader_opts *opts);
/* Stops and joins the workers, frees prefetched batches; NULL is a no-op. */
CT_API void ct_dataloader_free(ct_dataloader *dl);
/* Starts epoch `epoch` (sets it on the sampler, restarts or reuses the
 * workers); an unfinished epoch is stopped first. */
CT_API ct_status ct_dataloader_begin_epoch(ct_dataloader *dl, int64_t epoch) CT_NODISCARD;
/* 1: *batch is the next batch (caller frees it with ct_sample_free);
 * 0: end of the epoch; -1: error (recorded; the epoch is over).  Without
 * a begin_epoch, the first call starts epoch 0. */
CT_API int ct_dataloader_next(ct_dataloader *dl, ct_sample **batch);
/* Number of batches per epoch (-1 + error for iterable datasets). */
CT_API int64_t ct_dataloader_len(ct_dataloader *dl);
/* The base seed of the current workers: ct_data_mix(seed, epoch of their
 * start) (with persistent workers, the first epoch's). */
CT_API uint64_t ct_dataloader_base_seed(const ct_dataloader *dl);
/* Default collate: for each name of samples[0] (in its order),
 * ct_stack of that tensor of every sample along a new dim 0.  Errors name
 * the key and the sample (missing key, shape or dtype mismatch). */
CT_API ct_status ct_default_collate(ct_sample *const *samples, int n, ct_sample *out, void *user) CT_NODISCARD;
/* The per-sample seed: ct_data_mix(ct_data_mix(seed, epoch), index). */
CT_API uint64_t ct_data_sample_seed(uint64_t seed, int64_t epoch, int64_t index);
/* The seed of the sample being loaded on this thread (thread-local, set by
 * the DataLoader around each get(); 0 outside).  Random transforms draw
 * from it (e.g. Philox keyed by ct_data_current_seed()) instead of the
 * global generator, so augmentations are reproducible per (seed, epoch,
 * index) whatever num_workers is. */
CT_API uint64_t ct_data_current_seed(void);
/* Sets this thread's current seed (for calling transforms by hand). */
CT_API void ct_data_set_current_seed(uint64_t seed);
/* torch.utils.data.get_worker_info: in a worker thread sets *id and *num
 * and returns true; elsewhere returns false (id 0, num 1). */
CT_API bool ct_data_worker_info(int *worker_id, int *num_workers);
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
