/* test_grad.c - gradients of every differentiable public op (the
 * composites' are in test_grad_nn.c), against central finite differences of the same loss computed
 * in double on the host (grad_check.h). Inputs are small and drawn from
 * ranges where each op is smooth; kinks (relu, abs) are kept 0.05 away.
 * Tolerance: rtol 2e-3, atol 2e-4 on float32 gradients (the library runs in
 * float32; the host differences are exact to ~1e-9). Also: broadcasting and
 * non-contiguous inputs (permuted, padded, shrunk, flipped, expanded), ties
 * in max/min (spread evenly), shared subexpressions, accumulation over two
 * backward calls, laziness, detach, grad mode, deep chains and errors. */
#include "grad_check.h"

#define RTOL 2e-3
#define ATOL 2e-4

/* ---- unary ops on (2,3) ---- */

typedef struct {
    const char *name;
    tc_tensor *(*lib)(tc_tensor *);
    double (*host)(double);
    double lo, hi, kink; /* input range, distance from 0 */
} unary_op;

static tc_tensor *lib_unary(tc_tensor *const *x, const void *arg) {
    return ((const unary_op *)arg)->lib(x[0]);
}
static int64_t host_unary(const double *const *x, double *out, const void *arg) {
    for (int k = 0; k < 6; k++) out[k] = ((const unary_op *)arg)->host(x[0][k]);
    return 6;
}

static double h_neg(double v) { return -v; }
static double h_relu(double v) { return v > 0 ? v : 0; }
static double h_sigmoid(double v) { return 1 / (1 + exp(-v)); }
static double h_recip(double v) { return 1 / v; }
static double h_square(double v) { return v * v; }
static double h_id(double v) { return v; }
static tc_tensor *cast_f32(tc_tensor *a) { return tc_cast(a, TC_FLOAT32); }

static const unary_op unary_ops[] = {
    {"neg", tc_neg, h_neg, -2, 2, 0},           {"exp", tc_exp, exp, -2, 2, 0},
    {"log", tc_log, log, 0.3, 3, 0},            {"exp2", tc_exp2, exp2, -2, 2, 0},
    {"log2", tc_log2, log2, 0.3, 3, 0},         {"sqrt", tc_sqrt, sqrt, 0.3, 3, 0},
    {"sin", tc_sin, sin, -3, 3, 0},             {"cos", tc_cos, cos, -3, 3, 0},
    {"relu", tc_relu, h_relu, -2, 2, 0.05},     {"sigmoid", tc_sigmoid, h_sigmoid, -3, 3, 0},
    {"tanh", tc_tanh, tanh, -2, 2, 0},          {"recip", tc_recip, h_recip, -2, 2, 0.5},
    {"abs", tc_abs, fabs, -2, 2, 0.05},         {"square", tc_square, h_square, -2, 2, 0},
    {"cast f32->f32", cast_f32, h_id, -2, 2, 0},
};

static void test_unary(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
        const unary_op *u = &unary_ops[i];
        gc_case c = one_input(2, SHAPE(2, 3), u->lo, u->hi);
        c.kink = u->kink;
        c.lib = lib_unary, c.host = host_unary, c.arg = u;
        gc_check(u->name, &c, RTOL, ATOL);
    }
}

/* ---- binary ops: out (2,3) from a and b in three broadcast layouts ---- */

typedef struct {
    const char *name;
    tc_tensor *(*lib)(tc_tensor *, tc_tensor *);
    double (*host)(double, double);
    double lo_a, hi_a, lo_b, hi_b;
} binary_op;

typedef struct {
    const binary_op *op; /* the op */
    int layout;          /* 0: a,b (2,3); 1: a (2,3), b (3); 2: a (2,1), b (1,3) */
} binary_arg;

static tc_tensor *lib_binary(tc_tensor *const *x, const void *arg) {
    return ((const binary_arg *)arg)->op->lib(x[0], x[1]);
}
static int64_t host_binary(const double *const *x, double *out, const void *arg) {
    const binary_arg *b = arg;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            int ia = b->layout == 2 ? i : i * 3 + j, ib = b->layout == 0 ? i * 3 + j : j;
            out[i * 3 + j] = b->op->host(x[0][ia], x[1][ib]);
        }
    return 6;
}

static double h_add(double a, double b) { return a + b; }
static double h_sub(double a, double b) { return a - b; }
static double h_mul(double a, double b) { return a * b; }
static double h_div(double a, double b) { return a / b; }

static const binary_op binary_ops[] = {
    {"add", tc_add, h_add, -2, 2, -2, 2},      {"sub", tc_sub, h_sub, -2, 2, -2, 2},
    {"mul", tc_mul, h_mul, -2, 2, -2, 2},      {"div", tc_div, h_div, -2, 2, 0.5, 2},
    {"maximum", tc_maximum, fmax, -2, 2, -2, 2}, {"minimum", tc_minimum, fmin, -2, 2, -2, 2},
    {"pow", tc_pow, pow, 0.5, 2, -1.5, 2},
};

