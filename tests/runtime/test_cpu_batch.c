/* test_cpu_batch.c - the CPU device's batched builds (src/runtime/cpu_cc.c,
 * cpu_batch.c): which sources may share a translation unit, the batch's
 * text, how many compiler runs prebuild makes for N kernels, what the cache
 * holds after a batch (one .so per batch, one .ref per kernel, nothing
 * under a kernel's own key), a failing kernel inside a batch, stale and
 * corrupt entries, processes racing, and running out of memory.
 * TC_CC_JOBS fixes the compilers run at once, so the counts are exact.
 * The cache lives in a fresh mkdtemp directory, removed at the end.
 */
#include "tc_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "runtime/cpu.h"
#include "tensor/tensor.h"

static char root[256]; /* the mkdtemp directory: TC_CACHEDIR */

/* files in the cache whose names end with suffix ("" counts all) */
static int count_files(const char *suffix) {
    DIR *d = opendir(root);
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

/* no temp file (.c, .log, .tmp, a compiler's temp .so) is left */
static void assert_no_temp_files(void) {
    assert_int_equal(count_files(""), count_files(".so") + count_files(".ref"));
    DIR *d = opendir(root);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) /* published names: 32 hex + extension */
        if (e->d_name[0] != '.') assert_true(strchr(e->d_name, '-') == NULL);
    closedir(d);
}

static void remove_cache(void) {
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
}

/* after each test: a new start with an empty cache */
static int fresh_cache(void **state) {
    (void)state;
    tc_runtime_shutdown();
    remove_cache();
    return 0;
}

static int setup(void **state) {
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/tc_test_cpu_batch_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return -1;
    setenv("TC_CACHEDIR", root, 1);
    setenv("TC_CC_JOBS", "2", 1);
    unsetenv("TC_DEVICE");
    unsetenv("TC_CC");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tc_runtime_shutdown();
    tc_flags_shutdown();
    remove_cache();
    rmdir(root);
    return 0;
}

static tc_dev *cpu(void) {
    assert_int_equal(tc_device_open("CPU", "test"), 0);
    return tc_device_get(0);
}

/* kernel i: out[j] = twice(a[j]) + i over 16 floats, with a prelude of an
 * include, a typedef and a helper that every kernel shares */
static const char *prelude = "#include <stdint.h>\n"
                             "typedef float tc_test_f;\n"
                             "static inline tc_test_f twice(tc_test_f x) {\n"
                             "    return x + x;\n"
                             "}\n";

/* kernel i, its body padded with a comment of pad bytes (a batch splits
 * across compilers by the bytes of its kernels: cpu_cc.c's CC_START_BYTES) */
static void kernel_src_padded(char *buf, size_t size, int i, int pad) {
    int n = snprintf(buf, size,
                     "%s/* kernel %d */\n"
                     "void k(float *restrict out, const float *restrict a) {\n"
                     "    for (int32_t j = 0; j < 16; j++) out[j] = twice(a[j]) + %d.0f;\n",
                     prelude, i, i);
    assert_true(n > 0 && (size_t)n + (size_t)pad + 8 < size);
    memcpy(buf + n, "/*", 2);
    memset(buf + n + 2, ' ', (size_t)pad);
    memcpy(buf + n + 2 + pad, "*/\n}\n", 6);
}

static void kernel_src(char *buf, size_t size, int i) {
    kernel_src_padded(buf, size, i, 0);
}

/* launches a kernel of kernel_src(i) (or of the same numbers) and checks out */
static void check_kernel(tc_dev *d, tc_program *p, int i) {
    assert_non_null(p);
    float a[16], out[16];
    for (int j = 0; j < 16; j++) a[j] = (float)j - 4.0f, out[j] = -1.0f;
    void *args[2] = {out, a};
    assert_int_equal(d->launch(d, p, args, 2, NULL), TC_OK);
    for (int j = 0; j < 16; j++) assert_true(out[j] == 2.0f * a[j] + (float)i);
}

