/* test_loss.c - tc_cross_entropy_ex (torch's reduction, ignore_index and
 * label_smoothing) and tc_cross_entropy: values against torch's formulas
 * computed in double on the host and against the reference evaluator,
 * exact kernel counts forward and backward, gradients by finite
 * differences, the edge cases torch defines (every row ignored, an
 * ignore_index a label dtype cannot hold, lazy labels), and bad
 * arguments. */
#include "grad_check.h"

#define N 6
#define C 5

/* torch's loss of one row p (C logits) with label y; false when ignored */
static bool ref_row(const double *p, int64_t y, int64_t ignore, double eps, double *loss) {
    if (y == ignore) {
        *loss = 0;
        return false;
    }
    double m = -INFINITY, s = 0, all = 0;
    for (int j = 0; j < C; j++) m = fmax(m, p[j]);
    for (int j = 0; j < C; j++) s += exp(p[j] - m);
    double lse = m + log(s);
    for (int j = 0; j < C; j++) all += p[j] - lse;
    *loss = -(1 - eps) * (p[y] - lse) - eps / C * all;
    return true;
}

/* the loss of every row, reduced; returns the number of values written */
static int ref_ce(const double *x, const int64_t *y, tc_reduction red, int64_t ignore, double eps,
                  double *out) {
    double total = 0, rows[N];
    int kept = 0;
    for (int i = 0; i < N; i++) {
        kept += ref_row(x + i * C, y[i], ignore, eps, &rows[i]);
        total += rows[i];
    }
    switch (red) {
    case TC_REDUCTION_NONE: memcpy(out, rows, sizeof rows); return N;
    case TC_REDUCTION_SUM: out[0] = total; return 1;
    case TC_REDUCTION_MEAN: out[0] = total / kept; return 1;
    case TC_REDUCTION_COUNT: break;
    }
    fail_msg("ref_ce: bad reduction");
    return 0;
}

static const int64_t LABELS[N] = {1, -100, 4, 0, 2, -100};

/* logits (N, C) in [-2, 2) and their values as doubles */
static tc_tensor *logits_of(uint64_t seed, double *xd) {
    tc_tensor *x = tc_test_randn(2, SHAPE(N, C), seed, -2, 2);
    float *xv = tc_test_read(x);
    for (int i = 0; i < N * C; i++) xd[i] = xv[i];
    free(xv);
    return x;
}

static tc_tensor *labels_of(tc_dtype dt, const int64_t *y) {
    int32_t y32[N];
    for (int i = 0; i < N; i++) y32[i] = (int32_t)y[i];
    return dt == TC_INT64 ? from(y, TC_INT64, 1, SHAPE(N)) : from(y32, TC_INT32, 1, SHAPE(N));
}

static void expect_d(tc_tensor *t, const double *want, int n, double tol, const char *what) {
    float w[N];
    for (int i = 0; i < n; i++) w[i] = (float)want[i];
    expect_f32(t, w, n, tol, tol, what);
}

/* ---- values and kernels ---- */

/* Forward kernels: none is 1 (log_softmax, the weights and the reduce over
 * the classes in one kernel); mean and sum are 2 (the rows' losses are
 * realized, the sum over them, and for mean the count of labels kept, one
 * more). */
static void test_values(void **state) {
    (void)state;
    static const int kernels[TC_REDUCTION_COUNT] = {
        [TC_REDUCTION_MEAN] = 2, [TC_REDUCTION_SUM] = 2, [TC_REDUCTION_NONE] = 1};
    static const char *const names[TC_REDUCTION_COUNT] = {
        [TC_REDUCTION_MEAN] = "mean", [TC_REDUCTION_SUM] = "sum", [TC_REDUCTION_NONE] = "none"};
    double xd[N * C], want[N];
    tc_tensor *x = logits_of(1, xd);
    for (int dt = 0; dt < 2; dt++) {
        tc_tensor *y = labels_of(dt ? TC_INT64 : TC_INT32, LABELS);
        for (int r = 0; r < TC_REDUCTION_COUNT; r++)
            for (int k = 0; k < 3; k++) {
                double eps = k * 0.15;
                int n = ref_ce(xd, LABELS, (tc_reduction)r, -100, eps, want);
                tc_tensor *l = tc_cross_entropy_ex(x, y, (tc_reduction)r, -100, eps);
                char what[96];
                snprintf(what, sizeof what, "cross_entropy %s, label_smoothing %g, %s labels",
                         names[r], eps, dt ? "int64" : "int32");
                check_meta(l, TC_FLOAT32, r == TC_REDUCTION_NONE, SHAPE(N));
                tc_check_schedule(l, kernels[r], 1e-5, 1e-6, what);
                expect_d(l, want, n, 1e-5, what);
            }
        tc_release(y);
    }
    tc_release(x);
}

