/* test_assign.c - tc_assign: lazy in-place updates of realized buffers
 * (nothing runs until realized; the buffer keeps its identity), broadcast
 * and cast of the value, values that read the target (x <- x + 1, chained),
 * lazy and constant targets (realized into buffers of their own, no
 * aliasing), views (a reshape of a whole buffer is fine, part of one is an
 * error), autograd (not differentiable; a leaf keeps its gradient, a result
 * loses its history) and an SGD step through assign. Public API only. */
#include "../api/api_helpers.h"

#include <math.h>

static void test_lazy_in_place(void **state) {
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6}, n[6] = {6, 5, 4, 3, 2, 1};
    tc_tensor *x = f32(2, SHAPE(2, 3), v), *y = f32(2, SHAPE(2, 3), n);
    tc_counters before, after;
    tc_get_counters(&before);
    assert_int_equal(tc_assign(x, y), TC_OK);
    tc_get_counters(&after);
    assert_int_equal(after.kernel_count, before.kernel_count); /* nothing ran */
    assert_false(tc_is_realized(x));
    check_meta(x, TC_FLOAT32, 2, SHAPE(2, 3));
    assert_int_equal(tc_schedule_kernel_count(&x, 1), 1);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    assert_true(tc_is_realized(x));
    expect_f32(tc_retain(x), n, 6, 0, 0, "x after assign");
    expect_f32(tc_retain(y), n, 6, 0, 0, "y unchanged");
    tc_release(x), tc_release(y);
}

static void test_broadcast_and_cast(void **state) {
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *x = f32(2, SHAPE(2, 3), v);
    int32_t row[3] = {7, 8, 9};
    tc_tensor *r = from(row, TC_INT32, 1, SHAPE(3));
    assert_int_equal(tc_assign(x, r), TC_OK);
    check_meta(x, TC_FLOAT32, 2, SHAPE(2, 3));
    float want[6] = {7, 8, 9, 7, 8, 9};
    expect_f32(tc_retain(x), want, 6, 0, 0, "int row broadcast into float (2,3)");
    tc_tensor *s = scalar(-1.5, TC_FLOAT32);
    assert_int_equal(tc_assign(x, s), TC_OK);
    float all[6] = {-1.5f, -1.5f, -1.5f, -1.5f, -1.5f, -1.5f};
    expect_f32(tc_retain(x), all, 6, 0, 0, "scalar broadcast");
    tc_tensor *bad = tc_zeros(1, SHAPE(2), TC_FLOAT32, NULL);
    assert_int_equal(tc_assign(x, bad), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_assign: cannot broadcast value of shape (2,) to dst's shape (2,3)");
    tc_tensor *big = tc_zeros(3, SHAPE(1, 2, 3), TC_FLOAT32, NULL);
    assert_int_equal(tc_assign(x, big), TC_ERR_SHAPE);
    assert_int_equal(tc_assign(NULL, x), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_assign: tensor dst is NULL");
    assert_int_equal(tc_assign(x, NULL), TC_ERR_INVALID);
    expect_f32(tc_retain(x), all, 6, 0, 0, "failed assigns change nothing");
    tc_release(big), tc_release(bad), tc_release(s), tc_release(r), tc_release(x);
}

/* x <- x + 1 twice without a realize in between, then once more after:
 * each update reads the previous one */
static void test_reads_target(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4};
    tc_tensor *x = f32(1, SHAPE(4), v), *one = scalar(1, TC_FLOAT32);
    tc_tensor *old = tc_retain(x); /* a handle on the buffer's old node */
    for (int i = 0; i < 2; i++) {
        tc_tensor *p = tc_add(x, one);
        assert_int_equal(tc_assign(x, p), TC_OK);
        tc_release(p);
    }
    float want[4] = {3, 4, 5, 6};
    expect_f32(tc_retain(x), want, 4, 0, 0, "x + 1 + 1");
    /* reversing in place reads elements the kernel overwrites: the
     * scheduler must keep that right */
    tc_tensor *f = tc_flip(x, 0, NULL), *zero = scalar(0, TC_FLOAT32), *f0 = tc_add(f, zero);
    assert_int_equal(tc_assign(x, f0), TC_OK);
    float rev[4] = {6, 5, 4, 3};
    expect_f32(tc_retain(x), rev, 4, 0, 0, "x <- flip(x) + 0");
    /* the old handle shares the buffer: it sees the new contents */
    expect_f32(old, rev, 4, 0, 0, "an alias of the buffer");
    tc_release(f0), tc_release(zero), tc_release(f), tc_release(one), tc_release(x);
}

/* x <- flip(x) with the value a pure view of the target's buffer: the view
 * is copied out first (tc_assign makes it contiguous), else the kernel would
 * read elements it already overwrote (4 3 3 4) */
static void test_pure_view_of_target(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4}, rev[4] = {4, 3, 2, 1};
    tc_tensor *x = f32(1, SHAPE(4), v), *f = tc_flip(x, 0, NULL);
    assert_int_equal(tc_assign(x, f), TC_OK);
    assert_int_equal(tc_schedule_kernel_count(&x, 1), 2); /* the copy, then the assign */
    float *got = tc_test_read(x);
    assert_true(tc_allclose_f32(got, rev, 4, 0, 0, "x <- flip(x)"));
    free(got);
    tc_release(f), tc_release(x);
}

