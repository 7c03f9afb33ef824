/* test_null.c - the NULL device: names and TC_DEVICE, buffers without memory
 * (copies in are dropped, copies out are zeros), kernels rendered exactly as
 * for the CPU but never compiled (tc_cpu_compile_count does not move) nor
 * run, launches counted as on the CPU, errors, and whole training steps
 * (eager, and replayed by a tc_jit) with the CPU's kernel counts.
 * The kernel cache lives in a fresh mkdtemp directory; the CPU runs of the
 * comparisons compile into it.
 */
#include "tc_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static char cachedir[] = "/tmp/tc_test_null_XXXXXX";

static int setup(void **state) {
    (void)state;
    if (!mkdtemp(cachedir)) return -1;
    setenv("TC_CACHEDIR", cachedir, 1);
    unsetenv("TC_DEVICE");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", cachedir);
    return system(cmd) == 0 ? 0 : -1;
}

static int shutdown_teardown(void **state) {
    (void)state;
    unsetenv("TC_DEVICE");
    tc_shutdown();
    return 0;
}
#define TEST(fn) cmocka_unit_test_teardown(fn, shutdown_teardown)

#define CHECK_T(t)                                                                     \
    do {                                                                               \
        if (!(t)) fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, tc_last_error()); \
        assert_non_null(t);                                                            \
    } while (0)
#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        tc_status s_ = (call);                                                                \
        if (s_ != TC_OK) fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, tc_last_error()); \
        assert_int_equal(s_, TC_OK);                                                          \
    } while (0)

/* ---- names ---------------------------------------------------------------- */

