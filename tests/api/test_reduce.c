/* test_reduce.c - sum, max, min, mean, var and std: axes (negative, several,
 * all), keepdim shapes, result dtypes, empty inputs, and values against
 * loops written here in plain C. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* x is (2,3,4) with x[i][j][k] = (i*12 + j*4 + k) * 0.5 - 5 */
static float x234[24];
static tc_tensor *make_x234(void) {
    for (int i = 0; i < 24; i++) x234[i] = (float)i * 0.5f - 5;
    return f32(3, SHAPE(2, 3, 4), x234);
}
static float at(int i, int j, int k) {
    return x234[i * 12 + j * 4 + k];
}

static void test_sum_axes_and_shapes(void **state) {
    (void)state;
    tc_tensor *x = make_x234();
    /* all axes */
    tc_tensor *s = tc_sum(x, 0, NULL, false);
    check_meta(s, TC_FLOAT32, 0, NULL);
    float total = 0;
    for (int i = 0; i < 24; i++) total += x234[i];
    expect_f32(s, &total, 1, 1e-6, 1e-6, "sum all");
    tc_tensor *sk = tc_sum(x, 0, NULL, true);
    check_meta(sk, TC_FLOAT32, 3, SHAPE(1, 1, 1));
    tc_release(sk);

    /* axis 1 and axis -2 are the same */
    float w1[8];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++) w1[i * 4 + k] = at(i, 0, k) + at(i, 1, k) + at(i, 2, k);
    tc_tensor *s1 = tc_sum(x, 1, AXES(1), false), *sm2 = tc_sum(x, 1, AXES(-2), true);
    check_meta(s1, TC_FLOAT32, 2, SHAPE(2, 4));
    check_meta(sm2, TC_FLOAT32, 3, SHAPE(2, 1, 4));
    expect_f32(s1, w1, 8, 1e-6, 1e-6, "sum axis 1");
    expect_f32(sm2, w1, 8, 1e-6, 1e-6, "sum axis -2 keepdim");

    /* two axes, given in any order */
    float w02[3];
    for (int j = 0; j < 3; j++) {
        w02[j] = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) w02[j] += at(i, j, k);
    }
    tc_tensor *s02 = tc_sum(x, 2, AXES(2, 0), false);
    check_meta(s02, TC_FLOAT32, 1, SHAPE(3));
    expect_f32(s02, w02, 3, 1e-6, 1e-6, "sum axes (2,0)");
    tc_tensor *s02k = tc_sum(x, 2, AXES(-1, 0), true);
    check_meta(s02k, TC_FLOAT32, 3, SHAPE(1, 3, 1));
    expect_f32(s02k, w02, 3, 1e-6, 1e-6, "sum axes (-1,0) keepdim");
    tc_release(x);
}

static void test_sum_dtypes(void **state) {
    (void)state;
    uint8_t b[5] = {1, 0, 1, 1, 1};
    tc_tensor *tb = from(b, TC_BOOL, 1, SHAPE(5)), *s = tc_sum(tb, 0, NULL, false);
    check_meta(s, TC_INT32, 0, NULL);
    int32_t wb = 4;
    expect_values(s, &wb, 1, 0, 0, "sum bool -> int32");
    tc_release(tb);

    uint8_t u[4] = {200, 100, 255, 1}; /* 556: would wrap in uint8 */
    tc_tensor *tu = from(u, TC_UINT8, 1, SHAPE(4));
    s = tc_sum(tu, 0, NULL, false);
    check_meta(s, TC_INT32, 0, NULL);
    int32_t wu = 556;
    expect_values(s, &wu, 1, 0, 0, "sum uint8 -> int32");
    tc_release(tu);

    int32_t i[3] = {-5, 7, 100};
    tc_tensor *ti = from(i, TC_INT32, 1, SHAPE(3));
    s = tc_sum(ti, 0, NULL, false);
    check_meta(s, TC_INT32, 0, NULL);
    int32_t wi = 102;
    expect_values(s, &wi, 1, 0, 0, "sum int32");
    tc_release(ti);

    int64_t l[3] = {(int64_t)1 << 40, (int64_t)1 << 41, -3};
    tc_tensor *tl = from(l, TC_INT64, 1, SHAPE(3));
    s = tc_sum(tl, 0, NULL, false);
    check_meta(s, TC_INT64, 0, NULL);
    int64_t wl = ((int64_t)1 << 40) + ((int64_t)1 << 41) - 3;
    expect_values(s, &wl, 1, 0, 0, "sum int64");
    tc_release(tl);

    /* float16 accumulates in float32: 4096 ones sum to 4096 exactly, which a
     * float16 accumulator could not reach (it sticks at 2048) */
    tc_tensor *h = tc_ones(1, SHAPE(4096), TC_FLOAT16, NULL);
    s = tc_sum(h, 0, NULL, false);
    check_meta(s, TC_FLOAT16, 0, NULL);
    tc_tensor *sf = tc_cast(s, TC_FLOAT32);
    float wh = 4096;
    expect_f32(sf, &wh, 1, 0, 0, "sum float16 accumulates in float32");
    tc_release(s);
    tc_release(h);
}

