/* compile.c -- the public side of the compiler (include/ctorch/compile.h):
 * variants guarded on their inputs, recompiles, automatic dynamic sizes,
 * the eager fallback, statistics, explain, logging, debug dumps and
 * compiled modules.
 *
 * A ct_compiled keeps a list of variants.  Each has guards -- per input
 * dtype, device, rank, sizes (a dim marked symbolic accepts any size),
 * stride order and contiguity, which dims are broadcast (stride 0),
 * requires_grad -- plus the grad mode (and, for a compiled module, its
 * training flag), and a traced graph with its plan.  A call runs the first
 * variant whose guards pass.  Sizes: the ops' parameters may hold sizes
 * the traced function computed from its inputs (a reshape's shape), so a
 * symbolic dim whose size differs from the traced one traces again (cheap:
 * meta tensors, no data) into the same variant; its kernels take their
 * sizes at run time and are found again in the build cache, so nothing is
 * rebuilt.  Counted apart: stats.traces (every trace), stats.recompiles
 * (traces caused by a failed guard), stats.kernels_built.
 *
 * Thread safety: a ct_compiled may be called by one thread at a time (the
 * caller serializes); tracing state is per thread, so different compiled
 * functions trace on different threads at once. */
#include "compile_impl.h"
#include "../ops/timing.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../ops/profiler_impl.h"
#include "../ops/render.h"
#include "../ops/route.h"
#include "ctorch/autograd.h"
#include "ctorch/amp.h"
#include "ctorch/nn.h"

/* ---- logging and debug dumps ---- */
enum { LOG_RECOMPILES = 1, LOG_BREAKS = 2, LOG_GUARDS = 4, LOG_AUTOTUNE = 8 };
static int g_log;
static char g_debug_dir[1024];
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
/* CT_COMPILE_PROBE=0: no compiled-against-eager timing (below): a compiled
 * graph always runs compiled, whatever the load of the machine (tests that
 * count eager calls set it: a timing must not decide a test) */
static bool g_no_probe;
static atomic_int g_next_id;

static void env_init(void) {
    const char *l = getenv("CT_COMPILE_LOG");
    if (l) {
        if (strstr(l, "all")) g_log = LOG_RECOMPILES | LOG_BREAKS | LOG_GUARDS | LOG_AUTOTUNE;
        if (strstr(l, "autotune")) g_log |= LOG_AUTOTUNE;
        if (strstr(l, "recompiles")) g_log |= LOG_RECOMPILES;
        if (strstr(l, "graph_breaks")) g_log |= LOG_BREAKS;
        if (strstr(l, "guards")) g_log |= LOG_GUARDS;
    }
    const char *d = getenv("CT_COMPILE_DEBUG");
    if (d && *d) snprintf(g_debug_dir, sizeof g_debug_dir, "%s", d);
    const char *p = getenv("CT_COMPILE_PROBE");
    g_no_probe = p && !strcmp(p, "0");
}

/* one CT_COMPILE_LOG line: "[ct_compile] <prefix><message>" */
static void vlog(int kind, const char *prefix, const char *fmt, va_list ap) {
    if (!(g_log & kind)) return;
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    fprintf(stderr, "[ct_compile] %s%s\n", prefix, buf);
}

static void logf_(int kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(int kind, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(kind, "", fmt, ap);
    va_end(ap);
}

void ct__compile_log_autotune(const char *fmt, ...) {
    pthread_once(&g_env_once, env_init);
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_AUTOTUNE, "autotune: ", fmt, ap);
    va_end(ap);
}

/* the compile in progress on this thread (for ct__compile_debug_dump) */
static _Thread_local int tl_dbg_id = -1, tl_dbg_var;

void ct__compile_debug_dump(const char *tag, const char *text) {
    pthread_once(&g_env_once, env_init);
    if (!g_debug_dir[0] || tl_dbg_id < 0 || !tag || !text) return;
    (void)mkdir(g_debug_dir, 0777);
    char path[1400];
    snprintf(path, sizeof path, "%s/%d_%d_%s.txt", g_debug_dir, tl_dbg_id, tl_dbg_var, tag);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "[ct_compile] CT_COMPILE_DEBUG: cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* ---- guards ---- */
typedef struct guard_in {
    ct_dtype dtype;
    ct_device device;
    int device_index;
    int ndim;
    int64_t sizes[CT_MAX_DIMS];
    uint32_t sym;             /* dims whose size is symbolic */
    uint32_t bcast;           /* dims of stride 0 (size > 1) */
    signed char order[CT_MAX_DIMS]; /* dims by decreasing stride */
    bool contiguous;
    bool requires_grad;
} guard_in;

static void guard_of(const ct_tensor *t, guard_in *g) {
    memset(g, 0, sizeof *g);
    g->dtype = t->dtype;
    g->device = t->storage->device;
    g->device_index = t->storage->device_index;
    g->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
        g->sizes[d] = t->sizes[d];
        g->order[d] = (signed char)d;
        if (t->strides[d] == 0 && t->sizes[d] > 1) g->bcast |= 1u << d;
    }
    /* stride order over the dims of size > 1 (insertion sort, stable) */
    for (int i = 1; i < t->ndim; i++)
        for (int j = i; j > 0; j--) {
            int a = g->order[j - 1], b = g->order[j];
            int64_t sa = t->sizes[a] > 1 ? t->strides[a] : INT64_MAX;
            int64_t sb = t->sizes[b] > 1 ? t->strides[b] : INT64_MAX;
            if (sb > sa) { g->order[j - 1] = (signed char)b; g->order[j] = (signed char)a; }
            else break;
        }
    g->contiguous = ct__is_contiguous(t);
    g->requires_grad = ct_requires_grad(t);
}

/* 0: passes; 1: fails only on the sizes of dims (*dims: which); 2: fails otherwise.
 * any_size: symbolic dims accept any size. */
static int guard_check(const guard_in *g, const guard_in *x, bool any_size, uint32_t *dims,
                       char *why, size_t nwhy) {
    if (g->dtype != x->dtype) { snprintf(why, nwhy, "dtype %s, was %s", ct_dtype_name(x->dtype), ct_dtype_name(g->dtype)); return 2; }
    if (g->device != x->device || g->device_index != x->device_index) { snprintf(why, nwhy, "device %s, was %s", ct_device_name(x->device), ct_device_name(g->device)); return 2; }
    if (g->ndim != x->ndim) { snprintf(why, nwhy, "rank %d, was %d", x->ndim, g->ndim); return 2; }
    if (g->requires_grad != x->requires_grad) { snprintf(why, nwhy, "requires_grad %d, was %d", x->requires_grad, g->requires_grad); return 2; }
    uint32_t diff = 0;
    for (int d = 0; d < g->ndim; d++)
        if (g->sizes[d] != x->sizes[d] && !(any_size && (g->sym >> d & 1u) && x->sizes[d] >= 2))
            diff |= 1u << d;
    /* layout: compared where the sizes agree (a new size changes which dims have size 1) */
    if (!diff) {
        if (g->contiguous != x->contiguous || g->bcast != x->bcast ||
            memcmp(g->order, x->order, (size_t)g->ndim)) {
            snprintf(why, nwhy, "stride order/contiguity changed");
            return 2;
        }
        return 0;
    }
    snprintf(why, nwhy, "sizes changed (dims mask 0x%x)", (unsigned)diff);
    *dims = diff;
    return 1;
}

/* ---- variants ---- */
/* A joint forward + backward graph split in two (AOTAutograd): the forward
 * graph gf computes the outputs and the values the backward reads (saved),
 * the backward graph gb the gradients from the saved values and the
 * outputs' gradients.  A call runs gf inside one custom autograd node
 * (ct_function_apply: its inputs are the function's inputs and the
 * parameters that require grad) whose backward runs gb, so ct_backward
 * works as usual and both halves are fused.  Kept until ct_compiled_free
 * (a retrace retires it: a pending backward may still need it). */
