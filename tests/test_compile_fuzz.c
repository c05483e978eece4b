/* test_compile_fuzz.c -- a random-program fuzzer for ct_compile
 * (include/ctorch/compile.h): compiled against eager.
 *
 * Each seed makes a program: 1-3 random inputs (1-4 dims, sizes 1-40 with
 * size-1 broadcast dims, f32 / f64 / i32 / i64, contiguous, transposed,
 * sliced with a step or expanded from a size-1 dim) and a list of 4-12 ops
 * over them -- unary and binary elementwise ops, where with a comparison,
 * scalar ops, casts, reductions (sum / mean / amax / amin over a dim or
 * all, keepdim or not), views (transpose, permute, reshape merging or
 * splitting dims, unsqueeze, expand against another value, narrow, slice
 * with a step), softmax / log_softmax / layer_norm over the last dim.  The
 * program is data (an op list with operand indices, its parameters stated
 * relative to the operands' sizes), so one interpreter (prog_fn) is both
 * the ct_fn given to ct_compile and the eager reference, and a new size on
 * a dim needs no new program.  The generator runs each candidate op
 * eagerly and keeps only those eager accepts.
 *
 * Per seed: ct_compile, two calls (the second must not trace again), then
 * one call with a new size on every input dim of one size (automatic
 * dynamic), each compared with eager; then training (train_and_compare):
 * the float inputs require grad, the loss is the sum of the float outputs,
 * and two compiled calls' gradients (the joint graph) are compared with
 * eager's, at the loose tolerance.  Compared with eager: integers exactly, floats at
 * rtol/atol 1e-5 (f32, and f64 values rounded in f32 on the way: a cast of
 * an f32 exp) or 1e-12 (f64) with the absolute part scaled by
 * the output's largest finite magnitude (sums cancel), NaN and inf
 * positions equal.  A graph break, an eager fallback (the compiled graph
 * failed) or an error eager did not have is a failure: none of these ops
 * is a documented graph break.  On a mismatch it prints the seed, the
 * program and ct_compile_explain.  Each seed checks that no tensor leaks.
 *
 * Results that legitimately depend on rounding (a comparison or a cast to
 * an integer of a value the compiled kernel may round differently, f32
 * kernels computing in double) are kept out by the generator: it tracks a
 * magnitude bound and an "exact" flag per value (inputs and the ops that
 * only move or select values), and compares or truncates only exact f32
 * values, casts only bounded ones to integers.  It also tracks which
 * values must have the same bits on both sides (made by exactly rounded
 * operations from such values; not past a transcendental function, a sum
 * or a normalization) and keeps a division by, or a square root of, any
 * other value only where that operand's smallest element is well away from
 * zero against its largest, on the values it ran (the first calls get the
 * same draws); a later call with new sizes skips the outputs that rest on
 * that check.  Those are where a last-bit difference is magnified without
 * bound (gelu's negative tail cancels: x / gelu(x) at x = -4, seeds 12078,
 * 12165, 12251), as is layer_norm of a near-constant row (seed 1297).  A
 * max or min (amax, amin, maximum, minimum) of such values that finds
 * equal elements on the generator's values (an expanded input repeats one
 * value; seed 22151) leaves the training stage out: which element the
 * gradient goes to depends on how the sums before it rounded.
 *
 * make test runs the fixed seeds 1..FIXED_SEEDS (one CT_CACHE_DIR for the
 * run, so kernels shared between seeds are built once).  A longer run:
 *     CT_FUZZ_ITERS=500 build/test_compile_fuzz   (or make fuzz-compile: 1000)
 * runs 500 random seeds (CT_FUZZ_SEED=s picks the first, else the time;
 * each seed is printed on failure and reruns alone with CT_FUZZ_SEED=s
 * CT_FUZZ_ITERS=1); CT_FUZZ_VERBOSE=1 prints each program and what the
 * compiler did with it (2: with ct_compile_explain). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctorch/ctorch.h"
#include "compile_test_util.h"

#define FIXED_SEEDS 60
#define MAX_OPS 12
#define MAX_VALS (3 + MAX_OPS)
#define MAX_NUMEL 60000

/* ---- random numbers (xorshift64*) ---- */
static uint64_t g_rng;
static uint64_t rnd(void) {
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}
static int rndi(int n) { return (int)(rnd() % (uint64_t)n); } /* [0, n) */
static bool chance(int pct) { return rndi(100) < pct; }

/* ---- the program as data ---- */
typedef enum {
    K_UNARY, K_BINARY, K_WHERE, K_SCALAR, K_CAST, K_REDUCE, K_TRANSPOSE, K_PERMUTE, K_RESHAPE,
    K_UNSQUEEZE, K_EXPAND, K_NARROW, K_SLICE, K_SOFTMAX, K_LOG_SOFTMAX, K_LAYER_NORM, K_COUNT
} kind;
static const char *const kind_name[K_COUNT] = {
    "unary", "binary", "where", "scalar", "cast", "reduce", "transpose", "permute", "reshape",
    "unsqueeze", "expand", "narrow", "slice", "softmax", "log_softmax", "layer_norm"};

enum { U_EXP, U_LOG1ABS, U_TANH, U_SIGMOID, U_GELU, U_RELU, U_NEG, U_ABS, U_SQRTABS, U_COUNT };
static const char *const un_name[U_COUNT] = {"exp", "log(abs+1)", "tanh", "sigmoid", "gelu",
                                              "relu", "neg", "abs", "sqrt(abs)"};
