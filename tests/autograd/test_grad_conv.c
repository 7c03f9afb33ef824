/* test_grad_conv.c - tc_conv_nd (1-d and 3-d; 2-d is tc_conv2d's, in
 * test_grad_nn.c) and tc_conv_transpose_nd (1-d, 2-d, 3-d): forward values
 * against direct host loops in double (a conv as the sum over its window, a
 * transposed conv as each input element scattered through the kernel), and
 * the gradients of x, w and bias against central finite differences of the
 * same loops (grad_check.h), with stride, asymmetric and cropping padding,
 * dilation, groups and output_padding; then the argument errors. Tolerance:
 * rtol 2e-3, atol 2e-4 (test_grad_nn.c's). */
#include "grad_check.h"

#define RTOL 2e-3
#define ATOL 2e-4
#define MAXND 3

typedef struct {
    int nd;                                /* spatial axes, 1..3 */
    bool is_transpose;                     /* tc_conv_transpose_nd, else tc_conv_nd */
    bool has_bias;                         /* input 2 is the bias */
    int64_t n, cin, cout, groups;          /* batch, channels, groups */
    int64_t in[MAXND], k[MAXND];           /* spatial input and kernel sizes */
    int64_t stride[MAXND], dil[MAXND];     /* per axis */
    int64_t pad[2 * MAXND];                /* conv: before, after; transpose: [j] per axis */
    int64_t out_pad[MAXND];                /* transpose only */
} conv_case;

/* output size along axis j */
static int64_t out_len(const conv_case *c, int j) {
    if (c->is_transpose)
        return (c->in[j] - 1) * c->stride[j] - 2 * c->pad[j] + c->dil[j] * (c->k[j] - 1) +
               c->out_pad[j] + 1;
    return (c->in[j] + c->pad[2 * j] + c->pad[2 * j + 1] - c->dil[j] * (c->k[j] - 1) - 1) /
               c->stride[j] + 1;
}

static int64_t prod(int n, const int64_t *v) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

/* flat index f of a row-major shape[0..n-1] split into idx */
static void unflat(int64_t f, int n, const int64_t *shape, int64_t *idx) {
    for (int i = n - 1; i >= 0; i--) idx[i] = f % shape[i], f /= shape[i];
}

/* the host forward in double; returns the output's numel */
static int64_t host_conv(const double *const *x, double *out, const void *arg) {
    const conv_case *c = arg;
    int nd = c->nd;
    int64_t o[MAXND], on, sp = prod(nd, c->in), kn = prod(nd, c->k);
    for (int j = 0; j < nd; j++) o[j] = out_len(c, j);
    on = prod(nd, o);
    int64_t total = c->n * c->cout * on;
    const double *xs = x[0], *w = x[1], *b = c->has_bias ? x[2] : NULL;
    for (int64_t i = 0; i < total; i++) out[i] = b ? b[(i / on) % c->cout] : 0;
    int64_t cpg = c->cin / c->groups, opg = c->cout / c->groups;
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t ci = 0; ci < c->cin; ci++)
            for (int64_t s = 0; s < sp; s++)
                for (int64_t kk = 0; kk < kn; kk++)
                    for (int64_t q = 0; q < opg; q++) {
                        int64_t si[MAXND], ki[MAXND], pos = 0, g = ci / cpg, co = g * opg + q;
                        unflat(s, nd, c->in, si);
                        unflat(kk, nd, c->k, ki);
                        bool inside = true;
                        for (int j = 0; j < nd && inside; j++) {
                            int64_t y;
                            if (c->is_transpose) { /* x[si] lands at si*s - p + k*d */
                                y = si[j] * c->stride[j] - c->pad[j] + ki[j] * c->dil[j];
                            } else { /* out[y] reads x at y*s + k*d - before */
                                int64_t t = si[j] + c->pad[2 * j] - ki[j] * c->dil[j];
                                y = t % c->stride[j] == 0 ? t / c->stride[j] : -1;
                            }
                            inside = y >= 0 && y < o[j];
                            pos = pos * o[j] + y;
                        }
                        if (!inside) continue;
                        double wv = c->is_transpose ? w[(ci * opg + q) * kn + kk]
                                                    : w[(co * cpg + ci % cpg) * kn + kk];
                        out[(n * c->cout + co) * on + pos] += xs[(n * c->cin + ci) * sp + s] * wv;
                    }
    return total;
}

