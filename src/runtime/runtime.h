/* runtime.h - the interface of src/runtime: devices, buffers, programs.
 *
 * A device is a table of functions plus a context (ggml's backend model):
 * alloc/free, copies, compile (source -> program, cached on disk by source
 * hash), launch, synchronize. Devices are opened on first use and closed by
 * tc_runtime_shutdown. Device ids index a process-wide table; id 0 is CPU.
 * Each device says how its kernels are written (a renderer dialect) and what
 * codegen may use on it (the dialect's target, lowered to the device's own
 * limits). Device memory is opaque (a cl_mem, a CUdeviceptr): copies take
 * the device pointer and a byte offset into it.
 */
#ifndef TC_RUNTIME_H
#define TC_RUNTIME_H

#include "render/render.h"

/* a device: function table + context. Not named tc_device: that name is the
 * public function tc_device(t) in tinyc.h, and C forbids both at file scope. */
typedef struct tc_dev tc_dev;
typedef struct tc_program tc_program;

/* what a launch needs besides the buffers */
typedef struct {
    int64_t global[3]; /* work-groups per dimension (CPU: ignored, loops are in the code);
                          a 0 launches nothing */
    int64_t local[3];  /* lanes per work-group (CPU: ignored) */
    int64_t cpu_range; /* CPU: > 0: the kernel takes one more argument, a pointer to
                          {start, end}: its outermost kept loop's steps [0, cpu_range)
                          (inside a tile's row blocks) are split across threads (TC_THREADS, default: the cores) */
} tc_launch_dims;

