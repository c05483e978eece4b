/* registry.c -- the one place that names the backends: the op layer's
 * initialization (ct__backends_init) calls ct__backend_registry_init, which
 * runs each backend's register function once.  A backend built only when
 * its toolkit is found adds its line under its #ifdef. */
#include "../core/device.h"

void ct__cpu_backend_register(void);
void ct__meta_backend_register(void);
#ifdef CT_HAVE_OPENCL
void ct__opencl_backend_register(void);
#else
#include "../core/tensor_impl.h"
/* a build without the OpenCL backend: no device, and why */
int ct_opencl_devices(const char **names, int max) {
    (void)names; (void)max;
    ct__error(CT_ERR_DEVICE, "%s", ct__backend_missing_why(CT_OPENCL));
    return 0;
}
/* kernels the OpenCL driver built (tests): none without the backend */
long ct__opencl_kernels_built(void) { return 0; }
const char *ct__ocl_blas_status(void) { return "no OpenCL backend in this build"; }
#endif

#ifdef CT_HAVE_CUDA
void ct__cuda_backend_register(void); /* else src/backend/cuda_none.c */
#endif

static void (*const k_backends[])(void) = {
    ct__cpu_backend_register,
    ct__meta_backend_register,
#ifdef CT_HAVE_OPENCL
    ct__opencl_backend_register,
#endif
#ifdef CT_HAVE_CUDA
    ct__cuda_backend_register,
#endif
};

/* Why a device type has no backend in this build (NULL when it has one):
 * the text every error about such a device carries, e.g. "no CUDA device:
 * ...", the same whichever call hit it. */
const char *ct__backend_missing_why(ct_device type) {
    switch (type) {
#ifndef CT_HAVE_OPENCL
    case CT_OPENCL:
        return "no OpenCL device: this build of ctorch has no OpenCL backend "
               "(built without OpenCL headers, or with -DCT_OPENCL=OFF)";
#endif
#ifndef CT_HAVE_CUDA
    case CT_CUDA:
        return "no CUDA device: this build of ctorch has no CUDA backend (built without the CUDA "
               "toolkit's headers, or with -DCT_CUDA=OFF)";
#endif
    default:
        return NULL;
    }
}

void ct__backend_registry_init(void) {
    for (size_t k = 0; k < sizeof k_backends / sizeof k_backends[0]; k++) k_backends[k]();
}
