/* sample.c -- samples (ordered name -> tensor maps) and the dataset object. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/op_table.h"
#include "ctorch/data.h"

struct ct_sample {
    int n, cap;
    char **names;
    ct_tensor **ts;
};

ct_sample *ct_sample_new(void) {
    ct_sample *s = calloc(1, sizeof *s);
    if (!s) ct__error(CT_ERR_OOM, "sample_new: out of memory");
    return s;
}

void ct_sample_clear(ct_sample *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->names[i]);
        ct_release(s->ts[i]);
    }
    s->n = 0;
}

void ct_sample_free(ct_sample *s) {
    if (!s) return;
    ct_sample_clear(s);
    free(s->names);
    free(s->ts);
    free(s);
}

ct_status ct_sample_set(ct_sample *s, const char *name, ct_tensor *t) {
    if (!s || !name) return ct__error_status(CT_ERR_NULL, "sample_set: sample or name is NULL");
    if (!t) return ct_last_error_code() ? ct_last_error_code()
                                        : ct__error_status(CT_ERR_NULL, "sample_set: tensor '%s' is NULL", name);
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            ct_retain(t);
            ct_release(s->ts[i]);
            s->ts[i] = t;
            return CT_OK;
        }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 4;
        char **nn = realloc(s->names, sizeof *nn * (size_t)nc);
        if (!nn) return ct__error_status(CT_ERR_OOM, "sample_set: out of memory");
        s->names = nn;
        ct_tensor **nt = realloc(s->ts, sizeof *nt * (size_t)nc);
        if (!nt) return ct__error_status(CT_ERR_OOM, "sample_set: out of memory");
        s->ts = nt;
        s->cap = nc;
    }
    s->names[s->n] = strdup(name);
    if (!s->names[s->n]) return ct__error_status(CT_ERR_OOM, "sample_set: out of memory");
    s->ts[s->n++] = ct_retain(t);
    return CT_OK;
}

ct_tensor *ct_sample_get(const ct_sample *s, const char *name) {
    if (!s || !name) return NULL;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) return s->ts[i];
    return NULL;
}
int ct_sample_count(const ct_sample *s) { return s ? s->n : 0; }
const char *ct_sample_name(const ct_sample *s, int i) { return s && i >= 0 && i < s->n ? s->names[i] : NULL; }
ct_tensor *ct_sample_at(const ct_sample *s, int i) { return s && i >= 0 && i < s->n ? s->ts[i] : NULL; }

/* ---- datasets ------------------------------------------------------------ */
struct ct_dataset {
    atomic_long refcount;
    const ct_dataset_vtable *vt;
    void *self;
};

ct_dataset *ct_dataset_new(const ct_dataset_vtable *vt, void *self) {
    if (!vt) return ct__error(CT_ERR_NULL, "dataset_new: vtable is NULL");
    bool map = vt->len && vt->get, iter = vt->iter_begin && vt->iter_next;
    if (!map && !iter)
        return ct__error(CT_ERR_ARG, "dataset_new: a dataset needs len+get (map-style) or "
                         "iter_begin+iter_next (iterable)");
    ct_dataset *d = calloc(1, sizeof *d);
    if (!d) return ct__error(CT_ERR_OOM, "dataset_new: out of memory");
    atomic_init(&d->refcount, 1);
    d->vt = vt;
    d->self = self;
    return d;
}

ct_dataset *ct_dataset_retain(ct_dataset *d) {
    if (d) atomic_fetch_add(&d->refcount, 1);
    return d;
}

void ct_dataset_release(ct_dataset *d) {
    if (!d || atomic_fetch_sub(&d->refcount, 1) != 1) return;
    if (d->vt->free) d->vt->free(d->self);
    free(d);
}

const ct_dataset_vtable *ct__dataset_vt(ct_dataset *d) { return d ? d->vt : NULL; }

bool ct_dataset_is_iterable(const ct_dataset *d) { return d && !(d->vt->len && d->vt->get); }
void *ct_dataset_self(ct_dataset *d) { return d ? d->self : NULL; }

int64_t ct_dataset_len(ct_dataset *d) {
    if (!d) { ct__error(CT_ERR_NULL, "dataset_len: dataset is NULL"); return -1; }
    if (!d->vt->len) { ct__error(CT_ERR_ARG, "dataset_len: this iterable dataset has no length"); return -1; }
    unsigned long errs = ct__error_count();
    int64_t n = d->vt->len(d->self);
    /* a len() that fails without saying why (or is just wrong) */
    if (n < 0 && ct__error_count() == errs)
        ct__error(CT_ERR_ARG, "dataset_len: the dataset's len() returned %lld (a length must be >= 0)", (long long)n);
    return n < 0 ? -1 : n;
}

ct_status ct_dataset_get(ct_dataset *d, int64_t index, ct_sample *out) {
    if (!d || !out) return ct__error_status(CT_ERR_NULL, "dataset_get: dataset or sample is NULL");
    if (!d->vt->get) return ct__error_status(CT_ERR_ARG, "dataset_get: an iterable dataset has no get()");
    int64_t n = d->vt->len(d->self);
    if (index < 0 || index >= n)
        return ct__error_status(CT_ERR_INDEX, "dataset_get: index %lld out of range for a dataset of "
                                "length %lld", (long long)index, (long long)n);
    ct_sample_clear(out);
    ct_status st = d->vt->get(d->self, index, out);
    if (st) {
        if (ct_last_error_code() == CT_OK)
            ct__error(st, "dataset_get: the dataset's get() failed for index %lld", (long long)index);
        return ct_last_error_code();
    }
    return CT_OK;
}
