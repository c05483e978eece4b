/* capture.c -- the tracer: runs a function of tensors on meta tensors and
 * records every op it reaches into a ct_graph (see compile_impl.h).
 *
 * The op layer reports each op at its exit points (ct__finish, _multi,
 * _inplace, ct__fused_run) to this thread's ct_trace_hook (op_table.h).
 * A tensor the tracer has not seen before is a constant (a module's
 * parameter, a buffer, a wrapped number): it is held by reference in
 * g->consts and read again at each run.  Every traced tensor is retained
 * until the trace ends, so no address is reused while the map from tensor
 * addresses to value ids is alive.  An op that needs data (ct_item,
 * nonzero, ...: ct__need_data refuses meta tensors) or a custom autograd
 * function under autograd stops the recording: g->brk says where. */
#include "compile_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- an open-addressing map from addresses to value ids ---- */
typedef struct pmap_ent { const void *k; int v; } pmap_ent;
typedef struct pmap { pmap_ent *e; int cap, n; } pmap;

static size_t phash(const void *k) {
    uint64_t x = (uint64_t)(uintptr_t)k;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int pmap_get(const pmap *m, const void *k) {
    if (!m->cap) return -1;
    for (size_t i = phash(k) & (size_t)(m->cap - 1);; i = (i + 1) & (size_t)(m->cap - 1)) {
        if (!m->e[i].k) return -1;
        if (m->e[i].k == k) return m->e[i].v;
    }
}

static bool pmap_put(pmap *m, const void *k, int v) {
    if ((m->n + 1) * 2 > m->cap) {
        int nc = m->cap ? m->cap * 2 : 64;
        pmap_ent *ne = calloc((size_t)nc, sizeof *ne);
        if (!ne) return false;
        for (int i = 0; i < m->cap; i++)
            if (m->e[i].k) {
                size_t j = phash(m->e[i].k) & (size_t)(nc - 1);
                while (ne[j].k) j = (j + 1) & (size_t)(nc - 1);
                ne[j] = m->e[i];
            }
        free(m->e);
        m->e = ne;
        m->cap = nc;
    }
    size_t i = phash(k) & (size_t)(m->cap - 1);
    while (m->e[i].k && m->e[i].k != k) i = (i + 1) & (size_t)(m->cap - 1);
    if (!m->e[i].k) m->n++;
    m->e[i].k = k;
    m->e[i].v = v;
    return true;
}

/* ---- the tracer ---- */
typedef struct tracer {
    ct_trace_hook hook; /* first: the op layer hands back this pointer */
    ct_graph *g;
    pmap tens;          /* tensor -> its current value */
    pmap stor;          /* storage -> the first value seen on it (alias root) */
    ct_tensor **held;
    int nheld, cap_held;
    ct_device dev;      /* the real inputs' device: what meta values stand for */
    /* the kernels dispatched since the last reported op (ct__dispatch's
     * hook), to check that an op's kernel ran on what the op reports */
    struct disp_rec {
        ct_op op;
        const ct_tensor *out0;
        int nin;
        const ct_tensor *in[8];
        ct_args a;
        bool has_args;
    } disp[16];
    int ndisp;
    pmap contig_of;     /* a copy's result -> the tensor it copied */
    pmap bad;           /* an output of an op that cannot be replayed -> 1 + its op */
    pmap prot;          /* storages of cpu tensors in-place ops began on -> 1 */
    uint32_t contig_in; /* replayable(): the inputs its kernel got as contiguous copies */
    bool all_ops;       /* ct__trace_ops: record what cannot be replayed too (noreplay) */
    bool stopped;       /* a break or out of memory: record nothing more */
    bool oom;
} tracer;

static _Thread_local tracer *tl_tracer;

static void tr_break(tracer *tr, const char *op, const char *why) {
    if (tr->stopped) return;
    tr->stopped = true;
    snprintf(tr->g->brk, sizeof tr->g->brk, "%s: %s", op ? op : "?", why ? why : "?");
}

static void tr_oom(tracer *tr) {
    if (!tr->stopped) snprintf(tr->g->brk, sizeof tr->g->brk, "compile: out of memory while tracing");
    tr->stopped = tr->oom = true;
}

static bool hold(tracer *tr, ct_tensor *t) {
    if (tr->nheld == tr->cap_held) {
        int nc = tr->cap_held ? tr->cap_held * 2 : 64;
        ct_tensor **q = realloc(tr->held, sizeof *q * (size_t)nc);
        if (!q) return false;
        tr->held = q;
        tr->cap_held = nc;
    }
    tr->held[tr->nheld++] = ct_retain(t);
    return true;
}

static void meta_of(const ct_tensor *t, ct_meta *m) {
    memset(m, 0, sizeof *m);
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->device = t->storage->device;
    m->flags = CT_META_STRIDED;
    m->offset = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        m->sizes[d] = t->sizes[d];
        m->strides[d] = t->strides[d];
    }
}

