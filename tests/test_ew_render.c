/* test_ew_render.c -- the rendered C expressions of the elementwise ops
 * (src/ops/render.h, from src/ops/ew_math.def) against the CPU kernels
 * generated from the same list.
 *
 *   - every elementwise op of ops.def (its unary, binary and ternary
 *     sections: every CT_OPF_EW op but copy and fill) has a line in
 *     ew_math.def, with ops.def's arity, and ew_math.def's (op, dtype)
 *     pairs are exactly the CPU's loops;
 *   - the fixture run: every case of tests/fixtures/elementwise.txt runs
 *     (contiguous and non-contiguous, checked against torch as test_ops
 *     does) with a recorder in front of every elementwise CPU kernel, which
 *     keeps what the kernel got (operands broadcast to the output's shape,
 *     the kernel dtype, the ct_p_ew parameters) and what it wrote.  Pairs
 *     (op, kernel dtype) that no case reaches are filled in from the op's
 *     recorded inputs converted to that dtype, run through the kernel;
 *   - ONE C program is written with every recorded input as arrays and,
 *     per (op, dtype, parameters), a loop storing ct__ew_render's
 *     expression; it is compiled with the system C compiler ($CC, else the
 *     compiler that built ctorch, else `cc` on PATH) and the build's flags,
 *     run, and its output bytes compared with (a) the scalar loop generated
 *     from the same line (ct__cpu_ew_scalar_loop): bit for bit -- the same
 *     expression, the same compiler and flags (-ffp-contract as the build's,
 *     no -ffast-math), only the operands' source differs; the program
 *     reads its inputs through a volatile pointer so the compiler cannot
 *     fold libm calls at compile time; and (b) what the registered kernel
 *     computed: bit for bit where that kernel is the generated loop, within
 *     the f32 fixture tolerance (rtol 1e-5, atol 1e-6) where the CPU runs
 *     its vectorized f32 loop instead (ew_vec*.c: its own polynomials).
 *     When the compiler found is not the build's, float results are only
 *     held to that tolerance (another compiler may contract or call other
 *     libm entry points).
 *   - the renderer itself: operand and parameter substitution, exact
 *     literals, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctorch/ctorch.h>

#include "fixture.h"
#include "ops/ew.h"
#include "ops/render.h"

#ifndef CT_EW_RENDER_CC
#define CT_EW_RENDER_CC "cc"
#endif
#ifndef CT_EW_RENDER_CFLAGS
#define CT_EW_RENDER_CFLAGS "-O3"
#endif

extern const fx_op fx_ops_elementwise[];
extern const int fx_nops_elementwise;

static const ct_dtype k_dts[] = {CT_BOOL, CT_U8, CT_I8, CT_I16, CT_I32, CT_I64, CT_F32, CT_F64};
#define NDT ((int)(sizeof k_dts / sizeof k_dts[0]))
#define MAX_GROUP 768 /* elements per (op, dtype, params) group in the program */

/* ---- records: what a kernel got and wrote ------------------------------ */
typedef struct rec {
    ct_op op;
    ct_dtype dt, odt; /* kernel dtype (the values'), output dtype */
    int nin;
    ct_p_ew p;
    int64_t n;
    unsigned char *in[3]; /* n elements each, contiguous (where: in[0] bool bytes) */
    unsigned char *kout;  /* what the registered kernel wrote */
    unsigned char *sout;  /* what the generated scalar loop writes */
    bool synthetic;
} rec;

static rec *g_recs;
static int g_nrecs, g_caprecs;
static ct_kernel_fn g_orig[CT_OP_COUNT];
static char g_fail[512];

static size_t esz(ct_dtype dt) { return ct_dtype_size(dt); }
static ct_dtype in_dtype(const rec *r, int k) {
    return (r->op == CT_OP_where && k == 0) ? CT_BOOL : r->dt;
}

/* t's elements broadcast to shape[nd], row-major, as a malloc'ed array */
static unsigned char *gather(const ct_tensor *t, const int64_t *shape, int nd, int64_t n) {
    size_t es = esz(t->dtype);
    unsigned char *buf = malloc((size_t)(n ? n : 1) * es);
    if (!buf) return NULL;
    int64_t st[CT_MAX_DIMS], idx[CT_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int td = d - (nd - t->ndim);
        st[d] = (td < 0 || t->sizes[td] == 1) ? 0 : t->strides[td];
        idx[d] = 0;
    }
    const unsigned char *base = ct__ptr(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * st[d];
        memcpy(buf + (size_t)i * es, base + off * (int64_t)es, es);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < shape[d]) break;
            idx[d] = 0;
        }
    }
    return buf;
}

