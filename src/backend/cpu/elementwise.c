/* elementwise.c (cpu) -- inner loops of the elementwise ops, one per
 * (op, dtype), run by the strided iterator.  Kernel dtypes: bool u8 i8 i16
 * i32 i64 f32 f64; f16/bf16 operands are loaded into f32 blocks, run
 * through the f32 loop and stored back (k_ew_half), never copied whole.
 *
 * The scalar loops are generated from src/ops/ew_math.def, the one list of
 * elementwise math (the renderer of src/ops/render.c turns the same text
 * into the C expressions the compiler emits): each line's expression is
 * pasted into a loop template (UNARY/BINARY/TERNARY/WHERE below) with a
 * contiguous fast path the compiler vectorizes and a strided path.  Math
 * functions come from <tgmath.h>: exp(x) on a float is expf, so one
 * expression serves both float widths; inside a loop `scalar_t` is the
 * compute type, and the helpers the expressions call are ew_scalar.h's.
 * Some f32 loops are then replaced by the CPU's vectorized ones (ew_vec.h:
 * SLEEF-style polynomials, AVX2/AVX-512 at run time); the generated loop
 * stays their reference (ct__cpu_ew_scalar_loop, tests/test_ew_render.c). */
#include <float.h>
#include <tgmath.h>

#include "../../ops/ew.h"
#include "../../ops/ew_scalar.h"
#include "../../ops/iter.h"
#include "ew_vec.h"
#include "vmath.h"
#include <xmmintrin.h>

/* generic integer expressions compare unsigned values with 0 */
#pragma GCC diagnostic ignored "-Wtype-limits"

static ct_loop_fn g_loops[CT_OP_COUNT][CT_DTYPE_COUNT];
/* the loops generated from ew_math.def (g_loops before the vector ones) */
static ct_loop_fn g_scalar[CT_OP_COUNT][CT_DTYPE_COUNT];
/* per-op grain: elements per thread before a loop goes parallel */
static int64_t g_grain[CT_OP_COUNT];
/* the vectorized f32 loops for this CPU (ew_vec.h), set at registration */
static const ct_ew_vtab *g_vt;

/* ---- the scalar loops, generated from ew_math.def ----------------------
 * UNARY(name, T, OT, expr): o = (OT)(expr(x)), x of type T.
 * BINARY(name, T, OT, expr): o = expr(x, y).  TERNARY: expr(x, y, z).
 * WHERE: expr(x, y, z) with x the condition byte.
 * Params are the op's ct_args (ctx), family ew (params_ew.def).  The loop
 * reads them from a local copy, ew.<field>, that no store through the output
 * can change, so the compiler keeps them in registers and hoists the tests on
 * them out of the loop (a read through the ct_params union, a->p.ew.<field>,
 * may alias a store of any of the union's member types, double or int64). */
#define UNARY(NAME, T, OT, EXPR)                                                   \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {           \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

#define BINARY(NAME, T, OT, EXPR)                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&           \
            s[2] == (int64_t)sizeof(T)) {                                          \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];\
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i], y = yp[i];                                     \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&    \
                   s[2] == 0) {                                                    \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            const scalar_t y = *(const T *)p[2];                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == 0 &&                     \
                   s[2] == (int64_t)sizeof(T)) {                                   \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict yp = (const T *)p[2];                                \
            const scalar_t x = *(const T *)p[1];                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t y = yp[i];                                                \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                scalar_t y = *(const T *)(p[2] + i * s[2]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

#define TERNARY(NAME, T, OT, EXPR)                                                 \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&           \
            s[2] == (int64_t)sizeof(T) && s[3] == (int64_t)sizeof(T)) {            \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];\
            const T *restrict zp = (const T *)p[3];                                \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = xp[i], y = yp[i], z = zp[i];                          \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                scalar_t x = *(const T *)(p[1] + i * s[1]);                        \
                scalar_t y = *(const T *)(p[2] + i * s[2]);                        \
                scalar_t z = *(const T *)(p[3] + i * s[3]);                        \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

/* where: the condition (operand 1) stays a bool byte; the values have the
 * compute dtype and are read where the expression reads them, so only the
 * chosen one is loaded (y and z stand for *ew_yp and *ew_zp while the WHERE
 * lines are generated, below) */
#define WHERE(NAME, T, OT, EXPR)                                                   \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        typedef T scalar_t;                                                        \
        const ct_p_ew ew = ((const ct_args *)ctx)->p.ew;                          \
        (void)ew;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                          \
            const uint8_t x = *(const uint8_t *)(p[1] + i * s[1]);                 \
            const scalar_t *ew_yp = (const T *)(p[2] + i * s[2]);                  \
            const scalar_t *ew_zp = (const T *)(p[3] + i * s[3]);                  \
            *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                                 \
        }                                                                          \
    }

