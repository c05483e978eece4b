/* test_op_table.c -- the op table, one row per op: its parameter family
 * (with its field count), its meta function, whether the CPU and meta
 * devices have a kernel, how each GPU device serves it (the opencl and
 * cuda columns, below), its vjp, its jvp (own: a formula of its own; dvjp:
 * the generic rule from its VJP), its batching rule (vmap: "-" runs per
 * sample under ct_vmap), and the C expression the compiler renders.  It
 * fails when an op has no meta function (the .meta column), when an op
 * that computes something (not a view, not composite) has no CPU kernel,
 * when a device's table misses an op the meta device must run, when a
 * differentiable op (flags without CT_OPF_NODIFF / CT_OPF_UNRECORDED and
 * with tensor inputs) has no vjp, when an op with a VJP (other than
 * ct__vjp_none) has no jvp or no batching rule (every differentiable op has
 * both: forward mode and vmap), when a parameter family is declared for no
 * op, or when an op has neither a kernel nor the cpu fallback on a GPU
 * device built in.
 *
 * The GPU columns come from what ct__dispatch runs (src/ops/dispatch.c):
 * the device's kernel slot when it has one, else the cpu fallback
 * (src/backend/fallback.c: the cpu kernel on host copies, for a device
 * whose memory is not the host's) when the op has a cpu kernel; a view
 * shares its input's storage and a composite runs other ops, on any device;
 * a fused op (CT_OPF_FUSED: ct__fused_kernel asserts the flag) without the
 * device's kernel runs its composite fallback of public ops on the device
 * ("dev-comp"), not the cpu fallback.
 *   opencl: kernel | dev-comp | fallback | view | comp | NONE, "-" in a
 *           build without the OpenCL backend;
 *   cuda:   cublas (the matmul family through cuBLAS), nvrtc (CUDA C of its
 *           own, compiled by NVRTC), ocl-text (the OpenCL device's kernel
 *           text run as CUDA C++ through the dialect prelude,
 *           src/backend/gpu_dialect.h), ocl-text+cublas (the convolutions:
 *           k_conv.c's texts so, their GEMMs through cuBLAS) | fallback | view | comp | NONE, "-"
 *           in a build without the CUDA backend (no device to dispatch to);
 *           else as opencl's.
 *           The routes are the CUDA backend's own account of its kernel
 *           table (ct__cuda_kernel_route).
 * A device kernel may decline a call (a dtype, a layout it has no code
 * for); that call then runs the fallback.  For the cuda column's ocl-text
 * ops this test measures it without a GPU (cuda_dry_run below): every case
 * of the op fixture families (the tables test_ops runs) runs on the cpu,
 * and each call of an ocl-text op first runs the OpenCL kernel function
 * as the CUDA backend does (ct__gpu_foreign set), with a launcher that
 * launches nothing: the kernel text it would compile is kept, or the call
 * is declined.  "ocl-text+fb" marks ops some of whose fixture calls were
 * declined, "ocl-text:fb" ops whose every call was (both still run through
 * the fallback there), "ocl-text?" ops that no call reached (their texts
 * are not compiled here: the summary names them).  Beside the fixture
 * cases, the dry run calls the ops no fixture family covers (the fused
 * optimizer steps, exponential, max_pool's backward, layer_norm, conv's
 * weight gradient: extra_calls).  Where NVRTC is loadable (the CUDA toolkit, no GPU
 * needed) every kept text is compiled for sm_80; a text that does not
 * compile fails the test.  (test_backend_ops compiles the texts of its
 * device runs for sm_80 and sm_90 too.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/device.h"
#include "core/tensor_impl.h"
#include "ctorch/ctorch.h"
#include "ctorch/optim.h"
#include "fixture.h"
#include "nvrtc_check.h"
#include "ops/op_table.h"
#include "ops/render.h"
#include "ops/rules.h"

const char *ct__cuda_kernel_route(int op); /* src/backend/cuda/backend.c (NULL: none; cuda_none.c: always) */

/* ---- the CUDA backend's OpenCL-text ops, run dry on the cpu ---------------- */
typedef struct dry_stat { long calls, texts, declined, errors; } dry_stat;
static dry_stat g_dry[CT_OP_COUNT];
static bool g_dry_done;
static ct_kernel_fn g_cpu_orig[CT_OP_COUNT];
static _Thread_local bool tl_in_dry;
static _Thread_local long tl_launches;

