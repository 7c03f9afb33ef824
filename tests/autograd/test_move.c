/* test_move.c - tc_contiguous_backward (the values unchanged and no kernel;
 * the gradient the same as without it, by finite differences, and realized
 * in a buffer of its own: one kernel more for a reduce that reads it) and
 * tc_move_to_device (tinygrad's to_: a leaf and its gradient move, later
 * gradients land on the new device; a result keeps its history behind the
 * copy; with grad mode off it keeps none; a failed move changes nothing);
 * copies of views and consts (which the scheduler cannot copy as they are).
 * The machine has the CPU and NULL devices; NULL reads back zeros, so values
 * are checked on the CPU and devices on NULL. */
#include "grad_check.h"

#include <string.h>

static tc_tensor *lib_cbw(tc_tensor *const *x, const void *arg) {
    (void)arg; /* exp(u) * sin(u), u = contiguous_backward(x) */
    tc_tensor *u = tc_contiguous_backward(x[0]), *e = tc_exp(u), *s = tc_sin(u), *r = tc_mul(e, s);
    tc_release(u), tc_release(e), tc_release(s);
    return r;
}
static int64_t host_cbw(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 12; i++) out[i] = exp(x[0][i]) * sin(x[0][i]);
    return 12;
}

static void test_contiguous_backward_gradient(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(3, 4), -2, 2);
    c.lib = lib_cbw, c.host = host_cbw;
    gc_check("exp(u) * sin(u), u = contiguous_backward(x)", &c, 2e-3, 2e-4);
}

/* the gradient's reader: one kernel without contiguous_backward (the
 * gradient fuses into the sum), two with it (the gradient's buffer first) */