/* lazy targets get buffers of their own: two equal constants, and an
 * elementwise result shared with another handle, never alias */
static void test_lazy_targets(void **state) {
    (void)state;
    tc_tensor *m = tc_zeros(1, SHAPE(3), TC_FLOAT32, NULL), *v = tc_zeros(1, SHAPE(3), TC_FLOAT32, NULL);
    float a[3] = {1, 2, 3}, z[3] = {0, 0, 0};
    tc_tensor *ta = f32(1, SHAPE(3), a);
    assert_int_equal(tc_assign(m, ta), TC_OK);
    expect_f32(tc_retain(m), a, 3, 0, 0, "zeros <- a");
    expect_f32(tc_retain(v), z, 3, 0, 0, "the other zeros stay zeros");
    tc_tensor *s1 = tc_add(ta, ta), *s2 = tc_add(ta, ta); /* one interned node */
    assert_int_equal(tc_assign(s1, ta), TC_OK);
    float twice[3] = {2, 4, 6};
    expect_f32(tc_retain(s1), a, 3, 0, 0, "lazy dst <- a");
    expect_f32(tc_retain(s2), twice, 3, 0, 0, "its twin is untouched");
    /* a lazy non-contiguous dst is made contiguous in its own order */
    tc_tensor *base = f32(2, SHAPE(1, 3), a), *t = tc_transpose(base, 0, 1), *e = tc_exp(t);
    float c[3] = {9, 8, 7};
    tc_tensor *tc3 = f32(2, SHAPE(3, 1), c);
    assert_int_equal(tc_assign(e, tc3), TC_OK);
    expect_f32(tc_retain(e), c, 3, 0, 0, "lazy transposed dst");
    tc_release(tc3), tc_release(e), tc_release(t), tc_release(base);
    tc_release(s1), tc_release(s2), tc_release(ta), tc_release(m), tc_release(v);
}

