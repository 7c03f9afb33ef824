/* test_math.c - the rounding ops, sign, the hyperbolic functions and the
 * activations of math.c, the shifts and logical_not on every dtype, against
 * the host's libm (double, rounded to float32) on special values: halves
 * (round is half to even), values past 2^23 (already whole), +-0, +-inf,
 * NaN, domain edges. Plus: integer inputs keep their dtype for the rounding
 * ops and become float32 for the rest; a chain of these ops is one kernel.
 * Public API only. */
#include <math.h>

#include "api_helpers.h"

typedef tc_tensor *(*unary_fn)(tc_tensor *);

/* fn applied to the n floats in x equals host(x) (NaN matches NaN) */
static void check_f32(const char *what, unary_fn fn, double (*host)(double), const float *x,
                      int64_t n, double rtol, double atol) {
    tc_tensor *t = f32(1, &n, x);
    float want[64];
    for (int64_t i = 0; i < n; i++) want[i] = (float)host(x[i]);
    expect_f32(fn(t), want, n, rtol, atol, what);
    tc_release(t);
}

static double h_sign(double v) {
    return v > 0 ? 1 : v < 0 ? -1 : 0; /* NaN: 0 (torch) */
}
static double h_round(double v) {
    return nearbyint(v); /* the default mode: half to even */
}

static const float specials[] = {-2.5f,      -1.5f,       -0.5f,    0.5f,        1.5f,
                                 2.5f,       3.5f,        -3.5f,    0.49999997f, -0.49999997f,
                                 2.4999998f, -3.7f,       3.7f,     8388607.5f,  -8388607.5f,
                                 4194303.5f, 16777215.0f, 1e10f,    -1e10f,      0.0f,
                                 -0.0f,      1e-30f,      INFINITY, -INFINITY,   NAN};

static void test_rounding(void **state) {
    (void)state;
    int64_t n = COUNT(specials);
    check_f32("trunc", tc_trunc, trunc, specials, n, 0, 0);
    check_f32("floor", tc_floor, floor, specials, n, 0, 0);
    check_f32("ceil", tc_ceil, ceil, specials, n, 0, 0);
    check_f32("round", tc_round, h_round, specials, n, 0, 0);
    check_f32("sign", tc_sign, h_sign, specials, n, 0, 0);
}

static void test_rounding_integers(void **state) {
    (void)state;
    int32_t v[4] = {-3, 0, 7, 2147483647};
    unary_fn fns[4] = {tc_trunc, tc_floor, tc_ceil, tc_round};
    for (int k = 0; k < 4; k++) {
        tc_tensor *t = from(v, TC_INT32, 1, SHAPE(4)), *r = fns[k](t);
        check_meta(r, TC_INT32, 1, SHAPE(4));
        expect_values(r, v, 4, 0, 0, "rounding keeps int32 values");
        tc_release(t);
    }
    int32_t s_want[4] = {-1, 0, 1, 1};
    tc_tensor *t = from(v, TC_INT32, 1, SHAPE(4));
    expect_values(tc_sign(t), s_want, 4, 0, 0, "sign int32");
    tc_release(t);
    uint8_t u[3] = {0, 3, 255}, u_want[3] = {0, 1, 1};
    t = from(u, TC_UINT8, 1, SHAPE(3));
    expect_values(tc_sign(t), u_want, 3, 0, 0, "sign uint8");
    expect_values(tc_floor(t), u, 3, 0, 0, "floor uint8");
    tc_release(t);
    uint16_t h[4] = {0x4100 /* 2.5 */, 0xBE00 /* -1.5 */, 0x6402 /* 1026 */, 0x3C00 /* 1 */};
    uint16_t h_want[4] = {0x4000 /* 2 */, 0xC000 /* -2 */, 0x6402, 0x3C00};
    t = from(h, TC_FLOAT16, 1, SHAPE(4));
    tc_tensor *r = tc_round(t);
    check_meta(r, TC_FLOAT16, 1, SHAPE(4));
    expect_values(r, h_want, 4, 0, 0, "round float16 (half to even)");
    tc_release(t);
}

/* trunc, floor, ceil and round keep the sign of a zero result, as C and
 * torch do (floor(-0.0), ceil(-0.5), trunc(-0.3), round(-0.4) are -0), in
 * every float dtype: bit for bit against the host's functions on the input
 * rounded to that dtype (read back through an exact cast to float64) */
