/* mnist.c - trains a classifier on MNIST-format data (MNIST, Fashion-MNIST)
 * with libtinyc and prints the test accuracy.
 *
 * --model conv: tinygrad's examples/beautiful_mnist.py convnet:
 *   Conv2d(1,32,5) relu, Conv2d(32,32,5) relu, BatchNorm2d(32), max_pool2d(2),
 *   Conv2d(32,64,3) relu, Conv2d(64,64,3) relu, BatchNorm2d(64), max_pool2d(2),
 *   flatten, Linear(576,10); Adam; batch 512; raw 0..255 pixels as inputs.
 * --model mlp: Linear(784,128) relu, Linear(128,10) on the flattened image
 *   (the same raw pixels), Adam.
 * Each step draws a batch with replacement (splitmix64 seeded with --seed,
 * like beautiful_mnist's randint), builds forward, backward and the Adam
 * update lazily and realizes them with the loss and BatchNorm's running
 * statistics in one tc_realize; with --jit 1 (the default) a tc_jit captures
 * the step's kernels once and replays them. The weights start from
 * tc_manual_seed(--seed), so a run is deterministic for a seed. At the end
 * the model (BatchNorm on its running statistics) classifies the 10k test
 * images; the last line is "test accuracy: NN.NN%".
 *
 * Usage: mnist [--model conv|mlp] [--steps N] [--batch B] [--seed S] [--lr X]
 *              [--device D] [--data DIR] [--jit 0|1] [--save PATH]
 * Defaults: conv, 70 steps, batch 512 (mlp: 200 steps, batch 128), seed 42,
 * lr 0.001, data /usr/share/datasets/fashion-mnist. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tinyc.h>

#include "convnet.h"

enum { MAX_LAYERS = 7, PIXELS = 28 * 28 };

typedef struct {
    const char *model; /* "conv" or "mlp" */
    int steps;         /* training steps */
    int batch;         /* samples per step */
    uint64_t seed;     /* weights (tc_manual_seed) and batch sampling */
    double lr;         /* Adam's learning rate */
    const char *device;
    const char *data; /* folder with the four MNIST files */
    bool use_jit;     /* replay the captured step */
    const char *save; /* safetensors file for the trained weights, or NULL */
} options;

typedef struct {
    bool is_conv;                 /* the convnet, else the MLP */
    tc_layer *layers[MAX_LAYERS]; /* in forward order (owned) */
    int n_layers;
    tc_optimizer *opt;     /* Adam over every layer's parameters */
    tc_tensor *buffers[4]; /* BatchNorm running statistics (borrowed) */
    int n_buffers;
} model;

typedef struct {
    int64_t n_train, n_test;   /* images */
    uint8_t *train_x, *test_x; /* n * 784 pixels (malloc'ed) */
    uint8_t *train_y, *test_y; /* n labels */
} dataset;

