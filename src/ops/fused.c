/* fused.c -- the switch between a fused op's kernel and its fallback
 * (see fused.h). */
#include <stdatomic.h>

#include "fused.h"
#include "meta.h"

static atomic_bool g_disabled[CT_OP_COUNT];

ct_kernel_fn ct__fused_kernel(ct_op op, ct_device dev) {
    ct__backends_init();
    if ((unsigned)op >= CT_OP_COUNT || (unsigned)dev >= CT_DEVICE_COUNT) return NULL;
    /* the op table says which ops are fused (test_op_table's device columns read it) */
    CT_ASSERT(ct__op_info[op].flags & CT_OPF_FUSED);
    if (atomic_load_explicit(&g_disabled[op], memory_order_relaxed)) return NULL;
    return ct__kernels[dev][op];
}

void ct__fused_disable(ct_op op, bool disabled) {
    if ((unsigned)op < CT_OP_COUNT) atomic_store(&g_disabled[op], disabled);
}

ct_status ct__fused_run(ct_op op, const ct_meta *m, ct_tensor **out, int nout, const bool *want,
                        ct_tensor *const *in, int nin, const ct_args *a) {
    ct_tensor *cin[16];
    ct_meta mm[8];
    for (int j = 0; j < nout; j++) out[j] = NULL;
    if (nin > 16 || nout > 8)
        return ct__error_status(CT_ERR_RUNTIME, "%s: too many operands", ct__op_info[op].name);
    ct_scope s = ct_scope_begin();
    bool ok = true;
    for (int k = 0; k < nin; k++) ok = ok && (cin[k] = ct_contiguous(in[k]));
    if (ok && !m) {
        ok = !ct__meta_run(op, mm, nout, cin, nin, a);
        m = mm;
    }
    ok = ok && !ct__meta_alloc(m, out, nout, want, cin) && !ct__dispatch(op, out, nout, cin, nin, a);
    ct_scope_end(s);
    if (!ok) {
        for (int j = 0; j < nout; j++) { ct_release(out[j]); out[j] = NULL; }
        return ct_last_error_code() ? ct_last_error_code() : CT_ERR_OOM;
    }
    for (int j = 0; j < nout; j++)
        if (out[j]) out[j] = ct__register(out[j]);
    ct_trace_hook *h = ct__tracer();
    if (h) h->op(h, op, out, nout, in, nin, a, NULL); /* not recorded by autograd: its caller is */
    return CT_OK;
}
