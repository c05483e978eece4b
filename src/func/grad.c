/* grad.c -- reverse-mode function transforms (func.h): grad,
 * grad_and_value, vjp, jacrev and hessian, over ctorch's reverse autograd.
 *
 * How a transform differentiates f at inputs x without touching them:
 * each differentiated input is replaced by a fresh tensor aliasing it
 * (same storage, same layout) --
 *   - a detached leaf that requires grad when x does not take part in an
 *     enclosing differentiation (grad mode off in the caller, or x does not
 *     require grad);
 *   - a view of x (a non-leaf whose history continues into x's) when it
 *     does, so that what the transform computes stays connected to x and an
 *     enclosing transform (or the caller's ct_backward) can differentiate
 *     it again.
 * Each argnum gets its own alias, so f(x, x) differentiated in both
 * arguments gives each partial derivative, not their sum.
 *
 * create_graph: the backward pass is recorded exactly when f's output is
 * connected to a tensor requiring grad other than the fresh leaves (found
 * by walking f's graph from the output before the backward: a leaf that is
 * not ours, reached through any node; the views above lead to one).  Only
 * then can a derivative of the result be asked for, so otherwise the
 * results are plain tensors (torch.func's results at the outermost level
 * do not require grad either), and the value and auxiliary outputs, whose
 * graphs lead only to our private leaves, are detached. */
#include <stdlib.h>
#include <string.h>
#include "func_impl.h"
#include "../autograd/autograd_impl.h"
#include "../core/tensor_impl.h"

/* ---- argnums --------------------------------------------------------------- */

ct_status ct__argspec_init(argspec *a, const ct_func_grad_opts *o, const char *who) {
    static const int zero = 0;
    const int *src = &zero;
    int n = 1;
    a->has_aux = o ? o->has_aux : false;
    if (o && o->argnums) {
        if (o->nargnums < 1)
            return ct__error_status(CT_ERR_ARG, "%s: argnums must be non-empty (got %d entries)", who,
                                    o->nargnums);
        src = o->argnums;
        n = o->nargnums;
    } else if (o && o->nargnums != 0) {
        return ct__error_status(CT_ERR_ARG, "%s: nargnums is %d but argnums is NULL", who, o->nargnums);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (src[i] == src[j])
                return ct__error_status(CT_ERR_ARG, "%s: argnums must be unique (%d appears twice)", who,
                                        src[i]);
    a->argnums = malloc(sizeof(int) * (size_t)n);
    if (!a->argnums) return ct__error_status(CT_ERR_OOM, "%s: out of memory", who);
    memcpy(a->argnums, src, sizeof(int) * (size_t)n);
    a->n = n;
    return CT_OK;
}

/* argnums against nin: idx[k] in [0, nin), unique after wrapping */
ct_status ct__argspec_resolve(const argspec *a, int nin, int *idx, const char *who) {
    for (int k = 0; k < a->n; k++) {
        int v = a->argnums[k];
        if (v < -nin || v >= nin)
            return ct__error_status(CT_ERR_ARG, "%s: Got argnum=%d, but only %d positional inputs", who, v,
                                    nin);
        idx[k] = v < 0 ? v + nin : v;
        for (int j = 0; j < k; j++)
            if (idx[j] == idx[k])
                return ct__error_status(CT_ERR_ARG, "%s: argnums %d and %d both name input %d", who,
                                        a->argnums[j], v, idx[k]);
    }
    return CT_OK;
}

/* ---- fresh inputs ---------------------------------------------------------- */

static bool differentiable_dtype(ct_dtype dt) { return ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt); }

/* Replaces in[idx[k]] by its alias in xs (a copy of in); diff[k] is the
 * alias; fresh[*nfresh] collects the detached leaves.  outer: the caller's
 * grad mode was on. */
