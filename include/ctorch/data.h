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
 * "\r\n" line ends; blank lines are skipped; a UTF-8 byte-order mark
 * before the header is skipped; column names must be unique.  Every
 * column except label_column must hold decimal numbers, the whole field
 * (surrounding blanks allowed; no hex, no trailing characters, no NUL
 * bytes; "inf", "infinity" and "nan" in any case are accepted, like
 * pandas); a number beyond the range of float64 (or of float32, which
 * features and a CT_F32 label are stored as) is an error, not inf.
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
#include "ops.h" /* ct_interp_mode */
/* ----------------------------------------------------------------------
 * Images (torchvision.io): PNG through libspng, JPEG through libjpeg-turbo.
 * Decoded images are uint8 tensors [H, W, C] (HWC, the layout of PIL and
 * numpy; ToTensor turns them into float CHW).  Inputs are treated as
 * hostile: images wider or taller than CT_IMAGE_MAX_SIDE or with more than
 * CT_IMAGE_MAX_PIXELS pixels are refused (CT_ERR_FORMAT) before any pixel
 * memory is allocated, and every library error becomes a ctorch error.
 * ---------------------------------------------------------------------- */
#define CT_IMAGE_MAX_SIDE 16384               /* 2^14 pixels per side */
#define CT_IMAGE_MAX_PIXELS (1LL << 28)       /* H * W */
typedef enum ct_image_mode {
    CT_IMAGE_UNCHANGED = 0, /* channels as stored: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
                             * (palette PNGs give RGB, or RGBA with a tRNS chunk;
                             * 16-bit PNG samples keep their high byte) */
    CT_IMAGE_GRAY = 1,      /* 1 channel; from color, L = (299 R + 587 G + 114 B + 500) / 1000 */
    CT_IMAGE_RGB = 3,       /* 3 channels (gray is replicated, alpha dropped) */
    CT_IMAGE_RGBA = 4       /* 4 channels (alpha 255 where none is stored) */
} ct_image_mode;
/* Decodes a PNG or JPEG held in memory (the format is recognized by its
 * signature) into a new uint8 tensor [H, W, C] with channels as stored.
 * Returned like an op's result (it joins the innermost scope).  Errors:
 * CT_ERR_NULL, CT_ERR_FORMAT (unknown signature, corrupt or truncated PNG,
 * fatal JPEG error, too large, CMYK JPEG), CT_ERR_OOM.  JPEG warnings
 * (e.g. a truncated scan, filled with gray) are accepted as torchvision and
 * PIL accept them; PNG CRC errors are errors. */
CT_API ct_tensor *ct_image_decode(const void *buf, size_t n);
/* Same, converting to the channels of `mode`. */
CT_API ct_tensor *ct_image_decode_mode(const void *buf, size_t n, ct_image_mode mode);
/* Reads and decodes a file (torchvision.io.read_image); errors name the
 * path (CT_ERR_IO when it cannot be read). */
CT_API ct_tensor *ct_image_read(const char *path);
CT_API ct_tensor *ct_image_read_mode(const char *path, ct_image_mode mode);
/* Reads only the header: height, width and stored channels (any may be
 * NULL).  Applies the same size limits as decoding.  Returns CT_OK or an
 * error status. */
CT_API ct_status ct_image_info(const void *buf, size_t n, int64_t *height, int64_t *width,
                               int *channels) CT_NODISCARD;

/* ----------------------------------------------------------------------
 * Functional transforms (torchvision.transforms.functional on tensors).
 * Images are tensors [..., C, H, W] (geometric ops accept [..., H, W]);
 * leading dims are batch dims.  Any strides are accepted.  Unless stated,
 * uint8 and float32 images are supported and the result keeps the input
 * dtype, with torchvision's conversions (float math in float32, then for
 * uint8 the same rounding or truncation as torchvision).  Each returns a
 * new tensor in the innermost scope, or NULL with an error.
 * ---------------------------------------------------------------------- */
/* transforms.ToTensor: uint8 [H, W, C] (or [H, W]) -> float32 [C, H, W] in
 * [0, 1] (x / 255).  Other dtypes are converted to float32 without scaling. */
CT_API ct_tensor *ct_image_to_tensor(ct_tensor *img);
/* F.normalize: (x - mean[c]) / std[c] over the C = size(-3) channels; n is
 * C, or 1 (the same value for every channel).  Float images only; a zero
 * std is an error. */
CT_API ct_tensor *ct_image_normalize(ct_tensor *img, const double *mean, const double *std, int n);
/* F.resize with antialias=False (tensor semantics): to [h, w]; when w <= 0
 * the shorter side becomes h and the longer keeps the aspect ratio,
 * truncated (torchvision's int(h * long / short)).  mode: CT_INTERP_BILINEAR
 * (align_corners=False), CT_INTERP_NEAREST or CT_INTERP_BICUBIC.  uint8 is
 * resized in float32 and rounded.  Float64 is also accepted. */
CT_API ct_tensor *ct_image_resize(ct_tensor *img, int64_t h, int64_t w, ct_interp_mode mode);
/* F.crop: rows [top, top+h), cols [left, left+w); parts outside the image
 * are zero (like torchvision).  h, w > 0. */
CT_API ct_tensor *ct_image_crop(ct_tensor *img, int64_t top, int64_t left, int64_t h, int64_t w);
/* F.center_crop: pads with zeros first when the crop is larger than the
 * image; the offset is round((H - h) / 2) with half-to-even like Python. */
CT_API ct_tensor *ct_image_center_crop(ct_tensor *img, int64_t h, int64_t w);
/* torchvision padding modes (F.pad padding_mode). */
typedef enum ct_padding_mode {
    CT_PADDING_CONSTANT = 0, /* fill value */
    CT_PADDING_EDGE,         /* repeat the last value */
    CT_PADDING_REFLECT,      /* mirror without repeating the edge (pad < size) */
    CT_PADDING_SYMMETRIC     /* mirror repeating the edge (pad <= size) */
} ct_padding_mode;
/* F.pad with padding (left, top, right, bottom), each >= 0. */
CT_API ct_tensor *ct_image_pad(ct_tensor *img, const int64_t padding[4], double fill,
                               ct_padding_mode mode);
/* F.hflip (reverses the last dim); any dtype. */
CT_API ct_tensor *ct_image_hflip(ct_tensor *img);
/* F.rotate(img, angle, interpolation, expand=False, center=None, fill=[fill]*C):
 * counter-clockwise by `angle` degrees about the image center; mode is
 * CT_INTERP_NEAREST or CT_INTERP_BILINEAR; pixels from outside are `fill`
 * (blended through torchvision's mask channel in bilinear mode). */