static tc_tensor *lib_conv(tc_tensor *const *x, const void *arg) {
    const conv_case *c = arg;
    tc_tensor *b = c->has_bias ? x[2] : NULL;
    if (c->is_transpose)
        return tc_conv_transpose_nd(x[0], x[1], b, c->nd, c->stride, c->pad, c->out_pad, c->dil,
                                    c->groups);
    return tc_conv_nd(x[0], x[1], b, c->nd, c->stride, c->pad, c->dil, c->groups);
}

/* the gc_case of c: x, w, and the bias when it has one */
static gc_case make_case(const conv_case *c) {
    int64_t xs[8] = {c->n, c->cin}, ws[8];
    ws[0] = c->is_transpose ? c->cin : c->cout;
    ws[1] = c->is_transpose ? c->cout / c->groups : c->cin / c->groups;
    for (int j = 0; j < c->nd; j++) xs[2 + j] = c->in[j], ws[2 + j] = c->k[j];
    gc_case g = one_input(2 + c->nd, xs, -1, 1);
    add_input(&g, 2 + c->nd, ws, -1, 1);
    if (c->has_bias) add_input(&g, 1, SHAPE(c->cout), -1, 1);
    g.lib = lib_conv, g.host = host_conv, g.arg = c;
    return g;
}

/* the forward's values and shape against host_conv, then the gradients */
static void check(const char *what, const conv_case *c) {
    gc_case g = make_case(c);
    tc_tensor *x[GC_MAXIN];
    double xd_store[GC_MAXIN][GC_MAXN];
    const double *xd[GC_MAXIN];
    float xf[GC_MAXN];
    uint64_t rng = gc_hash(what) ^ 0x5eed;
    for (int i = 0; i < g.n_in; i++) {
        int64_t n = gc_numel(g.ndim[i], g.shape[i]);
        assert_true(n <= GC_MAXN);
        for (int64_t j = 0; j < n; j++) xd_store[i][j] = xf[j] = (float)(2 * gc_uniform(&rng) - 1);
        xd[i] = xd_store[i];
        x[i] = f32(g.ndim[i], g.shape[i], xf);
    }
    double want[GC_MAXN];
    int64_t n_out = host_conv(xd, want, c);
    tc_tensor *y = lib_conv(x, c);
    if (!y) fprintf(stderr, "%s: %s\n", what, tc_last_error());
    assert_non_null(y);
    assert_int_equal(tc_ndim(y), 2 + c->nd);
    assert_int_equal(tc_shape(y)[1], c->cout);
    for (int j = 0; j < c->nd; j++) assert_int_equal(tc_shape(y)[2 + j], out_len(c, j));
    float wf[GC_MAXN];
    assert_true(n_out <= GC_MAXN);
    for (int64_t i = 0; i < n_out; i++) wf[i] = (float)want[i];
    char label[160];
    snprintf(label, sizeof label, "%s: forward", what);
    expect_f32(y, wf, n_out, 1e-5, 1e-5, label);
    for (int i = 0; i < g.n_in; i++) tc_release(x[i]);
    gc_check(what, &g, RTOL, ATOL);
}

