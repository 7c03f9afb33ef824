/* test_kernels.c - kernel counts of the composites as the scheduler sees
 * them (tc_check_schedule: asserts the exact count, dumps the schedule when
 * it differs, and checks the values against the reference evaluator).
 * The composites are built from public ops only; these counts are what the
 * fusion rules of DESIGN.md promise for them:
 *   softmax, log_softmax, layernorm of a realized (N,D): 1 kernel each
 *     (consecutive reduces on one axis fuse: max, sum, store);
 *   relu(x @ w + b): 1 kernel (the matmul reduce with its elementwise
 *     consumers);
 *   relu(conv_nd(x, w) + b) in 1-d and 3-d, realized x and w, Cout < 16
 *     (no channels-last weight copy): 1 kernel without padding (the windows
 *     are views of x, the multiply+sum the reduce, bias and relu its
 *     consumers), 2 with it (x padded in a buffer of its own first: a conv
 *     reading a padded view gates its loads, 7-20x slower on the CPU);
 *   dx of a strided conv (realized x, w and dy): dy padded once, one conv
 *     per group of phases with the same taps, their sum in place: 3x3
 *     stride 2 pad 1 has 4 groups (1, 2, 2 and 4 taps: 9 x the positions
 *     of multiply-adds, not 16), 1x1 stride 2 one (its other phases 0);
 *   a conv padded along H over few rows with enough channels (nnops.c's
 *     conv_by_rows): x padded along W in a buffer, one conv per run of
 *     output rows with the same taps, their sum (the taps that would read
 *     H's padding not multiplied). */
#include "../api/api_helpers.h"
#include "engine/engine.h"

static tc_tensor *input(int64_t n, int64_t d, uint64_t seed) {
    tc_tensor *x = tc_test_randn(2, SHAPE(n, d), seed, -2, 2);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    return x;
}

static void test_softmax_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = input(16, 33, 1), *y = tc_softmax(x, 1);
    tc_check_schedule(y, 1, 1e-5, 1e-6, "tc_softmax (16,33)");
    tc_release(y), tc_release(x);
}

static void test_log_softmax_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = input(16, 33, 2), *y = tc_log_softmax(x, -1);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "tc_log_softmax (16,33)");
    tc_release(y), tc_release(x);
}

static void test_layernorm_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = input(16, 33, 3), *y = tc_layernorm(x, 1, 1e-5);
    tc_check_schedule(y, 1, 1e-4, 1e-5, "tc_layernorm (16,33)");
    tc_release(y), tc_release(x);
}

static void test_matmul_bias_relu_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = input(8, 16, 4), *w = input(16, 12, 5), *b = tc_test_randn(1, SHAPE(12), 6, -1, 1);
    tc_tensor *mm = tc_matmul(x, w), *z = tc_add(mm, b), *y = tc_relu(z);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "relu(x @ w + b)");
    tc_release(y), tc_release(z), tc_release(mm), tc_release(b), tc_release(w), tc_release(x);
}

static void test_conv_nd_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(3, SHAPE(2, 3, 16), 7, -2, 2);
    tc_tensor *w = tc_test_randn(3, SHAPE(4, 3, 3), 8, -1, 1);
    tc_tensor *b = tc_test_randn(1, SHAPE(4), 9, -1, 1);
    tc_tensor *in[3] = {x, w, b};
    assert_int_equal(tc_realize(in, 3), TC_OK);
    int64_t st[1] = {2}, pad[2] = {1, 2}, dil[1] = {1};
    tc_tensor *c = tc_conv_nd(x, w, b, 1, st, pad, dil, 1), *y = tc_relu(c);
    tc_check_schedule(y, 2, 1e-5, 1e-5, "relu(conv_nd 1-d (2,3,16)*(4,3,3), stride 2, pad (1,2))");
    tc_release(y), tc_release(c);
    int64_t no_pad[2] = {0, 0};
    c = tc_conv_nd(x, w, b, 1, st, no_pad, dil, 1), y = tc_relu(c);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "relu(conv_nd 1-d (2,3,16)*(4,3,3), stride 2)");
    tc_release(y), tc_release(c), tc_release(b), tc_release(w), tc_release(x);
    tc_tensor *x3 = tc_test_randn(5, SHAPE(1, 2, 5, 6, 4), 10, -2, 2);
    tc_tensor *w3 = tc_test_randn(5, SHAPE(3, 2, 2, 3, 2), 11, -1, 1);
    tc_tensor *in3[2] = {x3, w3};
    assert_int_equal(tc_realize(in3, 2), TC_OK);
    int64_t st3[3] = {1, 2, 1}, pad3[6] = {1, 1, 0, 0, 1, 0}, dil3[3] = {1, 1, 2};
    tc_tensor *c3 = tc_conv_nd(x3, w3, NULL, 3, st3, pad3, dil3, 1), *y3 = tc_relu(c3);
    tc_check_schedule(y3, 2, 1e-5, 1e-5, "relu(conv_nd 3-d (1,2,5,6,4) * (3,2,2,3,2))");
    tc_release(y3), tc_release(c3), tc_release(w3), tc_release(x3);
}

/* dx of conv2d(x, w) with x (2,3,8,8), w (cout,3,k,k), stride 2: its kernels
 * (Cin 3: no channels-last weight copies) and its multiply-adds */
