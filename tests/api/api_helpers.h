/* api_helpers.h - small helpers shared by the tests/api executables: literal
 * shapes, tensors from literal arrays, shape/dtype checks and value reads.
 * Uses only the public API (tinyc.h) and tests/common/tc_test.h. */
#ifndef TC_API_HELPERS_H
#define TC_API_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tc_test.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define NDIM(...)  ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define AXES(...)  ((const int[]){__VA_ARGS__})
#define COUNT(arr) ((int64_t)(sizeof(arr) / sizeof((arr)[0])))

/* every test ends with tc_shutdown(): the leak checker then sees nothing */
static inline int shutdown_teardown(void **state) {
    (void)state;
    tc_shutdown();
    return 0;
}
#define TEST(fn) cmocka_unit_test_teardown(fn, shutdown_teardown)

/* a tensor of dtype dt from data (fails the test on error) */
static inline tc_tensor *from(const void *data, tc_dtype dt, int ndim, const int64_t *shape) {
    tc_tensor *t = tc_from_data(data, dt, ndim, shape, NULL);
    if (!t) fprintf(stderr, "tc_from_data failed: %s\n", tc_last_error());
    assert_non_null(t);
    return t;
}

static inline tc_tensor *f32(int ndim, const int64_t *shape, const float *data) {
    return from(data, TC_FLOAT32, ndim, shape);
}

/* a scalar (0-d) tensor */
static inline tc_tensor *scalar(double v, tc_dtype dt) {
    tc_tensor *t = tc_full(0, NULL, v, dt, NULL);
    assert_non_null(t);
    return t;
}

/* asserts t is non-NULL with this dtype and shape */
static inline void check_meta(const tc_tensor *t, tc_dtype dt, int ndim, const int64_t *shape) {
    if (!t) fprintf(stderr, "NULL tensor: %s\n", tc_last_error());
    assert_non_null(t);
    assert_int_equal(tc_get_dtype(t), dt);
    assert_int_equal(tc_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tc_shape(t)[i], shape[i]);
}

/* t's values (any dtype) equal `want` (same dtype) within rtol/atol; releases t */
static inline void expect_values(tc_tensor *t, const void *want, int64_t n, double rtol,
                                 double atol, const char *what) {
    assert_non_null(t);
    assert_int_equal(tc_numel(t), n);
    void *got = tc_test_read(t);
    bool ok = tc_allclose(got, want, tc_get_dtype(t), n, rtol, atol, what);
    free(got);
    tc_release(t);
    assert_true(ok);
}

/* t (float32) equals want within rtol/atol; releases t */
static inline void expect_f32(tc_tensor *t, const float *want, int64_t n, double rtol, double atol,
                              const char *what) {
    assert_non_null(t);
    assert_int_equal(tc_get_dtype(t), TC_FLOAT32);
    expect_values(t, want, n, rtol, atol, what);
}

/* reads element 0 of t as double (any dtype) without releasing it */
static inline double first_value(tc_tensor *t) {
    void *p = tc_test_read(t);
    double v = 0;
    switch (tc_get_dtype(t)) {
    case TC_FLOAT32: v = ((float *)p)[0]; break;
    case TC_INT32: v = ((int32_t *)p)[0]; break;
    case TC_INT64: v = (double)((int64_t *)p)[0]; break;
    case TC_UINT8:
    case TC_BOOL: v = ((uint8_t *)p)[0]; break;
    case TC_INT8: v = ((int8_t *)p)[0]; break;
    case TC_INT16: v = ((int16_t *)p)[0]; break;
    case TC_UINT16: v = ((uint16_t *)p)[0]; break;
    case TC_UINT32: v = ((uint32_t *)p)[0]; break;
    case TC_FLOAT64: v = ((double *)p)[0]; break;
    case TC_UINT64: v = (double)((uint64_t *)p)[0]; break;
    case TC_BFLOAT16: {
        uint32_t bits = (uint32_t)((uint16_t *)p)[0] << 16;
        float f;
        memcpy(&f, &bits, 4);
        v = f;
        break;
    }
    case TC_FLOAT16:
    case TC_DTYPE_COUNT: fail_msg("first_value: unsupported dtype"); break;
    }
    free(p);
    return v;
}

#endif
