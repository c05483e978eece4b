/* linalg.c -- matmul and friends (torch semantics), built on one batched
 * GEMM kernel (src/backend/cpu/linalg.c, CBLAS for f32/f64).
 *
 * Every product goes through mm_general(): A [abatch..., M, K] (or a 1-D
 * vector) times B [bbatch..., K, N] (or a 1-D vector), batch dims
 * broadcast with stride-0 views (never materialized), and a [batch, M, K]
 * by [K, N] product folded into one GEMM when A's rows can be merged
 * without a copy.  Views are made with ct__view_of, so nothing here goes
 * through a scope: each public function releases what it made and hands
 * its fresh result to ct__finish. */
#include <math.h>

#include "../core/device.h"
#include "linalg_impl.h"
#include "autocast.h"
#include "meta.h"

/* ---- helpers ------------------------------------------------------------ */
const char *ct__lin_tname(ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: return "bool";
    case CT_U8: return "unsigned char";
    case CT_I8: return "signed char";
    case CT_I16: return "short int";
    case CT_I32: return "int";
    case CT_I64: return "long int";
    case CT_F16: return "c10::Half";
    case CT_BF16: return "c10::BFloat16";
    case CT_F32: return "float";
    case CT_F64: return "double";
    case CT_C64: return "c10::complex<float>";
    case CT_C128: return "c10::complex<double>";
    default: return "?";
    }
}

/* torch's ScalarType names ("Float", "Long") */
static const char *sname(ct_dtype dt) {
    static const char *n[] = {"Bool", "Byte", "Char", "Short", "Int", "Long", "Half",
                              "BFloat16", "Float", "Double", "ComplexFloat", "ComplexDouble"};
    return (unsigned)dt < CT_DTYPE_COUNT ? n[dt] : "?";
}

ct_tensor *ct__lin_view(ct_tensor *t, const int64_t *sizes, const int64_t *strides, int nd) {
    return ct__view_of(t, sizes, strides, nd, t->offset);
}

static ct_tensor *contig_view(ct_tensor *t, const int64_t *shape, int nd) {
    int64_t st[CT_MAX_DIMS];
    ct__contiguous_strides(shape, nd, st);
    return ct__view_of(t, shape, st, nd, t->offset);
}

ct_tensor *ct__lin_perm_reshape(ct_tensor *t, const int *perm, const int64_t *shape, int nd) {
    int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) {
        sz[i] = t->sizes[perm ? perm[i] : i];
        st[i] = t->strides[perm ? perm[i] : i];
    }
    ct_tensor *v = ct__lin_view(t, sz, st, t->ndim);
    if (!v) return NULL;
    ct_tensor *c = ct__contig_as(v, t->dtype);
    ct_release(v);
    if (!c) return NULL;
    ct_tensor *r = contig_view(c, shape, nd);
    ct_release(c);
    return r;
}

ct_status ct__lin_gemm(ct_op op, ct_tensor *C, ct_tensor *A, ct_tensor *B, double alpha,
                       double beta, int allow_bool) {
    return ct__lin_gemm_bias(op, C, A, B, NULL, alpha, beta, allow_bool);
}

/* ct_linear's weight may be kept packed (ct_p_linalg.keep_b): set around its
 * product only */
static _Thread_local bool tl_keep_b;

ct_status ct__lin_gemm_bias(ct_op op, ct_tensor *C, ct_tensor *A, ct_tensor *B, ct_tensor *bias,
                            double alpha, double beta, int allow_bool) {
    ct_dtype dt = C->dtype;
    const char *name = ct__op_info[op].name;
    if (dt == CT_BOOL && !allow_bool)
        return ct__error_status(CT_ERR_DTYPE, "%s: \"addmm_impl_cpu_\" not implemented for 'Bool'", name);
    ct_args a = ct__args(op);
    a.p.linalg.alpha = alpha;
    a.p.linalg.beta = beta;
    a.p.linalg.keep_b = tl_keep_b && op == CT_OP_linear;
    /* f16/bf16: the device's kernel reads them itself when it says so
     * (ct__half_native); else they are computed in f32 copies */
    if ((dt == CT_F16 || dt == CT_BF16) && !ct__half_native(C->storage->device, op, dt)) {
        ct_status st = CT_ERR_OOM;
        ct_tensor *Af = ct__contig_as(A, CT_F32), *Bf = ct__contig_as(B, CT_F32);
        ct_tensor *Cf = beta != 0 ? ct__contig_as(C, CT_F32)
                                  : ct__alloc(C->sizes, C->ndim, CT_F32, C->storage->device);
        if (Af && Bf && Cf) {
            ct_tensor *o[1] = {Cf}, *i[2] = {Af, Bf};
            st = ct__dispatch(op, o, 1, i, 2, &a);
            if (!st) {
                ct_tensor *o2[1] = {C}, *i2[1] = {Cf};
                st = ct__dispatch(CT_OP_copy, o2, 1, i2, 1, NULL);
            }
        }
        ct_release(Af);
        ct_release(Bf);
        ct_release(Cf);
        return st;
    }
    ct_tensor *o[1] = {C}, *i[3] = {A, B, bias};
    return ct__dispatch(op, o, 1, i, bias ? 3 : 2, &a);
}

ct_tensor *ct__lin_sum_dims(ct_op op, ct_tensor *t, const int *mask) {
    int nd = t->ndim, perm[CT_MAX_DIMS], np = 0, nk = 0;
    int64_t keep[CT_MAX_DIMS], outer = 1, S = 1;
    for (int d = 0; d < nd; d++)
        if (!mask[d]) { perm[np++] = d; keep[nk++] = t->sizes[d]; outer *= t->sizes[d]; }
    for (int d = 0; d < nd; d++)
        if (mask[d]) { perm[np++] = d; S *= t->sizes[d]; }
    int64_t sh3[3] = {1, outer, S};
    ct_tensor *A = ct__lin_perm_reshape(t, perm, sh3, 3);
    ct_tensor *one = ct__alloc(NULL, 0, t->dtype, t->storage->device);
    ct_tensor *out = ct__alloc(keep, nk, t->dtype, t->storage->device);
    ct_tensor *B = NULL, *C = NULL;
    if (one) {
        unsigned char v1[16] = {0}; /* meta: no value; a device: copied there */
        ct__store_f64(ct__has_host_data(one) ? ct__ptr(one) : v1, t->dtype, 1.0);
        if (!ct__has_host_data(one) && one->storage->data &&
            ct__device(one->storage->device)->copy_from_host(ct__ptr(one), v1, ct_dtype_size(t->dtype),
                                                              one->storage->device_index)) {
            ct_release(one);
            one = NULL;
        }
        B = ct__lin_view(one, (int64_t[]){1, S, 1}, (int64_t[]){0, 0, 0}, 3);
    }
    if (out) C = contig_view(out, (int64_t[]){1, outer, 1}, 3);
    ct_status st = (A && B && C) ? ct__lin_gemm(op, C, A, B, 1, 0, 1) : CT_ERR_OOM;
    ct_release(A);
    ct_release(B);
    ct_release(C);
    ct_release(one);
    if (st) { ct_release(out); return NULL; }
    return out;
}

/* Merges dims 0..upto of t into one (no copy); returns 0 and the stride
 * when possible. */
static int merge_rows(const ct_tensor *t, int upto, int64_t *stride) {
    int64_t st = 1, n = 1;
    for (int d = upto; d >= 0; d--) {
        if (t->sizes[d] == 1) continue;
        if (n == 1) { st = t->strides[d]; n = t->sizes[d]; }
        else if (t->strides[d] == st * n) n *= t->sizes[d];
        else return -1;
    }
    *stride = st;
    return 0;
}

/* "op: The expanded size ..." check that init can broadcast to shape */
static int check_expand(const char *name, const ct_tensor *init, const int64_t *shape, int nd) {
    char b1[256], b2[256];
    int bad = init->ndim > nd;
    int64_t bad_dim = 0, bad_sz = 0, bad_ex = 0;
    for (int i = 0; !bad && i < init->ndim; i++) {
        int d = nd - init->ndim + i;
        if (init->sizes[i] != 1 && init->sizes[i] != shape[d]) {
            bad = 1; bad_dim = d; bad_sz = init->sizes[i]; bad_ex = shape[d];
        }
    }
    if (!bad) return 0;
    if (init->ndim > nd)
        ct__error(CT_ERR_SHAPE, "%s: the number of sizes provided (%d) must be greater or equal to "
                  "the number of dimensions in the tensor (%d)", name, nd, init->ndim);
    else
        ct__error(CT_ERR_SHAPE, "%s: The expanded size of the tensor (%lld) must match the existing "
                  "size (%lld) at non-singleton dimension %lld.  Target sizes: %s.  Tensor sizes: %s",
                  name, (long long)bad_ex, (long long)bad_sz, (long long)bad_dim,
                  ct__shape_str(shape, nd, b1, sizeof b1),
                  ct__shape_str(init->sizes, init->ndim, b2, sizeof b2));
    return -1;
}

