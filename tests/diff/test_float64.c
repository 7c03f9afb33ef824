/* test_float64.c - float64 end to end: elementwise ops on edge values
 * (signed zeros, subnormals, the largest doubles, infinities, NaN), the
 * transcendentals in double, casts to and from every dtype, reduces,
 * a fused chain, promotion, constants, safetensors and gradients.
 *
 * Three answers are compared. The kernels (tc_realize on the test's device,
 * every op of a case fused) and the reference evaluator (tc_ref_eval on the
 * unrealized graph) must agree bit for bit on the CPU, where both call
 * libm's double functions; on a GPU device (TC_DEVICE=OPENCL or CUDA) the
 * transcendentals may differ by the device's few ulps. Both must match C
 * semantics computed here on the host: exactly for +, -, *, max, min,
 * comparisons and casts; within 1e-12 (relative) for the transcendentals,
 * which float32 math (about 1e-7) would miss. On the mock CUDA driver
 * (TC_CUDA_LIB) sin and cos are left out: see test_transcendentals. */
#include "tc_test.h"

#include "engine/engine.h"
#include "tensor/tensor.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define N 16 /* elements per operand */

/* edge values: signed zeros, a subnormal, the extremes, infinities, NaN and
 * values float32 cannot hold */
static const double EDGES[N] = {
    0.0,    -0.0,    1.0,      -1.0,     1.0 / 3.0, -2.5, 1e300,         -1e-300,
    5e-324, DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN,  1.0 + 0x1p-40, 123456789.123456789};
/* finite values of moderate size, for the transcendentals */
static const double MODERATE[N] = {-20.0, -3.5, -1.0, -1e-8, 0.0,   1e-8,   0.1,  1.0 / 3.0,
                                   1.0,   2.5,  10.0, 100.0, 700.0, -700.0, 0.75, 1e-300};

/* whether the test's device is a GPU (TC_DEVICE names OPENCL or CUDA) */
static bool on_gpu(void) {
    const char *d = getenv("TC_DEVICE");
    return d && (strncasecmp(d, "OPENCL", 6) == 0 || strncasecmp(d, "CUDA", 4) == 0);
}

static tc_tensor *tensor_of(const double *v, int n) {
    tc_tensor *t = tc_from_data(v, TC_FLOAT64, 1, (const int64_t[]){n}, NULL);
    assert_non_null(t);
    return t;
}

/* b: a permutation of a */
static void permuted(const double *a, double *b) {
    for (int i = 0; i < N; i++) b[i] = a[(i * 7 + 3) % N];
}

static bool same(double x, double y) {
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

/* g within rtol of w (relative, with rtol as the absolute floor too) */
static bool near(double g, double w, double rtol) {
    if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) return same(g, w) || (g == w);
    return fabs(g - w) <= rtol * (fabs(w) + 1.0);
}

/* the kernels' allowed distance from the oracle for the transcendentals:
 * none on the CPU (both call libm), a few ulps' worth on a GPU */
static double trans_rtol(void) {
    return on_gpu() ? 1e-12 : 0;
}

/* t (float64, n elements) from the kernels and from the oracle: equal bit
 * for bit (within dev_rtol of each other when dev_rtol > 0: sums in another
 * order, a GPU's transcendentals), and equal to want (exactly when
 * host_rtol is 0, else within it; want NULL: no host answer) */
static void expect(const char *what, tc_tensor *t, int n, const double *want, double dev_rtol,
                   double host_rtol) {
    assert_non_null(t);
    if (tc_get_dtype(t) != TC_FLOAT64)
        fail_msg("%s: dtype %s, want float64", what, tc_dtype_name(tc_get_dtype(t)));
    double oracle[64], got[64];
    assert_true(n <= 64);
    assert_int_equal(tc_ref_eval(tc_tensor_node(t), oracle), TC_OK);
    assert_int_equal(tc_realize(&t, 1), TC_OK);
    assert_int_equal(tc_to_host(t, got, (size_t)n * sizeof(double)), TC_OK);
    for (int i = 0; i < n; i++) {
        bool dev_ok = dev_rtol > 0 ? near(got[i], oracle[i], dev_rtol) : same(got[i], oracle[i]);
        bool host_ok = !want || (host_rtol > 0 ? near(oracle[i], want[i], host_rtol)
                                               : same(oracle[i], want[i]));
        if (!dev_ok || !host_ok)
            fail_msg("%s element %d: kernel %.17g, oracle %.17g, C %.17g", what, i, got[i],
                     oracle[i], want ? want[i] : NAN);
    }
    tc_release(t);
}

