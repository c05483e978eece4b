/* dtype.c -- dtype sizes and names, PyTorch's type promotion, and
 * conversion between every pair of dtypes. */
#include <complex.h>
#include <math.h>

#include "tensor_impl.h"

static const size_t k_size[CT_DTYPE_COUNT] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16, 4};
static const char *k_name[CT_DTYPE_COUNT] = {"bool",     "uint8",   "int8",      "int16",
                                             "int32",    "int64",   "float16",   "bfloat16",
                                             "float32",  "float64", "complex64", "complex128",
                                             "complex32"};

size_t ct_dtype_size(ct_dtype dt) { return (unsigned)dt < CT_DTYPE_COUNT ? k_size[dt] : 0; }
const char *ct_dtype_name(ct_dtype dt) { return (unsigned)dt < CT_DTYPE_COUNT ? k_name[dt] : "invalid"; }
bool ct_dtype_is_floating(ct_dtype dt) { return dt == CT_F16 || dt == CT_BF16 || dt == CT_F32 || dt == CT_F64; }
bool ct_dtype_is_complex(ct_dtype dt) { return dt == CT_C64 || dt == CT_C128 || dt == CT_C32; }
bool ct_dtype_is_integral(ct_dtype dt, bool include_bool) {
    return (dt >= CT_U8 && dt <= CT_I64) || (include_bool && dt == CT_BOOL);
}

static _Thread_local ct_dtype tl_default = CT_F32;
static _Thread_local int tl_default_set;
static ct_dtype g_default = CT_F32;
ct_dtype ct_get_default_dtype(void) { return tl_default_set ? tl_default : g_default; }
ct_status ct_set_default_dtype(ct_dtype dt) {
    if (dt != CT_F32 && dt != CT_F64)
        return ct__error_status(CT_ERR_DTYPE, "set_default_dtype: only float32 and float64 are "
                                              "supported, got %s", ct_dtype_name(dt));
    g_default = dt;
    tl_default_set = 0;
    return CT_OK;
}

ct_dtype ct__float_dtype(ct_dtype dt) {
    if (ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt)) return dt;
    return ct_get_default_dtype();
}

/* Category: 0 bool, 1 int, 2 float, 3 complex. */
static int category(ct_dtype d) {
    if (d == CT_BOOL) return 0;
    if (ct_dtype_is_integral(d, false)) return 1;
    if (ct_dtype_is_floating(d)) return 2;
    return 3;
}

static ct_dtype to_complex(ct_dtype d) {
    return d == CT_F64 ? CT_C128 : d == CT_F16 ? CT_C32 : CT_C64;
}
static ct_dtype complex_value(ct_dtype d) {
    return d == CT_C128 ? CT_F64 : d == CT_C32 ? CT_F16 : CT_F32;
}

ct_dtype ct_promote_types(ct_dtype a, ct_dtype b) {
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca == 0) return b;
    if (cb == 0) return a;
    if (ca == 1 && cb == 1) {
        /* u8 with a signed type: the smallest signed type holding both. */
        if (a == CT_U8 || b == CT_U8) {
            ct_dtype o = a == CT_U8 ? b : a;
            return o == CT_I8 ? CT_I16 : o;
        }
        return a > b ? a : b; /* I8 < I16 < I32 < I64 in the enum */
    }
    if (ca == 1) return b;
    if (cb == 1) return a;
    if (ca == 2 && cb == 2) {
        if ((a == CT_F16 && b == CT_BF16) || (a == CT_BF16 && b == CT_F16)) return CT_F32;
        return a > b ? a : b;
    }
    if (ca == 3 && cb == 3) {
        if (a == CT_C128 || b == CT_C128) return CT_C128;
        return CT_C64; /* one is C64, the other C32 */
    }
    /* one complex, one float */
    ct_dtype c = ca == 3 ? a : b, f = ca == 3 ? b : a;
    return to_complex(ct_promote_types(complex_value(c), f));
}

static ct_dtype promote_undef(ct_dtype a, ct_dtype b) {
    if ((int)a < 0) return b;
    if ((int)b < 0) return a;
    return ct_promote_types(a, b);
}

static ct_dtype combine(ct_dtype higher, ct_dtype lower) {
    if ((int)higher >= 0 && ct_dtype_is_complex(higher)) return higher;
    if ((int)lower >= 0 && ct_dtype_is_complex(lower)) {
        if ((int)higher >= 0 && ct_dtype_is_floating(higher)) return to_complex(higher);
        return lower;
    }
    if ((int)higher >= 0 && ct_dtype_is_floating(higher)) return higher;
    if (higher == CT_BOOL || ((int)lower >= 0 && ct_dtype_is_floating(lower)))
        return promote_undef(higher, lower);
    if ((int)higher >= 0) return higher;
    return lower;
}