/* ---- the text ----------------------------------------------------------------- */

static void test_can_join(void **state) {
    (void)state;
    char src[1024];
    kernel_src(src, sizeof src, 0);
    assert_true(tc_cpu_batch_can_join(src, "k"));
    assert_false(tc_cpu_batch_can_join(src, "nope")); /* no kernel: compiled alone */
    const char *body = strstr(src, "void k(");
    assert_int_equal(tc_cpu_batch_kernel_bytes(src, "k"), strlen(body)); /* the prelude not counted */
    assert_int_equal(tc_cpu_batch_kernel_bytes(src, "nope"), 0);
    static const struct {
        const char *src; /* a prelude item, then the kernel */
        bool ok;         /* may join */
    } cases[] = {
        {"int f(int x);\n", true},                       /* a prototype */
        {"typedef struct { int a; } pair;\n", true},     /* a type */
        {"#if defined(X)\n#include <math.h>\n#endif\n", true},
        {"static inline int f(void) { return '}'; } /* } */\n", true}, /* braces in literals */
        {"// }\nstatic inline int f(void) { return 1; }\n", true},
        {"int calls;\n", false},                         /* an object: would be shared */
        {"static const float t[2] = {1, 2};\n", false},
        {"static inline int f(void) { static int n; return n++; }\n", false},
        {"#define N 4\n", false},                        /* reaches later kernels */
        {"#ifndef TC_G\n#define TC_G\nint f(int x);\n#endif\n", true}, /* an include guard */
        {"#ifndef TC_G\n#define TC_G 1\n#endif\n", false},   /* a guard has no value */
        {"#ifndef TC_G\n#define TC_H\n#endif\n", false},     /* nor another name */
        {"#ifndef G\n#define G\n#endif\n", false},           /* guards are TC_ names */
        {"#ifndef TC_G\nint f(int x);\n#define TC_G\n#endif\n", false}, /* right after */
        {"#define TC_G\n", false},                             /* not after its #ifndef */
        {"static inline int f(void) { return TC_G; }\n", false}, /* code naming a TC_ name */
        {"#pragma GCC optimize(\"O3\")\n", false},
        {"_Pragma(\"GCC optimize(3)\") int f(void);\n", false},
        {"struct s { int a; };\n", false},
        {"/* unterminated\n", false},
        {"static inline int f(void) { return 1;\n", false}, /* open brace */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(src, sizeof src, "%svoid k(float *o) { o[0] = 1.0f; }\n", cases[c].src);
        if (tc_cpu_batch_can_join(src, "k") != cases[c].ok) fail_msg("case %zu: %s", c, src);
    }
    /* the kernel itself is one function; another object after it may not join */
    assert_false(tc_cpu_batch_can_join("void k(int *o) { o[0] = 1; }\nint n;\n", "k"));
    assert_true(tc_cpu_batch_can_join("void k(int *o) { static int n; o[0] = n++; }\n", "k"));
}

