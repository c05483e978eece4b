/* error.c -- the thread-local error and the process-wide handler. */
#include <stdio.h>

#include "tensor_impl.h"

static _Thread_local ct_status tl_code = CT_OK;
static _Thread_local char tl_msg[1024];
static ct_error_handler g_handler;
static void *g_handler_user;

const char *ct_last_error(void) { return tl_msg; }
ct_status ct_last_error_code(void) { return tl_code; }
void ct_clear_error(void) { tl_code = CT_OK; tl_msg[0] = 0; }

void ct_set_error_handler(ct_error_handler fn, void *user) {
    g_handler = fn;
    g_handler_user = user;
}

const char *ct_status_name(ct_status s) {
    static const char *names[] = {"CT_OK", "CT_ERR_NULL", "CT_ERR_ARG", "CT_ERR_SHAPE",
                                  "CT_ERR_DTYPE", "CT_ERR_INDEX", "CT_ERR_OOM",
                                  "CT_ERR_OVERFLOW", "CT_ERR_DEVICE", "CT_ERR_IO",
                                  "CT_ERR_FORMAT", "CT_ERR_RUNTIME", "CT_ERR_AUTOGRAD"};
    if ((unsigned)s < sizeof(names) / sizeof(names[0])) return names[s];
    return "CT_ERR_UNKNOWN";
}

static void set_error(ct_status code, const char *fmt, va_list ap) {
    tl_code = code;
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    if (g_handler) g_handler(code, tl_msg, g_handler_user);
}

void *ct__error(ct_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(code, fmt, ap);
    va_end(ap);
    return NULL;
}

ct_status ct__error_status(ct_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error(code, fmt, ap);
    va_end(ap);
    return code;
}

_Noreturn void ct__assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "ctorch internal error: %s (%s:%d)\n", expr, file, line);
    abort();
}

char *ct__shape_str(const int64_t *sizes, int ndim, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)sizes[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

const char *ct__tshape(const ct_tensor *t) {
    static _Thread_local char bufs[4][256];
    static _Thread_local int next;
    char *b = bufs[next++ & 3];
    if (!t) return "NULL";
    return ct__shape_str(t->sizes, t->ndim, b, 256);
}
