/* test_gelu.c - tc_erf and tc_gelu (torch's exact form and its tanh
 * approximation): erf within 3 float32 ulp of C's erf on a fine grid and
 * at the special values, gelu against the formulas in double on the host
 * and against the reference evaluator, exact kernel counts forward and
 * backward, gradients by finite differences, integer inputs and bad
 * arguments. */
#include "grad_check.h"

#define GRID 24001

/* erf on [-6, 6] every 1/2000 and at 0, +-inf, NaN */
static void test_erf_grid(void **state) {
    (void)state;
    static float xs[GRID + 4], got[GRID + 4];
    for (int i = 0; i < GRID; i++) xs[i] = (float)(-6 + 12.0 * i / (GRID - 1));
    xs[GRID] = 0, xs[GRID + 1] = INFINITY, xs[GRID + 2] = -INFINITY, xs[GRID + 3] = NAN;
    tc_tensor *x = f32(1, SHAPE(GRID + 4), xs), *y = tc_erf(x);
    check_meta(y, TC_FLOAT32, 1, SHAPE(GRID + 4));
    tc_check_schedule(y, 1, 1e-6, 1e-7, "erf");
    assert_int_equal(tc_to_host(y, got, sizeof got), TC_OK);
    double worst = 0;
    int at = 0;
    for (int i = 0; i < GRID; i++) {
        double want = erf((double)xs[i]);
        float wf = (float)fabs(want);
        double ulp = (double)nextafterf(wf, INFINITY) - wf;
        double e = fabs(got[i] - want) / ulp;
        if (e > worst) worst = e, at = i;
    }
    if (worst > 3)
        fprintf(stderr, "erf: %.2f ulp at %.9g: %.9g, want %.9g\n", worst, xs[at], got[at],
                erf(xs[at]));
    assert_true(worst <= 3);
    assert_true(got[GRID] == 0 && got[GRID + 1] == 1 && got[GRID + 2] == -1);
    assert_true(isnan(got[GRID + 3]));
    tc_release(x), tc_release(y);
}

/* d erf / dx on the same grid (the fit's derivative): within 2e-6 of
 * 2/sqrt(pi) exp(-x^2) relative where |x| <= 4 and 1e-6 absolute beyond,
 * with no halved gradient where the branches meet (|x| = 1 and 4) */
static void test_erf_derivative(void **state) {
    (void)state;
    static float xs[GRID], got[GRID];
    for (int i = 0; i < GRID; i++) xs[i] = (float)(-6 + 12.0 * i / (GRID - 1));
    tc_tensor *x = f32(1, SHAPE(GRID), xs);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *y = tc_erf(x), *s = tc_sum(y, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_OK);
    tc_tensor *g = tc_grad(x);
    assert_int_equal(tc_to_host(g, got, sizeof got), TC_OK);
    int bad = 0;
    for (int i = 0; i < GRID; i++) {
        double want = 2 / sqrt(M_PI) * exp(-(double)xs[i] * xs[i]), e = fabs(got[i] - want);
        bool ok = fabs(xs[i]) <= 4 ? e <= 2e-6 * want : e <= 1e-6;
        if (!ok && bad++ < 4)
            fprintf(stderr, "d erf at %.9g: %.9g, want %.9g\n", xs[i], got[i], want);
    }
    assert_int_equal(bad, 0);
    tc_release(x), tc_release(y), tc_release(s), tc_release(g);
}

static double host_gelu(double x, bool approximate) {
    if (!approximate) return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    double k = sqrt(2 / M_PI);
    return 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x)));
}

/* both forms on [-5, 5): values, 1 kernel forward, 1 kernel for the gradient */
static void test_gelu_values(void **state) {
    (void)state;
    for (int a = 0; a < 2; a++) {
        tc_tensor *x = tc_test_randn(2, SHAPE(16, 33), 1 + a, -5, 5);
        float *xv = tc_test_read(x), want[16 * 33];
        for (int i = 0; i < 16 * 33; i++) want[i] = (float)host_gelu(xv[i], a);
        assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
        tc_tensor *y = tc_gelu(x, a);
        const char *what = a ? "gelu (tanh)" : "gelu (erf)";
        tc_check_schedule(y, 1, 1e-5, 1e-6, what);
        expect_f32(tc_retain(y), want, 16 * 33, 1e-5, 2e-7, what);
        tc_tensor *s = tc_sum(y, 0, NULL, false);
        assert_int_equal(tc_backward(s), TC_OK);
        tc_tensor *g = tc_grad(x);
        tc_check_schedule(g, 1, 1e-5, 1e-6, a ? "d gelu (tanh)" : "d gelu (erf)");
        free(xv);
        tc_release(x), tc_release(y), tc_release(s), tc_release(g);
    }
}

/* integer inputs are cast to float32 first */
static void test_int_input(void **state) {
    (void)state;
    int32_t iv[5] = {-3, -1, 0, 1, 2};
    tc_tensor *x = from(iv, TC_INT32, 1, SHAPE(5));
    float want[5], werf[5];
    for (int i = 0; i < 5; i++)
        want[i] = (float)host_gelu(iv[i], false), werf[i] = (float)erf(iv[i]);
    expect_f32(tc_gelu(x, false), want, 5, 1e-6, 1e-7, "gelu of int32");
    expect_f32(tc_erf(x), werf, 5, 1e-6, 1e-7, "erf of int32");
    tc_release(x);
}

/* ---- gradients by finite differences ---- */

static tc_tensor *lib_gelu(tc_tensor *const *x, const void *arg) {
    return tc_gelu(x[0], *(const bool *)arg);
}

static int64_t host_gelu_all(const double *const *x, double *out, const void *arg) {
    for (int i = 0; i < 40; i++) out[i] = host_gelu(x[0][i], *(const bool *)arg);
    return 40;
}

static tc_tensor *lib_erf(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_erf(x[0]);
}

static int64_t host_erf(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 40; i++) out[i] = erf(x[0][i]);
    return 40;
}

static void test_grad_fd(void **state) {
    (void)state;
    static const bool forms[2] = {false, true};
    for (int a = 0; a < 2; a++) {
        gc_case c = one_input(2, SHAPE(5, 8), -4, 4);
        c.lib = lib_gelu, c.host = host_gelu_all, c.arg = &forms[a];
        gc_check(a ? "gelu (tanh)" : "gelu (erf)", &c, 1e-3, 1e-4);
    }
    gc_case e = one_input(2, SHAPE(5, 8), -3, 3);
    e.lib = lib_erf, e.host = host_erf;
    gc_check("erf", &e, 1e-3, 1e-4);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tc_gelu(NULL, true));
    assert_tc_error(TC_ERR_INVALID, "tc_gelu: tensor x is NULL");
    assert_null(tc_erf(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_erf: tensor x is NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_erf_grid),  TEST(test_erf_derivative), TEST(test_gelu_values),
        TEST(test_int_input), TEST(test_grad_fd),        TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
