/* test_opencl_multi.c -- tensors on a second device of a type (opencl:1):
 * where storage lands and that it stays there.  ct_to_dev, the ct_*_dev
 * factories, ops (their outputs beside their inputs, autograd's gradients
 * too), ct_module_to_dev and ct_set_default_dev put tensors on the index
 * they name; a copy between opencl:0 and opencl:1 keeps the values, and so
 * does copy_ between the cpu and a device (one device is enough); inputs
 * on two indices are refused with both named.  Transfers are differentiable
 * (to_dev and copy_ across devices: gradients back to the source's device,
 * gradcheck and double backward through them, tangents moved along).  PoCL is asked for two CPU
 * devices (POCL_DEVICES, unless the environment sets it); skipped, with the
 * reason, where there are fewer than two OpenCL devices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "test_util.h"

static bool g_have, g_one; /* two OpenCL devices / at least one */
static const ct_dev k_d0 = {CT_OPENCL, 0}, k_d1 = {CT_OPENCL, 1}, k_cpu = {CT_CPU, 0};

static void assert_on(ct_tensor *t, ct_dev d) {
    assert_non_null(t);
    char b0[32], b1[32];
    if (!ct_dev_equal(ct_tensor_dev(t), d))
        fail_msg("tensor on %s, expected %s", ct_dev_str(ct_tensor_dev(t), b0, sizeof b0),
                 ct_dev_str(d, b1, sizeof b1));
}

/* a and b (any devices) hold the same values */
static void assert_same_values(ct_tensor *a, ct_tensor *b, double tol) {
    ct_tensor *ha = ct_to_dev(a, k_cpu), *hb = ct_to_dev(b, k_cpu);
    assert_non_null(ha);
    assert_non_null(hb);
    assert_int_equal(ct_allclose(ha, hb, tol, tol, false), 1);
}

static void t_to_and_back(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(5, 7), CT_F32);
    ct_tensor *y = ct_to_dev(x, k_d1);
    assert_on(y, k_d1);
    assert_int_equal(ct_get_device_index(y), 1);
    assert_same_values(x, y, 0);
    /* opencl:1 -> opencl:0 and back, device to device (through the host) */
    ct_tensor *z = ct_to_dev(y, k_d0);
    assert_on(z, k_d0);
    assert_same_values(x, z, 0);
    ct_tensor *w = ct_to_dev(ct_transpose(z, 0, 1), k_d1); /* a strided source */
    assert_on(w, k_d1);
    assert_same_values(ct_transpose(x, 0, 1), w, 0);
    /* a tensor already there is returned as is */
    ct_tensor *same = ct_to_dev(y, k_d1);
    assert_ptr_equal(same, y);
    SCOPE_END;
}

static void t_factories(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    assert_on(ct_empty_dev(CT_SHAPE(3), CT_F32, k_d1), k_d1);
    ct_tensor *z = ct_zeros_dev(CT_SHAPE(2, 3), CT_F32, k_d1);
    assert_on(z, k_d1);
    assert_same_values(z, ct_zeros(CT_SHAPE(2, 3), CT_F32), 0);
    assert_on(ct_full_dev(CT_SHAPE(4), 2.5, CT_F64, k_d0), k_d0);
    /* the default device carries its index (torch.set_default_device("...:1")) */
    assert_int_equal(ct_set_default_dev(k_d1), CT_OK);
    assert_true(ct_dev_equal(ct_get_default_dev(), k_d1));
    ct_tensor *o = ct_ones(CT_SHAPE(3), CT_F32);
    assert_on(o, k_d1);
    assert_int_equal(ct_set_default_dev(k_cpu), CT_OK);
    assert_on(ct_ones(CT_SHAPE(3), CT_F32), k_cpu);
    /* an index that does not exist is refused, not mapped to another */
    expect_err(ct_zeros_dev(CT_SHAPE(2), CT_F32, CT_DEV(CT_OPENCL, 99)), CT_ERR_DEVICE, "opencl:99 is not available");
    SCOPE_END;
}

