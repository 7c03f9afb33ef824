/* test_index.c - tc_gather and tc_index: values against the host and the
 * reference evaluator, exact kernel counts (a lookup fuses with what reads
 * it; its gradient is one kernel), gradients by finite differences, the
 * documented result of indices outside the axis, and bad arguments. */
#include "grad_check.h"

/* ---- values and kernels ---- */

/* an embedding lookup plus a position embedding: one kernel (the index is
 * wrapped where negative inside it); the gradient of sum(h^2) with respect
 * to the table, with repeated ids, is one kernel too: a SCATTER that zeroes
 * its output and adds 2h at each id's row */
static void test_embedding(void **state) {
    (void)state;
    tc_tensor *w = tc_test_randn(2, SHAPE(10, 4), 1, -1, 1), *pos = tc_test_randn(2, SHAPE(3, 4), 2, -1, 1);
    int32_t ids[6] = {1, 3, 3, 9, -1, 0};
    tc_tensor *idx = from(ids, TC_INT32, 2, SHAPE(2, 3));
    assert_int_equal(tc_set_requires_grad(w, true), TC_OK);
    tc_tensor *e = tc_index(w, 0, idx), *h = tc_add(e, pos);
    check_meta(e, TC_FLOAT32, 3, SHAPE(2, 3, 4));
    tc_check_schedule(h, 1, 0, 0, "w[ids] + pos");
    float *wv = tc_test_read(w), *pv = tc_test_read(pos), want[24], gwant[40] = {0};
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++) {
            int id = ids[r] < 0 ? ids[r] + 10 : ids[r];
            want[r * 4 + c] = wv[id * 4 + c] + pv[(r % 3) * 4 + c];
            gwant[id * 4 + c] += 2 * want[r * 4 + c];
        }
    expect_f32(tc_retain(h), want, 24, 0, 0, "w[ids] + pos");
    tc_tensor *sq = tc_mul(h, h), *loss = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(w);
    check_meta(g, TC_FLOAT32, 2, SHAPE(10, 4));
    tc_check_schedule(g, 1, 1e-6, 1e-6, "d sum(w[ids]^2) / dw");
    expect_f32(g, gwant, 40, 1e-6, 1e-6, "scatter-add of the gradient");
    free(wv), free(pv);
    tc_release(w), tc_release(pos), tc_release(idx), tc_release(e), tc_release(h);
    tc_release(sq), tc_release(loss);
}

/* torch's gather along each axis of a (3,4,5) tensor, with an index smaller
 * than x off the axis, int64 and uint8 indices */
static void test_gather_axes(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(3, SHAPE(3, 4, 5), 3, -1, 1);
    float *xv = tc_test_read(x);
    for (int axis = 0; axis < 3; axis++) {
        int64_t is[3] = {2, 3, 4}, n[3] = {3, 4, 5};
        int64_t ids[24];
        for (int i = 0; i < 24; i++) ids[i] = (i * 7 + axis) % n[axis];
        tc_tensor *idx = from(ids, TC_INT64, 3, is), *out = tc_gather(x, axis, idx);
        check_meta(out, TC_FLOAT32, 3, is);
        float want[24];
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 4; c++) {
                    int at[3] = {a, b, c};
                    int i = (a * 3 + b) * 4 + c;
                    at[axis] = (int)ids[i];
                    want[i] = xv[(at[0] * 4 + at[1]) * 5 + at[2]];
                }
        tc_check_schedule(out, 1, 0, 0, "gather");
        expect_f32(out, want, 24, 0, 0, "gather along an axis");
        tc_release(idx);
    }
    uint8_t small[4] = {4, 0, 2, 2};
    tc_tensor *idx8 = from(small, TC_UINT8, 1, SHAPE(4)), *x1 = tc_test_randn(1, SHAPE(5), 4, -1, 1);
    float *x1v = tc_test_read(x1), want8[4] = {x1v[4], x1v[0], x1v[2], x1v[2]};
    expect_f32(tc_index(x1, 0, idx8), want8, 4, 0, 0, "uint8 indices");
    free(xv), free(x1v);
    tc_release(x), tc_release(idx8), tc_release(x1);
}

/* an index outside the axis reads 0 and its gradient goes nowhere (the
 * documented result in kernels: never a read outside the buffer) */
static void test_outside(void **state) {
    (void)state;
    float xv[3] = {1, 2, 3};
    int32_t ids[5] = {0, 3, -4, 2, 100};
    tc_tensor *x = f32(1, SHAPE(3), xv), *idx = from(ids, TC_INT32, 1, SHAPE(5));
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *out = tc_index(x, 0, idx), *s = tc_sum(out, 0, NULL, false);
    float want[5] = {1, 0, 0, 3, 0}, gwant[3] = {1, 0, 1};
    tc_check_schedule(out, 1, 0, 0, "outside the axis");
    expect_f32(tc_retain(out), want, 5, 0, 0, "indices outside read 0");
    assert_int_equal(tc_backward(s), TC_OK);
    expect_f32(tc_grad(x), gwant, 3, 0, 0, "and add nothing");
    tc_release(x), tc_release(idx), tc_release(out), tc_release(s);
}

