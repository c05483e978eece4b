/* passes.c -- the graph passes before fusion: dead code, common
 * subexpressions, constant folding, decomposition.  Each rewrites the graph
 * in place (nodes are marked dead, uses redirected) and says what it did
 * when CT_COMPILE_DEBUG is set.
 *
 * The rules, and why:
 *  - Side effects are kept: an in-place node (it writes its dst), a node
 *    without outputs (an optimizer step) and a random op (its draw advances
 *    the generator: removing or merging one would change every later draw,
 *    so the compiled function draws exactly what eager draws) are never
 *    removed or merged.
 *  - CSE merges nodes with the same op, equal parameters (ct__args_equal)
 *    and the same inputs (in either order for a commutative op without an
 *    alpha), and wrapped numbers of equal dtype and bits.  It forgets what
 *    it saw at every in-place node: a value read through a view after a
 *    write is not the value read before it, though its id is the same.
 *  - Folding runs a node eagerly at compile time when all its inputs are
 *    wrapped numbers (the 0-dim temporaries the scalar forms of ops create:
 *    nobody else holds them, so they cannot change between calls) or results
 *    folded before, and its result is 0-dim and never written in place.  The
 *    result becomes a constant of the graph.  Module parameters and buffers
 *    are constants too, but are read at each run (an optimizer updates them
 *    in place): nothing that reads one is folded.
 *  - Functionalization: an elementwise in-place write of a temporary that
 *    nothing reads afterwards becomes out of place (relu_(a + b) fuses).
 *  - Parameters, in inference graphs only: a node that reads only
 *    constants (module parameters, buffers) and makes nothing larger --
 *    BERT's cat of its q, k, v weights -- is run here and kept as a
 *    constant (ct_gfold, kind NODE), recomputed by exec when a source
 *    changes (version / exposed count), instead of at every call.
 *  - Convolution epilogues, in inference graphs only: an evaluation-time
 *    batch norm that only reads a conv is folded into the conv's weights
 *    (ct_gfold: exec refreshes them when their sources change), and a relu
 *    that only reads a conv becomes its post-op.
 *  - Decomposition: softmax, log_softmax and layer_norm_fwd are lowered
 *    directly to multi-stage kernels by lower.c (so one that does not fuse
 *    stays one node with its hand-written eager kernel); gelu and the other
 *    activations are elementwise table ops already.  ct__pass_decompose has
 *    nothing to rewrite yet and reports 0.
 */
#include "compile_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/autograd.h"
#include "../core/tensor_impl.h"
#include "../ops/ew.h"
#include "../ops/route.h"

/* CT_COMPILE_DEBUG: a line per pass on stderr (H1's ct__compile_debug_dump
 * takes over when capture.c lands) */
static void report(const char *pass, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(const char *pass, const char *fmt, ...) {
    const char *e = getenv("CT_COMPILE_DEBUG");
    if (!e || !*e) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ct_compile: pass %s: ", pass);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static bool has_effect(const ct_gnode *n) {
    if (n->dst >= 0 || n->nout == 0) return true;
    if (ct__op_info[n->op].flags & CT_OPF_RANDOM) return true;
    bool any = false;
    for (int k = 0; k < n->nout; k++) any = any || n->out[k] >= 0;
    return !any;
}

/* ---- dead code ---------------------------------------------------------------- */
ct_status ct__pass_dce(ct_graph *g, int *count) {
    ct__graph_uses(g);
    int removed = 0;
    for (int i = g->nn - 1; i >= 0; i--) {
        ct_gnode *n = &g->n[i];
        if (n->dead || has_effect(n)) continue;
        bool used = false;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0 && g->v[n->out[k]].nuses > 0) used = true;
        if (used) continue;
        n->dead = true;
        removed++;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0) g->v[n->in[k]].nuses--;
    }
    report("dce", "%d dead node%s removed", removed, removed == 1 ? "" : "s");
    if (count) *count += removed;
    return CT_OK;
}

/* ---- common subexpressions -------------------------------------------------------- */
static bool wrapped(const ct_graph *g, int v) {
    const ct_gvalue *x = &g->v[v];
    if (x->kind != CT_GV_CONST) return false;
    const ct_tensor *t = g->consts[x->index];
    return t && (t->flags & CT_TF_WRAPPED) && t->ndim == 0;
}

static int resolve(const int *repl, int v) {
    while (v >= 0 && repl[v] >= 0 && repl[v] != v) v = repl[v];
    return v;
}

/* node i's inputs in canonical order (commutative ops without alpha: sorted) */
static void key_inputs(const ct_gnode *n, int *in) {
    for (int k = 0; k < n->nin; k++) in[k] = n->in[k];
    bool comm = (ct__op_info[n->op].flags & CT_OPF_COMM) && n->nin == 2;
    if (comm && (n->op == CT_OP_add || n->op == CT_OP_sub) && n->args.p.ew.has_alpha) comm = false;
    if (comm && in[0] > in[1]) {
        int t = in[0];
        in[0] = in[1];
        in[1] = t;
    }
}

static uint64_t node_hash(const ct_gnode *n, const int *in) {
    uint64_t h = ct__args_hash(&n->args) ^ ((uint64_t)n->nin * 0x9E3779B97F4A7C15ull);
    for (int k = 0; k < n->nin; k++) h = (h ^ (uint64_t)(int64_t)in[k]) * 0x100000001B3ull;
    return h ^ (uint64_t)n->nout;
}

static bool same_node(const ct_graph *g, const ct_gnode *a, const int *ia, const ct_gnode *b,
                      const int *ib) {
    if (a->op != b->op || a->nin != b->nin || a->nout != b->nout) return false;
    for (int k = 0; k < a->nin; k++)
        if (ia[k] != ib[k]) return false;
    for (int k = 0; k < a->nout; k++) {
        if ((a->out[k] < 0) != (b->out[k] < 0)) return false;
        if (a->out[k] < 0) continue;
        const ct_meta *ma = &g->v[a->out[k]].meta, *mb = &g->v[b->out[k]].meta;
        if (ma->dtype != mb->dtype || ma->ndim != mb->ndim) return false;
    }
    return ct__args_equal(&a->args, &b->args);
}