/* A line CT_EW(op, kind, class, out, expr) of ew_math.def becomes one loop
 * ew_<op>_<dtype> per dtype of its class (F f32 f64, I u8 i8 i16 i32 i64,
 * B bool as uint8_t, A all eight), output type OT = T (SAME) or uint8_t
 * (BOOL). */
#define EW_OT_SAME(T) T
#define EW_OT_BOOL(T) uint8_t
#define EW_GEN_F(K, OP, OUT, EXPR)                        \
    K(ew_##OP##_f32, float, EW_OT_##OUT(float), EXPR)     \
    K(ew_##OP##_f64, double, EW_OT_##OUT(double), EXPR)
#define EW_GEN_I(K, OP, OUT, EXPR)                        \
    K(ew_##OP##_u8, uint8_t, EW_OT_##OUT(uint8_t), EXPR)  \
    K(ew_##OP##_i8, int8_t, EW_OT_##OUT(int8_t), EXPR)    \
    K(ew_##OP##_i16, int16_t, EW_OT_##OUT(int16_t), EXPR) \
    K(ew_##OP##_i32, int32_t, EW_OT_##OUT(int32_t), EXPR) \
    K(ew_##OP##_i64, int64_t, EW_OT_##OUT(int64_t), EXPR)
#define EW_GEN_B(K, OP, OUT, EXPR) K(ew_##OP##_b, uint8_t, EW_OT_##OUT(uint8_t), EXPR)
#define EW_GEN_A(K, OP, OUT, EXPR) \
    EW_GEN_B(K, OP, OUT, EXPR) EW_GEN_I(K, OP, OUT, EXPR) EW_GEN_F(K, OP, OUT, EXPR)
#define EW_SKIP(NAME, T, OT, EXPR)
/* pass 1: the UNARY, BINARY and TERNARY lines */
#define EW_P1_UNARY UNARY
#define EW_P1_BINARY BINARY
#define EW_P1_TERNARY TERNARY
#define EW_P1_WHERE EW_SKIP
#define CT_EW(OP, KIND, CLASS, OUT, EXPR) EW_GEN_##CLASS(EW_P1_##KIND, OP, OUT, EXPR)
#include "../../ops/ew_math.def"
#undef CT_EW
/* pass 2: the WHERE lines, with y and z read through their pointers */
#define EW_P2_UNARY EW_SKIP
#define EW_P2_BINARY EW_SKIP
#define EW_P2_TERNARY EW_SKIP
#define EW_P2_WHERE WHERE
#define y (*ew_yp)
#define z (*ew_zp)
#define CT_EW(OP, KIND, CLASS, OUT, EXPR) EW_GEN_##CLASS(EW_P2_##KIND, OP, OUT, EXPR)
#include "../../ops/ew_math.def"
#undef CT_EW
#undef y
#undef z

/* The generated loops by (op, dtype): the scalar reference of every
 * elementwise kernel (ew.h: ct__cpu_ew_scalar_loop). */
#define EW_SET(OP, DT, FN) g_scalar[CT_OP_##OP][DT] = FN;
#define EW_REG_F(OP) EW_SET(OP, CT_F32, ew_##OP##_f32) EW_SET(OP, CT_F64, ew_##OP##_f64)
#define EW_REG_I(OP)                                                               \
    EW_SET(OP, CT_U8, ew_##OP##_u8) EW_SET(OP, CT_I8, ew_##OP##_i8)                \
    EW_SET(OP, CT_I16, ew_##OP##_i16) EW_SET(OP, CT_I32, ew_##OP##_i32)            \
    EW_SET(OP, CT_I64, ew_##OP##_i64)
#define EW_REG_B(OP) EW_SET(OP, CT_BOOL, ew_##OP##_b)
#define EW_REG_A(OP) EW_REG_B(OP) EW_REG_I(OP) EW_REG_F(OP)
static void scalar_loops_init(void) {
#define CT_EW(OP, KIND, CLASS, OUT, EXPR) EW_REG_##CLASS(OP)
#include "../../ops/ew_math.def"
#undef CT_EW
}

/* where f32: the vectorized select for unit/zero strides */
static void v_where_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    if (s[0] == 4 && (s[1] == 1 || s[1] == 0) && (s[2] == 4 || s[2] == 0) &&
        (s[3] == 4 || s[3] == 0)) {
        g_vt->where((float *)p[0], (const uint8_t *)p[1], (const float *)p[2],
                    (const float *)p[3], n, s[1], s[2] / 4, s[3] / 4);
        return;
    }
    ew_where_f32(p, s, n, ctx);
}
/* ---- f32 loops through the vectorized tables (ew_vec.h) ----------------
 * Contiguous operands run in one call; strided ones are gathered into
 * blocks and run through the same vector loop, so an element's result does
 * not depend on the layout or on where a thread's chunk starts. */
#define VBLK 512
/* Outputs far larger than the last-level cache (a thread's contiguous
 * chunk of >= 4M floats, 16 MiB) are computed VBLK at a time into an L1
 * buffer and written with non-temporal stores: the line is not read first
 * (no read-for-ownership) and the cache is not flushed by data the next op
 * would have to fetch from memory anyway -- a third less memory traffic for
 * a streaming op.  Same loop, same bits. */
#define NT_MIN CT_STREAM_MIN
static void nt_store(float *o, const float *b, int64_t m) { /* o 16-byte aligned */
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) _mm_stream_ps(o + j, _mm_load_ps(b + j));
    for (; j < m; j++) o[j] = b[j];
}
static int64_t nt_head(const float *o) { /* elements before o reaches 16-byte alignment */
    return (int64_t)((16 - ((uintptr_t)o & 15)) & 15) / 4;
}
static void vunary_nt(ct_vu_fn f, float *o, const float *x, int64_t n) {
    _Alignas(64) float bo[VBLK];
    int64_t h = ((uintptr_t)o & 3) ? n : nt_head(o);
    f(o, x, h);
    for (int64_t i = h; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        f(bo, x + i, m);
        nt_store(o + i, bo, m);
    }
    _mm_sfence();
}
static void vbinary_nt(ct_vb_fn f, float *o, const float *x, const float *y, int64_t n, int64_t sx,
                       int64_t sy) {
    _Alignas(64) float bo[VBLK];
    int64_t h = ((uintptr_t)o & 3) ? n : nt_head(o);
    f(o, x, y, h, sx, sy);
    for (int64_t i = h; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        f(bo, x + i * sx, y + i * sy, m, sx, sy);
        nt_store(o + i, bo, m);
    }
    _mm_sfence();
}
static void vunary(ct_vu_fn f, char **p, const int64_t *s, int64_t n) {
    if (s[0] == 4 && s[1] == 4) {
        if (n >= NT_MIN && ct__stream_stores()) vunary_nt(f, (float *)p[0], (const float *)p[1], n);
        else f((float *)p[0], (const float *)p[1], n);
        return;
    }
    float bx[VBLK], bo[VBLK];
    for (int64_t i = 0; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        for (int64_t j = 0; j < m; j++) bx[j] = *(const float *)(p[1] + (i + j) * s[1]);
        f(bo, bx, m);
        for (int64_t j = 0; j < m; j++) *(float *)(p[0] + (i + j) * s[0]) = bo[j];
    }
}
/* o = f(x, y) with x, y contiguous or broadcast scalars; else gathered */
static void vbinary(ct_vb_fn f, char **p, const int64_t *s, int64_t n) {
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        if (n >= NT_MIN && ct__stream_stores())
            vbinary_nt(f, (float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4, s[2] / 4);
        else f((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4, s[2] / 4);
        return;
    }
    float bx[VBLK], by[VBLK], bo[VBLK];
    for (int64_t i = 0; i < n; i += VBLK) {
        int64_t m = n - i < VBLK ? n - i : VBLK;
        for (int64_t j = 0; j < m; j++) {
            bx[j] = *(const float *)(p[1] + (i + j) * s[1]);
            by[j] = *(const float *)(p[2] + (i + j) * s[2]);
        }
        f(bo, bx, by, m, 1, 1);
        for (int64_t j = 0; j < m; j++) *(float *)(p[0] + (i + j) * s[0]) = bo[j];
    }
}
#define VUN(NAME, IDX)                                                             \
    static void v_##NAME##_f32(char **p, const int64_t *s, int64_t n, void *ctx) { \
        (void)ctx;                                                                 \
        vunary(g_vt->unary[IDX], p, s, n);                                         \
    }
VUN(exp, CT_VU_EXP)
VUN(log, CT_VU_LOG)
VUN(tanh, CT_VU_TANH)
VUN(sigmoid, CT_VU_SIGMOID)
VUN(silu, CT_VU_SILU)
VUN(erf, CT_VU_ERF)
VUN(relu, CT_VU_RELU)
VUN(expm1, CT_VU_EXPM1)
VUN(log1p, CT_VU_LOG1P)
VUN(log2, CT_VU_LOG2)
VUN(sin, CT_VU_SIN)
VUN(cos, CT_VU_COS)
VUN(sqrt, CT_VU_SQRT)
VUN(rsqrt, CT_VU_RSQRT)
VUN(reciprocal, CT_VU_RECIPROCAL)
VUN(neg, CT_VU_NEG)
VUN(abs, CT_VU_ABS)
VUN(square, CT_VU_SQUARE)
static void v_gelu_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    vunary(g_vt->unary[a->p.ew.approximate ? CT_VU_GELU_TANH : CT_VU_GELU], p, s, n);
}
/* add/sub: x + alpha * y when has_alpha */
static void v_add_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    if (!a->p.ew.has_alpha) { vbinary(g_vt->binary[CT_VB_ADD], p, s, n); return; }
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        g_vt->add_alpha((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4,
                        s[2] / 4, (float)a->p.ew.alpha);
        return;
    }
    ew_add_f32(p, s, n, ctx);
}
static void v_sub_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    const ct_args *a = ctx;
    if (!a->p.ew.has_alpha) { vbinary(g_vt->binary[CT_VB_SUB], p, s, n); return; }
    if (s[0] == 4 && (s[1] == 4 || s[1] == 0) && (s[2] == 4 || s[2] == 0)) {
        g_vt->add_alpha((float *)p[0], (const float *)p[1], (const float *)p[2], n, s[1] / 4,
                        s[2] / 4, -(float)a->p.ew.alpha);
        return;
    }
    ew_sub_f32(p, s, n, ctx);
}
#define VBIN(NAME, IDX)                                                            \
    static void v_##NAME##_f32(char **p, const int64_t *s, int64_t n, void *ctx) { \
        (void)ctx;                                                                 \
        vbinary(g_vt->binary[IDX], p, s, n);                                       \
    }
VBIN(mul, CT_VB_MUL)
VBIN(div, CT_VB_DIV)

/* ---- fused backward kernels (the op ew_grad; ew.h: ct__ew_fused_grad) --- */
static void grad_f64(int kind, double *o, const double *gp, const double *tp, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double g = gp[i], t = tp[i], r;
        switch (kind) {
        case CT_EWG_RELU: r = t <= 0 ? 0.0 : g; break;
        case CT_EWG_SIGMOID: r = g * (1.0 - t) * t; break;
        case CT_EWG_TANH: r = g * (1.0 - t * t); break;
        case CT_EWG_GELU: {
            double cdf = 0.5 * (1.0 + erf(t * 0.70710678118654752440));
            double pdf = 0.39894228040143267794 * exp(t * t * -0.5);
            r = g * (cdf + t * pdf);
            break;
        }
        case CT_EWG_GELU_TANH: {
            const double kb = 0.79788456080286535588, kk = 0.044715;
            double x2 = t * t, th = tanh(kb * (t + kk * x2 * t));
            r = g * (0.5 * (1.0 + th) + 0.5 * t * ((1.0 - th * th) * kb * (1.0 + 3.0 * kk * x2)));
            break;
        }
        default: { /* CT_EWG_SILU */
            double sg = 1.0 / (1.0 + exp(-t));
            r = g * sg * (1.0 + t * (1.0 - sg));
        }
        }
        o[i] = r;
    }
}
static const int g_kind_vg[CT_EWG_COUNT] = {
    [CT_EWG_RELU] = CT_VG_RELU, [CT_EWG_SIGMOID] = CT_VG_SIGMOID, [CT_EWG_TANH] = CT_VG_TANH,
    [CT_EWG_GELU] = CT_VG_GELU, [CT_EWG_GELU_TANH] = CT_VG_GELU_TANH, [CT_EWG_SILU] = CT_VG_SILU};
static void grad_loop_f32(char **p, const int64_t *s, int64_t n, void *ctx) {
    char *q[3] = {p[0], p[1], p[2]};
    vbinary(g_vt->grad[g_kind_vg[*(const int *)ctx]], q, s, n);
}
static void grad_loop_f64(char **p, const int64_t *s, int64_t n, void *ctx) {
    int kind = *(const int *)ctx;
    if (s[0] == 8 && s[1] == 8 && s[2] == 8) {
        grad_f64(kind, (double *)p[0], (const double *)p[1], (const double *)p[2], n);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        grad_f64(kind, (double *)(p[0] + i * s[0]), (const double *)(p[1] + i * s[1]),
                 (const double *)(p[2] + i * s[2]), 1);
}

/* the f32 loop for half_loop, which hands it the op's args as its context */
static void grad_loop_f32_args(char **p, const int64_t *s, int64_t n, void *ctx) {
    int kind = (int)((const ct_args *)ctx)->p.ew_grad.kind;
    grad_loop_f32(p, s, n, &kind);
}
static ct_status k_ew_half_with(ct_tensor *const *out, ct_tensor *const *in, int nin, const ct_args *a,
                                ct_dtype hdt, ct_loop_fn f32_loop);

/* ew_grad: out[0] = f(g, t); in: g, t (out's shape and dtype, f32/f64, or
 * f16/bf16: loaded into f32 blocks, computed by the f32 loop, rounded once
 * at the store, as torch's Vectorized<BFloat16> activation backwards);
 * a->p.ew_grad.kind */
static ct_status k_ew_grad(ct_tensor *const *out_, int nout, ct_tensor *const *in, int nin,
                           const ct_args *a) {
    (void)nout;
    int kind = (int)a->p.ew_grad.kind;
    ct_tensor *out = out_[0], *g = in[0], *t = in[1];
    if ((out->dtype == CT_F16 || out->dtype == CT_BF16) && g->dtype == out->dtype && t->dtype == out->dtype &&
        kind >= 0 && kind < CT_EWG_COUNT)
        return k_ew_half_with(out_, in, nin, a, out->dtype, grad_loop_f32_args);
    if (out->dtype != CT_F32 && out->dtype != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "ew_grad: not implemented for %s", ct_dtype_name(out->dtype));
    if (g->dtype != out->dtype || t->dtype != out->dtype)
        return ct__error_status(CT_ERR_DTYPE, "ew_grad: expected %s inputs, got %s and %s",
                                ct_dtype_name(out->dtype), ct_dtype_name(g->dtype), ct_dtype_name(t->dtype));
    if (kind < 0 || kind >= CT_EWG_COUNT)
        return ct__error_status(CT_ERR_ARG, "ew_grad: bad kind %d", kind);
    ct_tensor *ts[3] = {out, g, t};
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, 3);
    if (st) return st;
    int64_t grain = kind == CT_EWG_RELU || kind == CT_EWG_SIGMOID || kind == CT_EWG_TANH
                        ? CT_GRAIN : CT_GRAIN / 8;
    ct__iter_run(&it, out->dtype == CT_F32 ? grad_loop_f32 : grad_loop_f64, &kind, grain);
    return CT_OK;
}

/* ---- the kernel: pick the loop for (op, input dtype), run it ----------- */
typedef struct { int zero; } zscan_ctx;
#define ZSCAN(NAME, T)                                                             \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        zscan_ctx *c = ctx;                                                        \
        for (int64_t i = 0; i < n; i++)                                            \
            if (*(const T *)(p[0] + i * s[0]) == 0) c->zero = 1;                   \
    }
ZSCAN(zscan_1, uint8_t)
ZSCAN(zscan_2, int16_t)
ZSCAN(zscan_4, int32_t)
ZSCAN(zscan_8, int64_t)

/* true when integer tensor t has a zero element */
static int has_zero(ct_tensor *t) {
    ct_iter it;
    ct_tensor *ts[1] = {t};
    if (ct__iter_build(&it, ts, 1)) return 0;
    zscan_ctx c = {0};
    size_t es = ct_dtype_size(t->dtype);
    ct_loop_fn fn = es == 1 ? zscan_1 : es == 2 ? zscan_2 : es == 4 ? zscan_4 : zscan_8;
    ct__iter_run(&it, fn, &c, 0);
    return c.zero;
}

/* ---- f16/bf16: loaded and stored by the kernel, computed in f32 ---------
 * The f32 loop of the op runs on blocks of HBLK elements: each f16/bf16
 * operand is converted into an L1 buffer (a broadcast one once, a
 * contiguous one with the vector conversions), f32 operands (wrapped
 * numbers) are passed as they are, and an f16/bf16 output is rounded back
 * from its buffer.  Each element is computed exactly as on the converting
 * path (f32 math, one rounding at the store), so results equal torch's
 * Vectorized<BFloat16> ones, without a whole-tensor copy either way. */
#define HBLK 256
typedef struct {
    const ct_args *a;
    ct_loop_fn f;               /* the op's f32 loop */
    int nt;                     /* operands, output first */
    ct_dtype dt[CT_ITER_MAX];
} half_ctx;

static void half_load(float *o, const char *p, int64_t s, ct_dtype dt, int64_t m) {
    if (s == 2) {
        if (dt == CT_BF16) g_vt->bf16_to_f32(o, (const uint16_t *)p, m);
        else g_vt->f16_to_f32(o, (const uint16_t *)p, m);
    } else if (dt == CT_BF16) {
        for (int64_t j = 0; j < m; j++) o[j] = ct__bf16_to_f32(*(const uint16_t *)(p + j * s));
    } else {
        for (int64_t j = 0; j < m; j++) o[j] = ct__f16_to_f32(*(const uint16_t *)(p + j * s));
    }
}

static void half_loop(char **p, const int64_t *s, int64_t n, void *vctx) {
    const half_ctx *c = vctx;
    _Alignas(64) float buf[CT_ITER_MAX][HBLK];
    char *q[CT_ITER_MAX];
    int64_t qs[CT_ITER_MAX];
    for (int k = 1; k < c->nt; k++) /* broadcast half operands: once */
        if (s[k] == 0 && (c->dt[k] == CT_F16 || c->dt[k] == CT_BF16)) half_load(buf[k], p[k], 0, c->dt[k], 1);
    for (int64_t i = 0; i < n; i += HBLK) {
        int64_t m = n - i < HBLK ? n - i : HBLK;
        for (int k = 0; k < c->nt; k++) {
            ct_dtype d = c->dt[k];
            if (d == CT_F16 || d == CT_BF16) {
                q[k] = (char *)buf[k];
                qs[k] = (k > 0 && s[k] == 0) ? 0 : 4;
                if (k > 0 && s[k] != 0) half_load(buf[k], p[k] + i * s[k], s[k], d, m);
            } else {
                q[k] = p[k] + i * s[k];
                qs[k] = s[k];
            }
        }
        c->f(q, qs, m, (void *)c->a);
        ct_dtype d = c->dt[0];
        if (d == CT_F16 || d == CT_BF16) {
            char *o = p[0] + i * s[0];
            if (s[0] == 2) {
                if (d == CT_BF16) g_vt->f32_to_bf16((uint16_t *)o, buf[0], m);
                else g_vt->f32_to_f16((uint16_t *)o, buf[0], m);
            } else if (d == CT_BF16) {
                for (int64_t j = 0; j < m; j++) *(uint16_t *)(o + j * s[0]) = ct__f32_to_bf16(buf[0][j]);
            } else {
                for (int64_t j = 0; j < m; j++) *(uint16_t *)(o + j * s[0]) = ct__f32_to_f16(buf[0][j]);
            }
        }
    }
}

/* the half path of k_ew: operands f16/bf16 (one of them) or f32; where's
 * condition bool; the output f16/bf16 or (comparisons) bool */
static ct_status k_ew_half_with(ct_tensor *const *out, ct_tensor *const *in, int nin, const ct_args *a,
                                ct_dtype hdt, ct_loop_fn f32_loop) {
    const char *name = ct__op_info[a->op].name;
    half_ctx c = {.a = a, .f = f32_loop, .nt = nin + 1};
    if (!c.f)
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for dtype %s", name, ct_dtype_name(hdt));
    ct_tensor *ts[CT_ITER_MAX];
    ts[0] = out[0];
    for (int k = 0; k < nin; k++) ts[k + 1] = in[k];
    for (int k = 0; k <= nin; k++) {
        ct_dtype d = ts[k]->dtype;
        int bool_ok = (k == 1 && a->op == CT_OP_where) || k == 0;
        if (!(d == hdt || d == CT_F32 || (bool_ok && d == CT_BOOL)))
            return ct__error_status(CT_ERR_DTYPE, "%s: kernel expects %s or float32 operands, got %s",
                                    name, ct_dtype_name(hdt), ct_dtype_name(d));
        c.dt[k] = d;
    }
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, nin + 1);
    if (st) return st;
    ct__iter_run(&it, half_loop, &c, a->op == CT_OP_ew_grad ? CT_GRAIN / 8 : g_grain[a->op]);
    return CT_OK;
}
static ct_status k_ew_half(ct_tensor *const *out, ct_tensor *const *in, int nin, const ct_args *a,
                           ct_dtype hdt) {
    return k_ew_half_with(out, in, nin, a, hdt, g_loops[a->op][CT_F32]);
}

static ct_status k_ew(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a) {
    (void)nout;
    for (int k = 0; k <= nin; k++) {
        ct_dtype d = k == 0 ? out[0]->dtype : in[k - 1]->dtype;
        if (d == CT_F16 || d == CT_BF16) return k_ew_half(out, in, nin, a, d);
    }
    ct_dtype dt = nin > 0 ? in[nin - 1]->dtype : out[0]->dtype;
    ct_loop_fn fn = g_loops[a->op][dt];
    if (!fn)
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for dtype %s",
                                ct__op_info[a->op].name, ct_dtype_name(dt));
    for (int k = a->op == CT_OP_where ? 1 : 0; k < nin; k++)
        if (in[k]->dtype != dt)
            return ct__error_status(CT_ERR_DTYPE, "%s: kernel expects %s operands, got %s",
                                    ct__op_info[a->op].name, ct_dtype_name(dt),
                                    ct_dtype_name(in[k]->dtype));
    /* integer division by zero is an error (PyTorch: ZeroDivisionError) */
    if (nin == 2 && ct_dtype_is_integral(dt, true) &&
        (a->op == CT_OP_div_trunc || a->op == CT_OP_div_floor || a->op == CT_OP_remainder ||
         a->op == CT_OP_fmod) &&
        has_zero(in[1]))
        return ct__error_status(CT_ERR_ARG, "%s: ZeroDivisionError (integer division by zero)",
                                ct__op_info[a->op].name);
    ct_tensor *ts[CT_ITER_MAX];
    ts[0] = out[0];
    for (int k = 0; k < nin; k++) ts[k + 1] = in[k];
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, nin + 1);
    if (st) return st;
    ct__iter_run(&it, fn, (void *)a, g_grain[a->op]);
    return CT_OK;
}

