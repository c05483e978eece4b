/* module_io.c -- ct_save_module and ct_load_module (include/ctorch/io.h):
 * a module's state dict through io's safetensors files.  They are nn's,
 * not io's: io does not depend on nn. */
#include <stdio.h>

#include "../ops/op_table.h"
#include "ctorch/io.h"
#include "ctorch/nn.h"

/* Prefixes the current error with "op: path: " (keeping its code). */
static ct_status rewrap(const char *op, const char *path, ct_status st) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    ct_status code = ct_last_error_code() ? ct_last_error_code() : st;
    ct_clear_error();
    return ct__error_status(code, "%s: %s: %s", op, path, msg);
}

ct_status ct_save_module(const char *path, ct_module *m) {
    if (!path || !m) return ct__error_status(CT_ERR_NULL, "save_module: path or module is NULL");
    ct_sample *sd = ct_module_state_dict(m);
    if (!sd) return ct_last_error_code() ? ct_last_error_code() : CT_ERR_RUNTIME;
    static const char *const meta[] = {"format", "pt", NULL};
    ct_status st = ct_safetensors_save(path, sd, meta);
    ct_sample_free(sd);
    return st;
}

ct_status ct_load_module(const char *path, ct_module *m, bool strict) {
    if (!path || !m) return ct__error_status(CT_ERR_NULL, "load_module: path or module is NULL");
    ct_safetensors *f = ct_safetensors_open(path);
    if (!f) return ct_last_error_code();
    ct_sample *sd = ct_safetensors_tensors(f);
    ct_safetensors_close(f);
    if (!sd) return ct_last_error_code();
    ct_status st = ct_module_load_state_dict(m, sd, strict);
    ct_sample_free(sd);
    if (st) return rewrap("load_module", path, st);
    return CT_OK;
}