CT_API ct_tensor *ct_image_rotate(ct_tensor *img, double angle, ct_interp_mode mode, double fill);
/* F.adjust_brightness / contrast / saturation (factor >= 0) and
 * adjust_hue (factor in [-0.5, 0.5]); C must be 1 or 3 (hue and
 * saturation leave 1-channel images unchanged, like torchvision). */
CT_API ct_tensor *ct_image_adjust_brightness(ct_tensor *img, double factor);
CT_API ct_tensor *ct_image_adjust_contrast(ct_tensor *img, double factor);
CT_API ct_tensor *ct_image_adjust_saturation(ct_tensor *img, double factor);
CT_API ct_tensor *ct_image_adjust_hue(ct_tensor *img, double factor);
/* F.rgb_to_grayscale (0.2989 R + 0.587 G + 0.114 B), [..., 3, H, W] -> [..., 1, H, W]. */
CT_API ct_tensor *ct_image_rgb_to_grayscale(ct_tensor *img);

/* ----------------------------------------------------------------------
 * Transform objects (torchvision.transforms), composable.
 *
 * A transform is immutable once made: it may be applied from several
 * threads at once (DataLoader workers).  Random transforms draw from a
 * small private generator (splitmix64) seeded by
 *     mix(seed, salt)
 * where seed is the argument of ct_transform_apply_seeded, or for
 * ct_transform_apply the per-sample seed ct_data_current_seed() that the
 * DataLoader sets around each dataset get() from (seed, epoch, index), and
 * salt is a hash of the transform's kind and parameters.  So one sample's
 * augmentation depends only on (seed, the transform), never on the worker
 * count or on the order of calls; two identical transforms (say a
 * RandomCrop applied to an image and to its mask) draw the same values.
 * Compose gives its i-th child the seed mix(seed, i).  Each random
 * transform documents its draws below: u() is a uniform double in [0, 1)
 * (53 bits), randint(a, b) an integer uniform in [a, b) (rejection
 * sampling, no modulo bias), uniform(a, b) = a + (b - a) u().
 * ---------------------------------------------------------------------- */
typedef struct ct_transform ct_transform;
/* User transform: fn(self, img, seed) returns a new tensor (in the
 * innermost scope, like an op) or NULL with an error; free(self) (may be
 * NULL) runs in ct_transform_free.  fn must be thread-safe. */
typedef ct_tensor *(*ct_transform_fn)(void *self, ct_tensor *img, uint64_t seed);
CT_API ct_transform *ct_transform_new(ct_transform_fn fn, void *self, void (*free_fn)(void *self));
/* Applies t to img with seed ct_data_current_seed().  Returns a new tensor
 * in the innermost scope (possibly img itself, retained, when there is
 * nothing to do), or NULL with an error.  NULL img propagates. */
CT_API ct_tensor *ct_transform_apply(ct_transform *t, ct_tensor *img);
/* Same with an explicit seed: reproducible without a DataLoader. */
CT_API ct_tensor *ct_transform_apply_seeded(ct_transform *t, ct_tensor *img, uint64_t seed);
CT_API void ct_transform_free(ct_transform *t);

/* Compose: takes ownership of the n transforms (also on failure); they
 * run in order. */
CT_API ct_transform *ct_transform_compose(ct_transform *const *ts, int n);
CT_API ct_transform *ct_transform_to_tensor(void);
/* Copies mean[] and std[] (n values, or 1 for all channels). */
CT_API ct_transform *ct_transform_normalize(const double *mean, const double *std, int n);
/* Resize(size) with w <= 0, Resize((h, w)) otherwise; see ct_image_resize. */
CT_API ct_transform *ct_transform_resize(int64_t h, int64_t w, ct_interp_mode mode);
CT_API ct_transform *ct_transform_center_crop(int64_t h, int64_t w);
/* Pad(padding (left, top, right, bottom), fill, padding_mode). */
CT_API ct_transform *ct_transform_pad(const int64_t padding[4], double fill, ct_padding_mode mode);
/* RandomCrop(size=(h, w), padding, pad_if_needed, fill, padding_mode):
 * padding (left, top, right, bottom) may be NULL; then, with
 * pad_if_needed, a side smaller than the crop is padded by the difference
 * on both ends (as torchvision does).  Draws: top = randint(0, H - h + 1),
 * then left = randint(0, W - w + 1) (none when the sizes are equal).  An
 * image smaller than the crop is an error naming both sizes. */
CT_API ct_transform *ct_transform_random_crop(int64_t h, int64_t w, const int64_t padding[4],
                                              bool pad_if_needed, double fill,
                                              ct_padding_mode mode);
/* RandomResizedCrop(size=(h, w), scale=(scale_min, scale_max),
 * ratio=(ratio_min, ratio_max), interpolation) -- torchvision's defaults are
 * (0.08, 1.0) and (3/4, 4/3).  Draws, up to 10 attempts: area = H*W*
 * uniform(scale_min, scale_max), r = exp(uniform(log ratio_min, log
 * ratio_max)), cw = round(sqrt(area * r)), ch = round(sqrt(area / r))
 * (half to even); when 0 < cw <= W and 0 < ch <= H: top = randint(0, H -
 * ch + 1), left = randint(0, W - cw + 1).  After 10 misses: the central
 * crop clamped to the ratio range (torchvision's fallback), no draws.
 * The crop is then resized to (h, w) like ct_image_resize. */
CT_API ct_transform *ct_transform_random_resized_crop(int64_t h, int64_t w, double scale_min,
                                                      double scale_max, double ratio_min,
                                                      double ratio_max, ct_interp_mode mode);
/* RandomHorizontalFlip(p): flips when u() < p (one draw). */
CT_API ct_transform *ct_transform_random_horizontal_flip(double p);
/* ColorJitter(brightness, contrast, saturation, hue): factors drawn from
 * [max(0, 1 - b), 1 + b] (likewise c, s) and hue from [-hue, hue]
 * (0 <= hue <= 0.5); 0 disables a component.  Draws: a random order of the
 * four (Fisher-Yates: for i = 3..1, swap i with randint(0, i + 1)), then
 * uniform() for each enabled component in the order brightness, contrast,
 * saturation, hue; the adjustments are applied in the drawn order. */
CT_API ct_transform *ct_transform_color_jitter(double brightness, double contrast,
                                               double saturation, double hue);
/* RandomRotation(degrees=(min_deg, max_deg), interpolation, expand=False,
 * center=None, fill): angle = uniform(min_deg, max_deg) (one draw), then
 * ct_image_rotate. */
CT_API ct_transform *ct_transform_random_rotation(double min_deg, double max_deg,
                                                  ct_interp_mode mode, double fill);

