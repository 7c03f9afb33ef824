/* test_einsum.c - tc_einsum against loops written here in plain C (matmul,
 * batched matmul, a transpose, a trace, a diagonal, "..." broadcasting, an
 * implicit output, three operands), its kernel counts (a matmul is one
 * kernel, with its elementwise consumer too; a transpose and a diagonal are
 * views: no kernel), the bad formulas and operands it rejects, naming the
 * call and the values; and tc_empty (a buffer, no kernel). Public API only. */
#include "api_helpers.h"

static float seq(int i) {
    return (float)((i * 7) % 13) / 4.0f - 1.5f;
}

static tc_tensor *seq_tensor(int ndim, const int64_t *shape, int offset) {
    float v[256];
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    for (int64_t i = 0; i < n; i++) v[i] = seq((int)i + offset);
    return f32(ndim, shape, v);
}

static void test_matmul_forms(void **state) {
    (void)state;
    tc_tensor *a = seq_tensor(2, SHAPE(3, 4), 0), *b = seq_tensor(2, SHAPE(4, 5), 1);
    float want[15];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) {
            double acc = 0;
            for (int j = 0; j < 4; j++) acc += seq(i * 4 + j) * seq(j * 5 + k + 1);
            want[i * 5 + k] = (float)acc;
        }
    tc_tensor *xs[2] = {a, b};
    tc_tensor *r = tc_einsum("ij,jk->ik", 2, xs);
    check_meta(r, TC_FLOAT32, 2, SHAPE(3, 5));
    expect_f32(r, want, 15, 1e-6, 1e-5, "ij,jk->ik");
    expect_f32(tc_einsum("ij,jk", 2, xs), want, 15, 1e-6, 1e-5, "implicit output");
    expect_f32(tc_einsum(" i j , j k -> i k ", 2, xs), want, 15, 1e-6, 1e-5, "spaces");
    float wt[15]; /* "ij,jk->ki": the product transposed */
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) wt[k * 3 + i] = want[i * 5 + k];
    expect_f32(tc_einsum("ij,jk->ki", 2, xs), wt, 15, 1e-6, 1e-5, "ij,jk->ki");
    tc_tensor *b3 = seq_tensor(3, SHAPE(2, 4, 5), 1), *ys[2] = {a, b3};
    float wb[30]; /* "...ij,...jk": a broadcasts over b3's batch */
    for (int n = 0; n < 2; n++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 5; k++) {
                double acc = 0;
                for (int j = 0; j < 4; j++) acc += seq(i * 4 + j) * seq(n * 20 + j * 5 + k + 1);
                wb[n * 15 + i * 5 + k] = (float)acc;
            }
    r = tc_einsum("...ij,...jk->...ik", 2, ys);
    check_meta(r, TC_FLOAT32, 3, SHAPE(2, 3, 5));
    expect_f32(r, wb, 30, 1e-6, 1e-5, "...ij,...jk->...ik");
    tc_release(a), tc_release(b), tc_release(b3);
}

static void test_single_operand(void **state) {
    (void)state;
    tc_tensor *m = seq_tensor(2, SHAPE(4, 4), 3);
    float diag[4], trace = 0, col[4] = {0};
    for (int i = 0; i < 4; i++) diag[i] = seq(i * 5 + 3), trace += diag[i];
    for (int i = 0; i < 16; i++) col[i % 4] += seq(i + 3);
    expect_f32(tc_einsum("ii->i", 1, &m), diag, 4, 0, 0, "diagonal");
    expect_f32(tc_einsum("ii", 1, &m), &trace, 1, 1e-6, 1e-6, "trace");
    expect_f32(tc_einsum("ij->j", 1, &m), col, 4, 1e-6, 1e-6, "column sums");
    tc_tensor *t = tc_einsum("ij->ji", 1, &m);
    check_meta(t, TC_FLOAT32, 2, SHAPE(4, 4));
    assert_int_equal(tc_schedule_kernel_count(&t, 1), 0); /* a view of m */
    tc_release(t);
    tc_tensor *d = tc_einsum("ii->i", 1, &m);
    assert_int_equal(tc_schedule_kernel_count(&d, 1), 0); /* the diagonal: a view too */
    tc_release(d), tc_release(m);
}

static void test_three_operands(void **state) {
    (void)state;
    tc_tensor *a = seq_tensor(1, SHAPE(3), 0), *b = seq_tensor(2, SHAPE(3, 2), 5);
    tc_tensor *c = seq_tensor(1, SHAPE(2), 9), *xs[3] = {a, b, c};
    double acc = 0; /* "i,ij,j->": a^T B c */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) acc += seq(i) * seq(i * 2 + j + 5) * seq(j + 9);
    float want = (float)acc;
    expect_f32(tc_einsum("i,ij,j->", 3, xs), &want, 1, 1e-6, 1e-6, "i,ij,j->");
    tc_release(a), tc_release(b), tc_release(c);
}

