/* test_scan.c - tc_cumsum and tc_cumprod (every axis, dtypes, edge shapes,
 * rows scanned in blocks), tc_any/tc_all, tc_logsumexp and the reductions and softmaxes of
 * 0-d tensors, against loops written here in plain C. Kernel counts where
 * fusion is the point, checked exactly with tc_check_schedule (which also
 * compares with the reference evaluator): a cumsum over rows of up to 512 is
 * one kernel (the windowed view and its sum), its gradient one kernel, a
 * cumprod one kernel (the same windows, multiplied), and
 * logsumexp one kernel (max and sum of exp). Public API only. */
#include <math.h>

#include "api_helpers.h"

/* running sums of x (outer, n, inner) along the middle axis */
static void host_cumsum(const float *x, float *out, int64_t outer, int64_t n, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double acc = 0;
            for (int64_t i = 0; i < n; i++) {
                acc += x[(o * n + i) * inner + k];
                out[(o * n + i) * inner + k] = (float)acc;
            }
        }
}

static void test_cumsum_axes(void **state) {
    (void)state;
    float x[24], want[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11) - 4.5f;
    tc_tensor *t = f32(3, SHAPE(2, 3, 4), x);
    static const int axes[3][3] = {{1, 2, 12}, {2, 3, 4}, {6, 4, 1}}; /* outer, n, inner */
    for (int ax = 0; ax < 3; ax++) {
        host_cumsum(x, want, axes[ax][0], axes[ax][1], axes[ax][2]);
        tc_tensor *r = tc_cumsum(t, ax);
        check_meta(r, TC_FLOAT32, 3, SHAPE(2, 3, 4));
        expect_f32(r, want, 24, 1e-6, 1e-5, "cumsum");
        expect_f32(tc_cumsum(t, ax - 3), want, 24, 1e-6, 1e-5, "cumsum, negative axis");
    }
    tc_release(t);
}

static void test_cumsum_dtypes_and_edges(void **state) {
    (void)state;
    int32_t v[5] = {3, -1, 4, 1, -5}, vw[5] = {3, 2, 6, 7, 2};
    tc_tensor *t = from(v, TC_INT32, 1, SHAPE(5)), *r = tc_cumsum(t, 0);
    check_meta(r, TC_INT32, 1, SHAPE(5));
    expect_values(r, vw, 5, 0, 0, "cumsum int32");
    tc_release(t);
    bool b[4] = {true, false, true, true};
    int32_t bw[4] = {1, 1, 2, 3};
    t = from(b, TC_BOOL, 1, SHAPE(4)), r = tc_cumsum(t, 0);
    check_meta(r, TC_INT32, 1, SHAPE(4)); /* tc_sum's dtype */
    expect_values(r, bw, 4, 0, 0, "cumsum bool");
    tc_release(t);
    t = from(b, TC_BOOL, 1, SHAPE(1)), r = tc_cumsum(t, 0); /* one element: still int32 */
    check_meta(r, TC_INT32, 1, SHAPE(1));
    tc_release(r), tc_release(t);
    t = tc_zeros(2, SHAPE(3, 0), TC_FLOAT32, NULL), r = tc_cumsum(t, 1);
    check_meta(r, TC_FLOAT32, 2, SHAPE(3, 0));
    tc_release(r), tc_release(t);
    t = scalar(2.5, TC_FLOAT32);
    float two5 = 2.5f;
    r = tc_cumsum(t, 0);
    check_meta(r, TC_FLOAT32, 0, NULL);
    expect_f32(r, &two5, 1, 0, 0, "cumsum of a 0-d tensor");
    expect_f32(tc_cumsum(t, -1), &two5, 1, 0, 0, "cumsum of a 0-d tensor, axis -1");
    tc_release(t);
}

/* rows longer than 512 go through blocks: values still match */
static void test_cumsum_long_rows(void **state) {
    (void)state;
    static const int64_t lens[3] = {513, 1300, 140000};
    for (int k = 0; k < 3; k++) {
        int64_t n = lens[k];
        float *x = malloc(sizeof(float) * 2 * (size_t)n),
              *want = malloc(sizeof(float) * 2 * (size_t)n);
        for (int64_t i = 0; i < 2 * n; i++) x[i] = (float)((i * 37) % 17) / 16.0f - 0.25f;
        host_cumsum(x, want, 2, n, 1);
        tc_tensor *t = f32(2, SHAPE(2, n), x);
        expect_f32(tc_cumsum(t, 1), want, 2 * n, 1e-5, 2e-3, "blocked cumsum");
        tc_release(t);
        free(x), free(want);
    }
}

