/* test_rows.c - row kernels (src/schedule/rows.c): kernels over the same
 * rows, each reading what the earlier ones wrote only in its own row, are
 * one kernel with a part per kernel, and what only later parts read stays
 * in a per-row scratch array. Exact kernel counts with row kernels and
 * without (TC_NOROWS=1), every value against the reference evaluator, and
 * each rule that keeps kernels apart. */
#include "tc_test.h"

#include <stdlib.h>

#include "schedule/schedule.h"
#include "tensor/tensor.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static tc_tensor *rnd(int ndim, const int64_t *shape, uint64_t seed) {
    return tc_test_randn(ndim, shape, seed, -2, 2);
}

/* the reference's values of ts[0..n-1] (malloc'ed), before they are realized */
static float **reference(tc_tensor **ts, int n) {
    float **want = calloc((size_t)n, sizeof *want);
    assert_non_null(want);
    for (int i = 0; i < n; i++) {
        want[i] = malloc(sizeof(float) * (size_t)tc_numel(ts[i]));
        assert_non_null(want[i]);
        assert_int_equal(tc_ref_eval(tc_tensor_node(ts[i]), want[i]), TC_OK);
    }
    return want;
}

/* ts realize in `kernels` kernels together and match the reference */
static void check_all(tc_tensor **ts, int n, int kernels, const char *what) {
    float **want = reference(ts, n);
    int got = tc_schedule_kernel_count(ts, n);
    if (got != kernels) fprintf(stderr, "%s: %d kernels, expected %d\n", what, got, kernels);
    assert_int_equal(got, kernels);
    assert_int_equal(tc_realize(ts, n), TC_OK);
    for (int i = 0; i < n; i++) {
        float *v = tc_test_read(ts[i]);
        assert_true(tc_allclose_f32(v, want[i], tc_numel(ts[i]), 1e-4, 1e-5, what));
        free(v), free(want[i]);
    }
    free(want);
}

/* build() twice: with row kernels in `rows` kernels, without in `apart` */
static void both_ways(tc_tensor *(*build)(tc_tensor *const *), tc_tensor *const *in, int rows,
                      int apart, const char *what) {
    int64_t was = tc_get_flag("TC_NOROWS"); /* restored: a run with TC_NOROWS=1 keeps it */
    for (int off = 0; off < 2; off++) {
        assert_int_equal(tc_set_flag("TC_NOROWS", off), TC_OK);
        tc_tensor *y = build(in);
        assert_non_null(y);
        tc_check_schedule(y, off ? apart : rows, 1e-5, 1e-6, what);
        tc_release(y);
    }
    assert_int_equal(tc_set_flag("TC_NOROWS", was), TC_OK);
}

static tc_tensor *causal(tc_tensor *const *in) {
    return tc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, true);
}

static tc_tensor *float_mask(tc_tensor *const *in) {
    return tc_scaled_dot_product_attention(in[0], in[1], in[2], in[3], false);
}

/* attention forward: 3 kernels apart (the scores q @ k^T, softmax's stages,
 * the weights @ v), one row kernel over (batch, head, query) with the score
 * row and the weight row in scratch arrays; with a float mask (B, 1, L, S)
 * read per row too; odd sizes (7 queries, 9 keys) */
static void test_attention_forward(void **state) {
    (void)state;
    tc_tensor *in[4] = {rnd(4, SHAPE(2, 3, 7, 5), 1), rnd(4, SHAPE(2, 3, 9, 5), 2),
                        rnd(4, SHAPE(2, 3, 9, 6), 3), rnd(4, SHAPE(2, 1, 7, 9), 4)};
    both_ways(causal, in, 1, 3, "causal attention");
    both_ways(float_mask, in, 1, 3, "attention with a float mask");
    /* float16: the float32 score rows stay in scratch, the float16 weights
     * go to memory (no float16 scratch arrays), still 1 kernel */
    tc_tensor *h[3];
    for (int i = 0; i < 3; i++) h[i] = tc_cast(in[i], TC_FLOAT16);
    tc_tensor *y = causal(h);
    tc_check_schedule(y, 1, 1e-2, 1e-2, "causal attention in float16");
    for (int i = 0; i < 3; i++) tc_release(h[i]);
    tc_release(y);
    for (int i = 0; i < 4; i++) tc_release(in[i]);
    tc_shutdown();
}

