/* test_gpu.c - codegen for targets with work-groups (OpenCL, CUDA).
 *
 * Structure, from the UOps and the source (no device needed): a grouped
 * reduce puts exactly one BARRIER after each phase of stores to a local
 * buffer and none elsewhere (checked by a small verifier that walks the
 * linear program), no barrier sits inside an IF, stores that run on one lane
 * or inside bounds are IF blocks, multi-reduce kernels take one local buffer
 * per reduce. On the OpenCL device (pocl in CI; skipped without one):
 * softmax and layernorm with rows shorter and longer than the work-group
 * against the reference evaluator, ungrouped kernels whose grid does not
 * fit (loops), a chain of 3000 elementwise ops, causal attention (row
 * kernels, forward and backward), and a kernel with its
 * barriers removed that must then give wrong numbers. With NVRTC: every
 * kernel here also compiles for CUDA without warnings.
 */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

static const tc_target opencl_target = {
    .has_local = true,
    .global_max = {2147483647, 65535, 65535},
    .local_max = {1024, 1024, 64},
    .lanes_max = 1024,
    .shared_max = 32768,
};


/* the barrier rules, on the linear program: every BARRIER follows at least
 * one store to a local buffer since the last one (none is useless); no load
 * of a local buffer sees a store without a BARRIER in between (none is
 * missing); no BARRIER is inside an IF (every lane must reach it) */
static void verify_barriers(const tc_kernel_uops *k) {
    bool dirty[TC_UB_MAX_LOCALS] = {false};
    int if_depth = 0;
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        bool is_local = (u->op == TC_UOP_LOAD || u->op == TC_UOP_STORE) &&
                        u->srcs[0]->op == TC_UOP_DEFINE_LOCAL;
        int b = is_local ? (int)u->srcs[0]->arg : -1;
        if (u->op == TC_UOP_IF) if_depth++;
        if (u->op == TC_UOP_ENDIF) if_depth--;
        if (u->op == TC_UOP_BARRIER) {
            bool any = false;
            for (int j = 0; j < TC_UB_MAX_LOCALS; j++) any |= dirty[j], dirty[j] = false;
            if (!any || if_depth) tc_uops_dump(stderr, k);
            assert_true(any);              /* a barrier with no store before it */
            assert_int_equal(if_depth, 0); /* a barrier inside an IF */
        }
        if (is_local && u->op == TC_UOP_STORE) dirty[b] = true;
        if (is_local && u->op == TC_UOP_LOAD && dirty[b] && if_depth == 0) {
            tc_uops_dump(stderr, k);
            fail_msg("uop %d loads temp%d after a store with no barrier", u->id, b);
        }
        if (is_local && u->op == TC_UOP_LOAD && dirty[b]) {
            /* inside an IF: only the lane that stored reads it back (lane 0's combine) */
            assert_true(u->srcs[1]->op == TC_UOP_CONST || u->srcs[1]->op == TC_UOP_RANGE);
        }
    }
}

static tc_tensor *rnd(int64_t rows, int64_t cols, uint64_t seed) {
    return tc_test_randn(2, (int64_t[]){rows, cols}, seed, -2.0f, 2.0f);
}

/* ---- structure ------------------------------------------------------------------ */

/* (4,256).sum(1): one work-group of 256 lanes per row, partials in temp0,
 * one barrier, lane 0 combines and stores inside an IF */
static void test_grouped_sum(void **state) {
    (void)state;
    tc_tensor *x = rnd(4, 256, 1);
    int ax = 1;
    tc_tensor *s = tc_sum(x, 1, &ax, false);
    tc_test_lowered l = tc_test_lower(s, &opencl_target);
    assert_int_equal(l.k->global_size[0], 4);
    assert_int_equal(l.k->local_size[0], 256);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_DEFINE_LOCAL), 1);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_BARRIER), 1);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_IF), 1);
    verify_barriers(l.k);
    char *src = tc_render(&tc_dialect_opencl, l.k);
    assert_non_null(src);
    /* the gated store is an IF block around lane 0's combine and the store */
    const char *gate = strstr(src, "if ((lidx0<1)) {"), *store = strstr(src, "data0[gidx0] = ");
    const char *barrier = strstr(src, "barrier(CLK_LOCAL_MEM_FENCE);");
    if (!gate || !store || !barrier || !(barrier < gate && gate < store))
        fprintf(stderr, "%s", src);
    assert_true(gate && store && barrier && barrier < gate && gate < store);
    assert_non_null(strstr(src, "__local float temp0[256];"));
    tc_free(src);
    tc_test_lowered_free(&l);
    tc_release(x), tc_release(s);
    tc_shutdown();
}