static ct_status dry_launch(const char *what, const char *prelude, const char *helpers, const char *body, int dev,
                            void *const bufs[4], const void *geom, size_t gsize, const void *extra, size_t esize,
                            int64_t numel, size_t lsz) {
    (void)what; (void)prelude; (void)helpers; (void)body; (void)dev; (void)bufs; (void)geom; (void)gsize;
    (void)extra; (void)esize; (void)numel; (void)lsz;
    tl_launches++; /* the text itself was recorded by ct__gpu_foreign_kernel */
    return CT_OK;
}
static ct_status dry_launch_args(const char *what, const char *prelude, const char *body, int dev,
                                 void *const *vals, const size_t *sizes, int nvals, size_t global) {
    (void)what; (void)prelude; (void)body; (void)dev; (void)vals; (void)sizes; (void)nvals; (void)global;
    tl_launches++; /* recorded by ct__gpu_foreign_launch_args */
    return CT_OK;
}
static void *dry_upload(int dev, const void *host, size_t n) {
    (void)dev;
    void *p = malloc(n ? n : 1);
    if (p && n) memcpy(p, host, n);
    return p;
}
static void dry_release(void *p) { free(p); }
static ct_status dry_gemm(const char *what, int dev, ct_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          double alpha, const void *A, int64_t lda, int64_t sa, const void *B, int64_t ldb, int64_t sb,
                          double beta, void *C, int64_t ldc, int64_t sc, int64_t batch) {
    (void)what; (void)dev; (void)dt; (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)lda;
    (void)sa; (void)B; (void)ldb; (void)sb; (void)beta; (void)C; (void)ldc; (void)sc; (void)batch;
    return CT_OK; /* cuBLAS's part: no text to compile */
}
/* the operands are cpu tensors: "device" CT_CPU for the kernel functions' checks */
static const ct_gpu_foreign k_dry = {CT_CPU, dry_launch, dry_launch_args, dry_upload, dry_release, dry_gemm};
/* "ocl-text" or "ocl-text+cublas" (the convolutions: their GEMMs through cuBLAS) */
static bool ocl_text_route(const char *r) { return r && strncmp(r, "ocl-text", 8) == 0; }

/* whether the CUDA backend runs the OpenCL kernel text for this call: its
 * ocl-text ops, and copy between two dtypes (its k_copy hands conversions
 * to the OpenCL text, same-dtype copies are its own CUDA C) */
static bool cuda_runs_ocl_text(ct_op op, ct_tensor *const *out, ct_tensor *const *in, int nin) {
    const char *r = ct__cuda_kernel_route(op);
    if (!r) return false;
    if (ocl_text_route(r)) return true;
    return op == CT_OP_copy && nin == 1 && out[0] && in[0] && out[0]->dtype != in[0]->dtype;
}

/* the cpu slot of the interposed ops: the OpenCL kernel function with the
 * dry launcher first (its text kept, or the call declined), then the cpu
 * kernel, whose result the fixture checks as always */
static ct_status dry_kernel(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    ct_op op = a->op;
    if (!tl_in_dry && cuda_runs_ocl_text(op, out, in, nin)) {
        dry_stat *d = &g_dry[op];
        tl_in_dry = true;
        long l0 = tl_launches;
        const ct_gpu_foreign *prev = ct__gpu_foreign;
        ct__gpu_foreign = &k_dry;
        (void)ct__device_kernel_declined();
        ct_status st = ct__kernels[CT_OPENCL][op](out, nout, in, nin, a);
        ct__gpu_foreign = prev;
        bool declined = ct__device_kernel_declined();
        tl_in_dry = false;
        d->calls++;
        if (st == CT_OK) d->texts += tl_launches > l0;
        else if (declined) d->declined++;
        else {
            if (d->errors++ == 0) {
                printf("  ^ %s: the OpenCL kernel text path fails (not declined): %s; operands:", ct__op_info[op].name,
                       ct_last_error());
                for (int k = 0; k < nout + nin; k++) {
                    ct_tensor *t = k < nout ? out[k] : in[k - nout];
                    if (t) printf(" %s %s %dd", k < nout ? "out" : "in", ct_dtype_name(t->dtype), t->ndim);
                }
                printf("\n");
            }
        }
        if (st) ct_clear_error();
    }
    return g_cpu_orig[op](out, nout, in, nin, a);
}

#define FAMILY(name)                          \
    extern const fx_op fx_ops_##name[]; \
    extern const int fx_nops_##name;
