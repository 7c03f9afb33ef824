/* test_idx.c - the IDX reader and the MNIST loader: files the test writes
 * itself (raw and gzip, uint8/int32/float32/float64, truncated, wrong magic, extra
 * bytes, label/image mismatches), then the real Fashion-MNIST copy when the
 * machine has one. Public API only. */
#include "nn_helpers.h"

static uint8_t body12[12] = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};

static void check_u8(tc_tensor *t, const int64_t *shape, int ndim, const uint8_t *want, int64_t n) {
    CHECK_T(t);
    assert_int_equal(tc_get_dtype(t), TC_UINT8);
    assert_int_equal(tc_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) assert_int_equal(tc_shape(t)[i], shape[i]);
    uint8_t *got = tc_test_read(t);
    assert_memory_equal(got, want, (size_t)n);
    free(got);
    tc_release(t);
}

static void test_good_raw_and_gz(void **state) {
    (void)state;
    char dir[256], p[1024];
    make_tmpdir(dir, sizeof dir);
    const uint32_t dims[3] = {3, 2, 2};
    write_idx_u8(join(p, sizeof p, dir, "a"), 3, dims, body12, 12, false);
    check_u8(tc_idx_load(p, NULL), SHAPE(3, 2, 2), 3, body12, 12);
    write_idx_u8(join(p, sizeof p, dir, "a.gz"), 3, dims, body12, 12, true);
    check_u8(tc_idx_load(p, "CPU"), SHAPE(3, 2, 2), 3, body12, 12);
    /* a gzip file without .gz in its name is still recognised by its magic */
    write_idx_u8(join(p, sizeof p, dir, "b"), 1, (uint32_t[]){12}, body12, 12, true);
    check_u8(tc_idx_load(p, NULL), SHAPE(12), 1, body12, 12);
    /* a big gzip body spanning several stored blocks */
    enum { BIG = 200000 };
    uint8_t *big = malloc(BIG);
    for (int i = 0; i < BIG; i++) big[i] = (uint8_t)(i * 7);
    write_idx_u8(join(p, sizeof p, dir, "c"), 2, (uint32_t[]){400, 500}, big, BIG, true);
    check_u8(tc_idx_load(p, NULL), SHAPE(400, 500), 2, big, BIG);
    free(big);
    remove_tmpdir(dir, (const char *[]){"a", "a.gz", "b", "c"}, 4);
}

/* writes an IDX file of type code `type` and body to path (gzip'ed when gz),
 * loads it, and checks the tensor's dtype and host-order values */
static void load_check(const char *path, int type, int ndim, const uint32_t *dims,
                       const unsigned char *body, size_t body_len, bool gz, tc_dtype dt,
                       const void *want, size_t want_len) {
    size_t len;
    unsigned char *b = idx_bytes(type, ndim, dims, body, body_len, &len);
    write_file(path, b, len, gz, 0);
    free(b);
    tc_tensor *t = tc_idx_load(path, NULL);
    CHECK_T(t);
    assert_int_equal(tc_get_dtype(t), dt);
    void *got = tc_test_read(t);
    assert_memory_equal(got, want, want_len);
    free(got);
    tc_release(t);
}

static void test_int32_float32(void **state) {
    (void)state;
    char dir[256], p[1024];
    make_tmpdir(dir, sizeof dir);
    int32_t iv[3] = {-5, 70000, 2147483647};
    float fv[2] = {1.5f, -0.25f};
    unsigned char ib[12], fb[8];
    for (int i = 0; i < 3; i++) put_be32(ib + 4 * i, (uint32_t)iv[i]);
    for (int i = 0; i < 2; i++) {
        uint32_t u;
        memcpy(&u, &fv[i], 4);
        put_be32(fb + 4 * i, u);
    }
    load_check(join(p, sizeof p, dir, "i"), 0x0C, 1, (uint32_t[]){3}, ib, 12, true, TC_INT32, iv,
               sizeof iv);
    load_check(join(p, sizeof p, dir, "f"), 0x0D, 2, (uint32_t[]){1, 2}, fb, 8, false, TC_FLOAT32,
               fv, sizeof fv);
    /* int8 and big-endian int16 */
    int16_t hv[3] = {-32768, 258, 32767};
    int8_t cv[3] = {-128, 1, 127};
    unsigned char hb[6], cb[3] = {0x80, 0x01, 0x7f};
    for (int i = 0; i < 3; i++)
        hb[2 * i] = (unsigned char)((uint16_t)hv[i] >> 8), hb[2 * i + 1] = (unsigned char)hv[i];
    load_check(join(p, sizeof p, dir, "h"), 0x0B, 1, (uint32_t[]){3}, hb, 6, true, TC_INT16, hv,
               sizeof hv);
    load_check(join(p, sizeof p, dir, "c"), 0x09, 1, (uint32_t[]){3}, cb, 3, false, TC_INT8, cv,
               sizeof cv);
    /* big-endian float64 */
    double dv[2] = {-1.0 / 3.0, 1e300};
    unsigned char db[16];
    for (int i = 0; i < 2; i++) {
        uint64_t u;
        memcpy(&u, &dv[i], 8);
        put_be32(db + 8 * i, (uint32_t)(u >> 32));
        put_be32(db + 8 * i + 4, (uint32_t)u);
    }
    load_check(join(p, sizeof p, dir, "d"), 0x0E, 1, (uint32_t[]){2}, db, 16, true, TC_FLOAT64, dv,
               sizeof dv);
    remove_tmpdir(dir, (const char *[]){"i", "f", "h", "c", "d"}, 5);
}

