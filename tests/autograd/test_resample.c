/* test_resample.c - tc_interpolate: values and gradients against a host
 * resampler in double (finite differences of the same loss), exact kernel
 * counts (an indexed load per resized axis; whole-number nearest factors
 * are views and fuse into a conv), and argument errors naming the call.
 * The host computes the source places in double; the sizes are chosen so
 * that float and double agree on every floor. */
#include "grad_check.h"

typedef struct {
    int n;            /* resized trailing axes */
    int64_t size[3];  /* their new sizes */
    tc_interp_mode mode;
    bool align;
} interp_arg;

/* resamples x (shape sh, nd dims, row-major) along axis ax to out; returns
 * the new numel and updates sh */
static int64_t resample_axis(const double *x, double *y, int nd, int64_t *sh, int ax, int64_t out,
                             const interp_arg *a) {
    int64_t in = sh[ax], inner = 1, outer = 1;
    for (int i = ax + 1; i < nd; i++) inner *= sh[i];
    for (int i = 0; i < ax; i++) outer *= sh[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t d = 0; d < out; d++)
            for (int64_t k = 0; k < inner; k++) {
                const double *row = x + o * in * inner + k;
                double v, scale = (double)in / (double)out;
                if (a->mode == TC_INTERP_LINEAR) {
                    double src = a->align ? (out > 1 ? d * (double)(in - 1) / (double)(out - 1) : 0)
                                          : fmax(scale * (d + 0.5) - 0.5, 0);
                    int64_t lo = (int64_t)src < in - 1 ? (int64_t)src : in - 1;
                    int64_t hi = lo < in - 1 ? lo + 1 : lo;
                    double l = lo < in - 1 ? src - (double)lo : 0;
                    v = row[lo * inner] * (1 - l) + row[hi * inner] * l;
                } else {
                    double at = a->mode == TC_INTERP_NEAREST ? d * scale : (d + 0.5) * scale;
                    int64_t i = (int64_t)floor(at);
                    v = row[(i < in - 1 ? i : in - 1) * inner];
                }
                y[(o * out + d) * inner + k] = v;
            }
    sh[ax] = out;
    return outer * out * inner;
}

static const gc_case *current; /* the case host() runs for (its input shape) */

static int64_t host(const double *const *x, double *out, const void *arg) {
    const interp_arg *a = arg;
    int nd = current->ndim[0];
    int64_t sh[8], n = gc_numel(nd, current->shape[0]);
    double buf[2][GC_MAXN];
    memcpy(sh, current->shape[0], sizeof sh);
    memcpy(buf[0], x[0], sizeof(double) * (size_t)n);
    int at = 0;
    for (int j = a->n - 1; j >= 0; j--) {
        int ax = nd - a->n + j;
        if (a->size[j] == sh[ax]) continue;
        n = resample_axis(buf[at], buf[1 - at], nd, sh, ax, a->size[j], a);
        at = 1 - at;
    }
    memcpy(out, buf[at], sizeof(double) * (size_t)n);
    return n;
}

static tc_tensor *lib(tc_tensor *const *x, const void *arg) {
    const interp_arg *a = arg;
    return tc_interpolate(x[0], a->n, a->size, a->mode, a->align);
}

static void check(const char *what, int nd, const int64_t *shape, interp_arg a) {
    gc_case c = one_input(nd, shape, -1, 1);
    c.lib = lib, c.host = host, c.arg = &a;
    current = &c;
    gc_check(what, &c, 1e-3, 1e-4);
}

static void test_gradients(void **state) {
    (void)state;
    check("linear 5 -> 8", 3, SHAPE(2, 3, 5), (interp_arg){1, {8}, TC_INTERP_LINEAR, false});
    check("linear 6 -> 4", 3, SHAPE(1, 2, 6), (interp_arg){1, {4}, TC_INTERP_LINEAR, false});
    check("bilinear aligned", 4, SHAPE(1, 2, 4, 5),
          (interp_arg){2, {7, 3}, TC_INTERP_LINEAR, true});
    check("trilinear", 5, SHAPE(1, 1, 2, 3, 4),
          (interp_arg){3, {3, 5, 2}, TC_INTERP_LINEAR, false});
    check("nearest 5x5 -> 7x3", 4, SHAPE(1, 2, 5, 5),
          (interp_arg){2, {7, 3}, TC_INTERP_NEAREST, false});
    check("nearest-exact 5 -> 7", 3, SHAPE(1, 2, 5),
          (interp_arg){1, {7}, TC_INTERP_NEAREST_EXACT, false});
    check("nearest x2 (a view)", 4, SHAPE(1, 2, 3, 4),
          (interp_arg){2, {6, 8}, TC_INTERP_NEAREST, false});
    check("nearest /2 (a view)", 3, SHAPE(1, 2, 8), (interp_arg){1, {4}, TC_INTERP_NEAREST, false});
}

/* kernels to realize t */
static int kernels(tc_tensor *t) {
    int n = tc_schedule_kernel_count(&t, 1);
    tc_release(t);
    return n;
}

