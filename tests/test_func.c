/* test_func.c -- function transforms (func.h, issue 20): the ct_func
 * object the transforms share; the reverse-mode transforms (grad,
 * grad_and_value, vjp, jacrev, hessian) and stacked module state against
 * torch.func (tests/fixtures/func.txt, tools/fixtures/gen_func.py), run on
 * contiguous and non-contiguous inputs; nesting, the caller's tensors left
 * alone, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <cmocka.h>
#include <ctorch/ctorch.h>
#include "test_util.h"
#include "fixture.h"
#include "core/tensor_impl.h" /* ct__error_status for a run function's own checks */

static ct_status f_sin_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_sin(in[0]), NULL, 0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

static ct_status f_fails_half(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_exp(in[0]);                         /* made, then the function fails */
    out[1] = ct_matmul(in[0], in[0]);               /* [3] @ [3] is fine; [3,1] fails below */
    return out[1] ? CT_OK : ct_last_error_code();
}

static ct_status f_leaves_null(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)in; (void)nin; (void)out; (void)nout; (void)ctx;
    return CT_OK;
}

static ct_status f_identity(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = in[0];
    return CT_OK;
}

static void t_call(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_func *f = ct_func_new(f_sin_sum, NULL);
    assert_non_null(f);
    ct_tensor *x = ct_from_array((float[]){0.5f, 1.0f, 2.0f}, (int64_t[]){3}, 1, CT_F32);
    ct_tensor *y = NULL;
    assert_int_equal(ct_func_call(f, &x, 1, &y, 1), CT_OK);
    assert_true(fabs(ct_item(y) - (sin(0.5) + sin(1.0) + sin(2.0))) < 1e-6);
    /* through the ct_fn adapter (what ct_compile takes) */
    ct_tensor *y2 = NULL;
    assert_int_equal(ct_func_fn(&x, 1, &y2, 1, f), CT_OK);
    assert_true(ct_item(y2) == ct_item(y));
    /* references: a retained function survives one free */
    assert_ptr_equal(ct_func_retain(f), f);
    ct_func_free(f);
    assert_int_equal(ct_func_call(f, &x, 1, &y, 1), CT_OK);
    ct_func_free(f);
    SCOPE_END;
}

static int freed;
static void count_free(void *ctx) { (void)ctx; freed++; }

static void t_owned_ctx(void **state) {
    (void)state;
    freed = 0;
    ct_func *f = ct_func_new_owned(f_sin_sum, &freed, count_free);
    ct_func_retain(f);
    ct_func_free(f);
    assert_int_equal(freed, 0);
    ct_func_free(f);
    assert_int_equal(freed, 1);
}

static void t_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    expect_err(ct_func_new(NULL, NULL), CT_ERR_ARG, "fn is NULL");
    ct_tensor *y[2] = {NULL, NULL};
    assert_int_equal(ct_func_call(NULL, NULL, 0, y, 1), CT_ERR_ARG);
    ct_clear_error();
    /* a failing function: its error, its outputs NULL, nothing leaked */
    ct_func *f = ct_func_new(f_fails_half, NULL);
    ct_tensor *x = ct_ones((int64_t[]){3, 1}, 2, CT_F32);
    int64_t live = ct_live_tensors();
    assert_int_equal(ct_func_call(f, &x, 1, y, 2), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "matmul"));
    assert_null(y[0]);
    assert_null(y[1]);
    assert_int_equal(ct_live_tensors(), live);
    ct_clear_error();
    ct_func_free(f);
    /* CT_OK with an output left NULL is an error naming it */
    f = ct_func_new(f_leaves_null, NULL);
    assert_int_equal(ct_func_call(f, &x, 1, y, 1), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "output 0 of 1 NULL"));
    ct_clear_error();
    ct_func_free(f);
    /* an input returned as it is: the caller gets a reference of its own */
    f = ct_func_new(f_identity, NULL);
    assert_int_equal(ct_func_call(f, &x, 1, y, 1), CT_OK);
    assert_ptr_equal(y[0], x);
    ct_func_free(f);
    SCOPE_END;
}

/* ======================================================================
 * Reverse-mode transforms against torch.func (tests/fixtures/func.txt)
 * ====================================================================== */

#define OK_OR(t) ((t) ? CT_OK : ct_last_error_code())
/* a call that must succeed; the error message otherwise */
#define CALL_OK(expr)                                                    \
    do {                                                                 \
        ct_status st_ = (expr);                                          \
        if (st_) fail_msg("%s: %s: %s", #expr, ct_status_name(st_), ct_last_error()); \
    } while (0)

/* sum(sin(x) * x^2) */
static ct_status fn_sin_x2(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_mul(ct_sin(in[0]), ct_square(in[0])), NULL, 0, false);
    return OK_OR(out[0]);
}
static ct_status fn_sin_x2_ew(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_mul(ct_sin(in[0]), ct_square(in[0]));
    return OK_OR(out[0]);
}
/* cross_entropy(tanh(x W1 + b1) W2 + b2, y): in x y W1 b1 W2 b2 */
static ct_status fn_mlp_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *h = ct_tanh(ct_add(ct_matmul(in[0], in[2]), in[3]));
    out[0] = ct_cross_entropy(ct_add(ct_matmul(h, in[4]), in[5]), in[1], NULL);
    return OK_OR(out[0]);
}
static ct_status fn_softmax(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_softmax(in[0], -1);
    return OK_OR(out[0]);
}
static ct_status fn_lse(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_logsumexp(in[0], CT_SHAPE(1), false);
    return OK_OR(out[0]);
}
static ct_status fn_lse_all(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_logsumexp(ct_reshape(in[0], CT_SHAPE(-1)), CT_SHAPE(0), false);
    return OK_OR(out[0]);
}
/* (sum(x y) + sum(x^3), aux exp(x)) */
static ct_status fn_aux(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)ctx;
    out[0] = ct_add(ct_sum(ct_mul(in[0], in[1]), NULL, 0, false),
                    ct_sum(ct_pow_scalar(in[0], 3), NULL, 0, false));
    if (nout > 1) out[1] = ct_exp(in[0]);
    return OK_OR(out[0] && (nout < 2 || out[1]));
}
/* (x y, sin(x) + y^2) */
static ct_status fn_multi(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)ctx;
    out[0] = ct_mul(in[0], in[1]);
    if (nout > 1) out[1] = ct_add(ct_sin(in[0]), ct_square(in[1]));
    return OK_OR(out[0] && (nout < 2 || out[1]));
}

/* gen_func.py's views(w): w [12], W = w.view(3, 4) */
static ct_status fn_views(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *w = in[0], *W = ct_reshape(w, CT_SHAPE(3, 4));
    ct_tensor *idx = ct_from_doubles((double[]){1, 3, 3, 0}, CT_SHAPE(4), CT_I64);
    ct_tensor *t1 = ct_sum(ct_square(ct_narrow(w, 0, 2, 5)), NULL, 0, false);
    ct_tensor *t2 = ct_sum(ct_mul(ct_sin(ct_select(W, 1, 2)), ct_diagonal(W, 1, 0, 1)), NULL, 0, false);
    ct_tensor *t3 = ct_sum(ct_pow_scalar(ct_as_strided(ct_contiguous(w), (int64_t[]){2, 2}, (int64_t[]){3, 1}, 2, 1), 3), NULL, 0,
                           false);
    ct_tensor *t4 = ct_sum(ct_mul(ct_index_select(w, 0, idx), ct_select(ct_unfold(w, 0, 4, 3), 0, 1)), NULL, 0, false);
    ct_tensor *e = ct_expand(ct_narrow(w, 0, 0, 4), CT_SHAPE(3, 4));
    ct_tensor *t5 = ct_sum(ct_mul(ct_square(ct_slice(W, 1, 0, 4, 2)), ct_slice(e, 1, 1, 4, 2)), NULL, 0, false);
    out[0] = ct_add(ct_add(ct_add(t1, t2), ct_add(t3, t4)), t5);
    return OK_OR(out[0]);
}

