/* test_split.c - loops split at the bounds of masks (codegen/lower_split.c).
 * A padded copy, a concatenation built of pads and a normalization + relu
 * stored padded (a conv's input in a training step) are lowered for the
 * CPU with no gated load left; a pad of the outermost axis (the threads'
 * loop, never split) and a mask on a view before the last (a pad seen
 * through a reshape) keep theirs. Every case against the reference
 * evaluator. */
#include "tc_test.h"
#include "tc_test_lower.h"

#include "engine/engine.h"
#include "tensor/tensor.h"

/* gated loads (LOAD with a valid operand) of t's last kernel for the CPU */
static int gated_loads(tc_tensor *t) {
    tc_test_lowered l = tc_test_lower(t, &tc_device_get(0)->target);
    int n = 0;
    for (int i = 0; i < l.k->n_uops; i++) n += l.k->uops[i]->op == TC_UOP_LOAD && l.k->uops[i]->n_srcs == 3;
    tc_test_lowered_free(&l);
    return n;
}

/* releases the tensors listed */
static void release(tc_tensor *const *ts, size_t n) {
    for (size_t i = 0; i < n; i++) tc_release(ts[i]);
}
#define RELEASE(...) release((tc_tensor *[]){__VA_ARGS__}, sizeof((tc_tensor *[]){__VA_ARGS__}) / sizeof(tc_tensor *))

static tc_tensor *pad4(tc_tensor *x, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
    return tc_pad(x, (int64_t[]){0, 0, 0, 0, y0, y1, x0, x1});
}

static void test_pad_copy(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(4, (int64_t[]){2, 3, 5, 7}, 1, -1, 1);
    tc_tensor *p = pad4(x, 1, 1, 2, 1);
    tc_tensor *y = tc_contiguous(p);
    assert_int_equal(gated_loads(y), 0);
    tc_check_schedule(y, 1, 0, 0, "pad copy split at its mask's bounds");
    RELEASE(y, p, x);
}

/* cat((4,6), (4,3), (4,5)) along axis 1 as three pads summed: three cuts,
 * each segment reading one of them */
static void test_concat(void **state) {
    (void)state;
    tc_tensor *a = tc_test_randn(2, (int64_t[]){4, 6}, 2, -1, 1);
    tc_tensor *b = tc_test_randn(2, (int64_t[]){4, 3}, 3, -1, 1);
    tc_tensor *c = tc_test_randn(2, (int64_t[]){4, 5}, 4, -1, 1);
    tc_tensor *pa = tc_pad(a, (int64_t[]){0, 0, 0, 8});
    tc_tensor *pb = tc_pad(b, (int64_t[]){0, 0, 6, 5});
    tc_tensor *pc = tc_pad(c, (int64_t[]){0, 0, 9, 0});
    tc_tensor *ab = tc_add(pa, pb), *y = tc_add(ab, pc);
    assert_int_equal(gated_loads(y), 0);
    tc_check_schedule(y, 1, 0, 0, "a concat of three pads");
    RELEASE(y, ab, pc, pb, pa, c, b, a);
}

/* relu((x - m) * s) stored padded by one, the conv input of a BatchNorm +
 * relu block: one kernel, no gated load */
static void test_norm_relu_padded(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(4, (int64_t[]){2, 8, 6, 6}, 5, -2, 2);
    tc_tensor *m = tc_test_randn(4, (int64_t[]){1, 8, 1, 1}, 6, -1, 1);
    tc_tensor *s = tc_test_randn(4, (int64_t[]){1, 8, 1, 1}, 7, 0.5f, 2);
    tc_tensor *d = tc_sub(x, m), *n = tc_mul(d, s), *r = tc_relu(n), *p = pad4(r, 1, 1, 1, 1);
    tc_tensor *y = tc_contiguous(p);
    assert_int_equal(gated_loads(y), 0);
    tc_check_schedule(y, 1, 1e-6, 1e-6, "relu((x - m) * s) padded");
    RELEASE(y, p, r, n, d, s, m, x);
}

