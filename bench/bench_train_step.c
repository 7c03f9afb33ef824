/* bench_train_step.c - milliseconds per training step of the two MNIST
 * models of examples/mnist.c, and the kernels each step launches.
 *
 * conv: beautiful_mnist's convnet (Conv2d 1->32 5x5, 32->32 5x5, BN, pool,
 * 32->64 3x3, 64->64 3x3, BN, pool, Linear 576->10); mlp: Linear 784->128,
 * relu, Linear 128->10. One step = zero_grad, forward, cross-entropy,
 * backward, Adam update (with the loss and BatchNorm's running statistics
 * realized in the same tc_realize), replayed through a tc_jit unless --jit 0.
 * The batch is fixed (pixels from a generator): only compute is timed. Two
 * warm-up steps (compile, capture) are not timed.
 *
 * Usage: bench_train_step [--model conv|mlp|both] [--batch B] [--steps N] [--jit 0|1]
 * Prints one line per model: "model batch ms_per_step kernels_per_step".
 * bench/train_step.sh runs it next to PyTorch (bench/train_step_torch.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tinyc.h>

typedef struct {
    bool is_conv;
    tc_layer *layers[7];
    int n_layers;
    tc_optimizer *opt;
    tc_tensor *buffers[4]; /* BatchNorm running statistics (borrowed) */
    int n_buffers;
} model;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_train_step: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static int build(model *m, bool is_conv) {
    memset(m, 0, sizeof *m);
    m->is_conv = is_conv;
    tc_manual_seed(1);
    tc_layer **L = m->layers;
    if (is_conv) {
        L[0] = tc_nn_conv2d(1, 32, 5, 1, 0, true, NULL);
        L[1] = tc_nn_conv2d(32, 32, 5, 1, 0, true, NULL);
        L[2] = tc_nn_batchnorm2d(32, 1e-5, 0.1, NULL);
        L[3] = tc_nn_conv2d(32, 64, 3, 1, 0, true, NULL);
        L[4] = tc_nn_conv2d(64, 64, 3, 1, 0, true, NULL);
        L[5] = tc_nn_batchnorm2d(64, 1e-5, 0.1, NULL);
        L[6] = tc_nn_linear(576, 10, true, NULL);
        m->n_layers = 7;
    } else {
        L[0] = tc_nn_linear(784, 128, true, NULL);
        L[1] = tc_nn_linear(128, 10, true, NULL);
        m->n_layers = 2;
    }
    for (int i = 0; i < m->n_layers; i++)
        if (!L[i]) return fail("creating the layers");
    tc_tensor *params[16];
    int n = tc_nn_parameters(L, m->n_layers, params, 16);
    m->n_buffers = tc_nn_buffers(L, m->n_layers, m->buffers, 4);
    m->opt = tc_adam(params, n, 1e-3, 0.9, 0.999, 1e-8);
    return m->opt ? 0 : fail("tc_adam");
}

static void free_model(model *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < m->n_layers; i++) tc_layer_free(m->layers[i]);
}

static bool then(tc_tensor **h, tc_tensor *next) {
    tc_release(*h);
    *h = next;
    return next != NULL;
}

static tc_tensor *forward(model *m, tc_tensor *x) {
    tc_layer **L = m->layers;
    int64_t n = tc_shape(x)[0];
    tc_tensor *h = tc_cast(x, TC_FLOAT32);
    bool ok = h != NULL;
    if (m->is_conv)
        ok = ok && then(&h, tc_layer_forward(L[0], h)) && then(&h, tc_relu(h)) &&
             then(&h, tc_layer_forward(L[1], h)) && then(&h, tc_relu(h)) &&
             then(&h, tc_layer_forward(L[2], h)) && then(&h, tc_max_pool2d(h, 2, 2)) &&
             then(&h, tc_layer_forward(L[3], h)) && then(&h, tc_relu(h)) &&
             then(&h, tc_layer_forward(L[4], h)) && then(&h, tc_relu(h)) &&
             then(&h, tc_layer_forward(L[5], h)) && then(&h, tc_max_pool2d(h, 2, 2)) &&
             then(&h, tc_reshape(h, 2, (int64_t[]){n, 576})) && then(&h, tc_layer_forward(L[6], h));
    else
        ok = ok && then(&h, tc_reshape(h, 2, (int64_t[]){n, 784})) &&
             then(&h, tc_layer_forward(L[0], h)) && then(&h, tc_relu(h)) &&
             then(&h, tc_layer_forward(L[1], h));
    if (!ok) tc_release(h);
    return ok ? h : NULL;
}

