/* test_opt.c - the CPU kernel optimizer (codegen/opt.c): the plans it picks
 * for a matmul, a conv and a row sum on 32- and 16-register targets, that
 * the planned matmul kernel the C compiler builds really uses packed SIMD
 * FMAs (on x86-64 with AVX), and that planned kernels (clamped tiles, split
 * reduces, blocked reduces, stores in loops over the tile, plans given as
 * TC_BEAM writes them) give the reference's numbers, and that the tile and
 * block sizes follow the SIMD and L1d the CPU device reports (faked through
 * TC_CPU_ISA and TC_CPU_L1D), and a dot tile's loop order its L2 and L3;
 * a reduce over a deep DAG of shared operands plans in linear time. */
#include "tc_test.h"

#include "codegen/codegen.h"
#include "engine/engine.h"
#include "render/render.h"
#include "runtime/runtime.h"
#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const tc_target avx512 = {.simd_floats = 16, .simd_regs = 32};
static const tc_target avx2 = {.simd_floats = 8, .simd_regs = 16};
static const tc_target avx512v = {.simd_floats = 16, .simd_regs = 32, .has_vec = true};
static const tc_target avx2v = {.simd_floats = 8, .simd_regs = 16, .has_vec = true};

/* the plan of the only kernel of t's schedule */
static tc_kopt plan_of(tc_tensor *t, const tc_target *tg, tc_schedule **keep) {
    tc_node *b = tc_node_base(tc_tensor_node(t));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_non_null(s);
    assert_int_equal(s->n_items, 1);
    tc_kopt p;
    tc_opt_choose(&s->items[0], tg, &p);
    if (keep) *keep = s;
    else tc_schedule_free(s);
    return p;
}

/* the C source of t's only kernel for target tg (NULL: the CPU device's) in
 * the CPU device's dialect (free it) */
static char *kernel_source_for(tc_tensor *t, const tc_target *tg) {
    tc_dev *d = tc_device_get(0);
    assert_non_null(d);
    if (!tg) tg = &d->target;
    tc_schedule *s = NULL;
    plan_of(t, tg, &s);
    tc_kernel_uops *k = tc_codegen(&s->items[0], tg);
    assert_non_null(k);
    char *src = tc_render(d->dialect, k);
    assert_non_null(src);
    tc_kernel_uops_free(k);
    tc_schedule_free(s);
    return src;
}

static char *kernel_source(tc_tensor *t) {
    return kernel_source_for(t, NULL);
}

/* t's kernel holds vector values (the renderer's float vector types) */
static bool has_vectors(tc_tensor *t) {
    char *src = kernel_source(t);
    bool v = strstr(src, "tc_float") != NULL;
    free(src);
    return v;
}

static tc_tensor *matmul(int64_t m, int64_t k, int64_t n) {
    int64_t sa[2] = {m, k}, sb[2] = {k, n};
    tc_tensor *a = tc_rand(2, sa, TC_FLOAT32, NULL), *b = tc_rand(2, sb, TC_FLOAT32, NULL);
    tc_tensor *ab[2] = {a, b};
    assert_int_equal(tc_realize(ab, 2), TC_OK);
    tc_tensor *c = tc_matmul(a, b);
    tc_release(a);
    tc_release(b);
    return c;
}

static void test_plan_matmul(void **state) {
    (void)state;
    tc_tensor *c = matmul(96, 128, 256);
    /* scalar copies (plain C): 6 rows of 32 columns, two vectors' worth for
     * the compiler's SLP, as many as the cost rule's BODY_OPS allows (4
     * vectors of 16, 6 x 64 copies, were 908 weighted ops) */
    tc_kopt p = plan_of(c, &avx512, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.axis[0], 0);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.axis[1], 1);
    assert_int_equal(p.amt[1], 32);
    /* 16 registers: 6 rows of 2 vectors (12 accumulators, 2 vectors, a
     * broadcast and one to spare); 3 rows of 4 would leave none to spare */
    p = plan_of(c, &avx2, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 16);
    tc_set_flag("TC_NOOPT", 1);
    p = plan_of(c, &avx512, NULL);
    tc_set_flag("TC_NOOPT", 0);
    assert_int_equal(p.n, 0);
    tc_release(c);
}

static void test_plan_clamped_rows(void **state) {
    (void)state;
    tc_tensor *c = matmul(100, 32, 64); /* 6 rows do not divide 100: clamped */
    tc_kopt p = plan_of(c, &avx512, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 6);
    tc_check_schedule(c, 1, 1e-5, 1e-5, "clamped matmul 100x32x64");
    tc_release(c);
}

/* 64 rows under a tile of 2 vectors (at most 14 rows with 32 registers):
 * 5 blocks of 13 rows, one row clamped, not 5 of 14 with 6 clamped; the
 * gated stores of the clamped row's vector lanes after the first leave no
 * empty blocks in the source */
static void test_plan_spread_rows(void **state) {
    (void)state;
    tc_tensor *c = matmul(64, 48, 32);
    tc_kopt p = plan_of(c, &avx512, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 13);
    assert_int_equal(p.amt[1], 32);
    char *src = kernel_source_for(c, &avx512v);
    assert_non_null(strstr(src, "if ("));
    for (const char *b = strchr(src, '{'); b; b = strchr(b + 1, '{')) {
        const char *e = b + 1;
        while (*e == ' ' || *e == '\n') e++;
        if (*e == '}') fail_msg("an empty block in the kernel: ...%.80s", b > src + 40 ? b - 40 : src);
    }
    free(src);
    tc_check_schedule(c, 1, 1e-5, 1e-5, "matmul 64x48x32, rows spread");
    tc_release(c);
}

static tc_tensor *matmul_t(int64_t m, int64_t k, int64_t n, bool x_u8);
static char *kernel_source_for(tc_tensor *t, const tc_target *tg);

/* a realized random float32 tensor, scaled by k */
static tc_tensor *rand_scaled(int ndim, const int64_t *shape, double k) {
    tc_tensor *r = tc_randn(ndim, shape, TC_FLOAT32, NULL), *kk = tc_full(0, NULL, k, TC_FLOAT32, NULL);
    tc_tensor *x = tc_mul(r, kk);
    tc_release(r), tc_release(kk);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    return x;
}

/* A long reduced axis that no vector divides (a prime 1,031; a vocabulary
 * of 50,257) is split into 2 vectors of partial sums over its whole steps
 * and a scalar tail loop over the rest (codegen/lower.c): it was a single
 * scalar chain (50,257: 29 x 1,733 gave no vector split), 110 -> 10 ms for
 * log_softmax over 256 x 50,257 (Zen 5, 1 thread). Every reduce kind with a
 * tail against the reference: max and sum (softmax, whose exp is also a
 * saved value, stored by the vector loop and the tail), a tail inside the
 * loop of an outer reduced axis, a dot tile with rows, an int32 sum (no
 * vector form: scalar partials and their tail). */
static void test_plan_tail(void **state) {
    (void)state;
    tc_tensor *x = rand_scaled(2, (int64_t[]){4, 1031}, 3);
    tc_tensor *y = tc_softmax(x, 1);
    tc_kopt p = plan_of(y, &avx512v, NULL);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.amt[0], 32);
    assert_int_equal(p.lanes, 16);
    /* its store loop (exp, then the scale) runs 1031 times, no whole
     * number of vectors: gcc -O2's own cost model kept it scalar (softmax
     * over 256 x 50257: 62 ms, 8.7 ms with the dynamic model); a kernel
     * without a tile of copies asks for the dynamic one, a tile does not */
    char *src = kernel_source_for(y, &avx512v);
    assert_non_null(strstr(src, "vect-cost-model=dynamic"));
    free(src);
    tc_tensor *mm = matmul(64, 48, 32);
    src = kernel_source_for(mm, &avx512v);
    assert_null(strstr(src, "vect-cost-model"));
    free(src);
    tc_release(mm);
    tc_check_schedule(y, 1, 1e-5, 1e-7, "softmax over 1031");
    tc_release(y);
    y = tc_log_softmax(x, 1);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "log_softmax over 1031");
    tc_release(y), tc_release(x);
    x = rand_scaled(3, (int64_t[]){4, 3, 1031}, 1);
    y = tc_sum(x, 2, (int[]){1, 2}, false);
    tc_check_schedule(y, 1, 1e-5, 1e-4, "sum over 3 x 1031");
    tc_release(y), tc_release(x);
    y = matmul_t(8, 1031, 12, false);
    p = plan_of(y, &avx512v, NULL);
    assert_int_equal(p.amt[p.n - 1] % 16, 0);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "x @ w.T over 1031");
    tc_release(y);
    x = rand_scaled(2, (int64_t[]){3, 50257}, 3);
    y = tc_log_softmax(x, 1);
    /* 50,257 exps summed in 32 chains and a tail, the reference's in one:
     * the log of the sum differs by up to 5e-5 */
    tc_check_schedule(y, 1, 1e-4, 1e-4, "log_softmax over 50257");
    tc_release(y);
    tc_tensor *xi = tc_cast(x, TC_INT32);
    y = tc_sum(xi, 1, (int[]){1}, false);
    tc_check_schedule(y, 1, 0, 0, "int32 sum over 50257");
    tc_release(y), tc_release(xi), tc_release(x);
}

/* Masks in a reduce's body have a vector form (lanes of -1 or 0: the C
 * renderer's tc_maskN): a compare of int32 or float32 lanes, its logic, a
 * select and a mask's cast to 1.0f; an op of one value per row (the log of
 * an earlier reduce) is a scalar outside the stage, of any kind. Cross-
 * entropy's one-hot pick (labels == class ids, cast, times log_softmax)
 * kept its rows kernel scalar: 256 x 50,257 took 27-31 ms, now 6 (Zen 5, 1
 * thread). Against the reference: cross-entropy per row over 1031 classes
 * (a vector split with a tail), a relu-gated sum, a where between two
 * products. */
static void test_vector_masks(void **state) {
    (void)state;
    tc_tensor *x = rand_scaled(2, (int64_t[]){8, 1031}, 3);
    tc_tensor *lf = rand_scaled(1, (int64_t[]){8}, 100), *ab = tc_abs(lf);
    tc_tensor *labels = tc_cast(ab, TC_INT32);
    tc_release(lf), tc_release(ab);
    assert_int_equal(tc_realize(&labels, 1), TC_OK);
    tc_tensor *y = tc_cross_entropy_ex(x, labels, TC_REDUCTION_NONE, -100, 0.0);
    assert_non_null(y);
    tc_schedule *s = NULL;
    tc_kopt p = plan_of(y, &avx512v, &s);
    assert_true(tc_opt_vec_ok(&s->items[0], 1, false, NULL));
    assert_int_equal(p.lanes, 16);
    tc_schedule_free(s);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "cross-entropy rows over 1031 classes");
    tc_release(y);
    tc_tensor *w = rand_scaled(2, (int64_t[]){8, 1031}, 1), *z = tc_full(0, NULL, 0, TC_FLOAT32, NULL);
    tc_tensor *gt = tc_gt(x, z), *xw = tc_mul(x, w), *gated = tc_where(gt, xw, z);
    y = tc_sum(gated, 1, (int[]){1}, false);
    p = plan_of(y, &avx512v, NULL);
    assert_int_equal(p.lanes, 16);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "sum of where(x > 0, x * w, 0)");
    tc_release(y), tc_release(gated);
    tc_tensor *lt = tc_gt(w, x), *both = tc_logical_and(gt, lt), *xx = tc_mul(x, x);
    tc_tensor *sel = tc_where(both, xw, xx);
    y = tc_sum(sel, 1, (int[]){1}, false);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "sum of where(x > 0 and w > x, x * w, x * x)");
    tc_release(y), tc_release(sel), tc_release(xx), tc_release(both), tc_release(lt), tc_release(gt);
    tc_release(xw), tc_release(z), tc_release(w), tc_release(labels), tc_release(x);
}

/* y = conv2d(x, w) (stride 1, unpadded) of realized random x and w, and
 * its schedule: w's channels-last copy (nnops.c), then the conv */
static tc_schedule *conv_schedule(const int64_t sx[4], const int64_t sw[4], tc_tensor *xwy[3]) {
    xwy[0] = tc_rand(4, sx, TC_FLOAT32, NULL), xwy[1] = tc_rand(4, sw, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(xwy, 2), TC_OK);
    xwy[2] = tc_conv2d(xwy[0], xwy[1], NULL, 1, 0);
    assert_non_null(xwy[2]);
    tc_node *b = tc_node_base(tc_tensor_node(xwy[2]));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_non_null(s);
    assert_int_equal(s->n_items, 2);
    return s;
}

