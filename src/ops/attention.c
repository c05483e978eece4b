/* attention.c -- the op layer of F.scaled_dot_product_attention: argument
 * checks, the kernel choice (PyTorch's sdp_kernel), the MATH kernel (a
 * composite of public ops, the reference) and the fused op sdpa_fused /
 * sdpa_fused_backward (FLASH and MEMORY-EFFICIENT; see sdpa_impl.h): its
 * kernels are in src/backend/cpu/attention*.c, its composite fallback --
 * what a device without the kernel runs, and what ct__fused_disable makes
 * every device run -- is below, its derivative in
 * src/autograd/derivs_attention.c.
 *
 * Shapes: q [..., Hq, L, E], k [..., Hk, S, E], v [..., Hk, S, Ev].  The
 * leading dims of q, k, v and the mask broadcast (like torch's math kernel,
 * where they broadcast through matmul and the mask add); with enable_gqa and
 * Hq != Hk the head dim is -3 and Hq must be a multiple of Hk (== Hv).
 *
 * Fully masked rows (every score -inf) give a zero output row in every
 * kernel (torch >= 2.5's math kernel does the same via _safe_softmax). */
#include <math.h>
#include <stdio.h>

#include "../core/random_impl.h"
#include "autocast.h"
#include "ctorch/autograd.h"
#include "ctorch/nn.h"
#include "ew.h"
#include "fused.h"
#include "meta.h"
#include "op_table.h"
#include "sdpa_impl.h"


static _Thread_local unsigned g_enabled = CT_SDP_ALL;
static _Thread_local ct_sdp_backend g_last = (ct_sdp_backend)0;

unsigned ct_sdp_kernel_set(unsigned enabled_mask) {
    unsigned prev = g_enabled;
    g_enabled = enabled_mask & (unsigned)CT_SDP_ALL;
    return prev;
}
unsigned ct_sdp_kernel_enabled(void) { return g_enabled; }
ct_sdp_backend ct_sdp_last_backend(void) { return g_last; }

static ct_tensor *keep_end(ct_scope s, ct_tensor *r) {
    r = r ? ct_keep(r) : NULL;
    ct_scope_end(s);
    return r;
}

static ct_tensor *last_dims_transpose(ct_tensor *t) { return ct_transpose(t, -2, -1); }

/* ---- the math kernel ----------------------------------------------------- */
static ct_tensor *sdpa_math(ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask, double p,
                            bool causal, double scale, int64_t gqa_rep) {
    ct_scope s = ct_scope_begin();
    if (gqa_rep > 1) {
        k = ct_repeat_interleave(k, gqa_rep, -3);
        v = ct_repeat_interleave(v, gqa_rep, -3);
    }
    ct_tensor *sc = ct_mul_scalar(ct_matmul(q, last_dims_transpose(k)), scale);
    int64_t L = ct_size(q, -2), S = ct_size(k, -2);
    bool masked = causal || mask;
    if (causal) {
        ct_tensor *up = ct_triu(ct_ones_on(CT_SHAPE(L, S), CT_BOOL, ct_get_device(q)), 1);
        sc = ct_masked_fill(sc, up, -INFINITY);
    } else if (mask && ct_get_dtype(mask) == CT_BOOL) {
        sc = ct_masked_fill(sc, ct_logical_not(mask), -INFINITY);
    } else if (mask) {
        sc = ct_add(sc, mask);
    }
    ct_tensor *pr;
    if (masked && sc) {
        /* rows with every score -inf: zeros, not NaN -- and zero gradients:
         * a float mask's add would pass the NaN softmax gradient of such a
         * row on to q and k, so their scores are zeroed before the softmax
         * (masked_fill's -inf already stops it for bool and causal masks) */
        int64_t last = -1;
        ct_tensor *dead = ct_all(ct_eq_scalar(ct_detach(sc), -INFINITY), &last, 1, true);
        bool float_mask = mask && ct_get_dtype(mask) != CT_BOOL;
        pr = ct_masked_fill(ct_softmax(float_mask ? ct_masked_fill(sc, dead, 0.0) : sc, -1), dead, 0.0);
    } else {
        pr = ct_softmax(sc, -1);
    }
    if (p > 0) pr = ct_dropout(pr, p, true);
    return keep_end(s, ct_matmul(pr, v));
}

/* ---- the fused op ------------------------------------------------------------ */
/* The composite fallback (see sdpa_impl.h), written with public ops and run
 * with gradients off: the op records itself.  Shapes as sdpa_impl.h. */

