/* lower.c -- fusion: groups of a graph's nodes become loop-nest kernels
 * (ct_kernel, compile_impl.h), the rest stay node steps; the plan orders
 * both.  See compile_impl.h for the IR and the plan.
 *
 * The rules (TorchInductor's, on a smaller scale):
 *
 *  - What fuses: elementwise table ops with an ew_math.def expression for
 *    their compute dtype (bool, u8 ... i64, f32, f64; the compute dtype is
 *    the eager driver's: the inputs' result_type, float-promoted by the op's
 *    mode, each input converted to it as ct__ew does), dtype conversions
 *    (copy with the input's shape on the cpu), the reductions sum / mean /
 *    prod / amax / amin over any set of dims, and the row ops softmax,
 *    log_softmax (any dim) and layer_norm_fwd (its rows), lowered directly
 *    to multi-stage kernels: softmax is REDUCE(max), REDUCE(sum exp(x - m)),
 *    STORE(exp(x - m) * (1 / s)) -- the same formula as the eager kernels, so
 *    the results agree to rounding.  (That is the "decomposition" of these
 *    composites: done here, not as a graph rewrite, so that a softmax that
 *    does not fuse stays one eager node with its hand-written kernel.)
 *  - A group has one iteration domain D (a broadcast shape without its
 *    static size-1 dims, sizes static or symbolic) and at most one set of
 *    reduced dims RD of D.  Each value in the group has a map from its dims
 *    to D's (or -1 for a size-1 dim): a full value varies over all of D, a
 *    reduction's result over D minus RD.  A node joins a group when its
 *    output maps onto D, its operands are group values whose maps agree with
 *    the output's (broadcasting from the right, as eager does) or outside
 *    values (read through their strides: sizes and strides are run-time
 *    arguments), and its reductions reduce exactly RD (sibling reductions
 *    over the same dims share the kernel: horizontal fusion, one loop).
 *  - Order: the kernel runs where its first node was; so a node joins only
 *    when each of its outside inputs is available before that point (a
 *    graph input, a constant, a node before it, or the output of a kernel
 *    that runs before it), and never past an in-place node (an in-place
 *    write closes every open group: nothing reads a buffer before a write
 *    that eager order reads after it).  Views feeding a group stay node steps
 *    before it; the kernel reads the view's strides.
 *  - In-place writes into graph inputs and constants (x.mul_(y), copy_:
 *    an optimizer's step) join a group and the kernel stores into the
 *    written tensor itself, under the conditions listed at inplace_kind below; they
 *    close the other open groups as any in-place write does.
 *  - A value used outside its group (a graph output, a node step, another
 *    kernel) is stored to a fresh contiguous buffer; the others live in
 *    registers.  A full value is stored in the loop of the stage that can
 *    first compute it, a reduction's result after its loop.
 *  - GEMM / conv / sdpa and every other op stay node steps; the pointwise
 *    ops after them (bias, activation) fuse into a kernel reading their
 *    output (an epilogue kernel, not yet inside the GEMM).
 *  - A group of fewer than ct__lower_min_nodes (2) nodes stays a node step:
 *    a lone op's eager kernel is hand-vectorized.
 *  - Nothing fuses when autograd must record the ops (g->record_grad, or
 *    grad mode on and a constant requiring grad): then the plan is every
 *    node, run through the op layer, which records as eager does.  Training
 *    through fused kernels needs the joint forward/backward graph (later).
 */
#include "compile_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/ew.h"
#include "../ops/render.h"
#include "ctorch/autograd.h"

int ct__lower_min_nodes = 2;

enum { MAXBUF = 16, MAXSTAGE = 8, MAXSTORE = 8, MAXRED = 6, MAXFOLD = 8, MAXDEF = 32 };

/* ---- per-group state ---------------------------------------------------------- */
typedef struct gval {
    int v;                        /* graph value */
    int inst;                     /* instruction computing it */
    signed char map[CT_MAX_DIMS]; /* value dim -> D dim, -1 for a size-1 dim */
    int phase;                    /* reduce stages it depends on: computable from stage `phase` on */
} gval;

typedef struct gext {
    int v;
    signed char map[CT_MAX_DIMS];
    int inst;                     /* its LOAD */
} gext;

typedef struct gred {
    ct_kred red;
    ct_dtype acc;
    int value;                    /* instruction folded */
    int v_out;                    /* graph value of its result, or -1 */
} gred;

typedef struct group {
    int first, last, nnodes;
    bool closed;
    int R;                        /* rank of D */
    int64_t D[CT_MAX_DIMS];
    int Dsym[CT_MAX_DIMS];
    bool rd[CT_MAX_DIMS];
    bool has_rd;
    ct_kinst *inst;
    int ninst, cap_inst;
    gext ext[MAXBUF];
    int next;
    gred red[MAXRED];
    int nred;
    gval *vals;
    int nvals, cap_vals;
    /* in-place writes folded into the kernel (see fold_ok): fold[f] stores
     * instruction inst into the tensor of value root (a graph input or a
     * constant) at the full index; the values the writes define (def[]) are
     * that tensor after the kernel */
    struct gfold { int root, inst; signed char map[CT_MAX_DIMS]; } fold[MAXFOLD];
    int nfold;
    int def[MAXDEF], def_fold[MAXDEF];
    int ndef;
    char name[64];
} group;

typedef struct lower {
    const ct_graph *g;
    group *gr;
    int ngr, cap_gr;
    int *node_group;  /* per node: its group, or -1 */
    int *val_group;   /* per value: the group computing it, or -1 */
    int *val_slot;    /* per value: its index in that group's vals */
    bool oom;
} lower;

static bool kdtype_ok(ct_dtype d) {
    switch (d) {
    case CT_BOOL: case CT_U8: case CT_I8: case CT_I16: case CT_I32: case CT_I64:
    case CT_F32: case CT_F64: return true;
    default: return false;
    }
}
static bool is_float(ct_dtype d) { return d == CT_F32 || d == CT_F64; }

/* static size 1 (a broadcast dim); a symbolic size never is */
static bool size_one(const ct_gvalue *x, int j) { return x->sym[j] < 0 && x->meta.sizes[j] == 1; }
static bool same_size(const ct_gvalue *x, int j, const group *G, int d) {
    if (x->sym[j] >= 0 || G->Dsym[d] >= 0) return x->sym[j] == G->Dsym[d];
    return x->meta.sizes[j] == G->D[d];
}

static bool wrapped_const(const ct_graph *g, int v) {
    const ct_gvalue *x = &g->v[v];
    if (x->kind != CT_GV_CONST) return false;
    const ct_tensor *t = g->consts[x->index];
    return t && (t->flags & CT_TF_WRAPPED) && t->ndim == 0 && kdtype_ok(t->dtype);
}

/* The value's availability: the program position after which it exists
 * (-1: from the start).  A value a kernel computes exists from the
 * kernel's position, its group's first node. */
static int avail(const lower *L, int v) {
    const ct_gvalue *x = &L->g->v[v];
    if (x->kind != CT_GV_NODE) return -1;
    int gi = L->val_group[v];
    return gi >= 0 && L->gr[gi].nnodes >= ct__lower_min_nodes ? L->gr[gi].first : x->index;
}

/* The value whose storage v shares (the first value seen on it), or v. */
static int root_of(const ct_graph *g, int v) {
    for (int hop = 0; v >= 0 && g->v[v].alias >= 0 && hop < g->nv; hop++) v = g->v[v].alias;
    return v;
}

/* G writes the storage of value v in place (a fold): reading it from memory
 * inside G after the write would read the new data where eager order reads
 * what the node's position says, so such reads do not join G. */
static bool root_written(const lower *L, const group *G, int v) {
    if (!G->nfold) return false;
    int r = root_of(L->g, v);
    for (int f = 0; f < G->nfold; f++)
        if (G->fold[f].root == r) return true;
    return false;
}

