/* profiler.c -- the op profiler (include/ctorch/profiler.h).  It lives in
 * the op layer: it wraps ct__dispatch and names ops and their parameters.
 *
 * Recording: ct__dispatch calls ct__prof_dispatch while ct__prof_on is set.
 * Each thread owns a buffer (registered once in a global list, found again
 * through a _Thread_local pointer) with a stack of open frames (ops and
 * user ranges) and an array of finished events.  A frame knows the time
 * its children took, so closing it gives self = total - children and adds
 * its total to its parent.  Only the owner thread touches its stack; the
 * events array is shared with ct_profiler_stop() (which steals it) under
 * the buffer's mutex, uncontended except at stop.  Sessions are numbered:
 * a frame opened in an older session is discarded when it closes, and a
 * buffer still holding an older session's events drops them first.
 * Buffers of exited threads (a pthread key destructor marks them) are
 * merged and freed at the next stop, start or clear. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profiler_impl.h"

#define DEFAULT_MAX_EVENTS 1000000

typedef struct prof_event {
    const char *name; /* op name (static) or user range name (owned) */
    char *shapes;     /* JSON array of input shapes, or NULL */
    char *dtypes;     /* JSON array of input dtypes, or NULL */
    int64_t start_ns, end_ns, self_ns;
    int64_t flops, bytes;
    int tid;
    int device;       /* -1: user range */
    int owns_name;
} prof_event;

typedef struct prof_frame {
    prof_event ev;    /* start_ns and the description; end/self at close */
    int64_t child_ns;
    uint64_t gen;
} prof_frame;

typedef struct prof_buf {
    pthread_mutex_t mu;      /* guards ev/n/cap/gen/dead */
    prof_event *ev;
    int64_t n, cap;
    uint64_t gen;            /* session the events belong to */
    prof_frame *st;          /* owner thread only */
    int depth, stcap;
    int tid;
    int dead;                /* the thread exited */
    struct prof_buf *next;
} prof_buf;

atomic_int ct__prof_on;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* sessions, g_bufs, results */
static prof_buf *g_bufs;
static atomic_ullong g_gen;
static atomic_llong g_count, g_dropped;
static ct_profiler_opts g_opts;
static int64_t g_t0;
static _Thread_local prof_buf *t_buf;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

/* results of the last stopped session */
static prof_event *g_res;
static int64_t g_nres, g_res_dropped, g_res_max, g_res_t0;
static int g_have_res, g_res_flops;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void event_free(prof_event *e) {
    free(e->shapes);
    free(e->dtypes);
    if (e->owns_name) free((char *)e->name);
    e->shapes = e->dtypes = NULL;
    e->owns_name = 0;
}

/* ---- thread buffers ------------------------------------------------------ */
static void buf_thread_exit(void *p) {
    prof_buf *b = p;
    pthread_mutex_lock(&b->mu);
    b->dead = 1;
    pthread_mutex_unlock(&b->mu);
    t_buf = NULL;
}

static void key_init(void) { g_key_ok = pthread_key_create(&g_key, buf_thread_exit) == 0; }

static prof_buf *get_buf(void) {
    if (t_buf) return t_buf;
    pthread_once(&g_key_once, key_init);
    prof_buf *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    pthread_mutex_init(&b->mu, NULL);
    b->tid = (int)syscall(SYS_gettid);
    pthread_mutex_lock(&g_mu);
    b->next = g_bufs;
    g_bufs = b;
    pthread_mutex_unlock(&g_mu);
    if (g_key_ok) pthread_setspecific(g_key, b);
    t_buf = b;
    return b;
}

/* Drops b's events (caller holds b->mu). */
static void buf_drop_events(prof_buf *b) {
    for (int64_t i = 0; i < b->n; i++) event_free(&b->ev[i]);
    free(b->ev);
    b->ev = NULL;
    b->n = b->cap = 0;
}

