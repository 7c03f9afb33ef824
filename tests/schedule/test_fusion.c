/* test_fusion.c - kernels that hold several reduces in sequence (the
 * "consecutive reduce" fusion tinygrad never got right): per-row stages
 * inside one loop over the kept axes. Each count is exact and each result is
 * checked against the reference evaluator. Shapes are odd on purpose. */
#include "tc_test.h"

#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "tensor/tensor.h"

static const int64_t X[2] = {7, 33};
static const int LAST = -1;

static tc_tensor *rnd(uint64_t seed) {
    return tc_test_randn(2, X, seed, -3.0f, 3.0f);
}

/* releases a NULL-terminated list */
static void drop(tc_tensor **ts) {
    for (; *ts; ts++) tc_release(*ts);
}

/* softmax by hand: max stage, sum-of-exp stage, store stage: 1 kernel */
static void test_softmax(void **state) {
    (void)state;
    tc_tensor *x = rnd(1), *m = tc_max(x, 1, &LAST, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &LAST, true), *y = tc_div(e, s);
    tc_check_schedule(y, 1, 1e-5, 1e-6, "softmax");
    drop((tc_tensor *[]){x, m, d, e, s, y, NULL});
    tc_shutdown();
}

/* log_softmax: x - max - log(sum(exp(x - max))): 1 kernel */
static void test_log_softmax(void **state) {
    (void)state;
    tc_tensor *x = rnd(2), *m = tc_max(x, 1, &LAST, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &LAST, true), *l = tc_log(s), *y = tc_sub(d, l);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "log_softmax");
    drop((tc_tensor *[]){x, m, d, e, s, l, y, NULL});
    tc_shutdown();
}

/* layernorm without affine: mean stage, variance stage, store: 1 kernel */
static void test_layernorm(void **state) {
    (void)state;
    tc_tensor *x = rnd(3), *mu = tc_mean(x, 1, &LAST, true), *d = tc_sub(x, mu), *sq = tc_square(d);
    tc_tensor *var = tc_mean(sq, 1, &LAST, true), *eps = tc_full(0, NULL, 1e-5, TC_FLOAT32, NULL);
    tc_tensor *ve = tc_add(var, eps), *sd = tc_sqrt(ve), *y = tc_div(d, sd);
    tc_check_schedule(y, 1, 1e-4, 1e-5, "layernorm");
    drop((tc_tensor *[]){x, mu, d, sq, var, eps, ve, sd, y, NULL});
    tc_shutdown();
}

/* std: mean stage, then a sum of squares stage: 1 kernel */
static void test_std(void **state) {
    (void)state;
    tc_tensor *x = rnd(4), *s = tc_std(x, 1, &LAST, false, 1);
    tc_check_schedule(s, 1, 1e-5, 1e-6, "std");
    drop((tc_tensor *[]){x, s, NULL});
    tc_shutdown();
}

/* mean and std realized together: one kernel with two outputs */
static void test_mean_and_std(void **state) {
    (void)state;
    tc_tensor *x = rnd(5), *mu = tc_mean(x, 1, &LAST, false), *s = tc_std(x, 1, &LAST, false, 1);
    tc_tensor *both[2] = {mu, s};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    tc_check_schedule(s, 1, 1e-5, 1e-6, "std (mean alive)");
    tc_check_schedule(mu, 1, 1e-5, 1e-6, "mean");
    drop((tc_tensor *[]){x, mu, s, NULL});
    tc_shutdown();
}

/* x - x.mean(1) and its squared mean: 1 kernel each */
static void test_centered(void **state) {
    (void)state;
    tc_tensor *x = rnd(6), *mu = tc_mean(x, 1, &LAST, true), *d = tc_sub(x, mu);
    tc_check_schedule(d, 1, 1e-5, 1e-5, "x - x.mean(1)");
    tc_tensor *x2 = rnd(7), *mu2 = tc_mean(x2, 1, &LAST, true), *d2 = tc_sub(x2, mu2);
    tc_tensor *sq = tc_square(d2), *v = tc_mean(sq, 1, &LAST, false);
    tc_check_schedule(v, 1, 1e-5, 1e-6, "(x - x.mean(1)).square().mean(1)");
    drop((tc_tensor *[]){x, mu, d, x2, mu2, d2, sq, v, NULL});
    tc_shutdown();
}

