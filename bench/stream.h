/* stream.h - plain C STREAM-style loops, the peer of bench_ops' elementwise
 * and sum rows (stream.c, compiled with the CPU runtime's flags). */
#ifndef TC_BENCH_STREAM_H
#define TC_BENCH_STREAM_H

#include <stdint.h>

/* d[i] = a[i]*b[i] + c[i] for i < n, on `threads` threads */
void stream_triad(float *d, const float *a, const float *b, const float *c, int64_t n, int threads);
/* the sum of a[0..n-1] on `threads` threads */
double stream_sum(const float *a, int64_t n, int threads);
/* the compiler flags stream.c was built with (set by CMake) */
extern const char stream_flags[];

#endif