static void test_plan_conv(void **state) {
    (void)state;
    /* w is read channels-last: the tile runs along the 16 output channels,
     * one vector, with the 10 output columns as rows */
    tc_tensor *xwy[3];
    tc_schedule *s = conv_schedule((int64_t[]){2, 8, 12, 12}, (int64_t[]){16, 8, 3, 3}, xwy);
    const tc_sched_item *it = &s->items[1];
    tc_kopt p;
    tc_opt_choose(it, &avx512, &p);
    assert_int_equal(p.n, 2);
    assert_int_equal(it->full_shape[p.axis[1]], 16);
    assert_int_equal(p.amt[1], 16);
    assert_int_equal(it->full_shape[p.axis[0]], 10);
    assert_int_equal(p.amt[0], 10);
    tc_schedule_free(s);
    tc_check_schedule(xwy[2], 2, 1e-4, 1e-5, "conv 8->16 3x3");
    tc_release(xwy[0]), tc_release(xwy[1]), tc_release(xwy[2]);
}

static void test_plan_split_sum(void **state) {
    (void)state;
    int64_t sh[2] = {12, 4096};
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL);
    int ax = 1;
    tc_tensor *s = tc_sum(x, 1, &ax, false), *m = tc_max(x, 1, &ax, false);
    tc_kopt p = plan_of(s, &avx512, NULL);
    /* the row split into 32 partial sums (two vectors), one row at a time */
    assert_int_equal(p.n, 1);
    assert_int_equal(p.axis[0], 1);
    assert_int_equal(p.amt[0], 32);
    tc_check_schedule(s, 1, 1e-5, 1e-4, "split row sum");
    tc_check_schedule(m, 1, 0, 0, "split row max (exact)");
    tc_release(x);
    tc_release(s);
    tc_release(m);
}

/* a reduce over a long fused chain whose every level reads the one below
 * twice (sin(y) + y): the AST is a DAG of 2 x 64 levels but 2^64 paths,
 * and the optimizer's walk of it must be linear in its nodes (the walk
 * of every path took 0.14 s at 22 levels, 1.8 s at 26: a 64-level chain
 * would never plan) */
static void test_shared_chain(void **state) {
    (void)state;
    int64_t sh[2] = {16, 64};
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL), *y = x;
    tc_retain(y);
    for (int i = 0; i < 64; i++) {
        tc_tensor *sy = tc_sin(y), *next = tc_add(sy, y);
        tc_release(sy), tc_release(y);
        y = next;
    }
    tc_tensor *xy = tc_mul(y, x);
    int ax = 1;
    tc_tensor *s = tc_sum(xy, 1, &ax, false);
    (void)plan_of(s, &avx512, NULL); /* plans (a tile or none), in linear time */
    tc_check_schedule(s, 1, 1e-4, 1e-4, "sum over a 64-level shared chain");
    tc_release(x), tc_release(y), tc_release(xy), tc_release(s);
}

/* x @ w.T: both inputs read along the reduce; w reused by rows of x, x by rows of w */
static tc_tensor *matmul_t(int64_t m, int64_t k, int64_t n, bool x_u8) {
    int64_t sx[2] = {m, k}, sw[2] = {n, k};
    tc_tensor *x = tc_rand(2, sx, TC_FLOAT32, NULL);
    if (x_u8) { /* 0..254 */
        tc_tensor *f = tc_full(2, sx, 255, TC_FLOAT32, NULL), *xk = tc_mul(x, f);
        tc_release(x), tc_release(f);
        x = tc_cast(xk, TC_UINT8);
        tc_release(xk);
    }
    tc_tensor *w = tc_randn(2, sw, TC_FLOAT32, NULL);
    tc_tensor *xw[2] = {x, w};
    assert_int_equal(tc_realize(xw, 2), TC_OK);
    tc_tensor *xf = x_u8 ? tc_cast(x, TC_FLOAT32) : x;
    tc_tensor *wt = tc_transpose(w, 0, 1), *c = tc_matmul(xf, wt);
    if (x_u8) tc_release(xf);
    tc_release(x), tc_release(w), tc_release(wt);
    return c;
}

/* vector partials along the reduce (a dot tile) on a target that prints vectors */
static void test_plan_dot(void **state) {
    (void)state;
    tc_tensor *c = matmul_t(64, 784, 128, false);
    tc_schedule *s = NULL;
    tc_kopt p = plan_of(c, &avx512v, &s);
    const tc_sched_item *it = &s->items[0];
    /* 4x4 rows of the two outputs axes, one vector of 16 partials along 784 */
    assert_int_equal(p.n, 3);
    assert_int_equal(p.amt[0], 4);
    assert_int_equal(p.amt[1], 4);
    assert_true((it->reduce_axes >> p.axis[2]) & 1);
    assert_int_equal(p.amt[2], 16);
    assert_int_equal(p.lanes, 16);
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    tc_kopt back;
    assert_true(tc_opt_parse(it, text, &back));
    assert_memory_equal(&back, &p, sizeof p);
    tc_schedule_free(s);
    p = plan_of(c, &avx512, NULL); /* no vectors: the split alone, as scalars */
    assert_int_equal(p.n, 1);
    assert_int_equal(p.lanes, 0);
    tc_release(c);
}

/* a register tile's columns are vectors in the reduce stage (one
 * accumulator per row and vector of columns; each output its lane) */
static void test_tile_vectors(void **state) {
    (void)state;
    tc_tensor *c = matmul(96, 128, 256);
    tc_kopt p = plan_of(c, &avx512v, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.lanes, 16);
    assert_true(has_vectors(c));
    tc_check_schedule(c, 1, 1e-5, 1e-5, "matmul, vector tile columns");
    tc_release(c);
    /* dout.T @ x with x uint8 (MNIST's first weight gradient): the cast in vectors */
    int64_t sx[2] = {64, 784}, sd[2] = {64, 32};
    tc_tensor *x = tc_rand(2, sx, TC_FLOAT32, NULL), *f = tc_full(2, sx, 255, TC_FLOAT32, NULL);
    tc_tensor *xf = tc_mul(x, f), *xu = tc_cast(xf, TC_UINT8), *d = tc_randn(2, sd, TC_FLOAT32, NULL);
    tc_tensor *ins[2] = {xu, d};
    assert_int_equal(tc_realize(ins, 2), TC_OK);
    tc_tensor *xc = tc_cast(xu, TC_FLOAT32), *dt = tc_transpose(d, 0, 1), *g = tc_matmul(dt, xc);
    assert_true(has_vectors(g));
    tc_check_schedule(g, 1, 1e-5, 1e-3, "dout.T @ uint8 x, vector tile columns");
    tc_release(x), tc_release(f), tc_release(xf), tc_release(xu), tc_release(d);
    tc_release(xc), tc_release(dt), tc_release(g);
    /* int8 lanes, negative ones too: widened through 16 bits (cstyle.c's
     * narrow casts), the sign kept */
    tc_tensor *r = tc_rand(2, sx, TC_FLOAT32, NULL), *s255 = tc_full(2, sx, 255, TC_FLOAT32, NULL);
    tc_tensor *o128 = tc_full(2, sx, 128, TC_FLOAT32, NULL), *rs = tc_mul(r, s255), *rc = tc_sub(rs, o128);
    tc_tensor *xi = tc_cast(rc, TC_INT8), *d2 = tc_randn(2, sd, TC_FLOAT32, NULL);
    tc_tensor *ins2[2] = {xi, d2};
    assert_int_equal(tc_realize(ins2, 2), TC_OK);
    tc_tensor *xic = tc_cast(xi, TC_FLOAT32), *d2t = tc_transpose(d2, 0, 1), *g2 = tc_matmul(d2t, xic);
    char *src = kernel_source(g2);
    bool through16 = strstr(src, "tc_short") != NULL;
    free(src);
    assert_true(through16);
    tc_check_schedule(g2, 1, 1e-5, 1e-3, "dout.T @ int8 x, vector tile columns");
    tc_release(r), tc_release(s255), tc_release(o128), tc_release(rs), tc_release(rc);
    tc_release(xi), tc_release(d2), tc_release(xic), tc_release(d2t), tc_release(g2);
}

/* embedding rows read along a tile's columns (GPT-2's wpe gradient with
 * the embedding fused): one index for every lane, so the gathered load is
 * a vector load gated as a whole (lower_index.c), not 32 scalar gated
 * loads; an index past the table reads zeros, -1 the last row */
static void test_gather_vectorized(void **state) {
    (void)state;
    int64_t sw[2] = {50, 64}, si[2] = {4, 8}, sx[3] = {4, 8, 64};
    int32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = (i * 7) % 50;
    ids[3] = 50, ids[5] = -1;
    tc_tensor *w = tc_randn(2, sw, TC_FLOAT32, NULL), *x = tc_randn(3, sx, TC_FLOAT32, NULL);
    tc_tensor *id = tc_from_data(ids, TC_INT32, 2, si, NULL);
    tc_tensor *ins[3] = {w, x, id};
    assert_int_equal(tc_realize(ins, 3), TC_OK);
    tc_tensor *e = tc_index(w, 0, id), *p = tc_mul(e, x), *y = tc_sum(p, 1, (int[]){0}, false);
    tc_kopt pl = plan_of(y, &avx512v, NULL);
    assert_int_equal(pl.lanes, 16);
    char *src = kernel_source(y);
    bool vec_gather = strstr(src, "?*(const tc_float") != NULL; /* a gated vector load */
    if (!vec_gather) fprintf(stderr, "%s\n", src);
    free(src);
    assert_true(vec_gather);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "sum over the batch of embedding rows * x");
    tc_release(w), tc_release(x), tc_release(id), tc_release(e), tc_release(p), tc_release(y);
}

/* a LayerNorm over gathered embedding rows plus two more inputs (the test
 * GPT-2's first LayerNorm): the gather's index arithmetic and the fold of
 * every row's vector partials count in the plan's size, so its rows stay a
 * few (16 rows of two 16-lane sums: 430 lines, 0.4-0.6 s of gcc; with them
 * counted 4 rows, 0.2 s, no slower to run) */
static void test_plan_gather_layernorm(void **state) {
    (void)state;
    int64_t sw[2] = {256, 64}, si[2] = {8, 32}, sp[2] = {32, 64}, sh[3] = {8, 32, 64};
    int32_t ids[256];
    for (int i = 0; i < 256; i++) ids[i] = (i * 37) % 256;
    tc_tensor *w = tc_randn(2, sw, TC_FLOAT32, NULL), *pos = tc_randn(2, sp, TC_FLOAT32, NULL);
    tc_tensor *h = tc_randn(3, sh, TC_FLOAT32, NULL), *b = tc_randn(1, (int64_t[]){64}, TC_FLOAT32, NULL);
    tc_tensor *id = tc_from_data(ids, TC_INT32, 2, si, NULL);
    tc_tensor *ins[5] = {w, pos, h, b, id};
    assert_int_equal(tc_realize(ins, 5), TC_OK);
    tc_tensor *e = tc_index(w, 0, id), *hb = tc_add(h, b), *x0 = tc_add(e, pos), *x = tc_add(x0, hb);
    tc_tensor *y = tc_layernorm(x, 2, 1e-5);
    tc_schedule *s = NULL;
    tc_kopt pl = plan_of(y, &avx512v, &s);
    const tc_sched_item *it = &s->items[0];
    int64_t kept = 1;
    for (int i = 0; i < pl.n; i++)
        if (!((it->reduce_axes >> pl.axis[i]) & 1)) kept *= pl.amt[i];
    assert_int_equal(pl.lanes, 16);
    assert_true(kept >= 2 && kept <= 4);
    tc_schedule_free(s);
    tc_check_schedule(y, 1, 1e-4, 1e-4, "LayerNorm of gathered rows + positions + h + bias");
    tc_release(w), tc_release(pos), tc_release(h), tc_release(b), tc_release(id);
    tc_release(e), tc_release(hb), tc_release(x0), tc_release(x), tc_release(y);
}

/* batchnorm's per-channel sum over (n, y, x) with rows of 20 (a view of
 * wider rows, so y and x stay two axes): the row whole in 5 vectors of 4,
 * 8 channels at a time as independent streams */
