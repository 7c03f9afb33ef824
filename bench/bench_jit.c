/* bench_jit.c - the cost of running a step through tc_jit: per-kernel
 * overhead of a replay (a chain of tiny kernels, so launch cost dominates)
 * next to running the same step eagerly (schedule + lower + render + cached
 * compile lookup each call), and next to a plain C loop doing the same math.
 * usage: build/bench/bench_jit [steps] */
#include "tinyc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { CHAIN = 32, N = 16 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CHAIN dependent kernels: x = (x.flip()*0.5 + 1).contiguous(); the flip
 * keeps each kernel from computing the next one's input in registers */
static tc_status step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    tc_tensor *x = tc_retain(in[0]);
    tc_tensor *half = tc_full(0, NULL, 0.5, TC_FLOAT32, NULL), *one = tc_full(0, NULL, 1.0, TC_FLOAT32, NULL);
    for (int i = 0; i < CHAIN && x; i++) {
        tc_tensor *f = tc_flip(x, 0, NULL), *m = tc_mul(f, half), *a = tc_add(m, one);
        tc_tensor *c = tc_contiguous(a);
        tc_release(x), tc_release(f), tc_release(m), tc_release(a);
        x = c;
    }
    tc_release(half), tc_release(one);
    out[0] = x;
    return x ? TC_OK : tc_last_status();
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    float data[N];
    for (int i = 0; i < N; i++) data[i] = (float)i;
    tc_tensor *x = tc_from_data(data, TC_FLOAT32, 1, (int64_t[]){N}, NULL), *out;
    tc_jit *j = tc_jit_new(step, NULL);
    for (int i = 0; i < 3; i++) { /* warm-up, capture, first replay */
        if (tc_jit_run(j, &x, 1, &out, 1) != TC_OK) return fprintf(stderr, "%s\n", tc_last_error()), 1;
        tc_release(out);
    }
    double t0 = now();
    for (int i = 0; i < steps; i++) {
        tc_jit_run(j, &x, 1, &out, 1);
        tc_release(out);
    }
    double jit = (now() - t0) / steps;
    t0 = now();
    for (int i = 0; i < steps / 10 + 1; i++) {
        step(NULL, &x, 1, &out, 1);
        tc_realize(&out, 1);
        tc_release(out);
    }
    double eager = (now() - t0) / (steps / 10 + 1);
    volatile float acc = 0;
    t0 = now();
    for (int i = 0; i < steps; i++) {
        float v[N];
        for (int k = 0; k < N; k++) v[k] = data[k];
        for (int c = 0; c < CHAIN; c++)
            for (int k = 0; k < N; k++) v[k] = v[k] * 0.5f + 1.0f;
        acc += v[0];
    }
    double plain = (now() - t0) / steps;
    /* the check: a replay's result next to the same math in plain C (the
     * flip reverses the vector each time) */
    float want[N], got[N], maxabs = -1; /* -1: no result */
    for (int k = 0; k < N; k++) want[k] = data[k];
    for (int c = 0; c < CHAIN; c++) {
        float v[N];
        for (int k = 0; k < N; k++) v[k] = want[N - 1 - k] * 0.5f + 1.0f;
        for (int k = 0; k < N; k++) want[k] = v[k];
    }
    if (tc_jit_run(j, &x, 1, &out, 1) == TC_OK && tc_to_host(out, got, sizeof got) == TC_OK) {
        maxabs = 0;
        for (int k = 0; k < N; k++) maxabs = fmaxf(maxabs, fabsf(got[k] - want[k]));
    }
    tc_release(out);
    int kernels = tc_jit_kernel_count(j);
    bool ok = maxabs >= 0 && maxabs <= 1e-5f;
    printf("step of %d kernels: jit replay %.3f ms (%.2f us/kernel), eager %.3f ms (%.2f us/kernel), "
           "plain C %.4f ms, check maxabs=%.2g(%s)\n",
           kernels, jit * 1e3, jit * 1e6 / kernels, eager * 1e3, eager * 1e6 / kernels, plain * 1e3,
           (double)maxabs, ok ? "ok" : "FAIL");
    tc_jit_free(j);
    tc_release(x);
    tc_shutdown();
    return ok ? 0 : 1;
}
