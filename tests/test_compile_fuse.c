/* test_compile_fuse.c -- the compiler's passes, fusion and code generation
 * (src/compile/passes.c, lower.c, codegen.c) on hand-built graphs.
 *
 * A graph is built by running each op eagerly on real tensors (the eager
 * result is the reference) and recording it as a node with its parameters;
 * then lowered, each kernel rendered and built by a private helper here
 * (cc -O3 -march=native -fopenmp -shared, dlopen), and the plan run by a
 * small interpreter (node steps through the op layer, kernel steps through
 * ct__kcall_args).  Every output is compared with the eager result (rtol
 * 1e-5 / atol 1e-6 for floats, exact for integers).  Covered: pointwise
 * chains, broadcasting, non-contiguous inputs, f32/f64/i32/i64, casts, sum /
 * mean / amax over the last dim, dim 0 and all, sibling reductions,
 * softmax / log_softmax / layer_norm rows, one build over two shapes
 * (sizes and strides are run-time arguments), DCE / CSE / folding counts,
 * and a seeded random-graph fuzzer (CT_FUZZ_ITERS for a longer run). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compile/compile_impl.h"
#include "ctorch/ctorch.h"
#include "ops/ew.h"

extern int ct__lower_min_nodes;

/* ---- graph building by eager recording ------------------------------------------- */
typedef struct tb {
    ct_graph g;
    ct_tensor *t[512]; /* per value: the eager tensor */
    int nin;
    ct_tensor *in[16];
} tb;

static void tb_init(tb *b) {
    memset(b, 0, sizeof *b);
    ct__graph_init(&b->g);
}
static void tb_free(tb *b) {
    for (int i = 0; i < b->g.nv; i++) ct_release(b->t[i]);
    ct__graph_free(&b->g);
}
static void meta_of(const ct_tensor *t, ct_meta *m) {
    memset(m, 0, sizeof *m);
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->device = CT_CPU;
    for (int d = 0; d < t->ndim; d++) m->sizes[d] = t->sizes[d], m->strides[d] = t->strides[d];
}
static int tb_input(tb *b, ct_tensor *t) {
    ct_meta m;
    meta_of(t, &m);
    int v = ct__graph_value(&b->g, CT_GV_INPUT, b->g.nin, 0, &m);
    b->g.inputs = realloc(b->g.inputs, sizeof(int) * (size_t)(b->g.nin + 1));
    b->g.inputs[b->g.nin++] = v;
    b->in[b->nin++] = t;
    b->t[v] = ct_retain(t);
    return v;
}
static int tb_const(tb *b, ct_tensor *t) {
    ct_meta m;
    meta_of(t, &m);
    ct_graph *g = &b->g;
    g->consts = realloc(g->consts, sizeof(ct_tensor *) * (size_t)(g->nconst + 1));
    g->cap_const = g->nconst + 1;
    g->consts[g->nconst] = ct_retain(t);
    int v = ct__graph_value(g, CT_GV_CONST, g->nconst++, 0, &m);
    b->t[v] = ct_retain(t);
    return v;
}
static int tb_num(tb *b, double x) {
    ct_tensor *w;
    if (x == floor(x)) {
        w = ct_empty(NULL, 0, CT_I64);
        *(int64_t *)ct__ptr(w) = (int64_t)x;
        w->flags |= CT_TF_WRAPPED;
        ct_retain(w);
    } else {
        w = ct__wrapped_tmp(x);
    }
    int v = tb_const(b, w);
    ct_release(w);
    return v;
}
/* runs op eagerly and records it; returns output 0's value (others follow) */
/* the op layer's entry for a recorded node: elementwise ops through their
 * driver (it converts the inputs to the compute dtype), the rest ct__op_multi */
