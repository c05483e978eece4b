/* vmap.c -- ct_vmap (func.h): a function mapped over a batch dimension by
 * batching rules, not by a loop.
 *
 * Design (MLX's vmap over a traced graph, functorch's batching rules):
 *  1. The first call for an input signature (per-sample sizes, dtypes,
 *     devices, requires_grad, which inputs are batched) traces f on meta
 *     tensors of the per-sample shapes with the compiler's tracer
 *     (ct__trace_ops: every op at its public level, with its typed
 *     parameters) and keeps the graph for later calls (no retrace).
 *  2. Each call runs that graph once over ct_bval values (a physical tensor
 *     and which of its dims is the batch, or none): each live node through
 *     its op's batching rule (the op table's vmap column, src/func/batch_*.c),
 *     which moves or inserts the batch dim, adjusts the dims in the typed
 *     parameters and calls the op once on the whole batch.  A node whose
 *     inputs are all unbatched runs once, unbatched.  A node without a rule
 *     runs per sample (slice, run the node, stack), counted per op.
 *  3. A trace that breaks (f reads tensor data: ct_item, nonzero, ...), or a
 *     graph with an op that has no rule and that the graph cannot replay
 *     alone, runs as a loop of f over the samples (counted, with its reason).
 *  4. Outputs move their batch dim to out_dims; an output that does not
 *     depend on the batch is expanded there (torch).
 * Why a graph rather than a batched tensor type wrapped around each op
 * (functorch's BatchedTensor): the op layer has no dispatch keys to hook,
 * the tracer already sees every op with its parameters (views, in-place
 * ops, factories, random ops, autograd's backward included), and the graph
 * is traced once per signature, so a call costs one rule per op.
 * Nesting: a vmap called while another vmap traces suspends that trace,
 * traces its own function, and runs its rules on the outer meta tensors,
 * which the outer trace then records: vmap(vmap(f)) runs each op once. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "func_impl.h"
#include "../ops/op_table.h"

/* ---- statistics ---------------------------------------------------------------- */
static _Atomic int64_t g_calls, g_traces, g_batched, g_fallback, g_loops;
static _Atomic int64_t g_op_batched[CT_OP_COUNT], g_op_fallback[CT_OP_COUNT];
static _Thread_local char tl_loop_why[320];

ct_vmap_stats ct_vmap_get_stats(void) {
    ct_vmap_stats s = {atomic_load(&g_calls), atomic_load(&g_traces), atomic_load(&g_batched),
                       atomic_load(&g_fallback), atomic_load(&g_loops)};
    return s;
}

void ct_vmap_reset_stats(void) {
    atomic_store(&g_calls, 0);
    atomic_store(&g_traces, 0);
    atomic_store(&g_batched, 0);
    atomic_store(&g_fallback, 0);
    atomic_store(&g_loops, 0);
    for (int i = 0; i < CT_OP_COUNT; i++) {
        atomic_store(&g_op_batched[i], 0);
        atomic_store(&g_op_fallback[i], 0);
    }
    tl_loop_why[0] = 0;
}

static int op_by_name(const char *op) {
    if (!op) return -1;
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (strcmp(ct__op_info[i].name, op) == 0) return i;
    return -1;
}

int64_t ct_vmap_op_batched(const char *op) {
    int i = op_by_name(op);
    return i < 0 ? -1 : atomic_load(&g_op_batched[i]);
}

int64_t ct_vmap_op_fallbacks(const char *op) {
    int i = op_by_name(op);
    return i < 0 ? -1 : atomic_load(&g_op_fallback[i]);
}

int ct_vmap_has_rule(const char *op) {
    int i = op_by_name(op);
    return i < 0 ? -1 : ct__op_info[i].vmap != NULL;
}

const char *ct_vmap_last_loop_reason(void) { return tl_loop_why; }

/* ---- helpers for rules --------------------------------------------------------- */
ct_tensor *ct__bv_front(ct_bval v) {
    if (v.bdim <= 0) return v.t;
    return ct_movedim(v.t, v.bdim, 0);
}

ct_tensor *ct__bv_full(ct_bval v, int64_t B) {
    if (v.bdim >= 0) return ct__bv_front(v);
    if (!v.t) return NULL;
    int64_t sh[CT_MAX_DIMS];
    if (v.t->ndim + 1 > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "vmap: a batched value would have more than %d dims", CT_MAX_DIMS);
    sh[0] = B;
    for (int d = 0; d < v.t->ndim; d++) sh[d + 1] = v.t->sizes[d];
    return ct_expand(ct_unsqueeze(v.t, 0), sh, v.t->ndim + 1);
}

ct_tensor *ct__bv_align(ct_bval v, int rank) {
    if (v.bdim < 0) return v.t;
    ct_tensor *t = ct__bv_front(v);
    int l = ct__bv_ndim(v);
    if (!t || l >= rank) return t;
    if (rank + 1 > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "vmap: a batched value would have more than %d dims", CT_MAX_DIMS);
    int64_t sh[CT_MAX_DIMS];
    sh[0] = t->sizes[0];
    for (int d = 0; d < rank - l; d++) sh[1 + d] = 1;
    for (int d = 0; d < l; d++) sh[1 + rank - l + d] = t->sizes[1 + d];
    return ct_reshape(t, sh, rank + 1);
}

