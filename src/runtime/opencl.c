/* opencl.c - OpenCL devices through the ICD loader (libOpenCL).
 *
 * Devices: every device of every platform, in platform order ("OPENCL" is
 * the first, "OPENCL:1" the next). A device is a context and one in-order
 * queue; its target is the OpenCL dialect's, with the device's own limits
 * on lanes per work-group and local memory.
 * Memory: cl_mem buffers (tc_buffer.ptr holds the cl_mem); copies are
 * blocking reads and writes at a byte offset.
 * compile: key = tc_hash_hex("opencl", device name, driver version, source).
 * A kernel that enables cl_khr_fp64 (uses float64) is refused with
 * TC_ERR_DEVICE on a device whose extensions lack it.
 * Programs (cl_program + cl_kernel) stay in the device by (key, fn_name). On
 * a miss the binary <cachedir>/<key>.clbin is loaded when it exists and
 * builds; else the source is built (the build log goes into the error
 * message on failure) and its binary is stored for the next process.
 * launch: one clSetKernelArg per buffer, then an NDRange of global*local
 * work-items in work-groups of local (global counts work-groups).
 * Built only with TC_HAVE_OPENCL; otherwise every entry says why not.
 * Callers hold the API lock.
 * Every OpenCL object this file creates (context, queue, buffer, program,
 * kernel) is counted while it lives (tc_opencl_live_objects), so tests can
 * check that tc_shutdown releases all of ours: the leak checker cannot, as
 * pocl keeps its compiler's state for the life of the process and the
 * sanitizer run suppresses what is allocated inside pocl (tools/lsan.supp).
 */
#include "runtime/runtime.h"

#include <string.h>

#ifdef TC_HAVE_OPENCL

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#define MAX_CL_DEVICES 64   /* devices looked at over all platforms */
#define MAX_PLATFORMS  16   /* platforms looked at */
#define LOG_MAX        2000 /* build-log bytes quoted in an error */
/* kernels are generated: their warnings (x != x as a NaN test, x < x left
 * unfolded) say nothing to a user; errors still come with the log */
#define BUILD_OPTIONS "-w"

static int64_t build_count;  /* programs built from source in this process */
static int64_t live_objects; /* OpenCL objects created here and not yet released */
static bool is_fp64_hidden;  /* tests: every device acts as if it lacked cl_khr_fp64 */

int64_t tc_opencl_live_objects(void) {
    return live_objects;
}

void tc_opencl_hide_fp64(bool hidden) {
    is_fp64_hidden = hidden;
}

struct tc_program {
    char key[33];       /* hash of device, driver and source */
    char *fn_name;      /* the kernel's name (owned) */
    cl_program program; /* built program (one reference) */
    cl_kernel kernel;   /* the kernel fn_name (one reference) */
};

typedef struct {
    cl_device_id device;    /* the device */
    cl_context context;     /* a context on it alone */
    cl_command_queue queue; /* in-order queue: launches and copies run in call order */
    char device_name[128];  /* CL_DEVICE_NAME */
    char driver[64];        /* CL_DRIVER_VERSION */
    bool has_fp64;          /* CL_DEVICE_EXTENSIONS lists cl_khr_fp64 (double) */
    tc_ptrvec programs;     /* tc_program *, owned */
} ocl_ctx;

/* the name of an OpenCL error code, for messages */
static const char *cl_name(cl_int err) {
    switch (err) {
    case CL_SUCCESS: return "CL_SUCCESS";
    case CL_DEVICE_NOT_FOUND: return "CL_DEVICE_NOT_FOUND";
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_COMPILER_NOT_AVAILABLE: return "CL_COMPILER_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_DEVICE: return "CL_INVALID_DEVICE";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_INVALID_BUILD_OPTIONS: return "CL_INVALID_BUILD_OPTIONS";
    case CL_INVALID_PROGRAM_EXECUTABLE: return "CL_INVALID_PROGRAM_EXECUTABLE";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_WORK_DIMENSION: return "CL_INVALID_WORK_DIMENSION";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_CONTEXT: return "CL_INVALID_CONTEXT";
    case CL_INVALID_COMMAND_QUEUE: return "CL_INVALID_COMMAND_QUEUE";
    case CL_INVALID_PLATFORM: return "CL_INVALID_PLATFORM";
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "an OpenCL error";
    }
}