/* 1 when init is one contiguous row of out's last-dim size (a bias) on the CPU */
static int is_bias_row(const ct_tensor *out, const ct_tensor *init) {
    if (init->dtype != out->dtype || out->ndim < 1 || !ct__is_contiguous(init) ||
        out->storage->device != CT_CPU || init->storage->device != CT_CPU)
        return 0;
    int64_t N = out->sizes[out->ndim - 1];
    return init->ndim >= 1 && init->sizes[init->ndim - 1] == N && ct_numel(init) == N && N != 0;
}

/* out (fresh, contiguous) = init broadcast, when init is one contiguous row
 * of out's last-dim size (a bias): a memcpy per row instead of the strided
 * broadcast copy.  Returns 0 when done, 1 when the caller must copy. */
static int fill_rows(ct_tensor *out, ct_tensor *init) {
    if (!is_bias_row(out, init)) return 1;
    int64_t N = out->sizes[out->ndim - 1];
    size_t row = (size_t)N * ct_dtype_size(out->dtype);
    int64_t rows = ct_numel(out) / N;
    const char *src = ct__ptr(init);
    char *dst = ct__ptr(out);
    for (int64_t r = 0; r < rows; r++) memcpy(dst + (size_t)r * row, src, row);
    return 0;
}

/* torch.matmul semantics without validation (the caller checked the inner
 * sizes and that the batch dims broadcast).  out = beta*init + alpha*a@b
 * (init may be NULL: beta ignored).  oshape (may be NULL) replaces the
 * result shape (same numel).  Returns a fresh tensor, no scope. */
static ct_tensor *mm_general(ct_op op, ct_tensor *a, ct_tensor *b, ct_tensor *init, double beta,
                             double alpha, int allow_bool, const int64_t *oshape, int ond) {
    int da = a->ndim, db = b->ndim;
    ct_tensor *acontig = NULL;
    int64_t M, K, N, sam, sak, sbk, sbn;
    int64_t abat[CT_MAX_DIMS], abst[CT_MAX_DIMS], bbat[CT_MAX_DIMS], bbst[CT_MAX_DIMS];
    int nab = 0, nbb = 0;
    int fold = da >= 3 && db <= 2;
    ct_tensor *aa = a;
    if (fold) {
        int64_t rs = 1;
        if (merge_rows(a, da - 2, &rs)) {
            acontig = ct__contig_as(a, a->dtype);
            if (!acontig) return NULL;
            aa = acontig;
            merge_rows(aa, da - 2, &rs);
        }
        M = 1;
        for (int d = 0; d < da - 1; d++) M *= a->sizes[d];
        sam = rs;
        K = aa->sizes[da - 1];
        sak = aa->strides[da - 1];
    } else if (da == 1) {
        M = 1; sam = 0; K = a->sizes[0]; sak = a->strides[0];
    } else {
        M = a->sizes[da - 2]; sam = a->strides[da - 2];
        K = a->sizes[da - 1]; sak = a->strides[da - 1];
        nab = da - 2;
        memcpy(abat, a->sizes, sizeof(int64_t) * (size_t)nab);
        memcpy(abst, a->strides, sizeof(int64_t) * (size_t)nab);
    }
    if (db == 1) {
        N = 1; sbn = 0; sbk = b->strides[0];
    } else {
        sbk = b->strides[db - 2]; N = b->sizes[db - 1]; sbn = b->strides[db - 1];
        nbb = db - 2;
        memcpy(bbat, b->sizes, sizeof(int64_t) * (size_t)nbb);
        memcpy(bbst, b->strides, sizeof(int64_t) * (size_t)nbb);
    }
    int nbat = nab > nbb ? nab : nbb;
    int64_t bat[CT_MAX_DIMS], as[CT_MAX_DIMS + 2], bs[CT_MAX_DIMS + 2];
    for (int i = 0; i < nbat; i++) {
        int ia = i - (nbat - nab), ib = i - (nbat - nbb);
        int64_t sa = ia >= 0 ? abat[ia] : 1, sb = ib >= 0 ? bbat[ib] : 1;
        bat[i] = sa == 1 ? sb : sa;
        as[i] = (ia >= 0 && abat[ia] != 1) ? abst[ia] : 0;
        bs[i] = (ib >= 0 && bbat[ib] != 1) ? bbst[ib] : 0;
    }
    int nd = nbat + 2;
    int64_t asz[CT_MAX_DIMS + 2], bsz[CT_MAX_DIMS + 2], csz[CT_MAX_DIMS + 2];
    memcpy(asz, bat, sizeof(int64_t) * (size_t)nbat);
    memcpy(bsz, bat, sizeof(int64_t) * (size_t)nbat);
    memcpy(csz, bat, sizeof(int64_t) * (size_t)nbat);
    asz[nbat] = M; asz[nbat + 1] = K; as[nbat] = sam; as[nbat + 1] = sak;
    bsz[nbat] = K; bsz[nbat + 1] = N; bs[nbat] = sbk; bs[nbat + 1] = sbn;
    csz[nbat] = M; csz[nbat + 1] = N;
    /* the result shape */
    int64_t rshape[CT_MAX_DIMS];
    int rnd = 0;
    if (oshape) {
        memcpy(rshape, oshape, sizeof(int64_t) * (size_t)ond);
        rnd = ond;
    } else if (fold) {
        for (int d = 0; d < da - 1; d++) rshape[rnd++] = a->sizes[d];
        if (db == 2) rshape[rnd++] = N;
    } else {
        for (int i = 0; i < nbat; i++) rshape[rnd++] = bat[i];
        if (da >= 2) rshape[rnd++] = M;
        if (db >= 2) rshape[rnd++] = N;
    }
    if (nd > CT_MAX_DIMS) {
        ct_release(acontig);
        return ct__error(CT_ERR_SHAPE, "%s: too many dims", ct__op_info[op].name);
    }
    ct_tensor *out = ct__alloc(rshape, rnd, a->dtype, a->storage->device);
    ct_tensor *A = ct__view_of(aa, asz, as, nd, aa->offset);
    ct_tensor *B = ct__lin_view(b, bsz, bs, nd);
    ct_tensor *C = out ? contig_view(out, csz, nd) : NULL;
    ct_status st = CT_ERR_OOM;
    if (out && A && B && C) {
        st = CT_OK;
        /* an f32 bias row goes to the kernel, which adds it as it stores C
         * (no pass over C of its own); other inits are copied into C first */
        if (init && beta != 0 && out->dtype == CT_F32 && is_bias_row(out, init) &&
            csz[nd - 1] == out->sizes[out->ndim - 1]) {
            ct_tensor *bv = contig_view(init, (int64_t[]){init->sizes[init->ndim - 1]}, 1);
            st = bv ? ct__lin_gemm_bias(op, C, A, B, bv, alpha, beta, allow_bool) : CT_ERR_OOM;
            ct_release(bv);
        } else {
            if (init && beta != 0 && fill_rows(out, init) && !ct_copy_(out, init))
                st = ct_last_error_code();
            if (!st) st = ct__lin_gemm(op, C, A, B, alpha, init ? beta : 0, allow_bool);
        }
    }
    ct_release(A);
    ct_release(B);
    ct_release(C);
    ct_release(acontig);
    if (st) { ct_release(out); return NULL; }
    return out;
}

static ct_tensor *done(ct_op op, ct_tensor *out, ct_tensor *const *ins, int nin) {
    return ct__finish(op, out, ins, nin, NULL);
}

/* add* ops: the recorded args carry beta and alpha for the VJP */
static ct_tensor *done_ba(ct_op op, ct_tensor *out, ct_tensor *const *ins, int nin, double beta,
                          double alpha) {
    ct_args a = ct__args(op);
    a.p.linalg.beta = beta;
    a.p.linalg.alpha = alpha;
    return ct__finish(op, out, ins, nin, &a);
}

#define LL(x) ((long long)(x))
#define FAIL(code, ...) return ct__error_status(code, __VA_ARGS__)
#define SAME_DTYPE_MM(name, a, b)                                                           \
    do {                                                                                    \
        if ((a)->dtype != (b)->dtype)                                                       \
            FAIL(CT_ERR_DTYPE, "%s: expected m1 and m2 to have the same dtype, "             \
                 "but got: %s != %s", name, ct__lin_tname((a)->dtype),                      \
                 ct__lin_tname((b)->dtype));                                                \
    } while (0)

/* ---- meta functions ---------------------------------------------------------- */
/* Each checks what torch checks (its messages) and gives the result's
 * sizes, dtype and device; the public functions below run it first and
 * build the product into a tensor of exactly that shape (mm_general's
 * oshape). */
static ct_status lin_device(ct_op op, ct_tensor *const *in, int nin, ct_device *dev) {
    return ct__meta_device(ct__op_info[op].name, in, nin, dev);
}

