/* autocast.c -- the per-thread autocast state, the weight cache and the
 * casting of an op's operands by its policy (autocast.h, ctorch/amp.h). */
#include "autocast.h"

#include "ctorch/amp.h"
#include "ctorch/autograd.h"

const ct__ac_entry ct__ac_table[CT_AC_COUNT] = {
#define CT_AC(name, policy) [CT_AC_##name] = {#name, CT_AC_##policy},
#include "autocast.def"
#undef CT_AC
};

/* one region's saved state (what its exit restores) */
typedef struct ac_saved {
    bool enabled, cache;
    ct_dtype dtype;
} ac_saved;

#define AC_MAX_DEPTH 64

typedef struct ac_cache_entry {
    ct_tensor *src, *cast; /* both retained */
} ac_cache_entry;

static _Thread_local bool tl_enabled;          /* cpu autocast on */
static _Thread_local ct_dtype tl_dtype = CT_BF16;
static _Thread_local bool tl_cache_off;        /* cache_enabled false */
static _Thread_local int tl_nesting;
static _Thread_local int tl_excluded;          /* inside an autocast op / backward */
static _Thread_local ac_saved tl_stack[AC_MAX_DEPTH];
static _Thread_local ac_cache_entry *tl_cache;
static _Thread_local int tl_cache_n, tl_cache_cap;
_Thread_local bool ct__ac_live;

static void refresh_live(void) { ct__ac_live = tl_enabled && tl_excluded == 0; }

/* ---- public state ------------------------------------------------------------ */
ct_status ct_autocast_enter_ex(ct_device device_type, ct_dtype dtype, bool enabled, bool cache_enabled) {
    if (device_type != CT_CPU)
        return ct__error_status(CT_ERR_DEVICE, "autocast: device type %s has no autocast op lists "
                                "(only cpu)", ct_device_name(device_type));
    if (dtype != CT_BF16 && dtype != CT_F16)
        return ct__error_status(CT_ERR_DTYPE, "autocast: in CPU autocast, the target dtype must be "
                                "bfloat16 or float16, got %s", ct_dtype_name(dtype));
    if (tl_nesting >= AC_MAX_DEPTH)
        return ct__error_status(CT_ERR_RUNTIME, "autocast: regions nested deeper than %d", AC_MAX_DEPTH);
    tl_stack[tl_nesting++] = (ac_saved){tl_enabled, !tl_cache_off, tl_dtype};
    tl_enabled = enabled;
    tl_dtype = dtype;
    tl_cache_off = !cache_enabled;
    refresh_live();
    return CT_OK;
}

ct_status ct_autocast_enter(ct_device device_type, ct_dtype dtype) {
    return ct_autocast_enter_ex(device_type, dtype, true, !tl_cache_off);
}

ct_status ct_autocast_exit(void) {
    if (tl_nesting <= 0)
        return ct__error_status(CT_ERR_RUNTIME, "autocast: exit without a matching enter");
    ac_saved s = tl_stack[--tl_nesting];
    if (tl_nesting == 0) ct_autocast_clear_cache();
    tl_enabled = s.enabled;
    tl_dtype = s.dtype;
    tl_cache_off = !s.cache;
    refresh_live();
    return CT_OK;
}

bool ct_autocast_is_enabled(ct_device device_type) { return device_type == CT_CPU && tl_enabled; }
ct_dtype ct_autocast_get_dtype(ct_device device_type) { return device_type == CT_CPU ? tl_dtype : CT_F16; }
bool ct_autocast_is_cache_enabled(void) { return !tl_cache_off; }
int ct_autocast_cache_size(void) { return tl_cache_n; }

void ct_autocast_clear_cache(void) {
    /* release after emptying: a release may run code that looks at the cache */
    ac_cache_entry *c = tl_cache;
    int n = tl_cache_n;
    tl_cache = NULL;
    tl_cache_n = tl_cache_cap = 0;
    for (int k = 0; k < n; k++) {
        ct_release(c[k].cast);
        ct_release(c[k].src);
    }
    free(c);
}

