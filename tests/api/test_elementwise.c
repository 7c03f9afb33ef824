/* test_elementwise.c - unary and binary ops, tc_where and tc_cast: result
 * shapes under numpy broadcasting, the dtype promotion table, and values
 * against plain C (math.h) computed here. Public API only. */
#include <math.h>

#include "api_helpers.h"

/* ---- unary float ops against libm ---- */

typedef struct {
    const char *name;
    tc_tensor *(*op)(tc_tensor *);
    double (*ref)(double);
    float lo, hi; /* inputs are spread over [lo, hi] */
} unary_case;

static double ref_relu(double x) {
    return x > 0 ? x : 0;
}
static double ref_sigmoid(double x) {
    return 1 / (1 + exp(-x));
}
static double ref_recip(double x) {
    return 1 / x;
}
static double ref_square(double x) {
    return x * x;
}
static double ref_neg(double x) {
    return -x;
}

static void test_unary_float(void **state) {
    (void)state;
    static const unary_case cases[] = {
        {"exp", tc_exp, exp, -10, 10},
        {"log", tc_log, log, 0.01f, 100},
        {"exp2", tc_exp2, exp2, -10, 10},
        {"log2", tc_log2, log2, 0.01f, 100},
        {"sqrt", tc_sqrt, sqrt, 0, 100},
        {"sin", tc_sin, sin, -6, 6},
        {"cos", tc_cos, cos, -6, 6},
        {"relu", tc_relu, ref_relu, -3, 3},
        {"sigmoid", tc_sigmoid, ref_sigmoid, -20, 20},
        {"tanh", tc_tanh, tanh, -5, 5},
        {"recip", tc_recip, ref_recip, 0.1f, 10},
        {"abs", tc_abs, fabs, -3, 3},
        {"square", tc_square, ref_square, -3, 3},
        {"neg", tc_neg, ref_neg, -3, 3},
    };
    enum { N = 33 };
    for (int c = 0; c < (int)COUNT(cases); c++) {
        float x[N], want[N];
        for (int i = 0; i < N; i++) {
            x[i] = cases[c].lo + (cases[c].hi - cases[c].lo) * (float)i / (N - 1);
            want[i] = (float)cases[c].ref(x[i]);
        }
        tc_tensor *a = f32(2, SHAPE(3, 11), x);
        tc_tensor *r = cases[c].op(a);
        check_meta(r, TC_FLOAT32, 2, SHAPE(3, 11));
        /* composites (exp via exp2, cos via sin(pi/2-x), tanh via sigmoid) lose a
         * few float32 ulps: rtol 1e-5, atol 1e-6 (2e-6 near cos/tanh zeros) */
        expect_f32(r, want, N, 1e-5, 2e-6, cases[c].name);
        tc_release(a);
    }
}

static void test_unary_special_values(void **state) {
    (void)state;
    float x[5] = {0, -0.0f, INFINITY, -INFINITY, -1};
    tc_tensor *a = f32(1, SHAPE(5), x);
    float wlog[5] = {-INFINITY, -INFINITY, INFINITY, NAN, NAN};
    expect_f32(tc_log(a), wlog, 5, 0, 0, "log specials");
    float wexp[5] = {1, 1, INFINITY, 0, (float)exp(-1)};
    expect_f32(tc_exp(a), wexp, 5, 1e-6, 0, "exp specials");
    float wsig[5] = {0.5f, 0.5f, 1, 0, (float)ref_sigmoid(-1)};
    expect_f32(tc_sigmoid(a), wsig, 5, 1e-6, 0, "sigmoid specials");
    float wtanh[5] = {0, 0, 1, -1, (float)tanh(-1)};
    expect_f32(tc_tanh(a), wtanh, 5, 1e-6, 1e-7, "tanh specials");
    float wsqrt[5] = {0, 0, INFINITY, NAN, NAN};
    expect_f32(tc_sqrt(a), wsqrt, 5, 0, 0, "sqrt specials");
    float wrelu[5] = {0, 0, INFINITY, 0, 0};
    expect_f32(tc_relu(a), wrelu, 5, 0, 0, "relu specials");
    tc_release(a);
}

