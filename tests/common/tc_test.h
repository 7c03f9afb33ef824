/* tc_test.h - helpers shared by the cmocka tests: numeric comparison that
 * prints the first mismatches and the max difference, and error assertions
 * that check both the status code and the message. */
#ifndef TC_TEST_H
#define TC_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tinyc.h"

/* true when |got-want| <= atol + rtol*|want| everywhere (NaN matches NaN, inf
 * matches the same inf); otherwise prints up to 8 mismatches, the max
 * difference and `what` to stderr */
bool tc_allclose_f32(const float *got, const float *want, int64_t n, double rtol, double atol,
                     const char *what);
/* the same for any dtype: both arrays are of dtype dt; ints/bools compare exactly */
bool tc_allclose(const void *got, const void *want, tc_dtype dt, int64_t n, double rtol,
                 double atol, const char *what);
/* fails the test unless the last error has `code` and its message contains `needle` */
void tc_assert_error(tc_status code, const char *needle, const char *file, int line);
#define assert_tc_error(code, needle) tc_assert_error((code), (needle), __FILE__, __LINE__)
/* reads a tensor into a new malloc'ed array (fails the test on error) */
void *tc_test_read(tc_tensor *t);
/* a tensor of the given shape filled from a fixed-seed LCG in [lo, hi) */
tc_tensor *tc_test_randn(int ndim, const int64_t *shape, uint64_t seed, float lo, float hi);
/* skips the test (saying why on stderr) where NVRTC cannot be loaded */
void tc_test_need_nvrtc(void);

/* Kernel-count check used by the schedule tests: asserts that realizing t
 * runs exactly `kernels` kernels (dumping the schedule when not), then
 * realizes it and compares the values with the reference evaluator. */
void tc_check_schedule(tc_tensor *t, int kernels, double rtol, double atol, const char *what);
/* the same for the n tensors ts realized together */
void tc_check_schedule_many(tc_tensor *const *ts, int n, int kernels, double rtol, double atol,
                            const char *what);
/* for each row {a, b, want} of cases: a + b of tensors of dtypes a and b has
 * dtype want (fails naming the three) */
void tc_test_check_promotion(const tc_dtype (*cases)[3], size_t n);

#endif
