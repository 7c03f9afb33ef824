/* test_oom.c - out of memory everywhere: every allocation of a front-end
 * call, and of a whole realize (schedule, codegen, render, compile, launch),
 * is made to fail in turn. Each failure must report TC_ERR_MEMORY (or pass,
 * when the failing allocation was optional), crash nothing, leak no node,
 * and leave the graph usable: realizing again afterwards gives the right
 * numbers. ASan's leak check covers every other allocation. */
#include "tc_test.h"

#include "graph/graph.h"
#include "util/util.h"

#include <stdlib.h>

typedef tc_tensor *(*op2)(tc_tensor *, tc_tensor *);

static void sweep(const char *name, op2 mk, tc_tensor *a, tc_tensor *b) {
    int64_t base = tc_graph_live_nodes();
    for (int n = 1; n < 400; n++) {
        tc_mem_fail_after(n);
        tc_tensor *r = mk(a, b);
        tc_mem_fail_after(0);
        if (r) {
            tc_release(r);
            assert_int_equal(tc_graph_live_nodes(), base);
            return;
        }
        if (tc_last_status() != TC_ERR_MEMORY)
            fprintf(stderr, "%s: allocation %d failed with %s\n", name, n, tc_last_error());
        assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
        assert_int_equal(tc_graph_live_nodes(), base);
    }
    fail_msg("%s never succeeded", name);
}

static tc_tensor *w_where(tc_tensor *a, tc_tensor *b) { tc_tensor *c = tc_lt(a, b), *r = c ? tc_where(c, a, b) : NULL; tc_release(c); return r; }
static tc_tensor *w_std(tc_tensor *a, tc_tensor *b) { (void)b; return tc_std(a, 1, (int[]){1}, false, 1); }
static tc_tensor *w_min(tc_tensor *a, tc_tensor *b) { (void)b; return tc_min(a, 0, NULL, true); }
static tc_tensor *w_mean(tc_tensor *a, tc_tensor *b) { (void)b; return tc_mean(a, 0, NULL, false); }
static tc_tensor *w_tanh(tc_tensor *a, tc_tensor *b) { (void)b; return tc_tanh(a); }
static tc_tensor *w_eye(tc_tensor *a, tc_tensor *b) { (void)a, (void)b; return tc_eye(5, TC_FLOAT32, NULL); }
static tc_tensor *w_arange(tc_tensor *a, tc_tensor *b) { (void)a, (void)b; return tc_arange(0, 9, 2, TC_INT32, NULL); }
static tc_tensor *w_randn(tc_tensor *a, tc_tensor *b) { (void)a, (void)b; return tc_randn(2, (int64_t[]){3, 3}, TC_FLOAT32, NULL); }
static tc_tensor *w_pad(tc_tensor *a, tc_tensor *b) { (void)b; return tc_pad(a, (int64_t[]){1, 1, 0, 2}); }
static tc_tensor *w_reshape(tc_tensor *a, tc_tensor *b) {
    (void)b;
    tc_tensor *t = tc_transpose(a, 0, 1), *r = t ? tc_reshape(t, 1, (int64_t[]){-1}) : NULL;
    tc_release(t);
    return r;
}

static void test_front_end_calls(void **state) {
    (void)state;
    float x[6] = {1, -2, 3, 4, -5, 6};
    tc_tensor *a = tc_from_data(x, TC_FLOAT32, 2, (int64_t[]){2, 3}, NULL);
    tc_tensor *b = tc_from_data(x, TC_FLOAT32, 1, (int64_t[]){3}, NULL);
    const struct {
        const char *name;
        op2 f;
    } ops[] = {{"add", tc_add},   {"sub", tc_sub},     {"div", tc_div},         {"pow", tc_pow},
               {"minimum", tc_minimum}, {"le", tc_le}, {"where", w_where},       {"std", w_std},
               {"min", w_min},    {"mean", w_mean},    {"tanh", w_tanh},        {"eye", w_eye},
               {"arange", w_arange}, {"randn", w_randn}, {"pad", w_pad},        {"reshape", w_reshape}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) sweep(ops[i].name, ops[i].f, a, b);
    tc_release(a), tc_release(b);
    tc_shutdown();
}

/* a softmax-like graph realized with every allocation failing in turn */
static void test_realize(void **state) {
    (void)state;
    const int64_t shape[2] = {5, 9};
    float want[45];
    for (int n = 1; n < 2000; n++) {
        tc_tensor *x = tc_test_randn(2, shape, 7, -2, 2);
        int ax = 1;
        tc_tensor *m = tc_max(x, 1, &ax, true), *d = tc_sub(x, m), *e = tc_exp(d);
        tc_tensor *s = tc_sum(e, 1, &ax, true), *y = tc_div(e, s);
        assert_non_null(y);
        if (n == 1) { /* the reference numbers, without failures */
            assert_int_equal(tc_to_host(y, want, sizeof want), TC_OK);
            tc_release(x), tc_release(m), tc_release(d), tc_release(e), tc_release(s), tc_release(y);
            tc_shutdown(); /* compile again on every run: the compiler path fails too */
            continue;
        }
        tc_mem_fail_after(n);
        tc_status st = tc_realize(&y, 1);
        tc_mem_fail_after(0);
        if (st != TC_OK) assert_int_equal(st, TC_ERR_MEMORY);
        float got[45];
        assert_int_equal(tc_to_host(y, got, sizeof got), TC_OK); /* usable after a failure */
        assert_true(tc_allclose_f32(got, want, 45, 1e-6, 1e-6, "softmax after OOM"));
        tc_release(x), tc_release(m), tc_release(d), tc_release(e), tc_release(s), tc_release(y);
        assert_int_equal(tc_graph_live_nodes(), 0);
        tc_shutdown();
        if (st == TC_OK) return; /* every allocation of the realize has failed once */
    }
    fail_msg("realize never succeeded");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_front_end_calls),
        cmocka_unit_test(test_realize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