struct tc_dev {
    char name[32]; /* canonical name: "CPU", "OPENCL:1" */
    int id;        /* index in the device table */
    uint64_t serial; /* which opening this is (unique in the process): what was made
                        for a device that closed is not used on a new one */
    void *ctx;     /* backend state */
    const tc_dialect *dialect; /* the language its kernels are rendered in */
    tc_target target;          /* what codegen may use on it */
    bool is_null;              /* the NULL device: kernels are rendered, never built or run */
    /* device memory; alloc sets an error and returns NULL on failure */
    void *(*alloc)(tc_dev *d, size_t nbytes);
    void (*free)(tc_dev *d, void *ptr);
    size_t pool_min;          /* 0, or: blocks of this many bytes or more the device
                                 pools itself (the buffer cache neither keeps them
                                 nor rounds them up to a size class) */
    void (*trim)(tc_dev *d);  /* optional: gives what its pool holds free to the OS */
    /* host src -> device memory dst at byte offset; returns when src may be
     * reused (every device here copies synchronously) */
    tc_status (*copyin)(tc_dev *d, void *dst, size_t offset, const void *src, size_t nbytes);
    /* device memory src at byte offset -> host dst; returns with the bytes in dst */
    tc_status (*copyout)(tc_dev *d, void *dst, const void *src, size_t offset, size_t nbytes);
    /* source -> program with entry point fn_name; cached in memory and on disk */
    tc_program *(*compile)(tc_dev *d, const char *src, const char *fn_name);
    /* optional (NULL: none): builds ahead what compile would build for the
     * kernels srcs[i] (entry points fn_names[i]), several at once, so that
     * compile then finds them cached. A kernel that fails to build is left
     * for compile to report; only TC_ERR_MEMORY fails prebuild. */
    tc_status (*prebuild)(tc_dev *d, const char *const *srcs, const char *const *fn_names, int n);
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
/* memory again (not its old contents) for a buffer whose memory was
 * dropped (graph.h); TC_OK at once for one that has memory */
TC_MUST_USE tc_status tc_buffer_restore(tc_buffer *b);
TC_MUST_USE tc_status tc_buffer_copyin(tc_buffer *b, size_t offset, const void *src, size_t nbytes);
TC_MUST_USE tc_status tc_buffer_copyout(tc_buffer *b, size_t offset, void *dst, size_t nbytes);
/* device-to-device copy of nbytes (same or different devices) */
TC_MUST_USE tc_status tc_buffer_copy(tc_buffer *dst, tc_buffer *src, size_t nbytes);

void tc_runtime_shutdown(void); /* closes every device; buffers must be released first */
/* bytes of live buffers on all devices now, the most since start or the
 * last tc_runtime_mem_reset_peak (which sets it to the bytes used now), and
 * the bytes of released device memory the buffer cache keeps for reuse
 * (device.c: size classes, at most TC_BUFCACHE_MB, default 1024) */
void tc_runtime_mem(int64_t *used, int64_t *peak, int64_t *cached);
void tc_runtime_mem_reset_peak(void);
/* the most bytes of released memory kept for reuse (TC_BUFCACHE_MB, default
 * 1024 MiB; 0: none), by the buffer cache and by a device's pool each */
int64_t tc_runtime_cache_limit(void);
void tc_runtime_trim(void); /* gives every cached block back to its device, a pool's free pages to the OS */

/* ---- CPU device (cpu.c, cpu_cc.c, cpu_batch.c, cpu_info.c) -------------------- */
/* compiles C source with the system compiler (TC_CC or cc) into a shared
 * object cached in tc_cachedir() under the hash of source and flags (the new
 * kernels of a schedule in batches, one compiler run each), loads it with
 * dlopen, calls kernels through libffi */
tc_dev *tc_cpu_device_create(int id);
/* the CPU device's target (cpu_info.c): the C dialect's, with what this
 * host reports (SIMD lanes and registers, data caches, cores) and the
 * TC_CPU_L1D, TC_CPU_L2, TC_CPU_L3 and TC_CPU_ISA overrides, read at each
 * call. info (when not NULL) gets one line of what was read and where from
 * (TC_DEBUG=1 prints it when the CPU device opens). A malformed override is
 * TC_ERR_DEVICE naming it (the CPU device does not open). */
TC_MUST_USE tc_status tc_cpu_target(tc_target *t, char *info, size_t info_size);
/* the L1d, L2 and L3 that a sysfs cache directory (.../cpu0/cache) lists
 * into cache[0..2] (levels already set are kept); the levels it gave */
int tc_cpu_sysfs_caches(const char *dir, tc_cache_level cache[3]);
int64_t tc_cpu_compile_count(void); /* compiler runs in this process */
int64_t tc_cpu_build_count(void);   /* kernels they built (a batch counts each of its kernels) */
/* split launches (tc_launch_dims.cpu_range) run on a process-wide pool of
 * cores-1 workers (TC_THREADS when it starts overrides) plus the caller,
 * started by the first split launch and joined by tc_runtime_shutdown;
 * workers running now (0: none) */
int tc_cpu_pool_workers(void);

/* ---- the NULL device (null.c) ---------------------------------------------
 * "NULL": lowers and renders kernels as the CPU would (its dialect and
 * target) but builds and runs nothing; its buffers have no memory behind
 * them (copyin drops the bytes, copyout writes zeros). Launches count in
 * tc_counters like real ones. */
tc_dev *tc_null_device_create(int id);

/* ---- sealed cache entries (cache.c) ---------------------------------------
 * Every cache file ends in a seal: "tinyc-seal1 <key> <size> <sum>\n" (the
 * entry's key, the bytes before the seal, their tc_cache_sum; hex). A file
 * is used only when its seal names its key and matches its bytes. */
#define TC_CACHE_SEAL_LEN 79 /* bytes of a seal */

/* what tells one version of a file from another (a rename or a write
 * changes it: ctime cannot be set back) */
typedef struct {
    uint64_t dev, ino; /* the file */
    uint64_t size;     /* its bytes */
    int64_t ctime_s;   /* its last change, seconds */
    int64_t ctime_ns;  /* and nanoseconds */
} tc_file_id;
/* the id of the regular file at path (not followed when a link); false when none */
bool tc_file_id_get(const char *path, tc_file_id *id);
bool tc_file_id_equal(const tc_file_id *a, const tc_file_id *b);

/* what a check found at an entry's path */
typedef struct {
    bool is_there; /* something is at the path */
    bool is_whole; /* a regular file ending in the key's seal, which matches it */
    tc_file_id id; /* what is there (when is_there) */
} tc_cache_entry;

/* a 64-bit sum of data[0..n) for seals (host byte order): 4.5 to 11 GB/s,
 * a few microseconds for a kernel's .so (cache.c) */
uint64_t tc_cache_sum(const void *data, size_t n);
/* the seal of an entry of key whose size bytes sum to sum, NUL-terminated */
void tc_cache_seal(char seal[TC_CACHE_SEAL_LEN + 1], const char *key, uint64_t size,
                   uint64_t sum);
/* checks the file at path against key's seal (reads it once; allocates nothing) */
void tc_cache_check(const char *path, const char *key, tc_cache_entry *e);
/* a whole entry's bytes before its seal (tc_malloc'ed, NUL-terminated) into
 * *data, or *data NULL (no entry, or e says what is in the way); only
 * TC_ERR_MEMORY is an error */
TC_MUST_USE tc_status tc_cache_read(const char *path, const char *key, char **data, size_t *n,
                        tc_cache_entry *e);
/* appends key's seal to the file at path (a temp file, before its rename):
 * TC_ERR_IO when it cannot */
TC_MUST_USE tc_status tc_cache_seal_file(const char *path, const char *key);
/* removes what a check found at path and did not want (seen: its id), unless
 * a rename has put something else there since: a file, or an empty
 * directory (a full one is left alone: its files are not the cache's) */
void tc_cache_remove(const char *path, const tc_file_id *seen);

/* ---- the program cache of OpenCL and CUDA (cache.c) -----------------------
 * <tc_cachedir()>/<key><ext>, sealed, published atomically. load gives the
 * entry's bytes (tc_malloc'ed, NUL-terminated) or *data NULL when it is
 * absent or does not verify (then it is removed: the caller builds it
 * again). */
TC_MUST_USE tc_status tc_cache_load(const char *key, const char *ext, char **data, size_t *n);
TC_MUST_USE tc_status tc_cache_store(const char *key, const char *ext, const void *data, size_t n);
/* key = the 32-hex-character hash of the printf-formatted text (what a
 * program depends on: backend, device or arch, compiler version, source);
 * TC_ERR_MEMORY with "<who> compile: out of memory ..." when it cannot */
TC_MUST_USE tc_status tc_cache_key(char key[33], const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* tc_cache_store when a failure only costs a later compile: clears the error */
void tc_cache_put(const char *key, const char *ext, const void *data, size_t n);

/* ---- OpenCL devices (opencl.c) --------------------------------------------
 * Through the ICD loader (built when TC_HAVE_OPENCL is defined). Devices are
 * every platform's devices in platform order: "OPENCL" is the first,
 * "OPENCL:1" the next. Programs are built from source once and their
 * binaries cached on disk under a key of source, device name and driver
 * version. */
/* devices on this machine; 0 with the reason in why (no platform, no
 * device, built without OpenCL) */
int tc_opencl_count(char *why, size_t why_size);
tc_dev *tc_opencl_device_create(int id, int index); /* NULL + TC_ERR_DEVICE */
int64_t tc_opencl_build_count(void); /* programs built from source in this process */
/* OpenCL objects (contexts, queues, buffers, programs, kernels) the device
 * created and has not released: 0 after tc_runtime_shutdown */
int64_t tc_opencl_live_objects(void);
/* tests: every OpenCL device acts as if it lacked cl_khr_fp64 while hidden
 * (a kernel using float64 is then refused at compile with TC_ERR_DEVICE) */
void tc_opencl_hide_fp64(bool hidden);

/* ---- CUDA devices (cuda.c) ------------------------------------------------
 * libcuda (driver API) and libnvrtc are loaded with dlopen at run time, so
 * the library needs neither to build. Kernels are compiled by NVRTC to PTX
 * for the device's compute capability (cached on disk) and loaded with
 * cuModuleLoadData. */
int tc_cuda_count(char *why, size_t why_size); /* as tc_opencl_count */
tc_dev *tc_cuda_device_create(int id, int index);
/* compile only (no GPU needed, only NVRTC): src (CUDA dialect) -> PTX for
 * arch ("sm_80"; NULL: TC_CUDA_ARCH, else sm_80). Errors, and warnings when
 * is_strict, fail with TC_ERR_COMPILE quoting NVRTC's log; no NVRTC is
 * TC_ERR_DEVICE. *ptx (when ptx is not NULL) gets the tc_malloc'ed PTX. */
TC_MUST_USE tc_status tc_cuda_compile(const char *src, const char *fn_name, const char *arch, bool is_strict,
                          char **ptx);
bool tc_nvrtc_available(char *why, size_t why_size); /* NVRTC loads on this machine */
/* TC_CUDA_CHECK=1: the engine also renders every kernel it runs for CUDA and
 * compiles it with NVRTC, failing on errors and warnings. Without NVRTC it
 * prints "CUDA compile checks skipped" once and stays off. */
bool tc_cuda_check_enabled(void);
TC_MUST_USE tc_status tc_cuda_check_item(const tc_sched_item *it); /* codegen + render + NVRTC, strict */

#endif /* TC_RUNTIME_H */
