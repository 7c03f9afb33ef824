/* test_cpu_cache.c - the kernel cache checks what it loads (src/runtime/cache.c,
 * cpu_cc.c, cpu.c): every entry is sealed (key, size, sum), nothing that
 * does not verify is dlopen'ed, and what does not verify is rebuilt. Each
 * kind of damage (cut to half, emptied, garbage, one byte changed, another
 * key's entry copied over it, an unsealed .so that exports the symbol, one
 * that exports another symbol, an empty directory, a directory with a file
 * in it) is done to a kernel's own .so, to a batch member's .ref and to a
 * batch's .so, and each time the kernels give the right numbers, the
 * compiler runs exactly as often as the damage needs, the entry is whole
 * again and no foreign .so was ever loaded (its constructor would set an
 * environment variable). Also: processes racing to repair one entry, and
 * the OpenCL/CUDA program cache (tc_cache_load) dropping damaged entries.
 * The cache lives in a fresh mkdtemp directory, removed at the end.
 */
#include "tc_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/cpu.h"

static char root[256]; /* the mkdtemp directory: TC_CACHEDIR */

#define LOADED_FLAG "TC_TEST_FOREIGN_LOADED" /* set by a foreign .so's constructor */

/* ---- files -------------------------------------------------------------------- */

/* removes every entry of dir, and the files of its subdirectories */
static void remove_tree(const char *dir, bool is_root) {
    DIR *d = opendir(dir);
    if (d) {
        char path[700];
        for (struct dirent *e; (e = readdir(d));) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            struct stat sb;
            if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(path, false);
            else unlink(path);
        }
        closedir(d);
    }
    if (!is_root) rmdir(dir);
}

/* after each test: a new start with an empty cache */
static int fresh_cache(void **state) {
    (void)state;
    tc_runtime_shutdown();
    remove_tree(root, true);
    unsetenv(LOADED_FLAG);
    return 0;
}

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_cpu_cache_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return -1;
    setenv("TC_CACHEDIR", root, 1);
    setenv("TC_CC_JOBS", "1", 1); /* prebuild: one batch of all */
    unsetenv("TC_DEVICE");
    unsetenv("TC_CC");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tc_runtime_shutdown();
    tc_flags_shutdown();
    remove_tree(root, true);
    rmdir(root);
    return 0;
}

/* no temp file of a build (their names hold a '-') is left in the cache */
static void assert_no_temp_files(void) {
    DIR *d = opendir(root);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (strchr(e->d_name, '-')) fail_msg("temp file left: %s", e->d_name);
    closedir(d);
}

static void entry_path(char *buf, size_t size, const char *key, const char *ext) {
    snprintf(buf, size, "%s/%s%s", root, key, ext);
}

static void key_of(const char *src, char key[33]) {
    assert_int_equal(tc_cpu_cc_key(src, key), TC_OK);
}

static bool is_whole(const char *path, const char *key) {
    tc_cache_entry e;
    tc_cache_check(path, key, &e);
    return e.is_whole;
}

static size_t file_size(const char *path) {
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    return (size_t)sb.st_size;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* the file's bytes (malloc'ed) and size */
static char *read_file(const char *path, size_t *n) {
    *n = file_size(path);
    char *buf = malloc(*n + 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(buf);
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, *n, f), *n);
    fclose(f);
    buf[*n] = '\0';
    return buf;
}

/* ---- kernels ------------------------------------------------------------------- */

enum { N_KERNELS = 4 };

/* kernel i: out[j] = twice(a[j]) + i over 16 floats (with a prelude, so
 * that prebuild batches them) */
static void kernel_src(char *buf, size_t size, int i) {
    snprintf(buf, size,
             "#include <stdint.h>\n"
             "static inline float twice(float x) { return x + x; }\n"
             "void k(float *restrict out, const float *restrict a) {\n"
             "    for (int32_t j = 0; j < 16; j++) out[j] = twice(a[j]) + %d.0f;\n"
             "}\n",
             i);
}

static char srcs[N_KERNELS][512];
static const char *src_p[N_KERNELS], *names[N_KERNELS];
static char keys[N_KERNELS][33];

static void make_kernels(int base) {
    for (int i = 0; i < N_KERNELS; i++) {
        kernel_src(srcs[i], sizeof srcs[i], base + i);
        src_p[i] = srcs[i], names[i] = "k";
        key_of(srcs[i], keys[i]);
    }
}

static tc_dev *cpu(void) {
    assert_int_equal(tc_device_open("CPU", "test"), 0);
    return tc_device_get(0);
}