static void test_plan_short_rows(void **state) {
    (void)state;
    int64_t sh[4] = {6, 32, 20, 24}, cut[8] = {0, 6, 0, 32, 0, 20, 0, 20};
    tc_tensor *xw = tc_randn(4, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&xw, 1), TC_OK);
    tc_tensor *x = tc_shrink(xw, cut);
    tc_release(xw);
    int axes[3] = {0, 2, 3};
    tc_tensor *s = tc_sum(x, 3, axes, false);
    tc_schedule *sc = NULL;
    tc_kopt p = plan_of(s, &avx512v, &sc);
    const tc_sched_item *it = &sc->items[0];
    assert_int_equal(p.n, 2);
    assert_int_equal(it->full_shape[p.axis[0]], 32);
    assert_int_equal(p.amt[0], 8);
    assert_int_equal(it->full_shape[p.axis[1]], 20);
    assert_int_equal(p.amt[1], 20);
    assert_int_equal(p.lanes, 4);
    tc_schedule_free(sc);
    tc_check_schedule(s, 1, 1e-5, 1e-4, "per-channel sum, short rows");
    tc_release(s), tc_release(x);
}

/* kernels with vector partials on this machine give the reference's numbers */
static void test_vector_partials(void **state) {
    (void)state;
    tc_tensor *c = matmul_t(64, 784, 128, false);
    tc_check_schedule(c, 1, 1e-4, 1e-4, "x @ w.T, vector partials");
    tc_release(c);
    c = matmul_t(33, 784, 10, true); /* uint8 x cast in the kernel; rows clamped nowhere */
    tc_check_schedule(c, 1, 1e-4, 1e-3, "uint8 x @ w.T, vector partials");
    tc_release(c);
    int64_t sh[2] = {50, 20};
    tc_tensor *x = tc_randn(2, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    int ax = 1;
    tc_tensor *sm = tc_sum(x, 1, &ax, false), *mx = tc_max(x, 1, &ax, false);
    tc_check_schedule(sm, 1, 1e-5, 1e-5, "row sum of 20 (4 lanes)");
    tc_check_schedule(mx, 1, 0, 0, "row max of 20 (exact)");
    tc_release(sm), tc_release(mx);
    /* softmax's denominator: max and exp2 (the prelude's, lane-wise) in vectors */
    tc_tensor *m = tc_max(x, 1, &ax, true), *d = tc_sub(x, m), *e = tc_exp(d), *se = tc_sum(e, 1, &ax, false);
    assert_true(has_vectors(se));
    tc_check_schedule(se, 1, 1e-5, 1e-5, "sum(exp(x - max))");
    /* log has no vector form: scalar partials */
    tc_tensor *ax2 = tc_abs(x), *lg = tc_log(ax2), *sl = tc_sum(lg, 1, &ax, false);
    assert_false(has_vectors(sl));
    tc_check_schedule(sl, 1, 1e-5, 1e-5, "sum(log|x|), scalar partials");
    tc_release(m), tc_release(d), tc_release(e), tc_release(se), tc_release(x);
    tc_release(ax2), tc_release(lg), tc_release(sl);
    /* exp2's special values lane by lane: NaN, +-inf, overflow, underflow */
    float sp[2 * 16] = {0, 1, -1, 0.5f, 127.9f, 128, -149, -150, -151, 3.3f, -7.7f, 20, 1e-3f, 100, -100, 64};
    for (int i = 16; i < 32; i++) sp[i] = sp[i - 16] * 0.5f;
    sp[16 + 3] = __builtin_inff(), sp[16 + 4] = -__builtin_inff();
    int64_t ss[2] = {2, 16};
    tc_tensor *xs = tc_from_data(sp, TC_FLOAT32, 2, ss, NULL), *e2 = tc_exp2(xs), *s2 = tc_sum(e2, 1, &ax, false);
    assert_true(has_vectors(s2));
    tc_check_schedule(s2, 1, 1e-6, 0, "sum(exp2(x)) of special values");
    tc_release(e2), tc_release(s2);
    sp[7] = __builtin_nanf("");
    tc_tensor *xn = tc_from_data(sp, TC_FLOAT32, 2, ss, NULL), *en = tc_exp2(xn), *sn = tc_sum(en, 1, &ax, false);
    float gn[2];
    assert_int_equal(tc_to_host(sn, gn, sizeof gn), TC_OK);
    assert_true(gn[0] != gn[0] && gn[1] == __builtin_inff());
    tc_release(xs), tc_release(xn), tc_release(en), tc_release(sn);
    /* NaN wins a max, -inf loses, in every lane position */
    float v[4 * 32];
    for (int i = 0; i < 4 * 32; i++) v[i] = (float)(i % 7) - 3.0f;
    v[5] = __builtin_nanf(""), v[32 + 31] = __builtin_inff(), v[64 + 16] = -__builtin_inff();
    int64_t sv[2] = {4, 32};
    tc_tensor *xv = tc_from_data(v, TC_FLOAT32, 2, sv, NULL), *mv = tc_max(xv, 1, &ax, false);
    float got[4];
    assert_int_equal(tc_to_host(mv, got, sizeof got), TC_OK);
    assert_true(got[0] != got[0]);
    assert_true(got[1] == __builtin_inff());
    assert_true(got[2] == 3.0f && got[3] == 3.0f);
    tc_release(xv), tc_release(mv);
}

/* a conv's weight gradient reduces over (batch, y, x): dot tiles along x */
static void test_conv_weight_grad(void **state) {
    (void)state;
    for (int pad = 0; pad < 2; pad++) {
        int64_t sx[4] = {3, 4, 12, 12}, sw[4] = {8, 4, 5, 5};
        tc_tensor *x = tc_randn(4, sx, TC_FLOAT32, NULL), *w = tc_randn(4, sw, TC_FLOAT32, NULL);
        tc_set_requires_grad(w, true);
        tc_tensor *xw[2] = {x, w};
        assert_int_equal(tc_realize(xw, 2), TC_OK);
        tc_tensor *y = tc_conv2d(x, w, NULL, 1, pad), *l = tc_sum(y, 0, NULL, false);
        assert_int_equal(tc_backward(l), TC_OK);
        tc_tensor *g = tc_grad(w);
        int kernels = tc_schedule_kernel_count(&g, 1);
        tc_check_schedule(g, kernels, 1e-4, 1e-4, pad ? "conv weight grad, padded" : "conv weight grad");
        tc_release(g), tc_release(y), tc_release(l), tc_release(x), tc_release(w);
    }
}

/* a tiled kernel whose tile is larger than the axis it covers */
static void test_small_shapes(void **state) {
    (void)state;
    int64_t dims[][3] = {{1, 1, 1}, {3, 5, 7}, {7, 64, 2}, {13, 17, 130}, {5, 33, 64}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        tc_tensor *c = matmul(dims[i][0], dims[i][1], dims[i][2]);
        char what[64];
        snprintf(what, sizeof what, "matmul %lldx%lldx%lld", (long long)dims[i][0],
                 (long long)dims[i][1], (long long)dims[i][2]);
        tc_check_schedule(c, 1, 1e-5, 1e-5, what);
        tc_release(c);
    }
    /* 130 columns are no whole vectors of 16: a tile of scalar copies, at
     * most opt.c's SCALAR_COPIES (64) of them (13 x 26 = 338 were 1,070
     * lines and 0.38 s of gcc, 128 still 0.37-0.55 s) */
    tc_tensor *c = matmul(13, 17, 130);
    tc_kopt p = plan_of(c, &avx512v, NULL);
    int64_t copies = 1;
    for (int i = 0; i < p.n; i++) copies *= p.amt[i];
    assert_true(p.lanes > 1 || copies <= 64);
    tc_release(c);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* packed FMAs in the assembly gcc makes of t's only kernel, built with the
 * CPU runtime's flags: on ymm or zmm, or on xmm as well where the device
 * plans for 4 lanes (it opened under TC_CPU_ISA=sse2) */
static int packed_fmas(tc_tensor *t) {
    const char *regs = tc_device_get(0)->target.simd_floats >= 8 ? "yz" : "xyz";
    char *src = kernel_source(t);
    char dir[] = "/tmp/tc_test_opt_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cpath[128], spath[128], cmd[1024];
    snprintf(cpath, sizeof cpath, "%s/k.c", dir);
    snprintf(spath, sizeof spath, "%s/k.s", dir);
    FILE *f = fopen(cpath, "w");
    assert_non_null(f);
    fputs(src, f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cc -O2 -march=native -fno-math-errno -fwrapv -fexcess-precision=standard -std=gnu11 "
             "-S -o %s %s && grep -cE 'vfmadd[0-9]+ps[^\\n]*%%[%s]mm' %s > %s/n",
             spath, cpath, regs, spath, dir);
    int rc = system(cmd);
    (void)rc; /* grep -c exits 1 on no match: the count says it */
    snprintf(cpath, sizeof cpath, "%s/n", dir);
    f = fopen(cpath, "r");
    assert_non_null(f);
    int packed = 0;
    assert_int_equal(fscanf(f, "%d", &packed), 1);
    fclose(f);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    free(src);
    return packed;
}
#endif

/* asserts that t's only kernel has at least `least` packed FMAs in gcc's
 * assembly (prints the count under `what`); false where that cannot be
 * checked (not x86-64 with AVX2) */
static bool check_packed_fmas(tc_tensor *t, int least, const char *what) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (!__builtin_cpu_supports("avx2")) return false;
    int packed = packed_fmas(t);
    fprintf(stderr, "packed FMAs in %s: %d\n", what, packed);
    assert_true(packed >= least);
    return true;
#else
    (void)t, (void)least, (void)what;
    return false;
#endif
}

/* does the C compiler turn the planned matmul into packed FMAs? */
static void test_vectorized(void **state) {
    (void)state;
    tc_tensor *c = matmul(96, 128, 256);
    /* a 6x64 (or 6x16) tile is 24 (or 12) packed FMAs per step of the reduce */
    bool checked = check_packed_fmas(c, 12, "the matmul kernel");
    tc_release(c);
    if (!checked) skip();
}

/* vector accumulators ("tc_floatN accK = ") in t's only kernel: the dot
 * tile's outputs, as many as the plan chose for this machine's registers */
static int vector_accumulators(tc_tensor *t) {
    char *src = kernel_source(t);
    int n = 0;
    for (const char *p = src; (p = strstr(p, "tc_float")) != NULL; p++) {
        int width = 0, used = 0;
        if (sscanf(p, "tc_float%d acc%*d =%n", &width, &used) >= 1 && used > 0) n++;
    }
    free(src);
    return n;
}

/* the dot tile of x @ w.T is packed FMAs: vectors of the renderer, not the
 * compiler's SLP (which packed across the tile's outputs, 4 wide). Every
 * vector accumulator of the tile (2x4 with AVX2's 16 registers, 4x4 with
 * AVX-512's 32) is updated by its own packed FMA each step. */
static void test_dot_vectorized(void **state) {
    (void)state;
    tc_tensor *c = matmul_t(64, 784, 128, false);
    int accs = vector_accumulators(c);
    fprintf(stderr, "vector accumulators in the x @ w.T kernel: %d\n", accs);
    assert_true(accs >= 4);
    bool checked = check_packed_fmas(c, accs, "the x @ w.T kernel");
    tc_release(c);
    if (!checked) skip();
}

/* relu(a @ b + bias): the relu's comparison after the reduce would keep the
 * tile scalar; its store goes out in two passes (lower.c, epilogue_reduce) */
static void test_epilogue_vectorized(void **state) {
    (void)state;
    int64_t sh[1] = {256};
    tc_tensor *c = matmul(96, 128, 256), *bias = tc_randn(1, sh, TC_FLOAT32, NULL);
    tc_tensor *cb = tc_add(c, bias), *y = tc_relu(cb);
    tc_check_schedule(y, 1, 1e-5, 1e-5, "relu(a@b+bias)");
    tc_tensor *y2 = tc_relu(cb); /* the same graph, unrealized */
    check_packed_fmas(y2, 12, "relu(a@b+bias)");
    tc_release(y2);
    tc_release(c), tc_release(bias), tc_release(cb), tc_release(y);
}

/* the reference evaluator's value of t (float32), kept for the next call
 * with the same node: tests try several plans of one big matmul, and the
 * evaluator spends seconds on each (it materializes the M x N x K product);
 * NULL frees what is kept */
static const float *reference_of(tc_tensor *t) {
    static uint64_t id;
    static float *want;
    if (t && want && tc_tensor_node(t)->id == id) return want;
    free(want), want = NULL;
    if (!t) return NULL;
    want = malloc((size_t)tc_numel(t) * sizeof(float));
    assert_non_null(want);
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), want), TC_OK);
    id = tc_tensor_node(t)->id;
    return want;
}

