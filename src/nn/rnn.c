/* rnn.c -- nn.RNN (tanh / relu), nn.LSTM and nn.GRU: multi-layer,
 * bidirectional, batch_first, optional bias, dropout between layers,
 * optional initial states.
 *
 * Parameters follow PyTorch's layout exactly, per layer k and direction
 * (suffix "_reverse" for the backward direction), gates stacked on dim 0:
 *     weight_ih_l{k} [G*H, in_k]   weight_hh_l{k} [G*H, H]
 *     bias_ih_l{k}   [G*H]         bias_hh_l{k}   [G*H]
 * with G = 1 (RNN), 4 (LSTM: i, f, g, o), 3 (GRU: r, z, n); in_0 is
 * input_size, later layers read D*H (D = 2 when bidirectional).
 *
 * One step, with xw = x_t W_ih^T + b_ih precomputed for every t by one
 * matmul and hw = h W_hh^T + b_hh:
 *     RNN   h' = act(xw + hw)
 *     LSTM  i, f, g, o = chunks of xw + hw;  c' = s(f) c + s(i) tanh(g);  h' = s(o) tanh(c')
 *     GRU   r = s(xw_r + hw_r);  z = s(xw_z + hw_z);  n = tanh(xw_n + r * hw_n);
 *           h' = n + z (h - n)            (= (1 - z) n + z h)
 * All public ops: autograd gives the backward through time. */
#include "norm_rnn_impl.h"

enum { K_TANH = 0, K_RELU, K_LSTM, K_GRU };

typedef struct {
    ct_module base;
    int kind;
    int64_t input_size, hidden_size, num_layers;
    bool bias, batch_first, bidirectional;
    double dropout;
} rnn_mod;

static int gates_of(int kind) { return kind == K_LSTM ? 4 : kind == K_GRU ? 3 : 1; }

static char *rnn_repr(ct_module *m) {
    rnn_mod *r = (rnn_mod *)m;
    char *s = malloc(256), f[64];
    if (!s) return NULL;
    size_t o = (size_t)snprintf(s, 256, "%lld, %lld", (long long)r->input_size, (long long)r->hidden_size);
    if (r->num_layers != 1) o += (size_t)snprintf(s + o, 256 - o, ", num_layers=%lld", (long long)r->num_layers);
    if (!r->bias) o += (size_t)snprintf(s + o, 256 - o, ", bias=False");
    if (r->batch_first) o += (size_t)snprintf(s + o, 256 - o, ", batch_first=True");
    if (r->dropout != 0) {
        nr_pyfloat(f, sizeof f, r->dropout);
        o += (size_t)snprintf(s + o, 256 - o, ", dropout=%s", f);
    }
    if (r->bidirectional) snprintf(s + o, 256 - o, ", bidirectional=True");
    return s;
}