/* ---- instructions ---------------------------------------------------------- */
static int emit(lower *L, group *G, ct_kinst in) {
    if (G->ninst == G->cap_inst) {
        int nc = G->cap_inst ? 2 * G->cap_inst : 32;
        ct_kinst *q = realloc(G->inst, sizeof *q * (size_t)nc);
        if (!q) { L->oom = true; return -1; }
        G->inst = q;
        G->cap_inst = nc;
    }
    G->inst[G->ninst] = in;
    return G->ninst++;
}
static int emit_ew(lower *L, group *G, ct_op op, const ct_p_ew *p, ct_dtype dt, int a0, int a1, int a2) {
    ct_kinst k;
    memset(&k, 0, sizeof k);
    k.kind = CT_KI_EW;
    k.op = op;
    if (p) k.p = *p;
    k.dtype = dt;
    k.a[0] = a0, k.a[1] = a1, k.a[2] = a2;
    return emit(L, G, k);
}
static int emit_cast(lower *L, group *G, int a, ct_dtype to) {
    if (a < 0) return -1;
    if (G->inst[a].dtype == to) return a;
    ct_kinst k;
    memset(&k, 0, sizeof k);
    k.kind = CT_KI_CAST;
    k.dtype = to;
    k.a[0] = a;
    return emit(L, G, k);
}
static int emit_const(lower *L, group *G, double v, ct_dtype dt) {
    ct_kinst k;
    memset(&k, 0, sizeof k);
    k.kind = CT_KI_CONST;
    k.dtype = dt;
    k.p.value = v;
    return emit(L, G, k);
}
static int emit_stage(lower *L, group *G, int stage, ct_dtype dt) {
    ct_kinst k;
    memset(&k, 0, sizeof k);
    k.kind = CT_KI_STAGE;
    k.dtype = dt;
    k.a[0] = stage;
    return emit(L, G, k);
}

/* ---- operands ---------------------------------------------------------------- */
/* Maps output dims: omap[i] for each of the node's output dims (rank orank). */
typedef struct omap_t {
    int rank;
    signed char m[CT_MAX_DIMS];
} omap_t;

static gval *group_val(lower *L, group *G, int v) {
    int gi = L->val_group[v];
    if (gi < 0 || &L->gr[gi] != G) {
        /* a value of this node's trial (not committed yet) */
        for (int k = 0; k < G->nvals; k++)
            if (G->vals[k].v == v) return &G->vals[k];
        return NULL;
    }
    return &G->vals[L->val_slot[v]];
}

/* The instruction for operand v of a node whose output maps as om; -1 when
 * it cannot be read inside G.  *phase is raised to the operand's phase. */
static int operand(lower *L, group *G, int v, const omap_t *om, int *phase) {
    const ct_graph *g = L->g;
    const ct_gvalue *x = &g->v[v];
    if (!kdtype_ok(x->meta.dtype) || x->meta.device != CT_CPU || x->meta.ndim < 0) return -1;
    int r = x->meta.ndim, off = om->rank - r;
    if (off < 0) return -1;
    gval *gv = group_val(L, G, v);
    if (gv) {
        for (int j = 0; j < r; j++) {
            if (size_one(x, j)) continue;
            if (om->m[off + j] != gv->map[j]) return -1;
        }
        if (gv->phase > *phase) *phase = gv->phase;
        return gv->inst;
    }
    if (avail(L, v) >= G->first || root_written(L, G, v)) return -1;
    if (wrapped_const(g, v)) {
        const ct_tensor *t = g->consts[x->index];
        return emit_const(L, G, ct__load_f64(ct__ptr(t), t->dtype), t->dtype);
    }
    signed char map[CT_MAX_DIMS];
    for (int j = 0; j < r; j++) {
        if (size_one(x, j)) { map[j] = -1; continue; }
        int d = om->m[off + j];
        if (d < 0 || !same_size(x, j, G, d)) return -1;
        map[j] = (signed char)d;
    }
    for (int k = 0; k < G->next; k++)
        if (G->ext[k].v == v && memcmp(G->ext[k].map, map, (size_t)r) == 0) return G->ext[k].inst;
    if (G->next >= MAXBUF - 2) return -1;
    ct_kinst k;
    memset(&k, 0, sizeof k);
    k.kind = CT_KI_LOAD;
    k.dtype = x->meta.dtype;
    k.buf = G->next;
    int i = emit(L, G, k);
    if (i < 0) return -1;
    gext *e = &G->ext[G->next++];
    e->v = v;
    memset(e->map, -1, sizeof e->map);
    memcpy(e->map, map, (size_t)r);
    e->inst = i;
    return i;
}

/* The full map of a value of G's domain's shape (its non-1 dims, in order,
 * are D's), or false. */
static bool full_map(const group *G, const ct_gvalue *x, omap_t *om) {
    om->rank = x->meta.ndim;
    int d = 0;
    for (int j = 0; j < x->meta.ndim; j++) {
        if (size_one(x, j)) { om->m[j] = -1; continue; }
        if (d >= G->R || !same_size(x, j, G, d)) return false;
        om->m[j] = (signed char)d++;
    }
    return d == G->R;
}

/* The map of an elementwise node's output x: full when it has D's shape,
 * else what its in-group operands say. */
static bool out_map(lower *L, group *G, const ct_gvalue *x, const int *in, int nin, omap_t *om) {
    if (full_map(G, x, om)) return true;
    om->rank = x->meta.ndim;
    for (int j = 0; j < om->rank; j++) om->m[j] = size_one(x, j) ? -1 : -2;
    bool any = false;
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0) continue;
        gval *gv = group_val(L, G, in[k]);
        if (!gv) continue;
        const ct_gvalue *y = &L->g->v[in[k]];
        int off = om->rank - y->meta.ndim;
        if (off < 0) return false;
        for (int j = 0; j < y->meta.ndim; j++) {
            if (size_one(y, j)) continue;
            signed char *m = &om->m[off + j];
            if (*m == -2) *m = gv->map[j];
            else if (*m != gv->map[j]) return false;
            any = true;
        }
    }
    if (!any) return false;
    unsigned used = 0;
    for (int j = 0; j < om->rank; j++) {
        if (om->m[j] == -2) return false;
        if (om->m[j] >= 0 && !same_size(x, j, G, om->m[j])) return false;
        /* two output dims on one dim of D (an outer product of a [n] and
         * an [n, 1] value of the group): the loop over D would reach only
         * the diagonal; such a node starts its own group */
        if (om->m[j] >= 0) {
            if (used >> om->m[j] & 1u) return false;
            used |= 1u << om->m[j];
        }
    }
    return true;
}

/* Records v as a value of the group (committed with the node). */
static bool add_val(lower *L, group *G, int v, int inst, const omap_t *om, int phase) {
    if (G->nvals == G->cap_vals) {
        int nc = G->cap_vals ? 2 * G->cap_vals : 16;
        gval *q = realloc(G->vals, sizeof *q * (size_t)nc);
        if (!q) { L->oom = true; return false; }
        G->vals = q;
        G->cap_vals = nc;
    }
    gval *gv = &G->vals[G->nvals++];
    gv->v = v;
    gv->inst = inst;
    memset(gv->map, -1, sizeof gv->map);
    memcpy(gv->map, om->m, (size_t)om->rank);
    gv->phase = phase;
    return true;
}

/* ---- the nodes that fuse --------------------------------------------------------- */
typedef enum { NK_NONE, NK_EW, NK_CAST, NK_RED, NK_ROWS, NK_EWG } nkind;