const ct_meta *ct__bv_in_meta(const ct_vmap_call *c, int k) { return &c->g->v[c->n->in[k]].meta; }
const ct_meta *ct__bv_out_meta(const ct_vmap_call *c, int k) { return &c->g->v[c->n->out[k]].meta; }

ct_status ct__bv_run(const ct_vmap_call *c, ct_tensor **out, ct_tensor *const *in, int nin, const ct_args *a) {
    return ct__exec_op(c->n->op, out, c->n->nout, in, nin, a, 0xFFFFFFFFu);
}

ct_status ct__bv_write(const ct_vmap_call *c, ct_tensor *y, ct_bval *out) {
    if (!y) return ct__bv_status();
    if (c->dst->bdim < 0)
        return ct__bv_error(c, CT_ERR_ARG, "an in-place op cannot write a value that depends on a batched "
                            "input into a tensor that is not batched (use the out-of-place op)");
    ct_tensor *d = ct__bv_front(*c->dst);
    if (!d || !ct_copy_(d, y)) return ct__bv_status();
    *out = (ct_bval){d, 0};
    return CT_OK;
}

ct_status ct__bv_error(const ct_vmap_call *c, ct_status code, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ct__error_status(code, "vmap: %s: %s", ct__op_info[c->n->op].name, msg);
}

/* ---- the function object ------------------------------------------------------- */
typedef struct vm_sig {
    bool batched, rg;
    ct_dtype dtype;
    ct_device dev;
    int ndim;
    int64_t sizes[CT_MAX_DIMS];
} vm_sig;

typedef struct vm_entry {
    int nin, nout;
    vm_sig *sig;
    ct_graph g;
    bool brk;          /* run as a loop of f: why says why */
    bool has_random;   /* the (partial) graph draws random numbers */
    bool dynamic;      /* the break is an op whose output shape depends on the values of
                        * a batched tensor: an error (why says which), as torch's */
    char why[300];
    char *live;        /* per node: it computes something an output needs */
    char *force;       /* per value: a buffer the graph makes that a batched value is
                        * written into in place: made batched ([B, ...]) from the start */
    struct vm_entry *next;
} vm_entry;

typedef struct vm_ctx {
    ct_func *f;
    int64_t *in_dims, *out_dims;
    int n_in, n_out;
    ct_vmap_randomness rnd;
    int64_t chunk;
    pthread_mutex_t mu;
    vm_entry *cache;
} vm_ctx;

static void entry_free(vm_entry *e) {
    if (!e) return;
    ct__graph_free(&e->g);
    free(e->sig);
    free(e->live);
    free(e->force);
    free(e);
}

static void vm_free(void *p) {
    vm_ctx *x = p;
    ct_func_free(x->f);
    free(x->in_dims);
    free(x->out_dims);
    for (vm_entry *e = x->cache, *nx; e; e = nx) {
        nx = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&x->mu);
    free(x);
}

static void make_sig(vm_sig *s, ct_tensor *t, int bd) {
    memset(s, 0, sizeof *s);
    s->batched = bd >= 0;
    s->rg = ct_requires_grad(t);
    s->dtype = t->dtype;
    s->dev = t->storage->device;
    int j = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != bd) s->sizes[j++] = t->sizes[d];
    s->ndim = j;
}

static bool sig_equal(const vm_entry *e, const vm_sig *s, int nin, int nout) {
    if (e->nin != nin || e->nout != nout) return false;
    for (int k = 0; k < nin; k++) {
        const vm_sig *a = &e->sig[k], *b = &s[k];
        if (a->batched != b->batched || a->rg != b->rg || a->dtype != b->dtype || a->dev != b->dev ||
            a->ndim != b->ndim || memcmp(a->sizes, b->sizes, sizeof(int64_t) * (size_t)a->ndim) != 0)
            return false;
    }
    return true;
}

static int vroot(const ct_graph *g, int v) { return g->v[v].alias >= 0 ? g->v[v].alias : v; }

/* Which nodes the outputs need (reverse walk): a node is live when an
 * output of it is read, or it writes (in place) a storage that a later live
 * node or an output reads, or that of an input or constant (a side effect
 * the caller sees). */
