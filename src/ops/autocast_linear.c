/* autocast_linear.c -- autocast's bf16 linear and addmm with their casts
 * folded into the product (the op gemm_lp and a custom autograd function).
 *
 * Under autocast bf16, linear(x, W, b) and addmm(b, x, W) run on bf16
 * copies: the autocast layer casts the float32 weight (once per region),
 * the float32 activation and the bias, the bf16 product runs, and in the
 * backward the bf16 gradients of those copies are cast back to float32.
 * For a GPT-2 step that is ~250 M elements converted in passes of their own
 * (the weights there and back), ~8% of the step.
 *
 * Where the CPU's kernel of gemm_lp rounds float32 operands to bf16 as it
 * packs them and rounds its results in its stores (ct__half_native(CT_CPU,
 * CT_OP_gemm_lp, CT_BF16): the vdpbf16ps GEMM, or the AVX2 GEMM, which
 * multiplies the rounded values in f32 exactly as it multiplies bf16
 * copies), autocast runs such a product as one custom function instead:
 *   forward   y  = round(x W^T + round(b))        bf16, as before;
 *   backward  dx = round(g W)                     in x's dtype,
 *             dW = round(g^T x)                   float32 (bf16 values),
 *             db = float32(sum_rows(g) in bf16),
 * with every operand rounded to bf16 first: the values the cast copies
 * held, the same products in the same order, each result rounded once as
 * the bf16 result then converted would be.  So the results are bit for bit
 * those of the casts (test_amp checks it), with no bf16 copy of the weight
 * and no conversion pass.  It is not used while tracing (ct_compile, vmap:
 * the trace records the casts), under forward AD, for a float16 region, or
 * for addmm with beta/alpha other than 1 or a 2-D input; a backward that
 * builds a graph (create_graph) differentiates the cast formulas instead. */
#include "autocast.h"

#include "ctorch/amp.h"
#include "ctorch/autograd.h"
#include "meta.h"