static void rec_free(rec *r) {
    for (int k = 0; k < 3; k++) free(r->in[k]);
    free(r->kout);
    free(r->sout);
}

static bool same_inputs(const rec *a, const rec *b) {
    if (a->op != b->op || a->dt != b->dt || a->n != b->n || memcmp(&a->p, &b->p, sizeof a->p))
        return false;
    for (int k = 0; k < a->nin; k++)
        if (memcmp(a->in[k], b->in[k], (size_t)a->n * esz(in_dtype(a, k)))) return false;
    return true;
}

/* keeps r (takes its arrays) unless an identical call is already kept */
static void rec_add(rec *r) {
    for (int i = 0; i < g_nrecs; i++)
        if (same_inputs(&g_recs[i], r)) {
            rec_free(r);
            return;
        }
    if (g_nrecs == g_caprecs) {
        g_caprecs = g_caprecs ? 2 * g_caprecs : 256;
        g_recs = realloc(g_recs, sizeof(rec) * (size_t)g_caprecs);
        assert_non_null(g_recs);
    }
    g_recs[g_nrecs++] = *r;
}

static ct_status k_record(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                          const ct_args *a) {
    rec r;
    memset(&r, 0, sizeof r);
    r.op = a->op;
    r.nin = nin;
    r.dt = nin > 0 ? in[nin - 1]->dtype : out[0]->dtype;
    r.odt = out[0]->dtype;
    r.p = a->p.ew;
    r.n = ct_numel(out[0]);
    bool ok = nin <= 3;
    /* f16/bf16 operands (the CPU kernels compute them through the f32 loop,
     * k_ew_half; tests/test_half_ops.c checks them) are not kernel dtypes of
     * the rendered math: not recorded */
    for (int k = 0; ok && k <= nin; k++) {
        ct_dtype d = k < nin ? in[k]->dtype : out[0]->dtype;
        ok = d != CT_F16 && d != CT_BF16;
    }
    for (int k = 0; ok && k < nin; k++) ok = (r.in[k] = gather(in[k], out[0]->sizes, out[0]->ndim, r.n)) != NULL;
    ct_status st = g_orig[a->op](out, nout, in, nin, a);
    if (st == CT_OK && ok && r.n > 0 && (r.kout = gather(out[0], out[0]->sizes, out[0]->ndim, r.n))) {
        rec_add(&r);
    } else {
        rec_free(&r);
    }
    return st;
}

