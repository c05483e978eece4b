/* k_random.c -- the OpenCL device's random kernels: uniform, normal,
 * randint, bernoulli (so dropout's masks), exponential, drawn from the
 * CPU's Philox 4x32-10 streams (src/core/random_impl.h): one work item per
 * Philox block, block b (counter offset + b, key the seed) giving elements
 * [b * P, b * P + P) of the contiguous output, with the CPU kernels'
 * arithmetic (src/backend/cpu/random.c) step by step, no contraction into
 * fused multiply-adds (FP_CONTRACT OFF).  So a seeded draw on the device
 * gives the CPU's numbers: uniform, randint, bernoulli bit for bit (integer
 * and correctly rounded float operations only); normal and exponential go
 * through log/sqrt/cos/sin/log1p in double, which the OpenCL driver's math
 * library computes within a few ulps of the host's libm (of the value, or
 * of 1 for a normal value near 0, where cos/sin of an argument near a root
 * differ relatively more), so a float64 value may differ from the CPU's
 * in its last bits (a float32 one, rounded from that double, practically
 * never: tests/test_opencl_random.c checks 2 x 1001 of them bit for bit).
 * multinomial and randperm (a sort per row, a sequential shuffle) stay on
 * the cpu fallback, as do float16/bfloat16/complex outputs. */
#include <stdio.h>
#include <string.h>

#include "../../ops/op_table.h"
#include "ocl.h"

static ct_status no_kernel(const char *op, const char *why) { return ct__no_device_kernel(op, CT_OPENCL, why); }

/* the launch's parameters, all 8-byte fields (the same layout on both sides) */
typedef struct rp {
    uint64_t seed, off;
    int64_t n, low, range, has_probs;
    double f[4];
} rp;

/* the block of work item b in v[0..3], then BODY; PER elements a block */
static const char k_head[] =
    "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
    "#pragma OPENCL FP_CONTRACT OFF\n"
    "typedef struct { ulong seed, off; long n, low, range, has_probs; double f[4]; } ct_rp;\n"
    "#define U64(lo, hi) ((double)(((((ulong)(hi)) << 32) | (ulong)(lo)) >> 11) * (1.0 / 9007199254740992.0))\n"
    "CT_KERNEL void k(CT_GLOBAL char *ob, long oo, CT_GLOBAL char *pb, long po, const ct_rp r) {\n"
    " const long b = CT_GID; if (b >= (r.n + PER - 1) / PER) return;\n"
    " const ulong ctr = r.off + (ulong)b;\n"
    " uint c0 = (uint)ctr, c1 = (uint)(ctr >> 32), c2 = 0, c3 = 0, k0 = (uint)r.seed, k1 = (uint)(r.seed >> 32);\n"
    " for (int q = 0; q < 10; q++) {\n"
    "  if (q > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }\n"
    "  const ulong p0 = (ulong)0xD2511F53u * c0, p1 = (ulong)0xCD9E8D57u * c2;\n"
    "  const uint n0 = (uint)(p1 >> 32) ^ c1 ^ k0, n2 = (uint)(p0 >> 32) ^ c3 ^ k1;\n"
    "  c0 = n0; c1 = (uint)p1; c2 = n2; c3 = (uint)p0;\n"
    " }\n"
    " const uint v[4] = {c0, c1, c2, c3};\n"
    " CT_GLOBAL T *o = (CT_GLOBAL T *)(ob + oo);\n"
    " CT_GLOBAL const double *probs = (CT_GLOBAL const double *)(pb + po);\n"
    " for (int j = 0; j < PER; j++) { const long i = b * PER + j; if (i >= r.n) break;\n";

/* per op: elements per block and the body computing element i (j of the
 * block) into o[i] */
static const char k_uniform_f32[] =
    "  float x = (float)(v[j] >> 8) * (1.0f / 16777216.0f) * (float)(r.f[1] - r.f[0]) + (float)r.f[0];\n"
    "  if (x >= (float)r.f[1] && r.f[1] > r.f[0]) x = nextafter((float)r.f[1], (float)-INFINITY);\n"
    "  o[i] = x;\n";
static const char k_uniform_f64[] =
    "  double x = U64(v[2 * j], v[2 * j + 1]) * (r.f[1] - r.f[0]) + r.f[0];\n"
    "  if (x >= r.f[1] && r.f[1] > r.f[0]) x = nextafter(r.f[1], (double)-INFINITY);\n"
    "  o[i] = x;\n";
/* Box-Muller on the whole block; element j takes the cosine (0) or sine (1) */
static const char k_normal[] =
    "  const double u1 = 1.0 - U64(v[0], v[1]), u2 = U64(v[2], v[3]);\n"
    "  const double rad = sqrt(-2.0 * log(u1)), th = 2.0 * 3.14159265358979323846 * u2;\n"
    "  const double z = j == 0 ? rad * cos(th) : rad * sin(th);\n"
    "  o[i] = (T)(z * r.f[0] + r.f[1]);\n";
