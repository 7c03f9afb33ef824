/* test_layers_tf.c - the transformer's layers, LayerNorm and Embedding:
 * PyTorch's initialisation (LayerNorm weight 1 and bias 0, Embedding
 * weight from N(0, 1), reproducible with tc_manual_seed), forward values
 * against plain C, gradients of the parameters (the embedding's as one
 * scatter-add kernel), the optional affine and bias, a save/load round
 * trip, and bad arguments. Public API only. */
#include <math.h>

#include "nn_helpers.h"

#define R 6
#define F 10

static float *values(tc_tensor *t) {
    CHECK_T(t);
    return tc_test_read(t);
}

/* the layer's tensor `name` takes the values v */
static void set(tc_layer *l, const char *name, const float *v, int64_t n) {
    tc_tensor *t = tc_layer_tensor(l, name), *src = tc_from_data(v, TC_FLOAT32, 1, &n, NULL);
    CHECK_T(t);
    CHECK_OK(tc_assign(t, src));
    CHECK_OK(tc_realize(&t, 1));
    tc_release(t), tc_release(src);
}

/* LayerNorm(F) on x (2, 3, F): weight 1 and bias 0 at first, then set */
static void test_layernorm(void **state) {
    (void)state;
    tc_layer *l = tc_nn_layernorm(F, 1e-5, true, true, NULL);
    CHECK_T(l);
    assert_int_equal(tc_layer_get_kind(l), TC_LAYER_LAYERNORM);
    assert_int_equal(tc_layer_parameters(l, NULL, 0), 2);
    tc_tensor *w = tc_layer_tensor(l, "weight"), *b = tc_layer_tensor(l, "bias");
    float *wv = values(w), *bv = values(b), wset[F], bset[F];
    for (int i = 0; i < F; i++) {
        assert_true(wv[i] == 1 && bv[i] == 0);
        wset[i] = (float)(0.5 + 0.1 * i), bset[i] = (float)(0.2 * i - 1);
    }
    set(l, "weight", wset, F), set(l, "bias", bset, F);
    tc_tensor *x = tc_test_randn(3, SHAPE(2, 3, F), 1, -2, 2);
    float *xv = values(x), want[R * F];
    for (int r = 0; r < R; r++) {
        double mean = 0, var = 0;
        for (int i = 0; i < F; i++) mean += xv[r * F + i] / (double)F;
        for (int i = 0; i < F; i++) var += pow(xv[r * F + i] - mean, 2) / F;
        for (int i = 0; i < F; i++)
            want[r * F + i] =
                (float)((xv[r * F + i] - mean) / sqrt(var + 1e-5) * wset[i] + bset[i]);
    }
    tc_tensor *y = tc_layer_forward(l, x);
    CHECK_T(y);
    float *yv = values(y);
    assert_true(tc_allclose_f32(yv, want, R * F, 1e-5, 1e-5, "LayerNorm forward"));
    /* d sum(y) / d bias = R per feature; d / d weight = sum over rows of x_hat */
    tc_tensor *s = tc_sum(y, 0, NULL, false);
    CHECK_OK(tc_backward(s));
    tc_tensor *gb = tc_grad(b), *gw = tc_grad(w);
    float *gbv = values(gb), *gwv = values(gw), gwant[F] = {0}, gbwant[F];
    for (int i = 0; i < F; i++) {
        gbwant[i] = R;
        for (int r = 0; r < R; r++) gwant[i] += (want[r * F + i] - bset[i]) / wset[i];
    }
    assert_true(tc_allclose_f32(gbv, gbwant, F, 1e-6, 1e-6, "d / d bias"));
    assert_true(tc_allclose_f32(gwv, gwant, F, 1e-4, 1e-5, "d / d weight"));
    /* without affine: no parameters, plain tc_layernorm; without bias: weight only */
    tc_layer *plain = tc_nn_layernorm(F, 1e-5, false, true, NULL),
             *nob = tc_nn_layernorm(F, 1e-5, true, false, NULL);
    assert_int_equal(tc_layer_parameters(plain, NULL, 0), 0);
    assert_int_equal(tc_layer_parameters(nob, NULL, 0), 1);
    tc_tensor *yp = tc_layer_forward(plain, x), *yr = tc_layernorm(x, -1, 1e-5);
    float *ypv = values(yp), *yrv = values(yr);
    assert_memory_equal(ypv, yrv, sizeof(float) * R * F);
    free(wv), free(bv), free(xv), free(yv), free(gbv), free(gwv), free(ypv), free(yrv);
    tc_release(w), tc_release(b), tc_release(x), tc_release(y), tc_release(s);
    tc_release(gb), tc_release(gw), tc_release(yp), tc_release(yr);
    tc_layer_free(l), tc_layer_free(plain), tc_layer_free(nob);
}

/* Embedding(200, 4): N(0, 1) weights, the same for the same seed; forward
 * picks rows; the gradient of sum(e * e) is one scatter-add kernel */