ct_status ct__pass_cse(ct_graph *g, int *count) {
    int *repl = malloc(sizeof(int) * ((size_t)g->nv + 1));
    int cap = 16;
    while (cap < 2 * g->nn + 2) cap *= 2;
    int *table = malloc(sizeof(int) * (size_t)cap);
    int *kin = malloc(sizeof(int) * ((size_t)g->nn + 1) * 8), *nin_buf = NULL;
    (void)nin_buf;
    if (!repl || !table || !kin) {
        free(repl);
        free(table);
        free(kin);
        return ct__error_status(CT_ERR_OOM, "compile: out of memory in cse");
    }
    for (int v = 0; v < g->nv; v++) repl[v] = -1;
    for (int k = 0; k < cap; k++) table[k] = -1;
    /* wrapped numbers of one dtype and bits are one value */
    int merged_consts = 0;
    for (int v = 0; v < g->nv; v++) {
        if (!wrapped(g, v)) continue;
        const ct_tensor *t = g->consts[g->v[v].index];
        for (int u = 0; u < v; u++) {
            if (!wrapped(g, u) || repl[u] >= 0) continue;
            const ct_tensor *s = g->consts[g->v[u].index];
            if (s->dtype == t->dtype && memcmp(ct__ptr(s), ct__ptr(t), ct_dtype_size(t->dtype)) == 0) {
                repl[v] = u;
                merged_consts++;
                break;
            }
        }
    }
    int merged = 0;
    for (int i = 0; i < g->nn; i++) {
        ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->nin; k++) n->in[k] = resolve(repl, n->in[k]);
        if (n->dst >= 0) n->dst = resolve(repl, n->dst);
        if (n->dst >= 0) { /* a write: what was seen may read differently now */
            for (int k = 0; k < cap; k++) table[k] = -1;
            continue;
        }
        if (has_effect(n) || n->nin > 8) continue;
        int *in = kin + (size_t)i * 8;
        key_inputs(n, in);
        uint64_t h = node_hash(n, in);
        int slot = (int)(h & (uint64_t)(cap - 1));
        int found = -1;
        while (table[slot] >= 0) {
            int j = table[slot];
            if (!g->n[j].dead && same_node(g, &g->n[j], kin + (size_t)j * 8, n, in)) {
                found = j;
                break;
            }
            slot = (slot + 1) & (cap - 1);
        }
        if (found < 0) {
            table[slot] = i;
            continue;
        }
        const ct_gnode *m = &g->n[found];
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) repl[n->out[k]] = m->out[k];
        n->dead = true;
        merged++;
    }
    for (int k = 0; k < g->nout; k++) g->outputs[k] = resolve(repl, g->outputs[k]);
    for (int v = 0; v < g->nv; v++)
        if (g->v[v].alias >= 0) g->v[v].alias = resolve(repl, g->v[v].alias);
    free(repl);
    free(table);
    free(kin);
    ct__graph_uses(g);
    report("cse", "%d node%s merged, %d wrapped number%s shared", merged, merged == 1 ? "" : "s",
           merged_consts, merged_consts == 1 ? "" : "s");
    if (count) *count += merged;
    return CT_OK;
}

/* ---- constant folding ---------------------------------------------------------- */
static int add_const(ct_graph *g, ct_tensor *t) {
    if (g->nconst == g->cap_const) {
        int nc = g->cap_const ? 2 * g->cap_const : 8;
        ct_tensor **q = realloc(g->consts, sizeof *q * (size_t)nc);
        if (!q) return -1;
        g->consts = q;
        g->cap_const = nc;
    }
    g->consts[g->nconst] = t;
    return g->nconst++;
}

ct_status ct__pass_fold(ct_graph *g, int *count) {
    bool *foldable = calloc((size_t)g->nv + 1, 1); /* a wrapped number or a folded result */
    bool *written = calloc((size_t)g->nv + 1, 1);
    if (!foldable || !written) {
        free(foldable);
        free(written);
        return ct__error_status(CT_ERR_OOM, "compile: out of memory in fold");
    }
    for (int v = 0; v < g->nv; v++) foldable[v] = wrapped(g, v);
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead && g->n[i].dst >= 0)
            for (int v = g->n[i].dst; v >= 0 && !written[v]; v = g->v[v].alias) written[v] = true;
    for (int v = 0; v < g->nv; v++) /* a view of a value shares its fate */
        if (g->v[v].alias >= 0 && written[v]) written[g->v[v].alias] = true;
    int folded = 0;
    ct_status st = CT_OK;
    for (int i = 0; i < g->nn; i++) {
        ct_gnode *n = &g->n[i];
        if (n->dead || has_effect(n) || n->nout != 1 || n->out[0] < 0) continue;
        unsigned fl = ct__op_info[n->op].flags;
        if (fl & (CT_OPF_VIEW | CT_OPF_RANDOM)) continue;
        int v = n->out[0];
        if (g->v[v].meta.ndim != 0 || written[v] || g->v[v].meta.device != CT_CPU) continue;
        bool ok = n->nin > 0 || n->op == CT_OP_fill;
        for (int k = 0; k < n->nin && ok; k++) ok = n->in[k] >= 0 && foldable[n->in[k]];
        if (!ok || n->nin > 8) continue;
        ct_tensor *in[8];
        for (int k = 0; k < n->nin; k++) in[k] = g->consts[g->v[n->in[k]].index];
        bool prev = ct_set_grad_enabled(false);
        ct_scope s = ct_scope_begin();
        ct_tensor *out[1] = {NULL};
        ct_status r = ct__op_multi(n->op, out, 1, in, n->nin, &n->args);
        ct_tensor *t = r == CT_OK && out[0] ? ct_retain(out[0]) : NULL;
        ct_scope_end(s);
        ct_set_grad_enabled(prev);
        if (!t) { /* the op fails on these values: leave it to run (and fail) as traced */
            ct_clear_error();
            continue;
        }
        if (t->dtype != g->v[v].meta.dtype || t->ndim != 0) {
            ct_release(t);
            continue;
        }
        int c = add_const(g, t);
        if (c < 0) {
            ct_release(t);
            st = ct__error_status(CT_ERR_OOM, "compile: out of memory in fold");
            break;
        }
        g->v[v].kind = CT_GV_CONST;
        g->v[v].index = c;
        g->v[v].out = 0;
        n->dead = true;
        foldable[v] = true;
        folded++;
    }
    free(foldable);
    free(written);
    ct__graph_uses(g);
    report("fold", "%d node%s folded into constants", folded, folded == 1 ? "" : "s");
    if (count) *count += folded;
    return st;
}