/* ops on opencl:1 compute there, their results stay there and match the cpu */
static void t_ops_stay(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_manual_seed(3);
    ct_tensor *a = ct_randn(CT_SHAPE(8, 16), CT_F32), *b = ct_randn(CT_SHAPE(16, 4), CT_F32);
    ct_tensor *a1 = ct_to_dev(a, k_d1), *b1 = ct_to_dev(b, k_d1);
    ct_tensor *r[4] = {ct_add(ct_mul_scalar(a1, 2.0), a1), ct_matmul(a1, b1), ct_sum(a1, NULL, 0, false),
                       ct_softmax(a1, 1)};
    ct_tensor *e[4] = {ct_add(ct_mul_scalar(a, 2.0), a), ct_matmul(a, b), ct_sum(a, NULL, 0, false),
                       ct_softmax(a, 1)};
    for (int k = 0; k < 4; k++) {
        assert_on(r[k], k_d1);
        assert_same_values(r[k], e[k], 1e-4);
    }
    /* a 0-dim cpu number combines with opencl:1 (a wrapped scalar) */
    assert_on(ct_mul(a1, ct_scalar(3.0, CT_F32)), k_d1);
    SCOPE_END;
}

static void t_mixed_refused(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(4, 4), CT_F32);
    ct_tensor *x0 = ct_to_dev(x, k_d0), *x1 = ct_to_dev(x, k_d1);
    expect_err(ct_add(x0, x1), CT_ERR_DEVICE, "expected all tensors on the same device, got opencl:0 and opencl:1");
    expect_err(ct_matmul(x1, x0), CT_ERR_DEVICE, "got opencl:1 and opencl:0");
    SCOPE_END;
}

static void t_autograd_and_module(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_manual_seed(11);
    ct_module *lin = ct_linear_new(6, 3, true);
    assert_non_null(lin);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 6), CT_F32);
    /* the cpu's gradients first */
    ct_tensor *w = ct_module_param(lin, 0);
    assert_int_equal(ct_backward(ct_sum(ct_module_forward1(lin, x), NULL, 0, false), NULL, false, false), CT_OK);
    ct_tensor *gw = ct_clone(ct_grad(w));
    ct_module_zero_grad(lin);
    assert_int_equal(ct_module_to_dev(lin, k_d1), CT_OK);
    w = ct_module_param(lin, 0);
    assert_on(w, k_d1);
    assert_on(ct_module_param(lin, 1), k_d1);
    ct_tensor *x1 = ct_to_dev(x, k_d1);
    ct_tensor *y = ct_module_forward1(lin, x1);
    assert_on(y, k_d1);
    assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
    assert_on(ct_grad(w), k_d1);
    assert_same_values(ct_grad(w), gw, 1e-5);
    /* an input on the other device is refused by the layer's op */
    expect_err(ct_module_forward1(lin, ct_to_dev(x, k_d0)), CT_ERR_DEVICE, "got opencl:0 and opencl:1");
    ct_module_release(lin);
    SCOPE_END;
}

/* copy_ between devices (torch's dst.copy_(src)): cpu -> device, device ->
 * cpu, device -> device, broadcasting, a dtype change and a strided dst */
static void t_copy_across(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_tensor *x = ct_randn(CT_SHAPE(3, 4), CT_F32);
    ct_tensor *d = ct_zeros_dev(CT_SHAPE(3, 4), CT_F64, k_d0);
    assert_ptr_equal(ct_copy_(d, x), d);
    assert_on(d, k_d0);
    assert_same_values(d, ct_to_dtype(x, CT_F64), 0);
    ct_tensor *h = ct_zeros(CT_SHAPE(4, 3), CT_F32);
    assert_non_null(ct_copy_(ct_transpose(h, 0, 1), d)); /* into a strided cpu view */
    assert_same_values(ct_transpose(h, 0, 1), x, 1e-7);
    ct_tensor *row = ct_to_dev(ct_arange(0, 4, 1, CT_F32), k_d0);
    ct_tensor *hb = ct_empty(CT_SHAPE(3, 4), CT_F32);
    assert_non_null(ct_copy_(hb, row)); /* broadcast on the way */
    assert_same_values(hb, ct_expand(ct_arange(0, 4, 1, CT_F32), CT_SHAPE(3, 4)), 0);
    if (g_have) {
        ct_tensor *d1 = ct_empty_dev(CT_SHAPE(3, 4), CT_F64, k_d1);
        assert_non_null(ct_copy_(d1, d));
        assert_on(d1, k_d1);
        assert_same_values(d1, d, 0);
    }
    SCOPE_END;
}

