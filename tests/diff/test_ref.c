/* test_ref.c - unit tests of the reference evaluator (src/engine/ref.c), the
 * oracle of tests/diff/test_diff.c. Small graphs are built directly with the
 * graph constructors (graph.h) over host-filled runtime buffers, so nothing
 * here runs the scheduler, codegen or a kernel; each result is checked
 * against literal, hand-computed values. Covers elementwise ops per dtype,
 * reduces, views (expand, pad, flip, shrink, permute, stacked reshapes),
 * integer division, casts, float16 rounding, meta ops, a 100k-node chain
 * (no recursion), error reporting and allocation failures.
 */
#include "tc_test.h"

#include "engine/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* every node a test makes, released at its end */
static tc_node *made[256];
static int n_made;

static tc_node *keep(tc_node *n) {
    assert_non_null(n);
    assert_true(n_made < (int)(sizeof made / sizeof made[0]));
    made[n_made++] = n;
    return n;
}

/* releases the test's nodes, checks nothing leaked, shuts the library down */
static void finish(void) {
    for (int i = n_made - 1; i >= 0; i--) tc_node_release(made[i]);
    n_made = 0;
    assert_int_equal(tc_graph_live_nodes(), 0);
    tc_shutdown();
}

/* a realized BUFFER node on the CPU holding a copy of data */
static tc_node *buf(tc_dtype dt, int ndim, const int64_t *shape, const void *data) {
    int dev = tc_device_open("CPU", "test_ref");
    assert_true(dev >= 0);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= shape[i];
    size_t nbytes = (size_t)numel * tc_dtype_size(dt);
    tc_buffer *b = tc_buffer_new(dev, nbytes ? nbytes : 1);
    assert_non_null(b);
    assert_int_equal(tc_buffer_copyin(b, 0, data, nbytes), TC_OK);
    tc_node *n = tc_node_buffer(b, dt, ndim, shape);
    tc_buffer_release(b);
    return keep(n);
}

static tc_node *un(tc_op op, tc_dtype dt, tc_node *a) {
    return keep(tc_node_alu(op, dt, 1, &a));
}
static tc_node *bin(tc_op op, tc_dtype dt, tc_node *a, tc_node *b) {
    tc_node *s[2] = {a, b};
    return keep(tc_node_alu(op, dt, 2, s));
}
static tc_node *tern(tc_op op, tc_dtype dt, tc_node *a, tc_node *b, tc_node *c) {
    tc_node *s[3] = {a, b, c};
    return keep(tc_node_alu(op, dt, 3, s));
}

/* evaluates n and compares with want (same dtype, exact unless rtol > 0) */
static void expect(tc_node *n, const void *want, int64_t count, double rtol) {
    assert_int_equal(tc_node_numel(n), count);
    size_t nbytes = (size_t)count * tc_dtype_size(n->dtype);
    void *got = malloc(nbytes ? nbytes : 1);
    assert_non_null(got);
    tc_status st = tc_ref_eval(n, got);
    if (st != TC_OK) fprintf(stderr, "tc_ref_eval: %s\n", tc_last_error());
    assert_int_equal(st, TC_OK);
    bool ok = tc_allclose(got, want, n->dtype, count, rtol, 0, tc_ops[n->op].name);
    if (!ok) tc_node_dump(stderr, n);
    free(got);
    assert_true(ok);
}

static const int64_t s23[2] = {2, 3};

