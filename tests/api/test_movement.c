/* test_movement.c - reshape, permute, transpose, expand, pad, shrink, flip
 * and contiguous: result shapes and values (index arithmetic written out
 * here), chains of movements, movements of lazy results. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* a (2,3,4) float32 tensor holding 0..23 */
static float iota[24];
static tc_tensor *make_iota(void) {
    for (int i = 0; i < 24; i++) iota[i] = (float)i;
    return f32(3, SHAPE(2, 3, 4), iota);
}

static void test_reshape(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    tc_tensor *r = tc_reshape(x, 2, SHAPE(4, 6));
    check_meta(r, TC_FLOAT32, 2, SHAPE(4, 6));
    expect_f32(r, iota, 24, 0, 0, "reshape (4,6)");
    tc_tensor *m = tc_reshape(x, 3, SHAPE(3, -1, 2));
    check_meta(m, TC_FLOAT32, 3, SHAPE(3, 4, 2));
    expect_f32(m, iota, 24, 0, 0, "reshape (3,-1,2)");
    tc_tensor *f = tc_reshape(x, 1, SHAPE(-1));
    check_meta(f, TC_FLOAT32, 1, SHAPE(24));
    tc_release(f);
    tc_tensor *same = tc_reshape(x, 3, SHAPE(2, 3, 4));
    check_meta(same, TC_FLOAT32, 3, SHAPE(2, 3, 4));
    tc_release(same);
    tc_release(x);

    /* to and from 0-d, and empty shapes */
    float v = 5;
    tc_tensor *one = f32(2, SHAPE(1, 1), &v);
    tc_tensor *s = tc_reshape(one, 0, NULL);
    check_meta(s, TC_FLOAT32, 0, NULL);
    expect_f32(s, &v, 1, 0, 0, "reshape to ()");
    tc_release(one);
    tc_tensor *e = tc_zeros(2, SHAPE(0, 3), TC_INT32, NULL);
    tc_tensor *e2 = tc_reshape(e, 3, SHAPE(3, 0, 7));
    check_meta(e2, TC_INT32, 3, SHAPE(3, 0, 7));
    tc_tensor *e3 = tc_reshape(e, 2, SHAPE(-1, 3));
    check_meta(e3, TC_INT32, 2, SHAPE(0, 3));
    tc_release(e);
    tc_release(e2);
    tc_release(e3);
}

static void test_permute_transpose(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    /* new dim d = old dim order[d]: (2,3,4) -> (4,2,3) */
    tc_tensor *p = tc_permute(x, AXES(2, 0, 1));
    check_meta(p, TC_FLOAT32, 3, SHAPE(4, 2, 3));
    float want[24];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) want[k * 6 + i * 3 + j] = iota[i * 12 + j * 4 + k];
    expect_f32(p, want, 24, 0, 0, "permute (2,0,1)");
    tc_tensor *pn = tc_permute(x, AXES(-1, 0, -2)); /* negative entries count from the end */
    expect_f32(pn, want, 24, 0, 0, "permute (-1,0,-2)");

    tc_tensor *t = tc_transpose(x, 0, -1);
    check_meta(t, TC_FLOAT32, 3, SHAPE(4, 3, 2));
    float wt[24];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) wt[k * 6 + j * 2 + i] = iota[i * 12 + j * 4 + k];
    expect_f32(t, wt, 24, 0, 0, "transpose(0,-1)");
    tc_tensor *id = tc_transpose(x, 1, 1);
    expect_f32(id, iota, 24, 0, 0, "transpose(1,1) is the identity");
    tc_release(x);
}