enum { B_ADD, B_SUB, B_MUL, B_DIV, B_MAX, B_MIN, B_COUNT };
static const char *const bin_name[B_COUNT] = {"add", "sub", "mul", "div", "maximum", "minimum"};
enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_COUNT };
static const char *const red_name[R_COUNT] = {"sum", "mean", "amax", "amin"};

typedef struct {
    kind k;
    int sub;      /* unary / binary / reduce op; where: 0 gt, 1 lt; scalar: 0 add, 1 mul;
                   * reshape: 0 merge dims d0, d0+1, 1 split d0, 2 flatten */
    int a, b, c;  /* operand value indices (b, c: -1 when unused) */
    int d0, d1;   /* dims, taken modulo the operand's rank at run time; reduce: d0 -1 = all */
    int perm[4];
    bool keep;
    double s;
    ct_dtype dt;
} pop;

typedef enum { L_CONTIG, L_TRANSPOSED, L_SLICED, L_EXPANDED } layout;
static const char *const layout_name[] = {"contiguous", "transposed", "sliced", "expanded"};

typedef struct {
    int ndim;
    int64_t sizes[4];
    ct_dtype dt;
    layout lay;
    int ldim; /* sliced / expanded: the dim */
} inspec;

typedef struct {
    int nin;
    inspec in[3];
    int nop;
    pop op[MAX_OPS];
    int nout;
    int outs[3];
    bool loose[MAX_VALS]; /* value k was computed with f32 rounding on the way */
    bool dep[MAX_VALS];   /* value k is well conditioned for the generator's inputs only (spread_ok) */
    bool tie[MAX_VALS];   /* value k's gradient depends on how ties of rounded values fall (vinfo.tie) */
} prog;

static int md(int d, int n) { return n > 0 ? ((d % n) + n) % n : 0; }

/* one op on the values computed so far; NULL (error set) where eager fails */
static ct_tensor *apply_op(const pop *o, ct_tensor *const *v) {
    ct_tensor *a = v[o->a], *b = o->b >= 0 ? v[o->b] : NULL, *c = o->c >= 0 ? v[o->c] : NULL;
    if (!a) return NULL;
    int n = ct_ndim(a);
    switch (o->k) {
    case K_UNARY:
        switch (o->sub) {
        case U_EXP: return ct_exp(a);
        case U_LOG1ABS: return ct_log(ct_add_scalar(ct_abs(a), 1.0));
        case U_TANH: return ct_tanh(a);
        case U_SIGMOID: return ct_sigmoid(a);
        case U_GELU: return ct_gelu(a, CT_GELU_NONE);
        case U_RELU: return ct_relu(a);
        case U_NEG: return ct_neg(a);
        case U_ABS: return ct_abs(a);
        default: return ct_sqrt(ct_abs(a));
        }
    case K_BINARY:
        switch (o->sub) {
        case B_ADD: return ct_add(a, b);
        case B_SUB: return ct_sub(a, b);
        case B_MUL: return ct_mul(a, b);
        case B_DIV: return ct_div(a, b);
        case B_MAX: return ct_maximum(a, b);
        default: return ct_minimum(a, b);
        }
    case K_WHERE: return ct_where(o->sub ? ct_lt(a, b) : ct_gt(a, b), a, c);
    case K_SCALAR: return o->sub ? ct_mul_scalar(a, o->s) : ct_add_scalar(a, o->s);
    case K_CAST: return ct_to_dtype(a, o->dt);
    case K_REDUCE: {
        int64_t d = md(o->d0, n);
        bool all = o->d0 < 0 || n == 0;
        const int64_t *dims = all ? NULL : &d;
        int nd = all ? 0 : 1;
        switch (o->sub) {
        case R_SUM: return ct_sum(a, dims, nd, o->keep);
        case R_MEAN: return ct_mean(a, dims, nd, o->keep);
        case R_AMAX: return ct_amax(a, dims, nd, o->keep);
        default: return ct_amin(a, dims, nd, o->keep);
        }
    }
    case K_TRANSPOSE: return ct_transpose(a, md(o->d0, n), md(o->d1, n));
    case K_PERMUTE: {
        int64_t p[4];
        for (int i = 0; i < n && i < 4; i++) p[i] = o->perm[i];
        return ct_permute(a, p, n);
    }
    case K_RESHAPE: {
        int64_t sh[5];
        const int64_t *s = ct_sizes(a);
        if (o->sub == 2) return ct_reshape(a, (int64_t[]){-1}, 1);
        int d = md(o->d0, o->sub == 0 ? n - 1 : n), m = 0;
        for (int i = 0; i < n; i++) {
            if (o->sub == 0 && i == d) {
                sh[m++] = s[i] * s[i + 1];
                i++;
            } else if (o->sub == 1 && i == d) {
                int64_t f = 1;
                for (int64_t q = 2; q <= s[i]; q++)
                    if (s[i] % q == 0) { f = q; break; }
                sh[m++] = f;
                sh[m++] = s[i] / f;
            } else {
                sh[m++] = s[i];
            }
        }
        return ct_reshape(a, sh, m);
    }
    case K_UNSQUEEZE: return ct_unsqueeze(a, md(o->d0, n + 1));
    case K_EXPAND: {
        /* a broadcast against b's shape (right-aligned); a's size-1 dims grow */
        int nb = ct_ndim(b), r = n > nb ? n : nb;
        int64_t sh[8];
        for (int i = 0; i < r; i++) {
            int ia = i - (r - n), ib = i - (r - nb);
            int64_t sa = ia >= 0 ? ct_size(a, ia) : 1, sb = ib >= 0 ? ct_size(b, ib) : 1;
            sh[i] = sa == 1 ? sb : sa;
        }
        return ct_expand(a, sh, r);
    }
    case K_NARROW: {
        int d = md(o->d0, n);
        int64_t s = ct_size(a, d), st = s / 3, len = s - s / 3 - s / 4;
        return ct_narrow(a, d, st, len < 1 ? 1 : len);
    }
    case K_SLICE: {
        int d = md(o->d0, n);
        return ct_slice(a, d, ct_size(a, d) >= 2 ? 1 : 0, INT64_MAX, 2);
    }
    case K_SOFTMAX: return ct_softmax(a, -1);
    case K_LOG_SOFTMAX: return ct_log_softmax(a, -1);
    case K_LAYER_NORM: return ct_layer_norm(a, (int64_t[]){ct_size(a, -1)}, 1, NULL, NULL, 1e-5);
    default: return NULL;
    }
}

