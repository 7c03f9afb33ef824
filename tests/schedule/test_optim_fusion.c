/* test_optim_fusion.c - optimizer updates as extra outputs of the kernel
 * that computes the gradient (DESIGN.md, scheduler rule 7, issue #5).
 *
 * The model is one layer, y = x @ W (+ b), loss = mean(y^2). Two layouts of
 * the weight:
 *   - "linear": W is (out, in) and y = x @ W.T + b (tc_linear, PyTorch's
 *     layout): dW = dy.T @ x comes out of its reduce in W's own layout;
 *   - "matmul": W is (in, out) and y = x @ W (TinyBobNet's layout): dW =
 *     x.T @ dy comes out of its reduce transposed, so the update is stored
 *     through the inverse permutation, indexed by the reduce's rows; an
 *     update of more than W (momentum's buffer, Adam's m and v) would be
 *     that many scattered scalar stores after the tile, so dW is realized
 *     and the update is a kernel of its own (group.c: one more kernel).
 * For each, the counts are exact:
 *   - the step (forward, backward, update, loss realized with it) runs as
 *     many kernels as forward + backward alone: the update adds none
 *     (SGD, SGD momentum) or only the one kernel that advances Adam's b1^t
 *     and b2^t, whatever the number of parameters (the bias corrections
 *     lr/(1-b1^t) and sqrt(1-b2^t) are recomputed in each update kernel);
 *   - with the gradients already realized, the update is one kernel per
 *     parameter size (its m, v and p together, and those of every other
 *     parameter of that size, as PyTorch's foreach optimizers: test_foreach).
 * Every parameter after the step is compared with the update computed on the
 * host from the reference evaluator's gradient, and with the same step run
 * with TC_NOFUSE=1; each gradient after the step is realized (an extra
 * output of the kernel computing it: no more kernels) and holds the
 * reference's values. */
#include "tc_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "tensor/tensor.h"

enum { N = 13, IN = 7, OUT = 5, MAXP = 2 };

typedef enum { SGD, MOMENTUM, ADAM, ADAMW } opt_kind;

typedef struct {
    bool transposed;    /* W is (in, out): the "matmul" layout */
    bool bias;          /* a bias b (out) */
    tc_tensor *x;       /* (N, IN) input */
    tc_tensor *p[MAXP]; /* W and b */
    int n_p;
    tc_optimizer *opt;
} model;

static const double LR = 0.05, MOM = 0.9, B1 = 0.9, B2 = 0.99, EPS = 1e-8, WD = 0.1;

static void model_init(model *m, bool transposed, bool bias, opt_kind k) {
    memset(m, 0, sizeof *m);
    m->transposed = transposed, m->bias = bias;
    m->x = tc_test_randn(2, (int64_t[]){N, IN}, 1, -1, 1);
    m->p[m->n_p++] = tc_test_randn(2, transposed ? (int64_t[]){IN, OUT} : (int64_t[]){OUT, IN}, 2, -1, 1);
    if (bias) m->p[m->n_p++] = tc_test_randn(1, (int64_t[]){OUT}, 3, -1, 1);
    assert_int_equal(tc_realize(m->p, m->n_p), TC_OK);
    assert_int_equal(tc_realize(&m->x, 1), TC_OK);
    m->opt = k == SGD        ? tc_sgd(m->p, m->n_p, LR, 0)
             : k == MOMENTUM ? tc_sgd(m->p, m->n_p, LR, MOM)
             : k == ADAM     ? tc_adam(m->p, m->n_p, LR, B1, B2, EPS)
                             : tc_adamw(m->p, m->n_p, LR, B1, B2, EPS, WD);
    assert_non_null(m->opt);
}

static void model_free(model *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < m->n_p; i++) tc_release(m->p[i]);
    tc_release(m->x);
}

/* forward and backward (lazy); returns the loss */
static tc_tensor *loss_of(model *m) {
    assert_int_equal(tc_optimizer_zero_grad(m->opt), TC_OK);
    tc_tensor *y = m->transposed ? tc_matmul(m->x, m->p[0]) : tc_linear(m->x, m->p[0], NULL);
    if (m->bias) {
        tc_tensor *yb = tc_add(y, m->p[1]);
        tc_release(y);
        y = yb;
    }
    tc_tensor *sq = tc_square(y), *loss = tc_mean(sq, 0, NULL, false);
    assert_non_null(loss);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_release(y), tc_release(sq);
    return loss;
}

static int64_t kernels_run(tc_counters *before) {
    tc_counters after;
    tc_get_counters(&after);
    return after.kernel_count - before->kernel_count;
}

/* the host update of one parameter from its value and gradient (first step:
 * m = v = 0, t = 1) */
static void host_update(opt_kind k, float *p, const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double gi = g[i], pi = p[i];
        if (k == SGD) pi -= LR * gi;
        else if (k == MOMENTUM) pi -= LR * gi; /* the buffer starts at g */
        else {
            double mh = (1 - B1) * gi / (1 - B1), vh = (1 - B2) * gi * gi / (1 - B2);
            if (k == ADAMW) pi *= 1 - LR * WD;
            pi -= LR * mh / (sqrt(vh) + EPS);
        }
        p[i] = (float)pi;
    }
}

