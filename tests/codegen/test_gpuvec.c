/* test_gpuvec.c - vector lanes on GPU targets (tc_target.vec_width, lower.c's
 * "GPU vectors"): a lane loads, computes and stores 4 consecutive elements
 * of the innermost kept axis (a grouped reduce: a work-group, 4 columns).
 *
 * From the UOps and the rendered OpenCL and CUDA source (no device needed):
 * float4 loads and stores where the views allow them (vload4/vstore4 in
 * OpenCL, aligned float4 pointer casts in CUDA), scalars broadcast where they
 * meet vectors, each vector constant printed once, reduce kernels' vector
 * accumulators and stores (grouped ones too: float4 partials in local
 * arrays of float4), masks, uint8 and int32 loads cast to float; and one
 * test per fallback to scalar lanes (an axis that 4 does not divide, a mask
 * on the axis, several views, another stride, an index not a multiple of 4,
 * an op with no vector form, float16, too little local memory, TC_NOOPT).
 * On the OpenCL device (pocl; skipped without one): every case against the
 * reference evaluator. With NVRTC: every vector kernel here compiles for
 * CUDA without warnings.
 */
#include "tc_test.h"
#include "tc_test_lower.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "schedule/schedule.h"
#include "tensor/tensor.h"

static tc_target gpu_target(void) {
    tc_target t = tc_dialect_opencl.target;
    t.vec_width = 4;
    return t;
}


/* UOps of kind op with (is_vec) or without vector lanes; LOAD and STORE:
 * of global buffers, a STORE's lanes are its value's */
static int count_vec(const tc_kernel_uops *k, tc_uop_op op, bool is_vec) {
    int n = 0;
    for (int i = 0; i < k->n_uops; i++) {
        const tc_uop *u = k->uops[i];
        bool is_mem = u->op == TC_UOP_LOAD || u->op == TC_UOP_STORE;
        bool global = !is_mem || u->srcs[0]->op == TC_UOP_DEFINE_GLOBAL;
        n += u->op == op && global && ((op == TC_UOP_STORE ? u->srcs[2] : u)->vcount > 1) == is_vec;
    }
    return n;
}

static int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* the OpenCL and CUDA sources of t's kernel; *k_out: its UOps (lowered_free) */
typedef struct {
    tc_test_lowered l;  /* the kernel */
    char *ocl;  /* OpenCL source */
    char *cuda; /* CUDA source */
} rendered;

static rendered render_both(tc_tensor *t) {
    tc_target tg = gpu_target();
    rendered r = {tc_test_lower(t, &tg), NULL, NULL};
    r.ocl = tc_render(&tc_dialect_opencl, r.l.k);
    r.cuda = tc_render(&tc_dialect_cuda, r.l.k);
    assert_non_null(r.ocl);
    assert_non_null(r.cuda);
    return r;
}

static void rendered_free(rendered *r) {
    tc_free(r->ocl);
    tc_free(r->cuda);
    tc_test_lowered_free(&r->l);
}

/* asserts the kernel of t is vectorized: `vloads` vector loads, `sloads`
 * scalar ones, `stores` vector stores and no scalar store */
static void expect_vec(tc_tensor *t, int vloads, int sloads, int stores, const char *what) {
    rendered r = render_both(t);
    const tc_kernel_uops *k = r.l.k;
    bool ok =
        count_vec(k, TC_UOP_LOAD, true) == vloads && count_vec(k, TC_UOP_LOAD, false) == sloads &&
        count_vec(k, TC_UOP_STORE, true) == stores && count_vec(k, TC_UOP_STORE, false) == 0 &&
        count_str(r.ocl, "vload4(0, data") == vloads && count_str(r.ocl, "vstore4(") == stores &&
        count_str(r.cuda, "(*(const ") == vloads && count_str(r.cuda, "*(float4 *)(data") == stores;
    if (!ok) {
        fprintf(stderr, "%s: expected %d vector loads, %d scalar, %d vector stores\n", what, vloads,
                sloads, stores);
        tc_uops_dump(stderr, k);
        fprintf(stderr, "%s\n%s", r.ocl, r.cuda);
    }
    assert_true(ok);
    rendered_free(&r);
}

