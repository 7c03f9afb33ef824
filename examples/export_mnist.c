/* export_mnist.c - exports the MNIST convnet of examples/mnist.c as
 * standalone C (tc_export_c): its inference at batch 1 (from the weights
 * `mnist --save PATH` wrote) and its Adam training step, plus what the
 * library computes for the same data, so the programs in examples/export/
 * (built with plain cc, linking nothing of ours) can be checked against it.
 *
 * Writes into --out DIR:
 *   mnist_infer.c/.h   logits (1,10) float32 of one image (1,1,28,28) uint8;
 *                      BatchNorm on its running statistics, weights embedded
 *   mnist_train.c/.h   one training step at batch B: inputs images (B,1,28,28)
 *                      uint8 and labels (B) int32; outputs the loss, then every
 *                      parameter and Adam state tensor and the running
 *                      statistics, all kept (and updated) by the exported code
 *   test_x.u8, test_y.u8, lib_pred.u8   the test set and the library's
 *                      predicted class for each image (batches of 1000)
 *   train_x.u8, train_y.i32, lib_loss.f32   --steps batches drawn as
 *                      examples/mnist.c draws them (splitmix64 of --seed), and
 *                      the loss of each library step on them (the first step
 *                      is the exported graph itself, realized)
 * Usage: export_mnist [--weights PATH] [--out DIR] [--data DIR] [--batch B]
 *                     [--steps N] [--seed S] [--lr X]
 * Defaults: no weights (the seeded initial ones), out ., data
 * /usr/share/datasets/fashion-mnist, batch 512, steps 10, seed 42, lr 0.001.
 * examples/export/run.sh runs it all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinyc.h>

#include "convnet.h"

enum { PIXELS = 28 * 28, MAX_OUTS = 64 };

typedef struct {
    const char *weights, *out, *data;
    int batch, steps;
    uint64_t seed;
    double lr;
} options;


static int fail(const char *what) {
    fprintf(stderr, "export_mnist: %s failed: %s\n", what, tc_last_error());
    return 1;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int put(const options *o, const char *name, const void *data, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o->out, name);
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "export_mnist: cannot write %s\n", path);
    return ok ? 0 : 1;
}

/* the convnet (examples/convnet.h), its weights from --weights if given */
static int build(convnet *m, const options *o) {
    if (!convnet_init(m, o->seed, NULL, o->lr)) return fail("building the convnet");
    if (o->weights && tc_nn_load(o->weights, m->L, CONVNET_LAYERS) != TC_OK) return fail("tc_nn_load");
    return 0;
}

static tc_tensor *forward(convnet *m, tc_tensor *x) {
    return convnet_forward(m->L, x);
}

/* the test set's images and labels as host arrays (malloc'ed) */
static int read_split(tc_tensor *images, tc_tensor *labels, uint8_t **x, uint8_t **y, int64_t *n) {
    *n = tc_shape(images)[0];
    *x = malloc((size_t)*n * PIXELS);
    *y = malloc((size_t)*n);
    if (!*x || !*y) return fail("allocating the data");
    if (tc_to_host(images, *x, (size_t)*n * PIXELS) != TC_OK ||
        tc_to_host(labels, *y, (size_t)*n) != TC_OK)
        return fail("reading the data");
    return 0;
}

/* inference: the export at batch 1, and the library's predictions */
static int export_infer(convnet *m, const options *o, const uint8_t *tx, const uint8_t *ty,
                        int64_t n) {
    for (int i = 0; i < 7; i++) tc_layer_set_training(m->L[i], false);
    bool was = tc_set_grad_enabled(false);
    tc_tensor *x1 = tc_from_data(tx, TC_UINT8, 4, (int64_t[]){1, 1, 28, 28}, NULL);
    tc_tensor *logits = x1 ? forward(m, x1) : NULL;
    int rc = logits ? 0 : fail("the forward");
    if (rc == 0 && tc_export_c(o->out, "mnist_infer", &logits, 1, &x1, 1) != TC_OK)
        rc = fail("tc_export_c(mnist_infer)");
    tc_release(logits), tc_release(x1);
    uint8_t *pred = malloc((size_t)n);
    int64_t right = 0;
    for (int64_t at = 0; rc == 0 && at < n; at += 1000) {
        int64_t b = n - at < 1000 ? n - at : 1000;
        int32_t got[1000];
        tc_tensor *x = tc_from_data(tx + at * PIXELS, TC_UINT8, 4, (int64_t[]){b, 1, 28, 28}, NULL);
        tc_tensor *l = x ? forward(m, x) : NULL, *p = l ? tc_argmax(l, 1, false) : NULL;
        if (!p || tc_to_host(p, got, sizeof(int32_t) * (size_t)b) != TC_OK) rc = fail("evaluating");
        for (int64_t i = 0; rc == 0 && i < b; i++) {
            pred[at + i] = (uint8_t)got[i];
            right += got[i] == ty[at + i];
        }
        tc_release(x), tc_release(l), tc_release(p);
    }
    if (rc == 0) {
        printf("library: test accuracy %.2f%% (%lld images)\n", 100.0 * (double)right / (double)n,
               (long long)n);
        rc = put(o, "test_x.u8", tx, (size_t)n * PIXELS) || put(o, "test_y.u8", ty, (size_t)n) ||
             put(o, "lib_pred.u8", pred, (size_t)n);
    }
    free(pred);
    tc_set_grad_enabled(was);
    for (int i = 0; i < 7; i++) tc_layer_set_training(m->L[i], true);
    return rc;
}