static ct_status check_mm(const char *name, const ct_tensor *a, const ct_tensor *b) {
    if (a->ndim != 2) FAIL(CT_ERR_SHAPE, "%s: self must be a matrix (got a %dD tensor)", name, a->ndim);
    if (b->ndim != 2) FAIL(CT_ERR_SHAPE, "%s: mat2 must be a matrix (got a %dD tensor)", name, b->ndim);
    SAME_DTYPE_MM(name, a, b);
    if (a->sizes[1] != b->sizes[0])
        FAIL(CT_ERR_SHAPE, "%s: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)", name,
             LL(a->sizes[0]), LL(a->sizes[1]), LL(b->sizes[0]), LL(b->sizes[1]));
    return CT_OK;
}

static ct_status check_bmm(const char *name, const ct_tensor *a, const ct_tensor *b) {
    if (a->ndim != 3) FAIL(CT_ERR_SHAPE, "%s: batch1 must be a 3D tensor (got %dD)", name, a->ndim);
    if (b->ndim != 3) FAIL(CT_ERR_SHAPE, "%s: batch2 must be a 3D tensor (got %dD)", name, b->ndim);
    SAME_DTYPE_MM(name, a, b);
    if (a->sizes[0] != b->sizes[0] || a->sizes[2] != b->sizes[1])
        FAIL(CT_ERR_SHAPE, "%s: Expected size for first two dimensions of batch2 tensor to be: [%lld, %lld] "
             "but got: [%lld, %lld].", name, LL(a->sizes[0]), LL(a->sizes[2]), LL(b->sizes[0]),
             LL(b->sizes[1]));
    return CT_OK;
}

static ct_status check_mv(const char *name, const ct_tensor *m, const ct_tensor *v) {
    if (m->ndim != 2 || v->ndim != 1)
        FAIL(CT_ERR_SHAPE, "%s: vector + matrix @ vector expected, got %dD matrix and %dD vector", name,
             m->ndim, v->ndim);
    SAME_DTYPE_MM(name, m, v);
    if (m->sizes[1] != v->sizes[0])
        FAIL(CT_ERR_SHAPE, "%s: size mismatch, got %lld, %lldx%lld,%lld", name, LL(m->sizes[0]),
             LL(m->sizes[0]), LL(m->sizes[1]), LL(v->sizes[0]));
    return CT_OK;
}

/* the add* ops' scalars and input */
static ct_status check_scalars(const char *name, ct_dtype dt, double beta, double alpha) {
    if (!ct_dtype_is_integral(dt, true)) return CT_OK;
    const char *which = beta != floor(beta) ? "beta" : alpha != floor(alpha) ? "alpha" : NULL;
    if (!which) return CT_OK;
    FAIL(CT_ERR_ARG, "%s: For integral input tensors, argument %s must not be a floating point number.",
         name, which);
}

static ct_status check_input(const char *name, const ct_tensor *input, const ct_tensor *m,
                             const int64_t *shape, int nd) {
    if (input->dtype != m->dtype)
        FAIL(CT_ERR_DTYPE, "%s: self and mat2 must have the same dtype, but got %s and %s", name,
             ct__lin_tname(input->dtype), ct__lin_tname(m->dtype));
    return check_expand(name, input, shape, nd) ? ct_last_error_code() : CT_OK;
}

CT_META_FN(ct__meta_matmul) {
    ct_tensor *x = in[0], *y = in[1];
    int da = x->ndim, db = y->ndim;
    if (da == 0 || db == 0)
        FAIL(CT_ERR_SHAPE, "matmul: both arguments to matmul need to be at least 1D, but they are %dD and %dD",
             da, db);
    SAME_DTYPE_MM("matmul", x, y);
    int64_t K = x->sizes[da - 1], K2 = db == 1 ? y->sizes[0] : y->sizes[db - 2];
    if (K != K2) {
        if (da == 1 && db == 1)
            FAIL(CT_ERR_SHAPE, "matmul: inconsistent tensor size, expected tensor [%lld] and src [%lld] to "
                 "have the same number of elements, but got %lld and %lld elements respectively",
                 LL(K), LL(K2), LL(K), LL(K2));
        int64_t rows = 1;
        if (da > 1 && db <= 2)
            for (int d = 0; d < da - 1; d++) rows *= x->sizes[d];
        if (db == 1)
            FAIL(CT_ERR_SHAPE, "matmul: size mismatch, got %lld, %lldx%lld,%lld", LL(rows), LL(rows), LL(K),
                 LL(K2));
        if (db == 2)
            FAIL(CT_ERR_SHAPE, "matmul: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                 LL(rows), LL(K), LL(K2), LL(y->sizes[1]));
        int64_t nba = 1, nbb = 1;
        for (int d = 0; d < da - 2; d++) nba *= x->sizes[d];
        for (int d = 0; d < db - 2; d++) nbb *= y->sizes[d];
        int64_t bn = nba > nbb ? nba : nbb;
        FAIL(CT_ERR_SHAPE, "matmul: Expected size for first two dimensions of batch2 tensor to be: [%lld, "
             "%lld] but got: [%lld, %lld].", LL(bn), LL(K), LL(bn), LL(K2));
    }
    int64_t sh[CT_MAX_DIMS];
    int nd = 0;
    if (da >= 3 && db <= 2) { /* folded into one GEMM */
        for (int d = 0; d < da - 1; d++) sh[nd++] = x->sizes[d];
        if (db == 2) sh[nd++] = y->sizes[1];
    } else { /* batch dims broadcast */
        int nab = da > 2 ? da - 2 : 0, nbb = db > 2 ? db - 2 : 0, n = nab > nbb ? nab : nbb;
        for (int i = 0; i < n; i++) {
            int ia = i - (n - nab), ib = i - (n - nbb);
            int64_t sa = ia >= 0 ? x->sizes[ia] : 1, sb = ib >= 0 ? y->sizes[ib] : 1;
            if (sa != sb && sa != 1 && sb != 1)
                FAIL(CT_ERR_SHAPE, "matmul: The size of tensor a (%lld) must match the size of tensor b "
                     "(%lld) at non-singleton dimension %d", LL(sa), LL(sb), i);
            sh[nd++] = sa == 1 ? sb : sa;
        }
        if (n + 2 > CT_MAX_DIMS) FAIL(CT_ERR_SHAPE, "matmul: too many dims");
        if (da >= 2) sh[nd++] = x->sizes[da - 2];
        if (db >= 2) sh[nd++] = y->sizes[db - 1];
    }
    ct_device dev;
    if (lin_device(CT_OP_matmul, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, sh, nd, x->dtype, dev);
    return CT_OK;
}

/* mm and addmm (in: [input,] m1, m2) */
CT_META_FN(ct__meta_mm) {
    const char *name = ct__op_info[a->op].name;
    int add = a->op == CT_OP_addmm;
    ct_tensor *m1 = in[add], *m2 = in[add + 1];
    if (check_mm(name, m1, m2)) return ct_last_error_code();
    int64_t sh[2] = {m1->sizes[0], m2->sizes[1]};
    if (add && (check_input(name, in[0], m1, sh, 2) ||
                check_scalars(name, m1->dtype, a->p.linalg.beta, a->p.linalg.alpha)))
        return ct_last_error_code();
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, sh, 2, m1->dtype, dev);
    return CT_OK;
}

/* bmm, baddbmm, addbmm (in: [input,] b1, b2) */
CT_META_FN(ct__meta_bmm) {
    const char *name = ct__op_info[a->op].name;
    int add = a->op != CT_OP_bmm;
    ct_tensor *b1 = in[add], *b2 = in[add + 1];
    if (check_bmm(name, b1, b2)) return ct_last_error_code();
    int64_t sh[3] = {b1->sizes[0], b1->sizes[1], b2->sizes[2]};
    const int64_t *osh = a->op == CT_OP_addbmm ? sh + 1 : sh;
    int ond = a->op == CT_OP_addbmm ? 2 : 3;
    if (add && (check_input(name, in[0], b1, osh, ond) ||
                check_scalars(name, b1->dtype, a->p.linalg.beta, a->p.linalg.alpha)))
        return ct_last_error_code();
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, osh, ond, b1->dtype, dev);
    return CT_OK;
}

/* mv and addmv (in: [input,] m, v) */
CT_META_FN(ct__meta_mv) {
    const char *name = ct__op_info[a->op].name;
    int add = a->op == CT_OP_addmv;
    ct_tensor *m = in[add], *v = in[add + 1];
    if (check_mv(name, m, v)) return ct_last_error_code();
    int64_t sh[1] = {m->sizes[0]};
    if (add && (check_input(name, in[0], m, sh, 1) ||
                check_scalars(name, m->dtype, a->p.linalg.beta, a->p.linalg.alpha)))
        return ct_last_error_code();
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, sh, 1, m->dtype, dev);
    return CT_OK;
}

