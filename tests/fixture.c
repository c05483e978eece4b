/* fixture.c -- see fixture.h. */
#include "fixture.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *k_dtnames[] = {"bool", "uint8", "int8", "int16", "int32", "int64",
                                  "float16", "bfloat16", "float32", "float64", "complex64",
                                  "complex128", "complex32"};

ct_dtype fx_dtype(const char *name) {
    for (int i = 0; i < CT_DTYPE_COUNT; i++)
        if (strcmp(name, k_dtnames[i]) == 0) return (ct_dtype)i;
    return (ct_dtype)-1;
}

static int find_param(const fx_case *c, const char *name) {
    for (int i = 0; i < c->nparams; i++)
        if (strcmp(c->pname[i], name) == 0) return i;
    return -1;
}
int fx_has(const fx_case *c, const char *name) { return find_param(c, name) >= 0; }
static double parse_num(const char *s) {
    if (strcmp(s, "nan") == 0) return NAN;
    if (strcmp(s, "inf") == 0) return INFINITY;
    if (strcmp(s, "-inf") == 0) return -INFINITY;
    if (strcmp(s, "True") == 0 || strcmp(s, "true") == 0) return 1;
    if (strcmp(s, "False") == 0 || strcmp(s, "false") == 0) return 0;
    return strtod(s, NULL);
}
double fx_f(const fx_case *c, const char *name, double def) {
    int i = find_param(c, name);
    return i < 0 ? def : parse_num(c->pval[i]);
}
int64_t fx_i(const fx_case *c, const char *name, int64_t def) {
    int i = find_param(c, name);
    if (i < 0) return def;
    if (strcmp(c->pval[i], "True") == 0) return 1;
    if (strcmp(c->pval[i], "False") == 0) return 0;
    return strtoll(c->pval[i], NULL, 10);
}
int fx_ints(const fx_case *c, const char *name, int64_t *out, int max) {
    int i = find_param(c, name);
    if (i < 0) return -1;
    const char *s = c->pval[i];
    int n = 0;
    if (strcmp(s, "[]") == 0 || *s == 0) return 0;
    while (*s && n < max) {
        char *e;
        out[n++] = strtoll(s, &e, 10);
        if (e == s) break;
        s = e;
        if (*s == ',') s++;
    }
    return n;
}
int fx_doubles(const fx_case *c, const char *name, double *out, int max) {
    int i = find_param(c, name);
    if (i < 0) return -1;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", c->pval[i]);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ","))
        out[n++] = parse_num(tok);
    return n;
}
const char *fx_s(const fx_case *c, const char *name, const char *def) {
    int i = find_param(c, name);
    return i < 0 ? def : c->pval[i];
}

/* ---- reading ----------------------------------------------------------- */
static char *next_tok(char **p) {
    char *s = *p;
    while (*s && isspace((unsigned char)*s)) s++;
    if (!*s) { *p = s; return NULL; }
    char *b = s;
    while (*s && !isspace((unsigned char)*s)) s++;
    if (*s) *s++ = 0;
    *p = s;
    return b;
}

static ct_tensor *parse_tensor(char *rest, int line) {
    char *dts = next_tok(&rest), *nds = next_tok(&rest);
    if (!dts || !nds) { fprintf(stderr, "fixture line %d: bad tensor\n", line); return NULL; }
    ct_dtype dt = fx_dtype(dts);
    int nd = atoi(nds);
    if ((int)dt < 0 || nd < 0 || nd > CT_MAX_DIMS) {
        fprintf(stderr, "fixture line %d: bad dtype/ndim %s %s\n", line, dts, nds);
        return NULL;
    }
    int64_t shape[CT_MAX_DIMS];
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        char *t = next_tok(&rest);
        if (!t) return NULL;
        shape[i] = strtoll(t, NULL, 10);
        n *= shape[i];
    }
    char *colon = next_tok(&rest);
    if (!colon || strcmp(colon, ":") != 0) { fprintf(stderr, "fixture line %d: missing ':'\n", line); return NULL; }
    int cplx = ct_dtype_is_complex(dt);
    int64_t nv = cplx ? 2 * n : n;
    if (dt == CT_I64) {
        int64_t *iv = malloc(sizeof(int64_t) * (size_t)(nv ? nv : 1));
        for (int64_t i = 0; i < nv; i++) {
            char *tok = next_tok(&rest);
            if (!tok) { fprintf(stderr, "fixture line %d: too few values\n", line); free(iv); return NULL; }
            iv[i] = strtoll(tok, NULL, 10);
        }
        ct_tensor *t = ct_from_array(iv, shape, nd, dt);
        free(iv);
        return t;
    }
    double *dv = malloc(sizeof(double) * (size_t)(nv ? nv : 1));
    for (int64_t i = 0; i < nv; i++) {
        char *tok = next_tok(&rest);
        if (!tok) { fprintf(stderr, "fixture line %d: too few values\n", line); free(dv); return NULL; }
        dv[i] = parse_num(tok);
    }
    ct_tensor *t;
    if (cplx) { /* pairs: build as the real dtype with a trailing 2, then reinterpret */
        int64_t sh2[CT_MAX_DIMS + 1];
        memcpy(sh2, shape, sizeof(int64_t) * (size_t)nd);
        sh2[nd] = 2;
        ct_tensor *r = ct_from_doubles(dv, sh2, nd + 1, dt == CT_C64 ? CT_F32 : CT_F64);
        t = r ? ct_from_array(ct_data_ptr(r), shape, nd, dt) : NULL;
        ct_release(r);
    } else {
        t = ct_from_doubles(dv, shape, nd, dt);
    }
    free(dv);
    return t;
}