/* asserts the kernel of t has scalar lanes only */
static void expect_scalar(tc_tensor *t, const tc_target *tg, const char *what) {
    tc_test_lowered l = tc_test_lower(t, tg);
    bool any = false;
    for (int i = 0; i < l.k->n_uops; i++) any |= l.k->uops[i]->vcount > 1;
    char *src = tc_render(&tc_dialect_opencl, l.k);
    assert_non_null(src);
    if (any || strstr(src, "float4")) {
        fprintf(stderr, "%s: expected scalar lanes\n%s", what, src);
        tc_uops_dump(stderr, l.k);
    }
    assert_false(any);
    assert_null(strstr(src, "float4"));
    tc_free(src);
    tc_test_lowered_free(&l);
}

static tc_tensor *rnd(int64_t rows, int64_t cols, uint64_t seed) {
    return tc_test_randn(2, (int64_t[]){rows, cols}, seed, -2.0f, 2.0f);
}

static tc_tensor *scalar(double v) {
    return tc_full(0, NULL, v, TC_FLOAT32, NULL);
}

/* ---- the vector cases ------------------------------------------------------------------ */

/* a*b+c over (64,256) */
static tc_tensor *mul_add(tc_tensor *a, tc_tensor *b, tc_tensor *c) {
    tc_tensor *m = tc_mul(a, b), *r = tc_add(m, c);
    tc_release(m);
    return r;
}

static void test_map(void **state) {
    (void)state;
    tc_tensor *a = rnd(64, 256, 1), *b = rnd(64, 256, 2), *c = rnd(64, 256, 3);
    tc_tensor *y = mul_add(a, b, c);
    expect_vec(y, 3, 0, 1, "a*b+c");
    rendered r = render_both(y);
    /* the (64,256) map is one axis of 16384 (merged): 128 lanes of 4 per
     * work-group, 32 groups; no bounds gate; the index is lane*4 */
    assert_int_equal(r.l.k->local_size[0], 128);
    assert_int_equal(r.l.k->global_size[0], 32);
    assert_int_equal(r.l.k->global_size[1], 1);
    if (strstr(r.ocl, "if (") || !strstr(r.ocl, "+lidx0)*4)")) fprintf(stderr, "%s", r.ocl);
    assert_null(strstr(r.ocl, "if ("));
    assert_non_null(strstr(r.ocl, "+lidx0)*4)"));
    /* CUDA: the float4 operators come from the prelude, only in vector kernels */
    assert_non_null(strstr(r.cuda, "operator*(float4 a, float4 b)"));
    rendered_free(&r);
    tc_tensor *e = tc_exp(a); /* a scalar kernel on the CUDA dialect has no prelude */
    tc_test_lowered l = tc_test_lower(e, &(tc_target){.has_local = true,
                                          .lanes_max = 1024,
                                          .local_max = {1024, 1024, 64},
                                          .global_max = {2147483647, 65535, 65535},
                                          .shared_max = 49152});
    char *src = tc_render(&tc_dialect_cuda, l.k);
    assert_null(strstr(src, "float4"));
    tc_free(src);
    tc_test_lowered_free(&l);
    tc_release(a), tc_release(b), tc_release(c), tc_release(y), tc_release(e);
    tc_shutdown();
}