/* builds kernel src (entry point name) of item it, t's only kernel, on the
 * CPU device, runs it into a new buffer and compares with the reference */
static void run_kernel(tc_tensor *t, const tc_sched_item *it, const char *src, const char *name,
                       const tc_launch_dims *dims, double rtol, double atol, const char *what) {
    tc_dev *d = tc_device_get(0);
    tc_program *prog = d->compile(d, src, name);
    assert_non_null(prog);
    size_t nbytes = (size_t)tc_numel(t) * sizeof(float);
    void *ptrs[8], *out = d->alloc(d, nbytes);
    assert_true(it->n_bufs <= 8);
    ptrs[0] = out;
    for (int i = 1; i < it->n_bufs; i++) ptrs[i] = it->bufs[i]->buffer->ptr;
    assert_int_equal(d->launch(d, prog, ptrs, it->n_bufs, dims), TC_OK);
    float *got = malloc(nbytes);
    assert_int_equal(d->copyout(d, got, out, 0, nbytes), TC_OK);
    assert_true(tc_allclose(got, reference_of(t), TC_FLOAT32, tc_numel(t), rtol, atol, what));
    d->free(d, out);
    free(got);
}

/* runs t's only kernel on the CPU device with the plan written `text` (as
 * TC_BEAM stores it) and compares it with the reference */
/* t's only kernel lowered on the CPU device under plan text (parsed into
 * *p, written back the same); its schedule (free it) */
static tc_schedule *lower_plan(tc_tensor *t, const char *text, tc_kopt *p, tc_lowered *l) {
    tc_node *b = tc_node_base(tc_tensor_node(t));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_non_null(s);
    assert_int_equal(s->n_items, 1);
    assert_true(tc_opt_parse(&s->items[0], text, p));
    char back[64];
    assert_true(tc_opt_format(p, back, sizeof back) > 0);
    assert_string_equal(back, text);
    assert_int_equal(tc_lcache_lower(tc_device_get(0), &s->items[0], p, l), TC_OK);
    return s;
}

static void check_plan(tc_tensor *t, const char *text, double rtol, double atol) {
    tc_kopt p;
    tc_lowered l;
    tc_schedule *s = lower_plan(t, text, &p, &l);
    const tc_sched_item *it = &s->items[0];
    if (p.epi_loop) assert_non_null(strstr(l.src, "tile0[")); /* the scratch array of the loops */
    run_kernel(t, it, l.src, l.name, &l.dims, rtol, atol, text);
    free(l.src);
    tc_schedule_free(s);
}

/* attention's merged heads through W.T: y (B, H, T, d) permuted to (B, T,
 * H, d), reshaped to (B, T, H*d), @ w.T. The loop space splits the reduce
 * (H, d) so y's load is one view, and the (B, T) rows do not merge; the
 * packed tile's panel holds the reduce flat and is filled outside both
 * row axes, so B*T rows share it (T alone is under PACK_ROWS_PER_LANE x
 * lanes); matches the reference, also blocked and under a 32 KiB L2 */
static void test_plan_packed_heads(void **state) {
    (void)state;
    int64_t sy[4] = {2, 4, 96, 32}, sw[2] = {64, 128}, sm[3] = {2, 96, 128};
    int order[4] = {0, 2, 1, 3};
    tc_tensor *y = tc_randn(4, sy, TC_FLOAT32, NULL), *w = tc_randn(2, sw, TC_FLOAT32, NULL);
    tc_tensor *yw[2] = {y, w};
    assert_int_equal(tc_realize(yw, 2), TC_OK);
    tc_tensor *yp = tc_permute(y, order), *ym = tc_reshape(yp, 3, sm), *wt = tc_transpose(w, 0, 1);
    tc_tensor *c = tc_matmul(ym, wt);
    tc_schedule *s = NULL;
    tc_kopt p = plan_of(c, &avx512v, &s);
    const tc_sched_item *it = &s->items[0];
    int n_red = 0;
    for (int a = 0; a < it->ndim; a++) n_red += (it->reduce_axes >> a) & 1 && it->full_shape[a] > 1;
    assert_int_equal(n_red, 2); /* (H, d) */
    assert_true(p.pack);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 0);
    int rows = p.axis[0], from = tc_opt_pack_from(it, tc_opt_pack_load(it, p.axis[1]), rows, p.axis[1]);
    assert_true(from < rows); /* filled outside the batch axis too */
    assert_int_equal(it->full_shape[rows], 96);
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    tc_schedule_free(s);
    check_plan(c, text, 1e-4, 1e-4);
    check_plan(c, "1:6,2:32/16/p", 1e-4, 1e-4);
    check_plan(c, "1:6,2:64/16/k2/p", 1e-4, 1e-4); /* two blocks of 2 heads */
    check_plan(c, "1:6,2:64/16/k1/p", 1e-4, 1e-4);
    tc_release(c), tc_release(yp), tc_release(ym), tc_release(wt), tc_release(y), tc_release(w);
}

/* an elementwise kernel whose load strides along the output's rows (a
 * transposing copy) upcasts the axis that load reads contiguously by a
 * cache line of its elements (the L1d's line; 64 bytes when unknown): rows
 * clamped (100 = 6 * 16 + 4), a reversed axis (a flip) too; a 128-byte
 * line wants 32, and gets a divisor (25 of 100) where clamping 32 would
 * waste too much; none for a copy that reads along the rows, nor where a
 * line's copies of the stores' work pass the cost rule: a map of two
 * transposed loads and two per-column values passes a copy's budget
 * (EPI_BUDGET) and takes 16 where its loads' lines are 4 KiB apart (one
 * set of the L1d for all 64 columns' lines), none where 400 bytes apart
 * (they stay in the L1d as they are) */
static void test_plan_transpose(void **state) {
    (void)state;
    int64_t sh[2] = {64, 100};
    int order[2] = {1, 0}, flip_ax = 1;
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *xt = tc_permute(x, order), *t = tc_contiguous(xt); /* (100, 64), x read at stride 100 */
    tc_kopt p = plan_of(t, &avx512v, NULL);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.axis[0], 0);
    assert_int_equal(p.amt[0], 16);
    tc_target wide = avx512v;
    wide.cache[0].line = 128;
    assert_int_equal(plan_of(t, &wide, NULL).amt[0], 25); /* 32 clamped would waste 28 rows: a divisor */
    check_plan(t, "0:16", 1e-6, 0);
    check_plan(t, "0:8", 1e-6, 0);
    /* a copy keeps gcc -O2's own cost model (the dynamic one built a lane
     * transpose that compiled twice as long and ran no faster); a map with
     * arithmetic asks for the dynamic one */
    char *src = kernel_source(t);
    assert_null(strstr(src, "vect-cost-model"));
    free(src);
    tc_check_schedule(t, 1, 1e-6, 0, "transposing copy 64x100");
    tc_tensor *fl = tc_flip(xt, 1, &flip_ax), *tf = tc_contiguous(fl); /* stride -1 along the columns */
    tc_tensor *xf = tc_flip(x, 1, &flip_ax);
    tc_tensor *ft = tc_permute(xf, order), *tft = tc_contiguous(ft); /* reversed rows */
    p = plan_of(tft, &avx512v, NULL);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.amt[0], 16);
    tc_check_schedule(tft, 1, 1e-6, 0, "flipped transposing copy");
    assert_int_equal(plan_of(tf, &avx512v, NULL).n, 1);
    tc_tensor *same = tc_contiguous(xf); /* no transposition */
    assert_int_equal(plan_of(same, &avx512v, NULL).n, 0);
    for (int wide_rows = 0; wide_rows < 2; wide_rows++) {
        int64_t sm[2] = {64, wide_rows ? 1024 : 100}, sc[1] = {64};
        tc_tensor *m1 = tc_rand(2, sm, TC_FLOAT32, NULL), *m2 = tc_rand(2, sm, TC_FLOAT32, NULL);
        tc_tensor *a = tc_rand(1, sc, TC_FLOAT32, NULL), *b = tc_rand(1, sc, TC_FLOAT32, NULL);
        tc_tensor *m1t = tc_permute(m1, order), *m2t = tc_permute(m2, order);
        tc_tensor *xa = tc_mul(m1t, a), *x2b = tc_mul(m2t, b), *map = tc_add(xa, x2b);
        p = plan_of(map, &avx512v, NULL);
        assert_int_equal(p.n, wide_rows ? 1 : 0);
        assert_int_equal(p.amt[0], wide_rows ? 16 : 0);
        tc_check_schedule(map, 1, 1e-6, 1e-6, "transposing map of two loads");
        tc_tensor *ms[] = {m1, m2, a, b, m1t, m2t, xa, x2b, map};
        for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) tc_release(ms[i]);
    }
    tc_tensor *lg = tc_log(xt), *sn = tc_sin(lg), *heavy = tc_exp(sn); /* 16 copies: 3 polynomials */
    assert_int_equal(plan_of(heavy, &avx512v, NULL).n, 0);
    src = kernel_source(heavy);
    assert_non_null(strstr(src, "vect-cost-model=dynamic"));
    free(src);
    /* a deep DAG (each level reads the last one twice: 2^48 paths) is
     * walked once per node: no plan (its work passes the cost rule), no hang */
    tc_tensor *y = tc_retain(xt);
    for (int i = 0; i < 48; i++) {
        tc_tensor *sq = tc_mul(y, y), *next = tc_add(sq, y);
        tc_release(sq);
        tc_release(y);
        y = next;
    }
    assert_int_equal(plan_of(y, &avx512v, NULL).n, 0);
    tc_release(y);
    tc_tensor *ts[] = {t, x, xt, fl, tf, xf, ft, tft, same, lg, sn, heavy};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tc_release(ts[i]);
}

/* a target as a Zen 5 core reports itself: 48 KiB L1d, 1 MiB L2, 32 MiB
 * L3 shared by 2 */
static tc_target zen5_target(void) {
    tc_target t = avx512v;
    t.cache[0] = (tc_cache_level){.bytes = 48 << 10, .ways = 12, .line = 64, .shared = 1};
    t.cache[1] = (tc_cache_level){.bytes = 1 << 20, .ways = 16, .line = 64, .shared = 1};
    t.cache[2] = (tc_cache_level){.bytes = 32 << 20, .ways = 16, .line = 64, .shared = 2};
    t.cores = 2;
    return t;
}

/* a transposing copy whose load is larger than the L2 a core may count on
 * (a 256-channel 3x3 conv weight made channels-last: 2.25 MiB) is tiled by
 * a square of a line of the load's elements by a line of the stores', its
 * columns' loop outside, rendered without gcc's loop vectorizer; under a 4
 * MiB L2, or a map that computes, or a load whose elements along the
 * output's rows are less than a line apart, or rows no square divides, the
 * one-axis plan stays */
static void test_plan_transpose_square(void **state) {
    (void)state;
    int64_t sh[2] = {256, 2304}, sn[3] = {256, 256, 9};
    int order[2] = {1, 0}, order3[3] = {0, 2, 1};
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL), *n = tc_rand(3, sn, TC_FLOAT32, NULL);
    tc_tensor *in[2] = {x, n};
    assert_int_equal(tc_realize(in, 2), TC_OK);
    tc_tensor *xt = tc_permute(x, order), *t = tc_contiguous(xt); /* (2304, 256), x read at stride 2304 */
    tc_target tg = zen5_target(), big = tg;
    big.cache[1].bytes = 4 << 20;
    tc_kopt p = plan_of(t, &tg, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.axis[0], 0), assert_int_equal(p.amt[0], 16);
    assert_int_equal(p.axis[1], 1), assert_int_equal(p.amt[1], 16);
    char *src = kernel_source_for(t, &tg);
    assert_non_null(strstr(src, "no-tree-loop-vectorize"));
    free(src);
    p = plan_of(t, &big, NULL);
    assert_int_equal(p.n, 1), assert_int_equal(p.amt[0], 16);
    src = kernel_source_for(t, &big);
    assert_null(strstr(src, "no-tree-loop-vectorize"));
    free(src);
    check_plan(t, "0:16,1:16", 0, 0);
    check_plan(t, "0:16,1:8", 0, 0);
    tc_check_schedule(t, 1, 0, 0, "transposing copy 256x2304");
    tc_tensor *two = tc_add(xt, xt); /* a map, not a copy */
    assert_int_equal(plan_of(two, &tg, NULL).n, 1);
    tc_tensor *nt = tc_permute(n, order3), *tn = tc_contiguous(nt); /* (256, 9, 256): 36 bytes a step */
    p = plan_of(tn, &tg, NULL);
    assert_int_equal(p.n, 1), assert_int_equal(p.amt[0], 9);
    int64_t sc[2] = {257, 2304}; /* 257 rows: no square divides them */
    tc_tensor *xc = tc_rand(2, sc, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&xc, 1), TC_OK);
    tc_tensor *xct = tc_permute(xc, order), *tc = tc_contiguous(xct);
    assert_int_equal(plan_of(tc, &tg, NULL).n, 1);
    tc_tensor *ts[] = {x, n, xt, t, two, nt, tn, xc, xct, tc};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) tc_release(ts[i]);
}

