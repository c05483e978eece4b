/* backward.c -- the engine: walks the recorded graph from the roots in
 * reverse creation order, calling each node's backward function once all
 * gradients flowing into it have been summed. */
#include <math.h>
#include <stdio.h>

#include "autograd_impl.h"
#include "../ops/autocast.h"

static atomic_llong g_epoch = 1;

/* ---- a max-heap of nodes by creation order ------------------------------- */
typedef struct { ct_node **v; int n, cap; } heap;
static int heap_push(heap *h, ct_node *x) {
    if (h->n == h->cap) {
        int nc = h->cap ? h->cap * 2 : 64;
        ct_node **nv = realloc(h->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        h->v = nv;
        h->cap = nc;
    }
    int i = h->n++;
    while (i > 0 && h->v[(i - 1) / 2]->seq < x->seq) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = x;
    return 0;
}
static ct_node *heap_pop(heap *h) {
    ct_node *top = h->v[0], *x = h->v[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->v[c + 1]->seq > h->v[c]->seq) c++;
        if (h->v[c]->seq <= x->seq) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = x;
    return top;
}

/* ---- graph walk -------------------------------------------------------------- */
typedef struct { ct_node **v; int n, cap; } nodelist;
static int list_push(nodelist *l, ct_node *x) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 64;
        ct_node **nv = realloc(l->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
    return 0;
}

/* Marks every node reachable from the roots with this epoch and counts,
 * for each, the edges pointing at it. */
static int collect(ct_node *const *roots, int nroots, int64_t epoch, nodelist *all) {
    nodelist stack = {0};
    int rc = 0;
    for (int i = 0; i < nroots; i++) {
        ct_node *r = roots[i];
        if (!r || r->epoch == epoch) continue;
        r->epoch = epoch;
        r->deps = 0;
        if (list_push(all, r) || list_push(&stack, r)) { rc = -1; goto out; }
    }
    while (stack.n) {
        ct_node *n = stack.v[--stack.n];
        for (int k = 0; k < n->nin; k++) {
            ct_node *c = n->next[k].node;
            if (!c) continue;
            if (c->epoch != epoch) {
                c->epoch = epoch;
                c->deps = 0;
                if (list_push(all, c) || list_push(&stack, c)) { rc = -1; goto out; }
            }
            c->deps++;
        }
    }
out:
    free(stack.v);
    return rc;
}

/* ---- autograd.grad runs only what leads to its inputs ------------------------ */
/* PyTorch's exec_info: with capture points (ct_autograd_grad), a node whose
 * inputs lead to no capture point is not run -- its backward, the hooks and
 * retain_grad of its outputs, and the release of its saved tensors are
 * skipped -- so differentiating with respect to a tensor in the middle of a
 * larger graph (the function transforms do it for every call) neither
 * costs the rest of the graph nor touches it.  A map from node to state:
 * 1 visiting, 2 reaches no capture, 3 reaches one (or is one). */
typedef struct { ct_node **k; signed char *v; size_t cap, n; } nodemap;

static signed char *map_slot(nodemap *m, ct_node *x, bool add) {
    if (add && (m->n + 1) * 2 > m->cap) {
        size_t nc = m->cap ? m->cap * 2 : 256;
        ct_node **nk = calloc(nc, sizeof *nk);
        signed char *nv = calloc(nc, 1);
        if (!nk || !nv) { free(nk); free(nv); return NULL; }
        for (size_t i = 0; i < m->cap; i++)
            if (m->k[i]) {
                size_t h = ((uintptr_t)m->k[i] >> 4) & (nc - 1);
                while (nk[h]) h = (h + 1) & (nc - 1);
                nk[h] = m->k[i];
                nv[h] = m->v[i];
            }
        free(m->k); free(m->v);
        m->k = nk; m->v = nv; m->cap = nc;
    }
    if (!m->cap) return NULL;
    size_t h = ((uintptr_t)x >> 4) & (m->cap - 1);
    while (m->k[h] && m->k[h] != x) h = (h + 1) & (m->cap - 1);
    if (!m->k[h]) {
        if (!add) return NULL;
        m->k[h] = x;
        m->v[h] = 0;
        m->n++;
    }
    return &m->v[h];
}

/* state 3 for every node of `all` from which a capture node is reachable
 * (iterative post-order walk: graphs can be deep).  -1: out of memory. */
static int mark_needed(const nodelist *all, const ct_node *const *capn, int ncaps, nodemap *m) {
    nodelist stack = {0};
    int rc = 0;
    for (int i = 0; i < all->n && !rc; i++) {
        signed char *s0 = map_slot(m, all->v[i], true);
        if (!s0) { rc = -1; break; }
        if (*s0) continue;
        *s0 = 1;
        if (list_push(&stack, all->v[i])) { rc = -1; break; }
        while (stack.n && !rc) {
            ct_node *n = stack.v[stack.n - 1];
            if (*map_slot(m, n, false) >= 2) { stack.n--; continue; } /* a duplicate entry, done */
            int pending = 0;
            for (int k = 0; k < n->nin && !rc; k++) {
                ct_node *c = n->next[k].node;
                if (!c) continue;
                signed char *sc = map_slot(m, c, true);
                if (!sc) { rc = -1; break; }
                /* unvisited, or pushed by another node and not done yet (the
                 * graph is acyclic: not an ancestor): visit it first */
                if (*sc <= 1) {
                    *sc = 1;
                    if (list_push(&stack, c)) rc = -1;
                    pending = 1;
                }
            }
            if (rc || pending) continue;
            /* every child done: n reaches a capture when it is one or a child reaches one */
            bool r = false;
            for (int c = 0; c < ncaps && !r; c++) r = capn[c] == n;
            for (int k = 0; k < n->nin && !r; k++) {
                ct_node *c = n->next[k].node;
                signed char *sc = c ? map_slot(m, c, false) : NULL;
                r = sc && *sc == 3;
            }
            *map_slot(m, n, false) = r ? 3 : 2;
            stack.n--;
        }
    }
    free(stack.v);
    return rc;
}

static int buf_ensure(ct_node *n) {
    if (!n->buf) n->buf = calloc((size_t)(n->nout ? n->nout : 1), sizeof *n->buf);
    return n->buf ? 0 : -1;
}

/* The buffered gradient b may be updated in place to a tensor of dtype dt
 * and shape sizes[nd]: nothing else holds it or its storage, it is
 * contiguous, of that dtype and shape, and there is no graph to build. */
static bool buf_writable(ct_tensor *b, ct_dtype dt, const int64_t *sizes, int nd) {
    return b && !ct_is_grad_enabled() && !ct__tracer() && !ct__fw_active_on(&b, 1) &&
           atomic_load(&b->refcount) == 1 && atomic_load(&b->storage->refcount) == 1 &&
           ct__is_contiguous(b) && b->dtype == dt && b->ndim == nd &&
           !memcmp(b->sizes, sizes, sizeof *b->sizes * (size_t)nd) && !ct_requires_grad(b);
}

ct_tensor *ct__vjp_accum(const ct_vjp_ctx *c, int k) {
    if (!c || !c->node || k < 0 || k >= c->node->nin || !c->node->next || !c->needs[k]) return NULL;
    ct_node *n = c->node->next[k].node;
    int nr = c->node->next[k].nr;
    if (!n || !n->buf || nr < 0 || nr >= (n->nout ? n->nout : 1)) return NULL;
    const ct_geom *x = &c->node->in_geom[k];
    ct_tensor *b = n->buf[nr];
    if (k >= 64 || !buf_writable(b, x->dtype, x->sizes, x->ndim)) return NULL;
    c->node->accum_mask |= (uint64_t)1 << k;
    return b;
}

/* buf[nr] += g  (g is scope-owned; buf holds its own reference) */
static ct_status buf_add(ct_node *n, int nr, ct_tensor *g) {
    if (buf_ensure(n)) return ct__error_status(CT_ERR_OOM, "backward: out of memory");
    if (!n->buf[nr]) {
        n->buf[nr] = ct_retain(g);
        return CT_OK;
    }
    ct_tensor *b = n->buf[nr];
    /* in place when nothing else can see the buffered gradient (this
     * buffer's reference only, its own storage, contiguous, g's shape and
     * dtype) and there is no graph to build (torch's InputBuffer does the
     * same): for a tied [V, C] embedding that saves a [V, C] allocation and
     * its page faults per step */
    if (buf_writable(b, g->dtype, g->sizes, g->ndim) && !ct__fw_active_on(&g, 1))
        return ct_add_(b, g) ? CT_OK : ct_last_error_code();
    ct_tensor *s = ct_add(b, g);
    if (!s) return ct_last_error_code();
    ct_release(n->buf[nr]);
    n->buf[nr] = ct_retain(s);
    return CT_OK;
}

static ct_status check_saved(ct_node *n) {
    if (n->released)
        return ct__error_status(CT_ERR_AUTOGRAD, "%s: Trying to backward through the graph a second "
                                "time (or directly access saved tensors after they have already been "
                                "freed). Saved intermediate values of the graph are freed when you call "
                                "backward() or autograd.grad(). Specify retain_graph=True if you need to "
                                "backward through the graph a second time or if you need to access saved "
                                "tensors after calling backward.", n->name);
    for (int k = 0; k < n->nin; k++)
        if (n->in && n->in[k] && n->in_ver[k] >= 0 && ct_version(n->in[k]) != n->in_ver[k])
            return ct__error_status(CT_ERR_AUTOGRAD, "one of the variables needed for gradient "
                                    "computation has been modified by an inplace operation: [%s %s], "
                                    "which is input %d of %s, is at version %lld; expected version %lld "
                                    "instead.", ct_dtype_name(n->in[k]->dtype), ct__tshape(n->in[k]), k,
                                    n->name, (long long)ct_version(n->in[k]), (long long)n->in_ver[k]);
    for (int j = 0; j < n->nout; j++)
        if (n->out && n->out[j] && n->out_ver[j] >= 0 && ct_version(n->out[j]) != n->out_ver[j])
            return ct__error_status(CT_ERR_AUTOGRAD, "one of the variables needed for gradient "
                                    "computation has been modified by an inplace operation: [%s %s], "
                                    "which is output %d of %s, is at version %lld; expected version %lld "
                                    "instead.", ct_dtype_name(n->out[j]->dtype), ct__tshape(n->out[j]), j,
                                    n->name, (long long)ct_version(n->out[j]), (long long)n->out_ver[j]);
    return CT_OK;
}

static void release_saved(ct_node *n) {
    if (n->kind != CT_NODE_OP && n->kind != CT_NODE_CUSTOM) return;
    if (n->in) for (int k = 0; k < n->nin; k++) { ct_release(n->in[k]); n->in[k] = NULL; }
    if (n->out) for (int j = 0; j < n->nout; j++) { ct_release(n->out[j]); n->out[j] = NULL; }
    if (n->fctx) {
        extern void ct__function_ctx_release_saved(struct ct_function_ctx *);
        ct__function_ctx_release_saved(n->fctx);
    }
    n->released = true;
}

static int has_nonfinite(ct_tensor *g) {
    if (!g || !(ct_dtype_is_floating(g->dtype) || ct_dtype_is_complex(g->dtype))) return 0;
    ct_tensor *c = ct__contig_as(g, ct_dtype_is_complex(g->dtype) ? CT_C128 : CT_F64);
    if (!c) return 0;
    int64_t n = ct_numel(c) * (ct_dtype_is_complex(g->dtype) ? 2 : 1);
    const double *p = ct__ptr(c);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) bad = !isfinite(p[i]);
    ct_release(c);
    return bad;
}

