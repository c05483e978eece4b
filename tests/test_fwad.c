/* test_fwad.c -- forward-mode AD (ctorch/autograd.h: dual levels,
 * make_dual, unpack_dual) and the forward-mode transforms (ctorch/func.h:
 * jvp, jacfwd, linearize): semantics, errors, nesting, views and in-place
 * ops, custom functions, composition with reverse mode (forward over
 * reverse Hessian-vector products, reverse over forward), against
 * torch.func / torch.autograd.forward_ad fixtures
 * (tools/fixtures/gen_fwad.py) and independent oracles (closed forms,
 * finite differences, reverse-mode Jacobians).  Every op's JVP is checked
 * in test_fwad_ops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <ctorch/ctorch.h>
#include <ctorch/func.h>

#include "autograd/autograd_impl.h"
#include "fixture.h"
#include "test_util.h"

static ct_tensor *rnd(const int64_t *shape, int nd, uint64_t seed) {
    ct_manual_seed(seed);
    return ct_randn(shape, nd, CT_F64);
}

/* max |a - b| <= tol (same shape) */
static void assert_close(ct_tensor *a, ct_tensor *b, double tol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(ct_ndim(a), ct_ndim(b));
    for (int d = 0; d < ct_ndim(a); d++) assert_int_equal(ct_size(a, d), ct_size(b, d));
    double e = ct_item(ct_amax(ct_abs(ct_sub(ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64))), NULL, 0, false));
    if (!(e <= tol)) fail_msg("max |a - b| = %g > %g", e, tol);
}

static ct_tensor *tangent_of(ct_tensor *t, int lvl) {
    ct_tensor *p = NULL, *tg = NULL;
    assert_int_equal(ct_fwad_unpack_dual(t, lvl, &p, &tg), CT_OK);
    return tg;
}

/* ---- basics ----------------------------------------------------------------------- */
static void test_basic(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(3, 4), 1), *v = rnd(CT_SHAPE(3, 4), 2);
    assert_int_equal(ct_fwad_current_level(), -1);
    int lvl = ct_fwad_enter_dual_level();
    assert_int_equal(lvl, 0);
    assert_int_equal(ct_fwad_current_level(), 0);
    ct_tensor *d = ct_fwad_make_dual(x, v, lvl);
    assert_non_null(d);
    ct_tensor *y = ct_mul(ct_sin(d), d);
    ct_tensor *p, *t;
    assert_int_equal(ct_fwad_unpack_dual(y, lvl, &p, &t), CT_OK);
    assert_close(p, ct_mul(ct_sin(x), x), 0);
    /* d(sin(x) x) = (cos(x) x + sin(x)) v */
    assert_close(t, ct_mul(ct_add(ct_mul(ct_cos(x), x), ct_sin(x)), v), 1e-14);
    assert_null(tangent_of(p, lvl));      /* the primal carries no tangent */
    assert_close(tangent_of(d, lvl), v, 0);
    assert_null(tangent_of(ct_exp(x), lvl)); /* a tensor that is not dual gives none */
    /* integer results have none */
    assert_null(tangent_of(ct_argmax(d, 0, false), lvl));
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    assert_int_equal(ct_fwad_current_level(), -1);
    /* exiting drops the level's tangents */
    assert_int_equal(ct_fwad_unpack_dual(y, 0, &p, &t), CT_OK);
    assert_null(t);
    assert_ptr_equal(p, y);
    SCOPE_END;
}

/* no dual level: ops keep no forward-AD state (and no autograd metadata) */
static void test_no_level(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(8), 3);
    ct_tensor *y = ct_tanh(ct_add(x, x));
    assert_null(ct__ag_peek(y));
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *z = ct_tanh(ct_add(x, x)); /* a level, but no dual input */
    assert_null(ct__ag_peek(z));
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    SCOPE_END;
}

