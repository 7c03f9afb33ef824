/* test_errors.c - every user mistake the front end checks: NULL handles and
 * pointers, bad shapes, axes, dtypes, values and devices. Each failing call
 * must return NULL / -1 / a nonzero status with the right code and a message
 * naming the public call and the values, and must change nothing (the inputs
 * still read the same afterwards). Leaks are caught by the sanitizer build.
 * Public API only. */
#include <math.h>

#include "api_helpers.h"

typedef tc_tensor *(*binary_fn)(tc_tensor *, tc_tensor *);
typedef tc_tensor *(*unary_fn)(tc_tensor *);

static const struct {
    const char *name;
    binary_fn fn;
} binaries[] = {
    {"tc_add", tc_add},
    {"tc_sub", tc_sub},
    {"tc_mul", tc_mul},
    {"tc_div", tc_div},
    {"tc_idiv", tc_idiv},
    {"tc_mod", tc_mod},
    {"tc_maximum", tc_maximum},
    {"tc_minimum", tc_minimum},
    {"tc_pow", tc_pow},
    {"tc_lt", tc_lt},
    {"tc_gt", tc_gt},
    {"tc_le", tc_le},
    {"tc_ge", tc_ge},
    {"tc_eq", tc_eq},
    {"tc_ne", tc_ne},
    {"tc_logical_and", tc_logical_and},
    {"tc_logical_or", tc_logical_or},
    {"tc_logical_xor", tc_logical_xor},
    {"tc_lshift", tc_lshift},
    {"tc_rshift", tc_rshift},
};

static const struct {
    const char *name;
    unary_fn fn;
} unaries[] = {
    {"tc_neg", tc_neg},
    {"tc_exp", tc_exp},
    {"tc_log", tc_log},
    {"tc_exp2", tc_exp2},
    {"tc_log2", tc_log2},
    {"tc_sqrt", tc_sqrt},
    {"tc_sin", tc_sin},
    {"tc_cos", tc_cos},
    {"tc_relu", tc_relu},
    {"tc_sigmoid", tc_sigmoid},
    {"tc_tanh", tc_tanh},
    {"tc_recip", tc_recip},
    {"tc_abs", tc_abs},
    {"tc_square", tc_square},
    {"tc_logical_not", tc_logical_not},
    {"tc_contiguous", tc_contiguous},
    {"tc_trunc", tc_trunc},
    {"tc_floor", tc_floor},
    {"tc_ceil", tc_ceil},
    {"tc_round", tc_round},
    {"tc_sign", tc_sign},
    {"tc_sinh", tc_sinh},
    {"tc_cosh", tc_cosh},
    {"tc_asinh", tc_asinh},
    {"tc_acosh", tc_acosh},
    {"tc_atanh", tc_atanh},
    {"tc_softsign", tc_softsign},
    {"tc_hardswish", tc_hardswish},
    {"tc_mish", tc_mish},
    {"tc_quick_gelu", tc_quick_gelu},
};

static void expect_unchanged(tc_tensor *t, const float *want, int64_t n) {
    void *got = tc_test_read(t);
    bool ok = tc_allclose(got, want, TC_FLOAT32, n, 0, 0, "input after a failed call");
    free(got);
    assert_true(ok);
}

