/* bench_pool.c - what the CPU thread pool costs a caller that realizes one
 * kernel now and then: one N x N matmul realized CALLS times with a pause
 * of GAP microseconds between calls, for each gap asked; prints the median
 * and the mean of the first 20 timed calls (the pool just started) in
 * microseconds. Run it at TC_THREADS=1 and =2 (or more) to see what the
 * workers add: a worker that sleeps between calls wakes late, and may wake
 * on the caller's CPU (src/runtime/cpu.c: the pool's polling and go_home).
 *
 *   build/bench/bench_pool [N (256)] [CALLS (300)] [GAPS (0,200,1000,5000)]
 *
 * Each gap runs in this one process, in order; the first two calls of
 * each are not timed (the first builds the kernel). */
#include "tinyc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pause_us(long us) {
    if (us <= 0) return;
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 256, calls = argc > 2 ? atol(argv[2]) : 300;
    const char *gaps = argc > 3 ? argv[3] : "0,200,1000,5000";
    if (n < 1 || calls < 21) {
        fprintf(stderr, "usage: bench_pool [N >= 1] [CALLS >= 21] [GAPS, comma-separated microseconds]\n");
        return 2;
    }
    int64_t shape[2] = {n, n};
    tc_tensor *ab[2] = {tc_randn(2, shape, TC_FLOAT32, NULL), tc_randn(2, shape, TC_FLOAT32, NULL)};
    double *t = malloc((size_t)calls * sizeof *t);
    if (!ab[0] || !ab[1] || !t || tc_realize(ab, 2) != TC_OK) {
        fprintf(stderr, "bench_pool: setup failed: %s\n", tc_last_error());
        return 1;
    }
    const char *threads = getenv("TC_THREADS");
    printf("matmul %ldx%ld, %ld calls per gap, TC_THREADS=%s\n", n, n, calls, threads ? threads : "(cores)");
    printf("gap_us median_us first20_mean_us\n");
    int failed = 0;
    for (const char *g = gaps; *g && !failed;) {
        long gap = strtol(g, NULL, 10);
        for (long i = -2; i < calls && !failed; i++) {
            tc_tensor *c = tc_matmul(ab[0], ab[1]);
            double t0 = now();
            failed = !c || tc_realize(&c, 1) != TC_OK;
            if (i >= 0) t[i] = now() - t0;
            tc_release(c);
            pause_us(gap);
        }
        if (failed) break;
        double first = 0;
        for (int i = 0; i < 20; i++) first += t[i] / 20;
        qsort(t, (size_t)calls, sizeof *t, by_value);
        printf("%ld %.1f %.1f\n", gap, t[calls / 2] * 1e6, first * 1e6);
        g = strchr(g, ',');
        g = g ? g + 1 : "";
    }
    if (failed) fprintf(stderr, "bench_pool: a realize failed: %s\n", tc_last_error());
    free(t);
    tc_release(ab[0]), tc_release(ab[1]);
    return failed;
}