typedef struct {
    int64_t grads;     /* kernels of forward + backward, gradients realized */
    int64_t step;      /* kernels of the whole step */
    int64_t given;     /* kernels of the update alone, the gradients realized */
    float *after[MAXP]; /* parameters after the step (malloc'ed) */
} result;

/* counts kernels three ways and checks the fused step's numbers against the
 * host update of the reference gradient */
static void run(bool transposed, bool bias, opt_kind k, result *r) {
    memset(r, 0, sizeof *r);
    model m;
    /* forward + backward alone */
    model_init(&m, transposed, bias, k);
    tc_tensor *loss = loss_of(&m), *ts[1 + MAXP] = {loss};
    for (int i = 0; i < m.n_p; i++) ts[1 + i] = tc_grad(m.p[i]);
    tc_counters c0;
    tc_get_counters(&c0);
    assert_int_equal(tc_realize(ts, 1 + m.n_p), TC_OK);
    r->grads = kernels_run(&c0);
    for (int i = 0; i < 1 + m.n_p; i++) tc_release(ts[i]);
    model_free(&m);
    /* the whole step, checked against the reference */
    model_init(&m, transposed, bias, k);
    loss = loss_of(&m);
    float *want[MAXP], *grad[MAXP];
    for (int i = 0; i < m.n_p; i++) {
        int64_t n = tc_numel(m.p[i]);
        tc_tensor *g = tc_grad(m.p[i]);
        grad[i] = malloc(sizeof(float) * (size_t)n);
        assert_int_equal(tc_ref_eval(tc_tensor_node(g), grad[i]), TC_OK);
        want[i] = tc_test_read(m.p[i]);
        host_update(k, want[i], grad[i], n);
        tc_release(g);
    }
    tc_get_counters(&c0);
    assert_int_equal(tc_optimizer_step_with(m.opt, &loss, 1), TC_OK);
    r->step = kernels_run(&c0);
    for (int i = 0; i < m.n_p; i++) {
        r->after[i] = tc_test_read(m.p[i]);
        assert_true(tc_allclose_f32(r->after[i], want[i], tc_numel(m.p[i]), 1e-4, 1e-5, "step vs reference"));
        /* the gradient the step used, stored by the step's kernels (no graph
         * left holding the forward's values, nothing recomputed from the
         * updated parameters when read) */
        tc_tensor *g = tc_grad(m.p[i]);
        assert_true(tc_is_realized(g));
        float *got = tc_test_read(g);
        assert_true(tc_allclose_f32(got, grad[i], tc_numel(m.p[i]), 1e-4, 1e-5, "gradient after the step"));
        free(got);
        tc_release(g);
        free(want[i]);
        free(grad[i]);
    }
    tc_release(loss);
    model_free(&m);
    /* the gradients realized first: the update alone */
    model_init(&m, transposed, bias, k);
    loss = loss_of(&m);
    ts[0] = loss;
    for (int i = 0; i < m.n_p; i++) ts[1 + i] = tc_grad(m.p[i]);
    assert_int_equal(tc_realize(ts, 1 + m.n_p), TC_OK);
    tc_get_counters(&c0);
    assert_int_equal(tc_optimizer_step(m.opt), TC_OK);
    r->given = kernels_run(&c0);
    for (int i = 0; i < 1 + m.n_p; i++) tc_release(ts[i]);
    model_free(&m);
}

static void free_result(result *r) {
    for (int i = 0; i < MAXP; i++) free(r->after[i]);
}

/* the step with fusion on and with TC_NOFUSE=1 give the same parameters */
static void same_as_nofuse(bool transposed, bool bias, opt_kind k, const result *fused) {
    tc_set_flag("TC_NOFUSE", 1);
    result plain;
    run(transposed, bias, k, &plain);
    tc_set_flag("TC_NOFUSE", 0);
    int64_t sizes[MAXP] = {IN * OUT, OUT};
    for (int i = 0; i < (bias ? 2 : 1); i++)
        assert_true(tc_allclose_f32(fused->after[i], plain.after[i], sizes[i], 1e-5, 1e-6, "fused vs TC_NOFUSE"));
    assert_true(plain.step > fused->step);
    free_result(&plain);
}

static void check(bool transposed, bool bias, opt_kind k, int64_t grads, int64_t extra, const char *what) {
    result r;
    run(transposed, bias, k, &r);
    int n_p = bias ? 2 : 1;
    int64_t given = (k == ADAM || k == ADAMW ? 1 : 0) + n_p; /* W and b differ in size */
    if (r.grads != grads || r.step != grads + extra || r.given != given)
        fprintf(stderr, "%s: forward+backward %lld (want %lld), step %lld (want %lld), update of given "
                "gradients %lld (want %lld)\n", what, (long long)r.grads, (long long)grads,
                (long long)r.step, (long long)(grads + extra), (long long)r.given, (long long)given);
    assert_int_equal(r.grads, grads);
    assert_int_equal(r.step, grads + extra);
    assert_int_equal(r.given, given);
    same_as_nofuse(transposed, bias, k, &r);
    free_result(&r);
    tc_shutdown();
}