/* each defective file: (raw and gz) tc_idx_load fails with TC_ERR_IO and `needle` */
static void expect_bad(const char *path, const unsigned char *bytes, size_t len, size_t cut,
                       const char *needle) {
    for (int gz = 0; gz < 2; gz++) {
        write_file(path, bytes, len, gz, 0);
        if (cut) { /* truncate the uncompressed content */
            write_file(path, bytes, cut, gz, 0);
        }
        assert_null(tc_idx_load(path, NULL));
        assert_tc_error(TC_ERR_IO, needle);
        assert_non_null(strstr(tc_last_error(), path));
    }
}

static void test_bad_files(void **state) {
    (void)state;
    char dir[256], p[1024];
    make_tmpdir(dir, sizeof dir);
    join(p, sizeof p, dir, "bad");
    assert_null(tc_idx_load(join(p, sizeof p, dir, "missing"), NULL));
    assert_tc_error(TC_ERR_IO, "tc_idx_load: cannot open");
    assert_non_null(strstr(tc_last_error(), "missing"));
    assert_null(tc_idx_load(NULL, NULL));
    assert_tc_error(TC_ERR_INVALID, "tc_idx_load: path is NULL");

    join(p, sizeof p, dir, "bad");
    size_t len;
    unsigned char *b = idx_bytes(0x08, 3, (uint32_t[]){3, 2, 2}, body12, 12, &len);
    expect_bad(p, b, len, len - 1,
               "truncated: shape (3,2,2) of uint8 needs 12 data bytes, "
               "the file has 11");
    expect_bad(p, b, len, 9, "truncated in its header");
    expect_bad(p, b, len, 3, "it has only 3 bytes");
    unsigned char *wrong = malloc(len + 1);
    memcpy(wrong, b, len);
    wrong[0] = 0x12;
    expect_bad(p, wrong, len, 0, "wrong magic 0x12000803");
    memcpy(wrong, b, len);
    wrong[2] = 0x0F; /* no such type */
    expect_bad(p, wrong, len, 0, "wrong magic 0x00000f03");
    memcpy(wrong, b, len);
    wrong[2] = 0x0A; /* no such type */
    expect_bad(p, wrong, len, 0, "wrong magic 0x00000a03");
    memcpy(wrong, b, len);
    wrong[len] = 7;
    expect_bad(p, wrong, len + 1, 0, "has bytes after the 12 data bytes of shape (3,2,2)");
    free(wrong);
    free(b);
    /* a header claiming 2^46 bytes over 12 bytes of data: the load reads what
     * is there and says so (it allocated what the header claimed: out of
     * memory, or 18.5 GB for a 44-byte file) */
    b = idx_bytes(0x08, 3, (uint32_t[]){1u << 16, 1u << 16, 1u << 14}, body12, 12, &len);
    expect_bad(p, b, len, 0,
               "truncated: shape (65536,65536,16384) of uint8 needs 70368744177664 data bytes, "
               "the file has 12");
    free(b);
    /* a gzip stream with a bad checksum */
    b = idx_bytes(0x08, 1, (uint32_t[]){12}, body12, 12, &len);
    write_file(p, b, len, true, 0);
    FILE *f = fopen(p, "r+b");
    fseek(f, -6, SEEK_END);
    fputc(0x55, f);
    fclose(f);
    assert_null(tc_idx_load(p, NULL));
    assert_tc_error(TC_ERR_IO, "tc_idx_load");
    free(b);
    remove_tmpdir(dir, (const char *[]){"bad"}, 1);
}

