/* mock_cuda.c - a strict stand-in for libcuda, for testing src/runtime/cuda.c
 * on machines without a GPU (built as libtc_mock_cuda.so, test-only; point
 * TC_CUDA_LIB at it).
 *
 * It exports the driver entry points cuda.c resolves and behaves like a
 * sanitizer for the driver API: every misuse returns the error a driver
 * would (or the closest one) AND is recorded as a violation, printed to
 * stderr as "mock_cuda: violation: ...". Tests ask mock_cuda_violations().
 * What counts as a violation:
 *   - any call before cuInit, a bad device ordinal, bad arguments (NULL
 *     outputs, unknown attributes, flags);
 *   - a context call (alloc, free, copies, modules, launch, synchronize)
 *     with no current context, or with a released one;
 *   - freeing a pointer that is not the base of a live allocation (unknown,
 *     double free, interior pointer); a copy whose range does not lie inside
 *     one live allocation (copies at offsets into an allocation are legal);
 *   - loading an image that is not PTX text for the device (.version,
 *     .target sm_XY with XY above the device's compute capability), getting
 *     a function from a module that is not loaded or that has no such
 *     .entry, unloading twice, launching a function of an unloaded module;
 *   - a launch whose grid or block breaks the limits the mock reports
 *     (block <= 1024 threads and 1024 x 1024 x 64, grid <= 2^31-1 x 65535 x
 *     65535), whose block exceeds the kernel's .maxntid (__launch_bounds__),
 *     whose static .shared plus dynamic shared memory exceeds 48 KiB, on a
 *     stream other than the default, with `extra`, or whose params do not
 *     match the .entry's .param list: the mock needs kernelParams to be
 *     NULL-terminated (libtinyc's cuda.c does so; a real driver reads only
 *     as many entries as the kernel has), so a count that differs is seen,
 *     and each .u64 param must hold a pointer into a live allocation (every
 *     parameter of libtinyc's kernels is a buffer);
 *   - at the release of the last reference to a primary context: the
 *     allocations and modules still alive in it (leaks; the mock frees them).
 * Device memory is host memory (256-byte aligned, filled with 0xff bytes,
 * NaN as floats, so nothing can pass for an uncomputed result). Launches
 * that pass the checks then run on the PTX interpreter (mock_cuda_ptx.c):
 * kernels compute, and an access out of bounds or misaligned, or an
 * instruction it does not know, is a violation (CUDA_ERROR_ILLEGAL_ADDRESS
 * or CUDA_ERROR_LAUNCH_FAILED). TC_MOCK_CUDA_EXEC=0 only checks launches.
 *
 * Error injection: TC_MOCK_CUDA_FAIL (read by cuInit) or mock_cuda_fail()
 * take "NAME:N[+][:CODE],..." - the Nth call to entry point NAME (counted
 * from when the spec was set; with +, that call and every later one) fails
 * with CODE, by default what that call would
 * return for a real failure (cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY,
 * cuLaunchKernel and cuCtxSynchronize: CUDA_ERROR_LAUNCH_FAILED,
 * cuModuleLoadData: CUDA_ERROR_INVALID_PTX, else CUDA_ERROR_INVALID_VALUE).
 * An injected failure changes nothing and is not a violation.
 * Query and control entry points (for tests, through dlsym): see the
 * MOCK_API functions at the end. TC_MOCK_CUDA_CC=<major><minor> sets the
 * compute capability (default 80).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MOCK_HAVE_CUDA_H
#include <cuda.h> /* the real prototypes: the compiler checks ours against them */
#else
/* the ABI of the few driver types and values used here (as cuda.h has them) */
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_LAUNCH_FAILED = 719,
};
enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};
#define CUDAAPI
/* the prototypes (cuda.h's, as this file defines them) */
CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
                        unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                        CUstream stream, void **params, void **extra);
CUresult cuGetErrorName(CUresult error, const char **pstr);
#endif

#include "mock_cuda.h"
#include "mock_cuda_ptx.h"

#define MOCK_API         __attribute__((visibility("default")))
#define MOCK_MAX_MSGS    32    /* violation messages kept */
#define MOCK_SHARED_MAX  49152 /* static shared bytes per block (48 KiB) */
#define MOCK_THREADS_MAX 1024  /* threads per block */