#include "ops_families.h"
#undef FAMILY

/* calls of the ocl-text ops no fixture family makes (the optimizers' fused
 * steps, exponential, max_pool's backward, layer_norm/rms_norm forward and
 * backward), float32 and float64 */
static void extra_calls(void) {
    ct_scope s = ct_scope_begin();
    for (int k = 0; k < 2; k++) {
        ct_dtype dt = k ? CT_F64 : CT_F32;
        assert_non_null(ct_exponential_(ct_empty((int64_t[]){9}, 1, dt), 1.5));
        ct_tensor *x = ct_randn((int64_t[]){1, 2, 6, 6}, 4, dt);
        assert_int_equal(ct_set_requires_grad(x, true), CT_OK);
        ct_tensor *y = ct_max_pool2d(x, (const int64_t[2]){2, 2}, NULL, NULL, NULL, false, NULL);
        assert_non_null(y);
        assert_int_equal(ct_backward(ct_sum(y, NULL, 0, false), NULL, false, false), CT_OK);
        for (int rms = 0; rms < 2; rms++) { /* layer_norm / rms_norm, forward and backward */
            ct_tensor *xl = ct_randn((int64_t[]){3, 8}, 2, dt), *wl = ct_ones((int64_t[]){8}, 1, dt);
            assert_int_equal(ct_set_requires_grad(xl, true), CT_OK);
            assert_int_equal(ct_set_requires_grad(wl, true), CT_OK);
            ct_tensor *yl = rms ? ct_rms_norm(xl, (const int64_t[]){8}, 1, wl, 1e-6)
                                : ct_layer_norm(xl, (const int64_t[]){8}, 1, wl, NULL, 1e-5);
            assert_non_null(yl);
            assert_int_equal(ct_backward(ct_sum(yl, NULL, 0, false), NULL, false, false), CT_OK);
        }
        { /* a grouped, strided, dilated conv's weight gradient (conv_wgrad) */
            ct_tensor *xc = ct_randn((int64_t[]){2, 4, 7, 7}, 4, dt), *wc = ct_randn((int64_t[]){6, 2, 3, 3}, 4, dt);
            assert_int_equal(ct_set_requires_grad(xc, true), CT_OK);
            assert_int_equal(ct_set_requires_grad(wc, true), CT_OK);
            ct_tensor *yc = ct_conv2d(xc, wc, NULL, (const int64_t[2]){2, 1}, (const int64_t[2]){1, 2},
                                      (const int64_t[2]){2, 1}, 2);
            assert_non_null(yc);
            assert_int_equal(ct_backward(ct_sum(yc, NULL, 0, false), NULL, false, false), CT_OK);
        }
        for (int o = 0; o < 3; o++) {
            ct_tensor *p = ct_randn((int64_t[]){10}, 1, dt);
            assert_int_equal(ct_set_requires_grad(p, true), CT_OK);
            assert_int_equal(ct_set_grad(p, ct_ones((int64_t[]){10}, 1, dt)), CT_OK);
            ct_optimizer *opt = o == 0   ? ct_sgd_new(&p, 1, 0.1, 0.9, 0, 0, false, false)
                                : o == 1 ? ct_adam_new(&p, 1, 1e-3, 0.9, 0.999, 1e-8, 0, false, false)
                                         : ct_adamw_new(&p, 1, 1e-3, 0.9, 0.999, 1e-8, 1e-2, true, false);
            assert_non_null(opt);
            assert_int_equal(ct_optim_set_all(opt, "fused", 1), CT_OK);
            assert_int_equal(ct_optim_step(opt), CT_OK);
            assert_int_equal(ct_optim_step(opt), CT_OK);
            ct_optim_free(opt);
        }
    }
    ct_scope_end(s);
}

static void cuda_dry_run(void **state) {
    (void)state;
    ct__backends_init();
    if (!ct__device(CT_CUDA)) {
        printf("cuda dry run: skipped: %s\n", ct__backend_missing_why(CT_CUDA));
        skip();
    }
    int nops = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const char *r = ct__cuda_kernel_route(op);
        if (!r || !(ocl_text_route(r) || op == CT_OP_copy)) continue;
        if (!ct__kernels[CT_OPENCL][op]) {
            /* the backend registers ocl-text only over an OpenCL kernel; copy's conversions need one too */
            assert_int_equal(op, CT_OP_copy);
            continue;
        }
        g_cpu_orig[op] = ct__kernels[CT_CPU][op];
        assert_non_null(g_cpu_orig[op]);
        ct__kernels[CT_CPU][op] = dry_kernel;
        nops++;
    }
    if (nops == 0) {
        printf("cuda dry run: skipped: the CUDA backend runs no OpenCL kernel text in this build (no OpenCL "
               "backend: %s)\n", ct__backend_missing_why(CT_OPENCL) ? ct__backend_missing_why(CT_OPENCL) : "?");
        skip();
    }
    ct__gpu_sources_record(true);
    int failed = 0;