/* the program as a ct_fn: ctx is the prog */
static ct_status prog_fn(ct_tensor *const *in, int nin, ct_tensor **out, int nout, void *ctx) {
    const prog *p = ctx;
    ct_tensor *v[MAX_VALS] = {0};
    for (int k = 0; k < nin; k++) v[k] = in[k];
    for (int i = 0; i < p->nop; i++) {
        v[p->nin + i] = apply_op(&p->op[i], v);
        if (!v[p->nin + i]) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    }
    for (int k = 0; k < nout; k++) out[k] = v[p->outs[k]];
    return CT_OK;
}

static int prog_str(const prog *p, char *buf, size_t cap) {
    size_t n = 0;
#define PUT(...) do { int w_ = snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__); if (w_ > 0) n += (size_t)w_; } while (0)
    for (int k = 0; k < p->nin; k++) {
        const inspec *s = &p->in[k];
        PUT("  %%%d = input %s [", k, ct_dtype_name(s->dt));
        for (int d = 0; d < s->ndim; d++) PUT("%s%lld", d ? ", " : "", (long long)s->sizes[d]);
        PUT("] %s", layout_name[s->lay]);
        if (s->lay == L_SLICED || s->lay == L_EXPANDED) PUT(" (dim %d)", s->ldim);
        PUT("\n");
    }
    for (int i = 0; i < p->nop; i++) {
        const pop *o = &p->op[i];
        PUT("  %%%d = %s", p->nin + i, kind_name[o->k]);
        switch (o->k) {
        case K_UNARY: PUT(" %s(%%%d)", un_name[o->sub], o->a); break;
        case K_BINARY: PUT(" %s(%%%d, %%%d)", bin_name[o->sub], o->a, o->b); break;
        case K_WHERE: PUT("(%%%d %s %%%d, %%%d, %%%d)", o->a, o->sub ? "<" : ">", o->b, o->a, o->c); break;
        case K_SCALAR: PUT(" %s(%%%d, %g)", o->sub ? "mul" : "add", o->a, o->s); break;
        case K_CAST: PUT("(%%%d, %s)", o->a, ct_dtype_name(o->dt)); break;
        case K_REDUCE: PUT(" %s(%%%d, dim %d, keepdim %d)", red_name[o->sub], o->a, o->d0, o->keep); break;
        case K_TRANSPOSE: PUT("(%%%d, %d, %d)", o->a, o->d0, o->d1); break;
        case K_PERMUTE: PUT("(%%%d, [%d %d %d %d])", o->a, o->perm[0], o->perm[1], o->perm[2], o->perm[3]); break;
        case K_RESHAPE: PUT("(%%%d, %s dim %d)", o->a, o->sub == 0 ? "merge" : o->sub == 1 ? "split" : "flatten", o->d0); break;
        case K_EXPAND: PUT("(%%%d like %%%d)", o->a, o->b); break;
        default: PUT("(%%%d, dim %d)", o->a, o->d0); break;
        }
        PUT("\n");
    }
    PUT("  outputs:");
    for (int k = 0; k < p->nout; k++) PUT(" %%%d", p->outs[k]);
    PUT("\n");
#undef PUT
    return (int)n;
}

/* ---- inputs ---- */
static ct_tensor *make_input(const inspec *s) {
    int64_t sh[4];
    for (int d = 0; d < s->ndim; d++) sh[d] = s->sizes[d];
    int n = s->ndim;
    if (s->lay == L_TRANSPOSED && n >= 2) { int64_t t = sh[n - 1]; sh[n - 1] = sh[n - 2]; sh[n - 2] = t; }
    if (s->lay == L_SLICED) sh[s->ldim] *= 2;
    if (s->lay == L_EXPANDED) sh[s->ldim] = 1;
    ct_tensor *x;
    if (s->dt == CT_I32 || s->dt == CT_I64) x = ct_randint(-5, 6, sh, n, s->dt);
    else x = ct_add_scalar(ct_mul_scalar(ct_rand(sh, n, s->dt), 8.0), -4.0); /* [-4, 4) */
    if (s->lay == L_TRANSPOSED && n >= 2) x = ct_transpose(x, n - 2, n - 1);
    if (s->lay == L_SLICED) x = ct_slice(x, s->ldim, 1, INT64_MAX, 2);
    if (s->lay == L_EXPANDED) x = ct_expand(x, s->sizes, n);
    return x;
}

/* ---- the generator ---- */
typedef struct {
    double bound; /* |value| <= bound (inf: unknown) */
    bool exact;   /* computed without rounding (inputs; ops that move or select) */
    bool f32;     /* rounded in f32 on the way (an f64 result of it compares at f32's tolerance) */
    bool same;    /* the same bits compiled and eager: made by exactly rounded operations (the IEEE
                   * arithmetic, sqrt, casts, selections) from such values; not past a transcendental
                   * function (two implementations may differ in the last bit), a sum (its order) or
                   * a normalization */
    bool dep;     /* kept because the generator's input values passed spread_ok (or made from such) */
    bool tie;     /* a max / min of values that may differ in their last bits found equal elements on
                   * the generator's values: which one the gradient goes to (or how it is split)
                   * depends on rounding, so the program's gradients are not compared */
} vinfo;

