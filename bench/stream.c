/* stream.c - the plain C peer of bench_ops' elementwise and sum rows: a
 * STREAM-style loop over float arrays, split in equal contiguous parts over
 * `threads` pthreads started per call (as the CPU runtime starts its own).
 * CMake compiles this file with the CPU runtime's compiler flags (parsed
 * from src/runtime/cpu_cc.c), so the peer gets what the compiler gives our
 * kernels and nothing more: no -ffast-math, no hand-written intrinsics. */
#include "stream.h"

#include <pthread.h>

enum { LANES = 16, MAX_THREADS = 64 }; /* independent partial sums per thread */

typedef struct {
    float *d;              /* triad: output, or NULL for sum */
    const float *a, *b, *c; /* triad: inputs; sum: a */
    int64_t lo, hi;        /* this part: [lo, hi) */
    double sum;            /* sum: this part's result */
} part;

/* d = a*b + c over [lo, hi) */
static void *triad_part(void *arg) {
    part *p = arg;
    float *restrict d = p->d;
    const float *restrict a = p->a, *restrict b = p->b, *restrict c = p->c;
    for (int64_t i = p->lo; i < p->hi; i++) d[i] = a[i] * b[i] + c[i];
    return NULL;
}

/* the sum of a[lo, hi) in LANES float accumulators (so the adds do not wait
 * on one another), combined at the end */
static void *sum_part(void *arg) {
    part *p = arg;
    const float *restrict a = p->a;
    float acc[LANES] = {0};
    int64_t i = p->lo;
    for (; i + LANES <= p->hi; i += LANES)
        for (int k = 0; k < LANES; k++) acc[k] += a[i + k];
    for (; i < p->hi; i++) acc[0] += a[i];
    double s = 0;
    for (int k = 0; k < LANES; k++) s += acc[k];
    p->sum = s;
    return NULL;
}

/* runs fn on `threads` parts of [0, n); part 0 on the calling thread */
static double split(void *(*fn)(void *), part proto, int64_t n, int threads) {
    part parts[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int t = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    for (int k = 0; k < t; k++) {
        parts[k] = proto;
        parts[k].lo = n * k / t;
        parts[k].hi = n * (k + 1) / t;
    }
    int started = 1;
    for (int k = 1; k < t; k++, started++)
        if (pthread_create(&tid[k], NULL, fn, &parts[k]) != 0) break;
    for (int k = started; k < t; k++) fn(&parts[k]); /* no thread: run it here */
    fn(&parts[0]);
    double s = 0;
    for (int k = 1; k < started; k++) pthread_join(tid[k], NULL);
    for (int k = 0; k < t; k++) s += parts[k].sum;
    return s;
}

void stream_triad(float *d, const float *a, const float *b, const float *c, int64_t n, int threads) {
    split(triad_part, (part){.d = d, .a = a, .b = b, .c = c}, n, threads);
}

double stream_sum(const float *a, int64_t n, int threads) {
    return split(sum_part, (part){.a = a}, n, threads);
}

#ifndef STREAM_FLAGS
#define STREAM_FLAGS "(not given)"
#endif
const char stream_flags[] = STREAM_FLAGS;
