/* test_depth.c - the renderers bound how deep an expression nests
 * (TC_RENDER_NEST_MAX, render.h) and how long an inlined one grows
 * (TC_RENDER_INLINE_MAX), in every dialect: a chain of 3000 elementwise ops
 * (one kernel: the scheduler's bound on a kernel's ops is off here) renders
 * as statements none deeper than the bound promises (42, within C11's 63),
 * with text linear in the ops, also for a chain of max (which OpenCL and
 * CUDA print with their operand 4 times); a short chain still renders as
 * one inlined expression. The long chain realized on the CPU (under the
 * bound: 6 kernels) matches the reference evaluator, and its CUDA source
 * compiles with NVRTC where NVRTC is installed (skipped otherwise). On the
 * OpenCL device: tests/codegen/test_gpu.c (the gpu label).
 */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

enum { LONG = 3000, N = 64 };

#define PROMISED_DEPTH 42 /* render.h: TC_RENDER_NEST_MAX + 8 per op + 2 per statement */

static const tc_dialect *const dialects[] = {&tc_dialect_c, &tc_dialect_c_plain,
                                             &tc_dialect_opencl, &tc_dialect_cuda};

/* the deepest bracket nesting ((, [, {) of any line of the kernel's body (after the preamble) */
static int max_depth(const char *src, const char *fn_name) {
    const char *body = strstr(src, fn_name);
    assert_non_null(body);
    int depth = 0, deepest = 0;
    for (const char *c = body; *c; c++) {
        if (*c == '(' || *c == '[' || *c == '{') deepest = ++depth > deepest ? depth : deepest;
        if (*c == ')' || *c == ']' || *c == '}') depth--;
    }
    return deepest - 1; /* the function's own braces */
}

static tc_tensor *input(const char *device) {
    float h[N];
    for (int i = 0; i < N; i++) h[i] = (float)((i * 37) % 64) / 16.0f - 2.0f;
    return tc_from_data(h, TC_FLOAT32, 1, (int64_t[]){N}, device);
}

/* whether src declares a float variable aluN (of a float or float vector type) */
static bool has_float_alu(const char *src) {
    for (const char *at = strstr(src, " alu"); at; at = strstr(at + 1, " alu")) {
        const char *t = at;
        while (t > src && t[-1] >= '0' && t[-1] <= '9') t--; /* float4, tc_float8 */
        if (t - src >= 5 && strncmp(t - 5, "float", 5) == 0) return true;
    }
    return false;
}

/* renders the chain's kernel over an input of dtype dt for dialect d;
 * *n_uops gets its UOp count, *name the kernel's (malloc'ed) */
static char *render_chain(const tc_dialect *d, tc_dtype dt, int n_ops, bool is_max_only,
                          int *n_uops, char **name) {
    tc_tensor *x0 = input(NULL), *x = tc_cast(x0, dt), *y = tc_test_chain(x, n_ops, is_max_only);
    tc_release(x0);
    assert_non_null(y);
    tc_test_lowered l = tc_test_lower(y, &d->target);
    char *src = tc_render(d, l.k);
    if (!src) fprintf(stderr, "render: %s\n", tc_last_error());
    assert_non_null(src);
    *n_uops = l.k->n_uops;
    *name = strdup(l.k->name);
    tc_test_lowered_free(&l);
    tc_release(x), tc_release(y);
    return src;
}

/* the chains: input dtype, which chain, tolerances, name */
static const struct {
    tc_dtype dt;
    bool is_max_only;
    int realized_ops;  /* ops of the chain realized on the CPU (gcc takes 20 s and more over
                          3000 float16 or uint8 ops, each cast back, the max's operand twice) */
    double rtol, atol; /* against the reference (float16: its rounding, once per op in both) */
    const char *what;
    int kernels; /* of the realized chain, cut by the scheduler's bound on a kernel's ops */
} chains[] = {
    {TC_FLOAT32, false, LONG, 1e-5, 1e-6, "3000-op chain", 6},
    {TC_FLOAT32, true, LONG, 1e-5, 1e-6, "3000-op max chain", 6},
    {TC_FLOAT16, false, 400, 1e-3, 1e-3, "3000-op float16 chain", 1},
    {TC_UINT8, false, 400, 0, 0, "3000-op uint8 chain", 1},
};