/* an ignore_index inside [0, C) masks the rows with that label, the mean
 * divides by the rows left; tc_cross_entropy is the mean of every row */
static void test_ignore_in_range(void **state) {
    (void)state;
    double xd[N * C], want[N];
    tc_tensor *x = logits_of(2, xd);
    const int64_t labels[N] = {1, 2, 4, 0, 2, 3};
    tc_tensor *y = labels_of(TC_INT32, labels);
    ref_ce(xd, labels, TC_REDUCTION_MEAN, 2, 0.1, want);
    tc_tensor *l = tc_cross_entropy_ex(x, y, TC_REDUCTION_MEAN, 2, 0.1);
    tc_check_schedule(l, 2, 1e-5, 1e-6, "ignore_index 2");
    expect_d(l, want, 1, 1e-5, "ignore_index 2");
    ref_ce(xd, labels, TC_REDUCTION_MEAN, -1, 0, want);
    l = tc_cross_entropy(x, y);
    tc_check_schedule(l, 2, 1e-5, 1e-6, "tc_cross_entropy");
    expect_d(l, want, 1, 1e-5, "tc_cross_entropy");
    tc_release(x), tc_release(y);
}

/* every row ignored: the mean is NaN (0/0, as torch), sum and none 0; a
 * uint8 label cannot be -100, so no row is ignored, and 255 can be */