static void test_conv1d(void **state) {
    (void)state;
    /* stride 2, padding (1,2), dilation 2, groups 2, bias */
    conv_case a = {.nd = 1, .has_bias = true, .n = 2, .cin = 4, .cout = 2, .groups = 2,
                   .in = {9}, .k = {3}, .stride = {2}, .dil = {2}, .pad = {1, 2}};
    check("conv_nd 1-d stride 2 pad (1,2) dilation 2 groups 2 bias", &a);
    /* stride 1, symmetric padding < k: nnops.c's own conv rule, nd 1 */
    conv_case b = {.nd = 1, .has_bias = true, .n = 2, .cin = 3, .cout = 2, .groups = 1,
                   .in = {7}, .k = {3}, .stride = {1}, .dil = {1}, .pad = {1, 1}};
    check("conv_nd 1-d stride 1 pad 1 (own rule)", &b);
    /* negative padding crops: (-1, 2), stride 3, no bias */
    conv_case d = {.nd = 1, .n = 1, .cin = 2, .cout = 3, .groups = 1, .in = {10}, .k = {2},
                   .stride = {3}, .dil = {1}, .pad = {-1, 2}};
    check("conv_nd 1-d pad (-1,2) stride 3", &d);
    /* the own rule with a stride: its dx a transposed conv of dy, its dw a
     * conv over the batch with dy dilated by the stride; e = (in + 2p - k) %
     * stride is what the last window leaves unread (1 and 0 here) */
    conv_case e = {.nd = 1, .has_bias = true, .n = 2, .cin = 3, .cout = 2, .groups = 1,
                   .in = {8}, .k = {3}, .stride = {2}, .dil = {1}, .pad = {1, 1}};
    check("conv_nd 1-d stride 2 pad 1 in 8 (own rule)", &e);
    conv_case f = {.nd = 1, .n = 2, .cin = 3, .cout = 2, .groups = 1, .in = {9}, .k = {3},
                   .stride = {2}, .dil = {1}, .pad = {1, 1}};
    check("conv_nd 1-d stride 2 pad 1 in 9 (own rule)", &f);
    /* a kernel shorter than the stride skips inputs (their dx is 0); 1x1
     * stride 2 unpadded: e = 1 crops dw's input end */
    conv_case h = {.nd = 1, .n = 1, .cin = 2, .cout = 3, .groups = 1, .in = {10}, .k = {2},
                   .stride = {3}, .dil = {1}, .pad = {1, 1}};
    check("conv_nd 1-d stride 3 k 2 pad 1 (own rule)", &h);
    conv_case i = {.nd = 1, .has_bias = true, .n = 2, .cin = 3, .cout = 4, .groups = 1,
                   .in = {8}, .k = {1}, .stride = {2}, .dil = {1}, .pad = {0, 0}};
    check("conv_nd 1-d 1x1 stride 2 (own rule)", &i);
}

static void test_conv3d(void **state) {
    (void)state;
    /* stride (1,2,1), padding (1,0 | 0,1 | 1,1), dilation (1,1,2), bias */
    conv_case a = {.nd = 3, .has_bias = true, .n = 1, .cin = 2, .cout = 2, .groups = 1,
                   .in = {4, 5, 5}, .k = {2, 2, 2}, .stride = {1, 2, 1}, .dil = {1, 1, 2},
                   .pad = {1, 0, 0, 1, 1, 1}};
    check("conv_nd 3-d stride (1,2,1) dilation (1,1,2) bias", &a);
    /* stride 1, padding 1: the own rule in 3-d; groups 2 goes through the ops */
    conv_case b = {.nd = 3, .n = 1, .cin = 2, .cout = 2, .groups = 1, .in = {3, 4, 3},
                   .k = {2, 3, 2}, .stride = {1, 1, 1}, .dil = {1, 1, 1},
                   .pad = {1, 1, 1, 1, 0, 0}};
    check("conv_nd 3-d stride 1 pad (1,1,0) (own rule)", &b);
    conv_case c = {.nd = 3, .has_bias = true, .n = 1, .cin = 4, .cout = 2, .groups = 2,
                   .in = {3, 3, 4}, .k = {2, 2, 2}, .stride = {1, 1, 2}, .dil = {1, 1, 1},
                   .pad = {0, 0, 0, 0, 0, 1}};
    check("conv_nd 3-d groups 2 stride (1,1,2)", &c);
    conv_case d = {.nd = 3, .has_bias = true, .n = 2, .cin = 2, .cout = 3, .groups = 1,
                   .in = {5, 4, 6}, .k = {3, 2, 2}, .stride = {2, 1, 3}, .dil = {1, 1, 1},
                   .pad = {1, 1, 0, 0, 1, 1}};
    check("conv_nd 3-d stride (2,1,3) pad (1,0,1) (own rule)", &d);
}