/* dot and vdot */
CT_META_FN(ct__meta_dot) {
    const char *name = ct__op_info[a->op].name;
    ct_tensor *x = in[0], *y = in[1];
    if (x->ndim != 1 || y->ndim != 1)
        FAIL(CT_ERR_SHAPE, "%s: 1D tensors expected, but got %dD and %dD tensors", name, x->ndim, y->ndim);
    if (x->dtype != y->dtype)
        FAIL(CT_ERR_DTYPE, "%s: expected both vectors to have same dtype, but found %s and %s", name,
             sname(x->dtype), sname(y->dtype));
    if (x->dtype == CT_BOOL) FAIL(CT_ERR_DTYPE, "%s: \"%s\" not implemented for 'Bool'", name, name);
    if (x->sizes[0] != y->sizes[0])
        FAIL(CT_ERR_SHAPE, "%s: inconsistent tensor size, expected tensor [%lld] and src [%lld] to have the "
             "same number of elements, but got %lld and %lld elements respectively", name, LL(x->sizes[0]),
             LL(y->sizes[0]), LL(x->sizes[0]), LL(y->sizes[0]));
    ct_device dev;
    if (lin_device(a->op, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, NULL, 0, x->dtype, dev);
    return CT_OK;
}

/* outer and addr (in: [input,] a, b), promoted to their result type */
CT_META_FN(ct__meta_outer) {
    int add = a->op == CT_OP_addr;
    ct_tensor *x = in[add], *y = in[add + 1];
    if (!add) {
        if (x->ndim != 1) FAIL(CT_ERR_SHAPE, "outer: Expected 1-D argument self, but got %d-D", x->ndim);
        if (y->ndim != 1) FAIL(CT_ERR_SHAPE, "outer: Expected 1-D argument vec2, but got %d-D", y->ndim);
    } else if (x->ndim != 1 || y->ndim != 1) {
        FAIL(CT_ERR_SHAPE, "addr: 1D tensors expected, but got %dD and %dD tensors", x->ndim, y->ndim);
    }
    ct_dtype dt = ct_result_type(in, nin);
    int64_t sh[2] = {x->sizes[0], y->sizes[0]};
    if (add && (check_expand("addr", in[0], sh, 2) ||
                check_scalars("addr", dt, a->p.linalg.beta, a->p.linalg.alpha)))
        return ct_last_error_code();
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, sh, 2, dt, dev);
    return CT_OK;
}

/* in: x, w, [bias] */
CT_META_FN(ct__meta_linear) {
    ct_tensor *x = in[0], *w = in[1], *bias = nin > 2 ? in[2] : NULL;
    if (x->ndim < 1) FAIL(CT_ERR_SHAPE, "linear: input must be at least 1-D, got a 0-D tensor");
    if (w->ndim != 2) FAIL(CT_ERR_SHAPE, "linear: weight must be 2-D, got %dD", w->ndim);
    SAME_DTYPE_MM("linear", x, w);
    int64_t k = x->sizes[x->ndim - 1];
    if (k != w->sizes[1]) {
        int64_t rows = ct_numel(x) / (k ? k : 1);
        if (!k) { rows = 1; for (int d = 0; d < x->ndim - 1; d++) rows *= x->sizes[d]; }
        FAIL(CT_ERR_SHAPE, "linear: mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
             LL(rows), LL(k), LL(w->sizes[1]), LL(w->sizes[0]));
    }
    int64_t osh[CT_MAX_DIMS];
    int ond = x->ndim;
    memcpy(osh, x->sizes, sizeof(int64_t) * (size_t)ond);
    osh[ond - 1] = w->sizes[0];
    if (bias && bias->dtype != x->dtype)
        FAIL(CT_ERR_DTYPE, "linear: expected bias to have dtype %s, but got %s", ct__lin_tname(x->dtype),
             ct__lin_tname(bias->dtype));
    if (bias && check_expand("linear", bias, osh, ond)) return ct_last_error_code();
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, osh, ond, x->dtype, dev);
    return CT_OK;
}

/* in: x1, x2, w, [bias] */
CT_META_FN(ct__meta_bilinear) {
    ct_tensor *x1 = in[0], *x2 = in[1], *w = in[2], *bias = nin > 3 ? in[3] : NULL;
    if (w->ndim != 3) FAIL(CT_ERR_SHAPE, "bilinear(): weight must be 3-D, got %dD", w->ndim);
    if (x1->ndim < 1 || x1->ndim != x2->ndim)
        FAIL(CT_ERR_SHAPE, "bilinear(): input dimensions do not match: got %d and %d", x1->ndim, x2->ndim);
    for (int d = 0; d < x1->ndim - 1; d++)
        if (x1->sizes[d] != x2->sizes[d]) {
            char b1[256], b2[256];
            FAIL(CT_ERR_SHAPE, "bilinear(): input batch dimensions do not match: got %s and %s",
                 ct__shape_str(x1->sizes, x1->ndim - 1, b1, sizeof b1),
                 ct__shape_str(x2->sizes, x2->ndim - 1, b2, sizeof b2));
        }
    int64_t I = x1->sizes[x1->ndim - 1], J = x2->sizes[x2->ndim - 1], O = w->sizes[0];
    if (w->sizes[1] != I)
        FAIL(CT_ERR_SHAPE, "bilinear(): input1 size does not match weight size: got %lld but expected %lld",
             LL(I), LL(w->sizes[1]));
    if (w->sizes[2] != J)
        FAIL(CT_ERR_SHAPE, "bilinear(): input2 size does not match weight size: got %lld but expected %lld",
             LL(J), LL(w->sizes[2]));
    if (x1->dtype != w->dtype || x2->dtype != w->dtype || (bias && bias->dtype != w->dtype))
        FAIL(CT_ERR_DTYPE, "bilinear(): expected all inputs to have dtype %s", ct__lin_tname(w->dtype));
    if (bias && (bias->ndim != 1 || bias->sizes[0] != O))
        FAIL(CT_ERR_SHAPE, "bilinear(): bias size does not match weight size: got %s but expected [%lld]",
             ct__tshape(bias), LL(O));
    int64_t osh[CT_MAX_DIMS];
    int ond = x1->ndim;
    memcpy(osh, x1->sizes, sizeof(int64_t) * (size_t)ond);
    osh[ond - 1] = O;
    ct_device dev;
    if (lin_device(a->op, in, nin, &dev)) return ct_last_error_code();
    ct__meta_set(out, osh, ond, w->dtype, dev);
    return CT_OK;
}

/* Runs op's meta function into m (one output). */
static ct_status lin_meta(ct_op op, ct_meta *m, ct_tensor *const *in, int nin, const ct_args *a) {
    return ct__meta_run(op, m, 1, in, nin, a);
}

/* ---- matmul family -------------------------------------------------------- */
ct_tensor *ct_matmul(ct_tensor *a, ct_tensor *b) {
    CT_AUTOCAST_OP(CT_AC_matmul, ct_matmul(CT_AC_ARG(0), CT_AC_ARG(1)), a, b);
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(CT_OP_matmul, &m, ins, 2, NULL)) return NULL;
    return done(CT_OP_matmul, mm_general(CT_OP_matmul, a, b, NULL, 0, 1, 0, m.sizes, m.ndim), ins, 2);
}

/* mm, bmm, mv: the product of two operands */
static ct_tensor *product2(ct_op op, ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK_OP(ct__op_info[op].name, a);
    CT_NULLCHECK_OP(ct__op_info[op].name, b);
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(op, &m, ins, 2, NULL)) return NULL;
    return done(op, mm_general(op, a, b, NULL, 0, 1, 0, m.sizes, m.ndim), ins, 2);
}

ct_tensor *ct_mm(ct_tensor *a, ct_tensor *b) {
    CT_AUTOCAST_OP(CT_AC_mm, ct_mm(CT_AC_ARG(0), CT_AC_ARG(1)), a, b);
    return product2(CT_OP_mm, a, b);
}
ct_tensor *ct_bmm(ct_tensor *a, ct_tensor *b) {
    CT_AUTOCAST_OP(CT_AC_bmm, ct_bmm(CT_AC_ARG(0), CT_AC_ARG(1)), a, b);
    return product2(CT_OP_bmm, a, b);
}
ct_tensor *ct_mv(ct_tensor *m, ct_tensor *v) { return product2(CT_OP_mv, m, v); }