/* One direction of one layer over xs [T, B, in]; writes out [T, B, H], h_T (and c_T). */
static ct_status run_direction(rnn_mod *r, int slot0, bool reverse, ct_tensor *xs, ct_tensor *h, ct_tensor *c,
                               ct_tensor **out, ct_tensor **h_out, ct_tensor **c_out) {
    ct_module *m = &r->base;
    ct_tensor *w_ih = ct_module_param(m, slot0), *w_hh = ct_module_param(m, slot0 + 1);
    ct_tensor *b_ih = r->bias ? ct_module_param(m, slot0 + 2) : NULL;
    ct_tensor *b_hh = r->bias ? ct_module_param(m, slot0 + 3) : NULL;
    if (!w_ih || !w_hh || (r->bias && (!b_ih || !b_hh)))
        return ct__error_status(CT_ERR_NULL, "%s: a weight is missing", m->cls->name);
    int64_t T = ct_size(xs, 0);
    ct_tensor *xw = ct_linear(xs, w_ih, b_ih);
    if (!xw) return ct_last_error_code();
    ct_tensor **steps = malloc(sizeof(ct_tensor *) * (size_t)(T ? T : 1));
    if (!steps) return ct__error_status(CT_ERR_OOM, "%s: out of memory", m->cls->name);
    for (int64_t k = 0; k < T && h; k++) {
        int64_t t = reverse ? T - 1 - k : k;
        ct_tensor *xt = ct_select(xw, 0, t);
        ct_tensor *hw = ct_linear(h, w_hh, b_hh);
        if (r->kind == K_TANH) {
            h = ct_tanh(ct_add(xt, hw));
        } else if (r->kind == K_RELU) {
            h = ct_relu(ct_add(xt, hw));
        } else if (r->kind == K_LSTM) {
            ct_tensor *g[4] = {0};
            ct_tensor *gates = ct_add(xt, hw);
            if (!gates || ct_chunk(gates, 4, 1, g, 4) != 4) { h = NULL; break; }
            c = ct_add(ct_mul(ct_sigmoid(g[1]), c), ct_mul(ct_sigmoid(g[0]), ct_tanh(g[2])));
            h = ct_mul(ct_sigmoid(g[3]), ct_tanh(c));
        } else {
            ct_tensor *gx[3] = {0}, *gh[3] = {0};
            if (!hw || ct_chunk(xt, 3, 1, gx, 3) != 3 || ct_chunk(hw, 3, 1, gh, 3) != 3) { h = NULL; break; }
            ct_tensor *rg = ct_sigmoid(ct_add(gx[0], gh[0]));
            ct_tensor *zg = ct_sigmoid(ct_add(gx[1], gh[1]));
            ct_tensor *ng = ct_tanh(ct_add(gx[2], ct_mul(rg, gh[2])));
            h = ct_add(ng, ct_mul(zg, ct_sub(h, ng)));
        }
        steps[t] = h;
    }
    if (!h) { free(steps); return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME; }
    if (T > 0) {
        *out = ct_stack(steps, (int)T, 0);
    } else {
        int64_t sh[3] = {0, ct_size(h, 0), ct_size(h, 1)};
        *out = ct_zeros_on(sh, 3, ct_get_dtype(h), ct_get_device(h));
    }
    free(steps);
    *h_out = h;
    if (c_out) *c_out = c;
    return *out ? CT_OK : ct_last_error_code();
}

static ct_status check_state(rnn_mod *r, const char *what, ct_tensor *s, const int64_t *exp) {
    if (ct_ndim(s) != 3 || memcmp(ct_sizes(s), exp, sizeof(int64_t) * 3)) {
        char buf[128];
        return ct__error_status(CT_ERR_SHAPE, "%s: Expected %s size %s, got %s", r->base.cls->name, what,
                                ct__shape_str(exp, 3, buf, sizeof buf), ct__tshape(s));
    }
    return CT_OK;
}

