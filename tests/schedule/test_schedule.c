/* test_schedule.c - exact kernel counts of the first scheduler, each also
 * checked against the reference evaluator. The comment on each test says
 * why the count is what it is. */
#include "tc_test.h"

#include <stdlib.h>

#include "schedule/schedule.h"
#include "tensor/tensor.h"

static const int64_t S44[2] = {4, 4};
static const int64_t S816[2] = {8, 16};

static tc_tensor *rnd(int ndim, const int64_t *shape, uint64_t seed) {
    return tc_test_randn(ndim, shape, seed, -2.0f, 2.0f);
}

/* a*b+c: one elementwise chain is one kernel */
static void test_elementwise_chain(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S44, 1), *b = rnd(2, S44, 2), *c = rnd(2, S44, 3);
    tc_tensor *ab = tc_mul(a, b), *r = tc_add(ab, c);
    tc_check_schedule(r, 1, 1e-6, 1e-6, "a*b+c");
    tc_release(a), tc_release(b), tc_release(c), tc_release(ab), tc_release(r);
    tc_shutdown();
}

/* y <- y*v + 1, n times: 2n ops */
static tc_tensor *chain(tc_tensor *v, int n) {
    tc_tensor *one = tc_full(0, NULL, 1.0, TC_FLOAT32, NULL), *y = tc_retain(v);
    for (int i = 0; i < n; i++) {
        tc_tensor *yv = tc_mul(y, v), *next = tc_add(yv, one);
        tc_release(yv), tc_release(y);
        y = next;
    }
    tc_release(one);
    return y;
}

/* a kernel inlines at most 512 elementwise ops of one value's cone (the
 * scheduler's bound, TC_KERNEL_OPS): a chain of 1,100 ops is cut into 3
 * kernels, of 100 ops at TC_KERNEL_OPS=100 into 11; -1 turns the bound
 * off (one kernel). Two chains of 300 ops from one input, otherwise one
 * kernel of two outputs, stay two kernels (600 ops) */
static void test_kernel_ops_bound(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S44, 11), *w = tc_sigmoid(x);
    assert_int_equal(tc_realize(&w, 1), TC_OK);
    tc_tensor *y = chain(w, 550);
    tc_check_schedule(y, 3, 1e-5, 1e-5, "1,100-op chain");
    tc_release(y);
    int64_t counts[2][2] = {{100, 11}, {-1, 1}};
    for (int k = 0; k < 2; k++) {
        tc_flag_put(TC_FLAG_KERNEL_OPS, counts[k][0]);
        y = chain(w, 550);
        tc_check_schedule(y, (int)counts[k][1], 1e-5, 1e-5, "1,100-op chain, bound set");
        tc_release(y);
    }
    tc_flag_put(TC_FLAG_KERNEL_OPS, 0);
    tc_tensor *y1 = chain(w, 150), *y2 = tc_neg(w), *y3 = chain(y2, 150);
    tc_tensor *both[2] = {y1, y3};
    tc_tensor *small1 = chain(w, 20), *small2 = chain(y2, 20);
    tc_tensor *pair[2] = {small1, small2};
    tc_check_schedule_many(pair, 2, 1, 1e-5, 1e-5, "two 40-op chains of one input");
    tc_check_schedule_many(both, 2, 2, 1e-5, 1e-5, "two 300-op chains of one input");
    tc_release(y1), tc_release(y2), tc_release(y3), tc_release(small1), tc_release(small2);
    tc_release(x), tc_release(w);
    tc_shutdown();
}

/* (a*b).sum(): the multiply fuses into the reduce */
static void test_mul_sum(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S816, 4), *b = rnd(2, S816, 5);
    tc_tensor *ab = tc_mul(a, b), *r = tc_sum(ab, 0, NULL, false);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "(a*b).sum()");
    tc_release(a), tc_release(b), tc_release(ab), tc_release(r);
    tc_shutdown();
}

/* (a+b).sum(axis=1)*2: elementwise before and after the reduce, one kernel */
static void test_sum_then_elementwise(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S816, 6), *b = rnd(2, S816, 7);
    int ax = 1;
    tc_tensor *ab = tc_add(a, b), *s = tc_sum(ab, 1, &ax, false);
    tc_tensor *two = tc_full(0, NULL, 2.0, TC_FLOAT32, NULL), *r = tc_mul(s, two);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "(a+b).sum(1)*2");
    tc_release(a), tc_release(b), tc_release(ab), tc_release(s), tc_release(two), tc_release(r);
    tc_shutdown();
}