static void test_embedding(void **state) {
    (void)state;
    tc_manual_seed(3);
    tc_layer *l = tc_nn_embedding(200, 4, NULL);
    CHECK_T(l);
    assert_int_equal(tc_layer_get_kind(l), TC_LAYER_EMBEDDING);
    tc_tensor *w = tc_layer_tensor(l, "weight");
    assert_int_equal(tc_shape(w)[0], 200);
    assert_int_equal(tc_shape(w)[1], 4);
    float *wv = values(w);
    double mean = 0, var = 0;
    for (int i = 0; i < 800; i++) mean += wv[i] / 800.0;
    for (int i = 0; i < 800; i++) var += pow(wv[i] - mean, 2) / 800.0;
    assert_true(fabs(mean) < 0.15 && fabs(var - 1) < 0.2); /* N(0, 1) */
    tc_manual_seed(3);
    tc_layer *l2 = tc_nn_embedding(200, 4, NULL);
    tc_tensor *w2 = tc_layer_tensor(l2, "weight");
    float *w2v = values(w2);
    assert_memory_equal(wv, w2v, sizeof(float) * 800);
    int64_t ids[6] = {5, 0, 199, 5, 7, 0};
    tc_tensor *idx = tc_from_data(ids, TC_INT64, 2, SHAPE(2, 3), NULL),
              *e = tc_layer_forward(l, idx);
    CHECK_T(e);
    assert_int_equal(tc_ndim(e), 3);
    float *ev = values(e), want[24], gwant[800] = {0};
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++) {
            want[r * 4 + c] = wv[ids[r] * 4 + c];
            gwant[ids[r] * 4 + c] += 2 * want[r * 4 + c];
        }
    assert_memory_equal(ev, want, sizeof want);
    tc_tensor *sq = tc_mul(e, e), *s = tc_sum(sq, 0, NULL, false);
    CHECK_OK(tc_backward(s));
    tc_tensor *g = tc_grad(w);
    tc_check_schedule(g, 1, 1e-6, 1e-6, "d / d embedding weight");
    float *gv = values(g);
    assert_true(tc_allclose_f32(gv, gwant, 800, 1e-6, 1e-6, "scatter-add"));
    free(wv), free(w2v), free(ev), free(gv);
    tc_release(w), tc_release(w2), tc_release(idx), tc_release(e), tc_release(sq), tc_release(s);
    tc_release(g);
    tc_layer_free(l), tc_layer_free(l2);
}

/* both layers saved and loaded back into fresh ones */
static void test_save_load(void **state) {
    (void)state;
    char path[] = "/tmp/tinyc_layers_tf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    tc_layer *a[2] = {tc_nn_layernorm(F, 1e-5, true, true, NULL), tc_nn_embedding(9, F, NULL)};
    float wset[F];
    for (int i = 0; i < F; i++) wset[i] = (float)i;
    set(a[0], "weight", wset, F);
    CHECK_OK(tc_nn_save(path, a, 2));
    tc_layer *b[2] = {tc_nn_layernorm(F, 1e-5, true, true, NULL), tc_nn_embedding(9, F, NULL)};
    CHECK_OK(tc_nn_load(path, b, 2));
    for (int k = 0; k < 2; k++) {
        tc_tensor *wa = tc_layer_tensor(a[k], "weight"), *wb = tc_layer_tensor(b[k], "weight");
        float *va = values(wa), *vb = values(wb);
        assert_memory_equal(va, vb, sizeof(float) * (size_t)tc_numel(wa));
        free(va), free(vb);
        tc_release(wa), tc_release(wb);
        tc_layer_free(a[k]), tc_layer_free(b[k]);
    }
    unlink(path);
}

static void test_errors(void **state) {
    (void)state;
    assert_null(tc_nn_layernorm(0, 1e-5, true, true, NULL));
    assert_tc_error(TC_ERR_INVALID,
                    "tc_nn_layernorm: features 0, eps 1e-05 (want features > 0, eps > 0)");
    assert_null(tc_nn_layernorm(4, 0, true, true, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_nn_layernorm: features 4, eps 0");
    assert_null(tc_nn_embedding(10, -1, NULL));
    assert_tc_error(TC_ERR_INVALID,
                    "tc_nn_embedding: num_embeddings 10, embedding_dim -1 must be > 0");
    tc_layer *ln = tc_nn_layernorm(4, 1e-5, true, true, NULL), *em = tc_nn_embedding(10, 4, NULL);
    tc_tensor *x = tc_test_randn(2, SHAPE(2, 5), 2, -1, 1);
    assert_null(tc_layer_forward(ln, x));
    assert_tc_error(
        TC_ERR_SHAPE,
        "tc_layer_forward: LayerNorm(4, 4) expects x of shape (..., features), got (2,5)");
    assert_null(tc_layer_forward(em, x));
    assert_tc_error(TC_ERR_SHAPE,
                    "tc_layer_forward: Embedding(10, 4) expects x of shape (...) of integer ids");
    tc_release(x);
    tc_layer_free(ln), tc_layer_free(em);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_layernorm),
        TEST(test_embedding),
        TEST(test_save_load),
        TEST(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