/* the barriers of multi-reduce kernels: a broadcast reduce (read by a later
 * stage) has two store phases (partials, then lane 0's result), a reduce
 * read only by lane 0's stores has one */
static void test_multireduce_barriers(void **state) {
    (void)state;
    tc_tensor *x = rnd(8, 300, 2);
    int ax = 1;
    tc_tensor *sm = tc_test_softmax(x, 1), *ln = tc_test_layernorm(x, 1);
    tc_tensor *mean = tc_mean(x, 1, &ax, false), *sd = tc_std(x, 1, &ax, false, 1);
    struct {
        tc_tensor *t; /* the kernel's output */
        int locals;   /* local buffers: one per reduce */
        int barriers; /* barriers: 2 per broadcast reduce, 1 per other */
        const char *what;
    } cases[] = {{sm, 2, 4, "softmax"}, {ln, 2, 4, "layernorm"}, {sd, 2, 3, "std"}};
    for (int i = 0; i < 3; i++) {
        tc_test_lowered l = tc_test_lower(cases[i].t, &opencl_target);
        if (tc_test_count_uops(l.k, TC_UOP_BARRIER) != cases[i].barriers) tc_uops_dump(stderr, l.k);
        assert_int_equal(tc_test_count_uops(l.k, TC_UOP_DEFINE_LOCAL), cases[i].locals);
        assert_int_equal(tc_test_count_uops(l.k, TC_UOP_BARRIER), cases[i].barriers);
        assert_int_equal(l.k->local_size[0], 256); /* rows of 300 are longer than the group */
        verify_barriers(l.k);
        tc_test_lowered_free(&l);
    }
    /* mean and std of the same rows: one kernel, two reduced stores on lane 0 */
    tc_tensor *both[2] = {mean, sd};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    tc_release(x), tc_release(sm), tc_release(ln), tc_release(mean), tc_release(sd);
    tc_shutdown();
}

/* the same barrier rules when a work-group reduces 4 columns at once
 * (vector lanes: float4 partials in float4 local arrays), over axis 0 */
static void test_vector_group_barriers(void **state) {
    (void)state;
    tc_tensor *x = rnd(300, 64, 8);
    int ax = 0;
    tc_tensor *s = tc_sum(x, 1, &ax, false), *sd = tc_std(x, 1, &ax, false, 1);
    tc_target vt = opencl_target;
    vt.vec_width = 4;
    tc_tensor *cases[] = {s, sd};
    const int barriers[] = {1, 3}; /* as with scalar lanes (test_multireduce_barriers) */
    for (int i = 0; i < 2; i++) {
        tc_test_lowered l = tc_test_lower(cases[i], &vt);
        int vec_locals = 0;
        for (int j = 0; j < l.k->n_uops; j++)
            vec_locals += l.k->uops[j]->op == TC_UOP_DEFINE_LOCAL && l.k->uops[j]->vcount == 4;
        if (vec_locals != i + 1 || tc_test_count_uops(l.k, TC_UOP_BARRIER) != barriers[i])
            tc_uops_dump(stderr, l.k);
        assert_int_equal(vec_locals, i + 1);
        assert_int_equal(tc_test_count_uops(l.k, TC_UOP_BARRIER), barriers[i]);
        assert_int_equal(l.k->global_size[0], 16); /* 64 columns, 4 a work-group */
        verify_barriers(l.k);
        tc_test_lowered_free(&l);
    }
    tc_release(x), tc_release(s), tc_release(sd);
    tc_shutdown();
}

/* elementwise over 100 elements in lanes of 128: the whole body is gated */
static void test_bounds_gate(void **state) {
    (void)state;
    tc_tensor *x = rnd(1, 100, 3), *y = tc_exp(x);
    tc_test_lowered l = tc_test_lower(y, &opencl_target);
    assert_int_equal(l.k->local_size[0], 128);
    assert_int_equal(l.k->global_size[0], 1);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_BARRIER), 0);
    char *src = tc_render(&tc_dialect_opencl, l.k);
    const char *gate = strstr(src, "if ((lidx0<100)) {"), *load = strstr(src, "data1["),
               *store = strstr(src, "data0[");
    if (!gate || !load || !store || !(gate < load && load < store)) fprintf(stderr, "%s", src);
    assert_true(gate && load && store && gate < load && load < store);
    tc_free(src);
    tc_test_lowered_free(&l);
    tc_release(x), tc_release(y);
    tc_shutdown();
}

/* small reduces stay one lane per row; a grid too small for the kept axes
 * turns the outer ones into loops */
