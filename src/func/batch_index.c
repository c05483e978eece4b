/* batch_index.c -- batching rules of the scatter and index_* families,
 * take, masked_scatter, the einsum-shaped products (einsum, tensordot,
 * bilinear), kron, cross, cdist, trace, and the resampling ops
 * (interpolate, im2col, col2im) -- the op table's vmap column.
 *
 * Scatters: with every operand at [B, ...] the batch is one more dim that
 * scatter leaves alone (index and src have size B there, as x does), so
 * dim + 1 does it; index_* with a batched index become the scatter of the
 * same update (the index spread along its dim).  Einsum: the batch is one
 * more subscript letter on each batched operand and on the result, and
 * tensordot and bilinear are einsums. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "func_impl.h"
#include "../ops/meta.h"

static const char *const k_reduce[] = {"none", "sum", "prod", "mean", "amax", "amin"};

static ct_status done1(ct_bval *out, ct_tensor *y) {
    if (!y) return ct__bv_status();
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* index [n] (per sample) spread along dim to the shape `like` has, sizes
 * of `like` elsewhere: [B, 1.., n, 1..] expanded */
static ct_tensor *spread_index(ct_bval idx, int64_t B, int64_t dim, const ct_tensor *like) {
    ct_tensor *i = ct__bv_full(idx, B); /* [B, n] */
    if (!i) return NULL;
    int nd = like->ndim; /* B + per-sample dims */
    int64_t sh[CT_MAX_DIMS], ex[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        sh[d] = 1;
        ex[d] = like->sizes[d];
    }
    sh[0] = B;
    sh[dim + 1] = i->sizes[1];
    ex[dim + 1] = i->sizes[1];
    return ct_expand(ct_reshape(i, sh, nd), ex, nd);
}

/* scatter, scatter_add, scatter_reduce (x, index, [src]) */
CT_VMAP_RULE(ct__vmap_scatter) {
    const ct_gnode *n = c->n;
    const ct_p_index *p = &n->args.p.index;
    if (ct__bv_ndim(in[0]) == 0) {
        c->fallback = true;
        return CT_OK;
    }
    int64_t dim = p->dim + 1;
    ct_tensor *x = ct__bv_full(in[0], c->B), *i = ct__bv_full(in[1], c->B);
    ct_tensor *s = n->nin > 2 && in[2].t ? ct__bv_full(in[2], c->B) : NULL;
    if (!x || !i || (n->nin > 2 && in[2].t && !s)) return ct__bv_status();
    ct_tensor *y;
    if (!s) y = ct_scatter_value(x, dim, i, p->value);
    else if (n->op == CT_OP_scatter || p->reduce == 0) y = ct_scatter(x, dim, i, s);
    else if (n->op == CT_OP_scatter_add) y = ct_scatter_add(x, dim, i, s);
    else if (p->reduce < 1 || p->reduce > 5) return ct__bv_error(c, CT_ERR_ARG, "unknown reduction %lld", (long long)p->reduce);
    else y = ct_scatter_reduce(x, dim, i, s, k_reduce[p->reduce], p->include_self);
    return c->dst ? ct__bv_write(c, y, out) : done1(out, y);
}

