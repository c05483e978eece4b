/* exec.c -- runs a plan over real tensors: node steps through the op layer
 * (so autograd records them as eager ops are recorded), kernel steps
 * through their generated entry points.  See compile_impl.h.
 *
 * Max-autotune (p->autotune): the first run of each kernel step with
 * variants, on the real tensors, runs the default variant, keeps a copy of
 * its outputs, runs every other variant (on outputs holding the copy's
 * complement, so that an element it does not write shows) and compares its
 * outputs with that copy bit for bit (one that differs is rejected: none
 * should), then
 * times the variants in interleaved rounds (at least 3, up to 15 while the
 * total stays under 40 ms), keeps the one of the smallest median (the
 * default unless another is more than 2% faster), and puts the default's
 * outputs back.  A node step whose op consults an implementation choice
 * (ops/route.h: the GEMM's OpenBLAS or own kernel, the convolution's own
 * kernels or oneDNN; found by running it once with the overrides set and
 * seeing whether the backend read one) is timed the same way on its real
 * inputs, both implementations, and then runs with the faster one; its
 * result is the chosen one's (the two agree to rounding, checked within
 * rtol 1e-3).  Nodes that draw random numbers, write in place or that
 * autograd records are not retimed.  Each choice is written beside the
 * artifacts (ct__tune_store), keyed by the artifact's key (for a kernel:
 * its library's cache key and name; for a node: the op, its parameters),
 * the real sizes and strides, the thread count and the CPU, and read back
 * instead of timing by any later plan or process with the same key. */
#include "compile_impl.h"
#include "../ops/timing.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../ops/ew.h"
#include "../ops/profiler_impl.h"
#include "../ops/route.h"
#include "../core/random_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* a team with less work than this (elements over all its kernels) runs
 * kernel by kernel: the generated kernels' own parallel threshold */
#define CT_TEAM_MIN_WORK 32768

ct_status ct__plan_nodes(const ct_graph *g, ct_plan *p) {
    memset(p, 0, sizeof *p);
    int n = 0;
    for (int i = 0; i < g->nn; i++) n += !g->n[i].dead;
    p->step = malloc(sizeof *p->step * (size_t)(n > 0 ? n : 1));
    if (!p->step) return ct__error_status(CT_ERR_OOM, "compile: out of memory making the plan");
    for (int i = 0; i < g->nn; i++)
        if (!g->n[i].dead) p->step[p->nstep++] = (ct_plan_step){.node = i, .kcall = -1};
    return CT_OK;
}

void ct__plan_free(ct_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->nkc; i++) {
        ct_cc_lib *lib = p->kc[i].lib;
        if (lib) {
            /* libraries may be shared between kernels: close each once */
            for (int j = i + 1; j < p->nkc; j++)
                if (p->kc[j].lib == lib) p->kc[j].lib = NULL;
            ct__cc_close(lib);
        }
        free(p->kc[i].k.inst);
    }
    free(p->kc);
    free(p->step);
    free(p->wroot);
    free(p->last_use);
    free(p->die_off);
    free(p->die_v);
    memset(p, 0, sizeof *p);
}

static void touch(int *last, int v, int s) {
    if (v >= 0 && last[v] != INT_MAX && last[v] < s) last[v] = s;
}

void ct__plan_liveness(const ct_graph *g, ct_plan *p) {
    free(p->last_use);
    free(p->die_off);
    free(p->die_v);
    p->last_use = p->die_off = p->die_v = NULL;
    int *last = malloc(sizeof(int) * (size_t)(g->nv > 0 ? g->nv : 1));
    if (!last) return;
    /* inputs get their last step too (released after it where the caller
     * donates them: ct__exec_donated); constants live on */
    for (int v = 0; v < g->nv; v++)
        last[v] = g->v[v].kind == CT_GV_NODE || g->v[v].kind == CT_GV_INPUT ? -1 : INT_MAX;
    for (int k = 0; k < g->nout; k++)
        if (g->outputs[k] >= 0) last[g->outputs[k]] = INT_MAX;
    for (int s = 0; s < p->nstep; s++) {
        const ct_plan_step *ps = &p->step[s];
        if (ps->node >= 0) {
            const ct_gnode *n = &g->n[ps->node];
            for (int k = 0; k < n->nin; k++) touch(last, n->in[k], s);
            for (int k = 0; k < n->nout; k++) touch(last, n->out[k], s);
            touch(last, n->dst, s);
        } else if (ps->kcall >= 0) {
            const ct_kcall *kc = &p->kc[ps->kcall];
            for (int b = 0; b < kc->k.nbuf; b++) touch(last, kc->buf_val[b], s);
            for (int i = 0; i < kc->ndef; i++) touch(last, kc->def_val[i], s);
        }
    }
    /* a value read through a view of it (or written through one) lives as
     * long as the view: the view holds the storage anyway, this keeps the
     * value's own entry for what reads it by id */
    for (int pass = 0; pass < 4; pass++)
        for (int v = 0; v < g->nv; v++) {
            int a = g->v[v].alias;
            if (a >= 0 && last[a] != INT_MAX && last[v] > last[a]) last[a] = last[v];
        }
    int *off = calloc((size_t)p->nstep + 1, sizeof *off), *dv = malloc(sizeof(int) * (size_t)(g->nv > 0 ? g->nv : 1));
    if (!off || !dv) {
        free(off);
        free(dv);
        free(last);
        return;
    }
    for (int v = 0; v < g->nv; v++)
        if (last[v] >= 0 && last[v] < p->nstep) off[last[v] + 1]++;
    for (int s = 0; s < p->nstep; s++) off[s + 1] += off[s];
    int *cur = malloc(sizeof(int) * (size_t)(p->nstep > 0 ? p->nstep : 1));
    if (!cur) {
        free(off);
        free(dv);
        free(last);
        return;
    }
    memcpy(cur, off, sizeof(int) * (size_t)p->nstep);
    for (int v = 0; v < g->nv; v++)
        if (last[v] >= 0 && last[v] < p->nstep) dv[cur[last[v]]++] = v;
    free(cur);
    p->last_use = last;
    p->die_off = off;
    p->die_v = dv;
}

/* drops the run's references to the values whose last step is one of
 * [s0, s1]: made by the run, or inputs where they are donated */
static bool dead_at(const ct_graph *g, const ct_plan *p, int v, int s1, bool donate) {
    if (p->last_use[v] > s1) return false;
    return g->v[v].kind == CT_GV_NODE || (donate && g->v[v].kind == CT_GV_INPUT);
}

