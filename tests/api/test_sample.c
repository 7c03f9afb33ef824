/* test_sample.c - tc_uniform, tc_normal, tc_randint and tc_multinomial:
 * known answers from the Philox4x32-10 test vector (seed 0, first block),
 * ranges and frequencies, the counter they share with tc_rand, the same
 * values on another device (OPENCL, skipped when there is none) and the bad
 * arguments they reject, naming the call and the values. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* the first block of seed 0 (see test_random.c) */
static const uint32_t kat_zero[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};

static void test_known_answers(void **state) {
    (void)state;
    tc_manual_seed(0);
    float uw[4];
    for (int i = 0; i < 4; i++) uw[i] = (float)(-2.0 + 5.0 * (double)(kat_zero[i] >> 8) * 0x1p-24);
    expect_f32(tc_uniform(1, SHAPE(4), -2, 3, TC_FLOAT32, NULL), uw, 4, 0, 0, "uniform KAT");
    tc_manual_seed(0);
    float nw[4];
    for (int j = 0; j < 4; j += 2) {
        double u1 = ((kat_zero[j] >> 8) + 1) * 0x1p-24, u2 = (kat_zero[j + 1] >> 8) * 0x1p-24;
        double r = sqrt(-2 * log(u1)), th = 2 * M_PI * u2;
        nw[j] = (float)(1 + 0.5 * r * cos(th)), nw[j + 1] = (float)(1 + 0.5 * r * sin(th));
    }
    expect_f32(tc_normal(1, SHAPE(4), 1, 0.5, TC_FLOAT32, NULL), nw, 4, 1e-6, 1e-6, "normal KAT");
    tc_manual_seed(0);
    int64_t iw[2];
    for (int j = 0; j < 2; j++) { /* 53 bits from a pair of words */
        double u =
            ((double)(kat_zero[2 * j] >> 5) * 67108864.0 + (kat_zero[2 * j + 1] >> 6)) * 0x1p-53;
        iw[j] = -1000 + (int64_t)floor(u * 1000000);
    }
    tc_tensor *r = tc_randint(1, SHAPE(2), -1000, 999000, TC_INT64, NULL);
    check_meta(r, TC_INT64, 1, SHAPE(2));
    expect_values(r, iw, 2, 0, 0, "randint KAT");
}

/* every generator takes its blocks from the one counter */
static void test_shared_counter(void **state) {
    (void)state;
    tc_manual_seed(5);
    tc_tensor *a = tc_rand(1, SHAPE(8), TC_FLOAT32, NULL);        /* blocks 0, 1 */
    tc_tensor *b = tc_randint(1, SHAPE(3), 0, 7, TC_INT32, NULL); /* blocks 2, 3 (2 per block) */
    tc_tensor *c = tc_rand(1, SHAPE(4), TC_FLOAT32, NULL);        /* block 4 */
    tc_manual_seed(5);
    tc_tensor *all = tc_rand(1, SHAPE(20), TC_FLOAT32, NULL);
    float *av = tc_test_read(all), *cv = tc_test_read(c);
    assert_memory_equal(cv, av + 16, sizeof(float) * 4);
    free(av), free(cv);
    tc_release(a), tc_release(b), tc_release(c), tc_release(all);
}

static void test_ranges(void **state) {
    (void)state;
    enum { N = 60000 };
    tc_manual_seed(9);
    tc_tensor *ti = tc_randint(1, SHAPE(N), -3, 4, TC_INT32, NULL);
    tc_tensor *tu = tc_randint(1, SHAPE(N), 0, 256, TC_UINT8, NULL);
    tc_tensor *tf = tc_uniform(1, SHAPE(N), 1.0, 1.0000002, TC_FLOAT32, NULL);
    int32_t *v = tc_test_read(ti);
    int counts[7] = {0};
    for (int i = 0; i < N; i++) {
        assert_true(v[i] >= -3 && v[i] < 4);
        counts[v[i] + 3]++;
    }
    for (int k = 0; k < 7; k++) assert_true(fabs(counts[k] / (double)N - 1 / 7.0) < 0.01);
    free(v);
    uint8_t *u8 = tc_test_read(tu);
    int hi = 0;
    for (int i = 0; i < N; i++) hi = u8[i] > hi ? u8[i] : hi;
    assert_int_equal(hi, 255);
    free(u8);
    float *f = tc_test_read(tf);
    for (int i = 0; i < N; i++) assert_true(f[i] >= 1.0f && (double)f[i] < 1.0000002);
    free(f);
    tc_release(ti), tc_release(tu), tc_release(tf);
}

static tc_tensor *weights(void) {
    float w[8] = {0.1f, 0.2f, 0, 0.7f, 3, 3, 3, 3}; /* (2,4), not normalised */
    return f32(2, SHAPE(2, 4), w);
}

static void test_multinomial(void **state) {
    (void)state;
    enum { K = 40000 };
    tc_manual_seed(13);
    tc_tensor *w = weights(), *s = tc_multinomial(w, K, true);
    check_meta(s, TC_INT32, 2, SHAPE(2, K));
    int32_t *v = tc_test_read(s);
    const double p[2][4] = {{0.1, 0.2, 0, 0.7}, {0.25, 0.25, 0.25, 0.25}};
    for (int r = 0; r < 2; r++) {
        int counts[4] = {0};
        for (int i = 0; i < K; i++) counts[v[r * K + i]]++;
        for (int k = 0; k < 4; k++) assert_true(fabs(counts[k] / (double)K - p[r][k]) < 0.01);
    }
    free(v);
    tc_release(s);
    s = tc_multinomial(w, 3, false); /* row 0 has three positive weights: all of them */
    int32_t *d = tc_test_read(s);
    assert_true(d[0] != d[1] && d[1] != d[2] && d[0] != d[2]);
    for (int i = 0; i < 3; i++) assert_true(d[i] != 2);
    free(d);
    tc_release(s);
    tc_tensor *row = tc_reshape(w, 1, SHAPE(8)), *one = tc_multinomial(row, 1, false);
    check_meta(one, TC_INT32, 1, SHAPE(1));
    tc_release(one), tc_release(row), tc_release(w);
}

