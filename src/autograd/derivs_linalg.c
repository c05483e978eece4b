/* derivs_linalg.c -- derivatives of the linalg family (src/ops/linalg.c,
 * src/ops/linalg_einsum.c), written with public ops so they are
 * differentiable themselves (formulas of PyTorch's derivatives.yaml).
 *
 * Args recorded by the ops (ct_p_linalg, src/ops/params_linalg.def): the
 * add* ops carry beta and alpha; tensordot its wrapped contracted dims
 * (a's in dims_a, b's in dims_b); cross its wrapped dim in dim; cdist p;
 * einsum its equation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "autograd_impl.h"

#define NEED(k) (c->needs[k])
#define IN(k) ct__vjp_in(c, k)
#define OUT(k) ct__vjp_out(c, k)
#define GEO(k) ct__vjp_geom(c, k)

static ct_status err_code(void) {
    ct_status st = ct_last_error_code();
    return st ? st : CT_ERR_AUTOGRAD;
}

/* t * s, skipping the multiply when s == 1 (torch's maybe_multiply) */
static ct_tensor *scale(ct_tensor *t, double s) { return s == 1.0 ? t : ct_mul_scalar(t, s); }
/* last two dims swapped */
static ct_tensor *mT(ct_tensor *t) { return ct_transpose(t, -2, -1); }
/* t in dtype dt (t itself when it already is) */
static ct_tensor *as_dt(ct_tensor *t, ct_dtype dt) { return t && t->dtype != dt ? ct_to_dtype(t, dt) : t; }
/* g summed/cast for input t, then viewed with t's exact shape */
static ct_tensor *grad_as(ct_tensor *g, const ct_geom *shaped_like, const ct_geom *t) {
    ct_tensor *r = ct__grad_to(g, shaped_like);
    if (r && (r->ndim != t->ndim || memcmp(r->sizes, t->sizes, sizeof(int64_t) * (size_t)t->ndim)))
        r = ct_reshape(r, t->sizes, t->ndim);
    return r;
}

/* ---- products ------------------------------------------------------------- */
ct_status ct__vjp_mm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_mm(g[0], ct_t(IN(1)));
    if (NEED(1)) gin[1] = ct_mm(ct_t(IN(0)), g[0]);
    return CT_OK;
}

ct_status ct__vjp_bmm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_bmm(g[0], mT(IN(1)));
    if (NEED(1)) gin[1] = ct_bmm(mT(IN(0)), g[0]);
    return CT_OK;
}

/* torch.matmul: vectors are promoted to [1, K] / [K, 1], the gradient gets
 * the matching size-1 dim, and broadcast batch dims are summed back. */
/* t's geometry with a size-1 dim inserted at the front (d 0) or the end (d -1) */
static ct_geom geom_unsqueeze(const ct_geom *t, int d) {
    ct_geom r = *t;
    if (d == 0) {
        memmove(r.sizes + 1, r.sizes, sizeof(int64_t) * (size_t)r.ndim);
        r.sizes[0] = 1;
    } else {
        r.sizes[r.ndim] = 1;
    }
    r.ndim++;
    return r;
}

ct_status ct__vjp_matmul(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *ag = GEO(0), *bg = GEO(1);
    ct_tensor *go = g[0];
    if (ag->ndim == 1 && bg->ndim == 1) { /* dot: go is 0-D */
        if (NEED(0)) gin[0] = ct__grad_to(ct_mul(go, IN(1)), ag);
        if (NEED(1)) gin[1] = ct__grad_to(ct_mul(go, IN(0)), bg);
        return CT_OK;
    }
    ct_geom a2g = ag->ndim == 1 ? geom_unsqueeze(ag, 0) : *ag;
    ct_geom b2g = bg->ndim == 1 ? geom_unsqueeze(bg, -1) : *bg;
    ct_tensor *g2 = go;
    if (ag->ndim == 1) g2 = ct_unsqueeze(g2, -2);
    if (bg->ndim == 1) g2 = ct_unsqueeze(g2, -1);
    if (!g2) return err_code();
    if (NEED(0)) { /* reads b only */
        ct_tensor *b = IN(1);
        ct_tensor *b2 = b && bg->ndim == 1 ? ct_unsqueeze(b, 1) : b;
        if (!b2) return err_code();
        gin[0] = grad_as(ct_matmul(g2, mT(b2)), &a2g, ag);
    }
    if (NEED(1)) { /* reads a only */
        ct_tensor *a = IN(0);
        ct_tensor *a2 = a && ag->ndim == 1 ? ct_unsqueeze(a, 0) : a;
        if (!a2) return err_code();
        if (a2g.ndim >= 3 && b2g.ndim == 2) { /* folded rows: one [K, rows] @ [rows, N] */
            int64_t K = a2->sizes[a2->ndim - 1], N = g2->sizes[g2->ndim - 1];
            ct_tensor *af = ct_reshape(a2, CT_SHAPE(-1, K)), *gf = ct_reshape(g2, CT_SHAPE(-1, N));
            gin[1] = grad_as(ct_mm(ct_t(af), gf), &b2g, bg);
        } else {
            gin[1] = grad_as(ct_matmul(mT(a2), g2), &b2g, bg);
        }
    }
    return CT_OK;
}

