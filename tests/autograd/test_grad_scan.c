/* test_grad_scan.c - gradients of tc_cumsum and tc_cumprod (every axis, a
 * non-contiguous input, a row long enough to be scanned in blocks; cumprod
 * with zeros in its rows: one, two, at the ends), tc_logsumexp and of
 * std/var with a correction, against central finite differences in double
 * on the host (grad_check.h); and std over size-1 axes (or of equal values),
 * whose gradient is 0 as in torch, not NaN. Tolerances as test_grad.c's. */
#include "grad_check.h"

#define RTOL 2e-3
#define ATOL 2e-4

typedef struct {
    int axis;        /* the scanned or reduced axis */
    int64_t dims[3]; /* the input's (2-d or 3-d, dims[2] 0 for 2-d) */
} scan_arg;

static int64_t numel3(const scan_arg *a) {
    return a->dims[0] * a->dims[1] * (a->dims[2] ? a->dims[2] : 1);
}

/* (outer, n, inner) of dims around axis */
static void split3(const scan_arg *a, int64_t *outer, int64_t *n, int64_t *inner) {
    int nd = a->dims[2] ? 3 : 2;
    *outer = *inner = 1;
    for (int i = 0; i < nd; i++) {
        if (i < a->axis) *outer *= a->dims[i];
        if (i > a->axis) *inner *= a->dims[i];
    }
    *n = a->dims[a->axis];
}

static tc_tensor *lib_cumsum(tc_tensor *const *x, const void *arg) {
    return tc_cumsum(x[0], ((const scan_arg *)arg)->axis);
}
static int64_t host_cumsum(const double *const *x, double *out, const void *arg) {
    int64_t outer, n, inner;
    split3(arg, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double acc = 0;
            for (int64_t i = 0; i < n; i++) {
                acc += x[0][(o * n + i) * inner + k];
                out[(o * n + i) * inner + k] = acc;
            }
        }
    return numel3(arg);
}

static void test_cumsum(void **state) {
    (void)state;
    static const scan_arg args[] = {{0, {3, 4, 0}}, {1, {3, 4, 0}},   {1, {2, 3, 4}},
                                    {2, {2, 3, 4}}, {1, {1, 300, 0}}, {0, {1, 5, 0}}};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        const scan_arg *a = &args[i];
        gc_case c = one_input(a->dims[2] ? 3 : 2, a->dims, -1, 1);
        c.lib = lib_cumsum, c.host = host_cumsum, c.arg = a;
        char what[64];
        snprintf(what, sizeof what, "cumsum axis %d of case %zu", a->axis, i);
        gc_check(what, &c, RTOL, ATOL);
    }
}

/* a row of 700 (> 512: blocks), with few enough elements for the checker */
static void test_cumsum_blocked(void **state) {
    (void)state;
    /* grad_check.h holds at most GC_MAXN (512) elements: the gradient of
     * sum(w * cumsum x) is known in closed form, checked directly */
    float x[700], w[700], want[700];
    for (int i = 0; i < 700; i++)
        x[i] = (float)((i * 13) % 7) - 3, w[i] = (float)((i * 5) % 11) / 10;
    double acc = 0; /* d sum(w * cumsum x) / dx_i = sum_{j >= i} w_j */
    for (int i = 699; i >= 0; i--) acc += w[i], want[i] = (float)acc;
    tc_tensor *tx = f32(1, SHAPE(700), x), *tw = f32(1, SHAPE(700), w);
    assert_int_equal(tc_set_requires_grad(tx, true), TC_OK);
    tc_tensor *y = tc_cumsum(tx, 0), *p = tc_mul(y, tw), *loss = tc_sum(p, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    expect_f32(tc_grad(tx), want, 700, 1e-5, 1e-4, "blocked cumsum's gradient");
    tc_release(loss), tc_release(p), tc_release(y), tc_release(tw), tc_release(tx);
}

static tc_tensor *lib_cumsum_t(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *t = tc_transpose(x[0], 0, 1), *r = tc_cumsum(t, 1);
    tc_release(t);
    return r;
}
static int64_t host_cumsum_t(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (3,4) transposed to (4,3), scanned along its rows */
    for (int i = 0; i < 4; i++) {
        double acc = 0;
        for (int j = 0; j < 3; j++) out[i * 3 + j] = acc += x[0][j * 4 + i];
    }
    return 12;
}

static void test_cumsum_transposed(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(3, 4), -1, 1);
    c.lib = lib_cumsum_t, c.host = host_cumsum_t;
    gc_check("cumsum of a transposed view", &c, RTOL, ATOL);
}