/* GPT-2 124M's attention shape (B 4, 12 heads, T 64, head 64), causal:
 * forward 1 kernel (3 apart); backward, d q d k d v together, 4 (9 apart):
 * the forward's kernels, the score gradients and d q in one row kernel
 * that stores the weights and the score gradients for the two kernels of
 * d k and d v, and the d v @ v^T kernel before it (counted, not run) */
static void test_attention_124m_counts(void **state) {
    (void)state;
    const int64_t *sh = SHAPE(4, 12, 64, 64);
    tc_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = tc_full(4, sh, 0.5, TC_FLOAT32, NULL);
        assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    }
    int64_t was = tc_get_flag("TC_NOROWS");
    for (int off = 0; off < 2; off++) {
        assert_int_equal(tc_set_flag("TC_NOROWS", off), TC_OK);
        tc_tensor *o = causal(in), *s = tc_sum(o, 0, NULL, false);
        assert_int_equal(tc_schedule_kernel_count(&o, 1), off ? 3 : 1);
        assert_int_equal(tc_backward(s), TC_OK);
        tc_tensor *g[3] = {tc_grad(in[0]), tc_grad(in[1]), tc_grad(in[2])};
        assert_int_equal(tc_schedule_kernel_count(g, 3), off ? 9 : 4);
        for (int i = 0; i < 3; i++) tc_release(g[i]);
        for (int i = 0; i < 3; i++) assert_int_equal(tc_zero_grad(in[i]), TC_OK);
        tc_release(o), tc_release(s);
    }
    assert_int_equal(tc_set_flag("TC_NOROWS", 0), TC_OK);
    for (int i = 0; i < 3; i++) tc_release(in[i]);
    /* rows of 16385 scores are more than a scratch array holds: 3 kernels */
    for (int i = 0; i < 3; i++) in[i] = tc_full(4, SHAPE(1, 1, 16385, 1), 0.5, TC_FLOAT32, NULL);
    tc_tensor *o = causal(in);
    assert_int_equal(tc_schedule_kernel_count(&o, 1), 3);
    tc_release(o);
    for (int i = 0; i < 3; i++) tc_release(in[i]);
    assert_int_equal(tc_set_flag("TC_NOROWS", was), TC_OK);
    tc_shutdown();
}

/* the backward at a small shape, run: d q joins the row kernel past the
 * kernels of d k and d v (it reads neither), every gradient right */
static void test_attention_backward(void **state) {
    (void)state;
    tc_tensor *in[3] = {rnd(4, SHAPE(2, 3, 7, 5), 5), rnd(4, SHAPE(2, 3, 7, 5), 6),
                        rnd(4, SHAPE(2, 3, 7, 4), 7)};
    for (int i = 0; i < 3; i++) assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    tc_tensor *o = causal(in), *w = rnd(4, SHAPE(2, 3, 7, 4), 8), *ow = tc_mul(o, w);
    tc_tensor *s = tc_sum(ow, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_OK);
    tc_tensor *g[3] = {tc_grad(in[0]), tc_grad(in[1]), tc_grad(in[2])};
    check_all(g, 3, 4, "attention gradients");
    for (int i = 0; i < 3; i++) tc_release(g[i]), tc_release(in[i]);
    tc_release(o), tc_release(w), tc_release(ow), tc_release(s);
    tc_shutdown();
}

/* the gradients realized one at a time (autograd's checks, an optimizer
 * that steps each parameter apart): what the first realize's row kernel
 * computes and a later gradient reads goes to memory, not a scratch array,
 * so the later realizes read it instead of computing it again: 2, 1 and 2
 * kernels (kept in scratch, the second took 2; apart: 4, 1, 2). */