static void test_add_mul_mulacc(void **state) {
    (void)state;
    const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60};
    tc_node *x = buf(TC_FLOAT32, 2, s23, a), *y = buf(TC_FLOAT32, 2, s23, b);
    expect(bin(TC_OP_ADD, TC_FLOAT32, x, y), (float[]){11, 22, 33, 44, 55, 66}, 6, 0);
    expect(bin(TC_OP_MUL, TC_FLOAT32, x, y), (float[]){10, 40, 90, 160, 250, 360}, 6, 0);
    expect(tern(TC_OP_MULACC, TC_FLOAT32, x, y, x), (float[]){11, 42, 93, 164, 255, 366}, 6, 0);
    tc_node *sq = bin(TC_OP_MUL, TC_FLOAT32, x, x); /* one source used twice */
    expect(bin(TC_OP_ADD, TC_FLOAT32, sq, sq), (float[]){2, 8, 18, 32, 50, 72}, 6, 0);
    expect(bin(TC_OP_MAX, TC_FLOAT32, un(TC_OP_NEG, TC_FLOAT32, y), un(TC_OP_NEG, TC_FLOAT32, x)),
           (float[]){-1, -2, -3, -4, -5, -6}, 6, 0);
    finish();
}

static void test_broadcast_and_const(void **state) {
    (void)state;
    const float a[6] = {1, 2, 3, 4, 5, 6}, row[3] = {100, 200, 300};
    tc_node *x = buf(TC_FLOAT32, 2, s23, a);
    tc_node *r = buf(TC_FLOAT32, 2, (int64_t[]){1, 3}, row);
    tc_node *re = keep(tc_node_expand(r, 2, s23));
    expect(re, (float[]){100, 200, 300, 100, 200, 300}, 6, 0);
    expect(bin(TC_OP_ADD, TC_FLOAT32, x, re), (float[]){101, 202, 303, 104, 205, 306}, 6, 0);
    tc_node *c = keep(tc_node_const(2.5, TC_FLOAT32, x->device, 2, s23));
    expect(bin(TC_OP_MUL, TC_FLOAT32, x, c), (float[]){2.5f, 5, 7.5f, 10, 12.5f, 15}, 6, 0);
    tc_node *big = keep(tc_node_const_int(((int64_t)1 << 53) + 1, TC_INT64, x->device, 0, NULL));
    tc_node *one = keep(tc_node_const_int(1, TC_INT64, x->device, 0, NULL));
    expect(bin(TC_OP_ADD, TC_INT64, big, one), (int64_t[]){((int64_t)1 << 53) + 2}, 1, 0);
    finish();
}

static void test_reduce(void **state) {
    (void)state;
    float a[12];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    tc_node *x = buf(TC_FLOAT32, 3, (int64_t[]){2, 3, 2}, a);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, x, 1)), (float[]){6, 8, 10, 12, 14, 16}, 6, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, x, 2)), (float[]){6, 9, 24, 27}, 4, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, x, 5)), (float[]){14, 22, 30}, 3, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, x, 7)), (float[]){66}, 1, 0);
    tc_node *nx = un(TC_OP_NEG, TC_FLOAT32, x);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_MAX, nx, 4)), (float[]){0, -2, -4, -6, -8, -10}, 6, 0);
    const int32_t iv[4] = {-5, -9, 3, -1};
    tc_node *xi = buf(TC_INT32, 2, (int64_t[]){2, 2}, iv);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_MAX, xi, 2)), (int32_t[]){-5, 3}, 2, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, xi, 1)), (int32_t[]){-2, -10}, 2, 0);
    /* reducing an empty axis gives the identity; an empty result has no elements */
    tc_node *e = buf(TC_FLOAT32, 2, (int64_t[]){2, 0}, a);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, e, 2)), (float[]){0, 0}, 2, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_MAX, e, 2)), (float[]){-INFINITY, -INFINITY}, 2, 0);
    expect(keep(tc_node_reduce(TC_OP_REDUCE_SUM, e, 1)), a, 0, 0);
    finish();
}