/* A new value for tensor t (which then maps to it); -1 when out of memory. */
static int new_value(tracer *tr, ct_tensor *t, ct_gv_kind kind, int index, int out) {
    ct_meta m;
    meta_of(t, &m);
    if (m.device == CT_META) m.device = tr->dev; /* the graph runs on the real inputs' device */
    int id = ct__graph_value(tr->g, kind, index, out, &m);
    if (id < 0) return -1;
    int root = pmap_get(&tr->stor, t->storage);
    if (root >= 0) tr->g->v[id].alias = root;
    else if (!pmap_put(&tr->stor, t->storage, id)) return -1;
    if (!pmap_put(&tr->tens, t, id) || !hold(tr, t)) return -1;
    return id;
}

/* A constant value for t (retained in g->consts). */
static int new_const(tracer *tr, ct_tensor *t, const char *op) {
    int bad = pmap_get(&tr->bad, t);
    if (bad > 0 && t->storage->device == CT_META) {
        char why[200];
        snprintf(why, sizeof why, "reads the result of %s, which compiled graphs cannot replay yet (its "
                 "kernel runs on operands its public function prepares)", ct__op_info[bad - 1].name);
        tr_break(tr, op, why);
        return -1;
    }
    if (t->storage->device == CT_META) {
        /* a meta tensor the op layer's exit points never reported */
        tr_break(tr, op, "a tensor made outside the op layer's exit points (not traceable)");
        return -1;
    }
    ct_graph *g = tr->g;
    if (g->nconst == g->cap_const) {
        int nc = g->cap_const ? g->cap_const * 2 : 16;
        ct_tensor **q = realloc(g->consts, sizeof *q * (size_t)nc);
        if (!q) { tr_oom(tr); return -1; }
        g->consts = q;
        g->cap_const = nc;
    }
    g->consts[g->nconst] = ct_retain(t);
    int id = new_value(tr, t, CT_GV_CONST, g->nconst, 0);
    g->nconst++;
    if (id < 0) tr_oom(tr);
    return id;
}

/* A meta tensor the tracer has not seen on the storage of values it has:
 * a new handle with a value's exact geometry (autograd's saved tensors,
 * the aliases ct_function_apply makes) is that value -- the latest one
 * written there, which is what reading it now reads.  Its id, or -1. */