/* constants meeting vectors are vector CONSTs, each printed once */
static void test_consts_once(void **state) {
    (void)state;
    tc_tensor *x = rnd(16, 128, 4), *two = scalar(2), *three = scalar(3);
    tc_tensor *x2 = tc_mul(x, two), *x3 = tc_mul(x, three), *r1 = tc_relu(x2), *r2 = tc_relu(x3);
    tc_tensor *s = tc_add(r1, r2), *s2 = tc_mul(s, two), *y = tc_add(s2, x3);
    expect_vec(y, 1, 0, 1, "relu(2x)+relu(3x)");
    rendered r = render_both(y);
    const char *consts[3][2] = {{"((float4)(2.0f))", "tc_float4(2.0f)"},
                                {"((float4)(3.0f))", "tc_float4(3.0f)"},
                                {"((float4)(0.0f))", "tc_float4(0.0f)"}};
    for (int i = 0; i < 3; i++) {
        if (count_str(r.ocl, consts[i][0]) != 1 || count_str(r.cuda, consts[i][1]) != 1)
            fprintf(stderr, "%s\n%s", r.ocl, r.cuda);
        assert_int_equal(count_str(r.ocl, consts[i][0]), 1);
        assert_int_equal(count_str(r.cuda, consts[i][1]), 1);
    }
    assert_int_equal(count_str(r.ocl, "const float4 vconst"), 3);
    rendered_free(&r);
    tc_release(x), tc_release(two), tc_release(three), tc_release(x2), tc_release(x3);
    tc_release(r1), tc_release(r2), tc_release(s), tc_release(s2), tc_release(y);
    tc_shutdown();
}

/* a value that does not read the vector axis stays scalar and is broadcast:
 * a per-row bias (64,1) and a per-column one (1,256) */
static void test_broadcast(void **state) {
    (void)state;
    tc_tensor *x = rnd(64, 256, 5), *rb = rnd(64, 1, 6), *cb = rnd(1, 256, 7);
    tc_tensor *y = tc_add(x, rb), *z = tc_mul(x, cb);
    expect_vec(y, 1, 1, 1, "x + row bias");
    expect_vec(z, 2, 0, 1, "x * column scale");
    rendered r = render_both(y);
    if (!strstr(r.ocl, "((float4)(val")) fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, "((float4)(val"));
    assert_non_null(strstr(r.cuda, "tc_float4(val"));
    rendered_free(&r);
    tc_release(x), tc_release(rb), tc_release(cb), tc_release(y), tc_release(z);
    tc_shutdown();
}

/* reduce kernels whose kept columns are contiguous: a float4 accumulator per
 * lane, vector loads in the reduce loop, one vector store */
static void test_reduce_store(void **state) {
    (void)state;
    tc_tensor *x = rnd(8, 256, 8);
    int ax = 0;
    tc_tensor *s = tc_sum(x, 1, &ax, false), *m = tc_max(x, 1, &ax, false);
    expect_vec(s, 1, 0, 1, "sum over rows");
    expect_vec(m, 1, 0, 1, "max over rows");
    rendered r = render_both(m);
    assert_int_equal(count_vec(r.l.k, TC_UOP_DEFINE_ACC, true), 1);
    if (!strstr(r.ocl, "float4 acc") || !strstr(r.ocl, "((float4)(-INFINITY))"))
        fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, "float4 acc"));
    assert_non_null(strstr(r.ocl, "((float4)(-INFINITY))"));
    assert_non_null(strstr(r.cuda, "tc_max("));
    rendered_free(&r);
    tc_release(x), tc_release(s), tc_release(m);
    tc_shutdown();
}

static void test_grouped(void **state) {
    (void)state;
    tc_tensor *x = rnd(64, 256, 18);
    int ax = 0;
    tc_tensor *s = tc_sum(x, 1, &ax, false), *sm = tc_test_softmax(x, 0);
    expect_vec(s, 1, 0, 1, "sum over 64 rows (grouped)");
    rendered r = render_both(s);
    fprintf(stderr, "%s", r.ocl);
    assert_int_equal(r.l.k->local_size[0], 64);
    assert_int_equal(r.l.k->global_size[0], 64); /* 256 columns / 4 */
    assert_int_equal(tc_test_count_uops(r.l.k, TC_UOP_BARRIER), 1);
    if (!strstr(r.ocl, "__local float4 temp0[64];")) fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, "__local float4 temp0[64];"));
    assert_non_null(strstr(r.cuda, "__shared__ float4 temp0[64];"));
    rendered_free(&r);
    expect_vec(sm, 1, 0, 1, "softmax over 64 rows (grouped)");
    r = render_both(sm);
    assert_int_equal(tc_test_count_uops(r.l.k, TC_UOP_DEFINE_LOCAL), 2);
    assert_int_equal(tc_test_count_uops(r.l.k, TC_UOP_BARRIER), 4);
    rendered_free(&r);
    /* too little local memory for vectors: scalar lanes */
    tc_target small = gpu_target();
    small.shared_max = 64 * 8 * 2;
    expect_scalar(sm, &small, "softmax with 1 KiB of local memory");
    tc_release(x), tc_release(s), tc_release(sm);
    tc_shutdown();
}

