/* test_scache.c - the schedule cache (src/engine/scache.c): a realize of a
 * graph with the structure of one realized before runs the cached plan (the
 * engine's counters show no scheduling, lowering or compiling), anything the
 * schedule depends on that changes (shape, dtype, constant, view, storage
 * sharing, creation order, requested outputs, TC_NOFUSE) makes a new plan,
 * and every result matches the reference evaluator, over several steps of
 * an Adam training loop too. Also: the bounds (LRU), tc_shutdown, a device
 * opened again, and out of memory on the cached path. */
#include "tc_test.h"

#include "engine/engine.h"
#include "tensor/tensor.h"
#include "util/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static tc_engine_stats stats_now(void) {
    tc_engine_stats s;
    tc_engine_get_stats(&s);
    return s;
}

static tc_tensor *input(int64_t rows, int64_t cols, uint64_t seed) {
    int64_t shape[2] = {rows, cols};
    return tc_test_randn(2, shape, seed, -1, 1);
}

/* realizes t (counters reset first) and checks it against the reference
 * evaluator; returns the engine's counters for that realize */
static tc_engine_stats realize_checked(tc_tensor *t, const char *what) {
    size_t nbytes = (size_t)tc_numel(t) * tc_dtype_size(tc_get_dtype(t));
    void *want = malloc(nbytes ? nbytes : 1);
    assert_non_null(want);
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), want), TC_OK);
    tc_reset_counters();
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    tc_engine_stats s = stats_now();
    void *got = tc_test_read(t);
    assert_true(tc_allclose(got, want, tc_get_dtype(t), tc_numel(t), 1e-5, 1e-6, what));
    free(got);
    free(want);
    return s;
}

typedef tc_tensor *(*graph_fn)(tc_tensor *a, tc_tensor *b, double c);

/* relu(a * b.T + c).sum(1) - a reduce over an elementwise chain with a view */
static tc_tensor *g_base(tc_tensor *a, tc_tensor *b, double c) {
    int ax = 1;
    tc_tensor *bt = tc_transpose(b, 0, 1), *ab = tc_mul(a, bt);
    tc_tensor *k = tc_full(0, NULL, c, tc_get_dtype(a), NULL), *s = tc_add(ab, k), *r = tc_relu(s);
    tc_tensor *out = tc_sum(r, 1, &ax, false);
    tc_release(bt), tc_release(ab), tc_release(k), tc_release(s), tc_release(r);
    return out;
}

/* the same with b read unpermuted (another view) */
static tc_tensor *g_view(tc_tensor *a, tc_tensor *b, double c) {
    int ax = 1;
    tc_tensor *ab = tc_mul(a, b), *k = tc_full(0, NULL, c, tc_get_dtype(a), NULL);
    tc_tensor *s = tc_add(ab, k), *r = tc_relu(s), *out = tc_sum(r, 1, &ax, false);
    tc_release(ab), tc_release(k), tc_release(s), tc_release(r);
    return out;
}

/* one run of graph f over fresh square inputs of side n (dtype dt) */
static tc_engine_stats run_graph(graph_fn f, int64_t n, tc_dtype dt, double c, uint64_t seed,
                                 const char *what) {
    tc_tensor *a0 = input(n, n, seed), *b0 = input(n, n, seed + 1);
    tc_tensor *a = tc_cast(a0, dt), *b = tc_cast(b0, dt), *ab[2] = {a, b};
    assert_int_equal(tc_realize(ab, 2), TC_OK);
    tc_tensor *out = f(a, b, c);
    tc_engine_stats s = realize_checked(out, what);
    tc_release(a0), tc_release(b0), tc_release(a), tc_release(b), tc_release(out);
    return s;
}

static void assert_reused(tc_engine_stats s) {
    assert_int_equal(s.plan_hits, 1);
    assert_int_equal(s.plan_misses, 0);
    assert_int_equal(s.schedules_made, 0);
    assert_int_equal(s.items_lowered, 0);
    tc_counters c;
    tc_get_counters(&c);
    assert_int_equal(c.compile_count, 0);
}

static void assert_rescheduled(tc_engine_stats s) {
    assert_int_equal(s.plan_hits, 0);
    assert_int_equal(s.plan_misses, 1);
    assert_int_equal(s.schedules_made, 1);
}

/* the second realize of a structure (new buffers, new values) schedules,
 * lowers and compiles nothing, and is right */
static void test_same_structure_reuses(void **state) {
    (void)state;
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, 0.25, 1, "first"));
    for (uint64_t seed = 10; seed < 40; seed += 10)
        assert_reused(run_graph(g_base, 12, TC_FLOAT32, 0.25, seed, "again"));
    tc_shutdown();
}

