/* embedding.c -- F.embedding, F.embedding_bag and the modules Embedding and
 * EmbeddingBag.
 *
 * Lookups are index_select rows of the weight; bags reduce them with
 * index_add (sum, mean) or scatter_reduce amax (max), so autograd gives the
 * backward.  Rows that must get a scaled gradient (padding_idx: 0;
 * scale_grad_by_freq: 1/count) go through  d + (e - d) * s  with d = e
 * detached: the value is exactly e, the gradient is s times the incoming
 * one.  max_norm renormalizes the looked-up rows of the weight in place
 * under no_grad, like torch.embedding_renorm_. */
#include "norm_rnn_impl.h"

/* int64 contiguous copy of an index tensor, checked against [0, num). */
static ct_tensor *checked_ids(const char *op, ct_tensor *input, int64_t num) {
    ct_dtype dt = ct_get_dtype(input);
    if (dt != CT_I64 && dt != CT_I32)
        return ct__error(CT_ERR_DTYPE, "%s: Expected tensor for argument #1 'indices' to have one of the "
                         "following scalar types: int64, int32; but got %s instead", op, ct_dtype_name(dt));
    ct_tensor *ids = ct_contiguous(ct_to_dtype(input, CT_I64));
    if (!ids || !ct__has_host_data(ids)) return ids; /* meta: no values to bound */
    const int64_t *p = ct_data_ptr(ids);
    for (int64_t i = 0, n = ct_numel(ids); i < n; i++)
        if (p[i] < 0 || p[i] >= num)
            return ct__error(CT_ERR_INDEX, "%s: index %lld is out of range for num_embeddings=%lld", op,
                             (long long)p[i], (long long)num);
    return ids;
}

static int wrap_padding(const char *op, int64_t *pad, int64_t num) {
    if (*pad == CT_PADDING_IDX_NONE) return 0;
    if (*pad >= num || *pad < -num) {
        ct__error(CT_ERR_ARG, "%s: Padding_idx must be within num_embeddings (got %lld for %lld embeddings)", op,
                  (long long)*pad, (long long)num);
        return -1;
    }
    if (*pad < 0) *pad += num;
    return 0;
}

static int check_weight(const char *op, ct_tensor *weight) {
    if (ct_ndim(weight) != 2) {
        ct__error(CT_ERR_SHAPE, "%s: 'weight' must be 2-D [num_embeddings, embedding_dim], got %s", op,
                  ct__tshape(weight));
        return -1;
    }
    if (!ct_dtype_is_floating(ct_get_dtype(weight))) {
        ct__error(CT_ERR_DTYPE, "%s: 'weight' must be floating point, got %s", op, ct_dtype_name(ct_get_dtype(weight)));
        return -1;
    }
    return 0;
}

/* torch.embedding_renorm_: rows of weight indexed by ids (int64, contiguous)
 * with norm > max_norm are scaled by max_norm / (norm + 1e-7), in place. */
static ct_status renorm(ct_tensor *weight, ct_tensor *ids, double max_norm, double norm_type) {
    if (ct_numel(ids) == 0) return CT_OK;
    bool prev = ct_set_grad_enabled(false);
    ct_scope s = ct_scope_begin();
    ct_tensor *uniq = NULL;
    ct_status st = ct_unique(ids, false, false, &uniq, NULL, NULL);
    if (!st) {
        ct_tensor *rows = ct_index_select(weight, 0, uniq);
        const int64_t d1[1] = {1};
        ct_tensor *norms = ct_norm(rows, norm_type, d1, 1, true);
        ct_tensor *scale = ct_where(ct_gt_scalar(norms, max_norm),
                                    ct_mul_scalar(ct_reciprocal(ct_add_scalar(norms, 1e-7)), max_norm),
                                    ct_ones_like(norms));
        ct_tensor *nr = ct_mul(rows, scale);
        if (!nr || !ct_index_put_(weight, &uniq, 1, nr, false)) st = ct_last_error_code();
    }
    ct_scope_end(s);
    ct_set_grad_enabled(prev);
    return st;
}

/* Gradient scale per looked-up row ([n, 1], weight's dtype), or NULL when
 * every scale is 1.  pad: wrapped padding_idx or CT_PADDING_IDX_NONE;
 * counts: per-embedding counts for scale_grad_by_freq, or NULL. */
