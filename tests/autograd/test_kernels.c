/* test_kernels.c - kernel counts of the composites as the scheduler sees
 * them (tc_check_schedule: asserts the exact count, dumps the schedule when
 * it differs, and checks the values against the reference evaluator).
 * The composites are built from public ops only; these counts are what the
 * fusion rules of DESIGN.md promise for them:
 *   softmax, log_softmax, layernorm of a realized (N,D): 1 kernel each
 *     (consecutive reduces on one axis fuse: max, sum, store);
 *   relu(x @ w + b): 1 kernel (the matmul reduce with its elementwise
 *     consumers). */
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

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_softmax_one_kernel),
        TEST(test_log_softmax_one_kernel),
        TEST(test_layernorm_one_kernel),
        TEST(test_matmul_bias_relu_one_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