/* x has elements equal to the max (amax) / min along the reduced dims that
 * are not unique: a tie a rounding difference can break */
static bool has_tie(ct_tensor *x, const pop *o, int n) {
    ct_scope s = ct_scope_begin();
    int64_t d = o->d0 < 0 || n == 0 ? 0 : ((o->d0 % n) + n) % n;
    bool all = o->d0 < 0 || n == 0;
    const int64_t *dims = all ? NULL : &d;
    int nd = all ? 0 : 1;
    ct_tensor *m = o->sub == R_AMAX ? ct_amax(x, dims, nd, true) : ct_amin(x, dims, nd, true);
    ct_tensor *cnt = m ? ct_sum(ct_to_dtype(ct_eq(x, m), CT_F64), dims, nd, false) : NULL;
    ct_tensor *mx = cnt ? ct_amax(cnt, NULL, 0, false) : NULL;
    bool tie = !mx || ct_item(mx) > 1.5;
    ct_clear_error();
    ct_scope_end(s);
    return tie;
}

/* |x|'s smallest finite element is above thr times its largest (an
 * operand whose last-bit differences an op may amplify without bound near
 * zero: a divisor, the argument of a square root) */
static bool spread_ok(ct_tensor *x, double thr) {
    ct_scope s = ct_scope_begin();
    ct_tensor *a = ct_contiguous(ct_to_dtype(x, CT_F64));
    const double *d = a ? ct_data_ptr(a) : NULL;
    double lo = INFINITY, hi = 0;
    int64_t n = a ? ct_numel(a) : 0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(d[i])) {
            lo = fmin(lo, fabs(d[i]));
            hi = fmax(hi, fabs(d[i]));
        }
    ct_clear_error();
    ct_scope_end(s);
    return d && (isinf(lo) || lo > thr * hi);
}

static bool is_int(ct_dtype dt) { return dt == CT_I32 || dt == CT_I64; }

/* a candidate op's bound / exactness; false where the generator rejects it
 * (an integer that may overflow, a rounding-dependent comparison or cast) */
static bool op_info(const pop *o, const vinfo *vi, ct_tensor *const *v, ct_tensor *r, vinfo *res) {
    const vinfo *a = &vi[o->a], *b = o->b >= 0 ? &vi[o->b] : NULL, *c = o->c >= 0 ? &vi[o->c] : NULL;
    ct_dtype adt = ct_get_dtype(v[o->a]);
    double B = a->bound;
    bool ex = false, same = false;
    res->dep = false;
    res->tie = false;
    /* a value computed in f32 somewhere (its last bits are f32's) */
    const bool in32 = adt == CT_F32 || a->f32 || (b && (ct_get_dtype(v[o->b]) == CT_F32 || b->f32));
    switch (o->k) {
    case K_UNARY:
        switch (o->sub) {
        case U_EXP: if (B > 30) return false; B = exp(B); break;
        case U_LOG1ABS: B = log1p(B); break;
        case U_TANH: case U_SIGMOID: B = 1; break;
        case U_GELU: break;
        case U_SQRTABS:
            /* near zero the root magnifies an operand's last-bit
             * difference without bound (a value in gelu's negative tail,
             * 1e-9 against its operands' 4, differed at 1e-7 relative, and
             * its root at 1e-11 where f64 allows 1e-12: seeds 12078, 12165) */
            if (!a->same && !spread_ok(v[o->a], in32 ? 1e-2 : 1e-4)) return false;
            res->dep = !a->same;
            B = sqrt(B);
            same = a->same;
            break;
        default: ex = a->exact; same = a->same; break; /* relu, neg, abs */
        }
        break;
    case K_BINARY:
        same = a->same && b->same;
        if (o->sub == B_MUL) B = a->bound * b->bound;
        else if (o->sub == B_DIV) {
            /* a divisor's small elements magnify both operands' last-bit
             * differences (x / gelu(x) in gelu's tail, seed 12251) */
            if (!same && !spread_ok(v[o->b], in32 ? 0.1 : 1e-3)) return false;
            res->dep = !same;
            B = INFINITY;
        } else if (o->sub == B_MAX || o->sub == B_MIN) {
            B = fmax(a->bound, b->bound);
            ex = a->exact && b->exact;
            if (!same) { /* an equal pair splits the gradient; a last-bit difference does not */
                ct_scope sc = ct_scope_begin();
                ct_tensor *eq = ct_eq(v[o->a], v[o->b]);
                ct_tensor *any = eq ? ct_amax(ct_to_dtype(eq, CT_F64), NULL, 0, false) : NULL;
                res->tie = !any || ct_item(any) > 0.5;
                ct_clear_error();
                ct_scope_end(sc);
            }
        }
        else B = a->bound + b->bound;
        break;
    case K_WHERE:
        /* the comparison must not depend on rounding */
        if (!(a->exact && b->exact)) return false;
        B = fmax(a->bound, c->bound);
        ex = c->exact;
        same = c->same;
        break;
    case K_SCALAR: B = o->sub ? B * fabs(o->s) : B + fabs(o->s); same = a->same; break;
    case K_CAST:
        /* a truncation must not depend on rounding */
        if (is_int(o->dt) && !is_int(adt) && !(B < 1e6 && a->exact)) return false;
        ex = a->exact;
        same = a->same;
        break;
    case K_REDUCE:
        if (o->sub == R_SUM) B = B * (double)ct_numel(v[o->a]);
        else ex = o->sub != R_MEAN && a->exact;
        same = (o->sub == R_AMAX || o->sub == R_AMIN) && a->same;
        if ((o->sub == R_AMAX || o->sub == R_AMIN) && !a->same) res->tie = has_tie(v[o->a], o, ct_ndim(v[o->a]));
        break;
    case K_TRANSPOSE: case K_PERMUTE: case K_RESHAPE: case K_UNSQUEEZE: case K_EXPAND:
    case K_NARROW: case K_SLICE: ex = a->exact; same = a->same; break;
    case K_SOFTMAX: B = 1; break;
    case K_LOG_SOFTMAX: B = 2 * B + log((double)ct_size(v[o->a], -1) + 1); break;
    case K_LAYER_NORM: {
        /* a (near-)constant row: the mean's rounding residue, magnified by
         * 1/sqrt(eps), differs with the order of the sum (eager's f32 mean
         * against the compiled kernel's double one; in f64 the two orders
         * of a constant row of 27 left 5.6e-13 and -8.4e-13 where the
         * tolerance is 1e-12, seed 1297): both right, ill-conditioned */
        {
            ct_scope s = ct_scope_begin();
            ct_tensor *x = ct_to_dtype(v[o->a], CT_F64);
            ct_tensor *var = ct_var(x, (int64_t[]){-1}, 1, 0, false);
            ct_tensor *msq = ct_mean(ct_square(x), (int64_t[]){-1}, 1, false);
            double worst = ct_item(ct_amin(ct_sub(var, ct_mul_scalar(msq, 1e-4)), NULL, 0, false));
            bool bad = ct_size(v[o->a], -1) > 1 && !(worst > 0);
            ct_clear_error();
            ct_scope_end(s);
            if (bad) return false;
        }
        B = sqrt((double)ct_size(v[o->a], -1)) + 1;
        break;
    }
    default: return false;
    }
    if (is_int(ct_get_dtype(r)) && !(B < 1e9)) return false;
    if (!is_int(ct_get_dtype(r)) && !(B < 1e30)) B = INFINITY;
    res->bound = B;
    res->exact = is_int(ct_get_dtype(r)) || ex;
    res->same = res->exact || same;
    res->dep = res->dep || a->dep || (b && b->dep) || (c && c->dep);
    res->tie = res->tie || a->tie || (b && b->tie) || (c && c->tie);
    res->f32 = a->f32 || (b && b->f32) || (c && c->f32) || (ct_get_dtype(r) == CT_F32 && !res->exact);
    return true;
}

