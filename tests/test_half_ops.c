/* test_half_ops.c -- ops on float16 / bfloat16 tensors against torch's own
 * half-precision results (tests/fixtures/half_ops.txt from
 * tools/fixtures/gen_half_ops.py), at torch.testing's tolerance for the
 * dtype, contiguous and non-contiguous (the fixture runner's rerun):
 * elementwise (unary, binary with broadcasting, wrapped numbers,
 * comparisons, where), reductions, softmax/log_softmax, layer/batch norm,
 * GEMM (mm, bmm, mv, linear, addmm) and conv2d.
 *
 * Then the claims of the native path itself:
 *   - the op layer hands the CPU kernels f16/bf16 operands (ct__half_native)
 *     for the elementwise and GEMM ops, and their results are bit for bit
 *     those of computing in f32 and rounding once (the converting path);
 *   - the same for the activation gradients (ew_grad) and column sums;
 *   - an in-place op on a half tensor writes it directly;
 *   - the mixed-type GEMM equals the f32 GEMM on the converted operands,
 *     bit for bit, for every stride layout and odd sizes; with a half C
 *     (one K block, rounded as it is stored) it equals that f32 GEMM
 *     rounded once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/gemm_impl.h"
#include "core/tensor_impl.h"
#include "fixture.h"
#include "ops/op_table.h"
#include "test_util.h"

/* ---- fixture runners ------------------------------------------------------ */
static ct_tensor *unary_by_name(const char *fn, ct_tensor *x) {
    if (!strcmp(fn, "exp")) return ct_exp(x);
    if (!strcmp(fn, "log")) return ct_log(x);
    if (!strcmp(fn, "tanh")) return ct_tanh(x);
    if (!strcmp(fn, "sigmoid")) return ct_sigmoid(x);
    if (!strcmp(fn, "relu")) return ct_relu(x);
    if (!strcmp(fn, "neg")) return ct_neg(x);
    if (!strcmp(fn, "abs")) return ct_abs(x);
    if (!strcmp(fn, "sin")) return ct_sin(x);
    if (!strcmp(fn, "silu")) return ct_silu(x);
    if (!strcmp(fn, "gelu")) return ct_gelu(x, CT_GELU_NONE);
    if (!strcmp(fn, "erf")) return ct_erf(x);
    if (!strcmp(fn, "square")) return ct_square(x);
    if (!strcmp(fn, "sqrt")) return ct_sqrt(x);
    if (!strcmp(fn, "rsqrt")) return ct_rsqrt(x);
    if (!strcmp(fn, "reciprocal")) return ct_reciprocal(x);
    return NULL;
}
static ct_status r_unary(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = unary_by_name(fx_s(c, "fn", ""), in[0]);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_binary(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    const char *fn = fx_s(c, "fn", "");
    ct_tensor *a = in[0], *b = in[1];
    out[0] = !strcmp(fn, "add") ? ct_add(a, b) : !strcmp(fn, "sub") ? ct_sub(a, b)
           : !strcmp(fn, "mul") ? ct_mul(a, b) : !strcmp(fn, "div") ? ct_div(a, b)
           : !strcmp(fn, "maximum") ? ct_maximum(a, b) : NULL;
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_add_scalar(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_add_scalar(in[0], fx_f(c, "s", 0));
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_mul_scalar(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_mul_scalar(in[0], fx_f(c, "s", 0));
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_gt(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_gt(in[0], in[1]);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_where(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_where(in[0], in[1], in[2]);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_reduce(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t d[4];
    int nd = fx_ints(c, "dims", d, 4);
    if (nd < 0) nd = 0;
    const int64_t *dims = nd ? d : NULL;
    if (!strcmp(c->op, "sum")) out[0] = ct_sum(in[0], dims, nd, false);
    else if (!strcmp(c->op, "mean")) out[0] = ct_mean(in[0], dims, nd, false);
    else if (!strcmp(c->op, "var")) out[0] = ct_var(in[0], dims, nd, 1.0, false);
    else if (!strcmp(c->op, "norm")) out[0] = ct_norm(in[0], 2.0, dims, nd, false);
    else if (!strcmp(c->op, "amax")) out[0] = ct_amax(in[0], dims, nd, false);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_softmax(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    int64_t dim = fx_i(c, "dim", -1);
    out[0] = !strcmp(c->op, "softmax") ? ct_softmax(in[0], dim) : ct_log_softmax(in[0], dim);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_layer_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    int64_t ns[1] = {ct_size(in[0], -1)};
    out[0] = ct_layer_norm(in[0], ns, 1, in[1], in[2], 1e-5);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_batch_norm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    if (fx_i(c, "training", 0))
        out[0] = ct_batch_norm(in[0], NULL, NULL, in[1], in[2], true, 0.1, 1e-5);
    else
        out[0] = ct_batch_norm(in[0], in[1], in[2], in[3], in[4], false, 0.1, 1e-5);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
/* in: x, w, b, running_mean, running_var, grad_out (w, b and the running
 * stats in x's dtype or float32); out: y, dx, dw, db and the updated
 * running stats (training mode: the fused half kernels) */
static ct_status r_batch_norm_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *xwb[3];
    for (int i = 0; i < 3; i++) {
        xwb[i] = ct_detach(in[i]);
        if (ct_set_requires_grad(xwb[i], true)) return ct_last_error_code();
    }
    ct_tensor *rm = ct_clone(in[3]), *rv = ct_clone(in[4]);
    ct_tensor *y = ct_batch_norm(xwb[0], rm, rv, xwb[1], xwb[2], true, 0.1, 1e-5);
    if (!y) return ct_last_error_code();
    /* the fused kernels computed it (not the f32 composite) */
    if (strcmp(ct_grad_fn_name(y), "NativeBatchNormBackward") != 0)
        return ct__error_status(CT_ERR_ARG, "%s: grad_fn %s, not the fused batch norm", c->label, ct_grad_fn_name(y));
    out[0] = ct_detach(y);
    out[4] = rm;
    out[5] = rv;
    return ct_autograd_grad(&y, 1, xwb, 3, (ct_tensor *[]){in[5]}, false, false, false, out + 1);
}
static ct_status r_matmul(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_matmul(in[0], in[1]);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_linear(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_linear(in[0], in[1], in[2]);
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_addmm(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    out[0] = ct_addmm(in[0], in[1], in[2], fx_f(c, "beta", 1), fx_f(c, "alpha", 1));
    return out[0] ? CT_OK : CT_ERR_ARG;
}
static ct_status r_conv2d(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    (void)c;
    out[0] = ct_conv2d(in[0], in[1], in[2], (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, 1);
    return out[0] ? CT_OK : CT_ERR_ARG;
}

/* in: x, g; out: the gradient of act(x) with grad_output g (the fused
 * ew_grad kernel in the half dtype, or relu's where) */
static ct_status r_act_grad(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    const char *fn = fx_s(c, "fn", "");
    ct_tensor *x = ct_detach(in[0]);
    if (ct_set_requires_grad(x, true)) return ct_last_error_code();
    ct_tensor *y = !strcmp(fn, "gelu_tanh") ? ct_gelu(x, CT_GELU_TANH) : unary_by_name(fn, x);
    if (!y) return CT_ERR_ARG;
    return ct_autograd_grad(&y, 1, &x, 1, (ct_tensor *[]){in[1]}, false, false, false, out);
}
/* in: q, k, v, grad_out; out: out, dq, dk, dv */
static ct_status r_sdpa(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *qkv[3];
    for (int i = 0; i < 3; i++) {
        qkv[i] = ct_detach(in[i]);
        if (ct_set_requires_grad(qkv[i], true)) return ct_last_error_code();
    }
    ct_tensor *o = ct_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 0.0, fx_i(c, "causal", 0),
                                                   0.0, false);
    if (!o) return ct_last_error_code();
    /* the fused kernel runs (in f32 from the half q, k, v), not the math one */
    if (ct_sdp_last_backend() != CT_SDP_FLASH)
        return ct__error_status(CT_ERR_ARG, "sdpa %s: ran backend %d, not flash", c->label, ct_sdp_last_backend());
    out[0] = ct_detach(o);
    return ct_autograd_grad(&o, 1, qkv, 3, (ct_tensor *[]){in[3]}, false, false, false, out + 1);
}

static const fx_op k_ops[] = {
    {"unary", r_unary, 0, 0},         {"binary", r_binary, 0, 0},
    {"add_scalar", r_add_scalar, 0, 0}, {"mul_scalar", r_mul_scalar, 0, 0},
    {"gt", r_gt, 0, 0},               {"where", r_where, 0, 0},
    {"sum", r_reduce, 0, 0},          {"mean", r_reduce, 0, 0},
    {"var", r_reduce, 0, 0},          {"norm", r_reduce, 0, 0},
    {"amax", r_reduce, 0, 0},         {"softmax", r_softmax, 0, 0},
    {"log_softmax", r_softmax, 0, 0}, {"layer_norm", r_layer_norm, 0, 0},
    {"batch_norm", r_batch_norm, 0, 0}, {"matmul", r_matmul, 0, 0},
    {"linear", r_linear, 0, 0},       {"addmm", r_addmm, 0, 0},
    {"conv2d", r_conv2d, 0, 0},       {"act_grad", r_act_grad, 0, 0},
    {"sdpa", r_sdpa, 0, 0},           {"batch_norm_grad", r_batch_norm_grad, 0, 0},
};

static void test_fixtures(void **state) {
    (void)state;
    int f = fx_run_file(CT_FIXTURE_DIR "/half_ops.txt", k_ops, (int)(sizeof k_ops / sizeof k_ops[0]));
    fx_print_summary();
    assert_int_equal(f, 0);
}

/* ---- the native path ------------------------------------------------------- */
static uint16_t bits16(ct_tensor *t, int64_t i) { return ((const uint16_t *)ct_data_ptr(t))[i]; }

/* op on half tensors == the f32 op on their f32 copies, rounded once */
static void check_same_as_f32(ct_tensor *h, ct_tensor *f32_result) {
    assert_non_null(h);
    assert_non_null(f32_result);
    ct_tensor *r = ct_contiguous(ct_to_dtype(f32_result, ct_get_dtype(h)));
    ct_tensor *hc = ct_contiguous(h);
    int64_t n = ct_numel(r);
    for (int64_t i = 0; i < n; i++)
        if (bits16(hc, i) != bits16(r, i))
            fail_msg("element %lld: %04x, f32 path %04x", (long long)i, bits16(hc, i), bits16(r, i));
}

/* a random normal tensor of the half dtype dt and (f32 != NULL) its exact
 * float32 copy: the two sides every check above compares */
static ct_tensor *randn_half(const int64_t *shape, int nd, ct_dtype dt, ct_tensor **f32) {
    ct_tensor *h = ct_to_dtype(ct_randn(shape, nd, CT_F32), dt);
    if (f32) *f32 = ct_to_dtype(h, CT_F32);
    return h;
}

static void test_native_equals_f32_path(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(3);
    assert_true(ct__half_native(CT_CPU, CT_OP_add, CT_BF16));
    assert_true(ct__half_native(CT_CPU, CT_OP_exp, CT_F16));
    assert_true(ct__half_native(CT_CPU, CT_OP_mm, CT_BF16));
    ct_dtype dts[2] = {CT_BF16, CT_F16};
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = dts[d];
        /* 3 x 1000: many blocks of the half loop plus a tail; a transposed
         * view takes the strided loads and stores */
        ct_tensor *xf, *yf;
        ct_tensor *x = randn_half(CT_SHAPE(3, 1000), dt, &xf), *y = randn_half(CT_SHAPE(3, 1000), dt, &yf);
        check_same_as_f32(ct_exp(x), ct_exp(xf));
        check_same_as_f32(ct_gelu(x, CT_GELU_TANH), ct_gelu(xf, CT_GELU_TANH));
        check_same_as_f32(ct_add(x, y), ct_add(xf, yf));
        check_same_as_f32(ct_mul_scalar(x, 0.1), ct_mul_scalar(xf, 0.1));
        ct_tensor *xt = ct_transpose(ct_reshape(x, CT_SHAPE(30, 100)), 0, 1);
        ct_tensor *xtf = ct_to_dtype(xt, CT_F32);
        check_same_as_f32(ct_tanh(xt), ct_tanh(xtf));
        check_same_as_f32(ct_div(xt, ct_slice(xt, 1, 0, 1, 1)), ct_div(xtf, ct_slice(xtf, 1, 0, 1, 1)));
        /* in place: the half tensor is written directly, same bits */
        ct_tensor *z = ct_clone(x);
        void *before = ct_data_ptr(z);
        assert_non_null(ct_mul_(z, y));
        assert_ptr_equal(ct_data_ptr(z), before);
        check_same_as_f32(z, ct_mul(xf, yf));
        /* batch norm inference (the fused eval kernel reads halves) */
        ct_tensor *bx = randn_half(CT_SHAPE(2, 3, 40, 41), dt, NULL);
        ct_tensor *bp[4];
        for (int q = 0; q < 4; q++) bp[q] = ct_to_dtype(ct_add_scalar(ct_rand(CT_SHAPE(3), CT_F32), 0.5), dt);
        ct_tensor *bpf[4];
        for (int q = 0; q < 4; q++) bpf[q] = ct_to_dtype(bp[q], CT_F32);
        ct_tensor *bh = ct_batch_norm(bx, bp[0], bp[1], bp[2], bp[3], false, 0.1, 1e-5);
        ct_tensor *bf32 = ct_batch_norm(ct_to_dtype(bx, CT_F32), bpf[0], bpf[1], bpf[2], bpf[3], false, 0.1, 1e-5);
        assert_non_null(bh);
        assert_int_equal(ct_get_dtype(bh), dt);
        assert_true(ct_allclose(ct_to_dtype(bh, CT_F32), ct_to_dtype(ct_to_dtype(bf32, dt), CT_F32),
                                dt == CT_BF16 ? 8e-3 : 1e-3, 1e-3, false) == 1);
        /* activation gradients (ew_grad computes halves: f32 math from the
         * half loads, one rounding, not a chain of rounded half ops) */
        assert_true(ct__half_native(CT_CPU, CT_OP_ew_grad, dt));
        ct_tensor *gf, *g = randn_half(CT_SHAPE(3, 1000), dt, &gf);
        for (int k = 0; k < 3; k++) {
            ct_tensor *xl = ct_detach(x), *xlf = ct_detach(xf), *dh = NULL, *df = NULL;
            assert_int_equal(ct_set_requires_grad(xl, true), CT_OK);
            assert_int_equal(ct_set_requires_grad(xlf, true), CT_OK);
            ct_tensor *yh = k == 0 ? ct_gelu(xl, CT_GELU_NONE) : k == 1 ? ct_gelu(xl, CT_GELU_TANH) : ct_silu(xl);
            ct_tensor *yf = k == 0 ? ct_gelu(xlf, CT_GELU_NONE) : k == 1 ? ct_gelu(xlf, CT_GELU_TANH) : ct_silu(xlf);
            assert_int_equal(ct_autograd_grad(&yh, 1, &xl, 1, &g, false, false, false, &dh), CT_OK);
            assert_int_equal(ct_autograd_grad(&yf, 1, &xlf, 1, &gf, false, false, false, &df), CT_OK);
            assert_int_equal(ct_get_dtype(dh), dt);
            check_same_as_f32(dh, df);
        }
        /* column sums (a bias's gradient: sum over dim 0) read the half rows
         * in place, four at a time, as the f32 column sum does */
        ct_tensor *csf, *cs = randn_half(CT_SHAPE(37, 300), dt, &csf);
        int64_t d0 = 0;
        check_same_as_f32(ct_sum(cs, &d0, 1, false), ct_sum(csf, &d0, 1, false));
        check_same_as_f32(ct_mean(cs, &d0, 1, true), ct_mean(csf, &d0, 1, true));
        ct_tensor *cs3 = ct_reshape(cs, CT_SHAPE(37, 3, 100)), *cs3f = ct_reshape(csf, CT_SHAPE(37, 3, 100));
        check_same_as_f32(ct_sum(cs3, &d0, 1, false), ct_sum(cs3f, &d0, 1, false));
        /* GEMM: f32 accumulation, one rounding: the f32 product rounded */
        ct_tensor *af, *bf;
        ct_tensor *a = randn_half(CT_SHAPE(45, 70), dt, &af), *b = randn_half(CT_SHAPE(70, 33), dt, &bf);
        check_same_as_f32(ct_matmul(a, b), ct_matmul(af, bf));
        check_same_as_f32(ct_matmul(ct_transpose(b, 0, 1), ct_transpose(a, 0, 1)),
                          ct_matmul(ct_transpose(bf, 0, 1), ct_transpose(af, 0, 1)));
    }
    SCOPE_END;
}

/* backward through the native ops: the gradients of a bf16 graph (softmax,
 * layer_norm, linear, gelu) match the f32 graph's at bf16 tolerance */
static ct_tensor *graph(ct_tensor *x, ct_tensor *w, ct_tensor *lw) {
    int64_t ns[1] = {24};
    ct_tensor *h = ct_gelu(ct_linear(x, w, NULL), CT_GELU_NONE);
    ct_tensor *y = ct_layer_norm(h, ns, 1, lw, NULL, 1e-5);
    return ct_sum(ct_mul(ct_softmax(y, -1), y), NULL, 0, false);
}
static void test_backward(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(9);
    ct_tensor *x = ct_randn(CT_SHAPE(5, 16), CT_F32), *w = ct_randn(CT_SHAPE(24, 16), CT_F32);
    ct_tensor *lw = ct_randn(CT_SHAPE(24), CT_F32);
    ct_dtype dts[2] = {CT_BF16, CT_F16};
    double tol[2] = {6e-2, 1e-2};
    for (int d = 0; d < 2; d++) {
        ct_tensor *xs[2] = {ct_to_dtype(x, dts[d]), NULL}, *ws[2] = {ct_to_dtype(w, dts[d]), NULL};
        ct_tensor *ls[2] = {ct_to_dtype(lw, dts[d]), NULL};
        xs[1] = ct_to_dtype(xs[0], CT_F32); ws[1] = ct_to_dtype(ws[0], CT_F32); ls[1] = ct_to_dtype(ls[0], CT_F32);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ct_set_requires_grad(xs[k], true), CT_OK);
            assert_int_equal(ct_set_requires_grad(ws[k], true), CT_OK);
            assert_int_equal(ct_set_requires_grad(ls[k], true), CT_OK);
            ct_tensor *l = graph(xs[k], ws[k], ls[k]);
            assert_non_null(l);
            assert_int_equal(ct_get_dtype(l), k ? CT_F32 : dts[d]);
            assert_int_equal(ct_backward(l, NULL, false, false), CT_OK);
        }
        ct_tensor *gx = ct_grad(xs[0]), *gw = ct_grad(ws[0]), *gl = ct_grad(ls[0]);
        assert_non_null(gx); assert_non_null(gw); assert_non_null(gl);
        assert_int_equal(ct_get_dtype(gx), dts[d]);
        assert_true(ct_allclose(ct_to_dtype(gx, CT_F32), ct_grad(xs[1]), tol[d], tol[d], false) == 1);
        assert_true(ct_allclose(ct_to_dtype(gw, CT_F32), ct_grad(ws[1]), tol[d], tol[d], false) == 1);
        assert_true(ct_allclose(ct_to_dtype(gl, CT_F32), ct_grad(ls[1]), tol[d], tol[d], false) == 1);
    }
    SCOPE_END;
}

/* ct__gemm_avx2_mixed against ct__sgemm_avx2 on the converted operands:
 * bit for bit, row- and column-major A and B, odd sizes, K over a block */
static void test_mixed_gemm(void **state) {
    (void)state;
    if (ct__cpu_cap() < CT_CAP_AVX2) skip();
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 9}, {13, 40, 300}, {64, 48, 257}, {150, 33, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int t = CT_GEMM_BF16; t <= CT_GEMM_F16; t++)
            for (int lay = 0; lay < 4; lay++) {
                int at = lay & 1, bt = (lay >> 1) & 1; /* transposed storage */
                uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)(M * K));
                uint16_t *bh = malloc(sizeof(uint16_t) * (size_t)(K * N));
                float *af = malloc(sizeof(float) * (size_t)(M * K)), *bf = malloc(sizeof(float) * (size_t)(K * N));
                float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
                assert_true(ah && bh && af && bf && c1 && c2);
                unsigned r = 12345u + (unsigned)s;
                for (int64_t i = 0; i < M * K; i++) {
                    r = r * 1103515245u + 12345u;
                    float v = ((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f;
                    ah[i] = t == CT_GEMM_BF16 ? ct__f32_to_bf16(v) : ct__f32_to_f16(v);
                    af[i] = t == CT_GEMM_BF16 ? ct__bf16_to_f32(ah[i]) : ct__f16_to_f32(ah[i]);
                }
                for (int64_t i = 0; i < K * N; i++) {
                    r = r * 1103515245u + 12345u;
                    float v = ((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f;
                    bh[i] = t == CT_GEMM_BF16 ? ct__f32_to_bf16(v) : ct__f32_to_f16(v);
                    bf[i] = t == CT_GEMM_BF16 ? ct__bf16_to_f32(bh[i]) : ct__f16_to_f32(bh[i]);
                }
                int64_t sam = at ? 1 : K, sak = at ? M : 1, sbk = bt ? 1 : N, sbn = bt ? K : 1;
                for (int64_t i = 0; i < M * N; i++) c1[i] = c2[i] = 0.5f;
                assert_int_equal(ct__gemm_avx2_mixed(M, N, K, 1.5f, ah, t, sam, sak, bh, t, sbk, sbn,
                                                     0.25f, NULL, c1, N, 2), 0);
                /* the f32 kernel with A read in place would order nothing
                 * differently: same k order, same FMAs */
                assert_int_equal(ct__sgemm_avx2(M, N, K, 1.5f, af, sam, sak, bf, sbk, sbn, 0.25f,
                                                NULL, c2, N, 2), 0);
                if (memcmp(c1, c2, sizeof(float) * (size_t)(M * N)))
                    fail_msg("mixed gemm %lldx%lldx%lld type %d layout %d differs", (long long)M,
                             (long long)N, (long long)K, t, lay);
                free(ah); free(bh); free(af); free(bf); free(c1); free(c2);
            }
    }
}

/* ct__gemm_avx2_mixed_out (C of f16/bf16, rounded tile group by tile
 * group) against ct__sgemm_avx2 on the converted operands rounded once by
 * ct__f32_to_bf16 / ct__f32_to_f16: bit for bit, for every stride layout,
 * odd sizes (partial tiles and groups), several row blocks (M > 144),
 * several panel groups (N > 128), K at the block's edge (256) and beyond
 * it (300, 700: 256-deep steps over panels of all of K), a bias
 * times beta, a C row stride wider than N (the padding untouched), 1 and 2
 * threads, and Inf/NaN results; and its refusals (-2, C untouched) */
static uint16_t round_half(float v, int t) { return t == CT_GEMM_BF16 ? ct__f32_to_bf16(v) : ct__f32_to_f16(v); }
static float widen_half(uint16_t h, int t) { return t == CT_GEMM_BF16 ? ct__bf16_to_f32(h) : ct__f16_to_f32(h); }
static void test_mixed_gemm_half_out(void **state) {
    (void)state;
    if (ct__cpu_cap() < CT_CAP_AVX2) skip();
    /* the long-K mode is off by default (-2 beyond one block: below); on
     * here, so that its panels and 256-deep steps are checked too */
    int longk = ct__gemm_longk(192);
    /* K 300 and 700: beyond one block (the panels hold all of K, the tiles
     * run 256-deep steps); the oracle's f32 GEMM has K blocks of 256 */
    const int64_t shapes[][3] = {{1, 1, 1},      {7, 17, 9},    {13, 300, 16}, {150, 33, 64},
                                 {301, 150, 256}, {40, 40, 5},  {50, 70, 300}, {160, 140, 700}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ldc = N + 3;
        for (int t = CT_GEMM_BF16; t <= CT_GEMM_F16; t++)
            for (int lay = 0; lay < 4; lay++)
                for (int bi = 0; bi < 2; bi++) {
                    int at = lay & 1, bt = (lay >> 1) & 1, nth = 1 + (lay & 1);
                    uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)(M * K));
                    uint16_t *bh = malloc(sizeof(uint16_t) * (size_t)(K * N));
                    float *af = malloc(sizeof(float) * (size_t)(M * K)), *bf = malloc(sizeof(float) * (size_t)(K * N));
                    float *bias = malloc(sizeof(float) * (size_t)N), *cf = malloc(sizeof(float) * (size_t)(M * N));
                    uint16_t *ch = malloc(sizeof(uint16_t) * (size_t)(M * ldc));
                    assert_true(ah && bh && af && bf && bias && cf && ch);
                    unsigned r = 777u + (unsigned)s;
                    for (int64_t i = 0; i < M * K; i++) {
                        r = r * 1103515245u + 12345u;
                        ah[i] = round_half(((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f, t);
                    }
                    for (int64_t i = 0; i < K * N; i++) {
                        r = r * 1103515245u + 12345u;
                        bh[i] = round_half(((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f, t);
                    }
                    for (int64_t j = 0; j < N; j++) bias[j] = 0.125f * (float)(j % 7) - 0.3f;
                    if (s == 3) { /* row 2 of A: +Inf, -Inf (rows of +-Inf and NaN in C) */
                        ah[2 * (at ? 1 : K)] = round_half(INFINITY, t);
                        ah[2 * (at ? 1 : K) + (at ? M : 1)] = round_half(-INFINITY, t);
                    }
                    for (int64_t i = 0; i < M * K; i++) af[i] = widen_half(ah[i], t);
                    for (int64_t i = 0; i < K * N; i++) bf[i] = widen_half(bh[i], t);
                    int64_t sam = at ? 1 : K, sak = at ? M : 1, sbk = bt ? 1 : N, sbn = bt ? K : 1;
                    for (int64_t i = 0; i < M * ldc; i++) ch[i] = 0x5a5a;
                    const float beta = bi ? 0.5f : 0.0f;
                    assert_int_equal(ct__gemm_avx2_mixed_out(M, N, K, 1.5f, ah, t, sam, sak, bh, t, sbk, sbn,
                                                             beta, bi ? bias : NULL, ch, t, ldc, nth), 0);
                    assert_int_equal(ct__sgemm_avx2(M, N, K, 1.5f, af, sam, sak, bf, sbk, sbn, beta,
                                                    bi ? bias : NULL, cf, N, nth), 0);
                    for (int64_t i = 0; i < M; i++) {
                        for (int64_t j = 0; j < N; j++)
                            if (ch[i * ldc + j] != round_half(cf[i * N + j], t))
                                fail_msg("%lldx%lldx%lld type %d layout %d bias %d: C[%lld][%lld] %04x, "
                                         "f32 rounded %04x", (long long)M, (long long)N, (long long)K, t, lay,
                                         bi, (long long)i, (long long)j, ch[i * ldc + j],
                                         round_half(cf[i * N + j], t));
                        for (int64_t j = N; j < ldc; j++) assert_int_equal(ch[i * ldc + j], 0x5a5a);
                    }
                    if (s == 3) assert_true(isnan(cf[2 * N]) || isinf(cf[2 * N]));
                    free(ah); free(bh); free(af); free(bf); free(bias); free(cf); free(ch);
                }
    }
    /* refused, C untouched: K over 4096 (or over one block with the
     * long-K mode off, the default), beta without a bias, alpha 0, K 0 */
    static uint16_t a[4100 * 4], b[4100 * 4];
    uint16_t c[16];
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    for (int i = 0; i < 16; i++) c[i] = 0x1234;
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 4100, 1.0f, a, CT_GEMM_BF16, 4100, 1, b, CT_GEMM_BF16, 4, 1,
                                             0.0f, NULL, c, CT_GEMM_BF16, 4, 1), -2);
    assert_int_equal(ct__gemm_longk(0), 192);
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 300, 1.0f, a, CT_GEMM_BF16, 300, 1, b, CT_GEMM_BF16, 4, 1,
                                             0.0f, NULL, c, CT_GEMM_BF16, 4, 1), -2);
    ct__gemm_longk(192);
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 8, 1.0f, a, CT_GEMM_BF16, 8, 1, b, CT_GEMM_BF16, 4, 1,
                                             1.0f, NULL, c, CT_GEMM_BF16, 4, 1), -2);
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 8, 0.0f, a, CT_GEMM_BF16, 8, 1, b, CT_GEMM_BF16, 4, 1,
                                             0.0f, NULL, c, CT_GEMM_BF16, 4, 1), -2);
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 0, 1.0f, a, CT_GEMM_BF16, 8, 1, b, CT_GEMM_BF16, 4, 1,
                                             0.0f, NULL, c, CT_GEMM_BF16, 4, 1), -2);
    for (int i = 0; i < 16; i++) assert_int_equal(c[i], 0x1234);
    /* a bad C type */
    assert_int_equal(ct__gemm_avx2_mixed_out(4, 4, 8, 1.0f, a, CT_GEMM_BF16, 8, 1, b, CT_GEMM_BF16, 4, 1,
                                             0.0f, NULL, c, CT_GEMM_F32, 4, 1), -1);
    ct__gemm_longk(longk);
}