static int grad_scale(const int64_t *ids, int64_t n, int64_t pad, const int64_t *counts, ct_dtype dt,
                      ct_tensor **out) {
    bool any = false;
    *out = NULL;
    for (int64_t i = 0; i < n && !any; i++)
        any = ids[i] == pad || (counts && counts[ids[i]] != 1);
    if (!any) return 0;
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) { ct__error(CT_ERR_OOM, "embedding: out of memory"); return -1; }
    for (int64_t i = 0; i < n; i++)
        v[i] = ids[i] == pad ? 0.0 : counts ? 1.0 / (double)counts[ids[i]] : 1.0;
    *out = ct_from_doubles(v, CT_SHAPE(n, 1), dt);
    free(v);
    return *out ? 0 : -1;
}

static int64_t *count_ids(const int64_t *ids, int64_t n, int64_t num) {
    int64_t *c = calloc((size_t)(num ? num : 1), sizeof(int64_t));
    if (!c) { ct__error(CT_ERR_OOM, "embedding: out of memory"); return NULL; }
    for (int64_t i = 0; i < n; i++) c[ids[i]]++;
    return c;
}

/* e with its gradient multiplied by s ([n, 1]) */
static ct_tensor *scale_grad(ct_tensor *e, ct_tensor *s) {
    if (!s || !ct_requires_grad(e)) return e;
    ct_tensor *d = ct_detach(e);
    return ct_add(d, ct_mul(ct_sub(e, d), s));
}

ct_tensor *ct_embedding(ct_tensor *input, ct_tensor *weight, int64_t padding_idx, double max_norm,
                        double norm_type, bool scale_grad_by_freq) {
    CT_NULLCHECK(input);
    CT_NULLCHECK(weight);
    if (check_weight("embedding", weight)) return NULL;
    int64_t num = ct_size(weight, 0), D = ct_size(weight, 1);
    if (wrap_padding("embedding", &padding_idx, num)) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *ids = checked_ids("embedding", input, num);
    if (!ids) return nr_end(s, NULL);
    ids = ct_reshape(ids, CT_SHAPE(-1));
    /* meta: no rows to renormalize, no gradient values to scale (the shapes are the same) */
    bool host = ct__has_host_data(ids);
    if (!isnan(max_norm) && host && renorm(weight, ids, max_norm, norm_type)) return nr_end(s, NULL);
    ct_tensor *e = ct_index_select(weight, 0, ids);
    if (e && host && ct_requires_grad(e) && (padding_idx != CT_PADDING_IDX_NONE || scale_grad_by_freq)) {
        int64_t n = ct_numel(ids);
        int64_t *counts = scale_grad_by_freq ? count_ids(ct_data_ptr(ids), n, num) : NULL;
        if (scale_grad_by_freq && !counts) return nr_end(s, NULL);
        ct_tensor *sc;
        int bad = grad_scale(ct_data_ptr(ids), n, padding_idx, counts, ct_get_dtype(weight), &sc);
        free(counts);
        e = bad ? NULL : scale_grad(e, sc);
    }
    int64_t shape[CT_MAX_DIMS + 1];
    int nd = ct_ndim(input);
    if (nd + 1 > CT_MAX_DIMS) { ct__error(CT_ERR_SHAPE, "embedding: input has too many dims"); return nr_end(s, NULL); }
    memcpy(shape, ct_sizes(input), sizeof(int64_t) * (size_t)nd);
    shape[nd] = D;
    return nr_end(s, e ? ct_reshape(e, shape, nd + 1) : NULL);
}

