/* module.c -- the module object: registration of parameters, buffers and
 * children by name; train/eval; named_parameters; state dicts; PyTorch's
 * repr; functional_call; and the containers. */
#include <stdio.h>

#include "../autograd/autograd_impl.h"
#include "../core/device.h"
#include "ctorch/nn.h"

/* init: for buffers whose values a state dict does not carry (non-persistent
 * ones), how to compute them again when ct_module_to brings them from meta */
typedef struct slot { char *name; ct_tensor *t; bool persistent; ct_status (*init)(ct_tensor *t); } slot;
typedef struct child { char *name; ct_module *m; } child;

struct ct_module_impl {
    atomic_long refcount;
    bool training;
    slot *params, *bufs;
    int np, nb, capp, capb;
    child *kids;
    int nk, capk;
    /* full names returned by named_parameters / named_buffers / state_dict,
     * one cache per kind, replaced only when the names change */
    char **names[3];
    int nnames[3];
    /* ct_module_compile's forward (src/compile/compile.c), or NULL */
    ct_tensor *(*fwd)(void *ctx, ct_module *m, ct_tensor *const *in, int n);
    void *fwd_ctx;
    void (*fwd_free)(void *ctx);
};

void ct__module_set_forward(ct_module *m, ct_tensor *(*fwd)(void *, ct_module *, ct_tensor *const *, int),
                            void *ctx, void (*free_ctx)(void *)) {
    if (m->impl->fwd_free) m->impl->fwd_free(m->impl->fwd_ctx);
    m->impl->fwd = fwd;
    m->impl->fwd_ctx = fwd ? ctx : NULL;
    m->impl->fwd_free = fwd ? free_ctx : NULL;
}

void *ct__module_get_forward(ct_module *m) { return m && m->impl->fwd ? m->impl->fwd_ctx : NULL; }

/* ---- functional_call substitutions (thread-local) -------------------- */
typedef struct { ct_module *m; int kind; int slot; ct_tensor *t; } subst;
static _Thread_local subst *tl_subst;
static _Thread_local int tl_nsubst;

ct_module *ct_module_new(const ct_module_class *cls) {
    if (!cls) return ct__error(CT_ERR_NULL, "module_new: class is NULL");
    size_t sz = cls->size < sizeof(ct_module) ? sizeof(ct_module) : cls->size;
    ct_module *m = calloc(1, sz);
    if (!m) return ct__error(CT_ERR_OOM, "module_new: out of memory");
    m->impl = calloc(1, sizeof *m->impl);
    if (!m->impl) { free(m); return ct__error(CT_ERR_OOM, "module_new: out of memory"); }
    m->cls = cls;
    atomic_init(&m->impl->refcount, 1);
    m->impl->training = true;
    return m;
}

ct_module *ct_module_retain(ct_module *m) {
    if (m) atomic_fetch_add(&m->impl->refcount, 1);
    return m;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static void free_names(ct_module_impl *im) {
    for (int k = 0; k < 3; k++) {
        free_list(im->names[k], im->nnames[k]);
        im->names[k] = NULL;
        im->nnames[k] = 0;
    }
}

void ct_module_release(ct_module *m) {
    if (!m || atomic_fetch_sub(&m->impl->refcount, 1) != 1) return;
    if (m->impl->fwd_free) m->impl->fwd_free(m->impl->fwd_ctx);
    if (m->cls->destroy) m->cls->destroy(m);
    ct_module_impl *im = m->impl;
    for (int i = 0; i < im->np; i++) { free(im->params[i].name); ct_release(im->params[i].t); }
    for (int i = 0; i < im->nb; i++) { free(im->bufs[i].name); ct_release(im->bufs[i].t); }
    for (int i = 0; i < im->nk; i++) { free(im->kids[i].name); ct_module_release(im->kids[i].m); }
    free(im->params);
    free(im->bufs);
    free(im->kids);
    free_names(im);
    free(im);
    free(m);
}

static int valid_name(const char *what, const char *name) {
    if (!name || !*name || strchr(name, '.')) {
        ct__error(CT_ERR_ARG, "%s: name '%s' must be non-empty and cannot contain \".\"", what,
                  name ? name : "(null)");
        return 0;
    }
    return 1;
}

static int name_taken(ct_module_impl *im, const char *name) {
    for (int i = 0; i < im->np; i++) if (!strcmp(im->params[i].name, name)) return 1;
    for (int i = 0; i < im->nb; i++) if (!strcmp(im->bufs[i].name, name)) return 1;
    for (int i = 0; i < im->nk; i++) if (!strcmp(im->kids[i].name, name)) return 1;
    return 0;
}

static int grow(void **arr, int *cap, int n, size_t es) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 4;
    void *na = realloc(*arr, es * (size_t)nc);
    if (!na) return -1;
    *arr = na;
    *cap = nc;
    return 0;
}