static void test_cumsum_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(6, 512), 11, -2, 2);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *r = tc_cumsum(x, 1);
    tc_check_schedule(r, 1, 1e-5, 1e-4, "cumsum over rows of 512");
    tc_tensor *c = tc_cumsum(x, 0);
    tc_check_schedule(c, 1, 1e-5, 1e-4, "cumsum down columns (a strided axis)");
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *y = tc_cumsum(x, 1), *w = tc_test_randn(2, SHAPE(6, 512), 12, -1, 1);
    assert_int_equal(tc_realize(&w, 1), TC_OK);
    tc_tensor *p = tc_mul(y, w), *loss = tc_sum(p, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    /* the gradient is a view (a shrink) of its reduce's output; its reader
     * (here an SGD-like update) runs in the same kernel */
    tc_tensor *g = tc_grad(x), *lr = scalar(-0.1, TC_FLOAT32), *step = tc_mul(g, lr);
    tc_tensor *upd = tc_add(x, step);
    tc_check_schedule(upd, 1, 1e-5, 1e-4, "x - 0.1 * cumsum's gradient (a reversed running sum)");
    tc_tensor *ts[12] = {x, r, c, y, w, p, loss, g, lr, step, upd, NULL};
    for (int i = 0; ts[i]; i++) tc_release(ts[i]);
}

/* running products of x (outer, n, inner) along the middle axis, in double */
static void host_cumprod(const float *x, float *out, int64_t outer, int64_t n, int64_t inner) {
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double acc = 1;
            for (int64_t i = 0; i < n; i++) {
                acc *= x[(o * n + i) * inner + k];
                out[(o * n + i) * inner + k] = (float)acc;
            }
        }
}

static void test_cumprod_axes(void **state) {
    (void)state;
    float x[24], want[24];
    for (int i = 0; i < 24; i++) x[i] = (float)((i * 7) % 11) / 4 - 1.25f; /* zeros too */
    tc_tensor *t = f32(3, SHAPE(2, 3, 4), x);
    static const int axes[3][3] = {{1, 2, 12}, {2, 3, 4}, {6, 4, 1}}; /* outer, n, inner */
    for (int ax = 0; ax < 3; ax++) {
        host_cumprod(x, want, axes[ax][0], axes[ax][1], axes[ax][2]);
        tc_tensor *r = tc_cumprod(t, ax);
        check_meta(r, TC_FLOAT32, 3, SHAPE(2, 3, 4));
        expect_f32(r, want, 24, 1e-6, 1e-6, "cumprod");
        expect_f32(tc_cumprod(t, ax - 3), want, 24, 1e-6, 1e-6, "cumprod, negative axis");
    }
    tc_release(t);
}

