/* test_ew_vec.c -- the vectorized elementwise loops and the runtime CPU
 * dispatch (src/backend/cpu/ew_vec.h, cpu_caps.h), and the fused backward
 * kernels (src/ops/ew.h):
 *   - every level this CPU can run (default, avx2, avx512) against libm in
 *     double, over a sweep with special values and every tail length;
 *   - dispatch never picks a level the CPU lacks; ct_cpu_capability names it;
 *   - fused backward kernels equal the composite formulas (recorded path);
 *   - where() with a bool condition and broadcast scalars; strided inputs;
 *   - results do not depend on the thread count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "backend/cpu/cpu_caps.h"
#include "backend/cpu/ew_vec.h"
#include "ops/ew.h"
#include "ops/fused_rows.h"
#include "fixture.h"

#define BEGIN                                                                      \
    int64_t live0 = ct_live_tensors();                                             \
    ct_scope s_ = ct_scope_begin();                                                \
    ct_clear_error()
#define END                                                                        \
    ct_scope_end(s_);                                                              \
    assert_int_equal(ct_live_tensors(), live0)

static const ct_ew_vtab *levels[CT_CAP_COUNT] = {&ct__ew_vtab_default, &ct__ew_vtab_avx2,
                                                 &ct__ew_vtab_avx512};

/* |got - want| within ulps float ulps of want (or both NaN / equal) */
static int close_ulp(float got, double want, double ulps) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == (float)want;
    float w = (float)want;
    if (got == w) return 1;
    double ulp = fabs(nextafterf(w, INFINITY) - w);
    if (ulp == 0 || ulp < 1.4e-45) ulp = 1.4e-45;
    /* small results of cancelling formulas: absolute floor */
    return fabs((double)got - want) <= ulps * ulp || fabs((double)got - want) <= 1e-37;
}

