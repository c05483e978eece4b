/* test_attention.c -- scaled_dot_product_attention: every kernel (forced
 * with ct_sdp_kernel_set) against PyTorch fixtures (tests/fixtures/
 * attention.txt from tools/fixtures/gen_attention.py) and against the math
 * kernel, gradcheck of the math kernel in f64, dropout determinism and the
 * consistency of the fused kernels' dropout backward, the automatic choice,
 * and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <ctorch/ctorch.h>

#include "fixture.h"
#include "test_util.h"

#define BEGIN                                  \
    int64_t live0 = ct_live_tensors();         \
    ct_scope s_ = ct_scope_begin();            \
    ct_clear_error()
#define END                                    \
    ct_scope_end(s_);                          \
    ct_sdp_kernel_set(CT_SDP_ALL);             \
    assert_int_equal(ct_live_tensors(), live0)

static unsigned g_kernel = CT_SDP_MATH;
static int g_wrong_backend;

/* in: q, k, v, w, [mask]; out: out, dq, dk, dv of sum(out * w) */
static ct_status run_sdpa(const fx_case *c, ct_tensor *const *in, ct_tensor **out) {
    for (int i = 0; i < 3; i++)
        if (ct_set_requires_grad(in[i], true)) return ct_last_error_code();
    ct_tensor *mask = fx_i(c, "mask", 0) ? in[4] : NULL;
    ct_tensor *o = ct_scaled_dot_product_attention(in[0], in[1], in[2], mask, 0.0,
                                                   fx_i(c, "causal", 0), fx_f(c, "scale", 0),
                                                   fx_i(c, "gqa", 0));
    if (!o) return ct_last_error_code();
    unsigned want = ct_get_dtype(in[0]) == CT_F32 ? g_kernel : CT_SDP_MATH;
    if ((unsigned)ct_sdp_last_backend() != want) {
        fprintf(stderr, "case %s: ran backend %d, expected %u\n", c->label, ct_sdp_last_backend(), want);
        g_wrong_backend++;
    }
    ct_tensor *loss = ct_sum(ct_mul(o, in[3]), NULL, 0, false);
    out[0] = ct_detach(o);
    return ct_autograd_grad(&loss, 1, in, 3, NULL, false, false, false, out + 1);
}

static const fx_op k_ops[] = {{"sdpa", run_sdpa, 2e-4, 2e-5}};

static void run_fixtures(unsigned kernel) {
    int64_t live0 = ct_live_tensors(); /* no scope: the runner owns its tensors */
    g_kernel = kernel;
    g_wrong_backend = 0;
    ct_sdp_kernel_set(kernel | CT_SDP_MATH); /* f64 cases run math */
    int f = fx_run_file(CT_FIXTURE_DIR "/attention.txt", k_ops, 1);
    assert_int_equal(f, 0);
    assert_int_equal(g_wrong_backend, 0);
    ct_sdp_kernel_set(CT_SDP_ALL);
    assert_int_equal(ct_live_tensors(), live0);
}
static void test_fixtures_math(void **s) { (void)s; run_fixtures(CT_SDP_MATH); }
static void test_fixtures_flash(void **s) { (void)s; run_fixtures(CT_SDP_FLASH); }
static void test_fixtures_mem_efficient(void **s) { (void)s; run_fixtures(CT_SDP_MEM_EFFICIENT); }

/* ---- fused kernels against math on bigger shapes -------------------------- */
static ct_tensor *leaf(ct_tensor *t) {
    assert_non_null(t);
    assert_int_equal(ct_set_requires_grad(t, true), CT_OK);
    return t;
}

static void close_to(ct_tensor *a, ct_tensor *b, double rtol, double atol, const char *what) {
    assert_non_null(a);
    assert_non_null(b);
    int ok = ct_allclose(a, b, rtol, atol, false);
    if (ok != 1) {
        ct_tensor *d = ct_amax(ct_abs(ct_sub(a, b)), NULL, 0, false);
        print_error("%s: not close (max abs diff %g)\n", what, ct_item(d));
        fail();
    }
}

