/* bench_gpu_map.c - an elementwise kernel on a GPU device: d = a*b + c over
 * 16M floats (the triad), the kernel's own time in ms.
 *
 * Kernel times come from the engine's timing (TC_DEBUG=2 is set here: each
 * kernel is synchronized and timed, tc_counters.time_sum_s), so a figure is
 * the kernel alone, never a queued launch. One untimed run compiles; the
 * figure is the median of 9. The result is checked against the same sum on
 * the host (every element). TC_NOOPT=1 gives the scalar-lane kernel (one
 * element per lane) to compare with the vector one (4 per lane, float4).
 *
 * Usage: bench_gpu_map [DEVICE]   (default OPENCL; pocl is a CPU device, so
 * its figure is a sanity check, not a GPU's)
 * Prints "triad <device> <ms> ms <GB/s> GB/s"; exit status 1 on an error
 * or a wrong result. */
#include "tinyc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 1 << 24, RUNS = 9 };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static tc_tensor *filled(float *h, float scale, const char *dev) {
    for (int64_t i = 0; i < N; i++) h[i] = (float)((i * 7919) % 1000) * scale - 1.0f;
    return tc_from_data(h, TC_FLOAT32, 1, (int64_t[]){N}, dev);
}

int main(int argc, char **argv) {
    const char *dev = argc > 1 ? argv[1] : "OPENCL";
    setenv("TC_DEBUG", "2", 0); /* kernel timing; a higher TC_DEBUG also prints source */
    float *ha = malloc(sizeof(float) * N), *hb = malloc(sizeof(float) * N),
          *hc = malloc(sizeof(float) * N), *hd = malloc(sizeof(float) * N);
    if (!ha || !hb || !hc || !hd) return 1;
    tc_tensor *a = filled(ha, 0.002f, dev), *b = filled(hb, 0.003f, dev), *c = filled(hc, 0.001f, dev);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gpu_map: %s\n", tc_last_error());
        return 1;
    }
    double t[RUNS];
    int failed = 0;
    for (int r = -1; r < RUNS && !failed; r++) {
        tc_tensor *ab = tc_mul(a, b), *d = tc_add(ab, c);
        tc_counters before, after;
        tc_get_counters(&before);
        failed |= !d || tc_realize(&d, 1) != TC_OK;
        tc_get_counters(&after);
        if (r >= 0) t[r] = after.time_sum_s - before.time_sum_s;
        if (r == RUNS - 1 && !failed) failed |= tc_to_host(d, hd, sizeof(float) * N) != TC_OK;
        tc_release(ab), tc_release(d);
    }
    if (failed) fprintf(stderr, "bench_gpu_map: %s\n", tc_last_error());
    for (int64_t i = 0; i < N && !failed; i++) {
        float want = ha[i] * hb[i] + hc[i];
        if (fabsf(hd[i] - want) > 1e-6f * (1 + fabsf(want))) {
            fprintf(stderr, "bench_gpu_map: d[%lld] = %g, want %g\n", (long long)i, hd[i], want);
            failed = 1;
        }
    }
    if (!failed) {
        qsort(t, RUNS, sizeof *t, cmp_double);
        double ms = t[RUNS / 2] * 1e3;
        printf("triad %s %.3f ms %.2f GB/s\n", dev, ms, 16.0 * N / (ms * 1e-3) * 1e-9);
    }
    tc_release(a), tc_release(b), tc_release(c);
    free(ha), free(hb), free(hc), free(hd);
    tc_shutdown();
    return failed;
}
