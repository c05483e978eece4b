/* engine.c -- the reverse-mode tape: recording nodes as ops run (called
 * from ct__finish*), the backward engine, modes, hooks, retain_grad,
 * detach and in-place history rewriting. */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "autograd_impl.h"

/* ---- modes ---------------------------------------------------------------- */
static _Thread_local bool tl_grad_off;    /* default: grad enabled */
static _Thread_local bool tl_inference;
static _Thread_local bool tl_anomaly;
static atomic_llong g_seq;

bool ct_set_grad_enabled(bool enabled) {
    bool prev = !tl_grad_off;
    tl_grad_off = !enabled;
    return prev;
}
bool ct_is_grad_enabled(void) { return !tl_grad_off && !tl_inference; }
bool ct_set_inference_mode(bool enabled) {
    bool prev = tl_inference;
    tl_inference = enabled;
    return prev;
}
bool ct_is_inference_mode(void) { return tl_inference; }
bool ct__ag_anomaly(void) { return tl_anomaly; }
bool ct_set_detect_anomaly(bool enabled) {
    bool prev = tl_anomaly;
    tl_anomaly = enabled;
    return prev;
}

/* ---- metadata ------------------------------------------------------------- */
extern void (*ct__autograd_free_hook)(ct_tensor *);

static void meta_free(ct_tensor *t);

/* The hook is written once (before the first metadata exists), never by
 * every thread that creates metadata: that was a data race under TSan. */
static pthread_once_t g_hook_once = PTHREAD_ONCE_INIT;
static void install_free_hook(void) { ct__autograd_free_hook = meta_free; }

ct_ag_meta *ct__ag_meta(ct_tensor *t) {
    if (!t->autograd) {
        pthread_once(&g_hook_once, install_free_hook);
        t->autograd = ct__obj_calloc(sizeof(ct_ag_meta));
        if (!t->autograd) {
            ct__error(CT_ERR_OOM, "autograd: out of memory");
            return NULL;
        }
    }
    return t->autograd;
}

bool ct__ag_requires_grad(const ct_tensor *t) {
    const ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    return m && m->requires_grad;
}
bool ct_requires_grad(const ct_tensor *t) { return ct__ag_requires_grad(t); }
bool ct_is_inference(const ct_tensor *t) {
    const ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    return m && m->inference;
}

static void node_retain(ct_node *n) {
    if (n) atomic_fetch_add(&n->refcount, 1);
}

/* nodes are freed iteratively: a long chain must not overflow the stack */
static _Thread_local ct_node **tl_free_stack;
static _Thread_local int tl_free_n, tl_free_cap, tl_freeing;

static void node_destroy(ct_node *n) {
    for (int k = 0; k < n->nin; k++) {
        if (n->in) ct_release(n->in[k]);
        if (n->next && n->next[k].node) ct__ag_node_release(n->next[k].node);
    }
    for (int k = 0; k < n->nout; k++)
        if (n->out) ct_release(n->out[k]);
    if (n->leaf) {
        ct_ag_meta *m = ct__ag_peek(n->leaf);
        if (m && m->grad_acc == n) m->grad_acc = NULL;
        ct_release(n->leaf);
    }
    if (n->fctx) {
        extern void ct__function_ctx_free(struct ct_function_ctx *);
        ct__function_ctx_free(n->fctx);
    }
    /* next, in, out, *_ver, out_dtype/ndim/sizes live in n's own block */
    free(n->str);
    free(n->watch);
    ct__obj_free(n, n->bytes);
}

void ct__ag_node_release(ct_node *n) {
    if (!n || atomic_fetch_sub(&n->refcount, 1) != 1) return;
    if (tl_free_n == tl_free_cap) {
        int nc = tl_free_cap ? tl_free_cap * 2 : 64;
        ct_node **ns = realloc(tl_free_stack, sizeof *ns * (size_t)nc);
        if (!ns) { node_destroy(n); return; } /* fall back to recursion */
        tl_free_stack = ns;
        tl_free_cap = nc;
    }
    tl_free_stack[tl_free_n++] = n;
    if (tl_freeing) return;
    tl_freeing = 1;
    while (tl_free_n > 0) node_destroy(tl_free_stack[--tl_free_n]);
    tl_freeing = 0;
    free(tl_free_stack);
    tl_free_stack = NULL;
    tl_free_cap = 0;
}

