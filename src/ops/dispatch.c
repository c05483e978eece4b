/* dispatch.c -- the op info table generated from ops.def, the per-device
 * kernel tables, and the single entry/exit points of every op. */
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>
#include <pthread.h>

#include "../core/device.h"
#include "op_table.h"
#include "profiler_impl.h"
#include "meta.h"
#include <stdio.h>
#include "rules.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* The whole table at compile time: each line's name, arity and flags, and
 * its designated columns (meta, vjp, vjp_reads, ...). */
const ct_op_info ct__op_info[CT_OP_COUNT] = {
#define CT_OP(op, nin_, nout_, flags_, ...) \
    [CT_OP_##op] = {.name = #op, .nin = nin_, .nout = nout_, .flags = flags_, __VA_ARGS__},
#include "ops.def"
#undef CT_OP
};

ct_kernel_fn ct__kernels[CT_DEVICE_COUNT][CT_OP_COUNT];
unsigned char ct__kernel_half[CT_DEVICE_COUNT][CT_OP_COUNT];

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
    ct__devices_init(); /* every backend's vtable and kernel table */
    ct__ag_init();      /* autograd's hooks (ct__ag_hooks) and derivatives */
    ct__prof_env_init(); /* CT_PROFILE=1: profile the whole program */
}

void ct__backends_init(void) { pthread_once(&g_once, init_once); }

/* ---- autograd's hooks ------------------------------------------------------ */
/* Before ct__ag_init has run, each hook initializes the op layer (which
 * installs autograd's) and then calls the installed one. */
static bool tramp_active(ct_tensor *const *in, int nin) {
    ct__backends_init();
    return ct__ag_hooks.active(in, nin);
}
static ct_status tramp_record(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                              const ct_args *a) {
    ct__backends_init();
    return ct__ag_hooks.record(op, out, nout, in, nin, a);
}
static void tramp_track_view(ct_tensor *out, ct_tensor *in) {
    ct__backends_init();
    ct__ag_hooks.track_view(out, in);
}
static ct_status tramp_inplace_begin(ct_tensor *t, ct_tensor *const *in, int nin, const char *opname) {
    ct__backends_init();
    return ct__ag_hooks.inplace_begin(t, in, nin, opname);
}
static void tramp_inplace_abort(ct_tensor *t) {
    ct__backends_init();
    ct__ag_hooks.inplace_abort(t);
}
static ct_tensor *tramp_finish_inplace(ct_op op, ct_tensor *t, ct_tensor *const *in, int nin,
                                       const ct_args *a) {
    ct__backends_init();
    return ct__ag_hooks.finish_inplace(op, t, in, nin, a);
}

static bool tramp_fw_any(ct_tensor *const *in, int nin) {
    ct__backends_init();
    return ct__ag_hooks.fw_any(in, nin);
}

ct_ag_hooks ct__ag_hooks = {tramp_active, tramp_record, tramp_track_view,
                            tramp_inplace_begin, tramp_inplace_abort, tramp_finish_inplace,
                            tramp_fw_any};

void ct__ag_set_hooks(const ct_ag_hooks *h) {
    CT_ASSERT(h->active && h->record && h->track_view && h->inplace_begin && h->inplace_abort &&
              h->finish_inplace && h->fw_any);
    ct__ag_hooks = *h;
}

atomic_int ct__trace_count;
_Thread_local ct_trace_hook *ct__trace_tl;

/* The cpu fallback as a kernel of device type dev (one per type, so that
 * the kernel knows its device; the profiler sees it as the op's kernel). */
#define FB_KERNEL(D)                                                                               \
    static ct_status fallback_##D(ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,  \
                                  const ct_args *a) {                                             \
        return ct__fallback_run(a->op, (ct_device)(D), out, nout, in, nin, a);                    \
    }
FB_KERNEL(1)
FB_KERNEL(2)
FB_KERNEL(3)
_Static_assert(CT_DEVICE_COUNT <= 4, "fallback_kernel: add a FB_KERNEL line per device type");
static ct_kernel_fn fallback_kernel(ct_device dev) {
    switch ((int)dev) {
    case 1: return fallback_1;
    case 2: return fallback_2;
    case 3: return fallback_3;
    default: return NULL;
    }
}