typedef struct jgraph {
    ct_graph gf, gb;
    ct_plan pf, pb;
    int nin0, nfwd_out, nsaved, njin, nwrt, nparam;
    int nrecomp;        /* forward values the backward computes again instead of saving them */
    bool has_rng;       /* attention dropout: the forward's draws are saved too (the last saved tensor) */
    int *jin_out;       /* gb input nsaved + j: the gradient of output jin_out[j] */
    int *wrt_slot;      /* per wrt: its ct_function_apply input (an input, or nin0 + its parameter) */
    int *gb_out;        /* per wrt: its gb output, or -1 (unused) */
    ct_tensor **params; /* the constants that require grad (retained) */
    ct_function_def def;
    struct jgraph *next;
} jgraph;

static void jgraph_free(jgraph *j) {
    if (!j) return;
    ct__plan_free(&j->pf);
    ct__plan_free(&j->pb);
    ct__graph_free(&j->gf);
    ct__graph_free(&j->gb);
    for (int i = 0; i < j->nparam; i++) ct_release(j->params[i]);
    free(j->params);
    free(j->jin_out);
    free(j->wrt_slot);
    free(j->gb_out);
    free(j);
}

/* A guard on the thread's cpu autocast state (a graph traced under
 * autocast holds its casts, as torch.compile guards on it): 0 off, else
 * 1 + the autocast dtype. */
static int autocast_state(void) {
    return ct_autocast_is_enabled(CT_CPU) ? 1 + (int)ct_autocast_get_dtype(CT_CPU) : 0;
}

typedef struct variant {
    int index;              /* for logs and dumps */
    guard_in *gin;
    bool grad_mode;
    int autocast;           /* the cpu autocast state traced under (autocast_state) */
    int extra;              /* the extra guard (a compiled module's training flag) */
    ct_graph g;
    ct_plan p;
    bool traced;
    bool eager;             /* runs fn eagerly (a graph break, a trace that failed) */
    /* compiled against eager on PROBE_N calls of a pure graph
     * (probe_ms: [k][0] compiled, [k][1] eager); slower: eager won */
    int probes, runs;       /* probes done; compiled runs since the trace */
    double probe_ms[5][2];
    bool slower;
    /* training (a joint graph): the periods between consecutive calls of
     * this variant (a whole training step each: forward, loss, backward,
     * optimizer step) on calls that ran compiled ([0]) and eagerly ([1]);
     * tprev the start of the period open now, tprev_call its call number
     * (c->st.calls), tprev_mode its side (-1: not counted) */
    int tn[2];
    double tp_ms[2][5]; /* TPROBE_N */
    double tprev;
    int64_t tprev_call;
    int tprev_mode;
    bool tdone;
    jgraph *jg;             /* training: the split joint graph, or NULL */
    ct_status trace_err;    /* fullgraph: the error to return */
    char why[300];
} variant;

struct ct_compiled {
    ct_fn fn;
    void *ctx;
    ct_compile_opts o;
    int id;
    int nin, nout;          /* -1 until the first call */
    uint32_t *dyn;          /* per input: dims learned symbolic (dynamic AUTO / TRUE) */
    variant **v;
    int nv, capv, nextvar;
    int last;               /* the variant of the last call, or -1 */
    ct_compile_stats st;
    bool warned_break, warned_limit, warned_exec, warned_fuse;
    int (*extra_guard)(void *ctx);
    jgraph *retired;        /* joint graphs of earlier traces (see jgraph) */
};

double (*ct__compile_clock)(void);

static double now_ms(void) {
    return ct__compile_clock ? ct__compile_clock() : ct__now_ms();
}

static void variant_free(variant *v) {
    if (!v) return;
    jgraph_free(v->jg);
    ct__plan_free(&v->p);
    ct__graph_free(&v->g);
    free(v->gin);
    free(v);
}

ct_compiled *ct_compile(ct_fn fn, void *ctx, const ct_compile_opts *opts) {
    pthread_once(&g_env_once, env_init);
    if (!fn) return ct__error(CT_ERR_NULL, "compile: fn is NULL");
    ct_compiled *c = calloc(1, sizeof *c);
    if (!c) return ct__error(CT_ERR_OOM, "compile: out of memory");
    c->fn = fn;
    c->ctx = ctx;
    if (opts) c->o = *opts;
    if (c->o.recompile_limit <= 0) c->o.recompile_limit = 8;
    c->id = atomic_fetch_add(&g_next_id, 1);
    c->nin = c->nout = -1;
    c->last = -1;
    return c;
}

void ct_compiled_free(ct_compiled *c) {
    if (!c) return;
    for (int i = 0; i < c->nv; i++) variant_free(c->v[i]);
    while (c->retired) {
        jgraph *j = c->retired;
        c->retired = j->next;
        jgraph_free(j);
    }
    free(c->v);
    free(c->dyn);
    free(c);
}

/* max-autotune's choices in p: made by timing, read from the cache */
static void tune_counts(const ct_plan *p, int64_t *timed, int64_t *cached) {
    for (int k = 0; k < p->nkc; k++) {
        const ct_kcall *kc = &p->kc[k];
        if (!p->autotune || kc->nvar <= 1 || !kc->tuned) continue;
        if (kc->tune_cached) (*cached)++;
        else if (kc->var_ms[0] >= 0) (*timed)++;
    }
    for (int i = 0; i < p->nstep; i++) {
        const ct_plan_step *ps = &p->step[i];
        if (!p->autotune || ps->node < 0 || !ps->route) continue;
        if (ps->tune_cached) (*cached)++;
        else if (ps->route_ms[0] >= 0) (*timed)++;
    }
}

ct_compile_stats ct_compiled_stats(const ct_compiled *c) {
    ct_compile_stats s;
    memset(&s, 0, sizeof s);
    if (!c) return s;
    s = c->st;
    s.variants = c->nv;
    s.autotune_timed = s.autotune_cached = 0;
    for (int i = 0; i < c->nv; i++) {
        const variant *v = c->v[i];
        tune_counts(&v->p, &s.autotune_timed, &s.autotune_cached);
        if (v->jg) {
            tune_counts(&v->jg->pf, &s.autotune_timed, &s.autotune_cached);
            tune_counts(&v->jg->pb, &s.autotune_timed, &s.autotune_cached);
        }
    }
    return s;
}

/* The plan of a traced graph: the passes, fusion into kernels, their build
 * (or the disk cache).  When fusion or the build fails (no C compiler, a
 * kernel the renderer cannot take), the graph still runs op by op, with a
 * warning once: never a failure of the user's program. */
static ct_status plan_graph(ct_compiled *c, ct_graph *g, ct_plan *p, const char *tag) {
    ct_status st = ct__passes_run(g);
    if (st) return st; /* out of memory: the variant runs eagerly */
    if (g_debug_dir[0]) {
        char *s = ct__graph_str(g), t[64];
        snprintf(t, sizeof t, "%s_after_passes", tag);
        if (s) ct__compile_debug_dump(t, s);
        free(s);
        ct_clear_error();
    }
    int64_t built = 0, loaded = 0;
    if (!(st = ct__lower(g, &c->o, p))) st = ct__plan_build(p, &built, &loaded);
    c->st.kernels_built += built;
    c->st.kernels_loaded += loaded;
    if (!st) {
        ct__plan_liveness(g, p);
        return CT_OK;
    }
    if (!c->warned_fuse) {
        fprintf(stderr, "[ct_compile] warning: function #%d: no fused kernels (%s); running its ops "
                "one by one\n", c->id, ct_last_error());
        c->warned_fuse = true;
    }
    ct_clear_error();
    ct__plan_free(p);
    if ((st = ct__plan_nodes(g, p))) return st;
    p->autotune = c->o.mode == CT_COMPILE_MAX_AUTOTUNE; /* its GEMM / conv choices still count */
    ct__plan_liveness(g, p);
    return CT_OK;
}

static ct_status make_plan(ct_compiled *c, variant *v) { return plan_graph(c, &v->g, &v->p, "graph"); }