static ct_status run_op(ct_op op, ct_tensor **ot, int nout, ct_tensor *const *it, int nin, const ct_args *a) {
    if ((ct__op_info[op].flags & CT_OPF_EW) && op != CT_OP_copy && op != CT_OP_fill) {
        ot[0] = ct__ew(op, it, nin, a, NULL);
        return ot[0] ? CT_OK : ct_last_error_code();
    }
    return ct__op_multi(op, ot, nout, it, nin, a);
}
static int tb_op(tb *b, ct_op op, const ct_args *a, const int *in, int nin, int nout) {
    ct_tensor *it[8], *ot[4] = {0};
    for (int k = 0; k < nin; k++) it[k] = b->t[in[k]];
    ct_args args = a ? *a : ct__args(op);
    ct_status st = run_op(op, ot, nout, it, nin, &args);
    if (st) fail_msg("%s: %s", ct__op_info[op].name, ct_last_error());
    int n = ct__graph_node(&b->g, op, &args, in, nin, nout, -1);
    assert_true(n >= 0);
    int first = -1;
    for (int k = 0; k < nout; k++) {
        if (!ot[k]) continue;
        ct_meta m;
        meta_of(ot[k], &m);
        int v = ct__graph_value(&b->g, CT_GV_NODE, n, k, &m);
        b->g.n[n].out[k] = v;
        b->t[v] = ct_retain(ot[k]);
        if (first < 0) first = v;
    }
    return first;
}
static void tb_out(tb *b, int v) {
    b->g.outputs = realloc(b->g.outputs, sizeof(int) * (size_t)(b->g.nout + 1));
    b->g.outputs[b->g.nout++] = v;
}

static int un(tb *b, ct_op op, int x) { return tb_op(b, op, NULL, &x, 1, 1); }
static int bin(tb *b, ct_op op, int x, int y) { return tb_op(b, op, NULL, (int[]){x, y}, 2, 1); }
static int cast(tb *b, int x, ct_dtype dt) {
    ct_args a = ct__copy_args(dt, CT_CPU, NULL, 0);
    return tb_op(b, CT_OP_copy, &a, &x, 1, 1);
}
static int red(tb *b, ct_op op, int x, const int64_t *dims, int nd, bool keepdim) {
    ct_tensor *t = b->t[x];
    ct_args a = ct__args(op);
    ct_p_reduce *p = &a.p.reduce;
    if (nd == 0) {
        for (int d = 0; d < t->ndim; d++) p->reduced[d] = 1;
        p->whole = true;
    }
    for (int k = 0; k < nd; k++) p->reduced[(dims[k] + t->ndim) % t->ndim] = 1;
    int64_t inner = 1;
    for (int d = 0; d < t->ndim; d++)
        if (p->reduced[d]) inner *= t->sizes[d];
    p->reduced_n = t->ndim;
    p->keepdim = keepdim;
    p->inner = inner;
    return tb_op(b, op, &a, &x, 1, 1);
}
static int softmax(tb *b, ct_op op, int x, int dim) {
    ct_tensor *t = b->t[x];
    ct_args a = ct__args(op);
    dim = (dim + t->ndim) % t->ndim;
    int64_t pre = 1, post = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (d < dim) pre *= t->sizes[d];
        if (d > dim) post *= t->sizes[d];
    }
    a.p.scan.dim = dim, a.p.scan.pre = pre, a.p.scan.n = t->sizes[dim], a.p.scan.post = post;
    return tb_op(b, op, &a, &x, 1, 1);
}
static int layer_norm(tb *b, int x, int w, int bias, double eps) {
    ct_tensor *t = b->t[x];
    ct_args a = ct__args(CT_OP_layer_norm_fwd);
    a.p.layer_norm.normalized_numel = t->sizes[t->ndim - 1];
    a.p.layer_norm.has_weight = w >= 0;
    a.p.layer_norm.has_bias = bias >= 0;
    a.p.layer_norm.eps = eps;
    int in[3] = {x}, n = 1;
    if (w >= 0) in[n++] = w;
    if (bias >= 0) in[n++] = bias;
    return tb_op(b, CT_OP_layer_norm_fwd, &a, in, n, 3);
}