/* ---- convolution epilogues (inference) ------------------------------------------- */
/* The folded weights of f from its sources' current values: W * s and
 * (b - mean) * s + beta, s = gamma / sqrt(var + eps) per output channel
 * (torch.fx's fuse_conv_bn_weights, in the weights' dtype).  New tensors
 * (*dw, *db: owned by the caller) or an error. */
static ct_status fold_compute(ct_tensor *const *consts, const ct_gfold *f, ct_tensor **dw, ct_tensor **db) {
    ct_tensor *W = consts[f->src[0]], *b = f->src[1] >= 0 ? consts[f->src[1]] : NULL;
    ct_tensor *rm = consts[f->src[2]], *rv = consts[f->src[3]];
    ct_tensor *gw = f->src[4] >= 0 ? consts[f->src[4]] : NULL, *bb = f->src[5] >= 0 ? consts[f->src[5]] : NULL;
    bool prev = ct_set_grad_enabled(false);
    ct_scope sc = ct_scope_begin();
    ct_tensor *sc_ = ct_rsqrt(ct_add_scalar(rv, f->eps));
    if (gw) sc_ = ct_mul(sc_, gw);
    int64_t shp[CT_MAX_DIMS];
    int nd = W->ndim;
    shp[0] = -1;
    for (int d = 1; d < nd; d++) shp[d] = 1;
    ct_tensor *w2 = ct_contiguous(ct_mul(W, ct_view(sc_, shp, nd)));
    ct_tensor *b2 = ct_mul(b ? ct_sub(b, rm) : ct_neg(rm), sc_);
    if (bb) b2 = ct_add(b2, bb);
    b2 = ct_contiguous(b2);
    ct_status st = w2 && b2 ? CT_OK : ct_last_error_code();
    if (!st) {
        *dw = ct_retain(w2);
        *db = ct_retain(b2);
    }
    ct_scope_end(sc);
    ct_set_grad_enabled(prev);
    return st;
}

static void fold_stamp(ct_tensor *const *consts, ct_gfold *f) {
    for (int k = 0; k < f->nsrc; k++) {
        if (f->src[k] < 0) continue;
        const ct_storage *s = consts[f->src[k]]->storage;
        f->ver[k] = atomic_load(&s->version);
        f->exp[k] = atomic_load(&s->exposed);
    }
}

/* A node fold's result from its sources' current values (a new tensor in
 * *out, owned by the caller), on storage of its own, or an error. */
static ct_status fold_node_compute(ct_tensor *const *consts, const ct_gfold *f, ct_tensor **out) {
    ct_tensor *in[CT_GFOLD_MAXSRC];
    for (int k = 0; k < f->nsrc; k++) in[k] = consts[f->src[k]];
    bool prev = ct_set_grad_enabled(false);
    ct_scope sc = ct_scope_begin();
    ct_tensor *o[1] = {NULL};
    ct_status st = ct__op_multi(f->args.op, o, 1, in, f->nsrc, &f->args);
    *out = NULL;
    if (!st && o[0]) {
        /* a result on a source's storage (an op that may return its
         * operand) would make a refresh write the source */
        bool own = o[0]->storage && o[0]->storage->device == CT_CPU;
        for (int k = 0; k < f->nsrc && own; k++) own = o[0]->storage != in[k]->storage;
        if (own) *out = ct_retain(o[0]);
        else st = CT_ERR_ARG;
    } else if (!st) {
        st = CT_ERR_RUNTIME;
    }
    ct_scope_end(sc);
    ct_set_grad_enabled(prev);
    return st;
}

ct_status ct__graph_refresh_folds(const ct_graph *g) {
    for (int i = 0; i < g->nfold; i++) {
        ct_gfold *f = &g->folds[i];
        bool stale = false;
        for (int k = 0; k < f->nsrc && !stale; k++) {
            if (f->src[k] < 0) continue;
            const ct_storage *s = g->consts[f->src[k]]->storage;
            stale = atomic_load(&s->version) != f->ver[k] || atomic_load(&s->exposed) != f->exp[k];
        }
        if (!stale) continue;
        ct_tensor *dw = NULL, *db = NULL;
        ct_status st = f->kind == CT_GFOLD_NODE ? fold_node_compute(g->consts, f, &dw)
                                                : fold_compute(g->consts, f, &dw, &db);
        if (!st) {
            bool prev = ct_set_grad_enabled(false);
            /* in place: the nodes read these tensors (copy_ bumps their
             * versions, so a kept oneDNN copy of the weights, or the GEMM's
             * packed copy, is remade) */
            if (!ct_copy_(g->consts[f->dw], dw) || (db && !ct_copy_(g->consts[f->db], db)))
                st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
            ct_set_grad_enabled(prev);
        }
        ct_release(dw);
        ct_release(db);
        if (st) return st;
        fold_stamp(g->consts, f);
    }
    return CT_OK;
}

/* The nodes after node `from` that read value v (as an input or the value
 * they write): how many, and the first. */
static int readers(const ct_graph *g, int from, int v, int *first) {
    int n = 0;
    *first = -1;
    for (int j = from + 1; j < g->nn; j++) {
        const ct_gnode *m = &g->n[j];
        if (m->dead) continue;
        bool r = m->dst == v;
        for (int k = 0; k < m->nin && !r; k++) r = m->in[k] == v;
        if (!r) continue;
        if (n++ == 0) *first = j;
    }
    return n;
}