/* ---- the joint graph's halves ---- */
static ct_status jfwd(ct_function_ctx *fctx, ct_tensor *const *inputs, int n, ct_tensor **outputs) {
    (void)n;
    jgraph *j = ct_ctx_user(fctx);
    int nf = j->gf.nout;
    ct_tensor **fo = calloc((size_t)nf, sizeof *fo);
    if (!fo) return ct__error_status(CT_ERR_OOM, "compiled forward: out of memory");
    ct_tensor **sv = calloc((size_t)j->nsaved + 1, sizeof *sv);
    ct_exec_rng rng = {0};
    /* the run's results in a scope of their own: the function's outputs
     * move out to the caller's, the saved values are held by the ctx alone
     * (so the backward frees each after its last use, not the caller's
     * scope at its end) */
    ct_scope scope = ct_scope_begin();
    ct_status st = sv ? ct__exec_rng(&j->gf, &j->pf, inputs, j->nin0, fo, nf, &rng)
                      : ct__error_status(CT_ERR_OOM, "compiled forward: out of memory");
    if (!st) {
        for (int k = 0; k < j->nfwd_out; k++) outputs[k] = fo[k];
        for (int k = 0; k < j->nsaved; k++) sv[k] = fo[j->nfwd_out + k];
        int ns = j->nsaved;
        if (j->has_rng) { /* the draws, for the backward's attention nodes */
            int64_t r[1 + 3 * 32];
            r[0] = rng.n;
            for (int k = 0; k < rng.n; k++) r[1 + 3 * k] = rng.node[k], r[2 + 3 * k] = rng.seed[k], r[3 + 3 * k] = rng.offset[k];
            if (!(sv[ns++] = ct_from_array(r, (const int64_t[]){1 + 3 * rng.n}, 1, CT_I64))) st = ct_last_error_code();
        }
        if (!st) st = ct_ctx_save_for_backward(fctx, sv, ns);
        for (int k = 0; k < j->nfwd_out && !st; k++)
            if (!ct_keep(outputs[k])) st = ct_last_error_code();
    }
    ct_scope_end(scope);
    if (st)
        for (int k = 0; k < j->nfwd_out; k++) outputs[k] = NULL;
    free(sv);
    free(fo);
    return st;
}

static ct_status jbwd(ct_function_ctx *fctx, ct_tensor *const *gout, ct_tensor **gin) {
    jgraph *j = ct_ctx_user(fctx);
    int nb_in = j->nsaved + j->njin, nb_out = j->gb.nout;
    ct_tensor **bi = calloc((size_t)(nb_in > 0 ? nb_in : 1), sizeof *bi);
    ct_tensor **bo = calloc((size_t)(nb_out > 0 ? nb_out : 1), sizeof *bo);
    ct_tensor **gc = calloc((size_t)(j->njin > 0 ? j->njin : 1), sizeof *gc);
    ct_status st = CT_OK;
    if (!bi || !bo || !gc) { st = ct__error_status(CT_ERR_OOM, "compiled backward: out of memory"); goto done; }
    ct_exec_rng rng = {0};
    if (j->has_rng) {
        ct_tensor *rt = ct_ctx_saved(fctx, j->nsaved);
        if (!rt) { st = ct_last_error_code(); goto done; }
        const int64_t *r = ct_data_ptr(rt);
        rng.n = (int)r[0];
        for (int k = 0; k < rng.n && k < 32; k++)
            rng.node[k] = (int)r[1 + 3 * k], rng.seed[k] = r[2 + 3 * k], rng.offset[k] = r[3 + 3 * k];
    }
    /* the last backward through this graph (no retain_graph): the run takes
     * the saved tensors and drops each after its last step, as the engine
     * frees eager nodes' saved tensors one by one; otherwise it borrows them */
    bool donate = ct__ctx_final(fctx);
    /* the outputs' gradients as the backward graph was traced: contiguous.
     * The engine hands what the ops after the function made -- the expanded
     * ones of a sum's backward, a transpose's -- and a kernel of the graph
     * (layer_norm_bwd) reads its operand as dense: each other layout is
     * copied first (one owned reference each, handed to bi or dropped) */
    {
        ct_scope sc = ct_scope_begin();
        for (int k = 0; k < j->njin && !st; k++) {
            ct_tensor *g = gout[j->jin_out[k]];
            if (!g || ct_is_contiguous(g)) continue;
            if (!(gc[k] = ct_retain(ct_contiguous(g)))) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        }
        ct_scope_end(sc);
        if (st) goto done;
    }
    if (donate) {
        if ((st = ct__ctx_take_saved(fctx, bi, j->nsaved))) goto done;
        for (int k = 0; k < j->njin; k++) {
            bi[j->nsaved + k] = gc[k] ? gc[k] : ct_retain(gout[j->jin_out[k]]);
            gc[k] = NULL; /* handed to the run */
        }
    } else {
        for (int i = 0; i < j->nsaved; i++)
            if (!(bi[i] = ct_ctx_saved(fctx, i))) { st = ct_last_error_code(); goto done; }
        for (int k = 0; k < j->njin; k++) bi[j->nsaved + k] = gc[k] ? gc[k] : gout[j->jin_out[k]];
    }
    if ((st = ct__exec_donated(&j->gb, &j->pb, bi, nb_in, bo, nb_out, &rng, donate))) goto done;
    for (int i = 0; i < j->nwrt; i++)
        if (j->gb_out[i] >= 0) gin[j->wrt_slot[i]] = bo[j->gb_out[i]];
done:
    if (gc)
        for (int k = 0; k < j->njin; k++) ct_release(gc[k]);
    free(gc);
    free(bi);
    free(bo);
    return st;
}

/* Splits v's joint graph (v->g, after the passes) into v->jg. */
/* Recomputation, AOTAutograd's partitioner in its simplest form: a value
 * the backward reads that a pure elementwise node of the forward makes from
 * values the backward has anyway (saved values, the function's inputs,
 * constants, other recomputed values), and that the backward reads only in
 * elementwise nodes, is not saved: the backward makes it again inside the
 * kernel its readers fuse into (lower.c), so the forward keeps one tensor
 * fewer alive between the two and the backward makes no extra pass over
 * memory.  The recomputed value is the same expression on the same
 * operands, but not always the same bits: the forward may have run an op's
 * own kernel and the backward runs a generated one (transcendental
 * functions can differ in the last bit), so a value a comparison of the
 * backward reads (a max's tie mask) is saved.  Not recomputed: random ops,
 * copies, in-place writes, a value the caller gets (saving it costs
 * nothing), one with views of it, one an op reads as the source of a view.  Marks recomp[i] for the
 * forward nodes to run again, takes their values out of saved[] (and puts
 * in the function's inputs they read) and returns how many. */
static bool pw_node(const ct_gnode *n) {
    unsigned fl = ct__op_info[n->op].flags;
    if (n->dead || n->dst >= 0 || n->nout != 1 || n->out[0] < 0 || n->noreplay || n->contig_in) return false;
    if (n->op == CT_OP_ew_grad) return n->nin == 2;
    return (fl & CT_OPF_EW) && !(fl & CT_OPF_RANDOM) && n->op != CT_OP_copy && n->op != CT_OP_fill &&
           ct__ew_kind(n->op) != CT_EWK_NONE && n->nin == ct__ew_arity(n->op);
}

static int pick_recompute(const ct_graph *g, int F, int nin0, bool *saved, bool *recomp) {
    int count = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < F; i++) {
            const ct_gnode *n = &g->n[i];
            if (recomp[i] || !pw_node(n) || n->op == CT_OP_ew_grad) continue;
            int x = n->out[0];
            if (!saved[x] || g->v[x].alias >= 0) continue;
            bool ok = true;
            for (int k = 0; k < g->nout && ok; k++) ok = g->outputs[k] != x;
            for (int y = 0; y < g->nv && ok; y++) ok = g->v[y].alias != x;
            /* every live reader after the forward: an elementwise node (or one recomputed) */
            for (int r = F; r < g->nn && ok; r++) {
                const ct_gnode *m = &g->n[r];
                if (m->dead) continue;
                bool reads = m->dst == x;
                for (int k = 0; k < m->nin && !reads; k++) reads = m->in[k] == x;
                /* a comparison (a max's tie mask, a where's condition): the
                 * recomputed value may differ from the forward's in the last
                 * bit (an op's own kernel there, a generated one here, e.g.
                 * expf), and a tie mask that misses gives 0/0 */
                if (reads && (m->dst == x || !pw_node(m) || g->v[m->out[0]].meta.dtype == CT_BOOL)) ok = false;
            }
            /* its operands: at hand in the backward */
            for (int k = 0; k < n->nin && ok; k++) {
                int y = n->in[k];
                if (y < 0) continue;
                const ct_gvalue *w = &g->v[y];
                ok = w->kind == CT_GV_CONST || (w->kind == CT_GV_INPUT && w->index < nin0) || saved[y] ||
                     (w->kind == CT_GV_NODE && w->index < F && recomp[w->index]);
            }
            if (!ok) continue;
            for (int k = 0; k < n->nin; k++) {
                int y = n->in[k];
                if (y >= 0 && g->v[y].kind == CT_GV_INPUT) saved[y] = true;
            }
            saved[x] = false;
            recomp[i] = true;
            count++;
            changed = true;
        }
    }
    return count;
}