/* ---- a private builder (until build.c lands) -------------------------------------- */
static void *cc_build(const char *src, const char *name, void **lib) {
    char dir[] = "/tmp/ct_fuse_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    char path[256], so[256], cmd[1024];
    snprintf(path, sizeof path, "%s/k.c", dir);
    snprintf(so, sizeof so, "%s/k.so", dir);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(src, f);
    fclose(f);
    const char *cc = getenv("CC");
    snprintf(cmd, sizeof cmd, "%s -std=gnu11 -O3 -march=native -ffp-contract=off -fopenmp -fPIC -shared -o %s %s -lm 2>%s/log",
             cc && *cc ? cc : "cc", so, path, dir);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof cmd, "cat %s/log | head -20; cat -n %s | head -80", dir, path);
        if (system(cmd)) {}
        return NULL;
    }
    *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    unlink(so);
    unlink(path);
    snprintf(cmd, sizeof cmd, "%s/log", dir);
    unlink(cmd);
    rmdir(dir);
    if (!*lib) return NULL;
    return dlsym(*lib, name);
}

typedef struct built {
    ct_plan p;
    void *libs[64];
} built;

static void plan_build(built *B) {
    for (int i = 0; i < B->p.nkc; i++) {
        char *src = ct__render(&ct__target_c, &B->p.kc[i].k, 1);
        assert_non_null(src);
        if (getenv("CT_FUSE_SHOW")) fprintf(stderr, "%s\n", src);
        B->p.kc[i].fn = (ct_kernel_entry)cc_build(src, B->p.kc[i].k.name, &B->libs[i]);
        free(src);
        assert_non_null(B->p.kc[i].fn);
    }
}
static void plan_free(built *B) {
    for (int i = 0; i < B->p.nkc; i++) {
        free(B->p.kc[i].k.inst);
        if (B->libs[i]) dlclose(B->libs[i]);
    }
    free(B->p.kc);
    free(B->p.step);
}

/* runs the plan over inputs in[]; vals[v] receive every value computed */
static void run_kcall(const ct_graph *g, const ct_kcall *kc, ct_tensor **vals) {
    ct_tensor *t[16];
    for (int bf = 0; bf < kc->k.nbuf; bf++) {
        int v = kc->buf_val[bf];
        if (!kc->k.buf[bf].is_out) {
            t[bf] = vals[v];
            assert_non_null(t[bf]);
        }
    }
    /* outputs: shapes of their values, with symbolic sizes taken from the iteration */
    int64_t shape[CT_MAX_DIMS], strides[16 * CT_MAX_DIMS];
    char *bufs[16];
    int nd = kc->k.n_outer + kc->k.n_inner;
    for (int d = 0; d < nd; d++) {
        int bf = kc->shape_buf[d];
        assert_false(kc->k.buf[bf].is_out);
        shape[d] = t[bf]->sizes[kc->shape_dim[d]];
    }
    for (int bf = 0; bf < kc->k.nbuf; bf++) {
        if (!kc->k.buf[bf].is_out) continue;
        const ct_gvalue *x = &g->v[kc->buf_val[bf]];
        int64_t sz[CT_MAX_DIMS];
        for (int j = 0; j < x->meta.ndim; j++) {
            sz[j] = x->meta.sizes[j];
            for (int d = 0; d < nd; d++)
                if (kc->dim_map[bf][d] == j) sz[j] = shape[d];
        }
        t[bf] = ct_empty(sz, x->meta.ndim, x->meta.dtype);
        assert_non_null(t[bf]);
        vals[kc->buf_val[bf]] = t[bf];
    }
    assert_int_equal(ct__kcall_args(kc, t, bufs, shape, strides), CT_OK);
    kc->fn(bufs, shape, strides);
}