static void test_views(void **state) {
    (void)state;
    const float a[4] = {1, 2, 3, 4};
    tc_node *x = buf(TC_FLOAT32, 2, (int64_t[]){2, 2}, a);
    tc_node *p = keep(tc_node_pad(x, (int64_t[]){1, 0, 0, 1}));
    expect(p, (float[]){0, 0, 0, 1, 2, 0, 3, 4, 0}, 9, 0);
    tc_node *f = keep(tc_node_flip(x, (bool[]){false, true}));
    expect(f, (float[]){2, 1, 4, 3}, 4, 0);
    expect(keep(tc_node_flip(p, (bool[]){true, true})), (float[]){0, 4, 3, 0, 2, 1, 0, 0, 0}, 9, 0);
    tc_node *sh = keep(tc_node_shrink(p, (int64_t[]){1, 3, 0, 2}));
    expect(sh, (float[]){1, 2, 3, 4}, 4, 0);
    /* padding reads zero even through an op that is not zero at zero */
    expect(un(TC_OP_EXP2, TC_FLOAT32, p), (float[]){1, 1, 1, 2, 4, 1, 8, 16, 1}, 9, 0);
    const float b[6] = {1, 2, 3, 4, 5, 6};
    tc_node *y = buf(TC_FLOAT32, 2, s23, b);
    tc_node *t = keep(tc_node_permute(y, (int[]){1, 0}));
    expect(t, (float[]){1, 4, 2, 5, 3, 6}, 6, 0);
    tc_node *r = keep(tc_node_reshape(t, 2, (int64_t[]){2, 3})); /* needs two views */
    expect(r, (float[]){1, 4, 2, 5, 3, 6}, 6, 0);
    tc_node *rp = keep(tc_node_permute(r, (int[]){1, 0}));
    expect(rp, (float[]){1, 5, 4, 3, 2, 6}, 6, 0);
    expect(bin(TC_OP_ADD, TC_FLOAT32, rp, keep(tc_node_flip(rp, (bool[]){true, false}))),
           (float[]){3, 11, 8, 6, 3, 11}, 6, 0);
    finish();
}

static void test_int_idiv_mod(void **state) {
    (void)state;
    const int32_t a[6] = {-7, 7, -7, 7, 5, INT32_MIN}, b[6] = {2, -2, -2, 2, 0, -1};
    int64_t s6[1] = {6};
    tc_node *x = buf(TC_INT32, 1, s6, a), *y = buf(TC_INT32, 1, s6, b);
    expect(bin(TC_OP_IDIV, TC_INT32, x, y), (int32_t[]){-3, -3, 3, 3, 0, INT32_MIN}, 6, 0);
    expect(bin(TC_OP_MOD, TC_INT32, x, y), (int32_t[]){-1, 1, -1, 1, 0, 0}, 6, 0);
    expect(bin(TC_OP_ADD, TC_INT32, x, y), (int32_t[]){-5, 5, -9, 9, 5, INT32_MAX}, 6, 0);
    expect(un(TC_OP_NEG, TC_INT32, x), (int32_t[]){7, -7, 7, -7, -5, INT32_MIN}, 6, 0);
    const int64_t c[3] = {INT64_MIN, -9, 9}, d[3] = {-1, 4, -4};
    tc_node *p = buf(TC_INT64, 1, (int64_t[]){3}, c), *q = buf(TC_INT64, 1, (int64_t[]){3}, d);
    expect(bin(TC_OP_IDIV, TC_INT64, p, q), (int64_t[]){INT64_MIN, -2, -2}, 3, 0);
    expect(bin(TC_OP_MOD, TC_INT64, p, q), (int64_t[]){0, -1, 1}, 3, 0);
    const uint8_t u[3] = {250, 7, 0}, v[3] = {10, 2, 3};
    tc_node *m = buf(TC_UINT8, 1, (int64_t[]){3}, u), *k = buf(TC_UINT8, 1, (int64_t[]){3}, v);
    expect(bin(TC_OP_ADD, TC_UINT8, m, k), (uint8_t[]){4, 9, 3}, 3, 0);
    expect(bin(TC_OP_IDIV, TC_UINT8, m, k), (uint8_t[]){25, 3, 0}, 3, 0);
    expect(un(TC_OP_NEG, TC_UINT8, k), (uint8_t[]){246, 254, 253}, 3, 0);
    finish();
}