static void test_ungrouped_and_loops(void **state) {
    (void)state;
    /* x is (5,3,6,7) read as (3,5,6,7): its axes 0 and 1 cannot merge */
    tc_tensor *x0 = tc_test_randn(4, (int64_t[]){5, 3, 6, 7}, 4, -1, 1);
    tc_tensor *x = tc_permute(x0, (int[]){1, 0, 2, 3});
    int ax = 3;
    tc_tensor *s = tc_sum(x, 1, &ax, false); /* rows of 7: not grouped */
    tc_test_lowered l = tc_test_lower(s, &opencl_target);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_DEFINE_LOCAL), 0);
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_RANGE), 1);
    assert_int_equal(l.k->global_size[1], 5);
    assert_int_equal(l.k->global_size[2], 3); /* axis 0 in dimension 2 */
    tc_test_lowered_free(&l);
    tc_target small = opencl_target;
    small.global_max[1] = 4, small.global_max[2] = 2;
    l = tc_test_lower(s, &small);
    assert_int_equal(l.k->global_size[1], 1); /* 5 > 4: a loop */
    assert_int_equal(l.k->global_size[2], 1); /* 3 > 2: a loop */
    assert_int_equal(tc_test_count_uops(l.k, TC_UOP_RANGE), 3);
    tc_test_lowered_free(&l);
    tc_release(x0), tc_release(x), tc_release(s);
    tc_shutdown();
}

/* ---- on the OpenCL device ------------------------------------------------------------ */

static tc_dev *ocl(void) {
    int id = tc_device_open("OPENCL", "test");
    if (id < 0) {
        fprintf(stderr, "no OpenCL device: %s\n", tc_last_error());
        skip();
    }
    return tc_device_get(id);
}

/* softmax and layernorm with rows shorter (100 < 128 lanes) and longer
 * (1000 > 256 lanes) than the work-group, against the reference */
static void test_multireduce_on_device(void **state) {
    (void)state;
    ocl();
    const int64_t cols[2] = {100, 1000}, lanes[2] = {128, 256};
    for (int i = 0; i < 2; i++) {
        float *h = malloc(sizeof(float) * 6 * (size_t)cols[i]);
        assert_non_null(h);
        for (int64_t j = 0; j < 6 * cols[i]; j++) h[j] = (float)((j * 7919) % 1000) / 250.0f - 2;
        tc_tensor *x = tc_from_data(h, TC_FLOAT32, 2, (int64_t[]){6, cols[i]}, "OPENCL");
        free(h);
        tc_tensor *sm = tc_test_softmax(x, 1), *ln = tc_test_layernorm(x, 1);
        tc_test_lowered l = tc_test_lower(sm, &tc_device_get(tc_device_open("OPENCL", "t"))->target);
        assert_int_equal(l.k->local_size[0], lanes[i]);
        assert_int_equal(tc_test_count_uops(l.k, TC_UOP_DEFINE_LOCAL), 2);
        tc_test_lowered_free(&l);
        tc_check_schedule(sm, 1, 1e-5, 1e-6,
                          cols[i] < 128 ? "softmax, short rows" : "softmax, long rows");
        tc_check_schedule(ln, 1, 1e-4, 1e-5,
                          cols[i] < 128 ? "layernorm, short rows" : "layernorm, long rows");
        tc_release(x), tc_release(sm), tc_release(ln);
    }
    tc_shutdown();
}

/* a chain of 3000 elementwise ops (one kernel, the scheduler's bound on
 * a kernel's ops turned off; its mixed and its max form, tc_test_chain)
 * builds and matches the reference: pocl's clang refused past 256 nested
 * brackets before the renderers bounded expression depth
 * (tests/render/test_depth.c checks the depth in every dialect) */
static void test_long_chain_on_device(void **state) {
    (void)state;
    ocl();
    tc_flag_put(TC_FLAG_KERNEL_OPS, -1);
    float h[64];
    for (int i = 0; i < 64; i++) h[i] = (float)((i * 37) % 64) / 16.0f - 2.0f;
    for (int max_only = 0; max_only < 2; max_only++) {
        tc_tensor *x = tc_from_data(h, TC_FLOAT32, 1, (int64_t[]){64}, "OPENCL");
        tc_tensor *y = tc_test_chain(x, 3000, max_only);
        tc_check_schedule(y, 1, 1e-5, 1e-6, max_only ? "3000-op max chain" : "3000-op chain");
        tc_release(x), tc_release(y);
    }
    tc_flag_put(TC_FLAG_KERNEL_OPS, 0);
    tc_shutdown();
}