/* x.sum() + x.max(): two parallel reduces over the same loop space */
static void test_parallel_reduces(void **state) {
    (void)state;
    tc_tensor *x = rnd(8), *s = tc_sum(x, 0, NULL, false), *m = tc_max(x, 0, NULL, false);
    tc_tensor *y = tc_add(s, m);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "x.sum() + x.max()");
    drop((tc_tensor *[]){x, s, m, y, NULL});
    tc_shutdown();
}

/* (a + a.sum(-1, keepdim)).sum(-1): reduce, broadcast, reduce: 1 kernel */
static void test_reduce_expand_reduce(void **state) {
    (void)state;
    tc_tensor *a = rnd(9), *s = tc_sum(a, 1, &LAST, true), *p = tc_add(a, s);
    tc_tensor *y = tc_sum(p, 1, &LAST, false);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "(a + a.sum(-1,kd)).sum(-1)");
    drop((tc_tensor *[]){a, s, p, y, NULL});
    tc_shutdown();
}

/* a+(a+a.sum(-1,kd)).sum(-1,kd) and out0=a+a.sum(-1,kd), out1=out0.sum(-1):
 * full-space and reduced-space outputs of one kernel */
static void test_branching_outputs(void **state) {
    (void)state;
    tc_tensor *a = rnd(10), *s = tc_sum(a, 1, &LAST, true), *o0 = tc_add(a, s);
    tc_tensor *o1 = tc_sum(o0, 1, &LAST, false);
    tc_tensor *both[2] = {o0, o1};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    assert_int_equal(tc_realize(both, 2), TC_OK);
    tc_tensor *a2 = rnd(11), *s2 = tc_sum(a2, 1, &LAST, true), *p2 = tc_add(a2, s2);
    tc_tensor *t2 = tc_sum(p2, 1, &LAST, true), *y2 = tc_add(a2, t2);
    tc_check_schedule(y2, 1, 1e-4, 1e-4, "a+(a+a.sum(-1,kd)).sum(-1,kd)");
    drop((tc_tensor *[]){a, s, o0, o1, a2, s2, p2, t2, y2, NULL});
    tc_shutdown();
}

/* a reduce over another loop space cannot be absorbed: x.sum(0) broadcast
 * back over rows is a different loop space than the row sums: 2 kernels */
static void test_different_spaces(void **state) {
    (void)state;
    const int FIRST = 0;
    tc_tensor *x = rnd(12), *c = tc_sum(x, 1, &FIRST, true), *d = tc_sub(x, c);
    tc_tensor *y = tc_sum(d, 1, &LAST, false);
    tc_check_schedule(y, 2, 1e-4, 1e-4, "(x - x.sum(0)).sum(1)");
    drop((tc_tensor *[]){x, c, d, y, NULL});
    tc_shutdown();
}

/* the pad cases tinygrad got wrong before #4614 (shrink_pad_unsafe,
 * base_change_shrink_pad) and a pad under a reduce: all 1 kernel, with the
 * padding reading 0 (exp2(0) would be 1, log2(0) -inf) */
static void test_unsafe_pads(void **state) {
    (void)state;
    const int64_t n4[1] = {4}, shrink1[2] = {0, 1}, pad1[2] = {0, 1};
    tc_tensor *a = tc_test_randn(1, n4, 14, -1, 1), *e = tc_exp2(a), *sh = tc_shrink(e, shrink1);
    tc_tensor *p = tc_pad(sh, pad1), *c = tc_contiguous(p);
    tc_check_schedule(c, 1, 1e-6, 1e-6, "a.exp2()[:1].pad((0,1))");
    float *v = tc_test_read(c);
    assert_true(v[1] == 0.0f);
    free(v);
    const int64_t s44[2] = {4, 4}, sh2[4] = {0, 3, 0, 3}, pd2[4] = {0, 1, 0, 1};
    tc_tensor *b = tc_test_randn(2, s44, 15, -1, 1), *be = tc_exp2(b), *bs = tc_shrink(be, sh2);
    tc_tensor *bp = tc_pad(bs, pd2), *two = tc_full(0, NULL, 2.0, TC_FLOAT32, NULL), *bm = tc_mul(bp, two);
    tc_check_schedule(bm, 1, 1e-6, 1e-6, "b.exp2()[:-1,:-1].pad(...)*2");
    tc_tensor *d = tc_test_randn(2, s44, 16, 0.5f, 2.0f), *dl = tc_log2(d);
    const int64_t pd3[4] = {1, 1, 1, 1};
    tc_tensor *dp = tc_pad(dl, pd3), *ds = tc_sum(dp, 0, NULL, false);
    tc_check_schedule(ds, 1, 1e-5, 1e-5, "d.log2().pad(1).sum()");
    drop((tc_tensor *[]){a, e, sh, p, c, b, be, bs, bp, two, bm, d, dl, dp, ds, NULL});
    tc_shutdown();
}

