/* test_creation.c - tc_from_data for every dtype, tc_full/zeros/ones/
 * full_like, tc_arange and tc_eye: shapes, dtypes and values read back with
 * tc_to_host, against values written out here. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* reads t back and compares its bytes with want; releases t */
static void expect_bytes(tc_tensor *t, const void *want, size_t nbytes) {
    assert_non_null(t);
    assert_int_equal((size_t)tc_numel(t) * tc_dtype_size(tc_get_dtype(t)), nbytes);
    void *got = tc_test_read(t);
    assert_memory_equal(got, want, nbytes);
    free(got);
    tc_release(t);
}

static void test_from_data_every_dtype(void **state) {
    (void)state;
    float f[6] = {1.5f, -2, 0, 1e30f, -1e-30f, 3};
    uint16_t h[6] = {0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0001, 0x8000}; /* 1 -2 ~1/3 65504 tiny -0 */
    int32_t i32[6] = {INT32_MIN, -1, 0, 1, 7, INT32_MAX};
    int64_t i64[6] = {INT64_MIN, -1, 0, 1, (int64_t)1 << 53 | 1, INT64_MAX};
    uint8_t u8[6] = {0, 1, 127, 128, 254, 255};
    uint8_t b[6] = {1, 0, 0, 1, 1, 0};
    const struct {
        tc_dtype dt;
        const void *data;
    } cases[] = {{TC_FLOAT32, f}, {TC_FLOAT16, h}, {TC_INT32, i32},
                 {TC_INT64, i64}, {TC_UINT8, u8},  {TC_BOOL, b}};
    for (int i = 0; i < (int)COUNT(cases); i++) {
        tc_tensor *t = from(cases[i].data, cases[i].dt, 2, SHAPE(3, 2));
        check_meta(t, cases[i].dt, 2, SHAPE(3, 2));
        assert_true(tc_is_realized(t));
        expect_bytes(t, cases[i].data, 6 * tc_dtype_size(cases[i].dt));
    }
}

static void test_from_data_copies(void **state) {
    (void)state;
    float x[3] = {1, 2, 3}, want[3] = {1, 2, 3};
    tc_tensor *t = f32(1, SHAPE(3), x);
    x[0] = 100; /* the tensor holds its own copy */
    expect_f32(t, want, 3, 0, 0, "from_data copy");
}

static void test_from_data_scalar_and_empty(void **state) {
    (void)state;
    int64_t v = -42;
    tc_tensor *s = from(&v, TC_INT64, 0, NULL);
    check_meta(s, TC_INT64, 0, NULL);
    expect_bytes(s, &v, sizeof v);
    tc_tensor *e = tc_from_data(NULL, TC_FLOAT32, 2, SHAPE(4, 0), NULL); /* no data needed */
    check_meta(e, TC_FLOAT32, 2, SHAPE(4, 0));
    assert_int_equal(tc_numel(e), 0);
    tc_release(e);
}

