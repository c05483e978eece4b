/* lbfgs.c -- torch.optim.LBFGS: limited-memory BFGS with an optional
 * strong-Wolfe line search, following torch/optim/lbfgs.py step by step.
 * The directions, history and line search run in float64 on the
 * flattened parameters; parameters are updated with public in-place ops. */
#include <math.h>

#include "optim_impl.h"

typedef struct lbfgs {
    int64_t N;              /* total numel */
    int64_t func_evals, n_iter;
    int hist;               /* allocated history */
    int nold;
    double **old_dirs, **old_stps, *ro, *al;
    double *d, *prev_flat_grad;
    bool has_d, has_prev;
    double t, H_diag, prev_loss;
} lbfgs;

static void lbfgs_free(void *p) {
    lbfgs *s = p;
    if (!s) return;
    for (int i = 0; i < s->hist; i++) {
        free(s->old_dirs ? s->old_dirs[i] : NULL);
        free(s->old_stps ? s->old_stps[i] : NULL);
    }
    free(s->old_dirs);
    free(s->old_stps);
    free(s->ro);
    free(s->al);
    free(s->d);
    free(s->prev_flat_grad);
    free(s);
}

static ct_status lbfgs_group_step(ct_optimizer *o, int g) {
    (void)g;
    return ct__error_status(CT_ERR_ARG, "LBFGS: step needs a closure (ct_optim_step_closure)");
}

static const opt_kind k_lbfgs = {
    "LBFGS", 7,
    {"lr", "max_iter", "max_eval", "tolerance_grad", "tolerance_change", "history_size",
     "line_search_fn"},
    lbfgs_group_step};

ct_optimizer *ct_lbfgs_new(ct_tensor *const *params, int n, double lr, int64_t max_iter,
                           int64_t max_eval, double tolerance_grad, double tolerance_change,
                           int64_t history_size, const char *line_search_fn) {
    if (!(lr >= 0)) return ct__error(CT_ERR_ARG, "LBFGS: invalid learning rate: %g", lr);
    if (max_iter <= 0) return ct__error(CT_ERR_ARG, "LBFGS: max_iter must be positive (got %lld)",
                                        (long long)max_iter);
    if (history_size <= 0 || history_size > 100000)
        return ct__error(CT_ERR_ARG, "LBFGS: invalid history_size %lld", (long long)history_size);
    bool wolfe = false;
    if (line_search_fn) {
        if (strcmp(line_search_fn, "strong_wolfe") != 0)
            return ct__error(CT_ERR_ARG, "LBFGS: only 'strong_wolfe' is supported (got '%s')",
                             line_search_fn);
        wolfe = true;
    }
    if (max_eval <= 0) max_eval = max_iter * 5 / 4;
    double def[] = {lr, (double)max_iter, (double)max_eval, tolerance_grad, tolerance_change,
                    (double)history_size, wolfe};
    ct_optimizer *o = ct__optim_new(&k_lbfgs, def, params, n);
    if (!o) return NULL;
    lbfgs *s = calloc(1, sizeof *s);
    if (!s) { ct_optim_free(o); return ct__error(CT_ERR_OOM, "LBFGS: out of memory"); }
    o->extra = s;
    o->extra_free = lbfgs_free;
    for (int i = 0; i < o->np; i++) s->N += ct_numel(o->ps[i].p);
    s->hist = (int)history_size;
    s->old_dirs = calloc((size_t)s->hist, sizeof(double *));
    s->old_stps = calloc((size_t)s->hist, sizeof(double *));
    s->ro = calloc((size_t)s->hist, sizeof(double));
    s->al = calloc((size_t)s->hist, sizeof(double));
    size_t nb = sizeof(double) * (size_t)(s->N ? s->N : 1);
    s->d = malloc(nb);
    s->prev_flat_grad = malloc(nb);
    if (!s->old_dirs || !s->old_stps || !s->ro || !s->al || !s->d || !s->prev_flat_grad) {
        ct_optim_free(o);
        return ct__error(CT_ERR_OOM, "LBFGS: out of memory");
    }
    s->H_diag = 1;
    return o;
}

/* ---- helpers over the flattened parameters ---------------------------------- */
static ct_status gather_flat_grad(ct_optimizer *o, double *flat) {
    int64_t off = 0;
    for (int i = 0; i < o->np; i++) {
        ct_tensor *p = o->ps[i].p, *g = ct_grad(p);
        int64_t n = ct_numel(p);
        if (!g) {
            memset(flat + off, 0, sizeof(double) * (size_t)n);
        } else {
            if (ct_numel(g) != n)
                return ct__error_status(CT_ERR_SHAPE, "LBFGS: gradient %s of parameter %d does not "
                                        "match its shape %s", ct__tshape(g), i, ct__tshape(p));
            ct_tensor *c = ct__contig_as(g, CT_F64);
            if (!c) return ct_last_error_code();
            memcpy(flat + off, ct_data_ptr(c), sizeof(double) * (size_t)n);
            ct_release(c);
        }
        off += n;
    }
    return CT_OK;
}