static ct_status make_aliases(ct_tensor *const *in, int nin, const int *idx, int n, bool outer,
                              ct_tensor **xs, ct_tensor **diff, ct_tensor **fresh, int *nfresh,
                              const char *who) {
    *nfresh = 0;
    for (int i = 0; i < nin; i++) xs[i] = in[i];
    for (int k = 0; k < n; k++) {
        ct_tensor *x = in[idx[k]];
        if (!x) return ct__error_status(CT_ERR_NULL, "%s: input %d is NULL", who, idx[k]);
        if (!differentiable_dtype(ct_get_dtype(x)))
            return ct__error_status(CT_ERR_ARG, "%s: input %d is %s: only floating-point and complex "
                                    "tensors can be differentiated", who, idx[k],
                                    ct_dtype_name(ct_get_dtype(x)));
        ct_tensor *a;
        if (outer && ct_requires_grad(x)) {
            a = ct_view(x, ct_sizes(x), ct_ndim(x));
            if (!a) return ct_last_error_code();
        } else {
            a = ct_detach(x);
            if (!a) return ct_last_error_code();
            if (ct_set_requires_grad(a, true)) return ct_last_error_code();
            fresh[(*nfresh)++] = a;
            /* detach drops forward-mode tangents (as torch's does); the alias
             * keeps x's at every active dual level, so an enclosing
             * forward-mode transform (jacfwd(jacrev(f)): hessian) sees its
             * tangents flow through f and through the backward pass */
            if (ct__fw_nlevels) {
                for (int l = 0; l < ct__fw_nlevels; l++) (void)ct__fw_get(x, l);
                if (ct__fw_copy(a, x)) return ct__error_status(CT_ERR_OOM, "%s: out of memory", who);
            }
        }
        xs[idx[k]] = a;
        diff[k] = a;
    }
    return CT_OK;
}

/* ---- is an output connected to a tensor requiring grad outside? ----------- */

typedef struct walk {
    ct_node **set;  /* open addressing, cap a power of two */
    size_t cap, n;
    ct_node **stack;
    size_t sn, scap;
} walk;

static int walk_mark(walk *w, ct_node *nd) { /* 1 new, 0 seen, -1 no memory */
    if ((w->n + 1) * 2 > w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 64;
        ct_node **ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (size_t i = 0; i < w->cap; i++)
            if (w->set[i]) {
                size_t h = ((uintptr_t)w->set[i] >> 4) & (nc - 1);
                while (ns[h]) h = (h + 1) & (nc - 1);
                ns[h] = w->set[i];
            }
        free(w->set);
        w->set = ns;
        w->cap = nc;
    }
    size_t h = ((uintptr_t)nd >> 4) & (w->cap - 1);
    while (w->set[h]) {
        if (w->set[h] == nd) return 0;
        h = (h + 1) & (w->cap - 1);
    }
    w->set[h] = nd;
    w->n++;
    if (w->sn == w->scap) {
        size_t nc = w->scap ? w->scap * 2 : 64;
        ct_node **ns = realloc(w->stack, nc * sizeof *ns);
        if (!ns) return -1;
        w->stack = ns;
        w->scap = nc;
    }
    w->stack[w->sn++] = nd;
    return 1;
}

static bool is_fresh(const ct_tensor *t, ct_tensor *const *fresh, int nfresh) {
    for (int i = 0; i < nfresh; i++)
        if (fresh[i] == t) return true;
    return false;
}

/* 1: some ys[i] (i < ny, non-NULL) reaches a tensor requiring grad other
 * than fresh[]; 0: none does; -1: out of memory (error set). */
static int reaches_outer(ct_tensor *const *ys, int ny, ct_tensor *const *fresh, int nfresh) {
    walk w = {0};
    int r = 0;
    for (int i = 0; i < ny && !r; i++) {
        ct_tensor *y = ys[i];
        ct_ag_meta *m = y ? ct__ag_peek(y) : NULL;
        if (!m || !m->requires_grad) continue;
        ct_node *start = m->grad_fn ? m->grad_fn : m->weak_fn;
        if (!start) { /* a leaf: ours, or one from outside */
            if (!is_fresh(y, fresh, nfresh)) r = 1;
            continue;
        }
        if (walk_mark(&w, start) < 0) r = -1;
    }
    while (!r && w.sn > 0) {
        ct_node *nd = w.stack[--w.sn];
        if (nd->kind == CT_NODE_ACCUMULATE) {
            if (nd->leaf && !is_fresh(nd->leaf, fresh, nfresh)) r = 1;
            continue;
        }
        for (int k = 0; k < nd->nin && !r; k++)
            if (nd->next[k].node && walk_mark(&w, nd->next[k].node) < 0) r = -1;
    }
    free(w.set);
    free(w.stack);
    if (r < 0) ct__error(CT_ERR_OOM, "func: out of memory");
    return r;
}