/* what the schedule depends on changes: a new plan, still right; the old
 * structure still hits afterwards */
static void test_changes_reschedule(void **state) {
    (void)state;
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, 0.25, 1, "base"));
    assert_rescheduled(run_graph(g_base, 13, TC_FLOAT32, 0.25, 2, "shape"));
    assert_rescheduled(run_graph(g_base, 12, TC_INT32, 0.25, 3, "dtype"));
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, -0.5, 4, "constant"));
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, 0.0, 4, "constant 0"));
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, -0.0, 4, "constant -0 (other bits)"));
    assert_rescheduled(run_graph(g_view, 12, TC_FLOAT32, 0.25, 5, "view"));
    tc_set_flag("TC_NOFUSE", 1);
    assert_rescheduled(run_graph(g_base, 12, TC_FLOAT32, 0.25, 6, "TC_NOFUSE"));
    tc_set_flag("TC_NOFUSE", 0);
    assert_reused(run_graph(g_base, 12, TC_FLOAT32, 0.25, 7, "base again"));
    assert_reused(run_graph(g_view, 12, TC_FLOAT32, 0.25, 8, "view again"));
    tc_shutdown();
}

/* a*2 + b over two BUFFER nodes: distinct storage, or one buffer seen by
 * two nodes (an assign's old and new node): the key tells them apart */
static tc_status run_aliasing(bool is_shared, float *out) {
    float a[8], b[8];
    for (int i = 0; i < 8; i++) a[i] = (float)i, b[i] = (float)(10 * i);
    int64_t shape[1] = {8};
    int cpu = tc_device_open("CPU", "test");
    tc_node *na = tc_engine_from_host(a, TC_FLOAT32, 1, shape, cpu);
    tc_node *nb = is_shared ? tc_node_buffer(na->buffer, TC_FLOAT32, 1, shape)
                            : tc_engine_from_host(b, TC_FLOAT32, 1, shape, cpu);
    tc_node *two = tc_node_const(2.0, TC_FLOAT32, cpu, 1, shape);
    tc_node *m = tc_node_alu(TC_OP_MUL, TC_FLOAT32, 2, (tc_node *[]){na, two});
    tc_node *s = tc_node_alu(TC_OP_ADD, TC_FLOAT32, 2, (tc_node *[]){m, nb});
    assert_ptr_not_equal(na, nb);
    tc_status st = tc_engine_realize(&s, 1, "test");
    if (st == TC_OK) st = tc_buffer_copyout(s->buffer, 0, out, sizeof(float) * 8);
    tc_node_release(na), tc_node_release(nb), tc_node_release(two), tc_node_release(m);
    tc_node_release(s);
    return st;
}

static void test_storage_sharing_reschedules(void **state) {
    (void)state;
    float out[8];
    for (int k = 0; k < 2; k++) {
        tc_reset_counters();
        assert_int_equal(run_aliasing(false, out), TC_OK);
        assert_int_equal(stats_now().plan_hits, k); /* the second one reuses */
        for (int i = 0; i < 8; i++) assert_true(out[i] == 12.0f * (float)i);
    }
    tc_reset_counters();
    assert_int_equal(run_aliasing(true, out), TC_OK);
    assert_rescheduled(stats_now());
    for (int i = 0; i < 8; i++) assert_true(out[i] == 3.0f * (float)i);
    tc_shutdown();
}

/* two reduces built in the other order: the scheduler orders reduces and a
 * kernel's outputs by creation, so the key holds the order */
static tc_engine_stats run_order(bool is_swapped, uint64_t seed) {
    tc_tensor *a = input(6, 9, seed), *b = input(6, 9, seed + 1);
    int ax0 = 0, ax1 = 1;
    tc_tensor *ra = NULL, *rb = NULL;
    if (!is_swapped) ra = tc_sum(a, 1, &ax1, true), rb = tc_sum(b, 1, &ax0, true);
    else rb = tc_sum(b, 1, &ax0, true), ra = tc_sum(a, 1, &ax1, true);
    tc_tensor *out = tc_add(ra, rb); /* (6,1) + (1,9) */
    tc_engine_stats s = realize_checked(out, is_swapped ? "swapped" : "in order");
    tc_release(a), tc_release(b), tc_release(ra), tc_release(rb), tc_release(out);
    return s;
}

static void test_creation_order_reschedules(void **state) {
    (void)state;
    assert_rescheduled(run_order(false, 1));
    assert_reused(run_order(false, 3));
    assert_rescheduled(run_order(true, 5));
    assert_reused(run_order(true, 7));
    tc_shutdown();
}

