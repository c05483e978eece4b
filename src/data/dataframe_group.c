/* dataframe_group.c -- group_by aggregations, inner merge, to_tensor. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/dataframe_impl.h"

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
    return x;
}
static uint64_t val_hash(const ct_column *c, int64_t i) {
    if (c->type == CT_DF_STRING) {
        int32_t l; const char *s = ct__col_str(c, i, &l);
        uint64_t h = 1469598103934665603ull;
        for (int32_t k = 0; k < l; k++) { h ^= (unsigned char)s[k]; h *= 1099511628211ull; }
        return h;
    }
    int64_t v = c->type == CT_DF_INT64 ? ((const int64_t *)c->data->ptr)[i] : ct__bit(c->data->ptr, i);
    return mix64((uint64_t)v);
}
static bool val_eq(const ct_column *a, int64_t i, const ct_column *b, int64_t j) {
    if (a->type == CT_DF_STRING) {
        int32_t la, lb; const char *sa = ct__col_str(a, i, &la), *sb = ct__col_str(b, j, &lb);
        return la == lb && memcmp(sa, sb, (size_t)la) == 0;
    }
    if (a->type == CT_DF_INT64) return ((const int64_t *)a->data->ptr)[i] == ((const int64_t *)b->data->ptr)[j];
    return ct__bit(a->data->ptr, i) == ct__bit(b->data->ptr, j);
}

/* open-addressing map from key tuples (rows of `keys`) to dense ids in
 * first-appearance order; reps[id] = first row */
typedef struct {
    int64_t *slot;     /* id or -1 */
    size_t cap;
    int64_t *reps;
    int64_t n;
} keymap;

static int km_init(keymap *m, int64_t rows) {
    m->cap = 16;
    while (m->cap < (size_t)rows * 2) m->cap *= 2;
    m->slot = malloc(sizeof(int64_t) * m->cap);
    m->reps = malloc(sizeof(int64_t) * (size_t)(rows ? rows : 1));
    m->n = 0;
    if (!m->slot || !m->reps) return -1;
    memset(m->slot, 0xff, sizeof(int64_t) * m->cap);
    return 0;
}
static void km_free(keymap *m) { free(m->slot); free(m->reps); }
static uint64_t row_hash(const ct_column *const *k, int nk, int64_t r) {
    uint64_t h = 0;
    for (int i = 0; i < nk; i++) h = mix64(h * 31 + val_hash(k[i], r));
    return h;
}
/* finds (insert: adds) the id of row r of columns k (the map's rows live in mk) */
static int64_t km_find(keymap *m, const ct_column *const *mk, const ct_column *const *k, int nk, int64_t r,
                       bool insert) {
    size_t h = row_hash(k, nk, r) & (m->cap - 1);
    for (;;) {
        int64_t id = m->slot[h];
        if (id < 0) break;
        bool eq = true;
        for (int i = 0; i < nk && eq; i++) eq = val_eq(mk[i], m->reps[id], k[i], r);
        if (eq) return id;
        h = (h + 1) & (m->cap - 1);
    }
    if (!insert) return -1;
    m->slot[h] = m->n;
    m->reps[m->n] = r;
    return m->n++;
}

static const char *agg_name(ct_df_agg_kind k) {
    static const char *n[] = {"sum", "mean", "count", "min", "max"};
    return (unsigned)k < 5 ? n[k] : "?";
}