/* compiles src and checks out = 2a + i */
static void check_kernel(tc_dev *d, const char *src, int i) {
    tc_program *p = d->compile(d, src, "k");
    if (!p) fail_msg("compile: %s", tc_last_error());
    float a[16], out[16];
    for (int j = 0; j < 16; j++) a[j] = (float)j - 4.0f, out[j] = -1.0f;
    void *args[2] = {out, a};
    assert_int_equal(d->launch(d, p, args, 2, NULL), TC_OK);
    for (int j = 0; j < 16; j++)
        if (out[j] != 2.0f * a[j] + (float)i)
            fail_msg("kernel %d: out[%d] = %g, want %g", i, j, out[j], 2.0f * a[j] + (float)i);
}

/* an unsealed .so at path built by cc from text: what an older libtinyc
 * left, or anything else; its constructor sets LOADED_FLAG */
static void foreign_so(const char *path, const char *text) {
    char c_path[700], cmd[2200];
    snprintf(c_path, sizeof c_path, "%s/foreign.c", root);
    FILE *f = fopen(c_path, "w");
    assert_non_null(f);
    fprintf(f,
            "#include <stdlib.h>\n"
            "__attribute__((constructor)) static void mark(void) { setenv(\"%s\", \"1\", 1); }\n"
            "%s",
            LOADED_FLAG, text);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", path, c_path);
    assert_int_equal(system(cmd), 0);
    unlink(c_path);
}

/* ---- damage ----------------------------------------------------------------------- */

typedef enum {
    CUT,       /* cut to half its size */
    EMPTY,     /* zero bytes */
    GARBAGE,   /* as many bytes of garbage */
    FLIP,      /* one byte in the middle changed: the seal intact, the sum not */
    OTHER,     /* another key's whole entry copied over it */
    UNSEALED,  /* a .so exporting the right symbol (wrong numbers), no seal */
    WRONG_SYM, /* a .so exporting another symbol, no seal */
    EMPTY_DIR, /* an empty directory at its name */
    FULL_DIR,  /* a directory holding a file at its name */
    DAMAGE_COUNT
} damage;

static const char *const damage_names[DAMAGE_COUNT] = {
    "cut", "empty", "garbage", "flip", "other", "unsealed", "wrong-symbol", "empty-dir", "full-dir",
};

/* does kind to the entry at path; other: a whole entry of another key; sym:
 * the symbol the entry's kernel has */
static void do_damage(const char *path, damage kind, const char *other, const char *sym) {
    size_t n = 0;
    char *buf = kind <= FLIP ? read_file(path, &n) : NULL;
    char text[400];
    if (kind >= OTHER) unlink(path);
    switch (kind) {
    case CUT: write_file(path, buf, n / 2); break;
    case EMPTY: write_file(path, buf, 0); break;
    case GARBAGE:
        for (size_t i = 0; i < n; i++) buf[i] = (char)(i * 131 + 7);
        write_file(path, buf, n);
        break;
    case FLIP:
        buf[n / 3] ^= 0x10;
        write_file(path, buf, n);
        break;
    case OTHER: {
        size_t m;
        char *o = read_file(other, &m);
        write_file(path, o, m);
        free(o);
        break;
    }
    case UNSEALED:
        snprintf(text, sizeof text,
                 "void %s(float *out, const float *a) { for (int j = 0; j < 16; j++) out[j] = "
                 "-1e3f; }\n",
                 sym);
        foreign_so(path, text);
        break;
    case WRONG_SYM: foreign_so(path, "void something_else(void) {}\n"); break;
    case EMPTY_DIR: assert_int_equal(mkdir(path, 0700), 0); break;
    case FULL_DIR: {
        assert_int_equal(mkdir(path, 0700), 0);
        char keep[700];
        snprintf(keep, sizeof keep, "%s/keep", path);
        write_file(keep, "x", 1);
        break;
    }
    case DAMAGE_COUNT: break;
    }
    free(buf);
}

/* the directory left by FULL_DIR is still there with its file */
static void assert_dir_kept(const char *path) {
    char keep[700];
    snprintf(keep, sizeof keep, "%s/keep", path);
    assert_int_equal(access(keep, F_OK), 0);
}

/* ---- a kernel's own .so ------------------------------------------------------------- */

/* each damage to a kernel's own .so: the next start rebuilds it (one
 * compiler run), the numbers are right, the entry is whole again (a full
 * directory stays and the kernel is built again by each start) */