static ct_tensor *dot_impl(ct_op op, ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK_OP(ct__op_info[op].name, a);
    CT_NULLCHECK_OP(ct__op_info[op].name, b);
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(op, &m, ins, 2, NULL)) return NULL;
    if (op == CT_OP_vdot && ct_dtype_is_complex(a->dtype)) { /* conj(a) */
        ct_tensor *ac = ct__alloc(a->sizes, 1, a->dtype, a->storage->device);
        if (!ac) return NULL;
        ct_tensor *o[1] = {ac}, *i[1] = {a};
        if (ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL)) { ct_release(ac); return NULL; }
        /* meta: no values to conjugate; a device: conjugated on a host copy, copied back */
        ct_tensor *h = ct__has_host_data(ac) || ac->storage->device == CT_META ? ct_retain(ac)
                                                                                : ct__host_copy(ac, ac->dtype);
        if (!h) { ct_release(ac); return NULL; }
        int64_t n = ct__has_host_data(h) ? a->sizes[0] : 0;
        if (a->dtype == CT_C64) {
            float *p = ct__ptr(h);
            for (int64_t k = 0; k < n; k++) p[2 * k + 1] = -p[2 * k + 1];
        } else {
            double *p = ct__ptr(h);
            for (int64_t k = 0; k < n; k++) p[2 * k + 1] = -p[2 * k + 1];
        }
        if (h != ac && n && ct__device(ac->storage->device)->copy_from_host(ct__ptr(ac), ct__ptr(h),
                                                                              (size_t)n * ct_dtype_size(a->dtype),
                                                                              ac->storage->device_index)) {
            ct_release(h);
            ct_release(ac);
            return NULL;
        }
        ct_release(h);
        ct_tensor *r = mm_general(op, ac, b, NULL, 0, 1, 0, m.sizes, m.ndim);
        ct_release(ac);
        return done(op, r, ins, 2);
    }
    return done(op, mm_general(op, a, b, NULL, 0, 1, 0, m.sizes, m.ndim), ins, 2);
}

ct_tensor *ct_dot(ct_tensor *a, ct_tensor *b) { return dot_impl(CT_OP_dot, a, b); }
/* conj(a) . b (conj is the identity for real dtypes) */
ct_tensor *ct_vdot(ct_tensor *a, ct_tensor *b) { return dot_impl(CT_OP_vdot, a, b); }

/* a [M] and b [N] (promoted to dt) as views [M, 1] and [1, N] */
static ct_tensor *outer_impl(ct_op op, ct_tensor *a, ct_tensor *b, ct_dtype dt, ct_tensor *init,
                             double beta, double alpha, const int64_t *oshape, int ond) {
    ct_tensor *ac = ct__contig_as(a, dt), *bc = ct__contig_as(b, dt);
    ct_tensor *av = NULL, *bv = NULL, *out = NULL;
    if (ac && bc) {
        int64_t M = ct_numel(ac), N = ct_numel(bc);
        av = ct__lin_view(ac, (int64_t[]){M, 1}, (int64_t[]){1, 1}, 2);
        bv = ct__lin_view(bc, (int64_t[]){1, N}, (int64_t[]){1, 1}, 2);
        if (av && bv) out = mm_general(op, av, bv, init, beta, alpha, 1, oshape, ond);
    }
    ct_release(ac);
    ct_release(bc);
    ct_release(av);
    ct_release(bv);
    return out;
}

ct_tensor *ct_outer(ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(CT_OP_outer, &m, ins, 2, NULL)) return NULL;
    return done(CT_OP_outer, outer_impl(CT_OP_outer, a, b, m.dtype, NULL, 0, 1, m.sizes, m.ndim), ins, 2);
}

/* ---- add* (beta * input + alpha * product) -------------------------------- */
static ct_args ba_args(ct_op op, double beta, double alpha) {
    ct_args a = ct__args(op);
    a.p.linalg.beta = beta;
    a.p.linalg.alpha = alpha;
    return a;
}

/* addmm, addmv, baddbmm: beta * input + alpha * (x @ y) */
static ct_tensor *add_product(ct_op op, ct_tensor *input, ct_tensor *x, ct_tensor *y, double beta,
                              double alpha) {
    const char *name = ct__op_info[op].name;
    CT_NULLCHECK_OP(name, input);
    CT_NULLCHECK_OP(name, x);
    CT_NULLCHECK_OP(name, y);
    ct_tensor *ins[3] = {input, x, y};
    ct_args a = ba_args(op, beta, alpha);
    ct_meta m;
    if (lin_meta(op, &m, ins, 3, &a)) return NULL;
    return done_ba(op, mm_general(op, x, y, input, beta, alpha, 0, m.sizes, m.ndim), ins, 3, beta, alpha);
}

ct_tensor *ct_addmm(ct_tensor *input, ct_tensor *m1, ct_tensor *m2, double beta, double alpha) {
    ct_tensor *r;
    if (ct__autocast_on() && ct__autocast_linear(&r, true, m1, m2, input, beta, alpha)) return r;
    CT_AUTOCAST_OP(CT_AC_addmm, ct_addmm(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), beta, alpha), input, m1, m2);
    return add_product(CT_OP_addmm, input, m1, m2, beta, alpha);
}

ct_tensor *ct_addmv(ct_tensor *input, ct_tensor *m, ct_tensor *v, double beta, double alpha) {
    return add_product(CT_OP_addmv, input, m, v, beta, alpha);
}

ct_tensor *ct_baddbmm(ct_tensor *input, ct_tensor *b1, ct_tensor *b2, double beta, double alpha) {
    CT_AUTOCAST_OP(CT_AC_baddbmm, ct_baddbmm(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), beta, alpha), input, b1,
                   b2);
    return add_product(CT_OP_baddbmm, input, b1, b2, beta, alpha);
}

ct_tensor *ct_addr(ct_tensor *input, ct_tensor *a, ct_tensor *b, double beta, double alpha) {
    CT_NULLCHECK(input);
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *ins[3] = {input, a, b};
    ct_args args = ba_args(CT_OP_addr, beta, alpha);
    ct_meta m;
    if (lin_meta(CT_OP_addr, &m, ins, 3, &args)) return NULL;
    ct_tensor *ic = ct__contig_as(input, m.dtype);
    if (!ic) return NULL;
    ct_tensor *out = outer_impl(CT_OP_addr, a, b, m.dtype, ic, beta, alpha, m.sizes, m.ndim);
    ct_release(ic);
    return done_ba(CT_OP_addr, out, ins, 3, beta, alpha);
}

ct_tensor *ct_addbmm(ct_tensor *input, ct_tensor *b1, ct_tensor *b2, double beta, double alpha) {
    CT_AUTOCAST_OP(CT_AC_addbmm, ct_addbmm(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2), beta, alpha), input, b1,
                   b2);
    CT_NULLCHECK(input);
    CT_NULLCHECK(b1);
    CT_NULLCHECK(b2);
    ct_tensor *ins[3] = {input, b1, b2};
    ct_args args = ba_args(CT_OP_addbmm, beta, alpha);
    ct_meta m;
    if (lin_meta(CT_OP_addbmm, &m, ins, 3, &args)) return NULL;
    int64_t Bn = b1->sizes[0], M = b1->sizes[1], K = b1->sizes[2], N = b2->sizes[2];
    /* sum_b b1[b] @ b2[b] == [M, B*K] @ [B*K, N]: one GEMM */
    ct_tensor *A = ct__lin_perm_reshape(b1, (int[]){1, 0, 2}, (int64_t[]){M, Bn * K}, 2);
    ct_tensor *B = ct__lin_perm_reshape(b2, NULL, (int64_t[]){Bn * K, N}, 2);
    ct_tensor *out = NULL;
    if (A && B) out = mm_general(CT_OP_addbmm, A, B, input, beta, alpha, 0, m.sizes, m.ndim);
    ct_release(A);
    ct_release(B);
    return done_ba(CT_OP_addbmm, out, ins, 3, beta, alpha);
}

/* ---- linear, bilinear ------------------------------------------------------- */
ct_tensor *ct_linear(ct_tensor *x, ct_tensor *w, ct_tensor *bias) {
    ct_tensor *r;
    if (ct__autocast_on() && ct__autocast_linear(&r, false, x, w, bias, 1.0, 1.0)) return r;
    CT_AUTOCAST_OP(CT_AC_linear, ct_linear(CT_AC_ARG(0), CT_AC_ARG(1), CT_AC_ARG(2)), x, w, bias);
    CT_NULLCHECK(x);
    CT_NULLCHECK(w);
    ct_tensor *ins[3] = {x, w, bias};
    int nin = bias ? 3 : 2;
    ct_meta m;
    if (lin_meta(CT_OP_linear, &m, ins, nin, NULL)) return NULL;
    ct_tensor *wt = ct__lin_view(w, (int64_t[]){w->sizes[1], w->sizes[0]},
                                 (int64_t[]){w->strides[1], w->strides[0]}, 2);
    if (!wt) return NULL;
    tl_keep_b = ct_is_inference_mode() || !ct_requires_grad(w);
    ct_tensor *out = mm_general(CT_OP_linear, x, wt, bias, 1, 1, 0, m.sizes, m.ndim);
    tl_keep_b = false;
    ct_release(wt);
    return done(CT_OP_linear, out, ins, nin);
}