static ct_tensor *run_hooks(ct_hook *h, ct_tensor *g) {
    for (; h && g; h = h->next) {
        ct_tensor *r = h->fn(g, h->user);
        if (r) g = r;
    }
    return g;
}

/* Gradients for a node's inputs. */
static ct_status call_backward(ct_node *n, ct_tensor **gout, ct_tensor **gin, bool final) {
    bool needs[64];
    bool *nd = n->nin <= 64 ? needs : calloc((size_t)n->nin, sizeof(bool));
    if (!nd) return ct__error_status(CT_ERR_OOM, "backward: out of memory");
    for (int k = 0; k < n->nin; k++) nd[k] = n->next[k].node != NULL;
    ct_status st;
    if (n->kind == CT_NODE_CUSTOM) {
        extern ct_status ct__function_backward(ct_node *, ct_tensor **, ct_tensor **, bool);
        st = ct__function_backward(n, gout, gin, final);
    } else if (n->kind == CT_NODE_COPY_SLICES) {
        extern ct_status ct__copy_slices_backward(ct_node *, ct_tensor **, ct_tensor **);
        st = ct__copy_slices_backward(n, gout, gin);
    } else {
        ct_vjp_fn fn = n->view_vjp ? n->view_vjp : (ct_vjp_fn)ct__op_info[n->op].vjp;
        if (!fn) {
            st = ct__error_status(CT_ERR_AUTOGRAD, "%s: the derivative for '%s' is not implemented",
                                  n->name, ct__op_info[n->op].name);
        } else {
            ct_vjp_ctx c = {n, n->in, n->nin, n->out, n->nout, n->args, nd};
            st = fn(&c, gout, gin);
            if (st == CT_OK)
                for (int k = 0; k < n->nin; k++)
                    if (nd[k] && !gin[k] && ct_last_error_code() != CT_OK) st = ct_last_error_code();
        }
    }
    if (nd != needs) free(nd);
    return st;
}