static bool entry_analyse(vm_entry *e) {
    ct_graph *g = &e->g;
    e->live = calloc((size_t)(g->nn > 0 ? g->nn : 1), 1);
    char *vl = calloc((size_t)(g->nv > 0 ? g->nv : 1), 1), *rl = calloc((size_t)(g->nv > 0 ? g->nv : 1), 1);
    if (!e->live || !vl || !rl) {
        free(vl);
        free(rl);
        return false;
    }
    for (int k = 0; k < g->nout; k++)
        if (g->outputs[k] >= 0) {
            vl[g->outputs[k]] = 1;
            rl[vroot(g, g->outputs[k])] = 1;
        }
    for (int i = g->nn - 1; i >= 0; i--) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        bool L = false;
        for (int k = 0; k < n->nout; k++) L = L || (n->out[k] >= 0 && vl[n->out[k]]);
        if (n->dst >= 0) {
            int r = vroot(g, n->dst);
            L = L || g->v[r].kind != CT_GV_NODE || rl[r];
        }
        if (!L) continue;
        e->live[i] = 1;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0) {
                vl[n->in[k]] = 1;
                rl[vroot(g, n->in[k])] = 1;
            }
        if (n->dst >= 0) vl[n->dst] = 1;
    }
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (ct__op_info[n->op].flags & CT_OPF_RANDOM) e->has_random = true;
        if (e->live[i] && !ct__op_info[n->op].vmap && n->noreplay && !e->brk) {
            e->brk = true;
            snprintf(e->why, sizeof e->why, "%s has no batching rule and cannot run alone per sample",
                     ct__op_info[n->op].name);
        }
    }
    free(vl);
    free(rl);
    return true;
}

/* Which values are batched for this signature (the static view of what
 * run_graph computes); a buffer the graph made itself (a factory's, a
 * clone's) that an in-place op writes a batched value into is forced
 * batched from its creation on, so that writes into it (and into views of
 * it) keep the per-sample values apart -- functionalization of the cat /
 * pad / diag composites that fill an empty tensor slice by slice.
 * Iterated until nothing changes. */
static bool entry_force(vm_entry *e, ct_vmap_randomness rnd) {
    ct_graph *g = &e->g;
    char *bat = calloc((size_t)g->nv + 1, 1);
    e->force = calloc((size_t)g->nv + 1, 1);
    if (!bat || !e->force) {
        free(bat);
        return false;
    }
    for (bool changed = true; changed;) {
        changed = false;
        memset(bat, 0, (size_t)g->nv);
        for (int k = 0; k < g->nin && k < e->nin; k++) bat[g->inputs[k]] = e->sig[k].batched;
        for (int v = 0; v < g->nv; v++)
            if (e->force[vroot(g, v)]) bat[v] = 1;
        for (int i = 0; i < g->nn; i++) {
            const ct_gnode *n = &g->n[i];
            if (!e->live[i]) continue;
            bool b = (ct__op_info[n->op].flags & CT_OPF_RANDOM) && rnd == CT_VMAP_DIFFERENT;
            bool src = false;
            for (int k = 0; k < n->nin; k++)
                if (n->in[k] >= 0 && bat[n->in[k]] && n->in[k] != n->dst) src = true;
            b = b || src || (n->dst >= 0 && bat[n->dst]);
            if (n->dst >= 0 && src && !bat[n->dst]) {
                int r = vroot(g, n->dst);
                if (g->v[r].kind == CT_GV_NODE && !e->force[r]) {
                    e->force[r] = 1;
                    changed = true;
                }
            }
            for (int k = 0; k < n->nout; k++)
                if (n->out[k] >= 0 && (b || e->force[vroot(g, n->out[k])])) bat[n->out[k]] = 1;
        }
    }
    free(bat);
    return true;
}

/* A graph break where an op read the values of a tensor (g->brk_data):
 * whether that value depends on a batched input (a forward pass over the
 * graph recorded up to the break).  Ops whose output shape then differs
 * per sample make the call an error, as in torch.func (functorch's
 * "dynamic shape" ops: nonzero, unique, masked_select with a batched mask,
 * boolean indexing, repeat_interleave with batched repeats, one_hot without
 * num_classes); the rest (bincount, histc) run as a loop as torch's
 * fallback does. */
static bool entry_dynamic(vm_entry *e, ct_vmap_randomness rnd) {
    const ct_graph *g = &e->g;
    int v0 = g->brk_data - 1;
    if (v0 < 0 || v0 >= g->nv) return false;
    static const char *const k_dyn[] = {"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select",
                                        "repeat_interleave", "one_hot", "index", "index_put", NULL};
    size_t ol = strcspn(g->brk, ":");
    bool dyn_op = false;
    for (int i = 0; k_dyn[i] && !dyn_op; i++) dyn_op = strlen(k_dyn[i]) == ol && !strncmp(g->brk, k_dyn[i], ol);
    if (!dyn_op) return false;
    char *bat = calloc((size_t)g->nv + 1, 1);
    if (!bat) return false;
    for (int k = 0; k < g->nin && k < e->nin; k++) bat[g->inputs[k]] = e->sig[k].batched;
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        bool b = (ct__op_info[n->op].flags & CT_OPF_RANDOM) && rnd == CT_VMAP_DIFFERENT;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0 && (bat[n->in[k]] || bat[vroot(g, n->in[k])])) b = true;
        if (n->dst >= 0 && (bat[n->dst] || bat[vroot(g, n->dst)])) b = true;
        if (!b) continue;
        if (n->dst >= 0) bat[vroot(g, n->dst)] = 1;
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) bat[n->out[k]] = 1;
    }
    bool r = bat[v0] || bat[vroot(g, v0)];
    free(bat);
    if (r) {
        const char *hint = !strncmp(g->brk, "one_hot", ol) ? ": pass an explicit num_classes"
                           : !strncmp(g->brk, "repeat_interleave", ol) ? ": the repeats must not be batched"
                           : !strncmp(g->brk, "masked_select", ol) ? ": batch x only (the mask must not be batched), or use where(mask, x, 0)"
                           : "";
        snprintf(e->why, sizeof e->why, "vmap: %.*s: its output's shape depends on the values of a batched "
                 "tensor (a data-dependent shape: each sample would give another size); torch.func.vmap "
                 "does not support this either%s", (int)ol, g->brk, hint);
    }
    return r;
}