/* NaN wins, as in torch */
static double host_max(double a, double b) {
    return a > b || a != a ? a : b;
}

static void test_binary_ops(void **state) {
    (void)state;
    double b[N], want[N];
    permuted(EDGES, b);
    tc_tensor *ta = tensor_of(EDGES, N), *tb = tensor_of(b, N);
    for (int i = 0; i < N; i++) want[i] = EDGES[i] + b[i];
    expect("add", tc_add(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = EDGES[i] + -b[i];
    expect("sub", tc_sub(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = EDGES[i] * b[i];
    expect("mul", tc_mul(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = EDGES[i] * (1.0 / b[i]); /* div is a * recip(b) */
    expect("div", tc_div(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = host_max(EDGES[i], b[i]);
    expect("maximum", tc_maximum(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = -host_max(-EDGES[i], -b[i]);
    expect("minimum", tc_minimum(ta, tb), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = -EDGES[i];
    expect("neg", tc_neg(ta), N, want, 0, 0);
    for (int i = 0; i < N; i++) want[i] = EDGES[i] * EDGES[i];
    expect("square", tc_square(ta), N, want, 0, 0);
    expect("abs", tc_abs(ta), N, NULL, 0, 0);
    expect("relu", tc_relu(ta), N, NULL, 0, 0);
    for (int i = 0; i < N; i++) want[i] = sqrt(EDGES[i]); /* correctly rounded everywhere */
    expect("sqrt", tc_sqrt(ta), N, want, 0, 0);
    /* comparisons give bool */
    tc_tensor *lt = tc_lt(ta, tb), *eq = tc_eq(ta, tb);
    assert_int_equal(tc_get_dtype(lt), TC_BOOL);
    bool l[N], e[N];
    assert_int_equal(tc_to_host(lt, l, sizeof l), TC_OK);
    assert_int_equal(tc_to_host(eq, e, sizeof e), TC_OK);
    for (int i = 0; i < N; i++) {
        assert_int_equal(l[i], EDGES[i] < b[i]);
        assert_int_equal(e[i], EDGES[i] == b[i]);
    }
    /* where picks float64 values whole */
    for (int i = 0; i < N; i++) want[i] = EDGES[i] < b[i] ? EDGES[i] : b[i];
    expect("where", tc_where(lt, ta, tb), N, want, 0, 0);
    tc_release(lt), tc_release(eq), tc_release(ta), tc_release(tb);
}

static void test_transcendentals(void **state) {
    (void)state;
    typedef tc_tensor *(*un)(tc_tensor *);
    static const struct {
        const char *name;
        un fn;
        double (*host)(double);
    } ops[] = {{"exp", tc_exp, exp},    {"log", tc_log, log},   {"exp2", tc_exp2, exp2},
               {"log2", tc_log2, log2}, {"sin", tc_sin, sin},   {"cos", tc_cos, cos},
               {"tanh", tc_tanh, tanh}, {"sqrt", tc_sqrt, sqrt}};
    double pos[N], want[N];
    for (int i = 0; i < N; i++) pos[i] = fabs(MODERATE[i]) + 1e-3; /* for log, log2, sqrt */
    tc_tensor *tm = tensor_of(MODERATE, N), *tp = tensor_of(pos, N);
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        /* the mock CUDA driver's PTX interpreter has no function calls, and
         * CUDA's double sin calls its argument reduction's slow path */
        bool is_trig = ops[k].host == sin || ops[k].host == cos;
        if (is_trig && on_gpu() && getenv("TC_CUDA_LIB")) {
            fprintf(stderr, "%s: not run on the mock CUDA driver (a PTX call)\n", ops[k].name);
            continue;
        }
        bool is_pos = ops[k].host == log || ops[k].host == log2 || ops[k].host == sqrt;
        const double *x = is_pos ? pos : MODERATE;
        for (int i = 0; i < N; i++) want[i] = ops[k].host(x[i]);
        /* exp(x) is exp2(x*log2(e)): its error grows with |x| (700: 1e-13) */
        expect(ops[k].name, ops[k].fn(is_pos ? tp : tm), N, want, trans_rtol(), 1e-12);
    }
    for (int i = 0; i < N; i++) want[i] = 1.0 / (1.0 + exp(-MODERATE[i]));
    expect("sigmoid", tc_sigmoid(tm), N, want, trans_rtol(), 1e-12);
    for (int i = 0; i < N; i++) want[i] = 1.0 / MODERATE[i];
    expect("recip", tc_recip(tm), N, want, 0, 0);
    tc_tensor *half = tc_full(1, (const int64_t[]){N}, 1.5, TC_FLOAT64, NULL);
    for (int i = 0; i < N; i++) want[i] = pow(pos[i], 1.5);
    expect("pow", tc_pow(tp, half), N, want, trans_rtol(), 1e-12);
    tc_release(half), tc_release(tm), tc_release(tp);
}

/* one kernel of several float64 ops, checked against double math */
static void test_fused_chain(void **state) {
    (void)state;
    double b[N], want[N];
    permuted(MODERATE, b);
    tc_tensor *ta = tensor_of(MODERATE, N), *tb = tensor_of(b, N);
    tc_tensor *e = tc_exp(ta), *m = tc_mul(e, tb), *ab = tc_abs(ta), *s = tc_sqrt(ab);
    tc_tensor *y = tc_add(m, s);
    assert_int_equal(tc_schedule_kernel_count(&y, 1), 1);
    for (int i = 0; i < N; i++) want[i] = exp(MODERATE[i]) * b[i] + sqrt(fabs(MODERATE[i]));
    expect("exp(a) * b + sqrt(|a|)", y, N, want, trans_rtol(), 1e-12);
    tc_release(e), tc_release(m), tc_release(ab), tc_release(s), tc_release(ta), tc_release(tb);
}

static const tc_dtype OTHERS[] = {TC_FLOAT32, TC_FLOAT16, TC_BFLOAT16, TC_INT8,
                                  TC_INT16,   TC_INT32,   TC_INT64,    TC_UINT8,
                                  TC_UINT16,  TC_UINT32,  TC_UINT64,   TC_BOOL};
enum { N_OTHERS = sizeof OTHERS / sizeof OTHERS[0] };

/* the C conversion of double v to dt, as double (float16 through float32,
 * as every renderer converts it); v in range of an integer dt */
static double host_cast(double v, tc_dtype dt) {
    unsigned char buf[8];
    switch (dt) {
    case TC_FLOAT32: return (float)v;
    case TC_FLOAT16: return tc_dtype_round(TC_FLOAT16, (float)v);
    case TC_BFLOAT16: return tc_dtype_round(TC_BFLOAT16, (float)v);
    case TC_BOOL: return v != 0;
    case TC_FLOAT64: return v;
    case TC_UINT64:
    case TC_INT8:
    case TC_INT16:
    case TC_INT32:
    case TC_INT64:
    case TC_UINT8:
    case TC_UINT16:
    case TC_UINT32:
        tc_scalar_store_int(buf, dt, 0, (int64_t)v);
        return (double)tc_scalar_load_int(buf, dt, 0);
    case TC_DTYPE_COUNT: break;
    }
    return NAN;
}

static void test_casts(void **state) {
    (void)state;
    /* values every integer dtype holds (after truncation) */
    static const double small[N] = {0.0,  1.0,   2.75, 100.9, 0.5,   3.0,  7.999, 64.0,
                                    99.0, 127.0, 1e-9, 5.5,   12.25, 42.0, 0.0,   1.0};
    static const double neg[N] = {-0.0,  -1.0,   -2.75, -100.9, -0.5,   -3.0,  -7.999, -64.0,
                                  -99.0, -127.0, -1e-9, -5.5,   -12.25, -42.0, 1.0,    2.0};
    for (int d = 0; d < N_OTHERS; d++) {
        tc_dtype dt = OTHERS[d];
        bool is_float = dt == TC_FLOAT32 || dt == TC_FLOAT16 || dt == TC_BFLOAT16;
        bool is_signed = dt != TC_UINT8 && dt != TC_UINT16 && dt != TC_UINT32 && dt != TC_UINT64 &&
                         dt != TC_BOOL;
        for (int set = 0; set < 3; set++) {
            const double *v = set == 0 ? small : set == 1 ? neg : EDGES;
            if ((set == 1 && !is_signed) || (set == 2 && !is_float && dt != TC_BOOL)) continue;
            double back[N];
            tc_tensor *t = tensor_of(v, N), *c = tc_cast(t, dt), *r = tc_cast(c, TC_FLOAT64);
            assert_int_equal(tc_get_dtype(c), dt);
            for (int i = 0; i < N; i++) back[i] = host_cast(v[i], dt);
            char what[64];
            snprintf(what, sizeof what, "float64 -> %s -> float64", tc_dtype_name(dt));
            expect(what, r, N, back, 0, 0);
            /* dt -> float64 directly from a realized dt tensor: exact */
            assert_int_equal(tc_realize(&c, 1), TC_OK);
            snprintf(what, sizeof what, "%s -> float64", tc_dtype_name(dt));
            expect(what, tc_cast(c, TC_FLOAT64), N, back, 0, 0);
            tc_release(c), tc_release(t);
        }
    }
    /* int64 values beyond 2^24 and 2^53 convert as C does */
    int64_t big[4] = {(1LL << 53) + 1, -(1LL << 60) - 1, 16777217, INT64_MIN};
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = (double)big[i];
    tc_tensor *bi = tc_from_data(big, TC_INT64, 1, (const int64_t[]){4}, NULL);
    expect("int64 -> float64", tc_cast(bi, TC_FLOAT64), 4, want, 0, 0);
    tc_release(bi);
}

static void test_reduces(void **state) {
    (void)state;
    double v[N], sum[4], mx[4], mn[4];
    for (int i = 0; i < N; i++) v[i] = MODERATE[i] * (1.0 + 0x1p-40 * i);
    tc_tensor *t = tensor_of(v, N), *r = tc_reshape(t, 2, (const int64_t[]){4, 4});
    for (int i = 0; i < 4; i++) {
        sum[i] = 0, mx[i] = -INFINITY, mn[i] = INFINITY;
        for (int j = 0; j < 4; j++) {
            double x = v[4 * i + j];
            sum[i] += x, mx[i] = x > mx[i] ? x : mx[i], mn[i] = x < mn[i] ? x : mn[i];
        }
    }
    expect("sum", tc_sum(r, 1, (const int[]){1}, false), 4, sum, 1e-15, 1e-15);
    expect("max", tc_max(r, 1, (const int[]){1}, false), 4, mx, 0, 0);
    expect("min", tc_min(r, 1, (const int[]){1}, false), 4, mn, 0, 0);
    tc_release(r), tc_release(t);
    /* a long sum in double: 0.1 ten thousand times (float32 is off by 1e-4) */
    enum { LONG = 10000 };
    double *ones = malloc(LONG * sizeof(double)), want = 0;
    for (int i = 0; i < LONG; i++) ones[i] = 0.1, want += 0.1;
    tc_tensor *l = tc_from_data(ones, TC_FLOAT64, 1, (const int64_t[]){LONG}, NULL);
    expect("long sum", tc_sum(l, 0, NULL, false), 1, &want, 1e-12, 1e-12);
    /* mean and std of varied values, in double throughout */
    double mean = 0, var = 0;
    for (int i = 0; i < LONG; i++) ones[i] = sin((double)i) + 1e-9 * i, mean += ones[i];
    mean /= LONG;
    for (int i = 0; i < LONG; i++) var += (ones[i] - mean) * (ones[i] - mean);
    double sd = sqrt(var / (LONG - 1));
    tc_release(l);
    l = tc_from_data(ones, TC_FLOAT64, 1, (const int64_t[]){LONG}, NULL);
    expect("mean", tc_mean(l, 0, NULL, false), 1, &mean, 1e-12, 1e-12);
    tc_tensor *s = tc_std(l, 0, NULL, false, 1);
    expect("std", s, 1, &sd, 1e-12, 1e-12);
    tc_release(l);
    free(ones);
}

static void test_promotion_and_constants(void **state) {
    (void)state;
    static const tc_dtype cases[][3] = {
        {TC_FLOAT64, TC_FLOAT32, TC_FLOAT64}, {TC_FLOAT16, TC_FLOAT64, TC_FLOAT64},
        {TC_INT64, TC_FLOAT64, TC_FLOAT64},   {TC_FLOAT64, TC_UINT32, TC_FLOAT64},
        {TC_BOOL, TC_FLOAT64, TC_FLOAT64},    {TC_FLOAT64, TC_INT8, TC_FLOAT64},
    };
    tc_test_check_promotion(cases, sizeof cases / sizeof cases[0]);
    assert_string_equal(tc_dtype_name(TC_FLOAT64), "float64");
    assert_int_equal(tc_dtype_size(TC_FLOAT64), 8);
    /* constants keep double precision (0.1 is not float32's 0.1) */
    double x[N], want[N];
    for (int i = 0; i < N; i++) x[i] = MODERATE[i], want[i] = MODERATE[i] + 0.1;
    tc_tensor *t = tensor_of(x, N), *c = tc_full(1, (const int64_t[]){N}, 0.1, TC_FLOAT64, NULL);
    expect("x + full(0.1)", tc_add(t, c), N, want, 0, 0);
    tc_tensor *ar = tc_arange(-3, 13, 1, TC_FLOAT64, NULL);
    for (int i = 0; i < N; i++) want[i] = (double)(i - 3) * 0x1p-40;
    tc_tensor *k = tc_full(1, (const int64_t[]){N}, 0x1p-40, TC_FLOAT64, NULL);
    expect("arange * 2^-40", tc_mul(ar, k), N, want, 0, 0);
    /* rounding: floor, ceil, round and trunc of values past int32 */
    static const double r[8] = {3e9 + 0.5,  -3e9 - 0.5, 2.5,   -2.5,
                                0x1p52 + 1, -0.0,       1e300, 0.49999999999999994};
    tc_tensor *tr = tc_from_data(r, TC_FLOAT64, 1, (const int64_t[]){8}, NULL);
    double w[8];
    for (int i = 0; i < 8; i++) w[i] = floor(r[i]);
    expect("floor", tc_floor(tr), 8, w, 0, 1e-300);
    for (int i = 0; i < 8; i++) w[i] = ceil(r[i]);
    expect("ceil", tc_ceil(tr), 8, w, 0, 1e-300);
    for (int i = 0; i < 8; i++) w[i] = trunc(r[i]);
    expect("trunc", tc_trunc(tr), 8, w, 0, 1e-300);
    for (int i = 0; i < 8; i++) w[i] = nearbyint(r[i]); /* half to even, as torch */
    expect("round", tc_round(tr), 8, w, 0, 1e-300);
    tc_release(tr), tc_release(k), tc_release(ar), tc_release(c), tc_release(t);
}

/* gradients stay float64 and carry double precision */
static void test_grad(void **state) {
    (void)state;
    double x[8] = {-2.0, -0.5, 0.0, 1.0 / 3.0, 0.75, 1.5, 3.0, 1e-9};
    tc_tensor *t = tc_from_data(x, TC_FLOAT64, 1, (const int64_t[]){8}, NULL);
    assert_int_equal(tc_set_requires_grad(t, true), TC_OK);
    tc_tensor *e = tc_exp(t), *p = tc_mul(e, t), *s = tc_sum(p, 0, NULL, false);
    tc_tensor *sd = tc_std(t, 0, NULL, false, 1), *loss = tc_add(s, sd);
    assert_int_equal(tc_get_dtype(loss), TC_FLOAT64);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *g = tc_grad(t);
    assert_non_null(g);
    assert_int_equal(tc_get_dtype(g), TC_FLOAT64);
    double got[8], mean = 0, var = 0;
    assert_int_equal(tc_to_host(g, got, sizeof got), TC_OK);
    for (int i = 0; i < 8; i++) mean += x[i] / 8;
    for (int i = 0; i < 8; i++) var += (x[i] - mean) * (x[i] - mean) / 7;
    for (int i = 0; i < 8; i++) {
        double want = exp(x[i]) * (1 + x[i]) + (x[i] - mean) / (7 * sqrt(var));
        if (!near(got[i], want, 1e-12)) fail_msg("grad[%d]: %.17g, want %.17g", i, got[i], want);
    }
    tc_release(g), tc_release(loss), tc_release(sd), tc_release(s), tc_release(p), tc_release(e);
    tc_release(t);
}

/* a safetensors round trip keeps float64 (F64) bit for bit */
static void test_safetensors(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/float64_%d.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    const char *names[1] = {"x"};
    tc_tensor *t = tensor_of(EDGES, N), *back = tc_zeros(1, (const int64_t[]){N}, TC_FLOAT64, NULL);
    assert_int_equal(tc_safe_save(path, names, &t, 1), TC_OK);
    assert_int_equal(tc_safe_load(path, names, &back, 1), TC_OK);
    expect("safetensors", tc_retain(back), N, EDGES, 0, 0);
    tc_release(t), tc_release(back);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_ops),  cmocka_unit_test(test_transcendentals),
        cmocka_unit_test(test_fused_chain), cmocka_unit_test(test_casts),
        cmocka_unit_test(test_reduces),     cmocka_unit_test(test_promotion_and_constants),
        cmocka_unit_test(test_grad),        cmocka_unit_test(test_safetensors),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    tc_shutdown();
    return r;
}