static void test_unary_on_integers(void **state) {
    (void)state;
    int32_t x[4] = {-3, 0, 2, 5};
    tc_tensor *a = from(x, TC_INT32, 1, SHAPE(4));
    /* float math casts to float32 first (like torch) */
    tc_tensor *e = tc_exp(a);
    check_meta(e, TC_FLOAT32, 1, SHAPE(4));
    float we[4] = {expf(-3), 1, expf(2), expf(5)};
    expect_f32(e, we, 4, 1e-5, 0, "exp(int32)");
    float ws[4] = {NAN, 0, sqrtf(2), sqrtf(5)};
    expect_f32(tc_sqrt(a), ws, 4, 1e-6, 0, "sqrt(int32)");
    float wr[4] = {-1.0f / 3, INFINITY, 0.5f, 0.2f};
    expect_f32(tc_recip(a), wr, 4, 1e-6, 0, "recip(int32)");
    /* integer ops keep the dtype */
    int32_t wn[4] = {3, 0, -2, -5}, wa[4] = {3, 0, 2, 5}, wq[4] = {9, 0, 4, 25},
            wl[4] = {0, 0, 2, 5};
    tc_tensor *n = tc_neg(a);
    check_meta(n, TC_INT32, 1, SHAPE(4));
    expect_values(n, wn, 4, 0, 0, "neg int32");
    expect_values(tc_abs(a), wa, 4, 0, 0, "abs int32");
    expect_values(tc_square(a), wq, 4, 0, 0, "square int32");
    expect_values(tc_relu(a), wl, 4, 0, 0, "relu int32");
    tc_release(a);

    uint8_t u[4] = {0, 1, 128, 255};
    tc_tensor *b = from(u, TC_UINT8, 1, SHAPE(4));
    expect_values(tc_abs(b), u, 4, 0, 0, "abs uint8 is the identity");
    uint8_t un[4] = {0, 255, 128, 1}; /* wraps modulo 256 */
    expect_values(tc_neg(b), un, 4, 0, 0, "neg uint8");
    tc_release(b);

    uint8_t bl[3] = {1, 0, 1}, nbl[3] = {0, 1, 0};
    tc_tensor *c = from(bl, TC_BOOL, 1, SHAPE(3));
    tc_tensor *nc = tc_logical_not(c);
    check_meta(nc, TC_BOOL, 1, SHAPE(3));
    expect_values(nc, nbl, 3, 0, 0, "logical_not");
    expect_values(tc_abs(c), bl, 3, 0, 0, "abs bool");
    float wsig[3] = {(float)ref_sigmoid(1), 0.5f, (float)ref_sigmoid(1)};
    expect_f32(tc_sigmoid(c), wsig, 3, 1e-6, 0, "sigmoid(bool)");
    tc_release(c);
}

static void test_unary_float16(void **state) {
    (void)state;
    float x[4] = {-1, 0, 0.5f, 2};
    tc_tensor *a = f32(1, SHAPE(4), x);
    tc_tensor *h = tc_cast(a, TC_FLOAT16);
    tc_tensor *e = tc_exp(h);
    check_meta(e, TC_FLOAT16, 1, SHAPE(4));
    tc_tensor *ef = tc_cast(e, TC_FLOAT32);
    float we[4] = {expf(-1), 1, expf(0.5f), expf(2)};
    expect_f32(ef, we, 4, 5e-3, 0, "exp(float16), half precision");
    tc_release(a);
    tc_release(h);
    tc_release(e);
}

/* ---- broadcasting and promotion ---- */

static void test_broadcast_shapes(void **state) {
    (void)state;
    static const struct {
        int na, nb, nr;
        int64_t a[4], b[4], r[4];
    } cases[] = {
        {2, 1, 2, {2, 3}, {3}, {2, 3}},
        {2, 2, 2, {2, 1}, {1, 3}, {2, 3}},
        {3, 2, 3, {3, 1, 4}, {2, 1}, {3, 2, 4}},
        {0, 2, 2, {0}, {2, 2}, {2, 2}},
        {2, 2, 2, {0, 3}, {1, 3}, {0, 3}},
        {1, 4, 4, {1}, {2, 1, 1, 5}, {2, 1, 1, 5}},
        {4, 3, 4, {5, 1, 3, 1}, {4, 1, 6}, {5, 4, 3, 6}},
    };
    for (int i = 0; i < (int)COUNT(cases); i++) {
        tc_tensor *a = tc_ones(cases[i].na, cases[i].a, TC_FLOAT32, NULL);
        tc_tensor *b = tc_zeros(cases[i].nb, cases[i].b, TC_FLOAT32, NULL);
        tc_tensor *r = tc_add(a, b), *r2 = tc_add(b, a);
        check_meta(r, TC_FLOAT32, cases[i].nr, cases[i].r);
        check_meta(r2, TC_FLOAT32, cases[i].nr, cases[i].r);
        tc_release(a);
        tc_release(b);
        tc_release(r);
        tc_release(r2);
    }
}