static int resolve_alias(tracer *tr, ct_tensor *t) {
    int root = pmap_get(&tr->stor, t->storage);
    if (root < 0) return -1;
    const ct_graph *g = tr->g;
    /* a cpu tensor on a storage the graph made (an op of cpu constants and
     * meta values allocates its result on the cpu and runs on meta) is an
     * alias too; one on a constant's or an input's storage is not */
    if (t->storage->device != CT_META && g->v[root].kind != CT_GV_NODE) return -1;
    for (int id = g->nv - 1; id >= 0; id--) {
        const ct_gvalue *x = &g->v[id];
        if (id != root && x->alias != root) continue;
        if (x->meta.ndim != t->ndim || x->meta.dtype != t->dtype || x->meta.offset != t->offset) continue;
        bool same = true;
        for (int d = 0; d < t->ndim && same; d++)
            same = x->meta.sizes[d] == t->sizes[d] && (t->sizes[d] == 1 || x->meta.strides[d] == t->strides[d]);
        if (!same) continue;
        if (!pmap_put(&tr->tens, t, id) || !hold(tr, t)) { tr_oom(tr); return -1; }
        return id;
    }
    return -1;
}

static int value_of(tracer *tr, ct_tensor *t, const char *op) {
    int id = pmap_get(&tr->tens, t);
    if (id < 0) id = resolve_alias(tr, t);
    return id >= 0 ? id : new_const(tr, t, op);
}

/* Records op as a node of the graph: out[0..nout) from in[0..nin) (dst:
 * the tensor an in-place op wrote). */
static void record(tracer *tr, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                   const ct_args *a, ct_tensor *dst) {
    const char *name = ct__op_info[op].name;
    int ids_local[16], *ids = nin <= 16 ? ids_local : malloc(sizeof(int) * (size_t)nin);
    if (!ids) { tr_oom(tr); return; }
    for (int k = 0; k < nin; k++) {
        ids[k] = in[k] ? value_of(tr, in[k], name) : -1;
        if (in[k] && ids[k] < 0) goto done;
    }
    int dv = -1;
    if (dst && (dv = value_of(tr, dst, name)) < 0) goto done;
    int n = ct__graph_node(tr->g, op, a, ids, nin, nout, dv);
    if (n < 0) { tr_oom(tr); goto done; }
    /* a factory or copy whose device came from a meta operand makes its
     * tensor on the graph's device at run time */
    ct_args *na = &tr->g->n[n].args;
    if ((op == CT_OP_fill || op == CT_OP_arange || op == CT_OP_linspace || op == CT_OP_eye) &&
        na->p.factory.device == CT_META)
        na->p.factory.device = tr->dev;
    if (op == CT_OP_copy && na->p.copy.device == CT_META) na->p.copy.device = tr->dev;
    if ((ct__op_info[op].flags & CT_OPF_RANDOM) && na->p.random.device == CT_META) na->p.random.device = tr->dev;
    for (int k = 0; k < nout; k++) {
        if (!out[k]) continue;
        int id = new_value(tr, out[k], CT_GV_NODE, n, k);
        if (id < 0) { tr_oom(tr); goto done; }
        tr->g->n[n].out[k] = id;
    }
    if (op == CT_OP_copy && nin == 1 && !dst && nout == 1 && out[0] && in[0] &&
        !pmap_put(&tr->contig_of, out[0], ids[0]))
        tr_oom(tr);
done:
    if (ids != ids_local) free(ids);
}