ct_status ct__dispatch(ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                       const ct_args *a) {
    ct__backends_init();
    ct_device dev = CT_CPU;
    const ct_tensor *ref = NULL; /* the tensor whose device (index too) the others share */
    if (nout > 0 && out[0]) {
        ref = out[0];
        dev = out[0]->storage->device;
        ct__device_set_current(dev, out[0]->storage->device_index);
    } else {
        dev = ct__op_device(in, nin);
        for (int k = 0; k < nin && !ref; k++)
            if (in[k] && !(in[k]->ndim == 0 && in[k]->storage->device == CT_CPU)) ref = in[k];
    }
    for (int k = 0; k < nin; k++) {
        /* 0-dim cpu tensors (wrapped numbers) combine with any device */
        if (in[k] && !(in[k]->ndim == 0 && in[k]->storage->device == CT_CPU) &&
            (in[k]->storage->device != dev || (ref && !ct__same_device(in[k], ref)))) {
            /* tracing: cpu constants mixed with meta tensors run on meta */
            if (ct__tracer() && in[k]->storage->device != dev) { dev = CT_META; break; }
            char b0[32], b1[32];
            return ct__error_status(CT_ERR_DEVICE, "%s: expected all tensors on the same device, "
                                    "got %s and %s", ct__op_info[op].name,
                                    ref ? ct__tensor_dev_str(ref, b0, sizeof b0) : ct_device_name(dev),
                                    ct__tensor_dev_str(in[k], b1, sizeof b1));
        }
    }
    /* tracing: a kernel writing a cpu tensor an in-place op began on (a
     * module's buffer, a parameter) runs on meta: the write happens when
     * the compiled graph runs, not at trace time */
    ct_trace_hook *tw = ct__tracer();
    if (tw && tw->protected_write && nout > 0 && out[0] && tw->protected_write(tw, out[0])) dev = CT_META;
    ct_kernel_fn fn = ct__kernels[dev][op];
    if (!fn) {
        if (ct__fallback_serves(dev)) fn = fallback_kernel(dev);
        if (!fn)
            return ct__error_status(CT_ERR_DEVICE, "%s: no kernel for device %s",
                                    ct__op_info[op].name, ct_device_name(dev));
    }
    ct_args local;
    if (!a) {
        memset(&local, 0, sizeof local);
        local.op = op;
        a = &local;
    }
    ct_trace_hook *th = ct__tracer();
    if (th && th->disp) th->disp(th, op, out, nout, in, nin, a);
    ct_status st;
    if (dev != CT_CPU) (void)ct__device_kernel_declined(); /* no stale mark from a kernel run outside dispatch */
    /* a compile trace's meta ops are no events (compile.c shows the trace as one range) */
    if (__builtin_expect(atomic_load_explicit(&ct__prof_on, memory_order_relaxed), 0) && !(th && dev == CT_META))
        st = ct__prof_dispatch(op, dev, fn, out, nout, in, nin, a);
    else
        st = fn(out, nout, in, nin, a);
    /* a device kernel that declined this call (a dtype, a layout): the cpu fallback */
    if (st && dev != CT_CPU && ct__device_kernel_declined() && ct__fallback_serves(dev)) {
        ct_clear_error();
        st = ct__fallback_run(op, dev, out, nout, in, nin, a);
    }
    return st;
}

ct_device ct__op_device(ct_tensor *const *in, int nin) {
    if (ct__tracer()) /* tracing: meta wins over the cpu constants it meets */
        for (int k = 0; k < nin; k++)
            if (in[k] && in[k]->storage->device == CT_META) return CT_META;
    const ct_tensor *first = NULL;
    for (int k = 0; k < nin; k++) {
        if (!in[k]) continue;
        if (!(in[k]->ndim == 0 && in[k]->storage->device == CT_CPU)) {
            first = in[k];
            break;
        }
        if (!first) first = in[k];
    }
    if (!first) return CT_CPU;
    /* what the op allocates goes beside its inputs: their index becomes the
     * thread's current one for the type (a no-op for cpu and meta) */
    ct__device_set_current(first->storage->device, first->storage->device_index);
    return first->storage->device;
}