static void buf_free(prof_buf *b) {
    buf_drop_events(b);
    for (int i = 0; i < b->depth; i++) event_free(&b->st[i].ev);
    free(b->st);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* Frees the buffers of exited threads (caller holds g_mu; their events
 * must have been taken or be unwanted). */
static void reap_dead(void) {
    prof_buf **pp = &g_bufs;
    while (*pp) {
        prof_buf *b = *pp;
        pthread_mutex_lock(&b->mu);
        int dead = b->dead;
        pthread_mutex_unlock(&b->mu);
        if (dead) {
            *pp = b->next;
            buf_free(b);
        } else {
            pp = &b->next;
        }
    }
}

static void results_free(void) {
    for (int64_t i = 0; i < g_nres; i++) event_free(&g_res[i]);
    free(g_res);
    g_res = NULL;
    g_nres = 0;
    g_have_res = 0;
}

/* ---- describing an op ---------------------------------------------------- */
static int64_t nbytes_of(const ct_tensor *t) {
    return t ? ct_numel(t) * (int64_t)ct_dtype_size(t->dtype) : 0;
}

static int is_gemm(ct_op op) {
    switch (op) {
    case CT_OP_mm: case CT_OP_bmm: case CT_OP_matmul: case CT_OP_addmm: case CT_OP_baddbmm:
    case CT_OP_dot: case CT_OP_einsum: case CT_OP_mv: case CT_OP_vdot: case CT_OP_outer:
    case CT_OP_addmv: case CT_OP_addr: case CT_OP_addbmm: case CT_OP_linear:
    case CT_OP_bilinear: case CT_OP_tensordot: case CT_OP_kron: case CT_OP_gemm_lp:
        return 1;
    default:
        return 0;
    }
}

/* a bounded string builder on the stack (describe() runs per op) */
typedef struct { char *p; size_t n, cap; int cut; } sb;
static void sb_str(sb *b, const char *s) {
    while (*s && b->n + 1 < b->cap) b->p[b->n++] = *s++;
    if (*s) b->cut = 1;
}
static void sb_int(sb *b, int64_t v) {
    char tmp[24];
    int k = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) tmp[k++] = '-';
    while (k && b->n + 1 < b->cap) b->p[b->n++] = tmp[--k];
    if (k) b->cut = 1;
}
static char *sb_dup(sb *b) {
    b->p[b->n] = 0;
    char *r = malloc(b->n + 1);
    if (r) memcpy(r, b->p, b->n + 1);
    return r;
}

static void describe(prof_event *e, ct_op op, ct_tensor *const *out, int nout,
                     ct_tensor *const *in, int nin) {
    if (g_opts.record_shapes) {
        char sbuf[1024], dbuf[512];
        sb s = {sbuf, 0, sizeof sbuf - 4, 0}, d = {dbuf, 0, sizeof dbuf - 4, 0};
        sb_str(&s, "[");
        sb_str(&d, "[");
        for (int k = 0; k < nin; k++) {
            const ct_tensor *t = in[k];
            size_t ps = s.n, pd = d.n;
            if (k) { sb_str(&s, ", "); sb_str(&d, ", "); }
            sb_str(&s, "[");
            for (int j = 0; t && j < t->ndim; j++) {
                if (j) sb_str(&s, ", ");
                sb_int(&s, t->sizes[j]);
            }
            sb_str(&s, "]");
            sb_str(&d, "\"");
            if (t) sb_str(&d, ct_dtype_name(t->dtype));
            sb_str(&d, "\"");
            if (s.cut || d.cut) { /* too many inputs: keep the whole entries */
                s.n = ps;
                d.n = pd;
                break;
            }
        }
        /* the builders keep 4 bytes spare, so the closing bracket fits */
        s.cap += 4;
        d.cap += 4;
        sb_str(&s, "]");
        sb_str(&d, "]");
        e->shapes = sb_dup(&s);
        e->dtypes = sb_dup(&d);
    }
    if (!g_opts.with_flops) return;
    int64_t by = 0;
    for (int k = 0; k < nin; k++) by += nbytes_of(in[k]);
    for (int k = 0; k < nout; k++) by += nbytes_of(out[k]);
    e->bytes = by;
    ct_tensor *o0 = nout > 0 ? out[0] : NULL, *i0 = nin > 0 ? in[0] : NULL,
              *i1 = nin > 1 ? in[1] : NULL;
    unsigned fl = ct__op_info[op].flags;
    int64_t f = 0;
    if (is_gemm(op)) {
        if (o0 && i0 && i0->ndim >= 1) f = 2 * ct_numel(o0) * i0->sizes[i0->ndim - 1];
    } else if (op == CT_OP_conv) {
        if (o0 && i1 && i1->ndim >= 1 && i1->sizes[0] > 0)
            f = 2 * ct_numel(o0) * (ct_numel(i1) / i1->sizes[0]);
    } else if (op == CT_OP_conv_transpose) {
        if (i0 && i1 && i1->ndim >= 1 && i1->sizes[0] > 0)
            f = 2 * ct_numel(i0) * (ct_numel(i1) / i1->sizes[0]);
    } else if (fl & CT_OPF_EW) {
        for (int k = 0; k < nout; k++)
            if (out[k]) f += ct_numel(out[k]);
    } else if ((fl & CT_OPF_REDUCE) || op == CT_OP_softmax || op == CT_OP_log_softmax ||
               op == CT_OP_cumsum || op == CT_OP_cumprod || op == CT_OP_logcumsumexp) {
        if (i0) f = ct_numel(i0);
    } else if (op == CT_OP_batch_norm_fwd || op == CT_OP_batch_norm_eval) {
        if (i0) f = ct_numel(i0); /* as for an elementwise op */
    } else if (op == CT_OP_batch_norm_bwd) {
        if (i0) f = 2 * ct_numel(i0);
    }
    e->flops = f;
}