static void test_broadcast_values(void **state) {
    (void)state;
    float col[2] = {10, 20}, row[3] = {1, 2, 3};
    tc_tensor *c = f32(2, SHAPE(2, 1), col), *r = f32(1, SHAPE(3), row);
    float wadd[6] = {11, 12, 13, 21, 22, 23}, wsub[6] = {9, 8, 7, 19, 18, 17};
    float wmul[6] = {10, 20, 30, 20, 40, 60};
    float wdiv[6] = {10, 5, 10.0f / 3, 20, 10, 20.0f / 3};
    expect_f32(tc_add(c, r), wadd, 6, 0, 0, "(2,1)+(3,)");
    expect_f32(tc_sub(c, r), wsub, 6, 0, 0, "(2,1)-(3,)");
    expect_f32(tc_mul(c, r), wmul, 6, 0, 0, "(2,1)*(3,)");
    expect_f32(tc_div(c, r), wdiv, 6, 1e-6, 0, "(2,1)/(3,)");
    tc_tensor *s = scalar(0.5, TC_FLOAT32);
    float wsc[3] = {1.5f, 2.5f, 3.5f};
    expect_f32(tc_add(r, s), wsc, 3, 0, 0, "(3,)+()");
    tc_release(c);
    tc_release(r);
    tc_release(s);
}

/* promotion order: bool < uint8 < int32 < int64 < float16 < float32 */
static const tc_dtype order[6] = {TC_BOOL, TC_UINT8, TC_INT32, TC_INT64, TC_FLOAT16, TC_FLOAT32};

static void test_promotion_table(void **state) {
    (void)state;
    for (int i = 0; i < 6; i++) {
        for (int j = 0; j < 6; j++) {
            tc_tensor *a = tc_ones(1, SHAPE(2), order[i], NULL);
            tc_tensor *b = tc_ones(1, SHAPE(2), order[j], NULL);
            tc_dtype want = order[i > j ? i : j];
            bool is_float = want == TC_FLOAT16 || want == TC_FLOAT32;
            tc_tensor *add = tc_add(a, b), *mul = tc_mul(a, b), *mx = tc_maximum(a, b);
            tc_tensor *mn = tc_minimum(a, b), *div = tc_div(a, b), *pw = tc_pow(a, b);
            tc_tensor *lt = tc_lt(a, b), *eq = tc_eq(a, b), *wh = tc_where(a, a, b);
            check_meta(add, want, 1, SHAPE(2));
            check_meta(mul, want, 1, SHAPE(2));
            check_meta(mx, want, 1, SHAPE(2));
            check_meta(mn, want, 1, SHAPE(2));
            check_meta(wh, want, 1, SHAPE(2));
            check_meta(div, is_float ? want : TC_FLOAT32, 1, SHAPE(2));
            check_meta(pw, is_float ? want : TC_FLOAT32, 1, SHAPE(2));
            check_meta(lt, TC_BOOL, 1, SHAPE(2));
            check_meta(eq, TC_BOOL, 1, SHAPE(2));
            if (want != TC_BOOL) {
                tc_tensor *sub = tc_sub(a, b);
                check_meta(sub, want, 1, SHAPE(2));
                tc_release(sub);
            }
            tc_tensor *all[] = {a, b, add, mul, mx, mn, div, pw, lt, eq, wh};
            for (int k = 0; k < (int)COUNT(all); k++) tc_release(all[k]);
        }
    }
}

