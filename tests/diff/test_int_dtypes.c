/* test_int_dtypes.c - the integer dtypes int8, int16, uint16, uint32, uint64
 * (and uint8, int32, int64 beside them) end to end: every elementwise op, casts
 * between every pair of dtypes, reduces, a fused chain, promotion, the
 * value checks of tc_full, safetensors names. Three answers must agree bit
 * for bit: the kernels (tc_realize on the CPU, where every op of a case is
 * fused), the reference evaluator (tc_ref_eval on the unrealized graph, the
 * oracle of test_diff.c), and C semantics computed here on the host
 * (two's-complement wrapping to the dtype's width, truncating division with
 * x / 0 = x % 0 = 0, shift counts outside the width shifting every bit out;
 * uint64, held in an int64 as its bits, ordered, divided and shifted right
 * as unsigned).
 * Inputs are each dtype's edge values (its least and greatest, -1, 0, 1,
 * ...). The differential generator of test_diff.c does not draw these
 * dtypes (its range model covers the older ones); this file is their check. */
#include "tc_test.h"

#include "engine/engine.h"
#include "tensor/tensor.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 16 /* elements per operand */

static const tc_dtype INTS[] = {TC_INT8,  TC_INT16, TC_UINT16, TC_UINT32,
                                TC_UINT64, TC_UINT8, TC_INT32,  TC_INT64};
enum { N_INTS = sizeof INTS / sizeof INTS[0] };

/* N edge values of dt: a, and b (a permutation with other values, small
 * nonnegative where shift counts want them) */
static void edges(tc_dtype dt, int64_t *a, int64_t *b) {
    int64_t lo, hi;
    assert_true(tc_dtype_int_range(dt, &lo, &hi));
    const int64_t base[N] = {lo, lo + 1, -1, 0, 1, 2, 3, 7, 100, -100, hi / 3, hi - 1, hi, -7, 64, 5};
    for (int i = 0; i < N; i++) a[i] = tc_dtype_wrap(dt, base[i]);
    for (int i = 0; i < N; i++) b[i] = tc_dtype_wrap(dt, base[(i * 7 + 3) % N]);
}

static tc_tensor *tensor_of(tc_dtype dt, const int64_t *v) {
    unsigned char buf[N * 8];
    for (int i = 0; i < N; i++) tc_scalar_store_int(buf, dt, i, v[i]);
    tc_tensor *t = tc_from_data(buf, dt, 1, (const int64_t[]){N}, NULL);
    assert_non_null(t);
    return t;
}

/* the host's C semantics of a op b in dt (operands already in range) */
typedef enum { H_ADD, H_SUB, H_MUL, H_IDIV, H_MOD, H_MAX, H_MIN, H_AND, H_OR, H_XOR, H_SHL, H_SHR } hop;

/* a < b in dt's order */
static bool less(tc_dtype dt, int64_t a, int64_t b) {
    return dt == TC_UINT64 ? (uint64_t)a < (uint64_t)b : a < b;
}

static int64_t host_op(hop op, tc_dtype dt, int64_t a, int64_t b) {
    int bits = 8 * (int)tc_dtype_size(dt);
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    if (dt == TC_UINT64) {
        if (op == H_IDIV) return ub == 0 ? 0 : (int64_t)(ua / ub);
        if (op == H_MOD) return ub == 0 ? 0 : (int64_t)(ua % ub);
        if (op == H_SHR) return b < 0 || b >= bits ? 0 : (int64_t)(ua >> b);
    }
    switch (op) {
    case H_ADD: return tc_dtype_wrap(dt, (int64_t)(ua + ub));
    case H_SUB: return tc_dtype_wrap(dt, (int64_t)(ua - ub));
    case H_MUL: return tc_dtype_wrap(dt, (int64_t)(ua * ub));
    case H_IDIV: return b == 0 ? 0 : b == -1 ? tc_dtype_wrap(dt, (int64_t)(0 - ua)) : a / b;
    case H_MOD: return b == 0 || b == -1 ? 0 : a % b;
    case H_MAX: return less(dt, b, a) ? a : b;
    case H_MIN: return less(dt, a, b) ? a : b;
    case H_AND: return a & b;
    case H_OR: return a | b;
    case H_XOR: return a ^ b;
    case H_SHL: return b < 0 || b >= bits ? 0 : tc_dtype_wrap(dt, (int64_t)(ua << b));
    case H_SHR: return b < 0 || b >= bits ? (a < 0 ? -1 : 0) : a >> b;
    }
    return 0;
}