static void test_binary_broadcast(void **state) {
    (void)state;
    static const int64_t a_shapes[3][2] = {{2, 3}, {2, 3}, {2, 1}};
    static const int64_t b_shapes[3][2] = {{2, 3}, {3, 0}, {1, 3}};
    static const int b_ndim[3] = {2, 1, 2};
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++)
        for (int layout = 0; layout < 3; layout++) {
            const binary_op *op = &binary_ops[i];
            binary_arg arg = {op, layout};
            gc_case c = one_input(2, a_shapes[layout], op->lo_a, op->hi_a);
            add_input(&c, b_ndim[layout], b_shapes[layout], op->lo_b, op->hi_b);
            c.lib = lib_binary, c.host = host_binary, c.arg = &arg;
            char what[64];
            snprintf(what, sizeof what, "%s layout %d", op->name, layout);
            gc_check(what, &c, RTOL, ATOL);
        }
}

/* a float32 operand mixed with a float16 one: the f16 input's gradient is
 * float16 with its shape; and an int operand gets no gradient */
static void test_binary_mixed_dtypes(void **state) {
    (void)state;
    float av[3] = {1, 2, 3};
    tc_tensor *a = f32(1, SHAPE(3), av), *h = tc_cast(a, TC_FLOAT16);
    int32_t iv[3] = {4, 5, 6};
    tc_tensor *i = from(iv, TC_INT32, 1, SHAPE(3));
    assert_int_equal(tc_set_requires_grad(h, true), TC_OK);
    assert_int_equal(tc_set_requires_grad(a, true), TC_OK);
    tc_tensor *p = tc_mul(a, h), *q = tc_mul(p, i), *loss = tc_sum(q, 0, NULL, false);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_tensor *gh = tc_grad(h), *ga = tc_grad(a);
    check_meta(gh, TC_FLOAT16, 1, SHAPE(3));
    tc_tensor *gh32 = tc_cast(gh, TC_FLOAT32);
    float want_h[3] = {4, 10, 18}; /* a * i */
    expect_f32(gh32, want_h, 3, 1e-3, 1e-3, "d/dh of a*h*i");
    expect_f32(ga, want_h, 3, 1e-3, 1e-3, "d/da of a*h*i (h == a)");
    assert_null(tc_grad(i));
    tc_release(gh), tc_release(loss), tc_release(q), tc_release(p);
    tc_release(i), tc_release(h), tc_release(a);
}

/* where(cond, a, b) with cond (2,3), a (2,3), b (3): grads to a and b only */
static const uint8_t where_cond[6] = {1, 0, 0, 1, 1, 0};
static tc_tensor *lib_where(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *c = from(where_cond, TC_BOOL, 2, SHAPE(2, 3)), *r = tc_where(c, x[0], x[1]);
    tc_release(c);
    return r;
}
static int64_t host_where(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 6; k++) out[k] = where_cond[k] ? x[0][k] : x[1][k % 3];
    return 6;
}

static void test_where(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(2, 3), -2, 2);
    add_input(&c, 1, SHAPE(3), -2, 2);
    c.lib = lib_where, c.host = host_where;
    gc_check("where", &c, RTOL, ATOL);
}

/* ---- reduces over x (2,3,4) ---- */

typedef enum { R_SUM, R_MAX, R_MIN, R_MEAN, R_VAR, R_STD } reduce_kind;
typedef struct {
    const char *name;
    reduce_kind kind;
    int naxes;      /* 0 = all */
    int axes[3];    /* may be negative */
    bool keepdim;   /* output shape only */
    int correction; /* var, std */
} reduce_arg;

static tc_tensor *lib_reduce(tc_tensor *const *x, const void *arg) {
    const reduce_arg *r = arg;
    switch (r->kind) {
    case R_SUM: return tc_sum(x[0], r->naxes, r->axes, r->keepdim);
    case R_MAX: return tc_max(x[0], r->naxes, r->axes, r->keepdim);
    case R_MIN: return tc_min(x[0], r->naxes, r->axes, r->keepdim);
    case R_MEAN: return tc_mean(x[0], r->naxes, r->axes, r->keepdim);
    case R_VAR: return tc_var(x[0], r->naxes, r->axes, r->keepdim, r->correction);
    case R_STD: return tc_std(x[0], r->naxes, r->axes, r->keepdim, r->correction);
    }
    return NULL;
}

