/* elementwise.c (cpu) -- inner loops of the elementwise ops, one per
 * (op, dtype), run by the strided iterator.  Each loop has a contiguous
 * fast path the compiler vectorizes and a strided path.  Kernel dtypes:
 * bool u8 i8 i16 i32 i64 f32 f64 (+ c64 c128 where noted); f16/bf16 are
 * computed in f32 by the driver (src/ops/elementwise.c). */
#include <math.h>

#include "../../ops/iter.h"

static ct_loop_fn g_loops[CT_OP_COUNT][CT_DTYPE_COUNT];

/* ---- loop generators ---------------------------------------------------
 * UNARY(name, T, OT, expr): o = expr(x), x of type T, o of type OT.
 * BINARY(name, T, OT, expr): o = expr(x, y).
 * Params are read from the ct_args `a` (ctx). */
#define UNARY(NAME, T, OT, EXPR)                                                   \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        const ct_args *a = ctx;                                                    \
        (void)a;                                                                   \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T)) {           \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            for (int64_t i = 0; i < n; i++) {                                      \
                T x = xp[i];                                                       \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                T x = *(const T *)(p[1] + i * s[1]);                               \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

#define BINARY(NAME, T, OT, EXPR)                                                  \
    static void NAME(char **p, const int64_t *s, int64_t n, void *ctx) {          \
        const ct_args *a = ctx;                                                    \
        (void)a;                                                                   \
        if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&           \
            s[2] == (int64_t)sizeof(T)) {                                          \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1], *restrict yp = (const T *)p[2];\
            for (int64_t i = 0; i < n; i++) {                                      \
                T x = xp[i], y = yp[i];                                            \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else if (s[0] == (int64_t)sizeof(OT) && s[1] == (int64_t)sizeof(T) &&    \
                   s[2] == 0) {                                                    \
            OT *restrict o = (OT *)p[0];                                           \
            const T *restrict xp = (const T *)p[1];                                \
            const T y = *(const T *)p[2];                                          \
            for (int64_t i = 0; i < n; i++) {                                      \
                T x = xp[i];                                                       \
                o[i] = (OT)(EXPR);                                                 \
            }                                                                      \
        } else {                                                                   \
            for (int64_t i = 0; i < n; i++) {                                      \
                T x = *(const T *)(p[1] + i * s[1]);                               \
                T y = *(const T *)(p[2] + i * s[2]);                               \
                *(OT *)(p[0] + i * s[0]) = (OT)(EXPR);                             \
            }                                                                      \
        }                                                                          \
    }

/* Register a loop for (op, dtype). */
#define REG(OP, DT, FN) g_loops[CT_OP_##OP][DT] = FN

/* Generates one loop per numeric dtype: NAME_<dt>.  EXPR may use x (and y). */
#define UNARY_ALL_INT(NAME, EXPR)                    \
    UNARY(NAME##_u8, uint8_t, uint8_t, EXPR)         \
    UNARY(NAME##_i8, int8_t, int8_t, EXPR)           \
    UNARY(NAME##_i16, int16_t, int16_t, EXPR)        \
    UNARY(NAME##_i32, int32_t, int32_t, EXPR)        \
    UNARY(NAME##_i64, int64_t, int64_t, EXPR)
#define REG_ALL_INT(OP, NAME)                                              \
    REG(OP, CT_U8, NAME##_u8); REG(OP, CT_I8, NAME##_i8);                  \
    REG(OP, CT_I16, NAME##_i16); REG(OP, CT_I32, NAME##_i32);              \
    REG(OP, CT_I64, NAME##_i64)
#define BINARY_ALL_INT(NAME, EXPR)                   \
    BINARY(NAME##_u8, uint8_t, uint8_t, EXPR)        \
    BINARY(NAME##_i8, int8_t, int8_t, EXPR)          \
    BINARY(NAME##_i16, int16_t, int16_t, EXPR)       \
    BINARY(NAME##_i32, int32_t, int32_t, EXPR)       \
    BINARY(NAME##_i64, int64_t, int64_t, EXPR)
/* comparisons etc.: every dtype in, bool out */
#define BINARY_ALL_BOOLOUT(NAME, EXPR)               \
    BINARY(NAME##_b, uint8_t, uint8_t, EXPR)         \
    BINARY(NAME##_u8, uint8_t, uint8_t, EXPR)        \
    BINARY(NAME##_i8, int8_t, uint8_t, EXPR)         \
    BINARY(NAME##_i16, int16_t, uint8_t, EXPR)       \
    BINARY(NAME##_i32, int32_t, uint8_t, EXPR)       \
    BINARY(NAME##_i64, int64_t, uint8_t, EXPR)       \
    BINARY(NAME##_f32, float, uint8_t, EXPR)         \
    BINARY(NAME##_f64, double, uint8_t, EXPR)
#define REG_ALL_BOOLOUT(OP, NAME)                                          \
    REG(OP, CT_BOOL, NAME##_b); REG_ALL_INT(OP, NAME);                     \
    REG(OP, CT_F32, NAME##_f32); REG(OP, CT_F64, NAME##_f64)

/* ---- arithmetic -------------------------------------------------------- */
/* add/sub: alpha in a->f[0] (a->i[0] != 0 when given) */
BINARY(add_f32, float, float, x + (a->i[0] ? (float)a->f[0] * y : y))
BINARY(add_f64, double, double, x + (a->i[0] ? a->f[0] * y : y))
BINARY_ALL_INT(add, x + (a->i[0] ? (int64_t)a->f[0] * y : y))
BINARY(add_b, uint8_t, uint8_t, x || y)
BINARY(sub_f32, float, float, x - (a->i[0] ? (float)a->f[0] * y : y))
BINARY(sub_f64, double, double, x - (a->i[0] ? a->f[0] * y : y))
BINARY_ALL_INT(sub, x - (a->i[0] ? (int64_t)a->f[0] * y : y))
BINARY(mul_f32, float, float, x * y)
BINARY(mul_f64, double, double, x * y)
BINARY_ALL_INT(mul, x * y)
BINARY(mul_b, uint8_t, uint8_t, x && y)
BINARY(div_f32, float, float, x / y)
BINARY(div_f64, double, double, x / y)

UNARY(neg_f32, float, float, -x)
UNARY(neg_f64, double, double, -x)
UNARY_ALL_INT(neg, -x)
UNARY(exp_f32, float, float, expf(x))
UNARY(exp_f64, double, double, exp(x))

/* ---- comparisons ------------------------------------------------------- */
BINARY_ALL_BOOLOUT(eq, x == y)
BINARY_ALL_BOOLOUT(ne, x != y)
BINARY_ALL_BOOLOUT(lt, x < y)
BINARY_ALL_BOOLOUT(le, x <= y)
BINARY_ALL_BOOLOUT(gt, x > y)
BINARY_ALL_BOOLOUT(ge, x >= y)

/* ---- the kernel: pick the loop for (op, input dtype), run it ----------- */
static ct_status k_ew(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a) {
    (void)nout;
    ct_dtype dt = nin > 0 ? in[0]->dtype : out[0]->dtype;
    ct_loop_fn fn = g_loops[a->op][dt];
    if (!fn)
        return ct__error_status(CT_ERR_DTYPE, "%s: not implemented for dtype %s",
                                ct__op_info[a->op].name, ct_dtype_name(dt));
    ct_tensor *ts[CT_ITER_MAX];
    ts[0] = out[0];
    for (int k = 0; k < nin; k++) ts[k + 1] = in[k];
    ct_iter it;
    ct_status st = ct__iter_build(&it, ts, nin + 1);
    if (st) return st;
    ct__iter_run(&it, fn, (void *)a, CT_GRAIN);
    return CT_OK;
}

void ct__cpu_register_elementwise(ct_kernel_fn *t) {
    REG(add, CT_F32, add_f32); REG(add, CT_F64, add_f64); REG_ALL_INT(add, add); REG(add, CT_BOOL, add_b);
    REG(sub, CT_F32, sub_f32); REG(sub, CT_F64, sub_f64); REG_ALL_INT(sub, sub);
    REG(mul, CT_F32, mul_f32); REG(mul, CT_F64, mul_f64); REG_ALL_INT(mul, mul); REG(mul, CT_BOOL, mul_b);
    REG(div, CT_F32, div_f32); REG(div, CT_F64, div_f64);
    REG(neg, CT_F32, neg_f32); REG(neg, CT_F64, neg_f64); REG_ALL_INT(neg, neg);
    REG(exp, CT_F32, exp_f32); REG(exp, CT_F64, exp_f64);
    REG_ALL_BOOLOUT(eq, eq); REG_ALL_BOOLOUT(ne, ne); REG_ALL_BOOLOUT(lt, lt);
    REG_ALL_BOOLOUT(le, le); REG_ALL_BOOLOUT(gt, gt); REG_ALL_BOOLOUT(ge, ge);
    /* every op that has at least one loop gets the generic kernel */
    for (int op = 0; op < CT_OP_COUNT; op++)
        for (int d = 0; d < CT_DTYPE_COUNT; d++)
            if (g_loops[op][d]) { t[op] = k_ew; break; }
}