/* an Adam-like update of one parameter: m, v and p assigned from a realized
 * gradient, p reading the new m and v: one kernel with three outputs */
static void test_optimizer_update(void **state) {
    (void)state;
    const int64_t n[1] = {37};
    tc_tensor *g = tc_test_randn(1, n, 21, -1, 1), *p = tc_test_randn(1, n, 22, -1, 1);
    tc_tensor *m = tc_test_randn(1, n, 23, -0.1f, 0.1f), *v = tc_test_randn(1, n, 24, 0, 0.1f);
    float gv[37], pv[37], mv[37], vv[37];
    assert_int_equal(tc_to_host(g, gv, sizeof gv), TC_OK);
    assert_int_equal(tc_to_host(p, pv, sizeof pv), TC_OK);
    assert_int_equal(tc_to_host(m, mv, sizeof mv), TC_OK);
    assert_int_equal(tc_to_host(v, vv, sizeof vv), TC_OK);
    tc_tensor *k09 = tc_full(0, NULL, 0.9, TC_FLOAT32, NULL), *k01 = tc_full(0, NULL, 0.1, TC_FLOAT32, NULL);
    tc_tensor *k99 = tc_full(0, NULL, 0.99, TC_FLOAT32, NULL), *k001 = tc_full(0, NULL, 0.01, TC_FLOAT32, NULL);
    tc_tensor *lr = tc_full(0, NULL, 0.05, TC_FLOAT32, NULL), *eps = tc_full(0, NULL, 1e-8, TC_FLOAT32, NULL);
    tc_tensor *a1 = tc_mul(m, k09), *a2 = tc_mul(g, k01), *mn = tc_add(a1, a2);
    tc_tensor *g2 = tc_square(g), *b1 = tc_mul(v, k99), *b2 = tc_mul(g2, k001), *vn = tc_add(b1, b2);
    assert_int_equal(tc_assign(m, mn), TC_OK);
    assert_int_equal(tc_assign(v, vn), TC_OK);
    tc_tensor *sv = tc_sqrt(v), *se = tc_add(sv, eps), *q = tc_div(m, se), *lq = tc_mul(q, lr);
    tc_tensor *pn = tc_sub(p, lq);
    assert_int_equal(tc_assign(p, pn), TC_OK);
    tc_tensor *all[3] = {m, v, p};
    assert_int_equal(tc_schedule_kernel_count(all, 3), 1);
    assert_int_equal(tc_realize(all, 3), TC_OK);
    float want[37], got[37];
    for (int i = 0; i < 37; i++) {
        float mm = 0.9f * mv[i] + 0.1f * gv[i], vq = 0.99f * vv[i] + 0.01f * gv[i] * gv[i];
        want[i] = pv[i] - 0.05f * (mm / (sqrtf(vq) + 1e-8f));
    }
    assert_int_equal(tc_to_host(p, got, sizeof got), TC_OK);
    assert_true(tc_allclose_f32(got, want, 37, 1e-5, 1e-6, "p after the update"));
    drop((tc_tensor *[]){g, p, m, v, k09, k01, k99, k001, lr, eps, a1, a2, mn, g2, b1, b2, vn, sv,
                         se, q, lq, pn, NULL});
    tc_shutdown();
}

/* relu(conv2d(x, w) + b): the conv's reduce with the bias add and the relu
 * as its elementwise consumers, one kernel; with padding and stride 2, two
 * (x padded in a buffer of its own, then the conv reads it through a
 * strided window view: a padded view's gated loads run 7-20x slower) */