typedef struct {
    ct_node *node;
    int nr;
    ct_tensor *grad; /* captured (owned) */
} capture;

/* The engine.  roots[i]/rnr[i]: the root edges and their gradients.
 * caps: autograd.grad capture points (NULL: accumulate into leaves). */
static ct_status run(ct_node *const *roots, const int *rnr, ct_tensor *const *rgrads, int nroots,
                     bool keep_graph, bool create_graph, capture *caps, int ncaps) {
    int64_t epoch = atomic_fetch_add(&g_epoch, 1);
    nodelist all = {0};
    heap ready = {0};
    nodemap needed = {0}; /* with caps: which nodes lead to a capture */
    ct_status st = CT_OK;
    bool prev_grad = ct_set_grad_enabled(create_graph);
    ct__autocast_suspend(); /* each op's backward in its forward's dtypes (amp.h) */
    ct_scope scope = ct_scope_begin();
    if (collect(roots, nroots, epoch, &all)) { st = ct__error_status(CT_ERR_OOM, "backward: out of memory"); goto out; }
    for (int i = 0; i < nroots; i++) {
        if (!roots[i]) continue;
        if ((st = buf_add(roots[i], rnr[i], rgrads[i]))) goto out;
    }
    if (caps) {
        ct_node *capn_small[16];
        ct_node **capn = ncaps <= 16 ? capn_small : malloc(sizeof *capn * (size_t)ncaps);
        if (!capn) { st = ct__error_status(CT_ERR_OOM, "backward: out of memory"); goto out; }
        for (int c = 0; c < ncaps; c++) capn[c] = caps[c].node;
        int rc = mark_needed(&all, (const ct_node *const *)capn, ncaps, &needed);
        if (capn != capn_small) free(capn);
        if (rc) { st = ct__error_status(CT_ERR_OOM, "backward: out of memory"); goto out; }
    }
    for (int i = 0; i < all.n; i++)
        if (all.v[i]->deps == 0 && heap_push(&ready, all.v[i])) { st = CT_ERR_OOM; goto out; }
    while (ready.n) {
        ct_node *n = heap_pop(&ready);
        /* what this node's backward makes dies with it, except what buf,
         * grad and the captures keep: an intermediate gradient is freed once
         * its consumer has run, not at the end of the whole backward */
        ct_scope node_scope = ct_scope_begin();
        ct_tensor *gout[64] = {0};
        ct_tensor **go = n->nout <= 64 ? gout : calloc((size_t)n->nout, sizeof(ct_tensor *));
        ct_tensor *gin_small[64] = {0};
        ct_tensor **gin = n->nin <= 64 ? gin_small : calloc((size_t)(n->nin ? n->nin : 1), sizeof(ct_tensor *));
        if (!go || !gin) { st = ct__error_status(CT_ERR_OOM, "backward: out of memory"); goto node_done; }
        int any = 0;
        for (int j = 0; j < n->nout; j++) {
            go[j] = n->buf ? n->buf[j] : NULL;
            if (go[j]) any = 1;
        }
        /* autograd.grad: a node that leads to no capture point is not run */
        bool run_bw = true;
        if (caps) {
            signed char *ns = map_slot(&needed, n, false);
            if (!ns || *ns != 3) goto node_done;
            /* a capture point whose inputs lead to no other: captured, not run */
            run_bw = false;
            for (int k = 0; k < n->nin && !run_bw; k++) {
                signed char *sc = n->next[k].node ? map_slot(&needed, n->next[k].node, false) : NULL;
                run_bw = sc && *sc == 3;
            }
        }
        /* hooks and retain_grad of non-leaf tensors */
        if (n->watch)
            for (int j = 0; j < n->nout; j++) {
                ct_tensor *t = n->watch[j];
                if (!t || !go[j]) continue;
                ct_ag_meta *m = ct__ag_peek(t);
                if (!m) continue;
                ct_tensor *g = run_hooks(m->hooks, go[j]);
                if (!g) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_AUTOGRAD; goto node_done; }
                go[j] = g;
                if (m->retains_grad) {
                    ct_tensor *keep = create_graph ? g : ct_detach(g);
                    ct_retain(keep);
                    ct_release(m->grad);
                    m->grad = keep;
                }
            }
        for (int c = 0; c < ncaps; c++)
            if (caps[c].node == n && go[caps[c].nr] && !caps[c].grad)
                caps[c].grad = ct_retain(go[caps[c].nr]);
        if (n->kind == CT_NODE_ACCUMULATE) {
            if (!caps && go[0]) {
                ct_tensor *leaf = n->leaf;
                ct_ag_meta *m = ct__ag_meta(leaf);
                ct_tensor *g = run_hooks(m ? m->hooks : NULL, go[0]);
                if (!m || !g) { st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_AUTOGRAD; goto node_done; }
                if (!m->grad) {
                    ct_tensor *keep = create_graph ? g : ct_detach(g);
                    /* a fresh tensor, so later in-place accumulation can't alias */
                    if (!create_graph && (atomic_load(&g->refcount) > 1 ||
                                          atomic_load(&g->storage->refcount) > 2 ||
                                          !ct__is_contiguous(keep)))
                        keep = ct_clone(keep);
                    if (!keep) { st = ct_last_error_code(); goto node_done; }
                    m->grad = ct_retain(keep);
                } else if (create_graph) {
                    ct_tensor *s = ct_add(m->grad, g);
                    if (!s) { st = ct_last_error_code(); goto node_done; }
                    ct_release(m->grad);
                    m->grad = ct_retain(s);
                } else {
                    if (!ct_add_(m->grad, g)) { st = ct_last_error_code(); goto node_done; }
                }
            }
        } else if (any && run_bw) {
            if ((st = check_saved(n))) goto node_done;
            ct_clear_error();
            n->accum_mask = 0;
            if ((st = call_backward(n, go, gin, !keep_graph))) goto node_done;
            for (int k = 0; k < n->nin; k++) {
                if (!n->next[k].node || !gin[k]) continue;
                if (ct__ag_anomaly() && has_nonfinite(gin[k])) {
                    st = ct__error_status(CT_ERR_AUTOGRAD, "Function '%s' returned nan values in its "
                                          "%dth output.", n->name, k);
                    goto node_done;
                }
                ct_node *nx = n->next[k].node;
                /* a VJP that added its part into the buffer itself (ct__vjp_accum) */
                if (k < 64 && (n->accum_mask >> k & 1) && nx->buf && gin[k] == nx->buf[n->next[k].nr])
                    continue;
                if ((st = buf_add(nx, n->next[k].nr, gin[k]))) goto node_done;
            }
        }
        if (!keep_graph && run_bw) release_saved(n);
    node_done:
        if (n->buf) {
            for (int j = 0; j < n->nout; j++) ct_release(n->buf[j]);
            free(n->buf);
            n->buf = NULL;
        }
        if (go != gout) free(go);
        if (gin != gin_small) free(gin);
        ct_scope_end(node_scope);
        if (st) goto out;
        for (int k = 0; k < n->nin; k++) {
            ct_node *c = n->next[k].node;
            if (c && --c->deps == 0 && heap_push(&ready, c)) { st = CT_ERR_OOM; goto out; }
        }
    }