ct_df *ct_df_group_by(const ct_df *df, const char *const *keys, int nk, const ct_df_agg *aggs, int na) {
    if (!df) return NULL;
    if (nk < 1 || !keys || na < 0 || (na > 0 && !aggs)) return ct__error(CT_ERR_ARG, "group_by: need key columns");
    int64_t n = df->nrows;
    const ct_column **kc = calloc((size_t)nk, sizeof *kc);
    const ct_column **ac = calloc((size_t)(na ? na : 1), sizeof *ac);
    int64_t *gid = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    keymap m = {0};
    ct_column **outc = calloc((size_t)(nk + na), sizeof *outc);
    char **outn = calloc((size_t)(nk + na), sizeof *outn);
    int64_t *rank = NULL, *order = NULL;
    double *acc = NULL; int64_t *cnt = NULL;
    ct_df *out = NULL;
    if (!kc || !ac || !gid || !outc || !outn || km_init(&m, n)) { ct__error(CT_ERR_OOM, "group_by: out of memory"); goto done; }
    for (int i = 0; i < nk; i++) {
        if (!(kc[i] = ct_df_column(df, keys[i]))) goto done;
        if (kc[i]->type != CT_DF_INT64 && kc[i]->type != CT_DF_STRING && kc[i]->type != CT_DF_BOOL) {
            ct__error(CT_ERR_DTYPE, "group_by: key '%s' is %s (int64, bool or string needed)", keys[i], ct_df_type_name(kc[i]->type));
            goto done;
        }
    }
    for (int j = 0; j < na; j++) {
        if (!aggs[j].column) { ct__error(CT_ERR_NULL, "group_by: agg %d has no column", j); goto done; }
        if (!(ac[j] = ct_df_column(df, aggs[j].column))) goto done;
        ct_df_type t = ac[j]->type;
        if ((unsigned)aggs[j].how > CT_DF_MAX) { ct__error(CT_ERR_ARG, "group_by: bad aggregation %d", (int)aggs[j].how); goto done; }
        if (aggs[j].how != CT_DF_COUNT && (t == CT_DF_STRING || t == CT_DF_LIST)) {
            ct__error(CT_ERR_DTYPE, "group_by: cannot %s the %s column '%s'", agg_name(aggs[j].how), ct_df_type_name(t), aggs[j].column);
            goto done;
        }
    }
    for (int64_t r = 0; r < n; r++) {
        bool ok = true;
        for (int i = 0; i < nk && ok; i++) ok = ct__col_valid(kc[i], r);
        gid[r] = ok ? km_find(&m, kc, kc, nk, r, true) : -1;
    }
    int64_t ng = m.n;
    /* sort groups by key: argsort of the representative rows */
    {
        ct_column **kr = calloc((size_t)nk, sizeof *kr);
        if (!kr) { ct__error(CT_ERR_OOM, "group_by: out of memory"); goto done; }
        bool ok = true;
        for (int i = 0; i < nk && ok; i++) ok = (kr[i] = ct_column_take(kc[i], m.reps, ng)) != NULL;
        if (ok) order = ct__df_argsort((const ct_column *const *)kr, NULL, nk, ng);
        for (int i = 0; i < nk; i++) {
            if (ok && order) { outc[i] = ct_column_take(kr[i], order, ng); if (!outc[i]) ok = false; }
            ct_column_release(kr[i]);
        }
        free(kr);
        if (!ok || !order) goto done;
        for (int i = 0; i < nk; i++) outn[i] = strdup(keys[i]);
    }
    rank = malloc(sizeof(int64_t) * (size_t)(ng ? ng : 1));
    acc = malloc(sizeof(double) * (size_t)(ng ? ng : 1) * 2);
    cnt = malloc(sizeof(int64_t) * (size_t)(ng ? ng : 1));
    if (!rank || !acc || !cnt) { ct__error(CT_ERR_OOM, "group_by: out of memory"); goto done; }
    for (int64_t g = 0; g < ng; g++) rank[order[g]] = g;
    for (int64_t r = 0; r < n; r++) if (gid[r] >= 0) gid[r] = rank[gid[r]];
    for (int j = 0; j < na; j++) {
        const ct_column *c = ac[j];
        ct_df_agg_kind how = aggs[j].how;
        bool ints = c->type == CT_DF_INT64 || c->type == CT_DF_BOOL;
        int64_t *isum = (int64_t *)acc; /* reused for int sums/min/max */
        double *dsum = acc, *comp = acc + ng;
        for (int64_t g = 0; g < ng; g++) { cnt[g] = 0; dsum[g] = 0; comp[g] = 0; }
        for (int64_t r = 0; r < n; r++) {
            int64_t g = gid[r];
            if (g < 0 || !ct__col_valid(c, r)) continue;
            if (how == CT_DF_COUNT) { cnt[g]++; continue; }
            if (ints && how != CT_DF_MEAN) {
                int64_t v = c->type == CT_DF_INT64 ? ((const int64_t *)c->data->ptr)[r] : ct__bit(c->data->ptr, r);
                if (how == CT_DF_SUM) isum[g] = (int64_t)((uint64_t)isum[g] + (uint64_t)v);
                else if (!cnt[g] || (how == CT_DF_MIN ? v < isum[g] : v > isum[g])) isum[g] = v;
                cnt[g]++;
                continue;
            }
            double v = c->type == CT_DF_FLOAT64 ? ((const double *)c->data->ptr)[r]
                     : c->type == CT_DF_FLOAT32 ? ((const float *)c->data->ptr)[r]
                     : c->type == CT_DF_INT64 ? (double)((const int64_t *)c->data->ptr)[r] : ct__bit(c->data->ptr, r);
            if (isnan(v)) continue;
            if (how == CT_DF_SUM || how == CT_DF_MEAN) { /* Kahan, like pandas */
                double y = v - comp[g], t = dsum[g] + y;
                comp[g] = (t - dsum[g]) - y;
                dsum[g] = t;
            } else if (!cnt[g] || (how == CT_DF_MIN ? v < dsum[g] : v > dsum[g])) dsum[g] = v;
            cnt[g]++;
        }
        ct_df_type rt = how == CT_DF_COUNT ? CT_DF_INT64 : how == CT_DF_MEAN ? CT_DF_FLOAT64
                      : ints ? CT_DF_INT64 : how == CT_DF_SUM ? CT_DF_FLOAT64 : c->type;
        double *dv = malloc(sizeof(double) * (size_t)(ng ? ng : 1));
        int64_t *iv = malloc(sizeof(int64_t) * (size_t)(ng ? ng : 1));
        uint8_t *valid = malloc((size_t)(ng ? ng : 1));
        if (!dv || !iv || !valid) { free(dv); free(iv); free(valid); ct__error(CT_ERR_OOM, "group_by: out of memory"); goto done; }
        bool anynull = false;
        for (int64_t g = 0; g < ng; g++) {
            valid[g] = 1;
            if (how == CT_DF_COUNT) iv[g] = cnt[g];
            else if (how == CT_DF_MEAN) { dv[g] = dsum[g] / (double)cnt[g]; valid[g] = cnt[g] > 0; }
            else if (ints) { iv[g] = cnt[g] || how == CT_DF_SUM ? isum[g] : 0; valid[g] = cnt[g] > 0 || how == CT_DF_SUM; }
            else { dv[g] = cnt[g] || how == CT_DF_SUM ? dsum[g] : 0; valid[g] = cnt[g] > 0 || how == CT_DF_SUM; }
            anynull |= !valid[g];
        }
        ct_column *oc;
        if (rt == CT_DF_INT64) {
            if (c->type == CT_DF_BOOL && how != CT_DF_SUM && how != CT_DF_COUNT) {
                bool *bv = malloc((size_t)(ng ? ng : 1));
                if (bv) for (int64_t g = 0; g < ng; g++) bv[g] = iv[g] != 0;
                oc = bv ? ct_column_from_bool(bv, anynull ? valid : NULL, ng) : NULL;
                free(bv);
            } else oc = ct_column_from_int64(iv, anynull ? valid : NULL, ng);
        } else if (rt == CT_DF_FLOAT32) {
            float *fv = malloc(sizeof(float) * (size_t)(ng ? ng : 1));
            if (fv) for (int64_t g = 0; g < ng; g++) fv[g] = (float)dv[g];
            oc = fv ? ct_column_from_float32(fv, anynull ? valid : NULL, ng) : NULL;
            free(fv);
        } else oc = ct_column_from_float64(dv, anynull ? valid : NULL, ng);
        free(dv); free(iv); free(valid);
        if (!oc) goto done;
        outc[nk + j] = oc;
        char buf[512];
        if (aggs[j].out_name) outn[nk + j] = strdup(aggs[j].out_name);
        else { snprintf(buf, sizeof buf, "%s_%s", aggs[j].column, agg_name(how)); outn[nk + j] = strdup(buf); }
    }
    for (int i = 0; i < nk + na; i++) if (!outn[i]) { ct__error(CT_ERR_OOM, "group_by: out of memory"); goto done; }
    out = ct_df_new((const char *const *)outn, outc, nk + na);
done:
    if (outc) for (int i = 0; i < nk + na; i++) ct_column_release(outc[i]);
    if (outn) for (int i = 0; i < nk + na; i++) free(outn[i]);
    free(outc); free(outn); free(kc); free(ac); free(gid); free(rank); free(order); free(acc); free(cnt);
    km_free(&m);
    return out;
}