/* The entry for this signature: from the cache, or traced now. */
static vm_entry *get_entry(vm_ctx *x, ct_tensor *const *in, const int *bd, int nin, int nout, int64_t B) {
    vm_sig *sig = calloc((size_t)(nin > 0 ? nin : 1), sizeof *sig);
    if (!sig) return ct__error(CT_ERR_OOM, "vmap: out of memory");
    for (int k = 0; k < nin; k++) make_sig(&sig[k], in[k], bd[k]);
    pthread_mutex_lock(&x->mu);
    for (vm_entry *e = x->cache; e; e = e->next)
        if (sig_equal(e, sig, nin, nout)) {
            pthread_mutex_unlock(&x->mu);
            free(sig);
            return e;
        }
    pthread_mutex_unlock(&x->mu);

    vm_entry *e = calloc(1, sizeof *e);
    if (!e) {
        free(sig);
        return ct__error(CT_ERR_OOM, "vmap: out of memory");
    }
    e->nin = nin;
    e->nout = nout;
    e->sig = sig;
    atomic_fetch_add(&g_traces, 1);
    /* trace f on per-sample examples: sample 0 of each batched input (a
     * view), or an empty tensor of the per-sample shape when B is 0 */
    ct_trace_saved sv;
    ct__trace_suspend(&sv);
    ct_scope s = ct_scope_begin();
    ct_tensor **ex = calloc((size_t)(nin > 0 ? nin : 1), sizeof *ex);
    ct_status st = ex ? CT_OK : ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    for (int k = 0; k < nin && !st; k++) {
        if (bd[k] < 0) ex[k] = in[k];
        else if (B > 0) ex[k] = ct_select(in[k], bd[k], 0);
        else ex[k] = ct_empty_on(sig[k].sizes, sig[k].ndim, sig[k].dtype, sig[k].dev);
        if (!ex[k]) st = ct__bv_status();
    }
    if (!st) st = ct__trace_ops(ct_func_fn, x->f, ex, nin, nout, &e->g);
    ct_scope_end(s);
    ct__trace_resume(&sv);
    free(ex);
    if (st) {
        entry_free(e);
        return NULL;
    }
    if (e->g.brk[0]) {
        e->brk = true;
        snprintf(e->why, sizeof e->why, "graph break: %s", e->g.brk);
        e->dynamic = entry_dynamic(e, x->rnd);
    }
    if (!entry_analyse(e) || !entry_force(e, x->rnd)) {
        entry_free(e);
        return ct__error(CT_ERR_OOM, "vmap: out of memory");
    }
    pthread_mutex_lock(&x->mu);
    for (vm_entry *o = x->cache; o; o = o->next)
        if (sig_equal(o, sig, nin, nout)) { /* another thread traced it meanwhile */
            pthread_mutex_unlock(&x->mu);
            entry_free(e);
            return o;
        }
    e->next = x->cache;
    x->cache = e;
    pthread_mutex_unlock(&x->mu);
    return e;
}

/* ---- out_dims ------------------------------------------------------------------ */
static int64_t out_dim_of(const vm_ctx *x, int j) {
    if (x->n_out == 0) return 0;
    return x->out_dims[x->n_out == 1 ? 0 : j];
}

/* Wraps out_dim od for an output of logical rank r: [-(r+1), r]. */
static ct_status wrap_out_dim(int64_t od, int r, int j, int64_t *res) {
    if (od < -(int64_t)(r + 1) || od > r)
        return ct__error_status(CT_ERR_INDEX, "vmap: out_dim %lld is out of range for output %d, which "
                                "has %d dims per sample (expected a dim in [%d, %d])", (long long)od, j, r,
                                -(r + 1), r);
    *res = od < 0 ? od + r + 1 : od;
    return CT_OK;
}

static ct_tensor *place_output(const vm_ctx *x, ct_bval v, int j, int64_t B) {
    int64_t od = out_dim_of(x, j);
    if (od == CT_VMAP_NONE) {
        if (v.bdim >= 0)
            return ct__error(CT_ERR_ARG, "vmap: out_dims is None for output %d, but it has a batch "
                             "dimension (it depends on a batched input) and cannot be unbatched", j);
        return v.t;
    }
    int r = ct__bv_ndim(v);
    int64_t d = 0;
    if (wrap_out_dim(od, r, j, &d)) return NULL;
    if (v.bdim >= 0) return v.bdim == d ? v.t : ct_movedim(v.t, v.bdim, d);
    /* the same for every sample: expanded along out_dim (torch) */
    int64_t sh[CT_MAX_DIMS];
    if (r + 1 > CT_MAX_DIMS) return ct__error(CT_ERR_SHAPE, "vmap: output %d would have more than %d dims", j, CT_MAX_DIMS);
    for (int i = 0, k = 0; i <= r; i++) sh[i] = i == d ? B : v.t->sizes[k++];
    return ct_expand(ct_unsqueeze(v.t, d), sh, r + 1);
}