static ct_status make_joint(ct_compiled *c, variant *v) {
    ct_graph *g = &v->g;
    ct_status st = ct__passes_run(g);
    if (st) return st;
    int F = g->nfwd_nodes, nin0 = g->nin - g->njin;
    jgraph *j = calloc(1, sizeof *j);
    bool *recomp = NULL; /* forward nodes the backward runs again */
    bool *saved = calloc((size_t)(g->nv > 0 ? g->nv : 1), 1);
    int *sv = malloc(sizeof(int) * (size_t)(g->nv > 0 ? g->nv : 1));
    if (!j || !saved || !sv) { st = ct__error_status(CT_ERR_OOM, "compile: out of memory"); goto fail; }
    /* a forward value (an input, a forward node's output) the backward reads */
#define FWD_VALUE(x) ((g->v[x].kind == CT_GV_INPUT && g->v[x].index < nin0) || \
                      (g->v[x].kind == CT_GV_NODE && g->v[x].index < F))
    for (int i = F; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0 && FWD_VALUE(n->in[k])) saved[n->in[k]] = true;
        if (n->dst >= 0 && FWD_VALUE(n->dst)) saved[n->dst] = true;
    }
    for (int k = g->nfwd_out; k < g->nout; k++)
        if (g->outputs[k] >= 0 && FWD_VALUE(g->outputs[k])) saved[g->outputs[k]] = true;
#undef FWD_VALUE
    if (!(recomp = calloc((size_t)(F > 0 ? F : 1), 1))) { st = ct__error_status(CT_ERR_OOM, "compile: out of memory"); goto fail; }
    j->nrecomp = pick_recompute(g, F, nin0, saved, recomp);
    int ns = 0;
    for (int x = 0; x < g->nv; x++)
        if (saved[x]) sv[ns++] = x;
    j->nin0 = nin0;
    j->nfwd_out = g->nfwd_out;
    j->nsaved = ns;
    j->njin = g->njin;
    j->nwrt = g->nwrt;
    j->jin_out = malloc(sizeof(int) * (size_t)(g->njin > 0 ? g->njin : 1));
    j->wrt_slot = malloc(sizeof(int) * (size_t)(g->nwrt > 0 ? g->nwrt : 1));
    j->gb_out = malloc(sizeof(int) * (size_t)(g->nwrt > 0 ? g->nwrt : 1));
    j->params = calloc((size_t)(g->nwrt > 0 ? g->nwrt : 1), sizeof *j->params);
    if (!j->jin_out || !j->wrt_slot || !j->gb_out || !j->params) {
        st = ct__error_status(CT_ERR_OOM, "compile: out of memory");
        goto fail;
    }
    memcpy(j->jin_out, g->jin_out, sizeof(int) * (size_t)g->njin);
    for (int i = 0; i < g->nwrt; i++) {
        if (g->wrt[i] >= 0) j->wrt_slot[i] = g->wrt[i];
        else {
            j->wrt_slot[i] = nin0 + j->nparam;
            j->params[j->nparam++] = ct_retain(g->consts[-1 - g->wrt[i]]);
        }
    }
    /* an attention backward with dropout replays its forward's draw: link
     * it to the forward node making its logsumexp (through the copies) */
    for (int i = F; i < g->nn; i++) {
        ct_gnode *n = &g->n[i];
        if (n->dead || n->op != CT_OP_sdpa_fused_backward || !n->args.p.sdpa.has_dropout || n->nin < 5) continue;
        int x = n->in[4];
        for (int hop = 0; hop < 8 && x >= 0 && g->v[x].kind == CT_GV_NODE; hop++) {
            const ct_gnode *p = &g->n[g->v[x].index];
            if (p->op == CT_OP_sdpa_fused) { n->link = g->v[x].index; break; }
            x = p->op == CT_OP_copy && p->nin == 1 ? p->in[0] : -1;
        }
        if (n->link < 0) { st = ct__error_status(CT_ERR_RUNTIME, "compile: an attention backward whose forward is not in the graph"); goto fail; }
        j->has_rng = true;
    }
    /* the forward: the first F nodes; outputs = the function's + the saved values */
    if ((st = ct__graph_copy(g, &j->gf))) goto fail;
    ct_graph *gf = &j->gf;
    for (int i = F; i < gf->nn; i++) gf->n[i].dead = true;
    int *fo = malloc(sizeof(int) * (size_t)(j->nfwd_out + ns > 0 ? j->nfwd_out + ns : 1));
    if (!fo) { st = ct__error_status(CT_ERR_OOM, "compile: out of memory"); goto fail; }
    memcpy(fo, g->outputs, sizeof(int) * (size_t)j->nfwd_out);
    memcpy(fo + j->nfwd_out, sv, sizeof(int) * (size_t)ns);
    free(gf->outputs);
    gf->outputs = fo;
    gf->nout = j->nfwd_out + ns;
    gf->nin = nin0;
    gf->joint = false;
    gf->record_grad = false;
    gf->explicit_grad = true;
    gf->nsym = 0;
    ct__graph_uses(gf);
    for (int i = F - 1; i >= 0; i--) { /* a recomputed value only the backward read: not made here */
        ct_gnode *n = &gf->n[i];
        if (!recomp[i] || n->dead || gf->v[n->out[0]].nuses > 0) continue;
        n->dead = true;
        for (int k = 0; k < n->nin; k++)
            if (n->in[k] >= 0) gf->v[n->in[k]].nuses--;
    }
    /* the backward: the rest; inputs = the saved values + the outputs' gradients */
    if ((st = ct__graph_copy(g, &j->gb))) goto fail;
    ct_graph *gb = &j->gb;
    for (int i = 0; i < F && i < gb->nn; i++)
        if (!recomp[i]) gb->n[i].dead = true;
    int *bi = malloc(sizeof(int) * (size_t)(ns + g->njin > 0 ? ns + g->njin : 1));
    int *bo = malloc(sizeof(int) * (size_t)(g->nwrt > 0 ? g->nwrt : 1));
    if (!bi || !bo) { free(bi); free(bo); st = ct__error_status(CT_ERR_OOM, "compile: out of memory"); goto fail; }
    for (int i = 0; i < ns; i++) {
        bi[i] = sv[i];
        gb->v[sv[i]].kind = CT_GV_INPUT;
        gb->v[sv[i]].index = i;
    }
    for (int k = 0; k < g->njin; k++) {
        bi[ns + k] = g->inputs[nin0 + k];
        gb->v[bi[ns + k]].index = ns + k;
    }
    int nbo = 0;
    for (int i = 0; i < g->nwrt; i++) {
        int x = g->outputs[g->nfwd_out + i];
        j->gb_out[i] = x >= 0 ? nbo : -1;
        if (x >= 0) bo[nbo++] = x;
    }
    free(gb->inputs);
    free(gb->outputs);
    gb->inputs = bi;
    gb->outputs = bo;
    gb->nin = ns + g->njin;
    gb->nout = nbo;
    gb->joint = false;
    gb->record_grad = false;
    gb->explicit_grad = true;
    gb->nsym = 0;
    ct__graph_uses(gf);
    ct__graph_uses(gb);
    if ((st = plan_graph(c, gf, &j->pf, "forward")) || (st = plan_graph(c, gb, &j->pb, "backward"))) goto fail;
    j->def.name = "CompiledFunction";
    j->def.noutputs = j->nfwd_out;
    j->def.forward = jfwd;
    j->def.backward = jbwd;
    v->jg = j;
    free(recomp);
    free(saved);
    free(sv);
    return CT_OK;
