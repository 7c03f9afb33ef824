/* test_realize.c - the engine: counters, the on-disk kernel cache (a second
 * run compiles nothing), TC_DEBUG output, and realize of shared inputs. */
#include "tc_test.h"

#include "engine/engine.h"
#include "runtime/runtime.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const int64_t S[2] = {16, 8};

/* (a*b+1).sum(1) realized; returns the first value */
static float run_program(void) {
    tc_tensor *a = tc_test_randn(2, S, 1, -1, 1), *b = tc_test_randn(2, S, 2, -1, 1);
    tc_tensor *one = tc_full(0, NULL, 1.0, TC_FLOAT32, NULL);
    tc_tensor *ab = tc_mul(a, b), *p = tc_add(ab, one);
    int ax = 1;
    tc_tensor *s = tc_sum(p, 1, &ax, false);
    float *v = tc_test_read(s);
    float r = v[0];
    free(v);
    tc_release(a), tc_release(b), tc_release(one), tc_release(ab), tc_release(p), tc_release(s);
    return r;
}

static char cachedir[] = "/tmp/tc_engine_test_XXXXXX";

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(cachedir)) return -1;
    setenv("TC_CACHEDIR", cachedir, 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cachedir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_second_run_compiles_nothing(void **state) {
    (void)state;
    int64_t c0 = tc_cpu_compile_count();
    float first = run_program();
    int64_t c1 = tc_cpu_compile_count();
    assert_int_equal(c1 - c0, 1); /* one fused kernel, compiled once */
    tc_shutdown(); /* forget every in-memory program: like a new process */
    float second = run_program();
    assert_int_equal(tc_cpu_compile_count(), c1); /* loaded from the disk cache */
    assert_true(first == second);
    tc_shutdown();
}

/* exp(x - x.max(1)).sum(0) on a (13,11): kernels no other test builds */
static float run_several(int *n_kernels) {
    const int64_t shape[2] = {13, 11};
    tc_tensor *x = tc_test_randn(2, shape, 21, -2, 2);
    int a1 = 1, a0 = 0;
    tc_tensor *m = tc_max(x, 1, &a1, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &a0, false);
    *n_kernels = tc_schedule_kernel_count(&s, 1);
    float *v = tc_test_read(s);
    float r = v[3];
    free(v);
    tc_release(x), tc_release(m), tc_release(d), tc_release(e), tc_release(s);
    return r;
}

/* a schedule's new kernels are built in one batch (several compilers at
 * once), each into its own cached .so: a second process builds nothing */
static void test_second_process_compiles_nothing(void **state) {
    (void)state;
    tc_shutdown();
    pid_t kid = fork();
    assert_true(kid >= 0);
    if (kid == 0) { /* the first process: a cold cache for these kernels */
        int n = 0;
        tc_counters c;
        tc_reset_counters();
        float v = run_several(&n);
        tc_get_counters(&c);
        bool ok = n >= 2 && c.compile_count == n && v > 0;
        tc_shutdown();
        _exit(ok ? 0 : 1); /* no cmocka, no leak report in the child */
    }
    int status = 0;
    assert_int_equal(waitpid(kid, &status, 0), kid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    tc_reset_counters();
    int n = 0;
    int64_t before = tc_cpu_compile_count();
    float v = run_several(&n);
    tc_counters c;
    tc_get_counters(&c);
    assert_true(n >= 2 && v > 0);
    assert_int_equal(c.compile_count, 0);
    assert_int_equal(tc_cpu_compile_count(), before);
    tc_shutdown();
}

static void test_counters(void **state) {
    (void)state;
    tc_reset_counters();
    run_program();
    tc_counters c;
    tc_get_counters(&c);
    assert_int_equal(c.kernel_count, 1);
    /* 16*8 multiplies, adds and accumulates at least */
    assert_true(c.global_ops >= 3 * 16 * 8);
    /* reads a and b, writes 16 floats */
    assert_int_equal(c.global_mem, (2 * 16 * 8 + 16) * 4);
    tc_reset_counters();
    tc_get_counters(&c);
    assert_int_equal(c.kernel_count, 0);
    tc_shutdown();
}

/* where the time goes: schedule, lower, compile (and how many kernels were
 * built from source), launch; memory in live buffers and its peak */
static void test_time_and_memory_counters(void **state) {
    (void)state;
    tc_reset_counters();
    tc_counters c;
    tc_get_counters(&c);
    int64_t base = c.mem_used;
    assert_true(c.mem_peak == base && c.schedule_s == 0 && c.compile_count == 0);
    /* a source no earlier test built: (a-b)*(a+b) */
    tc_tensor *a = tc_test_randn(2, S, 7, -1, 1), *b = tc_test_randn(2, S, 8, -1, 1);
    tc_tensor *d = tc_sub(a, b), *e = tc_add(a, b), *f = tc_mul(d, e);
    assert_int_equal(tc_realize(&f, 1), TC_OK);
    tc_get_counters(&c);
    assert_int_equal(c.compile_count, 1);
    assert_true(c.schedule_s > 0 && c.lower_s > 0 && c.compile_s > 0 && c.launch_s > 0);
    /* lowering is codegen, then render (and a cache lookup around them) */
    assert_true(c.codegen_s > 0 && c.render_s > 0 && c.codegen_s + c.render_s <= c.lower_s);
    double codegen = c.codegen_s, render = c.render_s;
    /* a, b and f are live: 3 buffers of 16*8 floats */
    assert_int_equal(c.mem_used - base, 3 * 16 * 8 * 4);
    assert_true(c.mem_peak >= c.mem_used);
    tc_release(d), tc_release(e), tc_release(f);
    /* the same kernel again: found in memory, nothing built */
    d = tc_sub(a, b), e = tc_add(a, b), f = tc_mul(d, e);
    assert_int_equal(tc_realize(&f, 1), TC_OK);
    tc_get_counters(&c);
    assert_int_equal(c.compile_count, 1);
    assert_true(c.codegen_s == codegen && c.render_s == render); /* the lowering cache had it */
    int64_t peak = c.mem_peak;
    tc_release(a), tc_release(b), tc_release(d), tc_release(e), tc_release(f);
    tc_get_counters(&c);
    assert_int_equal(c.mem_used, base); /* every buffer given back */
    assert_int_equal(c.mem_peak, peak);
    tc_reset_counters();
    tc_get_counters(&c);
    assert_true(c.mem_peak == base && c.compile_s == 0);
    tc_shutdown();
}

/* graph_nodes: the distinct nodes each schedule walked, shared ones once,
 * views and the realized buffers at the leaves included */
static void test_graph_nodes_counter(void **state) {
    (void)state;
    tc_reset_counters();
    const float data[4] = {1, 2, 3, 4};
    const int64_t shape[1] = {4}, shape2[2] = {2, 2};
    tc_tensor *a = tc_from_data(data, TC_FLOAT32, 1, shape, NULL);
    tc_tensor *b = tc_from_data(data, TC_FLOAT32, 1, shape, NULL);
    tc_tensor *s = tc_add(a, b), *m = tc_mul(s, a); /* a: read twice, one node */
    tc_tensor *r = tc_reshape(m, 2, shape2);        /* one VIEW over m */
    tc_counters c;
    tc_get_counters(&c);
    assert_int_equal(c.graph_nodes, 0);
    assert_int_equal(tc_schedule_kernel_count(&r, 1), 1);
    tc_get_counters(&c);
    assert_int_equal(c.graph_nodes, 5); /* a, b, s, m, the view */
    assert_int_equal(tc_realize(&m, 1), TC_OK);
    tc_get_counters(&c);
    assert_int_equal(c.graph_nodes, 5 + 4); /* a, b, s, m */
    tc_tensor *t = tc_add(m, m);           /* m is a buffer now: 2 nodes */
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    tc_get_counters(&c);
    assert_int_equal(c.graph_nodes, 5 + 4 + 2);
    tc_release(a), tc_release(b), tc_release(s), tc_release(m), tc_release(r), tc_release(t);
    tc_reset_counters();
    tc_get_counters(&c);
    assert_int_equal(c.graph_nodes, 0);
    tc_shutdown();
}

/* buffers share memory inside one realize: a chain of 6 temporaries, each
 * its own kernel (a flip between them), peaks at two of them beside the
 * input, and the result is the reference's */
static void test_memory_shared_in_schedule(void **state) {
    (void)state;
    int64_t n = 1 << 18, sh[1] = {n};
    size_t bytes = (size_t)n * 4;
    tc_tensor *x = tc_rand(1, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *t = tc_retain(x);
    for (int i = 0; i < 6; i++) {
        int ax = 0;
        tc_tensor *a = tc_mul(t, t), *f = tc_flip(a, 1, &ax), *c = tc_contiguous(f);
        tc_release(a), tc_release(f), tc_release(t);
        t = c;
    }
    assert_int_equal(tc_schedule_kernel_count(&t, 1), 6);
    tc_reset_counters();
    tc_counters c;
    tc_get_counters(&c);
    int64_t base = c.mem_used;
    tc_check_schedule(t, 6, 1e-5, 1e-6, "6 temporaries");
    tc_get_counters(&c);
    /* x^64 chained: the 5 temporaries die as soon as the next one is made */
    assert_true(c.mem_peak - base <= (int64_t)(2 * bytes));
    assert_true(c.mem_used - base <= (int64_t)bytes); /* the result */
    tc_release(t), tc_release(x);
}

/* TC_DEBUG=4 prints each kernel's source, TC_DEBUG=1 a summary line */
static void test_debug_output(void **state) {
    (void)state;
    char path[] = "/tmp/tc_debug_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    tc_set_flag("TC_DEBUG", 5);
    run_program();
    tc_set_flag("TC_DEBUG", 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    fseek(f, 0, SEEK_SET);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(text, "void r_16_8("));       /* source (4) */
    assert_non_null(strstr(text, "DEFINE_ACC"));          /* UOps (5) */
    assert_non_null(strstr(text, "REDUCE_SUM"));          /* AST (3) */
    assert_non_null(strstr(text, "kernel   0 r_16_8"));   /* per kernel line (2) */
    assert_non_null(strstr(text, "realize: 1 kernels"));  /* summary (1) */
    tc_shutdown();
}

/* TC_SAVE_SCHEDULE writes the schedule as Graphviz: one box per kernel,
 * an edge for the buffer one kernel passes to the next */
static void test_save_schedule(void **state) {
    (void)state;
    char path[] = "/tmp/tc_sched_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    setenv("TC_SAVE_SCHEDULE", path, 1);
    tc_tensor *x = tc_test_randn(2, S, 3, -1, 1);
    int a0 = 0, a1 = 1;
    tc_tensor *c = tc_sum(x, 1, &a0, true), *d = tc_sub(x, c), *y = tc_sum(d, 1, &a1, false);
    assert_int_equal(tc_realize(&y, 1), TC_OK);
    unsetenv("TC_SAVE_SCHEDULE");
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 14];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    assert_non_null(strstr(text, "digraph schedule"));
    assert_non_null(strstr(text, "k0 -> k1")); /* the column sums feed the second kernel */
    assert_non_null(strstr(text, "REDUCE_SUM"));
    tc_release(x), tc_release(c), tc_release(d), tc_release(y);
    tc_shutdown();
}

/* a kernel with enough work splits its outermost loop across threads: the
 * same numbers with 1, 2 and 3 threads (an uneven split) as the reference */
static void test_threads(void **state) {
    (void)state;
    const int64_t shape[2] = {301, 257};
    float want[301];
    for (int t = 1; t <= 3; t++) {
        char n[8];
        snprintf(n, sizeof n, "%d", t);
        setenv("TC_THREADS", n, 1);
        tc_tensor *x = tc_test_randn(2, shape, 5, -1, 1), *e = tc_exp(x);
        int ax = 1;
        tc_tensor *s = tc_sum(e, 1, &ax, false);
        if (t == 1) tc_check_schedule(s, 1, 1e-5, 1e-5, "row sums, 1 thread");
        float *got = tc_test_read(s);
        if (t == 1) memcpy(want, got, sizeof want);
        assert_true(tc_allclose_f32(got, want, 301, 0, 0, "row sums, more threads"));
        free(got);
        tc_release(x), tc_release(e), tc_release(s);
    }
    unsetenv("TC_THREADS");
    tc_shutdown();
}

/* x * c + y over fresh tensors: same structure each call */
static float scaled_sum(double c, int64_t n) {
    int64_t sh[1] = {n};
    tc_tensor *x = tc_full(1, sh, 2.0, TC_FLOAT32, NULL), *y = tc_full(1, sh, 1.0, TC_FLOAT32, NULL);
    tc_tensor *xy[2] = {x, y};
    assert_int_equal(tc_realize(xy, 2), TC_OK); /* buffers, not constants, in the kernel below */
    tc_tensor *k = tc_full(0, NULL, c, TC_FLOAT32, NULL);
    tc_tensor *xc = tc_mul(x, k), *r = tc_add(xc, y);
    int ax = 0;
    tc_tensor *s = tc_sum(r, 1, &ax, false);
    float *v = tc_test_read(s);
    float out = v[0];
    free(v);
    tc_release(x), tc_release(y), tc_release(k), tc_release(xc), tc_release(r), tc_release(s);
    return out;
}

/* a kernel lowered once is not lowered again (the lowering cache), and its
 * key tells apart what changes the code: constants, shapes */
static void test_lowering_cache(void **state) {
    (void)state;
    tc_shutdown();
    assert_int_equal(tc_lcache_size(), 0);
    assert_true(scaled_sum(3, 10) == 70.0f);
    int n = tc_lcache_size();
    assert_true(n >= 1);
    assert_true(scaled_sum(3, 10) == 70.0f); /* the same kernel: a hit */
    assert_int_equal(tc_lcache_size(), n);
    assert_true(scaled_sum(5, 10) == 110.0f); /* another constant: another kernel */
    assert_true(tc_lcache_size() > n);
    n = tc_lcache_size();
    assert_true(scaled_sum(3, 12) == 84.0f); /* another shape */
    assert_true(tc_lcache_size() > n);
    tc_shutdown();
    assert_int_equal(tc_lcache_size(), 0);
}

/* tc_mem_plan, the JIT capture's and the export's planner: a life that
 * spans others (b, 100 bytes over steps 1..3) must not take the block a
 * big one leaves (a, 1000 at step 0), or the next big one (c, 1000 at step
 * 2) needs a block of its own: a and c share one, b gets a small one
 * (first fit in order of first use made 2000 bytes); lives of other
 * devices never share */
static void test_mem_plan(void **state) {
    (void)state;
    tc_mem_life lives[5] = {
        {0, 1000, 0, 0, -1}, {0, 100, 1, 3, -1}, {0, 1000, 2, 2, -1}, {1, 10, 0, 0, -1}, {1, 10, 1, 1, -1},
    };
    tc_mem_block blocks[5];
    int n = tc_mem_plan(lives, 5, blocks);
    assert_int_equal(n, 3);
    assert_int_equal(lives[0].block, lives[2].block);
    assert_int_not_equal(lives[1].block, lives[0].block);
    assert_int_equal(lives[3].block, lives[4].block);
    size_t dev0 = 0;
    for (int i = 0; i < n; i++) {
        if (blocks[i].device == 0) dev0 += blocks[i].nbytes;
        else assert_int_equal(blocks[i].nbytes, 10);
    }
    assert_int_equal(dev0, 1100);
    for (int i = 0; i < 5; i++) assert_true(blocks[lives[i].block].nbytes >= lives[i].nbytes);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_run_compiles_nothing),
        cmocka_unit_test(test_second_process_compiles_nothing),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_time_and_memory_counters),
        cmocka_unit_test(test_graph_nodes_counter),
        cmocka_unit_test(test_memory_shared_in_schedule),
        cmocka_unit_test(test_debug_output),
        cmocka_unit_test(test_save_schedule),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_lowering_cache),
        cmocka_unit_test(test_mem_plan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