/* ----------------------------------------------------------------------
 * ImageFolder (torchvision.datasets.ImageFolder): root/<class>/<file>.
 * Classes are the subdirectories of root sorted by name (strcmp), indexed
 * from 0; files are the .png .jpg .jpeg (any case) regular files of each
 * class directory (not recursive), sorted by name.  get(i) gives
 * {"image": transform(uint8 [H, W, 3]) (RGB, like PIL's convert("RGB")),
 * "label": int64 0-dim}.  transform may be NULL; the dataset takes
 * ownership of it (also on failure).  Errors: CT_ERR_IO when root cannot
 * be listed, CT_ERR_ARG when no image is found; get() errors name the file
 * and the index.  get() is thread-safe.
 * ---------------------------------------------------------------------- */
CT_API ct_dataset *ct_image_folder_new(const char *root, ct_transform *transform);
/* Class names of an ImageFolder (borrowed, valid while d lives) and their
 * count; the path of sample i (borrowed).  NULL / -1 + error otherwise. */
CT_API int ct_image_folder_num_classes(ct_dataset *d);
CT_API const char *ct_image_folder_class_name(ct_dataset *d, int i);
CT_API const char *ct_image_folder_path(ct_dataset *d, int64_t i);
/* ---- end section: transforms ---- */

/* ---- section: DataPipes and DataLoader2 (src/data/datapipe*.c) ---- */
/* DataPipes (TorchData): composable iterable stages, and DataLoader2, a
 * runner that executes a pipe graph with worker threads.
 *
 * ITEMS.  A pipe yields ct_pipe_item values (the name ct_item is taken by
 * the tensor accessor ct_item()): an int, a string (UTF-8 text or raw
 * bytes: a path, a line, a file's contents), a tensor, a sample, a list (a
 * batch) or a tuple (zip, (path, line) pairs).  Items are immutable,
 * atomically reference-counted and may be shared across threads:
 *   - every constructor and every function that returns `ct_pipe_item *`
 *     without saying "borrowed" returns one new reference, released with
 *     ct_pipe_item_release();
 *   - containers (list, tuple) and ct_pipe_item_sample() STEAL what they are
 *     given, also on failure, so calls nest: ct_pipe_item_tuple2(
 *     ct_pipe_item_str("a"), ct_pipe_item_int(1));
 *   - a NULL argument makes a constructor return NULL and keep the first
 *     error (like ops);
 *   - a tensor item retains its tensor (it does not join any scope), so an
 *     item outlives ct_scope_end().
 * Accessors return borrowed pointers valid while the item lives. */
typedef struct ct_pipe_item ct_pipe_item;
typedef enum ct_pipe_item_kind {
    CT_PIPE_ITEM_INT = 0,
    CT_PIPE_ITEM_STR,
    CT_PIPE_ITEM_TENSOR,
    CT_PIPE_ITEM_SAMPLE,
    CT_PIPE_ITEM_LIST,
    CT_PIPE_ITEM_TUPLE
} ct_pipe_item_kind;

CT_API ct_pipe_item *ct_pipe_item_int(int64_t v);
/* Copies the NUL-terminated string s. */
CT_API ct_pipe_item *ct_pipe_item_str(const char *s);
/* Copies n bytes (may contain NULs); kind STR, NUL-terminated copy. */
CT_API ct_pipe_item *ct_pipe_item_bytes(const void *p, size_t n);
/* Retains t (CPU tensors only, for state saving). */
CT_API ct_pipe_item *ct_pipe_item_tensor(ct_tensor *t);
/* Takes ownership of s (freed with the item, or at once on failure). */
CT_API ct_pipe_item *ct_pipe_item_sample(ct_sample *s);
/* A list of n items; steals items[0..n).  n == 0 (items may be NULL) is
 * the empty list.  Any NULL element: NULL (+ the others are released). */
CT_API ct_pipe_item *ct_pipe_item_list(ct_pipe_item *const *items, int64_t n);
/* Appends x (stolen) to a list nobody else holds (refcount 1);
 * CT_ERR_ARG for a shared list or another kind. */
CT_API ct_status ct_pipe_item_list_append(ct_pipe_item *list, ct_pipe_item *x) CT_NODISCARD;
/* A tuple of n items; steals them (same rules as ct_pipe_item_list). */
CT_API ct_pipe_item *ct_pipe_item_tuple(ct_pipe_item *const *items, int n);
CT_API ct_pipe_item *ct_pipe_item_tuple2(ct_pipe_item *a, ct_pipe_item *b);
CT_API ct_pipe_item *ct_pipe_item_retain(ct_pipe_item *x);   /* +1, returns x */
CT_API void ct_pipe_item_release(ct_pipe_item *x);           /* NULL is a no-op */
CT_API ct_pipe_item_kind ct_pipe_item_get_kind(const ct_pipe_item *x);
/* INT value (0 + CT_ERR_ARG for another kind). */
CT_API int64_t ct_pipe_item_as_int(const ct_pipe_item *x);
/* STR: borrowed NUL-terminated text (NULL + error for another kind) and
 * its length in bytes. */
CT_API const char *ct_pipe_item_as_str(const ct_pipe_item *x);
CT_API size_t ct_pipe_item_str_len(const ct_pipe_item *x);
/* Borrowed tensor / sample (NULL + error for another kind). */
CT_API ct_tensor *ct_pipe_item_as_tensor(const ct_pipe_item *x);
CT_API const ct_sample *ct_pipe_item_as_sample(const ct_pipe_item *x);
/* LIST / TUPLE: length (-1 + error otherwise) and borrowed element i
 * (negative i counts from the end; NULL + CT_ERR_INDEX when out of range). */
CT_API int64_t ct_pipe_item_len(const ct_pipe_item *x);
CT_API ct_pipe_item *ct_pipe_item_at(const ct_pipe_item *x, int64_t i);
/* Deep equality (tensors: same dtype, shape and values): 1, 0. */
CT_API int ct_pipe_item_equal(const ct_pipe_item *a, const ct_pipe_item *b);
/* A Python-like repr: 3, 'a', [1, 2], (a, 1), tensor(float32, [2, 3]),
 * {image: tensor(...)}.  malloc'ed; free() it.  NULL on OOM. */
CT_API char *ct_pipe_item_to_string(const ct_pipe_item *x);

/* PIPES.  A ct_datapipe is one stage of a graph.  Ownership: a stage
 * constructor TAKES OWNERSHIP of its source pipe(s), also on failure, so
 * constructors nest; freeing the outermost pipe frees the whole graph.  A
 * pipe may feed only one consumer (graphs are trees).  Given a NULL source
 * a constructor returns NULL and keeps the first error.  Callbacks receive
 * a borrowed item and the user pointer; when DataLoader2 runs workers,
 * callbacks run on worker threads concurrently (with the same user
 * pointer) and must be thread-safe.
 *
 * ITERATION.  A new pipe stands at the start of epoch 0.  ct_datapipe_next
 * returns 1 and a new item reference in *out, 0 at the end, -1 on error
 * (recorded: the stage, the item index and the callback's or file's
 * message).  Tensors that stages and callbacks create inside next() are
 * freed in a scope of their own: only the items returned survive.  After
 * the end or an error, call ct_datapipe_reset (or set_epoch) to iterate
 * again.  A pipe is used by one thread at a time. */
