/* runtime.h - the interface of src/runtime: devices, buffers, programs.
 *
 * A device is a table of functions plus a context (ggml's backend model):
 * alloc/free, copies, compile (source -> program, cached on disk by source
 * hash), launch, synchronize. Devices are opened on first use and closed by
 * tc_runtime_shutdown. Device ids index a process-wide table; id 0 is CPU.
 */
#ifndef TC_RUNTIME_H
#define TC_RUNTIME_H

#include "graph/graph.h"

/* a device: function table + context. Not named tc_device: that name is the
 * public function tc_device(t) in tinyc.h, and C forbids both at file scope. */
typedef struct tc_dev tc_dev;
typedef struct tc_program tc_program;

/* what a launch needs besides the buffers */
typedef struct {
    int64_t global[3]; /* work-groups (CPU: ignored, loops are in the code) */
    int64_t local[3];  /* work-group size (CPU: ignored) */
} tc_launch_dims;

struct tc_dev {
    char name[32]; /* canonical name: "CPU", "OPENCL:1" */
    int id;        /* index in the device table */
    void *ctx;     /* backend state */
    /* device memory; alloc sets an error and returns NULL on failure */
    void *(*alloc)(tc_dev *d, size_t nbytes);
    void (*free)(tc_dev *d, void *ptr);
    tc_status (*copyin)(tc_dev *d, void *dst, const void *src, size_t nbytes);
    tc_status (*copyout)(tc_dev *d, void *dst, const void *src, size_t nbytes);
    /* source -> program with entry point fn_name; cached in memory and on disk */
    tc_program *(*compile)(tc_dev *d, const char *src, const char *fn_name);
    /* runs prog on bufs (device pointers, in kernel argument order) */
    tc_status (*launch)(tc_dev *d, tc_program *prog, void **bufs, int n_bufs,
                        const tc_launch_dims *dims);
    tc_status (*synchronize)(tc_dev *d);
    void (*close)(tc_dev *d); /* frees ctx, programs and the device itself */
};

/* device lookup: "CPU", "cpu:0", NULL (TC_DEVICE or CPU). Returns the id or
 * -1 with TC_ERR_DEVICE set (the message names `api`, the caller). */
int tc_device_open(const char *name, const char *api);
tc_dev *tc_device_get(int id); /* an opened device; NULL + TC_ERR_DEVICE for a bad id */

/* a buffer of nbytes on device id (refcount 1); NULL with an error set */
tc_buffer *tc_buffer_new(int device, size_t nbytes);
tc_status tc_buffer_copyin(tc_buffer *b, size_t offset, const void *src, size_t nbytes);
tc_status tc_buffer_copyout(tc_buffer *b, size_t offset, void *dst, size_t nbytes);
/* device-to-device copy of nbytes (same or different devices) */
tc_status tc_buffer_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

void tc_runtime_shutdown(void); /* closes every device; buffers must be released first */

/* ---- CPU device (cpu.c) -------------------------------------------------- */
/* compiles C source with the system compiler (TC_CC or cc) into a shared
 * object cached in tc_cachedir() under the hash of source and flags, loads
 * it with dlopen, calls kernels through libffi */
tc_dev *tc_cpu_device_create(int id);
int64_t tc_cpu_compile_count(void); /* compiler invocations in this process */

#endif /* TC_RUNTIME_H */