static void test_mixed_dtype_values(void **state) {
    (void)state;
    int32_t i[3] = {1, -2, 300};
    uint8_t u[3] = {200, 100, 7};
    float f[3] = {0.5f, 0.25f, -1};
    tc_tensor *ti = from(i, TC_INT32, 1, SHAPE(3)), *tu = from(u, TC_UINT8, 1, SHAPE(3));
    tc_tensor *tf = f32(1, SHAPE(3), f);
    int32_t wiu[3] = {201, 98, 307};
    expect_values(tc_add(ti, tu), wiu, 3, 0, 0, "int32+uint8");
    float wif[3] = {1.5f, -1.75f, 299};
    expect_f32(tc_add(ti, tf), wif, 3, 0, 0, "int32+float32");
    uint8_t wuu[3] = {144, 200, 14}; /* uint8 wraps: 400%256, 200, 14 */
    tc_tensor *uu = tc_add(tu, tu), *um = tc_mul(tu, tu);
    uint8_t wum[3] = {64, 16, 49}; /* 40000%256, 10000%256, 49 */
    expect_values(uu, wuu, 3, 0, 0, "uint8+uint8 wraps");
    expect_values(um, wum, 3, 0, 0, "uint8*uint8 wraps");
    float wdiv[3] = {1.0f / 200, -2.0f / 100, 300.0f / 7};
    expect_f32(tc_div(ti, tu), wdiv, 3, 1e-6, 0, "int32/uint8 is true division");
    tc_release(ti);
    tc_release(tu);
    tc_release(tf);
}

/* ---- integer division, maximum and minimum ---- */

static void test_idiv_mod(void **state) {
    (void)state;
    int32_t a[6] = {7, -7, 7, -7, 0, 100}, b[6] = {2, 2, -2, -2, 3, 7};
    int32_t q[6], r[6];
    for (int i = 0; i < 6; i++) {
        q[i] = a[i] / b[i]; /* C: truncation toward zero, remainder has the dividend's sign */
        r[i] = a[i] % b[i];
    }
    tc_tensor *ta = from(a, TC_INT32, 1, SHAPE(6)), *tb = from(b, TC_INT32, 1, SHAPE(6));
    tc_tensor *tq = tc_idiv(ta, tb);
    check_meta(tq, TC_INT32, 1, SHAPE(6));
    expect_values(tq, q, 6, 0, 0, "idiv int32");
    expect_values(tc_mod(ta, tb), r, 6, 0, 0, "mod int32");
    int64_t a64[2] = {(int64_t)1 << 40, -((int64_t)1 << 40) - 1}, b64[2] = {3, 3};
    int64_t q64[2] = {a64[0] / 3, a64[1] / 3}, r64[2] = {a64[0] % 3, a64[1] % 3};
    tc_tensor *x = from(a64, TC_INT64, 1, SHAPE(2)), *y = from(b64, TC_INT64, 1, SHAPE(2));
    expect_values(tc_idiv(x, y), q64, 2, 0, 0, "idiv int64");
    expect_values(tc_mod(x, y), r64, 2, 0, 0, "mod int64");
    tc_release(ta);
    tc_release(tb);
    tc_release(x);
    tc_release(y);
}

static void test_maximum_minimum(void **state) {
    (void)state;
    float fa[4] = {1, -2, 3, -0.5f}, fb[4] = {-1, 2, 3, -0.25f};
    float fmax[4], fmin[4];
    for (int i = 0; i < 4; i++) {
        fmax[i] = fmaxf(fa[i], fb[i]);
        fmin[i] = fminf(fa[i], fb[i]);
    }
    tc_tensor *a = f32(1, SHAPE(4), fa), *b = f32(1, SHAPE(4), fb);
    expect_f32(tc_maximum(a, b), fmax, 4, 0, 0, "maximum float32");
    expect_f32(tc_minimum(a, b), fmin, 4, 0, 0, "minimum float32");
    tc_release(a);
    tc_release(b);

    int32_t ia[4] = {INT32_MIN, INT32_MAX, -5, 0}, ib[4] = {0, INT32_MIN, 5, -1};
    int32_t imax[4] = {0, INT32_MAX, 5, 0}, imin[4] = {INT32_MIN, INT32_MIN, -5, -1};
    a = from(ia, TC_INT32, 1, SHAPE(4));
    b = from(ib, TC_INT32, 1, SHAPE(4));
    expect_values(tc_maximum(a, b), imax, 4, 0, 0, "maximum int32 extremes");
    expect_values(tc_minimum(a, b), imin, 4, 0, 0, "minimum int32 extremes");
    tc_release(a);
    tc_release(b);

    uint8_t ua[4] = {0, 255, 128, 7}, ub[4] = {255, 0, 127, 7};
    uint8_t umax[4] = {255, 255, 128, 7}, umin[4] = {0, 0, 127, 7};
    a = from(ua, TC_UINT8, 1, SHAPE(4));
    b = from(ub, TC_UINT8, 1, SHAPE(4));
    expect_values(tc_maximum(a, b), umax, 4, 0, 0, "maximum uint8");
    expect_values(tc_minimum(a, b), umin, 4, 0, 0, "minimum uint8");
    tc_release(a);
    tc_release(b);

    uint8_t ba[4] = {0, 0, 1, 1}, bb[4] = {0, 1, 0, 1};
    uint8_t bmax[4] = {0, 1, 1, 1}, bmin[4] = {0, 0, 0, 1};
    a = from(ba, TC_BOOL, 1, SHAPE(4));
    b = from(bb, TC_BOOL, 1, SHAPE(4));
    expect_values(tc_maximum(a, b), bmax, 4, 0, 0, "maximum bool (or)");
    expect_values(tc_minimum(a, b), bmin, 4, 0, 0, "minimum bool (and)");
    tc_release(a);
    tc_release(b);
}