/* index_add, index_copy (x, index, src), index_fill (x, index) along dim */
CT_VMAP_RULE(ct__vmap_index_along) {
    const ct_gnode *n = c->n;
    const ct_p_index *p = &n->args.p.index;
    if (ct__bv_ndim(in[0]) == 0 || ct__bv_ndim(in[1]) != 1) {
        c->fallback = true;
        return CT_OK;
    }
    int64_t dim = p->dim + 1;
    ct_tensor *x = ct__bv_full(in[0], c->B);
    ct_tensor *s = n->nin > 2 ? ct__bv_full(in[2], c->B) : NULL;
    if (!x || (n->nin > 2 && !s)) return ct__bv_status();
    if (in[1].bdim < 0) {
        ct_tensor *i = in[1].t, *y;
        if (n->op == CT_OP_index_add) y = ct_index_add(x, dim, i, s, p->alpha);
        else if (n->op == CT_OP_index_copy) y = ct_index_copy(x, dim, i, s);
        else y = ct_index_fill(x, dim, i, p->value);
        return c->dst ? ct__bv_write(c, y, out) : done1(out, y);
    }
    /* each sample its own index: the same update as a scatter (index_fill's
     * negative indices wrapped first, as it takes them) */
    ct_bval iv = in[1];
    if (n->op == CT_OP_index_fill) {
        ct_tensor *it = iv.t, *sz = ct_scalar((double)x->sizes[dim], CT_I64);
        ct_tensor *neg = sz ? ct_lt(it, ct_scalar(0, CT_I64)) : NULL;
        if (!neg || !(iv.t = ct_where(neg, ct_add(it, sz), it))) return ct__bv_status();
    }
    ct_tensor *i = spread_index(iv, c->B, p->dim, s ? s : x);
    if (!i) return ct__bv_status();
    if (n->op == CT_OP_index_fill) {
        int64_t sh[CT_MAX_DIMS];
        memcpy(sh, x->sizes, sizeof(int64_t) * (size_t)x->ndim);
        sh[dim] = i->sizes[dim];
        if (!(i = ct_expand(i, sh, x->ndim))) return ct__bv_status();
        ct_tensor *y = ct_scatter_value(x, dim, ct_contiguous(i), p->value);
        return c->dst ? ct__bv_write(c, y, out) : done1(out, y);
    }
    ct_tensor *y;
    if (n->op == CT_OP_index_copy) {
        y = ct_scatter(x, dim, ct_contiguous(i), s);
    } else {
        if (p->alpha != 1 && !(s = ct_mul_scalar(s, p->alpha))) return ct__bv_status();
        y = ct_scatter_add(x, dim, ct_contiguous(i), s);
    }
    return c->dst ? ct__bv_write(c, y, out) : done1(out, y);
}

/* index: take (linear indices) batches as a gather over each sample's
 * flattened values; advanced indexing runs per sample */
/* x[i0, i1, ...] (NULL entries: full slices).  Unbatched indices: a full
 * slice for the batch dim in front of them.  Batched indices: every index
 * at [B, 1.., ...] (a common rank), with arange(B) as the batch dim's index.
 * Advanced-indexing dims land where the sample's would (after its leading
 * slices when its indices are adjacent, else first): a permutation puts
 * the batch dim first when they differ. */
