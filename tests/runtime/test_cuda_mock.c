/* test_cuda_mock.c - the CUDA device's host path (src/runtime/cuda.c) against
 * the mock driver (tests/runtime/mock_cuda.c, TC_CUDA_LIB), so it runs on
 * machines without a GPU: device open and close, buffers, copies at offsets,
 * NVRTC compile -> module load -> function -> launch with checked params, the
 * in-memory and on-disk program caches, injected driver failures (each a
 * clear tc error that leaks nothing), and tensor graphs up to an MLP training
 * step with Adam realized on CUDA and compared with the same on the CPU.
 * The mock records every misuse of the driver API as a violation; each test
 * ends asserting there were none. Its launches run on its PTX interpreter
 * (mock_cuda_ptx.c), so kernel results are real: they are compared, and an
 * access out of bounds, a misaligned vector access or an instruction the
 * interpreter does not know is caught. Tests that need NVRTC skip without it.
 */
#include "tc_test.h"

#include <dirent.h>
#include <math.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock_cuda.h"
#include "runtime/runtime.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static char root[256]; /* the mkdtemp directory: TC_CACHEDIR */

static struct {
    mock_cuda_violations_fn violations;
    mock_cuda_violation_fn violation;
    mock_cuda_reset_fn reset;
    mock_cuda_fail_fn inject;
    mock_cuda_calls_fn calls;
    mock_cuda_live_fn live;
} mock;

static const char *twice_src = "extern \"C\" __global__ void twice(float *out, const float *a) {\n"
                               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "  out[i] = a[i] * 2.0f + (float)i;\n"
                               "}\n";

/* a kernel with 40 KiB of static shared memory and __launch_bounds__(128):
 * each thread reads what others wrote before the barrier */
static const char *shared_src =
    "extern \"C\" __global__ void __launch_bounds__(128) big(float *out) {\n"
    "  __shared__ float tmp[10240];\n"
    "  for (int i = threadIdx.x; i < 10240; i += 128) tmp[i] = (float)i;\n"
    "  __syncthreads();\n"
    "  out[threadIdx.x] = tmp[10239 - threadIdx.x];\n"
    "}\n";

/* float rounding to integral values: cvt.rni/rzi/rmi/rpi.f32.f32 */
static const char *round_src = "extern \"C\" __global__ void rnd(float *out, const float *a) {\n"
                               "  int i = threadIdx.x;\n"
                               "  out[4 * i] = rintf(a[i]), out[4 * i + 1] = truncf(a[i]);\n"
                               "  out[4 * i + 2] = floorf(a[i]), out[4 * i + 3] = ceilf(a[i]);\n"
                               "}\n";

/* kernels the interpreter must refuse: a store past the buffer, a float4
 * load off its 16-byte alignment, an instruction it does not know (brev), a
 * special register it does not know (%laneid), a read of shared memory
 * another thread writes with no barrier between, a barrier only some threads
 * reach */
static const char *bad_src =
    "extern \"C\" __global__ void oob(float *out) { out[threadIdx.x + 300] = 1.0f; }\n"
    "extern \"C\" __global__ void misaligned(float *out, const float *a) {\n"
    "  float4 v = *(const float4 *)(a + 1 + 4 * threadIdx.x);\n"
    "  out[threadIdx.x] = v.x + v.w;\n"
    "}\n"
    "extern \"C\" __global__ void unknown(unsigned *out) {\n"
    "  unsigned r; asm(\"brev.b32 %0, %1;\" : \"=r\"(r) : \"r\"(out[0])); out[0] = r;\n"
    "}\n"
    "extern \"C\" __global__ void lane(unsigned *out) {\n"
    "  unsigned r; asm(\"mov.u32 %0, %%laneid;\" : \"=r\"(r)); out[threadIdx.x] = r;\n"
    "}\n"
    "extern \"C\" __global__ void racy(float *out) {\n"
    "  __shared__ float s[64];\n"
    "  s[threadIdx.x] = (float)threadIdx.x;\n" /* no __syncthreads() before the read */
    "  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];\n"
    "}\n"
    "extern \"C\" __global__ void diverge(float *out) {\n"
    "  if (threadIdx.x < 16) __syncthreads();\n"
    "  out[threadIdx.x] = 1.0f;\n"
    "}\n";