static void test_max_min(void **state) {
    (void)state;
    tc_tensor *x = make_x234();
    float wmax[6], wmin[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            wmax[i * 3 + j] = -INFINITY;
            wmin[i * 3 + j] = INFINITY;
            for (int k = 0; k < 4; k++) {
                wmax[i * 3 + j] = fmaxf(wmax[i * 3 + j], at(i, j, k));
                wmin[i * 3 + j] = fminf(wmin[i * 3 + j], at(i, j, k));
            }
        }
    tc_tensor *mx = tc_max(x, 1, AXES(-1), false), *mn = tc_min(x, 1, AXES(2), true);
    check_meta(mx, TC_FLOAT32, 2, SHAPE(2, 3));
    check_meta(mn, TC_FLOAT32, 3, SHAPE(2, 3, 1));
    expect_f32(mx, wmax, 6, 0, 0, "max axis -1");
    expect_f32(mn, wmin, 6, 0, 0, "min axis 2 keepdim");
    float all_max = 6.5f, all_min = -5;
    expect_f32(tc_max(x, 0, NULL, false), &all_max, 1, 0, 0, "max all");
    expect_f32(tc_min(x, 0, NULL, false), &all_min, 1, 0, 0, "min all");
    tc_release(x);

    int32_t i[4] = {INT32_MIN, 5, INT32_MAX, -7};
    tc_tensor *ti = from(i, TC_INT32, 2, SHAPE(2, 2));
    int32_t imax[2] = {5, INT32_MAX}, imin[2] = {INT32_MIN, -7};
    tc_tensor *r = tc_max(ti, 1, AXES(1), false);
    check_meta(r, TC_INT32, 1, SHAPE(2));
    expect_values(r, imax, 2, 0, 0, "max int32 extremes");
    expect_values(tc_min(ti, 1, AXES(1), false), imin, 2, 0, 0, "min int32 extremes");
    tc_release(ti);

    uint8_t u[4] = {0, 255, 128, 3};
    tc_tensor *tu = from(u, TC_UINT8, 1, SHAPE(4));
    uint8_t umax = 255, umin = 0;
    expect_values(tc_max(tu, 0, NULL, false), &umax, 1, 0, 0, "max uint8");
    expect_values(tc_min(tu, 0, NULL, false), &umin, 1, 0, 0, "min uint8");
    tc_release(tu);

    uint8_t b[4] = {1, 1, 0, 1};
    tc_tensor *tb = from(b, TC_BOOL, 2, SHAPE(2, 2));
    uint8_t any[2] = {1, 1}, all[2] = {1, 0};
    r = tc_max(tb, 1, AXES(1), false);
    check_meta(r, TC_BOOL, 1, SHAPE(2));
    expect_values(r, any, 2, 0, 0, "max bool (any)");
    expect_values(tc_min(tb, 1, AXES(1), false), all, 2, 0, 0, "min bool (all)");
    tc_release(tb);
}