ct_status ct__vjp_mv(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct_outer(g[0], IN(1));
    if (NEED(1)) gin[1] = ct_mv(ct_t(IN(0)), g[0]);
    return CT_OK;
}

ct_status ct__vjp_dot(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (ct_dtype_is_complex(GEO(0)->dtype))
        return ct__error_status(CT_ERR_AUTOGRAD, "%s: the derivative for complex inputs is not "
                                "implemented", ct__op_info[c->a->op].name);
    if (NEED(0)) gin[0] = ct__grad_to(ct_mul(g[0], IN(1)), GEO(0));
    if (NEED(1)) gin[1] = ct__grad_to(ct_mul(g[0], IN(0)), GEO(1));
    return CT_OK;
}

ct_status ct__vjp_outer(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_dtype dt = g[0]->dtype;
    if (NEED(0)) gin[0] = ct__grad_to(ct_mv(g[0], as_dt(IN(1), dt)), GEO(0));
    if (NEED(1)) gin[1] = ct__grad_to(ct_mv(ct_t(g[0]), as_dt(IN(0), dt)), GEO(1));
    return CT_OK;
}

/* ---- beta * input + alpha * product ---------------------------------------- */
#define BETA (c->a->p.linalg.beta)
#define ALPHA (c->a->p.linalg.alpha)

ct_status ct__vjp_addmm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(scale(g[0], BETA), GEO(0));
    if (NEED(1)) gin[1] = scale(ct_mm(g[0], ct_t(IN(2))), ALPHA);
    if (NEED(2)) gin[2] = scale(ct_mm(ct_t(IN(1)), g[0]), ALPHA);
    return CT_OK;
}

ct_status ct__vjp_addmv(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(scale(g[0], BETA), GEO(0));
    if (NEED(1)) gin[1] = scale(ct_outer(g[0], IN(2)), ALPHA);
    if (NEED(2)) gin[2] = scale(ct_mv(ct_t(IN(1)), g[0]), ALPHA);
    return CT_OK;
}

ct_status ct__vjp_addr(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_dtype dt = g[0]->dtype;
    if (NEED(0)) gin[0] = ct__grad_to(scale(g[0], BETA), GEO(0));
    if (NEED(1)) gin[1] = ct__grad_to(scale(ct_mv(g[0], as_dt(IN(2), dt)), ALPHA), GEO(1));
    if (NEED(2)) gin[2] = ct__grad_to(scale(ct_mv(ct_t(g[0]), as_dt(IN(1), dt)), ALPHA), GEO(2));
    return CT_OK;
}

ct_status ct__vjp_baddbmm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(scale(g[0], BETA), GEO(0));
    if (NEED(1)) gin[1] = scale(ct_bmm(g[0], mT(IN(2))), ALPHA);
    if (NEED(2)) gin[2] = scale(ct_bmm(mT(IN(1)), g[0]), ALPHA);
    return CT_OK;
}

ct_status ct__vjp_addbmm(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    if (NEED(0)) gin[0] = ct__grad_to(scale(g[0], BETA), GEO(0));
    if (!NEED(1) && !NEED(2)) return CT_OK;
    const ct_geom *b1 = GEO(1), *b2 = GEO(2);
    ct_tensor *ge = ct_expand(ct_unsqueeze(g[0], 0), CT_SHAPE(b1->sizes[0], b1->sizes[1], b2->sizes[2]));
    if (!ge) return err_code();
    if (NEED(1)) gin[1] = scale(ct_bmm(ge, mT(IN(2))), ALPHA);
    if (NEED(2)) gin[2] = scale(ct_bmm(mT(IN(1)), ge), ALPHA);
    return CT_OK;
}

