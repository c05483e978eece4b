/* ctorch/error.h -- the error model.
 *
 * A call that returns a tensor returns NULL on failure and records a
 * thread-local error (a code and a message naming the op, the shapes and
 * the dtypes).  Every op given a NULL input returns NULL at once and keeps
 * the first error, so one check covers a whole expression:
 *
 *     ct_tensor *y = ct_relu(ct_add(ct_matmul(x, w), b));
 *     if (!y) fprintf(stderr, "%s\n", ct_last_error());
 *
 * Calls that return no tensor return ct_status (CT_OK == 0).  The library
 * never aborts on user input; CT_ASSERT-style aborts are reserved for
 * internal invariants.
 */
#ifndef CTORCH_ERROR_H
#define CTORCH_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CT_API __declspec(dllexport)
#elif defined(__GNUC__)
#define CT_API __attribute__((visibility("default")))
#else
#define CT_API
#endif

#if defined(__GNUC__)
#define CT_NODISCARD __attribute__((warn_unused_result))
#else
#define CT_NODISCARD
#endif

typedef enum ct_status {
    CT_OK = 0,
    CT_ERR_NULL,      /* a NULL tensor or pointer was passed */
    CT_ERR_ARG,       /* an invalid argument value */
    CT_ERR_SHAPE,     /* shapes do not match / cannot broadcast */
    CT_ERR_DTYPE,     /* dtype not supported or not allowed */
    CT_ERR_INDEX,     /* dim or index out of range */
    CT_ERR_OOM,       /* out of memory */
    CT_ERR_OVERFLOW,  /* a size computation overflowed */
    CT_ERR_DEVICE,    /* op not available on the tensor's device */
    CT_ERR_IO,        /* file or stream error */
    CT_ERR_FORMAT,    /* corrupt or malformed input data */
    CT_ERR_RUNTIME,   /* any other runtime failure */
    CT_ERR_AUTOGRAD   /* autograd misuse */
} ct_status;

/* Message of the last error on this thread ("" when none). */
CT_API const char *ct_last_error(void);
/* Code of the last error on this thread (CT_OK when none). */
CT_API ct_status ct_last_error_code(void);
/* Forget the last error on this thread. */
CT_API void ct_clear_error(void);
/* Human-readable name of a status code ("CT_ERR_SHAPE"). */
CT_API const char *ct_status_name(ct_status s);

/* Called on every error as it is raised (on the raising thread).  A binding
 * can turn errors into exceptions, a debug build into aborts.  Pass NULL to
 * remove the handler.  The handler is process-wide. */
typedef void (*ct_error_handler)(ct_status code, const char *msg, void *user);
CT_API void ct_set_error_handler(ct_error_handler fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