/* The results of a transform whose graph is private: plain tensors. */
static ct_status detach_all(ct_tensor **ts, int n) {
    for (int i = 0; i < n; i++)
        if (ts[i] && ct_requires_grad(ts[i])) {
            ts[i] = ct_detach(ts[i]);
            if (!ts[i]) return ct_last_error_code();
        }
    return CT_OK;
}

/* ct_autograd_grad of sum <ys[i], cts[i]> with respect to xs[0..n): outputs
 * that do not require grad contribute nothing (torch.func's _autograd_grad),
 * unused inputs get zeros like the input. */
static ct_status vjp_core(ct_tensor *const *ys, int ny, ct_tensor *const *cts, ct_tensor *const *xs, int n,
                          bool create_graph, ct_tensor **grads, const char *who) {
    ct_tensor *dy[16], *dc[16];
    ct_tensor **yy = ny <= 16 ? dy : malloc(sizeof(ct_tensor *) * (size_t)ny);
    ct_tensor **cc = ny <= 16 ? dc : malloc(sizeof(ct_tensor *) * (size_t)ny);
    ct_status st = CT_OK;
    if (!yy || !cc) { st = ct__error_status(CT_ERR_OOM, "%s: out of memory", who); goto done; }
    int m = 0;
    for (int i = 0; i < ny; i++) {
        if (cts && cts[i]) {
            if (ct_ndim(cts[i]) != ct_ndim(ys[i]) ||
                memcmp(ct_sizes(cts[i]), ct_sizes(ys[i]), sizeof(int64_t) * (size_t)ct_ndim(ys[i]))) {
                char a[128];
                snprintf(a, sizeof a, "%s", ct__tshape(cts[i]));
                st = ct__error_status(CT_ERR_SHAPE, "%s: Mismatch in shape: cotangent %d has a shape of "
                                      "%s and output %d has a shape of %s", who, i, a, i,
                                      ct__tshape(ys[i]));
                goto done;
            }
        }
        if (!ct_requires_grad(ys[i])) continue;
        yy[m] = ys[i];
        cc[m] = cts ? cts[i] : NULL;
        m++;
    }
    for (int k = 0; k < n; k++) grads[k] = NULL;
    if (m > 0) st = ct_autograd_grad(yy, m, xs, n, cts ? cc : NULL, true, create_graph, true, grads);
    for (int k = 0; k < n && !st; k++)
        if (!grads[k] && !(grads[k] = ct_zeros_like(xs[k]))) st = ct_last_error_code();
done:
    if (yy != dy) free(yy);
    if (cc != dc) free(cc);
    return st;
}

/* ---- grad and grad_and_value ---------------------------------------------- */

typedef struct grad_ctx {
    ct_func *f;
    argspec a;
    bool with_value;
} grad_ctx;

static void grad_ctx_free(void *p) {
    grad_ctx *c = p;
    ct_func_free(c->f);
    free(c->a.argnums);
    free(c);
}