/* ---- comparing --------------------------------------------------------- */
static int compare(const fx_case *c, const char *variant, int k, ct_tensor *got, ct_tensor *exp,
                   double rtol, double atol) {
    if (!got) {
        fprintf(stderr, "  FAIL %s/%s [%s] out %d: NULL result: %s\n", c->op, c->label, variant, k,
                ct_last_error());
        return 1;
    }
    if (ct_get_dtype(got) != ct_get_dtype(exp)) {
        fprintf(stderr, "  FAIL %s/%s [%s] out %d: dtype %s, expected %s\n", c->op, c->label, variant,
                k, ct_dtype_name(ct_get_dtype(got)), ct_dtype_name(ct_get_dtype(exp)));
        return 1;
    }
    int nd = ct_ndim(got);
    if (nd != ct_ndim(exp) || memcmp(ct_sizes(got), ct_sizes(exp), sizeof(int64_t) * (size_t)nd) != 0) {
        char *g = NULL;
        fprintf(stderr, "  FAIL %s/%s [%s] out %d: shape ndim %d vs %d (", c->op, c->label, variant, k,
                nd, ct_ndim(exp));
        for (int i = 0; i < nd; i++) fprintf(stderr, "%lld ", (long long)ct_sizes(got)[i]);
        fprintf(stderr, "vs ");
        for (int i = 0; i < ct_ndim(exp); i++) fprintf(stderr, "%lld ", (long long)ct_sizes(exp)[i]);
        fprintf(stderr, ")\n");
        free(g);
        return 1;
    }
    ct_dtype dt = ct_get_dtype(exp);
    if (rtol == 0 && atol == 0) {
        if (dt == CT_F32 || dt == CT_C64) { rtol = 1e-5; atol = 1e-6; }
        else if (dt == CT_F16 || dt == CT_BF16) { rtol = 1e-2; atol = 1e-3; }
        else { rtol = 1e-10; atol = 1e-12; }
    }
    int ok;
    if (ct_dtype_is_floating(dt) || ct_dtype_is_complex(dt)) ok = ct_allclose(got, exp, rtol, atol, true);
    else ok = ct_equal(got, exp);
    if (ok != 1) {
        fprintf(stderr, "  FAIL %s/%s [%s] out %d: values differ (rtol %g atol %g)%s%s\n", c->op,
                c->label, variant, k, rtol, atol, ok < 0 ? ": " : "", ok < 0 ? ct_last_error() : "");
        char *sg = ct_to_string(got), *se = ct_to_string(exp);
        fprintf(stderr, "    got:      %.2000s\n    expected: %.2000s\n", sg ? sg : "?", se ? se : "?");
        free(sg);
        free(se);
        return 1;
    }
    return 0;
}

/* A non-contiguous tensor (owned by the current scope) with the same values: allocated with the last dim
 * doubled and sliced with step 2; for >= 2-D also stored transposed.  On CT_META the same layout
 * (sizes, strides, offset) without values. */
static ct_tensor *noncontig_on(ct_tensor *t, ct_device dev) {
    int nd = ct_ndim(t);
    if (nd == 0 || ct_numel(t) <= 1) return dev == CT_CPU ? t : ct_to_device(t, dev);
    int64_t shape[CT_MAX_DIMS];
    int64_t perm[CT_MAX_DIMS];
    memcpy(shape, ct_sizes(t), sizeof(int64_t) * (size_t)nd);
    for (int i = 0; i < nd; i++) perm[i] = i;
    if (nd >= 2) { /* storage in transposed order of the last two dims */
        perm[nd - 1] = nd - 2;
        perm[nd - 2] = nd - 1;
    }
    int64_t pshape[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) pshape[i] = shape[perm[i]];
    pshape[nd - 1] *= 2;
    ct_tensor *big = ct_full_on(pshape, nd, 7.0, ct_get_dtype(t), dev);
    ct_tensor *sl = ct_slice(big, nd - 1, 0, INT64_MAX, 2);
    ct_tensor *v = ct_permute(sl, perm, nd);
    /* all three are owned by the caller's scope */
    (void)big;
    (void)sl;
    if (!v) return NULL;
    if (dev == CT_CPU && !ct_copy_(v, t)) return NULL;
    /* a device with data: the values copied there (the copy kernel writing a strided view) */
    if (dev != CT_CPU && dev != CT_META && !ct_copy_(v, ct_to_device(t, dev))) return NULL;
    return v;
}
static ct_tensor *noncontig(ct_tensor *t) { return noncontig_on(t, CT_CPU); }

/* ---- the meta rerun (fx_set_meta_check) ---------------------------------- */
static bool (*g_meta_dd)(const fx_case *c); /* non-NULL: meta mode */
static fx_meta_tally g_meta;

