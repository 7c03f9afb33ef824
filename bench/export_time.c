/* export_time.c - times the code bench_export exported (bench/export.sh
 * builds it with the CPU runtime's compiler flags; nothing of libtinyc is
 * linked): the training step (DIR/bench_step.c) on the fixed batch, two
 * warm-up steps then N timed, and the batch-1 inference (DIR/bench_infer.c),
 * 10 warm-up runs then 20*N timed; THREADS > 1 runs the kernels' outer loops
 * on examples/export/pool.h's pool through the hooks.
 * Prints "export_step batch ms" and "export_infer 1 ms" lines.
 * Usage: export_time DIR [THREADS] [N] */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_infer.h"
#include "bench_step.h"
#include "../examples/export/pool.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *slurp(const char *dir, const char *name, size_t want) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *p = malloc(want + 1);
    if (!f || !p || fread(p, 1, want, f) != want) {
        fprintf(stderr, "export_time: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: export_time DIR [THREADS] [N]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 1, n = argc > 3 ? atoi(argv[3]) : 10;
    if (pool_start(threads) > 1) bench_step_parallel_for = bench_infer_parallel_for = pool_for;
    void *x = slurp(argv[1], "x.u8", BENCH_STEP_INPUT0_BYTES);
    void *y = slurp(argv[1], "y.i32", BENCH_STEP_INPUT1_BYTES);
    /* aligned as the headers advise (sizes are multiples of it; + 1 block: never 0) */
    void *arena =
        aligned_alloc(BENCH_STEP_ARENA_ALIGN, BENCH_STEP_ARENA_BYTES + BENCH_STEP_ARENA_ALIGN);
    void *arena1 =
        aligned_alloc(BENCH_INFER_ARENA_ALIGN, BENCH_INFER_ARENA_BYTES + BENCH_INFER_ARENA_ALIGN);
    if (!arena || !arena1) return 1;
    const void *in[2] = {x, y};
    float loss = 0, logits[10];
    void *outs[BENCH_STEP_N_OUTPUTS] = {&loss}, *outs1[1] = {logits};
    double t0 = 0;
    for (int i = 0; i < n + 2; i++) {
        if (i == 2) t0 = now();
        if (bench_step_run(arena, in, outs) != 0) return 1;
    }
    printf("export_step %d %.2f\n", BENCH_STEP_INPUT1_BYTES / 4, 1e3 * (now() - t0) / n);
    unsigned char img[784];
    for (int i = 0; i < 784; i++) img[i] = (unsigned char)(i * 37 % 251);
    const void *in1[1] = {img};
    for (int i = 0; i < 10 + 20 * n; i++) {
        if (i == 10) t0 = now();
        if (bench_infer_run(arena1, in1, outs1) != 0) return 1;
    }
    printf("export_infer 1 %.3f\n", 1e3 * (now() - t0) / (20 * n));
    pool_stop();
    free(x), free(y), free(arena), free(arena1);
    return 0;
}