static void on_disp(ct_trace_hook *h, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in,
                    int nin, const ct_args *a) {
    tracer *tr = (tracer *)h;
    if (tr->stopped) return;
    if (tr->ndisp == (int)(sizeof tr->disp / sizeof tr->disp[0])) {
        memmove(&tr->disp[0], &tr->disp[1], sizeof tr->disp[0] * (size_t)(tr->ndisp - 1));
        tr->ndisp--;
    }
    struct disp_rec *r = &tr->disp[tr->ndisp++];
    r->op = op;
    r->out0 = nout > 0 ? out[0] : NULL;
    r->nin = nin;
    for (int k = 0; k < nin && k < 8; k++) r->in[k] = in[k];
    r->has_args = a != NULL;
    if (a) r->a = *a;
    /* Kernels no exit point reports: the fused ops backward passes and
     * other ops run (ew_grad, conv_wgrad, softmax_backward, ...), with the
     * contiguous copies they made of their operands just before.  They are
     * recorded here, as dispatched (their replay dispatches the same
     * kernel), when their results are fresh and their operands known; a
     * report of the same result later (ct__fused_run) is then skipped. */
    unsigned fl = ct__op_info[op].flags;
    if (!(fl & CT_OPF_UNRECORDED) || nout <= 0 || nout > 8) return;
    for (int k = 0; k < nout; k++)
        if (out[k] && (out[k]->storage->device != CT_META || pmap_get(&tr->tens, out[k]) >= 0)) return;
    for (int k = 0; k < nin; k++) {
        if (!in[k] || in[k]->storage->device != CT_META || pmap_get(&tr->tens, in[k]) >= 0 ||
            resolve_alias(tr, in[k]) >= 0)
            continue;
        /* an operand the op copied (contiguous) just before: record that copy */
        const struct disp_rec *c = NULL;
        for (int i = tr->ndisp - 2; i >= 0 && !c; i--)
            if (tr->disp[i].op == CT_OP_copy && tr->disp[i].out0 == in[k] && tr->disp[i].nin == 1)
                c = &tr->disp[i];
        if (!c || !c->in[0] || (c->in[0]->storage->device == CT_META && pmap_get(&tr->tens, c->in[0]) < 0 &&
                                resolve_alias(tr, (ct_tensor *)c->in[0]) < 0))
            return;
        ct_tensor *co = (ct_tensor *)c->out0, *ci = (ct_tensor *)c->in[0];
        record(tr, CT_OP_copy, &co, 1, &ci, 1, c->has_args ? &c->a : NULL, NULL);
        if (tr->stopped || pmap_get(&tr->tens, in[k]) < 0) return;
    }
    record(tr, op, out, nout, in, nin, a, NULL);
}

/* Ops the compiled graph replays through their public functions (exec.c's
 * run_public): their kernels take operands the public function prepares. */
bool ct__trace_public_replay(ct_op op) {
    return op == CT_OP_linear || op == CT_OP_matmul || op == CT_OP_mm || op == CT_OP_bmm ||
           op == CT_OP_addmm || op == CT_OP_index_select || op == CT_OP_gather || op == CT_OP_scatter_add ||
           op == CT_OP_index_add;
}

/* Whether the compiled graph can replay op as reported: elementwise ops
 * and views run through the op layer's generic paths (ct__ew, ct__op);
 * fill needs no check (empty may skip its kernel); every other op must
 * have dispatched its kernel, since the last reported op, on the tensors
 * (or contiguous copies of them) and parameters it reports. */
static bool replayable(tracer *tr, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in,
                       int nin, const ct_args *a, ct_tensor *dst) {
    unsigned fl = ct__op_info[op].flags;
    if (((fl & CT_OPF_EW) && op != CT_OP_copy) || (fl & CT_OPF_VIEW) || op == CT_OP_fill ||
        ct__trace_public_replay(op))
        return true;
    if ((fl & CT_OPF_RANDOM) && ct__random_replayable(op, nin)) return true; /* exec draws anew */
    /* copy_ (dst, src): exec replays it through ct_copy_, which broadcasts and casts src */
    if (op == CT_OP_copy && dst && nin == 1) return true;
    const ct_tensor *o0 = dst ? dst : (nout > 0 ? out[0] : NULL);
    if (!o0 || nin > 8) return false;
    for (int i = tr->ndisp - 1; i >= 0; i--) {
        const struct disp_rec *r = &tr->disp[i];
        if (r->op != op || r->out0 != o0) continue;
        if (r->nin != nin) return false;
        for (int k = 0; k < nin; k++) {
            if (r->in[k] == in[k]) continue;
            if (!(in[k] && pmap_get(&tr->contig_of, r->in[k]) == pmap_get(&tr->tens, in[k]) &&
                  pmap_get(&tr->tens, in[k]) >= 0))
                return false;
            tr->contig_in |= 1u << k;
        }
        ct_args def = ct__args(op);
        const ct_args *ra = r->has_args ? &r->a : &def, *fa = a ? a : &def;
        return ct__args_equal(ra, fa);
    }
    return false;
}