static void meta_free(ct_tensor *t) {
    ct_ag_meta *m = t->autograd;
    if (!m) return;
    t->autograd = NULL;
    ct_release(m->grad);
    ct_release(m->base);
    for (ct_hook *h = m->hooks; h;) {
        ct_hook *nx = h->next;
        free(h);
        h = nx;
    }
    if (m->fw) ct__fw_meta_free(m);
    ct_node *fn = m->grad_fn;
    if (fn && fn->watch && fn->watch[m->output_nr] == t) fn->watch[m->output_nr] = NULL;
    if (!fn && m->grad_acc && m->grad_acc->watch && m->grad_acc->watch[0] == t)
        m->grad_acc->watch[0] = NULL;
    ct__obj_free(m, sizeof *m);
    ct__ag_node_release(fn);
}

/* ---- edges ------------------------------------------------------------------ */
/* A node and all its per-edge arrays in ONE zeroed block (recording is on
 * the path of every op with autograd on: one calloc/free instead of ten).
 * saved: the in/in_ver (bit 1) and out/out_ver (bit 2) arrays are wanted;
 * the others stay NULL, as the engine reads "no saved tensors" from that. */
#define NODE_IN 1
#define NODE_OUT 2
static size_t al8(size_t n) { return (n + 7) & ~(size_t)7; }

/* args_bytes: the room kept for the node's parameters, offsetof(ct_args, p)
 * plus the size of its op's family struct (an op node), or a whole ct_args */
static ct_node *node_new(int kind, int nin, int nout, int saved, size_t args_bytes) {
    size_t ni = (size_t)(nin ? nin : 1), no = (size_t)(nout ? nout : 1);
    size_t off_next = al8(sizeof(ct_node));
    size_t off_dt = off_next + al8(ni * sizeof(ct_edge));
    size_t off_nd = off_dt + al8(no * sizeof(ct_dtype));
    size_t off_sz = off_nd + al8(no * sizeof(int));
    size_t off_in = off_sz + al8(no * sizeof(int64_t[CT_MAX_DIMS]));
    size_t off_iv = off_in + ((saved & NODE_IN) ? al8(ni * sizeof(ct_tensor *)) : 0);
    size_t off_ig = off_iv + ((saved & NODE_IN) ? al8(ni * sizeof(int64_t)) : 0);
    size_t off_out = off_ig + ((saved & NODE_IN) ? al8(ni * sizeof(ct_geom)) : 0);
    size_t off_ov = off_out + ((saved & NODE_OUT) ? al8(no * sizeof(ct_tensor *)) : 0);
    size_t off_args = off_ov + ((saved & NODE_OUT) ? al8(no * sizeof(int64_t)) : 0);
    size_t total = off_args + al8(args_bytes);
    char *blk = ct__obj_calloc(total);
    if (!blk) return NULL;
    ct_node *n = (ct_node *)blk;
    n->bytes = total;
    n->kind = kind;
    n->nin = nin;
    n->nout = nout;
    n->seq = atomic_fetch_add(&g_seq, 1);
    n->next = (ct_edge *)(blk + off_next);
    n->out_dtype = (ct_dtype *)(blk + off_dt);
    n->out_ndim = (int *)(blk + off_nd);
    n->out_sizes = (int64_t(*)[CT_MAX_DIMS])(blk + off_sz);
    n->args = (ct_args *)(void *)(blk + off_args);
    if (saved & NODE_IN) {
        n->in = (ct_tensor **)(blk + off_in);
        n->in_ver = (int64_t *)(blk + off_iv);
        n->in_geom = (ct_geom *)(blk + off_ig);
    }
    if (saved & NODE_OUT) {
        n->out = (ct_tensor **)(blk + off_out);
        n->out_ver = (int64_t *)(blk + off_ov);
    }
    return n;
}