fail:
    jgraph_free(j);
    free(recomp);
    free(saved);
    free(sv);
    return st ? st : CT_ERR_RUNTIME;
}

/* Symbolic sizes: symbol s is input sym_in[s]'s dim sym_dim[s]; a value's
 * dim of the same trace-time size is taken to be that symbol (a heuristic:
 * generated kernels read every size at run time, so a wrong guess costs
 * nothing there; exec uses it for the sizes of kernels' outputs). */
static void mark_symbols(ct_graph *g, const guard_in *gin) {
    g->nsym = 0;
    int64_t ssize[64];
    /* duck sizing (PyTorch's): symbolic dims of equal size share a symbol,
     * and sym_guard checks at each call that they are still equal */
    for (int k = 0; k < g->nin; k++)
        for (int d = 0; d < gin[k].ndim; d++)
            if (gin[k].sym >> d & 1u) {
                int s = 0;
                while (s < g->nsym && ssize[s] != gin[k].sizes[d]) s++;
                if (s == g->nsym) {
                    if (g->nsym == 64) continue;
                    g->nsym++;
                    g->sym_in[s] = k;
                    g->sym_dim[s] = d;
                    ssize[s] = gin[k].sizes[d];
                }
                g->v[g->inputs[k]].sym[d] = s;
            }
    if (!g->nsym) return;
    for (int i = 0; i < g->nv; i++) {
        ct_gvalue *x = &g->v[i];
        if (x->kind != CT_GV_NODE) continue;
        for (int d = 0; d < x->meta.ndim; d++)
            for (int s = 0; s < g->nsym; s++)
                if (x->meta.sizes[d] == ssize[s] && ssize[s] > 1) { x->sym[d] = s; break; }
    }
}

/* The symbols' guard: the input dims that share a symbol have equal sizes
 * in this call too (true for a graph without symbols or not traced). */
static bool sym_guard(const variant *v, ct_tensor *const *in) {
    const ct_graph *g = &v->g;
    if (!v->traced || v->eager || !g->nsym) return true;
    for (int k = 0; k < g->nin; k++) {
        const ct_gvalue *x = &g->v[g->inputs[k]];
        for (int d = 0; d < x->meta.ndim; d++) {
            int s = x->sym[d];
            if (s >= 0 && in[k]->sizes[d] != in[g->sym_in[s]]->sizes[g->sym_dim[s]]) return false;
        }
    }
    return true;
}

/* Traces fn for the inputs into v (its guards already set). */
static ct_status trace_variant_(ct_compiled *c, variant *v, ct_tensor *const *in) {
    double t0 = now_ms();
    ct__plan_free(&v->p);
    ct__graph_free(&v->g);
    if (v->jg) { /* a pending backward may still run it */
        v->jg->next = c->retired;
        c->retired = v->jg;
        v->jg = NULL;
    }
    v->eager = false;
    v->probes = v->runs = 0;
    v->slower = false;
    v->tn[0] = v->tn[1] = 0;
    v->tprev_call = 0;
    v->tprev_mode = -1;
    v->tdone = false;
    v->why[0] = 0;
    v->trace_err = CT_OK;
    c->st.traces++;
    tl_dbg_id = c->id;
    tl_dbg_var = v->index;
    ct_status st;
    if (ct_is_grad_enabled()) {
        /* training: the joint forward + backward graph, split in two; when
         * it cannot be had (a break in the backward, nothing
         * differentiable), the forward alone below */
        st = ct__trace_joint(c->fn, c->ctx, in, c->nin, c->nout, true, &v->g);
        if (!st && !v->g.brk[0] && v->g.joint) {
            if (g_debug_dir[0]) {
                char *s = ct__graph_str(&v->g);
                if (s) ct__compile_debug_dump("joint_graph", s);
                free(s);
                ct_clear_error();
            }
            st = make_joint(c, v);
            if (!st) goto traced;
            logf_(LOG_BREAKS, "function #%d variant %d: no joint graph (%s); the forward alone", c->id,
                  v->index, ct_last_error());
        } else if (!st && v->g.brk[0]) {
            logf_(LOG_BREAKS, "function #%d variant %d: no joint graph (%s); the forward alone", c->id,
                  v->index, v->g.brk);
        }
        ct_clear_error();
        ct__graph_free(&v->g);
    }
    st = ct__trace(c->fn, c->ctx, in, c->nin, c->nout, &v->g);
    if (st) {
        /* fn failed on meta tensors: eager calls give the real result or error */
        v->eager = true;
        v->trace_err = st;
        snprintf(v->why, sizeof v->why, "tracing failed: %s", ct_last_error());
        ct_clear_error();
    } else if (v->g.brk[0]) {
        v->eager = true;
        v->trace_err = CT_ERR_RUNTIME;
        snprintf(v->why, sizeof v->why, "graph break: %s", v->g.brk);
        c->st.graph_breaks++;
        logf_(LOG_BREAKS, "function #%d variant %d: graph break at %s", c->id, v->index, v->g.brk);
    } else {
        mark_symbols(&v->g, v->gin);
        if (g_debug_dir[0]) {
            char *s = ct__graph_str(&v->g);
            if (s) ct__compile_debug_dump("graph", s);
            free(s);
            ct_clear_error();
        }
        if ((st = make_plan(c, v))) {
            v->eager = true;
            v->trace_err = st;
            snprintf(v->why, sizeof v->why, "planning failed: %s", ct_last_error());
            ct_clear_error();
        }
    }
traced:
    v->traced = true;
    tl_dbg_id = -1;
    c->st.compile_ms += now_ms() - t0;
    return CT_OK;
}

/* The profiler shows a trace (with the passes, code generation and the
 * build or cache load after it) as one range, "ct_compile (trace and
 * build)"; the ops fn runs on meta tensors inside it are not events of
 * their own (ops/dispatch.c), so a profiled first call counts the ops
 * that ran, not the trace's. */
static ct_status trace_variant(ct_compiled *c, variant *v, ct_tensor *const *in) {
    int pe = ct__prof_begin("ct_compile (trace and build)", 1, NULL, 0, NULL, 0, 0);
    ct_status st = trace_variant_(c, v, in);
    ct__prof_end(pe);
    return st;
}

static variant *new_variant(ct_compiled *c, ct_tensor *const *in, int extra) {
    if (c->nv == c->capv) {
        int nc = c->capv ? c->capv * 2 : 8;
        variant **q = realloc(c->v, sizeof *q * (size_t)nc);
        if (!q) return ct__error(CT_ERR_OOM, "compile: out of memory");
        c->v = q;
        c->capv = nc;
    }
    variant *v = calloc(1, sizeof *v);
    if (!v || !(v->gin = calloc((size_t)(c->nin > 0 ? c->nin : 1), sizeof *v->gin))) {
        free(v);
        return ct__error(CT_ERR_OOM, "compile: out of memory");
    }
    v->index = c->nextvar++;
    for (int k = 0; k < c->nin; k++) {
        guard_of(in[k], &v->gin[k]);
        /* sizes 0 and 1 are specialized (as PyTorch does): broadcasting
         * and empty loops depend on them */
        v->gin[k].sym = c->dyn[k] & ((1u << v->gin[k].ndim) - 1u);
        for (int d = 0; d < in[k]->ndim; d++)
            if (in[k]->sizes[d] < 2) v->gin[k].sym &= ~(1u << d);
    }
    v->grad_mode = ct_is_grad_enabled();
    v->autocast = autocast_state();
    v->extra = extra;
    c->v[c->nv++] = v;
    return v;
}

static void log_guards(const ct_compiled *c, const variant *v) {
    if (!(g_log & LOG_GUARDS)) return;
    for (int k = 0; k < c->nin; k++) {
        const guard_in *g = &v->gin[k];
        char sz[400];
        int n = 0;
        for (int d = 0; d < g->ndim && n < 360; d++) {
            if (g->sym >> d & 1u) n += snprintf(sz + n, sizeof sz - (size_t)n, "%s*", d ? "," : "");
            else n += snprintf(sz + n, sizeof sz - (size_t)n, "%s%lld", d ? "," : "", (long long)g->sizes[d]);
        }
        sz[n] = 0;
        logf_(LOG_GUARDS, "function #%d variant %d guard: input %d %s %s [%s] %s requires_grad=%d grad_mode=%d",
              c->id, v->index, k, ct_dtype_name(g->dtype), ct_device_name(g->device), sz,
              g->contiguous ? "contiguous" : "strided", g->requires_grad, v->grad_mode);
    }
}