static void test_bits_and_shifts(void **state) {
    (void)state;
    const int32_t a[4] = {12, -8, 5, 1}, b[4] = {10, 3, 1, 31};
    int64_t s4[1] = {4};
    tc_node *x = buf(TC_INT32, 1, s4, a), *y = buf(TC_INT32, 1, s4, b);
    expect(bin(TC_OP_AND, TC_INT32, x, y), (int32_t[]){8, 0, 1, 1}, 4, 0);
    expect(bin(TC_OP_OR, TC_INT32, x, y), (int32_t[]){14, -5, 5, 31}, 4, 0);
    expect(bin(TC_OP_XOR, TC_INT32, x, y), (int32_t[]){6, -5, 4, 30}, 4, 0);
    expect(bin(TC_OP_SHL, TC_INT32, x, y), (int32_t[]){12288, -64, 10, INT32_MIN}, 4, 0);
    expect(bin(TC_OP_SHR, TC_INT32, x, y), (int32_t[]){0, -1, 2, 0}, 4, 0);
    finish();
}

static void test_compare_where_bool(void **state) {
    (void)state;
    const float a[4] = {1, 5, -2, 3}, b[4] = {2, 5, -3, 3.5f};
    int64_t s4[1] = {4};
    tc_node *x = buf(TC_FLOAT32, 1, s4, a), *y = buf(TC_FLOAT32, 1, s4, b);
    tc_node *lt = bin(TC_OP_CMPLT, TC_BOOL, x, y), *ne = bin(TC_OP_CMPNE, TC_BOOL, x, y);
    expect(lt, (uint8_t[]){1, 0, 0, 1}, 4, 0);
    expect(ne, (uint8_t[]){1, 0, 1, 1}, 4, 0);
    expect(tern(TC_OP_WHERE, TC_FLOAT32, lt, x, y), (float[]){1, 5, -3, 3}, 4, 0);
    expect(un(TC_OP_NEG, TC_BOOL, lt), (uint8_t[]){0, 1, 1, 0}, 4, 0);
    expect(bin(TC_OP_ADD, TC_BOOL, lt, ne), (uint8_t[]){1, 0, 1, 1}, 4, 0);
    expect(bin(TC_OP_MUL, TC_BOOL, lt, ne), (uint8_t[]){1, 0, 0, 1}, 4, 0);
    expect(bin(TC_OP_XOR, TC_BOOL, lt, ne), (uint8_t[]){0, 0, 1, 0}, 4, 0);
    expect(bin(TC_OP_CMPLT, TC_BOOL, lt, ne), (uint8_t[]){0, 0, 1, 0}, 4, 0);
    const int32_t i[4] = {3, -4, 0, 7}, j[4] = {-3, 4, 0, 6};
    tc_node *p = buf(TC_INT32, 1, s4, i), *q = buf(TC_INT32, 1, s4, j);
    expect(bin(TC_OP_MAX, TC_INT32, p, q), (int32_t[]){3, 4, 0, 7}, 4, 0);
    expect(bin(TC_OP_CMPLT, TC_BOOL, p, q), (uint8_t[]){0, 1, 0, 0}, 4, 0);
    finish();
}

