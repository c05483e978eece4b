/* jvp.c -- the forward-mode function transforms (torch.func.jvp, jacfwd,
 * linearize) over forward-mode AD (src/autograd/forward.c).
 *
 * ct_func_jvp enters a fresh dual level, makes the primals dual with their
 * tangents, calls the function and unpacks its outputs at that level.
 * Levels nest, so a function that itself runs ct_func_jvp (jvp of jvp,
 * jacfwd of jacfwd) differentiates at its own level: the outer level's
 * tangents flow through the inner computation, tangents included.
 * ct_func_jacfwd builds a Jacobian column by column, one jvp per basis
 * vector of the differentiated inputs; ct_func_linearize keeps the primals
 * and answers each call with the jvp at them. */
#include <stdlib.h>
#include <string.h>

#include "func_impl.h"
#include "../autograd/autograd_impl.h"

ct_status ct_func_jvp(ct_func *f, ct_tensor *const *primals, ct_tensor *const *tangents, int n,
                      ct_tensor **outs, ct_tensor **tangent_outs, int nout) {
    if (!f) return ct__error_status(CT_ERR_ARG, "func_jvp: the function is NULL");
    if (n < 0 || nout <= 0 || (n > 0 && !primals) || !tangent_outs)
        return ct__error_status(CT_ERR_ARG, "func_jvp: bad arguments (n %d, nout %d)", n, nout);
    for (int j = 0; j < nout; j++) {
        if (outs) outs[j] = NULL;
        tangent_outs[j] = NULL;
    }
    for (int k = 0; k < n; k++) {
        CT_NULLCHECK_AT_S("func_jvp", primals, k);
        ct_tensor *t = tangents ? tangents[k] : NULL;
        if (t && (t->ndim != primals[k]->ndim ||
                  memcmp(t->sizes, primals[k]->sizes, sizeof(int64_t) * (size_t)t->ndim)))
            return ct__error_status(CT_ERR_SHAPE, "func_jvp: Expected primals and tangents to have the same "
                                    "shape: tangent %d has shape %s, its primal %s", k, ct__tshape(t),
                                    ct__tshape(primals[k]));
    }
    int lvl = ct_fwad_enter_dual_level();
    if (lvl < 0) return ct_last_error_code();
    ct_status st = CT_OK;
    ct_scope s = ct_scope_begin();
    ct_tensor *dl[16], **d = n <= 16 ? dl : malloc(sizeof *d * (size_t)n);
    ct_tensor *pl[8], *tl[8], **po = nout <= 8 ? pl : malloc(sizeof *po * (size_t)nout),
                              **to = nout <= 8 ? tl : malloc(sizeof *to * (size_t)nout);
    if (!d || !po || !to) { st = ct__error_status(CT_ERR_OOM, "func_jvp: out of memory"); goto done; }
    for (int k = 0; k < n && st == CT_OK; k++) {
        ct_tensor *t = tangents ? tangents[k] : NULL;
        d[k] = t ? ct_fwad_make_dual(primals[k], t, lvl) : primals[k];
        if (!d[k]) st = ct_last_error_code();
    }
    if (st == CT_OK) st = ct_func_call(f, d, n, po, nout);
    for (int j = 0; j < nout && st == CT_OK; j++) {
        ct_tensor *p, *t;
        if ((st = ct_fwad_unpack_dual(po[j], lvl, &p, &t))) break;
        if (!t && !(t = ct_zeros_like(p))) { st = ct_last_error_code(); break; }
        po[j] = p;
        to[j] = t;
    }
    if (st == CT_OK)
        for (int j = 0; j < nout; j++) {
            ct_keep(to[j]);
            if (outs) ct_keep(po[j]);
        }
done:
    ct_scope_end(s);
    ct_status st2 = ct_fwad_exit_dual_level(lvl);
    if (st == CT_OK) st = st2;
    if (st == CT_OK)
        for (int j = 0; j < nout; j++) {
            tangent_outs[j] = to[j];
            if (outs) outs[j] = po[j];
        }
    if (d && d != dl) free(d);
    if (po && po != pl) free(po);
    if (to && to != tl) free(to);
    return st;
}