/* ---- frames --------------------------------------------------------------- */
static prof_frame *push_frame(prof_buf *b) {
    if (b->depth == b->stcap) {
        int nc = b->stcap ? 2 * b->stcap : 16;
        prof_frame *ns = realloc(b->st, sizeof *ns * (size_t)nc);
        if (!ns) return NULL;
        b->st = ns;
        b->stcap = nc;
    }
    prof_frame *f = &b->st[b->depth++];
    memset(f, 0, sizeof *f);
    f->gen = atomic_load(&g_gen);
    f->ev.tid = b->tid;
    return f;
}

/* Appends e to b unless the session changed or the limit is reached. */
static void emit(prof_buf *b, prof_event *e, uint64_t gen) {
    if (!atomic_load_explicit(&ct__prof_on, memory_order_acquire) ||
        gen != atomic_load(&g_gen)) {
        event_free(e);
        return;
    }
    if (atomic_fetch_add(&g_count, 1) >= g_opts.max_events) {
        atomic_fetch_add(&g_dropped, 1);
        event_free(e);
        return;
    }
    pthread_mutex_lock(&b->mu);
    if (b->gen != gen) {
        buf_drop_events(b);
        b->gen = gen;
    }
    if (b->n == b->cap) {
        int64_t nc = b->cap ? 2 * b->cap : 256;
        prof_event *ne = realloc(b->ev, sizeof *ne * (size_t)nc);
        if (!ne) {
            pthread_mutex_unlock(&b->mu);
            atomic_fetch_add(&g_dropped, 1);
            event_free(e);
            return;
        }
        b->ev = ne;
        b->cap = nc;
    }
    b->ev[b->n++] = *e;
    pthread_mutex_unlock(&b->mu);
}

static void pop_frame(prof_buf *b) {
    int64_t end = now_ns();
    prof_frame f = b->st[--b->depth];
    int64_t dur = end - f.ev.start_ns;
    f.ev.end_ns = end;
    f.ev.self_ns = dur - f.child_ns;
    if (f.ev.self_ns < 0) f.ev.self_ns = 0;
    if (b->depth > 0) b->st[b->depth - 1].child_ns += dur;
    emit(b, &f.ev, f.gen);
}

ct_status ct__prof_dispatch(ct_op op, ct_device dev, ct_kernel_fn fn, ct_tensor *const *out,
                            int nout, ct_tensor *const *in, int nin, const ct_args *a) {
    prof_buf *b = get_buf();
    prof_frame *f = b ? push_frame(b) : NULL;
    if (!f) return fn(out, nout, in, nin, a);
    f->ev.name = ct__op_info[op].name;
    f->ev.device = (int)dev;
    describe(&f->ev, op, out, nout, in, nin);
    f->ev.start_ns = now_ns();
    ct_status st = fn(out, nout, in, nin, a);
    pop_frame(b);
    return st;
}