/* k (or v) [B, Hk, S, *] repeated over the Hq / Hk query heads of its group */
static ct_tensor *group_repeat(ct_tensor *t, int64_t G) { return G > 1 ? ct_repeat_interleave(t, G, 1) : t; }

/* [B, Hq, S, *] summed back over each group of G query heads: [B, Hk, S, *] */
static ct_tensor *group_sum(ct_tensor *t, int64_t G) {
    if (G <= 1 || !t) return t;
    int64_t two = 2;
    return ct_sum(ct_reshape(t, (int64_t[]){t->sizes[0], t->sizes[1] / G, G, t->sizes[2], t->sizes[3]}, 5),
                  &two, 1, false);
}

/* scale q kr^T with the causal and explicit masks, as the kernels' score tiles */
static ct_tensor *masked_scores(const ct_p_sdpa *p, ct_tensor *q, ct_tensor *kr, ct_tensor *mask) {
    ct_tensor *sc = ct_mul_scalar(ct_matmul(q, ct_transpose(kr, -2, -1)), p->scale);
    if (!sc) return NULL;
    int64_t L = sc->sizes[2], S = sc->sizes[3];
    if (p->is_causal)
        sc = ct_masked_fill(sc, ct_triu(ct_ones_on((int64_t[]){L, S}, 2, CT_BOOL, q->storage->device), 1),
                            -INFINITY);
    if (mask && mask->dtype == CT_BOOL) sc = ct_masked_fill(sc, ct_logical_not(mask), -INFINITY);
    else if (mask) sc = ct_add(sc, mask);
    return sc;
}

/* The dropout factor [B, Hq, L, S]: keep / (1 - p) from the kernel's
 * Philox stream -- the uniform op with the same seed and offset draws
 * element idx from word idx % 4 of block offset + idx / 4, in f32 as the
 * kernel does -- and the kernel's f32 threshold and scale. */
static ct_tensor *drop_factor(const ct_p_sdpa *p, ct_tensor *sc) {
    ct_tensor *u = ct__alloc(sc->sizes, 4, CT_F32, sc->storage->device);
    ct_args ua = ct__args(CT_OP_uniform);
    ua.p.random.seed = p->seed;
    ua.p.random.offset = p->offset;
    ua.p.random.from = 0.0;
    ua.p.random.to = 1.0;
    if (!u || ct__dispatch(CT_OP_uniform, &u, 1, NULL, 0, &ua)) {
        ct_release(u);
        return NULL;
    }
    u = ct__register(u);
    float pf = (float)p->dropout_p, ps = (float)(1.0 / (1.0 - p->dropout_p));
    return ct_mul_scalar(ct_to_dtype(ct_logical_not(ct_lt_scalar(u, (double)pf)), CT_F32), (double)ps);
}

static ct_status fallback_status(void) { return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM; }

/* out[0] (the [B, Hq, L, Ev] view), out[1] (lse [B, Hq, L]): allocated, filled here */
static ct_status fallback_fwd(const ct_p_sdpa *p, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask,
                              ct_tensor *const *out) {
    ct_scope s = ct_scope_begin();
    bool pg = ct_set_grad_enabled(false);
    int64_t G = k->sizes[1] > 0 ? q->sizes[1] / k->sizes[1] : 1, last = -1;
    ct_tensor *sc = masked_scores(p, q, group_repeat(k, G), mask);
    /* lse per row, +inf where every score is -inf (then P = exp(-inf) = 0) */
    ct_tensor *lse = ct_masked_fill(ct_logsumexp(sc, &last, 1, false),
                                    ct_all(ct_eq_scalar(sc, -INFINITY), &last, 1, false), INFINITY);
    ct_tensor *pr = ct_exp(ct_sub(sc, ct_unsqueeze(lse, -1)));
    if (p->has_dropout && pr) pr = ct_mul(pr, drop_factor(p, sc));
    ct_tensor *o = ct_matmul(pr, group_repeat(v, G));
    bool ok = o && lse && ct_copy_(out[0], o) && ct_copy_(out[1], lse);
    ct_set_grad_enabled(pg);
    ct_status st = ok ? CT_OK : fallback_status();
    ct_scope_end(s);
    return st;
}

/* The canonical shapes of sdpa_impl.h (the entries are private, but a bad
 * call gets an error, not a crash in a kernel). */