static void test_null_handles(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(1, SHAPE(2), TC_INT32, NULL);
    char msg[128];
    for (int i = 0; i < (int)COUNT(binaries); i++) {
        assert_null(binaries[i].fn(NULL, a));
        snprintf(msg, sizeof msg, "%s: tensor a is NULL", binaries[i].name);
        assert_tc_error(TC_ERR_INVALID, msg);
        assert_null(binaries[i].fn(a, NULL));
        snprintf(msg, sizeof msg, "%s: tensor b is NULL", binaries[i].name);
        assert_tc_error(TC_ERR_INVALID, msg);
    }
    for (int i = 0; i < (int)COUNT(unaries); i++) {
        assert_null(unaries[i].fn(NULL));
        snprintf(msg, sizeof msg, "%s: tensor a is NULL", unaries[i].name);
        assert_tc_error(TC_ERR_INVALID, msg);
    }
    assert_null(tc_where(NULL, a, a));
    assert_tc_error(TC_ERR_INVALID, "tc_where: tensor cond is NULL");
    assert_null(tc_where(a, a, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_where: tensor b is NULL");
    assert_null(tc_cast(NULL, TC_INT32));
    assert_tc_error(TC_ERR_INVALID, "tc_cast: tensor a is NULL");
    assert_null(tc_full_like(NULL, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_full_like: tensor a is NULL");
    assert_null(tc_sum(NULL, 0, NULL, false));
    assert_tc_error(TC_ERR_INVALID, "tc_sum: tensor a is NULL");
    assert_null(tc_std(NULL, 0, NULL, false, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_std: tensor a is NULL");
    assert_null(tc_reshape(NULL, 1, SHAPE(2)));
    assert_tc_error(TC_ERR_INVALID, "tc_reshape: tensor a is NULL");
    assert_null(tc_permute(NULL, AXES(0)));
    assert_tc_error(TC_ERR_INVALID, "tc_permute: tensor a is NULL");
    assert_null(tc_transpose(NULL, 0, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_transpose: tensor a is NULL");
    assert_null(tc_expand(NULL, 1, SHAPE(2)));
    assert_tc_error(TC_ERR_INVALID, "tc_expand: tensor a is NULL");
    assert_null(tc_pad(NULL, SHAPE(0, 0)));
    assert_tc_error(TC_ERR_INVALID, "tc_pad: tensor a is NULL");
    assert_null(tc_shrink(NULL, SHAPE(0, 0)));
    assert_tc_error(TC_ERR_INVALID, "tc_shrink: tensor a is NULL");
    assert_null(tc_flip(NULL, 0, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_flip: tensor a is NULL");
    assert_int_equal(tc_to_host(NULL, NULL, 0), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_to_host: tensor t is NULL");
    tc_release(a);
}

static void test_null_pointers(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(2, SHAPE(2, 3), TC_FLOAT32, NULL);
    assert_null(tc_from_data(NULL, TC_FLOAT32, 1, SHAPE(3), NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_from_data: data is NULL");
    assert_null(tc_full(2, NULL, 1, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: shape is NULL for ndim 2");
    assert_null(tc_reshape(a, 1, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_reshape: shape is NULL for ndim 1");
    assert_null(tc_expand(a, 2, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_expand: shape is NULL for ndim 2");
    assert_null(tc_permute(a, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_permute: order is NULL");
    assert_null(tc_pad(a, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_pad: before_after is NULL");
    assert_null(tc_shrink(a, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_shrink: begin_end is NULL");
    assert_null(tc_sum(a, 1, NULL, false));
    assert_tc_error(TC_ERR_INVALID, "tc_sum: axes is NULL");
    assert_null(tc_flip(a, 1, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_flip: axes is NULL");
    float buf[6];
    assert_int_equal(tc_to_host(a, NULL, sizeof buf), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_to_host: dst is NULL");
    assert_int_equal(tc_realize(NULL, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_realize: ts is NULL");
    tc_tensor *ts[2] = {a, NULL};
    assert_int_equal(tc_realize(ts, 2), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_realize: ts[1] is NULL");
    assert_int_equal(tc_realize(ts, -1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_realize: n is negative");
    assert_int_equal(tc_schedule_kernel_count(ts, 2), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_schedule_kernel_count: ts[1] is NULL");
    assert_int_equal(tc_schedule_kernel_count(NULL, 3), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_schedule_kernel_count: ts is NULL");
    tc_release(a);
}

static void test_creation_shapes(void **state) {
    (void)state;
    assert_null(
        tc_full(17, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_full: ndim 17 is out of range 0..16");
    assert_null(tc_zeros(-1, NULL, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_zeros: ndim -1 is out of range");
    assert_null(tc_ones(2, SHAPE(2, -3), TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_ones: negative size -3 in shape (2,-3)");
    assert_null(tc_full(3, SHAPE(1 << 30, 1 << 30, 1 << 30), 0, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_full: shape (1073741824,1073741824,1073741824) has too many");
    float x = 1;
    assert_null(tc_from_data(&x, TC_FLOAT32, 1, SHAPE(-1), NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_from_data: negative size -1 in shape (-1,)");
    assert_null(tc_rand(1, SHAPE(-2), TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_rand: negative size -2");
    assert_null(tc_eye(-1, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_eye: size -1 is out of range");
    /* 2^62 floats: numel x 4 bytes would wrap; and 2^31 x 2^31 */
    assert_null(tc_from_data(&x, TC_FLOAT32, 1, SHAPE((int64_t)1 << 62), NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_from_data: shape (4611686018427387904,) has too many");
    assert_null(tc_zeros(2, SHAPE((int64_t)1 << 31, (int64_t)1 << 31), TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_zeros: shape (2147483648,2147483648) has too many");
    tc_tensor *row = tc_zeros(2, SHAPE(1, (int64_t)1 << 40), TC_FLOAT32, NULL);
    assert_non_null(row);
    assert_null(tc_expand(row, 2, SHAPE((int64_t)1 << 19, (int64_t)1 << 40)));
    assert_tc_error(TC_ERR_SHAPE, "tc_expand: shape (524288,1099511627776) has too many");
    /* at the limit the shape is made; its buffer cannot be: out of memory */
    tc_tensor *huge = tc_expand(row, 2, SHAPE((int64_t)1 << 18, (int64_t)1 << 40));
    tc_tensor *copy = tc_contiguous(huge);
    assert_non_null(copy);
    assert_int_equal(tc_realize(&copy, 1), TC_ERR_MEMORY);
    tc_release(row), tc_release(huge), tc_release(copy);
    /* a zero anywhere makes a huge shape fine: no elements */
    tc_tensor *e = tc_zeros(3, SHAPE(INT64_MAX, 0, INT64_MAX), TC_FLOAT32, NULL);
    assert_non_null(e);
    tc_release(e);
}

static void test_creation_values_and_dtypes(void **state) {
    (void)state;
    assert_null(tc_full(1, SHAPE(2), 300, TC_UINT8, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value 300 does not fit in uint8");
    assert_null(tc_full(1, SHAPE(2), -1, TC_UINT8, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value -1 does not fit in uint8");
    assert_null(tc_full(1, SHAPE(2), NAN, TC_INT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value nan does not fit in int32");
    assert_null(tc_full(1, SHAPE(2), 3e9, TC_INT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value 3e+09 does not fit in int32");
    assert_null(tc_full(1, SHAPE(2), INFINITY, TC_INT64, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value inf does not fit in int64");
    assert_null(tc_full(1, SHAPE(2), 1e19, TC_INT64, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_full: value 1e+19 does not fit in int64");
    tc_tensor *u = tc_zeros(1, SHAPE(2), TC_UINT8, NULL);
    assert_null(tc_full_like(u, 256));
    assert_tc_error(TC_ERR_INVALID, "tc_full_like: value 256 does not fit in uint8");
    tc_release(u);

    assert_null(tc_full(1, SHAPE(2), 0, (tc_dtype)42, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_full: unknown dtype 42");
    assert_null(tc_from_data(&u, TC_DTYPE_COUNT, 0, NULL, NULL));
    char unknown[64];
    snprintf(unknown, sizeof unknown, "tc_from_data: unknown dtype %d", (int)TC_DTYPE_COUNT);
    assert_tc_error(TC_ERR_DTYPE, unknown);
    assert_null(tc_eye(2, (tc_dtype)-1, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_eye: unknown dtype -1");
    assert_null(tc_rand(1, SHAPE(2), TC_INT32, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_rand: needs a float dtype, got int32");
    assert_null(tc_randn(1, SHAPE(2), TC_BOOL, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_randn: needs a float dtype, got bool");

    assert_null(tc_arange(0, 10, 0, TC_INT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_arange: step must not be 0");
    assert_null(tc_arange(0, 10, 1, TC_BOOL, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_arange: bool is not a numeric dtype");
    assert_null(tc_arange(0, 10, 1, (tc_dtype)19, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_arange: unknown dtype 19");
    assert_null(tc_arange(INT64_MIN, INT64_MAX, 1, TC_INT64, NULL));
    assert_tc_error(TC_ERR_MEMORY, "tc_arange: [-9223372036854775808, 9223372036854775807) by 1 "
                                   "has too many values");
}

static void test_devices(void **state) {
    (void)state;
    assert_null(tc_zeros(1, SHAPE(2), TC_FLOAT32, "TPU"));
    assert_tc_error(TC_ERR_DEVICE, "tc_zeros");
    assert_null(tc_from_data(SHAPE(1), TC_INT64, 1, SHAPE(1), "CPU:7"));
    assert_tc_error(TC_ERR_DEVICE, "tc_from_data");
    assert_null(tc_arange(0, 3, 1, TC_INT32, "nope"));
    assert_tc_error(TC_ERR_DEVICE, "tc_arange");
    assert_null(tc_eye(3, TC_INT32, "cpu:x"));
    assert_tc_error(TC_ERR_DEVICE, "tc_eye");
    assert_null(tc_randn(1, SHAPE(3), TC_FLOAT32, ""));
    assert_tc_error(TC_ERR_DEVICE, "tc_randn");
}

static void test_broadcast_errors(void **state) {
    (void)state;
    float v[12] = {0};
    tc_tensor *a = f32(2, SHAPE(2, 3), v), *b = f32(1, SHAPE(4), v);
    tc_tensor *c = f32(3, SHAPE(3, 1, 4), v);
    char msg[128];
    for (int i = 0; i < (int)COUNT(binaries); i++) {
        assert_null(binaries[i].fn(a, b));
        snprintf(msg, sizeof msg, "%s: cannot broadcast (2,3) with (4,)", binaries[i].name);
        assert_tc_error(TC_ERR_SHAPE, msg);
    }
    assert_null(tc_add(a, c));
    assert_tc_error(TC_ERR_SHAPE, "tc_add: cannot broadcast (2,3) with (3,1,4)");
    assert_null(tc_where(a, a, b));
    assert_tc_error(TC_ERR_SHAPE, "tc_where: cannot broadcast (2,3) with (4,)");
    assert_null(tc_where(b, a, a));
    assert_tc_error(TC_ERR_SHAPE, "tc_where: cannot broadcast (4,) with (2,3)");
    expect_unchanged(a, v, 6);
    tc_release(a);
    tc_release(b);
    tc_release(c);
}

static void test_dtype_errors(void **state) {
    (void)state;
    tc_tensor *f = tc_ones(1, SHAPE(2), TC_FLOAT32, NULL);
    tc_tensor *h = tc_ones(1, SHAPE(2), TC_FLOAT16, NULL);
    tc_tensor *i = tc_ones(1, SHAPE(2), TC_INT32, NULL);
    tc_tensor *b = tc_ones(1, SHAPE(2), TC_BOOL, NULL);
    assert_null(tc_idiv(f, i));
    assert_tc_error(TC_ERR_DTYPE, "tc_idiv: needs integer tensors, got float32 and int32");
    assert_null(tc_mod(i, h));
    assert_tc_error(TC_ERR_DTYPE, "tc_mod: needs integer tensors, got int32 and float16");
    assert_null(tc_idiv(b, b));
    assert_tc_error(TC_ERR_DTYPE, "tc_idiv: needs integer tensors, got bool and bool");
    assert_null(tc_logical_and(f, b));
    assert_tc_error(TC_ERR_DTYPE, "tc_logical_and: needs bool or integer tensors, got float32");
    assert_null(tc_logical_or(h, h));
    assert_tc_error(TC_ERR_DTYPE, "tc_logical_or: needs bool or integer tensors");
    assert_null(tc_logical_xor(i, f));
    assert_tc_error(TC_ERR_DTYPE, "tc_logical_xor: needs bool or integer tensors");
    assert_null(tc_sub(b, b));
    assert_tc_error(TC_ERR_DTYPE, "tc_sub: not defined for bool tensors, got bool and bool");
    assert_null(tc_neg(b));
    assert_tc_error(TC_ERR_DTYPE, "tc_neg: not defined for bool tensors");
    assert_null(tc_lshift(f, i));
    assert_tc_error(TC_ERR_DTYPE, "tc_lshift: needs integer tensors, got float32 and int32");
    assert_null(tc_rshift(b, b));
    assert_tc_error(TC_ERR_DTYPE, "tc_rshift: needs integer tensors, got bool and bool");
    assert_null(tc_celu(NULL, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_celu: tensor a is NULL");
    assert_null(tc_celu(f, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_celu: alpha 0 must be finite and nonzero");
    assert_null(tc_celu(f, INFINITY));
    assert_tc_error(TC_ERR_INVALID, "tc_celu: alpha inf must be finite and nonzero");
    assert_null(tc_cast(f, (tc_dtype)17));
    assert_tc_error(TC_ERR_DTYPE, "tc_cast: unknown dtype 17");
    tc_release(f);
    tc_release(h);
    tc_release(i);
    tc_release(b);
}

static void test_axis_errors(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(2, SHAPE(2, 3), TC_FLOAT32, NULL);
    assert_null(tc_sum(a, 1, AXES(2), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_sum: axis 2 is out of range for 2 dims");
    assert_null(tc_max(a, 1, AXES(-3), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_max: axis -3 is out of range for 2 dims");
    assert_null(tc_min(a, 2, AXES(1, -1), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_min: axis -1 appears twice");
    assert_null(tc_mean(a, 3, AXES(0, 1, 0), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_mean: 3 axes given for 2 dims");
    assert_null(tc_var(a, -1, AXES(0), false, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_var: -1 axes given for 2 dims");
    assert_null(tc_std(a, 1, AXES(5), true, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_std: axis 5 is out of range");
    assert_null(tc_flip(a, 2, AXES(0, 0)));
    assert_tc_error(TC_ERR_SHAPE, "tc_flip: axis 0 appears twice");
    assert_null(tc_flip(a, 1, AXES(2)));
    assert_tc_error(TC_ERR_SHAPE, "tc_flip: axis 2 is out of range for 2 dims");
    assert_null(tc_transpose(a, 0, 2));
    assert_tc_error(TC_ERR_SHAPE, "tc_transpose: axis 2 is out of range for 2 dims");
    assert_null(tc_permute(a, AXES(0, 0)));
    assert_tc_error(TC_ERR_SHAPE, "tc_permute: axis 0 appears twice in the order");
    assert_null(tc_permute(a, AXES(1, 2)));
    assert_tc_error(TC_ERR_SHAPE, "tc_permute: axis 2 is out of range for 2 dims");
    tc_tensor *s = scalar(1, TC_FLOAT32);
    assert_null(tc_sum(s, 2, AXES(0, -1), false)); /* 0 or -1 alone name its element */
    assert_tc_error(TC_ERR_SHAPE, "tc_sum: 2 axes given for 0 dims");
    assert_null(tc_sum(s, 1, AXES(1), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_sum: axis 1 is out of range for 0 dims");
    assert_null(tc_any(s, 1, AXES(-2), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_any: axis -2 is out of range for 0 dims");
    assert_null(tc_softmax(s, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_softmax: axis 1 is out of range for 0 dims");
    assert_null(tc_cumsum(s, -2));
    assert_tc_error(TC_ERR_SHAPE, "tc_cumsum: axis -2 is out of range for 0 dims");
    assert_null(tc_cumsum(a, 2));
    assert_tc_error(TC_ERR_SHAPE, "tc_cumsum: axis 2 is out of range for 2 dims");
    assert_null(tc_any(NULL, 0, NULL, false));
    assert_tc_error(TC_ERR_INVALID, "tc_any: tensor a is NULL");
    assert_null(tc_logsumexp(NULL, 0, NULL, false));
    assert_tc_error(TC_ERR_INVALID, "tc_logsumexp: tensor a is NULL");
    assert_null(tc_cumsum(NULL, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_cumsum: tensor x is NULL");
    assert_null(tc_cumprod(s, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_cumprod: axis 1 is out of range for 0 dims");
    assert_null(tc_cumprod(a, -3));
    assert_tc_error(TC_ERR_SHAPE, "tc_cumprod: axis -3 is out of range for 2 dims");
    assert_null(tc_cumprod(NULL, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_cumprod: tensor x is NULL");
    assert_null(tc_logsumexp(a, 1, AXES(3), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_logsumexp: axis 3 is out of range for 2 dims");
    assert_null(tc_all(a, 2, AXES(1, -1), false));
    assert_tc_error(TC_ERR_SHAPE, "tc_all: axis -1 appears twice");
    tc_release(s);
    tc_release(a);
}

static void test_movement_errors(void **state) {
    (void)state;
    float v[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    tc_tensor *a = f32(2, SHAPE(3, 4), v);
    assert_null(tc_reshape(a, 2, SHAPE(5, 2)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (3,4) to (5,2)");
    assert_null(tc_reshape(a, 2, SHAPE(-1, 5)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (3,4) to (-1,5)");
    assert_null(tc_reshape(a, 3, SHAPE(-1, 2, -1)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: only one -1 allowed in (-1,2,-1)");
    assert_null(tc_reshape(a, 2, SHAPE(-2, -6)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: negative size -2 in (-2,-6)");
    assert_null(tc_reshape(a, 17, SHAPE(1)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: ndim 17 is out of range 0..16");
    assert_null(tc_reshape(a, 3, SHAPE(INT64_MAX, 4, 3)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (3,4) to");
    tc_tensor *e = tc_zeros(2, SHAPE(0, 4), TC_FLOAT32, NULL);
    assert_null(tc_reshape(e, 2, SHAPE(-1, 0)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (0,4) to (-1,0)");
    tc_release(e);

    assert_null(tc_expand(a, 2, SHAPE(3, 5)));
    assert_tc_error(TC_ERR_SHAPE, "tc_expand: cannot expand (3,4) to (3,5)");
    assert_null(tc_expand(a, 1, SHAPE(4)));
    assert_tc_error(TC_ERR_SHAPE, "tc_expand: cannot expand 2 dims to 1");
    assert_null(tc_expand(a, 3, SHAPE(-1, 3, 4)));
    assert_tc_error(TC_ERR_SHAPE, "tc_expand: cannot expand (3,4) to (-1,3,4)");
    assert_null(tc_expand(a, 2, SHAPE(-2, 4)));
    assert_tc_error(TC_ERR_SHAPE, "tc_expand: cannot expand (3,4) to (-2,4)");

    assert_null(tc_pad(a, SHAPE(0, 1, -1, 0)));
    assert_tc_error(TC_ERR_SHAPE, "tc_pad: padding (-1,0) for axis 1 must be >= 0");
    assert_null(tc_shrink(a, SHAPE(0, 3, 2, 5)));
    assert_tc_error(TC_ERR_SHAPE, "tc_shrink: range [2,5) is out of bounds for axis 1 of size 4");
    assert_null(tc_shrink(a, SHAPE(2, 1, 0, 4)));
    assert_tc_error(TC_ERR_SHAPE, "tc_shrink: range [2,1) is out of bounds for axis 0 of size 3");
    assert_null(tc_shrink(a, SHAPE(-1, 1, 0, 4)));
    assert_tc_error(TC_ERR_SHAPE, "tc_shrink: range [-1,1)");
    /* the failed calls changed nothing */
    check_meta(a, TC_FLOAT32, 2, SHAPE(3, 4));
    expect_unchanged(a, v, 12);
    tc_release(a);
}

static void test_to_host_errors(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(2, SHAPE(2, 3), TC_INT64, NULL);
    int64_t buf[6];
    assert_int_equal(tc_to_host(a, buf, 40), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_to_host: nbytes is 40 but 6 elements of int64 need 48");
    assert_int_equal(tc_to_host(a, buf, 49), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "nbytes is 49");
    assert_int_equal(tc_to_host(a, buf, sizeof buf), TC_OK);
    for (int i = 0; i < 6; i++) assert_int_equal(buf[i], 1);
    tc_release(a);
}

static void test_failed_calls_change_nothing(void **state) {
    (void)state;
    /* failing calls on a lazy tensor neither run it nor alter it */
    float v[4] = {1, 2, 3, 4};
    tc_tensor *a = f32(1, SHAPE(4), v);
    tc_tensor *lazy = tc_mul(a, a);
    assert_null(tc_reshape(lazy, 1, SHAPE(5)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (4,) to (5,)");
    assert_null(tc_sum(lazy, 1, AXES(1), false));
    assert_false(tc_is_realized(lazy)); /* nothing ran */
    float sq[4] = {1, 4, 9, 16};
    expect_f32(lazy, sq, 4, 0, 0, "x*x after failed calls");
    expect_unchanged(a, v, 4);
    tc_release(a);
}

/* the thread's error state: a success leaves an earlier failure's message
 * alone (as errno does), and a public call that fails through another
 * (tc_conv2d through tc_conv2d_ex, tc_sgd through tc_sgd_ex) is named first */
static void test_error_state(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4};
    tc_tensor *a = f32(1, SHAPE(4), v);
    assert_null(tc_reshape(a, 1, SHAPE(5)));
    tc_tensor *b = tc_add(a, a);
    assert_non_null(b);
    assert_int_equal(tc_realize(&b, 1), TC_OK);
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape: cannot reshape (4,) to (5,)");
    tc_release(b);

    tc_tensor *x = tc_zeros(4, SHAPE(1, 2, 5, 5), TC_FLOAT32, NULL);
    tc_tensor *w = tc_zeros(4, SHAPE(3, 4, 3, 3), TC_FLOAT32, NULL); /* 4 in-channels, x has 2 */
    assert_null(tc_conv2d(x, w, NULL, 1, 0));
    assert_int_equal(tc_last_status(), TC_ERR_SHAPE);
    assert_int_equal(strncmp(tc_last_error(), "tc_conv2d: ", 11), 0);
    tc_release(x), tc_release(w);

    assert_null(tc_sgd(&a, 1, -1, 0));
    assert_int_equal(tc_last_status(), TC_ERR_INVALID);
    assert_int_equal(strncmp(tc_last_error(), "tc_sgd: ", 8), 0);
    tc_release(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_null_handles),
        TEST(test_null_pointers),
        TEST(test_creation_shapes),
        TEST(test_creation_values_and_dtypes),
        TEST(test_devices),
        TEST(test_broadcast_errors),
        TEST(test_dtype_errors),
        TEST(test_axis_errors),
        TEST(test_movement_errors),
        TEST(test_to_host_errors),
        TEST(test_failed_calls_change_nothing),
        TEST(test_error_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