static void test_mean(void **state) {
    (void)state;
    tc_tensor *x = make_x234();
    float wm[4];
    for (int k = 0; k < 4; k++) {
        wm[k] = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) wm[k] += at(i, j, k);
        wm[k] /= 6;
    }
    tc_tensor *m = tc_mean(x, 2, AXES(0, 1), false);
    check_meta(m, TC_FLOAT32, 1, SHAPE(4));
    expect_f32(m, wm, 4, 1e-6, 1e-6, "mean axes (0,1)");
    tc_tensor *mk = tc_mean(x, 2, AXES(0, 1), true);
    check_meta(mk, TC_FLOAT32, 3, SHAPE(1, 1, 4));
    tc_release(mk);
    tc_release(x);

    int32_t i[4] = {1, 2, 3, 5};
    tc_tensor *ti = from(i, TC_INT32, 1, SHAPE(4));
    tc_tensor *mi = tc_mean(ti, 0, NULL, false);
    check_meta(mi, TC_FLOAT32, 0, NULL); /* int inputs give float32 */
    float wi = 2.75f;
    expect_f32(mi, &wi, 1, 1e-6, 0, "mean int32");
    tc_release(ti);

    tc_tensor *h = tc_full(2, SHAPE(3, 4), 0.5, TC_FLOAT16, NULL);
    tc_tensor *mh = tc_mean(h, 1, AXES(1), false);
    check_meta(mh, TC_FLOAT16, 1, SHAPE(3));
    tc_tensor *mhf = tc_cast(mh, TC_FLOAT32);
    float wh[3] = {0.5f, 0.5f, 0.5f};
    expect_f32(mhf, wh, 3, 0, 0, "mean float16");
    tc_release(mh);
    tc_release(h);
}

/* variance of n values with a correction, two-pass in double */
static double ref_var(const float *v, int n, int stride, int correction) {
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) m += v[i * stride];
    m /= n;
    for (int i = 0; i < n; i++) ss += (v[i * stride] - m) * (v[i * stride] - m);
    return ss / (n - correction > 0 ? n - correction : 0);
}

static void test_var_std(void **state) {
    (void)state;
    float v[8] = {1, 2, 4, 7, -3, 0.5f, 10, 2};
    tc_tensor *t = f32(2, SHAPE(2, 4), v);
    for (int c = 0; c <= 1; c++) {
        float wrow[2] = {(float)ref_var(v, 4, 1, c), (float)ref_var(v + 4, 4, 1, c)};
        float wcol[4], wall = (float)ref_var(v, 8, 1, c), wstd[2];
        for (int k = 0; k < 4; k++) wcol[k] = (float)ref_var(v + k, 2, 4, c);
        for (int r = 0; r < 2; r++) wstd[r] = sqrtf(wrow[r]);
        tc_tensor *vr = tc_var(t, 1, AXES(1), false, c);
        check_meta(vr, TC_FLOAT32, 1, SHAPE(2));
        expect_f32(vr, wrow, 2, 1e-5, 1e-6, c ? "var rows, correction 1" : "var rows");
        expect_f32(tc_var(t, 1, AXES(0), false, c), wcol, 4, 1e-5, 1e-6, "var cols");
        expect_f32(tc_var(t, 0, NULL, false, c), &wall, 1, 1e-5, 1e-6, "var all");
        tc_tensor *sd = tc_std(t, 1, AXES(-1), true, c);
        check_meta(sd, TC_FLOAT32, 2, SHAPE(2, 1));
        expect_f32(sd, wstd, 2, 1e-5, 1e-6, "std rows keepdim");
    }
    /* one value with correction 1: 0/0 = NaN (like torch) */
    float nan = NAN, zero = 0;
    tc_tensor *one = f32(1, SHAPE(1), v);
    expect_f32(tc_var(one, 0, NULL, false, 1), &nan, 1, 0, 0, "var of one value, correction 1");
    expect_f32(tc_var(one, 0, NULL, false, 0), &zero, 1, 0, 0, "var of one value");
    tc_release(one);
    /* ints compute in float32 */
    int32_t iv[4] = {1, 2, 3, 4};
    tc_tensor *ti = from(iv, TC_INT32, 1, SHAPE(4));
    tc_tensor *si = tc_std(ti, 0, NULL, false, 1);
    check_meta(si, TC_FLOAT32, 0, NULL);
    float ws = sqrtf(5.0f / 3);
    expect_f32(si, &ws, 1, 1e-6, 0, "std int32");
    tc_release(ti);
    tc_release(t);
}