/* Every reader of value a reads value b instead. */
static void redirect(ct_graph *g, int a, int b) {
    for (int j = 0; j < g->nn; j++) {
        ct_gnode *m = &g->n[j];
        if (m->dead) continue;
        for (int k = 0; k < m->nin; k++)
            if (m->in[k] == a) m->in[k] = b;
        if (m->dst == a) m->dst = b;
    }
    for (int k = 0; k < g->nout; k++)
        if (g->outputs[k] == a) g->outputs[k] = b;
    for (int v = 0; v < g->nv; v++)
        if (g->v[v].alias == a) g->v[v].alias = b;
}

static bool is_const(const ct_graph *g, int v) { return v >= 0 && g->v[v].kind == CT_GV_CONST; }

static bool graph_output(const ct_graph *g, int v) {
    for (int k = 0; k < g->nout; k++)
        if (g->outputs[k] == v) return true;
    return false;
}

/* Folds batch-norm node j (evaluation) into conv node i, whose only reader it is. */
static ct_status fold_bn(ct_graph *g, int i, int j, bool *done) {
    ct_gnode *n = &g->n[i], *m = &g->n[j];
    *done = false;
    const ct_p_batch_norm *pb = &m->args.p.batch_norm;
    int x = n->out[0];
    int want = 3 + pb->has_weight + pb->has_bias;
    if (m->nin != want || m->in[0] != x || m->dst >= 0 || m->nout != 1 || m->out[0] < 0) return CT_OK;
    for (int k = 1; k < m->nin; k++)
        if (!is_const(g, m->in[k])) return CT_OK;
    ct_dtype dt = g->v[x].meta.dtype;
    int64_t Co = n->args.p.conv.out_channels;
    for (int k = 1; k < m->nin; k++) {
        const ct_tensor *t = g->consts[g->v[m->in[k]].index];
        if (t->dtype != dt || t->ndim != 1 || t->sizes[0] != Co || t->storage->device != CT_CPU) return CT_OK;
    }
    ct_gfold f;
    memset(&f, 0, sizeof f);
    f.kind = CT_GFOLD_BN;
    f.nsrc = 6;
    if (n->nin == 2) { /* a conv without bias gets the slot for the folded one */
        int *in = realloc(n->in, sizeof(int) * 3);
        if (!in) return ct__error_status(CT_ERR_OOM, "compile: out of memory folding a batch norm");
        n->in = in;
        n->in[2] = -1;
        n->nin = 3;
    }
    f.src[0] = g->v[n->in[1]].index;
    f.src[1] = n->in[2] >= 0 ? g->v[n->in[2]].index : -1;
    f.src[2] = g->v[m->in[1]].index;
    f.src[3] = g->v[m->in[2]].index;
    int k = 3;
    f.src[4] = pb->has_weight ? g->v[m->in[k++]].index : -1;
    f.src[5] = pb->has_bias ? g->v[m->in[k++]].index : -1;
    f.eps = pb->eps;
    fold_stamp(g->consts, &f);
    ct_tensor *dw = NULL, *db = NULL;
    if (fold_compute(g->consts, &f, &dw, &db)) { /* cannot fold (it would fail eagerly too): leave it */
        ct_clear_error();
        return CT_OK;
    }
    ct_gfold *nf = realloc(g->folds, sizeof *nf * (size_t)(g->nfold + 1));
    if (nf) g->folds = nf;
    int cw = nf ? add_const(g, dw) : -1; /* the graph owns what add_const took */
    int cb = cw >= 0 ? add_const(g, db) : -1;
    if (cb < 0) {
        if (cw < 0) ct_release(dw);
        ct_release(db);
        return ct__error_status(CT_ERR_OOM, "compile: out of memory folding a batch norm");
    }
    ct_meta mw, mb;
    ct__meta_like(&mw, dw, dw->dtype);
    ct__meta_like(&mb, db, db->dtype);
    int vw = ct__graph_value(g, CT_GV_CONST, cw, 0, &mw); /* moves g->v, not the nodes */
    int vb = vw >= 0 ? ct__graph_value(g, CT_GV_CONST, cb, 0, &mb) : -1;
    if (vb < 0) return ct_last_error_code();
    f.dw = cw;
    f.db = cb;
    g->folds[g->nfold++] = f;
    int y = m->out[0];
    bool relu = pb->relu;
    m->dead = true;
    n->in[1] = vw;
    n->in[2] = vb;
    n->args.p.conv.keep_weights = true; /* the graph's own tensors: only a refresh writes them */
    if (relu) n->args.p.conv.post_relu = true;
    redirect(g, y, x);
    *done = true;
    return CT_OK;
}