static void set_out_geom(ct_node *n, int j, const ct_tensor *t) {
    n->out_dtype[j] = t->dtype;
    n->out_ndim[j] = t->ndim;
    memcpy(n->out_sizes[j], t->sizes, sizeof(int64_t) * (size_t)t->ndim);
}

static void set_in_geom(ct_node *n, int k, const ct_tensor *t) {
    ct_geom *g = &n->in_geom[k];
    g->dtype = t->dtype;
    g->device = t->storage->device;
    g->device_index = t->storage->device_index;
    g->ndim = t->ndim;
    memcpy(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim);
    memcpy(g->strides, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    g->offset = t->offset;
    g->storage_nbytes = t->storage->nbytes;
}

/* The saved-value mask for a node of op whose input k wants a gradient iff
 * next[k].node: the op table's vjp_reads, narrowed by its reads_by column
 * where it has one (a value is saved only when a gradient that reads it is
 * wanted). */
static unsigned saved_mask(ct_op op, const ct_edge *next, int nin) {
    const ct_op_info *oi = &ct__op_info[op];
    unsigned all = oi->vjp_reads;
    if (!oi->has_reads_by) return all;
    unsigned m = 0;
    for (int k = 0; k < nin; k++)
        if (next[k].node) m |= k < 4 ? oi->reads_by[k] : all;
    return m & all;
}

static bool in_bit(unsigned mask, int k) { return mask & CT_READS_IN(k < 16 ? k : 15); }
static bool out_bit(unsigned mask, int j) { return j < 16 && (mask & CT_READS_OUT(j)); }

/* Saved values: absent at forward (ndim -1 in the geometry) -> NULL; saved
 * -> the tensor; otherwise the VJP asked for a value that was not saved. */
ct_tensor *ct__vjp_in(const ct_vjp_ctx *c, int k) {
    const ct_node *n = c->node;
    if (k < 0 || k >= c->nin)
        return ct__error(CT_ERR_AUTOGRAD, "%s: backward reads input %d of %d", n->name, k, c->nin);
    if (c->in && c->in[k]) return c->in[k];
    if (n->kind != CT_NODE_OP || n->view_vjp || !n->in_geom || n->in_geom[k].ndim < 0) return NULL;
    return ct__error(CT_ERR_AUTOGRAD, "%s: backward reads input %d, which was not saved (the op's "
                     "vjp_reads mask does not declare it for the gradients wanted)", n->name, k);
}

ct_tensor *ct__vjp_out(const ct_vjp_ctx *c, int j) {
    const ct_node *n = c->node;
    if (j < 0 || j >= c->nout)
        return ct__error(CT_ERR_AUTOGRAD, "%s: backward reads output %d of %d", n->name, j, c->nout);
    if (c->out && c->out[j]) return c->out[j];
    if (n->kind != CT_NODE_OP || n->view_vjp || n->out_ndim[j] < 0) return NULL;
    return ct__error(CT_ERR_AUTOGRAD, "%s: backward reads output %d, which was not saved (the op's "
                     "vjp_reads mask does not declare it for the gradients wanted)", n->name, j);
}

/* The edge along which t's gradient flows (a new strong ref), or {NULL}. */
static ct_edge gradient_edge(ct_tensor *t) {
    ct_edge e = {NULL, 0};
    if (ct__ag_refresh_view(t)) return e;
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->requires_grad) return e;
    if (m->grad_fn) { e.node = m->grad_fn; e.nr = m->output_nr; }
    else if (m->weak_fn) { e.node = m->weak_fn; e.nr = m->output_nr; }
    else {
        if (!m->grad_acc) {
            ct_node *n = node_new(CT_NODE_ACCUMULATE, 0, 1, 0, sizeof(ct_args));
            if (!n) return e;
            snprintf(n->name, sizeof n->name, "AccumulateGrad");
            n->leaf = ct_retain(t);
            atomic_init(&n->refcount, 1);
            set_out_geom(n, 0, t);
            m->grad_acc = n; /* weak: the node holds the leaf */
            e.node = n;      /* the new node's first reference is this edge */
            return e;
        }
        e.node = m->grad_acc;
    }
    node_retain(e.node);
    return e;
}

