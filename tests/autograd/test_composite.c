/* test_composite.c - forward values of the composites against the plain C
 * loops of ref_ops.h (in double; tolerances are float32's: rtol 1e-4, atol
 * 1e-5 unless said): matmul (2-D, batched with broadcasting, 1-D, ints),
 * linear, conv2d (stride, padding, groups, dilation, bias), max/avg pools
 * (windows that overlap, tile and leave gaps), softmax, log_softmax,
 * layernorm, batchnorm (training with running-stat updates, eval),
 * cross_entropy (label dtypes, range check), argmax (ties, keepdim) and
 * dropout statistics; and the argument errors of each. Public API only. */
#include "../api/api_helpers.h"
#include "ref_ops.h"

#include <math.h>

#define RTOL 1e-4
#define ATOL 1e-5
#define MAXV 4096

/* a float32 tensor from a fixed LCG in [lo, hi), with its values as doubles */
static tc_tensor *rnd(int ndim, const int64_t *shape, uint64_t seed, double *vals) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    assert_true(n <= MAXV);
    float f[MAXV];
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        f[i] = (float)(-2 + 4 * (double)((s >> 40) & 0xFFFFFF) / 16777216.0);
        if (vals) vals[i] = f[i];
    }
    return f32(ndim, shape, f);
}

/* t (float32) equals the doubles want within rtol/atol; releases t */
static void expect_d(tc_tensor *t, const double *want, int64_t n, double rtol, double atol,
                     const char *what) {
    if (!t) fprintf(stderr, "%s: %s\n", what, tc_last_error());
    assert_non_null(t);
    float w[MAXV];
    assert_true(n <= MAXV);
    for (int64_t i = 0; i < n; i++) w[i] = (float)want[i];
    expect_f32(t, w, n, rtol, atol, what);
}

/* ---- matmul, linear ---- */

static void test_matmul(void **state) {
    (void)state;
    double a[MAXV], b[MAXV], want[MAXV];
    tc_tensor *ta = rnd(2, SHAPE(3, 4), 1, a), *tb = rnd(2, SHAPE(4, 5), 2, b);
    tc_tensor *r = tc_matmul(ta, tb);
    check_meta(r, TC_FLOAT32, 2, SHAPE(3, 5));
    ref_matmul(a, b, 3, 4, 5, want);
    expect_d(r, want, 15, RTOL, ATOL, "(3,4)@(4,5)");
    expect_d(tc_dot(ta, tb), want, 15, RTOL, ATOL, "tc_dot");
    tc_release(ta), tc_release(tb);

    /* batch dims broadcast: (2,1,3,4) @ (3,4,2) -> (2,3,3,2) */
    ta = rnd(3, SHAPE(2, 3, 4), 3, a), tb = rnd(3, SHAPE(3, 4, 2), 4, b);
    tc_tensor *ta4 = tc_reshape(ta, 4, SHAPE(2, 1, 3, 4));
    r = tc_matmul(ta4, tb);
    check_meta(r, TC_FLOAT32, 4, SHAPE(2, 3, 3, 2));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) ref_matmul(a + i * 12, b + j * 8, 3, 4, 2, want + (i * 3 + j) * 6);
    expect_d(r, want, 36, RTOL, ATOL, "(2,1,3,4)@(3,4,2)");
    tc_release(ta4), tc_release(ta), tc_release(tb);

    /* 1-D operands: (4)@(4,3) -> (3), (3,4)@(4) -> (3), (4)@(4) -> () */
    ta = rnd(1, SHAPE(4), 5, a), tb = rnd(2, SHAPE(4, 3), 6, b);
    r = tc_matmul(ta, tb);
    check_meta(r, TC_FLOAT32, 1, SHAPE(3));
    ref_matmul(a, b, 1, 4, 3, want);
    expect_d(r, want, 3, RTOL, ATOL, "(4)@(4,3)");
    tc_tensor *tbt = tc_transpose(tb, 0, 1); /* (3,4), non-contiguous */
    r = tc_matmul(tbt, ta);
    check_meta(r, TC_FLOAT32, 1, SHAPE(3));
    expect_d(r, want, 3, RTOL, ATOL, "(3,4)^T-view @ (4)");
    r = tc_matmul(ta, ta);
    check_meta(r, TC_FLOAT32, 0, NULL);
    double dot = 0;
    for (int i = 0; i < 4; i++) dot += a[i] * a[i];
    expect_d(r, &dot, 1, RTOL, ATOL, "(4)@(4)");
    tc_release(tbt), tc_release(ta), tc_release(tb);

    /* integers stay integers */
    int32_t ia[6] = {1, 2, 3, 4, 5, 6}, ib[6] = {1, 0, -1, 2, 3, 1}, iw[4] = {8, 7, 17, 16};
    tc_tensor *xa = from(ia, TC_INT32, 2, SHAPE(2, 3)), *xb = from(ib, TC_INT32, 2, SHAPE(3, 2));
    r = tc_matmul(xa, xb);
    check_meta(r, TC_INT32, 2, SHAPE(2, 2));
    expect_values(r, iw, 4, 0, 0, "int32 matmul");

    assert_null(tc_matmul(xa, xa));
    assert_tc_error(TC_ERR_SHAPE, "tc_matmul: cannot multiply (2,3) by (2,3) (3 != 2)");
    tc_tensor *s = scalar(1, TC_FLOAT32);
    assert_null(tc_matmul(s, xa));
    assert_tc_error(TC_ERR_SHAPE, "at least 1 dim");
    tc_tensor *b3 = tc_zeros(3, SHAPE(3, 3, 2), TC_INT32, NULL), *a3 = tc_zeros(3, SHAPE(2, 2, 3), TC_INT32, NULL);
    assert_null(tc_matmul(a3, b3));
    assert_tc_error(TC_ERR_SHAPE, "batch dims");
    assert_null(tc_matmul(NULL, xa));
    assert_tc_error(TC_ERR_INVALID, "tc_matmul: tensor a is NULL");
    tc_release(a3), tc_release(b3), tc_release(s), tc_release(xa), tc_release(xb);
}

