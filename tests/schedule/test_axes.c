/* test_axes.c - merged loop axes (src/schedule/axes.c): adjacent axes that
 * every view of a kernel indexes as one are one axis of its loop space (a
 * matmul over (B, T, C) activations runs over B*T rows), and axes a view
 * cuts or permutes stay apart. Each case checks the kernel's loop space
 * (its name) and its numbers against the reference evaluator. */
#include "tc_test.h"

#include <string.h>

#include "schedule/schedule.h"
#include "tensor/tensor.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* the name of the only kernel of t's schedule (its loop space), checked
 * against want; t's numbers against the reference */
static void check_space(tc_tensor *t, const char *want) {
    tc_node *b = tc_node_base(tc_tensor_node(t));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_non_null(s);
    assert_int_equal(s->n_items, 1);
    if (strcmp(s->items[0].name, want) != 0) fprintf(stderr, "kernel %s, expected %s\n", s->items[0].name, want);
    assert_string_equal(s->items[0].name, want);
    tc_schedule_free(s);
    tc_check_schedule(t, 1, 1e-4, 1e-4, want);
}

static tc_tensor *rnd(int ndim, const int64_t *shape, uint64_t seed) {
    tc_tensor *t = tc_test_randn(ndim, shape, seed, -1, 1);
    assert_non_null(t);
    return t;
}

/* x (4, 16, 32) @ w (32, 24): the batch and the rows are one axis of 64 */
static void test_matmul_rows_merge(void **state) {
    (void)state;
    tc_tensor *x = rnd(3, SHAPE(4, 16, 32), 1), *w = rnd(2, SHAPE(32, 24), 2);
    tc_tensor *y = tc_matmul(x, w);
    check_space(y, "r_64_24_32");
    tc_release(y);
    /* x.transpose(0, 1) @ w: (16, 4) rows of x that are not one run */
    tc_tensor *xt = tc_transpose(x, 0, 1);
    y = tc_matmul(xt, w);
    check_space(y, "r_16_4_24_32");
    tc_release(y), tc_release(xt), tc_release(x), tc_release(w);
}

/* elementwise kernels and reduces: contiguous axes merge, the reduced ones
 * among themselves */
static void test_reduce_merge(void **state) {
    (void)state;
    tc_tensor *x = rnd(4, SHAPE(2, 3, 4, 5), 3);
    tc_tensor *e = tc_exp(x);
    check_space(e, "E_120");
    tc_release(e);
    tc_tensor *s = tc_sum(x, 2, (int[]){2, 3}, false); /* (6 kept, 20 reduced) */
    check_space(s, "r_6_20");
    tc_release(s);
    s = tc_sum(x, 2, (int[]){1, 2}, false); /* kept, reduced, reduced, kept: the middle two merge */
    check_space(s, "r_2_12_5");
    tc_release(s), tc_release(x);
}

/* a pad of the inner axis keeps it apart (its mask cuts the rows); a pad of
 * the outer one does not */
static void test_masks(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, SHAPE(6, 8), 4);
    tc_tensor *pi = tc_pad(x, (int64_t[]){0, 0, 1, 1}); /* (6, 10) */
    tc_tensor *e = tc_exp(pi);
    check_space(e, "E_6_10");
    tc_release(e), tc_release(pi);
    tc_tensor *po = tc_pad(x, (int64_t[]){2, 1, 0, 0}); /* (9, 8) */
    e = tc_exp(po);
    check_space(e, "E_72");
    tc_release(e), tc_release(po), tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_rows_merge),
        cmocka_unit_test(test_reduce_merge),
        cmocka_unit_test(test_masks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