static ct_status check_canonical(const char *fn, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *mask) {
    ct_tensor *t[3] = {q, k, v};
    bool fdt = q->dtype == CT_F32 || q->dtype == CT_BF16 || q->dtype == CT_F16;
    for (int i = 0; i < 3; i++)
        if (t[i]->ndim != 4 || !fdt || t[i]->dtype != q->dtype)
            return ct__error_status(CT_ERR_SHAPE, "%s: the fused op takes 4-dim q, k, v of one dtype "
                                    "(float32, bfloat16 or float16), got %s %s", fn, ct__tshape(t[i]),
                                    ct_dtype_name(t[i]->dtype));
    int64_t B = q->sizes[0], Hq = q->sizes[1], L = q->sizes[2], Hk = k->sizes[1], S = k->sizes[2];
    if (k->sizes[0] != B || v->sizes[0] != B || v->sizes[1] != Hk || v->sizes[2] != S ||
        k->sizes[3] != q->sizes[3] || (Hk > 0 ? Hq % Hk != 0 : Hq != 0))
        return ct__error_status(CT_ERR_SHAPE, "%s: q %s, k [B, Hk, S, E], v [B, Hk, S, Ev] with Hk "
                                "dividing Hq expected, got k %s", fn, ct__tshape(q), ct__tshape(k));
    if (mask && (mask->ndim != 4 || (mask->dtype != CT_BOOL && mask->dtype != CT_F32) ||
                 mask->sizes[0] != B || mask->sizes[1] != Hq || mask->sizes[2] != L || mask->sizes[3] != S))
        return ct__error_status(CT_ERR_SHAPE, "%s: a bool or float32 mask [%lld, %lld, %lld, %lld] "
                                "expected, got %s %s", fn, (long long)B, (long long)Hq, (long long)L,
                                (long long)S, ct__tshape(mask), ct_dtype_name(mask->dtype));
    return CT_OK;
}

/* The meta function of both ops (inputs in the kernels' order, the mask
 * last and only when given):
 *   sdpa_fused:           q, k, v, [mask]            -> out [B, Hq, L, Ev]
 *                         stored [B, L, Hq, Ev], logsumexp [B, Hq, L]
 *   sdpa_fused_backward:  q, k, v, out, lse, g, [mask] -> dq, dk, dv (the
 *                         shapes of q, k, v; float32) */
CT_META_FN(ct__meta_sdpa) {
    (void)nout;
    bool bwd = a->op == CT_OP_sdpa_fused_backward;
    const char *fn = bwd ? "scaled_dot_product_attention backward" : "scaled_dot_product_attention";
    int base = bwd ? 6 : 3;
    if (nin != base && nin != base + 1)
        return ct__error_status(CT_ERR_ARG, "%s: expected %d or %d inputs, got %d", fn, base, base + 1, nin);
    ct_tensor *q = in[0], *k = in[1], *v = in[2], *mask = nin > base ? in[base] : NULL;
    if (check_canonical(fn, q, k, v, mask)) return ct_last_error_code();
    ct_device dev;
    if (ct__meta_device(fn, in, nin, &dev)) return ct_last_error_code();
    int64_t B = q->sizes[0], Hq = q->sizes[1], L = q->sizes[2], Ev = v->sizes[3];
    if (bwd) {
        ct_tensor *o = in[3], *lse = in[4], *g = in[5];
        int64_t ws[4] = {B, Hq, L, Ev};
        if (o->ndim != 4 || g->ndim != 4 || lse->ndim != 3 || memcmp(o->sizes, ws, sizeof ws) ||
            memcmp(g->sizes, ws, sizeof ws) || memcmp(lse->sizes, ws, 3 * sizeof(int64_t)) ||
            o->dtype != q->dtype || !ct_dtype_is_floating(g->dtype) || lse->dtype != CT_F32)
            return ct__error_status(CT_ERR_SHAPE, "%s: out of q's dtype, a floating grad_out [%lld, %lld, %lld, %lld] and "
                                    "logsumexp [%lld, %lld, %lld] expected, got %s, %s and %s", fn,
                                    (long long)ws[0], (long long)ws[1], (long long)ws[2], (long long)ws[3],
                                    (long long)ws[0], (long long)ws[1], (long long)ws[2], ct__tshape(o),
                                    ct__tshape(g), ct__tshape(lse));
        for (int i = 0; i < 3; i++) {
            ct__meta_set(&out[i], in[i]->sizes, 4, q->dtype, dev);
            /* q, k or v with its heads interleaved within the rows (the
             * [B, L, H, E] views of a projection, transposed): its gradient
             * is stored [B, L, H, E] too, so that the transpose back and the
             * merge of the heads need no copy */
            const int64_t *sz = in[i]->sizes, *st = in[i]->strides;
            if (sz[1] > 1 && sz[2] > 1 && st[1] < st[2]) {
                memcpy(out[i].strides, (int64_t[]){sz[2] * sz[1] * sz[3], sz[3], sz[1] * sz[3], 1},
                       4 * sizeof(int64_t));
                out[i].flags = CT_META_STRIDED;
            }
        }
        return CT_OK;
    }
    /* the output is stored [B, L, Hq, Ev] and seen as [B, Hq, L, Ev] (as
     * torch's CPU flash kernel does): the usual next step, transpose(1, 2)
     * and merging the heads, is then free */
    ct__meta_set(&out[0], (int64_t[]){B, Hq, L, Ev}, 4, q->dtype, dev);
    memcpy(out[0].strides, (int64_t[]){L * Hq * Ev, Ev, Hq * Ev, 1}, 4 * sizeof(int64_t));
    out[0].flags = CT_META_STRIDED;
    ct__meta_set(&out[1], (int64_t[]){B, Hq, L}, 3, CT_F32, dev);
    return CT_OK;
}