static void test_rounding_signed_zero(void **state) {
    (void)state;
    static const float v[] = {-0.0f, -0.3f, -0.5f, -0.7f, 0.0f,  0.3f,     -1e-30f,
                              0.5f,  -2.5f, -1.5f, 0.7f,  -3.7f, INFINITY, NAN};
    enum { N = COUNT(v) };
    const tc_dtype dts[4] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16, TC_FLOAT64};
    unary_fn fns[4] = {tc_trunc, tc_floor, tc_ceil, tc_round};
    double (*host[4])(double) = {trunc, floor, ceil, h_round};
    const char *names[4] = {"trunc", "floor", "ceil", "round"};
    for (int d = 0; d < 4; d++) {
        tc_tensor *x32 = f32(1, SHAPE(N), v), *x = tc_cast(x32, dts[d]),
                  *x64 = tc_cast(x, TC_FLOAT64);
        double in[N], got[N];
        assert_int_equal(tc_to_host(x64, in, sizeof in), TC_OK);
        for (int k = 0; k < 4; k++) {
            tc_tensor *r = fns[k](x), *r64 = tc_cast(r, TC_FLOAT64);
            assert_int_equal(tc_get_dtype(r), dts[d]);
            assert_int_equal(tc_to_host(r64, got, sizeof got), TC_OK);
            for (int i = 0; i < N; i++) {
                double want = host[k](in[i]);
                bool ok = isnan(want) ? isnan(got[i])
                                      : want == got[i] && signbit(want) == signbit(got[i]);
                if (!ok)
                    print_error("%s(%g) in %s: got %g, want %g\n", names[k], in[i],
                                tc_dtype_name(dts[d]), got[i], want);
                assert_true(ok);
            }
            tc_release(r);
            tc_release(r64);
        }
        tc_release(x32);
        tc_release(x);
        tc_release(x64);
    }
}

static double h_softsign(double v) {
    return v / (1 + fabs(v));
}
static double h_hardswish(double v) {
    return v * fmin(fmax(v + 3, 0), 6) / 6;
}
static double h_softplus(double v) {
    return fmax(v, 0) + log1p(exp(-fabs(v)));
}
static double h_mish(double v) {
    return v * tanh(h_softplus(v));
}
static double h_quick_gelu(double v) {
    return v / (1 + exp(-1.702 * v));
}

static void test_hyperbolic_and_activations(void **state) {
    (void)state;
    static const float x[] = {-20, -5, -3, -1.5f, -0.3f, -1e-3f, 0, 1e-3f, 0.3f, 1, 3, 7, 20};
    int64_t n = COUNT(x);
    check_f32("sinh", tc_sinh, sinh, x, n, 1e-5, 1e-6);
    check_f32("cosh", tc_cosh, cosh, x, n, 1e-5, 1e-6);
    check_f32("asinh", tc_asinh, asinh, x, n, 1e-5, 1e-6);
    check_f32("softsign", tc_softsign, h_softsign, x, n, 1e-6, 1e-7);
    check_f32("hardswish", tc_hardswish, h_hardswish, x, n, 1e-6, 1e-7);
    check_f32("mish", tc_mish, h_mish, x, n, 1e-5, 1e-6);
    check_f32("quick_gelu", tc_quick_gelu, h_quick_gelu, x, n, 1e-5, 1e-6);
    static const float big[] = {1e4f, -1e4f, 1e20f, -1e20f, 1e38f, INFINITY, -INFINITY, NAN};
    check_f32("asinh far out", tc_asinh, asinh, big, COUNT(big), 1e-6, 0);
    static const float ac[] = {1,     1.0001f,  1.5f, 10, 4096,   5000,
                               1e20f, INFINITY, 0.5f, -1, -1e20f, NAN};
    check_f32("acosh", tc_acosh, acosh, ac, COUNT(ac), 1e-5, 1e-6);
    static const float at[] = {-1, -0.999f, -0.5f, -1e-4f, 0, 0.25f, 0.9f, 1, 1.5f, -2, NAN};
    check_f32("atanh", tc_atanh, atanh, at, COUNT(at), 1e-5, 1e-6);
}

static void test_celu(void **state) {
    (void)state;
    float x[6] = {-4, -1, -0.1f, 0, 0.5f, 3}, want[6];
    for (double alpha = 0.5; alpha <= 2; alpha *= 2) {
        for (int i = 0; i < 6; i++)
            want[i] = (float)(fmax(x[i], 0) + fmin(alpha * (exp(x[i] / alpha) - 1), 0));
        tc_tensor *t = f32(1, SHAPE(6), x);
        expect_f32(tc_celu(t, alpha), want, 6, 1e-5, 1e-6, "celu");
        tc_release(t);
    }
}