static ct_status grad_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    grad_ctx *c = ctx;
    const char *who = c->with_value ? "grad_and_value" : "grad";
    int k = c->a.n;
    int nf = nout - k + (c->with_value ? 0 : 1); /* f's outputs: out[0] and the aux */
    if (c->a.has_aux ? nf < 2 : nf != 1)
        return ct__error_status(CT_ERR_ARG, "%s: called with nout %d: expected %d gradient%s%s%s", who, nout, k,
                                k == 1 ? "" : "s", c->with_value ? ", the value" : "",
                                c->a.has_aux ? " and at least one auxiliary output (has_aux)" : "");
    int *idx = malloc(sizeof(int) * (size_t)k);
    ct_tensor **xs = malloc(sizeof(ct_tensor *) * (size_t)(nin > 0 ? nin : 1));
    ct_tensor **diff = malloc(sizeof(ct_tensor *) * (size_t)k);
    ct_tensor **fresh = malloc(sizeof(ct_tensor *) * (size_t)k);
    ct_tensor **fo = calloc((size_t)nf, sizeof(ct_tensor *));
    ct_tensor **g = calloc((size_t)k, sizeof(ct_tensor *));
    bool outer = ct_set_grad_enabled(true);
    ct_status st = CT_OK;
    int nfresh = 0;
    if (!idx || !xs || !diff || !fresh || !fo || !g) { st = ct__error_status(CT_ERR_OOM, "%s: out of memory", who); goto done; }
    if ((st = ct__argspec_resolve(&c->a, nin, idx, who))) goto done;
    if ((st = make_aliases(in, nin, idx, k, outer, xs, diff, fresh, &nfresh, who))) goto done;
    if ((st = ct_func_call(c->f, xs, nin, fo, nf))) goto done;
    ct_tensor *y = fo[0];
    if (ct_ndim(y) != 0) {
        st = ct__error_status(CT_ERR_ARG, "%s(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                              "tensor with %d dims. Maybe you wanted to use the vjp or jacrev APIs instead?",
                              who, ct_ndim(y));
        goto done;
    }
    /* an integer output: zero gradients, as torch.func.grad gives */
    int conn = outer ? reaches_outer(&y, 1, fresh, nfresh) : 0;
    if (conn < 0) { st = ct_last_error_code(); goto done; }
    if ((st = vjp_core(&y, 1, NULL, diff, k, conn == 1, g, who))) goto done;
    /* value and aux keep their graphs only where those lead outside */
    for (int i = 0; i < nf && !st; i++) {
        int ci = outer ? reaches_outer(&fo[i], 1, fresh, nfresh) : 0;
        if (ci < 0) st = ct_last_error_code();
        else if (ci == 0) st = detach_all(&fo[i], 1);
    }
    if (st) goto done;
    int o = 0;
    for (int j = 0; j < k; j++) out[o++] = g[j];
    if (c->with_value) out[o++] = fo[0];
    for (int i = 1; i < nf; i++) out[o++] = fo[i];
done:
    ct_set_grad_enabled(outer);
    free(idx); free(xs); free(diff); free(fresh); free(fo); free(g);
    return st;
}

static ct_func *grad_new(ct_func *f, const ct_func_grad_opts *o, bool with_value) {
    const char *who = with_value ? "grad_and_value" : "grad";
    if (!f) return ct__error(CT_ERR_NULL, "%s: the function is NULL", who);
    grad_ctx *c = calloc(1, sizeof *c);
    if (!c) return ct__error(CT_ERR_OOM, "%s: out of memory", who);
    if (ct__argspec_init(&c->a, o, who)) { free(c); return NULL; }
    c->with_value = with_value;
    c->f = ct_func_retain(f);
    ct_func *r = ct_func_new_owned(grad_fn, c, grad_ctx_free);
    if (!r) grad_ctx_free(c);
    return r;
}

ct_func *ct_func_grad(ct_func *f, const ct_func_grad_opts *o) { return grad_new(f, o, false); }
ct_func *ct_func_grad_and_value(ct_func *f, const ct_func_grad_opts *o) { return grad_new(f, o, true); }

/* ---- vjp ------------------------------------------------------------------ */

typedef struct vjp_state {
    int ny, nx;
    ct_tensor **ys;   /* the differentiated outputs (retained) */
    ct_tensor **xs;   /* the primals' aliases (retained) */
    bool connected;   /* the outputs reach tensors outside */
} vjp_state;

static void vjp_state_free(void *p) {
    vjp_state *v = p;
    if (!v) return;
    for (int i = 0; i < v->ny; i++) ct_release(v->ys[i]);
    for (int i = 0; i < v->nx; i++) ct_release(v->xs[i]);
    free(v->ys);
    free(v->xs);
    free(v);
}