static void run_plan(const ct_graph *g, const ct_plan *p, ct_tensor *const *in, ct_tensor **vals) {
    for (int v = 0; v < g->nv; v++) {
        vals[v] = NULL;
        if (g->v[v].kind == CT_GV_INPUT) vals[v] = in[g->v[v].index];
        if (g->v[v].kind == CT_GV_CONST) vals[v] = g->consts[g->v[v].index];
    }
    for (int s = 0; s < p->nstep; s++) {
        if (p->step[s].kcall >= 0) {
            run_kcall(g, &p->kc[p->step[s].kcall], vals);
            continue;
        }
        const ct_gnode *n = &g->n[p->step[s].node];
        ct_tensor *it[8], *ot[4] = {0};
        for (int k = 0; k < n->nin; k++) it[k] = vals[n->in[k]];
        assert_int_equal(run_op(n->op, ot, n->nout, it, n->nin, &n->args), CT_OK);
        for (int k = 0; k < n->nout; k++)
            if (n->out[k] >= 0) vals[n->out[k]] = ot[k];
    }
}

static bool close_to(ct_tensor *a, ct_tensor *e, double rtol, double atol) {
    if (!a || a->ndim != e->ndim || a->dtype != e->dtype) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->sizes[d] != e->sizes[d]) return false;
    ct_tensor *ac = ct_contiguous(a), *ec = ct_contiguous(e);
    int64_t n = ct_numel(a);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        const char *pa = (const char *)ct__ptr(ac) + i * (int64_t)ct_dtype_size(a->dtype);
        const char *pe = (const char *)ct__ptr(ec) + i * (int64_t)ct_dtype_size(a->dtype);
        if (ct_dtype_is_floating(a->dtype)) {
            double x = ct__load_f64(pa, a->dtype), y = ct__load_f64(pe, a->dtype);
            if (isnan(x) && isnan(y)) continue;
            if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
                fprintf(stderr, "  element %lld: got %.9g, eager %.9g\n", (long long)i, x, y);
                ok = false;
            }
        } else if (memcmp(pa, pe, ct_dtype_size(a->dtype)) != 0) {
            fprintf(stderr, "  element %lld: got %lld, eager %lld\n", (long long)i,
                    (long long)ct__load_i64(pa, a->dtype), (long long)ct__load_i64(pe, a->dtype));
            ok = false;
        }
    }
    return ok;
}

/* lowers, builds, runs b's graph over its own inputs: every output equals eager;
 * returns the number of kernels */
static int check(tb *b, int want_kernels) {
    built B;
    memset(&B, 0, sizeof B);
    assert_int_equal(ct__lower(&b->g, NULL, &B.p), CT_OK);
    if (want_kernels >= 0) assert_int_equal(B.p.nkc, want_kernels);
    plan_build(&B);
    ct_tensor **vals = calloc((size_t)b->g.nv, sizeof *vals);
    ct_scope s = ct_scope_begin();
    run_plan(&b->g, &B.p, b->in, vals);
    for (int k = 0; k < b->g.nout; k++) {
        int v = b->g.outputs[k];
        double rtol = b->t[v]->dtype == CT_F64 ? 1e-10 : 1e-5, atol = b->t[v]->dtype == CT_F64 ? 1e-12 : 1e-6;
        if (!close_to(vals[v], b->t[v], rtol, atol)) fail_msg("output %d differs from eager", k);
    }
    ct_scope_end(s);
    free(vals);
    int n = B.p.nkc;
    plan_free(&B);
    return n;
}

static ct_tensor *rnd(const int64_t *shape, int nd, ct_dtype dt) {
    if (dt == CT_F32 || dt == CT_F64) return ct_randn(shape, nd, dt);
    return ct_randint(-50, 50, shape, nd, dt);
}

/* ---- tests ------------------------------------------------------------------------- */
static void t_pointwise_chain(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(37, 129), CT_F32));
    ct_args ga = ct__args(CT_OP_gelu);
    int h = bin(&b, CT_OP_add, bin(&b, CT_OP_mul, x, tb_num(&b, 1.5)), tb_num(&b, 0.25));
    int y = tb_op(&b, CT_OP_gelu, &ga, &h, 1, 1);
    tb_out(&b, y);
    check(&b, 1);
    tb_free(&b);
    ct_scope_end(s);
}