/* ---- the loop (a graph break) -------------------------------------------------- */
static ct_status run_loop(vm_ctx *x, const vm_entry *e, ct_tensor *const *in, const int *bd, int nin,
                          ct_tensor **out, int nout, int64_t B) {
    atomic_fetch_add(&g_loops, 1);
    snprintf(tl_loop_why, sizeof tl_loop_why, "%s", e->why);
    if (e->has_random && x->rnd == CT_VMAP_ERROR)
        return ct__error_status(CT_ERR_ARG, "vmap: called a random operation while randomness is "
                                "'error' (use CT_VMAP_SAME or CT_VMAP_DIFFERENT, or draw outside vmap)");
    if (e->has_random && x->rnd == CT_VMAP_SAME)
        return ct__error_status(CT_ERR_ARG, "vmap: randomness 'same' is not supported when the call runs as "
                                "a loop over the samples (%s)", e->why);
    if (B == 0)
        return ct__error_status(CT_ERR_ARG, "vmap: a batch of size 0 cannot run as a loop over the samples "
                                "(%s)", e->why);
    ct_tensor **res = calloc((size_t)(nout * B), sizeof *res), **ins = calloc((size_t)(nin > 0 ? nin : 1), sizeof *ins);
    ct_status st = res && ins ? CT_OK : ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    for (int64_t b = 0; b < B && !st; b++) {
        for (int k = 0; k < nin && !st; k++) {
            ins[k] = bd[k] >= 0 ? ct_select(in[k], bd[k], b) : in[k];
            if (!ins[k]) st = ct__bv_status();
        }
        if (!st) st = ct_func_call(x->f, ins, nin, res + b * nout, nout);
    }
    for (int j = 0; j < nout && !st; j++) {
        int64_t od = out_dim_of(x, j);
        ct_tensor **col = malloc(sizeof *col * (size_t)B);
        if (!col) { st = ct__error_status(CT_ERR_OOM, "vmap: out of memory"); break; }
        for (int64_t b = 0; b < B; b++) col[b] = res[b * nout + j];
        if (od == CT_VMAP_NONE) {
            for (int64_t b = 1; b < B && !st; b++) {
                int eq = ct_equal(col[0], col[b]);
                if (eq != 1)
                    st = ct__error_status(CT_ERR_ARG, "vmap: out_dims is None for output %d, but it differs "
                                          "between samples (it depends on a batched input)", j);
            }
            out[j] = col[0];
        } else {
            int64_t d = 0;
            st = wrap_out_dim(od, col[0]->ndim, j, &d);
            if (!st && !(out[j] = ct_stack(col, (int)B, d))) st = ct__bv_status();
        }
        free(col);
    }
    free(res);
    free(ins);
    return st;
}

/* ---- the batched run ----------------------------------------------------------- */
typedef struct vm_run {
    vm_ctx *x;
    const vm_entry *e;
    int64_t B;
    ct_bval *val;     /* per graph value */
    ct_tensor **tv;   /* scratch per value, for ct__exec_node */
} vm_run;

/* Runs node n of the graph on unbatched tensors once (no batched operand). */
static ct_status run_plain(vm_run *r, const ct_gnode *n, ct_bval *bout) {
    const ct_graph *g = &r->e->g;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0) r->tv[n->in[k]] = r->val[n->in[k]].t;
    if (n->dst >= 0) r->tv[n->dst] = r->val[n->dst].t;
    ct_status st = ct__exec_node(g, n, r->tv);
    for (int k = 0; k < n->nout; k++) {
        int v = n->out[k];
        if (v < 0) continue;
        bout[k].t = st ? NULL : r->tv[v];
        bout[k].bdim = -1;
        ct_release(r->tv[v]); /* the current scope keeps the result */
        r->tv[v] = NULL;
    }
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] >= 0) r->tv[n->in[k]] = NULL;
    if (n->dst >= 0) r->tv[n->dst] = NULL;
    return st;
}

/* The per-sample fallback: the node run on sample b of each batched input,
 * b = 0..B-1, the results stacked on a new dim 0. */