static ct_status add_grad(ct_optimizer *o, double step, const double *upd) {
    int64_t off = 0;
    ct_scope sc = ct_scope_begin();
    ct_status st = CT_OK;
    for (int i = 0; i < o->np && st == CT_OK; i++) {
        ct_tensor *p = o->ps[i].p;
        ct_tensor *u = ct_from_array(upd + off, p->sizes, p->ndim, CT_F64);
        if (!ct_add_scaled_(p, u, step)) st = ct_last_error_code();
        off += ct_numel(p);
    }
    ct_scope_end(sc);
    return st;
}

static ct_status eval_closure(ct_optimizer *o, ct_optim_closure fn, void *user, double *loss,
                              double *flat) {
    ct_clear_error();
    bool prev = ct_set_grad_enabled(true);
    double l = fn(user);
    ct_set_grad_enabled(prev);
    if (isnan(l) && ct_last_error_code()) return ct_last_error_code();
    *loss = l;
    return gather_flat_grad(o, flat);
}

static double dot(const double *a, const double *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static double absmax(const double *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = fabs(a[i]);
        if (v > m || v != v) m = v;
    }
    return m;
}

static double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                                const double *bounds) {
    double lo, hi;
    if (bounds) { lo = bounds[0]; hi = bounds[1]; }
    else if (x1 <= x2) { lo = x1; hi = x2; }
    else { lo = x2; hi = x1; }
    double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
    double d2_square = d1 * d1 - g1 * g2;
    if (d2_square >= 0) {
        double d2 = sqrt(d2_square), min_pos;
        if (x1 <= x2) min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2));
        else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
        return fmin(fmax(min_pos, lo), hi);
    }
    return (lo + hi) / 2.;
}

typedef struct ls_ctx {
    ct_optimizer *o;
    ct_optim_closure fn;
    void *user;
    ct_tensor **x;     /* saved parameters */
} ls_ctx;

/* _directional_evaluate: loss and flat grad at x + t d, parameters restored */
static ct_status obj_func(ls_ctx *c, double t, const double *d, double *f, double *g) {
    ct_status st = add_grad(c->o, t, d);
    if (!st) st = eval_closure(c->o, c->fn, c->user, f, g);
    for (int i = 0; i < c->o->np; i++)
        if (!ct_copy_(c->o->ps[i].p, c->x[i]) && !st) st = ct_last_error_code();
    return st;
}