static nkind node_kind(const ct_graph *g, const ct_gnode *n) {
    if (n->dead || n->dst >= 0 || n->nout < 1) return NK_NONE;
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0 && (!kdtype_ok(g->v[n->out[k]].meta.dtype) ||
                               g->v[n->out[k]].meta.device != CT_CPU))
            return NK_NONE;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] < 0 || !kdtype_ok(g->v[n->in[k]].meta.dtype)) return NK_NONE;
    unsigned fl = ct__op_info[n->op].flags;
    if (n->op == CT_OP_copy) {
        const ct_p_copy *p = &n->args.p.copy;
        return n->nin == 1 && n->nout == 1 && !p->has_shape && p->device == CT_CPU ? NK_CAST : NK_NONE;
    }
    if ((fl & CT_OPF_EW) && ct__ew_kind(n->op) != CT_EWK_NONE && n->nout == 1 &&
        n->nin == ct__ew_arity(n->op))
        return NK_EW;
    switch (n->op) {
    case CT_OP_sum: case CT_OP_mean: case CT_OP_prod: case CT_OP_amax: case CT_OP_amin:
        return n->nin == 1 && n->nout == 1 ? NK_RED : NK_NONE;
    case CT_OP_softmax: case CT_OP_log_softmax:
        return n->nin == 1 && n->nout == 1 && is_float(g->v[n->in[0]].meta.dtype) ? NK_ROWS : NK_NONE;
    case CT_OP_layer_norm_fwd:
        return n->nin >= 1 && is_float(g->v[n->in[0]].meta.dtype) ? NK_ROWS : NK_NONE;
    case CT_OP_ew_grad: /* an activation's gradient: pointwise in (g, t) */
        return n->nin == 2 && n->nout == 1 && is_float(g->v[n->out[0]].meta.dtype) &&
                       g->v[n->in[0]].meta.dtype == g->v[n->out[0]].meta.dtype &&
                       g->v[n->in[1]].meta.dtype == g->v[n->out[0]].meta.dtype &&
                       n->args.p.ew_grad.kind >= 0 && n->args.p.ew_grad.kind < CT_EWG_COUNT
                   ? NK_EWG
                   : NK_NONE;
    default: return NK_NONE;
    }
}

/* result_type over the node's inputs as graph values (a wrapped constant
 * keeps its tier) */
static ct_dtype inputs_result_type(const ct_graph *g, const ct_gnode *n) {
    struct ct_tensor fake[8];
    ct_tensor *ts[8];
    int k;
    for (k = 0; k < n->nin && k < 8; k++) {
        const ct_gvalue *x = &g->v[n->in[k]];
        memset(&fake[k], 0, sizeof fake[k]);
        fake[k].dtype = x->meta.dtype;
        fake[k].ndim = x->meta.ndim;
        if (x->kind == CT_GV_CONST && g->consts[x->index]) fake[k].flags = g->consts[x->index]->flags;
        ts[k] = &fake[k];
    }
    return ct_result_type(ts, k);
}

/* D := the non-1 dims of x (a new group's domain) */
static void set_domain(group *G, const ct_gvalue *x) {
    G->R = 0;
    for (int j = 0; j < x->meta.ndim; j++) {
        if (size_one(x, j)) continue;
        G->D[G->R] = x->meta.sizes[j];
        G->Dsym[G->R] = x->sym[j];
        G->R++;
    }
}

/* The reduced dims of D a reduction over x's dims red[] (mapped by om)
 * gives, into rd; false when it reduces nothing of D or maps badly. */
static bool reduce_dims(const group *G, const ct_gvalue *x, const omap_t *om, const bool *red, bool *rd) {
    memset(rd, 0, sizeof(bool) * CT_MAX_DIMS);
    bool any = false;
    for (int j = 0; j < x->meta.ndim; j++) {
        if (!red[j] || om->m[j] < 0) continue;
        rd[om->m[j]] = true;
        any = true;
    }
    (void)G;
    return any;
}

static bool rd_accept(group *G, const bool *rd) {
    if (G->has_rd) return memcmp(G->rd, rd, sizeof G->rd) == 0;
    if (G->nred) return false;
    memcpy(G->rd, rd, sizeof G->rd);
    G->has_rd = true;
    return true;
}

/* The map of the input of a reduction / row op: a full group value, or an
 * outside value of D's shape. */
static bool input_map(lower *L, group *G, int v, omap_t *om) {
    const ct_gvalue *x = &L->g->v[v];
    gval *gv = group_val(L, G, v);
    om->rank = x->meta.ndim;
    if (gv) {
        memcpy(om->m, gv->map, sizeof om->m);
        /* it must vary over all of D (the reductions read full values) */
        int cnt = 0;
        for (int j = 0; j < x->meta.ndim; j++) cnt += om->m[j] >= 0;
        return cnt == G->R;
    }
    return full_map(G, x, om);
}

static int new_reduce(lower *L, group *G, ct_kred red, ct_dtype acc, int value, int v_out) {
    if (G->nred >= MAXRED) return -1;
    gred *r = &G->red[G->nred];
    r->red = red;
    r->acc = acc;
    r->value = value;
    r->v_out = v_out;
    return G->nred++;
}

/* ---- in-place writes into inputs and constants -------------------------------
 * An in-place elementwise op (x.mul_(y), ...) or copy_ writing a graph input
 * or a constant (an optimizer's parameters and states, a module's buffers)
 * joins a group as its out-of-place form would and the kernel stores its
 * value straight into that tensor: no temporary, no copy pass after.  It
 * folds when
 *   - the value written is the tensor itself (its storage's first value, not
 *     a view) or the latest value an earlier fold of the group defined for
 *     it; its geometry is dense and non-overlapping and spans the domain;
 *   - every load of that storage in the group is of that value at the same
 *     index, so each element is read before it is written, in one iteration
 *     (one buffer, read and written: `restrict` holds);
 *   - no node outside the group between the kernel's position and the write
 *     touches the storage (it would run after the kernel, seeing new data);
 *   - the group has no reductions, and gains none later.
 * The write closes every other open group (as an unfused in-place node
 * does); later nodes of this one read the values it defined (registers),
 * never the storage (root_written).  exec.c refuses a run whose inputs
 * share memory with a tensor a kernel writes (unless the trace saw it). */
static nkind inplace_kind(const ct_graph *g, const ct_gnode *n) {
    if (n->dead || n->dst < 0 || n->nout != 1 || n->out[0] < 0) return NK_NONE;
    const ct_gvalue *d = &g->v[n->dst];
    if (!kdtype_ok(d->meta.dtype) || d->meta.device != CT_CPU || d->meta.ndim < 0) return NK_NONE;
    for (int k = 0; k < n->nin; k++)
        if (n->in[k] < 0 || !kdtype_ok(g->v[n->in[k]].meta.dtype)) return NK_NONE;
    if (n->op == CT_OP_copy) return n->nin == 1 ? NK_CAST : NK_NONE;
    unsigned fl = ct__op_info[n->op].flags;
    if ((fl & CT_OPF_EW) && !(fl & CT_OPF_RANDOM) && n->op != CT_OP_fill &&
        ct__ew_kind(n->op) != CT_EWK_NONE && n->nin == ct__ew_arity(n->op))
        return NK_EW;
    return NK_NONE;
}