typedef struct fx_fn { const char *name; ct_fn fn; int nout; } fx_fn;
static const fx_fn k_fns[] = {
    {"sin_x2", fn_sin_x2, 1}, {"sin_x2_ew", fn_sin_x2_ew, 1}, {"mlp_loss", fn_mlp_loss, 1},
    {"softmax", fn_softmax, 1}, {"lse", fn_lse, 1}, {"lse_all", fn_lse_all, 1},
    {"aux", fn_aux, 2}, {"multi", fn_multi, 2}, {"views", fn_views, 1},
};

static const fx_fn *find_fn(const char *name) {
    for (size_t i = 0; i < sizeof k_fns / sizeof k_fns[0]; i++)
        if (!strcmp(k_fns[i].name, name)) return &k_fns[i];
    return NULL;
}

static bool label_is(const fx_case *c, const char *tr) {
    size_t n = strlen(tr);
    return !strncmp(c->label, tr, n) && (c->label[n] == 0 || c->label[n] == '.');
}

/* vjp: primals then one cotangent per output; outputs f's outputs, then the
 * gradients -- vjp_fn is called twice and must give the same bits */
static ct_status run_vjp(const fx_case *c, const fx_fn *d, ct_tensor *const *in, ct_tensor **out) {
    int np = c->nin - d->nout;
    ct_func *f = ct_func_new(d->fn, NULL), *pb = NULL;
    ct_status st = ct_func_vjp(f, in, np, out, d->nout, false, &pb);
    if (!st) st = ct_func_call(pb, in + np, d->nout, out + d->nout, np);
    ct_tensor *again[FX_MAX_T];
    if (!st) st = ct_func_call(pb, in + np, d->nout, again, np);
    for (int j = 0; !st && j < np; j++)
        if (ct_equal(again[j], out[d->nout + j]) != 1)
            st = ct__error_status(CT_ERR_RUNTIME, "vjp_fn: a second call gave other values");
    ct_func_free(pb);
    ct_func_free(f);
    return st;
}

/* grad, grad_and_value, jacrev, jacfwd (forward mode), hessian. */
static ct_status run_transform(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    const fx_fn *d = find_fn(c->op);
    if (!d) return CT_ERR_ARG;
    if (label_is(c, "vjp")) return run_vjp(c, d, in, out);
    int64_t an[8];
    int argn[8];
    int na = fx_ints(c, "argnums", an, 8);
    for (int k = 0; k < na; k++) argn[k] = (int)an[k];
    ct_func_grad_opts o = {argn, na, fx_i(c, "has_aux", 0) != 0};
    ct_func *f = ct_func_new(d->fn, NULL), *t = NULL;
    if (label_is(c, "grad")) t = ct_func_grad(f, &o);
    else if (label_is(c, "grad_and_value")) t = ct_func_grad_and_value(f, &o);
    else if (label_is(c, "jacrev")) t = ct_func_jacrev(f, &o);
    else if (label_is(c, "jacfwd")) t = ct_func_jacfwd(f, &o);
    else if (label_is(c, "hessian")) t = ct_func_hessian(f, &o);
    ct_status st = t ? ct_func_call(t, in, c->nin, out, c->nout) : ct_last_error_code();
    /* the caller's tensors are untouched */
    for (int k = 0; k < c->nin && !st; k++)
        if (ct_requires_grad(in[k]) || ct_grad(in[k]))
            st = ct__error_status(CT_ERR_RUNTIME, "an input was made to require grad");
    for (int k = 0; k < c->nout && !st; k++)
        if (ct_requires_grad(out[k])) st = ct__error_status(CT_ERR_RUNTIME, "a result requires grad");
    ct_func_free(t);
    ct_func_free(f);
    return st;
}

/* ---- modules: per-sample gradients and ensembles ------------------------ */

static ct_module *make_model(const char *which) {
    ct_dtype prev = ct_get_default_dtype();
    assert_int_equal(ct_set_default_dtype(CT_F64), CT_OK);
    ct_module *l[5] = {0};
    int n = 0;
    if (!strcmp(which, "mlp")) {
        l[n++] = ct_linear_new(4, 8, true);
        l[n++] = ct_tanh_new();
        l[n++] = ct_linear_new(8, 3, true);
    } else if (!strcmp(which, "cnn")) {
        l[n++] = ct_conv2d_new(1, 3, (int64_t[]){3, 3}, NULL);
        l[n++] = ct_relu_new();
        l[n++] = ct_max_pool2d_new((int64_t[]){2, 2}, NULL, NULL, NULL, false, false);
        l[n++] = ct_flatten_new(1, -1);
        l[n++] = ct_linear_new(27, 5, true);
    } else { /* mlp_bn */
        l[n++] = ct_linear_new(4, 6, true);
        l[n++] = ct_batch_norm1d_new(6, 1e-5, 0.1, true, true);
        l[n++] = ct_relu_new();
        l[n++] = ct_linear_new(6, 3, true);
    }
    ct_module *m = ct_sequential_new(l, n);
    for (int i = 0; i < n; i++) ct_module_release(l[i]);
    assert_int_equal(ct_set_default_dtype(prev), CT_OK);
    assert_non_null(m);
    return m;
}

/* names of a comma-separated list into a sample of tensors */
static ct_sample *named_sample(const char *list, ct_tensor *const *ts, int *n) {
    ct_sample *s = ct_sample_new();
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    *n = 0;
    for (char *sv = NULL, *tok = strtok_r(buf, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        assert_int_equal(ct_sample_set(s, tok, ts[*n]), CT_OK);
        (*n)++;
    }
    return s;
}

/* cross_entropy(model(params, x), t): ctx is the functional call */
static ct_status fn_model_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nout;
    ct_tensor *y;
    ct_status st = ct_func_call((ct_func *)ctx, in, nin - 1, &y, 1);
    if (st) return st;
    out[0] = ct_cross_entropy(y, in[nin - 1], NULL);
    return OK_OR(out[0]);
}

/* the same loss of one sample without its batch dim: in = params..., x, t */
static ct_status fn_sample_loss(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    ct_tensor *args[16];
    for (int k = 0; k < nin - 2; k++) args[k] = in[k];
    args[nin - 2] = ct_unsqueeze(in[nin - 2], 0);
    args[nin - 1] = ct_unsqueeze(in[nin - 1], 0);
    return fn_model_loss(args, nin, out, nout, ctx);
}

/* per-sample gradients as torch.func computes them: vmap(grad(loss)) over
 * the samples, the parameters shared -- every op batched (no per-sample
 * fallback, no loop of the function) -- and equal to grad of the loss per
 * sample in a loop */