ct_tensor *ct_bilinear(ct_tensor *x1, ct_tensor *x2, ct_tensor *w, ct_tensor *bias) {
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    CT_NULLCHECK(w);
    ct_tensor *ins[4] = {x1, x2, w, bias};
    int nin = bias ? 4 : 3;
    ct_meta m;
    if (lin_meta(CT_OP_bilinear, &m, ins, nin, NULL)) return NULL;
    int64_t I = x1->sizes[x1->ndim - 1], J = x2->sizes[x2->ndim - 1], O = w->sizes[0];
    int64_t R = 1;
    for (int d = 0; d < x1->ndim - 1; d++) R *= x1->sizes[d];
    /* T[r, o, j] = sum_i x1[r, i] W[o, i, j];  y[r, o] = sum_j T[r, o, j] x2[r, j] */
    ct_tensor *X1 = ct__lin_perm_reshape(x1, NULL, (int64_t[]){R, I}, 2);
    ct_tensor *X2 = ct__lin_perm_reshape(x2, NULL, (int64_t[]){R, J, 1}, 3);
    ct_tensor *Wp = ct__lin_perm_reshape(w, (int[]){1, 0, 2}, (int64_t[]){I, O * J}, 2);
    ct_tensor *T = NULL, *Tv = NULL, *out = NULL;
    if (X1 && X2 && Wp) T = mm_general(CT_OP_bilinear, X1, Wp, NULL, 0, 1, 0, NULL, 0);
    if (T) Tv = contig_view(T, (int64_t[]){R, O, J}, 3);
    if (Tv) out = mm_general(CT_OP_bilinear, Tv, X2, bias, 1, 1, 0, m.sizes, m.ndim);
    ct_release(X1);
    ct_release(X2);
    ct_release(Wp);
    ct_release(T);
    ct_release(Tv);
    return done(CT_OP_bilinear, out, ins, nin);
}

/* ---- tensordot, kron ----------------------------------------------------- */
/* params dims_a/dims_b: the contracted dims, wrapped */
CT_META_FN(ct__meta_tensordot) {
    ct_tensor *x = in[0], *y = in[1];
    const ct_p_linalg *p = &a->p.linalg;
    int ndims = p->dims_a_n;
    if (ndims < 0 || ndims > x->ndim || ndims > y->ndim || p->dims_b_n != ndims)
        FAIL(CT_ERR_ARG, "tensordot: invalid number of contracted dims %d for %dD and %dD tensors", ndims,
             x->ndim, y->ndim);
    if (x->dtype != y->dtype)
        FAIL(CT_ERR_DTYPE, "tensordot: expected both tensors to have the same dtype, but got %s and %s",
             ct__lin_tname(x->dtype), ct__lin_tname(y->dtype));
    int ua[CT_MAX_DIMS] = {0}, ub[CT_MAX_DIMS] = {0};
    for (int i = 0; i < ndims; i++) {
        int64_t dx = p->dims_a[i], dy = p->dims_b[i];
        if (dx < 0 || dx >= x->ndim || dy < 0 || dy >= y->ndim)
            FAIL(CT_ERR_INDEX, "tensordot: contracted dim out of range");
        if (ua[dx] || ub[dy])
            FAIL(CT_ERR_ARG, "tensordot: dim %lld appears multiple times in the list of dims",
                 LL(ua[dx] ? dx : dy));
        ua[dx] = ub[dy] = 1;
        if (x->sizes[dx] != y->sizes[dy])
            FAIL(CT_ERR_SHAPE, "tensordot: contracted dimensions need to match, but first has size %lld in "
                 "dim %lld and second has size %lld in dim %lld", LL(x->sizes[dx]), LL(dx), LL(y->sizes[dy]),
                 LL(dy));
    }
    int64_t osh[CT_MAX_DIMS * 2];
    int ond = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!ua[d]) osh[ond++] = x->sizes[d];
    for (int d = 0; d < y->ndim; d++)
        if (!ub[d]) osh[ond++] = y->sizes[d];
    if (ond > CT_MAX_DIMS) FAIL(CT_ERR_SHAPE, "tensordot: result has too many dims");
    ct_device dev;
    if (lin_device(CT_OP_tensordot, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, osh, ond, x->dtype, dev);
    return CT_OK;
}

ct_tensor *ct_tensordot(ct_tensor *a, ct_tensor *b, const int64_t *dims_a, const int64_t *dims_b,
                        int ndims) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    if (ndims < 0 || ndims > a->ndim || ndims > b->ndim || (ndims > 0 && (!dims_a || !dims_b)))
        return ct__error(CT_ERR_ARG, "tensordot: invalid number of contracted dims %d for %dD and %dD "
                         "tensors", ndims, a->ndim, b->ndim);
    /* the params: the wrapped contracted dims, a's in dims_a, b's in dims_b (the VJP reads them) */
    ct_args targs = ct__args(CT_OP_tensordot);
    targs.p.linalg.dims_a_n = ndims;
    targs.p.linalg.dims_b_n = ndims;
    for (int i = 0; i < ndims; i++) {
        int64_t x = ct__wrap_dim("tensordot", dims_a[i], a->ndim);
        if (x < 0) return NULL;
        int64_t y = ct__wrap_dim("tensordot", dims_b[i], b->ndim);
        if (y < 0) return NULL;
        targs.p.linalg.dims_a[i] = x;
        targs.p.linalg.dims_b[i] = y;
    }
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(CT_OP_tensordot, &m, ins, 2, &targs)) return NULL;
    int ua[CT_MAX_DIMS] = {0}, ub[CT_MAX_DIMS] = {0}, pa[CT_MAX_DIMS], pb[CT_MAX_DIMS];
    int64_t K = 1, M = 1, N = 1;
    for (int i = 0; i < ndims; i++) {
        int x = (int)targs.p.linalg.dims_a[i], y = (int)targs.p.linalg.dims_b[i];
        ua[x] = ub[y] = 1;
        pa[a->ndim - ndims + i] = x;
        pb[i] = y;
        K *= a->sizes[x];
    }
    int na = 0, nb = ndims;
    for (int d = 0; d < a->ndim; d++)
        if (!ua[d]) { pa[na++] = d; M *= a->sizes[d]; }
    for (int d = 0; d < b->ndim; d++)
        if (!ub[d]) { pb[nb++] = d; N *= b->sizes[d]; }
    ct_tensor *A = ct__lin_perm_reshape(a, pa, (int64_t[]){M, K}, 2);
    ct_tensor *B = ct__lin_perm_reshape(b, pb, (int64_t[]){K, N}, 2);
    ct_tensor *out = NULL;
    if (A && B) out = mm_general(CT_OP_tensordot, A, B, NULL, 0, 1, 0, m.sizes, m.ndim);
    ct_release(A);
    ct_release(B);
    return ct__finish(CT_OP_tensordot, out, ins, 2, &targs);
}

CT_META_FN(ct__meta_kron) {
    ct_tensor *x = in[0], *y = in[1];
    int nd = x->ndim > y->ndim ? x->ndim : y->ndim;
    if (2 * nd > CT_MAX_DIMS) FAIL(CT_ERR_SHAPE, "kron: too many dims (%d)", nd);
    ct_dtype dt = ct_result_type(in, 2);
    if (ct_dtype_is_complex(dt)) FAIL(CT_ERR_DTYPE, "kron: complex dtype %s is not supported", ct_dtype_name(dt));
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        int64_t sa = i < nd - x->ndim ? 1 : x->sizes[i - (nd - x->ndim)];
        int64_t sb = i < nd - y->ndim ? 1 : y->sizes[i - (nd - y->ndim)];
        sh[i] = sa * sb;
    }
    ct_device dev;
    if (lin_device(CT_OP_kron, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, sh, nd, dt, dev);
    return CT_OK;
}

ct_tensor *ct_kron(ct_tensor *a, ct_tensor *b) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    ct_tensor *ins[2] = {a, b};
    ct_meta m;
    if (lin_meta(CT_OP_kron, &m, ins, 2, NULL)) return NULL;
    int nd = m.ndim;
    int64_t tsh[CT_MAX_DIMS];
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) {
        tsh[i] = i < nd - a->ndim ? 1 : a->sizes[i - (nd - a->ndim)];
        tsh[nd + i] = i < nd - b->ndim ? 1 : b->sizes[i - (nd - b->ndim)];
        perm[2 * i] = i;
        perm[2 * i + 1] = nd + i;
    }
    /* outer product of the flattened tensors, viewed [a0..an, b0..bn],
     * permuted to [a0, b0, a1, b1, ...] and reshaped */
    ct_tensor *t = outer_impl(CT_OP_kron, a, b, m.dtype, NULL, 0, 1, tsh, 2 * nd);
    if (!t) return NULL;
    ct_tensor *out = ct__lin_perm_reshape(t, perm, m.sizes, nd);
    ct_release(t);
    return done(CT_OP_kron, out, ins, 2);
}

/* ---- trace, cross, cdist --------------------------------------------------- */
CT_META_FN(ct__meta_trace) {
    ct_tensor *x = in[0];
    if (x->ndim != 2) FAIL(CT_ERR_SHAPE, "trace: expected a matrix, but got tensor with dim %d", x->ndim);
    if (ct_dtype_is_complex(x->dtype))
        FAIL(CT_ERR_DTYPE, "trace: complex dtype %s is not supported", ct_dtype_name(x->dtype));
    if (x->dtype == CT_BOOL) FAIL(CT_ERR_DTYPE, "trace: \"trace\" not implemented for 'Bool'");
    ct__meta_set(out, NULL, 0, ct_dtype_is_integral(x->dtype, true) ? CT_I64 : x->dtype, x->storage->device);
    return CT_OK;
}

