/* ew_vec.c -- picks the vectorized loop table for the CPU (ew_vec.h). */
#include "cpu_caps.h"
#include "ew_vec.h"

const ct_ew_vtab *ct__ew_vtab(void) {
    switch (ct__cpu_cap()) {
    case CT_CAP_AVX512: return &ct__ew_vtab_avx512;
    case CT_CAP_AVX2: return &ct__ew_vtab_avx2;
    default: return &ct__ew_vtab_default;
    }
}
