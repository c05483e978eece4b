/* forward.c -- forward-mode automatic differentiation (dual numbers,
 * torch.autograd.forward_ad).
 *
 * A thread has a stack of dual levels (ct_fwad_enter_dual_level /
 * ct_fwad_exit_dual_level).  A tensor's tangent at a level lives in its
 * autograd metadata (ct_ag_meta.fw: a short list of entries, one per level
 * it has a tangent at); each level also keeps the list of its entries, so
 * exiting a level drops all of its tangents at once, and a tensor freed
 * earlier unlinks its entries (meta_free -> ct__fw_meta_free).
 *
 * Propagation: the op layer's exit points call autograd's record hook
 * whenever its active hook says so; that hook asks ct__fw_any when a level
 * is active, and the record hook then runs ct__fw_op: for every active
 * level at which an input has a tangent, the op's jvp rule (the op table's
 * .jvp column, ct_jvp_fn) computes the outputs' tangents from the inputs'
 * (NULL: zero) and they are attached to the outputs.  While a rule runs for
 * level L, L is hidden (ct__fw_hidden): the rule sees the primals without
 * their L tangents, so the ops it runs do not propagate at L again, while
 * the other levels still propagate through them (nested levels: forward
 * over forward).  The rules are written with public ops, so reverse mode
 * records them (reverse over forward), and the backward pass's ops
 * propagate tangents (forward over reverse: Hessian-vector products).
 *
 * Views: a view op's rule is the same view of the tangent; a view made
 * before its base got a tangent derives its tangent from the base's on
 * first use (the base's tangent then has the base's layout, as torch
 * requires of tangents).  In-place ops (inplace.c) compute the new tangent
 * from the old value's and write it into the target's tangent in place, so
 * views of the target see it; a target without a tangent gets one (through
 * its base, when it is a view made under grad mode).
 *
 * Threads: levels and tangents are per thread; a tensor holding a tangent
 * must be freed on the thread that gave it (as torch's levels are
 * thread-local too). */
#include <stdio.h>

#include "autograd_impl.h"

#define FW_MAX_LEVELS 16

struct ct_fw_entry {
    ct_tensor *owner;    /* weak: the entry goes when the owner's metadata goes */
    ct_tensor *tangent;  /* strong */
    int level;
    struct ct_fw_entry *lprev, *lnext; /* the level's list */
    struct ct_fw_entry *tnext;         /* the owner's list */
};

_Thread_local int ct__fw_nlevels;
_Thread_local unsigned ct__fw_hidden;
static _Thread_local ct_fw_entry *tl_level_head[FW_MAX_LEVELS];

static bool differentiable(ct_dtype dt) { return ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt); }