typedef struct ct_datapipe ct_datapipe;
CT_API int ct_datapipe_next(ct_datapipe *p, ct_pipe_item **out) CT_NODISCARD;
/* Back to the start of the current epoch (every stage of the graph). */
CT_API void ct_datapipe_reset(ct_datapipe *p);
/* Sets the epoch of every stage and resets.  Random stages draw from a
 * generator seeded by (seed, epoch): epoch e gives the same order on every
 * run, and different epochs give different orders. */
CT_API void ct_datapipe_set_epoch(ct_datapipe *p, int64_t epoch);
/* Re-seeds every random stage of the graph (stage k, in depth-first order,
 * gets a seed derived from (seed, k)) and resets. */
CT_API void ct_datapipe_set_seed(ct_datapipe *p, uint64_t seed);
/* Frees the pipe and all its sources (joins background threads). */
CT_API void ct_datapipe_free(ct_datapipe *p);
/* Stage name ("shuffle", "batch", ...). */
CT_API const char *ct_datapipe_name(const ct_datapipe *p);

/* STATE.  ct_datapipe_state_save writes the position of the whole graph
 * (counters, buffered items of shuffle/bucket/prefetch/unbatch, file and
 * byte offsets, generator states, the epoch) into a malloc'ed blob (*blob,
 * *len; free() it).  ct_datapipe_state_restore puts a graph of the same
 * structure (same stages and parameters, e.g. built by the same code) at
 * that position: the next items are exactly those that followed the save.
 * The blob is validated (magic, version, stage names, sizes); on any error
 * (CT_ERR_FORMAT naming the offset, or a file stage's CT_ERR_IO) the pipe
 * is reset to the start of its epoch.  Saving stops prefetch/worker threads
 * after the item they are computing (nothing is lost); they restart on the
 * next call to next(). */
CT_API ct_status ct_datapipe_state_save(ct_datapipe *p, void **blob, size_t *len) CT_NODISCARD;
CT_API ct_status ct_datapipe_state_restore(ct_datapipe *p, const void *blob, size_t len) CT_NODISCARD;

/* ---- sources ---- */
/* IterableWrapper: yields the n items in order (retained: the caller keeps
 * its references). */
CT_API ct_datapipe *ct_datapipe_from_items(ct_pipe_item *const *items, int64_t n);
/* Yields n STR items (copied). */
CT_API ct_datapipe *ct_datapipe_from_strings(const char *const *strs, int64_t n);
/* Yields INT items start, start+1, ..., end-1 (IterableWrapper(range())). */
CT_API ct_datapipe *ct_datapipe_from_range(int64_t start, int64_t end);
/* FileLister: paths ("root/sub/name") of the regular files under root
 * whose base name matches one of the nmasks fnmatch(3) patterns (NULL or 0
 * masks: "*"), descending into sub-directories when recursive, sorted by
 * byte order of the full path.  Listed at the first next() of each epoch;
 * a missing root is a CT_ERR_IO error naming it.  State: the path index. */
CT_API ct_datapipe *ct_datapipe_file_lister(const char *root, const char *const *masks,
                                            int nmasks, bool recursive);

/* ---- file stages (sources yield paths) ---- */
/* FileOpener: path -> (path, contents) tuple, the contents read whole as a
 * STR item of bytes.  Files over max_bytes (0: 1 GiB) are a CT_ERR_IO
 * error naming the path.  1:1, may run in workers. */
CT_API ct_datapipe *ct_datapipe_file_opener(ct_datapipe *src, int64_t max_bytes);
/* LineReader: for each source item, a path (read from disk) or a (path,
 * contents) tuple, yields (path, line) tuples, the line without its "\n"
 * or "\r\n" (a last line without "\n" is yielded; an empty file yields
 * nothing).  State: the current file and the byte offset in it. */
CT_API ct_datapipe *ct_datapipe_line_reader(ct_datapipe *src);
/* CSVParser: like LineReader's input; yields each record as a LIST of STR
 * fields (RFC 4180: fields in double quotes may hold the delimiter,
 * newlines and "" for a quote; a quote inside an unquoted field is kept, as
 * Python's csv does; an empty line is an empty list), skipping the first
 * skip_lines records of each file; with return_path, (path, fields)
 * tuples.  An unterminated quote or text after a closing quote is
 * CT_ERR_FORMAT naming file, line and column.  State: the current file
 * and byte offset. */
CT_API ct_datapipe *ct_datapipe_csv_parser(ct_datapipe *src, char delimiter, int skip_lines,
                                           bool return_path);

/* ---- transforming stages ---- */
/* Returns a new reference (may be ct_pipe_item_retain(x)), or NULL on
 * error (record one with any ctorch call, or a generic message is used). */
typedef ct_pipe_item *(*ct_pipe_map_fn)(ct_pipe_item *x, void *user);
/* 1 keep, 0 drop, -1 error. */
typedef int (*ct_pipe_filter_fn)(ct_pipe_item *x, void *user);
/* Bucket sort key (cannot fail). */
typedef int64_t (*ct_pipe_key_fn)(ct_pipe_item *x, void *user);

/* Mapper: fn(x) for every item.  1:1, may run in workers. */
CT_API ct_datapipe *ct_datapipe_map(ct_datapipe *src, ct_pipe_map_fn fn, void *user);
/* Filter: keeps the items where fn returns 1. */
CT_API ct_datapipe *ct_datapipe_filter(ct_datapipe *src, ct_pipe_filter_fn fn, void *user);
/* FlatMapper: fn(x) must return a LIST; its elements are yielded in order
 * (an empty list yields nothing).  State: the current list and index. */
CT_API ct_datapipe *ct_datapipe_flat_map(ct_datapipe *src, ct_pipe_map_fn fn, void *user);
/* Batcher: LISTs of batch_size items; the last, shorter one is dropped
 * when drop_last. */
CT_API ct_datapipe *ct_datapipe_batch(ct_datapipe *src, int64_t batch_size, bool drop_last);
/* UnBatcher: the elements of each LIST (or TUPLE) item, one level. */
CT_API ct_datapipe *ct_datapipe_unbatch(ct_datapipe *src);
/* BucketBatcher, torchdata's composition (use_in_batch_shuffle=True):
 * with bucket_num > 1 or no key, pools of batch_size*batch_num*bucket_num
 * items are shuffled in place; with a key, buckets of batch_size*batch_num
 * items are stably sorted by key (ascending); the stream is cut into
 * batches of batch_size (drop_last as in batch); with a key, groups of
 * bucket_num batches are shuffled.  Seeded per (seed, epoch). */