static void test_unary_float(void **state) {
    (void)state;
    const float a[4] = {3, 8, 16, 0.25f};
    tc_node *x = buf(TC_FLOAT32, 1, (int64_t[]){4}, a);
    expect(un(TC_OP_EXP2, TC_FLOAT32, x), (float[]){8, 256, 65536, exp2f(0.25f)}, 4, 0);
    expect(un(TC_OP_LOG2, TC_FLOAT32, x), (float[]){log2f(3), 3, 4, -2}, 4, 0);
    expect(un(TC_OP_SQRT, TC_FLOAT32, x), (float[]){sqrtf(3), sqrtf(8), 4, 0.5f}, 4, 0);
    expect(un(TC_OP_SIN, TC_FLOAT32, x), (float[]){sinf(3), sinf(8), sinf(16), sinf(0.25f)}, 4, 0);
    expect(un(TC_OP_RECIP, TC_FLOAT32, x), (float[]){1.0f / 3, 0.125f, 0.0625f, 4}, 4, 0);
    const float z[2] = {0, -1};
    tc_node *y = buf(TC_FLOAT32, 1, (int64_t[]){2}, z);
    expect(un(TC_OP_RECIP, TC_FLOAT32, y), (float[]){INFINITY, -1}, 2, 0);
    expect(un(TC_OP_LOG2, TC_FLOAT32, y), (float[]){-INFINITY, NAN}, 2, 0);
    finish();
}

static void test_casts(void **state) {
    (void)state;
    const float a[4] = {-1.7f, 2.9f, 0, 0.5f};
    tc_node *x = buf(TC_FLOAT32, 1, (int64_t[]){4}, a);
    expect(un(TC_OP_CAST, TC_INT32, x), (int32_t[]){-1, 2, 0, 0}, 4, 0);
    expect(un(TC_OP_CAST, TC_INT64, x), (int64_t[]){-1, 2, 0, 0}, 4, 0);
    expect(un(TC_OP_CAST, TC_BOOL, x), (uint8_t[]){1, 1, 0, 1}, 4, 0);
    const int32_t i[3] = {300, -1, 7};
    tc_node *y = buf(TC_INT32, 1, (int64_t[]){3}, i);
    expect(un(TC_OP_CAST, TC_UINT8, y), (uint8_t[]){44, 255, 7}, 3, 0);
    expect(un(TC_OP_CAST, TC_FLOAT32, y), (float[]){300, -1, 7}, 3, 0);
    expect(un(TC_OP_CAST, TC_BOOL, y), (uint8_t[]){1, 1, 1}, 3, 0);
    const float one[1] = {1};
    tc_node *o = buf(TC_FLOAT32, 1, (int64_t[]){1}, one);
    expect(un(TC_OP_BITCAST, TC_INT32, o), (int32_t[]){0x3f800000}, 1, 0);
    const int64_t big[1] = {((int64_t)1 << 24) + 1};
    tc_node *b = buf(TC_INT64, 1, (int64_t[]){1}, big);
    expect(un(TC_OP_CAST, TC_FLOAT32, b), (float[]){16777216.0f}, 1, 0);
    finish();
}

static void test_float16(void **state) {
    (void)state;
    /* 1+2^-11 is half an ulp of half: ties to even give 1; 1+3*2^-11 gives 1+2^-9 */
    const float a[4] = {1.0f, 1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 70000.0f};
    tc_node *x = buf(TC_FLOAT32, 1, (int64_t[]){4}, a);
    tc_node *h = un(TC_OP_CAST, TC_FLOAT16, x);
    tc_node *back = un(TC_OP_CAST, TC_FLOAT32, h);
    expect(back, (float[]){1, 1, 1 + 0x1p-9f, INFINITY}, 4, 0);
    /* each float16 op rounds: (1 + 2^-11) + 2^-11 stays 1 in half */
    tc_node *eps = keep(tc_node_const(0x1p-11, TC_FLOAT16, x->device, 1, (int64_t[]){4}));
    tc_node *s1 = bin(TC_OP_ADD, TC_FLOAT16, h, eps);
    tc_node *s2 = bin(TC_OP_ADD, TC_FLOAT16, s1, eps);
    expect(un(TC_OP_CAST, TC_FLOAT32, s2), (float[]){1, 1, 1 + 0x1p-9f, INFINITY}, 4, 0);
    tc_node *sum =
        keep(tc_node_reduce(TC_OP_REDUCE_SUM, keep(tc_node_shrink(s2, (int64_t[]){0, 3})), 1));
    expect(un(TC_OP_CAST, TC_FLOAT32, sum), (float[]){3 + 0x1p-9f}, 1, 0);
    finish();
}