int ct_module_register_parameter(ct_module *m, const char *name, ct_tensor *t) {
    if (!m) { ct__error(CT_ERR_NULL, "register_parameter: module is NULL"); return -1; }
    if (!valid_name("register_parameter", name)) return -1;
    ct_module_impl *im = m->impl;
    if (name_taken(im, name)) { ct__error(CT_ERR_ARG, "register_parameter: attribute '%s' already exists", name); return -1; }
    if (t && !(ct_dtype_is_floating(ct_get_dtype(t)) || ct_dtype_is_complex(ct_get_dtype(t)))) {
        ct__error(CT_ERR_DTYPE, "register_parameter: parameter '%s' must be floating point or complex (got %s)",
                  name, ct_dtype_name(ct_get_dtype(t)));
        return -1;
    }
    if (t && !ct_is_leaf(t)) {
        ct__error(CT_ERR_ARG, "register_parameter: cannot assign non-leaf tensor to parameter '%s'. "
                  "Model parameters must be created explicitly (use ct_detach)", name);
        return -1;
    }
    if (grow((void **)&im->params, &im->capp, im->np, sizeof(slot))) { ct__error(CT_ERR_OOM, "register_parameter: out of memory"); return -1; }
    char *nm = strdup(name);
    if (!nm) { ct__error(CT_ERR_OOM, "register_parameter: out of memory"); return -1; }
    if (t && ct_set_requires_grad(t, true)) { free(nm); return -1; }
    im->params[im->np] = (slot){nm, ct_retain(t), true, NULL};
    return im->np++;
}

int ct_module_register_buffer(ct_module *m, const char *name, ct_tensor *t, bool persistent) {
    if (!m) { ct__error(CT_ERR_NULL, "register_buffer: module is NULL"); return -1; }
    if (!valid_name("register_buffer", name)) return -1;
    ct_module_impl *im = m->impl;
    if (name_taken(im, name)) { ct__error(CT_ERR_ARG, "register_buffer: attribute '%s' already exists", name); return -1; }
    if (grow((void **)&im->bufs, &im->capb, im->nb, sizeof(slot))) { ct__error(CT_ERR_OOM, "register_buffer: out of memory"); return -1; }
    char *nm = strdup(name);
    if (!nm) { ct__error(CT_ERR_OOM, "register_buffer: out of memory"); return -1; }
    im->bufs[im->nb] = (slot){nm, ct_retain(t), persistent, NULL};
    return im->nb++;
}

int ct_module_register_module(ct_module *m, const char *name, ct_module *c) {
    if (!m || !c) { ct__error(CT_ERR_NULL, "register_module: module is NULL"); return -1; }
    if (!valid_name("register_module", name)) return -1;
    ct_module_impl *im = m->impl;
    if (name_taken(im, name)) { ct__error(CT_ERR_ARG, "register_module: attribute '%s' already exists", name); return -1; }
    if (grow((void **)&im->kids, &im->capk, im->nk, sizeof(child))) { ct__error(CT_ERR_OOM, "register_module: out of memory"); return -1; }
    char *nm = strdup(name);
    if (!nm) { ct__error(CT_ERR_OOM, "register_module: out of memory"); return -1; }
    im->kids[im->nk] = (child){nm, ct_module_retain(c)};
    c->impl->training = im->training;
    return im->nk++;
}