static ct_status advanced_index(ct_vmap_call *c, const ct_bval *in, ct_bval *out) {
    const ct_gnode *n = c->n;
    int ni = n->nin - 1, xnd = ct__bv_ndim(in[0]);
    if (ni + 1 > 32) {
        c->fallback = true;
        return CT_OK;
    }
    bool ib = false;
    int first = -1, last = -1, nadv = 0, r = 0;
    for (int k = 0; k < ni; k++) {
        ct_bval v = in[1 + k];
        if (!v.t) continue;
        if (v.t->dtype == CT_BOOL || v.t->dtype == CT_U8) {
            c->fallback = true; /* a mask: data-dependent (the trace breaks before) */
            return CT_OK;
        }
        ib = ib || v.bdim >= 0;
        if (first < 0) first = k;
        last = k;
        nadv++;
        if (ct__bv_ndim(v) > r) r = ct__bv_ndim(v);
    }
    if (nadv == 0) {
        c->fallback = true;
        return CT_OK;
    }
    bool adjacent = last - first + 1 == nadv;
    ct_tensor *idx[33];
    ct_tensor *x;
    int adv_nd = ct__bv_out_meta(c, 0)->ndim - (xnd - nadv);
    if (!ib) {
        if (!(x = ct__bv_front(in[0]))) return ct__bv_status();
        idx[0] = NULL;
        for (int k = 0; k < ni; k++) idx[1 + k] = in[1 + k].t;
        ct_tensor *y = ct_index(x, idx, ni + 1);
        if (!y) return ct__bv_status();
        /* the result: [B, ...] when adjacent, else [adv..., B, ...] */
        out[0] = (ct_bval){y, adjacent ? 0 : adv_nd};
        return CT_OK;
    }
    if (!(x = ct__bv_full(in[0], c->B))) return ct__bv_status();
    int64_t sh[CT_MAX_DIMS];
    sh[0] = c->B;
    for (int d = 1; d <= r; d++) sh[d] = 1;
    ct_tensor *ar = ct_arange(0, (double)c->B, 1, CT_I64);
    if (!ar || !(idx[0] = ct_reshape(ar, sh, r + 1))) return ct__bv_status();
    for (int k = 0; k < ni; k++) {
        ct_bval v = in[1 + k];
        idx[1 + k] = v.t ? ct__bv_align(v, r) : NULL;
        if (v.t && !idx[1 + k]) return ct__bv_status();
    }
    ct_tensor *y = ct_index(x, idx, ni + 1);
    if (!y) return ct__bv_status();
    /* physical: the batch index is first and adjacent to the sample's first
     * index only when that one is x's first dim: [B, adv..., rest] then */
    bool phys_adjacent = adjacent && first == 0;
    if (!phys_adjacent) {
        /* [B + adv dims (broadcast with B: r + 1 dims, B first), slices...] */
    }
    if (adjacent && first > 0) {
        /* the sample's result is [lead slices (first), adv (adv_nd), trail]; ours is
         * [B, adv, lead, trail]: move the leading slices before the adv dims */
        int64_t perm[CT_MAX_DIMS];
        int p = 0, tot = y->ndim;
        perm[p++] = 0;
        for (int d = 0; d < first; d++) perm[p++] = 1 + adv_nd + d;
        for (int d = 0; d < adv_nd; d++) perm[p++] = 1 + d;
        for (int d = 1 + adv_nd + first; d < tot; d++) perm[p++] = d;
        if (!(y = ct_permute(y, perm, tot))) return ct__bv_status();
    }
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

CT_VMAP_RULE(ct__vmap_index) {
    const ct_gnode *n = c->n;
    if (c->dst) {
        c->fallback = true;
        return CT_OK;
    }
    if (!n->args.p.index.take) return advanced_index(c, in, out);
    if (n->nin != 2) {
        c->fallback = true;
        return CT_OK;
    }
    int64_t B = c->B;
    ct_tensor *x = ct__bv_full(in[0], B), *i = ct__bv_full(in[1], B);
    if (!x || !i) return ct__bv_status();
    int64_t per = 1, ni = 1;
    for (int d = 1; d < x->ndim; d++) per *= x->sizes[d];
    for (int d = 1; d < i->ndim; d++) ni *= i->sizes[d];
    if (per == 0 || ni == 0) {
        c->fallback = true; /* nothing to take from (or nothing taken): take's own checks */
        return CT_OK;
    }
    ct_tensor *xf = ct_reshape(x, (int64_t[]){B, per}, 2), *idx = ct_reshape(i, (int64_t[]){B, ni}, 2);
    if (!xf || !idx) return ct__bv_status();
    /* take's bounds check (and negative indices) on the whole batch at once */
    ct_tensor *lo = ct_lt(idx, ct_scalar(-(double)per, CT_I64));
    ct_tensor *hi = ct_ge(idx, ct_scalar((double)per, CT_I64));
    if (!lo || !hi) return ct__bv_status();
    if (ct_item(ct_any(ct_logical_or(lo, hi), NULL, 0, false)) != 0)
        return ct__bv_error(c, CT_ERR_INDEX, "take: an index is out of bounds for a sample of %lld elements",
                            (long long)per);
    ct_tensor *neg = ct_lt(idx, ct_scalar(0, CT_I64));
    idx = neg ? ct_where(neg, ct_add(idx, ct_scalar((double)per, CT_I64)), idx) : NULL;
    ct_tensor *y = idx ? ct_gather(xf, 1, idx) : NULL;
    return done1(out, y ? ct_reshape(y, i->sizes, i->ndim) : NULL);
}

/* masked_scatter(x, mask, source): each sample takes its source's elements
 * in order at its true positions -- position k of a sample reads source
 * element (number of true positions before k) of that sample */
CT_VMAP_RULE(ct__vmap_masked_scatter) {
    const ct_gnode *n = c->n;
    if (n->nin != 3 || c->dst) {
        c->fallback = true;
        return CT_OK;
    }
    int64_t B = c->B;
    int r = ct__bv_ndim(in[0]);
    ct_tensor *x = ct__bv_full(in[0], B);
    ct_tensor *m = x ? ct__bv_align(in[1], r) : NULL;
    if (m && in[1].bdim < 0 && ct__bv_ndim(in[1]) <= r) m = ct__bv_full((ct_bval){m, -1}, B);
    if (!x || !m || !(m = ct_contiguous(ct_expand(m, x->sizes, x->ndim)))) return ct__bv_status();
    ct_tensor *s = ct__bv_full(in[2], B);
    if (!s) return ct__bv_status();
    int64_t per = 1, ns = 1;
    for (int d = 1; d < x->ndim; d++) per *= x->sizes[d];
    for (int d = 1; d < s->ndim; d++) ns *= s->sizes[d];
    ct_tensor *mf = ct_reshape(m, (int64_t[]){B, per}, 2);
    ct_tensor *cnt = mf ? ct_sum(mf, (int64_t[]){1}, 1, false) : NULL;
    if (!cnt) return ct__bv_status();
    ct_tensor *mx = ct_amax(cnt, NULL, 0, false);
    if (!mx) return ct__bv_status();
    if (per > 0 && ct_item(mx) > (double)ns)
        return ct__bv_error(c, CT_ERR_SHAPE, "masked_scatter: a sample's source has %lld elements, fewer than "
                            "its mask's true positions (%.0f)", (long long)ns, ct_item(mx));
    if (per == 0 || ns == 0) return done1(out, ct_clone(x));
    ct_tensor *pos = ct_sub(ct_cumsum(ct_to_dtype(mf, CT_I64), 1), ct_scalar(1, CT_I64));
    pos = pos ? ct_clamp(pos, 0, (double)(ns - 1)) : NULL;
    ct_tensor *sf = ct_reshape(s, (int64_t[]){B, ns}, 2);
    ct_tensor *g = pos && sf ? ct_gather(sf, 1, pos) : NULL;
    ct_tensor *y = g ? ct_where(mf, ct_to_dtype(g, x->dtype), ct_reshape(x, (int64_t[]){B, per}, 2)) : NULL;
    return done1(out, y ? ct_reshape(y, x->sizes, x->ndim) : NULL);
}

/* ---- einsum and the products written as one ---- */
/* a letter the equation does not use */
static char free_letter(const char *eq) {
    for (const char *l = "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"; *l; l++)
        if (!strchr(eq, *l)) return *l;
    return 0;
}

/* einsum(eq, ops) with operand k batched (its batch dim first) when bat[k] */
static ct_tensor *einsum_batched(const ct_vmap_call *c, const char *eq0, ct_tensor **ops, const bool *bat, int n) {
    char eq[512], res[600];
    int m = 0;
    for (const char *p = eq0; *p && m < (int)sizeof eq - 1; p++)
        if (*p != ' ') eq[m++] = *p;
    eq[m] = 0;
    char Z = free_letter(eq);
    if (!Z) return ct__error(CT_ERR_ARG, "vmap: einsum: no subscript letter left for the batch");
    const char *arrow = strstr(eq, "->");
    char outsub[128];
    if (arrow) {
        snprintf(outsub, sizeof outsub, "%s", arrow + 2);
    } else {
        /* implicit output: the ellipsis, then the letters used once, sorted */
        int cnt[128] = {0};
        bool ell = strstr(eq, "...") != NULL;
        for (const char *p = eq; *p; p++)
            if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) cnt[(int)*p]++;
        int o = 0;
        if (ell) o += snprintf(outsub + o, sizeof outsub - (size_t)o, "...");
        for (int ch = 'A'; ch <= 'Z'; ch++)
            if (cnt[ch] == 1 && o < (int)sizeof outsub - 1) outsub[o++] = (char)ch;
        for (int ch = 'a'; ch <= 'z'; ch++)
            if (cnt[ch] == 1 && o < (int)sizeof outsub - 1) outsub[o++] = (char)ch;
        outsub[o] = 0;
    }
    /* the operands' subscripts, each batched one with Z in front */
    int o = 0, k = 0;
    size_t inlen = arrow ? (size_t)(arrow - eq) : strlen(eq);
    bool start = true;
    for (size_t i = 0; i < inlen && o < (int)sizeof res - 4; i++) {
        if (start) {
            if (k < n && bat[k]) res[o++] = Z;
            start = false;
        }
        res[o++] = eq[i];
        if (eq[i] == ',') {
            k++;
            start = true;
        }
    }
    if (start && k < n && bat[k]) res[o++] = Z; /* an empty last operand (a 0-dim one) */
    o += snprintf(res + o, sizeof res - (size_t)o, "->%c%s", Z, outsub);
    (void)c;
    return ct_einsum(res, ops, n);
}

