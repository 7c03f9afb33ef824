/* test_bfloat16.c - bfloat16 end to end: the conversion from float32
 * (round to nearest even, checked against a rounding written differently
 * here), casts to and from every dtype, elementwise math computed in float32
 * and rounded to bfloat16 after every op, a fused chain, reduces,
 * promotion, constants, random values, safetensors and a gradient.
 *
 * The kernels (tc_realize on the test's device) and the reference evaluator
 * (tc_ref_eval on the unrealized graph) must agree bit for bit, except for
 * the transcendentals (the CPU kernels' polynomials against libm's float
 * functions: one bfloat16 step at most); both must equal C semantics
 * computed here: bf16(float32 op of the bfloat16 operands). */
#include "tc_test.h"

#include "engine/engine.h"
#include "tensor/tensor.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 16 /* elements per operand */

/* float32 -> bfloat16 bits, rounded to nearest even: the two neighbours
 * and the distance to each, not the library's carry trick */
static uint16_t host_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if (isnan(f)) return (uint16_t)((x >> 16) | 0x40);
    uint32_t down = x & 0xffff0000u, up = down + 0x10000u; /* magnitudes below and above */
    float fd, fu;
    memcpy(&fd, &down, 4);
    memcpy(&fu, &up, 4);
    /* past the largest bfloat16 the next step up is inf, at 2^128 */
    double vu = isinf(fu) ? copysign(0x1p128, (double)f) : (double)fu;
    double dd = fabs((double)f - fd), du = fabs(vu - (double)f);
    if ((x & 0xffffu) == 0) return (uint16_t)(down >> 16);
    bool take_up = du < dd || (du == dd && ((down >> 16) & 1));
    return (uint16_t)((take_up ? up : down) >> 16);
}

static float bf(float f) {
    uint32_t b = (uint32_t)host_bf16(f) << 16;
    float r;
    memcpy(&r, &b, 4);
    return r;
}

/* edge values (all bfloat16 already): zeros, ones, extremes, a subnormal,
 * infinities, NaN, and numbers whose products and sums round */
static float EDGES[N];
static void init_edges(void) {
    const float raw[N] = {0.0f,      -0.0f, 1.0f,       -1.0f,    0.5f,     3.0f,
                          -2.5f,     1e30f, -1e-30f,    9.2e-41f, 3.38e38f, INFINITY,
                          -INFINITY, NAN,   1.0078125f, 255.0f};
    for (int i = 0; i < N; i++) EDGES[i] = bf(raw[i]);
}

static tc_tensor *tensor_of(const float *v, int n) {
    uint16_t bits[64];
    for (int i = 0; i < n; i++) bits[i] = host_bf16(v[i]);
    tc_tensor *t = tc_from_data(bits, TC_BFLOAT16, 1, (const int64_t[]){n}, NULL);
    assert_non_null(t);
    return t;
}

static bool same(float x, float y) {
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

/* within `steps` bfloat16 steps (2^-7 relative each) */
static bool near(float g, float w, int steps) {
    if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) return same(g, w) || g == w;
    return fabsf(g - w) <= steps * 0x1p-7f * fmaxf(fabsf(w), 1e-30f);
}

/* t (bfloat16, n elements) from the kernels and from the oracle against
 * want: exactly when steps is 0, else within that many bfloat16 steps */
static void expect(const char *what, tc_tensor *t, int n, const float *want, int steps) {
    assert_non_null(t);
    if (tc_get_dtype(t) != TC_BFLOAT16)
        fail_msg("%s: dtype %s, want bfloat16", what, tc_dtype_name(tc_get_dtype(t)));
    uint16_t oracle[64], got[64];
    assert_true(n <= 64);
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), oracle), TC_OK);
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    assert_int_equal(tc_to_host(t, got, (size_t)n * 2), TC_OK);
    for (int i = 0; i < n; i++) {
        float g = tc_bf16_to_float(got[i]), o = tc_bf16_to_float(oracle[i]);
        bool ok =
            steps ? near(g, o, steps) && near(o, want[i], steps) : same(g, o) && same(o, want[i]);
        if (!ok)
            fail_msg("%s element %d: kernel %.9g, oracle %.9g, C %.9g", what, i, g, o, want[i]);
    }
    tc_release(t);
}