/* ---- jacfwd ---------------------------------------------------------------- */
/* torch's: vmap over the basis of the input's tangent space of jvp(f): one
 * batched forward pass computes every column.  The vmapped column functions
 * (f's inputs, then the tangent of argnum i) are made for each call, so f
 * is traced at each call, as it runs at each call of torch's jacfwd (a trace
 * kept across calls would not see f change what it computes: another
 * tensor behind its ctx, a module switched to eval). */
typedef struct jf_col_ctx {
    ct_func *f;
    int argnum; /* as given: negative counts from the end of f's inputs */
    int nf;     /* f's outputs (the first nout are returned: aux ones are not) */
} jf_col_ctx;

static void jf_col_free(void *p) {
    jf_col_ctx *c = p;
    ct_func_free(c->f);
    free(c);
}

/* in[0..nin-1): f's inputs, in[nin-1]: the tangent of input argnum (its
 * shape); out: the tangents of f's first nout outputs */
static ct_status jf_col_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctxp) {
    jf_col_ctx *c = ctxp;
    int n = nin - 1, idx = c->argnum < 0 ? c->argnum + n : c->argnum;
    ct_tensor *tl[16], **tang = n <= 16 ? tl : calloc((size_t)n, sizeof *tang);
    ct_tensor *ol[16], **to = c->nf <= 16 ? ol : calloc((size_t)c->nf, sizeof *to);
    ct_status st = CT_OK;
    if (!tang || !to || nout > c->nf) st = ct__error_status(CT_ERR_OOM, "jacfwd: out of memory");
    if (st == CT_OK) {
        for (int k = 0; k < n; k++) tang[k] = NULL;
        tang[idx] = in[n];
        st = ct_func_jvp(c->f, in, tang, n, NULL, to, c->nf);
        for (int j = 0; j < nout && st == CT_OK; j++) out[j] = to[j];
    }
    if (tang && tang != tl) free(tang);
    if (to && to != ol) free(to);
    return st;
}

typedef struct jf_cols {
    ct_func **vm; /* per argnum: vmap of its column function */
} jf_cols;

typedef struct jacfwd_ctx {
    ct_func *f;
    argspec a;
} jacfwd_ctx;

static void jf_cols_free(jf_cols *e, int k) {
    if (!e) return;
    for (int i = 0; e->vm && i < k; i++) ct_func_free(e->vm[i]);
    free(e->vm);
    free(e);
}

static void jacfwd_free(void *p) {
    jacfwd_ctx *c = p;
    ct_func_free(c->f);
    free(c->a.argnums);
    free(c);
}

/* The column functions for nin inputs and nf outputs of f (free them with
 * jf_cols_free). */
static jf_cols *jf_get_cols(jacfwd_ctx *c, int nin, int nf) {
    int k = c->a.n;
    jf_cols *e = calloc(1, sizeof *e);
    int64_t *in_dims = malloc(sizeof(int64_t) * (size_t)(nin + 1));
    if (!e || !(e->vm = calloc((size_t)k, sizeof *e->vm)) || !in_dims) {
        jf_cols_free(e, k);
        free(in_dims);
        return ct__error(CT_ERR_OOM, "jacfwd: out of memory");
    }
    for (int i = 0; i < nin; i++) in_dims[i] = CT_VMAP_NONE;
    in_dims[nin] = 0;
    ct_vmap_opts vo = CT_VMAP_DEFAULT;
    vo.in_dims = in_dims;
    vo.n_in_dims = nin + 1;
    for (int i = 0; i < k; i++) {
        jf_col_ctx *cc = malloc(sizeof *cc);
        ct_func *col = NULL;
        if (cc) {
            cc->f = ct_func_retain(c->f);
            cc->argnum = c->a.argnums[i];
            cc->nf = nf;
            if (!(col = ct_func_new_owned(jf_col_fn, cc, jf_col_free))) jf_col_free(cc);
        } else {
            ct__error(CT_ERR_OOM, "jacfwd: out of memory");
        }
        e->vm[i] = col ? ct_vmap(col, &vo) : NULL;
        ct_func_free(col); /* the vmap holds it */
        if (!e->vm[i]) {
            jf_cols_free(e, k);
            free(in_dims);
            return NULL;
        }
    }
    free(in_dims);
    return e;
}