static void rm_tree(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char path[600];
    for (struct dirent *e; (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) rm_tree(path);
    }
    closedir(d);
    rmdir(dir);
}

static int group_setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_cuda_mock_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return -1;
    setenv("TC_CACHEDIR", root, 1);
    return 0;
}

static int group_teardown(void **state) {
    (void)state;
    tc_shutdown();
    rm_tree(root);
    return 0;
}

static int setup(void **state) {
    (void)state;
    mock.reset();
    mock.inject(NULL);
    return 0;
}

/* every test ends with the device closed: what it left behind (leaked
 * allocations or modules) are violations, and fail the test here */
static int teardown(void **state) {
    (void)state;
    mock.inject(NULL);
    tc_shutdown();
    int n = mock.violations();
    for (int i = 0; i < n && mock.violation(i); i++)
        fprintf(stderr, "violation at close %d: %s\n", i, mock.violation(i));
    return n == 0 ? 0 : -1;
}

/* the mock saw no misuse (prints what it saw otherwise) */
static void assert_no_violations(void) {
    int n = mock.violations();
    for (int i = 0; i < n && mock.violation(i); i++)
        fprintf(stderr, "violation %d: %s\n", i, mock.violation(i));
    assert_int_equal(n, 0);
}

/* exactly n violations, the first containing `needle`; then forgets them */
static void assert_violation(int n, const char *needle) {
    const char *first = mock.violation(0);
    if (mock.violations() != n || !first || !strstr(first, needle))
        fprintf(stderr, "want %d violation(s) with '%s', got %d: %s\n", n, needle,
                mock.violations(), first ? first : "(none)");
    assert_int_equal(mock.violations(), n);
    assert_non_null(strstr(first, needle));
    mock.reset();
}

static void assert_live(int allocs, int modules, int refs) {
    int a = -1, m = -1, r = -1;
    mock.live(&a, &m, &r);
    if (a != allocs || m != modules || r != refs)
        fprintf(stderr, "mock: %d allocations, %d modules, %d context refs (want %d, %d, %d)\n", a,
                m, r, allocs, modules, refs);
    assert_int_equal(a, allocs);
    assert_int_equal(m, modules);
    assert_int_equal(r, refs);
}

/* the CUDA device on the mock (it needs NVRTC too: skips without) */
static tc_dev *open_cuda(void) {
    tc_test_need_nvrtc();
    int id = tc_device_open("CUDA", "test");
    if (id < 0) fprintf(stderr, "%s\n", tc_last_error());
    assert_true(id > 0);
    return tc_device_get(id);
}

/* ---- the device ------------------------------------------------------------------ */

/* open takes the limits from the driver, holds one context reference, and
 * the close gives everything back; a second open after shutdown works */