const char *ct__tensor_dev_str(const ct_tensor *t, char *buf, size_t n) {
    return ct_dev_str(CT_DEV(t->storage->device, t->storage->device_index), buf, n);
}

/* ---- the meta check (tests) ------------------------------------------------ */
/* With it on, every op's exit (ct__finish / ct__finish_multi) runs the op's
 * meta function on what is recorded -- the op, its inputs, its parameters
 * -- and counts the results whose dtype, device or sizes differ from what
 * the meta function says (or that it refuses): the recorded call must
 * describe the result, as the compiler's tracer relies on. */
static atomic_int g_mv_on;
static atomic_long g_mv_checked, g_mv_bad;
static _Thread_local char tl_mv_first[512];
static pthread_mutex_t g_mv_mu = PTHREAD_MUTEX_INITIALIZER;
static char g_mv_msg[512];

void ct__meta_verify_set(bool on) {
    atomic_store(&g_mv_on, on ? 1 : 0);
    if (on) {
        atomic_store(&g_mv_checked, 0);
        atomic_store(&g_mv_bad, 0);
        pthread_mutex_lock(&g_mv_mu);
        g_mv_msg[0] = 0;
        pthread_mutex_unlock(&g_mv_mu);
    }
}

long ct__meta_verify_result(long *checked, char *first, size_t n) {
    if (checked) *checked = atomic_load(&g_mv_checked);
    if (first && n) {
        pthread_mutex_lock(&g_mv_mu);
        snprintf(first, n, "%s", g_mv_msg);
        pthread_mutex_unlock(&g_mv_mu);
    }
    return atomic_load(&g_mv_bad);
}

static void mv_bad(const char *fmt, const char *name, const char *detail) {
    atomic_fetch_add(&g_mv_bad, 1);
    snprintf(tl_mv_first, sizeof tl_mv_first, fmt, name, detail);
    pthread_mutex_lock(&g_mv_mu);
    if (!g_mv_msg[0]) snprintf(g_mv_msg, sizeof g_mv_msg, "%s", tl_mv_first);
    pthread_mutex_unlock(&g_mv_mu);
}

static void meta_verify(ct_op op, ct_tensor *const *out, int nout, ct_tensor *const *in, int nin,
                        const ct_args *a) {
    const ct_op_info *oi = &ct__op_info[op];
    if (!oi->meta || nout > 8 || (oi->flags & CT_OPF_COMPOSITE && !oi->meta)) return;
    for (int k = 0; k < nin; k++)
        if (!in[k]) return; /* optional inputs passed as NULL: the kernel's list differs */
    ct_meta m[8];
    ct_status prev = ct_last_error_code();
    if (prev) return;
    atomic_fetch_add(&g_mv_checked, 1);
    if (ct__meta_run(op, m, nout, in, nin, a)) {
        mv_bad("%s: the meta function refuses the recorded call: %s", oi->name, ct_last_error());
        ct_clear_error();
        return;
    }
    for (int k = 0; k < nout; k++) {
        const ct_tensor *t = out[k];
        if (!t || m[k].ndim < 0) continue;
        if (m[k].flags & CT_META_DYNAMIC) {
            if (m[k].ndim != t->ndim || m[k].dtype != t->dtype) mv_bad("%s: %s", oi->name, "dynamic output's ndim/dtype");
            continue;
        }
        bool ok = m[k].ndim == t->ndim && m[k].dtype == t->dtype && m[k].device == t->storage->device;
        for (int d = 0; ok && d < t->ndim; d++) ok = m[k].sizes[d] == t->sizes[d];
        if (!ok) {
            char buf[256];
            snprintf(buf, sizeof buf, "output %d is %s %s, meta says %s ndim %d", k, ct_dtype_name(t->dtype),
                     ct__tshape(t), ct_dtype_name(m[k].dtype), m[k].ndim);
            mv_bad("%s: %s", oi->name, buf);
        }
    }
}