static void test_errors(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(3), 1), *v = rnd(CT_SHAPE(3), 2);
    expect_err(ct_fwad_make_dual(x, v, 0), CT_ERR_RUNTIME,
               "Trying to create a dual Tensor for forward AD but no level exists, make sure to "
               "enter_dual_level() first.");
    int lvl = ct_fwad_enter_dual_level();
    expect_err(ct_fwad_make_dual(x, v, 3), CT_ERR_RUNTIME, "level 3 is not an active dual level");
    expect_err(ct_fwad_make_dual(x, rnd(CT_SHAPE(4), 2), lvl), CT_ERR_SHAPE,
               "Trying to set a forward gradient that has a different size than that of the original "
               "Tensor, this is not supported. Tensor is of size [3] while the given forward gradient is of "
               "size [4].");
    expect_err(ct_fwad_make_dual(ct_arange(0, 3, 1, CT_I64), v, lvl), CT_ERR_DTYPE,
               "Expected primal to be floating point or complex, but got: int64");
    expect_err(ct_fwad_make_dual(x, ct_arange(0, 3, 1, CT_I64), lvl), CT_ERR_DTYPE,
               "Expected tangent to be floating point or complex, but got: int64");
    expect_err(ct_fwad_make_dual(NULL, v, lvl), CT_ERR_NULL, "primal");
    ct_tensor *d = ct_fwad_make_dual(x, v, lvl);
    expect_err(ct_fwad_make_dual(d, v, lvl), CT_ERR_RUNTIME,
               "Making a dual Tensor based on a Tensor that already has a forward gradient at the same level "
               "0 is not supported.");
    /* another float dtype: converted to the primal's */
    ct_tensor *d32 = ct_fwad_make_dual(ct_to_dtype(x, CT_F32), v, lvl);
    assert_int_equal(ct_get_dtype(tangent_of(d32, lvl)), CT_F32);
    int l2 = ct_fwad_enter_dual_level();
    assert_int_equal(l2, 1);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_ERR_RUNTIME);
    assert_non_null(strstr(ct_last_error(), "Trying to exit a forward AD level that was not the last one"));
    ct_clear_error();
    assert_int_equal(ct_fwad_exit_dual_level(l2), CT_OK);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    assert_int_equal(ct_fwad_exit_dual_level(0), CT_ERR_RUNTIME);
    ct_clear_error();
    ct_tensor *p, *t;
    assert_int_equal(ct_fwad_unpack_dual(NULL, 0, &p, &t), CT_ERR_NULL);
    ct_clear_error();
    SCOPE_END;
}

/* nested levels: forward over forward gives mixed second derivatives */
static void test_nested(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(5), 4), *v0 = rnd(CT_SHAPE(5), 5), *v1 = rnd(CT_SHAPE(5), 6);
    int l0 = ct_fwad_enter_dual_level(), l1 = ct_fwad_enter_dual_level();
    ct_tensor *d = ct_fwad_make_dual(ct_fwad_make_dual(x, v0, l0), v1, l1);
    ct_tensor *y = ct_pow_scalar(d, 3.0);
    ct_tensor *t0 = tangent_of(y, l0), *t1 = tangent_of(y, l1);
    ct_tensor *x2 = ct_mul(x, x);
    assert_close(t0, ct_mul_scalar(ct_mul(x2, v0), 3), 1e-13);
    assert_close(t1, ct_mul_scalar(ct_mul(x2, v1), 3), 1e-13);
    /* the l0 tangent's own l1 tangent: 6 x v0 v1 (and symmetrically) */
    ct_tensor *want = ct_mul_scalar(ct_mul(ct_mul(x, v0), v1), 6);
    assert_close(tangent_of(t0, l1), want, 1e-13);
    assert_close(tangent_of(t1, l0), want, 1e-13);
    assert_int_equal(ct_fwad_exit_dual_level(l1), CT_OK);
    assert_null(tangent_of(y, 1));
    assert_close(tangent_of(y, l0), ct_mul_scalar(ct_mul(x2, v0), 3), 1e-13);
    assert_int_equal(ct_fwad_exit_dual_level(l0), CT_OK);
    SCOPE_END;
}

/* ---- views and in-place ops ------------------------------------------------------------ */
static void test_views(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(4, 6), 7), *v = rnd(CT_SHAPE(4, 6), 8);
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *d = ct_fwad_make_dual(x, v, lvl);
    ct_tensor *s = ct_transpose(ct_slice(d, 1, 1, 5, 2), 0, 1);
    assert_close(tangent_of(s, lvl), ct_transpose(ct_slice(v, 1, 1, 5, 2), 0, 1), 0);
    ct_tensor *a = ct_as_strided(d, (const int64_t[]){3, 2}, (const int64_t[]){5, 2}, 2, 3);
    assert_close(tangent_of(a, lvl), ct_as_strided(v, (const int64_t[]){3, 2}, (const int64_t[]){5, 2}, 2, 3), 0);
    ct_tensor *r = ct_reshape(ct_transpose(d, 0, 1), CT_SHAPE(24));
    assert_close(tangent_of(r, lvl), ct_reshape(ct_transpose(v, 0, 1), CT_SHAPE(24)), 0);
    /* a non-contiguous tangent is laid out like its primal */
    ct_tensor *vt = ct_transpose(rnd(CT_SHAPE(6, 4), 9), 0, 1);
    ct_tensor *d2 = ct_fwad_make_dual(x, vt, lvl);
    ct_tensor *tg = tangent_of(d2, lvl);
    assert_close(tg, vt, 0);
    assert_int_equal(ct_stride(tg, 0), ct_stride(x, 0));
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    SCOPE_END;
}