static ct_status vjp_apply(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    vjp_state *v = ctx;
    if (nin != v->ny)
        return ct__error_status(CT_ERR_ARG, "vjp_fn: expected %d cotangent%s (one per output), got %d", v->ny,
                                v->ny == 1 ? "" : "s", nin);
    if (nout != v->nx)
        return ct__error_status(CT_ERR_ARG, "vjp_fn: called with nout %d, but there are %d primals", nout,
                                v->nx);
    for (int i = 0; i < nin; i++)
        if (!in[i]) return ct__error_status(CT_ERR_NULL, "vjp_fn: cotangent %d is NULL", i);
    bool prev = ct_set_grad_enabled(true);
    bool cg = prev && v->connected;
    for (int i = 0; i < nin && prev && !cg; i++) cg = ct_requires_grad(in[i]);
    ct_status st = vjp_core(v->ys, v->ny, in, v->xs, v->nx, cg, out, "vjp_fn");
    ct_set_grad_enabled(prev);
    return st;
}

ct_status ct_func_vjp(ct_func *f, ct_tensor *const *primals, int n, ct_tensor **outs, int nout, bool has_aux,
                      ct_func **vjp_fn) {
    if (vjp_fn) *vjp_fn = NULL;
    if (outs && nout > 0)
        for (int i = 0; i < nout; i++) outs[i] = NULL;
    if (!f || !vjp_fn || !outs || (n > 0 && !primals))
        return ct__error_status(CT_ERR_NULL, "vjp: the function, primals, outs and vjp_fn must not be NULL");
    if (n < 1 || nout < (has_aux ? 2 : 1))
        return ct__error_status(CT_ERR_ARG, "vjp: need at least one primal and %s (n %d, nout %d)",
                                has_aux ? "an output and an auxiliary output" : "one output", n, nout);
    int *idx = malloc(sizeof(int) * (size_t)n);
    ct_tensor **xs = malloc(sizeof(ct_tensor *) * (size_t)n);
    ct_tensor **diff = malloc(sizeof(ct_tensor *) * (size_t)n);
    ct_tensor **fresh = malloc(sizeof(ct_tensor *) * (size_t)n);
    vjp_state *v = calloc(1, sizeof *v);
    ct_func *fn = NULL;
    bool outer = ct_set_grad_enabled(true);
    ct_scope s = ct_scope_begin();
    ct_status st = CT_OK;
    int nfresh = 0, ny = has_aux ? 1 : nout;
    if (!idx || !xs || !diff || !fresh || !v) { st = ct__error_status(CT_ERR_OOM, "vjp: out of memory"); goto done; }
    for (int i = 0; i < n; i++) idx[i] = i;
    if ((st = make_aliases(primals, n, idx, n, outer, xs, diff, fresh, &nfresh, "vjp"))) goto done;
    if ((st = ct_func_call(f, xs, n, outs, nout))) goto done;
    for (int i = 0; i < ny; i++)
        if (!differentiable_dtype(ct_get_dtype(outs[i]))) {
            st = ct__error_status(CT_ERR_ARG, "vjp(f, ...): All outputs of f must be floating-point or "
                                  "complex Tensors, got Tensor with dtype %s (output %d)",
                                  ct_dtype_name(ct_get_dtype(outs[i])), i);
            goto done;
        }
    int conn = outer ? reaches_outer(outs, ny, fresh, nfresh) : 0;
    if (conn < 0) { st = ct_last_error_code(); goto done; }
    v->connected = conn == 1;
    v->ys = malloc(sizeof(ct_tensor *) * (size_t)ny);
    v->xs = malloc(sizeof(ct_tensor *) * (size_t)n);
    if (!v->ys || !v->xs) { st = ct__error_status(CT_ERR_OOM, "vjp: out of memory"); goto done; }
    for (int i = 0; i < ny; i++) v->ys[v->ny++] = ct_retain(outs[i]);
    for (int i = 0; i < n; i++) v->xs[v->nx++] = ct_retain(diff[i]);
    /* the caller's outputs: plain tensors unless connected outside (the
     * retained ys keep the graph for vjp_fn) */
    for (int i = 0; i < nout && !st; i++) {
        int ci = outer ? reaches_outer(&outs[i], 1, fresh, nfresh) : 0;
        if (ci < 0) st = ct_last_error_code();
        else if (ci == 0) st = detach_all(&outs[i], 1);
    }
    if (st) goto done;
    fn = ct_func_new_owned(vjp_apply, v, vjp_state_free);
    if (!fn) { st = ct_last_error_code(); goto done; }
    v = NULL;
    for (int i = 0; i < nout && !st; i++)
        if (!ct_keep(outs[i])) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
done:
    ct_scope_end(s);
    ct_set_grad_enabled(outer);
    vjp_state_free(v);
    free(idx); free(xs); free(diff); free(fresh);
    if (st) {
        ct_func_free(fn);
        for (int i = 0; i < nout; i++) outs[i] = NULL;
        return st;
    }
    *vjp_fn = fn;
    return CT_OK;
}

