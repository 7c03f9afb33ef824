/* test_library.c - the library calls (version, status strings, dtype facts,
 * flags, thread-local errors), tensor properties, handle reference counting,
 * running (realize, to_host, kernel counts, to_device, counters) and calls
 * from several threads at once. Public API only. */
#include <math.h>
#include <pthread.h>

#include "api_helpers.h"

static void test_version(void **state) {
    (void)state;
    int major = -1, minor = -1, patch = -1;
    const char *v = tc_version();
    assert_non_null(v);
    assert_int_equal(sscanf(v, "%d.%d.%d", &major, &minor, &patch), 3);
    assert_true(major >= 0 && minor >= 0 && patch >= 0);
}

static void test_status_string(void **state) {
    (void)state;
    static const char *const names[] = {
        "TC_OK",         "TC_ERR_INVALID", "TC_ERR_SHAPE",   "TC_ERR_DTYPE", "TC_ERR_DEVICE",
        "TC_ERR_MEMORY", "TC_ERR_COMPILE", "TC_ERR_RUNTIME", "TC_ERR_IO",    "TC_ERR_INTERNAL",
    };
    for (int s = 0; s < TC_ERR_COUNT; s++) assert_string_equal(tc_status_string(s), names[s]);
    assert_string_equal(tc_status_string(TC_ERR_COUNT), "unknown status");
    assert_string_equal(tc_status_string(-1), "unknown status");
    assert_string_equal(tc_status_string(1000), "unknown status");
}

static void test_dtype_facts(void **state) {
    (void)state;
    static const struct {
        tc_dtype dt;
        size_t size;
        const char *name;
    } table[] = {
        {TC_FLOAT32, 4, "float32"}, {TC_FLOAT16, 2, "float16"}, {TC_INT32, 4, "int32"},
        {TC_INT64, 8, "int64"},     {TC_UINT8, 1, "uint8"},     {TC_BOOL, 1, "bool"},
    };
    for (int i = 0; i < (int)COUNT(table); i++) {
        assert_int_equal(tc_dtype_size(table[i].dt), table[i].size);
        assert_string_equal(tc_dtype_name(table[i].dt), table[i].name);
    }
    assert_int_equal(tc_dtype_size(TC_DTYPE_COUNT), 0);
    assert_int_equal(tc_dtype_size((tc_dtype)-1), 0);
    assert_int_equal(tc_dtype_size((tc_dtype)99), 0);
    assert_string_equal(tc_dtype_name((tc_dtype)99), "unknown");
}