static void on_op(ct_trace_hook *h, ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in,
                  int nin, const ct_args *a, ct_tensor *dst) {
    tracer *tr = (tracer *)h;
    if (tr->stopped) return;
    if ((ct__op_info[op].flags & CT_OPF_UNRECORDED) && !dst && nout > 0 && out[0] &&
        pmap_get(&tr->tens, out[0]) >= 0) {
        tr->ndisp = 0; /* recorded when its kernel was dispatched (on_disp) */
        return;
    }
    tr->contig_in = 0;
    bool ok = replayable(tr, op, out, nout, in, nin, a, dst);
    tr->ndisp = 0;
    const char *name = ct__op_info[op].name;
    if ((ct__op_info[op].flags & CT_OPF_RANDOM) && !ct__random_replayable(op, nin) && !tr->all_ops) {
        /* the forms with tensor operands (bernoulli(p), multinomial) */
        tr_break(tr, name, "a random op with tensor operands (compiled graphs replay only the samplers "
                 "without: rand, randn, bernoulli_, dropout, ...)");
        return;
    }

    /* a tensor made from host data (ct_from_array, ...): a constant */
    if (op == CT_OP_copy && nin == 0 && !dst) {
        if (nout > 0 && out[0]) (void)new_const(tr, out[0], name);
        return;
    }
    /* Operands the graph does not know: a meta tensor the tracer has not
     * seen was made inside a public op (a composite's temporaries, the
     * contiguous copy a kernel wants), which reports itself when it
     * returns: nothing is recorded for the inner op.  But a result of an op
     * that cannot be replayed (bad) taints what is computed from it: reading
     * a tainted tensor in a reported op, or writing one into a tensor the
     * graph knows, breaks the graph (new_const, below). */
    bool unseen = false;
    int badop = 0;
    for (int k = 0; k < nin; k++)
        if (in[k] && in[k]->storage->device == CT_META && pmap_get(&tr->tens, in[k]) < 0 &&
            resolve_alias(tr, in[k]) < 0) {
            unseen = true;
            int b = pmap_get(&tr->bad, in[k]);
            if (b > 0) badop = b;
        }
    if (!ok && !badop) badop = 1 + (int)op;
    bool dst_seen = dst && (pmap_get(&tr->tens, dst) >= 0 || resolve_alias(tr, dst) >= 0);
    if (dst && dst->storage->device == CT_META && !dst_seen) unseen = true;
    if (tr->all_ops && !unseen && !ok) {
        /* a transform reruns it through its public function */
        int n0 = tr->g->nn;
        record(tr, op, out, nout, in, nin, a, dst);
        if (tr->g->nn > n0) tr->g->n[n0].noreplay = true;
        return;
    }
    if (unseen || !ok) {
        if (!badop) return; /* an inner op on inner temporaries */
        if (dst_seen) {
            char why[200];
            snprintf(why, sizeof why, "writes the result of %s, which compiled graphs cannot replay yet",
                     ct__op_info[badop - 1].name);
            tr_break(tr, name, why);
            return;
        }
        for (int k = 0; k < nout; k++)
            if (out[k] && (!pmap_put(&tr->bad, out[k], badop) || !hold(tr, out[k]))) tr_oom(tr);
        return;
    }
    uint32_t ci = tr->contig_in;
    int n0 = tr->g->nn;
    record(tr, op, out, nout, in, nin, a, dst);
    if (tr->g->nn > n0) tr->g->n[n0].contig_in = ci;
}

static void on_protect(ct_trace_hook *h, ct_tensor *t) {
    tracer *tr = (tracer *)h;
    if (pmap_get(&tr->prot, t->storage) < 0 && (!pmap_put(&tr->prot, t->storage, 1) || !hold(tr, t))) tr_oom(tr);
}

