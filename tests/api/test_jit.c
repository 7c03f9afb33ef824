/* test_jit.c - tc_jit: warm-up, capture, replay with new inputs (same
 * numbers as running the step directly), recapture on a shape change, and
 * errors. Uses only tinyc.h. */
#include "tc_test.h"

#include <stdlib.h>

/* out0 = (a*b+1).sum(1), out1 = softmax-ish exp(a - max(a)) */
static tc_status step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    int *calls = user;
    (*calls)++;
    int ax = 1;
    tc_tensor *one = tc_full(0, NULL, 1.0, TC_FLOAT32, NULL), *ab = tc_mul(in[0], in[1]);
    tc_tensor *p = tc_add(ab, one);
    out[0] = tc_sum(p, 1, &ax, false);
    tc_tensor *m = tc_max(in[0], 1, &ax, true), *d = tc_sub(in[0], m);
    out[1] = tc_exp(d);
    tc_release(one), tc_release(ab), tc_release(p), tc_release(m), tc_release(d);
    return out[0] && out[1] ? TC_OK : tc_last_status();
}

static void expect_step(tc_tensor *a, tc_tensor *b, tc_tensor **out) {
    int dummy = 0;
    tc_tensor *in[2] = {a, b}, *want[2];
    assert_int_equal(step(&dummy, in, 2, want, 2), TC_OK);
    for (int k = 0; k < 2; k++) {
        float *g = tc_test_read(out[k]), *w = tc_test_read(want[k]);
        assert_true(tc_allclose_f32(g, w, tc_numel(want[k]), 1e-6, 1e-6, "jit output"));
        free(g), free(w);
        tc_release(want[k]);
    }
}

static void test_capture_and_replay(void **state) {
    (void)state;
    const int64_t shape[2] = {6, 10};
    int calls = 0;
    tc_jit *j = tc_jit_new(step, &calls);
    assert_non_null(j);
    for (int it = 0; it < 5; it++) {
        tc_tensor *a = tc_test_randn(2, shape, 100 + it, -2, 2), *b = tc_test_randn(2, shape, 200 + it, -2, 2);
        tc_tensor *in[2] = {a, b}, *out[2];
        tc_counters c0, c1;
        tc_get_counters(&c0);
        assert_int_equal(tc_jit_run(j, in, 2, out, 2), TC_OK);
        tc_get_counters(&c1);
        /* the step itself runs for warm-up and capture only */
        assert_int_equal(calls, it < 2 ? it + 1 : 2);
        if (it >= 2) assert_int_equal(c1.kernel_count - c0.kernel_count, tc_jit_kernel_count(j));
        expect_step(a, b, out);
        tc_release(a), tc_release(b), tc_release(out[0]), tc_release(out[1]);
    }
    assert_int_equal(tc_jit_kernel_count(j), 2); /* the sum kernel and the exp kernel */
    /* a new shape is captured again, not replayed */
    const int64_t shape2[2] = {3, 7};
    tc_tensor *a = tc_test_randn(2, shape2, 1, -2, 2), *b = tc_test_randn(2, shape2, 2, -2, 2);
    tc_tensor *in[2] = {a, b}, *out[2];
    assert_int_equal(tc_jit_run(j, in, 2, out, 2), TC_OK);
    assert_int_equal(calls, 3);
    expect_step(a, b, out);
    tc_release(out[0]), tc_release(out[1]);
    /* a view as input is copied first, then replayed */
    const int order[2] = {1, 0};
    tc_tensor *at = tc_test_randn(2, (int64_t[]){7, 3}, 3, -2, 2), *v = tc_permute(at, order);
    in[0] = v;
    assert_int_equal(tc_jit_run(j, in, 2, out, 2), TC_OK);
    assert_int_equal(calls, 3);
    expect_step(v, b, out);
    tc_release(out[0]), tc_release(out[1]), tc_release(at), tc_release(v), tc_release(a), tc_release(b);
    tc_jit_free(j);
    tc_shutdown();
}

enum { CHAIN = 8, CHAIN_N = 256 };

/* CHAIN dependent kernels x = (flip(x)*0.5 + in[1]).contiguous() (the flip
 * keeps them apart), then out = (x*w).sum() with w uploaded inside the step:
 * CHAIN-1 intermediates of CHAIN_N floats, each dead once the next kernel
 * has read it; w is first read, never written, by the capture, so it keeps
 * its own memory */