/* ---- transfers are differentiable (torch's ToCopyBackward, CopyBackwards) --
 * The oracle of each gradient is the same computation run all on the cpu
 * (the cpu's kernels and rules are checked against torch elsewhere): a
 * transfer is the identity on values, so the gradients must agree. */

static ct_tensor *leaf(ct_tensor *t) {
    assert_non_null(t);
    assert_int_equal(ct_set_requires_grad(t, true), CT_OK);
    return t;
}

/* a fresh cpu leaf with t's values (t any device) */
static ct_tensor *cpu_leaf(ct_tensor *t) { return leaf(ct_clone(ct_detach(ct_to_dev(t, k_cpu)))); }

static void assert_grad(ct_tensor *t, ct_tensor *expect, double tol) {
    ct_tensor *g = ct_grad(t);
    assert_non_null(g);
    assert_on(g, ct_tensor_dev(t));
    assert_int_equal(ct_get_dtype(g), ct_get_dtype(t));
    assert_same_values(g, expect, tol);
}

/* cpu -> opencl:0 -> cpu, from a transposed (strided) view of a cpu leaf,
 * with a leaf on opencl:0 in the middle: x's gradient comes back to the
 * cpu, b's stays on opencl:0 */
static ct_tensor *f_there_and_back(ct_tensor *x, ct_tensor *b, ct_tensor *w, ct_dev dev) {
    ct_tensor *xd = ct_to_dev(ct_transpose(x, 0, 1), dev);
    ct_tensor *zd = ct_add(ct_mul(ct_tanh(xd), xd), b);
    return ct_sum(ct_mul(ct_to_dev(zd, k_cpu), w), NULL, 0, false);
}

static void t_grad_there_and_back(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_manual_seed(21);
    ct_tensor *x = leaf(ct_randn(CT_SHAPE(4, 5), CT_F32));
    ct_tensor *b = leaf(ct_to_dev(ct_randn(CT_SHAPE(5, 4), CT_F32), k_d0));
    ct_tensor *w = ct_randn(CT_SHAPE(5, 4), CT_F32);
    ct_tensor *xd = ct_to_dev(x, k_d0);
    assert_on(xd, k_d0);
    assert_true(ct_requires_grad(xd));
    assert_false(ct_is_leaf(xd));
    assert_string_equal(ct_grad_fn_name(xd), "ToCopyBackward0"); /* torch's name for to(device) */
    assert_int_equal(ct_backward(f_there_and_back(x, b, w, k_d0), NULL, false, false), CT_OK);
    ct_tensor *xc = cpu_leaf(x), *bc = cpu_leaf(b);
    assert_int_equal(ct_backward(f_there_and_back(xc, bc, w, k_cpu), NULL, false, false), CT_OK);
    assert_grad(x, ct_grad(xc), 1e-5);
    assert_grad(b, ct_grad(bc), 1e-5);
    /* a second backward, through ct_to_device (the current opencl index),
     * accumulates into the same cpu .grad */
    ct_tensor *xo = ct_to_device(x, CT_OPENCL);
    assert_int_equal(ct_get_device(xo), CT_OPENCL);
    assert_int_equal(ct_backward(ct_sum(xo, NULL, 0, false), NULL, false, false), CT_OK);
    assert_grad(x, ct_add_scalar(ct_grad(xc), 1.0), 1e-5);
    SCOPE_END;
}

/* Backward rules that make a zero tensor of an input's shape (slice and
 * unfold scatter into zeros, max_pool's backward takes a tensor of the
 * input's geometry) make it on the input's device index: a leaf on
 * opencl:1 gets its gradient on opencl:1, equal to the cpu's. */
static ct_tensor *f_zero_rules(ct_tensor *x) {
    const int64_t k2[2] = {2, 2};
    ct_tensor *a = ct_slice(x, 3, 1, 7, 2);                                   /* [2, 3, 6, 3] */
    ct_tensor *u = ct_unfold(x, 2, 3, 2);                                    /* [2, 3, 2, 8, 3] */
    ct_tensor *p = ct_max_pool2d(x, k2, NULL, NULL, NULL, false, NULL);      /* [2, 3, 3, 4] */
    return ct_add(ct_add(ct_sum(ct_mul(a, a), NULL, 0, false), ct_sum(ct_tanh(u), NULL, 0, false)),
                  ct_sum(ct_mul(p, p), NULL, 0, false));
}