/* occurrences of needle in s */
static int count_in(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_batch_text(void **state) {
    (void)state;
    char srcs[3][1024], keys[3][33];
    tc_cpu_kernel ks[3];
    for (int i = 0; i < 3; i++) {
        kernel_src(srcs[i], sizeof srcs[i], i);
        assert_int_equal(tc_cpu_cc_key(srcs[i], keys[i]), TC_OK);
        ks[i] = (tc_cpu_kernel){keys[i], srcs[i], "k"};
    }
    int members[3] = {2, 0, 1};
    char *text = tc_cpu_batch_text(ks, members, 3);
    assert_non_null(text);
    assert_int_equal(count_in(text, "#include <stdint.h>"), 1); /* each item once */
    assert_int_equal(count_in(text, "static inline tc_test_f twice"), 1);
    assert_int_equal(count_in(text, "#undef k\n"), 3);
    for (int i = 0; i < 3; i++) {
        char def[128];
        snprintf(def, sizeof def, "#define k k__%s\n", keys[i]);
        assert_int_equal(count_in(text, def), 1);
    }
    assert_true(strstr(text, "+ 2.0f;") < strstr(text, "+ 0.0f;")); /* in members' order */
    tc_free(text);
    char *sym = tc_cpu_batch_symbol("k", keys[0]);
    assert_non_null(sym);
    assert_int_equal(strlen(sym), 1 + 2 + 32);
    tc_free(sym);
}

/* two items with one guard and different text: the batch fails to compile
 * (its #error), so prebuild builds them one a run and each keeps its own */
static void test_guard_conflict(void **state) {
    (void)state;
    tc_dev *d = cpu();
    setenv("TC_CC_JOBS", "1", 1);
    const char *fmt = "#ifndef TC_TEST_G\n#define TC_TEST_G\n"
                      "static inline float g(void) { return %d.0f; }\n#endif\n"
                      "void %s(float *out) { out[0] = g(); }\n";
    char a[300], b[300], keys[2][33];
    snprintf(a, sizeof a, fmt, 1, "ga");
    snprintf(b, sizeof b, fmt, 2, "gb");
    assert_true(tc_cpu_batch_can_join(a, "ga") && tc_cpu_batch_can_join(b, "gb"));
    assert_int_equal(tc_cpu_cc_key(a, keys[0]), TC_OK);
    assert_int_equal(tc_cpu_cc_key(b, keys[1]), TC_OK);
    tc_cpu_kernel ks[2] = {{keys[0], a, "ga"}, {keys[1], b, "gb"}};
    char *text = tc_cpu_batch_text(ks, (int[]){0, 1}, 2);
    assert_non_null(text);
    assert_int_equal(count_in(text, "#error"), 2); /* a check before each guarded item */
    tc_free(text);
    const char *p2[2] = {a, b}, *n2[2] = {"ga", "gb"};
    int64_t runs = tc_cpu_compile_count();
    assert_int_equal(d->prebuild(d, p2, n2, 2), TC_OK);
    setenv("TC_CC_JOBS", "2", 1);
    assert_int_equal(tc_cpu_compile_count(), runs + 3); /* the batch, then each alone */
    float out = 0;
    void *args[1] = {&out};
    tc_program *pa = d->compile(d, a, "ga"), *pb = d->compile(d, b, "gb");
    assert_non_null(pa);
    assert_non_null(pb);
    assert_int_equal(d->launch(d, pa, args, 1, NULL), TC_OK);
    assert_true(out == 1.0f);
    assert_int_equal(d->launch(d, pb, args, 1, NULL), TC_OK);
    assert_true(out == 2.0f);
    assert_int_equal(tc_cpu_compile_count(), runs + 3);
}

/* the renderer's own sources join (their preludes are include guards): a
 * schedule of many different kernels, vectorized and with transcendentals,
 * is built from an empty cache in one compiler run per job, and its results
 * match the reference evaluator */
static void test_rendered_kernels_batch(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, (int64_t[]){64, 32}, 7, 0.1f, 2.0f);
    assert_non_null(x);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *xx = tc_mul(x, x), *xxx = tc_add(xx, x), *lg = tc_log(xxx), *sq = tc_sqrt(x);
    tc_tensor *xt = tc_transpose(x, 0, 1), *nx = tc_neg(x); /* intermediates */
    tc_tensor *outs[6] = {
        tc_exp(x), tc_sum(lg, 1, (int[]){1}, false), tc_sin(x), tc_max(sq, 1, (int[]){0}, false),
        tc_matmul(x, xt), tc_relu(nx),
    };
    void *want[6];
    for (int i = 0; i < 6; i++) {
        assert_non_null(outs[i]);
        want[i] = malloc((size_t)tc_numel(outs[i]) * sizeof(float));
        assert_int_equal(tc_ref_eval(tc_tensor_node(outs[i]), want[i]), TC_OK);
    }
    int64_t runs = tc_cpu_compile_count(), built = tc_cpu_build_count();
    tc_counters c0, c1;
    tc_get_counters(&c0);
    assert_int_equal(tc_realize(outs, 6), TC_OK);
    tc_get_counters(&c1);
    assert_true(c1.kernel_count - c0.kernel_count >= 3);
    assert_int_equal(tc_cpu_build_count() - built, c1.kernel_count - c0.kernel_count); /* all new */
    assert_int_equal(tc_cpu_compile_count() - runs, 1); /* small: one run, though TC_CC_JOBS=2 */
    for (int i = 0; i < 6; i++) {
        float *got = tc_test_read(outs[i]);
        assert_true(tc_allclose_f32(got, want[i], tc_numel(outs[i]), 1e-5, 1e-5, "batched"));
        free(got), free(want[i]);
        tc_release(outs[i]);
    }
    tc_release(xx), tc_release(xxx), tc_release(lg), tc_release(sq), tc_release(xt), tc_release(nx);
    tc_release(x);
}