ct_tensor *ct__sdpa_fused(int mode, ct_tensor *q4, ct_tensor *k4, ct_tensor *v4, ct_tensor *mask4,
                          double p, bool causal, double scale, ct_tensor **lse) {
    if (lse) *lse = NULL;
    CT_NULLCHECK(q4); CT_NULLCHECK(k4); CT_NULLCHECK(v4);
    ct_tensor *in[4] = {q4, k4, v4, mask4};
    int nin = mask4 ? 4 : 3;
    ct_args a = ct__args(CT_OP_sdpa_fused);
    a.p.sdpa.mode = mode;
    a.p.sdpa.is_causal = causal;
    a.p.sdpa.has_dropout = p > 0;
    a.p.sdpa.scale = scale;
    a.p.sdpa.dropout_p = p;
    ct_meta m[2];
    if (ct__meta_run(CT_OP_sdpa_fused, m, 2, in, nin, &a)) return NULL;
    if (p > 0 && ct__has_host_data(q4)) { /* meta draws nothing */
        uint64_t seed, off;
        ct__rng_reserve(ct__blocks(q4->sizes[0] * q4->sizes[1] * q4->sizes[2] * k4->sizes[2], 4), &seed, &off);
        a.p.sdpa.seed = (int64_t)seed;
        a.p.sdpa.offset = (int64_t)off;
    }
    ct_tensor *out[2] = {ct__meta_new(&m[0], in), ct__meta_new(&m[1], in)};
    bool kernel = ct__fused_kernel(CT_OP_sdpa_fused, m[0].device) != NULL;
    if (!out[0] || !out[1] ||
        (kernel ? ct__dispatch(CT_OP_sdpa_fused, out, 2, in, nin, &a)
                : fallback_fwd(&a.p.sdpa, q4, k4, v4, mask4, out))) {
        ct_release(out[0]);
        ct_release(out[1]);
        return NULL;
    }
    ct__finish_multi(CT_OP_sdpa_fused, out, 2, in, nin, &a);
    if (lse) *lse = out[1];
    return out[0]; /* logsumexp stays in the scope (saved by autograd) */
}

/* The fallback backward: P = exp(s - lse), dP = g vr^T (both dropped out
 * as the forward was), D = rowsum(g * out), dS = P (dP - D), dV = P'^T g,
 * dQ = scale dS kr, dK = scale dS^T q; GQA groups summed into dK, dV. */