/* ---- linear, bilinear -------------------------------------------------------- */
ct_status ct__vjp_linear(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *w = GEO(1);
    if (NEED(0)) gin[0] = ct_matmul(g[0], IN(1)); /* reads w only */
    if (NEED(1)) {                                /* reads x only */
        ct_tensor *g2 = ct_reshape(g[0], CT_SHAPE(-1, w->sizes[0]));
        ct_tensor *x2 = ct_reshape(IN(0), CT_SHAPE(-1, w->sizes[1]));
        gin[1] = ct_mm(ct_t(g2), x2);
    }
    if (c->nin > 2 && NEED(2)) {                  /* geometry only */
        const ct_geom *b = GEO(2);
        int64_t n_out = w->sizes[0];
        if (b->ndim == 1 && b->sizes[0] == n_out && n_out > 0 && g[0]->ndim >= 2 &&
            (b->dtype == CT_F32 || b->dtype == CT_F64)) {
            /* the column sum of g [rows, out] as ones[1, rows] @ g: one
             * GEMM streaming g's rows, no transposed copy */
            ct_tensor *g2 = ct_reshape(g[0], CT_SHAPE(-1, n_out));
            ct_tensor *ones = g2 ? ct_ones_on(CT_SHAPE(1, ct_size(g2, 0)), g2->dtype, g2->storage->device) : NULL;
            gin[2] = ct_reshape(ct_mm(ones, g2), CT_SHAPE(n_out));
        } else {
            gin[2] = ct__grad_to(g[0], b);
        }
    }
    return CT_OK;
}

ct_status ct__vjp_bilinear(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x1 = IN(0), *x2 = IN(1), *w = IN(2);
    if (NEED(0)) gin[0] = ct_einsum("...o,oij,...j->...i", (ct_tensor *[]){g[0], w, x2}, 3);
    if (NEED(1)) gin[1] = ct_einsum("...o,oij,...i->...j", (ct_tensor *[]){g[0], w, x1}, 3);
    if (NEED(2)) gin[2] = ct_einsum("...o,...i,...j->oij", (ct_tensor *[]){g[0], x1, x2}, 3);
    if (c->nin > 3 && NEED(3)) gin[3] = ct__grad_to(g[0], GEO(3));
    return CT_OK;
}

/* ---- einsum -------------------------------------------------------------------
 * The gradient of operand k is an einsum of the output gradient with the
 * other operands, producing k's labels.  The equation is re-parsed the way
 * ct_einsum parses it (ellipsis dims get unused letters); labels of k that
 * appear nowhere else are summed in the forward, so they are broadcast back;
 * size-1 (broadcast) dims of k are summed; repeated labels of k (diagonals)
 * are written into the diagonal of a zero tensor. */
#define EIN_MAX_OPS 64
#define EIN_NLAB (52 + CT_MAX_DIMS)

typedef struct {
    int n;
    int nl[EIN_MAX_OPS];
    int lab[EIN_MAX_OPS][CT_MAX_DIMS];
    int nout;
    int out[CT_MAX_DIMS];
    char chr[EIN_NLAB];
} ein_eq;

static int ein_id(char ch) { return ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch - 'a' + 26; }