/* ---- jacrev --------------------------------------------------------------- */

typedef struct jac_ctx {
    ct_func *f;
    argspec a;
} jac_ctx;

static void jac_ctx_free(void *p) {
    jac_ctx *c = p;
    ct_func_free(c->f);
    free(c->a.argnums);
    free(c);
}

/* One row of the Jacobian: the vjp of y with the cotangent in[0] (ctx a
 * jr_row).  vmapped over the identity's rows by jacobian_rows. */
typedef struct jr_row {
    ct_tensor *y;
    ct_tensor *const *xs;
    int k;
} jr_row;

static ct_status jr_row_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    const jr_row *r = ctx;
    if (nin != 1 || nout != r->k) return ct__error_status(CT_ERR_ARG, "jacrev: internal row function misused");
    return vjp_core(&r->y, 1, in, r->xs, r->k, false, out, "jacrev");
}

/* The rows batched (torch's jacrev: vmap over the vjp with the identity's
 * rows): one traced backward pass replayed once over all m cotangents.
 * The trace reads this forward's saved tensors, so it is made for this
 * call and freed with it.  jac[j] = [m, *x_j]; CT_OK, or the error. */
static ct_status jacobian_rows_vmap(ct_tensor *y, ct_tensor *const *xs, int k, int64_t m, ct_tensor **jac) {
    int yn = ct_ndim(y);
    int64_t sh[CT_MAX_DIMS + 1];
    sh[0] = m;
    memcpy(sh + 1, ct_sizes(y), sizeof(int64_t) * (size_t)yn);
    ct_tensor *eye = ct_reshape(ct__eye_on(m, m, ct_get_dtype(y), ct_get_device(y)), sh, yn + 1);
    if (!eye) return ct_last_error_code();
    jr_row r = {y, xs, k};
    ct_func *row = ct_func_new(jr_row_fn, &r);
    ct_func *vm = row ? ct_vmap(row, NULL) : NULL;
    /* nothing is recorded (the rows are plain tensors, as the loop's with
     * create_graph off): the replay reads saved tensors that require grad */
    bool prev = ct_set_grad_enabled(false);
    ct_status st = vm ? ct_func_call(vm, &eye, 1, jac, k) : ct_last_error_code();
    ct_set_grad_enabled(prev);
    ct_func_free(vm);
    ct_func_free(row);
    return st;
}

/* The Jacobian of y with respect to xs[0..k) into jac[0..k): one
 * vector-Jacobian product per element of y, with the one-hot cotangent --
 * batched through vmap when nothing else is in the way (no recorded
 * backward, no forward-mode tangents to carry, not inside a trace). */