static void test_expand(void **state) {
    (void)state;
    float col[3] = {1, 2, 3};
    tc_tensor *c = f32(2, SHAPE(3, 1), col);
    tc_tensor *e = tc_expand(c, 2, SHAPE(3, 4));
    check_meta(e, TC_FLOAT32, 2, SHAPE(3, 4));
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = col[i / 4];
    expect_f32(e, w, 12, 0, 0, "expand (3,1)->(3,4)");
    /* -1 keeps a dim; new leading dims are prepended */
    tc_tensor *e2 = tc_expand(c, 3, SHAPE(2, -1, 2));
    check_meta(e2, TC_FLOAT32, 3, SHAPE(2, 3, 2));
    float w2[12];
    for (int i = 0; i < 12; i++) w2[i] = col[(i / 2) % 3];
    expect_f32(e2, w2, 12, 0, 0, "expand (3,1)->(2,-1,2)");
    tc_tensor *e0 = tc_expand(c, 2, SHAPE(3, 0)); /* a size-1 dim may become 0 */
    check_meta(e0, TC_FLOAT32, 2, SHAPE(3, 0));
    tc_release(e0);
    tc_release(c);

    tc_tensor *s = scalar(7, TC_INT64);
    tc_tensor *es = tc_expand(s, 2, SHAPE(2, 2));
    int64_t ws[4] = {7, 7, 7, 7};
    expect_values(es, ws, 4, 0, 0, "expand a scalar");
    tc_release(s);
}

static void test_pad(void **state) {
    (void)state;
    float v[4] = {1, 2, 3, 4};
    tc_tensor *x = f32(2, SHAPE(2, 2), v);
    tc_tensor *p = tc_pad(x, SHAPE(1, 0, 0, 2)); /* rows: 1 before; cols: 2 after */
    check_meta(p, TC_FLOAT32, 2, SHAPE(3, 4));
    float w[12] = {0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0};
    expect_f32(p, w, 12, 0, 0, "pad ((1,0),(0,2))");
    tc_tensor *z = tc_pad(x, SHAPE(0, 0, 0, 0));
    expect_f32(z, v, 4, 0, 0, "pad by nothing");
    /* padding then computing: exp of the padded zeros is 1 */
    tc_tensor *p1 = tc_pad(x, SHAPE(0, 0, 1, 0));
    tc_tensor *ex = tc_exp(p1);
    float wex[6] = {1, expf(1), expf(2), 1, expf(3), expf(4)};
    expect_f32(ex, wex, 6, 1e-6, 0, "exp(pad(x))");
    tc_release(p1);
    tc_release(x);
    /* (3,5,2) padded by 2 rows of the middle axis: gcc 12.2 at -march=native
     * with the dynamic vector cost model zeroed the first 4 copied values of
     * each batch (cstyle.c keeps that model off kernels with gated loads) */
    float d[30], want[42] = {0};
    for (int i = 0; i < 30; i++) d[i] = (float)(i % 7) - 3;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < 10; i++) want[b * 14 + 4 + i] = d[b * 10 + i];
    tc_tensor *y = f32(3, SHAPE(3, 5, 2), d), *py = tc_pad(y, SHAPE(0, 0, 2, 0, 0, 0));
    expect_f32(py, want, 42, 0, 0, "pad (3,5,2) by 2 rows of axis 1");
    tc_release(y);
}

static void test_shrink(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    tc_tensor *s = tc_shrink(x, SHAPE(1, 2, 0, 3, 1, 3));
    check_meta(s, TC_FLOAT32, 3, SHAPE(1, 3, 2));
    float w[6];
    for (int j = 0; j < 3; j++)
        for (int k = 0; k < 2; k++) w[j * 2 + k] = iota[12 + j * 4 + 1 + k];
    expect_f32(s, w, 6, 0, 0, "shrink");
    tc_tensor *all = tc_shrink(x, SHAPE(0, 2, 0, 3, 0, 4));
    expect_f32(all, iota, 24, 0, 0, "shrink to everything");
    tc_tensor *none = tc_shrink(x, SHAPE(0, 2, 1, 1, 0, 4));
    check_meta(none, TC_FLOAT32, 3, SHAPE(2, 0, 4));
    tc_release(none);
    tc_release(x);
}

