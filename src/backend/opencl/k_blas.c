/* k_blas.c -- the OpenCL device's matmul family (mm, bmm, matmul, addmm,
 * baddbmm, addbmm, mv, addmv, dot, outer, addr, linear, ...: the ops whose
 * cpu kernel is k_gemm) through CLBlast.
 *
 * CLBlast (libclblast.so.1) is loaded with dlopen on the first GEMM, like
 * the ICD loader: the library links nothing and loads where CLBlast is not
 * installed.  Without it, or for what this file does not take (dtypes other
 * than f32/f64, a matrix with neither unit-stride rows nor columns after a
 * copy, a K of 0 with beta != 0), the kernel declines and the op runs
 * through the cpu fallback (src/backend/fallback.c); ct__ocl_blas_status()
 * says which ("CLBlast 1.5 (libclblast.so.1)" or why not), and test_backend_ops
 * prints it.
 *
 * The kernel contract is the cpu k_gemm's (src/backend/cpu/linalg.c):
 * C[batch..., M, N] = alpha * A[batch..., M, K] @ B[batch..., K, N] + beta * C,
 * C (out[0]) contiguous, A and B any strides (batch strides may be 0); with
 * a third input (a bias row of N), C's operand of beta is the bias broadcast
 * over the rows.  Row-major GEMMs: a matrix with unit-stride rows goes as
 * is (ld = its row stride), one with unit-stride columns transposed (ld =
 * its column stride), any other is first copied contiguous on the device.
 * One CLBlast call per matrix of the batch, or one strided-batched call when
 * the batch is one dim. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../../ops/op_table.h"
#include "../gpu_dialect.h"
#include "ocl.h"

/* CLBlast's C API (clblast_c.h), declared here so that only the OpenCL
 * headers are needed to build: the enum values are CLBlast's ABI */
enum { CLB_ROW_MAJOR = 101, CLB_NO_TRANS = 111, CLB_TRANS = 112 };
typedef int (*clb_sgemm_fn)(int, int, int, size_t, size_t, size_t, float, cl_mem, size_t, size_t, cl_mem,
                            size_t, size_t, float, cl_mem, size_t, size_t, cl_command_queue *, cl_event *);
typedef int (*clb_dgemm_fn)(int, int, int, size_t, size_t, size_t, double, cl_mem, size_t, size_t, cl_mem,
                            size_t, size_t, double, cl_mem, size_t, size_t, cl_command_queue *, cl_event *);
typedef int (*clb_sgemm_sb_fn)(int, int, int, size_t, size_t, size_t, float, cl_mem, size_t, size_t, size_t,
                               cl_mem, size_t, size_t, size_t, float, cl_mem, size_t, size_t, size_t, size_t,
                               cl_command_queue *, cl_event *);
typedef int (*clb_dgemm_sb_fn)(int, int, int, size_t, size_t, size_t, double, cl_mem, size_t, size_t, size_t,
                               cl_mem, size_t, size_t, size_t, double, cl_mem, size_t, size_t, size_t, size_t,
                               cl_command_queue *, cl_event *);

static struct {
    clb_sgemm_fn sgemm;
    clb_dgemm_fn dgemm;
    clb_sgemm_sb_fn sgemm_sb;
    clb_dgemm_sb_fn dgemm_sb;
} clb;
static char g_status[256];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void clb_load(void) {
    const char *off = getenv("CT_OPENCL_CLBLAST");
    if (off && strcmp(off, "0") == 0) {
        snprintf(g_status, sizeof g_status, "CLBlast off (CT_OPENCL_CLBLAST=0): the matmul family runs "
                 "through the cpu fallback");
        return;
    }
    void *lib = dlopen("libclblast.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libclblast.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_status, sizeof g_status, "CLBlast not found (%s): the matmul family runs through the cpu "
                 "fallback", e ? e : "libclblast.so.1");
        return;
    }
    *(void **)&clb.sgemm = dlsym(lib, "CLBlastSgemm");
    *(void **)&clb.dgemm = dlsym(lib, "CLBlastDgemm");
    *(void **)&clb.sgemm_sb = dlsym(lib, "CLBlastSgemmStridedBatched");
    *(void **)&clb.dgemm_sb = dlsym(lib, "CLBlastDgemmStridedBatched");
    if (!clb.sgemm || !clb.dgemm) {
        memset(&clb, 0, sizeof clb);
        snprintf(g_status, sizeof g_status, "CLBlast without CLBlastSgemm/CLBlastDgemm: the matmul family runs "
                 "through the cpu fallback");
        return;
    }
    snprintf(g_status, sizeof g_status, "CLBlast (libclblast.so.1)%s", clb.sgemm_sb ? "" : " without strided batches");
}