/* ---- value conversion for the pairs no fixture reaches ----------------- */
static double get_d(const unsigned char *p, ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: case CT_U8: return *p;
    case CT_I8: return *(const int8_t *)p;
    case CT_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case CT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case CT_I64: { int64_t v; memcpy(&v, p, 8); return (double)v; }
    case CT_F32: { float v; memcpy(&v, p, 4); return v; }
    default: { double v; memcpy(&v, p, 8); return v; }
    }
}
/* v converted to dt the way a user's cast would, saturating (no UB) */
static void put_d(unsigned char *p, ct_dtype dt, double v) {
    if (dt == CT_BOOL) { *p = v != 0; return; }
    if (dt == CT_F32) { float f = (float)v; memcpy(p, &f, 4); return; }
    if (dt == CT_F64) { memcpy(p, &v, 8); return; }
    double lo, hi;
    switch (dt) {
    case CT_U8: lo = 0, hi = 255; break;
    case CT_I8: lo = -128, hi = 127; break;
    case CT_I16: lo = -32768, hi = 32767; break;
    case CT_I32: lo = -2147483648.0, hi = 2147483647.0; break;
    default: lo = -9223372036854775808.0, hi = 9223372036854774784.0; break;
    }
    if (v != v) v = 0;
    v = v < lo ? lo : v > hi ? hi : trunc(v);
    switch (dt) {
    case CT_U8: *p = (uint8_t)v; break;
    case CT_I8: *(int8_t *)p = (int8_t)v; break;
    case CT_I16: { int16_t x = (int16_t)v; memcpy(p, &x, 2); break; }
    case CT_I32: { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    default: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    }
}

static ct_tensor *tensor_of(const unsigned char *data, int64_t n, ct_dtype dt) {
    ct_tensor *t = ct__alloc(&n, 1, dt, CT_CPU);
    if (t && n) memcpy(ct__ptr(t), data, (size_t)n * esz(dt));
    return t;
}

/* runs op's registered kernel on src's inputs converted to dt; false when
 * the kernel refuses them (integer division by zero) */
static bool synth_run(const rec *src, ct_dtype dt, bool nonzero_divisor) {
    rec r;
    memset(&r, 0, sizeof r);
    r.op = src->op, r.nin = src->nin, r.dt = dt, r.p = src->p, r.n = src->n, r.synthetic = true;
    r.odt = (ct_dtype)ct__ew_out_dtype(r.op, dt);
    if (dt != CT_F32 && dt != CT_F64) {
        /* parameters a user could pass for this dtype: in its range (a
         * float bound converted to u8 out of range is undefined in C) */
        const ct_pfamily_info *fam = &ct__pfamilies[CT_PFAM_ew];
        for (int k = 0; k < fam->nfields; k++)
            if (fam->fields[k].kind == CT_PK_F64) {
                double v;
                unsigned char b[8];
                memcpy(&v, (char *)&r.p + fam->fields[k].off, 8);
                put_d(b, dt, v);
                v = get_d(b, dt);
                memcpy((char *)&r.p + fam->fields[k].off, &v, 8);
            }
    }
    ct_tensor *in[3] = {NULL, NULL, NULL}, *out = NULL;
    bool ok = true;
    for (int k = 0; k < r.nin && ok; k++) {
        ct_dtype sdt = in_dtype(src, k), ddt = in_dtype(&r, k);
        r.in[k] = malloc((size_t)r.n * esz(ddt));
        if (!(ok = r.in[k] != NULL)) break;
        for (int64_t i = 0; i < r.n; i++) {
            double v = get_d(src->in[k] + (size_t)i * esz(sdt), sdt);
            put_d(r.in[k] + (size_t)i * esz(ddt), ddt, v);
            if (nonzero_divisor && k == 1 && get_d(r.in[k] + (size_t)i * esz(ddt), ddt) == 0)
                put_d(r.in[k] + (size_t)i * esz(ddt), ddt, 1);
        }
        ok = (in[k] = tensor_of(r.in[k], r.n, ddt)) != NULL;
    }
    ct_status st = CT_ERR_RUNTIME;
    if (ok && (out = ct__alloc(&r.n, 1, r.odt, CT_CPU))) {
        ct_args a = ct__args(r.op);
        a.p.ew = r.p;
        st = g_orig[r.op](&out, 1, in, r.nin, &a);
        if (st == CT_OK) r.kout = gather(out, &r.n, 1, r.n);
    }
    for (int k = 0; k < 3; k++) ct_release(in[k]);
    ct_release(out);
    if (st != CT_OK || !r.kout) {
        rec_free(&r);
        ct_clear_error();
        return false;
    }
    rec_add(&r);
    return true;
}

/* ---- the program ------------------------------------------------------- */
static void emit_value(FILE *f, const unsigned char *p, ct_dtype dt) {
    switch (dt) {
    case CT_BOOL: case CT_U8: fprintf(f, "%u", *p); break;
    case CT_I8: fprintf(f, "%d", *(const int8_t *)p); break;
    case CT_I16: { int16_t v; memcpy(&v, p, 2); fprintf(f, "%d", v); break; }
    case CT_I32: { int32_t v; memcpy(&v, p, 4); fprintf(f, "%" PRId32, v); break; }
    case CT_I64: {
        int64_t v;
        memcpy(&v, p, 8);
        if (v == INT64_MIN) fprintf(f, "(-9223372036854775807LL-1)");
        else fprintf(f, "%" PRId64 "LL", v);
        break;
    }
    case CT_F32: { /* the bits, so NaN payloads and -0 survive */
        uint32_t b;
        memcpy(&b, p, 4);
        fprintf(f, "0x%08" PRIx32 "u", b);
        break;
    }
    default: {
        uint64_t b;
        memcpy(&b, p, 8);
        fprintf(f, "0x%016" PRIx64 "ull", b);
        break;
    }
    }
}

/* bits type of dt's arrays in the program */
static const char *bits_type(ct_dtype dt) {
    return dt == CT_F32 ? "uint32_t" : dt == CT_F64 ? "uint64_t" : ct__ew_ctype(dt);
}

typedef struct group {
    int first;  /* index of its first record; the others follow via next */
    int64_t n;
} group;
static int *g_next; /* per record: the next record of its group, -1 */
static int *g_group_of;

static bool same_group(const rec *a, const rec *b) {
    return a->op == b->op && a->dt == b->dt && !memcmp(&a->p, &b->p, sizeof a->p);
}

static bool write_program(const char *path, group *groups, int ngroups) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs("/* written by test_ew_render: every elementwise expression of ew_math.def,\n"
          " * rendered by ct__ew_render, over the fixture inputs */\n", f);
    fputs(ct__ew_prelude(), f);
    fputs("#include <stdio.h>\n#include <string.h>\n\n"
          "static void pr(int g, const void *o, long n, int es) {\n"
          "    const unsigned char *b = o;\n"
          "    printf(\"G %d\", g);\n"
          "    for (long i = 0; i < n * es; i++) printf(\" %02x\", b[i]);\n"
          "    printf(\"\\n\");\n}\n"
          "/* inputs are read through a pointer the compiler cannot see through, so\n"
          " * nothing is computed at compile time (the kernels compute at run time) */\n"
          "static const void *volatile launder_;\n"
          "static const void *launder(const void *p) { launder_ = p; return launder_; }\n\n",
          f);
    for (int g = 0; g < ngroups; g++) {
        const rec *r0 = &g_recs[groups[g].first];
        int64_t n = groups[g].n;
        for (int k = 0; k < r0->nin; k++) {
            ct_dtype dt = in_dtype(r0, k);
            fprintf(f, "static const %s g%d_in%d[%" PRId64 "] = {", bits_type(dt), g, k, n);
            int64_t c = 0;
            for (int ri = groups[g].first; ri >= 0; ri = g_next[ri]) {
                const rec *r = &g_recs[ri];
                for (int64_t i = 0; i < r->n; i++, c++) {
                    if (c) fputs(c % 8 ? ", " : ",\n    ", f);
                    emit_value(f, r->in[k] + (size_t)i * esz(dt), dt);
                }
            }
            fputs("};\n", f);
        }
        const char *ot = ct__ew_ctype(r0->odt);
        fprintf(f, "static void g%d(void) {\n", g);
        for (int k = 0; k < r0->nin; k++) { /* the bits, as the operands' type */
            const char *ct = ct__ew_ctype(in_dtype(r0, k));
            fprintf(f, "    static %s b%d[%" PRId64 "];\n    memcpy(b%d, g%d_in%d, sizeof b%d);\n", ct, k, n,
                    k, g, k, k);
            fprintf(f, "    const %s *a%d = launder(b%d);\n", ct, k, k);
        }
        fprintf(f, "    static %s o[%" PRId64 "];\n", ot, n);
        const char *ops[3] = {"a0[i]", "a1[i]", "a2[i]"};
        char *e = ct__ew_render(r0->op, r0->dt, ops, &r0->p);
        if (!e) {
            snprintf(g_fail, sizeof g_fail, "ct__ew_render(%s, %s) failed: %s",
                     ct__op_info[r0->op].name, ct_dtype_name(r0->dt), ct_last_error());
            fclose(f);
            return false;
        }
        fprintf(f, "    /* %s %s */\n    for (long i = 0; i < %" PRId64 "; i++)\n        o[i] = (%s)(%s);\n",
                ct__op_info[r0->op].name, ct_dtype_name(r0->dt), n, ot, e);
        free(e);
        fprintf(f, "    pr(%d, o, %" PRId64 ", (int)sizeof o[0]);\n}\n\n", g, n);
    }
    fputs("int main(void) {\n", f);
    for (int g = 0; g < ngroups; g++) fprintf(f, "    g%d();\n", g);
    fputs("    return 0;\n}\n", f);
    return fclose(f) == 0;
}

