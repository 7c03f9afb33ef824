/* test_training.c - the pieces together: a small convnet (Conv2d, BatchNorm2d,
 * max_pool2d, Linear) trained with Adam, eagerly and through a tc_jit, must
 * end with the same weights and running statistics; a loss that falls on a
 * learnable problem; and the mistakes a training program can make (labels
 * out of range, a non-scalar loss, a missing data directory), each a clear
 * error that leaks nothing. Public API only. */
#include <math.h>

#include "nn_helpers.h"

enum { BATCH = 8, SIDE = 8 };

typedef struct {
    tc_layer *layers[3]; /* conv 1->4 3x3 pad 1, BN(4), linear 64->3 */
    tc_optimizer *opt;
    tc_tensor *buffers[2]; /* BN running statistics (borrowed) */
} net;

static void net_init(net *n, double momentum_or_adam) {
    tc_manual_seed(3);
    n->layers[0] = tc_nn_conv2d(1, 4, 3, 1, 1, true, NULL);
    n->layers[1] = tc_nn_batchnorm2d(4, 1e-5, 0.1, NULL);
    n->layers[2] = tc_nn_linear(4 * (SIDE / 2) * (SIDE / 2), 3, true, NULL);
    for (int i = 0; i < 3; i++) CHECK_T(n->layers[i]);
    tc_tensor *ps[6];
    assert_int_equal(tc_nn_parameters(n->layers, 3, ps, 6), 6);
    assert_int_equal(tc_nn_buffers(n->layers, 3, n->buffers, 2), 2);
    n->opt = momentum_or_adam < 0 ? tc_adam(ps, 6, 0.01, 0.9, 0.999, 1e-8)
                                  : tc_sgd_ex(ps, 6, 0.05, momentum_or_adam, 0.3, 0.01, false);
    CHECK_T(n->opt);
}

static void net_free(net *n) {
    tc_optimizer_free(n->opt);
    for (int i = 0; i < 3; i++) tc_layer_free(n->layers[i]);
}

static tc_tensor *forward(net *n, tc_tensor *x) {
    tc_tensor *a = tc_layer_forward(n->layers[0], x);
    tc_tensor *b = tc_relu(a);
    tc_tensor *c = tc_layer_forward(n->layers[1], b);
    tc_tensor *d = tc_max_pool2d(c, 2, 2);
    tc_tensor *e = tc_reshape(d, 2, SHAPE(-1, 4 * (SIDE / 2) * (SIDE / 2)));
    tc_tensor *f = tc_layer_forward(n->layers[2], e);
    CHECK_T(f);
    tc_release(a), tc_release(b), tc_release(c), tc_release(d), tc_release(e);
    return f;
}

static tc_status step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    net *n = user;
    (void)n_in, (void)n_out;
    tc_status s = tc_optimizer_zero_grad(n->opt);
    tc_tensor *logits = forward(n, in[0]);
    tc_tensor *loss = tc_cross_entropy(logits, in[1]);
    if (s == TC_OK) s = loss ? tc_backward(loss) : tc_last_status();
    tc_tensor *also[3] = {loss, n->buffers[0], n->buffers[1]};
    if (s == TC_OK) s = tc_optimizer_step_with(n->opt, also, 3);
    tc_release(logits);
    out[0] = loss;
    return s;
}

/* batch i: images whose class is which quadrant is brightest, plus noise */
static void batch(int i, tc_tensor **x, tc_tensor **y) {
    float px[BATCH * SIDE * SIDE];
    int32_t lb[BATCH];
    for (int b = 0; b < BATCH; b++) {
        lb[b] = (b + i) % 3;
        for (int p = 0; p < SIDE * SIDE; p++) {
            int r = p / SIDE, c = p % SIDE, quad = (r >= SIDE / 2) + (c >= SIDE / 2);
            px[b * SIDE * SIDE + p] = (float)((quad == lb[b]) + 0.3 * sin(p * 1.7 + b + 3 * i));
        }
    }
    *x = tc_from_data(px, TC_FLOAT32, 4, SHAPE(BATCH, 1, SIDE, SIDE), NULL);
    *y = tc_from_data(lb, TC_INT32, 1, SHAPE(BATCH), NULL);
    CHECK_T(*x);
    CHECK_T(*y);
}

/* trains `steps` steps (through a jit when use_jit); returns the last loss;
 * all of n's tensors go to state[] (host copies, malloc'ed) */