/* ---- constants of inference graphs (ct__pass_fold_params) ------------------------ */
ct_status ct__pass_fold_params(ct_graph *g, int *count) {
    if (g->record_grad || g->joint || g->explicit_grad) {
        report("fold_params", "skipped (a graph of training)");
        return CT_OK;
    }
    /* values some node writes (their storages: a view shares its root's fate) */
    bool *written = calloc((size_t)g->nv + 1, 1);
    if (!written) return ct__error_status(CT_ERR_OOM, "compile: out of memory folding parameters");
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead && g->n[i].dst >= 0)
            for (int v = g->n[i].dst; v >= 0 && !written[v]; v = g->v[v].alias) written[v] = true;
    for (int v = 0; v < g->nv; v++)
        if (g->v[v].alias >= 0 && written[v]) written[g->v[v].alias] = true;
    int folded = 0;
    ct_status st = CT_OK;
    for (int i = 0; i < g->nn && !st; i++) {
        ct_gnode *n = &g->n[i];
        if (n->dead || has_effect(n) || n->dst >= 0 || n->nout != 1 || n->out[0] < 0 || n->nin < 1 ||
            n->nin > CT_GFOLD_MAXSRC)
            continue;
        if (ct__op_info[n->op].flags & (CT_OPF_VIEW | CT_OPF_RANDOM)) continue;
        int v = n->out[0];
        if (written[v] || g->v[v].alias >= 0 || g->v[v].meta.device != CT_CPU || graph_output(g, v)) continue;
        bool ok = true;
        int64_t insz = 0;
        for (int k = 0; k < n->nin && ok; k++) {
            int x = n->in[k];
            ok = is_const(g, x) && !written[x] && g->v[x].alias < 0;
            if (!ok) break;
            const ct_tensor *t = g->consts[g->v[x].index];
            ok = t->storage && t->storage->device == CT_CPU && t->storage->uid != 0;
            insz += ok ? ct_numel(t) : 0;
        }
        /* wrapped numbers alone are ct__pass_fold's (0-dim, never refreshed) */
        if (!ok || insz <= n->nin) continue;
        int64_t outsz = 1;
        for (int d = 0; d < g->v[v].meta.ndim; d++) outsz *= g->v[v].meta.sizes[d];
        if (outsz > insz) continue;
        ct_gfold f;
        memset(&f, 0, sizeof f);
        f.kind = CT_GFOLD_NODE;
        f.nsrc = n->nin;
        f.args = n->args;
        f.args.op = n->op;
        f.db = -1;
        for (int k = 0; k < n->nin; k++) f.src[k] = g->v[n->in[k]].index;
        fold_stamp(g->consts, &f);
        ct_tensor *t = NULL;
        if (fold_node_compute(g->consts, &f, &t)) { /* it would fail (or alias) eagerly too: leave it */
            ct_clear_error();
            continue;
        }
        const ct_meta *m = &g->v[v].meta;
        bool same = t->dtype == m->dtype && t->ndim == m->ndim && ct__is_contiguous(t);
        for (int d = 0; d < m->ndim && same; d++) same = t->sizes[d] == m->sizes[d];
        ct_gfold *nf = same ? realloc(g->folds, sizeof *nf * (size_t)(g->nfold + 1)) : NULL;
        if (nf) g->folds = nf;
        int c = nf ? add_const(g, t) : -1;
        if (c < 0) {
            ct_release(t);
            if (same) st = ct__error_status(CT_ERR_OOM, "compile: out of memory folding parameters");
            continue;
        }
        f.dw = c;
        g->folds[g->nfold++] = f;
        /* the value is that constant now (its geometry: the result's, contiguous) */
        ct__meta_like(&g->v[v].meta, t, t->dtype);
        g->v[v].kind = CT_GV_CONST;
        g->v[v].index = c;
        g->v[v].out = 0;
        n->dead = true;
        folded++;
    }
    free(written);
    ct__graph_uses(g);
    report("fold_params", "%d node%s of parameters folded into kept constants", folded, folded == 1 ? "" : "s");
    if (count) *count += folded;
    return st;
}

ct_status ct__pass_conv_epilogue(ct_graph *g, int *count) {
    int folded = 0, fused = 0;
    if (g->record_grad || g->joint) {
        report("conv_epilogue", "skipped (autograd records this graph)");
        return CT_OK;
    }
    for (int i = 0; i < g->nn; i++) {
        ct_gnode *n = &g->n[i];
        if (n->dead || n->op != CT_OP_conv || n->dst >= 0 || n->nout != 1 || n->out[0] < 0 || n->nin < 2 ||
            n->nin > 3)
            continue;
        int x = n->out[0];
        ct_dtype dt = g->v[x].meta.dtype;
        if ((dt != CT_F32 && dt != CT_F64) || g->v[x].meta.device != CT_CPU) continue;
        for (int round = 0; round < 3 && !n->args.p.conv.post_relu; round++) {
            if (graph_output(g, x)) break;
            int j, nr = readers(g, i, x, &j);
            if (nr != 1) break;
            ct_gnode *m = &g->n[j];
            /* (a half of a training graph: its parameters change every step
             * and its batch norms are the training ones; relus still fuse) */
            if (m->op == CT_OP_batch_norm_eval && !g->explicit_grad && is_const(g, n->in[1]) &&
                (n->nin < 3 || n->in[2] < 0 || is_const(g, n->in[2]))) {
                bool done;
                ct_status st = fold_bn(g, i, j, &done);
                if (st) return st;
                n = &g->n[i];
                if (!done) break;
                folded++;
                if (n->args.p.conv.post_relu) fused++;
                continue;
            }
            /* relu(x) or relu_(x) */
            bool relu = m->op == CT_OP_relu && m->nin == 1 && m->in[0] == x && m->nout == 1 && m->out[0] >= 0 &&
                        (m->dst < 0 || m->dst == x) && g->v[m->out[0]].meta.dtype == dt;
            if (!relu) break;
            int y = m->out[0];
            m->dead = true;
            n->args.p.conv.post_relu = true;
            redirect(g, y, x);
            fused++;
        }
    }
    ct__graph_uses(g);
    report("conv_epilogue", "%d batch norm%s folded into convolutions, %d relu%s fused", folded,
           folded == 1 ? "" : "s", fused, fused == 1 ? "" : "s");
    if (count) *count += folded + fused;
    return CT_OK;
}

/* ---- channel-blocked activations between convolutions ---------------------------
 * oneDNN's forward convolutions keep their activations channel-blocked
 * (nChw8c on AVX2); each one called on NCHW tensors reorders its input in
 * and its result out: ~12 of ~85 ms of a ResNet-50 batch-1 inference here
 * (ONEDNN_VERBOSE, AMD EPYC Zen 3, 2 threads).  In an inference graph a
 * value produced by a convolution (its batch norm folded, its relu fused)
 * and read only by convolutions and by elementwise ops whose every tensor
 * operand is such a value (the residual add and its relu) is held blocked,
 * [N, C/8, H, W, 8] (ct_p_conv.blocked; Inductor's mkldnn layout
 * propagation): the convolutions read and write it as is, the elementwise
 * ops run on it unchanged (the same element to element).  What leaves the
 * chain -- a graph output, a pooling, a view, anything else -- is NCHW, so
 * the convolution or elementwise op before it writes NCHW; a value that an
 * elementwise op with an NCHW result reads is NCHW too (its operands share
 * its layout), the fixed point below.  Only convolutions that go to oneDNN
 * take part (ct__conv_blocked_pays; none without oneDNN): 2-D, batched,
 * groups 1, f32 on the cpu, 8k channels on the blocked side. */