/* the driver entry points, for call counts and error injection */
typedef enum {
    F_INIT,
    F_DEVICE_GET_COUNT,
    F_DEVICE_GET,
    F_DEVICE_GET_NAME,
    F_DEVICE_GET_ATTRIBUTE,
    F_PRIMARY_CTX_RETAIN,
    F_PRIMARY_CTX_RELEASE,
    F_CTX_SET_CURRENT,
    F_CTX_SYNCHRONIZE,
    F_MEM_ALLOC,
    F_MEM_FREE,
    F_MEMCPY_HTOD,
    F_MEMCPY_DTOH,
    F_MODULE_LOAD_DATA,
    F_MODULE_UNLOAD,
    F_MODULE_GET_FUNCTION,
    F_LAUNCH_KERNEL,
    F_GET_ERROR_NAME,
    F_COUNT
} entry;

static const char *const entry_names[F_COUNT] = {
    [F_INIT] = "cuInit",
    [F_DEVICE_GET_COUNT] = "cuDeviceGetCount",
    [F_DEVICE_GET] = "cuDeviceGet",
    [F_DEVICE_GET_NAME] = "cuDeviceGetName",
    [F_DEVICE_GET_ATTRIBUTE] = "cuDeviceGetAttribute",
    [F_PRIMARY_CTX_RETAIN] = "cuDevicePrimaryCtxRetain",
    [F_PRIMARY_CTX_RELEASE] = "cuDevicePrimaryCtxRelease_v2",
    [F_CTX_SET_CURRENT] = "cuCtxSetCurrent",
    [F_CTX_SYNCHRONIZE] = "cuCtxSynchronize",
    [F_MEM_ALLOC] = "cuMemAlloc_v2",
    [F_MEM_FREE] = "cuMemFree_v2",
    [F_MEMCPY_HTOD] = "cuMemcpyHtoD_v2",
    [F_MEMCPY_DTOH] = "cuMemcpyDtoH_v2",
    [F_MODULE_LOAD_DATA] = "cuModuleLoadData",
    [F_MODULE_UNLOAD] = "cuModuleUnload",
    [F_MODULE_GET_FUNCTION] = "cuModuleGetFunction",
    [F_LAUNCH_KERNEL] = "cuLaunchKernel",
    [F_GET_ERROR_NAME] = "cuGetErrorName",
};

/* one primary context per device (only device 0 exists) */
struct CUctx_st {
    int refs;       /* cuDevicePrimaryCtxRetain count; 0: not active */
    int generation; /* bumped at each destruction (a stale handle is not current) */
};

/* an allocation: [base, base + size) */
typedef struct {
    uintptr_t base; /* posix_memalign'ed, 256-byte aligned */
    size_t size;    /* bytes asked for */
} allocation;

/* a kernel of a loaded module */
struct CUfunc_st {
    char name[128];     /* the .entry's name */
    int n_params;       /* its .param list */
    bool is_ptr[64];    /* param i is a .u64 (a buffer for libtinyc) */
    size_t shared;      /* static .shared bytes it may use (its own + the module's) */
    unsigned maxntid;   /* .maxntid x*y*z (0: none) */
    struct CUmod_st *m; /* the module */
    ptx_kernel *code;   /* its decoded body (in m->ptx) */
};

struct CUmod_st {
    bool is_loaded;        /* false once unloaded (kept to catch double unloads) */
    struct CUfunc_st *fns; /* its .entry kernels */
    int n_fns;
    ptx_module *ptx;       /* the interpreter's decoding (NULL once unloaded) */
    struct CUmod_st *next; /* every module ever loaded (freed at release) */
};

typedef struct {
    entry fn;       /* which entry point */
    long nth;       /* fails on this call (1-based, from when the spec was set) */
    CUresult r;     /* with this */
    bool is_done;   /* fired */
    bool is_sticky; /* "N+": every call from the Nth on fails */
} injection;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool is_initialized;             /* cuInit succeeded */
static int cc = 80;                     /* compute capability major*10 + minor */
static struct CUctx_st primary;         /* device 0's primary context */
static _Thread_local CUcontext current; /* cuCtxSetCurrent (per thread, as in the driver) */
static _Thread_local int current_generation;
static allocation *allocs; /* live allocations */
static int n_allocs, cap_allocs;
static struct CUmod_st *modules; /* every module loaded since the context was made */
static long calls[F_COUNT];      /* calls per entry point since mock_cuda_reset */
static long since_spec[F_COUNT]; /* calls since the injection spec was set */
static injection injections[16];
static int n_injections;
static int n_violations;              /* since mock_cuda_reset */
static char msgs[MOCK_MAX_MSGS][320]; /* the first violations */
static long launches_checked;         /* launches that passed every check */
static bool is_executing = true;      /* launches run (TC_MOCK_CUDA_EXEC=0: only checked) */

