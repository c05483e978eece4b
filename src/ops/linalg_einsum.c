/* linalg_einsum.c -- torch.einsum: any valid equation, implicit or
 * explicit output, repeated subscripts (diagonals), sums, "..." with
 * broadcasting.  Each operand first takes its diagonals (strided views);
 * operands are then contracted left to right: labels needed by neither
 * the other operand, a later one nor the output are summed out first, the
 * rest become batch / M / N / K dims of one batched GEMM.  Size-1 dims
 * broadcast against the other operand by being dropped from the view. */
#include <stdlib.h>

#include "linalg_impl.h"
#include "meta.h"

#define EIN_NLAB (52 + CT_MAX_DIMS) /* a-zA-Z, then ellipsis dims */

typedef struct term {
    ct_tensor *t; /* owned reference */
    int nd;
    int lab[CT_MAX_DIMS];
} term;

static int label_id(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }
static char label_chr(int id) {
    return id < 26 ? (char)('A' + id) : id < 52 ? (char)('a' + id - 26) : '.';
}

static void term_set(term *T, ct_tensor *t) {
    ct_release(T->t);
    T->t = t;
}

/* view of T without dim i (which has size 1) */
static int term_drop(term *T, int i) {
    int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < T->nd; d++)
        if (d != i) { sz[n] = T->t->sizes[d]; st[n] = T->t->strides[d]; T->lab[n] = T->lab[d]; n++; }
    ct_tensor *v = ct__lin_view(T->t, sz, st, n);
    if (!v) return -1;
    term_set(T, v);
    T->nd = n;
    return 0;
}

/* sums T over the labels with drop[label] */
static int term_sum(term *T, const int *drop) {
    int mask[CT_MAX_DIMS], any = 0, n = 0;
    for (int d = 0; d < T->nd; d++) any |= (mask[d] = drop[T->lab[d]] != 0);
    if (!any) return 0;
    ct_tensor *r = ct__lin_sum_dims(CT_OP_einsum, T->t, mask);
    if (!r) return -1;
    for (int d = 0; d < T->nd; d++)
        if (!mask[d]) T->lab[n++] = T->lab[d];
    term_set(T, r);
    T->nd = n;
    return 0;
}

static int term_find(const term *T, int id) {
    for (int d = 0; d < T->nd; d++)
        if (T->lab[d] == id) return d;
    return -1;
}

/* A <- contraction of A and B keeping the labels with keep[label] */
static int contract(term *A, term *B, const int *keep) {
    /* broadcasting: a size-1 dim against a larger one is dropped */
    for (int d = 0; d < A->nd; d++) {
        int e = term_find(B, A->lab[d]);
        if (e < 0) continue;
        int64_t sa = A->t->sizes[d], sb = B->t->sizes[e];
        if (sa == 1 && sb != 1) { if (term_drop(A, d)) return -1; d--; }
        else if (sb == 1 && sa != 1) { if (term_drop(B, e)) return -1; }
    }
    int drop[EIN_NLAB] = {0};
    for (int d = 0; d < A->nd; d++)
        if (!keep[A->lab[d]] && term_find(B, A->lab[d]) < 0) drop[A->lab[d]] = 1;
    for (int d = 0; d < B->nd; d++)
        if (!keep[B->lab[d]] && term_find(A, B->lab[d]) < 0) drop[B->lab[d]] = 1;
    if (term_sum(A, drop) || term_sum(B, drop)) return -1;
    int pa[CT_MAX_DIMS], pb[CT_MAX_DIMS], na = 0, nb = 0, rl[CT_MAX_DIMS * 2];
    int64_t rs[CT_MAX_DIMS * 2], Bt = 1, M = 1, N = 1, K = 1;
    int nr = 0, nbat = 0;
    for (int d = 0; d < A->nd; d++) /* batch */
        if (keep[A->lab[d]] && term_find(B, A->lab[d]) >= 0) {
            pa[na++] = d;
            pb[nb++] = term_find(B, A->lab[d]);
            rl[nr] = A->lab[d]; rs[nr++] = A->t->sizes[d]; Bt *= A->t->sizes[d];
            nbat++;
        }
    for (int d = 0; d < A->nd; d++) /* M */
        if (term_find(B, A->lab[d]) < 0) {
            pa[na++] = d;
            rl[nr] = A->lab[d]; rs[nr++] = A->t->sizes[d]; M *= A->t->sizes[d];
        }
    for (int d = 0; d < A->nd; d++) /* K */
        if (!keep[A->lab[d]] && term_find(B, A->lab[d]) >= 0) {
            pa[na++] = d;
            pb[nb++] = term_find(B, A->lab[d]);
            K *= A->t->sizes[d];
        }
    for (int d = 0; d < B->nd; d++) /* N */
        if (term_find(A, B->lab[d]) < 0) {
            pb[nb++] = d;
            rl[nr] = B->lab[d]; rs[nr++] = B->t->sizes[d]; N *= B->t->sizes[d];
        }
    (void)nbat;
    if (nr > CT_MAX_DIMS) {
        ct__error(CT_ERR_SHAPE, "einsum(): intermediate result has %d dims (at most %d)", nr, CT_MAX_DIMS);
        return -1;
    }
    ct_tensor *A3 = ct__lin_perm_reshape(A->t, pa, (int64_t[]){Bt, M, K}, 3);
    ct_tensor *B3 = ct__lin_perm_reshape(B->t, pb, (int64_t[]){Bt, K, N}, 3);
    ct_tensor *C = ct__alloc((int64_t[]){Bt, M, N}, 3, A->t->dtype, A->t->storage->device);
    ct_status st = (A3 && B3 && C) ? ct__lin_gemm(CT_OP_einsum, C, A3, B3, 1, 0, 0) : CT_ERR_OOM;
    ct_release(A3);
    ct_release(B3);
    if (st) { ct_release(C); return -1; }
    int64_t str[CT_MAX_DIMS];
    ct__contiguous_strides(rs, nr, str);
    ct_tensor *v = ct__lin_view(C, rs, str, nr);
    ct_release(C);
    if (!v) return -1;
    term_set(A, v);
    A->nd = nr;
    memcpy(A->lab, rl, sizeof(int) * (size_t)nr);
    return 0;
}

