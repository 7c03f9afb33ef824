/* test_index_copy.c - tc_index_copy, the indexed store (torch's index_copy_)
 * scheduled as an assign: values against host loops and the reference
 * evaluator along every axis and index dtype, exact kernel counts (what
 * computes the values fuses into the store's kernel; a reduce does not),
 * the assign hazards (readers of the old contents run first, a value that
 * reads the buffer it is written into is realized first), out-of-range
 * indices (an error naming the call and the values when the index is on the
 * host; nothing written in a kernel), and a jitted loop writing successive
 * rows of a cache as a KV cache does. */
#include "tc_test.h"

#include <stdlib.h>
#include <string.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static tc_tensor *from(const void *data, tc_dtype dt, int ndim, const int64_t *shape) {
    tc_tensor *t = tc_from_data(data, dt, ndim, shape, NULL);
    assert_non_null(t);
    return t;
}

/* a realized float32 tensor of random values that owns its buffer */
static tc_tensor *rnd(int ndim, const int64_t *shape, uint64_t seed) {
    tc_tensor *r = tc_test_randn(ndim, shape, seed, -1, 1), *c = tc_contiguous(r);
    assert_int_equal(tc_realize(&c, 1), TC_OK);
    tc_release(r);
    return c;
}

static void expect(tc_tensor *t, const float *want, int64_t n, const char *what) {
    float *got = tc_test_read(t);
    assert_true(tc_allclose_f32(got, want, n, 0, 0, what));
    free(got);
}

/* dst (4,3,5) written along each axis at [2, 0] (int32), [1] (int64), [4, 1, 3]
 * (uint8, axis 2): one kernel each, against the reference evaluator and a
 * host loop */
static void test_axes(void **state) {
    (void)state;
    const int64_t n[3] = {4, 3, 5};
    int32_t i32[2] = {2, 0};
    int64_t i64[1] = {1};
    uint8_t u8[3] = {4, 1, 3};
    const void *ids[3] = {i32, i64, u8};
    const tc_dtype dts[3] = {TC_INT32, TC_INT64, TC_UINT8};
    const int64_t ms[3] = {2, 1, 3};
    for (int axis = 0; axis < 3; axis++) {
        tc_tensor *dst = rnd(3, n, 10 + axis), *idx = from(ids[axis], dts[axis], 1, &ms[axis]);
        int64_t vs[3] = {4, 3, 5};
        vs[axis] = ms[axis];
        tc_tensor *val = rnd(3, vs, 20 + axis);
        float *d = tc_test_read(dst), *v = tc_test_read(val);
        for (int64_t j = 0; j < ms[axis]; j++) {
            int64_t k = dts[axis] == TC_INT32 ? i32[j] : dts[axis] == TC_INT64 ? i64[j] : u8[j];
            for (int a = 0; a < vs[0]; a++)
                for (int b = 0; b < vs[1]; b++)
                    for (int c = 0; c < vs[2]; c++) {
                        int64_t at[3] = {a, b, c};
                        if (at[axis] != j) continue;
                        at[axis] = k;
                        d[(at[0] * 3 + at[1]) * 5 + at[2]] = v[(a * vs[1] + b) * vs[2] + c];
                    }
        }
        assert_int_equal(tc_index_copy(dst, axis - 3 * (axis == 2), idx, val), TC_OK);
        tc_check_schedule(dst, 1, 0, 0, "index_copy along an axis");
        expect(dst, d, 60, "index_copy against the host");
        free(d), free(v);
        tc_release(dst), tc_release(idx), tc_release(val);
    }
    tc_shutdown();
}

/* what computes the values fuses into the store's kernel: an elementwise
 * expression of realized tensors, a permuted view of a realized buffer (a
 * KV cache's new row out of qkv), a broadcast scalar; a reduce (a matmul)
 * is its own kernel first */
