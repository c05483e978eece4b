/* test_cuda.c -- the CUDA device (src/backend/cuda, ctorch/cuda.h).
 *
 * Everywhere: the device parses ("cuda", "cuda:1"); ctorch/cuda.h's calls
 * answer consistently with the device count.  Where there is no CUDA
 * device (no driver, no GPU, or a build without the CUDA backend, as on the
 * CI machine): ct_cuda_is_available() is false, ct_cuda_device_count() 0,
 * and every use of a cuda tensor, stream, event, pinned memory or memory
 * statistic is an error saying "no CUDA device: <reason>", never a crash.
 * Where there is one (scripts/gpu-check.sh): copies to the device and back,
 * strided copies, fill, mm/bmm/matmul through cuBLAS against the cpu (float16 and
 * bfloat16 through cublasGemmStridedBatchedEx),
 * streams and events, pinned memory, the caching allocator's statistics,
 * and out-of-memory under CT_CUDA_MEMORY_LIMIT as an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backend/gpu_dialect.h"
#include "core/device.h"
#include "core/tensor_impl.h"
#include "ops/op_table.h"
#include "ctorch/ctorch.h"
#include "test_util.h"

const char *ct__cuda_nvrtc_missing(void); /* src/backend/cuda/backend.c */
const char *ct__cuda_kernel_route(int op);  /* src/backend/cuda/backend.c (cuda_none.c: NULL) */
ct_status ct__cuda_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *cubin_size, char *log,
                                 size_t logn);

static int g_n; /* cuda devices */
static const ct_dev CU0 = {CT_CUDA, 0};

static void parse_and_names(void **state) {
    (void)state;
    ct_dev d;
    assert_int_equal(ct_dev_parse("cuda", &d), CT_OK);
    assert_int_equal(d.type, CT_CUDA);
    assert_int_equal(d.index, 0);
    assert_int_equal(ct_dev_parse("cuda:1", &d), CT_OK);
    assert_int_equal(d.index, 1);
    char buf[16];
    assert_string_equal(ct_dev_str(CU0, buf, sizeof buf), "cuda:0");
    assert_int_equal(ct_device_count(CT_CUDA), g_n);
    assert_int_equal(ct_device_is_available(CT_CUDA), g_n > 0);
    ct_clear_error();
}

/* ---- no device ------------------------------------------------------------- */
static void no_device_errors(void **state) {
    (void)state;
    if (g_n > 0) skip();
    SCOPE_BEGIN;
    assert_false(ct_cuda_is_available());
    assert_non_null(strstr(ct_last_error(), "no CUDA device: "));
    ct_clear_error();
    assert_int_equal(ct_cuda_device_count(), 0);
    assert_non_null(strstr(ct_last_error(), "no CUDA device: "));
    ct_clear_error();
    ct_tensor *x = ct_ones((int64_t[]){3}, 1, CT_F32);
    expect_err(ct_to_dev(x, CU0), CT_ERR_DEVICE, "no CUDA device: ");
    expect_err(ct_zeros_dev((int64_t[]){2, 2}, 2, CT_F32, CT_DEV(CT_CUDA, 1)), CT_ERR_DEVICE, "no CUDA device: ");
    expect_err(ct_empty_dev((int64_t[]){2}, 1, CT_F64, CU0), CT_ERR_DEVICE, "no CUDA device: ");
    assert_int_equal(ct_set_default_device(CT_CUDA), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "no CUDA device: "));
    ct_clear_error();
    assert_int_equal(ct_get_default_device(), CT_CPU);
    assert_int_equal(ct_cuda_synchronize(0), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "no CUDA device: "));
    ct_clear_error();
    assert_int_equal(ct_dev_synchronize(CU0), CT_ERR_DEVICE);
    ct_clear_error();
    expect_err(ct_cuda_stream_new(0), CT_ERR_DEVICE, "no CUDA device: ");
    expect_err(ct_cuda_event_new(0, true), CT_ERR_DEVICE, "no CUDA device: ");
    expect_err(ct_cuda_get_device_name(0), CT_ERR_DEVICE, "no CUDA device: ");
    expect_err(ct_pin_memory(x), CT_ERR_DEVICE, "no CUDA device: ");
    assert_false(ct_is_pinned(x));
    assert_int_equal(ct_memory_allocated(CU0), 0);
    assert_int_equal(ct_last_error_code(), CT_ERR_DEVICE);
    assert_non_null(strstr(ct_last_error(), "no CUDA device: "));
    ct_clear_error();
    expect_err(ct_memory_summary(CU0), CT_ERR_DEVICE, "no CUDA device: ");
    assert_int_equal(ct_cuda_set_stream(NULL), CT_OK); /* the default stream: nothing to do */
    /* the cpu is untouched by all this */
    assert_float_equal(ct_item(ct_sum(x, NULL, 0, false)), 3.0, 0);
    SCOPE_END;
}