CT_API ct_datapipe *ct_datapipe_bucket_batch(ct_datapipe *src, int64_t batch_size,
                                             bool drop_last, int64_t batch_num,
                                             int64_t bucket_num, ct_pipe_key_fn key,
                                             void *user, uint64_t seed);
/* Shuffler: a buffer of buffer_size items; once full, each new item
 * replaces a uniformly drawn buffered one, which is yielded; at the end
 * the rest is yielded in random order.  Seeded per (seed, epoch).
 * State: the buffer and the generator. */
CT_API ct_datapipe *ct_datapipe_shuffle(ct_datapipe *src, int64_t buffer_size, uint64_t seed);
/* ShardingFilter with fixed shards (distributed ranks): item i of the
 * source goes to shard i % num_shards; yields shard shard_id's items. */
CT_API ct_datapipe *ct_datapipe_shard(ct_datapipe *src, int64_t num_shards, int64_t shard_id);
/* sharding_filter: passes everything, until DataLoader2 gives worker w of
 * W the shard (W, w) here (see ct_dataloader2_new). */
CT_API ct_datapipe *ct_datapipe_sharding_filter(ct_datapipe *src);
/* Collator: a LIST item -> default collate (fn NULL), or fn(list).
 * Default collate: tensors -> ct_stack(dim 0); ints -> an int64 tensor
 * [n]; samples -> one sample stacking each name (names of the first
 * sample; a sample missing one is CT_ERR_ARG naming its index); tuples ->
 * a tuple of the collated positions; strings -> the list unchanged.
 * 1:1, may run in workers. */
CT_API ct_datapipe *ct_datapipe_collate(ct_datapipe *src, ct_pipe_map_fn fn, void *user);
/* Prefetcher: a background thread keeps up to buffer_size items ready.
 * Errors in the thread are returned by next() in order.  State: drains
 * (stops the thread; the buffered items are saved with the source's
 * position) and restarts on the next next(). */
CT_API ct_datapipe *ct_datapipe_prefetch(ct_datapipe *src, int64_t buffer_size);

/* ---- combining stages (take ownership of all n sources; n >= 1) ---- */
/* Zipper: TUPLEs of one item of each source; ends with the shortest. */
CT_API ct_datapipe *ct_datapipe_zip(ct_datapipe *const *srcs, int n);
/* Concater: all of srcs[0], then srcs[1], ... */
CT_API ct_datapipe *ct_datapipe_concat(ct_datapipe *const *srcs, int n);
/* Multiplexer: one item of each source in turn, round after round; ends
 * (dropping a partial round) as soon as one source is exhausted:
 * mux([0,1,2], [10..14], [20..24]) = 0 10 20 1 11 21 2 12 22. */
CT_API ct_datapipe *ct_datapipe_mux(ct_datapipe *const *srcs, int n);
/* Cycler: the source count times (count < 0: forever); each round resets
 * the source (same epoch, so a shuffle repeats its order). */
CT_API ct_datapipe *ct_datapipe_cycle(ct_datapipe *src, int64_t count);
/* Header: the first n items. */
CT_API ct_datapipe *ct_datapipe_header(ct_datapipe *src, int64_t n);

/* DATALOADER2.  Takes ownership of pipe.  num_workers == 0: next() runs
 * the graph in the calling thread.  num_workers = W > 0: the graph is
 * split at its sharding_filter stage (the first one found depth-first;
 * without one, at the root): the part below it, with the chain of 1:1
 * stages (map, collate, file_opener) right above it, runs in W worker
 * threads, each on its own copy of that part with the filter set to shard
 * (W, w); the calling thread merges the workers' outputs round-robin
 * (worker 0, 1, ..., W-1, 0, ...) and runs the rest of the graph.  Since
 * item i of the filter's input goes to worker i % W, the output is
 * identical for 0, 1 and 2 workers.  Each worker keeps up to
 * prefetch_factor items ready (ct_dataloader2_new uses 2).  An error in a
 * worker is returned by next() as a ctorch error "dataloader2: worker w,
 * item i: <message>" (i: the item's index in the merged stream: item k
 * of worker w is item k*W + w); threads
 * are joined, never left hanging.  Not thread-safe itself. */
typedef struct ct_dataloader2 ct_dataloader2;
CT_API ct_dataloader2 *ct_dataloader2_new(ct_datapipe *pipe, int num_workers);
CT_API ct_dataloader2 *ct_dataloader2_new_v2(ct_datapipe *pipe, int num_workers,
                                             int prefetch_factor);
/* Same contract as ct_datapipe_next. */
CT_API int ct_dataloader2_next(ct_dataloader2 *dl, ct_pipe_item **out) CT_NODISCARD;
/* Seeds every random stage (also the workers' copies; see
 * ct_datapipe_set_seed), sets the epoch, restarts. */
CT_API void ct_dataloader2_set_seed(ct_dataloader2 *dl, uint64_t seed);
CT_API void ct_dataloader2_set_epoch(ct_dataloader2 *dl, int64_t epoch);
/* Stops the workers and restarts the current epoch (an early stop). */
CT_API void ct_dataloader2_reset(ct_dataloader2 *dl);
/* Position of the whole run (workers' copies, their queued items, the
 * merge turn); same contract as ct_datapipe_state_save/restore. */
CT_API ct_status ct_dataloader2_state_save(ct_dataloader2 *dl, void **blob, size_t *len) CT_NODISCARD;
CT_API ct_status ct_dataloader2_state_restore(ct_dataloader2 *dl, const void *blob,
                                              size_t len) CT_NODISCARD;
/* Joins the workers and frees everything, also in the middle of an epoch. */
CT_API void ct_dataloader2_free(ct_dataloader2 *dl);
/* ---- end section: DataPipes ---- */

/* ---- section: DataFrame (src/data/dataframe*.c, arrow.c) ---- */
/* A columnar DataFrame in the style of TorchArrow / pandas.
 *
 * A COLUMN (ct_column) is an immutable, reference-counted array in the
 * Arrow layout: a values buffer (int64, float64, float32, or bit-packed
 * bool), or for strings int32 offsets + UTF-8 bytes, or for lists int32
 * offsets + a child column; plus an optional validity bitmap (bit i set =
 * row i valid, LSB first; absent when there are no nulls).  Buffers are
 * 64-byte aligned and shared between columns and Arrow exports through
 * reference counts, so nothing is copied when a column moves between
 * frames or is exported.
 *
 * A FRAME (ct_df) is an ordered list of uniquely named columns of equal
 * length.  Frames are immutable too: every operation returns a NEW frame
 * (free it with ct_df_free) that shares the unchanged columns.  Functions
 * that return a column return a new reference (ct_column_release it).
 * On failure every function returns NULL (or a status / -1) and records a
 * ctorch error; a NULL frame or column argument propagates: the function
 * returns NULL at once and keeps the first error, so expressions can be
 * nested and checked once.  Objects may be read from several threads at
 * once; reference counts are atomic.
 *
 * Nulls: arithmetic, comparisons and string functions map null to null;
 * reductions (standardize, min-max, group_by aggregates) skip nulls like
 * pandas (skipna=True).  Floating NaN is a value, not a null, except that
 * read_csv turns the NA strings into nulls. */