/* ---- prebuild ------------------------------------------------------------------- */

enum { N_KERNELS = 6 };

static char srcs[N_KERNELS][8192];
static const char *src_p[N_KERNELS], *names[N_KERNELS];

/* N_KERNELS kernels numbered from base, each padded with pad bytes */
static void make_padded_kernels(int base, int pad) {
    for (int i = 0; i < N_KERNELS; i++) {
        kernel_src_padded(srcs[i], sizeof srcs[i], base + i, pad);
        src_p[i] = srcs[i], names[i] = "k";
    }
}

static void make_kernels(int base) {
    make_padded_kernels(base, 0);
}

/* whether <dir>/<key of src><ext> exists */
static bool has_entry(const char *src, const char *ext) {
    char key[33], path[600];
    assert_int_equal(tc_cpu_cc_key(src, key), TC_OK);
    snprintf(path, sizeof path, "%s/%s%s", root, key, ext);
    return access(path, F_OK) == 0;
}

/* N kernels of 6 KB, 2 compilers at once: 2 runs of 3 kernels, one .so
 * each and a .ref per kernel, no .so under a kernel's key; compile and a new
 * process's compile then load them without a compiler */
static void test_prebuild_batches(void **state) {
    (void)state;
    tc_dev *d = cpu();
    make_padded_kernels(10, 6000);
    int64_t runs = tc_cpu_compile_count(), built = tc_cpu_build_count();
    int sos = count_files(".so");
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    assert_int_equal(tc_cpu_compile_count(), runs + 2);
    assert_int_equal(tc_cpu_build_count(), built + N_KERNELS);
    assert_int_equal(count_files(".so"), sos + 2);
    assert_int_equal(count_files(".ref"), N_KERNELS);
    assert_no_temp_files();
    for (int i = 0; i < N_KERNELS; i++) {
        assert_true(has_entry(srcs[i], ".ref"));
        assert_false(has_entry(srcs[i], ".so")); /* a batch is not found under a kernel's key */
    }
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK); /* nothing new */
    assert_int_equal(tc_cpu_compile_count(), runs + 2);
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 10 + i);
    tc_runtime_shutdown(); /* a new start finds them on disk */
    d = cpu();
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 10 + i);
    assert_int_equal(tc_cpu_compile_count(), runs + 2);
}

/* 2 compilers at once: a second runs only for 16 KB of kernel source
 * (twice CC_START_BYTES): 6 kernels of 2 KB in one run, of 3 KB in two */
static void test_prebuild_split_rule(void **state) {
    (void)state;
    tc_dev *d = cpu();
    make_padded_kernels(40, 2000);
    int64_t runs = tc_cpu_compile_count();
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    assert_int_equal(tc_cpu_compile_count(), runs + 1);
    make_padded_kernels(50, 3000);
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    assert_int_equal(tc_cpu_compile_count(), runs + 3);
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 50 + i);
}