static void node_name(char *buf, size_t n, const char *op) {
    size_t k = 0;
    int up = 1;
    for (const char *p = op; *p && k + 12 < n; p++) {
        if (*p == '_') { up = 1; continue; }
        buf[k++] = up ? (char)toupper((unsigned char)*p) : *p;
        up = 0;
    }
    snprintf(buf + k, n - k, "Backward0");
}

/* Every op's node name ("AddBackward0"), made once by ct__ag_init: a
 * snprintf per recorded op was ~6% of the instructions of tiny_add_grad. */
static char g_node_names[CT_OP_COUNT][sizeof(((ct_node *)0)->name)];
static void op_node_name(char *buf, ct_op op) {
    if (g_node_names[op][0]) memcpy(buf, g_node_names[op], sizeof g_node_names[op]);
    else node_name(buf, sizeof g_node_names[op], ct__op_info[op].name); /* before ct__ag_init */
}

/* Whether ct__finish must call the record hook: reverse mode records, or
 * forward mode has a tangent to propagate (one thread-local test when no
 * dual level is active). */
static bool ag_active(ct_tensor *const *in, int nin) {
    return tl_inference || ct__ag_needed(in, nin) || (ct__fw_nlevels && ct__fw_any(in, nin));
}

/* The op layer's record hook: the reverse-mode node, then the forward-mode
 * tangents. */
static ct_status ag_record(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    ct_status st = ct__ag_record(op, out, nout, in, nin, a);
    if (st == CT_OK && ct__fw_nlevels && ct__fw_any(in, nin)) {
        st = ct__fw_op(op, out, nout, in, nin, a);
        /* the node's saved outputs share the tangents just attached */
        for (int j = 0; st == CT_OK && j < nout; j++) {
            ct_ag_meta *m = out[j] ? ct__ag_peek(out[j]) : NULL;
            ct_node *n = m ? m->grad_fn : NULL;
            if (n && n->out && n->out[j] && m->output_nr == j) st = ct__fw_copy(n->out[j], out[j]);
        }
    }
    return st;
}

/* Views made while grad mode is on remember their root base even when
 * nothing requires grad yet, so that a later in-place op on the view with
 * an input that requires grad gives the base a history (CopySlices).  While
 * a dual level is active they do under no_grad too (torch tracks views
 * whatever the grad mode): an in-place op writing a tangent into a view
 * then gives the base its tangent -- the backward of slicing ops writes
 * the gradient into a view of zeros with grad mode off, and forward over
 * reverse must see the zeros' tangent. */
static void ag_track_view(ct_tensor *out, ct_tensor *in) {
    if ((tl_grad_off && !ct__fw_nlevels) || tl_inference || !out || !in) return;
    ct_ag_meta *im = ct__ag_peek(in);
    ct_tensor *root = im && im->base ? im->base : in;
    ct_ag_meta *m = ct__ag_meta(out);
    if (m && !m->base) {
        m->base = ct_retain(root);
        m->base_fn_seq = ct__ag_fn_seq(root);
    }
}

static bool fw_any_hook(ct_tensor *const *in, int nin) { return ct__fw_nlevels && ct__fw_any(in, nin); }

/* Installs autograd in the op layer (its recording hooks, the derivative
 * slots of the op table); called once by the op layer's initialization. */
void ct__ag_init(void) {
    static const ct_ag_hooks hooks = {
        .active = ag_active,
        .record = ag_record,
        .track_view = ag_track_view,
        .inplace_begin = ct__ag_inplace_begin,
        .inplace_abort = ct__ag_inplace_abort,
        .finish_inplace = ct__ag_finish_inplace,
        .fw_any = fw_any_hook,
    };
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (ct__op_info[op].name) node_name(g_node_names[op], sizeof g_node_names[op], ct__op_info[op].name);
    ct__ag_set_hooks(&hooks);
}