static ct_tensor *lookup(ct_module *m, int kind, int slot_i) {
    for (int i = tl_nsubst - 1; i >= 0; i--)
        if (tl_subst[i].m == m && tl_subst[i].kind == kind && tl_subst[i].slot == slot_i) return tl_subst[i].t;
    return NULL;
}

ct_tensor *ct_module_param(ct_module *m, int s) {
    if (!m || s < 0 || s >= m->impl->np) return ct__error(CT_ERR_INDEX, "module_param: no parameter slot %d", s);
    if (tl_nsubst) { ct_tensor *t = lookup(m, 0, s); if (t) return t; }
    return m->impl->params[s].t;
}

ct_tensor *ct_module_buffer(ct_module *m, int s) {
    if (!m || s < 0 || s >= m->impl->nb) return ct__error(CT_ERR_INDEX, "module_buffer: no buffer slot %d", s);
    if (tl_nsubst) { ct_tensor *t = lookup(m, 1, s); if (t) return t; }
    return m->impl->bufs[s].t;
}

ct_status ct_module_set_param(ct_module *m, int s, ct_tensor *t) {
    if (!m || s < 0 || s >= m->impl->np) return ct__error_status(CT_ERR_INDEX, "module_set_param: no parameter slot %d", s);
    if (t && ct_set_requires_grad(t, true)) return ct_last_error_code();
    ct_retain(t);
    ct_release(m->impl->params[s].t);
    m->impl->params[s].t = t;
    return CT_OK;
}

ct_status ct_module_set_buffer(ct_module *m, int s, ct_tensor *t) {
    if (!m || s < 0 || s >= m->impl->nb) return ct__error_status(CT_ERR_INDEX, "module_set_buffer: no buffer slot %d", s);
    ct_retain(t);
    ct_release(m->impl->bufs[s].t);
    m->impl->bufs[s].t = t;
    return CT_OK;
}

int ct_module_num_children(const ct_module *m) { return m ? m->impl->nk : 0; }
ct_module *ct_module_child(const ct_module *m, int i) {
    return m && i >= 0 && i < m->impl->nk ? m->impl->kids[i].m : NULL;
}
const char *ct_module_child_name(const ct_module *m, int i) {
    return m && i >= 0 && i < m->impl->nk ? m->impl->kids[i].name : NULL;
}
const char *ct_module_class_name(const ct_module *m) { return m ? m->cls->name : NULL; }

ct_module *ct_module_get_submodule(ct_module *m, const char *path) {
    if (!m || !path) return NULL;
    if (!*path) return m;
    const char *dot = strchr(path, '.');
    size_t len = dot ? (size_t)(dot - path) : strlen(path);
    for (int i = 0; i < m->impl->nk; i++)
        if (strlen(m->impl->kids[i].name) == len && !strncmp(m->impl->kids[i].name, path, len))
            return dot ? ct_module_get_submodule(m->impl->kids[i].m, dot + 1) : m->impl->kids[i].m;
    return NULL;
}

/* ---- forward, train/eval ------------------------------------------------- */
#define CT_MODULE_MAX_OUT 16
ct_tensor *ct_module_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (!m) return ct__error(CT_ERR_NULL, "module_forward: module is NULL");
    for (int i = 0; i < n; i++)
        if (!in[i]) return ct__null_arg("module_forward", "input %d of the %s module", i, m->cls->name);
    if (m->impl->fwd) return m->impl->fwd(m->impl->fwd_ctx, m, in, n); /* compiled */
    /* the module's temporaries die with its forward, except what autograd
     * saved for backward (and the result) */
    if (m->cls->forward) {
        ct_scope s = ct_scope_begin();
        ct_tensor *r = ct_keep(m->cls->forward(m, in, n));
        ct_scope_end(s);
        return r;
    }
    if (m->cls->forward_multi) {
        ct_tensor *out[8] = {0};
        ct_scope s = ct_scope_begin();
        ct_tensor *r = m->cls->forward_multi(m, in, n, out, 1) ? NULL : ct_keep(out[0]);
        ct_scope_end(s);
        return r;
    }
    return ct__error(CT_ERR_ARG, "module_forward: %s has no forward", m->cls->name);
}