/* batch `step`'s images and labels, drawn as examples/mnist.c draws them */
static void draw(const uint8_t *x, const uint8_t *y, int64_t n, int batch, uint64_t *rng,
                 uint8_t *bx, int32_t *by) {
    for (int i = 0; i < batch; i++) {
        int64_t r = (int64_t)(splitmix64(rng) % (uint64_t)n);
        memcpy(bx + (size_t)i * PIXELS, x + r * PIXELS, PIXELS);
        by[i] = y[r];
    }
}

/* one library step on (bx, by); before the first, its export */
static int train_step(convnet *m, const options *o, const uint8_t *bx, const int32_t *by,
                      bool is_first, float *loss_out) {
    int64_t B = o->batch;
    tc_tensor *x = tc_from_data(bx, TC_UINT8, 4, (int64_t[]){B, 1, 28, 28}, NULL);
    tc_tensor *y = tc_from_data(by, TC_INT32, 1, (int64_t[]){B}, NULL);
    tc_tensor *logits = NULL, *loss = NULL, *outs[MAX_OUTS];
    int rc = x && y && tc_optimizer_zero_grad(m->opt) == TC_OK ? 0 : fail("the batch");
    if (rc == 0 && !((logits = forward(m, x)) && (loss = tc_cross_entropy(logits, y))))
        rc = fail("the forward");
    if (rc == 0 && tc_backward(loss) != TC_OK) rc = fail("tc_backward");
    int n = rc == 0 ? tc_optimizer_schedule_step(m->opt, outs + 1, MAX_OUTS - 5) : -1;
    if (rc == 0 && (n < 0 || n > MAX_OUTS - 5)) rc = fail("tc_optimizer_schedule_step");
    if (rc == 0) {
        outs[0] = loss;
        for (int k = 0; k < 4; k++) outs[1 + n + k] = m->bufs[k];
        tc_tensor *ins[2] = {x, y};
        if (is_first && tc_export_c(o->out, "mnist_train", outs, 1 + n + 4, ins, 2) != TC_OK)
            rc = fail("tc_export_c(mnist_train)");
        if (rc == 0 && (tc_realize(outs, 1 + n + 4) != TC_OK ||
                        tc_to_host(loss, loss_out, sizeof *loss_out) != TC_OK))
            rc = fail("the training step");
    }
    tc_release(x), tc_release(y), tc_release(logits), tc_release(loss);
    return rc;
}

/* training: the export, then --steps library steps on drawn batches */
static int export_train(convnet *m, const options *o, const uint8_t *x, const uint8_t *y,
                        int64_t n) {
    size_t B = (size_t)o->batch, S = (size_t)o->steps;
    uint8_t *bx = malloc(S * B * PIXELS);
    int32_t *by = malloc(S * B * sizeof *by);
    float *loss = malloc(S * sizeof *loss);
    int rc = bx && by && loss ? 0 : fail("allocating the batches");
    uint64_t rng = o->seed;
    for (size_t s = 0; rc == 0 && s < S; s++) {
        draw(x, y, n, o->batch, &rng, bx + s * B * PIXELS, by + s * B);
        rc = train_step(m, o, bx + s * B * PIXELS, by + s * B, s == 0, &loss[s]);
        if (rc == 0) printf("library step %zu: loss %.6f\n", s + 1, loss[s]);
    }
    if (rc == 0)
        rc = put(o, "train_x.u8", bx, S * B * PIXELS) || put(o, "train_y.i32", by, S * B * 4) ||
             put(o, "lib_loss.f32", loss, S * 4);
    free(bx), free(by), free(loss);
    return rc;
}

static int parse(int argc, char **argv, options *o) {
    *o = (options){NULL, ".", "/usr/share/datasets/fashion-mnist", 512, 10, 42, 0.001};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--weights")) o->weights = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--batch")) o->batch = atoi(v);
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--lr")) o->lr = atof(v);
        else argc = -1;
    }
    if (argc < 0 || argc % 2 == 0 || o->batch < 1 || o->steps < 1) {
        fprintf(stderr, "usage: export_mnist [--weights PATH] [--out DIR] [--data DIR] "
                        "[--batch B] [--steps N] [--seed S] [--lr X]\n");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv) {
    options o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    tc_mnist d;
    if (tc_mnist_load(o.data, "CPU", &d) != TC_OK) return fail("tc_mnist_load");
    uint8_t *tx = NULL, *ty = NULL, *x = NULL, *y = NULL;
    int64_t n_test = 0, n_train = 0;
    convnet m = {0};
    rc = read_split(d.test_images, d.test_labels, &tx, &ty, &n_test) ||
         read_split(d.train_images, d.train_labels, &x, &y, &n_train);
    tc_mnist_release(&d);
    if (rc == 0) rc = build(&m, &o);
    if (rc == 0) rc = export_infer(&m, &o, tx, ty, n_test);
    if (rc == 0) rc = export_train(&m, &o, x, y, n_train);
    if (rc == 0) printf("wrote %s/mnist_infer.c, %s/mnist_train.c and their data\n", o.out, o.out);
    convnet_free(&m);
    free(tx), free(ty), free(x), free(y);
    tc_shutdown();
    return rc;
}