ct_dtype ct_result_type(ct_tensor *const *ts, int n) {
    ct_dtype dim = (ct_dtype)-1, zero = (ct_dtype)-1, wrapped = (ct_dtype)-1;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        if (!t) continue;
        if (t->flags & CT_TF_WRAPPED) {
            ct_dtype d = t->dtype;
            /* a Python number takes the default dtype of its category */
            if (ct_dtype_is_floating(d)) d = ct_get_default_dtype();
            else if (ct_dtype_is_complex(d)) d = ct_get_default_dtype() == CT_F64 ? CT_C128 : CT_C64;
            else if (d != CT_BOOL) d = CT_I64;
            wrapped = promote_undef(wrapped, d);
        } else if (t->ndim == 0) {
            zero = promote_undef(zero, t->dtype);
        } else {
            dim = promote_undef(dim, t->dtype);
        }
    }
    ct_dtype r = combine(dim, combine(zero, wrapped));
    return (int)r < 0 ? ct_get_default_dtype() : r;
}

/* ---- half precision ----------------------------------------------------
 * Round to nearest even, bit for bit what torch's vectorized copy kernel
 * gives on x86 (tests/test_halfconv.c checks all 65,536 patterns each way
 * in, and f32 values at every kind of rounding boundary out):
 *   f16 -> f32   exact; a NaN keeps its sign and payload and becomes quiet
 *                (F16C's vcvtph2ps)
 *   f32 -> f16   NaN: quiet, sign and the payload's top 9 bits kept
 *                (vcvtps2ph); >= 65520 in magnitude -> inf; results below
 *                2^-14 are subnormal, rounded to the nearest 2^-24
 *   bf16 -> f32  exact (the 16 bits become the top half)
 *   f32 -> bf16  NaN -> 0xffff (torch's AVX2 kernel writes all ones for any
 *                NaN; its scalar path would give 0x7fc0, its AVX512-BF16
 *                one the quieted input: this is what a real tensor gets on
 *                the CPUs we run on); else round to nearest even, overflow
 *                to inf. */
float ct__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) bits = sign;
        else { /* subnormal */
            float f = (float)mant * 0x1p-24f;
            return sign ? -f : f;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0); /* quiet NaN */
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ct__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
    if (ax < 0x38800000u) {                                     /* subnormal or zero in f16 */
        float a;
        memcpy(&a, &ax, 4);
        /* round to nearest even multiple of 2^-24 */
        float q = a * 0x1p24f;
        float r = nearbyintf(q);
        return (uint16_t)(sign | (uint32_t)r);
    }
    uint32_t e = ((ax >> 23) - 112) << 10;
    uint32_t m = ax & 0x7fffffu;
    uint32_t h = e | (m >> 13);
    uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

float ct__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ct__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return 0xffffu; /* NaN, as torch writes it */
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

/* ---- scalar load/store ------------------------------------------------- */
typedef struct { double re, im; int is_int; int64_t i; } ct_val;

static inline ct_val load(const void *p, ct_dtype dt) {
    ct_val v = {0, 0, 0, 0};
    switch (dt) {
    case CT_BOOL: v.is_int = 1; v.i = *(const uint8_t *)p != 0; break;
    case CT_U8: v.is_int = 1; v.i = *(const uint8_t *)p; break;
    case CT_I8: v.is_int = 1; v.i = *(const int8_t *)p; break;
    case CT_I16: v.is_int = 1; v.i = *(const int16_t *)p; break;
    case CT_I32: v.is_int = 1; v.i = *(const int32_t *)p; break;
    case CT_I64: v.is_int = 1; v.i = *(const int64_t *)p; break;
    case CT_F16: v.re = ct__f16_to_f32(*(const uint16_t *)p); break;
    case CT_BF16: v.re = ct__bf16_to_f32(*(const uint16_t *)p); break;
    case CT_F32: v.re = *(const float *)p; break;
    case CT_F64: v.re = *(const double *)p; break;
    case CT_C64: v.re = ((const float *)p)[0]; v.im = ((const float *)p)[1]; break;
    case CT_C128: v.re = ((const double *)p)[0]; v.im = ((const double *)p)[1]; break;
    case CT_C32:
        v.re = ct__f16_to_f32(((const uint16_t *)p)[0]);
        v.im = ct__f16_to_f32(((const uint16_t *)p)[1]);
        break;
    default: break;
    }
    if (v.is_int) v.re = (double)v.i;
    return v;
}

/* float -> int64 the way x86 cvttsd2si does (out of range / nan -> INT64_MIN) */
static inline int64_t f2i(double d) {
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)d;
}