CT_VMAP_RULE(ct__vmap_einsum) {
    const ct_gnode *n = c->n;
    ct_tensor *local[16];
    bool bat[16];
    if (n->nin > 16) {
        c->fallback = true;
        return CT_OK;
    }
    for (int k = 0; k < n->nin; k++) {
        bat[k] = in[k].bdim >= 0;
        if (!(local[k] = ct__bv_front(in[k]))) return ct__bv_status();
    }
    const char *eq = n->args.p.linalg.equation;
    if (!eq) return ct__bv_error(c, CT_ERR_RUNTIME, "no recorded equation");
    return done1(out, einsum_batched(c, eq, local, bat, n->nin));
}

/* tensordot(a, b, dims_a, dims_b) as an einsum */
CT_VMAP_RULE(ct__vmap_tensordot) {
    const ct_p_linalg *p = &c->n->args.p.linalg;
    int la = ct__bv_ndim(in[0]), lb = ct__bv_ndim(in[1]);
    if (la + lb > 40) {
        c->fallback = true;
        return CT_OK;
    }
    const char *L = "abcdefghijklmnopqrstuvwxyABCDEFGHIJKLMNOPQRSTUVWXY";
    char sa[32], sb[32], so[64];
    int used = 0, no = 0;
    for (int d = 0; d < la; d++) sa[d] = L[used++];
    for (int d = 0; d < lb; d++) sb[d] = L[used++];
    for (int i = 0; i < p->dims_a_n && i < p->dims_b_n; i++) sb[p->dims_b[i]] = sa[p->dims_a[i]];
    for (int d = 0; d < la; d++) {
        bool con = false;
        for (int i = 0; i < p->dims_a_n; i++) con = con || p->dims_a[i] == d;
        if (!con) so[no++] = sa[d];
    }
    for (int d = 0; d < lb; d++) {
        bool con = false;
        for (int i = 0; i < p->dims_b_n; i++) con = con || p->dims_b[i] == d;
        if (!con) so[no++] = sb[d];
    }
    char eq[160];
    snprintf(eq, sizeof eq, "%.*s,%.*s->%.*s", la, sa, lb, sb, no, so);
    ct_tensor *ops[2] = {ct__bv_front(in[0]), ct__bv_front(in[1])};
    bool bat[2] = {in[0].bdim >= 0, in[1].bdim >= 0};
    if (!ops[0] || !ops[1]) return ct__bv_status();
    return done1(out, einsum_batched(c, eq, ops, bat, 2));
}