static void test_fusion(void **state) {
    (void)state;
    tc_tensor *dst = rnd(2, SHAPE(6, 8), 1), *a = rnd(2, SHAPE(2, 8), 2),
              *b = rnd(2, SHAPE(2, 8), 3);
    int32_t ids[2] = {5, 1};
    tc_tensor *idx = from(ids, TC_INT32, 1, SHAPE(2));
    tc_tensor *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL), *ta = tc_mul(a, two),
              *e = tc_add(ta, b);
    tc_tensor *ex = tc_exp(e);
    assert_int_equal(tc_index_copy(dst, 0, idx, ex), TC_OK);
    tc_check_schedule(dst, 1, 1e-6, 1e-6, "exp(2a + b) stored at rows");
    /* (8, 2) permuted to (2, 8) */
    tc_tensor *t = rnd(2, SHAPE(8, 2), 4), *tp = tc_permute(t, (const int[]){1, 0});
    assert_int_equal(tc_index_copy(dst, 0, idx, tp), TC_OK);
    tc_check_schedule(dst, 1, 0, 0, "a transposed view stored at rows");
    assert_int_equal(tc_index_copy(dst, 1, idx, two), TC_OK); /* broadcast to (6, 2) */
    tc_check_schedule(dst, 1, 0, 0, "a scalar stored at columns");
    tc_tensor *w = rnd(2, SHAPE(8, 8), 5), *mm = tc_matmul(a, w);
    assert_int_equal(tc_index_copy(dst, 0, idx, mm), TC_OK);
    tc_check_schedule(dst, 2, 1e-5, 1e-6, "a matmul (realized), then stored");
    tc_release(dst), tc_release(a), tc_release(b), tc_release(idx), tc_release(two);
    tc_release(ta), tc_release(e), tc_release(ex), tc_release(t), tc_release(tp);
    tc_release(w), tc_release(mm);
    tc_shutdown();
}

/* the assign rules: a reader of the old contents realized with the store
 * sees them; a reader of the new ones sees those; a value computed from
 * the buffer being written (another row of it) is computed before any
 * write; a view of the buffer itself as the value is copied first */
static void test_hazards(void **state) {
    (void)state;
    float dv[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    tc_tensor *dst = tc_from_data(dv, TC_FLOAT32, 2, SHAPE(4, 3), NULL);
    int32_t ids[2] = {3, 0};
    tc_tensor *idx = from(ids, TC_INT32, 1, SHAPE(2));
    tc_tensor *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL), *old = tc_mul(dst, two);
    tc_tensor *val = tc_full(2, SHAPE(2, 3), -1, TC_FLOAT32, NULL);
    assert_int_equal(tc_index_copy(dst, 0, idx, val), TC_OK);
    tc_tensor *fresh = tc_add(dst, two), *all[3] = {old, dst, fresh};
    assert_int_equal(tc_realize(all, 3), TC_OK);
    float want_old[12], want_dst[12] = {-1, -1, -1, 3, 4, 5, 6, 7, 8, -1, -1, -1}, want_new[12];
    for (int i = 0; i < 12; i++) want_old[i] = 2 * dv[i], want_new[i] = want_dst[i] + 2;
    expect(old, want_old, 12, "a reader of the old contents");
    expect(dst, want_dst, 12, "the store");
    expect(fresh, want_new, 12, "a reader of the new contents");
    /* rows 1 and 2, times 10, written at rows 2 and 1: read before written */
    tc_tensor *mid = tc_shrink(dst, (const int64_t[]){1, 3, 0, 3}),
              *ten = tc_full(0, NULL, 10, TC_FLOAT32, NULL);
    tc_tensor *m10 = tc_mul(mid, ten);
    int32_t swap[2] = {2, 1};
    tc_tensor *sidx = from(swap, TC_INT32, 1, SHAPE(2));
    assert_int_equal(tc_index_copy(dst, 0, sidx, m10), TC_OK);
    tc_check_schedule(dst, 2, 0, 0, "values from the rows being overwritten");
    float want_swap[12] = {-1, -1, -1, 60, 70, 80, 30, 40, 50, -1, -1, -1};
    expect(dst, want_swap, 12, "rows swapped and scaled");
    /* the buffer's own rows as the value: copied out first */
    tc_tensor *view = tc_shrink(dst, (const int64_t[]){1, 3, 0, 3});
    assert_int_equal(tc_index_copy(dst, 0, sidx, view), TC_OK);
    tc_check_schedule(dst, 2, 0, 0, "the buffer's own rows, swapped");
    float want_back[12] = {-1, -1, -1, 30, 40, 50, 60, 70, 80, -1, -1, -1};
    expect(dst, want_back, 12, "rows swapped back");
    tc_release(dst), tc_release(idx), tc_release(two), tc_release(old), tc_release(val);
    tc_release(fresh), tc_release(mid), tc_release(ten), tc_release(m10), tc_release(sidx);
    tc_release(view);
    tc_shutdown();
}