static ct_status run_per_sample(vm_run *r, const ct_gnode *n, const ct_bval *bin, ct_bval *bout) {
    const ct_graph *g = &r->e->g;
    const char *name = ct__op_info[n->op].name;
    if (n->noreplay)
        return ct__error_status(CT_ERR_RUNTIME, "vmap: %s has no batching rule for these operands and "
                                "cannot run alone per sample", name);
    int64_t B = r->B;
    ct_bval dstv = n->dst >= 0 ? r->val[n->dst] : (ct_bval){NULL, -1};
    if (n->dst >= 0 && dstv.bdim < 0)
        return ct__error_status(CT_ERR_ARG, "vmap: %s_: an in-place op cannot write a value that depends "
                                "on a batched input into a tensor that is not batched (use the "
                                "out-of-place op)", name);
    ct_tensor **res = calloc((size_t)(n->nout * (B > 0 ? B : 1)) + 1, sizeof *res);
    if (!res) return ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    ct_status st = CT_OK;
    for (int64_t b = 0; b < B && !st; b++) {
        for (int k = 0; k < n->nin && !st; k++) {
            if (n->in[k] < 0) continue;
            ct_bval v = bin[k];
            r->tv[n->in[k]] = v.bdim >= 0 ? ct_contiguous(ct_select(v.t, v.bdim, b)) : v.t;
            if (!r->tv[n->in[k]]) st = ct__bv_status();
        }
        if (!st && n->dst >= 0 && !(r->tv[n->dst] = ct_select(dstv.t, dstv.bdim, b))) st = ct__bv_status();
        if (!st) st = ct__exec_node(g, n, r->tv);
        for (int k = 0; k < n->nout; k++) {
            int v = n->out[k];
            if (v < 0) continue;
            res[k * B + b] = r->tv[v]; /* a reference of ours; the scope keeps another */
            r->tv[v] = NULL;
        }
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0) r->tv[n->in[k]] = NULL;
        if (n->dst >= 0) r->tv[n->dst] = NULL;
    }
    for (int k = 0; k < n->nout && !st; k++) {
        if (n->out[k] < 0) continue;
        if (n->dst >= 0 && k == 0) {
            bout[0] = dstv; /* written in place, sample by sample */
            continue;
        }
        if (B > 0) {
            bout[k].t = ct_stack(res + k * B, (int)B, 0);
        } else {
            const ct_meta *m = &g->v[n->out[k]].meta;
            int64_t sh[CT_MAX_DIMS];
            sh[0] = 0;
            for (int d = 0; d < m->ndim; d++) sh[d + 1] = m->sizes[d];
            bout[k].t = ct_empty_on(sh, m->ndim + 1, m->dtype, m->device == CT_META ? CT_CPU : m->device);
        }
        bout[k].bdim = 0;
        if (!bout[k].t) st = ct__bv_status();
    }
    for (int64_t i = 0; i < n->nout * B; i++) ct_release(res[i]);
    free(res);
    return st;
}