/* ---- devices ---------------------------------------------------------------- */

/* every device of every platform, in order; the count, or -1 with why set */
static int list_devices(cl_device_id *out, char *why, size_t why_size) {
    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint np = 0;
    cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &np);
    if (err != CL_SUCCESS || np == 0) {
        snprintf(why, why_size, "no OpenCL platform found (clGetPlatformIDs: %s, %d)", cl_name(err),
                 (int)err);
        return -1;
    }
    int n = 0;
    for (cl_uint p = 0; p < np && p < MAX_PLATFORMS && n < MAX_CL_DEVICES; p++) {
        cl_uint nd = 0;
        err = clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, (cl_uint)(MAX_CL_DEVICES - n),
                             out + n, &nd);
        if (err == CL_SUCCESS) n += (int)(nd < (cl_uint)(MAX_CL_DEVICES - n) ? nd : 0);
    }
    if (n == 0) snprintf(why, why_size, "%u OpenCL platform(s) but no device", (unsigned)np);
    return n ? n : -1;
}

int tc_opencl_count(char *why, size_t why_size) {
    cl_device_id devs[MAX_CL_DEVICES];
    int n = list_devices(devs, why, why_size);
    return n < 0 ? 0 : n;
}

int64_t tc_opencl_build_count(void) {
    return build_count;
}

/* a string property of the device into buf */
static void device_string(cl_device_id dev, cl_device_info what, char *buf, size_t size) {
    buf[0] = '\0';
    if (clGetDeviceInfo(dev, what, size - 1, buf, NULL) != CL_SUCCESS) buf[0] = '\0';
    buf[size - 1] = '\0';
}

/* the dialect's target with the device's limits */
static void device_target(cl_device_id dev, tc_target *t) {
    *t = tc_dialect_opencl.target;
    size_t wg = 0, items[3] = {0, 0, 0};
    cl_ulong local = 0;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL) == CL_SUCCESS &&
        wg > 0)
        t->lanes_max = (int64_t)wg;
    if (clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, NULL) ==
        CL_SUCCESS)
        for (int d = 0; d < 3; d++)
            if (items[d] > 0) t->local_max[d] = (int64_t)items[d];
    if (clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL) == CL_SUCCESS)
        t->shared_max = (int64_t)local;
}

/* ---- memory ----------------------------------------------------------------- */

static void *ocl_alloc(tc_dev *d, size_t nbytes) {
    ocl_ctx *c = d->ctx;
    cl_int err = CL_SUCCESS;
    cl_mem m = clCreateBuffer(c->context, CL_MEM_READ_WRITE, nbytes ? nbytes : 16, NULL, &err);
    live_objects += m != NULL;
    if (!m || err != CL_SUCCESS) {
        tc_status code = err == CL_INVALID_BUFFER_SIZE || err == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                                 err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY
                             ? TC_ERR_MEMORY
                             : TC_ERR_RUNTIME;
        tc_error_set(code, "%s: clCreateBuffer of %zu bytes failed: %s (%d)", d->name, nbytes,
                     cl_name(err), (int)err);
        return NULL;
    }
    return m;
}

static void ocl_free(tc_dev *d, void *ptr) {
    (void)d;
    if (ptr) clReleaseMemObject((cl_mem)ptr), live_objects--;
}

TC_MUST_USE static tc_status ocl_copyin(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes) {
    ocl_ctx *c = d->ctx;
    cl_int err =
        clEnqueueWriteBuffer(c->queue, (cl_mem)dst, CL_TRUE, offset, nbytes, src, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s: clEnqueueWriteBuffer of %zu bytes at offset %zu failed: %s (%d)",
                            d->name, nbytes, offset, cl_name(err), (int)err);
    return TC_OK;
}

TC_MUST_USE static tc_status ocl_copyout(tc_dev *d, void *dst, const void *src, size_t offset, size_t nbytes) {
    ocl_ctx *c = d->ctx;
    cl_int err =
        clEnqueueReadBuffer(c->queue, (cl_mem)src, CL_TRUE, offset, nbytes, dst, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s: clEnqueueReadBuffer of %zu bytes at offset %zu failed: %s (%d)",
                            d->name, nbytes, offset, cl_name(err), (int)err);
    return TC_OK;
}