ct_df *ct_df_merge_inner(const ct_df *left, const ct_df *right, const char *key) {
    if (!left || !right) return NULL;
    const ct_column *lk = ct_df_column(left, key), *rk = lk ? ct_df_column(right, key) : NULL;
    if (!lk || !rk) return NULL;
    if (lk->type != rk->type || (lk->type != CT_DF_INT64 && lk->type != CT_DF_STRING))
        return ct__error(CT_ERR_DTYPE, "merge: key '%s' is %s on the left and %s on the right (int64 or string needed on both)",
                         key, ct_df_type_name(lk->type), ct_df_type_name(rk->type));
    int64_t nl = left->nrows, nr = right->nrows;
    keymap lm = {0}, rm = {0};
    int64_t *lg = malloc(sizeof(int64_t) * (size_t)(nl ? nl : 1));
    int64_t *rnext = malloc(sizeof(int64_t) * (size_t)(nr ? nr : 1));
    int64_t *rhead = malloc(sizeof(int64_t) * (size_t)(nr ? nr : 1)), *rtail = malloc(sizeof(int64_t) * (size_t)(nr ? nr : 1));
    int64_t *lhead = malloc(sizeof(int64_t) * (size_t)(nl ? nl : 1)), *ltail = malloc(sizeof(int64_t) * (size_t)(nl ? nl : 1));
    int64_t *lnext = malloc(sizeof(int64_t) * (size_t)(nl ? nl : 1));
    int64_t *li = NULL, *ri = NULL;
    ct_df *out = NULL;
    char **names = NULL; ct_column **cols = NULL; int nc = 0;
    if (!lg || !rnext || !rhead || !rtail || !lhead || !ltail || !lnext || km_init(&lm, nl) || km_init(&rm, nr)) {
        ct__error(CT_ERR_OOM, "merge: out of memory"); goto done;
    }
    for (int64_t r = 0; r < nr; r++) {
        rnext[r] = -1;
        if (!ct__col_valid(rk, r)) continue;
        int64_t g = km_find(&rm, &rk, &rk, 1, r, true);
        if (g == rm.n - 1 && rm.reps[g] == r) { rhead[g] = r; rtail[g] = r; }
        else { rnext[rtail[g]] = r; rtail[g] = r; }
    }
    for (int64_t r = 0; r < nl; r++) {
        lnext[r] = -1;
        if (!ct__col_valid(lk, r)) continue;
        int64_t g = km_find(&lm, &lk, &lk, 1, r, true);
        if (g == lm.n - 1 && lm.reps[g] == r) { lhead[g] = r; ltail[g] = r; }
        else { lnext[ltail[g]] = r; ltail[g] = r; }
    }
    int64_t total = 0, cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        total = 0;
        for (int64_t g = 0; g < lm.n; g++) {
            int64_t rg = km_find(&rm, &rk, &lk, 1, lm.reps[g], false);
            if (rg < 0) continue;
            for (int64_t a = lhead[g]; a >= 0; a = lnext[a])
                for (int64_t b = rhead[rg]; b >= 0; b = rnext[b]) {
                    if (pass) { li[total] = a; ri[total] = b; }
                    total++;
                }
        }
        if (!pass) {
            cap = total;
            li = malloc(sizeof(int64_t) * (size_t)(cap ? cap : 1));
            ri = malloc(sizeof(int64_t) * (size_t)(cap ? cap : 1));
            if (!li || !ri) { ct__error(CT_ERR_OOM, "merge: out of memory"); goto done; }
        }
    }
    int ncols = left->ncols + right->ncols - 1;
    names = calloc((size_t)ncols, sizeof *names);
    cols = calloc((size_t)ncols, sizeof *cols);
    if (!names || !cols) { ct__error(CT_ERR_OOM, "merge: out of memory"); goto done; }
    int lki = ct_df_column_index(left, key), rki = ct_df_column_index(right, key);
    char buf[512];
    (void)lki;
    for (int side = 0; side < 2; side++) {
        const ct_df *d = side ? right : left, *o = side ? left : right;
        for (int i = 0; i < d->ncols; i++) {
            if (side && i == rki) continue;
            if (!side && i == lki) {
                names[nc] = strdup(key);
                if (!(cols[nc++] = ct_column_take(lk, li, total))) goto done;
                continue;
            }
            const char *nm = d->names[i];
            if (ct_df_column_index(o, nm) >= 0) { snprintf(buf, sizeof buf, "%s%s", nm, side ? "_y" : "_x"); nm = buf; }
            names[nc] = strdup(nm);
            if (!(cols[nc++] = ct_column_take(d->cols[i], side ? ri : li, total))) goto done;
        }
    }
    for (int i = 0; i < nc; i++) if (!names[i]) { ct__error(CT_ERR_OOM, "merge: out of memory"); goto done; }
    out = ct_df_new((const char *const *)names, cols, nc);