/* the ops with vector forms, each in its own vector kernel (math in OpenCL
 * is overloaded; CUDA's go through the prelude's helpers) */
static tc_tensor *vec_op(int i, tc_tensor *x) {
    switch (i) {
    case 0: return tc_exp2(x);
    case 1: return tc_log2(x);
    case 2: return tc_sin(x);
    case 3: return tc_sqrt(x);
    case 4: return tc_recip(x);
    case 5: return tc_neg(x);
    case 6: return tc_relu(x);
    default: return tc_sigmoid(x);
    }
}
enum { N_VEC_OPS = 8 };

static void test_ops(void **state) {
    (void)state;
    tc_tensor *x = rnd(4, 64, 9);
    for (int i = 0; i < N_VEC_OPS; i++) {
        tc_tensor *y = vec_op(i, x);
        expect_vec(y, 1, 0, 1, "a vector op");
        tc_release(y);
    }
    tc_release(x);
    tc_shutdown();
}

/* masks: float comparisons, their AND/OR, a WHERE on one or on a scalar
 * bool (rb's rows), a cast to float (relu's gradient); out[0..3] */
enum { N_MASKS = 4 };
static const char *const mask_names[N_MASKS] = {"g * (0 < x)", "where(0 < x & x < 1, x, g)",
                                                "where(0 < x | x != x, g, 0)",
                                                "where(0 < row bias, x, g)"};

static void masks(tc_tensor *x, tc_tensor *g, tc_tensor *rb, tc_tensor **out) {
    tc_tensor *zero = tc_full(0, NULL, 0, TC_FLOAT32, tc_device(x));
    tc_tensor *one = tc_full(0, NULL, 1, TC_FLOAT32, tc_device(x));
    tc_tensor *pos = tc_lt(zero, x), *small = tc_lt(x, one), *nan = tc_ne(x, x);
    tc_tensor *posf = tc_cast(pos, TC_FLOAT32);
    tc_tensor *band = tc_logical_and(pos, small), *bor = tc_logical_or(pos, nan);
    tc_tensor *rpos = tc_lt(zero, rb);
    out[0] = tc_mul(g, posf);
    out[1] = tc_where(band, x, g);
    out[2] = tc_where(bor, g, zero);
    out[3] = tc_where(rpos, x, g);
    tc_tensor *all[] = {zero, one, pos, small, nan, posf, band, bor, rpos};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tc_release(all[i]);
}

static void test_masks(void **state) {
    (void)state;
    tc_tensor *x = rnd(64, 256, 15), *g = rnd(64, 256, 16), *rb = rnd(64, 1, 17), *m[N_MASKS];
    masks(x, g, rb, m);
    for (int i = 0; i < N_MASKS; i++) expect_vec(m[i], 2, i == 3, 1, mask_names[i]);
    rendered r = render_both(m[0]);
    if (!strstr(r.ocl, "convert_float4(-(")) fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, "convert_float4(-("));
    assert_non_null(strstr(r.cuda, "tc_float4_mask(tc_lt("));
    rendered_free(&r);
    for (int i = 0; i < N_MASKS; i++) tc_release(m[i]);
    tc_release(x), tc_release(g), tc_release(rb);
    tc_shutdown();
}

/* uint8 and int32 buffers read as uchar4 / int4 and cast to float4 (pixels
 * scaled to [0,1), integer labels as floats): dev is the device */