/* ---- programs ----------------------------------------------------------------- */

static void program_free(tc_program *p) {
    if (p->kernel) clReleaseKernel(p->kernel), live_objects--;
    if (p->program) clReleaseProgram(p->program), live_objects--;
    tc_free(p->fn_name);
    tc_free(p);
}

/* the cached binary of key, built; NULL when absent or unusable */
static cl_program load_binary(const ocl_ctx *c, const char *key) {
    char *bin = NULL;
    size_t n = 0;
    if (tc_cache_load(key, ".clbin", &bin, &n) != TC_OK || !bin) return NULL;
    cl_int err = CL_SUCCESS, status = CL_SUCCESS;
    const unsigned char *b = (const unsigned char *)bin;
    cl_program p = clCreateProgramWithBinary(c->context, 1, &c->device, &n, &b, &status, &err);
    tc_free(bin);
    if (!p) return NULL;
    live_objects++;
    if (err != CL_SUCCESS || status != CL_SUCCESS ||
        clBuildProgram(p, 1, &c->device, BUILD_OPTIONS, NULL, NULL) != CL_SUCCESS) {
        clReleaseProgram(p), live_objects--;
        return NULL;
    }
    return p;
}

/* stores the binary of p under key (failures only cost the next build) */
static void store_binary(cl_program p, const char *key) {
    size_t n = 0;
    if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof n, &n, NULL) != CL_SUCCESS || n == 0)
        return;
    unsigned char *bin = tc_malloc(n);
    if (bin && clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) == CL_SUCCESS)
        tc_cache_put(key, ".clbin", bin, n);
    tc_free(bin);
}

/* builds src for the device; on failure the error quotes the build log */
static cl_program build_source(const tc_dev *d, const char *src, const char *fn_name) {
    const ocl_ctx *c = d->ctx;
    cl_int err = CL_SUCCESS;
    size_t len = strlen(src);
    cl_program p = clCreateProgramWithSource(c->context, 1, &src, &len, &err);
    live_objects += p != NULL;
    if (!p || err != CL_SUCCESS) {
        tc_error_set(TC_ERR_COMPILE,
                     "%s compile of '%s': clCreateProgramWithSource failed: %s (%d)", d->name,
                     fn_name, cl_name(err), (int)err);
        if (p) clReleaseProgram(p), live_objects--;
        return NULL;
    }
    build_count++;
    err = clBuildProgram(p, 1, &c->device, BUILD_OPTIONS, NULL, NULL);
    if (err == CL_SUCCESS) return p;
    char log[LOG_MAX + 8];
    size_t n = 0;
    log[0] = '\0';
    if (clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) == CL_SUCCESS) {
        char *full = tc_malloc(n + 1);
        if (full && clGetProgramBuildInfo(p, c->device, CL_PROGRAM_BUILD_LOG, n, full, NULL) ==
                        CL_SUCCESS) {
            full[n] = '\0';
            snprintf(log, sizeof log, "%.*s%s", LOG_MAX, full, n > LOG_MAX ? "\n[...]" : "");
        }
        tc_free(full);
    }
    tc_error_set(TC_ERR_COMPILE, "%s compile of '%s' failed (clBuildProgram: %s, %d):\n%s", d->name,
                 fn_name, cl_name(err), (int)err, log[0] ? log : "(no build log)");
    clReleaseProgram(p), live_objects--;
    return NULL;
}

/* a new program for (key, fn_name): from the binary cache or built */
static tc_program *program_new(const tc_dev *d, const char *key, const char *src,
                               const char *fn_name) {
    const ocl_ctx *c = d->ctx;
    tc_program *p = tc_calloc(1, sizeof *p);
    if (!p || !(p->fn_name = tc_strdup(fn_name))) {
        tc_free(p);
        return NULL;
    }
    memcpy(p->key, key, 33);
    p->program = load_binary(c, key);
    if (!p->program) {
        p->program = build_source(d, src, fn_name);
        if (p->program) store_binary(p->program, key);
    }
    cl_int err = CL_SUCCESS;
    if (p->program) p->kernel = clCreateKernel(p->program, fn_name, &err);
    live_objects += p->kernel != NULL;
    if (p->program && (!p->kernel || err != CL_SUCCESS))
        tc_error_set(TC_ERR_COMPILE, "%s compile: clCreateKernel('%s') failed: %s (%d)", d->name,
                     fn_name, cl_name(err), (int)err);
    if (!p->kernel) {
        program_free(p);
        return NULL;
    }
    return p;
}