done:
    for (int i = 0; i < nc; i++) { free(names[i]); ct_column_release(cols[i]); }
    free(names); free(cols);
    free(lg); free(rnext); free(rhead); free(rtail); free(lhead); free(ltail); free(lnext); free(li); free(ri);
    km_free(&lm); km_free(&rm);
    return out;
}

ct_tensor *ct_df_to_tensor(const ct_df *df, const char *const *names, int n, ct_dtype dtype, bool null_as_nan) {
    if (!df) return NULL;
    if (dtype != CT_F32 && dtype != CT_F64) return ct__error(CT_ERR_DTYPE, "to_tensor: dtype must be float32 or float64");
    int m = n > 0 ? n : df->ncols;
    if (n > 0 && !names) return ct__error(CT_ERR_NULL, "to_tensor: NULL names");
    const ct_column **cs = malloc(sizeof(ct_column *) * (size_t)(m ? m : 1));
    if (!cs) return ct__error(CT_ERR_OOM, "to_tensor: out of memory");
    for (int k = 0; k < m; k++) {
        const char *nm = n > 0 ? names[k] : df->names[k];
        cs[k] = n > 0 ? ct_df_column(df, nm) : df->cols[k];
        if (!cs[k]) { free(cs); return NULL; }
        ct_df_type t = cs[k]->type;
        if (t == CT_DF_STRING || t == CT_DF_LIST) { free(cs); return ct__error(CT_ERR_DTYPE, "to_tensor: column '%s' is %s, not numeric", nm, ct_df_type_name(t)); }
        if (cs[k]->null_count && !null_as_nan) {
            int64_t r = 0;
            while (ct__col_valid(cs[k], r)) r++;
            free(cs);
            return ct__error(CT_ERR_ARG, "to_tensor: column '%s' has a null at row %lld (pass null_as_nan)", nm, (long long)r);
        }
    }
    int64_t shape[2] = {df->nrows, m};
    ct_tensor *t = ct_empty_on(shape, 2, dtype, CT_CPU);
    if (!t) { free(cs); return NULL; }
    void *p = ct_data_ptr(t);
    for (int k = 0; k < m; k++)
        for (int64_t r = 0; r < df->nrows; r++) {
            double v = ct_column_get_double(cs[k], r);
            if (dtype == CT_F32) ((float *)p)[r * m + k] = (float)v;
            else ((double *)p)[r * m + k] = v;
        }
    free(cs);
    return t;
}