static void test_cumprod_dtypes_and_edges(void **state) {
    (void)state;
    int32_t v[6] = {3, -1, 4, 1, -5, 100000}, vw[6] = {3, -3, -12, -12, 60, 6000000};
    tc_tensor *t = from(v, TC_INT32, 1, SHAPE(6)), *r = tc_cumprod(t, 0);
    check_meta(r, TC_INT32, 1, SHAPE(6));
    expect_values(r, vw, 6, 0, 0, "cumprod int32 (exact)");
    tc_release(t);
    const uint64_t big = 3037000499ULL; /* big^2 fits int64, 2 big^2 wraps */
    int64_t l[3] = {(int64_t)big, (int64_t)big, 2},
            lw[3] = {(int64_t)big, (int64_t)(big * big), (int64_t)(big * big * 2)};
    t = from(l, TC_INT64, 1, SHAPE(3)), r = tc_cumprod(t, 0);
    check_meta(r, TC_INT64, 1, SHAPE(3));
    expect_values(r, lw, 3, 0, 0, "cumprod int64 (exact, wrapping as C)");
    tc_release(t);
    bool b[4] = {true, true, false, true};
    int32_t bw[4] = {1, 1, 0, 0};
    t = from(b, TC_BOOL, 1, SHAPE(4)), r = tc_cumprod(t, 0);
    check_meta(r, TC_INT32, 1, SHAPE(4)); /* tc_sum's dtype */
    expect_values(r, bw, 4, 0, 0, "cumprod bool");
    tc_release(t);
    uint16_t h[4] = {0x4000 /* 2 */, 0x3800 /* 0.5 */, 0x4200 /* 3 */, 0xC000 /* -2 */};
    uint16_t hw[4] = {0x4000 /* 2 */, 0x3C00 /* 1 */, 0x4200 /* 3 */, 0xC600 /* -6 */};
    t = from(h, TC_FLOAT16, 1, SHAPE(4)), r = tc_cumprod(t, 0);
    check_meta(r, TC_FLOAT16, 1, SHAPE(4));
    expect_values(r, hw, 4, 0, 0, "cumprod float16");
    tc_release(t);
    t = tc_zeros(2, SHAPE(3, 0), TC_FLOAT32, NULL), r = tc_cumprod(t, 1);
    check_meta(r, TC_FLOAT32, 2, SHAPE(3, 0));
    tc_release(r);
    r = tc_cumprod(t, 0);
    check_meta(r, TC_FLOAT32, 2, SHAPE(3, 0));
    tc_release(r), tc_release(t);
    t = scalar(-2.5, TC_FLOAT32);
    float m25 = -2.5f;
    r = tc_cumprod(t, 0);
    check_meta(r, TC_FLOAT32, 0, NULL);
    expect_f32(r, &m25, 1, 0, 0, "cumprod of a 0-d tensor");
    expect_f32(tc_cumprod(t, -1), &m25, 1, 0, 0, "cumprod of a 0-d tensor, axis -1");
    tc_release(t);
}

/* rows longer than 512 go through blocks (products of the blocks before) */
static void test_cumprod_long_rows(void **state) {
    (void)state;
    static const int64_t lens[3] = {513, 1300, 70000};
    for (int k = 0; k < 3; k++) {
        int64_t n = lens[k];
        float *x = malloc(sizeof(float) * 2 * (size_t)n),
              *want = malloc(sizeof(float) * 2 * (size_t)n);
        for (int64_t i = 0; i < 2 * n; i++) x[i] = 1 + (float)((i * 37) % 17 - 8) / 4096.0f;
        x[n + 700 % n] = 0; /* a zero in the second row: zeros from there on */
        host_cumprod(x, want, 2, n, 1);
        tc_tensor *t = f32(2, SHAPE(2, n), x);
        expect_f32(tc_cumprod(t, 1), want, 2 * n, 2e-4, 1e-30, "blocked cumprod");
        tc_release(t);
        free(x), free(want);
    }
}

static void test_cumprod_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(6, 512), 21, 0.9, 1.1);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *r = tc_cumprod(x, 1);
    tc_check_schedule(r, 1, 1e-5, 1e-30, "cumprod over rows of 512");
    tc_tensor *c = tc_cumprod(x, 0);
    tc_check_schedule(c, 1, 1e-5, 1e-30, "cumprod down columns (a strided axis)");
    tc_tensor *two = scalar(2, TC_FLOAT32), *e = tc_mul(x, two), *p = tc_cumprod(e, 1);
    tc_tensor *s = tc_sum(p, 1, AXES(1), false);
    tc_check_schedule(s, 1, 1e-5, 1e-30, "2x, cumprod over rows and their sum: one kernel");
    tc_tensor *ts[] = {x, r, c, two, e, p, s};
    for (size_t i = 0; i < COUNT(ts); i++) tc_release(ts[i]);
}

static void test_any_all(void **state) {
    (void)state;
    float x[6] = {0, 1, 2, 0, 0, 0}; /* (2,3) */
    tc_tensor *t = f32(2, SHAPE(2, 3), x);
    bool any1[2] = {true, false}, all1[2] = {false, false}, any0[3] = {false, true, true};
    tc_tensor *r = tc_any(t, 1, AXES(1), false);
    check_meta(r, TC_BOOL, 1, SHAPE(2));
    expect_values(r, any1, 2, 0, 0, "any axis 1");
    expect_values(tc_all(t, 1, AXES(-1), false), all1, 2, 0, 0, "all axis -1");
    r = tc_any(t, 1, AXES(0), true);
    check_meta(r, TC_BOOL, 2, SHAPE(1, 3));
    expect_values(r, any0, 3, 0, 0, "any axis 0 keepdim");
    bool yes = true, no = false;
    expect_values(tc_any(t, 2, AXES(1, 0), false), &yes, 1, 0, 0, "any over an axis tuple");
    expect_values(tc_all(t, 0, NULL, false), &no, 1, 0, 0, "all");
    tc_release(t);
    uint8_t u[3] = {1, 2, 3};
    t = from(u, TC_UINT8, 1, SHAPE(3));
    expect_values(tc_all(t, 0, NULL, false), &yes, 1, 0, 0, "all uint8");
    tc_release(t);
    t = tc_zeros(2, SHAPE(0, 2), TC_INT32, NULL);
    expect_values(tc_any(t, 0, NULL, false), &no, 1, 0, 0, "any of nothing");
    expect_values(tc_all(t, 0, NULL, false), &yes, 1, 0, 0, "all of nothing");
    tc_release(t);
}