/* ---- with a device (not reached on machines without one) -------------------- */
static void max_abs_diff_le(ct_tensor *dev_result, ct_tensor *cpu_result, double tol) {
    ct_tensor *back = ct_to_dev(dev_result, CT_DEV(CT_CPU, 0));
    assert_non_null(back);
    assert_int_equal(ct_ndim(back), ct_ndim(cpu_result));
    ct_tensor *d = ct_amax(ct_abs(ct_sub(ct_to_dtype(back, CT_F64), ct_to_dtype(cpu_result, CT_F64))), NULL, 0, false);
    assert_non_null(d);
    double m = ct_item(d);
    if (!(m <= tol)) fail_msg("max |cuda - cpu| = %g > %g", m, tol);
}

static void copies_and_fill(void **state) {
    (void)state;
    if (g_n == 0) skip();
    SCOPE_BEGIN;
    printf("cuda:0 is %s\n", ct_cuda_get_device_name(0));
    ct_manual_seed(1);
    ct_tensor *x = ct_randn((int64_t[]){33, 65}, 2, CT_F32);
    ct_tensor *xd = ct_to_dev(x, CU0);
    assert_non_null(xd);
    assert_true(ct_dev_equal(ct_tensor_dev(xd), CU0));
    assert_int_equal(ct_equal(ct_to_dev(xd, CT_DEV(CT_CPU, 0)), x), 1);
    /* strided: a transposed view made contiguous on the device */
    ct_tensor *td = ct_contiguous(ct_transpose(xd, 0, 1));
    assert_int_equal(ct_equal(ct_to_dev(td, CT_DEV(CT_CPU, 0)), ct_contiguous(ct_transpose(x, 0, 1))), 1);
    /* fill, every element size */
    ct_dtype dts[] = {CT_U8, CT_I16, CT_F32, CT_F64, CT_C128};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        ct_tensor *f = ct_full_dev((int64_t[]){5, 3}, 2, 7.0, dts[k], CU0);
        assert_non_null(f);
        assert_int_equal(ct_equal(ct_to_dev(f, CT_DEV(CT_CPU, 0)), ct_to_dtype(ct_full((int64_t[]){5, 3}, 2, 7.0, CT_F32), dts[k])), 1);
    }
    /* the OpenCL device's kernel text run here: elementwise with a wrapped
     * number, a conversion, reductions, softmax, cumsum */
    ct_tensor *y = ct_randn((int64_t[]){33, 65}, 2, CT_F32), *yd = ct_to_dev(y, CU0);
    max_abs_diff_le(ct_add(ct_mul(xd, ct_scalar(2.5, CT_F32)), yd), ct_add(ct_mul(x, ct_scalar(2.5, CT_F32)), y), 1e-6);
    max_abs_diff_le(ct_exp(ct_transpose(xd, 0, 1)), ct_exp(ct_transpose(x, 0, 1)), 1e-5);
    max_abs_diff_le(ct_to_dtype(xd, CT_F64), ct_to_dtype(x, CT_F64), 0);
    max_abs_diff_le(ct_sum(xd, (int64_t[]){1}, 1, false), ct_sum(x, (int64_t[]){1}, 1, false), 1e-4);
    max_abs_diff_le(ct_amax(xd, (int64_t[]){0}, 1, true), ct_amax(x, (int64_t[]){0}, 1, true), 0);
    max_abs_diff_le(ct_softmax(xd, 1), ct_softmax(x, 1), 1e-6);
    max_abs_diff_le(ct_cumsum(xd, 0), ct_cumsum(x, 0), 1e-4);
    assert_int_equal(ct_cuda_synchronize(0), CT_OK);
    SCOPE_END;
}