static void test_multinomial_errors(void **state) {
    (void)state;
    tc_tensor *w = weights(), *t3 = tc_ones(3, SHAPE(1, 2, 2), TC_FLOAT32, NULL);
    float bad[2] = {0.5f, -1};
    tc_tensor *neg = f32(1, SHAPE(2), bad), *b = tc_ones(1, SHAPE(2), TC_BOOL, NULL);
    assert_null(tc_multinomial(NULL, 1, true));
    assert_tc_error(TC_ERR_INVALID, "tc_multinomial: tensor probs is NULL");
    assert_null(tc_multinomial(t3, 1, true));
    assert_tc_error(TC_ERR_SHAPE, "tc_multinomial: probs must have 1 or 2 dims, got (1,2,2)");
    assert_null(tc_multinomial(w, 0, true));
    assert_tc_error(TC_ERR_INVALID, "tc_multinomial: num_samples 0 must be >= 1");
    assert_null(tc_multinomial(w, 5, false));
    assert_tc_error(TC_ERR_INVALID,
                    "tc_multinomial: cannot draw 5 samples without replacement from 4 categories");
    assert_null(tc_multinomial(w, 4, false));
    assert_tc_error(TC_ERR_INVALID, "tc_multinomial: row 0 has 3 positive weights, too few to "
                                    "draw 4 without replacement");
    assert_null(tc_multinomial(neg, 1, true));
    assert_tc_error(TC_ERR_INVALID, "tc_multinomial: weight -1 at row 0, column 1 is not a "
                                    "finite value >= 0");
    assert_null(tc_multinomial(b, 1, true));
    assert_tc_error(TC_ERR_DTYPE, "tc_multinomial: probs must be numbers, got bool");
    tc_tensor *no_cats = tc_ones(2, SHAPE(3, 0), TC_FLOAT32, NULL);
    assert_null(tc_multinomial(no_cats, 1, true));
    assert_tc_error(TC_ERR_SHAPE, "tc_multinomial: probs (3,0) has no categories");
    /* no rows: an empty (0, num_samples) result, as torch's */
    tc_tensor *no_rows = tc_ones(2, SHAPE(0, 3), TC_FLOAT32, NULL);
    for (int replace = 0; replace < 2; replace++) {
        tc_tensor *e = tc_multinomial(no_rows, 2, replace);
        assert_non_null(e);
        assert_int_equal(tc_ndim(e), 2);
        assert_int_equal(tc_shape(e)[0], 0);
        assert_int_equal(tc_shape(e)[1], 2);
        assert_int_equal(tc_realize(&e, 1), TC_OK);
        tc_release(e);
    }
    tc_release(w), tc_release(t3), tc_release(neg), tc_release(b), tc_release(no_cats),
        tc_release(no_rows);
}

static void test_generator_errors(void **state) {
    (void)state;
    assert_null(tc_randint(1, SHAPE(2), 3, 3, TC_INT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_randint: low 3 must be below high 3");
    assert_null(tc_randint(1, SHAPE(2), -1, 10, TC_UINT8, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_randint: [-1, 10) does not fit in uint8");
    assert_null(tc_randint(1, SHAPE(2), 0, 10, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_randint: needs an integer dtype, got float32");
    assert_null(tc_uniform(1, SHAPE(2), 2, 1, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_uniform: [low, high) = [2, 1) needs finite low <= high");
    assert_null(tc_uniform(1, SHAPE(2), 0, 1, TC_INT32, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_uniform: needs a float dtype, got int32");
    assert_null(tc_normal(1, SHAPE(2), 0, -1, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_normal: mean 0 and std -1 must be finite, std >= 0");
    assert_null(tc_normal(1, SHAPE(-2), 0, 1, TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_normal: negative size -2");
}

/* the values come from the host: the same on every device */
static void test_same_on_another_device(void **state) {
    (void)state;
    tc_tensor *probe = tc_ones(1, SHAPE(1), TC_FLOAT32, "OPENCL");
    if (!probe) skip();
    tc_release(probe);
    tc_tensor *ts[2][3];
    const char *devs[2] = {NULL, "OPENCL"};
    for (int d = 0; d < 2; d++) {
        tc_manual_seed(21);
        ts[d][0] = tc_normal(1, SHAPE(9), 1, 2, TC_FLOAT32, devs[d]);
        ts[d][1] = tc_randint(1, SHAPE(9), -50, 50, TC_INT32, devs[d]);
        tc_tensor *w = tc_uniform(2, SHAPE(3, 5), 0, 1, TC_FLOAT32, devs[d]);
        ts[d][2] = tc_multinomial(w, 4, false);
        tc_release(w);
    }
    for (int k = 0; k < 3; k++) {
        void *a = tc_test_read(ts[0][k]), *b = tc_test_read(ts[1][k]);
        assert_memory_equal(a, b, (size_t)tc_numel(ts[0][k]) * 4);
        free(a), free(b);
        tc_release(ts[0][k]), tc_release(ts[1][k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_known_answers),
        TEST(test_shared_counter),
        TEST(test_ranges),
        TEST(test_multinomial),
        TEST(test_multinomial_errors),
        TEST(test_generator_errors),
        TEST(test_same_on_another_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