static void test_edges(void **state) {
    (void)state;
    double xd[N * C], want[N];
    tc_tensor *x = logits_of(3, xd);
    const int64_t all[N] = {-100, -100, -100, -100, -100, -100};
    tc_tensor *y = labels_of(TC_INT64, all);
    tc_tensor *mean = tc_cross_entropy_ex(x, y, TC_REDUCTION_MEAN, -100, 0.1);
    assert_true(isnan(first_value(mean)));
    tc_tensor *sum = tc_cross_entropy_ex(x, y, TC_REDUCTION_SUM, -100, 0.1);
    assert_true(first_value(sum) == 0);
    uint8_t u8[N] = {1, 255, 4, 0, 2, 3};
    tc_tensor *yu = from(u8, TC_UINT8, 1, SHAPE(N));
    assert_null(tc_cross_entropy_ex(x, yu, TC_REDUCTION_MEAN, -100, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: labels[1] = 255 is out of range for 5 "
                                    "classes");
    const int64_t as64[N] = {1, 255, 4, 0, 2, 3};
    ref_ce(xd, as64, TC_REDUCTION_MEAN, 255, 0, want);
    expect_d(tc_cross_entropy_ex(x, yu, TC_REDUCTION_MEAN, 255, 0), want, 1, 1e-5, "uint8, 255");
    /* lazy labels are not read at the call: one outside [0, C) picks no class */
    tc_tensor *one = scalar(1, TC_INT64), *ly = tc_add(y, one);
    tc_tensor *lz = tc_cross_entropy_ex(x, ly, TC_REDUCTION_SUM, -100, 0);
    assert_non_null(lz);
    assert_true(first_value(lz) == 0);
    tc_release(x), tc_release(y), tc_release(mean), tc_release(sum), tc_release(yu);
    tc_release(one), tc_release(ly), tc_release(lz);
}

/* Backward kernels of d loss / d logits: 1 for sum and none (the gradient
 * of log_softmax and the weights in one kernel), 2 for the mean with an
 * ignore_index (the count of rows kept is realized first), 1 for
 * tc_cross_entropy */
static void test_backward_kernels(void **state) {
    (void)state;
    static const int kernels[TC_REDUCTION_COUNT] = {
        [TC_REDUCTION_MEAN] = 2, [TC_REDUCTION_SUM] = 1, [TC_REDUCTION_NONE] = 1};
    double xd[N * C];
    tc_tensor *x = logits_of(4, xd), *y = labels_of(TC_INT32, LABELS);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    for (int r = 0; r < TC_REDUCTION_COUNT; r++) {
        tc_tensor *l = tc_cross_entropy_ex(x, y, (tc_reduction)r, -100, 0.1);
        tc_tensor *s = tc_sum(l, 0, NULL, false);
        assert_int_equal(tc_backward(s), TC_OK);
        tc_tensor *g = tc_grad(x);
        tc_check_schedule(g, kernels[r], 1e-5, 1e-6, "d cross_entropy / d logits");
        tc_release(g), tc_release(s), tc_release(l);
        assert_int_equal(tc_zero_grad(x), TC_OK);
    }
    const int64_t every[N] = {1, 0, 4, 0, 2, 3};
    tc_tensor *y2 = labels_of(TC_INT32, every), *l = tc_cross_entropy(x, y2);
    assert_int_equal(tc_backward(l), TC_OK);
    tc_tensor *g = tc_grad(x);
    tc_check_schedule(g, 1, 1e-5, 1e-6, "d tc_cross_entropy / d logits");
    tc_release(g), tc_release(l), tc_release(y2), tc_release(x), tc_release(y);
}

/* ---- gradients by finite differences ---- */

typedef struct {
    const int64_t *y; /* labels (N) */
    tc_reduction red; /* reduction */
    int64_t ignore;   /* ignore_index */
    double eps;       /* label_smoothing */
} ce_arg;

static tc_tensor *lib_ce(tc_tensor *const *x, const void *arg) {
    const ce_arg *a = arg;
    tc_tensor *y = labels_of(TC_INT64, a->y);
    tc_tensor *l = tc_cross_entropy_ex(x[0], y, a->red, a->ignore, a->eps);
    tc_release(y);
    return l;
}

static int64_t host_ce(const double *const *x, double *out, const void *arg) {
    const ce_arg *a = arg;
    return ref_ce(x[0], a->y, a->red, a->ignore, a->eps, out);
}

static void test_grad_fd(void **state) {
    (void)state;
    static const int64_t in_range[N] = {4, 1, 4, 0, 2, 3};
    const ce_arg args[] = {
        {LABELS, TC_REDUCTION_MEAN, -100, 0},  {LABELS, TC_REDUCTION_MEAN, -100, 0.2},
        {LABELS, TC_REDUCTION_SUM, -100, 0.1}, {LABELS, TC_REDUCTION_NONE, -100, 0.3},
        {in_range, TC_REDUCTION_MEAN, 4, 0.1}, {in_range, TC_REDUCTION_NONE, 4, 0},
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        gc_case c = one_input(2, SHAPE(N, C), -2, 2);
        c.lib = lib_ce, c.host = host_ce, c.arg = &args[i];
        char what[80];
        snprintf(what, sizeof what, "cross_entropy (reduction %d, ignore %lld, smoothing %g)",
                 (int)args[i].red, (long long)args[i].ignore, args[i].eps);
        gc_check(what, &c, 1e-3, 1e-4);
    }
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    double xd[N * C];
    tc_tensor *x = logits_of(5, xd), *y = labels_of(TC_INT32, LABELS);
    assert_null(tc_cross_entropy_ex(x, y, (tc_reduction)7, -100, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: reduction 7 is not one of");
    assert_null(tc_cross_entropy_ex(x, y, TC_REDUCTION_MEAN, -100, -0.1));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: label_smoothing -0.1 must be in [0, 1]");
    assert_null(tc_cross_entropy_ex(x, y, TC_REDUCTION_MEAN, -100, NAN));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: label_smoothing nan must be in [0, 1]");
    assert_null(tc_cross_entropy_ex(x, y, TC_REDUCTION_MEAN, -1, 0)); /* -100 is not ignored */
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: labels[1] = -100 is out of range for 5");
    assert_null(tc_cross_entropy_ex(NULL, y, TC_REDUCTION_MEAN, -100, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy_ex: tensor logits is NULL");
    tc_tensor *xi = tc_cast(x, TC_INT32), *yf = tc_cast(y, TC_FLOAT32);
    assert_null(tc_cross_entropy_ex(xi, y, TC_REDUCTION_MEAN, -100, 0));
    assert_tc_error(TC_ERR_DTYPE, "tc_cross_entropy_ex: logits must be float, got int32");
    assert_null(tc_cross_entropy_ex(x, yf, TC_REDUCTION_MEAN, -100, 0));
    assert_tc_error(TC_ERR_DTYPE, "tc_cross_entropy_ex: labels must be integer class ids, got "
                                  "float32");
    int32_t few[3] = {0, 1, 2};
    tc_tensor *y3 = from(few, TC_INT32, 1, SHAPE(3));
    assert_null(tc_cross_entropy_ex(x, y3, TC_REDUCTION_NONE, -100, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_cross_entropy_ex: logits (6,5) must be (N,C) and labels (3,) "
                                  "(N)");
    tc_release(x), tc_release(y), tc_release(xi), tc_release(yf), tc_release(y3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_values),           TEST(test_ignore_in_range), TEST(test_edges),
        TEST(test_backward_kernels), TEST(test_grad_fd),         TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
