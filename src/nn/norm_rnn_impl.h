/* norm_rnn_impl.h -- private helpers shared by norm.c, embedding.c,
 * dropout.c and rnn.c: Python-style number formatting for extra_repr, and
 * parameter creation in a private scope. */
#ifndef CT_NN_NORM_RNN_IMPL_H
#define CT_NN_NORM_RNN_IMPL_H

#include <math.h>
#include <stdio.h>

#include "../ops/op_table.h"
#include "ctorch/autograd.h"
#include "ctorch/nn.h"

/* repr(float) of Python: shortest round-trip digits, "1e-05", "0.1", "1.0". */
static inline void nr_pyfloat(char *buf, size_t n, double v) {
    if (isnan(v)) { snprintf(buf, n, "nan"); return; }
    if (isinf(v)) { snprintf(buf, n, v > 0 ? "inf" : "-inf"); return; }
    if (v == 0) { snprintf(buf, n, signbit(v) ? "-0.0" : "0.0"); return; }
    char tmp[64];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v) break;
    }
    int e = atoi(strchr(tmp, 'e') + 1);
    if (e >= -4 && e < 16) {
        int dec = p - 1 - e;
        if (dec < 1) dec = 1;
        snprintf(buf, n, "%.*f", dec, v);
    } else {
        char mant[32];
        snprintf(mant, sizeof mant, "%.*e", p - 1, v);
        *strchr(mant, 'e') = 0;
        snprintf(buf, n, "%se%c%02d", mant, e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

/* A Python tuple "(4,)" / "(4, 5)" of sizes. */
static inline void nr_pytuple(char *buf, size_t n, const int64_t *v, int k) {
    size_t o = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < k && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)v[i]);
    if (o < n) snprintf(buf + o, n - o, k == 1 ? ",)" : ")");
}

static inline char *nr_strdup(const char *s) {
    char *r = malloc(strlen(s) + 1);
    if (r) strcpy(r, s);
    return r;
}

/* Registers a new parameter filled with `fill` (NAN: left for the caller to
 * initialize with `init`, see below).  Returns the slot or -1. */
static inline int nr_param_full(ct_module *m, const char *name, const int64_t *shape, int nd,
                                double fill) {
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_full(shape, nd, fill, ct_get_default_dtype());
    int slot = t ? ct_module_register_parameter(m, name, t) : -1;
    ct_scope_end(s);
    return slot;
}

static inline int nr_param_uniform(ct_module *m, const char *name, const int64_t *shape, int nd,
                                   double lo, double hi) {
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_empty(shape, nd, ct_get_default_dtype());
    if (t) {
        bool prev = ct_set_grad_enabled(false);
        t = ct_uniform_(t, lo, hi);
        ct_set_grad_enabled(prev);
    }
    int slot = t ? ct_module_register_parameter(m, name, t) : -1;
    ct_scope_end(s);
    return slot;
}

static inline int nr_buffer_full(ct_module *m, const char *name, const int64_t *shape, int nd,
                                 double fill, ct_dtype dt) {
    ct_scope s = ct_scope_begin();
    ct_tensor *t = ct_full(shape, nd, fill, dt);
    int slot = t ? ct_module_register_buffer(m, name, t, true) : -1;
    ct_scope_end(s);
    return slot;
}

/* [1, C, 1, ...] view of a per-channel vector for an nd-D input. */
static inline ct_tensor *nr_chan_view(ct_tensor *v, int64_t C, int nd) {
    int64_t sh[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) sh[i] = 1;
    sh[1] = C;
    return ct_reshape(v, sh, nd);
}

/* Ends scope s keeping r (may be NULL). */
static inline ct_tensor *nr_end(ct_scope s, ct_tensor *r) {
    if (r) ct_keep(r);
    ct_scope_end(s);
    return r;
}

#endif