static void t_grad_zero_rules(void **st) {
    (void)st;
    if (!g_have) skip();
    SCOPE_BEGIN;
    ct_manual_seed(31);
    ct_tensor *xc = leaf(ct_randn(CT_SHAPE(2, 3, 6, 8), CT_F32));
    ct_tensor *x1 = leaf(ct_to_dev(ct_detach(xc), k_d1));
    assert_int_equal(ct_backward(f_zero_rules(xc), NULL, false, false), CT_OK);
    /* each rule's own result (ct_autograd_grad: no accumulation into a .grad between) */
    ct_tensor *g1 = NULL;
    assert_int_equal(ct_autograd_grad((ct_tensor *[]){f_zero_rules(x1)}, 1, &x1, 1, NULL, false, false, false, &g1),
                     CT_OK);
    assert_on(g1, k_d1);
    assert_same_values(g1, ct_grad(xc), 1e-5);
    for (int r = 0; r < 3; r++) { /* one rule at a time */
        const int64_t k2[2] = {2, 2};
        ct_tensor *y = r == 0 ? ct_slice(x1, 3, 1, 7, 2)
                     : r == 1 ? ct_unfold(x1, 2, 3, 2)
                              : ct_max_pool2d(x1, k2, NULL, NULL, NULL, false, NULL);
        g1 = NULL;
        assert_int_equal(ct_autograd_grad((ct_tensor *[]){ct_sum(y, NULL, 0, false)}, 1, &x1, 1, NULL, false,
                                          false, false, &g1), CT_OK);
        assert_on(g1, k_d1);
    }
    /* interleaved with ops on opencl:0: the slice's backward runs after w0's
     * (which leave opencl:0 the current index), its gradient on opencl:1 */
    ct_tensor *w0 = leaf(ct_to_dev(ct_randn(CT_SHAPE(3, 3), CT_F32), k_d0));
    for (int r = 0; r < 3; r++) {
        const int64_t k2[2] = {2, 2};
        ct_tensor *a = r == 0 ? ct_slice(x1, 3, 1, 7, 2)
                     : r == 1 ? ct_unfold(x1, 2, 3, 2)
                              : ct_max_pool2d(x1, k2, NULL, NULL, NULL, false, NULL);
        ct_tensor *sa = ct_sum(a, NULL, 0, false);
        ct_tensor *sb = ct_sum(ct_mul(w0, w0), NULL, 0, false);
        ct_tensor *L = ct_add(ct_to_dev(sa, k_cpu), ct_to_dev(sb, k_cpu));
        g1 = NULL;
        assert_int_equal(ct_autograd_grad(&L, 1, &x1, 1, NULL, false, false, false, &g1), CT_OK);
        assert_on(g1, k_d1);
    }
    assert_int_equal(ct_backward(f_zero_rules(x1), NULL, false, false), CT_OK);
    assert_grad(x1, ct_grad(xc), 1e-5);
    SCOPE_END;
}

/* cpu -(f64)-> opencl:0 -> opencl:1 -> opencl:0 -> cpu with ops on each
 * device and a leaf on opencl:1 (dev1 = cpu too: the oracle); x is f32,
 * the middle runs in f64, so x's gradient also goes back to f32 */
static ct_tensor *f_chain(ct_tensor *x, ct_tensor *c1, ct_dev dev0, ct_dev dev1) {
    ct_tensor *a = ct_mul_scalar(ct_sin(ct_to_dev(ct_to_dtype(x, CT_F64), dev0)), 2.0);
    ct_tensor *a1 = ct_to_dev(a, dev1);
    ct_tensor *b = ct_add(ct_mul(a1, a1), ct_mul(c1, a1));
    ct_tensor *e = ct_exp(ct_mul_scalar(ct_to_dev(b, dev0), 0.25));
    return ct_sum(ct_to_dev(ct_slice(e, 1, 0, INT64_MAX, 2), k_cpu), NULL, 0, false);
}

