/* functional.c -- torch.nn.functional helpers that are not ops of their
 * own: logsigmoid, prelu, glu, normalize, cosine_similarity and
 * pairwise_distance.  Each is a composite of public ops, so autograd
 * differentiates it; temporaries live in a private scope and only the
 * result is kept. */
#include <math.h>

#include "../ops/op_table.h"
#include "../ops/autocast.h"
#include "ctorch/nn.h"

/* Opens a scope; FN_END keeps the result (if any) and closes it. */
#define FN_BEGIN ct_scope fn_scope__ = ct_scope_begin()
#define FN_END(r)                                        \
    do {                                                 \
        ct_tensor *fn_r__ = (r);                         \
        if (fn_r__) ct_keep(fn_r__);                     \
        ct_scope_end(fn_scope__);                        \
        return fn_r__;                                   \
    } while (0)

/* x with its value replaced by v's while the gradient flows to x unchanged
 * (x + detach(v - x)): PyTorch's "clamp under no_grad" idiom. */
static ct_tensor *straight_through(ct_tensor *x, ct_tensor *v) {
    return ct_add(x, ct_detach(ct_sub(v, x)));
}

/* ---- activations ---------------------------------------------------------- */
ct_tensor *ct_logsigmoid(ct_tensor *x) {
    CT_NULLCHECK(x);
    FN_BEGIN;
    /* min(x, 0) - log1p(exp(-|x|)), like torch's log_sigmoid kernel */
    ct_tensor *r = ct_sub(ct_minimum(x, ct_full_on(NULL, 0, 0.0, ct_get_dtype(x), CT_CPU)),
                          ct_log1p(ct_exp(ct_neg(ct_abs(x)))));
    FN_END(r);
}

ct_tensor *ct_prelu(ct_tensor *x, ct_tensor *weight) {
    CT_AUTOCAST_OP(CT_AC_prelu, ct_prelu(CT_AC_ARG(0), CT_AC_ARG(1)), x, weight);
    CT_NULLCHECK(x);
    CT_NULLCHECK(weight);
    int64_t nw = ct_numel(weight);
    int nd = ct_ndim(x);
    int64_t ch = nd == 0 ? 1 : nd == 1 ? ct_size(x, 0) : ct_size(x, 1);
    if (nw != 1 && nw != ch)
        return ct__error(CT_ERR_SHAPE, "prelu: mismatch of parameter numbers and input channel size: "
                         "weight %s has %lld elements, input %s has %lld channels",
                         ct__tshape(weight), (long long)nw, ct__tshape(x), (long long)ch);
    FN_BEGIN;
    ct_tensor *w;
    if (nw == 1) {
        w = ct_reshape(weight, NULL, 0);
    } else if (nd < 2) {
        w = ct_reshape(weight, &nw, 1);
    } else { /* [C, 1, 1, ...] against dim 1 */
        int64_t shape[CT_MAX_DIMS];
        shape[0] = nw;
        for (int i = 1; i < nd - 1; i++) shape[i] = 1;
        w = ct_reshape(weight, shape, nd - 1);
    }
    ct_tensor *r = ct_where(ct_gt_scalar(x, 0.0), x, ct_mul(w, x));
    FN_END(r);
}

ct_tensor *ct_glu(ct_tensor *x, int64_t dim) {
    CT_NULLCHECK(x);
    if (ct_ndim(x) == 0) return ct__error(CT_ERR_SHAPE, "glu: does not support scalars because halving size must be even");
    int64_t d = ct__wrap_dim("glu", dim, ct_ndim(x));
    if (d < 0) return NULL;
    int64_t n = ct_size(x, d);
    if (n % 2 != 0)
        return ct__error(CT_ERR_SHAPE, "glu: Halving dimension must be even, but dimension %lld is size %lld",
                         (long long)d, (long long)n);
    FN_BEGIN;
    ct_tensor *r = ct_mul(ct_narrow(x, d, 0, n / 2), ct_sigmoid(ct_narrow(x, d, n / 2, n / 2)));
    FN_END(r);
}

/* ---- distances and normalization ---------------------------------------------- */
ct_tensor *ct_normalize(ct_tensor *x, double p, int64_t dim, double eps) {
    CT_NULLCHECK(x);
    FN_BEGIN;
    ct_tensor *n = ct_norm(x, p, &dim, 1, true);
    ct_tensor *r = ct_div(x, ct_clamp(n, eps, NAN));
    FN_END(r);
}

ct_tensor *ct_cosine_similarity(ct_tensor *x1, ct_tensor *x2, int64_t dim, double eps) {
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    int64_t shape[CT_MAX_DIMS];
    int nd;
    if (ct__broadcast_shapes("cosine_similarity", ct_sizes(x1), ct_ndim(x1), ct_sizes(x2), ct_ndim(x2),
                             shape, &nd) != CT_OK)
        return NULL;
    FN_BEGIN;
    ct_tensor *a = ct_broadcast_to(x1, shape, nd), *b = ct_broadcast_to(x2, shape, nd);
    /* each vector divided by its norm clamped at eps (the clamp does not stop
     * the gradient, as in torch, where it runs under no_grad) */
    ct_tensor *na = ct_norm(a, 2.0, &dim, 1, true), *nb = ct_norm(b, 2.0, &dim, 1, true);
    na = straight_through(na, ct_clamp(na, eps, NAN));
    nb = straight_through(nb, ct_clamp(nb, eps, NAN));
    ct_tensor *r = ct_sum(ct_mul(ct_div(a, na), ct_div(b, nb)), &dim, 1, false);
    FN_END(r);
}

ct_tensor *ct_pairwise_distance(ct_tensor *x1, ct_tensor *x2, double p, double eps, bool keepdim) {
    CT_NULLCHECK(x1);
    CT_NULLCHECK(x2);
    int nd = ct_ndim(x1) > ct_ndim(x2) ? ct_ndim(x1) : ct_ndim(x2);
    FN_BEGIN;
    ct_tensor *diff = ct_add_scalar(ct_sub(x1, x2), eps);
    ct_tensor *r;
    if (nd == 0) { /* torch: the norm of a 0-dim difference is its absolute value */
        r = ct_norm(diff, p, NULL, 0, keepdim);
    } else {
        int64_t d = nd - 1;
        r = ct_norm(diff, p, &d, 1, keepdim);
    }
    FN_END(r);
}