/* ---- pow ---- */

static void test_pow(void **state) {
    (void)state;
    float base[] = {2, -2, -2, -2, 0, 0, 0, 2, -8, NAN, 4, -1.5f, -3, 1, 3, -2, 10, 1, -5, NAN};
    float expo[] = {3,    3, 2,  0.5f, 0, 2,  -1, -1,       1.0f / 3, 0,
                    0.5f, 2, -1, NAN,  0, -3, -2, INFINITY, 1e10f,    2};
    enum { N = sizeof base / sizeof base[0] };
    float want[N];
    for (int i = 0; i < N; i++) want[i] = powf(base[i], expo[i]); /* C99 pow's special cases */
    tc_tensor *a = f32(1, SHAPE(N), base), *b = f32(1, SHAPE(N), expo);
    tc_tensor *p = tc_pow(a, b);
    check_meta(p, TC_FLOAT32, 1, SHAPE(N));
    expect_f32(p, want, N, 1e-5, 0, "pow vs powf");
    tc_release(a);
    tc_release(b);

    /* integer inputs compute in float32 */
    int32_t ib[3] = {2, -3, 5}, ie[3] = {10, 3, 0};
    tc_tensor *x = from(ib, TC_INT32, 1, SHAPE(3)), *y = from(ie, TC_INT32, 1, SHAPE(3));
    float wi[3] = {1024, -27, 1};
    expect_f32(tc_pow(x, y), wi, 3, 1e-5, 0, "pow int32");
    tc_release(x);
    tc_release(y);

    /* broadcast scalar exponent */
    float v[3] = {1, 2, 3}, sq[3] = {1, 4, 9};
    tc_tensor *t = f32(1, SHAPE(3), v), *two = scalar(2, TC_FLOAT32);
    expect_f32(tc_pow(t, two), sq, 3, 1e-5, 0, "x**2");
    tc_release(t);
    tc_release(two);
}

/* ---- comparisons and logic ---- */

