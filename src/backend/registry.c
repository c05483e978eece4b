/* registry.c -- the one place that names the backends: the op layer's
 * initialization (ct__backends_init) calls ct__backend_registry_init, which
 * runs each backend's register function once.  A backend built only when
 * its toolkit is found adds its line under its #ifdef. */
#include "../core/device.h"

void ct__cpu_backend_register(void);
void ct__meta_backend_register(void);

static void (*const k_backends[])(void) = {
    ct__cpu_backend_register,
    ct__meta_backend_register,
};

void ct__backend_registry_init(void) {
    for (size_t k = 0; k < sizeof k_backends / sizeof k_backends[0]; k++) k_backends[k]();
}