static void test_gradients_one_at_a_time(void **state) {
    (void)state;
    tc_tensor *in[3] = {rnd(4, SHAPE(2, 3, 7, 5), 12), rnd(4, SHAPE(2, 3, 7, 5), 13),
                        rnd(4, SHAPE(2, 3, 7, 4), 14)};
    for (int i = 0; i < 3; i++) assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    tc_tensor *o = causal(in), *w = rnd(4, SHAPE(2, 3, 7, 4), 15), *ow = tc_mul(o, w);
    tc_tensor *s = tc_sum(ow, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_OK);
    tc_tensor *g[3] = {tc_grad(in[0]), tc_grad(in[1]), tc_grad(in[2])};
    float **want = reference(g, 3);
    const int per[3] = {2, 1, 2};
    int64_t was = tc_get_flag("TC_NOROWS");
    assert_int_equal(tc_set_flag("TC_NOROWS", 0), TC_OK);
    for (int i = 0; i < 3; i++) {
        tc_reset_counters();
        assert_int_equal(tc_realize(&g[i], 1), TC_OK);
        tc_counters c;
        tc_get_counters(&c);
        assert_int_equal(c.kernel_count, per[i]);
        float *v = tc_test_read(g[i]);
        assert_true(tc_allclose_f32(v, want[i], tc_numel(g[i]), 1e-4, 1e-5, "gradient"));
        free(v), free(want[i]);
    }
    free(want);
    assert_int_equal(tc_set_flag("TC_NOROWS", was), TC_OK);
    for (int i = 0; i < 3; i++) tc_release(g[i]), tc_release(in[i]);
    tc_release(o), tc_release(w), tc_release(ow), tc_release(s);
    tc_shutdown();
}

/* the weights asked for too: the row kernel stores them (and the output);
 * the scores stay in a scratch array */
static void test_asked_intermediate(void **state) {
    (void)state;
    tc_tensor *q = rnd(3, SHAPE(4, 6, 8), 9), *k = rnd(3, SHAPE(4, 10, 8), 10),
              *v = rnd(3, SHAPE(4, 10, 3), 11);
    tc_tensor *kt = tc_transpose(k, 1, 2), *sc = tc_matmul(q, kt), *p = tc_softmax(sc, -1);
    tc_tensor *o = tc_matmul(p, v), *outs[2] = {p, o};
    check_all(outs, 2, 1, "softmax(q @ k^T) and its product with v");
    tc_release(q), tc_release(k), tc_release(v), tc_release(kt), tc_release(sc), tc_release(p),
        tc_release(o);
    tc_shutdown();
}

/* scores read through a transpose (softmax over the queries): batched, the
 * rows are the batch (a batch's scores, 8 x 8, in a scratch array): 1
 * kernel; unbatched another row's elements, so the scores kernel stays
 * apart: 2 */
static tc_tensor *transposed(tc_tensor *const *in) {
    int nd = tc_ndim(in[0]);
    tc_tensor *kt = tc_transpose(in[1], nd - 2, nd - 1), *sc = tc_matmul(in[0], kt);
    tc_tensor *st = tc_transpose(sc, nd - 2, nd - 1), *p = tc_softmax(st, -1);
    tc_release(kt), tc_release(sc), tc_release(st);
    return p;
}

/* x @ W with a W every row shares, then softmax over its rows: a part would
 * read all of W again for each row, so they stay apart: 2 either way */
static tc_tensor *shared_weight(tc_tensor *const *in) {
    tc_tensor *h = tc_matmul(in[0], in[2]), *p = tc_softmax(h, -1);
    tc_release(h);
    return p;
}

/* a batched matmul read whole by one softmax row kernel: rows (b, i); the
 * second operand moves with b */
static tc_tensor *batched(tc_tensor *const *in) {
    tc_tensor *kt = tc_transpose(in[1], 1, 2), *sc = tc_matmul(in[0], kt), *p = tc_softmax(sc, -1);
    tc_release(kt), tc_release(sc);
    return p;
}

static void test_rules(void **state) {
    (void)state;
    tc_tensor *in[3] = {rnd(3, SHAPE(3, 8, 5), 12), rnd(3, SHAPE(3, 8, 5), 13),
                        rnd(2, SHAPE(5, 7), 14)};
    both_ways(transposed, in, 1, 2, "softmax over the queries, batched");
    tc_tensor *in2[2] = {rnd(2, SHAPE(8, 5), 16), rnd(2, SHAPE(8, 5), 17)};
    both_ways(transposed, in2, 2, 2, "softmax over the queries");
    tc_release(in2[0]), tc_release(in2[1]);
    both_ways(shared_weight, in, 2, 2, "softmax(x @ W)");
    both_ways(batched, in, 1, 2, "softmax(q @ k^T)");
    for (int i = 0; i < 3; i++) tc_release(in[i]);
    tc_shutdown();
}