/* ---- entries --------------------------------------------------------------- */
static void level_unlink(ct_fw_entry *e) {
    if (e->lprev) e->lprev->lnext = e->lnext;
    else if (e->level >= 0 && e->level < FW_MAX_LEVELS && tl_level_head[e->level] == e)
        tl_level_head[e->level] = e->lnext;
    if (e->lnext) e->lnext->lprev = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void owner_unlink(ct_fw_entry *e) {
    ct_ag_meta *m = ct__ag_peek(e->owner);
    if (!m) return;
    for (ct_fw_entry **pp = &m->fw; *pp; pp = &(*pp)->tnext)
        if (*pp == e) { *pp = e->tnext; break; }
    e->tnext = NULL;
}

void ct__fw_meta_free(ct_ag_meta *m) {
    ct_fw_entry *e = m->fw;
    m->fw = NULL;
    while (e) {
        ct_fw_entry *nx = e->tnext;
        level_unlink(e);
        ct_tensor *tg = e->tangent;
        free(e);
        ct_release(tg);
        e = nx;
    }
}

static ct_fw_entry *entry_at(const ct_tensor *t, int level) {
    const ct_ag_meta *m = ct__ag_peek(t);
    for (ct_fw_entry *e = m ? m->fw : NULL; e; e = e->tnext)
        if (e->level == level) return e;
    return NULL;
}

static bool visible(int level) {
    return level >= 0 && level < ct__fw_nlevels && !(ct__fw_hidden & (1u << level));
}

static ct_status fw_add(ct_tensor *t, int level, ct_tensor *tangent);

/* Sets (or replaces; NULL removes) t's tangent at level, retaining it. */
static ct_status fw_set(ct_tensor *t, int level, ct_tensor *tangent) {
    ct_fw_entry *e = entry_at(t, level);
    if (!tangent) {
        if (e) {
            level_unlink(e);
            owner_unlink(e);
            ct_release(e->tangent);
            free(e);
        }
        return CT_OK;
    }
    if (e) {
        ct_retain(tangent);
        ct_release(e->tangent);
        e->tangent = tangent;
        return CT_OK;
    }
    return fw_add(t, level, tangent);
}

/* A new entry (tangent NULL: t has explicitly no tangent at level, even
 * when its base has one: the primal of unpack_dual). */
static ct_status fw_add(ct_tensor *t, int level, ct_tensor *tangent) {
    ct_fw_entry *e;
    ct_ag_meta *m = ct__ag_meta(t);
    if (!m) return CT_ERR_OOM;
    e = calloc(1, sizeof *e);
    if (!e) return ct__error_status(CT_ERR_OOM, "forward AD: out of memory");
    e->owner = t;
    e->tangent = ct_retain(tangent);
    e->level = level;
    e->tnext = m->fw;
    m->fw = e;
    e->lnext = tl_level_head[level];
    if (e->lnext) e->lnext->lprev = e;
    tl_level_head[level] = e;
    return CT_OK;
}

static bool same_meta(const ct_tensor *a, const ct_tensor *b) {
    if (a->ndim != b->ndim || a->offset != b->offset || a->dtype != b->dtype ||
        a->storage->nbytes != b->storage->nbytes)
        return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != b->sizes[d] || (a->sizes[d] > 1 && a->strides[d] != b->strides[d])) return false;
    return true;
}

/* Level hidden while f runs (ops inside do not propagate at it). */
#define HIDE(level) unsigned hide_prev_ = ct__fw_hidden; ct__fw_hidden |= 1u << (level)
#define UNHIDE() ct__fw_hidden = hide_prev_

/* A tensor laid out like `like` (its sizes, strides and offset over a
 * storage of its size) holding v's values: torch's rule for tangents, so
 * that a view of the tangent (as_strided included) is the tangent of the
 * view.  Scope-owned; runs with the level hidden by the caller. */
ct_tensor *ct__fw_like_meta(ct_tensor *v, ct_tensor *like) {
    if (!v || !like) return NULL;
    if (same_meta(v, like)) return v;
    size_t es = ct_dtype_size(like->dtype);
    int64_t n = (int64_t)(like->storage->nbytes / es);
    ct_tensor *flat = ct_zeros_on(CT_SHAPE(n), like->dtype, like->storage->device);
    ct_tensor *r = ct_as_strided(flat, like->sizes, like->strides, like->ndim, like->offset);
    if (!r || !ct_copy_(r, v)) return NULL;
    return r;
}

/* t's tangent at level (borrowed), or NULL: none, or the level hidden or
 * inactive.  A view made under grad mode whose base has a tangent gets
 * the same view of the base's tangent. */