static void test_inplace(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(3, 4), 10), *v = rnd(CT_SHAPE(3, 4), 11);
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *d = ct_fwad_make_dual(x, v, lvl);
    /* on a copy of a dual tensor: its tangent changes, the source's not */
    ct_tensor *c = ct_clone(d);
    assert_non_null(ct_mul_scalar_(c, 3.0));
    assert_close(tangent_of(c, lvl), ct_mul_scalar(v, 3.0), 1e-15);
    assert_close(tangent_of(d, lvl), v, 0);
    assert_non_null(ct_mul_(c, c)); /* (3x)^2: tangent 2 (3x)(3v) */
    assert_close(tangent_of(c, lvl), ct_mul_scalar(ct_mul(x, v), 18.0), 1e-13);
    assert_non_null(ct_fill_(c, 1.0)); /* overwritten by a constant: zero */
    assert_close(tangent_of(c, lvl), ct_zeros_like(x), 0);
    /* a tensor without a tangent written with a dual operand gets one */
    ct_tensor *a = ct_zeros(CT_SHAPE(3, 4), CT_F64);
    assert_non_null(ct_add_(a, d));
    assert_close(tangent_of(a, lvl), v, 0);
    /* a view of a base without a tangent: the base gets one, zero elsewhere */
    ct_tensor *base = ct_zeros(CT_SHAPE(3, 4), CT_F64);
    ct_tensor *row = ct_select(base, 0, 1);
    assert_non_null(ct_copy_(row, ct_select(d, 0, 2)));
    ct_tensor *bt = tangent_of(base, lvl);
    assert_non_null(bt);
    assert_close(ct_select(bt, 0, 1), ct_select(v, 0, 2), 0);
    assert_close(ct_select(bt, 0, 0), ct_zeros(CT_SHAPE(4), CT_F64), 0);
    assert_close(tangent_of(row, lvl), ct_select(v, 0, 2), 0);
    /* in place through a view of a dual base: the base's tangent follows */
    ct_tensor *b2 = ct_clone(d);
    ct_tensor *r0 = ct_select(b2, 0, 0);
    assert_non_null(ct_mul_scalar_(r0, 2.0));
    ct_tensor *b2t = tangent_of(b2, lvl);
    assert_close(ct_select(b2t, 0, 0), ct_mul_scalar(ct_select(v, 0, 0), 2.0), 1e-15);
    assert_close(ct_select(b2t, 0, 1), ct_select(v, 0, 1), 0);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    SCOPE_END;
}

/* ---- composition with reverse mode ------------------------------------------------------- */
static ct_tensor *hvp_f(ct_tensor *x, ct_tensor *A) {
    ct_tensor *a = ct_sum(ct_mul(ct_mul(ct_sin(x), x), x), NULL, 0, false);
    return ct_add(a, ct_sum(ct_logsumexp(ct_matmul(x, A), CT_SHAPE(1), false), NULL, 0, false));
}

static ct_tensor *grad_of(ct_tensor *x, ct_tensor *A, bool create) {
    ct_tensor *xr = ct_detach(x);
    if (ct_set_requires_grad(xr, true)) return NULL;
    ct_tensor *y = hvp_f(xr, A), *g = NULL;
    if (ct_autograd_grad(&y, 1, &xr, 1, NULL, false, create, false, &g)) return NULL;
    return g;
}

/* H v by forward over reverse: the backward pass runs on dual tensors */
static ct_tensor *hvp_fwd_over_rev(ct_tensor *x, ct_tensor *A, ct_tensor *v, bool create, ct_tensor **g) {
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *xr = ct_detach(x);
    assert_int_equal(ct_set_requires_grad(xr, true), CT_OK);
    ct_tensor *xd = ct_fwad_make_dual(xr, v, lvl);
    ct_tensor *y = hvp_f(xd, A);
    assert_int_equal(ct_autograd_grad(&y, 1, &xr, 1, NULL, false, create, false, g), CT_OK);
    ct_tensor *hv = tangent_of(*g, lvl);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    return hv;
}

static void test_hvp(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(3, 5), 12), *A = rnd(CT_SHAPE(5, 4), 13), *v = rnd(CT_SHAPE(3, 5), 14);
    /* oracle: central differences of the gradient along v */
    double e = 1e-5;
    ct_tensor *fd = ct_div_scalar(ct_sub(grad_of(ct_add(x, ct_mul_scalar(v, e)), A, false),
                                         grad_of(ct_sub(x, ct_mul_scalar(v, e)), A, false)), 2 * e);
    for (int create = 0; create < 2; create++) {
        ct_tensor *g = NULL;
        ct_tensor *hv = hvp_fwd_over_rev(x, A, v, create, &g);
        assert_close(g, grad_of(x, A, false), 1e-13);
        assert_close(hv, fd, 1e-6);
    }
    SCOPE_END;
}