ct_tensor *ct_module_forward1(ct_module *m, ct_tensor *x) { return ct_module_forward(m, &x, 1); }

ct_status ct_module_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **out, int nout) {
    if (!m || !out) return ct__error_status(CT_ERR_NULL, "module_forward_multi: NULL argument");
    for (int i = 0; i < n; i++)
        if (!in[i])
            return ct__null_arg_status("module_forward_multi", "input %d of the %s module", i, m->cls->name);
    if (m->cls->forward_multi) {
        /* as ct_module_forward: the module's temporaries die here, the
         * outputs are kept.  They are written to outputs only on success
         * (a module checks nout itself: outputs may be shorter than a
         * wrong nout says). */
        ct_tensor *tmp[CT_MODULE_MAX_OUT] = {0};
        ct_tensor **o = nout > 0 && nout <= CT_MODULE_MAX_OUT ? tmp : out;
        ct_scope s = ct_scope_begin();
        ct_status st = m->cls->forward_multi(m, in, n, o, nout);
        if (!st)
            for (int i = 0; i < nout; i++) out[i] = ct_keep(o[i]);
        ct_scope_end(s);
        return st;
    }
    if (nout != 1) return ct__error_status(CT_ERR_ARG, "module_forward_multi: %s has one output", m->cls->name);
    out[0] = ct_module_forward(m, in, n);
    return out[0] ? CT_OK : ct_last_error_code();
}

void ct_module_train(ct_module *m, bool mode) {
    if (!m) return;
    m->impl->training = mode;
    for (int i = 0; i < m->impl->nk; i++) ct_module_train(m->impl->kids[i].m, mode);
}
void ct_module_eval(ct_module *m) { ct_module_train(m, false); }
bool ct_module_is_training(const ct_module *m) { return m && m->impl->training; }

void ct_module_zero_grad(ct_module *m) {
    if (!m) return;
    for (int i = 0; i < m->impl->np; i++) ct_zero_grad(m->impl->params[i].t);
    for (int i = 0; i < m->impl->nk; i++) ct_module_zero_grad(m->impl->kids[i].m);
}

ct_status ct_module_apply(ct_module *m, ct_status (*fn)(ct_module *, void *), void *user) {
    if (!m || !fn) return ct__error_status(CT_ERR_NULL, "module_apply: NULL argument");
    for (int i = 0; i < m->impl->nk; i++) {
        ct_status st = ct_module_apply(m->impl->kids[i].m, fn, user);
        if (st) return st;
    }
    return fn(m, user);
}

/* ---- walking the tree ------------------------------------------------------ */
typedef struct {
    int kind;            /* 0 params, 1 buffers, 2 state dict */
    const char **names;
    ct_tensor **ts;
    int cap, n;
    ct_tensor **seen;
    int nseen, capseen;
    char **fresh;        /* names built by this walk */
    int nfresh;
    int oom;
} walk;

static int seen_before(walk *w, ct_tensor *t) {
    for (int i = 0; i < w->nseen; i++) if (w->seen[i] == t) return 1;
    if (grow((void **)&w->seen, &w->capseen, w->nseen, sizeof(ct_tensor *))) { w->oom = 1; return 1; }
    w->seen[w->nseen++] = t;
    return 0;
}

static void emit(walk *w, const char *prefix, const char *name, ct_tensor *t) {
    if (w->kind != 2 && seen_before(w, t)) return;
    if (w->n < w->cap) {
        char *full = malloc(strlen(prefix) + strlen(name) + 1);
        if (!full) { w->oom = 1; return; }
        sprintf(full, "%s%s", prefix, name);
        char **nn = realloc(w->fresh, sizeof(char *) * (size_t)(w->nfresh + 1));
        if (!nn) { free(full); w->oom = 1; return; }
        w->fresh = nn;
        w->fresh[w->nfresh++] = full;
        if (w->ts) w->ts[w->n] = t;
    }
    w->n++;
}