/* ---- violations and injection -------------------------------------------------------- */

/* records a violation (with lock held) and returns r, the driver's answer */
__attribute__((format(printf, 2, 3))) static CUresult violation(CUresult r, const char *fmt, ...) {
    char text[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    if (n_violations < MOCK_MAX_MSGS) snprintf(msgs[n_violations], sizeof msgs[0], "%s", text);
    n_violations++;
    fprintf(stderr, "mock_cuda: violation: %s\n", text);
    return r;
}

static CUresult default_failure(entry fn) {
    switch (fn) {
    case F_MEM_ALLOC: return CUDA_ERROR_OUT_OF_MEMORY;
    case F_LAUNCH_KERNEL:
    case F_CTX_SYNCHRONIZE:
    case F_MEMCPY_DTOH: return CUDA_ERROR_LAUNCH_FAILED; /* a kernel failed: it surfaces here */
    case F_MODULE_LOAD_DATA: return CUDA_ERROR_INVALID_PTX;
    case F_INIT:
    case F_DEVICE_GET_COUNT:
    case F_DEVICE_GET:
    case F_DEVICE_GET_NAME:
    case F_DEVICE_GET_ATTRIBUTE:
    case F_PRIMARY_CTX_RETAIN:
    case F_PRIMARY_CTX_RELEASE:
    case F_CTX_SET_CURRENT:
    case F_MEM_FREE:
    case F_MEMCPY_HTOD:
    case F_MODULE_UNLOAD:
    case F_MODULE_GET_FUNCTION:
    case F_GET_ERROR_NAME:
    case F_COUNT: break;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* parses "NAME:N[+][:CODE],..." into injections; false (nothing set) on a bad spec */
static bool set_spec(const char *spec) {
    injection parsed[16];
    int n = 0;
    for (const char *s = spec; s && *s;) {
        const char *colon = strchr(s, ':');
        if (!colon || n == 16) return false;
        int fn = 0;
        while (fn < F_COUNT && !(strlen(entry_names[fn]) == (size_t)(colon - s) &&
                                 strncmp(entry_names[fn], s, (size_t)(colon - s)) == 0))
            fn++;
        if (fn == F_COUNT) return false;
        char *end;
        long nth = strtol(colon + 1, &end, 10);
        if (nth < 1) return false;
        bool is_sticky = *end == '+';
        end += is_sticky;
        CUresult r = default_failure((entry)fn);
        if (*end == ':') {
            long code = strtol(end + 1, &end, 10);
            if (code <= 0) return false;
            r = (CUresult)code;
        }
        if (*end && *end != ',') return false;
        parsed[n++] = (injection){(entry)fn, nth, r, false, is_sticky};
        s = *end ? end + 1 : end;
    }
    memcpy(injections, parsed, sizeof parsed[0] * (size_t)n);
    n_injections = n;
    memset(since_spec, 0, sizeof since_spec);
    return true;
}

/* counts a call to fn; true (with *r) when an injected failure fires on it */
static bool enter(entry fn, CUresult *r) {
    calls[fn]++;
    since_spec[fn]++;
    for (int i = 0; i < n_injections; i++) {
        injection *in = &injections[i];
        if (in->fn == fn && !in->is_done &&
            (in->nth == since_spec[fn] || (in->is_sticky && since_spec[fn] > in->nth))) {
            in->is_done = !in->is_sticky;
            *r = in->r;
            return true;
        }
    }
    return false;
}

/* the checks every call but cuInit and cuGetErrorName starts with */
static CUresult need_init(entry fn) {
    if (!is_initialized)
        return violation(CUDA_ERROR_NOT_INITIALIZED, "%s before cuInit", entry_names[fn]);
    return CUDA_SUCCESS;
}

/* a context call: cuInit done and a live context current in this thread */
static CUresult need_context(entry fn) {
    CUresult r = need_init(fn);
    if (r != CUDA_SUCCESS) return r;
    if (!current)
        return violation(CUDA_ERROR_INVALID_CONTEXT, "%s with no current context", entry_names[fn]);
    if (current->refs <= 0 || current_generation != current->generation)
        return violation(CUDA_ERROR_CONTEXT_IS_DESTROYED,
                         "%s with a released primary context current", entry_names[fn]);
    return CUDA_SUCCESS;
}

static CUresult need_device(entry fn, CUdevice d) {
    CUresult r = need_init(fn);
    if (r == CUDA_SUCCESS && d != 0)
        r = violation(CUDA_ERROR_INVALID_DEVICE, "%s: device %d does not exist", entry_names[fn],
                      d);
    return r;
}

/* the live allocation holding [p, p + n) (n may be 0: p itself); -1 if none */
static int find_alloc(uintptr_t p, size_t n) {
    for (int i = 0; i < n_allocs; i++) {
        uintptr_t b = allocs[i].base;
        if (p >= b && p - b < allocs[i].size && n <= allocs[i].size - (p - b)) return i;
    }
    return -1;
}

/* ---- modules: the PTX facts the launch checks need -------------------------------------- */

/* the .target's sm number ("sm_80" -> 80); -1 if absent */
static int ptx_target(const char *text) {
    const char *t = strstr(text, "\n.target");
    if (!t) return -1;
    t += strlen("\n.target");
    while (*t == ' ' || *t == '\t') t++;
    return strncmp(t, "sm_", 3) == 0 ? atoi(t + 3) : -1;
}

/* PTX text -> a module (not yet linked in); CUDA_SUCCESS or the driver's error */
static CUresult parse_module(const char *text, struct CUmod_st **out) {
    if (!strstr(text, "\n.version"))
        return violation(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: the image is not PTX text");
    int target = ptx_target(text);
    if (target < 0 || target > cc)
        return violation(CUDA_ERROR_INVALID_PTX,
                         "cuModuleLoadData: PTX .target sm_%d on a device of compute "
                         "capability %d.%d",
                         target, cc / 10, cc % 10);
    char err[200];
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->ptx = ptx_load(text, err, sizeof err);
    m->n_fns = m->ptx ? ptx_count(m->ptx) : 0;
    m->fns = m->ptx ? calloc((size_t)m->n_fns + 1, sizeof *m->fns) : NULL;
    if (!m->fns) {
        bool is_decoded = m->ptx != NULL;
        ptx_free(m->ptx);
        free(m);
        return is_decoded ? CUDA_ERROR_OUT_OF_MEMORY
                          : violation(CUDA_ERROR_INVALID_PTX, "cuModuleLoadData: %s", err);
    }
    for (int i = 0; i < m->n_fns; i++) {
        struct CUfunc_st *f = &m->fns[i];
        f->code = ptx_at(m->ptx, i);
        snprintf(f->name, sizeof f->name, "%s", ptx_name(f->code));
        f->n_params = ptx_n_params(f->code);
        for (int p = 0; p < f->n_params; p++) f->is_ptr[p] = ptx_param_is_u64(f->code, p);
        f->shared = ptx_shared_bytes(f->code);
        f->maxntid = ptx_maxntid(f->code);
        f->m = m;
    }
    m->is_loaded = true;
    *out = m;
    return CUDA_SUCCESS;
}

static bool is_live_module(CUmodule m) {
    for (struct CUmod_st *x = modules; x; x = x->next)
        if (x == m) return x->is_loaded;
    return false;
}

static bool is_known_module(CUmodule m) {
    for (struct CUmod_st *x = modules; x; x = x->next)
        if (x == m) return true;
    return false;
}

/* the function f if it belongs to a module ever loaded in this context */
static struct CUfunc_st *find_function(CUfunction f) {
    for (struct CUmod_st *x = modules; x; x = x->next)
        for (int i = 0; i < x->n_fns; i++)
            if (&x->fns[i] == f) return f;
    return NULL;
}

/* the context's end: leaks are violations; everything is freed */
static void destroy_context(void) {
    for (int i = 0; i < n_allocs; i++) {
        violation(CUDA_SUCCESS, "context released with %zu bytes still allocated at 0x%llx",
                  allocs[i].size, (unsigned long long)allocs[i].base);
        free((void *)allocs[i].base);
    }
    n_allocs = 0;
    while (modules) {
        struct CUmod_st *m = modules;
        if (m->is_loaded)
            violation(CUDA_SUCCESS, "context released with a module still loaded (%s)",
                      m->n_fns > 0 ? m->fns[0].name : "no kernels");
        modules = m->next;
        ptx_free(m->ptx);
        free(m->fns);
        free(m);
    }
    primary.generation++;
}

/* ---- the entry points cuda.c resolves ------------------------------------------------ */

#define ENTER(fn)                    \
    CUresult r_ = CUDA_SUCCESS;      \
    pthread_mutex_lock(&lock);       \
    if (enter(fn, &r_)) {            \
        pthread_mutex_unlock(&lock); \
        return r_;                   \
    }
#define RETURN(r)                    \
    do {                             \
        CUresult rr_ = (r);          \
        pthread_mutex_unlock(&lock); \
        return rr_;                  \
    } while (0)

MOCK_API CUresult CUDAAPI cuInit(unsigned int flags) {
    ENTER(F_INIT);
    if (flags != 0)
        RETURN(violation(CUDA_ERROR_INVALID_VALUE, "cuInit: flags %u (must be 0)", flags));
    if (!is_initialized) {
        const char *x = getenv("TC_MOCK_CUDA_EXEC");
        is_executing = !(x && strcmp(x, "0") == 0);
        const char *c = getenv("TC_MOCK_CUDA_CC");
        if (c && atoi(c) >= 30) cc = atoi(c);
        const char *spec = getenv("TC_MOCK_CUDA_FAIL");
        if (spec && *spec && !set_spec(spec))
            fprintf(stderr, "mock_cuda: bad TC_MOCK_CUDA_FAIL '%s' (NAME:N[+][:CODE],...)\n", spec);
    }
    is_initialized = true;
    RETURN(CUDA_SUCCESS);
}

MOCK_API CUresult CUDAAPI cuDeviceGetCount(int *count) {
    ENTER(F_DEVICE_GET_COUNT);
    CUresult r = need_init(F_DEVICE_GET_COUNT);
    if (r == CUDA_SUCCESS && !count)
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount: count is NULL");
    if (r == CUDA_SUCCESS) *count = 1;
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
    ENTER(F_DEVICE_GET);
    CUresult r = need_device(F_DEVICE_GET, ordinal);
    if (r == CUDA_SUCCESS && !device)
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet: device is NULL");
    if (r == CUDA_SUCCESS) *device = ordinal;
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev) {
    ENTER(F_DEVICE_GET_NAME);
    CUresult r = need_device(F_DEVICE_GET_NAME, dev);
    if (r == CUDA_SUCCESS && (!name || len <= 0))
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName: no room for the name");
    if (r == CUDA_SUCCESS) snprintf(name, (size_t)len, "tinyc mock CUDA device (sm_%d)", cc);
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    ENTER(F_DEVICE_GET_ATTRIBUTE);
    CUresult r = need_device(F_DEVICE_GET_ATTRIBUTE, dev);
    if (r == CUDA_SUCCESS && !pi)
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute: pi is NULL");
    if (r != CUDA_SUCCESS) RETURN(r);
    switch ((int)attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = MOCK_THREADS_MAX; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = MOCK_SHARED_MAX; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = cc % 10; break;
    default:
        r = violation(CUDA_ERROR_INVALID_VALUE,
                      "cuDeviceGetAttribute: attribute %d is not one the mock knows", (int)attrib);
    }
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    ENTER(F_PRIMARY_CTX_RETAIN);
    CUresult r = need_device(F_PRIMARY_CTX_RETAIN, dev);
    if (r == CUDA_SUCCESS && !pctx)
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain: pctx is NULL");
    if (r == CUDA_SUCCESS) {
        primary.refs++;
        *pctx = &primary;
    }
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    ENTER(F_PRIMARY_CTX_RELEASE);
    CUresult r = need_device(F_PRIMARY_CTX_RELEASE, dev);
    if (r == CUDA_SUCCESS && primary.refs <= 0)
        r = violation(CUDA_ERROR_INVALID_CONTEXT,
                      "cuDevicePrimaryCtxRelease_v2: the primary context is not retained");
    if (r == CUDA_SUCCESS && --primary.refs == 0) destroy_context();
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
    ENTER(F_CTX_SET_CURRENT);
    CUresult r = need_init(F_CTX_SET_CURRENT);
    if (r == CUDA_SUCCESS && ctx && ctx != &primary)
        r = violation(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent: unknown context %p",
                      (void *)ctx);
    if (r == CUDA_SUCCESS && ctx && primary.refs <= 0)
        r = violation(CUDA_ERROR_CONTEXT_IS_DESTROYED,
                      "cuCtxSetCurrent: the primary context was released");
    if (r == CUDA_SUCCESS) {
        current = ctx;
        current_generation = primary.generation;
    }
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuCtxSynchronize(void) {
    ENTER(F_CTX_SYNCHRONIZE);
    RETURN(need_context(F_CTX_SYNCHRONIZE));
}

MOCK_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    ENTER(F_MEM_ALLOC);
    CUresult r = need_context(F_MEM_ALLOC);
    if (r == CUDA_SUCCESS && (!dptr || bytesize == 0))
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc_v2: %s",
                      dptr ? "0 bytes" : "dptr is NULL");
    if (r != CUDA_SUCCESS) RETURN(r);
    if (n_allocs == cap_allocs) {
        int cap = cap_allocs ? 2 * cap_allocs : 64;
        allocation *grown = realloc(allocs, sizeof *grown * (size_t)cap);
        if (!grown) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
        allocs = grown, cap_allocs = cap;
    }
    void *p = NULL;
    if (posix_memalign(&p, 256, bytesize) != 0) RETURN(CUDA_ERROR_OUT_OF_MEMORY);
    memset(p, 0xff, bytesize);
    allocs[n_allocs++] = (allocation){(uintptr_t)p, bytesize};
    *dptr = (CUdeviceptr)(uintptr_t)p;
    RETURN(CUDA_SUCCESS);
}

MOCK_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
    ENTER(F_MEM_FREE);
    CUresult r = need_context(F_MEM_FREE);
    if (r != CUDA_SUCCESS) RETURN(r);
    for (int i = 0; i < n_allocs; i++)
        if (allocs[i].base == dptr) {
            free((void *)allocs[i].base);
            allocs[i] = allocs[--n_allocs];
            RETURN(CUDA_SUCCESS);
        }
    int in = find_alloc((uintptr_t)dptr, 0);
    if (in >= 0)
        RETURN(violation(CUDA_ERROR_INVALID_VALUE,
                         "cuMemFree_v2: 0x%llx is %zu bytes into an allocation, not its start",
                         (unsigned long long)dptr, (size_t)(dptr - allocs[in].base)));
    RETURN(violation(CUDA_ERROR_INVALID_VALUE,
                     "cuMemFree_v2: 0x%llx is not a live allocation (unknown or freed)",
                     (unsigned long long)dptr));
}

/* the allocation check of a copy of n bytes at device address p */
static CUresult check_copy(entry fn, CUdeviceptr p, const void *host, size_t n) {
    CUresult r = need_context(fn);
    if (r == CUDA_SUCCESS && !host && n > 0)
        r = violation(CUDA_ERROR_INVALID_VALUE, "%s: host pointer is NULL", entry_names[fn]);
    if (r == CUDA_SUCCESS && n > 0 && find_alloc((uintptr_t)p, n) < 0) {
        int in = find_alloc((uintptr_t)p, 0);
        if (in >= 0)
            r = violation(CUDA_ERROR_INVALID_VALUE,
                          "%s of %zu bytes at offset %zu runs past the end of an allocation of "
                          "%zu bytes",
                          entry_names[fn], n, (size_t)(p - allocs[in].base), allocs[in].size);
        else
            r = violation(CUDA_ERROR_INVALID_VALUE,
                          "%s of %zu bytes at 0x%llx: not in a live allocation", entry_names[fn], n,
                          (unsigned long long)p);
    }
    return r;
}

MOCK_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    ENTER(F_MEMCPY_HTOD);
    CUresult r = check_copy(F_MEMCPY_HTOD, dst, src, n);
    if (r == CUDA_SUCCESS && n > 0) memcpy((void *)(uintptr_t)dst, src, n);
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    ENTER(F_MEMCPY_DTOH);
    CUresult r = check_copy(F_MEMCPY_DTOH, src, dst, n);
    if (r == CUDA_SUCCESS && n > 0) memcpy(dst, (const void *)(uintptr_t)src, n);
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image) {
    ENTER(F_MODULE_LOAD_DATA);
    CUresult r = need_context(F_MODULE_LOAD_DATA);
    if (r == CUDA_SUCCESS && (!module || !image))
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData: %s is NULL",
                      module ? "image" : "module");
    struct CUmod_st *m = NULL;
    if (r == CUDA_SUCCESS) r = parse_module(image, &m);
    if (r == CUDA_SUCCESS) {
        m->next = modules;
        modules = m;
        *module = m;
    }
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
    ENTER(F_MODULE_UNLOAD);
    CUresult r = need_context(F_MODULE_UNLOAD);
    if (r == CUDA_SUCCESS && !is_live_module(hmod))
        r = violation(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload: module %p is %s", (void *)hmod,
                      is_known_module(hmod) ? "already unloaded" : "unknown");
    if (r == CUDA_SUCCESS) {
        hmod->is_loaded = false;
        ptx_free(hmod->ptx);
        hmod->ptx = NULL;
        for (int i = 0; i < hmod->n_fns; i++) hmod->fns[i].code = NULL;
    }
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    ENTER(F_MODULE_GET_FUNCTION);
    CUresult r = need_context(F_MODULE_GET_FUNCTION);
    if (r == CUDA_SUCCESS && (!hfunc || !name))
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction: %s is NULL",
                      hfunc ? "name" : "hfunc");
    if (r == CUDA_SUCCESS && !is_live_module(hmod))
        r = violation(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction('%s'): module %p is %s", name,
                      (void *)hmod, is_known_module(hmod) ? "unloaded" : "unknown");
    if (r != CUDA_SUCCESS) RETURN(r);
    for (int i = 0; i < hmod->n_fns; i++)
        if (strcmp(hmod->fns[i].name, name) == 0) {
            *hfunc = &hmod->fns[i];
            RETURN(CUDA_SUCCESS);
        }
    RETURN(violation(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction: the module has no .entry '%s'",
                     name));
}