static void test_own_entry(void **state) {
    (void)state;
    for (int kind = 0; kind < DAMAGE_COUNT; kind++) {
        fresh_cache(NULL);
        make_kernels(10 * kind);
        tc_dev *d = cpu();
        check_kernel(d, srcs[0], 10 * kind);
        check_kernel(d, srcs[1], 10 * kind + 1);
        tc_runtime_shutdown();
        char path[600], other[600];
        entry_path(path, sizeof path, keys[0], ".so");
        entry_path(other, sizeof other, keys[1], ".so");
        assert_true(is_whole(path, keys[0]));
        do_damage(path, (damage)kind, other, "k");
        d = cpu();
        int64_t runs = tc_cpu_compile_count();
        check_kernel(d, srcs[0], 10 * kind);
        check_kernel(d, srcs[1], 10 * kind + 1); /* untouched: from the cache */
        if (tc_cpu_compile_count() != runs + 1)
            fail_msg("%s: %lld compiler runs, want 1", damage_names[kind],
                     (long long)(tc_cpu_compile_count() - runs));
        assert_null(getenv(LOADED_FLAG)); /* no foreign .so was loaded */
        assert_no_temp_files();
        if (kind != FULL_DIR) {
            assert_true(is_whole(path, keys[0]));
            continue;
        }
        assert_dir_kept(path);
        tc_runtime_shutdown();
        d = cpu();
        check_kernel(d, srcs[0], 10 * kind);
        assert_int_equal(tc_cpu_compile_count(), runs + 2);
        assert_no_temp_files();
    }
}

/* ---- batches ------------------------------------------------------------------------- */

/* prebuilds src_p in one batch (one compiler run); the path of its .so
 * (from the ref of kernel member, one of its kernels) into bso, its key
 * into bkey */
static void prebuild_batch(tc_dev *d, int member, char *bso, size_t size, char bkey[33]) {
    int64_t runs = tc_cpu_compile_count();
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    assert_int_equal(tc_cpu_compile_count(), runs + 1);
    char ref[600];
    entry_path(ref, sizeof ref, keys[member], ".ref");
    size_t n;
    char *text = read_file(ref, &n);
    memset(bkey, 0, 33);
    assert_int_equal(sscanf(text, "tinyc-batch %32s ", bkey), 1);
    free(text);
    entry_path(bso, size, bkey, ".so");
    assert_true(is_whole(bso, bkey));
}

/* each damage to one member's .ref: that kernel is built again alone, the
 * others still come from the batch */
static void test_ref_entry(void **state) {
    (void)state;
    for (int kind = 0; kind < DAMAGE_COUNT; kind++) {
        if (kind == UNSEALED || kind == WRONG_SYM) continue; /* a ref is text: see OTHER, GARBAGE */
        fresh_cache(NULL);
        make_kernels(100 + 10 * kind);
        tc_dev *d = cpu();
        char bso[600], ref[600], other[600], bkey[33];
        prebuild_batch(d, 0, bso, sizeof bso, bkey);
        tc_runtime_shutdown();
        entry_path(ref, sizeof ref, keys[0], ".ref");
        entry_path(other, sizeof other, keys[1], ".ref");
        do_damage(ref, (damage)kind, other, NULL);
        d = cpu();
        int64_t runs = tc_cpu_compile_count();
        for (int i = 0; i < N_KERNELS; i++) check_kernel(d, srcs[i], 100 + 10 * kind + i);
        if (tc_cpu_compile_count() != runs + 1)
            fail_msg("%s: %lld compiler runs, want 1", damage_names[kind],
                     (long long)(tc_cpu_compile_count() - runs));
        char own[600];
        entry_path(own, sizeof own, keys[0], ".so");
        assert_true(is_whole(own, keys[0])); /* now a .so of its own */
        if (kind == FULL_DIR) assert_dir_kept(ref);
        else assert_int_equal(access(ref, F_OK), -1); /* the bad ref went */
        assert_null(getenv(LOADED_FLAG));
        assert_no_temp_files();
    }
}

/* each damage to a batch's .so: prebuild finds it bad and builds the batch
 * again in one run (a full directory in the way: the batch cannot be
 * published, so each kernel is built alone), and every kernel then loads
 * without the compiler */