/* one compiler at once: a batch of all, and one kernel in it does not
 * compile: the batch's kernels are built again one a run, the good ones
 * work, and compile reports the bad one's own error */
static void test_batch_failure(void **state) {
    (void)state;
    tc_dev *d = cpu();
    setenv("TC_CC_JOBS", "1", 1);
    make_kernels(20);
    src_p[3] = "void bad(float *out) { out[0] = undefined_name; }\n";
    names[3] = "bad";
    int64_t runs = tc_cpu_compile_count(), built = tc_cpu_build_count();
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    setenv("TC_CC_JOBS", "2", 1);
    assert_int_equal(tc_cpu_compile_count(), runs + 1 + N_KERNELS);
    assert_int_equal(tc_cpu_build_count(), built + N_KERNELS - 1);
    assert_int_equal(count_files(".ref"), 0); /* each good one has its own .so */
    assert_no_temp_files();
    for (int i = 0; i < N_KERNELS; i++)
        if (i != 3) check_kernel(d, d->compile(d, srcs[i], "k"), 20 + i);
    assert_int_equal(tc_cpu_compile_count(), runs + 1 + N_KERNELS);
    assert_null(d->compile(d, src_p[3], "bad"));
    assert_tc_error(TC_ERR_COMPILE, "CPU compile of 'bad' failed");
    assert_tc_error(TC_ERR_COMPILE, "undefined_name");
    assert_int_equal(tc_cpu_compile_count(), runs + 2 + N_KERNELS);
    assert_no_temp_files();
}

/* sources that may not join are compiled alone, and keep their own state:
 * two kernels whose identical preludes hold a counter each count apart */
static void test_alone_keeps_state(void **state) {
    (void)state;
    tc_dev *d = cpu();
    setenv("TC_CC_JOBS", "1", 1);
    make_kernels(30);
    const char *counter = "static int calls;\n"
                          "void %s(int *out) { out[0] = ++calls; }\n";
    char c1[200], c2[200];
    snprintf(c1, sizeof c1, counter, "count_a");
    snprintf(c2, sizeof c2, counter, "count_b");
    src_p[0] = c1, names[0] = "count_a";
    src_p[1] = c2, names[1] = "count_b";
    int64_t runs = tc_cpu_compile_count();
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    setenv("TC_CC_JOBS", "2", 1);
    assert_int_equal(tc_cpu_compile_count(), runs + 3); /* a batch of 4, two alone */
    assert_int_equal(count_files(".ref"), N_KERNELS - 2);
    tc_program *pa = d->compile(d, c1, "count_a"), *pb = d->compile(d, c2, "count_b");
    assert_non_null(pa);
    assert_non_null(pb);
    int out = 0;
    void *args[1] = {&out};
    assert_int_equal(d->launch(d, pa, args, 1, NULL), TC_OK);
    assert_int_equal(d->launch(d, pa, args, 1, NULL), TC_OK);
    assert_int_equal(out, 2);
    assert_int_equal(d->launch(d, pb, args, 1, NULL), TC_OK);
    assert_int_equal(out, 1);
    for (int i = 2; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 30 + i);
    assert_int_equal(tc_cpu_compile_count(), runs + 3);
}

/* a .ref whose batch is gone, or that is not a ref, counts as no entry:
 * compile builds that kernel alone */