static void test_conv_transpose(void **state) {
    (void)state;
    /* 1-d: stride 2, padding 1, output_padding 1, groups 2, bias */
    conv_case a = {.nd = 1, .is_transpose = true, .has_bias = true, .n = 2, .cin = 4, .cout = 2,
                   .groups = 2, .in = {5}, .k = {3}, .stride = {2}, .dil = {1}, .pad = {1},
                   .out_pad = {1}};
    check("conv_transpose 1-d stride 2 pad 1 output_padding 1 groups 2 bias", &a);
    /* 1-d: padding larger than d*(k-1) (the equivalent conv crops), stride 3 */
    conv_case b = {.nd = 1, .is_transpose = true, .n = 1, .cin = 2, .cout = 3, .groups = 1,
                   .in = {4}, .k = {2}, .stride = {3}, .dil = {1}, .pad = {2}, .out_pad = {2}};
    check("conv_transpose 1-d pad 2 > d*(k-1) stride 3 output_padding 2", &b);
    /* 2-d: stride (2,1), dilation (1,2), padding (0,1), output_padding (1,1) (< dilation) */
    conv_case c = {.nd = 2, .is_transpose = true, .has_bias = true, .n = 1, .cin = 2, .cout = 3,
                   .groups = 1, .in = {3, 4}, .k = {2, 3}, .stride = {2, 1}, .dil = {1, 2},
                   .pad = {0, 1}, .out_pad = {1, 1}};
    check("conv_transpose 2-d stride (2,1) dilation (1,2) output_padding (1,1)", &c);
    /* 3-d: stride 2 on two axes, padding (1,0,0), no bias */
    conv_case d = {.nd = 3, .is_transpose = true, .n = 1, .cin = 2, .cout = 2, .groups = 1,
                   .in = {2, 3, 2}, .k = {2, 2, 3}, .stride = {2, 1, 2}, .dil = {1, 1, 1},
                   .pad = {1, 0, 0}, .out_pad = {0, 0, 1}};
    check("conv_transpose 3-d stride (2,1,2) pad (1,0,0) output_padding (0,0,1)", &d);
}