/* ---- the compiler ------------------------------------------------------ */
static bool runs(const char *cc) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --version >/dev/null 2>&1", cc);
    return system(cmd) == 0;
}
static void first_line(const char *cc, char *out, size_t n) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s --version 2>/dev/null", cc);
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)n, p)) out[0] = 0;
    pclose(p);
}

/* float bit patterns equal, or within the f32 fixture tolerance */
static bool close_f(double got, double want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got)) return got == want;
    return fabs(got - want) <= 1e-6 + 1e-5 * fabs(want);
}

static void run_scalar_loop(rec *r) {
    ct_loop_fn fn = ct__cpu_ew_scalar_loop(r->op, r->dt);
    assert_non_null(fn);
    r->sout = malloc((size_t)r->n * esz(r->odt));
    assert_non_null(r->sout);
    char *p[4] = {(char *)r->sout, NULL, NULL, NULL};
    int64_t s[4] = {(int64_t)esz(r->odt), 0, 0, 0};
    for (int k = 0; k < r->nin; k++) {
        p[k + 1] = (char *)r->in[k];
        s[k + 1] = (int64_t)esz(in_dtype(r, k));
    }
    ct_args a = ct__args(r->op);
    a.p.ew = r->p;
    fn(p, s, r->n, &a);
}

