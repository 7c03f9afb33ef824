/* test_layers.c - nn layers (Linear, Conv2d, BatchNorm2d): PyTorch's default
 * initialisation (bounds, reproducibility with tc_manual_seed), shapes,
 * forward values against plain C, training and eval BatchNorm with its
 * running statistics, parameter and buffer lists; saving and loading with
 * safetensors (round trip, a file written by hand, and every mismatch as a
 * clear error that changes nothing). Public API only. */
#include <math.h>

#include "nn_helpers.h"

/* t's float32 values in a new malloc'ed array */
static float *values(tc_tensor *t) {
    CHECK_T(t);
    return tc_test_read(t);
}

static void test_linear_init_and_forward(void **state) {
    (void)state;
    tc_manual_seed(7);
    tc_layer *l = tc_nn_linear(50, 20, true, NULL);
    CHECK_T(l);
    assert_int_equal(tc_layer_get_kind(l), TC_LAYER_LINEAR);
    tc_tensor *w = tc_layer_tensor(l, "weight"), *b = tc_layer_tensor(l, "bias");
    CHECK_T(w);
    CHECK_T(b);
    assert_int_equal(tc_shape(w)[0], 20);
    assert_int_equal(tc_shape(w)[1], 50);
    assert_true(tc_requires_grad(w) && tc_requires_grad(b));
    float *wv = values(w), *bv = values(b);
    double bound = 1 / sqrt(50.0), lo = 1, hi = -1, mean = 0;
    for (int i = 0; i < 1000; i++) {
        assert_true(fabs(wv[i]) <= bound);
        lo = fmin(lo, wv[i]), hi = fmax(hi, wv[i]), mean += wv[i] / 1000;
    }
    assert_true(lo < -0.9 * bound && hi > 0.9 * bound && fabs(mean) < 0.02); /* uniform */
    for (int i = 0; i < 20; i++) assert_true(fabs(bv[i]) <= bound);
    /* the same seed gives the same layer */
    tc_manual_seed(7);
    tc_layer *l2 = tc_nn_linear(50, 20, true, NULL);
    tc_tensor *w2 = tc_layer_tensor(l2, "weight");
    float *w2v = values(w2);
    assert_memory_equal(wv, w2v, sizeof(float) * 1000);
    /* forward: x (3,50) -> (3,20) = x @ w^T + b */
    float x[150];
    for (int i = 0; i < 150; i++) x[i] = (float)sin(i * 0.37);
    tc_tensor *xt = tc_from_data(x, TC_FLOAT32, 2, SHAPE(3, 50), NULL);
    tc_tensor *y = tc_layer_forward(l, xt);
    CHECK_T(y);
    float *yv = values(y), want[60];
    for (int r = 0; r < 3; r++)
        for (int o = 0; o < 20; o++) {
            double acc = bv[o];
            for (int i = 0; i < 50; i++) acc += (double)x[r * 50 + i] * wv[o * 50 + i];
            want[r * 20 + o] = (float)acc;
        }
    assert_true(tc_allclose_f32(yv, want, 60, 1e-5, 1e-5, "linear forward"));
    /* no bias */
    tc_layer *nb = tc_nn_linear(4, 3, false, NULL);
    assert_null(tc_layer_tensor(nb, "bias"));
    assert_tc_error(TC_ERR_INVALID, "tc_layer_tensor: Linear(4, 3) has no tensor bias");
    assert_int_equal(tc_layer_parameters(nb, NULL, 0), 1);
    free(wv), free(bv), free(w2v), free(yv);
    tc_release(w), tc_release(b), tc_release(w2), tc_release(xt), tc_release(y);
    tc_layer_free(l), tc_layer_free(l2), tc_layer_free(nb);
}