/* J (shape f_j's + the input's) from the batched columns B [m, *f_j], or
 * (B NULL: x has no elements) zeros shaped from f_j */
static ct_tensor *jac_from_batch(ct_tensor *B, const ct_tensor *fj, const ct_tensor *x) {
    int64_t sh[CT_MAX_DIMS];
    int on = B ? B->ndim - 1 : fj->ndim, nd = on + x->ndim;
    if (nd > CT_MAX_DIMS)
        return ct__error(CT_ERR_SHAPE, "jacfwd: the Jacobian of an output of %d dims by an input of %d dims "
                         "has more than %d dims", on, x->ndim, CT_MAX_DIMS);
    memcpy(sh, B ? B->sizes + 1 : fj->sizes, sizeof(int64_t) * (size_t)on);
    memcpy(sh + on, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
    if (!B) return ct_zeros_on(sh, nd, fj->dtype, fj->storage->device);
    /* [m, *out] -> [*out, m] -> [*out, *in] */
    return ct_reshape(ct_movedim(B, 0, -1), sh, nd);
}

/* out[j * k + i] = d f_j / d in[argnums[i]] (f_j's shape + the input's) for
 * the nd differentiated outputs, then (has_aux) f's out[1..] unchanged */
static ct_status jacfwd_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctxp) {
    jacfwd_ctx *c = ctxp;
    int k = c->a.n, nd = 0, nf = 0;
    ct_status st0 = ct__argspec_jac_outputs(&c->a, nout, &nd, &nf, "jacfwd");
    if (st0) return st0;
    ct_status st = CT_OK;
    int *idx = malloc(sizeof(int) * (size_t)k);
    ct_tensor **fo = calloc((size_t)nf, sizeof *fo), **to = calloc((size_t)nf, sizeof *to);
    if (!idx || !fo || !to) { st = ct__error_status(CT_ERR_OOM, "jacfwd: out of memory"); goto done; }
    if ((st = ct__argspec_resolve(&c->a, nin, idx, "jacfwd"))) goto done;
    for (int i = 0; i < k; i++) {
        ct_tensor *x = in[idx[i]];
        if (!x) { st = ct__error_status(CT_ERR_NULL, "jacfwd: input %d is NULL", idx[i]); goto done; }
        if (!ct_dtype_is_floating(x->dtype) && !ct_dtype_is_complex(x->dtype)) {
            st = ct__error_status(CT_ERR_DTYPE, "jacfwd: input %d has dtype %s; only floating point or "
                                  "complex inputs can be differentiated", idx[i], ct_dtype_name(x->dtype));
            goto done;
        }
    }
    /* f's outputs, when wanted: the auxiliary values, or shapes for an
     * input without elements (otherwise the columns give them) */
    bool need_fo = nf > nd;
    for (int i = 0; i < k; i++) need_fo = need_fo || ct_numel(in[idx[i]]) == 0;
    if (need_fo && (st = ct_func_call(c->f, in, nin, fo, nf))) goto done;
    jf_cols *jc = jf_get_cols(c, nin, nf);
    if (!jc) { st = ct_last_error_code(); goto done; }
    for (int i = 0; i < k && st == CT_OK; i++) {
        ct_tensor *x = in[idx[i]];
        int64_t m = ct_numel(x);
        ct_tensor **bo = to; /* [m, *f_j] per output */
        for (int j = 0; j < nd; j++) bo[j] = NULL;
        if (m > 0) {
            /* the basis of x's tangent space: the identity as [m, *x.shape] */
            int64_t sh[CT_MAX_DIMS + 1];
            if (x->ndim + 1 > CT_MAX_DIMS) { st = ct__error_status(CT_ERR_SHAPE, "jacfwd: too many dims"); break; }
            sh[0] = m;
            memcpy(sh + 1, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
            ct_tensor *eye = ct_reshape(ct__eye_on(m, m, x->dtype, x->storage->device), sh, x->ndim + 1);
            if (!eye) { st = ct_last_error_code(); break; }
            ct_tensor *vin[64], **vi = nin + 1 <= 64 ? vin : malloc(sizeof *vi * (size_t)(nin + 1));
            if (!vi) { st = ct__error_status(CT_ERR_OOM, "jacfwd: out of memory"); break; }
            memcpy(vi, in, sizeof *vi * (size_t)nin);
            vi[nin] = eye;
            st = ct_func_call(jc->vm[i], vi, nin + 1, bo, nd);
            if (vi != vin) free(vi);
        }
        for (int j = 0; j < nd && st == CT_OK; j++) {
            ct_tensor *J = jac_from_batch(bo[j], fo[j], x);
            if (!J) { st = ct_last_error_code(); break; }
            out[(size_t)j * (size_t)k + (size_t)i] = J;
        }
    }
    jf_cols_free(jc, k);
    /* the auxiliary outputs: f's values (the primals of the jvp) */
    for (int i = nd; i < nf && st == CT_OK; i++) out[nd * k + (i - nd)] = fo[i];
done:
    free(idx);
    free(fo);
    free(to);
    return st;
}

ct_func *ct_func_jacfwd(ct_func *f, const ct_func_grad_opts *o) {
    if (!f) return ct__error(CT_ERR_NULL, "jacfwd: the function is NULL");
    jacfwd_ctx *c = calloc(1, sizeof *c);
    if (!c) return ct__error(CT_ERR_OOM, "jacfwd: out of memory");
    if (ct__argspec_init(&c->a, o, "jacfwd")) { free(c); return NULL; }
    c->f = ct_func_retain(f);
    ct_func *r = ct_func_new_owned(jacfwd_fn, c, jacfwd_free);
    if (!r) jacfwd_free(c);
    return r;
}

/* ---- linearize --------------------------------------------------------------- */
typedef struct lin_ctx {
    ct_func *f;
    int n;
    ct_tensor *primals[];
} lin_ctx;

static void lin_free(void *p) {
    lin_ctx *c = p;
    ct_func_free(c->f);
    for (int k = 0; k < c->n; k++) ct_release(c->primals[k]);
    free(c);
}

static ct_status lin_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctxp) {
    lin_ctx *c = ctxp;
    if (nin != c->n)
        return ct__error_status(CT_ERR_ARG, "linearize: the jvp function takes %d tangents (one per "
                                "primal), got %d", c->n, nin);
    return ct_func_jvp(c->f, c->primals, in, c->n, NULL, out, nout);
}