static void check_strided_dx(int64_t cout, int64_t k, int64_t pad, int kernels, int64_t macs,
                             const char *what) {
    tc_tensor *x = tc_test_randn(4, SHAPE(2, 3, 8, 8), 12, -2, 2);
    tc_tensor *w = tc_test_randn(4, SHAPE(cout, 3, k, k), 13, -1, 1);
    int64_t o = (8 + 2 * pad - k) / 2 + 1;
    tc_tensor *dy = tc_test_randn(4, SHAPE(2, cout, o, o), 14, -1, 1);
    tc_tensor *in[3] = {x, w, dy};
    assert_int_equal(tc_realize(in, 3), TC_OK);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *y = tc_conv2d(x, w, NULL, 2, (int)pad);
    assert_int_equal(tc_backward_opts(y, dy, false), TC_OK);
    tc_tensor *dx = tc_grad(x);
    tc_counters before, after;
    tc_get_counters(&before);
    tc_check_schedule(dx, kernels, 1e-5, 1e-5, what);
    tc_get_counters(&after);
    assert_int_equal(after.global_ops - before.global_ops, 2 * macs);
    tc_release(dx), tc_release(y), tc_release(dy), tc_release(w), tc_release(x);
}

static void test_strided_conv_dx_by_phase_groups(void **state) {
    (void)state;
    /* dy padded, 4 convs (taps 1x1, 1x2, 2x1, 2x2 over 4x4 positions), the sum */
    check_strided_dx(5, 3, 1, 6, 2 * 3 * 5 * 16 * 9, "dx of conv2d 3x3 stride 2 pad 1");
    /* one conv (the even phases' single tap) storing its outputs in place, zeros around */
    check_strided_dx(5, 1, 0, 1, 2 * 3 * 5 * 16, "dx of conv2d 1x1 stride 2");
}

/* conv2d(x, w, pad) of x (2, cin, h, wd), w (cout, cin, 3, 3), or its dx
 * when dx (the conv's output channels fewer than 16: no channels-last
 * weight copy): its kernels and its multiply-adds */
static void check_row_runs(int64_t cin, int64_t cout, int64_t h, int64_t wd, int64_t pad, bool dx, int kernels,
                           int64_t macs, const char *what) {
    tc_tensor *x = tc_test_randn(4, SHAPE(2, cin, h, wd), 15, -2, 2);
    tc_tensor *w = tc_test_randn(4, SHAPE(cout, cin, 3, 3), 16, -1, 1);
    tc_tensor *dy = tc_test_randn(4, SHAPE(2, cout, h + 2 * pad - 2, wd + 2 * pad - 2), 17, -1, 1);
    tc_tensor *in[3] = {x, w, dy};
    assert_int_equal(tc_realize(in, 3), TC_OK);
    assert_int_equal(tc_set_requires_grad(x, dx), TC_OK);
    tc_tensor *y = tc_conv2d(x, w, NULL, 1, (int)pad), *out = y;
    if (dx) {
        assert_int_equal(tc_backward_opts(y, dy, false), TC_OK);
        out = tc_grad(x);
    }
    tc_counters before, after;
    tc_get_counters(&before);
    tc_check_schedule(out, kernels, 1e-5, 1e-5, what);
    tc_get_counters(&after);
    assert_int_equal(after.global_ops - before.global_ops, 2 * macs);
    if (dx) tc_release(out);
    tc_release(y), tc_release(dy), tc_release(w), tc_release(x);
}

static void test_conv_by_row_runs(void **state) {
    (void)state;
    /* x padded along W only, 3 runs of rows (taps 1-2, 0-2, 0-1), their sum:
     * 10 taps of 12 along H, each over 64 x 3 (W padded) for 2 x 4 x 32 */
    check_row_runs(32, 4, 4, 64, 1, false, 5, 2 * 4 * 32 * 10 * 192, "conv2d (2,32,4,64) 3x3 pad 1 by row runs");
    /* dx of a conv without padding: dy (2,32,8,62) padded 2, 5 runs (taps
     * 2, 1-2, 0-2 over 6 rows, 0-1, 0), 24 of 30 taps along H */
    check_row_runs(4, 32, 10, 64, 0, true, 7, 2 * 32 * 4 * 24 * 192, "dx of conv2d (2,4,10,64) 3x3 by row runs");
    /* 16 rows: a sixteenth of the taps is not worth the sum's pass; runs of
     * 2 x 1 x 16 positions are too few: one conv of x padded in a buffer */
    check_row_runs(32, 4, 16, 16, 1, false, 2, 2 * 4 * 32 * 16 * 16 * 9, "conv2d (2,32,16,16) 3x3 pad 1, one conv");
    check_row_runs(32, 4, 4, 16, 1, false, 2, 2 * 4 * 32 * 4 * 16 * 9, "conv2d (2,32,4,16) 3x3 pad 1, one conv");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_softmax_one_kernel),
        TEST(test_log_softmax_one_kernel),
        TEST(test_layernorm_one_kernel),
        TEST(test_matmul_bias_relu_one_kernel),
        TEST(test_conv_nd_one_kernel),
        TEST(test_strided_conv_dx_by_phase_groups),
        TEST(test_conv_by_row_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