void fx_set_meta_check(bool (*data_dependent)(const fx_case *c)) { g_meta_dd = data_dependent; }
fx_meta_tally fx_meta_summary(void) { return g_meta; }
void fx_meta_print_summary(void) {
    printf("meta rerun: %d case runs on meta: %d matched the cpu geometry, %d data-dependent "
           "refusals, %d same-error, %d failed\n",
           g_meta.run, g_meta.matched, g_meta.refused, g_meta.same_error, g_meta.failed);
}

static int geom_fail(const fx_case *c, const char *variant, int k, const char *what) {
    fprintf(stderr, "  FAIL %s/%s (line %d) [meta %s] out %d: %s\n", c->op, c->label, c->line,
            variant, k, what);
    return 1;
}

static void dims_str(char *b, size_t cap, const int64_t *v, int n) {
    size_t o = 0;
    b[0] = 0;
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(b + o, cap - o, "%s%lld", i ? "," : "", (long long)v[i]);
}

/* meta output k against the cpu output k: dtype, sizes, strides, offset, device */
static int compare_geometry(const fx_case *c, const char *variant, int k, ct_tensor *m,
                            ct_tensor *cpu) {
    char msg[512], a[160], b[160];
    if (!cpu) return 0; /* the cpu run already failed on it */
    if (!m) return geom_fail(c, variant, k, "NULL result on meta");
    if (ct_get_device(m) != CT_META) {
        snprintf(msg, sizeof msg, "device %s, expected meta", ct_device_name(ct_get_device(m)));
        return geom_fail(c, variant, k, msg);
    }
    if (ct_get_dtype(m) != ct_get_dtype(cpu)) {
        snprintf(msg, sizeof msg, "dtype %s on meta, %s on cpu", ct_dtype_name(ct_get_dtype(m)),
                 ct_dtype_name(ct_get_dtype(cpu)));
        return geom_fail(c, variant, k, msg);
    }
    int nd = ct_ndim(m);
    if (nd != ct_ndim(cpu) || memcmp(ct_sizes(m), ct_sizes(cpu), sizeof(int64_t) * (size_t)nd) != 0) {
        dims_str(a, sizeof a, ct_sizes(m), nd);
        dims_str(b, sizeof b, ct_sizes(cpu), ct_ndim(cpu));
        snprintf(msg, sizeof msg, "sizes [%s] on meta, [%s] on cpu", a, b);
        return geom_fail(c, variant, k, msg);
    }
    if (memcmp(ct_strides(m), ct_strides(cpu), sizeof(int64_t) * (size_t)nd) != 0) {
        dims_str(a, sizeof a, ct_strides(m), nd);
        dims_str(b, sizeof b, ct_strides(cpu), nd);
        snprintf(msg, sizeof msg, "strides [%s] on meta, [%s] on cpu", a, b);
        return geom_fail(c, variant, k, msg);
    }
    if (ct_storage_offset(m) != ct_storage_offset(cpu)) {
        snprintf(msg, sizeof msg, "storage offset %lld on meta, %lld on cpu",
                 (long long)ct_storage_offset(m), (long long)ct_storage_offset(cpu));
        return geom_fail(c, variant, k, msg);
    }
    return 0;
}

/* Runs the case again with every input on meta (the same sizes, strides and offsets as the cpu
 * run's inputs), inside the cpu run's scope.  The default device stays cpu (the library's
 * temporaries must follow their inputs' device), except for cases without inputs (factories),
 * which run with the default device meta.  The meta
 * outputs must have the cpu outputs' geometry; a cpu error must come back the same (code and
 * message); a data-dependent case must be refused with CT_ERR_DEVICE. */
static int meta_case(const fx_case *c, const fx_op *op, int noncontig_mode, ct_status cpu_st,
                     const char *cpu_err, ct_tensor *const *cpu_outs) {
    const char *variant = noncontig_mode ? "non-contiguous" : "contiguous";
    ct_tensor *ins[FX_MAX_T];
    for (int k = 0; k < c->nin; k++) {
        ins[k] = noncontig_mode ? noncontig_on(c->in[k], CT_META) : ct_to_device(c->in[k], CT_META);
        if (!ins[k]) {
            fprintf(stderr, "  FAIL %s/%s [meta %s]: making a meta input: %s\n", c->op, c->label,
                    variant, ct_last_error());
            g_meta.failed++;
            return 1;
        }
    }
    g_meta.run++;
    ct_tensor *outs[FX_MAX_T] = {0};
    ct_clear_error();
    if (c->nin == 0 && ct_set_default_device(CT_META)) {
        fprintf(stderr, "  FAIL set_default_device(meta): %s\n", ct_last_error());
        g_meta.failed++;
        return 1;
    }
    ct_status st = op->run(c, ins, outs);
    if (ct_set_default_device(CT_CPU)) {
        fprintf(stderr, "  FAIL set_default_device(cpu): %s\n", ct_last_error());
        g_meta.failed++;
        return 1;
    }
    int fails = 0;
    if (cpu_st != CT_OK) {
        if (st != cpu_st || strcmp(ct_last_error(), cpu_err) != 0) {
            fprintf(stderr, "  FAIL %s/%s (line %d) [meta %s]: the cpu run failed with %s \"%s\", "
                    "the meta run gave %s \"%s\"\n", c->op, c->label, c->line, variant,
                    ct_status_name(cpu_st), cpu_err, ct_status_name(st), st ? ct_last_error() : "");
            fails = 1;
        } else {
            g_meta.same_error++;
        }
    } else if (g_meta_dd(c)) {
        if (st != CT_ERR_DEVICE || !strstr(ct_last_error(), "meta")) {
            fprintf(stderr, "  FAIL %s/%s (line %d) [meta %s]: an op whose output shape depends on "
                    "the values must refuse meta inputs with CT_ERR_DEVICE, got %s \"%s\"\n",
                    c->op, c->label, c->line, variant, ct_status_name(st), st ? ct_last_error() : "");
            fails = 1;
        } else {
            g_meta.refused++;
        }
    } else if (st != CT_OK) {
        fprintf(stderr, "  FAIL %s/%s (line %d) [meta %s]: %s: %s\n", c->op, c->label, c->line,
                variant, ct_status_name(st), ct_last_error());
        fails = 1;
    } else {
        for (int k = 0; k < c->nout; k++) fails += compare_geometry(c, variant, k, outs[k], cpu_outs[k]);
        if (!fails) g_meta.matched++;
    }
    if (fails) g_meta.failed++;
    return fails ? 1 : 0;
}