/* bilinear(x1, x2, W, [b]): y[..., o] = x1[..., i] W[o, i, j] x2[..., j] + b[o] */
CT_VMAP_RULE(ct__vmap_bilinear) {
    const ct_gnode *n = c->n;
    ct_tensor *ops[3];
    bool bat[3];
    for (int k = 0; k < 3; k++) {
        bat[k] = in[k].bdim >= 0;
        if (!(ops[k] = ct__bv_front(in[k]))) return ct__bv_status();
    }
    ct_tensor *y = einsum_batched(c, "...i,oij,...j->...o", (ct_tensor *[]){ops[0], ops[2], ops[1]},
                                  (bool[]){bat[0], bat[2], bat[1]}, 3);
    if (!y) return ct__bv_status();
    if (n->nin > 3 && in[3].t) {
        int r = ct__bv_ndim(in[0]);
        ct_tensor *b = ct__bv_align(in[3], r);
        if (!b || !(y = ct_add(y, b))) return ct__bv_status();
    }
    return done1(out, y);
}

/* kron(a, b): with both padded to one rank r, out[.., i*nb + k, ..] =
 * a[.., i, ..] * b[.., k, ..]: a at [B, a1, 1, a2, 1, ...] times b at
 * [B, 1, b1, 1, b2, ...], merged pairwise */