void ct__autocast_suspend(void) {
    tl_excluded++;
    refresh_live();
}

void ct__autocast_resume(void) {
    tl_excluded--;
    refresh_live();
}

/* ---- casting ----------------------------------------------------------------- */
static bool on_autocast_device(const ct_tensor *t) {
    ct_device d = t->storage->device;
    return d == CT_CPU || d == CT_META; /* meta: the tracer and shape inference see eager's dtypes */
}

/* torch's is_eligible: a floating tensor other than float64 on the device */
static bool eligible(const ct_tensor *t) {
    return t && on_autocast_device(t) && ct_dtype_is_floating(t->dtype) && t->dtype != CT_F64;
}

/* torch's cached_cast: t as `to`; a float32 leaf that requires grad cast to
 * the region's dtype is made once per region (not while tracing: the trace
 * must record its casts, and a meta cast must not reach eager runs).
 * The result belongs to the current scope or to the cache. */
static ct_tensor *cached_cast(ct_tensor *t, ct_dtype to) {
    if (!eligible(t) || t->dtype == to) return t;
    bool try_cache = to == tl_dtype && t->dtype == CT_F32 && !tl_cache_off && !ct__tracer() &&
                     ct_requires_grad(t) && ct_is_leaf(t);
    if (try_cache)
        for (int k = 0; k < tl_cache_n; k++)
            if (tl_cache[k].src == t) return tl_cache[k].cast;
    ct_tensor *c = ct_to_dtype(t, to);
    if (c && try_cache) {
        if (tl_cache_n == tl_cache_cap) {
            int cap = tl_cache_cap ? 2 * tl_cache_cap : 16;
            ac_cache_entry *n = realloc(tl_cache, sizeof *n * (size_t)cap);
            if (!n) return c; /* uncached, still correct */
            tl_cache = n;
            tl_cache_cap = cap;
        }
        tl_cache[tl_cache_n++] = (ac_cache_entry){ct_retain(t), ct_retain(c)};
    }
    return c;
}

bool ct__autocast_begin(ct__ac_ctx *c, ct__ac_op id, ct_tensor **in, int nin) {
    bool dev = false;
    for (int k = 0; k < nin; k++) dev = dev || (in[k] && on_autocast_device(in[k]));
    if (!dev) return false;
    c->failed = false;
    c->scope = ct_scope_begin();
    tl_excluded++;
    refresh_live();
    ct__ac_policy pol = ct__ac_table[id].policy;
    ct_dtype to = pol == CT_AC_FP32 ? CT_F32 : tl_dtype;
    if (pol == CT_AC_PROMOTE) {
        /* torch's promote_type, operand by operand: float32 wins over the
         * lower precision dtype; float64 operands are ignored (they stay
         * float64); another floating dtype before any float32 (float16 in
         * a bfloat16 region) is an error, as torch's prioritize */
        for (int k = 0; k < nin; k++) {
            if (!eligible(in[k])) continue;
            if (to == CT_F32 || in[k]->dtype == CT_F32) to = CT_F32;
            else if (in[k]->dtype != tl_dtype) {
                ct__error(CT_ERR_DTYPE, "%s: autocast to %s cannot promote an operand of dtype %s",
                          ct__ac_table[id].name, ct_dtype_name(tl_dtype), ct_dtype_name(in[k]->dtype));
                c->failed = true;
                return true;
            }
        }
    }
    for (int k = 0; k < nin; k++) {
        if (!in[k]) continue;
        ct_tensor *t = cached_cast(in[k], to);
        if (!t) {
            c->failed = true;
            return true;
        }
        in[k] = t;
    }
    return true;
}

ct_tensor *ct__autocast_end(ct__ac_ctx *c, ct_tensor *r) {
    if (r) ct_keep(r);
    ct_scope_end(c->scope);
    tl_excluded--;
    refresh_live();
    return r;
}