/* kernels whose grid does not fit: loops over the outer kept axes */
static void test_loops_on_device(void **state) {
    (void)state;
    tc_dev *d = ocl();
    tc_target saved = d->target;
    d->target.global_max[1] = 2, d->target.global_max[2] = 2;
    float h[3 * 5 * 40];
    for (int i = 0; i < 3 * 5 * 40; i++) h[i] = (float)(i % 17) - 8;
    tc_tensor *x = tc_from_data(h, TC_FLOAT32, 3, (int64_t[]){3, 5, 40}, "OPENCL");
    int ax = 2;
    tc_tensor *e = tc_exp2(x);
    tc_tensor *s = tc_sum(x, 1, &ax, false);
    tc_check_schedule(e, 1, 1e-6, 1e-6, "exp2 with looped axes");
    tc_check_schedule(s, 1, 1e-5, 1e-5, "sum with looped axes");
    d->target = saved;
    tc_release(x), tc_release(e), tc_release(s);
    tc_shutdown();
}

/* causal attention on the device: the forward is one row kernel (a lane per
 * (batch, head, query) row, the scores and weights in private arrays); the
 * backward's row kernel stores its weights and score gradients for the
 * kernels of d k and d v; every gradient against the reference */
static void test_attention_on_device(void **state) {
    (void)state;
    ocl();
    const int64_t sh[4] = {2, 3, 37, 8};
    tc_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        float *h = malloc(sizeof(float) * 2 * 3 * 37 * 8);
        assert_non_null(h);
        for (int j = 0; j < 2 * 3 * 37 * 8; j++)
            h[j] = (float)((j * 7919 + i * 131) % 1000) / 250.0f - 2;
        in[i] = tc_from_data(h, TC_FLOAT32, 4, sh, "OPENCL");
        free(h);
        assert_int_equal(tc_set_requires_grad(in[i], true), TC_OK);
    }
    tc_tensor *o = tc_scaled_dot_product_attention(in[0], in[1], in[2], NULL, true);
    tc_check_schedule(o, 1, 1e-5, 1e-6, "causal attention forward (OpenCL)");
    tc_tensor *s = tc_sum(o, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_OK);
    tc_tensor *g[3] = {tc_grad(in[0]), tc_grad(in[1]), tc_grad(in[2])};
    float *want[3];
    for (int i = 0; i < 3; i++) {
        want[i] = malloc(sizeof(float) * (size_t)tc_numel(g[i]));
        assert_non_null(want[i]);
        assert_int_equal(tc_ref_eval(tc_tensor_node(g[i]), want[i]), TC_OK);
    }
    assert_int_equal(tc_schedule_kernel_count(g, 3), 4);
    assert_int_equal(tc_realize(g, 3), TC_OK);
    for (int i = 0; i < 3; i++) {
        float *got = tc_test_read(g[i]);
        assert_true(
            tc_allclose_f32(got, want[i], tc_numel(g[i]), 1e-4, 1e-5, "attention gradient"));
        free(got), free(want[i]);
        tc_release(g[i]), tc_release(in[i]);
    }
    tc_release(o), tc_release(s);
    tc_shutdown();
}

/* runs the OpenCL source src of kernel k (one output, one input x of rows x
 * cols floats) and returns the rows sums read back */
static void run_source(tc_dev *d, const tc_kernel_uops *k, const char *src, tc_buffer *in,
                       float *out, int64_t rows) {
    tc_program *p = d->compile(d, src, k->name);
    if (!p) fprintf(stderr, "%s\n%s", tc_last_error(), src);
    assert_non_null(p);
    tc_buffer *o = tc_buffer_new(d->id, sizeof(float) * (size_t)rows);
    assert_non_null(o);
    float junk[256];
    for (int i = 0; i < 256; i++) junk[i] = -1e6f;
    for (int64_t r = 0; r < rows; r += 256)
        assert_int_equal(tc_buffer_copyin(o, sizeof(float) * (size_t)r, junk,
                                          sizeof(float) * (size_t)(rows - r < 256 ? rows - r : 256)),
                         TC_OK);
    void *args[2] = {o->ptr, in->ptr};
    tc_launch_dims dims;
    memcpy(dims.global, k->global_size, sizeof dims.global);
    memcpy(dims.local, k->local_size, sizeof dims.local);
    assert_int_equal(d->launch(d, p, args, 2, &dims), TC_OK);
    assert_int_equal(tc_buffer_copyout(o, 0, out, sizeof(float) * (size_t)rows), TC_OK);
    tc_buffer_release(o);
}

/* the grouped sum is right with its barrier and wrong without it: the
 * differential check catches a missing barrier */