static void test_comparisons(void **state) {
    (void)state;
    float fa[5] = {1, 2, 3, NAN, 1}, fb[5] = {2, 2, 1, 1, NAN};
    uint8_t lt[5], gt[5], le[5], ge[5], eq[5], ne[5];
    for (int i = 0; i < 5; i++) { /* C comparisons: anything with NaN is false but != */
        lt[i] = fa[i] < fb[i];
        gt[i] = fa[i] > fb[i];
        le[i] = fa[i] <= fb[i];
        ge[i] = fa[i] >= fb[i];
        eq[i] = fa[i] == fb[i];
        ne[i] = fa[i] != fb[i];
    }
    tc_tensor *a = f32(1, SHAPE(5), fa), *b = f32(1, SHAPE(5), fb);
    tc_tensor *r = tc_lt(a, b);
    check_meta(r, TC_BOOL, 1, SHAPE(5));
    expect_values(r, lt, 5, 0, 0, "lt float");
    expect_values(tc_gt(a, b), gt, 5, 0, 0, "gt float");
    expect_values(tc_le(a, b), le, 5, 0, 0, "le float");
    expect_values(tc_ge(a, b), ge, 5, 0, 0, "ge float");
    expect_values(tc_eq(a, b), eq, 5, 0, 0, "eq float");
    expect_values(tc_ne(a, b), ne, 5, 0, 0, "ne float");
    tc_release(a);
    tc_release(b);

    int64_t ia[4] = {INT64_MIN, -1, 5, 5}, ib[4] = {INT64_MAX, -1, 4, 6};
    for (int i = 0; i < 4; i++) {
        lt[i] = ia[i] < ib[i];
        le[i] = ia[i] <= ib[i];
        ge[i] = ia[i] >= ib[i];
        eq[i] = ia[i] == ib[i];
    }
    a = from(ia, TC_INT64, 1, SHAPE(4));
    b = from(ib, TC_INT64, 1, SHAPE(4));
    expect_values(tc_lt(a, b), lt, 4, 0, 0, "lt int64");
    expect_values(tc_le(a, b), le, 4, 0, 0, "le int64");
    expect_values(tc_ge(a, b), ge, 4, 0, 0, "ge int64");
    expect_values(tc_eq(a, b), eq, 4, 0, 0, "eq int64");
    tc_release(a);
    tc_release(b);

    /* broadcasting: (3,1) < (3,) */
    float c[3] = {1, 2, 3};
    tc_tensor *col = f32(2, SHAPE(3, 1), c), *row = f32(1, SHAPE(3), c);
    uint8_t w[9] = {0, 1, 1, 0, 0, 1, 0, 0, 0};
    tc_tensor *m = tc_lt(col, row);
    check_meta(m, TC_BOOL, 2, SHAPE(3, 3));
    expect_values(m, w, 9, 0, 0, "(3,1) < (3,)");
    tc_release(col);
    tc_release(row);
}

static void test_logical(void **state) {
    (void)state;
    uint8_t ba[4] = {0, 0, 1, 1}, bb[4] = {0, 1, 0, 1};
    uint8_t wand[4] = {0, 0, 0, 1}, wor[4] = {0, 1, 1, 1}, wxor[4] = {0, 1, 1, 0};
    tc_tensor *a = from(ba, TC_BOOL, 1, SHAPE(4)), *b = from(bb, TC_BOOL, 1, SHAPE(4));
    tc_tensor *r = tc_logical_and(a, b);
    check_meta(r, TC_BOOL, 1, SHAPE(4));
    expect_values(r, wand, 4, 0, 0, "and bool");
    expect_values(tc_logical_or(a, b), wor, 4, 0, 0, "or bool");
    expect_values(tc_logical_xor(a, b), wxor, 4, 0, 0, "xor bool");
    tc_release(a);
    tc_release(b);

    int32_t ia[3] = {12, -1, 5}, ib[3] = {10, 7, 0};
    int32_t iand[3] = {12 & 10, -1 & 7, 0}, ior[3] = {12 | 10, -1, 5},
            ixor[3] = {12 ^ 10, -1 ^ 7, 5};
    a = from(ia, TC_INT32, 1, SHAPE(3));
    b = from(ib, TC_INT32, 1, SHAPE(3));
    expect_values(tc_logical_and(a, b), iand, 3, 0, 0, "and int32 (bitwise)");
    expect_values(tc_logical_or(a, b), ior, 3, 0, 0, "or int32 (bitwise)");
    expect_values(tc_logical_xor(a, b), ixor, 3, 0, 0, "xor int32 (bitwise)");
    tc_release(a);
    tc_release(b);
}

/* ---- where and cast ---- */

static void test_where(void **state) {
    (void)state;
    float cond[2] = {1, 0}; /* not bool: cast (nonzero is true) */
    int32_t a[3] = {1, 2, 3};
    tc_tensor *c = f32(2, SHAPE(2, 1), cond), *ta = from(a, TC_INT32, 2, SHAPE(1, 3));
    tc_tensor *b = scalar(-0.5, TC_FLOAT32);
    tc_tensor *w = tc_where(c, ta, b);
    check_meta(w, TC_FLOAT32, 2, SHAPE(2, 3));
    float want[6] = {1, 2, 3, -0.5f, -0.5f, -0.5f};
    expect_f32(w, want, 6, 0, 0, "where((2,1), (1,3), ())");
    tc_release(c);
    tc_release(ta);
    tc_release(b);

    uint8_t bc[4] = {1, 0, 0, 1};
    float x[4] = {1, 2, 3, 4}, y[4] = {-1, -2, -3, -4}, wxy[4] = {1, -2, -3, 4};
    tc_tensor *cb = from(bc, TC_BOOL, 1, SHAPE(4)), *tx = f32(1, SHAPE(4), x);
    tc_tensor *ty = f32(1, SHAPE(4), y);
    expect_f32(tc_where(cb, tx, ty), wxy, 4, 0, 0, "where bool");
    tc_release(cb);
    tc_release(tx);
    tc_release(ty);
}