static const ct_dtype g_dts[4] = {CT_F32, CT_F64, CT_I32, CT_I64};

static void gen_inputs(prog *p) {
    int R = 1 + rndi(4);
    int64_t base[4];
    for (;;) {
        int64_t numel = 1;
        for (int d = 0; d < R; d++) {
            base[d] = chance(20) ? 1 : 1 + rndi(40);
            numel *= base[d];
        }
        if (numel <= 6000) break;
    }
    p->nin = 1 + rndi(3);
    ct_dtype common = g_dts[rndi(4)];
    for (int k = 0; k < p->nin; k++) {
        inspec *s = &p->in[k];
        s->ndim = 1 + rndi(R);
        for (int d = 0; d < s->ndim; d++) {
            s->sizes[d] = base[R - s->ndim + d];
            if (k > 0 && chance(25)) s->sizes[d] = 1;
        }
        s->dt = chance(70) ? common : g_dts[rndi(4)];
        int l = rndi(10);
        s->lay = l < 5 ? L_CONTIG : l < 7 ? L_TRANSPOSED : l < 9 ? L_SLICED : L_EXPANDED;
        s->ldim = rndi(s->ndim);
        if (s->lay == L_TRANSPOSED && s->ndim < 2) s->lay = L_CONTIG;
        if (s->lay == L_EXPANDED && s->sizes[s->ldim] < 2) s->lay = L_CONTIG;
    }
}

/* picks an operand: mostly recent values */
static int pick(int nv) { return chance(70) ? nv - 1 - rndi(nv < 3 ? nv : 3) : rndi(nv); }
/* a second operand: another value where there is one */
static int pick_other(int nv, int a) {
    int b = rndi(nv);
    if (b == a && nv > 1 && chance(80)) b = (b + 1 + rndi(nv - 1)) % nv;
    return b;
}

static void gen_op(pop *o, int nv, ct_tensor *const *v) {
    memset(o, 0, sizeof *o);
    o->b = o->c = -1;
    o->a = pick(nv);
    int n = ct_ndim(v[o->a]);
    static const int weights[K_COUNT] = {14, 14, 5, 5, 4, 9, 4, 3, 4, 3, 4, 3, 3, 3, 2, 2};
    int tot = 0, r;
    for (int k = 0; k < K_COUNT; k++) tot += weights[k];
    r = rndi(tot);
    int k = 0;
    while (r >= weights[k]) r -= weights[k++];
    o->k = (kind)k;
    o->d0 = rndi(4);
    o->d1 = rndi(4);
    switch (o->k) {
    case K_UNARY: o->sub = rndi(U_COUNT); break;
    case K_BINARY: o->sub = rndi(B_COUNT); o->b = pick_other(nv, o->a); break;
    case K_WHERE: o->sub = rndi(2); o->b = pick_other(nv, o->a); o->c = pick_other(nv, o->a); break;
    case K_SCALAR: {
        static const double ss[] = {0.5, -1.5, 2.0, 3.0, -0.25, 1.0};
        o->sub = rndi(2);
        o->s = ss[rndi(6)];
        break;
    }
    case K_CAST: o->dt = g_dts[rndi(4)]; break;
    case K_REDUCE: o->sub = rndi(R_COUNT); o->keep = chance(50); if (chance(20)) o->d0 = -1; break;
    case K_PERMUTE:
        for (int i = 0; i < 4; i++) o->perm[i] = i;
        for (int i = n - 1; i > 0; i--) { int j = rndi(i + 1), t = o->perm[i]; o->perm[i] = o->perm[j]; o->perm[j] = t; }
        break;
    case K_RESHAPE: o->sub = rndi(3); if (o->sub == 0 && n < 2) o->sub = 1; break;
    case K_EXPAND: o->b = pick_other(nv, o->a); break;
    default: break;
    }
}