static ct_status fallback_bwd(const ct_p_sdpa *p, ct_tensor *q, ct_tensor *k, ct_tensor *v, ct_tensor *o,
                              ct_tensor *lse, ct_tensor *g, ct_tensor *mask, const bool *want,
                              ct_tensor **d) {
    ct_scope s = ct_scope_begin();
    bool pg = ct_set_grad_enabled(false);
    int64_t G = k->sizes[1] > 0 ? q->sizes[1] / k->sizes[1] : 1, last = -1;
    ct_tensor *kr = group_repeat(k, G);
    ct_tensor *sc = masked_scores(p, q, kr, mask);
    g = ct_to_dtype(g, CT_F32); /* as the kernel reads it */
    ct_tensor *pr = ct_exp(ct_sub(sc, ct_unsqueeze(lse, -1)));
    ct_tensor *dp = ct_matmul(g, ct_transpose(group_repeat(v, G), -2, -1)), *pv = pr;
    if (p->has_dropout && sc) {
        ct_tensor *z = drop_factor(p, sc);
        dp = ct_mul(dp, z);
        pv = ct_mul(pr, z);
    }
    ct_tensor *ds = ct_mul(pr, ct_sub(dp, ct_sum(ct_mul(g, o), &last, 1, true)));
    ct_tensor *r[3] = {NULL, NULL, NULL};
    if (want[0]) r[0] = ct_mul_scalar(ct_matmul(ds, kr), p->scale);
    if (want[1]) r[1] = group_sum(ct_mul_scalar(ct_matmul(ct_transpose(ds, -2, -1), q), p->scale), G);
    if (want[2]) r[2] = group_sum(ct_matmul(ct_transpose(pv, -2, -1), g), G);
    ct_set_grad_enabled(pg);
    ct_status st = CT_OK;
    for (int i = 0; i < 3; i++) {
        if (want[i] && !r[i]) st = fallback_status();
        d[i] = r[i] ? ct_retain(r[i]) : NULL; /* owned, like a kernel's outputs */
    }
    ct_scope_end(s);
    if (st)
        for (int i = 0; i < 3; i++) { ct_release(d[i]); d[i] = NULL; }
    return st;
}

/* t itself (a new reference) when the backward kernel can read it in place:
 * of dtype dt (q's), a dense last dim, rows at least a row apart (what a
 * BLAS leading dim needs) and no negative strides; otherwise a dense copy
 * of dtype dt */
static ct_tensor *kernel_rows(ct_tensor *t, ct_dtype dt) {
    const int64_t *sz = t->sizes, *st = t->strides;
    if (t->dtype == dt && t->ndim == 4 && (sz[3] <= 1 || st[3] == 1) &&
        (sz[2] <= 1 || st[2] >= sz[3]) && st[0] >= 0 && st[1] >= 0 && st[2] >= 0)
        return ct_retain(t);
    return ct__contig_as(t, dt);
}

ct_status ct__sdpa_fused_backward(const ct_args *fa, ct_tensor *q, ct_tensor *k, ct_tensor *v,
                                  ct_tensor *o, ct_tensor *lse, ct_tensor *g, ct_tensor *mask,
                                  const bool want[3], ct_tensor **d) {
    d[0] = d[1] = d[2] = NULL;
    const char *fn = "scaled_dot_product_attention backward";
    CT_NULLCHECK_OP_S(fn, q); CT_NULLCHECK_OP_S(fn, k); CT_NULLCHECK_OP_S(fn, v);
    CT_NULLCHECK_OP_S(fn, o); CT_NULLCHECK_OP_S(fn, lse); CT_NULLCHECK_OP_S(fn, g);
    ct_args a = ct__args(CT_OP_sdpa_fused_backward);
    a.p.sdpa = fa->p.sdpa;
    ct_tensor *ins[7] = {q, k, v, o, lse, g, mask};
    int nin = mask ? 7 : 6;
    ct_meta m[3];
    if (ct__meta_run(CT_OP_sdpa_fused_backward, m, 3, ins, nin, &a)) return ct_last_error_code();
    ct_status st;
    if (ct__fused_kernel(CT_OP_sdpa_fused_backward, m[0].device)) {
        /* the kernel takes strided q, k, v, out and grad_out (the
         * forward's views need no copies) with a dense last dim and rows
         * BLAS can address; others are given dense float32 copies */
        ct_dtype dt = q->dtype;
        ct_tensor *gc = kernel_rows(g, dt);
        ct_tensor *qc = kernel_rows(q, dt), *kc = kernel_rows(k, dt);
        ct_tensor *vc = kernel_rows(v, dt), *oc = kernel_rows(o, dt);
        ct_tensor *lc = ct__contig_as(lse, CT_F32);
        for (int i = 0; i < 3; i++) d[i] = ct__meta_new(&m[i], ins);
        if (gc && qc && kc && vc && oc && lc && d[0] && d[1] && d[2]) {
            ct_tensor *in[7] = {qc, kc, vc, oc, lc, gc, mask};
            st = ct__dispatch(CT_OP_sdpa_fused_backward, d, 3, in, nin, &a);
        } else {
            st = ct__error_status(CT_ERR_OOM, "%s: out of memory", fn);
        }
        ct_release(gc);
        ct_release(qc);
        ct_release(kc);
        ct_release(vc);
        ct_release(oc);
        ct_release(lc);
    } else {
        st = fallback_bwd(&a.p.sdpa, q, k, v, o, lse, g, mask, want, d);
    }
    if (st) {
        for (int i = 0; i < 3; i++) { ct_release(d[i]); d[i] = NULL; }
        return st;
    }
    ct__finish_multi(CT_OP_sdpa_fused_backward, d, 3, ins, nin, &a);
    return CT_OK;
}