static tc_tensor *ints(tc_dtype dt, int64_t rows, int64_t cols, const char *dev) {
    int64_t n = rows * cols;
    void *h = malloc((size_t)n * 4);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++) {
        if (dt == TC_UINT8) ((uint8_t *)h)[i] = (uint8_t)((i * 37) % 256);
        else ((int32_t *)h)[i] = (int32_t)((i * 7919) % 2001) - 1000;
    }
    tc_tensor *t = tc_from_data(h, dt, 2, (int64_t[]){rows, cols}, dev);
    free(h);
    assert_non_null(t);
    return t;
}

/* out[0]: u8 / 255 * x; out[1]: float(i32) + x */
static void int_casts(tc_tensor *u8, tc_tensor *i32, tc_tensor *x, tc_tensor **out) {
    tc_tensor *k = tc_full(0, NULL, 1.0 / 255, TC_FLOAT32, tc_device(x));
    tc_tensor *uf = tc_cast(u8, TC_FLOAT32), *us = tc_mul(uf, k), *fi = tc_cast(i32, TC_FLOAT32);
    out[0] = tc_mul(us, x);
    out[1] = tc_add(fi, x);
    tc_release(k), tc_release(uf), tc_release(us), tc_release(fi);
}

/* a mask on another axis (rows padded) keeps vectors: the load is gated as a
 * whole, 0.0f in every lane outside */
static void test_gated_load(void **state) {
    (void)state;
    tc_tensor *x = rnd(64, 256, 40), *p = tc_pad(x, (int64_t[]){1, 1, 0, 0}), *y = tc_exp(p);
    expect_vec(y, 1, 0, 1, "exp of rows padded");
    rendered r = render_both(y);
    if (!strstr(r.ocl, ":((float4)(0.0f)))")) fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, ":((float4)(0.0f)))"));
    assert_non_null(strstr(r.cuda, ":tc_float4(0.0f))"));
    rendered_free(&r);
    tc_release(x), tc_release(p), tc_release(y);
    tc_shutdown();
}

static void test_int_loads(void **state) {
    (void)state;
    tc_tensor *u8 = ints(TC_UINT8, 64, 256, NULL), *i32 = ints(TC_INT32, 64, 256, NULL);
    tc_tensor *x = rnd(64, 256, 19), *out[2];
    int_casts(u8, i32, x, out);
    expect_vec(out[0], 2, 0, 1, "u8 / 255 * x");
    expect_vec(out[1], 2, 0, 1, "float(i32) + x");
    rendered r = render_both(out[0]);
    if (!strstr(r.ocl, "uchar4 val") || !strstr(r.ocl, "convert_float4(val"))
        fprintf(stderr, "%s", r.ocl);
    assert_non_null(strstr(r.ocl, "uchar4 val"));
    assert_non_null(strstr(r.ocl, "convert_float4(val"));
    assert_non_null(strstr(r.cuda, "(*(const uchar4 *)(data"));
    rendered_free(&r);
    /* an int32 sum stays scalar: int ALUs have no vector form here */
    tc_tensor *isum = tc_add(i32, i32);
    tc_target tg = gpu_target();
    expect_scalar(isum, &tg, "int32 + int32");
    tc_release(u8), tc_release(i32), tc_release(x), tc_release(out[0]), tc_release(out[1]);
    tc_release(isum);
    tc_shutdown();
}

/* ---- fallbacks to scalar lanes ------------------------------------------------------------ */