ct_tensor *ct_trace(ct_tensor *x) {
    CT_AUTOCAST_OP(CT_AC_trace, ct_trace(CT_AC_ARG(0)), x);
    CT_NULLCHECK(x);
    ct_tensor *ins[1] = {x};
    return ct__op(CT_OP_trace, ins, 1, NULL);
}

/* params: dim, the cross dim (wrapped over the broadcast shape) */
CT_META_FN(ct__meta_cross) {
    ct_tensor *x = in[0], *y = in[1];
    if (x->dtype != y->dtype)
        FAIL(CT_ERR_DTYPE, "cross: expected scalar type %s but found %s", sname(x->dtype), sname(y->dtype));
    if (x->ndim != y->ndim) FAIL(CT_ERR_SHAPE, "linalg.cross: inputs must have the same number of dimensions.");
    int64_t bs[CT_MAX_DIMS];
    int nb;
    if (ct__broadcast_shapes("cross", x->sizes, x->ndim, y->sizes, y->ndim, bs, &nb)) return ct_last_error_code();
    int64_t d = a->p.linalg.dim;
    if (nb > 0 && (d < 0 || d >= nb)) FAIL(CT_ERR_INDEX, "cross: dim %lld out of range", LL(d));
    int ia = (int)d - (nb - x->ndim), ib = (int)d - (nb - y->ndim);
    int64_t la = nb && ia >= 0 ? x->sizes[ia] : 1, lb = nb && ib >= 0 ? y->sizes[ib] : 1;
    if (nb == 0 || la != 3 || lb != 3)
        FAIL(CT_ERR_SHAPE, "linalg.cross: inputs dimension %lld must have length 3. Got %lld and %lld", LL(d),
             LL(la), LL(lb));
    ct_device dev;
    if (lin_device(CT_OP_cross, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, bs, nb, x->dtype, dev);
    return CT_OK;
}

ct_tensor *ct_cross(ct_tensor *a, ct_tensor *b, int64_t dim) {
    CT_NULLCHECK(a);
    CT_NULLCHECK(b);
    if (a->dtype != b->dtype)
        return ct__error(CT_ERR_DTYPE, "cross: expected scalar type %s but found %s", sname(a->dtype),
                         sname(b->dtype));
    if (a->ndim != b->ndim)
        return ct__error(CT_ERR_SHAPE, "linalg.cross: inputs must have the same number of dimensions.");
    int64_t bs[CT_MAX_DIMS];
    int nb;
    if (ct__broadcast_shapes("cross", a->sizes, a->ndim, b->sizes, b->ndim, bs, &nb)) return NULL;
    int64_t d = ct__wrap_dim("cross", dim, nb);
    if (d < 0) return NULL;
    ct_tensor *ins[2] = {a, b};
    ct_args xargs = ct__args(CT_OP_cross);
    xargs.p.linalg.dim = d; /* the wrapped cross dim, for the VJP */
    ct_meta m;
    if (lin_meta(CT_OP_cross, &m, ins, 2, &xargs)) return NULL;
    int ia = (int)d - (nb - a->ndim), ib = (int)d - (nb - b->ndim);
    ct_dtype dt = a->dtype;
    ct_dtype cdt = (dt == CT_F16 || dt == CT_BF16) ? CT_F32 : dt;
    ct_tensor *ac = dt == cdt ? ct_retain(a) : ct__contig_as(a, cdt);
    ct_tensor *bc = dt == cdt ? ct_retain(b) : ct__contig_as(b, cdt);
    ct_tensor *out = ct__meta_new(&m, ins);
    ct_tensor *oc = NULL, *vo = NULL, *va = NULL, *vb = NULL;
    ct_status st = CT_ERR_OOM;
    if (ac && bc && out) oc = dt == cdt ? ct_retain(out) : ct__alloc(m.sizes, m.ndim, cdt, m.device);
    if (oc) {
        /* views with the cross dim removed */
        int64_t sz[CT_MAX_DIMS], str[CT_MAX_DIMS];
        ct_tensor *src[3] = {oc, ac, bc};
        int at[3] = {(int)d, ia, ib};
        ct_tensor **dst[3] = {&vo, &va, &vb};
        ct_args args = ct__args(CT_OP_cross);
        for (int k = 0; k < 3; k++) {
            int n = 0;
            for (int i = 0; i < src[k]->ndim; i++)
                if (i != at[k]) { sz[n] = src[k]->sizes[i]; str[n] = src[k]->strides[i]; n++; }
            *dst[k] = ct__lin_view(src[k], sz, str, n);
            args.p.linalg.dim_strides[k] = src[k]->strides[at[k]] * (int64_t)ct_dtype_size(cdt);
        }
        if (vo && va && vb) {
            ct_tensor *o[1] = {vo}, *i[2] = {va, vb};
            st = ct__dispatch(CT_OP_cross, o, 1, i, 2, &args);
            if (!st && oc != out) {
                ct_tensor *o2[1] = {out}, *i2[1] = {oc};
                st = ct__dispatch(CT_OP_copy, o2, 1, i2, 1, NULL);
            }
        }
    }
    ct_release(vo);
    ct_release(va);
    ct_release(vb);
    ct_release(oc);
    ct_release(ac);
    ct_release(bc);
    if (st) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_cross, out, ins, 2, &xargs);
}

/* params: p */
CT_META_FN(ct__meta_cdist) {
    ct_tensor *x1 = in[0], *x2 = in[1];
    double p = a->p.linalg.p;
    if (x1->ndim < 2) FAIL(CT_ERR_SHAPE, "cdist: cdist only supports at least 2D tensors, X1 got: %dD", x1->ndim);
    if (x2->ndim < 2) FAIL(CT_ERR_SHAPE, "cdist: cdist only supports at least 2D tensors, X2 got: %dD", x2->ndim);
    if (!ct_dtype_is_floating(x1->dtype))
        FAIL(CT_ERR_DTYPE, "cdist: cdist only supports floating-point dtypes, X1 got: %s", sname(x1->dtype));
    if (!ct_dtype_is_floating(x2->dtype))
        FAIL(CT_ERR_DTYPE, "cdist: cdist only supports floating-point dtypes, X2 got: %s", sname(x2->dtype));
    if (x1->dtype != x2->dtype)
        FAIL(CT_ERR_DTYPE, "cdist: X1 and X2 must have the same dtype, but got %s and %s", sname(x1->dtype),
             sname(x2->dtype));
    int64_t M = x1->sizes[x1->ndim - 1];
    if (M != x2->sizes[x2->ndim - 1])
        FAIL(CT_ERR_SHAPE, "cdist: X1 and X2 must have the same number of columns. X1: %lld X2: %lld", LL(M),
             LL(x2->sizes[x2->ndim - 1]));
    if (!(p >= 0)) FAIL(CT_ERR_ARG, "cdist: cdist only supports non-negative p values (got %g)", p);
    int64_t osh[CT_MAX_DIMS];
    int nbat;
    if (ct__broadcast_shapes("cdist", x1->sizes, x1->ndim - 2, x2->sizes, x2->ndim - 2, osh, &nbat))
        return ct_last_error_code();
    osh[nbat] = x1->sizes[x1->ndim - 2];
    osh[nbat + 1] = x2->sizes[x2->ndim - 2];
    ct_device dev;
    if (lin_device(CT_OP_cdist, in, 2, &dev)) return ct_last_error_code();
    ct__meta_set(out, osh, nbat + 2, x1->dtype, dev);
    return CT_OK;
}