static void t_grad_chain(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_manual_seed(22);
    ct_dev d1 = g_have ? k_d1 : k_d0;
    ct_tensor *x = leaf(ct_randn(CT_SHAPE(3, 6), CT_F32));
    ct_tensor *c1 = leaf(ct_to_dev(ct_randn(CT_SHAPE(3, 6), CT_F64), d1));
    assert_int_equal(ct_backward(f_chain(x, c1, k_d0, d1), NULL, false, false), CT_OK);
    ct_tensor *xc = cpu_leaf(x), *cc = cpu_leaf(c1);
    assert_int_equal(ct_backward(f_chain(xc, cc, k_cpu, k_cpu), NULL, false, false), CT_OK);
    assert_grad(x, ct_grad(xc), 1e-5);
    assert_grad(c1, ct_grad(cc), 1e-10);
    /* opencl:1 -> opencl:0 alone: the gradient goes back to index 1 */
    if (g_have) {
        ct_tensor *y = leaf(ct_to_dev(ct_randn(CT_SHAPE(4), CT_F32), k_d1));
        ct_tensor *y0 = ct_to_dev(y, k_d0);
        assert_int_equal(ct_backward(ct_sum(ct_mul(y0, y0), NULL, 0, false), NULL, false, false), CT_OK);
        assert_grad(y, ct_mul_scalar(y, 2.0), 1e-6);
    }
    SCOPE_END;
}

/* copy_ across devices with a src that requires grad (CopyBackwards): into a
 * row of a non-leaf on opencl:0 (a view: the base's history is rebased),
 * with a broadcast and a dtype change.  src's gradient comes back to the
 * cpu in f32; the overwritten row of the old values gets none.  Oracle:
 * the same copies on the cpu, and the gradients written out. */
static ct_tensor *f_copy(ct_tensor *old, ct_tensor *src, ct_tensor *whole, ct_tensor *c, ct_dev dev) {
    ct_tensor *dst = ct_mul_scalar(old, 2.0);
    if (!ct_copy_(ct_select(dst, 0, 1), src)) return NULL;
    ct_tensor *dst2 = ct_zeros_dev(CT_SHAPE(2, 4), CT_F64, dev);
    if (!ct_copy_(dst2, whole)) return NULL; /* [4] broadcast to [2, 4] */
    return ct_add(ct_sum(ct_mul(dst, c), NULL, 0, false), ct_sum(ct_mul(dst2, dst2), NULL, 0, false));
}

static void t_copy_across_grad(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_manual_seed(23);
    ct_tensor *old = leaf(ct_to_dev(ct_randn(CT_SHAPE(3, 4), CT_F64), k_d0));
    ct_tensor *src = leaf(ct_randn(CT_SHAPE(4), CT_F32));
    ct_tensor *whole = leaf(ct_randn(CT_SHAPE(4), CT_F32));
    ct_tensor *c = ct_to_dev(ct_randn(CT_SHAPE(3, 4), CT_F64), k_d0);
    ct_tensor *loss = f_copy(old, src, whole, c, k_d0);
    assert_non_null(loss);
    assert_on(loss, k_d0);
    assert_int_equal(ct_backward(loss, NULL, false, false), CT_OK);
    ct_tensor *oc = cpu_leaf(old), *sc = cpu_leaf(src), *wc = cpu_leaf(whole), *cc = ct_to_dev(c, k_cpu);
    assert_int_equal(ct_backward(f_copy(oc, sc, wc, cc, k_cpu), NULL, false, false), CT_OK);
    assert_grad(old, ct_grad(oc), 1e-12);
    assert_grad(src, ct_grad(sc), 1e-6);
    assert_grad(whole, ct_grad(wc), 1e-6);
    /* written out: d src = c[1], d whole = 2 * 2 * whole (two rows), d old =
     * 2 c with row 1 zero */
    assert_same_values(ct_grad(src), ct_select(cc, 0, 1), 1e-6);
    assert_same_values(ct_grad(whole), ct_mul_scalar(whole, 4.0), 1e-6);
    ct_tensor *go = ct_mul_scalar(cc, 2.0);
    assert_non_null(ct_zero_(ct_select(go, 0, 1)));
    assert_same_values(ct_grad(old), go, 1e-12);
    /* opencl:1 -> opencl:0, and a 0-dim cpu number into opencl:0 */
    ct_tensor *num = leaf(ct_scalar(1.5, CT_F32));
    ct_tensor *d = ct_zeros_dev(CT_SHAPE(2, 3), CT_F32, k_d0);
    assert_non_null(ct_copy_(d, num));
    assert_true(ct_requires_grad(d));
    ct_tensor *y = NULL;
    if (g_have) {
        y = leaf(ct_to_dev(ct_randn(CT_SHAPE(3), CT_F32), k_d1));
        assert_non_null(ct_copy_(ct_select(d, 0, 0), y));
    }
    ct_tensor *k = ct_to_dev(ct_arange(1, 7, 1, CT_F32), k_d0);
    assert_int_equal(ct_backward(ct_sum(ct_mul(d, ct_reshape(k, CT_SHAPE(2, 3))), NULL, 0, false), NULL, false,
                                 false), CT_OK);
    /* num fills both rows, then y overwrites row 0: num gets 4+5+6 or 21 */
    assert_grad(num, ct_scalar(g_have ? 15.0 : 21.0, CT_F32), 0);
    if (g_have) assert_grad(y, ct_arange(1, 4, 1, CT_F32), 0);
    SCOPE_END;
}