/* fn on the real tensors; counted in eager_calls unless a probe */
static ct_status run_fn(ct_compiled *c, ct_tensor *const *in, int nin, ct_tensor **out, int nout, bool count) {
    if (count) c->st.eager_calls++;
    for (int k = 0; k < nout; k++) out[k] = NULL;
    ct_status st = c->fn(in, nin, out, nout, c->ctx);
    if (st) {
        for (int k = 0; k < nout; k++) out[k] = NULL;
        return ct_last_error_code() ? ct_last_error_code() : st;
    }
    for (int k = 0; k < nout; k++)
        if (!out[k])
            return ct__error_status(CT_ERR_RUNTIME, "compiled_call: the function returned CT_OK "
                                    "without output %d", k);
    return CT_OK;
}

static ct_status run_eager(ct_compiled *c, ct_tensor *const *in, int nin, ct_tensor **out, int nout) {
    return run_fn(c, in, nin, out, nout, true);
}

/* ---- compiled against eager ---- */
/* Calls 2 to PROBE_N + 1 of a variant whose graph writes nothing but its
 * own temporaries run the function eagerly too (its results dropped) and
 * time both; when eager's median is more than 2% faster, the variant runs
 * eagerly from then on (explain says so).  Eager can win where it takes a
 * hand-fused path the op-by-op graph does not (the Transformer and BERT
 * inference fast paths read tensor data directly, which a trace cannot
 * follow), and on small inputs where a kernel's launch costs more than it
 * saves, or where a graph without kernels replays ops whose public
 * functions take faster paths (oneDNN's cached weight layouts for
 * inference convolutions).  A graph that autograd records op by op is
 * not probed.
 *
 * A training variant (a joint graph) cannot run both sides in one call:
 * the backward and the optimizer step run later, in the caller's code.
 * Its probe times whole steps instead: from call 3 on (call 1 traces and
 * call 2's step may still warm caches), its calls alternate between the
 * compiled graph and fn run eagerly, and the period from each call to the
 * next call of the same variant (the whole training step of the loop
 * around it, backward and optimizer included) is that call's side's
 * sample.  With TPROBE_N samples of each (calls 3 to 12), the k-th
 * compiled period and the k-th eager one (neighbours in time) make a pair,
 * and when the median of the pairs' ratios, compiled over eager, is above
 * 1.02 the variant runs eagerly from then on.  Pairing neighbours cancels
 * the shifts of a shared machine's speed (a step's time can jump by tens
 * of per cent between seconds and stay there), which a ratio of two
 * medians of three did not: it chose eager for graphs measured 3-5%
 * faster.  A period
 * interrupted by a call of another variant is not counted.  Both sides
 * compute the same step (the eager one is what the compiled graph was
 * checked against), so a probing call changes nothing but the timing. */
#define PROBE_N 5
#define TPROBE_N 5

static bool graph_pure(const ct_graph *g) {
    for (int i = 0; i < g->nn; i++) {
        const ct_gnode *n = &g->n[i];
        if (n->dead) continue;
        if (n->nout == 0) return false;
        if (n->dst >= 0) {
            int r = n->dst;
            for (int hop = 0; g->v[r].alias >= 0 && hop < g->nv; hop++) r = g->v[r].alias;
            if (g->v[r].kind != CT_GV_NODE) return false; /* writes an input or a constant */
        }
    }
    return true;
}

static void probe(ct_compiled *c, variant *v, double compiled_ms, ct_tensor *const *in, int nin, int nout) {
    ct_tensor *eo[64];
    if (nout > 64) { v->probes = PROBE_N; return; }
    for (int k = 0; k < nout; k++) eo[k] = NULL;
    ct_scope s = ct_scope_begin();
    double t0 = now_ms();
    ct_status st = c->fn(in, nin, eo, nout, c->ctx);
    double eager_ms = now_ms() - t0;
    ct_scope_end(s); /* the eager results (scope-owned) go */
    if (st) { /* eager failed where the graph ran: keep the graph */
        ct_clear_error();
        v->probes = PROBE_N;
        return;
    }
    v->probe_ms[v->probes][0] = compiled_ms;
    v->probe_ms[v->probes][1] = eager_ms;
    if (++v->probes < PROBE_N) return;
    double tc[PROBE_N], te[PROBE_N];
    for (int k = 0; k < PROBE_N; k++) tc[k] = v->probe_ms[k][0], te[k] = v->probe_ms[k][1];
    double mc = ct__median(tc, PROBE_N), me = ct__median(te, PROBE_N);
    if (me * 1.02 < mc) {
        v->slower = true;
        snprintf(v->why, sizeof v->why, "eager was faster (median %.3f ms against the compiled graph's %.3f ms)",
                 me, mc);
        logf_(LOG_RECOMPILES, "function #%d variant %d: %s; running eagerly", c->id, v->index, v->why);
    }
}

/* The training probe (above) at a call of v: closes the open period,
 * decides when both sides have their samples, and returns the side this
 * call runs: true eager. */
static bool train_probe(ct_compiled *c, variant *v) {
    if (g_no_probe || v->tdone) return false;
    double now = now_ms();
    int64_t call = c->st.calls;
    if (v->tprev_mode >= 0 && v->tprev_call == call - 1 && v->tn[v->tprev_mode] < TPROBE_N) {
        int m = v->tprev_mode;
        v->tp_ms[m][v->tn[m]++] = now - v->tprev;
    }
    if (v->tn[0] >= TPROBE_N && v->tn[1] >= TPROBE_N) {
        v->tdone = true;
        double mc, me, mr = ct__paired_ratio(v->tp_ms[0], v->tp_ms[1], TPROBE_N, &mc, &me);
        snprintf(v->why, sizeof v->why, "training steps timed: median %.3f ms a step compiled, %.3f ms "
                 "eager, paired ratio %.3f", mc, me, mr);
        if (mr > 1.02) {
            v->slower = true;
            snprintf(v->why, sizeof v->why, "eager training steps were faster (median %.3f ms a step "
                     "against the compiled graph's %.3f ms, paired ratio %.3f)", me, mc, mr);
            logf_(LOG_RECOMPILES, "function #%d variant %d: %s; running eagerly", c->id, v->index, v->why);
        }
        return v->slower;
    }
    /* call 1 traced; call 2's period is not counted either; then the side
     * with fewer samples (alternating while the periods are whole) */
    int mode = v->runs++ < 2 ? -1 : v->tn[0] <= v->tn[1] ? 0 : 1;
    v->tprev = now;
    v->tprev_call = call;
    v->tprev_mode = mode;
    return mode == 1;
}

/* The compiled graph failed where the guards passed: eager decides (this
 * call and the variant's later ones), with a warning once. */
static ct_status exec_failed(ct_compiled *c, variant *v, ct_tensor *const *in, int nin, ct_tensor **out,
                             int nout) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_clear_error();
    if (!c->warned_exec) {
        fprintf(stderr, "[ct_compile] warning: function #%d: the compiled graph failed (%s); "
                "running eagerly\n", c->id, msg);
        c->warned_exec = true;
    }
    v->eager = true;
    snprintf(v->why, sizeof v->why, "the compiled graph failed: %s", msg);
    return run_eager(c, in, nin, out, nout);
}