/* the tile opt.c plans for the conv of x (padded) by w under tg */
static tc_kopt conv_plan(const int64_t sx[4], const int64_t sw[4], const tc_target *tg) {
    tc_tensor *xwy[3];
    tc_schedule *s = conv_schedule(sx, sw, xwy);
    tc_kopt p;
    tc_opt_choose(&s->items[1], tg, &p);
    assert_int_equal(p.n, 2);
    tc_schedule_free(s);
    tc_release(xwy[0]), tc_release(xwy[1]), tc_release(xwy[2]);
    return p;
}

/* A conv's reduce is blocked over its input channels so that what a block
 * reads again fits half the L2 a core may count on (opt.c,
 * window_kblock): the input planes of every row of tiles in the block and
 * one column tile's panel of the weight. 512 -> 512 channels 3x3 over 2
 * images, 64 columns, 288 + 2,304 bytes per channel: blocks of 128 with a
 * private 1 MiB L2, of 32 with the 256 KiB assumed where the target gives
 * none, none with 4 MiB. Over 16 images a panel of the weight serves 256
 * rows (6 images at a time, each image's 16 pixels: pack_rows), so it is
 * packed, in blocks of 128 (half the L2: plan_pack), of 64 with 512 KiB
 * (unpacked in window_kblock's blocks of 64 it ran at 161, packed 182-197
 * GFLOPS, `CONV=512,512,4,1 build/bench/plan_time`, 1 thread, Zen 5);
 * ResNet-18's 2x2 512 -> 1024 conv (a stride-2 conv's input gradient)
 * packed whole (177-191 -> 193-205 in the step, `bench/step_kernels.py`);
 * the 256-channel 8x8 conv, 8 columns of a row (too few rows for a panel),
 * none; a weight gradient (16 images of 4x4 reduced,
 * blocks of 8 by the footprint: 128 steps, under BLOCK_MIN_STEPS) keeps the
 * panel's rule, none. The host's plan gives the reference's numbers. */
static void test_plan_kblock_conv(void **state) {
    (void)state;
    tc_tensor *xwy[3];
    tc_schedule *s = conv_schedule((int64_t[]){2, 512, 6, 6}, (int64_t[]){512, 512, 3, 3}, xwy);
    const tc_sched_item *it = &s->items[1];
    tc_target tg = avx512v;
    tg.cache[1] = (tc_cache_level){.bytes = 1 << 20, .shared = 1};
    tc_kopt p;
    tc_opt_choose(it, &tg, &p);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 128);
    tc_opt_choose(it, &avx512v, &p);
    assert_int_equal(p.kblock, 32);
    tg.cache[1].bytes = 4 << 20;
    tc_opt_choose(it, &tg, &p);
    assert_int_equal(p.kblock, 0);
    tc_schedule_free(s);
    tc_check_schedule(xwy[2], 2, 1e-4, 1e-4, "conv 512->512 3x3, blocked channels");
    tc_release(xwy[0]), tc_release(xwy[1]), tc_release(xwy[2]);

    tc_target zen5 = zen5_target(), half = zen5;
    half.cache[1].bytes = 512 << 10;
    const int64_t x512[4] = {16, 512, 6, 6}, w512[4] = {512, 512, 3, 3};
    tc_kopt q = conv_plan(x512, w512, &zen5);
    assert_true(q.pack);
    assert_int_equal(q.kblock, 128);
    assert_int_equal(conv_plan(x512, w512, &half).kblock, 64);
    q = conv_plan((int64_t[]){16, 512, 5, 5}, (int64_t[]){1024, 512, 2, 2}, &zen5);
    assert_true(q.pack);
    assert_int_equal(q.kblock, 0);
    q = conv_plan((int64_t[]){16, 256, 10, 10}, (int64_t[]){256, 256, 3, 3}, &zen5);
    assert_false(q.pack);
    assert_int_equal(q.kblock, 0);

    /* the weight gradient of the 16-image 512-channel conv: dy . x over
     * images and pixels, the images' axis blockable */
    tc_tensor *x = tc_rand(4, x512, TC_FLOAT32, NULL), *w = tc_rand(4, w512, TC_FLOAT32, NULL);
    tc_tensor *r = tc_rand(4, (int64_t[]){16, 512, 4, 4}, TC_FLOAT32, NULL);
    tc_set_requires_grad(w, true);
    tc_tensor *xwr[3] = {x, w, r};
    assert_int_equal(tc_realize(xwr, 3), TC_OK);
    tc_tensor *y = tc_conv2d(x, w, NULL, 1, 0), *yr = tc_mul(y, r), *l = tc_sum(yr, 0, NULL, false);
    assert_int_equal(tc_backward(l), TC_OK);
    tc_tensor *g = tc_grad(w);
    tc_node *gb = tc_node_base(tc_tensor_node(g));
    s = tc_schedule_create(&gb, 1);
    assert_non_null(s);
    int found = 0;
    for (int i = 0; i < s->n_items; i++) {
        it = &s->items[i];
        if (!it->reduce_axes || tc_opt_kblock_axis(it) < 0 || it->full_shape[tc_opt_kblock_axis(it)] != 16) continue;
        tc_opt_choose(it, &zen5, &p);
        assert_int_equal(p.n, 2);
        assert_int_equal(p.kblock, 0);
        found++;
    }
    assert_int_equal(found, 1);
    tc_schedule_free(s);
    tc_release(g), tc_release(l), tc_release(yr), tc_release(y), tc_release(r), tc_release(w),
        tc_release(x);
}

/* a conv's expected tile: its rows and columns axes and amounts, packed */
typedef struct {
    int64_t x[4], w[4];
    int rows_axis, cols_axis;
    int64_t rows, cols;
    bool pack;
} conv_tile;

static void check_conv_tiles(const conv_tile *cases, size_t n, const tc_target *tg) {
    for (size_t c = 0; c < n; c++) {
        tc_kopt p = conv_plan(cases[c].x, cases[c].w, tg);
        assert_int_equal(p.axis[0], cases[c].rows_axis);
        assert_int_equal(p.axis[1], cases[c].cols_axis);
        assert_int_equal(p.amt[0], cases[c].rows);
        assert_int_equal(p.amt[1], cases[c].cols);
        assert_int_equal(p.pack, cases[c].pack);
    }
}

/* the tiles of convs on the same Zen 5 core planning for AVX2 (16
 * registers of 8 floats): ResNet-18's 512-channel 4x4 conv takes 6 images
 * x 16 channels from a packed panel of the weight (4 columns x 16 read a
 * weight line 2 KiB from the last per 8 FMAs: 45-54 GFLOPS, packed 85-97,
 * `TC_CPU_ISA=avx2 CONV=512,512,4,1 build/bench/plan_time`); the
 * 64-channel 32x32 conv keeps 6 channels x 16 columns (13 x 1 vectors,
 * a load per FMA, ran 76 against 94); MNIST's conv2 input gradient over
 * 512 images (32 channels, 24x24) takes 6 columns x 16 channels in two
 * passes over its 51 MB input, not 3 channels x 24 columns in one (60 ->
 * 107 GFLOPS); no conv takes columns that are not whole vectors (a scalar
 * tile: 10 columns of MNIST's 10x10 conv). The packed plan's numbers
 * against the reference. */
static void test_plan_conv_avx2(void **state) {
    (void)state;
    tc_target zen5 = zen5_target();
    zen5.simd_floats = 8, zen5.simd_regs = 16;
    const conv_tile cases[] = {
        {{16, 512, 6, 6}, {512, 512, 3, 3}, 0, 2, 6, 16, true},
        {{16, 64, 34, 34}, {64, 64, 3, 3}, 2, 4, 6, 16, false},
        {{512, 32, 28, 28}, {32, 32, 5, 5}, 4, 2, 6, 16, false},
    };
    check_conv_tiles(cases, sizeof cases / sizeof *cases, &zen5);
    tc_kopt p = conv_plan((int64_t[]){512, 64, 12, 12}, (int64_t[]){32, 64, 3, 3}, &zen5);
    assert_int_equal(p.amt[1] % 8, 0);
    /* the weight already channels-last (one kernel, as check_plan wants) */
    int64_t sx[4] = {8, 64, 6, 6}, sw[4] = {64, 3, 3, 64};
    int order[4] = {3, 0, 1, 2};
    tc_tensor *x = tc_rand(4, sx, TC_FLOAT32, NULL), *wl = tc_rand(4, sw, TC_FLOAT32, NULL),
              *in[2] = {x, wl};
    assert_int_equal(tc_realize(in, 2), TC_OK);
    tc_tensor *w = tc_permute(wl, order), *y = tc_conv2d(x, w, NULL, 1, 0);
    check_plan(y, "0:6,2:16/8/p", 1e-4, 1e-4);
    check_plan(y, "0:6,2:16/8/k16/p", 1e-4, 1e-4);
    tc_release(y), tc_release(w), tc_release(wl), tc_release(x);
}

/* the tile of a conv (a window: tile_eff) on a Zen 5 core as it reports
 * itself (48 KiB L1d, 1 MiB L2, 32 MiB L3 shared by 2): ResNet-18's
 * 256-channel 8x8 conv takes 8 output columns of a row (one line of its
 * input) as rows and 32 channels as columns, not 6 images (a line each,
 * 64 channels: 24% slower); the 512-channel 4x4 conv keeps 6 images x 64
 * (4 columns x 64 re-read the weight panel per 4 rows), packed
 * (test_plan_kblock_conv); MNIST's 64-channel conv over 512 images, whose
 * 13 MB input passes the L3's share, keeps 64 channels (a second pass over
 * it from memory costs more than 8 columns x 32 channels gain: stream_eff),
 * reading the weight in order (no panel); a 1x1 conv (no
 * window) and a matmul are planned as before. The forced plan's numbers
 * against the reference. */
static void test_plan_conv_rows(void **state) {
    (void)state;
    tc_target zen5 = zen5_target();
    const conv_tile cases[] = {
        {{16, 256, 10, 10}, {256, 256, 3, 3}, 4, 2, 8, 32, false},
        {{16, 512, 6, 6}, {512, 512, 3, 3}, 0, 2, 6, 64, true},
        {{512, 64, 10, 10}, {64, 64, 3, 3}, 0, 2, 6, 64, false},
    };
    check_conv_tiles(cases, sizeof cases / sizeof *cases, &zen5);
    tc_tensor *xwy[3];
    tc_schedule *s = conv_schedule((int64_t[]){16, 256, 8, 8}, (int64_t[]){512, 256, 1, 1}, xwy);
    tc_kopt p;
    char text[64];
    tc_opt_choose(&s->items[1], &zen5, &p);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "2:6,3:64/16/p"); /* as before tile_eff (no window) */
    tc_schedule_free(s);
    tc_release(xwy[0]), tc_release(xwy[1]), tc_release(xwy[2]);
    tc_tensor *c = matmul(256, 256, 256);
    p = plan_of(c, &zen5, NULL);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    tc_release(c);
    c = matmul(16, 3, 64); /* a reduce of 3: no window either */
    p = plan_of(c, &zen5, NULL);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "0:6,1:64/16");
    tc_release(c);
    /* the weight already channels-last (one kernel, as check_plan wants) */
    int64_t sx[4] = {2, 64, 10, 10}, sw[4] = {64, 3, 3, 64};
    int order[4] = {3, 0, 1, 2};
    tc_tensor *x = tc_rand(4, sx, TC_FLOAT32, NULL), *wl = tc_rand(4, sw, TC_FLOAT32, NULL), *in[2] = {x, wl};
    assert_int_equal(tc_realize(in, 2), TC_OK);
    tc_tensor *w = tc_permute(wl, order), *y = tc_conv2d(x, w, NULL, 1, 0);
    p = plan_of(y, &zen5, NULL);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "4:8,2:32/16/e");
    check_plan(y, "4:8,2:32/16/e", 1e-4, 1e-4); /* transposed stores in loops */
    check_plan(y, "4:8,2:32/16/k16/e", 1e-4, 1e-4);
    tc_release(x), tc_release(wl), tc_release(w), tc_release(y);
    /* ResNet-18's 1x1 stride-2 shortcut conv (here over 6 images): its
     * input read a line apart per reduce step (opt.c's rows_far) whichever
     * rows it takes, so its tiles are ranked as a window's: 8 columns of a
     * row (one line a step) x 32 channels, not 6 images x 64 (6 lines far
     * apart: 2.2x slower over 16 images) */
    int64_t sx2[4] = {6, 128, 16, 16}, sw2[4] = {128, 1, 1, 256};
    x = tc_rand(4, sx2, TC_FLOAT32, NULL), wl = tc_rand(4, sw2, TC_FLOAT32, NULL), in[0] = x, in[1] = wl;
    assert_int_equal(tc_realize(in, 2), TC_OK);
    w = tc_permute(wl, order), y = tc_conv2d(x, w, NULL, 2, 0);
    p = plan_of(y, &zen5, NULL);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "4:8,2:32/16/e");
    check_plan(y, "4:8,2:32/16/e", 1e-4, 1e-4);
    tc_release(x), tc_release(wl), tc_release(w), tc_release(y);
}