static void test_fixtures_rendered(void **state) {
    (void)state;
    ct__backends_init();
    /* 1. the recorder in front of every elementwise CPU kernel */
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (ct__ew_kind((ct_op)op) != CT_EWK_NONE) {
            g_orig[op] = ct__kernels[CT_CPU][op];
            assert_non_null(g_orig[op]);
            ct__kernels[CT_CPU][op] = k_record;
        }
    char path[512];
    snprintf(path, sizeof path, "%s/elementwise.txt", CT_FIXTURE_DIR);
    int fails = fx_run_file(path, fx_ops_elementwise, fx_nops_elementwise);
    for (int op = 0; op < CT_OP_COUNT; op++)
        if (g_orig[op]) ct__kernels[CT_CPU][op] = g_orig[op];
    assert_int_equal(fails, 0);
    int nfixture = g_nrecs;

    /* 2. pairs no case reached: the op's recorded inputs in that dtype */
    int nsynth_pairs = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        if (ct__ew_kind((ct_op)op) == CT_EWK_NONE) continue;
        int nrec_op = 0;
        for (int i = 0; i < nfixture; i++) nrec_op += g_recs[i].op == (ct_op)op;
        if (!nrec_op) fail_msg("%s: no case of elementwise.txt reaches its kernel", ct__op_info[op].name);
        for (int d = 0; d < NDT; d++) {
            ct_dtype dt = k_dts[d];
            if (!ct__ew_supports((ct_op)op, dt)) continue;
            bool have = false;
            for (int i = 0; i < g_nrecs && !have; i++) have = g_recs[i].op == (ct_op)op && g_recs[i].dt == dt;
            if (have) continue;
            int made = 0;
            for (int i = 0; i < nfixture && made < 6; i++)
                if (g_recs[i].op == (ct_op)op)
                    made += synth_run(&g_recs[i], dt, false) || synth_run(&g_recs[i], dt, true);
            if (!made) fail_msg("%s: its %s kernel refused every input", ct__op_info[op].name, ct_dtype_name(dt));
            nsynth_pairs++;
        }
    }

    /* 3. the metadata agrees with the kernels; the scalar reference */
    for (int i = 0; i < g_nrecs; i++) {
        rec *r = &g_recs[i];
        assert_int_equal(r->odt, ct__ew_out_dtype(r->op, r->dt));
        assert_int_equal(r->nin, ct__ew_arity(r->op));
        run_scalar_loop(r);
    }

    /* 4. groups (op, dtype, params), at most MAX_GROUP elements each */
    group *groups = calloc((size_t)g_nrecs, sizeof(group));
    g_next = malloc(sizeof(int) * (size_t)g_nrecs);
    g_group_of = malloc(sizeof(int) * (size_t)g_nrecs);
    int *last = malloc(sizeof(int) * (size_t)g_nrecs);
    int64_t *offs = malloc(sizeof(int64_t) * (size_t)g_nrecs);
    assert_true(groups && g_next && g_group_of && last && offs);
    int ngroups = 0;
    for (int i = 0; i < g_nrecs; i++) {
        g_next[i] = -1;
        int g = -1;
        for (int j = 0; j < ngroups && g < 0; j++)
            if (same_group(&g_recs[groups[j].first], &g_recs[i]) && groups[j].n + g_recs[i].n <= MAX_GROUP) g = j;
        if (g < 0) {
            g = ngroups++;
            groups[g].first = i, groups[g].n = 0;
        } else {
            g_next[last[g]] = i;
        }
        last[g] = i;
        g_group_of[i] = g;
        offs[i] = groups[g].n;
        groups[g].n += g_recs[i].n;
    }

    /* 5. write, compile, run */
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ct_ew_render_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(dir));
    char src[600], exe[600], log[600], outp[600];
    snprintf(src, sizeof src, "%s/ew_rendered.c", dir);
    snprintf(exe, sizeof exe, "%s/ew_rendered", dir);
    snprintf(log, sizeof log, "%s/cc.log", dir);
    snprintf(outp, sizeof outp, "%s/out.txt", dir);
    if (!write_program(src, groups, ngroups)) fail_msg("test_ew_render: writing %s: %s", src, g_fail);

    const char *env_cc = getenv("CC");
    const char *cc = NULL;
    if (env_cc && *env_cc && runs(env_cc)) cc = env_cc;
    else if (runs(CT_EW_RENDER_CC)) cc = CT_EW_RENDER_CC;
    else if (runs("cc")) cc = "cc";
    if (!cc)
        fail_msg("test_ew_render: no C compiler found ($CC %s, %s, cc on PATH): the build requires one "
                 "(install gcc or clang, e.g. apt-get install gcc) -- the compiler renders C that cc builds",
                 env_cc && *env_cc ? env_cc : "unset", CT_EW_RENDER_CC);
    char v1[256], v2[256];
    first_line(cc, v1, sizeof v1);
    first_line(CT_EW_RENDER_CC, v2, sizeof v2);
    bool same_cc = v1[0] && strcmp(v1, v2) == 0;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s -I%s/ops -o %s %s -lm >%s 2>&1", cc, CT_EW_RENDER_CFLAGS,
             CT_SRC_DIR, exe, src, log);
    if (system(cmd) != 0) {
        char buf[4096] = "";
        FILE *lf = fopen(log, "r");
        if (lf) {
            size_t k = fread(buf, 1, sizeof buf - 1, lf);
            buf[k] = 0;
            fclose(lf);
        }
        fail_msg("test_ew_render: compiling the rendered program failed:\n%s\n%s\n(kept in %s)", cmd, buf, dir);
    }
    snprintf(cmd, sizeof cmd, "%s >%s", exe, outp);
    if (system(cmd) != 0) fail_msg("test_ew_render: running %s failed (kept in %s)", exe, dir);

    /* 6. compare */
    unsigned char *got = malloc((size_t)MAX_GROUP * 8 + 64);
    char *line = malloc((size_t)MAX_GROUP * 8 * 3 + 64);
    assert_true(got && line);
    FILE *of = fopen(outp, "r");
    assert_non_null(of);
    int nread = 0, bad = 0;
    /* per (op, dtype): 0 unchecked, 1 kernel exact, 2 kernel within tolerance */
    static int state_of[CT_OP_COUNT][CT_DTYPE_COUNT];
    static bool vec_pair[CT_OP_COUNT][CT_DTYPE_COUNT];
    int64_t nelems = 0;
    while (fgets(line, MAX_GROUP * 8 * 3 + 64, of)) {
        int g;
        char *s = line;
        if (sscanf(s, "G %d", &g) != 1 || g != nread) fail_msg("test_ew_render: bad output line %d", nread);
        s = strchr(s + 2, ' ');
        const rec *r0 = &g_recs[groups[g].first];
        size_t es = esz(r0->odt);
        int64_t nb = 0;
        while (s && *s == ' ') {
            unsigned v;
            if (sscanf(s, " %2x", &v) != 1) break;
            got[nb++] = (unsigned char)v;
            s += 3;
        }
        assert_int_equal(nb, groups[g].n * (int64_t)es);
        bool is_vec = ct__cpu_ew_loop(r0->op, r0->dt) != ct__cpu_ew_scalar_loop(r0->op, r0->dt);
        bool is_float = r0->odt == CT_F32 || r0->odt == CT_F64;
        for (int ri = groups[g].first; ri >= 0; ri = g_next[ri]) {
            const rec *r = &g_recs[ri];
            const unsigned char *gp = got + (size_t)offs[ri] * es;
            int st = state_of[r->op][r->dt] ? state_of[r->op][r->dt] : 1;
            for (int64_t i = 0; i < r->n; i++) {
                const unsigned char *g1 = gp + (size_t)i * es, *s1 = r->sout + (size_t)i * es,
                                    *k1 = r->kout + (size_t)i * es;
                double gv = get_d(g1, r->odt), sv = get_d(s1, r->odt), kv = get_d(k1, r->odt);
                bool ok_s = memcmp(g1, s1, es) == 0 || (is_float && !same_cc && close_f(gv, sv));
                bool ok_k = memcmp(g1, k1, es) == 0;
                if (!ok_k && is_float && (is_vec || !same_cc) && close_f(gv, kv)) ok_k = true, st = 2;
                if (!ok_s || !ok_k) {
                    if (bad++ < 20) {
                        char xs[128] = "";
                        for (int k = 0; k < r->nin; k++) {
                            size_t l = strlen(xs);
                            snprintf(xs + l, sizeof xs - l, "%s%.17g", k ? ", " : "",
                                     get_d(r->in[k] + (size_t)i * esz(in_dtype(r, k)), in_dtype(r, k)));
                        }
                        print_error("%s %s (%s) (%s record): rendered %.17g, scalar loop %.17g, kernel %.17g\n",
                                    ct__op_info[r->op].name, ct_dtype_name(r->dt), xs,
                                    r->synthetic ? "converted" : "fixture", gv, sv, kv);
                    }
                }
            }
            state_of[r->op][r->dt] = st;
            vec_pair[r->op][r->dt] = is_vec;
            nelems += r->n;
        }
        nread++;
    }
    fclose(of);
    assert_int_equal(nread, ngroups);
    if (bad) fail_msg("test_ew_render: %d elements differ (program kept in %s)", bad, dir);

    /* every (op, dtype) of the list was checked */
    int npairs = 0, nexact = 0, ntol = 0, nvec = 0, nops = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        if (ct__ew_kind((ct_op)op) == CT_EWK_NONE) continue;
        nops++;
        for (int d = 0; d < NDT; d++) {
            ct_dtype dt = k_dts[d];
            if (!ct__ew_supports((ct_op)op, dt)) continue;
            if (!state_of[op][dt]) fail_msg("%s %s: not checked", ct__op_info[op].name, ct_dtype_name(dt));
            npairs++;
            nvec += vec_pair[op][dt];
            if (state_of[op][dt] == 1) nexact++;
            else ntol++;
        }
    }
    printf("test_ew_render: checked %d op x dtype pairs (%d ops; %" PRId64 " elements in %d loops, "
           "%d records from fixture calls, %d pairs filled in by conversion), compiled by %s%s\n",
           npairs, nops, nelems, ngroups, nfixture, nsynth_pairs, cc, same_cc ? " (the build's compiler)" : "");
    printf("test_ew_render: rendered == generated scalar loop bit for bit for all %d pairs; == the registered "
           "kernel bit for bit for %d, within f32 tolerance for %d (%d pairs run a vectorized f32 loop)\n",
           npairs, nexact, ntol, nvec);

    /* clean up */
    unlink(src), unlink(exe), unlink(log), unlink(outp), rmdir(dir);
    free(got), free(line), free(groups), free(g_next), free(g_group_of), free(last), free(offs);
    for (int i = 0; i < g_nrecs; i++) rec_free(&g_recs[i]);
    free(g_recs);
    g_recs = NULL, g_nrecs = g_caprecs = 0;
}

