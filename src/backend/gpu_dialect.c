/* gpu_dialect.c -- OpenCL C kernel text as CUDA C++ (see gpu_dialect.h),
 * and the recording of the kernel text the GPU backends generate. */
#include "gpu_dialect.h"

#include "../core/tensor_impl.h"
#include "../ops/op_table.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char ct__cuda_dialect_prelude[] =
    "/* ---- OpenCL C as CUDA C++ (ctorch's gpu_dialect.c) ---- */\n"
    "#define __OPENCL_VERSION__ 120\n"
    "#define CT_CUDA_DIALECT 1\n"
    "typedef unsigned char uchar;\ntypedef unsigned short ushort;\ntypedef unsigned int uint;\n"
    "typedef unsigned long ulong;\n"
    /* the vector types the kernels take as arguments (CUDA's long4/double4
     * are deprecated, and an argument's layout is the driver's business) */
    "struct ct_cl_long2 { long x, y; };\nstruct ct_cl_long4 { long x, y, z, w; };\n"
    "struct ct_cl_int2 { int x, y; };\nstruct ct_cl_int4 { int x, y, z, w; };\n"
    "struct ct_cl_float2 { float x, y; };\nstruct ct_cl_float4 { float x, y, z, w; };\n"
    "struct ct_cl_double2 { double x, y; };\nstruct ct_cl_double4 { double x, y, z, w; };\n"
    "#define long2 ct_cl_long2\n#define long4 ct_cl_long4\n#define int2 ct_cl_int2\n#define int4 ct_cl_int4\n"
    "#define float2 ct_cl_float2\n#define float4 ct_cl_float4\n#define double2 ct_cl_double2\n"
    "#define double4 ct_cl_double4\n"
    /* address spaces and kernels */
    "#define __kernel extern \"C\" __global__\n#define __global\n#define global\n#define __local __shared__\n"
    "#define __constant const\n#define __private\n#define restrict __restrict__\n"
    /* work-items: a work-group is a block */
    "__device__ __forceinline__ unsigned ct_cl_dim(uint3 v, int d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }\n"
    "__device__ __forceinline__ unsigned ct_cl_dim(dim3 v, int d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }\n"
    "#define get_local_id(d) ((long)ct_cl_dim(threadIdx, (d)))\n"
    "#define get_group_id(d) ((long)ct_cl_dim(blockIdx, (d)))\n"
    "#define get_local_size(d) ((long)ct_cl_dim(blockDim, (d)))\n"
    "#define get_num_groups(d) ((long)ct_cl_dim(gridDim, (d)))\n"
    "#define get_global_id(d) (get_group_id(d) * get_local_size(d) + get_local_id(d))\n"
    "#define get_global_size(d) (get_num_groups(d) * get_local_size(d))\n"
    "#define CLK_LOCAL_MEM_FENCE 1\n#define CLK_GLOBAL_MEM_FENCE 2\n"
    "#define barrier(flags) __syncthreads()\n#define mem_fence(flags) __threadfence()\n"
    /* limits (OpenCL C has them built in) */
    "#define CHAR_BIT 8\n#define SCHAR_MAX 127\n#define SCHAR_MIN (-128)\n#define UCHAR_MAX 255\n"
    "#define SHRT_MAX 32767\n#define SHRT_MIN (-32768)\n#define USHRT_MAX 65535\n"
    "#define INT_MAX 2147483647\n#define INT_MIN (-2147483647 - 1)\n#define UINT_MAX 4294967295u\n"
    "#define LONG_MAX 9223372036854775807L\n#define LONG_MIN (-9223372036854775807L - 1L)\n"
    "#define ULONG_MAX 18446744073709551615UL\n"
    "#define FLT_MAX 3.402823466e+38F\n#define FLT_MIN 1.175494351e-38F\n#define FLT_EPSILON 1.1920928955078125e-07F\n"
    "#define DBL_MAX 1.7976931348623158e+308\n#define DBL_MIN 2.2250738585072014e-308\n"
    "#define DBL_EPSILON 2.220446049250313e-16\n"
    "#define MAXFLOAT FLT_MAX\n#define HUGE_VALF __int_as_float(0x7f800000)\n"
    "#define HUGE_VAL __longlong_as_double(0x7ff0000000000000LL)\n"
    "#define INFINITY HUGE_VALF\n#define NAN __int_as_float(0x7fffffff)\n"
    "#define M_PI 3.14159265358979323846\n#define M_PI_F 3.14159265358979323846f\n"
    /* the OpenCL prelude's __builtin_inf()/__builtin_nan("") */
    "#define __builtin_inf() HUGE_VAL\n#define __builtin_nan(s) __longlong_as_double(0x7ff8000000000000LL)\n"
    /* as_T: reinterpretation of the bits */
    "template <typename T, typename F> __device__ __forceinline__ T ct_cl_as(F f) {\n"
    "    static_assert(sizeof(T) == sizeof(F), \"as_type: sizes differ\");\n"
    "    union { F f; T t; } u; u.f = f; return u.t; }\n"
    "#define as_char(x) ct_cl_as<char>(x)\n#define as_uchar(x) ct_cl_as<uchar>(x)\n"
    "#define as_short(x) ct_cl_as<short>(x)\n#define as_ushort(x) ct_cl_as<ushort>(x)\n"
    "#define as_int(x) ct_cl_as<int>(x)\n#define as_uint(x) ct_cl_as<uint>(x)\n"
    "#define as_long(x) ct_cl_as<long>(x)\n#define as_ulong(x) ct_cl_as<ulong>(x)\n"
    "#define as_float(x) ct_cl_as<float>(x)\n#define as_double(x) ct_cl_as<double>(x)\n"
    /* convert_T for scalars (round toward zero, as a C cast; _sat / _rte
     * forms are not mapped) */
    "#define convert_char(x) ((char)(x))\n#define convert_uchar(x) ((uchar)(x))\n"
    "#define convert_short(x) ((short)(x))\n#define convert_ushort(x) ((ushort)(x))\n"
    "#define convert_int(x) ((int)(x))\n#define convert_uint(x) ((uint)(x))\n"
    "#define convert_long(x) ((long)(x))\n#define convert_ulong(x) ((ulong)(x))\n"
    "#define convert_float(x) ((float)(x))\n#define convert_double(x) ((double)(x))\n"
    /* half: stored as 16 bits, converted with the hardware's instructions */
    "#define half ushort\n"
    "__device__ __forceinline__ float ct_cl_h2f(ushort h) { float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
    "__device__ __forceinline__ ushort ct_cl_f2h(float f) { ushort h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n"
    "#define vload_half(i, p) ct_cl_h2f((p)[(i)])\n"
    "#define vstore_half_rte(v, i, p) ((p)[(i)] = ct_cl_f2h((float)(v)))\n"
    "#define vstore_half(v, i, p) vstore_half_rte(v, i, p)\n"
    /* built-ins CUDA names differently or lacks */
    "#define mad(a, b, c) ((a) * (b) + (c))\n"
    "#define native_exp exp\n#define native_log log\n#define native_sqrt sqrt\n#define native_rsqrt rsqrt\n"
    "#define native_sin sin\n#define native_cos cos\n#define native_divide(a, b) ((a) / (b))\n"
    "#define native_recip(a) (1.0f / (a))\n"
    "template <typename T> __device__ __forceinline__ T ct_cl_clamp(T x, T lo, T hi) { return x < lo ? lo : x > hi ? hi : x; }\n"
    "#define clamp(x, lo, hi) ct_cl_clamp((x), (decltype(x))(lo), (decltype(x))(hi))\n"
    "#define select(a, b, c) ((c) ? (b) : (a))\n"
    "__device__ __forceinline__ int ct_cl_popcount(uint x) { return __popc(x); }\n"
    "__device__ __forceinline__ long ct_cl_popcount(ulong x) { return __popcll(x); }\n"
    "__device__ __forceinline__ int ct_cl_popcount(int x) { return __popc((uint)x); }\n"
    "__device__ __forceinline__ long ct_cl_popcount(long x) { return __popcll((ulong)x); }\n"
    "#define popcount(x) ct_cl_popcount(x)\n"
    "__device__ __forceinline__ int ct_cl_clz(uint x) { return __clz((int)x); }\n"
    "__device__ __forceinline__ long ct_cl_clz(ulong x) { return __clzll((long long)x); }\n"
    "__device__ __forceinline__ int ct_cl_clz(int x) { return __clz(x); }\n"
    "__device__ __forceinline__ long ct_cl_clz(long x) { return __clzll((long long)x); }\n"
    "#define clz(x) ct_cl_clz(x)\n"
    "#define mul_hi(a, b) __umul64hi((a), (b))\n"
    /* atomics on 32-bit (and, with the 64-bit extension's names, 64-bit) ints */
    "#define atomic_add(p, v) atomicAdd((p), (v))\n#define atomic_sub(p, v) atomicSub((p), (v))\n"
    "#define atomic_inc(p) atomicAdd((p), 1)\n#define atomic_dec(p) atomicSub((p), 1)\n"
    "#define atomic_xchg(p, v) atomicExch((p), (v))\n#define atomic_cmpxchg(p, c, v) atomicCAS((p), (c), (v))\n"
    "#define atomic_min(p, v) atomicMin((p), (v))\n#define atomic_max(p, v) atomicMax((p), (v))\n"
    "#define atomic_and(p, v) atomicAnd((p), (v))\n#define atomic_or(p, v) atomicOr((p), (v))\n"
    "#define atomic_xor(p, v) atomicXor((p), (v))\n"
    "#define atom_add atomic_add\n#define atom_cmpxchg atomic_cmpxchg\n#define atom_xchg atomic_xchg\n"
    "#define atom_min atomic_min\n#define atom_max atomic_max\n"
    "/* ---- end of the dialect prelude ---- */\n";

