/* test_elementwise.c -- bad input for the elementwise ops: NULL propagation,
 * shape mismatches, wrong dtypes, bad arguments, integer division by zero;
 * every test checks the error code and message and that nothing leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "ops/meta.h"

#define BEGIN                                                                      \
    int64_t live0 = ct_live_tensors();                                             \
    ct_scope s_ = ct_scope_begin();                                                \
    ct_clear_error()
#define END                                                                        \
    ct_scope_end(s_);                                                              \
    assert_int_equal(ct_live_tensors(), live0)

/* r must be NULL with error `code` whose message contains `part` */
#define EXPECT_ERR(r, code, part)                                                  \
    do {                                                                           \
        ct_clear_error();                                                          \
        ct_tensor *r_ = (r);                                                       \
        assert_null(r_);                                                           \
        assert_int_equal(ct_last_error_code(), (code));                            \
        if (!strstr(ct_last_error(), (part))) {                                    \
            print_error("message '%s' lacks '%s'\n", ct_last_error(), (part));     \
            fail();                                                                \
        }                                                                          \
    } while (0)

static ct_tensor *f32(void) { return ct_arange(0, 6, 1, CT_F32); }

static void test_null_propagation(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *x = f32();
    /* a first error, then NULL inputs keep it */
    assert_null(ct_add(ct_ones(CT_SHAPE(2, 3), CT_F32), ct_ones(CT_SHAPE(4), CT_F32)));
    ct_status code = ct_last_error_code();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    assert_int_equal(code, CT_ERR_SHAPE);
    assert_null(ct_exp(NULL));
    assert_null(ct_exp_(NULL));
    assert_null(ct_neg(NULL));
    assert_null(ct_square(NULL));
    assert_null(ct_add(NULL, x));
    assert_null(ct_add(x, NULL));
    assert_null(ct_add_scalar(NULL, 1));
    assert_null(ct_div_mode(x, NULL, CT_ROUND_FLOOR));
    assert_null(ct_pow_scalar(NULL, 2));
    assert_null(ct_rpow_scalar(2, NULL));
    assert_null(ct_clamp(NULL, 0, 1));
    assert_null(ct_clamp_tensor(NULL, x, x));
    assert_null(ct_nan_to_num(NULL, 0, NAN, NAN));
    assert_null(ct_gelu(NULL, CT_GELU_NONE));
    assert_null(ct_logit(NULL, 0.1));
    assert_null(ct_isclose(x, NULL, 1e-5, 1e-8, false));
    assert_null(ct_where(NULL, x, x));
    assert_null(ct_lerp_scalar(x, NULL, 0.5));
    assert_null(ct_addcmul(x, x, NULL, 1));
    assert_null(ct_addcdiv_(NULL, x, x, 1));
    assert_null(ct_isnan(NULL));
    assert_null(ct_relu(ct_exp(ct_add(NULL, x))));
    assert_int_equal(ct_last_error_code(), code);
    assert_string_equal(ct_last_error(), msg);
    END;
}

static void test_shape_errors(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *a = ct_ones(CT_SHAPE(2, 3), CT_F32), *b = ct_ones(CT_SHAPE(4), CT_F32);
    ct_clear_error();
    assert_null(ct_add(a, b));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(),
                        "add: shapes [2, 3] and [4] cannot be broadcast (dim 1: 3 vs 4)");
    EXPECT_ERR(ct_mul(a, b), CT_ERR_SHAPE, "mul: shapes [2, 3] and [4]");
    EXPECT_ERR(ct_where(ct_ones(CT_SHAPE(2, 3), CT_BOOL), a, b), CT_ERR_SHAPE, "cannot be broadcast");
    EXPECT_ERR(ct_lerp(a, b, a), CT_ERR_SHAPE, "lerp: shapes");
    /* in-place output must have the broadcast shape */
    ct_tensor *row = ct_ones(CT_SHAPE(1, 3), CT_F32);
    ct_clear_error();
    assert_null(ct_add_(row, a));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_string_equal(ct_last_error(),
                        "add_: output with shape [1, 3] doesn't match the broadcast shape [2, 3]");
    EXPECT_ERR(ct_addcmul_(row, a, a, 1), CT_ERR_SHAPE, "doesn't match the broadcast shape [2, 3]");
    END;
}