/* gradcheck and gradgradcheck in f64 through transfers (the backward of a
 * transfer is a transfer, recorded under create_graph) */
static ct_tensor *f_gc(ct_tensor *const *in, int n, void *u) {
    (void)n;
    (void)u;
    ct_tensor *a = ct_mul(ct_sin(ct_to_dev(in[0], k_d0)), ct_to_dev(in[1], k_d0));
    ct_tensor *b = ct_to_dev(ct_mul(a, a), g_have ? k_d1 : k_d0);
    ct_tensor *e = ct_exp(ct_mul_scalar(b, 0.5));
    return ct_to_dev(ct_sum(e, (int64_t[]){1}, 1, false), k_cpu);
}

static void t_gradcheck_transfer(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_manual_seed(24);
    ct_tensor *in[2] = {leaf(ct_randn(CT_SHAPE(2, 3), CT_F64)), leaf(ct_randn(CT_SHAPE(2, 3), CT_F64))};
    if (ct_gradcheck(f_gc, NULL, in, 2, 0, 0, 0)) fail_msg("gradcheck: %s", ct_last_error());
    if (ct_gradgradcheck(f_gc, NULL, in, 2, 0, 0, 0)) fail_msg("gradgradcheck: %s", ct_last_error());
    /* double backward written out: y = x on opencl:0, d/dx sum(y^3) = 3x^2,
     * d/dx sum(3x^2) = 6x, each on the cpu */
    ct_tensor *x = in[0], *g = NULL;
    ct_tensor *y = ct_to_dev(x, k_d0);
    ct_tensor *l = ct_sum(ct_mul(ct_mul(y, y), y), NULL, 0, false);
    assert_int_equal(ct_autograd_grad(&l, 1, &x, 1, NULL, false, true, false, &g), CT_OK);
    assert_on(g, k_cpu);
    assert_true(ct_requires_grad(g));
    assert_same_values(g, ct_mul_scalar(ct_mul(x, x), 3.0), 1e-12);
    assert_int_equal(ct_backward(ct_sum(g, NULL, 0, false), NULL, false, false), CT_OK);
    assert_grad(x, ct_mul_scalar(x, 6.0), 1e-12);
    SCOPE_END;
}

/* not recorded: under no_grad, of a detached tensor, of one that does not
 * require grad; a tensor already on the device is returned as it is */
static void t_transfer_not_recorded(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_tensor *x = leaf(ct_randn(CT_SHAPE(3), CT_F32));
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *a = ct_to_dev(x, k_d0);
    ct_tensor *d = ct_zeros_dev(CT_SHAPE(3), CT_F32, k_d0);
    assert_non_null(ct_copy_(d, x));
    ct_set_grad_enabled(prev);
    assert_false(ct_requires_grad(a));
    assert_true(ct_is_leaf(a));
    assert_false(ct_requires_grad(d));
    ct_tensor *b = ct_to_dev(ct_detach(x), k_d0);
    assert_false(ct_requires_grad(b));
    assert_false(ct_requires_grad(ct_to_dev(ct_randn(CT_SHAPE(3), CT_F32), k_d0)));
    assert_same_values(a, x, 0);
    /* the detached copy feeds no gradient back */
    ct_tensor *bb = leaf(ct_to_dev(ct_randn(CT_SHAPE(3), CT_F32), k_d0));
    assert_int_equal(ct_backward(ct_sum(ct_mul(ct_add(a, b), bb), NULL, 0, false), NULL, false, false), CT_OK);
    assert_null(ct_grad(x));
    assert_grad(bb, ct_mul_scalar(x, 2.0), 1e-6);
    /* already there: t itself, its history kept */
    ct_tensor *y = ct_to_dev(x, k_d0);
    assert_ptr_equal(ct_to_dev(y, k_d0), y);
    assert_ptr_equal(ct_to_dev(x, k_cpu), x);
    SCOPE_END;
}