/* realizing {y} and {y, z} over one graph: two plans */
static void test_requested_outputs(void **state) {
    (void)state;
    for (int k = 0; k < 4; k++) {
        tc_tensor *x = input(5, 7, (uint64_t)k + 1);
        int ax = 1;
        tc_tensor *y = tc_exp(x), *z = tc_sum(y, 1, &ax, false), *both[2] = {z, y};
        tc_reset_counters();
        assert_int_equal(tc_realize(both, k < 2 ? 1 : 2), TC_OK);
        tc_engine_stats s = stats_now();
        assert_int_equal(s.plan_hits, k == 1 || k == 3); /* each shape's second realize */
        assert_int_equal(tc_is_realized(y), k >= 2);
        tc_release(x), tc_release(y), tc_release(z);
    }
    tc_shutdown();
}

/* ---- an Adam training loop: every step against the reference ----
 * Linear(8,16), tanh, Linear(16,4), loss mean(square(h)), batch 6, Adam.
 * Before each step the gradients and the loss are evaluated by tc_ref_eval;
 * the update is then done on the host (Adam's formula in double) and the
 * step's realized parameters must match it. From the second step on, the
 * step's realize runs the cached plan. */
enum { N_PARAMS = 4 };

typedef struct {
    tc_layer *l1, *l2;
    tc_tensor *params[N_PARAMS];
    tc_optimizer *opt;
    double *m[N_PARAMS], *v[N_PARAMS]; /* the host's Adam state */
} mlp;

static float *ref_of(tc_tensor *t) {
    float *out = malloc(sizeof(float) * (size_t)tc_numel(t));
    assert_non_null(out);
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), out), TC_OK);
    return out;
}

static tc_tensor *forward_loss(mlp *net, tc_tensor *x) {
    tc_tensor *h1 = tc_layer_forward(net->l1, x), *t = tc_tanh(h1);
    tc_tensor *h2 = tc_layer_forward(net->l2, t), *sq = tc_square(h2);
    tc_tensor *loss = tc_mean(sq, 0, NULL, false);
    tc_release(h1), tc_release(t), tc_release(h2), tc_release(sq);
    assert_non_null(loss);
    return loss;
}

/* the host's Adam step on p (n values) with gradient g, step t */
static void host_adam(double *m, double *v, float *p, const float *g, int64_t n, int t) {
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int64_t i = 0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
        double step = lr / (1 - pow(b1, t)) * m[i] / (sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps);
        p[i] = (float)((double)p[i] - step);
    }
}

static void train_step(mlp *net, int t) {
    tc_tensor *x = input(6, 8, (uint64_t)(100 + t));
    assert_int_equal(tc_optimizer_zero_grad(net->opt), TC_OK);
    tc_tensor *loss = forward_loss(net, x);
    assert_int_equal(tc_backward(loss), TC_OK);
    float *want_loss = ref_of(loss), *want[N_PARAMS];
    for (int i = 0; i < N_PARAMS; i++) {
        tc_tensor *g = tc_grad(net->params[i]);
        float *grad = ref_of(g);
        want[i] = tc_test_read(net->params[i]); /* realized: the old values */
        host_adam(net->m[i], net->v[i], want[i], grad, tc_numel(g), t);
        free(grad);
        tc_release(g);
    }
    tc_reset_counters();
    assert_int_equal(tc_optimizer_step_with(net->opt, &loss, 1), TC_OK);
    tc_engine_stats s = stats_now();
    if (t > 1) assert_reused(s);
    else assert_true(s.plan_misses >= 1);
    float *got_loss = tc_test_read(loss);
    assert_true(tc_allclose_f32(got_loss, want_loss, 1, 1e-5, 1e-6, "loss"));
    for (int i = 0; i < N_PARAMS; i++) {
        float *got = tc_test_read(net->params[i]);
        assert_true(tc_allclose_f32(got, want[i], tc_numel(net->params[i]), 1e-4, 1e-5, "param"));
        free(got);
        free(want[i]);
    }
    free(got_loss), free(want_loss);
    tc_release(loss), tc_release(x);
}

static void test_adam_training_loop(void **state) {
    (void)state;
    tc_manual_seed(3);
    mlp net = {.l1 = tc_nn_linear(8, 16, true, NULL), .l2 = tc_nn_linear(16, 4, true, NULL)};
    tc_layer *layers[2] = {net.l1, net.l2};
    assert_int_equal(tc_nn_parameters(layers, 2, net.params, N_PARAMS), N_PARAMS);
    net.opt = tc_adam(net.params, N_PARAMS, 1e-2, 0.9, 0.999, 1e-8);
    assert_non_null(net.opt);
    for (int i = 0; i < N_PARAMS; i++) {
        net.m[i] = calloc((size_t)tc_numel(net.params[i]), sizeof(double));
        net.v[i] = calloc((size_t)tc_numel(net.params[i]), sizeof(double));
    }
    for (int t = 1; t <= 5; t++) train_step(&net, t);
    for (int i = 0; i < N_PARAMS; i++) free(net.m[i]), free(net.v[i]);
    tc_optimizer_free(net.opt);
    tc_layer_free(net.l1), tc_layer_free(net.l2);
    tc_shutdown();
}