/* CT_GEMM_F32B operands (float32 rounded to bf16 as they are packed:
 * autocast's gemm_lp on AVX2) against ct__sgemm_avx2 on copies rounded
 * first by ct__f32_to_bf16: bit for bit, with a C of f32, of bf16 and of
 * CT_GEMM_F32R (floats holding the rounded values), every stride layout
 * (a transposed B with few rows packs each panel just before its use),
 * several row blocks and panel groups, K past one block, one operand bf16;
 * the operands hold the rounding's edge cases: ties to even both ways, a
 * carry into the exponent, the largest float (to +Inf), NaNs whose
 * payload sits only in the low 16 bits (to NaN, not Inf) */
static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void test_mixed_gemm_f32b(void **state) {
    (void)state;
    if (ct__cpu_cap() < CT_CAP_AVX2) skip();
    int longk = ct__gemm_longk(192); /* K 700 and 257 in mixed_out: the long-K mode (off by default) */
    static const uint32_t edge[] = {0x3f808000u, 0x3f818000u, 0x3f7fffffu, 0x7f7fffffu, 0xff7fffffu,
                                    0x7f800001u, 0xffc00001u, 0x00008000u, 0x80018000u, 0x3f80ffffu};
    const int64_t shapes[][3] = {{1, 1, 1}, {7, 17, 9}, {13, 300, 16}, {150, 33, 64}, {160, 140, 700}, {20, 40, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        for (int lay = 0; lay < 8; lay++) {
            int at = lay & 1, bt = (lay >> 1) & 1, abf = (lay >> 2) & 1, nth = 1 + (lay & 1);
            float *a = malloc(sizeof(float) * (size_t)(M * K)), *b = malloc(sizeof(float) * (size_t)(K * N));
            float *ar = malloc(sizeof(float) * (size_t)(M * K)), *br = malloc(sizeof(float) * (size_t)(K * N));
            uint16_t *ah = malloc(sizeof(uint16_t) * (size_t)(M * K)), *ch = malloc(sizeof(uint16_t) * (size_t)(M * N));
            float *c1 = malloc(sizeof(float) * (size_t)(M * N)), *c2 = malloc(sizeof(float) * (size_t)(M * N));
            float *c3 = malloc(sizeof(float) * (size_t)(M * N)), *bias = malloc(sizeof(float) * (size_t)N);
            assert_true(a && b && ar && br && ah && ch && c1 && c2 && c3 && bias);
            unsigned r = 4242u + (unsigned)s;
            for (int64_t i = 0; i < M * K; i++) {
                r = r * 1103515245u + 12345u;
                a[i] = ((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f;
            }
            for (int64_t i = 0; i < K * N; i++) {
                r = r * 1103515245u + 12345u;
                b[i] = ((float)(r >> 9) / 4194304.0f - 1.0f) * 3.0f;
            }
            for (int64_t j = 0; j < N; j++) bias[j] = 0.125f * (float)(j % 7) - 0.3f;
            /* the edge values on a few elements (one NaN in each of A and B
             * only for the larger shapes: it makes a row or column NaN) */
            int ne = (int)(sizeof edge / sizeof edge[0]);
            for (int e = 0; e < ne; e++) {
                if (edge[e] >> 23 == 0xff || edge[e] >> 23 == 0x1ff) {
                    if (M * K < 1000) continue;
                }
                a[(e * 37) % (M * K)] = bits_f(edge[e]);
                b[(e * 53 + 5) % (K * N)] = bits_f(edge[(e + 3) % ne]);
            }
            for (int64_t i = 0; i < M * K; i++) {
                ah[i] = ct__f32_to_bf16(a[i]);
                ar[i] = ct__bf16_to_f32(ah[i]);
            }
            for (int64_t i = 0; i < K * N; i++) br[i] = ct__bf16_to_f32(ct__f32_to_bf16(b[i]));
            int64_t sam = at ? 1 : K, sak = at ? M : 1, sbk = bt ? 1 : N, sbn = bt ? K : 1;
            const void *aop = abf ? (const void *)ah : (const void *)a;
            int ta = abf ? CT_GEMM_BF16 : CT_GEMM_F32B;
            assert_int_equal(ct__gemm_avx2_mixed(M, N, K, 1.5f, aop, ta, sam, sak, b, CT_GEMM_F32B, sbk, sbn, 1.0f,
                                                 bias, c1, N, nth), 0);
            assert_int_equal(ct__sgemm_avx2(M, N, K, 1.5f, ar, sam, sak, br, sbk, sbn, 1.0f, bias, c2, N, nth), 0);
            if (memcmp(c1, c2, sizeof(float) * (size_t)(M * N)))
                fail_msg("F32B gemm %lldx%lldx%lld layout %d differs from the rounded copies' product", (long long)M,
                         (long long)N, (long long)K, lay);
            /* the rounded C: bf16 and F32R */
            assert_int_equal(ct__gemm_avx2_mixed_out(M, N, K, 1.5f, aop, ta, sam, sak, b, CT_GEMM_F32B, sbk, sbn, 1.0f,
                                                     bias, ch, CT_GEMM_BF16, N, nth), 0);
            assert_int_equal(ct__gemm_avx2_mixed_out(M, N, K, 1.5f, aop, ta, sam, sak, b, CT_GEMM_F32B, sbk, sbn, 1.0f,
                                                     bias, c3, CT_GEMM_F32R, N, nth), 0);
            for (int64_t i = 0; i < M * N; i++) {
                uint16_t want = ct__f32_to_bf16(c2[i]);
                float wantf = ct__bf16_to_f32(want);
                if (ch[i] != want || memcmp(&c3[i], &wantf, 4))
                    fail_msg("F32B gemm %lldx%lldx%lld layout %d: C[%lld] bf16 %04x, F32R %08x, want %04x",
                             (long long)M, (long long)N, (long long)K, lay, (long long)i, ch[i],
                             (unsigned)(*(uint32_t *)(void *)&c3[i]), want);
            }
            free(a); free(b); free(ar); free(br); free(ah); free(ch); free(c1); free(c2); free(c3); free(bias);
        }
    }
    ct__gemm_longk(longk);
}

/* the op layer: a bf16 weight gradient (x^T @ dy, K = the tokens: one block)
 * and a linear with a bias take the direct-rounding GEMM; a product with K
 * over one block the f32 C; all three the f32 product rounded once */
static void test_half_gemm_ops_one_block(void **state) {
    (void)state;
    SCOPE_BEGIN;
    ct_manual_seed(5);
    ct_dtype dts[2] = {CT_BF16, CT_F16};
    for (int d = 0; d < 2; d++) {
        ct_dtype dt = dts[d];
        ct_tensor *xf, *dyf;
        ct_tensor *x = randn_half(CT_SHAPE(16, 200), dt, &xf), *dy = randn_half(CT_SHAPE(16, 130), dt, &dyf);
        check_same_as_f32(ct_mm(ct_transpose(x, 0, 1), dy), ct_mm(ct_transpose(xf, 0, 1), dyf));
        ct_tensor *wf, *bbf;
        ct_tensor *w = randn_half(CT_SHAPE(130, 200), dt, &wf), *bb = randn_half(CT_SHAPE(130), dt, &bbf);
        /* 40 rows: the f32 product also takes the own GEMM (few rows go to
         * OpenBLAS in f32, see ct__sgemm_avx2_preferred), so its bits are
         * the oracle's */
        ct_tensor *x4f, *x4 = randn_half(CT_SHAPE(40, 200), dt, &x4f);
        check_same_as_f32(ct_linear(x4, w, bb), ct_linear(x4f, wf, bbf));
        ct_tensor *x2f, *w2f;
        ct_tensor *x2 = randn_half(CT_SHAPE(30, 300), dt, &x2f), *w2 = randn_half(CT_SHAPE(300, 40), dt, &w2f);
        check_same_as_f32(ct_addmm(bb, x4, ct_transpose(w, 0, 1), 0.5, 2.0),
                          ct_addmm(bbf, x4f, ct_transpose(wf, 0, 1), 0.5, 2.0));
        check_same_as_f32(ct_mm(x2, w2), ct_mm(x2f, w2f));
    }
    SCOPE_END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_native_equals_f32_path),
        cmocka_unit_test(test_mixed_gemm),
        cmocka_unit_test(test_mixed_gemm_half_out),
        cmocka_unit_test(test_mixed_gemm_f32b),
        cmocka_unit_test(test_half_gemm_ops_one_block),
        cmocka_unit_test(test_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