static bool blk_conv(const ct_graph *g, const ct_gnode *n) {
    if (n->dead || n->op != CT_OP_conv || n->dst >= 0 || n->nout != 1 || n->out[0] < 0 || n->nin < 2 ||
        n->nin > 3 || n->in[0] < 0)
        return false;
    const ct_p_conv *pc = &n->args.p.conv;
    const ct_meta *x = &g->v[n->in[0]].meta, *y = &g->v[n->out[0]].meta;
    if (pc->spatial_dims != 2 || pc->groups != 1 || pc->blocked || x->ndim != 4 || y->ndim != 4 ||
        x->dtype != CT_F32 || x->device != CT_CPU)
        return false;
    for (int k = 1; k < n->nin; k++)
        if (n->in[k] == n->in[0]) return false;
    return ct__conv_blocked_pays && ct__conv_blocked_pays(pc);
}

static bool blk_ew(const ct_gnode *n) {
    unsigned fl = ct__op_info[n->op].flags;
    return !n->dead && (fl & CT_OPF_EW) && !(fl & CT_OPF_RANDOM) && n->op != CT_OP_copy && n->op != CT_OP_fill &&
           n->dst < 0 && n->nout == 1 && n->out[0] >= 0 && n->nin >= 1;
}

ct_status ct__pass_conv_layout(ct_graph *g, int *count) {
    if (g->record_grad || g->joint || g->explicit_grad || !ct__conv_blocked_pays) {
        report("conv_layout", "skipped (%s)", ct__conv_blocked_pays ? "autograd records this graph" : "no oneDNN");
        return CT_OK;
    }
    bool *cand = calloc((size_t)g->nv + 1, 1), *conv_ok = calloc((size_t)g->nn + 1, 1);
    int *prod = malloc(sizeof(int) * ((size_t)g->nv + 1));
    if (!cand || !conv_ok || !prod) {
        free(cand); free(conv_ok); free(prod);
        return ct__error_status(CT_ERR_OOM, "compile: out of memory in the layout pass");
    }
    for (int v = 0; v < g->nv; v++) prod[v] = -1;
    int nconv = 0;
    /* candidates, in program order */
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        if (blk_conv(g, n)) {
            conv_ok[i] = true;
            nconv++;
            int y = n->out[0];
            const ct_gvalue *gv = &g->v[y];
            if (n->args.p.conv.out_channels % 8 == 0 && gv->sym[1] < 0 && gv->alias < 0) {
                cand[y] = true;
                prod[y] = i;
            }
        } else if (blk_ew(n)) {
            int y = n->out[0];
            const ct_gvalue *gv = &g->v[y];
            bool ok = gv->meta.ndim == 4 && gv->alias < 0, any = false;
            for (int k = 0; k < n->nin && ok; k++) {
                int x = n->in[k];
                if (x < 0) { ok = false; break; }
                if (g->v[x].meta.ndim == 0) continue;
                ok = cand[x] && g->v[x].meta.dtype == gv->meta.dtype &&
                     !memcmp(g->v[x].meta.sizes, gv->meta.sizes, sizeof(int64_t) * 4);
                any = true;
            }
            if (ok && any) {
                cand[y] = true;
                prod[y] = i;
            }
        }
    }
    /* the fixed point: drop what a reader needs as NCHW */
    for (bool changed = nconv > 0; changed;) {
        changed = false;
        for (int v = 0; v < g->nv; v++) {
            if (!cand[v]) continue;
            bool bad = graph_output(g, v);
            for (int u = 0; u < g->nv && !bad; u++) bad = g->v[u].alias == v;
            for (int j = 0; j < g->nn && !bad; j++) {
                const ct_gnode *m = &g->n[j];
                if (m->dead) continue;
                bool reads = m->dst == v;
                for (int k = 0; k < m->nin && !reads; k++) reads = m->in[k] == v;
                if (!reads) continue;
                if (m->dst == v) bad = true;
                else if (conv_ok[j] && m->in[0] == v) bad = m->args.p.conv.in_channels % 8 != 0;
                else bad = !(blk_ew(m) && cand[m->out[0]]);
            }
            const ct_gnode *pn = prod[v] >= 0 ? &g->n[prod[v]] : NULL;
            if (!bad && pn && pn->op != CT_OP_conv)
                for (int k = 0; k < pn->nin && !bad; k++)
                    bad = g->v[pn->in[k]].meta.ndim != 0 && !cand[pn->in[k]];
            if (bad) {
                cand[v] = false;
                changed = true;
            }
        }
    }
    /* the rewrite: blocked values' geometry, the convolutions' layout bits */
    int nval = 0, nblk = 0;
    for (int v = 0; v < g->nv; v++) {
        if (!cand[v]) continue;
        ct_gvalue *gv = &g->v[v];
        int64_t N = gv->meta.sizes[0], C = gv->meta.sizes[1], H = gv->meta.sizes[2], W = gv->meta.sizes[3];
        int s0 = gv->sym[0], s2 = gv->sym[2], s3 = gv->sym[3];
        int64_t sz[5] = {N, C / 8, H, W, 8};
        gv->meta.ndim = 5;
        gv->meta.flags = 0;
        int64_t st = 1;
        for (int d = 4; d >= 0; d--) {
            gv->meta.sizes[d] = sz[d];
            gv->meta.strides[d] = st;
            st *= sz[d];
        }
        int sym[5] = {s0, -1, s2, s3, -1};
        for (int d = 0; d < CT_MAX_DIMS; d++) gv->sym[d] = d < 5 ? sym[d] : -1;
        nval++;
    }
    for (int i = 0; i < g->nn; i++) {
        if (!conv_ok[i]) continue;
        ct_gnode *n = &g->n[i];
        int64_t b = (cand[n->in[0]] ? 1 : 0) | (cand[n->out[0]] ? 2 : 0);
        n->args.p.conv.blocked = b;
        nblk += b != 0;
    }
    free(cand);
    free(conv_ok);
    free(prod);
    ct__graph_uses(g);
    report("conv_layout", "%d of %d convolution%s read or write channel-blocked values, %d value%s blocked", nblk,
           nconv, nconv == 1 ? "" : "s", nval, nval == 1 ? "" : "s");
    if (count) *count += nblk;
    return CT_OK;
}