static int64_t host_reduce(const double *const *x, double *out, const void *arg) {
    const reduce_arg *r = arg;
    static const int64_t dims[3] = {2, 3, 4};
    bool red[3] = {r->naxes == 0, r->naxes == 0, r->naxes == 0};
    for (int i = 0; i < r->naxes; i++) red[(r->axes[i] + 3) % 3] = true;
    int64_t n_out = 1, cnt = 1;
    for (int d = 0; d < 3; d++) red[d] ? (cnt *= dims[d]) : (n_out *= dims[d]);
    double acc[24], mean[24];
    for (int64_t o = 0; o < n_out; o++) acc[o] = r->kind == R_MAX ? -INFINITY : r->kind == R_MIN ? INFINITY : 0;
    for (int pass = 0; pass < (r->kind >= R_VAR ? 2 : 1); pass++) {
        if (pass == 1)
            for (int64_t o = 0; o < n_out; o++) mean[o] = acc[o] / (double)cnt, acc[o] = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++) {
                    int idx[3] = {i, j, k};
                    int64_t o = 0;
                    for (int d = 0; d < 3; d++)
                        if (!red[d]) o = o * dims[d] + idx[d];
                    double v = x[0][(i * 3 + j) * 4 + k];
                    if (r->kind == R_MAX) acc[o] = fmax(acc[o], v);
                    else if (r->kind == R_MIN) acc[o] = fmin(acc[o], v);
                    else if (pass == 1) acc[o] += (v - mean[o]) * (v - mean[o]);
                    else acc[o] += v;
                }
    }
    for (int64_t o = 0; o < n_out; o++) {
        double dof = (double)(cnt - r->correction);
        out[o] = r->kind == R_MEAN ? acc[o] / (double)cnt
                 : r->kind == R_VAR ? acc[o] / dof
                 : r->kind == R_STD ? sqrt(acc[o] / dof)
                                    : acc[o];
    }
    return n_out;
}

static const reduce_arg reduce_cases[] = {
    {"sum axis 1", R_SUM, 1, {1}, false, 0},      {"sum all", R_SUM, 0, {0}, false, 0},
    {"sum (0,2) keepdim", R_SUM, 2, {0, -1}, true, 0},
    {"max axis 2", R_MAX, 1, {2}, false, 0},      {"max all", R_MAX, 0, {0}, true, 0},
    {"min axis 0", R_MIN, 1, {0}, false, 0},      {"mean (0,2)", R_MEAN, 2, {0, 2}, false, 0},
    {"mean all", R_MEAN, 0, {0}, false, 0},       {"var axis 1", R_VAR, 1, {1}, false, 1},
    {"var all c0", R_VAR, 0, {0}, false, 0},      {"std axis 2 keepdim", R_STD, 1, {2}, true, 0},
    {"std (0,1) c1", R_STD, 2, {0, 1}, false, 1},
};

static void test_reduce(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof reduce_cases / sizeof reduce_cases[0]; i++) {
        gc_case c = one_input(3, SHAPE(2, 3, 4), -2, 2);
        c.lib = lib_reduce, c.host = host_reduce, c.arg = &reduce_cases[i];
        gc_check(reduce_cases[i].name, &c, RTOL, ATOL);
    }
}

/* max/min spread the gradient evenly over ties (tinygrad's rule), and
 * maximum/minimum give each side half on a tie */