/* ---- bounds, shutdown, devices, out of memory ---- */

static void test_bounds(void **state) {
    (void)state;
    tc_scache_limit(2, 0);
    assert_rescheduled(run_graph(g_base, 5, TC_FLOAT32, 1, 1, "A"));
    assert_rescheduled(run_graph(g_base, 6, TC_FLOAT32, 1, 2, "B"));
    assert_reused(run_graph(g_base, 5, TC_FLOAT32, 1, 3, "A: the most recent now"));
    assert_rescheduled(run_graph(g_base, 7, TC_FLOAT32, 1, 4, "C: B goes"));
    assert_int_equal(tc_scache_size(), 2);
    assert_reused(run_graph(g_base, 5, TC_FLOAT32, 1, 5, "A kept"));
    assert_rescheduled(run_graph(g_base, 6, TC_FLOAT32, 1, 6, "B was dropped"));
    tc_scache_limit(0, 1); /* one byte: no plan fits */
    assert_int_equal(tc_scache_size(), 0);
    assert_rescheduled(run_graph(g_base, 5, TC_FLOAT32, 1, 7, "nothing kept"));
    assert_rescheduled(run_graph(g_base, 5, TC_FLOAT32, 1, 8, "still nothing"));
    assert_int_equal(tc_scache_size(), 0);
    tc_scache_limit(0, 0);
    tc_shutdown();
    assert_int_equal(tc_scache_size(), 0);
}

/* the devices closed and opened again: the plan's programs are gone, so it
 * is dropped and a new one made */
static void test_device_reopened(void **state) {
    (void)state;
    assert_rescheduled(run_graph(g_base, 9, TC_FLOAT32, 1, 1, "first"));
    assert_reused(run_graph(g_base, 9, TC_FLOAT32, 1, 2, "second"));
    tc_runtime_shutdown();                 /* no buffer lives: allowed */
    assert_int_equal(tc_scache_size(), 1); /* the stale plan is still there */
    assert_rescheduled(run_graph(g_base, 9, TC_FLOAT32, 1, 3, "after the devices closed"));
    assert_reused(run_graph(g_base, 9, TC_FLOAT32, 1, 4, "and again"));
    tc_shutdown();
}

/* every allocation of a realize on the cached path fails in turn: an error
 * (TC_ERR_MEMORY) that leaks no node and keeps the plan, or success; either
 * way the values are right */
static void test_out_of_memory_on_hit(void **state) {
    (void)state;
    assert_rescheduled(run_graph(g_base, 8, TC_FLOAT32, 1, 1, "cached"));
    int64_t live = tc_graph_live_nodes();
    for (int n = 1; n < 200; n++) {
        tc_tensor *a = input(8, 8, 2), *b = input(8, 8, 3), *out = g_base(a, b, 1);
        float want[8];
        assert_int_equal(tc_ref_eval(tc_tensor_node(out), want), TC_OK);
        tc_reset_counters();
        tc_mem_fail_after(n);
        tc_status st = tc_realize(&out, 1);
        tc_mem_fail_after(0);
        if (st != TC_OK) {
            assert_int_equal(st, TC_ERR_MEMORY);
            tc_reset_counters();
            assert_int_equal(tc_realize(&out, 1), TC_OK);
        }
        assert_int_equal(stats_now().plan_hits, 1); /* the failed realize kept the plan */
        float *got = tc_test_read(out);
        assert_true(tc_allclose_f32(got, want, 8, 1e-5, 1e-6, "after a failed allocation"));
        free(got);
        tc_release(a), tc_release(b), tc_release(out);
        assert_int_equal(tc_graph_live_nodes(), live);
        if (st == TC_OK) {
            tc_shutdown();
            return;
        }
    }
    fail_msg("the realize never succeeded");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_structure_reuses),
        cmocka_unit_test(test_changes_reschedule),
        cmocka_unit_test(test_storage_sharing_reschedules),
        cmocka_unit_test(test_creation_order_reschedules),
        cmocka_unit_test(test_requested_outputs),
        cmocka_unit_test(test_adam_training_loop),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_device_reopened),
        cmocka_unit_test(test_out_of_memory_on_hit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