/* the launch checks of grid and block against the device and the kernel */
static CUresult check_dims(const struct CUfunc_st *f, const unsigned g[3], const unsigned b[3],
                           unsigned shared) {
    static const unsigned gmax[3] = {2147483647u, 65535, 65535}, bmax[3] = {1024, 1024, 64};
    for (int i = 0; i < 3; i++) {
        if (g[i] == 0 || g[i] > gmax[i] || b[i] == 0 || b[i] > bmax[i])
            return violation(CUDA_ERROR_INVALID_VALUE,
                             "cuLaunchKernel('%s'): grid %ux%ux%u, block %ux%ux%u outside the "
                             "device's limits (grid 2147483647x65535x65535, block 1024x1024x64)",
                             f->name, g[0], g[1], g[2], b[0], b[1], b[2]);
    }
    unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    if (threads > MOCK_THREADS_MAX)
        return violation(CUDA_ERROR_INVALID_VALUE,
                         "cuLaunchKernel('%s'): block %ux%ux%u has %llu threads (at most %d)",
                         f->name, b[0], b[1], b[2], threads, MOCK_THREADS_MAX);
    if (f->maxntid && threads > f->maxntid)
        return violation(CUDA_ERROR_INVALID_VALUE,
                         "cuLaunchKernel('%s'): block of %llu threads over the kernel's "
                         ".maxntid %u (__launch_bounds__)",
                         f->name, threads, f->maxntid);
    if (f->shared + shared > MOCK_SHARED_MAX)
        return violation(CUDA_ERROR_INVALID_VALUE,
                         "cuLaunchKernel('%s'): %zu bytes of static and %u of dynamic shared "
                         "memory (at most %d)",
                         f->name, f->shared, shared, MOCK_SHARED_MAX);
    return CUDA_SUCCESS;
}