/* ---- activation gradients before the max pool's scatter ---------------------------
 * y = act(x) pooled by a max pool (v, idx = max_pool(y)) has, in the joint
 * graph, the backward  ew_grad(max_pool_backward(g, idx), y): a scatter of
 * the pooled gradient to a full-size tensor of zeros, then the activation's
 * derivative over the full size.  The relu gradient is g * [t > 0], a
 * factor of t alone; the scatter's nonzero entries sit at argmax
 * positions, where t is the window's maximum, which is v; everywhere else
 * both forms give 0 (0 times any factor of a number, relu's 0 for NaN too)
 * -- so it equals max_pool_backward(ew_grad(g, v), idx), the derivative
 * over the pooled size (1/4 of the elements for 2x2 windows).  Overlapping
 * windows add several g's at one position: the factor is the same for
 * each, so it distributes.  The backward then reads v (saved anyway when
 * the next layer reads it) instead of y.  RELU only (the other kinds
 * multiply: 0 * f(NaN) would differ). */
ct_status ct__pass_pool_grad(ct_graph *g, int *count) {
    int done = 0;
    for (int i = 0; i < g->nn; i++) {
        ct_gnode *e = &g->n[i];
        if (e->dead || e->op != CT_OP_ew_grad || e->args.p.ew_grad.kind != CT_EWG_RELU || e->nin != 2 ||
            e->dst >= 0 || e->nout != 1 || e->out[0] < 0 || e->in[0] < 0 || e->in[1] < 0)
            continue;
        int P = e->in[0], T = e->in[1];
        if (g->v[P].kind != CT_GV_NODE || graph_output(g, P)) continue;
        int im = g->v[P].index;
        ct_gnode *mb = &g->n[im];
        if (mb->dead || mb->op != CT_OP_max_pool_backward || mb->nin != 2 || mb->nout != 1 || mb->dst >= 0 ||
            mb->in[0] < 0 || mb->in[1] < 0)
            continue;
        int G = mb->in[0], IDX = mb->in[1], first;
        if (readers(g, im, P, &first) != 1 || first != i) continue;
        /* the forward max pool that read t and made these indices */
        int V = -1;
        for (int j = 0; j < im && V < 0; j++) {
            const ct_gnode *fp = &g->n[j];
            if (!fp->dead && fp->op == CT_OP_max_pool && fp->nin == 1 && fp->in[0] == T && fp->nout == 2 &&
                fp->out[1] == IDX && fp->out[0] >= 0 && fp->dst < 0 &&
                !memcmp(&fp->args.p.pool, &mb->args.p.pool, sizeof fp->args.p.pool))
                V = fp->out[0];
        }
        if (V < 0) continue;
        const ct_meta *mg = &g->v[G].meta, *mv = &g->v[V].meta;
        if (mg->dtype != mv->dtype || mg->ndim != mv->ndim ||
            memcmp(mg->sizes, mv->sizes, sizeof(int64_t) * (size_t)mg->ndim) ||
            g->v[T].meta.dtype != mv->dtype || mg->device != CT_CPU)
            continue;
        /* node im: ew_grad(G, V) -> P, now of the pooled shape; node i:
         * max_pool_backward(P, IDX) -> e's output as before */
        ct_args ma = mb->args, ea = e->args;
        uint32_t mc = mb->contig_in;
        mb->op = CT_OP_ew_grad;
        mb->args = ea;
        mb->args.op = CT_OP_ew_grad;
        mb->in[0] = G;
        mb->in[1] = V;
        mb->contig_in = 3u; /* the kernel's operands as contiguous copies when they are not */
        g->v[P].meta = *mv;
        memcpy(g->v[P].sym, g->v[V].sym, sizeof g->v[P].sym);
        g->v[P].alias = -1;
        e->op = CT_OP_max_pool_backward;
        e->args = ma;
        e->args.op = CT_OP_max_pool_backward;
        e->in[0] = P;
        e->in[1] = IDX;
        e->contig_in = mc;
        done++;
    }
    /* A sum over the spatial positions of a max pool's input gradient (a
     * conv bias's gradient: the planes viewed [..., H*W], the last dim
     * reduced) adds the scatter's entries, which are the pooled gradient's
     * (the zeros add nothing): it sums the pooled gradient instead,
     * viewed [..., h*w] (the same numbers in another order of addition). */
    int sums = 0;
    for (int i = 0; i < g->nn; i++) {
        ct_gnode *sn = &g->n[i];
        if (sn->dead || sn->op != CT_OP_sum || sn->nin != 1 || sn->in[0] < 0 || sn->dst >= 0) continue;
        int W = sn->in[0];
        if (g->v[W].kind != CT_GV_NODE || graph_output(g, W)) continue;
        int iv = g->v[W].index, first;
        ct_gnode *vn = &g->n[iv];
        if (vn->dead || vn->op != CT_OP_view || vn->nin != 1 || vn->in[0] < 0 || vn->nout != 1 ||
            readers(g, iv, W, &first) != 1 || first != i)
            continue;
        int Y = vn->in[0];
        if (g->v[Y].kind != CT_GV_NODE) continue;
        const ct_gnode *mb = &g->n[g->v[Y].index];
        if (mb->dead || mb->op != CT_OP_max_pool_backward || mb->nin != 2 || mb->in[0] < 0) continue;
        const ct_p_pool *pp = &mb->args.p.pool;
        int X = mb->in[0];
        const ct_meta *my = &g->v[Y].meta, *mx = &g->v[X].meta, *mw = &g->v[W].meta;
        int r = my->ndim;
        if (pp->spatial_dims != 2 || r < 3 || mx->ndim != r || mw->ndim != r - 1 || mx->dtype != my->dtype)
            continue;
        int64_t HW = pp->input_size[0] * pp->input_size[1], L = pp->output_size[0] * pp->output_size[1];
        bool ok = my->sizes[r - 2] == pp->input_size[0] && my->sizes[r - 1] == pp->input_size[1] &&
                  mx->sizes[r - 2] == pp->output_size[0] && mx->sizes[r - 1] == pp->output_size[1] &&
                  mw->sizes[r - 2] == HW && HW > 0 && L > 0;
        for (int d = 0; d < r - 2 && ok; d++) ok = my->sizes[d] == mx->sizes[d] && mw->sizes[d] == my->sizes[d];
        /* X contiguous (a view of it must be one) */
        int64_t st = 1;
        for (int d = r - 1; d >= 0 && ok; d--) {
            if (mx->sizes[d] != 1 && mx->strides[d] != st) ok = false;
            st *= mx->sizes[d];
        }
        const ct_p_reduce *pr = &sn->args.p.reduce;
        ok = ok && pr->reduced_n == r - 1 && pr->reduced[r - 2] == 1 && pr->inner % HW == 0 &&
             vn->args.p.view.shape_n == r - 1 && vn->args.p.view.shape[r - 2] == HW;
        if (!ok) continue;
        vn->in[0] = X;
        vn->args.p.view.shape[r - 2] = L;
        ct_meta *m = &g->v[W].meta;
        m->sizes[r - 2] = L;
        st = 1;
        for (int d = r - 2; d >= 0; d--) {
            m->strides[d] = st;
            st *= m->sizes[d];
        }
        g->v[W].sym[r - 2] = -1;
        g->v[W].alias = X;
        sn->args.p.reduce.inner = pr->inner / HW * L;
        sums++;
    }
    ct__graph_uses(g);
    report("pool_grad", "%d relu gradient%s moved before the max pool's scatter, %d sum%s of its result "
           "taken over the pooled gradient", done, done == 1 ? "" : "s", sums, sums == 1 ? "" : "s");
    done += sums;
    if (count) *count += done;
    return CT_OK;
}