typedef struct cfg {
    int64_t B, Hq, Hk, L, S, E, Ev;
    int mask; /* 0 none, 1 bool [L,S], 2 float [B,1,L,S], 3 bool key padding [B,1,1,S] */
    bool causal, gqa;
    bool packed; /* q, k, v: the [B, L, H, E] views of one [B, L, 3, H, E] leaf, transposed */
} cfg;

static void compare_kernels(const cfg *g) {
    BEGIN;
    ct_manual_seed(7);
    ct_tensor *q, *k, *v, *pk = NULL;
    if (g->packed) { /* GPT-2's layout: strided q, k, v and their gradients */
        pk = leaf(ct_randn(CT_SHAPE(g->B, g->L, 3, g->Hq, g->E), CT_F32));
        q = ct_transpose(ct_select(pk, 2, 0), 1, 2);
        k = ct_transpose(ct_select(pk, 2, 1), 1, 2);
        v = ct_transpose(ct_select(pk, 2, 2), 1, 2);
        assert_false(ct_is_contiguous(q));
    } else {
        q = leaf(ct_randn(CT_SHAPE(g->B, g->Hq, g->L, g->E), CT_F32));
        k = leaf(ct_randn(CT_SHAPE(g->B, g->Hk, g->S, g->E), CT_F32));
        v = leaf(ct_randn(CT_SHAPE(g->B, g->Hk, g->S, g->Ev), CT_F32));
    }
    ct_tensor *m = NULL;
    if (g->mask == 1) m = ct_gt_scalar(ct_rand(CT_SHAPE(g->L, g->S), CT_F32), 0.3);
    if (g->mask == 2) m = ct_randn(CT_SHAPE(g->B, 1, g->L, g->S), CT_F32);
    if (g->mask == 3) m = ct_gt_scalar(ct_rand(CT_SHAPE(g->B, 1, 1, g->S), CT_F32), 0.5);
    if (g->mask == 3) /* one fully masked batch row: zeros, in every kernel */
        assert_non_null(ct_fill_(ct_select(m, 0, 0), 0.0));
    ct_tensor *w = ct_randn(CT_SHAPE(g->B, g->Hq, g->L, g->Ev), CT_F32);
    ct_tensor *ref[4] = {0}, *got[4] = {0};
    unsigned ks[3] = {CT_SDP_MATH, CT_SDP_FLASH, CT_SDP_MEM_EFFICIENT};
    ct_tensor *ins[3] = {q, k, v};
    int nins = 3;
    if (pk) { ins[0] = pk; nins = 1; }
    for (int kk = 0; kk < 3; kk++) {
        ct_sdp_kernel_set(ks[kk]);
        if (pk) { /* fresh views: each run's graph is freed by its backward */
            q = ct_transpose(ct_select(pk, 2, 0), 1, 2);
            k = ct_transpose(ct_select(pk, 2, 1), 1, 2);
            v = ct_transpose(ct_select(pk, 2, 2), 1, 2);
        }
        ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, m, 0.0, g->causal, 0.0, g->gqa);
        assert_non_null(o);
        assert_int_equal(ct_sdp_last_backend(), ks[kk]);
        ct_tensor **dst = kk == 0 ? ref : got;
        dst[0] = o;
        ct_tensor *loss = ct_sum(ct_mul(o, w), NULL, 0, false);
        ct_status gst = ct_autograd_grad(&loss, 1, ins, nins, NULL, false, false, false, dst + 1);
        if (gst) print_error("%s\n", ct_last_error());
        assert_int_equal(gst, CT_OK);
        if (kk > 0) {
            const char *nm[4] = {"out", pk ? "dqkv" : "dq", "dk", "dv"};
            char what[96];
            for (int i = 0; i < 1 + nins; i++) {
                snprintf(what, sizeof what, "%s %s", kk == 1 ? "flash" : "mem_efficient", nm[i]);
                close_to(got[i], ref[i], 1e-4, 2e-5, what);
            }
        }
    }
    END;
}