static ct_status rnn_forward_multi(ct_module *m, ct_tensor *const *in, int n, ct_tensor **outs, int nout) {
    rnn_mod *r = (rnn_mod *)m;
    const char *name = m->cls->name;
    bool lstm = r->kind == K_LSTM;
    int maxout = lstm ? 3 : 2;
    if (nout < 1 || nout > maxout)
        return ct__error_status(CT_ERR_ARG, "%s: has 1 to %d outputs (output, h_n%s), asked for %d", name, maxout,
                                lstm ? ", c_n" : "", nout);
    if (!(n == 1 || (lstm ? n == 3 : n == 2)))
        return ct__error_status(CT_ERR_ARG, "%s: expects inputs (input)%s, got %d inputs", name,
                                lstm ? " or (input, h0, c0)" : " or (input, h0)", n);
    ct_tensor *x = in[0];
    int nd = ct_ndim(x);
    if (nd != 2 && nd != 3)
        return ct__error_status(CT_ERR_SHAPE, "%s: Expected input to be 2-D or 3-D but received %d-D tensor", name, nd);
    if (ct_size(x, -1) != r->input_size)
        return ct__error_status(CT_ERR_SHAPE, "%s: input.size(-1) must be equal to input_size. Expected %lld, got %lld",
                                name, (long long)r->input_size, (long long)ct_size(x, -1));
    if (!ct_dtype_is_floating(ct_get_dtype(x)))
        return ct__error_status(CT_ERR_DTYPE, "%s: expected a floating point input, got %s", name,
                                ct_dtype_name(ct_get_dtype(x)));
    bool batched = nd == 3;
    int D = r->bidirectional ? 2 : 1;
    int64_t L = r->num_layers, H = r->hidden_size;
    ct_status st = CT_OK;
    ct_scope s = ct_scope_begin();
    ct_tensor *xs = batched ? (r->batch_first ? ct_transpose(x, 0, 1) : x) : ct_unsqueeze(x, 1);
    int64_t B = ct_size(xs, 1);
    const int64_t hshape[3] = {L * D, B, H};
    ct_tensor *h0 = NULL, *c0 = NULL;
    for (int k = 1; k < n; k++) {
        ct_tensor *sk = in[k];
        if (!batched) {
            if (ct_ndim(sk) != 2) {
                st = ct__error_status(CT_ERR_SHAPE, "%s: For unbatched 2-D input, hx should also be 2-D but got "
                                      "%d-D tensor", name, ct_ndim(sk));
                goto out;
            }
            sk = ct_unsqueeze(sk, 1);
        }
        if ((st = check_state(r, k == 1 ? "hidden" : "cell state", sk, hshape))) goto out;
        if (k == 1) h0 = sk;
        else c0 = sk;
    }
    ct_tensor **hn = calloc((size_t)(L * D), sizeof(ct_tensor *));
    ct_tensor **cn = calloc((size_t)(L * D), sizeof(ct_tensor *));
    if (!hn || !cn) {
        free(hn);
        free(cn);
        st = ct__error_status(CT_ERR_OOM, "%s: out of memory", name);
        goto out;
    }
    ct_tensor *layer_in = xs;
    int per = r->bias ? 4 : 2;
    for (int64_t l = 0; l < L && !st; l++) {
        ct_tensor *dir_out[2] = {0};
        for (int d = 0; d < D && !st; d++) {
            int64_t idx = l * D + d;
            ct_device xd = ct_get_device(x);
            ct_tensor *h = h0 ? ct_select(h0, 0, idx) : ct_zeros_on(CT_SHAPE(B, H), ct_get_dtype(x), xd);
            ct_tensor *c = lstm ? (c0 ? ct_select(c0, 0, idx) : ct_zeros_on(CT_SHAPE(B, H), ct_get_dtype(x), xd)) : NULL;
            st = run_direction(r, (int)(idx * per), d == 1, layer_in, h, c, &dir_out[d], &hn[idx],
                               lstm ? &cn[idx] : NULL);
        }
        if (st) break;
        ct_tensor *lo = D == 2 ? ct_cat(dir_out, 2, 2) : dir_out[0];
        if (lo && r->dropout > 0 && l + 1 < L && ct_module_is_training(m)) lo = ct_dropout(lo, r->dropout, true);
        if (!lo) st = ct_last_error_code();
        layer_in = lo;
    }
    if (!st) {
        ct_tensor *res[3] = {layer_in, ct_stack(hn, (int)(L * D), 0), lstm ? ct_stack(cn, (int)(L * D), 0) : NULL};
        if (batched && r->batch_first) res[0] = ct_transpose(res[0], 0, 1);
        if (!batched)
            for (int k = 0; k < maxout; k++) res[k] = ct_squeeze_dim(res[k], 1);
        for (int k = 0; k < nout && !st; k++)
            if (!res[k]) st = ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
        for (int k = 0; k < nout && !st; k++) outs[k] = ct_keep(res[k]);
    }
    free(hn);
    free(cn);
out:
    ct_scope_end(s);
    return st;
}