/* _strong_wolfe; on return g holds the chosen gradient */
static ct_status strong_wolfe(ls_ctx *c, double *t_io, const double *d, double f, double *g,
                              double gtd, double tolerance_change, double *f_out,
                              int64_t *evals, double *work) {
    const double c1 = 1e-4, c2 = 0.9;
    const int max_ls = 25;
    int64_t N = ((lbfgs *)c->o->extra)->N;
    double *g_new = work, *g_prev = work + N, *bg0 = work + 2 * N, *bg1 = work + 3 * N,
           *g0 = work + 4 * N;
    double *bg[2] = {bg0, bg1};
    size_t nb = sizeof(double) * (size_t)N;
    double t = *t_io;
    double d_norm = absmax(d, N);
    memcpy(g0, g, nb);
    double f_new;
    ct_status st = obj_func(c, t, d, &f_new, g_new);
    if (st) return st;
    int64_t ls_func_evals = 1;
    double gtd_new = dot(g_new, d, N);
    double t_prev = 0, f_prev = f, gtd_prev = gtd;
    memcpy(g_prev, g0, nb);
    bool done = false;
    int ls_iter = 0, nbr = 0;
    double br[2] = {0, 0}, br_f[2] = {0, 0}, br_gtd[2] = {0, 0};
    while (ls_iter < max_ls) {
        if (f_new > (f + c1 * t * gtd) || (ls_iter > 1 && f_new >= f_prev)) {
            nbr = 2;
            br[0] = t_prev; br[1] = t; br_f[0] = f_prev; br_f[1] = f_new;
            memcpy(bg[0], g_prev, nb); memcpy(bg[1], g_new, nb);
            br_gtd[0] = gtd_prev; br_gtd[1] = gtd_new;
            break;
        }
        if (fabs(gtd_new) <= -c2 * gtd) {
            nbr = 1;
            br[0] = t; br_f[0] = f_new;
            memcpy(bg[0], g_new, nb);
            done = true;
            break;
        }
        if (gtd_new >= 0) {
            nbr = 2;
            br[0] = t_prev; br[1] = t; br_f[0] = f_prev; br_f[1] = f_new;
            memcpy(bg[0], g_prev, nb); memcpy(bg[1], g_new, nb);
            br_gtd[0] = gtd_prev; br_gtd[1] = gtd_new;
            break;
        }
        double bounds[2] = {t + 0.01 * (t - t_prev), t * 10};
        double tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds);
        t_prev = tmp;
        f_prev = f_new;
        memcpy(g_prev, g_new, nb);
        gtd_prev = gtd_new;
        if ((st = obj_func(c, t, d, &f_new, g_new))) return st;
        ls_func_evals++;
        gtd_new = dot(g_new, d, N);
        ls_iter++;
    }
    if (ls_iter == max_ls) {
        nbr = 2;
        br[0] = 0; br[1] = t; br_f[0] = f; br_f[1] = f_new;
        memcpy(bg[0], g0, nb); memcpy(bg[1], g_new, nb);
    }
    bool insuf_progress = false;
    int low = (br_f[0] <= br_f[nbr - 1]) ? 0 : 1, high = 1 - low;
    if (nbr == 1) { low = 0; high = 1; }
    while (!done && ls_iter < max_ls) {
        if (fabs(br[1] - br[0]) * d_norm < tolerance_change) break;
        t = cubic_interpolate(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1], NULL);
        double bmax = fmax(br[0], br[1]), bmin = fmin(br[0], br[1]);
        double eps = 0.1 * (bmax - bmin);
        if (fmin(bmax - t, t - bmin) < eps) {
            if (insuf_progress || t >= bmax || t <= bmin) {
                if (fabs(t - bmax) < fabs(t - bmin)) t = bmax - eps;
                else t = bmin + eps;
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        if ((st = obj_func(c, t, d, &f_new, g_new))) return st;
        ls_func_evals++;
        gtd_new = dot(g_new, d, N);
        ls_iter++;
        if (f_new > (f + c1 * t * gtd) || f_new >= br_f[low]) {
            br[high] = t; br_f[high] = f_new;
            memcpy(bg[high], g_new, nb);
            br_gtd[high] = gtd_new;
            low = (br_f[0] <= br_f[1]) ? 0 : 1;
            high = 1 - low;
        } else {
            if (fabs(gtd_new) <= -c2 * gtd) {
                done = true;
            } else if (gtd_new * (br[high] - br[low]) >= 0) {
                br[high] = br[low]; br_f[high] = br_f[low];
                memcpy(bg[high], bg[low], nb);
                br_gtd[high] = br_gtd[low];
            }
            br[low] = t; br_f[low] = f_new;
            memcpy(bg[low], g_new, nb);
            br_gtd[low] = gtd_new;
        }
    }
    *t_io = br[low];
    *f_out = br_f[low];
    memcpy(g, bg[low], nb);
    *evals = ls_func_evals;
    return CT_OK;
}

ct_status ct__lbfgs_step(ct_optimizer *o, ct_optim_closure fn, void *user, double *loss_out);