/* the library's conversion against the rounding above, on floats around
 * every tie and on the specials */
static void test_conversion(void **state) {
    (void)state;
    uint32_t seed = 12345;
    for (int k = 0; k < 200000; k++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t x = seed;
        if (k % 4 == 1) x = (x & 0xffff0000u) | 0x8000u; /* an exact tie */
        if (k % 4 == 2) x = (x & 0xffff0000u) | 0x7fffu;
        float f;
        memcpy(&f, &x, 4);
        uint16_t want = host_bf16(f), got = tc_float_to_bf16(f);
        if (isnan(f) ? !isnan(tc_bf16_to_float(got)) : got != want)
            fail_msg("bits 0x%08x: library 0x%04x, want 0x%04x", x, got, want);
    }
    assert_int_equal(tc_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie: to even */
    assert_int_equal(tc_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie: to even */
    assert_int_equal(tc_float_to_bf16(3.3961775e38f), 0x7f80);      /* past max: inf */
    assert_int_equal(tc_float_to_bf16(-INFINITY), 0xff80);
    assert_true(isnan(tc_bf16_to_float(tc_float_to_bf16(NAN))));
}

static void test_elementwise(void **state) {
    (void)state;
    init_edges();
    float b[N], want[N];
    for (int i = 0; i < N; i++) b[i] = EDGES[(i * 7 + 3) % N];
    tc_tensor *ta = tensor_of(EDGES, N), *tb = tensor_of(b, N);
    const float *a = EDGES;
    for (int i = 0; i < N; i++) want[i] = bf(a[i] + b[i]);
    expect("add", tc_add(ta, tb), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = bf(a[i] + -b[i]);
    expect("sub", tc_sub(ta, tb), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = bf(a[i] * b[i]);
    expect("mul", tc_mul(ta, tb), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = bf(a[i] * bf(1.0f / b[i])); /* a * recip(b) */
    expect("div", tc_div(ta, tb), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = a[i] > b[i] || a[i] != a[i] ? a[i] : b[i];
    expect("maximum", tc_maximum(ta, tb), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = -a[i];
    expect("neg", tc_neg(ta), N, want, 0);
    for (int i = 0; i < N; i++) want[i] = bf(sqrtf(a[i]));
    expect("sqrt", tc_sqrt(ta), N, want, 0);
    /* the transcendentals on moderate values: one bfloat16 step */
    float m[N];
    for (int i = 0; i < N; i++) m[i] = bf((float)(i - 7) * 0.8125f);
    tc_tensor *tm = tensor_of(m, N);
    /* exp is exp2(x * log2(e)), each step rounded: the product's rounding
     * costs exp a few steps against the exact value, as in float16 */
    for (int i = 0; i < N; i++) want[i] = bf(exp2f(bf(m[i] * bf(1.4426950408889634f))));
    expect("exp", tc_exp(tm), N, want, 1);
    for (int i = 0; i < N; i++) want[i] = bf(sinf(m[i]));
    expect("sin", tc_sin(tm), N, want, 1);
    for (int i = 0; i < N; i++)
        want[i] = bf(bf(log2f(bf(fabsf(m[i]) + 1.0f))) * bf(0.6931471805599453f));
    tc_tensor *one = tc_full(1, (const int64_t[]){N}, 1.0, TC_BFLOAT16, NULL), *ab = tc_abs(tm);
    tc_tensor *ap = tc_add(ab, one);
    expect("log", tc_log(ap), N, want, 1);
    tc_release(ap), tc_release(ab), tc_release(one);
    /* comparisons give bool */
    tc_tensor *lt = tc_lt(ta, tb);
    bool l[N];
    assert_int_equal(tc_to_host(lt, l, sizeof l), TC_OK);
    for (int i = 0; i < N; i++) assert_int_equal(l[i], a[i] < b[i]);
    for (int i = 0; i < N; i++) want[i] = a[i] < b[i] ? a[i] : b[i];
    expect("where", tc_where(lt, ta, tb), N, want, 0);
    /* one kernel, rounded after every op: (a * b + a) * 0.1 */
    tc_tensor *p = tc_mul(tm, tm), *s = tc_add(p, tm);
    tc_tensor *c = tc_full(1, (const int64_t[]){N}, 0.1, TC_BFLOAT16, NULL), *y = tc_mul(s, c);
    assert_int_equal(tc_schedule_kernel_count(&y, 1), 1);
    for (int i = 0; i < N; i++) want[i] = bf(bf(bf(m[i] * m[i]) + m[i]) * bf(0.1f));
    expect("fused (m*m + m) * 0.1", y, N, want, 0);
    tc_release(p), tc_release(s), tc_release(c), tc_release(lt), tc_release(tm);
    tc_release(ta), tc_release(tb);
}

static void test_casts(void **state) {
    (void)state;
    init_edges();
    /* float32 -> bfloat16 rounds to nearest even */
    float f[N] = {1.0f + 0x1p-8f,
                  1.0f + 3 * 0x1p-8f,
                  1.0f + 0x1p-9f,
                  3.3961775e38f,
                  -3.3961775e38f,
                  0.1f,
                  -0.1f,
                  1e-40f,
                  NAN,
                  INFINITY,
                  65504.0f,
                  16777217.0f,
                  -0.0f,
                  1.9921875f,
                  2.0f - 0x1p-9f,
                  123.456f};
    float want[N];
    for (int i = 0; i < N; i++) want[i] = bf(f[i]);
    tc_tensor *tf = tc_from_data(f, TC_FLOAT32, 1, (const int64_t[]){N}, NULL);
    expect("float32 -> bfloat16", tc_cast(tf, TC_BFLOAT16), N, want, 0);
    tc_release(tf);
    /* bfloat16 -> float32 and back: exact */
    tc_tensor *t = tensor_of(EDGES, N), *up = tc_cast(t, TC_FLOAT32),
              *back = tc_cast(up, TC_BFLOAT16);
    float got[N];
    assert_int_equal(tc_to_host(up, got, sizeof got), TC_OK);
    for (int i = 0; i < N; i++) assert_true(same(got[i], EDGES[i]));
    expect("bfloat16 -> float32 -> bfloat16", back, N, EDGES, 0);
    /* through every other dtype, with values each one holds */
    static const tc_dtype others[] = {TC_FLOAT64, TC_FLOAT16, TC_INT8,   TC_INT16,  TC_INT32,
                                      TC_INT64,   TC_UINT8,   TC_UINT16, TC_UINT32, TC_UINT64};
    float small[N];
    for (int i = 0; i < N; i++) small[i] = bf((float)(i * 7 % 100) + 0.5f * (float)(i % 3));
    tc_tensor *ts = tensor_of(small, N);
    for (size_t k = 0; k < sizeof others / sizeof others[0]; k++) {
        tc_dtype dt = others[k];
        bool is_float = dt == TC_FLOAT64 || dt == TC_FLOAT16;
        for (int i = 0; i < N; i++)
            want[i] = is_float ? bf((float)tc_dtype_round(dt, small[i])) : bf((float)(int)small[i]);
        tc_tensor *o = tc_cast(ts, dt);
        assert_int_equal(tc_get_dtype(o), dt);
        char what[64];
        snprintf(what, sizeof what, "bfloat16 -> %s -> bfloat16", tc_dtype_name(dt));
        expect(what, tc_cast(o, TC_BFLOAT16), N, want, 0);
        tc_release(o);
    }
    bool nz[N];
    tc_tensor *tb = tc_cast(t, TC_BOOL);
    assert_int_equal(tc_to_host(tb, nz, sizeof nz), TC_OK);
    for (int i = 0; i < N; i++) assert_int_equal(nz[i], EDGES[i] != 0);
    tc_release(tb), tc_release(ts), tc_release(up), tc_release(t);
    /* int64 and float64 values round through float32 */
    int64_t big[4] = {16777217, -(1LL << 40) - 12345, 257, 259};
    for (int i = 0; i < 4; i++) want[i] = bf((float)big[i]);
    tc_tensor *bi = tc_from_data(big, TC_INT64, 1, (const int64_t[]){4}, NULL);
    expect("int64 -> bfloat16", tc_cast(bi, TC_BFLOAT16), 4, want, 0);
    tc_release(bi);
}

static void test_reduces_and_promotion(void **state) {
    (void)state;
    float v[N], sum[4], mx[4];
    for (int i = 0; i < N; i++) v[i] = bf(0.1f * (float)(i + 1) * (i % 2 ? -1.0f : 1.0f));
    tc_tensor *t = tensor_of(v, N), *r = tc_reshape(t, 2, (const int64_t[]){4, 4});
    for (int i = 0; i < 4; i++) {
        float s = 0;
        mx[i] = -INFINITY;
        for (int j = 0; j < 4; j++) s += v[4 * i + j], mx[i] = fmaxf(mx[i], v[4 * i + j]);
        sum[i] = bf(s); /* summed in float32, rounded once */
    }
    expect("sum", tc_sum(r, 1, (const int[]){1}, false), 4, sum, 0);
    expect("max", tc_max(r, 1, (const int[]){1}, false), 4, mx, 0);
    tc_release(r), tc_release(t);
    static const tc_dtype cases[][3] = {
        {TC_BFLOAT16, TC_FLOAT16, TC_FLOAT32}, {TC_FLOAT16, TC_BFLOAT16, TC_FLOAT32},
        {TC_BFLOAT16, TC_INT32, TC_BFLOAT16},  {TC_UINT64, TC_BFLOAT16, TC_BFLOAT16},
        {TC_BFLOAT16, TC_FLOAT32, TC_FLOAT32}, {TC_FLOAT64, TC_BFLOAT16, TC_FLOAT64},
        {TC_BOOL, TC_BFLOAT16, TC_BFLOAT16},
    };
    tc_test_check_promotion(cases, sizeof cases / sizeof cases[0]);
    assert_string_equal(tc_dtype_name(TC_BFLOAT16), "bfloat16");
    assert_int_equal(tc_dtype_size(TC_BFLOAT16), 2);
    /* random values are bfloat16 values in [0, 1) */
    tc_tensor *u = tc_rand(1, (const int64_t[]){256}, TC_BFLOAT16, NULL);
    uint16_t bits[256];
    assert_int_equal(tc_to_host(u, bits, sizeof bits), TC_OK);
    for (int i = 0; i < 256; i++) {
        float x = tc_bf16_to_float(bits[i]);
        assert_true(x >= 0 && x < 1);
    }
    tc_release(u);
}

/* a gradient through bfloat16 ops stays bfloat16 */
static void test_grad(void **state) {
    (void)state;
    float x[8] = {-2.0f, -0.5f, 0.0f, 0.25f, 0.75f, 1.5f, 3.0f, 10.0f};
    tc_tensor *t = tensor_of(x, 8);
    assert_int_equal(tc_set_requires_grad(t, true), TC_OK);
    tc_tensor *sq = tc_mul(t, t), *loss = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_get_dtype(loss), TC_BFLOAT16);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(t);
    assert_non_null(g);
    assert_int_equal(tc_get_dtype(g), TC_BFLOAT16);
    uint16_t got[8];
    assert_int_equal(tc_to_host(g, got, sizeof got), TC_OK);
    for (int i = 0; i < 8; i++) assert_true(tc_bf16_to_float(got[i]) == 2 * x[i]);
    tc_release(g), tc_release(loss), tc_release(sq), tc_release(t);
}

/* a safetensors round trip keeps bfloat16 (BF16) bit for bit */
static void test_safetensors(void **state) {
    (void)state;
    init_edges();
    char path[256];
    snprintf(path, sizeof path, "%s/bfloat16_%d.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    const char *names[1] = {"x"};
    tc_tensor *t = tensor_of(EDGES, N),
              *back = tc_zeros(1, (const int64_t[]){N}, TC_BFLOAT16, NULL);
    assert_int_equal(tc_safe_save(path, names, &t, 1), TC_OK);
    assert_int_equal(tc_safe_load(path, names, &back, 1), TC_OK);
    expect("safetensors", tc_retain(back), N, EDGES, 0);
    tc_release(t), tc_release(back);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conversion), cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_casts),      cmocka_unit_test(test_reduces_and_promotion),
        cmocka_unit_test(test_grad),       cmocka_unit_test(test_safetensors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return r;
}