static void test_contiguous_backward_kernels(void **state) {
    (void)state;
    float v[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    for (int cb = 0; cb < 2; cb++) {
        tc_tensor *x = f32(2, SHAPE(2, 3), v);
        assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
        tc_tensor *u = cb ? tc_contiguous_backward(x) : tc_retain(x);
        assert_int_equal(tc_schedule_kernel_count(&u, 1), 0); /* a realized x: nothing to run */
        expect_f32(tc_retain(u), v, 6, 0, 0, "contiguous_backward's values");
        tc_tensor *e = tc_exp(u), *s = tc_sin(u), *p = tc_mul(e, s),
                  *loss = tc_sum(p, 0, NULL, false);
        assert_int_equal(tc_backward(loss), TC_OK);
        tc_tensor *g = tc_grad(x), *gs = tc_sum(g, 0, NULL, false);
        assert_int_equal(tc_schedule_kernel_count(&gs, 1), cb ? 2 : 1);
        float want = 0;
        for (int i = 0; i < 6; i++) want += expf(v[i]) * (sinf(v[i]) + cosf(v[i]));
        expect_f32(gs, &want, 1, 1e-5, 1e-5, "sum of the gradient");
        tc_tensor *ts[] = {x, u, e, s, p, loss, g};
        for (size_t i = 0; i < COUNT(ts); i++) tc_release(ts[i]);
    }
    assert_null(tc_contiguous_backward(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_contiguous_backward: tensor a is NULL");
}

static bool on(tc_tensor *t, const char *dev) {
    return strcmp(tc_device(t), dev) == 0;
}

/* a leaf with a gradient moves with it and stays a leaf */
static void test_move_leaf(void **state) {
    (void)state;
    float v[3] = {1, 2, 3}, g2[3] = {2, 4, 6};
    tc_tensor *x = f32(1, SHAPE(3), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *sq = tc_mul(x, x), *loss = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    assert_int_equal(tc_move_to_device(x, "CPU"), TC_OK); /* same device: nothing changes */
    expect_f32(tc_retain(x), v, 3, 0, 0, "x after a move to its own device");
    expect_f32(tc_grad(x), g2, 3, 0, 0, "its gradient");
    assert_int_equal(tc_move_to_device(x, "NULL"), TC_OK);
    assert_true(on(x, "NULL"));
    assert_true(tc_requires_grad(x));
    tc_tensor *g = tc_grad(x);
    assert_true(on(g, "NULL"));
    tc_release(g);
    tc_tensor *two = scalar(2, TC_FLOAT32), *n2 = tc_to_device(two, "NULL");
    tc_tensor *y = tc_mul(x, n2), *l2 = tc_sum(y, 0, NULL, false);
    assert_int_equal(tc_backward(l2), TC_OK); /* accumulates onto the moved gradient */
    g = tc_grad(x);
    assert_true(on(g, "NULL"));
    if (tc_realize(&g, 1) != TC_OK) fprintf(stderr, "realize: %s\n", tc_last_error());
    tc_release(g);
    assert_int_equal(tc_move_to_device(x, NULL), TC_OK); /* the default device: CPU */
    assert_true(on(x, "CPU"));
    g = tc_grad(x);
    assert_true(on(g, "CPU"));
    tc_tensor *ts[] = {g, x, sq, loss, two, n2, y, l2};
    for (size_t i = 0; i < COUNT(ts); i++) tc_release(ts[i]);
}

/* a leaf used on the CPU, then moved: the gradient of that use follows it */
static void test_move_leaf_after_use(void **state) {
    (void)state;
    float v[2] = {1, 2};
    tc_tensor *x = f32(1, SHAPE(2), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *sq = tc_mul(x, x), *loss = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_move_to_device(x, "NULL"), TC_OK);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(x);
    assert_true(on(g, "NULL"));
    assert_int_equal(tc_realize(&g, 1), TC_OK);
    tc_release(g), tc_release(loss), tc_release(sq), tc_release(x);
}

/* a result keeps its history behind the copy: gradients reach its inputs on
 * their device, with their values (moved to the CPU it is on: a no-op; to
 * NULL and back: the devices) */
static void test_move_result(void **state) {
    (void)state;
    float v[3] = {1, 2, 3}, six[3] = {6, 6, 6};
    tc_tensor *a = f32(1, SHAPE(3), v), *three = scalar(3, TC_FLOAT32),
              *two = scalar(2, TC_FLOAT32);
    assert_int_equal(tc_set_requires_grad(a, true), TC_OK);
    tc_tensor *y = tc_mul(a, three);
    assert_int_equal(tc_move_to_device(y, "NULL"), TC_OK);
    assert_true(on(y, "NULL"));
    assert_true(tc_requires_grad(y));
    assert_int_equal(tc_move_to_device(y, "CPU"), TC_OK); /* back: two copies in its history */
    tc_tensor *z = tc_mul(y, two), *loss = tc_sum(z, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(a);
    assert_true(on(g, "CPU"));
    tc_release(g);
    tc_tensor *b = f32(1, SHAPE(3), v);
    assert_int_equal(tc_set_requires_grad(b, true), TC_OK);
    tc_tensor *yb = tc_mul(b, three);
    assert_int_equal(tc_move_to_device(yb, "CPU"), TC_OK);
    tc_tensor *zb = tc_mul(yb, two), *lb = tc_sum(zb, 0, NULL, false);
    assert_int_equal(tc_backward(lb), TC_OK);
    expect_f32(tc_grad(b), six, 3, 0, 0, "d sum(2 * 3b) / db through a move");
    /* grad mode off: the move records nothing, the result keeps no history */
    tc_tensor *yc = tc_mul(b, three);
    bool was = tc_set_grad_enabled(false);
    assert_int_equal(tc_move_to_device(yc, "NULL"), TC_OK);
    tc_set_grad_enabled(was);
    assert_false(tc_requires_grad(yc));
    tc_tensor *ts[] = {a, three, two, y, z, loss, b, yb, zb, lb, yc};
    for (size_t i = 0; i < COUNT(ts); i++) tc_release(ts[i]);
}

/* what a copy reads: views of buffers (transposed, a row, a reshape), a 0-d
 * const and an expanded one, an unrealized expression; to another device and
 * moved in place (a copy of a view used to stop the scheduler) */
static void test_copy_views_and_consts(void **state) {
    (void)state;
    float v[6] = {0, 1, 2, 3, 4, 5};
    tc_tensor *x = f32(2, SHAPE(2, 3), v), *two = scalar(2, TC_FLOAT32);
    tc_tensor *srcs[6] = {tc_transpose(x, 0, 1),
                          tc_shrink(x, SHAPE(1, 2, 0, 3)),
                          tc_reshape(x, 2, SHAPE(3, 2)),
                          tc_retain(two),
                          tc_full(2, SHAPE(2, 2), 1.5, TC_FLOAT32, NULL),
                          tc_mul(x, two)};
    for (int i = 0; i < 6; i++) {
        tc_tensor *c = tc_to_device(srcs[i], "NULL");
        if (!c || tc_realize(&c, 1) != TC_OK) fprintf(stderr, "case %d: %s\n", i, tc_last_error());
        assert_non_null(c);
        assert_true(on(c, "NULL"));
        check_meta(c, TC_FLOAT32, tc_ndim(srcs[i]), tc_shape(srcs[i]));
        assert_int_equal(tc_move_to_device(srcs[i], "NULL"), TC_OK);
        assert_int_equal(tc_realize(&srcs[i], 1), TC_OK);
        tc_release(c), tc_release(srcs[i]);
    }
    tc_release(x), tc_release(two);
}

static void test_move_errors(void **state) {
    (void)state;
    float v[2] = {1, 2};
    tc_tensor *x = f32(1, SHAPE(2), v);
    assert_int_equal(tc_move_to_device(x, "NOPE"), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "tc_move_to_device");
    assert_true(on(x, "CPU"));
    expect_f32(tc_retain(x), v, 2, 0, 0, "x after a failed move");
    assert_int_equal(tc_move_to_device(x, "CPU:3"), TC_ERR_DEVICE);
    assert_tc_error(TC_ERR_DEVICE, "tc_move_to_device: device 'CPU:3'");
    assert_int_equal(tc_move_to_device(NULL, "CPU"), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_move_to_device: tensor t is NULL");
    tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_contiguous_backward_gradient),
        TEST(test_contiguous_backward_kernels),
        TEST(test_move_leaf),
        TEST(test_move_leaf_after_use),
        TEST(test_move_result),
        TEST(test_copy_views_and_consts),
        TEST(test_move_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
