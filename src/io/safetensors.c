/* safetensors.c -- the safetensors format: a validating, lazy and zero-copy
 * reader (of the file read into memory, or mapped on request), a byte-exact writer (Python's order and padding)
 * with atomic saves, and module / optimizer-state checkpoints on top.
 *
 * File layout: u64 little-endian N | N bytes of JSON header (padded with
 * spaces) | data section.  Every tensor entry names [begin, end) byte
 * offsets into the data section.  See include/ctorch/io.h for the checks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../ops/op_table.h"
#include "io_impl.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_MAX_HEADER 100000000ull /* like Python's reader */
#define ST_ANON_MIN ((size_t)4 << 20) /* files read into anonymous pages from this size on */

void (*ct__io_write_hook)(size_t bytes_written) = NULL;

/* ---- dtypes ------------------------------------------------------------- */
/* rank: the order of Rust's Dtype enum, which the Python writer sorts by
 * (descending).  ct: the ctorch dtype (-1: recognized but not loadable);
 * conv: loaded converted to ct (U16 -> int32, U32 -> int64). */
typedef struct st_dtype {
    const char *name;
    int bits;
    int rank;
    int ct;
    int conv;
} st_dtype;

static const st_dtype k_dtypes[] = {
    {"BOOL", 8, 0, CT_BOOL, 0},
    {"F4", 4, 1, -1, 0},
    {"F6_E2M3", 6, 2, -1, 0},
    {"F6_E3M2", 6, 3, -1, 0},
    {"U8", 8, 4, CT_U8, 0},
    {"I8", 8, 5, CT_I8, 0},
    {"F8_E5M2", 8, 6, -1, 0},
    {"F8_E4M3", 8, 7, -1, 0},
    {"F8_E8M0", 8, 8, -1, 0},
    {"F8_E4M3FNUZ", 8, 9, -1, 0},
    {"F8_E5M2FNUZ", 8, 10, -1, 0},
    {"I16", 16, 11, CT_I16, 0},
    {"U16", 16, 12, CT_I32, 1},
    {"F16", 16, 13, CT_F16, 0},
    {"BF16", 16, 14, CT_BF16, 0},
    {"I32", 32, 15, CT_I32, 0},
    {"U32", 32, 16, CT_I64, 1},
    {"F32", 32, 17, CT_F32, 0},
    {"C64", 64, 18, CT_C64, 0},
    {"F64", 64, 19, CT_F64, 0},
    {"I64", 64, 20, CT_I64, 0},
    {"U64", 64, 21, -1, 0},
};
#define ST_NDTYPES ((int)(sizeof k_dtypes / sizeof k_dtypes[0]))

static int st_dtype_find(const char *s, size_t n) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strlen(k_dtypes[i].name) == n && memcmp(k_dtypes[i].name, s, n) == 0) return i;
    return -1;
}

/* The safetensors dtype written for a ctorch dtype, or -1. */
static int st_dtype_of_ct(ct_dtype dt) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (k_dtypes[i].ct == (int)dt && !k_dtypes[i].conv) return i;
    return -1;
}

/* ---- the shared mapping --------------------------------------------------- */
typedef struct st_map {
    atomic_long rc;
    void *base;
    size_t size;
    int mapped; /* 1: mmap (of the file, or anonymous), 0: malloc */
} st_map;

static void st_map_release(st_map *m) {
    if (!m || atomic_fetch_sub(&m->rc, 1) != 1) return;
    if (m->mapped) munmap(m->base, m->size);
    else free(m->base);
    free(m);
}

/* from_blob deleter of zero-copy tensors */
static void st_map_deleter(void *data, void *ctx) {
    (void)data;
    st_map_release(ctx);
}

typedef struct st_entry {
    char *name;
    int dtype; /* index in k_dtypes */
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    uint64_t begin, end; /* within the data section */
} st_entry;

struct ct_safetensors {
    st_map *map;
    char *path;
    size_t data_start; /* 8 + N */
    int n;
    st_entry *e;
    int nmeta;
    char **mkeys, **mvals;
};

void ct_safetensors_close(ct_safetensors *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->e[i].name);
    free(f->e);
    for (int i = 0; i < f->nmeta; i++) { free(f->mkeys[i]); free(f->mvals[i]); }
    free(f->mkeys);
    free(f->mvals);
    free(f->path);
    st_map_release(f->map);
    free(f);
}