/* an epilogue that reads its reduce along many paths (y = sin(y) + y, 40
 * times over a row sum: 2^40 paths) is walked once per node when the
 * stores look for its reduce: it lowers at once and matches the reference */
static void test_epilogue_dag(void **state) {
    (void)state;
    tc_tensor *x = rand_scaled(2, (int64_t[]){12, 4096}, 0.01);
    int ax = 1;
    tc_tensor *y = tc_sum(x, 1, &ax, false);
    for (int i = 0; i < 40; i++) {
        tc_tensor *sn = tc_sin(y), *next = tc_add(sn, y);
        tc_release(sn), tc_release(y);
        y = next;
    }
    tc_check_schedule(y, 1, 1e-4, 1e-4, "40 levels of sin(y) + y over a row sum");
    tc_release(y), tc_release(x);
}

/* a matmul whose panel of b (2048 x 64 floats: 512 KiB) passes the L1d
 * runs its reduce in blocks (tc_kopt.kblock) of the most indices whose
 * panel fits it: 6x64 tiles, rows clamped (100 = 16 * 6 + 4), the loop over
 * blocks inside the threads' loop (a conv's blocks: test_plan_kblock_conv).
 * An epilogue f (relu, gelu of a sum plus a bias) is blocked too: every
 * block stores the partial sums, the last f of their total, unrolled or in
 * loops (/e); a kernel of two reduces is not. Forced plans: blocks of a
 * split (vector partials folded, then added to the stored sum) and of a
 * dot tile */
static void test_plan_kblock(void **state) {
    (void)state;
    tc_tensor *c = matmul(100, 2048, 64);
    tc_kopt p = plan_of(c, &avx512v, NULL);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 128); /* no caches given: a 32 KiB L1d, 128 rows of 256 bytes */
    tc_target big = avx512v;
    big.cache[0].bytes = 128 * 1024; /* 512 rows */
    assert_int_equal(plan_of(c, &big, NULL).kblock, 512);
    big.cache[0].bytes = 1024 * 1024; /* the whole panel fits */
    assert_int_equal(plan_of(c, &big, NULL).kblock, 0);
    assert_int_equal(plan_of(c, &avx2, NULL).kblock, 512); /* 16 columns: 512 rows of 64 bytes */
    check_plan(c, "0:3,1:64/16/k128", 1e-4, 1e-4);
    check_plan(c, "1:4,2:32/16/k256", 1e-4, 1e-4); /* a split of the blocked axis */
    check_plan(c, "0:4,1:4/k64", 1e-4, 1e-4);       /* scalar copies */
    tc_tensor *y = tc_relu(c);
    assert_int_equal(plan_of(y, &avx512v, NULL).kblock, 128);
    check_plan(y, "0:6,1:64/16/k512", 1e-4, 1e-4);   /* f unrolled, after the last block */
    check_plan(y, "0:6,1:64/16/k256/e", 1e-4, 1e-4); /* f in loops after the last block */
    check_plan(y, "0:4,1:4/k64", 1e-4, 1e-4);
    int64_t sb[1] = {64};
    tc_tensor *bias = tc_randn(1, sb, TC_FLOAT32, NULL), *cb = tc_add(c, bias), *g = tc_gelu(cb, true);
    assert_int_equal(tc_realize(&bias, 1), TC_OK);
    assert_int_equal(plan_of(g, &avx512v, NULL).kblock, 128);
    check_plan(g, "0:6,1:64/16/k512/e", 1e-4, 1e-4);
    check_plan(g, "0:3,1:16/16/k128", 1e-4, 1e-4);
    tc_release(g), tc_release(cb), tc_release(bias);
    tc_tensor *c2 = matmul(100, 2048, 64), *two = tc_add(c, c2); /* two reduces */
    tc_kopt bad;
    tc_node *b = tc_node_base(tc_tensor_node(two));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_int_equal(s->n_items, 1);
    assert_false(tc_opt_parse(&s->items[0], "0:6,1:64/16/k512", &bad));
    tc_schedule_free(s);
    tc_release(two), tc_release(c2), tc_release(y);
    if (plan_of(c, &tc_device_get(0)->target, NULL).kblock) {
        /* the earlier blocks' partial sums are read in every block and
         * selected, not read by a load gated on the block (rendered as a
         * float ?:, it kept gcc from vectorizing the tile's store loop) */
        char *src = kernel_source(c);
        assert_null(strstr(src, "?data0["));
        assert_non_null(strstr(src, "tc_cm_sel(tc_cm_mask("));
        free(src);
    }
    tc_check_schedule(c, 1, 1e-4, 1e-4, "blocked matmul 100x2048x64");
    tc_release(c);
    c = matmul(96, 128, 256); /* a 32 KiB panel: one block */
    assert_int_equal(plan_of(c, &avx512v, NULL).kblock, 0);
    tc_release(c);
    c = matmul_t(16, 1024, 48, false); /* x @ w.T: a dot tile, blocked by hand */
    check_plan(c, "0:4,1:4,2:16/16/k256", 1e-4, 1e-4);
    tc_release(c);
    int64_t sh[2] = {16, 4096};
    int ax = 1;
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *sum = tc_sum(x, 1, &ax, false);
    b = tc_node_base(tc_tensor_node(sum));
    s = tc_schedule_create(&b, 1);
    /* a block is whole steps of the split it holds (TC_BEAM once timed 16 of 32: no loop at all) */
    assert_false(tc_opt_parse(&s->items[0], "0:16,1:32/16/k16", &bad));
    assert_false(tc_opt_parse(&s->items[0], "0:16,1:32/16/k4096", &bad)); /* one block */
    tc_schedule_free(s);
    check_plan(sum, "0:16,1:32/16/k1024", 1e-5, 1e-3);
    tc_release(sum), tc_release(x);
}

/* the TC_CPU_* overrides this run was started with (ctest under
 * TC_CPU_ISA=sse2, say): a test that fakes some puts these back */
static const char *const cpu_env[4] = {"TC_CPU_ISA", "TC_CPU_L1D", "TC_CPU_L2", "TC_CPU_L3"};
static char *cpu_env_at_start[4];

static void save_cpu_env(void) {
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(cpu_env[i]);
        cpu_env_at_start[i] = v ? strdup(v) : NULL;
    }
}

static void restore_cpu_env(void) {
    for (int i = 0; i < 4; i++) {
        if (cpu_env_at_start[i]) setenv(cpu_env[i], cpu_env_at_start[i], 1);
        else unsetenv(cpu_env[i]);
    }
}

/* plans follow what the CPU device reads of its host (tc_cpu_target), here
 * faked through the environment: TC_CPU_ISA sets the register tile's shape,
 * TC_CPU_L1D the reduce's blocks (the most indices whose panel of b fits),
 * and each plan chosen gives the reference's numbers */
static tc_kopt plan_under(tc_tensor *t, const char *isa, const char *l1d) {
    setenv("TC_CPU_ISA", isa, 1);
    setenv("TC_CPU_L1D", l1d, 1);
    tc_target tg;
    assert_int_equal(tc_cpu_target(&tg, NULL, 0), TC_OK);
    restore_cpu_env();
    tc_kopt p = plan_of(t, &tg, NULL);
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    check_plan(t, text, 1e-4, 1e-4);
    return p;
}

static void test_plan_from_host(void **state) {
    (void)state;
    /* a panel of 2048 rows of the tile's columns, read in place (64 rows do
     * not pay for a packed copy: test_plan_packed) */
    tc_tensor *c = matmul(64, 2048, 64);
    tc_kopt p = plan_under(c, "avx2", "16K");
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 16);
    assert_int_equal(p.kblock, 256); /* 256 rows of 64 bytes */
    assert_int_equal(plan_under(c, "avx2", "65536").kblock, 1024);
    assert_int_equal(plan_under(c, "avx2", "1M").kblock, 0); /* 128 KiB: fits whole */
    p = plan_under(c, "avx512", "64K");
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 256); /* 256 rows of 256 bytes */
    assert_int_equal(plan_under(c, "avx512", "48K").kblock, 128); /* 192 rows: 128 divides 2048 */
    tc_release(c);
}

/* a @ b with 64 rows and b's rows 16 KiB apart (4,096 columns): AVX2's
 * 6 x 2 tile (12 FMAs a step, fewer than a jump costs) reads b from a
 * panel though 64 rows are under PACK_ROWS_PER_LANE's 80 (GPT-2's skinny
 * (64, 768) @ (768, 50304) 70-76 -> 90-92 GFLOPS, `TC_CPU_ISA=avx2
 * bench_ops --only skinny_n`), AVX-512's 6 x 4 (24 FMAs) does not; a panel
 * copied from rows a line or more apart prefetches the next column
 * block's line of each row (a C kernel: __builtin_prefetch; the portable
 * C99 dialect prints nothing for it), and the packed plan gives the
 * reference's numbers */
static void test_plan_pack_jumps(void **state) {
    (void)state;
    tc_tensor *c = matmul(64, 96, 4096);
    tc_kopt p = plan_of(c, &avx2v, NULL);
    assert_true(p.pack);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 16);
    assert_false(plan_of(c, &avx512v, NULL).pack);
    tc_target host = tc_device_get(0)->target;
    host.simd_floats = 8, host.simd_regs = 16;
    char *src = kernel_source_for(c, &host);
    assert_non_null(strstr(src, "__builtin_prefetch(&data2["));
    free(src);
    tc_schedule *s = NULL;
    plan_of(c, &host, &s);
    tc_kernel_uops *k = tc_codegen(&s->items[0], &host);
    assert_non_null(k);
    char *plain = tc_render(&tc_dialect_c_plain, k);
    assert_non_null(plain);
    assert_null(strstr(plain, "prefetch"));
    free(plain);
    tc_kernel_uops_free(k);
    tc_schedule_free(s);
    check_plan(c, "0:6,1:16/8/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/p", 1e-4, 1e-4);
    tc_release(c);
}

/* x @ w.T with w (out, in): no operand moves contiguously along the output
 * columns, so a register tile reads w's columns from a packed panel
 * (tc_kopt.pack: copied contiguous along them before the rows of tiles
 * that read it) where enough rows share it (PACK_ROWS_PER_LANE), and a dot
 * tile does the work otherwise. Forced plans: the panel in blocks of the
 * reduce and whole, rows clamped (250 = 41 * 6 + 4), a batch axis along
 * which w moves, narrower tiles; each gives the reference's numbers. */