static ct_status run_per_sample(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_module *m = make_model(c->op);
    int np;
    ct_sample *ps = named_sample(fx_s(c, "pnames", ""), in, &np);
    ct_func *fm = ct_func_functional_call(m, ps, NULL);
    ct_func *loss = ct_func_new(fn_model_loss, fm), *sloss = ct_func_new(fn_sample_loss, fm);
    int argn[8];
    for (int k = 0; k < np; k++) argn[k] = k;
    ct_func *g = ct_func_grad(loss, &(ct_func_grad_opts){argn, np, false});
    ct_func *sg = ct_func_grad(sloss, &(ct_func_grad_opts){argn, np, false});
    int64_t in_dims[10];
    for (int k = 0; k < np; k++) in_dims[k] = CT_VMAP_NONE;
    in_dims[np] = in_dims[np + 1] = 0;
    ct_vmap_opts vo = CT_VMAP_DEFAULT;
    vo.in_dims = in_dims;
    vo.n_in_dims = np + 2;
    ct_func *vg = ct_vmap(sg, &vo);
    ct_tensor *x = in[np], *t = in[np + 1];
    int64_t B = ct_size(x, 0);
    ct_tensor *per[8][16];
    ct_status st = g && vg ? CT_OK : ct_last_error_code();
    for (int64_t b = 0; b < B && !st; b++) {
        ct_tensor *args[10];
        for (int k = 0; k < np; k++) args[k] = in[k];
        args[np] = ct_unsqueeze(ct_select(x, 0, b), 0);
        args[np + 1] = ct_unsqueeze(ct_select(t, 0, b), 0);
        ct_tensor *gs[8];
        st = ct_func_call(g, args, np + 2, gs, np);
        for (int k = 0; k < np && !st; k++) per[k][b] = gs[k];
    }
    ct_vmap_reset_stats();
    if (!st) st = ct_func_call(vg, in, np + 2, out, np);
    if (!st) {
        ct_vmap_stats vs = ct_vmap_get_stats();
        if (vs.loop_calls || vs.fallback_ops || vs.batched_ops == 0)
            fail_msg("%s: vmap(grad) ran %lld ops batched, %lld per sample, %lld calls as a loop (%s)", c->op,
                     (long long)vs.batched_ops, (long long)vs.fallback_ops, (long long)vs.loop_calls,
                     ct_vmap_last_loop_reason());
        for (int k = 0; k < np; k++) {
            ct_tensor *loop = ct_stack(per[k], (int)B, 0);
            assert_int_equal(ct_allclose(out[k], loop, 1e-12, 1e-14, false), 1);
        }
    }
    ct_func_free(vg);
    ct_func_free(sg);
    ct_func_free(g);
    ct_func_free(sloss);
    ct_func_free(loss);
    ct_func_free(fm);
    ct_sample_free(ps);
    ct_module_release(m);
    return st;
}

/* an ensemble: three models loaded from the stacked state, stacked again by
 * ct_func_stack_module_state (the same tensors and names), each evaluated
 * through the functional call on its slice (equal to its own forward) */
static ct_status run_ensemble(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int np, nb;
    ct_sample *sp = named_sample(fx_s(c, "pnames", ""), in, &np);
    ct_sample *sb = named_sample(fx_s(c, "bnames", ""), in + np, &nb);
    ct_tensor *x = in[np + nb];
    int64_t N = ct_size(in[0], 0);
    ct_module *models[4];
    ct_status st = CT_OK;
    for (int64_t i = 0; i < N; i++) {
        models[i] = make_model(c->label);
        ct_sample *sd = ct_sample_new();
        for (int k = 0; k < np + nb && !st; k++)
            st = ct_sample_set(sd, k < np ? ct_sample_name(sp, k) : ct_sample_name(sb, k - np),
                               ct_select(in[k], 0, i));
        if (!st) st = ct_module_load_state_dict(models[i], sd, true);
        ct_sample_free(sd);
        ct_module_eval(models[i]);
    }
    ct_sample *params = NULL, *buffers = NULL;
    if (!st) st = ct_func_stack_module_state(models, (int)N, &params, &buffers);
    if (!st) {
        assert_int_equal(ct_sample_count(params), np);
        assert_int_equal(ct_sample_count(buffers), nb);
        for (int k = 0; k < np; k++) {
            assert_string_equal(ct_sample_name(params, k), ct_sample_name(sp, k));
            assert_int_equal(ct_equal(ct_sample_at(params, k), in[k]), 1);
            assert_true(ct_requires_grad(ct_sample_at(params, k)));
            assert_true(ct_is_leaf(ct_sample_at(params, k)));
        }
        for (int k = 0; k < nb; k++) {
            assert_string_equal(ct_sample_name(buffers, k), ct_sample_name(sb, k));
            assert_int_equal(ct_equal(ct_sample_at(buffers, k), in[np + k]), 1);
            assert_false(ct_requires_grad(ct_sample_at(buffers, k)));
        }
    }
    ct_func *fm = st ? NULL : ct_func_functional_call(models[0], params, buffers);
    if (!st && !fm) st = ct_last_error_code();
    ct_tensor *ys[4];
    for (int64_t i = 0; i < N && !st; i++) {
        ct_tensor *args[16];
        for (int k = 0; k < np; k++) args[k] = ct_select(ct_sample_at(params, k), 0, i);
        for (int k = 0; k < nb; k++) args[np + k] = ct_select(ct_sample_at(buffers, k), 0, i);
        args[np + nb] = x;
        st = ct_func_call(fm, args, np + nb + 1, &ys[i], 1);
        if (!st) {
            ct_tensor *own = ct_module_forward1(models[i], x);
            assert_int_equal(ct_allclose(own, ys[i], 0, 0, false), 1);
            ys[i] = ct_detach(ys[i]);
        }
    }
    if (!st) st = OK_OR(out[0] = ct_stack(ys, (int)N, 0));
    ct_func_free(fm);
    ct_sample_free(params);
    ct_sample_free(buffers);
    for (int64_t i = 0; i < N; i++) ct_module_release(models[i]);
    ct_sample_free(sp);
    ct_sample_free(sb);
    return st;
}

/* sum(narrow(w, 0, 2, 5)^2): the Hessian is 2 on the narrowed diagonal, 0
 * elsewhere.  A slice's backward writes the gradient into a view of zeros
 * in place with grad mode off: forward over reverse (hessian is jacfwd of
 * jacrev, jvp of grad) needs that view to know its base, or the zeros get
 * no tangent and the Hessian is 0 (the bug this pins) */
static ct_status fn_narrow_sq(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    out[0] = ct_sum(ct_square(ct_narrow(in[0], 0, 2, 5)), NULL, 0, false);
    return OK_OR(out[0]);
}
/* sum(W[:, 1]^2 * 3) + sum(diagonal(W)^3), W [3, 4]: select and diagonal */
static ct_status fn_select_diag(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *W = in[0];
    out[0] = ct_add(ct_sum(ct_mul_scalar(ct_square(ct_select(W, 1, 1)), 3.0), NULL, 0, false),
                    ct_sum(ct_pow_scalar(ct_diagonal(W, 0, 0, 1), 3), NULL, 0, false));
    return OK_OR(out[0]);
}