static void test_fallbacks(void **state) {
    (void)state;
    tc_target tg = gpu_target();
    tc_tensor *odd = rnd(15, 102, 10), *x = rnd(64, 256, 11), *t = rnd(256, 64, 12);
    tc_tensor *wide = rnd(64, 260, 13), *w258 = rnd(64, 258, 14);
    tc_tensor *c1 = tc_exp(odd); /* 15 rows of 102 merge: 4 does not divide 1530 */
    tc_tensor *pad = tc_pad(x, (int64_t[]){0, 0, 2, 2}), *c2 = tc_exp(pad); /* a mask on the axis */
    tc_tensor *tr = tc_permute(t, (int[]){1, 0}), *c3 = tc_add(tr, x);      /* stride 64 along it */
    tc_tensor *fl = tc_reshape(tr, 1, (int64_t[]){64 * 256}),
              *xf = tc_reshape(x, 1, (int64_t[]){64 * 256});
    tc_tensor *c4 = tc_add(fl, xf); /* several views */
    tc_tensor *sh = tc_shrink(wide, (int64_t[]){0, 64, 1, 257}), *c5 = tc_exp(sh); /* offset 1 */
    tc_tensor *sr = tc_shrink(w258, (int64_t[]){0, 64, 0, 256}),
              *c6 = tc_exp(sr); /* row stride 258 */
    tc_tensor *zero = tc_full_like(x, 0), *lt = tc_lt(x, zero), *xi = tc_cast(x, TC_INT32);
    tc_tensor *c7 = tc_cast(xi, TC_FLOAT32); /* a cast through int32: no vector form */
    tc_tensor *le = tc_logical_not(lt), *c9 = tc_where(le, x, zero); /* not: CMPNE of bools */
    tc_tensor *h = tc_cast(x, TC_FLOAT16), *c8 = tc_exp(h);          /* float16 buffers */
    expect_scalar(c1, &tg, "15 x 102");
    expect_scalar(c2, &tg, "padded columns");
    expect_scalar(c3, &tg, "transposed input");
    expect_scalar(c4, &tg, "several views");
    expect_scalar(c5, &tg, "offset 1");
    expect_scalar(c6, &tg, "rows of 258");
    expect_scalar(c7, &tg, "x cast to int32 and back");
    expect_scalar(c9, &tg, "where(not(x < 0), ...)");
    expect_scalar(xi, &tg, "an int32 output");
    expect_scalar(c8, &tg, "float16");
    expect_scalar(lt, &tg, "a bool output");
    tc_flag_put(TC_FLAG_NOOPT, 1);
    tc_tensor *y = tc_exp(x);
    expect_scalar(y, &tg, "TC_NOOPT");
    tc_flag_put(TC_FLAG_NOOPT, 0);
    expect_vec(y, 1, 0, 1, "exp without TC_NOOPT");
    tc_target no_vec = tg;
    no_vec.vec_width = 0;
    expect_scalar(y, &no_vec, "a target without vectors");
    tc_tensor *all[] = {odd, x,  t,  wide, w258, c1, pad, c2, tr, c3, fl, xf, c4,
                        sh,  c5, sr, c6,   zero, lt, c7,  h,  c8, y,  xi, le, c9};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tc_release(all[i]);
    tc_shutdown();
}

/* ---- on the OpenCL device ------------------------------------------------------------ */

static tc_tensor *dev_rnd(int64_t rows, int64_t cols, uint64_t seed) {
    tc_tensor *h = rnd(rows, cols, seed), *d = tc_to_device(h, "OPENCL");
    assert_non_null(d);
    assert_int_equal(tc_realize(&d, 1), TC_OK);
    tc_release(h);
    return d;
}

static bool is_vector_kernel(tc_tensor *t, const tc_target *tg) {
    tc_test_lowered l = tc_test_lower(t, tg);
    bool any = false;
    for (int i = 0; i < l.k->n_uops; i++) any |= l.k->uops[i]->vcount > 1;
    tc_test_lowered_free(&l);
    return any;
}