/* A printable, shortened copy of a (possibly hostile) name for messages. */
static const char *shown(const char *s, size_t n, char *buf, size_t cap) {
    size_t m = 0;
    for (size_t i = 0; i < n && m + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[m++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    if (m + 4 >= cap) { buf[m++] = '.'; buf[m++] = '.'; buf[m++] = '.'; }
    buf[m] = '\0';
    return buf;
}

static int entry_cmp(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

#define FERR(...) do { ct__error(CT_ERR_FORMAT, __VA_ARGS__); goto fail; } while (0)

/* Parses and validates the header of the file in map; fills f. */
static ct_status st_parse(ct_safetensors *f) {
    const unsigned char *buf = f->map->base;
    size_t size = f->map->size;
    const char *P = f->path;
    ct_jval root;
    memset(&root, 0, sizeof root);
    char nb[96];

    if (size < 8)
        FERR("safetensors: %s: file is %zu bytes, too small for the 8-byte header length", P, size);
    uint64_t N = 0;
    for (int k = 7; k >= 0; k--) N = (N << 8) | buf[k];
    if (N > ST_MAX_HEADER)
        FERR("safetensors: %s: header length %llu exceeds the limit of %llu bytes", P,
             (unsigned long long)N, (unsigned long long)ST_MAX_HEADER);
    if (N > size - 8)
        FERR("safetensors: %s: header length %llu exceeds the file (%zu bytes after the length "
             "field): truncated file?", P, (unsigned long long)N, size - 8);
    if (N < 2) FERR("safetensors: %s: header length %llu is too small for a JSON object", P,
                    (unsigned long long)N);
    const char *hdr = (const char *)buf + 8;
    size_t bad;
    if (!ct__utf8_valid((const unsigned char *)hdr, (size_t)N, &bad))
        FERR("safetensors: %s: header is not valid UTF-8 (byte %zu)", P, bad);
    char jerr[160];
    size_t joff = 0;
    if (ct__json_parse(hdr, (size_t)N, &root, jerr, sizeof jerr, &joff))
        FERR("safetensors: %s: invalid JSON header at byte %zu: %s", P, joff, jerr);
    if (root.type != CT_JOBJ) FERR("safetensors: %s: the header is not a JSON object", P);

    f->data_start = 8 + (size_t)N;
    uint64_t data_size = size - f->data_start;
    int nt = 0;
    for (int i = 0; i < root.n; i++)
        if (strcmp(root.keys[i], "__metadata__") != 0 || root.keylens[i] != 12) nt++;
    f->e = calloc((size_t)(nt ? nt : 1), sizeof *f->e);
    if (!f->e) { ct__error(CT_ERR_OOM, "safetensors: %s: out of memory", P); goto fail; }

    for (int i = 0; i < root.n; i++) {
        const char *key = root.keys[i];
        size_t klen = root.keylens[i];
        const ct_jval *v = &root.items[i];
        if (klen == 12 && memcmp(key, "__metadata__", 12) == 0) {
            if (v->type != CT_JOBJ)
                FERR("safetensors: %s: \"__metadata__\" must be an object of strings", P);
            f->mkeys = calloc((size_t)(v->n ? v->n : 1), sizeof *f->mkeys);
            f->mvals = calloc((size_t)(v->n ? v->n : 1), sizeof *f->mvals);
            if (!f->mkeys || !f->mvals) { ct__error(CT_ERR_OOM, "safetensors: %s: out of memory", P); goto fail; }
            for (int k = 0; k < v->n; k++) {
                const ct_jval *mv = &v->items[k];
                if (mv->type != CT_JSTR)
                    FERR("safetensors: %s: metadata value of \"%s\" is not a string", P,
                         shown(v->keys[k], v->keylens[k], nb, sizeof nb));
                if (strlen(v->keys[k]) != v->keylens[k] || strlen(mv->s) != mv->slen)
                    FERR("safetensors: %s: metadata entry \"%s\" contains a NUL character", P,
                         shown(v->keys[k], v->keylens[k], nb, sizeof nb));
                f->mkeys[f->nmeta] = strdup(v->keys[k]);
                f->mvals[f->nmeta] = strdup(mv->s);
                f->nmeta++;
                if (!f->mkeys[f->nmeta - 1] || !f->mvals[f->nmeta - 1]) {
                    ct__error(CT_ERR_OOM, "safetensors: %s: out of memory", P);
                    goto fail;
                }
            }
            continue;
        }
        const char *nm = shown(key, klen, nb, sizeof nb);
        if (strlen(key) != klen) FERR("safetensors: %s: tensor name \"%s\" contains a NUL character", P, nm);
        if (v->type != CT_JOBJ)
            FERR("safetensors: %s: entry \"%s\" is not an object with dtype, shape and data_offsets", P, nm);
        const ct_jval *jd = ct__json_get(v, "dtype"), *js = ct__json_get(v, "shape"),
                      *jo = ct__json_get(v, "data_offsets");
        if (!jd || !js || !jo)
            FERR("safetensors: %s: entry \"%s\" lacks \"%s\"", P, nm,
                 !jd ? "dtype" : !js ? "shape" : "data_offsets");
        st_entry *e = &f->e[f->n];
        if (jd->type != CT_JSTR) FERR("safetensors: %s: entry \"%s\": dtype is not a string", P, nm);
        e->dtype = st_dtype_find(jd->s, jd->slen);
        if (e->dtype < 0) {
            char db[40];
            FERR("safetensors: %s: entry \"%s\": unknown dtype \"%s\"", P, nm,
                 shown(jd->s, jd->slen, db, sizeof db));
        }
        if (js->type != CT_JARR) FERR("safetensors: %s: entry \"%s\": shape is not an array", P, nm);
        if (js->n > CT_MAX_DIMS)
            FERR("safetensors: %s: entry \"%s\" has %d dims; ctorch supports at most %d", P, nm,
                 js->n, CT_MAX_DIMS);
        uint64_t numel = 1;
        bool ovf = false;
        for (int k = 0; k < js->n; k++) {
            const ct_jval *d = &js->items[k];
            if (d->type != CT_JNUM || !d->is_uint || d->u > (uint64_t)INT64_MAX)
                FERR("safetensors: %s: entry \"%s\": shape[%d] is not a non-negative integer "
                     "below 2^63", P, nm, k);
            e->shape[k] = (int64_t)d->u;
            if (d->u && numel > (uint64_t)INT64_MAX / d->u) ovf = true;
            else numel *= d->u;
        }
        e->ndim = js->n;
        /* a zero dim makes the product 0 whatever the others are */
        for (int k = 0; k < e->ndim; k++)
            if (e->shape[k] == 0) { numel = 0; ovf = false; }
        if (ovf) FERR("safetensors: %s: entry \"%s\": the number of elements of its shape overflows", P, nm);
        if (jo->type != CT_JARR || jo->n != 2 || jo->items[0].type != CT_JNUM || !jo->items[0].is_uint ||
            jo->items[1].type != CT_JNUM || !jo->items[1].is_uint)
            FERR("safetensors: %s: entry \"%s\": data_offsets must be [begin, end], two "
                 "non-negative integers", P, nm);
        e->begin = jo->items[0].u;
        e->end = jo->items[1].u;
        if (e->end < e->begin)
            FERR("safetensors: %s: entry \"%s\": data_offsets [%llu, %llu] end before they begin", P, nm,
                 (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->end > data_size)
            FERR("safetensors: %s: entry \"%s\": data_offsets [%llu, %llu] out of range of the "
                 "%llu-byte data section", P, nm, (unsigned long long)e->begin,
                 (unsigned long long)e->end, (unsigned long long)data_size);
        int bits = k_dtypes[e->dtype].bits;
        if (numel > UINT64_MAX / (uint64_t)bits)
            FERR("safetensors: %s: entry \"%s\": its byte size overflows", P, nm);
        uint64_t nbits = numel * (uint64_t)bits;
        if (nbits % 8)
            FERR("safetensors: %s: entry \"%s\": %llu elements of %s do not fill whole bytes", P, nm,
                 (unsigned long long)numel, k_dtypes[e->dtype].name);
        if (e->end - e->begin != nbits / 8) {
            char sb[256];
            FERR("safetensors: %s: entry \"%s\": data_offsets [%llu, %llu] hold %llu bytes but "
                 "shape %s of %s needs %llu", P, nm, (unsigned long long)e->begin,
                 (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                 ct__shape_str(e->shape, e->ndim, sb, sizeof sb), k_dtypes[e->dtype].name,
                 (unsigned long long)(nbits / 8));
        }
        e->name = strdup(key);
        if (!e->name) { ct__error(CT_ERR_OOM, "safetensors: %s: out of memory", P); goto fail; }
        f->n++;
    }
    /* The entries must tile the data section: sorted by offsets, each one
     * starts where the previous ended, the last ends at the end of file. */
    qsort(f->e, (size_t)f->n, sizeof *f->e, entry_cmp);
    uint64_t pos = 0;
    for (int i = 0; i < f->n; i++) {
        st_entry *e = &f->e[i];
        if (e->begin < pos)
            FERR("safetensors: %s: entry \"%s\" (data_offsets [%llu, %llu]) overlaps entry \"%s\"",
                 P, shown(e->name, strlen(e->name), nb, sizeof nb), (unsigned long long)e->begin,
                 (unsigned long long)e->end, f->e[i - 1].name);
        if (e->begin > pos)
            FERR("safetensors: %s: entry \"%s\" begins at byte %llu of the data section, leaving "
                 "a gap after byte %llu", P, shown(e->name, strlen(e->name), nb, sizeof nb),
                 (unsigned long long)e->begin, (unsigned long long)pos);
        pos = e->end;
    }
    if (pos != data_size)
        FERR("safetensors: %s: the tensors cover %llu bytes but the data section has %llu "
             "(truncated file or trailing bytes)", P, (unsigned long long)pos,
             (unsigned long long)data_size);
    ct__json_free(&root);
    return CT_OK;
fail:
    ct__json_free(&root);
    return ct_last_error_code() ? ct_last_error_code() : CT_ERR_FORMAT;
}

static ct_safetensors *st_new(st_map *map, const char *name) {
    ct_safetensors *f = calloc(1, sizeof *f);
    if (!f) { st_map_release(map); return ct__error(CT_ERR_OOM, "safetensors: out of memory"); }
    f->map = map;
    f->path = strdup(name);
    if (!f->path) { ct_safetensors_close(f); return ct__error(CT_ERR_OOM, "safetensors: out of memory"); }
    if (st_parse(f)) { ct_safetensors_close(f); return NULL; }
    return f;
}

/* Reads (map = false) or maps (map = true) the file at path. */
static ct_safetensors *st_open(const char *op, const char *path, bool map) {
    if (!path) return ct__error(CT_ERR_NULL, "%s: path is NULL", op);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ct__error(CT_ERR_IO, "%s: cannot open %s: %s", op, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ct__error(CT_ERR_IO, "%s: cannot stat %s: %s", op, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ct__error(CT_ERR_IO, "%s: %s is not a regular file", op, path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return ct__error(CT_ERR_FORMAT, "safetensors: %s: file is %lld bytes, too small for the "
                         "8-byte header length", path, (long long)sb.st_size);
    }
    if ((uint64_t)sb.st_size > (uint64_t)SIZE_MAX / 2) {
        close(fd);
        return ct__error(CT_ERR_IO, "%s: %s is too large (%lld bytes)", op, path, (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    st_map *m = calloc(1, sizeof *m);
    if (!m) { close(fd); return ct__error(CT_ERR_OOM, "%s: out of memory", op); }
    void *base = NULL;
    if (map) {
        /* private writable mapping: copy-on-write, the file is never modified */
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        int e = errno;
        close(fd);
        if (base == MAP_FAILED) {
            free(m);
            return ct__error(CT_ERR_IO, "%s: cannot map %s: %s", op, path, strerror(e));
        }
    } else {
        /* owned memory: what another process does to the file later cannot
         * reach the tensors (a mapping faults with SIGBUS once truncated).
         * Large files go to anonymous pages with transparent huge pages
         * asked for (a 90 MB model: ~2x faster to fill than 4 KiB pages). */
        if (size >= ST_ANON_MIN) {
            base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (base == MAP_FAILED) base = NULL;
            else (void)madvise(base, size, MADV_HUGEPAGE);
        } else if (posix_memalign(&base, 64, size) != 0) {
            base = NULL;
        }
        if (!base) {
            close(fd);
            free(m);
            return ct__error(CT_ERR_OOM, "%s: out of memory reading %s (%zu bytes)", op, path, size);
        }
        size_t got = 0;
        while (got < size) {
            size_t want = size - got < ((size_t)1 << 30) ? size - got : (size_t)1 << 30;
            ssize_t k = read(fd, (char *)base + got, want);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                int e = errno;
                close(fd);
                if (size >= ST_ANON_MIN) munmap(base, size);
                else free(base);
                free(m);
                if (k < 0) return ct__error(CT_ERR_IO, "%s: reading %s failed: %s", op, path, strerror(e));
                return ct__error(CT_ERR_IO, "%s: %s shrank from %zu to %zu bytes while being read "
                                 "(truncated by another process?)", op, path, size, got);
            }
            got += (size_t)k;
        }
        close(fd);
    }
    atomic_init(&m->rc, 1);
    m->base = base;
    m->size = size;
    m->mapped = map || size >= ST_ANON_MIN;
    return st_new(m, path);
}

ct_safetensors *ct_safetensors_open(const char *path) { return st_open("safetensors_open", path, false); }
ct_safetensors *ct_safetensors_open_mmap(const char *path) { return st_open("safetensors_open_mmap", path, true); }

ct_safetensors *ct_safetensors_open_buffer(const void *data, size_t size, const char *name) {
    if (!name) name = "<buffer>";
    if (!data && size) return ct__error(CT_ERR_NULL, "safetensors_open_buffer: data is NULL");
    st_map *m = calloc(1, sizeof *m);
    void *copy = malloc(size ? size : 1);
    if (!m || !copy) { free(m); free(copy); return ct__error(CT_ERR_OOM, "safetensors_open_buffer: out of memory"); }
    if (size) memcpy(copy, data, size);
    atomic_init(&m->rc, 1);
    m->base = copy;
    m->size = size;
    m->mapped = 0;
    return st_new(m, name);
}

int ct_safetensors_count(const ct_safetensors *f) { return f ? f->n : 0; }
const char *ct_safetensors_name(const ct_safetensors *f, int i) {
    return f && i >= 0 && i < f->n ? f->e[i].name : NULL;
}
int ct_safetensors_find(const ct_safetensors *f, const char *name) {
    if (!f || !name) return -1;
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) return i;
    return -1;
}
int ct_safetensors_metadata_count(const ct_safetensors *f) { return f ? f->nmeta : 0; }
const char *ct_safetensors_metadata_key(const ct_safetensors *f, int i) {
    return f && i >= 0 && i < f->nmeta ? f->mkeys[i] : NULL;
}
const char *ct_safetensors_metadata_value(const ct_safetensors *f, int i) {
    return f && i >= 0 && i < f->nmeta ? f->mvals[i] : NULL;
}
const char *ct_safetensors_metadata_get(const ct_safetensors *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nmeta; i++)
        if (strcmp(f->mkeys[i], key) == 0) return f->mvals[i];
    return NULL;
}
const void *ct_safetensors_buffer(const ct_safetensors *f, size_t *size) {
    if (size) *size = f ? f->map->size : 0;
    return f ? f->map->base : NULL;
}

static bool entry_zero_copy(const ct_safetensors *f, const st_entry *e) {
    const st_dtype *d = &k_dtypes[e->dtype];
    if (d->ct < 0 || d->conv || e->end == e->begin) return false;
    size_t align = d->ct == CT_C64 ? 4 : (size_t)d->bits / 8;
    uintptr_t p = (uintptr_t)f->map->base + f->data_start + (uintptr_t)e->begin;
    if (p % align) return false;
    if (d->ct == CT_BOOL) { /* only 0/1 bytes are valid C bools: others load normalized */
        const unsigned char *b = (const unsigned char *)p;
        for (uint64_t k = 0; k < e->end - e->begin; k++)
            if (b[k] > 1) return false;
    }
    return true;
}

ct_status ct_safetensors_info(const ct_safetensors *f, const char *name, const char **dtype_name,
                              int *ndim, int64_t *shape, bool *zero_copy) {
    if (!f || !name) return ct__error_status(CT_ERR_NULL, "safetensors_info: file or name is NULL");
    int i = ct_safetensors_find(f, name);
    if (i < 0)
        return ct__error_status(CT_ERR_ARG, "safetensors_info: %s has no tensor \"%s\"", f->path, name);
    const st_entry *e = &f->e[i];
    if (dtype_name) *dtype_name = k_dtypes[e->dtype].name;
    if (ndim) *ndim = e->ndim;
    if (shape) memcpy(shape, e->shape, sizeof(int64_t) * (size_t)e->ndim);
    if (zero_copy) *zero_copy = entry_zero_copy(f, e);
    return CT_OK;
}

ct_tensor *ct_safetensors_get(ct_safetensors *f, const char *name) {
    if (!f || !name) return ct__error(CT_ERR_NULL, "safetensors_get: file or name is NULL");
    int i = ct_safetensors_find(f, name);
    if (i < 0) return ct__error(CT_ERR_ARG, "safetensors_get: %s has no tensor \"%s\"", f->path, name);
    const st_entry *e = &f->e[i];
    const st_dtype *d = &k_dtypes[e->dtype];
    if (d->ct < 0)
        return ct__error(CT_ERR_DTYPE, "safetensors_get: %s: tensor \"%s\" has dtype %s, which "
                         "ctorch does not support", f->path, name, d->name);
    const unsigned char *src = (const unsigned char *)f->map->base + f->data_start + e->begin;
    if (entry_zero_copy(f, e)) {
        atomic_fetch_add(&f->map->rc, 1);
        ct_tensor *t = ct_from_blob((void *)src, e->shape, e->ndim, NULL, (ct_dtype)d->ct,
                                    st_map_deleter, f->map);
        if (!t) st_map_release(f->map);
        return t;
    }
    ct_tensor *t = ct_empty_on(e->shape, e->ndim, (ct_dtype)d->ct, CT_CPU); /* filled from the file */
    if (!t) return NULL;
    int64_t n = ct_numel(t);
    unsigned char *dst = ct_data_ptr(t);
    if (d->ct == CT_BOOL) {
        for (int64_t k = 0; k < n; k++) dst[k] = src[k] != 0;
    } else if (!d->conv) {
        if (n) memcpy(dst, src, (size_t)(e->end - e->begin));
    } else if (d->bits == 16) { /* U16 -> int32 */
        for (int64_t k = 0; k < n; k++) {
            uint16_t v;
            memcpy(&v, src + 2 * k, 2);
            int32_t w = v;
            memcpy(dst + 4 * k, &w, 4);
        }
    } else { /* U32 -> int64 */
        for (int64_t k = 0; k < n; k++) {
            uint32_t v;
            memcpy(&v, src + 4 * k, 4);
            int64_t w = v;
            memcpy(dst + 8 * k, &w, 8);
        }
    }
    return t;
}

ct_sample *ct_safetensors_tensors(ct_safetensors *f) {
    if (!f) return ct__error(CT_ERR_NULL, "safetensors_tensors: file is NULL");
    ct_sample *s = ct_sample_new();
    if (!s) return NULL;
    for (int i = 0; i < f->n; i++) {
        ct_scope sc = ct_scope_begin();
        ct_tensor *t = ct_safetensors_get(f, f->e[i].name);
        ct_status st = t ? ct_sample_set(s, f->e[i].name, t) : ct_last_error_code();
        ct_scope_end(sc);
        if (st) { ct_sample_free(s); return NULL; }
    }
    return s;
}

static ct_sample *st_load(ct_safetensors *f) {
    if (!f) return NULL;
    ct_sample *s = ct_safetensors_tensors(f);
    ct_safetensors_close(f);
    return s;
}

ct_sample *ct_safetensors_load(const char *path) { return st_load(ct_safetensors_open(path)); }
ct_sample *ct_safetensors_load_mmap(const char *path) { return st_load(ct_safetensors_open_mmap(path)); }

/* ---- writing ------------------------------------------------------------- */
typedef struct st_seg { const void *p; size_t n; } st_seg;

typedef struct st_plan {
    ct_sbuf hdr;      /* header JSON, padded */
    int nseg;         /* 1 + tensors */
    st_seg *seg;
    ct_scope scope;   /* owns the contiguous CPU copies */
    bool scoped;
} st_plan;

static void plan_free(st_plan *pl) {
    free(pl->hdr.s);
    free(pl->seg);
    if (pl->scoped) ct_scope_end(pl->scope);
    memset(pl, 0, sizeof *pl);
}

/* serde_json's escaping: " \ and control characters; everything else raw. */
static void json_str(ct_sbuf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    ct__sbuf_put(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        switch (c) {
        case '"': ct__sbuf_put(b, "\\\""); break;
        case '\\': ct__sbuf_put(b, "\\\\"); break;
        case '\b': ct__sbuf_put(b, "\\b"); break;
        case '\f': ct__sbuf_put(b, "\\f"); break;
        case '\n': ct__sbuf_put(b, "\\n"); break;
        case '\r': ct__sbuf_put(b, "\\r"); break;
        case '\t': ct__sbuf_put(b, "\\t"); break;
        default:
            if (c < 0x20) ct__sbuf_put(b, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
            else ct__sbuf_put(b, "%c", (char)c);
        }
    }
    ct__sbuf_put(b, "\"");
}

typedef struct st_item { const char *name; ct_tensor *t; int sdt; } st_item;

static int item_cmp(const void *a, const void *b) {
    const st_item *x = a, *y = b;
    int rx = k_dtypes[x->sdt].rank, ry = k_dtypes[y->sdt].rank;
    if (rx != ry) return ry - rx; /* descending dtype rank */
    return strcmp(x->name, y->name);
}

static int str_ptr_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static ct_status check_utf8_name(const char *op, const char *what, const char *s) {
    size_t bad;
    if (!ct__utf8_valid((const unsigned char *)s, strlen(s), &bad))
        return ct__error_status(CT_ERR_ARG, "%s: %s is not valid UTF-8 (byte %zu)", op, what, bad);
    return CT_OK;
}

static ct_status plan_build(const char *op, const ct_sample *tensors, const char *const *metadata,
                            st_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (!tensors) return ct__error_status(CT_ERR_NULL, "%s: tensors is NULL", op);
    int n = ct_sample_count(tensors);
    st_item *it = calloc((size_t)(n ? n : 1), sizeof *it);
    const char **mk = NULL;
    ct_status st = CT_OK;
    if (!it) return ct__error_status(CT_ERR_OOM, "%s: out of memory", op);
    pl->scope = ct_scope_begin();
    pl->scoped = true;
    bool grad = ct_set_grad_enabled(false);
    for (int i = 0; i < n; i++) {
        const char *name = ct_sample_name(tensors, i);
        ct_tensor *t = ct_sample_at(tensors, i);
        if (!name || !t) { st = ct__error_status(CT_ERR_NULL, "%s: entry %d is NULL", op, i); goto done; }
        if (strcmp(name, "__metadata__") == 0) {
            st = ct__error_status(CT_ERR_ARG, "%s: a tensor cannot be named \"__metadata__\"", op);
            goto done;
        }
        if ((st = check_utf8_name(op, "a tensor name", name))) goto done;
        int sdt = st_dtype_of_ct(ct_get_dtype(t));
        if (sdt < 0) {
            st = ct__error_status(CT_ERR_DTYPE, "%s: tensor \"%s\" has dtype %s, which safetensors "
                                  "cannot store", op, name, ct_dtype_name(ct_get_dtype(t)));
            goto done;
        }
        ct_tensor *c = ct_contiguous(ct_get_device(t) == CT_CPU ? t : ct_to_device(t, CT_CPU));
        if (!c) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME; goto done; }
        it[i] = (st_item){name, c, sdt};
    }
    qsort(it, (size_t)n, sizeof *it, item_cmp);

    /* header */
    ct_sbuf *b = &pl->hdr;
    ct__sbuf_put(b, "{");
    bool first = true;
    if (metadata) {
        int nm = 0;
        while (metadata[2 * nm]) {
            if (!metadata[2 * nm + 1]) {
                st = ct__error_status(CT_ERR_ARG, "%s: metadata key \"%s\" has no value (NULL)", op,
                                      metadata[2 * nm]);
                goto done;
            }
            nm++;
        }
        mk = malloc(sizeof *mk * (size_t)(nm ? nm : 1));
        if (!mk) { st = ct__error_status(CT_ERR_OOM, "%s: out of memory", op); goto done; }
        for (int k = 0; k < nm; k++) {
            mk[k] = metadata[2 * k];
            if ((st = check_utf8_name(op, "a metadata key", metadata[2 * k])) ||
                (st = check_utf8_name(op, "a metadata value", metadata[2 * k + 1])))
                goto done;
        }
        qsort(mk, (size_t)nm, sizeof *mk, str_ptr_cmp);
        for (int k = 1; k < nm; k++)
            if (strcmp(mk[k - 1], mk[k]) == 0) {
                st = ct__error_status(CT_ERR_ARG, "%s: duplicate metadata key \"%s\"", op, mk[k]);
                goto done;
            }
        ct__sbuf_put(b, "\"__metadata__\":{");
        for (int k = 0; k < nm; k++) {
            const char *val = NULL;
            for (int q = 0; q < nm; q++)
                if (metadata[2 * q] == mk[k]) val = metadata[2 * q + 1];
            if (k) ct__sbuf_put(b, ",");
            json_str(b, mk[k]);
            ct__sbuf_put(b, ":");
            json_str(b, val);
        }
        ct__sbuf_put(b, "}");
        first = false;
    }
    uint64_t off = 0;
    pl->seg = calloc((size_t)n + 2, sizeof *pl->seg);
    if (!pl->seg) { st = ct__error_status(CT_ERR_OOM, "%s: out of memory", op); goto done; }
    for (int i = 0; i < n; i++) {
        ct_tensor *t = it[i].t;
        size_t nbytes = (size_t)ct_numel(t) * ct_dtype_size(ct_get_dtype(t));
        if (!first) ct__sbuf_put(b, ",");
        first = false;
        json_str(b, it[i].name);
        ct__sbuf_put(b, ":{\"dtype\":\"%s\",\"shape\":[", k_dtypes[it[i].sdt].name);
        for (int d = 0; d < ct_ndim(t); d++) ct__sbuf_put(b, "%s%lld", d ? "," : "", (long long)ct_size(t, d));
        ct__sbuf_put(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                     (unsigned long long)(off + nbytes));
        off += nbytes;
        pl->seg[1 + i] = (st_seg){nbytes ? ct_data_ptr(t) : NULL, nbytes};
    }
    ct__sbuf_put(b, "}");
    while (!b->oom && b->n % 8) ct__sbuf_put(b, " ");
    if (b->oom || !b->s) { st = ct__error_status(CT_ERR_OOM, "%s: out of memory", op); goto done; }
    if (b->n > ST_MAX_HEADER) {
        st = ct__error_status(CT_ERR_ARG, "%s: the header would be %zu bytes, above the %llu-byte "
                              "limit of readers", op, b->n, (unsigned long long)ST_MAX_HEADER);
        goto done;
    }
    pl->nseg = n + 1;
    pl->seg[0] = (st_seg){b->s, b->n};
done:
    ct_set_grad_enabled(grad);
    free(it);
    free(mk);
    if (st) plan_free(pl);
    return st;
}

static void le64(unsigned char *o, uint64_t v) {
    for (int k = 0; k < 8; k++) o[k] = (unsigned char)(v >> (8 * k));
}

ct_status ct_safetensors_serialize(const ct_sample *tensors, const char *const *metadata, void **out,
                                   size_t *size) {
    if (!out || !size) return ct__error_status(CT_ERR_NULL, "safetensors_serialize: out or size is NULL");
    *out = NULL;
    *size = 0;
    st_plan pl;
    ct_status st = plan_build("safetensors_serialize", tensors, metadata, &pl);
    if (st) return st;
    size_t total = 8;
    for (int i = 0; i < pl.nseg; i++) total += pl.seg[i].n;
    unsigned char *buf = malloc(total);
    if (!buf) { plan_free(&pl); return ct__error_status(CT_ERR_OOM, "safetensors_serialize: out of memory"); }
    le64(buf, pl.seg[0].n);
    size_t pos = 8;
    for (int i = 0; i < pl.nseg; i++) {
        if (pl.seg[i].n) memcpy(buf + pos, pl.seg[i].p, pl.seg[i].n);
        pos += pl.seg[i].n;
    }
    plan_free(&pl);
    *out = buf;
    *size = total;
    return CT_OK;
}

/* Writes segs atomically to path (atomic.c: temp file in the same
 * directory, fwrite, fflush, fsync, rename, fsync of the directory). */
static ct_status write_atomic(const char *op, const char *path, const st_seg *seg, int nseg) {
    ct_atomic_file af;
    ct_status st = ct__atomic_begin(op, path, &af);
    if (st) return st;
    size_t written = 0;
    for (int i = 0; i < nseg; i++) {
        const unsigned char *p = seg[i].p;
        size_t left = seg[i].n;
        while (left) {
            size_t k = left < CT_IO_CHUNK ? left : CT_IO_CHUNK;
            if (fwrite(p, 1, k, af.fp) != k) {
                st = ct__error_status(CT_ERR_IO, "%s: writing %s failed: %s", op, af.tmp, strerror(errno));
                ct__atomic_abort(&af);
                return st;
            }
            p += k;
            left -= k;
            written += k;
            if (ct__io_write_hook) ct__io_write_hook(written);
        }
    }
    return ct__atomic_commit(op, &af);
}

ct_status ct_safetensors_save(const char *path, const ct_sample *tensors, const char *const *metadata) {
    if (!path) return ct__error_status(CT_ERR_NULL, "safetensors_save: path is NULL");
    st_plan pl;
    ct_status st = plan_build("safetensors_save", tensors, metadata, &pl);
    if (st) return st;
    unsigned char len[8];
    le64(len, pl.seg[0].n);
    st_seg *segs = malloc(sizeof *segs * (size_t)(pl.nseg + 1));
    if (!segs) { plan_free(&pl); return ct__error_status(CT_ERR_OOM, "safetensors_save: out of memory"); }
    segs[0] = (st_seg){len, 8};
    memcpy(segs + 1, pl.seg, sizeof *segs * (size_t)pl.nseg);
    st = write_atomic("safetensors_save", path, segs, pl.nseg + 1);
    free(segs);
    plan_free(&pl);
    return st;
}

/* ---- checkpoints ------------------------------------------------------------ */
/* (ct_save_module / ct_load_module, which go through nn's state dicts, are
 * in src/nn/module_io.c: io does not depend on nn.) */
ct_status ct_save_state(const char *path, const ct_sample *state) {
    if (!path || !state) return ct__error_status(CT_ERR_NULL, "save_state: path or state is NULL");
    static const char *const meta[] = {"format", "ctorch-state", NULL};
    return ct_safetensors_save(path, state, meta);
}

ct_sample *ct_load_state(const char *path) {
    ct_safetensors *f = ct_safetensors_open(path);
    if (!f) return NULL;
    ct_sample *s = ct_sample_new();
    for (int i = 0; s && i < f->n; i++) {
        ct_scope sc = ct_scope_begin();
        ct_tensor *t = ct_safetensors_get(f, f->e[i].name);
        ct_tensor *c = t ? ct_clone(t) : NULL; /* owned memory, not the mapping */
        ct_status st = c ? ct_sample_set(s, f->e[i].name, c) : ct_last_error_code();
        ct_scope_end(sc);
        if (st) { ct_sample_free(s); s = NULL; }
    }
    ct_safetensors_close(f);
    return s;
}
