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
typedef struct jacfwd_ctx {
    ct_func *f;
    int nargs;
    int argnums[];
} jacfwd_ctx;

static void jacfwd_free(void *p) {
    jacfwd_ctx *c = p;
    ct_func_free(c->f);
    free(c);
}

/* out[j * nargs + i] = d f_j / d in[argnums[i]], of shape f_j's + the input's */
static ct_status jacfwd_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctxp) {
    jacfwd_ctx *c = ctxp;
    int na = c->nargs;
    if (nout % na)
        return ct__error_status(CT_ERR_ARG, "jacfwd: %d outputs asked for %d argnums: expected a multiple "
                                "(one Jacobian per output of the function and argnum)", nout, na);
    int nf = nout / na;
    for (int i = 0; i < na; i++)
        if (c->argnums[i] >= nin)
            return ct__error_status(CT_ERR_INDEX, "jacfwd: Got argnums=%d, but only %d positional inputs",
                                    c->argnums[i], nin);
    ct_status st = CT_OK;
    ct_tensor **tang = calloc((size_t)nin + 1, sizeof *tang);
    ct_tensor **fo = calloc((size_t)nf, sizeof *fo), **cols = NULL;
    if (!tang || !fo) { st = ct__error_status(CT_ERR_OOM, "jacfwd: out of memory"); goto done; }
    for (int i = 0; i < na && st == CT_OK; i++) {
        ct_tensor *x = in[c->argnums[i]];
        if (!ct_dtype_is_floating(x->dtype) && !ct_dtype_is_complex(x->dtype)) {
            st = ct__error_status(CT_ERR_DTYPE, "jacfwd: input %d has dtype %s; only floating point or "
                                  "complex inputs can be differentiated", c->argnums[i], ct_dtype_name(x->dtype));
            break;
        }
        int64_t m = ct_numel(x);
        /* one jvp per basis vector e_k: column k of every output's Jacobian */
        cols = calloc((size_t)nf * (size_t)(m ? m : 1), sizeof *cols);
        if (!cols) { st = ct__error_status(CT_ERR_OOM, "jacfwd: out of memory"); break; }
        ct_tensor *eye = ct__eye_on(m, m, x->dtype, x->storage->device);
        if (!eye) { st = ct_last_error_code(); break; }
        for (int64_t k = 0; k < m && st == CT_OK; k++) {
            memset(tang, 0, sizeof *tang * (size_t)nin);
            tang[c->argnums[i]] = ct_reshape(ct_select(eye, 0, k), x->sizes, x->ndim);
            if (!tang[c->argnums[i]]) { st = ct_last_error_code(); break; }
            ct_tensor *to[64];
            if (nf > 64) { st = ct__error_status(CT_ERR_ARG, "jacfwd: at most 64 outputs"); break; }
            st = ct_func_jvp(c->f, in, tang, nin, NULL, to, nf);
            for (int j = 0; j < nf && st == CT_OK; j++) cols[(size_t)j * (size_t)m + (size_t)k] = to[j];
        }
        for (int j = 0; j < nf && st == CT_OK; j++) {
            ct_tensor *J;
            if (m == 0) {
                /* no columns: zeros of the right shape */
                if ((st = ct_func_call(c->f, in, nin, fo, nf))) break;
                int64_t sh[CT_MAX_DIMS];
                int nd = fo[j]->ndim + x->ndim;
                if (nd > CT_MAX_DIMS) { st = ct__error_status(CT_ERR_SHAPE, "jacfwd: too many dims"); break; }
                memcpy(sh, fo[j]->sizes, sizeof(int64_t) * (size_t)fo[j]->ndim);
                memcpy(sh + fo[j]->ndim, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
                J = ct_zeros_on(sh, nd, fo[j]->dtype, fo[j]->storage->device);
            } else {
                /* [m, *out] -> [*out, m] -> [*out, *in] */
                ct_tensor *S = ct_stack(cols + (size_t)j * (size_t)m, (int)m, 0);
                if (!S) { st = ct_last_error_code(); break; }
                int ond = S->ndim - 1;
                int64_t sh[CT_MAX_DIMS];
                if (ond + x->ndim > CT_MAX_DIMS) { st = ct__error_status(CT_ERR_SHAPE, "jacfwd: too many dims"); break; }
                memcpy(sh, S->sizes + 1, sizeof(int64_t) * (size_t)ond);
                memcpy(sh + ond, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
                J = ct_reshape(ct_movedim(S, 0, -1), sh, ond + x->ndim);
            }
            if (!J) { st = ct_last_error_code(); break; }
            out[(size_t)j * (size_t)na + (size_t)i] = J;
        }
        free(cols);
        cols = NULL;
    }
done:
    free(cols);
    free(tang);
    free(fo);
    return st;
}

ct_func *ct_func_jacfwd(ct_func *f, const int *argnums, int nargnums) {
    if (!f) return ct__error(CT_ERR_ARG, "jacfwd: the function is NULL");
    int def = 0;
    if (!argnums || nargnums <= 0) {
        if (argnums && nargnums < 0) return ct__error(CT_ERR_ARG, "jacfwd: nargnums %d", nargnums);
        argnums = &def;
        nargnums = 1;
    }
    for (int i = 0; i < nargnums; i++) {
        if (argnums[i] < 0) return ct__error(CT_ERR_INDEX, "jacfwd: argnums must be >= 0, got %d", argnums[i]);
        for (int j = 0; j < i; j++)
            if (argnums[j] == argnums[i])
                return ct__error(CT_ERR_ARG, "jacfwd: argnums must be unique, got %d twice", argnums[i]);
    }
    jacfwd_ctx *c = malloc(sizeof *c + sizeof(int) * (size_t)nargnums);
    if (!c) return ct__error(CT_ERR_OOM, "jacfwd: out of memory");
    c->f = ct_func_retain(f);
    c->nargs = nargnums;
    memcpy(c->argnums, argnums, sizeof(int) * (size_t)nargnums);
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