out:
    for (int i = 0; i < all.n; i++) {
        ct_node *n = all.v[i];
        if (n->buf) {
            for (int j = 0; j < n->nout; j++) ct_release(n->buf[j]);
            free(n->buf);
            n->buf = NULL;
        }
    }
    free(all.v);
    free(ready.v);
    free(needed.k);
    free(needed.v);
    /* keep captured grads alive past the scope: they are owned by caps */
    ct_scope_end(scope);
    ct_set_grad_enabled(prev_grad);
    ct__autocast_resume();
    return st;
}

/* ---- public entry points ----------------------------------------------------- */
static ct_status root_edge(ct_tensor *t, ct_tensor *g, const char *op, ct_node **node, int *nr,
                           ct_tensor **grad) {
    if (ct__ag_refresh_view(t)) return ct_last_error_code();
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->requires_grad)
        return ct__error_status(CT_ERR_AUTOGRAD, "%s: element 0 of tensors does not require grad and "
                                "does not have a grad_fn", op);
    if (!g) {
        if (ct_numel(t) != 1)
            return ct__error_status(CT_ERR_AUTOGRAD, "%s: grad can be implicitly created only for "
                                    "scalar outputs (got shape %s)", op, ct__tshape(t));
        g = ct_ones_like(t);
        if (!g) return ct_last_error_code();
    } else if (g->ndim != t->ndim || memcmp(g->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim)) {
        return ct__error_status(CT_ERR_SHAPE, "%s: mismatch in shape: grad_output has a shape of %s "
                                "and output has a shape of %s", op, ct__tshape(g), ct__tshape(t));
    }
    if (m->grad_fn) { *node = m->grad_fn; *nr = m->output_nr; }
    else if (m->weak_fn) { *node = m->weak_fn; *nr = m->output_nr; }
    else {
        extern ct_node *ct__ag_grad_acc(ct_tensor *t);
        *node = ct__ag_grad_acc(t);
        *nr = 0;
        if (!*node) return ct_last_error_code();
    }
    *grad = g;
    return CT_OK;
}