static const ct_module_class k_rnn = {"RNN", sizeof(rnn_mod), NULL, rnn_repr, NULL, rnn_forward_multi};
static const ct_module_class k_lstm = {"LSTM", sizeof(rnn_mod), NULL, rnn_repr, NULL, rnn_forward_multi};
static const ct_module_class k_gru = {"GRU", sizeof(rnn_mod), NULL, rnn_repr, NULL, rnn_forward_multi};

static ct_module *rnn_new(const ct_module_class *cls, int kind, int64_t input_size, int64_t hidden_size,
                          int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional) {
    if (input_size <= 0 || hidden_size <= 0)
        return ct__error(CT_ERR_ARG, "%s: input_size and hidden_size must be positive, got %lld and %lld", cls->name,
                         (long long)input_size, (long long)hidden_size);
    if (num_layers <= 0 || num_layers > 1024)
        return ct__error(CT_ERR_ARG, "%s: num_layers must be between 1 and 1024, got %lld", cls->name,
                         (long long)num_layers);
    if (!(dropout >= 0 && dropout <= 1))
        return ct__error(CT_ERR_ARG, "%s: dropout should be a number in range [0, 1] representing the probability "
                         "of an element being zeroed, got %g", cls->name, dropout);
    rnn_mod *r = (rnn_mod *)ct_module_new(cls);
    if (!r) return NULL;
    r->kind = kind;
    r->input_size = input_size;
    r->hidden_size = hidden_size;
    r->num_layers = num_layers;
    r->bias = bias;
    r->batch_first = batch_first;
    r->dropout = dropout;
    r->bidirectional = bidirectional;
    int64_t G = gates_of(kind), H = hidden_size;
    double k = 1.0 / sqrt((double)H);
    int D = bidirectional ? 2 : 1;
    for (int64_t l = 0; l < num_layers; l++)
        for (int d = 0; d < D; d++) {
            const char *sfx = d ? "_reverse" : "";
            int64_t in = l == 0 ? input_size : D * H;
            char nm[64];
            int ok = 1;
            snprintf(nm, sizeof nm, "weight_ih_l%lld%s", (long long)l, sfx);
            ok &= nr_param_uniform(&r->base, nm, CT_SHAPE(G * H, in), -k, k) >= 0;
            snprintf(nm, sizeof nm, "weight_hh_l%lld%s", (long long)l, sfx);
            ok &= ok && nr_param_uniform(&r->base, nm, CT_SHAPE(G * H, H), -k, k) >= 0;
            if (bias) {
                snprintf(nm, sizeof nm, "bias_ih_l%lld%s", (long long)l, sfx);
                ok &= ok && nr_param_uniform(&r->base, nm, CT_SHAPE(G * H), -k, k) >= 0;
                snprintf(nm, sizeof nm, "bias_hh_l%lld%s", (long long)l, sfx);
                ok &= ok && nr_param_uniform(&r->base, nm, CT_SHAPE(G * H), -k, k) >= 0;
            }
            if (!ok) { ct_module_release(&r->base); return NULL; }
        }
    return &r->base;
}

ct_module *ct_rnn_new(int64_t input_size, int64_t hidden_size, int64_t num_layers, ct_rnn_nonlinearity nl,
                      bool bias, bool batch_first, double dropout, bool bidirectional) {
    if (nl != CT_RNN_TANH && nl != CT_RNN_RELU)
        return ct__error(CT_ERR_ARG, "RNN: Unknown nonlinearity %d (expected CT_RNN_TANH or CT_RNN_RELU)", (int)nl);
    return rnn_new(&k_rnn, nl == CT_RNN_RELU ? K_RELU : K_TANH, input_size, hidden_size, num_layers, bias,
                   batch_first, dropout, bidirectional);
}
ct_module *ct_lstm_new(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
                       double dropout, bool bidirectional) {
    return rnn_new(&k_lstm, K_LSTM, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional);
}
ct_module *ct_gru_new(int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias, bool batch_first,
                      double dropout, bool bidirectional) {
    return rnn_new(&k_gru, K_GRU, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional);
}
