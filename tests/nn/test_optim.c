/* test_optim.c - SGD (plain, momentum, nesterov with weight decay,
 * dampening), Adam and AdamW against PyTorch: a 2-layer MLP (12 -> 10 ->
 * relu -> 4, batch 6, cross-entropy) trained 3 steps on one batch from the
 * weights in tests/nn/fixtures (made by gen_fixtures.py with torch.optim);
 * the parameters must match torch's after step 1 and step 3 to 1e-5. Also
 * checks that a step is one tc_realize whose kernels are counted, that
 * parameters without a gradient are left alone, lr changes, and argument
 * errors. Public API only. */
#include <math.h>

#include "nn_helpers.h"

enum { IN = 12, HID = 10, OUT = 4, BATCH = 6, NPARAM = HID * IN + HID + OUT * HID + OUT };
static const int64_t pshape[4][2] = {{HID, IN}, {HID, 0}, {OUT, HID}, {OUT, 0}};
static const int pndim[4] = {2, 1, 2, 1};

/* reads fixtures/<name> (next to this source file) into a malloc'ed buffer of nbytes */
static void *fixture(const char *name, size_t nbytes) {
    char path[1024];
    const char *src = __FILE__, *slash = strrchr(src, '/');
    snprintf(path, sizeof path, "%.*sfixtures/%s", slash ? (int)(slash - src + 1) : 0, src, name);
    FILE *f = fopen(path, "rb");
    if (!f) fprintf(stderr, "missing fixture %s (run tests/nn/gen_fixtures.py)\n", path);
    assert_non_null(f);
    void *p = malloc(nbytes);
    assert_int_equal(fread(p, 1, nbytes, f), nbytes);
    fclose(f);
    return p;
}

typedef struct {
    tc_tensor *p[4]; /* w1 b1 w2 b2 */
    tc_tensor *x, *y;
} mlp;

static void mlp_init(mlp *m) {
    float *init = fixture("mlp_init.f32", sizeof(float) * NPARAM);
    float *x = fixture("mlp_x.f32", sizeof(float) * BATCH * IN);
    int32_t *y = fixture("mlp_y.i32", sizeof(int32_t) * BATCH);
    const float *at = init;
    for (int i = 0; i < 4; i++) {
        m->p[i] = tc_from_data(at, TC_FLOAT32, pndim[i], pshape[i], NULL);
        CHECK_T(m->p[i]);
        at += tc_numel(m->p[i]);
    }
    m->x = tc_from_data(x, TC_FLOAT32, 2, SHAPE(BATCH, IN), NULL);
    m->y = tc_from_data(y, TC_INT32, 1, SHAPE(BATCH), NULL);
    CHECK_T(m->x);
    CHECK_T(m->y);
    free(init), free(x), free(y);
}

static void mlp_free(mlp *m) {
    for (int i = 0; i < 4; i++) tc_release(m->p[i]);
    tc_release(m->x);
    tc_release(m->y);
}

/* the loss of the MLP on its batch (lazy) */
static tc_tensor *mlp_loss(mlp *m) {
    tc_tensor *h = tc_linear(m->x, m->p[0], m->p[1]);
    tc_tensor *r = tc_relu(h);
    tc_tensor *logits = tc_linear(r, m->p[2], m->p[3]);
    tc_tensor *loss = tc_cross_entropy(logits, m->y);
    CHECK_T(loss);
    tc_release(h), tc_release(r), tc_release(logits);
    return loss;
}

/* zero_grad, forward, backward, step (the loss realized with it); kernels run */
static int64_t train_step(mlp *m, tc_optimizer *o) {
    CHECK_OK(tc_optimizer_zero_grad(o));
    tc_tensor *loss = mlp_loss(m);
    CHECK_OK(tc_backward(loss));
    tc_counters before, after;
    tc_get_counters(&before);
    CHECK_OK(tc_optimizer_step_with(o, &loss, 1));
    tc_get_counters(&after);
    assert_true(tc_is_realized(loss));
    tc_release(loss);
    return after.kernel_count - before.kernel_count;
}

