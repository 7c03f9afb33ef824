/* test_clip.c - tc_clip_grad_norm (torch.nn.utils.clip_grad_norm_): the
 * total norm (2, inf, 1.5) against the host, the gradients scaled by
 * min(max_norm / (total + 1e-6), 1), parameters without a gradient
 * skipped, the kernels of the clip with an SGD step, out of memory
 * (a failure changes no gradient and leaks nothing), and bad arguments. */
#include "../api/api_helpers.h"
#include "graph/graph.h"
#include "util/util.h"

#include <math.h>

#define NP 3
enum { CLIP_KERNELS = 3, STEP_KERNELS = 6 };

static const int64_t SIZES[NP] = {12, 5, 8};

/* three parameters (3,4), (5), (2,2,2) with gradients from a loss that
 * weighs each element differently; g[i] gets the gradients (host copies) */
static void make_params(tc_tensor **p, float g[NP][12]) {
    p[0] = tc_test_randn(2, SHAPE(3, 4), 1, -1, 1);
    p[1] = tc_test_randn(1, SHAPE(5), 2, -1, 1);
    p[2] = tc_test_randn(3, SHAPE(2, 2, 2), 3, -1, 1);
    tc_tensor *loss = NULL;
    for (int i = 0; i < NP; i++) {
        assert_int_equal(tc_set_requires_grad(p[i], true), TC_OK);
        tc_tensor *sq = tc_mul(p[i], p[i]), *e = tc_exp(sq), *s = tc_sum(e, 0, NULL, false);
        tc_tensor *next = loss ? tc_add(loss, s) : tc_retain(s);
        tc_release(loss), tc_release(sq), tc_release(e), tc_release(s);
        loss = next;
    }
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_release(loss);
    for (int i = 0; i < NP; i++) {
        tc_tensor *gi = tc_grad(p[i]);
        assert_int_equal(tc_to_host(gi, g[i], (size_t)SIZES[i] * sizeof(float)), TC_OK);
        tc_release(gi);
    }
}

static double host_norm(float g[NP][12], const bool *has, double q) {
    double acc = 0;
    for (int i = 0; i < NP; i++)
        for (int j = 0; j < SIZES[i] && has[i]; j++) {
            double a = fabs((double)g[i][j]);
            acc = isinf(q) ? fmax(acc, a) : acc + pow(a, q);
        }
    return isinf(q) ? acc : pow(acc, 1 / q);
}

/* the norm and the scaled gradients for each norm_type, clipping or not */
static void test_values(void **state) {
    (void)state;
    const double qs[3] = {2, INFINITY, 1.5};
    const bool all[NP] = {true, true, true};
    for (int k = 0; k < 3; k++)
        for (int clip = 0; clip < 2; clip++) {
            tc_tensor *p[NP];
            float g[NP][12];
            make_params(p, g);
            double total = host_norm(g, all, qs[k]);
            double max_norm = clip ? total / 3 : total * 2;
            double coef = fmin(max_norm / (total + 1e-6), 1);
            tc_tensor *t = tc_clip_grad_norm(p, NP, max_norm, qs[k]);
            check_meta(t, TC_FLOAT32, 0, NULL);
            float tw = (float)total;
            char what[64];
            snprintf(what, sizeof what, "norm_type %g, %s", qs[k],
                     clip ? "clipped" : "not clipped");
            expect_f32(t, &tw, 1, 1e-5, 0, what);
            for (int i = 0; i < NP; i++) {
                float want[12];
                for (int j = 0; j < SIZES[i]; j++) want[j] = (float)(g[i][j] * coef);
                expect_f32(tc_grad(p[i]), want, SIZES[i], 1e-5, 1e-7, what);
                tc_release(p[i]);
            }
        }
}

/* a parameter without a gradient is skipped; none at all: the norm is 0 */
static void test_missing(void **state) {
    (void)state;
    tc_tensor *p[NP];
    float g[NP][12];
    make_params(p, g);
    assert_int_equal(tc_zero_grad(p[1]), TC_OK);
    const bool has[NP] = {true, false, true};
    double total = host_norm(g, has, 2);
    float tw = (float)total;
    expect_f32(tc_clip_grad_norm(p, NP, 0.5, 2), &tw, 1, 1e-5, 0, "one without a gradient");
    assert_null(tc_grad(p[1]));
    float want[12];
    for (int j = 0; j < SIZES[0]; j++) want[j] = (float)(g[0][j] * 0.5 / (total + 1e-6));
    expect_f32(tc_grad(p[0]), want, SIZES[0], 1e-5, 1e-7, "scaled");
    tc_tensor *q = tc_test_randn(1, SHAPE(3), 4, -1, 1);
    float zero = 0;
    expect_f32(tc_clip_grad_norm(&q, 1, 1, 2), &zero, 1, 0, 0, "no gradient at all");
    expect_f32(tc_clip_grad_norm(NULL, 0, 1, 2), &zero, 1, 0, 0, "no parameter");
    for (int i = 0; i < NP; i++) tc_release(p[i]);
    tc_release(q);
}

