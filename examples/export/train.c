/* train.c - MNIST training with nothing of libtinyc: the Adam step that
 * export_mnist exported (DIR/mnist_train.c: the convnet's parameters, Adam's
 * state and BatchNorm's running statistics live in it) runs on the batches
 * export_mnist drew (DIR/train_x.u8, DIR/train_y.i32). Prints each step's
 * loss next to the library's (DIR/lib_loss.f32) and the time per step;
 * with THREADS > 1 the kernels' outer loops run on a small pthread pool
 * (pool.h) through mnist_train_parallel_for. Fails when the first step's loss (the
 * same weights, the same batch) differs from the library's by more than
 * 1e-4, relatively: after it the two runs may drift apart by rounding.
 * Build: cc -std=c11 -O2 -march=native -pthread -I DIR -o train train.c DIR/mnist_train.c -lm
 * Usage: train DIR [THREADS] */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "files.h"
#include "mnist_train.h"
#include "pool.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: train DIR [THREADS] (DIR written by export_mnist)\n");
        return 2;
    }
    size_t nx = 0, ny = 0, nl = 0;
    unsigned char *x = slurp("train", argv[1], "train_x.u8", &nx);
    unsigned char *y = slurp("train", argv[1], "train_y.i32", &ny);
    unsigned char *lib = slurp("train", argv[1], "lib_loss.f32", &nl);
    size_t steps = nl / 4;
    void *arena =
        aligned_alloc(MNIST_TRAIN_ARENA_ALIGN, MNIST_TRAIN_ARENA_BYTES + MNIST_TRAIN_ARENA_ALIGN);
    void *label = malloc(MNIST_TRAIN_INPUT1_BYTES + 1);
    if (!x || !y || !lib || !arena || !label || nx != steps * MNIST_TRAIN_INPUT0_BYTES ||
        ny != steps * MNIST_TRAIN_INPUT1_BYTES)
        return 1;
    if (pool_start(argc > 2 ? atoi(argv[2]) : 1) > 1) mnist_train_parallel_for = pool_for;
    void *outs[MNIST_TRAIN_N_OUTPUTS] = {NULL}; /* only the loss is copied out */
    float loss = 0, first_diff = 0;
    double t_steady = 0;
    for (size_t s = 0; s < steps; s++) {
        memcpy(label, y + s * MNIST_TRAIN_INPUT1_BYTES, MNIST_TRAIN_INPUT1_BYTES); /* aligned */
        const void *in[2] = {x + s * MNIST_TRAIN_INPUT0_BYTES, label};
        outs[0] = &loss;
        double t0 = now();
        if (mnist_train_run(arena, in, outs) != 0) return 1;
        double t = now() - t0;
        if (s > 0) t_steady += t;
        float want;
        memcpy(&want, lib + 4 * s, 4);
        float rel = fabsf(loss - want) / fabsf(want);
        if (s == 0) first_diff = rel;
        printf("step %zu: loss %.6f (library %.6f, relative difference %.1e) %.1f ms\n", s + 1,
               loss, want, rel, 1e3 * t);
    }
    if (steps > 1)
        printf("exported training step: %.1f ms per step after the first (%d threads)\n",
               1e3 * t_steady / (double)(steps - 1), pool.threads);
    pool_stop();
    free(x), free(y), free(lib), free(arena), free(label);
    return first_diff <= 1e-4f ? 0 : 1;
}
