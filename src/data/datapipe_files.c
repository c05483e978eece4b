/* datapipe_files.c -- file stages: file_lister, file_opener, line_reader,
 * csv_parser.  Files are hostile: sizes are bounded, errors name the path,
 * the line and the column. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datapipe_impl.h"

#define SELF(T) T *s = (T *)((ct_datapipe *)n)->self
#define NODE ((ct_datapipe *)n)
#define DEFAULT_MAX_BYTES ((int64_t)1 << 30)

/* Reads a whole file into a new STR item. */
static ct_pipe_item *read_file_item(const char *stage, const char *path, int64_t max_bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return ct__error(CT_ERR_IO, "datapipe %s: cannot open '%s': %s", stage, path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return ct__error(CT_ERR_IO, "datapipe %s: '%s' is not a regular file", stage, path);
    }
    if (st.st_size > max_bytes) {
        fclose(f);
        return ct__error(CT_ERR_IO, "datapipe %s: '%s' has %lld bytes, more than the limit of %" PRId64, stage,
                         path, (long long)st.st_size, max_bytes);
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return ct__error(CT_ERR_OOM, "datapipe %s: out of memory reading '%s'", stage, path);
    }
    for (;;) { /* the file may grow or shrink while we read: read to EOF, bounded */
        if (n == cap - 1) {
            if ((int64_t)cap > max_bytes) {
                free(buf);
                fclose(f);
                return ct__error(CT_ERR_IO, "datapipe %s: '%s' grew past the limit of %" PRId64 " bytes", stage,
                                 path, max_bytes);
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                return ct__error(CT_ERR_OOM, "datapipe %s: out of memory reading '%s'", stage, path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return ct__error(CT_ERR_IO, "datapipe %s: read error on '%s'", stage, path);
    }
    ct_pipe_item *x = ct_pipe_item_int(0);
    if (!x) {
        free(buf);
        return NULL;
    }
    x->kind = CT_PIPE_ITEM_STR;
    x->s = buf;
    x->s[n] = 0;
    x->s_len = n;
    return x;
}

/* ======================================================================
 * file_lister
 * ====================================================================== */
typedef struct {
    char *root;
    char **masks;
    int nmasks;
    bool recursive;
    char **paths;
    int64_t npaths, cap, pos;
    int listed;
} lister_self;

static void lister_clear(lister_self *s) {
    for (int64_t k = 0; k < s->npaths; k++) free(s->paths[k]);
    free(s->paths);
    s->paths = NULL;
    s->npaths = s->cap = 0;
    s->listed = 0;
}
static int matches(lister_self *s, const char *name) {
    if (s->nmasks == 0) return 1;
    for (int k = 0; k < s->nmasks; k++)
        if (fnmatch(s->masks[k], name, 0) == 0) return 1;
    return 0;
}
static ct_status walk(lister_self *s, const char *dir, int depth) {
    if (depth > 64) return ct__error_status(CT_ERR_IO, "datapipe file_lister: '%s' is nested too deeply", dir);
    DIR *d = opendir(dir);
    if (!d) return ct__error_status(CT_ERR_IO, "datapipe file_lister: cannot open directory '%s': %s", dir,
                                    strerror(errno));
    struct dirent *e;
    ct_status st = CT_OK;
    while (!st && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t ln = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(ln);
        if (!path) {
            st = ct__error_status(CT_ERR_OOM, "datapipe file_lister: out of memory");
            break;
        }
        snprintf(path, ln, "%s/%s", dir, e->d_name);
        struct stat sb, lb;
        if (lstat(path, &lb) != 0 || stat(path, &sb) != 0) {
            free(path); /* a dangling link or a file removed meanwhile */
            continue;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (s->recursive && !S_ISLNK(lb.st_mode)) st = walk(s, path, depth + 1);
            free(path);
        } else if (S_ISREG(sb.st_mode) && matches(s, e->d_name)) {
            if (s->npaths == s->cap) {
                int64_t nc = s->cap ? s->cap * 2 : 16;
                char **np = realloc(s->paths, sizeof *np * (size_t)nc);
                if (!np) {
                    free(path);
                    st = ct__error_status(CT_ERR_OOM, "datapipe file_lister: out of memory");
                    break;
                }
                s->paths = np;
                s->cap = nc;
            }
            s->paths[s->npaths++] = path;
        } else {
            free(path);
        }
    }
    closedir(d);
    return st;
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static ct_status lister_list(lister_self *s) {
    lister_clear(s);
    ct_status st = walk(s, s->root, 0);
    if (st) {
        lister_clear(s);
        return st;
    }
    qsort(s->paths, (size_t)s->npaths, sizeof *s->paths, cmp_str);
    s->listed = 1;
    return CT_OK;
}
static int lister_next(dp_node *n, ct_pipe_item **out) {
    SELF(lister_self);
    if (!s->listed && lister_list(s)) return -1;
    if (s->pos > s->npaths) {
        ct__error(CT_ERR_IO, "datapipe file_lister: restored position %" PRId64 " but '%s' now holds %" PRId64
                  " matching files", s->pos, s->root, s->npaths);
        return -1;
    }
    if (s->pos == s->npaths) return 0;
    *out = ct_pipe_item_str(s->paths[s->pos]);
    if (!*out) return -1;
    s->pos++;
    return 1;
}
static void lister_reset(dp_node *n) {
    SELF(lister_self);
    lister_clear(s);
    s->pos = 0;
}
static void lister_save(dp_node *n, dp_wbuf *w) { SELF(lister_self); dp_w_u64(w, (uint64_t)s->pos); }
static ct_status lister_restore(dp_node *n, dp_rbuf *r) {
    SELF(lister_self);
    ct_status st = dp_r_i64(r, &s->pos);
    if (!st && s->pos < 0) st = ct__error_status(CT_ERR_FORMAT, "datapipe state: negative file index");
    return st;
}
static void lister_free(dp_node *n) {
    SELF(lister_self);
    if (!s) return;
    lister_clear(s);
    for (int k = 0; k < s->nmasks; k++) free(s->masks[k]);
    free(s->masks);
    free(s->root);
    free(s);
}
static lister_self *lister_make(const char *root, char *const *masks, int nmasks, bool recursive) {
    lister_self *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->recursive = recursive;
    s->root = strdup(root);
    s->masks = calloc((size_t)nmasks + 1, sizeof *s->masks);
    int ok = s->root && s->masks;
    for (int k = 0; ok && k < nmasks; k++) ok = (s->masks[k] = strdup(masks[k])) != NULL, s->nmasks += ok;
    if (!ok) {
        ct_datapipe tmp = {.self = s};
        lister_free(&tmp);
        return NULL;
    }
    return s;
}
static ct_status lister_clone(dp_node *n, dp_node *c) {
    SELF(lister_self);
    lister_self *d = lister_make(s->root, s->masks, s->nmasks, s->recursive);
    if (!d) return ct__error_status(CT_ERR_OOM, "datapipe file_lister: out of memory");
    ((ct_datapipe *)c)->self = d;
    return CT_OK;
}
static const dp_vt lister_vt = {"file_lister", lister_next, lister_reset, lister_save, lister_restore,
                                lister_clone, lister_free, NULL, 0, 0};

ct_datapipe *ct_datapipe_file_lister(const char *root, const char *const *masks, int nmasks, bool recursive) {
    if (!root) return ct__error(CT_ERR_NULL, "datapipe_file_lister: root is NULL");
    if (nmasks < 0 || (nmasks && !masks))
        return ct__error(CT_ERR_ARG, "datapipe_file_lister: bad masks (%d)", nmasks);
    for (int k = 0; k < nmasks; k++)
        if (!masks[k]) return ct__error(CT_ERR_NULL, "datapipe_file_lister: mask %d is NULL", k);
    lister_self *s = lister_make(root, (char *const *)masks, nmasks, recursive);
    if (!s) return ct__error(CT_ERR_OOM, "datapipe_file_lister: out of memory");
    /* strip trailing slashes (but keep "/") so paths read root/name */
    size_t ln = strlen(s->root);
    while (ln > 1 && s->root[ln - 1] == '/') s->root[--ln] = 0;
    return dp_new(&lister_vt, s, NULL, 0);
}

/* ======================================================================
 * file_opener
 * ====================================================================== */
typedef struct { int64_t max_bytes, count; } opener_self;
static int opener_next(dp_node *n, ct_pipe_item **out) {
    SELF(opener_self);
    ct_pipe_item *x;
    int r = dp_next(NODE->src[0], &x);
    if (r <= 0) return r;
    if (x->kind != CT_PIPE_ITEM_STR) {
        ct_pipe_item_release(x);
        ct__error(CT_ERR_ARG, "datapipe file_opener: item %" PRId64 " is not a path string", s->count);
        return -1;
    }
    ct_pipe_item *c = read_file_item("file_opener", x->s, s->max_bytes);
    if (!c) {
        ct_pipe_item_release(x);
        return -1;
    }
    s->count++;
    *out = ct_pipe_item_tuple2(x, c);
    return *out ? 1 : -1;
}
static void opener_reset(dp_node *n) { SELF(opener_self); s->count = 0; }
static void opener_save(dp_node *n, dp_wbuf *w) { SELF(opener_self); dp_w_u64(w, (uint64_t)s->count); }
static ct_status opener_restore(dp_node *n, dp_rbuf *r) { SELF(opener_self); return dp_r_i64(r, &s->count); }
static ct_status opener_clone(dp_node *n, dp_node *c) {
    ((ct_datapipe *)c)->self = malloc(sizeof(opener_self));
    if (!((ct_datapipe *)c)->self) return ct__error_status(CT_ERR_OOM, "datapipe file_opener: out of memory");
    memcpy(((ct_datapipe *)c)->self, NODE->self, sizeof(opener_self));
    return CT_OK;
}
static const dp_vt opener_vt = {"file_opener", opener_next, opener_reset, opener_save, opener_restore,
                                opener_clone, NULL, NULL, 1, 0};
ct_datapipe *ct_datapipe_file_opener(ct_datapipe *src, int64_t max_bytes) {
    if (max_bytes < 0) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_file_opener: max_bytes must be >= 0, got %" PRId64, max_bytes);
    }
    opener_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_file_opener: out of memory");
    }
    s->max_bytes = max_bytes ? max_bytes : DEFAULT_MAX_BYTES;
    return dp_new(&opener_vt, s, &src, 1);
}

/* ======================================================================
 * line_reader and csv_parser: the current input, its text, an offset
 * ====================================================================== */
typedef struct {
    int csv;
    char delim;
    int skip;
    bool return_path;
    ct_pipe_item *input;   /* the source item: a path or (path, contents) */
    ct_pipe_item *path;    /* borrowed from input (or input itself) */
    ct_pipe_item *text;    /* a STR item with the contents (owned ref) */
    size_t off;
    int64_t line, records; /* 1-based line of off; records yielded/skipped in this file */
} text_self;

static void text_drop(text_self *s) {
    ct_pipe_item_release(s->input);
    ct_pipe_item_release(s->text);
    s->input = s->path = s->text = NULL;
    s->off = 0;
    s->line = 1;
    s->records = 0;
}
static const char *stage_name(text_self *s) { return s->csv ? "csv_parser" : "line_reader"; }

/* takes x */
static ct_status text_load(text_self *s, ct_pipe_item *x) {
    text_drop(s);
    s->input = x;
    if (x->kind == CT_PIPE_ITEM_STR) {
        s->path = x;
        s->text = read_file_item(stage_name(s), x->s, DEFAULT_MAX_BYTES);
        if (!s->text) return ct_last_error_code();
    } else if (x->kind == CT_PIPE_ITEM_TUPLE && x->n == 2 && x->xs[0]->kind == CT_PIPE_ITEM_STR &&
               x->xs[1]->kind == CT_PIPE_ITEM_STR) {
        s->path = x->xs[0];
        s->text = ct_pipe_item_retain(x->xs[1]);
    } else {
        return ct__error_status(CT_ERR_ARG, "datapipe %s: expected a path or a (path, contents) tuple",
                                stage_name(s));
    }
    return CT_OK;
}

static ct_pipe_item *with_path(text_self *s, ct_pipe_item *x) {
    if (!x) return NULL;
    if (s->csv && !s->return_path) return x;
    return ct_pipe_item_tuple2(ct_pipe_item_retain(s->path), x);
}

static ct_pipe_item *next_line(text_self *s) {
    const char *b = s->text->s;
    size_t len = s->text->s_len, a = s->off, e = a;
    while (e < len && b[e] != '\n') e++;
    s->off = e < len ? e + 1 : len;
    s->line++;
    size_t end = e;
    if (end > a && b[end - 1] == '\r') end--;
    return ct_pipe_item_bytes(b + a, end - a);
}

/* one CSV record from s->off; NULL + error on malformed input */
static ct_pipe_item *next_record(text_self *s) {
    const char *b = s->text->s;
    size_t len = s->text->s_len, i = s->off;
    int64_t line0 = s->line;
    size_t line_start = i;
    ct_pipe_item *rec = ct_pipe_item_list(NULL, 0);
    char *fb = NULL;
    size_t fn = 0, fcap = 0;
#define PUTC(c)                                                                              \
    do {                                                                                     \
        if (fn == fcap) {                                                                    \
            size_t nc = fcap ? fcap * 2 : 64;                                                \
            char *nb = realloc(fb, nc);                                                      \
            if (!nb) { ct__error(CT_ERR_OOM, "datapipe csv_parser: out of memory"); goto fail; } \
            fb = nb;                                                                         \
            fcap = nc;                                                                       \
        }                                                                                    \
        fb[fn++] = (c);                                                                      \
    } while (0)
    if (!rec) return NULL;
    if (i < len && (b[i] == '\n' || (b[i] == '\r' && i + 1 < len && b[i + 1] == '\n'))) {
        s->off = i + (b[i] == '\r' ? 2 : 1);
        s->line++;
        free(fb);
        return rec; /* an empty line: [] like Python's csv */
    }
    for (;;) {
        fn = 0;
        if (i < len && b[i] == '"') {
            size_t qcol = i - line_start + 1;
            int64_t qline = s->line;
            i++;
            for (;;) {
                if (i >= len) {
                    ct__error(CT_ERR_FORMAT, "datapipe csv_parser: %s:%" PRId64 ":%zu: unterminated quoted field",
                              s->path->s, qline, qcol);
                    goto fail;
                }
                if (b[i] == '"') {
                    if (i + 1 < len && b[i + 1] == '"') {
                        PUTC('"');
                        i += 2;
                        continue;
                    }
                    i++;
                    break;
                }
                if (b[i] == '\n') {
                    s->line++;
                    line_start = i + 1;
                }
                PUTC(b[i]);
                i++;
            }
            if (i < len && b[i] != s->delim && b[i] != '\n' && !(b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))) {
                ct__error(CT_ERR_FORMAT, "datapipe csv_parser: %s:%" PRId64 ":%zu: unexpected '%c' after a closing "
                          "quote", s->path->s, s->line, i - line_start + 1, b[i]);
                goto fail;
            }
        } else {
            while (i < len && b[i] != s->delim && b[i] != '\n' && !(b[i] == '\r' && (i + 1 == len || b[i + 1] == '\n'))) {
                PUTC(b[i]);
                i++;
            }
        }
        ct_pipe_item *f = ct_pipe_item_bytes(fn ? fb : "", fn);
        if (!f || ct_pipe_item_list_append(rec, f)) goto fail;
        if (i < len && b[i] == s->delim) {
            i++;
            continue;
        }
        if (i < len && b[i] == '\r') i++;
        if (i < len && b[i] == '\n') i++;
        break;
    }
#undef PUTC
    s->off = i;
    s->line++;
    free(fb);
    return rec;
fail:
    (void)line0;
    free(fb);
    ct_pipe_item_release(rec);
    return NULL;
}

static int text_next(dp_node *n, ct_pipe_item **out) {
    SELF(text_self);
    for (;;) {
        while (s->text && s->off < s->text->s_len) {
            ct_pipe_item *x = s->csv ? next_record(s) : next_line(s);
            if (!x) return -1;
            if (s->csv && s->records++ < s->skip) {
                ct_pipe_item_release(x);
                continue;
            }
            *out = with_path(s, x);
            return *out ? 1 : -1;
        }
        ct_pipe_item *x;
        int r = dp_next(NODE->src[0], &x);
        if (r <= 0) {
            if (r == 0) text_drop(s);
            return r;
        }
        if (text_load(s, x)) return -1;
    }
}
static void text_reset(dp_node *n) { SELF(text_self); text_drop(s); }
static void text_save(dp_node *n, dp_wbuf *w) {
    SELF(text_self);
    dp_w_item(w, s->input);
    dp_w_u64(w, s->off);
    dp_w_u64(w, (uint64_t)s->line);
    dp_w_u64(w, (uint64_t)s->records);
}
static ct_status text_restore(dp_node *n, dp_rbuf *r) {
    SELF(text_self);
    ct_pipe_item *x;
    uint64_t off;
    int64_t line, recs;
    ct_status st;
    if ((st = dp_r_item(r, &x))) return st;
    if ((st = dp_r_u64(r, &off)) || (st = dp_r_i64(r, &line)) || (st = dp_r_i64(r, &recs))) {
        ct_pipe_item_release(x);
        return st;
    }
    text_drop(s);
    if (!x) return CT_OK;
    if ((st = text_load(s, x))) return st;
    if (off > s->text->s_len || line < 1 || recs < 0)
        return ct__error_status(CT_ERR_FORMAT, "datapipe state: %s offset %" PRIu64 " is past the end of '%s' "
                                "(%zu bytes)", stage_name(s), off, s->path->s, s->text->s_len);
    s->off = (size_t)off;
    s->line = line;
    s->records = recs;
    return CT_OK;
}
static void text_free(dp_node *n) {
    SELF(text_self);
    if (s) text_drop(s);
    free(s);
}
static ct_status text_clone(dp_node *n, dp_node *c) {
    SELF(text_self);
    text_self *d = calloc(1, sizeof *d);
    if (!d) return ct__error_status(CT_ERR_OOM, "datapipe: out of memory");
    d->csv = s->csv;
    d->delim = s->delim;
    d->skip = s->skip;
    d->return_path = s->return_path;
    d->line = 1;
    ((ct_datapipe *)c)->self = d;
    return CT_OK;
}
static const dp_vt lines_vt = {"line_reader", text_next, text_reset, text_save, text_restore, text_clone,
                               text_free, NULL, 0, 0};
static const dp_vt csv_vt = {"csv_parser", text_next, text_reset, text_save, text_restore, text_clone,
                             text_free, NULL, 0, 0};

static ct_datapipe *text_pipe(const dp_vt *vt, ct_datapipe *src, int csv, char delim, int skip, bool rp) {
    text_self *s = calloc(1, sizeof *s);
    if (!s) {
        dp_free(src);
        return ct__error(CT_ERR_OOM, "datapipe_%s: out of memory", vt->name);
    }
    s->csv = csv;
    s->delim = delim;
    s->skip = skip;
    s->return_path = rp;
    s->line = 1;
    return dp_new(vt, s, &src, 1);
}
ct_datapipe *ct_datapipe_line_reader(ct_datapipe *src) { return text_pipe(&lines_vt, src, 0, 0, 0, true); }
ct_datapipe *ct_datapipe_csv_parser(ct_datapipe *src, char delimiter, int skip_lines, bool return_path) {
    if (skip_lines < 0 || delimiter == '"' || delimiter == '\n' || delimiter == '\r' || delimiter == 0) {
        dp_free(src);
        return ct__error(CT_ERR_ARG, "datapipe_csv_parser: bad delimiter (%d) or skip_lines (%d)", delimiter,
                         skip_lines);
    }
    return text_pipe(&csv_vt, src, 1, delimiter, skip_lines, return_path);
}