/* Kernels: the clip's norm realized alone is 3 (each gradient's sum of
 * squares is a reduce over its own shape, so one kernel per parameter; the
 * total and its root ride on the last); an SGD step on the clipped
 * gradients with the norm is 6 (those 3, then each parameter's update with
 * the coefficient recomputed in it) */
static void test_kernels(void **state) {
    (void)state;
    tc_tensor *p[NP];
    float g[NP][12];
    make_params(p, g);
    tc_tensor *gs[NP];
    for (int i = 0; i < NP; i++) gs[i] = tc_grad(p[i]);
    assert_int_equal(tc_realize(gs, NP), TC_OK);
    tc_tensor *t = tc_clip_grad_norm(p, NP, 0.1, 2);
    int alone = tc_schedule_kernel_count(&t, 1);
    tc_optimizer *o = tc_sgd(p, NP, 1, 0);
    tc_counters c0, c1;
    tc_get_counters(&c0);
    assert_int_equal(tc_optimizer_step_with(o, &t, 1), TC_OK);
    tc_get_counters(&c1);
    fprintf(stderr, "  clip norm alone: %d kernels; SGD step on clipped gradients: %lld\n", alone,
            (long long)(c1.kernel_count - c0.kernel_count));
    double total = host_norm(g, (const bool[NP]){true, true, true}, 2);
    float tw = (float)total;
    expect_f32(tc_retain(t), &tw, 1, 1e-5, 0, "norm with the step");
    tc_tensor *p0 = tc_test_randn(2, SHAPE(3, 4), 1, -1, 1);
    float *before = tc_test_read(p0), want[12];
    for (int j = 0; j < 12; j++) want[j] = before[j] - (float)(g[0][j] * 0.1 / (total + 1e-6));
    expect_f32(tc_retain(p[0]), want, 12, 1e-5, 1e-6, "p - clipped grad");
    assert_int_equal(alone, CLIP_KERNELS);
    assert_int_equal(c1.kernel_count - c0.kernel_count, STEP_KERNELS);
    free(before);
    tc_optimizer_free(o);
    for (int i = 0; i < NP; i++) tc_release(p[i]), tc_release(gs[i]);
    tc_release(t), tc_release(p0);
}

/* every allocation of the call failing in turn: TC_ERR_MEMORY, the same
 * gradients, no node left behind */
static void test_oom(void **state) {
    (void)state;
    tc_tensor *p[NP], *before[NP];
    float g[NP][12];
    make_params(p, g);
    for (int i = 0; i < NP; i++) before[i] = tc_grad(p[i]);
    int64_t base = tc_graph_live_nodes();
    tc_tensor *t = NULL;
    for (int n = 1; n < 3000 && !t; n++) {
        tc_mem_fail_after(n);
        t = tc_clip_grad_norm(p, NP, 0.1, 1.5);
        tc_mem_fail_after(0);
        if (t) break;
        assert_int_equal(tc_last_status(), TC_ERR_MEMORY);
        assert_int_equal(tc_graph_live_nodes(), base);
        for (int i = 0; i < NP; i++) {
            tc_tensor *gi = tc_grad(p[i]);
            assert_ptr_equal(gi, before[i]);
            tc_release(gi);
        }
    }
    assert_non_null(t);
    tc_release(t);
    for (int i = 0; i < NP; i++) tc_release(p[i]), tc_release(before[i]);
}

static void test_errors(void **state) {
    (void)state;
    tc_tensor *p = tc_test_randn(1, SHAPE(3), 5, -1, 1), *ps[2] = {p, NULL};
    assert_null(tc_clip_grad_norm(ps, 1, -1, 2));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: max_norm -1 must be finite and >= 0");
    assert_null(tc_clip_grad_norm(ps, 1, INFINITY, 2));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: max_norm inf must be finite and >= 0");
    assert_null(tc_clip_grad_norm(ps, 1, 1, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: norm_type 0 must be > 0 (or inf)");
    assert_null(tc_clip_grad_norm(ps, 2, 1, 2));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: params[1] is NULL");
    assert_null(tc_clip_grad_norm(NULL, 2, 1, 2));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: params is NULL");
    assert_null(tc_clip_grad_norm(ps, -1, 1, 2));
    assert_tc_error(TC_ERR_INVALID, "tc_clip_grad_norm: n < 0");
    tc_release(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_values), TEST(test_missing), TEST(test_kernels),
        TEST(test_oom),    TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
