/* test_bitcast.c - tc_bitcast against memcpy on the host: every pair of
 * same-size dtypes on values with special bit patterns (negative integers,
 * -0, inf, NaN, subnormals, the extremes); every one of the 65536 bit
 * patterns through float16 and bfloat16 and back (a signalling NaN may come
 * back quiet: its payload with the quiet bit set); views (a transposed input)
 * and one kernel with the elementwise ops around it; the errors, naming the
 * call and the dtypes. Public API only. */
#include <math.h>
#include <string.h>

#include "api_helpers.h"

enum { N = 8 };

/* N values of dt with special bit patterns, as raw bytes */
static void patterns(tc_dtype dt, void *out) {
    static const uint8_t b8[N] = {0, 1, 0x7f, 0x80, 0xff, 0x3c, 0xc0, 0x55};
    static const uint16_t b16[N] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x3c00, 0xc5a1};
    static const uint32_t b32[N] = {0,           0x80000000u, 0x7f800000u, 0xff800000u,
                                    0x7fc00000u, 0x00000001u, 0x3f800000u, 0xc0490fdbu};
    static const uint64_t b64[N] = {0,
                                    0x8000000000000000ull,
                                    0x7ff0000000000000ull,
                                    0xfff0000000000000ull,
                                    0x7ff8000000000000ull,
                                    1,
                                    0x3ff0000000000000ull,
                                    0xc00921fb54442d18ull};
    size_t size = tc_dtype_size(dt);
    if (dt == TC_BOOL) {
        static const uint8_t bools[N] = {0, 1, 1, 0, 1, 0, 0, 1};
        memcpy(out, bools, N);
    } else {
        memcpy(out,
               size == 1   ? (const void *)b8
               : size == 2 ? (const void *)b16
               : size == 4 ? (const void *)b32
                           : (const void *)b64,
               size * N);
    }
}

static void test_bitcast_pairs(void **state) {
    (void)state;
    for (int a = 0; a < TC_DTYPE_COUNT; a++)
        for (int b = 0; b < TC_DTYPE_COUNT; b++) {
            tc_dtype src = (tc_dtype)a, dst = (tc_dtype)b;
            size_t size = tc_dtype_size(src);
            if (size != tc_dtype_size(dst) || (dst == TC_BOOL && src != TC_BOOL)) continue;
            uint8_t in[8 * N], got[8 * N];
            patterns(src, in);
            tc_tensor *x = from(in, src, 1, SHAPE(N)), *y = tc_bitcast(x, dst);
            if (!y)
                fprintf(stderr, "%s -> %s: %s\n", tc_dtype_name(src), tc_dtype_name(dst),
                        tc_last_error());
            assert_non_null(y);
            check_meta(y, dst, 1, SHAPE(N));
            assert_int_equal(tc_to_host(y, got, size * N), TC_OK);
            if (memcmp(in, got, size * N) != 0) {
                print_error("bitcast %s -> %s changed the bits\n", tc_dtype_name(src),
                            tc_dtype_name(dst));
                fail();
            }
            tc_release(x), tc_release(y);
        }
}

/* every 16-bit pattern through a 16-bit float and back to uint16: the same
 * bits (a signalling NaN: the same with the quiet bit set) */