static void walk_module(walk *w, ct_module *m, const char *prefix) {
    ct_module_impl *im = m->impl;
    if (w->kind == 0 || w->kind == 2)
        for (int i = 0; i < im->np; i++)
            if (im->params[i].t) emit(w, prefix, im->params[i].name, im->params[i].t);
    if (w->kind == 1 || w->kind == 2)
        for (int i = 0; i < im->nb; i++)
            if (im->bufs[i].t && (w->kind == 1 || im->bufs[i].persistent))
                emit(w, prefix, im->bufs[i].name, im->bufs[i].t);
    for (int i = 0; i < im->nk; i++) {
        size_t L = strlen(prefix) + strlen(im->kids[i].name) + 2;
        char *p = malloc(L);
        if (!p) { w->oom = 1; return; }
        snprintf(p, L, "%s%s.", prefix, im->kids[i].name);
        walk_module(w, im->kids[i].m, p);
        free(p);
    }
}

/* Names handed out stay valid until the module's structure changes (a
 * later walk that produces different names) or the module is freed. */
static int run_walk(ct_module *m, int kind, const char **names, ct_tensor **ts, int cap) {
    if (!m) { ct__error(CT_ERR_NULL, "module: NULL"); return -1; }
    walk w = {kind, names, ts, cap, 0, NULL, 0, 0, NULL, 0, 0};
    walk_module(&w, m, "");
    free(w.seen);
    if (w.oom) {
        free_list(w.fresh, w.nfresh);
        ct__error(CT_ERR_OOM, "module: out of memory");
        return -1;
    }
    ct_module_impl *im = m->impl;
    int same = im->nnames[kind] == w.nfresh;
    for (int i = 0; same && i < w.nfresh; i++) same = !strcmp(im->names[kind][i], w.fresh[i]);
    if (same) free_list(w.fresh, w.nfresh);
    else {
        free_list(im->names[kind], im->nnames[kind]);
        im->names[kind] = w.fresh;
        im->nnames[kind] = w.nfresh;
    }
    if (names)
        for (int i = 0; i < w.nfresh; i++) names[i] = im->names[kind][i];
    return w.n;
}

int ct_module_named_parameters(ct_module *m, const char **names, ct_tensor **ps, int cap) {
    return run_walk(m, 0, names, ps, cap);
}
int ct_module_named_buffers(ct_module *m, const char **names, ct_tensor **bs, int cap) {
    return run_walk(m, 1, names, bs, cap);
}

/* nn.Module.to(device) / to_empty(device): every parameter, buffer and
 * gradient moves in place (the handles the module and its users hold stay
 * valid; a tensor shared by two modules moves once).  From meta the new
 * storage is uninitialized, like to_empty, except buffers registered with an
 * init function (ct__module_buffer_init), which are computed again. */
static ct_status module_to(ct_module *m, ct_device dev) {
    ct_module_impl *im = m->impl;
    ct_status st = CT_OK;
    for (int i = 0; i < im->np && !st; i++) {
        ct_tensor *t = im->params[i].t;
        if (!t) continue;
        st = ct__tensor_move_to(t, dev);
        ct_tensor *g = st ? NULL : ct_grad(t);
        if (g) st = ct__tensor_move_to(g, dev);
    }
    for (int i = 0; i < im->nb && !st; i++) {
        ct_tensor *t = im->bufs[i].t;
        if (!t) continue;
        bool from_meta = ct_get_device(t) == CT_META && dev != CT_META;
        st = ct__tensor_move_to(t, dev);
        if (!st && from_meta && im->bufs[i].init) st = im->bufs[i].init(t);
    }
    for (int k = 0; k < im->nk && !st; k++)
        if (im->kids[k].m) st = module_to(im->kids[k].m, dev);
    return st;
}

ct_status ct_module_to(ct_module *m, ct_device dev) {
    if (!m) return ct__null_arg_status("module_to", "argument 'm'");
    ct_status st = ct__device_check("module_to", dev, 0);
    if (st) return st;
    return module_to(m, dev);
}