static void test_full(void **state) {
    (void)state;
    float f[6] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f, 2.5f};
    tc_tensor *t = tc_full(2, SHAPE(2, 3), 2.5, TC_FLOAT32, NULL);
    check_meta(t, TC_FLOAT32, 2, SHAPE(2, 3));
    assert_false(tc_is_realized(t));
    expect_f32(t, f, 6, 0, 0, "full 2.5");

    int32_t i[4] = {3, 3, 3, 3}; /* truncated toward zero, like a C cast */
    expect_values(tc_full(1, SHAPE(4), 3.7, TC_INT32, NULL), i, 4, 0, 0, "full int32 3.7");
    int32_t n[2] = {-3, -3};
    expect_values(tc_full(1, SHAPE(2), -3.7, TC_INT32, NULL), n, 2, 0, 0, "full int32 -3.7");
    int64_t big[2] = {-((int64_t)1 << 53), -((int64_t)1 << 53)};
    expect_values(tc_full(1, SHAPE(2), -9007199254740992.0, TC_INT64, NULL), big, 2, 0, 0,
                  "full int64 -2^53");
    uint8_t u[3] = {255, 255, 255};
    expect_values(tc_full(1, SHAPE(3), 255, TC_UINT8, NULL), u, 3, 0, 0, "full uint8 255");
    uint8_t b[2] = {1, 1};
    expect_values(tc_full(1, SHAPE(2), 0.5, TC_BOOL, NULL), b, 2, 0, 0, "full bool 0.5");
    uint8_t bf[2] = {0, 0};
    expect_values(tc_full(1, SHAPE(2), 0.0, TC_BOOL, NULL), bf, 2, 0, 0, "full bool 0");
    float inf[1] = {INFINITY};
    expect_f32(tc_full(1, SHAPE(1), INFINITY, TC_FLOAT32, NULL), inf, 1, 0, 0, "full inf");

    /* float16: 0.1 rounds to 0x2E66 = 0.0999755859375 */
    tc_tensor *hf = tc_full(1, SHAPE(2), 0.1, TC_FLOAT16, NULL);
    check_meta(hf, TC_FLOAT16, 1, SHAPE(2));
    float hw[2] = {0.0999755859375f, 0.0999755859375f};
    expect_f32(tc_cast(hf, TC_FLOAT32), hw, 2, 0, 0, "full float16 0.1");
    tc_release(hf);

    tc_tensor *s = tc_full(0, NULL, 7, TC_INT32, NULL);
    check_meta(s, TC_INT32, 0, NULL);
    int32_t sw = 7;
    expect_values(s, &sw, 1, 0, 0, "full scalar");
    tc_tensor *e = tc_full(3, SHAPE(2, 0, 3), 1, TC_FLOAT32, NULL);
    check_meta(e, TC_FLOAT32, 3, SHAPE(2, 0, 3));
    tc_release(e);
}

static void test_zeros_ones_every_dtype(void **state) {
    (void)state;
    for (int dt = 0; dt < TC_DTYPE_COUNT; dt++) {
        tc_tensor *z = tc_zeros(2, SHAPE(2, 2), (tc_dtype)dt, NULL);
        tc_tensor *o = tc_ones(2, SHAPE(2, 2), (tc_dtype)dt, NULL);
        check_meta(z, (tc_dtype)dt, 2, SHAPE(2, 2));
        check_meta(o, (tc_dtype)dt, 2, SHAPE(2, 2));
        float zw[4] = {0, 0, 0, 0}, ow[4] = {1, 1, 1, 1};
        expect_f32(tc_cast(z, TC_FLOAT32), zw, 4, 0, 0, tc_dtype_name((tc_dtype)dt));
        expect_f32(tc_cast(o, TC_FLOAT32), ow, 4, 0, 0, tc_dtype_name((tc_dtype)dt));
        tc_release(z);
        tc_release(o);
    }
}

