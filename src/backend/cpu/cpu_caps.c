/* cpu_caps.c -- see cpu_caps.h. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include <cpuid.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu_caps.h"

static ct_cpu_cap g_detected, g_cap;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static const char *const g_names[CT_CAP_COUNT] = {"default", "avx2", "avx512"};

const char *ct__cpu_cap_name(ct_cpu_cap c) {
    return (unsigned)c < CT_CAP_COUNT ? g_names[c] : "default";
}

static int g_stream, g_halved;

static void detect(void) {
    ct_cpu_cap d = CT_CAP_DEFAULT;
    int amd = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    /* libgcc's feature bits already account for the OS saving the YMM/ZMM
     * state (XGETBV), so a feature reported here is usable */
    amd = __builtin_cpu_is("amd");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        d = CT_CAP_AVX2;
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
            d = CT_CAP_AVX512;
    }
#endif
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, dx = 0;
    if (amd && d >= CT_CAP_AVX512 && __get_cpuid(1, &a, &b, &c, &dx))
        g_halved = ((a >> 8) & 0xf) + ((a >> 20) & 0xff) == 0x19;
#endif
    g_detected = d;
    g_cap = d;
    g_stream = !(amd && d >= CT_CAP_AVX512);
    const char *st = getenv("CT_STREAM_STORES");
    if (st && (*st == '0' || *st == '1')) g_stream = *st == '1';
    const char *e = getenv("CT_CPU_CAPABILITY");
    if (e && *e) {
        for (int c = 0; c < CT_CAP_COUNT; c++)
            if (strcmp(e, g_names[c]) == 0 && (ct_cpu_cap)c < d) g_cap = (ct_cpu_cap)c;
    }
}

ct_cpu_cap ct__cpu_cap(void) {
    pthread_once(&g_once, detect);
    return g_cap;
}

int ct__cpu_avx512_halved(void) {
    pthread_once(&g_once, detect);
    return g_halved;
}

int ct__stream_stores(void) {
    pthread_once(&g_once, detect);
    return g_stream;
}

ct_cpu_cap ct__cpu_cap_detected(void) {
    pthread_once(&g_once, detect);
    return g_detected;
}

CT_API const char *ct_cpu_capability(void) { return ct__cpu_cap_name(ct__cpu_cap()); }

int ct__cpu_has_bf16_dot(void) {
    if (ct__cpu_cap_detected() < CT_CAP_AVX512) return 0;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    int avx512_bf16 = (a >> 5) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return avx512_bf16;
    int amx_bf16 = (d >> 22) & 1;
    return avx512_bf16 || amx_bf16;
}

/* AMX: the tile unit and its bf16 (CPUID 7.0 EDX bits 24, 22) or fp16
 * (CPUID 7.1 EAX bit 21) products, with the OS saving the tile state (XCR0
 * bits 17, 18; Linux 5.16+) and this process allowed to use it: Linux hands
 * out the tile data state on request (arch_prctl ARCH_REQ_XCOMP_PERM, as
 * torch's init_amx does); refused, the tiles count as absent. */
static int g_amx[2];
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static int amx_probe(int fp16) {
#if defined(__x86_64__)
    if (ct__cpu_cap_detected() < CT_CAP_AVX512) return 0;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return 0; /* OSXSAVE */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
    if (!tile) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) return 0;
#ifdef __linux__
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &perm) != 0) return 0;
    if (!(perm & (1ul << XFEATURE_XTILEDATA)) &&
        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, (unsigned long)XFEATURE_XTILEDATA) != 0)
        return 0;
#endif
    if (!fp16) return bf16;
    if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return 0;
    return (a >> 21) & 1;
#else
    (void)fp16;
    return 0;
#endif
}

static void amx_detect(void) {
    g_amx[0] = amx_probe(0);
    g_amx[1] = amx_probe(1);
}

/* (CPUID traps to the hypervisor on a VM: probed once) */
int ct__cpu_has_amx(int fp16) {
    pthread_once(&g_amx_once, amx_detect);
    return g_amx[fp16 != 0];
}
