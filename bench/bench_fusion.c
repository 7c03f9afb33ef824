/* bench_fusion.c - what fusion buys: softmax, log_softmax, layernorm and std
 * over the rows of a (4096,1024) float32 matrix, fused (one kernel each) and
 * with TC_NOFUSE=1 (one kernel per reduce), in ms and GB/s of the minimum
 * traffic (read x once, write the result once). Each result is checked
 * against the other mode before timing. Prints one line per case:
 *   name kernels_fused kernels_nofuse ms_fused ms_nofuse gbs_fused gbs_nofuse
 * bench/fusion.sh adds PyTorch CPU measured in the same run. */
#include "tinyc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int64_t N = 4096, D = 1024;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef tc_tensor *(*build_fn)(tc_tensor *x);

static tc_tensor *drop2(tc_tensor *keep, tc_tensor *a, tc_tensor *b) {
    tc_release(a);
    tc_release(b);
    return keep;
}

static tc_tensor *softmax(tc_tensor *x) {
    int ax = -1;
    tc_tensor *m = tc_max(x, 1, &ax, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &ax, true), *y = tc_div(e, s);
    tc_release(m), tc_release(d);
    return drop2(y, e, s);
}

static tc_tensor *log_softmax(tc_tensor *x) {
    int ax = -1;
    tc_tensor *m = tc_max(x, 1, &ax, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &ax, true), *l = tc_log(s), *y = tc_sub(d, l);
    tc_release(m), tc_release(d), tc_release(e);
    return drop2(y, s, l);
}

static tc_tensor *layernorm(tc_tensor *x) {
    int ax = -1;
    tc_tensor *mu = tc_mean(x, 1, &ax, true), *d = tc_sub(x, mu), *sq = tc_square(d);
    tc_tensor *var = tc_mean(sq, 1, &ax, true), *eps = tc_full(0, NULL, 1e-5, TC_FLOAT32, NULL);
    tc_tensor *ve = tc_add(var, eps), *sd = tc_sqrt(ve), *y = tc_div(d, sd);
    tc_release(mu), tc_release(d), tc_release(sq), tc_release(var), tc_release(eps);
    return drop2(y, ve, sd);
}

static tc_tensor *std_rows(tc_tensor *x) {
    int ax = -1;
    return tc_std(x, 1, &ax, false, 1);
}

/* runs f(x) realized `reps` times; returns the best time, writes the result */
static double run(build_fn f, tc_tensor *x, int reps, float *out, size_t nbytes, int *kernels) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        tc_tensor *y = f(x);
        if (!y) return -1;
        *kernels = tc_schedule_kernel_count(&y, 1);
        double t0 = now();
        if (tc_realize(&y, 1) != TC_OK) return -1;
        double dt = now() - t0;
        if (r > 0 && dt < best) best = dt; /* the first run compiles */
        if (r == 0 && tc_to_host(y, out, nbytes) != TC_OK) return -1;
        tc_release(y);
    }
    return best;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 10;
    int64_t shape[2] = {N, D};
    float *data = malloc(sizeof(float) * (size_t)(N * D));
    for (int64_t i = 0; i < N * D; i++) data[i] = (float)sin((double)i * 0.37) * 3.0f;
    tc_tensor *x = tc_from_data(data, TC_FLOAT32, 2, shape, NULL);
    const struct {
        const char *name;
        build_fn f;
        int64_t out_elems;
    } cases[] = {{"softmax", softmax, N * D},
                 {"log_softmax", log_softmax, N * D},
                 {"layernorm", layernorm, N * D},
                 {"std", std_rows, N}};
    float *a = malloc(sizeof(float) * (size_t)(N * D)), *b = malloc(sizeof(float) * (size_t)(N * D));
    int status = 0;
    printf("%-12s %8s %8s %10s %10s %9s %9s\n", "case", "k_fused", "k_nofuse", "ms_fused",
           "ms_nofuse", "GB/s_f", "GB/s_nf");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t nbytes = sizeof(float) * (size_t)cases[c].out_elems;
        int kf = 0, kn = 0;
        tc_set_flag("TC_NOFUSE", 0);
        double tf = run(cases[c].f, x, reps, a, nbytes, &kf);
        tc_set_flag("TC_NOFUSE", 1);
        double tn = run(cases[c].f, x, reps, b, nbytes, &kn);
        tc_set_flag("TC_NOFUSE", 0);
        if (tf < 0 || tn < 0) {
            fprintf(stderr, "%s failed: %s\n", cases[c].name, tc_last_error());
            return 1;
        }
        double maxdiff = 0;
        for (int64_t i = 0; i < cases[c].out_elems; i++) maxdiff = fmax(maxdiff, fabs(a[i] - b[i]));
        if (maxdiff > 1e-4) {
            fprintf(stderr, "%s: fused and unfused differ by %g\n", cases[c].name, maxdiff);
            status = 1;
        }
        double bytes = (double)(N * D * 4 + cases[c].out_elems * 4);
        printf("%-12s %8d %8d %10.3f %10.3f %9.2f %9.2f\n", cases[c].name, kf, kn, tf * 1e3, tn * 1e3,
               bytes / tf * 1e-9, bytes / tn * 1e-9);
    }
    tc_release(x);
    free(data), free(a), free(b);
    tc_shutdown();
    return status;
}