static void test_fused_vs_math(void **s) {
    (void)s;
    const cfg cases[] = {
        {2, 3, 3, 100, 150, 32, 32, 0, false, false, false},
        {1, 2, 2, 130, 130, 16, 24, 0, true, false, false},
        {1, 4, 2, 70, 200, 8, 8, 1, false, true, false},
        {2, 2, 2, 65, 129, 16, 16, 2, false, false, false},
        {2, 2, 2, 40, 77, 16, 16, 3, false, false, false},
        {1, 6, 3, 200, 200, 64, 64, 0, true, true, false},
        {1, 1, 1, 33, 1, 80, 80, 0, false, false, false},
        {1, 2, 1, 150, 300, 40, 24, 0, true, true, false},
        {1, 1, 1, 97, 260, 20, 36, 2, false, false, false},
        {2, 3, 3, 70, 70, 16, 16, 0, true, false, true},
        {1, 2, 2, 150, 150, 32, 32, 0, true, false, true},
        {1, 2, 2, 40, 40, 8, 8, 1, false, false, true},
        /* causal tiles the diagonal crosses at every offset: one query block
         * a head (GPT-2's T = 64), fewer keys than queries, more */
        {2, 3, 3, 64, 64, 16, 16, 0, true, false, true},
        {1, 4, 2, 50, 37, 24, 20, 0, true, true, false},
        {1, 2, 1, 260, 97, 24, 24, 0, true, true, false},
        {1, 2, 2, 45, 45, 8, 8, 0, true, false, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) compare_kernels(&cases[i]);
    /* fewer (batch, kv head) pairs than threads: the backward splits the key
     * blocks of a head over threads and sums the dQ partials */
    int nt = ct_get_num_threads();
    for (int t = 2; t <= 3; t++) {
        ct_set_num_threads(t);
        compare_kernels(&cases[7]);
        compare_kernels(&cases[8]);
        compare_kernels(&cases[10]); /* split key blocks with a strided dQ */
    }
    ct_set_num_threads(nt);
}

/* ---- bf16/f16 q, k, v in the fused kernels ---------------------------------
 * The kernels read half q, k, v (and grad_out, out) tile by tile and round
 * each result once, where the op layer used to make float32 copies: the
 * output must be the float32 kernel's on the converted inputs rounded, bit
 * for bit; the gradients the float32 kernel's rounded, up to the one change
 * (D = rowsum(dO * O) reads the rounded O, as torch's flash backward does). */
static void half_vs_f32(const cfg *g, ct_dtype hd, unsigned kernel) {
    BEGIN;
    ct_manual_seed(11);
    ct_tensor *pk = NULL, *src[3];
    if (g->packed) {
        pk = ct_to_dtype(ct_randn(CT_SHAPE(g->B, g->L, 3, g->Hq, g->E), CT_F32), hd);
        for (int i = 0; i < 3; i++) src[i] = ct_transpose(ct_select(pk, 2, i), 1, 2);
    } else {
        src[0] = ct_to_dtype(ct_randn(CT_SHAPE(g->B, g->Hq, g->L, g->E), CT_F32), hd);
        src[1] = ct_to_dtype(ct_randn(CT_SHAPE(g->B, g->Hk, g->S, g->E), CT_F32), hd);
        src[2] = ct_to_dtype(ct_randn(CT_SHAPE(g->B, g->Hk, g->S, g->Ev), CT_F32), hd);
    }
    ct_tensor *m = NULL, *mf = NULL;
    if (g->mask == 1) m = mf = ct_gt_scalar(ct_rand(CT_SHAPE(g->L, g->S), CT_F32), 0.3);
    if (g->mask == 2) {
        m = ct_to_dtype(ct_randn(CT_SHAPE(g->B, 1, g->L, g->S), CT_F32), hd);
        mf = ct_to_dtype(m, CT_F32);
    }
    ct_tensor *gh = ct_to_dtype(ct_randn(CT_SHAPE(g->B, g->Hq, g->L, g->Ev), CT_F32), hd);
    ct_tensor *gf = ct_to_dtype(gh, CT_F32);
    ct_tensor *qh[3], *qf[3], *dh[3] = {0}, *df[3] = {0};
    for (int i = 0; i < 3; i++) {
        qh[i] = leaf(ct_detach(src[i])); /* strided when packed */
        qf[i] = leaf(ct_to_dtype(ct_detach(src[i]), CT_F32));
    }
    ct_sdp_kernel_set(kernel);
    ct_tensor *oh = ct_scaled_dot_product_attention(qh[0], qh[1], qh[2], m, 0.0, g->causal, 0.0, g->gqa);
    if (!oh) print_error("%s\n", ct_last_error());
    assert_non_null(oh);
    assert_int_equal(ct_sdp_last_backend(), kernel);
    ct_tensor *of = ct_scaled_dot_product_attention(qf[0], qf[1], qf[2], mf, 0.0, g->causal, 0.0, g->gqa);
    assert_non_null(of);
    assert_int_equal(ct_get_dtype(oh), hd);
    if (ct_equal(oh, ct_to_dtype(of, hd)) != 1) {
        print_error("%s %s: the half output is not the float32 one rounded\n", ct_dtype_name(hd),
                    kernel == CT_SDP_FLASH ? "flash" : "mem_efficient");
        fail();
    }
    assert_int_equal(ct_autograd_grad(&oh, 1, qh, 3, &gh, false, false, false, dh), CT_OK);
    assert_int_equal(ct_autograd_grad(&of, 1, qf, 3, &gf, false, false, false, df), CT_OK);
    const char *nm[3] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ct_get_dtype(dh[i]), hd);
        /* tolerance: a few units of the half dtype's last place at the
         * gradient's scale */
        double scale = ct_item(ct_amax(ct_abs(df[i]), NULL, 0, false));
        double eps = hd == CT_BF16 ? 0x1p-8 : 0x1p-11;
        char what[96];
        snprintf(what, sizeof what, "%s %s %s", ct_dtype_name(hd),
                 kernel == CT_SDP_FLASH ? "flash" : "mem_efficient", nm[i]);
        close_to(ct_to_dtype(dh[i], CT_F32), ct_to_dtype(ct_to_dtype(df[i], hd), CT_F32), 2 * eps,
                 4 * eps * scale, what);
    }
    END;
}