static void release_dead(const ct_graph *g, const ct_plan *p, ct_tensor **val, int s0, int s1, bool donate) {
    if (!p->last_use) return;
    for (int x = p->die_off[s0]; x < p->die_off[s1 + 1]; x++) {
        int v = p->die_v[x];
        if (val[v] && dead_at(g, p, v, s1, donate)) { ct_release(val[v]); val[v] = NULL; }
    }
}

/* ---- node steps ---- */
/* Contiguous copies (not recorded) of the inputs in mask that are not
 * contiguous: kernels are dispatched on what the ops' public functions gave
 * them (the tracer saw which inputs were copied). */
static ct_status contig_inputs(ct_tensor *const *in, int nin, ct_tensor **cin, uint32_t mask) {
    for (int k = 0; k < nin; k++) cin[k] = NULL;
    for (int k = 0; k < nin; k++) {
        if (!in[k]) continue;
        bool copy = k < 32 && (mask >> k & 1u) && !ct__is_contiguous(in[k]);
        cin[k] = copy ? ct__contig_as(in[k], in[k]->dtype) : ct_retain(in[k]);
        if (!cin[k]) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    return CT_OK;
}

static void release_all(ct_tensor **t, int n) {
    for (int k = 0; k < n; k++) { ct_release(t[k]); t[k] = NULL; }
}

/* meta -> allocate -> dispatch on contiguous inputs -> record with the
 * inputs as given (out[k] registered, NULL where absent). */
static ct_status run_generic(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                             const ct_args *a, uint32_t contig) {
    ct_meta m[8];
    ct_tensor *cin[32];
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (nout > 8 || nin > 32)
        return ct__error_status(CT_ERR_RUNTIME, "compile: %s: too many operands", ct__op_info[op].name);
    ct_status st = ct__meta_run(op, m, nout, in, nin, a);
    if (st) return st;
    if ((st = ct__meta_alloc(m, out, nout, NULL, in))) { release_all(out, nout); return st; }
    /* a traced ct_empty: the allocation alone (its values are never read
     * before something writes them, as in eager) */
    bool alloc_only = op == CT_OP_fill && a->p.factory.empty;
    if ((st = contig_inputs(in, nin, cin, contig)) ||
        (!alloc_only && (st = ct__dispatch(op, out, nout, cin, nin, a)))) {
        release_all(cin, nin);
        release_all(out, nout);
        return ct_last_error_code() ? ct_last_error_code() : st;
    }
    release_all(cin, nin);
    if (nout == 1) {
        out[0] = ct__finish(op, out[0], in, nin, a);
        if (!out[0] && m[0].ndim >= 0) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        return CT_OK;
    }
    ct__finish_multi(op, out, nout, in, nin, a);
    for (int k = 0; k < nout; k++)
        if (!out[k] && m[k].ndim >= 0) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    return CT_OK;
}

/* An in-place node: the op into a fresh tensor, copied into dst, recorded
 * as the in-place op (the way the indexing ops' in-place forms run). */
static ct_status run_inplace(ct_op op, ct_tensor *dst, ct_tensor *const *in, int nin, const ct_args *a,
                             uint32_t contig) {
    const ct_op_info *oi = &ct__op_info[op];
    if ((oi->flags & CT_OPF_EW) && op != CT_OP_copy && op != CT_OP_fill)
        return ct__ew(op, in, nin, a, dst) ? CT_OK : ct_last_error_code();
    if (op == CT_OP_copy && nin == 1) return ct_copy_(dst, in[0]) ? CT_OK : ct_last_error_code();
    ct_meta m;
    ct_tensor *cin[32], *r = NULL;
    if (nin > 32) return ct__error_status(CT_ERR_RUNTIME, "compile: %s: too many operands", oi->name);
    ct_status st = ct__meta_run(op, &m, 1, in, nin, a);
    if (st) return st;
    if (!ct__meta_same_sizes(&m, dst))
        return ct__error_status(CT_ERR_SHAPE, "compile: %s_: the result's shape differs from the "
                                "written tensor's %s", oi->name, ct__tshape(dst));
    if ((st = ct__inplace_begin(dst, in, nin, oi->name))) return st;
    m.flags &= ~CT_META_VIEW;
    if (!(r = ct__meta_new(&m, in)) || (st = contig_inputs(in, nin, cin, contig))) goto fail;
    ct_tensor *o1[1] = {r}, *d1[1] = {dst};
    if (ct__dispatch(op, o1, 1, cin, nin, a) || ct__dispatch(CT_OP_copy, d1, 1, o1, 1, NULL)) goto fail;
    release_all(cin, nin);
    ct_release(r);
    return ct__finish_inplace(op, dst, in, nin, a) ? CT_OK : ct_last_error_code();
fail:
    if (r) release_all(cin, nin);
    ct_release(r);
    ct__inplace_abort(dst);
    return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
}

/* The ops of ct__trace_public_replay, through their public functions. */
static ct_tensor *run_public(ct_op op, ct_tensor *const *in, int nin, const ct_args *a) {
    switch (op) {
    case CT_OP_linear: return ct_linear(in[0], in[1], nin > 2 ? in[2] : NULL);
    case CT_OP_matmul: return ct_matmul(in[0], in[1]);
    case CT_OP_mm: return ct_mm(in[0], in[1]);
    case CT_OP_bmm: return ct_bmm(in[0], in[1]);
    case CT_OP_addmm: return ct_addmm(in[0], in[1], in[2], a->p.linalg.beta, a->p.linalg.alpha);
    case CT_OP_index_select: return ct_index_select(in[0], a->p.index.dim, in[1]);
    case CT_OP_gather: return ct_gather(in[0], a->p.index.dim, in[1]);
    case CT_OP_scatter_add:
        if (nin != 3) return ct__error(CT_ERR_RUNTIME, "compile: scatter_add with %d operands", nin);
        return ct_scatter_add(in[0], a->p.index.dim, in[1], in[2]);
    case CT_OP_index_add:
        if (nin != 3) return ct__error(CT_ERR_RUNTIME, "compile: index_add with %d operands", nin);
        return ct_index_add(in[0], a->p.index.dim, in[1], in[2], a->p.index.alpha);
    default:
        return ct__error(CT_ERR_RUNTIME, "compile: %s has no public replay", ct__op_info[op].name);
    }
}

/* A random op: a fresh draw each run, as the public function draws (an
 * in-place sampler into dst, or a factory). */
static ct_status run_random(const ct_gnode *n, ct_tensor *dst, ct_tensor **res) {
    ct_args a = n->args;
    *res = NULL;
    if (dst) {
        if (ct__inplace_begin(dst, NULL, 0, ct__op_info[n->op].name)) return ct_last_error_code();
        if (ct__random_replay(n->op, dst, &a)) { ct__inplace_abort(dst); return ct_last_error_code(); }
        return ct__finish_inplace(n->op, dst, NULL, 0, &a) ? CT_OK : ct_last_error_code();
    }
    ct_meta m;
    ct_status st = ct__meta_run(n->op, &m, 1, NULL, 0, &a);
    if (st) return st;
    ct_tensor *t = ct__meta_new(&m, NULL);
    if (!t) return ct_last_error_code();
    if ((st = ct__random_replay(n->op, t, &a))) { ct_release(t); return st; }
    *res = ct__finish(n->op, t, NULL, 0, &a);
    return *res ? CT_OK : ct_last_error_code();
}

/* The fused row ops whose kernels write their result over one operand as
 * eager's modules call them (models_bert.c, transformer_fast.c: bias_act
 * into h, add_layer_norm's normalized rows into the sublayer's output);
 * the trace records them out of place.  *in_slot: that operand, *out_slot:
 * the result.  Other ops: false. */
static bool writes_over(const ct_gnode *n, int *in_slot, int *out_slot) {
    if (n->op == CT_OP_bias_act) { *in_slot = 0; *out_slot = 0; return true; }
    /* over the residual (x + residual is normalized row by row; without
     * one, operand 1 is the weight) */
    if (n->op == CT_OP_add_layer_norm && n->args.p.fused_rows.has_residual) {
        *in_slot = 1;
        *out_slot = 1;
        return true;
    }
    return false;
}

/* run_generic with out[slot] = dst (a new reference taken here): the
 * other results allocated, dst written, its version bumped */
static ct_status run_generic_over(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                                  const ct_args *a, uint32_t contig, int slot, ct_tensor *dst) {
    ct_meta m[8];
    ct_tensor *cin[32];
    bool want[8];
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (nout > 8 || nin > 32 || slot < 0 || slot >= nout)
        return ct__error_status(CT_ERR_RUNTIME, "compile: %s: too many operands", ct__op_info[op].name);
    ct_status st = ct__meta_run(op, m, nout, in, nin, a);
    if (st) return st;
    if (m[slot].dtype != dst->dtype || !ct__meta_same_sizes(&m[slot], dst))
        return run_generic(op, out, nout, in, nin, a, contig);
    for (int k = 0; k < nout; k++) want[k] = k != slot;
    if ((st = ct__meta_alloc(m, out, nout, want, in))) { release_all(out, nout); return st; }
    out[slot] = ct_retain(dst);
    if ((st = contig_inputs(in, nin, cin, contig)) || (st = ct__dispatch(op, out, nout, cin, nin, a))) {
        release_all(cin, nin);
        release_all(out, nout);
        return ct_last_error_code() ? ct_last_error_code() : st;
    }
    release_all(cin, nin);
    ct__bump_version(dst);
    ct__finish_multi(op, out, nout, in, nin, a);
    for (int k = 0; k < nout; k++)
        if (!out[k] && m[k].ndim >= 0) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    return CT_OK;
}

/* over: a value the node may write its result over (writes_over), one
 * whose last use this is and that nothing else holds (-1: none) */
static ct_status run_node_over(const ct_graph *g, const ct_gnode *n, ct_tensor **val, ct_exec_rng *rng,
                               int over);
static ct_status run_node(const ct_graph *g, const ct_gnode *n, ct_tensor **val, ct_exec_rng *rng) {
    return run_node_over(g, n, val, rng, -1);
}

static ct_status run_node_over(const ct_graph *g, const ct_gnode *n, ct_tensor **val, ct_exec_rng *rng,
                               int over) {
    ct_tensor *in_local[16], **in = n->nin <= 16 ? in_local : malloc(sizeof *in * (size_t)n->nin);
    ct_tensor *out[8];
    ct_status st = CT_OK;
    if (!in) return ct__error_status(CT_ERR_OOM, "compile: out of memory running the graph");
    for (int k = 0; k < n->nin; k++) {
        in[k] = n->in[k] >= 0 ? val[n->in[k]] : NULL;
        if (n->in[k] >= 0 && !in[k]) {
            st = ct__error_status(CT_ERR_RUNTIME, "compile: %s: input %%%d was not computed",
                                  ct__op_info[n->op].name, n->in[k]);
            goto done;
        }
    }
    const ct_op_info *oi = &ct__op_info[n->op];
    if (n->nout > 8) {
        st = ct__error_status(CT_ERR_RUNTIME, "compile: %s: too many outputs", oi->name);
        goto done;
    }
    if ((oi->flags & CT_OPF_RANDOM) && n->nin == 0 && n->nout == 1) {
        ct_tensor *d = n->dst >= 0 ? val[n->dst] : NULL, *r = NULL;
        if ((st = run_random(n, d, &r))) goto done;
        if (n->out[0] >= 0) val[n->out[0]] = ct_retain(d ? d : r);
        goto done;
    }
    if (n->dst >= 0 && ct__trace_public_replay(n->op)) {
        /* x.op_(...) of an op whose kernel takes operands its public function prepares
         * (scatter_add_, index_add_: the checked index, a copy of x to write into; its
         * kernel on the recorded operands reads out of bounds): x = op(x, ...), through
         * the public function */
        if (n->nin == 0 || n->in[0] != n->dst || n->nout != 1) {
            st = ct__error_status(CT_ERR_RUNTIME, "compile: %s_ not written into its first operand",
                                  oi->name);
            goto done;
        }
        ct_tensor *d = val[n->dst], *r = run_public(n->op, in, n->nin, &n->args);
        if (!r || !ct_copy_(d, r)) {
            st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
            goto done;
        }
        if (n->nout > 0 && n->out[0] >= 0) val[n->out[0]] = ct_retain(d);
        goto done;
    }
    if (n->dst >= 0) {
        ct_tensor *d = val[n->dst];
        if ((st = run_inplace(n->op, d, in, n->nin, &n->args, n->contig_in))) goto done;
        if (n->nout > 0 && n->out[0] >= 0) val[n->out[0]] = ct_retain(d);
        goto done;
    }
    for (int k = 0; k < n->nout; k++) out[k] = NULL;
    if (ct__trace_public_replay(n->op) && n->nout == 1) {
        out[0] = run_public(n->op, in, n->nin, &n->args);
        if (!out[0]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    } else if ((oi->flags & CT_OPF_EW) && n->op != CT_OP_copy && n->op != CT_OP_fill && n->nout == 1) {
        out[0] = ct__ew(n->op, in, n->nin, &n->args, NULL);
        if (!out[0]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    } else if ((oi->flags & CT_OPF_VIEW) && n->nout == 1) {
        /* a traced ct_detach: the same view, cut from autograd */
        if (n->op == CT_OP_as_strided && n->args.p.view.detach) out[0] = ct_detach(in[0]);
        else out[0] = ct__op(n->op, in, n->nin, &n->args);
        if (!out[0]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    } else {
        ct_args a = n->args;
        if (n->op == CT_OP_sdpa_fused && a.p.sdpa.has_dropout && n->nin >= 2) {
            /* attention dropout: a fresh draw, reserved as the public op does */
            uint64_t seed, off;
            ct__rng_reserve(ct__blocks(in[0]->sizes[0] * in[0]->sizes[1] * in[0]->sizes[2] * in[1]->sizes[2], 4),
                            &seed, &off);
            a.p.sdpa.seed = (int64_t)seed;
            a.p.sdpa.offset = (int64_t)off;
            if (rng && rng->n < 32) {
                rng->node[rng->n] = (int)(n - g->n);
                rng->seed[rng->n] = a.p.sdpa.seed;
                rng->offset[rng->n++] = a.p.sdpa.offset;
            } else if (rng) {
                st = ct__error_status(CT_ERR_RUNTIME, "compile: more than 32 attention dropouts in a graph");
                goto done;
            }
        } else if (n->op == CT_OP_sdpa_fused_backward && a.p.sdpa.has_dropout) {
            /* the draw of the forward it differentiates */
            int k = 0;
            while (rng && k < rng->n && rng->node[k] != n->link) k++;
            if (!rng || n->link < 0 || k == rng->n) {
                st = ct__error_status(CT_ERR_RUNTIME, "compile: attention backward without its forward's draw");
                goto done;
            }
            a.p.sdpa.seed = rng->seed[k];
            a.p.sdpa.offset = rng->offset[k];
        }
        int is, os;
        ct_tensor *d = over >= 0 && writes_over(n, &is, &os) && is < n->nin && n->in[is] == over
                           ? val[over] : NULL;
        /* nothing else holds it (no view, no caller), dense from its start */
        if (d && (atomic_load(&d->refcount) != 1 || !d->storage || atomic_load(&d->storage->refcount) != 1 ||
                  d->offset != 0 || !ct__is_contiguous(d)))
            d = NULL;
        st = d ? run_generic_over(n->op, out, n->nout, in, n->nin, &a, n->contig_in, os, d)
               : run_generic(n->op, out, n->nout, in, n->nin, &a, n->contig_in);
    }
    if (st) goto done;
    /* the results are in the step's scope; val holds its own references */
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0) {
            if (!out[k]) {
                st = ct__error_status(CT_ERR_RUNTIME, "compile: %s gave no output %d", oi->name, k);
                goto done;
            }
            val[n->out[k]] = ct_retain(out[k]);
        }
done:
    if (in != in_local) free(in);
    return st;
}

ct_status ct__exec_node(const ct_graph *g, const ct_gnode *n, ct_tensor **val) {
    return run_node(g, n, val, NULL);
}

ct_status ct__exec_op(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a, uint32_t contig) {
    return run_generic(op, out, nout, in, nin, a, contig);
}

/* ---- max-autotune ---- */
enum { TUNE_ROUNDS_MIN = 3, TUNE_ROUNDS_MAX = 15 };
#define TUNE_BUDGET_MS 40.0 /* rounds past the minimum while the total stays under this */
#define TUNE_MARGIN 1.02    /* the default stays unless another is faster than this */


/* what a kernel's choice depends on: its artifact, the variants, the real
 * geometry, the threads and the CPU */
static char *kcall_key(const ct_kcall *kc, const int64_t *shape, const int64_t *strides) {
    const ct_kernel *k = &kc->k;
    int nd = k->n_outer + k->n_inner;
    ct_sbuf b = {0};
    ct__sbuf_put(&b, "ctorch-kvariants-1\nartifact %s\nkernel %s\nvariants", ct__cc_key(kc->lib), k->name);
    for (int v = 0; v < kc->nvar; v++) ct__sbuf_put(&b, " %s", ct__kvariant_name(v));
    ct__sbuf_put(&b, "\nshape");
    for (int d = 0; d < nd; d++) ct__sbuf_put(&b, " %lld", (long long)shape[d]);
    for (int bf = 0; bf < k->nbuf; bf++) {
        ct__sbuf_put(&b, "\nstrides %d", bf);
        for (int d = 0; d < nd; d++) ct__sbuf_put(&b, " %lld", (long long)strides[bf * nd + d]);
    }
    ct__sbuf_put(&b, "\nthreads %d\ncpu %s %s\n", ct__num_threads(), ct_cpu_capability(), ct__cpu_model());
    if (b.oom) { free(b.s); return NULL; }
    return b.s;
}

/* "choice <name>\n" then "<name> <ms>\n" per variant (-1: rejected) */
static bool kcall_parse(ct_kcall *kc, const char *rec) {
    char name[64];
    if (sscanf(rec, "choice %63s", name) != 1) return false;
    int choice = -1;
    for (int v = 0; v < kc->nvar; v++)
        if (!strcmp(name, ct__kvariant_name(v))) choice = v;
    if (choice < 0) return false;
    for (int v = 0; v < kc->nvar; v++) {
        char pat[80];
        snprintf(pat, sizeof pat, "\n%s ", ct__kvariant_name(v));
        const char *q = strstr(rec, pat);
        kc->var_ms[v] = q ? strtod(q + strlen(pat), NULL) : -1;
    }
    kc->choice = choice;
    return true;
}

static void kcall_log(const ct_kcall *kc) {
    char t[512];
    int n = 0;
    for (int v = 0; v < kc->nvar && n < 400; v++) {
        if (kc->var_ms[v] >= 0) n += snprintf(t + n, sizeof t - (size_t)n, " %s %.4g ms", ct__kvariant_name(v), kc->var_ms[v]);
        else n += snprintf(t + n, sizeof t - (size_t)n, " %s differs", ct__kvariant_name(v));
    }
    ct__compile_log_autotune("kernel %s: %s (%s):%s", kc->k.name, ct__kvariant_name(kc->choice),
                             kc->tune_cached ? "from the cache" : "timed", t);
}

/* Chooses kc's variant on these arguments; true when the outputs now hold
 * the kernel's result (it ran), false when the caller still runs kc->fn. */
static bool tune_kcall(ct_kcall *kc, ct_tensor *const *t, char *const *bufs, const int64_t *shape,
                       const int64_t *strides) {
    const ct_kernel *k = &kc->k;
    kc->tuned = true;
    kc->choice = 0;
    for (int v = 0; v < CT_KVAR_MAX; v++) kc->var_ms[v] = -1;
    if (kc->nvar <= 1) return false;
    char *key = kcall_key(kc, shape, strides);
    char rec[1024];
    if (key && ct__tune_load(key, rec, sizeof rec) && kcall_parse(kc, rec)) {
        kc->tune_cached = true;
        kc->fn = kc->var_fn[kc->choice];
        kcall_log(kc);
        free(key);
        return false;
    }
    size_t total = 0, nbytes[16];
    for (int b = 0; b < k->nbuf; b++) {
        nbytes[b] = k->buf[b].is_out ? (size_t)ct_numel(t[b]) * ct_dtype_size(k->buf[b].dtype) : 0;
        total += nbytes[b];
    }
    char *ref = total ? malloc(total) : NULL;
    if (!ref) { /* nothing to time (empty outputs), or no memory for the copy: the default */
        free(key);
        return false;
    }
    bool ok[CT_KVAR_MAX] = {true};
    kc->var_fn[0](bufs, shape, strides);
    size_t off = 0;
    for (int b = 0; b < k->nbuf; b++) memcpy(ref + off, bufs[b], nbytes[b]), off += nbytes[b];
    for (int v = 1; v < kc->nvar; v++) {
        /* the outputs first hold the complement of the default's: an element
         * the variant does not write differs too */
        off = 0;
        for (int b = 0; b < k->nbuf; b++) {
            unsigned char *o = (unsigned char *)bufs[b];
            for (size_t i = 0; i < nbytes[b]; i++) o[i] = (unsigned char)~ref[off + i];
            off += nbytes[b];
        }
        kc->var_fn[v](bufs, shape, strides);
        ok[v] = true;
        off = 0;
        for (int b = 0; b < k->nbuf; b++) {
            if (nbytes[b] && memcmp(ref + off, bufs[b], nbytes[b])) ok[v] = false;
            off += nbytes[b];
        }
    }
    double tm[CT_KVAR_MAX][TUNE_ROUNDS_MAX];
    int nr = 0;
    double t_start = ct__now_ms();
    while (nr < TUNE_ROUNDS_MAX) {
        for (int v = 0; v < kc->nvar; v++) {
            if (!ok[v]) continue;
            double t0 = ct__now_ms();
            kc->var_fn[v](bufs, shape, strides);
            tm[v][nr] = ct__now_ms() - t0;
        }
        nr++;
        if (nr >= TUNE_ROUNDS_MIN && ct__now_ms() - t_start > TUNE_BUDGET_MS) break;
    }
    int best = 0;
    for (int v = 0; v < kc->nvar; v++) {
        if (!ok[v]) continue;
        kc->var_ms[v] = ct__median(tm[v], nr);
        if (kc->var_ms[v] < kc->var_ms[best]) best = v;
    }
    if (kc->var_ms[0] <= kc->var_ms[best] * TUNE_MARGIN) best = 0;
    kc->choice = best;
    kc->fn = kc->var_fn[best];
    off = 0; /* the default's outputs (a rejected variant may have run last) */
    for (int b = 0; b < k->nbuf; b++) memcpy(bufs[b], ref + off, nbytes[b]), off += nbytes[b];
    free(ref);
    ct_sbuf r = {0};
    ct__sbuf_put(&r, "choice %s\n", ct__kvariant_name(best));
    for (int v = 0; v < kc->nvar; v++) ct__sbuf_put(&r, "%s %.6f\n", ct__kvariant_name(v), kc->var_ms[v]);
    if (key && !r.oom) ct__tune_store(key, r.s);
    free(r.s);
    free(key);
    kcall_log(kc);
    return true;
}

/* ---- kernel steps ---- */
/* The run-time size of value v's dim d: its symbol's input size, or as traced. */
static int64_t value_size(const ct_graph *g, int v, int d, const int64_t *symv) {
    int s = g->v[v].sym[d];
    if (s >= 0 && s < g->nsym) return symv[s];
    return g->v[v].meta.sizes[d];
}

/* A kernel call's arguments: its outputs allocated (fresh contiguous
 * tensors of their values' run-time sizes), its tensors in t, the entry's
 * arguments in bufs / shape / strides. */
typedef struct kargs {
    ct_tensor *t[16];
    char *bufs[16];
    int64_t shape[CT_MAX_DIMS], strides[16 * CT_MAX_DIMS];
} kargs;

static ct_status kcall_prepare(const ct_graph *g, const ct_kcall *kc, ct_tensor **val, const int64_t *symv,
                               kargs *A) {
    const ct_kernel *k = &kc->k;
    int nd = k->n_outer + k->n_inner;
    if (!kc->fn) return ct__error_status(CT_ERR_RUNTIME, "compile: kernel %s was not built", k->name);
    if (k->nbuf > 16 || nd > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_RUNTIME, "compile: kernel %s: too many buffers or dims", k->name);
    for (int b = 0; b < k->nbuf; b++) {
        int v = kc->buf_val[b];
        if (!k->buf[b].is_out || val[v]) continue;
        const ct_gvalue *gv = &g->v[v];
        int64_t sz[CT_MAX_DIMS];
        for (int d = 0; d < gv->meta.ndim; d++) sz[d] = value_size(g, v, d, symv);
        ct_tensor *t = ct__alloc(sz, gv->meta.ndim, gv->meta.dtype, CT_CPU);
        if (!t) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        val[v] = t;
    }
    for (int b = 0; b < k->nbuf; b++) {
        A->t[b] = val[kc->buf_val[b]];
        if (!A->t[b])
            return ct__error_status(CT_ERR_RUNTIME, "compile: kernel %s: buffer %d not computed", k->name, b);
        if (!ct__has_host_data(A->t[b]))
            return ct__error_status(CT_ERR_DEVICE, "compile: kernel %s: buffer %d is on %s", k->name, b,
                                    ct_device_name(A->t[b]->storage->device));
    }
    return ct__kcall_args(kc, A->t, A->bufs, A->shape, A->strides);
}

/* After the kernel ran: its outputs' versions bumped; the values its
 * in-place writes define are the tensors it wrote. */
static void kcall_finish(const ct_kcall *kc, ct_tensor **val, const kargs *A) {
    const ct_kernel *k = &kc->k;
    for (int b = 0; b < k->nbuf; b++)
        if (k->buf[b].is_out) ct__bump_version(val[kc->buf_val[b]]);
    for (int i = 0; i < kc->ndef; i++) {
        int v = kc->def_val[i];
        if (!val[v]) val[v] = ct_retain(A->t[kc->def_buf[i]]);
    }
}

/* one profiler event per kernel (or team), named after what it fused */
static int kcall_prof_begin(const char *name, const ct_kcall *kc, const kargs *A) {
    if (__builtin_expect(!atomic_load_explicit(&ct__prof_on, memory_order_relaxed), 1)) return 0;
    ct_tensor *pin[16], *pout[16];
    int ni = 0, no = 0;
    for (int b = 0; b < kc->k.nbuf; b++) {
        if (kc->k.buf[b].is_out) pout[no++] = A->t[b];
        else pin[ni++] = A->t[b];
    }
    return ct__prof_begin(name, 1, pout, no, pin, ni, 0);
}

static ct_status run_kcall(const ct_graph *g, ct_kcall *kc, ct_tensor **val, const int64_t *symv) {
    kargs A;
    ct_status st = kcall_prepare(g, kc, val, symv, &A);
    if (st) return st;
    int pe = kcall_prof_begin(kc->k.name, kc, &A);
    if (kc->tuned || !tune_kcall(kc, A.t, A.bufs, A.shape, A.strides)) kc->fn(A.bufs, A.shape, A.strides);
    ct__prof_end(pe);
    kcall_finish(kc, val, &A);
    return CT_OK;
}

/* A team (ct_plan_step.team_len): its kernels' arguments made first, then
 * one parallel region in which every thread calls each kernel's __team
 * entry in turn; each entry's tasks are shared out with no barrier, so a
 * thread done with its part of one kernel goes on to the next (the kernels
 * touch disjoint memory: mark_teams in lower.c).  A team with too little
 * work for a region (below the kernels' own threshold), one thread, or a
 * call from inside a parallel region runs kernel by kernel as usual. */
static ct_status run_team(const ct_graph *g, const ct_plan *p, const ct_plan_step *ps, ct_tensor **val,
                          const int64_t *symv) {
    int n = ps->team_len;
    kargs *A = malloc(sizeof *A * (size_t)n);
    if (!A) return ct__error_status(CT_ERR_OOM, "compile: out of memory running a team of kernels");
    ct_status st = CT_OK;
    int64_t work = 0;
    bool teamable = true;
    for (int j = 0; j < n && !st; j++) {
        const ct_kcall *kc = &p->kc[ps[j].kcall];
        if (!(st = kcall_prepare(g, kc, val, symv, &A[j]))) {
            int64_t w = 1;
            for (int d = 0; d < kc->k.n_outer + kc->k.n_inner; d++) w *= A[j].shape[d];
            work += w;
            teamable = teamable && kc->team_fn;
        }
    }
    int threads = 1;
#ifdef _OPENMP
    threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#endif
    if (!st && (!teamable || threads < 2 || work < CT_TEAM_MIN_WORK)) {
        for (int j = 0; j < n; j++) {
            const ct_kcall *kc = &p->kc[ps[j].kcall];
            int pe = kcall_prof_begin(kc->k.name, kc, &A[j]);
            kc->fn(A[j].bufs, A[j].shape, A[j].strides);
            ct__prof_end(pe);
            kcall_finish(kc, val, &A[j]);
        }
    } else if (!st) {
        char name[96];
        snprintf(name, sizeof name, "team%d_%s", n, p->kc[ps[0].kcall].k.name);
        int pe = kcall_prof_begin(name, &p->kc[ps[0].kcall], &A[0]);
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
        for (int j = 0; j < n; j++) p->kc[ps[j].kcall].team_fn(A[j].bufs, A[j].shape, A[j].strides);
        ct__prof_end(pe);
        for (int j = 0; j < n; j++) kcall_finish(&p->kc[ps[j].kcall], val, &A[j]);
    }
    free(A);
    return st;
}

/* Kernels write inputs and constants in place (p->wroot), trusting the
 * trace that no other input or constant shares their memory: a call whose
 * tensors do (the same tensor passed twice, a view of another input) is
 * refused here, before anything ran (compile.c then runs it eagerly).
 * Values the trace saw on one storage (g->v[].alias) are allowed. */
static ct_status check_written(const ct_graph *g, const ct_plan *p, ct_tensor **val) {
    if (!p->nwroot) return CT_OK;
    int cap = 16;
    while (cap < 2 * p->nwroot) cap *= 2;
    struct { const void *s; int v; } *h = calloc((size_t)cap, sizeof *h);
    if (!h) return ct__error_status(CT_ERR_OOM, "compile: out of memory running the graph");
    ct_status st = CT_OK;
    for (int i = 0; i < p->nwroot && !st; i++) {
        const void *s = val[p->wroot[i]] ? val[p->wroot[i]]->storage : NULL;
        if (!s) continue;
        size_t j = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull >> 7 & (size_t)(cap - 1);
        while (h[j].s && h[j].s != s) j = (j + 1) & (size_t)(cap - 1);
        if (h[j].s) st = CT_ERR_ARG;
        h[j].s = s;
        h[j].v = p->wroot[i];
    }
    for (int v = 0; v < g->nv && !st; v++) {
        if (g->v[v].kind == CT_GV_NODE || !val[v]) continue;
        const void *s = val[v]->storage;
        size_t j = ((uintptr_t)s >> 4) * 0x9E3779B97F4A7C15ull >> 7 & (size_t)(cap - 1);
        while (h[j].s && h[j].s != s) j = (j + 1) & (size_t)(cap - 1);
        if (h[j].s && h[j].v != v && g->v[v].alias != h[j].v) st = CT_ERR_ARG;
    }
    free(h);
    if (st)
        return ct__error_status(st, "compile: an input or constant shares memory with a tensor the "
                                "compiled graph writes in place (not so when it was traced)");
    return CT_OK;
}


/* ---- node steps with an implementation choice (max-autotune) ---- */
static ct_status run_routed(const ct_graph *g, const ct_gnode *n, int kind, int route, ct_tensor **val,
                            ct_exec_rng *rng) {
    if (route == 0 || kind < 0 || kind >= CT_ROUTE_NKIND) return run_node(g, n, val, rng);
    signed char old = ct__route[kind];
    ct__route[kind] = (signed char)route;
    ct_status st = run_node(g, n, val, rng);
    ct__route[kind] = old;
    return st;
}

/* a node that can run again with the same result and no effect */
static bool node_retimable(const ct_gnode *n, ct_tensor *const *val) {
    const ct_op_info *oi = &ct__op_info[n->op];
    if (n->dst >= 0 || n->nout < 1 || (oi->flags & (CT_OPF_RANDOM | CT_OPF_VIEW))) return false;
    if ((n->op == CT_OP_sdpa_fused || n->op == CT_OP_sdpa_fused_backward) && n->args.p.sdpa.has_dropout)
        return false;
    bool grad = ct_is_grad_enabled();
    for (int k = 0; k < n->nin; k++) {
        ct_tensor *x = n->in[k] >= 0 ? val[n->in[k]] : NULL;
        if (x && grad && ct_requires_grad(x)) return false; /* autograd would record each run */
    }
    return true;
}

static char *node_key(const ct_gnode *n, ct_tensor *const *val) {
    ct_sbuf b = {0};
    ct__sbuf_put(&b, "ctorch-route-1\nop %s\nargs %llx\n", ct__op_info[n->op].name,
                 (unsigned long long)ct__args_hash(&n->args));
    for (int k = 0; k < n->nin; k++) {
        const ct_tensor *x = n->in[k] >= 0 ? val[n->in[k]] : NULL;
        if (!x) { ct__sbuf_put(&b, "in %d none\n", k); continue; }
        ct__sbuf_put(&b, "in %d %s", k, ct_dtype_name(x->dtype));
        for (int d = 0; d < x->ndim; d++) ct__sbuf_put(&b, " %lld:%lld", (long long)x->sizes[d], (long long)x->strides[d]);
        ct__sbuf_put(&b, "\n");
    }
    ct__sbuf_put(&b, "threads %d\ncpu %s %s\n", ct__num_threads(), ct_cpu_capability(), ct__cpu_model());
    if (b.oom) { free(b.s); return NULL; }
    return b.s;
}

static void drop_outputs(const ct_gnode *n, ct_tensor **val) {
    for (int k = 0; k < n->nout; k++)
        if (n->out[k] >= 0) { ct_release(val[n->out[k]]); val[n->out[k]] = NULL; }
}

static void step_log(const ct_gnode *n, const ct_plan_step *ps) {
    ct__compile_log_autotune("op %s: %s (%s): %s %.4g ms, %s %.4g ms", ct__op_info[n->op].name,
                             ct__route_name(ps->route_kind, ps->route), ps->tune_cached ? "from the cache" : "timed",
                             ct__route_name(ps->route_kind, 1), ps->route_ms[0], ct__route_name(ps->route_kind, 2),
                             ps->route_ms[1]);
}

/* runs node step ps of a max-autotune plan, choosing its implementation
 * on its first run */
static ct_status run_step_tuned(const ct_graph *g, ct_plan_step *ps, ct_tensor **val, ct_exec_rng *rng) {
    const ct_gnode *n = &g->n[ps->node];
    if (ps->tuned) return run_routed(g, n, ps->route_kind, ps->route, val, rng);
    ps->tuned = true;
    ps->route = 0;
    if (!node_retimable(n, val)) return run_node(g, n, val, rng);
    char *key = node_key(n, val);
    char rec[256];
    int kind, route;
    double m1, m2;
    if (key && ct__tune_load(key, rec, sizeof rec) &&
        sscanf(rec, "kind %d\nchoice %d\nms %lf %lf", &kind, &route, &m1, &m2) == 4 && kind >= 0 &&
        kind < CT_ROUTE_NKIND && (route == 1 || route == 2)) {
        free(key);
        ps->route_kind = (signed char)kind;
        ps->route = (signed char)route;
        ps->route_ms[0] = m1, ps->route_ms[1] = m2;
        ps->tune_cached = true;
        step_log(n, ps);
        return run_routed(g, n, kind, route, val, rng);
    }
    /* does the backend consult a choice here?  (run with every override
     * set to the first implementation; its result stands when none was read) */
    signed char saved[CT_ROUTE_NKIND];
    for (int k = 0; k < CT_ROUTE_NKIND; k++) {
        saved[k] = ct__route[k];
        ct__route[k] = 1;
        ct__route_seen[k] = false;
    }
    ct_scope sc = ct_scope_begin();
    ct_status st = run_node(g, n, val, rng);
    ct_scope_end(sc);
    kind = -1;
    for (int k = CT_ROUTE_NKIND - 1; k >= 0 && !st; k--)
        if (ct__route_seen[k] && kind < 0) kind = k; /* the convolution's before the GEMM inside it */
    for (int k = 0; k < CT_ROUTE_NKIND; k++) ct__route[k] = saved[k];
    if (st || kind < 0) { free(key); return st; }
    ps->route_kind = (signed char)kind;
    int o0 = n->out[0]; /* the first implementation's result, for the check */
    ct_tensor *ref = o0 >= 0 ? ct_retain(val[o0]) : NULL;
    double tm[2][TUNE_ROUNDS_MAX];
    int nr = 0;
    bool ok2 = true;
    /* route 2 once untimed (its first call may build and cache what it needs) */
    drop_outputs(n, val);
    sc = ct_scope_begin();
    st = run_routed(g, n, kind, 2, val, rng);
    if (!st && ref && val[o0] && ref->dtype == val[o0]->dtype && ct_dtype_is_floating(ref->dtype)) {
        int r = ct_allclose(val[o0], ref, 1e-3, 1e-4, true);
        ok2 = r == 1;
        if (r < 0) ct_clear_error();
    }
    ct_scope_end(sc);
    if (st) { /* the second implementation failed where the first ran: keep the first */
        ct_clear_error();
        ok2 = false;
        st = CT_OK;
    }
    double t_start = ct__now_ms();
    while (ok2 && nr < TUNE_ROUNDS_MAX && !st) {
        for (int r = 1; r <= 2 && !st; r++) {
            drop_outputs(n, val);
            sc = ct_scope_begin();
            double t0 = ct__now_ms();
            st = run_routed(g, n, kind, r, val, rng);
            tm[r - 1][nr] = ct__now_ms() - t0;
            ct_scope_end(sc);
        }
        nr++;
        if (nr >= TUNE_ROUNDS_MIN && ct__now_ms() - t_start > TUNE_BUDGET_MS) break;
    }
    ct_release(ref);
    if (st) { free(key); return st; }
    if (!ok2) { /* the second disagrees (or fails): the library's rule, untimed */
        ct__compile_log_autotune("op %s: %s differs from %s or failed; the library's rule", ct__op_info[n->op].name,
                                 ct__route_name(kind, 2), ct__route_name(kind, 1));
        free(key);
        drop_outputs(n, val);
        return run_node(g, n, val, rng);
    }
    ps->route_ms[0] = ct__median(tm[0], nr);
    ps->route_ms[1] = ct__median(tm[1], nr);
    ps->route = (signed char)(ps->route_ms[1] < ps->route_ms[0] ? 2 : 1);
    if (ps->route == 1) { /* the value in val must be the chosen one's (route 2 ran last) */
        drop_outputs(n, val);
        if ((st = run_routed(g, n, kind, ps->route, val, rng))) { free(key); return st; }
    }
    if (key) {
        char r[160];
        snprintf(r, sizeof r, "kind %d\nchoice %d\nms %.6f %.6f\n", kind, ps->route, ps->route_ms[0], ps->route_ms[1]);
        ct__tune_store(key, r);
    }
    free(key);
    step_log(n, ps);
    return CT_OK;
}

ct_status ct__exec(const ct_graph *g, const ct_plan *p, ct_tensor *const *in, int nin,
                   ct_tensor **out, int nout) {
    ct_exec_rng rng = {0};
    return ct__exec_rng(g, p, in, nin, out, nout, &rng);
}

ct_status ct__exec_rng(const ct_graph *g, const ct_plan *p, ct_tensor *const *in, int nin,
                       ct_tensor **out, int nout, ct_exec_rng *rng) {
    return ct__exec_donated(g, p, (ct_tensor **)in, nin, out, nout, rng, false);
}

ct_status ct__exec_donated(const ct_graph *g, const ct_plan *p, ct_tensor **in, int nin,
                           ct_tensor **out, int nout, ct_exec_rng *rng, bool donate) {
    if (!g || !p || (nin > 0 && !in) || !out) {
        if (donate && in)
            for (int k = 0; k < nin; k++) { ct_release(in[k]); in[k] = NULL; }
        return ct__error_status(CT_ERR_NULL, "compile: exec: NULL argument");
    }
    if (nin != g->nin || nout != g->nout) {
        if (donate)
            for (int k = 0; k < nin; k++) { ct_release(in[k]); in[k] = NULL; }
        return ct__error_status(CT_ERR_ARG, "compile: exec: the graph takes %d inputs and %d outputs, "
                                "got %d and %d", g->nin, g->nout, nin, nout);
    }
    for (int k = 0; k < nout; k++) out[k] = NULL;
    /* the symbols' values, read before a donated input can go */
    int64_t symv[64];
    for (int s = 0; s < g->nsym && s < 64; s++) {
        const ct_tensor *t = in[g->sym_in[s]];
        symv[s] = t ? t->sizes[g->sym_dim[s]] : 0;
    }
    if (g->nfold) {
        ct_status fs = ct__graph_refresh_folds(g);
        if (fs) return fs;
    }
    ct_tensor **val = calloc((size_t)(g->nv > 0 ? g->nv : 1), sizeof *val);
    ct_tensor **res = calloc((size_t)nout, sizeof *res);
    if (!val || !res) {
        free(val);
        free(res);
        if (donate)
            for (int k = 0; k < nin; k++) { ct_release(in[k]); in[k] = NULL; }
        return ct__error_status(CT_ERR_OOM, "compile: out of memory running the graph");
    }
    ct_status st = CT_OK;
    /* donated: the run owns the inputs' references (val takes them over) */
    for (int k = 0; k < nin; k++) {
        val[g->inputs[k]] = donate ? in[k] : ct_retain(in[k]);
        if (donate) in[k] = NULL;
    }
    for (int k = 0; k < nin && !st; k++)
        if (!val[g->inputs[k]]) st = ct__null_arg_status("compiled_call", "input %d", k);
    if (st) goto out;
    for (int i = 0; i < g->nv; i++)
        if (g->v[i].kind == CT_GV_CONST) val[i] = ct_retain(g->consts[g->v[i].index]);
    if ((st = check_written(g, p, val))) goto out;
    ct_scope s = ct_scope_begin();
    for (int i = 0; i < p->nstep && !st; i++) {
        const ct_plan_step *ps = &p->step[i];
        if (ps->node >= 0) {
            /* a node step's results (and its ops' temporaries) in a scope of
             * their own: val holds its references, so a result goes when
             * liveness drops it, not when the run ends */
            ct_scope ss = ct_scope_begin();
            const ct_gnode *n = &g->n[ps->node];
            int over = -1, is, os;
            if (!p->autotune && p->last_use && writes_over(n, &is, &os) && is < n->nin && n->in[is] >= 0 &&
                g->v[n->in[is]].kind == CT_GV_NODE && p->last_use[n->in[is]] == i) {
                over = n->in[is];
                for (int k = 0; k < n->nin; k++)
                    if (k != is && n->in[k] == over) over = -1;
            }
            st = p->autotune ? run_step_tuned(g, &p->step[i], val, rng) : run_node_over(g, n, val, rng, over);
            ct_scope_end(ss);
        } else if (ps->kcall >= 0 && ps->team_len >= 2 && i + ps->team_len <= p->nstep) {
            st = run_team(g, p, ps, val, symv);
            if (!st) release_dead(g, p, val, i, i + ps->team_len - 1, donate);
            i += ps->team_len - 1;
            continue;
        } else if (ps->kcall >= 0) st = run_kcall(g, &p->kc[ps->kcall], val, symv);
        if (!st) release_dead(g, p, val, i, i, donate);
    }
    for (int k = 0; k < nout && !st; k++) {
        int v = g->outputs[k];
        if (v < 0 || !val[v]) st = ct__error_status(CT_ERR_RUNTIME, "compile: output %d was not computed", k);
        else res[k] = ct_retain(val[v]);
    }
    ct_scope_end(s);
out:
    for (int i = 0; i < g->nv; i++) ct_release(val[i]);
    free(val);
    for (int k = 0; k < nout; k++) {
        if (st) ct_release(res[k]);
        else out[k] = ct__register(res[k]);
    }
    free(res);
    return st;
}
