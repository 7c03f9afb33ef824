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

/* a pad of either axis keeps the two apart: a mask on the inner one cuts
 * the rows; merged, one on the outer one would gate inside a row */
static void test_masks(void **state) {
    (void)state;
    tc_tensor *x = rnd(2, SHAPE(6, 8), 4);
    tc_tensor *pi = tc_pad(x, (int64_t[]){0, 0, 1, 1}); /* (6, 10) */
    tc_tensor *e = tc_exp(pi);
    check_space(e, "E_6_10");
    tc_release(e), tc_release(pi);
    tc_tensor *po = tc_pad(x, (int64_t[]){2, 1, 0, 0}); /* (9, 8): a mask on the outer axis */
    e = tc_exp(po);
    check_space(e, "E_9_8"); /* merged, the gate would cut rows (scalar GPU lanes) */
    tc_release(e), tc_release(po), tc_release(x);
}

/* every load and store of the only kernel of t's schedule is one view */
static void check_one_view(tc_tensor *t) {
    tc_node *b = tc_node_base(tc_tensor_node(t));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_non_null(s);
    assert_int_equal(s->n_items, 1);
    tc_ast *stack[64];
    int n = 0;
    stack[n++] = s->items[0].ast;
    while (n) {
        tc_ast *a = stack[--n];
        if (a->st) assert_int_equal(a->st->n_views, 1);
        for (int i = 0; i < a->n_srcs && n < 64; i++) stack[n++] = a->srcs[i];
    }
    tc_schedule_free(s);
}

/* merged attention heads: (B, H, T, d) = (2, 3, 4, 5) read as (B, T, H * d)
 * through an index divided and taken modulo d; the kernel splits H * d
 * back into (H, d) so the read is one strided view */
static void test_split_heads(void **state) {
    (void)state;
    tc_tensor *y = rnd(4, SHAPE(2, 3, 4, 5), 5), *w = rnd(2, SHAPE(15, 6), 6);
    tc_tensor *yt = tc_transpose(y, 1, 2);
    tc_tensor *m = tc_reshape(yt, 3, SHAPE(2, 4, 15));
    tc_tensor *o = tc_matmul(m, w); /* reduces over the merged heads */
    check_one_view(o); /* before check_space realizes it */
    check_space(o, "r_2_4_6_3_5");
    tc_tensor *g = rnd(3, SHAPE(2, 4, 6), 7);
    tc_tensor *mt = tc_transpose(m, 1, 2);
    tc_tensor *dw = tc_matmul(mt, g); /* keeps the merged heads: a weight gradient */
    check_one_view(dw);
    check_space(dw, "r_2_3_5_6_4");
    tc_release(dw), tc_release(mt), tc_release(g), tc_release(o), tc_release(m);
    tc_release(yt), tc_release(y), tc_release(w);
}

/* a permuted buffer read flat beside a flat one: (2, 3, 4, 5) transposed
 * (1, 2) and reshaped to (120), plus z (120). No single split drops the
 * permuted load's second view; split into the permute's shape (2, 4, 3,
 * 5), every load is one view (a strided block's two phase-interleaved dx
 * summed: 7 -> 1.8 ms for 1M elements). The loop space then merges where
 * every view agrees: (2, 4, 3, 5) has no such pair. */
static void test_split_to_view(void **state) {
    (void)state;
    tc_tensor *y = rnd(4, SHAPE(2, 3, 4, 5), 8), *z = rnd(1, SHAPE(120), 9);
    tc_tensor *yt = tc_transpose(y, 1, 2);
    tc_tensor *f = tc_reshape(yt, 1, SHAPE(120));
    tc_tensor *e = tc_add(f, z);
    check_one_view(e);
    check_space(e, "E_2_4_3_5");
    tc_release(e), tc_release(f), tc_release(yt), tc_release(z), tc_release(y);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_rows_merge),
        cmocka_unit_test(test_reduce_merge),
        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_split_heads),
        cmocka_unit_test(test_split_to_view),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