int64_t ct__ag_fn_seq(const ct_tensor *t) {
    const ct_ag_meta *m = ct__ag_peek(t);
    return m && m->grad_fn ? m->grad_fn->seq : -1;
}

ct_status ct__ag_refresh_view(ct_tensor *t) {
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->base || m->base == t) return CT_OK;
    int64_t now = ct__ag_fn_seq(m->base);
    if (now == m->base_fn_seq || now < 0) return CT_OK;
    return ct__ag_view_from_base(t, m->base);
}

bool ct__ag_needed(ct_tensor *const *in, int nin) {
    if (tl_grad_off || tl_inference) return false;
    for (int k = 0; k < nin; k++)
        if (in[k] && ct__ag_requires_grad(in[k])) return true;
    return false;
}

static bool differentiable(ct_dtype dt) { return ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt); }

/* A saved copy of an output: a new handle on the same storage whose
 * gradient edge points (weakly) back to the node. */
static ct_tensor *save_output(ct_node *n, int j, ct_tensor *o) {
    ct_tensor *a = ct__view_of(o, o->sizes, o->strides, o->ndim, o->offset);
    if (!a) return NULL;
    ct_ag_meta *m = ct__ag_meta(a);
    if (!m) { ct_release(a); return NULL; }
    m->requires_grad = true;
    m->weak_fn = n;
    m->output_nr = j;
    return a;
}

/* A saved input: leaves are saved as they are; a non-leaf is saved as a
 * snapshot (a handle on the same storage holding the grad_fn it has now),
 * so a later in-place op that rebases the tensor's history cannot form a
 * reference cycle through this node. */
static ct_tensor *save_input(ct_tensor *t) {
    if (ct__ag_refresh_view(t)) return NULL;
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || (!m->grad_fn && !m->weak_fn)) return ct_retain(t);
    ct_tensor *a = ct__view_of(t, t->sizes, t->strides, t->ndim, t->offset);
    if (!a) return NULL;
    ct_ag_meta *am = ct__ag_meta(a);
    if (!am) { ct_release(a); return NULL; }
    if (m->fw && ct__fw_copy(a, t)) { ct_release(a); return NULL; } /* forward over reverse */
    am->requires_grad = m->requires_grad;
    am->grad_fn = m->grad_fn;
    node_retain(m->grad_fn);
    am->weak_fn = m->weak_fn;
    am->output_nr = m->output_nr;
    return a;
}

static ct_status mark_inference(ct_tensor **out, int nout) {
    for (int j = 0; j < nout; j++) {
        if (!out[j]) continue;
        ct_ag_meta *m = ct__ag_meta(out[j]);
        if (!m) return CT_ERR_OOM;
        m->inference = true;
    }
    return CT_OK;
}

/* The string parameters of n's args (the CT_PK_STR fields of its op's
 * family) are copied into one block the node owns (n->str) and the node's
 * args point at the copies: the backward reads them after the caller's
 * strings are gone.  -1 when out of memory. */
static int keep_strings(ct_node *n) {
    const ct_pfamily_info *fi = &ct__pfamilies[ct__op_pfam[n->args->op]];
    char *p = (char *)&n->args->p;
    size_t total = 0;
    for (int k = 0; k < fi->nfields; k++) {
        const char *s;
        if (fi->fields[k].kind != CT_PK_STR) continue;
        memcpy(&s, p + fi->fields[k].off, sizeof s);
        if (s) total += strlen(s) + 1;
    }
    if (!total) return 0;
    char *blk = malloc(total);
    if (!blk) return -1;
    n->str = blk;
    for (int k = 0; k < fi->nfields; k++) {
        const char *s;
        if (fi->fields[k].kind != CT_PK_STR) continue;
        memcpy(&s, p + fi->fields[k].off, sizeof s);
        if (!s) continue;
        size_t len = strlen(s) + 1;
        memcpy(blk, s, len);
        s = blk;
        memcpy(p + fi->fields[k].off, &s, sizeof s);
        blk += len;
    }
    return 0;
}