static void t_chain_sum(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(64, 300), CT_F32));
    ct_args ga = ct__args(CT_OP_gelu);
    int h = bin(&b, CT_OP_add, bin(&b, CT_OP_mul, x, tb_num(&b, 1.5)), tb_num(&b, 0.25));
    int gl = tb_op(&b, CT_OP_gelu, &ga, &h, 1, 1);
    tb_out(&b, red(&b, CT_OP_sum, gl, (int64_t[]){-1}, 1, false));
    check(&b, 1);
    /* the gelu values are wanted too: stored by the same kernel */
    tb_out(&b, gl);
    check(&b, 1);
    tb_free(&b);
    ct_scope_end(s);
}

static void t_broadcast_noncontig(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    ct_tensor *base = rnd(CT_SHAPE(40, 24), CT_F32);
    int x = tb_input(&b, ct_transpose(base, 0, 1)); /* [24, 40], strides (1, 24) */
    int bias = tb_input(&b, rnd(CT_SHAPE(40), CT_F32));
    int col = tb_input(&b, rnd(CT_SHAPE(24, 1), CT_F32));
    int y = un(&b, CT_OP_relu, bin(&b, CT_OP_sub, bin(&b, CT_OP_add, x, bias), col));
    tb_out(&b, y);
    tb_out(&b, red(&b, CT_OP_amax, y, (int64_t[]){0}, 1, true));
    check(&b, -1);
    tb_free(&b);
    ct_scope_end(s);
}

static void t_dtypes_casts(void **st) {
    (void)st;
    ct_dtype dts[] = {CT_I32, CT_I64, CT_F64, CT_F32};
    for (int i = 0; i < 4; i++) {
        ct_scope s = ct_scope_begin();
        tb b;
        tb_init(&b);
        int x = tb_input(&b, rnd(CT_SHAPE(17, 33), dts[i]));
        int z = tb_input(&b, rnd(CT_SHAPE(33), dts[i]));
        int y = bin(&b, CT_OP_add, bin(&b, CT_OP_mul, x, tb_num(&b, 3)), z);
        y = un(&b, CT_OP_abs, y);
        int c = cast(&b, y, CT_F64);
        tb_out(&b, bin(&b, CT_OP_mul, c, tb_num(&b, 0.5)));
        tb_out(&b, red(&b, CT_OP_sum, y, (int64_t[]){1}, 1, false));
        tb_out(&b, bin(&b, CT_OP_gt, y, tb_num(&b, 10)));
        check(&b, -1);
        tb_free(&b);
        ct_scope_end(s);
    }
}

static void t_reductions(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(50, 70), CT_F32));
    int e = un(&b, CT_OP_tanh, bin(&b, CT_OP_mul, x, tb_num(&b, 0.3)));
    tb_out(&b, red(&b, CT_OP_sum, e, (int64_t[]){0}, 1, false));
    check(&b, 1);
    tb_free(&b);
    tb_init(&b);
    x = tb_input(&b, rnd(CT_SHAPE(50, 70), CT_F64));
    e = un(&b, CT_OP_exp, bin(&b, CT_OP_mul, x, tb_num(&b, 0.3)));
    tb_out(&b, red(&b, CT_OP_mean, e, NULL, 0, false));
    check(&b, 1);
    tb_free(&b);
    /* siblings over the same input: one kernel, one loop */
    tb_init(&b);
    x = tb_input(&b, rnd(CT_SHAPE(33, 65), CT_F32));
    e = un(&b, CT_OP_sin, x);
    int m = red(&b, CT_OP_amax, e, (int64_t[]){-1}, 1, true);
    int su = red(&b, CT_OP_sum, e, (int64_t[]){-1}, 1, true);
    int pr = red(&b, CT_OP_amin, e, (int64_t[]){-1}, 1, true);
    tb_out(&b, bin(&b, CT_OP_div, bin(&b, CT_OP_sub, e, m), su));
    tb_out(&b, pr);
    check(&b, 1);
    tb_free(&b);
    ct_scope_end(s);
}