static void t_hessian_slices(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *w = ct_randn(CT_SHAPE(9), CT_F64), *H, *g, *hv;
    ct_func *f = ct_func_new(fn_narrow_sq, NULL), *h = ct_func_hessian(f, NULL), *df = ct_func_grad(f, NULL);
    for (int rg = 0; rg < 2; rg++) {
        /* rg: w requires grad outside (the backward is then recorded) */
        if (rg) assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
        assert_int_equal(ct_func_call(h, &w, 1, &H, 1), CT_OK);
        const double *p = ct_data_ptr(ct_contiguous(H));
        for (int i = 0; i < 9; i++)
            for (int j = 0; j < 9; j++) assert_true(p[i * 9 + j] == (i == j && i >= 2 && i < 7 ? 2.0 : 0.0));
        /* jvp of grad: the Hessian-vector product H v = 2 v on the slice */
        ct_tensor *v = ct_randn(CT_SHAPE(9), CT_F64);
        assert_int_equal(ct_func_jvp(df, &w, &v, 1, &g, &hv, 1), CT_OK);
        ct_tensor *want = ct_mul(ct_mv(ct_detach(H), v), ct_ones(CT_SHAPE(9), CT_F64));
        assert_int_equal(ct_allclose(hv, want, 0, 1e-15, false), 1);
        assert_true(ct_item(ct_select(hv, 0, 3)) != 0.0);
    }
    /* select and diagonal of a non-contiguous W (a transposed [4, 3]):
     * d2/dW[i,1]^2 = 6, d2/dW[i,i]^2 = 6 W[i,i] (and 6 + 6 W[1,1] at [1,1]) */
    ct_tensor *W = ct_transpose(ct_randn(CT_SHAPE(4, 3), CT_F64), 0, 1);
    ct_func *f2 = ct_func_new(fn_select_diag, NULL), *h2 = ct_func_hessian(f2, NULL);
    assert_int_equal(ct_func_call(h2, &W, 1, &H, 1), CT_OK);
    assert_int_equal(ct_ndim(H), 4);
    ct_tensor *Hm = ct_contiguous(ct_reshape(H, CT_SHAPE(12, 12)));
    const double *hp = ct_data_ptr(Hm);
    for (int a = 0; a < 12; a++)
        for (int b = 0; b < 12; b++) {
            int i = a / 4, j = a % 4;
            double want = 0.0;
            if (a == b) want = (j == 1 ? 6.0 : 0.0) + (i == j ? 6.0 * ct_item(ct_select(ct_select(W, 0, i), 0, j)) : 0.0);
            assert_true(fabs(hp[a * 12 + b] - want) < 1e-13);
        }
    ct_func_free(h2);
    ct_func_free(f2);
    ct_func_free(df);
    ct_func_free(h);
    ct_func_free(f);
    SCOPE_END;
}

static void t_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors(); /* the runner owns its tensors: no scope around it */
    const fx_op table[] = {
        {"sin_x2", run_transform, 0, 0},  {"sin_x2_ew", run_transform, 0, 0},
        {"mlp_loss", run_transform, 0, 0}, {"softmax", run_transform, 0, 0},
        {"lse", run_transform, 0, 0},      {"lse_all", run_transform, 0, 0},
        {"aux", run_transform, 0, 0},      {"multi", run_transform, 0, 0},
        {"views", run_transform, 0, 0},
        {"mlp", run_per_sample, 0, 0},     {"cnn", run_per_sample, 0, 0},
        {"ensemble", run_ensemble, 0, 0},
    };
    int fails = fx_run_file(CT_FIXTURE_DIR "/func.txt", table, sizeof table / sizeof table[0]);
    fx_print_summary();
    assert_int_equal(fails, 0);
    assert_int_equal(ct_live_tensors(), live);
}

/* ---- nesting and ordinary autograd ----------------------------------------- */

static double d0(double x) { return sin(x) * x * x; }
static double d2(double x) { return (2 - x * x) * sin(x) + 4 * x * cos(x); }
static double d3(double x) { return (6 - x * x) * cos(x) - 6 * x * sin(x); }

/* grad(grad(f)) and grad(grad(grad(f))) of sin(x) x^2 at 0-dim x */
static void t_grad_of_grad(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_func *f = ct_func_new(fn_sin_x2, NULL);
    ct_func *g1 = ct_func_grad(f, NULL), *g2 = ct_func_grad(g1, NULL), *g3 = ct_func_grad(g2, NULL);
    ct_func *gv = ct_func_grad_and_value(g1, NULL);
    const double xs[] = {0.0, 1.3, -2.1};
    for (int i = 0; i < 3; i++) {
        ct_tensor *x = ct_scalar(xs[i], CT_F64), *y2, *y3, *gvo[2];
        assert_int_equal(ct_func_call(g2, &x, 1, &y2, 1), CT_OK);
        assert_int_equal(ct_func_call(g3, &x, 1, &y3, 1), CT_OK);
        assert_true(fabs(ct_item(y2) - d2(xs[i])) < 1e-12);
        assert_true(fabs(ct_item(y3) - d3(xs[i])) < 1e-12);
        assert_false(ct_requires_grad(y2));
        assert_false(ct_requires_grad(y3));
        /* grad_and_value of the gradient: f'' then f' */
        assert_int_equal(ct_func_call(gv, &x, 1, gvo, 2), CT_OK);
        assert_true(ct_item(gvo[0]) == ct_item(y2));
        double d1 = cos(xs[i]) * xs[i] * xs[i] + 2 * xs[i] * sin(xs[i]);
        assert_true(fabs(ct_item(gvo[1]) - d1) < 1e-12);
        assert_false(ct_requires_grad(x));
    }
    (void)d0;
    /* hessian (jacfwd of jacrev) of the elementwise function is diagonal:
     * diag(f'') on a [4] input */
    ct_func *fe = ct_func_new(fn_sin_x2_ew, NULL), *h = ct_func_hessian(f, NULL);
    ct_tensor *x = ct_from_doubles((double[]){0.0, 0.5, -1.0, 2.0}, CT_SHAPE(4), CT_F64), *H;
    assert_int_equal(ct_func_call(h, &x, 1, &H, 1), CT_OK);
    assert_int_equal(ct_ndim(H), 2);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            double v = ct_item(ct_select(ct_select(H, 0, i), 0, j));
            double xi = ((double[]){0.0, 0.5, -1.0, 2.0})[i];
            assert_true(fabs(v - (i == j ? d2(xi) : 0.0)) < 1e-12);
        }
    ct_func_free(h);
    ct_func_free(fe);
    ct_func_free(gv);
    ct_func_free(g3);
    ct_func_free(g2);
    ct_func_free(g1);
    ct_func_free(f);
    SCOPE_END;
}

/* f(x) = sum(w * x^2) with w reached through ctx */
static ct_status fn_closure(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout;
    out[0] = ct_sum(ct_mul((ct_tensor *)ctx, ct_square(in[0])), NULL, 0, false);
    return OK_OR(out[0]);
}
static ct_status fn_xy(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_mul(in[0], ct_square(in[1])), NULL, 0, false);
    return OK_OR(out[0]);
}
static ct_status fn_const(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)in; (void)nin; (void)nout; (void)ctx;
    out[0] = ct_scalar(3.0, CT_F64);
    return OK_OR(out[0]);
}
static ct_status fn_count(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_gt_scalar(in[0], 0.0), NULL, 0, false); /* int64 */
    return OK_OR(out[0]);
}