static bool on_protected_write(ct_trace_hook *h, const ct_tensor *t) {
    tracer *tr = (tracer *)h;
    return t->storage->device == CT_CPU && pmap_get(&tr->prot, t->storage) >= 0;
}

static void on_break(ct_trace_hook *h, const char *op, const char *why) {
    tr_break((tracer *)h, op, why);
}

static void need_data_hook(const char *op) {
    tracer *tr = tl_tracer;
    if (!tr || tr->stopped) return;
    ct_tensor *t = (ct_tensor *)ct__need_data_tensor;
    int id = t ? pmap_get(&tr->tens, t) : -1;
    if (t && id < 0) id = resolve_alias(tr, t);
    tr_break(tr, op, "needs the values of a tensor (data-dependent)");
    if (id >= 0) tr->g->brk_data = id + 1;
}

/* The joint graph (see ct__trace_joint): with the tracer still on, the
 * gradients of the differentiable outputs with respect to the inputs and
 * constants that require grad, through ctorch's own autograd engine on
 * meta tensors: its derivative rules call ops, which the tracer records
 * after the forward's nodes.  The gradients of the outputs are new graph
 * inputs.  CT_OK without a joint graph when nothing is differentiable. */
static ct_status trace_backward(tracer *tr, ct_tensor **min, int nin, ct_tensor **mout, int nout) {
    ct_graph *g = tr->g;
    int nd = 0, nw = 0;
    for (int k = 0; k < nout; k++) nd += ct_dtype_is_floating(mout[k]->dtype) && ct_requires_grad(mout[k]);
    for (int k = 0; k < nin; k++) nw += ct_requires_grad(min[k]);
    int nconst = g->nconst;
    for (int i = 0; i < nconst; i++) nw += ct_requires_grad(g->consts[i]);
    if (!nd || !nw) return CT_OK;
    ct_tensor **douts = calloc((size_t)nd, sizeof *douts), **gouts = calloc((size_t)nd, sizeof *gouts);
    ct_tensor **wrt = calloc((size_t)nw, sizeof *wrt), **grads = calloc((size_t)nw, sizeof *grads);
    int *ins = realloc(g->inputs, sizeof(int) * (size_t)(nin + nd));
    if (ins) g->inputs = ins;
    int *outs = ins ? realloc(g->outputs, sizeof(int) * (size_t)(nout + nw)) : NULL;
    if (outs) g->outputs = outs;
    g->jin_out = malloc(sizeof(int) * (size_t)nd);
    g->wrt = malloc(sizeof(int) * (size_t)nw);
    ct_status st = CT_OK;
    if (!douts || !gouts || !wrt || !grads || !ins || !outs || !g->jin_out || !g->wrt) {
        st = ct__error_status(CT_ERR_OOM, "compile: out of memory tracing the backward");
        goto done;
    }
    g->nfwd_nodes = g->nn;
    int j = 0;
    for (int k = 0; k < nout; k++) {
        if (!(ct_dtype_is_floating(mout[k]->dtype) && ct_requires_grad(mout[k]))) continue;
        douts[j] = mout[k];
        gouts[j] = ct__alloc(mout[k]->sizes, mout[k]->ndim, mout[k]->dtype, CT_META);
        if (!gouts[j]) { st = ct_last_error_code(); goto done; }
        int id = new_value(tr, gouts[j], CT_GV_INPUT, nin + j, 0);
        if (id < 0) { st = ct__error_status(CT_ERR_OOM, "compile: out of memory tracing"); goto done; }
        g->inputs[nin + j] = id;
        g->jin_out[j] = k;
        j++;
    }
    int w = 0;
    for (int k = 0; k < nin; k++)
        if (ct_requires_grad(min[k])) { g->wrt[w] = k; wrt[w++] = min[k]; }
    for (int i = 0; i < nconst; i++)
        if (ct_requires_grad(g->consts[i])) { g->wrt[w] = -1 - i; wrt[w++] = g->consts[i]; }
    st = ct_autograd_grad(douts, nd, wrt, nw, gouts, false, false, true, grads);
    if (st || tr->stopped) goto done;
    for (int i = 0; i < nw; i++) {
        int id = grads[i] ? value_of(tr, grads[i], "backward") : -1;
        if (tr->stopped) goto done;
        g->outputs[nout + i] = id;
    }
    g->nin = nin + nd;
    g->nout = nout + nw;
    g->njin = nd;
    g->nwrt = nw;
    g->nfwd_out = nout;
    g->joint = true;
done:
    for (int k = 0; k < nd; k++) ct_release(gouts ? gouts[k] : NULL);
    free(douts);
    free(gouts);
    free(wrt);
    free(grads);
    return st;
}