/* reverse over forward: the JVP's computation is recorded */
static void test_reverse_over_forward(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *x = rnd(CT_SHAPE(6), 15), *v = rnd(CT_SHAPE(6), 16);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *y = ct_sum(ct_pow_scalar(ct_fwad_make_dual(x, v, lvl), 3.0), NULL, 0, false);
    ct_tensor *jv = tangent_of(y, lvl); /* sum(3 x^2 v) */
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    assert_true(ct_requires_grad(jv));
    ct_tensor *g = NULL;
    assert_int_equal(ct_autograd_grad(&jv, 1, &x, 1, NULL, false, false, false, &g), CT_OK);
    assert_close(g, ct_mul_scalar(ct_mul(ct_detach(x), v), 6.0), 1e-13);
    SCOPE_END;
}

/* ---- custom functions -------------------------------------------------------------------------- */
static ct_status sq_forward(ct_function_ctx *ctx, ct_tensor *const *in, int n, ct_tensor **out) {
    (void)n;
    out[0] = ct_mul(in[0], in[0]);
    return ct_ctx_save_for_backward(ctx, in, 1);
}
static ct_status sq_backward(ct_function_ctx *ctx, ct_tensor *const *g, ct_tensor **gin) {
    gin[0] = ct_mul(ct_mul_scalar(ct_ctx_saved(ctx, 0), 2.0), g[0]);
    return gin[0] ? CT_OK : ct_last_error_code();
}
static int g_jvp_calls;
static ct_status sq_jvp(ct_function_ctx *ctx, ct_tensor *const *tin, ct_tensor **tout) {
    g_jvp_calls++;
    tout[0] = ct_mul(ct_mul_scalar(ct_ctx_saved(ctx, 0), 2.0), tin[0]);
    return tout[0] ? CT_OK : ct_last_error_code();
}
static ct_status sq_backward_detached(ct_function_ctx *ctx, ct_tensor *const *g, ct_tensor **gin) {
    gin[0] = ct_detach(ct_mul(ct_mul_scalar(ct_ctx_saved(ctx, 0), 2.0), g[0]));
    return gin[0] ? CT_OK : ct_last_error_code();
}

static void test_custom_function(void **state) {
    (void)state;
    SCOPE_BEGIN;
    const ct_function_def with_jvp = {"Square", 1, sq_forward, sq_backward, sq_jvp};
    const ct_function_def no_jvp = {"Square", 1, sq_forward, sq_backward, NULL};
    const ct_function_def bad = {"SquareDetached", 1, sq_forward, sq_backward_detached, NULL};
    ct_tensor *x = rnd(CT_SHAPE(4), 17), *v = rnd(CT_SHAPE(4), 18);
    ct_tensor *want = ct_mul_scalar(ct_mul(x, v), 2.0);
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *d = ct_fwad_make_dual(x, v, lvl), *y = NULL;
    g_jvp_calls = 0;
    assert_int_equal(ct_function_apply(&with_jvp, &d, 1, NULL, &y), CT_OK);
    assert_int_equal(g_jvp_calls, 1);
    assert_close(tangent_of(y, lvl), want, 1e-15);
    assert_int_equal(ct_function_apply(&no_jvp, &d, 1, NULL, &y), CT_OK); /* double vjp on the backward */
    assert_close(tangent_of(y, lvl), want, 1e-15);
    assert_int_equal(ct_function_apply(&bad, &d, 1, NULL, &y), CT_ERR_AUTOGRAD);
    assert_non_null(strstr(ct_last_error(), "SquareDetached: forward AD needs a jvp"));
    ct_clear_error();
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    SCOPE_END;
}