static void test_on_device(void **state) {
    (void)state;
    int id = tc_device_open("OPENCL", "test");
    if (id < 0) {
        fprintf(stderr, "no OpenCL device: %s\n", tc_last_error());
        skip();
    }
    const tc_target *tg = &tc_device_get(id)->target;
    tc_tensor *a = dev_rnd(64, 520, 20), *b = dev_rnd(64, 520, 21), *c = dev_rnd(64, 520, 22);
    tc_tensor *rb = dev_rnd(64, 1, 23), *odd = dev_rnd(15, 102, 24), *r8 = dev_rnd(8, 256, 25);
    int ax = 0;
    tc_tensor *two = tc_full(0, NULL, 2, TC_FLOAT32, "OPENCL");
    tc_tensor *padr = tc_pad(a, (int64_t[]){3, 1, 0, 0});
    tc_tensor *pad = tc_pad(a, (int64_t[]){0, 0, 2, 2}), *tr = tc_permute(rb, (int[]){1, 0});
    tc_tensor *ta = dev_rnd(520, 64, 26), *at = tc_permute(ta, (int[]){1, 0});
    tc_tensor *ab = tc_mul(a, b), *two_a = tc_mul(a, two), *ra = tc_relu(two_a);
    struct {
        tc_tensor *t;
        bool is_vec;
        const char *what;
    } cases[] = {
        {tc_add(ab, c), true, "a*b+c, 130 vectors a row in lanes of 128 (gated)"},
        {tc_add(ra, rb), true, "relu(2a) + row bias"},
        {tc_sum(r8, 1, &ax, false), true, "sum over 8 rows"},
        {tc_max(r8, 1, &ax, false), true, "max over 8 rows"},
        {tc_sigmoid(a), true, "sigmoid"},
        {tc_exp(odd), false, "exp of 15 x 102"},
        {tc_exp(pad), false, "exp of padded columns"},
        {tc_exp(padr), true, "exp of padded rows (gated vector loads)"},
        {tc_mul(tr, rb), true, "outer product (64,1) x (1,64)"},
        {tc_add(at, a), false, "b.T + a: a transposed input"},
        {tc_sum(a, 1, &ax, false), true, "sum over 64 rows (grouped)"},
        {tc_max(a, 1, &ax, false), true, "max over 64 rows (grouped)"},
        {tc_test_softmax(a, 0), true, "softmax over 64 rows (grouped)"},
        {tc_test_layernorm(a, 0), true, "layernorm over 64 rows (grouped)"},
    };
    int n = (int)(sizeof cases / sizeof *cases);
    /* NaN in some lanes: max keeps it (relu), x != x finds it */
    float h[64 * 8];
    for (int i = 0; i < 64 * 8; i++) h[i] = i % 7 == 3 ? NAN : (float)(i % 11) - 5;
    tc_tensor *xn = tc_from_data(h, TC_FLOAT32, 2, (int64_t[]){64, 8}, "OPENCL");
    tc_tensor *gn = tc_full_like(xn, 3), *rn = tc_relu(xn), *m[N_MASKS];
    assert_true(is_vector_kernel(rn, tg));
    tc_check_schedule(rn, 1, 0, 0, "relu with NaN lanes");
    masks(xn, gn, rb, m);
    for (int i = 0; i < N_MASKS; i++) {
        tc_check_schedule(m[i], 1, 0, 0, mask_names[i]);
        tc_release(m[i]);
    }
    tc_release(xn), tc_release(gn), tc_release(rn);
    masks(a, b, rb, m);
    tc_tensor *u8 = ints(TC_UINT8, 64, 520, "OPENCL"), *i32 = ints(TC_INT32, 64, 520, "OPENCL"),
              *ic[2];
    int_casts(u8, i32, a, ic);
    for (int i = 0; i < 2; i++) {
        assert_true(is_vector_kernel(ic[i], tg));
        tc_check_schedule(ic[i], 1, 1e-6, 1e-6, i ? "float(i32) + a" : "u8 / 255 * a");
        tc_release(ic[i]);
    }
    tc_release(u8), tc_release(i32);
    for (int i = 0; i < N_MASKS; i++) {
        assert_true(is_vector_kernel(m[i], tg));
        /* the row mask 0 < rb is a compare of a broadcast row, recomputed per element */
        tc_check_schedule(m[i], 1, 0, 0, mask_names[i]);
        tc_release(m[i]);
    }
    for (int i = 0; i < n; i++) {
        assert_non_null(cases[i].t);
        if (is_vector_kernel(cases[i].t, tg) != cases[i].is_vec)
            fprintf(stderr, "%s\n", cases[i].what);
        assert_int_equal(is_vector_kernel(cases[i].t, tg), cases[i].is_vec);
        tc_check_schedule(cases[i].t, 1, 1e-5, 1e-6, cases[i].what);
        tc_release(cases[i].t);
    }
    tc_release(a), tc_release(b), tc_release(c), tc_release(rb), tc_release(odd), tc_release(r8);
    tc_release(two), tc_release(pad), tc_release(tr), tc_release(ab), tc_release(two_a),
        tc_release(ra);
    tc_release(ta), tc_release(at), tc_release(padr);
    tc_shutdown();
}