static void test_cast(void **state) {
    (void)state;
    float f[6] = {3.7f, -3.7f, 0, 0.5f, -0.0f, 255};
    tc_tensor *a = f32(1, SHAPE(6), f);
    int32_t wi[6] = {3, -3, 0, 0, 0, 255}; /* C: truncation toward zero */
    tc_tensor *i = tc_cast(a, TC_INT32);
    check_meta(i, TC_INT32, 1, SHAPE(6));
    expect_values(i, wi, 6, 0, 0, "float32 -> int32");
    uint8_t wb[6] = {1, 1, 0, 1, 0, 1};
    expect_values(tc_cast(a, TC_BOOL), wb, 6, 0, 0, "float32 -> bool");
    int64_t wl[6] = {3, -3, 0, 0, 0, 255};
    expect_values(tc_cast(a, TC_INT64), wl, 6, 0, 0, "float32 -> int64");
    expect_f32(tc_cast(a, TC_FLOAT32), f, 6, 0, 0, "float32 -> float32");
    tc_tensor *h = tc_cast(a, TC_FLOAT16);
    float wh[6] = {3.69921875f, -3.69921875f, 0, 0.5f, -0.0f, 255}; /* 3.7 in half */
    expect_f32(tc_cast(h, TC_FLOAT32), wh, 6, 0, 0, "float32 -> float16 -> float32");
    tc_release(h);
    tc_release(a);

    uint8_t bl[3] = {1, 0, 1};
    tc_tensor *b = from(bl, TC_BOOL, 1, SHAPE(3));
    float wbf[3] = {1, 0, 1};
    expect_f32(tc_cast(b, TC_FLOAT32), wbf, 3, 0, 0, "bool -> float32");
    tc_release(b);
    int32_t big[2] = {300, -1};
    tc_tensor *c = from(big, TC_INT32, 1, SHAPE(2));
    uint8_t wu[2] = {44, 255}; /* modulo 256 */
    expect_values(tc_cast(c, TC_UINT8), wu, 2, 0, 0, "int32 -> uint8 wraps");
    tc_release(c);
}

static void test_chain(void **state) {
    (void)state;
    /* a longer graph: relu(x*w + b) - sigmoid(x) / 2 */
    float x[4] = {-2, -0.5f, 0.5f, 2}, w[4] = {3, 3, 3, 3}, bias = 0.25f;
    tc_tensor *tx = f32(1, SHAPE(4), x), *tw = f32(1, SHAPE(4), w);
    tc_tensor *tb = scalar(bias, TC_FLOAT32), *two = scalar(2, TC_FLOAT32);
    tc_tensor *m = tc_mul(tx, tw), *s = tc_add(m, tb), *r = tc_relu(s);
    tc_tensor *sg = tc_sigmoid(tx), *h = tc_div(sg, two), *out = tc_sub(r, h);
    float want[4];
    for (int i = 0; i < 4; i++)
        want[i] = fmaxf(x[i] * w[i] + bias, 0) - (float)(1 / (1 + exp(-x[i]))) / 2;
    expect_f32(out, want, 4, 1e-6, 1e-7, "relu(x*w+b) - sigmoid(x)/2");
    tc_tensor *all[] = {tx, tw, tb, two, m, s, r, sg, h};
    for (int i = 0; i < (int)COUNT(all); i++) tc_release(all[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_unary_float),
        TEST(test_unary_special_values),
        TEST(test_unary_on_integers),
        TEST(test_unary_float16),
        TEST(test_broadcast_shapes),
        TEST(test_broadcast_values),
        TEST(test_promotion_table),
        TEST(test_mixed_dtype_values),
        TEST(test_idiv_mod),
        TEST(test_maximum_minimum),
        TEST(test_pow),
        TEST(test_comparisons),
        TEST(test_logical),
        TEST(test_where),
        TEST(test_cast),
        TEST(test_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