static void test_ties(void **state) {
    (void)state;
    float v[8] = {1, 3, 3, 2, 5, 5, 5, 0};
    tc_tensor *x = f32(2, SHAPE(2, 4), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *m = tc_max(x, 1, AXES(1), false), *s = tc_sum(m, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_OK);
    float want[8] = {0, 0.5f, 0.5f, 0, 1.0f / 3, 1.0f / 3, 1.0f / 3, 0};
    expect_f32(tc_grad(x), want, 8, 1e-6, 1e-6, "max ties");
    assert_int_equal(tc_zero_grad(x), TC_OK);
    tc_tensor *mn = tc_min(x, 0, NULL, false);
    assert_int_equal(tc_backward(mn), TC_OK);
    float want_min[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    expect_f32(tc_grad(x), want_min, 8, 1e-6, 1e-6, "min all");
    tc_release(mn), tc_release(s), tc_release(m), tc_release(x);

    float av[3] = {1, 2, 4}, bv[3] = {1, 3, 4};
    tc_tensor *a = f32(1, SHAPE(3), av), *b = f32(1, SHAPE(3), bv);
    tc_set_requires_grad(a, true), tc_set_requires_grad(b, true);
    tc_tensor *mx = tc_maximum(a, b), *mi = tc_minimum(a, b), *sum = tc_add(mx, mi);
    tc_tensor *l = tc_sum(sum, 0, NULL, false);
    assert_int_equal(tc_backward(l), TC_OK);
    /* max + min: each element of a gets 1 whether it wins or loses; on a tie
     * max gives 1/2 and min gives 1/2 */
    float ones[3] = {1, 1, 1};
    expect_f32(tc_grad(a), ones, 3, 1e-6, 1e-6, "maximum+minimum d/da");
    expect_f32(tc_grad(b), ones, 3, 1e-6, 1e-6, "maximum+minimum d/db");
    tc_release(l), tc_release(sum), tc_release(mi);
    tc_tensor *l2 = tc_sum(mx, 0, NULL, false);
    tc_zero_grad(a), tc_zero_grad(b);
    assert_int_equal(tc_backward(l2), TC_OK);
    float wa[3] = {0.5f, 0, 0.5f}, wb[3] = {0.5f, 1, 0.5f};
    expect_f32(tc_grad(a), wa, 3, 1e-6, 1e-6, "maximum ties d/da");
    expect_f32(tc_grad(b), wb, 3, 1e-6, 1e-6, "maximum ties d/db");
    tc_release(l2), tc_release(mx), tc_release(a), tc_release(b);
}

/* ---- movement ops (x is (2,3,4) unless said) ---- */

#define X3(x, i, j, k) ((x)[((i) * 3 + (j)) * 4 + (k)])

static tc_tensor *lib_reshape(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_reshape(x[0], 3, SHAPE(3, -1, 2));
}
static int64_t host_identity(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 24; k++) out[k] = x[0][k];
    return 24;
}
static tc_tensor *lib_contiguous(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_contiguous(x[0]);
}

/* permute (2,0,1): out (4,2,3) */
static tc_tensor *lib_permute(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_permute(x[0], AXES(2, 0, 1));
}
static int64_t host_permute(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) out[(k * 2 + i) * 3 + j] = X3(x[0], i, j, k);
    return 24;
}

/* transpose(0, 2): out (4,3,2) */
static tc_tensor *lib_transpose(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_transpose(x[0], 0, -1);
}
static int64_t host_transpose(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++) out[(k * 3 + j) * 2 + i] = X3(x[0], i, j, k);
    return 24;
}

/* expand: x (3,1) -> (2,3,4), a new leading dim and a stretched one */
static tc_tensor *lib_expand(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_expand(x[0], 3, SHAPE(2, 3, 4));
}
static int64_t host_expand(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) X3(out, i, j, k) = x[0][j];
    return 24;
}

/* pad: x (2,3) -> pad ((1,0),(2,1)) -> (3,6) */
static tc_tensor *lib_pad(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_pad(x[0], SHAPE(1, 0, 2, 1));
}
static int64_t host_pad(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) {
            bool in = i >= 1 && j >= 2 && j < 5;
            out[i * 6 + j] = in ? x[0][(i - 1) * 3 + (j - 2)] : 0;
        }
    return 18;
}

/* shrink: ((0,2),(1,3),(1,4)) -> (2,2,3) */
static tc_tensor *lib_shrink(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_shrink(x[0], SHAPE(0, 2, 1, 3, 1, 4));
}
static int64_t host_shrink(const double *const *x, double *out, const void *arg) {
    (void)arg;
    int n = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 1; j < 3; j++)
            for (int k = 1; k < 4; k++) out[n++] = X3(x[0], i, j, k);
    return n;
}

/* flip axes 0 and 2 */
static tc_tensor *lib_flip(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_flip(x[0], 2, AXES(0, -1));
}
static int64_t host_flip(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) X3(out, i, j, k) = X3(x[0], 1 - i, j, 3 - k);
    return 24;
}

static void test_movement(void **state) {
    (void)state;
    struct {
        const char *name;
        int ndim;
        int64_t shape[3];
        tc_tensor *(*lib)(tc_tensor *const *, const void *);
        int64_t (*host)(const double *const *, double *, const void *);
    } cases[] = {
        {"reshape", 3, {2, 3, 4}, lib_reshape, host_identity},
        {"contiguous", 3, {2, 3, 4}, lib_contiguous, host_identity},
        {"permute", 3, {2, 3, 4}, lib_permute, host_permute},
        {"transpose", 3, {2, 3, 4}, lib_transpose, host_transpose},
        {"expand", 2, {3, 1}, lib_expand, host_expand},
        {"pad", 2, {2, 3}, lib_pad, host_pad},
        {"shrink", 3, {2, 3, 4}, lib_shrink, host_shrink},
        {"flip", 3, {2, 3, 4}, lib_flip, host_flip},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gc_case c = one_input(cases[i].ndim, cases[i].shape, -2, 2);
        c.lib = cases[i].lib, c.host = cases[i].host;
        gc_check(cases[i].name, &c, RTOL, ATOL);
    }
}

/* ---- ops on non-contiguous inputs ---- */