static void test_conv2d(void **state) {
    (void)state;
    tc_layer *c = tc_nn_conv2d(3, 8, 5, 1, 2, true, NULL);
    CHECK_T(c);
    tc_tensor *w = tc_layer_tensor(c, "weight");
    assert_int_equal(tc_ndim(w), 4);
    assert_int_equal(tc_shape(w)[0], 8);
    assert_int_equal(tc_shape(w)[3], 5);
    float *wv = values(w);
    double bound = 1 / sqrt(3.0 * 25);
    for (int i = 0; i < 8 * 3 * 25; i++) assert_true(fabs(wv[i]) <= bound);
    tc_tensor *x = tc_ones(4, SHAPE(2, 3, 6, 7), TC_FLOAT32, NULL);
    tc_tensor *y = tc_layer_forward(c, x);
    CHECK_T(y);
    assert_int_equal(tc_shape(y)[0], 2);
    assert_int_equal(tc_shape(y)[1], 8);
    assert_int_equal(tc_shape(y)[2], 6);
    assert_int_equal(tc_shape(y)[3], 7);
    /* the centre output of channel 0 sees the whole kernel: sum(w[0]) + b[0] */
    float *yv = values(y), *bv = NULL;
    tc_tensor *b = tc_layer_tensor(c, "bias");
    bv = values(b);
    double want = bv[0];
    for (int i = 0; i < 75; i++) want += wv[i];
    assert_true(fabs(yv[3 * 7 + 3] - want) < 1e-5);
    /* wrong input */
    tc_tensor *bad = tc_ones(4, SHAPE(2, 4, 6, 7), TC_FLOAT32, NULL);
    assert_null(tc_layer_forward(c, bad));
    assert_tc_error(TC_ERR_SHAPE, "tc_layer_forward: Conv2d(3, 8) expects x of shape "
                                  "(N, in_channels, H, W), got (2,4,6,7)");
    assert_null(tc_nn_conv2d(3, 8, 0, 1, 0, true, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_nn_conv2d: bad geometry");
    free(wv), free(yv), free(bv);
    tc_release(w), tc_release(x), tc_release(y), tc_release(b), tc_release(bad);
    tc_layer_free(c);
}

static void test_batchnorm(void **state) {
    (void)state;
    tc_layer *bn = tc_nn_batchnorm2d(2, 1e-5, 0.1, NULL);
    CHECK_T(bn);
    tc_tensor *ps[4], *bufs[4];
    assert_int_equal(tc_layer_parameters(bn, ps, 4), 2);
    assert_int_equal(tc_layer_buffers(bn, bufs, 4), 2);
    float x[16]; /* (2,2,2,2): channel c of sample n holds 4 values */
    for (int i = 0; i < 16; i++) x[i] = (float)(i * i % 7) - 2.5f;
    tc_tensor *xt = tc_from_data(x, TC_FLOAT32, 4, SHAPE(2, 2, 2, 2), NULL);
    tc_tensor *y = tc_layer_forward(bn, xt);
    CHECK_T(y);
    CHECK_OK(tc_realize(bufs, 2)); /* the running statistics update */
    float *yv = values(y), *rm = values(bufs[0]), *rv = values(bufs[1]);
    for (int c = 0; c < 2; c++) {
        double mean = 0, var = 0;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 4; k++) mean += x[n * 8 + c * 4 + k] / 8.0;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 4; k++) var += pow(x[n * 8 + c * 4 + k] - mean, 2) / 8.0;
        for (int n = 0; n < 2; n++)
            for (int k = 0; k < 4; k++) {
                double want = (x[n * 8 + c * 4 + k] - mean) / sqrt(var + 1e-5);
                assert_true(fabs(yv[n * 8 + c * 4 + k] - want) < 1e-4);
            }
        assert_true(fabs(rm[c] - 0.1 * mean) < 1e-6);
        assert_true(fabs(rv[c] - (0.9 + 0.1 * var * 8 / 7)) < 1e-5); /* unbiased */
    }
    /* eval: the running statistics */
    CHECK_OK(tc_layer_set_training(bn, false));
    tc_tensor *ye = tc_layer_forward(bn, xt);
    float *yev = values(ye);
    for (int i = 0; i < 16; i++) {
        int c = (i / 4) % 2;
        double want = (x[i] - rm[c]) / sqrt(rv[c] + 1e-5);
        assert_true(fabs(yev[i] - want) < 1e-4);
    }
    free(yv), free(rm), free(rv), free(yev);
    tc_release(xt), tc_release(y), tc_release(ye);
    tc_layer_free(bn);
}