/* forward + backward of y = x @ W.T (+ b), loss = mean(y^2):
 *   1 kernel: y (the matmul with the bias add), and dy = 2y/numel (read
 *     broadcast by dW's reduce: realized) as its second output (a reduce
 *     of 65 rows also stores what is computed from it per row, group.c);
 *   1 kernel: the loss (a full reduce of y^2);
 *   1 kernel: dW = dy.T @ x (with W's update); 1 kernel: db = dy.sum(0)
 *   (with b's update) */
static void test_sgd_linear(void **state) {
    (void)state;
    check(false, false, SGD, 3, 0, "SGD, linear, no bias");
    check(false, true, SGD, 4, 0, "SGD, linear with bias");
}

static void test_sgd_transposed(void **state) {
    (void)state;
    check(true, false, SGD, 3, 0, "SGD, x @ W (transposed gradient)");
    check(true, true, SGD, 4, 0, "SGD, x @ W + b");
}

static void test_sgd_momentum(void **state) {
    (void)state;
    check(false, true, MOMENTUM, 4, 0, "SGD momentum, linear");
    check(true, true, MOMENTUM, 4, 1, "SGD momentum, x @ W + b (buffer and W: their own kernel)");
}

/* Adam: the update adds only the kernel advancing b1^t and b2^t, not one per
 * parameter. The Linear layer's Adam step (forward, backward, update) is 4 + 1
 * = 5 kernels (tinygrad mid-2024: 9-10) */
static void test_adam(void **state) {
    (void)state;
    check(false, true, ADAM, 4, 1, "Adam, linear");
    check(true, true, ADAM, 4, 2, "Adam, x @ W + b (W's m, v and W: their own kernel)");
    check(true, false, ADAMW, 3, 2, "AdamW, x @ W");
}

/* runs one step of optimizer k over the parameters sizes[i] (elements),
 * their gradients (2*p) realized first, and returns the kernels it took;
 * every parameter is checked against the host update */
static int64_t foreach_step(opt_kind k, int n, const int64_t *sizes) {
    tc_tensor *p[32], *g[32];
    float *want[32];
    for (int i = 0; i < n; i++) {
        p[i] = tc_test_randn(1, &sizes[i], 10 + (uint64_t)i, -1, 1);
        assert_int_equal(tc_set_requires_grad(p[i], true), TC_OK);
        tc_tensor *sq = tc_mul(p[i], p[i]), *l = tc_sum(sq, 0, NULL, false);
        assert_int_equal(tc_backward(l), TC_OK);
        tc_release(sq), tc_release(l);
        g[i] = tc_grad(p[i]);
        want[i] = tc_test_read(p[i]);
        float *gv = tc_test_read(g[i]); /* realizes the gradient */
        host_update(k, want[i], gv, sizes[i]);
        free(gv);
    }
    tc_optimizer *o = k == ADAM ? tc_adam(p, n, LR, B1, B2, EPS) : tc_sgd(p, n, LR, MOM);
    assert_non_null(o);
    tc_counters c0;
    tc_get_counters(&c0);
    tc_status st = tc_optimizer_step(o);
    if (st != TC_OK) fprintf(stderr, "foreach step: %s\n", tc_last_error());
    assert_int_equal(st, TC_OK);
    int64_t kernels = kernels_run(&c0);
    for (int i = 0; i < n; i++) {
        float *got = tc_test_read(p[i]);
        assert_true(tc_allclose_f32(got, want[i], sizes[i], 1e-4, 1e-5, "foreach step vs reference"));
        free(got), free(want[i]);
        tc_release(g[i]), tc_release(p[i]);
    }
    tc_optimizer_free(o);
    return kernels;
}

/* The updates of parameters of one size share a kernel though they share no
 * input (PyTorch's foreach optimizers: one launch for many parameters), up
 * to 64 buffers a kernel. An Adam parameter is 4 of them (p, m and v written,
 * each read through its own output's slot, and g read) and every update
 * reads the 2 buffers of b1^t and b2^t, so 15 parameters fit: 4 of 256x128
 * are 1 kernel (+ the one advancing b1^t and b2^t), 20 are 2. SGD with
 * momentum puts one kernel per size: 6 parameters of 300 elements and 3 of
 * 7 are 2. */
static void test_foreach(void **state) {
    (void)state;
    int64_t same[20];
    for (int i = 0; i < 20; i++) same[i] = 256 * 128;
    assert_int_equal(foreach_step(ADAM, 4, same), 1 + 1);
    assert_int_equal(foreach_step(ADAM, 20, same), 2 + 1);
    int64_t mixed[9] = {300, 7, 300, 300, 7, 300, 7, 300, 300};
    assert_int_equal(foreach_step(MOMENTUM, 9, mixed), 2);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_foreach),
        cmocka_unit_test(test_sgd_linear),
        cmocka_unit_test(test_sgd_transposed),
        cmocka_unit_test(test_sgd_momentum),
        cmocka_unit_test(test_adam),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
