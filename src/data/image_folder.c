/* image_folder.c -- torchvision.datasets.ImageFolder: root/<class>/.../<file>,
 * classes sorted by name, files found by a recursive walk sorted like
 * sorted(os.walk(...)) then by name, .png .jpg .jpeg (any case). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "transforms_impl.h"

#define IF_MAX_DEPTH 32

typedef struct { char *dir, *name; int label; } if_item;

#define IF_MAGIC 0x494d47464f4c4452ull /* "IMGFOLDR" */

typedef struct {
    uint64_t magic;
    char **classes;
    int nclasses;
    if_item *items;
    int64_t n, cap;
    char **paths;
    ct_transform *transform;
} image_folder;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static int cmp_item(const void *a, const void *b) {
    const if_item *x = a, *y = b;
    int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->name, y->name);
}

static bool has_ext(const char *name) {
    size_t n = strlen(name);
    static const char *exts[] = {".png", ".jpg", ".jpeg"};
    for (int i = 0; i < 3; i++) {
        size_t e = strlen(exts[i]);
        if (n >= e && strcasecmp(name + n - e, exts[i]) == 0) return true;
    }
    return false;
}

static char *join(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s) return NULL;
    memcpy(s, a, la);
    s[la] = '/';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

static void folder_free(void *self) {
    image_folder *f = self;
    if (!f) return;
    f->magic = 0;
    for (int i = 0; i < f->nclasses; i++) free(f->classes[i]);
    free(f->classes);
    for (int64_t i = 0; i < f->n; i++) { free(f->items[i].dir); free(f->items[i].name); free(f->paths[i]); }
    free(f->items);
    free(f->paths);
    ct_transform_free(f->transform);
    free(f);
}

static ct_status add_item(image_folder *f, const char *dir, const char *name, int label) {
    if (f->n == f->cap) {
        int64_t nc = f->cap ? f->cap * 2 : 64;
        if_item *ni = realloc(f->items, sizeof *ni * (size_t)nc);
        if (!ni) return ct__error_status(CT_ERR_OOM, "ImageFolder: out of memory");
        f->items = ni;
        f->cap = nc;
    }
    if_item *it = &f->items[f->n];
    it->dir = strdup(dir);
    it->name = strdup(name);
    it->label = label;
    if (!it->dir || !it->name) {
        free(it->dir); free(it->name);
        return ct__error_status(CT_ERR_OOM, "ImageFolder: out of memory");
    }
    f->n++;
    return CT_OK;
}

static ct_status walk(image_folder *f, const char *dir, int label, int depth) {
    if (depth > IF_MAX_DEPTH)
        return ct__error_status(CT_ERR_IO, "ImageFolder: %s: directories nested deeper than %d",
                                dir, IF_MAX_DEPTH);
    DIR *d = opendir(dir);
    if (!d) return ct__error_status(CT_ERR_IO, "ImageFolder: cannot list %s: %s", dir, strerror(errno));
    ct_status st = CT_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *path = join(dir, e->d_name);
        if (!path) { st = ct__error_status(CT_ERR_OOM, "ImageFolder: out of memory"); break; }
        struct stat sb;
        if (stat(path, &sb) == 0) { /* follows links, like os.walk(followlinks=True) */
            if (S_ISDIR(sb.st_mode)) st = walk(f, path, label, depth + 1);
            else if (S_ISREG(sb.st_mode) && has_ext(e->d_name)) st = add_item(f, dir, e->d_name, label);
        }
        free(path);
    }
    closedir(d);
    return st;
}

static int64_t folder_len(void *self) { return ((image_folder *)self)->n; }

static ct_status folder_get(void *self, int64_t index, ct_sample *out) {
    image_folder *f = self;
    const char *path = f->paths[index];
    ct_scope s = ct_scope_begin();
    ct_status st = CT_OK;
    size_t n = 0;
    void *buf = ct__read_file(path, &n);
    ct_tensor *img = NULL;
    if (buf) {
        img = ct__register(ct__image_decode_named(buf, n, CT_IMAGE_RGB, path));
        free(buf);
    }
    if (img && f->transform) img = ct_transform_apply(f->transform, img);
    ct_tensor *label = img ? ct_full_on(NULL, 0, (double)f->items[index].label, CT_I64, CT_CPU) : NULL;
    if (!img || !label) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        ct_status code = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
        st = ct__error_status(code, "ImageFolder: sample %lld (%s): %s", (long long)index, path, msg);
    } else {
        st = ct_sample_set(out, "image", img);
        if (!st) st = ct_sample_set(out, "label", label);
    }
    ct_scope_end(s);
    return st;
}