static void test_kernel_counts(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(16, 24), 21, -1, 1);
    tc_tensor *w = tc_test_randn(2, SHAPE(24, 8), 22, -1, 1),
              *b = tc_test_randn(1, SHAPE(8), 23, -1, 1);
    tc_tensor *all[3] = {x, w, b};
    assert_int_equal(tc_realize(all, 3), TC_OK);
    tc_tensor *xs[2] = {x, w};
    tc_tensor *y = tc_einsum("ij,jk->ik", 2, xs);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "einsum matmul: one kernel");
    tc_tensor *z = tc_add(y, b), *r = tc_relu(z);
    tc_check_schedule(r, 1, 1e-5, 1e-5, "relu(einsum matmul + b): one kernel");
    tc_release(r), tc_release(z), tc_release(y);
    tc_tensor *p = tc_test_randn(3, SHAPE(3, 5, 6), 24, -1, 1),
              *q = tc_test_randn(3, SHAPE(3, 6, 4), 25, -1, 1);
    tc_tensor *pq[2] = {p, q};
    assert_int_equal(tc_realize(pq, 2), TC_OK);
    y = tc_einsum("bij,bjk->bik", 2, pq);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "batched einsum matmul: one kernel");
    tc_release(y), tc_release(p), tc_release(q), tc_release(x), tc_release(w), tc_release(b);
}

static void test_errors(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(2, SHAPE(3, 4), TC_FLOAT32, NULL),
              *b = tc_ones(2, SHAPE(5, 6), TC_FLOAT32, NULL);
    tc_tensor *xs[2] = {a, b}, *nul[2] = {a, NULL};
    assert_null(tc_einsum(NULL, 1, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: formula is NULL");
    assert_null(tc_einsum("ij", 0, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: 0 operands given (1..16)");
    assert_null(tc_einsum("ij", 1, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: xs is NULL");
    assert_null(tc_einsum("ij,jk", 2, nul));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: tensor xs[1] is NULL");
    assert_null(tc_einsum("ij,jk->ik", 2, xs));
    assert_tc_error(TC_ERR_SHAPE,
                    "tc_einsum: \"ij,jk->ik\": subscript j is 5 in operand 1 but 4 before");
    assert_null(tc_einsum("ij,jk->ik", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: \"ij,jk->ik\" names 2 operands, got 1");
    assert_null(tc_einsum("ij->iq", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: \"ij->iq\": output subscript q is in no operand");
    assert_null(tc_einsum("ij->jj", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: \"ij->jj\": output subscript j appears twice");
    assert_null(tc_einsum("i#", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "tc_einsum: \"i#\": bad character '#'");
    assert_null(tc_einsum("..i..", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "one \"...\" per term");
    assert_null(tc_einsum("i", 1, xs));
    assert_tc_error(TC_ERR_SHAPE, "tc_einsum: \"i\": operand 0 has 2 dims but its term names 1");
    assert_null(tc_einsum("ii", 1, xs));
    assert_tc_error(TC_ERR_SHAPE, "tc_einsum: \"ii\": operand 0 repeats i over sizes 3 and 4");
    assert_null(tc_einsum("i->i->i", 1, xs));
    assert_tc_error(TC_ERR_INVALID, "more than one \"->\"");
    tc_release(a), tc_release(b);
}

static void test_empty(void **state) {
    (void)state;
    tc_tensor *e = tc_empty(2, SHAPE(3, 4), TC_INT32, NULL);
    check_meta(e, TC_INT32, 2, SHAPE(3, 4));
    assert_true(tc_is_realized(e));
    assert_int_equal(tc_schedule_kernel_count(&e, 1), 0);
    tc_tensor *v = tc_full(0, NULL, 7, TC_INT32, NULL);
    assert_int_equal(tc_assign(e, v), TC_OK);
    int32_t sevens[12];
    for (int i = 0; i < 12; i++) sevens[i] = 7;
    expect_values(tc_retain(e), sevens, 12, 0, 0, "empty, then assigned");
    tc_release(v), tc_release(e);
    e = tc_empty(0, NULL, TC_FLOAT32, NULL);
    check_meta(e, TC_FLOAT32, 0, NULL);
    tc_release(e);
    assert_null(tc_empty(2, SHAPE(2, -3), TC_FLOAT32, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_empty: negative size -3 in shape (2,-3)");
    assert_null(tc_empty(1, SHAPE(2), (tc_dtype)19, NULL));
    assert_tc_error(TC_ERR_DTYPE, "tc_empty: unknown dtype 19");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_matmul_forms),  TEST(test_single_operand), TEST(test_three_operands),
        TEST(test_kernel_counts), TEST(test_errors),         TEST(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