static void test_dtype_errors(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *x = f32();
    ct_tensor *xi = ct_arange(0, 6, 1, CT_I32);
    ct_tensor *xb = ct_ones(CT_SHAPE(6), CT_BOOL);
    ct_clear_error();
    assert_null(ct_bitwise_and(x, x));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(),
                        "bitwise_and: only integral and bool tensors are supported, got float32");
    EXPECT_ERR(ct_bitwise_not(x), CT_ERR_DTYPE, "only integral and bool");
    EXPECT_ERR(ct_bitwise_left_shift(xb, xb), CT_ERR_DTYPE, "not supported for bool");
    EXPECT_ERR(ct_neg(xb), CT_ERR_DTYPE, "neg: not supported for bool tensors");
    EXPECT_ERR(ct_sub(xb, xb), CT_ERR_DTYPE, "sub: subtraction with two bool tensors");
    EXPECT_ERR(ct_exp_(xi), CT_ERR_DTYPE,
               "exp_: result type float32 can't be cast to the desired output type int32");
    EXPECT_ERR(ct_silu(xi), CT_ERR_DTYPE, "silu: not implemented for dtype int32");
    EXPECT_ERR(ct_gelu(xi, CT_GELU_NONE), CT_ERR_DTYPE, "gelu: not implemented for dtype int32");
    EXPECT_ERR(ct_hypot(xi, xi), CT_ERR_DTYPE, "hypot: not implemented for dtype int32");
    EXPECT_ERR(ct_round_decimals(xi, 2), CT_ERR_DTYPE, "round_decimals: not implemented");
    EXPECT_ERR(ct_where(x, x, x), CT_ERR_DTYPE,
               "where: expected condition to be a boolean tensor, but got a tensor with dtype float32");
    EXPECT_ERR(ct_isclose(x, xi, 1e-5, 1e-8, false), CT_ERR_DTYPE, "isclose: float32 did not match int32");
    ct_tensor *x64 = ct_arange(0, 6, 1, CT_F64);
    EXPECT_ERR(ct_lerp_scalar(x, x64, 0.5), CT_ERR_DTYPE,
               "lerp: expected dtype float32 for `end` but got dtype float64");
    EXPECT_ERR(ct_lerp_scalar(xi, xi, 0.5), CT_ERR_DTYPE, "lerp: not implemented for dtype int32");
    EXPECT_ERR(ct_addcdiv(xi, xi, xi, 1), CT_ERR_DTYPE, "addcdiv: Integer division");
    EXPECT_ERR(ct_add_scalar_(xi, 0.5), CT_ERR_DTYPE, "can't be cast to the desired output type int32");
    EXPECT_ERR(ct_clamp_(xi, 0.5, NAN), CT_ERR_DTYPE, "can't be cast");
    EXPECT_ERR(ct_square_(xb), CT_ERR_DTYPE, "result type int64 can't be cast to the desired output type bool");
    END;
}

