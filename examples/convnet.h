/* convnet.h - tinygrad's beautiful_mnist convnet, the one model that
 * examples/mnist.c, examples/export_mnist.c, bench/bench_train_step.c,
 * bench/bench_export.c and tests/engine/test_export.c train and compare:
 *
 *   conv 1->32 5x5, relu, conv 32->32 5x5, relu, batchnorm, maxpool 2,
 *   conv 32->64 3x3, relu, conv 64->64 3x3, relu, batchnorm, maxpool 2,
 *   flatten 576, linear 576->10
 *
 * Header only (static functions), so each program links just libtinyc.
 * The caller seeds the weights (tc_manual_seed) before convnet_layers. */
#ifndef TINYC_EXAMPLES_CONVNET_H
#define TINYC_EXAMPLES_CONVNET_H

#include <stdbool.h>
#include <string.h>

#include <tinyc.h>

enum { CONVNET_LAYERS = 7, CONVNET_BUFFERS = 4, CONVNET_MAX_PARAMS = 16 };

/* creates the layers in forward order into L (device NULL: TC_DEVICE, else
 * the CPU); false with the error set and nothing left behind on failure */
static inline bool convnet_layers(tc_layer *L[CONVNET_LAYERS], const char *device) {
    L[0] = tc_nn_conv2d(1, 32, 5, 1, 0, true, device);
    L[1] = tc_nn_conv2d(32, 32, 5, 1, 0, true, device);
    L[2] = tc_nn_batchnorm2d(32, 1e-5, 0.1, device);
    L[3] = tc_nn_conv2d(32, 64, 3, 1, 0, true, device);
    L[4] = tc_nn_conv2d(64, 64, 3, 1, 0, true, device);
    L[5] = tc_nn_batchnorm2d(64, 1e-5, 0.1, device);
    L[6] = tc_nn_linear(576, 10, true, device);
    bool ok = true;
    for (int i = 0; i < CONVNET_LAYERS; i++) ok = ok && L[i];
    for (int i = 0; !ok && i < CONVNET_LAYERS; i++) tc_layer_free(L[i]), L[i] = NULL;
    return ok;
}

/* replaces *h by next (releasing the old one); false when next is NULL */
static inline bool convnet_then(tc_tensor **h, tc_tensor *next) {
    tc_release(*h);
    *h = next;
    return next != NULL;
}

/* logits (n,10) of images x (n,1,28,28) of any dtype (cast to float32);
 * NULL with the error set */
static inline tc_tensor *convnet_forward(tc_layer *const L[CONVNET_LAYERS], tc_tensor *x) {
    tc_tensor *h = tc_cast(x, TC_FLOAT32);
    bool ok = h != NULL;
    for (int i = 0; ok && i < 6; i++) /* after each batchnorm a maxpool, else a relu */
        ok = convnet_then(&h, tc_layer_forward(L[i], h)) &&
             convnet_then(&h, i == 2 || i == 5 ? tc_max_pool2d(h, 2, 2) : tc_relu(h));
    ok = ok && convnet_then(&h, tc_reshape(h, 2, (int64_t[]){tc_shape(x)[0], 576})) &&
         convnet_then(&h, tc_layer_forward(L[6], h));
    return ok ? h : NULL;
}

/* the convnet with Adam over its parameters */
typedef struct {
    tc_layer *L[CONVNET_LAYERS];       /* in forward order (owned) */
    tc_optimizer *opt;                 /* Adam, betas 0.9/0.999, eps 1e-8 (owned) */
    tc_tensor *bufs[CONVNET_BUFFERS];  /* BatchNorm running statistics (borrowed from L) */
} convnet;

/* the layers (after tc_manual_seed(seed)) and Adam at learning rate lr;
 * false with the error set and m cleared on failure */
static inline bool convnet_init(convnet *m, uint64_t seed, const char *device, double lr) {
    memset(m, 0, sizeof *m);
    tc_manual_seed(seed);
    if (!convnet_layers(m->L, device)) return false;
    tc_tensor *ps[CONVNET_MAX_PARAMS];
    int n = tc_nn_parameters(m->L, CONVNET_LAYERS, ps, CONVNET_MAX_PARAMS);
    tc_nn_buffers(m->L, CONVNET_LAYERS, m->bufs, CONVNET_BUFFERS);
    m->opt = n > 0 ? tc_adam(ps, n, lr, 0.9, 0.999, 1e-8) : NULL;
    if (m->opt) return true;
    for (int i = 0; i < CONVNET_LAYERS; i++) tc_layer_free(m->L[i]);
    memset(m, 0, sizeof *m);
    return false;
}

static inline void convnet_free(convnet *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < CONVNET_LAYERS; i++) tc_layer_free(m->L[i]);
    memset(m, 0, sizeof *m);
}

#endif