int ct__prof_begin(const char *name, int annotation, ct_tensor *const *out, int nout,
                   ct_tensor *const *in, int nin, int64_t flops) {
    if (!atomic_load_explicit(&ct__prof_on, memory_order_relaxed)) return 0;
    prof_buf *b = get_buf();
    char *nm = annotation ? strdup(name) : NULL;
    prof_frame *f = b && (nm || !annotation) ? push_frame(b) : NULL;
    if (!f) {
        free(nm);
        return 0;
    }
    f->ev.name = nm ? nm : name;
    f->ev.owns_name = nm != NULL;
    f->ev.device = annotation ? -1 : (int)CT_CPU;
    /* shapes, dtypes and bytes as for an op; the caller's FLOPs */
    describe(&f->ev, CT_OP_copy, out, nout, in, nin);
    if (g_opts.with_flops) f->ev.flops = flops;
    f->ev.start_ns = now_ns();
    return 1;
}

void ct__prof_end(int opened) {
    prof_buf *b = t_buf;
    if (opened && b && b->depth > 0) pop_frame(b);
}

ct_status ct_profiler_push_range(const char *name) {
    if (!atomic_load_explicit(&ct__prof_on, memory_order_relaxed)) return CT_OK;
    if (!name) return ct__error_status(CT_ERR_NULL, "profiler_push_range: name is NULL");
    prof_buf *b = get_buf();
    char *nm = strdup(name);
    prof_frame *f = (b && nm) ? push_frame(b) : NULL;
    if (!f) {
        free(nm);
        return ct__error_status(CT_ERR_OOM, "profiler_push_range: out of memory");
    }
    f->ev.name = nm;
    f->ev.owns_name = 1;
    f->ev.device = -1;
    f->ev.start_ns = now_ns();
    return CT_OK;
}

ct_status ct_profiler_pop_range(void) {
    prof_buf *b = t_buf;
    if (!b || b->depth == 0 || b->st[b->depth - 1].ev.device != -1) {
        if (!atomic_load_explicit(&ct__prof_on, memory_order_relaxed)) return CT_OK;
        return ct__error_status(CT_ERR_RUNTIME,
                                "profiler_pop_range: no open range on this thread");
    }
    pop_frame(b);
    return CT_OK;
}

/* ---- sessions ------------------------------------------------------------- */
ct_status ct_profiler_start(const ct_profiler_opts *opts) {
    pthread_mutex_lock(&g_mu);
    if (atomic_load(&ct__prof_on)) {
        pthread_mutex_unlock(&g_mu);
        return ct__error_status(CT_ERR_RUNTIME, "profiler_start: a session is already running");
    }
    results_free();
    reap_dead();
    if (opts) g_opts = *opts;
    else {
        g_opts.record_shapes = true;
        g_opts.with_flops = true;
        g_opts.max_events = 0;
    }
    if (g_opts.max_events <= 0) g_opts.max_events = DEFAULT_MAX_EVENTS;
    atomic_store(&g_count, 0);
    atomic_store(&g_dropped, 0);
    atomic_fetch_add(&g_gen, 1);
    g_t0 = now_ns();
    atomic_store_explicit(&ct__prof_on, 1, memory_order_release);
    pthread_mutex_unlock(&g_mu);
    return CT_OK;
}

static int cmp_start(const void *x, const void *y) {
    const prof_event *a = x, *b = y;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns ? -1 : 1;
    /* an enclosing event (longer) first */
    return (a->end_ns < b->end_ns) - (a->end_ns > b->end_ns);
}