/* params must be NULL-terminated after exactly f->n_params entries */
static CUresult check_params(const struct CUfunc_st *f, void **params) {
    int n = 0;
    if (params)
        while (n <= f->n_params && params[n]) n++;
    if (n != f->n_params)
        return violation(CUDA_ERROR_INVALID_VALUE,
                         "cuLaunchKernel('%s'): %s%d kernel params for the .entry's %d", f->name,
                         n > f->n_params ? "more than " : "", n, f->n_params);
    for (int i = 0; i < n; i++) {
        if (!f->is_ptr[i]) continue;
        CUdeviceptr v;
        memcpy(&v, params[i], sizeof v);
        if (find_alloc((uintptr_t)v, 0) < 0)
            return violation(CUDA_ERROR_INVALID_VALUE,
                             "cuLaunchKernel('%s'): param %d (0x%llx) is not in a live "
                             "allocation",
                             f->name, i, (unsigned long long)v);
    }
    return CUDA_SUCCESS;
}

/* the interpreter's view of the allocation table */
static int range_of(uintptr_t p, uintptr_t *base, size_t *size) {
    int i = find_alloc(p, 0);
    if (i < 0) return 0;
    *base = allocs[i].base, *size = allocs[i].size;
    return 1;
}

/* runs a checked launch on the interpreter */
static CUresult execute(const struct CUfunc_st *f, const unsigned g[3], const unsigned b[3],
                        void **params) {
    char err[400];
    int rc = f->code ? ptx_run(f->code, g, b, params, range_of, err, sizeof err) : -2;
    if (!f->code) snprintf(err, sizeof err, "kernel '%s' was not decoded", f->name);
    if (rc == 0) return CUDA_SUCCESS;
    return violation(rc == -2 ? CUDA_ERROR_LAUNCH_FAILED : CUDA_ERROR_ILLEGAL_ADDRESS,
                     "cuLaunchKernel: %s", err);
}