ct_tensor *ct__fw_get(ct_tensor *t, int level) {
    if (!t || !visible(level)) return NULL;
    ct_fw_entry *e = entry_at(t, level);
    if (e) return e->tangent;
    ct_ag_meta *m = ct__ag_peek(t);
    if (!m || !m->base || m->base == t) return NULL;
    ct_tensor *base = m->base;
    ct_fw_entry *be = entry_at(base, level);
    if (!be || !be->tangent) return NULL;
    ct_tensor *tv = NULL;
    ct_scope s = ct_scope_begin();
    {
        HIDE(level);
        ct_tensor *bt = be->tangent;
        if (!same_meta(bt, base)) {
            bt = ct__fw_like_meta(bt, base);
            if (bt && fw_set(base, level, bt)) bt = NULL;
        }
        if (bt) tv = ct_as_strided(bt, t->sizes, t->strides, t->ndim, t->offset);
        if (tv && fw_set(t, level, tv)) tv = NULL;
        UNHIDE();
    }
    ct_scope_end(s);
    e = entry_at(t, level);
    return tv && e ? e->tangent : NULL;
}

/* dst (an alias of src's value: a tensor autograd saves) shares src's
 * tangents at every level, so a backward pass reading it propagates them
 * (forward over reverse). */
ct_status ct__fw_copy(ct_tensor *dst, ct_tensor *src) {
    const ct_ag_meta *m = ct__ag_peek(src);
    for (const ct_fw_entry *e = m ? m->fw : NULL; e; e = e->tnext)
        if (e->tangent && fw_set(dst, e->level, e->tangent)) return CT_ERR_OOM;
    return CT_OK;
}

bool ct__fw_any(ct_tensor *const *ts, int n) {
    for (int k = 0; k < n; k++) {
        const ct_tensor *t = ts[k];
        const ct_ag_meta *m = t ? ct__ag_peek(t) : NULL;
        if (!m) continue;
        for (const ct_fw_entry *e = m->fw; e; e = e->tnext)
            if (e->tangent && visible(e->level)) return true;
        if (m->base && m->base != t) {
            const ct_ag_meta *bm = ct__ag_peek(m->base);
            for (const ct_fw_entry *e = bm ? bm->fw : NULL; e; e = e->tnext)
                if (e->tangent && visible(e->level) && !entry_at(t, e->level)) return true;
        }
    }
    return false;
}

/* ---- levels ------------------------------------------------------------------ */
int ct_fwad_enter_dual_level(void) {
    if (ct__fw_nlevels >= FW_MAX_LEVELS) {
        ct__error(CT_ERR_RUNTIME, "enter_dual_level: at most %d nested dual levels", FW_MAX_LEVELS);
        return -1;
    }
    int l = ct__fw_nlevels++;
    tl_level_head[l] = NULL;
    ct__fw_hidden &= ~(1u << l);
    return l;
}

ct_status ct_fwad_exit_dual_level(int level) {
    if (level < 0 || level >= ct__fw_nlevels)
        return ct__error_status(CT_ERR_RUNTIME, "exit_dual_level: level %d is not an active dual level "
                                "(%d active)", level, ct__fw_nlevels);
    if (level != ct__fw_nlevels - 1)
        return ct__error_status(CT_ERR_RUNTIME, "exit_dual_level: Trying to exit a forward AD level that "
                                "was not the last one that was created. This is not supported.");
    /* drop the level's tangents; freeing one may free tensors holding
     * entries of other levels, never of this one (it is emptied first) */
    while (tl_level_head[level]) {
        ct_fw_entry *e = tl_level_head[level];
        level_unlink(e);
        owner_unlink(e);
        ct_tensor *tg = e->tangent;
        free(e);
        ct_release(tg);
    }
    ct__fw_nlevels--;
    ct__fw_hidden &= ~(1u << level);
    return CT_OK;
}

/* ---- make_dual / unpack_dual --------------------------------------------------- */
/* A new handle on t (a view op autograd records, so gradients reach t),
 * with level hidden: it gets no tangent at level from t. */
static ct_tensor *alias_hidden(ct_tensor *t, int level) {
    HIDE(level);
    ct_tensor *r = ct_expand(t, t->sizes, t->ndim);
    UNHIDE();
    if (r && fw_add(r, level, NULL)) return NULL; /* not the base's tangent either */
    return r;
}