/* every elementwise op of ops.def has its math in ew_math.def */
static void test_every_op_listed(void **state) {
    (void)state;
    ct__backends_init();
    int n = 0;
    for (int op = 0; op < CT_OP_COUNT; op++) {
        const ct_op_info *in = &ct__op_info[op];
        bool ew = (in->flags & CT_OPF_EW) && op != CT_OP_copy && op != CT_OP_fill;
        int kind = ct__ew_kind((ct_op)op);
        if (ew && kind == CT_EWK_NONE) fail_msg("%s: elementwise in ops.def but no line in ew_math.def", in->name);
        if (!ew && kind != CT_EWK_NONE) fail_msg("%s: in ew_math.def but not an elementwise op of ops.def", in->name);
        if (!ew) continue;
        n++;
        if (ct__ew_arity((ct_op)op) != in->nin)
            fail_msg("%s: ew_math.def has %d operands, ops.def %d", in->name, ct__ew_arity((ct_op)op), in->nin);
        for (int d = 0; d < CT_DTYPE_COUNT; d++) {
            bool listed = ct__ew_supports((ct_op)op, (ct_dtype)d);
            bool scalar = ct__cpu_ew_scalar_loop((ct_op)op, (ct_dtype)d) != NULL;
            bool kernel = ct__cpu_ew_loop((ct_op)op, (ct_dtype)d) != NULL;
            if (listed != scalar || listed != kernel)
                fail_msg("%s %s: ew_math.def %s it, the cpu has %s scalar loop and %s kernel loop", in->name,
                         ct_dtype_name((ct_dtype)d), listed ? "lists" : "does not list",
                         scalar ? "a" : "no", kernel ? "a" : "no");
        }
    }
    printf("test_ew_render: all %d elementwise ops of ops.def have their math in ew_math.def\n", n);
    assert_true(n > 0);
}