/* each element once: the dims of size > 1 by increasing stride are dense */
static bool dense(const ct_meta *m) {
    int ord[CT_MAX_DIMS], n = 0;
    for (int d = 0; d < m->ndim; d++) {
        if (m->sizes[d] == 0) return true;
        if (m->sizes[d] != 1) ord[n++] = d;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && m->strides[ord[j]] < m->strides[ord[j - 1]]; j--) {
            int t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    int64_t want = 1;
    for (int i = 0; i < n; i++) {
        if (m->strides[ord[i]] != want) return false;
        want *= m->sizes[ord[i]];
    }
    return true;
}

/* The fold of in-place node n in G: its entry (>= 0), -1 for a new one
 * (*root: the storage's value), -2 when the write cannot fold. */
static int fold_slot(const lower *L, const group *G, const ct_gnode *n, int *root) {
    const ct_graph *g = L->g;
    int r = root_of(g, n->dst);
    *root = r;
    const ct_gvalue *x = &g->v[r];
    if (x->kind != CT_GV_INPUT && x->kind != CT_GV_CONST) return -2;
    if (x->kind == CT_GV_CONST && (!g->consts[x->index] || (g->consts[x->index]->flags & CT_TF_WRAPPED)))
        return -2;
    if (G->nred || G->has_rd) return -2;
    for (int f = 0; f < G->nfold; f++) {
        if (G->fold[f].root != r) continue;
        int last = -1;
        for (int k = 0; k < G->ndef; k++)
            if (G->def_fold[k] == f) last = G->def[k];
        return n->dst == last ? f : -2;
    }
    if (n->dst != r || !dense(&x->meta) || G->nfold >= MAXFOLD) return -2;
    return -1;
}

/* a node outside G after G's first node and before ni reads or writes r's storage */
static bool touched_between(const lower *L, const group *G, int ni, int r) {
    const ct_graph *g = L->g;
    int q = (int)(G - L->gr);
    for (int j = G->first + 1; j < ni; j++) {
        const ct_gnode *u = &g->n[j];
        if (u->dead || L->node_group[j] == q) continue;
        if (u->dst >= 0 && root_of(g, u->dst) == r) return true;
        for (int k = 0; k < u->nin; k++)
            if (u->in[k] >= 0 && root_of(g, u->in[k]) == r) return true;
    }
    return false;
}

/* Tries to add node ni to G (G->first already set); on failure G is as it was. */
static bool join(lower *L, group *G, int ni) {
    const ct_graph *g = L->g;
    const ct_gnode *n = &g->n[ni];
    bool inplace = n->dst >= 0;
    nkind kind = inplace ? inplace_kind(g, n) : node_kind(g, n);
    if (kind == NK_NONE) return false;
    if ((kind == NK_RED || kind == NK_ROWS) && G->nfold) return false;
    int fslot = -1, froot = -1;
    if (inplace && (fslot = fold_slot(L, G, n, &froot)) == -2) return false;
    int save_inst = G->ninst, save_ext = G->next, save_vals = G->nvals, save_red = G->nred;
    bool save_has_rd = G->has_rd;
    bool save_rd[CT_MAX_DIMS];
    memcpy(save_rd, G->rd, sizeof save_rd);
    const ct_gvalue *xo = &g->v[n->out[0] >= 0 ? n->out[0] : n->in[0]];
    omap_t om;
    int phase = 0;

    if (kind == NK_EW || kind == NK_CAST) {
        if (n->out[0] < 0) goto fail;
        if (G->nnodes == 0) set_domain(G, xo);
        /* an in-place write covers the whole domain (its tensor's shape) */
        if (inplace ? !full_map(G, xo, &om) : !out_map(L, G, xo, n->in, n->nin, &om)) goto fail;
        int a[3] = {-1, -1, -1};
        if (kind == NK_CAST) {
            a[0] = operand(L, G, n->in[0], &om, &phase);
            int c = emit_cast(L, G, a[0], xo->meta.dtype);
            if (a[0] < 0 || c < 0) goto fail;
            if (!add_val(L, G, n->out[0], c, &om, phase)) goto fail;
        } else {
            ct_op op = n->op;
            ct_dtype cdt = inputs_result_type(g, n);
            if (ct__op_info[op].ew_mode & CT_EW_FLOAT) cdt = ct__float_dtype(cdt);
            if (!kdtype_ok(cdt) || !ct__ew_supports(op, cdt) ||
                ct__ew_out_dtype(op, cdt) != (int)xo->meta.dtype)
                goto fail;
            for (int k = 0; k < n->nin; k++) {
                int i = operand(L, G, n->in[k], &om, &phase);
                if (i < 0) goto fail;
                if (op == CT_OP_where && k == 0) {
                    if (G->inst[i].dtype != CT_BOOL) goto fail;
                    a[k] = i;
                } else if ((a[k] = emit_cast(L, G, i, cdt)) < 0) {
                    goto fail;
                }
            }
            const ct_p_ew *p = ct__op_pfam[op] == CT_PFAM_ew ? &n->args.p.ew : NULL;
            int e = emit_ew(L, G, op, p, xo->meta.dtype, a[0], a[1], a[2]);
            if (e < 0 || !add_val(L, G, n->out[0], e, &om, phase)) goto fail;
        }
    } else if (kind == NK_EWG) {
        /* ew_grad's formulas (ew.h, the CPU kernel's scalar form), in the
         * dtype of g and t */
        if (n->out[0] < 0) goto fail;
        if (G->nnodes == 0) set_domain(G, xo);
        if (!out_map(L, G, xo, n->in, n->nin, &om)) goto fail;
        ct_dtype dt = xo->meta.dtype;
        int gi = operand(L, G, n->in[0], &om, &phase), t = operand(L, G, n->in[1], &om, &phase);
        if (gi < 0 || t < 0) goto fail;
#define K(v) emit_const(L, G, (v), dt)
#define E2(op, a, b) emit_ew(L, G, CT_OP_##op, NULL, dt, (a), (b), -1)
#define E1(op, a) emit_ew(L, G, CT_OP_##op, NULL, dt, (a), -1, -1)
        int r = -1;
        switch ((int)n->args.p.ew_grad.kind) {
        case CT_EWG_RELU: { /* t <= 0 ? 0 : g */
            int z = K(0.0);
            int c = emit_ew(L, G, CT_OP_le, NULL, CT_BOOL, t, z, -1);
            r = emit_ew(L, G, CT_OP_where, NULL, dt, c, z, gi);
            break;
        }
        case CT_EWG_SIGMOID: r = E2(mul, E2(mul, gi, E2(sub, K(1.0), t)), t); break;
        case CT_EWG_TANH: r = E2(mul, gi, E2(sub, K(1.0), E2(mul, t, t))); break;
        case CT_EWG_GELU: {
            int cdf = E2(mul, K(0.5), E2(add, K(1.0), E1(erf, E2(mul, t, K(0.70710678118654752440)))));
            int pdf = E2(mul, K(0.39894228040143267794), E1(exp, E2(mul, E2(mul, t, t), K(-0.5))));
            r = E2(mul, gi, E2(add, cdf, E2(mul, t, pdf)));
            break;
        }
        case CT_EWG_GELU_TANH: {
            int kb = K(0.79788456080286535588), kk = K(0.044715);
            int x2 = E2(mul, t, t);
            int th = E1(tanh, E2(mul, kb, E2(add, t, E2(mul, E2(mul, kk, x2), t))));
            int a1 = E2(mul, K(0.5), E2(add, K(1.0), th));
            int d = E2(mul, E2(mul, E2(sub, K(1.0), E2(mul, th, th)), kb),
                       E2(add, K(1.0), E2(mul, E2(mul, K(3.0), kk), x2)));
            r = E2(mul, gi, E2(add, a1, E2(mul, E2(mul, K(0.5), t), d)));
            break;
        }
        default: { /* CT_EWG_SILU: g * s * (1 + t (1 - s)), s = 1 / (1 + exp(-t)) */
            int sg = E2(div, K(1.0), E2(add, K(1.0), E1(exp, E1(neg, t))));
            r = E2(mul, E2(mul, gi, sg), E2(add, K(1.0), E2(mul, t, E2(sub, K(1.0), sg))));
        }
        }
#undef K
#undef E2
#undef E1
        if (L->oom || r < 0 || !add_val(L, G, n->out[0], r, &om, phase)) goto fail;
    } else if (kind == NK_RED) {
        int v = n->in[0];
        const ct_gvalue *x = &g->v[v];
        const ct_p_reduce *p = &n->args.p.reduce;
        if (G->nnodes == 0) set_domain(G, x);
        if (!input_map(L, G, v, &om) || p->reduced_n != x->meta.ndim) goto fail;
        bool red[CT_MAX_DIMS] = {0}, rd[CT_MAX_DIMS];
        for (int j = 0; j < x->meta.ndim; j++) red[j] = p->reduced[j] != 0;
        if (!reduce_dims(G, x, &om, red, rd) || !rd_accept(G, rd)) goto fail;
        int i = operand(L, G, v, &om, &phase);
        if (i < 0) goto fail;
        ct_dtype idt = x->meta.dtype, odt = xo->meta.dtype;
        ct_kred kr;
        ct_dtype acc;
        switch (n->op) {
        case CT_OP_sum: kr = CT_KR_SUM; break;
        case CT_OP_mean: kr = CT_KR_MEAN; break;
        case CT_OP_prod: kr = CT_KR_PROD; break;
        case CT_OP_amax: kr = CT_KR_MAX; break;
        default: kr = CT_KR_MIN; break;
        }
        if (kr == CT_KR_MAX || kr == CT_KR_MIN) {
            if (idt == CT_BOOL || odt != idt) goto fail;
            acc = idt;
        } else if (is_float(idt)) {
            acc = CT_F64; /* the eager kernels accumulate floats in double */
        } else {
            if (kr == CT_KR_MEAN) goto fail;
            acc = CT_I64;
        }
        if (kr != CT_KR_MAX && kr != CT_KR_MIN && is_float(idt) != is_float(odt)) goto fail;
        int st = new_reduce(L, G, kr, acc, i, n->out[0]);
        if (st < 0 || st < phase) goto fail;
        int s = emit_stage(L, G, st, odt);
        /* the result's map: kept dims (size 1 where reduced with keepdim) */
        omap_t ro;
        ro.rank = xo->meta.ndim;
        int o = 0;
        for (int j = 0; j < x->meta.ndim; j++) {
            if (red[j]) {
                if (p->keepdim) ro.m[o++] = -1;
            } else {
                ro.m[o++] = om.m[j];
            }
        }
        if (o != ro.rank || s < 0 || !add_val(L, G, n->out[0], s, &ro, st + 1)) goto fail;
    } else { /* NK_ROWS */
        int v = n->in[0];
        const ct_gvalue *x = &g->v[v];
        ct_dtype dt = x->meta.dtype;
        if (G->nnodes == 0) set_domain(G, x);
        if (!input_map(L, G, v, &om)) goto fail;
        bool red[CT_MAX_DIMS] = {0}, rd[CT_MAX_DIMS];
        if (n->op == CT_OP_layer_norm_fwd) {
            int64_t want = n->args.p.layer_norm.normalized_numel, prod = 1;
            int j = x->meta.ndim - 1;
            for (; j >= 0 && prod < want; j--) {
                if (x->sym[j] >= 0) goto fail;
                prod *= x->meta.sizes[j];
                red[j] = true;
            }
            if (prod != want) goto fail;
        } else {
            int64_t d = n->args.p.scan.dim;
            if (d < 0 || d >= x->meta.ndim) goto fail;
            red[d] = true;
        }
        if (!reduce_dims(G, x, &om, red, rd) || !rd_accept(G, rd)) goto fail;
        int xi = operand(L, G, v, &om, &phase);
        if (xi < 0 || phase > G->nred) goto fail;
        int y;
        if (n->op == CT_OP_layer_norm_fwd) {
            const ct_p_layer_norm *p = &n->args.p.layer_norm;
            int k = 1, wi = -1, bi = -1;
            if (p->has_weight && (k >= n->nin || (wi = operand(L, G, n->in[k++], &om, &phase)) < 0)) goto fail;
            if (p->has_bias && (k >= n->nin || (bi = operand(L, G, n->in[k++], &om, &phase)) < 0)) goto fail;
            if ((wi >= 0 && G->inst[wi].dtype != dt) || (bi >= 0 && G->inst[bi].dtype != dt)) goto fail;
            /* mean / rstd [M] are stored only when M is D's one outer dim */
            int nouter = 0, odim = -1;
            for (int d = 0; d < G->R; d++)
                if (!G->rd[d]) nouter++, odim = d;
            omap_t mm;
            mm.rank = 1;
            mm.m[0] = -1;
            if (nouter == 1) mm.m[0] = (signed char)odim;
            bool mr_ok = nouter <= 1;
            int mean;
            if (p->rms) {
                mean = emit_const(L, G, 0.0, dt);
            } else {
                int s0 = new_reduce(L, G, CT_KR_MEAN, dt, xi, -1);
                if (s0 < 0) goto fail;
                mean = emit_stage(L, G, s0, dt);
                if (mr_ok && n->nout > 1 && n->out[1] >= 0) G->red[s0].v_out = n->out[1];
            }
            int d0 = emit_ew(L, G, CT_OP_sub, NULL, dt, xi, mean, -1);
            int sq = emit_ew(L, G, CT_OP_mul, NULL, dt, d0, d0, -1);
            int s1 = new_reduce(L, G, CT_KR_MEAN, dt, sq, -1);
            if (d0 < 0 || sq < 0 || s1 < 0) goto fail;
            int var = emit_stage(L, G, s1, CT_F64);
            int eps = emit_const(L, G, p->eps, CT_F64);
            int ve = emit_ew(L, G, CT_OP_add, NULL, CT_F64, var, eps, -1);
            int r64 = emit_ew(L, G, CT_OP_rsqrt, NULL, CT_F64, ve, -1, -1);
            int rstd = emit_cast(L, G, r64, dt);
            y = emit_ew(L, G, CT_OP_mul, NULL, dt, d0, rstd, -1);
            if (wi >= 0) y = emit_ew(L, G, CT_OP_mul, NULL, dt, y, wi, -1);
            if (bi >= 0) y = emit_ew(L, G, CT_OP_add, NULL, dt, y, bi, -1);
            if (y < 0 || mean < 0 || rstd < 0) goto fail;
            int ph = G->nred;
            for (int j = 1; j < n->nout && j < 3; j++) {
                if (n->out[j] < 0) continue;
                if (!mr_ok) {
                    /* used? then this layer_norm cannot fuse */
                    for (int q = 0; q < g->nn; q++) {
                        const ct_gnode *u = &g->n[q];
                        if (u->dead) continue;
                        for (int t = 0; t < u->nin; t++)
                            if (u->in[t] == n->out[j]) goto fail;
                    }
                    for (int t = 0; t < g->nout; t++)
                        if (g->outputs[t] == n->out[j]) goto fail;
                    continue;
                }
                if (!add_val(L, G, n->out[j], j == 1 ? mean : rstd, &mm, ph)) goto fail;
            }
        } else {
            int s0 = new_reduce(L, G, CT_KR_MAX, dt, xi, -1);
            if (s0 < 0) goto fail;
            int m = emit_stage(L, G, s0, dt);
            int t = emit_ew(L, G, CT_OP_sub, NULL, dt, xi, m, -1);
            int e = emit_ew(L, G, CT_OP_exp, NULL, dt, t, -1, -1);
            int s1 = new_reduce(L, G, CT_KR_SUM, dt, e, -1);
            if (t < 0 || e < 0 || s1 < 0) goto fail;
            int s = emit_stage(L, G, s1, dt);
            if (n->op == CT_OP_softmax) {
                int inv = emit_ew(L, G, CT_OP_reciprocal, NULL, dt, s, -1, -1);
                y = emit_ew(L, G, CT_OP_mul, NULL, dt, e, inv, -1);
            } else {
                int ls = emit_ew(L, G, CT_OP_log, NULL, dt, s, -1, -1);
                y = emit_ew(L, G, CT_OP_sub, NULL, dt, t, ls, -1);
            }
            if (y < 0) goto fail;
        }
        if (n->out[0] < 0 || !add_val(L, G, n->out[0], y, &om, G->nred)) goto fail;
    }
    if (L->oom) goto fail;
    if (inplace) {
        /* loads of the storage: the tensor itself at the write's index only */
        for (int e = 0; e < G->next; e++)
            if (root_of(g, G->ext[e].v) == froot &&
                (G->ext[e].v != froot || memcmp(G->ext[e].map, om.m, (size_t)om.rank) != 0))
                goto fail;
        if (G->ndef >= MAXDEF || touched_between(L, G, ni, froot)) goto fail;
        if (fslot < 0) {
            fslot = G->nfold++;
            G->fold[fslot].root = froot;
            memset(G->fold[fslot].map, -1, sizeof G->fold[fslot].map);
            memcpy(G->fold[fslot].map, om.m, (size_t)om.rank);
        }
        G->fold[fslot].inst = G->vals[G->nvals - 1].inst;
        G->def[G->ndef] = n->out[0];
        G->def_fold[G->ndef++] = fslot;
    }
    /* commit */
    for (int k = save_vals; k < G->nvals; k++) {
        L->val_group[G->vals[k].v] = (int)(G - L->gr);
        L->val_slot[G->vals[k].v] = k;
    }
    L->node_group[ni] = (int)(G - L->gr);
    G->nnodes++;
    G->last = ni;
    return true;
fail:
    G->ninst = save_inst;
    G->next = save_ext;
    G->nvals = save_vals;
    G->nred = save_red;
    G->has_rd = save_has_rd;
    memcpy(G->rd, save_rd, sizeof save_rd);
    return false;
}

static group *new_group(lower *L, int first) {
    if (L->ngr == L->cap_gr) {
        int nc = L->cap_gr ? 2 * L->cap_gr : 8;
        group *q = realloc(L->gr, sizeof *q * (size_t)nc);
        if (!q) { L->oom = true; return NULL; }
        L->gr = q;
        L->cap_gr = nc;
    }
    group *G = &L->gr[L->ngr++];
    memset(G, 0, sizeof *G);
    G->first = G->last = first;
    return G;
}

static void free_groups(lower *L) {
    for (int i = 0; i < L->ngr; i++) {
        free(L->gr[i].inst);
        free(L->gr[i].vals);
    }
    free(L->gr);
    free(L->node_group);
    free(L->val_group);
    free(L->val_slot);
}

/* ---- from a group to a ct_kcall ------------------------------------------------ */
typedef struct kbuild {
    ct_kcall *kc;
    int iter[CT_MAX_DIMS]; /* iteration dim -> D dim */
    int nd;
    bool inner_d[CT_MAX_DIMS]; /* D dim is an inner iteration dim */
} kbuild;

static void set_dim_map(kbuild *B, int b, const signed char *map, int rank) {
    for (int d = 0; d < B->nd; d++) {
        B->kc->dim_map[b][d] = -1;
        for (int j = 0; j < rank; j++)
            if (map[j] >= 0 && map[j] == B->iter[d]) B->kc->dim_map[b][d] = (signed char)j;
    }
    for (int d = B->nd; d < CT_MAX_DIMS; d++) B->kc->dim_map[b][d] = -1;
}

static bool map_has_inner(const kbuild *B, const signed char *map, int rank) {
    for (int j = 0; j < rank; j++)
        if (map[j] >= 0 && B->inner_d[(int)map[j]]) return true;
    return false;
}

/* Builds the kernel of G into kc: false when it does not fit the IR's
 * limits (the group's nodes then stay node steps). */
static bool build_kcall(lower *L, group *G, const bool *needed, ct_kcall *kc) {
    const ct_graph *g = L->g;
    memset(kc, 0, sizeof *kc);
    kbuild B = {.kc = kc};
    ct_kernel *k = &kc->k;
    /* the iteration order: outer = D \ RD, inner = RD (pointwise: the last dim) */
    int no = 0, ni = 0;
    for (int d = 0; d < G->R; d++)
        if (!(G->has_rd && G->rd[d])) B.iter[no++] = d;
    if (G->has_rd) {
        for (int d = 0; d < G->R; d++)
            if (G->rd[d]) B.iter[no + ni++] = d;
    } else if (no > 0) {
        no--, ni = 1;
    }
    B.nd = no + ni;
    for (int d = no; d < B.nd; d++) B.inner_d[B.iter[d]] = true;
    k->n_outer = no;
    k->n_inner = ni;

    /* live instructions: from the reductions and the stored values */
    bool *live = calloc((size_t)G->ninst + 1, 1);
    int *renum = malloc(sizeof(int) * ((size_t)G->ninst + 1));
    if (!live || !renum) { free(live); free(renum); L->oom = true; return false; }
    for (int r = 0; r < G->nred; r++) live[G->red[r].value] = true;
    for (int i = 0; i < G->nvals; i++)
        if (needed[G->vals[i].v]) live[G->vals[i].inst] = true;
    for (int f = 0; f < G->nfold; f++) live[G->fold[f].inst] = true;
    for (int i = G->ninst - 1; i >= 0; i--) {
        if (!live[i]) continue;
        const ct_kinst *in = &G->inst[i];
        if (in->kind == CT_KI_EW) {
            for (int a = 0; a < ct__ew_arity(in->op); a++) live[in->a[a]] = true;
        } else if (in->kind == CT_KI_CAST) {
            live[in->a[0]] = true;
        } else if (in->kind == CT_KI_STAGE) {
            live[G->red[in->a[0]].value] = true;
        }
    }
    /* buffers: the loads still read, then the stored values */
    int bufmap[MAXBUF];
    int nbuf = 0;
    for (int e = 0; e < G->next; e++) {
        bufmap[e] = -1;
        if (!live[G->ext[e].inst]) continue;
        int b = nbuf++;
        bufmap[e] = b;
        const ct_gvalue *x = &g->v[G->ext[e].v];
        k->buf[b].dtype = x->meta.dtype;
        k->buf[b].is_out = false;
        k->buf[b].outer_only = !map_has_inner(&B, G->ext[e].map, x->meta.ndim);
        kc->buf_val[b] = G->ext[e].v;
        set_dim_map(&B, b, G->ext[e].map, x->meta.ndim);
    }
    /* renumber the instructions */
    k->inst = malloc(sizeof(ct_kinst) * ((size_t)G->ninst + 1));
    if (!k->inst) { free(live); free(renum); L->oom = true; return false; }
    int nk = 0;
    for (int i = 0; i < G->ninst; i++) {
        renum[i] = -1;
        if (!live[i]) continue;
        ct_kinst in = G->inst[i];
        if (in.kind == CT_KI_EW)
            for (int a = 0; a < 3; a++) in.a[a] = in.a[a] >= 0 && a < ct__ew_arity(in.op) ? renum[in.a[a]] : -1;
        else if (in.kind == CT_KI_CAST)
            in.a[0] = renum[in.a[0]];
        else if (in.kind == CT_KI_LOAD)
            in.buf = bufmap[in.buf];
        renum[i] = nk;
        k->inst[nk++] = in;
    }
    k->ninst = nk;
    /* the stages: one REDUCE per reduction, then a STORE stage */
    k->nstage = G->nred;
    bool ok = G->nred < MAXSTAGE;
    for (int r = 0; r < G->nred && ok; r++) {
        ct_kstage *s = &k->stage[r];
        memset(s, 0, sizeof *s);
        s->kind = CT_KS_REDUCE;
        s->red = G->red[r].red;
        s->acc = G->red[r].acc;
        s->value = renum[G->red[r].value];
        s->out_buf = -1;
    }
    ct_kstage *fin = &k->stage[G->nred];
    if (ok) {
        memset(fin, 0, sizeof *fin);
        fin->kind = CT_KS_STORE;
        fin->out_buf = -1;
    }
    /* in-place writes: into the buffer of the tensor's load (read, then
     * written, at each index), else a buffer of their own; in the last stage */
    for (int f = 0; f < G->nfold && ok; f++) {
        const struct gfold *fd = &G->fold[f];
        int b = -1;
        for (int e = 0; e < G->next && b < 0; e++)
            if (G->ext[e].v == fd->root && bufmap[e] >= 0) b = bufmap[e];
        const ct_gvalue *x = &g->v[fd->root];
        if (b < 0) {
            if (nbuf >= MAXBUF) { ok = false; break; }
            b = nbuf++;
            k->buf[b].dtype = x->meta.dtype;
            kc->buf_val[b] = fd->root;
            set_dim_map(&B, b, fd->map, x->meta.ndim);
        }
        k->buf[b].is_out = true;
        k->buf[b].outer_only = !map_has_inner(&B, fd->map, x->meta.ndim);
        if (fin->nstore >= MAXSTORE) { ok = false; break; }
        fin->store_val[fin->nstore] = renum[fd->inst];
        fin->store_buf[fin->nstore++] = b;
        for (int d = 0; d < G->ndef; d++)
            if (G->def_fold[d] == f) {
                kc->def_val[kc->ndef] = G->def[d];
                kc->def_buf[kc->ndef++] = (signed char)b;
            }
    }
    for (int i = 0; i < G->nvals && ok; i++) {
        const gval *gv = &G->vals[i];
        if (!needed[gv->v]) continue;
        bool is_def = false; /* its tensor is the written one (kc->def_val) */
        for (int d = 0; d < G->ndef && !is_def; d++) is_def = G->def[d] == gv->v;
        if (is_def) continue;
        if (nbuf >= MAXBUF) { ok = false; break; }
        const ct_gvalue *x = &g->v[gv->v];
        int b = nbuf++;
        k->buf[b].dtype = x->meta.dtype;
        k->buf[b].is_out = true;
        bool inner = map_has_inner(&B, gv->map, x->meta.ndim);
        k->buf[b].outer_only = !inner;
        kc->buf_val[b] = gv->v;
        set_dim_map(&B, b, gv->map, x->meta.ndim);
        /* a reduction's own result: stored after its loop */
        int st = -1;
        for (int r = 0; r < G->nred; r++)
            if (G->red[r].v_out == gv->v && G->inst[gv->inst].kind == CT_KI_STAGE &&
                G->inst[gv->inst].a[0] == r)
                st = r;
        if (st >= 0 && k->stage[st].out_buf < 0) {
            k->stage[st].out_buf = b;
            continue;
        }
        ct_kstage *s = (inner && gv->phase < G->nred) ? &k->stage[gv->phase] : fin;
        if (s->nstore >= MAXSTORE) { ok = false; break; }
        s->store_val[s->nstore] = renum[gv->inst];
        s->store_buf[s->nstore] = b;
        s->nstore++;
    }
    if (ok && (fin->nstore > 0 || G->nred == 0)) k->nstage = G->nred + 1;
    k->nbuf = nbuf;
    free(live);
    free(renum);
    if (!ok) {
        free(k->inst);
        k->inst = NULL;
        return false;
    }
    /* where each iteration size is read: an input buffer's dim, else an output's */
    for (int d = 0; d < B.nd; d++) {
        kc->shape_buf[d] = -1;
        for (int pass = 0; pass < 2 && kc->shape_buf[d] < 0; pass++)
            for (int b = 0; b < nbuf && kc->shape_buf[d] < 0; b++) {
                if (k->buf[b].is_out != (pass == 1) || kc->dim_map[b][d] < 0) continue;
                kc->shape_buf[d] = b;
                kc->shape_dim[d] = kc->dim_map[b][d];
            }
        if (kc->shape_buf[d] < 0) {
            free(k->inst);
            k->inst = NULL;
            return false;
        }
    }
    for (int d = B.nd; d < CT_MAX_DIMS; d++) kc->shape_buf[d] = -1, kc->shape_dim[d] = -1;
    kc->first_node = G->first;
    kc->last_node = G->last;
    /* the name: fused_<op>_<op>... */
    int len = snprintf(k->name, sizeof k->name, "fused");
    for (int i = G->first; i <= G->last; i++) {
        if (L->node_group[i] != (int)(G - L->gr)) continue;
        const char *nm = ct__op_info[g->n[i].op].name;
        if (len + 1 + (int)strlen(nm) >= (int)sizeof k->name) break;
        len += snprintf(k->name + len, sizeof k->name - (size_t)len, "_%s", nm);
    }
    return true;
}

/* ---- the plan ------------------------------------------------------------------- */
static ct_status push_step(ct_plan *p, int *cap, int node, int kcall) {
    if (p->nstep == *cap) {
        int nc = *cap ? 2 * *cap : 16;
        ct_plan_step *q = realloc(p->step, sizeof *q * (size_t)nc);
        if (!q) return ct__error_status(CT_ERR_OOM, "compile: out of memory building the plan");
        p->step = q;
        *cap = nc;
    }
    p->step[p->nstep++] = (ct_plan_step){.node = node, .kcall = kcall};
    return CT_OK;
}

static bool grad_needed(const ct_graph *g) {
    if (g->explicit_grad) return false;
    if (g->record_grad) return true;
    if (!ct_is_grad_enabled()) return false;
    for (int i = 0; i < g->nconst; i++)
        if (g->consts[i] && ct_requires_grad(g->consts[i])) return true;
    return false;
}

static void reset_groups(lower *L) {
    for (int i = 0; i < L->ngr; i++) {
        free(L->gr[i].inst);
        free(L->gr[i].vals);
    }
    L->ngr = 0;
    for (int i = 0; i < L->g->nn; i++) L->node_group[i] = -1;
    for (int i = 0; i < L->g->nv; i++) L->val_group[i] = -1;
}

/* Groups the live nodes (greedy, in program order); nofuse[i]: node i stays a step. */
static bool group_nodes(lower *L, const bool *nofuse) {
    const ct_graph *g = L->g;
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        bool inplace = n->dst >= 0;
        if (inplace && (nofuse[i] || inplace_kind(g, n) == NK_NONE)) {
            /* an in-place write closes every open group */
            for (int q = 0; q < L->ngr; q++) L->gr[q].closed = true;
            continue;
        }
        if (!inplace && (nofuse[i] || node_kind(g, n) == NK_NONE)) continue;
        bool done = false;
        /* the groups of its inputs, latest first; then any open group */
        for (int pass = 0; pass < 2 && !done; pass++)
            for (int q = L->ngr - 1; q >= 0 && !done; q--) {
                group *G = &L->gr[q];
                if (G->closed) continue;
                bool feeds = false;
                for (int k = 0; k < n->nin; k++)
                    if (n->in[k] >= 0 && L->val_group[n->in[k]] == q) feeds = true;
                if (feeds != (pass == 0)) continue;
                /* a group that wrote a tensor in place takes what its values
                 * feed, not unrelated work (an optimizer step's next parameter:
                 * half of it would join, the rest spill into another kernel) */
                if (pass == 1 && G->nfold) continue;
                done = join(L, G, i);
            }
        if (!done) {
            group *G = new_group(L, i);
            if (!G) return false;
            if (!join(L, G, i)) { /* not even alone */
                free(G->inst);
                free(G->vals);
                L->ngr--;
            }
        }
        if (L->oom) return false;
        if (inplace) /* folded (into its group, which stays open) or not: every other group closes */
            for (int q = 0; q < L->ngr; q++)
                if (q != L->node_group[i]) L->gr[q].closed = true;
    }
    return true;
}