/* what stays gated: a pad of the outermost axis alone (the loop threads
 * share is not split) and a mask seen through a reshape (a view before
 * the last: its test reads a re-split index) */
static void test_left_gated(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, (int64_t[]){64, 1024}, 8, -1, 1);
    tc_tensor *p = tc_pad(x, (int64_t[]){2, 3, 0, 0});
    tc_tensor *y = tc_contiguous(p);
    assert_true(gated_loads(y) > 0);
    tc_check_schedule(y, 1, 0, 0, "pad of the outermost axis");
    tc_tensor *w = tc_test_randn(2, (int64_t[]){4, 5}, 9, -1, 1);
    tc_tensor *wp = tc_pad(w, (int64_t[]){1, 1, 1, 1});
    tc_tensor *flat = tc_reshape(wp, 1, (int64_t[]){42});
    tc_tensor *one = tc_full(0, NULL, 1.0, TC_FLOAT32, NULL), *z = tc_add(flat, one);
    assert_true(gated_loads(z) > 0);
    tc_check_schedule(z, 1, 0, 0, "a pad seen through a reshape, plus one");
    RELEASE(z, one, flat, wp, w, y, p, x);
}

/* an int32 crop, then a pad on three axes: the two innermost are split,
 * the third stays gated (its test folds nowhere), values exact */
static void test_int_crop_three_axes(void **state) {
    (void)state;
    tc_tensor *f = tc_test_randn(4, (int64_t[]){2, 5, 6, 7}, 10, -50, 50);
    tc_tensor *x = tc_cast(f, TC_INT32);
    tc_tensor *c = tc_shrink(x, (int64_t[]){0, 2, 0, 4, 1, 6, 0, 5});
    tc_tensor *p = tc_pad(c, (int64_t[]){0, 0, 2, 1, 1, 3, 1, 2});
    tc_tensor *y = tc_contiguous(p);
    assert_true(gated_loads(y) > 0);
    tc_check_schedule(y, 1, 0, 0, "int32 crop + pad on three axes");
    RELEASE(y, p, c, x, f);
}

/* cat of n (3, 4) pieces along axis 1 as n pads summed: n - 1 bounds on
 * that axis */
static void check_concat(int n, bool gated, const char *what) {
    tc_tensor *parts[6], *pads[6], *sums[5];
    for (int i = 0; i < n; i++) {
        parts[i] = tc_test_randn(2, (int64_t[]){3, 4}, 11 + (uint64_t)i, -1, 1);
        pads[i] = tc_pad(parts[i], (int64_t[]){0, 0, 4 * i, 4 * (n - 1 - i)});
    }
    sums[0] = tc_add(pads[0], pads[1]);
    for (int i = 1; i + 1 < n; i++) sums[i] = tc_add(sums[i - 1], pads[i + 1]);
    if (gated)
        assert_true(gated_loads(sums[n - 2]) > 0);
    else
        assert_int_equal(gated_loads(sums[n - 2]), 0);
    tc_check_schedule(sums[n - 2], 1, 0, 0, what);
    for (int i = 0; i + 1 < n; i++) tc_release(sums[i]);
    for (int i = 0; i < n; i++) tc_release(pads[i]), tc_release(parts[i]);
}

/* five pieces (a conv's output rows by five runs: nnops.c) split at their
 * four bounds; six have five, past what a split takes (SPLIT_CUTS): the
 * loads stay gated, the values right */
static void test_too_many_cuts(void **state) {
    (void)state;
    check_concat(5, false, "a concat of five pads");
    check_concat(6, true, "a concat of six pads");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pad_copy),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_norm_relu_padded),
        cmocka_unit_test(test_left_gated),
        cmocka_unit_test(test_int_crop_three_axes),
        cmocka_unit_test(test_too_many_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