static void test_full_like(void **state) {
    (void)state;
    int32_t x[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *a = from(x, TC_INT32, 2, SHAPE(3, 2));
    tc_tensor *t = tc_full_like(a, -4);
    check_meta(t, TC_INT32, 2, SHAPE(3, 2));
    assert_string_equal(tc_device(t), tc_device(a));
    int32_t w[6] = {-4, -4, -4, -4, -4, -4};
    expect_values(t, w, 6, 0, 0, "full_like int32");
    tc_release(a);
}

static void test_arange(void **state) {
    (void)state;
    int32_t up[5] = {0, 1, 2, 3, 4};
    tc_tensor *t = tc_arange(0, 5, 1, TC_INT32, NULL);
    check_meta(t, TC_INT32, 1, SHAPE(5));
    expect_values(t, up, 5, 0, 0, "arange(0,5)");
    int64_t down[3] = {5, 3, 1};
    expect_values(tc_arange(5, 0, -2, TC_INT64, NULL), down, 3, 0, 0, "arange(5,0,-2)");
    float f[4] = {0, 3, 6, 9};
    expect_f32(tc_arange(0, 10, 3, TC_FLOAT32, NULL), f, 4, 0, 0, "arange(0,10,3)");
    float neg[3] = {-1, -4, -7};
    expect_f32(tc_arange(-1, -8, -3, TC_FLOAT32, NULL), neg, 3, 0, 0, "arange(-1,-8,-3)");
    uint8_t u[3] = {250, 252, 254};
    expect_values(tc_arange(250, 256, 2, TC_UINT8, NULL), u, 3, 0, 0, "arange uint8");
    tc_tensor *h = tc_arange(0, 3, 1, TC_FLOAT16, NULL);
    check_meta(h, TC_FLOAT16, 1, SHAPE(3));
    float hw[3] = {0, 1, 2};
    expect_f32(tc_cast(h, TC_FLOAT32), hw, 3, 0, 0, "arange float16");
    tc_release(h);
}

static void test_arange_edges(void **state) {
    (void)state;
    /* empty ranges give shape (0,) */
    tc_tensor *e1 = tc_arange(3, 3, 1, TC_INT32, NULL);
    tc_tensor *e2 = tc_arange(0, -5, 1, TC_FLOAT32, NULL);
    tc_tensor *e3 = tc_arange(0, 5, -1, TC_INT64, NULL);
    check_meta(e1, TC_INT32, 1, SHAPE(0));
    check_meta(e2, TC_FLOAT32, 1, SHAPE(0));
    check_meta(e3, TC_INT64, 1, SHAPE(0));
    tc_release(e1);
    tc_release(e2);
    tc_release(e3);
    /* int64 extremes, exact and without overflow */
    int64_t top[3] = {INT64_MAX - 5, INT64_MAX - 3, INT64_MAX - 1};
    expect_values(tc_arange(INT64_MAX - 5, INT64_MAX, 2, TC_INT64, NULL), top, 3, 0, 0,
                  "arange near INT64_MAX");
    int64_t wide[3] = {INT64_MIN, -1, INT64_MAX - 1};
    expect_values(tc_arange(INT64_MIN, INT64_MAX, INT64_MAX, TC_INT64, NULL), wide, 3, 0, 0,
                  "arange over the whole int64 range");
    int64_t one[1] = {7};
    expect_values(tc_arange(7, 8, 100, TC_INT64, NULL), one, 1, 0, 0, "arange one value");
}

static void test_eye(void **state) {
    (void)state;
    tc_tensor *t = tc_eye(3, TC_FLOAT32, NULL);
    check_meta(t, TC_FLOAT32, 2, SHAPE(3, 3));
    float w[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    expect_f32(t, w, 9, 0, 0, "eye(3)");
    int32_t wi[16];
    for (int i = 0; i < 16; i++) wi[i] = i % 5 == 0;
    tc_tensor *ti = tc_eye(4, TC_INT32, NULL);
    check_meta(ti, TC_INT32, 2, SHAPE(4, 4));
    expect_values(ti, wi, 16, 0, 0, "eye(4) int32");
    uint8_t b1 = 1;
    expect_values(tc_eye(1, TC_BOOL, NULL), &b1, 1, 0, 0, "eye(1) bool");
    tc_tensor *z = tc_eye(0, TC_FLOAT32, NULL);
    check_meta(z, TC_FLOAT32, 2, SHAPE(0, 0));
    tc_release(z);
}

static void test_created_tensors_compute(void **state) {
    (void)state;
    /* constants and uploads mix in one graph: arange(4) * 2 + ones */
    tc_tensor *a = tc_arange(0, 4, 1, TC_FLOAT32, NULL);
    tc_tensor *two = tc_full(1, SHAPE(4), 2, TC_FLOAT32, NULL);
    tc_tensor *one = tc_ones(0, NULL, TC_FLOAT32, NULL);
    tc_tensor *m = tc_mul(a, two), *r = tc_add(m, one);
    float w[4] = {1, 3, 5, 7};
    expect_f32(r, w, 4, 0, 0, "arange*2+1");
    tc_release(a);
    tc_release(two);
    tc_release(one);
    tc_release(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_from_data_every_dtype),
        TEST(test_from_data_copies),
        TEST(test_from_data_scalar_and_empty),
        TEST(test_full),
        TEST(test_zeros_ones_every_dtype),
        TEST(test_full_like),
        TEST(test_arange),
        TEST(test_arange_edges),
        TEST(test_eye),
        TEST(test_created_tensors_compute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