/* x.reshape(...).permute(...).exp(): movement ops make no kernels */
static void test_movement_then_exp(void **state) {
    (void)state;
    const int64_t shape[1] = {24}, to[3] = {2, 3, 4};
    const int order[3] = {2, 0, 1};
    tc_tensor *x = rnd(1, shape, 8);
    tc_tensor *rs = tc_reshape(x, 3, to), *p = tc_permute(rs, order), *e = tc_exp(p);
    tc_check_schedule(e, 1, 1e-6, 1e-6, "x.reshape.permute.exp");
    tc_release(x), tc_release(rs), tc_release(p), tc_release(e);
    tc_shutdown();
}

/* x.sum(0) + y.sum(0): two reduces over the same loop space share a kernel */
static void test_two_independent_reduces(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S816, 9), *y = rnd(2, S816, 10);
    int ax = 0;
    tc_tensor *sx = tc_sum(x, 1, &ax, false), *sy = tc_sum(y, 1, &ax, false), *r = tc_add(sx, sy);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "x.sum(0)+y.sum(0)");
    tc_release(x), tc_release(y), tc_release(sx), tc_release(sy), tc_release(r);
    tc_shutdown();
}

/* different loop spaces (x is 8x16, y is 16x8) cannot share one: 2 kernels */
static void test_two_reduces_different_spaces(void **state) {
    (void)state;
    const int64_t s168[2] = {16, 8};
    tc_tensor *x = rnd(2, S816, 11), *y = rnd(2, s168, 12);
    int a1 = 0, a2 = 1;
    tc_tensor *sx = tc_sum(x, 1, &a1, false), *sy = tc_sum(y, 1, &a2, false);
    tc_tensor *sy2 = tc_reshape(sy, 1, (int64_t[]){16}), *r = tc_add(sx, sy2);
    tc_check_schedule(r, 2, 1e-5, 1e-5, "x.sum(0)+y.T-ish.sum(1)");
    tc_release(x), tc_release(y), tc_release(sx), tc_release(sy), tc_release(sy2), tc_release(r);
    tc_shutdown();
}

/* a reduce of a reduce over another axis: two kernels */
static void test_reduce_of_reduce(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S816, 13);
    int a1 = 1, a0 = 0;
    tc_tensor *s1 = tc_sum(x, 1, &a1, false), *s2 = tc_sum(s1, 1, &a0, false);
    tc_check_schedule(s2, 2, 1e-5, 1e-5, "x.sum(1).sum(0)");
    tc_release(x), tc_release(s1), tc_release(s2);
    tc_shutdown();
}

/* contiguous() is a realize point: (a+b).contiguous()*2 gets a buffer for
 * a+b, but both outputs run in one kernel: the product reads a+b at its own
 * index, so the kernel keeps it in a register (2 kernels in tinygrad) */
static void test_contiguous_is_a_kernel(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S44, 14), *b = rnd(2, S44, 15);
    tc_tensor *ab = tc_add(a, b), *c = tc_contiguous(ab);
    tc_tensor *two = tc_full(2, S44, 2.0, TC_FLOAT32, NULL), *r = tc_mul(c, two);
    tc_tensor *both[2] = {c, r};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    tc_check_schedule(r, 1, 1e-6, 1e-6, "(a+b).contiguous()*2");
    tc_release(a), tc_release(b), tc_release(ab), tc_release(c), tc_release(two), tc_release(r);
    tc_shutdown();
}

/* the same expression built twice is one node (hash-consing): 1 kernel */
static void test_interned_expression(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S44, 16), *b = rnd(2, S44, 17);
    tc_tensor *x1 = tc_add(a, b), *x2 = tc_add(a, b), *r = tc_mul(x1, x2);
    tc_check_schedule(r, 1, 1e-6, 1e-6, "(a+b)*(a+b)");
    tc_release(a), tc_release(b), tc_release(x1), tc_release(x2), tc_release(r);
    tc_shutdown();
}

/* x - x.sum(1, keepdim): the reduce is a per-row register broadcast back
 * over the row, so one kernel: a sum stage, then a store stage */
static void test_expanded_reduce_fuses(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S816, 18);
    int a1 = 1;
    tc_tensor *s = tc_sum(x, 1, &a1, true), *r = tc_sub(x, s);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "x - x.sum(1,keepdim)");
    tc_release(x), tc_release(s), tc_release(r);
    tc_shutdown();
}