static tc_status step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    model *m = user;
    (void)n_in, (void)n_out;
    tc_tensor *logits = NULL, *loss = NULL;
    tc_status s = tc_optimizer_zero_grad(m->opt);
    if (s == TC_OK && !(logits = forward(m, in[0]))) s = tc_last_status();
    if (s == TC_OK && !(loss = tc_cross_entropy(logits, in[1]))) s = tc_last_status();
    if (s == TC_OK) s = tc_backward(loss);
    tc_tensor *also[5] = {loss};
    for (int i = 0; i < m->n_buffers; i++) also[1 + i] = m->buffers[i];
    if (s == TC_OK) s = tc_optimizer_step_with(m->opt, also, 1 + m->n_buffers);
    tc_release(logits);
    if (s == TC_OK) out[0] = loss;
    else tc_release(loss);
    return s;
}

/* a fixed batch: pixels and labels from an LCG */
static int make_batch(int batch, tc_tensor **x, tc_tensor **y) {
    uint8_t *px = malloc((size_t)batch * 784);
    int32_t *lb = malloc(sizeof *lb * (size_t)batch);
    uint64_t s = 12345;
    for (int i = 0; i < batch * 784; i++)
        px[i] = (uint8_t)((s = s * 6364136223846793005ULL + 1) >> 56);
    for (int i = 0; i < batch; i++)
        lb[i] = (int32_t)((s = s * 6364136223846793005ULL + 1) >> 60) % 10;
    *x = tc_from_data(px, TC_UINT8, 4, (int64_t[]){batch, 1, 28, 28}, NULL);
    *y = tc_from_data(lb, TC_INT32, 1, (int64_t[]){batch}, NULL);
    free(px), free(lb);
    return *x && *y ? 0 : fail("tc_from_data");
}

/* times `steps` steps after two warm-up steps; prints the result line */
static int bench(bool is_conv, int batch, int steps, bool use_jit) {
    model m;
    tc_tensor *x = NULL, *y = NULL;
    tc_jit *jit = NULL;
    int rc = build(&m, is_conv);
    if (rc == 0) rc = make_batch(batch, &x, &y);
    if (rc == 0 && use_jit && !(jit = tc_jit_new(step, &m))) rc = fail("tc_jit_new");
    double t0 = 0;
    int64_t k0 = 0;
    for (int i = 0; i < steps + 2 && rc == 0; i++) {
        if (i == 2) {
            tc_counters c;
            tc_get_counters(&c);
            k0 = c.kernel_count;
            t0 = now();
        }
        tc_tensor *in[2] = {x, y}, *loss = NULL;
        float lv;
        tc_status s = jit ? tc_jit_run(jit, in, 2, &loss, 1) : step(&m, in, 2, &loss, 1);
        if (s == TC_OK) s = tc_to_host(loss, &lv, sizeof lv); /* waits for the step */
        if (s != TC_OK) rc = fail("the training step");
        tc_release(loss);
    }
    if (rc == 0) {
        tc_counters c;
        tc_get_counters(&c);
        printf("%-4s %5d %10.2f %6lld\n", is_conv ? "conv" : "mlp", batch,
               1e3 * (now() - t0) / steps, (long long)((c.kernel_count - k0) / steps));
        fflush(stdout);
    }
    tc_jit_free(jit);
    tc_release(x), tc_release(y);
    free_model(&m);
    return rc;
}

int main(int argc, char **argv) {
    const char *which = "both";
    int batch = -1, steps = -1;
    bool use_jit = true;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) which = argv[i + 1];
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--jit")) use_jit = atoi(argv[i + 1]) != 0;
        else argc = -1;
    }
    if (argc < 0 || argc % 2 == 0 ||
        (strcmp(which, "conv") && strcmp(which, "mlp") && strcmp(which, "both"))) {
        fprintf(stderr, "usage: bench_train_step [--model conv|mlp|both] [--batch B] "
                        "[--steps N] [--jit 0|1]\n");
        return 2;
    }
    printf("model batch ms_per_step kernels_per_step\n");
    int rc = 0;
    if (strcmp(which, "mlp"))
        rc = bench(true, batch > 0 ? batch : 512, steps > 0 ? steps : 3, use_jit);
    if (rc == 0 && strcmp(which, "conv"))
        rc = bench(false, batch > 0 ? batch : 128, steps > 0 ? steps : 50, use_jit);
    tc_shutdown();
    return rc;
}