static void test_open_close(void **state) {
    (void)state;
    tc_dev *d = open_cuda();
    assert_string_equal(d->name, "CUDA");
    assert_ptr_equal(d->dialect, &tc_dialect_cuda);
    assert_int_equal(d->target.lanes_max, 1024);
    assert_int_equal(d->target.shared_max, 49152);
    assert_int_equal(d->target.local_max[2], 64);
    assert_int_equal(d->target.global_max[1], 65535);
    assert_int_equal(tc_device_open("cuda:0", "test"), d->id);
    assert_int_equal(tc_device_open("CUDA:1", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "CUDA:1");
    assert_live(0, 0, 1);
    tc_runtime_shutdown();
    assert_live(0, 0, 0);
    d = open_cuda();
    assert_live(0, 0, 1);
    assert_true(mock.calls("cuDevicePrimaryCtxRetain") == 2);
    assert_true(mock.calls("cuDevicePrimaryCtxRelease_v2") == 1);
    assert_no_violations();
}

/* buffers: copies at offsets round-trip (the mock's copies are memcpy),
 * out-of-range copies are caught by the library before the driver sees them,
 * and released buffers go back to the driver at trim */
static void test_buffers(void **state) {
    (void)state;
    tc_dev *d = open_cuda();
    enum { N = 100 };
    float a[N], got[N];
    for (int i = 0; i < N; i++) a[i] = (float)i * 0.5f - 7.0f;
    tc_buffer *b = tc_buffer_new(d->id, sizeof a), *empty = tc_buffer_new(d->id, 0);
    assert_true(b && empty);
    assert_int_equal(tc_buffer_copyin(b, 0, a, sizeof a), TC_OK);
    float patch[3] = {1000, 2000, 3000};
    assert_int_equal(tc_buffer_copyin(b, 40 * sizeof(float), patch, sizeof patch), TC_OK);
    memcpy(&a[40], patch, sizeof patch);
    assert_int_equal(tc_buffer_copyout(b, 0, got, sizeof got), TC_OK);
    assert_memory_equal(got, a, sizeof a);
    assert_int_equal(tc_buffer_copyout(b, 97 * sizeof(float), got, 3 * sizeof(float)), TC_OK);
    assert_memory_equal(got, &a[97], 3 * sizeof(float));
    assert_int_equal(tc_buffer_copyin(b, 98 * sizeof(float), patch, sizeof patch), TC_ERR_INVALID);
    assert_int_equal(tc_buffer_copyout(b, 0, got, sizeof a + 4), TC_ERR_INVALID);
    /* device to device, and CUDA -> CPU */
    tc_buffer *c = tc_buffer_new(d->id, sizeof a);
    tc_buffer *h = tc_buffer_new(tc_device_open("CPU", "test"), sizeof a);
    assert_true(c && h);
    assert_int_equal(tc_buffer_copy(c, b, sizeof a), TC_OK);
    assert_int_equal(tc_buffer_copy(h, c, sizeof a), TC_OK);
    assert_memory_equal(h->ptr, a, sizeof a);
    assert_live(3, 0, 1);
    tc_buffer_release(b), tc_buffer_release(c), tc_buffer_release(h), tc_buffer_release(empty);
    tc_runtime_trim();
    assert_live(0, 0, 1);
    assert_no_violations();
}

/* ---- compile, load, launch ----------------------------------------------------------- */

/* NVRTC's PTX loads, its function launches with params the mock checks
 * against the .entry; the same source is one program (one module load) */
static void test_compile_launch(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_dev *d = open_cuda();
    tc_buffer *in = tc_buffer_new(d->id, 256 * sizeof(float));
    tc_buffer *out = tc_buffer_new(d->id, 256 * sizeof(float));
    assert_true(in && out);
    tc_program *p = d->compile(d, twice_src, "twice");
    if (!p) fprintf(stderr, "%s\n", tc_last_error());
    assert_non_null(p);
    assert_ptr_equal(d->compile(d, twice_src, "twice"), p);
    assert_true(mock.calls("cuModuleLoadData") == 1);
    assert_true(mock.calls("cuModuleGetFunction") == 1);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{4, 1, 1}, {64, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 2, &dims), TC_OK);
    tc_launch_dims none = {{0, 1, 1}, {64, 1, 1}, 0}; /* an empty grid launches nothing */
    assert_int_equal(d->launch(d, p, args, 2, &none), TC_OK);
    assert_int_equal(d->synchronize(d), TC_OK);
    assert_true(mock.calls(NULL) == 1);
    assert_live(2, 1, 1);
    assert_no_violations();
    tc_buffer_release(in), tc_buffer_release(out);
}

/* the launch computes: values in, kernel, values out; and a block's threads
 * meet at __syncthreads (each reads what another thread wrote) */
