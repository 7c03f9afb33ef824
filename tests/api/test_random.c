/* test_random.c - tc_rand, tc_randn and tc_manual_seed: known answers from
 * the published Philox4x32-10 test vector, determinism per seed, the global
 * counter, value ranges and moments, float16 results. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* Random123 tests/kat_vectors, "philox4x32 10", counter 0 and key 0:
 * 6627e8d5 e169c58d bc57ac4c 9b00dbd8. With seed 0 the first block of the
 * first call is this one. */
static const uint32_t kat_zero[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};

/* t's values (a new malloc'ed array); releases t */
static float *read_f32(tc_tensor *t) {
    assert_non_null(t);
    assert_int_equal(tc_get_dtype(t), TC_FLOAT32);
    float *v = tc_test_read(t);
    tc_release(t);
    return v;
}

static void test_rand_known_answer(void **state) {
    (void)state;
    tc_manual_seed(0);
    tc_tensor *t = tc_rand(1, SHAPE(4), TC_FLOAT32, NULL);
    check_meta(t, TC_FLOAT32, 1, SHAPE(4));
    float want[4];
    for (int i = 0; i < 4; i++) want[i] = (float)(kat_zero[i] >> 8) / 16777216.0f; /* top 24 bits */
    expect_f32(t, want, 4, 0, 0, "rand seed 0 vs Philox KAT");
}

static void test_randn_known_answer(void **state) {
    (void)state;
    tc_manual_seed(0);
    tc_tensor *t = tc_randn(1, SHAPE(4), TC_FLOAT32, NULL);
    float want[4];
    for (int j = 0; j < 4; j += 2) { /* Box-Muller on word pairs; u1 in (0,1] */
        double u1 = ((kat_zero[j] >> 8) + 1) / 16777216.0, u2 = (kat_zero[j + 1] >> 8) / 16777216.0;
        double r = sqrt(-2 * log(u1)), th = 2 * M_PI * u2;
        want[j] = (float)(r * cos(th));
        want[j + 1] = (float)(r * sin(th));
    }
    expect_f32(t, want, 4, 1e-6, 1e-6, "randn seed 0 vs Philox KAT + Box-Muller");
}

static void test_seed_determinism_and_counter(void **state) {
    (void)state;
    tc_manual_seed(1234);
    float *a = read_f32(tc_rand(1, SHAPE(10), TC_FLOAT32, NULL));
    float *b = read_f32(tc_rand(1, SHAPE(10), TC_FLOAT32, NULL)); /* the counter moved on */
    tc_manual_seed(1234);
    float *c = read_f32(tc_rand(1, SHAPE(10), TC_FLOAT32, NULL));
    tc_manual_seed(1235);
    float *d = read_f32(tc_rand(1, SHAPE(10), TC_FLOAT32, NULL));
    assert_memory_equal(a, c, sizeof(float) * 10);
    assert_memory_not_equal(a, b, sizeof(float) * 10);
    assert_memory_not_equal(a, d, sizeof(float) * 10);
    /* a call uses whole blocks of 4: 10 values take 3 blocks, so the second
     * call starts at block 3 */
    tc_manual_seed(1234);
    float *e = read_f32(tc_rand(1, SHAPE(24), TC_FLOAT32, NULL));
    assert_memory_equal(e, a, sizeof(float) * 10);
    assert_memory_equal(e + 12, b, sizeof(float) * 10);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
}

