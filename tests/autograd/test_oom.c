/* test_oom.c - out of memory in autograd, the composites, tc_assign and
 * tc_index_copy: every allocation of a call is made to fail in turn. Each failure must
 * report TC_ERR_MEMORY, crash nothing, leak no node (ASan checks the rest)
 * and change nothing: a failed tc_backward leaves every gradient as it was,
 * a failed tc_assign leaves its target's values. The N-d and transposed
 * convolutions are swept in 1-d and 3-d. */
#include "../api/api_helpers.h"
#include "graph/graph.h"
#include "util/util.h"

typedef tc_tensor *(*op1)(tc_tensor *const *in);

/* calls mk with allocation n failing, for n = 1, 2, ... until it succeeds */
static void sweep(const char *name, op1 mk, tc_tensor *const *in) {
    int64_t base = tc_graph_live_nodes();
    for (int n = 1; n < 3000; n++) {
        tc_mem_fail_after(n);
        tc_tensor *r = mk(in);
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

static tc_tensor *w_matmul(tc_tensor *const *in) { return tc_matmul(in[0], in[1]); }
static tc_tensor *w_linear(tc_tensor *const *in) { return tc_linear(in[0], in[1], in[2]); }
static tc_tensor *w_softmax(tc_tensor *const *in) { return tc_softmax(in[0], 1); }
static tc_tensor *w_log_softmax(tc_tensor *const *in) { return tc_log_softmax(in[0], 0); }
static tc_tensor *w_layernorm(tc_tensor *const *in) { return tc_layernorm(in[0], 1, 1e-5); }
static tc_tensor *w_argmax(tc_tensor *const *in) { return tc_argmax(in[0], 1, false); }
static tc_tensor *w_dropout(tc_tensor *const *in) { return tc_dropout(in[0], 0.5, true); }
static tc_tensor *w_ce(tc_tensor *const *in) { return tc_cross_entropy(in[0], in[3]); }
static tc_tensor *w_conv(tc_tensor *const *in) { return tc_conv2d_ex(in[4], in[5], NULL, 1, 2, 1, 0, 2, 1); }
static tc_tensor *w_pool(tc_tensor *const *in) { return tc_max_pool2d(in[4], 3, 1); }
static tc_tensor *w_bn(tc_tensor *const *in) { return tc_batchnorm(in[4], NULL, NULL, NULL, NULL, true, 0.1, 1e-5); }
static tc_tensor *w_detach(tc_tensor *const *in) { return tc_detach(in[0]); }
static tc_tensor *w_gelu(tc_tensor *const *in) { return tc_gelu(in[0], false); }
static tc_tensor *w_gelu_tanh(tc_tensor *const *in) { return tc_gelu(in[0], true); }
static tc_tensor *w_tril(tc_tensor *const *in) { return tc_tril(in[0], 0); }
static tc_tensor *w_fill(tc_tensor *const *in) {
    tc_tensor *zero = tc_full(0, NULL, 0, TC_FLOAT32, NULL), *m = zero ? tc_lt(in[0], zero) : NULL;
    tc_tensor *r = m ? tc_masked_fill(in[0], m, -1) : NULL;
    tc_release(zero), tc_release(m);
    return r;
}
static tc_tensor *w_sdpa(tc_tensor *const *in) {
    return tc_scaled_dot_product_attention(in[0], in[0], in[0], NULL, true);
}
static tc_tensor *w_ce_ex(tc_tensor *const *in) {
    return tc_cross_entropy_ex(in[0], in[3], TC_REDUCTION_MEAN, 2, 0.1);
}

static void test_composites(void **state) {
    (void)state;
    tc_tensor *in[6];
    in[0] = tc_test_randn(2, SHAPE(4, 3), 1, -1, 1);
    in[1] = tc_test_randn(2, SHAPE(3, 5), 2, -1, 1);
    in[2] = tc_test_randn(1, SHAPE(5), 3, -1, 1);
    int32_t lab[4] = {0, 2, 1, 2};
    in[3] = from(lab, TC_INT32, 1, SHAPE(4));
    in[4] = tc_test_randn(4, SHAPE(2, 2, 5, 5), 4, -1, 1);
    in[5] = tc_test_randn(4, SHAPE(3, 2, 2, 2), 5, -1, 1);
    for (int i = 0; i < 6; i++)
        if (i != 3) assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    tc_tensor *w_in[3] = {in[0], in[2], NULL}; /* linear: x (4,3), w as (5,3) below */
    tc_tensor *wt = tc_transpose(in[1], 0, 1);
    w_in[1] = wt, w_in[2] = in[2];
    const struct {
        const char *name;
        op1 f;
        tc_tensor *const *in;
    } ops[] = {
        {"matmul", w_matmul, in},   {"linear", w_linear, w_in}, {"softmax", w_softmax, in},
        {"log_softmax", w_log_softmax, in}, {"layernorm", w_layernorm, in}, {"argmax", w_argmax, in},
        {"dropout", w_dropout, in}, {"cross_entropy", w_ce, in}, {"conv2d_ex", w_conv, in},
        {"max_pool2d", w_pool, in}, {"batchnorm", w_bn, in},    {"detach", w_detach, in},
        {"cross_entropy_ex", w_ce_ex, in}, {"gelu", w_gelu, in}, {"gelu_tanh", w_gelu_tanh, in},
        {"tril", w_tril, in}, {"masked_fill", w_fill, in}, {"sdpa", w_sdpa, in},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) sweep(ops[i].name, ops[i].f, ops[i].in);
    tc_release(wt);
    for (int i = 0; i < 6; i++) tc_release(in[i]);
}

static tc_tensor *w_conv1d(tc_tensor *const *in) { /* stride 1, padding 1: the own rule */
    int64_t st[1] = {1}, pad[2] = {1, 1}, dil[1] = {1};
    return tc_conv_nd(in[0], in[1], in[4], 1, st, pad, dil, 1);
}
static tc_tensor *w_conv3d(tc_tensor *const *in) { /* strided, dilated, cropped */
    int64_t st[3] = {1, 2, 1}, pad[6] = {1, 0, -1, 1, 0, 0}, dil[3] = {1, 1, 2};
    return tc_conv_nd(in[2], in[3], NULL, 3, st, pad, dil, 1);
}
static tc_tensor *w_conv_t(tc_tensor *const *in) { /* zero insertion, crop, output_padding */
    int64_t st[1] = {2}, pad[1] = {3}, op[1] = {1}, dil[1] = {2};
    return tc_conv_transpose_nd(in[0], in[5], NULL, 1, st, pad, op, dil, 1);
}

/* the N-d and transposed convolutions */
static void test_convs(void **state) {
    (void)state;
    tc_tensor *in[6];
    in[0] = tc_test_randn(3, SHAPE(2, 2, 7), 11, -1, 1);
    in[1] = tc_test_randn(3, SHAPE(3, 2, 3), 12, -1, 1);
    in[2] = tc_test_randn(5, SHAPE(1, 2, 3, 4, 5), 13, -1, 1);
    in[3] = tc_test_randn(5, SHAPE(2, 2, 2, 2, 2), 14, -1, 1);
    in[4] = tc_test_randn(1, SHAPE(3), 15, -1, 1);
    in[5] = tc_test_randn(3, SHAPE(2, 3, 3), 16, -1, 1);
    for (int i = 0; i < 6; i++) assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    sweep("conv_nd 1-d", w_conv1d, in);
    sweep("conv_nd 3-d", w_conv3d, in);
    sweep("conv_transpose_nd 1-d", w_conv_t, in);
    for (int i = 0; i < 6; i++) tc_release(in[i]);
}

/* tc_backward(loss) with allocation n failing, n = 1, 2, ... until it
 * succeeds: each failure is TC_ERR_MEMORY and leaves no gradient on the
 * leaves and no node behind */
static void sweep_backward(tc_tensor *loss, tc_tensor *const *leaves, int n_leaves) {
    assert_non_null(loss);
    int64_t base = tc_graph_live_nodes();
    for (int n = 1; n < 5000; n++) {
        tc_mem_fail_after(n);
        tc_status s = tc_backward(loss);
        tc_mem_fail_after(0);
        if (s == TC_OK) return;
        if (s != TC_ERR_MEMORY) fprintf(stderr, "allocation %d: %s\n", n, tc_last_error());
        assert_int_equal(s, TC_ERR_MEMORY);
        for (int i = 0; i < n_leaves; i++) assert_null(tc_grad(leaves[i]));
        assert_int_equal(tc_graph_live_nodes(), base);
    }
    fail_msg("tc_backward never succeeded");
}

/* tc_backward through a small network: a failure leaves the gradients */
static void test_backward(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(4, 6), 6, -1, 1), *w = tc_test_randn(2, SHAPE(3, 6), 7, -1, 1);
    int32_t lab[4] = {0, 2, 1, 2};
    tc_tensor *y = from(lab, TC_INT32, 1, SHAPE(4));
    assert_int_equal(tc_set_requires_grad(w, true), TC_OK);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *h = tc_linear(x, w, NULL), *t = tc_tanh(h), *loss = tc_cross_entropy(t, y);
    sweep_backward(loss, (tc_tensor *[]){w, x}, 2);
    tc_tensor *g = tc_grad(w);
    assert_non_null(g);
    assert_int_equal(tc_realize(&g, 1), TC_OK);
    tc_release(g), tc_release(loss), tc_release(t), tc_release(h);
    tc_release(y), tc_release(w), tc_release(x);
}

/* tc_backward through strided convs (their own rule: dx by phases, dw a
 * dilated conv over the batch), in 1-d and 2-d: a failure leaves the
 * gradients and every node */
static void test_conv_backward(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(3, SHAPE(2, 2, 9), 21, -1, 1);
    tc_tensor *w = tc_test_randn(3, SHAPE(3, 2, 3), 22, -1, 1);
    tc_tensor *x2 = tc_test_randn(4, SHAPE(1, 2, 6, 5), 23, -1, 1);
    tc_tensor *w2 = tc_test_randn(4, SHAPE(2, 2, 3, 3), 24, -1, 1);
    tc_tensor *all[4] = {x, w, x2, w2};
    for (int i = 0; i < 4; i++) assert_int_equal(tc_set_requires_grad(all[i], true), TC_OK);
    int64_t st[1] = {2}, pad[2] = {1, 1}, dil[1] = {1};
    tc_tensor *c = tc_conv_nd(x, w, NULL, 1, st, pad, dil, 1), *c2 = tc_conv2d(x2, w2, NULL, 2, 1);
    tc_tensor *s1 = tc_sum(c, 0, NULL, false), *s2 = tc_sum(c2, 0, NULL, false);
    tc_tensor *loss = tc_add(s1, s2);
    sweep_backward(loss, all, 4);
    for (int i = 0; i < 4; i++) {
        tc_tensor *g = tc_grad(all[i]);
        assert_non_null(g);
        assert_int_equal(tc_realize(&g, 1), TC_OK);
        tc_release(g);
    }
    tc_release(loss), tc_release(s1), tc_release(s2), tc_release(c), tc_release(c2);
    for (int i = 0; i < 4; i++) tc_release(all[i]);
}

/* tc_assign on a realized target (a lazy one would sweep the realize of
 * the target too, which reaches a scheduler bug: order_items in
 * schedule/ast.c reads its counts after their allocation failed) */
static void test_assign(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4}, want[4] = {2, 3, 4, 5};
    bool done = false;
    for (int n = 1; n < 3000 && !done; n++) {
        tc_tensor *dst = f32(1, SHAPE(4), v), *one = scalar(1, TC_FLOAT32);
        tc_tensor *a = tc_retain(dst), *val = tc_add(a, one);
        tc_mem_fail_after(n);
        tc_status s = tc_assign(dst, val);
        tc_mem_fail_after(0);
        if (s != TC_OK) assert_int_equal(s, TC_ERR_MEMORY);
        done = s == TC_OK;
        expect_f32(tc_retain(dst), done ? want : v, 4, 0, 0, "tc_assign under failing allocations");
        tc_release(val), tc_release(dst), tc_release(one), tc_release(a);
    }
    assert_true(done);
}

/* tc_index_copy on a realized target: its host check of the index, the
 * nodes it builds and the realize of its kernel, each allocation failing in
 * turn; a failure leaves the target's values */
static void test_index_copy(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4}, want[4] = {1, 2, 9, 4}, nine = 9;
    int32_t at = 2;
    bool done = false;
    for (int n = 1; n < 3000 && !done; n++) {
        tc_tensor *dst = f32(1, SHAPE(4), v), *val = f32(1, SHAPE(1), &nine);
        tc_tensor *idx = tc_from_data(&at, TC_INT32, 1, SHAPE(1), NULL);
        assert_non_null(idx);
        tc_mem_fail_after(n);
        tc_status s = tc_index_copy(dst, 0, idx, val);
        tc_mem_fail_after(0);
        if (s != TC_OK) assert_int_equal(s, TC_ERR_MEMORY);
        done = s == TC_OK;
        expect_f32(tc_retain(dst), done ? want : v, 4, 0, 0, "tc_index_copy under failing allocations");
        tc_release(val), tc_release(dst), tc_release(idx);
    }
    assert_true(done);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_composites),
        TEST(test_convs),
        TEST(test_conv_backward),
        TEST(test_backward),
        TEST(test_assign),
        TEST(test_index_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