static inline void store(void *p, ct_dtype dt, ct_val v) {
    int64_t i = v.is_int ? v.i : f2i(v.re);
    switch (dt) {
    case CT_BOOL: *(uint8_t *)p = v.is_int ? v.i != 0 : (v.re != 0 || v.im != 0); break;
    case CT_U8: *(uint8_t *)p = (uint8_t)(uint64_t)i; break;
    case CT_I8: *(int8_t *)p = (int8_t)(uint8_t)(uint64_t)i; break;
    case CT_I16: *(int16_t *)p = (int16_t)(uint16_t)(uint64_t)i; break;
    case CT_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)i; break;
    case CT_I64: *(int64_t *)p = i; break;
    case CT_F16: *(uint16_t *)p = ct__f32_to_f16((float)v.re); break;
    case CT_BF16: *(uint16_t *)p = ct__f32_to_bf16((float)v.re); break;
    case CT_F32: *(float *)p = (float)v.re; break;
    case CT_F64: *(double *)p = v.re; break;
    case CT_C64: ((float *)p)[0] = (float)v.re; ((float *)p)[1] = (float)v.im; break;
    case CT_C128: ((double *)p)[0] = v.re; ((double *)p)[1] = v.im; break;
    case CT_C32:
        ((uint16_t *)p)[0] = ct__f32_to_f16((float)v.re);
        ((uint16_t *)p)[1] = ct__f32_to_f16((float)v.im);
        break;
    default: break;
    }
}

double ct__load_f64(const void *p, ct_dtype dt) { return load(p, dt).re; }
int64_t ct__load_i64(const void *p, ct_dtype dt) {
    ct_val v = load(p, dt);
    return v.is_int ? v.i : f2i(v.re);
}
void ct__store_f64(void *p, ct_dtype dt, double d) {
    ct_val v = {d, 0, 0, 0};
    store(p, dt, v);
}
void ct__store_i64(void *p, ct_dtype dt, int64_t i) {
    ct_val v = {(double)i, 0, 1, i};
    store(p, dt, v);
}

#define CONV_LOOP(DT, ST, EXPR)                                                     \
    for (int64_t k = 0; k < n; k++) {                                               \
        const ST s = *(const ST *)((const char *)src + k * sstride);               \
        *(DT *)((char *)dst + k * dstride) = (DT)(EXPR);                           \
    }

void ct__convert(void *dst, ct_dtype ddt, int64_t dstride, const void *src, ct_dtype sdt,
                 int64_t sstride, int64_t n) {
    size_t es = ct_dtype_size(ddt);
    if (ddt == sdt) {
        if (dstride == (int64_t)es && sstride == (int64_t)es) {
            memcpy(dst, src, (size_t)n * es);
            return;
        }
        /* strided: one typed load/store per element (a memcpy call each
         * would dominate transposing copies of 2- and 4-byte elements) */
        if (es == 2) { CONV_LOOP(uint16_t, uint16_t, s) return; }
        if (es == 4) { CONV_LOOP(uint32_t, uint32_t, s) return; }
        if (es == 8) { CONV_LOOP(uint64_t, uint64_t, s) return; }
        if (es == 1) { CONV_LOOP(uint8_t, uint8_t, s) return; }
        for (int64_t k = 0; k < n; k++)
            memcpy((char *)dst + k * dstride, (const char *)src + k * sstride, es);
        return;
    }
    /* fast paths for the common float conversions */
    if (ddt == CT_F32 && sdt == CT_F64) { CONV_LOOP(float, double, s) return; }
    if (ddt == CT_F64 && sdt == CT_F32) { CONV_LOOP(double, float, s) return; }
    if (ddt == CT_F32 && sdt == CT_I64) { CONV_LOOP(float, int64_t, s) return; }
    if (ddt == CT_F32 && sdt == CT_I32) { CONV_LOOP(float, int32_t, s) return; }
    if (ddt == CT_F32 && sdt == CT_U8) { CONV_LOOP(float, uint8_t, s) return; }
    if (ddt == CT_F32 && sdt == CT_BOOL) { CONV_LOOP(float, uint8_t, s) return; }
    if (ddt == CT_F64 && sdt == CT_I64) { CONV_LOOP(double, int64_t, s) return; }
    if (ddt == CT_I64 && sdt == CT_I32) { CONV_LOOP(int64_t, int32_t, s) return; }
    if (ddt == CT_I32 && sdt == CT_I64) { CONV_LOOP(int32_t, int64_t, (int32_t)(uint32_t)(uint64_t)s) return; }
    if (ddt == CT_F32 && sdt == CT_F16) { CONV_LOOP(float, uint16_t, ct__f16_to_f32(s)) return; }
    if (ddt == CT_F32 && sdt == CT_BF16) { CONV_LOOP(float, uint16_t, ct__bf16_to_f32(s)) return; }
    if (ddt == CT_F16 && sdt == CT_F32) { CONV_LOOP(uint16_t, float, ct__f32_to_f16(s)) return; }
    if (ddt == CT_BF16 && sdt == CT_F32) { CONV_LOOP(uint16_t, float, ct__f32_to_bf16(s)) return; }
    for (int64_t k = 0; k < n; k++)
        store((char *)dst + k * dstride, ddt, load((const char *)src + k * sstride, sdt));
}