ct_status ct_profiler_stop(void) {
    pthread_mutex_lock(&g_mu);
    if (!atomic_load(&ct__prof_on)) {
        pthread_mutex_unlock(&g_mu);
        return ct__error_status(CT_ERR_RUNTIME, "profiler_stop: no session is running");
    }
    atomic_store_explicit(&ct__prof_on, 0, memory_order_release);
    uint64_t gen = atomic_load(&g_gen);
    results_free();
    int64_t total = 0;
    for (prof_buf *b = g_bufs; b; b = b->next) {
        pthread_mutex_lock(&b->mu);
        if (b->gen == gen) total += b->n;
        pthread_mutex_unlock(&b->mu);
    }
    /* events may still arrive between the count and the merge: take at most
     * what fits, drop the rest (they finished after stop was called) */
    g_res = malloc(sizeof *g_res * (size_t)(total ? total : 1));
    int64_t dropped = atomic_load(&g_dropped);
    for (prof_buf *b = g_bufs; b; b = b->next) {
        pthread_mutex_lock(&b->mu);
        if (b->gen == gen) {
            for (int64_t i = 0; i < b->n; i++) {
                if (g_res && g_nres < total) g_res[g_nres++] = b->ev[i];
                else { event_free(&b->ev[i]); dropped++; }
            }
            b->n = 0;
        }
        buf_drop_events(b);
        pthread_mutex_unlock(&b->mu);
    }
    reap_dead();
    if (g_res && g_nres > 1) qsort(g_res, (size_t)g_nres, sizeof *g_res, cmp_start);
    g_res_dropped = dropped;
    g_res_max = g_opts.max_events;
    g_res_t0 = g_t0;
    g_res_flops = g_opts.with_flops;
    g_have_res = 1;
    pthread_mutex_unlock(&g_mu);
    return CT_OK;
}

bool ct_profiler_is_enabled(void) { return atomic_load(&ct__prof_on) != 0; }

void ct_profiler_clear(void) {
    pthread_mutex_lock(&g_mu);
    results_free();
    if (!atomic_load(&ct__prof_on)) reap_dead();
    pthread_mutex_unlock(&g_mu);
}

int64_t ct_profiler_event_count(void) {
    pthread_mutex_lock(&g_mu);
    int64_t n = g_have_res ? g_nres : 0;
    pthread_mutex_unlock(&g_mu);
    return n;
}

/* ---- the table ------------------------------------------------------------ */
typedef struct prof_row {
    const char *name, *shapes;
    int64_t count, self_ns, total_ns, flops;
} prof_row;

static int g_by_shape_cmp; /* used by cmp_key under g_mu */

static int cmp_key(const void *x, const void *y) {
    const prof_event *a = *(const prof_event *const *)x, *b = *(const prof_event *const *)y;
    int c = strcmp(a->name, b->name);
    if (c || !g_by_shape_cmp) return c;
    return strcmp(a->shapes ? a->shapes : "", b->shapes ? b->shapes : "");
}

typedef enum { SORT_SELF, SORT_TOTAL, SORT_AVG, SORT_COUNT, SORT_FLOPS } sort_key;
static sort_key g_sort;

static int64_t row_metric(const prof_row *r) {
    switch (g_sort) {
    case SORT_TOTAL: return r->total_ns;
    case SORT_AVG: return r->count ? r->total_ns / r->count : 0;
    case SORT_COUNT: return r->count;
    case SORT_FLOPS: return r->flops;
    default: return r->self_ns;
    }
}

static int cmp_row(const void *x, const void *y) {
    const prof_row *a = x, *b = y;
    int64_t ma = row_metric(a), mb = row_metric(b);
    if (ma != mb) return ma > mb ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c) return c;
    return strcmp(a->shapes ? a->shapes : "", b->shapes ? b->shapes : "");
}

/* torch's _format_time: "12.345us", "1.234ms", "2.000s" */
static void fmt_time(char *buf, size_t n, int64_t ns) {
    double us = (double)ns / 1000.0;
    if (us >= 1e6) snprintf(buf, n, "%.3fs", us / 1e6);
    else if (us >= 1e3) snprintf(buf, n, "%.3fms", us / 1e3);
    else snprintf(buf, n, "%.3fus", us);
}

static void fmt_count(char *buf, size_t n, double v) {
    if (v <= 0) snprintf(buf, n, "--");
    else if (v >= 1e12) snprintf(buf, n, "%.3fT", v / 1e12);
    else if (v >= 1e9) snprintf(buf, n, "%.3fG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, n, "%.3fM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, n, "%.3fK", v / 1e3);
    else snprintf(buf, n, "%.0f", v);
}