ct_tensor *ct_fwad_make_dual(ct_tensor *primal, ct_tensor *tangent, int level) {
    CT_NULLCHECK(primal);
    CT_NULLCHECK(tangent);
    if (ct__fw_nlevels == 0)
        return ct__error(CT_ERR_RUNTIME, "make_dual: Trying to create a dual Tensor for forward AD but "
                         "no level exists, make sure to enter_dual_level() first.");
    if (level < 0 || level >= ct__fw_nlevels)
        return ct__error(CT_ERR_RUNTIME, "make_dual: level %d is not an active dual level (%d active)",
                         level, ct__fw_nlevels);
    if (!differentiable(primal->dtype))
        return ct__error(CT_ERR_DTYPE, "make_dual: Expected primal to be floating point or complex, but got: %s",
                         ct_dtype_name(primal->dtype));
    if (!differentiable(tangent->dtype))
        return ct__error(CT_ERR_DTYPE, "make_dual: Expected tangent to be floating point or complex, but got: %s",
                         ct_dtype_name(tangent->dtype));
    if (primal->ndim != tangent->ndim ||
        memcmp(primal->sizes, tangent->sizes, sizeof(int64_t) * (size_t)primal->ndim)) {
        char a[256], b[256];
        return ct__error(CT_ERR_SHAPE, "make_dual: Trying to set a forward gradient that has a different "
                         "size than that of the original Tensor, this is not supported. Tensor is of size "
                         "%s while the given forward gradient is of size %s.",
                         ct__shape_str(primal->sizes, primal->ndim, a, sizeof a),
                         ct__shape_str(tangent->sizes, tangent->ndim, b, sizeof b));
    }
    if (primal->storage->device != tangent->storage->device)
        return ct__error(CT_ERR_DEVICE, "make_dual: Expected primal and tangent to be on the same device, "
                         "but got %s and %s", ct_device_name(primal->storage->device),
                         ct_device_name(tangent->storage->device));
    if (entry_at(primal, level))
        return ct__error(CT_ERR_RUNTIME, "make_dual: Making a dual Tensor based on a Tensor that already "
                         "has a forward gradient at the same level %d is not supported.", level);
    ct_tensor *d = alias_hidden(primal, level);
    if (!d) return NULL;
    ct_tensor *tg;
    {
        /* another floating dtype is converted to the primal's (torch keeps
         * it; ctorch's tangents always have their primal's dtype) */
        HIDE(level);
        tg = ct__fw_like_meta(ct_to_dtype(tangent, primal->dtype), d);
        UNHIDE();
    }
    if (!tg || fw_set(d, level, tg)) return NULL;
    return d;
}

ct_status ct_fwad_unpack_dual(ct_tensor *t, int level, ct_tensor **primal, ct_tensor **tangent) {
    if (primal) *primal = NULL;
    if (tangent) *tangent = NULL;
    CT_NULLCHECK_S(t);
    if (level < 0 || level >= ct__fw_nlevels) {
        /* torch: no such level, the tensor itself and no tangent */
        if (primal) *primal = ct__register(ct_retain(t));
        return CT_OK;
    }
    ct_tensor *tg = ct__fw_get(t, level);
    if (tangent && tg) *tangent = ct__register(ct_retain(tg));
    if (primal) {
        *primal = tg ? alias_hidden(t, level) : ct__register(ct_retain(t));
        if (!*primal) {
            if (tangent && *tangent) *tangent = NULL;
            return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        }
    }
    return CT_OK;
}

int ct_fwad_current_level(void) { return ct__fw_nlevels - 1; }

/* ---- propagation through table ops ---------------------------------------------- */
/* out's tangent from the rule's result r: out's shape (broadcast where the
 * rule left a broadcastable one) and dtype */