static void test_half_native(void **s) {
    (void)s;
    const cfg cases[] = {
        {2, 4, 2, 130, 300, 72, 40, 0, false, true, false},
        {1, 2, 2, 150, 150, 32, 32, 0, true, false, true},
        {2, 2, 2, 65, 129, 16, 16, 2, false, false, false},
        {1, 1, 1, 97, 260, 20, 36, 1, false, false, false},
        {1, 1, 1, 97, 260, 20, 36, 0, true, false, false},
        {1, 2, 2, 1, 1, 8, 8, 0, false, false, false},
        {2, 3, 3, 64, 64, 16, 16, 0, true, false, true},
    };
    ct_dtype dts[2] = {CT_BF16, CT_F16};
    unsigned ks[2] = {CT_SDP_FLASH, CT_SDP_MEM_EFFICIENT};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int d = 0; d < 2; d++)
            for (int kk = 0; kk < 2; kk++) half_vs_f32(&cases[i], dts[d], ks[kk]);
    /* one (batch, kv head) over 2 threads: split key blocks, dQ partials */
    int nt = ct_get_num_threads();
    ct_set_num_threads(2);
    half_vs_f32(&cases[3], CT_BF16, CT_SDP_FLASH);
    half_vs_f32(&cases[4], CT_F16, CT_SDP_MEM_EFFICIENT);
    half_vs_f32(&cases[1], CT_F16, CT_SDP_FLASH);
    ct_set_num_threads(nt);
}