static void test_empty_inputs(void **state) {
    (void)state;
    tc_tensor *e = tc_zeros(1, SHAPE(0), TC_FLOAT32, NULL);
    float zero = 0, ninf = -INFINITY, pinf = INFINITY, nan = NAN;
    expect_f32(tc_sum(e, 0, NULL, false), &zero, 1, 0, 0, "sum of nothing");
    expect_f32(tc_max(e, 0, NULL, false), &ninf, 1, 0, 0, "max of nothing");
    expect_f32(tc_min(e, 0, NULL, false), &pinf, 1, 0, 0, "min of nothing");
    expect_f32(tc_mean(e, 0, NULL, false), &nan, 1, 0, 0, "mean of nothing");
    expect_f32(tc_var(e, 0, NULL, false, 1), &nan, 1, 0, 0, "var of nothing");
    tc_release(e);

    tc_tensor *ei = tc_zeros(2, SHAPE(2, 0), TC_INT32, NULL);
    int32_t z2[2] = {0, 0}, lo[2] = {INT32_MIN, INT32_MIN}, hi[2] = {INT32_MAX, INT32_MAX};
    tc_tensor *s = tc_sum(ei, 1, AXES(1), false);
    check_meta(s, TC_INT32, 1, SHAPE(2));
    expect_values(s, z2, 2, 0, 0, "sum over an empty axis");
    expect_values(tc_max(ei, 1, AXES(1), false), lo, 2, 0, 0, "max int32 of nothing");
    expect_values(tc_min(ei, 1, AXES(-1), false), hi, 2, 0, 0, "min int32 of nothing");
    /* reducing the non-empty axis keeps the empty one */
    tc_tensor *s0 = tc_sum(ei, 1, AXES(0), false);
    check_meta(s0, TC_INT32, 1, SHAPE(0));
    tc_release(s0);
    tc_release(ei);
}

static void test_scalar_and_size_one(void **state) {
    (void)state;
    tc_tensor *s = scalar(3.5, TC_FLOAT32);
    tc_tensor *r = tc_sum(s, 0, NULL, false);
    check_meta(r, TC_FLOAT32, 0, NULL);
    float w = 3.5f;
    expect_f32(r, &w, 1, 0, 0, "sum of a scalar");
    expect_f32(tc_max(s, 0, NULL, true), &w, 1, 0, 0, "max of a scalar");
    tc_release(s);

    float v[3] = {1, -2, 3};
    tc_tensor *t = f32(2, SHAPE(3, 1), v);
    tc_tensor *m = tc_max(t, 1, AXES(1), false);
    check_meta(m, TC_FLOAT32, 1, SHAPE(3));
    expect_f32(m, v, 3, 0, 0, "max over a size-1 axis");
    tc_release(t);
}

static void test_reduce_of_expression(void **state) {
    (void)state;
    /* sum((x - mean(x))^2) over rows of a lazy expression, then softmax-like
     * max-subtract: the front end composes, the engine fuses */
    float v[6] = {1, 2, 3, 4, 6, 8};
    tc_tensor *t = f32(2, SHAPE(2, 3), v);
    tc_tensor *mx = tc_max(t, 1, AXES(1), true);
    tc_tensor *d = tc_sub(t, mx), *e = tc_exp(d), *s = tc_sum(e, 1, AXES(1), true);
    tc_tensor *p = tc_div(e, s);
    float want[6];
    for (int r = 0; r < 2; r++) {
        double m = fmax(fmax(v[r * 3], v[r * 3 + 1]), v[r * 3 + 2]), z = 0;
        for (int k = 0; k < 3; k++) z += exp(v[r * 3 + k] - m);
        for (int k = 0; k < 3; k++) want[r * 3 + k] = (float)(exp(v[r * 3 + k] - m) / z);
    }
    check_meta(p, TC_FLOAT32, 2, SHAPE(2, 3));
    expect_f32(p, want, 6, 1e-5, 1e-7, "softmax from primitives");
    tc_tensor *all[] = {t, mx, d, e, s};
    for (int i = 0; i < (int)COUNT(all); i++) tc_release(all[i]);
}

/* a reduce of a large tensor to one value runs as two kernels (parts, then
 * the parts: the first one shares its rows between threads); reduces whose
 * outputs have company, and sizes with no divisor into parts, stay one */