static void matmul_cublas(void **state) {
    (void)state;
    if (g_n == 0) skip();
    SCOPE_BEGIN;
    ct_manual_seed(2);
    ct_dtype dts[2] = {CT_F32, CT_F64};
    for (int k = 0; k < 2; k++) {
        double tol = dts[k] == CT_F32 ? 1e-4 : 1e-12;
        ct_tensor *a = ct_randn((int64_t[]){37, 19}, 2, dts[k]), *b = ct_randn((int64_t[]){19, 23}, 2, dts[k]);
        ct_tensor *ad = ct_to_dev(a, CU0), *bd = ct_to_dev(b, CU0);
        max_abs_diff_le(ct_mm(ad, bd), ct_mm(a, b), tol);
        /* transposed operands (cuBLAS's op T) and a row of one */
        ct_tensor *at = ct_transpose(ct_to_dev(ct_contiguous(ct_transpose(a, 0, 1)), CU0), 0, 1);
        max_abs_diff_le(ct_mm(at, bd), ct_mm(a, b), tol);
        max_abs_diff_le(ct_mm(ct_narrow(ad, 0, 3, 1), bd), ct_mm(ct_narrow(a, 0, 3, 1), b), tol);
        /* batched, and a batch broadcast through matmul */
        ct_tensor *p = ct_randn((int64_t[]){4, 5, 6}, 3, dts[k]), *q = ct_randn((int64_t[]){4, 6, 7}, 3, dts[k]);
        max_abs_diff_le(ct_bmm(ct_to_dev(p, CU0), ct_to_dev(q, CU0)), ct_bmm(p, q), tol);
        ct_tensor *r = ct_randn((int64_t[]){6, 3}, 2, dts[k]);
        max_abs_diff_le(ct_matmul(ct_to_dev(p, CU0), ct_to_dev(r, CU0)), ct_matmul(p, r), tol);
        /* an empty inner dimension: zeros */
        ct_tensor *e = ct_mm(ct_zeros_dev((int64_t[]){3, 0}, 2, dts[k], CU0), ct_zeros_dev((int64_t[]){0, 2}, 2, dts[k], CU0));
        max_abs_diff_le(e, ct_zeros((int64_t[]){3, 2}, 2, dts[k]), 0);
    }
    /* float16 / bfloat16 (cublasGemmStridedBatchedEx, summed in float32): against the float64 product of
     * the same (rounded) operands, within the output's rounding (|C| <~ 8: half an ulp is 2^-8 / 2^-5) */
    ct_dtype hts[2] = {CT_F16, CT_BF16};
    for (int k = 0; k < 2; k++) {
        double tol = hts[k] == CT_F16 ? 8 * 0x1p-11 : 8 * 0x1p-8;
        ct_tensor *a = ct_to_dtype(ct_randn((int64_t[]){2, 37, 19}, 3, CT_F32), hts[k]);
        ct_tensor *b = ct_to_dtype(ct_randn((int64_t[]){2, 19, 23}, 3, CT_F32), hts[k]);
        long fb = ct__fallback_runs(CT_OP_bmm);
        ct_tensor *c = ct_bmm(ct_to_dev(a, CU0), ct_to_dev(b, CU0));
        assert_non_null(c);
        assert_int_equal(ct_get_dtype(c), hts[k]);
        assert_int_equal(ct__fallback_runs(CT_OP_bmm), fb); /* cuBLAS ran it */
        max_abs_diff_le(c, ct_bmm(ct_to_dtype(a, CT_F64), ct_to_dtype(b, CT_F64)), tol);
    }
    SCOPE_END;
}

static void streams_events_pinned(void **state) {
    (void)state;
    if (g_n == 0) skip();
    SCOPE_BEGIN;
    ct_cuda_stream *s = ct_cuda_stream_new(0);
    assert_non_null(s);
    assert_null(ct_cuda_current_stream(0));
    assert_int_equal(ct_cuda_set_stream(s), CT_OK);
    assert_ptr_equal(ct_cuda_current_stream(0), s);
    ct_cuda_event *e0 = ct_cuda_event_new(0, true), *e1 = ct_cuda_event_new(0, true);
    assert_int_equal(ct_cuda_event_record(e0, NULL), CT_OK);
    ct_tensor *x = ct_randn((int64_t[]){256, 256}, 2, CT_F32);
    ct_tensor *pinned = ct_pin_memory(x);
    assert_non_null(pinned);
    assert_true(ct_is_pinned(pinned));
    assert_false(ct_is_pinned(x));
    assert_int_equal(ct_equal(pinned, x), 1);
    ct_tensor *xd = ct_to_dev(pinned, CU0); /* on s, asynchronous */
    ct_tensor *yd = ct_mm(xd, xd);
    assert_int_equal(ct_cuda_event_record(e1, NULL), CT_OK);
    assert_int_equal(ct_cuda_event_synchronize(e1), CT_OK);
    assert_true(ct_cuda_event_query(e1));
    float ms = ct_cuda_event_elapsed_time(e0, e1);
    assert_true(ms >= 0);
    max_abs_diff_le(yd, ct_mm(x, x), 1e-3);
    assert_int_equal(ct_cuda_stream_synchronize(0, s), CT_OK);
    assert_int_equal(ct_cuda_set_stream(NULL), CT_OK);
    assert_null(ct_cuda_current_stream(0));
    ct_cuda_event_free(e0);
    ct_cuda_event_free(e1);
    ct_cuda_stream_free(s);
    SCOPE_END;
}

static void allocator_and_oom(void **state) {
    (void)state;
    if (g_n == 0) skip();
    SCOPE_BEGIN;
    assert_int_equal(ct_empty_cache_dev(CU0), CT_OK);
    int64_t a0 = ct_memory_allocated(CU0);
    ct_tensor *x = ct_empty_dev((int64_t[]){1 << 20}, 1, CT_F32, CU0);
    assert_non_null(x);
    assert_int_equal(ct_memory_allocated(CU0), a0 + (4 << 20));
    /* the limit main sets (1 GiB): 2 GiB is an error naming the sizes */
    expect_err(ct_empty_dev((int64_t[]){(int64_t)1 << 29}, 1, CT_F32, CU0), CT_ERR_OOM,
               "2147483648 bytes requested");
    ct_tensor *y = ct_empty_dev((int64_t[]){(int64_t)1 << 29}, 1, CT_F32, CU0);
    assert_null(y);
    assert_non_null(strstr(ct_last_error(), "CT_CUDA_MEMORY_LIMIT"));
    ct_clear_error();
    char *sum = ct_memory_summary(CU0);
    assert_non_null(sum);
    printf("%s", sum);
    free(sum);
    SCOPE_END;
}