/* t's elements (dtype dt, n of them) from the kernels and from the oracle:
 * both must equal want */
static void expect(const char *what, tc_tensor *t, tc_dtype dt, int n, const int64_t *want) {
    assert_non_null(t);
    if (tc_get_dtype(t) != dt) fail_msg("%s: dtype %s, want %s", what, tc_dtype_name(tc_get_dtype(t)), tc_dtype_name(dt));
    unsigned char oracle[N * 8], got[N * 8];
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), oracle), TC_OK);
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    assert_int_equal(tc_to_host(t, got, (size_t)n * tc_dtype_size(dt)), TC_OK);
    for (int i = 0; i < n; i++) {
        int64_t g = tc_scalar_load_int(got, dt, i), o = tc_scalar_load_int(oracle, dt, i);
        if (g != want[i] || o != want[i])
            fail_msg("%s (%s) element %d: kernel %lld, oracle %lld, C %lld", what, tc_dtype_name(dt), i,
                     (long long)g, (long long)o, (long long)want[i]);
    }
    tc_release(t);
}

static void test_binary_ops(void **state) {
    (void)state;
    typedef tc_tensor *(*bin)(tc_tensor *, tc_tensor *);
    static const struct {
        const char *name;
        bin fn;
        hop op;
    } ops[] = {{"add", tc_add, H_ADD},          {"sub", tc_sub, H_SUB},
               {"mul", tc_mul, H_MUL},          {"idiv", tc_idiv, H_IDIV},
               {"mod", tc_mod, H_MOD},          {"maximum", tc_maximum, H_MAX},
               {"minimum", tc_minimum, H_MIN},  {"and", tc_logical_and, H_AND},
               {"or", tc_logical_or, H_OR},     {"xor", tc_logical_xor, H_XOR},
               {"lshift", tc_lshift, H_SHL},    {"rshift", tc_rshift, H_SHR}};
    for (int d = 0; d < N_INTS; d++) {
        tc_dtype dt = INTS[d];
        int64_t a[N], b[N], want[N], cnt[N];
        edges(dt, a, b);
        for (int i = 0; i < N; i++) cnt[i] = i % (8 * (int)tc_dtype_size(dt) + 3); /* 0 .. bits+2 */
        tc_tensor *ta = tensor_of(dt, a), *tb = tensor_of(dt, b), *tc = tensor_of(dt, cnt);
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            bool is_shift = ops[k].op == H_SHL || ops[k].op == H_SHR;
            for (int i = 0; i < N; i++) want[i] = host_op(ops[k].op, dt, a[i], is_shift ? cnt[i] : b[i]);
            expect(ops[k].name, ops[k].fn(ta, is_shift ? tc : tb), dt, N, want);
        }
        /* comparisons give bool */
        int64_t lt[N], eq[N];
        for (int i = 0; i < N; i++) lt[i] = less(dt, a[i], b[i]), eq[i] = a[i] == b[i];
        expect("lt", tc_lt(ta, tb), TC_BOOL, N, lt);
        expect("eq", tc_eq(ta, tb), TC_BOOL, N, eq);
        /* unary: neg wraps, abs of the least value wraps to itself, sign */
        int64_t neg[N], ab[N], sg[N];
        for (int i = 0; i < N; i++) {
            neg[i] = tc_dtype_wrap(dt, (int64_t)(0 - (uint64_t)a[i]));
            ab[i] = less(dt, a[i], 0) ? neg[i] : a[i];
            sg[i] = less(dt, 0, a[i]) - less(dt, a[i], 0);
        }
        expect("neg", tc_neg(ta), dt, N, neg);
        expect("abs", tc_abs(ta), dt, N, ab);
        expect("sign", tc_sign(ta), dt, N, sg);
        /* one fused kernel of several ops: ((a * b + a) ^ b) >> 1 */
        tc_tensor *m = tc_mul(ta, tb), *s = tc_add(m, ta), *x = tc_logical_xor(s, tb);
        int64_t one[N], fused[N];
        for (int i = 0; i < N; i++) one[i] = 1;
        tc_tensor *t1 = tensor_of(dt, one), *y = tc_rshift(x, t1);
        assert_int_equal(tc_schedule_kernel_count(&y, 1), 1);
        for (int i = 0; i < N; i++)
            fused[i] = host_op(H_SHR, dt, host_op(H_XOR, dt, host_op(H_ADD, dt, host_op(H_MUL, dt, a[i], b[i]), a[i]), b[i]), 1);
        expect("fused chain", y, dt, N, fused);
        tc_release(m), tc_release(s), tc_release(x), tc_release(t1);
        tc_release(ta), tc_release(tb), tc_release(tc);
    }
}

