/* test_deep_mlp.c - the kernels of one training step of an L-layer MLP,
 * scheduled on the NULL device (lowered and rendered, never compiled or
 * run), counted exactly for several L so the per-layer formula is checked.
 *
 * The model is bench/scale.py's: L x (Linear(64, 64), gelu), batch 32,
 * loss = mean(h^2), backward, Adam over every weight and bias, the loss
 * realized with the update (tc_optimizer_step_with). gelu is tinygrad's
 * tanh form, built as python/tinyc's Tensor.gelu builds it. Public API only.
 */
#include "nn_helpers.h"

enum { WIDTH = 64, BATCH = 32 };

/* a float32 scalar on NULL */
static tc_tensor *scalar(double v) {
    tc_tensor *t = tc_full(0, NULL, v, TC_FLOAT32, "NULL");
    CHECK_T(t);
    return t;
}

/* 0.5 * x * (1 + tanh(0.7978845608 * (x + 0.044715 * x * x * x))) */
static tc_tensor *gelu(tc_tensor *x) {
    tc_tensor *half = scalar(0.5), *one = scalar(1.0), *c = scalar(0.7978845608),
              *k = scalar(0.044715);
    tc_tensor *hx = tc_mul(half, x), *kx = tc_mul(k, x), *kxx = tc_mul(kx, x);
    tc_tensor *kxxx = tc_mul(kxx, x), *inner = tc_add(x, kxxx), *arg = tc_mul(c, inner);
    tc_tensor *th = tc_tanh(arg), *onep = tc_add(one, th), *out = tc_mul(hx, onep);
    CHECK_T(out);
    tc_tensor *tmp[] = {half, one, c, k, hx, kx, kxx, kxxx, inner, arg, th, onep};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) tc_release(tmp[i]);
    return out;
}

/* kernels one training step of the n_layers-layer MLP launches on NULL */
static int64_t step_kernels(int n_layers) {
    tc_manual_seed(1);
    tc_layer **layers = calloc((size_t)n_layers, sizeof *layers);
    tc_tensor **params = calloc((size_t)n_layers * 2, sizeof *params);
    assert_non_null(layers);
    assert_non_null(params);
    for (int i = 0; i < n_layers; i++) {
        layers[i] = tc_nn_linear(WIDTH, WIDTH, true, "NULL");
        CHECK_T(layers[i]);
    }
    assert_int_equal(tc_nn_parameters(layers, n_layers, params, 2 * n_layers), 2 * n_layers);
    tc_optimizer *opt = tc_adam(params, 2 * n_layers, 1e-3, 0.9, 0.999, 1e-8);
    CHECK_T(opt);
    tc_tensor *h = tc_rand(2, SHAPE(BATCH, WIDTH), TC_FLOAT32, "NULL");
    CHECK_OK(tc_realize(&h, 1)); /* the input is data, not part of the step */
    for (int i = 0; i < n_layers; i++) {
        tc_tensor *z = tc_layer_forward(layers[i], h);
        CHECK_T(z);
        tc_release(h);
        h = gelu(z);
        tc_release(z);
    }
    tc_tensor *sq = tc_square(h), *loss = tc_mean(sq, 0, NULL, false);
    CHECK_T(loss);
    tc_counters c0, c1;
    tc_get_counters(&c0);
    CHECK_OK(tc_backward(loss));
    CHECK_OK(tc_optimizer_step_with(opt, &loss, 1));
    tc_get_counters(&c1);
    assert_int_equal(c1.compile_count, c0.compile_count); /* NULL builds nothing */
    tc_release(h), tc_release(sq), tc_release(loss);
    tc_optimizer_free(opt);
    for (int i = 0; i < n_layers; i++) tc_layer_free(layers[i]);
    free(layers);
    free(params);
    return c1.kernel_count - c0.kernel_count;
}

/* The step is 4L + 1 kernels:
 *   per layer l, forward: 1 kernel, the matmul z_l = h_{l-1} @ W_l^T with
 *     gelu(z_l + b_l) as its epilogue, storing both z_l (backward needs it
 *     for gelu') and h_l;                                              L
 *   the loss mean(h_L^2): 1 reduce;                                    1
 *   backward to the inputs, layers L..2: 1 kernel each, dh_{l-1} =
 *     dz_l @ W_l with dz_l = dh_l * gelu'(z_l + b_l) recomputed inside
 *     (the last layer's dh_L = 2 h_L / N is elementwise, so no kernel;
 *     layer 1 needs no dx);                                            L - 1
 *   per layer, the update: 1 kernel for W_l (dW = dz_l^T @ h_{l-1}, then
 *     Adam's m, v and W_l: three stores over one loop space) and 1 for
 *     b_l (db = dz_l summed over the batch, then m, v, b_l);           2L
 *   Adam's b1^t and b2^t: 1 elementwise kernel with two stores.        1 */
static int64_t expected(int n_layers) {
    return 4 * (int64_t)n_layers + 1;
}

static void test_one_layer(void **state) {
    (void)state;
    assert_int_equal(step_kernels(1), expected(1));
}

static void test_two_layers(void **state) {
    (void)state;
    assert_int_equal(step_kernels(2), expected(2));
}

/* the depth: 512 layers, about 40k graph nodes (the scheduler is
 * linear in them; seconds under ASan) */
static void test_deep(void **state) {
    (void)state;
    assert_int_equal(step_kernels(512), expected(512));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_one_layer),
        TEST(test_two_layers),
        TEST(test_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