/* ---- the seam through which CUDA runs the OpenCL device's kernels ------------
 * (src/backend/gpu_dialect.h), checked without a GPU: a launcher of the
 * test's own stands in for CUDA's, on the OpenCL device's tensors.  The
 * kernels are not run; each launch's text, operand addresses, geometry and
 * extra argument are checked, and its text compiles as CUDA with NVRTC. */
typedef struct seam_rec {
    int launches, uploads, releases;
    char what[64];
    void *bufs[4];
    int64_t geom[2 + 16 + 64 + 4]; /* ndim, numel, shape[16], st[16][4], off[4] */
    int64_t numel;
    size_t lsz, esize;
    bool compiled;
    double uploaded;
    int arg_launches, nvals;      /* launch_args: the kernel files' texts */
    void *val0;                   /* its first parameter's value (a pointer) */
    int64_t val1;                 /* its second (the first tensor's offset) */
    size_t global;
} seam_rec;
static seam_rec g_seam;

/* the conv seam test's log of launches, in order: 'L' a generated kernel
 * (launch), 'A' a kernel file's text (launch_args), 'G' a GEMM */
typedef struct seam_ev {
    char kind;
    char what[48];
    void *p0, *p1;   /* L: the first two operand addresses; A: the first two tensors' */
    int64_t kp[24];  /* A: the last parameter when it is k_conv's geometry block */
    bool has_kp;
    size_t global;
    /* G */
    bool ta, tb;
    int64_t M, N, K, lda, ldb, ldc, sa, sb, sc, batch;
    const void *A, *B;
    void *C;
    double alpha, beta;
} seam_ev;
static seam_ev g_ev[64];
static int g_nev;
static bool g_logging;
static seam_ev *log_ev(char kind, const char *what) {
    if (!g_logging || g_nev == 64) return NULL;
    seam_ev *e = &g_ev[g_nev++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    snprintf(e->what, sizeof e->what, "%s", what);
    return e;
}

static ct_status seam_launch(const char *what, const char *prelude, const char *helpers, const char *body, int dev,
                             void *const bufs[4], const void *geom, size_t gsize, const void *extra, size_t esize,
                             int64_t numel, size_t lsz) {
    (void)extra;
    assert_int_equal(dev, 0);
    assert_int_equal(gsize, sizeof g_seam.geom);
    g_seam.launches++;
    snprintf(g_seam.what, sizeof g_seam.what, "%s", what);
    seam_ev *e = log_ev('L', what);
    if (e) e->p0 = bufs[0], e->p1 = bufs[1], e->global = (size_t)numel;
    memcpy(g_seam.bufs, bufs, sizeof g_seam.bufs);
    memcpy(g_seam.geom, geom, gsize);
    g_seam.numel = numel;
    g_seam.lsz = lsz;
    g_seam.esize = esize;
    assert_non_null(strstr(body, "__kernel void k("));
    g_seam.compiled = false;
    if (!ct__cuda_nvrtc_missing()) {
        size_t n = strlen(ct__cuda_dialect_prelude) + strlen(prelude) + strlen(helpers) + strlen(body) + 4;
        char *src = malloc(n);
        assert_non_null(src);
        snprintf(src, n, "%s%s%s\n%s", ct__cuda_dialect_prelude, prelude, helpers, body);
        static char log[8192];
        ct_status st = ct__cuda_nvrtc_compile(src, "sm_80", NULL, NULL, log, sizeof log);
        if (st) fail_msg("%s does not compile as CUDA: %s", what, log);
        g_seam.compiled = true;
        free(src);
    }
    return CT_OK;
}

static ct_status seam_launch_args(const char *what, const char *prelude, const char *body, int dev,
                                  void *const *vals, const size_t *sizes, int nvals, size_t global) {
    assert_int_equal(dev, 0);
    g_seam.arg_launches++;
    snprintf(g_seam.what, sizeof g_seam.what, "%s", what);
    seam_ev *e = log_ev('A', what);
    if (e) {
        memcpy(&e->p0, vals[0], sizeof(void *));
        if (nvals >= 3 && sizes[2] == sizeof(void *)) memcpy(&e->p1, vals[2], sizeof(void *));
        if (sizes[nvals - 1] == sizeof e->kp) memcpy(e->kp, vals[nvals - 1], sizeof e->kp), e->has_kp = true;
        e->global = global;
    }
    g_seam.nvals = nvals;
    assert_true(nvals >= 2);
    assert_int_equal(sizes[0], sizeof(void *));
    assert_int_equal(sizes[1], sizeof(int64_t));
    memcpy(&g_seam.val0, vals[0], sizeof(void *));
    memcpy(&g_seam.val1, vals[1], sizeof(int64_t));
    g_seam.global = global;
    assert_non_null(strstr(body, "CT_KERNEL void k("));
    if (!ct__cuda_nvrtc_missing()) {
        size_t n = strlen(ct__cuda_dialect_prelude) + strlen(prelude) + strlen(body) + 4;
        char *src = malloc(n);
        assert_non_null(src);
        snprintf(src, n, "%s%s\n%s", ct__cuda_dialect_prelude, prelude, body);
        static char log[8192];
        ct_status st = ct__cuda_nvrtc_compile(src, "sm_80", NULL, NULL, log, sizeof log);
        if (st) fail_msg("%s does not compile as CUDA: %s", what, log);
        free(src);
    }
    return CT_OK;
}

static void *seam_upload(int dev, const void *host, size_t n) {
    (void)dev;
    g_seam.uploads++;
    if (n == 4) { float f; memcpy(&f, host, 4); g_seam.uploaded = f; }
    void *p = malloc(n);
    memcpy(p, host, n);
    return p;
}

static void seam_release(void *p) {
    g_seam.releases++;
    free(p);
}

static ct_status seam_gemm(const char *what, int dev, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                           double alpha, const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb,
                           double beta, void *C, int64_t ldc, int64_t sc, int64_t batch) {
    assert_int_equal(dev, 0);
    assert_int_equal(dt, CT_F32);
    seam_ev *e = log_ev('G', what);
    assert_non_null(e);
    e->ta = ta, e->tb = tb, e->M = M, e->N = N, e->K = K, e->alpha = alpha, e->beta = beta;
    e->A = A, e->lda = lda, e->sa = sa, e->B = B, e->ldb = ldb, e->sb = sb, e->C = C, e->ldc = ldc, e->sc = sc;
    e->batch = batch;
    return CT_OK;
}

static void foreign_seam(void **state) {
    (void)state;
    const char *names[2];
    if (ct_opencl_devices(names, 2) <= 0) {
        printf("foreign_seam: skipped: %s\n", ct_last_error());
        ct_clear_error();
        skip();
    }
    SCOPE_BEGIN;
    ct_dev ocl = CT_DEV(CT_OPENCL, 0);
    ct_tensor *x = ct_to_dev(ct_arange(0, 6, 1, CT_F32), ocl), *y = ct_to_dev(ct_ones((int64_t[]){6}, 1, CT_F32), ocl);
    ct_tensor *xi = ct_to_dev(ct_arange(1, 7, 1, CT_I64), ocl);
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(xi);
    static const ct_gpu_foreign seam = {CT_OPENCL, seam_launch, seam_launch_args, seam_upload, seam_release, NULL};
    memset(&g_seam, 0, sizeof g_seam);
    ct__gpu_foreign = &seam;
    /* elementwise: the operands' element addresses, offsets 0, 6 items */
    ct_tensor *s = ct_add(ct_narrow(x, 0, 1, 3), ct_narrow(y, 0, 2, 3));
    assert_non_null(s);
    assert_int_equal(g_seam.launches, 1);
    assert_string_equal(g_seam.what, "add");
    assert_ptr_equal(g_seam.bufs[0], ct__ptr(s));
    assert_ptr_equal(g_seam.bufs[1], (char *)ct__ptr(x) + 4);
    assert_ptr_equal(g_seam.bufs[2], (char *)ct__ptr(y) + 8);
    assert_int_equal(g_seam.numel, 3);
    assert_int_equal(g_seam.geom[1], 3);
    for (int k = 0; k < 4; k++) assert_int_equal(g_seam.geom[2 + 16 + 64 + k], 0);
    assert_int_equal(g_seam.lsz, 64);
    assert_true(g_seam.esize > 0); /* the parameter values */
    /* a wrapped number: uploaded through the launcher, released after */
    assert_non_null(ct_mul(x, ct_scalar(2.5, CT_F32)));
    assert_int_equal(g_seam.launches, 2);
    assert_int_equal(g_seam.uploads, 1);
    assert_int_equal(g_seam.releases, 1);
    assert_float_equal(g_seam.uploaded, 2.5, 0);
    /* a reduction (its operands through dev_addr) and softmax */
    ct_tensor *r = ct_sum(x, NULL, 0, false);
    assert_non_null(r);
    assert_int_equal(g_seam.launches, 3);
    assert_ptr_equal(g_seam.bufs[1], ct__ptr(x));
    assert_ptr_equal(g_seam.bufs[0], ct__ptr(r));
    assert_non_null(ct_softmax(x, 0));
    assert_int_equal(g_seam.launches, 4);
    /* a kernel file's op (index_select, ct__ocl_launch): its parameters in
     * order, the output first as its element address and offset 0 */
    ct_tensor *sel = ct_index_select(x, 0, ct_to_dev(ct_arange(0, 3, 1, CT_I64), ocl));
    assert_non_null(sel);
    assert_int_equal(g_seam.arg_launches, 1);
    assert_string_equal(g_seam.what, "index_select");
    assert_ptr_equal(g_seam.val0, ct__ptr(sel));
    assert_int_equal(g_seam.val1, 0);
    assert_int_equal(g_seam.nvals, 7); /* three tensors (address, offset) and the parameters */
    assert_int_equal(g_seam.global, 3);
    /* a random op: the CPU's Philox kernel text, one work item per block of 4 floats */
    assert_non_null(ct_uniform_(x, 0.0, 1.0));
    assert_int_equal(g_seam.arg_launches, 2);
    assert_string_equal(g_seam.what, "uniform");
    assert_int_equal(g_seam.global, 2);
    /* integer division needs a zero check the seam does not run: the
     * kernel declines and the cpu fallback (src/backend/fallback.c) serves */
    int launches = g_seam.launches;
    long fb = ct__fallback_runs(CT_OP_div_floor);
    ct_tensor *q = ct_floor_divide(xi, xi);
    ct__gpu_foreign = NULL;
    assert_non_null(q);
    assert_int_equal(g_seam.launches, launches);
    assert_int_equal(ct__fallback_runs(CT_OP_div_floor), fb + 1);
    assert_float_equal(ct_item(ct_sum(ct_to_dev(q, CT_DEV(CT_CPU, 0)), NULL, 0, false)), 6.0, 0);
    printf("foreign_seam: %d launches%s\n", g_seam.launches,
           g_seam.compiled ? ", each text compiled as CUDA with NVRTC" : " (NVRTC absent: texts not compiled)");
    /* and without the seam the OpenCL device computes as before */
    assert_float_equal(ct_item(ct_sum(ct_add(x, y), NULL, 0, false)), 21.0, 0);
    SCOPE_END;
}

/* a GEMM event's problem run twice on host data: row-major from the seam's
 * arguments (the reference), and column-major as cuBLAS would run the call
 * ct__gpu_colmajor_gemm makes of them; the two must agree */
static float at_rm(const float *X, bool t, int64_t ld, int64_t r, int64_t c) { return t ? X[c * ld + r] : X[r * ld + c]; }
static float at_cm(const float *X, char t, int64_t ld, int64_t i, int64_t j) { return t == 'T' ? X[j + i * ld] : X[i + j * ld]; }
static void check_colmajor(const seam_ev *e) {
    int64_t ra = e->ta ? e->K : e->M, rb = e->tb ? e->N : e->K; /* rows of the stored A, B */
    size_t na = (size_t)((e->batch - 1) * e->sa + ra * e->lda), nb = (size_t)((e->batch - 1) * e->sb + rb * e->ldb);
    size_t nc = (size_t)((e->batch - 1) * e->sc + e->M * e->ldc);
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C0 = malloc(nc * sizeof *C0),
          *C1 = malloc(nc * sizeof *C1);
    assert_non_null(A), assert_non_null(B), assert_non_null(C0), assert_non_null(C1);
    for (size_t i = 0; i < na; i++) A[i] = (float)((i * 7 + 3) % 11) - 5.0f;
    for (size_t i = 0; i < nb; i++) B[i] = (float)((i * 5 + 1) % 13) - 6.0f;
    for (size_t i = 0; i < nc; i++) C0[i] = C1[i] = (float)(i % 3);
    for (int64_t b = 0; b < e->batch; b++)
        for (int64_t r = 0; r < e->M; r++)
            for (int64_t c = 0; c < e->N; c++) {
                double acc = 0;
                for (int64_t l = 0; l < e->K; l++)
                    acc += (double)at_rm(A + b * e->sa, e->ta, e->lda, r, l) * at_rm(B + b * e->sb, e->tb, e->ldb, l, c);
                float *o = C0 + b * e->sc + r * e->ldc + c;
                *o = (float)(e->alpha * acc + e->beta * *o);
            }
    ct_gpu_colmajor_gemm g = ct__gpu_colmajor_gemm(e->ta, e->tb, e->M, e->N, e->K, A, e->lda, e->sa, B, e->ldb, e->sb,
                                                   C1, e->ldc, e->sc, e->batch);
    assert_ptr_equal(g.c, C1);
    for (int64_t b = 0; b < g.batch; b++) /* cuBLAS's definition, column-major */
        for (int64_t i = 0; i < g.m; i++)
            for (int64_t j = 0; j < g.n; j++) {
                double acc = 0;
                for (int64_t l = 0; l < g.k; l++)
                    acc += (double)at_cm((const float *)g.a + b * g.stride_a, g.transa, g.lda, i, l) *
                           at_cm((const float *)g.b + b * g.stride_b, g.transb, g.ldb, l, j);
                float *o = (float *)g.c + b * g.stride_c + i + j * g.ldc;
                *o = (float)(e->alpha * acc + e->beta * *o);
            }
    for (size_t i = 0; i < nc; i++) assert_float_equal(C0[i], C1[i], 0);
    free(A), free(B), free(C0), free(C1);
}

static int find_ev(int from, char kind, const char *what) {
    for (int k = from; k < g_nev; k++)
        if (g_ev[k].kind == kind && strcmp(g_ev[k].what, what) == 0) return k;
    return -1;
}

/* The convolutions as the CUDA backend runs them (k_conv.c's kernel
 * functions through the seam): x [2, 4, 5, 5], w [6, 2, 3, 3], groups 2,
 * stride 2, padding 1, bias; forward, then the input and weight gradients.
 * The launch sequence (im2col/col2im and the permuting copies as kernel
 * text, the GEMMs through the seam's gemm, one strided-batched call over
 * the groups) and every GEMM argument are checked against values worked
 * out here from the geometry, and each GEMM's cuBLAS form is run on host
 * data against the row-major product. */
static void conv_seam(void **state) {
    (void)state;
    const char *names[2];
    if (ct_opencl_devices(names, 2) <= 0) {
        printf("conv_seam: skipped: %s\n", ct_last_error());
        ct_clear_error();
        skip();
    }
    ct__backends_init();
    if (ct__device(CT_CUDA)) { /* a build with the CUDA backend serves the convolutions so */
        for (int op = 0; op < 3; op++) {
            ct_op o = op == 0 ? CT_OP_conv : op == 1 ? CT_OP_conv_transpose : CT_OP_conv_wgrad;
            assert_non_null(ct__cuda_kernel_route(o));
            assert_string_equal(ct__cuda_kernel_route(o), "ocl-text+cublas");
        }
    }
    SCOPE_BEGIN;
    enum { Nb = 2, Ci = 4, Co = 6, G = 2, H = 5, KH = 3, S = 2, P = 1 };
    const int64_t Ho = (H + 2 * P - KH) / S + 1, L = Ho * Ho, KK = KH * KH, NL = Nb * L;
    ct_dev ocl = CT_DEV(CT_OPENCL, 0);
    ct_tensor *x = ct_to_dev(ct_randn((int64_t[]){Nb, Ci, H, H}, 4, CT_F32), ocl);
    ct_tensor *w = ct_to_dev(ct_randn((int64_t[]){Co, Ci / G, KH, KH}, 4, CT_F32), ocl);
    ct_tensor *b = ct_to_dev(ct_randn((int64_t[]){Co}, 1, CT_F32), ocl);
    assert_non_null(x), assert_non_null(w), assert_non_null(b);
    assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
    assert_int_equal(ct_set_requires_grad(w, true), CT_OK);
    static const ct_gpu_foreign seam = {CT_OPENCL, seam_launch, seam_launch_args, seam_upload, seam_release, seam_gemm};
    memset(&g_seam, 0, sizeof g_seam);
    g_nev = 0;
    g_logging = true;
    ct__gpu_foreign = &seam;
    ct_tensor *y = ct_conv2d(x, w, b, (const int64_t[2]){S, S}, (const int64_t[2]){P, P}, NULL, G);
    int nfwd = g_nev;
    ct_status bst = y ? ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false) : CT_ERR_RUNTIME;
    ct__gpu_foreign = NULL;
    g_logging = false;
    for (int k = 0; k < g_nev; k++)
        printf("  %2d %c %-22s global %zu%s\n", k, g_ev[k].kind, g_ev[k].what, g_ev[k].global, k + 1 == nfwd ? "  (forward ends)" : "");
    assert_non_null(y);
    assert_int_equal(bst, CT_OK);
    /* forward: the bias rows (a copy), im2col, one GEMM over the groups, the permuting copy */
    assert_int_equal(nfwd, 4);
    assert_int_equal(g_ev[0].kind, 'L');
    assert_int_equal(g_ev[1].kind, 'A');
    assert_string_equal(g_ev[1].what, "conv");
    assert_int_equal(g_ev[2].kind, 'G');
    assert_string_equal(g_ev[2].what, "conv");
    assert_int_equal(g_ev[3].kind, 'L');
    const seam_ev *im = &g_ev[1], *gm = &g_ev[2];
    assert_true(im->has_kp);
    assert_ptr_equal(im->p0, ct__ptr(x));
    assert_int_equal(im->global, Nb * Ci * KK);           /* one item per column row */
    assert_int_equal(im->kp[2], Nb), assert_int_equal(im->kp[3], Ci); /* layout [C*K, N*L] */
    assert_int_equal(im->kp[8], Ho), assert_int_equal(im->kp[9], Ho);
    assert_int_equal(g_ev[0].global, Co * NL);            /* the bias over the product's rows */
    assert_false(gm->ta), assert_false(gm->tb);
    assert_int_equal(gm->M, Co / G), assert_int_equal(gm->N, NL), assert_int_equal(gm->K, Ci / G * KK);
    assert_ptr_equal(gm->A, ct__ptr(w));
    assert_int_equal(gm->lda, Ci / G * KK), assert_int_equal(gm->sa, Co / G * Ci / G * KK);
    assert_ptr_equal(gm->B, im->p1);                       /* the columns im2col wrote */
    assert_int_equal(gm->ldb, NL), assert_int_equal(gm->sb, Ci / G * KK * NL);
    assert_ptr_equal(gm->C, g_ev[0].p0);                   /* the product the bias rows went to */
    assert_ptr_equal(g_ev[3].p1, gm->C);                   /* ... permuted into y */
    assert_ptr_equal(g_ev[3].p0, ct__ptr(y));
    assert_int_equal(gm->ldc, NL), assert_int_equal(gm->sc, Co / G * NL);
    assert_int_equal(gm->batch, G);
    assert_float_equal(gm->alpha, 1, 0), assert_float_equal(gm->beta, 1, 0); /* onto the bias */
    check_colmajor(gm);
    /* input gradient (conv_transpose): the permuted gradient, one GEMM with w^T, col2im */
    int t = find_ev(nfwd, 'G', "conv_transpose");
    assert_true(t > nfwd);
    const seam_ev *gt = &g_ev[t];
    assert_int_equal(g_ev[t - 1].kind, 'L');
    assert_ptr_equal(gt->B, g_ev[t - 1].p0);               /* the gradient as [Co, N*L] */
    assert_true(gt->ta), assert_false(gt->tb);
    assert_int_equal(gt->M, Ci / G * KK), assert_int_equal(gt->N, NL), assert_int_equal(gt->K, Co / G);
    assert_ptr_equal(gt->A, ct__ptr(w));
    assert_int_equal(gt->lda, Ci / G * KK), assert_int_equal(gt->sa, Co / G * Ci / G * KK);
    assert_int_equal(gt->ldb, NL), assert_int_equal(gt->sb, Co / G * NL);
    assert_int_equal(gt->ldc, NL), assert_int_equal(gt->sc, Ci / G * KK * NL);
    assert_int_equal(gt->batch, G);
    assert_float_equal(gt->beta, 0, 0);
    assert_true(t + 1 < g_nev);
    assert_int_equal(g_ev[t + 1].kind, 'A');
    assert_string_equal(g_ev[t + 1].what, "conv_transpose");
    assert_ptr_equal(g_ev[t + 1].p0, gt->C);               /* col2im reads the GEMM's columns */
    assert_int_equal(g_ev[t + 1].global, Nb * Ci * H);     /* one item per image row */
    check_colmajor(gt);
    /* weight gradient: im2col of x, the permuted gradient, one GEMM against the columns^T */
    int u = find_ev(nfwd, 'G', "conv weight gradient");
    assert_true(u > nfwd);
    const seam_ev *gw = &g_ev[u];
    int ui = find_ev(nfwd, 'A', "conv weight gradient");
    assert_true(ui > nfwd && ui < u);
    assert_ptr_equal(g_ev[ui].p0, ct__ptr(x));
    assert_ptr_equal(gw->B, g_ev[ui].p1);
    assert_false(gw->ta), assert_true(gw->tb);
    assert_int_equal(gw->M, Co / G), assert_int_equal(gw->N, Ci / G * KK), assert_int_equal(gw->K, NL);
    assert_int_equal(gw->lda, NL), assert_int_equal(gw->sa, Co / G * NL);
    assert_int_equal(gw->ldb, NL), assert_int_equal(gw->sb, Ci / G * KK * NL);
    assert_int_equal(gw->ldc, Ci / G * KK), assert_int_equal(gw->sc, Co / G * Ci / G * KK);
    assert_int_equal(gw->batch, G);
    assert_float_equal(gw->beta, 0, 0);
    check_colmajor(gw);
    /* without the seam the OpenCL device computes the same convolution as the cpu */
    ct_tensor *yo = ct_conv2d(x, w, b, (const int64_t[2]){S, S}, (const int64_t[2]){P, P}, NULL, G);
    ct_tensor *yc = ct_conv2d(ct_to_dev(x, CT_DEV(CT_CPU, 0)), ct_to_dev(w, CT_DEV(CT_CPU, 0)),
                              ct_to_dev(b, CT_DEV(CT_CPU, 0)), (const int64_t[2]){S, S}, (const int64_t[2]){P, P}, NULL, G);
    assert_non_null(yo), assert_non_null(yc);
    assert_true(ct_allclose(ct_to_dev(yo, CT_DEV(CT_CPU, 0)), yc, 1e-4, 1e-5, false));
    SCOPE_END;
}

int main(void) {
    setenv("CT_CUDA_MEMORY_LIMIT", "1073741824", 1);
    g_n = ct_cuda_device_count();
    if (g_n == 0) printf("test_cuda: no CUDA device (%s): the device cases are skipped, the errors checked\n",
                         ct_last_error());
    ct_clear_error();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_and_names),
        cmocka_unit_test(no_device_errors),
        cmocka_unit_test(copies_and_fill),
        cmocka_unit_test(matmul_cublas),
        cmocka_unit_test(streams_events_pinned),
        cmocka_unit_test(allocator_and_oom),
        cmocka_unit_test(foreign_seam),
        cmocka_unit_test(conv_seam),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