static void test_flags(void **state) {
    (void)state;
    assert_int_equal(tc_set_flag("TC_BEAM", 3), TC_OK);
    assert_int_equal(tc_get_flag("TC_BEAM"), 3);
    assert_int_equal(tc_set_flag("TC_NOOPT", 1), TC_OK);
    assert_int_equal(tc_get_flag("TC_NOOPT"), 1);
    assert_int_equal(tc_set_flag("TC_NOOPT", 0), TC_OK);
    assert_int_equal(tc_get_flag("TC_NOOPT"), 0);
    assert_true(tc_get_flag("TC_DEBUG") >= 0);
    assert_true(tc_get_flag("TC_NOFUSE") >= 0);

    assert_int_equal(tc_set_flag("TC_NOPE", 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_set_flag: unknown flag 'TC_NOPE'");
    assert_int_equal(tc_get_flag("TC_NOPE"), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_get_flag: unknown flag 'TC_NOPE'");
    assert_int_equal(tc_get_flag(NULL), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_get_flag");
    assert_int_equal(tc_set_flag(NULL, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_set_flag");
    assert_int_equal(tc_set_flag("TC_BEAM", -2), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_set_flag: TC_BEAM must be >= 0, got -2");
    assert_int_equal(tc_get_flag("TC_BEAM"), 3); /* the failed call changed nothing */
    /* names are exact, as in the environment */
    assert_int_equal(tc_get_flag("tc_beam"), -1);
}

static void *fresh_thread_error(void *arg) {
    const char **msg = arg;
    msg[0] = tc_last_error();
    msg[1] = tc_last_status() == TC_OK ? "ok" : "not ok";
    return NULL;
}

static void test_errors_are_thread_local(void **state) {
    (void)state;
    assert_null(tc_reshape(NULL, 0, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_reshape: tensor a is NULL");
    const char *msg[2] = {NULL, NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, fresh_thread_error, msg), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_non_null(msg[0]);
    assert_string_equal(msg[0], ""); /* a thread that never failed has no message */
    assert_string_equal(msg[1], "ok");
    /* this thread's error is still there */
    assert_tc_error(TC_ERR_INVALID, "tc_reshape: tensor a is NULL");
}

static void test_properties(void **state) {
    (void)state;
    float data[6] = {1, 2, 3, 4, 5, 6};
    tc_tensor *a = f32(2, SHAPE(2, 3), data);
    check_meta(a, TC_FLOAT32, 2, SHAPE(2, 3));
    assert_int_equal(tc_numel(a), 6);
    assert_string_equal(tc_device(a), "CPU");
    assert_true(tc_is_realized(a));

    tc_tensor *c = tc_full(1, SHAPE(4), 1.0, TC_INT64, "cpu");
    check_meta(c, TC_INT64, 1, SHAPE(4));
    assert_false(tc_is_realized(c)); /* a constant has no buffer */
    assert_string_equal(tc_device(c), "CPU");

    tc_tensor *s = tc_add(a, a);
    assert_false(tc_is_realized(s));
    assert_int_equal(tc_realize(&s, 1), TC_OK);
    assert_true(tc_is_realized(s));

    tc_tensor *z = scalar(2.0, TC_FLOAT32);
    assert_int_equal(tc_ndim(z), 0);
    assert_int_equal(tc_numel(z), 1);
    assert_non_null(tc_shape(z));

    tc_tensor *e = tc_zeros(3, SHAPE(2, 0, 5), TC_UINT8, NULL);
    assert_int_equal(tc_numel(e), 0);
    tc_release(a);
    tc_release(c);
    tc_release(s);
    tc_release(z);
    tc_release(e);
}

static void test_properties_of_null(void **state) {
    (void)state;
    assert_int_equal(tc_ndim(NULL), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_ndim");
    assert_int_equal(tc_numel(NULL), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_numel");
    assert_null(tc_shape(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_shape");
    assert_int_equal(tc_get_dtype(NULL), TC_DTYPE_COUNT);
    assert_tc_error(TC_ERR_INVALID, "tc_get_dtype");
    assert_null(tc_device(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_device");
    assert_false(tc_is_realized(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_is_realized");
}

static void test_retain_release(void **state) {
    (void)state;
    tc_tensor *a = tc_ones(1, SHAPE(3), TC_FLOAT32, NULL);
    assert_ptr_equal(tc_retain(a), a);
    tc_release(a); /* one reference left */
    assert_int_equal(tc_numel(a), 3);
    tc_tensor *b = tc_mul(a, a);
    tc_release(a); /* b keeps what it needs */
    float want[3] = {1, 1, 1};
    expect_f32(b, want, 3, 0, 0, "ones*ones after releasing ones");
    tc_release(NULL);
    assert_null(tc_retain(NULL));
}

static void test_realize_and_to_host(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
    tc_tensor *a = f32(1, SHAPE(4), x), *b = f32(1, SHAPE(4), y);
    tc_tensor *ts[2] = {tc_add(a, b), tc_mul(a, b)};
    assert_int_equal(tc_realize(ts, 2), TC_OK);
    assert_true(tc_is_realized(ts[0]) && tc_is_realized(ts[1]));
    assert_int_equal(tc_realize(ts, 2), TC_OK); /* again: nothing to do */
    assert_int_equal(tc_realize(NULL, 0), TC_OK);
    float sum[4] = {11, 22, 33, 44}, prod[4] = {10, 40, 90, 160};
    expect_f32(ts[0], sum, 4, 0, 0, "a+b");
    expect_f32(ts[1], prod, 4, 0, 0, "a*b");

    /* to_host realizes on its own; an empty tensor reads zero bytes */
    tc_tensor *e = tc_zeros(2, SHAPE(0, 3), TC_FLOAT32, NULL);
    assert_int_equal(tc_to_host(e, NULL, 0), TC_OK);
    tc_release(e);
    tc_release(a);
    tc_release(b);
}

static void test_kernel_count_and_counters(void **state) {
    (void)state;
    float x[4] = {1, 2, 3, 4};
    tc_tensor *a = f32(1, SHAPE(4), x);
    assert_int_equal(tc_schedule_kernel_count(&a, 1), 0); /* already a buffer */
    assert_int_equal(tc_schedule_kernel_count(NULL, 0), 0);
    tc_tensor *s = tc_add(a, a);
    /* one elementwise op over one buffer: exactly one kernel */
    assert_int_equal(tc_schedule_kernel_count(&s, 1), 1);
    tc_reset_counters();
    tc_counters c;
    tc_get_counters(&c);
    assert_int_equal(c.kernel_count, 0);
    assert_int_equal(tc_realize(&s, 1), TC_OK);
    tc_get_counters(&c);
    assert_int_equal(c.kernel_count, 1);
    assert_int_equal(tc_schedule_kernel_count(&s, 1), 0);
    tc_reset_counters();
    tc_get_counters(&c);
    assert_int_equal(c.kernel_count, 0);
    tc_get_counters(NULL); /* an error, and nothing else */
    assert_int_equal(tc_last_status(), TC_ERR_INVALID);
    assert_string_equal(tc_last_error(), "tc_get_counters: out is NULL");
    tc_release(a);
    tc_release(s);
}

static void test_to_device(void **state) {
    (void)state;
    float x[3] = {1, 2, 3};
    tc_tensor *a = f32(1, SHAPE(3), x);
    tc_tensor *b = tc_to_device(a, "CPU");
    tc_tensor *c = tc_to_device(a, NULL);
    tc_tensor *d = tc_to_device(a, "cpu:0");
    assert_non_null(b);
    assert_non_null(c);
    assert_non_null(d);
    assert_true(tc_is_realized(b)); /* same device: the same buffer, no copy */
    assert_string_equal(tc_device(d), "CPU");
    expect_f32(b, x, 3, 0, 0, "to CPU");
    expect_f32(c, x, 3, 0, 0, "to default");
    expect_f32(d, x, 3, 0, 0, "to cpu:0");

    assert_null(tc_to_device(a, "TPU"));
    assert_tc_error(TC_ERR_DEVICE, "tc_to_device");
    assert_null(tc_to_device(NULL, "CPU"));
    assert_tc_error(TC_ERR_INVALID, "tc_to_device: tensor t is NULL");
    tc_release(a);
}

/* a second device, when this build has one: a COPY there and back */
static void test_to_other_device(void **state) {
    (void)state;
    float x[3] = {1, 2, 3};
    tc_tensor *a = f32(1, SHAPE(3), x);
    static const char *const others[] = {"OPENCL", "CUDA"};
    bool is_tested = false;
    for (int i = 0; i < 2 && !is_tested; i++) {
        tc_tensor *o = tc_to_device(a, others[i]);
        if (!o) {
            assert_tc_error(TC_ERR_DEVICE, "tc_to_device");
            continue;
        }
        is_tested = true;
        assert_string_equal(tc_device(o), others[i]);
        tc_tensor *bad = tc_add(a, o);
        assert_null(bad);
        assert_tc_error(TC_ERR_DEVICE, "tc_add: a is on CPU but b is on");
        tc_tensor *back = tc_to_device(o, "CPU");
        expect_f32(back, x, 3, 0, 0, "round trip through a device");
        tc_release(o);
    }
    tc_release(a);
    if (!is_tested) skip();
}

/* several threads build, realize and read graphs at once (one lock at entry) */
static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int it = 0; it < 20; it++) {
        float x[8];
        for (int i = 0; i < 8; i++) x[i] = (float)(id * 100 + it + i);
        tc_tensor *a = tc_from_data(x, TC_FLOAT32, 1, SHAPE(8), NULL);
        tc_tensor *b = tc_mul(a, a);
        tc_tensor *s = tc_sum(b, 0, NULL, false);
        float got = -1;
        tc_status st = tc_to_host(s, &got, sizeof got);
        float want = 0;
        for (int i = 0; i < 8; i++) want += x[i] * x[i];
        tc_release(a);
        tc_release(b);
        tc_release(s);
        if (st != TC_OK || fabsf(got - want) > 1e-4f * want) return (void *)1;
    }
    return NULL;
}

static void test_threads(void **state) {
    (void)state;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i), 0);
    for (int i = 0; i < 4; i++) {
        void *ret = (void *)1;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
}

static void test_shutdown_twice_and_reuse(void **state) {
    (void)state;
    tc_shutdown();
    tc_shutdown();
    float x[2] = {1, 2};
    tc_tensor *a = f32(1, SHAPE(2), x);
    tc_tensor *b = tc_add(a, a);
    float want[2] = {2, 4};
    expect_f32(b, want, 2, 0, 0, "after shutdown");
    tc_release(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_version),
        TEST(test_status_string),
        TEST(test_dtype_facts),
        TEST(test_flags),
        TEST(test_errors_are_thread_local),
        TEST(test_properties),
        TEST(test_properties_of_null),
        TEST(test_retain_release),
        TEST(test_realize_and_to_host),
        TEST(test_kernel_count_and_counters),
        TEST(test_to_device),
        TEST(test_to_other_device),
        TEST(test_threads),
        TEST(test_shutdown_twice_and_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