ct_status ct_module_to_dev(ct_module *m, ct_dev dev) {
    if (!m) return ct__null_arg_status("module_to", "argument 'm'");
    ct_status st = ct__device_check("module_to", dev.type, dev.index);
    if (st) return st;
    ct__device_set_current(dev.type, dev.index); /* where module_to allocates */
    return module_to(m, dev.type);
}

ct_status ct__module_buffer_init(ct_module *m, int slot, ct_status (*init)(ct_tensor *t)) {
    if (!m || slot < 0 || slot >= m->impl->nb)
        return ct__error_status(CT_ERR_ARG, "module: no buffer slot %d", slot);
    m->impl->bufs[slot].init = init;
    return CT_OK;
}

int64_t ct_module_num_parameters(ct_module *m, bool trainable_only) {
    int n = run_walk(m, 0, NULL, NULL, 0);
    if (n < 0) return -1;
    ct_tensor **ps = malloc(sizeof(ct_tensor *) * (size_t)(n ? n : 1));
    if (!ps) { ct__error(CT_ERR_OOM, "num_parameters: out of memory"); return -1; }
    run_walk(m, 0, NULL, ps, n);
    int64_t total = 0;
    for (int i = 0; i < n; i++)
        if (!trainable_only || ct_requires_grad(ps[i])) total += ct_numel(ps[i]);
    free(ps);
    return total;
}

ct_sample *ct_module_state_dict(ct_module *m) {
    int n = run_walk(m, 2, NULL, NULL, 0);
    if (n < 0) return NULL;
    const char **names = malloc(sizeof(char *) * (size_t)(n ? n : 1));
    ct_tensor **ts = malloc(sizeof(ct_tensor *) * (size_t)(n ? n : 1));
    ct_sample *sd = ct_sample_new();
    if (!names || !ts || !sd) { free(names); free(ts); ct_sample_free(sd); return ct__error(CT_ERR_OOM, "state_dict: out of memory"); }
    run_walk(m, 2, names, ts, n);
    for (int i = 0; i < n; i++)
        if (ct_sample_set(sd, names[i], ts[i])) { ct_sample_free(sd); sd = NULL; break; }
    free(names);
    free(ts);
    return sd;
}

/* One line like torch's load_state_dict error: "Error(s) in loading
 * state_dict for Linear: Missing key(s) in state_dict: "a", "b"; Unexpected
 * key(s) in state_dict: "c"; size mismatch for weight: copying a param with
 * shape [4] from checkpoint, the shape in current model is [3, 4]."  Long
 * lists are cut with "... (N more)" to fit the error buffer. */
#define SD_LIST_CHARS 240
#define SD_MAX_MISMATCH 3

static void sd_keys(ct_sbuf *b, bool *first, const char *what, const ct_sample *from, const ct_sample *in) {
    int n = 0, shown = 0;
    size_t start = 0;
    for (int i = 0; i < ct_sample_count(from); i++) {
        const char *k = ct_sample_name(from, i);
        if (ct_sample_get(in, k)) continue;
        if (n == 0) {
            ct__sbuf_put(b, "%s%s key(s) in state_dict: ", *first ? "" : "; ", what);
            *first = false;
            start = b->n;
        }
        n++;
        if (b->n - start < SD_LIST_CHARS) {
            ct__sbuf_put(b, "%s\"%s\"", shown ? ", " : "", k);
            shown++;
        }
    }
    if (n > shown) ct__sbuf_put(b, ", ... (%d more)", n - shown);
}

