/* test_cpu.c - the runtime's device table, buffers and the CPU device:
 * device names and their errors, buffer copies and bounds, and compiling,
 * caching (in memory and on disk) and launching hand-written C kernels.
 * The kernel cache lives in a fresh mkdtemp directory (TC_CACHEDIR is set
 * before the library reads it), nested two levels deep so that compile has
 * to create it, and removed at the end.
 */
#define _GNU_SOURCE /* sched_getaffinity of a thread */
#include "tc_test.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

static char root[256];     /* the mkdtemp directory */
static char cachedir[300]; /* root/cache/k: TC_CACHEDIR */

/* out = a*b over 16 floats */
static const char *mul_src =
    "void k(float *restrict out, const float *restrict a, const float *restrict b) {\n"
    "    for (int i = 0; i < 16; i++) out[i] = a[i] * b[i];\n"
    "}\n";

/* files in the cache dir whose names end with suffix ("" counts all) */
static int count_files(const char *suffix) {
    DIR *d = opendir(cachedir);
    if (!d) return 0;
    int n = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (e->d_name[0] == '.') continue;
        if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

static void remove_cache(void) {
    DIR *d = opendir(cachedir);
    if (d) {
        char path[600];
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", cachedir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(cachedir);
    char parent[300];
    snprintf(parent, sizeof parent, "%s/cache", root);
    rmdir(parent);
    rmdir(root);
}

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_cpu_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return -1;
    snprintf(cachedir, sizeof cachedir, "%s/cache/k", root);
    setenv("TC_CACHEDIR", cachedir, 1);
    unsetenv("TC_DEVICE");
    unsetenv("TC_CC");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tc_runtime_shutdown();
    tc_flags_shutdown(); /* frees the resolved cache dir name */
    remove_cache();
    return 0;
}

static int cpu(void) {
    int id = tc_device_open("CPU", "test");
    assert_int_equal(id, 0);
    return id;
}

/* ---- names ------------------------------------------------------------------ */

static void test_open_names(void **state) {
    (void)state;
    assert_int_equal(tc_device_open(NULL, "test"), 0);
    assert_int_equal(tc_device_open("cpu", "test"), 0);
    assert_int_equal(tc_device_open("CPU:0", "test"), 0);
    assert_int_equal(tc_device_open("Cpu:0", "test"), 0);
    tc_dev *d = tc_device_get(0);
    assert_non_null(d);
    assert_string_equal(d->name, "CPU");
    assert_int_equal(d->id, 0);
    setenv("TC_DEVICE", "cpu:0", 1);
    assert_int_equal(tc_device_open(NULL, "test"), 0);
    setenv("TC_DEVICE", "TPU", 1);
    assert_int_equal(tc_device_open(NULL, "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "tc_zeros: unknown device 'TPU' (from TC_DEVICE)");
    unsetenv("TC_DEVICE");
    /* one table entry however it was spelled */
    assert_ptr_equal(tc_device_get(tc_device_open("CPU", "test")), d);
}

static void test_unknown_device(void **state) {
    (void)state;
    assert_int_equal(tc_device_open("XYZ", "tc_full"), -1);
    assert_tc_error(TC_ERR_DEVICE,
                    "tc_full: unknown device 'XYZ' (known: CPU, OPENCL, CUDA, NULL)");
    assert_int_equal(tc_device_open("", "tc_full"), -1);
    assert_tc_error(TC_ERR_DEVICE, "unknown device ''");
    assert_int_equal(tc_device_open("CPUX:0", "tc_full"), -1);
    assert_tc_error(TC_ERR_DEVICE, "unknown device 'CPUX:0'");
}

/* OpenCL and CUDA exist only on some machines and builds: where one is
 * missing, opening it says so and why (test_opencl.c covers a present one) */
static void test_unavailable_device(void **state) {
    (void)state;
    bool is_tested = false;
    if (tc_device_open("OPENCL", "tc_to_device") < 0) {
        assert_tc_error(TC_ERR_DEVICE, "tc_to_device: device OPENCL is not available (");
        assert_int_equal(tc_device_open("opencl:0", "tc_to_device"), -1);
        assert_tc_error(TC_ERR_DEVICE, "device OPENCL is not available");
        is_tested = true;
    }
    if (tc_device_open("cuda:1", "tc_to_device") < 0) {
        assert_tc_error(TC_ERR_DEVICE, "tc_to_device: ");
        is_tested = true;
    }
    tc_runtime_shutdown();
    if (!is_tested) skip();
}

static void test_bad_index(void **state) {
    (void)state;
    assert_int_equal(tc_device_open("CPU:1", "tc_ones"), -1);
    assert_tc_error(TC_ERR_DEVICE, "tc_ones: device 'CPU:1' does not exist");
    assert_int_equal(tc_device_open("cpu:99999", "tc_ones"), -1);
    assert_tc_error(TC_ERR_DEVICE, "device 'cpu:99999' does not exist");
    const char *bad[] = {"CPU:", "CPU:x", "CPU:-1", "CPU:0:0", "CPU:1234567890123"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(tc_device_open(bad[i], "tc_ones"), -1);
        assert_tc_error(TC_ERR_DEVICE, "bad device name");
    }
}

static void test_device_get_bad_id(void **state) {
    (void)state;
    cpu();
    assert_null(tc_device_get(-1));
    assert_null(tc_device_get(1)); /* nothing opened there */
    assert_null(tc_device_get(1 << 20));
    assert_tc_error(TC_ERR_DEVICE, "no open device with id");
}

/* ---- buffers ------------------------------------------------------------------ */

static void test_buffer_round_trip(void **state) {
    (void)state;
    tc_buffer *b = tc_buffer_new(cpu(), 64);
    assert_non_null(b);
    assert_int_equal(b->refcount, 1);
    assert_int_equal(b->nbytes, 64);
    assert_int_equal((uintptr_t)b->ptr % 64, 0);
    unsigned char in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (unsigned char)(i * 7 + 1);
    assert_int_equal(tc_buffer_copyin(b, 0, in, 64), TC_OK);
    memset(out, 0, sizeof out);
    assert_int_equal(tc_buffer_copyout(b, 0, out, 64), TC_OK);
    assert_memory_equal(in, out, 64);
    /* offsets on both sides */
    unsigned char patch[4] = {0xAA, 0xBB, 0xCC, 0xDD};
    assert_int_equal(tc_buffer_copyin(b, 60, patch, 4), TC_OK);
    assert_int_equal(tc_buffer_copyout(b, 58, out, 6), TC_OK);
    unsigned char want[6] = {in[58], in[59], 0xAA, 0xBB, 0xCC, 0xDD};
    assert_memory_equal(out, want, 6);
    tc_buffer_release(tc_buffer_retain(b)); /* refcount 2 -> 1: still alive */
    assert_int_equal(tc_buffer_copyout(b, 0, out, 1), TC_OK);
    tc_buffer_release(b);
}

static void test_buffer_bounds(void **state) {
    (void)state;
    tc_buffer *b = tc_buffer_new(cpu(), 16);
    assert_non_null(b);
    char data[32] = {0};
    assert_int_equal(tc_buffer_copyin(b, 8, data, 9), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_buffer_copyin: range [8, 8 + 9) is outside the buffer "
                                    "of 16 bytes");
    assert_int_equal(tc_buffer_copyout(b, 17, data, 0), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_buffer_copyout");
    assert_int_equal(tc_buffer_copyin(b, SIZE_MAX, data, 2), TC_ERR_INVALID); /* wraps */
    assert_int_equal(tc_buffer_copyout(b, 8, data, SIZE_MAX - 4), TC_ERR_INVALID);
    assert_int_equal(tc_buffer_copyin(NULL, 0, data, 1), TC_ERR_INVALID);
    assert_int_equal(tc_buffer_copyin(b, 0, NULL, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "host pointer is NULL");
    /* the failed calls changed nothing */
    char out[16];
    assert_int_equal(tc_buffer_copyin(b, 0, "0123456789abcdef", 16), TC_OK);
    assert_int_equal(tc_buffer_copyin(b, 8, data, 9), TC_ERR_INVALID);
    assert_int_equal(tc_buffer_copyout(b, 0, out, 16), TC_OK);
    assert_memory_equal(out, "0123456789abcdef", 16);
    assert_null(tc_buffer_new(7, 16));
    assert_tc_error(TC_ERR_DEVICE, "id 7");
    tc_buffer_release(b);
}

static void test_buffer_zero_bytes(void **state) {
    (void)state;
    tc_buffer *z = tc_buffer_new(cpu(), 0);
    assert_non_null(z);
    assert_non_null(z->ptr);
    assert_int_equal(z->nbytes, 0);
    assert_int_equal(tc_buffer_copyin(z, 0, NULL, 0), TC_OK);
    assert_int_equal(tc_buffer_copyout(z, 0, NULL, 0), TC_OK);
    char c = 1;
    assert_int_equal(tc_buffer_copyin(z, 0, &c, 1), TC_ERR_INVALID);
    tc_buffer *z2 = tc_buffer_new(0, 0);
    assert_non_null(z2);
    assert_ptr_not_equal(z->ptr, z2->ptr);
    assert_int_equal(tc_buffer_copy(z2, z, 0), TC_OK);
    tc_buffer_release(z);
    tc_buffer_release(z2);
}

static void test_buffer_copy(void **state) {
    (void)state;
    int id = cpu();
    tc_buffer *a = tc_buffer_new(id, 40), *b = tc_buffer_new(id, 32);
    assert_non_null(a);
    assert_non_null(b);
    float in[10], out[8] = {0};
    for (int i = 0; i < 10; i++) in[i] = (float)i * 0.5f - 1.0f;
    assert_int_equal(tc_buffer_copyin(a, 0, in, sizeof in), TC_OK);
    assert_int_equal(tc_buffer_copy(b, a, 32), TC_OK);
    assert_int_equal(tc_buffer_copyout(b, 0, out, sizeof out), TC_OK);
    assert_true(tc_allclose_f32(out, in, 8, 0, 0, "copy"));
    assert_int_equal(tc_buffer_copy(b, a, 40), TC_ERR_INVALID); /* b holds 32 */
    assert_tc_error(TC_ERR_INVALID, "tc_buffer_copy: 40 bytes do not fit");
    assert_int_equal(tc_buffer_copy(a, a, 40), TC_OK); /* onto itself: nothing to do */
    assert_int_equal(tc_buffer_copy(NULL, a, 4), TC_ERR_INVALID);
    tc_buffer_release(a);
    tc_buffer_release(b);
}

static void test_buffer_out_of_memory(void **state) {
    (void)state;
    int id = cpu();
    tc_runtime_trim(); /* no cached block to fall back on */
    for (int n = 1; n <= 2; n++) { /* the struct, then the memory */
        tc_mem_fail_after(n);
        assert_null(tc_buffer_new(id, 128));
        tc_mem_fail_after(0);
        assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
    }
    assert_null(tc_buffer_new(id, SIZE_MAX - 8));
    assert_tc_error(TC_ERR_MEMORY, "cannot allocate");
}

static int64_t cached_bytes(void) {
    int64_t used, peak, cached;
    tc_runtime_mem(&used, &peak, &cached);
    return cached;
}

/* a released buffer's memory serves the next buffer of its size class; the
 * cache is bounded by TC_BUFCACHE_MB (0: off), drops its oldest blocks
 * first, and is given back when an allocation fails */
static void test_buffer_cache(void **state) {
    (void)state;
    int id = cpu();
    tc_runtime_trim();
    assert_int_equal(cached_bytes(), 0);
    tc_buffer *a = tc_buffer_new(id, 1000);
    assert_non_null(a);
    void *p = a->ptr;
    tc_buffer_release(a);
    assert_int_equal(cached_bytes(), 1024); /* 1000 rounds up to 64-byte steps */
    a = tc_buffer_new(id, 1010);            /* the same class: the same memory */
    assert_ptr_equal(a->ptr, p);
    assert_int_equal(a->nbytes, 1010);
    assert_int_equal(cached_bytes(), 0);
    tc_buffer *b = tc_buffer_new(id, 1000); /* none cached: fresh memory */
    assert_ptr_not_equal(b->ptr, p);
    memset(a->ptr, 1, 1010); /* the whole buffer is usable (ASan checks) */
    memset(b->ptr, 2, 1000);
    tc_buffer_release(a);
    tc_buffer_release(b);
    assert_int_equal(cached_bytes(), 2048);
    a = tc_buffer_new(id, 5000); /* above 4 KiB: classes of 1/8 of 4096 */
    assert_int_equal(cached_bytes(), 2048);
    tc_buffer_release(a);
    assert_int_equal(cached_bytes(), 2048 + 5120);
    /* the bound: 1 MB holds 17 60000-byte blocks, the oldest go first
     * (blocks of 64 KiB or more go back to the CPU's heap: test_cpu_heap.c) */
    setenv("TC_BUFCACHE_MB", "1", 1);
    tc_buffer *big[18];
    for (int i = 0; i < 18; i++) big[i] = tc_buffer_new(id, 60000);
    for (int i = 0; i < 18; i++) tc_buffer_release(big[i]);
    int64_t cls = 61440; /* 60000 in eighths of 32768 */
    assert_int_equal(cached_bytes(), 17 * cls);
    tc_buffer *huge = tc_buffer_new(id, 2 << 20);
    tc_buffer_release(huge); /* larger than the bound (and the heap's): not kept */
    assert_int_equal(cached_bytes(), 17 * cls);
    setenv("TC_BUFCACHE_MB", "0", 1);
    a = tc_buffer_new(id, 100);
    tc_buffer_release(a);
    assert_int_equal(cached_bytes(), 17 * cls);
    unsetenv("TC_BUFCACHE_MB");
    /* an allocation that fails gives the cache back and tries again; the
     * recovered failure leaves the thread's earlier error as it was */
    tc_error_set(TC_ERR_SHAPE, "an earlier error");
    tc_mem_fail_after(2); /* the struct, then the memory */
    a = tc_buffer_new(id, 50000);
    tc_mem_fail_after(0);
    assert_non_null(a);
    assert_int_equal(tc_last_status(), TC_ERR_SHAPE);
    assert_string_equal(tc_last_error(), "an earlier error");
    assert_int_equal(cached_bytes(), 0);
    tc_buffer_release(a);
    assert_true(cached_bytes() > 0);
    tc_runtime_shutdown(); /* gives the cache back too */
    assert_int_equal(cached_bytes(), 0);
}

/* ---- compile and launch ---------------------------------------------------------- */

/* runs a 3-argument float kernel of 16 elements and returns out in res */
static void run16(tc_program *p, const float *a, const float *b, float *res) {
    tc_dev *d = tc_device_get(0);
    tc_buffer *bo = tc_buffer_new(0, 64), *ba = tc_buffer_new(0, 64), *bb = tc_buffer_new(0, 64);
    assert_non_null(bo);
    assert_non_null(ba);
    assert_non_null(bb);
    assert_int_equal(tc_buffer_copyin(ba, 0, a, 64), TC_OK);
    assert_int_equal(tc_buffer_copyin(bb, 0, b, 64), TC_OK);
    void *args[3] = {bo->ptr, ba->ptr, bb->ptr};
    tc_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 3, &dims), TC_OK);
    assert_int_equal(d->synchronize(d), TC_OK);
    assert_int_equal(tc_buffer_copyout(bo, 0, res, 64), TC_OK);
    tc_buffer_release(bo);
    tc_buffer_release(ba);
    tc_buffer_release(bb);
}

static void check_mul(tc_program *p) {
    float a[16], b[16], want[16], got[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (float)i - 3.5f;
        b[i] = 0.25f * (float)(i * i) + 1.0f;
        want[i] = a[i] * b[i];
    }
    run16(p, a, b, got);
    assert_true(tc_allclose_f32(got, want, 16, 0, 0, "mul kernel"));
}

static void test_compile_and_run(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    int64_t before = tc_cpu_compile_count();
    tc_program *p = d->compile(d, mul_src, "k");
    if (!p) fprintf(stderr, "compile: %s\n", tc_last_error());
    assert_non_null(p);
    assert_int_equal(tc_cpu_compile_count(), before + 1); /* fresh cache dir: a real compile */
    check_mul(p);
    check_mul(p); /* the same call interface again */
    /* the same source again: the same program, no compiler */
    assert_ptr_equal(d->compile(d, mul_src, "k"), p);
    assert_int_equal(tc_cpu_compile_count(), before + 1);
    /* the cache dir was created 0700, holds the .so and no temp files */
    struct stat sb;
    assert_int_equal(stat(cachedir, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0700);
    assert_true(count_files(".so") >= 1);
    assert_int_equal(count_files(""), count_files(".so"));
}

static void test_disk_cache_after_shutdown(void **state) {
    (void)state;
    const char *src = "void twice(float *restrict out, const float *restrict a,\n"
                      "           const float *restrict b) {\n"
                      "    for (int i = 0; i < 16; i++) out[i] = 2.0f * a[i] + 0.0f * b[i];\n"
                      "}\n";
    tc_dev *d = tc_device_get(cpu());
    int64_t before = tc_cpu_compile_count();
    assert_non_null(d->compile(d, src, "twice"));
    assert_int_equal(tc_cpu_compile_count(), before + 1);
    tc_runtime_shutdown(); /* forget every loaded program */
    assert_null(tc_device_get(0));
    d = tc_device_get(cpu());
    tc_program *p = d->compile(d, src, "twice");
    assert_non_null(p);
    assert_int_equal(tc_cpu_compile_count(), before + 1); /* loaded from disk */
    float a[16], b[16] = {0}, want[16], got[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (float)i / 3.0f;
        want[i] = 2.0f * a[i];
    }
    run16(p, a, b, got);
    assert_true(tc_allclose_f32(got, want, 16, 0, 0, "twice kernel"));
    /* the mul kernel of the previous test is on disk too */
    assert_non_null(d->compile(d, mul_src, "k"));
    assert_int_equal(tc_cpu_compile_count(), before + 1);
}

static void test_compile_error(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    int64_t before = tc_cpu_compile_count();
    int files = count_files("");
    const char *src = "void broken(float *out) { out[0] = 1.0f +; }\n";
    assert_null(d->compile(d, src, "broken"));
    assert_tc_error(TC_ERR_COMPILE, "CPU compile of 'broken' failed");
    assert_tc_error(TC_ERR_COMPILE, "error"); /* the compiler's own words */
    assert_tc_error(TC_ERR_COMPILE, "1.0f +;");
    assert_int_equal(tc_cpu_compile_count(), before + 1);
    assert_int_equal(count_files(""), files); /* no temp file, log or .so left */
    /* a failure is not cached: the compiler runs again */
    assert_null(d->compile(d, src, "broken"));
    assert_int_equal(tc_cpu_compile_count(), before + 2);
}

static void test_missing_function(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    assert_null(d->compile(d, mul_src, "nope"));
    assert_tc_error(TC_ERR_COMPILE, "no function 'nope'");
    assert_null(d->compile(d, NULL, "k"));
    assert_tc_error(TC_ERR_INVALID, "CPU compile");
    assert_null(d->compile(d, mul_src, ""));
    assert_tc_error(TC_ERR_INVALID, "CPU compile");
}

static void test_missing_compiler(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    int files = count_files("");
    setenv("TC_CC", "/nonexistent/tc-cc", 1);
    assert_null(d->compile(d, mul_src, "k")); /* the compiler is part of the key */
    unsetenv("TC_CC");
    assert_tc_error(TC_ERR_COMPILE, "cannot run the compiler '/nonexistent/tc-cc'");
    assert_int_equal(count_files(""), files);
}

/* a compiler that never exits is killed at TC_CC_TIMEOUT (its children
 * too: the script's sleep) and the compile fails, leaving no files */
static void test_compiler_timeout(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    int files = count_files("");
    char script[] = "/tmp/tc_hung_cc_XXXXXX";
    int fd = mkstemp(script);
    assert_true(fd >= 0);
    const char *body = "#!/bin/sh\nsleep 60\n";
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
    close(fd);
    assert_int_equal(chmod(script, 0700), 0);
    setenv("TC_CC", script, 1);
    setenv("TC_CC_TIMEOUT", "0.3", 1);
    assert_null(d->compile(d, mul_src, "k"));
    unsetenv("TC_CC");
    unsetenv("TC_CC_TIMEOUT");
    unlink(script);
    assert_tc_error(TC_ERR_COMPILE, "ran past TC_CC_TIMEOUT (0.3 s) and was killed");
    assert_int_equal(count_files(""), files);
}

static void test_compiler_words(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    const char *src = "void w(int *o) { o[0] = 42; }\n";
    int64_t before = tc_cpu_compile_count();
    setenv("TC_CC", "  cc  -DUNUSED_FLAG  ", 1); /* words split on blanks */
    tc_program *p = d->compile(d, src, "w");
    unsetenv("TC_CC");
    if (!p) fprintf(stderr, "compile: %s\n", tc_last_error());
    assert_non_null(p);
    assert_int_equal(tc_cpu_compile_count(), before + 1);
    int out[16] = {0};
    void *args[1] = {out};
    assert_int_equal(d->launch(d, p, args, 1, NULL), TC_OK);
    assert_int_equal(out[0], 42);
    assert_int_equal(d->launch(d, NULL, args, 1, NULL), TC_ERR_INVALID);
    assert_int_equal(d->launch(d, p, NULL, 1, NULL), TC_ERR_INVALID);
}

/* the Nth allocation fails, for every N until compile succeeds: each failure
 * is TC_ERR_MEMORY and leaves no temp file (LSan checks the memory) */
static void test_compile_out_of_memory(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    const char *src = "void oom(int *o) { o[0] = 7; }\n";
    tc_program *p = NULL;
    int n = 1;
    for (; !p && n < 200; n++) {
        tc_mem_fail_after(n);
        p = d->compile(d, src, "oom");
        tc_mem_fail_after(0);
        if (!p) assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
        assert_int_equal(count_files(""), count_files(".so"));
    }
    assert_non_null(p);
    assert_true(n > 3); /* several allocations were made to fail */
    int out = 0;
    void *args[1] = {&out};
    assert_int_equal(d->launch(d, p, args, 1, NULL), TC_OK);
    assert_int_equal(out, 7);
}

/* a kernel of 40 pointer arguments (more than the CPU keeps on the stack)
 * and one of none, launched in turns with the mul kernel so that each call
 * interface is rebuilt for its own count */
static void test_launch_arg_counts(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    char src[4096];
    size_t cap = sizeof src;
    int n = snprintf(src, cap, "void k40(float *o");
    for (int i = 0; i < 39; i++) n += snprintf(src + n, cap - (size_t)n, ", const float *a%d", i);
    n += snprintf(src + n, cap - (size_t)n, ") {\n    o[0] = 0.0f");
    for (int i = 0; i < 39; i++) n += snprintf(src + n, cap - (size_t)n, " + a%d[0]", i);
    snprintf(src + n, cap - (size_t)n, ";\n}\nint calls;\nvoid k0(void) { calls++; }\n");
    tc_program *p40 = d->compile(d, src, "k40"), *p0 = d->compile(d, src, "k0");
    tc_program *pm = d->compile(d, mul_src, "k");
    assert_non_null(p40);
    assert_non_null(p0);
    assert_non_null(pm);
    assert_ptr_not_equal(p40, p0); /* one source, two entry points */
    float vals[39], o = -1.0f;
    void *args[40] = {&o};
    for (int i = 0; i < 39; i++) {
        vals[i] = (float)(i + 1);
        args[i + 1] = &vals[i];
    }
    for (int round = 0; round < 2; round++) {
        o = -1.0f;
        assert_int_equal(d->launch(d, p40, args, 40, NULL), TC_OK);
        assert_true(o == 780.0f); /* 1 + ... + 39 */
        assert_int_equal(d->launch(d, p0, NULL, 0, NULL), TC_OK);
        check_mul(pm);
    }
}

/* several processes compile one new source at once: each gets a working
 * kernel, the cache ends with one .so and no temp files, and this process
 * then loads it without compiling */
static void test_processes_race(void **state) {
    (void)state;
    const char *src = "void race(float *restrict out, const float *restrict a,\n"
                      "          const float *restrict b) {\n"
                      "    for (int i = 0; i < 16; i++) out[i] = a[i] - b[i];\n"
                      "}\n";
    tc_dev *d = tc_device_get(cpu());
    int sos = count_files(".so");
    pid_t kids[6];
    for (int i = 0; i < 6; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            tc_program *p = d->compile(d, src, "race");
            float a[16] = {5}, b[16] = {2}, out[16] = {0};
            void *args[3] = {out, a, b};
            bool ok = p && d->launch(d, p, args, 3, NULL) == TC_OK && out[0] == 3.0f;
            _exit(ok ? 0 : 1); /* no cmocka, no leak report in the child */
        }
    }
    for (int i = 0; i < 6; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(count_files(".so"), sos + 1);
    assert_int_equal(count_files(""), count_files(".so"));
    int64_t before = tc_cpu_compile_count();
    assert_non_null(d->compile(d, src, "race"));
    assert_int_equal(tc_cpu_compile_count(), before);
}

/* prebuild compiles several new sources in one compiler run (one compiler
 * at once: TC_CC_JOBS=1), and a source in it that does not compile makes
 * it build each alone: each good one gets its .so, compile then finds them
 * without running the compiler, and compile reports the bad one's error.
 * More on batches: test_cpu_batch.c. */
static void test_prebuild(void **state) {
    (void)state;
    tc_dev *d = tc_device_get(cpu());
    assert_non_null(d->prebuild);
    char srcs[4][200];
    const char *src_p[5], *names[5] = {"pb", "pb", "pb", "pb", "bad"};
    for (int i = 0; i < 4; i++) {
        snprintf(srcs[i], sizeof srcs[i],
                 "void pb(float *restrict out, const float *restrict a, const float *restrict b)"
                 " { for (int i = 0; i < 16; i++) out[i] = a[i] * b[i] + %d.0f; }\n", i);
        src_p[i] = srcs[i];
    }
    src_p[4] = "void bad(float *out) { out[0] = undefined_name; }\n";
    int sos = count_files(".so");
    int64_t before = tc_cpu_compile_count(), built = tc_cpu_build_count();
    setenv("TC_CC_JOBS", "1", 1);
    assert_int_equal(d->prebuild(d, src_p, names, 5), TC_OK);
    unsetenv("TC_CC_JOBS");
    assert_int_equal(tc_cpu_compile_count(), before + 1 + 5); /* the batch, then each alone */
    assert_int_equal(tc_cpu_build_count(), built + 4);
    assert_int_equal(count_files(".so"), sos + 4);
    assert_int_equal(count_files(""), count_files(".so")); /* no temp files */
    assert_int_equal(d->prebuild(d, src_p, names, 4), TC_OK); /* all on disk: nothing to do */
    assert_int_equal(tc_cpu_compile_count(), before + 6);
    for (int i = 0; i < 4; i++) {
        tc_program *p = d->compile(d, src_p[i], "pb");
        assert_non_null(p);
        float a[16], b[16], out[16];
        for (int k = 0; k < 16; k++) a[k] = (float)k, b[k] = 2.0f;
        void *args[3] = {out, a, b};
        assert_int_equal(d->launch(d, p, args, 3, NULL), TC_OK);
        for (int k = 0; k < 16; k++) assert_true(out[k] == (float)(2 * k + i));
    }
    assert_int_equal(tc_cpu_compile_count(), before + 6);
    assert_null(d->compile(d, src_p[4], "bad"));
    assert_tc_error(TC_ERR_COMPILE, "undefined_name");
    assert_int_equal(count_files(""), count_files(".so"));
}

/* ---- the thread pool ------------------------------------------------------------ */

/* out[i] = sum_k a[i*8+k]*(k+1) + i for i in [r[0], r[1]): small integers, so
 * exact in float whatever the order */
static const char *split_src =
    "#include <stdint.h>\n"
    "void sp(float *restrict out, const float *restrict a, const int64_t *r) {\n"
    "    for (int64_t i = r[0]; i < r[1]; i++) {\n"
    "        float s = 0.0f;\n"
    "        for (int k = 0; k < 8; k++) s += a[i * 8 + k] * (float)(k + 1);\n"
    "        out[i] = s + (float)i;\n"
    "    }\n"
    "}\n";

enum { SPLIT_N = 1000 };

/* launches sp over `steps` rows into a fresh out; true when every row is right
 * and the rows past steps are untouched */
static bool run_split(tc_dev *d, tc_program *p, const float *a, int64_t steps) {
    float out[SPLIT_N + 1];
    for (int i = 0; i <= SPLIT_N; i++) out[i] = -1.0f;
    void *args[2] = {out, (void *)a};
    tc_launch_dims dims = {.cpu_range = steps};
    if (d->launch(d, p, args, 2, &dims) != TC_OK) return false;
    for (int64_t i = 0; i <= SPLIT_N; i++) {
        float want = -1.0f;
        if (i < steps) {
            want = (float)i;
            for (int k = 0; k < 8; k++) want += a[i * 8 + k] * (float)(k + 1);
        }
        if (out[i] != want) return false;
    }
    return true;
}

static float split_a[SPLIT_N * 8];

static tc_program *split_program(tc_dev *d) {
    for (int i = 0; i < SPLIT_N * 8; i++) split_a[i] = (float)(i % 13 - 6);
    tc_program *p = d->compile(d, split_src, "sp");
    assert_non_null(p);
    return p;
}

/* every thread count and range gives the same rows; the pool has cores-1
 * workers (TC_THREADS at its start overrides) and tc_runtime_shutdown joins
 * them, a later launch starts it again */
static void test_split_threads(void **state) {
    (void)state;
    tc_runtime_shutdown();
    tc_dev *d = tc_device_get(cpu());
    tc_program *p = split_program(d);
    assert_int_equal(tc_cpu_pool_workers(), 0); /* started lazily */
    setenv("TC_THREADS", "3", 1);
    assert_true(run_split(d, p, split_a, SPLIT_N));
    assert_int_equal(tc_cpu_pool_workers(), 2);
    const char *counts[] = {"1", "2", "3", "5", "64", "1000"};
    const int64_t steps[] = {1, 2, 7, 999, SPLIT_N};
    for (int c = 0; c < 6; c++) {
        setenv("TC_THREADS", counts[c], 1);
        for (int s = 0; s < 5; s++) assert_true(run_split(d, p, split_a, steps[s]));
    }
    assert_int_equal(tc_cpu_pool_workers(), 2); /* sized once */
    tc_runtime_shutdown();
    assert_int_equal(tc_cpu_pool_workers(), 0);
    unsetenv("TC_THREADS");
    d = tc_device_get(cpu());
    p = split_program(d);
    assert_true(run_split(d, p, split_a, SPLIT_N));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(tc_cpu_pool_workers(), cores > 64 ? 63 : cores - 1);
}

#ifdef __linux__
/* the caller and the pool's workers (threads named "tc-worker": not
 * others, such as an OpenCL runtime's) may run on the CPUs in `want`;
 * false when one may not (a worker left pinned) */
static bool threads_allowed(const cpu_set_t *want) {
    DIR *dir = opendir("/proc/self/task");
    assert_non_null(dir);
    bool same = true;
    for (struct dirent *e; (e = readdir(dir)) && same;) {
        if (e->d_name[0] == '.') continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (!fgets(name, sizeof name, f)) name[0] = '\0';
            fclose(f);
        }
        cpu_set_t got;
        pid_t tid = (pid_t)atoi(e->d_name);
        if ((tid == getpid() || !strncmp(name, "tc-worker", 9)) && sched_getaffinity(tid, sizeof got, &got) == 0)
            same = CPU_EQUAL(&got, want);
    }
    closedir(dir);
    return same;
}

/* true once the caller and the workers may run on the CPUs in `want`,
 * within 2 s (a worker started or woken takes them back when it runs) */
static bool threads_come_free(const cpu_set_t *want) {
    for (int i = 0; i < 2000; i++) {
        if (threads_allowed(want)) return true;
        usleep(1000);
    }
    return false;
}
#endif

/* Workers start each on a CPU of its own and go back to it after a sleep
 * (cpu.c, start_workers and go_home) but are not left pinned: once started,
 * and after sleeping and taking slices again, every thread of the process
 * may run wherever the caller may (the caller's mask when the pool
 * started, here the whole machine's and then one CPU's) */
static void test_split_placement(void **state) {
    (void)state;
#ifdef __linux__
    cpu_set_t all, one;
    assert_int_equal(sched_getaffinity(0, sizeof all, &all), 0);
    for (int round = 0; round < 2; round++) {
        tc_runtime_shutdown();
        setenv("TC_THREADS", "3", 1);
        tc_dev *d = tc_device_get(cpu());
        tc_program *p = split_program(d);
        const cpu_set_t *want = round == 0 ? &all : &one;
        assert_true(run_split(d, p, split_a, SPLIT_N));
        assert_int_equal(tc_cpu_pool_workers(), 2);
        assert_true(threads_come_free(want));
        usleep(20000); /* the workers sleep (past cpu.c's YIELD_NS of polling) */
        for (int i = 0; i < 50; i++) assert_true(run_split(d, p, split_a, SPLIT_N));
        assert_true(threads_come_free(want));
        if (round == 0) { /* again with the caller on one CPU of its set */
            CPU_ZERO(&one);
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET(c, &all)) {
                    CPU_SET(c, &one);
                    break;
                }
            assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
        }
    }
    tc_runtime_shutdown();
    assert_int_equal(sched_setaffinity(0, sizeof all, &all), 0);
    unsetenv("TC_THREADS");
#else
    skip();
#endif
}

typedef struct {
    tc_dev *d;
    tc_program *p;
    int rounds;
    bool ok;
} split_caller;

static void *split_caller_main(void *arg) {
    split_caller *c = arg;
    c->ok = true;
    for (int i = 0; i < c->rounds && c->ok; i++) c->ok = run_split(c->d, c->p, split_a, SPLIT_N - i);
    return NULL;
}

/* launches from several threads at once: each gets its rows right (a launch
 * that finds the pool busy runs on its own thread) */
static void test_split_from_threads(void **state) {
    (void)state;
    setenv("TC_THREADS", "4", 1);
    tc_dev *d = tc_device_get(cpu());
    tc_program *p = split_program(d);
    assert_true(run_split(d, p, split_a, SPLIT_N)); /* prepares the call interface */
    split_caller callers[4];
    pthread_t tids[4];
    for (int t = 0; t < 4; t++) {
        callers[t] = (split_caller){d, p, 200, false};
        assert_int_equal(pthread_create(&tids[t], NULL, split_caller_main, &callers[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        assert_int_equal(pthread_join(tids[t], NULL), 0);
        assert_true(callers[t].ok);
    }
    unsetenv("TC_THREADS");
}

/* a forked child does not wait for its parent's workers (they do not exist
 * there): its split launches run on its own thread */
static void test_split_after_fork(void **state) {
    (void)state;
    setenv("TC_THREADS", "2", 1);
    tc_dev *d = tc_device_get(cpu());
    tc_program *p = split_program(d);
    assert_true(run_split(d, p, split_a, SPLIT_N)); /* the pool is running */
    assert_true(tc_cpu_pool_workers() > 0);
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) {
        alarm(30); /* a hang fails instead of blocking the suite */
        bool ok = run_split(d, p, split_a, SPLIT_N) && run_split(d, p, split_a, 5);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_true(run_split(d, p, split_a, SPLIT_N)); /* the parent's pool still works */
    unsetenv("TC_THREADS");
}

int main(void) {
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_names),
        cmocka_unit_test(test_unknown_device),
        cmocka_unit_test(test_unavailable_device),
        cmocka_unit_test(test_bad_index),
        cmocka_unit_test(test_device_get_bad_id),
        cmocka_unit_test(test_buffer_round_trip),
        cmocka_unit_test(test_buffer_bounds),
        cmocka_unit_test(test_buffer_zero_bytes),
        cmocka_unit_test(test_buffer_copy),
        cmocka_unit_test(test_buffer_out_of_memory),
        cmocka_unit_test(test_buffer_cache),
        cmocka_unit_test(test_compile_and_run),
        cmocka_unit_test(test_disk_cache_after_shutdown),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_compiler_timeout),
        cmocka_unit_test(test_missing_function),
        cmocka_unit_test(test_missing_compiler),
        cmocka_unit_test(test_compiler_words),
        cmocka_unit_test(test_compile_out_of_memory),
        cmocka_unit_test(test_launch_arg_counts),
        cmocka_unit_test(test_processes_race),
        cmocka_unit_test(test_prebuild),
        cmocka_unit_test(test_split_threads),
        cmocka_unit_test(test_split_placement),
        cmocka_unit_test(test_split_from_threads),
        cmocka_unit_test(test_split_after_fork),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