static void test_launch_computes(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_dev *d = open_cuda();
    enum { N = 256 };
    float a[N], got[N], want[N];
    for (int i = 0; i < N; i++) a[i] = (float)(i % 13) - 6.0f;
    tc_buffer *in = tc_buffer_new(d->id, sizeof a), *out = tc_buffer_new(d->id, sizeof a);
    assert_true(in && out);
    assert_int_equal(tc_buffer_copyin(in, 0, a, sizeof a), TC_OK);
    tc_program *p = d->compile(d, twice_src, "twice");
    assert_non_null(p);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{N / 64, 1, 1}, {64, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 2, &dims), TC_OK);
    assert_int_equal(tc_buffer_copyout(out, 0, got, sizeof got), TC_OK);
    for (int i = 0; i < N; i++) want[i] = a[i] * 2.0f + (float)i;
    assert_true(tc_allclose_f32(got, want, N, 0, 0, "twice"));
    tc_program *big = d->compile(d, shared_src, "big");
    assert_non_null(big);
    tc_launch_dims one = {{1, 1, 1}, {128, 1, 1}, 0};
    assert_int_equal(d->launch(d, big, args, 1, &one), TC_OK);
    assert_int_equal(tc_buffer_copyout(out, 0, got, 128 * sizeof(float)), TC_OK);
    for (int i = 0; i < 128; i++) want[i] = (float)(10239 - i);
    assert_true(tc_allclose_f32(got, want, 128, 0, 0, "big"));
    float x[8] = {2.5f, -1.5f, 0.5f, 1.7f, -2.3f, -0.5f, 3.0f, 1e9f};
    assert_int_equal(tc_buffer_copyin(in, 0, x, sizeof x), TC_OK);
    tc_program *rnd = d->compile(d, round_src, "rnd");
    assert_non_null(rnd);
    tc_launch_dims eight = {{1, 1, 1}, {8, 1, 1}, 0};
    assert_int_equal(d->launch(d, rnd, args, 2, &eight), TC_OK);
    assert_int_equal(tc_buffer_copyout(out, 0, got, 32 * sizeof(float)), TC_OK);
    for (int i = 0; i < 8; i++) {
        want[4 * i] = rintf(x[i]), want[4 * i + 1] = truncf(x[i]);
        want[4 * i + 2] = floorf(x[i]), want[4 * i + 3] = ceilf(x[i]);
    }
    assert_true(tc_allclose_f32(got, want, 32, 0, 0, "rint, trunc, floor, ceil"));
    tc_buffer_release(in), tc_buffer_release(out);
    assert_no_violations();
}

/* kernel fn of bad_src launched with n_args of args fails with TC_ERR_RUNTIME
 * (naming `error` when given) and exactly one violation containing `violation` */
static void launch_caught(tc_dev *d, const char *fn, void **args, int n_args, const tc_launch_dims *dims,
                          const char *error, const char *violation) {
    tc_program *p = d->compile(d, bad_src, fn);
    assert_non_null(p);
    assert_int_equal(d->launch(d, p, args, n_args, dims), TC_ERR_RUNTIME);
    if (error) assert_tc_error(TC_ERR_RUNTIME, error);
    assert_violation(1, violation);
}

/* the interpreter's own checks: each bad kernel fails its launch with the
 * driver's error and one violation saying what and where */
static void test_interpreter_catches(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_dev *d = open_cuda();
    tc_buffer *out = tc_buffer_new(d->id, 1024), *in = tc_buffer_new(d->id, 1024);
    assert_true(in && out);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{1, 1, 1}, {32, 1, 1}, 0};
    launch_caught(d, "oob", args, 1, &dims, "CUDA_ERROR_ILLEGAL_ADDRESS",
                  "kernel 'oob' block (0,0,0) thread (0,0,0)");
    launch_caught(d, "misaligned", args, 2, &dims, NULL, "misaligned 16-byte access");
    launch_caught(d, "unknown", args, 1, &dims, "CUDA_ERROR_LAUNCH_FAILED", "brev.b32");
    launch_caught(d, "lane", args, 1, &dims, NULL, "%laneid");
    launch_caught(d, "racy", args, 1, &dims, NULL,
                  "writes a shared byte thread 0 read since the last bar.sync");
    launch_caught(d, "diverge", args, 1, &dims, NULL, "ended while other threads wait at the bar.sync");
    tc_buffer_release(in), tc_buffer_release(out);
}

/* the mock's launch checks can fail: each misuse is an error from the launch
 * (TC_ERR_RUNTIME naming the kernel and the driver's answer) and a violation */