/* ---- function transforms ------------------------------------------------------------------------ */
static ct_status f_tanh_mv(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_tanh(ct_mv(in[1], in[0])); /* tanh(W x): x [3], W [2, 3] */
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_cube_sum(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_pow_scalar(in[0], 3.0), NULL, 0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}

/* rows of the Jacobian of output y w.r.t. x by reverse mode: [numel(y), *x] */
static ct_tensor *jac_rev(ct_func *f, ct_tensor *const *in, int nin, int wrt) {
    ct_tensor *xs[4];
    for (int k = 0; k < nin; k++) xs[k] = ct_detach(in[k]);
    assert_int_equal(ct_set_requires_grad(xs[wrt], true), CT_OK);
    ct_tensor *y = NULL;
    assert_int_equal(ct_func_call(f, xs, nin, &y, 1), CT_OK);
    ct_tensor *yf = ct_reshape(y, CT_SHAPE(-1));
    int64_t m = ct_numel(y);
    ct_tensor *rows[16];
    for (int64_t i = 0; i < m; i++) {
        ct_tensor *yi = ct_select(yf, 0, i);
        assert_int_equal(ct_autograd_grad(&yi, 1, &xs[wrt], 1, NULL, true, false, false, &rows[i]), CT_OK);
    }
    return ct_stack(rows, (int)m, 0);
}

static void test_func_jacfwd(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_func *f = ct_func_new(f_tanh_mv, NULL);
    ct_tensor *x = rnd(CT_SHAPE(3), 19), *W = rnd(CT_SHAPE(2, 3), 20);
    ct_tensor *in[2] = {x, W};
    ct_func *jf = ct_func_jacfwd(f, &(ct_func_grad_opts){(const int[]){0, 1}, 2, false});
    assert_non_null(jf);
    ct_tensor *J[2];
    assert_int_equal(ct_func_call(jf, in, 2, J, 2), CT_OK);
    assert_int_equal(ct_ndim(J[0]), 2);
    assert_int_equal(ct_ndim(J[1]), 3);
    assert_close(J[0], jac_rev(f, in, 2, 0), 1e-14);
    assert_close(J[1], ct_reshape(jac_rev(f, in, 2, 1), CT_SHAPE(2, 2, 3)), 1e-14);
    /* negative argnums count from the end: {-1, -2} is {1, 0} */
    ct_func *jn = ct_func_jacfwd(f, &(ct_func_grad_opts){(const int[]){-1, -2}, 2, false});
    ct_tensor *Jn[2];
    assert_int_equal(ct_func_call(jn, in, 2, Jn, 2), CT_OK);
    assert_int_equal(ct_equal(Jn[0], J[1]), 1);
    assert_int_equal(ct_equal(Jn[1], J[0]), 1);
    ct_func_free(jn);
    /* jvp agrees with J v */
    ct_tensor *v = rnd(CT_SHAPE(3), 21), *y, *jv;
    assert_int_equal(ct_func_jvp(f, in, (ct_tensor *[]){v, NULL}, 2, &y, &jv, 1), CT_OK);
    assert_close(jv, ct_mv(J[0], v), 1e-14);
    assert_null(tangent_of(jv, 0)); /* no level left behind */
    assert_int_equal(ct_fwad_current_level(), -1);
    /* jacfwd of jacfwd: the Hessian of sum(x^3) is diag(6 x) */
    ct_func *g = ct_func_new(f_cube_sum, NULL);
    ct_func *jg = ct_func_jacfwd(g, NULL);
    ct_func *h = ct_func_jacfwd(jg, NULL);
    ct_func_free(jg); /* the transforms hold what they wrap */
    ct_func_free(g);
    ct_tensor *x4 = rnd(CT_SHAPE(4), 22), *H;
    assert_int_equal(ct_func_call(h, &x4, 1, &H, 1), CT_OK);
    assert_close(H, ct_diag_embed(ct_mul_scalar(x4, 6.0), 0, 0, 1), 1e-13);
    /* errors */
    ct_tensor *bad[3];
    assert_int_equal(ct_func_call(jf, in, 2, bad, 3), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "jacfwd: called with nout 3: expected a multiple of the 2 argnums"));
    ct_clear_error();
    ct_func *j5 = ct_func_jacfwd(f, &(ct_func_grad_opts){(const int[]){5}, 1, false});
    assert_int_equal(ct_func_call(j5, in, 2, bad, 1), CT_ERR_ARG);
    assert_non_null(strstr(ct_last_error(), "Got argnum=5, but only 2 positional inputs"));
    ct_clear_error();
    expect_err(ct_func_jacfwd(f, &(ct_func_grad_opts){(const int[]){1, 1}, 2, false}), CT_ERR_ARG,
               "argnums must be unique");
    ct_func_free(j5);
    ct_func_free(h);
    ct_func_free(jf);
    ct_func_free(f);
    SCOPE_END;
}

/* vmap over tangents of jvp (how jacfwd batches its columns): the trace
 * sees each op before its forward-mode rule runs ops that read the op's
 * output (tanh's rule reads tanh(x)), and the saved aliases autograd makes
 * of results computed from a cpu constant (W x) resolve to those results.
 * Before, both became constants of the trace: wrong values, no error. */