static void test_meta_ops(void **state) {
    (void)state;
    const float a[2] = {4, 9}, b[2] = {0, 0};
    tc_node *x = buf(TC_FLOAT32, 1, (int64_t[]){2}, a), *t = buf(TC_FLOAT32, 1, (int64_t[]){2}, b);
    tc_node *r = un(TC_OP_SQRT, TC_FLOAT32, x);
    expect(keep(tc_node_meta(TC_OP_CONTIGUOUS, x->device, 1, &r)), (float[]){2, 3}, 2, 0);
    expect(keep(tc_node_meta(TC_OP_COPY, x->device, 1, &r)), (float[]){2, 3}, 2, 0);
    tc_node *as[2] = {r, t};
    expect(keep(tc_node_meta(TC_OP_ASSIGN, x->device, 2, as)), (float[]){2, 3}, 2, 0);
    finish();
}

/* a 100k-node chain: ordering and freeing must not recurse */
static void test_deep_chain(void **state) {
    (void)state;
    const float z[4] = {0, 1, 2, 3};
    tc_node *x = tc_node_retain(buf(TC_FLOAT32, 1, (int64_t[]){4}, z));
    tc_node *one = keep(tc_node_const(1.0, TC_FLOAT32, x->device, 1, (int64_t[]){4}));
    for (int i = 0; i < 100000; i++) {
        tc_node *s[2] = {x, one};
        tc_node *y = tc_node_alu(TC_OP_ADD, TC_FLOAT32, 2, s);
        assert_non_null(y);
        tc_node_release(x);
        x = y;
    }
    expect(keep(x), (float[]){100000, 100001, 100002, 100003}, 4, 0);
    finish();
}

static void test_errors(void **state) {
    (void)state;
    float out[4];
    assert_int_equal(tc_ref_eval(NULL, out), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_ref_eval");
    const int32_t i[2] = {1, 2};
    tc_node *x = buf(TC_INT32, 1, (int64_t[]){2}, i);
    assert_int_equal(tc_ref_eval(x, NULL), TC_ERR_INVALID);
    tc_node *e = un(TC_OP_EXP2, TC_INT32, x);
    assert_int_equal(tc_ref_eval(e, out), TC_ERR_DTYPE);
    assert_tc_error(TC_ERR_DTYPE, "EXP2 on int32");
    finish();
}

/* every allocation in turn fails: each failure is TC_ERR_MEMORY and leaks nothing */
static void test_alloc_failure(void **state) {
    (void)state;
    const float a[6] = {1, 2, 3, 4, 5, 6};
    tc_node *x = buf(TC_FLOAT32, 2, s23, a);
    tc_node *p = keep(tc_node_pad(x, (int64_t[]){0, 1, 1, 0}));
    tc_node *s = keep(tc_node_reduce(TC_OP_REDUCE_SUM, bin(TC_OP_MUL, TC_FLOAT32, p, p), 2));
    float out[3];
    int fails = 0;
    for (int k = 1; k < 1000; k++) {
        tc_mem_fail_after(k);
        tc_status st = tc_ref_eval(s, out);
        tc_mem_fail_after(0);
        if (st == TC_OK) break;
        assert_int_equal(st, TC_ERR_MEMORY);
        fails++;
    }
    assert_true(fails > 0);
    expect(s, (float[]){0 + 1 + 4 + 9, 16 + 25 + 36, 0}, 3, 0);
    finish();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_mul_mulacc),
        cmocka_unit_test(test_broadcast_and_const),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_int_idiv_mod),
        cmocka_unit_test(test_bits_and_shifts),
        cmocka_unit_test(test_compare_where_bool),
        cmocka_unit_test(test_unary_float),
        cmocka_unit_test(test_casts),
        cmocka_unit_test(test_float16),
        cmocka_unit_test(test_meta_ops),
        cmocka_unit_test(test_deep_chain),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