static void test_launch_misuse_caught(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_dev *d = open_cuda();
    tc_buffer *in = tc_buffer_new(d->id, 1024), *out = tc_buffer_new(d->id, 1024);
    tc_program *p = d->compile(d, twice_src, "twice");
    assert_true(in && out && p);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{1, 1, 1}, {64, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 1, &dims), TC_ERR_RUNTIME); /* one param short */
    assert_tc_error(TC_ERR_RUNTIME, "launch of 'twice' (grid 1x1x1, block 64x1x1) failed: "
                                    "cuLaunchKernel: CUDA_ERROR_INVALID_VALUE");
    assert_violation(1, "1 kernel params for the .entry's 2");
    float host[4];
    void *bad[2] = {out->ptr, host}; /* a host pointer */
    assert_int_equal(d->launch(d, p, bad, 2, &dims), TC_ERR_RUNTIME);
    assert_violation(1, "param 1");
    tc_launch_dims wide = {{1, 1, 1}, {64, 32, 1}, 0}; /* 2048 threads */
    assert_int_equal(d->launch(d, p, args, 2, &wide), TC_ERR_RUNTIME);
    assert_violation(1, "2048 threads");
    tc_program *big = d->compile(d, shared_src, "big");
    assert_non_null(big);
    tc_launch_dims ok = {{1, 1, 1}, {128, 1, 1}, 0}, over = {{1, 1, 1}, {256, 1, 1}, 0};
    assert_int_equal(d->launch(d, big, args, 1, &ok), TC_OK);
    assert_int_equal(d->launch(d, big, args, 1, &over), TC_ERR_RUNTIME);
    assert_violation(1, ".maxntid 128");
    tc_buffer_release(in), tc_buffer_release(out);
}

/* a second device session loads the PTX from the disk cache: same module,
 * same function, and no NVRTC warning or error on the way */
static void test_disk_cache(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_dev *d = open_cuda();
    assert_non_null(d->compile(d, twice_src, "twice"));
    tc_runtime_shutdown();
    assert_live(0, 0, 0);
    DIR *dir = opendir(root);
    assert_non_null(dir);
    int n_ptx = 0;
    for (struct dirent *e; (e = readdir(dir));)
        n_ptx += strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".ptx") == 0;
    closedir(dir);
    assert_true(n_ptx >= 1);
    d = open_cuda();
    tc_program *p = d->compile(d, twice_src, "twice");
    assert_non_null(p);
    assert_live(0, 1, 1);
    assert_no_violations();
}

/* ---- injected driver failures ------------------------------------------------------- */

/* out of device memory: a clear TC_ERR_MEMORY from the call that allocated,
 * nothing leaked, and the next allocation works */