static ct_tensor *fit_tangent(ct_tensor *r, ct_tensor *out, const char *opname) {
    if (r->dtype != out->dtype) r = ct_to_dtype(r, out->dtype);
    if (!r) return NULL;
    if (r->ndim != out->ndim || memcmp(r->sizes, out->sizes, sizeof(int64_t) * (size_t)out->ndim)) {
        ct_tensor *e = ct_expand(r, out->sizes, out->ndim);
        if (!e)
            return ct__error(CT_ERR_RUNTIME, "%s: forward AD rule gave a tangent of shape %s for an output "
                             "of shape %s", opname, ct__tshape(r), ct__tshape(out));
        r = e;
    }
    return r;
}

static bool no_tangent_op(ct_op op) {
    const ct_op_info *oi = &ct__op_info[op];
    return (oi->flags & CT_OPF_NODIFF) || oi->vjp == (void *)ct__vjp_none;
}

/* The tangents of out[0..nout) at level from tin (inputs' tangents),
 * written to tout[0..nout) (NULL: zero).  The level is hidden meanwhile. */
static ct_status fw_compute(ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                            const ct_args *a, ct_tensor *const *tin, int level, ct_tensor **tout) {
    const ct_op_info *oi = &ct__op_info[op];
    for (int j = 0; j < nout; j++) tout[j] = NULL;
    if (no_tangent_op(op)) return CT_OK;
    if (!oi->jvp)
        return ct__error_status(CT_ERR_AUTOGRAD, "%s: forward-mode AD is not implemented for this op (it "
                                "has no jvp rule); its input has a tangent at level %d", oi->name, level);
    ct_args local;
    if (!a) { local = ct__args(op); a = &local; }
    ct_jvp_ctx c = {op, in, nin, out, nout, a, level};
    ct_status st;
    {
        HIDE(level);
        st = ((ct_jvp_fn)oi->jvp)(&c, tin, tout);
        for (int j = 0; st == CT_OK && j < nout; j++) {
            if (!tout[j]) continue;
            if (!out[j] || !differentiable(out[j]->dtype)) { tout[j] = NULL; continue; }
            if (!(tout[j] = fit_tangent(tout[j], out[j], oi->name))) { st = ct_last_error_code(); break; }
            /* a fresh output (not a view) gets a tangent of its own: a rule
             * may return an input's tangent itself (identity-like formulas),
             * and an in-place op on the output must not write through it */
            if (!(oi->flags & CT_OPF_VIEW))
                for (int k = 0; k < nin; k++)
                    if (tin[k] && tin[k]->storage == tout[j]->storage) {
                        if (!(tout[j] = ct_clone(tout[j]))) st = ct_last_error_code();
                        break;
                    }
        }
        UNHIDE();
    }
    if (st) {
        for (int j = 0; j < nout; j++) tout[j] = NULL;
        return ct_last_error_code() ? ct_last_error_code() : st;
    }
    return CT_OK;
}

/* tin[k]: input k's tangent at level (NULL: none; the last input skipped
 * when skip_last); whether any input has one */
static bool gather_tangents(ct_tensor *const *in, int nin, int level, bool skip_last, ct_tensor **tin) {
    bool any = false;
    for (int k = 0; k < nin; k++) {
        tin[k] = in[k] && !(skip_last && k == nin - 1) ? ct__fw_get(in[k], level) : NULL;
        any = any || tin[k];
    }
    return any;
}

ct_status ct__fw_op(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    if (no_tangent_op(op)) return CT_OK;
    ct_tensor *tin_local[16], **tin = tin_local, *tout[8];
    if (nout > 8) return ct__error_status(CT_ERR_RUNTIME, "%s: forward AD: too many outputs", ct__op_info[op].name);
    if (nin > 16 && !(tin = malloc(sizeof *tin * (size_t)nin)))
        return ct__error_status(CT_ERR_OOM, "forward AD: out of memory");
    ct_status st = CT_OK;
    for (int level = 0; st == CT_OK && level < ct__fw_nlevels; level++) {
        if (!visible(level) || !gather_tangents(in, nin, level, false, tin)) continue;
        st = fw_compute(op, out, nout, in, nin, a, tin, level, tout);
        for (int j = 0; st == CT_OK && j < nout; j++)
            if (out[j] && tout[j]) st = fw_set(out[j], level, tout[j]);
    }
    if (tin != tin_local) free(tin);
    return st;
}