static ct_tensor *g_W;
static ct_status f_loss_tanh(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_sum(ct_square(ct_tanh(ct_mv(g_W, in[0]))), NULL, 0, false);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_func *g_grad;
static ct_status f_hvp(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)ctx;
    return ct_func_jvp(g_grad, in, in + 1, 1, NULL, out, nout);
}

static void test_vmap_of_jvp(void **state) {
    (void)state;
    SCOPE_BEGIN;
    g_W = rnd(CT_SHAPE(4, 3), 31);
    ct_func *f = ct_func_new(f_loss_tanh, NULL);
    g_grad = ct_func_grad(f, NULL);
    ct_func *hv = ct_func_new(f_hvp, NULL);
    ct_vmap_opts o = CT_VMAP_DEFAULT;
    o.in_dims = (int64_t[]){CT_VMAP_NONE, 0};
    o.n_in_dims = 2;
    ct_func *vhv = ct_vmap(hv, &o);
    ct_tensor *x = rnd(CT_SHAPE(3), 32), *V = rnd(CT_SHAPE(5, 3), 33), *Y, *rows[5];
    ct_vmap_reset_stats();
    assert_int_equal(ct_func_call(vhv, (ct_tensor *[]){x, V}, 2, &Y, 1), CT_OK);
    ct_vmap_stats st = ct_vmap_get_stats();
    assert_int_equal(st.loop_calls, 0);
    assert_int_equal(st.fallback_ops, 0);
    assert_true(st.batched_ops > 0);
    for (int b = 0; b < 5; b++)
        assert_int_equal(ct_func_call(hv, (ct_tensor *[]){x, ct_select(V, 0, b)}, 2, &rows[b], 1), CT_OK);
    assert_close(Y, ct_stack(rows, 5, 0), 1e-14);
    /* and jacfwd(grad), which batches the same way, against the loop */
    ct_func *H = ct_func_jacfwd(g_grad, NULL);
    ct_tensor *Hx;
    assert_int_equal(ct_func_call(H, &x, 1, &Hx, 1), CT_OK);
    ct_tensor *E = ct_eye(3, 3, CT_F64), *cols[3];
    for (int b = 0; b < 3; b++)
        assert_int_equal(ct_func_call(hv, (ct_tensor *[]){x, ct_select(E, 0, b)}, 2, &cols[b], 1), CT_OK);
    assert_close(Hx, ct_stack(cols, 3, 1), 1e-14);
    /* f reads another matrix now: jacfwd traces each call, so it sees it */
    g_W = rnd(CT_SHAPE(4, 3), 34);
    ct_tensor *Hx2;
    assert_int_equal(ct_func_call(H, &x, 1, &Hx2, 1), CT_OK);
    for (int b = 0; b < 3; b++)
        assert_int_equal(ct_func_call(hv, (ct_tensor *[]){x, ct_select(E, 0, b)}, 2, &cols[b], 1), CT_OK);
    assert_close(Hx2, ct_stack(cols, 3, 1), 1e-14);
    assert_true(ct_equal(Hx2, Hx) == 0);
    ct_func_free(H);
    ct_func_free(vhv);
    ct_func_free(hv);
    ct_func_free(g_grad);
    ct_func_free(f);
    SCOPE_END;
}

/* vmap of hessian (jacfwd of jacrev, itself a vmap over jvp): nested
 * vmaps, every op batched, the loop's values */
static void test_vmap_of_hessian(void **state) {
    (void)state;
    SCOPE_BEGIN;
    g_W = rnd(CT_SHAPE(4, 3), 35);
    ct_func *f = ct_func_new(f_loss_tanh, NULL), *h = ct_func_hessian(f, NULL), *vh = ct_vmap(h, NULL);
    ct_tensor *X = rnd(CT_SHAPE(5, 3), 36), *H, *rows[5];
    ct_vmap_reset_stats();
    assert_int_equal(ct_func_call(vh, &X, 1, &H, 1), CT_OK);
    assert_int_equal(ct_vmap_get_stats().loop_calls, 0);
    assert_int_equal(ct_vmap_get_stats().fallback_ops, 0);
    for (int b = 0; b < 5; b++)
        assert_int_equal(ct_func_call(h, (ct_tensor *[]){ct_select(X, 0, b)}, 1, &rows[b], 1), CT_OK);
    assert_close(H, ct_stack(rows, 5, 0), 1e-14);
    ct_func_free(vh);
    ct_func_free(h);
    ct_func_free(f);
    SCOPE_END;
}