static tc_program *ocl_compile(tc_dev *d, const char *src, const char *fn_name) {
    if (!src || !fn_name || !*fn_name) {
        tc_error_set(TC_ERR_INVALID, "%s compile: no source or no function name (fn '%s')", d->name,
                     fn_name ? fn_name : "(null)");
        return NULL;
    }
    ocl_ctx *c = d->ctx;
    /* the renderer enables cl_khr_fp64 exactly in kernels that use float64 */
    if ((!c->has_fp64 || is_fp64_hidden) && strstr(src, "cl_khr_fp64")) {
        tc_error_set(TC_ERR_DEVICE,
                     "%s (%s) has no float64: the device lacks cl_khr_fp64, which kernel '%s' "
                     "needs (cast to float32 before moving to this device)",
                     d->name, c->device_name, fn_name);
        return NULL;
    }
    char key[33];
    /* the binary depends on the device, its driver and the source */
    if (tc_cache_key(key, d->name, "opencl\n%s\n%s\n%s", c->device_name, c->driver, src) != TC_OK)
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

/* runs prog on bufs (cl_mem) over global*local work-items */
TC_MUST_USE static tc_status ocl_launch(tc_dev *d, tc_program *p, void **bufs, int n_bufs,
                            const tc_launch_dims *dims) {
    ocl_ctx *c = d->ctx;
    if (!p || !dims || n_bufs < 0 || (n_bufs > 0 && !bufs))
        return tc_error_set(TC_ERR_INVALID, "%s launch: bad arguments (program %p, %d buffers)",
                            d->name, (void *)p, n_bufs);
    size_t gws[3], lws[3];
    for (int i = 0; i < 3; i++) {
        if (dims->global[i] == 0) return TC_OK; /* an empty grid: nothing to run */
        if (dims->global[i] < 0 || dims->local[i] < 1)
            return tc_error_set(
                TC_ERR_INVALID, "%s launch of '%s': bad sizes global[%d]=%lld local[%d]=%lld",
                d->name, p->fn_name, i, (long long)dims->global[i], i, (long long)dims->local[i]);
        gws[i] = (size_t)(dims->global[i] * dims->local[i]);
        lws[i] = (size_t)dims->local[i];
    }
    for (int i = 0; i < n_bufs; i++) {
        cl_int err = clSetKernelArg(p->kernel, (cl_uint)i, sizeof(cl_mem), &bufs[i]);
        if (err != CL_SUCCESS)
            return tc_error_set(TC_ERR_RUNTIME,
                                "%s launch of '%s': clSetKernelArg(%d) failed: %s (%d)", d->name,
                                p->fn_name, i, cl_name(err), (int)err);
    }
    cl_int err = clEnqueueNDRangeKernel(c->queue, p->kernel, 3, NULL, gws, lws, 0, NULL, NULL);
    if (err != CL_SUCCESS)
        return tc_error_set(TC_ERR_RUNTIME,
                            "%s launch of '%s' (global %zux%zux%zu, local %zux%zux%zu) failed: "
                            "clEnqueueNDRangeKernel: %s (%d)",
                            d->name, p->fn_name, gws[0], gws[1], gws[2], lws[0], lws[1], lws[2],
                            cl_name(err), (int)err);
    return TC_OK;
}

TC_MUST_USE static tc_status ocl_synchronize(tc_dev *d) {
    ocl_ctx *c = d->ctx;
    cl_int err = clFinish(c->queue);
    if (err != CL_SUCCESS)
        return tc_error_set(TC_ERR_RUNTIME, "%s: clFinish failed: %s (%d)", d->name, cl_name(err),
                            (int)err);
    return TC_OK;
}

static void ocl_close(tc_dev *d) {
    ocl_ctx *c = d->ctx;
    if (c->queue) clFinish(c->queue);
    for (int i = 0; i < c->programs.n; i++) program_free(c->programs.items[i]);
    tc_ptrvec_free(&c->programs);
    if (c->queue) clReleaseCommandQueue(c->queue), live_objects--;
    if (c->context) clReleaseContext(c->context), live_objects--;
    tc_free(c);
    tc_free(d);
}

/* the context and queue of device `index`; false with TC_ERR_DEVICE set */
static bool open_device(ocl_ctx *c, int index) {
    cl_device_id devs[MAX_CL_DEVICES];
    char why[160];
    int n = list_devices(devs, why, sizeof why);
    if (n < 0 || index >= n) {
        tc_error_set(TC_ERR_DEVICE, "OpenCL device %d does not exist (%s)", index,
                     n < 0 ? why : "fewer devices now");
        return false;
    }
    c->device = devs[index];
    cl_int err = CL_SUCCESS;
    c->context = clCreateContext(NULL, 1, &c->device, NULL, NULL, &err);
    live_objects += c->context != NULL;
    const char *call = "clCreateContext";
    if (c->context && err == CL_SUCCESS) {
        call = "clCreateCommandQueue";
        c->queue = clCreateCommandQueue(c->context, c->device, 0, &err);
        live_objects += c->queue != NULL;
    }
    if (!c->context || !c->queue || err != CL_SUCCESS) {
        tc_error_set(TC_ERR_DEVICE, "OpenCL device %d: %s failed: %s (%d)", index, call,
                     cl_name(err), (int)err);
        return false;
    }
    device_string(c->device, CL_DEVICE_NAME, c->device_name, sizeof c->device_name);
    device_string(c->device, CL_DRIVER_VERSION, c->driver, sizeof c->driver);
    size_t len = 0;
    char *ext = NULL;
    if (clGetDeviceInfo(c->device, CL_DEVICE_EXTENSIONS, 0, NULL, &len) == CL_SUCCESS && len &&
        (ext = tc_malloc(len + 1)) &&
        clGetDeviceInfo(c->device, CL_DEVICE_EXTENSIONS, len, ext, NULL) == CL_SUCCESS) {
        ext[len] = '\0';
        c->has_fp64 = strstr(ext, "cl_khr_fp64") != NULL;
    }
    tc_free(ext);
    return true;
}

tc_dev *tc_opencl_device_create(int id, int index) {
    tc_dev *d = tc_calloc(1, sizeof *d);
    ocl_ctx *c = d ? tc_calloc(1, sizeof *c) : NULL;
    if (!c) {
        tc_free(d);
        return NULL;
    }
    d->ctx = c;
    if (!open_device(c, index)) {
        if (c->queue) clReleaseCommandQueue(c->queue), live_objects--;
        if (c->context) clReleaseContext(c->context), live_objects--;
        tc_free(c);
        tc_free(d);
        return NULL;
    }
    if (index == 0) snprintf(d->name, sizeof d->name, "OPENCL");
    else snprintf(d->name, sizeof d->name, "OPENCL:%d", index);
    d->id = id;
    d->dialect = &tc_dialect_opencl;
    device_target(c->device, &d->target);
    d->alloc = ocl_alloc;
    d->free = ocl_free;
    d->copyin = ocl_copyin;
    d->copyout = ocl_copyout;
    d->compile = ocl_compile;
    d->launch = ocl_launch;
    d->synchronize = ocl_synchronize;
    d->close = ocl_close;
    return d;
}

#else /* !TC_HAVE_OPENCL */

int tc_opencl_count(char *why, size_t why_size) {
    snprintf(why, why_size, "built without OpenCL support");
    return 0;
}

tc_dev *tc_opencl_device_create(int id, int index) {
    (void)id;
    tc_error_set(TC_ERR_DEVICE, "OpenCL device %d: built without OpenCL support", index);
    return NULL;
}

int64_t tc_opencl_build_count(void) {
    return 0;
}

int64_t tc_opencl_live_objects(void) {
    return 0;
}

void tc_opencl_hide_fp64(bool hidden) {
    (void)hidden;
}

#endif /* TC_HAVE_OPENCL */