static void put_cell(ct_sbuf *s, const char *text, int width, int left) {
    int len = (int)strlen(text);
    if (len > width) {
        /* keep the head and mark the cut */
        ct__sbuf_put(s, "%.*s...", width - 3 > 0 ? width - 3 : 0, text);
    } else if (left) {
        ct__sbuf_put(s, "%-*s", width, text);
    } else {
        ct__sbuf_put(s, "%*s", width, text);
    }
}

static char *make_table(const char *sort_by, int row_limit, int by_shape) {
    const char *fn = by_shape ? "profiler_table_by_shape" : "profiler_table";
    sort_key sk;
    if (!sort_by || !*sort_by || !strcmp(sort_by, "self_cpu_time_total")) sk = SORT_SELF;
    else if (!strcmp(sort_by, "cpu_time_total")) sk = SORT_TOTAL;
    else if (!strcmp(sort_by, "cpu_time")) sk = SORT_AVG;
    else if (!strcmp(sort_by, "count")) sk = SORT_COUNT;
    else if (!strcmp(sort_by, "flops")) sk = SORT_FLOPS;
    else
        return ct__error(CT_ERR_ARG, "%s: unknown sort key '%s' (expected self_cpu_time_total, "
                         "cpu_time_total, cpu_time, count or flops)", fn, sort_by);
    pthread_mutex_lock(&g_mu);
    if (!g_have_res) {
        pthread_mutex_unlock(&g_mu);
        return ct__error(CT_ERR_RUNTIME, "%s: no profiling session has been recorded "
                         "(call ct_profiler_start and ct_profiler_stop first)", fn);
    }
    const prof_event **ix = malloc(sizeof *ix * (size_t)(g_nres ? g_nres : 1));
    prof_row *rows = malloc(sizeof *rows * (size_t)(g_nres ? g_nres : 1));
    char *result = NULL;
    if (!ix || !rows) goto oom;
    for (int64_t i = 0; i < g_nres; i++) ix[i] = &g_res[i];
    g_by_shape_cmp = by_shape;
    qsort(ix, (size_t)g_nres, sizeof *ix, cmp_key);
    int64_t nrows = 0, self_total = 0;
    for (int64_t i = 0; i < g_nres; i++) {
        const prof_event *e = ix[i];
        self_total += e->self_ns;
        if (i == 0 || cmp_key(&ix[i - 1], &ix[i]) != 0) {
            prof_row *r = &rows[nrows++];
            r->name = e->name;
            r->shapes = e->shapes ? e->shapes : "";
            r->count = r->self_ns = r->total_ns = r->flops = 0;
        }
        prof_row *r = &rows[nrows - 1];
        r->count++;
        r->self_ns += e->self_ns;
        r->total_ns += e->end_ns - e->start_ns;
        r->flops += e->flops;
    }
    g_sort = sk;
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_row);
    int64_t shown = row_limit > 0 && row_limit < nrows ? row_limit : nrows;

    int wname = 4, wshape = 12;
    for (int64_t i = 0; i < shown; i++) {
        int l = (int)strlen(rows[i].name);
        if (l > wname) wname = l;
        l = (int)strlen(rows[i].shapes);
        if (l > wshape) wshape = l;
    }
    if (wname > 55) wname = 55;
    if (wshape > 70) wshape = 70;
    const int wc = 12;
    static const char *const heads[] = {"Self CPU %", "Self CPU", "CPU total %", "CPU total",
                                        "CPU time avg", "# of Calls", "Total FLOPs", "GFLOPS"};
    const int ncol = 8;
    ct_sbuf s = {0};
    /* rule line */
    char *rule = NULL;
    {
        ct_sbuf r = {0};
        for (int k = 0; k < wname; k++) ct__sbuf_put(&r, "-");
        for (int c = 0; c < ncol; c++) {
            ct__sbuf_put(&r, "  ");
            for (int k = 0; k < wc; k++) ct__sbuf_put(&r, "-");
        }
        if (by_shape) {
            ct__sbuf_put(&r, "  ");
            for (int k = 0; k < wshape; k++) ct__sbuf_put(&r, "-");
        }
        if (r.oom) { free(r.s); goto oom_s; }
        rule = r.s;
    }
    ct__sbuf_put(&s, "%s\n", rule);
    put_cell(&s, "Name", wname, 0);
    for (int c = 0; c < ncol; c++) {
        ct__sbuf_put(&s, "  ");
        put_cell(&s, heads[c], wc, 0);
    }
    if (by_shape) {
        ct__sbuf_put(&s, "  ");
        put_cell(&s, "Input Shapes", wshape, 1);
    }
    ct__sbuf_put(&s, "\n%s\n", rule);
    double denom = self_total > 0 ? (double)self_total : 1.0;
    for (int64_t i = 0; i < shown; i++) {
        const prof_row *r = &rows[i];
        char cells[8][48];
        snprintf(cells[0], sizeof cells[0], "%.2f%%", 100.0 * (double)r->self_ns / denom);
        fmt_time(cells[1], sizeof cells[1], r->self_ns);
        snprintf(cells[2], sizeof cells[2], "%.2f%%", 100.0 * (double)r->total_ns / denom);
        fmt_time(cells[3], sizeof cells[3], r->total_ns);
        fmt_time(cells[4], sizeof cells[4], r->count ? r->total_ns / r->count : 0);
        snprintf(cells[5], sizeof cells[5], "%lld", (long long)r->count);
        fmt_count(cells[6], sizeof cells[6], (double)r->flops);
        if (r->flops > 0 && r->total_ns > 0)
            snprintf(cells[7], sizeof cells[7], "%.3f", (double)r->flops / (double)r->total_ns);
        else
            snprintf(cells[7], sizeof cells[7], "--");
        put_cell(&s, r->name, wname, 0);
        for (int c = 0; c < ncol; c++) {
            ct__sbuf_put(&s, "  ");
            put_cell(&s, cells[c], wc, 0);
        }
        if (by_shape) {
            ct__sbuf_put(&s, "  ");
            put_cell(&s, r->shapes, wshape, 1);
        }
        ct__sbuf_put(&s, "\n");
    }
    ct__sbuf_put(&s, "%s\n", rule);
    char tt[48];
    fmt_time(tt, sizeof tt, self_total);
    ct__sbuf_put(&s, "Self CPU time total: %s\n", tt);
    if (shown < nrows)
        ct__sbuf_put(&s, "(%lld of %lld rows shown)\n", (long long)shown, (long long)nrows);
    if (g_res_dropped > 0)
        ct__sbuf_put(&s, "(%lld events dropped beyond the limit of %lld per session)\n",
                     (long long)g_res_dropped, (long long)g_res_max);
    free(rule);
    if (s.oom) goto oom_s;
    result = s.s;
    free(ix);
    free(rows);
    pthread_mutex_unlock(&g_mu);
    return result;