/* ---- gradcheck ------------------------------------------------------------ */
typedef struct gc_user { ct_tensor *mask; bool causal, gqa; } gc_user;

static ct_tensor *gc_fn(ct_tensor *const *in, int n, void *user) {
    (void)n;
    gc_user *u = user;
    return ct_scaled_dot_product_attention(in[0], in[1], in[2], n > 3 ? in[3] : u->mask, 0.0,
                                           u->causal, 0.0, u->gqa);
}

static void test_gradcheck_math(void **s) {
    (void)s;
    BEGIN;
    ct_manual_seed(3);
    ct_sdp_kernel_set(CT_SDP_ALL); /* f64 -> math */
    ct_tensor *q = leaf(ct_randn(CT_SHAPE(1, 4, 3, 5), CT_F64));
    ct_tensor *k = leaf(ct_randn(CT_SHAPE(1, 2, 4, 5), CT_F64));
    ct_tensor *v = leaf(ct_randn(CT_SHAPE(1, 2, 4, 3), CT_F64));
    ct_tensor *in[4] = {q, k, v, NULL};
    gc_user u = {NULL, true, true};
    assert_int_equal(ct_gradcheck(gc_fn, &u, in, 3, 0, 0, 0), CT_OK);
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_MATH);
    u.causal = false;
    u.mask = ct_gt_scalar(ct_rand(CT_SHAPE(3, 4), CT_F64), 0.3);
    assert_int_equal(ct_gradcheck(gc_fn, &u, in, 3, 0, 0, 0), CT_OK);
    /* a float mask that requires grad gets its gradient (math kernel) */
    u.gqa = true;
    u.mask = NULL;
    in[3] = leaf(ct_randn(CT_SHAPE(1, 1, 3, 4), CT_F64));
    assert_int_equal(ct_gradcheck(gc_fn, &u, in, 4, 0, 0, 0), CT_OK);
    /* f32 + mask requiring grad: the fused kernels step aside */
    ct_tensor *mf = leaf(ct_randn(CT_SHAPE(3, 4), CT_F32));
    ct_tensor *o = ct_scaled_dot_product_attention(ct_to_dtype(q, CT_F32), ct_to_dtype(k, CT_F32),
                                                   ct_to_dtype(v, CT_F32), mf, 0.0, false, 0.0, true);
    assert_non_null(o);
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_MATH);
    END;
}

/* Double backward through the fused kernels (taken through the math kernel
 * under create_graph) equals the math kernel's. */
static void test_double_backward(void **s) {
    (void)s;
    BEGIN;
    ct_manual_seed(9);
    ct_tensor *q = leaf(ct_randn(CT_SHAPE(1, 4, 9, 8), CT_F32));
    ct_tensor *k = leaf(ct_randn(CT_SHAPE(1, 2, 11, 8), CT_F32));
    ct_tensor *v = leaf(ct_randn(CT_SHAPE(1, 2, 11, 8), CT_F32));
    ct_tensor *w = ct_randn(CT_SHAPE(1, 4, 9, 8), CT_F32), *w2 = ct_randn(CT_SHAPE(1, 4, 9, 8), CT_F32);
    unsigned ks[3] = {CT_SDP_MATH, CT_SDP_FLASH, CT_SDP_MEM_EFFICIENT};
    ct_tensor *ref[3] = {0};
    ct_tensor *ins[3] = {q, k, v};
    for (int kk = 0; kk < 3; kk++) {
        ct_sdp_kernel_set(ks[kk]);
        ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, 0.0, true);
        assert_int_equal(ct_sdp_last_backend(), ks[kk]);
        ct_tensor *loss = ct_sum(ct_mul(o, w), NULL, 0, false), *dq;
        assert_int_equal(ct_autograd_grad(&loss, 1, &q, 1, NULL, true, true, false, &dq), CT_OK);
        ct_tensor *l2 = ct_sum(ct_mul(dq, w2), NULL, 0, false), *gg[3];
        assert_int_equal(ct_autograd_grad(&l2, 1, ins, 3, NULL, false, false, false, gg), CT_OK);
        for (int i = 0; i < 3; i++) {
            if (kk == 0) ref[i] = gg[i];
            else close_to(gg[i], ref[i], 1e-4, 1e-5, "double backward");
        }
    }
    END;
}