static void test_oom(void **state) {
    (void)state;
    tc_dev *d = open_cuda();
    assert_int_equal(mock.inject("cuMemAlloc_v2:1"), 0);
    assert_null(tc_buffer_new(d->id, 4096));
    assert_tc_error(TC_ERR_MEMORY, "CUDA: cuMemAlloc of 4096 bytes failed: "
                                   "CUDA_ERROR_OUT_OF_MEMORY");
    float x[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(mock.inject("cuMemAlloc_v2:1"), 0);
    assert_null(tc_from_data(x, TC_FLOAT32, 2, SHAPE(2, 3), "CUDA"));
    assert_tc_error(TC_ERR_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY");
    /* in the middle of a realize: the second kernel's output, and the retry
     * after the library gives its cached blocks back */
    tc_test_need_nvrtc();
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, SHAPE(2, 3), "CUDA");
    assert_non_null(a);
    tc_tensor *outs[2] = {tc_sum(a, 1, (int[]){0}, false), tc_sum(a, 1, (int[]){1}, false)};
    assert_true(outs[0] && outs[1]);
    assert_int_equal(tc_schedule_kernel_count(outs, 2), 2); /* two reduces, other axes */
    assert_int_equal(mock.inject("cuMemAlloc_v2:2+"), 0);
    assert_int_equal(tc_realize(outs, 2), TC_ERR_MEMORY);
    assert_tc_error(TC_ERR_MEMORY, "cuMemAlloc");
    mock.inject(NULL);
    assert_int_equal(tc_realize(outs, 2), TC_OK);
    tc_release(a), tc_release(outs[0]), tc_release(outs[1]);
    assert_no_violations();
    tc_runtime_trim();
    assert_live(0, 2, 1); /* the two reduce kernels stay loaded */
    (void)d;
}

/* a failed launch, module load and copy-back each end the call that hit it
 * with the driver's error name, and the graph can be realized again */
static void test_driver_failures(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    open_cuda();
    float x[6] = {1, -2, 3, -4, 5, -6}, got[6];
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, SHAPE(2, 3), "CUDA");
    tc_tensor *b = tc_relu(a), *s = tc_sum(b, 1, (int[]){1}, false);
    assert_non_null(s);
    assert_int_equal(mock.inject("cuModuleLoadData:1"), 0);
    assert_int_equal(tc_realize(&s, 1), TC_ERR_COMPILE);
    assert_tc_error(TC_ERR_COMPILE, "cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX");
    assert_int_equal(mock.inject("cuModuleGetFunction:1:500"), 0); /* the module is unloaded */
    assert_int_equal(tc_realize(&s, 1), TC_ERR_COMPILE);
    assert_tc_error(TC_ERR_COMPILE, "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND");
    int n_alloc, n_modules, refs;
    mock.live(&n_alloc, &n_modules, &refs);
    assert_int_equal(n_modules, 0);
    assert_int_equal(mock.inject("cuLaunchKernel:1"), 0);
    assert_int_equal(tc_realize(&s, 1), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "failed: cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED");
    assert_int_equal(mock.inject("cuLaunchKernel:1:700"), 0);
    assert_int_equal(tc_realize(&s, 1), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "CUDA_ERROR_ILLEGAL_ADDRESS");
    mock.inject(NULL);
    assert_int_equal(tc_realize(&s, 1), TC_OK);
    assert_int_equal(mock.inject("cuMemcpyDtoH_v2:1"), 0);
    assert_int_equal(tc_to_host(s, got, 2 * sizeof(float)), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "cuMemcpyDtoH of 8 bytes at offset 0 failed: "
                                    "CUDA_ERROR_LAUNCH_FAILED");
    mock.inject(NULL);
    assert_int_equal(tc_to_host(s, got, 2 * sizeof(float)), TC_OK);
    assert_true(got[0] == 4.0f && got[1] == 5.0f); /* relu, then the row sums */
    assert_int_equal(tc_to_host(a, got, sizeof got), TC_OK);
    assert_memory_equal(got, x, sizeof x);
    assert_int_equal(mock.inject("cuCtxSynchronize:1"), 0);
    assert_int_equal(tc_synchronize("CUDA"), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "CUDA: cuCtxSynchronize failed: CUDA_ERROR_LAUNCH_FAILED");
    mock.inject(NULL);
    assert_int_equal(tc_synchronize("CUDA"), TC_OK);
    tc_release(a), tc_release(b), tc_release(s);
    assert_no_violations();
}

/* opening the device fails cleanly where the driver does (no context is
 * left retained), and the next open works */