CT_VMAP_RULE(ct__vmap_kron) {
    int r = ct__bv_ndim(in[0]) > ct__bv_ndim(in[1]) ? ct__bv_ndim(in[0]) : ct__bv_ndim(in[1]);
    if (2 * r + 1 > CT_MAX_DIMS) {
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *t[2];
    int64_t sz[2][CT_MAX_DIMS];
    for (int k = 0; k < 2; k++) {
        ct_tensor *x = ct__bv_full(in[k], c->B);
        if (!x) return ct__bv_status();
        int l = x->ndim - 1;
        int64_t sh[CT_MAX_DIMS];
        sh[0] = c->B;
        for (int d = 0; d < r; d++) {
            sz[k][d] = d < r - l ? 1 : x->sizes[1 + d - (r - l)];
            sh[1 + 2 * d + k] = sz[k][d];
            sh[1 + 2 * d + 1 - k] = 1;
        }
        if (!(t[k] = ct_reshape(x, sh, 2 * r + 1))) return ct__bv_status();
    }
    ct_tensor *y = ct_mul(t[0], t[1]);
    if (!y) return ct__bv_status();
    int64_t sh[CT_MAX_DIMS];
    sh[0] = c->B;
    for (int d = 0; d < r; d++) sh[1 + d] = sz[0][d] * sz[1][d];
    return done1(out, ct_reshape(y, sh, r + 1));
}

/* cross(a, b, dim): broadcasting operands, dim counted from the end */
CT_VMAP_RULE(ct__vmap_cross) {
    int r = ct__bv_ndim(in[0]) > ct__bv_ndim(in[1]) ? ct__bv_ndim(in[0]) : ct__bv_ndim(in[1]);
    int64_t d = c->n->args.p.linalg.dim;
    if (d >= 0) d -= r;
    ct_tensor *a = ct__bv_align(in[0], r), *b = ct__bv_align(in[1], r);
    if (!a || !b) return ct__bv_status();
    /* both at [B, ...]: cross wants operands of one shape after broadcasting */
    if (in[0].bdim < 0) a = ct__bv_full((ct_bval){a, -1}, c->B);
    if (in[1].bdim < 0) b = ct__bv_full((ct_bval){b, -1}, c->B);
    if (!a || !b) return ct__bv_status();
    return done1(out, ct_cross(a, b, d));
}

/* cdist(x1 [.., P, M], x2 [.., R, M]): batch dims broadcast */
CT_VMAP_RULE(ct__vmap_cdist) {
    int r = ct__bv_ndim(in[0]) > ct__bv_ndim(in[1]) ? ct__bv_ndim(in[0]) : ct__bv_ndim(in[1]);
    ct_tensor *a = ct__bv_align(in[0], r), *b = ct__bv_align(in[1], r);
    if (!a || !b) return ct__bv_status();
    return done1(out, ct_cdist(a, b, c->n->args.p.linalg.p));
}

/* trace: the sum of each sample's diagonal */
CT_VMAP_RULE(ct__vmap_trace) {
    ct_tensor *x = ct__bv_front(in[0]);
    if (!x || ct__bv_ndim(in[0]) != 2) {
        if (x) c->fallback = true;
        return x ? CT_OK : ct__bv_status();
    }
    ct_tensor *y = ct_trace(ct_select(x, 0, 0)); /* the result dtype trace gives */
    ct_tensor *s = y ? ct_sum(ct_diagonal(x, 0, 1, 2), (int64_t[]){1}, 1, false) : NULL;
    return done1(out, s ? ct_to_dtype(s, ct_get_dtype(y)) : NULL);
}

/* ---- resampling: the batch folded into the samples dim N ---- */
static ct_tensor *fold_n(ct_tensor *x, bool has_n) {
    if (!has_n) return x;
    int64_t sh[CT_MAX_DIMS];
    sh[0] = x->sizes[0] * x->sizes[1];
    for (int d = 2; d < x->ndim; d++) sh[d - 1] = x->sizes[d];
    return ct_reshape(x, sh, x->ndim - 1);
}

static ct_tensor *unfold_n(ct_tensor *y, int64_t B, bool has_n) {
    if (!has_n || !y) return y;
    int64_t sh[CT_MAX_DIMS];
    sh[0] = B;
    sh[1] = y->sizes[0] / (B ? B : 1);
    for (int d = 1; d < y->ndim; d++) sh[d + 1] = y->sizes[d];
    return ct_reshape(y, sh, y->ndim + 1);
}

/* interpolate (x [N, C, *]): the batch is more planes */
CT_VMAP_RULE(ct__vmap_interpolate) {
    ct_args a = c->n->args;
    ct_tensor *x = ct__bv_front(in[0]);
    ct_dtype orig = x ? x->dtype : CT_F32;
    if (x && (orig == CT_F16 || orig == CT_BF16)) x = ct_to_dtype(x, CT_F32);
    if (!(x = ct_contiguous(x)) || !(x = fold_n(x, true))) return ct__bv_status();
    a.p.resample.planes *= c->B;
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, &x, 1, &a);
    if (st) return st;
    y = unfold_n(y, c->B, true);
    if (y && y->dtype != orig && ct__bv_out_meta(c, 0)->dtype == orig) y = ct_to_dtype(y, orig);
    return done1(out, y);
}