static void test_arg_errors(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *x = f32();
    ct_tensor *xi = ct_arange(-3, 3, 1, CT_I64);
    ct_tensor *z = ct_zeros(CT_SHAPE(6), CT_I64);
    ct_tensor *zz = ct_slice(ct_arange(0, 12, 1, CT_I32), 0, 1, 12, 2); /* strided, odd values */
    EXPECT_ERR(ct_div_mode(xi, z, CT_ROUND_FLOOR), CT_ERR_ARG, "div_floor: ZeroDivisionError");
    EXPECT_ERR(ct_div_mode(xi, xi, CT_ROUND_TRUNC), CT_ERR_ARG, "div_trunc: ZeroDivisionError");
    EXPECT_ERR(ct_remainder(xi, xi), CT_ERR_ARG, "remainder: ZeroDivisionError");
    EXPECT_ERR(ct_fmod(xi, z), CT_ERR_ARG, "fmod: ZeroDivisionError");
    EXPECT_ERR(ct_floor_divide(xi, ct_wrap_int(0)), CT_ERR_ARG, "ZeroDivisionError");
    assert_non_null(ct_floor_divide(ct_mul(zz, zz), zz)); /* no zero: fine */
    /* float division by zero is IEEE, not an error */
    assert_non_null(ct_div_mode(x, ct_zeros(CT_SHAPE(6), CT_F32), CT_ROUND_FLOOR));
    EXPECT_ERR(ct_div_mode(x, x, (ct_rounding)7), CT_ERR_ARG, "div_mode: rounding mode 7");
    EXPECT_ERR(ct_pow_scalar(xi, -2), CT_ERR_ARG, "Integers to negative integer powers are not allowed.");
    EXPECT_ERR(ct_clamp(x, NAN, NAN), CT_ERR_ARG, "clamp: at least one of 'min' or 'max'");
    EXPECT_ERR(ct_clamp_tensor(x, NULL, NULL), CT_ERR_ARG, "clamp_tensor: at least one of");
    EXPECT_ERR(ct_softshrink(x, -1), CT_ERR_ARG, "softshrink: lambda must be greater or equal to 0");
    EXPECT_ERR(ct_celu(x, 0), CT_ERR_ARG, "celu: ZeroDivisionError");
    EXPECT_ERR(ct_gelu(x, (ct_gelu_approx)3), CT_ERR_ARG, "gelu: approximate must be");
    EXPECT_ERR(ct_isclose(x, x, -1, 0, false), CT_ERR_ARG, "isclose: rtol must be greater than or equal to zero");
    EXPECT_ERR(ct_isclose(x, x, 0, -1, false), CT_ERR_ARG, "isclose: atol must be");
    EXPECT_ERR(ct_hardtanh(ct_ones(CT_SHAPE(3), CT_U8), -1, 2), CT_ERR_ARG,
               "cannot do hardtanh on an unsigned type with negative limits");
    EXPECT_ERR(ct_add_scaled(xi, xi, 0.5), CT_ERR_ARG, "argument alpha must not be a floating point");
    END;
}

/* results that need no fixture: in-place identity, scalar promotion, big sizes (threads) */
static void test_semantics(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *x = ct_arange(0, 6, 1, CT_F32);
    int64_t v0 = ct_version(x);
    assert_ptr_equal(ct_exp_(x), x);
    assert_true(ct_version(x) > v0);
    ct_tensor *xi = ct_arange(0, 6, 1, CT_I32);
    assert_int_equal(ct_get_dtype(ct_add_scalar(xi, 2)), CT_I32);
    assert_int_equal(ct_get_dtype(ct_add_scalar(xi, 2.5)), CT_F32);
    assert_int_equal(ct_get_dtype(ct_exp(xi)), CT_F32);
    assert_int_equal(ct_get_dtype(ct_div(xi, xi)), CT_F32);
    assert_int_equal(ct_get_dtype(ct_abs(ct_ones(CT_SHAPE(2), CT_F16))), CT_F16);
    assert_int_equal(ct_get_dtype(ct_lt(xi, x)), CT_BOOL);
    /* a large transposed operand runs on the parallel path; compare to the
     * contiguous result */
    ct_tensor *big = ct_reshape(ct_arange(0, 300 * 400, 1, CT_F64), CT_SHAPE(300, 400));
    ct_tensor *bt = ct_t(big);
    ct_tensor *r1 = ct_sin(bt), *r2 = ct_sin(ct_contiguous(bt));
    assert_int_equal(ct_allclose(r1, r2, 0, 0, false), 1);
    ct_tensor *q = ct_add(bt, ct_reshape(ct_arange(0, 300, 1, CT_F64), CT_SHAPE(1, 300)));
    assert_non_null(q);
    assert_true(ct_item(ct_select(ct_select(q, 0, 299), 0, 7)) == 7.0 * 400 + 299 + 7);
    END;
}

/* The op table's meta function (ct__meta_ew, with the op's .ew_mode) on
 * meta tensors: the broadcast shape, the dtype rule, the checks -- what the
 * public functions compute through the driver. */