static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_silu(double x) { return x / (1 + exp(-x)); }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x) {
    return 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
static double r_relu(double x) { return x != x ? x : x > 0 ? x : 0; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_recip(double x) { return 1 / x; }
static double r_neg(double x) { return -x; }
static double r_sq(double x) { return x * x; }

typedef struct { int idx; double (*ref)(double); double ulps; double lo, hi; } ucase;

static void test_unary_levels(void **state) {
    (void)state;
    const ucase cases[] = {
        {CT_VU_EXP, exp, 2, -100, 100},       {CT_VU_LOG, log, 4, 1e-30, 1e30},
        {CT_VU_TANH, tanh, 4, -12, 12},       {CT_VU_SIGMOID, r_sigmoid, 4, -30, 30},
        {CT_VU_SILU, r_silu, 4, -30, 30},     {CT_VU_GELU, r_gelu, 8, -8, 8},
        {CT_VU_GELU_TANH, r_gelu_tanh, 8, -8, 8}, {CT_VU_ERF, erf, 2, -5, 5},
        {CT_VU_RELU, r_relu, 0, -5, 5},       {CT_VU_EXPM1, expm1, 2, -20, 20},
        {CT_VU_LOG1P, log1p, 2, -0.99, 1e6},  {CT_VU_SQRT, sqrt, 0.5, 0, 1e6},
        {CT_VU_RSQRT, r_rsqrt, 2, 1e-6, 1e6}, {CT_VU_RECIPROCAL, r_recip, 0.5, 0.01, 1e6},
        {CT_VU_NEG, r_neg, 0, -5, 5},         {CT_VU_ABS, fabs, 0, -5, 5},
        {CT_VU_SQUARE, r_sq, 0.5, -100, 100}, {CT_VU_SIN, sin, 4, -100, 100},
        {CT_VU_COS, cos, 4, -100, 100},       {CT_VU_LOG2, log2, 4, 1e-30, 1e30},
    };
    enum { N = 1000 };
    static float x[N + 3], o[N + 3];
    ct_cpu_cap best = ct__cpu_cap_detected();
    for (int lv = 0; lv <= (int)best; lv++) {
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const ucase *u = &cases[c];
            for (int i = 0; i < N; i++) x[i] = (float)(u->lo + (u->hi - u->lo) * i / (N - 1));
            /* specials at the end (inputs outside the sweep are checked too) */
            x[N - 4] = 0.0f; x[N - 3] = -0.0f; x[N - 2] = NAN; x[N - 1] = INFINITY;
            levels[lv]->unary[u->idx](o, x, N);
            for (int i = 0; i < N; i++) {
                if (u->idx == CT_VU_GELU_TANH && isinf(x[i])) continue; /* inf*0 in the formula */
                if (u->idx == CT_VU_GELU && isinf(x[i])) continue;
                if (u->idx == CT_VU_SILU && isinf(x[i])) continue;
                double want = u->ref((double)x[i]);
                /* the formulas cancel where the result is tiny next to 1
                 * (gelu(-8) = -0 in float, as torch's): absolute 1e-7 there */
                int ok = close_ulp(o[i], want, u->ulps + 1) ||
                         (u->idx >= CT_VU_SIGMOID && u->idx <= CT_VU_GELU_TANH &&
                          fabs((double)o[i] - want) <= 2e-7 * fmax(1.0, fabs((double)x[i])));
                if (!ok) {
                    print_error("level %s op %d: f(%.9g) = %.9g, want %.9g\n",
                                levels[lv]->name, u->idx, x[i], o[i], want);
                    fail();
                }
            }
            /* every tail length gives the same bits as the long run */
            for (int n = 1; n <= 33; n++) {
                float t[40];
                levels[lv]->unary[u->idx](t, x + 100, n);
                assert_memory_equal(t, o + 100, (size_t)n * sizeof(float));
            }
        }
    }
}

static void test_dispatch(void **state) {
    (void)state;
    ct_cpu_cap c = ct__cpu_cap(), d = ct__cpu_cap_detected();
    assert_true(c <= d);
    const char *name = ct_cpu_capability();
    assert_string_equal(name, ct__cpu_cap_name(c));
    assert_ptr_equal(ct__ew_vtab(), levels[c]);
    assert_string_equal(ct__ew_vtab()->name, name);
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512f")) assert_true(c < CT_CAP_AVX512);
    if (!__builtin_cpu_supports("avx2")) assert_true(c == CT_CAP_DEFAULT);
#endif
}

/* the fused backward kernels against the recorded (composite) formulas */
static void check_grad(ct_tensor *(*f)(ct_tensor *), ct_dtype dt, int noncontig) {
    ct_manual_seed(7);
    ct_tensor *x0 = ct_mul_scalar(ct_randn(CT_SHAPE(37, 29), dt), 3.0);
    ct_tensor *g0 = ct_randn(CT_SHAPE(37, 29), dt);
    ct_tensor *x = noncontig ? ct_transpose(ct_contiguous(ct_transpose(x0, 0, 1)), 0, 1) : x0;
    ct_tensor *g = noncontig ? ct_transpose(ct_contiguous(ct_transpose(g0, 0, 1)), 0, 1) : g0;
    ct_tensor *xa = ct_detach(x);
    assert_int_equal(ct_set_requires_grad(xa, true), CT_OK);
    ct_tensor *ga = NULL, *gb = NULL, *ya = f(xa), *yb = f(xa);
    /* fused (not recorded) and composite (recorded: create_graph) */
    assert_int_equal(ct_autograd_grad(&ya, 1, &xa, 1, &g, false, false, false, &ga), CT_OK);
    assert_int_equal(ct_autograd_grad(&yb, 1, &xa, 1, &g, false, true, false, &gb), CT_OK);
    double tol = dt == CT_F32 ? 2e-6 : 1e-13;
    if (!ct_allclose(ga, gb, tol, tol, false)) {
        print_error("fused gradient differs (dtype %s, noncontig %d)\n", ct_dtype_name(dt), noncontig);
        fail();
    }
}
static ct_tensor *f_gelu(ct_tensor *x) { return ct_gelu(x, CT_GELU_NONE); }
static ct_tensor *f_gelu_tanh(ct_tensor *x) { return ct_gelu(x, CT_GELU_TANH); }

static void test_fused_grads(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *(*fs[])(ct_tensor *) = {ct_relu, ct_sigmoid, ct_tanh, f_gelu, f_gelu_tanh, ct_silu};
    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++)
        for (int nc = 0; nc < 2; nc++) {
            check_grad(fs[k], CT_F32, nc);
            check_grad(fs[k], CT_F64, nc);
        }
    END;
}

static void test_where_fast(void **state) {
    (void)state;
    BEGIN;
    ct_tensor *x = ct_arange(-8, 8, 1, CT_F32);          /* 16 */
    ct_tensor *c = ct_gt(x, ct_zeros(CT_SHAPE(1), CT_F32));
    ct_tensor *r = ct_where(c, x, ct_wrap(-1.5));
    const float *p = ct_data_ptr(r);
    for (int i = 0; i < 16; i++) assert_true(p[i] == (i - 8 > 0 ? (float)(i - 8) : -1.5f));
    r = ct_where(c, ct_wrap(2.0), x);
    p = ct_data_ptr(r);
    for (int i = 0; i < 16; i++) assert_true(p[i] == (i - 8 > 0 ? 2.0f : (float)(i - 8)));
    /* strided condition and values, broadcast [4,1] cond against [4,4] */
    ct_tensor *m = ct_reshape(x, CT_SHAPE(4, 4));
    ct_tensor *mt = ct_transpose(m, 0, 1);
    ct_tensor *cc = ct_gt(ct_slice(mt, 1, 0, 1, 1), ct_zeros(CT_SHAPE(1), CT_F32)); /* [4,1] */
    r = ct_where(cc, mt, ct_neg(mt));
    assert_non_null(r);
    const float *pm = ct_data_ptr(ct_contiguous(mt));
    const float *pr = ct_data_ptr(ct_contiguous(r));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            float v = pm[i * 4 + j], ci = pm[i * 4] > 0;
            assert_true(pr[i * 4 + j] == (ci ? v : -v));
        }
    /* f64 and int values */
    ct_tensor *xi = ct_arange(0, 16, 1, CT_I64);
    ct_tensor *ri = ct_where(c, xi, ct_full(CT_SHAPE(1), 7, CT_I64));
    assert_int_equal(ct_get_dtype(ri), CT_I64);
    const int64_t *pi = ct_data_ptr(ri);
    for (int i = 0; i < 16; i++) assert_true(pi[i] == (i - 8 > 0 ? i : 7));
    END;
}