/* ---- dropout ------------------------------------------------------------- */
static void test_dropout_determinism(void **s) {
    (void)s;
    BEGIN;
    unsigned ks[3] = {CT_SDP_MATH, CT_SDP_FLASH, CT_SDP_MEM_EFFICIENT};
    ct_manual_seed(1);
    ct_tensor *q = ct_randn(CT_SHAPE(1, 2, 20, 8), CT_F32);
    ct_tensor *k = ct_randn(CT_SHAPE(1, 2, 30, 8), CT_F32);
    ct_tensor *v = ct_randn(CT_SHAPE(1, 2, 30, 8), CT_F32);
    for (int i = 0; i < 3; i++) {
        ct_sdp_kernel_set(ks[i]);
        ct_manual_seed(42);
        ct_tensor *a = ct_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, 0.0, false);
        ct_manual_seed(42);
        ct_tensor *b = ct_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, 0.0, false);
        ct_tensor *c = ct_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, 0.0, false);
        ct_tensor *d = ct_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, 0.0, false);
        assert_int_equal(ct_sdp_last_backend(), ks[i]);
        assert_int_equal(ct_equal(a, b), 1);
        assert_int_equal(ct_equal(a, c), 0);
        assert_int_equal(ct_equal(a, d), 0);
    }
    END;
}

/* With v = I (Ev = S) the output is the dropped-out attention matrix itself:
 * out = P * Z / (1 - p).  Its zeros give the mask Z, so the composite
 * (softmax(q k^T scale) * Z / (1 - p)) @ v is the reference for the fused
 * kernels' forward and backward with dropout. */
static void test_dropout_backward(void **s) {
    (void)s;
    BEGIN;
    const double p = 0.3;
    const int64_t E = 8;
    unsigned ks[2] = {CT_SDP_FLASH, CT_SDP_MEM_EFFICIENT};
    /* several tiles of both kernels; one query block a head (GPT-2's T = 64) */
    for (int kk = 0; kk < 4; kk++) {
        const int64_t L = kk < 2 ? 70 : 50, S = 2 * L;
        for (int causal = 0; causal < 2; causal++) {
            ct_manual_seed(5);
            ct_tensor *q = leaf(ct_randn(CT_SHAPE(1, 2, L, E), CT_F32));
            ct_tensor *k = leaf(ct_randn(CT_SHAPE(1, 2, S, E), CT_F32));
            ct_tensor *v = leaf(ct_contiguous(ct_expand(ct_eye(S, S, CT_F32), CT_SHAPE(1, 2, S, S))));
            ct_tensor *w = ct_randn(CT_SHAPE(1, 2, L, S), CT_F32);
            ct_sdp_kernel_set(ks[kk % 2]);
            ct_tensor *o = ct_scaled_dot_product_attention(q, k, v, NULL, p, causal, 0.0, false);
            assert_non_null(o);
            assert_int_equal(ct_sdp_last_backend(), ks[kk % 2]);
            ct_tensor *z = ct_div_scalar(ct_to_dtype(ct_logical_not(ct_eq_scalar(ct_detach(o), 0.0)),
                                                     CT_F32), 1.0 - p);
            ct_tensor *sc = ct_mul_scalar(ct_matmul(q, ct_transpose(k, -2, -1)), 1.0 / sqrt((double)E));
            if (causal)
                sc = ct_masked_fill(sc, ct_triu(ct_ones(CT_SHAPE(L, S), CT_BOOL), 1), -INFINITY);
            ct_tensor *r = ct_matmul(ct_mul(ct_softmax(sc, -1), z), v);
            close_to(o, r, 1e-4, 1e-6, "dropout forward");
            /* about p of the causal-visible weights dropped */
            double kept = ct_item(ct_mean(ct_mul_scalar(z, 1.0 - p), NULL, 0, false));
            if (!causal) assert_true(fabs(kept - (1 - p)) < 0.02);
            ct_tensor *ins[3] = {q, k, v}, *g1[3], *g2[3];
            ct_tensor *l1 = ct_sum(ct_mul(o, w), NULL, 0, false);
            ct_tensor *l2 = ct_sum(ct_mul(r, w), NULL, 0, false);
            assert_int_equal(ct_autograd_grad(&l1, 1, ins, 3, NULL, false, false, false, g1), CT_OK);
            assert_int_equal(ct_autograd_grad(&l2, 1, ins, 3, NULL, false, false, false, g2), CT_OK);
            close_to(g1[0], g2[0], 1e-3, 1e-4, "dropout dq");
            close_to(g1[1], g2[1], 1e-3, 1e-4, "dropout dk");
            close_to(g1[2], g2[2], 1e-3, 1e-4, "dropout dv");
        }
    }
    END;
}