/* In-place op: t was written; in[0..nin) are its inputs with t's old value
 * standing for t (its tangent the old tangent); `appended` when that old
 * value was appended as a last input the op does not read (copy_, fill_). */
ct_status ct__fw_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin, const ct_args *a,
                         bool appended) {
    ct_tensor *tin_local[16], **tin = tin_local, *tout[1];
    if (nin > 16 && !(tin = malloc(sizeof *tin * (size_t)nin)))
        return ct__error_status(CT_ERR_OOM, "forward AD: out of memory");
    ct_status st = CT_OK;
    for (int level = 0; st == CT_OK && level < ct__fw_nlevels; level++) {
        if (!visible(level)) continue;
        bool any = gather_tangents(in, nin, level, appended, tin);
        ct_tensor *tt = ct__fw_get(t, level);
        if (!any && !tt) continue;
        ct_tensor *outs[1] = {t};
        tout[0] = NULL;
        if (any && (st = fw_compute(op, outs, 1, in, nin, a, tin, level, tout))) break;
        if (!differentiable(t->dtype)) continue;
        HIDE(level);
        if (!tout[0]) {
            /* the new value does not depend on any tangent: zero */
            if (tt && !ct_fill_(tt, 0.0)) st = ct_last_error_code();
        } else if (tt) {
            if (!ct_copy_(tt, tout[0])) st = ct_last_error_code();
        } else {
            ct_ag_meta *m = ct__ag_peek(t);
            ct_tensor *base = m && m->base && m->base != t ? m->base : NULL;
            if (base && differentiable(base->dtype)) {
                /* a view without a tangent: its base gets a zero one, the view
                 * that view of it, and the region the new tangent */
                ct_tensor *bt = ct__fw_like_meta(ct_zeros_like(base), base);
                ct_tensor *tv = bt ? ct_as_strided(bt, t->sizes, t->strides, t->ndim, t->offset) : NULL;
                if (!tv || fw_set(base, level, bt) || fw_set(t, level, tv) || !ct_copy_(tv, tout[0]))
                    st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
            } else {
                ct_tensor *v = ct__fw_like_meta(tout[0], t);
                if (!v || fw_set(t, level, v)) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
            }
        }
        UNHIDE();
    }
    if (tin != tin_local) free(tin);
    return st;
}

/* ---- the double-vjp rule ------------------------------------------------------------ */
/* J t = d/du <vjp(u), t>: the op is recorded once more (a node from the
 * same inputs to aliases of its outputs), its VJP run with u (zeros that
 * require grad) under create_graph, and the result differentiated with
 * respect to u along t.  Exact for every op whose VJP is differentiable in
 * its incoming gradient (all of them: the VJPs are linear in it and written
 * with public ops); costs two backward passes through the op's node. */