static int hook_calls;
static ct_tensor *count_hook(ct_tensor *g, void *user) {
    (void)user;
    hook_calls++;
    return g;
}

/* The backward passes inside a transform run only the part of the graph
 * that leads to what they differentiate (PyTorch's autograd.grad): hooks
 * and retain_grad of tensors outside are not touched. */
static void t_outer_graph_untouched(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *leaf = ct_from_doubles((double[]){0.5, -1.5, 2.0}, CT_SHAPE(3), CT_F64);
    assert_int_equal(ct_set_requires_grad(leaf, true), CT_OK);
    ct_tensor *h = ct_mul_scalar(leaf, 2.0);
    hook_calls = 0;
    assert_int_equal(ct_register_hook(h, count_hook, NULL), CT_OK);
    assert_int_equal(ct_retain_grad(h), CT_OK);
    ct_func *f = ct_func_new(fn_sin_x2, NULL), *g = ct_func_grad(f, NULL), *j = ct_func_jacrev(g, NULL);
    ct_tensor *gx, *H;
    CALL_OK(ct_func_call(g, &h, 1, &gx, 1));
    CALL_OK(ct_func_call(j, &h, 1, &H, 1));
    assert_int_equal(hook_calls, 0);
    assert_null(ct_grad(h));
    assert_null(ct_grad(leaf));
    /* ... while a backward of the caller's own reaches them */
    CALL_OK(ct_backward(ct_sum(gx, NULL, 0, false), NULL, false, false));
    assert_int_equal(hook_calls, 1);
    assert_non_null(ct_grad(h));
    assert_non_null(ct_grad(leaf));
    ct_func_free(j);
    ct_func_free(g);
    ct_func_free(f);
    SCOPE_END;
}

static void t_autograd_interplay(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_from_doubles((double[]){0.5, -1.5, 2.0}, CT_SHAPE(3), CT_F64);
    ct_tensor *w = ct_from_doubles((double[]){1.0, 2.0, -3.0}, CT_SHAPE(3), CT_F64);
    /* a leaf that requires grad: the gradient stays connected to it, the
     * transform accumulates nothing into it */
    ct_tensor *xl = ct_clone(x);
    assert_int_equal(ct_set_requires_grad(xl, true), CT_OK);
    ct_func *f = ct_func_new(fn_sin_x2, NULL), *g = ct_func_grad(f, NULL);
    ct_tensor *gx;
    assert_int_equal(ct_func_call(g, &xl, 1, &gx, 1), CT_OK);
    assert_true(ct_requires_grad(gx));
    assert_null(ct_grad(xl));
    assert_int_equal(ct_backward(ct_sum(gx, NULL, 0, false), NULL, false, false), CT_OK);
    for (int i = 0; i < 3; i++) {
        double xi = ((double[]){0.5, -1.5, 2.0})[i];
        assert_true(fabs(ct_item(ct_select(ct_grad(xl), 0, i)) - d2(xi)) < 1e-12);
    }
    /* a non-contiguous input that requires grad (a transposed view of a leaf) */
    ct_tensor *base = ct_from_doubles((double[]){0.5, -1.5, 2.0, 0.25, 1.0, -0.75}, CT_SHAPE(2, 3), CT_F64);
    assert_int_equal(ct_set_requires_grad(base, true), CT_OK);
    ct_tensor *bt = ct_transpose(base, 0, 1);
    assert_false(ct_is_contiguous(bt));
    assert_int_equal(ct_func_call(g, &bt, 1, &gx, 1), CT_OK);
    assert_true(ct_requires_grad(gx));
    assert_int_equal(ct_ndim(gx), 2);
    assert_int_equal(ct_size(gx, 0), 3);
    assert_int_equal(ct_backward(ct_sum(gx, NULL, 0, false), NULL, false, false), CT_OK);
    for (int i = 0; i < 6; i++) {
        double xi = ((double[]){0.5, -1.5, 2.0, 0.25, 1.0, -0.75})[i];
        assert_true(fabs(ct_item(ct_select(ct_reshape(ct_grad(base), CT_SHAPE(6)), 0, i)) - d2(xi)) < 1e-12);
    }
    /* jacrev of grad is the Hessian too (a different nesting); a fresh
     * transpose: the backward above released the first one's node */
    bt = ct_transpose(base, 0, 1);
    ct_func *jg = ct_func_jacrev(g, NULL), *hs = ct_func_hessian(f, NULL);
    ct_tensor *H1, *H2;
    CALL_OK(ct_func_call(jg, &bt, 1, &H1, 1));
    assert_int_equal(ct_func_call(hs, &bt, 1, &H2, 1), CT_OK);
    assert_int_equal(ct_ndim(H1), 4);
    assert_int_equal(ct_allclose(H1, H2, 1e-14, 1e-15, false), 1);
    ct_func_free(hs);
    ct_func_free(jg);
    /* the same under no_grad: a plain result, grad mode restored */
    bool prev = ct_set_grad_enabled(false);
    assert_int_equal(ct_func_call(g, &xl, 1, &gx, 1), CT_OK);
    assert_false(ct_requires_grad(gx));
    assert_false(ct_is_grad_enabled());
    ct_set_grad_enabled(prev);
    ct_func_free(g);
    ct_func_free(f);

    /* a tensor reached through ctx: d/dw sum(grad_x) = d/dw sum(2 w x) = 2 x */
    ct_tensor *wl = ct_clone(w);
    assert_int_equal(ct_set_requires_grad(wl, true), CT_OK);
    f = ct_func_new(fn_closure, wl);
    g = ct_func_grad(f, NULL);
    assert_int_equal(ct_func_call(g, &x, 1, &gx, 1), CT_OK);
    assert_true(ct_requires_grad(gx));
    assert_int_equal(ct_allclose(gx, ct_mul_scalar(ct_mul(wl, x), 2), 1e-14, 0, false), 1);
    assert_int_equal(ct_backward(ct_sum(gx, NULL, 0, false), NULL, false, false), CT_OK);
    assert_int_equal(ct_allclose(ct_grad(wl), ct_mul_scalar(x, 2), 1e-14, 0, false), 1);
    assert_false(ct_requires_grad(x));
    ct_func_free(g);
    ct_func_free(f);

    /* the same tensor as two arguments: each partial derivative, not the sum */
    f = ct_func_new(fn_xy, NULL);
    g = ct_func_grad(f, &(ct_func_grad_opts){(int[]){0, 1}, 2, false});
    ct_tensor *gs[2];
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, x}, 2, gs, 2), CT_OK);
    assert_int_equal(ct_allclose(gs[0], ct_square(x), 1e-15, 0, false), 1);
    assert_int_equal(ct_allclose(gs[1], ct_mul_scalar(ct_mul(x, x), 2), 1e-15, 0, false), 1);
    ct_func_free(g);
    /* an unused argument: zeros */
    g = ct_func_grad(f, &(ct_func_grad_opts){(int[]){0}, 1, false});
    ct_tensor *z = ct_zeros(CT_SHAPE(3), CT_F64);
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, z}, 2, gs, 1), CT_OK);
    assert_int_equal(ct_equal(gs[0], z), 1);
    ct_func_free(g);
    ct_func_free(f);
    /* no dependence at all, and an integer output: zero gradients (torch) */
    f = ct_func_new(fn_const, NULL);
    g = ct_func_grad(f, NULL);
    assert_int_equal(ct_func_call(g, &x, 1, gs, 1), CT_OK);
    assert_int_equal(ct_equal(gs[0], z), 1);
    ct_func_free(g);
    ct_func_free(f);
    f = ct_func_new(fn_count, NULL);
    g = ct_func_grad(f, NULL);
    assert_int_equal(ct_func_call(g, &x, 1, gs, 1), CT_OK);
    assert_int_equal(ct_equal(gs[0], z), 1);
    ct_func_free(g);
    ct_func_free(f);
    SCOPE_END;
}