/* ---- recording ----------------------------------------------------------- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_on;
static ct_gpu_source *g_srcs;
static int g_n, g_cap;
/* the distinct preludes and helpers (few): shared, not copied per source */
static char *g_texts[64];
static int g_ntexts;

static const char *intern(const char *s) {
    for (int k = 0; k < g_ntexts; k++)
        if (strcmp(g_texts[k], s) == 0) return g_texts[k];
    if (g_ntexts == 64) return NULL;
    char *c = strdup(s);
    if (c) g_texts[g_ntexts++] = c;
    return c;
}

void ct__gpu_sources_record(bool on) {
    pthread_mutex_lock(&g_mu);
    g_on = on;
    if (!on) {
        for (int k = 0; k < g_n; k++) {
            free((char *)g_srcs[k].what);
            free((char *)g_srcs[k].body);
        }
        for (int k = 0; k < g_ntexts; k++) free(g_texts[k]);
        free(g_srcs);
        g_srcs = NULL;
        g_n = g_cap = g_ntexts = 0;
    }
    pthread_mutex_unlock(&g_mu);
}

void ct__gpu_source_seen(const char *what, const char *prelude, const char *helpers, const char *body) {
    pthread_mutex_lock(&g_mu);
    if (!g_on) {
        pthread_mutex_unlock(&g_mu);
        return;
    }
    const char *p = intern(prelude ? prelude : ""), *h = intern(helpers ? helpers : "");
    for (int k = 0; k < g_n; k++) /* the backends cache their programs: few repeats */
        if (g_srcs[k].prelude == p && g_srcs[k].helpers == h && strcmp(g_srcs[k].body, body) == 0) {
            pthread_mutex_unlock(&g_mu);
            return;
        }
    if (p && h && g_n == g_cap) {
        int cap = g_cap ? 2 * g_cap : 256;
        ct_gpu_source *ns = realloc(g_srcs, (size_t)cap * sizeof *ns);
        if (ns) g_srcs = ns, g_cap = cap;
    }
    if (p && h && g_n < g_cap) {
        char *w = strdup(what ? what : "?"), *b = strdup(body);
        if (w && b) g_srcs[g_n++] = (ct_gpu_source){w, p, h, b};
        else free(w), free(b);
    }
    pthread_mutex_unlock(&g_mu);
}