static void test_missing_barrier_fails(void **state) {
    (void)state;
    tc_dev *d = ocl();
    enum { ROWS = 64, COLS = 1000 };
    float *h = malloc(sizeof(float) * ROWS * COLS), want[ROWS], got[ROWS];
    assert_non_null(h);
    for (int r = 0; r < ROWS; r++) {
        want[r] = 0;
        for (int c = 0; c < COLS; c++) want[r] += h[r * COLS + c] = (float)((r * 31 + c * 7) % 64);
    }
    tc_tensor *x = tc_from_data(h, TC_FLOAT32, 2, (int64_t[]){ROWS, COLS}, "OPENCL");
    int ax = 1;
    tc_tensor *s = tc_sum(x, 1, &ax, false);
    tc_test_lowered l = tc_test_lower(s, &d->target);
    char *src = tc_render(&tc_dialect_opencl, l.k);
    assert_non_null(src);
    tc_buffer *in = tc_node_base(tc_tensor_node(x))->buffer;
    run_source(d, l.k, src, in, got, ROWS);
    assert_true(tc_allclose_f32(got, want, ROWS, 0, 0, "grouped sum with its barrier"));
    /* the same source without its barrier line */
    const char *bar = "barrier(CLK_LOCAL_MEM_FENCE);";
    char *cut = strstr(src, bar);
    assert_non_null(cut);
    memmove(cut, cut + strlen(bar), strlen(cut + strlen(bar)) + 1);
    assert_null(strstr(src, bar));
    run_source(d, l.k, src, in, got, ROWS);
    int wrong = 0;
    for (int r = 0; r < ROWS; r++) wrong += got[r] != want[r];
    fprintf(stderr, "without the barrier: %d of %d rows wrong\n", wrong, ROWS);
    assert_true(wrong > 0);
    tc_free(src);
    tc_test_lowered_free(&l);
    free(h);
    tc_release(x), tc_release(s);
    tc_shutdown();
}

/* ---- CUDA: every kernel here compiles with NVRTC, without warnings ------------------------ */

static void test_cuda_compiles(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_tensor *x = rnd(8, 300, 5), *xs = rnd(8, 100, 6),
              *x4 = tc_test_randn(4, (int64_t[]){3, 5, 6, 7}, 7, -1, 1);
    int ax = 1, ax3 = 3;
    tc_tensor *h = tc_cast(xs, TC_FLOAT16), *i64 = tc_cast(xs, TC_INT64),
              *u8 = tc_cast(x, TC_UINT8);
    tc_tensor *three = tc_full_like(u8, 3), *zero = tc_full_like(x, 0);
    tc_tensor *outs[] = {
        tc_sum(x, 1, &ax, false),    tc_test_softmax(x, 1),     tc_test_layernorm(xs, 1),
        tc_std(x, 1, &ax, false, 1), tc_exp(xs),     tc_sum(x4, 1, &ax3, false),
        tc_sum(h, 1, &ax, false),    tc_test_softmax(h, 1),     tc_max(i64, 1, &ax, false),
        tc_idiv(u8, three),          tc_lt(x, zero),
    };
    int n = (int)(sizeof outs / sizeof *outs);
    for (int i = 0; i < n; i++) {
        assert_non_null(outs[i]);
        tc_test_lowered l = tc_test_lower(outs[i], &tc_dialect_cuda.target);
        char *src = tc_render(&tc_dialect_cuda, l.k);
        assert_non_null(src);
        tc_status st = tc_cuda_compile(src, l.k->name, "sm_80", true, NULL);
        if (st != TC_OK) fprintf(stderr, "%s\n%s", tc_last_error(), src);
        assert_int_equal(st, TC_OK);
        tc_free(src);
        tc_test_lowered_free(&l);
        tc_release(outs[i]);
    }
    tc_release(x), tc_release(xs), tc_release(x4), tc_release(h), tc_release(i64), tc_release(u8);
    tc_release(three), tc_release(zero);
    tc_shutdown();
}

int main(void) {
    setenv("TC_CACHEDIR", "/tmp/tc_test_gpu_cache", 0);
    unsetenv("TC_DEVICE");
    /* clang-format off: one test a line */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped_sum),           cmocka_unit_test(test_multireduce_barriers),
        cmocka_unit_test(test_bounds_gate),           cmocka_unit_test(test_ungrouped_and_loops),
        cmocka_unit_test(test_vector_group_barriers),
        cmocka_unit_test(test_multireduce_on_device), cmocka_unit_test(test_loops_on_device),
        cmocka_unit_test(test_long_chain_on_device), cmocka_unit_test(test_attention_on_device),
        cmocka_unit_test(test_missing_barrier_fails), cmocka_unit_test(test_cuda_compiles),
    };
    /* clang-format on */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