/* ---- functionalization ------------------------------------------------------------ */
/* Whether the out-of-place form of in-place node m gives value y's dtype and
 * sizes: an in-place write keeps the written tensor's dtype, where the op
 * alone would promote or give bool (logical_not_ of f32 stays f32; an i32
 * add_ of an f32 operand stays i32). */
static bool same_out_of_place(const ct_graph *g, const ct_gnode *m, int y) {
    ct_tensor *ins[8] = {0};
    if (m->nin > 8) return false;
    bool ok = true;
    for (int k = 0; k < m->nin && ok; k++) {
        if (m->in[k] < 0) continue;
        ct_meta im = g->v[m->in[k]].meta;
        im.device = CT_META;
        im.flags = 0; /* contiguous: the dtype and sizes do not depend on the layout */
        im.base = -1;
        ok = (ins[k] = ct__meta_new(&im, NULL)) != NULL;
    }
    ct_meta om;
    ok = ok && ct__meta_run(m->op, &om, 1, ins, m->nin, &m->args) == CT_OK;
    const ct_meta *ym = &g->v[y].meta;
    ok = ok && om.ndim == ym->ndim && om.dtype == ym->dtype &&
         memcmp(om.sizes, ym->sizes, sizeof(int64_t) * (size_t)(om.ndim > 0 ? om.ndim : 0)) == 0;
    for (int k = 0; k < m->nin; k++) ct_release(ins[k]);
    ct_clear_error();
    return ok;
}

/* An elementwise op that writes in place a temporary of the graph -- the
 * output of an earlier node, read by nothing after the write (later
 * readers read the write's own value), not a view and without views, not
 * a graph output -- computes a new value instead: relu_(a + b) becomes
 * relu(a + b), which fuses with the add.  Graphs autograd records keep
 * their writes (version counters). */
ct_status ct__pass_functionalize(ct_graph *g, int *count) {
    int done = 0;
    if (g->record_grad || g->joint) return CT_OK;
    for (int j = 0; j < g->nn; j++) {
        ct_gnode *m = &g->n[j];
        if (m->dead || m->dst < 0 || !(ct__op_info[m->op].flags & CT_OPF_EW) || m->nout != 1 || m->out[0] < 0)
            continue;
        int x = m->dst, y = m->out[0];
        const ct_gvalue *xv = &g->v[x];
        if (xv->kind != CT_GV_NODE || xv->alias >= 0 || graph_output(g, x)) continue;
        bool ok = true;
        for (int v = 0; v < g->nv && ok; v++) ok = v == y || g->v[v].alias != x;
        for (int k = j + 1; k < g->nn && ok; k++) { /* nothing after the write reads x itself */
            const ct_gnode *r = &g->n[k];
            if (r->dead) continue;
            ok = r->dst != x;
            for (int q = 0; q < r->nin && ok; q++) ok = r->in[q] != x;
        }
        if (!ok || !same_out_of_place(g, m, y)) continue;
        m->dst = -1;
        g->v[y].alias = -1;
        done++;
    }
    ct__graph_uses(g);
    report("functionalize", "%d in-place write%s of temporaries made out of place", done, done == 1 ? "" : "s");
    if (count) *count += done;
    return CT_OK;
}

/* ---- decomposition --------------------------------------------------------------- */
ct_status ct__pass_decompose(ct_graph *g, int *count) {
    (void)g;
    (void)count;
    report("decompose", "0 nodes rewritten (softmax, log_softmax, layer_norm_fwd lower to "
                        "multi-stage kernels in lower.c)");
    return CT_OK;
}

ct_status ct__passes_run(ct_graph *g) {
    ct_status st;
    if ((st = ct__pass_decompose(g, NULL))) return st;
    if ((st = ct__pass_fold(g, NULL))) return st;
    if ((st = ct__pass_cse(g, NULL))) return st;
    if ((st = ct__pass_functionalize(g, NULL))) return st;
    if ((st = ct__pass_fold_params(g, NULL))) return st;
    if ((st = ct__pass_conv_epilogue(g, NULL))) return st;
    if ((st = ct__pass_conv_layout(g, NULL))) return st;
    if ((st = ct__pass_pool_grad(g, NULL))) return st;
    return ct__pass_dce(g, NULL);
}