/* the 4 parameters equal want[0..NPARAM-1] within 1e-5 */
static void expect_params(mlp *m, const float *want, const char *what) {
    float got[NPARAM];
    int64_t at = 0;
    for (int i = 0; i < 4; i++) {
        int64_t n = tc_numel(m->p[i]);
        CHECK_OK(tc_to_host(m->p[i], got + at, sizeof(float) * (size_t)n));
        at += n;
    }
    assert_true(tc_allclose_f32(got, want, NPARAM, 1e-5, 1e-5, what));
}

typedef tc_optimizer *(*make_fn)(tc_tensor **params, int n);

/* trains the fixture MLP 3 steps with make's optimizer; compares with mlp_<name>.f32 */
static void check_against_torch(const char *name, make_fn make) {
    char file[128], what[160];
    snprintf(file, sizeof file, "mlp_%s.f32", name);
    float *want = fixture(file, sizeof(float) * NPARAM * 2);
    mlp m;
    mlp_init(&m);
    tc_optimizer *o = make(m.p, 4);
    CHECK_T(o);
    for (int step = 1; step <= 3; step++) {
        int64_t kernels = train_step(&m, o);
        fprintf(stderr, "  %s step %d: %lld kernels\n", name, step, (long long)kernels);
        assert_true(kernels > 0);
        snprintf(what, sizeof what, "%s after step %d", name, step);
        if (step == 1) expect_params(&m, want, what);
        if (step == 3) expect_params(&m, want + NPARAM, what);
    }
    tc_optimizer_free(o);
    mlp_free(&m);
    free(want);
}

static tc_optimizer *make_adam(tc_tensor **p, int n) {
    return tc_adam(p, n, 0.01, 0.9, 0.999, 1e-8);
}
static tc_optimizer *make_adamw(tc_tensor **p, int n) {
    return tc_adamw(p, n, 0.01, 0.9, 0.999, 1e-8, 0.1);
}
static tc_optimizer *make_sgd_momentum(tc_tensor **p, int n) {
    return tc_sgd(p, n, 0.1, 0.9);
}
static tc_optimizer *make_sgd_plain(tc_tensor **p, int n) {
    return tc_sgd(p, n, 0.1, 0);
}
static tc_optimizer *make_sgd_nesterov_wd(tc_tensor **p, int n) {
    return tc_sgd_ex(p, n, 0.1, 0.9, 0, 0.01, true);
}
static tc_optimizer *make_sgd_dampening(tc_tensor **p, int n) {
    return tc_sgd_ex(p, n, 0.1, 0.9, 0.5, 0.01, false);
}

static void test_adam(void **state) {
    (void)state;
    check_against_torch("adam", make_adam);
}
static void test_sgd_momentum(void **state) {
    (void)state;
    check_against_torch("sgd_momentum", make_sgd_momentum);
}
static void test_adamw(void **state) {
    (void)state;
    check_against_torch("adamw", make_adamw);
}
static void test_sgd_variants(void **state) {
    (void)state;
    check_against_torch("sgd_plain", make_sgd_plain);
    check_against_torch("sgd_nesterov_wd", make_sgd_nesterov_wd);
    check_against_torch("sgd_dampening", make_sgd_dampening);
}

