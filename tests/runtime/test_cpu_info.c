/* test_cpu_info.c - what the CPU device reads of its host (runtime/cpu_info.c):
 * the caches of a sysfs cache directory (a fake one written here: levels,
 * types, sizes, ways, lines, the CPUs sharing each), the host's own reading
 * (sane values, the one-line description), the TC_CPU_* overrides (sizes with
 * and without suffixes, an ISA), and a malformed override failing the CPU
 * device's opening with a message from the public call that opened it. */
#include "tc_test.h"

#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* writes text to dir/name */
static void put(const char *dir, const char *name, const char *text) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* dir/indexN holding one cache's files (NULL: that file left out) */
static void fake_index(const char *dir, int n, const char *level, const char *type,
                       const char *size, const char *ways, const char *line, const char *shared) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/index%d", dir, n);
    assert_int_equal(mkdir(sub, 0700), 0);
    const char *names[6] = {
        "level", "type", "size", "ways_of_associativity", "coherency_line_size", "shared_cpu_list"};
    const char *texts[6] = {level, type, size, ways, line, shared};
    for (int i = 0; i < 6; i++)
        if (texts[i]) put(sub, names[i], texts[i]);
}

static void test_sysfs(void **state) {
    (void)state;
    char dir[] = "/tmp/tc_sysfs_XXXXXX";
    assert_non_null(mkdtemp(dir));
    fake_index(dir, 0, "1\n", "Data\n", "48K\n", "12\n", "64\n", "0,32\n");
    fake_index(dir, 1, "1\n", "Instruction\n", "32K\n", "8\n", "64\n", "0,32\n"); /* not data */
    fake_index(dir, 2, "2\n", "Unified\n", "2048K\n", "16\n", "64\n", "0,32\n");
    fake_index(dir, 3, "3\n", "Unified\n", "105M\n", NULL, "64\n",
               "0-31,64-95\n"); /* no ways file */
    tc_cache_level c[3];
    memset(c, 0, sizeof c);
    assert_int_equal(tc_cpu_sysfs_caches(dir, c), 3);
    assert_int_equal(c[0].bytes, 48 * 1024);
    assert_int_equal(c[0].ways, 12);
    assert_int_equal(c[0].line, 64);
    assert_int_equal(c[0].shared, 2);
    assert_int_equal(c[1].bytes, 2048 * 1024);
    assert_int_equal(c[1].ways, 16);
    assert_int_equal(c[2].bytes, 105 << 20);
    assert_int_equal(c[2].ways, 0);
    assert_int_equal(c[2].shared, 64);
    memset(c, 0, sizeof c);
    c[1].bytes = 1; /* a level already known is kept */
    assert_int_equal(tc_cpu_sysfs_caches(dir, c), 2);
    assert_int_equal(c[1].bytes, 1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    memset(c, 0, sizeof c);
    assert_int_equal(tc_cpu_sysfs_caches("/nonexistent/cache", c), 0);
    assert_int_equal(c[0].bytes, 0);
}

/* the host as read (no overrides): plausible numbers and a description */
static void test_host(void **state) {
    (void)state;
    tc_target t;
    char info[512];
    assert_int_equal(tc_cpu_target(&t, info, sizeof info), TC_OK);
    fprintf(stderr, "host: %s\n", info);
    assert_true(t.simd_floats == 4 || t.simd_floats == 8 || t.simd_floats == 16);
    assert_true(t.simd_regs == 16 || t.simd_regs == 32);
    assert_true(t.cores >= 1);
    assert_non_null(strstr(info, "float lanes"));
    assert_non_null(strstr(info, "L1d "));
    if (t.cache[0].bytes) assert_true(t.cache[0].bytes >= 4096 && t.cache[0].bytes <= (1 << 24));
    if (t.cache[1].bytes) assert_true(t.cache[1].bytes >= t.cache[0].bytes);
#if defined(__x86_64__)
    /* an L3 says how many share it: sysfs's list, else the package's threads */
    if (t.cache[2].bytes) assert_true(t.cache[2].shared >= 1);
#endif
    assert_false(t.has_local);
    assert_true(t.has_vec);
}

static void test_overrides(void **state) {
    (void)state;
    setenv("TC_CPU_L1D", "16K", 1);
    setenv("TC_CPU_L2", "3M", 1);
    setenv("TC_CPU_L3", "123456", 1);
    setenv("TC_CPU_ISA", "AVX512", 1);
    tc_target t;
    char info[512];
    assert_int_equal(tc_cpu_target(&t, info, sizeof info), TC_OK);
    assert_int_equal(t.cache[0].bytes, 16384);
    assert_int_equal(t.cache[1].bytes, 3 << 20);
    assert_int_equal(t.cache[2].bytes, 123456);
    assert_int_equal(t.simd_floats, 16);
    assert_int_equal(t.simd_regs, 32);
    assert_non_null(strstr(info, "avx512 (16 float lanes, 32 registers)"));
    assert_non_null(strstr(info, "L1d 16 KiB"));
    assert_non_null(strstr(info, "L2 3 MiB"));
    assert_non_null(strstr(info, "set by TC_CPU_L1D TC_CPU_L2 TC_CPU_L3 TC_CPU_ISA"));
    setenv("TC_CPU_ISA", "sse2", 1);
    assert_int_equal(tc_cpu_target(&t, NULL, 0), TC_OK);
    assert_int_equal(t.simd_floats, 4);
    assert_int_equal(t.simd_regs, 16);
    unsetenv("TC_CPU_L1D"), unsetenv("TC_CPU_L2"), unsetenv("TC_CPU_L3"), unsetenv("TC_CPU_ISA");
}

/* a malformed override: tc_cpu_target says which and why; the CPU device does
 * not open and the public call that needed it names it */
static void test_bad_override(void **state) {
    (void)state;
    static const char *const bad[] = {"12Q", "-5", "0", "", "4KB", "2000G"};
    tc_target t;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TC_CPU_L2", bad[i], 1);
        tc_status st = tc_cpu_target(&t, NULL, 0);
        if (!bad[i][0]) { /* empty: not set */
            assert_int_equal(st, TC_OK);
            continue;
        }
        assert_int_equal(st, TC_ERR_DEVICE);
        assert_non_null(strstr(tc_last_error(), "TC_CPU_L2"));
        assert_non_null(strstr(tc_last_error(), bad[i]));
    }
    setenv("TC_CPU_L2", "12Q", 1);
    setenv("TC_CPU_ISA", "avx2", 1);
    assert_null(tc_zeros(1, (int64_t[]){4}, TC_FLOAT32, "CPU"));
    assert_tc_error(TC_ERR_DEVICE, "tc_zeros: CPU: TC_CPU_L2='12Q' is not a cache size");
    unsetenv("TC_CPU_L2");
    setenv("TC_CPU_ISA", "avx3", 1);
    assert_null(tc_zeros(1, (int64_t[]){4}, TC_FLOAT32, "CPU"));
    assert_tc_error(TC_ERR_DEVICE, "TC_CPU_ISA='avx3' is not one of sse2, avx, avx2, avx512");
    unsetenv("TC_CPU_ISA");
    tc_tensor *z = tc_zeros(1, (int64_t[]){4}, TC_FLOAT32, "CPU"); /* opens now */
    assert_non_null(z);
    float *v = tc_test_read(z);
    assert_true(v[0] == 0 && v[3] == 0);
    free(v);
    tc_release(z);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sysfs),
        cmocka_unit_test(test_host),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_bad_override),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return rc;
}