/* writes a small MNIST split: n images of 4x3 and n labels */
static void write_split(const char *dir, const char *images, const char *labels, uint32_t n_im,
                        uint32_t n_lb, uint8_t bad_label, bool gz) {
    char p[1024];
    uint8_t px[5 * 12], lb[6];
    for (int i = 0; i < 60; i++) px[i] = (uint8_t)(i * 3);
    for (int i = 0; i < 6; i++) lb[i] = (uint8_t)(i % 10);
    if (bad_label) lb[1] = bad_label;
    write_idx_u8(join(p, sizeof p, dir, images), 3, (uint32_t[]){n_im, 4, 3}, px, n_im * 12, gz);
    write_idx_u8(join(p, sizeof p, dir, labels), 1, (uint32_t[]){n_lb}, lb, n_lb, !gz);
}

static const char *const split_names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte.gz",
                                          "t10k-images.idx3-ubyte.gz", "t10k-labels.idx1-ubyte"};

static void test_mnist_dir(void **state) {
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    write_split(dir, split_names[0], split_names[1], 5, 5, 0, false);
    write_split(dir, split_names[2], split_names[3], 3, 3, 0, true);
    tc_mnist m;
    CHECK_OK(tc_mnist_load(dir, NULL, &m));
    assert_int_equal(tc_shape(m.train_images)[0], 5);
    assert_int_equal(tc_shape(m.train_images)[1], 4);
    assert_int_equal(tc_shape(m.train_images)[2], 3);
    assert_int_equal(tc_shape(m.train_labels)[0], 5);
    assert_int_equal(tc_shape(m.test_images)[0], 3);
    assert_int_equal(tc_get_dtype(m.test_labels), TC_UINT8);
    uint8_t *lb = tc_test_read(m.train_labels);
    for (int i = 0; i < 5; i++) assert_int_equal(lb[i], i);
    free(lb);
    tc_mnist_release(&m);
    assert_null(m.train_images);
    tc_mnist_release(&m); /* twice is fine */
    remove_tmpdir(dir, split_names, 4);
}

static void test_mnist_errors(void **state) {
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    tc_mnist m = {0};
    assert_int_equal(tc_mnist_load(dir, NULL, &m), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "tc_mnist_load: no train-images-idx3-ubyte in");
    assert_null(m.train_images);
    assert_int_equal(tc_mnist_load(NULL, NULL, &m), TC_ERR_INVALID);
    assert_int_equal(tc_mnist_load(dir, NULL, NULL), TC_ERR_INVALID);

    write_split(dir, split_names[0], split_names[1], 5, 5, 0, false);
    assert_int_equal(tc_mnist_load(dir, NULL, &m), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "no t10k-images-idx3-ubyte in");
    write_split(dir, split_names[2], split_names[3], 3, 2, 0, true);
    assert_int_equal(tc_mnist_load(dir, NULL, &m), TC_ERR_SHAPE);
    assert_tc_error(TC_ERR_SHAPE, "has 3 images but");
    assert_non_null(strstr(tc_last_error(), "has 2 labels"));
    write_split(dir, split_names[2], split_names[3], 3, 3, 12, true);
    assert_int_equal(tc_mnist_load(dir, NULL, &m), TC_ERR_IO);
    assert_tc_error(TC_ERR_IO, "label 12 at index 1 of");
    assert_null(m.train_images); /* untouched on failure */
    write_split(dir, split_names[2], split_names[3], 3, 3, 0, true);
    assert_int_equal(tc_mnist_load(dir, "NOSUCHDEVICE", &m), TC_ERR_DEVICE);
    remove_tmpdir(dir, split_names, 4);
}

static void test_fashion_mnist(void **state) {
    (void)state;
    const char *dir = "/usr/share/datasets/fashion-mnist";
    if (access(dir, R_OK) != 0) skip();
    tc_mnist m;
    CHECK_OK(tc_mnist_load(dir, NULL, &m));
    assert_int_equal(tc_shape(m.train_images)[0], 60000);
    assert_int_equal(tc_shape(m.train_images)[1], 28);
    assert_int_equal(tc_shape(m.train_images)[2], 28);
    assert_int_equal(tc_shape(m.train_labels)[0], 60000);
    assert_int_equal(tc_shape(m.test_images)[0], 10000);
    assert_int_equal(tc_shape(m.test_labels)[0], 10000);
    uint8_t *lb = tc_test_read(m.test_labels);
    int64_t counts[10] = {0};
    for (int i = 0; i < 10000; i++) counts[lb[i]]++;
    for (int c = 0; c < 10; c++) assert_int_equal(counts[c], 1000); /* balanced classes */
    free(lb);
    tc_mnist_release(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        TEST(test_good_raw_and_gz), TEST(test_int32_float32), TEST(test_bad_files),
        TEST(test_mnist_dir),       TEST(test_mnist_errors),  TEST(test_fashion_mnist),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