const char *ct__ocl_blas_status(void) {
    pthread_once(&g_once, clb_load);
    return g_status;
}

/* How CLBlast reads a rows x cols matrix with element strides rs, cs
 * (row-major): *trans and *ld; false when neither stride is 1 (or ld is
 * too small). */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
    if (cs == 1 && (rows <= 1 || rs >= cols)) { *trans = CLB_NO_TRANS; *ld = rows <= 1 ? (cols > 0 ? cols : 1) : rs; return true; }
    if (rs == 1 && (cols <= 1 || cs >= rows)) { *trans = CLB_TRANS; *ld = cols <= 1 ? (rows > 0 ? rows : 1) : cs; return true; }
    if (cols <= 1) { *trans = CLB_NO_TRANS; *ld = rs >= 1 ? rs : 1; return rs >= 1; }
    if (rows <= 1) { *trans = CLB_TRANS; *ld = cs >= 1 ? cs : 1; return cs >= 1; }
    return false;
}

static ct_status no_kernel(const char *op, const char *why) { return ct__no_device_kernel(op, CT_OPENCL, why); }

static ct_status k_gemm(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    (void)nout;
    const char *name = ct__op_info[a->op].name;
    ct_tensor *C = out[0], *A = in[0], *B = in[1], *bias = nin > 2 ? in[2] : NULL;
    ct_dtype dt = C->dtype;
    if (dt != CT_F32 && dt != CT_F64) return no_kernel(name, ct_dtype_name(dt));
    pthread_once(&g_once, clb_load);
    if (!clb.sgemm) return no_kernel(name, g_status);
    int nd = C->ndim, nb = nd - 2;
    if (nd < 2 || A->ndim != nd || B->ndim != nd || !ct__is_contiguous(C))
        return no_kernel(name, "layout");
    if (bias && (bias->dtype != dt || !ct__is_contiguous(bias) || ct_numel(bias) != C->sizes[nd - 1]))
        return no_kernel(name, "bias layout");
    int64_t M = C->sizes[nd - 2], N = C->sizes[nd - 1], K = A->sizes[nd - 1];
    double alpha = a->p.linalg.alpha, beta = a->p.linalg.beta;
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) nbatch *= C->sizes[d];
    if (nbatch == 0 || M == 0 || N == 0) return CT_OK;
    if (K == 0 && beta != 0 && !bias) return no_kernel(name, "K = 0 with beta");
    ct_tensor *Ac = NULL, *Bc = NULL;
    int ta = CLB_NO_TRANS, tb = CLB_NO_TRANS;
    int64_t lda, ldb;
    /* a matrix BLAS cannot read as it is: copied contiguous first (the device's copy kernel) */
    if (!blas_layout(M, K, A->strides[nd - 2], A->strides[nd - 1], &ta, &lda)) {
        if (!(Ac = ct__contig_as(A, dt))) return ct_last_error_code();
        A = Ac;
        blas_layout(M, K, A->strides[nd - 2], A->strides[nd - 1], &ta, &lda);
    }
    if (!blas_layout(K, N, B->strides[nd - 2], B->strides[nd - 1], &tb, &ldb)) {
        if (!(Bc = ct__contig_as(B, dt))) { ct_release(Ac); return ct_last_error_code(); }
        B = Bc;
        blas_layout(K, N, B->strides[nd - 2], B->strides[nd - 1], &tb, &ldb);
    }
    ct_status st = CT_OK;
    if (bias) { /* C's rows := the bias, then C = alpha * A @ B + beta * C */
        int64_t bst[CT_MAX_DIMS] = {0};
        bst[nd - 1] = 1;
        ct_tensor *bv = ct__view_of(bias, C->sizes, bst, nd, bias->offset);
        ct_tensor *o[1] = {C}, *i[1] = {bv};
        st = bv ? ct__dispatch(CT_OP_copy, o, 1, i, 1, NULL) : CT_ERR_OOM;
        ct_release(bv);
    }
    if (!st && K == 0) { /* C = beta * C: beta is 0 here, or the bias rows stay scaled below */
        if (!bias) {
            st = ct__ocl_memset(ct__ptr(C), 0, (size_t)(nbatch * M * N) * ct_dtype_size(dt));
        } else if (beta != 1) {
            ct_release(Ac);
            ct_release(Bc);
            return no_kernel(name, "K = 0 with a bias and beta != 1");
        }
        ct_release(Ac);
        ct_release(Bc);
        return st;
    }
    cl_mem ma, mb, mc;
    size_t oa, ob, oc;
    int da, db, dc;
    size_t es = ct_dtype_size(dt);
    if (!st && (!ct__ocl_lookup(ct__ptr(A), &ma, &oa, &da) || !ct__ocl_lookup(ct__ptr(B), &mb, &ob, &db) ||
                !ct__ocl_lookup(ct__ptr(C), &mc, &oc, &dc) || da != dc || db != dc))
        st = ct__error_status(CT_ERR_DEVICE, "%s: an operand is not on the opencl device of the output", name);
    if (!st) {
        cl_command_queue q = ct__ocl_queue(dc);
        int rc = 0;
        ct__ocl_lock();
        if (nb == 1 && nbatch > 1 && clb.sgemm_sb) { /* one strided-batched call */
            size_t sa = (size_t)A->strides[0], sb = (size_t)B->strides[0], sc = (size_t)(M * N);
            if (dt == CT_F32)
                rc = clb.sgemm_sb(CLB_ROW_MAJOR, ta, tb, M, N, K, (float)alpha, ma, oa / es, lda, sa, mb, ob / es, ldb,
                                  sb, (float)beta, mc, oc / es, N, sc, nbatch, &q, NULL);
            else
                rc = clb.dgemm_sb(CLB_ROW_MAJOR, ta, tb, M, N, K, alpha, ma, oa / es, lda, sa, mb, ob / es, ldb, sb,
                                  beta, mc, oc / es, N, sc, nbatch, &q, NULL);
        } else {
            for (int64_t b = 0; b < nbatch && rc == 0; b++) {
                int64_t rem = b, offa = 0, offb = 0;
                for (int d = nb - 1; d >= 0; d--) {
                    int64_t idx = rem % C->sizes[d];
                    rem /= C->sizes[d];
                    offa += idx * A->strides[d];
                    offb += idx * B->strides[d];
                }
                size_t pa = oa / es + (size_t)offa, pb = ob / es + (size_t)offb, pc = oc / es + (size_t)(b * M * N);
                if (dt == CT_F32)
                    rc = clb.sgemm(CLB_ROW_MAJOR, ta, tb, M, N, K, (float)alpha, ma, pa, lda, mb, pb, ldb, (float)beta,
                                   mc, pc, N, &q, NULL);
                else
                    rc = clb.dgemm(CLB_ROW_MAJOR, ta, tb, M, N, K, alpha, ma, pa, lda, mb, pb, ldb, beta, mc, pc, N,
                                   &q, NULL);
            }
        }
        ct__ocl_unlock();
        if (rc)
            st = ct__error_status(rc == -4 || rc == -5 ? CT_ERR_OOM : CT_ERR_DEVICE,
                                  "%s: opencl:%d: CLBlast's GEMM of [%lld, %lld] @ [%lld, %lld] (batch %lld) failed "
                                  "(CLBlast status %d)", name, dc, (long long)M, (long long)K, (long long)K,
                                  (long long)N, (long long)nbatch, rc);
    }
    ct_release(Ac);
    ct_release(Bc);
    return st;
}