int ct__gpu_sources(const ct_gpu_source **out) {
    pthread_mutex_lock(&g_mu);
    *out = g_srcs;
    int n = g_n;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- foreign launches ------------------------------------------------------ */
_Thread_local const ct_gpu_foreign *ct__gpu_foreign;
static _Thread_local struct { const char *what, *prelude, *helpers, *body; } tl_pending;

void *ct__gpu_foreign_kernel(const char *what, const char *prelude, const char *helpers, const char *body) {
    ct__gpu_source_seen(what, prelude, helpers, body);
    tl_pending.what = what;
    tl_pending.prelude = prelude;
    tl_pending.helpers = helpers;
    tl_pending.body = body;
    return &tl_pending;
}

ct_status ct__gpu_foreign_launch(const char *what, int dev, void *const bufs[4], const void *geom, size_t gsize,
                                 const void *extra, size_t esize, int64_t numel, size_t lsz) {
    if (!ct__gpu_foreign || !tl_pending.body)
        return ct__error_status(CT_ERR_RUNTIME, "%s: a foreign launch without its kernel text", what);
    ct_status st = ct__gpu_foreign->launch(what, tl_pending.prelude, tl_pending.helpers, tl_pending.body, dev, bufs,
                                           geom, gsize, extra, esize, numel, lsz);
    tl_pending.body = NULL;
    return st;
}

ct_status ct__gpu_foreign_launch_args(const char *what, const char *prelude, const char *body, int dev,
                                      void *const *vals, const size_t *sizes, int nvals, size_t global) {
    if (!ct__gpu_foreign || !ct__gpu_foreign->launch_args)
        return ct__error_status(CT_ERR_RUNTIME, "%s: a foreign launch without a launcher", what);
    ct__gpu_source_seen(what, prelude, "", body);
    return ct__gpu_foreign->launch_args(what, prelude, body, dev, vals, sizes, nvals, global);
}

ct_gpu_colmajor_gemm ct__gpu_colmajor_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                                           int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb, void *C,
                                           int64_t ldc, int64_t sc, int64_t batch) {
    return (ct_gpu_colmajor_gemm){.transa = tb ? 'T' : 'N', .transb = ta ? 'T' : 'N', .m = N, .n = M, .k = K,
                                  .a = B, .b = A, .c = C, .lda = ldb, .ldb = lda, .ldc = ldc, .stride_a = sb,
                                  .stride_b = sa, .stride_c = sc, .batch = batch};
}