static void test_linear(void **state) {
    (void)state;
    double x[MAXV], w[MAXV], b[MAXV], want[MAXV];
    tc_tensor *tx = rnd(3, SHAPE(2, 3, 5), 7, x), *tw = rnd(2, SHAPE(4, 5), 8, w);
    tc_tensor *tb = rnd(1, SHAPE(4), 9, b);
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 4; o++) {
            double acc = b[o];
            for (int i = 0; i < 5; i++) acc += x[r * 5 + i] * w[o * 5 + i];
            want[r * 4 + o] = acc;
        }
    tc_tensor *y = tc_linear(tx, tw, tb);
    check_meta(y, TC_FLOAT32, 3, SHAPE(2, 3, 4));
    expect_d(y, want, 24, RTOL, ATOL, "linear");
    for (int k = 0; k < 24; k++) want[k] -= b[k % 4];
    expect_d(tc_linear(tx, tw, NULL), want, 24, RTOL, ATOL, "linear without bias");
    assert_null(tc_linear(tw, tx, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_linear: x (4,5) does not fit w (2,3,5)");
    assert_null(tc_linear(tx, tw, tx));
    assert_tc_error(TC_ERR_SHAPE, "tc_linear: b (2,3,5) must be (4)");
    tc_release(tx), tc_release(tw), tc_release(tb);
}

/* ---- conv2d ---- */

static void conv_case(const char *what, const ref_conv_shape *c, bool has_bias) {
    double x[MAXV], w[MAXV], b[MAXV], want[MAXV];
    tc_tensor *tx = rnd(4, SHAPE(c->n, c->cin, c->h, c->w), 10, x);
    tc_tensor *tw = rnd(4, SHAPE(c->cout, c->cin / c->groups, c->kh, c->kw), 11, w);
    tc_tensor *tb = has_bias ? rnd(1, SHAPE(c->cout), 12, b) : NULL;
    int64_t oh = ref_conv_oh(c), ow = ref_conv_ow(c);
    ref_conv2d(x, w, has_bias ? b : NULL, c, want);
    tc_tensor *y = tc_conv2d_ex(tx, tw, tb, (int)c->sh, (int)c->sw, (int)c->ph, (int)c->pw,
                                (int)c->dil, (int)c->groups);
    check_meta(y, TC_FLOAT32, 4, SHAPE(c->n, c->cout, oh, ow));
    expect_d(y, want, c->n * c->cout * oh * ow, RTOL, ATOL, what);
    tc_release(tx), tc_release(tw), tc_release(tb);
}

static void test_conv2d(void **state) {
    (void)state;
    /* n cin h w cout kh kw sh sw ph pw dil groups */
    ref_conv_shape plain = {2, 3, 9, 9, 4, 3, 3, 1, 1, 0, 0, 1, 1};
    conv_case("conv 3x3", &plain, true);
    ref_conv_shape strided = {2, 3, 9, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1};
    conv_case("conv 3x3 stride 2 pad 1", &strided, true);
    ref_conv_shape uneven = {1, 2, 7, 9, 3, 2, 3, 1, 3, 2, 0, 1, 1};
    conv_case("conv 2x3 stride (1,3) pad (2,0)", &uneven, false);
    ref_conv_shape grouped = {2, 4, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 2};
    conv_case("conv groups 2", &grouped, true);
    ref_conv_shape depthwise = {1, 3, 6, 6, 3, 3, 3, 1, 1, 1, 1, 1, 3};
    conv_case("conv depthwise", &depthwise, false);
    ref_conv_shape dilated = {1, 2, 9, 9, 2, 3, 3, 2, 1, 2, 1, 2, 1};
    conv_case("conv dilation 2 stride (2,1)", &dilated, true);
    ref_conv_shape one = {1, 2, 5, 5, 3, 1, 1, 2, 2, 0, 0, 3, 1};
    conv_case("conv 1x1 stride 2 dilation 3", &one, false);

    /* tc_conv2d is conv2d_ex with square stride and padding */
    double x[MAXV], w[MAXV], want[MAXV];
    tc_tensor *tx = rnd(4, SHAPE(1, 2, 6, 6), 13, x), *tw = rnd(4, SHAPE(3, 2, 3, 3), 14, w);
    ref_conv_shape sq = {1, 2, 6, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1};
    ref_conv2d(x, w, NULL, &sq, want);
    expect_d(tc_conv2d(tx, tw, NULL, 2, 1), want, 27, RTOL, ATOL, "tc_conv2d");

    assert_null(tc_conv2d_ex(tx, tw, NULL, 1, 1, 0, 0, 1, 2));
    assert_tc_error(TC_ERR_SHAPE, "do not fit groups 2");
    assert_null(tc_conv2d(tx, tw, NULL, 0, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_conv2d: stride (0,0)");
    assert_null(tc_conv2d(tw, tx, NULL, 1, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv2d:");
    tc_tensor *big = tc_zeros(4, SHAPE(3, 2, 7, 7), TC_FLOAT32, NULL);
    assert_null(tc_conv2d(tx, big, NULL, 1, 0));
    assert_tc_error(TC_ERR_SHAPE, "does not fit input (1,2,6,6)");
    assert_null(tc_conv2d(tx, tw, tw, 1, 0));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv2d: bias (3,2,3,3) must be (3)");
    tc_release(big), tc_release(tx), tc_release(tw);
}

/* ---- pools ---- */

static void test_pools(void **state) {
    (void)state;
    double x[MAXV], want[MAXV];
    tc_tensor *tx = rnd(4, SHAPE(2, 3, 7, 7), 15, x);
    struct {
        int k, s;
        bool is_max;
        const char *what;
    } cases[] = {
        {2, 2, true, "max k2 s2 (tiles, drops the last row)"},
        {3, 2, true, "max k3 s2 (overlapping)"},
        {2, 0, true, "max k2 stride default"},
        {2, 3, true, "max k2 s3 (gaps)"},
        {7, 1, true, "max k7 (whole image)"},
        {2, 1, false, "avg k2 s1"},
        {3, 3, false, "avg k3 s3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int k = cases[i].k, s = cases[i].s ? cases[i].s : k;
        int64_t o = (7 - k) / s + 1;
        ref_pool(x, 6, 7, 7, k, s, cases[i].is_max, want);
        tc_tensor *y = cases[i].is_max ? tc_max_pool2d(tx, k, cases[i].s)
                                       : tc_avg_pool2d(tx, k, cases[i].s);
        check_meta(y, TC_FLOAT32, 4, SHAPE(2, 3, o, o));
        expect_d(y, want, 6 * o * o, RTOL, ATOL, cases[i].what);
    }
    tc_tensor *x3 = tc_reshape(tx, 3, SHAPE(6, 7, 7)); /* (C,H,W) works too */
    ref_pool(x, 6, 7, 7, 2, 2, true, want);
    expect_d(tc_max_pool2d(x3, 2, 2), want, 6 * 9, RTOL, ATOL, "max pool on (C,H,W)");
    assert_null(tc_max_pool2d(tx, 8, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_max_pool2d: kernel 8 does not fit the last two dims of (2,3,7,7)");
    assert_null(tc_avg_pool2d(tx, 0, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_avg_pool2d: kernel 0 must be >= 1");
    tc_release(x3), tc_release(tx);
}

/* ---- softmax, log_softmax, layernorm ---- */

static void test_softmax_layernorm(void **state) {
    (void)state;
    double x[MAXV], want[MAXV];
    tc_tensor *tx = rnd(3, SHAPE(3, 5, 4), 16, x);
    for (int axis = 0; axis < 3; axis++) {
        int64_t outer = axis == 0 ? 1 : axis == 1 ? 3 : 15, len = axis == 0 ? 3 : axis == 1 ? 5 : 4;
        int64_t inner = 60 / outer / len;
        for (int is_log = 0; is_log < 2; is_log++) {
            ref_softmax(x, outer, len, inner, is_log, want);
            tc_tensor *y = is_log ? tc_log_softmax(tx, axis - 3) : tc_softmax(tx, axis);
            check_meta(y, TC_FLOAT32, 3, SHAPE(3, 5, 4));
            char what[64];
            snprintf(what, sizeof what, "%s axis %d", is_log ? "log_softmax" : "softmax", axis);
            expect_d(y, want, 60, RTOL, ATOL, what);
        }
    }
    ref_layernorm(x, 3, 20, 1e-5, want);
    expect_d(tc_layernorm(tx, 1, 1e-5), want, 60, 1e-4, 1e-4, "layernorm over (5,4)");
    ref_layernorm(x, 15, 4, 0.1, want);
    expect_d(tc_layernorm(tx, -1, 0.1), want, 60, 1e-4, 1e-4, "layernorm last axis eps 0.1");
    ref_layernorm(x, 1, 60, 1e-5, want);
    expect_d(tc_layernorm(tx, 0, 1e-5), want, 60, 1e-4, 1e-4, "layernorm over everything");

    /* large logits do not overflow: the max is subtracted first */
    float big[3] = {1000, 1001, 1002};
    tc_tensor *tb = f32(1, SHAPE(3), big);
    double e0 = exp(-2), e1 = exp(-1), s = e0 + e1 + 1, soft[3] = {e0 / s, e1 / s, 1 / s};
    expect_d(tc_softmax(tb, 0), soft, 3, RTOL, ATOL, "softmax of large logits");
    /* integer inputs are computed in float32 */
    int32_t iv[3] = {0, 1, 2};
    tc_tensor *ti = from(iv, TC_INT32, 1, SHAPE(3));
    expect_d(tc_softmax(ti, 0), soft, 3, RTOL, ATOL, "softmax of int32");

    assert_null(tc_softmax(tx, 3));
    assert_tc_error(TC_ERR_SHAPE, "tc_softmax: axis 3 is out of range for 3 dims");
    assert_null(tc_log_softmax(NULL, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_log_softmax: tensor a is NULL");
    assert_null(tc_layernorm(tx, 0, -1));
    assert_tc_error(TC_ERR_INVALID, "tc_layernorm: eps -1 must be >= 0");
    tc_release(ti), tc_release(tb), tc_release(tx);
}

/* ---- batchnorm ---- */

/* training: batch statistics; the running stats update like torch's
 * (momentum 0.1, unbiased variance) when realized, and chain when several
 * steps run without a realize in between */
static void test_batchnorm_training(void **state) {
    (void)state;
    double x[MAXV], w[4], b[4], want[MAXV], mean[4], var[4];
    tc_tensor *tx = rnd(4, SHAPE(4, 3, 2, 5), 17, x), *tw = rnd(1, SHAPE(3), 18, w);
    tc_tensor *tb = rnd(1, SHAPE(3), 19, b);
    float rm0[3] = {0.5f, -1, 0}, rv0[3] = {1, 2, 0.5f};
    tc_tensor *rm = f32(1, SHAPE(3), rm0), *rv = f32(1, SHAPE(3), rv0);
    ref_batchnorm(x, 4, 3, 10, w, b, 1e-5, want, mean, var);
    tc_tensor *y = tc_batchnorm(tx, tw, tb, rm, rv, true, 0.1, 1e-5);
    check_meta(y, TC_FLOAT32, 4, SHAPE(4, 3, 2, 5));
    assert_false(tc_is_realized(rm)); /* the update is pending, not run */
    expect_d(y, want, 120, 1e-4, 1e-4, "batchnorm training");
    double wm[3], wv[3];
    for (int c = 0; c < 3; c++) {
        wm[c] = 0.9 * rm0[c] + 0.1 * mean[c];
        wv[c] = 0.9 * rv0[c] + 0.1 * var[c] * 40.0 / 39.0;
    }
    tc_tensor *pair[2] = {rm, rv};
    assert_int_equal(tc_realize(pair, 2), TC_OK);
    expect_d(tc_retain(rm), wm, 3, RTOL, ATOL, "running_mean after one step");
    expect_d(tc_retain(rv), wv, 3, RTOL, ATOL, "running_var after one step");
    tc_tensor *y2 = tc_batchnorm(tx, NULL, NULL, rm, rv, true, 0.1, 1e-5);
    tc_tensor *y3 = tc_batchnorm(tx, NULL, NULL, rm, rv, true, 0.1, 1e-5);
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 2; k++) {
            wm[c] = 0.9 * wm[c] + 0.1 * mean[c];
            wv[c] = 0.9 * wv[c] + 0.1 * var[c] * 40.0 / 39.0;
        }
    expect_d(tc_retain(rm), wm, 3, RTOL, ATOL, "running_mean after three steps");
    expect_d(tc_retain(rv), wv, 3, RTOL, ATOL, "running_var after three steps");
    ref_batchnorm(x, 4, 3, 10, NULL, NULL, 1e-5, want, NULL, NULL);
    expect_d(y3, want, 120, 1e-4, 1e-4, "batchnorm training, no affine");
    tc_release(y2), tc_release(rm), tc_release(rv), tc_release(tx), tc_release(tw), tc_release(tb);
}

/* eval: the running statistics; (N,C) input; no running stats: the batch's */
static void test_batchnorm_eval(void **state) {
    (void)state;
    double x[MAXV], w[4], b[4], want[MAXV];
    tc_tensor *tx = rnd(4, SHAPE(4, 3, 2, 5), 17, x), *tw = rnd(1, SHAPE(3), 18, w);
    tc_tensor *tb = rnd(1, SHAPE(3), 19, b);
    float rmv[3] = {0.5f, -1, 0}, rvv[3] = {1, 2, 0.5f};
    tc_tensor *rm = f32(1, SHAPE(3), rmv), *rv = f32(1, SHAPE(3), rvv);
    for (int at = 0; at < 120; at++) {
        int c = (at / 10) % 3;
        want[at] = (x[at] - rmv[c]) / sqrt(rvv[c] + 1e-3) * w[c] + b[c];
    }
    expect_d(tc_batchnorm(tx, tw, tb, rm, rv, false, 0.1, 1e-3), want, 120, 1e-4, 1e-4,
             "batchnorm eval");
    tc_tensor *x2 = tc_reshape(tx, 2, SHAPE(40, 3));
    ref_batchnorm(x, 40, 3, 1, NULL, NULL, 1e-5, want, NULL, NULL);
    expect_d(tc_batchnorm(x2, NULL, NULL, NULL, NULL, false, 0.1, 1e-5), want, 120, 1e-4, 1e-4,
             "batchnorm (N,C), batch stats");
    assert_null(tc_batchnorm(tx, rm, tb, rm, NULL, true, 0.1, 1e-5));
    assert_tc_error(TC_ERR_INVALID, "running_mean and running_var");
    assert_null(tc_batchnorm(tx, x2, NULL, NULL, NULL, true, 0.1, 1e-5));
    assert_tc_error(TC_ERR_SHAPE, "tc_batchnorm: weight has shape (40,3), expected (3)");
    assert_null(tc_batchnorm(tx, NULL, NULL, NULL, NULL, true, 1.5, 1e-5));
    assert_tc_error(TC_ERR_INVALID, "momentum 1.5");
    tc_tensor *one = tc_zeros(2, SHAPE(1, 3), TC_FLOAT32, NULL);
    assert_null(tc_batchnorm(one, NULL, NULL, rm, rv, true, 0.1, 1e-5));
    assert_tc_error(TC_ERR_SHAPE, "more than 1 value per channel");
    tc_release(one), tc_release(x2), tc_release(rm), tc_release(rv);
    tc_release(tx), tc_release(tw), tc_release(tb);
}

/* ---- cross_entropy, argmax, dropout ---- */

static void test_cross_entropy(void **state) {
    (void)state;
    double x[MAXV];
    tc_tensor *logits = rnd(2, SHAPE(5, 4), 20, x);
    int32_t lab[5] = {3, 0, 1, 1, 2};
    double want = ref_cross_entropy(x, lab, 5, 4);
    tc_dtype dts[3] = {TC_INT32, TC_INT64, TC_UINT8};
    for (int d = 0; d < 3; d++) {
        tc_tensor *l32 = from(lab, TC_INT32, 1, SHAPE(5)), *l = tc_cast(l32, dts[d]);
        tc_realize(&l, 1);
        tc_tensor *loss = tc_cross_entropy(logits, l);
        check_meta(loss, TC_FLOAT32, 0, NULL);
        expect_d(loss, &want, 1, RTOL, ATOL, tc_dtype_name(dts[d]));
        tc_release(l), tc_release(l32);
    }
    int32_t bad[5] = {3, 0, 4, 1, 2}, neg[5] = {0, 0, 0, 0, -1};
    tc_tensor *tbad = from(bad, TC_INT32, 1, SHAPE(5)), *tneg = from(neg, TC_INT32, 1, SHAPE(5));
    assert_null(tc_cross_entropy(logits, tbad));
    assert_tc_error(TC_ERR_INVALID, "tc_cross_entropy: labels[2] = 4 is out of range for 4 classes");
    assert_null(tc_cross_entropy(logits, tneg));
    assert_tc_error(TC_ERR_INVALID, "labels[4] = -1");
    /* a lazy label is not checked: an out-of-range one adds 0 (still counts in N) */
    tc_tensor *zero = scalar(0, TC_INT32), *lazy = tc_add(tbad, zero);
    lab[2] = 0;
    double part = ref_cross_entropy(x, lab, 5, 4) * 5; /* every row, row 2 at label 0 */
    double m2 = fmax(fmax(x[8], x[9]), fmax(x[10], x[11])), s2 = 0;
    for (int j = 8; j < 12; j++) s2 += exp(x[j] - m2);
    double lazy_want = (part + (x[8] - m2 - log(s2))) / 5; /* minus row 2's term */
    expect_d(tc_cross_entropy(logits, lazy), &lazy_want, 1, RTOL, ATOL, "lazy out-of-range label");
    tc_tensor *fl = tc_cast(tbad, TC_FLOAT32);
    assert_null(tc_cross_entropy(logits, fl));
    assert_tc_error(TC_ERR_DTYPE, "labels must be integer class ids, got float32");
    assert_null(tc_cross_entropy(tbad, tbad));
    assert_tc_error(TC_ERR_SHAPE, "tc_cross_entropy: logits (5,) must be (N,C)");
    tc_release(fl), tc_release(lazy), tc_release(zero), tc_release(tbad), tc_release(tneg);
    tc_release(logits);
}

static void test_argmax(void **state) {
    (void)state;
    double x[MAXV];
    int32_t want[MAXV];
    tc_tensor *tx = rnd(3, SHAPE(3, 5, 4), 21, x);
    ref_argmax(x, 3, 5, 4, want);
    tc_tensor *a = tc_argmax(tx, 1, false);
    check_meta(a, TC_INT32, 2, SHAPE(3, 4));
    expect_values(a, want, 12, 0, 0, "argmax axis 1");
    a = tc_argmax(tx, -1, true);
    check_meta(a, TC_INT32, 3, SHAPE(3, 5, 1));
    ref_argmax(x, 15, 4, 1, want);
    expect_values(a, want, 15, 0, 0, "argmax axis -1 keepdim");
    ref_argmax(x, 1, 3, 20, want);
    expect_values(tc_argmax(tx, 0, false), want, 20, 0, 0, "argmax axis 0");
    /* ties: the first index, like torch */
    float t[8] = {1, 3, 3, 0, 2, 2, 2, 2};
    int32_t tw[2] = {1, 0};
    tc_tensor *tt = f32(2, SHAPE(2, 4), t);
    expect_values(tc_argmax(tt, 1, false), tw, 2, 0, 0, "argmax ties");
    int32_t iv[4] = {5, -2, 9, 9}, iw[1] = {2};
    tc_tensor *ti = from(iv, TC_INT32, 1, SHAPE(4));
    expect_values(tc_argmax(ti, 0, false), iw, 1, 0, 0, "argmax int32");
    assert_null(tc_argmax(tx, 3, false));
    assert_tc_error(TC_ERR_SHAPE, "tc_argmax: axis 3 is out of range");
    tc_release(ti), tc_release(tt), tc_release(tx);
}

static void test_dropout(void **state) {
    (void)state;
    tc_manual_seed(1234);
    tc_tensor *x = tc_ones(2, SHAPE(100, 100), TC_FLOAT32, NULL);
    tc_tensor *y = tc_dropout(x, 0.25, true);
    check_meta(y, TC_FLOAT32, 2, SHAPE(100, 100));
    float *v = tc_test_read(y);
    int zeros = 0;
    for (int i = 0; i < 10000; i++) {
        if (v[i] == 0) zeros++;
        else assert_float_equal(v[i], 1 / 0.75, 1e-6);
    }
    free(v);
    /* 10000 Bernoulli(0.25) draws: sd = 43, so 2300..2700 is > 4.5 sd */
    assert_in_range(zeros, 2300, 2700);
    tc_release(y);
    /* the mean is kept in expectation */
    y = tc_dropout(x, 0.5, true);
    tc_tensor *m = tc_mean(y, 0, NULL, false);
    assert_true(fabs(first_value(m) - 1) < 0.05);
    tc_release(m), tc_release(y);
    /* eval, p = 0: x itself; p = 1: all dropped */
    y = tc_dropout(x, 0.25, false);
    assert_ptr_equal(y, x);
    tc_release(y);
    y = tc_dropout(x, 0, true);
    assert_ptr_equal(y, x);
    tc_release(y);
    y = tc_dropout(x, 1, true);
    tc_tensor *s = tc_sum(y, 0, NULL, false);
    assert_true(first_value(s) == 0);
    tc_release(s), tc_release(y);
    /* the gradient is the mask scaled by 1/(1-p) */
    tc_tensor *p = tc_full(1, SHAPE(1000), 2, TC_FLOAT32, NULL);
    tc_set_requires_grad(p, true);
    tc_tensor *d = tc_dropout(p, 0.2, true), *l = tc_sum(d, 0, NULL, false);
    assert_int_equal(tc_backward(l), TC_OK);
    tc_tensor *g = tc_grad(p);
    float *dv = tc_test_read(d), *gv = tc_test_read(g);
    for (int i = 0; i < 1000; i++) assert_float_equal(gv[i], dv[i] / 2, 1e-6);
    free(dv), free(gv);
    tc_release(g), tc_release(l), tc_release(d), tc_release(p);
    assert_null(tc_dropout(x, 1.5, true));
    assert_tc_error(TC_ERR_INVALID, "tc_dropout: p 1.5 must be in [0, 1]");
    tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_matmul),    TEST(test_linear),         TEST(test_conv2d),
        TEST(test_pools),     TEST(test_softmax_layernorm), TEST(test_batchnorm_training),
        TEST(test_batchnorm_eval),
        TEST(test_cross_entropy), TEST(test_argmax),     TEST(test_dropout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