static tc_tensor *lib_cumprod(tc_tensor *const *x, const void *arg) {
    return tc_cumprod(x[0], ((const scan_arg *)arg)->axis);
}
static int64_t host_cumprod(const double *const *x, double *out, const void *arg) {
    int64_t outer, n, inner;
    split3(arg, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double acc = 1;
            for (int64_t i = 0; i < n; i++) {
                acc *= x[0][(o * n + i) * inner + k];
                out[(o * n + i) * inner + k] = acc;
            }
        }
    return numel3(arg);
}

static void test_cumprod(void **state) {
    (void)state;
    static const scan_arg args[] = {{0, {3, 4, 0}}, {1, {3, 4, 0}},   {1, {2, 3, 4}},
                                    {2, {2, 3, 4}}, {1, {1, 300, 0}}, {0, {1, 5, 0}}};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        const scan_arg *a = &args[i];
        bool is_long = a->dims[1] == 300; /* values near 1: the products stay moderate */
        gc_case c = one_input(a->dims[2] ? 3 : 2, a->dims, is_long ? 0.97 : -2, is_long ? 1.03 : 2);
        c.kink = is_long ? 0 : 0.2;
        c.lib = lib_cumprod, c.host = host_cumprod, c.arg = a;
        char what[64];
        snprintf(what, sizeof what, "cumprod axis %d of case %zu", a->axis, i);
        gc_check(what, &c, RTOL, ATOL);
    }
}

/* zeros in the rows: the gradient at the first zero is the products of the
 * others (not 0/0), after it 0; rows (3,6) along axis 1 with one zero, two
 * zeros, a zero first and last; and down the columns (axis 0) */
static void test_cumprod_zeros(void **state) {
    (void)state;
    static const int64_t zeros[] = {2, 7, 10, 12, 17};
    static const scan_arg args[] = {{1, {3, 6, 0}}, {0, {3, 6, 0}}};
    for (size_t i = 0; i < 2; i++) {
        gc_case c = one_input(2, args[i].dims, -2, 2);
        c.kink = 0.2;
        c.zeros = zeros, c.n_zeros = (int)COUNT(zeros);
        c.lib = lib_cumprod, c.host = host_cumprod, c.arg = &args[i];
        gc_check(i ? "cumprod with zeros, axis 0" : "cumprod with zeros, axis 1", &c, RTOL, ATOL);
    }
}

static tc_tensor *lib_cumprod_t(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *t = tc_transpose(x[0], 0, 1), *r = tc_cumprod(t, 1);
    tc_release(t);
    return r;
}
static int64_t host_cumprod_t(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (3,4) transposed to (4,3), multiplied along its rows */
    for (int i = 0; i < 4; i++) {
        double acc = 1;
        for (int j = 0; j < 3; j++) out[i * 3 + j] = acc *= x[0][j * 4 + i];
    }
    return 12;
}

static void test_cumprod_transposed(void **state) {
    (void)state;
    static const int64_t zeros[] = {5};
    gc_case c = one_input(2, SHAPE(3, 4), -2, 2);
    c.kink = 0.2, c.zeros = zeros, c.n_zeros = 1;
    c.lib = lib_cumprod_t, c.host = host_cumprod_t;
    gc_check("cumprod of a transposed view (a zero in it)", &c, RTOL, ATOL);
}

/* a row of 700 (> 512: blocks) with a zero at 600: the gradient of
 * sum(w * cumprod x) in closed form, in double on the host */