static int fail(const char *what) {
    fprintf(stderr, "mnist: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* ---- data ------------------------------------------------------------------------ */

/* t's bytes in a new malloc'ed array */
static uint8_t *host_bytes(tc_tensor *t) {
    size_t n = (size_t)tc_numel(t);
    uint8_t *p = malloc(n ? n : 1);
    if (p && tc_to_host(t, p, n) != TC_OK) {
        free(p);
        return NULL;
    }
    return p;
}

/* loads the four files and keeps host copies for batch sampling */
static int load_data(const char *dir, dataset *d) {
    tc_mnist m;
    if (tc_mnist_load(dir, "CPU", &m) != TC_OK) return fail("tc_mnist_load");
    int rc = 0;
    if (tc_shape(m.train_images)[1] * tc_shape(m.train_images)[2] != PIXELS) {
        fprintf(stderr, "mnist: images in %s are not 28x28\n", dir);
        rc = 1;
    }
    d->n_train = tc_shape(m.train_images)[0];
    d->n_test = tc_shape(m.test_images)[0];
    if (rc == 0 &&
        (!(d->train_x = host_bytes(m.train_images)) || !(d->train_y = host_bytes(m.train_labels)) ||
         !(d->test_x = host_bytes(m.test_images)) || !(d->test_y = host_bytes(m.test_labels))))
        rc = fail("reading the data");
    tc_mnist_release(&m);
    return rc;
}

static void free_data(dataset *d) {
    free(d->train_x), free(d->train_y), free(d->test_x), free(d->test_y);
}

/* images rows[0..n-1] of x as a uint8 (n,1,28,28) tensor, labels as int32 (n) */
static int make_batch(const uint8_t *x, const uint8_t *y, const int64_t *rows, int n,
                      const char *dev, tc_tensor **xt, tc_tensor **yt) {
    uint8_t *px = malloc((size_t)n * PIXELS);
    int32_t *lb = malloc(sizeof *lb * (size_t)n);
    if (!px || !lb) {
        free(px), free(lb);
        fprintf(stderr, "mnist: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n; i++) {
        memcpy(px + (size_t)i * PIXELS, x + rows[i] * PIXELS, PIXELS);
        lb[i] = y[rows[i]];
    }
    *xt = tc_from_data(px, TC_UINT8, 4, (int64_t[]){n, 1, 28, 28}, dev);
    *yt = *xt ? tc_from_data(lb, TC_INT32, 1, (int64_t[]){n}, dev) : NULL;
    free(px), free(lb);
    return *yt ? 0 : fail("tc_from_data");
}

/* ---- model --------------------------------------------------------------------- */

static void free_model(model *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < m->n_layers; i++) tc_layer_free(m->layers[i]);
}

/* the layers, Adam over their parameters, the BatchNorm buffers */
static int build_model(model *m, const options *o) {
    memset(m, 0, sizeof *m);
    m->is_conv = !strcmp(o->model, "conv");
    tc_manual_seed(o->seed);
    tc_layer **L = m->layers;
    const char *dev = o->device;
    if (m->is_conv) {
        if (!convnet_layers(L, dev)) return fail("creating the layers");
        m->n_layers = CONVNET_LAYERS;
    } else {
        L[0] = tc_nn_linear(PIXELS, 128, true, dev);
        L[1] = tc_nn_linear(128, 10, true, dev);
        m->n_layers = 2;
    }
    for (int i = 0; i < m->n_layers; i++)
        if (!L[i]) return fail("creating the layers");
    tc_tensor *params[16];
    int n = tc_nn_parameters(L, m->n_layers, params, 16);
    m->n_buffers = tc_nn_buffers(L, m->n_layers, m->buffers, 4);
    if (!(m->opt = tc_adam(params, n, o->lr, 0.9, 0.999, 1e-8))) return fail("tc_adam");
    return 0;
}

/* logits (n,10) of x (n,1,28,28) uint8; NULL with the error set */
static tc_tensor *forward(model *m, tc_tensor *x) {
    tc_layer **L = m->layers;
    if (m->is_conv) return convnet_forward(L, x);
    tc_tensor *h = tc_cast(x, TC_FLOAT32);
    bool ok = h && convnet_then(&h, tc_reshape(h, 2, (int64_t[]){tc_shape(x)[0], PIXELS})) &&
              convnet_then(&h, tc_layer_forward(L[0], h)) && convnet_then(&h, tc_relu(h)) &&
              convnet_then(&h, tc_layer_forward(L[1], h));
    return ok ? h : NULL;
}

/* one training step (also the tc_jit step function): inputs x, y; output the loss */
static tc_status train_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out,
                            int n_out) {
    model *m = user;
    (void)n_in, (void)n_out;
    tc_tensor *logits = NULL, *loss = NULL;
    tc_status s = tc_optimizer_zero_grad(m->opt);
    if (s == TC_OK && !(logits = forward(m, in[0]))) s = tc_last_status();
    if (s == TC_OK && !(loss = tc_cross_entropy(logits, in[1]))) s = tc_last_status();
    if (s == TC_OK) s = tc_backward_opts(loss, NULL, false); /* frees the graph, as torch does */
    tc_tensor *also[5] = {loss};
    for (int i = 0; i < m->n_buffers; i++) also[1 + i] = m->buffers[i];
    if (s == TC_OK) s = tc_optimizer_step_with(m->opt, also, 1 + m->n_buffers);
    tc_release(logits);
    if (s == TC_OK) out[0] = loss;
    else tc_release(loss);
    return s;
}

/* ---- training and evaluation -------------------------------------------------- */

/* the progress line: on a terminal rewritten in place, else every 10 steps */
static void progress(int step, int steps, float loss, double rate, int64_t kernels) {
    static int is_tty = -1;
    if (is_tty < 0) is_tty = isatty(fileno(stdout));
    if (!is_tty && step % 10 != 0 && step != steps) return;
    int width = 30, done = (int)((int64_t)width * step / steps);
    printf("%s[%.*s%*s] step %d/%d  loss %.4f  %.2f steps/s  %lld kernels/step%s",
           is_tty ? "\r" : "", done, "==============================", width - done, "", step,
           steps, loss, rate, (long long)kernels, is_tty && step < steps ? "" : "\n");
    fflush(stdout);
}

/* runs the steps; prints progress and the steady-state time per step */
static int train(model *m, const dataset *d, const options *o) {
    tc_jit *jit = o->use_jit ? tc_jit_new(train_step, m) : NULL;
    int64_t *rows = malloc(sizeof *rows * (size_t)o->batch);
    if ((o->use_jit && !jit) || !rows) {
        free(rows);
        tc_jit_free(jit);
        return fail("tc_jit_new");
    }
    uint64_t rng = o->seed;
    double start = now(), steady = 0;
    int rc = 0;
    for (int step = 1; step <= o->steps && rc == 0; step++) {
        for (int i = 0; i < o->batch; i++)
            rows[i] = (int64_t)(splitmix64(&rng) % (uint64_t)d->n_train);
        tc_tensor *x = NULL, *y = NULL, *loss = NULL;
        if ((rc = make_batch(d->train_x, d->train_y, rows, o->batch, o->device, &x, &y))) break;
        tc_counters c0, c1;
        tc_get_counters(&c0);
        tc_tensor *in[2] = {x, y};
        tc_status s = jit ? tc_jit_run(jit, in, 2, &loss, 1) : train_step(m, in, 2, &loss, 1);
        float lv = 0;
        if (s == TC_OK) s = tc_to_host(loss, &lv, sizeof lv);
        tc_get_counters(&c1);
        if (s != TC_OK) rc = fail("the training step");
        if (step == 2) steady = now(); /* steps 1 and 2 compile and capture */
        else
            progress(step, o->steps, lv, (step - 1) / (now() - start),
                     c1.kernel_count - c0.kernel_count);
        tc_release(x), tc_release(y), tc_release(loss);
    }
    if (rc == 0 && o->steps > 2)
        printf("trained %d steps in %.2f s; %.1f ms/step after the first two\n", o->steps,
               now() - start, 1e3 * (now() - steady) / (o->steps - 2));
    free(rows);
    tc_jit_free(jit);
    return rc;
}

/* the fraction of test images classified right, in batches of 1000 */
static int evaluate(model *m, const dataset *d, const char *dev, double *acc) {
    for (int i = 0; i < m->n_layers; i++) tc_layer_set_training(m->layers[i], false);
    bool was = tc_set_grad_enabled(false);
    int64_t right = 0, rows[1000];
    int rc = 0;
    for (int64_t at = 0; at < d->n_test && rc == 0; at += 1000) {
        int n = (int)(d->n_test - at < 1000 ? d->n_test - at : 1000);
        for (int i = 0; i < n; i++) rows[i] = at + i;
        tc_tensor *x = NULL, *y = NULL, *logits = NULL, *pred = NULL;
        int32_t got[1000];
        if ((rc = make_batch(d->test_x, d->test_y, rows, n, dev, &x, &y))) break;
        if (!(logits = forward(m, x)) || !(pred = tc_argmax(logits, 1, false)) ||
            tc_to_host(pred, got, sizeof(int32_t) * (size_t)n) != TC_OK)
            rc = fail("evaluating the test set");
        for (int i = 0; i < n && rc == 0; i++) right += got[i] == d->test_y[at + i];
        tc_release(x), tc_release(y), tc_release(logits), tc_release(pred);
    }
    tc_set_grad_enabled(was);
    for (int i = 0; i < m->n_layers; i++) tc_layer_set_training(m->layers[i], true);
    *acc = (double)right / (double)d->n_test;
    return rc;
}

/* ---- main ------------------------------------------------------------------------ */

static int parse(int argc, char **argv, options *o) {
    *o =
        (options){"conv", -1, -1, 42, 0.001, NULL, "/usr/share/datasets/fashion-mnist", true, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--batch")) o->batch = atoi(v);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--lr")) o->lr = atof(v);
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--jit")) o->use_jit = atoi(v) != 0;
        else if (!strcmp(a, "--save")) o->save = v;
        else goto usage;
    }
    bool is_conv = !strcmp(o->model, "conv");
    if (!is_conv && strcmp(o->model, "mlp")) goto usage;
    if (o->steps < 0) o->steps = is_conv ? 70 : 200;
    if (o->batch < 0) o->batch = is_conv ? 512 : 128;
    if (o->steps < 1 || o->batch < 1) goto usage;
    return 0;
usage:
    fprintf(stderr, "usage: mnist [--model conv|mlp] [--steps N] [--batch B] [--seed S] [--lr X]\n"
                    "             [--device D] [--data DIR] [--jit 0|1] [--save PATH]\n");
    return 2;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    dataset d = {0};
    model m = {0};
    double acc = 0;
    rc = load_data(o.data, &d);
    if (rc == 0) rc = build_model(&m, &o);
    if (rc == 0) {
        printf("%s on %s: %lld training images, %d steps of batch %d, Adam lr %g, seed %llu\n",
               m.is_conv ? "beautiful_mnist convnet" : "MLP 784-128-10", o.data,
               (long long)d.n_train, o.steps, o.batch, o.lr, (unsigned long long)o.seed);
        rc = train(&m, &d, &o);
    }
    if (rc == 0 && o.save && tc_nn_save(o.save, m.layers, m.n_layers) != TC_OK)
        rc = fail("tc_nn_save");
    if (rc == 0) rc = evaluate(&m, &d, o.device, &acc);
    if (rc == 0) printf("test accuracy: %.2f%%\n", 100 * acc);
    free_model(&m);
    free_data(&d);
    tc_shutdown();
    return rc;
}