static void test_func_linearize(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_func *f = ct_func_new(f_tanh_mv, NULL);
    ct_tensor *x = ct_clone(rnd(CT_SHAPE(3), 23)), *W = rnd(CT_SHAPE(2, 3), 24);
    ct_tensor *in[2] = {x, W}, *y, *y2, *jv, *jv2;
    ct_func *lin = NULL;
    assert_int_equal(ct_func_linearize(f, in, 2, &y, 1, &lin), CT_OK);
    ct_tensor *v = rnd(CT_SHAPE(3), 25), *vw = rnd(CT_SHAPE(2, 3), 26);
    assert_int_equal(ct_func_jvp(f, in, (ct_tensor *[]){v, vw}, 2, &y2, &jv, 1), CT_OK);
    assert_close(y, y2, 0);
    assert_non_null(ct_fill_(x, 0.5)); /* the linearization point was copied */
    assert_int_equal(ct_func_call(lin, (ct_tensor *[]){v, vw}, 2, &jv2, 1), CT_OK);
    assert_close(jv2, jv, 0);
    assert_int_equal(ct_func_call(lin, &v, 1, &jv2, 1), CT_ERR_ARG);
    ct_clear_error();
    assert_int_equal(ct_func_jvp(f, in, (ct_tensor *[]){rnd(CT_SHAPE(4), 1), NULL}, 2, &y2, &jv, 1), CT_ERR_SHAPE);
    ct_clear_error();
    ct_func_free(lin);
    ct_func_free(f);
    SCOPE_END;
}

/* ---- the norms (fused kernels: forward AD takes their composite paths) ---------------------- */
static ct_status f_norms(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout;
    int which = *(const int *)ctx;
    ct_tensor *x = in[0], *w = in[1], *b = in[2];
    ct_tensor *rm = ct_zeros(CT_SHAPE(3), CT_F64), *rv = ct_full(CT_SHAPE(3), 2.0, CT_F64);
    if (which == 0) out[0] = ct_batch_norm(x, rm, rv, w, b, true, 0.1, 1e-5);
    else if (which == 1) out[0] = ct_batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5);
    else if (which == 2) out[0] = ct_layer_norm(ct_transpose(x, 1, 2), (const int64_t[]){4, 3}, 2, NULL, NULL, 1e-5);
    else out[0] = ct_group_norm(x, 3, w, b, 1e-5);
    return out[0] ? CT_OK : ct_last_error_code();
}

static void test_norms(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_tensor *in[3] = {rnd(CT_SHAPE(2, 3, 4), 30), rnd(CT_SHAPE(3), 31), rnd(CT_SHAPE(3), 32)};
    ct_tensor *tg[3] = {rnd(CT_SHAPE(2, 3, 4), 33), rnd(CT_SHAPE(3), 34), rnd(CT_SHAPE(3), 35)};
    double e = 1e-6;
    for (int which = 0; which < 4; which++) {
        ct_func *f = ct_func_new(f_norms, &which);
        ct_tensor *y, *jv, *yp, *ym, *ip[3], *im[3];
        assert_int_equal(ct_func_jvp(f, in, tg, 3, &y, &jv, 1), CT_OK);
        for (int k = 0; k < 3; k++) {
            ip[k] = ct_add(in[k], ct_mul_scalar(tg[k], e));
            im[k] = ct_sub(in[k], ct_mul_scalar(tg[k], e));
        }
        assert_int_equal(ct_func_call(f, ip, 3, &yp, 1), CT_OK);
        assert_int_equal(ct_func_call(f, im, 3, &ym, 1), CT_OK);
        ct_tensor *y0;
        assert_int_equal(ct_func_call(f, in, 3, &y0, 1), CT_OK);
        assert_close(y, y0, 1e-12);
        assert_close(jv, ct_div_scalar(ct_sub(yp, ym), 2 * e), 1e-6);
        ct_func_free(f);
    }
    SCOPE_END;
}

/* a Transformer encoder layer in eval mode with grad mode off (its fused
 * fast path's conditions): forward AD takes the layer's ops instead, and
 * <u, J v> equals <J^T u, v> from reverse mode */
