/* test_graph.c - lazy graph nodes: interning, views of bases, refcounts and
 * releasing a very long chain without recursion. */
#include "tc_test.h"

#include "graph/graph.h"

static void test_interning(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 4};
    tc_node *a = tc_node_const(1.5, TC_FLOAT32, 0, 2, shape);
    tc_node *b = tc_node_const(1.5, TC_FLOAT32, 0, 2, shape);
    assert_ptr_equal(a, b); /* same const, same view: one node */
    tc_node *c = tc_node_const(2.5, TC_FLOAT32, 0, 2, shape);
    assert_ptr_not_equal(a, c);
    tc_node *s1 = tc_node_alu(TC_OP_ADD, TC_FLOAT32, 2, (tc_node *[]){a, c});
    tc_node *s2 = tc_node_alu(TC_OP_ADD, TC_FLOAT32, 2, (tc_node *[]){a, c});
    assert_ptr_equal(s1, s2);
    assert_int_equal(s1->refcount, 2);
    tc_node_release(s1), tc_node_release(s2), tc_node_release(a), tc_node_release(b);
    tc_node_release(c);
    assert_int_equal(tc_graph_live_nodes(), 0);
    tc_graph_shutdown();
}

static void test_views_point_at_bases(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 4}, flat[1] = {12}, back[2] = {3, 4};
    tc_node *a = tc_node_const(1.0, TC_FLOAT32, 0, 2, shape);
    tc_node *x = tc_node_alu(TC_OP_EXP2, TC_FLOAT32, 1, &a);
    assert_int_equal(x->op, TC_OP_EXP2); /* a base */
    tc_node *r = tc_node_reshape(x, 1, flat);
    assert_int_equal(r->op, TC_OP_VIEW);
    assert_ptr_equal(tc_node_base(r), x);
    tc_node *rr = tc_node_reshape(r, 2, back); /* back to the base's own shape: the base */
    assert_ptr_equal(rr, x);
    const int order[2] = {1, 0};
    tc_node *p = tc_node_permute(x, order), *pp = tc_node_permute(p, order);
    assert_ptr_equal(tc_node_base(p), x);
    assert_ptr_equal(pp, x);
    tc_node_release(pp), tc_node_release(p), tc_node_release(rr), tc_node_release(r);
    tc_node_release(x), tc_node_release(a);
    assert_int_equal(tc_graph_live_nodes(), 0);
    tc_graph_shutdown();
}

/* 200k nodes in a chain are freed by the last release without recursion */
static void test_long_chain_release(void **state) {
    (void)state;
    const int64_t shape[1] = {2};
    tc_node *x = tc_node_const(0.5, TC_FLOAT32, 0, 1, shape);
    for (int i = 0; i < 200000; i++) {
        tc_node *y = tc_node_alu(i % 2 ? TC_OP_NEG : TC_OP_SQRT, TC_FLOAT32, 1, &x);
        assert_non_null(y);
        tc_node_release(x);
        x = y;
    }
    assert_true(tc_graph_live_nodes() > 200000);
    tc_node_release(x);
    assert_int_equal(tc_graph_live_nodes(), 0);
    tc_graph_shutdown();
}

/* allocation failures at every point of building a node leave nothing behind */
static void test_failing_allocations(void **state) {
    (void)state;
    const int64_t shape[2] = {3, 4};
    for (int n = 1; n < 40; n++) {
        tc_mem_fail_after(n);
        tc_node *a = tc_node_const(1.0, TC_FLOAT32, 0, 2, shape);
        tc_node *b = a ? tc_node_alu(TC_OP_EXP2, TC_FLOAT32, 1, &a) : NULL;
        tc_mem_fail_after(0);
        if (!b) assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
        tc_node_release(b);
        tc_node_release(a);
        assert_int_equal(tc_graph_live_nodes(), 0);
    }
    tc_graph_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interning),
        cmocka_unit_test(test_views_point_at_bases),
        cmocka_unit_test(test_long_chain_release),
        cmocka_unit_test(test_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