/* a safe pad fuses: (x*2+1).pad(1) is 1 kernel and the pad reads 0 */
static void test_safe_pad_fuses(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S44, 19);
    tc_tensor *two = tc_full(2, S44, 2.0, TC_FLOAT32, NULL), *m = tc_mul(x, two);
    const int64_t pads[4] = {1, 1, 2, 0};
    tc_tensor *p = tc_pad(m, pads), *c = tc_contiguous(p);
    tc_check_schedule(c, 1, 1e-6, 1e-6, "(x*2).pad");
    tc_release(x), tc_release(two), tc_release(m), tc_release(p), tc_release(c);
    tc_shutdown();
}

/* an unsafe pad fuses too: exp(x).pad must read 0, not exp(0)=1, so the
 * padded value is gated by the view's validity (tinygrad realized exp first) */
static void test_unsafe_pad_gated(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S44, 20), *e = tc_exp(x);
    const int64_t pads[4] = {1, 1, 0, 3};
    tc_tensor *p = tc_pad(e, pads), *c = tc_contiguous(p);
    tc_check_schedule(c, 1, 1e-6, 1e-6, "exp(x).pad");
    float *v = tc_test_read(c);
    assert_true(v[0] == 0.0f); /* a padded corner */
    free(v);
    tc_release(x), tc_release(e), tc_release(p), tc_release(c);
    tc_shutdown();
}

/* a realized tensor needs no kernel */
static void test_realized_is_free(void **state) {
    (void)state;
    tc_tensor *a = rnd(2, S44, 21), *b = rnd(2, S44, 22), *r = tc_add(a, b);
    assert_int_equal(tc_realize(&r, 1), TC_OK);
    assert_int_equal(tc_schedule_kernel_count(&r, 1), 0);
    tc_release(a), tc_release(b), tc_release(r);
    tc_shutdown();
}

/* a reduce feeding two outputs realized together: one kernel with two
 * outputs (tinygrad's reduce_same_size); one at a time, 1 kernel each */
static void test_shared_reduce(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, S816, 23);
    int a1 = 1;
    tc_tensor *s = tc_sum(x, 1, &a1, false);
    tc_tensor *two = tc_full(1, (int64_t[]){8}, 2.0, TC_FLOAT32, NULL);
    tc_tensor *p = tc_add(s, two), *q = tc_mul(s, two);
    tc_tensor *both[2] = {p, q};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    tc_check_schedule(p, 1, 1e-5, 1e-5, "s+2 alone");
    tc_check_schedule(q, 1, 1e-5, 1e-5, "s*2 alone");
    tc_release(x), tc_release(s), tc_release(two), tc_release(p), tc_release(q);
    tc_shutdown();
}

/* e = x*y + z read by three reduces in three loop spaces (columns, rows,
 * all): e takes three large loads, so it is realized once and each reduce
 * reads it (4 kernels) instead of each recomputing it (3 kernels, 9 loads).
 * Read by only two reduces, or made of two loads, it is recomputed. */
static void test_shared_elementwise_realized(void **state) {
    (void)state;
    const int64_t sh[2] = {256, 512};
    tc_tensor *x = rnd(2, sh, 31), *y = rnd(2, sh, 32), *z = rnd(2, sh, 33);
    tc_tensor *xy = tc_mul(x, y), *e = tc_add(xy, z), *cheap = tc_add(x, y);
    int a0 = 0, a1 = 1;
    tc_tensor *r[3] = {tc_sum(e, 1, &a0, false), tc_sum(e, 1, &a1, false), tc_sum(e, 0, NULL, false)};
    tc_tensor *c[3] = {tc_sum(cheap, 1, &a0, false), tc_max(cheap, 1, &a1, false),
                       tc_sum(cheap, 0, NULL, false)};
    assert_int_equal(tc_schedule_kernel_count(r, 3), 4);
    assert_int_equal(tc_schedule_kernel_count(r, 2), 2);
    assert_int_equal(tc_schedule_kernel_count(c, 3), 3);
    /* the values: realized together (e shared) against each alone */
    float *alone[3];
    for (int i = 0; i < 3; i++) {
        tc_check_schedule(r[i], 1, 1e-4, 1e-4, "a reduce of x*y+z alone");
        alone[i] = tc_test_read(r[i]);
    }
    tc_tensor *r2[3] = {tc_sum(e, 1, &a0, false), tc_sum(e, 1, &a1, false), tc_sum(e, 0, NULL, false)};
    assert_int_equal(tc_realize(r2, 3), TC_OK);
    const int64_t n[3] = {512, 256, 1};
    for (int i = 0; i < 3; i++) {
        float *got = tc_test_read(r2[i]);
        assert_true(tc_allclose(got, alone[i], TC_FLOAT32, n[i], 1e-5, 1e-3, "shared x*y+z reduce"));
        free(got), free(alone[i]);
        tc_release(r[i]), tc_release(r2[i]), tc_release(c[i]);
    }
    tc_release(x), tc_release(y), tc_release(z), tc_release(xy), tc_release(e), tc_release(cheap);
    tc_shutdown();
}