static void test_flip(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    float w0[24], wl[24], wall[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                int at = i * 12 + j * 4 + k;
                w0[at] = iota[(1 - i) * 12 + j * 4 + k];
                wl[at] = iota[i * 12 + j * 4 + (3 - k)];
                wall[at] = iota[(1 - i) * 12 + (2 - j) * 4 + (3 - k)];
            }
    tc_tensor *f = tc_flip(x, 1, AXES(0));
    check_meta(f, TC_FLOAT32, 3, SHAPE(2, 3, 4));
    expect_f32(f, w0, 24, 0, 0, "flip axis 0");
    expect_f32(tc_flip(x, 1, AXES(-1)), wl, 24, 0, 0, "flip axis -1");
    expect_f32(tc_flip(x, 0, NULL), wall, 24, 0, 0, "flip all (naxes 0)");
    expect_f32(tc_flip(x, 3, AXES(2, 0, 1)), wall, 24, 0, 0, "flip all, listed");
    tc_release(x);
}

static void test_chains(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    /* permute then reshape: not expressible as one strided view */
    tc_tensor *p = tc_permute(x, AXES(1, 0, 2));
    tc_tensor *r = tc_reshape(p, 2, SHAPE(6, 4));
    float w[24];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++) w[(j * 2 + i) * 4 + k] = iota[i * 12 + j * 4 + k];
    expect_f32(r, w, 24, 0, 0, "permute then reshape");
    /* pad, flip, shrink, reshape */
    float v[3] = {1, 2, 3};
    tc_tensor *t = f32(1, SHAPE(3), v);
    tc_tensor *pd = tc_pad(t, SHAPE(2, 1));     /* 0 0 1 2 3 0 */
    tc_tensor *fl = tc_flip(pd, 1, AXES(0));    /* 0 3 2 1 0 0 */
    tc_tensor *sh = tc_shrink(fl, SHAPE(1, 5)); /* 3 2 1 0 */
    tc_tensor *rs = tc_reshape(sh, 2, SHAPE(2, 2));
    float wc[4] = {3, 2, 1, 0};
    expect_f32(rs, wc, 4, 0, 0, "pad flip shrink reshape");
    /* movement of a lazy result, and a result of moved inputs */
    tc_tensor *sum = tc_add(x, x);
    tc_tensor *tr = tc_transpose(sum, 1, 2); /* (2,4,3) */
    tc_tensor *xt = tc_transpose(x, 1, 2);
    tc_tensor *back = tc_add(tr, xt);
    float wb[24];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 3; j++) wb[i * 12 + k * 3 + j] = 3 * iota[i * 12 + j * 4 + k];
    expect_f32(back, wb, 24, 0, 0, "transpose(x+x) + transpose(x)");
    tc_tensor *all[] = {x, p, t, pd, fl, sh, sum, tr, xt};
    for (int i = 0; i < (int)COUNT(all); i++) tc_release(all[i]);
}

static void test_contiguous(void **state) {
    (void)state;
    tc_tensor *x = make_iota();
    /* a realized buffer is already contiguous: no kernel, same data */
    tc_tensor *c = tc_contiguous(x);
    assert_true(tc_is_realized(c));
    assert_int_equal(tc_schedule_kernel_count(&c, 1), 0);
    expect_f32(c, iota, 24, 0, 0, "contiguous of a buffer");
    tc_tensor *r = tc_reshape(x, 2, SHAPE(6, 4));
    tc_tensor *cr = tc_contiguous(r);
    assert_true(tc_is_realized(cr));
    tc_release(cr);
    tc_release(r);

    /* a permuted view is copied by one kernel */
    tc_tensor *t = tc_transpose(x, 0, 2);
    tc_tensor *ct = tc_contiguous(t);
    check_meta(ct, TC_FLOAT32, 3, SHAPE(4, 3, 2));
    assert_false(tc_is_realized(ct));
    assert_int_equal(tc_schedule_kernel_count(&ct, 1), 1);
    assert_int_equal(tc_realize(&ct, 1), TC_OK);
    assert_true(tc_is_realized(ct));
    float w[24];
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) w[k * 6 + j * 2 + i] = iota[i * 12 + j * 4 + k];
    expect_f32(ct, w, 24, 0, 0, "contiguous(transpose)");
    tc_release(t);
    tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_reshape), TEST(test_permute_transpose),
        TEST(test_expand),  TEST(test_pad),
        TEST(test_shrink),  TEST(test_flip),
        TEST(test_chains),  TEST(test_contiguous),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