static void test_failed_call_keeps_counter(void **state) {
    (void)state;
    tc_manual_seed(0);
    assert_null(tc_rand(1, SHAPE(4), TC_INT32, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_rand: needs a float dtype, got int32");
    assert_null(tc_randn(1, SHAPE(-4), TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_randn: negative size -4");
    assert_null(tc_rand(1, SHAPE(4), TC_FLOAT32, "NOPE"));
    assert_tc_error(TC_ERR_DEVICE, "tc_rand");
    assert_int_equal(tc_synchronize("NOPE"), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "tc_synchronize: ");
    assert_int_equal(tc_synchronize(NULL), TC_OK); /* the CPU: nothing queued */
    assert_int_equal(tc_synchronize("CPU"), TC_OK);
    float *v = read_f32(tc_rand(1, SHAPE(1), TC_FLOAT32, NULL));
    assert_true(v[0] == (float)(kat_zero[0] >> 8) / 16777216.0f);
    free(v);
}

static void test_shutdown_resets_seed(void **state) {
    (void)state;
    tc_manual_seed(99);
    tc_release(tc_rand(1, SHAPE(8), TC_FLOAT32, NULL));
    tc_shutdown();
    float *v = read_f32(tc_rand(1, SHAPE(1), TC_FLOAT32, NULL));
    assert_true(v[0] == (float)(kat_zero[0] >> 8) / 16777216.0f);
    free(v);
}

static void moments(const float *x, int64_t n, double *mean, double *var) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *var = ss / (double)n;
}

static void test_rand_distribution(void **state) {
    (void)state;
    enum { N = 100000 };
    tc_manual_seed(7);
    tc_tensor *t = tc_rand(2, SHAPE(250, 400), TC_FLOAT32, NULL);
    check_meta(t, TC_FLOAT32, 2, SHAPE(250, 400));
    float *x = read_f32(t);
    float lo = 1, hi = 0;
    for (int i = 0; i < N; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
    }
    double mean, var;
    moments(x, N, &mean, &var);
    assert_true(lo >= 0 && hi < 1);
    assert_true(lo < 0.001 && hi > 0.999);
    /* U[0,1): mean 1/2, variance 1/12; 100k samples: standard errors ~0.001 */
    assert_true(fabs(mean - 0.5) < 0.005);
    assert_true(fabs(var - 1.0 / 12) < 0.003);
    free(x);
}

static void test_randn_distribution(void **state) {
    (void)state;
    enum { N = 100001 }; /* odd: the last block is used in part */
    tc_manual_seed(11);
    tc_tensor *t = tc_randn(1, SHAPE(N), TC_FLOAT32, NULL);
    float *x = read_f32(t);
    double mean, var;
    moments(x, N, &mean, &var);
    int64_t within1 = 0;
    for (int i = 0; i < N; i++) within1 += fabsf(x[i]) < 1;
    /* N(0,1): mean 0 (se ~0.003), variance 1 (se ~0.005), 68.27% within 1 sigma */
    assert_true(fabs(mean) < 0.02);
    assert_true(fabs(var - 1) < 0.03);
    assert_true(fabs((double)within1 / N - 0.6827) < 0.01);
    free(x);
}

static void test_float16_results(void **state) {
    (void)state;
    tc_tensor *h = tc_rand(1, SHAPE(4096), TC_FLOAT16, NULL);
    check_meta(h, TC_FLOAT16, 1, SHAPE(4096));
    tc_tensor *f = tc_cast(h, TC_FLOAT32);
    float *x = read_f32(f);
    for (int i = 0; i < 4096; i++) assert_true(x[i] >= 0 && x[i] < 1); /* never rounds to 1 */
    free(x);
    tc_release(h);
    tc_tensor *n = tc_randn(2, SHAPE(3, 5), TC_FLOAT16, NULL);
    check_meta(n, TC_FLOAT16, 2, SHAPE(3, 5));
    tc_release(n);
}

static void test_shapes(void **state) {
    (void)state;
    tc_tensor *s = tc_rand(0, NULL, TC_FLOAT32, NULL);
    check_meta(s, TC_FLOAT32, 0, NULL);
    float *v = read_f32(s);
    assert_true(v[0] >= 0 && v[0] < 1);
    free(v);
    tc_tensor *e = tc_randn(2, SHAPE(0, 7), TC_FLOAT32, NULL);
    check_meta(e, TC_FLOAT32, 2, SHAPE(0, 7));
    tc_release(e);
    /* random tensors feed the graph like any upload */
    tc_tensor *r = tc_rand(1, SHAPE(8), TC_FLOAT32, NULL);
    tc_tensor *lt = tc_lt(r, r);
    uint8_t none[8] = {0};
    expect_values(lt, none, 8, 0, 0, "r < r");
    tc_release(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_rand_known_answer),
        TEST(test_randn_known_answer),
        TEST(test_seed_determinism_and_counter),
        TEST(test_failed_call_keeps_counter),
        TEST(test_shutdown_resets_seed),
        TEST(test_rand_distribution),
        TEST(test_randn_distribution),
        TEST(test_float16_results),
        TEST(test_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