/* a summed cross-entropy: the rows' losses (max, sum of exp and the pick in
 * one kernel) and their sum, 2 either way (4 while a realized reduce took
 * no readers into its kernel: max and sum of exp were kernels of their own) */
static tc_tensor *ce_sum(tc_tensor *const *in) {
    return tc_cross_entropy_ex(in[0], in[1], TC_REDUCTION_SUM, -100, 0);
}

static void test_scalars_only(void **state) {
    (void)state;
    int32_t lab[6] = {1, 0, 4, 2, 3, 1};
    tc_tensor *in[2] = {rnd(2, SHAPE(6, 5), 15), tc_from_data(lab, TC_INT32, 1, SHAPE(6), NULL)};
    both_ways(ce_sum, in, 2, 2, "cross_entropy sum");
    tc_release(in[0]), tc_release(in[1]);
    tc_shutdown();
}

/* bytes of one row of a row kernel's scratch arrays, each counted once
 * (its largest access) */
static int64_t scratch_bytes(const tc_ast *a, int64_t *seen) {
    int64_t n = 0;
    if ((a->op == TC_OP_LOAD || a->op == TC_OP_STORE) && a->buf < 0 && -1 - a->buf < 64) {
        int64_t b = a->index_size * (int64_t)tc_dtypes[a->dtype].size;
        if (b > seen[-1 - a->buf]) n += b - seen[-1 - a->buf], seen[-1 - a->buf] = b;
    }
    for (int i = 0; i < a->n_srcs; i++) n += scratch_bytes(a->srcs[i], seen);
    return n;
}

/* three attention hops in a row (the output of one is the queries of the
 * next) over 16384 keys: six score and weight rows of 64 KiB each would
 * be 384 KiB of scratch arrays on a thread's stack; a row kernel keeps at
 * most 256 KiB of them (later rows go to memory), still one kernel */
static void test_scratch_budget(void **state) {
    (void)state;
    tc_tensor *q = rnd(3, SHAPE(2, 2, 2), 31), *k = rnd(3, SHAPE(2, 16384, 2), 32),
              *v = rnd(3, SHAPE(2, 16384, 2), 33), *kt = tc_transpose(k, 1, 2), *x = q;
    tc_tensor *made[9];
    for (int h = 0; h < 3; h++) {
        tc_tensor *sc = tc_matmul(x, kt), *p = tc_softmax(sc, -1), *o = tc_matmul(p, v);
        made[3 * h] = sc, made[3 * h + 1] = p, made[3 * h + 2] = o;
        x = o;
    }
    tc_node *node = tc_node_base(tc_tensor_node(x));
    tc_schedule *s = tc_schedule_create(&node, 1);
    assert_non_null(s);
    int rows = 0;
    for (int i = 0; i < s->n_items; i++) {
        if (!s->items[i].has_parts) continue;
        int64_t seen[64] = {0}, bytes = scratch_bytes(s->items[i].ast, seen);
        fprintf(stderr, "scratch budget: %s keeps %lld bytes a row\n", s->items[i].name,
                (long long)bytes);
        assert_true(bytes <= 256 * 1024);
        rows++;
    }
    assert_int_equal(rows, 1);
    assert_int_equal(tc_schedule_n_kernels(s), 1);
    tc_schedule_free(s);
    tc_check_schedule(x, 1, 1e-4, 1e-5, "three attention hops over 16384 keys");
    for (int i = 0; i < 9; i++) tc_release(made[i]);
    tc_release(q), tc_release(k), tc_release(v), tc_release(kt);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_forward),
        cmocka_unit_test(test_attention_124m_counts),
        cmocka_unit_test(test_attention_backward),
        cmocka_unit_test(test_asked_intermediate),
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_scalars_only),
        cmocka_unit_test(test_scratch_budget),
        cmocka_unit_test(test_gradients_one_at_a_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