oom_s:
    free(s.s);
oom:
    free(ix);
    free(rows);
    pthread_mutex_unlock(&g_mu);
    return ct__error(CT_ERR_OOM, "%s: out of memory", fn);
}

char *ct_profiler_table(const char *sort_by, int row_limit) {
    return make_table(sort_by, row_limit, 0);
}

char *ct_profiler_table_by_shape(const char *sort_by, int row_limit) {
    return make_table(sort_by, row_limit, 1);
}

/* ---- the Chrome trace ----------------------------------------------------- */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        unsigned c = *p;
        if (c == '"') fputs("\\\"", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc((int)c, f);
    }
    fputc('"', f);
}

ct_status ct_profiler_export_chrome_trace(const char *path) {
    if (!path || !*path)
        return ct__error_status(CT_ERR_NULL, "profiler_export_chrome_trace: path is NULL or empty");
    size_t pl = strlen(path);
    char *tmp = malloc(pl + 16);
    if (!tmp) return ct__error_status(CT_ERR_OOM, "profiler_export_chrome_trace: out of memory");
    snprintf(tmp, pl + 16, "%s.tmpXXXXXX", path);
    pthread_mutex_lock(&g_mu);
    ct_status st = CT_OK;
    if (!g_have_res) {
        st = ct__error_status(CT_ERR_RUNTIME, "profiler_export_chrome_trace: no profiling session "
                              "has been recorded (call ct_profiler_start and ct_profiler_stop first)");
        goto out;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = ct__error_status(CT_ERR_IO, "profiler_export_chrome_trace: cannot create '%s': %s", tmp,
                              strerror(errno));
        goto out;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        st = ct__error_status(CT_ERR_IO, "profiler_export_chrome_trace: %s", strerror(errno));
        goto out;
    }
    int pid = (int)getpid();
    fputs("{\"traceEvents\": [", f);
    for (int64_t i = 0; i < g_nres; i++) {
        const prof_event *e = &g_res[i];
        fputs(i ? ",\n  {" : "\n  {", f);
        fputs("\"name\": ", f);
        json_str(f, e->name);
        fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, "
                "\"tid\": %d, \"args\": {",
                e->device < 0 ? "user_annotation" : "cpu_op",
                (double)(e->start_ns - g_res_t0) / 1000.0,
                (double)(e->end_ns - e->start_ns) / 1000.0, pid, e->tid);
        int first = 1;
        if (e->device >= 0) {
            fprintf(f, "\"device\": \"%s\"", ct_device_name((ct_device)e->device));
            first = 0;
        }
        if (e->shapes) {
            fprintf(f, "%s\"Input Dims\": %s", first ? "" : ", ", e->shapes);
            first = 0;
        }
        if (e->dtypes) {
            fprintf(f, "%s\"Input type\": %s", first ? "" : ", ", e->dtypes);
            first = 0;
        }
        if (e->device >= 0 && g_res_flops)
            fprintf(f, "%s\"flops\": %lld, \"bytes\": %lld", first ? "" : ", ",
                    (long long)e->flops, (long long)e->bytes);
        fputs("}}", f);
    }
    fputs("\n], \"displayTimeUnit\": \"ms\"}\n", f);
    int bad = ferror(f) != 0;
    if (fflush(f) != 0) bad = 1;
    if (!bad && fsync(fileno(f)) != 0) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        st = ct__error_status(CT_ERR_IO, "profiler_export_chrome_trace: cannot write '%s': %s", path,
                              strerror(e));
    }