/* ---- CUDA: the vector kernels compile with NVRTC, without warnings ------------------------ */

static void test_cuda_compiles(void **state) {
    (void)state;
    tc_test_need_nvrtc();
    tc_tensor *x = rnd(64, 256, 30), *y = rnd(64, 256, 31), *rb = rnd(64, 1, 32),
              *r8 = rnd(8, 256, 33);
    tc_tensor *outs[N_VEC_OPS + 4 + N_MASKS + 3 + 2 + 1];
    tc_tensor *u8 = ints(TC_UINT8, 64, 256, NULL), *i32 = ints(TC_INT32, 64, 256, NULL);
    int ax = 0;
    for (int i = 0; i < N_VEC_OPS; i++) outs[i] = vec_op(i, x);
    tc_tensor *xy = tc_mul(x, y);
    outs[N_VEC_OPS] = tc_add(xy, rb);
    outs[N_VEC_OPS + 1] = tc_sum(r8, 1, &ax, false);
    outs[N_VEC_OPS + 2] = tc_max(r8, 1, &ax, false);
    outs[N_VEC_OPS + 3] = tc_maximum(x, y);
    masks(x, y, rb, outs + N_VEC_OPS + 4);
    outs[N_VEC_OPS + 4 + N_MASKS] = tc_sum(x, 1, &ax, false);
    outs[N_VEC_OPS + 5 + N_MASKS] = tc_test_softmax(x, 0);
    outs[N_VEC_OPS + 6 + N_MASKS] = tc_test_layernorm(x, 0);
    int_casts(u8, i32, x, outs + N_VEC_OPS + 7 + N_MASKS);
    tc_tensor *xp = tc_pad(x, (int64_t[]){1, 1, 0, 0});
    outs[N_VEC_OPS + 9 + N_MASKS] = tc_exp(xp); /* gated vector loads */
    tc_release(xp);
    tc_release(u8), tc_release(i32);
    for (int i = 0; i < N_VEC_OPS + 4 + N_MASKS + 3 + 2 + 1; i++) {
        assert_non_null(outs[i]);
        tc_test_lowered l = tc_test_lower(outs[i], &tc_dialect_cuda.target);
        bool any = false;
        for (int j = 0; j < l.k->n_uops; j++) any |= l.k->uops[j]->vcount > 1;
        assert_true(any);
        char *src = tc_render(&tc_dialect_cuda, l.k);
        assert_non_null(src);
        tc_status st = tc_cuda_compile(src, l.k->name, "sm_80", true, NULL);
        if (st != TC_OK) fprintf(stderr, "%s\n%s", tc_last_error(), src);
        assert_int_equal(st, TC_OK);
        tc_free(src);
        tc_test_lowered_free(&l);
        tc_release(outs[i]);
    }
    tc_release(x), tc_release(y), tc_release(rb), tc_release(r8), tc_release(xy);
    tc_shutdown();
}

int main(void) {
    setenv("TC_CACHEDIR", "/tmp/tc_test_gpuvec_cache", 0);
    unsetenv("TC_DEVICE");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_map),        cmocka_unit_test(test_consts_once),
        cmocka_unit_test(test_broadcast),  cmocka_unit_test(test_reduce_store),
        cmocka_unit_test(test_ops),        cmocka_unit_test(test_masks),
        cmocka_unit_test(test_grouped),    cmocka_unit_test(test_int_loads),
        cmocka_unit_test(test_gated_load), cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_on_device),  cmocka_unit_test(test_cuda_compiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