/* bias broadcast: [B, N] + [N] through the row fast path, with alpha */
static void test_bias_broadcast(void **state) {
    (void)state;
    BEGIN;
    ct_manual_seed(3);
    ct_tensor *a = ct_randn(CT_SHAPE(5, 37), CT_F32), *b = ct_randn(CT_SHAPE(37), CT_F32);
    ct_tensor *r = ct_add_scaled(a, b, 0.5);
    ct_tensor *r2 = ct_sub(a, b), *r3 = ct_mul(a, b), *r4 = ct_div(b, a);
    const float *pa = ct_data_ptr(a), *pb = ct_data_ptr(b), *p = ct_data_ptr(r);
    const float *p2 = ct_data_ptr(r2), *p3 = ct_data_ptr(r3), *p4 = ct_data_ptr(r4);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 37; j++) {
            float x = pa[i * 37 + j], y = pb[j];
            assert_true(p[i * 37 + j] == x + 0.5f * y);
            assert_true(p2[i * 37 + j] == x - y);
            assert_true(p3[i * 37 + j] == x * y);
            assert_true(p4[i * 37 + j] == y / x);
        }
    END;
}

/* the bias_act op (src/ops/fused_rows.h) with the activation ops' loops
 * equals add then the activation, bit for bit, in place and not */