static ct_status ein_parse(const char *eq, ct_tensor *const *ts, int n, ein_eq *E) {
    int raw[EIN_MAX_OPS][CT_MAX_DIMS + 1], nraw[EIN_MAX_OPS] = {0}, ell[EIN_MAX_OPS];
    int olab[CT_MAX_DIMS + 1], nolab = 0, oell = -1, cur = 0, arrow = 0, used[52] = {0};
    if (n > EIN_MAX_OPS) return ct__error_status(CT_ERR_ARG, "einsum backward: too many operands");
    for (int k = 0; k < n; k++) ell[k] = -1;
    for (int i = 0; eq[i]; i++) {
        char ch = eq[i];
        if (ch == ' ') continue;
        if (ch == '.') { if (arrow) oell = nolab; else ell[cur] = nraw[cur]; i += 2; continue; }
        if (ch == ',') { cur++; continue; }
        if (ch == '-') { arrow = 1; i++; continue; }
        used[ein_id(ch)] = 1;
        if (arrow) olab[nolab++] = ein_id(ch);
        else raw[cur][nraw[cur]++] = ein_id(ch);
    }
    int max_ell = 0, count[EIN_NLAB] = {0};
    for (int k = 0; k < n; k++)
        if (ell[k] >= 0 && ts[k]->ndim - nraw[k] > max_ell) max_ell = ts[k]->ndim - nraw[k];
    E->n = n;
    for (int k = 0; k < n; k++) {
        int ne = ell[k] >= 0 ? ts[k]->ndim - nraw[k] : 0, p = 0;
        for (int j = 0; j <= nraw[k]; j++) {
            if (j == ell[k])
                for (int e = 0; e < ne; e++) E->lab[k][p++] = 52 + (max_ell - ne) + e;
            if (j < nraw[k]) E->lab[k][p++] = raw[k][j];
        }
        E->nl[k] = p;
        for (int d = 0; d < p; d++) count[E->lab[k][d]]++;
    }
    E->nout = 0;
    if (arrow) {
        for (int j = 0; j <= nolab; j++) {
            if (j == oell)
                for (int e = 0; e < max_ell; e++) E->out[E->nout++] = 52 + e;
            if (j < nolab) E->out[E->nout++] = olab[j];
        }
    } else {
        for (int e = 0; e < max_ell; e++) E->out[E->nout++] = 52 + e;
        for (int id = 0; id < 52; id++)
            if (count[id] == 1) E->out[E->nout++] = id;
    }
    for (int id = 0; id < 52; id++) E->chr[id] = (char)(id < 26 ? 'A' + id : 'a' + id - 26);
    int next = 0;
    for (int e = 0; e < max_ell; e++) {
        while (next < 52 && used[next]) next++;
        if (next >= 52)
            return ct__error_status(CT_ERR_ARG, "einsum backward: no free subscript letters for the "
                                    "ellipsis dims");
        E->chr[52 + e] = E->chr[next++];
    }
    return CT_OK;
}

static char *ein_put(char *p, const ein_eq *E, const int *lab, int nl) {
    for (int d = 0; d < nl; d++) *p++ = E->chr[lab[d]];
    return p;
}

static ct_tensor *ein_grad(const ct_vjp_ctx *c, const ein_eq *E, ct_tensor *go, int k) {
    ct_tensor *x = IN(k);
    int n = E->n, nd = E->nl[k];
    int avail[EIN_NLAB] = {0};
    for (int j = 0; j < E->nout; j++) avail[E->out[j]] = 1;
    for (int j = 0; j < n; j++)
        if (j != k)
            for (int d = 0; d < E->nl[j]; d++) avail[E->lab[j][d]] = 1;
    /* unique labels of operand k (first occurrence order) and their sizes */
    int uq[CT_MAX_DIMS], nu = 0, rl[CT_MAX_DIMS], nr = 0;
    int64_t usz[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int id = E->lab[k][d], seen = 0;
        for (int u = 0; u < nu; u++) seen |= uq[u] == id;
        if (seen) continue;
        usz[nu] = x->sizes[d];
        uq[nu++] = id;
        if (avail[id]) rl[nr++] = id;
    }
    /* the equation: gout, the other operands -> k's available labels */
    size_t cap = (size_t)(n + 2) * (CT_MAX_DIMS + 2) + 8;
    char *eq = malloc(cap), *p = eq;
    if (!eq) return ct__error(CT_ERR_OOM, "einsum backward: out of memory");
    ct_tensor *ops[EIN_MAX_OPS];
    int nops = 0;
    p = ein_put(p, E, E->out, E->nout);
    ops[nops++] = go;
    for (int j = 0; j < n; j++) {
        if (j == k) continue;
        *p++ = ',';
        p = ein_put(p, E, E->lab[j], E->nl[j]);
        ops[nops++] = IN(j);
    }
    *p++ = '-';
    *p++ = '>';
    p = ein_put(p, E, rl, nr);
    *p = 0;
    ct_tensor *r = ct_einsum(eq, ops, nops);
    free(eq);
    if (!r) return NULL;
    /* dims broadcast in k (size 1 there) are summed back */
    int64_t sdims[CT_MAX_DIMS];
    int ns = 0;
    for (int i = 0, u = 0; i < nr; i++) {
        while (uq[u] != rl[i]) u++;
        if (usz[u] == 1 && r->sizes[i] != 1) sdims[ns++] = i;
    }
    if (ns) r = ct_sum(r, sdims, ns, true);
    /* labels only in k: broadcast */
    for (int u = 0; u < nu && r; u++)
        if (!avail[uq[u]]) r = ct_unsqueeze(r, u);
    if (r) r = ct_expand(r, usz, nu);
    if (!r || nu == nd) return r;
    /* repeated labels: r goes on the diagonals of zeros shaped like x */
    ct_tensor *z = ct_zeros_on(x->sizes, x->ndim, r->dtype, r->storage->device), *v = z;
    int vl[CT_MAX_DIMS], nv = nd;
    memcpy(vl, E->lab[k], sizeof(int) * (size_t)nd);
    for (int again = 1; again && v;) {
        again = 0;
        for (int i = 0; i < nv && !again; i++)
            for (int j = i + 1; j < nv && !again; j++) {
                if (vl[i] != vl[j]) continue;
                int id = vl[i], m = 0;
                v = ct_diagonal(v, 0, i, j);
                for (int d = 0; d < nv; d++)
                    if (d != i && d != j) vl[m++] = vl[d];
                vl[m++] = id;
                nv = m;
                again = 1;
            }
    }
    if (!v) return NULL;
    int64_t perm[CT_MAX_DIMS];
    for (int i = 0; i < nv; i++)
        for (int u = 0; u < nu; u++)
            if (uq[u] == vl[i]) perm[i] = u;
    if (!ct_copy_(v, ct_permute(r, perm, nv))) return NULL;
    return z;
}