static void test_casts(void **state) {
    (void)state;
    for (int d = 0; d < N_INTS; d++)
        for (int e = 0; e < N_INTS; e++) {
            tc_dtype from = INTS[d], to = INTS[e];
            int64_t a[N], b[N], want[N];
            edges(from, a, b);
            for (int i = 0; i < N; i++) want[i] = tc_dtype_wrap(to, a[i]);
            tc_tensor *t = tensor_of(from, a);
            expect("cast", tc_cast(t, to), to, N, want);
            tc_release(t);
        }
    /* to and from float32 and bool */
    for (int d = 0; d < N_INTS; d++) {
        tc_dtype dt = INTS[d];
        int64_t a[N], b[N], want[N];
        edges(dt, a, b);
        tc_tensor *t = tensor_of(dt, a), *f = tc_cast(t, TC_FLOAT32);
        float got[N];
        assert_int_equal(tc_to_host(f, got, sizeof got), TC_OK);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == (dt == TC_UINT64 ? (float)(uint64_t)a[i] : (float)a[i]));
        for (int i = 0; i < N; i++) want[i] = a[i] != 0;
        expect("to bool", tc_cast(t, TC_BOOL), TC_BOOL, N, want);
        /* float values inside dt's range come back truncated */
        float fv[N];
        for (int i = 0; i < N; i++) fv[i] = (float)(i - 5) * 2.75f;
        tc_tensor *ft = tc_from_data(fv, TC_FLOAT32, 1, (const int64_t[]){N}, NULL);
        for (int i = 0; i < N; i++) want[i] = tc_dtype_wrap(dt, (int64_t)fv[i]);
        if (tc_dtypes[dt].is_signed) expect("from float32", tc_cast(ft, dt), dt, N, want);
        tc_release(ft), tc_release(f), tc_release(t);
    }
}

static void test_reduces(void **state) {
    (void)state;
    for (int d = 0; d < N_INTS; d++) {
        tc_dtype dt = INTS[d];
        int64_t a[N], b[N];
        edges(dt, a, b);
        tc_tensor *t = tensor_of(dt, a), *r = tc_reshape(t, 2, (const int64_t[]){4, 4});
        tc_dtype acc = tc_sum_dtype(dt);
        int64_t sum[4], mx[4], mn[4];
        for (int i = 0; i < 4; i++) {
            sum[i] = 0, mx[i] = a[4 * i], mn[i] = a[4 * i];
            for (int j = 0; j < 4; j++) {
                int64_t v = a[4 * i + j];
                sum[i] = tc_dtype_wrap(acc, (int64_t)((uint64_t)sum[i] + (uint64_t)v));
                mx[i] = less(dt, mx[i], v) ? v : mx[i], mn[i] = less(dt, v, mn[i]) ? v : mn[i];
            }
        }
        expect("sum", tc_sum(r, 1, (const int[]){1}, false), acc, 4, sum);
        expect("max", tc_max(r, 1, (const int[]){1}, false), dt, 4, mx);
        expect("min", tc_min(r, 1, (const int[]){1}, false), dt, 4, mn);
        tc_release(r), tc_release(t);
    }
}