static const char k_randint[] =
    "  const ulong x = (((ulong)v[2 * j + 1]) << 32) | (ulong)v[2 * j];\n"
    "  STORE_I((long)((ulong)r.low + mul_hi(x, (ulong)r.range)));\n";
static const char k_bernoulli[] =
    "  const double u = (double)v[j] * (1.0 / 4294967296.0);\n"
    "  STORE_I(u < (r.has_probs ? probs[i] : r.f[0]) ? 1 : 0);\n";
static const char k_exponential[] =
    "  const double u = U64(v[2 * j], v[2 * j + 1]);\n"
    "  o[i] = (T)(-log1p(-u) / r.f[0]);\n";

/* the integer store (the cpu's store_i): T from an int64 value */
static const char *store_i(ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: return "#define STORE_I(x) (o[i] = (uchar)((x) != 0))\n";
    case CT_F32: case CT_F64: case CT_I64: case CT_I32: case CT_I16: case CT_I8: case CT_U8:
        return "#define STORE_I(x) (o[i] = (T)(x))\n";
    default: return NULL;
    }
}

static const char *cl_type(ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: case CT_U8: return "uchar";
    case CT_I8: return "char";
    case CT_I16: return "short";
    case CT_I32: return "int";
    case CT_I64: return "long";
    case CT_F32: return "float";
    case CT_F64: return "double";
    default: return NULL;
    }
}

static ct_status k_random(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    ct_op op = a->op;
    const char *name = ct__op_info[op].name;
    ct_tensor *o = out[0];
    ct_dtype dt = o->dtype;
    const char *T = cl_type(dt), *si = store_i(dt);
    if (!T || !si) return no_kernel(name, ct_dtype_name(dt));
    if (!ct__is_contiguous(o)) return no_kernel(name, "a strided output");
    const ct_p_random *p = &a->p.random;
    rp r;
    memset(&r, 0, sizeof r);
    r.seed = (uint64_t)p->seed;
    r.off = (uint64_t)p->offset;
    r.n = ct_numel(o);
    const char *body;
    int per = 2;
    ct_tensor *probs = NULL;
    switch (op) {
    case CT_OP_uniform:
        if (dt != CT_F32 && dt != CT_F64) return no_kernel(name, ct_dtype_name(dt));
        per = dt == CT_F32 ? 4 : 2;
        body = dt == CT_F32 ? k_uniform_f32 : k_uniform_f64;
        r.f[0] = p->from, r.f[1] = p->to;
        break;
    case CT_OP_normal:
        if (dt != CT_F32 && dt != CT_F64) return no_kernel(name, ct_dtype_name(dt));
        body = k_normal;
        r.f[0] = p->std, r.f[1] = p->mean;
        break;
    case CT_OP_randint:
        body = k_randint;
        r.low = p->low;
        r.range = (int64_t)((uint64_t)p->high - (uint64_t)p->low);
        break;
    case CT_OP_bernoulli:
        body = k_bernoulli;
        per = 4; /* one 32-bit word an element, as the cpu's */
        r.f[0] = p->p;
        if (nin > 0 && in[0]) {
            probs = in[0];
            if (probs->dtype != CT_F64 || !ct__is_contiguous(probs) || ct_numel(probs) != r.n)
                return no_kernel(name, "probabilities not a contiguous float64 device tensor of the output's size");
            r.has_probs = 1;
        }
        break;
    case CT_OP_exponential:
        if (dt != CT_F32 && dt != CT_F64) return no_kernel(name, ct_dtype_name(dt));
        body = k_exponential;
        r.f[0] = p->lambd;
        break;
    default:
        return no_kernel(name, "not a random op of this file");
    }
    if (r.n == 0) return CT_OK;
    char src[6144];
    int len = snprintf(src, sizeof src, "%s#define T %s\n#define PER %d\n%s%s%s }\n}\n", ct__ocl_dialect, T, per, si,
                       k_head, body);
    if (len >= (int)sizeof src) return ct__error_status(CT_ERR_RUNTIME, "%s: kernel text too long", name);
    ct_ocl_arg args[3] = {{o, NULL, 0}, {probs ? probs : o, NULL, 0}, {NULL, &r, sizeof r}};
    return ct__ocl_launch(name, src, (size_t)((r.n + per - 1) / per), args, 3);
}

void ct__ocl_register_random(ct_kernel_fn *t) {
    t[CT_OP_uniform] = k_random;
    t[CT_OP_normal] = k_random;
    t[CT_OP_randint] = k_random;
    t[CT_OP_bernoulli] = k_random;
    t[CT_OP_exponential] = k_random;
}