ct_status ct__gpu_cat(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    ct_tensor *o = out[0];
    int dim = (int)a->p.index.dim;
    if (dim < 0 || dim >= o->ndim) return ct__error_status(CT_ERR_SHAPE, "cat: dim %d of a %d-d output", dim, o->ndim);
    int64_t at = 0; /* the next input's first index along dim */
    ct_status st = CT_OK;
    for (int j = 0; j < nin && !st; j++) {
        ct_tensor *t = in[j];
        if (!t) continue; /* a legacy empty input the op layer left out */
        if (ct_numel(t) == 0) {
            if (t->ndim == o->ndim) at += t->sizes[dim];
            continue;
        }
        if (t->ndim != o->ndim) return ct__error_status(CT_ERR_SHAPE, "cat: input %d has %d dims, the output %d", j,
                                                        t->ndim, o->ndim);
        int64_t sizes[CT_MAX_DIMS];
        memcpy(sizes, o->sizes, sizeof(int64_t) * (size_t)o->ndim);
        sizes[dim] = t->sizes[dim];
        ct_tensor *v = ct__view_of(o, sizes, o->strides, o->ndim, o->offset + at * o->strides[dim]);
        if (!v) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
        ct_tensor *vo[1] = {v}, *vi[1] = {t};
        st = ct__dispatch(CT_OP_copy, vo, 1, vi, 1, NULL);
        ct_release(v);
        at += t->sizes[dim];
    }
    return st;
}