static void test_transformer_layer(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(40);
    ct_module *m = ct_transformer_encoder_layer_new(8, 2, 16, 0.0, CT_TRANSFORMER_GELU, 1e-5, true, false, true);
    assert_non_null(m);
    ct_module_eval(m);
    ct_tensor *x = ct_randn(CT_SHAPE(2, 5, 8), CT_F32), *v = ct_randn(CT_SHAPE(2, 5, 8), CT_F32);
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *y0 = ct_transformer_encoder_layer_forward(m, x, NULL, NULL, false); /* fast path */
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *y = ct_transformer_encoder_layer_forward(m, ct_fwad_make_dual(x, v, lvl), NULL, NULL, false);
    ct_tensor *jv = tangent_of(y, lvl);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    ct_set_grad_enabled(prev);
    assert_non_null(jv);
    assert_close(y, y0, 1e-5);
    ct_tensor *xr = ct_clone(x);
    assert_int_equal(ct_set_requires_grad(xr, true), CT_OK);
    ct_tensor *yr = ct_transformer_encoder_layer_forward(m, xr, NULL, NULL, false), *g = NULL;
    ct_tensor *u = ct_randn(CT_SHAPE(2, 5, 8), CT_F32);
    assert_int_equal(ct_autograd_grad(&yr, 1, &xr, 1, &u, false, false, false, &g), CT_OK);
    double a = ct_item(ct_sum(ct_mul(u, jv), NULL, 0, false)), b = ct_item(ct_sum(ct_mul(g, v), NULL, 0, false));
    if (!(fabs(a - b) <= 1e-4 * (fabs(a) + 1))) fail_msg("<u, J v> = %.8g but <J^T u, v> = %.8g", a, b);
    ct_module_release(m);
    SCOPE_END;
}

/* ---- torch fixtures (tools/fixtures/gen_fwad.py) -------------------------------------------------- */
static ct_status f_mlp(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    out[0] = ct_linear(ct_tanh(ct_linear(in[0], in[1], in[2])), in[3], NULL);
    return out[0] ? CT_OK : ct_last_error_code();
}
static ct_status f_sm_ln(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin; (void)nout; (void)ctx;
    ct_tensor *h = ct_layer_norm(in[0], (const int64_t[]){8}, 1, in[1], in[2], 1e-5);
    out[0] = ct_add(ct_softmax(h, -1), ct_log_softmax(ct_mul_scalar(h, 0.5), 0));
    return out[0] ? CT_OK : ct_last_error_code();
}

/* inputs: primals then tangents; outputs: value and jvp */
static ct_status run_func_jvp(const fx_case *c, ct_tensor *const *in, ct_tensor **out, ct_fn fn) {
    int n = c->nin / 2;
    ct_func *f = ct_func_new(fn, NULL);
    ct_status st = ct_func_jvp(f, in, in + n, n, &out[0], &out[1], 1);
    ct_func_free(f);
    return st;
}
static ct_status run_jvp_mlp(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_func_jvp(c, in, out, f_mlp);
}
static ct_status run_jvp_sm_ln(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    return run_func_jvp(c, in, out, f_sm_ln);
}
static ct_status run_fwad_conv(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    int lvl = ct_fwad_enter_dual_level();
    ct_tensor *d[3];
    for (int k = 0; k < 3; k++) d[k] = ct_fwad_make_dual(in[k], in[3 + k], lvl);
    const int64_t pad[2] = {1, 1};
    ct_tensor *y = ct_mean(ct_gelu(ct_conv2d(d[0], d[1], d[2], NULL, pad, NULL, 1), CT_GELU_NONE),
                           CT_SHAPE(2, 3), false);
    ct_status st = y ? ct_fwad_unpack_dual(y, lvl, &out[0], &out[1]) : ct_last_error_code();
    ct_status st2 = ct_fwad_exit_dual_level(lvl);
    return st ? st : st2;
}
static ct_status run_hvp(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[1] = hvp_fwd_over_rev(in[0], in[1], in[2], false, &out[0]);
    return out[1] ? CT_OK : ct_last_error_code();
}

static const fx_op k_ops[] = {
    {"jvp_mlp", run_jvp_mlp, 1e-10, 1e-12},
    {"jvp_softmax_ln", run_jvp_sm_ln, 1e-9, 1e-11},
    {"fwad_conv_gelu", run_fwad_conv, 1e-9, 1e-11},
    {"hvp", run_hvp, 1e-9, 1e-11},
};

static void test_fixtures(void **state) {
    (void)state;
    int64_t live = ct_live_tensors();
    int f = fx_run_file(CT_FIXTURE_DIR "/fwad.txt", k_ops, sizeof k_ops / sizeof k_ops[0]);
    assert_int_equal(f, 0);
    assert_int_equal(ct_live_tensors(), live);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),          cmocka_unit_test(test_no_level),
        cmocka_unit_test(test_errors),         cmocka_unit_test(test_nested),
        cmocka_unit_test(test_views),          cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_hvp),            cmocka_unit_test(test_reverse_over_forward),
        cmocka_unit_test(test_custom_function), cmocka_unit_test(test_func_jacfwd), cmocka_unit_test(test_vmap_of_jvp),
        cmocka_unit_test(test_vmap_of_hessian),
        cmocka_unit_test(test_func_linearize), cmocka_unit_test(test_norms),
        cmocka_unit_test(test_transformer_layer),
        cmocka_unit_test(test_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