ct_status ct__ag_record(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    if (tl_inference) return mark_inference(out, nout);
    if (!ct__ag_needed(in, nin)) return CT_OK;
    const char *opname = ct__op_info[op].name;
    for (int k = 0; k < nin; k++)
        if (in[k] && ct_is_inference(in[k]))
            return ct__error_status(CT_ERR_AUTOGRAD, "%s: inference tensors cannot be saved for "
                                    "backward. To work around you can make a clone to get a normal tensor "
                                    "and use it in autograd.", opname);
    int any = 0;
    for (int j = 0; j < nout; j++)
        if (out[j] && differentiable(out[j]->dtype)) any = 1;
    if (!any) return CT_OK;
    /* the node keeps its op's typed parameters, not a whole ct_args */
    size_t args_bytes = offsetof(ct_args, p) + ct__pfamilies[ct__op_pfam[a ? a->op : op]].size;
    ct_node *n = node_new(CT_NODE_OP, nin, nout, NODE_IN | NODE_OUT, args_bytes);
    if (!n) return ct__error_status(CT_ERR_OOM, "%s: out of memory recording autograd", opname);
    n->op = op;
    op_node_name(n->name, op);
    /* the copy op is torch's clone/contiguous (CloneBackward0) or, when
     * the dtype or the device changes, to() (ToCopyBackward0); an in-place
     * copy_ is renamed CopyBackwards by ct__ag_finish_inplace */
    if (op == CT_OP_copy && nin >= 1 && in[0] && nout >= 1 && out[0]) {
        bool to = out[0]->dtype != in[0]->dtype || out[0]->storage->device != in[0]->storage->device ||
                  out[0]->storage->device_index != in[0]->storage->device_index;
        snprintf(n->name, sizeof n->name, "%s", to ? "ToCopyBackward0" : "CloneBackward0");
    }
    if (a) memcpy(n->args, a, args_bytes); /* calloc'ed: no args means zero parameters */
    n->args->op = a ? a->op : op;
    if (a && keep_strings(n)) {
        node_destroy(n);
        return ct__error_status(CT_ERR_OOM, "%s: out of memory recording autograd", opname);
    }
    /* only what the backward reads is saved (an unsaved tensor is freed as
     * soon as nothing else holds it); the rest leaves its geometry */
    for (int k = 0; k < nin; k++) {
        n->in_ver[k] = -1;
        n->in_geom[k].ndim = -1;
        if (in[k]) n->next[k] = gradient_edge(in[k]);
    }
    unsigned mask = saved_mask(op, n->next, nin);
    for (int k = 0; k < nin; k++) {
        if (!in[k]) continue;
        set_in_geom(n, k, in[k]);
        if (in_bit(mask, k)) {
            n->in[k] = save_input(in[k]);
            n->in_ver[k] = ct_version(in[k]);
        }
    }
    for (int j = 0; j < nout; j++) {
        n->out_ver[j] = -1;
        n->out_ndim[j] = -1;
        if (!out[j]) continue;
        set_out_geom(n, j, out[j]);
        if (out_bit(mask, j)) {
            n->out[j] = save_output(n, j, out[j]);
            n->out_ver[j] = ct_version(out[j]);
        }
    }
    atomic_init(&n->refcount, 0);
    for (int j = 0; j < nout; j++) {
        if (!out[j] || !differentiable(out[j]->dtype)) continue;
        ct_ag_meta *m = ct__ag_meta(out[j]);
        if (!m) continue;
        m->requires_grad = true;
        ct__ag_node_release(m->grad_fn);
        m->grad_fn = n;
        m->output_nr = j;
        node_retain(n);
    }
    return CT_OK;
}