static void test_lists(void **state) {
    (void)state;
    tc_layer *ls[3] = {tc_nn_conv2d(1, 2, 3, 1, 0, true, NULL),
                       tc_nn_batchnorm2d(2, 1e-5, 0.1, NULL), tc_nn_linear(8, 3, true, NULL)};
    tc_tensor *ps[8], *bs[8];
    assert_int_equal(tc_nn_parameters(ls, 3, ps, 8), 6);
    assert_int_equal(tc_nn_buffers(ls, 3, bs, 8), 2);
    assert_int_equal(tc_nn_parameters(ls, 3, ps, 2), 6); /* counts past cap */
    assert_int_equal(tc_nn_parameters(ls, 3, NULL, 0), 6);
    assert_int_equal(tc_ndim(ps[0]), 4);
    assert_int_equal(tc_numel(ps[2]), 2); /* BN weight */
    assert_int_equal(tc_nn_parameters(ls, 3, NULL, 4), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_nn_parameters: out is NULL");
    tc_layer *with_null[2] = {ls[0], NULL};
    assert_int_equal(tc_nn_buffers(with_null, 2, bs, 8), -1);
    assert_tc_error(TC_ERR_INVALID, "tc_nn_buffers: layers[1] is NULL");
    assert_null(tc_layer_forward(NULL, ps[0]));
    assert_tc_error(TC_ERR_INVALID, "tc_layer_forward: layer is NULL");
    assert_null(tc_nn_linear(0, 3, true, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_nn_linear: features must be > 0, got in 0 out 3");
    assert_null(tc_nn_linear(2, 3, true, "NOSUCHDEVICE"));
    assert_tc_error(TC_ERR_DEVICE, "tc_nn_linear: ");
    assert_null(tc_nn_batchnorm2d(2, 0, 0.1, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_nn_batchnorm2d: channels 2, eps 0");
    for (int i = 0; i < 3; i++) tc_layer_free(ls[i]);
    tc_layer_free(NULL);
}

/* ---- saving and loading ------------------------------------------------------- */

static void test_safe_roundtrip(void **state) {
    (void)state;
    char dir[256], path[1024];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "t.safetensors");
    float f[6] = {1.5f, -2, 3, 4, 5, 6.25f};
    int32_t i32[3] = {-7, 8, 9};
    uint8_t u8[4] = {0, 1, 254, 255};
    int64_t i64 = -5000000000LL;
    tc_tensor *ts[4] = {tc_from_data(f, TC_FLOAT32, 2, SHAPE(2, 3), NULL),
                        tc_from_data(i32, TC_INT32, 1, SHAPE(3), NULL),
                        tc_from_data(u8, TC_UINT8, 3, SHAPE(2, 1, 2), NULL),
                        tc_from_data(&i64, TC_INT64, 0, NULL, NULL)};
    tc_tensor *lazy = tc_mul(ts[0], ts[0]); /* lazy tensors are realized first */
    const char *names[5] = {"a.weight", "odd \"name\"\n", "u8", "scalar", "lazy"};
    tc_tensor *all[5] = {ts[0], ts[1], ts[2], ts[3], lazy};
    CHECK_OK(tc_safe_save(path, names, all, 5));
    /* the file: 8-byte length, JSON padded to 8 */
    FILE *fp = fopen(path, "rb");
    unsigned char len8[8];
    assert_int_equal(fread(len8, 1, 8, fp), 8);
    uint64_t hl = 0;
    for (int k = 7; k >= 0; k--) hl = hl << 8 | len8[k];
    assert_int_equal(hl % 8, 0);
    char *hdr = calloc(1, hl + 1);
    assert_int_equal(fread(hdr, 1, hl, fp), hl);
    fclose(fp);
    assert_non_null(strstr(hdr, "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                                "\"data_offsets\":[0,24]}"));
    assert_non_null(strstr(hdr, "\"odd \\\"name\\\"\\u000a\":{\"dtype\":\"I32\""));
    assert_non_null(strstr(hdr, "\"scalar\":{\"dtype\":\"I64\",\"shape\":[]"));
    free(hdr);
    /* load into fresh tensors */
    tc_tensor *dst[5] = {
        tc_zeros(2, SHAPE(2, 3), TC_FLOAT32, NULL), tc_zeros(1, SHAPE(3), TC_INT32, NULL),
        tc_zeros(3, SHAPE(2, 1, 2), TC_UINT8, NULL), tc_zeros(0, NULL, TC_INT64, NULL),
        tc_zeros(2, SHAPE(2, 3), TC_FLOAT32, NULL)};
    CHECK_OK(tc_safe_load(path, names, dst, 5));
    float *g0 = tc_test_read(dst[0]), *g4 = tc_test_read(dst[4]);
    int32_t *g1 = tc_test_read(dst[1]);
    uint8_t *g2 = tc_test_read(dst[2]);
    int64_t *g3 = tc_test_read(dst[3]);
    assert_memory_equal(g0, f, sizeof f);
    assert_memory_equal(g1, i32, sizeof i32);
    assert_memory_equal(g2, u8, sizeof u8);
    assert_true(*g3 == i64);
    for (int k = 0; k < 6; k++) assert_true(g4[k] == f[k] * f[k]);
    free(g0), free(g1), free(g2), free(g3), free(g4);
    /* a subset by name is fine for tc_safe_load */
    CHECK_OK(tc_safe_load(path, &names[2], &dst[2], 1));
    /* into realized zeros (a realized constant is one element seen
     * everywhere: the target gets a buffer of its own; a second realized
     * zeros of the same shape stays zero) */
    tc_tensor *rz[2] = {tc_zeros(2, SHAPE(2, 3), TC_FLOAT32, NULL),
                        tc_zeros(2, SHAPE(2, 3), TC_FLOAT32, NULL)};
    CHECK_OK(tc_realize(rz, 2));
    CHECK_OK(tc_safe_load(path, names, rz, 1));
    float *r0 = tc_test_read(rz[0]), *r1 = tc_test_read(rz[1]);
    assert_memory_equal(r0, f, sizeof f);
    for (int k = 0; k < 6; k++) assert_true(r1[k] == 0);
    free(r0), free(r1);
    tc_release(rz[0]), tc_release(rz[1]);
    for (int k = 0; k < 5; k++) tc_release(dst[k]);
    for (int k = 0; k < 4; k++) tc_release(ts[k]);
    tc_release(lazy);
    remove_tmpdir(dir, (const char *[]){"t.safetensors"}, 1);
}

/* a file written by another tool: key order, spaces, __metadata__, escapes */
static void test_safe_foreign_file(void **state) {
    (void)state;
    char dir[256], path[1024];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "f.safetensors");
    const char *json = "{ \"__metadata__\" : {\"format\": \"pt\", \"n\": [1, {\"x\": -2.5e3}]},\n"
                       "  \"b\\u00e9\": {\"shape\": [2], \"data_offsets\": [8, 16], "
                       "\"dtype\": \"F32\"},\n  \"a\": {\"data_offsets\": [0, 8], "
                       "\"dtype\": \"I32\", \"shape\": [1, 2]}}";
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    unsigned char *buf = calloc(1, 8 + padded + 16);
    for (int k = 0; k < 8; k++) buf[k] = (unsigned char)((uint64_t)padded >> (8 * k));
    memset(buf + 8, ' ', padded);
    memcpy(buf + 8, json, jl);
    int32_t a[2] = {3, -4};
    float b[2] = {0.5f, 0.25f};
    memcpy(buf + 8 + padded, a, 8);
    memcpy(buf + 8 + padded + 8, b, 8);
    write_file(path, buf, 8 + padded + 16, false, 0);
    tc_tensor *ta = tc_zeros(2, SHAPE(1, 2), TC_INT32, NULL);
    tc_tensor *tb = tc_zeros(1, SHAPE(2), TC_FLOAT32, NULL);
    const char *names[2] = {"b\xc3\xa9", "a"}; /* "bé" in UTF-8 */
    tc_tensor *ts[2] = {tb, ta};
    CHECK_OK(tc_safe_load(path, names, ts, 2));
    int32_t *ga = tc_test_read(ta);
    float *gb = tc_test_read(tb);
    assert_memory_equal(ga, a, 8);
    assert_memory_equal(gb, b, 8);
    free(ga), free(gb);
    /* a broken header, then data that does not fit the offsets */
    unsigned char saved = buf[8 + 10];
    buf[8 + 10] = '!';
    write_file(path, buf, 8 + padded + 16, false, 0);
    assert_int_equal(tc_safe_load(path, names, ts, 2), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "is not a safetensors file");
    buf[8 + 10] = saved;
    write_file(path, buf, 8 + padded + 12, false, 0); /* 4 data bytes short */
    assert_int_equal(tc_safe_load(path, names, ts, 2), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "data_offsets [8,16]");
    write_file(path, buf, 5, false, 0);
    assert_int_equal(tc_safe_load(path, names, ts, 2), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "only 5 bytes");
    free(buf);
    tc_release(ta), tc_release(tb);
    remove_tmpdir(dir, (const char *[]){"f.safetensors"}, 1);
}

static void test_nn_save_load(void **state) {
    (void)state;
    char dir[256], path[1024], other[1024];
    make_tmpdir(dir, sizeof dir);
    join(path, sizeof path, dir, "model.safetensors");
    join(other, sizeof other, dir, "other.safetensors");
    tc_manual_seed(1);
    tc_layer *a[2] = {tc_nn_linear(4, 3, true, NULL), tc_nn_batchnorm2d(3, 1e-5, 0.1, NULL)};
    CHECK_OK(tc_nn_save(path, a, 2));
    tc_manual_seed(2);
    tc_layer *b[2] = {tc_nn_linear(4, 3, true, NULL), tc_nn_batchnorm2d(3, 1e-5, 0.1, NULL)};
    CHECK_OK(tc_nn_load(path, b, 2));
    tc_tensor *wa = tc_layer_tensor(a[0], "weight"), *wb = tc_layer_tensor(b[0], "weight");
    float *va = tc_test_read(wa), *vb = tc_test_read(wb);
    assert_memory_equal(va, vb, sizeof(float) * 12);
    assert_true(tc_requires_grad(wb)); /* still a parameter */
    free(vb);
    /* mismatches: each a clear error, and the target keeps its values */
    tc_layer *c[2] = {tc_nn_linear(4, 2, true, NULL), tc_nn_batchnorm2d(3, 1e-5, 0.1, NULL)};
    tc_tensor *wc = tc_layer_tensor(c[0], "weight");
    float *before = tc_test_read(wc);
    assert_int_equal(tc_nn_load(path, c, 2), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "tc_nn_load: 0.weight has shape (3,4) in");
    assert_non_null(strstr(tc_last_error(), "but the tensor (2,4)"));
    float *after = tc_test_read(wc);
    assert_memory_equal(before, after, sizeof(float) * 8);
    assert_int_equal(tc_nn_load(path, b, 1), TC_ERR_IO); /* the file has more */
    assert_tc_error(TC_ERR_IO, "has a tensor 1.weight that is not expected here");
    CHECK_OK(tc_nn_save(other, b, 1));
    assert_int_equal(tc_nn_load(other, b, 2), TC_ERR_IO); /* the file has less */
    assert_tc_error(TC_ERR_IO, "has no tensor 1.weight");
    assert_int_equal(tc_nn_load(join(other, sizeof other, dir, "missing"), b, 2), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "tc_nn_load: cannot open");
    tc_tensor *wrong = tc_zeros(2, SHAPE(3, 4), TC_INT32, NULL);
    const char *nm = "0.weight";
    assert_int_equal(tc_safe_load(path, &nm, &wrong, 1), TC_ERR_DTYPE);
    assert_tc_error(TC_ERR_DTYPE, "tc_safe_load: 0.weight is F32 in");
    assert_int_equal(tc_nn_save(NULL, b, 2), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_nn_save: path is NULL");
    const char *dup[2] = {"x", "x"};
    tc_tensor *two[2] = {wa, wb};
    assert_int_equal(tc_safe_save(path, dup, two, 2), TC_ERR_INVALID);
    assert_tc_error(TC_ERR_INVALID, "tc_safe_save: name x appears twice");
    free(va), free(before), free(after);
    tc_release(wa), tc_release(wb), tc_release(wc), tc_release(wrong);
    for (int k = 0; k < 2; k++) tc_layer_free(a[k]), tc_layer_free(b[k]), tc_layer_free(c[k]);
    remove_tmpdir(dir, (const char *[]){"model.safetensors", "other.safetensors"}, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_linear_init_and_forward),
        TEST(test_conv2d),
        TEST(test_batchnorm),
        TEST(test_lists),
        TEST(test_safe_roundtrip),
        TEST(test_safe_foreign_file),
        TEST(test_nn_save_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