static ct_status jacobian_rows(ct_tensor *y, ct_tensor *const *xs, int k, bool create_graph, ct_tensor **jac) {
    int64_t m = ct_numel(y);
    int yn = ct_ndim(y);
    const int64_t *ys = ct_sizes(y);
    ct_tensor **rows = NULL, **g = malloc(sizeof(ct_tensor *) * (size_t)k);
    ct_status st = CT_OK;
    if (!g) return ct__error_status(CT_ERR_OOM, "jacrev: out of memory");
    for (int j = 0; j < k && !st; j++) {
        int xn = ct_ndim(xs[j]);
        if (yn + xn > CT_MAX_DIMS) {
            st = ct__error_status(CT_ERR_SHAPE, "jacrev: the Jacobian of an output of %d dims by an input of "
                                  "%d dims has more than %d dims", yn, xn, CT_MAX_DIMS);
        }
    }
    if (!st && (m == 0 || !ct_requires_grad(y))) {
        /* no elements, or y does not depend on anything: zeros */
        for (int j = 0; j < k && !st; j++) {
            int64_t shp[CT_MAX_DIMS];
            int xn = ct_ndim(xs[j]);
            memcpy(shp, ys, sizeof(int64_t) * (size_t)yn);
            memcpy(shp + yn, ct_sizes(xs[j]), sizeof(int64_t) * (size_t)xn);
            jac[j] = ct_zeros_on(shp, yn + xn, ct_get_dtype(xs[j]), ct_get_device(xs[j]));
            if (!jac[j]) st = ct_last_error_code();
        }
        free(g);
        return st;
    }
    if (!st && m > 1 && !create_graph && !ct__fw_nlevels && !ct__tracing) {
        ct_scope s = ct_scope_begin();
        st = jacobian_rows_vmap(y, xs, k, m, g);
        for (int j = 0; j < k && !st; j++) {
            int64_t shp[CT_MAX_DIMS];
            int xn = ct_ndim(xs[j]);
            memcpy(shp, ys, sizeof(int64_t) * (size_t)yn);
            memcpy(shp + yn, ct_sizes(xs[j]), sizeof(int64_t) * (size_t)xn);
            jac[j] = ct_keep(ct_reshape(g[j], shp, yn + xn));
            if (!jac[j]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        }
        ct_scope_end(s);
        free(g);
        return st;
    }
    if (!st) {
        rows = malloc(sizeof(ct_tensor *) * (size_t)k * (size_t)m);
        if (!rows) st = ct__error_status(CT_ERR_OOM, "jacrev: out of memory (%lld rows)", (long long)m);
    }
    for (int64_t e = 0; e < m && !st; e++) {
        int64_t flat = m;
        ct_tensor *basis = ct_zeros_on(&flat, 1, ct_get_dtype(y), ct_get_device(y));
        if (!ct_fill_(ct_select(basis, 0, e), 1.0)) { st = ct_last_error_code(); break; }
        ct_tensor *ct = ct_view(basis, ys, yn);
        if (!ct) { st = ct_last_error_code(); break; }
        if ((st = vjp_core(&y, 1, &ct, xs, k, create_graph, g, "jacrev"))) break;
        for (int j = 0; j < k; j++) rows[(size_t)j * (size_t)m + (size_t)e] = g[j];
    }
    for (int j = 0; j < k && !st; j++) {
        int64_t shp[CT_MAX_DIMS];
        int xn = ct_ndim(xs[j]);
        memcpy(shp, ys, sizeof(int64_t) * (size_t)yn);
        memcpy(shp + yn, ct_sizes(xs[j]), sizeof(int64_t) * (size_t)xn);
        jac[j] = ct_reshape(ct_stack(rows + (size_t)j * (size_t)m, (int)m, 0), shp, yn + xn);
        if (!jac[j]) st = ct_last_error_code();
    }
    free(rows);
    free(g);
    return st;
}

ct_status ct__argspec_jac_outputs(const argspec *a, int nout, int *nd, int *nf, const char *who) {
    int k = a->n;
    if (a->has_aux) {
        *nd = 1;
        *nf = nout - k + 1;
        if (*nf < 2)
            return ct__error_status(CT_ERR_ARG, "%s: called with nout %d: with has_aux expected %d "
                                    "Jacobian%s and at least one auxiliary output", who, nout, k, k == 1 ? "" : "s");
        return CT_OK;
    }
    if (nout < k || nout % k)
        return ct__error_status(CT_ERR_ARG, "%s: called with nout %d: expected a multiple of the %d "
                                "argnums (one Jacobian per output and argnum)", who, nout, k);
    *nd = *nf = nout / k;
    return CT_OK;
}

static ct_status jac_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    jac_ctx *c = ctx;
    int k = c->a.n, nd = 0, nf = 0;
    ct_status st0 = ct__argspec_jac_outputs(&c->a, nout, &nd, &nf, "jacrev");
    if (st0) return st0;
    if (nd > INT32_MAX / 2) return ct__error_status(CT_ERR_ARG, "jacrev: too many outputs");
    int *idx = malloc(sizeof(int) * (size_t)k);
    ct_tensor **xs = malloc(sizeof(ct_tensor *) * (size_t)(nin > 0 ? nin : 1));
    ct_tensor **diff = malloc(sizeof(ct_tensor *) * (size_t)k);
    ct_tensor **fresh = malloc(sizeof(ct_tensor *) * (size_t)k);
    ct_tensor **fo = calloc((size_t)nf, sizeof(ct_tensor *));
    bool outer = ct_set_grad_enabled(true);
    ct_status st = CT_OK;
    int nfresh = 0;
    if (!idx || !xs || !diff || !fresh || !fo) { st = ct__error_status(CT_ERR_OOM, "jacrev: out of memory"); goto done; }
    if ((st = ct__argspec_resolve(&c->a, nin, idx, "jacrev"))) goto done;
    if ((st = make_aliases(in, nin, idx, k, outer, xs, diff, fresh, &nfresh, "jacrev"))) goto done;
    if ((st = ct_func_call(c->f, xs, nin, fo, nf))) goto done;
    for (int i = 0; i < nd; i++)
        if (!differentiable_dtype(ct_get_dtype(fo[i]))) {
            st = ct__error_status(CT_ERR_ARG, "jacrev: vjp(f, ...): All outputs of f must be floating-point "
                                  "or complex Tensors, got Tensor with dtype %s (output %d)",
                                  ct_dtype_name(ct_get_dtype(fo[i])), i);
            goto done;
        }
    int conn = outer ? reaches_outer(fo, nd, fresh, nfresh) : 0;
    if (conn < 0) { st = ct_last_error_code(); goto done; }
    for (int i = 0; i < nd && !st; i++) st = jacobian_rows(fo[i], diff, k, conn == 1, out + (size_t)i * (size_t)k);
    for (int i = nd; i < nf && !st; i++) {
        int ci = outer ? reaches_outer(&fo[i], 1, fresh, nfresh) : 0;
        if (ci < 0) st = ct_last_error_code();
        else if (ci == 0) st = detach_all(&fo[i], 1);
        out[nd * k + (i - nd)] = fo[i];
    }
done:
    ct_set_grad_enabled(outer);
    free(idx); free(xs); free(diff); free(fresh); free(fo);
    return st;
}