/* ---- leaves, grads, detach -------------------------------------------------- */
ct_status ct_set_requires_grad(ct_tensor *t, bool rg) {
    CT_NULLCHECK_S(t);
    if (rg && !differentiable(t->dtype))
        return ct__error_status(CT_ERR_DTYPE, "set_requires_grad: only tensors of floating point and "
                                "complex dtype can require gradients (got %s)", ct_dtype_name(t->dtype));
    ct_ag_meta *m = rg ? ct__ag_meta(t) : ct__ag_peek(t);
    if (!m) return rg ? CT_ERR_OOM : CT_OK;
    if (m->inference && rg)
        return ct__error_status(CT_ERR_AUTOGRAD, "set_requires_grad: setting requires_grad=True on "
                                "an inference tensor created outside InferenceMode is not allowed.");
    if (!rg && m->grad_fn)
        return ct__error_status(CT_ERR_AUTOGRAD, "set_requires_grad: you can only change requires_grad "
                                "flags of leaf variables. If you want to use a computed variable in a "
                                "subgraph that doesn't require differentiation use detach().");
    m->requires_grad = rg;
    return CT_OK;
}

ct_tensor *ct_grad(ct_tensor *t) {
    ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    return m ? m->grad : NULL;
}

ct_status ct_set_grad(ct_tensor *t, ct_tensor *g) {
    CT_NULLCHECK_S(t);
    if (g && (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim)))
        return ct__error_status(CT_ERR_SHAPE, "set_grad: assigned grad has data of a different size "
                                "(%s vs %s)", ct__tshape(g), ct__tshape(t));
    ct_ag_meta *m = ct__ag_meta(t);
    if (!m) return CT_ERR_OOM;
    ct_retain(g);
    ct_release(m->grad);
    m->grad = g;
    return CT_OK;
}

void ct_zero_grad(ct_tensor *t) {
    ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    if (m) { ct_release(m->grad); m->grad = NULL; }
}

const char *ct_grad_fn_name(const ct_tensor *t) {
    const ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    return m && m->grad_fn ? m->grad_fn->name : NULL;
}

bool ct_is_leaf(const ct_tensor *t) {
    const ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
    return !m || !m->grad_fn;
}

static ct_status watch(ct_tensor *t, ct_ag_meta *m) {
    ct_node *n = m->grad_fn;
    if (!n) return CT_OK; /* leaves: hooks run at accumulation */
    if (!n->watch) {
        n->watch = calloc((size_t)n->nout, sizeof *n->watch);
        if (!n->watch) return ct__error_status(CT_ERR_OOM, "autograd: out of memory");
    }
    n->watch[m->output_nr] = t;
    return CT_OK;
}

ct_status ct_retain_grad(ct_tensor *t) {
    CT_NULLCHECK_S(t);
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->requires_grad)
        return ct__error_status(CT_ERR_AUTOGRAD, "retain_grad: can't retain_grad on Tensor that has "
                                "requires_grad=False");
    if (!m->grad_fn) return CT_OK; /* a leaf keeps its grad anyway */
    m->retains_grad = true;
    return watch(t, m);
}

ct_tensor *ct_detach(ct_tensor *t) {
    CT_NULLCHECK(t);
    ct_tensor *d = ct__view_of(t, t->sizes, t->strides, t->ndim, t->offset);
    d = ct__register(d);
    ct_trace_hook *h = ct__tracer();
    if (d && h) {
        /* the tracer sees as_strided with the detach flag: the same view,
         * which a compiled graph (exec.c) and vmap replay with ct_detach, so
         * what the traced function detached stays cut from autograd */
        ct_args a = ct__args(CT_OP_as_strided);
        a.p.view.shape_n = a.p.view.stride_n = t->ndim;
        for (int i = 0; i < t->ndim; i++) a.p.view.shape[i] = t->sizes[i], a.p.view.stride[i] = t->strides[i];
        a.p.view.storage_offset = t->offset;
        a.p.view.detach = true;
        h->op(h, CT_OP_as_strided, &d, 1, &t, 1, &a, NULL);
    }
    return d;
}

ct_tensor *ct_detach_(ct_tensor *t) {
    CT_NULLCHECK(t);
    ct_ag_meta *m = ct__ag_peek(t);
    if (m) {
        ct__ag_node_release(m->grad_fn);
        m->grad_fn = NULL;
        m->requires_grad = false;
        ct_release(m->base);
        m->base = NULL;
    }
    return t;
}