/* indices outside [0, size): an error at the call when the index is on the
 * host (dst unchanged); in a kernel (a lazy index) those entries write
 * nothing, the others are written. Of two equal indices the later wins. */
static void test_out_of_range(void **state) {
    (void)state;
    float dv[6] = {0, 1, 2, 3, 4, 5};
    tc_tensor *dst = tc_from_data(dv, TC_FLOAT32, 2, SHAPE(3, 2), NULL);
    tc_tensor *val = tc_full(2, SHAPE(2, 2), 9, TC_FLOAT32, NULL);
    int32_t big[2] = {1, 3}, neg[2] = {-1, 0};
    tc_tensor *ib = from(big, TC_INT32, 1, SHAPE(2)), *in = from(neg, TC_INT32, 1, SHAPE(2));
    assert_int_equal(tc_index_copy(dst, 0, ib, val), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID,
                    "tc_index_copy: index[1] = 3 is outside [0, 3), the size of dst's axis 0");
    assert_int_equal(tc_index_copy(dst, 0, in, val), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "index[0] = -1 is outside [0, 3)");
    tc_tensor *ck = tc_full(1, SHAPE(2), 7, TC_INT64, NULL); /* a constant: known on the host */
    tc_tensor *one = tc_full(0, NULL, 1, TC_FLOAT32, NULL),
              *five = tc_full(2, SHAPE(2, 2), 5, TC_FLOAT32, NULL);
    assert_int_equal(tc_index_copy(dst, 1, ck, one), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "index[0] = 7 is outside [0, 2), the size of dst's axis 1");
    expect(dst, dv, 6, "a failed call changes nothing");
    /* lazy indices, computed in the store's kernel */
    tc_tensor *sh = tc_full(0, NULL, 1, TC_INT32, NULL), *lazy = tc_add(ib, sh); /* [2, 4] */
    assert_int_equal(tc_index_copy(dst, 0, lazy, val), TC_OK);
    tc_check_schedule(dst, 1, 0, 0, "an index outside the axis in a kernel");
    float want[6] = {0, 1, 2, 3, 9, 9};
    expect(dst, want, 6, "row 2 written, row 3 (outside) nowhere");
    tc_tensor *lneg = tc_sub(in, sh); /* [-2, -1] */
    assert_int_equal(tc_index_copy(dst, 0, lneg, five), TC_OK);
    expect(dst, want, 6, "negative indices in a kernel write nothing");
    /* equal indices: the later entry stays */
    int32_t dup[3] = {1, 0, 1};
    float dvals[6] = {10, 11, 20, 21, 30, 31};
    tc_tensor *id = from(dup, TC_INT32, 1, SHAPE(3)),
              *dval = from(dvals, TC_FLOAT32, 2, SHAPE(3, 2));
    assert_int_equal(tc_index_copy(dst, 0, id, dval), TC_OK);
    tc_check_schedule(dst, 1, 0, 0, "equal indices");
    float want3[6] = {20, 21, 30, 31, 9, 9}; /* row 1: 10 11, then 30 31 */
    expect(dst, want3, 6, "the later of equal indices");
    tc_release(dst), tc_release(val), tc_release(ib), tc_release(in), tc_release(ck);
    tc_release(one), tc_release(five);
    tc_release(sh), tc_release(lazy), tc_release(lneg), tc_release(id), tc_release(dval);
    tc_shutdown();
}