/* im2col (x [N, C, H, W] or [C, H, W]), col2im (x [N, C*k, L] or [C*k, L]) */
CT_VMAP_RULE(ct__vmap_fold) {
    ct_args a = c->n->args;
    bool has_n = ct__bv_ndim(in[0]) == (c->n->op == CT_OP_im2col ? 4 : 3);
    ct_tensor *x = ct__bv_front(in[0]);
    ct_dtype orig = x ? x->dtype : CT_F32;
    if (x && (orig == CT_F16 || orig == CT_BF16)) x = ct_to_dtype(x, CT_F32); /* as the public ops */
    x = ct_contiguous(x);
    int64_t N = x && has_n ? x->sizes[1] : 1;
    if (!x || !(x = fold_n(x, has_n))) return ct__bv_status();
    a.p.conv.batch = c->B * N;
    ct_tensor *y;
    ct_status st = ct__bv_run(c, &y, &x, 1, &a);
    if (st) return st;
    y = unfold_n(y, c->B, has_n);
    if (y && y->dtype != orig && ct__bv_out_meta(c, 0)->dtype == orig) y = ct_to_dtype(y, orig);
    return done1(out, y);
}

/* index_put (x, values, indices...): each sample through ct_index_put
 * (counted as a fallback: the indexed shape of advanced indexing moves the
 * batch dim in ways a single call cannot undo for the values) */
CT_VMAP_RULE(ct__vmap_index_put) {
    const ct_gnode *n = c->n;
    const ct_p_index *p = &n->args.p.index;
    int ni = n->nin - 2;
    if (ni > 16 || n->nin < 2) {
        c->fallback = true;
        return CT_OK;
    }
    int64_t B = c->B;
    ct_tensor *x = ct__bv_full(in[0], B);
    if (!x) return ct__bv_status();
    ct_tensor *col[64], **cols = B <= 64 ? col : malloc(sizeof *cols * (size_t)(B > 0 ? B : 1));
    if (!cols) return ct__error_status(CT_ERR_OOM, "vmap: out of memory");
    ct_status st = CT_OK;
    for (int64_t b = 0; b < B && !st; b++) {
        ct_tensor *idx[16];
        for (int k = 0; k < ni; k++) {
            ct_bval v = in[2 + k];
            idx[k] = v.t && v.bdim >= 0 ? ct_select(v.t, v.bdim, b) : v.t;
        }
        ct_bval vv = in[1];
        ct_tensor *vals = vv.bdim >= 0 ? ct_select(vv.t, vv.bdim, b) : vv.t;
        if (!(cols[b] = ct_index_put(ct_select(x, 0, b), idx, ni, vals, p->accumulate))) st = ct__bv_status();
    }
    ct_tensor *y = NULL;
    if (!st && B > 0 && !(y = ct_stack(cols, (int)B, 0))) st = ct__bv_status();
    if (cols != col) free(cols);
    if (st) return st;
    if (B == 0) y = ct_clone(x);
    c->looped = true;
    return c->dst ? ct__bv_write(c, y, out) : (y ? (out[0] = (ct_bval){y, 0}, CT_OK) : ct__bv_status());
}