static void test_open_failures(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    assert_int_equal(mock.inject("cuDevicePrimaryCtxRetain:1"), 0);
    assert_int_equal(tc_device_open("CUDA", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_INVALID_VALUE");
    assert_live(0, 0, 0);
    assert_int_equal(mock.inject("cuDeviceGetAttribute:1:101"), 0);
    assert_int_equal(tc_device_open("CUDA", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "cuDeviceGetAttribute failed: CUDA_ERROR_INVALID_DEVICE");
    mock.inject(NULL);
    open_cuda();
    assert_live(0, 0, 1);
    assert_no_violations();
}

/* a context that cannot be made current stops the call before the driver is asked */
static void test_bad_context_caught(void **state) {
    (void)state;
    tc_dev *d = open_cuda();
    tc_buffer *b = tc_buffer_new(d->id, 64);
    assert_non_null(b);
    assert_int_equal(mock.inject("cuCtxSetCurrent:1"), 0);
    assert_int_equal(tc_buffer_copyin(b, 0, "0123456789", 10), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "CUDA: cuCtxSetCurrent failed: CUDA_ERROR_INVALID_VALUE");
    tc_buffer_release(b);
    assert_no_violations();
}

/* ---- tensor graphs ----------------------------------------------------------------- */

/* what run_corpus computes, read back to the host */
typedef struct {
    float loss[2];           /* the two steps' losses */
    float w1[32 * 64];       /* the first layer's weight after them */
    float sm[16 * 64];       /* softmax of the input */
    float ln[16 * 64];       /* layernorm of the input */
    float cv[2 * 4 * 8 * 8]; /* a 3x3 conv, padding 1 */
    int64_t kernels;         /* kernels launched */
} corpus;

static void read_f32(tc_tensor *t, float *dst, size_t nbytes) {
    if (tc_to_host(t, dst, nbytes) != TC_OK) fprintf(stderr, "%s\n", tc_last_error());
    assert_int_equal(tc_to_host(t, dst, nbytes), TC_OK);
}

/* an MLP training step twice (matmuls, relu, cross-entropy, backward, Adam),
 * then a softmax, a layernorm and a conv, all on `device` from seed 7 */
static void run_corpus(const char *device, corpus *out) {
    tc_manual_seed(7);
    tc_reset_counters();
    tc_layer *l1 = tc_nn_linear(64, 32, true, device), *l2 = tc_nn_linear(32, 10, true, device);
    assert_true(l1 && l2);
    tc_layer *layers[2] = {l1, l2};
    tc_tensor *ps[4];
    assert_int_equal(tc_nn_parameters(layers, 2, ps, 4), 4);
    tc_optimizer *opt = tc_adam(ps, 4, 1e-2, 0.9, 0.999, 1e-8);
    assert_non_null(opt);
    int32_t labels[16];
    for (int i = 0; i < 16; i++) labels[i] = i % 10;
    tc_tensor *x = tc_randn(2, SHAPE(16, 64), TC_FLOAT32, device);
    tc_tensor *y = tc_from_data(labels, TC_INT32, 1, SHAPE(16), device);
    assert_true(x && y);
    for (int step = 0; step < 2; step++) {
        assert_int_equal(tc_optimizer_zero_grad(opt), TC_OK);
        tc_tensor *h = tc_layer_forward(l1, x), *r = tc_relu(h), *o = tc_layer_forward(l2, r);
        tc_tensor *loss = tc_cross_entropy(o, y);
        assert_non_null(loss);
        tc_status st = tc_backward(loss);
        if (st == TC_OK) st = tc_optimizer_step_with(opt, &loss, 1);
        if (st != TC_OK) fprintf(stderr, "%s\n", tc_last_error());
        assert_int_equal(st, TC_OK);
        read_f32(loss, &out->loss[step], sizeof(float));
        tc_release(h), tc_release(r), tc_release(o), tc_release(loss);
    }
    read_f32(ps[0], out->w1, sizeof out->w1);
    tc_tensor *sm = tc_softmax(x, 1), *ln = tc_layernorm(x, 1, 1e-5);
    tc_tensor *img = tc_randn(4, SHAPE(2, 3, 8, 8), TC_FLOAT32, device);
    tc_tensor *w = tc_randn(4, SHAPE(4, 3, 3, 3), TC_FLOAT32, device);
    tc_tensor *cv = tc_conv2d(img, w, NULL, 1, 1);
    tc_tensor *outs[3] = {sm, ln, cv};
    assert_true(sm && ln && cv);
    assert_int_equal(tc_realize(outs, 3), TC_OK);
    read_f32(sm, out->sm, sizeof out->sm);
    read_f32(ln, out->ln, sizeof out->ln);
    read_f32(cv, out->cv, sizeof out->cv);
    tc_counters cnt;
    tc_get_counters(&cnt);
    out->kernels = cnt.kernel_count;
    for (int i = 0; i < 3; i++) tc_release(outs[i]);
    tc_release(img), tc_release(w), tc_release(x), tc_release(y);
    tc_optimizer_free(opt);
    tc_layer_free(l1), tc_layer_free(l2);
}

/* the corpus on CUDA: every kernel compiled, loaded and launched on the mock
 * (one checked launch per kernel the engine counted) with no violation, and
 * the numbers those launches computed agree with the CPU's; the close then
 * finds nothing left */
static void test_tensor_corpus(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    open_cuda();
    static corpus cuda, cpu;
    run_corpus("CUDA", &cuda);
    fprintf(stderr, "corpus: %lld kernels, %ld checked launches, %ld modules loaded\n",
            (long long)cuda.kernels, mock.calls(NULL), mock.calls("cuModuleLoadData"));
    assert_true(cuda.kernels > 20);
    assert_true(mock.calls(NULL) == cuda.kernels);
    assert_no_violations();
    run_corpus("CPU", &cpu);
    fprintf(stderr, "losses: CUDA %g %g, CPU %g %g\n", cuda.loss[0], cuda.loss[1], cpu.loss[0],
            cpu.loss[1]);
    assert_true(cpu.loss[1] < cpu.loss[0]); /* the step learns */
    assert_true(tc_allclose_f32(cuda.loss, cpu.loss, 2, 1e-5, 1e-6, "loss"));
    assert_true(tc_allclose_f32(cuda.w1, cpu.w1, 32 * 64, 1e-5, 1e-6, "w1"));
    assert_true(tc_allclose_f32(cuda.sm, cpu.sm, 16 * 64, 1e-5, 1e-7, "softmax"));
    assert_true(tc_allclose_f32(cuda.ln, cpu.ln, 16 * 64, 1e-5, 1e-5, "layernorm"));
    assert_true(tc_allclose_f32(cuda.cv, cpu.cv, 2 * 4 * 8 * 8, 1e-5, 1e-5, "conv"));
    tc_shutdown();
    assert_live(0, 0, 0);
    assert_no_violations();
}

int main(int argc, char **argv) {
    /* --need-nvrtc: exit status 0 if NVRTC loads (ctest runs the suites on the
     * mock only then; cmake/gpu.cmake) */
    if (argc > 1 && strcmp(argv[1], "--need-nvrtc") == 0) {
        char why[200];
        if (tc_nvrtc_available(why, sizeof why)) return 0;
        printf("NVRTC is not available (%s): the CUDA suites on the mock driver skip\n", why);
        return 1;
    }
    /* the library loads the mock as its libcuda; this process finds the
     * mock's own entry points in the same loaded copy */
    setenv("TC_CUDA_LIB", TC_MOCK_CUDA_LIB, 1);
    unsetenv("TC_MOCK_CUDA_FAIL");
    unsetenv("TC_DEVICE");
    void *h = dlopen(TC_MOCK_CUDA_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot load the mock driver %s: %s\n", TC_MOCK_CUDA_LIB, dlerror());
        return 1;
    }
    *(void **)&mock.violations = dlsym(h, "mock_cuda_violations");
    *(void **)&mock.violation = dlsym(h, "mock_cuda_violation");
    *(void **)&mock.reset = dlsym(h, "mock_cuda_reset");
    *(void **)&mock.inject = dlsym(h, "mock_cuda_fail");
    *(void **)&mock.calls = dlsym(h, "mock_cuda_calls");
    *(void **)&mock.live = dlsym(h, "mock_cuda_live");
    if (!mock.violations || !mock.violation || !mock.reset || !mock.inject || !mock.calls ||
        !mock.live) {
        fprintf(stderr, "the mock driver lacks its query entry points\n");
        return 1;
    }
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_open_close),          T(test_buffers),
        T(test_compile_launch),      T(test_launch_computes),
        T(test_interpreter_catches), T(test_launch_misuse_caught),
        T(test_disk_cache),          T(test_oom),
        T(test_driver_failures),     T(test_bad_context_caught),
        T(test_open_failures),       T(test_tensor_corpus),
    };
#undef T
    int rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
    dlclose(h);
    return rc;
}
