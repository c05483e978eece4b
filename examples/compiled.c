/* compiled.c -- ct_compile, torch.compile for C: a function of tensors is
 * traced once on meta tensors, its elementwise ops and the reduction after
 * them fused into one generated C kernel, built by the system C compiler
 * and cached on disk ($CT_CACHE_DIR); later calls with other batch sizes
 * reuse it (automatic dynamic shapes). */
#include <ctorch/compile.h>
#include <ctorch/ctorch.h>
#include <stdio.h>
#include <stdlib.h>

/* out[0] = sum over rows of gelu(x * a + b) */
static ct_status gelu_rows(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    (void)nin, (void)nout, (void)ctx;
    ct_tensor *h = ct_add(ct_mul(in[0], in[1]), in[2]);
    out[0] = ct_sum(ct_gelu(h, CT_GELU_NONE), CT_SHAPE(-1), false);
    return out[0] ? CT_OK : ct_last_error_code();
}

int main(void) {
    ct_manual_seed(0);
    ct_scope s = ct_scope_begin();
    ct_compiled *f = ct_compile(gelu_rows, NULL, NULL); /* default options */
    ct_tensor *a = ct_randn(CT_SHAPE(512), CT_F32), *b = ct_randn(CT_SHAPE(512), CT_F32);
    for (int64_t rows = 1000; rows <= 3000; rows += 1000) {
        ct_tensor *in[3] = {ct_randn(CT_SHAPE(rows, 512), CT_F32), a, b}, *y = NULL, *ref = NULL;
        if (ct_compiled_call(f, in, 3, &y, 1) || gelu_rows(in, 3, &ref, 1, NULL)) {
            fprintf(stderr, "compiled: %s\n", ct_last_error());
            return 1;
        }
        printf("%lld rows: compiled equals eager: %s\n", (long long)rows,
               ct_allclose(y, ref, 1e-5, 1e-5, false) ? "yes" : "NO");
    }
    ct_compile_stats st = ct_compiled_stats(f);
    printf("%lld calls, %lld traces, %lld kernels built, %lld loaded from the cache, %.0f ms compiling\n",
           (long long)st.calls, (long long)st.traces, (long long)st.kernels_built,
           (long long)st.kernels_loaded, st.compile_ms);
    char *why = ct_compile_explain(f); /* guards, the graph, the plan */
    if (why) fputs(why, stdout);
    free(why);
    ct_compiled_free(f);
    ct_scope_end(s);
    return 0;
}