/* bad arguments: each an error naming the call and the values */
static void test_errors(void **state) {
    (void)state;
    tc_tensor *dst = rnd(2, SHAPE(3, 4), 1), *val = rnd(2, SHAPE(1, 4), 2);
    int32_t one = 1;
    float f = 1;
    tc_tensor *idx = from(&one, TC_INT32, 1, SHAPE(1)), *fidx = from(&f, TC_FLOAT32, 1, SHAPE(1));
    tc_tensor *idx2 = from(&one, TC_INT32, 2, SHAPE(1, 1)),
              *s = tc_full(0, NULL, 1, TC_FLOAT32, NULL);
    assert_int_equal(tc_index_copy(NULL, 0, idx, val), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_index_copy");
    assert_int_equal(tc_index_copy(dst, 0, fidx, val), TC_ERR_DTYPE);
    assert_tc_error(TC_ERR_DTYPE, "tc_index_copy: index is float32, not an integer dtype");
    assert_int_equal(tc_index_copy(dst, 0, idx2, val), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_index_copy: index has 2 dims; it must be 0-d or 1-d");
    assert_int_equal(tc_index_copy(dst, 1, idx, val), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_index_copy: value of shape (1,4) does not broadcast to (3,1) "
                                  "(dst's shape with axis 1 at the 1 indices)");
    assert_int_equal(tc_index_copy(dst, 2, idx, val), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_index_copy");
    assert_int_equal(tc_index_copy(s, 0, idx, val), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_index_copy: dst is 0-d");
    tc_tensor *part = tc_shrink(dst, (const int64_t[]){0, 2, 0, 4});
    assert_int_equal(tc_index_copy(part, 0, idx, val), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID,
                    "tc_index_copy: dst of shape (2,4) is a view into part of a buffer");
    tc_release(dst), tc_release(val), tc_release(idx), tc_release(fidx), tc_release(idx2);
    tc_release(s), tc_release(part);
    tc_shutdown();
}

/* a lazy dst is realized into its own buffer first; an int32 dst takes
 * float values cast; a 0-d index is one entry; a reshaped buffer is
 * indexed in its own shape */
static void test_lazy_dst_and_dtypes(void **state) {
    (void)state;
    int32_t dv[4] = {1, 2, 3, 4}, three = 3;
    tc_tensor *d0 = from(dv, TC_INT32, 1, SHAPE(4)), *dst = tc_add(d0, d0); /* lazy: 2 4 6 8 */
    tc_tensor *i0 = from(&three, TC_INT32, 0, NULL),
              *v = tc_full(1, SHAPE(1), 7.75, TC_FLOAT32, NULL);
    assert_int_equal(tc_index_copy(dst, 0, i0, v), TC_OK);
    tc_check_schedule(dst, 1, 0, 0, "into an int32 dst");
    int32_t want[4] = {2, 4, 6, 7}, *got = tc_test_read(dst);
    assert_memory_equal(got, want, sizeof want);
    int32_t *src = tc_test_read(d0);
    assert_memory_equal(src, dv, sizeof dv); /* d0's buffer is not dst's */
    free(got), free(src);
    /* a reshape of a buffer (its own, whole, in order) is written in its shape */
    float b[12] = {0};
    tc_tensor *buf = from(b, TC_FLOAT32, 2, SHAPE(2, 6)), *r = tc_reshape(buf, 2, SHAPE(3, 4));
    int32_t two = 2;
    tc_tensor *i2 = from(&two, TC_INT32, 1, SHAPE(1)), *row = tc_arange(0, 4, 1, TC_FLOAT32, NULL);
    assert_int_equal(tc_index_copy(r, 0, i2, row), TC_OK);
    tc_check_schedule(r, 1, 0, 0, "into a reshaped buffer");
    float want_r[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3};
    expect(r, want_r, 12, "row 2 of the (3,4) view");
    tc_release(d0), tc_release(dst), tc_release(i0), tc_release(v);
    tc_release(buf), tc_release(r), tc_release(i2), tc_release(row);
    tc_shutdown();
}

/* a layer's K and V rows written at one position: one kernel for both
 * stores; a store whose values read the other's new contents cannot share
 * its kernel (it runs after it) */
static void test_pair(void **state) {
    (void)state;
    tc_tensor *k = rnd(4, SHAPE(1, 2, 6, 4), 1), *v = rnd(4, SHAPE(1, 2, 6, 4), 2);
    tc_tensor *kr = rnd(4, SHAPE(1, 2, 1, 4), 3), *vr = rnd(4, SHAPE(1, 2, 1, 4), 4);
    int32_t p = 3, q = 5;
    tc_tensor *pos = from(&p, TC_INT32, 1, SHAPE(1)), *pos2 = from(&q, TC_INT32, 1, SHAPE(1));
    float *kh = tc_test_read(k), *vh = tc_test_read(v), *krh = tc_test_read(kr),
          *vrh = tc_test_read(vr);
    assert_int_equal(tc_index_copy(k, 2, pos, kr), TC_OK);
    assert_int_equal(tc_index_copy(v, 2, pos, vr), TC_OK);
    tc_tensor *both[2] = {k, v};
    assert_int_equal(tc_schedule_kernel_count(both, 2), 1);
    assert_int_equal(tc_realize(both, 2), TC_OK);
    for (int h = 0; h < 2; h++)
        for (int d = 0; d < 4; d++) {
            kh[(h * 6 + p) * 4 + d] = krh[h * 4 + d];
            vh[(h * 6 + p) * 4 + d] = vrh[h * 4 + d];
        }
    expect(k, kh, 48, "K with its new row");
    expect(v, vh, 48, "V with its new row");
    /* V's row 5 := K's new row 5 (2 * kr): after K's store */
    tc_tensor *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL), *kr2 = tc_mul(kr, two);
    assert_int_equal(tc_index_copy(k, 2, pos2, kr2), TC_OK);
    tc_tensor *krow = tc_shrink(k, (const int64_t[]){0, 1, 0, 2, 5, 6, 0, 4});
    assert_int_equal(tc_index_copy(v, 2, pos2, krow), TC_OK);
    assert_int_equal(tc_schedule_kernel_count(both, 2), 2);
    assert_int_equal(tc_realize(both, 2), TC_OK);
    for (int h = 0; h < 2; h++)
        for (int d = 0; d < 4; d++)
            kh[(h * 6 + q) * 4 + d] = vh[(h * 6 + q) * 4 + d] = 2 * krh[h * 4 + d];
    expect(k, kh, 48, "K's row 5");
    expect(v, vh, 48, "V's row 5, read from K's new row");
    free(kh), free(vh), free(krh), free(vrh);
    tc_release(k), tc_release(v), tc_release(kr), tc_release(vr), tc_release(pos);
    tc_release(pos2), tc_release(two), tc_release(kr2), tc_release(krow);
    tc_shutdown();
}

/* ---- a jitted loop: one row a step, as a KV cache ---- */

enum { S = 7, H = 2, HD = 4 };

typedef struct {
    tc_tensor *cache; /* (1, H, S, HD), written in place */
    int calls;        /* times the step ran (not replayed) */
} kv;

/* in[0] the new row (1, H, 1, HD), in[1] its position (1) int32; the row
 * (times 2, fused into the store) goes into the cache; out[0] = sum of the
 * cache over positions (1, H, 1, HD) */
static tc_status kv_step(void *user, tc_tensor *const *in, int n_in, tc_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    kv *k = user;
    k->calls++;
    tc_tensor *two = tc_full(0, NULL, 2, TC_FLOAT32, NULL), *row = tc_mul(in[0], two);
    tc_status s = tc_index_copy(k->cache, 2, in[1], row);
    int ax = 2;
    out[0] = s == TC_OK ? tc_sum(k->cache, 1, &ax, true) : NULL;
    tc_release(two), tc_release(row);
    tc_tensor *both[2] = {out[0], k->cache};
    if (s == TC_OK) s = out[0] ? tc_realize(both, 2) : tc_last_status();
    return s;
}

static void test_jit_rows(void **state) {
    (void)state;
    kv k = {tc_full(4, SHAPE(1, H, S, HD), 0, TC_FLOAT32, NULL), 0};
    tc_tensor *c = tc_contiguous(k.cache);
    tc_release(k.cache);
    k.cache = c;
    assert_int_equal(tc_realize(&k.cache, 1), TC_OK);
    tc_jit *j = tc_jit_new(kv_step, &k);
    float host[H * S * HD] = {0};
    for (int32_t p = 0; p < S; p++) {
        tc_tensor *row = tc_test_randn(4, SHAPE(1, H, 1, HD), 100 + (uint64_t)p, -1, 1);
        tc_tensor *pos = from(&p, TC_INT32, 1, SHAPE(1)), *in[2] = {row, pos}, *out = NULL;
        tc_counters c0, c1;
        tc_get_counters(&c0);
        assert_int_equal(tc_jit_run(j, in, 2, &out, 1), TC_OK);
        tc_get_counters(&c1);
        assert_int_equal(k.calls, p < 2 ? p + 1 : 2); /* replayed from the third step */
        if (p >= 2) assert_int_equal(c1.kernel_count - c0.kernel_count, 2);
        float *r = tc_test_read(row), sum[H * HD] = {0};
        for (int h = 0; h < H; h++)
            for (int d = 0; d < HD; d++) host[(h * S + p) * HD + d] = 2 * r[h * HD + d];
        for (int h = 0; h < H; h++)
            for (int q = 0; q < S; q++)
                for (int d = 0; d < HD; d++) sum[h * HD + d] += host[(h * S + q) * HD + d];
        expect(k.cache, host, H * S * HD, "the cache after the step");
        float *got = tc_test_read(out);
        assert_true(tc_allclose_f32(got, sum, H * HD, 1e-6, 1e-6, "the step's output"));
        free(r), free(got);
        tc_release(row), tc_release(pos), tc_release(out);
    }
    assert_int_equal(tc_jit_kernel_count(j), 2); /* the store, then the sum */
    /* a replay with a position outside the cache writes nothing */
    int32_t far = S + 3;
    tc_tensor *row = tc_test_randn(4, SHAPE(1, H, 1, HD), 1, -1, 1),
              *pos = from(&far, TC_INT32, 1, SHAPE(1));
    tc_tensor *in[2] = {row, pos}, *out = NULL;
    assert_int_equal(tc_jit_run(j, in, 2, &out, 1), TC_OK);
    assert_int_equal(k.calls, 2);
    expect(k.cache, host, H * S * HD, "a replay outside the cache");
    tc_release(row), tc_release(pos), tc_release(out);
    tc_jit_free(j);
    tc_release(k.cache);
    tc_shutdown();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_axes),    cmocka_unit_test(test_fusion),
        cmocka_unit_test(test_hazards), cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_errors),  cmocka_unit_test(test_lazy_dst_and_dtypes),
        cmocka_unit_test(test_pair),    cmocka_unit_test(test_jit_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