/* vjp: the pullback is differentiable in the cotangent; jacrev of outputs
 * with no elements or no dependence; jacrev(jacrev) = hessian */
/* jacrev of a function with many outputs runs its rows as one vmapped
 * backward pass (vmap over the vjp with the identity's rows, torch's way):
 * no loop, no op per sample, the rows of a loop of vjps */
static void t_jacrev_batched(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(3, 5), CT_F64);
    ct_func *f = ct_func_new(fn_softmax, NULL), *jr = ct_func_jacrev(f, NULL), *pb = NULL;
    ct_tensor *J, *y;
    ct_vmap_reset_stats();
    CALL_OK(ct_func_call(jr, &x, 1, &J, 1));
    ct_vmap_stats vs = ct_vmap_get_stats();
    assert_int_equal(vs.calls, 1);
    assert_int_equal(vs.loop_calls, 0);
    assert_int_equal(vs.fallback_ops, 0);
    assert_false(ct_requires_grad(J));
    CALL_OK(ct_func_vjp(f, &x, 1, &y, 1, false, &pb));
    ct_tensor *E = ct_reshape(ct_eye(15, 15, CT_F64), CT_SHAPE(15, 3, 5));
    for (int64_t e = 0; e < 15; e++) {
        ct_tensor *row;
        CALL_OK(ct_func_call(pb, (ct_tensor *[]){ct_select(E, 0, e)}, 1, &row, 1));
        assert_int_equal(ct_allclose(ct_select(ct_reshape(J, CT_SHAPE(15, 3, 5)), 0, e), row, 0, 1e-15, false), 1);
    }
    /* under an outer graph (create_graph) the loop still runs: results differentiable */
    ct_tensor *xr = ct_detach(x);
    assert_int_equal(ct_set_requires_grad(xr, true), CT_OK);
    ct_vmap_reset_stats();
    CALL_OK(ct_func_call(jr, &xr, 1, &J, 1));
    assert_int_equal(ct_vmap_get_stats().calls, 0);
    assert_true(ct_requires_grad(J));
    ct_func_free(pb);
    ct_func_free(jr);
    ct_func_free(f);
    SCOPE_END;
}

static void t_vjp_jacrev(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_from_doubles((double[]){0.5, -1.5, 2.0, 0.0, 1.0, 3.0}, CT_SHAPE(2, 3), CT_F64);
    ct_func *f = ct_func_new(fn_sin_x2_ew, NULL), *pb;
    ct_tensor *y, *gx;
    assert_int_equal(ct_func_vjp(f, &x, 1, &y, 1, false, &pb), CT_OK);
    assert_false(ct_requires_grad(y));
    ct_tensor *v = ct_ones(CT_SHAPE(2, 3), CT_F64);
    assert_int_equal(ct_set_requires_grad(v, true), CT_OK);
    assert_int_equal(ct_func_call(pb, &v, 1, &gx, 1), CT_OK);
    assert_true(ct_requires_grad(gx));
    /* d/dv sum(v * f'(x)) = f'(x) = gx itself at v = 1 */
    assert_int_equal(ct_backward(ct_sum(gx, NULL, 0, false), NULL, false, false), CT_OK);
    assert_int_equal(ct_allclose(ct_grad(v), ct_detach(gx), 1e-15, 0, false), 1);
    ct_func_free(pb);
    /* the pullback outlives the scope of the call that made it */
    ct_scope s = ct_scope_begin();
    assert_int_equal(ct_func_vjp(f, &x, 1, &y, 1, false, &pb), CT_OK);
    ct_scope_end(s);
    ct_tensor *w = ct_full(CT_SHAPE(2, 3), 2.0, CT_F64);
    assert_int_equal(ct_func_call(pb, &w, 1, &gx, 1), CT_OK);
    assert_false(ct_requires_grad(gx));
    ct_tensor *g2;
    ct_func *fs2 = ct_func_new(fn_sin_x2, NULL), *df = ct_func_grad(fs2, NULL);
    ct_func_free(fs2); /* df holds its own reference */
    assert_int_equal(ct_func_call(df, &x, 1, &g2, 1), CT_OK);
    assert_int_equal(ct_allclose(gx, ct_mul_scalar(g2, 2), 1e-14, 0, false), 1);
    ct_func_free(pb);

    /* jacrev(jacrev(f)) of a scalar function equals hessian (jacfwd(jacrev(f)):
     * forward over reverse, the same values to rounding) */
    ct_func *fs = ct_func_new(fn_sin_x2, NULL);
    ct_func *j1 = ct_func_jacrev(fs, NULL), *j2 = ct_func_jacrev(j1, NULL), *h = ct_func_hessian(fs, NULL);
    ct_tensor *a, *b;
    assert_int_equal(ct_func_call(j2, &x, 1, &a, 1), CT_OK);
    assert_int_equal(ct_func_call(h, &x, 1, &b, 1), CT_OK);
    assert_int_equal(ct_ndim(a), 4);
    assert_int_equal(ct_allclose(a, b, 1e-12, 1e-14, false), 1);
    /* the Jacobian of the elementwise function is diag(f') in [2,3,2,3] */
    ct_func *je = ct_func_jacrev(f, NULL);
    ct_tensor *J;
    assert_int_equal(ct_func_call(je, &x, 1, &J, 1), CT_OK);
    ct_tensor *Jm = ct_reshape(J, CT_SHAPE(6, 6));
    assert_int_equal(ct_allclose(ct_diagonal(Jm, 0, 0, 1), ct_reshape(g2, CT_SHAPE(6)), 1e-14, 0, false), 1);
    assert_int_equal(ct_allclose(ct_sum(ct_abs(Jm), NULL, 0, false),
                                 ct_sum(ct_abs(g2), NULL, 0, false), 1e-14, 0, false), 1);
    /* an output that does not depend on x, and an input with no elements */
    ct_func *fk = ct_func_new(fn_const, NULL), *jc = ct_func_jacrev(fk, NULL);
    ct_func_free(fk);
    assert_int_equal(ct_func_call(jc, &x, 1, &J, 1), CT_OK);
    assert_int_equal(ct_ndim(J), 2);
    assert_int_equal(ct_equal(J, ct_zeros(CT_SHAPE(2, 3), CT_F64)), 1);
    ct_tensor *e = ct_zeros(CT_SHAPE(0, 3), CT_F64);
    assert_int_equal(ct_func_call(je, &e, 1, &J, 1), CT_OK);
    assert_int_equal(ct_ndim(J), 4);
    assert_int_equal(ct_numel(J), 0);
    ct_func_free(jc);
    ct_func_free(je);
    ct_func_free(h);
    ct_func_free(j2);
    ct_func_free(j1);
    ct_func_free(fs);
    ct_func_free(df);
    ct_func_free(f);
    SCOPE_END;
}

