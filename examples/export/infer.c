/* infer.c - MNIST inference with nothing of libtinyc: the convnet that
 * export_mnist exported (DIR/mnist_infer.c, weights embedded) classifies the
 * test set one image at a time. Prints the accuracy, how many predictions
 * equal the library's (DIR/lib_pred.u8) and the latency per image; fails
 * when more than 1 in 1000 differ (another compiler's rounding may flip a
 * near tie, no more).
 * Build: cc -std=c11 -O2 -march=native -I DIR -o infer infer.c DIR/mnist_infer.c -lm
 * Usage: infer DIR */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "files.h"
#include "mnist_infer.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: infer DIR (written by export_mnist)\n");
        return 2;
    }
    size_t nx = 0, ny = 0, np = 0;
    unsigned char *x = slurp("infer", argv[1], "test_x.u8", &nx);
    unsigned char *y = slurp("infer", argv[1], "test_y.u8", &ny);
    unsigned char *lib = slurp("infer", argv[1], "lib_pred.u8", &np);
    void *arena =
        aligned_alloc(MNIST_INFER_ARENA_ALIGN, MNIST_INFER_ARENA_BYTES + MNIST_INFER_ARENA_ALIGN);
    if (!x || !y || !lib || !arena || nx != ny * MNIST_INFER_INPUT0_BYTES || np != ny) return 1;
    size_t n = ny, right = 0, same = 0;
    double best = 1e9, t_all = now();
    for (size_t i = 0; i < n; i++) {
        float logits[10];
        const void *in[1] = {x + i * MNIST_INFER_INPUT0_BYTES};
        void *out[1] = {logits};
        double t0 = now();
        if (mnist_infer_run(arena, in, out) != 0) return 1;
        double t = now() - t0;
        best = t < best ? t : best;
        int k = 0;
        for (int c = 1; c < 10; c++) k = logits[c] > logits[k] ? c : k;
        right += k == y[i];
        same += k == lib[i];
    }
    t_all = now() - t_all;
    printf("exported inference: test accuracy %.2f%%; %zu of %zu predictions as the library's\n",
           100.0 * (double)right / (double)n, same, n);
    printf("latency at batch 1: %.3f ms mean, %.3f ms best (one thread)\n", 1e3 * t_all / (double)n,
           1e3 * best);
    free(x), free(y), free(lib), free(arena);
    return same * 1000 >= n * 999 ? 0 : 1;
}