/* distinct LOAD nodes of buffer slot buf in the AST under a (a DAG: each
 * node counted once) */
static int count_loads(const tc_ast *root, int buf) {
    tc_ptrvec stack = {0}, seen = {0};
    int n = 0;
    assert_int_equal(tc_ptrvec_push(&stack, (void *)root), TC_OK);
    while (stack.n) {
        const tc_ast *a = stack.items[--stack.n];
        bool dup = false;
        for (int i = 0; i < seen.n && !dup; i++) dup = seen.items[i] == a;
        if (dup) continue;
        assert_int_equal(tc_ptrvec_push(&seen, (void *)a), TC_OK);
        n += a->op == TC_OP_LOAD && a->buf == buf;
        for (int i = 0; i < a->n_srcs; i++)
            assert_int_equal(tc_ptrvec_push(&stack, a->srcs[i]), TC_OK);
    }
    tc_ptrvec_free(&stack);
    tc_ptrvec_free(&seen);
    return n;
}

/* A deep kernel reads one view of x at every step, y = y * v + 1: its AST
 * loads v once. The AST memo once wrote an entry at the chain slot it had
 * looked up before building the node's sources, which had added entries of
 * their own there by then: those were dropped, the view was loaded again, and
 * which entries went depended on where the nodes were allocated (kernel
 * sources changed from run to run). 3000 steps over the memo's 512 buckets
 * make a shared bucket (a dropped entry) all but certain. */
static void test_deep_kernel_shares_loads(void **state) {
    (void)state;
    int64_t shape[1] = {8}, flat[2] = {2, 4};
    tc_tensor *x = rnd(2, flat, 7), *v = tc_reshape(x, 1, shape);
    tc_tensor *y = tc_retain(v), *one = tc_full(1, shape, 1.0, TC_FLOAT32, NULL);
    for (int i = 0; i < 3000; i++) {
        tc_tensor *yv = tc_mul(y, v), *next = tc_add(yv, one);
        tc_release(yv), tc_release(y);
        y = next;
    }
    tc_node *b = tc_node_base(tc_tensor_node(y));
    tc_flag_put(TC_FLAG_KERNEL_OPS, -1); /* one kernel of 6,000 ops, not 12 */
    tc_schedule *s = tc_schedule_create(&b, 1);
    tc_flag_put(TC_FLAG_KERNEL_OPS, 0);
    assert_non_null(s);
    assert_int_equal(s->n_items, 1);
    const tc_sched_item *it = &s->items[0];
    int slot = -1;
    for (int k = it->n_outs; k < it->n_bufs; k++)
        if (it->bufs[k] == tc_node_base(tc_tensor_node(x))) slot = k;
    assert_true(slot >= 0);
    assert_int_equal(count_loads(it->ast, slot), 1);
    tc_schedule_free(s);
    tc_release(x), tc_release(v), tc_release(y), tc_release(one);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_chain),
        cmocka_unit_test(test_kernel_ops_bound),
        cmocka_unit_test(test_deep_kernel_shares_loads),
        cmocka_unit_test(test_mul_sum),
        cmocka_unit_test(test_sum_then_elementwise),
        cmocka_unit_test(test_movement_then_exp),
        cmocka_unit_test(test_two_independent_reduces),
        cmocka_unit_test(test_two_reduces_different_spaces),
        cmocka_unit_test(test_reduce_of_reduce),
        cmocka_unit_test(test_contiguous_is_a_kernel),
        cmocka_unit_test(test_interned_expression),
        cmocka_unit_test(test_expanded_reduce_fuses),
        cmocka_unit_test(test_safe_pad_fuses),
        cmocka_unit_test(test_unsafe_pad_gated),
        cmocka_unit_test(test_realized_is_free),
        cmocka_unit_test(test_shared_reduce),
        cmocka_unit_test(test_shared_elementwise_realized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