/* Central differences in float64 of f's output 0 with respect to in[arg]:
 * [out.numel, in.numel] (an oracle independent of autograd). */
static ct_tensor *fd_jacobian(ct_func *f, ct_tensor *const *in, int nin, int arg) {
    ct_tensor *args[8];
    for (int i = 0; i < nin; i++) args[i] = in[i];
    ct_tensor *x = ct_contiguous(ct_clone(in[arg]));
    double *p = ct_data_ptr(x);
    int64_t n = ct_numel(x), m = -1;
    double *J = NULL;
    const double eps = 1e-6;
    args[arg] = x;
    for (int64_t k = 0; k < n; k++) {
        ct_tensor *yp, *ym;
        double keep = p[k];
        p[k] = keep + eps;
        assert_int_equal(ct_func_call(f, args, nin, &yp, 1), CT_OK);
        yp = ct_contiguous(ct_clone(yp));
        p = ct_data_ptr(x);
        p[k] = keep - eps;
        assert_int_equal(ct_func_call(f, args, nin, &ym, 1), CT_OK);
        ym = ct_contiguous(ct_clone(ym));
        p = ct_data_ptr(x);
        p[k] = keep;
        if (!J) {
            m = ct_numel(yp);
            J = calloc((size_t)(m * n), sizeof *J);
        }
        const double *a = ct_data_ptr(yp), *b = ct_data_ptr(ym);
        for (int64_t i = 0; i < m; i++) J[i * n + k] = (a[i] - b[i]) / (2 * eps);
    }
    ct_tensor *r = ct_from_doubles(J, CT_SHAPE(m, n), CT_F64);
    free(J);
    return r;
}

/* jacrev and hessian against finite differences: the Jacobian of softmax
 * and of the multi-output function, and the Hessian of the MLP loss as the
 * differences of its gradient */
static void t_finite_differences(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(7);
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F64), *y = ct_randn(CT_SHAPE(3, 4), CT_F64);
    ct_func *fsm = ct_func_new(fn_softmax, NULL), *jsm = ct_func_jacrev(fsm, NULL);
    ct_tensor *J;
    CALL_OK(ct_func_call(jsm, &x, 1, &J, 1));
    assert_int_equal(ct_allclose(ct_reshape(J, CT_SHAPE(12, 12)), fd_jacobian(fsm, &x, 1, 0), 1e-6, 1e-8, false), 1);
    /* multi: (x y, sin(x) + y^2); output 1 with respect to y is diag(2 y) */
    ct_func *fm = ct_func_new(fn_multi, NULL);
    ct_func *jm = ct_func_jacrev(fm, &(ct_func_grad_opts){(int[]){0, 1}, 2, false});
    ct_tensor *Js[4];
    CALL_OK(ct_func_call(jm, (ct_tensor *[]){x, y}, 2, Js, 4));
    assert_int_equal(ct_allclose(ct_reshape(Js[1], CT_SHAPE(12, 12)),
                                 fd_jacobian(fm, (ct_tensor *[]){x, y}, 2, 1), 1e-6, 1e-8, false), 1);
    assert_int_equal(ct_allclose(ct_diagonal(ct_reshape(Js[3], CT_SHAPE(12, 12)), 0, 0, 1),
                                 ct_reshape(ct_mul_scalar(y, 2), CT_SHAPE(12)), 1e-15, 0, false), 1);
    /* the MLP loss: hessian with respect to W1 = d grad / d W1 */
    ct_tensor *in[6] = {ct_randn(CT_SHAPE(5, 4), CT_F64),
                        ct_from_array((int64_t[]){0, 2, 1, 2, 0}, CT_SHAPE(5), CT_I64),
                        ct_mul_scalar(ct_randn(CT_SHAPE(4, 6), CT_F64), 0.5), ct_randn(CT_SHAPE(6), CT_F64),
                        ct_randn(CT_SHAPE(6, 3), CT_F64), ct_randn(CT_SHAPE(3), CT_F64)};
    ct_func *fl = ct_func_new(fn_mlp_loss, NULL);
    ct_func_grad_opts o = {(int[]){2}, 1, false};
    ct_func *gl = ct_func_grad(fl, &o), *hl = ct_func_hessian(fl, &o);
    ct_tensor *H;
    CALL_OK(ct_func_call(hl, in, 6, &H, 1));
    assert_int_equal(ct_ndim(H), 4);
    ct_tensor *Hm = ct_reshape(H, CT_SHAPE(24, 24));
    assert_int_equal(ct_allclose(Hm, fd_jacobian(gl, in, 6, 2), 1e-6, 1e-8, false), 1);
    assert_int_equal(ct_allclose(Hm, ct_t(Hm), 1e-12, 1e-14, false), 1); /* symmetric */
    ct_func_free(hl);
    ct_func_free(gl);
    ct_func_free(fl);
    ct_func_free(jm);
    ct_func_free(fm);
    ct_func_free(jsm);
    ct_func_free(fsm);
    SCOPE_END;
}