static void test_batch_entry(void **state) {
    (void)state;
    for (int kind = 0; kind < DAMAGE_COUNT; kind++) {
        fresh_cache(NULL);
        tc_dev *d = cpu();
        char bso[600], other[600], bkey[33];
        make_kernels(200 + 10 * kind); /* another batch, whose whole .so OTHER copies */
        prebuild_batch(d, 0, other, sizeof other, bkey);
        make_kernels(300 + 10 * kind); /* the batch under test */
        prebuild_batch(d, 0, bso, sizeof bso, bkey);
        tc_runtime_shutdown();
        char *sym = tc_cpu_batch_symbol("k", keys[0]);
        do_damage(bso, (damage)kind, other, sym);
        tc_free(sym);
        d = cpu();
        int64_t runs = tc_cpu_compile_count();
        assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
        int64_t want = kind == FULL_DIR ? 1 + N_KERNELS : 1;
        if (tc_cpu_compile_count() != runs + want)
            fail_msg("%s: %lld compiler runs, want %lld", damage_names[kind],
                     (long long)(tc_cpu_compile_count() - runs), (long long)want);
        for (int i = 0; i < N_KERNELS; i++) check_kernel(d, srcs[i], 300 + 10 * kind + i);
        assert_int_equal(tc_cpu_compile_count(), runs + want);
        if (kind == FULL_DIR) assert_dir_kept(bso);
        else assert_true(is_whole(bso, bkey));
        assert_null(getenv(LOADED_FLAG));
        assert_no_temp_files();
    }
}

/* ---- processes racing -------------------------------------------------------------- */

/* runs body in 4 processes at once; each must exit 0 */
static void race(bool (*body)(tc_dev *d), tc_dev *d) {
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) _exit(body(d) ? 0 : 1); /* no cmocka, no leak report in the child */
    }
    for (int i = 0; i < 4; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static int race_base; /* the kernels' numbers: 2a + race_base + i */

/* prebuilds and runs every kernel (in a child) */
static bool prebuild_and_run(tc_dev *d) {
    bool ok = d->prebuild(d, src_p, names, N_KERNELS) == TC_OK;
    for (int i = 0; i < N_KERNELS && ok; i++) {
        tc_program *p = d->compile(d, srcs[i], "k");
        float a[16] = {1}, out[16] = {0};
        void *args[2] = {out, a};
        ok = p && d->launch(d, p, args, 2, NULL) == TC_OK && out[0] == 2.0f + race_base + i;
    }
    return ok && !getenv(LOADED_FLAG);
}

/* compiles and runs kernel 0 alone (in a child) */
static bool compile_and_run(tc_dev *d) {
    tc_program *p = d->compile(d, srcs[0], "k");
    float a[16] = {1}, out[16] = {0};
    void *args[2] = {out, a};
    return p && d->launch(d, p, args, 2, NULL) == TC_OK && out[0] == 2.0f + race_base;
}

/* processes that find the same damaged entries at once each repair them
 * and get working kernels; the cache ends whole, with no temp files, and
 * this process loads it all without the compiler */
static void test_processes_repair(void **state) {
    (void)state;
    race_base = 400;
    make_kernels(race_base);
    tc_dev *d = cpu();
    check_kernel(d, srcs[0], race_base); /* kernel 0 alone, its own .so */
    char bso[600], own[600], bkey[33];
    for (int i = 0; i < N_KERNELS; i++) /* kernel 0 is built: the batch holds kernels 1..3 */
        src_p[i] = srcs[(i + 1) % N_KERNELS];
    tc_runtime_shutdown();
    d = cpu();
    prebuild_batch(d, 1, bso, sizeof bso, bkey);
    entry_path(own, sizeof own, keys[0], ".so");
    for (int i = 0; i < N_KERNELS; i++) src_p[i] = srcs[i];
    tc_runtime_shutdown();
    do_damage(own, CUT, NULL, NULL);
    do_damage(bso, FLIP, NULL, NULL);
    d = cpu();
    race(compile_and_run, d);
    race(prebuild_and_run, d);
    assert_true(is_whole(own, keys[0]));
    assert_true(is_whole(bso, bkey));
    assert_no_temp_files();
    int64_t runs = tc_cpu_compile_count();
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, srcs[i], race_base + i);
    assert_int_equal(tc_cpu_compile_count(), runs);
}

/* ---- the OpenCL/CUDA program cache ---------------------------------------------------- */

/* tc_cache_store seals what it writes; tc_cache_load gives it back, and
 * gives nothing for each damage (removing the damaged file, but not a full
 * directory), so the caller builds and stores it again */
/* TC_CPU_ISA=avx2 holds the compiler to AVX2 (cpu_cc.c's isa_words), part
 * of a kernel's key: the same source keys otherwise under avx2, as the
 * host's under avx512 and sse2 (plans only) */
