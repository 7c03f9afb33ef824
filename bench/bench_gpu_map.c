/* bench_gpu_map.c - three kernels on a GPU device, each its own time in ms:
 *   triad   d = a*b + c over 16M floats (an elementwise map)
 *   colsum  the column sums of a (4096,4096) matrix: a grouped reduce over
 *           axis 0 (its lanes split the rows; with vector lanes a work-group
 *           sums 4 columns)
 *   matmul  (512,512) @ (512,512): a grouped reduce over the inner axis (with
 *           vector lanes a work-group computes 4 outputs of a row)
 *
 * Kernel times come from the engine's timing (TC_DEBUG=2 is set here: each
 * kernel is synchronized and timed, tc_counters.time_sum_s), so a figure is
 * the kernel alone, never a queued launch. One untimed run compiles; the
 * figure is the median of 9. Results are checked against the host (every
 * element). TC_NOOPT=1 gives the scalar-lane kernels (one element per lane)
 * to compare with the vector ones (4 per lane, float4).
 *
 * Usage: bench_gpu_map [DEVICE]   (default OPENCL; pocl is a CPU device, so
 * its figure is a sanity check, not a GPU's)
 * Prints "<case> <device> <ms> ms <GB/s> GB/s"; exit status 1 on an error
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

/* the median kernel time in ms of RUNS realizes of make(a, b, c) after one
 * untimed; the last result read into out (n floats) */
static double timed(tc_tensor *(*make)(tc_tensor *, tc_tensor *, tc_tensor *), tc_tensor *a,
                    tc_tensor *b, tc_tensor *c, float *out, int64_t n) {
    double t[RUNS];
    for (int r = -1; r < RUNS; r++) {
        tc_tensor *d = make(a, b, c);
        tc_counters before, after;
        tc_get_counters(&before);
        bool ok = d && tc_realize(&d, 1) == TC_OK;
        tc_get_counters(&after);
        if (r >= 0) t[r] = after.time_sum_s - before.time_sum_s;
        if (ok && r == RUNS - 1) ok = tc_to_host(d, out, sizeof(float) * (size_t)n) == TC_OK;
        tc_release(d);
        if (!ok) {
            fprintf(stderr, "bench_gpu_map: %s\n", tc_last_error());
            return -1;
        }
    }
    qsort(t, RUNS, sizeof *t, cmp_double);
    return t[RUNS / 2] * 1e3;
}

static tc_tensor *triad(tc_tensor *a, tc_tensor *b, tc_tensor *c) {
    tc_tensor *ab = tc_mul(a, b), *d = tc_add(ab, c);
    tc_release(ab);
    return d;
}

static tc_tensor *colsum(tc_tensor *a, tc_tensor *b, tc_tensor *c) {
    (void)b, (void)c;
    tc_tensor *m = tc_reshape(a, 2, (int64_t[]){4096, 4096});
    int ax = 0;
    tc_tensor *s = tc_sum(m, 1, &ax, false);
    tc_release(m);
    return s;
}

static tc_tensor *matmul(tc_tensor *a, tc_tensor *b, tc_tensor *c) {
    (void)c;
    tc_tensor *x = tc_shrink(a, (int64_t[]){0, 512 * 512}),
              *y = tc_shrink(b, (int64_t[]){0, 512 * 512});
    tc_tensor *xm = tc_reshape(x, 2, (int64_t[]){512, 512}),
              *ym = tc_reshape(y, 2, (int64_t[]){512, 512});
    tc_tensor *d = tc_matmul(xm, ym);
    tc_release(x), tc_release(y), tc_release(xm), tc_release(ym);
    return d;
}

int main(int argc, char **argv) {
    const char *dev = argc > 1 ? argv[1] : "OPENCL";
    setenv("TC_DEBUG", "2", 0); /* kernel timing; a higher TC_DEBUG also prints source */
    float *ha = malloc(sizeof(float) * N), *hb = malloc(sizeof(float) * N),
          *hc = malloc(sizeof(float) * N), *hd = malloc(sizeof(float) * N);
    if (!ha || !hb || !hc || !hd) return 1;
    tc_tensor *a = filled(ha, 0.002f, dev), *b = filled(hb, 0.003f, dev),
              *c = filled(hc, 0.001f, dev);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_gpu_map: %s\n", tc_last_error());
        return 1;
    }
    int failed = 0;
    double ms = timed(triad, a, b, c, hd, N);
    failed |= ms < 0;
    for (int64_t i = 0; i < N && !failed; i++) {
        float want = ha[i] * hb[i] + hc[i];
        if (fabsf(hd[i] - want) > 1e-6f * (1 + fabsf(want))) {
            fprintf(stderr, "bench_gpu_map: triad[%lld] = %g, want %g\n", (long long)i, hd[i],
                    want);
            failed = 1;
        }
    }
    if (!failed) printf("triad %s %.3f ms %.2f GB/s\n", dev, ms, 16.0 * N / (ms * 1e-3) * 1e-9);
    ms = failed ? -1 : timed(colsum, a, b, c, hd, 4096);
    failed |= ms < 0;
    for (int64_t j = 0; j < 4096 && !failed; j++) {
        double want = 0;
        for (int64_t i = 0; i < 4096; i++) want += ha[i * 4096 + j];
        if (fabs(hd[j] - want) > 1e-4 * (1 + fabs(want))) {
            fprintf(stderr, "bench_gpu_map: colsum[%lld] = %g, want %g\n", (long long)j, hd[j],
                    want);
            failed = 1;
        }
    }
    if (!failed) printf("colsum %s %.3f ms %.2f GB/s\n", dev, ms, 4.0 * N / (ms * 1e-3) * 1e-9);
    ms = failed ? -1 : timed(matmul, a, b, c, hd, 512 * 512);
    failed |= ms < 0;
    for (int64_t i = 0; i < 512 && !failed; i++) {
        for (int64_t j = 0; j < 512 && !failed; j++) {
            double want = 0;
            for (int64_t k = 0; k < 512; k++) want += (double)ha[i * 512 + k] * hb[k * 512 + j];
            if (fabs(hd[i * 512 + j] - want) > 1e-4 * (1 + fabs(want))) {
                fprintf(stderr, "bench_gpu_map: matmul[%lld,%lld] = %g, want %g\n", (long long)i,
                        (long long)j, hd[i * 512 + j], want);
                failed = 1;
            }
        }
    }
    if (!failed)
        printf("matmul %s %.3f ms %.2f GFLOPS\n", dev, ms,
               2.0 * 512 * 512 * 512 / (ms * 1e-3) * 1e-9);
    tc_release(a), tc_release(b), tc_release(c);
    free(ha), free(hb), free(hc), free(hd);
    tc_shutdown();
    return failed;
}