/* ---- teams: runs of independent kernel steps ------------------------------------ */
/* The storage a value lives in, as the trace saw it: its alias chain's root. */
static int alias_root(const ct_graph *g, int v) {
    for (int guard = 0; v >= 0 && g->v[v].alias >= 0 && guard < g->nv; guard++) v = g->v[v].alias;
    return v;
}

/* does kernel a write a storage kernel b touches (reads or writes)? */
static bool kc_conflict(const ct_graph *g, const ct_kcall *a, const ct_kcall *b) {
    for (int i = 0; i < a->k.nbuf; i++) {
        if (!a->k.buf[i].is_out) continue;
        int ra = alias_root(g, a->buf_val[i]);
        for (int j = 0; j < b->k.nbuf; j++)
            if (alias_root(g, b->buf_val[j]) == ra) return true;
        for (int j = 0; j < b->ndef; j++)
            if (alias_root(g, b->def_val[j]) == ra) return true;
    }
    for (int i = 0; i < a->ndef; i++) {
        int ra = alias_root(g, a->def_val[i]);
        for (int j = 0; j < b->k.nbuf; j++)
            if (alias_root(g, b->buf_val[j]) == ra) return true;
    }
    return false;
}

/* Marks teams: maximal runs of consecutive kernel steps (at most
 * CT_TEAM_MAX) in which no kernel writes a storage another one of the run
 * reads or writes, so they may run in any order, all at once.  exec.c runs
 * a team in one parallel region instead of one region per kernel: on this
 * kind of host a parallel region's wake-up costs tens of microseconds
 * (OMP_WAIT_POLICY=PASSIVE), which an optimizer step over many parameters
 * (one kernel each) paid per parameter.  Not under max-autotune, whose
 * variants are timed kernel by kernel. */