static void test_stale_and_bad_refs(void **state) {
    (void)state;
    tc_dev *d = cpu();
    make_kernels(40);
    assert_int_equal(d->prebuild(d, src_p, names, N_KERNELS), TC_OK);
    tc_runtime_shutdown();
    d = cpu();
    char key[33], path[600];
    assert_int_equal(tc_cpu_cc_key(srcs[0], key), TC_OK);
    snprintf(path, sizeof path, "%s/%s.ref", root, key);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("tinyc-batch 0123 k\n", f); /* not a key */
    fclose(f);
    int64_t runs = tc_cpu_compile_count();
    check_kernel(d, d->compile(d, srcs[0], "k"), 40);
    assert_int_equal(tc_cpu_compile_count(), runs + 1);
    assert_true(has_entry(srcs[0], ".so"));
    char own[33]; /* srcs[0]'s own .so stays; every batch .so goes: the other refs are stale */
    assert_int_equal(tc_cpu_cc_key(srcs[0], own), TC_OK);
    DIR *dir = opendir(root);
    assert_non_null(dir);
    for (struct dirent *e; (e = readdir(dir));) {
        size_t l = strlen(e->d_name);
        if (l != 35 || strcmp(e->d_name + 32, ".so") != 0 || strncmp(e->d_name, own, 32) == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        unlink(path);
    }
    closedir(dir);
    check_kernel(d, d->compile(d, srcs[1], "k"), 41);
    assert_int_equal(tc_cpu_compile_count(), runs + 2);
    assert_no_temp_files();
}

/* several processes prebuild the same new kernels at once: each gets
 * working kernels, the cache ends with an entry per kernel and no temp
 * files, and this process then loads them all without a compiler */
static void test_processes_race(void **state) {
    (void)state;
    tc_dev *d = cpu();
    make_kernels(50);
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        assert_true(kids[i] >= 0);
        if (kids[i] == 0) {
            bool ok = d->prebuild(d, src_p, names, N_KERNELS) == TC_OK;
            for (int k = 0; k < N_KERNELS && ok; k++) {
                tc_program *p = d->compile(d, srcs[k], "k");
                float a[16] = {1}, out[16] = {0};
                void *args[2] = {out, a};
                ok = p && d->launch(d, p, args, 2, NULL) == TC_OK && out[0] == 2.0f + 50 + k;
            }
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < 4; i++) {
        int status = 0;
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(count_files(".ref"), N_KERNELS);
    assert_no_temp_files();
    int64_t runs = tc_cpu_compile_count();
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 50 + i);
    assert_int_equal(tc_cpu_compile_count(), runs);
}

/* whether every kernel of make_kernels has a cache entry */
static bool all_built(void) {
    for (int i = 0; i < N_KERNELS; i++)
        if (!has_entry(srcs[i], ".ref") && !has_entry(srcs[i], ".so")) return false;
    return true;
}

/* the Nth allocation of prebuild fails, for every N until all is built:
 * each failure is TC_ERR_MEMORY (or nothing built, which compile would
 * redo) and leaves no temp file (LSan checks the memory); the kernels work
 * afterwards */
static void test_prebuild_out_of_memory(void **state) {
    (void)state;
    tc_dev *d = cpu();
    make_kernels(60);
    int n = 1;
    for (; !all_built() && n < 2000; n++) {
        tc_mem_fail_after(n);
        tc_status st = d->prebuild(d, src_p, names, N_KERNELS);
        tc_mem_fail_after(0);
        if (st != TC_OK) assert_int_equal(st, TC_ERR_MEMORY);
        assert_no_temp_files();
    }
    assert_true(all_built());
    assert_true(n > 10); /* several allocations were made to fail */
    int64_t runs = tc_cpu_compile_count();
    for (int i = 0; i < N_KERNELS; i++) check_kernel(d, d->compile(d, srcs[i], "k"), 60 + i);
    assert_int_equal(tc_cpu_compile_count(), runs);
}

int main(void) {
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_can_join),
        cmocka_unit_test_teardown(test_guard_conflict, fresh_cache),
        cmocka_unit_test_teardown(test_rendered_kernels_batch, fresh_cache),
        cmocka_unit_test(test_batch_text),
        cmocka_unit_test_setup_teardown(test_prebuild_batches, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_prebuild_split_rule, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_batch_failure, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_alone_keeps_state, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_stale_and_bad_refs, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_processes_race, NULL, fresh_cache),
        cmocka_unit_test_setup_teardown(test_prebuild_out_of_memory, NULL, fresh_cache),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, setup, teardown);
}