ct_status ct_module_load_state_dict(ct_module *m, const ct_sample *sd, bool strict) {
    if (!m || !sd) return ct__error_status(CT_ERR_NULL, "load_state_dict: NULL argument");
    ct_sample *own = ct_module_state_dict(m);
    if (!own) return ct_last_error_code();
    ct_status st = CT_OK;
    ct_sbuf b = {0};
    bool first = true;
    ct__sbuf_put(&b, "Error(s) in loading state_dict for %s: ", m->cls->name);
    if (strict) {
        sd_keys(&b, &first, "Missing", own, sd);
        sd_keys(&b, &first, "Unexpected", sd, own);
    }
    bool key_errors = !first;
    /* every shape is checked first, so a failed load changes nothing */
    int nmis = 0;
    for (int i = 0; i < ct_sample_count(own); i++) {
        ct_tensor *dst = ct_sample_at(own, i), *src = ct_sample_get(sd, ct_sample_name(own, i));
        if (!src) continue;
        if (ct_ndim(src) == ct_ndim(dst) &&
            !memcmp(ct_sizes(src), ct_sizes(dst), sizeof(int64_t) * (size_t)ct_ndim(dst)))
            continue;
        if (nmis++ < SD_MAX_MISMATCH) {
            ct__sbuf_put(&b, "%ssize mismatch for %s: copying a param with shape %s from checkpoint, the shape "
                         "in current model is %s", first ? "" : "; ", ct_sample_name(own, i), ct__tshape(src),
                         ct__tshape(dst));
            first = false;
        }
    }
    if (nmis > SD_MAX_MISMATCH) ct__sbuf_put(&b, "; and %d more size mismatches", nmis - SD_MAX_MISMATCH);
    if (!first) {
        ct__sbuf_put(&b, ".");
        ct_status code = key_errors ? CT_ERR_ARG : CT_ERR_SHAPE;
        if (b.oom || !b.s) st = ct__error_status(code, "Error(s) in loading state_dict for %s", m->cls->name);
        else st = ct__error_status(code, "%s", b.s);
        goto out;
    }
    {
        bool prev = ct_set_grad_enabled(false);
        ct_scope s = ct_scope_begin();
        for (int i = 0; i < ct_sample_count(own) && !st; i++) {
            ct_tensor *dst = ct_sample_at(own, i), *src = ct_sample_get(sd, ct_sample_name(own, i));
            if (src && !ct_copy_(dst, src)) st = ct_last_error_code();
        }
        ct_scope_end(s);
        ct_set_grad_enabled(prev);
    }
out:
    free(b.s);
    ct_sample_free(own);
    return st;
}

/* ---- repr ------------------------------------------------------------------ */
typedef ct_sbuf sbuf;
#define put ct__sbuf_put

static void repr(sbuf *b, ct_module *m, int indent) {
    char *extra = m->cls->extra_repr ? m->cls->extra_repr(m) : NULL;
    put(b, "%s(%s", m->cls->name, extra ? extra : "");
    free(extra);
    if (m->impl->nk) {
        put(b, "\n");
        for (int i = 0; i < m->impl->nk; i++) {
            put(b, "%*s(%s): ", indent + 2, "", m->impl->kids[i].name);
            repr(b, m->impl->kids[i].m, indent + 2);
            put(b, "\n");
        }
        put(b, "%*s", indent, "");
    }
    put(b, ")");
}

char *ct_module_to_string(ct_module *m) {
    if (!m) return ct__error(CT_ERR_NULL, "module_to_string: module is NULL");
    sbuf b = {0};
    repr(&b, m, 0);
    if (b.oom) { free(b.s); return ct__error(CT_ERR_OOM, "module_to_string: out of memory"); }
    return b.s;
}

ct_status ct_module_print(ct_module *m) {
    char *s = ct_module_to_string(m);
    if (!s) return ct_last_error_code();
    printf("%s\n", s);
    free(s);
    return CT_OK;
}

/* ---- functional_call ----------------------------------------------------------- */
static int add_subst(ct_module *root, const char *full, ct_tensor *t) {
    const char *dot = strrchr(full, '.');
    ct_module *m = root;
    const char *leaf = full;
    if (dot) {
        char path[512];
        size_t len = (size_t)(dot - full);
        if (len >= sizeof path) return -1;
        memcpy(path, full, len);
        path[len] = 0;
        m = ct_module_get_submodule(root, path);
        leaf = dot + 1;
        if (!m) return -1;
    }
    for (int i = 0; i < m->impl->np; i++)
        if (!strcmp(m->impl->params[i].name, leaf)) {
            tl_subst[tl_nsubst++] = (subst){m, 0, i, t};
            return 0;
        }
    for (int i = 0; i < m->impl->nb; i++)
        if (!strcmp(m->impl->bufs[i].name, leaf)) {
            tl_subst[tl_nsubst++] = (subst){m, 1, i, t};
            return 0;
        }
    return -1;
}

