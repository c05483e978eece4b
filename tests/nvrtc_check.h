/* nvrtc_check.h -- compiles GPU kernel text as CUDA with NVRTC (which runs
 * without a GPU or a driver), for sm_80 and sm_90: every kernel the OpenCL
 * device generated during a run (recorded through src/backend/gpu_dialect.h,
 * turned into CUDA C++ by its dialect prelude), and every kernel the CUDA
 * device itself generates.  A kernel that does not compile fails the test,
 * naming its op and printing the compiler's log.  Skipped with the reason
 * where NVRTC is not there (or the build has no CUDA backend). */
#ifndef CT_NVRTC_CHECK_H
#define CT_NVRTC_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu_dialect.h"

/* src/backend/cuda/backend.c (or cuda_none.c) */
const char *ct__cuda_nvrtc_missing(void);
ct_status ct__cuda_nvrtc_compile(const char *src, const char *arch, void **cubin, size_t *cubin_size,
                                 char *log, size_t logn);
int ct__cuda_builtin_sources(char ***out);
long ct__opencl_kernels_built(void); /* src/backend/opencl/backend.c (or registry.c) */

typedef struct nv_buf { char *p; size_t n, cap; } nv_buf;

static void nv_put(nv_buf *b, const char *s) {
    size_t l = strlen(s);
    if (b->n + l + 1 > b->cap) {
        b->cap = (b->n + l + 1) * 2;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    memcpy(b->p + b->n, s, l + 1);
    b->n += l;
}

/* body with its kernel "k" (__kernel or CT_KERNEL) renamed k<id>, inside namespace ctk<id>, then
 * #undef of the macros it defined (they would leak into the next body) */
static bool nv_put_body(nv_buf *b, const char *body, int id) {
    /* the backend's own kernels say __kernel, its kernel files (k_conv.c,
     * ...) the dialect word CT_KERNEL (ct__ocl_dialect) */
    const char *k = strstr(body, "__kernel void k(");
    size_t kw = strlen("__kernel void k");
    if (!k && (k = strstr(body, "CT_KERNEL void k("))) kw = strlen("CT_KERNEL void k");
    if (!k) return false;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "namespace ctk%d {\n", id);
    nv_put(b, tmp);
    size_t pre = (size_t)(k - body) + kw;
    char *head = malloc(pre + 1);
    assert_non_null(head);
    memcpy(head, body, pre);
    head[pre] = 0;
    nv_put(b, head);
    free(head);
    snprintf(tmp, sizeof tmp, "%d", id);
    nv_put(b, tmp);
    nv_put(b, body + pre);
    nv_put(b, "\n}\n");
    for (const char *l = body; (l = strstr(l, "#define ")) != NULL; l += 8) {
        if (l != body && l[-1] != '\n') continue;
        const char *nm = l + 8;
        size_t nl = strcspn(nm, " (\n\t");
        if (nl == 0 || nl > 60) continue;
        char u[80];
        snprintf(u, sizeof u, "#undef %.*s\n", (int)nl, nm);
        nv_put(b, u);
    }
    return true;
}

/* one program of src; on failure prints what and the log; returns success */
static bool nv_compile(const char *what, const char *src, const char *arch) {
    static char log[16384];
    if (ct__cuda_nvrtc_compile(src, arch, NULL, NULL, log, sizeof log) == CT_OK) return true;
    printf("NVRTC (%s): %s does not compile:\n%.3000s\n", arch, what, log[0] ? log : ct_last_error());
    ct_clear_error();
    return false;
}

/* The recorded OpenCL kernels, in batches of up to 64 that share a prelude
 * and helpers (one program each); a failed batch is compiled kernel by
 * kernel to name the kernels at fault.  Returns the number that failed. */
static int nv_check_recorded(const char *arch, int *ncompiled) {
    const ct_gpu_source *s;
    int n = ct__gpu_sources(&s), failed = 0;
    *ncompiled = 0;
    bool *done = calloc((size_t)n + 1, 1);
    assert_non_null(done);
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int members[64], nm = 0;
        for (int j = i; j < n && nm < 64; j++)
            if (!done[j] && s[j].prelude == s[i].prelude && s[j].helpers == s[i].helpers) members[nm++] = j;
        nv_buf b = {0};
        nv_put(&b, ct__cuda_dialect_prelude);
        nv_put(&b, s[i].prelude);
        nv_put(&b, s[i].helpers);
        nv_put(&b, "\n");
        for (int m = 0; m < nm; m++) {
            done[members[m]] = true;
            if (!nv_put_body(&b, s[members[m]].body, members[m])) {
                printf("NVRTC: %s: its text has no kernel k\n", s[members[m]].what);
                failed++;
            }
        }
        if (!nv_compile("a batch of kernels", b.p, arch)) { /* name the ones at fault */
            for (int m = 0; m < nm; m++) {
                nv_buf one = {0};
                nv_put(&one, ct__cuda_dialect_prelude);
                nv_put(&one, s[i].prelude);
                nv_put(&one, s[i].helpers);
                nv_put(&one, "\n");
                if (nv_put_body(&one, s[members[m]].body, members[m]) &&
                    !nv_compile(s[members[m]].what, one.p, arch)) {
                    failed++;
                    printf("---- its body ----\n%.2000s\n", s[members[m]].body);
                }
                free(one.p);
            }
        }
        *ncompiled += nm;
        free(b.p);
    }
    free(done);
    return failed;
}

/* the whole check: skipped (printed) without NVRTC */
static void nvrtc_compile_all(void **state) {
    (void)state;
    const char *miss = ct__cuda_nvrtc_missing();
    if (miss) {
        printf("nvrtc: the CUDA compile check is skipped: %s\n", miss);
        skip();
    }
    /* the check can fail: a kernel with an error is refused, with a log */
    char log[4096];
    size_t pl = strlen(ct__cuda_dialect_prelude);
    char *bad = malloc(pl + 200);
    assert_non_null(bad);
    snprintf(bad, pl + 200, "%s__kernel void k(__global float *p) { p[0] = no_such_name; }\n", ct__cuda_dialect_prelude);
    assert_int_equal(ct__cuda_nvrtc_compile(bad, "sm_80", NULL, NULL, log, sizeof log), CT_ERR_DEVICE);
    assert_non_null(strstr(log, "no_such_name"));
    ct_clear_error();
    free(bad);
    const char *archs[2] = {"sm_80", "sm_90"};
    char **own = NULL;
    int nown = ct__cuda_builtin_sources(&own);
    assert_true(nown >= 0);
    int failed = 0, nrec = 0;
    for (int a = 0; a < 2; a++) {
        int nc = 0;
        failed += nv_check_recorded(archs[a], &nc);
        nrec = nc;
        for (int k = 0; k < nown; k++) {
            char what[32];
            snprintf(what, sizeof what, "cuda kernel %d", k);
            if (!nv_compile(what, own[k], archs[a])) failed++;
        }
    }
    for (int k = 0; k < nown; k++) free(own[k]);
    free(own);
    printf("nvrtc: %d OpenCL kernels of this run (as CUDA through the dialect prelude) and %d CUDA kernels "
           "compiled for sm_80 and sm_90: %d failed\n", nrec, nown, failed);
    if (ct__opencl_kernels_built() > 0) assert_true(nrec > 0); /* the OpenCL kernels were recorded */
    assert_int_equal(failed, 0);
}
#endif