static void t_rows(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(6, 20, 77), CT_F32));
    int y = softmax(&b, CT_OP_softmax, bin(&b, CT_OP_mul, x, tb_num(&b, 2)), -1);
    tb_out(&b, y);
    tb_out(&b, softmax(&b, CT_OP_log_softmax, bin(&b, CT_OP_sub, x, tb_num(&b, 1)), 1));
    check(&b, -1);
    tb_free(&b);
    for (int dt = 0; dt < 2; dt++) {
        ct_dtype d = dt ? CT_F64 : CT_F32;
        tb_init(&b);
        x = tb_input(&b, rnd(CT_SHAPE(9, 130), d));
        int w = tb_input(&b, rnd(CT_SHAPE(130), d)), bi = tb_input(&b, rnd(CT_SHAPE(130), d));
        int ln = layer_norm(&b, bin(&b, CT_OP_add, x, tb_num(&b, 0.5)), w, bi, 1e-5);
        tb_out(&b, un(&b, CT_OP_relu, ln));
        tb_out(&b, ln + 2); /* rstd */
        check(&b, 1);
        tb_free(&b);
    }
    /* a lone softmax stays the eager node; with min 1 it is a kernel */
    tb_init(&b);
    x = tb_input(&b, rnd(CT_SHAPE(8, 31), CT_F32));
    tb_out(&b, softmax(&b, CT_OP_softmax, x, -1));
    check(&b, 0);
    ct__lower_min_nodes = 1;
    check(&b, 1);
    ct__lower_min_nodes = 2;
    tb_free(&b);
    ct_scope_end(s);
}

/* one build, two shapes: the sizes are run-time arguments */
static void t_symbolic(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(16, 40), CT_F32));
    int y = red(&b, CT_OP_sum, un(&b, CT_OP_sigmoid, bin(&b, CT_OP_mul, x, tb_num(&b, 2))),
                (int64_t[]){-1}, 1, false);
    tb_out(&b, y);
    b.g.v[x].sym[0] = 0;
    b.g.v[x].sym[1] = 1;
    b.g.nsym = 2;
    built B;
    memset(&B, 0, sizeof B);
    assert_int_equal(ct__lower(&b.g, NULL, &B.p), CT_OK);
    assert_int_equal(B.p.nkc, 1);
    plan_build(&B);
    for (int k = 0; k < 2; k++) {
        ct_tensor *xi = k ? rnd(CT_SHAPE(5, 1000), CT_F32) : b.in[0];
        ct_tensor *want = ct_sum(ct_sigmoid(ct_mul_scalar(xi, 2)), (int64_t[]){-1}, 1, false);
        ct_tensor *vals[64] = {0};
        run_plan(&b.g, &B.p, &xi, vals);
        assert_true(close_to(vals[y], want, 1e-5, 1e-6));
    }
    plan_free(&B);
    tb_free(&b);
    ct_scope_end(s);
}

static void t_passes(void **st) {
    (void)st;
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    int x = tb_input(&b, rnd(CT_SHAPE(4, 5), CT_F32));
    int c = bin(&b, CT_OP_mul, tb_num(&b, 2), tb_num(&b, 3)); /* folds */
    int a1 = bin(&b, CT_OP_mul, x, c);
    int a2 = bin(&b, CT_OP_mul, c, x); /* the same (commutative) */
    int dead = un(&b, CT_OP_exp, x);   /* unused */
    (void)dead;
    int e1 = un(&b, CT_OP_exp, bin(&b, CT_OP_add, x, tb_num(&b, 1)));
    int e2 = un(&b, CT_OP_exp, bin(&b, CT_OP_add, x, tb_num(&b, 1))); /* wrapped 1 twice */
    tb_out(&b, bin(&b, CT_OP_add, bin(&b, CT_OP_add, a1, a2), bin(&b, CT_OP_mul, e1, e2)));
    int nf = 0, nc = 0, nd = 0;
    assert_int_equal(ct__pass_fold(&b.g, &nf), CT_OK);
    assert_int_equal(ct__pass_cse(&b.g, &nc), CT_OK);
    assert_int_equal(ct__pass_dce(&b.g, &nd), CT_OK);
    assert_int_equal(nf, 1);
    assert_int_equal(nc, 3); /* a2, the second add, the second exp */
    assert_int_equal(nd, 1);
    check(&b, 1);
    tb_free(&b);
    ct_scope_end(s);
}

