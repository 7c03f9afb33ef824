/* test_grad_math.c - gradients of math.c's ops (sinh, cosh, asinh, acosh,
 * atanh, softsign, hardswish, mish, quick_gelu, celu) against central
 * finite differences in double on the host (grad_check.h), each on ranges
 * where it is smooth (hardswish's kinks at -3 and 3 are left out of each
 * range, and each side is checked); and the gradients that are zero: the
 * rounding ops, sign and x**0 give zeros (torch's), not a cut graph, even at
 * x = 0 and with the loss made of them alone. Tolerances as test_grad.c's. */
#include "grad_check.h"

#define RTOL 2e-3
#define ATOL 2e-4

typedef struct {
    const char *name;
    tc_tensor *(*lib)(tc_tensor *);
    double (*host)(double);
    double lo, hi, kink; /* input range, distance from 0 */
} unary_op;

static tc_tensor *lib_unary(tc_tensor *const *x, const void *arg) {
    return ((const unary_op *)arg)->lib(x[0]);
}
static int64_t host_unary(const double *const *x, double *out, const void *arg) {
    for (int k = 0; k < 12; k++) out[k] = ((const unary_op *)arg)->host(x[0][k]);
    return 12;
}

static double h_softsign(double v) {
    return v / (1 + fabs(v));
}
static double h_hardswish(double v) {
    return v * fmin(fmax(v + 3, 0), 6) / 6;
}
static double h_mish(double v) {
    return v * tanh(fmax(v, 0) + log1p(exp(-fabs(v))));
}
static double h_quick_gelu(double v) {
    return v / (1 + exp(-1.702 * v));
}
static double h_celu(double v) {
    return fmax(v, 0) + fmin(0.5 * (exp(v / 0.5) - 1), 0);
}
static tc_tensor *celu_half(tc_tensor *a) {
    return tc_celu(a, 0.5);
}

static const unary_op ops[] = {
    {"sinh", tc_sinh, sinh, -2, 2, 0},
    {"cosh", tc_cosh, cosh, -2, 2, 0},
    {"asinh", tc_asinh, asinh, -4, 4, 0},
    {"acosh", tc_acosh, acosh, 1.3, 4, 0},
    {"atanh", tc_atanh, atanh, -0.8, 0.8, 0},
    {"softsign", tc_softsign, h_softsign, -3, 3, 0.05},
    {"hardswish (-3,3)", tc_hardswish, h_hardswish, -2.8, 2.8, 0},
    {"hardswish above 3", tc_hardswish, h_hardswish, 3.2, 6, 0},
    {"hardswish below -3", tc_hardswish, h_hardswish, -6, -3.2, 0},
    {"mish", tc_mish, h_mish, -4, 4, 0},
    {"quick_gelu", tc_quick_gelu, h_quick_gelu, -3, 3, 0},
    {"celu alpha 0.5", celu_half, h_celu, -2, 2, 0.05},
};

static void test_smooth_ops(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        const unary_op *u = &ops[i];
        gc_case c = one_input(2, SHAPE(3, 4), u->lo, u->hi);
        c.kink = u->kink;
        c.lib = lib_unary, c.host = host_unary, c.arg = u;
        gc_check(u->name, &c, RTOL, ATOL);
    }
}

/* through a transposed view and a broadcast: the rule works at the op's
 * shape and the movement rules carry it back */
static tc_tensor *lib_view(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *t = tc_transpose(x[0], 0, 1), *m = tc_mish(t);
    tc_tensor *e = tc_expand(m, 3, SHAPE(2, 4, 3)), *r = tc_asinh(e);
    tc_release(t), tc_release(m), tc_release(e);
    return r;
}
static int64_t host_view(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) out[b * 12 + i * 3 + j] = asinh(h_mish(x[0][j * 4 + i]));
    return 24;
}

static void test_views(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(3, 4), -3, 3);
    c.lib = lib_view, c.host = host_view;
    gc_check("asinh(expand(mish(x^T)))", &c, RTOL, ATOL);
}

static tc_tensor *pow0(tc_tensor *a) {
    tc_tensor *z = tc_full(0, NULL, 0, TC_FLOAT32, NULL), *r = tc_pow(a, z);
    tc_release(z);
    return r;
}

/* loss = sum(op(x)): the op's result requires grad and its gradient is 0 */
static void test_zero_gradients(void **state) {
    (void)state;
    static const struct {
        const char *name;
        tc_tensor *(*fn)(tc_tensor *);
    } zero_ops[] = {{"trunc", tc_trunc}, {"floor", tc_floor}, {"ceil", tc_ceil},
                    {"round", tc_round}, {"sign", tc_sign},   {"x**0", pow0}};
    float v[6] = {-1.5f, 0, 2.5f, 0.3f, -0.7f, 4}, zeros[6] = {0};
    for (size_t k = 0; k < sizeof zero_ops / sizeof zero_ops[0]; k++) {
        tc_tensor *x = f32(2, SHAPE(2, 3), v);
        assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
        tc_tensor *y = zero_ops[k].fn(x);
        assert_true(tc_requires_grad(y)); /* recorded, not cut off */
        tc_tensor *loss = tc_sum(y, 0, NULL, false);
        assert_int_equal(tc_backward(loss), TC_OK);
        tc_tensor *g = tc_grad(x);
        check_meta(g, TC_FLOAT32, 2, SHAPE(2, 3));
        expect_f32(g, zeros, 6, 0, 0, zero_ops[k].name);
        tc_release(loss), tc_release(y), tc_release(x);
    }
}

/* x*floor(x): the product rule sees floor's 0, so d/dx = floor(x) */
static void test_zero_gradient_in_a_product(void **state) {
    (void)state;
    float v[4] = {-1.5f, 0.25f, 2.5f, 3}, want[4] = {-2, 0, 2, 3};
    tc_tensor *x = f32(1, SHAPE(4), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *f = tc_floor(x), *y = tc_mul(x, f), *loss = tc_sum(y, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    expect_f32(tc_grad(x), want, 4, 0, 0, "d(x*floor x)/dx");
    tc_release(loss), tc_release(y), tc_release(f), tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_smooth_ops),
        TEST(test_views),
        TEST(test_zero_gradients),
        TEST(test_zero_gradient_in_a_product),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