typedef enum ct_df_type {
    CT_DF_INT64 = 0,
    CT_DF_FLOAT64,
    CT_DF_FLOAT32,
    CT_DF_BOOL,
    CT_DF_STRING,     /* UTF-8, int32 offsets ("u" in Arrow) */
    CT_DF_LIST        /* list<child>, int32 offsets ("+l"): list<int64>, list<string> */
} ct_df_type;
/* "int64", "float64", "float32", "bool", "string", "list" */
CT_API const char *ct_df_type_name(ct_df_type t);

typedef struct ct_column ct_column;
typedef struct ct_df ct_df;

/* ---- columns ---- */
/* Constructors copy their inputs.  valid: one byte per row (0 = null) or
 * NULL for no nulls.  Strings: NULL entries are nulls. */
CT_API ct_column *ct_column_from_int64(const int64_t *v, const uint8_t *valid, int64_t n);
CT_API ct_column *ct_column_from_float64(const double *v, const uint8_t *valid, int64_t n);
CT_API ct_column *ct_column_from_float32(const float *v, const uint8_t *valid, int64_t n);
CT_API ct_column *ct_column_from_bool(const bool *v, const uint8_t *valid, int64_t n);
CT_API ct_column *ct_column_from_strings(const char *const *v, int64_t n);
CT_API ct_column *ct_column_retain(ct_column *c);
CT_API void ct_column_release(ct_column *c);           /* NULL is a no-op */
CT_API ct_df_type ct_column_type(const ct_column *c);
CT_API int64_t ct_column_length(const ct_column *c);
CT_API int64_t ct_column_null_count(const ct_column *c);
CT_API bool ct_column_is_null(const ct_column *c, int64_t i);   /* out of range: true */
/* Element access (no error recorded; out of range or null gives 0/NaN/
 * false/NULL).  get_double converts int64/float32/bool. */
CT_API int64_t ct_column_get_int64(const ct_column *c, int64_t i);
CT_API double ct_column_get_double(const ct_column *c, int64_t i);
CT_API bool ct_column_get_bool(const ct_column *c, int64_t i);
/* Borrowed pointer to the bytes of string i (NOT NUL-terminated), length
 * in *len. */
CT_API const char *ct_column_get_string(const ct_column *c, int64_t i, int32_t *len);
/* Lists: row i is child[*start .. *end).  Returns the child (borrowed). */
CT_API ct_column *ct_column_list_range(const ct_column *c, int64_t i, int64_t *start,
                                       int64_t *end);
/* Raw Arrow buffers (borrowed; NULL when absent): values (or string bytes),
 * the validity bitmap, and the int32 offsets of strings and lists. */
CT_API const void *ct_column_data(const ct_column *c);
CT_API const uint8_t *ct_column_validity(const ct_column *c);
CT_API const int32_t *ct_column_offsets(const ct_column *c);

/* ---- frames ---- */
/* A frame of n columns (retained; names copied).  Errors: lengths that
 * differ (CT_ERR_SHAPE), a duplicate or NULL name (CT_ERR_ARG). */
CT_API ct_df *ct_df_new(const char *const *names, ct_column *const *cols, int n);
CT_API void ct_df_free(ct_df *df);                      /* NULL is a no-op */
CT_API int64_t ct_df_num_rows(const ct_df *df);
CT_API int ct_df_num_columns(const ct_df *df);
CT_API const char *ct_df_column_name(const ct_df *df, int i);   /* borrowed; NULL out of range */
/* Borrowed column by position / by name; NULL + CT_ERR_INDEX / CT_ERR_ARG
 * ("no column 'x'"). */
CT_API ct_column *ct_df_column_at(const ct_df *df, int i);
CT_API ct_column *ct_df_column(const ct_df *df, const char *name);
CT_API int ct_df_column_index(const ct_df *df, const char *name);  /* -1 when absent, no error */

/* ---- read_csv ---- */
typedef struct ct_csv_opts {
    char delimiter;                 /* 0: ',' */
    bool no_header;                 /* true: names are "0", "1", ... */
    /* NA strings (exact match of the unquoted or quoted field) -> null.
     * NULL: pandas' default list ("", "NA", "N/A", "NaN", "nan", "NULL",
     * "null", "<NA>", "#N/A", "n/a", "-NaN", "-nan", "#NA", "1.#IND", ...);
     * the empty field is always null. */
    const char *const *na_values;
    int n_na_values;
    int num_threads;                /* 0: OpenMP's default */
} ct_csv_opts;
/* pandas.read_csv.  RFC-4180: fields separated by the delimiter, quoted
 * with '"' ("" is a quote inside quotes; quoted fields may hold
 * delimiters and newlines); "\n" or "\r\n" line ends; blank lines are
 * skipped; a UTF-8 byte-order mark before the header is skipped; the
 * header row gives the names, duplicates mangled like pandas
 * (mangle_dupe_cols): "a", "a", "a" -> "a", "a.1", "a.2".  Type
 * inference per column over all non-null fields: bool when all are
 * true/false (any case), else int64 when all are integers that fit, else
 * float64 when all are decimal numbers (the whole field, no hex;
 * inf/infinity/nan allowed), else string (a column of only nulls is
 * string).  A NUL byte in any field is an error; so is a number of a
 * float64 column beyond the range of float64 (which would read as inf).
 * The file is read into memory (not mapped).  opts may be NULL.
 * Errors: CT_ERR_IO naming the path; CT_ERR_FORMAT "read_csv: line L,
 * column C: ..." (1-based; header = line 1; the line where the row or
 * the quoted field starts) for an unterminated quote, a character after a
 * closing quote, a wrong field count (C = the first missing or extra
 * field), a NUL byte, or "read_csv: line L, column C ('name'): '1e400'
 * is out of range for float64"; CT_ERR_OVERFLOW when a string column
 * exceeds 2 GiB. */
