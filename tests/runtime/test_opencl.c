/* test_opencl.c - the OpenCL device on whatever OpenCL this machine has
 * (pocl's CPU device in CI): opening it and its errors, buffers and copies
 * at offsets, compiling (build log in errors, the binary cache on disk),
 * launching hand-written kernels, tensors that live on it, and a machine
 * with no OpenCL platform at all (a child process with an empty ICD list).
 * Every test skips, never passes, where no OpenCL device opens.
 */
#include "tc_test.h"

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

extern char **environ;

static char root[256];   /* the mkdtemp directory: TC_CACHEDIR */
static const char *self; /* argv[0], for the child process */

/* out[i] = a[i] * 2 + i over the whole grid */
static const char *twice_src =
    "__kernel void twice(__global float *out, const __global float *a) {\n"
    "  int i = get_global_id(0);\n"
    "  out[i] = a[i] * 2.0f + (float)i;\n"
    "}\n";

/* files in the cache directory ending in suffix */
static int count_files(const char *suffix) {
    DIR *d = opendir(root);
    if (!d) return 0;
    int n = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_opencl_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return -1;
    setenv("TC_CACHEDIR", root, 1);
    unsetenv("TC_DEVICE");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tc_runtime_shutdown();
    tc_flags_shutdown();
    DIR *d = opendir(root);
    if (d) {
        char path[600];
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.') continue;
            snprintf(path, sizeof path, "%s/%s", root, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(root);
    return 0;
}

/* the OpenCL device, or skip() where there is none */
static tc_dev *ocl(void) {
    int id = tc_device_open("OPENCL", "test");
    if (id < 0) {
        fprintf(stderr, "no OpenCL device: %s\n", tc_last_error());
        skip();
    }
    tc_dev *d = tc_device_get(id);
    assert_non_null(d);
    return d;
}

/* ---- devices -------------------------------------------------------------------- */

static void test_open(void **state) {
    (void)state;
    tc_dev *d = ocl();
    assert_string_equal(d->name, "OPENCL");
    assert_true(d->id > 0);
    assert_ptr_equal(d->dialect, &tc_dialect_opencl);
    assert_true(d->target.has_local);
    assert_true(d->target.lanes_max >= 1 && d->target.shared_max > 0);
    /* one table entry however it is spelled; TC_DEVICE picks it for NULL */
    assert_int_equal(tc_device_open("opencl:0", "test"), d->id);
    setenv("TC_DEVICE", "OpenCL", 1);
    assert_int_equal(tc_device_open(NULL, "test"), d->id);
    unsetenv("TC_DEVICE");
    assert_int_equal(tc_device_open("OPENCL:4096", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "tc_zeros: device 'OPENCL:4096' does not exist (there is ");
    assert_int_equal(tc_device_open("OPENCL:x", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "bad device name");
}

/* ---- buffers ---------------------------------------------------------------------- */

static void test_copies_at_offsets(void **state) {
    (void)state;
    tc_dev *d = ocl();
    tc_buffer *b = tc_buffer_new(d->id, 64);
    assert_non_null(b);
    unsigned char in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (unsigned char)(i * 5 + 3);
    assert_int_equal(tc_buffer_copyin(b, 0, in, 64), TC_OK);
    unsigned char patch[4] = {0xAA, 0xBB, 0xCC, 0xDD};
    assert_int_equal(tc_buffer_copyin(b, 60, patch, 4), TC_OK);
    assert_int_equal(tc_buffer_copyout(b, 58, out, 6), TC_OK);
    unsigned char want[6] = {in[58], in[59], 0xAA, 0xBB, 0xCC, 0xDD};
    assert_memory_equal(out, want, 6);
    /* bounds are checked before the driver sees anything */
    assert_int_equal(tc_buffer_copyin(b, 62, patch, 4), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_buffer_copyin: range [62, 62 + 4) is outside");
    /* CPU <-> OpenCL and OpenCL -> OpenCL */
    tc_buffer *c = tc_buffer_new(tc_device_open("CPU", "test"), 64), *e = tc_buffer_new(d->id, 64);
    assert_non_null(c);
    assert_non_null(e);
    assert_int_equal(tc_buffer_copy(e, b, 64), TC_OK); /* through host memory */
    assert_int_equal(tc_buffer_copy(c, e, 64), TC_OK);
    memcpy(in + 60, patch, 4);
    assert_memory_equal(c->ptr, in, 64);
    memset(c->ptr, 7, 64);
    assert_int_equal(tc_buffer_copy(b, c, 64), TC_OK);
    assert_int_equal(tc_buffer_copyout(b, 0, out, 64), TC_OK);
    assert_memory_equal(out, c->ptr, 64);
    tc_buffer *z = tc_buffer_new(d->id, 0); /* 0 bytes is a buffer too */
    assert_non_null(z);
    assert_int_equal(tc_buffer_copyout(z, 0, out, 0), TC_OK);
    tc_buffer_release(z);
    tc_buffer_release(b);
    tc_buffer_release(c);
    tc_buffer_release(e);
}

/* ---- compile and launch ------------------------------------------------------------- */

static void run_twice(tc_dev *d, tc_program *p, int64_t groups, int64_t lanes) {
    int64_t n = groups * lanes;
    float a[256], got[256];
    for (int64_t i = 0; i < n; i++) a[i] = (float)(i % 13) - 6.0f;
    tc_buffer *out = tc_buffer_new(d->id, sizeof(float) * (size_t)n);
    tc_buffer *in = tc_buffer_new(d->id, sizeof(float) * (size_t)n);
    assert_true(out && in);
    assert_int_equal(tc_buffer_copyin(in, 0, a, sizeof(float) * (size_t)n), TC_OK);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{groups, 1, 1}, {lanes, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 2, &dims), TC_OK);
    assert_int_equal(d->synchronize(d), TC_OK);
    assert_int_equal(tc_buffer_copyout(out, 0, got, sizeof(float) * (size_t)n), TC_OK);
    for (int64_t i = 0; i < n; i++) assert_true(got[i] == a[i] * 2.0f + (float)i);
    tc_buffer_release(out);
    tc_buffer_release(in);
}

static void test_compile_and_launch(void **state) {
    (void)state;
    tc_dev *d = ocl();
    int64_t builds = tc_opencl_build_count();
    tc_program *p = d->compile(d, twice_src, "twice");
    if (!p) fprintf(stderr, "compile: %s\n", tc_last_error());
    assert_non_null(p);
    assert_ptr_equal(d->compile(d, twice_src, "twice"), p); /* kept in the device */
    assert_int_equal(count_files(".clbin"), 1);
    assert_true(tc_opencl_build_count() <= builds + 1);
    run_twice(d, p, 4, 16); /* 64 work-items in groups of 16 */
    run_twice(d, p, 256, 1);
    /* an empty grid runs nothing and is fine */
    tc_launch_dims none = {{0, 1, 1}, {1, 1, 1}, 0};
    void *args[2] = {NULL, NULL};
    assert_int_equal(d->launch(d, p, args, 2, &none), TC_OK);
    /* a work-group larger than the device allows: the driver's error, named */
    tc_buffer *b = tc_buffer_new(d->id, 4 * 4096 * 8);
    assert_non_null(b);
    void *big[2] = {b->ptr, b->ptr};
    tc_launch_dims huge = {{1, 1, 1}, {d->target.lanes_max * 2, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, big, 2, &huge), TC_ERR_RUNTIME);
    assert_tc_error(TC_ERR_RUNTIME, "OPENCL launch of 'twice'");
    tc_buffer_release(b);
}

/* the binary from the disk cache serves a new process (here: after shutdown) */
static void test_binary_cache(void **state) {
    (void)state;
    tc_dev *d = ocl();
    const char *src = "__kernel void cached(__global int *o) { o[get_global_id(0)] = 41 + 1; }\n";
    int64_t builds = tc_opencl_build_count();
    int bins = count_files(".clbin");
    assert_non_null(d->compile(d, src, "cached"));
    assert_int_equal(tc_opencl_build_count(), builds + 1);
    assert_int_equal(count_files(".clbin"), bins + 1);
    tc_runtime_shutdown();
    d = ocl();
    tc_program *p = d->compile(d, src, "cached");
    assert_non_null(p);
    assert_int_equal(tc_opencl_build_count(), builds + 1); /* loaded, not built */
    tc_buffer *b = tc_buffer_new(d->id, 8 * sizeof(int));
    void *args[1] = {b->ptr};
    tc_launch_dims dims = {{2, 1, 1}, {4, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 1, &dims), TC_OK);
    int got[8];
    assert_int_equal(tc_buffer_copyout(b, 0, got, sizeof got), TC_OK);
    for (int i = 0; i < 8; i++) assert_int_equal(got[i], 42);
    tc_buffer_release(b);
}

static void test_compile_errors(void **state) {
    (void)state;
    tc_dev *d = ocl();
    const char *bad = "__kernel void broken(__global float *o) { o[0] = undeclared_thing; }\n";
    assert_null(d->compile(d, bad, "broken"));
    assert_tc_error(TC_ERR_COMPILE, "OPENCL compile of 'broken' failed (clBuildProgram");
    assert_tc_error(TC_ERR_COMPILE, "undeclared_thing"); /* the build log */
    assert_null(d->compile(d, twice_src, "thrice"));
    assert_tc_error(TC_ERR_COMPILE, "clCreateKernel('thrice') failed");
    assert_null(d->compile(d, NULL, "x"));
    assert_tc_error(TC_ERR_INVALID, "no source");
}

/* ---- tensors on the device ------------------------------------------------------------ */

static void test_tensors(void **state) {
    (void)state;
    tc_dev *d = ocl();
    (void)d;
    float x[6] = {1, -2, 3, -4, 5, -6};
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, (int64_t[]){2, 3}, "OPENCL");
    assert_non_null(a);
    assert_string_equal(tc_device(a), "OPENCL");
    int ax = 1;
    tc_tensor *s = tc_sum(a, 1, &ax, false), *m = tc_mul(a, a);
    float got[6];
    assert_int_equal(tc_to_host(s, got, 2 * sizeof(float)), TC_OK);
    assert_true(got[0] == 2.0f && got[1] == -5.0f);
    assert_int_equal(tc_to_host(m, got, sizeof got), TC_OK);
    for (int i = 0; i < 6; i++) assert_true(got[i] == x[i] * x[i]);
    tc_tensor *c = tc_to_device(a, "CPU"), *back = tc_to_device(c, "OPENCL");
    tc_tensor *queued = tc_exp(a); /* realized, its kernel queued: synchronize waits for it */
    assert_int_equal(tc_realize(&queued, 1), TC_OK);
    assert_int_equal(tc_synchronize("OPENCL"), TC_OK);
    assert_int_equal(tc_synchronize("OpenCL:0"), TC_OK);
    tc_release(queued);
    assert_int_equal(tc_to_host(back, got, sizeof got), TC_OK);
    assert_memory_equal(got, x, sizeof x);
    tc_tensor *mixed = tc_add(a, c);
    assert_null(mixed);
    assert_tc_error(TC_ERR_DEVICE, "tc_add: a is on OPENCL but b is on CPU");
    tc_release(a), tc_release(s), tc_release(m), tc_release(c), tc_release(back);
    tc_shutdown();
}

/* float64 on a device without cl_khr_fp64 (acted by the test hook; pocl
 * has it): realize fails with an error naming the device, and works again
 * where the extension is there */
static void test_float64_needs_fp64(void **state) {
    (void)state;
    (void)ocl();
    double x[3] = {1.0 / 3.0, -2.5, 1e300};
    tc_tensor *a = tc_from_data(x, TC_FLOAT64, 1, (int64_t[]){3}, "OPENCL");
    assert_non_null(a);
    tc_tensor *m = tc_mul(a, a);
    tc_opencl_hide_fp64(true);
    assert_int_equal(tc_realize(&m, 1), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "has no float64: the device lacks cl_khr_fp64");
    tc_opencl_hide_fp64(false);
    double got[3];
    assert_int_equal(tc_to_host(m, got, sizeof got), TC_OK);
    for (int i = 0; i < 3; i++) assert_true(got[i] == x[i] * x[i]);
    tc_release(a), tc_release(m);
    tc_shutdown();
}

/* every OpenCL object the device made is released: a failed build or a
 * missing kernel leaves none behind, tc_shutdown releases the rest (the
 * count is ours: the leak checker suppresses allocations inside pocl) */
static void test_releases_everything(void **state) {
    (void)state;
    tc_dev *d = ocl();
    int64_t open = tc_opencl_live_objects();
    assert_true(open >= 2); /* a context and its queue */
    const char *bad = "__kernel void broken(__global float *o) { o[0] = undeclared_thing; }\n";
    assert_null(d->compile(d, bad, "broken"));
    assert_null(d->compile(d, twice_src, "thrice"));
    assert_int_equal(tc_opencl_live_objects(), open);
    assert_non_null(d->compile(d, twice_src, "twice"));
    assert_int_equal(tc_opencl_live_objects(), open + 2); /* a program and its kernel */
    float x[4] = {1, 2, 3, 4};
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 1, (int64_t[]){4}, "OPENCL");
    tc_tensor *e = tc_exp(a);
    assert_int_equal(tc_realize(&e, 1), TC_OK);
    assert_true(tc_opencl_live_objects() > open + 2);
    tc_release(a), tc_release(e);
    tc_shutdown();
    assert_int_equal(tc_opencl_live_objects(), 0);
}

/* ---- no platform at all ------------------------------------------------------------- */

/* what the child checks (run with OCL_ICD_VENDORS pointing at an empty directory) */
static int no_platform_child(void) {
    int id = tc_device_open("OPENCL", "tc_zeros");
    const char *msg = tc_last_error();
    bool ok = id == -1 && tc_last_status() == TC_ERR_DEVICE &&
              strstr(msg, "tc_zeros: device OPENCL is not available (no OpenCL platform found");
    if (!ok) fprintf(stderr, "child: id %d, error '%s'\n", id, msg);
    tc_tensor *t = tc_zeros(1, (int64_t[]){4}, TC_FLOAT32, "OPENCL");
    ok = ok && !t && tc_last_status() == TC_ERR_DEVICE;
    ok = ok && tc_synchronize("OPENCL") == TC_ERR_DEVICE &&
         strstr(tc_last_error(), "tc_synchronize: device OPENCL is not available");
    tc_runtime_shutdown();
    tc_flags_shutdown();
    return ok ? 0 : 1;
}

static void test_no_platform(void **state) {
    (void)state;
    ocl(); /* skip where OpenCL is absent anyway */
    char empty[300], env_icd[400], env_cache[400];
    snprintf(empty, sizeof empty, "%s/no-icds", root);
    assert_int_equal(mkdir(empty, 0700), 0);
    snprintf(env_icd, sizeof env_icd, "OCL_ICD_VENDORS=%s", empty);
    snprintf(env_cache, sizeof env_cache, "TC_CACHEDIR=%s", root);
    char *envp[8] = {env_icd, env_cache, "ASAN_OPTIONS=detect_leaks=0", NULL};
    char *argv[] = {(char *)self, "--no-platform-child", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    rmdir(empty);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv) {
    self = argv[0];
    if (argc > 1 && strcmp(argv[1], "--no-platform-child") == 0) return no_platform_child();
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open),
        cmocka_unit_test(test_copies_at_offsets),
        cmocka_unit_test(test_compile_and_launch),
        cmocka_unit_test(test_binary_cache),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_tensors),
        cmocka_unit_test(test_float64_needs_fp64),
        cmocka_unit_test(test_releases_everything),
        cmocka_unit_test(test_no_platform),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