static void test_meta_function(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *f = ct_empty_on(CT_SHAPE(2, 1, 3), CT_F32, CT_META);
    ct_tensor *i = ct_empty_on(CT_SHAPE(4, 1), CT_I32, CT_META);
    ct_tensor *b = ct_empty_on(CT_SHAPE(3), CT_BOOL, CT_META);
    ct_tensor *c = ct_empty_on(CT_SHAPE(3), CT_C64, CT_META);
    ct_tensor *h = ct_empty_on(CT_SHAPE(5), CT_F16, CT_META);
    ct_meta m;
    ct_tensor *fi[2] = {f, i}, *ii[2] = {i, i}, *bb[2] = {b, b}, *fb[3] = {b, f, f};
    /* broadcasting and promotion */
    assert_int_equal(ct__meta_run(CT_OP_add, &m, 1, fi, 2, NULL), CT_OK);
    assert_int_equal(m.ndim, 3);
    assert_int_equal(m.sizes[0], 2);
    assert_int_equal(m.sizes[1], 4);
    assert_int_equal(m.sizes[2], 3);
    assert_int_equal(m.dtype, CT_F32);
    assert_int_equal(m.device, CT_META);
    assert_int_equal(m.flags, 0u);
    assert_int_equal(ct__meta_run(CT_OP_div, &m, 1, ii, 2, NULL), CT_OK); /* CT_EW_FLOAT */
    assert_int_equal(m.dtype, CT_F32);
    assert_int_equal(ct__meta_run(CT_OP_lt, &m, 1, fi, 2, NULL), CT_OK); /* CT_EW_BOOL_OUT */
    assert_int_equal(m.dtype, CT_BOOL);
    assert_int_equal(ct__meta_run(CT_OP_where, &m, 1, fb, 3, NULL), CT_OK);
    assert_int_equal(m.ndim, 3);
    assert_int_equal(m.dtype, CT_F32);
    ct_tensor *c1[1] = {c}, *h1[1] = {h}, *i1[1] = {i};
    assert_int_equal(ct__meta_run(CT_OP_abs, &m, 1, c1, 1, NULL), CT_OK); /* CT_EW_REAL_OUT */
    assert_int_equal(m.dtype, CT_F32);
    assert_int_equal(ct__meta_run(CT_OP_exp, &m, 1, h1, 1, NULL), CT_OK); /* halves stay halves */
    assert_int_equal(m.dtype, CT_F16);
    /* the checks, with the public functions' messages */
    ct_tensor *ff[2] = {f, f}, *fc[2] = {f, ct_empty_on(CT_SHAPE(2), CT_F32, CT_META)};
    assert_int_equal(ct__meta_run(CT_OP_mul, &m, 1, fc, 2, NULL), CT_ERR_SHAPE);
    assert_int_equal(ct__meta_run(CT_OP_silu, &m, 1, i1, 1, NULL), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "silu: not implemented for dtype int32 (floating point only)");
    assert_int_equal(ct__meta_run(CT_OP_bitwise_and, &m, 1, ff, 2, NULL), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "bitwise_and: only integral and bool tensors are supported, got float32");
    assert_int_equal(ct__meta_run(CT_OP_sub, &m, 1, bb, 2, NULL), CT_ERR_DTYPE);
    assert_int_equal(ct__meta_run(CT_OP_clamp, &m, 1, i1, 1, NULL), CT_ERR_ARG); /* no bound */
    assert_string_equal(ct_last_error(), "clamp: at least one of 'min' or 'max' must not be None (NAN)");
    ct_args a = ct__args(CT_OP_softshrink);
    a.p.ew.lambd = -1;
    ct_tensor *f1[1] = {f};
    assert_int_equal(ct__meta_run(CT_OP_softshrink, &m, 1, f1, 1, &a), CT_ERR_ARG);
    ct_tensor *fx[2] = {f, ct_empty(CT_SHAPE(3), CT_F32)}; /* a cpu tensor with meta ones */
    assert_int_equal(ct__meta_run(CT_OP_add, &m, 1, fx, 2, NULL), CT_ERR_DEVICE);
    assert_string_equal(ct_last_error(), "add: expected all tensors on the same device, got meta and cpu");
    /* the public forms agree, in place too */
    EXPECT_ERR(ct_silu_(i), CT_ERR_DTYPE, "silu_: not implemented for dtype int32");
    EXPECT_ERR(ct_clamp_(i, NAN, NAN), CT_ERR_ARG, "clamp_: at least one of 'min' or 'max'");
    EXPECT_ERR(ct_add_(i, f), CT_ERR_SHAPE, "add_: output with shape [4, 1] doesn't match the broadcast "
               "shape [2, 4, 3]");
    ct_tensor *r = ct_mul(f, i);
    assert_non_null(r);
    assert_int_equal(ct_get_device(r), CT_META);
    assert_int_equal(ct_get_dtype(r), CT_F32);
    assert_int_equal(ct_ndim(r), 3);
    END;
}

