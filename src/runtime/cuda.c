/* cuda.c - CUDA devices: the driver API (libcuda) and NVRTC (libnvrtc),
 * both loaded with dlopen on first use, so the library builds and runs
 * without either (a missing driver is a TC_ERR_DEVICE that says why).
 *
 * Devices: cuDeviceGet(index), its primary context (made current on every
 * call, so any thread may use the device under the API lock), target = the
 * CUDA dialect's with the device's block, grid and shared-memory limits.
 * Memory: cuMemAlloc; tc_buffer.ptr holds the CUdeviceptr. Copies are the
 * synchronous cuMemcpyHtoD/DtoH at a byte offset (ordered after launches on
 * the legacy default stream).
 * compile: source -> NVRTC -> PTX for compute_<major><minor> of the device,
 * cached as <cachedir>/<key>.ptx (key: "cuda", arch, NVRTC version, source),
 * then cuModuleLoadData + cuModuleGetFunction; programs stay in the device
 * by (key, fn_name). launch: cuLaunchKernel with global as the grid and
 * local as the block, one CUdeviceptr argument per buffer.
 * Compile only: tc_cuda_compile needs NVRTC alone; tc_cuda_check_item
 * renders a schedule item for CUDA and compiles it (TC_CUDA_CHECK=1 makes
 * the engine do that for every kernel it runs, on any device).
 */
#include "runtime/runtime.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LOG_MAX 2000 /* NVRTC log bytes quoted in an error */

/* the driver API types this file uses (cuda.h need not be installed) */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef unsigned long long CUdeviceptr;
typedef int nvrtcResult;
typedef void *nvrtcProgram;

/* cuDeviceGetAttribute attributes */
enum {
    ATTR_MAX_THREADS_PER_BLOCK = 1, /* lanes per block */
    ATTR_MAX_BLOCK_DIM_X = 2,       /* block x, y, z follow */
    ATTR_MAX_GRID_DIM_X = 5,        /* grid x, y, z follow */
    ATTR_MAX_SHARED_PER_BLOCK = 8,  /* bytes */
    ATTR_CC_MAJOR = 75,             /* compute capability */
    ATTR_CC_MINOR = 76,
};

typedef struct {
    bool is_loaded; /* every entry below resolved */
    CUresult init;  /* cuInit's result (0: fine) */
    char why[160];  /* why the driver is unusable */
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDeviceGetCount)(int *n);
    CUresult (*cuDeviceGet)(CUdevice *d, int index);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice d);
    CUresult (*cuDeviceGetAttribute)(int *v, int attr, CUdevice d);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice d);
    CUresult (*cuCtxSetCurrent)(CUcontext c);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t n);
    CUresult (*cuMemFree)(CUdeviceptr p);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t n);
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t n);
    CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
    CUresult (*cuModuleUnload)(CUmodule m);
    CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned shared, void *stream,
                               void **params, void **extra);
    CUresult (*cuGetErrorName)(CUresult r, const char **name);
} cuda_api;

typedef struct {
    bool is_loaded;   /* every entry below resolved */
    char why[160];    /* why NVRTC is unusable */
    int major, minor; /* nvrtcVersion */
    nvrtcResult (*create)(nvrtcProgram *p, const char *src, const char *name, int n_headers,
                          const char *const *headers, const char *const *include_names);
    nvrtcResult (*compile)(nvrtcProgram p, int n_options, const char *const *options);
    nvrtcResult (*log_size)(nvrtcProgram p, size_t *n);
    nvrtcResult (*log)(nvrtcProgram p, char *log);
    nvrtcResult (*ptx_size)(nvrtcProgram p, size_t *n);
    nvrtcResult (*ptx)(nvrtcProgram p, char *ptx);
    nvrtcResult (*destroy)(nvrtcProgram *p);
    const char *(*error_string)(nvrtcResult r);
    nvrtcResult (*version)(int *major, int *minor);
} nvrtc_api;

static cuda_api cu;             /* loaded once; the libraries stay loaded */
static nvrtc_api nv;            /* loaded once */
static bool cu_tried, nv_tried; /* a load was attempted */