/* histc (x, bins over [min, max]): each sample's histogram at once, bin by
 * bin as the kernel computes it -- b = (int)((v - min) * bins / (max - min))
 * in double, clamped to [0, bins), values outside [min, max] (and NaN) not
 * counted -- the counts scattered into a row per sample */
CT_VMAP_RULE(ct__vmap_histc) {
    const ct_p_index *p = &c->n->args.p.index;
    int64_t B = c->B, bins = p->bins;
    double lo = p->min, hi = p->max;
    if (bins <= 0 || !(hi > lo)) {
        c->fallback = true;
        return CT_OK;
    }
    ct_tensor *x = ct__bv_full(in[0], B);
    if (!x) return ct__bv_status();
    ct_dtype dt = ct__bv_out_meta(c, 0)->dtype;
    int64_t per = 1;
    for (int d = 1; d < x->ndim; d++) per *= x->sizes[d];
    ct_tensor *v = ct_to_dtype(ct_reshape(x, (int64_t[]){B, per}, 2), CT_F64);
    ct_tensor *ok = v ? ct_logical_and(ct_ge(v, ct_scalar(lo, CT_F64)), ct_le(v, ct_scalar(hi, CT_F64))) : NULL;
    ct_tensor *t = v ? ct_div(ct_mul(ct_add_scalar(v, -lo), ct_scalar((double)bins, CT_F64)), ct_scalar(hi - lo, CT_F64))
                     : NULL;
    /* NaN and far-out values are not counted: give them bin 0 before the cast */
    t = t && ok ? ct_where(ok, t, ct_scalar(0, CT_F64)) : NULL;
    ct_tensor *b = t ? ct_clamp(ct_to_dtype(t, CT_I64), 0, (double)(bins - 1)) : NULL;
    ct_tensor *cnt = ct_zeros((int64_t[]){B, bins}, 2, CT_F64);
    ct_tensor *y = b && cnt ? ct_scatter_add(cnt, 1, b, ct_to_dtype(ok, CT_F64)) : NULL;
    y = y ? ct_to_dtype(y, dt) : NULL;
    if (!y) return ct__bv_status();
    out[0] = (ct_bval){y, 0};
    return CT_OK;
}

/* masked_select(x, mask): with the mask the same for every sample, each
 * sample selects the same count n (the trace's) in the same order, so the
 * batch at the front gives the samples' selections one after the other:
 * [B * n] -> [B, n].  A batched mask would give each sample its own count:
 * an error, as torch.func's. */
CT_VMAP_RULE(ct__vmap_masked_select) {
    if (in[1].bdim >= 0)
        return ct__bv_error(c, CT_ERR_ARG, "Attempted to vmap over `mask` in masked_select(x, mask): each sample "
                            "would select a different number of elements (a data-dependent output shape; "
                            "torch.func.vmap raises for this too). Batch x only, or use where(mask, x, 0)");
    int r = ct__bv_ndim(in[0]) > in[1].t->ndim ? ct__bv_ndim(in[0]) : in[1].t->ndim;
    ct_tensor *x = ct__bv_align(in[0], r);
    if (!x) return ct__bv_status();
    int64_t n = ct__bv_out_meta(c, 0)->sizes[0];
    ct_tensor *y = ct_masked_select(x, in[1].t);
    return done1(out, y ? ct_reshape(y, (int64_t[]){c->B, n}, 2) : NULL);
}