static void test_isa_key(void **state) {
    (void)state;
    const char *src = "void f(float *a) { a[0] += 1.0f; }\n", *was = getenv("TC_CPU_ISA");
    char *saved = was ? strdup(was) : NULL, host[33], k512[33], k2[33], k_sse[33];
    unsetenv("TC_CPU_ISA");
    key_of(src, host);
    setenv("TC_CPU_ISA", "avx512", 1);
    key_of(src, k512);
    setenv("TC_CPU_ISA", "AVX2", 1);
    key_of(src, k2);
    setenv("TC_CPU_ISA", "sse2", 1);
    key_of(src, k_sse);
    if (saved) setenv("TC_CPU_ISA", saved, 1);
    else unsetenv("TC_CPU_ISA");
    free(saved);
    assert_string_equal(host, k512);
    assert_string_not_equal(host, k2);
    assert_string_equal(host, k_sse);
}

static void test_program_cache(void **state) {
    (void)state;
    const char *bin = "not really a binary\n", *key = "0123456789abcdef0123456789abcdef";
    const char *other_key = "fedcba9876543210fedcba9876543210";
    char path[600], other[600];
    entry_path(path, sizeof path, key, ".tst");
    entry_path(other, sizeof other, other_key, ".tst");
    for (int kind = 0; kind < DAMAGE_COUNT; kind++) {
        if (kind == UNSEALED || kind == WRONG_SYM) continue; /* no symbols here */
        fresh_cache(NULL);
        assert_int_equal(tc_cache_store(other_key, ".tst", "other", 5), TC_OK);
        assert_int_equal(tc_cache_store(key, ".tst", bin, strlen(bin)), TC_OK);
        assert_int_equal(file_size(path), strlen(bin) + TC_CACHE_SEAL_LEN);
        char *data = NULL;
        size_t n = 0;
        assert_int_equal(tc_cache_load(key, ".tst", &data, &n), TC_OK);
        assert_non_null(data);
        assert_int_equal(n, strlen(bin));
        assert_string_equal(data, bin); /* NUL-terminated */
        tc_free(data);
        do_damage(path, (damage)kind, other, NULL);
        assert_int_equal(tc_cache_load(key, ".tst", &data, &n), TC_OK);
        if (data) fail_msg("%s: a damaged entry was loaded", damage_names[kind]);
        assert_int_equal(n, 0);
        if (kind == FULL_DIR) {
            assert_dir_kept(path);
            assert_int_equal(tc_cache_store(key, ".tst", bin, strlen(bin)), TC_ERR_IO);
            assert_tc_error(TC_ERR_IO, "tc_cache_store: cannot write");
            assert_no_temp_files();
            continue;
        }
        assert_int_equal(access(path, F_OK), -1); /* removed */
        assert_int_equal(tc_cache_store(key, ".tst", bin, strlen(bin)), TC_OK);
        assert_int_equal(tc_cache_load(key, ".tst", &data, &n), TC_OK);
        assert_non_null(data);
        assert_string_equal(data, bin);
        tc_free(data);
        assert_no_temp_files();
    }
}

/* the sum: every byte counts, in every position, and the length too */
static void test_sum(void **state) {
    (void)state;
    unsigned char buf[300];
    for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i * 7);
    uint64_t base = tc_cache_sum(buf, sizeof buf);
    for (int i = 0; i < 300; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            if (tc_cache_sum(buf, sizeof buf) == base) fail_msg("byte %d bit %d not seen", i, bit);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    for (size_t n = 0; n < 300; n++) assert_true(tc_cache_sum(buf, n) != base);
    unsigned char zeros[64] = {0};
    for (size_t n = 1; n < 64; n++)
        assert_true(tc_cache_sum(zeros, n) != tc_cache_sum(zeros, n - 1));
    char seal[TC_CACHE_SEAL_LEN + 1];
    tc_cache_seal(seal, "0123456789abcdef0123456789abcdef", 20000, base);
    assert_int_equal(strlen(seal), TC_CACHE_SEAL_LEN);
    const char *want = "tinyc-seal1 0123456789abcdef0123456789abcdef 0000000000004e20 ";
    assert_true(strncmp(seal, want, strlen(want)) == 0);
}

int main(void) {
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_own_entry, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_ref_entry, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_batch_entry, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_processes_repair, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_program_cache, NULL, fresh_cache),
        cmocka_unit_test(test_isa_key),
        cmocka_unit_test(test_sum),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
