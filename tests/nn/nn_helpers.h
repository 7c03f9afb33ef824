/* nn_helpers.h - helpers shared by the tests/nn executables: literal shapes,
 * the shutdown teardown, a scratch directory, writing IDX files (raw or
 * gzip with stored blocks, so the tests need no zlib) and reading tensors.
 * Uses only the public API (tinyc.h) and tests/common/tc_test.h. */
#ifndef TC_NN_HELPERS_H
#define TC_NN_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tc_test.h"

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* every test ends with tc_shutdown(): the leak checker then sees nothing */
static inline int shutdown_teardown(void **state) {
    (void)state;
    tc_shutdown();
    return 0;
}
#define TEST(fn) cmocka_unit_test_teardown(fn, shutdown_teardown)

/* fails the test with the library's message when t is NULL */
#define CHECK_T(t)                                                                     \
    do {                                                                               \
        if (!(t)) fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, tc_last_error()); \
        assert_non_null(t);                                                            \
    } while (0)
#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        tc_status s_ = (call);                                                                \
        if (s_ != TC_OK) fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, tc_last_error()); \
        assert_int_equal(s_, TC_OK);                                                          \
    } while (0)

/* a new scratch directory under $TMPDIR or /tmp (path written to dir) */
static inline void make_tmpdir(char *dir, size_t cap) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, cap, "%s/tc_nn_XXXXXX", base && *base ? base : "/tmp");
    assert_non_null(mkdtemp(dir));
}

/* dir/name in out */
static inline const char *join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
    return out;
}

/* removes the files named in names[0..n-1] under dir, then dir */
static inline void remove_tmpdir(const char *dir, const char *const *names, int n) {
    char p[1024];
    for (int i = 0; i < n; i++) remove(join(p, sizeof p, dir, names[i]));
    rmdir(dir);
}

static inline void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* the bytes of an IDX file: magic 0,0,type,ndim; sizes; body (already big-endian);
 * returns a malloc'ed buffer and its length in *len */
static inline unsigned char *idx_bytes(int type, int ndim, const uint32_t *dims, const void *body,
                                       size_t body_len, size_t *len) {
    *len = 4 + 4 * (size_t)ndim + body_len;
    unsigned char *b = malloc(*len);
    b[0] = 0, b[1] = 0, b[2] = (unsigned char)type, b[3] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) put_be32(b + 4 + 4 * i, dims[i]);
    if (body_len) memcpy(b + 4 + 4 * ndim, body, body_len);
    return b;
}

static inline uint32_t crc32_bytes(const unsigned char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* writes data to path; gzip (stored deflate blocks) when gz; the first
 * `cut` bytes only when cut > 0 (a truncated file) */
static inline void write_file(const char *path, const unsigned char *data, size_t n, bool gz,
                              size_t cut) {
    unsigned char *out = malloc(n + n / 65535 * 5 + 64);
    size_t len = 0;
    if (!gz) {
        memcpy(out, data, n);
        len = n;
    } else {
        static const unsigned char hdr[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
        memcpy(out, hdr, 10);
        len = 10;
        size_t off = 0;
        do {
            size_t blk = n - off > 65535 ? 65535 : n - off;
            out[len++] = off + blk == n; /* BFINAL, BTYPE 00 (stored) */
            out[len++] = (unsigned char)blk, out[len++] = (unsigned char)(blk >> 8);
            out[len++] = (unsigned char)~blk, out[len++] = (unsigned char)(~blk >> 8);
            memcpy(out + len, data + off, blk);
            len += blk, off += blk;
        } while (off < n);
        uint32_t crc = crc32_bytes(data, n), size = (uint32_t)n;
        for (int i = 0; i < 4; i++) out[len++] = (unsigned char)(crc >> (8 * i));
        for (int i = 0; i < 4; i++) out[len++] = (unsigned char)(size >> (8 * i));
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(out, 1, cut ? cut : len, f), cut ? cut : len);
    fclose(f);
    free(out);
}

/* writes a uint8 IDX file with the given dims and body */
static inline void write_idx_u8(const char *path, int ndim, const uint32_t *dims,
                                const uint8_t *body, size_t body_len, bool gz) {
    size_t len;
    unsigned char *b = idx_bytes(0x08, ndim, dims, body, body_len, &len);
    write_file(path, b, len, gz, 0);
    free(b);
}

#endif