/* rank conditions the interpreter needs (eager checks the rest) */
static bool op_rank_ok(const pop *o, ct_tensor *const *v) {
    int n = ct_ndim(v[o->a]);
    switch (o->k) {
    case K_TRANSPOSE: return n >= 2;
    case K_PERMUTE: return n >= 2;
    case K_RESHAPE: return o->sub == 2 ? n >= 2 : o->sub == 0 ? n >= 2 : n >= 1 && n < 4;
    case K_UNSQUEEZE: return n < 4;
    case K_NARROW: case K_SLICE: case K_SOFTMAX: case K_LOG_SOFTMAX: case K_LAYER_NORM: return n >= 1;
    case K_EXPAND: return ct_ndim(v[o->b]) <= 4;
    default: return true;
    }
}

/* builds a program for the current rng state; v[] receives the eager values
 * at generation time (owned by the caller's scope) */
static void gen_prog(prog *p) {
    memset(p, 0, sizeof *p);
    gen_inputs(p);
    ct_scope s = ct_scope_begin();
    ct_tensor *v[MAX_VALS] = {0};
    vinfo vi[MAX_VALS];
    for (int k = 0; k < p->nin; k++) {
        v[k] = make_input(&p->in[k]);
        vi[k].bound = is_int(p->in[k].dt) ? 5 : 4;
        vi[k].exact = true;
        vi[k].f32 = false;
        vi[k].same = true;
        vi[k].dep = false;
        vi[k].tie = false;
    }
    int want = 4 + rndi(MAX_OPS - 3);
    for (int tries = 0; p->nop < want && tries < 200; tries++) {
        int nv = p->nin + p->nop;
        pop o;
        gen_op(&o, nv, v);
        if (!op_rank_ok(&o, v)) continue;
        ct_tensor *r = apply_op(&o, v);
        if (!r || ct_numel(r) > MAX_NUMEL || ct_numel(r) == 0) { ct_clear_error(); continue; }
        vinfo res;
        if (!op_info(&o, vi, v, r, &res)) continue;
        p->op[p->nop++] = o;
        v[nv] = r;
        vi[nv] = res;
    }
    for (int k = 0; k < p->nin + p->nop; k++) {
        p->loose[k] = vi[k].f32;
        p->dep[k] = vi[k].dep;
        p->tie[k] = vi[k].tie;
    }
    /* outputs: the last value and up to two values nothing reads */
    int nv = p->nin + p->nop;
    p->outs[p->nout++] = nv - 1;
    for (int i = nv - 2; i >= p->nin && p->nout < 3; i--) {
        bool used = false;
        for (int j = i - p->nin + 1; j < p->nop; j++) {
            const pop *o = &p->op[j];
            used = used || o->a == i || o->b == i || o->c == i;
        }
        if (!used) p->outs[p->nout++] = i;
    }
    ct_scope_end(s);
}

/* ---- comparison ---- */
/* NULL when a and b agree, else a malloc'ed description */
static char *compare(ct_tensor *got, ct_tensor *want, bool loose) {
    char *msg = malloc(512);
    if (!msg) return NULL;
    if (!got || !want) { snprintf(msg, 512, "missing output (got %p, want %p)", (void *)got, (void *)want); return msg; }
    if (ct_get_dtype(got) != ct_get_dtype(want)) {
        snprintf(msg, 512, "dtype %s, eager %s", ct_dtype_name(ct_get_dtype(got)), ct_dtype_name(ct_get_dtype(want)));
        return msg;
    }
    int n = ct_ndim(want);
    bool same = ct_ndim(got) == n;
    for (int d = 0; same && d < n; d++) same = ct_size(got, d) == ct_size(want, d);
    if (!same) { snprintf(msg, 512, "shape differs (rank %d, eager %d)", ct_ndim(got), n); return msg; }
    ct_dtype dt = ct_get_dtype(want);
    int64_t ne = ct_numel(want);
    ct_scope s = ct_scope_begin();
    if (is_int(dt)) {
        ct_tensor *g = ct_contiguous(ct_to_dtype(got, CT_I64)), *w = ct_contiguous(ct_to_dtype(want, CT_I64));
        const int64_t *gp = ct_data_ptr(g), *wp = ct_data_ptr(w);
        for (int64_t i = 0; i < ne; i++)
            if (gp[i] != wp[i]) {
                snprintf(msg, 512, "element %lld: %lld, eager %lld (exact)", (long long)i, (long long)gp[i], (long long)wp[i]);
                ct_scope_end(s);
                return msg;
            }
    } else {
        double tol = dt == CT_F64 && !loose ? 1e-12 : 1e-5;
        ct_tensor *g = ct_contiguous(ct_to_dtype(got, CT_F64)), *w = ct_contiguous(ct_to_dtype(want, CT_F64));
        const double *gp = ct_data_ptr(g), *wp = ct_data_ptr(w);
        double scale = 1;
        for (int64_t i = 0; i < ne; i++)
            if (isfinite(wp[i]) && fabs(wp[i]) > scale) scale = fabs(wp[i]);
        for (int64_t i = 0; i < ne; i++) {
            double x = gp[i], y = wp[i];
            bool ok = isnan(y) ? isnan(x) : isinf(y) ? x == y : isfinite(x) && fabs(x - y) <= tol * scale + tol * fabs(y);
            if (!ok) {
                snprintf(msg, 512, "element %lld: %.17g, eager %.17g (scale %g, tol %g)", (long long)i, x, y, scale, tol);
                ct_scope_end(s);
                return msg;
            }
        }
    }
    ct_scope_end(s);
    free(msg);
    return NULL;
}