/* ---- the device rerun (fx_set_device_check) ------------------------------ */
static bool g_dev_on;
static ct_dev g_dev;
static fx_device_tally g_devt;
/* per op name: 1 ran on the device, 2 a case had no kernel, 4 a case failed, 8 a case ran
 * (part of) its work through the cpu fallback, 16 its backward ran on the device, 32 a case ran
 * on the device's own kernels alone */
static char *g_dev_ops[1024];
static int g_dev_opflags[1024], g_dev_nops;

void fx_set_device_check(bool on, ct_dev dev) {
    g_dev_on = on;
    g_dev = dev;
}

static void dev_flag(const char *op, int flag) {
    for (int i = 0; i < g_dev_nops; i++)
        if (strcmp(g_dev_ops[i], op) == 0) { g_dev_opflags[i] |= flag; return; }
    if (g_dev_nops < 1024) {
        g_dev_ops[g_dev_nops] = strdup(op);
        g_dev_opflags[g_dev_nops++] = flag;
    }
}

fx_device_tally fx_device_summary(void) {
    fx_device_tally t = g_devt;
    t.ops = g_dev_nops;
    t.ops_passed = t.ops_no_kernel = t.ops_failed = t.ops_own = t.ops_fallback = t.ops_backward = 0;
    for (int i = 0; i < g_dev_nops; i++) {
        if (g_dev_opflags[i] & 4) t.ops_failed++;
        else if (g_dev_opflags[i] & 2) t.ops_no_kernel++;
        else {
            t.ops_passed++;
            if (!(g_dev_opflags[i] & 8)) t.ops_own++;
            else if (g_dev_opflags[i] & 32) t.ops_mixed++;
            else t.ops_fallback++;
        }
        if (g_dev_opflags[i] & 16) t.ops_backward++;
    }
    return t;
}

void fx_device_reset(void) {
    for (int i = 0; i < g_dev_nops; i++) free(g_dev_ops[i]);
    g_dev_nops = 0;
    memset(&g_devt, 0, sizeof g_devt);
}

void fx_device_print_ops(FILE *f, int which) {
    for (int i = 0; i < g_dev_nops; i++) {
        int fl = g_dev_opflags[i];
        int cls = (fl & 4) ? 4 : (fl & 2) ? 2 : (fl & 8) ? ((fl & 32) ? 32 : 8) : 1;
        if (cls == which) fprintf(f, " %s", g_dev_ops[i]);
    }
}

/* Whether the error says the op (or a dtype of it) has no kernel on the device, or needs the
 * values on the host: skipped and counted, not failed. */
static bool dev_no_kernel(ct_status st, const char *msg) {
    return st == CT_ERR_DEVICE && (strstr(msg, "no kernel for device") != NULL ||
                                   strstr(msg, "cannot be read on the host") != NULL);
}

long ct__fallback_runs(int op); /* src/backend/fallback.c: calls run through the cpu fallback */

static bool grad_dtype(ct_tensor *t) {
    return t && (ct_get_dtype(t) == CT_F32 || ct_get_dtype(t) == CT_F64);
}

/* The backward of one run: the floating inputs (copies of c's, on dev, requiring grad) through the
 * op, the loss sum_k sum(out_k * w_k) over the floating outputs (w_k fixed, varied values, so
 * that each output element's gradient differs), its gradients to grads[k] (NULL: none).  Returns
 * CT_OK, or the error; *any: whether some input got a gradient. */