ct_tensor *ct_functional_call(ct_module *m, const ct_sample *replace, ct_tensor *const *in, int n) {
    if (!m) return ct__error(CT_ERR_NULL, "functional_call: module is NULL");
    int k = ct_sample_count(replace);
    int base = tl_nsubst;
    subst *ns = realloc(tl_subst, sizeof(subst) * (size_t)(base + k + 1));
    if (!ns) return ct__error(CT_ERR_OOM, "functional_call: out of memory");
    tl_subst = ns;
    for (int i = 0; i < k; i++) {
        if (add_subst(m, ct_sample_name(replace, i), ct_sample_at(replace, i))) {
            tl_nsubst = base;
            return ct__error(CT_ERR_ARG, "functional_call: %s has no parameter or buffer named '%s'",
                             m->cls->name, ct_sample_name(replace, i));
        }
    }
    ct_tensor *r = ct_module_forward(m, in, n);
    tl_nsubst = base;
    if (base == 0) { free(tl_subst); tl_subst = NULL; }
    return r;
}

/* ---- containers ------------------------------------------------------------------ */
static ct_tensor *seq_forward(ct_module *m, ct_tensor *const *in, int n) {
    if (m->impl->nk == 0) return n == 1 ? in[0] : ct__error(CT_ERR_ARG, "Sequential: expects one input");
    ct_tensor *x = ct_module_forward(m->impl->kids[0].m, in, n);
    for (int i = 1; i < m->impl->nk && x; i++) x = ct_module_forward1(m->impl->kids[i].m, x);
    return x;
}
static const ct_module_class k_sequential = {"Sequential", sizeof(ct_module), seq_forward, NULL, NULL, NULL};
static const ct_module_class k_module_list = {"ModuleList", sizeof(ct_module), NULL, NULL, NULL, NULL};
static const ct_module_class k_module_dict = {"ModuleDict", sizeof(ct_module), NULL, NULL, NULL, NULL};

static ct_module *numbered(const ct_module_class *cls, ct_module *const *mods, int n) {
    ct_module *m = ct_module_new(cls);
    if (!m) return NULL;
    for (int i = 0; i < n; i++) {
        char nm[24];
        snprintf(nm, sizeof nm, "%d", i);
        if (!mods[i] || ct_module_register_module(m, nm, mods[i]) < 0) {
            if (!mods[i]) ct__error(CT_ERR_NULL, "%s: module %d is NULL", cls->name, i);
            ct_module_release(m);
            return NULL;
        }
    }
    return m;
}

ct_module *ct_sequential_new(ct_module *const *mods, int n) { return numbered(&k_sequential, mods, n); }
ct_module *ct_module_list_new(ct_module *const *mods, int n) { return numbered(&k_module_list, mods, n); }

ct_status ct_module_list_append(ct_module *list, ct_module *m) {
    if (!list || !m) return ct__error_status(CT_ERR_NULL, "module_list_append: NULL argument");
    char nm[24];
    snprintf(nm, sizeof nm, "%d", list->impl->nk);
    return ct_module_register_module(list, nm, m) < 0 ? ct_last_error_code() : CT_OK;
}

ct_module *ct_module_dict_new(const char *const *names, ct_module *const *mods, int n) {
    ct_module *m = ct_module_new(&k_module_dict);
    if (!m) return NULL;
    for (int i = 0; i < n; i++)
        if (!mods[i] || ct_module_register_module(m, names[i], mods[i]) < 0) {
            if (!mods[i]) ct__error(CT_ERR_NULL, "ModuleDict: module '%s' is NULL", names[i]);
            ct_module_release(m);
            return NULL;
        }
    return m;
}