ct_status ct__vjp_einsum(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ein_eq *E = malloc(sizeof *E);
    if (!E) return ct__error_status(CT_ERR_OOM, "einsum backward: out of memory");
    ct_status st = ein_parse(c->a->p.linalg.equation, c->in, c->nin, E);
    for (int k = 0; k < c->nin && !st; k++) {
        if (!NEED(k)) continue;
        gin[k] = ct__grad_for(ein_grad(c, E, g[0], k), IN(k));
        if (!gin[k]) st = err_code();
    }
    free(E);
    return st;
}

/* ---- tensordot, kron ------------------------------------------------------------ */
ct_status ct__vjp_tensordot(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *a = IN(0), *b = IN(1), *go = g[0];
    int nc = c->a->p.linalg.dims_a_n, na = a->ndim, nb = b->ndim, fa = na - nc, fb = nb - nc;
    const int64_t *da = c->a->p.linalg.dims_a, *db = c->a->p.linalg.dims_b;
    int ca[CT_MAX_DIMS] = {0}, cb[CT_MAX_DIMS] = {0}, partner_a[CT_MAX_DIMS], partner_b[CT_MAX_DIMS];
    for (int i = 0; i < nc; i++) {
        ca[da[i]] = cb[db[i]] = 1;
        partner_a[da[i]] = (int)db[i]; /* a's dim -> b's dim */
        partner_b[db[i]] = (int)da[i];
    }
    int64_t d1[CT_MAX_DIMS], d2[CT_MAX_DIMS], perm[CT_MAX_DIMS];
    if (NEED(0)) { /* g [a free, b free] . b over b's free dims -> [a free, b contracted (b order)] */
        int m = 0;
        for (int y = 0; y < nb; y++)
            if (!cb[y]) { d1[m] = fa + m; d2[m] = y; m++; }
        ct_tensor *r = ct_tensordot(go, b, d1, d2, fb);
        for (int x = 0, f = 0; x < na; x++) {
            if (!ca[x]) { perm[x] = f++; continue; }
            int rank = 0;
            for (int y = 0; y < partner_a[x]; y++) rank += cb[y];
            perm[x] = fa + rank;
        }
        gin[0] = ct__grad_for(ct_permute(r, perm, na), a);
    }
    if (NEED(1)) { /* a . g over a's free dims -> [a contracted (a order), b free] */
        int m = 0;
        for (int x = 0; x < na; x++)
            if (!ca[x]) { d1[m] = x; d2[m] = m; m++; }
        ct_tensor *r = ct_tensordot(a, go, d1, d2, fa);
        for (int y = 0, f = 0; y < nb; y++) {
            if (!cb[y]) { perm[y] = nc + f++; continue; }
            int rank = 0;
            for (int x = 0; x < partner_b[y]; x++) rank += ca[x];
            perm[y] = rank;
        }
        gin[1] = ct__grad_for(ct_permute(r, perm, nb), b);
    }
    return CT_OK;
}