static float train(net *n, int steps, bool use_jit, float **state) {
    tc_jit *jit = use_jit ? tc_jit_new(step, n) : NULL;
    float first = 0, last = 0;
    for (int i = 0; i < steps; i++) {
        tc_tensor *x, *y, *loss = NULL;
        batch(i, &x, &y);
        tc_tensor *in[2] = {x, y};
        CHECK_OK(jit ? tc_jit_run(jit, in, 2, &loss, 1) : step(n, in, 2, &loss, 1));
        CHECK_OK(tc_to_host(loss, &last, sizeof last));
        if (i == 0) first = last;
        tc_release(x), tc_release(y), tc_release(loss);
    }
    tc_jit_free(jit);
    int k = 0;
    for (int l = 0; l < 3; l++) {
        tc_tensor *ts[4];
        int np = tc_layer_parameters(n->layers[l], ts, 4);
        int nb = tc_layer_buffers(n->layers[l], ts + np, 4 - np);
        for (int t = 0; t < np + nb; t++) state[k++] = tc_test_read(ts[t]);
    }
    fprintf(stderr, "  %s: loss %.4f -> %.4f after %d steps\n", use_jit ? "jit" : "eager", first,
            last, steps);
    return last / first;
}

/* eager and replayed training give the same weights and running statistics */
static void check_jit_matches_eager(double momentum_or_adam) {
    static const int sizes[8] = {36, 4, 4, 4, 4, 4, 192, 3}; /* w b | bn w b rm rv | lin w b */
    float *eager[8], *replay[8];
    net a, b;
    net_init(&a, momentum_or_adam);
    float ratio = train(&a, 12, false, eager);
    net_free(&a);
    net_init(&b, momentum_or_adam);
    train(&b, 12, true, replay);
    net_free(&b);
    assert_true(ratio < 0.7); /* it learns */
    for (int i = 0; i < 8; i++) {
        assert_true(tc_allclose_f32(replay[i], eager[i], sizes[i], 1e-5, 1e-6, "jit vs eager"));
        free(eager[i]), free(replay[i]);
    }
}

static void test_adam_jit_matches_eager(void **state) {
    (void)state;
    check_jit_matches_eager(-1);
}

/* SGD with dampening: the first step differs from the others (b = d) */
static void test_sgd_jit_matches_eager(void **state) {
    (void)state;
    check_jit_matches_eager(0.9);
}

/* the mistakes a training program makes: each a clear error, nothing leaked */
static void test_training_errors(void **state) {
    (void)state;
    net n;
    net_init(&n, -1);
    tc_tensor *x, *y;
    batch(0, &x, &y);
    tc_tensor *logits = forward(&n, x);
    /* labels out of range */
    int32_t bad[BATCH] = {0, 1, 2, 3, 0, 1, 2, 0};
    tc_tensor *yb = tc_from_data(bad, TC_INT32, 1, SHAPE(BATCH), NULL);
    assert_null(tc_cross_entropy(logits, yb));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy: labels[3] = 3 is out of range for 3");
    /* labels of the wrong length */
    tc_tensor *short_y = tc_shrink(y, (const int64_t[]){0, 4});
    assert_null(tc_cross_entropy(logits, short_y));
    assert_tc_error(TC_ERR_SHAPE, "tc_cross_entropy: logits (8,3) must be (N,C)");
    /* a non-scalar loss */
    assert_int_equal(tc_backward(logits), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_backward: loss must be a scalar (one element), got "
                                  "shape (8,3)");
    /* the wrong input for a layer */
    tc_tensor *flat = tc_reshape(x, 2, SHAPE(BATCH, SIDE * SIDE));
    assert_null(tc_layer_forward(n.layers[0], flat));
    assert_tc_error(TC_ERR_SHAPE, "tc_layer_forward: Conv2d(1, 4) expects x of shape");
    /* a step with no backward is fine and changes nothing */
    CHECK_OK(tc_optimizer_step(n.opt));
    /* a missing data directory */
    tc_mnist m = {0};
    assert_int_equal(tc_mnist_load("/nonexistent/mnist", NULL, &m), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "tc_mnist_load: no train-images-idx3-ubyte in /nonexistent/mnist");
    tc_release(x), tc_release(y), tc_release(yb), tc_release(short_y), tc_release(flat);
    tc_release(logits);
    net_free(&n);
}

/* The kernels of one beautiful_mnist training step (examples/mnist.c --model
 * conv: forward, backward and Adam with the loss and BatchNorm's running
 * statistics in one realize), counted exactly at the batch examples/mnist
 * uses, 512 (tinygrad mid-2024: 84). 52 fused kernels; 15 more since the
 * convs read their weights (and the weight gradients read dy) through
 * channels-last copies (nnops.c), twice as fast; 3 more since the weight
 * gradients of conv1..conv3 (32768 or more inputs per weight at batch 512)
 * reduce 16 parts of the batch each, then sum the parts in a small kernel
 * that also applies Adam (tensor/reduce.c: a prime batch such as 257 has
 * no parts and keeps 67). 3 more since dy is realized before the dx
 * convs' padded copies of it (nnops.c). 2 fewer since the gradients through
 * each max-pool and relu, read by batchnorm's backward sums, are realized
 * once (schedule.c's realize_shared): the sums that each recomputed them
 * fuse. 8 fewer since a conv's weight gradient reads the dy realized for
 * its dx too (nnops.c): the bias sums and their Adam updates ride on the
 * kernels that realize dy. 5 fewer since a realized reduce of few rows
 * also stores what is computed from it per row (group.c): batchnorm's
 * mean and running-mean update ride on its sum, the inverse std and
 * running-var update on the variance's sum (4 kernels), and one per-sample
 * term of the cross-entropy on its row reduce. 2 fewer since the
 * cross-entropy realizes its rows' losses (loss.c): log_softmax and the
 * pick are one kernel, the mean over the rows a second. 3 more since the
 * Adam update of a weight gradient computed transposed (a conv's, as a
 * conv over the batch) no longer rides on the gradient's kernel, whose
 * tile would store m, v and w scattered, one scalar at a time (group.c):
 * three conv weights' updates are kernels of their own; the step is 3-5%
 * faster and its peak memory 7 MB lower. 8 more since the input gradients
 * of the two 3x3 convs (dy padded by 2 over 8 and 10 rows: a fifth of the
 * taps along H read padding) run as 5 convs of the rows with the same taps
 * and their sum (nnops.c, conv_by_rows): 2% faster over 20 steps, peak
 * memory 14 MB higher (the runs' outputs beside their sum). */