/* a parameter the loss does not use keeps its value; lr 0 freezes the rest */
static void test_unused_param_and_lr(void **state) {
    (void)state;
    mlp m;
    mlp_init(&m);
    float extra_v[3] = {1, 2, 3};
    tc_tensor *extra = tc_from_data(extra_v, TC_FLOAT32, 1, SHAPE(3), NULL);
    tc_tensor *params[5] = {m.p[0], m.p[1], m.p[2], m.p[3], extra};
    tc_optimizer *o = tc_sgd(params, 5, 0.1, 0.9);
    CHECK_T(o);
    assert_true(tc_requires_grad(extra)); /* the optimizer marks its parameters */
    assert_true(fabs(tc_optimizer_get_lr(o) - 0.1) < 1e-12);
    train_step(&m, o);
    float got[3];
    CHECK_OK(tc_to_host(extra, got, sizeof got));
    assert_memory_equal(got, extra_v, sizeof got);
    /* lr 0: nothing moves */
    CHECK_OK(tc_optimizer_set_lr(o, 0));
    assert_true(tc_optimizer_get_lr(o) == 0);
    float before[HID * IN], after[HID * IN];
    CHECK_OK(tc_to_host(m.p[0], before, sizeof before));
    train_step(&m, o);
    CHECK_OK(tc_to_host(m.p[0], after, sizeof after));
    assert_memory_equal(before, after, sizeof before);
    assert_int_equal(tc_optimizer_set_lr(o, -1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_optimizer_set_lr: lr must be finite and >= 0, got -1");
    tc_optimizer_free(o);
    tc_release(extra);
    mlp_free(&m);
}

static void test_errors(void **state) {
    (void)state;
    float v[2] = {1, 2};
    int32_t iv[2] = {1, 2};
    tc_tensor *a = tc_from_data(v, TC_FLOAT32, 1, SHAPE(2), NULL);
    tc_tensor *i = tc_from_data(iv, TC_INT32, 1, SHAPE(2), NULL);
    tc_tensor *ps[2] = {a, a};
    assert_null(tc_adam(NULL, 1, 1e-3, 0.9, 0.999, 1e-8));
    assert_tc_error(TC_ERR_INVALID, "tc_adam: params is NULL");
    assert_null(tc_adam(ps, 0, 1e-3, 0.9, 0.999, 1e-8));
    assert_tc_error(TC_ERR_INVALID, "tc_adam: got no parameters");
    assert_null(tc_adam(ps, 2, 1e-3, 0.9, 0.999, 1e-8));
    assert_tc_error(TC_ERR_INVALID, "tc_adam: params[1] is params[0] again");
    assert_null(tc_adam(ps, 1, 1e-3, 1.0, 0.999, 1e-8));
    assert_tc_error(TC_ERR_INVALID, "tc_adam: b1 must be in [0, 1), got 1");
    assert_null(tc_adamw(ps, 1, 1e-3, 0.9, 0.999, 1e-8, -0.1));
    assert_tc_error(TC_ERR_INVALID, "tc_adamw: weight_decay must be finite and >= 0, got -0.1");
    assert_null(tc_sgd(ps, 1, NAN, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_sgd: lr must be finite and >= 0, got nan");
    assert_null(tc_sgd_ex(ps, 1, 0.1, 0, 0, 0, true));
    assert_tc_error(TC_ERR_INVALID, "tc_sgd: nesterov needs a momentum > 0 and zero dampening");
    ps[1] = i;
    assert_null(tc_sgd(ps, 2, 0.1, 0));
    assert_tc_error(TC_ERR_DTYPE, "tc_sgd: params[1] is int32; parameters are float");
    ps[1] = NULL;
    assert_null(tc_sgd(ps, 2, 0.1, 0));
    assert_tc_error(TC_ERR_INVALID, "tc_sgd: params[1] is NULL");
    assert_int_equal(tc_optimizer_step(NULL), TC_ERR_INVALID);
    assert_int_equal(tc_optimizer_zero_grad(NULL), TC_ERR_INVALID);
    tc_optimizer_free(NULL);
    tc_optimizer *o = tc_sgd(ps, 1, 0.1, 0);
    CHECK_T(o);
    assert_int_equal(tc_optimizer_step_with(o, NULL, 1), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_optimizer_step: also is NULL");
    CHECK_OK(tc_optimizer_step(o)); /* no gradients yet: nothing to do */
    float got[2];
    CHECK_OK(tc_to_host(a, got, sizeof got));
    assert_memory_equal(got, v, sizeof v);
    tc_optimizer_free(o);
    tc_release(a);
    tc_release(i);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_adam),         TEST(test_sgd_momentum),        TEST(test_adamw),
        TEST(test_sgd_variants), TEST(test_unused_param_and_lr), TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