static void test_cumprod_blocked(void **state) {
    (void)state;
    enum { N = 700, Z = 600 };
    float x[N], w[N], want[N];
    for (int i = 0; i < N; i++)
        x[i] = 1 + (float)((i * 13) % 7 - 3) / 256, w[i] = (float)((i * 5) % 11) / 10;
    x[Z] = 0;
    for (int i = 0; i < N; i++) { /* sum_{j >= i} w_j prod_{k <= j, k != i} x_k */
        double pre = 1, acc = 0;
        for (int k = 0; k < i; k++) pre *= x[k];
        for (int j = i; j < N; j++) {
            if (j > i) pre *= x[j];
            acc += w[j] * pre;
        }
        want[i] = (float)acc;
    }
    tc_tensor *tx = f32(1, SHAPE(N), x), *tw = f32(1, SHAPE(N), w);
    assert_int_equal(tc_set_requires_grad(tx, true), TC_OK);
    tc_tensor *y = tc_cumprod(tx, 0), *p = tc_mul(y, tw), *loss = tc_sum(p, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    expect_f32(tc_grad(tx), want, N, 1e-4, 1e-4, "blocked cumprod's gradient");
    tc_release(loss), tc_release(p), tc_release(y), tc_release(tw), tc_release(tx);
}

static tc_tensor *lib_lse(tc_tensor *const *x, const void *arg) {
    int ax = ((const scan_arg *)arg)->axis;
    return tc_logsumexp(x[0], 1, &ax, false);
}
static int64_t host_lse(const double *const *x, double *out, const void *arg) {
    int64_t outer, n, inner;
    split3(arg, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < inner; k++) {
            double s = 0;
            for (int64_t i = 0; i < n; i++) s += exp(x[0][(o * n + i) * inner + k]);
            out[o * inner + k] = log(s);
        }
    return outer * inner;
}

static void test_logsumexp(void **state) {
    (void)state;
    static const scan_arg args[] = {{0, {3, 4, 0}}, {1, {3, 4, 0}}, {1, {2, 3, 4}}};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        gc_case c = one_input(args[i].dims[2] ? 3 : 2, args[i].dims, -3, 3);
        c.lib = lib_lse, c.host = host_lse, c.arg = &args[i];
        gc_check("logsumexp", &c, RTOL, ATOL);
    }
}

static tc_tensor *lib_std2(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_std(x[0], 1, AXES(1), false, 2);
}
static int64_t host_std2(const double *const *x, double *out, const void *arg) {
    (void)arg; /* (3,5) over axis 1, correction 2 */
    for (int r = 0; r < 3; r++) {
        double m = 0, v = 0;
        for (int j = 0; j < 5; j++) m += x[0][r * 5 + j] / 5;
        for (int j = 0; j < 5; j++) v += (x[0][r * 5 + j] - m) * (x[0][r * 5 + j] - m);
        out[r] = sqrt(v / 3);
    }
    return 3;
}

static void test_std_correction(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(3, 5), -2, 2);
    c.lib = lib_std2, c.host = host_std2;
    gc_check("std axis 1 correction 2", &c, RTOL, ATOL);
}

/* std over size-1 axes is 0 everywhere: gradient 0 (torch), not 0 * inf */
static void test_std_size_one_axes(void **state) {
    (void)state;
    float v[12], zeros[12] = {0};
    for (int i = 0; i < 12; i++) v[i] = (float)i * 0.3f - 1;
    tc_tensor *x = f32(4, SHAPE(1, 3, 4, 1), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *s = tc_std(x, 2, AXES(0, 3), false, 0), *loss = tc_sum(s, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    expect_f32(tc_grad(x), zeros, 12, 0, 0, "d std(axis=(0,3), correction=0) / dx");
    tc_release(loss), tc_release(s), tc_release(x);
    float same[4] = {2, 2, 2, 2};
    tc_tensor *y = f32(2, SHAPE(2, 2), same);
    assert_int_equal(tc_set_requires_grad(y, true), TC_OK);
    s = tc_std(y, 1, AXES(1), false, 1), loss = tc_sum(s, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    expect_f32(tc_grad(y), zeros, 4, 0, 0, "d std / dx of equal values");
    tc_release(loss), tc_release(s), tc_release(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_cumsum),
        TEST(test_cumsum_blocked),
        TEST(test_cumsum_transposed),
        TEST(test_cumprod),
        TEST(test_cumprod_zeros),
        TEST(test_cumprod_transposed),
        TEST(test_cumprod_blocked),
        TEST(test_logsumexp),
        TEST(test_std_correction),
        TEST(test_std_size_one_axes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