/* the renderer: substitution, literals, errors */
static void test_render_unit(void **state) {
    (void)state;
    ct__backends_init();
    const char *ops[3] = {"a[i]", "b", "c"};
    ct_args a = ct__args(CT_OP_add);
    a.p.ew.has_alpha = true;
    a.p.ew.alpha = 2;
    char *e = ct__ew_render(CT_OP_add, CT_F32, ops, &a.p.ew);
    assert_non_null(e);
    assert_string_equal(e, "(a[i]) + (1 ? (float)(0x1p+1) * (b) : (b))");
    free(e);
    e = ct__ew_render(CT_OP_add, CT_I8, ops, &a.p.ew);
    assert_string_equal(e, "CT_EW_WADD(int8_t, (a[i]), 1 ? CT_EW_WMUL(int8_t, (int64_t)(0x1p+1), (b)) : (b))");
    free(e);
    /* numbers keep their letters: 0.044715, 0.79788456080286535588 stay */
    ct_args g = ct__args(CT_OP_gelu);
    g.p.ew.approximate = true;
    e = ct__ew_render(CT_OP_gelu, CT_F64, ops, &g.p.ew);
    assert_non_null(strstr(e, "(double)0.044715 * (a[i]) * (a[i]) * (a[i])"));
    assert_non_null(strstr(e, "1 ? "));
    free(e);
    /* int64 and special doubles */
    ct_args pg = ct__args(CT_OP_polygamma);
    pg.p.ew.n = 3;
    e = ct__ew_render(CT_OP_polygamma, CT_F32, ops, &pg.p.ew);
    assert_string_equal(e, "(float)ct__ew_polygamma(((int64_t)3LL), (double)(a[i]))");
    free(e);
    ct_args nn = ct__args(CT_OP_nan_to_num);
    nn.p.ew.nan = NAN, nn.p.ew.posinf = INFINITY, nn.p.ew.neginf = -0.0;
    e = ct__ew_render(CT_OP_nan_to_num, CT_F64, ops, &nn.p.ew);
    assert_non_null(strstr(e, "(double)((double)NAN)"));
    assert_non_null(strstr(e, "(double)((double)INFINITY)"));
    assert_non_null(strstr(e, "(double)(-0x0p+0)"));
    free(e);
    /* literals read back exactly */
    const double vals[] = {0.1, -1.0 / 3, 1e-310, 1.7976931348623157e308, 5e-324, -0.0, 12345.678};
    for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
        char buf[64];
        ct__ew_literal_f64(buf, sizeof buf, vals[k]);
        double back = strtod(buf + 1, NULL);
        assert_memory_equal(&back, &vals[k], sizeof back);
    }
    /* where: the condition and two values */
    e = ct__ew_render(CT_OP_where, CT_I16, ops, NULL);
    assert_string_equal(e, "(a[i]) ? (b) : (c)");
    free(e);
    /* errors */
    ct_clear_error();
    assert_null(ct__ew_render(CT_OP_sin, CT_I32, ops, NULL));
    assert_int_equal(ct_last_error_code(), CT_ERR_DTYPE);
    assert_string_equal(ct_last_error(), "sin: no elementwise expression for dtype int32");
    ct_clear_error();
    assert_null(ct__ew_render(CT_OP_sum, CT_F32, ops, NULL));
    assert_string_equal(ct_last_error(), "sum: no elementwise expression for dtype float32");
    ct_clear_error();
    const char *nulls[2] = {"a", NULL};
    assert_null(ct__ew_render(CT_OP_mul, CT_F32, nulls, NULL));
    assert_string_equal(ct_last_error(), "mul: operand 1 of the rendered expression is NULL");
    ct_clear_error();
    assert_int_equal(ct__ew_out_dtype(CT_OP_isnan, CT_F32), CT_BOOL);
    assert_int_equal(ct__ew_out_dtype(CT_OP_exp, CT_F64), CT_F64);
    assert_int_equal(ct__ew_out_dtype(CT_OP_exp, CT_I32), -1);
    assert_string_equal(ct__ew_ctype(CT_BOOL), "uint8_t");
    assert_null(ct__ew_ctype(CT_F16));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_listed),
        cmocka_unit_test(test_render_unit),
        cmocka_unit_test(test_fixtures_rendered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