void ct__ocl_register_blas(ct_kernel_fn *t) {
    static const ct_op ops[] = {CT_OP_mm, CT_OP_bmm, CT_OP_matmul, CT_OP_addmm, CT_OP_baddbmm, CT_OP_dot,
                                CT_OP_einsum, CT_OP_mv, CT_OP_vdot, CT_OP_outer, CT_OP_addmv, CT_OP_addr,
                                CT_OP_addbmm, CT_OP_linear, CT_OP_bilinear, CT_OP_tensordot, CT_OP_kron};
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) t[ops[k]] = k_gemm;
}

/* For the backend's other kernels (conv): one row-major GEMM on device
 * tensors' buffers, C = alpha * op(A) @ op(B) + beta * C, A/B/C given as a
 * tensor plus an element offset from its first element and a leading
 * dimension.  Declines (CT_ERR_DEVICE through ct__no_device_kernel) when
 * CLBlast is not there. */
ct_status ct__ocl_gemm(const char *what, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                       double alpha, const ct_tensor *A, int64_t aoff, int64_t lda, const ct_tensor *B,
                       int64_t boff, int64_t ldb, double beta, const ct_tensor *C, int64_t coff, int64_t ldc) {
    pthread_once(&g_once, clb_load);
    if (!clb.sgemm) return no_kernel(what, g_status);
    if (dt != CT_F32 && dt != CT_F64) return no_kernel(what, ct_dtype_name(dt));
    if (M == 0 || N == 0) return CT_OK;
    cl_mem ma, mb, mc;
    size_t oa, ob, oc;
    int da, db, dc;
    size_t es = ct_dtype_size(dt);
    if (!ct__ocl_lookup(ct__ptr(A), &ma, &oa, &da) || !ct__ocl_lookup(ct__ptr(B), &mb, &ob, &db) ||
        !ct__ocl_lookup(ct__ptr(C), &mc, &oc, &dc) || da != dc || db != dc)
        return ct__error_status(CT_ERR_DEVICE, "%s: a GEMM operand is not on the output's opencl device", what);
    cl_command_queue q = ct__ocl_queue(dc);
    int t1 = ta ? CLB_TRANS : CLB_NO_TRANS, t2 = tb ? CLB_TRANS : CLB_NO_TRANS, rc;
    ct__ocl_lock();
    if (dt == CT_F32)
        rc = clb.sgemm(CLB_ROW_MAJOR, t1, t2, M, N, K, (float)alpha, ma, oa / es + aoff, lda, mb, ob / es + boff, ldb,
                       (float)beta, mc, oc / es + coff, ldc, &q, NULL);
    else
        rc = clb.dgemm(CLB_ROW_MAJOR, t1, t2, M, N, K, alpha, ma, oa / es + aoff, lda, mb, ob / es + boff, ldb, beta,
                       mc, oc / es + coff, ldc, &q, NULL);
    ct__ocl_unlock();
    if (rc)
        return ct__error_status(rc == -4 || rc == -5 ? CT_ERR_OOM : CT_ERR_DEVICE,
                                "%s: opencl:%d: CLBlast's GEMM of [%lld, %lld] @ [%lld, %lld] failed (CLBlast status %d)",
                                what, dc, (long long)M, (long long)K, (long long)K, (long long)N, rc);
    return CT_OK;
}