static void test_logsumexp(void **state) {
    (void)state;
    float x[8] = {1, 2, 3, 4, -1000, -1000, INFINITY, 0}; /* (4,2) */
    float want[4];
    for (int i = 0; i < 2; i++) want[i] = (float)log(exp(x[2 * i]) + exp(x[2 * i + 1]));
    want[2] = (float)(-1000 + log(2.0));
    want[3] = INFINITY;
    tc_tensor *t = f32(2, SHAPE(4, 2), x), *r = tc_logsumexp(t, 1, AXES(1), false);
    check_meta(r, TC_FLOAT32, 1, SHAPE(4));
    expect_f32(r, want, 4, 1e-6, 1e-5, "logsumexp rows");
    float ninf[2] = {-INFINITY, -INFINITY}, ninf_want = -INFINITY;
    tc_tensor *n = f32(1, SHAPE(2), ninf);
    expect_f32(tc_logsumexp(n, 0, NULL, true), &ninf_want, 1, 0, 0, "logsumexp of -inf");
    tc_release(n), tc_release(t);
    tc_tensor *y = tc_test_randn(2, SHAPE(16, 33), 13, -3, 3);
    assert_int_equal(tc_realize(&y, 1), TC_OK);
    r = tc_logsumexp(y, 1, AXES(-1), true);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "logsumexp (16,33): max and sum of exp in one kernel");
    tc_release(r), tc_release(y);
}

/* a 0-d tensor's axis 0 or -1 is its one element (torch, tinygrad) */
static void test_zero_d_axes(void **state) {
    (void)state;
    tc_tensor *s = scalar(1.5, TC_FLOAT32);
    float v = 1.5f, one = 1, zero = 0;
    expect_f32(tc_sum(s, 1, AXES(0), false), &v, 1, 0, 0, "sum axis 0");
    expect_f32(tc_max(s, 1, AXES(-1), true), &v, 1, 0, 0, "max axis -1");
    expect_f32(tc_mean(s, 1, AXES(0), false), &v, 1, 0, 0, "mean");
    expect_f32(tc_std(s, 1, AXES(0), false, 0), &zero, 1, 0, 0, "std, correction 0");
    expect_f32(tc_softmax(s, 0), &one, 1, 0, 0, "softmax");
    expect_f32(tc_log_softmax(s, -1), &zero, 1, 0, 0, "log_softmax");
    expect_f32(tc_logsumexp(s, 1, AXES(0), false), &v, 1, 1e-7, 0, "logsumexp");
    tc_tensor *r = tc_var(s, 1, AXES(0), false, 1);
    check_meta(r, TC_FLOAT32, 0, NULL);
    assert_true(isnan(first_value(r))); /* no degrees of freedom, as torch */
    tc_release(r);
    r = tc_argmax(s, 0, false);
    check_meta(r, TC_INT32, 0, NULL);
    int32_t i0 = 0;
    expect_values(r, &i0, 1, 0, 0, "argmax");
    bool yes = true;
    r = tc_any(s, 1, AXES(0), false);
    check_meta(r, TC_BOOL, 0, NULL);
    expect_values(r, &yes, 1, 0, 0, "any");
    tc_release(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_cumsum_axes),       TEST(test_cumsum_dtypes_and_edges),
        TEST(test_cumsum_long_rows),  TEST(test_cumsum_one_kernel),
        TEST(test_cumprod_axes),      TEST(test_cumprod_dtypes_and_edges),
        TEST(test_cumprod_long_rows), TEST(test_cumprod_one_kernel),
        TEST(test_any_all),           TEST(test_logsumexp),
        TEST(test_zero_d_axes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