ct_status ct__lbfgs_step(ct_optimizer *o, ct_optim_closure fn, void *user, double *loss_out) {
    lbfgs *s = o->extra;
    const double *v = o->g[0].v;
    double lr = v[0], tolerance_grad = v[3], tolerance_change = v[4];
    int64_t max_iter = (int64_t)v[1], max_eval = (int64_t)v[2];
    int history_size = (int)v[5] < s->hist ? (int)v[5] : s->hist;
    if (history_size < 1) history_size = 1;
    bool wolfe = v[6] != 0;
    int64_t N = s->N;
    size_t nb = sizeof(double) * (size_t)(N ? N : 1);
    double *flat = malloc(nb), *q = malloc(nb), *work = malloc(nb * 5);
    ct_tensor **x = calloc((size_t)o->np, sizeof *x);
    bool prev_gm = ct_set_grad_enabled(false);
    ct_status st = CT_OK;
    if (!flat || !q || !work || !x) { st = ct__error_status(CT_ERR_OOM, "LBFGS: out of memory"); goto done; }

    double loss;
    if ((st = eval_closure(o, fn, user, &loss, flat))) goto done;
    if (loss_out) *loss_out = loss;
    int64_t current_evals = 1;
    s->func_evals++;
    if (absmax(flat, N) <= tolerance_grad) goto done;

    double *d = s->d, t = s->t;
    int64_t n_iter = 0;
    while (n_iter < max_iter) {
        n_iter++;
        s->n_iter++;
        if (s->n_iter == 1) {
            for (int64_t i = 0; i < N; i++) d[i] = -flat[i];
            for (int i = 0; i < s->nold; i++) { free(s->old_dirs[i]); free(s->old_stps[i]); s->old_dirs[i] = s->old_stps[i] = NULL; }
            s->nold = 0;
            s->H_diag = 1;
        } else {
            double *y = malloc(nb), *sv = malloc(nb);
            if (!y || !sv) { free(y); free(sv); st = ct__error_status(CT_ERR_OOM, "LBFGS: out of memory"); goto done; }
            for (int64_t i = 0; i < N; i++) { y[i] = flat[i] - s->prev_flat_grad[i]; sv[i] = d[i] * t; }
            double ys = dot(y, sv, N);
            if (ys > 1e-10) {
                if (s->nold >= history_size) {
                    int drop = s->nold - history_size + 1;
                    for (int k = 0; k < drop; k++) { free(s->old_dirs[k]); free(s->old_stps[k]); }
                    memmove(s->old_dirs, s->old_dirs + drop, sizeof(double *) * (size_t)(s->nold - drop));
                    memmove(s->old_stps, s->old_stps + drop, sizeof(double *) * (size_t)(s->nold - drop));
                    memmove(s->ro, s->ro + drop, sizeof(double) * (size_t)(s->nold - drop));
                    s->nold -= drop;
                }
                s->old_dirs[s->nold] = y;
                s->old_stps[s->nold] = sv;
                s->ro[s->nold] = 1. / ys;
                s->nold++;
                s->H_diag = ys / dot(y, y, N);
            } else {
                free(y);
                free(sv);
            }
            int num_old = s->nold;
            for (int64_t i = 0; i < N; i++) q[i] = -flat[i];
            for (int k = num_old - 1; k >= 0; k--) {
                s->al[k] = dot(s->old_stps[k], q, N) * s->ro[k];
                double a = -s->al[k];
                for (int64_t i = 0; i < N; i++) q[i] += a * s->old_dirs[k][i];
            }
            for (int64_t i = 0; i < N; i++) d[i] = q[i] * s->H_diag;
            for (int k = 0; k < num_old; k++) {
                double be_i = dot(s->old_dirs[k], d, N) * s->ro[k];
                double a = s->al[k] - be_i;
                for (int64_t i = 0; i < N; i++) d[i] += a * s->old_stps[k][i];
            }
        }
        s->has_d = true;
        memcpy(s->prev_flat_grad, flat, nb);
        s->has_prev = true;
        s->prev_loss = loss;
        if (s->n_iter == 1) {
            double asum = 0;
            for (int64_t i = 0; i < N; i++) asum += fabs(flat[i]);
            t = fmin(1., 1. / asum) * lr;
        } else {
            t = lr;
        }
        double gtd = dot(flat, d, N);
        if (gtd > -tolerance_change) break;
        int64_t ls_func_evals = 0;
        bool opt_cond = false;
        if (wolfe) {
            ct_scope sc = ct_scope_begin();
            for (int i = 0; i < o->np; i++) x[i] = ct_clone(o->ps[i].p);
            ls_ctx c = {o, fn, user, x};
            bool ok = true;
            for (int i = 0; i < o->np; i++) ok = ok && x[i];
            if (!ok) st = ct_last_error_code();
            else st = strong_wolfe(&c, &t, d, loss, flat, gtd, tolerance_change, &loss,
                                   &ls_func_evals, work);
            ct_scope_end(sc);
            if (st) goto done;
            if ((st = add_grad(o, t, d))) goto done;
            opt_cond = absmax(flat, N) <= tolerance_grad;
        } else {
            if ((st = add_grad(o, t, d))) goto done;
            if (n_iter != max_iter) {
                if ((st = eval_closure(o, fn, user, &loss, flat))) goto done;
                opt_cond = absmax(flat, N) <= tolerance_grad;
                ls_func_evals = 1;
            }
        }
        current_evals += ls_func_evals;
        s->func_evals += ls_func_evals;
        if (n_iter == max_iter) break;
        if (current_evals >= max_eval) break;
        if (opt_cond) break;
        if (absmax(d, N) * fabs(t) <= tolerance_change) break;
        if (fabs(loss - s->prev_loss) < tolerance_change) break;
    }
    s->t = t;
done:
    ct_set_grad_enabled(prev_gm);
    free(flat);
    free(q);
    free(work);
    free(x);
    return st;
}
