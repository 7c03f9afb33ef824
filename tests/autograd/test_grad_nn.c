/* test_grad_nn.c - gradients of the composites (softmax, log_softmax,
 * layernorm, matmul in every rank, linear, conv2d with stride, padding,
 * groups and dilation, max/avg pools, cross_entropy, batchnorm in training
 * and eval), which come from the ops they are built of, against central
 * finite differences in double of the host loops in ref_ops.h
 * (grad_check.h). Tolerance: rtol 2e-3, atol 2e-4 (5e-3/5e-4 for the
 * normalisations, whose float32 forward loses a little more). */
#include "grad_check.h"
#include "ref_ops.h"

#define RTOL 2e-3
#define ATOL 2e-4

/* ---- composites: their gradients come from the ops they are built of ---- */

typedef struct {
    int axis;            /* softmax, log_softmax, layernorm */
    int64_t outer, len, inner; /* the host view (outer, len, inner) */
    bool is_log;         /* log_softmax */
} norm_arg;

static tc_tensor *lib_softmax(tc_tensor *const *x, const void *arg) {
    const norm_arg *a = arg;
    return a->is_log ? tc_log_softmax(x[0], a->axis) : tc_softmax(x[0], a->axis);
}
static int64_t host_softmax(const double *const *x, double *out, const void *arg) {
    const norm_arg *a = arg;
    ref_softmax(x[0], a->outer, a->len, a->inner, a->is_log, out);
    return a->outer * a->len * a->inner;
}
static tc_tensor *lib_layernorm(tc_tensor *const *x, const void *arg) {
    return tc_layernorm(x[0], ((const norm_arg *)arg)->axis, 1e-5);
}
static int64_t host_layernorm(const double *const *x, double *out, const void *arg) {
    const norm_arg *a = arg;
    ref_layernorm(x[0], a->outer, a->len, 1e-5, out);
    return a->outer * a->len;
}

static void test_softmax_layernorm(void **state) {
    (void)state;
    norm_arg rows = {1, 2, 5, 1, false}, cols = {0, 1, 3, 4, false}, logs = {-1, 2, 5, 1, true};
    gc_case c = one_input(2, SHAPE(2, 5), -2, 2);
    c.lib = lib_softmax, c.host = host_softmax, c.arg = &rows;
    gc_check("softmax axis 1", &c, RTOL, ATOL);
    c.shape[0][0] = 3, c.shape[0][1] = 4, c.arg = &cols;
    gc_check("softmax axis 0", &c, RTOL, ATOL);
    c.shape[0][0] = 2, c.shape[0][1] = 5, c.arg = &logs;
    gc_check("log_softmax axis -1", &c, RTOL, ATOL);
    norm_arg ln = {1, 2, 12, 1, false};
    gc_case l = one_input(3, SHAPE(2, 3, 4), -2, 2);
    l.lib = lib_layernorm, l.host = host_layernorm, l.arg = &ln;
    gc_check("layernorm axis 1", &l, 5e-3, 5e-4);
}

/* matmul in several ranks: arg is the case number */
static tc_tensor *lib_matmul(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_matmul(x[0], x[1]);
}
typedef struct {
    int64_t batch, m, k, n;    /* a is (batch, m, k) (batch 1: (m,k)), b (k, n) */
    bool a_vec, b_vec;         /* a is (k) / b is (k) */
} mm_arg;
static int64_t host_matmul(const double *const *x, double *out, const void *arg) {
    const mm_arg *a = arg;
    for (int64_t bt = 0; bt < a->batch; bt++)
        ref_matmul(x[0] + bt * a->m * a->k, x[1], a->m, a->k, a->n, out + bt * a->m * a->n);
    return a->batch * a->m * a->n;
}
static tc_tensor *lib_linear(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_linear(x[0], x[1], x[2]);
}
static int64_t host_linear(const double *const *x, double *out, const void *arg) {
    (void)arg; /* x (2,3), w (4,3), b (4) */
    for (int i = 0; i < 2; i++)
        for (int o = 0; o < 4; o++) {
            double acc = x[2][o];
            for (int t = 0; t < 3; t++) acc += x[0][i * 3 + t] * x[1][o * 3 + t];
            out[i * 4 + o] = acc;
        }
    return 8;
}