static void test_bitcast_all_16_bit_patterns(void **state) {
    (void)state;
    enum { M = 65536 };
    uint16_t *bits = malloc(2 * M), *back = malloc(2 * M);
    for (int i = 0; i < M; i++) bits[i] = (uint16_t)i;
    const tc_dtype floats[2] = {TC_FLOAT16, TC_BFLOAT16};
    for (int k = 0; k < 2; k++) {
        bool is_half = floats[k] == TC_FLOAT16;
        uint16_t exp_mask = is_half ? 0x7c00 : 0x7f80, quiet = is_half ? 0x0200 : 0x0040;
        tc_tensor *u = from(bits, TC_UINT16, 1, SHAPE(M)), *f = tc_bitcast(u, floats[k]);
        tc_tensor *i16 = tc_bitcast(f, TC_INT16), *r = tc_bitcast(i16, TC_UINT16);
        assert_int_equal(tc_to_host(r, back, 2 * M), TC_OK);
        int bad = 0;
        for (int i = 0; i < M; i++) {
            bool is_nan = (i & exp_mask) == exp_mask && (i & ~exp_mask & 0x7fff) != 0;
            uint16_t want = (uint16_t)(is_nan && back[i] != i ? i | quiet : i);
            if (back[i] != want && bad++ < 5)
                print_error("%s: 0x%04x came back 0x%04x\n", tc_dtype_name(floats[k]), i, back[i]);
        }
        assert_int_equal(bad, 0);
        /* the stored float has the bits: read back raw */
        assert_int_equal(tc_to_host(f, back, 2 * M), TC_OK);
        for (int i = 0; i < M; i++) {
            bool is_nan = (i & exp_mask) == exp_mask && (i & ~exp_mask & 0x7fff) != 0;
            if (back[i] != i && !(is_nan && back[i] == (i | quiet)) && bad++ < 5)
                print_error("%s: stored 0x%04x for 0x%04x\n", tc_dtype_name(floats[k]), back[i], i);
        }
        assert_int_equal(bad, 0);
        tc_release(u), tc_release(f), tc_release(i16), tc_release(r);
    }
    free(bits), free(back);
}

/* a transposed view, and a bitcast between elementwise ops: one kernel */
static void test_bitcast_views_and_fusion(void **state) {
    (void)state;
    float v[6] = {1.5f, -2, 0.25f, -0.0f, 3, 1e-40f}; /* (2,3) */
    tc_tensor *x = f32(2, SHAPE(2, 3), v), *t = tc_transpose(x, 0, 1), *b = tc_bitcast(t, TC_INT32);
    int32_t want[6];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) memcpy(&want[i * 2 + j], &v[j * 3 + i], 4);
    check_meta(b, TC_INT32, 2, SHAPE(3, 2));
    expect_values(b, want, 6, 0, 0, "bitcast of a transposed view");
    tc_tensor *one = scalar(1, TC_FLOAT32), *p = tc_add(t, one), *q = tc_bitcast(p, TC_UINT32);
    tc_tensor *k = scalar(1, TC_UINT32), *s = tc_add(q, k);
    tc_check_schedule(s, 1, 0, 0, "x.T + 1, bitcast, + 1: one kernel");
    tc_tensor *ts[] = {x, t, one, p, q, k, s};
    for (size_t i = 0; i < COUNT(ts); i++) tc_release(ts[i]);
}

static void test_bitcast_errors(void **state) {
    (void)state;
    float v[2] = {1, 2};
    tc_tensor *x = f32(1, SHAPE(2), v);
    assert_null(tc_bitcast(x, TC_INT16));
    assert_tc_error(TC_ERR_DTYPE,
                    "tc_bitcast: float32 (4 bytes) to int16 (2 bytes): the sizes differ");
    assert_null(tc_bitcast(x, TC_FLOAT64));
    assert_tc_error(TC_ERR_DTYPE, "tc_bitcast: float32 (4 bytes) to float64 (8 bytes)");
    uint8_t u[2] = {2, 0};
    tc_tensor *b = from(u, TC_UINT8, 1, SHAPE(2));
    assert_null(tc_bitcast(b, TC_BOOL));
    assert_tc_error(TC_ERR_DTYPE, "tc_bitcast: uint8 to bool");
    assert_null(tc_bitcast(x, (tc_dtype)99));
    assert_tc_error(TC_ERR_DTYPE, "tc_bitcast: unknown dtype 99");
    assert_null(tc_bitcast(NULL, TC_INT32));
    assert_tc_error(TC_ERR_INVALID, "tc_bitcast: tensor a is NULL");
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    assert_null(tc_bitcast(x, TC_INT32));
    assert_tc_error(TC_ERR_INVALID, "tc_bitcast: a requires grad");
    tc_release(x), tc_release(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_bitcast_pairs),
        TEST(test_bitcast_all_16_bit_patterns),
        TEST(test_bitcast_views_and_fusion),
        TEST(test_bitcast_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