/* ---- one seed ---- */
static int g_failures;

static void report(uint64_t seed, const prog *p, ct_compiled *c, const char *stage, const char *what) {
    char pb[4096];
    prog_str(p, pb, sizeof pb);
    char *x = c ? ct_compile_explain(c) : NULL;
    printf("FUZZ FAILURE seed %llu (%s): %s\nprogram:\n%s%s\n", (unsigned long long)seed, stage, what, pb,
                  x ? x : "(no explain)");
    free(x);
    g_failures++;
}

/* calls c and the program eagerly on in, compares; false on a failure */
/* new_data: inputs other than the generator's (a new size): outputs
 * whose conditioning the generator checked on its values (p->dep) are not
 * compared */
static bool call_and_compare(uint64_t seed, prog *p, ct_compiled *c, ct_tensor *const *in, const char *stage,
                             bool new_data) {
    ct_tensor *o[3] = {0}, *e[3] = {0};
    ct_status se = prog_fn(in, p->nin, e, p->nout, p);
    char emsg[256];
    snprintf(emsg, sizeof emsg, "%s", se ? ct_last_error() : "");
    ct_clear_error();
    ct_status sc = ct_compiled_call(c, in, p->nin, o, p->nout);
    char cmsg[256];
    snprintf(cmsg, sizeof cmsg, "%s", sc ? ct_last_error() : "");
    ct_clear_error();
    if (se || sc) {
        if (se && sc) return true; /* both refuse these sizes (the new size broke a broadcast) */
        char w[600];
        snprintf(w, sizeof w, "compiled status %d (%s), eager status %d (%s)", sc, cmsg, se, emsg);
        report(seed, p, c, stage, w);
        return false;
    }
    for (int k = 0; k < p->nout; k++) {
        if (new_data && p->dep[p->outs[k]]) continue;
        char *m = compare(o[k], e[k], p->loose[p->outs[k]]);
        if (m) {
            char w[700];
            snprintf(w, sizeof w, "output %d (%%%d): %s", k, p->outs[k], m);
            free(m);
            report(seed, p, c, stage, w);
            return false;
        }
    }
    ct_compile_stats st = ct_compiled_stats(c);
    if (st.graph_breaks || st.eager_calls) {
        char w[200];
        snprintf(w, sizeof w, "graph breaks %lld, eager calls %lld (the graph did not run compiled)",
                 (long long)st.graph_breaks, (long long)st.eager_calls);
        report(seed, p, c, stage, w);
        return false;
    }
    return true;
}

/* Training: the float inputs require grad, the loss is the sum of the
 * float outputs (in f64); the gradients of a compiled call (the joint
 * forward + backward graph, recomputation included) against eager's, at
 * the loose tolerance.  A program whose loss reaches no input is skipped. */
static ct_tensor *loss_of(const prog *p, ct_tensor *const *o) {
    ct_tensor *l = NULL;
    for (int k = 0; k < p->nout; k++) {
        ct_dtype dt = ct_get_dtype(o[k]);
        if (dt != CT_F32 && dt != CT_F64) continue;
        ct_tensor *t = ct_sum(ct_to_dtype(o[k], CT_F64), NULL, 0, false);
        l = l ? ct_add(l, t) : t;
    }
    return l;
}