/* the fused op takes any strides but a dense last dim */
static ct_tensor *dense_rows(ct_tensor *t) {
    return t && ct_stride(t, 3) != 1 && ct_size(t, 3) > 1 ? ct_contiguous(t) : t;
}

/* ---- checks and the choice ----------------------------------------------- */
static bool is_float(ct_dtype dt) {
    return dt == CT_F16 || dt == CT_BF16 || dt == CT_F32 || dt == CT_F64;
}

static const char *backend_name(unsigned b) {
    return b == CT_SDP_MATH ? "math" : b == CT_SDP_FLASH ? "flash" : "mem_efficient";
}

/* Why a fused kernel cannot run this call (NULL: it can). */
static const char *fused_reason(ct_tensor *q, ct_tensor *mask) {
    if (q->dtype != CT_F32 && q->dtype != CT_BF16 && q->dtype != CT_F16)
        return "it needs float32, bfloat16 or float16 inputs";
    /* any device: one without the kernel runs the fused op's fallback (on
     * meta the kernel gives the CPU kernel's output layout, like torch's) */
    if (mask && ct_is_grad_enabled() && ct_requires_grad(mask))
        return "it gives no gradient to attn_mask (the mask requires grad)";
    return NULL;
}

ct_tensor *ct_scaled_dot_product_attention(ct_tensor *q, ct_tensor *k, ct_tensor *v,
                                           ct_tensor *attn_mask, double dropout_p,
                                           bool is_causal, double scale, bool enable_gqa) {
    CT_AUTOCAST_OP(CT_AC_scaled_dot_product_attention,
                   ct_scaled_dot_product_attention(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), CT_AC_ARG(3), dropout_p,
                                                   is_causal, scale, enable_gqa), q, k, v, attn_mask);
    CT_NULLCHECK(q); CT_NULLCHECK(k); CT_NULLCHECK(v);
    const char *fn = "scaled_dot_product_attention";
    if (!is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return ct__error(CT_ERR_DTYPE, "%s: Expected query, key, and value to have the same floating "
                         "dtype, but got query.dtype: %s key.dtype: %s and value.dtype: %s instead.",
                         fn, ct_dtype_name(q->dtype), ct_dtype_name(k->dtype), ct_dtype_name(v->dtype));
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return ct__error(CT_ERR_SHAPE, "%s: expected query, key and value of at least 2 dims, got "
                         "query %s, key %s, value %s", fn, ct__tshape(q), ct__tshape(k), ct__tshape(v));
    int64_t L = q->sizes[q->ndim - 2], E = q->sizes[q->ndim - 1];
    int64_t S = k->sizes[k->ndim - 2], Ek = k->sizes[k->ndim - 1];
    int64_t Sv = v->sizes[v->ndim - 2], Ev = v->sizes[v->ndim - 1];
    char qs[256], ks[256], vs[256];
    snprintf(qs, sizeof qs, "%s", ct__tshape(q));
    snprintf(ks, sizeof ks, "%s", ct__tshape(k));
    snprintf(vs, sizeof vs, "%s", ct__tshape(v));
    if (Ek != E)
        return ct__error(CT_ERR_SHAPE, "%s: query %s and key %s must have the same last dim (head dim "
                         "%lld vs %lld)", fn, qs, ks, (long long)E, (long long)Ek);
    if (Sv != S)
        return ct__error(CT_ERR_SHAPE, "%s: key %s and value %s must have the same sequence length "
                         "(%lld vs %lld)", fn, ks, vs, (long long)S, (long long)Sv);
    if (!(dropout_p >= 0.0 && dropout_p < 1.0))
        return ct__error(CT_ERR_ARG, "%s: dropout_p must be in [0, 1), got %g", fn, dropout_p);
    if (!isfinite(scale) || scale < 0)
        return ct__error(CT_ERR_ARG, "%s: scale must be a finite number >= 0 (0: 1/sqrt(E)), got %g",
                         fn, scale);
    if (is_causal && attn_mask)
        return ct__error(CT_ERR_ARG, "%s: Explicit attn_mask should not be set when is_causal=True", fn);
    if (attn_mask && attn_mask->dtype != CT_BOOL && attn_mask->dtype != q->dtype)
        return ct__error(CT_ERR_DTYPE, "%s: Expected attn_mask dtype to be bool or %s to match query "
                         "dtype, but got attn_mask.dtype: %s", fn, ct_dtype_name(q->dtype),
                         ct_dtype_name(attn_mask->dtype));
    /* heads: GQA when enable_gqa and the head counts differ */
    int64_t Hq = q->ndim >= 3 ? q->sizes[q->ndim - 3] : 1;
    int64_t Hk = k->ndim >= 3 ? k->sizes[k->ndim - 3] : 1;
    int64_t Hv = v->ndim >= 3 ? v->sizes[v->ndim - 3] : 1;
    int64_t rep = 1;
    if (enable_gqa && (Hq != Hk || Hq != Hv)) {
        if (q->ndim < 3 || k->ndim < 3 || v->ndim < 3)
            return ct__error(CT_ERR_SHAPE, "%s: enable_gqa needs a head dim (-3) in query %s, key %s "
                             "and value %s", fn, qs, ks, vs);
        if (Hk != Hv || Hk <= 0 || Hq % Hk != 0)
            return ct__error(CT_ERR_SHAPE, "%s: with enable_gqa the number of query heads (%lld) must "
                             "be a multiple of the key and value heads (%lld, %lld), which must be equal",
                             fn, (long long)Hq, (long long)Hk, (long long)Hv);
        rep = Hq / Hk;
    }
    /* the batch shape D: broadcast of q, k, v (heads as repeated) and mask dims but the last 2 */
    int64_t D[CT_MAX_DIMS], tmp[CT_MAX_DIMS];
    int nd = q->ndim - 2, nt;
    memcpy(D, q->sizes, sizeof(int64_t) * (size_t)nd);
    ct_tensor *parts[3] = {k, v, attn_mask};
    for (int i = 0; i < 3; i++) {
        ct_tensor *t = parts[i];
        if (!t) continue;
        if (t->ndim < 2)
            return ct__error(CT_ERR_SHAPE, "%s: attn_mask must have at least 2 dims, got %s", fn,
                             ct__tshape(t));
        int64_t ts[CT_MAX_DIMS];
        memcpy(ts, t->sizes, sizeof(int64_t) * (size_t)(t->ndim - 2));
        if (rep > 1 && i < 2) ts[t->ndim - 3] = Hq;
        if (ct__broadcast_shapes(fn, D, nd, ts, t->ndim - 2, tmp, &nt)) return NULL;
        memcpy(D, tmp, sizeof(int64_t) * (size_t)nt);
        nd = nt;
    }
    if (attn_mask) {
        int64_t ml = attn_mask->sizes[attn_mask->ndim - 2], ms = attn_mask->sizes[attn_mask->ndim - 1];
        if ((ml != L && ml != 1) || (ms != S && ms != 1))
            return ct__error(CT_ERR_SHAPE, "%s: attn_mask %s does not broadcast to the attention "
                             "weights [..., %lld, %lld]", fn, ct__tshape(attn_mask), (long long)L,
                             (long long)S);
    }
    if (scale == 0.0) scale = E > 0 ? 1.0 / sqrt((double)E) : 1.0;

    /* the choice */
    ct__backends_init();
    unsigned en = g_enabled;
    const char *why = fused_reason(q, attn_mask);
    unsigned pick = 0;
    bool float_mask = attn_mask && attn_mask->dtype != CT_BOOL;
    if (!why) {
        if ((en & CT_SDP_FLASH) && !float_mask) pick = CT_SDP_FLASH;
        else if (en & CT_SDP_MEM_EFFICIENT) pick = CT_SDP_MEM_EFFICIENT;
        else if (en & CT_SDP_FLASH) pick = CT_SDP_FLASH;
    }
    if (!pick && (en & CT_SDP_MATH)) pick = CT_SDP_MATH;
    if (!pick) {
        if (!en)
            return ct__error(CT_ERR_ARG, "%s: no kernel is enabled (ct_sdp_kernel_set(0))", fn);
        return ct__error(CT_ERR_ARG, "%s: no enabled kernel can run this call: %s%s%s cannot "
                         "because %s, and math is disabled", fn,
                         (en & CT_SDP_FLASH) ? "flash" : "",
                         (en & CT_SDP_FLASH) && (en & CT_SDP_MEM_EFFICIENT) ? " and " : "",
                         (en & CT_SDP_MEM_EFFICIENT) ? "mem_efficient" : "", why);
    }

    ct_tensor *r;
    if (pick == CT_SDP_MATH) {
        r = sdpa_math(q, k, v, attn_mask, dropout_p, is_causal, scale, rep);
    } else {
        ct_scope s = ct_scope_begin();
        /* canonical [B, H, L, E]: expand to the batch shape D, flatten D[:-1] */
        int64_t H = nd >= 1 ? D[nd - 1] : 1, B = 1;
        for (int i = 0; i < nd - 1; i++) B *= D[i];
        int64_t sh[CT_MAX_DIMS];
        memcpy(sh, D, sizeof(int64_t) * (size_t)nd);
        int64_t hk = rep > 1 ? Hk : H;
        ct_tensor *q4, *k4, *v4, *m4 = NULL;
        sh[nd] = L; sh[nd + 1] = E;
        q4 = ct_reshape(ct_expand(q, sh, nd + 2), (int64_t[]){B, H, L, E}, 4);
        if (nd >= 1) sh[nd - 1] = hk;
        sh[nd] = S; sh[nd + 1] = E;
        k4 = ct_reshape(ct_expand(k, sh, nd + 2), (int64_t[]){B, hk, S, E}, 4);
        sh[nd + 1] = Ev;
        v4 = ct_reshape(ct_expand(v, sh, nd + 2), (int64_t[]){B, hk, S, Ev}, 4);
        if (attn_mask) {
            if (nd >= 1) sh[nd - 1] = H;
            sh[nd] = L; sh[nd + 1] = S;
            ct_tensor *me = ct_expand(ct_detach(attn_mask), sh, nd + 2);
            if (nd <= 2) { /* a view: no dims to merge (maybe one to add) */
                m4 = me;
                while (m4 && ct_ndim(m4) < 4) m4 = ct_unsqueeze(m4, 0);
            } else {
                m4 = ct_reshape(me, (int64_t[]){B, H, L, S}, 4);
            }
        }
        /* bf16/f16 (autocast's lower precision): the kernels compute in
         * float32 from the half q, k, v (as torch's CPU flash kernel does,
         * which loads halves into float accumulators) and round the output
         * (and, backward, each gradient) to the half dtype once.  A device
         * whose kernels read halves themselves (ct__half_native: the CPU's
         * AVX2 kernels convert tile by tile; meta answers as the CPU, whose
         * output layout it gives) gets them as they are;
         * otherwise q, k, v ([.., L, E], never the [L, S] scores) are
         * converted to float32 copies by ops, so the gradients flow back
         * in the half dtype.  A float mask is always read as float32. */
        ct_dtype hd = q->dtype;
        ct_device qd = q->storage->device;
        bool native = hd == CT_F32 || ct__half_native(qd == CT_META ? CT_CPU : qd, CT_OP_sdpa_fused, hd);
        if (!native) {
            q4 = ct_to_dtype(q4, CT_F32);
            k4 = ct_to_dtype(k4, CT_F32);
            v4 = ct_to_dtype(v4, CT_F32);
        }
        if (m4 && m4->dtype != CT_BOOL && m4->dtype != CT_F32) m4 = ct_to_dtype(m4, CT_F32);
        /* the kernels take any strides but a dense last dim */
        q4 = dense_rows(q4); k4 = dense_rows(k4); v4 = dense_rows(v4);
        ct_tensor *o = ct__sdpa_fused((int)pick, q4, k4, v4, m4, dropout_p, is_causal, scale, NULL);
        if (!native) o = ct_to_dtype(o, hd);
        sh[nd] = L; sh[nd + 1] = Ev;
        if (nd >= 1) sh[nd - 1] = H;
        r = keep_end(s, ct_reshape(o, sh, nd + 2));
    }
    if (r) g_last = (ct_sdp_backend)pick;
    (void)backend_name;
    return r;
}