static void test_kernel_counts(void **state) {
    (void)state;
    float v[2 * 3 * 8 * 8] = {0};
    tc_tensor *x = f32(4, SHAPE(2, 3, 8, 8), v);
    tc_tensor *w = tc_zeros(4, SHAPE(4, 3, 3, 3), TC_FLOAT32, NULL);
    assert_int_equal(tc_realize(&w, 1), TC_OK);
    /* one axis: its indexed loads and the weights' multiply-add, one kernel */
    assert_int_equal(kernels(tc_interpolate(x, 1, SHAPE(13), TC_INTERP_LINEAR, false)), 1);
    tc_tensor *y = tc_interpolate(x, 1, SHAPE(13), TC_INTERP_LINEAR, false);
    assert_int_equal(kernels(tc_relu(y)), 1); /* what reads it joins */
    tc_release(y);
    /* two axes: the second axis's loads read the first's buffer */
    assert_int_equal(kernels(tc_interpolate(x, 2, SHAPE(16, 13), TC_INTERP_LINEAR, false)), 2);
    assert_int_equal(kernels(tc_interpolate(x, 2, SHAPE(5, 13), TC_INTERP_NEAREST, false)), 2);
    /* whole-number nearest factors are views: no kernel of their own */
    y = tc_interpolate(x, 2, SHAPE(16, 4), TC_INTERP_NEAREST, false);
    assert_int_equal(kernels(tc_conv2d(y, w, NULL, 1, 0)), 1);
    tc_release(y);
    tc_release(x), tc_release(w);
    /* into a conv (no padding: a padded conv copies its input first): the
     * last axis's indexed loads and lerp fuse into its windows (each reads
     * x twice, no resized buffer); an earlier axis's
     * result is a kernel of its own (a gather reads its source anywhere) */
    x = tc_test_randn(4, SHAPE(2, 3, 8, 8), 7, -1, 1);
    w = tc_test_randn(4, SHAPE(4, 3, 3, 3), 8, -1, 1);
    const struct {
        int n;
        int64_t size[2];
        tc_interp_mode mode;
        int kernels;
        const char *what;
    } into_conv[] = {{1, {13}, TC_INTERP_LINEAR, 1, "linear (13) into a conv"},
                     {1, {13}, TC_INTERP_NEAREST, 1, "nearest (13) into a conv"},
                     {2, {13, 13}, TC_INTERP_LINEAR, 2, "bilinear (13, 13) into a conv"},
                     {2, {6, 6}, TC_INTERP_NEAREST, 2, "nearest (6, 6) into a conv"}};
    for (size_t i = 0; i < sizeof into_conv / sizeof *into_conv; i++) {
        y = tc_interpolate(x, into_conv[i].n, into_conv[i].size, into_conv[i].mode, false);
        tc_tensor *c = tc_conv2d(y, w, NULL, 1, 0);
        tc_check_schedule(c, into_conv[i].kernels, 1e-5, 1e-6, into_conv[i].what);
        tc_release(c), tc_release(y);
    }
    tc_release(x), tc_release(w);
}

static void test_errors(void **state) {
    (void)state;
    float v[12] = {0};
    tc_tensor *x = f32(3, SHAPE(1, 3, 4), v);
    tc_tensor *i = tc_zeros(2, SHAPE(3, 4), TC_INT32, NULL);
    assert_null(tc_interpolate(x, 0, SHAPE(2), TC_INTERP_LINEAR, false));
    assert_tc_error(TC_ERR_SHAPE, "tc_interpolate: 0 sizes for x (1,3,4) (1 to 3: the last axes)");
    assert_null(tc_interpolate(x, 1, NULL, TC_INTERP_LINEAR, false));
    assert_tc_error(TC_ERR_INVALID, "tc_interpolate: size is NULL");
    assert_null(tc_interpolate(x, 1, SHAPE(2), TC_INTERP_COUNT, false));
    assert_tc_error(TC_ERR_INVALID, "tc_interpolate: unknown mode 3");
    assert_null(tc_interpolate(x, 1, SHAPE(2), TC_INTERP_NEAREST, true));
    assert_tc_error(TC_ERR_INVALID, "tc_interpolate: align_corners applies to linear mode only");
    assert_null(tc_interpolate(i, 1, SHAPE(2), TC_INTERP_LINEAR, false));
    assert_tc_error(TC_ERR_DTYPE, "tc_interpolate: linear mode needs a float x, got int32");
    assert_null(tc_interpolate(x, 2, SHAPE(0, 4), TC_INTERP_NEAREST, false));
    assert_tc_error(TC_ERR_SHAPE, "tc_interpolate: size[0] = 0 for axis 1 of x (1,3,4) (both "
                                  "must be 1 to 2^31-1)");
    /* nearest reads integers too */
    tc_tensor *r = tc_interpolate(i, 1, SHAPE(8), TC_INTERP_NEAREST, false);
    assert_non_null(r);
    assert_int_equal(tc_shape(r)[1], 8);
    tc_release(r), tc_release(i), tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_gradients),
        TEST(test_kernel_counts),
        TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