static void test_matmul(void **state) {
    (void)state;
    struct {
        const char *name;
        int na, nb;
        int64_t sa[3], sb[2];
        mm_arg arg;
    } cases[] = {
        {"matmul (2,3)@(3,4)", 2, 2, {2, 3}, {3, 4}, {1, 2, 3, 4, false, false}},
        {"matmul (2,2,3)@(3,4)", 3, 2, {2, 2, 3}, {3, 4}, {2, 2, 3, 4, false, false}},
        {"matmul (3)@(3,4)", 1, 2, {3}, {3, 4}, {1, 1, 3, 4, true, false}},
        {"matmul (2,3)@(3)", 2, 1, {2, 3}, {3}, {1, 2, 3, 1, false, true}},
        {"matmul (3)@(3)", 1, 1, {3}, {3}, {1, 1, 3, 1, true, true}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gc_case c = one_input(cases[i].na, cases[i].sa, -2, 2);
        add_input(&c, cases[i].nb, cases[i].sb, -2, 2);
        c.lib = lib_matmul, c.host = host_matmul, c.arg = &cases[i].arg;
        gc_check(cases[i].name, &c, RTOL, ATOL);
    }
    gc_case l = one_input(2, SHAPE(2, 3), -2, 2);
    add_input(&l, 2, SHAPE(4, 3), -2, 2);
    add_input(&l, 1, SHAPE(4), -2, 2);
    l.lib = lib_linear, l.host = host_linear;
    gc_check("linear", &l, RTOL, ATOL);
}

/* conv2d: x, w, bias (bias optional: n_in 2) */
static tc_tensor *lib_conv(tc_tensor *const *x, const void *arg) {
    const ref_conv_shape *c = arg;
    return tc_conv2d_ex(x[0], x[1], c->groups == 1 ? x[2] : NULL, (int)c->sh, (int)c->sw,
                        (int)c->ph, (int)c->pw, (int)c->dil, (int)c->groups);
}
static int64_t host_conv(const double *const *x, double *out, const void *arg) {
    const ref_conv_shape *c = arg;
    ref_conv2d(x[0], x[1], c->groups == 1 ? x[2] : NULL, c, out);
    return c->n * c->cout * ref_conv_oh(c) * ref_conv_ow(c);
}

static tc_tensor *lib_conv_nobias(tc_tensor *const *x, const void *arg) {
    const ref_conv_shape *c = arg;
    return tc_conv2d_ex(x[0], x[1], NULL, (int)c->sh, (int)c->sw, (int)c->ph, (int)c->pw,
                        (int)c->dil, (int)c->groups);
}
static int64_t host_conv_nobias(const double *const *x, double *out, const void *arg) {
    const ref_conv_shape *c = arg;
    ref_conv2d(x[0], x[1], NULL, c, out);
    return c->n * c->cout * ref_conv_oh(c) * ref_conv_ow(c);
}

static void test_conv_pool(void **state) {
    (void)state;
    ref_conv_shape plain = {1, 2, 5, 5, 2, 3, 3, 2, 2, 1, 1, 1, 1};
    gc_case c = one_input(4, SHAPE(1, 2, 5, 5), -1, 1);
    add_input(&c, 4, SHAPE(2, 2, 3, 3), -1, 1);
    add_input(&c, 1, SHAPE(2), -1, 1);
    c.lib = lib_conv, c.host = host_conv, c.arg = &plain;
    gc_check("conv2d stride 2 pad 1 bias", &c, RTOL, ATOL);
    /* groups 2, dilation 2, stride (1,2), padding (1,0), no bias */
    ref_conv_shape grouped = {1, 4, 6, 6, 4, 2, 2, 1, 2, 1, 0, 2, 2};
    gc_case g = one_input(4, SHAPE(1, 4, 6, 6), -1, 1);
    add_input(&g, 4, SHAPE(4, 2, 2, 2), -1, 1);
    g.lib = lib_conv, g.host = host_conv, g.arg = &grouped;
    gc_check("conv2d groups 2 dilation 2", &g, RTOL, ATOL);
    /* stride 1 (nnops.c's own conv rule): padding (1,0), a 3x2 kernel, bias;
     * and no padding, no bias */
    ref_conv_shape s1 = {2, 3, 6, 5, 2, 3, 2, 1, 1, 1, 0, 1, 1};
    gc_case a = one_input(4, SHAPE(2, 3, 6, 5), -1, 1);
    add_input(&a, 4, SHAPE(2, 3, 3, 2), -1, 1);
    add_input(&a, 1, SHAPE(2), -1, 1);
    a.lib = lib_conv, a.host = host_conv, a.arg = &s1;
    gc_check("conv2d stride 1 pad (1,0) kernel 3x2 bias", &a, RTOL, ATOL);
    ref_conv_shape s0 = {1, 2, 5, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1};
    gc_case b = one_input(4, SHAPE(1, 2, 5, 5), -1, 1);
    add_input(&b, 4, SHAPE(3, 2, 3, 3), -1, 1);
    b.lib = lib_conv_nobias, b.host = host_conv_nobias, b.arg = &s0;
    gc_check("conv2d stride 1 no padding no bias", &b, RTOL, ATOL);
}

typedef struct {
    int64_t outer, h, w, k, s; /* x (outer..., h, w) */
    bool is_max;
} pool_arg;
static tc_tensor *lib_pool(tc_tensor *const *x, const void *arg) {
    const pool_arg *p = arg;
    return p->is_max ? tc_max_pool2d(x[0], (int)p->k, (int)p->s)
                     : tc_avg_pool2d(x[0], (int)p->k, (int)p->s);
}
static int64_t host_pool(const double *const *x, double *out, const void *arg) {
    const pool_arg *p = arg;
    ref_pool(x[0], p->outer, p->h, p->w, p->k, p->s, p->is_max, out);
    return p->outer * ((p->h - p->k) / p->s + 1) * ((p->w - p->k) / p->s + 1);
}

static void test_pools(void **state) {
    (void)state;
    struct {
        const char *name;
        int64_t shape[4];
        pool_arg arg;
    } cases[] = {
        {"max_pool2d k2", {1, 2, 4, 4}, {2, 4, 4, 2, 2, true}},
        {"max_pool2d k3 s1 (overlapping)", {1, 1, 5, 5}, {1, 5, 5, 3, 1, true}},
        {"avg_pool2d k3 s2", {1, 1, 5, 5}, {1, 5, 5, 3, 2, false}},
        {"avg_pool2d k2 s3 (gaps)", {2, 1, 7, 6}, {2, 7, 6, 2, 3, false}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gc_case c = one_input(4, cases[i].shape, -2, 2);
        c.lib = lib_pool, c.host = host_pool, c.arg = &cases[i].arg;
        gc_check(cases[i].name, &c, RTOL, ATOL);
    }
}

/* cross_entropy(logits (3,4), labels {2, 0, 3}) */
static const int32_t ce_labels[3] = {2, 0, 3};
static tc_tensor *lib_ce(tc_tensor *const *x, const void *arg) {
    (void)arg;
    tc_tensor *lab = from(ce_labels, TC_INT32, 1, SHAPE(3)), *r = tc_cross_entropy(x[0], lab);
    tc_release(lab);
    return r;
}
static int64_t host_ce(const double *const *x, double *out, const void *arg) {
    (void)arg;
    out[0] = ref_cross_entropy(x[0], ce_labels, 3, 4);
    return 1;
}

/* batchnorm (4,2,3) with weight and bias: training (batch statistics), and
 * eval with constant running stats */
static tc_tensor *lib_bn_train(tc_tensor *const *x, const void *arg) {
    (void)arg;
    return tc_batchnorm(x[0], x[1], x[2], NULL, NULL, true, 0.1, 1e-5);
}
static int64_t host_bn_train(const double *const *x, double *out, const void *arg) {
    (void)arg;
    ref_batchnorm(x[0], 4, 2, 3, x[1], x[2], 1e-5, out, NULL, NULL);
    return 24;
}
static tc_tensor *lib_bn_eval(tc_tensor *const *x, const void *arg) {
    (void)arg;
    float rm[2] = {0.1f, -0.2f}, rv[2] = {0.5f, 2.0f};
    tc_tensor *m = f32(1, SHAPE(2), rm), *v = f32(1, SHAPE(2), rv);
    tc_tensor *r = tc_batchnorm(x[0], x[1], x[2], m, v, false, 0.1, 1e-5);
    tc_release(m), tc_release(v);
    return r;
}
static int64_t host_bn_eval(const double *const *x, double *out, const void *arg) {
    (void)arg;
    double rm[2] = {0.1f, -0.2f}, rv[2] = {0.5f, 2.0f};
    for (int i = 0; i < 4; i++)
        for (int ch = 0; ch < 2; ch++)
            for (int j = 0; j < 3; j++) {
                int at = (i * 2 + ch) * 3 + j;
                out[at] = (x[0][at] - rm[ch]) / sqrt(rv[ch] + 1e-5) * x[1][ch] + x[2][ch];
            }
    return 24;
}

static void test_losses_and_norms(void **state) {
    (void)state;
    gc_case c = one_input(2, SHAPE(3, 4), -2, 2);
    c.lib = lib_ce, c.host = host_ce;
    gc_check("cross_entropy", &c, RTOL, ATOL);
    gc_case b = one_input(3, SHAPE(4, 2, 3), -2, 2);
    add_input(&b, 1, SHAPE(2), 0.5, 2);
    add_input(&b, 1, SHAPE(2), -1, 1);
    b.lib = lib_bn_train, b.host = host_bn_train;
    gc_check("batchnorm training", &b, 5e-3, 5e-4);
    b.lib = lib_bn_eval, b.host = host_bn_eval;
    gc_check("batchnorm eval", &b, RTOL, ATOL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_softmax_layernorm), TEST(test_matmul), TEST(test_conv_pool),
        TEST(test_pools),             TEST(test_losses_and_norms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