static void test_float_math_on_ints(void **state) {
    (void)state;
    int32_t v[3] = {-2, 0, 3};
    tc_tensor *t = from(v, TC_INT32, 1, SHAPE(3)), *r = tc_sinh(t);
    check_meta(r, TC_FLOAT32, 1, SHAPE(3));
    float want[3] = {(float)sinh(-2), 0, (float)sinh(3)};
    expect_f32(r, want, 3, 1e-6, 1e-7, "sinh of int32");
    tc_release(t);
}

static void test_shifts(void **state) {
    (void)state;
    int32_t a[6] = {5, -5, 1, -1, 12345, -8}, n[6] = {1, 2, 31, 32, 40, -1};
    int32_t shl[6] = {10, -20, INT32_MIN, 0, 0, 0}, shr[6] = {2, -2, 0, -1, 0, -1};
    tc_tensor *ta = from(a, TC_INT32, 1, SHAPE(6)), *tn = from(n, TC_INT32, 1, SHAPE(6));
    expect_values(tc_lshift(ta, tn), shl, 6, 0, 0, "int32 <<");
    expect_values(tc_rshift(ta, tn), shr, 6, 0, 0, "int32 >>");
    uint8_t u[4] = {255, 1, 128, 7}, un[4] = {7, 8, 7, 1};
    uint8_t ushl[4] = {128, 0, 0, 14}, ushr[4] = {1, 0, 1, 3};
    tc_tensor *tu = from(u, TC_UINT8, 1, SHAPE(4)), *tun = from(un, TC_UINT8, 1, SHAPE(4));
    expect_values(tc_lshift(tu, tun), ushl, 4, 0, 0, "uint8 <<");
    expect_values(tc_rshift(tu, tun), ushr, 4, 0, 0, "uint8 >>");
    int64_t big[2] = {1, -3}, bn[1] = {40};
    int64_t bshl[2] = {INT64_C(1) << 40, -3 * (INT64_C(1) << 40)}, bshr[2] = {0, -1};
    tc_tensor *tb = from(big, TC_INT64, 1, SHAPE(2)), *tbn = from(bn, TC_INT64, 0, NULL);
    expect_values(tc_lshift(tb, tbn), bshl, 2, 0, 0, "int64 << (broadcast count)");
    expect_values(tc_rshift(tb, tbn), bshr, 2, 0, 0, "int64 >>");
    tc_release(ta), tc_release(tn), tc_release(tu), tc_release(tun), tc_release(tb),
        tc_release(tbn);
}

static void test_logical_not_any_dtype(void **state) {
    (void)state;
    float f[4] = {0, -0.0f, NAN, 2};
    int32_t i[3] = {0, 5, -1};
    uint8_t u[2] = {0, 9};
    bool fb[4] = {true, true, false, false}, ib[3] = {true, false, false}, ub[2] = {true, false};
    tc_tensor *tf = f32(1, SHAPE(4), f), *ti = from(i, TC_INT32, 1, SHAPE(3));
    tc_tensor *tu = from(u, TC_UINT8, 1, SHAPE(2));
    tc_tensor *r = tc_logical_not(tf);
    check_meta(r, TC_BOOL, 1, SHAPE(4));
    expect_values(r, fb, 4, 0, 0, "logical_not float32");
    expect_values(tc_logical_not(ti), ib, 3, 0, 0, "logical_not int32");
    expect_values(tc_logical_not(tu), ub, 2, 0, 0, "logical_not uint8");
    tc_release(tf), tc_release(ti), tc_release(tu);
}

/* elementwise ops join one kernel: the point of composing them from primitives */
static void test_chain_is_one_kernel(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(8, 9), 3, -4, 4);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *a = tc_round(x), *b = tc_mish(a), *c = tc_asinh(x), *d = tc_mul(b, c);
    tc_tensor *e = tc_hardswish(d), *f = tc_floor(e), *g = tc_add(f, x), *h = tc_sign(g);
    tc_tensor *y = tc_celu(h, 0.5);
    tc_check_schedule(y, 1, 1e-5, 1e-6, "round/mish/asinh/hardswish/floor/sign/celu chain");
    tc_tensor *ts[10] = {x, a, b, c, d, e, f, g, h, y};
    for (int i = 0; i < 10; i++) tc_release(ts[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_rounding),
        TEST(test_rounding_integers),
        TEST(test_rounding_signed_zero),
        TEST(test_hyperbolic_and_activations),
        TEST(test_celu),
        TEST(test_float_math_on_ints),
        TEST(test_shifts),
        TEST(test_logical_not_any_dtype),
        TEST(test_chain_is_one_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