/* ---- the automatic choice -------------------------------------------------- */
static void test_choice(void **s) {
    (void)s;
    BEGIN;
    ct_tensor *q = ct_randn(CT_SHAPE(1, 2, 4, 8), CT_F32), *k = ct_randn(CT_SHAPE(1, 2, 6, 8), CT_F32);
    ct_tensor *bm = ct_ones(CT_SHAPE(4, 6), CT_BOOL), *fm = ct_zeros(CT_SHAPE(4, 6), CT_F32);
    assert_int_equal(ct_sdp_kernel_enabled(), CT_SDP_ALL);
    assert_non_null(ct_scaled_dot_product_attention(q, k, k, NULL, 0, false, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_FLASH);
    assert_non_null(ct_scaled_dot_product_attention(q, k, k, bm, 0, false, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_FLASH);
    assert_non_null(ct_scaled_dot_product_attention(q, k, k, fm, 0, false, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_MEM_EFFICIENT);
    ct_tensor *q64 = ct_to_dtype(q, CT_F64), *k64 = ct_to_dtype(k, CT_F64);
    assert_non_null(ct_scaled_dot_product_attention(q64, k64, k64, NULL, 0, true, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_MATH);
    assert_int_equal(ct_sdp_kernel_set(CT_SDP_MATH | CT_SDP_MEM_EFFICIENT), CT_SDP_ALL);
    assert_non_null(ct_scaled_dot_product_attention(q, k, k, NULL, 0, false, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_MEM_EFFICIENT);
    ct_sdp_kernel_set(CT_SDP_FLASH);
    assert_non_null(ct_scaled_dot_product_attention(q, k, k, fm, 0, false, 0, false));
    assert_int_equal(ct_sdp_last_backend(), CT_SDP_FLASH);
    /* empty sequences */
    ct_tensor *k0 = ct_randn(CT_SHAPE(1, 2, 0, 8), CT_F32);
    for (unsigned b = 1; b <= 4; b <<= 1) {
        ct_sdp_kernel_set(b);
        ct_tensor *o = ct_scaled_dot_product_attention(q, k0, k0, NULL, 0, false, 0, false);
        assert_non_null(o);
        assert_int_equal(ct_numel(o), 64);
        assert_true(ct_item(ct_sum(ct_abs(o), NULL, 0, false)) == 0.0);
    }
    END;
}

/* ---- errors ---------------------------------------------------------------- */
static void test_errors(void **s) {
    (void)s;
    BEGIN;
    ct_tensor *q = ct_randn(CT_SHAPE(1, 4, 5, 8), CT_F32);
    ct_tensor *k = ct_randn(CT_SHAPE(1, 4, 6, 8), CT_F32);
    ct_tensor *k3 = ct_randn(CT_SHAPE(1, 3, 6, 8), CT_F32);
    ct_tensor *ke = ct_randn(CT_SHAPE(1, 4, 6, 7), CT_F32);
    ct_tensor *vs = ct_randn(CT_SHAPE(1, 4, 7, 8), CT_F32);
    ct_tensor *m = ct_ones(CT_SHAPE(5, 6), CT_BOOL), *mbad = ct_ones(CT_SHAPE(4, 6), CT_BOOL);
    assert_null(ct_scaled_dot_product_attention(NULL, k, k, NULL, 0, false, 0, false));
    assert_null(ct_scaled_dot_product_attention(q, k, NULL, NULL, 0, false, 0, false));
    expect_err(ct_scaled_dot_product_attention(q, ke, ke, NULL, 0, false, 0, false), CT_ERR_SHAPE,
               "same last dim");
    expect_err(ct_scaled_dot_product_attention(q, k, vs, NULL, 0, false, 0, false), CT_ERR_SHAPE,
               "same sequence length");
    expect_err(ct_scaled_dot_product_attention(q, k3, k3, NULL, 0, false, 0, true), CT_ERR_SHAPE,
               "multiple of the key and value heads");
    expect_err(ct_scaled_dot_product_attention(q, k3, k3, NULL, 0, false, 0, false), CT_ERR_SHAPE, "");
    expect_err(ct_scaled_dot_product_attention(q, k, k, m, 0, true, 0, false), CT_ERR_ARG,
               "should not be set when is_causal=True");
    expect_err(ct_scaled_dot_product_attention(q, k, k, mbad, 0, false, 0, false), CT_ERR_SHAPE,
               "attn_mask");
    expect_err(ct_scaled_dot_product_attention(q, k, k, NULL, 1.0, false, 0, false), CT_ERR_ARG,
               "dropout_p");
    expect_err(ct_scaled_dot_product_attention(q, ct_to_dtype(k, CT_F64), k, NULL, 0, false, 0, false),
               CT_ERR_DTYPE, "same floating dtype");
    ct_tensor *mi = ct_ones(CT_SHAPE(5, 6), CT_I64);
    expect_err(ct_scaled_dot_product_attention(q, k, k, mi, 0, false, 0, false), CT_ERR_DTYPE,
               "attn_mask dtype");
    ct_sdp_kernel_set(0);
    expect_err(ct_scaled_dot_product_attention(q, k, k, NULL, 0, false, 0, false), CT_ERR_ARG,
               "no kernel is enabled");
    ct_sdp_kernel_set(CT_SDP_FLASH | CT_SDP_MEM_EFFICIENT);
    ct_tensor *q64 = ct_to_dtype(q, CT_F64), *k64 = ct_to_dtype(k, CT_F64);
    expect_err(ct_scaled_dot_product_attention(q64, k64, k64, NULL, 0, false, 0, false), CT_ERR_ARG,
               "flash and mem_efficient cannot because it needs float32");
    ct_sdp_kernel_set(CT_SDP_ALL);
    END;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_math),
        cmocka_unit_test(test_fixtures_flash),
        cmocka_unit_test(test_fixtures_mem_efficient),
        cmocka_unit_test(test_fused_vs_math),
        cmocka_unit_test(test_gradcheck_math),
        cmocka_unit_test(test_half_native),
        cmocka_unit_test(test_double_backward),
        cmocka_unit_test(test_dropout_determinism),
        cmocka_unit_test(test_dropout_backward),
        cmocka_unit_test(test_choice),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