ct_status ct_func_linearize(ct_func *f, ct_tensor *const *primals, int n, ct_tensor **outs, int nout,
                            ct_func **jvp_fn) {
    if (jvp_fn) *jvp_fn = NULL;
    if (!f || !jvp_fn || n < 0 || (n > 0 && !primals) || nout <= 0 || !outs)
        return ct__error_status(CT_ERR_ARG, "linearize: bad arguments (n %d, nout %d)", n, nout);
    for (int k = 0; k < n; k++) CT_NULLCHECK_AT_S("linearize", primals, k);
    ct_status st = ct_func_call(f, primals, n, outs, nout);
    if (st) return st;
    lin_ctx *c = calloc(1, sizeof *c + sizeof(ct_tensor *) * (size_t)n);
    if (!c) return ct__error_status(CT_ERR_OOM, "linearize: out of memory");
    c->f = ct_func_retain(f);
    c->n = n;
    /* the primals' values now (later in-place edits of the caller's tensors
     * do not move the linearization point) */
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < n && st == CT_OK; k++) {
        ct_tensor *p = ct_clone(ct_detach(primals[k]));
        if (!p) st = ct_last_error_code();
        else c->primals[k] = ct_retain(p);
    }
    ct_scope_end(s);
    if (st == CT_OK && !(*jvp_fn = ct_func_new_owned(lin_fn, c, lin_free))) st = ct_last_error_code();
    if (st) {
        lin_free(c);
        for (int j = 0; j < nout; j++) outs[j] = NULL;
    }
    return st;
}