static void test_errors(void **state) {
    (void)state;
    float z[96] = {0};
    tc_tensor *x = f32(3, SHAPE(1, 4, 6), z), *w = f32(3, SHAPE(2, 4, 3), z);
    tc_tensor *x3 = f32(5, SHAPE(1, 2, 2, 3, 4), z), *b3 = f32(1, SHAPE(3), z);
    int64_t one[3] = {1, 1, 1}, zero[6] = {0}, two[3] = {2, 2, 2};
    assert_null(tc_conv_nd(NULL, w, NULL, 1, one, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_nd:");
    assert_null(tc_conv_nd(x, w, NULL, 0, one, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_nd: nd 0 must be 1..4");
    assert_null(tc_conv_nd(x, w, NULL, 5, NULL, NULL, NULL, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_nd: nd 5 must be 1..4");
    int64_t st0[1] = {0}, huge[1] = {INT64_MAX};
    assert_null(tc_conv_nd(x, w, NULL, 1, huge, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_nd: stride, padding, dilation and groups must be");
    assert_null(tc_conv_transpose_nd(x, w, NULL, 1, one, zero, zero, huge, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_transpose_nd: stride, padding, dilation and groups");
    assert_null(tc_conv_nd(x, w, NULL, 1, one, zero, one, INT64_MAX));
    assert_tc_error(TC_ERR_INVALID, "must be within +-2147483647");
    assert_null(tc_conv_nd(x, w, NULL, 1, st0, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_nd: stride (0,) and dilation (1,) must be >= 1");
    assert_null(tc_conv_nd(x, w, NULL, 1, one, zero, st0, 1));
    assert_tc_error(TC_ERR_INVALID, "dilation (0,)");
    assert_null(tc_conv_nd(x, w, NULL, 2, one, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_nd: x (1,4,6) must be (N,Cin,2 spatial dims)");
    assert_null(tc_conv_nd(x, w, NULL, 1, one, zero, one, 3));
    assert_tc_error(TC_ERR_SHAPE, "do not fit groups 3");
    assert_null(tc_conv_nd(x, w, NULL, 1, one, zero, one, 0));
    assert_tc_error(TC_ERR_INVALID, "groups 0 >= 1");
    int64_t dil3[1] = {3}, crop[2] = {-2, 0};
    assert_null(tc_conv_nd(x, w, NULL, 1, one, zero, dil3, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_nd: kernel (2,4,3) (dilation (3,)) does not fit input "
                                  "(1,4,6) with padding (0,0)");
    tc_tensor *ok = tc_conv_nd(x, w, NULL, 1, one, crop, one, 1); /* 6 - 2 = 4 >= 3: fits */
    check_meta(ok, TC_FLOAT32, 3, SHAPE(1, 2, 2));
    tc_release(ok);
    assert_null(tc_conv_nd(x, w, b3, 1, one, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_nd: bias (3,) must be (2)");

    /* transposed: w is (Cin, Cout/groups, k) */
    tc_tensor *wt = f32(3, SHAPE(4, 3, 3), z), *wt3 = f32(5, SHAPE(2, 1, 2, 2, 2), z);
    assert_null(tc_conv_transpose_nd(x, NULL, NULL, 1, one, zero, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_transpose_nd:");
    assert_null(tc_conv_transpose_nd(x, wt, NULL, 4 + 1, NULL, NULL, NULL, NULL, 1));
    assert_tc_error(TC_ERR_INVALID, "tc_conv_transpose_nd: nd 5 must be 1..4");
    int64_t op2[3] = {2, 2, 2}, neg[1] = {-1};
    /* output_padding 2 >= stride 2 and >= dilation 1 */
    assert_null(tc_conv_transpose_nd(x, wt, NULL, 1, two, zero, op2, one, 1));
    assert_tc_error(TC_ERR_INVALID, "output_padding (2,) >= 0 and smaller than stride or dilation");
    /* output_padding 2 < dilation 3: fine */
    ok = tc_conv_transpose_nd(x, wt, NULL, 1, two, zero, op2, dil3, 1);
    check_meta(ok, TC_FLOAT32, 3, SHAPE(1, 3, 19)); /* 5*2 + 3*2 + 2 + 1 */
    tc_release(ok);
    assert_null(tc_conv_transpose_nd(x, wt, NULL, 1, one, neg, zero, one, 1));
    assert_tc_error(TC_ERR_INVALID, "padding (-1,) >= 0");
    assert_null(tc_conv_transpose_nd(x, wt, NULL, 1, one, zero, zero, one, 3));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_transpose_nd: x (1,4,6) and w (4,3,3) do not fit "
                                  "groups 3");
    assert_null(tc_conv_transpose_nd(x, w, NULL, 1, one, zero, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "do not fit groups 1");
    int64_t big[1] = {5};
    assert_null(tc_conv_transpose_nd(x, wt, NULL, 1, one, big, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "gives output size -2 along spatial axis 0");
    assert_null(tc_conv_transpose_nd(x3, wt3, NULL, 3, one, zero, zero, one, 4));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_transpose_nd: x (1,2,2,3,4) and w (2,1,2,2,2) do not "
                                  "fit groups 4");
    assert_null(tc_conv_transpose_nd(x3, wt3, b3, 3, one, zero, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "tc_conv_transpose_nd: bias (3,) must be (1)");
    assert_null(tc_conv_transpose_nd(x3, wt, NULL, 3, one, zero, zero, one, 1));
    assert_tc_error(TC_ERR_SHAPE, "must be (N,Cin,3 spatial dims)");
    tc_release(x), tc_release(w), tc_release(x3), tc_release(b3), tc_release(wt), tc_release(wt3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_conv1d),
        TEST(test_conv3d),
        TEST(test_conv_transpose),
        TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