ct_status ct_register_hook(ct_tensor *t, ct_grad_hook fn, void *user) {
    CT_NULLCHECK_S(t);
    if (!fn) return ct__error_status(CT_ERR_NULL, "register_hook: hook function is NULL");
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->requires_grad)
        return ct__error_status(CT_ERR_AUTOGRAD, "register_hook: cannot register a hook on a tensor "
                                "that doesn't require gradient");
    ct_hook *h = calloc(1, sizeof *h);
    if (!h) return ct__error_status(CT_ERR_OOM, "register_hook: out of memory");
    h->fn = fn;
    h->user = user;
    /* append: hooks run in registration order */
    ct_hook **pp = &m->hooks;
    while (*pp) pp = &(*pp)->next;
    *pp = h;
    return watch(t, m);
}

/* The AccumulateGrad node of a leaf, with one new reference for the caller
 * (drop it with ct__ag_drop_grad_acc_ref). */
ct_node *ct__ag_grad_acc(ct_tensor *t) {
    ct_edge e = gradient_edge(t);
    if (!e.node) ct__error(CT_ERR_OOM, "autograd: out of memory");
    return e.node;
}
void ct__ag_drop_grad_acc_ref(ct_node *n) { ct__ag_node_release(n); }

/* A CUSTOM node for ct_function_apply; the outputs get it as grad_fn.
 * Takes ownership of ctx (freed on failure). */
ct_node *ct__ag_custom_node(const ct_function_def *def, struct ct_function_ctx *ctx,
                            ct_tensor *const *inputs, int ninputs, ct_tensor **outputs) {
    extern void ct__function_ctx_free(struct ct_function_ctx *);
    int nout = def->noutputs;
    ct_node *n = node_new(CT_NODE_CUSTOM, ninputs, nout, NODE_IN, sizeof(ct_args));
    if (!n) { ct__function_ctx_free(ctx); ct__error(CT_ERR_OOM, "function_apply: out of memory"); return NULL; }
    snprintf(n->name, sizeof n->name, "%sBackward", def->name ? def->name : "Custom");
    n->fdef = def;
    n->fctx = ctx;
    for (int k = 0; k < ninputs; k++) {
        n->next[k] = gradient_edge(inputs[k]);
        set_in_geom(n, k, inputs[k]);
        /* only the shape is needed (gradient checks): keep a detached alias */
        n->in[k] = ct__view_of(inputs[k], inputs[k]->sizes, inputs[k]->strides, inputs[k]->ndim,
                               inputs[k]->offset);
        n->in_ver[k] = -1; /* not checked: shape only */
    }
    atomic_init(&n->refcount, 0);
    for (int j = 0; j < nout; j++) {
        set_out_geom(n, j, outputs[j]);
        if (!differentiable(outputs[j]->dtype)) continue;
        ct_ag_meta *m = ct__ag_meta(outputs[j]);
        if (!m) continue;
        m->requires_grad = true;
        /* the same tensor twice among the outputs: n is already its
         * grad_fn, so n's reference is taken before the old one goes (its
         * gradient arrives at the last slot; the engine gives the others
         * zeros) */
        node_retain(n);
        ct__ag_node_release(m->grad_fn);
        m->grad_fn = n;
        m->output_nr = j;
    }
    if (atomic_load(&n->refcount) == 0) { node_destroy(n); return NULL; }
    return n;
}

/* A node with its saved-tensor arrays, refcount 1 (the caller's). */
ct_node *ct__ag_new_node(int kind, int nin, int nout, const char *name) {
    ct_node *n = node_new(kind, nin, nout, NODE_IN | NODE_OUT, sizeof(ct_args));
    if (!n) { ct__error(CT_ERR_OOM, "autograd: out of memory"); return NULL; }
    snprintf(n->name, sizeof n->name, "%s", name);
    atomic_init(&n->refcount, 1);
    return n;
}
ct_edge ct__ag_gradient_edge(ct_tensor *t) { return gradient_edge(t); }