static void t_transform_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = ct_from_doubles((double[]){0.5, -1.5, 2.0}, CT_SHAPE(3), CT_F64);
    ct_tensor *out[4];
    int64_t live = ct_live_tensors();
    ct_func *f = ct_func_new(fn_sin_x2_ew, NULL), *fs = ct_func_new(fn_sin_x2, NULL);
    /* a non-scalar output */
    ct_func *g = ct_func_grad(f, NULL);
    assert_int_equal(ct_func_call(g, &x, 1, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims"));
    assert_null(out[0]);
    ct_clear_error();
    ct_func_free(g);
    /* argnums out of range, repeated, empty */
    ct_func *fxy = ct_func_new(fn_xy, NULL);
    g = ct_func_grad(fxy, &(ct_func_grad_opts){(int[]){2}, 1, false});
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, x}, 2, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "Got argnum=2, but only 2 positional inputs"));
    ct_clear_error();
    ct_func_free(g);
    g = ct_func_grad(fxy, &(ct_func_grad_opts){(int[]){-3}, 1, false});
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, x}, 2, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "Got argnum=-3"));
    ct_clear_error();
    ct_func_free(g);
    g = ct_func_grad(fxy, &(ct_func_grad_opts){(int[]){1, -1}, 2, false});
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, x}, 2, out, 2), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "both name input 1"));
    ct_clear_error();
    ct_func_free(g);
    expect_err(ct_func_grad(fxy, &(ct_func_grad_opts){(int[]){0, 0}, 2, false}), CT_ERR_ARG, "unique");
    expect_err(ct_func_grad(fxy, &(ct_func_grad_opts){(int[]){0}, 0, false}), CT_ERR_ARG, "non-empty");
    expect_err(ct_func_jacrev(NULL, NULL), CT_ERR_NULL, "NULL");
    expect_err(ct_func_hessian(fs, &(ct_func_grad_opts){NULL, 0, true}), CT_ERR_ARG, "has_aux");
    /* an integer input to differentiate */
    g = ct_func_grad(fs, NULL);
    ct_tensor *xi = ct_arange(0, 3, 1, CT_I64);
    assert_int_equal(ct_func_call(g, &xi, 1, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "input 0 is int64"));
    ct_clear_error();
    /* the wrong number of outputs; has_aux with no auxiliary output */
    assert_int_equal(ct_func_call(g, &x, 1, out, 2), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "nout 2"));
    ct_clear_error();
    ct_func_free(g);
    g = ct_func_grad(fs, &(ct_func_grad_opts){NULL, 0, true});
    assert_int_equal(ct_func_call(g, &x, 1, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "auxiliary"));
    ct_clear_error();
    ct_func_free(g);
    g = ct_func_jacrev(f, &(ct_func_grad_opts){(int[]){0, 1}, 2, false});
    assert_int_equal(ct_func_call(g, (ct_tensor *[]){x, x}, 2, out, 3), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "multiple"));
    ct_clear_error();
    ct_func_free(g);
    /* vjp: integer outputs, a cotangent of the wrong shape or count */
    ct_func *fc = ct_func_new(fn_count, NULL), *pb = (ct_func *)1;
    assert_int_equal(ct_func_vjp(fc, &x, 1, out, 1, false, &pb), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "must be floating-point or complex Tensors, got Tensor with dtype int64"));
    assert_null(pb);
    assert_null(out[0]);
    ct_clear_error();
    g = ct_func_jacrev(fc, NULL);
    assert_int_equal(ct_func_call(g, &x, 1, out, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "dtype int64"));
    ct_clear_error();
    ct_func_free(g);
    ct_func_free(fc);
    assert_int_equal(ct_func_vjp(f, &xi, 1, out, 1, false, &pb), CT_ERR_ARG);
    ct_clear_error();
    assert_int_equal(ct_func_vjp(f, &x, 1, out, 1, false, &pb), CT_OK);
    ct_tensor *bad = ct_ones(CT_SHAPE(2), CT_F64);
    assert_int_equal(ct_func_call(pb, &bad, 1, out + 1, 1), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "Mismatch in shape"));
    ct_clear_error();
    assert_int_equal(ct_func_call(pb, (ct_tensor *[]){bad, bad}, 2, out + 1, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "expected 1 cotangent"));
    ct_clear_error();
    ct_func_free(pb);
    /* a function that fails inside a transform: its error, nothing leaked */
    ct_func *ff = ct_func_new(f_fails_half, NULL);
    ct_func *gf = ct_func_jacrev(ff, NULL);
    ct_tensor *x31 = ct_ones(CT_SHAPE(3, 1), CT_F64);
    assert_int_equal(ct_func_call(gf, &x31, 1, out, 2), CT_ERR_SHAPE);
    assert_non_null(strstr(ct_last_error(), "matmul"));
    ct_clear_error();
    ct_func_free(gf);
    ct_func_free(ff);
    ct_func_free(fxy);
    ct_func_free(fs);
    ct_func_free(f);
    assert_int_equal(ct_live_tensors(), live + 4); /* xi, out[0] of the vjp, bad, x31 */
    SCOPE_END;
}

static void t_stack_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_sample *p = NULL, *b = NULL;
    ct_module *a = make_model("mlp"), *c = make_model("cnn");
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){a}, 0, &p, &b), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "at least one model"));
    ct_clear_error();
    /* Sequential both, but different layers: the names differ */
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){a, c}, 2, &p, &b), CT_ERR_ARG);
    assert_null(p);
    assert_null(b);
    ct_clear_error();
    ct_module *l1 = ct_linear_new(4, 3, true), *l2 = ct_linear_new(4, 2, true);
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){l1, l2}, 2, &p, &b), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "'weight'"));
    ct_clear_error();
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){l1, a}, 2, &p, &b), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "same class"));
    ct_clear_error();
    ct_module_eval(l2);
    ct_module *l3 = ct_linear_new(4, 3, true);
    ct_module_eval(l3);
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){l1, l3}, 2, &p, &b), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "training/eval"));
    ct_clear_error();
    ct_module_train(l3, true);
    assert_int_equal(ct_set_requires_grad(ct_module_param(l3, 1), false), CT_OK);
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){l1, l3}, 2, &p, &b), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "same .requires_grad"));
    ct_clear_error();
    /* the functional call: unknown names */
    ct_sample *s = ct_sample_new();
    assert_int_equal(ct_sample_set(s, "nope", ct_module_param(l1, 0)), CT_OK);
    expect_err(ct_func_functional_call(l1, s, NULL), CT_ERR_ARG, "no parameter named 'nope'");
    expect_err(ct_func_functional_call(l1, NULL, s), CT_ERR_ARG, "no buffer named 'nope'");
    ct_sample_free(s);
    /* stacked: [2, 3, 4] and [2, 3]; slices equal the models' tensors, and
     * the models' own parameters are left alone */
    assert_int_equal(ct_set_requires_grad(ct_module_param(l3, 1), true), CT_OK);
    assert_int_equal(ct_func_stack_module_state((ct_module *[]){l1, l3}, 2, &p, &b), CT_OK);
    assert_int_equal(ct_sample_count(p), 2);
    assert_int_equal(ct_sample_count(b), 0);
    assert_int_equal(ct_size(ct_sample_at(p, 0), 0), 2);
    assert_int_equal(ct_equal(ct_select(ct_sample_at(p, 0), 0, 1), ct_module_param(l3, 0)), 1);
    assert_int_equal(ct_equal(ct_select(ct_sample_at(p, 1), 0, 0), ct_module_param(l1, 1)), 1);
    assert_false(ct_shares_storage(ct_sample_at(p, 0), ct_module_param(l1, 0)));
    ct_func *fm = ct_func_functional_call(l1, p, b);
    ct_tensor *y, *xin = ct_ones(CT_SHAPE(5, 4), CT_F32);
    assert_int_equal(ct_func_call(fm, (ct_tensor *[]){xin}, 1, &y, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "expected 2 parameter and buffer tensors"));
    ct_clear_error();
    assert_int_equal(ct_func_call(fm, (ct_tensor *[]){ct_select(ct_sample_at(p, 0), 0, 1),
                                                      ct_select(ct_sample_at(p, 1), 0, 1), xin},
                                  3, &y, 1),
                     CT_OK);
    assert_int_equal(ct_equal(y, ct_module_forward1(l3, xin)), 1);
    ct_func_free(fm);
    ct_sample_free(p);
    ct_sample_free(b);
    ct_module_release(l1);
    ct_module_release(l2);
    ct_module_release(l3);
    ct_module_release(a);
    ct_module_release(c);
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_call),
        cmocka_unit_test(t_owned_ctx),
        cmocka_unit_test(t_errors),
        cmocka_unit_test(t_fixtures),
        cmocka_unit_test(t_hessian_slices),
        cmocka_unit_test(t_jacrev_batched),
        cmocka_unit_test(t_grad_of_grad),
        cmocka_unit_test(t_autograd_interplay),
        cmocka_unit_test(t_outer_graph_untouched),
        cmocka_unit_test(t_vjp_jacrev),
        cmocka_unit_test(t_finite_differences),
        cmocka_unit_test(t_transform_errors),
        cmocka_unit_test(t_stack_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