#define EIN_MAX_OPS 64

/* An equation parsed against its operands: each operand's dims' labels
 * (ellipsis dims numbered 52..), the output's labels and every label's
 * (broadcast) size.  Shared by the meta function and ct_einsum, so the
 * shape logic and its checks live here only. */
typedef struct {
    int nlab[EIN_MAX_OPS];
    int dlab[EIN_MAX_OPS][CT_MAX_DIMS];
    int out[CT_MAX_DIMS * 2], nout;
    int64_t size[EIN_NLAB];
} ein_plan;

static ct_status ein_parse(const char *equation, ct_tensor *const *ts, int n, ein_plan *P) {
    for (int k = 1; k < n; k++)
        if (ts[k]->dtype != ts[0]->dtype)
            return ct__error_status(CT_ERR_DTYPE, "einsum(): expected all operands to have the same dtype, "
                                    "but got %s for operand 0 and %s for operand %d",
                                    ct__lin_tname(ts[0]->dtype), ct__lin_tname(ts[k]->dtype), k);
    /* ---- parse ---- */
    int lab[EIN_MAX_OPS][CT_MAX_DIMS + 1];
    int *nlab = P->nlab, ell[EIN_MAX_OPS], olab[CT_MAX_DIMS + 1], nolab = 0, oell = -1;
    memset(P->nlab, 0, sizeof P->nlab);
    for (int k = 0; k < n; k++) ell[k] = -1;
    int cur = 0, arrow = 0;
    for (int i = 0; equation[i]; i++) {
        char c = equation[i];
        if (c == ' ') continue;
        if (c == '.') {
            if (equation[i + 1] != '.' || equation[i + 2] != '.')
                return ct__error_status(CT_ERR_ARG, "einsum(): found '.' for %s that is not part of any ellipsis",
                                 arrow ? "output" : "an operand");
            if ((arrow && oell >= 0) || (!arrow && ell[cur] >= 0))
                return ct__error_status(CT_ERR_ARG, "einsum(): found '.' for operand %d for which an ellipsis "
                                 "was already found", cur);
            if (arrow) oell = nolab;
            else ell[cur] = nlab[cur];
            i += 2;
            continue;
        }
        if (c == ',') {
            if (arrow)
                return ct__error_status(CT_ERR_ARG, "einsum(): found ',' in the output subscripts at index %d", i);
            if (++cur >= n)
                return ct__error_status(CT_ERR_ARG, "einsum(): fewer operands were provided than specified in "
                                 "the equation");
            continue;
        }
        if (c == '-') {
            if (arrow || equation[i + 1] != '>')
                return ct__error_status(CT_ERR_ARG, "einsum(): invalid subscript given at index %d in the "
                                 "equation string, subscripts must be in [a-zA-Z]", i);
            arrow = 1;
            i++;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            return ct__error_status(CT_ERR_ARG, "einsum(): invalid subscript given at index %d in the equation "
                             "string, subscripts must be in [a-zA-Z]", i);
        if (arrow) {
            if (nolab >= CT_MAX_DIMS) return ct__error_status(CT_ERR_ARG, "einsum(): too many output subscripts");
            for (int j = 0; j < nolab; j++)
                if (olab[j] == label_id(c))
                    return ct__error_status(CT_ERR_ARG, "einsum(): output subscript %c appears more than once "
                                     "in the output", c);
            olab[nolab++] = label_id(c);
        } else {
            if (nlab[cur] >= CT_MAX_DIMS)
                return ct__error_status(CT_ERR_ARG, "einsum(): too many subscripts for operand %d", cur);
            lab[cur][nlab[cur]++] = label_id(c);
        }
    }
    if (cur + 1 < n)
        return ct__error_status(CT_ERR_ARG, "einsum(): more operands were provided than specified in the equation");
    /* ---- dims, ellipsis, sizes ---- */
    int max_ell = 0, count[EIN_NLAB] = {0};
    int64_t *size = P->size;
    for (int id = 0; id < EIN_NLAB; id++) size[id] = -1;
    int (*dlab)[CT_MAX_DIMS] = P->dlab;
    for (int k = 0; k < n; k++) {
        int nd = ts[k]->ndim;
        if (ell[k] < 0 && nlab[k] != nd)
            return ct__error_status(CT_ERR_SHAPE, "einsum(): the number of subscripts in the equation (%d) does "
                             "not match the number of dimensions (%d) for operand %d and no ellipsis was "
                             "given", nlab[k], nd, k);
        if (ell[k] >= 0 && nlab[k] > nd)
            return ct__error_status(CT_ERR_SHAPE, "einsum(): the number of subscripts in the equation (%d) is "
                             "more than the number of dimensions (%d) for operand %d", nlab[k], nd, k);
        if (ell[k] >= 0 && nd - nlab[k] > max_ell) max_ell = nd - nlab[k];
    }
    for (int k = 0; k < n; k++) {
        int nd = ts[k]->ndim, ne = ell[k] >= 0 ? nd - nlab[k] : 0, p = 0;
        for (int j = 0; j < nlab[k]; j++) {
            if (j == ell[k])
                for (int e = 0; e < ne; e++) dlab[k][p++] = 52 + (max_ell - ne) + e;
            dlab[k][p++] = lab[k][j];
        }
        if (ell[k] == nlab[k])
            for (int e = 0; e < ne; e++) dlab[k][p++] = 52 + (max_ell - ne) + e;
        for (int d = 0; d < nd; d++) {
            int id = dlab[k][d];
            int64_t s = ts[k]->sizes[d];
            count[id]++;
            for (int d2 = 0; d2 < d; d2++)
                if (dlab[k][d2] == id && ts[k]->sizes[d2] != s)
                    return ct__error_status(CT_ERR_SHAPE, "einsum(): subscript %c is repeated for operand %d but "
                                     "the sizes don't match, %lld != %lld", label_chr(id), k,
                                     (long long)ts[k]->sizes[d2], (long long)s);
            if (size[id] == -1 || size[id] == 1) size[id] = s;
            else if (s != 1 && s != size[id])
                return ct__error_status(CT_ERR_SHAPE, "einsum(): subscript %c has size %lld for operand %d which "
                                 "does not broadcast with previously seen size %lld", label_chr(id),
                                 (long long)s, k, (long long)size[id]);
        }
    }
    /* ---- output labels ---- */
    int *out = P->out, nout = 0;
    if (arrow) {
        for (int j = 0; j <= nolab; j++) {
            if (j == oell)
                for (int e = 0; e < max_ell; e++) out[nout++] = 52 + e;
            if (j == nolab) break;
            if (!count[olab[j]])
                return ct__error_status(CT_ERR_ARG, "einsum(): output subscript %c does not appear in the "
                                 "equation for any input operand", label_chr(olab[j]));
            out[nout++] = olab[j];
        }
    } else {
        for (int e = 0; e < max_ell; e++) out[nout++] = 52 + e;
        for (int id = 0; id < 52; id++)
            if (count[id] == 1) out[nout++] = id;
    }
    if (nout > CT_MAX_DIMS)
        return ct__error_status(CT_ERR_SHAPE, "einsum(): output has %d dims (at most %d)", nout, CT_MAX_DIMS);
    P->nout = nout;
    return CT_OK;
}

/* params: equation */
CT_META_FN(ct__meta_einsum) {
    const char *eq = a->p.linalg.equation;
    if (!eq) return ct__error_status(CT_ERR_NULL, "einsum(): equation is NULL");
    if (nin <= 0) return ct__error_status(CT_ERR_ARG, "einsum(): must provide at least one operand");
    if (nin > EIN_MAX_OPS)
        return ct__error_status(CT_ERR_ARG, "einsum(): at most %d operands supported", EIN_MAX_OPS);
    ein_plan *P = malloc(sizeof *P);
    if (!P) return ct__error_status(CT_ERR_OOM, "einsum(): out of memory");
    ct_status st = ein_parse(eq, in, nin, P);
    ct_device dev = CT_CPU;
    if (!st) st = ct__meta_device("einsum", in, nin, &dev);
    if (!st) {
        int64_t sh[CT_MAX_DIMS];
        for (int j = 0; j < P->nout; j++) sh[j] = P->size[P->out[j]];
        ct__meta_set(out, sh, P->nout, in[0]->dtype, dev);
    }
    free(P);
    return st;
}

ct_tensor *ct_einsum(const char *equation, ct_tensor *const *ts, int n) {
    if (!equation) return ct__error(CT_ERR_NULL, "einsum(): equation is NULL");
    if (n <= 0 || !ts) return ct__error(CT_ERR_ARG, "einsum(): must provide at least one operand");
    if (n > EIN_MAX_OPS) return ct__error(CT_ERR_ARG, "einsum(): at most %d operands supported", EIN_MAX_OPS);
    for (int k = 0; k < n; k++) CT_NULLCHECK_AT("einsum", ts, k);
    ein_plan *P = malloc(sizeof *P);
    if (!P) return ct__error(CT_ERR_OOM, "einsum(): out of memory");
    if (ein_parse(equation, ts, n, P)) { free(P); return NULL; }
    const int *nlab = P->nlab, *out = P->out;
    int nout = P->nout;
    int (*dlab)[CT_MAX_DIMS] = P->dlab;
    (void)nlab;
    /* ---- operands: diagonals ---- */
    term T[EIN_MAX_OPS];
    memset(T, 0, sizeof(term) * (size_t)n);
    ct_tensor *result = NULL;
    int k;
    for (k = 0; k < n; k++) {
        T[k].t = ct_retain(ts[k]);
        T[k].nd = ts[k]->ndim;
        memcpy(T[k].lab, dlab[k], sizeof(int) * (size_t)T[k].nd);
        for (int i = 0; i < T[k].nd; i++)
            for (int j = i + 1; j < T[k].nd; j++) {
                if (T[k].lab[i] != T[k].lab[j]) continue;
                int64_t sz[CT_MAX_DIMS], st[CT_MAX_DIMS];
                int nn = 0, l[CT_MAX_DIMS];
                for (int d = 0; d < T[k].nd; d++)
                    if (d != i && d != j) {
                        sz[nn] = T[k].t->sizes[d]; st[nn] = T[k].t->strides[d]; l[nn] = T[k].lab[d]; nn++;
                    }
                sz[nn] = T[k].t->sizes[i];
                st[nn] = T[k].t->strides[i] + T[k].t->strides[j];
                l[nn++] = T[k].lab[i];
                ct_tensor *v = ct__lin_view(T[k].t, sz, st, nn);
                if (!v) goto fail;
                term_set(&T[k], v);
                T[k].nd = nn;
                memcpy(T[k].lab, l, sizeof(int) * (size_t)nn);
                i = -1; /* restart */
                break;
            }
    }
    /* ---- contract left to right ---- */
    int inout[EIN_NLAB] = {0};
    for (int j = 0; j < nout; j++) inout[out[j]] = 1;
    for (k = 1; k < n; k++) {
        int keep[EIN_NLAB];
        memcpy(keep, inout, sizeof keep);
        for (int k2 = k + 1; k2 < n; k2++)
            for (int d = 0; d < T[k2].nd; d++) keep[T[k2].lab[d]] = 1;
        if (contract(&T[0], &T[k], keep)) goto fail;
    }
    /* ---- sum what the output lacks, permute to the output order ---- */
    {
        int drop[EIN_NLAB];
        for (int id = 0; id < EIN_NLAB; id++) drop[id] = !inout[id];
        if (term_sum(&T[0], drop)) goto fail;
        int perm[CT_MAX_DIMS];
        int64_t osh[CT_MAX_DIMS];
        for (int j = 0; j < nout; j++) {
            int d = term_find(&T[0], out[j]);
            if (d < 0) { /* cannot happen: every output label survives */
                ct__error(CT_ERR_RUNTIME, "einsum(): internal error: lost subscript %c", label_chr(out[j]));
                goto fail;
            }
            perm[j] = d;
            osh[j] = T[0].t->sizes[d];
        }
        result = ct__lin_perm_reshape(T[0].t, perm, osh, nout);
    }
fail:
    for (k = 0; k < n; k++) ct_release(T[k].t);
    free(P);
    if (!result) return NULL;
    ct_args a = ct__args(CT_OP_einsum);
    a.p.linalg.equation = equation;
    return ct__finish(CT_OP_einsum, result, ts, n, &a);
}