/* gelu's float32 vector kernels approximate erf and tanh by rational
 * functions (src/backend/cpu/ew_vec_impl.h): the forward and the gradient
 * of both forms against float64 (libm) over [-8, 8], through the clamps'
 * boundaries (erf's argument +-4: x = +-4 sqrt(2); tanh's +-9), at the
 * bounds the header states (forward about 3 ulp: 2e-6 absolute here;
 * gradients 2e-6); and the special values as torch gives them. */
static void test_gelu_accuracy(void **state) {
    (void)state;
    BEGIN;
    const int64_t n = 400001;
    for (int tanh_form = 0; tanh_form < 2; tanh_form++) {
        const ct_gelu_approx ap = tanh_form ? CT_GELU_TANH : CT_GELU_NONE;
        ct_tensor *x = ct_linspace(-8.0, 8.0, n, CT_F32);
        assert_non_null(x);
        float *xp = ct_data_ptr(x);
        /* the boundaries, exactly where float allows */
        const double s2 = sqrt(2.0), kb = 0.79788456080286535588, kk = 0.044715;
        double tb = 0; /* the x where the tanh form's argument is 9 (Newton) */
        for (int it = 0; it < 40; it++) tb -= (kb * (tb + kk * tb * tb * tb) - 9.0) / (kb * (1 + 3 * kk * tb * tb));
        xp[0] = (float)(-4 * s2);
        xp[1] = (float)(4 * s2);
        xp[2] = (float)tb;
        xp[3] = (float)-tb;
        xp[4] = nextafterf((float)(4 * s2), 0.0f);
        xp[5] = 0.0f;
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *y = ct_gelu(x, ap);
        assert_non_null(y);
        assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
        const float *yp = ct_data_ptr(y), *gp = ct_data_ptr(ct_grad(x));
        double ey = 0, eg = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = xp[i], r, d;
            if (tanh_form) {
                double in = kb * (v + kk * v * v * v), t = tanh(in);
                r = 0.5 * v * (1 + t);
                d = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kb * (1 + 3 * kk * v * v);
            } else {
                r = 0.5 * v * (1 + erf(v / s2));
                d = 0.5 * (1 + erf(v / s2)) + v * exp(-0.5 * v * v) / sqrt(2 * M_PI);
            }
            if (fabs(yp[i] - r) > ey) ey = fabs(yp[i] - r);
            if (fabs(gp[i] - d) > eg) eg = fabs(gp[i] - d);
        }
        printf("  gelu%s over [-8, 8]: forward %.3g, gradient %.3g (absolute, against float64)\n",
               tanh_form ? " (tanh)" : "", ey, eg);
        if (ey > 2e-6 || eg > 2e-6) fail_msg("gelu%s: errors %g, %g above 2e-6", tanh_form ? " tanh" : "", ey, eg);
        /* torch: gelu(nan) = nan, gelu(inf) = inf, gelu(-inf) = nan */
        const float spec[4] = {NAN, INFINITY, -INFINITY, -0.0f};
        ct_tensor *sv = ct_from_array(spec, CT_SHAPE(4), CT_F32);
        ct_tensor *sy = ct_gelu(sv, ap);
        assert_non_null(sy);
        const float *syp = ct_data_ptr(sy);
        assert_true(isnan(syp[0]));
        assert_true(isinf(syp[1]) && syp[1] > 0);
        assert_true(isnan(syp[2]));
        assert_true(syp[3] == 0.0f);
    }
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gelu_accuracy),
        cmocka_unit_test(test_null_propagation), cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_dtype_errors),     cmocka_unit_test(test_arg_errors),
        cmocka_unit_test(test_semantics),        cmocka_unit_test(test_meta_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