ct_tensor *ct_cdist(ct_tensor *x1, ct_tensor *x2, double p) {
    CT_AUTOCAST_OP(CT_AC_cdist, ct_cdist(CT_AC_ARG(0), CT_AC_ARG(1), p), x1, x2);
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    ct_tensor *ins[2] = {x1, x2};
    ct_args cargs = ct__args(CT_OP_cdist);
    cargs.p.linalg.p = p; /* for the VJP */
    ct_meta m;
    if (lin_meta(CT_OP_cdist, &m, ins, 2, &cargs)) return NULL;
    int nbat = m.ndim - 2;
    const int64_t *bat = m.sizes;
    int64_t M = x1->sizes[x1->ndim - 1];
    int64_t P = x1->sizes[x1->ndim - 2], R = x2->sizes[x2->ndim - 2], Bt = 1;
    for (int i = 0; i < nbat; i++) Bt *= bat[i];
    ct_dtype dt = x1->dtype, cdt = (dt == CT_F16 || dt == CT_BF16) ? CT_F32 : dt;
    ct_tensor *out = ct__meta_new(&m, ins);
    ct_tensor *src[2] = {x1, x2}, *c[2] = {NULL, NULL}, *v3[2] = {NULL, NULL}, *oc = NULL, *o3 = NULL;
    ct_status st = CT_ERR_OOM;
    for (int k = 0; k < 2 && out; k++) { /* expand batch dims, make [Bt, rows, M] contiguous */
        ct_tensor *t = src[k];
        int64_t sz[CT_MAX_DIMS], str[CT_MAX_DIMS];
        for (int i = 0; i < nbat; i++) {
            int it = i - (nbat - (t->ndim - 2));
            sz[i] = bat[i];
            str[i] = (it >= 0 && t->sizes[it] != 1) ? t->strides[it] : 0;
        }
        sz[nbat] = t->sizes[t->ndim - 2]; str[nbat] = t->strides[t->ndim - 2];
        sz[nbat + 1] = M; str[nbat + 1] = t->strides[t->ndim - 1];
        ct_tensor *v = ct__lin_view(t, sz, str, nbat + 2);
        if (v) c[k] = ct__contig_as(v, cdt);
        ct_release(v);
        if (c[k]) v3[k] = contig_view(c[k], (int64_t[]){Bt, sz[nbat], M}, 3);
    }
    if (v3[0] && v3[1]) oc = dt == cdt ? ct_retain(out) : ct__alloc(m.sizes, m.ndim, cdt, m.device);
    if (oc) o3 = contig_view(oc, (int64_t[]){Bt, P, R}, 3);
    if (o3) {
        ct_tensor *o[1] = {o3}, *i[2] = {v3[0], v3[1]};
        st = ct__dispatch(CT_OP_cdist, o, 1, i, 2, &cargs);
        if (!st && oc != out) {
            ct_tensor *o2[1] = {out}, *i2[1] = {oc};
            st = ct__dispatch(CT_OP_copy, o2, 1, i2, 1, NULL);
        }
    }
    for (int k = 0; k < 2; k++) { ct_release(c[k]); ct_release(v3[k]); }
    ct_release(oc);
    ct_release(o3);
    if (st) { ct_release(out); return NULL; }
    return ct__finish(CT_OP_cdist, out, ins, 2, &cargs);
}

/* ---- linalg.multi_dot ------------------------------------------------------ */
/* The product of a chain of n matrices, matrix i being dims[i] x dims[i+1],
 * in the order torch.linalg.multi_dot picks.  split[i*n + j] (i < j) is the
 * k at which the product of matrices i..j splits into (i..k) @ (k+1..j).
 * n == 2: one product.  n == 3: (A B) C unless A (B C) costs strictly less,
 * comparing a*c*(b+d) with b*d*(a+c) multiply-adds for a x b, b x c, c x d.
 * n >= 4: the matrix-chain dynamic program, cost[i][j] = min over k of
 * cost[i][k] + cost[k+1][j] + dims[i]*dims[k+1]*dims[j+1], the first
 * (smallest) k on ties.  Costs saturate at INT64_MAX instead of wrapping. */
static int64_t md_add(int64_t a, int64_t b) { int64_t r; return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r; }
static int64_t md_mul(int64_t a, int64_t b) { int64_t r; return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r; }

int ct__multi_dot_order(const int64_t *dims, int n, int *split) {
    if (n < 2) return -1;
    if (n == 2) { split[1] = 0; return 0; }
    if (n == 3) {
        int64_t a = dims[0], b = dims[1], c = dims[2], d = dims[3];
        int64_t cost1 = md_mul(md_mul(a, c), md_add(b, d)), cost2 = md_mul(md_mul(b, d), md_add(a, c));
        split[0 * 3 + 2] = cost1 > cost2 ? 0 : 1;
        split[1 * 3 + 2] = 1;
        split[0 * 3 + 1] = 0;
        return 0;
    }
    int64_t *cost = calloc((size_t)n * (size_t)n, sizeof *cost);
    if (!cost) return -1;
    for (int l = 1; l < n; l++)
        for (int i = 0; i + l < n; i++) {
            int j = i + l;
            cost[i * n + j] = INT64_MAX;
            for (int k = i; k < j; k++) {
                int64_t q = md_add(md_add(cost[i * n + k], cost[(k + 1) * n + j]),
                                   md_mul(md_mul(dims[i], dims[k + 1]), dims[j + 1]));
                if (q < cost[i * n + j] || k == i) {
                    cost[i * n + j] = q;
                    split[i * n + j] = k;
                }
            }
        }
    free(cost);
    return 0;
}

/* the product of mats[i..j] (scope-owned), split as the order says */
static ct_tensor *md_chain(ct_tensor *const *mats, const int *split, int n, int i, int j) {
    if (i == j) return mats[i];
    int k = split[i * n + j];
    ct_tensor *l = md_chain(mats, split, n, i, k);
    ct_tensor *r = l ? md_chain(mats, split, n, k + 1, j) : NULL;
    return r ? ct_mm(l, r) : NULL;
}

ct_tensor *ct_linalg_multi_dot(ct_tensor *const *tensors, int n) {
    static const char *op = "linalg_multi_dot";
    if (n < 2) return ct__error(CT_ERR_ARG, "%s: expected at least 2 tensors but got %d", op, n < 0 ? 0 : n);
    if (!tensors) return ct__null_arg(op, "argument 'tensors'");
    for (int i = 0; i < n; i++) CT_NULLCHECK_AT(op, tensors, i);
    ct_tensor *first = tensors[0], *last = tensors[n - 1];
    if (first->ndim != 1 && first->ndim != 2)
        return ct__error(CT_ERR_SHAPE, "%s: the first tensor must be 1D or 2D but got %dD", op, first->ndim);
    if (last->ndim != 1 && last->ndim != 2)
        return ct__error(CT_ERR_SHAPE, "%s: the last tensor must be 1D or 2D but got %dD", op, last->ndim);
    for (int i = 1; i < n - 1; i++)
        if (tensors[i]->ndim != 2)
            return ct__error(CT_ERR_SHAPE, "%s: tensor %d must be 2D but got %dD", op, i, tensors[i]->ndim);
    /* the chain's dims: a 1-D first tensor is a row [1, K], a 1-D last one a column [K, 1] */
    int64_t *dims = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int *split = malloc(sizeof(int) * (size_t)n * (size_t)n);
    ct_tensor **mats = malloc(sizeof(ct_tensor *) * (size_t)n);
    ct_tensor *res = NULL;
    if (!dims || !split || !mats) { ct__error(CT_ERR_OOM, "%s: out of memory", op); goto out; }
    for (int i = 0; i < n; i++) {
        ct_tensor *t = tensors[i];
        dims[i] = (i == 0 && t->ndim == 1) ? 1 : t->sizes[0];
    }
    dims[n] = last->ndim == 1 ? 1 : last->sizes[1];
    for (int i = 1; i < n; i++) {
        ct_tensor *p = tensors[i - 1], *t = tensors[i];
        if (t->dtype != first->dtype) {
            ct__error(CT_ERR_DTYPE, "%s: all tensors must have be the same dtype but tensor 0 is %s and "
                      "tensor %d %s", op, ct__lin_tname(first->dtype), i, ct__lin_tname(t->dtype));
            goto out;
        }
        if (t->storage->device != first->storage->device) {
            ct__error(CT_ERR_DEVICE, "%s: all tensors must be on the same device but tensor 0 is on %s "
                      "and tensor %d on %s", op, ct_device_name(first->storage->device), i,
                      ct_device_name(t->storage->device));
            goto out;
        }
        if (p->sizes[p->ndim - 1] != t->sizes[0]) {
            char b[256];
            ct__shape_str(p->sizes, p->ndim, b, sizeof b);
            ct__error(CT_ERR_SHAPE, "%s: tensors %d and %d with shapes %s and %s cannot be multiplied",
                      op, i - 1, i, b, ct__tshape(t));
            goto out;
        }
    }
    if (ct__multi_dot_order(dims, n, split)) { ct__error(CT_ERR_OOM, "%s: out of memory", op); goto out; }
    {
        ct_scope s = ct_scope_begin();
        for (int i = 0; i < n; i++) mats[i] = tensors[i];
        if (first->ndim == 1) mats[0] = ct_unsqueeze(first, 0);
        if (last->ndim == 1) mats[n - 1] = ct_unsqueeze(last, 1);
        ct_tensor *r = (mats[0] && mats[n - 1]) ? md_chain(mats, split, n, 0, n - 1) : NULL;
        /* the result drops the dims that 1-D ends stood for (torch: view(out_shape)) */
        int64_t osh[2];
        int ond = 0;
        if (first->ndim == 2) osh[ond++] = dims[0];
        if (last->ndim == 2) osh[ond++] = dims[n];
        if (r && ond < 2) r = ct_reshape(r, osh, ond);
        res = ct_keep(r);
        ct_scope_end(s);
    }
out:
    free(dims);
    free(split);
    free(mats);
    return res;
}