static bool train_and_compare(uint64_t seed, prog *p, ct_tensor *const *in) {
    ct_tensor *x[3] = {0}, *ge[3] = {0};
    for (int k = 0; k < p->nout; k++) /* a tie of rounded values on the way: not comparable */
        if (p->tie[p->outs[k]]) return true;
    bool any = false;
    for (int k = 0; k < p->nin; k++) {
        ct_dtype dt = ct_get_dtype(in[k]);
        x[k] = in[k];
        if (dt != CT_F32 && dt != CT_F64) continue;
        x[k] = ct_detach(in[k]);
        assert_int_equal(ct_set_requires_grad(x[k], true), CT_OK);
        any = true;
    }
    if (!any) return true;
    ct_tensor *e[3] = {0};
    if (prog_fn(x, p->nin, e, p->nout, p) != CT_OK) { ct_clear_error(); return true; }
    ct_tensor *le = loss_of(p, e);
    if (!le || !ct_requires_grad(le)) { ct_clear_error(); return true; }
    if (ct_backward(le, NULL, false, false) != CT_OK) { ct_clear_error(); return true; }
    for (int k = 0; k < p->nin; k++) {
        ct_tensor *g = x[k] != in[k] ? ct_grad(x[k]) : NULL;
        ge[k] = g ? ct_clone(g) : NULL;
        if (x[k] != in[k]) ct_zero_grad(x[k]);
    }
    ct_compiled *c = ct_compile(prog_fn, p, NULL);
    assert_non_null(c);
    bool ok = true;
    for (int call = 0; call < 2 && ok; call++) {
        for (int k = 0; k < p->nin; k++)
            if (x[k] != in[k]) ct_zero_grad(x[k]);
        ct_tensor *o[3] = {0};
        ct_tensor *lc = NULL;
        ct_status st = ct_compiled_call(c, x, p->nin, o, p->nout);
        if (!st) lc = loss_of(p, o);
        if (st || !lc || ct_backward(lc, NULL, false, false) != CT_OK) {
            char w[400];
            snprintf(w, sizeof w, "the compiled training call failed where eager ran: %s", ct_last_error());
            ct_clear_error();
            report(seed, p, c, "training", w);
            ok = false;
            break;
        }
        for (int k = 0; k < p->nin && ok; k++) {
            if (x[k] == in[k]) continue;
            ct_tensor *g = ct_grad(x[k]);
            if (!g != !ge[k]) {
                char w[200];
                snprintf(w, sizeof w, "input %d: gradient %s, eager's %s", k, g ? "present" : "absent",
                         ge[k] ? "present" : "absent");
                report(seed, p, c, "training", w);
                ok = false;
                break;
            }
            char *m = g ? compare(g, ge[k], true) : NULL;
            if (m) {
                char w[700];
                snprintf(w, sizeof w, "call %d, the gradient of input %d: %s", call + 1, k, m);
                free(m);
                report(seed, p, c, "training", w);
                ok = false;
            }
        }
    }
    ct_compiled_free(c);
    return ok;
}

static void run_seed(uint64_t seed) {
    int64_t live0 = ct_live_tensors();
    ct_scope s = ct_scope_begin();
    g_rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 4; i++) (void)rnd();
    ct_manual_seed(seed);
    prog p;
    gen_prog(&p);
    /* the inputs the generator ran the program on (the same draws): its
     * checks of the values (spread_ok, near-constant rows) hold for them */
    ct_manual_seed(seed);
    ct_tensor *in[3] = {0};
    for (int k = 0; k < p.nin; k++) in[k] = make_input(&p.in[k]);
    ct_compiled *c = ct_compile(prog_fn, &p, NULL);
    assert_non_null(c);
    bool ok = call_and_compare(seed, &p, c, in, "first call", false);
    if (ok) ok = call_and_compare(seed, &p, c, in, "second call", false);
    if (ok && ct_compiled_stats(c).traces != 1) {
        char w[100];
        snprintf(w, sizeof w, "the second call traced again (traces %lld)", (long long)ct_compiled_stats(c).traces);
        report(seed, &p, c, "second call", w);
        ok = false;
    }
    if (ok) {
        /* a new size on every input dim of one size >= 2 (equal dims stay equal) */
        int64_t from = 0;
        for (int k = 0; k < p.nin && !from; k++)
            for (int d = 0; d < p.in[k].ndim; d++)
                if (p.in[k].sizes[d] >= 2 && chance(50)) { from = p.in[k].sizes[d]; break; }
        for (int k = 0; k < p.nin && !from; k++)
            for (int d = 0; d < p.in[k].ndim; d++)
                if (p.in[k].sizes[d] >= 2) { from = p.in[k].sizes[d]; break; }
        if (from) {
            int64_t to = from + 1 + rndi(5);
            prog q = p;
            ct_tensor *in2[3] = {0};
            for (int k = 0; k < q.nin; k++) {
                for (int d = 0; d < q.in[k].ndim; d++)
                    if (q.in[k].sizes[d] == from) q.in[k].sizes[d] = to;
                in2[k] = make_input(&q.in[k]);
            }
            char stage[80];
            snprintf(stage, sizeof stage, "dynamic call (size %lld -> %lld)", (long long)from, (long long)to);
            (void)call_and_compare(seed, &p, c, in2, stage, true);
        }
    }
    if (ok) ok = train_and_compare(seed, &p, in);
    if (getenv("CT_FUZZ_VERBOSE")) {
        char pb[4096];
        prog_str(&p, pb, sizeof pb);
        ct_compile_stats cs = ct_compiled_stats(c);
        char *x = ct_compile_explain(c);
        printf("seed %llu: traces %lld, kernels built %lld, loaded %lld\n%s%s\n", (unsigned long long)seed,
                      (long long)cs.traces, (long long)cs.kernels_built, (long long)cs.kernels_loaded, pb,
                      atoi(getenv("CT_FUZZ_VERBOSE")) > 1 && x ? x : "");
        free(x);
    }
    ct_compiled_free(c);
    ct_scope_end(s);
    if (ct_live_tensors() != live0) {
        print_message("seed %llu: %lld tensors leaked\n", (unsigned long long)seed,
                      (long long)(ct_live_tensors() - live0));
        g_failures++;
    }
}

static void t_fuzz(void **st) {
    (void)st;
    g_failures = 0;
    const char *it = getenv("CT_FUZZ_ITERS");
    long iters = it ? strtol(it, NULL, 10) : 0;
    if (iters > 0) {
        const char *sd = getenv("CT_FUZZ_SEED");
        uint64_t first = sd ? strtoull(sd, NULL, 10) : (uint64_t)time(NULL) * 1000;
        print_message("compile fuzz: %ld seeds from %llu\n", iters, (unsigned long long)first);
        for (long i = 0; i < iters; i++) run_seed(first + (uint64_t)i);
    } else {
        for (uint64_t seed = 1; seed <= FIXED_SEEDS; seed++) run_seed(seed);
    }
    assert_int_equal(g_failures, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(t_fuzz)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