static void test_names(void **state) {
    (void)state;
    int id = tc_device_open("NULL", "test");
    assert_true(id > 0); /* 0 is always the CPU */
    assert_int_equal(tc_device_open("null", "test"), id);
    assert_int_equal(tc_device_open("Null:0", "test"), id);
    tc_dev *d = tc_device_get(id);
    assert_non_null(d);
    assert_string_equal(d->name, "NULL");
    assert_true(d->is_null);
    assert_false(tc_device_get(tc_device_open("CPU", "test"))->is_null);
    /* what codegen and the renderer see is the CPU's */
    tc_target cpu;
    assert_int_equal(tc_cpu_target(&cpu, NULL, 0), TC_OK);
    assert_ptr_equal(d->dialect, &tc_dialect_c);
    assert_memory_equal(&d->target, &cpu, sizeof cpu);
    assert_null(d->prebuild);
    setenv("TC_DEVICE", "NULL", 1);
    assert_int_equal(tc_device_open(NULL, "test"), id);
    tc_tensor *t = tc_zeros(1, SHAPE(4), TC_FLOAT32, NULL);
    CHECK_T(t);
    assert_string_equal(tc_device(t), "NULL");
    tc_release(t);
    unsetenv("TC_DEVICE");
    assert_int_equal(tc_device_open("NULL:1", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE,
                    "tc_zeros: device 'NULL:1' does not exist (there is only NULL:0)");
    assert_int_equal(tc_device_open("NULL:x", "tc_zeros"), -1);
    assert_tc_error(TC_ERR_DEVICE, "bad device name 'NULL:x' (expected CPU, OPENCL, CUDA or NULL");
}

/* ---- buffers -------------------------------------------------------------- */

static void test_buffers_have_no_memory(void **state) {
    (void)state;
    int id = tc_device_open("NULL", "test");
    int64_t used0, peak0, cached0;
    tc_runtime_mem(&used0, &peak0, &cached0);
    /* a terabyte: would fail on this machine if it reserved anything */
    size_t big = (size_t)1 << 40;
    tc_buffer *a = tc_buffer_new(id, big), *b = tc_buffer_new(id, 8);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(a->ptr);
    assert_true((char *)b->ptr >= (char *)a->ptr + big); /* distinct address ranges */
    int64_t used, peak, cached;
    tc_runtime_mem(&used, &peak, &cached);
    assert_int_equal(used - used0, (int64_t)big + 8); /* counted, as the CPU counts them */
    unsigned char in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    CHECK_OK(tc_buffer_copyin(b, 0, in, 8));
    memset(out, 0xAB, sizeof out);
    CHECK_OK(tc_buffer_copyout(b, 0, out, 8));
    for (int i = 0; i < 8; i++) assert_int_equal(out[i], 0);
    CHECK_OK(tc_buffer_copyout(a, big - 4, out, 4));
    /* bounds are checked as on every device */
    assert_int_equal(tc_buffer_copyout(b, 4, out, 8), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_buffer_copyout: range [4, 4 + 8) is outside the buffer");
    tc_buffer_release(a);
    tc_buffer_release(b);
}

/* data sent to NULL reads back as zeros, on the host and through a copy to
 * the CPU; data from the CPU copied to NULL too */
static void test_transfers_give_zeros(void **state) {
    (void)state;
    const float data[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *t = tc_from_data(data, TC_FLOAT32, 2, SHAPE(2, 3), "NULL");
    CHECK_T(t);
    float out[6];
    memset(out, 0x7f, sizeof out);
    CHECK_OK(tc_to_host(t, out, sizeof out));
    for (int i = 0; i < 6; i++) assert_true(out[i] == 0.0f);
    tc_tensor *on_cpu = tc_to_device(t, "CPU");
    CHECK_T(on_cpu);
    assert_string_equal(tc_device(on_cpu), "CPU");
    memset(out, 0x7f, sizeof out);
    CHECK_OK(tc_to_host(on_cpu, out, sizeof out));
    for (int i = 0; i < 6; i++) assert_true(out[i] == 0.0f);
    tc_tensor *c = tc_from_data(data, TC_FLOAT32, 2, SHAPE(2, 3), "CPU");
    tc_tensor *back = tc_to_device(c, "NULL");
    CHECK_T(back);
    memset(out, 0x7f, sizeof out);
    CHECK_OK(tc_to_host(back, out, sizeof out));
    for (int i = 0; i < 6; i++) assert_true(out[i] == 0.0f);
    tc_release(t), tc_release(on_cpu), tc_release(c), tc_release(back);
}

/* ---- kernels -------------------------------------------------------------- */

/* relu(x @ w + 1).sum(1) and softmax(x) on device: three or more kernels */
static void graph_on(const char *device, tc_tensor **out) {
    tc_manual_seed(7);
    tc_tensor *x = tc_rand(2, SHAPE(32, 48), TC_FLOAT32, device);
    tc_tensor *w = tc_randn(2, SHAPE(48, 16), TC_FLOAT32, device);
    tc_tensor *one = tc_full(0, NULL, 1.0, TC_FLOAT32, device);
    tc_tensor *mm = tc_matmul(x, w), *p = tc_add(mm, one), *r = tc_relu(p);
    int ax = 1;
    out[0] = tc_sum(r, 1, &ax, false);
    out[1] = tc_softmax(x, 1);
    CHECK_T(out[0]);
    CHECK_T(out[1]);
    tc_release(x), tc_release(w), tc_release(one), tc_release(mm), tc_release(p), tc_release(r);
}

/* realize on NULL: the kernels the schedule predicts are launched and
 * counted, lowered (the lowering cache gets them) and never compiled; the
 * results read back as zeros */
static void test_realize_counts_and_compiles_nothing(void **state) {
    (void)state;
    tc_tensor *out[2];
    graph_on("NULL", out);
    int predicted = tc_schedule_kernel_count(out, 2);
    assert_true(predicted >= 3);
    tc_counters c0, c1;
    tc_get_counters(&c0);
    int64_t cc0 = tc_cpu_compile_count();
    int cached0 = tc_lcache_size();
    CHECK_OK(tc_realize(out, 2));
    tc_get_counters(&c1);
    assert_int_equal(c1.kernel_count - c0.kernel_count, predicted);
    assert_true(c1.global_ops > c0.global_ops);
    assert_true(c1.global_mem > c0.global_mem);
    assert_int_equal(c1.compile_count - c0.compile_count, 0);
    assert_int_equal(tc_cpu_compile_count(), cc0);
    assert_true(tc_lcache_size() >= cached0 + predicted); /* every kernel was lowered */
    float sums[32];
    memset(sums, 0x7f, sizeof sums);
    CHECK_OK(tc_to_host(out[0], sums, sizeof sums));
    for (int i = 0; i < 32; i++) assert_true(sums[i] == 0.0f);
    tc_release(out[0]), tc_release(out[1]);
}

/* every kernel of the same graph is rendered to the same source on NULL as
 * on the CPU (same dialect, same target, same plan) */
static void test_same_source_as_cpu(void **state) {
    (void)state;
    tc_tensor *cpu_out[2], *null_out[2];
    graph_on("CPU", cpu_out);
    graph_on("NULL", null_out);
    tc_node *cn[2] = {cpu_out[0]->node, cpu_out[1]->node};
    tc_node *nn[2] = {null_out[0]->node, null_out[1]->node};
    tc_schedule *cs = tc_schedule_create(cn, 2), *ns = tc_schedule_create(nn, 2);
    assert_non_null(cs);
    assert_non_null(ns);
    assert_int_equal(cs->n_items, ns->n_items);
    tc_dev *cpu = tc_device_get(tc_device_open("CPU", "test"));
    tc_dev *null = tc_device_get(tc_device_open("NULL", "test"));
    int kernels = 0;
    for (int i = 0; i < cs->n_items; i++) {
        assert_int_equal(cs->items[i].is_copy, ns->items[i].is_copy);
        if (cs->items[i].is_copy) continue;
        tc_kopt cp, np;
        CHECK_OK(tc_beam_plan(cpu, &cs->items[i], &cp));
        CHECK_OK(tc_beam_plan(null, &ns->items[i], &np));
        tc_lowered cl, nl;
        CHECK_OK(tc_lcache_lower(cpu, &cs->items[i], &cp, &cl));
        CHECK_OK(tc_lcache_lower(null, &ns->items[i], &np, &nl));
        assert_string_equal(cl.name, nl.name);
        assert_string_equal(cl.src, nl.src);
        assert_int_equal(cl.dims.cpu_range, nl.dims.cpu_range);
        assert_int_equal(cl.est_ops, nl.est_ops);
        tc_free(cl.src), tc_free(nl.src);
        kernels++;
    }
    assert_true(kernels >= 3);
    tc_schedule_free(cs), tc_schedule_free(ns);
    for (int k = 0; k < 2; k++) tc_release(cpu_out[k]), tc_release(null_out[k]);
}

static void test_errors(void **state) {
    (void)state;
    tc_tensor *a = tc_zeros(1, SHAPE(4), TC_FLOAT32, "NULL");
    tc_tensor *b = tc_zeros(1, SHAPE(4), TC_FLOAT32, "CPU");
    CHECK_T(a);
    CHECK_T(b);
    assert_null(tc_add(a, b)); /* devices are not mixed silently */
    assert_tc_error(TC_ERR_DEVICE, "tc_add");
    float out[4];
    assert_int_equal(tc_to_host(a, out, 3 * sizeof(float)), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_to_host: nbytes is 12 but 4 elements of float32 need 16");
    assert_null(tc_reshape(a, 2, SHAPE(3, 2)));
    assert_tc_error(TC_ERR_SHAPE, "tc_reshape");
    tc_release(a), tc_release(b);
}

/* ---- training ------------------------------------------------------------- */

enum { LAYERS = 3, WIDTH = 32, BATCH = 8 };

typedef struct {
    tc_layer *layers[LAYERS];
    tc_optimizer *opt;
    const char *device;
    int jit_calls; /* times jit_step ran */
} mlp;

static void mlp_make(mlp *m, const char *device) {
    tc_manual_seed(3);
    m->device = device;
    m->jit_calls = 0;
    for (int i = 0; i < LAYERS; i++) {
        m->layers[i] = tc_nn_linear(WIDTH, WIDTH, true, device);
        CHECK_T(m->layers[i]);
    }
    tc_tensor *params[2 * LAYERS];
    assert_int_equal(tc_nn_parameters(m->layers, LAYERS, params, 2 * LAYERS), 2 * LAYERS);
    m->opt = tc_adam(params, 2 * LAYERS, 1e-3, 0.9, 0.999, 1e-8);
    CHECK_T(m->opt);
}

static void mlp_free(mlp *m) {
    tc_optimizer_free(m->opt);
    for (int i = 0; i < LAYERS; i++) tc_layer_free(m->layers[i]);
}

/* the loss (mean of squares) of x through the layers, tanh between them */
static tc_tensor *mlp_loss(mlp *m, tc_tensor *x) {
    tc_tensor *h = tc_retain(x);
    for (int i = 0; i < LAYERS; i++) {
        tc_tensor *y = tc_layer_forward(m->layers[i], h);
        tc_release(h);
        CHECK_T(y);
        h = tc_tanh(y);
        tc_release(y);
    }
    tc_tensor *sq = tc_square(h), *loss = tc_mean(sq, 0, NULL, false);
    tc_release(h), tc_release(sq);
    CHECK_T(loss);
    return loss;
}

/* one eager step: zero_grad, loss, backward, Adam with the loss; returns the
 * kernels it launched */
static int64_t mlp_step(mlp *m, float *loss_value) {
    tc_counters c0, c1;
    tc_get_counters(&c0);
    CHECK_OK(tc_optimizer_zero_grad(m->opt));
    tc_tensor *x = tc_rand(2, SHAPE(BATCH, WIDTH), TC_FLOAT32, m->device);
    tc_tensor *loss = mlp_loss(m, x);
    CHECK_OK(tc_backward(loss));
    CHECK_OK(tc_optimizer_step_with(m->opt, &loss, 1));
    tc_get_counters(&c1);
    CHECK_OK(tc_to_host(loss, loss_value, sizeof *loss_value));
    tc_release(x), tc_release(loss);
    return c1.kernel_count - c0.kernel_count;
}

/* the same steps on the CPU and on NULL launch the same kernels; on NULL
 * nothing is compiled and the loss reads back as 0 */
static void test_training_step(void **state) {
    (void)state;
    mlp cpu, null;
    int64_t cpu_k[3], null_k[3];
    float loss;
    mlp_make(&cpu, "CPU");
    for (int s = 0; s < 3; s++) {
        cpu_k[s] = mlp_step(&cpu, &loss);
        assert_true(loss > 0.0f);
    }
    mlp_free(&cpu);
    int64_t cc0 = tc_cpu_compile_count();
    mlp_make(&null, "NULL");
    for (int s = 0; s < 3; s++) {
        loss = -1.0f;
        null_k[s] = mlp_step(&null, &loss);
        assert_true(loss == 0.0f);
        assert_int_equal(null_k[s], cpu_k[s]);
    }
    assert_true(null_k[1] > 2 * LAYERS); /* forward, backward and update kernels */
    assert_int_equal(tc_cpu_compile_count(), cc0);
    mlp_free(&null);
}

/* a jit step: inputs[0] is x; outputs[0] the loss (the update is realized
 * with it) */
static tc_status jit_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    mlp *m = user;
    m->jit_calls++;
    tc_status st = tc_optimizer_zero_grad(m->opt);
    tc_tensor *loss = st == TC_OK ? mlp_loss(m, in[0]) : NULL;
    if (loss && (st = tc_backward(loss)) == TC_OK) st = tc_optimizer_step_with(m->opt, &loss, 1);
    out[0] = loss;
    return loss ? st : tc_last_status();
}

/* a tc_jit captures and replays the step on NULL: a replay launches (and
 * counts) the captured kernels without running the step, with nothing
 * compiled */
static void test_jit_replay(void **state) {
    (void)state;
    mlp m;
    mlp_make(&m, "NULL");
    tc_jit *j = tc_jit_new(jit_step, &m);
    CHECK_T(j);
    int64_t cc0 = tc_cpu_compile_count();
    for (int it = 0; it < 4; it++) {
        tc_tensor *x = tc_rand(2, SHAPE(BATCH, WIDTH), TC_FLOAT32, "NULL"), *out[1];
        CHECK_OK(tc_realize(&x, 1));
        tc_counters c0, c1;
        tc_get_counters(&c0);
        CHECK_OK(tc_jit_run(j, &x, 1, out, 1));
        tc_get_counters(&c1);
        assert_int_equal(m.jit_calls, it < 2 ? it + 1 : 2); /* warm-up, capture, replays */
        if (it >= 2) {
            assert_true(tc_jit_kernel_count(j) > 2 * LAYERS);
            assert_int_equal(c1.kernel_count - c0.kernel_count, tc_jit_kernel_count(j));
        }
        float loss = -1.0f;
        CHECK_OK(tc_to_host(out[0], &loss, sizeof loss));
        assert_true(loss == 0.0f);
        tc_release(x), tc_release(out[0]);
    }
    assert_int_equal(tc_cpu_compile_count(), cc0);
    tc_jit_free(j);
    mlp_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_names),
        TEST(test_buffers_have_no_memory),
        TEST(test_transfers_give_zeros),
        TEST(test_realize_counts_and_compiles_nothing),
        TEST(test_same_source_as_cpu),
        TEST(test_errors),
        TEST(test_training_step),
        TEST(test_jit_replay),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