static void test_conv_bias_relu(void **state) {
    (void)state;
    const int64_t xs[4] = {2, 3, 9, 10}, ws[4] = {4, 3, 3, 3}, bs[1] = {4};
    tc_tensor *x = tc_test_randn(4, xs, 31, -1, 1), *w = tc_test_randn(4, ws, 32, -1, 1);
    tc_tensor *b = tc_test_randn(1, bs, 33, -1, 1);
    tc_tensor *inputs[3] = {x, w, b};
    assert_int_equal(tc_realize(inputs, 3), TC_OK);
    tc_tensor *c = tc_conv2d(x, w, b, 1, 0), *y = tc_relu(c);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "relu(conv2d(x, w) + b)");
    tc_tensor *c2 = tc_conv2d(x, w, b, 2, 1), *y2 = tc_relu(c2);
    tc_check_schedule(y2, 2, 1e-5, 1e-5, "relu(conv2d(x, w, stride 2, pad 1) + b)");
    drop((tc_tensor *[]){x, w, b, c, y, c2, y2, NULL});
    tc_shutdown();
}

/* the reference evaluator's values of ts[0..n-1], before they are realized
 * (malloc'ed, n_floats[i] floats each) */
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

/* realizes ts in `kernels` kernels and compares them with want (freed) */
static void check_all(tc_tensor **ts, int n, float **want, int kernels, const char *what) {
    assert_int_equal(tc_schedule_kernel_count(ts, n), kernels);
    assert_int_equal(tc_realize(ts, n), TC_OK);
    for (int i = 0; i < n; i++) {
        float *got = tc_test_read(ts[i]);
        assert_true(tc_allclose_f32(got, want[i], tc_numel(ts[i]), 1e-4, 1e-5, what));
        free(got);
        free(want[i]);
    }
    free(want);
}

/* A reduce realized because other kernels read it still stores, as more
 * outputs, what is computed from it row by row when it has at most 4096
 * rows (group.c): batchnorm's training statistics with the running-stat
 * updates and the backward sums are 5 kernels (the sum and the mean with
 * the running mean; the variance's sum, the inverse std and the running
 * variance; three backward reduces), not 7. A matmul of 64x64 outputs
 * stores its relu too; of 65x64 (4160 rows, a tile plan worth keeping) the
 * relu is a kernel of its own; an in-place update joins at any size. */