ct_func *ct_func_jacrev(ct_func *f, const ct_func_grad_opts *o) {
    if (!f) return ct__error(CT_ERR_NULL, "jacrev: the function is NULL");
    jac_ctx *c = calloc(1, sizeof *c);
    if (!c) return ct__error(CT_ERR_OOM, "jacrev: out of memory");
    if (ct__argspec_init(&c->a, o, "jacrev")) { free(c); return NULL; }
    c->f = ct_func_retain(f);
    ct_func *r = ct_func_new_owned(jac_fn, c, jac_ctx_free);
    if (!r) jac_ctx_free(c);
    return r;
}

/* ---- hessian -------------------------------------------------------------- */

ct_func *ct_func_hessian(ct_func *f, const ct_func_grad_opts *o) {
    if (!f) return ct__error(CT_ERR_NULL, "hessian: the function is NULL");
    if (o && o->has_aux) return ct__error(CT_ERR_ARG, "hessian: has_aux is not supported (torch.func.hessian has none)");
    /* torch's: jacfwd(jacrev(f, argnums), argnums), forward over reverse */
    ct_func *inner = ct_func_jacrev(f, o);
    if (!inner) return NULL;
    ct_func *outer = ct_func_jacfwd(inner, o);
    ct_func_free(inner);
    return outer;
}