static ct_status backward_run(const fx_case *c, const fx_op *op, ct_dev dev, ct_tensor **grads, bool *any) {
    ct_tensor *ins[FX_MAX_T], *outs[FX_MAX_T] = {0};
    *any = false;
    for (int k = 0; k < c->nin; k++) {
        grads[k] = NULL;
        ins[k] = ct_clone(ct_to_dev(c->in[k], dev));
        if (!ins[k]) return ct_last_error_code();
        if (grad_dtype(ins[k]) && ct_set_requires_grad(ins[k], true)) return ct_last_error_code();
    }
    ct_status st = op->run(c, ins, outs);
    if (st) return st;
    ct_tensor *loss = NULL;
    for (int k = 0; k < c->nout; k++) {
        if (!grad_dtype(outs[k]) || !ct_requires_grad(outs[k])) continue;
        int64_t n = ct_numel(outs[k]);
        ct_tensor *w = ct_reshape(ct_cos(ct_arange(0.0, (double)n, 1.0, ct_get_dtype(outs[k]))), ct_sizes(outs[k]),
                                  ct_ndim(outs[k]));
        ct_tensor *term = ct_sum(ct_mul(outs[k], ct_to_dev(w, dev)), NULL, 0, false);
        loss = loss ? ct_add(loss, term) : term;
        if (!loss) return ct_last_error_code();
    }
    if (!loss) return CT_OK;
    st = ct_backward(loss, NULL, false, false);
    if (st) return st;
    for (int k = 0; k < c->nin; k++)
        if (grad_dtype(ins[k]) && ct_grad(ins[k])) {
            grads[k] = ct_to_dev(ct_grad(ins[k]), CT_DEV(CT_CPU, 0));
            *any = true;
        }
    return CT_OK;
}

/* The backward of the case on g_dev against the cpu's: each input's gradient, copied back, within
 * the case's tolerance (widened tenfold: the gradient sums over many products).  A case whose cpu
 * backward fails (an op without a derivative, integer outputs) is not checked.  Returns failures. */
static int device_backward(const fx_case *c, const fx_op *op, const char *variant, double rtol, double atol) {
    ct_tensor *gc[FX_MAX_T], *gd[FX_MAX_T];
    bool any_c, any_d;
    ct_clear_error();
    if (backward_run(c, op, CT_DEV(CT_CPU, 0), gc, &any_c) || !any_c) {
        ct_clear_error();
        return 0;
    }
    ct_status st = backward_run(c, op, g_dev, gd, &any_d);
    if (st) {
        if (dev_no_kernel(st, ct_last_error())) { ct_clear_error(); dev_flag(c->op, 2); return 0; }
        fprintf(stderr, "  FAIL %s/%s (line %d) [%s backward]: %s: %s\n", c->op, c->label, c->line, variant,
                ct_status_name(st), ct_last_error());
        ct_clear_error();
        return 1;
    }
    int fails = 0;
    for (int k = 0; k < c->nin; k++) {
        if (!gc[k]) continue;
        if (!gd[k]) {
            fprintf(stderr, "  FAIL %s/%s [%s backward]: input %d has no gradient on the device\n", c->op,
                    c->label, variant, k);
            fails++;
            continue;
        }
        if (ct_allclose(gd[k], gc[k], rtol * 10, atol * 10 + 1e-6, true) != 1) {
            fprintf(stderr, "  FAIL %s/%s (line %d) [%s backward]: the gradient of input %d differs from the "
                    "cpu's\n", c->op, c->label, c->line, variant, k);
            fails++;
        }
    }
    if (!fails) dev_flag(c->op, 16);
    return fails;
}

/* Runs the case again with every input on g_dev (contiguous, or the non-contiguous layout of the cpu
 * run), inside the cpu run's scope; factories (no inputs) run with the default device g_dev.  Each
 * output must be on g_dev and, copied to the cpu, match the cpu run's output at the case's
 * tolerance.  A missing kernel is counted, not failed. */