ct_status ct_compiled_call(ct_compiled *c, ct_tensor *const *in, int nin, ct_tensor **out, int nout) {
    if (!c) return ct__error_status(CT_ERR_NULL, "compiled_call: the compiled function is NULL");
    if (!out) return ct__error_status(CT_ERR_NULL, "compiled_call: out is NULL");
    if (nout <= 0 || nin < 0)
        return ct__error_status(CT_ERR_ARG, "compiled_call: nin %d / nout %d (nout must be >= 1)", nin, nout);
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (nin > 0 && !in) return ct__error_status(CT_ERR_NULL, "compiled_call: in is NULL");
    for (int k = 0; k < nin; k++)
        if (!in[k]) return ct__null_arg_status("compiled_call", "input %d", k);
    if (c->nin >= 0 && (nin != c->nin || nout != c->nout))
        return ct__error_status(CT_ERR_ARG, "compiled_call: the function was compiled for %d inputs "
                                "and %d outputs, called with %d and %d", c->nin, c->nout, nin, nout);
    if (nin > 4096) return ct__error_status(CT_ERR_ARG, "compiled_call: %d inputs", nin);
    c->st.calls++;
    if (c->o.disable) return run_eager(c, in, nin, out, nout);
    /* called while this thread traces another function: inline into that trace */
    if (ct__tracer()) return run_eager(c, in, nin, out, nout);
    if (c->nin < 0) {
        c->dyn = calloc((size_t)(nin > 0 ? nin : 1), sizeof *c->dyn);
        if (!c->dyn) return ct__error_status(CT_ERR_OOM, "compile: out of memory");
        c->nin = nin;
        c->nout = nout;
        if (c->o.dynamic == CT_DYNAMIC_TRUE)
            for (int k = 0; k < nin; k++)
                for (int d = 0; d < in[k]->ndim; d++)
                    if (in[k]->sizes[d] > 1) c->dyn[k] |= 1u << d;
    }
    guard_in *cur = malloc(sizeof *cur * (size_t)(nin > 0 ? nin : 1));
    if (!cur) return ct__error_status(CT_ERR_OOM, "compile: out of memory");
    for (int k = 0; k < nin; k++) guard_of(in[k], &cur[k]);
    bool grad = ct_is_grad_enabled();
    int autocast = autocast_state();
    int extra = c->extra_guard ? c->extra_guard(c->ctx) : 0;
    variant *v = NULL;
    bool retrace = false;
    char why[200] = "";
    int near = -1;          /* a variant failing only on sizes */
    uint32_t *neardims = calloc((size_t)(nin > 0 ? nin : 1), sizeof *neardims);
    if (!neardims) { free(cur); return ct__error_status(CT_ERR_OOM, "compile: out of memory"); }
    for (int i = 0; i < c->nv && !v; i++) {
        variant *x = c->v[i];
        if (x->grad_mode != grad || x->extra != extra) {
            snprintf(why, sizeof why, "grad mode / training flag changed");
            continue;
        }
        if (x->autocast != autocast) {
            snprintf(why, sizeof why, "autocast state changed");
            continue;
        }
        int worst = 0, exact = 1;
        uint32_t dims[CT_MAX_DIMS > 0 ? 1 : 1];
        for (int k = 0; k < nin && worst < 2; k++) {
            /* the same guard record (both made by guard_of, padding zeroed;
             * a variant's symbolic dims set sym, so it compares below) */
            if (!memcmp(&x->gin[k], &cur[k], sizeof cur[k])) continue;
            dims[0] = 0;
            int r = guard_check(&x->gin[k], &cur[k], true, dims, why, sizeof why);
            if (r > worst) worst = r;
            uint32_t dd = 0;
            if (!r && guard_check(&x->gin[k], &cur[k], false, &dd, why, sizeof why)) exact = 0;
        }
        if (worst == 0 && !sym_guard(x, in)) {
            snprintf(why, sizeof why, "input dims that had equal sizes differ now");
            worst = 2;
        }
        if (worst == 0) {
            v = x;
            retrace = !exact;
        } else if (worst == 1 && near < 0) {
            near = i;
            for (int k = 0; k < nin; k++) {
                uint32_t dd = 0;
                (void)guard_check(&x->gin[k], &cur[k], false, &dd, why, sizeof why);
                neardims[k] = dd;
            }
        }
    }
    ct_status st = CT_OK;
    if (!v) {
        bool widen = false; /* sizes changed on dims not yet symbolic */
        for (int k = 0; near >= 0 && k < nin; k++) widen = widen || (neardims[k] & ~c->dyn[k]);
        if (near >= 0 && widen && c->o.dynamic == CT_DYNAMIC_AUTO) {
            /* automatic dynamic: the dims whose size changed become symbolic;
             * the variant that failed on them is replaced by the dynamic one */
            for (int k = 0; k < nin; k++) c->dyn[k] |= neardims[k];
            variant *old = c->v[near];
            memmove(&c->v[near], &c->v[near + 1], sizeof *c->v * (size_t)(c->nv - near - 1));
            c->nv--;
            variant_free(old);
            logf_(LOG_RECOMPILES, "function #%d: recompiling: %s; marking those dims dynamic", c->id, why);
        } else if (c->nv > 0) {
            logf_(LOG_RECOMPILES, "function #%d: recompiling: %s", c->id, why);
        }
        if (c->nv >= c->o.recompile_limit) {
            if (!c->warned_limit) {
                fprintf(stderr, "[ct_compile] warning: function #%d hit the recompile limit (%d "
                        "variants); running eagerly for new inputs\n", c->id, c->o.recompile_limit);
                c->warned_limit = true;
            }
            free(cur);
            free(neardims);
            c->last = -1;
            return run_eager(c, in, nin, out, nout);
        }
        if (c->st.traces > 0) c->st.recompiles++;
        v = new_variant(c, in, extra);
        if (!v) { free(cur); free(neardims); return ct_last_error_code(); }
        log_guards(c, v);
        trace_variant(c, v, in);
    } else if (retrace) {
        /* a symbolic size differs from the traced one: trace again (the
         * parameters may hold sizes), kernels come back from the cache */
        for (int k = 0; k < nin; k++) {
            uint32_t sym = v->gin[k].sym;
            v->gin[k] = cur[k];
            v->gin[k].sym = sym;
        }
        logf_(LOG_RECOMPILES, "function #%d variant %d: new symbolic size, tracing again", c->id, v->index);
        trace_variant(c, v, in);
    }
    free(cur);
    free(neardims);
    for (int i = 0; i < c->nv; i++)
        if (c->v[i] == v) c->last = i;
    if (v->eager) {
        if (c->o.fullgraph)
            return ct__error_status(v->trace_err ? v->trace_err : CT_ERR_RUNTIME,
                                    "compiled_call: fullgraph: function #%d cannot be captured whole: %s",
                                    c->id, v->why);
        if (!c->warned_break) {
            fprintf(stderr, "[ct_compile] warning: function #%d runs eagerly: %s\n", c->id, v->why);
            c->warned_break = true;
        }
        return run_eager(c, in, nin, out, nout);
    }
    if (v->slower) return run_eager(c, in, nin, out, nout);
    if (v->jg) {
        if (train_probe(c, v)) return run_fn(c, in, nin, out, nout, v->slower);
        jgraph *j = v->jg;
        ct_tensor **ain = malloc(sizeof *ain * (size_t)(nin + j->nparam + 1));
        if (!ain) return ct__error_status(CT_ERR_OOM, "compiled_call: out of memory");
        for (int k = 0; k < nin; k++) ain[k] = in[k];
        for (int k = 0; k < j->nparam; k++) ain[nin + k] = j->params[k];
        st = ct_function_apply(&j->def, ain, nin + j->nparam, j, out);
        free(ain);
        return st ? exec_failed(c, v, in, nin, out, nout) : CT_OK;
    }
    /* probes from the second run: the first (right after the trace) stays
     * as fast as it can be (a warm start's cost) */
    bool probing = v->runs++ > 0 && !g_no_probe && v->probes < PROBE_N && !v->g.record_grad &&
                   graph_pure(&v->g);
    double t0 = probing ? now_ms() : 0;
    st = ct__exec(&v->g, &v->p, in, nin, out, nout);
    if (!st && probing) probe(c, v, now_ms() - t0, in, nin, nout);
    return st ? exec_failed(c, v, in, nin, out, nout) : CT_OK;
}

/* ---- explain ---- */
/* the plan's kernels; under max-autotune each one's variants and the node
 * steps' implementation choices, with their median times */