/* forward AD: the tangent moves with its primal, to the same device and
 * index, through to_dev and through copy_ across devices */
static void t_jvp_transfer(void **st) {
    (void)st;
    if (!g_one) skip();
    SCOPE_BEGIN;
    ct_manual_seed(25);
    ct_tensor *x0 = ct_randn(CT_SHAPE(2, 5), CT_F64), *v = ct_randn(CT_SHAPE(2, 5), CT_F64);
    int lvl = ct_fwad_enter_dual_level();
    assert_true(lvl >= 0);
    ct_tensor *x = ct_fwad_make_dual(x0, v, lvl);
    ct_tensor *y = ct_to_dev(x, k_d0), *yp = NULL, *yt = NULL;
    assert_int_equal(ct_fwad_unpack_dual(y, lvl, &yp, &yt), CT_OK);
    assert_non_null(yt);
    assert_on(yt, k_d0);
    assert_same_values(yt, v, 0);
    ct_tensor *z = ct_sin(ct_mul_scalar(y, 3.0));
    if (g_have) z = ct_mul(ct_to_dev(z, k_d1), ct_to_dev(z, k_d1));
    ct_tensor *r = ct_to_dev(z, k_cpu), *rt = NULL;
    assert_int_equal(ct_fwad_unpack_dual(r, lvl, NULL, &rt), CT_OK);
    assert_non_null(rt);
    assert_on(rt, k_cpu);
    /* d sin(3x) = 3 cos(3x) v; squared: 2 sin(3x) 3 cos(3x) v */
    ct_tensor *e = ct_mul(ct_mul_scalar(ct_cos(ct_mul_scalar(x0, 3.0)), 3.0), v);
    if (g_have) e = ct_mul(ct_mul_scalar(ct_sin(ct_mul_scalar(x0, 3.0)), 2.0), e);
    assert_same_values(rt, e, 1e-12);
    /* copy_ from the cpu dual into opencl:0 */
    ct_tensor *d = ct_zeros_dev(CT_SHAPE(2, 5), CT_F64, k_d0), *dt = NULL;
    assert_non_null(ct_copy_(d, x));
    assert_int_equal(ct_fwad_unpack_dual(d, lvl, NULL, &dt), CT_OK);
    assert_non_null(dt);
    assert_on(dt, k_d0);
    assert_same_values(dt, v, 0);
    assert_int_equal(ct_fwad_exit_dual_level(lvl), CT_OK);
    SCOPE_END;
}

int main(void) {
    setenv("POCL_DEVICES", "pthread pthread", 0); /* before the OpenCL platform is opened */
    int n = ct_device_count(CT_OPENCL);
    if (n < 2) {
        if (n <= 0)
            printf("test_opencl_multi: skipped: %s\n",
                   ct_last_error()[0] ? ct_last_error() : "no OpenCL device");
        else
            printf("test_opencl_multi: the two-device tests skipped: %d OpenCL device\n", n);
    }
    ct_clear_error();
    g_have = n >= 2;
    g_one = n >= 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_to_and_back),  cmocka_unit_test(t_factories),
        cmocka_unit_test(t_ops_stay),     cmocka_unit_test(t_mixed_refused),
        cmocka_unit_test(t_autograd_and_module), cmocka_unit_test(t_copy_across),
        cmocka_unit_test(t_grad_there_and_back), cmocka_unit_test(t_grad_chain),
        cmocka_unit_test(t_copy_across_grad), cmocka_unit_test(t_gradcheck_transfer),
        cmocka_unit_test(t_transfer_not_recorded), cmocka_unit_test(t_jvp_transfer),
        cmocka_unit_test(t_grad_zero_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