#define FAMILY(name) failed += fx_run_file(CT_FIXTURE_DIR "/" #name ".txt", fx_ops_##name, fx_nops_##name);
#include "ops_families.h"
#undef FAMILY
    extra_calls();
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (g_cpu_orig[op]) ct__kernels[CT_CPU][op] = g_cpu_orig[op];
    g_dry_done = true;
    const ct_gpu_source *srcs;
    int ntext = ct__gpu_sources(&srcs);
    long calls = 0, errors = 0;
    int ran = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        calls += g_dry[op].calls;
        errors += g_dry[op].errors;
        ran += g_dry[op].calls > 0;
    }
    printf("cuda dry run: the fixture families (and extra_calls) ran %ld calls of %d of the %d ops the CUDA backend runs as "
           "OpenCL kernel text: %d distinct kernel texts, %ld calls failed (not declined)\n",
           calls, ran, nops, ntext, errors);
    const char *miss = ct__cuda_nvrtc_missing();
    int nvfail = 0;
    if (miss) {
        printf("cuda dry run: NVRTC is not loadable (%s): the texts are not compiled here\n", miss);
    } else {
        int nc = 0;
        nvfail = nv_check_recorded("sm_80", &nc);
        printf("cuda dry run: nvrtc compiled the %d texts for sm_80: %d failed\n", nc, nvfail);
    }
    ct__gpu_sources_record(false);
    assert_int_equal(failed, 0);   /* the cpu results still match torch's */
    assert_int_equal(errors, 0);
    assert_int_equal(nvfail, 0);
    assert_true(ran > 0);
    if (!miss) assert_true(ntext > 0);
}

/* How dev serves op: "kernel" (its slot), "dev-comp" (a fused op's
 * composite on the device), "fallback", "view", "comp", "NONE" (neither: a
 * failure), as ct__dispatch and the fused ops' entries decide. */
static const char *gpu_route(ct_device dev, int op, bool *none) {
    const ct_op_info *in = &ct__op_info[op];
    *none = false;
    if (ct__kernels[dev][op]) return "kernel";
    if (in->flags & CT_OPF_VIEW) return "view";
    if (in->flags & CT_OPF_COMPOSITE) return "comp";
    if (in->flags & CT_OPF_FUSED) return "dev-comp";
    if (ct__fallback_serves(dev) && ct__kernels[CT_CPU][op]) return "fallback";
    *none = true;
    return "NONE";
}

typedef struct dev_count {
    int kernel, devcomp, fallback, view, comp, none, cublas, nvrtc, ocl, ocl_blas, ocl_fb_some, ocl_fb_all, ocl_unrun;
} dev_count;

static const char *count_route(dev_count *c, const char *r) {
    if (!strcmp(r, "kernel")) c->kernel++;
    else if (!strcmp(r, "fallback")) c->fallback++;
    else if (!strcmp(r, "dev-comp")) c->devcomp++;
    else if (!strcmp(r, "view")) c->view++;
    else if (!strcmp(r, "comp")) c->comp++;
    else c->none++;
    return r;
}

/* the cuda column of op (see the header) */
static const char *cuda_col(int op, dev_count *c, char *buf, size_t n) {
    bool none;
    const char *r = count_route(c, gpu_route(CT_CUDA, op, &none));
    if (strcmp(r, "kernel") != 0) return r;
    const char *how = ct__cuda_kernel_route(op);
    if (!strcmp(how, "cublas")) c->cublas++;
    else if (ocl_text_route(how)) c->ocl++, c->ocl_blas += strcmp(how, "ocl-text+cublas") == 0;
    else c->nvrtc++;
    const dry_stat *d = &g_dry[op];
    if (!ocl_text_route(how) || !g_dry_done) return how;
    if (d->calls == 0) { /* no fixture case calls it: its texts are not checked here */
        c->ocl_unrun++;
        return "ocl-text?";
    }
    if (!d->declined) return how;
    bool all = d->declined == d->calls;
    c->ocl_fb_some += !all;
    c->ocl_fb_all += all;
    snprintf(buf, n, "%s%s", how, all ? ":fb" : "+fb");
    return buf;
}