static void test_promotion_and_values(void **state) {
    (void)state;
    static const tc_dtype cases[][3] = {
        {TC_INT8, TC_UINT8, TC_INT16},     {TC_UINT16, TC_INT8, TC_INT32},
        {TC_UINT32, TC_INT32, TC_INT64},   {TC_UINT16, TC_UINT32, TC_UINT32},
        {TC_INT16, TC_INT8, TC_INT16},     {TC_INT16, TC_UINT8, TC_INT16},
        {TC_INT64, TC_UINT32, TC_INT64},   {TC_FLOAT16, TC_INT16, TC_FLOAT16},
        {TC_BOOL, TC_UINT16, TC_UINT16},   {TC_UINT8, TC_BOOL, TC_UINT8},
        {TC_UINT64, TC_INT64, TC_FLOAT64}, {TC_INT8, TC_UINT64, TC_FLOAT64},
        {TC_UINT64, TC_UINT8, TC_UINT64},  {TC_UINT32, TC_UINT64, TC_UINT64},
        {TC_UINT64, TC_FLOAT16, TC_FLOAT16}, {TC_BOOL, TC_UINT64, TC_UINT64},
    };
    tc_test_check_promotion(cases, sizeof cases / sizeof cases[0]);
    /* tc_full checks the value against the dtype's range */
    assert_null(tc_full(1, (const int64_t[]){2}, 200, TC_INT8, NULL));
    assert_int_equal(tc_last_status(), TC_ERR_INVALID);
    assert_string_equal(tc_last_error(), "tc_full: value 200 does not fit in int8");
    assert_null(tc_full(1, (const int64_t[]){2}, -1, TC_UINT32, NULL));
    assert_string_equal(tc_last_error(), "tc_full: value -1 does not fit in uint32");
    tc_tensor *f = tc_full(1, (const int64_t[]){2}, 4294967295.0, TC_UINT32, NULL);
    uint32_t u[2];
    assert_int_equal(tc_to_host(f, u, sizeof u), TC_OK);
    assert_true(u[0] == 4294967295u && u[1] == 4294967295u);
    tc_release(f);
    f = tc_full(1, (const int64_t[]){2}, -32768, TC_INT16, NULL);
    int16_t h[2];
    assert_int_equal(tc_to_host(f, h, sizeof h), TC_OK);
    assert_int_equal(h[0], -32768);
    tc_release(f);
    /* uint64 up to 2^64 (exclusive), values past 2^63 exactly */
    f = tc_full(1, (const int64_t[]){2}, 18446744073709549568.0, TC_UINT64, NULL);
    uint64_t u64[2];
    assert_int_equal(tc_to_host(f, u64, sizeof u64), TC_OK);
    assert_true(u64[0] == UINT64_C(18446744073709549568));
    tc_release(f);
    assert_null(tc_full(1, (const int64_t[]){2}, 18446744073709551616.0, TC_UINT64, NULL));
    assert_string_equal(tc_last_error(), "tc_full: value 1.84467e+19 does not fit in uint64");
    assert_null(tc_full(1, (const int64_t[]){2}, -1, TC_UINT64, NULL));
    assert_string_equal(tc_dtype_name(TC_UINT16), "uint16");
    assert_int_equal(tc_dtype_size(TC_UINT32), 4);
}

/* a safetensors round trip keeps each dtype (names I8, I16, U16, U32, U64) */
static void test_safetensors(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/int_dtypes_%d.safetensors", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    tc_tensor *ts[5], *back[5];
    const char *names[5] = {"a", "b", "c", "d", "e"};
    for (int k = 0; k < 5; k++) {
        int64_t a[N], b[N];
        edges(INTS[k], a, b);
        ts[k] = tensor_of(INTS[k], a);
        back[k] = tc_zeros(1, (const int64_t[]){N}, INTS[k], NULL);
    }
    assert_int_equal(tc_safe_save(path, names, ts, 5), TC_OK);
    assert_int_equal(tc_safe_load(path, names, back, 5), TC_OK);
    for (int k = 0; k < 5; k++) {
        int64_t a[N], b[N];
        edges(INTS[k], a, b);
        expect("safetensors", tc_retain(back[k]), INTS[k], N, a);
        tc_release(ts[k]), tc_release(back[k]);
    }
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_ops),           cmocka_unit_test(test_casts),
        cmocka_unit_test(test_reduces),              cmocka_unit_test(test_promotion_and_values),
        cmocka_unit_test(test_safetensors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return r;
}