/* the kernel files' GEMM seam: batch GEMMs whose operands step by sa / sb /
 * sc elements; on this device one CLBlast GEMM each (as k_conv's per-group
 * loop always did), for another device (ct__gpu_foreign) one call of its
 * launcher's strided-batched gemm on the operands' element addresses */
ct_status ct__ocl_gemm_batched(const char *what, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                               double alpha, const ct_tensor *A, int64_t aoff, int64_t lda, int64_t sa,
                               const ct_tensor *B, int64_t boff, int64_t ldb, int64_t sb, double beta,
                               const ct_tensor *C, int64_t coff, int64_t ldc, int64_t sc, int64_t batch) {
    if (batch <= 0 || M == 0 || N == 0) return CT_OK;
    const ct_gpu_foreign *f = ct__gpu_foreign;
    if (f) {
        if (!f->gemm) return ct__no_device_kernel(what, f->type, "the device's launcher has no GEMM");
        if (dt != CT_F32 && dt != CT_F64) return ct__no_device_kernel(what, f->type, ct_dtype_name(dt));
        int dev = C->storage->device_index;
        const ct_tensor *ops[3] = {A, B, C};
        for (int k = 0; k < 3; k++)
            if (ops[k]->storage->device != f->type || ops[k]->storage->device_index != dev)
                return ct__error_status(CT_ERR_DEVICE, "%s: GEMM operand %d is not on the output's device", what, k);
        size_t es = ct_dtype_size(dt);
        return f->gemm(what, dev, dt, ta, tb, M, N, K, alpha, (const char *)ct__ptr(A) + aoff * (int64_t)es, lda, sa,
                       (const char *)ct__ptr(B) + boff * (int64_t)es, ldb, sb, beta,
                       (char *)ct__ptr(C) + coff * (int64_t)es, ldc, sc, batch);
    }
    ct_status st = CT_OK;
    for (int64_t b = 0; b < batch && !st; b++)
        st = ct__ocl_gemm(what, dt, ta, tb, M, N, K, alpha, A, aoff + b * sa, lda, B, boff + b * sb, ldb, beta, C,
                          coff + b * sc, ldc);
    return st;
}
