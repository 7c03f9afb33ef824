/* test_cuda.c - the CUDA device and the NVRTC compile path.
 *
 * Everywhere: a missing driver is a clear TC_ERR_DEVICE (a child process
 * pointed at a libcuda that does not exist), never a crash. With NVRTC
 * (no GPU needed): hand-written and rendered kernels compile to PTX, a
 * broken one fails with NVRTC's log, a warning fails the strict compile.
 * With a GPU: buffers and copies at offsets, a launch, tensors on the
 * device. Tests that need what the machine lacks skip, never pass.
 */
#include "tc_test.h"

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

static char root[256];   /* the mkdtemp directory: TC_CACHEDIR */
static const char *self; /* argv[0], for the child process */

static const char *twice_src = "extern \"C\" __global__ void twice(float *out, const float *a) {\n"
                               "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                               "  out[i] = a[i] * 2.0f + (float)i;\n"
                               "}\n";

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_cuda_XXXXXX", tmp && *tmp ? tmp : "/tmp");
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

static tc_dev *gpu(void) {
    int id = tc_device_open("CUDA", "test");
    if (id < 0) {
        fprintf(stderr, "no CUDA device: %s\n", tc_last_error());
        skip();
    }
    return tc_device_get(id);
}

/* ---- everywhere ---------------------------------------------------------------------- */

/* opening CUDA either works or says why (no driver, no device, no NVRTC) */
static void test_open(void **state) {
    (void)state;
    int id = tc_device_open("CUDA", "tc_zeros");
    if (id < 0) {
        assert_tc_error(TC_ERR_DEVICE, "tc_zeros: ");
        fprintf(stderr, "CUDA here: %s\n", tc_last_error());
        tc_tensor *t = tc_zeros(1, (int64_t[]){4}, TC_FLOAT32, "CUDA");
        assert_null(t);
        assert_tc_error(TC_ERR_DEVICE, "CUDA");
        return;
    }
    tc_dev *d = tc_device_get(id);
    assert_string_equal(d->name, "CUDA");
    assert_ptr_equal(d->dialect, &tc_dialect_cuda);
    assert_true(d->target.has_local && d->target.lanes_max >= 256);
    assert_int_equal(tc_device_open("cuda:0", "test"), id);
}

static int no_driver_child(void) {
    int id = tc_device_open("CUDA", "tc_to_device");
    const char *msg = tc_last_error();
    bool ok = id == -1 && tc_last_status() == TC_ERR_DEVICE &&
              strstr(msg, "tc_to_device: device CUDA is not available (no CUDA driver: cannot load "
                          "TC_CUDA_LIB='/nonexistent/libcuda.so.1'");
    if (!ok) fprintf(stderr, "child: id %d, error '%s'\n", id, msg);
    tc_runtime_shutdown();
    tc_flags_shutdown();
    return ok ? 0 : 1;
}

/* no driver: a child process whose libcuda cannot load */
static void test_no_driver(void **state) {
    (void)state;
    char env_cache[400];
    snprintf(env_cache, sizeof env_cache, "TC_CACHEDIR=%s", root);
    char *envp[] = {"TC_CUDA_LIB=/nonexistent/libcuda.so.1", env_cache,
                    "ASAN_OPTIONS=detect_leaks=0", NULL};
    char *argv[] = {(char *)self, "--no-driver-child", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, envp), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- NVRTC ------------------------------------------------------------------------ */

static void test_nvrtc(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    char *ptx = NULL;
    assert_int_equal(tc_cuda_compile(twice_src, "twice", "sm_80", true, &ptx), TC_OK);
    assert_non_null(ptx);
    assert_non_null(strstr(ptx, ".entry twice"));
    tc_free(ptx);
    const char *bad =
        "extern \"C\" __global__ void broken(float *o) { o[0] = undeclared_thing; }\n";
    assert_int_equal(tc_cuda_compile(bad, "broken", "sm_80", false, NULL), TC_ERR_COMPILE);
    assert_tc_error(TC_ERR_COMPILE, "CUDA compile of 'broken' for sm_80 failed");
    assert_tc_error(TC_ERR_COMPILE, "undeclared_thing"); /* NVRTC's log */
    const char *warns =
        "extern \"C\" __global__ void warns(float *o) { int unused = 3; o[0] = 1; }\n";
    assert_int_equal(tc_cuda_compile(warns, "warns", "sm_80", false, NULL), TC_OK);
    assert_int_equal(tc_cuda_compile(warns, "warns", "sm_80", true, NULL), TC_ERR_COMPILE);
    assert_tc_error(TC_ERR_COMPILE, "warned");
}

/* ---- with a GPU ---------------------------------------------------------------------- */

static void test_copies_and_launch(void **state) {
    (void)state;
    tc_dev *d = gpu();
    enum { N = 256 };
    float a[N], got[N];
    for (int i = 0; i < N; i++) a[i] = (float)(i % 13) - 6.0f;
    tc_buffer *in = tc_buffer_new(d->id, sizeof a), *out = tc_buffer_new(d->id, sizeof a);
    assert_true(in && out);
    assert_int_equal(tc_buffer_copyin(in, 0, a, sizeof a), TC_OK);
    float patch[2] = {100, 200};
    assert_int_equal(tc_buffer_copyin(in, 8 * sizeof(float), patch, sizeof patch), TC_OK);
    a[8] = 100, a[9] = 200;
    tc_program *p = d->compile(d, twice_src, "twice");
    if (!p) fprintf(stderr, "%s\n", tc_last_error());
    assert_non_null(p);
    void *args[2] = {out->ptr, in->ptr};
    tc_launch_dims dims = {{N / 64, 1, 1}, {64, 1, 1}, 0};
    assert_int_equal(d->launch(d, p, args, 2, &dims), TC_OK);
    assert_int_equal(d->synchronize(d), TC_OK);
    assert_int_equal(tc_buffer_copyout(out, 0, got, sizeof got), TC_OK);
    for (int i = 0; i < N; i++) assert_true(got[i] == a[i] * 2.0f + (float)i);
    assert_int_equal(tc_buffer_copyout(out, 10 * sizeof(float), got, sizeof(float)), TC_OK);
    assert_true(got[0] == a[10] * 2.0f + 10.0f);
    tc_buffer_release(in);
    tc_buffer_release(out);
}

static void test_tensors(void **state) {
    (void)state;
    gpu();
    float x[6] = {1, -2, 3, -4, 5, -6}, got[6];
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, (int64_t[]){2, 3}, "CUDA");
    assert_non_null(a);
    int ax = 1;
    tc_tensor *s = tc_sum(a, 1, &ax, false), *c = tc_to_device(a, "CPU");
    assert_int_equal(tc_to_host(s, got, 2 * sizeof(float)), TC_OK);
    assert_true(got[0] == 2.0f && got[1] == -5.0f);
    assert_int_equal(tc_to_host(c, got, sizeof got), TC_OK);
    assert_memory_equal(got, x, sizeof x);
    tc_release(a), tc_release(s), tc_release(c);
    tc_shutdown();
}

int main(int argc, char **argv) {
    self = argv[0];
    if (argc > 1 && strcmp(argv[1], "--no-driver-child") == 0) return no_driver_child();
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open),    cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_nvrtc),   cmocka_unit_test(test_copies_and_launch),
        cmocka_unit_test(test_tensors),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