static int device_case(const fx_case *c, const fx_op *op, int noncontig_mode, ct_tensor *const *cpu_outs,
                       double rtol, double atol) {
    char variant[64], dn[32];
    snprintf(variant, sizeof variant, "%s %s", ct_dev_str(g_dev, dn, sizeof dn),
             noncontig_mode ? "non-contiguous" : "contiguous");
    ct_tensor *ins[FX_MAX_T];
    g_devt.case_runs++;
    if (getenv("CT_TEST_TRACE")) fprintf(stderr, "device case %s/%s (line %d) [%s]\n", c->op, c->label, c->line, variant);
    ct_clear_error();
    for (int k = 0; k < c->nin; k++) {
        ins[k] = noncontig_mode ? noncontig_on(c->in[k], g_dev.type) : ct_to_dev(c->in[k], g_dev);
        if (!ins[k]) {
            ct_status st = ct_last_error_code();
            if (dev_no_kernel(st, ct_last_error())) { /* e.g. no copy kernel for that dtype */
                g_devt.no_kernel++;
                dev_flag(c->op, 2);
                return 0;
            }
            fprintf(stderr, "  FAIL %s/%s [%s]: making a device input: %s\n", c->op, c->label, variant,
                    ct_last_error());
            g_devt.failed++;
            dev_flag(c->op, 4);
            return 1;
        }
    }
    ct_tensor *outs[FX_MAX_T] = {0};
    ct_dev cpu = CT_DEV(CT_CPU, 0);
    if (c->nin == 0 && ct_set_default_dev(g_dev)) {
        fprintf(stderr, "  FAIL set_default_dev(%s): %s\n", dn, ct_last_error());
        g_devt.failed++;
        return 1;
    }
    long fb0 = ct__fallback_runs(-1);
    ct_status st = op->run(c, ins, outs);
    bool fell_back = ct__fallback_runs(-1) != fb0;
    char err[1024];
    snprintf(err, sizeof err, "%s", st ? ct_last_error() : "");
    if (ct_set_default_dev(cpu)) {
        fprintf(stderr, "  FAIL set_default_dev(cpu): %s\n", ct_last_error());
        g_devt.failed++;
        return 1;
    }
    if (st != CT_OK) {
        if (dev_no_kernel(st, err)) {
            g_devt.no_kernel++;
            dev_flag(c->op, 2);
            if (getenv("CT_TEST_VERBOSE"))
                fprintf(stderr, "  no kernel %s/%s [%s]: %s\n", c->op, c->label, variant, err);
            return 0;
        }
        fprintf(stderr, "  FAIL %s/%s (line %d) [%s]: %s: %s\n", c->op, c->label, c->line, variant,
                ct_status_name(st), err);
        g_devt.failed++;
        dev_flag(c->op, 4);
        return 1;
    }
    int fails = 0;
    for (int k = 0; k < c->nout; k++) {
        if (!outs[k] || !ct_dev_equal(ct_tensor_dev(outs[k]), g_dev)) {
            char on[32] = "?";
            if (outs[k]) ct_dev_str(ct_tensor_dev(outs[k]), on, sizeof on);
            fprintf(stderr, "  FAIL %s/%s (line %d) [%s] out %d: result on %s, expected %s\n", c->op,
                    c->label, c->line, variant, k, on, dn);
            fails++;
            continue;
        }
        fails += compare(c, variant, k, ct_to_dev(outs[k], cpu), cpu_outs[k], rtol, atol);
    }
    if (fell_back) {
        g_devt.fallback++;
        dev_flag(c->op, 8);
    } else {
        dev_flag(c->op, 32);
    }
    /* the backward, once per case (contiguous inputs) */
    if (!fails && !noncontig_mode && c->nin > 0) fails += device_backward(c, op, variant, rtol, atol);
    if (fails) {
        g_devt.failed++;
        dev_flag(c->op, 4);
    } else {
        g_devt.passed++;
        dev_flag(c->op, 1);
    }
    return fails ? 1 : 0;
}

/* ---- the compiled rerun (fx_set_compile_check) --------------------------- */
static fx_fallback_fn g_cmp_fallback; /* non-NULL: compile mode */
static fx_compile_tally g_cmp;

void fx_set_compile_check(fx_fallback_fn fallback) { g_cmp_fallback = fallback; }
fx_compile_tally fx_compile_summary(void) { return g_cmp; }
void fx_compile_print_summary(void) {
    printf("compiled rerun: %d case runs through ct_compile (2 calls each): %d ran the compiled "
           "graph and matched torch, %d fell back to eager and matched, %d same-error, %d failed; "
           "%lld kernels built or loaded\n",
           g_cmp.run, g_cmp.compiled, g_cmp.eager, g_cmp.same_error, g_cmp.failed,
           (long long)g_cmp.kernels);
}

/* what the compiled function calls: the case's run function */
typedef struct fx_cctx {
    const fx_case *c;
    fx_run_fn run;
} fx_cctx;

static ct_status compiled_body(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    const fx_cctx *x = ctx;
    ct_tensor *o[FX_MAX_T] = {0}; /* a run function writes the case's outputs, no more */
    (void)nin;
    ct_status st = x->run(x->c, in, o);
    for (int k = 0; k < nout && k < FX_MAX_T; k++) out[k] = o[k];
    return st;
}