/* ---- the op gemm_lp ------------------------------------------------------------- */
CT_META_FN(ct__meta_gemm_lp) {
    (void)nout;
    const char *fn = "gemm_lp";
    if (nin != 2 && nin != 3) return ct__error_status(CT_ERR_ARG, "%s: expected 2 or 3 inputs, got %d", fn, nin);
    ct_tensor *A = in[0], *B = in[1], *bias = nin > 2 ? in[2] : NULL;
    if (!A || !B) return ct__error_status(CT_ERR_NULL, "%s: A or B is NULL", fn);
    for (int i = 0; i < 2; i++)
        if (in[i]->dtype != CT_F32 && in[i]->dtype != CT_BF16)
            return ct__error_status(CT_ERR_DTYPE, "%s: operands must be float32 or bfloat16, got %s", fn,
                                    ct_dtype_name(in[i]->dtype));
    if (A->ndim != 2 || B->ndim != 2 || A->sizes[1] != B->sizes[0])
        return ct__error_status(CT_ERR_SHAPE, "%s: A [M, K] and B [K, N] expected, got %s and %s", fn,
                                ct__tshape(A), ct__tshape(B));
    if (bias && (bias->dtype != CT_F32 || bias->ndim != 1 || bias->sizes[0] != B->sizes[1]))
        return ct__error_status(CT_ERR_SHAPE, "%s: a float32 bias [%lld] expected, got %s %s", fn,
                                (long long)B->sizes[1], ct_dtype_name(bias->dtype), ct__tshape(bias));
    ct_dtype odt = (ct_dtype)a->p.gemm_lp.out_dtype;
    if (odt != CT_F32 && odt != CT_BF16)
        return ct__error_status(CT_ERR_DTYPE, "%s: the result is float32 or bfloat16, not %s", fn,
                                ct_dtype_name(odt));
    ct_device dev;
    if (ct__meta_device(fn, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(&out[0], (int64_t[]){A->sizes[0], B->sizes[1]}, 2, odt, dev);
    return CT_OK;
}

ct_tensor *ct__gemm_lp(ct_tensor *A, ct_tensor *B, ct_tensor *bias, ct_dtype odt) {
    ct_tensor *in[3] = {A, B, bias};
    int nin = bias ? 3 : 2;
    ct_args a = ct__args(CT_OP_gemm_lp);
    a.p.gemm_lp.out_dtype = (int64_t)odt;
    ct_meta m;
    if (ct__meta_run(CT_OP_gemm_lp, &m, 1, in, nin, &a)) return NULL;
    ct_tensor *o = ct__meta_new(&m, in);
    if (!o) return NULL;
    if (ct__dispatch(CT_OP_gemm_lp, &o, 1, in, nin, &a)) {
        ct_release(o);
        return NULL;
    }
    return ct__register(o);
}

/* ---- the custom function ---------------------------------------------------------
 * inputs x [..., K] (float32 or bf16), W (float32: [N, K] for linear, [K, N]
 * for addmm), [b [N] float32]; output bf16 [..., N]. */
typedef struct aclin_kind {
    bool addmm; /* W is [K, N] (Conv1D's addmm(b, x, W)); else [N, K] (linear) */
    bool bias;
} aclin_kind;

static const aclin_kind k_kinds[2][2] = {{{false, false}, {false, true}}, {{true, false}, {true, true}}};

/* W as the B operand [K, N] of x @ B */
static ct_tensor *w_as_b(const aclin_kind *k, ct_tensor *W) { return k->addmm ? W : ct_t(W); }

/* xb, x's bf16 values (x itself when bf16): the activation's rounding,
 * made once here (not recorded: grad mode is off in forward) so that the
 * GEMM reads its rows in place (a float32 x would be packed and converted
 * by each thread); saved with x (a graph-building backward differentiates
 * through x itself) */
static ct_status aclin_forward(ct_function_ctx *ctx, ct_tensor *const *in, int nin, ct_tensor **out) {
    const aclin_kind *k = ct_ctx_user(ctx);
    ct_tensor *x = in[0], *W = in[1], *b = nin > 2 ? in[2] : NULL;
    int64_t K = ct_size(x, -1), N = k->addmm ? ct_size(W, 1) : ct_size(W, 0);
    ct_tensor *xb = ct_get_dtype(x) == CT_BF16 ? x : ct_to_dtype(x, CT_BF16);
    ct_tensor *x2 = xb ? ct_reshape(xb, CT_SHAPE(-1, K)) : NULL;
    ct_tensor *bc = b ? ct_contiguous(b) : NULL;
    ct_tensor *y = x2 && (!b || bc) ? ct__gemm_lp(x2, w_as_b(k, W), bc, CT_BF16) : NULL;
    if (!y) return ct_last_error_code();
    int64_t sh[CT_MAX_DIMS];
    memcpy(sh, ct_sizes(x), sizeof(int64_t) * (size_t)ct_ndim(x));
    sh[ct_ndim(x) - 1] = N;
    out[0] = ct_reshape(y, sh, ct_ndim(x));
    if (!out[0]) return ct_last_error_code();
    ct_tensor *sv[4] = {x, W, xb, b};
    return ct_ctx_save_for_backward(ctx, sv, b ? 4 : 3);
}

/* db = float32(sum over the rows of g2 in bf16), the cast copy's gradient
 * converted back, into gin[2] when the bias wants one (both backwards) */
static ct_status bias_grad(ct_tensor *b, ct_tensor *g2, ct_tensor **gin) {
    if (!b || !ct_requires_grad(b)) return CT_OK;
    int64_t d0 = 0;
    gin[2] = ct_to_dtype(ct_sum(g2, &d0, 1, false), CT_F32);
    return gin[2] ? CT_OK : ct_last_error_code();
}

/* The cast formulas with public ops (a graph-building backward) */
static ct_status aclin_backward_graph(const aclin_kind *k, ct_tensor *x, ct_tensor *W, ct_tensor *b, ct_tensor *g,
                                      ct_tensor **gin) {
    int64_t K = ct_size(x, -1), N = ct_size(g, -1);
    ct_tensor *xb = ct_to_dtype(x, CT_BF16), *Wb = ct_to_dtype(W, CT_BF16);
    ct_tensor *g2 = ct_reshape(g, CT_SHAPE(-1, N)), *x2 = ct_reshape(xb, CT_SHAPE(-1, K));
    if (ct_requires_grad(x)) {
        ct_tensor *dx = ct_mm(g2, k->addmm ? ct_t(Wb) : Wb);
        gin[0] = ct_to_dtype(ct_reshape(dx, ct_sizes(x), ct_ndim(x)), ct_get_dtype(x));
        if (!gin[0]) return ct_last_error_code();
    }
    if (ct_requires_grad(W)) {
        gin[1] = ct_to_dtype(k->addmm ? ct_mm(ct_t(x2), g2) : ct_mm(ct_t(g2), x2), CT_F32);
        if (!gin[1]) return ct_last_error_code();
    }
    return bias_grad(b, g2, gin);
}

static ct_status aclin_backward(ct_function_ctx *ctx, ct_tensor *const *gout, ct_tensor **gin) {
    const aclin_kind *k = ct_ctx_user(ctx);
    ct_tensor *x = ct_ctx_saved(ctx, 0), *W = ct_ctx_saved(ctx, 1), *xb = ct_ctx_saved(ctx, 2);
    ct_tensor *b = k->bias ? ct_ctx_saved(ctx, 3) : NULL;
    if (!x || !W || !xb || (k->bias && !b)) return ct_last_error_code();
    ct_tensor *g = gout[0];
    if (!g) return CT_OK; /* no gradient reached the output: none for the inputs */
    if (ct_get_dtype(g) != CT_BF16 && !(g = ct_to_dtype(g, CT_BF16))) return ct_last_error_code();
    if (ct_is_grad_enabled()) return aclin_backward_graph(k, x, W, b, g, gin);
    int64_t K = ct_size(x, -1), N = ct_size(g, -1);
    ct_tensor *g2 = ct_reshape(g, CT_SHAPE(-1, N)), *x2 = ct_reshape(xb, CT_SHAPE(-1, K));
    if (!g2 || !x2) return ct_last_error_code();
    if (ct_requires_grad(x)) { /* dx = g W ([M, N] @ [N, K]) in x's dtype */
        ct_dtype xd = ct_get_dtype(x);
        ct_tensor *dx = ct__gemm_lp(g2, k->addmm ? ct_t(W) : W, NULL, xd == CT_BF16 ? CT_BF16 : CT_F32);
        if (!dx || !(gin[0] = ct_reshape(dx, ct_sizes(x), ct_ndim(x)))) return ct_last_error_code();
    }
    if (ct_requires_grad(W)) { /* addmm: dW = x^T g [K, N]; linear: g^T x [N, K] */
        gin[1] = k->addmm ? ct__gemm_lp(ct_t(x2), g2, NULL, CT_F32) : ct__gemm_lp(ct_t(g2), x2, NULL, CT_F32);
        if (!gin[1]) return ct_last_error_code();
    }
    return bias_grad(b, g2, gin);
}

static const ct_function_def k_aclin_linear = {"AutocastLinear", 1, aclin_forward, aclin_backward, NULL};
static const ct_function_def k_aclin_addmm = {"AutocastAddmm", 1, aclin_forward, aclin_backward, NULL};

static bool on_cpu(ct_tensor *t) { return !t || ct_get_device(t) == CT_CPU; }

bool ct__autocast_linear(ct_tensor **r, bool addmm, ct_tensor *x, ct_tensor *W, ct_tensor *b, double beta,
                         double alpha) {
    *r = NULL;
    if (!x || !W || ct_autocast_get_dtype(CT_CPU) != CT_BF16 || ct__tracer() ||
        !ct__half_native(CT_CPU, CT_OP_gemm_lp, CT_BF16))
        return false;
    if (!on_cpu(x) || !on_cpu(W) || !on_cpu(b) || ct_get_dtype(W) != CT_F32 ||
        (ct_get_dtype(x) != CT_F32 && ct_get_dtype(x) != CT_BF16) || (b && ct_get_dtype(b) != CT_F32))
        return false;
    ct_tensor *fin[3] = {x, W, b};
    if (ct__fw_on(fin, b ? 3 : 2)) return false; /* forward AD: the casts' ops carry tangents */
    int64_t K = ct_ndim(x) >= 1 ? ct_size(x, -1) : -1;
    if (ct_ndim(W) != 2 || ct_ndim(x) < 2 || ct_numel(x) == 0 || ct_numel(W) == 0) return false;
    if (addmm) {
        if (beta != 1.0 || alpha != 1.0 || ct_ndim(x) != 2 || ct_size(W, 0) != K || !b || ct_ndim(b) != 1 ||
            ct_size(b, 0) != ct_size(W, 1))
            return false;
    } else if (ct_size(W, 1) != K || (b && (ct_ndim(b) != 1 || ct_size(b, 0) != ct_size(W, 0)))) {
        return false; /* the ordinary path reports the shape error */
    }
    ct_tensor *ins[3] = {x, W, b};
    ct_scope s = ct_scope_begin();
    ct_tensor *y = NULL;
    if (ct_function_apply(addmm ? &k_aclin_addmm : &k_aclin_linear, ins, b ? 3 : 2,
                          (void *)&k_kinds[addmm][b != NULL], &y))
        y = NULL;
    *r = ct_keep(y);
    ct_scope_end(s);
    return true;
}