static void test_plan_packed(void **state) {
    (void)state;
    tc_tensor *c = matmul_t(256, 256, 512, false);
    tc_schedule *s = NULL;
    tc_kopt p = plan_of(c, &avx512v, &s);
    assert_true(p.pack);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.lanes, 16);
    assert_int_equal(p.kblock, 0); /* no cache known: 64 KiB of panel in half an assumed L2 */
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_non_null(strstr(text, "/p"));
    tc_kopt back;
    assert_true(tc_opt_parse(&s->items[0], text, &back));
    assert_memory_equal(&back, &p, sizeof p);
    tc_schedule_free(s);
    check_plan(c, "0:6,1:64/16/k128/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k128/e/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/p", 1e-4, 1e-4); /* the whole reduce: a 64 KiB panel */
    check_plan(c, "0:3,1:32/8/k64/p", 1e-4, 1e-4);
    p = plan_under(c, "avx2", "32K");
    assert_true(p.pack);
    assert_int_equal(p.amt[1], 16);
    tc_release(c);
    c = matmul_t(250, 384, 128, false);
    check_plan(c, "0:6,1:64/16/k128/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:32/16/p", 1e-4, 1e-4);
    tc_release(c);
    /* w (out, in) is packed a cache line of its inputs at a time (16
     * floats of each of the tile's 64 rows), where the reduce's loop (or
     * block) holds whole lines; else an input at a time */
    c = matmul_t(192, 1024, 256, false);
    char *src = kernel_source_for(c, &avx512v);
    assert_non_null(strstr(src, "< 16LL;"));
    free(src);
    check_plan(c, "0:6,1:64/16/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k256/p", 1e-4, 1e-4);
    tc_release(c);
    /* with an epilogue (+ r) the reduce is blocked as without one: 64
     * columns, blocks of 512 inputs (half the assumed 256 KiB L2) */
    c = matmul_t(192, 1024, 256, false);
    int64_t sr[2] = {192, 256};
    tc_tensor *r = tc_randn(2, sr, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&r, 1), TC_OK);
    tc_tensor *cr = tc_add(c, r);
    p = plan_of(cr, &avx512v, NULL);
    assert_true(p.pack);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 512);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    check_plan(cr, text, 1e-4, 1e-4);
    tc_release(cr), tc_release(r), tc_release(c);
    c = matmul_t(192, 1000, 256, false); /* 1000 = 62 lines + 8 */
    p = plan_of(c, &avx512v, NULL);
    assert_true(p.pack);
    src = kernel_source_for(c, &avx512v);
    assert_null(strstr(src, "< 16LL;"));
    free(src);
    check_plan(c, "0:6,1:64/16/p", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k40/p", 1e-4, 1e-4); /* blocks of 40: no whole lines */
    check_plan(c, "0:6,1:64/16/k200/p", 1e-4, 1e-4);
    tc_release(c);
    /* a plain matmul of enough rows reads b's columns packed too, its panel
     * whole where it fits half the L2 (faked), else in the fewest blocks
     * (b, 2 MiB, is no nearer a cache than a, 768 KiB: columns outside) */
    c = matmul(192, 1024, 512);
    setenv("TC_CPU_ISA", "avx512", 1);
    const char *l2s[3] = {"1M", "256K", "128K"};
    int64_t blocks[3] = {0, 512, 256}; /* panels of 256, 128 and 64 KiB */
    for (int i = 0; i < 3; i++) {
        setenv("TC_CPU_L2", l2s[i], 1);
        tc_target tg;
        assert_int_equal(tc_cpu_target(&tg, NULL, 0), TC_OK);
        p = plan_of(c, &tg, NULL);
        assert_true(p.pack);
        assert_int_equal(p.amt[1], 64);
        assert_int_equal(p.kblock, blocks[i]);
        assert_true(tc_opt_format(&p, text, sizeof text) > 0);
        check_plan(c, text, 1e-4, 1e-4);
    }
    restore_cpu_env();
    tc_release(c);
    /* a (192 x 1024) of 768 KiB re-read per column block from the L3, b
     * (1024 x 128) of 512 KiB per row block from the L2: rows outside,
     * reading b in place (GPT-2's wte gradient: 51 MB against 786 KiB) */
    c = matmul(192, 1024, 128);
    setenv("TC_CPU_ISA", "avx512", 1), setenv("TC_CPU_L2", "1M", 1), setenv("TC_CPU_L3", "32M", 1);
    tc_target tg;
    assert_int_equal(tc_cpu_target(&tg, NULL, 0), TC_OK);
    restore_cpu_env();
    p = plan_of(c, &tg, NULL);
    assert_false(p.pack);
    assert_int_equal(p.amt[1], 64);
    tc_schedule *sc = NULL;
    plan_of(c, &tg, &sc);
    assert_true(tc_opt_rows_outer(&sc->items[0], &tg, p.axis[0], p.axis[1]));
    tc_schedule_free(sc);
    tc_release(c);
    c = matmul_t(64, 256, 512, false); /* 64 rows: the dot tile */
    p = plan_of(c, &avx512v, NULL);
    assert_false(p.pack);
    assert_int_equal(p.n, 3);
    tc_release(c);
    int64_t sx[3] = {3, 200, 96}, sw[3] = {3, 64, 96}; /* a batch of x @ w[b].T */
    tc_tensor *x = tc_randn(3, sx, TC_FLOAT32, NULL), *w = tc_randn(3, sw, TC_FLOAT32, NULL);
    tc_tensor *xw[2] = {x, w};
    assert_int_equal(tc_realize(xw, 2), TC_OK);
    tc_tensor *wt = tc_transpose(w, 1, 2);
    c = tc_matmul(x, wt);
    p = plan_of(c, &avx512v, NULL);
    assert_true(p.pack);
    check_plan(c, "1:6,2:64/16/p", 1e-4, 1e-4);
    check_plan(c, "1:5,2:32/16/p", 1e-4, 1e-4);
    tc_release(c), tc_release(wt), tc_release(x), tc_release(w);
}

/* row blocks (BLIS's mc): a tile whose columns' loop runs outside its rows
 * re-reads all of a per column step; where a passes half a core's share of
 * the L3 the rows run in blocks that fit it, their loop outermost. The
 * blocks follow the reported L3 (none unknown or large; 3 blocks of a
 * 150 KiB a under a 128 KiB L3), packed or not, and the kernels match the
 * reference on the thread pool, the last block short (50 steps of 6 rows
 * in blocks of 17) or rows clamped */
static int outer_axis(tc_tensor *t, const tc_target *tg, bool run);
static void test_plan_row_blocks(void **state) {
    (void)state;
    tc_tensor *c = matmul(300, 128, 256);
    tc_target tg = avx512v;
    tg.cache[1].bytes = 1 << 20;
    tc_kopt p = plan_of(c, &tg, NULL);
    assert_int_equal(p.mblock, 0); /* no L3 known */
    tg.cache[2].bytes = 32 << 20;
    assert_int_equal(plan_of(c, &tg, NULL).mblock, 0); /* a fits */
    tg.cache[2].bytes = 128 << 10;
    p = plan_of(c, &tg, NULL);
    assert_true(p.pack);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.mblock, 102);
    tg.cache[2].shared = 2; /* a core's share: 64 KiB, 5 blocks */
    assert_int_equal(plan_of(c, &tg, NULL).mblock, 60);
    tg.cache[2].shared = 0;
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "0:6,1:64/16/p/m102");
    check_plan(c, text, 1e-4, 1e-4);
    assert_true(outer_axis(c, &tg, true) >= TC_MAX_DIMS); /* the blocks' loop, then the columns' */
    tc_release(c);
    c = matmul(250, 96, 128); /* 250 = 41 x 6 + 4: the last tile's rows clamped */
    check_plan(c, "0:6,1:64/16/p/m12", 1e-4, 1e-4);
    check_plan(c, "0:5,1:32/16/m35", 1e-4, 1e-4);
    tc_release(c);
    c = matmul(150, 512, 1024); /* too few rows for a panel: columns first, unpacked */
    tg.cache[2].bytes = 256 << 10;
    p = plan_of(c, &tg, NULL);
    assert_false(p.pack);
    assert_int_equal(p.mblock, 54); /* a: 300 KiB, 3 blocks of 9 steps */
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    check_plan(c, text, 1e-4, 1e-4);
    tc_release(c);
}

/* the loop-space axis of the outermost loop of t's only kernel, planned
 * and lowered for tg; with run, the kernel also runs on the CPU device and
 * gives the reference's numbers */
static int outer_axis(tc_tensor *t, const tc_target *tg, bool run) {
    tc_schedule *s = NULL;
    tc_kopt p = plan_of(t, tg, &s);
    tc_kernel_uops *k = tc_codegen_plan(&s->items[0], tg, &p);
    assert_non_null(k);
    int axis = -1;
    for (int i = 0; i < k->n_uops && axis < 0; i++)
        if (k->uops[i]->op == TC_UOP_RANGE) axis = (int)k->uops[i]->arg;
    if (run) {
        char *src = tc_render(tc_device_get(0)->dialect, k);
        assert_non_null(src);
        tc_launch_dims dims = {{1, 1, 1}, {1, 1, 1}, k->cpu_range};
        run_kernel(t, &s->items[0], src, k->name, &dims, 1e-4, 1e-4, "x @ w.T");
        free(src);
    }
    tc_kernel_uops_free(k);
    tc_schedule_free(s);
    return axis;
}

/* x @ w.T (a dot tile) opens its loops in axis order (x's rows outermost)
 * unless what that loop re-reads per step (all of w) passes the cache and
 * what the other's does (all of x) does not: x (16,256) is 16 KiB, w
 * (1024,256) 1 MiB */
static void test_dot_loop_order(void **state) {
    (void)state;
    tc_tensor *c = matmul_t(16, 256, 1024, false);
    tc_target tg = avx512v;
    assert_int_equal(outer_axis(c, &tg, false), 0); /* no caches known: axis order */
    tg.cache[1].bytes = 8 << 20;                     /* both fit the L2 */
    assert_int_equal(outer_axis(c, &tg, false), 0);
    tg.cache[1].bytes = 64 << 10; /* x fits half of it, w does not: w's rows outside */
    assert_int_equal(outer_axis(c, &tg, true), 1);
    tg.cache[1].bytes = 16 << 10; /* neither fits the L2; x fits a core's share of the L3 */
    tg.cache[2] = (tc_cache_level){.bytes = 1 << 20, .shared = 8};
    assert_int_equal(outer_axis(c, &tg, true), 1);
    tg.cache[2].shared = 64; /* neither fits its share */
    assert_int_equal(outer_axis(c, &tg, false), 0);
    tc_release(c);
}

/* the loop over the copies of a tile's store of a @ b stored transposed
 * (a.T @ b.T: the tile's columns along m, the output's rows) that goes
 * innermost (the last "for" before the store): the rows', along which the
 * output is contiguous; and the reference's numbers, rows clamped (100 =
 * 16 x 6 + 4), packed or not */
static const char *store_loop_bound(const char *src) {
    const char *st = strstr(src, "data0[(");
    while (st && strstr(st + 1, "data0[(")) st = strstr(st + 1, "data0[(");
    const char *loop = NULL;
    for (const char *f = strstr(src, "for ("); f && f < st; f = strstr(f + 1, "for (")) loop = f;
    return loop ? strstr(loop, " < ") : NULL;
}

static void test_store_loop_order(void **state) {
    (void)state;
    int64_t sa[2] = {96, 128}, sb[2] = {100, 96};
    tc_tensor *a = tc_randn(2, sa, TC_FLOAT32, NULL), *b = tc_randn(2, sb, TC_FLOAT32, NULL);
    tc_tensor *ab[2] = {a, b};
    assert_int_equal(tc_realize(ab, 2), TC_OK);
    tc_tensor *at = tc_transpose(a, 0, 1), *bt = tc_transpose(b, 0, 1), *c = tc_matmul(at, bt);
    tc_kopt p = plan_of(c, &avx512v, NULL);
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "1:6,0:64/16/e");
    char *src = kernel_source_for(c, &avx512v);
    const char *bound = store_loop_bound(src);
    assert_non_null(bound);
    assert_true(!strncmp(bound, " < 6LL;", 7));
    free(src);
    check_plan(c, "1:6,0:64/16/e", 1e-4, 1e-4);
    check_plan(c, "1:5,0:32/16/e", 1e-4, 1e-4);
    check_plan(c, "1:6,0:64/16/e/p", 1e-4, 1e-4);
    tc_release(c), tc_release(at), tc_release(bt), tc_release(a), tc_release(b);
}

/* the ops lowering t's only kernel under plan text estimates (est_ops) */
static int64_t plan_ops(tc_tensor *t, const char *text) {
    tc_kopt p;
    tc_lowered l;
    tc_schedule *s = lower_plan(t, text, &p, &l);
    free(l.src);
    tc_schedule_free(s);
    return l.est_ops;
}

/* a.T @ b, a stored (k, m) (a weight gradient's x.T), plus a residual r
 * where r is not NULL (*r: the sum): its tile's rows read a new line of a
 * per reduce step */