ct_status ct_backward(ct_tensor *t, ct_tensor *grad_output, bool retain_graph, bool create_graph) {
    CT_NULLCHECK_S(t);
    ct_scope s = ct_scope_begin();
    ct_node *node = NULL;
    int nr = 0;
    ct_tensor *g = NULL;
    ct_status st = root_edge(t, grad_output, "backward", &node, &nr, &g);
    if (!st) st = run(&node, &nr, &g, 1, retain_graph || create_graph, create_graph, NULL, 0);
    ct_scope_end(s);
    extern void ct__ag_drop_grad_acc_ref(ct_node *n);
    if (node && node->kind == CT_NODE_ACCUMULATE) ct__ag_drop_grad_acc_ref(node);
    return st;
}

ct_status ct_autograd_grad(ct_tensor *const *outputs, int noutputs, ct_tensor *const *inputs,
                           int ninputs, ct_tensor *const *grad_outputs, bool retain_graph,
                           bool create_graph, bool allow_unused, ct_tensor **grads) {
    if (!outputs || !inputs || !grads || noutputs <= 0 || ninputs <= 0)
        return ct__error_status(CT_ERR_ARG, "autograd_grad: outputs, inputs and grads must be non-empty");
    for (int i = 0; i < noutputs; i++) CT_NULLCHECK_AT_S("autograd_grad", outputs, i);
    for (int i = 0; i < ninputs; i++) {
        CT_NULLCHECK_AT_S("autograd_grad", inputs, i);
        grads[i] = NULL;
        if (!ct__ag_requires_grad(inputs[i]))
            return ct__error_status(CT_ERR_AUTOGRAD, "autograd_grad: one of the differentiated "
                                    "Tensors (input %d) does not require grad", i);
    }
    ct_node **roots = calloc((size_t)noutputs, sizeof *roots);
    int *nrs = calloc((size_t)noutputs, sizeof *nrs);
    ct_tensor **rg = calloc((size_t)noutputs, sizeof *rg);
    capture *caps = calloc((size_t)ninputs, sizeof *caps);
    ct_status st = CT_OK;
    extern ct_node *ct__ag_grad_acc(ct_tensor *t);
    extern void ct__ag_drop_grad_acc_ref(ct_node *n);
    ct_scope s = ct_scope_begin();
    if (!roots || !nrs || !rg || !caps) { st = ct__error_status(CT_ERR_OOM, "autograd_grad: out of memory"); goto out; }
    for (int i = 0; i < noutputs && !st; i++)
        st = root_edge(outputs[i], grad_outputs ? grad_outputs[i] : NULL, "autograd_grad", &roots[i],
                       &nrs[i], &rg[i]);
    for (int i = 0; i < ninputs && !st; i++) {
        if ((st = ct__ag_refresh_view(inputs[i]))) break;
        ct_ag_meta *m = ct__ag_peek(inputs[i]);
        if (m->grad_fn) { caps[i].node = m->grad_fn; caps[i].nr = m->output_nr; }
        else if (m->weak_fn) { caps[i].node = m->weak_fn; caps[i].nr = m->output_nr; }
        else {
            caps[i].node = ct__ag_grad_acc(inputs[i]);
            if (!caps[i].node) st = ct_last_error_code();
        }
    }
    if (!st) st = run(roots, nrs, rg, noutputs, retain_graph || create_graph, create_graph, caps, ninputs);
    ct_scope_end(s);
    for (int i = 0; i < ninputs; i++) {
        if (!st && !caps[i].grad && !allow_unused)
            st = ct__error_status(CT_ERR_AUTOGRAD, "autograd_grad: one of the differentiated Tensors "
                                  "(input %d) appears to not have been used in the graph. Set "
                                  "allow_unused=True if this is the desired behavior.", i);
    }
    for (int i = 0; i < ninputs; i++) {
        if (caps[i].grad) {
            grads[i] = st ? NULL : ct__register(caps[i].grad);
            if (st) ct_release(caps[i].grad);
        }
        if (caps[i].node && caps[i].node->kind == CT_NODE_ACCUMULATE) ct__ag_drop_grad_acc_ref(caps[i].node);
    }
    for (int i = 0; i < noutputs; i++)
        if (roots[i] && roots[i]->kind == CT_NODE_ACCUMULATE) ct__ag_drop_grad_acc_ref(roots[i]);
    goto done;
out:
    ct_scope_end(s);
done:
    free(roots); free(nrs); free(rg); free(caps);
    return st;
}