CT_JVP_RULE(ct__jvp_dvjp) {
    int nin = c->nin, nout = c->nout;
    if (ct_is_inference_mode())
        return ct__error_status(CT_ERR_AUTOGRAD, "%s: forward AD through its VJP is not available in "
                                "inference mode", ct__op_info[c->op].name);
    bool outer_grad = ct_is_grad_enabled();
    bool prev = ct_set_grad_enabled(true);
    ct_status st = CT_OK;
    ct_tensor **xin = calloc((size_t)nin + 1, sizeof *xin), **own = calloc((size_t)nin + 1, sizeof *own);
    ct_tensor *oal[8] = {0}, *u[8] = {0}, *oo[8], *uu[8], *res[8] = {0};
    ct_tensor **xs = calloc((size_t)nin + 1, sizeof *xs), **ts = calloc((size_t)nin + 1, sizeof *ts);
    ct_tensor **g = calloc((size_t)nin + 1, sizeof *g);
    int nx = 0, no = 0;
    int oidx[8];
    if (!xin || !own || !xs || !ts || !g) { st = ct__error_status(CT_ERR_OOM, "forward AD: out of memory"); goto done; }
    for (int k = 0; k < nin; k++) {
        ct_tensor *x = c->in[k];
        xin[k] = x;
        if (!x || !tin[k]) continue;
        if (!ct_requires_grad(x) || !outer_grad) {
            /* an alias that requires grad (the primal's history is not needed) */
            own[k] = ct__view_of(x, x->sizes, x->strides, x->ndim, x->offset);
            if (!own[k] || ct_set_requires_grad(own[k], true)) { st = ct_last_error_code(); goto done; }
            xin[k] = own[k];
        }
        xs[nx] = xin[k];
        ts[nx++] = tin[k];
    }
    for (int j = 0; j < nout; j++) {
        ct_tensor *o = c->out[j];
        if (!o) continue;
        oal[j] = ct__view_of(o, o->sizes, o->strides, o->ndim, o->offset);
        if (!oal[j]) { st = CT_ERR_OOM; goto done; }
    }
    if ((st = ct__ag_record(c->op, oal, nout, xin, nin, c->a))) goto done;
    for (int j = 0; j < nout; j++) {
        if (!oal[j] || !differentiable(oal[j]->dtype) || !ct_requires_grad(oal[j])) continue;
        /* the VJP is linear in u: any value gives the same derivative;
         * ones keep formulas that take log|g| (logcumsumexp) finite */
        u[j] = ct_ones_like(oal[j]);
        if (!u[j] || ct_set_requires_grad(u[j], true)) { st = ct_last_error_code(); goto done; }
        oidx[no] = j;
        oo[no] = oal[j];
        uu[no++] = u[j];
    }
    if (!no || !nx) goto done;
    if ((st = ct_autograd_grad(oo, no, xs, nx, uu, false, true, true, g))) goto done;
    {
        /* d/du sum_k <g_k, t_k> */
        ct_tensor *gs[64], *tg[64];
        int ng = 0;
        for (int k = 0; k < nx && ng < 64; k++) {
            if (!g[k] || !ct_requires_grad(g[k])) continue;
            gs[ng] = g[k];
            tg[ng++] = ct_to_dtype(ts[k], g[k]->dtype);
            if (!tg[ng - 1]) { st = ct_last_error_code(); goto done; }
        }
        if (!ng) goto done;
        if ((st = ct_autograd_grad(gs, ng, uu, no, tg, false, outer_grad, true, res))) goto done;
        for (int i = 0; i < no; i++) tout[oidx[i]] = res[i];
    }
done:
    ct_set_grad_enabled(prev);
    for (int k = 0; own && k < nin; k++) ct_release(own[k]);
    for (int j = 0; j < nout; j++) ct_release(oal[j]);
    free(xin); free(own); free(xs); free(ts); free(g);
    if (st) return ct_last_error_code() ? ct_last_error_code() : st;
    return CT_OK;
}

/* ---- custom functions ------------------------------------------------------------ */
/* Tangents of a custom function's outputs (function.c calls it after the
 * forward, before the node is recorded): the definition's jvp, else the
 * double-vjp trick on its backward (which must then be differentiable). */