/* the rendered expression of an elementwise op (float32, else the first
 * dtype it supports), from ew_math.def */
static const char *expr_of(int op) {
    static const ct_dtype dts[] = {CT_F32, CT_F64, CT_I64, CT_I32, CT_BOOL, CT_U8};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++)
        if (ct__ew_supports((ct_op)op, dts[k])) {
            const char *e = ct__ew_expr((ct_op)op, dts[k]);
            if (e) return e;
        }
    return "";
}

static void table(void **state) {
    (void)state;
    ct__backends_init();
    bool have_ocl = ct__device(CT_OPENCL) != NULL;  /* built with the OpenCL backend */
    bool have_cuda = ct__device(CT_CUDA) != NULL;   /* built with the CUDA backend */
    dev_count oc = {0}, cc = {0};
    int n_metafn = 0, n_cpu = 0, n_meta = 0, n_vjp = 0, n_need_vjp = 0, n_params = 0, n_expr = 0, bad = 0;
    int n_jvp_own = 0, n_jvp_dvjp = 0, n_need_jvp = 0;
    int n_vmap = 0, n_vmap_diff = 0;
    printf("%-22s %-11s %6s %4s %4s %-8s %-11s %4s %4s %4s  %s\n", "op", "params", "metafn", "cpu", "meta", "opencl",
           "cuda", "vjp", "jvp", "vmap", "c_expr");
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_op_info *in = &ct__op_info[op];
        int fam = ct__op_pfam[op];
        bool cpu = ct__kernels[CT_CPU][op] != NULL, meta = ct__kernels[CT_META][op] != NULL;
        bool view = in->flags & CT_OPF_VIEW, comp = in->flags & CT_OPF_COMPOSITE;
        bool need_vjp = !(in->flags & (CT_OPF_NODIFF | CT_OPF_UNRECORDED | CT_OPF_COMPOSITE)) && in->nin != 0 &&
                        !(in->flags & CT_OPF_RANDOM);
        bool need_jvp = in->vjp && in->vjp != (void *)ct__vjp_none;
        const char *jvp = in->jvp ? (in->jvp == (void *)ct__jvp_dvjp ? "dvjp" : "own") : need_jvp ? "NO" : "-";
        char fbuf[32];
        snprintf(fbuf, sizeof fbuf, "%s(%d)", ct__pfamilies[fam].name, ct__pfamilies[fam].nfields);
        bool ocl_none = false, cuda_none = false;
        const char *ocol = have_ocl ? count_route(&oc, gpu_route(CT_OPENCL, op, &ocl_none)) : "-";
        char cbuf[24];
        const char *ccol = have_cuda ? cuda_col(op, &cc, cbuf, sizeof cbuf) : "-";
        cuda_none = have_cuda && !strcmp(ccol, "NONE");
        printf("%-22s %-11s %6s %4s %4s %-8s %-11s %4s %4s %4s  %s\n", in->name, fam ? fbuf : "-",
               in->meta ? "yes" : "NO", cpu ? "yes" : view ? "view" : comp ? "comp" : "NO", meta ? "yes" : "NO",
               ocol, ccol, in->vjp ? "yes" : need_vjp ? "NO" : "-", jvp, in->vmap ? "yes" : "-",
               expr_of(op));
        if (ocl_none) { printf("  ^ %s has neither a kernel nor the cpu fallback on opencl\n", in->name); bad++; }
        if (cuda_none) { printf("  ^ %s has neither a kernel nor the cpu fallback on cuda\n", in->name); bad++; }
        n_metafn += in->meta != NULL;
        n_cpu += cpu || view || comp;
        n_meta += meta;
        n_vjp += in->vjp != NULL;
        n_vmap += in->vmap != NULL;
        n_need_vjp += need_vjp;
        n_need_jvp += need_jvp;
        n_jvp_own += in->jvp && in->jvp != (void *)ct__jvp_dvjp;
        n_jvp_dvjp += in->jvp == (void *)ct__jvp_dvjp;
        if (need_jvp && !in->jvp) { printf("  ^ %s has a vjp but no jvp\n", in->name); bad++; }
        n_vmap_diff += need_jvp && in->vmap;
        if (need_jvp && !in->vmap) { printf("  ^ %s has a vjp but no batching rule (vmap)\n", in->name); bad++; }
        n_params += fam != 0;
        n_expr += ct__ew_kind((ct_op)op) != CT_EWK_NONE;
        if (!cpu && !view && !comp) { printf("  ^ %s has no CPU kernel\n", in->name); bad++; }
        if (!meta) { printf("  ^ %s has no meta kernel\n", in->name); bad++; }
        if (!in->meta) { printf("  ^ %s has no meta function\n", in->name); bad++; }
        if (need_vjp && !in->vjp) { printf("  ^ %s is differentiable but has no vjp\n", in->name); bad++; }
        if (cpu && (view || comp)) { printf("  ^ %s is marked view/composite but has a kernel\n", in->name); bad++; }
    }
    for (int f = 1; f < CT_PFAM_COUNT; f++) {
        int users = 0;
        for (int op = 0; op < CT_OP_COUNT; op++) users += ct__op_pfam[op] == f;
        if (!users) { printf("  ^ parameter family %s has no op\n", ct__pfamilies[f].name); bad++; }
    }
    printf("%d ops: meta function %d/%d, CPU kernel or view/composite %d/%d, meta %d/%d, typed params %d (the other %d take "
           "none), vjp %d (%d needed), rendered C %d\n",
           CT_OP_COUNT, n_metafn, CT_OP_COUNT, n_cpu, CT_OP_COUNT, n_meta, CT_OP_COUNT, n_params, CT_OP_COUNT - n_params,
           n_vjp, n_need_vjp, n_expr);
    printf("jvp: %d of %d ops with a VJP (%d own formulas, %d from the VJP by the double-vjp rule)\n",
           n_jvp_own + n_jvp_dvjp, n_need_jvp, n_jvp_own, n_jvp_dvjp);
    printf("vmap: %d of %d ops with a VJP have a batching rule\n", n_vmap_diff, n_need_jvp);
    printf("batching rules (vmap) %d/%d; without one (run per sample under vmap):", n_vmap, CT_OP_COUNT);
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (!ct__op_info[op].vmap) printf(" %s", ct__op_info[op].name);
    printf("\n");
    if (have_ocl)
        printf("opencl: %d own kernels, %d fused ops' composites of device ops, %d fallback (the cpu kernel on host "
               "copies), %d views, %d composites, of %d ops; %d with neither\n", oc.kernel, oc.devcomp, oc.fallback,
               oc.view, oc.comp, CT_OP_COUNT, oc.none);
    else
        printf("opencl: not in this build (%s)\n", ct__backend_missing_why(CT_OPENCL));
    if (have_cuda) {
        printf("cuda: %d own kernels, %d fused ops' composites of device ops, %d fallback (the cpu kernel on host "
               "copies), %d views, %d composites, of %d ops; %d with neither\n", cc.kernel, cc.devcomp, cc.fallback,
               cc.view, cc.comp, CT_OP_COUNT, cc.none);
        printf("cuda: own kernels: %d cuBLAS, %d CUDA C of its own (NVRTC), %d OpenCL kernel texts (NVRTC; %d of "
               "them with their GEMMs through cuBLAS)", cc.cublas, cc.nvrtc, cc.ocl, cc.ocl_blas);
        if (g_dry_done) {
            printf("; of these, in the fixture cases, %d declined some calls and %d every call (the fallback ran "
                   "them), %d were not called (\"ocl-text?\"):", cc.ocl_fb_some, cc.ocl_fb_all, cc.ocl_unrun);
            for (int op = 0; op < CT_OP_COUNT; op++) {
                const char *how = ct__cuda_kernel_route(op);
                if (ocl_text_route(how) && g_dry[op].calls == 0) printf(" %s", ct__op_info[op].name);
            }
            printf("\n");
        }
        else
            printf(" (the dry run did not run: which calls they decline is not measured)\n");
    } else {
        printf("cuda: not in this build (%s): no column\n", ct__backend_missing_why(CT_CUDA));
    }
    assert_int_equal(bad, 0);
}

int main(void) {
    (void)nvrtc_compile_all; /* nvrtc_check.h's whole check is test_backend_ops's; this test uses its parts */
    const struct CMUnitTest tests[] = {cmocka_unit_test(cuda_dry_run), cmocka_unit_test(table)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