static const ct_dataset_vtable folder_vt = {.len = folder_len, .get = folder_get, .free = folder_free};

ct_dataset *ct_image_folder_new(const char *root, ct_transform *transform) {
    if (!root) { ct_transform_free(transform); return ct__error(CT_ERR_NULL, "ImageFolder: root is NULL"); }
    image_folder *f = calloc(1, sizeof *f);
    if (!f) { ct_transform_free(transform); return ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); }
    f->transform = transform;
    f->magic = IF_MAGIC;
    DIR *d = opendir(root);
    if (!d) {
        ct__error(CT_ERR_IO, "ImageFolder: cannot list %s: %s", root, strerror(errno));
        goto fail;
    }
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *path = join(root, e->d_name);
        struct stat sb;
        bool isdir = path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(path);
        if (!isdir) continue;
        if (f->nclasses == cap) {
            cap = cap ? cap * 2 : 16;
            char **nc = realloc(f->classes, sizeof *nc * (size_t)cap);
            if (!nc) { closedir(d); ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); goto fail; }
            f->classes = nc;
        }
        if (!(f->classes[f->nclasses] = strdup(e->d_name))) {
            closedir(d); ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); goto fail;
        }
        f->nclasses++;
    }
    closedir(d);
    if (f->nclasses == 0) { ct__error(CT_ERR_ARG, "ImageFolder: couldn't find any class folder in %s", root); goto fail; }
    qsort(f->classes, (size_t)f->nclasses, sizeof *f->classes, cmp_str);
    for (int c = 0; c < f->nclasses; c++) {
        char *dir = join(root, f->classes[c]);
        if (!dir) { ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); goto fail; }
        int64_t before = f->n;
        ct_status st = walk(f, dir, c, 0);
        free(dir);
        if (st) goto fail;
        if (f->n > before)
            qsort(f->items + before, (size_t)(f->n - before), sizeof *f->items, cmp_item);
        if (f->n == before) {
            ct__error(CT_ERR_ARG, "ImageFolder: found no valid file for the class %s in %s "
                      "(supported extensions: .png .jpg .jpeg)", f->classes[c], root);
            goto fail;
        }
    }
    f->paths = calloc((size_t)f->n, sizeof *f->paths);
    if (!f->paths) { ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); goto fail; }
    for (int64_t i = 0; i < f->n; i++)
        if (!(f->paths[i] = join(f->items[i].dir, f->items[i].name))) {
            ct__error(CT_ERR_OOM, "ImageFolder: out of memory"); goto fail;
        }
    ct_dataset *ds = ct_dataset_new(&folder_vt, f);
    if (!ds) goto fail;
    return ds;
fail:
    folder_free(f);
    return NULL;
}

static image_folder *as_folder(ct_dataset *d) {
    if (!d) return ct__error(CT_ERR_NULL, "ImageFolder: dataset is NULL");
    image_folder *f = ct_dataset_self(d);
    /* ImageFolder objects start with a magic number; a dataset made by
     * ct_dataset_new from user callbacks has its own self */
    if (!f || f->magic != IF_MAGIC)
        return ct__error(CT_ERR_ARG, "ImageFolder: the dataset is not an ImageFolder");
    return f;
}

int ct_image_folder_num_classes(ct_dataset *d) {
    image_folder *f = as_folder(d);
    return f ? f->nclasses : -1;
}
const char *ct_image_folder_class_name(ct_dataset *d, int i) {
    image_folder *f = as_folder(d);
    if (!f) return NULL;
    if (i < 0 || i >= f->nclasses)
        return ct__error(CT_ERR_INDEX, "ImageFolder: class %d out of range [0, %d)", i, f->nclasses);
    return f->classes[i];
}
const char *ct_image_folder_path(ct_dataset *d, int64_t i) {
    image_folder *f = as_folder(d);
    if (!f) return NULL;
    if (i < 0 || i >= f->n)
        return ct__error(CT_ERR_INDEX, "ImageFolder: sample %lld out of range [0, %lld)", (long long)i,
                         (long long)f->n);
    return f->paths[i];
}