CT_API ct_df *ct_df_read_csv(const char *path, const ct_csv_opts *opts);
/* The same over size bytes in memory (need not be NUL-terminated). */
CT_API ct_df *ct_df_read_csv_buffer(const char *data, size_t size, const ct_csv_opts *opts);
/* Writes df as CSV (like pandas to_csv(index=False, float_format=fmt)):
 * header, nulls as empty fields, bools as True/False, floats with the
 * printf format float_fmt (NULL: "%.17g"), strings quoted when they hold
 * the delimiter, a quote, CR or LF.  Lists are written as
 * "[a, b, c]".  Written atomically (temp file + fsync + rename, like
 * ct_safetensors_save; stale temporaries of killed writers are removed).
 * CT_ERR_IO. */
CT_API ct_status ct_df_to_csv(const ct_df *df, const char *path, const char *float_fmt) CT_NODISCARD;

/* ---- frame operations (each returns a new frame) ---- */
CT_API ct_df *ct_df_head(const ct_df *df, int64_t n);           /* first min(n, rows) rows */
/* Columns by name, in the given order (CT_ERR_ARG for a missing name). */
CT_API ct_df *ct_df_select(const ct_df *df, const char *const *names, int n);
/* Renames column `from` to `to` (CT_ERR_ARG: missing or clashing name). */
CT_API ct_df *ct_df_rename(const ct_df *df, const char *from, const char *to);
/* Rows where mask (a bool column of the frame's length) is true; null
 * counts as false.  CT_ERR_DTYPE / CT_ERR_SHAPE otherwise. */
CT_API ct_df *ct_df_filter(const ct_df *df, const ct_column *mask);
/* Adds col as the last column, or replaces the column of that name in
 * place (pandas df[name] = col).  col is retained. */
CT_API ct_df *ct_df_with_column(const ct_df *df, const char *name, ct_column *col);
/* Removes a column (CT_ERR_ARG when absent). */
CT_API ct_df *ct_df_drop(const ct_df *df, const char *name);
/* Stable sort by n columns (ascending[k] per key; NULL: all ascending);
 * nulls (and NaN) last whatever the direction (pandas na_position='last').
 * Strings compare by bytes; lists are refused (CT_ERR_DTYPE). */
CT_API ct_df *ct_df_sort_by(const ct_df *df, const char *const *names, const bool *ascending,
                            int n);
/* Rows without a null in any of the n named columns (n == 0: any column);
 * pandas dropna(subset=...). */
CT_API ct_df *ct_df_drop_nulls(const ct_df *df, const char *const *names, int n);
/* A row subset: rows idx[0..n) in that order (each checked, CT_ERR_INDEX). */
CT_API ct_df *ct_df_take(const ct_df *df, const int64_t *idx, int64_t n);

/* ---- column expressions (each returns a new column) ---- */
/* Rows idx[0..n) of c (CT_ERR_INDEX for one out of range). */
CT_API ct_column *ct_column_take(const ct_column *c, const int64_t *idx, int64_t n);
/* fillna: nulls of a numeric/bool column become value (converted to the
 * column's type; int64 needs an integral value), of a string column
 * str_value.  The result has no validity bitmap. */
CT_API ct_column *ct_column_fill_null(const ct_column *c, double value);
CT_API ct_column *ct_column_fill_null_str(const ct_column *c, const char *value);
/* Casts a numeric/bool column (float -> int64 truncates; NaN -> null). */
CT_API ct_column *ct_column_cast(const ct_column *c, ct_df_type to);

typedef enum ct_df_op {
    CT_DF_ADD, CT_DF_SUB, CT_DF_MUL, CT_DF_DIV,             /* arithmetic */
    CT_DF_EQ, CT_DF_NE, CT_DF_LT, CT_DF_LE, CT_DF_GT, CT_DF_GE, /* -> bool */
    CT_DF_AND, CT_DF_OR                                      /* bool & bool */
} ct_df_op;
/* a OP b elementwise (equal lengths).  Types like pandas: bool counts as
 * int64 in arithmetic; int64 (+ - *) int64 -> int64 (wrapping); `/` is
 * true division -> float64; float32 with float32 -> float32; any other
 * float mix -> float64.  x/0 gives +-inf or NaN (also for ints).
 * Comparisons of numbers, of bools, or of strings (bytewise) -> bool.
 * A null on either side gives null.  CT_ERR_DTYPE for other types. */
CT_API ct_column *ct_column_binary(const ct_column *a, ct_df_op op, const ct_column *b);
/* a OP scalar: a float scalar makes int/bool columns float64 (float32
 * stays float32, like numpy's scalar rule); reverse: scalar OP a. */
CT_API ct_column *ct_column_binary_scalar(const ct_column *a, ct_df_op op, double s, bool reverse);
/* a OP integer scalar: int64 stays int64 (except '/'). */
CT_API ct_column *ct_column_binary_int(const ct_column *a, ct_df_op op, int64_t s, bool reverse);
/* string column OP string scalar, comparisons only (-> bool). */
CT_API ct_column *ct_column_compare_str(const ct_column *a, ct_df_op op, const char *s);
CT_API ct_column *ct_column_not(const ct_column *a);        /* bool -> bool */
/* Natural log (float64; float32 stays float32); log(0) = -inf, x < 0: NaN. */
CT_API ct_column *ct_column_log(const ct_column *c);
/* pandas clip(lower, upper): int64 stays int64 when both bounds are
 * integral, else float.  Pass -INFINITY / INFINITY for no bound.  NaN
 * values stay NaN. */
CT_API ct_column *ct_column_clip(const ct_column *c, double lower, double upper);
/* (x - mean) / std with std's ddof = 1 (pandas), over non-null values ->
 * float64 (float32 stays float32).  Fewer than 2 values: NaN. */
CT_API ct_column *ct_column_standardize(const ct_column *c);
/* (x - min) / (max - min) -> float64 (float32 stays); max == min: NaN. */
CT_API ct_column *ct_column_minmax_scale(const ct_column *c);
/* torch.bucketize(x, boundaries, right): the index into the n sorted
 * boundaries (right=false: first i with x <= b[i]; right=true: first i
 * with x < b[i]; n when none) -> int64.  Unsorted boundaries: CT_ERR_ARG. */
CT_API ct_column *ct_column_bucketize(const ct_column *c, const double *boundaries, int n,
                                      bool right);
/* pandas.get_dummies(df, columns=[name]): the column is removed and one
 * int64 0/1 column per distinct non-null value is appended, named
 * "<name>_<value>" in sorted value order (ints by value, strings by
 * bytes, bools False < True); a null row is 0 everywhere.  int64,
 * string or bool columns (CT_ERR_DTYPE otherwise). */
CT_API ct_df *ct_df_one_hot(const ct_df *df, const char *name);
/* torch.nn.functional.one_hot of an int64 column without nulls: a new
 * int64 tensor [rows, num_classes] (num_classes < 0: max + 1); values
 * outside [0, num_classes) are CT_ERR_INDEX naming the row.  Joins the
 * caller's scope. */