static void test_views(void **state) {
    (void)state;
    float v[6] = {1, 2, 3, 4, 5, 6}, n[6] = {0, 1, 0, 1, 0, 1};
    tc_tensor *x = f32(2, SHAPE(2, 3), v), *flat = tc_reshape(x, 1, SHAPE(6));
    tc_tensor *nv = f32(1, SHAPE(6), n);
    assert_int_equal(tc_assign(flat, nv), TC_OK); /* a reshape of the whole buffer */
    check_meta(flat, TC_FLOAT32, 1, SHAPE(6));
    expect_f32(tc_retain(flat), n, 6, 0, 0, "assign through a reshape");
    expect_f32(tc_retain(x), n, 6, 0, 0, "the buffer's other handle");
    tc_tensor *part = tc_shrink(x, SHAPE(0, 1, 0, 3)), *tr = tc_transpose(x, 0, 1);
    tc_tensor *z = scalar(0, TC_FLOAT32);
    assert_int_equal(tc_assign(part, z), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_assign: dst of shape (1,3) is a view into part of a buffer");
    assert_int_equal(tc_assign(tr, z), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "out of its order");
    assert_int_equal(tc_assign(x, x), TC_OK); /* x <- x: nothing to do */
    expect_f32(tc_retain(x), n, 6, 0, 0, "x <- x");
    tc_release(z), tc_release(part), tc_release(tr), tc_release(nv), tc_release(flat), tc_release(x);
}

/* assign is not differentiable: a leaf keeps requires_grad and its gradient;
 * a result with history loses it */
static void test_autograd(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    tc_tensor *w = f32(1, SHAPE(3), v);
    tc_set_requires_grad(w, true);
    tc_tensor *sq = tc_square(w), *loss = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(w), *y = tc_mul(w, w);
    assert_true(tc_requires_grad(y));
    assert_int_equal(tc_assign(y, g), TC_OK);
    assert_false(tc_requires_grad(y));
    float twice[3] = {2, 4, 6};
    expect_f32(tc_retain(y), twice, 3, 1e-6, 1e-6, "a result <- its leaf's gradient");
    /* SGD: w <- w.detach() - 0.1 * grad. The gradient is lazy and reads w's
     * buffer when it runs: realize it before the in-place update if it is
     * still wanted afterwards (else it would see the new w) */
    assert_int_equal(tc_realize(&g, 1), TC_OK);
    tc_tensor *wd = tc_detach(w), *lr = scalar(0.1, TC_FLOAT32), *step = tc_mul(lr, g);
    tc_tensor *nw = tc_sub(wd, step);
    assert_int_equal(tc_assign(w, nw), TC_OK);
    assert_true(tc_requires_grad(w));
    float want[3] = {0.8f, 1.6f, 2.4f};
    expect_f32(tc_retain(w), want, 3, 1e-6, 1e-6, "w after one SGD step");
    expect_f32(tc_grad(w), twice, 3, 1e-6, 1e-6, "the leaf's gradient stays");
    tc_release(nw), tc_release(step), tc_release(lr), tc_release(wd), tc_release(y), tc_release(g);
    tc_release(loss), tc_release(sq), tc_release(w);
}

/* an Adam-like step: m, v and the parameter updated from one gradient and
 * realized together (the scheduler may run them as one kernel) */
static void test_optimizer_step(void **state) {
    (void)state;
    float pv[4] = {1, -1, 2, 0.5f}, gv[4] = {0.1f, -0.2f, 0.3f, 0};
    tc_tensor *p = f32(1, SHAPE(4), pv), *g = f32(1, SHAPE(4), gv);
    tc_tensor *m = tc_zeros(1, SHAPE(4), TC_FLOAT32, NULL), *v = tc_zeros(1, SHAPE(4), TC_FLOAT32, NULL);
    tc_tensor *b1 = scalar(0.9, TC_FLOAT32), *c1 = scalar(0.1, TC_FLOAT32);
    tc_tensor *b2 = scalar(0.99, TC_FLOAT32), *c2 = scalar(0.01, TC_FLOAT32);
    tc_tensor *lr = scalar(0.5, TC_FLOAT32), *eps = scalar(1e-8, TC_FLOAT32);
    for (int step = 0; step < 2; step++) {
        tc_tensor *t1 = tc_mul(b1, m), *t2 = tc_mul(c1, g), *nm = tc_add(t1, t2);
        tc_tensor *gg = tc_mul(g, g), *t3 = tc_mul(b2, v), *t4 = tc_mul(c2, gg), *nv = tc_add(t3, t4);
        assert_int_equal(tc_assign(m, nm), TC_OK);
        assert_int_equal(tc_assign(v, nv), TC_OK);
        tc_tensor *sv = tc_sqrt(v), *den = tc_add(sv, eps), *up = tc_div(m, den), *sc = tc_mul(lr, up);
        tc_tensor *np = tc_sub(p, sc);
        assert_int_equal(tc_assign(p, np), TC_OK);
        tc_tensor *all[3] = {m, v, p};
        assert_int_equal(tc_realize(all, 3), TC_OK);
        tc_release(np), tc_release(sc), tc_release(up), tc_release(den), tc_release(sv);
        tc_release(nv), tc_release(t4), tc_release(t3), tc_release(gg), tc_release(nm);
        tc_release(t2), tc_release(t1);
    }
    float want[4];
    for (int i = 0; i < 4; i++) {
        double mm = 0, vv = 0, pp = pv[i];
        for (int s = 0; s < 2; s++) {
            mm = 0.9 * mm + 0.1 * gv[i];
            vv = 0.99 * vv + 0.01 * gv[i] * gv[i];
            pp -= 0.5 * mm / (sqrt(vv) + 1e-8);
        }
        want[i] = (float)pp;
    }
    expect_f32(tc_retain(p), want, 4, 1e-5, 1e-6, "two Adam-like steps");
    tc_release(eps), tc_release(lr), tc_release(c2), tc_release(b2), tc_release(c1), tc_release(b1);
    tc_release(v), tc_release(m), tc_release(g), tc_release(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_lazy_in_place), TEST(test_broadcast_and_cast), TEST(test_reads_target),
        TEST(test_lazy_targets),  TEST(test_views),              TEST(test_autograd),
        TEST(test_optimizer_step), TEST(test_pure_view_of_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