ct_status ct__trace(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, ct_graph *g) {
    return ct__trace_joint(fn, ctx, in, nin, nout, false, g);
}

static ct_status trace_impl(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, bool joint,
                            bool all_ops, ct_graph *g);

ct_status ct__trace_joint(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, bool joint,
                          ct_graph *g) {
    return trace_impl(fn, ctx, in, nin, nout, joint, false, g);
}

ct_status ct__trace_ops(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, ct_graph *g) {
    return trace_impl(fn, ctx, in, nin, nout, false, true, g);
}

void ct__trace_suspend(ct_trace_saved *s) {
    s->tracer = tl_tracer;
    s->hook = ct__trace_tl;
    s->need_data = ct__need_data_hook;
    s->tracing = ct__tracing;
    if (!s->tracer) return;
    atomic_fetch_sub(&ct__trace_count, 1);
    ct__need_data_hook = NULL;
    ct__tracing = false;
    ct__trace_tl = NULL;
    tl_tracer = NULL;
}

void ct__trace_resume(const ct_trace_saved *s) {
    if (!s->tracer) return;
    tl_tracer = s->tracer;
    ct__trace_tl = s->hook;
    ct__need_data_hook = s->need_data;
    ct__tracing = s->tracing;
    atomic_fetch_add(&ct__trace_count, 1);
}