static void test_large_reduce_split(void **state) {
    (void)state;
    const int64_t n = 3 << 20;
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    double want = 0;
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 7 - 3), want += v[i]; /* exact in float */
    tc_tensor *x = f32(3, SHAPE(3, 1024, 1024), v);
    tc_tensor *s = tc_sum(x, 3, AXES(0, 1, 2), false), *m = tc_max(x, 3, AXES(0, 1, 2), false);
    tc_tensor *mn = tc_min(x, 3, AXES(0, 1, 2), false), *rows = tc_sum(x, 2, AXES(1, 2), true);
    assert_int_equal(tc_schedule_kernel_count(&s, 1), 2);
    assert_int_equal(tc_schedule_kernel_count(&m, 1), 2);
    assert_int_equal(tc_schedule_kernel_count(&rows, 1), 1);
    expect_f32(s, (float[]){(float)want}, 1, 0, 0, "sum of 3M");
    expect_f32(m, (float[]){3}, 1, 0, 0, "max of 3M");
    expect_f32(mn, (float[]){-3}, 1, 0, 0, "min of 3M");
    float rw[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) rw[i >> 20] += v[i];
    expect_f32(rows, rw, 3, 0, 0, "sums of 3 rows of 1M");
    /* 2^20 + 7 is prime: no parts, one kernel */
    tc_tensor *p = f32(1, SHAPE((1 << 20) + 7), v);
    tc_tensor *ps = tc_sum(p, 1, AXES(0), false);
    assert_int_equal(tc_schedule_kernel_count(&ps, 1), 1);
    double pw = 0;
    for (int64_t i = 0; i < (1 << 20) + 7; i++) pw += v[i];
    expect_f32(ps, (float[]){(float)pw}, 1, 0, 0, "sum of a prime count");
    tc_release(x); /* expect_f32 released the results */
    tc_release(p);
    free(v);
}

/* a reduce to many values that each reduce many inputs (a weight gradient's
 * shape: batch and pixels per weight) runs as two kernels: parts of the
 * outermost reduced axis, then the parts; reduces to few values (per-channel
 * statistics) and to values of few inputs stay one kernel */
static void test_partial_reduce_split(void **state) {
    (void)state;
    const int64_t b = 512, c = 256, k = 64, n = b * c * k;
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = (float)((i * 7919) % 13) - 6; /* exact sums */
    tc_tensor *x = f32(3, SHAPE(b, c, k), v);
    tc_tensor *s = tc_sum(x, 2, AXES(0, 2), false), *m = tc_max(x, 2, AXES(2, 0), true);
    tc_tensor *few = tc_sum(x, 2, AXES(0, 1), false);              /* 64 outputs */
    tc_tensor *rows = tc_sum(x, 1, AXES(2), false);                 /* 64 inputs each */
    assert_int_equal(tc_schedule_kernel_count(&s, 1), 2);
    assert_int_equal(tc_schedule_kernel_count(&m, 1), 2);
    assert_int_equal(tc_schedule_kernel_count(&few, 1), 1);
    assert_int_equal(tc_schedule_kernel_count(&rows, 1), 1);
    float *ws = calloc((size_t)c, sizeof(float)), *wm = malloc(sizeof(float) * (size_t)c);
    float *wf = calloc((size_t)k, sizeof(float));
    assert_non_null(ws), assert_non_null(wm), assert_non_null(wf);
    for (int64_t j = 0; j < c; j++) wm[j] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = (i / k) % c;
        ws[j] += v[i], wm[j] = fmaxf(wm[j], v[i]), wf[i % k] += v[i];
    }
    expect_f32(s, ws, c, 0, 0, "sum over (0, 2) in parts");
    expect_f32(m, wm, c, 0, 0, "max over (2, 0) in parts, keepdim");
    expect_f32(few, wf, k, 0, 0, "sum over (0, 1), one kernel");
    tc_release(rows), tc_release(x);
    free(v), free(ws), free(wm), free(wf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_large_reduce_split),
        TEST(test_partial_reduce_split),
        TEST(test_sum_axes_and_shapes),
        TEST(test_sum_dtypes),
        TEST(test_max_min),
        TEST(test_mean),
        TEST(test_var_std),
        TEST(test_empty_inputs),
        TEST(test_scalar_and_size_one),
        TEST(test_reduce_of_expression),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