/* dlopens the first of names that loads; NULL with why filled */
static void *open_first(const char *const *names, const char *env, char *why, size_t n) {
    const char *over = getenv(env);
    if (over && *over) {
        void *h = dlopen(over, RTLD_NOW | RTLD_LOCAL);
        if (!h) snprintf(why, n, "cannot load %s='%s': %s", env, over, dlerror());
        return h;
    }
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    snprintf(why, n, "%s not found", names[0]);
    return NULL;
}

/* resolves entry `sym` of h into *slot; false (and why) if it is missing */
static bool sym(void *h, const char *name, void *slot, char *why, size_t n) {
    void *f = dlsym(h, name);
    if (!f) snprintf(why, n, "symbol %s missing", name);
    memcpy(slot, &f, sizeof f);
    return f != NULL;
}

#define SYM(api, field, name) ok = ok && sym(h, name, &api.field, api.why, sizeof api.why)

/* the name of a driver result (the stub library cannot name its own) */
static const char *cu_name(CUresult r) {
    const char *e = NULL;
    if (cu.cuGetErrorName && cu.cuGetErrorName(r, &e) == 0 && e) return e;
    switch (r) {
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    default: return "a CUDA error";
    }
}

static bool load_cuda(void) {
    if (cu_tried) return cu.is_loaded;
    cu_tried = true;
    static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
    void *h = open_first(names, "TC_CUDA_LIB", cu.why, sizeof cu.why);
    bool ok = h != NULL;
    SYM(cu, cuInit, "cuInit");
    SYM(cu, cuDeviceGetCount, "cuDeviceGetCount");
    SYM(cu, cuDeviceGet, "cuDeviceGet");
    SYM(cu, cuDeviceGetName, "cuDeviceGetName");
    SYM(cu, cuDeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(cu, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cu, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(cu, cuCtxSetCurrent, "cuCtxSetCurrent");
    SYM(cu, cuCtxSynchronize, "cuCtxSynchronize");
    SYM(cu, cuMemAlloc, "cuMemAlloc_v2");
    SYM(cu, cuMemFree, "cuMemFree_v2");
    SYM(cu, cuMemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cu, cuMemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(cu, cuModuleLoadData, "cuModuleLoadData");
    SYM(cu, cuModuleUnload, "cuModuleUnload");
    SYM(cu, cuModuleGetFunction, "cuModuleGetFunction");
    SYM(cu, cuLaunchKernel, "cuLaunchKernel");
    SYM(cu, cuGetErrorName, "cuGetErrorName");
    if (ok) {
        cu.init = cu.cuInit(0);
        ok = cu.init == 0;
        if (!ok)
            snprintf(cu.why, sizeof cu.why, "cuInit failed: %s (%d)", cu_name(cu.init), cu.init);
    }
    cu.is_loaded = ok;
    return ok;
}

static bool load_nvrtc(void) {
    if (nv_tried) return nv.is_loaded;
    nv_tried = true;
    static const char *const names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                        "libnvrtc.so.11.2", NULL};
    void *h = open_first(names, "TC_NVRTC_LIB", nv.why, sizeof nv.why);
    bool ok = h != NULL;
    SYM(nv, create, "nvrtcCreateProgram");
    SYM(nv, compile, "nvrtcCompileProgram");
    SYM(nv, log_size, "nvrtcGetProgramLogSize");
    SYM(nv, log, "nvrtcGetProgramLog");
    SYM(nv, ptx_size, "nvrtcGetPTXSize");
    SYM(nv, ptx, "nvrtcGetPTX");
    SYM(nv, destroy, "nvrtcDestroyProgram");
    SYM(nv, error_string, "nvrtcGetErrorString");
    SYM(nv, version, "nvrtcVersion");
    if (ok) nv.version(&nv.major, &nv.minor);
    nv.is_loaded = ok;
    return ok;
}

bool tc_nvrtc_available(char *why, size_t why_size) {
    bool ok = load_nvrtc();
    if (!ok && why) snprintf(why, why_size, "%s", nv.why);
    return ok;
}

/* ---- NVRTC ------------------------------------------------------------------ */

/* NVRTC's log of p into a new string (NULL when empty or on failure) */
static char *nvrtc_log(nvrtcProgram p) {
    size_t n = 0;
    if (nv.log_size(p, &n) != 0 || n <= 1) return NULL;
    char *log = tc_malloc(n + 1);
    if (log && nv.log(p, log) != 0) log[0] = '\0';
    if (log) log[n] = '\0';
    return log;
}

static bool is_blank(const char *s) {
    for (; s && *s; s++)
        if (*s != ' ' && *s != '\n' && *s != '\r' && *s != '\t') return false;
    return true;
}

/* PTX of p into *ptx (tc_malloc'ed) */
TC_MUST_USE static tc_status nvrtc_ptx(nvrtcProgram p, const char *fn_name, char **ptx) {
    size_t n = 0;
    if (nv.ptx_size(p, &n) != 0 || n == 0)
        return tc_error_set(TC_ERR_COMPILE, "CUDA compile of '%s': nvrtcGetPTXSize failed",
                            fn_name);
    *ptx = tc_malloc(n + 1);
    if (!*ptx) return TC_ERR_MEMORY;
    if (nv.ptx(p, *ptx) != 0) {
        tc_free(*ptx);
        *ptx = NULL;
        return tc_error_set(TC_ERR_COMPILE, "CUDA compile of '%s': nvrtcGetPTX failed", fn_name);
    }
    (*ptx)[n] = '\0';
    return TC_OK;
}

TC_MUST_USE tc_status tc_cuda_compile(const char *src, const char *fn_name, const char *arch, bool is_strict,
                          char **ptx) {
    if (ptx) *ptx = NULL;
    if (!load_nvrtc())
        return tc_error_set(TC_ERR_DEVICE, "CUDA compile of '%s': NVRTC is not available (%s)",
                            fn_name, nv.why);
    const char *env = getenv("TC_CUDA_ARCH");
    if (!arch) arch = env && *env ? env : "sm_80";
    char opt_arch[64];
    snprintf(opt_arch, sizeof opt_arch, "--gpu-architecture=compute_%s",
             strncmp(arch, "sm_", 3) == 0 ? arch + 3 : arch);
    const char *opts[] = {opt_arch, "--std=c++14"};
    nvrtcProgram p = NULL;
    nvrtcResult r = nv.create(&p, src, "tinyc.cu", 0, NULL, NULL);
    if (r != 0)
        return tc_error_set(TC_ERR_COMPILE, "CUDA compile of '%s': nvrtcCreateProgram: %s", fn_name,
                            nv.error_string(r));
    r = nv.compile(p, 2, opts);
    char *log = nvrtc_log(p);
    tc_status st = TC_OK;
    if (r != 0 || (is_strict && !is_blank(log)))
        st = tc_error_set(TC_ERR_COMPILE, "CUDA compile of '%s' for %s %s (%s):\n%.*s", fn_name,
                          arch, r != 0 ? "failed" : "warned", nv.error_string(r), LOG_MAX,
                          log ? log : "(no log)");
    if (st == TC_OK && ptx) st = nvrtc_ptx(p, fn_name, ptx);
    tc_free(log);
    nv.destroy(&p);
    return st;
}

/* ---- the compile-only check of every kernel (TC_CUDA_CHECK=1) ------------------- */

static int check_state; /* 0: not decided, 1: on, -1: off */

bool tc_cuda_check_enabled(void) {
    if (check_state == 0) {
        const char *e = getenv("TC_CUDA_CHECK");
        check_state = e && *e && strcmp(e, "0") != 0 ? 1 : -1;
        char why[200];
        if (check_state == 1 && !tc_nvrtc_available(why, sizeof why)) {
            fprintf(stderr,
                    "tinyc: TC_CUDA_CHECK: NVRTC is not available (%s): CUDA compile "
                    "checks skipped\n",
                    why);
            check_state = -1;
        }
    }
    return check_state == 1;
}

TC_MUST_USE tc_status tc_cuda_check_item(const tc_sched_item *it) {
    tc_kernel_uops *k = tc_codegen(it, &tc_dialect_cuda.target);
    if (!k) return tc_error_code();
    char *src = tc_render(&tc_dialect_cuda, k);
    tc_status st = src ? TC_OK : tc_error_code();
    char key[33];
    if (st == TC_OK) /* a source that compiled cleanly once is not compiled again */
        st = tc_cache_key(key, "CUDA check", "cuda-check\n%d.%d\n%s\n%s", nv.major, nv.minor,
                          getenv("TC_CUDA_ARCH") ? getenv("TC_CUDA_ARCH") : "", src);
    char *done = NULL;
    size_t n = 0;
    if (st == TC_OK && tc_cache_load(key, ".ok", &done, &n) == TC_OK && !done) {
        st = tc_cuda_compile(src, k->name, NULL, true, NULL);
        if (st != TC_OK) fprintf(stderr, "%s", src);
        else tc_cache_put(key, ".ok", "ok\n", 3);
    }
    tc_free(done);
    tc_free(src);
    tc_kernel_uops_free(k);
    return st;
}

/* ---- devices ------------------------------------------------------------------ */

struct tc_program {
    char key[33];        /* hash of arch, NVRTC version and source */
    char *fn_name;       /* the kernel's name (owned) */
    CUmodule module;     /* loaded PTX */
    CUfunction function; /* the kernel */
};

typedef struct {
    CUdevice device;    /* the device */
    CUcontext context;  /* its primary context (one retain) */
    char arch[16];      /* "sm_90" */
    tc_ptrvec programs; /* tc_program *, owned */
} cuda_ctx;

int tc_cuda_count(char *why, size_t why_size) {
    if (!load_cuda()) {
        snprintf(why, why_size, "no CUDA driver: %s", cu.why);
        return 0;
    }
    int n = 0;
    CUresult r = cu.cuDeviceGetCount(&n);
    if (r != 0 || n <= 0) {
        snprintf(why, why_size, "no CUDA device (cuDeviceGetCount: %s, %d devices)", cu_name(r), n);
        return 0;
    }
    return n;
}

/* makes the device's context current; false with TC_ERR_RUNTIME set */
static bool current(tc_dev *d) {
    cuda_ctx *c = d->ctx;
    CUresult r = cu.cuCtxSetCurrent(c->context);
    if (r != 0) tc_error_set(TC_ERR_RUNTIME, "%s: cuCtxSetCurrent failed: %s", d->name, cu_name(r));
    return r == 0;
}

static void *cuda_alloc(tc_dev *d, size_t nbytes) {
    CUdeviceptr p = 0;
    if (!current(d)) return NULL;
    CUresult r = cu.cuMemAlloc(&p, nbytes ? nbytes : 16);
    if (r != 0 || !p) {
        tc_error_set(r == 2 ? TC_ERR_MEMORY : TC_ERR_RUNTIME,
                     "%s: cuMemAlloc of %zu bytes failed: %s", d->name, nbytes, cu_name(r));
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

static void cuda_free(tc_dev *d, void *ptr) {
    if (ptr && current(d)) cu.cuMemFree((CUdeviceptr)(uintptr_t)ptr);
}

TC_MUST_USE static tc_status cuda_copyin(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes) {
    if (!current(d)) return tc_error_code();
    CUresult r = cu.cuMemcpyHtoD((CUdeviceptr)(uintptr_t)dst + offset, src, nbytes);
    if (r != 0)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s: cuMemcpyHtoD of %zu bytes at offset %zu failed: %s", d->name,
                            nbytes, offset, cu_name(r));
    return TC_OK;
}

TC_MUST_USE static tc_status cuda_copyout(tc_dev *d, void *dst, const void *src, size_t offset, size_t nbytes) {
    if (!current(d)) return tc_error_code();
    CUresult r = cu.cuMemcpyDtoH(dst, (CUdeviceptr)(uintptr_t)src + offset, nbytes);
    if (r != 0)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s: cuMemcpyDtoH of %zu bytes at offset %zu failed: %s", d->name,
                            nbytes, offset, cu_name(r));
    return TC_OK;
}

static void program_free(tc_program *p) {
    if (p->module) cu.cuModuleUnload(p->module);
    tc_free(p->fn_name);
    tc_free(p);
}

/* PTX of src for the device: from the cache, else NVRTC (then cached) */
TC_MUST_USE static tc_status device_ptx(const cuda_ctx *c, const char *key, const char *src,
                            const char *fn_name, char **ptx) {
    size_t n = 0;
    tc_status st = tc_cache_load(key, ".ptx", ptx, &n);
    if (st != TC_OK || *ptx) return st;
    st = tc_cuda_compile(src, fn_name, c->arch, false, ptx);
    if (st == TC_OK) tc_cache_put(key, ".ptx", *ptx, strlen(*ptx));
    return st;
}

static tc_program *program_new(tc_dev *d, const char *key, const char *src, const char *fn_name) {
    cuda_ctx *c = d->ctx;
    char *ptx = NULL;
    tc_program *p = tc_calloc(1, sizeof *p);
    if (!p || !(p->fn_name = tc_strdup(fn_name)) ||
        device_ptx(c, key, src, fn_name, &ptx) != TC_OK) {
        if (p) program_free(p);
        return NULL;
    }
    memcpy(p->key, key, 33);
    CUresult r = cu.cuModuleLoadData(&p->module, ptx);
    const char *call = "cuModuleLoadData";
    if (r == 0)
        call = "cuModuleGetFunction", r = cu.cuModuleGetFunction(&p->function, p->module, fn_name);
    tc_free(ptx);
    if (r != 0) {
        tc_error_set(TC_ERR_COMPILE, "%s compile of '%s': %s failed: %s", d->name, fn_name, call,
                     cu_name(r));
        program_free(p);
        return NULL;
    }
    return p;
}

static tc_program *cuda_compile(tc_dev *d, const char *src, const char *fn_name) {
    cuda_ctx *c = d->ctx;
    if (!src || !fn_name || !*fn_name) {
        tc_error_set(TC_ERR_INVALID, "%s compile: no source or no function name", d->name);
        return NULL;
    }
    if (!current(d)) return NULL;
    char key[33]; /* the PTX depends on the arch, the NVRTC version and the source */
    if (tc_cache_key(key, d->name, "cuda\n%s\n%d.%d\n%s", c->arch, nv.major, nv.minor, src) !=
        TC_OK)
        return NULL;
    for (int i = 0; i < c->programs.n; i++) {
        tc_program *p = c->programs.items[i];
        if (strcmp(p->key, key) == 0 && strcmp(p->fn_name, fn_name) == 0) return p;
    }
    tc_program *p = program_new(d, key, src, fn_name);
    if (p && tc_ptrvec_push(&c->programs, p) != TC_OK) {
        program_free(p);
        return NULL;
    }
    return p;
}

/* runs p on bufs (CUdeviceptr values) with grid = global, block = local */
TC_MUST_USE static tc_status cuda_launch(tc_dev *d, tc_program *p, void **bufs, int n_bufs,
                             const tc_launch_dims *dims) {
    if (!p || !dims || n_bufs < 0 || (n_bufs > 0 && !bufs))
        return tc_error_set(TC_ERR_INVALID, "%s launch: bad arguments (%d buffers)", d->name,
                            n_bufs);
    for (int i = 0; i < 3; i++)
        if (dims->global[i] == 0) return TC_OK;
    if (!current(d)) return tc_error_code();
    CUdeviceptr vals[64];
    void *args[65]; /* NULL-terminated: a driver reads only the kernel's count, and the
                       test driver (tests/runtime/mock_cuda.c) checks that count with it */
    if (n_bufs > 64)
        return tc_error_set(TC_ERR_INVALID, "%s launch of '%s': %d buffers (at most 64)", d->name,
                            p->fn_name, n_bufs);
    for (int i = 0; i < n_bufs; i++) {
        vals[i] = (CUdeviceptr)(uintptr_t)bufs[i];
        args[i] = &vals[i];
    }
    args[n_bufs] = NULL;
    CUresult r =
        cu.cuLaunchKernel(p->function, (unsigned)dims->global[0], (unsigned)dims->global[1],
                          (unsigned)dims->global[2], (unsigned)dims->local[0],
                          (unsigned)dims->local[1], (unsigned)dims->local[2], 0, NULL, args, NULL);
    if (r != 0)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s launch of '%s' (grid %lldx%lldx%lld, block %lldx%lldx%lld) failed: "
                            "cuLaunchKernel: %s",
                            d->name, p->fn_name, (long long)dims->global[0],
                            (long long)dims->global[1], (long long)dims->global[2],
                            (long long)dims->local[0], (long long)dims->local[1],
                            (long long)dims->local[2], cu_name(r));
    return TC_OK;
}

TC_MUST_USE static tc_status cuda_synchronize(tc_dev *d) {
    if (!current(d)) return tc_error_code();
    CUresult r = cu.cuCtxSynchronize();
    if (r != 0)
        return tc_error_set(TC_ERR_RUNTIME, "%s: cuCtxSynchronize failed: %s", d->name, cu_name(r));
    return TC_OK;
}

static void cuda_close(tc_dev *d) {
    cuda_ctx *c = d->ctx;
    if (current(d)) cu.cuCtxSynchronize();
    for (int i = 0; i < c->programs.n; i++) program_free(c->programs.items[i]);
    tc_ptrvec_free(&c->programs);
    cu.cuDevicePrimaryCtxRelease(c->device);
    tc_free(c);
    tc_free(d);
}

/* the CUDA dialect's target with the device's limits */
static void device_target(CUdevice dev, tc_target *t) {
    *t = tc_dialect_cuda.target;
    int v = 0;
    if (cu.cuDeviceGetAttribute(&v, ATTR_MAX_THREADS_PER_BLOCK, dev) == 0 && v > 0)
        t->lanes_max = v;
    for (int i = 0; i < 3; i++) {
        if (cu.cuDeviceGetAttribute(&v, ATTR_MAX_BLOCK_DIM_X + i, dev) == 0 && v > 0)
            t->local_max[i] = v;
        if (cu.cuDeviceGetAttribute(&v, ATTR_MAX_GRID_DIM_X + i, dev) == 0 && v > 0)
            t->global_max[i] = v;
    }
    if (cu.cuDeviceGetAttribute(&v, ATTR_MAX_SHARED_PER_BLOCK, dev) == 0 && v > 0)
        t->shared_max = v;
}

/* device `index`, its context and arch into c; false with TC_ERR_DEVICE set */
static bool open_device(cuda_ctx *c, int index) {
    char why[200];
    if (tc_cuda_count(why, sizeof why) <= index) {
        tc_error_set(TC_ERR_DEVICE, "CUDA device %d is not available (%s)", index,
                     cu.is_loaded ? "fewer devices" : why);
        return false;
    }
    int major = 0, minor = 0;
    CUresult r = cu.cuDeviceGet(&c->device, index);
    const char *call = "cuDeviceGet";
    if (r == 0)
        call = "cuDeviceGetAttribute",
        r = cu.cuDeviceGetAttribute(&major, ATTR_CC_MAJOR, c->device);
    if (r == 0) r = cu.cuDeviceGetAttribute(&minor, ATTR_CC_MINOR, c->device);
    if (r == 0)
        call = "cuDevicePrimaryCtxRetain", r = cu.cuDevicePrimaryCtxRetain(&c->context, c->device);
    if (r != 0) {
        tc_error_set(TC_ERR_DEVICE, "CUDA device %d: %s failed: %s", index, call, cu_name(r));
        return false;
    }
    snprintf(c->arch, sizeof c->arch, "sm_%d%d", major, minor);
    if (!load_nvrtc()) {
        cu.cuDevicePrimaryCtxRelease(c->device);
        tc_error_set(TC_ERR_DEVICE, "CUDA device %d: NVRTC is not available (%s)", index, nv.why);
        return false;
    }
    return true;
}

tc_dev *tc_cuda_device_create(int id, int index) {
    tc_dev *d = tc_calloc(1, sizeof *d);
    cuda_ctx *c = d ? tc_calloc(1, sizeof *c) : NULL;
    if (!c || !open_device(c, index)) {
        tc_free(c);
        tc_free(d);
        return NULL;
    }
    if (index == 0) snprintf(d->name, sizeof d->name, "CUDA");
    else snprintf(d->name, sizeof d->name, "CUDA:%d", index);
    d->id = id;
    d->ctx = c;
    d->dialect = &tc_dialect_cuda;
    device_target(c->device, &d->target);
    d->alloc = cuda_alloc;
    d->free = cuda_free;
    d->copyin = cuda_copyin;
    d->copyout = cuda_copyout;
    d->compile = cuda_compile;
    d->launch = cuda_launch;
    d->synchronize = cuda_synchronize;
    d->close = cuda_close;
    return d;
}