static tc_status chain_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    float wv[CHAIN_N];
    for (int i = 0; i < CHAIN_N; i++) wv[i] = (float)(i % 7) - 3.0f;
    tc_tensor *w = tc_from_data(wv, TC_FLOAT32, 1, (int64_t[]){CHAIN_N}, NULL);
    tc_tensor *x = tc_retain(in[0]), *half = tc_full(0, NULL, 0.5, TC_FLOAT32, NULL);
    for (int i = 0; i < CHAIN && x; i++) {
        tc_tensor *f = tc_flip(x, 0, NULL), *m = tc_mul(f, half), *a = tc_add(m, in[1]);
        tc_tensor *c = tc_contiguous(a);
        tc_release(x), tc_release(f), tc_release(m), tc_release(a);
        x = c;
    }
    tc_tensor *xw = x ? tc_mul(x, w) : NULL;
    out[0] = xw ? tc_sum(xw, 0, NULL, false) : NULL;
    out[1] = x;
    tc_release(half), tc_release(w), tc_release(xw);
    return out[0] ? TC_OK : tc_last_status();
}

/* while the capture records, an intermediate's memory goes once nothing
 * but the capture holds it, so the capturing call peaks as the eager one;
 * after capture the intermediates share two buffers (each kernel reads one
 * and writes the other), and replays with new inputs stay right */
static void test_replay_shares_memory(void **state) {
    (void)state;
    const int64_t shape[1] = {CHAIN_N};
    tc_jit *j = tc_jit_new(chain_step, NULL);
    int64_t used[5], rise[2];
    for (int it = 0; it < 5; it++) {
        tc_tensor *a = tc_test_randn(1, shape, 300 + it, -2, 2), *b = tc_test_randn(1, shape, 400 + it, -1, 1);
        tc_tensor *in[2] = {a, b}, *out[2], *want[2];
        tc_counters c0, c1;
        tc_reset_counters();
        tc_get_counters(&c0);
        assert_int_equal(tc_jit_run(j, in, 2, out, 2), TC_OK);
        tc_get_counters(&c1);
        if (it < 2) rise[it] = c1.mem_peak - c0.mem_used;
        assert_int_equal(chain_step(NULL, in, 2, want, 2), TC_OK);
        for (int k = 0; k < 2; k++) {
            float *g = tc_test_read(out[k]), *w = tc_test_read(want[k]);
            assert_true(tc_allclose_f32(g, w, tc_numel(want[k]), 1e-6, 1e-6, "chain jit output"));
            free(g), free(w);
            tc_release(want[k]);
        }
        tc_release(a), tc_release(b), tc_release(out[0]), tc_release(out[1]);
        tc_counters c;
        tc_get_counters(&c);
        used[it] = c.mem_used;
    }
    assert_int_equal(tc_jit_kernel_count(j), CHAIN + 1);
    /* above the inputs: the eager call peaks at w and two chain buffers;
     * the capturing call's step at the same, and then, when the plan's two
     * shared blocks join w and the two outputs, at four buffers and out[0]
     * (had the capture kept its CHAIN-1 intermediates alive: at 11) */
    assert_int_equal(rise[0], (1 + 2) * CHAIN_N * 4);
    assert_int_equal(rise[1], (2 + 1 + 1) * CHAIN_N * 4 + 4);
    /* call 1 held nothing after it; the capture holds two shared buffers
     * (CHAIN-1 intermediates without sharing), w, its two inputs and its
     * two outputs (CHAIN_N floats and 1) */
    assert_int_equal(used[1] - used[0], (2 + 1 + 2 + 1) * CHAIN_N * 4 + 4);
    for (int it = 2; it < 5; it++) assert_int_equal(used[it], used[1]); /* replays allocate nothing */
    tc_jit_free(j);
    tc_counters c;
    tc_get_counters(&c);
    assert_int_equal(c.mem_used, used[0]);
    tc_shutdown();
}

static tc_status failing_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)user, (void)in, (void)n_in, (void)n_out;
    out[0] = tc_reshape(in[0], 1, (int64_t[]){7}); /* wrong size: fails */
    return out[0] ? TC_OK : tc_last_status();
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tc_jit_new(NULL, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_jit_new");
    tc_jit *j = tc_jit_new(failing_step, NULL);
    tc_tensor *a = tc_test_randn(1, (int64_t[]){4}, 1, 0, 1), *out[1];
    assert_int_equal(tc_jit_run(j, &a, 1, out, 1), TC_ERR_SHAPE);
    assert_null(out[0]);
    assert_int_equal(tc_jit_run(NULL, &a, 1, out, 1), TC_ERR_INVALID);
    assert_int_equal(tc_jit_kernel_count(j), 0); /* nothing captured */
    assert_int_equal(tc_jit_kernel_count(NULL), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_jit_kernel_count: jit is NULL");
    tc_release(a);
    tc_jit_free(j);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_and_replay),
        cmocka_unit_test(test_replay_shares_memory),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