/* kron: out viewed as [a0, b0, a1, b1, ...] is the outer product of a and b */
ct_status ct__vjp_kron(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *a = IN(0), *b = IN(1), *go = g[0];
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t sa[CT_MAX_DIMS], sb[CT_MAX_DIMS], gs[CT_MAX_DIMS], ev[CT_MAX_DIMS], od[CT_MAX_DIMS],
        id[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        sa[i] = i < nd - a->ndim ? 1 : a->sizes[i - (nd - a->ndim)];
        sb[i] = i < nd - b->ndim ? 1 : b->sizes[i - (nd - b->ndim)];
        gs[2 * i] = sa[i];
        gs[2 * i + 1] = sb[i];
        ev[i] = 2 * i;
        od[i] = 2 * i + 1;
        id[i] = i;
    }
    ct_tensor *gi = ct_reshape(go, gs, 2 * nd);
    if (!gi) return err_code();
    if (NEED(0)) {
        ct_tensor *br = ct_reshape(as_dt(b, go->dtype), sb, nd);
        gin[0] = grad_as(ct_tensordot(gi, br, od, id, nd), GEO(0), GEO(0));
    }
    if (NEED(1)) {
        ct_tensor *ar = ct_reshape(as_dt(a, go->dtype), sa, nd);
        gin[1] = grad_as(ct_tensordot(gi, ar, ev, id, nd), GEO(1), GEO(1));
    }
    return CT_OK;
}

/* ---- trace, cross, cdist ----------------------------------------------------------- */
ct_status ct__vjp_trace(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    const ct_geom *x = GEO(0);
    if (NEED(0)) gin[0] = ct__grad_to(ct_mul(ct__eye_on(x->sizes[0], x->sizes[1], g[0]->dtype, g[0]->storage->device), g[0]), x);
    return CT_OK;
}

ct_status ct__vjp_cross(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    int64_t d = c->a->p.linalg.dim;
    if (NEED(0)) gin[0] = ct__grad_to(ct_cross(IN(1), g[0], d), GEO(0));
    if (NEED(1)) gin[1] = ct__grad_to(ct_cross(g[0], IN(0), d), GEO(1));
    return CT_OK;
}

/* torch's _cdist_backward: with diff = x1[i] - x2[j] and d = dist[i, j],
 * d dist / d x1[i] = sign(diff) |diff|^(p-1) / d^(p-1)  (0 where d == 0);
 * p = 2: diff / d; p = 1: sign(diff); p = inf: sign(diff) where
 * |diff| == d; p = 0: no gradient. */
ct_status ct__vjp_cdist(const ct_vjp_ctx *c, ct_tensor *const *g, ct_tensor **gin) {
    ct_tensor *x1 = IN(0), *x2 = IN(1);
    double p = c->a->p.linalg.p;
    if (p == 0) {
        if (NEED(0)) gin[0] = ct_zeros_like(x1);
        if (NEED(1)) gin[1] = ct_zeros_like(x2);
        return CT_OK;
    }
    ct_dtype dt = g[0]->dtype;
    ct_tensor *diff = ct_sub(ct_unsqueeze(x1, -2), ct_unsqueeze(x2, -3)); /* [..., P, R, M] */
    ct_tensor *d = ct_unsqueeze(OUT(0), -1);                               /* [..., P, R, 1] */
    ct_tensor *zero = ct_zeros_on(NULL, 0, dt, CT_CPU), *one = ct_ones_on(NULL, 0, dt, CT_CPU); /* 0-dim: any device */
    if (!diff || !d || !zero || !one) return err_code();
    ct_tensor *w;
    if (p == 1) {
        w = ct_sign(diff);
    } else if (isinf(p)) {
        w = ct_where(ct_eq(ct_abs(diff), d), ct_sign(diff), zero);
    } else {
        ct_tensor *dz = ct_eq_scalar(d, 0.0);
        ct_tensor *ds = ct_where(dz, one, d); /* no 0/0 in the masked-out branch */
        if (p == 2) {
            w = ct_where(dz, zero, ct_div(diff, ds));
        } else {
            ct_tensor *ad = ct_abs(diff);
            ct_tensor *dead = p < 1 ? ct_logical_or(dz, ct_eq_scalar(ad, 0.0)) : dz;
            if (p < 1) ad = ct_where(dead, one, ad);
            ct_tensor *num = ct_mul(ct_sign(diff), ct_pow_scalar(ad, p - 1));
            w = ct_where(dead, zero, ct_div(num, ct_pow_scalar(ds, p - 1)));
        }
    }
    ct_tensor *gw = ct_mul(ct_unsqueeze(g[0], -1), w);
    if (!gw) return err_code();
    if (NEED(0)) gin[0] = ct__grad_for(ct_sum(gw, CT_SHAPE(-2), false), x1);
    if (NEED(1)) gin[1] = ct__grad_for(ct_neg(ct_sum(gw, CT_SHAPE(-3), false)), x2);
    return CT_OK;
}