ct_tensor *ct_embedding_bag(ct_tensor *input, ct_tensor *weight, ct_tensor *offsets, double max_norm,
                            double norm_type, bool scale_grad_by_freq, ct_bag_mode mode,
                            ct_tensor *psw, bool include_last_offset, int64_t padding_idx) {
    static const char *op = "embedding_bag";
    static const char *mnames[] = {"sum", "mean", "max"};
    CT_NULLCHECK(input);
    CT_NULLCHECK(weight);
    if (check_weight(op, weight)) return NULL;
    if ((unsigned)mode > CT_BAG_MAX) return ct__error(CT_ERR_ARG, "%s: unknown mode %d", op, (int)mode);
    int64_t num = ct_size(weight, 0), D = ct_size(weight, 1);
    if (wrap_padding(op, &padding_idx, num)) return NULL;
    int nd = ct_ndim(input);
    if (nd == 2 && offsets)
        return ct__error(CT_ERR_ARG, "%s: if input is 2D, then offsets has to be None, as input is treated is "
                         "a mini-batch of fixed length sequences. However, found offsets of type Tensor", op);
    if (nd == 1 && !offsets)
        return ct__error(CT_ERR_ARG, "%s: offsets has to be a 1D Tensor but got None", op);
    if (nd != 1 && nd != 2)
        return ct__error(CT_ERR_SHAPE, "%s: input has to be 1D or 2D Tensor, but got Tensor of dimension %d", op, nd);
    if (psw) {
        if (mode != CT_BAG_SUM)
            return ct__error(CT_ERR_ARG, "%s: per_sample_weights was not None. per_sample_weights is only "
                             "supported for mode='sum' (got mode='%s')", op, mnames[mode]);
        if (ct_ndim(psw) != nd || memcmp(ct_sizes(psw), ct_sizes(input), sizeof(int64_t) * (size_t)nd))
            return ct__error(CT_ERR_SHAPE, "%s: per_sample_weights %s must have the shape of input %s", op,
                             ct__tshape(psw), ct__tshape(input));
    }
    ct_scope s = ct_scope_begin();
    ct_tensor *ids = checked_ids(op, input, num);
    if (!ids) return nr_end(s, NULL);
    /* the bags are computed on the host from the indices (and offsets) */
    if (!ct__need_data(op, ids) || (offsets && !ct__need_data(op, offsets))) return nr_end(s, NULL);
    ids = ct_reshape(ids, CT_SHAPE(-1));
    int64_t n = ct_numel(ids), B;
    const int64_t *pid = ct_data_ptr(ids);
    int64_t *bag = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!bag) { ct__error(CT_ERR_OOM, "%s: out of memory", op); return nr_end(s, NULL); }
    for (int64_t i = 0; i < n; i++) bag[i] = -1;
    if (nd == 2) {
        B = ct_size(input, 0);
        int64_t L = ct_size(input, 1);
        for (int64_t i = 0; i < n; i++) bag[i] = i / L;
    } else {
        ct_tensor *off = ct_ndim(offsets) == 1 && ct_dtype_is_integral(ct_get_dtype(offsets), false)
                             ? ct_contiguous(ct_to_dtype(offsets, CT_I64)) : NULL;
        if (!off) {
            free(bag);
            if (!ct_last_error_code() || ct_ndim(offsets) != 1 || !ct_dtype_is_integral(ct_get_dtype(offsets), false))
                ct__error(CT_ERR_ARG, "%s: offsets has to be a 1D integer Tensor, got %s %s", op,
                          ct_dtype_name(ct_get_dtype(offsets)), ct__tshape(offsets));
            return nr_end(s, NULL);
        }
        int64_t no = ct_numel(off);
        const int64_t *po = ct_data_ptr(off);
        B = include_last_offset ? no - 1 : no;
        const char *bad = NULL;
        if (B < 0) bad = "include_last_offset needs at least one offset";
        else if (no > 0 && po[0] != 0) bad = "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0";
        for (int64_t b = 0; !bad && b + 1 < no; b++)
            if (po[b + 1] < po[b]) bad = "offsets must be non-decreasing";
        if (!bad && no > 0 && po[no - 1] > n) bad = "offsets must not exceed the number of indices";
        if (bad) {
            free(bag);
            ct__error(CT_ERR_ARG, "%s: %s (offsets %s, %lld indices)", op, bad, ct__tshape(offsets), (long long)n);
            return nr_end(s, NULL);
        }
        for (int64_t b = 0; b < B; b++) {
            int64_t end = b + 1 < no ? po[b + 1] : n;
            for (int64_t i = po[b]; i < end; i++) bag[i] = b;
        }
    }
    /* kept entries: position, id and bag; per-bag counts */
    int64_t m = 0;
    int64_t *pos = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *kid = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    int64_t *kbag = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    double *cnt = calloc((size_t)(B ? B : 1), sizeof(double));
    int64_t *counts = scale_grad_by_freq ? count_ids(pid, n, num) : NULL;
    ct_tensor *out = NULL;
    if (!pos || !kid || !kbag || !cnt || (scale_grad_by_freq && !counts)) {
        ct__error(CT_ERR_OOM, "%s: out of memory", op);
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        if (bag[i] >= 0 && pid[i] != padding_idx) {
            pos[m] = i;
            kid[m] = pid[i];
            kbag[m] = bag[i];
            cnt[bag[i]] += 1;
            m++;
        }
    if (!isnan(max_norm) && renorm(weight, ids, max_norm, norm_type)) goto done;
    ct_dtype wdt = ct_get_dtype(weight);
    ct_tensor *tid = ct_from_array(kid, CT_SHAPE(m), CT_I64);
    ct_tensor *tbag = ct_from_array(kbag, CT_SHAPE(m), CT_I64);
    ct_tensor *e = ct_index_select(weight, 0, tid);
    if (e && counts && ct_requires_grad(e)) {
        ct_tensor *sc;
        e = grad_scale(kid, m, CT_PADDING_IDX_NONE, counts, wdt, &sc) ? NULL : scale_grad(e, sc);
    }
    if (psw) {
        ct_tensor *w = ct_index_select(ct_reshape(psw, CT_SHAPE(-1)), 0, ct_from_array(pos, CT_SHAPE(m), CT_I64));
        e = ct_mul(e, ct_unsqueeze(w, 1));
    }
    if (!e) goto done;
    ct_tensor *zeros = ct_zeros_on(CT_SHAPE(B, D), ct_get_dtype(e), ct_get_device(e));
    if (mode == CT_BAG_MAX) {
        ct_tensor *idx = ct_expand(ct_unsqueeze(tbag, 1), CT_SHAPE(m, D));
        out = ct_scatter_reduce(zeros, 0, idx, e, "amax", false);
    } else {
        out = ct_index_add(zeros, 0, tbag, e, 1.0);
        if (mode == CT_BAG_MEAN && out) {
            for (int64_t b = 0; b < B; b++) if (cnt[b] == 0) cnt[b] = 1;
            out = ct_div(out, ct_to_dtype(ct_from_doubles(cnt, CT_SHAPE(B, 1), CT_F64), ct_get_dtype(out)));
        }
    }
done:
    free(bag);
    free(pos);
    free(kid);
    free(kbag);
    free(cnt);
    free(counts);
    return nr_end(s, out);
}