ct_status ct__fw_function(const ct_function_def *def, struct ct_function_ctx *ctx, ct_tensor *const *in,
                          int nin, ct_tensor **out) {
    extern ct_status ct__function_backward_raw(const ct_function_def *def, struct ct_function_ctx *ctx,
                                               ct_tensor *const *outs, ct_tensor **gout, ct_tensor **gin);
    int nout = def->noutputs;
    const char *name = def->name ? def->name : "Function";
    ct_tensor *tin_local[16], **tin = tin_local, *tout[8];
    if (nout > 8) return ct__error_status(CT_ERR_RUNTIME, "%s: forward AD: too many outputs", name);
    if (nin > 16 && !(tin = malloc(sizeof *tin * (size_t)nin)))
        return ct__error_status(CT_ERR_OOM, "forward AD: out of memory");
    ct_status st = CT_OK;
    for (int level = 0; st == CT_OK && level < ct__fw_nlevels; level++) {
        if (!visible(level)) continue;
        bool any = false;
        for (int k = 0; k < nin; k++) {
            tin[k] = ct__fw_get(in[k], level);
            any = any || tin[k];
        }
        if (!any) continue;
        for (int j = 0; j < nout; j++) tout[j] = NULL;
        HIDE(level);
        if (def->jvp) {
            st = def->jvp(ctx, tin, tout);
        } else {
            /* double vjp through the backward */
            bool prev = ct_set_grad_enabled(true);
            ct_tensor *u[8] = {0}, *gin_local[16] = {0}, **gin = gin_local, *res[8] = {0};
            if (nin > 16 && !(gin = calloc((size_t)nin, sizeof *gin))) st = CT_ERR_OOM;
            for (int j = 0; st == CT_OK && j < nout; j++) {
                u[j] = ct_ones_like(out[j]);
                if (!u[j] || (differentiable(out[j]->dtype) && ct_set_requires_grad(u[j], true)))
                    st = ct_last_error_code();
            }
            if (st == CT_OK) st = ct__function_backward_raw(def, ctx, out, u, gin);
            ct_tensor *gs[64], *tg[64];
            int ng = 0;
            for (int k = 0; st == CT_OK && k < nin && ng < 64; k++) {
                if (!tin[k] || !gin[k]) continue;
                if (!ct_requires_grad(gin[k])) {
                    st = ct__error_status(CT_ERR_AUTOGRAD, "%s: forward AD needs a jvp, or a backward that is "
                                          "differentiable (written with ops under grad mode); its gradient "
                                          "for input %d does not depend on the output gradients", name, k);
                    break;
                }
                gs[ng] = gin[k];
                tg[ng++] = ct_to_dtype(tin[k], gin[k]->dtype);
            }
            ct_tensor *uu[8];
            int idx[8], nu = 0;
            for (int j = 0; j < nout; j++)
                if (ct_requires_grad(u[j])) { idx[nu] = j; uu[nu++] = u[j]; }
            if (st == CT_OK && ng && nu) st = ct_autograd_grad(gs, ng, uu, nu, tg, false, prev, true, res);
            for (int i = 0; st == CT_OK && i < nu; i++) tout[idx[i]] = res[i];
            if (gin != gin_local) free(gin);
            ct_set_grad_enabled(prev);
        }
        for (int j = 0; st == CT_OK && j < nout; j++) {
            if (!tout[j]) continue;
            if (!differentiable(out[j]->dtype)) { tout[j] = NULL; continue; }
            if (!(tout[j] = fit_tangent(tout[j], out[j], name))) st = ct_last_error_code();
        }
        UNHIDE();
        for (int j = 0; st == CT_OK && j < nout; j++)
            if (tout[j]) st = fw_set(out[j], level, tout[j]);
    }
    if (tin != tin_local) free(tin);
    if (st) return ct_last_error_code() ? ct_last_error_code() : st;
    return CT_OK;
}

/* All active levels hidden (a custom function's forward sees plain
 * tensors); returns the previous mask for ct__fw_unhide_all. */
unsigned ct__fw_hide_all(void) {
    unsigned prev = ct__fw_hidden;
    ct__fw_hidden = ~0u;
    return prev;
}
void ct__fw_unhide_all(unsigned prev) { ct__fw_hidden = prev; }