CT_API ct_tensor *ct_column_one_hot_tensor(const ct_column *c, int64_t num_classes);

/* ---- strings (pandas .str; nulls stay null) ---- */
CT_API ct_column *ct_column_str_lower(const ct_column *c);   /* ASCII case mapping */
CT_API ct_column *ct_column_str_upper(const ct_column *c);
CT_API ct_column *ct_column_str_strip(const ct_column *c);   /* ASCII whitespace */
/* Length in Unicode code points (pandas str.len) -> int64. */
CT_API ct_column *ct_column_str_length(const ct_column *c);
/* str.split(sep) -> list<string>; sep NULL or "": split on runs of
 * whitespace dropping empty pieces (Python's str.split()). */
CT_API ct_column *ct_column_str_split(const ct_column *c, const char *sep);
/* str.contains(pat, regex=False) -> bool. */
CT_API ct_column *ct_column_str_contains(const ct_column *c, const char *pat);
/* str.replace(old, new, regex=False): every occurrence (old non-empty). */
CT_API ct_column *ct_column_str_replace(const ct_column *c, const char *old, const char *repl);
/* A word tokenizer: each string is lowercased (ASCII), split on runs of
 * whitespace, and each token mapped to its index in vocab[0..n_vocab)
 * (the first occurrence wins), unknown tokens to unk_id -> list<int64>.
 * Null rows stay null. */
CT_API ct_column *ct_column_tokenize(const ct_column *c, const char *const *vocab, int n_vocab,
                                     int64_t unk_id);

/* ---- group_by / join ---- */
typedef enum ct_df_agg_kind { CT_DF_SUM, CT_DF_MEAN, CT_DF_COUNT, CT_DF_MIN, CT_DF_MAX } ct_df_agg_kind;
typedef struct ct_df_agg {
    const char *column;      /* input column */
    ct_df_agg_kind how;
    const char *out_name;    /* NULL: "<column>_<sum|mean|count|min|max>" */
} ct_df_agg;
/* df.groupby(keys).agg(...) with pandas' defaults (sort=True,
 * dropna=True): one row per distinct key tuple without nulls, sorted by
 * the keys ascending; the key columns first, then one column per agg.
 * Nulls are skipped: sum (int64/bool -> int64, floats -> float64; 0 for
 * none), mean (-> float64; null for none), count (-> int64, non-null
 * values), min/max (same type; null for none).  Key columns: int64,
 * bool or string. */
CT_API ct_df *ct_df_group_by(const ct_df *df, const char *const *keys, int n_keys,
                             const ct_df_agg *aggs, int n_aggs);
/* pandas merge(left, right, on=key, how='inner'): rows grouped by key in
 * the order keys first appear in left, left rows in order, and for each
 * the matching right rows in order.  Result: the left columns (key
 * included, in place), then the right columns without the key; other
 * names present in both get suffixes "_x" and "_y".  Null keys never match.  Key: int64 or string on both sides. */
CT_API ct_df *ct_df_merge_inner(const ct_df *left, const ct_df *right, const char *key);

/* ---- to tensors ---- */
/* The n named numeric/bool columns (n == 0: all columns) as a new
 * contiguous [rows, n] tensor of dtype CT_F32 or CT_F64 (joins the
 * caller's scope).  Nulls: CT_ERR_ARG naming the column and row unless
 * null_as_nan.  Non-numeric column: CT_ERR_DTYPE. */
CT_API ct_tensor *ct_df_to_tensor(const ct_df *df, const char *const *names, int n, ct_dtype dtype,
                                  bool null_as_nan);
/* A list<int64> column as a padded [rows, L] int64 tensor (L = max_len,
 * or the longest list when max_len < 0; longer lists are truncated),
 * padded with pad_id; null rows are empty.  When lengths is not NULL it
 * receives a new int64 [rows] tensor of the (truncated) lengths.  Both
 * join the caller's scope. */
CT_API ct_tensor *ct_column_to_padded_tensor(const ct_column *c, int64_t pad_id, int64_t max_len,
                                             ct_tensor **lengths);

/* ---- the Arrow C Data Interface (https://arrow.apache.org/docs/format/CDataInterface.html) ---- */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  // Array type description
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;

  // Release callback
  void (*release)(struct ArrowSchema*);
  // Opaque producer-specific data
  void* private_data;
};

struct ArrowArray {
  // Array data description
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;

  // Release callback
  void (*release)(struct ArrowArray*);
  // Opaque producer-specific data
  void* private_data;
};

#endif  // ARROW_C_DATA_INTERFACE

/* Exports c into the caller's structs without copying any buffer: formats
 * "l" int64, "g" float64, "f" float32, "b" bool, "u" utf8, "+l" list
 * (one child "item"); flags ARROW_FLAG_NULLABLE; offset 0; buffers[0] is
 * the validity bitmap or NULL when null_count is 0.  The release
 * callbacks keep c's buffers alive until the consumer calls them (the
 * column may be released before).  name may be NULL.  Call each
 * structure's release exactly once (pyarrow does it for you). */
CT_API ct_status ct_column_export_arrow(const ct_column *c, const char *name,
                                        struct ArrowSchema *schema,
                                        struct ArrowArray *array) CT_NODISCARD;
/* The whole frame as a struct array ("+s", one child per column, named),
 * zero-copy like ct_column_export_arrow (pyarrow: RecordBatch /
 * StructArray._import_from_c). */
CT_API ct_status ct_df_export_arrow(const ct_df *df, struct ArrowSchema *schema,
                                    struct ArrowArray *array) CT_NODISCARD;
/* Imports an array produced by another tool.  Formats: "l", "g", "f",
 * "b", "u", "+l" of those, and for integers "i"/"s"/"c" (int32/16/8,
 * converted to int64 by copy).  The array is MOVED: on success the
 * column owns it (array->release is set to NULL; the producer's release
 * runs when the last column using its buffers dies); buffers are used in
 * place when the layout matches (offset 0, 8-byte aligned), else copied.
 * The schema is only read (the caller still releases it).  Every size,
 * offset and count is validated (CT_ERR_FORMAT); on error the array is
 * left untouched and still owned by the caller.  (The interface carries
 * no buffer sizes: offsets are checked to be non-negative and increasing,
 * list offsets against the child's length, but a producer that lies about
 * its string data size cannot be detected.) */
CT_API ct_column *ct_column_import_arrow(struct ArrowArray *array, const struct ArrowSchema *schema);
/* A struct array ("+s") as a frame (children named by their schemas),
 * moved like ct_column_import_arrow. */
CT_API ct_df *ct_df_import_arrow(struct ArrowArray *array, const struct ArrowSchema *schema);
/* ---- end section: DataFrame ---- */

#ifdef __cplusplus
}
#endif
#endif