static void explain_plan(ct_sbuf *b, const ct_graph *g, const ct_plan *p) {
    for (int i = 0; i < p->nstep; i++)
        if (p->step[i].team_len >= 2)
            ct__sbuf_put(b, "    team of %d independent kernels from %s: one parallel region\n", p->step[i].team_len,
                         p->kc[p->step[i].kcall].k.name);
    for (int k = 0; k < p->nkc; k++) {
        const ct_kcall *kc = &p->kc[k];
        ct__sbuf_put(b, "    kernel %s\n", kc->k.name);
        if (!p->autotune || kc->nvar <= 1) continue;
        if (!kc->tuned) {
            ct__sbuf_put(b, "      autotune: %d variants, not run yet\n", kc->nvar);
            continue;
        }
        ct__sbuf_put(b, "      autotune: %s (%s):", ct__kvariant_name(kc->choice),
                     kc->tune_cached ? "from the cache" : kc->var_ms[0] >= 0 ? "timed" : "nothing to time");
        for (int x = 0; x < kc->nvar; x++) {
            if (kc->var_ms[x] >= 0) ct__sbuf_put(b, " %s %.4g ms", ct__kvariant_name(x), kc->var_ms[x]);
            else ct__sbuf_put(b, " %s %s", ct__kvariant_name(x), kc->var_ms[0] >= 0 ? "differs" : "-");
        }
        ct__sbuf_put(b, "\n");
    }
    for (int i = 0; p->autotune && i < p->nstep; i++) {
        const ct_plan_step *ps = &p->step[i];
        if (ps->node < 0 || !ps->route) continue;
        ct__sbuf_put(b, "    op %s (node %d): autotune: %s (%s): %s %.4g ms, %s %.4g ms\n",
                     ct__op_info[g->n[ps->node].op].name, ps->node, ct__route_name(ps->route_kind, ps->route),
                     ps->tune_cached ? "from the cache" : "timed", ct__route_name(ps->route_kind, 1),
                     ps->route_ms[0], ct__route_name(ps->route_kind, 2), ps->route_ms[1]);
    }
}

char *ct_compile_explain(const ct_compiled *c) {
    if (!c || c->nv == 0) return NULL;
    ct_sbuf b = {0};
    ct__sbuf_put(&b, "compiled function #%d: %lld calls, %lld traces, %lld recompiles, %d variants, "
                 "%lld graph breaks, %lld eager calls, %lld kernels built, %lld loaded, %.1f ms compiling\n",
                 c->id, (long long)c->st.calls, (long long)c->st.traces, (long long)c->st.recompiles,
                 c->nv, (long long)c->st.graph_breaks, (long long)c->st.eager_calls,
                 (long long)c->st.kernels_built, (long long)c->st.kernels_loaded, c->st.compile_ms);
    for (int i = 0; i < c->nv; i++) {
        const variant *v = c->v[i];
        ct__sbuf_put(&b, "variant %d%s:\n  guards: grad_mode=%d", v->index,
                     i == c->last ? " (last call)" : "", v->grad_mode);
        if (v->autocast) ct__sbuf_put(&b, " autocast=%s", ct_dtype_name((ct_dtype)(v->autocast - 1)));
        if (c->extra_guard) ct__sbuf_put(&b, " training=%d", v->extra);
        ct__sbuf_put(&b, "\n");
        for (int k = 0; k < c->nin; k++) {
            const guard_in *g = &v->gin[k];
            ct__sbuf_put(&b, "    input %d: %s %s [", k, ct_dtype_name(g->dtype), ct_device_name(g->device));
            for (int d = 0; d < g->ndim; d++) {
                if (g->sym >> d & 1u) ct__sbuf_put(&b, "%sany", d ? ", " : "");
                else ct__sbuf_put(&b, "%s%lld", d ? ", " : "", (long long)g->sizes[d]);
            }
            ct__sbuf_put(&b, "] %s%s requires_grad=%d\n", g->contiguous ? "contiguous" : "strided",
                         g->bcast ? " broadcast" : "", g->requires_grad);
        }
        if (v->eager)
            ct__sbuf_put(&b, "  runs eagerly: %s\n  (the graph is not split at a break: the whole "
                         "function runs eagerly)\n", v->why);
        else if (v->slower)
            ct__sbuf_put(&b, "  runs eagerly: %s\n", v->why);
        else if (v->jg && v->tdone)
            ct__sbuf_put(&b, "  runs compiled: %s\n", v->why);
        if (v->g.v) {
            char *gs = ct__graph_str(&v->g);
            if (gs) {
                ct__sbuf_put(&b, "  %s", gs);
                free(gs);
            }
        }
        if (!v->eager && v->jg) {
            const jgraph *j = v->jg;
            ct__sbuf_put(&b, "  joint forward + backward graph: the forward saves %d values for the backward, "
                         "which recomputes %d\n", j->nsaved, j->nrecomp);
            for (int h = 0; h < 2; h++) {
                const ct_plan *p = h ? &j->pb : &j->pf;
                int nodes = 0;
                for (int s = 0; s < p->nstep; s++) nodes += p->step[s].node >= 0;
                ct__sbuf_put(&b, "  %s plan: %d steps: %d op calls, %d fused kernels\n", h ? "backward" : "forward",
                             p->nstep, nodes, p->nkc);
                explain_plan(&b, h ? &j->gb : &j->gf, p);
            }
        } else if (!v->eager) {
            int nodes = 0;
            for (int s = 0; s < v->p.nstep; s++) nodes += v->p.step[s].node >= 0;
            ct__sbuf_put(&b, "  plan: %d steps: %d op calls, %d fused kernels\n", v->p.nstep, nodes, v->p.nkc);
            int nf = 0;
            for (int f = 0; f < v->g.nfold; f++) nf += v->g.folds[f].kind == CT_GFOLD_NODE;
            if (nf)
                ct__sbuf_put(&b, "  %d node%s of parameters folded into kept constants (remade when a "
                             "parameter changes)\n", nf, nf == 1 ? "" : "s");
            explain_plan(&b, &v->g, &v->p);
        }
    }
    if (b.oom) {
        free(b.s);
        return ct__error(CT_ERR_OOM, "compile_explain: out of memory");
    }
    return b.s;
}

/* ---- compiled modules ---- */
typedef struct cmod {
    ct_module *m;
    ct_compiled *c;
} cmod;

static ct_status module_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    ct_module *m = ctx;
    /* the class's forward itself: ct_module_forward would run the compiled graph again */
    ct_scope s = ct_scope_begin();
    ct_status st = CT_OK;
    if (m->cls->forward) {
        out[0] = m->cls->forward(m, in, nin);
        if (!out[0]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
        for (int k = 1; k < nout; k++) out[k] = NULL;
    } else if (m->cls->forward_multi) {
        st = m->cls->forward_multi(m, in, nin, out, nout);
    } else {
        st = ct__error_status(CT_ERR_ARG, "module_forward: %s has no forward", m->cls->name);
    }
    for (int k = 0; k < nout && !st; k++) out[k] = ct_keep(out[k]);
    ct_scope_end(s);
    return st;
}

static int module_training(void *ctx) { return ct_module_is_training(ctx) ? 1 : 0; }

static ct_tensor *module_forward_override(void *ctx, ct_module *m, ct_tensor *const *in, int n) {
    (void)m;
    cmod *cm = ctx;
    ct_tensor *y = NULL;
    return ct_compiled_call(cm->c, in, n, &y, 1) ? NULL : y;
}

static void module_override_free(void *ctx) {
    cmod *cm = ctx;
    ct_compiled_free(cm->c);
    free(cm);
}

ct_status ct_module_compile(ct_module *m, const ct_compile_opts *opts) {
    if (!m) return ct__error_status(CT_ERR_NULL, "module_compile: module is NULL");
    if (!m->cls->forward && !m->cls->forward_multi)
        return ct__error_status(CT_ERR_ARG, "module_compile: %s has no forward", m->cls->name);
    cmod *cm = calloc(1, sizeof *cm);
    if (!cm) return ct__error_status(CT_ERR_OOM, "module_compile: out of memory");
    cm->m = m; /* not retained: the module owns the override */
    cm->c = ct_compile(module_fn, m, opts);
    if (!cm->c) { free(cm); return ct_last_error_code(); }
    cm->c->extra_guard = module_training;
    ct__module_set_forward(m, module_forward_override, cm, module_override_free);
    return CT_OK;
}

ct_compiled *ct__module_compiled(ct_module *m) {
    void *ctx = ct__module_get_forward(m);
    return ctx ? ((cmod *)ctx)->c : NULL;
}