/* The text after "runs eagerly: " in ct_compile_explain (the variant of the last call), one line */
static void eager_reason(const ct_compiled *f, char *why, size_t cap) {
    char *e = ct_compile_explain(f);
    const char *p = e ? strstr(e, "runs eagerly: ") : NULL;
    if (p) {
        p += strlen("runs eagerly: ");
        size_t n = strcspn(p, "\n");
        snprintf(why, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    } else {
        snprintf(why, cap, "(explain gives no reason)");
    }
    free(e);
}

/* Reruns the case through ct_compile (fx_set_compile_check): two calls of a fresh compiled
 * function on fresh inputs with the cpu run's layout, each compared with torch like the cpu
 * run, or failing with the cpu run's error code. */
static int compile_case(const fx_case *c, const fx_op *op, int noncontig_mode, ct_status cpu_st,
                        const char *cpu_err) {
    const char *variant = noncontig_mode ? "non-contiguous" : "contiguous";
    fx_cctx ctx = {c, op->run};
    int fails = 0;
    ct_compiled *f = ct_compile(compiled_body, &ctx, NULL);
    if (!f) {
        fprintf(stderr, "  FAIL %s/%s [compiled %s]: ct_compile: %s\n", c->op, c->label, variant,
                ct_last_error());
        g_cmp.failed++;
        return 1;
    }
    g_cmp.run++;
    double rtol = fx_f(c, "cmp_rtol", op->rtol), atol = fx_f(c, "cmp_atol", op->atol);
    for (int call = 1; call <= 2 && !fails; call++) {
        char vname[64];
        snprintf(vname, sizeof vname, "compiled %s, call %d", variant, call);
        ct_scope s = ct_scope_begin();
        ct_tensor *ins[FX_MAX_T];
        for (int k = 0; k < c->nin && !fails; k++) {
            ins[k] = noncontig_mode ? noncontig(c->in[k]) : ct_clone(c->in[k]);
            if (!ins[k]) {
                fprintf(stderr, "  FAIL %s/%s [%s]: making an input: %s\n", c->op, c->label, vname,
                        ct_last_error());
                fails = 1;
            }
        }
        ct_tensor *outs[FX_MAX_T] = {0};
        if (!fails) {
            ct_manual_seed(FX_COMPILE_SEED);
            ct_clear_error();
            ct_status st = ct_compiled_call(f, ins, c->nin, outs, c->nout);
            if (cpu_st != CT_OK) {
                if (st != cpu_st) {
                    fprintf(stderr, "  FAIL %s/%s (line %d) [%s]: the cpu run failed with %s \"%s\", "
                            "the compiled call gave %s \"%s\"\n", c->op, c->label, c->line, vname,
                            ct_status_name(cpu_st), cpu_err, ct_status_name(st),
                            st ? ct_last_error() : "");
                    fails = 1;
                }
            } else if (st != CT_OK) {
                fprintf(stderr, "  FAIL %s/%s (line %d) [%s]: %s: %s\n", c->op, c->label, c->line,
                        vname, ct_status_name(st), ct_last_error());
                fails = 1;
            } else {
                for (int k = 0; k < c->nout; k++)
                    fails += compare(c, vname, k, outs[k], c->out[k], rtol, atol);
            }
        }
        ct_scope_end(s);
    }
    ct_compile_stats cs = ct_compiled_stats(f);
    g_cmp.kernels += cs.kernels_built + cs.kernels_loaded;
    if (!fails && cpu_st != CT_OK) {
        g_cmp.same_error++;
    } else if (!fails && cs.eager_calls == 0) {
        g_cmp.compiled++;
    } else if (!fails) {
        char why[512];
        eager_reason(f, why, sizeof why);
        if (g_cmp_fallback(c, variant, why)) {
            g_cmp.eager++;
        } else {
            fprintf(stderr, "  FAIL %s/%s (line %d) [compiled %s]: ran eagerly (%lld of 2 calls), "
                    "not expected for this op: %s\n", c->op, c->label, c->line, variant,
                    (long long)cs.eager_calls, why);
            fails = 1;
        }
    }
    ct_compiled_free(f);
    if (fails) g_cmp.failed++;
    return fails ? 1 : 0;
}

static fx_vmap_check_fn g_vmap_check;
void fx_set_vmap_check(fx_vmap_check_fn check) { g_vmap_check = check; }

#define MAX_OPS 1024
static char *g_ops[MAX_OPS];
static int g_nops;
static void tally(const char *op) {
    for (int i = 0; i < g_nops; i++)
        if (strcmp(g_ops[i], op) == 0) return;
    if (g_nops < MAX_OPS) g_ops[g_nops++] = strdup(op);
}
int fx_ops_checked(void) { return g_nops; }
void fx_print_summary(void) {
    printf("ops checked against PyTorch fixtures (contiguous and non-contiguous): %d\n", g_nops);
}

static int run_case(fx_case *c, const fx_op *op, int noncontig_mode) {
    ct_scope s = ct_scope_begin();
    ct_tensor *ins[FX_MAX_T];
    int fails = 0;
    for (int k = 0; k < c->nin; k++) ins[k] = noncontig_mode ? noncontig(c->in[k]) : ct_clone(c->in[k]); /* in-place ops must not touch the case */
    for (int k = 0; k < c->nin; k++)
        if (!ins[k]) {
            fprintf(stderr, "  FAIL %s/%s: making a non-contiguous input: %s\n", c->op, c->label, ct_last_error());
            fails = 1;
        }
    ct_tensor *outs[FX_MAX_T] = {0};
    if (!fails) {
        if (g_cmp_fallback) ct_manual_seed(FX_COMPILE_SEED);
        ct_clear_error();
        ct_status st = op->run(c, ins, outs);
        char err[1024]; /* the cpu run's error, for the meta and compiled reruns */
        snprintf(err, sizeof err, "%s", st ? ct_last_error() : "");
        const char *variant = noncontig_mode ? "non-contiguous" : "contiguous";
        if (st != CT_OK) {
            fprintf(stderr, "  FAIL %s/%s [%s]: %s: %s\n", c->op, c->label, variant, ct_status_name(st),
                    ct_last_error());
            fails = 1;
        } else {
            /* a case may widen its own tolerance (cmp_rtol / cmp_atol
             * params: f32 products over tens of terms, compared where the
             * sum cancels to near 0, need torch.testing's f32 atol 1e-5) */
            double rtol = fx_f(c, "cmp_rtol", op->rtol), atol = fx_f(c, "cmp_atol", op->atol);
            for (int k = 0; k < c->nout; k++)
                fails += compare(c, variant, k, outs[k], c->out[k], rtol, atol);
        }
        if (g_meta_dd) fails += meta_case(c, op, noncontig_mode, st, err, outs);
        if (g_dev_on && st == CT_OK)
            fails += device_case(c, op, noncontig_mode, outs, fx_f(c, "cmp_rtol", op->rtol),
                                 fx_f(c, "cmp_atol", op->atol));
        if (g_cmp_fallback) fails += compile_case(c, op, noncontig_mode, st, err);
        if (g_vmap_check && st == CT_OK && !noncontig_mode) fails += g_vmap_check(c, op, ins);
    }
    ct_scope_end(s);
    return fails;
}

static void free_case(fx_case *c) {
    for (int k = 0; k < c->nin; k++) ct_release(c->in[k]);
    for (int k = 0; k < c->nout; k++) ct_release(c->out[k]);
    c->nin = c->nout = 0;
}

int fx_run_file(const char *file, const fx_op *table, int n) {
    FILE *f = fopen(file, "r");
    if (!f) {
        fprintf(stderr, "cannot open fixture file %s\n", file);
        return 1;
    }
    size_t cap = 1 << 20;
    char *line = malloc(cap);
    fx_case c;
    memset(&c, 0, sizeof c);
    int fails = 0, lineno = 0, ncases = 0;
    /* per-op: passed all contiguous and non-contiguous cases */
    char *okops[MAX_OPS];
    int okflag[MAX_OPS], nok = 0;
    while (1) {
        /* read an arbitrarily long line */
        size_t len = 0;
        int ch;
        int got = 0;
        while ((ch = fgetc(f)) != EOF) {
            got = 1;
            if (ch == '\n') break;
            if (len + 1 >= cap) {
                cap *= 2;
                line = realloc(line, cap);
            }
            line[len++] = (char)ch;
        }
        if (!got) break;
        line[len] = 0;
        lineno++;
        char *rest = line;
        char *kw = next_tok(&rest);
        if (!kw || kw[0] == '#') continue;
        if (strcmp(kw, "case") == 0) {
            free_case(&c);
            memset(&c, 0, sizeof c);
            char *op = next_tok(&rest), *label = next_tok(&rest);
            snprintf(c.op, sizeof c.op, "%s", op ? op : "?");
            snprintf(c.label, sizeof c.label, "%s", label ? label : "-");
            c.line = lineno;
        } else if (strcmp(kw, "param") == 0) {
            char *name = next_tok(&rest), *val = next_tok(&rest);
            if (name && c.nparams < FX_MAX_P) {
                snprintf(c.pname[c.nparams], 32, "%s", name);
                snprintf(c.pval[c.nparams], 512, "%s", val ? val : "");
                c.nparams++;
            }
        } else if (strcmp(kw, "in") == 0 || strcmp(kw, "out") == 0) {
            ct_tensor *t = parse_tensor(rest, lineno);
            if (!t) { fails++; continue; }
            if (kw[0] == 'i' && c.nin < FX_MAX_T) c.in[c.nin++] = t;
            else if (kw[0] == 'o' && c.nout < FX_MAX_T) c.out[c.nout++] = t;
            else ct_release(t);
        } else if (strcmp(kw, "end") == 0) {
            ncases++;
            const fx_op *op = NULL;
            for (int i = 0; i < n; i++)
                if (strcmp(table[i].op, c.op) == 0) { op = &table[i]; break; }
            int idx = -1;
            for (int i = 0; i < nok; i++)
                if (strcmp(okops[i], c.op) == 0) idx = i;
            if (idx < 0 && nok < MAX_OPS) { okops[nok] = strdup(c.op); okflag[nok] = 1; idx = nok++; }
            if (!op) {
                fprintf(stderr, "  FAIL %s/%s (line %d): no runner for op '%s'\n", c.op, c.label, c.line, c.op);
                fails++;
                if (idx >= 0) okflag[idx] = 0;
                continue;
            }
            int f1 = run_case(&c, op, 0);
            int f2 = fx_i(&c, "noncontig", 1) ? run_case(&c, op, 1) : 0;
            if (f1 || f2) {
                fails++;
                if (idx >= 0) okflag[idx] = 0;
            }
        }
    }
    free_case(&c);
    fclose(f);
    free(line);
    for (int i = 0; i < nok; i++) {
        if (okflag[i]) tally(okops[i]);
        free(okops[i]);
    }
    printf("%s: %d cases, %d failed\n", file, ncases, fails);
    return fails;
}

ct_tensor *fx_leaf(ct_tensor *t) {
    ct_tensor *l = ct_detach(t);
    if (l && ct_set_requires_grad(l, true)) return NULL;
    return l;
}

ct_status fx_backward(ct_tensor *y, ct_tensor *gy) {
    if (!y) return ct_last_error_code();
    return ct_backward(y, gy, false, false);
}

ct_status fx_vjp(ct_tensor *y, ct_tensor *gy, ct_tensor *const *leaves, int n, ct_tensor **out) {
    ct_status st = fx_backward(y, gy);
    if (st) return st;
    int o = 0;
    out[o++] = y;
    for (int i = 0; i < n; i++)
        if (leaves[i]) out[o++] = ct_grad(leaves[i]);
    return CT_OK;
}