enum { MNIST_STEP_KERNELS = 67, MNIST_BATCH = 512 };

/* *h = t (checked), the old *h released */
static void next(tc_tensor **h, tc_tensor *t) {
    CHECK_T(t);
    tc_release(*h);
    *h = t;
}

static void test_beautiful_mnist_step_kernels(void **state) {
    (void)state;
    tc_manual_seed(42);
    tc_layer *L[7] = {
        tc_nn_conv2d(1, 32, 5, 1, 0, true, NULL),  tc_nn_conv2d(32, 32, 5, 1, 0, true, NULL),
        tc_nn_batchnorm2d(32, 1e-5, 0.1, NULL),    tc_nn_conv2d(32, 64, 3, 1, 0, true, NULL),
        tc_nn_conv2d(64, 64, 3, 1, 0, true, NULL), tc_nn_batchnorm2d(64, 1e-5, 0.1, NULL),
        tc_nn_linear(576, 10, true, NULL)};
    for (int i = 0; i < 7; i++) CHECK_T(L[i]);
    tc_tensor *ps[16], *also[5];
    int np = tc_nn_parameters(L, 7, ps, 16);
    assert_int_equal(tc_nn_buffers(L, 7, also + 1, 4), 4);
    tc_optimizer *opt = tc_adam(ps, np, 0.001, 0.9, 0.999, 1e-8);
    CHECK_T(opt);
    uint8_t *px = malloc(MNIST_BATCH * 784);
    int32_t lb[MNIST_BATCH];
    assert_non_null(px);
    for (int i = 0; i < MNIST_BATCH * 784; i++) px[i] = (uint8_t)((i * 2654435761u) >> 24);
    for (int i = 0; i < MNIST_BATCH; i++) lb[i] = (i * 7) % 10;
    tc_tensor *x = tc_from_data(px, TC_UINT8, 4, SHAPE(MNIST_BATCH, 1, 28, 28), NULL);
    tc_tensor *y = tc_from_data(lb, TC_INT32, 1, SHAPE(MNIST_BATCH), NULL);
    free(px);
    CHECK_T(x);
    CHECK_T(y);
    tc_tensor *h = tc_cast(x, TC_FLOAT32);
    next(&h, tc_layer_forward(L[0], h)), next(&h, tc_relu(h)), next(&h, tc_layer_forward(L[1], h));
    next(&h, tc_relu(h)), next(&h, tc_layer_forward(L[2], h)), next(&h, tc_max_pool2d(h, 2, 2));
    next(&h, tc_layer_forward(L[3], h)), next(&h, tc_relu(h)), next(&h, tc_layer_forward(L[4], h));
    next(&h, tc_relu(h)), next(&h, tc_layer_forward(L[5], h)), next(&h, tc_max_pool2d(h, 2, 2));
    next(&h, tc_reshape(h, 2, SHAPE(MNIST_BATCH, 576))), next(&h, tc_layer_forward(L[6], h));
    tc_tensor *loss = tc_cross_entropy(h, y);
    CHECK_T(loss);
    CHECK_OK(tc_backward(loss));
    also[0] = loss;
    tc_counters c0, c1;
    tc_get_counters(&c0);
    CHECK_OK(tc_optimizer_step_with(opt, also, 5));
    tc_get_counters(&c1);
    fprintf(stderr, "  beautiful_mnist step (batch %d): %lld kernels\n", MNIST_BATCH,
            (long long)(c1.kernel_count - c0.kernel_count));
    assert_int_equal(c1.kernel_count - c0.kernel_count, MNIST_STEP_KERNELS);
    float lv;
    CHECK_OK(tc_to_host(loss, &lv, sizeof lv));
    assert_true(isfinite(lv) && lv > 0);
    tc_release(loss), tc_release(h), tc_release(x), tc_release(y);
    tc_optimizer_free(opt);
    for (int i = 0; i < 7; i++) tc_layer_free(L[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_beautiful_mnist_step_kernels),
        TEST(test_adam_jit_matches_eager),
        TEST(test_sgd_jit_matches_eager),
        TEST(test_training_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