/* random graphs of elementwise / reduction / broadcast ops */
static uint64_t rng_s;
static uint32_t rng(void) {
    rng_s = rng_s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_s >> 33);
}
static void fuzz_one(uint64_t seed) {
    rng_s = seed;
    ct_manual_seed(seed);
    ct_scope s = ct_scope_begin();
    tb b;
    tb_init(&b);
    ct_dtype dt = rng() % 3 == 0 ? CT_F64 : CT_F32;
    int64_t R = 1 + rng() % 40, C = 1 + rng() % 70;
    int vals[64], nv = 0;
    int x0 = tb_input(&b, rnd(CT_SHAPE(R, C), dt));
    vals[nv++] = x0;
    if (rng() % 2) vals[nv++] = tb_input(&b, ct_transpose(rnd(CT_SHAPE(C, R), dt), 0, 1));
    if (rng() % 2) vals[nv++] = tb_input(&b, rnd(CT_SHAPE(C), dt));
    if (rng() % 2) vals[nv++] = tb_input(&b, rnd(CT_SHAPE(R, 1), dt));
    static const ct_op un_ops[] = {CT_OP_neg, CT_OP_tanh, CT_OP_sigmoid, CT_OP_relu, CT_OP_sin,
                                   CT_OP_abs, CT_OP_square, CT_OP_exp};
    static const ct_op bin_ops[] = {CT_OP_add, CT_OP_mul, CT_OP_sub, CT_OP_maximum, CT_OP_minimum};
    int nops = 2 + (int)(rng() % 8);
    for (int i = 0; i < nops && nv < 60; i++) {
        int a = vals[rng() % nv];
        int r;
        switch (rng() % 6) {
        case 0: case 1:
            r = un(&b, un_ops[rng() % 8], a);
            if (r >= 0 && b.t[r]->ndim == 2 && rng() % 2) r = un(&b, CT_OP_tanh, r); /* keep values small */
            break;
        case 2: case 3: r = bin(&b, bin_ops[rng() % 5], a, vals[rng() % nv]); break;
        case 4: r = bin(&b, CT_OP_mul, a, tb_num(&b, (double)(rng() % 7) * 0.25 - 0.5)); break;
        default: {
            ct_tensor *t = b.t[a];
            if (t->ndim != 2) { r = un(&b, CT_OP_neg, a); break; }
            ct_op ro[] = {CT_OP_sum, CT_OP_mean, CT_OP_amax, CT_OP_amin};
            int64_t dim = rng() % 2;
            r = red(&b, ro[rng() % 4], un(&b, CT_OP_tanh, a), &dim, 1, true);
        }
        }
        vals[nv++] = r;
        if (rng() % 4 == 0) tb_out(&b, r);
    }
    tb_out(&b, vals[nv - 1]);
    ct__passes_run(&b.g);
    check(&b, -1);
    tb_free(&b);
    ct_scope_end(s);
}
static void t_fuzz(void **st) {
    (void)st;
    const char *e = getenv("CT_FUZZ_ITERS");
    int n = e ? atoi(e) : 12;
    for (int i = 0; i < n; i++) fuzz_one(1000 + (uint64_t)i);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_pointwise_chain), cmocka_unit_test(t_chain_sum),
        cmocka_unit_test(t_broadcast_noncontig), cmocka_unit_test(t_dtypes_casts),
        cmocka_unit_test(t_reductions), cmocka_unit_test(t_rows),
        cmocka_unit_test(t_symbolic), cmocka_unit_test(t_passes),
        cmocka_unit_test(t_fuzz),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