/* 3000 ops, every chain (the float16 and uint8 ones: each op rounds or
 * wraps, the deepest formats), every dialect: bounded depth, linear text */
static void test_long_chain_depth(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof dialects / sizeof *dialects; i++)
        for (size_t c = 0; c < sizeof chains / sizeof *chains; c++) {
            int n_uops;
            char *name;
            char *src = render_chain(dialects[i], chains[c].dt, LONG, chains[c].is_max_only,
                                     &n_uops, &name);
            int depth = max_depth(src, name);
            size_t len = strlen(src);
            fprintf(stderr, "%-6s %s: %d UOps, %zu bytes, deepest expression %d\n",
                    dialects[i]->name, chains[c].what, n_uops, len, depth);
            if (depth > PROMISED_DEPTH || depth < 8) /* bounded, and still inlining */
                fail_msg("%s: nesting %d (bound %d)", dialects[i]->name, depth, PROMISED_DEPTH);
            /* linear: OpenCL and CUDA print a max's operand 4 times while it is short */
            assert_true(len < (size_t)n_uops * 400 + 20000);
            free(name);
            tc_free(src);
        }
    tc_shutdown();
}

/* a chain shallower than the bound is one expression, as before: no variable */
static void test_short_chain_inlined(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof dialects / sizeof *dialects; i++) {
        int n_uops;
        char *name;
        char *src = render_chain(dialects[i], TC_FLOAT32, 8, false, &n_uops, &name);
        if (has_float_alu(src)) fail_msg("%s: a variable in\n%s", dialects[i]->name, src);
        assert_true(max_depth(src, name) >= 8);
        free(name);
        tc_free(src);
    }
    tc_shutdown();
}

/* the long chains realized on the CPU against the reference, cut by the
 * scheduler's bound on a kernel's ops (512: 3000 ops are 6 kernels, each
 * still 12 times the nesting bound; the narrow ones 400 ops long, one
 * kernel) */
static void test_long_chain_cpu(void **state) {
    (void)state;
    tc_flag_put(TC_FLAG_KERNEL_OPS, 0); /* the default bound */
    for (size_t c = 0; c < sizeof chains / sizeof *chains; c++) {
        tc_tensor *x0 = input("CPU"), *x = tc_cast(x0, chains[c].dt);
        tc_tensor *y = tc_test_chain(x, chains[c].realized_ops, chains[c].is_max_only);
        tc_check_schedule(y, chains[c].kernels, chains[c].rtol, chains[c].atol, chains[c].what);
        tc_release(x0), tc_release(x), tc_release(y);
    }
    tc_flag_put(TC_FLAG_KERNEL_OPS, -1);
    tc_shutdown();
}

/* its CUDA source compiles with NVRTC, without warnings */
static void test_long_chain_nvrtc(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    for (size_t c = 0; c < sizeof chains / sizeof *chains; c++) {
        int n_uops;
        char *name;
        char *src = render_chain(&tc_dialect_cuda, chains[c].dt, LONG, chains[c].is_max_only,
                                 &n_uops, &name);
        tc_status st = tc_cuda_compile(src, name, "sm_80", true, NULL);
        if (st != TC_OK) fprintf(stderr, "%s\n", tc_last_error());
        assert_int_equal(st, TC_OK);
        free(name);
        tc_free(src);
    }
    tc_shutdown();
}

int main(void) {
    unsetenv("TC_DEVICE");
    tc_flag_put(TC_FLAG_KERNEL_OPS, -1); /* the long chains render as one kernel */
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_chain_depth),
        cmocka_unit_test(test_short_chain_inlined),
        cmocka_unit_test(test_long_chain_cpu),
        cmocka_unit_test(test_long_chain_nvrtc),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