static void test_bias_act(void **state) {
    (void)state;
    BEGIN;
    ct_manual_seed(5);
    ct_tensor *y0 = ct_randn(CT_SHAPE(67, 45), CT_F32), *b = ct_randn(CT_SHAPE(45), CT_F32);
    for (int act = 0; act < CT_EWA_COUNT; act++) {
        ct_tensor *y = ct_clone(y0), *ref = ct_add(y0, b);
        switch (act) {
        case CT_EWA_RELU: ref = ct_relu(ref); break;
        case CT_EWA_GELU: ref = ct_gelu(ref, CT_GELU_NONE); break;
        case CT_EWA_GELU_TANH: ref = ct_gelu(ref, CT_GELU_TANH); break;
        case CT_EWA_SILU: ref = ct_silu(ref); break;
        case CT_EWA_SIGMOID: ref = ct_sigmoid(ref); break;
        case CT_EWA_TANH: ref = ct_tanh(ref); break;
        default: break;
        }
        int64_t v0 = (int64_t)y->storage->version;
        assert_ptr_equal(ct__bias_act(y, b, act, false, y), y);
        assert_true((int64_t)y->storage->version > v0);
        assert_true(ct_equal(y, ref));
        ct_tensor *y2 = ct__bias_act(y0, b, act, false, NULL);
        assert_non_null(y2);
        assert_true(ct_equal(y2, ref));
    }
    /* the fallback (non-contiguous, f64), the same bits as add then relu */
    ct_tensor *yt = ct_transpose(ct_clone(y0), 0, 1), *b67 = ct_randn(CT_SHAPE(67), CT_F32);
    assert_true(ct_equal(ct__bias_act(yt, b67, CT_EWA_RELU, false, NULL), ct_relu(ct_add(yt, b67))));
    ct_tensor *yd = ct_randn(CT_SHAPE(3, 4), CT_F64), *bd = ct_randn(CT_SHAPE(4), CT_F64);
    assert_true(ct_equal(ct__bias_act(yd, bd, CT_EWA_TANH, false, NULL), ct_tanh(ct_add(yd, bd))));
    /* errors: wrong bias length, bad activation, row loops of tanh */
    assert_null(ct__bias_act(ct_clone(y0), ct_randn(CT_SHAPE(44), CT_F32), CT_EWA_RELU, false, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_SHAPE);
    assert_null(ct__bias_act(y0, b, CT_EWA_COUNT, false, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    assert_null(ct__bias_act(y0, b, CT_EWA_TANH, true, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_ARG);
    /* never recorded */
    ct_tensor *yr = ct_clone(y0);
    assert_int_equal(ct_set_requires_grad(yr, true), CT_OK);
    ct_tensor *o = ct__bias_act(yr, b, CT_EWA_RELU, false, NULL);
    assert_non_null(o);
    assert_false(ct_requires_grad(o));
    assert_true(ct_equal(o, ct_relu(ct_add(ct_detach(yr), b))));
    END;
}

/* the same bits for 1 and 2 threads (chunk boundaries move) */
static void test_threads_bitwise(void **state) {
    (void)state;
    BEGIN;
    int nt = ct_get_num_threads();
    ct_manual_seed(11);
    ct_tensor *x = ct_randn(CT_SHAPE(200003), CT_F32);
    ct_set_num_threads(1);
    ct_tensor *a = ct_gelu(x, CT_GELU_NONE), *b = ct_tanh(x);
    ct_set_num_threads(2);
    ct_tensor *a2 = ct_gelu(x, CT_GELU_NONE), *b2 = ct_tanh(x);
    ct_set_num_threads(nt);
    assert_true(ct_equal(a, a2));
    assert_true(ct_equal(b, b2));
    END;
}

/* ---- against torch (tests/fixtures/ew_vec.txt, tools/fixtures/gen_ew_vec.py) */
static ct_tensor *act_fwd(const char *op, ct_tensor *x) {
    if (!strcmp(op, "relu")) return ct_relu(x);
    if (!strcmp(op, "sigmoid")) return ct_sigmoid(x);
    if (!strcmp(op, "tanh")) return ct_tanh(x);
    if (!strcmp(op, "gelu")) return ct_gelu(x, CT_GELU_NONE);
    if (!strcmp(op, "gelu_tanh")) return ct_gelu(x, CT_GELU_TANH);
    if (!strcmp(op, "silu")) return ct_silu(x);
    if (!strcmp(op, "exp")) return ct_exp(x);
    return ct_log(ct_add_scalar(ct_abs(x), 1e-3));
}
/* forward, and the gradient through the fused backward (not recorded) */
static ct_status run_act(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    ct_tensor *x = ct_detach(in[0]);
    ct_status st = ct_set_requires_grad(x, true);
    if (st) return st;
    ct_tensor *y = act_fwd(c->op, x);
    if (!y) return ct_last_error_code();
    out[0] = ct_detach(y);
    return ct_autograd_grad(&y, 1, &x, 1, &in[1], false, false, false, &out[1]);
}
static ct_status run_bias_act(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    static const char *names[] = {"bias_relu", "bias_sigmoid", "bias_tanh", "bias_gelu",
                                  "bias_gelu_tanh", "bias_silu"};
    static const int acts[] = {CT_EWA_RELU, CT_EWA_SIGMOID, CT_EWA_TANH, CT_EWA_GELU,
                               CT_EWA_GELU_TANH, CT_EWA_SILU};
    for (int k = 0; k < 6; k++)
        if (!strcmp(c->op, names[k])) {
            ct_tensor *y = ct_contiguous(ct_clone(in[0]));
            ct_tensor *b = ct_contiguous(in[1]);
            if (!ct__bias_act(y, b, acts[k], false, y)) return ct_last_error_code();
            out[0] = y;
            return CT_OK;
        }
    return CT_ERR_ARG;
}

static void test_fixtures(void **state) {
    (void)state;
    /* no scope around the runner: it owns the tensors it reads */
    int64_t live0 = ct_live_tensors();
    static const fx_op table[] = {
        {"relu", run_act, 0, 0},      {"sigmoid", run_act, 0, 0},   {"tanh", run_act, 0, 0},
        {"gelu", run_act, 0, 0},      {"gelu_tanh", run_act, 0, 0}, {"silu", run_act, 0, 0},
        {"exp", run_act, 0, 0},       {"log", run_act, 0, 0},
        {"bias_relu", run_bias_act, 0, 0},      {"bias_sigmoid", run_bias_act, 0, 0},
        {"bias_tanh", run_bias_act, 0, 0},      {"bias_gelu", run_bias_act, 0, 0},
        {"bias_gelu_tanh", run_bias_act, 0, 0}, {"bias_silu", run_bias_act, 0, 0},
    };
    int fails = fx_run_file(CT_FIXTURE_DIR "/ew_vec.txt", table, sizeof table / sizeof table[0]);
    assert_int_equal(fails, 0);
    assert_int_equal(ct_live_tensors(), live0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_levels),   cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_fused_grads),    cmocka_unit_test(test_where_fast),
        cmocka_unit_test(test_bias_broadcast), cmocka_unit_test(test_threads_bitwise),
        cmocka_unit_test(test_bias_act),       cmocka_unit_test(test_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