ct_loop_fn ct__cpu_ew_scalar_loop(ct_op op, ct_dtype dt) {
    if ((unsigned)op >= CT_OP_COUNT || (unsigned)dt >= CT_DTYPE_COUNT) return NULL;
    ct__backends_init();
    return g_scalar[op][dt];
}
ct_loop_fn ct__cpu_ew_loop(ct_op op, ct_dtype dt) {
    if ((unsigned)op >= CT_OP_COUNT || (unsigned)dt >= CT_DTYPE_COUNT) return NULL;
    ct__backends_init();
    return g_loops[op][dt];
}

#define REG(OP, DT, FN) g_loops[CT_OP_##OP][DT] = FN
void ct__cpu_register_elementwise(ct_kernel_fn *t) {
    /* every (op, dtype) of ew_math.def: its generated loop */
    scalar_loops_init();
    memcpy(g_loops, g_scalar, sizeof g_loops);
    /* f32 through the vectorized loops of this CPU's level */
    g_vt = ct__ew_vtab();
    REG(exp, CT_F32, v_exp_f32); REG(log, CT_F32, v_log_f32); REG(tanh, CT_F32, v_tanh_f32);
    REG(sigmoid, CT_F32, v_sigmoid_f32); REG(silu, CT_F32, v_silu_f32);
    REG(gelu, CT_F32, v_gelu_f32); REG(erf, CT_F32, v_erf_f32); REG(relu, CT_F32, v_relu_f32);
    REG(expm1, CT_F32, v_expm1_f32); REG(log1p, CT_F32, v_log1p_f32);
    REG(log2, CT_F32, v_log2_f32); REG(sin, CT_F32, v_sin_f32); REG(cos, CT_F32, v_cos_f32);
    REG(sqrt, CT_F32, v_sqrt_f32); REG(rsqrt, CT_F32, v_rsqrt_f32);
    REG(reciprocal, CT_F32, v_reciprocal_f32); REG(neg, CT_F32, v_neg_f32);
    REG(abs, CT_F32, v_abs_f32); REG(square, CT_F32, v_square_f32);
    REG(add, CT_F32, v_add_f32); REG(sub, CT_F32, v_sub_f32);
    REG(mul, CT_F32, v_mul_f32); REG(div, CT_F32, v_div_f32);
    REG(where, CT_F32, v_where_f32);
    /* grains: memory-bound ops go parallel only for large tensors (a
     * parallel region costs microseconds); transcendental ones sooner */
    for (int op = 0; op < CT_OP_COUNT; op++) g_grain[op] = CT_GRAIN;
    {
        static const ct_op heavy[] = {
            CT_OP_exp, CT_OP_exp2, CT_OP_expm1, CT_OP_log, CT_OP_log2, CT_OP_log10, CT_OP_log1p,
            CT_OP_sin, CT_OP_cos, CT_OP_tan, CT_OP_asin, CT_OP_acos, CT_OP_atan, CT_OP_sinh,
            CT_OP_cosh, CT_OP_tanh, CT_OP_asinh, CT_OP_acosh, CT_OP_atanh, CT_OP_sigmoid,
            CT_OP_gelu, CT_OP_silu, CT_OP_mish, CT_OP_softplus, CT_OP_elu, CT_OP_celu,
            CT_OP_selu, CT_OP_erf, CT_OP_erfc, CT_OP_erfinv, CT_OP_lgamma, CT_OP_digamma,
            CT_OP_polygamma, CT_OP_pow, CT_OP_pow_scalar, CT_OP_rpow_scalar, CT_OP_atan2,
            CT_OP_logit, CT_OP_fmod, CT_OP_remainder, CT_OP_div_floor, CT_OP_xlogy, CT_OP_hypot};
        for (size_t k = 0; k < sizeof heavy / sizeof heavy[0]; k++) g_grain[heavy[k]] = CT_GRAIN / 8;
    }
    /* every op that has at least one loop gets the generic kernel; one with
     * an f32 loop computes f16/bf16 itself (k_ew_half) */
    for (int op = 0; op < CT_OP_COUNT; op++) {
        for (int d = 0; d < CT_DTYPE_COUNT; d++)
            if (g_loops[op][d]) { t[op] = k_ew; break; }
        if (g_loops[op][CT_F32]) ct__kernel_half[CT_CPU][op] = CT_HALF_F16 | CT_HALF_BF16;
    }
    t[CT_OP_ew_grad] = k_ew_grad;
    ct__kernel_half[CT_CPU][CT_OP_ew_grad] = CT_HALF_F16 | CT_HALF_BF16;
}