ct_tensor *ct__finish(ct_op op, ct_tensor *out, ct_tensor *const *in, int nin, const ct_args *a) {
    if (!out) return NULL;
    if (__builtin_expect(atomic_load_explicit(&g_mv_on, memory_order_relaxed), 0))
        meta_verify(op, &out, 1, in, nin, a);
    /* the tracer sees the op before autograd's record hook: forward-mode
     * rules run ops there that read the output (it must be a known value) */
    ct_trace_hook *h = ct__tracer();
    if (h) h->op(h, op, &out, 1, in, nin, a, NULL);
    if (ct__ag_hooks.active(in, nin) && ct__ag_hooks.record(op, &out, 1, in, nin, a)) {
        ct_release(out);
        return NULL;
    }
    if ((ct__op_info[op].flags & CT_OPF_VIEW) && nin > 0) ct__ag_track_view(out, in[0]);
    return ct__register(out);
}

void ct__finish_multi(ct_op op, ct_tensor **out, int nout, ct_tensor *const *in, int nin,
                      const ct_args *a) {
    if (__builtin_expect(atomic_load_explicit(&g_mv_on, memory_order_relaxed), 0))
        meta_verify(op, out, nout, in, nin, a);
    ct_trace_hook *h = ct__tracer(); /* first, as in ct__finish */
    if (h) h->op(h, op, out, nout, in, nin, a, NULL);
    if (ct__ag_hooks.active(in, nin) && ct__ag_hooks.record(op, out, nout, in, nin, a)) {
        for (int k = 0; k < nout; k++) { ct_release(out[k]); out[k] = NULL; }
        return;
    }
    for (int k = 0; k < nout; k++)
        if (out[k]) out[k] = ct__register(out[k]);
}

/* ---- threads ----------------------------------------------------------- */
static int g_threads;

void ct_set_num_threads(int n) {
    g_threads = n > 0 ? n : 0;
#ifdef _OPENMP
    if (n > 0) omp_set_num_threads(n);
#endif
}

int ct_get_num_threads(void) { return ct__num_threads(); }

/* The OpenMP wait policy, read once.  Under OMP_WAIT_POLICY=passive (or
 * GOMP_SPINCOUNT=0) libgomp's idle threads sleep at once and every parallel
 * region first wakes them: on this project's 2-vCPU VMs 20-70 us at best
 * (an empty region 0.4 us on one thread, 20 us on two; a 64K-float update
 * 23 against 91 us), 100-250 us a region under load; with spinning threads
 * (the default policy) ~1 us.  GOMP_SPINCOUNT, when set, overrides the
 * policy in libgomp, so it decides here too. */
static atomic_int g_passive; /* 0 unread, 1 no, 2 yes */

bool ct__omp_passive_reload(void) {
    atomic_store_explicit(&g_passive, 0, memory_order_relaxed);
    return ct__omp_passive();
}

bool ct__omp_passive(void) {
    atomic_int *sp = &g_passive;
    int v = atomic_load_explicit(sp, memory_order_relaxed);
    if (!v) {
        const char *sc = getenv("GOMP_SPINCOUNT"), *wp = getenv("OMP_WAIT_POLICY");
        bool passive = sc && *sc ? strtod(sc, NULL) == 0 : wp && !strcasecmp(wp, "passive");
        v = passive ? 2 : 1;
        atomic_store_explicit(sp, v, memory_order_relaxed);
    }
    return v == 2;
}

/* Waking a sleeping thread costs a region ~65 us on the VMs measured (140
 * against 74 us for a region of 10 us of work after a 50 us gap), which a
 * loop of a few grains does not win back.  Measured on AMD EPYC Zen 4, 2
 * threads, GPT-2 124M autocast bf16 training step (122 elementwise regions
 * a step), the factors alternated step by step in one process, medians of
 * 15 paired differences: 4x -10.5 and -9.1 ms (of ~650), 8x -6.3 ms under
 * PASSIVE; with the policy unset (threads spin a while) 4x +3.5 ms, hence
 * 1 there. */
int ct__grain_scale(void) { return ct__omp_passive() ? 4 : 1; }

int ct__num_threads(void) {
    if (g_threads > 0) return g_threads;
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}