/* ======================================================================
 * modules
 * ====================================================================== */
typedef struct {
    ct_module base;
    int64_t num, dim, padding_idx;
    double max_norm, norm_type;
    bool freq, include_last_offset;
    ct_bag_mode mode;
} emb_mod;

static char *emb_repr(ct_module *m) {
    emb_mod *e = (emb_mod *)m;
    bool bag = !strcmp(m->cls->name, "EmbeddingBag");
    static const char *mnames[] = {"sum", "mean", "max"};
    char *r = malloc(400), f[64];
    if (!r) return NULL;
    size_t o = (size_t)snprintf(r, 400, "%lld, %lld", (long long)e->num, (long long)e->dim);
    if (!bag && e->padding_idx != CT_PADDING_IDX_NONE)
        o += (size_t)snprintf(r + o, 400 - o, ", padding_idx=%lld", (long long)e->padding_idx);
    if (!isnan(e->max_norm)) {
        nr_pyfloat(f, sizeof f, e->max_norm);
        o += (size_t)snprintf(r + o, 400 - o, ", max_norm=%s", f);
    }
    if (e->norm_type != 2) {
        nr_pyfloat(f, sizeof f, e->norm_type);
        o += (size_t)snprintf(r + o, 400 - o, ", norm_type=%s", f);
    }
    if (e->freq) o += (size_t)snprintf(r + o, 400 - o, ", scale_grad_by_freq=True");
    if (bag) {
        o += (size_t)snprintf(r + o, 400 - o, ", mode=%s", mnames[e->mode]);
        if (e->padding_idx != CT_PADDING_IDX_NONE)
            snprintf(r + o, 400 - o, ", padding_idx=%lld", (long long)e->padding_idx);
    }
    return r;
}

static ct_tensor *emb_forward(ct_module *m, ct_tensor *const *in, int n) {
    emb_mod *e = (emb_mod *)m;
    if (n != 1) return ct__error(CT_ERR_ARG, "Embedding: expects one input (the indices), got %d", n);
    return ct_embedding(in[0], ct_module_param(m, 0), e->padding_idx, e->max_norm, e->norm_type, e->freq);
}