static void test_realized_reduce_outputs(void **state) {
    (void)state;
    const int64_t xs[4] = {6, 5, 7, 3}, cs[1] = {5};
    tc_tensor *x = tc_test_randn(4, xs, 41, -2, 2), *w = tc_test_randn(1, cs, 42, 0.5f, 1.5f);
    tc_tensor *b = tc_test_randn(1, cs, 43, -1, 1), *rm = tc_test_randn(1, cs, 44, -0.1f, 0.1f);
    tc_tensor *rv = tc_test_randn(1, cs, 45, 0.9f, 1.1f);
    tc_set_requires_grad(x, true), tc_set_requires_grad(w, true);
    tc_tensor *y = tc_batchnorm(x, w, b, rm, rv, true, 0.1, 1e-5), *r = tc_relu(y), *r2 = tc_mul(r, r);
    tc_tensor *loss = tc_sum(r2, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *outs[5] = {loss, tc_grad(x), tc_grad(w), rm, rv};
    check_all(outs, 5, reference(outs, 5), 5, "batchnorm train step");
    tc_release(outs[1]), tc_release(outs[2]);
    drop((tc_tensor *[]){x, w, b, rm, rv, y, r, r2, loss, NULL});
    /* a value of a reduce's kernel read through a flip (other rows) stays
     * out of it: the reduce is one register per row (diff seed 5466158) */
    const int64_t fs[2] = {2, 5};
    int one = 0, last = 1;
    tc_tensor *fx = tc_test_randn(2, fs, 48, -1, 1), *fe = tc_exp(fx), *fsum = tc_sum(fe, 1, &one, true);
    tc_tensor *fl = tc_log(fsum), *ff = tc_flip(fl, 1, &last), *fm = tc_add(ff, fl), *fa = tc_abs(fm);
    tc_tensor *fq = tc_sqrt(fa);
    tc_tensor *flipped[2] = {fsum, fq};
    check_all(flipped, 2, reference(flipped, 2), 2, "sqrt(|flip(log(sum)) + log(sum)|) with the sum");
    drop((tc_tensor *[]){fx, fe, fsum, fl, ff, fm, fa, fq, NULL});
    /* a reduce asked for and an in-place update that reads it (a weight
     * gradient realized with its SGD step; 96x80 rows, more than
     * TC_REDUCE_ROWS) are one kernel: the gradient stored beside the
     * update (2 while a realized reduce took no reader into its kernel) */
    const int64_t gx[2] = {33, 96}, gd[2] = {33, 80}, gp[2] = {96, 80};
    tc_tensor *ga = tc_test_randn(2, gx, 49, -1, 1), *gdy = tc_test_randn(2, gd, 50, -1, 1);
    tc_tensor *gpw = tc_test_randn(2, gp, 51, -1, 1);
    assert_int_equal(tc_realize((tc_tensor *[]){ga, gdy, gpw}, 3), TC_OK);
    tc_tensor *gat = tc_transpose(ga, 0, 1), *gw = tc_matmul(gat, gdy);
    tc_tensor *glr = tc_full(0, NULL, 0.05, TC_FLOAT32, NULL), *gstep = tc_mul(gw, glr);
    tc_tensor *gnew = tc_sub(gpw, gstep), *gwant[2] = {gw, gnew};
    float **want = reference(gwant, 2);
    assert_int_equal(tc_assign(gpw, gnew), TC_OK);
    tc_tensor *gboth[2] = {gw, gpw};
    check_all(gboth, 2, want, 1, "x.T @ dy asked for with p -= lr * it");
    drop((tc_tensor *[]){ga, gdy, gpw, gat, gw, glr, gstep, gnew, NULL});
    for (int64_t m = 64; m <= 65; m++) {
        const int64_t as[2] = {m, 32}, ws[2] = {32, 64};
        tc_tensor *a = tc_test_randn(2, as, 46, -1, 1), *bw = tc_test_randn(2, ws, 47, -1, 1);
        tc_tensor *mm = tc_matmul(a, bw), *re = tc_relu(mm), *both[2] = {mm, re};
        check_all(both, 2, reference(both, 2), m == 64 ? 1 : 2, "a @ b and its relu");
        drop((tc_tensor *[]){a, bw, mm, re, NULL});
    }
    tc_shutdown();
}

/* TC_NOFUSE=1: one kernel per reduce (softmax is 3: max, sum, store) and the
 * same numbers */
static void test_nofuse(void **state) {
    (void)state;
    tc_set_flag("TC_NOFUSE", 1);
    tc_tensor *x = rnd(13), *m = tc_max(x, 1, &LAST, true), *d = tc_sub(x, m), *e = tc_exp(d);
    tc_tensor *s = tc_sum(e, 1, &LAST, true), *y = tc_div(e, s);
    tc_check_schedule(y, 3, 1e-5, 1e-6, "softmax NOFUSE");
    tc_set_flag("TC_NOFUSE", 0);
    drop((tc_tensor *[]){x, m, d, e, s, y, NULL});
    tc_shutdown();
}

/* a row mask compared from realized labels, broadcast over the columns,
 * where(labels != 3, x, 0) summed per row: a cheap convert recomputed in
 * the reduce's kernel (a CMPNE of one input and a constant), 1 kernel */
static void test_cheap_compare(void **state) {
    (void)state;
    int32_t lab[7] = {3, 0, 3, 1, 2, 3, 5};
    const int64_t col[2] = {7, 1};
    tc_tensor *x = rnd(14), *y = tc_from_data(lab, TC_INT32, 2, col, NULL);
    tc_tensor *three = tc_full(0, NULL, 3, TC_INT32, NULL);
    tc_tensor *zero = tc_full(0, NULL, 0, TC_FLOAT32, NULL);
    tc_tensor *keep = tc_ne(y, three), *w = tc_where(keep, x, zero), *r = tc_sum(w, 1, &LAST, false);
    tc_check_schedule(r, 1, 1e-5, 1e-6, "sum(where(labels != 3, x, 0))");
    drop((tc_tensor *[]){x, y, three, zero, keep, w, r, NULL});
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax),          cmocka_unit_test(test_log_softmax),
        cmocka_unit_test(test_layernorm),        cmocka_unit_test(test_std),
        cmocka_unit_test(test_mean_and_std),     cmocka_unit_test(test_centered),
        cmocka_unit_test(test_parallel_reduces), cmocka_unit_test(test_reduce_expand_reduce),
        cmocka_unit_test(test_branching_outputs), cmocka_unit_test(test_different_spaces),
        cmocka_unit_test(test_unsafe_pads),      cmocka_unit_test(test_nofuse),
        cmocka_unit_test(test_optimizer_update), cmocka_unit_test(test_conv_bias_relu),
        cmocka_unit_test(test_realized_reduce_outputs), cmocka_unit_test(test_cheap_compare),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
