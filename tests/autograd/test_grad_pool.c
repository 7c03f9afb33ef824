/* test_grad_pool.c - tc_max_pool_nd and tc_avg_pool_nd over 1, 2 and 3
 * trailing axes with non-square kernels, strides and dilation: values and
 * gradients against a host pool in double (finite differences of the same
 * loss; inputs drawn without ties, so the max's gradient is one-hot), one
 * kernel each, and argument errors naming the call. */
#include "grad_check.h"

typedef struct {
    int nd;
    int64_t k[3], st[3], d[3];
    bool is_max;
} pool_arg;

static const gc_case *current; /* the case host() runs for */

/* the output shape of a pool over the last a->nd dims of shape (nd dims) */
static int64_t out_shape(const pool_arg *a, int nd, const int64_t *in, int64_t *out) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) {
        int j = i - (nd - a->nd);
        out[i] = j < 0 ? in[i] : (in[i] - a->d[j] * (a->k[j] - 1) - 1) / a->st[j] + 1;
        n *= out[i];
    }
    return n;
}

static int64_t host(const double *const *x, double *out, const void *arg) {
    const pool_arg *a = arg;
    int nd = current->ndim[0], pre = nd - a->nd;
    const int64_t *in = current->shape[0];
    int64_t osh[8], n = out_shape(a, nd, in, osh), o[8] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t win = 1, w[3] = {0};
        for (int j = 0; j < a->nd; j++) win *= a->k[j];
        double acc = a->is_max ? -INFINITY : 0;
        for (int64_t t = 0; t < win; t++) {
            int64_t flat = 0;
            for (int i = 0; i < nd; i++) {
                int j = i - pre;
                int64_t at = j < 0 ? o[i] : o[i] * a->st[j] + w[j] * a->d[j];
                flat = flat * in[i] + at;
            }
            acc = a->is_max ? fmax(acc, x[0][flat]) : acc + x[0][flat];
            for (int j = a->nd - 1; j >= 0 && ++w[j] == a->k[j]; j--) w[j] = 0;
        }
        out[e] = a->is_max ? acc : acc / (double)win;
        for (int i = nd - 1; i >= 0 && ++o[i] == osh[i]; i--) o[i] = 0;
    }
    return n;
}

static tc_tensor *lib(tc_tensor *const *x, const void *arg) {
    const pool_arg *a = arg;
    return a->is_max ? tc_max_pool_nd(x[0], a->nd, a->k, a->st, a->d)
                     : tc_avg_pool_nd(x[0], a->nd, a->k, a->st, a->d);
}

static void check(const char *what, int nd, const int64_t *shape, pool_arg a) {
    gc_case c = one_input(nd, shape, -1, 1);
    c.lib = lib, c.host = host, c.arg = &a;
    current = &c;
    gc_check(what, &c, 1e-3, 1e-4);
    /* one kernel, the shape the host computes */
    tc_tensor *x = tc_zeros(nd, shape, TC_FLOAT32, NULL), *y = lib(&x, &a);
    int64_t want[8];
    out_shape(&a, nd, shape, want);
    check_meta(y, TC_FLOAT32, nd, want);
    assert_int_equal(tc_schedule_kernel_count(&y, 1), 1);
    tc_release(y), tc_release(x);
}

static void test_gradients(void **state) {
    (void)state;
    check("max 1-d k3 s2", 3, SHAPE(2, 2, 9), (pool_arg){1, {3}, {2}, {1}, true});
    check("max 1-d dilated", 2, SHAPE(3, 11), (pool_arg){1, {3}, {1}, {2}, true});
    check("max 2-d (2,3) s(1,2) d(2,1)", 4, SHAPE(1, 2, 7, 8),
          (pool_arg){2, {2, 3}, {1, 2}, {2, 1}, true});
    check("avg 2-d (3,2) s(2,1)", 3, SHAPE(2, 6, 5), (pool_arg){2, {3, 2}, {2, 1}, {1, 1}, false});
    check("max 3-d", 4, SHAPE(1, 4, 5, 4), (pool_arg){3, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, true});
    check("avg 3-d dilated", 4, SHAPE(1, 5, 4, 6), (pool_arg){3, {2, 2, 3}, {1, 2, 1}, {2, 1, 2}, false});
}

static void test_defaults_and_errors(void **state) {
    (void)state;
    float v[2 * 6] = {1, 5, 2, 4, 3, 0, -1, -5, -2, -4, -3, 9};
    tc_tensor *x = f32(2, SHAPE(2, 6), v);
    /* stride NULL: the kernel; dilation NULL: 1 */
    float want[6] = {5, 4, 3, -1, -2, 9};
    expect_f32(tc_max_pool_nd(x, 1, SHAPE(2), NULL, NULL), want, 6, 0, 0, "defaults");
    assert_null(tc_max_pool_nd(x, 3, SHAPE(2, 2, 2), NULL, NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_max_pool_nd: nd 3 for x (2,6) (1 to its rank, 2, with rank "
                                  "+ 2*nd at most 16)");
    /* the windows' view of 6 pooled axes of a rank-7 x would have 19 dims */
    tc_tensor *deep = tc_zeros(7, SHAPE(1, 2, 2, 2, 2, 2, 2), TC_FLOAT32, NULL);
    assert_null(tc_max_pool_nd(deep, 6, SHAPE(2, 2, 2, 2, 2, 2), SHAPE(1, 1, 1, 1, 1, 1), NULL));
    assert_tc_error(TC_ERR_SHAPE, "tc_max_pool_nd: nd 6 for x (1,2,2,2,2,2,2)");
    tc_release(deep);
    assert_null(tc_avg_pool_nd(x, 1, NULL, NULL, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_avg_pool_nd: kernel is NULL");
    assert_null(tc_max_pool_nd(x, 1, SHAPE(2), SHAPE(0), NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_max_pool_nd: kernel (2,), stride (0,) and dilation (1,) "
                                    "must be 1 to 2^31-1");
    assert_null(tc_max_pool_nd(x, 1, SHAPE(4), NULL, SHAPE(2)));
    assert_tc_error(TC_ERR_SHAPE, "tc_max_pool_nd: kernel (4,) (dilation (2,)) does not fit the "
                                  "last 1 dims of (2,6)");
    assert_null(tc_max_pool_nd(NULL, 1, SHAPE(2), NULL, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_max_pool_nd: tensor x is NULL");
    tc_release(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_gradients),
        TEST(test_defaults_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