#define CT_TEAM_MAX 32
static void mark_teams(const ct_graph *g, ct_plan *p) {
    for (int i = 0; i < p->nstep;) {
        if (p->step[i].kcall < 0) { i++; continue; }
        int e = i + 1;
        while (e < p->nstep && e - i < CT_TEAM_MAX && p->step[e].kcall >= 0) {
            const ct_kcall *b = &p->kc[p->step[e].kcall];
            bool ok = true;
            for (int j = i; j < e && ok; j++) {
                const ct_kcall *a = &p->kc[p->step[j].kcall];
                ok = !kc_conflict(g, a, b) && !kc_conflict(g, b, a);
            }
            if (!ok) break;
            e++;
        }
        if (e - i >= 2) {
            p->step[i].team_len = e - i;
            for (int j = i; j < e; j++) p->kc[p->step[j].kcall].k.team = true;
        }
        i = e;
    }
}

ct_status ct__lower(const ct_graph *g, const ct_compile_opts *o, ct_plan *p) {
    memset(p, 0, sizeof *p);
    int cap_step = 0;
    lower L = {.g = g};
    ct_status st = CT_OK;
    bool *needed = NULL, *nofuse = NULL;
    int *kc_of_group = NULL;
    L.node_group = malloc(sizeof(int) * ((size_t)g->nn + 1));
    L.val_group = malloc(sizeof(int) * ((size_t)g->nv + 1));
    L.val_slot = malloc(sizeof(int) * ((size_t)g->nv + 1));
    needed = calloc((size_t)g->nv + 1, 1);
    nofuse = calloc((size_t)g->nn + 1, 1);
    if (!L.node_group || !L.val_group || !L.val_slot || !needed || !nofuse) goto oom;
    bool no_fusion = grad_needed(g);
    for (int attempt = 0;; attempt++) {
        reset_groups(&L);
        if (!no_fusion && !group_nodes(&L, nofuse)) goto oom;
        /* values used outside their group */
        memset(needed, 0, (size_t)g->nv + 1);
        for (int i = 0; i < g->nn; i++) {
            const ct_gnode *n = &g->n[i];
            if (n->dead) continue;
            for (int k = 0; k < n->nin; k++) {
                int v = n->in[k];
                if (v >= 0 && L.val_group[v] >= 0 && L.val_group[v] != L.node_group[i]) needed[v] = true;
            }
            if (n->dst >= 0 && L.node_group[i] < 0) needed[n->dst] = true;
        }
        for (int k = 0; k < g->nout; k++)
            if (g->outputs[k] >= 0) needed[g->outputs[k]] = true;
        /* kernels; a group that does not fit the IR's limits stays node steps
         * (and the grouping runs again without it: others may have counted
         * on its kernel's position) */
        free(kc_of_group);
        kc_of_group = malloc(sizeof(int) * ((size_t)L.ngr + 1));
        if (!kc_of_group) goto oom;
        if (L.ngr) {
            p->kc = calloc((size_t)L.ngr, sizeof *p->kc);
            if (!p->kc) goto oom;
        }
        bool retry = false;
        for (int q = 0; q < L.ngr; q++) {
            kc_of_group[q] = -1;
            group *G = &L.gr[q];
            if (G->nnodes < ct__lower_min_nodes) continue;
            if (build_kcall(&L, G, needed, &p->kc[p->nkc])) {
                kc_of_group[q] = p->nkc++;
            } else {
                if (L.oom) goto oom;
                for (int i = 0; i < g->nn; i++)
                    if (L.node_group[i] == q) nofuse[i] = true;
                retry = true;
            }
        }
        if (!retry) break;
        if (attempt > 64) no_fusion = true;
        for (int i = 0; i < p->nkc; i++) free(p->kc[i].k.inst);
        free(p->kc);
        p->kc = NULL;
        p->nkc = 0;
    }
    /* the inputs and constants kernels write in place (exec.c checks their memory) */
    for (int i = 0; i < p->nkc; i++)
        for (int b = 0; b < p->kc[i].k.nbuf; b++) {
            int v = p->kc[i].buf_val[b];
            if (!p->kc[i].k.buf[b].is_out || g->v[v].kind == CT_GV_NODE) continue;
            bool seen = false;
            for (int j = 0; j < p->nwroot && !seen; j++) seen = p->wroot[j] == v;
            if (seen) continue;
            int *q = realloc(p->wroot, sizeof *q * (size_t)(p->nwroot + 1));
            if (!q) goto oom;
            p->wroot = q;
            p->wroot[p->nwroot++] = v;
        }
    for (int i = 0; i < g->nn; i++) {
        if (g->n[i].dead) continue;
        int q = L.node_group[i];
        int kc = q >= 0 ? kc_of_group[q] : -1;
        if (kc < 0) st = push_step(p, &cap_step, i, -1);
        else if (L.gr[q].first == i) st = push_step(p, &cap_step, -1, kc);
        if (st) goto fail;
    }
    free(kc_of_group);
    free(needed);
    free(nofuse);
    free_groups(&L);
    p->autotune = o && o->mode == CT_COMPILE_MAX_AUTOTUNE;
    if (!p->autotune) mark_teams(g, p);
    return CT_OK;
oom:
    st = ct__error_status(CT_ERR_OOM, "compile: out of memory lowering the graph");
fail:
    free(kc_of_group);
    free(needed);
    free(nofuse);
    free_groups(&L);
    for (int i = 0; i < p->nkc; i++) free(p->kc[i].k.inst);
    free(p->kc);
    free(p->step);
    free(p->wroot);
    memset(p, 0, sizeof *p);
    return st;
}