/* exp(permute(x)) * sigmoid(flip(permute(x))) */
static tc_tensor *lib_nc_unary(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *p = tc_permute(x[0], AXES(2, 0, 1)), *f = tc_flip(p, 1, AXES(0));
    tc_tensor *e = tc_exp(p), *s = tc_sigmoid(f), *r = tc_mul(e, s);
    tc_release(p), tc_release(f), tc_release(e), tc_release(s);
    return r;
}
static int64_t host_nc_unary(const double *const *x, double *out, const void *arg) {
    double p[24];
    const double *pp = p;
    host_permute(x, p, arg);
    for (int k = 0; k < 4; k++)
        for (int m = 0; m < 6; m++)
            out[k * 6 + m] = exp(pp[k * 6 + m]) / (1 + exp(-pp[(3 - k) * 6 + m]));
    return 24;
}

/* pad(x0 (2,3)) * x1 (3,6) + shrink(x1) broadcast: mixes padded and shrunk reads */
static tc_tensor *lib_nc_binary(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *p = tc_pad(x[0], SHAPE(1, 0, 2, 1)), *m = tc_mul(p, x[1]);
    tc_tensor *s = tc_shrink(x[1], SHAPE(0, 1, 0, 6)), *r = tc_add(m, s); /* (1,6) row */
    tc_release(p), tc_release(m), tc_release(s);
    return r;
}
static int64_t host_nc_binary(const double *const *x, double *out, const void *arg) {
    host_pad(x, out, arg);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 6; j++) out[i * 6 + j] = out[i * 6 + j] * x[1][i * 6 + j] + x[1][j];
    return 18;
}

/* sum over axis 1 of shrink(permute(x)) divided by a transposed matrix */
static tc_tensor *lib_nc_reduce(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *p = tc_permute(x[0], AXES(2, 0, 1));         /* (4,2,3) */
    tc_tensor *s = tc_shrink(p, SHAPE(1, 3, 0, 2, 0, 3));    /* (2,2,3) */
    tc_tensor *r = tc_sum(s, 1, AXES(1), false);             /* (2,3) */
    tc_tensor *t = tc_transpose(x[1], 0, 1), *d = tc_div(r, t); /* x1 (3,2) */
    tc_release(p), tc_release(s), tc_release(r), tc_release(t);
    return d;
}
static int64_t host_nc_reduce(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) {
            double acc = 0;
            for (int i = 0; i < 2; i++) acc += X3(x[0], i, j, k + 1);
            out[k * 3 + j] = acc / x[1][j * 2 + k];
        }
    return 6;
}

static void test_noncontiguous(void **state) {
    (void)state;
    gc_case c = one_input(3, SHAPE(2, 3, 4), -1, 1);
    c.lib = lib_nc_unary, c.host = host_nc_unary;
    gc_check("exp(permute) * sigmoid(flip(permute))", &c, RTOL, ATOL);
    gc_case b = one_input(2, SHAPE(2, 3), -2, 2);
    add_input(&b, 2, SHAPE(3, 6), -2, 2);
    b.lib = lib_nc_binary, b.host = host_nc_binary;
    gc_check("pad(a) * b + shrink(b)", &b, RTOL, ATOL);
    gc_case r = one_input(3, SHAPE(2, 3, 4), -2, 2);
    add_input(&r, 2, SHAPE(3, 2), 0.5, 2);
    r.lib = lib_nc_reduce, r.host = host_nc_reduce;
    gc_check("sum(shrink(permute(a))) / b^T", &r, RTOL, ATOL);
}

/* ---- graph structure ---- */

/* y = x*x; z = (y + exp(y)) * y: y is used three times, x twice */
static tc_tensor *lib_shared(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *y = tc_mul(x[0], x[0]), *e = tc_exp(y), *s = tc_add(y, e), *z = tc_mul(s, y);
    tc_release(y), tc_release(e), tc_release(s);
    return z;
}
static int64_t host_shared(const double *const *x, double *out, const void *arg) {
    (void)arg;
    for (int k = 0; k < 6; k++) {
        double y = x[0][k] * x[0][k];
        out[k] = (y + exp(y)) * y;
    }
    return 6;
}

static void test_shared_subexpressions(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(2, 3), -1, 1);
    c.lib = lib_shared, c.host = host_shared;
    gc_check("shared subexpressions", &c, RTOL, ATOL);
}

/* grad += new: two backward calls (on two losses, and twice on one) add up;
 * zero_grad drops it */
