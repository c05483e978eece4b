/* io_impl.h -- private to src/io (and the loaders and writers in src/nn and
 * src/data that read JSON or save files): a small strict JSON parser
 * (json.c), atomic saves (atomic.c) and the test hook of the safetensors
 * writer (safetensors.c). */
#ifndef CT_IO_IMPL_H
#define CT_IO_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctorch/error.h"

/* ---- JSON (RFC 8259, strict) ---------------------------------------------
 * A parsed value.  Strings are decoded to UTF-8 (escapes resolved) and
 * NUL-terminated, with their length (they may contain NUL bytes from
 * \u0000, so compare with the length).  Numbers keep their validated text;
 * is_uint is set for a non-negative integer without fraction or exponent
 * that fits in a uint64 (value in u). */
typedef enum ct_jtype { CT_JNULL, CT_JBOOL, CT_JNUM, CT_JSTR, CT_JARR, CT_JOBJ } ct_jtype;

typedef struct ct_jval {
    ct_jtype type;
    bool b;                 /* CT_JBOOL */
    bool is_uint;           /* CT_JNUM: a non-negative integer that fits u64 */
    uint64_t u;
    char *s;                /* CT_JSTR */
    size_t slen;
    int n, cap;             /* CT_JARR / CT_JOBJ: item count */
    struct ct_jval *items;  /* values */
    char **keys;            /* CT_JOBJ: decoded keys (NUL-terminated) */
    size_t *keylens;
} ct_jval;

#define CT_JSON_MAX_DEPTH 64

/* Parses exactly one JSON value (surrounded by optional whitespace) from
 * s[0..n).  The input must already be valid UTF-8.  Objects with duplicate
 * keys are rejected.  Returns 0 and fills *out, or -1 with a message in
 * err (and the byte offset of the problem in *erroff). */
int ct__json_parse(const char *s, size_t n, ct_jval *out, char *err, size_t errlen, size_t *erroff);
void ct__json_free(ct_jval *v);
/* Member of an object by key (NULL if absent or v is not an object). */
const ct_jval *ct__json_get(const ct_jval *v, const char *key);
/* 1 when s[0..n) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF);
 * else 0 with the offset of the first bad byte in *bad. */
int ct__utf8_valid(const unsigned char *s, size_t n, size_t *bad);

/* ---- atomic saves (atomic.c) -----------------------------------------------
 * ct__atomic_begin removes the stale temporaries of path (those named
 * "<path>.tmp.<pid>.<6 alphanumerics>" whose process no longer exists and
 * that no live writer holds locked), then creates a new one,
 * "<path>.tmp.<our pid>.<random>" (O_EXCL, mode 0666 & ~umask), locked with
 * flock until the rename, and opens it as af->fp.  ct__atomic_commit
 * flushes, fsyncs, renames it over path and fsyncs the directory;
 * ct__atomic_abort closes and removes it.  Both free af; on an error begin
 * leaves nothing behind.  Errors name op and the file. */
typedef struct ct_atomic_file {
    FILE *fp;
    char *tmp, *dir, *path;
} ct_atomic_file;
ct_status ct__atomic_begin(const char *op, const char *path, ct_atomic_file *af);
ct_status ct__atomic_commit(const char *op, ct_atomic_file *af);
void ct__atomic_abort(ct_atomic_file *af);

/* ---- test hook ------------------------------------------------------------
 * When set, the atomic writer calls it after every fwrite of a checkpoint
 * (bytes written so far).  Tests use it to kill a child in the middle of
 * a save.  Not thread-safe; for tests only. */
extern void (*ct__io_write_hook)(size_t bytes_written);
/* Size of the chunks the writer passes to fwrite (1 MiB). */
#define CT_IO_CHUNK ((size_t)1 << 20)

#endif