static ct_tensor *bag_forward(ct_module *m, ct_tensor *const *in, int n) {
    emb_mod *e = (emb_mod *)m;
    if (n < 1 || n > 3) return ct__error(CT_ERR_ARG, "EmbeddingBag: expects 1 to 3 inputs, got %d", n);
    ct_tensor *offsets = NULL, *psw = NULL;
    if (n == 3) {
        offsets = in[1];
        psw = in[2];
    } else if (n == 2) {
        if (ct_ndim(in[0]) == 2 && ct_dtype_is_floating(ct_get_dtype(in[1]))) psw = in[1];
        else offsets = in[1];
    }
    return ct_embedding_bag(in[0], ct_module_param(m, 0), offsets, e->max_norm, e->norm_type, e->freq, e->mode,
                            psw, e->include_last_offset, e->padding_idx);
}

static const ct_module_class k_emb = {"Embedding", sizeof(emb_mod), emb_forward, emb_repr, NULL, NULL};
static const ct_module_class k_bag = {"EmbeddingBag", sizeof(emb_mod), bag_forward, emb_repr, NULL, NULL};

static emb_mod *emb_alloc(const ct_module_class *cls, int64_t num, int64_t dim, int64_t padding_idx,
                          double max_norm, double norm_type, bool freq) {
    if (num < 0 || dim < 0)
        return ct__error(CT_ERR_ARG, "%s: num_embeddings and embedding_dim must be >= 0, got %lld and %lld",
                         cls->name, (long long)num, (long long)dim);
    if (wrap_padding(cls->name, &padding_idx, num)) return NULL;
    emb_mod *e = (emb_mod *)ct_module_new(cls);
    if (!e) return NULL;
    e->num = num;
    e->dim = dim;
    e->padding_idx = padding_idx;
    e->max_norm = max_norm;
    e->norm_type = norm_type;
    e->freq = freq;
    return e;
}

/* weight ~ N(0, 1) with the padding row zeroed */
static ct_module *emb_init(emb_mod *e) {
    if (!e) return NULL;
    ct_scope s = ct_scope_begin();
    bool prev = ct_set_grad_enabled(false);
    ct_tensor *w = ct_empty(CT_SHAPE(e->num, e->dim), ct_get_default_dtype());
    if (w) w = ct_normal_(w, 0.0, 1.0);
    if (w && e->padding_idx != CT_PADDING_IDX_NONE && !ct_zero_(ct_select(w, 0, e->padding_idx))) w = NULL;
    ct_set_grad_enabled(prev);
    int slot = w ? ct_module_register_parameter(&e->base, "weight", w) : -1;
    ct_scope_end(s);
    if (slot < 0) { ct_module_release(&e->base); return NULL; }
    return &e->base;
}

ct_module *ct_embedding_new(int64_t num, int64_t dim, int64_t padding_idx, double max_norm, double norm_type,
                            bool freq) {
    return emb_init(emb_alloc(&k_emb, num, dim, padding_idx, max_norm, norm_type, freq));
}

ct_module *ct_embedding_from_pretrained(ct_tensor *weight, bool freeze, int64_t padding_idx, double max_norm,
                                        double norm_type, bool freq) {
    CT_NULLCHECK(weight);
    if (check_weight("Embedding.from_pretrained", weight)) return NULL;
    emb_mod *e = emb_alloc(&k_emb, ct_size(weight, 0), ct_size(weight, 1), padding_idx, max_norm, norm_type, freq);
    if (!e) return NULL;
    ct_scope s = ct_scope_begin();
    ct_tensor *w = ct_clone(ct_detach(weight));
    int slot = w ? ct_module_register_parameter(&e->base, "weight", w) : -1;
    if (slot >= 0 && freeze && ct_set_requires_grad(w, false)) slot = -1;
    ct_scope_end(s);
    if (slot < 0) { ct_module_release(&e->base); return NULL; }
    return &e->base;
}

ct_module *ct_embedding_bag_new(int64_t num, int64_t dim, double max_norm, double norm_type, bool freq,
                                ct_bag_mode mode, bool include_last_offset, int64_t padding_idx) {
    if ((unsigned)mode > CT_BAG_MAX) return ct__error(CT_ERR_ARG, "EmbeddingBag: unknown mode %d", (int)mode);
    emb_mod *e = emb_alloc(&k_bag, num, dim, padding_idx, max_norm, norm_type, freq);
    if (!e) return NULL;
    e->mode = mode;
    e->include_last_offset = include_last_offset;
    return emb_init(e);
}