static void test_accumulate(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    tc_tensor *x = f32(1, SHAPE(3), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *sq = tc_square(x), *l1 = tc_sum(sq, 0, NULL, false); /* d = 2x */
    tc_tensor *l2 = tc_sum(x, 0, NULL, false);                       /* d = 1 */
    assert_int_equal(tc_backward(l1), TC_OK);
    assert_int_equal(tc_backward(l2), TC_OK);
    float want[3] = {3, 5, 7};
    expect_f32(tc_grad(x), want, 3, 1e-6, 1e-6, "2x + 1");
    assert_int_equal(tc_backward(l1), TC_OK);
    float want2[3] = {5, 9, 13};
    expect_f32(tc_grad(x), want2, 3, 1e-6, 1e-6, "2x + 1 + 2x");
    assert_int_equal(tc_zero_grad(x), TC_OK);
    assert_null(tc_grad(x));
    assert_int_equal(tc_last_status(), TC_OK); /* no gradient is not an error */
    assert_int_equal(tc_backward(l2), TC_OK);
    float ones[3] = {1, 1, 1};
    expect_f32(tc_grad(x), ones, 3, 1e-6, 1e-6, "after zero_grad");
    tc_release(l1), tc_release(l2), tc_release(sq), tc_release(x);
}

/* device bytes in use after: exp(x) realized, its handle released, the
 * loss sum(exp(x)) realized and differentiated (tc_backward_opts with retain_graph) and
 * x's gradient realized, the loss still held; less the bytes before */
static int64_t bytes_kept(bool retain_graph) {
    tc_counters c0, c1;
    tc_get_counters(&c0);
    float v[1024];
    for (int i = 0; i < 1024; i++) v[i] = (float)i / 1024;
    tc_tensor *x = f32(1, SHAPE(1024), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *e = tc_exp(x);
    assert_int_equal(tc_realize(&e, 1), TC_OK);
    tc_tensor *l = tc_sum(e, 0, NULL, false);
    assert_int_equal(tc_realize(&l, 1), TC_OK);
    tc_release(e); /* its value lives on in what the loss's graph recorded */
    assert_int_equal(tc_backward_opts(l, NULL, retain_graph), TC_OK);
    tc_tensor *g = tc_grad(x);
    assert_int_equal(tc_realize(&g, 1), TC_OK);
    tc_release(g);
    tc_get_counters(&c1);
    tc_release(l), tc_release(x);
    return c1.mem_used - c0.mem_used;
}

/* tc_backward_opts without retain_graph frees what the graph recorded (the
 * realized exp(x) it kept for exp's rule goes once the gradient is
 * realized, though the loss lives), as torch's and tinygrad's backward do;
 * a second backward through it fails and changes no gradient. With
 * retain_graph it keeps the graph: twice accumulates, as tc_backward */
static void test_backward_frees_graph(void **state) {
    (void)state;
    assert_int_equal(bytes_kept(true) - bytes_kept(false), 1024 * 4);
    float v[3] = {1, 2, 3}, want[3] = {2, 4, 6};
    tc_tensor *x = f32(1, SHAPE(3), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *sq = tc_square(x), *l = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_backward_opts(l, NULL, false), TC_OK);
    expect_f32(tc_grad(x), want, 3, 1e-6, 1e-6, "2x");
    assert_int_equal(tc_backward_opts(l, NULL, true), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_backward_opts: the loss depends on a tensor whose graph an "
                                    "earlier backward freed");
    assert_int_equal(tc_backward(l), TC_ERR_INVALID);
    expect_f32(tc_grad(x), want, 3, 1e-6, 1e-6, "2x, unchanged by the refused backwards");
    /* a new loss over x itself is fine: x is a leaf */
    tc_tensor *l2 = tc_sum(x, 0, NULL, false);
    assert_int_equal(tc_backward_opts(l2, NULL, false), TC_OK);
    float want2[3] = {3, 5, 7};
    expect_f32(tc_grad(x), want2, 3, 1e-6, 1e-6, "2x + 1");
    /* retained: the graph serves twice */
    assert_int_equal(tc_zero_grad(x), TC_OK);
    tc_tensor *sq2 = tc_square(x), *l3 = tc_sum(sq2, 0, NULL, false);
    assert_int_equal(tc_backward_opts(l3, NULL, true), TC_OK);
    assert_int_equal(tc_backward_opts(l3, NULL, false), TC_OK);
    float want3[3] = {4, 8, 12};
    expect_f32(tc_grad(x), want3, 3, 1e-6, 1e-6, "2x twice");
    tc_release(l), tc_release(sq), tc_release(l2), tc_release(l3), tc_release(sq2), tc_release(x);
}

/* gradients are lazy: nothing runs in tc_backward; realizing the gradient
 * runs its kernels. Intermediate results keep no gradient (only leaves). */
static void test_lazy(void **state) {
    (void)state;
    tc_tensor *x = tc_test_randn(2, SHAPE(4, 8), 7, -1, 1);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *e = tc_exp(x), *sm = tc_softmax(e, 1), *l = tc_sum(sm, 1, AXES(1), false);
    tc_tensor *loss = tc_mean(l, 0, NULL, false);
    tc_counters before, after;
    tc_get_counters(&before);
    assert_int_equal(tc_backward(loss), TC_OK);
    tc_get_counters(&after);
    assert_int_equal(after.kernel_count, before.kernel_count);
    tc_tensor *g = tc_grad(x);
    assert_non_null(g);
    assert_false(tc_is_realized(g));
    assert_true(tc_schedule_kernel_count(&g, 1) >= 1);
    assert_int_equal(tc_realize(&g, 1), TC_OK);
    assert_true(tc_is_realized(g));
    assert_true(tc_requires_grad(e));
    assert_null(tc_grad(e));
    /* softmax rows sum to 1 whatever x is: the gradient is ~0 */
    float *gv = tc_test_read(g);
    for (int i = 0; i < 32; i++) assert_true(fabsf(gv[i]) < 1e-5f);
    free(gv);
    tc_release(g), tc_release(loss), tc_release(l), tc_release(sm), tc_release(e), tc_release(x);
}

/* detach cuts the graph; grad mode off records nothing; comparisons,
 * integer casts and argmax are not differentiable */
static void test_detach_and_modes(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    tc_tensor *x = f32(1, SHAPE(3), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    assert_true(tc_requires_grad(x));
    tc_tensor *d = tc_detach(x);
    assert_false(tc_requires_grad(d));
    tc_tensor *p = tc_mul(x, d), *l = tc_sum(p, 0, NULL, false); /* d/dx = d = x */
    assert_int_equal(tc_backward(l), TC_OK);
    expect_f32(tc_grad(x), v, 3, 1e-6, 1e-6, "x * detach(x)");
    assert_null(tc_grad(d));

    assert_true(tc_set_grad_enabled(false));
    assert_false(tc_is_grad_enabled());
    tc_tensor *q = tc_mul(x, x);
    assert_false(tc_requires_grad(q));
    assert_false(tc_set_grad_enabled(true));
    assert_true(tc_is_grad_enabled());

    tc_tensor *c = tc_lt(x, d), *i = tc_cast(x, TC_INT32), *am = tc_argmax(x, 0, false);
    tc_tensor *h = tc_cast(x, TC_FLOAT16);
    assert_false(tc_requires_grad(c));
    assert_false(tc_requires_grad(i));
    assert_false(tc_requires_grad(am));
    assert_true(tc_requires_grad(h));
    tc_release(h), tc_release(am), tc_release(i), tc_release(c), tc_release(q);
    tc_release(l), tc_release(p), tc_release(d), tc_release(x);
}

static void test_errors(void **state) {
    (void)state;
    float v[3] = {1, 2, 3};
    tc_tensor *x = f32(1, SHAPE(3), v), *sq = NULL;
    assert_int_equal(tc_backward(x), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_backward: loss must be a scalar");
    tc_tensor *s = tc_sum(x, 0, NULL, false);
    assert_int_equal(tc_backward(s), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "does not require grad");
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    sq = tc_square(x);
    assert_int_equal(tc_backward(sq), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "got shape (3,)");
    assert_int_equal(tc_set_requires_grad(sq, false), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "not a leaf");
    assert_int_equal(tc_set_requires_grad(sq, true), TC_OK); /* already: a no-op */
    int32_t iv[2] = {1, 2};
    tc_tensor *it = from(iv, TC_INT32, 1, SHAPE(2));
    assert_int_equal(tc_set_requires_grad(it, true), TC_ERR_DTYPE);
    assert_tc_error(TC_ERR_DTYPE, "only float tensors");
    assert_int_equal(tc_set_requires_grad(NULL, true), TC_ERR_INVALID);
    assert_int_equal(tc_backward(NULL), TC_ERR_INVALID);
    assert_null(tc_grad(NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_grad");
    assert_int_equal(tc_zero_grad(NULL), TC_ERR_INVALID);
    assert_null(tc_detach(NULL));
    assert_false(tc_requires_grad(NULL));
    /* a (1,1) loss is a scalar too */
    tc_tensor *r = tc_sum(sq, 1, AXES(0), true);
    assert_int_equal(tc_backward(r), TC_OK);
    float want[3] = {2, 4, 6};
    expect_f32(tc_grad(x), want, 3, 1e-6, 1e-6, "(1) loss");
    tc_release(r), tc_release(it), tc_release(sq), tc_release(s), tc_release(x);
}

/* tc_backward_ex: a non-scalar loss seeded with a gradient of its shape is
 * the backward of sum(loss * gradient); gradients accumulate as with
 * tc_backward; a wrong seed is refused */
static void test_backward_with_gradient(void **state) {
    (void)state;
    float v[6] = {1, -2, 3, 0.5f, -1, 2}, g[6] = {0.5f, 1, -1, 2, 0, 3};
    tc_tensor *x = f32(2, SHAPE(2, 3), v), *seed = f32(2, SHAPE(3, 2), g);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *sq = tc_square(x), *y = tc_permute(sq, (const int[]){1, 0}); /* y[j,i] = x[i,j]^2 */
    assert_int_equal(tc_backward_ex(y, seed), TC_OK);
    float want[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = 2 * v[i * 3 + j] * g[j * 2 + i];
    expect_f32(tc_grad(x), want, 6, 1e-6, 1e-6, "backward with a gradient");
    assert_int_equal(tc_backward_ex(y, seed), TC_OK); /* accumulates */
    for (int k = 0; k < 6; k++) want[k] *= 2;
    expect_f32(tc_grad(x), want, 6, 1e-6, 1e-6, "twice");
    /* the seed of a scalar loss defaults to one */
    tc_tensor *s = tc_sum(sq, 0, NULL, false);
    assert_int_equal(tc_zero_grad(x), TC_OK);
    assert_int_equal(tc_backward_ex(s, NULL), TC_OK);
    for (int k = 0; k < 6; k++) want[k] = 2 * v[k];
    expect_f32(tc_grad(x), want, 6, 1e-6, 1e-6, "NULL gradient");
    /* refused: another shape, an integer seed, a non-scalar loss without one */
    assert_int_equal(tc_backward_ex(y, x), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_backward_ex: gradient of shape (2,3) for loss of shape (3,2) "
                                  "(they must be equal)");
    int32_t iv[6] = {0};
    tc_tensor *ig = from(iv, TC_INT32, 2, SHAPE(3, 2));
    assert_int_equal(tc_backward_ex(y, ig), TC_ERR_DTYPE);
    assert_tc_error(TC_ERR_DTYPE, "tc_backward_ex: gradient must be a float tensor, got int32");
    assert_int_equal(tc_backward_ex(y, NULL), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_backward_ex: loss must be a scalar (one element), got shape "
                                  "(3,2); pass a gradient of its shape (tc_backward_ex)");
    tc_release(ig), tc_release(s), tc_release(y), tc_release(sq), tc_release(seed), tc_release(x);
}

/* a chain of 100000 contexts releases without recursion; a 2000-op chain
 * differentiates (y <- y*y - y: y used twice per step), and a 60-step one
 * matches the host; a gradient outlives its leaf and the loss */
static void test_deep_and_lifetime(void **state) {
    (void)state;
    float v[2] = {0.5f, -0.25f};
    tc_tensor *x = f32(1, SHAPE(2), v);
    assert_int_equal(tc_set_requires_grad(x, true), TC_OK);
    tc_tensor *y = tc_retain(x);
    for (int i = 0; i < 100000; i++) {
        tc_tensor *n = tc_neg(y);
        assert_non_null(n);
        tc_release(y);
        y = n;
    }
    tc_release(y); /* frees 100000 contexts, one after another */

    for (int steps = 2000; steps >= 60; steps = steps == 2000 ? 60 : 0) {
        y = tc_retain(x);
        for (int i = 0; i < steps; i++) {
            tc_tensor *n = tc_mul(y, y), *m = tc_sub(n, y);
            tc_release(n);
            tc_release(y);
            y = m;
        }
        tc_tensor *l = tc_sum(y, 0, NULL, false);
        assert_int_equal(tc_backward(l), TC_OK);
        tc_release(l);
        tc_release(y);
        tc_tensor *g = tc_grad(x);
        assert_non_null(g);
        assert_int_equal(tc_zero_grad(x), TC_OK);
        if (steps == 60) { /* host: d y_{k+1} / d y_k = 2 y_k - 1 */
            float want[2];
            for (int e = 0; e < 2; e++) {
                double yy = v[e], d = 1;
                for (int i = 0; i < steps; i++) d *= 2 * yy - 1, yy = yy * yy - yy;
                want[e] = (float)d;
            }
            tc_release(x); /* the gradient outlives its leaf */
            x = NULL;
            expect_f32(g, want, 2, 1e-3, 1e-5, "60-step chain");
        } else {
            tc_release(g);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_unary),          TEST(test_binary_broadcast), TEST(test_binary_mixed_dtypes),
        TEST(test_where),          TEST(test_reduce),           TEST(test_ties),
        TEST(test_movement),       TEST(test_noncontiguous),    TEST(test_shared_subexpressions),
        TEST(test_accumulate),     TEST(test_backward_frees_graph),
        TEST(test_lazy),           TEST(test_detach_and_modes), TEST(test_errors),
        TEST(test_deep_and_lifetime), TEST(test_backward_with_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