static ct_status run_graph(vm_ctx *x, const vm_entry *e, ct_tensor *const *in, const int *bd, int nin,
                           ct_tensor **out, int nout, int64_t B) {
    const ct_graph *g = &e->g;
    vm_run r = {x, e, B, calloc((size_t)g->nv + 1, sizeof(ct_bval)), calloc((size_t)g->nv + 1, sizeof(ct_tensor *))};
    ct_status st = r.val && r.tv ? CT_OK : ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    ct_bval bin_local[16], bout_local[8];
    for (int v = 0; v < g->nv && !st; v++) {
        r.val[v].bdim = -1;
        if (g->v[v].kind == CT_GV_CONST) r.val[v].t = g->consts[g->v[v].index];
    }
    for (int k = 0; k < nin && !st; k++) r.val[g->inputs[k]] = (ct_bval){in[k], bd[k]};
    for (int i = 0; i < g->nn && !st; i++) {
        const ct_gnode *n = &g->n[i];
        if (!e->live[i]) continue;
        const ct_op_info *oi = &ct__op_info[n->op];
        ct_bval *bin = n->nin <= 16 ? bin_local : malloc(sizeof *bin * (size_t)n->nin);
        ct_bval *bout = n->nout <= 8 ? bout_local : malloc(sizeof *bout * (size_t)n->nout);
        if (!bin || !bout) {
            if (bin != bin_local) free(bin);
            st = ct__error_status(CT_ERR_OOM, "vmap: out of memory");
            break;
        }
        bool batched = false;
        for (int k = 0; k < n->nin; k++) {
            bin[k] = n->in[k] >= 0 ? r.val[n->in[k]] : (ct_bval){NULL, -1};
            if (n->in[k] >= 0 && !bin[k].t) {
                st = ct__error_status(CT_ERR_RUNTIME, "vmap: %s: operand %d was not computed", oi->name, k);
                break;
            }
            batched = batched || bin[k].bdim >= 0;
        }
        for (int k = 0; k < n->nout; k++) bout[k] = (ct_bval){NULL, -1};
        const ct_bval *dst = n->dst >= 0 ? &r.val[n->dst] : NULL;
        batched = batched || (dst && dst->bdim >= 0);
        ct_vmap_rule_fn rule = (ct_vmap_rule_fn)oi->vmap;
        if (!st) {
            if (!batched && !(oi->flags & CT_OPF_RANDOM) && (!n->noreplay || !rule)) {
                st = run_plain(&r, n, bout);
            } else if (!batched && !(oi->flags & CT_OPF_RANDOM) && !dst && n->nin > 0 && bin[0].t) {
                /* no batched operand, and the graph cannot replay the node alone:
                 * its rule on a batch of one (the first operand given a batch dim),
                 * the batch dim removed again */
                ct_vmap_call c = {g, n, 1, x->rnd, NULL, false, false};
                ct_bval b0 = bin[0];
                bin[0] = (ct_bval){ct_unsqueeze(b0.t, 0), 0};
                st = bin[0].t ? rule(&c, bin, bout) : ct__bv_status();
                if (!st && (c.fallback || c.looped))
                    st = ct__error_status(CT_ERR_RUNTIME, "vmap: %s: no way to run it on unbatched operands",
                                          oi->name);
                for (int k = 0; k < n->nout && !st; k++)
                    if (bout[k].t && bout[k].bdim >= 0) {
                        if (!(bout[k].t = ct_select(bout[k].t, bout[k].bdim, 0))) st = ct__bv_status();
                        bout[k].bdim = -1;
                    }
            } else {
                ct_vmap_call c = {g, n, B, x->rnd, dst, false, false};
                if (rule) {
                    st = rule(&c, bin, bout);
                    if (!st && c.looped) {
                        atomic_fetch_add(&g_op_fallback[n->op], 1);
                        atomic_fetch_add(&g_fallback, 1);
                    } else if (!st && !c.fallback && batched) {
                        atomic_fetch_add(&g_op_batched[n->op], 1);
                        atomic_fetch_add(&g_batched, 1);
                    }
                }
                if (!st && (!rule || c.fallback)) {
                    for (int k = 0; k < n->nout; k++) bout[k] = (ct_bval){NULL, -1};
                    st = run_per_sample(&r, n, bin, bout);
                    atomic_fetch_add(&g_op_fallback[n->op], 1);
                    atomic_fetch_add(&g_fallback, 1);
                }
            }
        }
        for (int k = 0; k < n->nout && !st; k++)
            if (n->out[k] >= 0) {
                int v = n->out[k];
                if (!bout[k].t)
                    st = ct__error_status(CT_ERR_RUNTIME, "vmap: %s gave no output %d", oi->name, k);
                else if (bout[k].bdim < 0 && e->force[v] && vroot(g, v) == v &&
                         !(bout[k] = (ct_bval){ct_contiguous(ct__bv_full(bout[k], B)), 0}).t)
                    st = ct__bv_status();
                r.val[v] = bout[k];
            }
        if (bin != bin_local) free(bin);
        if (bout != bout_local) free(bout);
    }
    for (int j = 0; j < nout && !st; j++) {
        int v = g->outputs[j];
        if (v < 0 || !r.val[v].t) {
            st = ct__error_status(CT_ERR_RUNTIME, "vmap: output %d was not computed", j);
            break;
        }
        if (!(out[j] = place_output(x, r.val[v], j, B))) st = ct__bv_status();
    }
    free(r.val);
    free(r.tv);
    return st;
}

static ct_status run_batch(vm_ctx *x, ct_tensor *const *in, const int *bd, int nin, ct_tensor **out,
                           int nout, int64_t B) {
    const vm_entry *e = get_entry(x, in, bd, nin, nout, B);
    if (!e) return ct__bv_status();
    if (e->dynamic) return ct__error_status(CT_ERR_ARG, "%s", e->why);
    if (e->brk) return run_loop(x, e, in, bd, nin, out, nout, B);
    return run_graph(x, e, in, bd, nin, out, nout, B);
}

