/* error.c -- the thread-local error and the process-wide handler. */
#include <stdio.h>
#include <string.h>

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

static _Thread_local unsigned long tl_count;

unsigned long ct__error_count(void) { return tl_count; }

static void set_error(ct_status code, const char *fmt, va_list ap) {
    tl_code = code;
    tl_count++;
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

/* "op: <what> is NULL", unless an error is pending (see tensor_impl.h). */
static void null_arg(const char *op, const char *what, va_list ap) {
    if (tl_code != CT_OK) return; /* keep the first error */
    if (!op) op = "?";
    if (!strncmp(op, "ct__", 4)) op += 4;
    else if (!strncmp(op, "ct_", 3)) op += 3;
    size_t n = strlen(op);
    if (n > 5 && !strcmp(op + n - 5, "_impl")) n -= 5;
    char desc[256];
    vsnprintf(desc, sizeof desc, what, ap);
    ct__error(CT_ERR_NULL, "%.*s: %s is NULL", (int)n, op, desc);
}

void *ct__null_arg(const char *op, const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    null_arg(op, what, ap);
    va_end(ap);
    return NULL;
}

ct_status ct__null_arg_status(const char *op, const char *what, ...) {
    va_list ap;
    va_start(ap, what);
    null_arg(op, what, ap);
    va_end(ap);
    return CT_ERR_NULL;
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