ct_tensor *ct_column_to_padded_tensor(const ct_column *c, int64_t pad_id, int64_t max_len, ct_tensor **lengths) {
    if (lengths) *lengths = NULL;
    if (!c) return NULL;
    if (c->type != CT_DF_LIST || c->child->type != CT_DF_INT64)
        return ct__error(CT_ERR_DTYPE, "to_padded_tensor: needs a list<int64> column");
    int64_t n = c->length, L = 0;
    const int32_t *o = ct__col_off(c);
    if (max_len >= 0) L = max_len;
    else for (int64_t i = 0; i < n; i++) if (ct__col_valid(c, i) && o[i + 1] - o[i] > L) L = o[i + 1] - o[i];
    int64_t shape[2] = {n, L};
    ct_tensor *t = ct_full_on(shape, 2, (double)pad_id, CT_I64, CT_CPU);
    ct_tensor *lt = lengths ? ct_empty_on(&n, 1, CT_I64, CT_CPU) : NULL;
    if (!t || (lengths && !lt)) return NULL;
    int64_t *d = ct_data_ptr(t), *ld = lt ? ct_data_ptr(lt) : NULL;
    const int64_t *v = c->child->data->ptr;
    for (int64_t i = 0; i < n; i++) {
        int64_t len = ct__col_valid(c, i) ? o[i + 1] - o[i] : 0;
        if (len > L) len = L;
        for (int64_t k = 0; k < len; k++) d[i * L + k] = v[o[i] + k];
        if (ld) ld[i] = len;
    }
    if (lengths) *lengths = lt;
    return t;
}