static ct_status vm_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    vm_ctx *x = ctx;
    atomic_fetch_add(&g_calls, 1);
    if (x->n_in > 1 && x->n_in != nin)
        return ct__error_status(CT_ERR_ARG, "vmap: in_dims has %d entries, but the function was called "
                                "with %d inputs", x->n_in, nin);
    if (x->n_out > 1 && x->n_out != nout)
        return ct__error_status(CT_ERR_ARG, "vmap: out_dims has %d entries, but the function has %d "
                                "outputs", x->n_out, nout);
    int bd_local[16], *bd = nin <= 16 ? bd_local : malloc(sizeof(int) * (size_t)nin);
    if (!bd) return ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    int64_t B = -1;
    int first = -1;
    ct_status st = CT_OK;
    for (int k = 0; k < nin && !st; k++) {
        if (!in[k]) {
            st = ct__error_status(CT_ERR_NULL, "vmap: input %d is NULL", k);
            break;
        }
        int64_t d = x->n_in == 0 ? 0 : x->in_dims[x->n_in == 1 ? 0 : k];
        int nd = in[k]->ndim;
        if (d == CT_VMAP_NONE) {
            bd[k] = -1;
            continue;
        }
        if (d < -nd || d >= nd) {
            st = ct__error_status(CT_ERR_INDEX, "vmap: in_dim %lld for input %d is out of range: the input has "
                                  "%d dims, so in_dim must be in [%d, %d) (or CT_VMAP_NONE)", (long long)d, k,
                                  nd, -nd, nd);
            break;
        }
        bd[k] = (int)(d < 0 ? d + nd : d);
        int64_t sz = in[k]->sizes[bd[k]];
        if (B < 0) {
            B = sz;
            first = k;
        } else if (sz != B) {
            st = ct__error_status(CT_ERR_SHAPE, "vmap: expected all batched inputs to have the same size in "
                                  "the mapped dim, got %lld (input %d, dim %d) and %lld (input %d, dim %d)",
                                  (long long)B, first, bd[first], (long long)sz, k, bd[k]);
        }
    }
    if (!st && B < 0)
        st = ct__error_status(CT_ERR_ARG, "vmap: at least one input must be batched (every in_dim is "
                              "CT_VMAP_NONE%s)", nin == 0 ? ": the function was called without inputs" : "");
    if (!st) {
        if (x->chunk > 0 && x->chunk < B) {
            /* chunks of chunk samples, each a batched run, concatenated */
            int64_t nch = (B + x->chunk - 1) / x->chunk;
            ct_tensor **parts = calloc((size_t)(nch * nout), sizeof *parts);
            ct_tensor **sub = calloc((size_t)(nin > 0 ? nin : 1), sizeof *sub);
            if (!parts || !sub) st = ct__error_status(CT_ERR_OOM, "vmap: out of memory");
            for (int64_t c = 0; c < nch && !st; c++) {
                int64_t c0 = c * x->chunk, len = B - c0 < x->chunk ? B - c0 : x->chunk;
                for (int k = 0; k < nin && !st; k++) {
                    sub[k] = bd[k] >= 0 ? ct_narrow(in[k], bd[k], c0, len) : in[k];
                    if (!sub[k]) st = ct__bv_status();
                }
                if (!st) st = run_batch(x, sub, bd, nin, parts + c * nout, nout, len);
            }
            for (int j = 0; j < nout && !st; j++) {
                int64_t od = out_dim_of(x, j);
                if (od == CT_VMAP_NONE) {
                    out[j] = parts[j];
                    continue;
                }
                int64_t d = 0;
                ct_tensor **col = malloc(sizeof *col * (size_t)nch);
                if (!col) { st = ct__error_status(CT_ERR_OOM, "vmap: out of memory"); break; }
                for (int64_t c = 0; c < nch; c++) col[c] = parts[c * nout + j];
                st = wrap_out_dim(od, col[0]->ndim - 1, j, &d);
                if (!st && !(out[j] = ct_cat(col, (int)nch, d))) st = ct__bv_status();
                free(col);
            }
            free(parts);
            free(sub);
        } else {
            st = run_batch(x, in, bd, nin, out, nout, B);
        }
    }
    if (bd != bd_local) free(bd);
    return st;
}

ct_func *ct_vmap(ct_func *f, const ct_vmap_opts *opts) {
    if (!f) return ct__error(CT_ERR_NULL, "ct_vmap: the function is NULL");
    ct_vmap_opts o = opts ? *opts : CT_VMAP_DEFAULT;
    if (o.n_in_dims < 0 || o.n_out_dims < 0 || (o.n_in_dims > 0 && !o.in_dims) || (o.n_out_dims > 0 && !o.out_dims))
        return ct__error(CT_ERR_ARG, "ct_vmap: in_dims / out_dims: bad counts (%d, %d) or NULL arrays",
                         o.n_in_dims, o.n_out_dims);
    if (o.randomness != CT_VMAP_ERROR && o.randomness != CT_VMAP_DIFFERENT && o.randomness != CT_VMAP_SAME)
        return ct__error(CT_ERR_ARG, "ct_vmap: randomness must be CT_VMAP_ERROR, CT_VMAP_DIFFERENT or "
                         "CT_VMAP_SAME, got %d", (int)o.randomness);
    if (o.chunk_size < 0)
        return ct__error(CT_ERR_ARG, "ct_vmap: chunk_size must be >= 0 (0: the whole batch at once), got %lld",
                         (long long)o.chunk_size);
    vm_ctx *x = calloc(1, sizeof *x);
    if (!x) return ct__error(CT_ERR_OOM, "ct_vmap: out of memory");
    x->in_dims = malloc(sizeof(int64_t) * (size_t)(o.n_in_dims + 1));
    x->out_dims = malloc(sizeof(int64_t) * (size_t)(o.n_out_dims + 1));
    if (!x->in_dims || !x->out_dims) {
        free(x->in_dims);
        free(x->out_dims);
        free(x);
        return ct__error(CT_ERR_OOM, "ct_vmap: out of memory");
    }
    if (o.n_in_dims) memcpy(x->in_dims, o.in_dims, sizeof(int64_t) * (size_t)o.n_in_dims);
    if (o.n_out_dims) memcpy(x->out_dims, o.out_dims, sizeof(int64_t) * (size_t)o.n_out_dims);
    x->n_in = o.n_in_dims;
    x->n_out = o.n_out_dims;
    x->rnd = o.randomness;
    x->chunk = o.chunk_size;
    pthread_mutex_init(&x->mu, NULL);
    x->f = ct_func_retain(f);
    ct_func *r = ct_func_new_owned(vm_fn, x, vm_free);
    if (!r) vm_free(x);
    return r;
}