out:
    pthread_mutex_unlock(&g_mu);
    free(tmp);
    return st;
}

/* ---- CT_PROFILE=1 ---------------------------------------------------------- */
static void at_exit_report(void) {
    if (atomic_load(&ct__prof_on) && ct_profiler_stop() != CT_OK) return;
    /* the program stopped the session and cleared its results itself (a
     * benchmark that reports each case's table): nothing is left to report */
    pthread_mutex_lock(&g_mu);
    int have = g_have_res;
    pthread_mutex_unlock(&g_mu);
    if (!have) return;
    const char *sort = getenv("CT_PROFILE_SORT");
    const char *rows = getenv("CT_PROFILE_ROWS");
    const char *shp = getenv("CT_PROFILE_SHAPES");
    int n = rows && *rows ? atoi(rows) : 40;
    char *t = (shp && *shp && strcmp(shp, "0")) ? ct_profiler_table_by_shape(sort, n)
                                                : ct_profiler_table(sort, n);
    if (t) {
        fputs(t, stdout);
        fflush(stdout);
        free(t);
    } else {
        fprintf(stderr, "ctorch profiler: %s\n", ct_last_error());
    }
    const char *trace = getenv("CT_PROFILE_TRACE");
    if (trace && *trace) {
        if (ct_profiler_export_chrome_trace(trace) != CT_OK)
            fprintf(stderr, "ctorch profiler: %s\n", ct_last_error());
        else
            fprintf(stderr, "ctorch profiler: trace written to %s\n", trace);
    }
    ct_profiler_clear();
}

void ct__prof_env_init(void) {
    const char *v = getenv("CT_PROFILE");
    if (!v || !*v || !strcmp(v, "0")) return;
    if (ct_profiler_start(NULL) == CT_OK) atexit(at_exit_report);
}