MOCK_API CUresult CUDAAPI cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy,
                                         unsigned int gz, unsigned int bx, unsigned int by,
                                         unsigned int bz, unsigned int shared, CUstream stream,
                                         void **params, void **extra) {
    ENTER(F_LAUNCH_KERNEL);
    CUresult r = need_context(F_LAUNCH_KERNEL);
    struct CUfunc_st *f = r == CUDA_SUCCESS ? find_function(fn) : NULL;
    if (r == CUDA_SUCCESS && !f)
        r = violation(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel: unknown function %p", (void *)fn);
    if (r == CUDA_SUCCESS && !f->m->is_loaded)
        r = violation(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel('%s'): its module was unloaded",
                      f->name);
    if (r == CUDA_SUCCESS && (stream || extra))
        r = violation(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel('%s'): %s", f->name,
                      stream ? "a stream the mock never made" : "`extra` (the mock takes params)");
    const unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
    if (r == CUDA_SUCCESS) r = check_dims(f, g, b, shared);
    if (r == CUDA_SUCCESS) r = check_params(f, params);
    if (r == CUDA_SUCCESS) launches_checked++;
    if (r == CUDA_SUCCESS && is_executing) r = execute(f, g, b, params);
    RETURN(r);
}

MOCK_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pstr) {
    ENTER(F_GET_ERROR_NAME);
    static const struct {
        int code;
        const char *name;
    } names[] = {
        {CUDA_SUCCESS, "CUDA_SUCCESS"},
        {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
        {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
        {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
        {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
        {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
        {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"},
        {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
        {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX"},
        {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
        {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"},
        {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
        {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
        {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"},
    };
    if (!pstr) RETURN(violation(CUDA_ERROR_INVALID_VALUE, "cuGetErrorName: pstr is NULL"));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == (int)error) {
            *pstr = names[i].name;
            RETURN(CUDA_SUCCESS);
        }
    *pstr = NULL;
    RETURN(CUDA_ERROR_INVALID_VALUE);
}

/* ---- the mock's own entry points (mock_cuda.h) ---------------------------------------- */

MOCK_API int mock_cuda_violations(void) {
    pthread_mutex_lock(&lock);
    int n = n_violations;
    pthread_mutex_unlock(&lock);
    return n;
}

MOCK_API const char *mock_cuda_violation(int i) {
    pthread_mutex_lock(&lock);
    const char *m = i >= 0 && i < n_violations && i < MOCK_MAX_MSGS ? msgs[i] : NULL;
    pthread_mutex_unlock(&lock);
    return m;
}

MOCK_API void mock_cuda_reset(void) {
    pthread_mutex_lock(&lock);
    n_violations = 0;
    launches_checked = 0;
    memset(calls, 0, sizeof calls);
    pthread_mutex_unlock(&lock);
}

MOCK_API int mock_cuda_fail(const char *spec) {
    pthread_mutex_lock(&lock);
    bool ok = set_spec(spec ? spec : "");
    pthread_mutex_unlock(&lock);
    return ok ? 0 : -1;
}

MOCK_API long mock_cuda_calls(const char *name) {
    long n = -1;
    pthread_mutex_lock(&lock);
    if (!name) n = launches_checked;
    for (int i = 0; name && i < F_COUNT; i++)
        if (strcmp(entry_names[i], name) == 0) n = calls[i];
    pthread_mutex_unlock(&lock);
    return n;
}

MOCK_API void mock_cuda_live(int *n_alloc, int *n_modules, int *ctx_refs) {
    pthread_mutex_lock(&lock);
    *n_alloc = n_allocs;
    *n_modules = 0;
    for (struct CUmod_st *m = modules; m; m = m->next) *n_modules += m->is_loaded;
    *ctx_refs = primary.refs;
    pthread_mutex_unlock(&lock);
}