/* the lookup inside a reduce's kernel: layernorm(w[ids] + pos) is 1 kernel */
static void test_fused_reduce(void **state) {
    (void)state;
    tc_tensor *w = tc_test_randn(2, SHAPE(50, 64), 5, -1, 1), *pos = tc_test_randn(2, SHAPE(16, 64), 6, -1, 1);
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = (i * 13) % 50;
    tc_tensor *idx = from(ids, TC_INT32, 2, SHAPE(2, 16));
    tc_tensor *e = tc_index(w, 0, idx), *h = tc_add(e, pos), *y = tc_layernorm(h, 2, 1e-5);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "layernorm(w[ids] + pos)");
    tc_release(w), tc_release(pos), tc_release(idx), tc_release(e), tc_release(h), tc_release(y);
}

/* ---- gradients by finite differences ---- */

static const int32_t GC_IDS[6] = {2, 0, 2, 1, -1, 3};

static tc_tensor *lib_index(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *idx = from(GC_IDS, TC_INT32, 2, SHAPE(3, 2)), *out = tc_index(x[0], 1, idx);
    tc_release(idx);
    return out;
}

static int64_t host_index(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (2,4) -> out (2,3,2) */
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 6; i++) out[r * 6 + i] = x[0][r * 4 + (GC_IDS[i] < 0 ? GC_IDS[i] + 4 : GC_IDS[i])];
    return 12;
}

static tc_tensor *lib_gather(tc_tensor *const *x, const void *arg) {
    (void)arg;
    int64_t ids[6] = {1, 1, 0, 2, 2, 1};
    tc_tensor *idx = from(ids, TC_INT64, 2, SHAPE(2, 3)), *out = tc_gather(x[0], 0, idx);
    tc_release(idx);
    return out;
}

static int64_t host_gather(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (3,4) -> out (2,3): out[i][j] = x[ids[i][j]][j] */
    const int64_t ids[6] = {1, 1, 0, 2, 2, 1};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) out[i * 3 + j] = x[0][ids[i * 3 + j] * 4 + j];
    return 6;
}

static void test_grad_fd(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(2, 4), -1, 1);
    c.lib = lib_index, c.host = host_index;
    gc_check("tc_index along axis 1", &c, 1e-3, 1e-4);
    gc_case d = one_input(2, SHAPE(3, 4), -1, 1);
    d.lib = lib_gather, d.host = host_gather;
    gc_check("tc_gather along axis 0", &d, 1e-3, 1e-4);
}

/* ---- errors ---- */

static void test_errors(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(3, 4), 7, -1, 1);
    float fv[2] = {0, 1};
    int32_t iv[2] = {0, 1};
    tc_tensor *fidx = f32(1, SHAPE(2), fv), *idx = from(iv, TC_INT32, 1, SHAPE(2));
    assert_null(tc_index(NULL, 0, idx));
    assert_tc_error(TC_ERR_INVALID, "tc_index: tensor x is NULL");
    assert_null(tc_gather(x, 0, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_gather: tensor index is NULL");
    assert_null(tc_index(x, 0, fidx));
    assert_tc_error(TC_ERR_DTYPE, "tc_index: index is float32, not an integer dtype");
    assert_null(tc_index(x, 2, idx));
    assert_tc_error(TC_ERR_SHAPE, "tc_index");
    tc_tensor *s = scalar(1, TC_FLOAT32);
    assert_null(tc_index(s, 0, idx));
    assert_tc_error(TC_ERR_SHAPE, "tc_index: x is 0-d");
    assert_null(tc_gather(x, 0, idx)); /* index (2) has 1 dim, x 2 */
    assert_tc_error(TC_ERR_SHAPE, "tc_gather: index has 1 dims, x has 2");
    int32_t big[10] = {0};
    tc_tensor *wide = from(big, TC_INT32, 2, SHAPE(2, 5));
    assert_null(tc_gather(x, 0, wide)); /* 5 columns > 4 */
    assert_tc_error(TC_ERR_SHAPE, "tc_gather: index (2,5) does not fit x (3,4) along the axes but 0");
    tc_release(x), tc_release(fidx), tc_release(idx), tc_release(s), tc_release(wide);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_embedding), TEST(test_gather_axes), TEST(test_outside),
        TEST(test_fused_reduce), TEST(test_grad_fd), TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