static tc_tensor *matmul_tn(int64_t m, int64_t k, int64_t n, tc_tensor **r) {
    int64_t sa[2] = {k, m}, sb[2] = {k, n}, sr[2] = {m, n};
    tc_tensor *a = tc_randn(2, sa, TC_FLOAT32, NULL), *b = tc_randn(2, sb, TC_FLOAT32, NULL);
    tc_tensor *res = r ? tc_randn(2, sr, TC_FLOAT32, NULL) : NULL;
    tc_tensor *ab[3] = {a, b, res};
    assert_int_equal(tc_realize(ab, r ? 3 : 2), TC_OK);
    tc_tensor *at = tc_transpose(a, 0, 1), *c = tc_matmul(at, b);
    if (r) {
        tc_tensor *e = tc_add(c, res);
        tc_release(c), tc_release(res);
        c = e;
        *r = c;
    }
    tc_release(at), tc_release(a), tc_release(b);
    return c;
}

/* a.T @ b: a packed tile of fewer than 16 vector FMAs a reduce step
 * (AVX2's 6 x 16) copies its rows' operand into a row panel too (BLIS's
 * A), the panel of a row block's rows (all rows where they fit) times a
 * block of the reduce, which half the L2 holds (256 KiB assumed: 32 K
 * floats, blocks near its root: 128 of 512, 192 rows); a 4 MiB L2 holds
 * the whole reduce; 1,024 rows take row blocks (5 of 210 rows: 1,026 x 128
 * floats do not fit); AVX-512's 6 x 64 tile (24 FMAs a step) blocks its
 * reduce for the lines of a instead (rows_kblock: half a 32 KiB L1d, 256
 * lines), as does a tile too short to pack (96 rows of 16 columns); a @ b
 * reads its rows along the reduce and has neither. The lowered plans, with
 * row blocks, a clamped last row tile (170 rows), an epilogue, the whole
 * reduce and 4 or 2 vectors of columns, give the reference's numbers. */
static void test_plan_row_pack(void **state) {
    (void)state;
    tc_tensor *c = matmul_tn(192, 512, 256, NULL);
    tc_target tg = avx2v;
    tc_kopt p = plan_of(c, &tg, NULL);
    char text[64];
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    assert_string_equal(text, "0:6,1:16/8/k128/e/p/a");
    check_plan(c, text, 1e-4, 1e-4);
    check_plan(c, "0:6,1:16/8/k128/p/a/m96", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k128/p/a/m96", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/p/a/m48", 1e-4, 1e-4);
    check_plan(c, "0:6,1:32/16/k256/e/p/a", 1e-4, 1e-4);
    tg.cache[1] = (tc_cache_level){.bytes = 4 << 20, .ways = 16, .line = 64};
    assert_true(tc_opt_format((p = plan_of(c, &tg, NULL), &p), text, sizeof text) > 0);
    assert_string_equal(text, "0:6,1:16/8/p/a");
    check_plan(c, text, 1e-4, 1e-4);
    p = plan_of(c, &avx512v, NULL);
    assert_false(p.row_pack);
    assert_int_equal(p.amt[1], 64);
    assert_int_equal(p.kblock, 256);
    tc_release(c);
    c = matmul_tn(1024, 512, 128, NULL);
    p = plan_of(c, &avx2v, NULL);
    assert_true(p.row_pack);
    assert_int_equal(p.kblock, 128);
    assert_int_equal(p.mblock, 210);
    /* row blocks run each row once: the kernel's estimated ops as without
     * them, give or take the last block's (5 x 35 steps of 6 rows for 171) */
    int64_t blocked = plan_ops(c, "0:6,1:16/8/k128/p/a/m210"), plain = plan_ops(c, "0:6,1:16/8/k128/p");
    assert_true(blocked >= plain && blocked <= plain * 175 / 171);
    tc_release(c);
    tc_tensor *r = NULL;
    c = matmul_tn(170, 256, 192, &r);
    p = plan_of(c, &avx2v, NULL);
    assert_true(p.row_pack);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    check_plan(c, text, 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k64/p/a/m48", 1e-4, 1e-4);
    tc_release(c);
    c = matmul_tn(96, 512, 16, NULL);
    p = plan_of(c, &avx512v, NULL);
    assert_false(p.row_pack);
    assert_int_equal(p.kblock, 256);
    assert_true(tc_opt_format(&p, text, sizeof text) > 0);
    check_plan(c, text, 1e-4, 1e-4);
    tc_release(c);
    c = matmul(192, 512, 256);
    p = plan_of(c, &avx2v, NULL);
    assert_false(p.row_pack);
    assert_int_equal(p.kblock, 0);
    tc_release(c);
}

/* a tile's loop that the threads share is the columns' where that shares
 * more evenly between the target's cores than the rows': 16 rows are 3
 * steps of 6 (3 of 4 thread-steps busy on 2 cores), 256 columns 4 of 64
 * (ResNet-18's 256-channel 8 x 8 convs: batch 16 in rows of 6) */
static void test_thread_share(void **state) {
    (void)state;
    tc_tensor *c = matmul(16, 64, 256);
    tc_target tg = avx512v;
    tc_kopt p = plan_of(c, &tg, NULL);
    assert_int_equal(p.amt[0], 6);
    assert_int_equal(p.amt[1], 64);
    const int cores[4] = {1, 2, 3, 4}, outer[4] = {0, 1, 0, 1};
    for (int i = 0; i < 4; i++) {
        tg.cores = cores[i];
        assert_int_equal(outer_axis(c, &tg, i == 1), outer[i]);
    }
    tc_release(c);
}

/* plans whose stores run in loops over the tile (epi_loop, "/e"): each
 * copy's reduce values go to a scratch array and the stores run once per
 * output after the tile, rows clamped (100 = 16 * 6 + 4) or not, a blocked
 * reduce adding the earlier blocks' sums, and a store stage (softmax,
 * layernorm: the full space inside the loop over the rows) */
static void test_plan_epi_loop(void **state) {
    (void)state;
    tc_tensor *c = matmul(100, 2048, 64);
    check_plan(c, "0:6,1:64/16/e", 1e-4, 1e-4);
    check_plan(c, "0:6,1:64/16/k128/e", 1e-4, 1e-4);
    check_plan(c, "0:4,1:4/k64/e", 1e-4, 1e-4); /* scalar copies */
    int64_t n[1] = {64};
    tc_tensor *bias = tc_rand(1, n, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&bias, 1), TC_OK);
    tc_tensor *cb = tc_add(c, bias), *y = tc_tanh(cb);
    check_plan(y, "0:6,1:64/16/e", 1e-4, 1e-5);
    check_plan(y, "0:5,1:16/e", 1e-4, 1e-5); /* 20 tiles of 5 rows, 16 scalar columns */
    tc_release(c), tc_release(bias), tc_release(cb), tc_release(y);
    int64_t sh[2] = {64, 1024};
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&x, 1), TC_OK);
    tc_tensor *sm = tc_softmax(x, 1), *ln = tc_layernorm(x, 1, 1e-5);
    check_plan(sm, "0:4,1:16/8/e", 1e-5, 1e-6);
    check_plan(sm, "0:3,1:16/e", 1e-5, 1e-6); /* 3 rows clamped: 64 = 21 * 3 + 1 */
    check_plan(ln, "0:4,1:16/8/e", 1e-4, 1e-5);
    tc_kopt bad;
    tc_node *b = tc_node_base(tc_tensor_node(sm));
    tc_schedule *s = tc_schedule_create(&b, 1);
    assert_false(tc_opt_parse(&s->items[0], "1:16/e", &bad)); /* no kept copies to loop over */
    tc_schedule_free(s);
    tc_release(sm), tc_release(ln), tc_release(x);
}

/* the most lines of C one compiler run of the beam's search was given,
 * from the log of the recording TC_CC that test_beam installs */
static int most_lines_compiled(const char *log, int *runs) {
    FILE *f = fopen(log, "r");
    int most = 0, n;
    *runs = 0;
    while (f && fscanf(f, "%d", &n) == 1) most = n > most ? n : most, (*runs)++;
    if (f) fclose(f);
    return most;
}

/* TC_BEAM=2 searches plans by timing, keeps the winner on disk, and the
 * searched kernel still gives the reference's numbers. The search compiles
 * no candidate over beam.c's MAX_SRC_LINES (1,024): a TC_CC that logs each
 * source's lines watches it (before the bound, candidates of this matmul
 * reached 2,531 lines) */
static void test_beam(void **state) {
    (void)state;
    char cmd[1024], dir[] = "/tmp/tc_test_beam_XXXXXX", script[128], log[128];
    assert_non_null(mkdtemp(dir));
    snprintf(script, sizeof script, "%s/cc.sh", dir);
    snprintf(log, sizeof log, "%s/lines", dir);
    FILE *f = fopen(script, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nfor a in \"$@\"; do case $a in *.c) wc -l < \"$a\" >> %s ;; esac; done\n"
               "exec cc \"$@\"\n", log);
    fclose(f);
    assert_int_equal(chmod(script, 0755), 0);
    snprintf(cmd, sizeof cmd, "rm -f %s/*.beam %s/*.so %s/*.ref", tc_cachedir(), tc_cachedir(),
             tc_cachedir());
    assert_int_equal(system(cmd), 0);
    assert_int_equal(tc_set_flag("TC_BEAM", 2), TC_OK);
    setenv("TC_CC", script, 1);
    for (int run = 0; run < 2; run++) { /* a search, then the cached plan */
        tc_tensor *c = matmul(64, 256, 128);
        tc_check_schedule(c, 1, 1e-5, 1e-4, run ? "matmul, cached beam plan" : "matmul, beam search");
        tc_release(c);
        snprintf(cmd, sizeof cmd, "ls %s/*.beam > /dev/null 2>&1", tc_cachedir());
        assert_int_equal(system(cmd), 0);
    }
    unsetenv("TC_CC");
    int runs, most = most_lines_compiled(log, &runs);
    printf("beam search of a 64x256x128 matmul: %d compiles, the largest %d lines\n", runs, most);
    assert_true(runs >= 8); /* it searched */
    assert_true(most <= 1024);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    int64_t sh[2] = {16, 65536};
    tc_tensor *x = tc_rand(2, sh, TC_FLOAT32, NULL);
    int ax = 1;
    tc_tensor *s = tc_sum(x, 1, &ax, false);
    tc_check_schedule(s, 1, 1e-5, 1e-3, "row sum, beam search");
    assert_int_equal(tc_set_flag("TC_BEAM", 0), TC_OK);
    tc_release(x);
    tc_release(s);
}

static int free_reference(void **state) {
    (void)state;
    reference_of(NULL);
    return 0;
}

int main(void) {
    save_cpu_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_matmul),    cmocka_unit_test(test_plan_clamped_rows),
        cmocka_unit_test(test_plan_spread_rows),
        cmocka_unit_test(test_plan_tail),
        cmocka_unit_test(test_vector_masks),
        cmocka_unit_test(test_plan_conv),      cmocka_unit_test(test_plan_split_sum),
        cmocka_unit_test(test_small_shapes),   cmocka_unit_test(test_vectorized),
        cmocka_unit_test(test_epilogue_vectorized), cmocka_unit_test(test_beam),
        cmocka_unit_test(test_plan_dot),       cmocka_unit_test(test_plan_packed), cmocka_unit_test(test_plan_pack_jumps),       cmocka_unit_test(test_vector_partials),
        cmocka_unit_test(test_conv_weight_grad), cmocka_unit_test(test_dot_vectorized),
        cmocka_unit_test(test_tile_vectors),   cmocka_unit_test(test_gather_vectorized),
        cmocka_unit_test(test_plan_gather_layernorm),
        cmocka_unit_test(test_plan_short_rows),
        cmocka_unit_test(test_plan_kblock),
        cmocka_unit_test(test_plan_epi_loop),
        cmocka_unit_test(test_plan_transpose),
        cmocka_unit_test(test_plan_transpose_square),
        cmocka_unit_test(test_plan_kblock_conv),
        cmocka_unit_test(test_plan_conv_rows),
        cmocka_unit_test(test_plan_conv_avx2),
        cmocka_unit_test(test_epilogue_dag),
        cmocka_unit_test(test_plan_from_host),
        cmocka_unit_test(test_dot_loop_order),
        cmocka_unit_test(test_plan_packed_heads),
        cmocka_unit_test(test_shared_chain),
        cmocka_unit_test(test_plan_row_blocks),
        cmocka_unit_test(test_thread_share),
        cmocka_unit_test(test_store_loop_order),
        cmocka_unit_test(test_plan_row_pack),
    };
    int failed = cmocka_run_group_tests(tests, NULL, free_reference);
    for (int i = 0; i < 4; i++) free(cpu_env_at_start[i]);
    return failed;
}