static ct_status trace_impl(ct_fn fn, void *ctx, ct_tensor *const *in, int nin, int nout, bool joint,
                            bool all_ops, ct_graph *g) {
    if (!fn || !g || nin < 0 || nout <= 0 || (nin > 0 && !in))
        return ct__error_status(CT_ERR_ARG, "compile: trace: bad arguments");
    if (tl_tracer)
        return ct__error_status(CT_ERR_RUNTIME, "compile: trace: already tracing on this thread");
    ct__backends_init();
    ct__graph_init(g);
    tracer tr;
    memset(&tr, 0, sizeof tr);
    tr.hook.op = on_op;
    tr.hook.brk = on_break;
    tr.hook.disp = on_disp;
    tr.hook.joint = joint;
    tr.all_ops = all_ops;
    if (all_ops) {
        /* a transform's trace follows custom autograd functions (their
         * backward's ops are recorded when the function differentiates
         * inside) unless autograd must record the replay itself: an
         * input requires grad (a fused op the replay runs is no node) */
        bool rg = false;
        for (int k = 0; k < nin; k++) rg = rg || (in[k] && ct_requires_grad(in[k]));
        tr.hook.joint = !(rg && ct_is_grad_enabled());
    }
    tr.hook.protect = on_protect;
    tr.hook.protected_write = on_protected_write;
    tr.g = g;
    tr.dev = CT_CPU;
    for (int k = 0; k < nin; k++)
        if (in[k] && in[k]->storage->device != CT_CPU) { tr.dev = in[k]->storage->device; break; }
    ct_status st = CT_OK;
    ct_tensor **min = calloc((size_t)(nin > 0 ? nin : 1), sizeof *min);
    ct_tensor **mout = calloc((size_t)nout, sizeof *mout);
    g->inputs = malloc(sizeof(int) * (size_t)(nin > 0 ? nin : 1));
    g->outputs = malloc(sizeof(int) * (size_t)nout);
    if (!min || !mout || !g->inputs || !g->outputs) {
        st = ct__error_status(CT_ERR_OOM, "compile: out of memory tracing");
        goto out;
    }
    g->nin = nin;
    g->nout = nout;
    /* the meta inputs: each input's sizes, strides, dtype and requires_grad */
    for (int k = 0; k < nin; k++) {
        const ct_tensor *x = in[k];
        if (!x) {
            st = ct__error_status(CT_ERR_NULL, "compile: input %d is NULL", k);
            goto out;
        }
        min[k] = ct__alloc_strided(x->sizes, x->strides, x->ndim, x->dtype, CT_META);
        if (!min[k]) { st = ct_last_error_code(); goto out; }
        if (ct_requires_grad(x) && (st = ct_set_requires_grad(min[k], true))) goto out;
        int id = new_value(&tr, min[k], CT_GV_INPUT, k, 0);
        if (id < 0) { st = ct__error_status(CT_ERR_OOM, "compile: out of memory tracing"); goto out; }
        g->inputs[k] = id;
    }
    ct_scope s = ct_scope_begin();
    tl_tracer = &tr;
    ct__trace_tl = &tr.hook;
    ct__need_data_hook = need_data_hook;
    ct__tracing = true;
    atomic_fetch_add(&ct__trace_count, 1);
    unsigned long errs = ct__error_count();
    ct_status fst = fn(min, nin, mout, nout, ctx);
    if (!tr.stopped) {
        if (fst) {
            st = ct_last_error_code() && ct__error_count() != errs ? ct_last_error_code() : fst;
        } else {
            for (int k = 0; k < nout && !st; k++) {
                if (!mout[k]) {
                    st = ct__error_status(CT_ERR_RUNTIME, "compile: the function returned CT_OK "
                                          "without output %d", k);
                    break;
                }
                int id = value_of(&tr, mout[k], "output");
                if (id < 0 && !tr.stopped) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
                g->outputs[k] = id;
            }
            if (!st && !tr.stopped && joint && ct_is_grad_enabled()) st = trace_backward(&tr, min, nin, mout, nout);
        }
    }
    atomic_fetch_sub(&ct__trace_count, 1);
    ct__need_data_hook = NULL;
    ct__tracing = false;
    ct__trace_tl = NULL;
    tl_tracer = NULL;
    ct_scope_end(s);
    if (tr.stopped) {
        /* a graph break: the graph is what was recorded up to there */
        if (tr.oom) st = ct__error_status(CT_ERR_OOM, "compile: out of memory tracing");
        else { st = CT_OK; ct_clear_error(); }
        for (int k = 0; k < g->nout; k++) g->outputs[k] = -1;
    }
    if (!st) {
        /* autograd records the ops when grad mode is on and an input or a
         * constant (a parameter) requires grad: lower.c fuses nothing then */
        bool any = false;
        for (int k = 0; k < nin; k++) any = any || ct_requires_grad(in[k]);
        for (int k = 0; k < g->nconst; k++) any = any || ct_requires_grad(g->consts[k]);
        g->record_grad = any && ct_is_grad_enabled() && !g->joint; /* a joint graph's backward is explicit */
        ct__graph_uses(g);
    }
out:
    for (int k = 0; k < nin; k++) ct_release(min ? min[k] : NULL);
    for (int i = 0; i < tr.nheld; i++) ct_release(tr.held[i]);
    free(tr.held);
    free(tr.tens.e);
    free(tr.stor.e);
    free(tr.contig_of.e);
    free(tr.prot.e);
    free(tr.bad.e);
    free(min);
    free(mout);
    return st;
}