/* ---- the call's arguments --------------------------------------------------------- */
ct_status ct__kcall_args(const ct_kcall *kc, ct_tensor *const *t, char **bufs, int64_t *shape,
                         int64_t *strides) {
    const ct_kernel *k = &kc->k;
    int nd = k->n_outer + k->n_inner;
    for (int d = 0; d < nd; d++) {
        const ct_tensor *x = t[kc->shape_buf[d]];
        int j = kc->shape_dim[d];
        if (!x || j < 0 || j >= x->ndim)
            return ct__error_status(CT_ERR_RUNTIME, "%s: buffer %d does not give iteration size %d",
                                    k->name, kc->shape_buf[d], d);
        shape[d] = x->sizes[j];
    }
    for (int b = 0; b < k->nbuf; b++) {
        const ct_tensor *x = t[b];
        if (!x || x->dtype != k->buf[b].dtype)
            return ct__error_status(CT_ERR_RUNTIME, "%s: buffer %d is %s, the kernel wants %s", k->name, b,
                                    x ? ct_dtype_name(x->dtype) : "missing", ct_dtype_name(k->buf[b].dtype));
        bufs[b] = (char *)ct__ptr(x);
        for (int d = 0; d < nd; d++) {
            int j = kc->dim_map[b][d];
            int64_t s = 0;
            if (j >= 0) {
                if (j >= x->ndim)
                    return ct__error_status(CT_ERR_RUNTIME, "%s: buffer %d has %d dims, dim %d mapped",
                                            k->name, b, x->ndim, j);
                if (x->sizes[j] != 1) {
                    if (x->sizes[j] != shape[d])
                        return ct__error_status(CT_ERR_SHAPE, "%s: buffer %d's size %lld along dim %d "
                                                "does not match the iteration size %lld", k->name, b,
                                                (long long)x->sizes[j], j, (long long)shape[d]);
                    s = x->strides[j];
                }
            }
            strides[b * nd + d] = s;
        }
    }
    /* A kernel that only stores (no reduction: each element on its own)
     * runs over fewer, longer dims where every buffer's layout allows: an
     * outer dim whose stride is the inner run's extent in every buffer
     * joins the last dim (a contiguous [8, 256, 56, 56] runs as one dim of
     * 6.4M instead of 114688 rows of 56, each paying the index arithmetic
     * of the outer loop).  A buffer read at the outer level (outer_only: a
     * 0-dim scalar, a per-row value) has stride 0 along the inner dim, so
     * the test below lets a dim join only where its stride there is 0 too:
     * its one value then serves the whole joined run (the optimizer steps'
     * 0-dim hyperparameters beside [1536, 512] tensors: one run of 786432
     * instead of 1536 rows of 512). */
    bool store_only = nd >= 2;
    for (int q = 0; q < k->nstage && store_only; q++) store_only = k->stage[q].kind == CT_KS_STORE;
    for (int d = nd - 2; d >= 0 && store_only; d--) {
        int L = nd - 1;
        bool ok = true;
        for (int b = 0; b < k->nbuf && ok; b++) ok = strides[b * nd + d] == strides[b * nd + L] * shape[L];
        if (!ok) break;
        shape[L] *= shape[d];
        shape[d] = 1;
        for (int b = 0; b < k->nbuf; b++) strides[b * nd + d] = 0;
    }
    return CT_OK;
}
